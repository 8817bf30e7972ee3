"""Triton code generation for one strided copy (docs/design.md#passes, `lower_to_program`).

`generate_copy(spec, target)` turns a `CopySpec` into a `CopyKernel`: the complete source of
a Python module with one `@triton.jit` kernel
`(src_ptr, dst_ptr, <runtime scalars>, <block constexprs>)`, its grid and its launch
arguments. Sizes, strides, offsets, mask coefficients and bounds are runtime arguments
(`KernelParams`), as in the C kernels, specialized only where it pays: a 0 or a 1 is
written in (a unit stride makes an access contiguous, a size-1 dim is dropped), a multiple
of 16 (or of 8, 4, 2) is marked as one (vector widths), and the index width is int32 or
int64. So the
source depends only on the copy's class — strategy, dtypes, canonical rank, those bits,
which bounds a mask needs, whether a tile axis has a ragged tail, and the tile — and two
copies of one class (the same graph at another batch size, say) share the source and
Triton's compile; the same spec and target always give byte-identical source.

Steps:
1. `canonicalize_copy` (spec.py): drop size-1 dims, simplify masks, flip dims with negative
   destination strides, order dims so the smallest destination stride is innermost, then
   merge dims jointly on source, destination and masks.
2. `plan_copy` picks the strategy on the canonical dims:
   - `linear`: the innermost dim is unit-stride on both sides. Rank 1 is one flat `offs`
     (no division); otherwise a [BLOCK_R, BLOCK_C] tile whose columns run along that dim
     and whose rows are the other dims, decomposed once per row (not per element).
   - `tiled_transpose`: the destination is unit-stride innermost and the source is
     unit-stride in another dim. A [TILE_A, TILE_B] tile is loaded with A (the source's
     unit dim) consecutive and stored with B (the destination's) consecutive; the
     remaining dims are folded into whichever tile axis has the larger extent, and so
     into the program id. Each access is coalesced on its own side (Triton's coalescing
     pass gives the load and the store their own layouts and converts between them).
   - `gather`: anything else — one flat index decomposed by div/mod into coordinates.
   Block sizes follow the widest element size; `target="cpu"` (Triton's interpreter) uses
   blocks so large that a typical test tensor takes <= 16 programs.
3. Index arithmetic is int32 when every value it forms fits in 2^31 - 1 (addresses on both
   sides, mask sums, and the padded flat/tile index); otherwise the program id is cast to
   int64 before anything is multiplied.
4. Masks: a failing `MaskBound` stores `fill` (cast to the destination dtype) and masks the
   load, so padding is never read. Casts are fused and give torch's bits on the device
   the kernel runs on: torch's CUDA conversions for "cuda", its CPU (x86) ones for the
   interpreter (`_cast_lines`; docs/semantics.md#casts).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from stridec.compiler.codegen.spec import (
    COPY_STRATEGIES,
    CopySpec,
    Tuning,
    address_span,
    bind_copy,
    binding_class,
    canonicalize_copy,
    canonicalize_symbolic,
    copy_strategy,
    copy_symbols,
    is_fill_only,
    linear_span,
    transpose_dim,
)
from stridec.errors import UnsupportedError
from stridec.ir.dtypes import DType, bit_pattern
from stridec.ir.symbols import Sym, ceil_div, evaluate, floor_div, symbol

__all__ = [
    "STRATEGIES",
    "TARGETS",
    "CopyPlan",
    "CopyKernel",
    "plan_copy",
    "BODY_LOCALS",
    "describe_plan",
    "describe_values",
    "KernelParams",
    "emit_hints",
    "index_limits",
    "plan_spans",
    "plan_valid_for",
    "emit_copy_body",
    "emit_copy_source",
    "kernel_module",
    "touched_spans",
    "generate_copy",
    "index_bits_for",
]

STRATEGIES = COPY_STRATEGIES
TARGETS = ("cuda", "cpu")

INT32_MAX = 2**31 - 1

# CUDA: bytes per program for linear/gather copies, and [A, B] transpose tiles by element
# size (wider elements, smaller tiles: 64x64 fp32 is a 16 KiB shared-memory staging tile).
_LINEAR_BYTES = 16384
_LINEAR_BLOCK_RANGE = (1024, 8192)
_GATHER_BLOCK = 1024
_TRANSPOSE_TILES = {1: (128, 128), 2: (64, 128), 4: (64, 64), 8: (64, 64)}
# CPU (interpreter): one program costs about a millisecond of Python, so aim for
# <= _CPU_PROGRAMS programs, with blocks capped so huge tensors still fit in memory.
_CPU_PROGRAMS = 16
_CPU_BLOCK_RANGE = (4096, 1 << 20)


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """How a canonical copy maps onto a kernel: which dims each tile axis walks, and sizes.

    `axes[a]` lists the canonical dims decomposed from tile axis `a`'s index (outermost
    first); `extents[a]` is their product; `blocks[a]` the tile size along that axis.
    One axis is a flat kernel, two axes a 2-D tile (rows = axis 0, columns = axis 1).
    """

    spec: CopySpec  # canonical
    strategy: str
    axes: tuple[tuple[int, ...], ...]
    extents: tuple[int, ...]
    blocks: tuple[int, ...]
    block_names: tuple[str, ...]
    grid: tuple[int, ...]
    index_bits: int
    num_warps: int
    fill_only: bool
    numel: int
    # A symbolic plan: `spec`, `extents`, `grid` and `numel` hold symbolic sizes, `at` is
    # the canonical copy at the binding `hint` it was planned for (static: `spec`, None).
    at: CopySpec | None = None
    hint: Mapping[str, int] | None = None
    # "cuda" or "cpu" (the interpreter): whose conversions a cast follows (`_cast_lines`).
    target: str = "cuda"

    @property
    def symbolic(self) -> bool:
        return self.hint is not None

    @property
    def constexprs(self) -> dict[str, int]:
        return dict(zip(self.block_names, self.blocks, strict=True))


def _max_itemsize(spec: CopySpec, fill_only: bool) -> int:
    if fill_only:
        return spec.dst_dtype.itemsize
    return max(spec.src_dtype.itemsize, spec.dst_dtype.itemsize)


def _forced_strategy(spec: CopySpec, fill_only: bool, strategy: str) -> tuple[str, int | None]:
    """`strategy` as `Tuning` asks for it; UnsupportedError when it cannot run `spec`."""
    if strategy == "gather":
        return "gather", None
    if strategy == "linear" and (
        spec.rank == 0 or (spec.dst_strides[-1] == 1 and (fill_only or spec.src_strides[-1] == 1))
    ):
        return "linear", None
    if strategy == "tiled_transpose" and not fill_only:
        unit = transpose_dim(spec)
        if unit is not None:
            return "tiled_transpose", unit
    if strategy not in STRATEGIES:
        raise UnsupportedError(f"copy: strategy must be one of {STRATEGIES}; got {strategy!r}")
    raise UnsupportedError(
        f"copy: strategy {strategy!r} cannot run this copy (canonical sizes {spec.sizes}, "
        f"src strides {spec.src_strides}, dst strides {spec.dst_strides})"
    )


def _trim_waste(n: int, t: int, floor: int = 16) -> int:
    """Halve a power-of-two block while more than 1/8 of its padded lanes would be idle."""
    while t > floor and _cdiv(n, t) * t * 8 > n * 9:
        t //= 2
    return t


def _tile_2d(n0: int, n1: int, base0: int, base1: int, area: int) -> tuple[int, int]:
    """Power-of-two tile no larger than needed; a small side hands its area to the other."""
    t0 = min(_next_pow2(n0), base0)
    t1 = min(_next_pow2(n1), base1)
    if t0 < base0:
        t1 = min(_next_pow2(n1), max(base1, area // t0))
    if t1 < base1:
        t0 = min(_next_pow2(n0), max(base0, area // t1))
    return t0, t1


def index_bits_for(plan_spec: CopySpec, padded_index: int, fill_only: bool) -> int:
    """32 when every integer the kernel forms fits in int32, else 64.

    Counted: each address's partial sums (bounded by `|offset| + Σ (n_k-1)·|stride_k|`),
    each mask sum and the bounds it is compared with, and the largest (padded) flat or
    tile index. Lanes beyond the iteration space are masked off and never dereferenced.
    """
    spec = plan_spec
    bounds = [padded_index]
    sides = [(spec.dst_strides, spec.dst_offset)]
    if not fill_only:
        sides.append((spec.src_strides, spec.src_offset))
    for strides, offset in sides:
        bounds.append(
            abs(offset) + sum((n - 1) * abs(s) for n, s in zip(spec.sizes, strides, strict=True))
        )
    for m in spec.masks:
        low, high = linear_span(spec.sizes, m.coeffs)
        bounds.append(sum((n - 1) * abs(c) for n, c in zip(spec.sizes, m.coeffs, strict=True)))
        if low < m.lo:
            bounds.append(abs(m.lo))
        if high >= m.hi:
            bounds.append(abs(m.hi))
    return 32 if max(bounds) <= INT32_MAX else 64


def plan_copy(
    spec: CopySpec, target: str = "cuda", tuning: Tuning | None = None,
    hint: Mapping[str, int] | None = None,
) -> CopyPlan:
    """Canonicalize `spec` and choose strategy, tile axes, block sizes, grid, index width
    (`tuning` overrides some of these choices on the CUDA target).

    A copy over symbolic sizes (`stridec.ir.symbols`) is planned for the class of the
    binding `hint` (`stridec.runtime.symbolic.binding_class`): symbols that are 0 or 1
    there become those constants, the rest stay symbolic, and every choice holds for
    every binding of the class — dims merged only where the merge is an identity, a
    bounds check on every symbolic extent, the tile chosen at `hint` (any tile is
    correct) — except the index width, chosen at `hint` and checked per binding
    (`CopyKernel.valid_for`)."""
    if target not in TARGETS:
        raise UnsupportedError(f"copy: target must be one of {TARGETS}; got {target!r}")
    symbols = copy_symbols(spec)
    if symbols:
        if hint is None or not symbols <= hint.keys():
            missing = sorted(symbols - (hint or {}).keys())
            raise UnsupportedError(
                f"copy: sizes in {', '.join(missing)} need a binding of the class to plan "
                f"for (hint); got {dict(hint or {})}"
            )
        constants = {k: hint[k] for k in symbols if hint[k] in (0, 1)}
        if constants:
            spec = bind_copy(spec, constants)
            if not copy_symbols(spec):
                return plan_copy(spec, target, tuning)
        at_spec = bind_copy(spec, hint)
        if at_spec.numel == 0:
            raise UnsupportedError(
                f"copy: the hint {dict(hint)} makes the copy empty; plan for a binding "
                "that copies something"
            )
        canon = canonicalize_symbolic(spec, hint)
        at = bind_copy(canon, hint)
        hint = {k: hint[k] for k in sorted(copy_symbols(canon))}
    else:
        numel = spec.numel
        if numel == 0:
            empty = CopySpec((), (), 0, (), 0, spec.src_dtype, spec.dst_dtype, (), spec.fill)
            return CopyPlan(empty, "linear", ((),), (0,), (1,), ("BLOCK",), (0,), 32, 1, False,
                            0, target=target)
        canon = at = canonicalize_copy(spec)
        hint = None
    numel = canon.numel
    fill_only = is_fill_only(at)
    if fill_only and canon.fill is None:
        # Every element is masked and masked elements are not written: nothing to do.
        return CopyPlan(canon, "linear", ((),), (1,), (1,), ("BLOCK",), (0,), 32, 1, True, numel,
                        at, hint, target)
    on_cpu = target == "cpu"
    tuning = None if on_cpu else tuning
    if tuning is not None and tuning.strategy is not None:
        strategy, unit_dim = _forced_strategy(at, fill_only, tuning.strategy)
    else:
        strategy, unit_dim = copy_strategy(at, fill_only)
    if hint is not None and not _holds_symbolically(canon, strategy, unit_dim, fill_only):
        strategy, unit_dim = "gather", None  # a unit stride at the hint only
    r = canon.rank
    itemsize = _max_itemsize(canon, fill_only)
    at_numel = at.numel
    cpu_area = min(
        max(_next_pow2(_cdiv(at_numel, _CPU_PROGRAMS)), _CPU_BLOCK_RANGE[0]), _CPU_BLOCK_RANGE[1]
    )

    axes: tuple[tuple[int, ...], ...]
    if strategy == "tiled_transpose":
        assert unit_dim is not None
        inner = r - 1
        outer = tuple(k for k in range(r - 1) if k != unit_dim)
        # Fold the other dims into the axis with the larger extent: its own dim is more
        # likely a multiple of the tile, so fewer tiles straddle two outer coordinates.
        if at.sizes[unit_dim] >= at.sizes[inner]:
            axes = (outer + (unit_dim,), (inner,))
        else:
            axes = ((unit_dim,), outer + (inner,))
        names: tuple[str, ...] = ("TILE_A", "TILE_B")
    elif strategy == "linear" and r >= 2:
        axes = (tuple(range(r - 1)), (r - 1,))
        names = ("BLOCK_R", "BLOCK_C")
    else:
        axes = (tuple(range(r)),)
        names = ("BLOCK",)

    at_extents = tuple(math.prod(at.sizes[k] for k in ax) for ax in axes)
    extents = tuple(math.prod(canon.sizes[k] for k in ax) for ax in axes)
    if len(axes) == 1:
        if on_cpu:
            cap = cpu_area
        elif strategy == "gather" and r >= 2:
            cap = _GATHER_BLOCK
        else:
            lo, hi = _LINEAR_BLOCK_RANGE
            cap = min(max(_LINEAR_BYTES // itemsize, lo), hi)
        blocks: tuple[int, ...] = (min(_next_pow2(at_extents[0]), cap),)
    elif on_cpu:
        blocks = _tile_2d(at_extents[0], at_extents[1], 1, cpu_area, cpu_area)
    elif strategy == "linear":
        lo, hi = _LINEAR_BLOCK_RANGE
        block = min(max(_LINEAR_BYTES // itemsize, lo), hi)
        t1 = _trim_waste(at_extents[1], min(_next_pow2(at_extents[1]), block))
        blocks = (min(_next_pow2(at_extents[0]), max(1, block // t1)), t1)
    else:
        base0, base1 = _TRANSPOSE_TILES[min(itemsize, 8)]
        blocks = _tile_2d(at_extents[0], at_extents[1], base0, base1, base0 * base1)

    num_warps = 1 if on_cpu else (4 if math.prod(blocks) <= 2048 else 8)
    if tuning is not None:
        blocks, num_warps = _tuned(tuning, names, blocks, num_warps)
    index_bits = _index_bits(at, at_extents, blocks, fill_only)
    per_axis = tuple(ceil_div(n, b) for n, b in zip(extents, blocks, strict=True))
    return CopyPlan(
        spec=canon,
        strategy=strategy,
        axes=axes,
        extents=extents,
        blocks=blocks,
        block_names=names,
        grid=(math.prod(per_axis),),
        index_bits=index_bits,
        num_warps=num_warps,
        fill_only=fill_only,
        numel=numel,
        at=at,
        hint=hint,
        target=target,
    )


def _index_bits(at: CopySpec, extents: tuple[int, ...], blocks: tuple[int, ...],
                fill_only: bool) -> int:
    """`index_bits_for` a static canonical copy planned over `extents` in `blocks`."""
    per_axis = tuple(_cdiv(n, b) for n, b in zip(extents, blocks, strict=True))
    programs = math.prod(per_axis)
    padded = max(p * b for p, b in zip(per_axis, blocks, strict=True))
    return index_bits_for(at, max(padded, programs), fill_only)


def _holds_symbolically(canon: CopySpec, strategy: str, unit: int | None,
                        fill_only: bool) -> bool:
    """Whether the unit strides `strategy` relies on are 1 for every binding (identities
    of the polynomials, not only at the hint)."""
    if strategy == "gather" or canon.rank == 0:
        return True
    if canon.dst_strides[-1] != 1:
        return False
    if strategy == "linear":
        return fill_only or canon.src_strides[-1] == 1
    return unit is not None and canon.src_strides[unit] == 1


def _tuned(
    tuning: Tuning, names: tuple[str, ...], blocks: tuple[int, ...], num_warps: int
) -> tuple[tuple[int, ...], int]:
    """(blocks, num_warps) with `tuning`'s overrides, each checked."""
    if tuning.blocks is not None:
        given = tuple(tuning.blocks)
        if len(given) != len(names) or any(b < 1 or b & (b - 1) for b in given):
            raise UnsupportedError(
                f"copy: tuning blocks must be {len(names)} power(s) of two ({', '.join(names)}); "
                f"got {given}"
            )
        blocks = given
    if tuning.num_warps is not None:
        w = tuning.num_warps
        if w < 1 or w > 32 or w & (w - 1):
            raise UnsupportedError(f"copy: tuning num_warps must be 1, 2, 4, … 32; got {w}")
        num_warps = w
    return blocks, num_warps


