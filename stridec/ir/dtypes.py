"""Element types: one `DType` per supported torch dtype, with its text-IR spelling, and
numbers converted to them as torch converts (`fits`, `convert`, `bit_pattern`).

Nothing here imports torch: `DType.torch` (the torch dtype of the same name) reads it
from the torch a caller has imported, and `as_dtype` recognizes a torch dtype by name.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import dataclass
from typing import Any

from stridec.errors import ShapeError, UnsupportedError

__all__ = ["DType", "DTYPES", "as_dtype", "fits", "fill_fits", "promote_types", "convert",
           "bit_pattern"]


_TORCH_DTYPES: dict[str, Any] = {}  # name → torch dtype, filled on first use


@dataclass(frozen=True, slots=True)
class DType:
    """An element type. `short` is the text-IR spelling (MLIR style: f16, ui32, i1).

    >>> d = stridec.as_dtype("float16")
    >>> d.name, d.short, d.itemsize
    ('float16', 'f16', 2)
    """

    name: str
    short: str
    itemsize: int
    triton: str
    is_floating: bool
    is_signed: bool

    @property
    def torch(self) -> Any:
        """The torch dtype of this name (`torch.float16` …), for callers that hold torch
        tensors: it is read from the torch the process has imported.

        >>> stridec.as_dtype("bf16").torch
        torch.bfloat16
        """
        found = _TORCH_DTYPES.get(self.name)
        if found is None:
            torch = sys.modules.get("torch")
            if torch is None:  # the IR never loads torch itself
                raise UnsupportedError(f"{self.name}.torch: torch is not imported")
            found = _TORCH_DTYPES[self.name] = getattr(torch, self.name)
        return found

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"stridec.{self.name}"


def _d(name: str, short: str, itemsize: int, triton: str, floating: bool, signed: bool) -> DType:
    return DType(name, short, itemsize, triton, floating, signed)


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
bool_ = DType("bool", "i1", 1, "tl.int1", False, False)

DTYPES: dict[str, DType] = {
    d.name: d
    for d in (float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, uint32, bool_)
}
_BY_KEY: dict[object, DType] = {}
for _d_ in DTYPES.values():
    _BY_KEY[_d_.name] = _d_
    _BY_KEY[_d_.short] = _d_
_BY_KEY["half"] = float16
_BY_KEY["float"] = float32
_BY_KEY["double"] = float64
_BY_KEY["long"] = int64
_BY_KEY["int"] = int32


def as_dtype(value: object, what: str = "dtype") -> DType:
    """Return the `DType` for a DType, a name ("float16", "f16") or a torch.dtype.

    Raises `UnsupportedError` naming `what` for anything else.

    >>> stridec.as_dtype("f16"), stridec.as_dtype(torch.int8), stridec.as_dtype("uint32")
    (stridec.float16, stridec.int8, stridec.uint32)
    """
    if isinstance(value, DType):
        return value
    try:
        found = _BY_KEY.get(value)  # type: ignore[call-overload]
    except TypeError:
        found = None
    if found is None and type(value).__module__ == "torch":
        text = str(value)  # a torch.dtype prints as "torch.float16" (torch.half too)
        if text.startswith("torch."):
            found = DTYPES.get(text[len("torch."):])
            if found is not None:
                _BY_KEY[value] = found
    if found is None:
        names = ", ".join(DTYPES)
        raise UnsupportedError(f"{what}: expected one of {names}; got {value!r}")
    return found


# -- numbers as torch converts them ------------------------------------------------------
# (lowest, highest) value of each dtype, as torch's overflow check (`c10::overflows`)
# compares them.
_LIMITS: dict[str, tuple[float, float]] = {
    "float16": (-65504.0, 65504.0),
    "bfloat16": (-3.3895313892515355e38, 3.3895313892515355e38),
    "float32": (-3.4028234663852886e38, 3.4028234663852886e38),
    "float64": (-1.7976931348623157e308, 1.7976931348623157e308),
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "bool": (-(2**63), 2**64 - 1),
}


def fits(value: bool | int | float, dtype: DType) -> bool:
    """Whether torch accepts `value` as a fill of `dtype` (`torch.full((2,), value,
    dtype=…)` raises otherwise), by `c10::overflows`: a bool always fits, and so does any
    number into bool; an int must lie
    in [-2^63, 2^64) and between the dtype's limits — into an unsigned dtype a negative
    one wraps, so -255 fits uint8 and -256 does not; a float must lie between the limits
    (compared as doubles), except ±inf and NaN, which fit every floating dtype."""
    if isinstance(value, bool) or (dtype.name == "bool" and isinstance(value, float)):
        return True  # into bool, any number converts (nonzero is True)
    lowest, highest = _LIMITS[dtype.name]
    if isinstance(value, int):
        if not -(2**63) <= value < 2**64:
            return False
        if value < 0 and not dtype.is_signed and not dtype.is_floating:
            return -value <= highest
        return lowest <= value <= highest
    if math.isnan(value) or math.isinf(value):
        return dtype.is_floating
    return float(lowest) <= value <= float(highest)


def convert(value: bool | int | float, dtype: DType) -> bool | int | float:
    """`value` as torch's `.to(dtype)` makes it (`torch.tensor(value).to(dtype).item()`):
    floats round to nearest even (to float16 through float32, as c10 does: two
    roundings), floats into integers truncate toward zero, integers wrap. A float outside
    an integer dtype's range gives what torch gives on x86-64 (see below)."""
    name = dtype.name
    if name == "bool":
        return bool(value)
    if name == "float64":
        return float(value)
    if dtype.is_floating:
        single = _int_to_float32(value) if isinstance(value, int) else _float32(value)
        if name == "float32":
            return single
        if name == "float16":
            return _unpack("<e", _pack_or_inf("<e", single))
        return _unpack("<f", struct.pack("<I", _bfloat16_bits(single) << 16))
    bits = dtype.itemsize * 8
    if isinstance(value, float):
        # Truncated toward zero into int32 (int8, int16, int32) or int64 (uint8, uint32,
        # int64) as the compiled cast does, then wrapped; NaN, ±inf and what that
        # intermediate cannot hold give its lowest value (x86-64's cvttsd2si: undefined in
        # C++, and this is what torch gives there).
        width = 32 if name in ("int8", "int16", "int32") else 64
        if math.isfinite(value) and abs(math.trunc(value)) < 2 ** (width - 1):
            value = math.trunc(value)
        else:
            value = -(2 ** (width - 1))
    wrapped = int(value) % (1 << bits)
    if dtype.is_signed and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return wrapped


