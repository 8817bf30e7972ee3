"""Op attributes declared once (xDSL's IRDL `prop_def`): `dims = attr(ints)` in an op class
gives the op its attribute `dims`, its canonical form, its text order and the typed
accessor `op.dims`.

An `Attr` holds a converter `(op, key, value) -> canonical value` that raises a
`StridecError` naming the op, the attribute, what was expected and what was given:

    permute: attribute 'dims' must be a list of ints; got 'ab'

`Op.normalize` (stridec.ir.graph) runs each declared attribute's converter in order, then
the op's `relate_attrs` hook for what ties attributes to each other or to the operand
types (a fill that must fit the dtype, a reshape's -1 resolved from the operand's size).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable
from typing import Any

from stridec.errors import ShapeError, UnsupportedError, VerificationError
from stridec.ir.affine import MAX_RANK, checked_int
from stridec.ir.dtypes import DType, as_dtype, fill_fits
from stridec.ir.formats import get_format
from stridec.ir.layout import Layout
from stridec.ir.symbols import Sym

__all__ = [
    "REQUIRED",
    "Attr",
    "attr",
    "integer",
    "size",
    "sym_ints",
    "ints",
    "shape",
    "sizes",
    "number",
    "real",
    "dtype",
    "layout",
    "masks",
    "frame",
    "format_name",
    "nonempty_str",
    "names",
    "check_fill",
]

Converter = Callable[[str, str, Any], Any]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of an attribute that must be given (absent or None: "missing attribute").
REQUIRED: Any = _Required()


class Attr:
    """One declared attribute of an op class; reading it on an op gives its value.

    - `convert(op, key, value)` returns the canonical value or raises;
    - `default`: `REQUIRED`, None (optional: None stays None, unconverted) or a value
      used when the attribute is absent (an explicit None is then refused by `convert`);
    - `in_type`: the text form gives it by the result type, not in the attribute dict;
    - `key`: the attribute's name when the accessor must be named otherwise (`input`'s
      `name`, which would hide the op's own `name`).
    """

    def __init__(
        self,
        convert: Converter,
        default: Any = REQUIRED,
        *,
        in_type: bool = False,
        key: str | None = None,
        doc: str | None = None,
    ) -> None:
        self.convert = convert
        self.default = default
        self.required = default is REQUIRED
        self.in_type = in_type
        self.key = key
        self.name = key
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name  # the accessor's
        if self.key is None:
            self.key = name

    def __get__(self, op: Any, owner: type | None = None) -> Any:
        if op is None:
            return self
        return op.attrs[self.key]

    def __set__(self, op: Any, value: Any) -> None:
        raise AttributeError(
            f"{op.name}: attribute '{self.key}' is read-only; build a new op with `with_attrs`"
        )

    def __repr__(self) -> str:
        return f"attr({self.convert.__name__}, key={self.key!r})"


def attr(convert: Converter, default: Any = REQUIRED, **options: Any) -> Any:
    """Declare an attribute in an op class body: `Attr(convert, default, **options)`, typed
    `Any` so that `op.dims` reads as its value to a type checker."""
    return Attr(convert, default, **options)


# -- converters --------------------------------------------------------------------------
def _is_bool(value: Any) -> bool:
    """A Python or numpy bool."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _is_index(value: Any) -> bool:
    """An int as torch takes one: a Python int or anything with `__index__` (numpy
    integers), never a bool."""
    return not _is_bool(value) and (isinstance(value, int) or hasattr(type(value), "__index__"))


def integer(op: str, key: str, value: Any) -> int:
    """An int (numpy integers too), never a bool (`stridec.ir.affine.checked_int`)."""
    return checked_int(value, f"attribute '{key}'", op)


def size(op: str, key: str, value: Any) -> int | Sym:
    """An int or a symbolic size (`stridec.ir.symbols.Sym`, docs/symbolic.md)."""
    return value if isinstance(value, Sym) else integer(op, key, value)


def sym_ints(op: str, key: str, value: Any) -> tuple[int | Sym, ...]:
    """A tuple of ints or symbolic sizes; a single one is a tuple of one."""
    if type(value) is tuple and all(type(v) is int for v in value):
        return value  # already canonical (most ops are built from other ops' tuples)
    if isinstance(value, (list, tuple)):
        return tuple(size(op, key, v) for v in value)
    if isinstance(value, Sym) or _is_index(value):
        return (size(op, key, value),)
    raise VerificationError(f"{op}: attribute '{key}' must be a list of ints; got {value!r}")