# --------------------------------------------------------------------------- emission


def _fill_expr(fill: float | int | bool, dst: DType, shape: str) -> str:
    """`tl.full` of `fill` cast to `dst` as torch does, written as its bit pattern."""
    bits = bit_pattern(fill, dst)
    if bits == 0:
        return f"tl.full({shape}, 0, {dst.triton})"
    if dst.name == "bool":
        return f"tl.full({shape}, 1, tl.int1)"
    int_ty = f"tl.int{dst.itemsize * 8}"
    if int_ty == dst.triton:
        return f"tl.full({shape}, {bits}, {dst.triton})"
    return f"tl.full({shape}, {bits}, {int_ty}).to({dst.triton}, bitcast=True)"


def _cast_lines(src: DType, dst: DType, target: str = "cpu") -> list[str]:
    """Lines turning the loaded `x` (of `src`) into `y` (of `dst`) as torch's `.to()` does
    on the device the kernel runs on: on "cuda", torch's CUDA conversions
    (`_cuda_cast_lines`); on "cpu" (the interpreter), torch's CPU ones (`_cpu_cast_lines`)."""
    return _cuda_cast_lines(src, dst) if target == "cuda" else _cpu_cast_lines(src, dst)


def _cuda_cast_lines(src: DType, dst: DType) -> list[str]:
    """Lines turning `x` (of `src`) into `y` (of `dst`) bit for bit as torch's CUDA
    `.to()` (c10's `static_cast` in device code; docs/semantics.md#casts states them).

    Floats convert through float32 where c10 does (float16 / bfloat16 widen to float32
    first, float64 narrows to float16 / bfloat16 through float32: two roundings), by the
    GPU's own conversion instructions, as torch's kernels: finite values round to nearest
    even, subnormals kept, and a NaN gets the instruction's NaN (torch's bits on the same
    GPU). Values whose conversion the interpreter would get wrong are computed on the bits
    instead (bfloat16 widened and narrowed), NaNs still by the instruction, so a test can
    run this code through Triton's interpreter. Floats go to integers as `cvt.rzi`
    does: truncated, NaN -> 0, out of range -> the nearest limit; int8 / int16 take the
    low bits of that int32 and uint8 of that int64 (c10 converts uint8 through int64);
    uint32 saturates to [0, 2^32 - 1]. Out-of-range values are never converted (LLVM's
    conversion of them is poison): they are selected.
    """
    s, d = src.name, dst.name
    if s == d:
        return ["y = x"]
    lines: list[str] = []
    if s == "bfloat16":
        # Widen on the bits (exact; the interpreter would flush subnormals); a NaN by the
        # conversion instruction, as torch's `__bfloat162float`.
        lines += [
            "f = (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)",
            "x = tl.where(x != x, x.to(tl.float32), f)",
        ]
        s = "float32"
    if d == "bool":
        return lines + ["y = x != 0"]
    if s == "float16" or (s == "float64" and d in ("float16", "bfloat16")):
        lines.append("x = x.to(tl.float32)")  # exact from float16; c10's rounding from float64
        s = "float32"
    if s == d:
        return lines + ["y = x"]
    if src.is_floating and not dst.is_floating:
        if d == "uint32":
            return lines + [
                "u = (x != x) | (x < 0.0) | (x >= 4294967296.0)",
                "y = tl.where(u, 0, x).to(tl.uint32)",
                "y = tl.where(x >= 4294967296.0, 4294967295, y).to(tl.uint32)",
            ]
        bits = 64 if d in ("int64", "uint8") else 32
        lines += _saturate("x", bits)
        return lines + ([] if d == f"int{bits}" else [f"y = y.to({dst.triton})"])
    if d == "bfloat16":
        # Round to nearest even on the float32 bits (the interpreter would truncate); a NaN
        # by the conversion instruction, as torch's `__float2bfloat16`.
        return lines + [
            "f = x.to(tl.float32)",
            "u = f.to(tl.uint32, bitcast=True)",
            "u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).to(tl.uint16)",
            "y = tl.where(f != f, f.to(tl.bfloat16), u.to(tl.bfloat16, bitcast=True))",
        ]
    return lines + [f"y = x.to({dst.triton})"]


