"""Torch fidelity (docs/semantics.md): every backend returns what torch returns -- values,
strides, storage offset, and which inputs each output shares memory with.

Each program is written once as a function of tensor-like values and run twice: on a
builder `Value` (or traced by `stridec.trace`) and compiled for every CPU backend, and on
the torch tensor itself, the oracle. Inputs come contiguous and not: transposed,
stepped, expanded, at an offset.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch_oracle import check_against_torch, storage

import stridec
from stridec import Layout
from stridec.errors import StridecError, UnsupportedError, VerificationError
from stridec.runtime.compile import BACKENDS

CPU_BACKENDS = [b for b in BACKENDS if b not in ("auto", "triton")]


def arg(kind: str, sizes: tuple[int, ...] = (4, 6)) -> torch.Tensor:
    """A float32 argument of `sizes` laid out as `kind` says, values 0, 1, 2, ..."""
    n = math.prod(sizes)
    values = torch.arange(n, dtype=torch.float32)
    if kind == "contiguous":
        return values.reshape(sizes).clone()
    if kind == "transposed":  # the same sizes, column-major
        return values.reshape(sizes[::-1]).clone().t() if len(sizes) == 2 else values
    if kind == "stepped":  # every other row and column of a bigger tensor, at an offset
        big = torch.zeros(sizes[0] * 2 + 1, sizes[1] * 2)
        view = big[1::2, ::2]
        view.copy_(values.reshape(sizes))
        return view
    if kind == "expanded":  # a row repeated: stride 0
        return values[: sizes[1]].clone().expand(sizes)
    if kind == "offset":  # row-major at offset 5
        return torch.as_strided(torch.cat([torch.zeros(5), values]), sizes, (sizes[1], 1), 5)
    raise AssertionError(kind)


KINDS = ("contiguous", "transposed", "stepped", "expanded", "offset")


def run_builder(fn: Callable[[Any], Any], x: torch.Tensor, backend: str) -> Any:
    g = stridec.Graph("fidelity")
    v = g.input("x", tuple(x.shape), "float32")
    out = fn(v)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return stridec.compile(g, backend=backend)(x)


# Programs whose torch result is new memory, though the copy may move nothing.
FRESH: dict[str, Callable[[Any], Any]] = {
    "clone": lambda x: x.clone(),
    "clone_of_transpose": lambda x: x.t().clone(),
    "clone_then_slice": lambda x: x.clone()[1:],
    "clone_then_contiguous": lambda x: x.clone()[1:].contiguous(),
    "pad_nothing": lambda x: stridec.pad(x, (0, 0)) if isinstance(x, stridec.Value)
    else F.pad(x, (0, 0)),
    "cat_of_one": lambda x: stridec.cat([x], 1) if isinstance(x, stridec.Value)
    else torch.cat([x], 1),
    "flip_twice": lambda x: x.flip(0).flip(0),
    "flip_size1_dim": lambda x: x[:1].flip(0),
    "transpose_back": lambda x: x.t().contiguous().t().contiguous(),
    "copying_reshape_back": lambda x: x.t().reshape(-1).view(x.shape[1], x.shape[0]).t(),
    "flip_then_select": lambda x: x.flip(0)[0],
}

# Programs whose torch result is (or may be) a view of the input.
VIEWS: dict[str, Callable[[Any], Any]] = {
    "contiguous": lambda x: x.contiguous(),
    "contiguous_of_rows": lambda x: x[1:].contiguous(),
    "transpose": lambda x: x.t(),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 2), 1),
    "to_same_dtype": lambda x: x.to(torch.float32) if isinstance(x, torch.Tensor)
    else x.to("float32"),
    "reshape": lambda x: x.reshape(-1),
    "several": lambda x: (x.t(), x.contiguous(), x[:, 1:]),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(FRESH) + sorted(VIEWS))
def test_builder_programs_alias_exactly_where_torch_does(name: str, kind: str,
                                                         backend: str) -> None:
    fn = FRESH.get(name) or VIEWS[name]
    x = arg(kind)
    if name == "as_strided" and kind in ("expanded",):
        pytest.skip("as_strided reads past an expanded tensor's 6-element storage")
    want = fn(x)
    before = x.clone()
    got = run_builder(fn, x, backend)
    check_against_torch(got, want, (x,))
    assert torch.equal(x, before)
    wants = want if isinstance(want, tuple) else (want,)
    for out, e in zip(got if isinstance(got, tuple) else (got,), wants, strict=True):
        if storage(e) != storage(x) and out.numel():  # a write to new memory leaves x alone
            out.add_(1)
            assert torch.equal(x, before)


TRACED: dict[str, Callable[[torch.Tensor], Any]] = {
    "clone": lambda x: x.clone(),
    "clone_of_transpose": lambda x: x.t().clone(),
    "contiguous": lambda x: x.contiguous(),
    "contiguous_channels_last": lambda x: x.reshape(1, 2, 3, 4).contiguous(
        memory_format=torch.channels_last),
    "flip_view": lambda x: x.flip(0).view(-1),
    "pad_crop": lambda x: F.pad(x, (-1, 0)),
    "pad_nothing": lambda x: F.pad(x, (0, 0)),
    "cat_of_one": lambda x: torch.cat([x]),
    "repeat_once": lambda x: x.repeat(1, 1),
    "roll_nothing": lambda x: x.roll(0, 1),
    "repeat_interleave_once": lambda x: x.repeat_interleave(1, dim=0),
    "pixel_shuffle_1": lambda x: F.pixel_shuffle(x.reshape(1, 1, 4, 6), 1),
    "to_same": lambda x: x.to(torch.float32),
    "detach": lambda x: x.detach(),
}


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("kind", ("contiguous", "transposed", "offset"))
@pytest.mark.parametrize("name", sorted(TRACED))
def test_traced_programs_alias_exactly_where_torch_does(name: str, kind: str,
                                                        backend: str) -> None:
    fn = TRACED[name]
    example = arg("contiguous")
    graph = stridec.trace(fn, example)
    x = arg(kind)
    if name == "contiguous_channels_last" and kind != "contiguous":
        x = x.contiguous()  # reshape to rank 4 needs a viewable input in torch as traced
    check_or_refuse(lambda: stridec.compile(graph, backend=backend)(x), lambda: fn(x), (x,))


def check_or_refuse(run: Callable[[], Any], oracle: Callable[[], Any],
                    inputs: tuple[torch.Tensor, ...]) -> None:
    """As `check_against_torch`; where torch refuses (a `view` of a transposed flip:
    torch's flip keeps the operand's strides), a StridecError."""
    try:
        want = oracle()
    except RuntimeError:
        with pytest.raises(StridecError):
            run()
        return
    check_against_torch(run(), want, inputs)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_copy_to_keeps_the_requested_layout_and_offset(backend: str) -> None:
    """Even where the source already has the layout, the copy is new memory with exactly
    the layout asked for: sizes, strides and offset 2."""
    x = arg("contiguous")
    layouts = [Layout((4, 6), (6, 1), 2), Layout.contiguous((4, 6)), Layout((4, 6), (1, 4))]
    g = stridec.Graph("copy_to")
    v = g.input("x", (4, 6), "float32")
    g.output(*(v.copy_to(lay) for lay in layouts))
    outs = stridec.compile(g, backend=backend)(x)
    for out, lay in zip(outs, layouts, strict=True):
        assert torch.equal(out, x)
        assert (out.stride(), out.storage_offset()) == (lay.strides, lay.offset)
        assert storage(out) != storage(x)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_requested_layouts_are_the_same_on_every_backend(backend: str) -> None:
    """NHWC by copy_to, channels-last by a traced contiguous(), pad and cat of a
    channels-last tensor, and an as_strided view: the strides torch gives."""
    t = torch.randn(2, 3, 4, 5)
    g = stridec.Graph("layouts")
    v = g.input("x", (2, 3, 4, 5), "float32")
    nhwc = Layout.for_order((2, 3, 4, 5), (0, 2, 3, 1))
    cl = v.copy_to(nhwc)
    g.output(cl, stridec.pad(cl, (1, 1)), stridec.cat([cl, cl], 1), v.as_strided((3, 2), (2, 7), 1))
    outs = stridec.compile(g, backend=backend)(t)
    tc = t.contiguous(memory_format=torch.channels_last)
    wants = (tc, F.pad(tc, (1, 1)), torch.cat([tc, tc], 1), t.as_strided((3, 2), (2, 7), 1))
    check_against_torch(outs[:3], wants[:3], (t,))
    check_against_torch(outs[3], wants[3], (t,))
    traced = stridec.trace(lambda x: x.contiguous(memory_format=torch.channels_last), t)
    check_against_torch(stridec.compile(traced, backend=backend)(t), tc, (t,))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("kind", KINDS)
def test_ops_after_a_flip_read_the_flipped_tensor(kind: str, backend: str) -> None:
    """torch's flip is a new tensor (strides as clone's): as_strided, view and reshape
    over it address that tensor, and nothing of it is the input."""
    programs = [
        lambda x: x.flip(1).as_strided((3,), (1,), 0),
        lambda x: x.flip(0).view(-1),
        lambda x: x.flip(1).t().reshape(-1),
        lambda x: x.flip(0, 1).contiguous(),
        lambda x: x.t().flip(0),
        lambda x: x.flip(1)[:, 1:].as_strided((2, 2), (1, 3), 2),
    ]
    x = arg(kind)
    for fn in programs:
        check_or_refuse(lambda fn=fn: run_builder(fn, x, backend), lambda fn=fn: fn(x), (x,))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_as_strided_over_a_copy_reads_the_copy(backend: str) -> None:
    """as_strided over what torch materialized (a cast, a copying reshape, a pad, a cat)
    addresses the new tensor's storage."""
    programs = [
        (lambda v: v[1:].to("float64").as_strided((3,), (2,), 1),
         lambda x: x[1:].double().as_strided((3,), (2,), 1)),
        (lambda v: v.t().reshape(-1).as_strided((4,), (3,), 2),
         lambda x: x.t().reshape(-1).as_strided((4,), (3,), 2)),
        (lambda v: stridec.pad(v, (1, 0)).as_strided((5,), (1,), 0),
         lambda x: F.pad(x, (1, 0)).as_strided((5,), (1,), 0)),
        (lambda v: stridec.cat([v.t(), v.t()], 0).as_strided((5,), (2,), 3),
         lambda x: torch.cat([x.t(), x.t()], 0).as_strided((5,), (2,), 3)),
        (lambda v: v.expand(2, 4, 6).clone().view(-1)[::5],
         lambda x: x.expand(2, 4, 6).clone().view(-1)[::5]),
    ]
    for kind in ("contiguous", "transposed"):
        x = arg(kind)
        # (A cast keeps the operand's strides in torch, as preserve_format: that rule is
        # checked with the casts, so the cast reads a contiguous x here.)
        for build, fn in programs[kind == "transposed":]:
            check_or_refuse(lambda build=build, x=x: run_builder(build, x, backend),
                            lambda fn=fn, x=x: fn(x), (x,))