def ints(op: str, key: str, value: Any) -> tuple[int, ...]:
    """A tuple of ints; a single int is a tuple of one (torch.Size is a tuple)."""
    if type(value) is tuple and all(type(v) is int for v in value):
        return value  # already canonical
    if isinstance(value, (list, tuple)):
        return tuple(integer(op, key, v) for v in value)
    if _is_index(value):
        return (integer(op, key, value),)
    raise VerificationError(f"{op}: attribute '{key}' must be a list of ints; got {value!r}")


def shape(op: str, key: str, value: Any) -> tuple[int | Sym, ...]:
    """Ints (or symbolic sizes) of at most `MAX_RANK` entries (a -1 left for the op to
    resolve)."""
    out = sym_ints(op, key, value)
    if len(out) > MAX_RANK:
        raise UnsupportedError(f"{op}: rank {len(out)} is above the maximum {MAX_RANK}")
    return out


def sizes(op: str, key: str, value: Any) -> tuple[int, ...]:
    """Sizes: at most `MAX_RANK` ints (or symbolic sizes), each >= 0."""
    out = shape(op, key, value)
    for s in out:
        if s < 0:
            raise ShapeError(f"{op}: '{key}' must be >= 0; got {list(out)}")
    return out


def number(op: str, key: str, value: Any) -> int | float | bool:
    """A Python bool, int or float; numpy scalars (and anything with `__index__`) become one."""
    if _is_bool(value):
        return bool(value)
    if not isinstance(value, (int, float)):
        if hasattr(type(value), "__index__"):
            return operator.index(value)
        if not isinstance(value, numbers.Real):
            raise VerificationError(f"{op}: attribute '{key}' must be a number; got {value!r}")
        return float(value)
    return value


def real(op: str, key: str, value: Any) -> float:
    """A number, as a Python float."""
    return float(number(op, key, value))


def dtype(op: str, key: str, value: Any) -> DType:
    """A `DType`, or anything `as_dtype` takes (a name, a short name, a torch dtype)."""
    return as_dtype(value, f"{op}: {key}")


def layout(op: str, key: str, value: Any) -> Layout:
    if not isinstance(value, Layout):
        raise VerificationError(f"{op}: '{key}' must be a Layout; got {value!r}")
    return value


def masks(op: str, key: str, value: Any) -> tuple[tuple[tuple[int, ...], int, int], ...] | None:
    """Masks as `((coeffs...), lo, hi)` triples, valid iff lo <= Σ coeffs_k·i_k < hi; no
    mask at all is None."""
    if not isinstance(value, (list, tuple)):
        raise VerificationError(
            f"{op}: '{key}' must be a list of [coeffs, lo, hi]; got {value!r}"
        )
    out = []
    for m in value:
        if hasattr(m, "coeffs"):
            m = (m.coeffs, m.lo, m.hi)
        if not isinstance(m, (list, tuple)) or len(m) != 3:
            raise VerificationError(f"{op}: each mask must be [coeffs, lo, hi]; got {m!r}")
        out.append((ints(op, key, m[0]), integer(op, key, m[1]), integer(op, key, m[2])))
    return tuple(out) or None


def frame(op: str, key: str, value: Any) -> tuple[tuple[int, int], ...]:
    """`[[before, after], ...]`: a pair of ints >= 0 per dim."""
    if not isinstance(value, (list, tuple)):
        raise VerificationError(
            f"{op}: attribute '{key}' must be a list of [before, after]; got {value!r}"
        )
    out = []
    for pair in value:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise VerificationError(
                f"{op}: each '{key}' entry must be [before, after]; got {pair!r}"
            )
        before, after = integer(op, key, pair[0]), integer(op, key, pair[1])
        if before < 0 or after < 0:
            raise ShapeError(f"{op}: '{key}' entries must be >= 0; got {[before, after]}")
        out.append((before, after))
    return tuple(out)


def format_name(op: str, key: str, value: Any) -> str:
    """A format's canonical name (`stridec.ir.formats.get_format` refuses an unknown one)."""
    return get_format(value).name


def nonempty_str(op: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise VerificationError(f"{op}: '{key}' must be a non-empty string; got {value!r}")
    return value


def names(op: str, key: str, value: Any) -> tuple[str, ...]:
    """A tuple of non-empty strings (argument names)."""
    if not isinstance(value, (list, tuple)):
        raise VerificationError(f"{op}: '{key}' must be a list of names; got {value!r}")
    return tuple(nonempty_str(op, key, v) for v in value)


def check_fill(op: str, key: str, value: int | float | bool, dtype: DType | None) -> None:
    """A fill `dtype` can hold (`stridec.ir.dtypes.fill_fits`): torch refuses a fill that
    overflows it, and a fill never wraps."""
    if dtype is not None and not fill_fits(value, dtype):
        raise ShapeError(f"{op}: attribute '{key}' = {value!r} does not fit dtype {dtype}")