def _saturate(name: str, bits: int) -> list[str]:
    """`y` = float `name` truncated to int<bits> as CUDA's `cvt.rzi` does: NaN -> 0, out of
    range -> the nearest limit (never converted: LLVM's conversion of them is poison)."""
    limit = float(2 ** (bits - 1))
    return [
        f"u = ({name} != {name}) | ({name} >= {limit!r}) | ({name} < {-limit!r})",
        f"y = tl.where(u, 0, {name}).to(tl.int{bits})",
        f"y = tl.where({name} >= {limit!r}, {2 ** (bits - 1) - 1}, "
        f"tl.where({name} < {-limit!r}, {-(2 ** (bits - 1))}, y)).to(tl.int{bits})",
    ]


def _cpu_cast_lines(src: DType, dst: DType) -> list[str]:
    """Lines turning the loaded `x` (of `src`) into `y` (of `dst`), bit for bit as torch's
    CPU `.to()` of a contiguous tensor (`runtime/backends/reference_casts.py` states them).

    Every NaN is rebuilt from its bits, so neither Triton's interpreter (numpy keeps a
    signalling NaN's payload as is) nor a GPU's conversion instructions choose them:
    float16/float32/float64 NaNs are quieted keeping the payload's top bits, as x86's
    conversion instructions do; a bfloat16 result is rounded to nearest even on the bits
    and its NaN is `0xFFFF` from float32/float64 and `0x7FC0` from float16. Floats go to
    int64 and int32 as x86's truncation does (NaN and out-of-range give the minimum), to
    int16 and int8 through int32 and to uint8 through int64, wrapping; uint32 as below.
    """
    s, d = src.name, dst.name
    if s == d:
        return ["y = x"]
    lines: list[str] = []
    if s == "bfloat16":
        # Widen on the bits: exact, a signalling NaN kept (the interpreter would flush
        # subnormals).
        lines.append(
            "x = (x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)"
        )
        s = "float32"
    elif s == "float16" and d in ("float32", "float64"):
        lines += [
            "f = x.to(tl.float32)",
            "u = x.to(tl.uint16, bitcast=True).to(tl.uint32)",
            "u = ((u & 0x8000) << 16) | 0x7FC00000 | ((u & 0x3FF) << 13)",
            "x = tl.where(x != x, u.to(tl.float32, bitcast=True), f)",
        ]
        s = "float32"
    elif s == "float64" and d in ("float32", "float16", "bfloat16"):
        # torch narrows double to half and bfloat16 through float: two roundings.
        lines += [
            "f = x.to(tl.float32)",
            "u = x.to(tl.uint64, bitcast=True)",
            "u = (((u >> 32) & 0x80000000) | 0x7FC00000 | ((u >> 29) & 0x7FFFFF)).to(tl.uint32)",
            "x = tl.where(x != x, u.to(tl.float32, bitcast=True), f)",
        ]
        s = "float32"
    if s == d:
        return lines + ["y = x"]
    if d == "bool":
        return lines + ["y = x != 0"]
    if s == "float32" and d == "float64":
        return lines + [
            "f = x.to(tl.float64)",
            "u = x.to(tl.uint32, bitcast=True).to(tl.uint64)",
            "u = ((u & 0x80000000) << 32) | 0x7FF8000000000000 | ((u & 0x7FFFFF) << 29)",
            "y = tl.where(x != x, u.to(tl.float64, bitcast=True), f)",
        ]
    if s == "float32" and d == "float16":
        return lines + [
            "f = x.to(tl.float16)",
            "u = x.to(tl.uint32, bitcast=True)",
            "u = (((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x3FF)).to(tl.uint16)",
            "y = tl.where(x != x, u.to(tl.float16, bitcast=True), f)",
        ]
    if d == "bfloat16":
        # Round to nearest even through float32 (c10::round_to_nearest_even); Triton's
        # interpreter would truncate.
        nan = "0x7FC0" if src.name == "float16" else "0xFFFF"
        return lines + [
            "f = x.to(tl.float32)",
            "u = f.to(tl.uint32, bitcast=True)",
            f"u = tl.where(f != f, {nan}, (u + 0x7FFF + ((u >> 16) & 1)) >> 16)",
            "y = u.to(tl.uint16).to(tl.bfloat16, bitcast=True)",
        ]
    if src.is_floating and not dst.is_floating:
        if s == "float16":  # exact; the bounds below would round to inf in float16
            lines.append("x = x.to(tl.float32)")
        if d == "uint32" and src.name != "float16":
            # x >= 2^31 ? int32(x - 2^31) + 2^31 : int32(x), modulo 2^32.
            return lines + [
                "f = tl.where(x >= 2147483648.0, x - 2147483648.0, x)",
                *_truncate("f", 32),
                "y = (y ^ tl.where(x >= 2147483648.0, -2147483648, 0)).to(tl.uint32, bitcast=True)",
            ]
        bits = 64 if d in ("int64", "uint32", "uint8") else 32
        lines += _truncate("x", bits)
        return lines + ([] if d == f"int{bits}" else [f"y = y.to({dst.triton})"])
    return lines + [f"y = x.to({dst.triton})"]