def test_a_pipeline_without_plan_memory_refuses_a_negative_stride_output() -> None:
    """An output with a negative stride can only come back through plan-memory's copy:
    without it, a StridecError naming the pipeline's gap, never torch's RuntimeError."""
    g = stridec.Graph("backwards")
    v = g.input("x", (2, 3), "float32")
    g.output(v.as_strided((2, 3), (3, -1), 2))
    x = arg("contiguous", (2, 3))
    with pytest.raises(UnsupportedError, match="negative stride.*plan-memory"):
        stridec.compile(g, backend="interpret", pipeline="fold-views,lower-formats")(x)
    pipeline = "fold-views,lower-formats,plan-memory"
    got = stridec.compile(g, backend="interpret", pipeline=pipeline)(x)
    assert torch.equal(got, x.flip(1))


def test_stridec_opt_refuses_a_negative_stride_output_without_plan_memory(
        capsys: pytest.CaptureFixture[str]) -> None:
    from stridec.tools.opt import main

    text = str(_backwards())
    path = Path(__file__).parent / "__negative_stride.ir"
    try:
        path.write_text(text)
        assert main([str(path), "--pass-pipeline=fold-views,lower-formats", "--emit=triton",
                     "--target=cpu"]) == 1
    finally:
        path.unlink()
    assert "negative stride" in capsys.readouterr().err


def _backwards() -> stridec.Graph:
    g = stridec.Graph("backwards")
    v = g.input("x", (2, 3), "float32")
    g.output(v.as_strided((2, 3), (3, -1), 2))
    return g


def test_an_output_of_nothing_is_refused_by_builder_parser_and_verifier() -> None:
    g = stridec.Graph("nothing")
    g.input("x", (2,), "float32")
    with pytest.raises(VerificationError, match="output: expected at least one"):
        g.output()
    with pytest.raises(StridecError, match="output: expected at least one"):
        stridec.parse('graph @nothing {\n  %x = input {name = "x"} : tensor<2xf32>\n  output\n}\n')
    out = g.output(g.inputs[0]) or g.output_op
    out.drop_uses()
    out.operands.clear()
    with pytest.raises(VerificationError, match="output: expected at least one"):
        g.verify()
