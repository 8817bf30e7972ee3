"""The op catalogue, op class by op class: attribute validation (a bad attribute raises the
right `StridecError` naming the op and the attribute), result-type inference for every
dtype, and `op.reference` / the reference executor against torch.

Packing oracles are torch's own constructions: `F.pad` the channels to a multiple of the
block, `reshape` to split them, `permute` to the physical order; unpacking is that
construction run backwards.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec import Graph, Layout
from stridec.errors import (
    LayoutError,
    ShapeError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir import ops as O
from stridec.ir.graph import OP_REGISTRY, Value
from stridec.runtime.backends.reference import evaluate, flat_storage, gather

DTYPES = sorted(stridec.DTYPES)
FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = FLOATS + ("int8", "int16", "int32", "int64")


def random_tensor(sizes: tuple[int, ...], dtype: str, seed: int = 0) -> torch.Tensor:
    """Random data of `dtype`; integer data stays inside the dtype's range."""
    gen = torch.Generator().manual_seed(seed)
    t = getattr(torch, dtype)
    if dtype in FLOATS:
        return (torch.randn(sizes, generator=gen) * 10).to(t)
    if dtype == "bool":
        return torch.randint(0, 2, sizes, generator=gen).bool()
    if dtype == "uint32":
        return torch.randint(0, 2**32, sizes, generator=gen, dtype=torch.int64).to(t)
    info = torch.iinfo(t)
    return torch.randint(info.min, info.max, sizes, generator=gen, dtype=torch.int64).to(t)


def graph_with_input(sizes: tuple[int, ...], dtype: str = "float32") -> tuple[Graph, Value]:
    g = Graph("ops")
    return g, g.input("x", sizes, dtype)


def run1(op_build: Any, t: torch.Tensor) -> tuple[Value, torch.Tensor]:
    """Build `op_build(x)` on an input like `t`, run it, return (value, result)."""
    g, x = graph_with_input(tuple(t.shape), str(t.dtype).removeprefix("torch."))
    v = op_build(x)
    g.output(v)
    g.verify()
    (got,) = stridec.run_reference(g, t)
    return v, got


# -- the catalogue --------------------------------------------------------------------------


def test_the_catalogue_is_registered() -> None:
    assert set(OP_REGISTRY) == {
        "input", "full", "philox", "philox_uniform",
        "permute", "transpose", "expand", "slice", "select", "squeeze", "unsqueeze", "flip",
        "reshape", "view", "flatten", "unfold", "diagonal", "as_strided", "bitcast", "split",
        "contiguous", "to_format", "pixel_shuffle", "pixel_unshuffle", "clone", "copy",
        "strided_copy", "masked_copy", "framed_copy", "fill", "pack", "unpack", "pad", "cast",
        "cat", "write", "output",
    }


def test_attributes_are_declared_once() -> None:
    """Each op's attributes come from its class's declarations, in text order, and its
    accessors read them: every op of the FileCheck files, built by the parser."""
    from pathlib import Path

    ops = []
    for path in sorted(Path(__file__).parents[1].joinpath("passes").glob("*.ir")):
        for chunk in path.read_text().split("// -----"):  # --split-input-file
            try:
                ops += stridec.parse(chunk).ops
            except StridecError:
                continue  # a case that tests an error
    seen = set()
    for op in ops:
        cls = type(op)
        seen.add(cls.name)
        assert tuple(op.attrs) == cls.attr_names == tuple(a.key for a in cls.attr_defs)
        for a in cls.attr_defs:
            assert getattr(op, a.name) is op.attrs[a.key]
    assert {"input", "copy", "philox", "permute", "slice", "output"} <= seen
    assert O.PhiloxOp.attr_names == (
        "sizes", "layout", "space", "index", "dst", "masks", "fill"
    )  # the shared placement attributes come after the op's own
    assert O.InputOp.text_attr_names == ("name", "storage")


def test_attribute_defaults_and_accessors() -> None:
    _, x = graph_with_input((2, 3))
    op = O.SliceOp([x], {"dim": 1})
    assert (op.dim, op.start, op.stop, op.step) == (1, None, None, 1)
    with pytest.raises(VerificationError, match="slice: attribute 'step' must be an int; got None"):
        O.SliceOp([x], {"dim": 1, "step": None})  # a default fills an absent attribute only
    with pytest.raises(AttributeError, match="slice: attribute 'step' is read-only"):
        op.step = 2
    assert O.InputOp.arg_name.key == "name" and x.owner.arg_name == "x"


def test_the_dtypes() -> None:
    assert set(stridec.DTYPES) == {
        "float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32",
        "int64", "uint32", "bool",
    }
    for name, d in stridec.DTYPES.items():
        assert d.torch == getattr(torch, name)
        assert d.itemsize == torch.empty((), dtype=d.torch).element_size()
        assert stridec.as_dtype(name) is stridec.as_dtype(d.short) is stridec.as_dtype(d.torch) is d
        assert d.is_floating == d.torch.is_floating_point