def _truncate(name: str, bits: int) -> list[str]:
    """`y` = float `name` truncated to int<bits>, the minimum for NaN and out of range
    (which are never converted: LLVM's conversion of them is poison)."""
    limit = float(2 ** (bits - 1))
    return [
        f"u = ({name} != {name}) | ({name} >= {limit!r}) | ({name} < {-limit!r})",
        f"y = tl.where(u, {-(2 ** (bits - 1))}, tl.where(u, 0, {name}).to(tl.int{bits}))",
    ]


def _affine(terms: dict[int, int | str], const: int | str) -> str:
    """`const + Σ c·i<k>` as source text (terms in dim order, zero coefficients skipped):
    each coefficient and the constant is 0, 1 (written in) or a parameter's name."""
    parts = [str(const)] if const != 0 else []
    for k in sorted(terms):
        c = terms[k]
        if c == 0:
            continue
        parts.append(f"i{k}" if c == 1 else f"i{k} * {c}")
    return " + ".join(parts)


def _is_name(text: str) -> bool:
    return text.isidentifier()


def _ragged(extent: int | Sym, block: int) -> bool:
    """Whether the last block of an axis may run past its extent: for a symbolic extent,
    unless it is a multiple of the block for every value."""
    rest = extent % block
    return not (isinstance(rest, int) and rest == 0)


