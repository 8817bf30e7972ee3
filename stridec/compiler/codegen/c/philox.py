"""The `philox` op on the CPU: Philox4x32-10 bits or uniforms, DirectML semantics.

The same kernel as the Triton one (`stridec.compiler.codegen.philox`); both render one plan
(`stridec.compiler.codegen.philox_plan`, which validates and coalesces the spec): the
iteration space `c` of sizes `n` maps to

    logical index  i(c) = index_offset + Σ c_k · index_strides_k   (row-major in the output)
    destination    d(c) = dst_offset   + Σ c_k · dst_strides_k      (flat output storage)

and element `d` receives word `i mod 4` of Philox4x32-10(counter + ⌊i/4⌋, key), the
counter sum taken mod 2^128, or the fill where a mask `lo <= Σ coeffs_k · c_k < hi`
fails. Uniforms are `fma(float32(bits >> (32 - d)) · 2^-d, scale32, low32)` (`d` the
dtype's `UNIFORM_BITS`: 24, 11, 8), rounded to float16 / bfloat16 to nearest even
(`codegen.c.casts`).

The kernels are C in the package (`lib/philox.c`, its variants `lib/philox_variant.h`).
One compile unit serves every philox op: its source is a constant (`PHILOX_C_SOURCE`)
and everything about the spec is a runtime argument, so one library is built per
machine; over symbolic sizes (`generate_c_philox(..., hint=...)`) the parameters are
expressions of the symbols, evaluated per call. It exports, each with the signature of
the C copy kernels `void f(const void *state, void *dst, const int64_t *p, int64_t nthreads)`:

* `stridec_philox_bits` (uint32 / int32 words), `stridec_philox_uniform_f32`,
  `stridec_philox_uniform_f16`, `stridec_philox_uniform_bf16`: the output. `state` is
  the flat storage holding the 6 state words, `dst` the flat output storage;
* `stridec_philox_advance`: `dst` is the flat storage of `new_state`.

A philox op is two calls, in this order: the output, then `stridec_philox_advance`.
The state may therefore alias `new_state` (an in-place `out=` state): every thread of the
first call has finished reading the state before the second reads it (once, into locals)
and writes the advanced counter.

The int64 parameters `p` of an output call (`philox_params`) and of the advance
(`advance_params`) are laid out as `lib/philox_abi.h` declares (`HEADER`, `ADVANCE`: its
field lists, which the C reads by name too): an output's header (the rank R, numel, the
offsets, the masks' count, the fill's bits, the linear flag, the uniform's float32 bits,
the positions of the 6 state words, a 0), then R sizes, R index strides, R destination
strides, then per mask R coefficients, lo, hi; the advance's 6 state and 6 new_state
word positions, then ⌈numel / 4⌉ blocks.

Worked example (the linear path): counter `ffffffff 0 0 0`, element `i = 9` of a
contiguous output is block `q = ⌊9/4⌋ = 2`, counter `2^32 − 1 + 2` (words
`00000001 00000001 0 0`), word `9 mod 4 = 1`, stored at `dst_offset + 9`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from stridec.compiler.codegen.c.casts import C_PRELUDE
from stridec.compiler.codegen.c.copy import CKernel
from stridec.compiler.codegen.c.library import define_number, library_text, macro_fields, unit_text
from stridec.compiler.codegen.philox_plan import (
    UNIFORM_BITS,
    PhiloxPlan,
    PhiloxSpec,
    dst_elements,
    is_linear,
    plan_philox,
    plans,
)
from stridec.errors import ShapeError, UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DType
from stridec.ir.symbols import Sym, ceil_div, statically_true

__all__ = [
    "PHILOX_C_SOURCE",
    "CPhiloxKernel",
    "advance_params",
    "call_fits",
    "generate_c_philox",
    "philox_params",
    "philox_symbol",
]

ADVANCE_SYMBOL = "stridec_philox_advance"
_SYMBOLS = {
    "bits": "stridec_philox_bits",
    "float32": "stridec_philox_uniform_f32",
    "float16": "stridec_philox_uniform_f16",
    "bfloat16": "stridec_philox_uniform_bf16",
}

# The argument blocks' layouts, as lib/philox_abi.h declares them for the C that reads them.
_ABI = library_text("philox_abi.h")
HEADER = macro_fields(_ABI, "STRIDEC_PHILOX_HEADER")
ADVANCE = macro_fields(_ABI, "STRIDEC_PHILOX_ADVANCE")
HEADER_WORDS = len(HEADER)
MAX_MASKS = define_number(_ABI, "STRIDEC_PHILOX_MAX_MASKS")
_AT = {name: k for k, name in enumerate(HEADER)}
_STATE = _AT["state0"]
assert HEADER[_STATE:_STATE + 6] == tuple(f"state{k}" for k in range(6)), "lib/philox_abi.h"
assert define_number(_ABI, "STRIDEC_PHILOX_MAX_RANK") == MAX_RANK, "lib/philox_abi.h: MAX_RANK"
assert all(define_number(_ABI, f"STRIDEC_PHILOX_UNIFORM_BITS_{name.upper()}") == bits
           for name, bits in UNIFORM_BITS.items()), "lib/philox_abi.h: UNIFORM_BITS"

# The conversions, then lib/philox.c (one unit).
PHILOX_C_SOURCE = "\n".join([C_PRELUDE, unit_text("philox.c")])


def philox_symbol(spec: PhiloxSpec) -> str:
    """The exported function writing `spec`'s output."""
    if spec.distribution == "bits":
        return _SYMBOLS["bits"]
    return _SYMBOLS[plan_philox(spec).dtype.name]


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _nonneg(x: Any) -> bool:
    """`x >= 0` for every value of its symbols (an int: as it is)."""
    return statically_true(x >= 0) if isinstance(x, Sym) else x >= 0