# -- attribute validation -------------------------------------------------------------------

# (op class, operand sizes, attributes, error, pattern the message must match)
BAD_ATTRS = [
    (O.PermuteOp, (2, 3), {}, VerificationError, r"permute: missing attribute 'dims'"),
    (O.PermuteOp, (2, 3), {"dims": "10"}, VerificationError, r"permute: attribute 'dims'"),
    (O.PermuteOp, (2, 3), {"dims": (0, 1.0)}, VerificationError, r"permute: attribute 'dims'"),
    (O.PermuteOp, (2, 3), {"dims": (0, 0)}, LayoutError, r"permute.*not a permutation"),
    (O.PermuteOp, (2, 3), {"dims": (0,)}, LayoutError, r"permute.*dims"),
    (O.PermuteOp, (2, 3), {"dims": (1, 0), "perm": (1, 0)}, VerificationError,
     r"permute: unknown attribute.*'perm'"),
    (O.TransposeOp, (2, 3), {"dim0": 0}, VerificationError, r"transpose: missing attribute 'dim1'"),
    (O.TransposeOp, (2, 3), {"dim0": 0, "dim1": True}, VerificationError,
     r"transpose: attribute 'dim1' must be an int"),
    (O.TransposeOp, (2, 3), {"dim0": 0, "dim1": 2}, LayoutError, r"transpose: dim 2 out of range"),
    (O.ExpandOp, (2, 3), {"sizes": (4, 3)}, LayoutError, r"expand.*size 4.*existing size 2"),
    (O.ExpandOp, (2, 3), {"sizes": (3,)}, LayoutError, r"expand.*rank"),
    (O.ExpandOp, (2, 3), {"sizes": None}, VerificationError, r"expand: missing attribute 'sizes'"),
    (O.SliceOp, (2, 3), {"dim": 1, "step": 0}, LayoutError, r"slice: step must be >= 1"),
    (O.SliceOp, (2, 3), {"dim": 1, "step": -1}, LayoutError, r"slice: step must be >= 1"),
    (O.SliceOp, (2, 3), {"dim": 2}, LayoutError, r"slice: dim 2 out of range"),
    (O.SliceOp, (2, 3), {"dim": 0, "start": "1"}, VerificationError, r"slice: attribute 'start'"),
    (O.SelectOp, (2, 3), {"dim": 1, "index": 3}, LayoutError, r"select: index 3 out of range"),
    (O.SelectOp, (2, 3), {"dim": 1, "index": -4}, LayoutError, r"select: index -4 out of range"),
    (O.SelectOp, (2, 3), {"dim": -3, "index": 0}, LayoutError, r"select: dim -3 out of range"),
    (O.SelectOp, (2, 3), {"dim": 0}, VerificationError, r"select: missing attribute 'index'"),
    (O.SqueezeOp, (2, 1), {"dims": (2,)}, LayoutError, r"squeeze: dim 2 out of range"),
    (O.SqueezeOp, (2, 1), {"dims": (1, -1)}, LayoutError, r"squeeze.*more than once"),
    (O.SqueezeOp, (2, 1), {"dims": "1"}, VerificationError, r"squeeze: attribute 'dims'"),
    (O.UnsqueezeOp, (2, 3), {"dim": 3}, LayoutError, r"unsqueeze: dim 3 out of range"),
    (O.UnsqueezeOp, (2, 3), {"dim": -4}, LayoutError, r"unsqueeze: dim -4 out of range"),
    (O.FlipOp, (2, 3), {"dims": (0, -2)}, LayoutError, r"flip.*more than once"),
    (O.FlipOp, (2, 3), {"dims": (2,)}, LayoutError, r"flip: dim 2 out of range"),
    (O.UnfoldOp, (2, 3), {"dim": 1, "size": 4, "step": 1}, LayoutError, r"unfold: size 4"),
    (O.UnfoldOp, (2, 3), {"dim": 1, "size": 2, "step": 0}, LayoutError, r"unfold: step"),
    (O.UnfoldOp, (2, 3), {"dim": 1, "size": 2}, VerificationError,
     r"unfold: missing attribute 'step'"),
    (O.AsStridedOp, (2, 3), {"sizes": (2,), "strides": (1, 1)}, LayoutError, r"as_strided.*rank"),
    (O.AsStridedOp, (2, 3), {"sizes": (2,), "strides": (1,), "offset": -1}, LayoutError,
     r"as_strided: offset"),
    (O.AsStridedOp, (2, 3), {"sizes": (2,), "strides": (-1,), "offset": 0}, LayoutError,
     r"as_strided.*before the start of storage"),
    (O.ReshapeOp, (2, 3), {"sizes": (4, 2)}, ShapeError, r"reshape: shape \[4, 2\] is invalid"),
    (O.ReshapeOp, (2, 3), {"sizes": (-1, -1)}, ShapeError, r"reshape: only one dimension"),
    (O.ViewShapeOp, (2, 3), {"sizes": (5,)}, ShapeError, r"view: shape \[5\] is invalid"),
    (O.FlattenOp, (2, 3), {"start_dim": 1, "end_dim": 0}, LayoutError, r"flatten: start_dim"),
    (O.FlattenOp, (2, 3), {"start_dim": 2}, LayoutError, r"flatten: dim 2 out of range"),
    (O.SplitOp, (2, 3), {"sizes": (1, 1), "dim": 1}, LayoutError, r"split: sections \[1, 1\]"),
    (O.SplitOp, (2, 3), {"sizes": (0,), "dim": 1}, LayoutError, r"split: split size"),
    (O.SplitOp, (2, 3), {"sizes": (-1,), "dim": 1}, LayoutError, r"split: split size"),
    (O.SplitOp, (2, 3), {"sizes": (1,), "dim": 2}, LayoutError, r"split: dim 2 out of range"),
    (O.NaturalCopyOp, (2, 3), {"layout": Layout((3, 2), (2, 1))}, ShapeError,
     r"copy: layout sizes"),
    (O.NaturalCopyOp, (2, 3), {"layout": Layout((2, 3), (-3, 1), 3)}, LayoutError,
     r"copy: result strides"),
    (O.NaturalCopyOp, (2, 3), {"layout": "NHWC"}, VerificationError,
     r"copy: 'layout' must be a Layout"),
    (O.NaturalCopyOp, (2, 3), {"dtype": "complex64"}, UnsupportedError, r"copy: dtype"),
    (O.StridedCopyOp, (2, 3), {"space": (2, 3), "src": Layout.contiguous((2, 3))},
     VerificationError, r"strided_copy: missing attribute 'dst'"),
    (O.StridedCopyOp, (2, 3), {"space": (2, 3), "src": Layout.contiguous((2, 3)),
                               "dst": Layout.contiguous((3, 2))},
     VerificationError, r"strided_copy: 'dst' must be a Layout over space"),
    (O.MaskedCopyOp, (2, 3), {"space": (2, 3), "src": Layout.contiguous((2, 3)),
                              "dst": Layout.contiguous((2, 3)), "masks": [((1,), 0, 1)]},
     VerificationError, r"masked_copy: mask coeffs"),
    (O.PackOp, (2, 3, 4, 5), {"format": "NCHW5"}, UnsupportedError, r"format.*'NCHW5'"),
    (O.PackOp, (2, 3, 4, 5), {}, VerificationError, r"pack: missing attribute 'format'"),
    (O.PackOp, (2, 3), {"format": "NHWC"}, ShapeError, r"pack: NHWC"),
    (O.PackOp, (2, 3, 4, 5), {"format": "NCHW4", "fill": "zero"}, VerificationError,
     r"pack: attribute 'fill'"),
    (O.UnpackOp, (2, 1, 4, 5, 4), {"format": "NCHW4", "channels": 5}, ShapeError,
     r"unpack: a NCHW4 tensor of sizes \[2, 1, 4, 5, 4\] cannot hold 5 channels"),
    (O.UnpackOp, (2, 1, 4, 5, 4), {"format": "NCHW4"}, VerificationError,
     r"unpack: missing attribute 'channels'"),
    (O.PadOp, (2, 3), {"pad": (1,)}, ShapeError, r"pad: 'pad' must hold pairs"),
    (O.PadOp, (2, 3), {"pad": (1, 1, 1, 1, 1, 1)}, ShapeError, r"pad: 'pad' must hold pairs"),
    (O.PadOp, (2, 3), {"pad": (-2, -2)}, ShapeError, r"pad: dim 1 of size 3"),
    (O.PadOp, (2, 3), {"pad": (1, 1), "value": "x"}, VerificationError, r"pad: attribute 'value'"),
    (O.CastOp, (2, 3), {"dtype": "float8"}, UnsupportedError, r"cast: dtype.*'float8'"),
    (O.CastOp, (2, 3), {}, VerificationError, r"cast: missing attribute 'dtype'"),
    (O.CatOp, (2, 3), {"dim": 2}, LayoutError, r"cat: dim 2 out of range"),
    (O.CatOp, (2, 3), {"dim": 1.0}, VerificationError, r"cat: attribute 'dim'"),
    (O.ContiguousOp, (2, 3), {"layout": None}, VerificationError, r"contiguous: unknown attribute"),
]


