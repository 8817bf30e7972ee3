"""Affine index arithmetic, once for the IR, the passes and code generation.

An iteration space is a box of integer points `0 <= i_k < sizes_k` (or, more generally,
`start_k <= i_k < stop_k`: a `Box`). A strided map sends a point to
`offset + Σ i_k·strides_k`; a `MaskBound` keeps the points where a linear form lies in a
half-open range. Everything here is plain integer arithmetic on tuples: no torch.

    address_span((2, 3), (3, -1), 4) == (2, 7)     # 4 + 0·3 + 2·(-1) = 2 … 4 + 1·3 + 0 = 7
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stridec.errors import LayoutError, VerificationError
from stridec.ir.symbols import (
    Sym,
    exact_div,
    floor_div,
    generic_value,
    is_static,
    statically_true,
)

__all__ = [
    "MAX_RANK",
    "Box",
    "MaskBound",
    "Shaped",
    "as_mask",
    "checked_int",
    "checked_ints",
    "linear_span",
    "address_span",
    "boxes_disjoint",
    "box_inside",
    "guillotine",
    "box_within",
    "merge_dims",
    "StridedInverse",
    "invert_strided",
    "sign_of",
]

# The highest rank of a tensor, a layout or an iteration space: torch's CUDA kernels index
# at most 25 dims (OffsetCalculator's MAX_DIMS); real code goes to 18 (torch's view tests).
MAX_RANK = 25

# A box of points, `((start_0, stop_0), …)`: `start_k <= i_k < stop_k` in each dim.
Box = tuple[tuple[int, int], ...]


class Shaped:
    """Mixin of a value with `sizes` (a layout, a copy's iteration space): its rank and
    element count."""

    __slots__ = ()
    sizes: tuple[int, ...]

    @property
    def rank(self) -> int:
        """The number of dims.

        >>> Layout.contiguous((2, 3, 4)).rank
        3
        """
        return len(self.sizes)

    @property
    def numel(self) -> int:
        """The number of elements: the product of the sizes.

        >>> Layout.contiguous((2, 3, 4)).numel
        24
        """
        return math.prod(self.sizes)


def checked_int(value: Any, what: str, where: str = "mask") -> int:
    """`value` as an int (numpy integers too; not a Python or numpy bool), or
    `VerificationError` "<where>: <what> must be an int; got …": a value of the wrong type
    is a `VerificationError` wherever it is given (docs/errors.md)."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise VerificationError(f"{where}: {what} must be an int; got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise VerificationError(f"{where}: {what} must be an int; got {value!r}") from None


def checked_ints(values: Any, what: str, where: str, symbolic: bool = False) -> tuple[Any, ...]:
    """`values` as a tuple of ints (`checked_int` each; with `symbolic`, symbolic sizes
    too), or `VerificationError` "<where>: <what> must be a sequence of ints; got …"."""
    if type(values) is tuple and all(type(v) is int for v in values):
        return values  # already what it would become (most specs are built from specs)
    if isinstance(values, (str, bytes)):
        items = None
    else:
        try:
            items = tuple(values)
        except TypeError:
            items = None
    if items is None:
        raise VerificationError(f"{where}: {what} must be a sequence of ints; got {values!r}")
    return tuple(
        v if symbolic and isinstance(v, Sym) else checked_int(v, what, where) for v in items
    )


def _int_or_sym(value: Any, what: str) -> Any:
    """`checked_int`, a symbolic size (`stridec.ir.symbols.Sym`) passed as it is: a copy
    over symbolic sizes has symbolic mask coefficients and bounds."""
    return value if isinstance(value, Sym) else checked_int(value, what)


@dataclass(frozen=True, slots=True)
class MaskBound:
    """Valid where ``lo <= Σ coeffs[k]·i[k] < hi`` over the coordinates ``i``.

    Padded channels of NCHW4 with C = 6 over the space (N, C/4, 4, H, W) are the points
    where ``MaskBound((0, 4, 1, 0, 0), 0, 6)`` fails: co = 1, ci = 2 gives 4·1 + 2 = 6.

    >>> from stridec import MaskBound
    >>> m = MaskBound((4, 1), 0, 3)   # 0 <= 4*co + ci < 3: NCHW4's real channels, C = 3
    >>> m.holds((0, 2)), m.holds((0, 3))
    (True, False)
    """

    coeffs: tuple[int, ...]
    lo: int
    hi: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "coeffs",
                           checked_ints(self.coeffs, "coeffs", "mask", symbolic=True))
        object.__setattr__(self, "lo", _int_or_sym(self.lo, "lo"))
        object.__setattr__(self, "hi", _int_or_sym(self.hi, "hi"))

    def value(self, coords: Sequence[int]) -> int:
        """The form's value at `coords`: Σ coeffs[k]·coords[k].

        >>> from stridec import MaskBound
        >>> MaskBound((4, 1), 0, 3).value((1, 2))   # 4*1 + 1*2
        6
        """
        if len(coords) != len(self.coeffs):
            raise LayoutError(
                f"mask: coords {tuple(coords)} have rank {len(coords)}; the bound has "
                f"{len(self.coeffs)} coefficients {self.coeffs}"
            )
        return sum(a * i for a, i in zip(self.coeffs, coords, strict=True))

    def holds(self, coords: Sequence[int]) -> bool:
        """Whether `lo <= value(coords) < hi`.

        >>> from stridec import MaskBound
        >>> MaskBound((4, 1), 0, 3).holds((0, 2))
        True
        """
        return self.lo <= self.value(coords) < self.hi

    def span(self, box: Box, skip: int | None = None) -> tuple[int, int]:
        """Smallest and largest value of the form over a non-empty `box` (dim `skip`
        left out): coefficient 3 over [1, 4) adds from 3 to 9.

        >>> from stridec import MaskBound
        >>> MaskBound((3,), 0, 10).span(((1, 4),))
        (3, 9)
        """
        low = high = 0
        for k, (c, (start, stop)) in enumerate(zip(self.coeffs, box, strict=True)):
            if k != skip and c:
                a, b = c * start, c * (stop - 1)
                if sign_of(c) == -1:  # the box is not empty: stop - 1 >= start
                    a, b = b, a
                low, high = low + a, high + b
        return low, high

    def shifted(self, const: int) -> MaskBound:
        """The bound on the form without `const`: `lo <= const + Σ … < hi` is
        `lo - const <= Σ … < hi - const`.

        >>> from stridec import MaskBound
        >>> MaskBound((1,), 2, 5).shifted(2)
        MaskBound(coeffs=(1,), lo=0, hi=3)
        """
        return MaskBound(self.coeffs, self.lo - const, self.hi - const)

    def __str__(self) -> str:
        terms = [(f"i{k}" if a == 1 else f"{a}*i{k}") for k, a in enumerate(self.coeffs) if a != 0]
        return f"{self.lo} <= {' + '.join(terms) or '0'} < {self.hi}"


