"""One tensor surface for the builder and `stridec.trace` (`stridec.ir.builder.SURFACE`):
every method trace understands is a `Value` method, the docs list exactly that surface,
and the same torch code — run on a `Value`, traced, or run by torch — gives torch's
values, dtypes and strides. numpy integers (anything with `__index__`) are ints wherever
torch takes one; `cat` of mixed dtypes promotes as torch does.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import stridec
import stridec.ir.builder as builder
from stridec.errors import ShapeError
from stridec.ir.builder import FUNCTIONS, SURFACE
from stridec.ir.dtypes import DTYPES
from stridec.ir.graph import Value
from stridec.runtime.compile import BACKENDS
from tests.cast_pairs import cpu_marks

trace_module = importlib.import_module("stridec.torch.trace")
CPU_BACKENDS = [b for b in BACKENDS if b in ("interpret", "reference", "cpu")]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "torch.md"


def test_every_traced_method_is_a_value_method() -> None:
    traced = trace_module._METHODS - trace_module.TRACE_ONLY
    assert set(SURFACE) - {"__getitem__", "__iter__", "__len__"} <= traced
    assert [name for name in sorted(traced) if not hasattr(Value, name)] == []
    assert [name for name in SURFACE if not hasattr(Value, name)] == []


def test_every_builder_function_is_traced_as_torchs() -> None:
    for name in FUNCTIONS:
        assert callable(getattr(builder, name)), name
        assert hasattr(torch, name) or hasattr(F, name), name
        assert f"torch.{name}" in trace_module._FUNCTIONS or name in ("pad", "full_like"), name
    assert set(trace_module.IN_PLACE_VIEWS) <= trace_module._METHODS


def test_the_docs_table_lists_the_surface() -> None:
    text = DOCS.read_text()
    section = text[text.index("## One surface"):]
    section = section[: section.index("\n## ", 4)] if "\n## " in section[4:] else section
    listed = set(re.findall(r"`([A-Za-z_][A-Za-z_0-9]*)`", "\n".join(
        line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))))
    assert listed == set(SURFACE) | set(FUNCTIONS) | set(trace_module.IN_PLACE_VIEWS)


def _arrangements() -> dict[str, torch.Tensor]:
    base = torch.arange(100, dtype=torch.float32) * 0.5 - 7
    return {
        "contiguous": base[:24].view(4, 6),
        "transposed": base[:24].view(6, 4).t(),
        "stepped": base[:48].view(4, 12)[:, ::2],
        "offset": base[5:29].view(4, 6),
    }


# Run unchanged on a torch tensor, a traced tensor and a builder Value.
PROGRAMS: dict[str, Callable] = {
    "T": lambda x: x.T,
    "mT": lambda x: x.mT.contiguous(),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "swapdims": lambda x: x.swapdims(1, 0).contiguous(),
    "moveaxis": lambda x: x.unsqueeze(0).moveaxis(0, 2),
    "unbind": lambda x: x.unbind(1)[2],
    "split": lambda x: x.split([2, 4], 1)[1],
    "chunk": lambda x: x.chunk(3, 1)[2],
    "tensor_split": lambda x: x.tensor_split(4, 1)[3],
    "tensor_split_at": lambda x: x.tensor_split([1, -2, 9], 1)[1],
    "diagonal": lambda x: x.diagonal(1),
    "diagonal_below": lambda x: x.diagonal(-2, 1, 0),
    "as_strided": lambda x: x.as_strided((3, 3), (1, 6), 2),
    "repeat": lambda x: x.repeat(2, 1, 1),
    "tile": lambda x: x.tile((2,)),
    "repeat_interleave": lambda x: x.repeat_interleave(2, 0),
    "roll": lambda x: x.roll((1, -2), (0, 1)),
    # Chains of the suite's cast libraries (tests/cast_pairs.py): every method once.
    "casts": lambda x: x.half().float().bfloat16().float().double().char().double().half()
    .float().int(),
    "casts_of_bools": lambda x: x.bool().short().double().half(),
    "casts_to_long": lambda x: x.bool().long().int(),
    "byte_bool": lambda x: x.abs().byte().bool() if isinstance(x, torch.Tensor) else None,
    "type_as": lambda x: x.t().type_as(x.half()),
    "len": lambda x: x[: len(x) - 1].contiguous(),
    "reshape_as": lambda x: x.reshape(6, 4).reshape_as(x.t()),
    "view_as_flip": lambda x: x.contiguous().view_as(x.t()).fliplr().flipud(),
    "broadcast_to": lambda x: x[:1].broadcast_to((3, 4, 6)),
    "detach": lambda x: x.detach().t(),
    "numpy_ints": lambda x: x.permute(np.int64(1), 0).reshape(np.int32(3), -1)[np.int64(1)],
    "numpy_slices": lambda x: x[np.int8(1) : np.int64(4), :: np.int16(2)].narrow(
        np.int64(1), np.int64(1), np.int64(2)
    ),
}


def _build(fn: Callable, x: torch.Tensor) -> stridec.Graph:
    g = stridec.Graph("built")
    v = g.input("x", tuple(x.shape), "float32")
    out = fn(v)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g


def _check(got: torch.Tensor, want: torch.Tensor, strides: bool, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert torch.equal(got, want), what
    if strides:
        assert got.stride() == want.stride(), (what, got.stride(), want.stride())


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("program", [p for p in PROGRAMS if p != "byte_bool"])
def test_built_and_traced_programs_are_torchs(program: str, backend: str) -> None:
    fn = PROGRAMS[program]
    example = _arrangements()["contiguous"]
    graphs = {"built": _build(fn, example), "traced": stridec.trace(fn, example)}
    for how, graph in graphs.items():
        compiled = stridec.compile(graph, backend=backend)
        for arrangement, x in _arrangements().items():
            _check(compiled(x), fn(x), True, f"{how} {arrangement}")


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_clone_keeps_torchs_layout(backend: str) -> None:
    """clone() is new memory laid out as preserve_format: a transpose's clone stays
    transposed, a stepped slice's is packed in its order, whatever the input's strides."""
    programs = [lambda x: x.t().clone(), lambda x: x.t()[:, ::2].clone(), lambda x: x.clone(),
                lambda x: x.unsqueeze(0).expand(2, 4, 6).permute(2, 0, 1).clone()]
    for fn in programs:
        for graph in (_build(fn, _arrangements()["contiguous"]),
                      stridec.trace(fn, _arrangements()["contiguous"])):
            compiled = stridec.compile(graph, backend=backend)
            for arrangement, x in _arrangements().items():
                got = compiled(x)
                _check(got, fn(x), True, f"clone {arrangement}")
                assert got.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_traced_functions_new_to_trace(backend: str) -> None:
    programs = {
        "torch.diagonal": lambda x: torch.diagonal(x, -1),
        "torch.tensor_split": lambda x: torch.tensor_split(x, [1, 5], dim=1)[2],
        "torch.as_strided": lambda x: torch.as_strided(x, (2, 2), (6, 1), 1).contiguous(),
        "torch.hstack": lambda x: torch.hstack([x, x[:, :2], x[:, 4:]]),
        "torch.hstack_1d": lambda x: torch.hstack([x[0], x[1, ::2]]),
        "torch.vstack": lambda x: torch.vstack([x, x[0], x[1:3]]),
        "torch.dstack": lambda x: torch.dstack([x, x[:, :6]]),
        "torch.stack": lambda x: torch.stack([x, x.flip(0)], 2),
        "numpy_pad": lambda x: F.pad(x, (np.int64(1), np.int32(2)), value=np.float32(0.5)),
    }
    for name, fn in programs.items():
        graph = stridec.trace(fn, _arrangements()["contiguous"])
        compiled = stridec.compile(graph, backend=backend)
        for arrangement, x in _arrangements().items():
            _check(compiled(x), fn(x), True, f"{name} {arrangement}")


MIXED = [("float32", "float16"), ("float16", "bfloat16"), ("int8", "uint8"), ("bool", "int32"),
         ("int64", "float16"), ("uint32", "float32"), ("bool", "bfloat16"), ("int16", "float64")]


def _promoted(a: str, b: str) -> str:
    return str(torch.promote_types(DTYPES[a].torch, DTYPES[b].torch)).removeprefix("torch.")


# On the cpu backend, a pair that casts outside the suite's cast libraries with -m slow only.
@pytest.mark.parametrize(("a", "b", "backend"), [
    pytest.param(a, b, backend, id=f"{a}-{b}-{backend}",
                 marks=[m for src in (a, b) if src != _promoted(a, b)
                        for m in cpu_marks(backend, src, _promoted(a, b))][:1])
    for a, b in MIXED for backend in CPU_BACKENDS])
def test_cat_promotes_as_torch(a: str, b: str, backend: str) -> None:
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 3, generator=gen) * 50).to(DTYPES[a].torch)
    y = (torch.randn(2, 2, generator=gen) * 50).to(DTYPES[b].torch)
    want = torch.cat([x, y], 1)
    traced = stridec.trace(lambda x, y: torch.cat([x, y], 1), x, y)
    g = stridec.Graph("built")
    g.output(stridec.cat([g.input("x", (2, 3), a), g.input("y", (2, 2), b)], 1))
    for graph in (traced, g):
        _check(stridec.compile(graph, backend=backend)(x, y), want, True, f"{a} + {b}")


def test_cat_refuses_what_torch_cannot_promote() -> None:
    x, y = torch.zeros(2, dtype=torch.uint32), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="Promotion"):
        torch.cat([x, y])
    g = stridec.Graph("bad")
    with pytest.raises(ShapeError, match="cat: torch promotes uint32 with int32 to no dtype"):
        stridec.cat([g.input("x", (2,), "uint32"), g.input("y", (2,), "int32")])


def test_numpy_integers_are_ints_for_the_builder() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    i = np.int64
    g = stridec.Graph("numpy")
    v = g.input("x", (i(2), i(3), i(4)), "float32")
    outs = (
        v.permute(i(2), i(0), i(1)), v.transpose(i(0), np.int32(2)), v.expand(i(3), -1, -1, -1),
        v.unfold(i(2), i(2), i(1)), v.flip(i(1)), v.squeeze(i(0)), v.unsqueeze(i(1)),
        v.movedim(i(0), i(2)), v.select(i(1), i(-1)), v.split(i(2), i(2))[1],
        v.chunk(i(2), i(1))[0], v.roll(i(1), i(2)), v.repeat(i(1), i(2), i(1)),
        stridec.pad(v, (i(1), i(1))), stridec.cat([v, v], i(2)), v.flatten(i(1)),
        v.as_strided((i(2), i(2)), (i(12), i(1)), i(1)),
        g.full((i(2), i(2)), np.float32(1.5)),
    )
    g.output(*outs)
    wants = (
        x.permute(2, 0, 1), x.transpose(0, 2), x.expand(3, -1, -1, -1), x.unfold(2, 2, 1),
        x.flip(1), x.squeeze(0), x.unsqueeze(1), x.movedim(0, 2), x.select(1, -1),
        x.split(2, 2)[1], x.chunk(2, 1)[0], x.roll(1, 2), x.repeat(1, 2, 1), F.pad(x, (1, 1)),
        torch.cat([x, x], 2), x.flatten(1), x.as_strided((2, 2), (12, 1), 1),
        torch.full((2, 2), 1.5),
    )
    for got, want in zip(stridec.compile(g)(x), wants, strict=True):
        _check(got, want, True, "numpy ints")
