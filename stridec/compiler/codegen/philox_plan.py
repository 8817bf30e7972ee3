"""The Philox plan, one for every target: what a `philox` kernel computes, validated and
coalesced, whatever language renders it (docs/philox.md).

`plan_philox(spec)` checks a `PhiloxSpec` (sizes, strides, masks, dtype and distribution;
bad fields raise `ShapeError` / `UnsupportedError` naming them) and merges the dims that
both affine maps and every mask walk together:

    logical index  i(c) = index_offset + Σ c_k · index_strides_k   (row-major in the philox sizes)
    destination    d(c) = dst_offset   + Σ c_k · dst_strides_k      (flat output storage)

`is_linear(plan)` is the one decision of the kernel's shape: counters in order, four
words stored side by side (`i == d == position`, no mask), or a gather of one word per
element. `plans` / `symbolic_plan` make the plan of a spec over symbolic sizes for the
class of a binding; `dst_elements` is the smallest destination storage a kernel of the
plan addresses. The Triton kernel (`codegen.philox`) and the C one (`codegen.c.philox`)
render this plan; neither decides any of it again.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stridec.errors import ShapeError, UnsupportedError, VerificationError
from stridec.ir.affine import MAX_RANK, MaskBound, address_span, checked_ints, merge_dims
from stridec.ir.dtypes import DTYPES, DType, as_dtype, bit_pattern, convert
from stridec.ir.symbols import Sym, evaluate, free_symbols, statically_true, substitute

__all__ = [
    "UNIFORM_BITS", "PhiloxPlan", "PhiloxSpec", "bind_philox", "dst_elements", "is_linear",
    "philox_symbols", "plan_philox", "plans", "symbolic_plan",
]

# Random bits a uniform of each dtype takes, as torch's `uniform_real` takes its type's
# digits: `k·2^-d` (`k < 2^d`) is exact in the type, so `[0, 1)` never rounds to 1.0.
UNIFORM_BITS = {"float32": 24, "float16": 11, "bfloat16": 8}

_BITS_DTYPES = ("uint32", "int32")
_UNIFORM_DTYPES = ("float32", "float16", "bfloat16")
FLOAT32 = DTYPES["float32"]


@dataclass(frozen=True)
class PhiloxSpec:
    """What one philox kernel computes; see the module docstring for the two maps.

    `numel` is the element count of the philox output itself (it sets `new_state`);
    the iteration space `sizes` may be larger (padding written with `fill`) or smaller.
    `masks` are objects with `.coeffs` (one int per dim), `.lo` and `.hi`.
    """

    sizes: tuple[int, ...]
    index_strides: tuple[int, ...]
    index_offset: int
    dst_strides: tuple[int, ...]
    dst_offset: int
    numel: int
    dst_dtype: DType
    distribution: str = "bits"
    low: float = 0.0
    high: float = 1.0
    masks: tuple = ()
    fill: float | int = 0
    # Where word k of the state lies, in elements from `state_ptr`: a row of a (k, 6)
    # tensor, a strided column or a flipped view reads its words through its layout.
    state_index: tuple[int, ...] = (0, 1, 2, 3, 4, 5)


@dataclass(frozen=True)
class PhiloxPlan:
    """The spec after validation and coalescing: what the emitter needs."""

    sizes: tuple[int, ...]
    index_strides: tuple[int, ...]
    index_offset: int
    dst_strides: tuple[int, ...]
    dst_offset: int
    masks: tuple[tuple[tuple[int, ...], int, int], ...]
    space_numel: int
    numel: int
    dtype: DType
    uniform: bool
    low32: float
    scale32: float
    fill_bits: int
    state_index: tuple[int, ...]


def _ints(values: Any, what: str) -> tuple[int, ...]:
    return checked_ints(values, what, "philox")


def _fill_bits(fill: float | int, dtype: DType) -> int:
    """`fill` converted to `dtype` as torch's `.to()` does (floats truncate toward zero for
    integer types, integers wrap), as the signed bit pattern of that width."""
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise VerificationError(f"philox: fill must be a number; got {fill!r}")
    return bit_pattern(fill, dtype)


def plan_philox(spec: PhiloxSpec) -> PhiloxPlan:
    sizes = _ints(spec.sizes, "sizes")
    if len(sizes) > MAX_RANK:
        raise UnsupportedError(f"philox: rank at most {MAX_RANK} is supported; got sizes {sizes}")
    if any(s < 0 for s in sizes):
        raise ShapeError(f"philox: sizes must be >= 0; got {sizes}")
    index_strides = _ints(spec.index_strides, "index_strides")
    dst_strides = _ints(spec.dst_strides, "dst_strides")
    for what, strides in (("index_strides", index_strides), ("dst_strides", dst_strides)):
        if len(strides) != len(sizes):
            raise ShapeError(
                f"philox: {what} {strides} must have one entry per dim of sizes {sizes}"
            )
    numel = int(spec.numel)
    if numel < 0:
        raise ShapeError(f"philox: numel must be >= 0; got {numel}")
    if numel >= 2**63 or math.prod(sizes) >= 2**63:
        raise UnsupportedError(
            f"philox: at most 2^63 - 1 elements are supported; got numel {numel}, sizes {sizes}"
        )
    index_offset = int(spec.index_offset)
    dst_offset = int(spec.dst_offset)
    state_index = _ints(spec.state_index, "state_index")
    if len(state_index) != 6 or min(state_index) < 0:
        raise ShapeError(f"philox: state_index must be 6 addresses >= 0; got {state_index}")

    masks = []
    for m in spec.masks:
        coeffs = _ints(m.coeffs, "mask coeffs")
        if len(coeffs) != len(sizes):
            raise ShapeError(f"philox: mask coeffs {coeffs} must have one entry per dim of {sizes}")
        masks.append((coeffs, int(m.lo), int(m.hi)))

    dtype = as_dtype(spec.dst_dtype, "philox dst_dtype")
    if spec.distribution == "bits":
        if dtype.name not in _BITS_DTYPES:
            raise UnsupportedError(f"philox: bits are uint32 or int32; got dst_dtype {dtype.name}")
    elif spec.distribution == "uniform":
        if dtype.name not in _UNIFORM_DTYPES:
            raise UnsupportedError(
                f"philox: uniforms are float32, float16 or bfloat16; got dst_dtype {dtype.name}"
            )
    else:
        raise UnsupportedError(
            f"philox: distribution must be 'bits' or 'uniform'; got {spec.distribution!r}"
        )
    # As reference_philox.uniform_scale: a float32 difference of float32 values (exact in
    # a double, then rounded once).
    low32 = convert(float(spec.low), FLOAT32)
    scale32 = convert(convert(float(spec.high), FLOAT32) - low32, FLOAT32)
    if spec.distribution == "uniform" and not (math.isfinite(low32) and math.isfinite(scale32)):
        raise UnsupportedError(
            f"philox: low={spec.low!r}, high={spec.high!r} give a non-finite float32 range"
        )

    space_numel = math.prod(sizes)
    if space_numel > 0:
        d_lo, _ = address_span(sizes, dst_strides, dst_offset)
        if d_lo < 0:
            raise ShapeError(
                f"philox: destination offsets go below 0 (sizes {sizes}, dst_strides "
                f"{dst_strides}, dst_offset {dst_offset})"
            )
        if not masks:
            i_lo, i_hi = address_span(sizes, index_strides, index_offset)
            if i_lo < 0 or i_hi >= numel:
                raise ShapeError(
                    f"philox: logical indices [{i_lo}, {i_hi}] leave the output's "
                    f"[0, {numel}) (sizes {sizes}, index_strides {index_strides}, "
                    f"index_offset {index_offset})"
                )

    forms = [index_strides, dst_strides] + [c for c, _, _ in masks]
    c_sizes, c_forms = merge_dims(sizes, forms) if space_numel > 0 else (sizes, forms)
    return PhiloxPlan(
        sizes=c_sizes,
        index_strides=c_forms[0],
        index_offset=index_offset,
        dst_strides=c_forms[1],
        dst_offset=dst_offset,
        masks=tuple((c, lo, hi) for c, (_, lo, hi) in zip(c_forms[2:], masks, strict=True)),
        space_numel=space_numel,
        numel=numel,
        dtype=dtype,
        uniform=spec.distribution == "uniform",
        low32=float(low32),
        scale32=float(scale32),
        fill_bits=_fill_bits(spec.fill, dtype) if masks else 0,
        state_index=state_index,
    )


def philox_symbols(spec: PhiloxSpec) -> frozenset[str]:
    """The symbols `spec`'s numbers are written in (none for a static spec)."""
    return free_symbols((
        spec.sizes, spec.index_strides, spec.index_offset, spec.dst_strides,
        spec.dst_offset, spec.numel, spec.state_index,
        tuple((m.coeffs, m.lo, m.hi) for m in spec.masks),
    ))