def _nonzero(c: int | Sym) -> bool:
    """Whether a coefficient is not the constant 0 (a symbolic one never is)."""
    return isinstance(c, Sym) or c != 0


class KernelParams:
    """The runtime scalar arguments of a kernel, named as its source names them.

    `value(name, v)` gives what the source writes for the integer `v`: 0 and 1 are written
    in (a unit stride is what makes an access contiguous, a zero stride a broadcast); any
    other value becomes the parameter `name`, passed at launch (`names[i]` takes
    `values[i]`). A parameter whose value is a multiple of 2^k (k <= 4, the largest,
    `divisibility_bits`) is re-derived in the body as `(name >> k) << k`, the same number
    where the class holds, which Triton's alignment analysis reads as divisible by 2^k,
    so vector widths stay what constants gave (rows of 9000 halves are 16-byte aligned;
    a `tl.multiple_of` on a scalar argument would be lost: it lands on a block argument).
    Which values are 0, 1 and which power of two up to 16 divides the others is the
    kernel's class; the values themselves are not in the source."""

    __slots__ = ("names", "values", "hints", "classes")

    def __init__(self, classes: Mapping[str, int] | None = None) -> None:
        self.names: list[str] = []
        self.values: list[int] = []  # symbolic sizes (`Sym`) in a symbolic kernel
        self.hints: list[str] = []
        # A symbolic kernel: the binding it is planned for, whose class (each symbol a
        # multiple of 16 or not) decides what a symbolic value is known to be divisible by.
        self.classes = classes

    def value(self, name: str, v: int, specialize: bool = True) -> int | str:
        """What the source writes for `v` (`specialize=False`: a parameter, not marked,
        even for 0 or 1: a count of programs, which no access width depends on)."""
        symbolic = isinstance(v, Sym)
        if specialize and not symbolic and v in (0, 1):
            return v
        if name in self.names:
            return name
        self.names.append(name)
        self.values.append(v if symbolic else int(v))
        if not specialize:
            shift = 0
        elif symbolic:
            shift = symbolic_divisibility_bits(v, self.classes or {})
        else:
            shift = divisibility_bits(v)
        if shift:
            self.hints.append(
                f"{name} = ({name} >> {shift}) << {shift}  # a multiple of {1 << shift}"
            )
        return name


def symbolic_divisibility_bits(v: Sym, hint: Mapping[str, int]) -> int:
    """`divisibility_bits` that hold for every binding of `hint`'s class: each symbol that
    is a multiple of 16 at `hint` is written 16·s', and 2^k divides `v` for every value
    where `(v // 2^k)·2^k == v` is an identity of the polynomials."""
    names = {
        n: 16 * symbol(f"{n}_16") if hint.get(n, 1) % 16 == 0 else symbol(n)
        for n in v.free_symbols
    }
    w = evaluate(v, names)
    for k in (4, 3, 2, 1):
        if floor_div(w, 1 << k) * (1 << k) == w:
            return k
    return 0


def divisibility_bits(v: int) -> int:
    """k such that 2^k is the largest power of two up to 16 dividing `v` (0 divides by all:
    4). What vector widths need: 16 bytes are 16 int8, 8 halves, 4 floats, 2 doubles."""
    k = 0
    while k < 4 and v % (2 << k) == 0:
        k += 1
    return k