def as_mask(m: Any) -> MaskBound:
    """`m` as a `MaskBound`: any object with `.coeffs`, `.lo` and `.hi`, or a
    `(coeffs, lo, hi)` triple."""
    if isinstance(m, MaskBound):
        return m
    if isinstance(m, tuple) and len(m) == 3:
        return MaskBound(*m)
    try:
        return MaskBound(tuple(m.coeffs), m.lo, m.hi)
    except AttributeError:
        raise LayoutError(f"mask: expected .coeffs, .lo and .hi; got {m!r}") from None


def linear_span(sizes: Sequence[int], coeffs: Sequence[int]) -> tuple[int, int]:
    """Smallest and largest `Σ coeffs[k]·i_k` over the box `0 <= i_k < sizes_k` (non-empty).

    E.g. sizes (2, 4), coeffs (3, -1): min 0·3 + 3·(-1) = -3, max 1·3 + 0·(-1) = 3.
    """
    low = sum(min(0, c * (n - 1)) for n, c in zip(sizes, coeffs, strict=True))
    high = sum(max(0, c * (n - 1)) for n, c in zip(sizes, coeffs, strict=True))
    return low, high


def address_span(sizes: Sequence[int], strides: Sequence[int], offset: int) -> tuple[int, int]:
    """Smallest and largest address `offset + Σ i_k·strides_k` over a non-empty box."""
    low, high = linear_span(sizes, strides)
    return offset + low, offset + high


