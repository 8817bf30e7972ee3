"""The copy planner: every strided copy as loops around one micro-kernel.

A copy (`codegen.spec.CopySpec`) is first normalized (`canonicalize_copy`: size-1 dims
dropped, dims made to run forwards in the destination, ordered for writes, and fused where
they are contiguous in both source and destination), then planned:

- the micro-kernel (`kernel`), from the canonical dims: `b` is the destination's innermost
  dim (stride 1), `a` the source's unit-stride dim:
  `rows` (a == b: runs contiguous on both sides), `transpose` (a != b: tiles of a x b
  transposed in registers), `deinterleave` (the source holds K = 2 .. 8 lanes of dim a
  interleaved along b: NHWC -> NCHW with C = 3, space-to-depth, complex pairs; K > 4
  without masks or a cast, where `LANE_LOSSES` does not name it),
  `interleave` (the reverse: the destination's innermost dim is K lanes),
  `compress` (the source steps by K = 2 .. 4 along b, a strided slice), `reverse`
  (the source steps by -1 along b: a flip), `gather` (anything else: an element at a
  time), `fill` (a copy whose masks never hold: the fill's bits, nothing read),
  `permute` (the innermost dims a matrix of at most `PERMUTE_BYTES` contiguous on both
  sides, a batch of small transposes: each matrix permuted whole in a vector; in a copy
  larger than L2, up to `PERMUTE_TABLE_BYTES`, an element at a time through a table in
  L1: a slab of 3 x 47 x 13 reversed; there too, blocks of the innermost dims contiguous
  in the destination alone, each element gathered through the table, the outermost in
  tiles: destination rows of 3 x 3 transposes of 3-byte source runs); a masked
  copy keeps its masks (`CopyPlan.masks`, a coefficient per loop: each row is the fill,
  an interval copied, the fill);
- the blocking of the micro-kernel's dims (`Loop.step`: the tile), the order of every loop
  of the nest, the threads and whether stores stream, from a model of the memory traffic
  (`plan_cost`): cache lines read and written, lines touched twice because a tile's edge
  cuts them and the neighbour comes too late, runs that start over (not going on from a
  run a few streams back), pages, and cache-set conflicts of the rows a tile touches at
  once, for the host's caches (`host.host_caches`).

The plan is plain data: `CopyPlan` names its loops outermost first, each with its extent,
step and strides, so any target can render it (`codegen/c/plan.py` fills the C library's
argument block from it). `candidate_plans` returns the few best plans by the model, for
measured choice (`stridec.compile(graph, tune=...)`: `runtime/tune.py`).

The interface others build on (kept stable):

- the canonical problem: `codegen.spec.canonicalize_copy(spec)`, a `CopySpec` whose dims
  are as few as the copy allows; two copies with the same canonical problem get the same
  plans (the key for anything kept per shape class);
- `candidate_plans(spec, caches=None, limit=4) -> list[CopyPlan]`, best first by
  `plan_cost` (empty: the planner does not take the copy); `plan_copy(spec)`: the first;
- `CopyPlan`: `kernel` (one of `KERNELS`), `loops` (`Loop`: dim, extent, step,
  src_stride, dst_stride), `a_loop` / `b_loop`, `lanes` / `lane_stride`, `parallel`,
  `stream_bytes`, `chunk`, `prefetch`, `stage`, `a_side` / `b_side`, `cost`;
  `dataclasses.replace` makes a variant (another tile, thread count, streaming choice);
- turning a plan into a kernel's parameters: `codegen/c/plan.py`'s `plan_params(plan)`
  (the argument block, laid out by `lib/copy_abi.h`), `planned_call(spec, plan)` (the
  library class and block of a copy, the model's plan unless `plan` is given),
  `planned_calls(spec)` (the calls that run any copy: the gather where the model takes no
  plan, halves of a copy of more than `MAX_MASKS` masks); `ranked_plans` (the distinct
  candidates) and `choosing(chooser)` (who picks among them while lowering: measured
  choice).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from stridec.compiler.codegen.spec import (
    CopySpec,
    MaskBound,
    canonicalize_copy,
    copy_symbols,
    is_fill_only,
)
from stridec.compiler.host import Caches, host_caches
from stridec.ir.dtypes import DTYPES, bit_pattern

__all__ = ["KERNELS", "MAX_BLOCK_ROWS", "MAX_MASKS", "PERMUTE_BYTES", "PERMUTE_TABLE_BYTES",
           "PERMUTE_TABLE_ELEMENTS", "CopyPlan", "Loop",
           "PlanMask", "candidate_plans", "plan_copy", "plan_cost"]

KERNELS = ("rows", "transpose", "deinterleave", "interleave", "compress", "gather", "reverse",
           "fill", "permute")
# Masks of a copy the library takes at most (lib/copy_abi.h's STRIDEC_COPY_MAX_MASKS).
MAX_MASKS = 64
# The element types of the library's sizes, for runs moved as one element (`_wide_spec`).
WIDE_DTYPES = {2: "int16", 4: "int32", 8: "int64"}
# Lanes of the (de)interleave micro-kernels (lib/copy_lanes.h's LANES_MAX) and of compress.
MAX_LANES = 8
COMPRESS_LANES = 4
# (kernel, element bytes, K) of K > 4 lanes the tiled transpose moves faster than the lane
# kernel's chain of K - 1 permutes an output vector (docs/cpu.md, "The copy planner").
LANE_LOSSES = frozenset({("deinterleave", 4, 7), ("deinterleave", 4, 8)})
# The largest matrix of the permute micro-kernel, in bytes (lib/copy_abi.h's
# STRIDEC_COPY_MAX_PERMUTE).
PERMUTE_BYTES = 64
# The largest matrix it moves through its table, an element at a time (lib/copy_abi.h's
# STRIDEC_COPY_MAX_PERMUTE_TABLE and _ELEMENTS): a block in L1 beside its destination.
PERMUTE_TABLE_BYTES = 16384
PERMUTE_TABLE_ELEMENTS = 2048
# The largest source stride of a matrix the table takes (copy_plan.c's permute_table: its
# offsets are 32-bit).
TABLE_STRIDE = (2**31 - 1) // PERMUTE_TABLE_ELEMENTS
# A call moving fewer bytes (read and written) runs on the calling thread.
PARALLEL_BYTES = 1 << 18
# Threads a parallel plan may use at most (the run time's count decides below it).
MAX_THREADS = 256
# The most source rows a transpose block reads (its step along b).
MAX_BLOCK_ROWS = 1024
# A transpose's blocks: (bytes of each source row, source rows) the model chooses among
# (measured on the TTC permutations, docs/cpu.md).
TRANSPOSE_TILES = ((1024, 256), (512, 256), (1024, 128))
# The a tiles of a transpose of bytes built as words (`_byte_words`) are this many times
# longer: NCHW16 and NCHW32 packs of 3-4 int8 channels took 4-7 % longer in blocks of 1024
# rows than of 16384 (docs/cpu.md, "Every copy on the library").
BYTE_WORDS_TILE = 16
# The most destination elements a row of a streamed transpose builds in L1 before it
# streams them (lib/copy_plan.c, STRIP_BYTES over its TV rows).
STRIP_ELEMENTS = 512
# Rows shorter than `LONG_RUN_BYTES` are also planned in blocks of several runs along a
# second dim (`_blocked_rows`), of about ROWS_BLOCK_BYTES; rows longer than
# ROWS_SHORT_BYTES apart in the source, in groups (`_grouped_rows`).
ROWS_SHORT_BYTES = 4096
ROWS_BLOCK_BYTES = (2048, 8192)
# A block of runs shorter than a line along two dims (`_blocked_rows`) holds at most this
# many bytes; one of longer runs, twice L1.
ROWS_PAIR_BYTES = 256 << 10
# A rows block that reads its source as this many streams of short runs or fewer, each
# going on in the next block, is not prefetched in software (`_source_followed`).
FOLLOWED_STREAMS = 4
# Longer plain runs are grouped (`_grouped_rows`): blocks of about this many bytes, their
# runs streamed ROW_GROUP at a time (lib/copy_plan.c).
ROWS_GROUP_BLOCK_BYTES = 65536
ROW_GROUP = 4
# A streamed transpose block whose destination rows are runs of this many bytes or more
# streams even where they start or end inside a line: those lines are few (docs/cpu.md);
# rows this long are not blocked: a block of them restarts a stream a run.
LONG_RUN_BYTES = 2048
# Where the CPU streams partial lines well (`Caches.partial_streams`), a transpose block
# streams rows of this many bytes or more (rows of 106 bytes streamed took 1.33x as long,
# of 296-656 bytes 0.34-0.46x) -- but not where a block's source rows are a line or
# shorter (skinny matrices: 23-31 columns of float16 and int8 took 0.64-0.83x as long not
# streamed, docs/cpu.md).
PARTIAL_STREAM_BYTES = 128
# A transpose block of elements of 2 bytes or more that is one run on one side (its
# source or its destination rows follow on), one of whose sides is shorter than this many
# bytes, writes through the cache: a streamed one went through a buffer in L1 for less
# than that saved (TTC's (2,0,4,1,5,3) and (1,3,0,4,2) blocks of 26-74 rows: 1.05-1.56x as
# long streamed on a Cascade Lake VM; bytes' blocks 0.62-0.76x as long, docs/cpu.md).
THIN_JOINED_BYTES = 320
# Blocks of a gathered matrix's outermost dim besides the most its table takes.
GATHER_TILES = (8, 32)


@dataclass(frozen=True, slots=True)
class PlanMask:
    """A mask of a plan: the element at loop indices i (and lane k of a lane kernel) is
    copied where `lo <= lane * k + sum(coeffs[l] * i[l]) < hi` holds for every mask, one
    coefficient per loop of the nest (`CopyPlan.loops`); `sides`: a transpose's, one per
    dim of its a side and then of its b side (a side loop's coefficient is its first
    dim's; a side of several dims is valued by its digits)."""

    lo: int
    hi: int
    lane: int
    coeffs: tuple[int, ...]
    sides: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Loop:
    """One loop of the nest: canonical dim `dim` from 0 to `extent` by `step` (a block of
    the micro-kernel's dim, or 1), `src_stride` and `dst_stride` elements an index."""

    dim: int
    extent: int
    step: int
    src_stride: int
    dst_stride: int

    @property
    def count(self) -> int:
        return -(-self.extent // self.step)


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """A copy as loops around a micro-kernel (module docstring). `loops` run outermost
    first; `a_loop` and `b_loop` index the micro-kernel's dims in it (-1: none; a rows
    plan's `a_loop`: the loop along which a block holds several runs, and `c_loop` a
    second such loop, `_blocked_rows`; a permute plan's `c_loop`: its matrix's outermost
    dim in tiles, among the outer loops, `_matrix_plans`);
    `lanes` / `lane_stride`: K and the lanes' stride on their other side for the
    (de)interleaves and compress; `parallel`: the most threads it may run on;
    `stream_bytes`: bytes it writes (a cast: the mean of those it reads and writes), which
    decide at run time whether its stores stream (-1: never); `stage`: a transpose
    block's source rows go through a buffer in L2;
    `a_side` / `b_side`: a transpose's sides, (extent, stride on the other side) of each of
    their dims, innermost first (the a loop walks the source-contiguous a side, the b loop
    the destination-contiguous b side); `cost`: the model's estimate in bytes moved
    (`plan_cost`); `cast`: (source dtype, destination dtype) of a cast, whose micro-kernel
    reads `elem_bytes`-byte elements and converts them as it stores (empty: a copy, bits
    moved as they are)."""

    kernel: str
    elem_bytes: int
    loops: tuple[Loop, ...]
    src_offset: int
    dst_offset: int
    a_loop: int = -1
    b_loop: int = -1
    lanes: int = 0
    lane_stride: int = 0
    parallel: int = MAX_THREADS
    stream_bytes: int = 0
    chunk: int = 0
    prefetch: bool = False
    stage: bool = False
    a_side: tuple[tuple[int, int], ...] = ()
    b_side: tuple[tuple[int, int], ...] = ()
    masks: tuple[PlanMask, ...] = ()
    fill_bits: int | None = None
    cost: float = 0.0
    cast: tuple[str, str] = ()
    c_loop: int = -1

    @property
    def dst_bytes(self) -> int:
        """Bytes of a destination element (`elem_bytes` but for a cast)."""
        return DTYPES[self.cast[1]].itemsize if self.cast else self.elem_bytes

    @property
    def numel(self) -> int:
        n = 1
        for loop in self.loops:
            n *= loop.extent
        return n * (self.lanes if self.kernel in ("deinterleave", "interleave") else 1)

    def describe(self) -> str:
        """One line a loop, outermost first, then the kernel: what `plan.kernels` shows."""
        lines = []
        for k, loop in enumerate(self.loops):
            role = (" (a)" if k == self.a_loop else " (b)" if k == self.b_loop
                    else " (c)" if k == self.c_loop else "")
            lines.append(f"loop d{loop.dim}{role}: 0..{loop.extent} step {loop.step}, "
                         f"src stride {loop.src_stride}, dst stride {loop.dst_stride}")
        lanes = f", {self.lanes} lanes {self.lane_stride} apart" if self.lanes else ""
        for m in self.masks:
            lines.append(f"mask {m.lo} <= {m.lane}*k + {list(m.coeffs)}.i < {m.hi}")
        if self.fill_bits is not None:
            lanes += f", fill bits {self.fill_bits:#x}"
        sides = (f", sides a {list(self.a_side)} b {list(self.b_side)}"
                 f"{', staged' if self.stage else ''}" if self.kernel == "transpose" else "")
        what = (f"{self.cast[0]} to {self.cast[1]}" if self.cast
                else f"{self.elem_bytes}-byte elements")
        lines.append(f"{self.kernel}{lanes}{sides}, {what}, "
                     f"model {self.cost / 1e6:.3g} MB")
        return "\n".join(lines)


def _with(plan: CopyPlan, **changes) -> CopyPlan:
    return dataclasses.replace(plan, **changes)


# --------------------------------------------------------------------------- the kernel


def _unit_dim(canon: CopySpec, skip: int) -> int | None:
    """The source's unit-stride dim other than `skip` (the largest if several), or None."""
    dims = [k for k in range(canon.rank) if k != skip and canon.src_strides[k] == 1]
    return max(dims, key=lambda k: (canon.sizes[k], k)) if dims else None


def _lanes_take(canon: CopySpec, kernel: str, k: int) -> bool:
    """Whether the lane kernel `kernel` takes `k` lanes of `canon`: 2 .. 4 always; 5 ..
    `MAX_LANES` without masks or a cast (a cast's library has 4) where it was measured
    faster than the transpose (`LANE_LOSSES`)."""
    if not 2 <= k <= MAX_LANES:
        return False
    return k <= 4 or (not canon.masks and canon.src_dtype == canon.dst_dtype
                      and (kernel, canon.src_dtype.itemsize, k) not in LANE_LOSSES)


def _kernel(canon: CopySpec) -> tuple[str, int | None, int | None]:
    """(kernel, a, b) of a canonical copy with at least one dim: `b` its last dim."""
    b = canon.rank - 1
    sb, db, nb = canon.src_strides[b], canon.dst_strides[b], canon.sizes[b]
    if db != 1:
        return "gather", None, b
    if sb == 1:
        return "rows", None, b
    if sb == -1:  # a flip: runs read backwards
        return "reverse", None, b
    lanes = [k for k in range(canon.rank - 1)
             if canon.sizes[k] == sb and canon.src_strides[k] == 1]
    split = bool(lanes) and _lanes_take(canon, "deinterleave", sb)
    # The destination's innermost dim is K lanes; K > 4 of them only where the copy is no
    # deinterleave (a few pixels of a few lanes are both: the kernel of K <= 4 as before).
    if _lanes_take(canon, "interleave", nb) and (nb <= 4 or not split):
        a = _unit_dim(canon, b)
        if a is not None and canon.dst_strides[a] == nb:
            return "interleave", a, b
    if 2 <= sb <= MAX_LANES:
        if split:
            return "deinterleave", lanes[-1], b
        if sb <= COMPRESS_LANES:
            return "compress", None, b
    a = _unit_dim(canon, b)
    if a is not None:
        return "transpose", a, b
    return "gather", None, b


# --------------------------------------------------------------------------- the model


# The model's prices, in bytes of memory traffic they cost as much time as (single thread,
# calibrated on the TTC permutations, docs/cpu.md): a run that starts where no run of the
# block before left off (the prefetchers start over), a page touched again after it left the
# TLB, a block's fixed work, a vector of the micro-kernel.
RESTART_BYTES = 160
PAGE_BYTES = 512
BLOCK_BYTES = 96
# A transpose block's own fixed work: its rows' and sides' offsets, the next block's
# prefetch, a register tile's edges (blocks of 3 x 5 elements took 50-90 ns each; 1024
# would move a TTC row to blocks 8 % slower, docs/cpu.md).
TRANSPOSE_BLOCK_BYTES = 384
# A matrix of the permute kernel: its loop's step and the vector's load, permute and store.
PERMUTE_BLOCK_BYTES = 16
# An element of a matrix moved through the table: its entry's load, the element's, the store
# (calibrated on ten random rows that plan a table permute: docs/cpu.md, "The copy planner").
PERMUTE_TABLE_ELEMENT_BYTES = 3.5
# The same where the CPU gathers them a vector at a time (`Caches.gathers`: 16 words of 4
# bytes, elements of 1 and 2 bytes their low bytes), set on transposes of 5 to 100 rows of
# float32 and float64 (docs/cpu.md).
PERMUTE_GATHER_ELEMENT_BYTES = 1.0
# The same where its gathers are slow (`Caches.slow_gathers`), on a Cascade Lake VM: 3
# re-planned 11 rows of the TTC suite and five random seeds, nine to 0.40-0.91 of their
# time, two to 1.28 and 1.61; 4 re-plans 11 more of the TTC suite and 30 seeds, ten to
# 0.76-0.98 of their time at 3, one to 1.17 (docs/cpu.md).
PERMUTE_SLOW_GATHER_ELEMENT_BYTES = 4.0
# The same where it gathers a lane a cycle (`Caches.lane_gathers`), on a Zen 5 VM: 2
# re-planned 13 rows of the TTC, models and three random seeds to 0.68 of their time in
# all (0.24-0.66 for six, 1.11 the worst), 1.5 to 0.87, 2.5 and 3 to 0.66 with rows of
# bytes 1.1-1.4x as long (docs/cpu.md).
PERMUTE_LANE_GATHER_ELEMENT_BYTES = 2.0
VECTOR_BYTES = 4
# A rows block's runs shorter than TINY_RUN_BYTES: each run's copy (a load, a store and
# their branches) and each part's call along its c loop weigh more than their bytes, and
# their lines are what a later block goes on with (`_side_cost`). In L2 a 19-byte run took
# 3.6 ns and a part 12 ns more; the prices are lower, as the memory in those times is
# priced apart: at 200 a part, blocks of two dims that measured 1.7x faster lost (docs/cpu.md).
TINY_RUN_BYTES = 32
TINY_RUN_COST_BYTES = 40
# A rows block whose destination is one run moves its runs shorter than this a word each,
# over all its parts (lib/copy_plan.c, `rows_words`).
WORD_RUN_BYTES = 32
ROWS_PART_BYTES = 50
# Tiny runs moved a word each into a destination they follow on in (`_runs_as_words`):
# 0.6 ns a run in L2 against 3.6 copied one by one (121 x 409 pixels of 6 bytes); priced
# above that share of TINY_RUN_COST_BYTES, as at 8 pixels of float32 that gather faster
# through the permute's table went to words (docs/cpu.md).
WORD_RUN_COST_BYTES = 16
# Runs of a rows block that follow on in the destination go a word each where shorter than
# SMALL_RUN_BYTES and the block's runs make SEGMENT_BYTES or more (lib/copy_plan.c).
SMALL_RUN_BYTES = 64
SEGMENT_BYTES = 256
# The lanes of the transpose's register tile by element size (lib/copy_micro.h's TV).
TILE_LANES = {1: 16, 2: 16, 4: 8, 8: 4}
# A cache line: transpose rows shorter than this that follow on are priced as one run.
LINE_BYTES = 64
# Source rows shorter than this that follow on along an outer dim of the b side are priced
# as one run; longer ones gain little and were measured slower as larger blocks.
JOINED_ROW_BYTES = 256
PAGE = 4096
# Streams (runs read or written in turn) the prefetchers follow at once: a run that goes on
# where it left off a few blocks before, with no more runs than this in between on both
# sides, does not start over.
STREAMS = 32
# Runs a rows block writes through the cache at once whose reads for ownership still
# follow on: (S, 16, 64) float32 rows from (16, S, 64), blocks of 8 runs along S, took half
# the time of blocks of 32, 20-24 runs 1.1-1.4x as long as 8 (docs/cpu.md).
CACHED_STORE_STREAMS = 16


def _kept(used: float, capacity: float) -> float:
    """The share of what a cache (or TLB) of `capacity` still holds after `used` more was
    brought in: all of it up to its capacity, none from twice that (its ways and
    replacement are not modelled)."""
    return min(1.0, max(0.0, 2.0 - used / capacity))


@dataclass(frozen=True, slots=True)
class _Side:
    """One side of a block: `runs` contiguous runs of `run` elements each, `spacing`
    elements apart; `moves[l]`: how far (elements) loop l moves them; `streams`: how
    many streams the prefetchers see them as, where fewer than the runs (a rows block's
    runs less than a line apart are one: `_rows_side`), else 0."""

    runs: float
    run: int
    spacing: int
    moves: tuple[int, ...]
    streams: float = 0.0


def _streams(side: _Side) -> float:
    return side.streams or side.runs


def _sides_of(plan: CopyPlan, join: bool = True) -> tuple[_Side, _Side]:
    loops = plan.loops
    ea = loops[plan.a_loop].step if plan.a_loop >= 0 else 1
    eb = loops[plan.b_loop].step if plan.b_loop >= 0 else 1
    src_moves, dst_moves = [], []
    for k, loop in enumerate(loops):
        s, d = loop.src_stride, loop.dst_stride
        if plan.kernel == "transpose" and k == plan.a_loop:
            d = plan.a_side[0][1] if plan.a_side else d
        if plan.kernel == "transpose" and k == plan.b_loop:
            s = plan.b_side[0][1] if plan.b_side else s
        src_moves.append(loop.step * s)
        dst_moves.append(loop.step * d)
    kernel, lanes = plan.kernel, max(plan.lanes, 1)
    ssb = loops[plan.b_loop].src_stride if plan.b_loop >= 0 else 1
    if kernel == "transpose":
        size = plan.elem_bytes
        # source rows of a few lines join along an outer dim of the b side only (rows of
        # 120 bytes 72 KB apart whose neighbours 5 rows on follow on)
        short_a = join and ea == loops[plan.a_loop].extent and (
            ea * size < LINE_BYTES
            or ea * size < JOINED_ROW_BYTES and plan.b_side[0][1] != ea)
        # destination rows of a line or more join along an outer dim of the a side only
        # (rows 271 KB apart, each 132 bytes, whose neighbours 15 rows on follow on)
        short_b = join and eb == loops[plan.b_loop].extent and (
            eb * plan.dst_bytes < LINE_BYTES or plan.a_side[0][1] != eb)
        return (_joined(eb, ea, plan.b_side, short_a, tuple(src_moves)),
                _joined(ea, eb, plan.a_side, short_b, tuple(dst_moves)))
    if kernel == "deinterleave":
        short = eb == loops[plan.b_loop].extent and eb * plan.dst_bytes < LINE_BYTES
        return (_Side(1, lanes * eb, 0, tuple(src_moves)),
                _joined(lanes, eb, ((lanes, plan.lane_stride),), short, tuple(dst_moves)))
    if kernel == "interleave":
        short = ea == loops[plan.a_loop].extent and ea * plan.elem_bytes < LINE_BYTES
        return (_joined(lanes, ea, ((lanes, plan.lane_stride),), short, tuple(src_moves)),
                _Side(1, lanes * ea, 0, tuple(dst_moves)))
    if kernel == "compress":
        return (_Side(1, lanes * (eb - 1) + 1, 0, tuple(src_moves)),
                _Side(1, eb, 0, tuple(dst_moves)))
    if kernel == "rows":
        if plan.a_loop < 0:
            return _Side(1, eb, 0, tuple(src_moves)), _Side(1, eb, 0, tuple(dst_moves))
        # a block's mean runs along each loop: the last block holds what is left
        block = [loops[k] for k in (plan.a_loop, plan.c_loop) if k >= 0]
        return (_rows_side([(lp.extent / lp.count, lp.src_stride) for lp in block], eb,
                           src_moves, plan.elem_bytes),
                _rows_side([(lp.extent / lp.count, lp.dst_stride) for lp in block], eb,
                           dst_moves, plan.dst_bytes))
    if kernel == "permute":  # a matrix contiguous on the destination
        block = _matrix_loops(plan)
        matrix = math.prod(loop.step for loop in block)
        return (_gathered_side([(loop.step, loop.src_stride) for loop in block],
                               plan.elem_bytes, src_moves),
                _Side(1, matrix, 0, tuple(dst_moves)))
    if kernel == "fill":  # nothing is read
        return (_Side(0, 0, 0, tuple(0 for _ in src_moves)),
                _Side(1, eb, 0, tuple(dst_moves)))
    if kernel == "reverse":  # rows whose source runs backwards: the source side mirrored
        return (_Side(1, eb, 0, tuple(-m for m in src_moves)),
                _Side(1, eb, 0, tuple(dst_moves)))
    return (_Side(eb, 1, ssb, tuple(src_moves)),
            _Side(eb, 1, loops[plan.b_loop].dst_stride if plan.b_loop >= 0 else 1,
                  tuple(dst_moves)))


def _joined(rows: int, run: int, dims: tuple[tuple[int, int], ...], short: bool,
            moves: tuple[int, ...]) -> _Side:
    """A transpose block's side: `rows` rows of `run` elements, the rows the first indices
    of a side's `dims` (extent, stride), innermost first. Where each row is the whole run
    on its side and shorter than a line (`short`), rows along a dim whose stride is the
    run so far follow on: one longer run (rows of 9 along a dim of 147 at stride 9 are
    runs of 1323). Rows of a line or longer are priced as rows, as they were calibrated
    (docs/cpu.md), but destination rows that follow on along an outer dim of the a side
    only (`_sides_of`)."""
    spacing = dims[0][1] if dims else 1
    if not short:
        return _Side(rows, run, spacing, moves)
    spans, left = [], float(rows)  # (indices the block's rows span, stride) of each dim
    for n, stride in dims:
        if left <= 1:
            break
        spans.append((min(float(n), left), stride))
        left /= n
    count, length = float(rows), float(run)
    while True:
        k = next((k for k, (_, stride) in enumerate(spans) if stride == length), None)
        if k is None:
            break
        span, _ = spans.pop(k)
        count, length = count / span, length * span
        spacing = spans[0][1] if spans else int(length)
    return _Side(max(1, round(count)), max(1, round(length)), spacing, moves)


def _rows_side(dims: list[tuple[float, int]], run: int, moves: Sequence[int],
               size: int) -> _Side:
    """A side of a rows block of runs of `run` elements along `dims` (mean runs, stride on
    this side) of `size` bytes: a dim whose stride is the run so far lengthens it, the
    others multiply the runs. The runs along a dim whose gaps between them are shorter
    than a line are one stream: the block reads every line they span in order (runs of
    30 bytes 90 apart, 273 of them, are one stream the prefetchers follow)."""
    dims, runs, length = list(dims), 1.0, run
    while (k := next((k for k, (_, s) in enumerate(dims) if s == length), None)) is not None:
        length = round(length * dims.pop(k)[0])
    streams = 1.0
    for n, s in dims:
        runs *= n
        if not 0 < (abs(s) - length) * size < LINE_BYTES:
            streams *= n
    spacing = min((abs(s) for _, s in dims), default=0)
    return _Side(runs, length, spacing, tuple(moves), streams if streams < runs else 0.0)


def _gathered_side(dims: list[tuple[int, int]], size: int, moves: Sequence[int]) -> _Side:
    """The source side of a permute block of `dims` (extent, source stride): runs as a
    rows block's, but a dim whose elements lie less than a line apart lengthens the run
    by its elements (a stride of 3 reads a third of each line of the run it strides over:
    the neighbouring blocks read the rest, the lines still in L1)."""
    runs, length = 1.0, 1
    spacing = 0
    for n, stride in sorted(dims, key=lambda d: abs(d[1])):
        if n == 1:
            continue
        if abs(stride) == length or abs(stride) * size < LINE_BYTES:
            length *= n
        else:
            runs *= n
            spacing = spacing or abs(stride)
    return _Side(runs, length, spacing, tuple(moves))


def _pages(side: _Side, size: int) -> float:
    """Pages a block's runs on `side` touch: each run its own, unless the runs lie closer
    together than a page."""
    run_bytes = side.run * size
    if side.runs > 1 and abs(side.spacing) * size < PAGE:
        return (side.runs * abs(side.spacing) * size + run_bytes) / PAGE + 1
    return side.runs * (run_bytes / PAGE + 1)


def _footprint(side: _Side, moves: Sequence[int], counts: Sequence[int],
               size: int) -> tuple[float, float, float, float]:
    """(pages, bytes, runs, bytes of the lines) the loops of `moves` and `counts`
    (innermost last) touch on `side` around one block: a loop that moves the runs one run
    on lengthens them, any other that moves them adds as many runs again."""
    runs, run = float(side.runs), side.run
    for move, count in zip(reversed(moves), reversed(counts), strict=True):
        if count == 1 or move == 0:
            continue
        if move == run:
            run *= count
        else:
            runs *= count
    wide = _Side(int(runs), run, side.spacing if runs == side.runs else PAGE, ())
    return _pages(wide, size), runs * run * size, runs, runs * (run * size + LINE_BYTES)


def _side_cost(side: _Side, other: _Side, plan: CopyPlan, counts: Sequence[int],
               caches: Caches, write: bool) -> float:
    """The model's bytes for one side of every block of `plan` (see `plan_cost`)."""
    size, line = plan.dst_bytes if write else plan.elem_bytes, caches.line
    blocks = math.prod(counts)
    run_bytes = side.run * size
    # A transpose's rows that start or end inside a line, streamed (`Caches.partial_streams`),
    # are priced as written through the cache: priced streamed, plans of whole lines lost
    # to them on the TTC, up to 2.25x as slow.
    streamed = (_stores_stream(plan, caches)
                and (plan.kernel != "transpose" or _streams_whole_lines(plan, caches)))
    # The loop along which the runs go on (its move is one run), and what both sides
    # touch between a block and that neighbour (the loops inside it).
    cont = [j for j, move in enumerate(side.moves) if move == side.run and counts[j] > 1]
    between = math.prod(counts[cont[-1] + 1:]) if cont else None
    pages_between = bytes_between = streams_between = lines_between = math.inf
    if cont:
        inside = slice(cont[-1] + 1, None)
        p1, b1, r1, l1 = _footprint(side, side.moves[inside], counts[inside], size)
        p2, b2, r2, l2 = _footprint(other, other.moves[inside], counts[inside],
                                    plan.elem_bytes if write else plan.dst_bytes)
        pages_between, bytes_between, streams_between = p1 + p2, b1 + b2, r1 + r2
        lines_between = l1 + l2
    # Lines: a run of R bytes at a random alignment touches (line - size)/line lines more
    # than R/line; the neighbour along the runs finishes those edge lines if it comes
    # while they are still in L2.
    edge = (line - size) / line * (1 - _kept(bytes_between, caches.l2 // 2))
    traffic = blocks * side.runs * (run_bytes / line + edge) * line
    if write and not streamed:
        traffic *= 2  # read for ownership: a line written through the cache is read first
    # Restarts: runs that do not go on from where the block before (or one of the few
    # streams in between) left them start over (the prefetchers lose them); streamed
    # stores do not wait on them.
    continued = counts[cont[-1]] if cont and (between == 1 or streams_between <= STREAMS) else 1
    if (_streams(side) + _streams(other) > STREAMS
            and (run_bytes < line or plan.kernel != "rows")):
        # More runs at once than the prefetchers follow: each starts over though the next
        # block goes on with it (a transpose's side of 3 beside one of 49: 3-element
        # destination rows 160 KB apart; 256 rows of 512 bytes 1 MB apart, a Xeon's
        # transposes 1.3-3x slower than of 1 KiB rows). A rows block's runs of a line or
        # more, ever so many, do go on (halving them took 1.47x the time: docs/cpu.md).
        continued = 1
    if write and not streamed and plan.kernel == "rows" and _streams(side) > CACHED_STORE_STREAMS:
        # Stores through the cache into more runs at once than that each wait on their
        # lines' reads for ownership, though the next block goes on with them.
        continued = 1
    if side.runs == 1:  # one run: the next block may continue it along any loop
        continued = max(continued, _continued_runs(side, counts, size, line))
    restarts = blocks * _streams(side) / continued
    if ((plan.kernel == "permute" and not write and size >= 2 or _tiny_rows(plan))
            and cont and run_bytes < line):
        # A gathered block's source runs, or tiny runs, shorter than a line that a later
        # block goes on with land in the line the run before ended in, still in L2 where
        # the blocks in between touch less than it holds: only those that start a line
        # start over (3 x 3 x 29 float16 pixels of 6 bytes, 111 blocks on: 0.20 of the time
        # gathered, priced so). Not for bytes gathered: their gathers cost more than the
        # table's price, which such restarts made up for (an 87 x N transpose of uint8,
        # gathered, 3.6x as long); tiny runs pay their copies instead (`plan_cost`).
        share = run_bytes / line
        restarts = min(restarts, blocks * _streams(side)
                       * (share + (1 - share) * (1 - _kept(lines_between, caches.l2 // 2))))
    restart = RESTART_BYTES if not (write and streamed) else RESTART_BYTES / 4
    # Pages: a page that holds several blocks' runs comes back from the TLB only if the
    # blocks in between touch fewer pages than it holds.
    pages = blocks * _pages(side, size)
    # the innermost loop that moves the runs less than a page brings the block back to
    # its pages after the loops inside it
    near = [j for j, move in enumerate(side.moves)
            if counts[j] > 1 and side.run <= abs(move) and abs(move) * size < PAGE]
    if near and plan.kernel != "rows" and (not cont or near[-1] > cont[-1]):
        inside = slice(near[-1] + 1, None)
        p1, *_ = _footprint(side, side.moves[inside], counts[inside], size)
        p2, *_ = _footprint(other, other.moves[inside], counts[inside],
                            plan.elem_bytes if write else plan.dst_bytes)
        pages_between = min(pages_between, p1 + p2)
    if run_bytes < PAGE:
        pages *= 1 - _kept(pages_between, caches.tlb_pages) * (1 - run_bytes / PAGE)
    return traffic + restarts * restart + pages * PAGE_BYTES


def _stores_stream(plan: CopyPlan, caches: Caches) -> bool:
    """Whether `plan`'s stores stream on this host: it writes more than the runtime's
    threshold, half the last-level cache (runtime/backends/cpu.py, `stream_threshold`)."""
    return plan.stream_bytes > caches.last_level // 2


def _tiny_rows(plan: CopyPlan) -> bool:
    """Whether `plan` copies runs of fewer than `TINY_RUN_BYTES` bytes (a rows kernel)."""
    return plan.kernel == "rows" and plan.loops[plan.b_loop].step * plan.elem_bytes < TINY_RUN_BYTES


def _runs_as_words(plan: CopyPlan, caches: Caches) -> bool:
    """Whether a rows plan's tiny runs go a word each into a destination they follow on in:
    over the whole block along a and c (`_rows_words`), or along a, in blocks of a few
    words or more, where its stores do not stream and it casts nothing (lib/copy_plan.c,
    `tile_rows`' `gather_runs`)."""
    if plan.cast or _stores_stream(plan, caches):
        return False
    if _rows_words(plan):
        return True
    if plan.kernel != "rows" or plan.a_loop < 0:
        return False
    a, nb = plan.loops[plan.a_loop], plan.loops[plan.b_loop].step
    run = nb * plan.elem_bytes
    return run < SMALL_RUN_BYTES and a.dst_stride == nb and a.step * run >= SEGMENT_BYTES


def _rows_words(plan: CopyPlan) -> bool:
    """Whether a rows plan's blocks are one run in the destination, along a and then c, of
    runs shorter than `WORD_RUN_BYTES`: the library moves them a word each over the whole
    block, no part a call of its own (lib/copy_plan.c, `rows_words`)."""
    if plan.kernel != "rows" or plan.a_loop < 0 or plan.c_loop < 0:
        return False
    a, c, nb = plan.loops[plan.a_loop], plan.loops[plan.c_loop], plan.loops[plan.b_loop].step
    return (nb * plan.elem_bytes < WORD_RUN_BYTES and a.dst_stride == nb
            and c.dst_stride == a.step * nb)


def _continued_runs(side: _Side, counts: Sequence[int], size: int, line: int) -> float:
    """Blocks a single run goes on over, on average: it goes on where the innermost loops'
    moves land one run (or less than a line) on."""
    run = 1.0
    for j in range(len(counts) - 1, -1, -1):
        back = sum((counts[i] - 1) * side.moves[i] for i in range(j + 1, len(counts)))
        net = side.moves[j] - back
        if counts[j] > 1 and not (net == side.run or abs(net - side.run) * size < line):
            break
        run *= counts[j]
    return run


def plan_cost(plan: CopyPlan, caches: Caches | None = None, join: bool = True) -> float:
    """The model's time of `plan`, in bytes of memory traffic it is worth: for each side of
    every block, its lines (less those it shares with a neighbour still in L2), doubled for
    lines written through the cache (read for ownership), its runs that start over where
    no run of the block before left off, and its pages that come back after leaving the
    TLB; plus each block's fixed work and its vectors. `join`: short rows that follow on
    are one run (`_joined`); False prices them as rows (a lane copy's transposes)."""
    caches = caches or host_caches()
    src, dst = _sides_of(plan, join)
    counts = [loop.count for loop in plan.loops]
    blocks = math.prod(counts)
    size = max(plan.elem_bytes, plan.dst_bytes)
    vectors = max(src.runs * src.run, dst.runs * dst.run) * size / 64
    padding, fixed = 0.0, BLOCK_BYTES if plan.kernel != "permute" else PERMUTE_BLOCK_BYTES
    if plan.kernel == "transpose":  # partial blocks move whole vectors
        fixed = TRANSPOSE_BLOCK_BYTES
        ea, eb = plan.loops[plan.a_loop].step, plan.loops[plan.b_loop].step
        vectors = (-(-ea * size // 64)) * (-(-eb * size // 64)) * 64 / size
        # a register tile's lanes past a block's edge are moved as if they were elements
        tv = TILE_LANES[plan.elem_bytes]
        padding = ((-(-ea // tv)) * (-(-eb // tv)) * tv * tv - ea * eb) * size
    if _tiny_rows(plan):  # each run a copy of its own, each part of a block a call
        runs = math.prod(plan.loops[k].step for k in (plan.a_loop, plan.c_loop) if k >= 0)
        fixed += runs * (WORD_RUN_COST_BYTES if _runs_as_words(plan, caches)
                          else TINY_RUN_COST_BYTES)
        if plan.c_loop >= 0 and not _rows_words(plan):
            fixed += plan.loops[plan.c_loop].step * ROWS_PART_BYTES
    if plan.kernel == "permute":
        matrix = math.prod(loop.step for loop in _matrix_loops(plan))
        if matrix * size > PERMUTE_BYTES or src.run < matrix:  # through the table
            fixed += matrix * _table_element_bytes(caches)
    return (_side_cost(src, dst, plan, counts, caches, False)
            + _side_cost(dst, src, plan, counts, caches, True)
            + blocks * (fixed + vectors * VECTOR_BYTES + padding))


def _table_element_bytes(caches: Caches) -> float:
    """The price of an element the permute kernel moves through its table on this host."""
    if not caches.gathers:
        return PERMUTE_TABLE_ELEMENT_BYTES
    if caches.slow_gathers:
        return PERMUTE_SLOW_GATHER_ELEMENT_BYTES
    if caches.lane_gathers:
        return PERMUTE_LANE_GATHER_ELEMENT_BYTES
    return PERMUTE_GATHER_ELEMENT_BYTES


# --------------------------------------------------------------------------- planning


def _tile(extent: int, target: int, cap: int = 1 << 62, multiple: int = 16) -> int:
    """A block side for a dim of `extent`: the whole dim if it is at most 1.5 times
    `target` (and `cap`), else even blocks of about `target` (multiples of `multiple`:
    a transpose's register tiles)."""
    if extent <= min(target + target // 2, cap):
        return extent
    count = -(-extent // target)
    side = -(-extent // count)
    return min(extent, -(-side // multiple) * multiple)


def _loop(canon: CopySpec, k: int, step: int = 1) -> Loop:
    return Loop(k, canon.sizes[k], step, canon.src_strides[k], canon.dst_strides[k])


def _nest(canon: CopySpec, kernel: str, a: int | None, b: int | None, order: Sequence[int],
          steps: dict[int, int], base: CopyPlan, sides: tuple[list[int], list[int]] | None = None
          ) -> CopyPlan:
    """The plan of loops over `order` (dims outermost first; a transpose's `a` and `b` stand
    for their sides), each blocked by `steps`."""
    loops = []
    for k in order:
        if sides is not None and k == a:
            extent = math.prod(canon.sizes[j] for j in sides[0])
            loops.append(Loop(k, extent, min(steps[k], extent), 1, 0))
        elif sides is not None and k == b:
            extent = math.prod(canon.sizes[j] for j in sides[1])
            loops.append(Loop(k, extent, min(steps[k], extent), 0, 1))
        else:
            loops.append(_loop(canon, k, steps.get(k, 1)))
    position = {loop.dim: j for j, loop in enumerate(loops)}
    plan = _with(base, kernel=kernel, loops=tuple(loops),
                 a_loop=position[a] if a is not None and a in position else -1,
                 b_loop=position[b] if b is not None and b in position else -1)
    if sides is not None:
        plan = _with(plan, a_side=tuple((canon.sizes[j], canon.dst_strides[j]) for j in sides[0]),
                     b_side=tuple((canon.sizes[j], canon.src_strides[j]) for j in sides[1]))
    return plan


def _sides(canon: CopySpec, a: int, b: int, first: str | None,
           whole: bool = False) -> tuple[list[int], list[int]]:
    """A transpose's sides: `a`, then each dim that continues them contiguously in the
    source; `b`, then each that continues them in the destination. A dim that could join
    either joins side `first` ("a" or "b"); with `first` None, neither side grows. The
    sides grow a dim at a time in turn; with `whole`, side `first` grows as far as it
    goes before the other starts (a dim that continues `first` only once it has grown,
    as a destination row of 3 x 5 pixels continues into 379 of them)."""
    side_a, side_b = [a], [b]
    if first is None:
        return side_a, side_b
    other = "b" if first == "a" else "a"
    turns = [(first,), (other,)] if whole else [(first, other)]
    for names in turns:
        _grow(canon, side_a, side_b, names)
    return side_a, side_b


def _grow(canon: CopySpec, side_a: list[int], side_b: list[int], names: tuple[str, ...]) -> None:
    """Grow the sides `names` in turn, a dim at a time, while any continues one."""
    grown = True
    while grown:
        grown = False
        for name in names:
            side = side_a if name == "a" else side_b
            strides = canon.src_strides if name == "a" else canon.dst_strides
            run = math.prod(canon.sizes[j] for j in side)
            for k in range(canon.rank):
                if k not in side_a and k not in side_b and strides[k] == run:
                    side.append(k)
                    grown = True
                    break


def candidate_plans(spec: CopySpec, caches: Caches | None = None,
                    limit: int = 4, gather: bool = False, coalesce: bool = True,
                    simplify: bool = True) -> list[CopyPlan]:
    """The `limit` best plans of `spec` by the model (`plan_cost`), best first; empty when
    the planner does not take the copy (symbolic sizes, a fill of nothing, masks of a
    deinterleave or more than `MAX_MASKS`, masks that leave points of an interleave
    unwritten: `codegen/c/plan.py`'s `planned_calls` runs those). A cast is planned as a
    copy of its source's elements that converts them as it stores; its fill is the
    destination's bits (a cast that only fills reads nothing: the destination dtype's
    fill). With `gather`, the gather's plans are among them whatever the strides (a walk
    that relies on none: a symbolic copy's where another plan's premise holds at one
    binding only, `codegen/symbolic_c.py`). With `coalesce` False, dims that are
    contiguous in both are planned as they are, not merged (a symbolic copy's that merge
    at one binding only); with `simplify` False, masks as they are, none dropped and
    none making the copy a fill (a symbolic copy's that hold everywhere or nowhere at
    one binding only)."""
    caches = caches or host_caches()
    if copy_symbols(spec) or spec.numel == 0:
        return []
    canon = canonicalize_copy(spec, coalesce, simplify)
    fill_only = simplify and is_fill_only(canon)
    if (fill_only and canon.fill is None) or len(canon.masks) > MAX_MASKS:
        return []
    if fill_only:  # nothing is read or converted: a fill of the destination's dtype
        canon = dataclasses.replace(canon, src_dtype=canon.dst_dtype)
    if canon.rank == 0:  # one element: a row of one
        canon = dataclasses.replace(
            canon, sizes=(1,), src_strides=(1,), dst_strides=(1,),
            masks=tuple(MaskBound((0,), m.lo, m.hi) for m in canon.masks))
    size = canon.src_dtype.itemsize
    cast = (() if canon.src_dtype == canon.dst_dtype
            else (canon.src_dtype.name, canon.dst_dtype.name))
    if fill_only:  # nothing is read: the destination's runs of the fill's bits
        canon = dataclasses.replace(canon, src_strides=(0,) * canon.rank, src_offset=0,
                                    masks=())
        plans = _plans_of(canon, "fill", None, canon.rank - 1, size, caches)
    else:
        kernel, a, b = _kernel(canon)
        plans = []
        if _takes_masks(canon, kernel):
            plans += _plans_of(canon, kernel, a, b, size, caches, cast)
        if kernel in ("deinterleave", "interleave", "compress"):
            unit = _unit_dim(canon, canon.rank - 1)
            if unit is not None and _takes_masks(canon, "transpose"):
                # priced as transposes of rows: the lane kernel's K dims are its own
                plans += _plans_of(canon, "transpose", unit, canon.rank - 1, size, caches,
                                   cast, join=False)
        if gather and kernel != "gather":
            plans += _plans_of(canon, "gather", None, canon.rank - 1, size, caches, cast)
        wide = _wide_spec(canon) if kernel == "rows" else None
        if wide is not None:  # the same copy, each run one element of the library's sizes
            plans += candidate_plans(wide, caches, limit, gather, coalesce, simplify)
        if not canon.masks and not cast:
            own = kernel in ("rows", "deinterleave", "interleave", "compress", "reverse")
            plans += _permute_plans(canon, size, caches, own)
    # Distinct plans only: tilings and orders that come out the same (a side shorter than
    # every tile) would fill the `limit` with one plan.
    plans = sorted(dict.fromkeys(_cached_stores(p, caches) for p in plans),
                   key=lambda p: (p.cost, _writes_restart(p)))
    return plans[:limit]


def _writes_restart(plan: CopyPlan) -> bool:
    """Whether a rows or permute plan's blocks of elements of 2 bytes or more write one
    short run (under `LONG_RUN_BYTES`) that the innermost loop moving them does not go on
    with: of two plans priced the same it sorts last, for a store that misses holds the
    stores after it while loads run ahead (docs/cpu.md, "Plans the model prices the
    same")."""
    if plan.kernel not in ("rows", "permute") or plan.elem_bytes < 2:
        return False
    _, dst = _sides_of(plan)
    if dst.runs != 1 or dst.run * plan.dst_bytes >= LONG_RUN_BYTES:
        return False
    inner = [j for j, loop in enumerate(plan.loops) if loop.count > 1 and dst.moves[j]]
    return bool(inner) and dst.moves[inner[-1]] != dst.run


def _cached_stores(plan: CopyPlan, caches: Caches) -> CopyPlan:
    """`plan`, priced as it streams, with its stores through the cache where a streamed
    block would go through a buffer in L1 for less than streaming saves, on a host whose
    such streams are slow (`Caches.slow_streams`): a thin transpose block that is one run
    on a side (`_thin_joined`), a rows block whose destination is one run of runs that are
    not whole lines (`_rows_buffered`). Through the cache they take less time than that
    price, so the plans rank as before."""
    if not caches.slow_streams:
        return plan
    if plan.stream_bytes > 0 and (plan.kernel == "transpose" and _thin_joined(plan, caches)
                                  or plan.kernel == "rows" and _rows_buffered(plan, caches)):
        return _with(plan, stream_bytes=-1)
    return plan


def _rows_buffered(plan: CopyPlan, caches: Caches) -> bool:
    """Whether a rows block's destination is several runs that make one (the a loop's
    runs follow on there), shorter than `LONG_RUN_BYTES` and not whole lines: streamed,
    the library builds it in a buffer in L1 and streams that (`tile_rows_joined`). TTC's
    (0,2,1), blocks of 5-8 runs of 1016-1616 bytes: 1.14-1.28x as long streamed on a
    Cascade Lake VM (docs/cpu.md)."""
    if plan.a_loop < 0 or plan.cast:
        return False
    a, nb = plan.loops[plan.a_loop], plan.loops[plan.b_loop].step
    run = nb * plan.dst_bytes
    if not (a.step > 1 and a.dst_stride == nb and run < LONG_RUN_BYTES
            and run % caches.line != 0):
        return False
    # Not where the block reads and writes more runs at once than stores through the
    # cache keep going beside their reads for ownership (20-87 source runs of 56-240
    # bytes: 1.03-1.2x as long; 24-87 destination runs: 1.3-1.9x).
    src, dst = _sides_of(plan)
    return _streams(src) + _streams(dst) <= CACHED_STORE_STREAMS


def _wide_spec(canon: CopySpec) -> CopySpec | None:
    """`canon` as the copy of elements that are each its innermost run, where that run
    (contiguous on both sides) is 2, 4 or 8 bytes of several elements and every other
    stride and both offsets are whole runs: a transpose of RGBA pixels of 4 bytes, of
    complex-like pairs of float32 (the runs of a rows plan, moved one by one, took 10-14
    times as long as the transpose of the wide elements, docs/cpu.md); None otherwise (a
    cast, masks). The library of the wide size reads the storages at their pointers: the
    call stages a storage whose address is not a multiple of 8 (runtime/tensors.py)."""
    b = canon.rank - 1
    n, size = canon.sizes[b], canon.src_dtype.itemsize
    if (canon.rank < 2 or canon.masks or canon.src_dtype != canon.dst_dtype or n < 2
            or canon.src_strides[b] != 1 or canon.dst_strides[b] != 1
            or n * size not in WIDE_DTYPES):
        return None
    whole = (*canon.src_strides[:b], *canon.dst_strides[:b], canon.src_offset, canon.dst_offset)
    if any(v % n for v in whole):
        return None
    dtype = DTYPES[WIDE_DTYPES[n * size]]
    return CopySpec(canon.sizes[:b], tuple(v // n for v in canon.src_strides[:b]),
                    canon.src_offset // n, tuple(v // n for v in canon.dst_strides[:b]),
                    canon.dst_offset // n, dtype, dtype)


def _matrix(canon: CopySpec, size: int, limit: int = PERMUTE_BYTES,
            elements: int = PERMUTE_BYTES) -> int | None:
    """The first of the innermost dims (two or more) that make a matrix of at most `limit`
    bytes and `elements` elements contiguous on both sides (each side's strides over them
    those of a contiguous tensor in some order: a batch of small transposes, 3 x 3 or
    33 x 9), the most dims that do; None if none do."""
    best = None
    for k in range(canon.rank - 2, -1, -1):
        dims = range(k, canon.rank)
        matrix = math.prod(canon.sizes[j] for j in dims)
        if matrix * size > limit or matrix > elements:
            break
        if all(_dense([(canon.sizes[j], strides[j]) for j in dims])
               for strides in (canon.src_strides, canon.dst_strides)):
            best = k
    return best


def _dense(dims: list[tuple[int, int]]) -> bool:
    """Whether dims of (extent, stride) cover 0 .. their product - 1 once each."""
    run = 1
    for n, stride in sorted(dims, key=lambda d: d[1]):
        if stride != run:
            return False
        run *= n
    return True


def _permute_plans(canon: CopySpec, size: int, caches: Caches,
                   own_kernel: bool = False) -> list[CopyPlan]:
    """The permute kernel's plans of `canon`: its innermost dims a matrix contiguous on
    both sides (`_matrix`), moved whole, a block each, the outer dims in the source's or
    the destination's order: a vector's matrix, else one of up to `PERMUTE_TABLE_BYTES`
    moved through its table in L1 (a slab of 3 x 47 x 13 reversed, `.permute(2, 1, 0)`
    of its dims: tiles of a transpose would be a few elements wide); in a copy larger
    than L2, or where the CPU gathers vectors (`Caches.gathers`), the destination's rows
    are narrow and the copy has no kernel of its own (`own_kernel`: runs, lanes, flips), also
    blocks of the innermost dims contiguous in the destination alone, gathered through
    the table (`_gathered_blocks`)."""
    moved = canon.numel * size * 2
    k = _matrix(canon, size)
    # Through the table only where memory bounds the copy: in L2 an element of the table
    # (1.3 ns) costs twice a transposed one (with the gathers too: 40 x 50 float32 hot,
    # 9.9 us against 2.3), and a table of bytes costs an entry's load for each byte moved
    # (int8 and uint8 rows took 1.3x as long), unless the CPU gathers them 16 at a time.
    if k is None and (size > 1 or caches.gathers) and moved > caches.l2:
        k = _matrix(canon, size, PERMUTE_TABLE_BYTES, PERMUTE_TABLE_ELEMENTS)
    base = CopyPlan("permute", size, (), canon.src_offset, canon.dst_offset,
                    parallel=MAX_THREADS if moved >= PARALLEL_BYTES else 1, stream_bytes=-1)
    plans = []
    if k is not None:
        # A matrix of a few lines or more is built in L1 and streams as one run where the
        # copy is large (the 14.6 KB slabs of (3, 541, 13, 47, 3).permute(0, 1, 4, 3, 2)
        # float64 1.2x faster); smaller ones, all of whose lines a neighbour shares, go
        # through the cache (702-byte matrices streamed took 1.3x as long).
        long = math.prod(canon.sizes[k:]) * size >= LONG_RUN_BYTES
        plans += _matrix_plans(canon, k, canon.sizes[k],
                               _with(base, stream_bytes=moved // 2 if long else -1), caches)
    narrow = canon.sizes[-1] < TILE_LANES[size]
    if moved > caches.l2 or (caches.gathers and narrow and not own_kernel):
        # (a destination row of 3 x 3 bytes from 3 source runs of 3, 1871 of them 29 KB
        # apart, each 3 x 3 a transpose). Gathered in L2 too where the CPU gathers and
        # the destination's rows are narrower than a register tile, mostly padding for a
        # transpose (a 0.56 MB copy of 3 x 3 transposes of float16 0.27x as long; 64 x 64
        # float32 hot 4.2x as long gathered), but not over a copy of runs, a lane
        # kernel's or a flip's (runs move as runs; an interleave of 3 int8 lanes 1.67x as
        # long gathered; a flip reverses vectors in registers).
        for j, step in _gathered_blocks(canon, size):
            plans += _matrix_plans(canon, j, step, base, caches)
    return plans


def _matrix_plans(canon: CopySpec, k: int, step: int, base: CopyPlan,
                  caches: Caches) -> list[CopyPlan]:
    """The permute kernel's plans of the matrix of dims `k` on, its outer dims in the
    source's or the destination's order; dim k in blocks of `step` where that is less
    than its extent, that loop (`c_loop`) anywhere among the outer ones (a tile of 16 of
    1871 rows whose 219 matrices read its source lines in turn)."""
    plans = []
    tiled = step < canon.sizes[k]
    inner = [_loop(canon, j, canon.sizes[j]) for j in range(k + 1, canon.rank)]
    for key in ((lambda j: (-abs(canon.src_strides[j]), j)),
                (lambda j: (-abs(canon.dst_strides[j]), j))):
        outer = [_loop(canon, j, 1) for j in sorted(range(k), key=key)]
        if not tiled:
            loops = (*outer, _loop(canon, k, step), *inner)
            plans.append(_with(base, loops=loops, a_loop=k, b_loop=canon.rank - 1))
            continue
        for at in range(len(outer) + 1):
            loops = (*outer[:at], _loop(canon, k, step), *outer[at:], *inner)
            plans.append(_with(base, loops=loops, a_loop=k + 1, b_loop=canon.rank - 1,
                               c_loop=at))
    return [_with(plan, cost=plan_cost(plan, caches)) for plan in plans]


def _matrix_loops(plan: CopyPlan) -> tuple[Loop, ...]:
    """A permute plan's loops of its matrix, outermost first: a tiled one (`c_loop`), then
    those from `a_loop` on."""
    return ((plan.loops[plan.c_loop],) if plan.c_loop >= 0 else ()) + plan.loops[plan.a_loop:]


def _gathered_blocks(canon: CopySpec, size: int) -> list[tuple[int, int]]:
    """(first dim, its step) of each block of two or more of the innermost dims that is
    contiguous in the destination but not in the source, as many elements as the permute
    kernel's table takes: the first dim in blocks where the dims from it on are more."""
    cap = min(PERMUTE_TABLE_ELEMENTS, PERMUTE_TABLE_BYTES // size)
    blocks, inner = [], 1
    for k in range(canon.rank - 1, -1, -1):
        if canon.dst_strides[k] != inner or inner * 2 > cap:
            break
        step = min(canon.sizes[k], cap // inner)
        # (a block whose source is a contiguous range too, some dims backwards, is left to
        # the rows blocks: rotate_half's halves swapped, 1.3-2x as fast)
        dims = [(step if j == k else canon.sizes[j], abs(canon.src_strides[j]))
                for j in range(k, canon.rank)]
        # the library's table holds 32-bit offsets: it takes no dim whose stride could
        # overflow one (copy_plan.c's permute_table refuses the plan, which then moves
        # nothing)
        near = all(abs(canon.src_strides[j]) <= TABLE_STRIDE for j in range(k, canon.rank))
        if k < canon.rank - 1 and not _dense(dims) and near:
            blocks.append((k, step))
            # tiles whose source lines L1 holds, too
            blocks += [(k, t) for t in GATHER_TILES if t < step < canon.sizes[k]]
        if step < canon.sizes[k]:
            break
        inner *= canon.sizes[k]
    return blocks


def _takes_masks(canon: CopySpec, kernel: str) -> bool:
    """Whether the library's `kernel` runs `canon`'s masks: a row kernel or a transpose any
    (an interval of each row; a transpose's block the kernel, the fill or its parts), an
    interleave where masked points get the fill (its lanes are written together), a
    deinterleave none."""
    if not canon.masks:
        return True
    if kernel == "deinterleave":
        return False
    return canon.fill is not None or kernel != "interleave"


def _plans_of(canon: CopySpec, kernel: str, a: int | None, b: int | None, size: int,
              caches: Caches, cast: tuple[str, str] = (), join: bool = True
              ) -> list[CopyPlan]:
    """The plans of `canon` with micro-kernel `kernel` on dims `a` and `b`, reading
    `size`-byte elements (converted as `cast` says, if given), priced with `join` (`plan_cost`)."""
    numel = canon.numel
    out = DTYPES[cast[1]].itemsize if cast else size
    moved = numel * (size + out)
    # A cast streams by the mean of the bytes it reads and writes: a narrowing cast brings
    # twice its output through the cache (docs/cpu.md, "Streaming stores").
    base = CopyPlan(kernel, size, (), canon.src_offset, canon.dst_offset,
                    parallel=MAX_THREADS if moved >= PARALLEL_BYTES else 1,
                    stream_bytes=moved // 2, cast=cast,
                    fill_bits=None if canon.fill is None or not (canon.masks or kernel == "fill")
                    else bit_pattern(canon.fill, canon.dst_dtype))
    if kernel in ("deinterleave", "compress"):
        base = _with(base, lanes=canon.src_strides[b])
    if kernel == "deinterleave":
        base = _with(base, lane_stride=canon.dst_strides[a])
        # Streamed, each lane's run is written in pieces of a few KiB: where a lane does
        # not start on a line, every piece starts and ends inside one, written through
        # the cache between streamed ones (as a transpose's rows, `_transpose_memory`).
        starts = (canon.dst_offset, *(canon.dst_strides[k] for k in range(canon.rank)
                                      if k != b))
        if any(x * out % caches.line for x in starts):
            base = _with(base, stream_bytes=-1)
    if kernel == "interleave":
        base = _with(base, lanes=canon.sizes[b], lane_stride=canon.src_strides[b])
        # Streamed, each block's destination run is built in L1 and streamed on its own:
        # a run of a line to LONG_RUN_BYTES that starts or ends inside a line streams
        # partial lines every block (7 pixels of 3 float64 lanes, 168 bytes: 1.5x as long
        # as through the cache, docs/cpu.md). A run under a line streams all the same:
        # through the cache each would read a line for ownership (36 bytes: 1.09x).
        pixels = min(canon.sizes[a], max(1, (64 << 10) // size))  # a block's, below
        run = pixels * canon.sizes[b] * out
        starts = (canon.dst_offset * out, run, *(canon.dst_strides[k] * out
                                           for k in range(canon.rank) if k not in (a, b)))
        if caches.line <= run < LONG_RUN_BYTES and any(x % caches.line for x in starts):
            base = _with(base, stream_bytes=-1)
    consumed = {"deinterleave": a, "interleave": b}.get(kernel)
    side_choices: list[tuple[list[int], list[int]] | None] = [None]
    if kernel == "transpose":
        side_choices = []
        for first, whole in (("a", False), ("b", False), (None, False), ("b", True)):
            sides = _sides(canon, a, b, first, whole)
            if sides not in side_choices and _masks_take(canon, sides, cast):
                side_choices.append(sides)
    plans = []
    if kernel == "rows" and not canon.masks:
        plans += _blocked_rows(canon, b, size, base, moved, caches)
    for sides in side_choices:
        taken = set(sides[0] + sides[1]) if sides else set()
        inner = [k for k in (a, b) if k is not None and k != consumed]
        outer = [k for k in range(canon.rank)
                 if k not in inner and k != consumed and k not in taken]
        if kernel == "transpose":
            na = math.prod(canon.sizes[j] for j in sides[0])
            nb = math.prod(canon.sizes[j] for j in sides[1])
            tiles = TRANSPOSE_TILES
            if _byte_words(canon, sides, size, cast):
                tiles = tuple((ta * BYTE_WORDS_TILE, tb) for ta, tb in tiles)
            tilings = [{a: _tile(na, max(16, ta // size)), b: _tile(nb, tb, MAX_BLOCK_ROWS)}
                       for ta, tb in tiles]
        elif kernel in ("rows", "reverse", "deinterleave", "compress", "fill"):
            tilings = [{b: min(canon.sizes[b], max(1, (64 << 10) // size))}]
        elif kernel == "interleave":
            tilings = [{a: pixels}]
        else:
            tilings = [{b: canon.sizes[b]}]
        # The outer loops in the source's order (the largest source stride outermost) and
        # in the destination's.
        orders = [sorted(outer, key=lambda k: (-abs(canon.src_strides[k]), k)),
                  sorted(outer, key=lambda k: (-abs(canon.dst_strides[k]), k))]
        if kernel in ("deinterleave", "interleave", "compress"):
            # A lane kernel's block is a few pixels: each dim hoisted out of the
            # destination's order, or sunk into the source's, keeps one side's runs going
            # on while the other's stay few (d1 of 3x3x7x1187x3x5 int32 outside d0: 1.37x).
            orders += [[k, *(j for j in orders[1] if j != k)] for k in orders[1][1:]]
            orders += [[*(j for j in orders[0] if j != k), k] for k in orders[0][:-1]]
        unique_orders = []
        for o in orders:
            if o not in unique_orders:
                unique_orders.append(o)
        inner_orders = [inner] if len(inner) < 2 else [inner, inner[::-1]]
        for steps in tilings:
            for o in unique_orders:
                for i in inner_orders:
                    plan = _nest(canon, kernel, a, b, [*o, *i], steps, base, sides)
                    if canon.masks:
                        plan = _with(plan, masks=_plan_masks(canon, plan, consumed, sides))
                    if kernel == "transpose":
                        plan = _transpose_memory(plan, moved, caches)
                    if kernel == "rows" and not canon.masks and not cast:
                        plan = _prefetched_rows(_grouped_rows(plan, moved, caches), moved,
                                                caches)
                    if kernel == "rows":
                        plan = _rows_streams(plan, caches)
                    plans.append(_with(plan, cost=plan_cost(plan, caches, join)))
    return plans


def _blocked_rows(canon: CopySpec, b: int, size: int, base: CopyPlan, moved: int,
                  caches: Caches) -> list[CopyPlan]:
    """Rows blocked along a second dim `a` whose runs follow on in the source or in the
    destination (a row-keeping permutation: the outer dims of a copy of short rows move):
    a block is `ROWS_BLOCK_BYTES` of runs along `a`, contiguous on that side, and the other
    loops in the other side's order, so that the blocks after it go on with each of its
    runs there (HPTT's blocking of the outer dims where the stride-1 dim is shared). Its
    stores stream only where the block's destination is one run (through a buffer in L1),
    its runs are whole lines or long: a short streamed run starts or ends inside a line.
    Runs of `LONG_RUN_BYTES` or more are not blocked: their edge lines are few, and a
    block of them restarts its runs' streams at every block where the plain plan in the
    source's order reads one stream (Swin's window partition, runs of 2688 bytes)."""
    nb = canon.sizes[b]
    if canon.rank < 2 or nb * size >= LONG_RUN_BYTES:
        return []
    plans: dict[tuple[Loop, ...], CopyPlan] = {}
    for a in range(canon.rank - 1):
        on_src = canon.src_strides[a] == nb
        on_dst = canon.dst_strides[a] == nb
        if canon.sizes[a] < 2 or not (on_src or on_dst):
            continue
        others = [k for k in range(canon.rank - 1) if k != a]
        # The other side's order: the loops inside carry each run of the block on.
        key = ((lambda k: (-abs(canon.dst_strides[k]), k)) if on_src
               else (lambda k: (-abs(canon.src_strides[k]), k)))
        for target in ROWS_BLOCK_BYTES:
            ta = _tile(canon.sizes[a], max(1, target // (nb * size)), MAX_BLOCK_ROWS, 1)
            for where in ("outer", "sorted"):
                if where == "outer":
                    order = [a, *sorted(others, key=key)]
                else:
                    order = sorted([a, *others], key=key)
                plan = _nest(canon, "rows", a, b, [*order, b], {a: ta, b: nb}, base)
                a_loop = plan.loops[plan.a_loop]
                if not (a_loop.dst_stride == nb or nb * size % caches.line == 0
                        or nb * size >= LONG_RUN_BYTES):
                    plan = _with(plan, stream_bytes=-1)
                plan = _with(plan, prefetch=moved > caches.l2 and not _source_followed(plan))
                plan = _rows_streams(plan, caches)
                plans.setdefault(plan.loops, _with(plan, cost=plan_cost(plan, caches)))
    # Blocks of two dims: `a` whose runs follow on in the destination, `c` whose runs
    # follow on in the source, so both sides of a block are runs of several (runs of 56
    # bytes: a line or less on either side with one dim); or `c` whose blocks of the whole
    # of `a` follow on in both, its runs permuted (rotate_half's halves swapped: 2 x 128
    # bytes a row, 64 rows a block, not a block a row; where the source's runs lie apart,
    # as in TTC's (0,3,2,5,4,1), such blocks measured slower).
    for a in range(canon.rank - 1):
        if canon.sizes[a] < 2 or canon.dst_strides[a] != nb:
            continue
        for c in range(canon.rank - 1):
            whole = nb * canon.sizes[a]  # the a runs, then c's, on both sides
            after = (abs(canon.src_strides[a]) == nb
                     and canon.dst_strides[c] == canon.src_strides[c] == whole)
            # or on in the destination only, runs of a word each (`WORD_RUN_BYTES`): the
            # block's destination one run, its runs gathered a word each
            gathered = canon.dst_strides[c] == whole and nb * size < WORD_RUN_BYTES
            if c == a or canon.sizes[c] < 2 or not (canon.src_strides[c] == nb or after
                                                    or gathered):
                continue
            others = [k for k in range(canon.rank - 1) if k not in (a, c)]
            tc = _tile(canon.sizes[c], max(1, ROWS_BLOCK_BYTES[-1] // (nb * size)),
                       MAX_BLOCK_ROWS, 1)
            # A block's source runs of a line or more are each read once a part (along c):
            # their lines (a part's edge lines are the next part's) stay in L1 across the
            # parts only where the block about fits there (twice L1: the runs' middle lines
            # are read once). Shorter runs share their lines with their neighbours along a,
            # which larger blocks keep (runs of 5 bytes: 3x slower at twice L1).
            whole = nb * size >= caches.line
            cap = 2 * caches.l1 if whole else ROWS_PAIR_BYTES
            for target in (*ROWS_BLOCK_BYTES, caches.l1 // tc if whole else ROWS_PAIR_BYTES):
                ta = _tile(canon.sizes[a], max(1, target // (nb * size)), MAX_BLOCK_ROWS, 1)
                if ta * tc * nb * size > cap or (canon.src_strides[c] != nb
                                                 and ta != canon.sizes[a]):
                    continue
                for key in ((lambda k: (-abs(canon.src_strides[k]), k)),
                            (lambda k: (-abs(canon.dst_strides[k]), k))):
                    order = [a, c, *sorted(others, key=key)]
                    plan = _nest(canon, "rows", a, b, [*order, b], {a: ta, c: tc, b: nb}, base)
                    plan = _with(plan, c_loop=[lp.dim for lp in plan.loops].index(c))
                    plan = _with(plan, prefetch=moved > caches.l2
                                 and not _source_followed(plan))
                    plan = _rows_streams(plan, caches)
                    plans.setdefault(plan.loops, _with(plan, cost=plan_cost(plan, caches)))
    return list(plans.values())


def _rows_streams(plan: CopyPlan, caches: Caches) -> CopyPlan:
    """A rows plan streams its stores only where a block's destination run (its runs
    joined where they follow on there) is two lines or longer: the library streams a
    run's whole lines only, so a shorter one is written through the cache all the same,
    after a detour through a buffer in L1 (blocks of 3 x 213 runs of 19 bytes, 57 a
    part: 2.2x as long streamed)."""
    if plan.stream_bytes <= 0:
        return plan
    _, dst = _sides_of(plan)
    if dst.run * plan.dst_bytes < 2 * caches.line:
        return _with(plan, stream_bytes=-1)
    return plan


def _source_followed(plan: CopyPlan) -> bool:
    """Whether a rows block reads its source as one stream, or as at most
    `FOLLOWED_STREAMS` streams of runs shorter than a line read in turn (in the order the
    library reads them: each run along a, then on along c), that the next block goes on
    with (the innermost loop of several blocks moves each one stream on): the hardware
    prefetchers follow those, and a software prefetch of the next block only adds work
    (3 planes of 33-byte runs in turn: 1.47x the time with it; of 1062-byte runs 0.7x,
    8 streams of 1 KiB runs 0.56x, docs/cpu.md)."""
    loops = plan.loops
    a, nb = loops[plan.a_loop], loops[plan.b_loop].step
    c = loops[plan.c_loop] if plan.c_loop >= 0 else None
    ec = c.step if c is not None else 1
    if a.src_stride == nb:  # the runs along a are one stream a part along c
        length, streams = a.step * nb, 1
        if c is not None and c.src_stride == length:
            length *= ec
        else:
            streams = ec
    else:  # each run along a its own stream
        length, streams = nb, a.step
        if c is not None and c.src_stride == nb:
            length *= ec
        else:
            streams *= ec
    moving = [loop for loop in loops if loop.count > 1]
    few = streams == 1 or (streams <= FOLLOWED_STREAMS and nb * plan.elem_bytes < LINE_BYTES)
    return few and (not moving or moving[-1].step * moving[-1].src_stride == length)


def _grouped_rows(plan: CopyPlan, moved: int, caches: Caches) -> CopyPlan:
    """A plain rows plan whose whole runs are longer than `ROWS_SHORT_BYTES` and apart in
    the source (a slice; not a broadcast row, not runs that follow on there: one stream)
    as blocks of `ROWS_GROUP_BLOCK_BYTES` of runs along the loop outside them: the library
    streams such a block's runs `ROW_GROUP` at a time, line by line, with a software
    prefetch ahead of each (lib/copy_plan.c, `stream_row_groups`)."""
    b = plan.loops[plan.b_loop] if plan.b_loop >= 1 else None
    if b is None or b.step != b.extent or b.extent * plan.elem_bytes <= ROWS_SHORT_BYTES:
        return plan
    a_loop = plan.b_loop - 1
    a = plan.loops[a_loop]
    if a.src_stride in (0, b.extent):
        return plan
    rows = max(ROW_GROUP, ROWS_GROUP_BLOCK_BYTES // (b.extent * plan.elem_bytes)
               // ROW_GROUP * ROW_GROUP)
    loops = list(plan.loops)
    loops[a_loop] = dataclasses.replace(a, step=min(a.extent, rows))
    return _with(plan, loops=tuple(loops), a_loop=a_loop, prefetch=moved > caches.l2)


def _byte_words(canon: CopySpec, sides: tuple[list[int], list[int]], size: int,
                cast: tuple) -> bool:
    """Whether a masked transpose of bytes writes destination rows of 32 bytes or fewer from
    4 valid source rows or fewer (NCHW16 and NCHW32 packs of a few channels): the library
    moves those as words of 4 bytes, 16 rows a few instructions (lib/copy_plan.c,
    `byte_lines`), so a block's fixed work weighs more than the model's price of it."""
    b = sides[1]
    return (size == 1 and not cast and bool(canon.masks) and len(b) == 1
            and canon.sizes[b[0]] <= 32
            and any(abs(m.coeffs[b[0]]) == 1 and m.hi - m.lo <= 4 for m in canon.masks))


def _masks_take(canon: CopySpec, sides: tuple[list[int], list[int]], cast: tuple) -> bool:
    """Whether the library's transpose runs `canon`'s masks on `sides`: one dim each (a
    mask is linear in each), or several where no mask depends on the a side, so that each
    source row is valid or masked whole (a CHWN4 pack's lanes, then the batch: one b side
    whose masked rows are read from a row of the fill) and the copy is not a cast (whose
    fill is no source row)."""
    if not canon.masks or (len(sides[0]) == 1 and len(sides[1]) == 1):
        return True
    return not cast and all(m.coeffs[j] == 0 for m in canon.masks for j in sides[0])


def _prefetched_rows(plan: CopyPlan, moved: int, caches: Caches) -> CopyPlan:
    """A plain rows plan larger than L2 whose streamed runs are long (`LONG_RUN_BYTES`:
    not blocked, `_blocked_rows`) and start or end inside a line, as blocks of one run
    along the loop outside them: the library then asks for the next run's source lines
    and for its destination's first and last lines (written through the cache, so read
    first) a run ahead (lib/copy_plan.c, `block`), as it does for a rows block's."""
    if plan.a_loop >= 0 or plan.b_loop < 1 or moved <= caches.l2:
        return plan
    b = plan.loops[plan.b_loop]
    if (b.step != b.extent or b.extent * plan.elem_bytes < LONG_RUN_BYTES
            or not _stores_stream(plan, caches)):
        return plan
    size, line = plan.dst_bytes, caches.line
    if all(x * size % line == 0 for x in (b.extent, plan.dst_offset,
                                          *(lp.dst_stride for lp in plan.loops if lp != b))):
        return plan  # whole lines: streamed from the source, nothing to read first
    return _with(plan, a_loop=plan.b_loop - 1, prefetch=True)


def _plan_masks(canon: CopySpec, plan: CopyPlan, consumed: int | None,
                sides: tuple[list[int], list[int]] | None = None) -> tuple[PlanMask, ...]:
    """`canon`'s masks on `plan`'s loops: each loop's coefficient is its dim's, the lanes'
    that of the dim the lane kernel consumes; a transpose's `sides` each dim's."""
    side_dims = [*sides[0], *sides[1]] if sides else []
    return tuple(PlanMask(m.lo, m.hi, m.coeffs[consumed] if consumed is not None else 0,
                          tuple(m.coeffs[loop.dim] for loop in plan.loops),
                          tuple(m.coeffs[j] for j in side_dims))
                 for m in canon.masks)


def _rows_followed(plan: CopyPlan) -> bool:
    """Whether a transpose's source rows, each a whole a side shorter than a line, join
    over the whole b side into at most `2 * FOLLOWED_STREAMS` streams (`_joined`) and the
    blocks walk along b: each next block goes on with the streams the hardware
    prefetchers already follow, and a software prefetch of it only adds work."""
    a, b = plan.loops[plan.a_loop], plan.loops[plan.b_loop]
    moving = [k for k, loop in enumerate(plan.loops) if loop.count > 1]
    if not moving or moving[-1] != plan.b_loop:
        return False
    if a.step != a.extent or a.step * plan.elem_bytes >= LINE_BYTES:
        return False
    return _joined(b.extent, a.step, plan.b_side, True, ()).runs <= 2 * FOLLOWED_STREAMS


def _streams_whole_lines(plan: CopyPlan, caches: Caches) -> bool:
    """Whether a transpose's blocks write whole lines: its rows start on a line and are
    whole lines long, or a block's rows are one run, or its rows are long runs (their edge
    lines are few)."""
    size, b_loop = plan.elem_bytes, plan.loops[plan.b_loop]
    joined = (b_loop.step == b_loop.extent <= STRIP_ELEMENTS
              and plan.a_side[0][1] == b_loop.extent)
    return _rows_whole(plan, caches.line) or joined or b_loop.step * size >= LONG_RUN_BYTES


def _rows_whole(plan: CopyPlan, line: int) -> bool:
    """Whether a transpose's destination rows in a block start on a line and are whole
    lines long."""
    size, b_loop = plan.elem_bytes, plan.loops[plan.b_loop]
    return (all(stride * size % line == 0 for _, stride in plan.a_side)
            and plan.dst_offset * size % line == 0
            and b_loop.step * size % line == 0 and b_loop.extent * size % line == 0)


def _thin_joined(plan: CopyPlan, caches: Caches) -> bool:
    """Whether a transpose's block is one run on one side (the a side whole and the b
    side's source rows that far apart, or the b side whole and the a side's destination
    rows that far apart), one of its sides shorter than `THIN_JOINED_BYTES`, its elements
    not bytes and its destination rows not whole lines (those stream from the registers:
    channels-last 64 x 56 x 56 float32 0.70-0.83x as long streamed)."""
    if min(plan.elem_bytes, plan.dst_bytes) < 2 or _rows_whole(plan, caches.line):
        return False
    a, b = plan.loops[plan.a_loop], plan.loops[plan.b_loop]
    src_run = a.step == a.extent and plan.b_side[0][1] == a.extent
    dst_run = b.step == b.extent and plan.a_side[0][1] == b.extent
    return (src_run or dst_run) and min(a.step, b.step) * plan.elem_bytes < THIN_JOINED_BYTES


def _transpose_memory(plan: CopyPlan, moved: int, caches: Caches) -> CopyPlan:
    """A transpose's prefetch, streaming and staging: a copy larger than L2 prefetches each
    next block's source lines while a block runs (the rows of a block are as many streams
    as it has rows, more than the prefetchers follow); its stores stream only where a
    block's destination is whole lines (`_streams_whole_lines`) or the CPU streams partial
    lines well (`Caches.partial_streams`): elsewhere a streamed row that starts or ends
    inside a line writes that line through the cache, mixed with the streamed ones, slower
    than not streaming at all where the rows are short (docs/cpu.md). A block masked by
    rows stages its source rows."""
    if moved > caches.l2 and (bool(plan.masks) or not _rows_followed(plan)):
        plan = _with(plan, prefetch=True)
    partial = (caches.partial_streams
               and plan.loops[plan.b_loop].step * plan.elem_bytes >= PARTIAL_STREAM_BYTES
               and plan.loops[plan.a_loop].step * plan.elem_bytes > LINE_BYTES)
    if not (partial or _streams_whole_lines(plan, caches)):
        plan = _with(plan, stream_bytes=-1)
    if plan.masks and plan.prefetch and (len(plan.a_side) > 1 or len(plan.b_side) > 1):
        # masked by rows (a CHWN4 pack of padded lanes): each block's valid rows are
        # staged, read as runs the prefetchers follow (docs/cpu.md)
        plan = _with(plan, stage=True)
    return plan


def plan_copy(spec: CopySpec, caches: Caches | None = None) -> CopyPlan | None:
    """The plan the model prefers (`candidate_plans`), or None when it takes no plan."""
    plans = candidate_plans(spec, caches, limit=1)
    return plans[0] if plans else None
