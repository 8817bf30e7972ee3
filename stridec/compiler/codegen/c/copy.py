"""C code generation for strided copies: the native CPU backend (`backend="cpu"`).

A C kernel serves a *class* of copies, not one copy: its source depends only on the
strategy and the element types, and everything else — sizes, strides, offsets, mask
coefficients and bounds, the fill bits — is a runtime argument, one `int64` array per
call. One compiled library thus runs every copy of its class, whatever the graph, so a
test suite of thousands of programs builds a few dozen libraries.

`generate_c_copy(spec)` canonicalizes `spec` (`canonicalize_copy`: unit dims dropped,
masks simplified, destination strides made >= 0, dims ordered for writes, dims merged)
and picks a strategy on the canonical dims:

- `linear`: the innermost dim is unit-stride on both sides. Each row (one coordinate of
  the outer dims) is one `memcpy` of its valid run (or a converting run for a cast,
  `casts.c_convert_run`), with the fill written before and after it.
- `tiled_transpose`: the destination is unit-stride innermost and the source unit-stride in
  another dim `u`. That dim is moved next to the innermost (the order of a copy's loops
  does not change its result), and the two are walked in cache-sized tiles; inside a
  tile, V×V blocks (V = vector bytes / element size, the widths in `_TRANSPOSE_WIDTHS`)
  are loaded as V source vectors, transposed in registers by log2(V) rounds of
  interleaves (`__builtin_shuffle`), and stored as V destination vectors. A cast between
  float32 and float16 or bfloat16 converts each transposed row in registers as it is
  stored (`_cast_block`: AVX-512, or 8 lanes with AVX2 and F16C, `_cast_block_8`;
  streamed, from the tile's source rows staged in L2, `staged_cast`); other casts move
  the tile as bits of the source type into a buffer, then convert it row by row. A tile
  side of 2 … `NARROW_MAX` elements (NHWC with C = 3, NCHW4 packs and their padding)
  is moved by in-register interleaves of that many rows (`_narrow`); a wide row of a few
  copied columns and the fill (NCHW32 of C = 3) as whole vectors of the fill and one
  store of its columns (`padded_rows`); a narrow innermost dim that the destination
  continues with dim R-3 (CHWN4: the lanes, then the batch) is merged with it into one
  wide tile side whose source rows the blocks read by pointer (`tile_merged`).
- `gather`: anything else (a strided innermost dim on either side): a strided loop.

Masks restrict each row to one interval: along the row's dim `j`,
`lo <= base + c·j < hi` holds for `j` in `[⌈(lo - base)/c⌉, ⌈(hi - base)/c⌉)` when
`c > 0` (and mirrored for `c < 0`), so a row is `fill`, then a copy, then `fill` —
no per-element test. A transposed tile checks its corners: wholly valid (the vector
path), wholly masked (fill), or mixed (rows with their intervals).

The work is split into units (rows, or chunks of long rows; tiles for a transpose),
walked by an odometer so a unit costs additions, not divisions, and shared among
`nthreads` threads of the process's pool (`codegen/c/pool.py`) when the copy moves at
least `PARALLEL_BYTES`. Indices are `int64` throughout.

The runtime arguments, in order (`copy_params`):

    p[0] = R (rank, >= 1)    p[1] = src offset   p[2] = dst offset   p[3] = M (masks)
    p[4] = 1 when masked elements get the fill, else 0   p[5] = the fill's bits
    p[6] = the destination bytes of the whole launch (a batch: every member's), or 0
           for this call's own (for a cast, the mean of the bytes it reads and writes):
           whether its stores stream (`STREAM_DECLARATION`)
    p[7] = 0                 p[8 : 8+R] sizes    p[8+R : 8+2R] src strides
    p[8+2R : 8+3R] dst strides                   then per mask: R coeffs, lo, hi
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stridec.compiler.codegen.c import plan
from stridec.compiler.codegen.c.casts import (
    C_PRELUDE,
    LANES_8_ISA,
    LANES_ISA,
    c_convert,
    c_convert_lanes,
    c_convert_run,
    c_type,
)
from stridec.compiler.codegen.c.parts import PARTS_DECLARATION
from stridec.compiler.codegen.c.pool import POOL_DECLARATION, STREAM_DECLARATION
from stridec.compiler.codegen.spec import (
    CopySpec,
    canonicalize_copy,
    copy_strategy,
    is_fill_only,
)
from stridec.errors import UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DType, bit_pattern

__all__ = [
    "C_STRATEGIES",
    "CCopyKernel",
    "CKernel",
    "CopyClass",
    "UNIT_SEPARATOR",
    "assemble_kernel",
    "call_fits",
    "copy_class",
    "copy_params",
    "emit_class_source",
    "generate_c_copy",
    "generate_c_copy_batch",
]

C_STRATEGIES = ("linear", "tiled_transpose", "gather")
# Between the compile units of a kernel that calls several classes (a batch).
UNIT_SEPARATOR = "/* ---- stridec compile unit ---- */\n"
HEADER_WORDS = 8

# The unsigned C type moving `n` bytes unchanged: same-dtype copies move bits, so float16,
# int16 and bfloat16 copies share one class (and NaN payloads survive).
_BITS = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
# Vector width (bytes) of the in-register transpose, by element size and the ISA the unit
# is built for (preprocessor conditions, first match; "" is the fallback): V = width /
# size lanes, a V×V block in V registers. AVX-512 has 32 vector registers, so 16 rows
# of 64 bytes (4-byte elements) or of 32 bytes (2-byte elements, whose 16-bit lane
# permutes need AVX512BW) fit without spills; elsewhere 16 registers hold 8 or 16 rows.
_AVX512BW = "defined(__AVX512BW__) && defined(__AVX512VL__)"
_TRANSPOSE_WIDTHS: dict[int, tuple[tuple[str, int], ...]] = {
    1: (("", 16),),
    2: ((_AVX512BW, 32), ("", 16)),
    4: (("defined(__AVX512F__)", 64), ("", 32)),
    8: (("defined(__AVX512F__)", 64), ("", 32)),
}
# Side of a cache tile in elements, by element size: a source and a destination tile of
# 16 KiB or less each, so both stay in L1 while the tile is transposed.
_TILE = {1: 128, 2: 64, 4: 64, 8: 32}


@dataclass(frozen=True, slots=True)
class CopyClass:
    """What a compiled C copy depends on: the strategy and the element types (for a
    same-dtype copy only the element size: bits are moved as they are)."""

    strategy: str
    src: str  # a dtype name, or "bits<size>" for a same-dtype copy
    dst: str

    @property
    def symbol(self) -> str:
        return f"stridec_copy_{self.strategy}_{self.src}_{self.dst}"


def copy_class(spec: CopySpec, strategy: str) -> CopyClass:
    if spec.src_dtype == spec.dst_dtype:
        bits = f"bits{spec.src_dtype.itemsize}"
        return CopyClass(strategy, bits, bits)
    return CopyClass(strategy, spec.src_dtype.name, spec.dst_dtype.name)


def copy_params(canon: CopySpec, order: Sequence[int]) -> tuple[int, ...]:
    """The runtime arguments of `canon` with its dims taken in `order` (module docstring)."""
    r = len(order)
    fill = canon.fill
    words = [r, canon.src_offset, canon.dst_offset, len(canon.masks)]
    words += [0 if fill is None else 1, 0 if fill is None else bit_pattern(fill, canon.dst_dtype)]
    words += [0] * (HEADER_WORDS - len(words))
    words += [canon.sizes[k] for k in order]
    words += [canon.src_strides[k] for k in order]
    words += [canon.dst_strides[k] for k in order]
    for m in canon.masks:
        words += [m.coeffs[k] for k in order] + [m.lo, m.hi]
    return tuple(words)


def call_fits(symbol: str, params: Sequence[int]) -> bool:
    """Whether `params` are whole parameters of the copy call `symbol` (the layout in the
    module docstring, or a planned copy's argument block, `codegen/c/plan.py`): for
    checking a program read back from disk before it runs."""
    p = tuple(params)
    if plan.is_plan_symbol(symbol):
        return plan.plan_call_fits(symbol, p)
    if not symbol.startswith("stridec_copy_") or len(p) < HEADER_WORDS:
        return False
    rank, masks = p[0], p[3]
    return (1 <= rank <= MAX_RANK and masks >= 0 and p[4] in (0, 1)
            and len(p) == HEADER_WORDS + 3 * rank + masks * (rank + 2))


def _rank1(spec: CopySpec) -> CopySpec:
    """A canonical spec of rank 0 (one element) as rank 1: strides 1, coeffs 0."""
    if spec.rank:
        return spec
    from stridec.compiler.codegen.spec import MaskBound

    return CopySpec(
        (1,), (1,), spec.src_offset, (1,), spec.dst_offset, spec.src_dtype, spec.dst_dtype,
        tuple(MaskBound((0,), m.lo, m.hi) for m in spec.masks), spec.fill,
    )


@dataclass(frozen=True, slots=True)
class CKernel:
    """A kernel of the `cpu` backend as calls of compiled C units: `calls` holds one
    `(symbol, src_arg, dst_arg, params)` per call, run one after another as
    `symbol(storage[src_arg], storage[dst_arg], params, nthreads)` over the launch's
    storages; `source` is the C text of every unit it calls, joined by `UNIT_SEPARATOR`.
    The fields after `numel` are keywords, shared with the Triton kernels' records."""

    name: str
    strategy: str
    source: str
    calls: tuple[tuple[str, int, int, tuple[int, ...]], ...]
    numel: int
    _: dataclasses.KW_ONLY
    kind: str = "copy"
    lang: str = "c"
    grid: tuple[int, ...] = (1,)
    index_bits: int = 64
    num_warps: int = 1

    @property
    def constexprs(self) -> dict[str, int]:
        return {}


@dataclass(frozen=True, slots=True)
class CCopyKernel(CKernel):
    """A copy (or a batch of copies into one buffer) as calls of compiled C classes; the
    launch passes storages `(src, dst)`, or `(dst, src_0, …)` for a batch."""


def _strategy_plan(spec: CopySpec) -> tuple[CopyClass, tuple[int, ...]] | None:
    """(class, runtime params) of one copy on the strategies of this module."""
    canon = canonicalize_copy(spec)
    fill_only = is_fill_only(canon)
    if fill_only and canon.fill is None:
        return None
    canon = _rank1(canon)
    if fill_only:  # nothing is read or converted: the class of a same-dtype copy
        canon = dataclasses.replace(canon, src_dtype=canon.dst_dtype)
    strategy, unit = copy_strategy(canon, fill_only)
    order = list(range(canon.rank))
    if unit is not None:  # the source's unit dim goes next to the innermost
        order.remove(unit)
        order.insert(len(order) - 1, unit)
    return copy_class(canon, strategy), copy_params(canon, order)


def assemble_kernel(
    specs: Sequence[CopySpec], args: Sequence[tuple[int, int]], label: str,
    plan_one: Callable[[CopySpec], Sequence[tuple[CopyClass | plan.PlannedClass, tuple]]],
) -> CCopyKernel:
    """One C kernel of `specs`, each planned by `plan_one` (the class and parameters of
    each of its calls: none where it writes nothing), `args` giving each call's storages:
    one unit of the libraries met."""
    calls = []
    call_classes: list[CopyClass | plan.PlannedClass] = []
    classes: list[CopyClass | plan.PlannedClass] = []
    for spec, (src_arg, dst_arg) in zip(specs, args, strict=True):
        if spec.numel == 0:
            continue
        for cls, params in plan_one(spec):
            calls.append((cls.symbol, src_arg, dst_arg, params))
            call_classes.append(cls)
            if all(c.symbol != cls.symbol for c in classes):
                classes.append(cls)
    if len(calls) > 1:
        # A batch writes one buffer: its members stream or not together, by its total (an
        # expression of the symbols over symbolic sizes, as the static plan's number).
        total = sum(s.numel * s.dst_dtype.itemsize for s in specs if s.numel)
        calls = [(sym, a, b, (*p[:6], p[6] if _never_streams(p[6]) else total, *p[7:]))
                 for sym, a, b, p in calls]
    source = UNIT_SEPARATOR.join(_unit_source(c) for c in classes)
    sources = tuple(_source_digest(c) for c in classes)
    digest = hashlib.sha256(repr((sources, calls)).encode()).hexdigest()[:16]
    strategies = [cls.strategy for cls in call_classes]
    strategy = strategies[0] if len(strategies) == 1 else f"{label}({','.join(strategies)})"
    numel = sum(s.numel for s in specs) if calls else 0
    return CCopyKernel(f"stridec_c_copy_{digest}", strategy, source, tuple(calls), numel)


def _never_streams(stream_bytes: object) -> bool:
    return type(stream_bytes) is int and stream_bytes < 0


def _unit_source(cls: CopyClass | plan.PlannedClass) -> str:
    if isinstance(cls, plan.PlannedClass):
        return plan.plan_unit_source(cls.elem_bytes, cls.cast)
    return emit_class_source(cls)


@functools.cache
def _source_digest(cls: CopyClass | plan.PlannedClass) -> str:
    """The digest of a unit's C source: kernels name themselves by their units' digests
    and calls, without hashing the whole text again for every kernel."""
    return hashlib.sha256(_unit_source(cls).encode()).hexdigest()


def generate_c_copy(spec: CopySpec) -> CCopyKernel:
    """The C kernel of one copy, launched as `(src_storage, dst_storage)`; casts convert
    as torch's CPU `.to()` (`codegen/c/casts.py`)."""
    return assemble_kernel([spec], [(0, 1)], "copy", plan.planned_calls)


def generate_c_copy_batch(specs: Sequence[CopySpec]) -> CCopyKernel:
    """The C kernel of copies into one buffer, launched as `(dst, src_0, …, src_{k-1})`;
    the copies run one after another, each on every thread."""
    return assemble_kernel(list(specs), [(j + 1, 0) for j in range(len(specs))], "batch",
                           plan.planned_calls)


# --------------------------------------------------------------------------- C text


def _dtype_of(key: str) -> DType | None:
    from stridec.ir.dtypes import DTYPES

    return DTYPES.get(key)


def _c_type(key: str) -> str:
    return _BITS[int(key[4:])] if key.startswith("bits") else c_type(key)


def _itemsize(key: str) -> int:
    if key.startswith("bits"):
        return int(key[4:])
    dtype = _dtype_of(key)
    assert dtype is not None
    return dtype.itemsize


def _interleave_masks(k: int, lanes: int) -> tuple[list[int], list[int]]:
    """The masks LO and HI of `_interleave_rounds` for vectors of `lanes` elements whose
    every group of k (a 128-bit lane for `vpunpckl/h`, or k = `lanes`: the whole vector)
    is an independent block: LO interleaves the low halves of two vectors' groups, HI
    their high halves."""
    lo = [g * k + j // 2 + (lanes if j % 2 else 0) for g in range(lanes // k) for j in range(k)]
    return lo, [x + k // 2 for x in lo]


def _interleave_rounds(out: list[str], vtype: str, prefix: str, names: list[str]) -> list[str]:
    """Append log2(n) rounds of interleaves of the n vectors `names` to `out` (round r
    pairs rows i and i + n/2 into rows 2i and 2i + 1 by the masks LO and HI,
    `_interleave_masks`); returns the
    names of the last round's vectors."""
    n = len(names)
    for r in range(1, n.bit_length()):
        new = [f"{prefix}{r}_{b}" for b in range(n)]
        for i in range(n // 2):
            a, b = names[i], names[i + n // 2]
            out.append(f"    {vtype} {new[2 * i]} = __builtin_shuffle({a}, {b}, LO);")
            out.append(f"    {vtype} {new[2 * i + 1]} = __builtin_shuffle({a}, {b}, HI);")
        names = new
    return names


def _in_lane_8x8(out: list[str], names: list[str]) -> list[str]:
    """The 8×8 block of 4-byte lanes in 32-byte vectors (AVX2) transposed by shuffles that
    stay inside each 128-bit half but the last round's: rows 2i and 2i + 1 unpacked
    (`vunpckl/hps`), pairs of those merged (`vshufps`), then the halves swapped between
    rows a and a + 4 (`vperm2f128`): 24 shuffles. `_interleave_rounds`' masks cross the
    halves in every round, which AVX2 has no one instruction for (gcc builds each from
    several). Returns the names of the result rows, row a holding column a."""
    def shuffle(name: str, a: str, b: str, mask: Sequence[int]) -> None:
        out.append(f"    vec_t {name} = __builtin_shuffle({a}, {b}, "
                   f"(vec_t){{{', '.join(map(str, mask))}}});")

    unpack = ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])
    pairs = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])
    halves = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])
    for i in range(4):  # t[2i], t[2i+1]: rows 2i and 2i+1, columns (0, 1, 4, 5), (2, 3, 6, 7)
        for h in range(2):
            shuffle(f"t{2 * i + h}", names[2 * i], names[2 * i + 1], unpack[h])
    for g in range(2):  # u[4g + c]: columns c and c + 4 of rows 4g .. 4g + 3
        for h in range(2):
            for m in range(2):
                shuffle(f"u{4 * g + 2 * h + m}", f"t{4 * g + h}", f"t{4 * g + h + 2}", pairs[m])
    for c in range(4):  # column c, then column c + 4, of all 8 rows
        for h in range(2):
            shuffle(f"o{c + 4 * h}", f"u{c}", f"u{c + 4}", halves[h])
    return [f"o{a}" for a in range(8)]


