"""The text IR: `parse(str(g))` prints as `g` does and computes what `g` computes.

Oracles: the printer (round trip of the text) and the reference executor (a parsed graph
runs identically to the graph it was printed from). Error positions are computed from the
text the test wrote (`text.index` of the offending token), never from what the parser
reports.
"""

from __future__ import annotations

import math
import re
import string
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import stridec.ir.builder as B
from stridec.errors import (
    LayoutError,
    ParseError,
    StridecError,
    UnsupportedError,
    VerificationError,
)
from stridec.ir import ops as O
from stridec.ir.affine import MAX_RANK
from stridec.ir.graph import OP_REGISTRY, Graph, Value
from stridec.ir.layout import Layout
from stridec.ir.parser import parse
from stridec.runtime.backends.reference import run_reference

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- helpers ------------------------------------------------------------------------------


def round_trip(g: Graph) -> Graph:
    """Parse the printed graph and check it prints identically (and is a fixed point)."""
    text = str(g)
    parsed = parse(text)
    assert str(parsed) == text
    assert str(parse(str(parsed))) == text
    parsed.verify()
    return parsed


def assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal dtype, shape and elements, NaN equal to NaN."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.is_floating_point():
        nan_a, nan_b = torch.isnan(a), torch.isnan(b)
        assert torch.equal(nan_a, nan_b)
        assert torch.equal(a[~nan_a], b[~nan_b])
    else:
        assert torch.equal(a, b)


def assert_evaluates_identically(g: Graph, inputs: list[torch.Tensor]) -> None:
    expected = run_reference(g, *inputs)
    got = run_reference(parse(str(g)), *inputs)
    assert len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        assert_same(a, b)


def random_input(sizes: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        t = torch.randn(sizes, generator=gen).to(dtype)
        if t.numel():
            t.view(-1)[0] = math.nan  # NaN must survive the trip too
        return t
    if dtype == torch.bool:
        return torch.randint(0, 2, sizes, generator=gen).bool()
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -100), min(info.max, 100) + 1, sizes, generator=gen).to(
        dtype
    )