def _word_positions(words: Sequence[Any], what: str) -> tuple[Any, ...]:
    out = tuple(w if isinstance(w, Sym) else int(w) for w in words)
    if len(out) != 6 or not all(_nonneg(w) for w in out):
        raise ShapeError(f"philox: {what} must be 6 word positions >= 0; got {words!r}")
    return out


def philox_params(spec: PhiloxSpec, state_words: Sequence[int] = range(6),
                  hint: Mapping[str, int] | None = None) -> tuple[int, ...]:
    """The int64 parameters of `spec`'s output call (layout in the module docstring);
    `state_words` are the element positions of the 6 state words in the state storage.
    Over symbolic sizes (with `hint`, a binding of the class), expressions."""
    plan, at, _ = plans(spec, hint)
    return _params(plan, at, state_words)


def _params(plan: PhiloxPlan, at: PhiloxPlan, state_words: Sequence[Any]) -> tuple[Any, ...]:
    rank = len(plan.sizes)
    state = _word_positions(state_words, "state words")
    if len(plan.masks) > MAX_MASKS:
        raise UnsupportedError(
            f"philox: at most {MAX_MASKS} masks are supported; got {len(plan.masks)}"
        )
    # The gather path may walk the space in any order (each element's value depends on its
    # logical index only): destination strides descending (at the hint, for a symbolic
    # plan: any order is right for every value), so the writes run forward through memory
    # instead of striding across it.
    # A rank-0 space is walked as one dim of size 1 (the gather path needs an innermost dim).
    order = sorted(range(rank), key=lambda k: -abs(at.dst_strides[k]))
    sizes = [plan.sizes[k] for k in order] or [1]
    values = {
        "rank": len(sizes), "numel": plan.numel, "index_offset": plan.index_offset,
        "dst_offset": plan.dst_offset, "masks": len(plan.masks), "fill_bits": plan.fill_bits,
        "linear": int(at.space_numel > 0 and is_linear(plan)),
        "low_bits": _f32_bits(plan.low32) if plan.uniform else 0,
        "scale_bits": _f32_bits(plan.scale32) if plan.uniform else 0,
        **{f"state{k}": w for k, w in enumerate(state)}, "reserved": 0,
    }
    params = [values[name] for name in HEADER] + sizes
    params += [plan.index_strides[k] for k in order] or [0]
    params += [plan.dst_strides[k] for k in order] or [0]
    for coeffs, lo, hi in plan.masks:
        params += [*(coeffs[k] for k in order), lo, hi] if order else [0, lo, hi]
    return tuple(params)


def advance_params(
    numel: Any, state_words: Sequence[Any] = range(6),
    new_state_words: Sequence[Any] = range(6),
) -> tuple[Any, ...]:
    """The int64 parameters of the `stridec_philox_advance` call of an output of `numel`
    (an expression over symbolic sizes)."""
    values = {
        **{f"state{k}": w for k, w in enumerate(_word_positions(state_words, "state words"))},
        **{f"new_state{k}": w for k, w in
           enumerate(_word_positions(new_state_words, "new_state words"))},
        "blocks": ceil_div(numel if isinstance(numel, Sym) else int(numel), 4),
    }
    return tuple(values[name] for name in ADVANCE)