def _transpose_block(elem: str, size: int, width: int, rows: bool = False,
                     stream: bool = False, cast: bool = False) -> list[str]:
    """`tr_block`: a V×V block transposed in registers, V = `width` / `size` lanes; with
    `rows`, `tr_block_rows`, the same block reading source row b at `rows[b] + x` (the rows
    of a merged tile side, some of them a row of the fill); with `cast`, `tr_cast` (see
    `_cast_block`), each transposed row converted by `convert_lanes` as it is stored.

    Round after round, rows i and i + V/2 are interleaved into rows 2i (their low halves)
    and 2i + 1 (their high halves); after log2(V) rounds row a holds column a."""
    lanes = width // size
    lo, hi = _interleave_masks(lanes, lanes)
    if cast:
        out = [
            "/* Block (a, b): source element s[a + b*ss], converted, lands at d[a*ds + b]; a",
            "   row of 16 float32 is one 64-byte store, streamed with nt (d and ds·4 multiples",
            "   of 64 bytes), a row of 16 halves 32 bytes. */",
            "BLOCK_FN void tr_cast(const src_t* s, i64 ss, dst_t* d, i64 ds, int nt) {",
        ]
    elif stream:
        out = [
            "/* tr_block with streaming stores: d and ds·size multiples of 64 bytes. */",
            "#define BLOCK_NT 1", "#define NT_ROWS V", "#define NT_STRIPS 0",
            f"BLOCK_FN void tr_block_nt(const {elem}* s, i64 ss, {elem}* d, i64 ds) {{",
        ]
    elif rows:
        out = [
            "/* Block (a, b): source element rows[b][x + a] lands at d[a*ds + b]. */",
            f"BLOCK_FN void tr_block_rows(const {elem}* const* rows, i64 x, {elem}* d, "
            "i64 ds) {",
        ]
    else:
        out = [
            f"#define V {lanes}",
            f"typedef {elem} bits_t;",
            f"typedef {elem} vec_t __attribute__((vector_size({width})));",
            "",
            "/* Block (a, b), 0 <= a, b < V: source element s[a + b*ss] lands at d[a*ds + b]. */",
            f"BLOCK_FN void tr_block(const {elem}* s, i64 ss, {elem}* d, i64 ds) {{",
        ]
    in_lane = size == 4 and width == 32  # `_in_lane_8x8`, which needs no LO and HI
    out += [] if in_lane else [
        f"    const vec_t LO = {{{', '.join(map(str, lo))}}};",
        f"    const vec_t HI = {{{', '.join(map(str, hi))}}};",
    ]
    names = [f"r0_{b}" for b in range(lanes)]
    for b in range(lanes):
        at = f"rows[{b}] + x" if rows else f"s + {b} * ss"
        out.append(f"    vec_t {names[b]}; memcpy(&{names[b]}, {at}, {width});")
    if in_lane:
        names = _in_lane_8x8(out, names)
    else:
        names = _interleave_rounds(out, "vec_t", "r", names)
    for a in range(lanes):
        if cast and size == 4:  # 16 float32 -> 16 halves (never streamed from here)
            out += ["    (void)nt;"] * (a == 0)
            out += [f"    __m256i h{a} = convert_lanes((__m512){names[a]});",
                    f"    memcpy(d + {a} * ds, &h{a}, 32);"]
        elif cast:  # 16 halves -> 16 float32
            out += [f"    stream_v w{a} = (stream_v)convert_lanes((__m256i){names[a]});",
                    f"    if (nt) __builtin_ia32_movntdq512((stream_v*)(d + {a} * ds), w{a});",
                    f"    else memcpy(d + {a} * ds, &w{a}, 64);"]
        elif stream:
            out.append(f"    __builtin_ia32_movntdq512((stream_v*)(void*)(d + {a} * ds), "
                       f"(stream_v){names[a]});")
        else:
            out.append(f"    memcpy(d + {a} * ds, &{names[a]}, {width});")
    out.append("}")
    return out


# Where a unit built without AVX-512 still stages its 1- and 2-byte tiles (`_wide_blocks`,
# on 32-byte `ymm`: two independent 16×16 byte blocks, or 8×8 blocks of halves, a vector,
# one per 128-bit lane).
_AVX2_WIDE = "defined(__AVX2__)"
# Staged tiles of 1- and 2-byte elements (`_wide_blocks`): (a, b) tile sides in elements.
# A tile reads 64-byte source lines whole (32-byte runs on `ymm`) and writes its
# destination rows (256 bytes) whole from an L1 buffer of 16 KiB.
_WIDE_TILES = {1: (64, 256), 2: (64, 128)}
# Streamed tiles of these sizes whose source rows are first copied into a buffer in L2
# (`staged_tile`): the sides (a, b) of such a tile, in elements (STAGE_A, STAGE_B). 2-byte
# tiles are staged on AVX2 without AVX-512 alone, where staging them pays (docs/cpu.md).
_STAGED = {1: (1024, 256), 2: (1024, 128)}
# Streamed transposing casts converted in registers, their tiles' source rows staged in L2
# (`staged_cast`): (source rows, bytes of each) of a tile of long source rows, and (planes,
# bytes of each over the rows of dim R-3 it spans) of a tile of short ones.
_CAST_STAGED = (128, 2048)
_CAST_GROUPED = (64, 4096)


def _wide_block(size: int, whole: bool = False, width: int = 64) -> list[str]:
    """`tr_wide` for elements of `size` < 4 bytes: K = 16 / size source rows of `width`
    bytes (64: `zmm`; 32: `ymm`, AVX2), each 128-bit lane an independent K×K block,
    transposed in-lane by log2(K) rounds of interleaves (`vpunpckl/h`), into width / size
    destination rows of K elements. With `whole`, `tr_wide_regs`: the same K vectors
    stored whole, `width` bytes apart (lane l of vector j is destination row l·K + j), for
    `tr_lines` to regroup."""
    elem, lanes, k, nl = _BITS[size], width // size, 16 // size, width // 16
    lo, hi = _interleave_masks(k, lanes)
    if whole:
        out = ["/* Source s[a + b*ss] (a < WIDE_L, b < WIDE_K) lands in lane a / K of the",
               "   64 bytes at d + (a % K)·64, element b. */",
               f"BLOCK_FN void tr_wide_regs(const {elem}* s, i64 ss, {elem}* d) {{"]
    else:
        out = ["/* Source s[a + b*ss] (a < WIDE_L, b < WIDE_K) lands at d[a*ds + b]. */",
               f"BLOCK_FN void tr_wide(const {elem}* s, i64 ss, {elem}* d, i64 ds) {{"]
    out += [f"    const wide_t LO = {{{', '.join(map(str, lo))}}};",
            f"    const wide_t HI = {{{', '.join(map(str, hi))}}};"]
    names = [f"w0_{b}" for b in range(k)]
    for b in range(k):
        out.append(f"    wide_t {names[b]}; memcpy(&{names[b]}, s + {b} * ss, {width});")
    names = _interleave_rounds(out, "wide_t", "w", names)
    if whole:
        out += [f"    memcpy(d + {j * lanes}, &{names[j]}, {width});" for j in range(k)]
    else:
        out += [f"    memcpy(d + {lane * k + j} * ds, (const char*)&{names[j]} + {16 * lane}, 16);"
                for lane in range(nl) for j in range(k)]
    return [*out, "}"]


# `tr_lines` (1-byte elements, AVX-512): a 64×64 block whose destination rows are whole
# lines, streamed straight from the registers. The four 16-row blocks of `tr_wide_regs`
# leave destination row l·16 + j in lane l of their vector j; a 4×4 transpose of the
# 128-bit lanes of the four vectors j (`vshufi64x2`, two rounds) makes each of the four a
# whole 64-byte destination row. Against `tr_wide`'s 64 stores of 16 bytes into a buffer
# in L1 and the buffer's rows copied out, per 64 bytes 8 fewer shuffles and 12 fewer
# stores, and the streamed stores spread among the shuffles (docs/cpu.md).
_TR_LINES = r"""#define WIDE_LINES 1
typedef long long lane_q __attribute__((vector_size(64)));
/* Source s[a + b*ss] (a, b < 64) lands at d[a*ds + b]: 64 destination rows of one whole
   line each, d 64-byte aligned and ds a multiple of 64, streamed. */
BLOCK_FN void tr_lines(const uint8_t* s, i64 ss, uint8_t* d, i64 ds) {
    uint8_t z[4 * 1024] __attribute__((aligned(64)));
    const lane_q E = {0, 1, 4, 5, 8, 9, 12, 13}, O = {2, 3, 6, 7, 10, 11, 14, 15};
    for (int g = 0; g < 4; g++) tr_wide_regs(s + 16 * g * ss, ss, z + 1024 * g);
    for (int j = 0; j < 16; j++) {
        lane_q A, B, C, D;
        memcpy(&A, z + 64 * j, 64);
        memcpy(&B, z + 1024 + 64 * j, 64);
        memcpy(&C, z + 2048 + 64 * j, 64);
        memcpy(&D, z + 3072 + 64 * j, 64);
        lane_q T0 = __builtin_shuffle(A, B, E), T1 = __builtin_shuffle(A, B, O);
        lane_q T2 = __builtin_shuffle(C, D, E), T3 = __builtin_shuffle(C, D, O);
        uint8_t* p = d + j * ds;
        __builtin_ia32_movntdq512((lane_q*)(void*)p, __builtin_shuffle(T0, T2, E));
        __builtin_ia32_movntdq512((lane_q*)(void*)(p + 16 * ds), __builtin_shuffle(T1, T3, E));
        __builtin_ia32_movntdq512((lane_q*)(void*)(p + 32 * ds), __builtin_shuffle(T0, T2, O));
        __builtin_ia32_movntdq512((lane_q*)(void*)(p + 48 * ds), __builtin_shuffle(T1, T3, O));
    }
}"""


def _wide_blocks(size: int) -> list[str]:
    """The staged tiles' blocks and sides (`_WIDE_TILES`), for a unit built with AVX512BW,
    else with AVX2 on `ymm` (`_AVX2_WIDE`); staged in L2 (`_STAGED`) with AVX512BW for
    1-byte elements, with AVX2 alone for both sizes."""
    ta, tb = _WIDE_TILES[size]

    def blocks(width: int, staged: bool) -> list[str]:
        return [
            f"#define WIDE_K {16 // size}", f"#define WIDE_L {width // size}",
            f"#define WIDE_A {ta}", f"#define WIDE_B {tb}",
            f"typedef {_BITS[size]} wide_t __attribute__((vector_size({width})));",
            *([f"#define STAGE_A {_STAGED[size][0]}", f"#define STAGE_B {_STAGED[size][1]}"]
              if staged else []),
            *_wide_block(size, width=width),
        ]

    out = [f"#if {_AVX512BW}", *blocks(64, size == 1)]
    if size == 1:
        out += [*_wide_block(size, whole=True), _TR_LINES]
    out += [f"#elif {_AVX2_WIDE}", *blocks(32, True)]
    return [*out, "#endif"]


# The widest tile side moved by in-register interleaves (`_narrow`): the channels of an
# NHWC tensor with C = 3 or of an NCHW4 pack.
NARROW_MAX = 4


def _chain(out: str, lanes: int, ins: Sequence[str], pick) -> list[str]:
    """C statements setting vector `out` from input vectors `ins`: lane l is lane
    pick(l)[1] of input pick(l)[0], by a chain of two-source shuffles, one per input
    after the first (`__builtin_shuffle` with constant masks: gcc's vpermt2*/vpshufb)."""
    used = sorted({pick(lane)[0] for lane in range(lanes)})

    def mask(values: Sequence[int]) -> str:
        return f"(vec_t){{{', '.join(map(str, values))}}}"

    first = used[0]
    if len(used) == 1:
        m = [pick(lane)[1] for lane in range(lanes)]
        return [f"    vec_t {out} = __builtin_shuffle({ins[first]}, {mask(m)});"]
    second = used[1]
    m = []
    for lane in range(lanes):
        k, at = pick(lane)
        m.append(at if k == first else lanes + at if k == second else 0)
    lines = [f"    vec_t {out} = __builtin_shuffle({ins[first]}, {ins[second]}, {mask(m)});"]
    for k in used[2:]:
        m = [lanes + pick(lane)[1] if pick(lane)[0] == k else lane for lane in range(lanes)]
        lines.append(f"    {out} = __builtin_shuffle({out}, {ins[k]}, {mask(m)});")
    return lines


def _stream_vec(width: int) -> list[str]:
    """`stream_vec(p, v)`: vector `v` (`width` bytes) to `p`, aligned to `width`, with a
    streaming store where the ISA the unit is built for has one (`vmovntdq` of an `xmm`,
    `ymm` or `zmm`; a 32-byte vector as two 16-byte ones with SSE2 alone), else `memcpy`."""
    store = {
        64: [("defined(__AVX512F__)", ["__builtin_ia32_movntdq512((nt_t*)(void*)p, (nt_t)v);"])],
        32: [("defined(__AVX__)", ["__builtin_ia32_movntdq256((nt_t*)(void*)p, (nt_t)v);"]),
             ("defined(__SSE2__)", ["nt_t h[2];", "memcpy(h, &v, 32);",
                                     "__builtin_ia32_movntdq((nt_t*)(void*)p, h[0]);",
                                     "__builtin_ia32_movntdq((nt_t*)(void*)p + 1, h[1]);"])],
        16: [("defined(__SSE2__)", ["__builtin_ia32_movntdq((nt_t*)(void*)p, (nt_t)v);"])],
    }[width]
    out = [f"/* A {width}-byte vector streamed to p (aligned to {width} bytes). */"]
    for j, (condition, body) in enumerate(store):
        nt_width = 16 if width == 32 and "SSE2" in condition else width
        out += [f"#{'if' if j == 0 else 'elif'} {condition}",
                f"typedef long long nt_t __attribute__((vector_size({nt_width})));",
                "BLOCK_FN void stream_vec(bits_t* p, vec_t v) {",
                *(f"    {line}" for line in body), "}"]
    return [*out, "#else", "BLOCK_FN void stream_vec(bits_t* p, vec_t v) {",
            f"    memcpy(p, &v, {width});", "}", "#endif"]


