"""Physical formats of logical NCHW tensors: NHWC, NCHWx, CHWN4, pitched rows
(docs/design.md#formats).

One `Format` describes them all: an optional **block** of the channel dim and the order of
the physical dims. A blocked format is a strided layout over a **split** iteration space:
with ``c = co*x + ci``, NCHWx is the row-major layout of ``[N, C/x, H, W, x]`` seen from the
logical order ``[N, C/x, x, H, W]``. So packing is one strided copy between two layouts of
the same split sizes, plus a mask for the channels padded up to a multiple of x -- no
division or modulo in the kernel.

For NCHW4 of logical (N, C, H, W) = (2, 6, 3, 5): the split space is (2, 2, 4, 3, 5); the
logical NCHW tensor seen from it has strides (6*3*5, 4*3*5, 3*5, 5, 1) = (90, 60, 15, 5, 1)
and the packed buffer of physical sizes (2, 2, 3, 5, 4) has strides (120, 60, 1, 20, 4) in
the same split order. Channels 6 and 7 do not exist: the mask ``0 <= 4*co + ci < 6`` is
false there, so packing writes the fill value and unpacking skips them.

Formats generalise beyond rank 4 where it makes sense, with dim 1 the channel dim and dims
2.. spatial: NCHW4 of NCDHW is ``[N, C/4, D, H, W, 4]``, NHWC of NCDHW is NDHWC.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from stridec.errors import LayoutError, ShapeError, UnsupportedError, VerificationError
from stridec.ir.affine import MAX_RANK, MaskBound, checked_ints
from stridec.ir.dtypes import as_dtype
from stridec.ir.layout import Layout, contiguous_strides
from stridec.ir.symbols import Sym

__all__ = [
    "CHWN4",
    "FORMATS",
    "NCHW",
    "NCHW4",
    "NCHW32",
    "NCHW64",
    "NHWC",
    "Format",
    "MaskBound",
    "Packing",
    "PitchedRows",
    "get_format",
]

Fill = int | float | bool


@dataclass(frozen=True, slots=True)
class Packing:
    """How to move a tensor between its logical (contiguous) form and a physical format.

    Both directions are one strided copy over the iteration space `space`:

    - pack: ``dest[physical(i)] = src[logical(i)]`` where every bound of `mask` holds, and
      ``dest[physical(i)] = fill`` where one fails. At the masked points `logical`
      addresses no element of the tensor (past its end for padded channels, another row
      for pitched rows), so those reads must not happen.
    - unpack: ``dest[logical(i)] = src[physical(i)]`` for the points where every bound of
      `mask` holds; there the mask is a domain restriction, not a fill. (`Format.unpacking`
      returns this same description.)

    `logical_sizes` is the logical tensor, `physical_sizes` the packed buffer (row-major),
    `channels` the logical C (``None`` for formats without a channel dim).

    >>> p = stridec.get_format("NCHW4").packing((1, 3, 2, 2))
    >>> p.space, p.physical_numel, p.valid((0, 0, 3, 0, 0))
    ((1, 1, 4, 2, 2), 16, False)
    """

    format: str
    logical_sizes: tuple[int, ...]
    space: tuple[int, ...]
    logical: Layout
    physical: Layout
    channels: int | None
    mask: tuple[MaskBound, ...]
    physical_sizes: tuple[int, ...]
    fill: Fill = 0

    @property
    def physical_numel(self) -> int:
        """Elements of the packed buffer (includes padded channels or row padding).

        >>> stridec.get_format("NCHW4").packing((1, 3, 2, 2)).physical_numel   # 1*1*2*2*4
        16
        """
        return math.prod(self.physical_sizes)

    def valid(self, coords: Sequence[int]) -> bool:
        """Whether the point `coords` of `space` is a real element (every bound holds).

        >>> p = stridec.get_format("NCHW4").packing((1, 3, 2, 2))
        >>> p.valid((0, 0, 2, 0, 0)), p.valid((0, 0, 3, 0, 0))   # channel 3 is padding
        (True, False)
        """
        return all(bound.holds(coords) for bound in self.mask)


def _static_dim(what: str, sizes: tuple, dim: int, name: str) -> None:
    """Refuse a symbolic size where the format's padding needs a static one."""
    if isinstance(sizes[dim], Sym):
        raise UnsupportedError(
            f"{what}: the {name} (dim {dim % len(sizes)}) is the symbolic size {sizes[dim]}; "
            f"the padding of this format needs a static one (sizes {sizes})"
        )


def _sizes(logical_sizes: Sequence[int], what: str) -> tuple[int, ...]:
    sizes = checked_ints(logical_sizes, "sizes", what, symbolic=True)
    if any(n < 0 for n in sizes):
        raise ShapeError(f"{what}: sizes must be >= 0; got {sizes}")
    return sizes