def merge_dims(
    sizes: Sequence[int], forms: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """The one stride-merging rule: drop size-1 dims (their coordinate is always 0), and
    merge neighbouring dims `k, k+1` where every linear form (strides, mask coefficients)
    has `form_k == sizes_{k+1}·form_{k+1}`: then `i_k·form_k + i_{k+1}·form_{k+1}` is
    `j·form_{k+1}` with `j = i_k·sizes_{k+1} + i_{k+1}`, one coordinate of the merged dim.

    Sizes (4, 8) with strides (8, 1) and (16, 2): 8 == 8·1 and 16 == 8·2, so one dim of
    32 with strides (1,) and (2,). The space must not be empty.
    """
    out_sizes: list[int] = []
    out_forms: list[list[int]] = [[] for _ in forms]
    for k, n in enumerate(sizes):
        if n == 1:
            continue
        if out_sizes and all(out[-1] == n * f[k] for out, f in zip(out_forms, forms, strict=True)):
            out_sizes[-1] *= n
            for out, f in zip(out_forms, forms, strict=True):
                out[-1] = f[k]
            continue
        out_sizes.append(n)
        for out, f in zip(out_forms, forms, strict=True):
            out.append(f[k])
    return tuple(out_sizes), [tuple(f) for f in out_forms]


@dataclass(frozen=True, slots=True)
class StridedInverse:
    """The inverse of an injective strided map (`invert_strided`).

    `low` is the map's lowest address; `dims` holds (dim, |stride|, size, flipped) of the
    dims that may move (size not 1), largest stride first. A flipped dim (negative
    stride) is decoded as the unflipped one and counted back from its end. Over symbolic
    sizes every number may be an expression, and each answer holds for every value of
    the symbols.
    """

    rank: int
    low: int
    dims: tuple[tuple[int, int, int, bool], ...]
    symbolic: bool = False

    def coords_of(self, address: int, checked: bool = True) -> tuple[int, ...] | None:
        """The coordinates the map sends to `address`, or ``None`` if it never does.

        With ``checked=False`` the digits are not held to their dims' sizes: the point
        returned is one the map (extended past its sizes) sends to `address`, for a
        caller that bounds the points it uses itself (`compose`'s walks). Over symbolic
        sizes, a digit is the floor quotient by a constant stride, or by a symbolic one
        an exact quotient or a constant one its remainder proves (`_constant_quotient`:
        N + 3 at stride N + 2 is 1, remainder 1); ``None`` where neither is proven."""
        rest = address - self.low
        if type(rest) is int and not self.symbolic:
            if rest < 0:
                return None
            coords = [0] * self.rank
            for m, stride, size, flipped in self.dims:
                i, rest = divmod(rest, stride)
                if i >= size and checked:
                    return None
                coords[m] = size - 1 - i if flipped else i
            return tuple(coords) if rest == 0 else None
        return self._symbolic_coords(rest, checked)

    def _symbolic_coords(self, rest: Any, checked: bool) -> tuple[Any, ...] | None:
        if not statically_true(rest >= 0):
            return None
        coords: list[Any] = [0] * self.rank
        for m, stride, size, flipped in self.dims:
            if isinstance(stride, Sym):
                i = exact_div(rest, stride)
                if i is None:
                    i = _constant_quotient(rest, stride)
                    if i is None:
                        return None
            else:
                i = floor_div(rest, stride)
            rest = rest - i * stride
            if not statically_true(i >= 0):
                return None
            if checked and not statically_true(i < size):
                return None
            coords[m] = size - 1 - i if flipped else i
        return tuple(coords) if rest == 0 else None


def _constant_quotient(rest: Any, stride: Sym) -> int | None:
    """The floor quotient of `rest` by a symbolic `stride` where it is one integer for
    every value of the symbols, proven by its remainder: `0 <= rest - q·stride < stride`.
    The row N + 3 of a (9, N + 2) buffer is q = 1, remainder 1 (the candidate is the
    quotient at large values of the symbols, `generic_value`); None where that does not
    prove."""
    at = generic_value(stride)
    if at <= 0:
        return None
    q = generic_value(rest) // at
    remainder = rest - q * stride
    if statically_true(remainder >= 0) and statically_true(remainder < stride):
        return q
    return None


def sign_of(x: Any) -> int | None:
    """1, -1 or 0 for a number whose sign holds for every value of its symbols; None
    where it depends on them."""
    if not isinstance(x, Sym):
        return (x > 0) - (x < 0)
    if statically_true(x > 0):
        return 1
    if statically_true(x < 0):
        return -1
    return None


def invert_strided(
    sizes: Sequence[int], strides: Sequence[int], offset: int
) -> StridedInverse | None:
    """The inverse of `i ↦ offset + Σ i_k·strides_k`, or ``None`` unless the map provably
    sends each coordinate to its own address (and the space is not empty).

    The proof is nesting: sorted by |stride|, every stride exceeds the reach of the dims
    inside it. Rows of 3 at pitch 5, strides (15, 5, 1) over sizes (2, 3, 3), nest:
    1 > 0, 5 > (3-1)·1 = 2, 15 > 2 + (3-1)·5 = 12. Permuted and flipped maps nest too; a
    broadcast dim (stride 0) never does. Over symbolic sizes each stride's sign and each
    nesting step must hold for every value of the symbols: (N, 4) at strides (4, 1)
    nests (4 > 3 whatever N is); a symbolic dim counts as moving (N may exceed 1).
    """
    if any(n == 0 for n in sizes):
        return None
    if not is_static((sizes, strides, offset)):
        return _invert_symbolic(sizes, strides, offset)
    low = offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True) if s < 0)
    moving = sorted((abs(s), m) for m, (n, s) in enumerate(zip(sizes, strides, strict=True))
                    if n > 1)
    reach = 0
    for stride, m in moving:
        if stride <= reach:
            return None
        reach += (sizes[m] - 1) * stride
    dims = tuple((m, stride, sizes[m], strides[m] < 0) for stride, m in reversed(moving))
    return StridedInverse(len(sizes), low, dims)