def bit_pattern(value: bool | int | float, dtype: DType) -> int:
    """`convert(value, dtype)` as the signed integer of the same bits and width (what a
    kernel writes through an integer view): float32 1.0 is 0x3F800000 = 1065353216,
    uint32 4294967295 is -1, bool True is 1."""
    converted = convert(value, dtype)
    name = dtype.name
    if name == "bool":
        return int(converted)
    if not dtype.is_floating:
        bits = dtype.itemsize * 8
        return converted - (1 << bits) if converted >= 1 << (bits - 1) else converted
    if name == "float64":
        return _unpack("<q", struct.pack("<d", converted))
    if name == "float32":
        return _unpack("<i", struct.pack("<f", converted))
    if name == "float16":
        if isinstance(value, float) and math.isnan(value):
            # torch's conversion (F16C) goes through float32: quiet, the payload's top
            # bits kept (`struct`'s "<e" would drop them).
            f32 = _unpack("<I", struct.pack("<f", value))
            raw = ((f32 >> 16) & 0x8000) | 0x7E00 | ((f32 >> 13) & 0x3FF)
            return raw - (1 << 16) if raw >= 1 << 15 else raw
        return _unpack("<h", struct.pack("<e", converted))
    raw = _bfloat16_bits(converted)
    return raw - (1 << 16) if raw >= 1 << 15 else raw


def _unpack(fmt: str, raw: bytes) -> Any:
    return struct.unpack(fmt, raw)[0]


def _pack_or_inf(fmt: str, value: float) -> bytes:
    """`value` rounded to nearest even into the format; ±inf where it overflows (Python's
    `struct` raises there, C's cast gives inf)."""
    try:
        return struct.pack(fmt, value)
    except OverflowError:
        return struct.pack(fmt, math.copysign(math.inf, value))


def _float32(value: float) -> float:
    """`value` rounded to nearest even into float32 (±inf beyond its range)."""
    return _unpack("<f", _pack_or_inf("<f", value))


def _int_to_float32(n: int) -> float:
    """The integer `n` rounded once, to nearest even, into float32 (as C's int64 → float;
    through a double it would round twice above 2^53)."""
    if abs(n) < 2**53:
        return _float32(float(n))
    shift = abs(n).bit_length() - 24
    q, r = divmod(abs(n), 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return math.copysign(float(q << shift), n)


def _bfloat16_bits(single: float) -> int:
    """The bfloat16 bits of a float32 value, rounded to nearest even as c10 rounds
    (`round_to_nearest_even`: add 0x7FFF plus the lowest kept bit, keep the high half;
    NaN becomes 0x7FC0)."""
    if single != single:
        return 0x7FC0
    u = _unpack("<I", struct.pack("<f", single))
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def fill_fits(value: bool | int | float, dtype: DType) -> bool:
    """Whether a fill of `dtype` may be `value`: `fits` (torch's overflow check, compared
    exactly), except that no negative number fits an unsigned type — `torch.full` wraps
    -1 into uint8 as 255, `F.pad` refuses it, and a fill never wraps in stridec; and a
    float into an integer type is compared exactly (2.0**63 does not fit int64, which
    torch's check, rounding the limit to a double, lets wrap to -2^63)."""
    if isinstance(value, float) and not dtype.is_floating and dtype.name != "bool":
        lowest, highest = _LIMITS[dtype.name]
        if not lowest <= value <= highest:  # exact int/float comparison; NaN fails
            return False
    if (
        not isinstance(value, bool)
        and not dtype.is_floating
        and not dtype.is_signed
        and dtype.name != "bool"
        and value < 0
    ):
        return False
    return fits(value, dtype)


def promote_types(a: DType, b: DType, what: str = "promote_types") -> DType:
    """torch's `promote_types` (the dtype `torch.cat` of the two gives): a float wins over
    integers and bool (float16 with bfloat16 is float32, else the wider float); integers
    take the wider signed type, uint8 with a signed one at least int16; bool yields. torch
    promotes uint32 with no other integer type (nor bool): that is a `ShapeError`."""
    if a == b:
        return a
    if a.is_floating or b.is_floating:
        if a.is_floating and b.is_floating:
            if {a.name, b.name} == {"float16", "bfloat16"}:
                return DTYPES["float32"]
            return a if a.itemsize > b.itemsize else b
        return a if a.is_floating else b
    if "uint32" in (a.name, b.name):
        raise ShapeError(
            f"{what}: torch promotes {a} with {b} to no dtype (uint32 promotes only with "
            f"floats and itself)"
        )
    if a.name == "bool" or b.name == "bool":
        return b if a.name == "bool" else a
    if a.is_signed and b.is_signed:
        return a if a.itemsize >= b.itemsize else b
    signed = a if a.is_signed else b  # the other is uint8
    return signed if signed.itemsize > 1 else DTYPES["int16"]
