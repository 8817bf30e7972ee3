"""Element types: one `DType` per supported torch dtype, with its text-IR spelling."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from stridec.errors import ShapeError, UnsupportedError

__all__ = ["DType", "DTYPES", "as_dtype", "fill_fits", "promote_types"]


@dataclass(frozen=True, slots=True)
class DType:
    """An element type. `short` is the text-IR spelling (MLIR style: f16, ui32, i1)."""

    name: str
    short: str
    itemsize: int
    torch: torch.dtype
    triton: str
    is_floating: bool
    is_signed: bool

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"stridec.{self.name}"


def _d(name: str, short: str, itemsize: int, triton: str, floating: bool, signed: bool) -> DType:
    return DType(name, short, itemsize, getattr(torch, name), triton, floating, signed)


float16 = _d("float16", "f16", 2, "tl.float16", True, True)
bfloat16 = _d("bfloat16", "bf16", 2, "tl.bfloat16", True, True)
float32 = _d("float32", "f32", 4, "tl.float32", True, True)
float64 = _d("float64", "f64", 8, "tl.float64", True, True)
int8 = _d("int8", "i8", 1, "tl.int8", False, True)
uint8 = _d("uint8", "ui8", 1, "tl.uint8", False, False)
int16 = _d("int16", "i16", 2, "tl.int16", False, True)
int32 = _d("int32", "i32", 4, "tl.int32", False, True)
int64 = _d("int64", "i64", 8, "tl.int64", False, True)
uint32 = _d("uint32", "ui32", 4, "tl.uint32", False, False)
bool_ = DType("bool", "i1", 1, torch.bool, "tl.int1", False, False)

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, uint32, bool_)
}
_BY_KEY: dict[object, DType] = {}
for _d_ in DTYPES.values():
    _BY_KEY[_d_.name] = _d_
    _BY_KEY[_d_.short] = _d_
    _BY_KEY[_d_.torch] = _d_
_BY_KEY["half"] = float16
_BY_KEY["float"] = float32
_BY_KEY["double"] = float64
_BY_KEY["long"] = int64
_BY_KEY["int"] = int32


def as_dtype(value: object, what: str = "dtype") -> DType:
    """Return the `DType` for a DType, a name ("float16", "f16") or a torch.dtype.

    Raises `UnsupportedError` naming `what` for anything else.
    """
    if isinstance(value, DType):
        return value
    try:
        found = _BY_KEY.get(value)  # type: ignore[call-overload]
    except TypeError:
        found = None
    if found is None:
        names = ", ".join(DTYPES)
        raise UnsupportedError(f"{what}: expected one of {names}; got {value!r}")
    return found


# The largest finite value of each float type (float64: every finite Python float).
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": 3.4028234663852886e38, "float64": float("inf")}


def fill_fits(value: bool | int | float, dtype: DType) -> bool:
    """Whether torch fills a `dtype` tensor with `value` without overflow (c10's check,
    as `F.pad` applies it, compared exactly, not after rounding):

    - an int must fit int64 or uint64, as torch reads it; then bool holds anything
      (`value != 0`);
    - an integer type holds the numbers within its range, a float truncated toward zero
      (`1.5` -> 1, `255.0` fits uint8, `255.5` does not), never NaN or ±inf, and no
      negative number in an unsigned type (`torch.full` wraps -1 to 255 there, `F.pad`
      refuses it: stridec never wraps);
    - a float type holds NaN, ±inf and the finite numbers within ±its largest value
      (65504.5 does not fit float16 though it would round to 65504).
    """
    if isinstance(value, int) and not -(2**63) <= value <= 2**64 - 1:
        return False
    if dtype.name == "bool" or isinstance(value, bool):
        return True
    if dtype.is_floating:
        return value != value or abs(value) in (float("inf"), _FLOAT_MAX[dtype.name]) or (
            abs(value) <= _FLOAT_MAX[dtype.name]
        )
    bits = dtype.itemsize * 8
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if dtype.is_signed else (0, 2**bits - 1)
    return low <= value <= high  # False for NaN; Python compares int and float exactly


def promote_types(a: DType, b: DType, what: str = "promote_types") -> DType:
    """torch's `promote_types` (the dtype `torch.cat` of the two gives). torch promotes
    uint32 with no other integer type (nor bool): that is a `ShapeError` naming both."""
    try:
        return as_dtype(torch.promote_types(a.torch, b.torch))
    except RuntimeError:
        raise ShapeError(
            f"{what}: torch promotes {a} with {b} to no dtype (uint32 promotes only with "
            f"floats and itself)"
        ) from None