class _Emitter:
    def __init__(self, plan: CopyPlan, params: KernelParams) -> None:
        self.plan = plan
        self.params = params
        self.lines: list[str] = []
        self.two_d = len(plan.axes) == 2
        self.zeros_needed: set[int] = set()
        self.idx_ty = "tl.int64" if plan.index_bits == 64 else "tl.int32"
        names = plan.block_names
        self.shape = f"[{names[0]}, {names[1]}]" if self.two_d else f"[{names[0]}]"

    def emit(self, line: str) -> None:
        self.lines.append(f"    {line}")

    def p(self, name: str, v: int) -> int | str:
        return self.params.value(name, v)

    def zero(self, axis: int) -> str:
        """A zero vector along `axis`, for an expression that does not depend on it."""
        if axis not in self.zeros_needed:
            self.zeros_needed.add(axis)
            self.emit(f"zero_{axis} = tl.full([{self.plan.block_names[axis]}], 0, {self.idx_ty})")
        return f"zero_{axis}"

    def axis_part(self, a: int, coeffs: tuple[int, ...], names: list[str], const: int | str) -> str:
        """Σ coeffs[k]·i<k> over the dims of tile axis `a`, plus `const`, as source text
        (`names[k]`: the parameter of coefficient k).

        When the coefficients are c times the row-major strides of those dims, the sum is
        c·x<a> (x = Σ i_k·rowmajor_k exactly, also past the extent, where i_0 is not
        reduced): written so, Triton sees that consecutive lanes are c apart — contiguous
        for c = 1, so loads and stores become 16-byte vectors.
        """
        ax = self.plan.axes[a]
        index = ["x0", "x1"][a] if self.two_d else "offs"
        c = coeffs[ax[-1]] if ax else 0
        row_major, step = [], c
        for k in reversed(ax):
            row_major.append(step)
            step *= self.plan.spec.sizes[k]
        if len(ax) > 1 and _nonzero(c) and [coeffs[k] for k in reversed(ax)] == row_major:
            cp = self.p(names[ax[-1]], c)
            body = index if cp == 1 else f"{index} * {cp}"
            return f"{body} + {const}" if const != 0 else body
        return _affine({k: self.p(names[k], coeffs[k]) for k in ax}, const)

    def full(self, name: str, coeffs: tuple[int, ...], names: list[str], const: int | str) -> str:
        """Emit `name` = const + Σ coeffs[k]·i<k> over the whole block; return its name."""
        if not self.two_d:
            body = self.axis_part(0, coeffs, names, const)
            if not any(map(_nonzero, coeffs)):
                body = f"{self.zero(0)} + {const}" if const != 0 else self.zero(0)
            self.emit(f"{name} = {body}")
            return name
        parts = []
        for a, ax in enumerate(self.plan.axes):
            part = self.axis_part(a, coeffs, names, const if a == 0 else 0)
            if not any(_nonzero(coeffs[k]) for k in ax):
                base = self.zero(a)
                part = f"{base} + {const}" if (a == 0 and const != 0) else base
            parts.append(part if _is_name(part) else f"({part})")
        self.emit(f"{name} = {parts[0]}[:, None] + {parts[1]}[None, :]")
        return name


# Every variable a copy body binds (`emit_copy_body`), besides the pointers and the block
# constexprs: a batch kernel (codegen/batch.py) gives each member its own copy of them.
BODY_LOCALS = re.compile(
    r"(?<![\w.])(pid|offs|x0|x1|x|y|f|u|inb|valid|dst_idx|src_idx|(?:i|q|in|m|zero_)\d+)(?!\w)"
)


def emit_copy_body(
    plan: CopyPlan, program: str = "tl.program_id(0)", base: int | str = 0,
    params: KernelParams | None = None,
) -> list[str]:
    """The statements of `plan`'s kernel, indented one level, reading `src_ptr`, writing
    `dst_ptr`, sized by the block constexprs `plan.block_names` and by the runtime scalars
    it adds to `params` (`KernelParams`: sizes `n<k>`, strides `ss<k>` / `ds<k>`, offsets
    `src_off` / `dst_off`, tile extents `ext<a>`, column blocks `cols`, mask coefficients
    `mc<j>_<k>` and bounds `mlo<j>` / `mhi<j>`). Its program index is `program - base`:
    a batch kernel runs a member's programs 0, 1, … as its own programs base, base + 1, …
    (a single copy: `tl.program_id(0)`, base 0)."""
    spec = plan.spec
    params = KernelParams(plan.hint) if params is None else params
    e = _Emitter(plan, params)
    names = plan.block_names
    wide = plan.index_bits == 64
    r = spec.rank
    sizes = [f"n{k}" for k in range(r)]
    src_names = [f"ss{k}" for k in range(r)]
    dst_names = [f"ds{k}" for k in range(r)]

    # Program id -> block index per axis (row blocks outer, column blocks inner).
    pid = f"{program} - {base}" if base != 0 else program
    if wide:
        e.emit(f"pid = ({pid}).to(tl.int64)" if base != 0 else f"pid = {pid}.to(tl.int64)")
    else:
        e.emit(f"pid = {pid}")
    arange = "tl.arange(0, {b}).to(tl.int64)" if wide else "tl.arange(0, {b})"
    if e.two_d:
        col_blocks = ceil_div(plan.extents[1], plan.blocks[1])
        if isinstance(col_blocks, int) and col_blocks == 1:
            e.emit(f"x0 = pid * {names[0]} + {arange.format(b=names[0])}")
            e.emit(f"x1 = {arange.format(b=names[1])}")
        else:
            cols = e.p("cols", col_blocks)
            e.emit(f"x0 = (pid // {cols}) * {names[0]} + {arange.format(b=names[0])}")
            e.emit(f"x1 = (pid % {cols}) * {names[1]} + {arange.format(b=names[1])}")
    else:
        e.emit(f"offs = pid * {names[0]} + {arange.format(b=names[0])}")

    # Coordinates: each axis index decomposed over its dims, innermost first.
    index = ["x0", "x1"] if e.two_d else ["offs"]
    for a, ax in enumerate(plan.axes):
        if not ax:
            continue
        q = index[a]
        for j in range(len(ax) - 1, 0, -1):
            n = e.p(sizes[ax[j]], spec.sizes[ax[j]])
            e.emit(f"i{ax[j]} = {q} % {n}")
            e.emit(f"q{a} = {q} // {n}")
            q = f"q{a}"
        e.emit(f"i{ax[0]} = {q}")

    # In-bounds lanes (the last block of an axis may run past its extent).
    tails = [a for a in range(len(plan.axes)) if _ragged(plan.extents[a], plan.blocks[a])]
    inb = None
    if tails:
        for a in tails:
            ext = plan.axes[a][0] if len(plan.axes[a]) == 1 else None
            bound = e.p(sizes[ext] if ext is not None else f"ext{a}", plan.extents[a])
            e.emit(f"in{a} = {index[a]} < {bound}")
        if not e.two_d:
            inb = "in0"
        else:
            left = "in0[:, None]" if 0 in tails else None
            right = "in1[None, :]" if 1 in tails else None
            if left and right:
                e.emit(f"inb = {left} & {right}")
            else:
                e.emit(f"inb = tl.broadcast_to({left or right}, {e.shape})")
            inb = "inb"

    dst_idx = e.full("dst_idx", spec.dst_strides, dst_names, e.p("dst_off", spec.dst_offset))
    # fill None: masked elements are neither read nor written.
    fill = None if spec.fill is None else _fill_expr(spec.fill, spec.dst_dtype, e.shape)
    store_mask = inb
    if plan.fill_only:
        e.emit(f"y = {fill}")
    else:
        src_idx = e.full("src_idx", spec.src_strides, src_names,
                         e.p("src_off", spec.src_offset))
        conds = []
        for j, m in enumerate(spec.masks):
            if plan.symbolic:  # which bound always holds depends on the values: test both
                need_lo = need_hi = True
            else:
                low, high = linear_span(spec.sizes, m.coeffs)
                need_lo, need_hi = low < m.lo, high >= m.hi
            msum = e.full(f"m{j}", m.coeffs, [f"mc{j}_{k}" for k in range(r)], 0)
            if need_lo:
                conds.append(f"({msum} >= {e.p(f'mlo{j}', m.lo)})")
            if need_hi:
                conds.append(f"({msum} < {e.p(f'mhi{j}', m.hi)})")
        valid = None
        if conds:
            e.emit(f"valid = {' & '.join(conds)}")
            valid = "valid"
        load_mask = " & ".join(x for x in (inb, valid) if x)
        if load_mask:
            e.emit(f"x = tl.load(src_ptr + {src_idx}, mask={load_mask}, other=0)")
        else:
            e.emit(f"x = tl.load(src_ptr + {src_idx})")
        if spec.src_dtype.name == "uint32":
            # The runtime may hand unsigned words over as their int32 bit patterns.
            e.emit("x = x.to(tl.uint32, bitcast=True)")
        for line in _cast_lines(spec.src_dtype, spec.dst_dtype, plan.target):
            e.emit(line)
        if valid and fill is None:
            store_mask = load_mask
        elif valid:
            e.emit(f"y = tl.where(valid, y, {fill})")
    if store_mask:
        e.emit(f"tl.store(dst_ptr + {dst_idx}, y, mask={store_mask})")
    else:
        e.emit(f"tl.store(dst_ptr + {dst_idx}, y)")
    return e.lines


