"""Format tests: the packing description, run as a strided copy written with torch.as_strided,
must build exactly what torch's own construction (pad, reshape, permute) builds, and the
reverse copy must give the input back."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from stridec.errors import (
    LayoutError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir.affine import MAX_RANK
from stridec.ir.formats import (
    CHWN4,
    FORMATS,
    NCHW,
    NCHW4,
    NHWC,
    Format,
    MaskBound,
    Packing,
    PitchedRows,
    get_format,
)
from stridec.ir.layout import Layout

CHANNELS = (3, 4, 5, 32, 64, 70)


# -- the packing description, executed with torch -------------------------------------------


def mask_tensor(packing: Packing) -> torch.Tensor:
    """Where every bound of the mask holds, over the iteration space."""
    valid = torch.ones(packing.space, dtype=torch.bool)
    rank = len(packing.space)
    for bound in packing.mask:
        value = torch.zeros(packing.space, dtype=torch.int64)
        for k, (n, a) in enumerate(zip(packing.space, bound.coeffs, strict=True)):
            shape = [1] * rank
            shape[k] = n
            value = value + (a * torch.arange(n)).reshape(shape)
        valid &= (bound.lo <= value) & (value < bound.hi)
    return valid


def reach(layout: Layout) -> int:
    return layout.min_storage_size()


def pack(x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """The reference pack: read `logical` (over a zero-extended copy of x, as the masked
    points reach past it), fill where the mask fails, write through `physical`."""
    assert x.is_contiguous() and tuple(x.shape) == packing.logical_sizes
    source = torch.zeros(max(reach(packing.logical), x.numel()), dtype=x.dtype)
    source[: x.numel()] = x.flatten()
    values = torch.as_strided(
        source, packing.space, packing.logical.strides, packing.logical.offset
    )
    values = torch.where(mask_tensor(packing), values, torch.tensor(packing.fill, dtype=x.dtype))
    out = torch.empty(packing.physical_numel, dtype=x.dtype)
    assert reach(packing.physical) == packing.physical_numel  # the copy covers the buffer
    torch.as_strided(out, packing.space, packing.physical.strides, packing.physical.offset).copy_(
        values
    )
    return out.view(packing.physical_sizes)


def unpack(packed: torch.Tensor, packing: Packing) -> torch.Tensor:
    """The reference unpack: the reverse copy, restricted to where the mask holds."""
    src = torch.as_strided(
        packed.flatten(), packing.space, packing.physical.strides, packing.physical.offset
    )
    valid = mask_tensor(packing)
    dest = torch.full((max(reach(packing.logical), 1),), -1, dtype=packed.dtype)
    index = torch.as_strided(
        torch.arange(dest.numel()), packing.space, packing.logical.strides, packing.logical.offset
    )
    dest[index[valid]] = src[valid]
    numel = math.prod(packing.logical_sizes)
    return dest[:numel].view(packing.logical_sizes)


# -- torch's own constructions -----------------------------------------------------------------


def pad_channels(x: torch.Tensor, block: int, fill: float) -> torch.Tensor:
    c = x.shape[1]
    pad = -c % block
    if pad == 0:
        return x
    filler = torch.full((x.shape[0], pad, *x.shape[2:]), fill, dtype=x.dtype)
    return torch.cat([x, filler], dim=1)


def torch_pack(x: torch.Tensor, name: str, fill: float = 0) -> torch.Tensor:
    """NCHWx: pad C, reshape (N, C/x, x, H, W), permute(0, 1, 3, 4, 2); CHWN4 puts
    (C/4, H, W, N, 4); NHWC is permute(0, 2, 3, 1).contiguous(). Any spatial rank."""
    rank = x.dim()
    spatial = list(range(3, rank + 1))
    if name == "NCHW":
        return x.contiguous()
    if name == "NHWC":
        return x.permute(0, *range(2, rank), 1).contiguous()
    block = FORMATS[name].block
    padded = pad_channels(x, block, fill)
    split = padded.reshape(x.shape[0], padded.shape[1] // block, block, *x.shape[2:])
    if name == "CHWN4":
        return split.permute(1, *spatial, 0, 2).contiguous()
    return split.permute(0, 1, *spatial, 2).contiguous()


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("channels", CHANNELS)
def test_pack_matches_torch_and_unpack_round_trips(name: str, channels: int) -> None:
    fmt = get_format(name)
    sizes = (2, channels, 3, 2)
    x = torch.arange(math.prod(sizes), dtype=torch.int64).reshape(sizes) + 1
    packing = fmt.packing(sizes, fill=-7)
    expected = torch_pack(x, name, fill=-7)
    assert packing.physical_sizes == tuple(expected.shape) == fmt.physical_sizes(sizes)
    packed = pack(x, packing)
    assert torch.equal(packed, expected)
    assert torch.equal(unpack(packed, fmt.unpacking(sizes)), x)
    assert packing.channels == channels
    assert packing.physical.is_packed() and not packing.physical.may_overlap()


@pytest.mark.parametrize("name", ["NHWC", "NCHW4", "NCHW32", "CHWN4"])
@pytest.mark.parametrize("sizes", [(2, 5, 2, 3, 2), (3, 6, 4), (2, 70, 1, 1, 1, 2)])
def test_formats_generalise_to_other_ranks(name: str, sizes: tuple[int, ...]) -> None:
    fmt = FORMATS[name]
    x = torch.arange(math.prod(sizes), dtype=torch.float32).reshape(sizes)
    packing = fmt.packing(sizes)
    expected = torch_pack(x, name)
    assert torch.equal(pack(x, packing), expected)
    assert torch.equal(unpack(expected, packing), x)


@pytest.mark.parametrize("name", ["NCHW4", "CHWN4", "NCHW"])
def test_rank_two_blocked_and_plain(name: str) -> None:
    sizes = (3, 5)
    x = torch.arange(15).reshape(sizes)
    packing = FORMATS[name].packing(sizes)
    assert torch.equal(pack(x, packing), torch_pack(x, name))


def test_empty_logical_tensors_pack_to_empty_or_fill_only() -> None:
    # N = 0: nothing to pack. C = 0: ceil(0/4) = 0 blocks, nothing either.
    for sizes in [(0, 5, 2, 2), (2, 0, 2, 2), (2, 5, 0, 2)]:
        packing = NCHW4.packing(sizes)
        assert packing.physical_numel == 0
        x = torch.empty(sizes)
        assert pack(x, packing).shape == torch_pack(x, "NCHW4").shape


def test_nchw4_worked_example() -> None:
    # NCHW4 of (N, C, H, W) = (2, 6, 3, 5): split space (N, C/4, 4, H, W) = (2, 2, 4, 3, 5).
    packing = NCHW4.packing((2, 6, 3, 5))
    assert packing.space == (2, 2, 4, 3, 5)
    # Contiguous NCHW seen from it: (C*H*W, 4*H*W, H*W, W, 1) = (90, 60, 15, 5, 1).
    assert packing.logical == Layout((2, 2, 4, 3, 5), (90, 60, 15, 5, 1))
    # Physical (2, 2, 3, 5, 4) row-major is (120, 60, 20, 4, 1); in split order N, C/4,
    # 4, H, W that is (120, 60, 1, 20, 4).
    assert packing.physical_sizes == (2, 2, 3, 5, 4)
    assert packing.physical == Layout((2, 2, 4, 3, 5), (120, 60, 1, 20, 4))
    # Channels 6, 7 do not exist: 4*co + ci < 6 fails at co = 1, ci = 2: 4*1 + 2 = 6.
    assert packing.mask == (MaskBound((0, 4, 1, 0, 0), 0, 6),)
    assert str(packing.mask[0]) == "0 <= 4*i1 + i2 < 6"
    assert packing.valid((0, 1, 1, 0, 0)) and not packing.valid((0, 1, 2, 0, 0))
    # Element (n=1, c=5, h=2, w=3) is co = 1, ci = 1: logical 90 + 60 + 15 + 2*5 + 3 = 178,
    # physical 120 + 60 + 1 + 2*20 + 3*4 = 233.
    coords = (1, 1, 1, 2, 3)
    assert (
        packing.logical.index_of(coords)
        == 178
        == Layout.contiguous((2, 6, 3, 5)).index_of((1, 5, 2, 3))
    )
    assert packing.physical.index_of(coords) == 233
    assert NCHW4.packing((2, 8, 3, 5)).mask == ()


def test_physical_sizes_of_each_format() -> None:
    sizes = (2, 6, 3, 5)
    assert NCHW.physical_sizes(sizes) == (2, 6, 3, 5)
    assert NHWC.physical_sizes(sizes) == (2, 3, 5, 6)
    assert NCHW4.physical_sizes(sizes) == (2, 2, 3, 5, 4)
    assert FORMATS["NCHW32"].physical_sizes(sizes) == (2, 1, 3, 5, 32)
    assert FORMATS["NCHW64"].physical_sizes(sizes, "int8") == (2, 1, 3, 5, 64)
    assert CHWN4.physical_sizes(sizes) == (2, 3, 5, 2, 4)
    # NCDHW: NCHWx is (N, C/x, D, H, W, x).
    assert NCHW4.physical_sizes((2, 6, 7, 3, 5)) == (2, 2, 7, 3, 5, 4)
    assert NCHW4.split_order(5) == (0, 1, 3, 4, 5, 2)


def test_nhwc_packing_is_torch_channels_last() -> None:
    sizes = (2, 3, 4, 5)
    packing = NHWC.packing(sizes)
    assert packing.mask == () and packing.space == sizes
    channels_last = torch.empty(sizes, memory_format=torch.channels_last)
    assert packing.physical.strides == channels_last.stride()
    assert packing.physical == Layout.for_order(sizes, (0, 2, 3, 1))


# -- pitched rows (DirectML padding) ------------------------------------------------------------


def test_pitched_rows_directml_example() -> None:
    # 3x3 float32, rows of 20 bytes: pitch 20/4 = 5 elements, strides (5, 1).
    pitched = Format.pitched(20)
    assert isinstance(pitched, PitchedRows) and pitched.name == "pitched<20>"
    assert pitched.pitch((3, 3), torch.float32) == 5
    assert pitched.layout((3, 3), "float32") == Layout.padded((3, 3), 5) == Layout((3, 3), (5, 1))
    assert pitched.physical_sizes((3, 3), "float32") == (3, 5)
    assert get_format("pitched<20>") == pitched


@pytest.mark.parametrize(
    ("sizes", "dtype", "align", "pitch"),
    [
        ((3, 3), torch.float32, 16, 4),  # 12 bytes -> 16 bytes = 4 elements
        ((2, 4, 7), torch.float16, 32, 16),  # 14 bytes -> 32 bytes = 16 elements
        ((5,), torch.int8, 4, 8),  # 5 bytes -> 8 bytes
        ((2, 8), torch.float64, 4, 8),  # 64 bytes, already aligned
        ((2, 3), torch.float32, 6, 3),  # rows must be a multiple of lcm(6, 4) = 12 bytes
        ((2, 3), torch.float32, 10, 5),  # lcm(10, 4) = 20 bytes = 5 elements per row
        ((2, 0), torch.float32, 16, 0),
    ],
)
def test_pitched_rows_pack_matches_f_pad(
    sizes: tuple[int, ...], dtype: torch.dtype, align: int, pitch: int
) -> None:
    fmt = PitchedRows(align)
    assert fmt.pitch(sizes, dtype) == pitch
    assert pitch * torch.empty((), dtype=dtype).element_size() % align == 0
    x = torch.arange(1, math.prod(sizes) + 1).to(dtype).reshape(sizes)
    packing = fmt.packing(sizes, dtype, fill=9)
    expected = F.pad(x, (0, pitch - sizes[-1]), value=9)
    assert packing.physical_sizes == tuple(expected.shape)
    assert torch.equal(pack(x, packing), expected)
    assert torch.equal(unpack(expected, fmt.unpacking(sizes, dtype)), x)
    # Reading the buffer through the padded layout is the same unpack, with no mask.
    layout = fmt.layout(sizes, dtype)
    assert torch.equal(torch.as_strided(expected.flatten(), layout.sizes, layout.strides), x)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: get_format("NCHW8"),
            UnsupportedError,
            r"format: expected one of NCHW, NHWC, NCHW4, NCHW32, NCHW64, CHWN4, "
            r"pitched<align_bytes>; got 'NCHW8'",
        ),
        (lambda: get_format("pitched<0>"), UnsupportedError, r"got 'pitched<0>'"),
        (
            lambda: NHWC.packing((2, 3)),
            ShapeError,
            r"NHWC: expected logical sizes of rank 3 .*got sizes \(2, 3\)",
        ),
        (lambda: NCHW4.physical_sizes((6,)), ShapeError, r"NCHW4: .*got sizes \(6,\)"),
        (
            lambda: NCHW4.packing((1,) * MAX_RANK),
            UnsupportedError,
            rf"NCHW4: logical rank {MAX_RANK} is above the maximum of {MAX_RANK - 1}",
        ),
        (lambda: NCHW.packing((1,) * (MAX_RANK + 1)), UnsupportedError,
         rf"NCHW: logical rank {MAX_RANK + 1}"),
        (
            lambda: NCHW4.packing((2, -1, 3, 3)),
            ShapeError,
            r"NCHW4: sizes must be >= 0; got \(2, -1, 3, 3\)",
        ),
        (
            lambda: NCHW4.packing((2, 3.5, 3, 3)),
            VerificationError,
            r"NCHW4: sizes must be an int; got 3.5",
        ),
        (
            lambda: NCHW4.packing((2, 4, 3, 3), "complex64"),
            UnsupportedError,
            r"dtype: expected one of",
        ),
        (
            lambda: PitchedRows(16).packing((3, 3)),
            ShapeError,
            r"pitched<16>: a dtype is needed .*\(3, 3\)",
        ),
        (lambda: PitchedRows(16).packing((), "float32"), ShapeError, r"pitched<16>: .*rank >= 1"),
        (lambda: PitchedRows(0), LayoutError, r"align_bytes must be >= 1; got 0"),
        (
            lambda: Format("bad", 1, 4, (0, 1, 2, 3)),
            LayoutError,
            r"order \(0, 1, 2, 3\) is not a permutation of range\(5\)",
        ),
        (lambda: Format("bad", 1, 4, (0, 3, 1, 4, 2)), LayoutError, r"spatial dims 3, 4 together"),
        (lambda: Format("bad", 2, 4, (0, 1, 3, 4, 2)), UnsupportedError, r"block_dim must be 1"),
        (lambda: Format("bad", None, 4, (0, 1, 2, 3)), LayoutError, r"block 4 with block_dim None"),
        (lambda: MaskBound((1, 2), 0, 3).holds((1,)), LayoutError, r"coords \(1,\) have rank 1"),
    ],
)
def test_bad_input_raises_a_named_error(call, error: type[StridecError], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        call()
    assert isinstance(info.value, StridecError)


def test_formats_are_values() -> None:
    assert get_format("NCHW4") is NCHW4 and str(NCHW4) == "NCHW4"
    assert Format("NCHW4", 1, 4, [0, 1, 3, 4, 2]) == NCHW4
    assert hash(PitchedRows(16)) == hash(Format.pitched(16))
    assert {f.name for f in FORMATS.values()} == {
        "NCHW",
        "NHWC",
        "NCHW4",
        "NCHW32",
        "NCHW64",
        "CHWN4",
    }