@pytest.mark.parametrize(
    "cls, sizes, attrs, error, pattern", BAD_ATTRS,
    ids=[f"{c.name}-{i}" for i, (c, *_rest) in enumerate(BAD_ATTRS)],
)
def test_bad_attributes(cls: type, sizes: tuple, attrs: dict, error: type, pattern: str) -> None:
    _, x = graph_with_input(sizes)
    with pytest.raises(error, match=pattern):
        cls([x], attrs)
    assert x.uses == []  # a refused op leaves no use behind


def test_bad_source_attributes() -> None:
    g = Graph("sources")
    with pytest.raises(VerificationError, match="input: missing attribute 'dtype'"):
        O.InputOp([], {"name": "x", "sizes": (2,)})
    with pytest.raises(VerificationError, match="input: 'name' must be a non-empty string"):
        g.input("", (2,), "float32")
    with pytest.raises(ShapeError, match="input: 'sizes' must be >= 0"):
        g.input("x", (2, -1), "float32")
    with pytest.raises(ShapeError, match="input 'x': layout sizes"):
        g.input("x", (2, 3), "float32", layout=Layout.contiguous((3, 2)))
    with pytest.raises(VerificationError, match="full: attribute 'value' must be a number"):
        g.full((2,), "1", "float32")
    with pytest.raises(ShapeError, match="full: attribute 'value' = 300 does not fit dtype int8"):
        g.full((2,), 300, "int8")
    with pytest.raises(ShapeError, match="full: attribute 'value' = inf does not fit dtype int32"):
        g.full((2,), math.inf, "int32")
    state = g.input("state", (6,), "uint32")
    with pytest.raises(VerificationError, match="philox_uniform: dtype must be float32"):
        g.philox_uniform(state, (2,), "int32")
    bad_state = g.input("bad", (5,), "uint32")
    with pytest.raises(VerificationError, match="philox: state must have shape"):
        g.philox(bad_state, (2,))
    float_state = g.input("fstate", (6,), "float32")
    with pytest.raises(VerificationError, match="philox: state must be uint32 or int32"):
        g.philox(float_state, (2,))
    assert state.uses == [] and bad_state.uses == [] and float_state.uses == []