def emit_hints(params: KernelParams) -> list[str]:
    """The body's first lines: each multiple-of-16 parameter re-derived (`KernelParams`)."""
    return [f"    {h}" for h in params.hints]


def describe_plan(plan: CopyPlan) -> list[str]:
    """Comment lines naming `plan`'s class: strategy, index width, canonical rank, masks
    and tile axes (no sizes, strides or offsets: those are runtime arguments)."""
    spec = plan.spec
    header = [
        f"# stridec copy kernel: strategy={plan.strategy}, index_bits={plan.index_bits}",
        f"# canonical rank {spec.rank} (dims outer -> inner), {spec.src_dtype} -> {spec.dst_dtype}",
        "#   sizes n<k>, strides ss<k> (src) and ds<k> (dst), offsets src_off and dst_off:",
        "#   runtime arguments, except the 0s and 1s, which are written in",
    ]
    for j in range(len(spec.masks)):
        otherwise = "no write" if spec.fill is None else f"fill {spec.fill!r}"
        header.append(f"#   mask {j}: mlo{j} <= mc{j}_<k> . i < mhi{j}, else {otherwise}")
    header.append(f"# tile axes {plan.axes} ({', '.join(plan.block_names)})")
    return header


def _numbers(values: tuple) -> str:
    """A tuple of ints and symbolic sizes as `(N, 30, 8)`."""
    text = ", ".join(str(v) for v in values)
    return f"({text},)" if len(values) == 1 else f"({text})"


def describe_values(plan: CopyPlan) -> list[str]:
    """Lines giving `plan`'s values: canonical sizes, strides, offsets, masks and tiles
    (what `describe_plan` leaves to the runtime arguments)."""
    spec = plan.spec
    f = str
    lines = [
        f"dims (outer -> inner): sizes {_numbers(spec.sizes)}",
        f"  src strides {_numbers(spec.src_strides)} offset {f(spec.src_offset)} "
        f"({spec.src_dtype})",
        f"  dst strides {_numbers(spec.dst_strides)} offset {f(spec.dst_offset)} "
        f"({spec.dst_dtype})",
    ]
    for m in spec.masks:
        otherwise = "no write" if spec.fill is None else f"fill {spec.fill!r}"
        lines.append(f"  mask {f(m.lo)} <= {_numbers(m.coeffs)} . i < {f(m.hi)}, else {otherwise}")
    lines.append(f"tile axes {plan.axes} extents {_numbers(plan.extents)} blocks {plan.blocks}")
    return lines


def kernel_module(header: list[str], name: str, params: list[str], body: list[str]) -> str:
    """A module of one `@triton.jit` kernel: comment `header`, `def name(params)`, `body`."""
    text = [
        *header,
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def {name}({', '.join(params)}):",
        *body,
        "",
    ]
    return "\n".join(text)


def emit_copy_source(plan: CopyPlan, name: str) -> tuple[str, KernelParams]:
    """The module text for `plan`, with kernel function `name`, and its runtime scalars:
    parameters `(src_ptr, dst_ptr, *params.names, *block constexprs)`."""
    params = KernelParams(plan.hint)
    body = emit_copy_body(plan, params=params)
    if plan.grid == (0,):
        body, params = ["    pass  # nothing to copy"], KernelParams()
    body = emit_hints(params) + body
    names = ["src_ptr", "dst_ptr", *params.names]
    names += [f"{n}: tl.constexpr" for n in plan.block_names]
    return kernel_module(describe_plan(plan), name, names, body), params


# --------------------------------------------------------------------------- the kernel


@dataclass(frozen=True, slots=True)
class GeneratedKernel:
    """What every generated copy kernel records: its name and Triton module `source`, the
    `strategy` it uses, its `grid` and launch arguments (`constexprs`, `num_warps`), the
    elements it covers (`numel`), its index width and the target it was generated for;
    `params` names its runtime scalar parameters (after the pointers, before the
    constexprs) and `args` gives their values for this copy (`KernelParams`)."""

    name: str
    strategy: str
    source: str
    grid: tuple[int, ...]
    constexprs: dict[str, int] = field(hash=False)
    numel: int
    index_bits: int
    num_warps: int
    target: str
    params: tuple[str, ...]
    args: tuple[int, ...]
    detail: str  # the values the source leaves to `args` (`describe_values`), for people
    lang: ClassVar[str] = "triton"  # what its source is written in (`KernelInfo.lang`)

    @property
    def arguments(self) -> dict[str, int]:
        """Each runtime scalar parameter's value, by name."""
        return dict(zip(self.params, self.args, strict=True))