def bind_philox(spec: PhiloxSpec, bindings: Mapping[str, int]) -> PhiloxSpec:
    """`spec` with the symbols of `bindings` set (the others stay)."""
    def at(x: Any) -> Any:
        return substitute(x, bindings)

    return dataclasses.replace(
        spec, sizes=at(spec.sizes), index_strides=at(spec.index_strides),
        index_offset=at(spec.index_offset), dst_strides=at(spec.dst_strides),
        dst_offset=at(spec.dst_offset), numel=at(spec.numel),
        state_index=at(spec.state_index),
        masks=tuple(MaskBound(at(m.coeffs), at(m.lo), at(m.hi)) for m in spec.masks),
    )


def symbolic_plan(spec: PhiloxSpec, hint: Mapping[str, int]) -> tuple[PhiloxPlan, PhiloxPlan]:
    """(symbolic plan, static plan at `hint`) of a spec over symbolic sizes, valid for
    every binding of `hint`'s class: every check of `_plan` made at `hint` (the spec's
    numbers come from a layout valid for every value), dims merged only where the merge
    is an identity of the polynomials (`merge_dims` compares exactly), so the symbolic
    plan's dims are the same dims at every value; the plan at `hint` is the symbolic one
    evaluated there, for the choices made at one binding (block, index width)."""
    missing = philox_symbols(spec) - hint.keys()
    if missing:
        raise UnsupportedError(
            f"philox: sizes in {', '.join(sorted(missing))} need a binding of the class to "
            f"plan for (hint); got {dict(hint)}"
        )
    checked = plan_philox(bind_philox(spec, hint))  # every check, at the hint
    sizes = tuple(spec.sizes)
    if len(sizes) > MAX_RANK:
        raise UnsupportedError(f"philox: rank at most {MAX_RANK} is supported; got sizes {sizes}")
    for what, xs in (("sizes", sizes), ("numel", (spec.numel,))):
        if not all(statically_true(x >= 0) for x in xs if isinstance(x, Sym)):
            raise UnsupportedError(
                f"philox: {what} {xs} are not >= 0 for every value of their symbols"
            )
    forms = [tuple(spec.index_strides), tuple(spec.dst_strides)]
    forms += [tuple(m.coeffs) for m in spec.masks]
    if checked.space_numel > 0:
        sizes, forms = merge_dims(sizes, forms)
    plan = dataclasses.replace(
        checked,
        sizes=sizes,
        index_strides=forms[0],
        index_offset=spec.index_offset,
        dst_strides=forms[1],
        dst_offset=spec.dst_offset,
        masks=tuple((c, m.lo, m.hi) for c, m in zip(forms[2:], spec.masks, strict=True)),
        space_numel=math.prod(spec.sizes),
        numel=spec.numel,
        state_index=tuple(spec.state_index),
    )
    return plan, _evaluated(plan, hint)