@pytest.mark.parametrize(
    "dtype, value", [("int8", 128), ("uint8", 256), ("int32", math.nan), ("float16", 2**70)]
)
def test_fill_values_that_torch_refuses(dtype: str, value: float) -> None:
    """torch.full and F.pad refuse a value that overflows the dtype; so do the ops."""
    with pytest.raises((RuntimeError, OverflowError)):
        torch.full((1,), value, dtype=getattr(torch, dtype))
    g, x = graph_with_input((2, 4), dtype)
    with pytest.raises(ShapeError, match=f"pad: attribute 'value' = .* does not fit dtype {dtype}"):
        stridec.pad(x, (1, 1), value=value)
    with pytest.raises(ShapeError, match=f"pack: attribute 'fill' = .* does not fit dtype {dtype}"):
        x.pack("pitched<16>", fill=value)
    with pytest.raises(ShapeError, match=f"full: attribute 'value' = .* not fit dtype {dtype}"):
        g.full((2,), value, dtype)
    assert x.uses == []


def test_wrong_operand_counts() -> None:
    _, x = graph_with_input((2, 3))
    with pytest.raises(VerificationError, match=r"permute: expected 1 operand\(s\); got 2"):
        O.PermuteOp([x, x], {"dims": (1, 0)})
    with pytest.raises(VerificationError, match="full: expected no operand, or one to be like"):
        O.FullOp([x, x], {"sizes": (2, 3), "value": 0, "dtype": "float32"})
    with pytest.raises(ShapeError, match=r"full: sizes \[2\] differ from the sizes \[2, 3\]"):
        O.FullOp([x], {"sizes": (2,), "value": 0, "dtype": "float32"})
    with pytest.raises(VerificationError, match=r"copy: expected a source and, optionally, a "
                       r"buffer to write into; got 3 operand\(s\)"):
        O.NaturalCopyOp([x, x, x], {})
    with pytest.raises(ShapeError, match="cat: expected at least one tensor"):
        O.CatOp([], {})
    with pytest.raises(VerificationError, match="permute: expected stridec Values"):
        O.PermuteOp([torch.zeros(2, 3)], {"dims": (1, 0)})
    assert x.uses == []


# -- type inference for every dtype ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_keep_the_dtype_and_count_strides_in_elements(dtype: str) -> None:
    """A view's layout does not depend on the element size; the values match torch."""
    def chain(x: Any) -> Any:
        return x.permute(2, 0, 1)[1:, :, ::2].unsqueeze(0).expand(2, 5, 2, 2)

    t = random_tensor((2, 3, 6), dtype)
    v, got = run1(lambda x: chain(x).flip(3), t)
    expected = torch.flip(chain(t), (3,))
    assert v.dtype.name == dtype and got.dtype == t.dtype and torch.equal(got, expected)
    # torch.flip copies (its strides as preserve_format); the copy reads the input through
    # negative strides.
    assert v.type.layout == Layout(expected.shape, expected.stride())
    assert torch.equal(gather(flat_storage(t), v.owner.source_layout()), expected)
    e = chain(t)  # the torch view, before the flip
    assert v.owner.operands[0].type.layout == Layout(e.shape, e.stride(), e.storage_offset())


