"""Converting between stridec's element types bit for bit as torch's CPU `.to()`, in C.

The conversions are C in the package: the element helpers in `lib/casts.h` (the planned
library's casts, `lib/copy_cast.h`, convert with them and with vector instructions where
those give the same bits); this module names them for a pair of dtypes. Interface:

* `c_type(dtype)` — the C type holding one element: float16 and bfloat16 are held as their
  `uint16_t` bit patterns, bool as a `uint8_t` 0 or 1.
* `C_PRELUDE` — `#include`s and `static inline` helpers (`lib/casts.h`), pasted once at
  the top of a compile unit.
* `c_convert(src, dst, expr)` — a C expression turning `expr`, a value of `c_type(src)`,
  into the `c_type(dst)` value torch's `.to(dst)` gives. `expr` appears once in the result,
  so it may have side effects or cost.

The oracle is torch's `.to()` on a contiguous CPU tensor, the loop that covers the bulk of
every large tensor. torch does not give one answer everywhere: for a few NaN and
out-of-range inputs the elements of its scalar path (a short tensor's tail, a strided
source) differ from those of its vector loop, and the vector loop is what is matched here:

* float32 or float64 NaN → bfloat16 is `0xffff` (the scalar path gives `0x7fc0`); a
  float16 NaN → bfloat16 is `0x7fc0` (torch's only path for that pair);
* float16 NaN → float32 keeps its payload, shifted up by 13 bits, with the quiet bit set
  (x86 `vcvtph2ps`; torch's scalar tail gives `0x7fffffff`);
* float → uint32 for NaN and values outside `(-2^31, 2^32)`: the vector loop's
  "subtract 2^31 when x ≥ 2^31" conversion (NaN gives `0x80000000`); the scalar path goes
  through int64 instead, and so does every float16 → uint32 (torch has no vector loop
  for it).

Everything else is one rule throughout torch:

* to float16 and bfloat16, every source goes through float32 first (two roundings for
  float64 and the wide integers, as torch's `c10::Half(float)`), then rounds to nearest
  even; a float32 NaN → float16 keeps its sign and top 10 payload bits with the quiet bit
  set (x86 `vcvtps2ph`), so `0x7f800001` → `0x7e00`;
* float16 and bfloat16 widen exactly (bfloat16 is the top half of a float32); float32 ↔
  float64 are the C casts (x86 quiets a signalling NaN and keeps the payload's top bits);
* float → int32 / int64 truncates toward zero; NaN and values out of range give the
  smallest integer (`INT32_MIN`, `INT64_MIN`), as x86's `cvttss2si`. C leaves an
  out-of-range conversion undefined, so the helpers test the range first and convert only
  in-range values. int8 and int16 take the low bits of that int32, uint8 the low bits of
  the int64 (torch casts to uint8 through int64: `c10::static_cast_with_inter_type`);
* to bool: `x != 0` (NaN is true, -0.0 false);
* from bool: any byte other than 0 is 1 (a bool tensor made by viewing uint8 bytes, by
  `frombuffer` or from numpy may hold 2 … 255; torch reads each as true);
* between integers, C's conversions: they wrap modulo 2^bits (gcc defines the narrowing
  of signed values so); integer → float rounds to nearest even.

The helpers are branch-free selects over integer bit patterns (NaN is tested on the bits,
never with `x != x`), so gcc vectorizes loops of them. They need IEEE arithmetic: compile
without `-ffast-math` (or `-ffinite-math-only`), and with flush-to-zero off (the default).
"""

from __future__ import annotations

from stridec.compiler.codegen.c.library import library_text
from stridec.errors import UnsupportedError
from stridec.ir.dtypes import DTYPES, DType, as_dtype

__all__ = ["C_PRELUDE", "C_TYPES", "c_convert", "c_type"]

C_TYPES: dict[str, str] = {
    "float16": "uint16_t",
    "bfloat16": "uint16_t",
    "float32": "float",
    "float64": "double",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint32": "uint32_t",
    "bool": "uint8_t",
}

# The helpers, C in the package (lib/casts.h).
C_PRELUDE = library_text("casts.h")

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def c_type(dtype: DType | str) -> str:
    """The C type holding one element of `dtype` (float16/bfloat16: `uint16_t` bits)."""
    d = as_dtype(dtype, "c_type dtype")
    return C_TYPES[d.name]


def _as_f32(src: str, expr: str) -> str:
    """`expr` (of `src`, a float16/bfloat16/float32 type) as a C float."""
    if src == "float16":
        return f"stridec_f16_to_f32({expr})"
    if src == "bfloat16":
        return f"stridec_bf16_to_f32({expr})"
    return f"({expr})"


def _float_to_int(src: str, dst: str, expr: str) -> str:
    """float16/bfloat16/float32/float64 → an integer type (not bool)."""
    wide = "f64" if src == "float64" else "f32"
    value = expr if src == "float64" else _as_f32(src, expr)
    if dst == "uint32" and src != "float16":
        return f"stridec_{wide}_to_u32({value})"
    if dst in ("int64", "uint8", "uint32"):  # uint8 (and float16 → uint32) via int64
        return f"(({C_TYPES[dst]})stridec_{wide}_to_i64({value}))"
    return f"(({C_TYPES[dst]})stridec_{wide}_to_i32({value}))"


def c_convert(src: DType | str, dst: DType | str, expr: str) -> str:
    """A C expression converting `expr` (a `c_type(src)` value) to `c_type(dst)` as torch's
    CPU `.to(dst)` does; see the module docstring for the rules. `expr` appears once."""
    s = as_dtype(src, "c_convert src").name
    d = as_dtype(dst, "c_convert dst").name
    if s not in DTYPES or d not in DTYPES:  # pragma: no cover - as_dtype admits only these
        raise UnsupportedError(f"c_convert: no C conversion from {s} to {d}")
    if s == d:
        return f"({expr})"
    if s == "bool":  # any byte but 0 is true (a bool made by a uint8 view), as torch reads it
        expr, s = f"((uint8_t)(({expr}) != 0))", "uint8"
    if d == "bool":
        if s in ("float16", "bfloat16"):  # ±0 has only the sign bit set
            return f"((uint8_t)((({expr}) & 0x7fffu) != 0))"
        return f"((uint8_t)(({expr}) != 0))"
    if d == "float16":
        return f"stridec_f32_to_f16({_as_f32(s, expr) if s in _FLOATS else f'(float)({expr})'})"
    if d == "bfloat16":
        nan = "0x7fc0u" if s == "float16" else "0xffffu"
        value = _as_f32(s, expr) if s in _FLOATS else f"(float)({expr})"
        return f"stridec_f32_to_bf16({value}, {nan})"
    if s in ("float16", "bfloat16"):
        if d == "float32":
            return _as_f32(s, expr)
        if d == "float64":
            return f"((double){_as_f32(s, expr)})"
    if s in _FLOATS and d not in _FLOATS:
        return _float_to_int(s, d, expr)
    return f"(({C_TYPES[d]})({expr}))"