def position(text: str, needle: str, start: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the first `needle` at or after `start` in `text`."""
    offset = text.index(needle, start)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


# -- a graph that uses every op -----------------------------------------------------------


def catalogue() -> tuple[Graph, list[torch.Tensor]]:
    """Every op of the catalogue, the optional attributes and the explicit forms of copy."""
    g = Graph("catalogue")
    x = g.input("x", (2, 3, 4, 5), "float16")
    y = g.input("y", (3, 4), "float32", layout=Layout((3, 4), (1, 3), 0))
    state = g.input("state", (6,), "uint32")
    m = g.input('weird "name"\\\n\t\u00e9\U0001f600', (4, 5), "int32")
    outs: list[Value] = []

    # sources
    bits, state1 = g.philox(state, (3, 4))
    uni, state2 = g.philox_uniform(state1, (2, 2), "float16", -1.0, 1e-05)
    outs += [bits, uni, state2]
    outs.append(g.full((2,), -math.inf, "bfloat16"))
    outs.append(g.full((), 7, "int64"))
    outs.append(g.full((1, 0), True, "bool"))

    # views
    p = x.permute(0, 2, 3, 1)
    a, b = p.split(1, 0)
    s1, s2, s3 = x.split((1, 0, 2), 1)
    outs += [a, b, s1, s2, s3]
    outs.append(x.transpose(0, -1))
    outs.append(x[0, 0, 0].unsqueeze(0).expand(7, 5))
    outs.append(x[:, 1:, ::2])
    outs.append(x[..., -3:-1])
    outs.append(x.select(1, -1))
    outs.append(x[:, 0:1].squeeze(1))
    outs.append(x[:1].squeeze())  # dims = none: left out of the text
    outs.append(x.unsqueeze(-1))
    outs.append(x.flip(1, 3))
    outs.append(x.view(6, 20))
    outs.append(p.reshape(-1))  # not viewable: a copy
    outs.append(x.reshape(2, -1))  # viewable
    outs.append(p.flatten(1))
    outs.append(x.unfold(3, 2, 1))
    outs.append(x.diagonal(-1, 3, 1))
    outs.append(x.as_strided((2, 2), (1, 1), 3))
    outs.append(x.flip(0).as_strided((3,), (2,)))  # offset none: the operand's
    outs.append(x.view("int16"))  # a bitcast of the same element size: the same layout
    outs.append(x.as_strided((2, 4), (8, 1), 4).view("float64"))  # sizes, strides, offset / 4
    outs.append(x.flip(0).as_strided((2, 3), (6, 1), 4, ).view("int8"))
    outs.append(x.as_strided((4,), (1,), 2).view("int32").as_strided((2,), (1,), 1))
    outs.append(y.t())

    # materializations
    outs.append(p.contiguous())
    outs.append(x[1:].contiguous())  # contiguous already: a view
    outs.append(x.contiguous("channels_last"))  # a copy into channels-last memory
    outs.append(p.permute(0, 3, 1, 2).contiguous("channels_last"))  # already: a view
    outs.append(x.to(memory_format="channels_last"))  # row-major suggests no channels-last
    outs.append(x.t().to(memory_format="contiguous_format") if x.ndim == 2 else
                x.transpose(1, 2).to(memory_format="contiguous_format"))  # the value itself
    outs.append(p.clone())
    outs.append(x.copy_to((1, 2, 6, 24), dtype="float32"))
    outs.append(x.copy_to(Layout((2, 3, 4, 5), (60, 20, 5, 1), 7)))
    outs.append(x.pack("NCHW4"))
    outs.append(x.pack("NHWC", fill=0.5))
    outs.append(x.pack("NCHW4").unpack("NCHW4", 3))
    outs.append(y.pack("pitched<16>", fill=-0.0))
    outs.append(B.pad(x, (1, 1), value=math.nan))
    outs.append(B.pixel_shuffle(x.permute(0, 2, 1, 3).reshape(2, 4, 3, 5), 2))
    outs.append(B.pixel_unshuffle(x[:, :, :, 1:], 2))
    outs.append(B.full_like(p, 2.5))  # p's strides: new memory laid out as p
    outs.append(B.full_like(x, 1, "int8", "channels_last"))
    outs.append(B.pad(x, (0, 1, -1, 2), value=0.1))
    outs.append(B.cat([x, x.flip(1)], 1))
    outs.append(B.cat([m], -1))
    outs.append(x.to("bool"))
    outs.append(m.to("float64"))
    # in-place writes: a window of a fresh float16 buffer from float32 values (cast), then
    # a fill; the buffer after both
    written = g.full((3, 4), 0.0, "float16")[1:, ::2].copy_(y[1:, ::2])
    outs.append(written.root()[0].fill_(-2).root())

    # the explicit copy: space/src/dst/masks/fill, as lower-formats writes it (NCHW4, C=3)
    space = (2, 1, 4, 4, 5)
    src = Layout(space, (60, 80, 20, 5, 1), 0)
    dst = Layout(space, (80, 80, 1, 20, 4), 0)
    explicit = O.MaskedCopyOp(
        [x],
        {
            "layout": Layout.contiguous((2, 1, 4, 5, 4)),
            "space": space,
            "src": src,
            "dst": dst,
            "masks": [((0, 4, 1, 0, 0), 0, 3)],
            "fill": 2.5,
        },
    )
    outs.append(g.append(explicit).result)
    # ... a copy into a buffer operand (`into`), as cat writes each input
    # rows 0 and 1 of the (4, 3) `part` go to columns 3..5 of a (4, 6) buffer; the mask
    # `0 <= i0 < 2` without a fill leaves rows 2 and 3 of the buffer as they were
    buffer = g.full((4, 6), 0.0, "float32")
    part = y.t()
    into = O.MaskedCopyOp(
        [part, buffer],
        {
            "space": (4, 3),
            "src": part.type.layout,  # (4, 3) strides (3, 1) over y's storage
            "dst": Layout((4, 3), (6, 1), 3),
            "masks": [((1, 0), 0, 2)],
        },
    )
    outs.append(g.append(into).result)
    # ... and a fill without operands
    fill_layout = Layout((2, 3), (1, 2), 0)
    filled = O.FillOp(
        [],
        {
            "layout": fill_layout,
            "dtype": "float32",
            "space": (2, 3),
            "dst": fill_layout,
            "fill": -1.5,
        },
    )
    outs.append(g.append(filled).result)
    # ... a strided copy (the first 4x5 plane of x, transposed) and a framed one (F.pad of
    # x's first row by (1, 2) in one copy: the row, and the fill around it)
    outs.append(x.strided_copy((5, 4), Layout((5, 4), (1, 5)), Layout((5, 4), (4, 1))))
    outs.append(x.framed_copy((5,), Layout((5,), (1,)), Layout((5,), (1,), 1), [(1, 2)], -0.0,
                              layout=Layout.contiguous((8,))))

    # the placed form of the generators, as fuse-copies folds a pack (or a transposed copy)
    # of the generated values into them: `index` and `dst` map the space like src and dst
    placed_uniform = O.PhiloxUniformOp(
        [state2],
        {
            "sizes": (2, 3, 4, 5),
            "dtype": "float16",
            "layout": Layout.contiguous((2, 1, 4, 5, 4)),
            "space": space,
            "index": src,
            "dst": dst,
            "masks": [((0, 4, 1, 0, 0), 0, 3)],
            "fill": 0,
        },
    )
    values, state3 = g.append(placed_uniform).results
    placed_bits = O.PhiloxOp(
        [state3],
        {
            "sizes": (2, 8),
            "layout": Layout((8, 2), (2, 1), 0),
            "space": (8, 2),
            "index": Layout((8, 2), (1, 8), 0),
            "dst": Layout((8, 2), (2, 1), 0),
        },
    )
    outs += [values, *g.append(placed_bits).results]
    g.output(*outs)

    gen = torch.Generator().manual_seed(0)
    inputs = [
        random_input((2, 3, 4, 5), torch.float16, gen),
        random_input((3, 4), torch.float32, gen),
        torch.tensor([1, 2, 3, 4, 5, 6], dtype=torch.uint32),
        random_input((4, 5), torch.int32, gen),
    ]
    return g, inputs


def test_catalogue_uses_every_registered_op() -> None:
    g, _ = catalogue()
    assert {op.name for op in g} == set(OP_REGISTRY)


def test_catalogue_round_trips() -> None:
    g, _ = catalogue()
    g.verify()
    parsed = round_trip(g)
    assert parsed.name == "catalogue"
    assert [op.name for op in parsed] == [op.name for op in g]
    for old, new in zip(g, parsed, strict=True):
        assert repr(dict(new.attrs)) == repr(dict(old.attrs))  # repr: NaN equals NaN
        assert [v.type for v in new.results] == [v.type for v in old.results]


def test_catalogue_evaluates_identically() -> None:
    g, inputs = catalogue()
    assert_evaluates_identically(g, inputs)


def test_readme_example() -> None:
    text = (
        "graph @nchw_to_nhwc {\n"
        '  %x = input {name = "x"} : tensor<2x3x4x5xf16>\n'
        "  %0 = permute %x {dims = [0, 2, 3, 1]} : "
        "tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>\n"
        "  %1 = contiguous %0 : tensor<2x4x5x3xf16>\n"
        "  output %1\n"
        "}\n"
    )
    g = parse(text)
    assert str(g) == text
    (x,) = g.inputs
    assert x.shape == (2, 3, 4, 5) and x.dtype.short == "f16"
    assert g.ops[1].result.type.layout == Layout((2, 4, 5, 3), (60, 5, 1, 20), 0)


FILLS = [
    (v, "float16")
    for v in (0, -3, True, 0.1, -0.0, 0.0, 1e-05, math.inf, -math.inf, math.nan, 65504.0)
]
FILLS += [(2**63 - 1, "int64"), (-(2**63), "int64")]
FILLS += [(v, "float64") for v in (2**53 + 1, 1e300, -1e-300, 5e-324, 1.7976931348623157e308)]
FILLS += [(v, "int32") for v in (-(2**31), 2**31 - 1, False, 0.75, -0.0)]
FILLS += [(v, "bool") for v in (True, False, 2, math.nan)]


@pytest.mark.parametrize(("value", "dtype"), FILLS)
def test_fill_values_round_trip(value: float, dtype: str) -> None:
    """Every number form the printer writes (repr of floats) reads back to the same value."""
    g = Graph("fills")
    x = g.input("x", (2, 3), dtype)
    g.output(g.full((2,), value, dtype), B.pad(x, (1, 0), value=value))
    parsed = round_trip(g)
    for op_name, key in (("full", "value"), ("pad", "value")):
        got = next(op for op in parsed if op.name == op_name).attrs[key]
        assert type(got) is type(value)
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(got)
        else:
            assert got == value and math.copysign(1, got) == math.copysign(1, value)


def test_hand_written_text_is_tolerated() -> None:
    """Comments, blank lines, free spacing and `@"quoted"` graph names; no ':' on output."""
    text = """// RUN: stridec-opt %s --pipeline=fold-views | filecheck %s
// CHECK: graph @"my graph"

graph @"my graph"   {   // trailing comment
  %in = input {name = "in"}:tensor<4x1xf32>   // rank 2

  %e=expand %in{sizes=[4,3]}:tensor<4x3xf32,strided<[1,0],offset:0>>
  %s = select %e {dim = 0, index = -1} : tensor<3xf32, strided<[0], offset: 3>>
  %z = full {sizes = [], value = -inf, dtype = f64} : tensor<f64>
  output %s,%z
}
// trailing comment at the end, without a newline"""
    g = parse(text)
    assert g.name == "my graph"
    out_s, out_z = g.outputs
    assert out_s.type.layout == Layout((3,), (0,), 3)
    assert out_z.shape == () and g.ops[3].attrs["value"] == -math.inf
    (result_s, result_z) = run_reference(g, torch.arange(4.0).reshape(4, 1))
    assert torch.equal(result_s, torch.full((3,), 3.0))
    assert result_z.item() == -math.inf


def test_value_names_are_local_labels() -> None:
    """SSA names are only labels: any names parse, and the printer renumbers them."""
    text = (
        "graph @g {\n"
        '  %a.b = input {name = "x"} : tensor<2xf32>\n'
        "  %7, %_q = split %a.b {sizes = [1], dim = 0} : "
        "tensor<1xf32>, tensor<1xf32, strided<[1], offset: 1>>\n"
        "  output %_q, %7\n"
        "}\n"
    )
    g = parse(text)
    assert str(g) == (
        "graph @g {\n"
        '  %x = input {name = "x"} : tensor<2xf32>\n'
        "  %0, %1 = split %x {sizes = [1], dim = 0} : "
        "tensor<1xf32>, tensor<1xf32, strided<[1], offset: 1>>\n"
        "  output %1, %0\n"
        "}\n"
    )


DOC = Path(__file__).resolve().parents[2] / "docs" / "text-ir.md"


def test_docs_examples_are_what_the_printer_writes() -> None:
    """Every ```mlir block of docs/text-ir.md parses and prints as written (less comments);
    together they show every op."""
    blocks = re.findall(r"```mlir\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert blocks
    shown: set[str] = set()
    for block in blocks:
        g = parse(block)
        without_comments = "".join(
            line + "\n" for line in block.splitlines() if not line.lstrip().startswith("//")
        )
        assert str(g) == without_comments
        g.verify()
        shown |= {op.name for op in g}
    assert shown == set(OP_REGISTRY)


# -- random graphs ------------------------------------------------------------------------

NAME_CHARS = string.ascii_letters + string.digits + "_. \"\\\n\t%@{}/<>'\u00e9\u4e2d\U0001f600\x00"
names = st.text(alphabet=NAME_CHARS, min_size=0, max_size=8)
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,6}", fullmatch=True)
# No uint32 among the values ops are drawn on: torch's CPU kernels for it are patchy (no
# flip, no pad), which is the reference's business, not the parser's. Philox bits and
# states (uint32) are outputs only.
DTYPES = "float16 bfloat16 float32 float64 int8 uint8 int16 int32 int64 bool".split()
FLOAT_FILLS = [0.1, -0.0, 1.5, -2.25, 1e-05, math.inf, -math.inf, math.nan]


def fill_for(draw: st.DrawFn, dtype: str) -> object:
    """A fill value the reference can store in `dtype` (torch refuses overflowing fills)."""
    if dtype == "bool":
        return draw(st.sampled_from([True, False, 0, 1, 0.1, math.nan]))
    if dtype in ("float16", "bfloat16", "float32"):
        return draw(st.sampled_from([0, 3, -7, True, *FLOAT_FILLS]))
    if dtype == "float64":
        return draw(st.sampled_from([0, -7, 1e300, -1e-300, *FLOAT_FILLS]))
    if dtype == "uint8":
        return draw(st.sampled_from([0, 1, 200, True, 0.5, -0.0]))
    return draw(st.sampled_from([0, 1, -5, 100, False, 0.75, -0.0]))


def sizes_of(draw: st.DrawFn, max_rank: int = 4) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(0, 4), max_size=max_rank)))