def plans(spec: PhiloxSpec, hint: Mapping[str, int] | None) -> tuple[
    PhiloxPlan, PhiloxPlan, dict[str, int] | None
]:
    """(plan, plan at `hint`, the hint's values of the plan's symbols) of `spec`: for a
    static spec (or no hint) one plan twice and None; for a spec over symbolic sizes,
    `symbolic_plan` for the class of `hint`, the symbols that are 0 or 1 there set first."""
    symbols = philox_symbols(spec) if hint is not None else frozenset()
    if symbols:
        constants = {k: hint[k] for k in symbols if k in hint and hint[k] in (0, 1)}
        if constants:
            spec = bind_philox(spec, constants)
            symbols = philox_symbols(spec)
    if not symbols:
        plan = plan_philox(spec)
        return plan, plan, None
    plan, at = symbolic_plan(spec, hint)
    return plan, at, {k: hint[k] for k in sorted(symbols)}


def _evaluated(plan: PhiloxPlan, bindings: Mapping[str, int]) -> PhiloxPlan:
    """A symbolic plan's numbers at `bindings`."""
    return dataclasses.replace(
        plan, sizes=evaluate(plan.sizes, bindings),
        index_strides=evaluate(plan.index_strides, bindings),
        index_offset=evaluate(plan.index_offset, bindings),
        dst_strides=evaluate(plan.dst_strides, bindings),
        dst_offset=evaluate(plan.dst_offset, bindings),
        masks=tuple(evaluate(m, bindings) for m in plan.masks),
        space_numel=evaluate(plan.space_numel, bindings),
        numel=evaluate(plan.numel, bindings),
        state_index=evaluate(plan.state_index, bindings),
    )


def is_linear(plan: PhiloxPlan) -> bool:
    """True when position, logical index and destination all advance together by 1."""
    if plan.masks or plan.index_offset != 0 or plan.space_numel != plan.numel:
        return False
    if len(plan.sizes) == 0:
        return True
    return len(plan.sizes) == 1 and plan.index_strides == (1,) and plan.dst_strides == (1,)


def dst_elements(plan: PhiloxPlan, at: PhiloxPlan) -> Any:
    """The smallest flat destination storage the kernel may address: an expression where
    every destination stride is >= 0 for every value, else its value at the hint."""
    if at.space_numel == 0:
        return 0
    if plan is not at and all(
        statically_true(st >= 0) if isinstance(st, Sym) else st >= 0 for st in plan.dst_strides
    ):
        return plan.dst_offset + sum(
            (n - 1) * st for n, st in zip(plan.sizes, plan.dst_strides, strict=True)) + 1
    return address_span(at.sizes, at.dst_strides, at.dst_offset)[1] + 1