@pytest.mark.parametrize("dtype", DTYPES)
def test_materializations_keep_the_dtype(dtype: str) -> None:
    g, x = graph_with_input((2, 5, 3, 2), dtype)
    results = [
        x.contiguous(), x.permute(0, 2, 3, 1).contiguous(), x.copy_to((1, 2, 10, 30)),
        x.pack("NCHW4"), x.pack("NHWC"), stridec.pad(x, (1, 1)), stridec.cat([x, x], 1),
        x.pack("NCHW4").unpack("NCHW4", 5), x.reshape(-1), x.permute(1, 0, 2, 3).reshape(-1),
    ]
    g.output(*results)
    for v in results:
        assert v.dtype.name == dtype
    assert results[3].shape == (2, 2, 3, 2, 4)
    assert results[6].shape == (2, 10, 3, 2)
    assert results[2].type.layout == Layout((2, 5, 3, 2), (1, 2, 10, 30))
    t = random_tensor((2, 5, 3, 2), dtype)
    got = stridec.run_reference(g, t)
    assert torch.equal(got[0], t)
    assert torch.equal(got[1], t.permute(0, 2, 3, 1).contiguous())
    assert torch.equal(got[2], t)
    assert torch.equal(got[5], F.pad(t, (1, 1)))
    assert torch.equal(got[6], torch.cat([t, t], 1))
    assert torch.equal(got[7], t)
    assert torch.equal(got[8], t.reshape(-1))
    assert torch.equal(got[9], t.permute(1, 0, 2, 3).reshape(-1))


# -- op.reference against torch ---------------------------------------------------------

# (op class, operand sizes, attributes, the torch expression)
REFERENCES = [
    (O.PermuteOp, (2, 3, 4), {"dims": (2, 0, 1)}, lambda t: t.permute(2, 0, 1)),
    (O.TransposeOp, (2, 3, 4), {"dim0": 0, "dim1": -1}, lambda t: t.transpose(0, -1)),
    (O.ExpandOp, (3, 1), {"sizes": (2, 3, 5)}, lambda t: t.expand(2, 3, 5)),
    (O.SliceOp, (5, 4), {"dim": 0, "start": -4, "stop": None, "step": 2}, lambda t: t[-4::2]),
    (O.SelectOp, (5, 4), {"dim": 1, "index": -2}, lambda t: t.select(1, -2)),
    (O.SqueezeOp, (1, 4, 1), {"dims": None}, lambda t: t.squeeze()),
    (O.SqueezeOp, (1, 4, 1), {"dims": (0, 1)}, lambda t: t.squeeze((0, 1))),
    (O.UnsqueezeOp, (5, 4), {"dim": -1}, lambda t: t.unsqueeze(-1)),
    (O.FlipOp, (5, 4), {"dims": (0, 1)}, lambda t: torch.flip(t, (0, 1))),
    (O.UnfoldOp, (5, 4), {"dim": 0, "size": 2, "step": 2}, lambda t: t.unfold(0, 2, 2)),
    (O.ReshapeOp, (5, 4), {"sizes": (2, -1)}, lambda t: t.reshape(2, -1)),
    (O.ViewShapeOp, (5, 4), {"sizes": (20,)}, lambda t: t.view(20)),
    (O.FlattenOp, (2, 3, 4), {"start_dim": 1}, lambda t: t.flatten(1)),
    (O.SplitOp, (5, 4), {"sizes": (2,), "dim": 0}, lambda t: t.split(2, 0)),
    (O.SplitOp, (5, 4), {"sizes": (1, 3), "dim": 1}, lambda t: t.split([1, 3], 1)),
    (O.ContiguousOp, (5, 4), {}, lambda t: t.contiguous()),
    (O.NaturalCopyOp, (5, 4), {"dtype": "float16"}, lambda t: t.to(torch.float16)),
    (O.PadOp, (5, 4), {"pad": (1, -2, 0, 3), "value": 2.5},
     lambda t: F.pad(t, (1, -2, 0, 3), value=2.5)),
    (O.CastOp, (5, 4), {"dtype": "int16"}, lambda t: t.to(torch.int16)),
    (O.PackOp, (2, 3, 2, 2), {"format": "NHWC"}, lambda t: t.permute(0, 2, 3, 1)),
    (O.CatOp, (5, 4), {"dim": 1}, lambda t: torch.cat([t], 1)),
]