def dim_of(draw: st.DrawFn, rank: int) -> int:
    return draw(st.integers(-max(rank, 1), max(rank, 1) - 1))


def reshaped_sizes(draw: st.DrawFn, sizes: tuple[int, ...]) -> tuple[int, ...]:
    numel = math.prod(sizes)
    choice = draw(st.integers(0, 3))
    if choice == 0 or not sizes:
        return (-1,) if draw(st.booleans()) else (numel,)
    if choice == 1 and len(sizes) >= 2:  # merge two neighbours
        k = draw(st.integers(0, len(sizes) - 2))
        return sizes[:k] + (sizes[k] * sizes[k + 1],) + sizes[k + 2 :]
    if choice == 2:  # split one dim off a unit
        k = draw(st.integers(0, len(sizes) - 1))
        return sizes[:k] + (1, sizes[k]) + sizes[k + 1 :]
    return tuple(reversed(sizes))


STEP_KINDS = (
    "permute transpose expand slice select squeeze unsqueeze flip reshape view flatten unfold "
    "diagonal as_strided split contiguous copy pack unpack pad cast cat full"
).split()


def random_step(draw: st.DrawFn, g: Graph, v: Value) -> object:
    """One random op on `v` (may raise a StridecError when the drawn arguments do not fit)."""
    sizes, rank = v.shape, v.ndim
    dtype = v.dtype.name
    kind = draw(st.sampled_from(STEP_KINDS))
    if kind == "permute":
        return v.permute(*draw(st.permutations(range(rank))))
    if kind == "transpose":
        return v.transpose(dim_of(draw, rank), dim_of(draw, rank))
    if kind == "expand":
        lead = tuple(draw(st.lists(st.integers(0, 3), max_size=max(0, 5 - rank))))
        return v.expand(
            *lead,
            *(
                draw(st.sampled_from([s, -1, 3])) if s == 1 else draw(st.sampled_from([s, -1]))
                for s in sizes
            ),
        )
    if kind == "slice":
        bound = st.none() | st.integers(-6, 6)
        return v.slice(dim_of(draw, rank), draw(bound), draw(bound), draw(st.integers(1, 3)))
    if kind == "select":
        d = dim_of(draw, rank)
        n = sizes[d] if rank else 1
        return v.select(d, draw(st.integers(-n, max(n - 1, 0))))
    if kind == "squeeze":
        if draw(st.booleans()):
            return v.squeeze()
        return v.squeeze(draw(st.lists(st.integers(-rank, max(rank - 1, 0)), unique=True)))
    if kind == "unsqueeze":
        return v.unsqueeze(draw(st.integers(-rank - 1, rank)))
    if kind == "flip":
        return v.flip(*draw(st.lists(st.integers(0, max(rank - 1, 0)), unique=True)))
    if kind in ("reshape", "view"):
        return getattr(v, kind)(*reshaped_sizes(draw, sizes))
    if kind == "flatten":
        return v.flatten(dim_of(draw, rank), dim_of(draw, rank))
    if kind == "unfold":
        return v.unfold(dim_of(draw, rank), draw(st.integers(0, 3)), draw(st.integers(1, 3)))
    if kind == "diagonal":
        return v.diagonal(draw(st.integers(-3, 3)), dim_of(draw, rank), dim_of(draw, rank))
    if kind == "as_strided":
        storage = v.root().type.layout.min_storage_size()
        new = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        strides = tuple(draw(st.lists(st.integers(0, 4), min_size=len(new), max_size=len(new))))
        extent = sum((n - 1) * s for n, s in zip(new, strides, strict=True))
        if 0 not in new:
            if extent >= storage:
                return None
            offset = draw(st.integers(0, storage - 1 - extent))
        else:
            offset = draw(st.integers(0, storage))
        return v.as_strided(new, strides, draw(st.sampled_from([offset, None])))
    if kind == "split":
        if draw(st.booleans()) or not rank:
            return v.split(draw(st.integers(1, 3)), dim_of(draw, rank))
        d = dim_of(draw, rank)
        first = draw(st.integers(0, sizes[d]))
        return v.split([first, sizes[d] - first], d)
    if kind == "contiguous":
        return v.contiguous()
    if kind == "copy":
        order = draw(st.permutations(range(rank)))
        layout = Layout.for_order(sizes, order)
        if draw(st.booleans()):
            layout = Layout(sizes, layout.strides, draw(st.integers(0, 3)))
        return v.copy_to(layout, dtype=draw(st.sampled_from([None, *DTYPES])))
    if kind == "pack":
        fmt = draw(st.sampled_from(["NHWC", "NCHW4", "CHWN4", "pitched<8>"]))
        return v.pack(fmt, fill=fill_for(draw, dtype))
    if kind == "unpack":
        fmt = draw(st.sampled_from(["NHWC", "NCHW4", "CHWN4"]))
        return v.pack(fmt).unpack(fmt, sizes[1] if rank > 1 else 0)
    if kind == "pad":
        pad = draw(st.lists(st.integers(-1, 2), max_size=2 * rank))
        return B.pad(v, pad[: len(pad) // 2 * 2], value=fill_for(draw, dtype))
    if kind == "cast":
        return v.to(draw(st.sampled_from(DTYPES)))
    if kind == "cat":
        return B.cat([v, v.flip(*range(rank))], dim_of(draw, rank))
    new_dtype = draw(st.sampled_from(DTYPES))
    return g.full(sizes_of(draw), fill_for(draw, new_dtype), new_dtype)


@st.composite
def random_graphs(draw: st.DrawFn) -> tuple[Graph, list[torch.Tensor]]:
    g = Graph(draw(st.one_of(identifiers, names)))
    input_names = draw(
        st.lists(st.one_of(identifiers, names.filter(bool)), min_size=1, max_size=3, unique=True)
    )
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    inputs: list[torch.Tensor] = []
    pool: list[Value] = []
    results: list[Value] = []
    for name in input_names:
        sizes = sizes_of(draw)
        dtype = draw(st.sampled_from(DTYPES))
        pool.append(g.input(name, sizes, dtype))
        inputs.append(random_input(sizes, getattr(torch, dtype), gen))
    if draw(st.booleans()):
        state = g.input("philox state", (6,), "uint32")
        inputs.append(
            torch.tensor(
                draw(st.lists(st.integers(0, 2**31), min_size=6, max_size=6)), dtype=torch.int64
            ).to(torch.uint32)
        )
        # uint32 bits and states are outputs only (see DTYPES)
        if draw(st.booleans()):
            results.extend(g.philox(state, sizes_of(draw)))
        else:
            # rank >= 1: the reference returns shape (1,) for sizes [] (reported)
            low, high = sorted([draw(st.sampled_from([0.0, -1.0, 0.1])),
                                draw(st.sampled_from([1.0, 2.5, 1e-05]))])  # as uniform_
            uniform, new_state = g.philox_uniform(
                state,
                sizes_of(draw) or (1,),
                draw(st.sampled_from(["float32", "float16"])),
                low,
                high,
            )
            pool.append(uniform)
            results.append(new_state)
    for _ in range(draw(st.integers(1, 10))):
        v = draw(st.sampled_from(pool))
        try:
            made = random_step(draw, g, v)
        except StridecError:
            continue  # arguments that do not fit: the op was not added
        if made is not None:
            pool.extend(made if isinstance(made, tuple) else (made,))
    g.output(*draw(st.lists(st.sampled_from(pool + results), min_size=1, max_size=4)))
    return g, inputs


@SETTINGS
@given(random_graphs())
def test_random_graphs_round_trip(case: tuple[Graph, list[torch.Tensor]]) -> None:
    g, _ = case
    note(str(g))
    g.verify()
    round_trip(g)


@SETTINGS
@given(random_graphs())
def test_random_graphs_evaluate_identically(case: tuple[Graph, list[torch.Tensor]]) -> None:
    g, inputs = case
    note(str(g))
    assert_evaluates_identically(g, inputs)


@SETTINGS
@given(name=names, graph_name=names)
def test_any_input_and_graph_name_round_trips(name: str, graph_name: str) -> None:
    g = Graph(graph_name)
    g.output(g.input(name or "_", (1,), "int8"))
    parsed = round_trip(g)
    assert parsed.name == graph_name
    assert parsed.ops[0].attrs["name"] == (name or "_")


# -- malformed text -----------------------------------------------------------------------

GOOD = """graph @g {
  %x = input {name = "x"} : tensor<2x3x4x5xf16>
  %0 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>
  %1, %2 = split %0 {sizes = [1], dim = 0} : tensor<1x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>, tensor<1x4x5x3xf16, strided<[60, 5, 1, 20], offset: 60>>
  %3 = contiguous %0 : tensor<2x4x5x3xf16>
  output %1, %3
}
"""  # noqa: E501 (the printer writes one op per line)


def test_good_text_parses() -> None:
    assert str(parse(GOOD)) == GOOD


def expect_error(text: str, line: int, column: int, *words: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text)
    e = info.value
    assert (e.line, e.column) == (line, column), str(e)
    assert str(e).startswith(f"{line}:{column}: ")
    for w in words:
        assert w in e.reason, e.reason
    return e


def test_missing_closing_brace() -> None:
    text = GOOD[: GOOD.rindex("}")]
    end = len(text)  # the fault is the end of input
    line, column = text.count("\n", 0, end) + 1, end - (text.rfind("\n") + 1) + 1
    expect_error(text, line, column, "expected '}'", "end of input")


def test_bad_type_without_element_type() -> None:
    text = GOOD.replace(
        "%3 = contiguous %0 : tensor<2x4x5x3xf16>", "%3 = contiguous %0 : tensor<2x4x5x3>"
    )
    line, column = position(text, "3>\n")
    expect_error(text, line, column + 1, "expected 'x' after size 3", "got '>'")


def test_bad_type_keyword() -> None:
    text = GOOD.replace(": tensor<2x3x4x5xf16>", ": tensr<2x3x4x5xf16>")
    expect_error(text, *position(text, "tensr"), "expected a tensor type", "'tensr'")


def test_unknown_op() -> None:
    text = GOOD.replace("= permute", "= permut")
    expect_error(text, *position(text, "permut"), "unknown op 'permut'", "permute")


def test_undefined_value() -> None:
    text = GOOD.replace("contiguous %0", "contiguous %7")
    expect_error(text, *position(text, "%7"), "use of undefined value %7")


def test_redefined_value() -> None:
    text = GOOD.replace("%3 = contiguous", "%2 = contiguous").replace(
        "output %1, %3", "output %1, %2"
    )
    line, column = position(text, "%2 = contiguous")
    expect_error(text, line, column, "redefinition of value %2", "line 4")


def test_bad_attribute_value() -> None:
    text = GOOD.replace("{dims = [0, 2, 3, 1]}", "{dims = [0, 2, foo, 1]}")
    expect_error(text, *position(text, "foo"), "expected an attribute value", "'foo'")


def test_attribute_value_of_the_wrong_kind() -> None:
    """Attribute validation errors (from the op) land on the op name, cause kept."""
    text = GOOD.replace("{dims = [0, 2, 3, 1]}", '{dims = "0231"}')
    e = expect_error(text, *position(text, "permute"), "permute", "dims")
    assert isinstance(e.__cause__, StridecError)


def test_wrong_number_of_result_types() -> None:
    text = GOOD.replace(", tensor<1x4x5x3xf16, strided<[60, 5, 1, 20], offset: 60>>", "")
    line, column = position(text, "tensor<1x4x5x3xf16")
    expect_error(text, line, column, "expected 2 result type(s)", "got 1")


def test_result_type_disagrees_with_inference() -> None:
    text = GOOD.replace(
        "tensor<2x4x5x3xf16, strided<[60, 5, 1, 20], offset: 0>>\n",
        "tensor<2x4x5x3xf16>\n",
    )
    # At the type written, not at the op: the op itself builds from what it is given.
    e = expect_error(
        text, *position(text, "tensor<2x4x5x3xf16>\n"), "permute: result type should be",
        "strided<[60, 5, 1, 20], offset: 0>", "got tensor<2x4x5x3xf16>",
    )
    assert isinstance(e.__cause__, VerificationError)
    # The second of two: at the second.
    text = GOOD.replace("offset: 60>>", "offset: 61>>")
    expect_error(text, *position(text, "tensor<1x4x5x3xf16, strided<[60, 5, 1, 20], offset: 61"),
                 "split: result type should be", "offset: 60", "got")


def test_layout_error_while_building_keeps_its_cause() -> None:
    text = GOOD.replace("{dims = [0, 2, 3, 1]}", "{dims = [0, 2, 2, 1]}")
    e = expect_error(text, *position(text, "permute"), "LayoutError")
    assert isinstance(e.__cause__, LayoutError)


def test_unknown_dtype_in_type() -> None:
    text = GOOD.replace("tensor<2x3x4x5xf16>", "tensor<2x3x4x5xf17>")
    expect_error(text, *position(text, "f17"), "unknown element type 'f17'", "f16")


def test_unknown_dtype_in_attribute() -> None:
    text = GOOD.replace(
        "%3 = contiguous %0 : tensor<2x4x5x3xf16>",
        "%3 = cast %0 {dtype = f17} : tensor<2x4x5x3xf16>",
    )
    expect_error(text, *position(text, "f17"), "unknown dtype 'f17'")


def test_rank_above_max_in_type() -> None:
    text = GOOD.replace(
        "%3 = contiguous %0 : tensor<2x4x5x3xf16>",
        f"%3 = contiguous %0 : tensor<{'1x' * (MAX_RANK + 1)}f16>",
    )
    expect_error(text, *position(text, "tensor<1x1x1"), f"rank {MAX_RANK + 1}",
                 f"maximum {MAX_RANK}")


def test_rank_above_max_in_attribute() -> None:
    ones = ", ".join(["1"] * (MAX_RANK + 1))
    text = GOOD.replace(
        "%3 = contiguous %0 : tensor<2x4x5x3xf16>",
        f"%3 = full {{sizes = [{ones}], value = 0, dtype = f16}} : tensor<2x4x5x3xf16>",
    )
    e = expect_error(text, *position(text, "full"), f"rank {MAX_RANK + 1}")
    assert isinstance(e.__cause__, UnsupportedError)


def test_unterminated_string() -> None:
    text = GOOD.replace('{name = "x"}', '{name = "x}')
    expect_error(text, *position(text, '"x}'), "unterminated string")


def test_bad_string_escape() -> None:
    text = GOOD.replace('{name = "x"}', '{name = "a\\qb"}')
    expect_error(text, *position(text, "\\q"), "bad string literal")


def test_garbage_character() -> None:
    text = GOOD.replace("output %1, %3", "output %1, $3")
    expect_error(text, *position(text, "$"), "unexpected character '$'")


def test_missing_colon_before_result_types() -> None:
    text = GOOD.replace(
        "%3 = contiguous %0 : tensor<2x4x5x3xf16>", "%3 = contiguous %0 {} tensor<2x4x5x3xf16>"
    )
    expect_error(
        text,
        *position(text, "tensor<2x4x5x3xf16>\n  output"),
        "expected ':' before the result types; got 'tensor'",
    )
    text = GOOD.replace("{sizes = [1], dim = 0} :", "{sizes = [1], dim = 0} {")
    line, column = position(text, "{", text.index("dim = 0}"))
    expect_error(text, line, column, "expected ':' before the result types; got '{'")


def test_unknown_attribute() -> None:
    text = GOOD.replace("{sizes = [1], dim = 0}", "{sizes = [1], axis = 0}")
    expect_error(text, *position(text, "axis"), "unknown attribute 'axis'", "sizes, dim")


def test_missing_attribute() -> None:
    text = GOOD.replace(" {dims = [0, 2, 3, 1]}", "")
    expect_error(text, *position(text, "permute"), "missing attribute 'dims'")


def test_input_attributes_come_from_the_type() -> None:
    text = GOOD.replace('{name = "x"}', '{name = "x", sizes = [2, 3, 4, 5]}')
    expect_error(text, *position(text, "sizes = [2"), "given by its result type")


def test_layout_rank_differs_from_type() -> None:
    text = GOOD.replace(
        "strided<[60, 5, 1, 20], offset: 0>>\n  %1", "strided<[60, 5, 1], offset: 0>>\n  %1"
    )
    expect_error(text, *position(text, "strided<[60, 5, 1]"), "3 stride(s) for 4 size(s)")


def test_text_after_the_graph() -> None:
    text = GOOD + "output %1\n"
    expect_error(text, *position(text, "output %1\n", GOOD.rindex("}")), "end of input")


def test_op_after_output() -> None:
    text = GOOD.replace(
        "  output %1, %3\n", "  output %1, %3\n  %4 = contiguous %1 : tensor<1x4x5x3xf16>\n"
    )
    expect_error(text, *position(text, "contiguous %1"), "'output' must be the last op")


def test_duplicate_input_names() -> None:
    text = GOOD.replace(
        "  %0 = permute", '  %y = input {name = "x"} : tensor<1xf32>\n  %0 = permute'
    )
    expect_error(text, *position(text, "input", text.index("%y")), 'input name "x"')


@pytest.mark.parametrize(
    ("old", "new", "at", "skip", "words"),
    [
        ("{sizes = [1], dim = 0}", "{sizes = [1], dim = 0, dim = 1}", "dim = 1", 0, ["twice"]),
        ("contiguous %0", "contiguous % 0", "% 0", 0, ["expected a value name after '%'"]),
        ("contiguous %0", "contiguous %0abc", "%0abc", 0, ["bad value name"]),
        ("graph @g", "graph @-g", "@-g", 0, ["expected a graph name"]),
        ("graph @g", "graph g", "g {", 0, ["expected a graph name like @main", "'g'"]),
        ("dim = 0}", "dim = " + "9" * 5000 + "}", "9999", 0, ["too long"]),
        # the 33rd '[' is one level too deep
        (
            "{sizes = [1]",
            "{sizes = " + "[" * 40 + "1" + "]" * 40,
            "{sizes = [",
            9 + 32,
            ["nested deeper than 32"],
        ),
        ("[0, 2, 3, 1]", "[0, 2, 3, 1", "1} :", 1, ["expected ']' or ','", "'}'"]),
        ("output %1, %3", "%9 = output %1, %3", "%9", 0, ["'output' has no results"]),
        ("output %1, %3", "output %1, %3 : tensor<f32>", ": tensor<f32>", 0, ["no result types"]),
        (
            "offset: 60>>",
            "offset: -1>>",
            "strided<[60, 5, 1, 20], offset: -1",
            0,
            ["offset must be >= 0"],
        ),
        (  # a ':' with no type after it: just after the ':', not at the next line
            "%3 = contiguous %0 : tensor<2x4x5x3xf16>\n",
            "%3 = contiguous %0 :\n",
            "%3 = contiguous %0 :\n",
            len("%3 = contiguous %0 :"),
            ["expected a tensor type", "'output'"],
        ),
        (  # reported on the line that lacks the '>', just after its last token
            "tensor<2x4x5x3xf16>\n",
            "tensor<2x4x5x3xf16\n",
            "tensor<2x4x5x3xf16\n",
            len("tensor<2x4x5x3xf16"),
            ["expected '>'", "'output'"],
        ),
    ],
)
def test_more_malformed_text(old: str, new: str, at: str, skip: int, words: list[str]) -> None:
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    line, column = position(text, at)
    expect_error(text, line, column + skip, *words)


MUTATIONS = st.sampled_from(
    list('{}[]<>,=:%@"\\-0123456789x.e \n$')
    + ["tensor<", "strided<[", "none", "inf", "[[", "copy", "%0", "-1", "1e999", "f17", "//"]
)


@SETTINGS
@given(edits=st.lists(st.tuples(st.floats(0, 1), st.booleans(), MUTATIONS), min_size=1, max_size=4))
def test_mutated_text_parses_or_raises_parse_error(
    edits: list[tuple[float, bool, str]],
) -> None:
    """Whatever the damage, the parser returns a graph or raises ParseError in the text."""
    text = GOOD
    for where, delete, piece in edits:
        at = int(where * len(text))
        text = text[:at] + text[at + 1 :] if delete else text[:at] + piece + text[at:]
    try:
        parse(text)
    except ParseError as e:
        lines = text.split("\n")
        assert 1 <= e.line <= len(lines)
        assert 1 <= e.column <= len(lines[e.line - 1]) + 1


def test_empty_text() -> None:
    expect_error("", 1, 1, "expected 'graph'", "end of input")
    expect_error("// only a comment\n\n", 3, 1, "expected 'graph'")


def test_position_counts_characters_not_bytes() -> None:
    text = 'graph @"\u00e9\U0001f600" { $ }'
    expect_error(text, 1, text.index("$") + 1, "unexpected character")