@dataclass(frozen=True, slots=True)
class CopyKernel(GeneratedKernel):
    """A generated copy kernel: source, grid and launch arguments (an entry of `plan.kernels`,
    docs/design.md#execution-and-backends).

    `stridec.runtime.launch.launch_copy(kernel, src_storage, dst_storage)` runs it on flat
    contiguous storages that start at storage element 0; a kernel of `numel == 0` (or grid
    `(0,)`, when every element is masked and `fill` is None) launches nothing.
    """

    spec: CopySpec
    # Addresses the kernel may touch, (lowest, highest); None when nothing is touched or,
    # for the source, when masks decide which addresses are read.
    src_span: tuple[int, int] | None
    dst_span: tuple[int, int] | None
    kind: str = "copy"
    # A symbolic kernel (`args`, `grid` and `numel` in symbols): its plan, which `bound`
    # evaluates for one binding of the class it serves (`valid_for`).
    plan: CopyPlan | None = field(default=None, hash=False, compare=False)
    # A symbolic int32 kernel: what must stay within int32 for a binding (`index_limits`).
    limits: tuple[tuple[int | Sym, ...], ...] = ()

    @property
    def symbolic(self) -> bool:
        return self.plan is not None and self.plan.symbolic

    def valid_for(self, bindings: Mapping[str, int]) -> bool:
        """Whether this kernel runs the copy for `bindings` (`plan_valid_for`)."""
        return self.plan is None or plan_valid_for(self.plan, bindings)

    def bound(self, bindings: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[int, ...],
                                                          tuple[tuple[int, int] | None, ...]]:
        """(grid, args, (src_span, dst_span)) for `bindings`, which `valid_for` accepts."""
        assert self.plan is not None
        return (evaluate(self.grid, bindings), evaluate(self.args, bindings),
                plan_spans(self.plan, bindings))


def plan_valid_for(plan: CopyPlan, bindings: Mapping[str, int]) -> bool:
    """Whether the kernel of `plan` runs the copy for `bindings`: each symbol in the class
    it was planned for (0, 1, a multiple of 16 or none, as the hint), and every index
    within the width chosen for the hint. A static plan runs its one copy."""
    if plan.hint is None:
        return True
    if not plan.hint.keys() <= bindings.keys():
        return False
    if binding_class({k: bindings[k] for k in plan.hint}) != binding_class(plan.hint):
        return False
    at = bind_copy(plan.spec, bindings)
    extents = tuple(evaluate(n, bindings) for n in plan.extents)
    return _index_bits(at, extents, plan.blocks, plan.fill_only) <= plan.index_bits


def index_limits(plan: CopyPlan) -> tuple[tuple[int | Sym, ...], ...]:
    """What keeps a symbolic int32 plan valid: for each group of terms, the sum of their
    absolute values must stay within 2^31 - 1 (`index_bits_for`, term by term: padded
    tile indices and the program count, each address's offset and partial sums, each
    mask's sum and bounds). Empty for a static or an int64 plan."""
    if not plan.symbolic or plan.index_bits == 64:
        return ()
    spec = plan.spec
    per_axis = [ceil_div(n, b) for n, b in zip(plan.extents, plan.blocks, strict=True)]
    limits: list[tuple[int | Sym, ...]] = [(p * b,) for p, b in zip(per_axis, plan.blocks,
                                                                     strict=True)]
    limits.append((math.prod(per_axis),))
    sides = [(spec.dst_strides, spec.dst_offset)]
    if not plan.fill_only:
        sides.append((spec.src_strides, spec.src_offset))
    for strides, offset in sides:
        limits.append((offset, *((n - 1) * st for n, st in zip(spec.sizes, strides,
                                                               strict=True))))
    for m in spec.masks:
        limits.append(tuple((n - 1) * c for n, c in zip(spec.sizes, m.coeffs, strict=True)))
        limits += [(m.lo,), (m.hi,)]
    return tuple(limits)


def plan_spans(
    plan: CopyPlan, bindings: Mapping[str, int]
) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """`touched_spans` of a symbolic plan's copy for `bindings`."""
    at = dataclasses.replace(plan, spec=bind_copy(plan.spec, bindings),
                             numel=evaluate(plan.numel, bindings))
    return touched_spans(at)


def touched_spans(plan: CopyPlan) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(source, destination) addresses `plan`'s kernel may touch, each (lowest, highest);
    None when nothing is touched or, for the source, when masks decide what is read."""
    src_span = dst_span = None
    if plan.numel:
        canon = plan.spec
        if not canon.masks or canon.fill is not None:
            dst_span = address_span(canon.sizes, canon.dst_strides, canon.dst_offset)
        if not canon.masks:
            src_span = address_span(canon.sizes, canon.src_strides, canon.src_offset)
    return src_span, dst_span


def generate_copy(
    spec: CopySpec, target: str = "cuda", tuning: Tuning | None = None,
    hint: Mapping[str, int] | None = None,
) -> CopyKernel:
    """Generate the Triton kernel for `spec` on `target` ("cuda" or "cpu" = interpreter);
    for a copy over symbolic sizes, the kernel of the class of the binding `hint`
    (`plan_copy`), whose `args` and `grid` are symbolic (`CopyKernel.bound`)."""
    plan = plan_copy(spec, target, tuning, hint)
    placeholder = "stridec_copy_KERNEL"
    text, params = emit_copy_source(plan, placeholder)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    name = f"stridec_copy_{digest}"
    source = text.replace(placeholder, name)
    src_span, dst_span = (None, None) if plan.symbolic else touched_spans(plan)
    return CopyKernel(
        name=name,
        strategy=plan.strategy,
        source=source,
        grid=plan.grid,
        constexprs=plan.constexprs,
        numel=plan.numel,
        index_bits=plan.index_bits,
        num_warps=plan.num_warps,
        target=target,
        params=tuple(params.names),
        args=tuple(params.values),
        detail="\n".join(describe_values(plan)),
        spec=spec,
        src_span=src_span,
        dst_span=dst_span,
        plan=plan if plan.symbolic else None,
        limits=index_limits(plan),
    )