@pytest.mark.parametrize(
    "cls, sizes, attrs, torch_fn", REFERENCES,
    ids=[f"{c.name}-{i}" for i, (c, *_rest) in enumerate(REFERENCES)],
)
def test_reference_matches_torch(cls: type, sizes: tuple, attrs: dict, torch_fn: Any) -> None:
    _, x = graph_with_input(sizes)
    op = cls([x], attrs)
    t = random_tensor(sizes, "float32")
    expected = torch_fn(t)
    expected = tuple(expected) if isinstance(expected, tuple) else (expected,)
    got = evaluate(op, t)
    assert len(got) == len(expected) == len(op.results)
    for v, a, e in zip(op.results, got, expected, strict=True):
        assert v.shape == tuple(e.shape) and v.dtype.torch == e.dtype
        assert torch.equal(a, e)


def test_full_reference() -> None:
    op = O.FullOp([], {"sizes": (2, 3), "value": -1.5, "dtype": "bfloat16"})
    (got,) = evaluate(op)
    assert torch.equal(got, torch.full((2, 3), -1.5, dtype=torch.bfloat16))


def test_storage_ops_need_the_executor() -> None:
    _, x = graph_with_input((2, 3))
    t = torch.zeros(2, 3)
    with pytest.raises(VerificationError, match="as_strided: needs the root storage"):
        evaluate(O.AsStridedOp([x], {"sizes": (2,), "strides": (1,)}), t)
    explicit = O.StridedCopyOp([x], {"space": (2, 3), "src": Layout.contiguous((2, 3)),
                                     "dst": Layout.contiguous((2, 3))})
    with pytest.raises(VerificationError, match="strided_copy: needs the root storage"):
        evaluate(explicit, t)


# -- cast -----------------------------------------------------------------------------------


def cast_source(dtype: str, signed_target: bool) -> torch.Tensor:
    """Values every dtype holds exactly or by a defined conversion: 0..100 with fractions
    for floats (truncation toward zero), negatives only toward a signed type."""
    values = torch.tensor([0.0, 1.0, 2.5, 99.75, 7.0, 0.25, 100.0, 64.5])
    if signed_target and dtype in SIGNED:
        values = torch.cat([values, -values])
    if dtype not in FLOATS:
        values = values.trunc()
    return values.reshape(2, -1).to(getattr(torch, dtype))


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_every_pair(src: str, dst: str) -> None:
    t = cast_source(src, dst in SIGNED)
    g, x = graph_with_input(tuple(t.shape), src)
    a = x.to(dst)
    b = x.t().to(dst)  # a strided operand too
    g.output(a, b)
    assert a.dtype.name == dst and a.shape == x.shape
    assert a.type.layout == Layout.contiguous(x.shape)
    got_a, got_b = stridec.run_reference(g, t)
    want = getattr(torch, dst)
    assert got_a.dtype == want and torch.equal(got_a, t.to(want))
    assert torch.equal(got_b, t.t().to(want))


# -- pad -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes, pad",
    [((4, 5), (-1, -1)), ((4, 5), (-2, 3, 1, -3)), ((4, 5), (0, -5)), ((4, 5), (-5, 2)),
     ((2, 3, 4), (1, -4, -1, 0, 2, -2)), ((4, 5), (-1, 0, 0, 0)), ((0, 3), (1, 1, 2, 0)),
     ((3,), (1, -3)), ((3,), ()), ((), ())],
)
def test_pad_with_negative_pads(sizes: tuple[int, ...], pad: tuple[int, ...]) -> None:
    t = random_tensor(sizes, "float32")
    v, got = run1(lambda x: stridec.pad(x, pad, value=-7.0), t)
    expected = F.pad(t, pad, value=-7.0)
    assert v.shape == tuple(expected.shape) and torch.equal(got, expected)


@pytest.mark.parametrize("sizes, pad", [((3,), (-4, 0)), ((3,), (2, -4)), ((0,), (1, -1)),
                                        ((4, 2), (0, 0, -3, -2))])
def test_pad_that_crops_too_much(sizes: tuple[int, ...], pad: tuple[int, ...]) -> None:
    with pytest.raises(RuntimeError):
        F.pad(torch.zeros(sizes), pad)
    _, x = graph_with_input(sizes)
    with pytest.raises(ShapeError, match="pad: dim .* cannot be cropped"):
        stridec.pad(x, pad)


@pytest.mark.parametrize("dtype", ["uint32", "bool", "int8", "bfloat16"])
def test_pad_fill_for_other_dtypes(dtype: str) -> None:
    t = random_tensor((3, 4), dtype)
    fill = 1 if dtype == "bool" else 5
    _, got = run1(lambda x: stridec.pad(x, (2, 1, 1, 0), value=fill), t)
    assert torch.equal(got, F.pad(t, (2, 1, 1, 0), value=fill))


def test_pad_mode_must_be_constant() -> None:
    _, x = graph_with_input((2, 3))
    with pytest.raises(UnsupportedError, match="pad: mode must be 'constant'; got 'reflect'"):
        stridec.pad(x, (1, 1), mode="reflect")