def _narrow(size: int, width: int) -> list[str]:
    """In-register interleaves for tiles with a side of K = 2 … NARROW_MAX elements (and
    fewer than V): `interleaveK` writes K columns of rows a0 .. a1 from K source rows
    (columns outside [lo, hi) get the fill: the padding of a pack), V rows per K vector
    loads, shuffles and stores; `deinterleaveK` splits K interleaved source rows (the
    channels of NHWC with C = K) into K destination rows. `narrow_columns` and `narrow_rows`
    dispatch on K and return 0 where no such function exists."""
    lanes = width // size
    ks = [k for k in range(2, NARROW_MAX + 1) if k < lanes]
    # Called once per tile, each a few hundred vector instructions: kept out of line and
    # built at -O2 (the shuffles are explicit), which halves the unit's compile time.
    out = ["#ifndef NARROW_FN",
           '#define NARROW_FN static __attribute__((noinline, optimize("O2")))', "#endif",
           *_stream_vec(width)]
    for k in ks:
        ins = [f"p{j}" for j in range(k)]
        out += [
            f"NARROW_FN void interleave{k}(const bits_t* s, i64 ssb, bits_t* d, i64 dsa, i64 a0,",
            "                             i64 a1, i64 lo, i64 hi, bits_t fill) {",
            "    const vec_t F = (vec_t){0} + fill;",
            "    i64 a = a0;",
            "    for (; a + V <= a1; a += V) {",
        ]
        for j in range(k):
            out.append(f"        vec_t {ins[j]} = F;")
            out.append(f"        if ({j} >= lo && {j} < hi) memcpy(&{ins[j]}, s + a + {j} * ssb, "
                       f"{width});")
        names = [f"o{o}" for o in range(k)]
        for o in range(k):
            out += ["    " + line for line in _chain(
                names[o], lanes, ins,
                lambda lane, o=o, k=k: ((o * lanes + lane) % k, (o * lanes + lane) // k))]
        out.append(f"        if (dsa == {k}) {{")
        for o in range(k):
            out.append(f"            memcpy(d + a * {k} + {o * lanes}, &{names[o]}, {width});")
        out += ["        } else {", f"            bits_t buf[{k * lanes}];"]
        for o in range(k):
            out.append(f"            memcpy(buf + {o * lanes}, &{names[o]}, {width});")
        out += [
            "            for (i64 x = 0; x < V; x++)",
            f"                memcpy(d + (a + x) * dsa, buf + {k} * x, {k * size});",
            "        }",
            "    }",
            "    for (; a < a1; a++)",
            f"        for (i64 j = 0; j < {k}; j++)",
            "            d[a * dsa + j] = j >= lo && j < hi ? s[a + j * ssb] : fill;",
            "}",
            "",
            f"NARROW_FN void deinterleave{k}(const bits_t* s, bits_t* d, i64 dsa, i64 b0, "
            "i64 b1, int nt) {",
            "    i64 b = b0;",
            "    for (; b + V <= b1; b += V) {",
        ]
        cs = [f"c{j}" for j in range(k)]
        for j in range(k):
            out.append(f"        vec_t {cs[j]}; memcpy(&{cs[j]}, s + {k} * b + {j * lanes}, "
                       f"{width});")
        for a in range(k):
            out += ["    " + line for line in _chain(
                f"r{a}", lanes, cs,
                lambda lane, a=a, k=k: ((lane * k + a) // lanes, (lane * k + a) % lanes))]
        for a in range(k):
            out.append(f"        if (nt) stream_vec(d + {a} * dsa + b, r{a});")
            out.append(f"        else memcpy(d + {a} * dsa + b, &r{a}, {width});")
        out += [
            "    }",
            "    for (; b < b1; b++)",
            f"        for (i64 a = 0; a < {k}; a++) d[a * dsa + b] = s[a + {k} * b];",
            "}",
            "",
        ]
    q = ks[-1]
    out += [
        "/* Rows a0 .. a1 of nb elements at d + a*dsa, columns [lo, lo + k) from the k source",
        "   planes s + j*ssb (at a) and the others the fill: each row written as whole vectors",
        f"   of the fill, then its k elements ({q} where they fit: the fill after the k). */",
        "typedef bits_t line_t __attribute__((vector_size(64)));",
        "/* n elements of the fill at p: 64-byte stores, then 32, 16 and single elements. */",
        "static inline void fill_lines(bits_t* p, i64 n, const line_t* LF, bits_t fill) {",
        "    i64 j = 0;",
        "    for (; j + 64 / (i64)sizeof(bits_t) <= n; j += 64 / (i64)sizeof(bits_t))",
        "        memcpy(p + j, LF, 64);",
        "    i64 left = (n - j) * (i64)sizeof(bits_t);",
        "    if (left >= 32) { memcpy(p + j, LF, 32); j += 32 / sizeof(bits_t); left -= 32; }",
        "    if (left >= 16) { memcpy(p + j, LF, 16); j += 16 / sizeof(bits_t); }",
        "    for (; j < n; j++) p[j] = fill;",
        "}",
        "/* With `nt` and contiguous rows of whole lines, at most 256 bytes (NCHW64 of int8),",
        "   the rows are assembled in a buffer in L1, 4 KiB at a time, and streamed as one",
        "   run (not rows of 32 bytes, NCHW32 of int8: slower so, docs/cpu.md). */",
        *(_PADDED_WORDS_DECLARATION if size == 1 else []),
        "NARROW_FN void padded_rows(const bits_t* s, i64 ssb, bits_t* d, i64 dsa, i64 a0, i64 a1,",
        "                           i64 nb, i64 lo, i64 k, bits_t fill, int nt) {",
        "#ifdef PADDED_WORDS",
        "    if (dsa == nb) a0 = padded_words(s, ssb, d, a0, a1, nb, lo, k, fill, nt);",
        "#endif",
        "    const line_t LF = (line_t){0} + fill;",
        f"    i64 q = lo + {q} <= nb ? {q} : k;",
        f"    bits_t buf[{q} * V];",
        "    bits_t run[4096 / sizeof(bits_t)] __attribute__((aligned(64)));",
        "    i64 row_bytes = nb * (i64)sizeof(bits_t);",
        "    nt = nt && dsa == nb && row_bytes % 64 == 0 && row_bytes <= 256;",
        "    i64 start = a0, cap = nt ? (i64)(sizeof run / sizeof(bits_t)) / nb : 0;",
        "    for (i64 a = a0; a < a1; a += V) {",
        "        i64 e = a + V < a1 ? a + V : a1;",
        f"        interleave{q}(s + a, ssb, buf, {q}, 0, e - a, 0, k, fill);",
        "        if (nt) {  /* rows start .. e in the buffer; streamed when it is full */",
        "            bits_t* r = run + (a - start) * nb;",
        "            fill_lines(r, (e - a) * nb, &LF, fill);",
        "            for (i64 x = 0; x < e - a; x++) {",
        f"                if (q == {q})",
        f"                    memcpy(r + x * nb + lo, buf + {q} * x, {q} * sizeof(bits_t));",
        f"                else for (i64 c = 0; c < k; c++) r[x * nb + lo + c] = buf[{q} * x + c];",
        "            }",
        "            if (e == a1 || e + V - start > cap) {",
        "                stream_copy(d + start * dsa, run,",
        "                            (size_t)((e - start) * nb) * sizeof(bits_t));",
        "                start = e;",
        "            }",
        "            continue;",
        "        }",
        "        if (dsa == nb) {  /* contiguous rows: their fill as one run */",
        "            fill_lines(d + a * dsa, (e - a) * nb, &LF, fill);",
        "        } else {",
        "            for (i64 x = a; x < e; x++) fill_lines(d + x * dsa, nb, &LF, fill);",
        "        }",
        "        for (i64 x = a; x < e; x++) {",
        "            bits_t* row = d + x * dsa;",
        f"            if (q == {q}) memcpy(row + lo, buf + {q} * (x - a), {q} * sizeof(bits_t));",
        f"            else for (i64 c = 0; c < k; c++) row[lo + c] = buf[{q} * (x - a) + c];",
        "        }",
        "    }",
        "}",
        "",
    ]
    out.append("static int narrow_columns(const bits_t* s, i64 ssb, bits_t* d, i64 dsa, i64 a0, "
               "i64 a1, i64 k,")
    out.append("                          i64 lo, i64 hi, bits_t fill) {")
    out.append("    switch (k) {")
    for k in ks:
        out.append(f"    case {k}: interleave{k}(s, ssb, d, dsa, a0, a1, lo, hi, fill); return 1;")
    out += ["    default: return 0;", "    }", "}", ""]
    out.append("static int narrow_rows(const bits_t* s, bits_t* d, i64 dsa, i64 b0, i64 b1, "
               "i64 k, int nt) {")
    out.append("    switch (k) {")
    for k in ks:
        out.append(f"    case {k}: deinterleave{k}(s, d, dsa, b0, b1, nt); return 1;")
    out += ["    default: return 0;", "    }", "}"]
    return out


_PADDED_WORDS_DECLARATION = [
    "#if defined(__AVX512F__) && !defined(__clang__)",
    "#define PADDED_WORDS 1",
    "static i64 padded_words(const bits_t* s, i64 ssb, bits_t* d, i64 a0, i64 a1, i64 nb,",
    "                        i64 lo, i64 k, bits_t fill, int nt);",
    "#endif",
]


def _padded_words() -> list[str]:
    """`padded_words` (1-byte elements, AVX-512): the padded rows of `padded_rows` (NCHW32
    and NCHW64 packs of C = 3 int8: a row of 32 or 64 bytes, its 3 channels and the fill)
    built whole in registers, 16 rows at a time. The 16 rows' channels are moved as 16
    words of 4 bytes (as `tr_words` does: each channel's 16 bytes zero-extended to 32 bits
    and shifted into its byte, the 4th byte the fill), and each 64-byte line of
    the 16 rows is one two-source permute of those words and a vector of the fill
    (`vpermt2d`; the mask of a line is a few vector operations, row sizes being powers of
    two), stored whole: streamed straight from the register when the call streams. A row's
    fill stored first and its channel bytes over it costs more CPU time than the memory
    takes to write the row (docs/cpu.md). Defined after `group_lane` (`_group_words`),
    declared in `_narrow`."""
    return [
        "/* Rows a0 .. a1 of nb bytes (a power of two, 16 .. 256), row a at d + a*nb (row a0",
        "   64-byte aligned), each the fill but for its k <= 4 channels (planes s + j*ssb, at",
        "   a) at byte lo, a multiple of 4: whole groups of 16 rows; returns the first row not",
        "   written (a0 if none). Word g of a group (4 bytes) is word g % per of its row",
        "   g / per, per = nb / 4. With per <= 16 a line holds 16 / per rows, their channel",
        "   words at the lanes j with j % per == lo / 4; with per > 16 a row spans per / 16",
        "   lines, its channel word at lane (lo / 4) % 16 of line (lo / 4) / 16. */",
        "static i64 padded_words(const bits_t* s, i64 ssb, bits_t* d, i64 a0, i64 a1, i64 nb,",
        "                        i64 lo, i64 k, bits_t fill, int nt) {",
        "    if (nb < 16 || nb > 256 || (nb & (nb - 1)) || lo % 4 || lo + 4 > nb || k > 4",
        "        || ((uintptr_t)(d + a0 * nb) & 63))",
        "        return a0;",
        "    const i64 per = nb / 4, lines = nb / 4, c = lo / 4;",
        "    const word_v base = (word_v){0} + ((uint32_t)fill * 0x01010101u",
        "                                       & (k == 4 ? 0u : ~0u << (8 * k)));",
        "    const int sh = __builtin_ctzll((unsigned long long)per);",
        "    const word_v J = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};",
        "    const word_v F = (word_v){0} + (uint32_t)fill * 0x01010101u;",
        "    const word_v on = per <= 16 ? (word_v)((J & (uint32_t)(per - 1)) == (uint32_t)c)",
        "                                 : (word_v)(J == (uint32_t)(c & 15));",
        "    const word_v other = ~on & (J + 16);  /* the fill's lanes */",
        "    const word_v first = per <= 16 ? on & (J >> sh) : (word_v){0};",
        "    const word_v step = on & (uint32_t)(per <= 16 ? 16 >> sh : 0);",
        "    i64 a = a0;",
        "    for (; a + 16 <= a1; a += 16) {",
        "        word_v w = base;  /* the 16 rows' channels as words, fill above k */",
        "        for (i64 j = 0; j < k; j++) w |= group_lane(s + a + j * ssb) << (8 * j);",
        "        bits_t* o = d + a * nb;",
        "        for (i64 l = 0; l < lines; l++) {",
        "            word_v v = F;",
        "            if (per <= 16)",
        "                v = __builtin_shuffle(w, F, (first + (uint32_t)l * step) | other);",
        "            else if ((l & ((per >> 4) - 1)) == c >> 4)",
        "                v = __builtin_shuffle(w, F, (on & (uint32_t)(l >> (sh - 4))) | other);",
        "            if (nt)",
        "                __builtin_ia32_movntdq512((stream_v*)(void*)(o + 64 * l), (stream_v)v);",
        "            else memcpy(o + 64 * l, &v, 64);",
        "        }",
        "    }",
        "    return a;",
        "}",
    ]


def _transpose_blocks(size: int, narrow: bool) -> str:
    """`tr_block` for elements of `size` bytes: the widest block the host's vector registers
    hold without spilling (the unit is built with -march=native), one variant per ISA; with
    `narrow`, the interleaves of `_narrow` (a same-type copy: a cast does not use them)."""
    variants = _TRANSPOSE_WIDTHS[size]
    elem = _BITS[size]
    text: list[str] = []
    for k, (condition, width) in enumerate(variants):
        if condition:
            text.append(f"#{'if' if k == 0 else 'elif'} {condition}")
        elif k:
            text.append("#else")
        text += _transpose_block(elem, size, width)
        if width == 64:  # AVX-512: a row of the block is one whole line
            text += _transpose_block(elem, size, width, stream=True)
        if size == 2 and width == 16 and narrow:
            text += _lines_block_2()
        if narrow:
            text += _transpose_block(elem, size, width, rows=True)
        if narrow:
            text += _narrow(size, width)
    if len(variants) > 1:
        text.append("#endif")
    if narrow and size in _WIDE_TILES:
        text += _wide_blocks(size)
    if narrow and size == 1:
        text += _group_words()
    return "\n".join(text)


# JOIN8(x, y): two vectors of 8 halves as the low and high 128-bit lanes of one of 16
# (`vperm2i128`). Through memory instead (two 16-byte stores, one 32-byte load), each
# load waits for the stores: forwarding fails.
_JOIN8 = [
    "#if defined(__has_builtin)", "#if __has_builtin(__builtin_shufflevector)",
    "#define JOIN8(x, y) __builtin_shufflevector(x, y, " + ", ".join(map(str, range(16))) + ")",
    "#endif", "#endif", "#ifndef JOIN8",
    "static inline half16_t join8(half8_t x, half8_t y) {",
    "    half16_t c;", "    memcpy(&c, &x, 16);", "    memcpy((char*)&c + 16, &y, 16);",
    "    return c;", "}", "#define JOIN8(x, y) join8(x, y)", "#endif",
]


def _lines_block_2() -> list[str]:
    """`tr_block_nt` (2-byte elements, AVX2 without AVX-512): 8 source columns by 32
    source rows, each destination row one whole 64-byte line, streamed from the registers
    (two `ymm`), for the streamed tiles walked in strips (`stream_tile`), which are then
    32 source rows wide (STRIP_ROWS). Source rows b and b + 8 are the two 128-bit lanes of
    one `ymm` of 16 halves, transposed in-lane by 3 rounds of `vpunpckl/h`, so row a of
    the result is column a of 16 source rows: 16 halves of a destination row; two such
    blocks (32 rows) make its line, the first held in L1 while the second is built.

    Faster than 8×8 `xmm` blocks through an L1 buffer on strip-walked tiles; tiles not
    walked in strips (NHWC -> NCHW) keep the buffer, as fast there (docs/cpu.md)."""
    lo, hi = _interleave_masks(8, 16)
    out = ["#if defined(__AVX2__) && !defined(__AVX512F__)", "#define BLOCK_NT 1",
           "#define NT_ROWS 32", "#define NT_STRIPS 1",
           "typedef uint16_t half8_t __attribute__((vector_size(16)));",
           "typedef uint16_t half16_t __attribute__((vector_size(32)));", *_JOIN8,
           "typedef long long nt32_t __attribute__((vector_size(32)));",
           "/* Block (a, b), a < 8, b < 32: source element s[a + b*ss] lands at d[a*ds + b];",
           "   d 64-byte aligned and ds·2 a multiple of 64: each row one line, streamed. */",
           "BLOCK_FN void tr_block_nt(const bits_t* s, i64 ss, bits_t* d, i64 ds) {",
           f"    const half16_t LO = {{{', '.join(map(str, lo))}}};",
           f"    const half16_t HI = {{{', '.join(map(str, hi))}}};",
           "    half16_t z[8];"]
    for g in range(2):
        names = [f"c{g}0_{b}" for b in range(8)]
        for b in range(8):
            out += [f"    half8_t x{g}{b}, y{g}{b};",
                    f"    memcpy(&x{g}{b}, s + {16 * g + b} * ss, 16);",
                    f"    memcpy(&y{g}{b}, s + {16 * g + b + 8} * ss, 16);",
                    f"    half16_t {names[b]} = JOIN8(x{g}{b}, y{g}{b});"]
        names = _interleave_rounds(out, "half16_t", f"c{g}", names)
        for a in range(8):
            if g == 0:
                out.append(f"    z[{a}] = {names[a]};")
                continue
            out += [f"    __builtin_ia32_movntdq256((nt32_t*)(void*)(d + {a} * ds), "
                    f"(nt32_t)z[{a}]);",
                    f"    __builtin_ia32_movntdq256((nt32_t*)(void*)(d + {a} * ds) + 1, "
                    f"(nt32_t){names[a]});"]
    return [*out, "}", "#endif"]


def _cast_block(src: str) -> str:
    """`tr_cast` of a transposing cast whose pair converts in registers
    (`casts.c_convert_lanes`: float32 <-> float16 and bfloat16), for units built for
    `LANES_ISA`: the V×V block of `tr_block` on the source's bits (16×16 either way: 32-bit
    lanes on `zmm`, 16-bit lanes on `ymm`), each transposed row converted between the
    shuffles and the store instead of in a pass over a buffer. A row of float32 from
    halves is one whole 64-byte line (streamed straight from the register where the
    destination's rows are whole lines); a row of halves from float32 is half a line.

    Blocks of 32 source rows whose rows are whole lines (`_cast_lines`) serve only the
    tiles staged in L2 (`staged_cast`): read from memory, 32 rows 16 KiB apart fall in one
    set of L1 (docs/cpu.md)."""
    size = _itemsize(src)
    width = {4: 64, 2: 32}[size]
    lines = _cast_lines() if size == 4 else []
    return "\n".join([f"#if {LANES_ISA}", "#define CAST_BLOCK 1",
                      f"#define CAST_WIDENS {int(size == 2)}",
                      f"#define CAST_ROW_LINES {int(size == 2)}",
                      *_transpose_block(_BITS[size], size, width, cast=True), *lines,
                      f"#elif {LANES_8_ISA}", *_cast_block_8(size), "#endif"])


def _cast_block_8(size: int) -> list[str]:
    """The transposing cast's blocks on a unit built for AVX2 and F16C without AVX-512
    (`casts.LANES_8_ISA`: 8 lanes to a conversion). The 8 float32 of a source row (a
    `ymm`) convert into 8 halves (an `xmm`), so the shuffles are always of 16-bit lanes,
    on the halves, after the conversion or before it. `tr_cast`: an 8×8 block, its
    rows of 8 halves (16 bytes) or 8 float32 (32 bytes) never whole lines.
    `tr_cast_lines`: 8 source columns by CAST_LINE_ROWS source rows whose every
    destination row is one whole 64-byte line (streamed with nt): source rows b and b + 8
    as the two 128-bit lanes of one `ymm` of 16 halves, transposed in-lane (3 rounds of
    `vpunpckl/h`), so row a of the result is column a of source rows 0 … 15, 16 halves;
    from float32 two such blocks (32 rows), the first held in L1 while the second is
    built, from float16 one, each row widened into two `ymm` of float32."""
    lo8, hi8 = _interleave_masks(8, 8)
    lo, hi = _interleave_masks(8, 16)
    narrowing = size == 4
    out = ["#define CAST_BLOCK 1", f"#define CAST_WIDENS {int(not narrowing)}",
           "#define CAST_ROW_LINES 0", "#define CAST_LINES 1",
           f"#define CAST_LINE_ROWS {32 if narrowing else 16}",
           "typedef uint16_t half8_t __attribute__((vector_size(16)));",
           "typedef uint16_t half16_t __attribute__((vector_size(32)));",
           "/* Block (a, b), a, b < 8: source element s[a + b*ss], converted, lands at",
           "   d[a*ds + b]. */",
           "BLOCK_FN void tr_cast(const src_t* s, i64 ss, dst_t* d, i64 ds, int nt) {",
           "    (void)nt;",
           f"    const half8_t LO = {{{', '.join(map(str, lo8))}}};",
           f"    const half8_t HI = {{{', '.join(map(str, hi8))}}};"]
    names = [f"r0_{b}" for b in range(8)]
    for b in range(8):
        if narrowing:
            out += [f"    __m256 x{b}; memcpy(&x{b}, s + {b} * ss, 32);",
                    f"    half8_t {names[b]} = (half8_t)convert_lanes(x{b});"]
        else:
            out.append(f"    half8_t {names[b]}; memcpy(&{names[b]}, s + {b} * ss, 16);")
    names = _interleave_rounds(out, "half8_t", "r", names)
    for a in range(8):
        if narrowing:
            out.append(f"    memcpy(d + {a} * ds, &{names[a]}, 16);")
        else:
            out += [f"    __m256 w{a} = convert_lanes((__m128i){names[a]});",
                    f"    memcpy(d + {a} * ds, &w{a}, 32);"]
    out += ["}", "",
            "/* Block (a, b), a < 8, b < CAST_LINE_ROWS: source element s[a + b*ss], converted,",
            "   lands at d[a*ds + b]; each row one 64-byte line, streamed with nt. */",
            "BLOCK_FN void tr_cast_lines(const src_t* s, i64 ss, dst_t* d, i64 ds, int nt) {",
            f"    const half16_t LO = {{{', '.join(map(str, lo))}}};",
            f"    const half16_t HI = {{{', '.join(map(str, hi))}}};"]
    if narrowing:
        out.append("    half16_t z[8];")
    for g in range(2 if narrowing else 1):
        names = [f"c{g}0_{b}" for b in range(8)]
        for b in range(8):
            r0, r1 = 16 * g + b, 16 * g + b + 8
            if narrowing:
                out += [f"    __m256 x{g}{b}, y{g}{b};",
                        f"    memcpy(&x{g}{b}, s + {r0} * ss, 32);",
                        f"    memcpy(&y{g}{b}, s + {r1} * ss, 32);",
                        f"    half16_t {names[b]} = (half16_t)_mm256_set_m128i("
                        f"convert_lanes(y{g}{b}), convert_lanes(x{g}{b}));"]
            else:
                out += [f"    __m128i x{b}, y{b};", f"    memcpy(&x{b}, s + {r0} * ss, 16);",
                        f"    memcpy(&y{b}, s + {r1} * ss, 16);",
                        f"    half16_t {names[b]} = (half16_t)_mm256_set_m128i(y{b}, x{b});"]
        names = _interleave_rounds(out, "half16_t", f"c{g}", names)
        for a in range(8):
            if narrowing and g == 0:
                out.append(f"    z[{a}] = {names[a]};")
                continue
            if narrowing:
                first, second = f"z[{a}]", names[a]
            else:
                out += [f"    __m256 lo{a} = convert_lanes(_mm256_castsi256_si128("
                        f"(__m256i){names[a]}));",
                        f"    __m256 hi{a} = convert_lanes(_mm256_extracti128_si256("
                        f"(__m256i){names[a]}, 1));"]
                first, second = f"lo{a}", f"hi{a}"
            out += ["    if (nt) {",
                    f"        __builtin_ia32_movntdq256((stream_v*)(void*)(d + {a} * ds), "
                    f"(stream_v){first});",
                    f"        __builtin_ia32_movntdq256((stream_v*)(void*)(d + {a} * ds) + 1, "
                    f"(stream_v){second});",
                    "    } else {",
                    f"        memcpy(d + {a} * ds, &{first}, 32);",
                    f"        memcpy((char*)(d + {a} * ds) + 32, &{second}, 32);",
                    "    }"]
    return [*out, "}"]


def _cast_lines() -> list[str]:
    """`tr_cast_lines`: a block of 32 float32 source rows by 16 columns narrowed to 16-bit
    halves whose every destination row is one whole 64-byte line. Source rows b and b + 16
    are converted into the two 256-bit halves of one `zmm` of 32 halves, and the 16 `zmm`
    then transposed as two independent 16×16 blocks of 16-bit lanes, one in each half
    (`vpermt2w`): row a holds column a of source rows 0 … 15, then of rows 16 … 31. Half
    the shuffles of two `tr_cast` blocks, and no buffer for the rows of halves; but its 32
    source rows must not share a set of L1 (read from the rows staged in L2 at a pitch of
    a line more than a power of two, `staged_cast`)."""
    lanes, half = 32, 8
    lo = [k // 2 if k % 2 == 0 else 16 + k // 2 for k in range(16)]
    hi = [half + k // 2 if k % 2 == 0 else 16 + half + k // 2 for k in range(16)]

    def spread(index: list[int]) -> list[int]:  # the 16-lane masks, in each 256-bit half
        out = []
        for h in (0, 16):
            out += [i + h if i < 16 else lanes + i - 16 + h for i in index]
        return out

    out = [
        "#define CAST_LINES 1",
        "#define CAST_LINE_ROWS 32",
        "typedef uint16_t lines_t __attribute__((vector_size(64)));",
        "/* Block (a, b), a < 16, b < 32: source element s[a + b*ss], converted, lands at",
        "   d[a*ds + b]; each row one 64-byte store, streamed with nt. */",
        "BLOCK_FN void tr_cast_lines(const src_t* s, i64 ss, dst_t* d, i64 ds, int nt) {",
        f"    const lines_t LO = {{{', '.join(map(str, spread(lo)))}}};",
        f"    const lines_t HI = {{{', '.join(map(str, spread(hi)))}}};",
    ]
    names = [f"c0_{b}" for b in range(16)]
    for b in range(16):
        out += [f"    __m512 x{b}, y{b};", f"    memcpy(&x{b}, s + {b} * ss, 64);",
                f"    memcpy(&y{b}, s + {b + 16} * ss, 64);",
                f"    lines_t {names[b]} = (lines_t)_mm512_inserti64x4(",
                f"        _mm512_castsi256_si512(convert_lanes(x{b})), convert_lanes(y{b}), 1);"]
    names = _interleave_rounds(out, "lines_t", "c", names)
    for a in range(16):
        out += [f"    if (nt) __builtin_ia32_movntdq512((stream_v*)(void*)(d + {a} * ds), "
                f"(stream_v){names[a]});",
                f"    else memcpy(d + {a} * ds, &{names[a]}, 64);"]
    return [*out, "}"]


def _stream_lanes(src: str) -> str:
    """`stream_lanes(s, d)` of a converting run whose pair converts in registers
    (`casts.c_convert_lanes`): LANE_RUN elements converted into one 64-byte line at d
    (aligned), streamed from the register: 32 float32 (two `zmm`) into 32 halves, or 16
    halves (a `ymm`) into 16 float32. The buffer it replaces is a second pass over each
    line in L1."""
    narrowing = _itemsize(src) == 4
    if narrowing:
        body = ["    __m512 x, y;", "    memcpy(&x, s, 64);", "    memcpy(&y, s + 16, 64);",
                "    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(convert_lanes(x)),",
                "                                   convert_lanes(y), 1);"]
    else:
        body = ["    __m256i h;", "    memcpy(&h, s, 32);", "    __m512 v = convert_lanes(h);"]
    return "\n".join([f"#if {LANES_ISA}", f"#define LANE_RUN {32 if narrowing else 16}",
                      "static inline void stream_lanes(const src_t* s, dst_t* d) {", *body,
                      "    __builtin_ia32_movntdq512((stream_v*)d, (stream_v)v);", "}",
                      "#endif"])


def _group_words() -> list[str]:
    """`tr_words` (1-byte elements, AVX-512; with AVX2 alone `_group_words_avx2`'s): the
    merged tile of a CHWN4 pack moves whole
    groups of 4 lanes as 32-bit words. Word k of source column x is the bytes
    rows[4k + l][x] (l < 4: a group's lanes, each a source row or a row of the fill),
    built by zero-extending 16 bytes of each row to 32 bits (`vpmovzxbd`) and shifting
    them into place; the 16 words of 16 groups are then transposed as a 16×16 block of 32-bit
    elements (4 rounds of interleaves, `vpermt2d`), so that one 64-byte row of the
    destination holds 16 whole groups of one column. Per destination byte this costs a
    quarter of the byte blocks' shuffles (16×16 bytes, 4 rounds of 16 shuffles)."""
    lanes = 16
    half = lanes // 2
    lo = [k // 2 if k % 2 == 0 else lanes + k // 2 for k in range(lanes)]
    hi = [half + k // 2 if k % 2 == 0 else lanes + half + k // 2 for k in range(lanes)]
    out = [
        "#if defined(__AVX512F__) && !defined(__clang__)",
        "#define GROUP_WORDS 1",
        "#define WORDS_X 16  /* source columns of a tr_words block */",
        "typedef uint32_t word_v __attribute__((vector_size(64)));",
        "typedef int32_t iword_v __attribute__((vector_size(64)));",
        "typedef char byte_v __attribute__((vector_size(16)));",
        "/* 16 bytes zero-extended to 32 bits: one vpmovzxbd (gcc's __builtin_convertvector",
        "   of the same moves the bytes one by one). */",
        "static inline word_v group_lane(const uint8_t* r) {",
        "    byte_v b;",
        "    memcpy(&b, r, 16);",
        "    return (word_v)__builtin_ia32_pmovzxbd512_mask(b, (iword_v){0}, (unsigned short)-1);",
        "}",
        "/* Column x + a of 16 groups (rows[0 .. 64)) lands at d[a*ds .. a*ds + 64). */",
        "BLOCK_FN void tr_words(const uint8_t* const* rows, i64 x, uint8_t* d, i64 ds,",
        "                            int nt) {",
        f"    const word_v LO = {{{', '.join(map(str, lo))}}};",
        f"    const word_v HI = {{{', '.join(map(str, hi))}}};",
    ]
    names = [f"g0_{k}" for k in range(lanes)]
    for k in range(lanes):
        r = 4 * k
        out.append(f"    word_v {names[k]} = group_lane(rows[{r}] + x) "
                   f"| group_lane(rows[{r + 1}] + x) << 8")
        out.append(f"        | group_lane(rows[{r + 2}] + x) << 16 "
                   f"| group_lane(rows[{r + 3}] + x) << 24;")
    names = _interleave_rounds(out, "word_v", "g", names)
    for a in range(lanes):
        out.append(f"    if (nt) __builtin_ia32_movntdq512((stream_v*)(void*)(d + {a} * ds), "
                   f"(stream_v){names[a]});")
        out.append(f"    else memcpy(d + {a} * ds, &{names[a]}, 64);")
    return [*out, "}", *_padded_words(), f"#elif {_AVX2_WIDE} && !defined(__clang__)",
            *_group_words_avx2(), "#endif"]


# The 8×8 transpose of 32-bit lanes on `ymm` (`_group_words_avx2`), by round: the two
# masks of a pair's interleave, in-lane dwords (`vpunpckl/hdq`), in-lane qwords
# (`vpunpckl/hqdq`), then 128-bit lanes (`vperm2i128`); and the vectors each round pairs
# (the low result of pair i becomes vector 2i, the high one 2i + 1).
_WORD_ROUNDS = (((0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)),
                ((0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)),
                ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)))
_WORD_PAIRS = (((0, 1), (2, 3), (4, 5), (6, 7)), ((0, 2), (1, 3), (4, 6), (5, 7)),
               ((0, 4), (1, 5), (2, 6), (3, 7)))


def _group_words_avx2() -> list[str]:
    """`tr_words` with AVX2 alone (`ymm`, 16 registers): 8 source columns of 16 groups.
    Each group's 4 rows give 8 bytes each, zero-extended to 32 bits (`vpmovzxbd` of a
    `ymm`) and shifted into place; groups 0 … 7 and 8 … 15 are then transposed as two 8×8
    blocks of 32-bit elements (8 `vpunpckl/hdq`, 8 `vpunpckl/hqdq`, 8 `vperm2i128` each),
    and row a of the two is one 64-byte destination row (16 whole groups of one column):
    two 32-byte stores, streamed together, so each destination line is written whole."""
    out = [
        "#define GROUP_WORDS 1",
        "#define WORDS_X 8  /* source columns of a tr_words block */",
        "typedef uint32_t word_v __attribute__((vector_size(32)));",
        "typedef char byte_v __attribute__((vector_size(16)));",
        "typedef long long half_q __attribute__((vector_size(16)));",
        "typedef long long word_q __attribute__((vector_size(32)));",
        "/* 8 bytes zero-extended to 32 bits: one vpmovzxbd. The bytes go into the vector as",
        "   one 64-bit element (vmovq): through a stack vector each load waits on a failed",
        "   store forwarding (docs/cpu.md). */",
        "static inline word_v group_lane(const uint8_t* r) {",
        "    long long q;",
        "    memcpy(&q, r, 8);",
        "    return (word_v)__builtin_ia32_pmovzxbd256((byte_v)(half_q){q, 0});",
        "}",
        "/* Column x + a (a < 8) of 16 groups (rows[0 .. 64)) lands at d[a*ds .. a*ds + 64). */",
        "BLOCK_FN void tr_words(const uint8_t* const* rows, i64 x, uint8_t* d, i64 ds,",
        "                            int nt) {",
    ]
    for r, (lo, hi) in enumerate(_WORD_ROUNDS):
        out.append(f"    const word_v L{r} = {{{', '.join(map(str, lo))}}}, "
                   f"H{r} = {{{', '.join(map(str, hi))}}};")
    results = []
    for h in range(2):  # groups 8h .. 8h + 7
        names = [f"g{h}_{k}" for k in range(8)]
        for k in range(8):
            r = 4 * (8 * h + k)
            out.append(f"    word_v {names[k]} = group_lane(rows[{r}] + x) "
                       f"| group_lane(rows[{r + 1}] + x) << 8")
            out.append(f"        | group_lane(rows[{r + 2}] + x) << 16 "
                       f"| group_lane(rows[{r + 3}] + x) << 24;")
        for r, pairs in enumerate(_WORD_PAIRS):
            new = [f"g{h}r{r}_{k}" for k in range(8)]
            for i, (a, b) in enumerate(pairs):
                out.append(f"    word_v {new[2 * i]} = __builtin_shuffle({names[a]}, {names[b]}, "
                           f"L{r});")
                out.append(f"    word_v {new[2 * i + 1]} = __builtin_shuffle({names[a]}, "
                           f"{names[b]}, H{r});")
            names = new
        results.append(names)
    order = _word_columns()
    for a in range(8):
        for h in range(2):
            v = results[h][order[a]]
            out += [f"    if (nt) __builtin_ia32_movntdq256((word_q*)(void*)(d + {a} * ds + "
                    f"{32 * h}), (word_q){v});",
                    f"    else memcpy(d + {a} * ds + {32 * h}, &{v}, 32);"]
    return [*out, "}"]


def _word_columns() -> list[int]:
    """Which result of `_group_words_avx2`'s rounds holds column a (a < 8), found by
    running the rounds on the element numbers (row k, column c as 8k + c)."""
    rows = [[8 * k + c for c in range(8)] for k in range(8)]
    for (lo, hi), pairs in zip(_WORD_ROUNDS, _WORD_PAIRS, strict=True):
        new = []
        for a, b in pairs:
            both = rows[a] + rows[b]
            new += [[both[i] for i in lo], [both[i] for i in hi]]
        rows = new
    order = []
    for c in range(8):
        (at,) = [j for j, row in enumerate(rows) if row == [8 * k + c for k in range(8)]]
        order.append(at)
    return order


_COMMON = r"""
@PRELUDE@
@PARTS@
@POOL@
@STREAM@
typedef int64_t i64;
typedef @SRC_T@ src_t;
typedef @DST_T@ dst_t;

static inline dst_t convert(src_t x) { return @CONVERT@; }
@CONVERT_RUN@

#define MAXR @MAX_RANK@
#define MAXT 256
#define SAME_BITS @SAME@
#define NARROW_MAX @NARROW_MAX@
/* A block of a transpose (BLOCK_FN, written out shuffle by shuffle) is always inlined
   into its tile, which may be built at -O2 (TILE_FN, _TRANSPOSE): gcc inlines a function
   built at -O3 into one built at -O2 only where it is cheap. */
#define BLOCK_FN static inline __attribute__((always_inline))
/* Copies moving fewer bytes run on the calling thread: waking a pool worker costs a few
   µs, and a copy of this size takes ~10 µs on one core. */
#define PARALLEL_BYTES (1 << 18)

typedef struct {
    const src_t* src;
    dst_t* dst;
    i64 R, M, soff, doff;
    int has_fill;
    dst_t fill;
    const i64 *n, *ss, *ds, *mk;
    i64 units;
    i64 chunk, nch;          /* rows: chunks of the innermost dim */
    i64 group;               /* rows: rows streamed together (stream_rows), or 0 */
    i64 rt, rtq, rtu, nrq, nru;  /* rows: tiles of short rows over dims R-2 and rt (or -1) */
    i64 ta, tb, ntu, nti;    /* transpose: tiles (ta x tb) of the two last dims */
    i64 strip;               /* transpose: tiles along a walked before the next along b */
    i64 merge;               /* transpose: 1 when b spans dims R-3 and R-1 (_TRANSPOSE) */
    int staged;              /* transpose: tiles' source rows staged in L2 (staged_tile,
                                staged_cast) */
    i64 rg;                  /* transpose: rows of dim R-3 a staged cast tile spans, or 0 */
    int stream;              /* 1: contiguous runs of the destination are written with
                                streaming stores (stream_copy, stream_fill), sfence at
                                the end of each thread's work (stream_end) */
    unsigned char fill_line[64] __attribute__((aligned(64)));  /* the fill, repeated */
} job_t;

/* Runs of n bytes from s to d: streaming stores when the call streams, else memcpy.
   Always inlined, so a constant n (a staged tile's 256-byte rows) stays a constant. */
static inline __attribute__((always_inline)) void copy_bytes(const job_t* J, void* d,
                                                            const void* s, size_t n) {
    if (J->stream) stream_copy(d, s, n);
    else memcpy(d, s, n);
}

static inline i64 floordiv(i64 a, i64 b) {  /* b > 0 */
    i64 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline i64 ceildiv(i64 a, i64 b) { return -floordiv(-a, b); }
static inline i64 coef(const job_t* J, i64 m, i64 k) { return J->mk[m * (J->R + 2) + k]; }

/* Narrow [*a, *b) to the j where every mask holds: lo <= base[m] + c_m*j < hi, c_m the
   coefficient of dim `dim`. An empty result is [j1, j1). */
static inline void clip(const job_t* J, const i64* base, i64 dim, i64 j1, i64* a, i64* b) {
    for (i64 m = 0; m < J->M; m++) {
        i64 c = coef(J, m, dim), lo = coef(J, m, J->R), hi = coef(J, m, J->R + 1);
        i64 B = base[m], x, y;
        if (c > 0) { x = ceildiv(lo - B, c); y = ceildiv(hi - B, c); }
        else if (c < 0) { x = floordiv(B - hi, -c) + 1; y = floordiv(B - lo, -c) + 1; }
        else if (lo <= B && B < hi) continue;
        else { x = 0; y = 0; }
        if (x > *a) *a = x;
        if (y < *b) *b = y;
    }
    if (*b <= *a) { *a = j1; *b = j1; }
}

/* The outer dims [0, nout) as an odometer: c, the source and destination offsets and the
   mask sums mb at row `index` (row-major) ... */
static inline void odometer_start(const job_t* J, i64 nout, i64 index, i64* c, i64* so,
                                  i64* dof, i64* mb) {
    *so = J->soff;
    *dof = J->doff;
    for (i64 m = 0; m < J->M; m++) mb[m] = 0;
    for (i64 k = nout - 1; k >= 0; k--) {
        c[k] = index % J->n[k];
        index /= J->n[k];
        *so += c[k] * J->ss[k];
        *dof += c[k] * J->ds[k];
        for (i64 m = 0; m < J->M; m++) mb[m] += c[k] * coef(J, m, k);
    }
}

/* ... and advanced to the next row by additions. */
static inline void odometer_step(const job_t* J, i64 nout, i64* c, i64* so, i64* dof, i64* mb) {
    for (i64 k = nout - 1; k >= 0; k--) {
        *so += J->ss[k];
        *dof += J->ds[k];
        for (i64 m = 0; m < J->M; m++) mb[m] += coef(J, m, k);
        if (++c[k] < J->n[k]) return;
        *so -= J->n[k] * J->ss[k];
        *dof -= J->n[k] * J->ds[k];
        for (i64 m = 0; m < J->M; m++) mb[m] -= J->n[k] * coef(J, m, k);
        c[k] = 0;
    }
}

static inline void fill_run(const job_t* J, i64 d, i64 step, i64 count) {
    if (!J->has_fill) return;
    dst_t* p = J->dst + d;
    dst_t f = J->fill;
    if (J->stream && step == 1 && count * (i64)sizeof(dst_t) >= 128) {
        stream_fill(p, J->fill_line, (size_t)count * sizeof(dst_t));
        return;
    }
    if (step == 1) { for (i64 j = 0; j < count; j++) p[j] = f; }
    else { for (i64 j = 0; j < count; j++) p[j * step] = f; }
}

/* One row of the innermost dim R-1 (or of the last tile dim): [j0, j1) from source index
   so and destination index dof, mask sums mb at j = 0. */
static inline void strided_row(const job_t* J, i64 so, i64 dof, const i64* mb, i64 sj,
                               i64 dj, i64 dim, i64 j0, i64 j1) {
    i64 a = j0, b = j1;
    if (J->M) clip(J, mb, dim, j1, &a, &b);
    fill_run(J, dof + j0 * dj, dj, a - j0);
    const src_t* s = J->src;
    dst_t* d = J->dst;
    for (i64 j = a; j < b; j++) d[dof + j * dj] = convert(s[so + j * sj]);
    fill_run(J, dof + b * dj, dj, j1 - b);
}
"""

_ROWS = r"""
static inline void row(const job_t* J, i64 so, i64 dof, const i64* mb, i64 j0, i64 j1) {
    i64 R = J->R;
@ROW_BODY@
}

/* Units [u0, u1): unit u is chunk u % nch of row u / nch. The rows of the innermost outer
   dim q are walked by additions to the offsets (and the mask sums), the dims outside it
   as an odometer, advanced once per run of q: a row costs a few additions, not an
   odometer step (short rows, 128 bytes of attention heads, are a memcpy each). */
static void work_rows(const job_t* J, i64 u0, i64 u1) {
    const i64 R = J->R, M = J->M, nch = J->nch, chunk = J->chunk, n_in = J->n[R - 1];
    i64 nout = R - 1, c[MAXR], mb[M + 1], mq[M + 1];
    i64 ch = u0 % nch, so, dof;
    odometer_start(J, nout, u0 / nch, c, &so, &dof, mb);
    const i64 q = nout - 1, nq = q >= 0 ? J->n[q] : 1;
    const i64 sq = q >= 0 ? J->ss[q] : 0, dq = q >= 0 ? J->ds[q] : 0;
    i64 u = u0;
    for (;;) {
        /* a run of dim q: rows c[q] .. nq - 1 of the current outer coordinates */
        i64 rs = so, rd = dof, k = q >= 0 ? c[q] : 0;
        for (i64 m = 0; m < M; m++) mq[m] = mb[m];
        if (M == 0 && nch == 1) {  /* whole rows, none masked: the loop of plain rows */
            i64 stop = u + (nq - k) < u1 ? u + (nq - k) : u1, e = u;
#ifdef ROW_GROUPS
            if (J->group && stop - e >= J->group) {
                stream_rows(J, rs, rd, sq, dq, n_in, stop - e);
                e = stop;
            }
#endif
            for (; e < stop; e++, rs += sq, rd += dq) plain_row(J, rs, rd, n_in);
            k += stop - u;
            u = stop;
            if (u >= u1) return;
        }
        for (; k < nq; k++) {
            for (; ch < nch && u < u1; ch++, u++) {
                i64 j0 = ch * chunk, j1 = j0 + chunk < n_in ? j0 + chunk : n_in;
                row(J, rs, rd, mq, j0, j1);
            }
            if (ch < nch) return;  /* u1 reached inside the row */
            ch = 0;
            rs += sq;
            rd += dq;
            for (i64 m = 0; m < M; m++) mq[m] += coef(J, m, q);
            if (u >= u1) return;
        }
        if (q < 0) return;
        /* the run is over: the odometer moves on from its last row */
        i64 back = nq - 1 - c[q];
        so += back * sq;
        dof += back * dq;
        for (i64 m = 0; m < M; m++) mb[m] += back * coef(J, m, q);
        c[q] = nq - 1;
        odometer_step(J, nout, c, &so, &dof, mb);
    }
}

/* Tiles of short rows (plan_units): tile t is (the other outer dims, a block of dim R-2,
   a block of dim rt), the last fastest; in a tile, rows of dim rt run inside rows of
   R-2: the source is read in its own order (a stretch of rt rows back to back, a page),
   each row written to its place in the destination (its run along R-2 grows by one row
   per stretch; streamed, a 128-byte row is two whole lines). */
static void work_tiles(const job_t* J, i64 t0, i64 t1) {
    const i64 R = J->R, q = R - 2, u = J->rt, n_in = J->n[R - 1];
    const i64 sq = J->ss[q], dq = J->ds[q], su = J->ss[u], du = J->ds[u];
    for (i64 t = t0; t < t1; t++) {
        i64 rest = t / J->nru, ub = t % J->nru, qb = rest % J->nrq, so = J->soff, dof = J->doff;
        rest /= J->nrq;
        for (i64 k = q - 1; k >= 0; k--) {
            if (k == u) continue;
            i64 ck = rest % J->n[k];
            rest /= J->n[k];
            so += ck * J->ss[k];
            dof += ck * J->ds[k];
        }
        i64 q0 = qb * J->rtq, q1 = q0 + J->rtq < J->n[q] ? q0 + J->rtq : J->n[q];
        i64 u0 = ub * J->rtu, u1 = u0 + J->rtu < J->n[u] ? u0 + J->rtu : J->n[u];
        /* Streamed rows of whole lines that start on a line (attention's 128-byte rows):
           line by line, without stream_copy's head and tail (docs/cpu.md). */
        const size_t lb = (size_t)n_in * sizeof(dst_t);
        int lines = J->stream && SAME_BITS && lb % 64 == 0
            && ((uintptr_t)(J->dst + dof + u0 * du + q0 * dq) & 63) == 0
            && (du * (i64)sizeof(dst_t)) % 64 == 0 && (dq * (i64)sizeof(dst_t)) % 64 == 0;
        for (i64 b = q0; b < q1; b++) {
            i64 rs = so + u0 * su + b * sq, rd = dof + u0 * du + b * dq;
            if (lines) {
                for (i64 a = u0; a < u1; a++, rs += su, rd += du) {
                    const char* sp = (const char*)(J->src + rs);
                    char* dp = (char*)(J->dst + rd);
                    for (size_t k = 0; k < lb; k += 64) stream_line(dp + k, sp + k);
                }
                continue;
            }
            for (i64 a = u0; a < u1; a++, rs += su, rd += du) plain_row(J, rs, rd, n_in);
        }
    }
}

static void work(const job_t* J, i64 u0, i64 u1) {
    if (J->rt >= 0) work_tiles(J, u0, u1);
    else work_rows(J, u0, u1);
}

static void plan_units(job_t* J, i64 nthreads) {
    i64 rows = 1, n_in = J->n[J->R - 1];
    for (i64 k = 0; k < J->R - 1; k++) rows *= J->n[k];
    /* Short whole rows, none masked, read far apart along dim q = R-2 but back to back
       along an outer dim rt (attention heads: 128 bytes, 4 KiB apart along the sequence,
       contiguous along the heads): walked one row after the other in q, every row starts a
       new stretch of the source (a new page) and the copy waits on memory; walked in tiles
       of rt x q rows of about 32 KiB, the source is read a page at a time (a stretch of
       rt rows) and the destination's runs along q are written a row per page; streamed
       when the call streams (faster than ordinary stores on the destination's runs,
       docs/cpu.md). */
    J->rt = -1;
    i64 q = J->R - 2, row_bytes = n_in * (i64)sizeof(src_t);
    if (J->M == 0 && q >= 1 && J->ss[J->R - 1] == 1 && row_bytes <= 1024 && J->n[q] > 1
        && J->ss[q] != n_in) {
        for (i64 k = 0; k < q; k++)
            if (J->n[k] > 1 && J->ss[k] == n_in) J->rt = k;
    }
    if (J->rt >= 0) {
        i64 tu = 4096 / row_bytes, tq;
        if (tu < 1) tu = 1;
        if (tu > J->n[J->rt]) tu = J->n[J->rt];
        tq = 32768 / (tu * row_bytes);
        if (tq < 1) tq = 1;
        if (tq > J->n[q]) tq = J->n[q];
        J->rtu = tu;
        J->rtq = tq;
        J->nru = (J->n[J->rt] + tu - 1) / tu;
        J->nrq = (J->n[q] + tq - 1) / tq;
        J->chunk = n_in;
        J->nch = 1;
        J->units = rows / (J->n[J->rt] * J->n[q]) * J->nru * J->nrq;
        return;
    }
    /* Long rows are cut so every thread gets work and a unit stays cache-sized. */
    J->chunk = n_in > 16384 ? 16384 : n_in;
#ifdef ROW_GROUPS
    /* Whole rows of at least 1 KiB that the source holds apart (a slice; not one row
       broadcast, which stays in the cache), streamed: ROW_GROUPS at a time, line by line
       in turn (stream_rows). */
    J->group = 0;
    if (J->stream && J->M == 0 && q >= 0 && n_in <= J->chunk && J->n[q] >= ROW_GROUPS
        && J->ss[q] != n_in && J->ss[q] != 0 && row_bytes >= 1024)
        J->group = ROW_GROUPS;
#endif
    if (rows < 4 * nthreads && n_in > 4096) {
        i64 want = (4 * nthreads + rows - 1) / rows;
        i64 c = (n_in + want - 1) / want;
        if (c < J->chunk) J->chunk = c < 4096 ? 4096 : c;
    }
    if (J->chunk < 1) J->chunk = 1;
    J->nch = (n_in + J->chunk - 1) / J->chunk;
    J->units = rows * J->nch;
}
"""

_PLAIN_SAME = r"""
static inline void plain_row(const job_t* J, i64 so, i64 dof, i64 n) {
    copy_bytes(J, J->dst + dof, J->src + so, (size_t)n * sizeof(dst_t));
}

/* `count` whole rows of n elements (>= 1 KiB), source rows ss apart and destination rows
   ds apart, streamed ROW_GROUPS at a time, line by line in turn (line k of each row of the
   group, then line k + 1), each row's source read ROW_AHEAD lines ahead by software
   prefetch: the prefetch runs on from a row's end into the start of its successor in
   the next group (rows of this run only, every address inside a row that is copied).
   A streamed copy is limited by its reads, and a source row that does not continue the
   previous one starts a new stream that the hardware prefetcher first has to detect
   (contiguous, its reads run on across rows); the software prefetch keeps ROW_AHEAD lines
   of every row in flight across that gap; 4 rows 16 lines ahead beat the other groupings
   tried (docs/cpu.md). A last partial group goes row by row. */
#define ROW_GROUPS 4
#define ROW_AHEAD 16
static void stream_rows(const job_t* J, i64 so, i64 dof, i64 ss, i64 ds, i64 n, i64 count) {
    const size_t bytes = (size_t)n * sizeof(dst_t), row_lines = (bytes + 63) / 64;
    const i64 sb = ss * (i64)sizeof(src_t);  /* source rows apart, in bytes */
    /* the prefetch cursor: line pk of rows pr .. pr + ROW_GROUPS - 1 of this run */
    i64 pr = 0, pk = ROW_AHEAD;
    while ((size_t)pk >= row_lines) { pk -= (i64)row_lines; pr += ROW_GROUPS; }
    i64 r = 0;
    for (; r + ROW_GROUPS <= count; r += ROW_GROUPS, pr -= ROW_GROUPS) {
        const char* s[ROW_GROUPS];
        char* d[ROW_GROUPS];
        size_t lines = bytes / 64;
        for (int g = 0; g < ROW_GROUPS; g++) {
            s[g] = (const char*)(J->src + so + (r + g) * ss);
            d[g] = (char*)(J->dst + dof + (r + g) * ds);
            size_t head = (size_t)(-(uintptr_t)d[g]) & 63;
            memcpy(d[g], s[g], head);  /* ordinary stores up to the first line */
            s[g] += head;
            d[g] += head;
            if ((bytes - head) / 64 < lines) lines = (bytes - head) / 64;
        }
        for (size_t k = 0; k < lines; k++) {
            if (r + pr + ROW_GROUPS <= count) {
                const char* p = (const char*)(J->src + so + (r + pr) * ss) + 64 * pk;
                for (int g = 0; g < ROW_GROUPS; g++) __builtin_prefetch(p + g * sb, 0, 0);
            }
            if ((size_t)++pk == row_lines) { pk = 0; pr += ROW_GROUPS; }
            for (int g = 0; g < ROW_GROUPS; g++) stream_line(d[g] + 64 * k, s[g] + 64 * k);
        }
        for (int g = 0; g < ROW_GROUPS; g++) {  /* the rest of each row: a line, a tail */
            size_t done = (size_t)(d[g] - (char*)(J->dst + dof + (r + g) * ds)) + 64 * lines;
            stream_copy(d[g] + 64 * lines, s[g] + 64 * lines, bytes - done);
        }
        /* the cursor moved on by `lines` lines, not row_lines (a line or two less): on by
           the rest, so it stays ROW_AHEAD lines ahead of the next group */
        pk += (i64)(row_lines - lines);
        if ((size_t)pk >= row_lines) { pk -= (i64)row_lines; pr += ROW_GROUPS; }
    }
    for (; r < count; r++) plain_row(J, so + r * ss, dof + r * ds, n);
}
"""

_PLAIN_CAST = r"""
/* A converting run; when the call streams, its whole lines converted in registers and
   streamed from them (LANE_RUN, `_stream_lanes`) where d is aligned to its elements,
   else converted CAST_CHUNK elements at a time into a buffer in L1 whose bytes are then
   streamed to d (64-byte aligned after a head). */
#define CAST_CHUNK (4096 / (i64)sizeof(dst_t))
static inline void convert_copy(const job_t* J, const src_t* s, dst_t* d, i64 n) {
    if (!J->stream || n * (i64)sizeof(dst_t) < 256) { convert_run(s, d, n); return; }
    i64 head = (i64)((-(uintptr_t)d & 63) / sizeof(dst_t));
    convert_run(s, d, head);
#ifdef LANE_RUN
    if (((uintptr_t)(d + head) & 63) == 0) {
        i64 j = head;
        for (; j + LANE_RUN <= n; j += LANE_RUN) stream_lanes(s + j, d + j);
        convert_run(s + j, d + j, n - j);
        return;
    }
#endif
    dst_t buf[CAST_CHUNK] __attribute__((aligned(64)));
    for (i64 j = head; j < n; j += CAST_CHUNK) {
        i64 k = n - j < CAST_CHUNK ? n - j : CAST_CHUNK;
        convert_run(s + j, buf, k);
        stream_copy(d + j, buf, (size_t)k * sizeof(dst_t));
    }
}
static inline void plain_row(const job_t* J, i64 so, i64 dof, i64 n) {
    convert_copy(J, J->src + so, J->dst + dof, n);
}
"""

_PLAIN_GATHER = r"""
static inline void plain_row(const job_t* J, i64 so, i64 dof, i64 n) {
    const src_t* s = J->src + so;
    dst_t* d = J->dst + dof;
    i64 sj = J->ss[J->R - 1], dj = J->ds[J->R - 1];
    for (i64 j = 0; j < n; j++) d[j * dj] = convert(s[j * sj]);
}
"""

_LINEAR_SAME = r"""    i64 a = j0, b = j1;
    if (J->M) clip(J, mb, R - 1, j1, &a, &b);
    fill_run(J, dof + j0, 1, a - j0);
    if (b > a) copy_bytes(J, J->dst + dof + a, J->src + so + a, (size_t)(b - a) * sizeof(dst_t));
    fill_run(J, dof + b, 1, j1 - b);"""

_LINEAR_CAST = r"""    i64 a = j0, b = j1;
    if (J->M) clip(J, mb, R - 1, j1, &a, &b);
    fill_run(J, dof + j0, 1, a - j0);
    if (b > a) convert_copy(J, J->src + so + a, J->dst + dof + a, b - a);
    fill_run(J, dof + b, 1, j1 - b);"""

_GATHER = r"""    strided_row(J, so, dof, mb, J->ss[R - 1], J->ds[R - 1], R - 1, j0, j1);"""

_TRANSPOSE = r"""
#define TILE @TILE@
/* The tile functions of a transpose without a cast, or of a cast that converts in
   registers (CAST_BLOCK), are built at -O2: their work is the blocks they call, which -O3
   does no more for; it only made more code of the loops around them, and with it most of
   the unit's build time. A cast that converts a row at a time (convert_run, vectorized
   by -O3 where it is inlined) keeps its tile at -O3. */
#if SAME_BITS || defined(CAST_BLOCK)
#define TILE_FN __attribute__((optimize("O2")))
#else
#define TILE_FN
#endif

/* Built in two parts at once (C_PARTS): part 2 defines the tile's narrow, streamed and
   staged forms, part 1 the plain tile, the walk and the set-up, which call them. */
#define STRIDEC_PARTS 2
#if SAME_BITS
PART_FN int narrow_split(const job_t* J, const bits_t* s, bits_t* d, i64 dsa, i64 b0, i64 b1,
                         i64 k);
PART_FN int narrow_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1, i64 lo, i64 hi, i64 nso);
PART_FN int stream_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1);
#endif
#ifdef STAGE_A
PART_FN int staged_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1);
#endif
#ifdef CAST_BLOCK
PART_FN void staged_cast(const job_t* J, i64 so, i64 dof, i64 k, i64 a0, i64 a1, i64 b0,
                         i64 b1);
#endif

/* Columns [bs, be) of a tile, each walked along a (contiguous reads, writes dsa apart):
   copied, or filled when `copy` is 0. Narrow tiles (fewer than V columns: the channels of
   a pack, C = 3) take this path, as do tiles whose masks depend on b alone. */
static inline void columns(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                           i64 bs, i64 be, int copy) {
    dst_t* d = J->dst;
    for (i64 b = bs; b < be; b++) {
        dst_t* dp = d + dof + b;
        if (copy) {
            const src_t* sp = J->src + so + b * ssb;
            for (i64 a = a0; a < a1; a++) dp[a * dsa] = convert(sp[a]);
        } else if (J->has_fill) {
            dst_t f = J->fill;
            for (i64 a = a0; a < a1; a++) dp[a * dsa] = f;
        }
    }
}

#if SAME_BITS
/* narrow_columns, and with J->stream and contiguous rows (dsa == k), through a buffer in
   L1 whose runs are streamed. `ns`: where the next tile's k source rows start (the tile
   after this one in the thread's units, of the same rows [a0, a1) and columns, every
   column copied), or NULL: each 256-element step prefetches the same lines of those rows,
   so the next tile's rows are in the cache when it starts. Its k source rows are planes
   a page apart read on for a page (an NCHW4 pack's channels), and the hardware prefetchers
   stop at a page's end: read straight, every tile waits on memory at the start of each
   of its rows (docs/cpu.md). */
static int narrow_put(const job_t* J, const bits_t* s, i64 ssb, bits_t* d, i64 dsa, i64 a0,
                      i64 a1, i64 k, i64 lo, i64 hi, bits_t fill, const bits_t* ns) {
    if (J->stream && dsa == k) {
        bits_t buf[256 * NARROW_MAX] __attribute__((aligned(64)));
        for (i64 a = a0; a < a1; a += 256) {
            i64 n = a1 - a < 256 ? a1 - a : 256;
            if (ns)
                for (i64 j = 0; j < k; j++)
                    for (i64 l = 0; l < n; l += 64 / (i64)sizeof(bits_t))
                        __builtin_prefetch(ns + a + l + j * ssb, 0, 0);
            if (!narrow_columns(s + a, ssb, buf, k, 0, n, k, lo, hi, fill)) return 0;
            stream_copy(d + a * k, buf, (size_t)(n * k) * sizeof(bits_t));
        }
        return 1;
    }
    return narrow_columns(s, ssb, d, dsa, a0, a1, k, lo, hi, fill);
}

/* Columns [b0, b1) of the k destination rows d + a*dsa (a < k) from k interleaved source
   rows (the pixels of NHWC with C = k) by narrow_rows; 0 if no interleave has k. When
   J->stream, each destination row's whole lines are streamed and its partial lines at
   either end stored as usual: straight from the registers where the k rows share their
   alignment (dsa a whole number of lines), else through a buffer in L1 whose rows are
   streamed as runs. */
#define SPLIT_RUN (4096 / (i64)sizeof(bits_t))
#if IN_PART(2)
PART_FN int narrow_split(const job_t* J, const bits_t* s, bits_t* d, i64 dsa, i64 b0, i64 b1,
                         i64 k) {
    if (k < 2 || k > NARROW_MAX || k >= V) return 0;
    if (!J->stream) return narrow_rows(s, d, dsa, b0, b1, k, 0);
    const i64 size = (i64)sizeof(bits_t), line = 64 / size;
    if (dsa * size % 64 == 0 && (uintptr_t)d % sizeof(bits_t) == 0) {
        i64 h = b0 + (i64)((-(uintptr_t)(d + b0) & 63) / sizeof(bits_t));
        if (h > b1) h = b1;
        i64 m = h + (b1 - h) / line * line;
        narrow_rows(s, d, dsa, b0, h, k, 0);
        narrow_rows(s, d, dsa, h, m, k, 1);
        return narrow_rows(s, d, dsa, m, b1, k, 0);
    }
    bits_t buf[NARROW_MAX * SPLIT_RUN] __attribute__((aligned(64)));
    for (i64 b = b0; b < b1; b += SPLIT_RUN) {
        i64 n = b1 - b < SPLIT_RUN ? b1 - b : SPLIT_RUN;
        narrow_rows(s + k * b, buf, n, 0, n, k, 0);
        for (i64 a = 0; a < k; a++)
            stream_copy(d + a * dsa + b, buf + a * n, (size_t)(n * size));
    }
    return 1;
}
#endif

/* Columns [b0, b1) of rows [a0, a1), those in [lo, hi) copied and the others filled, by
   interleaves when the tile or its copied part is at most NARROW_MAX columns; 0 if not. */
#if IN_PART(2)
PART_FN int narrow_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1, i64 lo, i64 hi, i64 nso) {
    const bits_t* s = (const bits_t*)J->src + so;
    bits_t* d = (bits_t*)J->dst + dof;
    bits_t fill;
    memcpy(&fill, &J->fill, sizeof fill);
    if (hi <= lo) return 0;
    if (J->has_fill && b1 - b0 < V)
        return narrow_put(J, s + b0 * ssb, ssb, d + b0, dsa, a0, a1, b1 - b0, lo - b0, hi - b0,
                          fill, NULL);
    if (hi - lo >= V || hi - lo > NARROW_MAX) return 0;
    if (J->has_fill) {
        padded_rows(s + lo * ssb, ssb, d + b0, dsa, a0, a1, b1 - b0, lo - b0, hi - lo, fill,
                    J->stream);
        return 1;
    }
    for (i64 a = a0; a < a1; a++) {  /* the padding as contiguous runs of each row */
        fill_run(J, dof + a * dsa + b0, 1, lo - b0);
        fill_run(J, dof + a * dsa + hi, 1, b1 - hi);
    }
    if (hi - lo == 1) {
        columns(J, so, dof, dsa, ssb, a0, a1, lo, hi, 1);
        return 1;
    }
    const bits_t* ns = nso >= 0 && lo == b0 && hi == b1
        ? (const bits_t*)J->src + nso + lo * ssb : NULL;
    return narrow_put(J, s + lo * ssb, ssb, d + lo, dsa, a0, a1, hi - lo, 0, hi - lo, fill, ns);
}
#endif
#endif

#if SAME_BITS
/* A tile whose destination lines are streamed: straight from the registers where a block
   row is one whole aligned line (V·size = 64 bytes), else transposed into a buffer in L1
   whose rows then go out as runs (one run where the tile's rows are contiguous). 0 when
   the tile is larger than the buffer. */
#if IN_PART(2)
TILE_FN PART_FN int stream_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1) {
    const bits_t* s = (const bits_t*)J->src + so;
    bits_t* d = (bits_t*)J->dst + dof;
    i64 na = a1 - a0, nb = b1 - b0;
#ifdef BLOCK_NT
    /* Blocks of V columns by NT_ROWS source rows (V with AVX-512; 32 for AVX2's 2-byte
       blocks, only in tiles walked in strips, J->strip > 1: plan_walk), each destination
       row of a block one whole line, streamed from the registers. */
    if (((uintptr_t)(d + a0 * dsa + b0) & 63) == 0 && (dsa * (i64)sizeof(bits_t)) % 64 == 0
        && nb % NT_ROWS == 0 && (!NT_STRIPS || J->strip > 1)) {
        i64 a = a0;
        for (; a + V <= a1; a += V)
            for (i64 b = b0; b < b1; b += NT_ROWS)
                tr_block_nt(s + a + b * ssb, ssb, d + a * dsa + b, dsa);
        for (; a < a1; a++)
            for (i64 b = b0; b < b1; b++) d[a * dsa + b] = s[a + b * ssb];
        return 1;
    }
#endif
    bits_t buf[16384 / sizeof(bits_t)] __attribute__((aligned(64)));
    if (na * nb > (i64)(sizeof buf / sizeof(bits_t))) return 0;
    i64 x = 0;
    for (; x + V <= na; x += V) {
        i64 y = 0;
        for (; y + V <= nb; y += V)
            tr_block(s + a0 + x + (b0 + y) * ssb, ssb, buf + x * nb + y, nb);
        for (i64 xx = x; xx < x + V; xx++)
            for (i64 yy = y; yy < nb; yy++) buf[xx * nb + yy] = s[a0 + xx + (b0 + yy) * ssb];
    }
    for (; x < na; x++)
        for (i64 y = 0; y < nb; y++) buf[x * nb + y] = s[a0 + x + (b0 + y) * ssb];
    if (dsa == nb) {
        stream_copy(d + a0 * dsa + b0, buf, na * nb * (i64)sizeof(bits_t));
    } else {
        for (x = 0; x < na; x++)
            stream_copy(d + (a0 + x) * dsa + b0, buf + x * nb, nb * (i64)sizeof(bits_t));
    }
    return 1;
}
#endif
#endif

#ifdef STAGE_A
/* A streamed tile of up to STAGE_A x WIDE_B elements (J->staged, plan_units) whose source
   rows are first copied, each as one run, into the thread's scratch buffer, which stays
   in L2 (STAGE_A·WIDE_B·size = 256 KiB), then transposed from there in the staged tiles'
   blocks (tr_wide) and streamed. Read straight, a staged tile's WIDE_B source rows are
   one 64-byte line each, a page or more apart: more streams than the hardware
   prefetchers follow, and a thread's misses in flight are capped. Copied row by row,
   each source row is read on for STAGE_A elements, which the prefetchers follow. The
   staged rows lie a line more than STAGE_A elements apart, so that a column of them does
   not fall into the same cache sets. 0 if the tile is larger or there is no buffer. */
#define STAGE_S (STAGE_A + 64 / (i64)sizeof(bits_t))
_Static_assert(STAGE_B * STAGE_S * sizeof(bits_t) <= STRIDEC_SCRATCH_BYTES, "staged rows");
_Static_assert(STAGE_B <= WIDE_B && STAGE_B % WIDE_K == 0, "staged rows");
/* Rows [0, nb) of na elements, ssb apart from s, copied ps apart to q (the scratch
   buffer), a line at a time; each line's copy first prefetches the line STAGE_AHEAD
   lines further on in that order (further along the row, or the first lines of the
   rows after it), always a line of the tile's own rows. Copied row after row with
   nothing ahead, each row's first lines, a page or more from the last row's, are read a
   miss at a time before the hardware prefetcher follows (docs/cpu.md). */
#define STAGE_AHEAD 256
BLOCK_FN void stage_rows(bits_t* q, i64 ps, const bits_t* s, i64 ssb, i64 na, i64 nb) {
    const i64 L = 64 / (i64)sizeof(bits_t), per = (na + L - 1) / L;
    i64 py = STAGE_AHEAD / per, px = STAGE_AHEAD % per;
    for (i64 y = 0; y < nb; y++)
        for (i64 x = 0; x < na; x += L) {
            if (py < nb) __builtin_prefetch(s + py * ssb + px * L, 0, 3);
            if (++px == per) px = 0, py++;
            if (na - x >= L) memcpy(q + y * ps + x, s + y * ssb + x, 64);
            else memcpy(q + y * ps + x, s + y * ssb + x, (size_t)(na - x) * sizeof(bits_t));
        }
}
/* Out of line (a call per 256 KiB tile), so that its code can be found in the unit's
   assembly (tests/compiler/test_c_streaming_tiles.py). */
#if IN_PART(2)
TILE_FN PART_FN int staged_tile(const job_t* J, i64 so, i64 dof, i64 dsa, i64 ssb, i64 a0, i64 a1,
                        i64 b0, i64 b1) {
    i64 na = a1 - a0, nb = b1 - b0;
    bits_t* stage = (bits_t*)stridec_pool_scratch_v1();
    const bits_t* s = (const bits_t*)J->src + so + a0 + b0 * ssb;
    bits_t* d = (bits_t*)J->dst + dof + a0 * dsa + b0;
    if (nb == J->n[J->R - 1] && nb < WIDE_B && dsa == nb) {
        /* A pack's lanes (contiguous destination rows of nb < WIDE_B elements, whole
           blocks wide, plan_units): its nb source rows of up to tl·STAGE_A/WIDE_A
           elements (the tile plan_units gives) staged a line more than that apart, then
           WIDE_A·WIDE_B elements at a time transposed into a buffer in L1 that goes out
           as one run. */
        i64 tl = WIDE_A * (WIDE_B / nb), ps = tl * (STAGE_A / WIDE_A) + 64 / (i64)sizeof(bits_t);
        if (na > tl * (STAGE_A / WIDE_A) || nb % WIDE_K || !stage) return 0;
        stage_rows(stage, ps, s, ssb, na, nb);
        bits_t buf[WIDE_A * WIDE_B] __attribute__((aligned(64)));
        for (i64 x0 = 0; x0 < na; x0 += tl) {
            i64 w = na - x0 < tl ? na - x0 : tl, x = 0, xs = 0;
#ifdef WIDE_LINES
            /* Rows of one whole line each (64 lanes, d on a line): from the registers. */
            if (nb == 64 && ((uintptr_t)d & 63) == 0)
                for (; x + WIDE_L <= w; x += WIDE_L)
                    tr_lines(stage + x0 + x, ps, d + (x0 + x) * dsa, dsa);
            xs = x;
            if (xs == w) continue;
#endif
            for (; x + WIDE_L <= w; x += WIDE_L)
                for (i64 y = 0; y < nb; y += WIDE_K)
                    tr_wide(stage + y * ps + x0 + x, ps, buf + (x - xs) * nb + y, nb);
            for (; x < w; x++)  /* the columns past the last whole block */
                for (i64 y = 0; y < nb; y++) buf[(x - xs) * nb + y] = stage[y * ps + x0 + x];
            copy_bytes(J, d + (x0 + xs) * dsa, buf, (size_t)((w - xs) * nb) * sizeof(bits_t));
        }
        return 1;
    }
    if (na > STAGE_A || nb > STAGE_B || !stage) return 0;
    if (na == STAGE_A) stage_rows(stage, STAGE_S, s, ssb, STAGE_A, nb);
    else stage_rows(stage, STAGE_S, s, ssb, na, nb);
    bits_t buf[WIDE_A * WIDE_B] __attribute__((aligned(64)));
    i64 x0 = 0;
#ifdef WIDE_LINES
    /* Destination rows of whole lines (d on a line, rows a whole number of lines apart,
       nb whole lines long): each 64 × 64 block straight from the registers (tr_lines). */
    if (((uintptr_t)d & 63) == 0 && dsa % 64 == 0 && nb % 64 == 0)
        for (; x0 + WIDE_A <= na; x0 += WIDE_A)
            for (i64 y = 0; y < nb; y += 64)
                tr_lines(stage + y * STAGE_S + x0, STAGE_S, d + x0 * dsa + y, dsa);
#endif
    for (; x0 < na; x0 += WIDE_A) {
        i64 w = na - x0 < WIDE_A ? na - x0 : WIDE_A, y = 0;
        for (; w == WIDE_A && y + WIDE_K <= nb; y += WIDE_K)
            for (i64 x = 0; x < WIDE_A; x += WIDE_L)
                tr_wide(stage + y * STAGE_S + x0 + x, STAGE_S, buf + x * WIDE_B + y, WIDE_B);
        for (i64 x = 0; x < w; x++)  /* the columns past the last whole block */
            for (i64 yy = y; yy < nb; yy++) buf[x * WIDE_B + yy] = stage[yy * STAGE_S + x0 + x];
        for (i64 x = 0; x < w; x++) {
            if (nb == STAGE_B)
                copy_bytes(J, d + (x0 + x) * dsa, buf + x * WIDE_B, STAGE_B * sizeof(bits_t));
            else copy_bytes(J, d + (x0 + x) * dsa, buf + x * WIDE_B, (size_t)nb * sizeof(bits_t));
        }
    }
    return 1;
}
#endif
#if defined(GROUP_WORDS) && SAME_BITS
/* The side a of a staged merged tile (tile_merged, TILE rows), and its rows' stride. */
#define STAGE_M (STAGE_A * STAGE_B / TILE)
#define STAGE_MS (STAGE_M + 64)
_Static_assert(TILE * STAGE_MS + STAGE_M <= STRIDEC_SCRATCH_BYTES, "staged merged rows");
#endif
#endif

#ifdef CAST_BLOCK
/* A streamed transposing cast converted in registers (tr_cast) whose tiles' source rows
   are first copied into the thread's scratch buffer, which stays in L2, then converted
   from there (J->staged, plan_units). Source rows longer than STRIP_BYTES (the float32 ->
   float16 transpose): tiles of CAST_STAGE_ROWS source rows by CAST_STAGE_BYTES of each,
   each row copied in one run. Shorter source rows that dim R-3 continues nearby in the
   same source plane (NHWC of a slice: the W of an image row, every other H row): tiles of
   CAST_GROUP_ROWS planes by the whole row by J->rg rows of dim R-3 (CAST_GROUP_BYTES of
   each plane), each plane read on for rg rows. Read straight, a tile's source rows are
   read for 128 or 256 bytes each before the walk moves on: more streams at once than the
   hardware prefetchers follow. The staged rows lie a line more than their length apart,
   so that a block's 16 rows fall in different sets of L1. */
#define CAST_STAGE_ROWS @CAST_STAGE_ROWS@
#define CAST_STAGE_BYTES @CAST_STAGE_BYTES@
#define CAST_GROUP_ROWS @CAST_GROUP_ROWS@
#define CAST_GROUP_BYTES @CAST_GROUP_BYTES@
_Static_assert(CAST_STAGE_ROWS * (CAST_STAGE_BYTES + 64) <= STRIDEC_SCRATCH_BYTES, "staged");
_Static_assert(CAST_GROUP_ROWS * (CAST_GROUP_BYTES + 64) <= STRIDEC_SCRATCH_BYTES, "staged");

/* Source rows a staged cast's copy prefetches ahead (staged_tile's STAGE_AHEAD counts
   lines). */
#define CAST_STAGE_AHEAD 2
/* n bytes from s to d, whole 64-byte pieces inline (a staged row may be 128 bytes); each
   piece's line at `ahead` bytes further prefetched. */
BLOCK_FN void stage_run(char* d, const char* s, i64 n, i64 ahead) {
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __builtin_prefetch(s + ahead, 0, 3);
        memcpy(d, s, 64);
    }
    if (n) memcpy(d, s, (size_t)n);
}

/* Tile [a0, a1) x [b0, b1) of k rows of dim R-3 from so, dof (their first); k = 1: one
   row. Converted from the staged rows, or straight from the source without a buffer.
   Out of line, so that its code can be found in the unit's assembly. */
#if IN_PART(2)
TILE_FN PART_FN void staged_cast(const job_t* J, i64 so, i64 dof, i64 k, i64 a0, i64 a1, i64 b0,
                         i64 b1) {
    i64 R = J->R, na = a1 - a0, nb = b1 - b0, dsa = J->ds[R - 2], ssb = J->ss[R - 1];
    i64 ss3 = k > 1 ? J->ss[R - 3] : 0, ds3 = k > 1 ? J->ds[R - 3] : 0;
    i64 ps = k * na + 64 / (i64)sizeof(src_t);
    const src_t* s = J->src + so + a0 + b0 * ssb;
    src_t* stage = (src_t*)stridec_pool_scratch_v1();
    if (nb * ps * (i64)sizeof(src_t) > STRIDEC_SCRATCH_BYTES) stage = 0;
    for (i64 y = 0; stage && y < nb; y++)
        for (i64 i = 0; i < k; i++)
            stage_run((char*)(stage + y * ps + i * na), (const char*)(s + y * ssb + i * ss3),
                      na * (i64)sizeof(src_t), CAST_STAGE_AHEAD * ssb * (i64)sizeof(src_t));
    dst_t* o = J->dst + dof + a0 * dsa + b0;
    int nt = ((uintptr_t)o & 63) == 0 && dsa * (i64)sizeof(dst_t) % 64 == 0
             && ds3 * (i64)sizeof(dst_t) % 64 == 0, lines = 0;
#ifdef CAST_LINES
    lines = stage && nt;  /* whole lines of halves from 32 staged rows at a time */
#endif
    nt = nt && (CAST_ROW_LINES || lines);  /* else through buf, its rows copied out as runs */
    dst_t buf[nt ? 1 : TILE * TILE] __attribute__((aligned(64)));
    i64 step = nt ? na : TILE * TILE / nb, by = V;  /* a, b of a pass */
#ifdef CAST_LINES
    if (lines) by = CAST_LINE_ROWS;
#endif
    for (i64 i = 0; i < k; i++) {
        const src_t* p = stage ? stage + i * na : s + i * ss3;
        i64 pb = stage ? ps : ssb;
        dst_t* oi = o + i * ds3;
        for (i64 x0 = 0; x0 < na; x0 += step) {
            i64 w = na - x0 < step ? na - x0 : step, x = 0, qs = nt ? dsa : nb;
            dst_t* q = nt ? oi + x0 * dsa : buf;
            const src_t* px = p + x0;
            for (; x + V <= w; x += V) {
                i64 y = 0;
                for (; y + by <= nb; y += by) {
#ifdef CAST_LINES
                    if (lines) {
                        tr_cast_lines(px + x + y * pb, pb, q + x * qs + y, qs, 1);
                        continue;
                    }
#endif
                    tr_cast(px + x + y * pb, pb, q + x * qs + y, qs, nt);
                }
                for (; y + V <= nb; y += V)  /* the rows after the last whole-line block */
                    tr_cast(px + x + y * pb, pb, q + x * qs + y, qs, nt);
                for (i64 xx = x; xx < x + V; xx++)
                    for (i64 yy = y; yy < nb; yy++) q[xx * qs + yy] = convert(px[xx + yy * pb]);
            }
            for (; x < w; x++)
                for (i64 yy = 0; yy < nb; yy++) q[x * qs + yy] = convert(px[x + yy * pb]);
            for (x = 0; !nt && x < w; x++)
                copy_bytes(J, oi + (x0 + x) * dsa, buf + x * nb, (size_t)nb * sizeof(dst_t));
        }
    }
}
#endif
#endif

/* Tile [a0, a1) x [b0, b1) of the last two dims: a = dim R-2 (source stride 1),
   b = dim R-1 (destination stride 1). */
TILE_FN static void tile(const job_t* J, i64 so, i64 dof, const i64* mb, i64 a0, i64 a1, i64 b0,
                 i64 b1, i64 nso) {
    i64 R = J->R, dsa = J->ds[R - 2], ssb = J->ss[R - 1];
    int state = 1;  /* 1: every mask holds on the tile, 0: some mask nowhere, 2: mixed */
    for (i64 m = 0; m < J->M; m++) {
        i64 ca = coef(J, m, R - 2), cb = coef(J, m, R - 1);
        i64 lo = coef(J, m, R), hi = coef(J, m, R + 1);
        i64 pa = ca * a0, qa = ca * (a1 - 1), pb = cb * b0, qb = cb * (b1 - 1);
        i64 low = mb[m] + (pa < qa ? pa : qa) + (pb < qb ? pb : qb);
        i64 high = mb[m] + (pa < qa ? qa : pa) + (pb < qb ? qb : pb);
        if (high < lo || low >= hi) { state = 0; break; }
        if (low < lo || high >= hi) state = 2;
    }
    if (state == 0) {
        for (i64 a = a0; a < a1; a++) fill_run(J, dof + a * dsa + b0, 1, b1 - b0);
        return;
    }
    if (state == 2) {
        int along_b = 1;  /* no mask depends on a: one interval of b for the whole tile */
        for (i64 m = 0; m < J->M; m++) along_b &= coef(J, m, R - 2) == 0;
        if (along_b) {
            i64 lo = b0, hi = b1;
            clip(J, mb, R - 1, b1, &lo, &hi);
#if SAME_BITS
            if (narrow_tile(J, so, dof, dsa, ssb, a0, a1, b0, b1, lo, hi, -1)) return;
#endif
            columns(J, so, dof, dsa, ssb, a0, a1, b0, lo, 0);
            columns(J, so, dof, dsa, ssb, a0, a1, lo, hi, 1);
            columns(J, so, dof, dsa, ssb, a0, a1, hi, b1, 0);
            return;
        }
        i64 row_mb[J->M + 1];
        for (i64 a = a0; a < a1; a++) {
            for (i64 m = 0; m < J->M; m++) row_mb[m] = mb[m] + coef(J, m, R - 2) * a;
            strided_row(J, so + a, dof + a * dsa, row_mb, ssb, 1, R - 1, b0, b1);
        }
        return;
    }
#if SAME_BITS
    if (b1 - b0 < V && narrow_tile(J, so, dof, dsa, ssb, a0, a1, b0, b1, b0, b1, nso)) return;
    if (a1 - a0 < V && ssb == a1 - a0
        && narrow_split(J, (const bits_t*)J->src + so + a0, (bits_t*)J->dst + dof + a0 * dsa,
                        dsa, b0, b1, a1 - a0))
        return;
#endif
    if (b1 - b0 < V) {
        columns(J, so, dof, dsa, ssb, a0, a1, b0, b1, 1);
        return;
    }
    const src_t* s = J->src;
    dst_t* d = J->dst;
    i64 a = a0;
@FAST@
    for (; a < a1; a++)
        for (i64 b = b0; b < b1; b++) d[dof + a * dsa + b] = convert(s[so + a + b * ssb]);
}

#if SAME_BITS
/* A tile of a merged side (J->merge): b = i * n1 + l spans dim R-3 (i) and dim R-1 (l, of
   n1 < V elements), which are contiguous together in the destination (CHWN4: the batch and
   the 4 lanes of a group), so each destination row a of the tile is one run of b1 - b0
   elements. Source row b is at i * ss[R-3] + l * ss[R-1], or a row of the fill where a
   mask (which depends on i and l alone) fails: V×V blocks read their rows by pointer. */
TILE_FN static void tile_merged(const job_t* J, i64 so, i64 dof, const i64* mb, i64 a0, i64 a1,
                        i64 b0, i64 b1) {
    i64 R = J->R, n1 = J->n[R - 1], dsa = J->ds[R - 2];
    i64 ssi = J->ss[R - 3], ssl = J->ss[R - 1];
    bits_t* stage = 0;
#ifdef STAGE_M
    /* Tiles longer than TILE along a are staged (J->staged, plan_units): the source rows
       copied into the thread's scratch buffer first, each as one run of up to STAGE_M
       elements, read on in long runs that the hardware prefetchers follow (as
       staged_tile); the fill row there too. Without a buffer, in tiles of TILE. */
    if (a1 - a0 > TILE) {
        stage = (bits_t*)stridec_pool_scratch_v1();
        if (!stage) {
            for (i64 x = a0; x < a1; x += TILE)
                tile_merged(J, so, dof, mb, x, x + TILE < a1 ? x + TILE : a1, b0, b1);
            return;
        }
    }
#endif
    const bits_t* rows[TILE];
    bits_t fill_local[TILE];
    bits_t* fill_row = fill_local;
#ifdef STAGE_M
    if (stage) fill_row = stage + TILE * STAGE_MS;
#endif
    bits_t fill;
    memcpy(&fill, &J->fill, sizeof fill);
    for (i64 x = 0; x < a1 - a0; x++) fill_row[x] = fill;
    const bits_t* s = (const bits_t*)J->src + so + a0;
    bits_t* d = (bits_t*)J->dst + dof + a0 * dsa;
    i64 i = b0 / n1, l = b0 % n1;
    int padded = 0;
    for (i64 b = b0; b < b1; b++) {
        int ok = 1;
        for (i64 m = 0; m < J->M; m++) {
            i64 v = mb[m] + coef(J, m, R - 3) * i + coef(J, m, R - 1) * l;
            ok &= coef(J, m, R) <= v && v < coef(J, m, R + 1);
        }
        rows[b - b0] = ok ? s + i * ssi + l * ssl : fill_row;
        padded |= !ok;
        if (++l == n1) { l = 0; i++; }
    }
    i64 na = a1 - a0, nb = b1 - b0, x = 0;
#ifdef STAGE_M
    for (i64 b = 0; stage && b < nb; b++) {
        if (rows[b] == fill_row) continue;
        if (na == STAGE_M) memcpy(stage + b * STAGE_MS, rows[b], STAGE_M * sizeof(bits_t));
        else memcpy(stage + b * STAGE_MS, rows[b], (size_t)na * sizeof(bits_t));
        rows[b] = stage + b * STAGE_MS;
    }
#endif
    /* A streamed tile with no row of the fill first copies its source rows into a buffer
       in L1, each source line read once and whole. The blocks read V elements of a row at
       a time (16 bytes for 1-byte elements), so they come back to each line several
       times, and rows 4 KiB apart (or a multiple: planes of a batch) all fall in the same
       sets of L1, which evicts the line in between (docs/cpu.md). A tile with rows of
       the fill (C = 3), slower streamed either way, is not streamed but moved by the
       32-bit word blocks (GROUP_WORDS, below), which need no buffer. */
    int nt = J->stream && !padded && !stage;
    bits_t sbuf[nt ? TILE * TILE : 1] __attribute__((aligned(64)));
    for (i64 b = 0; nt && b < nb; b++) {
        memcpy(sbuf + b * TILE, rows[b], (size_t)na * sizeof(bits_t));
        rows[b] = sbuf + b * TILE;
    }
    /* Streamed, the blocks go to a buffer in L1 (rows of nb) whose rows then go out whole. */
    bits_t buf[nt ? TILE * TILE : 1] __attribute__((aligned(64)));
    bits_t* o = nt ? buf : d + b0;
    i64 os = nt ? nb : dsa;
#ifdef GROUP_WORDS
    /* Groups of 4 one-byte lanes (CHWN4): WORDS_X columns (16 with AVX-512, 8 with AVX2)
       of 16 groups as 32-bit words, each destination row of the block 64 bytes, streamed
       where J->stream and the rows are whole lines; no staging buffers (the loads are
       WORDS_X bytes of each row, the stores whole rows). */
    if (n1 == 4 && b0 % 4 == 0) {
        int ntw = J->stream && ((uintptr_t)(d + b0) & 63) == 0 && dsa % 64 == 0;
        o = d + b0;
        os = dsa;
        for (; x + WORDS_X <= na; x += WORDS_X) {
            i64 y = 0;
            for (; y + 64 <= nb; y += 64) tr_words(rows + y, x, o + x * os + y, os, ntw);
            for (i64 xx = x; xx < x + WORDS_X; xx++)
                for (i64 yy = y; yy < nb; yy++) o[xx * os + yy] = rows[yy][xx];
        }
        for (; x < na; x++)
            for (i64 y = 0; y < nb; y++) o[x * os + y] = rows[y][x];
        return;
    }
#endif
    for (; x + V <= na; x += V) {
        i64 y = 0;
        for (; y + V <= nb; y += V) tr_block_rows(rows + y, x, o + x * os + y, os);
        for (i64 xx = x; xx < x + V; xx++)
            for (i64 yy = y; yy < nb; yy++) o[xx * os + yy] = rows[yy][xx];
    }
    for (; x < na; x++)
        for (i64 y = 0; y < nb; y++) o[x * os + y] = rows[y][x];
    if (!nt) return;
    if (dsa == nb) {
        stream_copy(d + b0, buf, na * nb * (i64)sizeof(bits_t));
    } else {
        for (x = 0; x < na; x++)
            stream_copy(d + x * dsa + b0, buf + x * nb, (size_t)nb * sizeof(bits_t));
    }
}
#endif

/* Units [u0, u1): the tiles of outer row u / (ntu * nti), in strips of `strip` tiles along
   a: a strip's tiles run along a (the same source rows, further on), then the strip moves
   on along b (the same destination rows, further on), then to the next strip. */
#ifdef CAST_BLOCK
/* Units [u0, u1) of staged cast tiles spanning J->rg rows of dim R-3 (staged_cast): the
   tiles along b of one group of rows, then the next group, then the next outer row. */
static void work_groups(const job_t* J, i64 u0, i64 u1) {
    i64 R = J->R, c[MAXR], mb[J->M + 1], so, dof;
    i64 n3 = J->n[R - 3], per = (n3 + J->rg - 1) / J->rg * J->nti;
    for (i64 u = u0; u < u1; u++) {
        i64 i0 = u % per / J->nti * J->rg, b0 = u % J->nti * J->tb;
        i64 k = n3 - i0 < J->rg ? n3 - i0 : J->rg;
        i64 b1 = b0 + J->tb < J->n[R - 1] ? b0 + J->tb : J->n[R - 1];
        odometer_start(J, R - 3, u / per, c, &so, &dof, mb);
        staged_cast(J, so + i0 * J->ss[R - 3], dof + i0 * J->ds[R - 3], k, 0, J->n[R - 2],
                    b0, b1);
    }
}
#endif

static void work(const job_t* J, i64 u0, i64 u1) {
#ifdef CAST_BLOCK
    if (J->rg) {
        work_groups(J, u0, u1);
        return;
    }
#endif
    i64 R = J->R, nout = R - 2 - J->merge, c[MAXR], mb[J->M + 1];
    i64 per_row = J->ntu * J->nti, S = J->strip;
    i64 row_index = u0 / per_row, f = u0 % per_row;
    i64 g = f / (S * J->nti) * S;  /* the strip's first tile along a */
    i64 w = J->ntu - g < S ? J->ntu - g : S, rem = f - g * J->nti;
    i64 tu = g + rem % w, ti = rem / w;
    i64 so, dof;
    odometer_start(J, nout, row_index, c, &so, &dof, mb);
    i64 na = J->n[R - 2], nb = J->merge ? J->n[R - 3] * J->n[R - 1] : J->n[R - 1];
    /* A tile runs once the next unit's is known (`pending`): a tile of as many rows and
       columns as this one passes where the same rows and columns of the next one start
       (`nso`: its source offset less this one's a0 and b0), for narrow_put's prefetch;
       -1 where they differ, a mask may leave a column of the next uncopied, or it is the
       last. The tiles and their order are those of the walk below. */
    i64 p_so = 0, p_dof = 0, p_a0 = 0, p_a1 = 0, p_b0 = 0, p_b1 = 0, p_mb[J->M + 1];
    int pending = 0;
    const i64 ssb = J->ss[R - 1];
    for (i64 u = u0; u < u1; u++) {
        i64 a0 = tu * J->ta, b0 = ti * J->tb;
        i64 a1 = a0 + J->ta < na ? a0 + J->ta : na, b1 = b0 + J->tb < nb ? b0 + J->tb : nb;
#if SAME_BITS
        if (J->merge) tile_merged(J, so, dof, mb, a0, a1, b0, b1);
        else
#endif
        {
            if (pending) {
                i64 nso = J->M == 0 && a1 - a0 == p_a1 - p_a0 && b1 - b0 == p_b1 - p_b0
                    ? so + (a0 - p_a0) + (b0 - p_b0) * ssb : -1;
                tile(J, p_so, p_dof, p_mb, p_a0, p_a1, p_b0, p_b1, nso);
            }
            pending = 1;
            p_so = so, p_dof = dof, p_a0 = a0, p_a1 = a1, p_b0 = b0, p_b1 = b1;
            memcpy(p_mb, mb, sizeof p_mb);
        }
        if (++tu < g + w) continue;
        tu = g;
        if (++ti < J->nti) continue;
        ti = 0;
        g += w;
        w = J->ntu - g < S ? J->ntu - g : S;
        tu = g;
        if (g < J->ntu) continue;
        g = tu = 0;
        w = J->ntu < S ? J->ntu : S;
        odometer_step(J, nout, c, &so, &dof, mb);
    }
    if (pending) tile(J, p_so, p_dof, p_mb, p_a0, p_a1, p_b0, p_b1, -1);
}

/* The source rows of a streamed tile walked in strips: 128 bytes of each destination row
   (whole lines), for a cast 128 bytes of its wider type: a float32 -> float16 tile reads
   32 source rows and writes 64 bytes of each destination row (not 64 rows: more source
   rows read on at once than the prefetchers follow). And the source row bytes of a strip. */
#define STRIP_UNIT ((i64)(sizeof(src_t) > sizeof(dst_t) ? sizeof(src_t) : sizeof(dst_t)))
#if defined(BLOCK_NT) && NT_STRIPS && SAME_BITS
#define STRIP_ROWS NT_ROWS  /* the whole-line blocks' rows (_lines_block_2) */
#else
#define STRIP_ROWS (128 / STRIP_UNIT < V ? V : 128 / STRIP_UNIT > TILE ? TILE : 128 / STRIP_UNIT)
#endif
#define STRIP_BYTES 4096

/* The order of a thread's tiles (work): strips of J->strip tiles along a. One tile: the
   next tile continues the same destination rows. When the call streams into destination
   rows that are not whole lines, the whole of a (the next tile continues the same source
   rows), so the partial line a tile leaves at its edge is not written next by ordinary
   stores while its streamed part is still in flight (docs/cpu.md). With `strips` (a
   streamed call of whole-line rows, source rows longer than STRIP_BYTES), STRIP_BYTES
   of the source rows: the tile's STRIP_ROWS source rows are read on in long runs, which
   the hardware prefetchers follow, before the walk moves on to the next source rows. */
static void plan_walk(job_t* J, int strips) {
    i64 R = J->R;
    J->strip = 1;
    if (J->stream && J->ds[R - 2] * (i64)sizeof(dst_t) % 64 != 0) J->strip = J->ntu;
    else if (strips) J->strip = STRIP_BYTES / (J->ta * (i64)sizeof(src_t));
    if (J->strip < 1) J->strip = 1;
}

static void plan_units(job_t* J, i64 nthreads) {
    (void)nthreads;
    i64 R = J->R, rows = 1;
    J->ta = J->tb = TILE;
#if SAME_BITS
    /* A narrow innermost dim that the destination continues with dim R-3 (the lanes of a
       CHWN4 group, then the batch) makes one wide side of both: merged when no mask
       depends on a and masked elements get the fill. */
    if (R >= 3 && J->n[R - 1] < V && J->ds[R - 3] == J->n[R - 1]
        && J->n[R - 3] * J->n[R - 1] >= V && (J->M == 0 || J->has_fill)) {
        J->merge = 1;
        for (i64 m = 0; m < J->M; m++) J->merge &= coef(J, m, R - 2) == 0;
    }
    if (J->merge) {
        for (i64 k = 0; k < R - 3; k++) rows *= J->n[k];
        J->nti = (J->n[R - 3] * J->n[R - 1] + J->tb - 1) / J->tb;
#ifdef STAGE_M
        /* Streamed groups of 4 one-byte lanes (tr_words) in tiles of STAGE_M along a,
           their source rows staged in L2 (tile_merged). */
        if (J->stream && J->n[R - 1] == 4 && J->n[R - 2] > TILE) {
            J->ta = STAGE_M;
            J->staged = 1;
        }
#endif
        J->ntu = (J->n[R - 2] + J->ta - 1) / J->ta;
        J->units = rows * J->ntu * J->nti;
        plan_walk(J, 0);
        return;
    }
#endif
    for (i64 k = 0; k < R - 2; k++) rows *= J->n[k];
    int strips = 1;
#ifdef WIDE_K
    J->ta = WIDE_A;
    J->tb = WIDE_B;
    strips = 0;
    /* Contiguous destination rows narrower than a staged tile, whole blocks wide (a pack's
       lanes): tiles as long along a as make the staged tile's WIDE_A·WIDE_B elements. */
    if (J->n[R - 1] < WIDE_B && J->n[R - 1] % WIDE_K == 0 && J->ds[R - 2] == J->n[R - 1])
        J->ta = WIDE_A * (WIDE_B / J->n[R - 1]);
#endif
#ifdef STAGE_A
    /* Streamed staged tiles of destination rows at least a tile long: their source rows
       staged in L2, STAGE_A elements each (staged_tile). */
    if (J->stream && J->ta == WIDE_A && J->n[R - 1] >= WIDE_B && J->n[R - 2] > WIDE_A) {
        J->ta = STAGE_A;
        J->tb = STAGE_B;
        J->staged = 1;
    } else if (J->stream && J->ta > WIDE_A && J->n[R - 2] > J->ta) {
        /* A pack's lanes (above), streamed: tiles STAGE_A / WIDE_A times as long, their
           source rows staged in L2 too (staged_tile). */
        J->ta *= STAGE_A / WIDE_A;
        J->staged = 1;
    }
#endif
#if SAME_BITS
    /* A side narrower than a vector is moved by interleaves: its tiles run long the other
       way, so a tile's fixed costs are spread over more elements. */
    if (J->n[J->R - 1] < V) J->ta = 16 * TILE, strips = 0;
    else if (J->n[J->R - 2] < V) J->tb = 16 * TILE, strips = 0;
#endif
#ifdef CAST_BLOCK
    /* Streamed casts converted in registers: tiles staged in L2 (staged_cast). */
    i64 row = J->n[R - 2] * (i64)sizeof(src_t);
    if (J->stream && J->M == 0 && J->n[R - 1] >= V && J->n[R - 2] >= V) {
        if (row > STRIP_BYTES) {
            J->ta = CAST_STAGE_BYTES / (i64)sizeof(src_t);
            J->tb = CAST_STAGE_ROWS;
            J->staged = 1;
            strips = 0;
        } else if (R >= 3 && 2 * row <= CAST_GROUP_BYTES && J->n[R - 3] > 1
                   && J->ss[R - 3] <= 4 * J->n[R - 2] && -J->ss[R - 3] <= 4 * J->n[R - 2]) {
            /* Rows that dim R-3 continues nearby in their plane (at most 4 rows' length
               on: the plane read on within a page or two); not a batch of planes. */
            J->rg = CAST_GROUP_BYTES / row < J->n[R - 3] ? CAST_GROUP_BYTES / row : J->n[R - 3];
            J->tb = CAST_GROUP_ROWS;
            J->nti = (J->n[R - 1] + J->tb - 1) / J->tb;
            J->units = rows / J->n[R - 3] * ((J->n[R - 3] + J->rg - 1) / J->rg) * J->nti;
            J->staged = 1;
            return;
        }
    }
#endif
    /* Streamed tiles of source rows longer than a strip: TILE x STRIP_ROWS, STRIP_ROWS
       source rows (whole lines of each destination row), walked in strips of
       STRIP_BYTES of the source's rows (plan_walk). */
    strips = strips && J->stream && J->n[R - 2] * (i64)sizeof(src_t) > STRIP_BYTES;
    if (strips) J->tb = STRIP_ROWS;
    J->ntu = (J->n[J->R - 2] + J->ta - 1) / J->ta;
    J->nti = (J->n[J->R - 1] + J->tb - 1) / J->tb;
    J->units = rows * J->ntu * J->nti;
    plan_walk(J, strips);
}
"""

_FAST_VECTOR = r"""#ifdef STAGE_A
    if (J->staged && staged_tile(J, so, dof, dsa, ssb, a0, a1, b0, b1)) return;
#endif
#ifdef WIDE_K
    if (a1 - a0 == WIDE_A && b1 - b0 == WIDE_B) {  /* a whole staged tile */
        bits_t buf[WIDE_A * WIDE_B] __attribute__((aligned(64)));
        for (i64 y = 0; y < WIDE_B; y += WIDE_K)
            for (i64 x = 0; x < WIDE_A; x += WIDE_L)
                tr_wide(s + so + a0 + x + (b0 + y) * ssb, ssb, buf + x * WIDE_B + y, WIDE_B);
        for (i64 x = 0; x < WIDE_A; x++)
            copy_bytes(J, d + dof + (a0 + x) * dsa + b0, buf + x * WIDE_B, sizeof buf / WIDE_A);
        return;
    }
    if (dsa == b1 - b0 && (b1 - b0) % WIDE_K == 0 && (a1 - a0) % WIDE_A == 0
        && (a1 - a0) * (b1 - b0) <= WIDE_A * WIDE_B) {
        /* Contiguous destination rows of fewer than WIDE_B elements (a pack's lanes: NCHW32
           and NCHW64 of int8): the same blocks into a buffer of the tile's rows, which go
           out as one run (plan_units makes such tiles WIDE_A·WIDE_B elements long). */
        i64 na = a1 - a0, nb = b1 - b0;
        bits_t buf[WIDE_A * WIDE_B] __attribute__((aligned(64)));
        for (i64 y = 0; y < nb; y += WIDE_K)
            for (i64 x = 0; x < na; x += WIDE_L)
                tr_wide(s + so + a0 + x + (b0 + y) * ssb, ssb, buf + x * nb + y, nb);
        copy_bytes(J, d + dof + a0 * dsa + b0, buf, (size_t)(na * nb) * sizeof(bits_t));
        return;
    }
#endif
    if (J->stream && stream_tile(J, so, dof, dsa, ssb, a0, a1, b0, b1)) return;
    for (; a + V <= a1; a += V) {
        i64 b = b0;
        for (; b + V <= b1; b += V) tr_block(s + so + a + b * ssb, ssb, d + dof + a * dsa + b, dsa);
        for (i64 x = a; x < a + V; x++)
            for (i64 y = b; y < b1; y++) d[dof + x * dsa + y] = s[so + x + y * ssb];
    }"""

# A cast: where its pair converts in registers (`_cast_block`), its blocks are converted
# between their shuffles and their stores. Rows of halves (half a line a block) go into a
# buffer in L1 whose rows are then copied out whole (streamed when the call streams: whole
# lines from a line's start); rows of float32 straight to the destination, streamed from
# the registers where its rows are whole lines from a line's start, else, when the call
# streams, through the buffer. Elsewhere the tile is transposed in registers as bits of
# the source type into a buffer (row a - a0 holds b0 .. b1), then each row converted as
# one contiguous loop.
_FAST_CAST = r"""#ifdef CAST_BLOCK
    if (J->staged) {
        staged_cast(J, so, dof, 1, a0, a1, b0, b1);
        return;
    }
    {
        const src_t* p = s + so + a0 + b0 * ssb;
        dst_t* o = d + dof + a0 * dsa + b0;
        i64 na = a1 - a0, nb = b1 - b0, x = 0;
        int nt = CAST_ROW_LINES && J->stream && ((uintptr_t)o & 63) == 0
                 && dsa * (i64)sizeof(dst_t) % 64 == 0;
        int staged = !nt && (J->stream || !CAST_WIDENS);
        dst_t buf[staged ? TILE * TILE : 1] __attribute__((aligned(64)));
        dst_t* q = staged ? buf : o;
        i64 qs = staged ? nb : dsa;
        for (; x + V <= na; x += V) {
            i64 y = 0;
            for (; y + V <= nb; y += V) tr_cast(p + x + y * ssb, ssb, q + x * qs + y, qs, nt);
            for (i64 xx = x; xx < x + V; xx++)
                for (i64 yy = y; yy < nb; yy++) q[xx * qs + yy] = convert(p[xx + yy * ssb]);
        }
        for (; x < na; x++)
            for (i64 yy = 0; yy < nb; yy++) q[x * qs + yy] = convert(p[x + yy * ssb]);
        for (x = 0; staged && x < na; x++)
            copy_bytes(J, o + x * dsa, buf + x * nb, (size_t)nb * sizeof(dst_t));
        a = a1;
    }
#else
    {
        bits_t tmp[TILE * TILE];
        const bits_t* sb = (const bits_t*)s;
        i64 na = a1 - a0, nb = b1 - b0, x = 0;
        for (; x + V <= na; x += V) {
            i64 y = 0;
            for (; y + V <= nb; y += V)
                tr_block(sb + so + a0 + x + (b0 + y) * ssb, ssb, tmp + x * TILE + y, TILE);
            for (i64 xx = x; xx < x + V; xx++)
                for (i64 yy = y; yy < nb; yy++)
                    tmp[xx * TILE + yy] = sb[so + a0 + xx + (b0 + yy) * ssb];
        }
        for (; x < na; x++)
            for (i64 yy = 0; yy < nb; yy++) tmp[x * TILE + yy] = sb[so + a0 + x + (b0 + yy) * ssb];
        for (x = 0; x < na; x++) {
            if (J->stream) {  /* converted into a buffer in L1, then streamed */
                dst_t row[TILE] __attribute__((aligned(64)));
                convert_run((const src_t*)(tmp + x * TILE), row, nb);
                stream_copy(d + dof + (a0 + x) * dsa + b0, row, nb * (i64)sizeof(dst_t));
                continue;
            }
            convert_run((const src_t*)(tmp + x * TILE), d + dof + (a0 + x) * dsa + b0, nb);
        }
        a = a1;
    }
#endif"""

_DRIVER = r"""
#if IN_PART(1)
static void work_task(void* arg, i64 u0, i64 u1) {
    const job_t* J = (const job_t*)arg;
    work(J, u0, u1);
    if (J->stream) stream_end();
}

/* The job of one call, set up in `job` (@SYMBOL@_job_bytes() bytes, 64-byte aligned): its
   units, negated when they run on the calling thread alone (a small copy), 0 if none.
   `@SYMBOL@_work(job, u0, u1)` then runs units [u0, u1) (the batches' one parallel
   region, stridec_pool_run_many_v1). */
i64 @SYMBOL@_prepare(const void* src, void* dst, const i64* p, i64 nthreads, void* job) {
    job_t* J = (job_t*)job;
    memset(J, 0, sizeof *J);
    J->src = (const src_t*)src;
    J->dst = (dst_t*)dst;
    J->R = p[0];
    J->soff = p[1];
    J->doff = p[2];
    J->M = p[3];
    J->has_fill = (int)p[4];
    i64 bits = p[5];
    memcpy(&J->fill, &bits, sizeof(dst_t));  /* little-endian: the low bytes */
    J->n = p + 8;
    J->ss = p + 8 + J->R;
    J->ds = p + 8 + 2 * J->R;
    J->mk = p + 8 + 3 * J->R;
    i64 numel = 1;
    for (i64 k = 0; k < J->R; k++) numel *= J->n[k];
    if (numel == 0) return 0;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAXT) nthreads = MAXT;
    /* A call's own bytes: those it writes, and for a cast the mean of those it reads and
       writes (a narrowing cast brings its source, twice its output, through the cache). */
    J->stream = stream_wanted(p[6] > 0 ? p[6]
                              : numel * (i64)(sizeof(src_t) + sizeof(dst_t)) / 2);
    plan_units(J, nthreads);
    for (size_t k = 0; J->has_fill && k < 64; k += sizeof(dst_t))
        memcpy(J->fill_line + k, &J->fill, sizeof(dst_t));
    if ((double)numel * (double)(sizeof(src_t) + sizeof(dst_t)) < PARALLEL_BYTES) nthreads = 1;
    return nthreads <= 1 || J->units < 2 ? -J->units : J->units;
}

void @SYMBOL@_work(void* job, i64 u0, i64 u1) { work_task(job, u0, u1); }

i64 @SYMBOL@_job_bytes(void) { return (i64)sizeof(job_t); }

void @SYMBOL@(const void* src, void* dst, const i64* p, i64 nthreads) {
    job_t J;
    i64 units = @SYMBOL@_prepare(src, dst, p, nthreads, &J);
    if (units <= 0) { if (units < 0) work_task(&J, 0, -units); return; }
    if (nthreads > MAXT) nthreads = MAXT;
    /* 8 chunks a thread: a thread that starts late or runs slower takes fewer. */
    stridec_pool_run_v1(work_task, &J, units, (units + 8 * nthreads - 1) / (8 * nthreads),
                        nthreads);
}
#endif
"""


@functools.cache
def emit_class_source(cls: CopyClass) -> str:
    """The C compile unit of a copy class: one exported function `cls.symbol`."""
    src_t, dst_t = _c_type(cls.src), _c_type(cls.dst)
    same = cls.src == cls.dst
    convert = "x" if same else c_convert(cls.src, cls.dst, "x")
    run = "" if same else c_convert_run(cls.src, cls.dst)
    lanes = None if same else c_convert_lanes(cls.src, cls.dst)
    parts = [
        f"/* stridec C copy kernel {cls.symbol}: strategy {cls.strategy}, "
        f"{cls.src} -> {cls.dst} */",
        _COMMON.replace("@SRC_T@", src_t).replace("@DST_T@", dst_t).replace("@CONVERT@", convert)
        .replace("@CONVERT_RUN@", run).replace("@SAME@", str(int(same)))
        .replace("@NARROW_MAX@", str(NARROW_MAX)).replace("@MAX_RANK@", str(MAX_RANK))
        .replace("@PRELUDE@", C_PRELUDE).replace("@PARTS@", PARTS_DECLARATION)
        .replace("@POOL@", POOL_DECLARATION)
        .replace("@STREAM@", STREAM_DECLARATION),
    ]
    if cls.strategy == "tiled_transpose":
        size = _itemsize(cls.src)
        parts.append(_transpose_blocks(size, same))
        if lanes is not None:
            parts += [lanes, _cast_block(cls.src)]
        fast = _FAST_VECTOR if same else _FAST_CAST
        parts.append(_TRANSPOSE.replace("@TILE@", str(_TILE[max(size, _itemsize(cls.dst))]))
                     .replace("@CAST_STAGE_ROWS@", str(_CAST_STAGED[0]))
                     .replace("@CAST_STAGE_BYTES@", str(_CAST_STAGED[1]))
                     .replace("@CAST_GROUP_ROWS@", str(_CAST_GROUPED[0]))
                     .replace("@CAST_GROUP_BYTES@", str(_CAST_GROUPED[1]))
                     .replace("@FAST@", fast))
    else:
        if cls.strategy == "linear":
            body, plain = (_LINEAR_SAME, _PLAIN_SAME) if same else (_LINEAR_CAST, _PLAIN_CAST)
        elif cls.strategy == "gather":
            body, plain = _GATHER, _PLAIN_GATHER
        else:
            raise UnsupportedError(f"cpu copy: strategy must be one of {C_STRATEGIES}; "
                                   f"got {cls.strategy!r}")
        if lanes is not None and cls.strategy == "linear":
            parts += [lanes, _stream_lanes(cls.src)]
        parts.append(plain)
        parts.append(_ROWS.replace("@ROW_BODY@", body))
    parts.append(_DRIVER.replace("@SYMBOL@", cls.symbol))
    return "\n".join(parts)