def call_fits(symbol: str, params: Sequence[Any]) -> bool:
    """Whether `params` are whole parameters of the philox call `symbol` (the layouts in the
    module docstring): for checking a program read back from disk before it runs. A
    symbolic parameter (a program over symbolic sizes) must be >= 0 for every value where
    the value must be."""
    p = tuple(params)
    if symbol == ADVANCE_SYMBOL:
        return len(p) == len(ADVANCE) and all(_nonneg(w) for w in p)
    if symbol not in _SYMBOLS.values() or len(p) < HEADER_WORDS:
        return False
    rank, masks, linear = p[_AT["rank"]], p[_AT["masks"]], p[_AT["linear"]]
    if isinstance(rank, Sym) or isinstance(masks, Sym) or isinstance(linear, Sym):
        return False
    return (1 <= rank <= MAX_RANK and 0 <= masks <= MAX_MASKS and _nonneg(p[_AT["numel"]])
            and linear in (0, 1) and all(_nonneg(w) for w in p[_STATE:_STATE + 6])
            and len(p) == HEADER_WORDS + 3 * rank + masks * (rank + 2))


@dataclass(frozen=True, slots=True)
class CPhiloxKernel(CKernel):
    """A philox op as calls of the compiled C unit `PHILOX_C_SOURCE` (`CKernel`), with the
    launch's storages `(state, dst, new_state)`. `dst_elements` is the smallest flat
    destination storage (in elements) the output addresses, of `dst_dtype`."""

    _: KW_ONLY
    dst_elements: int
    dst_dtype: DType
    kind: str = "philox"


def generate_c_philox(
    spec: PhiloxSpec,
    state_words: Sequence[int] = range(6),
    new_state_words: Sequence[int] = range(6),
    hint: Mapping[str, int] | None = None,
) -> CPhiloxKernel:
    """The C kernel of `spec`: the output call, then the state advance. `state_words` /
    `new_state_words` are the element positions of the 6 words in the state and new_state
    storages (a strided or offset state view). Bad specs raise `ShapeError` /
    `UnsupportedError` naming the field, as `generate_philox`.

    A spec over symbolic sizes is planned for the class of the binding `hint`
    (`codegen.philox_plan.symbolic_plan`): the same compiled unit, its calls' parameters
    expressions of the symbols (`Program.bind` / `SymbolicRunner` evaluate them per
    call), the state advance ⌈numel/4⌉ among them."""
    plan, at, _ = plans(spec, hint)
    if at.space_numel == 0:
        if isinstance(plan.space_numel, Sym):
            raise UnsupportedError(
                f"philox: the hint {dict(hint or {})} makes the space {plan.sizes} empty; "
                "plan for a binding that writes something"
            )
        strategy = "empty"
    else:
        strategy = "linear" if is_linear(plan) else "gather"
    calls: list[tuple[str, int, int, tuple[Any, ...]]] = []
    if at.space_numel > 0:
        symbol = _SYMBOLS["bits" if not plan.uniform else plan.dtype.name]
        calls.append((symbol, 0, 1, _params(plan, at, state_words)))
    calls.append((ADVANCE_SYMBOL, 0, 2, advance_params(plan.numel, state_words,
                                                         new_state_words)))
    digest = hashlib.sha256(repr(calls).encode()).hexdigest()[:16]
    return CPhiloxKernel(
        name=f"stridec_c_philox_{digest}",
        strategy=strategy,
        source=PHILOX_C_SOURCE,
        calls=tuple(calls),
        numel=plan.numel,
        dst_elements=dst_elements(plan, at),
        dst_dtype=plan.dtype,
    )


def run_calls(lib: Any, calls: Sequence[tuple[str, int, int, Sequence[int]]],
              storages: Sequence[Any], nthreads: int) -> None:
    """Make `calls` on a loaded library (ctypes) over storages with `data_ptr()` — for
    tests and direct use; a program runs them through the runtime."""
    import ctypes

    for symbol, src_arg, dst_arg, params in calls:
        fn = getattr(lib, symbol)
        array = (ctypes.c_int64 * len(params))(*params)
        fn(ctypes.c_void_p(storages[src_arg].data_ptr()),
           ctypes.c_void_p(storages[dst_arg].data_ptr()), array, ctypes.c_int64(nthreads))