# -- cat -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, dim",
    [([(2, 0), (2, 3), (2, 0)], 1), ([(0, 3), (2, 3)], 0), ([(0, 3), (0, 3)], 0),
     ([(0, 3)], -1), ([(2, 0, 4), (2, 0, 4)], 1), ([(2, 0, 4), (2, 0, 1)], 2), ([(3,), (0,)], 0)],
)
def test_cat_with_empty_inputs(shapes: list[tuple[int, ...]], dim: int) -> None:
    g = Graph("cat")
    xs = [g.input(f"x{i}", s, "float32") for i, s in enumerate(shapes)]
    out = stridec.cat(xs, dim)
    g.output(out)
    ts = [random_tensor(s, "float32", seed=i) for i, s in enumerate(shapes)]
    (got,) = stridec.run_reference(g, *ts)
    expected = torch.cat(ts, dim)
    assert out.shape == tuple(expected.shape) and torch.equal(got, expected)


def test_cat_mismatches() -> None:
    g = Graph("cat")
    x = g.input("x", (2, 3), "float32")
    y = g.input("y", (3, 3), "float32")
    z = g.input("z", (2, 3), "float16")
    s = g.input("s", (), "float32")
    with pytest.raises(ShapeError, match=r"cat: operand 1 has sizes \[3, 3\]; expected \[2, 3\]"):
        stridec.cat([x, y], 1)
    with pytest.raises(ShapeError, match="cat: operand 1 has dtype float16"):
        O.CatOp([x, z], {"dim": 0})  # the op takes one dtype; the builder promotes (below)
    with pytest.raises(LayoutError, match="cat: dim 0 out of range for rank 0"):
        stridec.cat([s, s])
    with pytest.raises(ShapeError, match="cat: expected a non-empty sequence"):
        stridec.cat([])
    assert all(v.uses == [] for v in (x, y, z, s))
    # As torch.cat: float32 with float16 is float32, z cast first.
    assert stridec.cat([x, z], 0).dtype.name == "float32"


# -- pack and unpack ------------------------------------------------------------------------

BLOCKED = {"NCHW4": 4, "NCHW32": 32, "NCHW64": 64, "CHWN4": 4}


def pitch_of(width: int, itemsize: int, align: int) -> int:
    """The least pitch p >= width with p * itemsize a multiple of `align` bytes."""
    p = width
    while (p * itemsize) % align:
        p += 1
    return p


def torch_pack(t: torch.Tensor, fmt: str, fill: float = 0) -> torch.Tensor:
    """torch's own construction of a format: F.pad, reshape, permute, contiguous."""
    rank = t.dim()
    spatial = list(range(2, rank))
    if fmt == "NCHW":
        return t.clone()
    if fmt == "NHWC":
        return t.permute(0, *spatial, 1).contiguous()
    if fmt.startswith("pitched<"):
        align = int(fmt[len("pitched<"):-1])
        width = t.shape[-1]
        return F.pad(t, (0, pitch_of(width, t.element_size(), align) - width), value=fill)
    x = BLOCKED[fmt]
    n, c = t.shape[:2]
    blocks = -(-c // x)
    padded = F.pad(t, (0, 0) * len(spatial) + (0, blocks * x - c), value=fill)
    split = padded.reshape(n, blocks, x, *t.shape[2:])  # (N, C/x, x, spatial...)
    split_spatial = [d + 1 for d in spatial]
    if fmt == "CHWN4":
        return split.permute(1, *split_spatial, 0, 2).contiguous()
    return split.permute(0, 1, *split_spatial, 2).contiguous()


def torch_unpack(p: torch.Tensor, fmt: str, logical: tuple[int, ...]) -> torch.Tensor:
    """The inverse of `torch_pack`: permute back, merge the channel blocks, crop."""
    rank = len(logical)
    if fmt == "NCHW":
        return p.clone()
    if fmt == "NHWC":
        return p.permute(0, rank - 1, *range(1, rank - 1)).contiguous()
    if fmt.startswith("pitched<"):
        return p[..., : logical[-1]].contiguous()
    n, c = logical[:2]
    ns = rank - 2
    if fmt == "CHWN4":  # physical (C/4, spatial..., N, 4)
        split = p.permute(ns + 1, 0, ns + 2, *range(1, ns + 1))
    else:  # physical (N, C/x, spatial..., x)
        split = p.permute(0, 1, ns + 2, *range(2, ns + 2))
    merged = split.reshape(n, split.shape[1] * split.shape[2], *logical[2:])
    return merged[:, :c].contiguous()


FORMAT_CASES = [
    (fmt, sizes)
    for fmt in ("NCHW", "NHWC", "NCHW4", "NCHW32", "NCHW64", "CHWN4")
    for sizes in ((2, 3, 4, 5), (2, 5, 3, 2), (1, 70, 2, 3), (3, 8, 1, 2), (2, 64, 1, 1))
] + [
    ("NCHW4", (2, 6, 2, 3, 2)), ("NHWC", (2, 3, 2, 3, 2)), ("CHWN4", (3, 5, 2, 1, 2)),
    ("NCHW4", (2, 5)), ("NCHW32", (3, 33, 4)), ("NCHW", (2, 3)), ("NHWC", (2, 3, 4)),
    ("NCHW4", (0, 3, 2, 2)), ("NHWC", (2, 3, 0, 2)),
] + [
    (f"pitched<{a}>", sizes) for a in (4, 16, 64, 6) for sizes in ((3, 3), (2, 3, 5), (7,), (2, 1))
]


@pytest.mark.parametrize("fmt, sizes", FORMAT_CASES, ids=[f"{f}-{s}" for f, s in FORMAT_CASES])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint32"])
def test_pack_matches_torch_construction(fmt: str, sizes: tuple[int, ...], dtype: str) -> None:
    t = random_tensor(sizes, dtype)
    fill = 3
    v, got = run1(lambda x: x.pack(fmt, fill=fill), t)
    expected = torch_pack(t, fmt, fill)
    assert v.shape == tuple(expected.shape) and v.dtype.name == dtype
    assert torch.equal(got, expected)


@pytest.mark.parametrize("fmt, sizes", FORMAT_CASES, ids=[f"{f}-{s}" for f, s in FORMAT_CASES])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint32"])
def test_unpack_inverts_torch_construction(fmt: str, sizes: tuple[int, ...], dtype: str) -> None:
    """Random data in the physical buffer, padding included: unpacking ignores the padding."""
    # (the pitch of pitched rows depends on the element size)
    physical_sizes = tuple(torch_pack(torch.zeros(sizes, dtype=getattr(torch, dtype)), fmt).shape)
    p = random_tensor(physical_sizes, dtype, seed=1)
    channels = sizes[-1] if fmt.startswith("pitched<") else sizes[1]
    v, got = run1(lambda x: x.unpack(fmt, channels), p)
    expected = torch_unpack(p, fmt, sizes)
    assert v.shape == sizes and tuple(expected.shape) == sizes
    assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ["NCHW4", "CHWN4", "NHWC", "pitched<32>"])