def _invert_symbolic(
    sizes: Sequence[Any], strides: Sequence[Any], offset: Any
) -> StridedInverse | None:
    low = offset
    moving = []
    for m, (n, s) in enumerate(zip(sizes, strides, strict=True)):
        if n == 1:
            continue
        sign = sign_of(s)
        if not sign:  # a broadcast dim, or a stride of either sign
            return None
        if sign < 0:
            low = low + (n - 1) * s
        moving.append((generic_value(abs(s) if sign > 0 else -s), m, s if sign > 0 else -s))
    moving.sort(key=lambda entry: entry[:2])
    reach: Any = 0
    for _, m, stride in moving:
        if not statically_true(stride > reach):
            return None
        reach = reach + (sizes[m] - 1) * stride
    dims = tuple(
        (m, stride, sizes[m], sign_of(strides[m]) == -1) for _, m, stride in reversed(moving)
    )
    return StridedInverse(len(sizes), low, dims, symbolic=True)


def boxes_disjoint(a: Box, b: Box) -> bool:
    """Boxes of one space share no point: in some dim their ranges do not meet (over
    symbolic bounds, for every value of the symbols: rows [0, N) and [N, N + M))."""
    if is_static((a, b)):
        return any(hi0 <= lo1 or hi1 <= lo0
                   for (lo0, hi0), (lo1, hi1) in zip(a, b, strict=True))
    return any(statically_true(hi0 <= lo1) or statically_true(hi1 <= lo0)
               for (lo0, hi0), (lo1, hi1) in zip(a, b, strict=True))


def box_inside(a: Box, b: Box) -> bool:
    """Every point of box `a` is in box `b` (for every value of the symbols)."""
    return all(statically_true(lo1 <= lo0) and statically_true(hi0 <= hi1)
               for (lo0, hi0), (lo1, hi1) in zip(a, b, strict=True))


def box_within(
    sizes: Sequence[int],
    strides: Sequence[int],
    offset: int,
    part_sizes: Sequence[int],
    part_strides: Sequence[int],
    part_offset: int,
) -> Box | None:
    """The box of the map `(sizes, strides, offset)`'s coordinates that the map
    `(part_sizes, part_strides, part_offset)` addresses dim for dim, or ``None``.

    The part must have the whole's rank and strides on every dim of size > 1 (dims of size
    1 are fixed at their start), the whole must send each coordinate to its own address
    (`invert_strided`), and the box must lie inside it. Columns 1..3 of a contiguous (2, 7):
    part sizes (2, 3), strides (7, 1), offset 1 = 0·7 + 1·1, so the box ((0, 2), (1, 4)).
    Over symbolic sizes, for every value of the symbols: rows N.. of a contiguous
    (N + M, 6), offset 6·N, are the box ((N, N + M), (0, 6)).
    """
    if len(part_sizes) != len(sizes) or math.prod(part_sizes) == 0:
        return None
    pairs = zip(part_sizes, part_strides, strides, strict=True)
    if any(n != 1 and s != t for n, s, t in pairs):
        return None
    inverse = invert_strided(sizes, strides, offset)
    start = None if inverse is None else inverse.coords_of(part_offset)
    if start is None or not all(
        statically_true(b + n <= m) for b, n, m in zip(start, part_sizes, sizes, strict=True)
    ):
        return None
    return tuple((b, b + n) for b, n in zip(start, part_sizes, strict=True))


def guillotine(
    region: Box, members: list[int], boxes: Sequence[Box]
) -> list[tuple[Box, int]] | None:
    """Cut `region` by planes, recursively, until each part holds one of the boxes of
    `members`: the first dim and place (a box's start) that leaves every box wholly on
    one side, with boxes on both. None when some set of boxes admits no such cut (two
    boxes that meet, or a pinwheel). Any such cut will do: each side is a subset of a set
    the planes separate, and the same planes separate a subset."""
    if len(members) == 1:
        return [(region, members[0])]
    for k in range(len(region)):
        for cut in sorted({boxes[i][k][0] for i in members}):
            below = [i for i in members if boxes[i][k][1] <= cut]
            above = [i for i in members if boxes[i][k][0] >= cut]
            if not below or not above or len(below) + len(above) != len(members):
                continue
            low = region[:k] + ((region[k][0], cut),) + region[k + 1 :]
            high = region[:k] + ((cut, region[k][1]),) + region[k + 1 :]
            first = guillotine(low, below, boxes)
            second = guillotine(high, above, boxes)
            if first is None or second is None:
                return None
            return first + second
    return None