@dataclass(frozen=True, slots=True)
class Format:
    """A physical format of a logical tensor whose dim 0 is N, dim 1 is C, dims 2.. spatial.

    `block_dim` is the logical dim split into blocks of `block` (1, the channels, or
    ``None``). `order` is the physical dim order over the split space of a rank-4 logical
    tensor, outermost first: blocked, the space is (N, C/x, x, H, W) = dims 0..4; unblocked,
    (N, C, H, W) = dims 0..3. NCHW4 is order (0, 1, 3, 4, 2) = [N, C/4, H, W, 4]; NHWC is
    (0, 2, 3, 1). For another rank the spatial dims H, W stand for all spatial dims, in
    order. `min_rank` is the lowest logical rank the format makes sense for.

    >>> f = stridec.get_format("NCHW4")
    >>> f.physical_sizes((2, 3, 4, 5))          # C = 3 padded to one block of 4
    (2, 1, 4, 5, 4)
    """

    name: str
    block_dim: int | None
    block: int
    order: tuple[int, ...]
    min_rank: int = 2

    def __post_init__(self) -> None:
        if self.block_dim not in (None, 1):
            raise UnsupportedError(
                f"format {self.name}: block_dim must be 1 (the channels) or None; "
                f"got {self.block_dim!r}"
            )
        if self.block < 1 or (self.block_dim is None and self.block != 1):
            raise LayoutError(
                f"format {self.name}: block must be >= 1, and 1 without a block_dim; "
                f"got block {self.block} with block_dim {self.block_dim!r}"
            )
        object.__setattr__(self, "order", tuple(self.order))
        space_rank = 5 if self.is_blocked else 4
        if sorted(self.order) != list(range(space_rank)):
            raise LayoutError(
                f"format {self.name}: order {self.order} is not a permutation of "
                f"range({space_rank})"
            )
        spatial = [d for d in self.order if d >= space_rank - 2]
        first = self.order.index(spatial[0])
        if spatial != sorted(spatial) or list(self.order[first : first + 2]) != spatial:
            raise LayoutError(
                f"format {self.name}: order {self.order} must keep the spatial dims "
                f"{space_rank - 2}, {space_rank - 1} together and in order"
            )
        if self.min_rank < 2:
            raise LayoutError(f"format {self.name}: min_rank must be >= 2; got {self.min_rank}")

    def __str__(self) -> str:
        return self.name

    @property
    def is_blocked(self) -> bool:
        """Whether the channels are split into blocks (NCHW4, CHWN4: yes; NHWC: no).

        >>> stridec.get_format("NCHW4").is_blocked, stridec.get_format("NHWC").is_blocked
        (True, False)
        """
        return self.block_dim is not None

    @property
    def max_rank(self) -> int:
        """The highest logical rank: the split space must stay within `MAX_RANK`.

        >>> stridec.get_format("NCHW32").max_rank
        24
        """
        return MAX_RANK - 1 if self.is_blocked else MAX_RANK

    def _check(self, logical_sizes: Sequence[int]) -> tuple[int, ...]:
        sizes = _sizes(logical_sizes, self.name)
        if len(sizes) > self.max_rank:
            raise UnsupportedError(
                f"{self.name}: logical rank {len(sizes)} is above the maximum of "
                f"{self.max_rank} for this format (sizes {sizes})"
            )
        if len(sizes) < self.min_rank:
            dims = "N, C" + ", spatial..." * (self.min_rank > 2)
            raise ShapeError(
                f"{self.name}: expected logical sizes of rank {self.min_rank} to "
                f"{self.max_rank} ({dims}); got sizes {sizes}"
            )
        return sizes

    def split_order(self, rank: int) -> tuple[int, ...]:
        """`order` for a logical tensor of `rank`: the spatial run stands for all its
        spatial dims. NCHW4 at rank 5 (NCDHW): (0, 1, 3, 4, 5, 2).

        >>> stridec.get_format("NCHW4").split_order(4)
        (0, 1, 3, 4, 2)
        """
        lead = 3 if self.is_blocked else 2
        spatial = tuple(range(lead, lead + rank - 2))
        out: list[int] = []
        for d in self.order:
            if d < lead:
                out.append(d)
            elif d == lead:
                out.extend(spatial)
        return tuple(out)

    def split_sizes(self, logical_sizes: Sequence[int]) -> tuple[int, ...]:
        """The split iteration space: C replaced by (ceil(C/x), x) when blocked.

        >>> stridec.get_format("NCHW4").split_sizes((2, 6, 4, 5))
        (2, 2, 4, 4, 5)
        """
        sizes = self._check(logical_sizes)
        if not self.is_blocked:
            return sizes
        _static_dim(self.name, sizes, 1, "channel count C")
        x = self.block
        return (sizes[0], -(-sizes[1] // x), x) + sizes[2:]

    def physical_sizes(self, logical_sizes: Sequence[int], dtype: object = None) -> tuple[int, ...]:
        """Sizes of the packed buffer: NCHW4 of (N, C, H, W) is (N, ceil(C/4), H, W, 4),
        CHWN4 is (ceil(C/4), H, W, N, 4), NHWC is (N, H, W, C). `dtype` is not needed.

        >>> stridec.get_format("CHWN4").physical_sizes((2, 5, 4, 4))
        (2, 4, 4, 2, 4)
        """
        if dtype is not None:
            as_dtype(dtype)
        space = self.split_sizes(logical_sizes)
        return tuple(space[d] for d in self.split_order(len(logical_sizes)))

    def packing(
        self, logical_sizes: Sequence[int], dtype: object = None, fill: Fill = 0
    ) -> Packing:
        """The strided copy that packs a contiguous logical tensor into this format.

        >>> p = stridec.get_format("NCHW4").packing((2, 3, 4, 5))
        >>> p.space, p.physical_numel
        ((2, 1, 4, 4, 5), 160)
        """
        if dtype is not None:
            as_dtype(dtype)
        sizes = self._check(logical_sizes)
        space = self.split_sizes(sizes)
        order = self.split_order(len(sizes))
        physical_sizes = tuple(space[d] for d in order)

        strides = contiguous_strides(sizes)
        mask: tuple[MaskBound, ...] = ()
        if self.is_blocked:
            x, channels = self.block, sizes[1]
            # c = co*x + ci: co steps over x channels, ci over one.
            strides = (strides[0], x * strides[1], strides[1]) + strides[2:]
            if channels % x != 0:
                coeffs = [0] * len(space)
                coeffs[1], coeffs[2] = x, 1
                mask = (MaskBound(tuple(coeffs), 0, channels),)

        # The row-major strides of the physical buffer, each moved to the split dim it
        # belongs to.
        physical_strides = [0] * len(space)
        for d, s in zip(order, contiguous_strides(physical_sizes), strict=True):
            physical_strides[d] = s

        return Packing(
            format=self.name,
            logical_sizes=sizes,
            space=space,
            logical=Layout(space, strides),
            physical=Layout(space, tuple(physical_strides)),
            channels=sizes[1],
            mask=mask,
            physical_sizes=physical_sizes,
            fill=fill,
        )

    def unpacking(self, logical_sizes: Sequence[int], dtype: object = None) -> Packing:
        """The same description as `packing`, read the other way: copy `physical` to
        `logical` over `space`, only where every bound of `mask` holds (no fill).

        >>> u = stridec.get_format("NCHW4").unpacking((2, 3, 4, 5))
        >>> u.space
        (2, 1, 4, 4, 5)
        """
        return self.packing(logical_sizes, dtype)

    @staticmethod
    def pitched(align_bytes: int) -> PitchedRows:
        """Pitched rows: each last-dim row padded to a multiple of `align_bytes`.

        >>> stridec.Format.pitched(64).physical_sizes((2, 3), "float32")   # rows of 16 floats
        (2, 16)
        """
        return PitchedRows(align_bytes)


@dataclass(frozen=True, slots=True)
class PitchedRows:
    """Rows of the last dim padded so each row is a multiple of `align_bytes` bytes.

    DirectML's padding example: a 3x3 float32 tensor with 20-byte rows has a pitch of
    20 / 4 = 5 elements and strides (5, 1). Any rank >= 1; `dtype` is required, as the
    pitch depends on the element size.

    Packing iterates over the physical sizes (the last dim runs over the whole pitch), so
    the padding elements get the fill value; the mask ``0 <= w < W`` marks the real ones.
    The physical buffer read as the logical tensor is simply `layout`.

    >>> f = stridec.get_format("pitched<64>")
    >>> f.name, f.physical_sizes((2, 3), "float32")
    ('pitched<64>', (2, 16))
    """

    align_bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.align_bytes, bool) or not isinstance(self.align_bytes, int):
            raise VerificationError(
                f"pitched rows: align_bytes must be an int; got {self.align_bytes!r}"
            )
        if self.align_bytes < 1:
            raise LayoutError(f"pitched rows: align_bytes must be >= 1; got {self.align_bytes}")

    @property
    def name(self) -> str:
        """The format's name, as `get_format` takes it: `pitched<align_bytes>`.

        >>> stridec.Format.pitched(64).name
        'pitched<64>'
        """
        return f"pitched<{self.align_bytes}>"

    def __str__(self) -> str:
        return self.name

    def _check(self, logical_sizes: Sequence[int], dtype: object) -> tuple[tuple[int, ...], int]:
        sizes = _sizes(logical_sizes, self.name)
        if len(sizes) > MAX_RANK:
            raise UnsupportedError(
                f"{self.name}: rank {len(sizes)} is above the supported maximum of "
                f"{MAX_RANK} (sizes {sizes})"
            )
        if not sizes:
            raise ShapeError(f"{self.name}: expected logical sizes of rank >= 1; got sizes ()")
        if dtype is None:
            raise ShapeError(
                f"{self.name}: a dtype is needed to pad rows of sizes {sizes} to "
                f"{self.align_bytes} bytes"
            )
        return sizes, as_dtype(dtype).itemsize

    def pitch(self, logical_sizes: Sequence[int], dtype: object) -> int:
        """Elements per row: the least p >= W with p*itemsize a multiple of align_bytes.

        >>> stridec.get_format("pitched<16>").pitch((2, 3), "float16")   # 8 halves = 16 bytes
        8
        """
        sizes, itemsize = self._check(logical_sizes, dtype)
        _static_dim(self.name, sizes, -1, "row length")
        quantum = self.align_bytes // math.gcd(self.align_bytes, itemsize)
        return -(-sizes[-1] // quantum) * quantum

    def physical_sizes(self, logical_sizes: Sequence[int], dtype: object = None) -> tuple[int, ...]:
        """The logical sizes with the last one replaced by the pitch.

        >>> stridec.get_format("pitched<16>").physical_sizes((2, 3), "float32")
        (2, 4)
        """
        sizes, _ = self._check(logical_sizes, dtype)
        return sizes[:-1] + (self.pitch(sizes, dtype),)

    def layout(self, logical_sizes: Sequence[int], dtype: object = None) -> Layout:
        """The packed buffer seen as the logical tensor: `Layout.padded` by the pitch.

        >>> stridec.get_format("pitched<16>").layout((2, 3), "float32")
        Layout(sizes=(2, 3), strides=(4, 1), offset=0)
        """
        sizes, _ = self._check(logical_sizes, dtype)
        return Layout.padded(sizes, self.pitch(sizes, dtype))

    def packing(
        self, logical_sizes: Sequence[int], dtype: object = None, fill: Fill = 0
    ) -> Packing:
        """The strided copy that writes a contiguous tensor into pitched rows (`Format.packing`);
        the padding past each row holds `fill`.

        >>> stridec.get_format("pitched<16>").packing((2, 3), "float32").physical_numel
        8
        """
        sizes, _ = self._check(logical_sizes, dtype)
        space = self.physical_sizes(sizes, dtype)
        mask: tuple[MaskBound, ...] = ()
        if space[-1] != sizes[-1]:
            mask = (MaskBound((0,) * (len(sizes) - 1) + (1,), 0, sizes[-1]),)
        return Packing(
            format=self.name,
            logical_sizes=sizes,
            space=space,
            logical=Layout(space, contiguous_strides(sizes)),
            physical=Layout.contiguous(space),
            channels=None,
            mask=mask,
            physical_sizes=space,
            fill=fill,
        )

    def unpacking(self, logical_sizes: Sequence[int], dtype: object = None) -> Packing:
        """As `Format.unpacking`: the packing read backwards, restricted to the mask.

        >>> stridec.get_format("pitched<16>").unpacking((2, 3), "float32").space
        (2, 4)
        """
        return self.packing(logical_sizes, dtype)


NCHW = Format("NCHW", None, 1, (0, 1, 2, 3))
NHWC = Format("NHWC", None, 1, (0, 2, 3, 1), min_rank=3)
NCHW4 = Format("NCHW4", 1, 4, (0, 1, 3, 4, 2))
NCHW32 = Format("NCHW32", 1, 32, (0, 1, 3, 4, 2))
NCHW64 = Format("NCHW64", 1, 64, (0, 1, 3, 4, 2))
CHWN4 = Format("CHWN4", 1, 4, (1, 3, 4, 0, 2))

FORMATS: dict[str, Format] = {f.name: f for f in (NCHW, NHWC, NCHW4, NCHW32, NCHW64, CHWN4)}

_PITCHED = re.compile(r"pitched<(\d+)>")


def get_format(name: str) -> Format | PitchedRows:
    """The format called `name`: a key of `FORMATS`, or ``pitched<align_bytes>``.

    >>> stridec.get_format("NHWC").physical_sizes((2, 3, 4, 5))
    (2, 4, 5, 3)
    >>> stridec.get_format("pitched<32>")
    PitchedRows(align_bytes=32)
    """
    if isinstance(name, str):
        found = FORMATS.get(name)
        if found is not None:
            return found
        match = _PITCHED.fullmatch(name)
        if match is not None and int(match.group(1)) >= 1:
            return PitchedRows(int(match.group(1)))
    names = ", ".join([*FORMATS, "pitched<align_bytes>"])
    raise UnsupportedError(f"format: expected one of {names}; got {name!r}")