def test_pack_unpack_round_trip_every_dtype(dtype: str, fmt: str) -> None:
    t = random_tensor((2, 5, 3, 3), dtype)
    g, x = graph_with_input((2, 5, 3, 3), dtype)
    packed = x.pack(fmt)
    back = packed.unpack(fmt, 3 if fmt.startswith("pitched") else 5)
    g.output(packed, back)
    got_packed, got_back = stridec.run_reference(g, t)
    assert torch.equal(got_packed, torch_pack(t, fmt))
    assert torch.equal(got_back, t)


@pytest.mark.parametrize("dtype, pitch", [("float64", 4), ("float32", 8), ("float16", 16),
                                          ("bool", 32), ("int8", 32), ("int16", 16)])
def test_pitched_pitch_depends_on_the_element_size(dtype: str, pitch: int) -> None:
    """32-byte rows of 3 elements: 32 / itemsize elements per row."""
    _, x = graph_with_input((2, 3), dtype)
    assert x.pack("pitched<32>").shape == (2, pitch)


def test_unknown_formats() -> None:
    _, x = graph_with_input((2, 3, 4, 5))
    for name in ("NCHW8", "nchw4", "pitched<0>", "pitched<-4>", "pitched", ""):
        with pytest.raises(UnsupportedError, match="format: expected one of"):
            x.pack(name)
        with pytest.raises(UnsupportedError, match="format: expected one of"):
            x.unpack(name, 3)
    assert x.uses == []


# -- copy, natural form ---------------------------------------------------------------------


@pytest.mark.parametrize("layout", [Layout((3, 4), (1, 3)), Layout((3, 4), (8, 1), 5),
                                    Layout((3, 4), (0, 1)), Layout((3, 4), (4, 1))])
def test_copy_natural_form(layout: Layout) -> None:
    """Element c of the result is element c of the operand, wherever the layout puts it
    (a broadcast result layout keeps the last write, which is the same value only when the
    operand repeats: not checked here)."""
    t = random_tensor((3, 4), "float32")
    if layout.is_broadcast():
        t = t[:1].expand(3, 4).contiguous()
    v, got = run1(lambda x: x.copy_to(layout), t)
    assert v.type.layout == layout and torch.equal(got, t)


def test_ops_are_registered_by_their_text_name() -> None:
    for name, cls in OP_REGISTRY.items():
        assert cls.name == name and issubclass(cls, O.Op)


def test_every_error_is_a_stridec_error() -> None:
    for _cls, _sizes, _attrs, error, _pattern in BAD_ATTRS:
        assert issubclass(error, StridecError)
