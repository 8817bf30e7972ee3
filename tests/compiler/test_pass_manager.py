"""The pass manager: the registry, pipelines as strings, options, verification after every
pass (a pass that breaks the IR is named), printing the IR after passes, timing."""

from __future__ import annotations

import dataclasses
import importlib
import io
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

import stridec
from stridec.compiler.pass_manager import (
    DEFAULT_PIPELINE,
    PASS_REGISTRY,
    Pass,
    PassManager,
    parse_pipeline,
)
from stridec.compiler.passes.plan_memory import OutputPlan
from stridec.errors import (
    InternalError,
    LayoutError,
    StridecError,
    UnsupportedError,
)
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.types import TensorType

SPEC_PIPELINE = [
    "canonicalize", "fold-views", "lower-formats", "fuse-copies", "eliminate-copies", "dce",
    "cse", "plan-memory", "merge-fills",
]


def _nhwc() -> Graph:
    g = stridec.Graph("nhwc")
    x = g.input("x", (2, 3, 4, 5))
    g.output(x.permute(0, 2, 3, 1).contiguous())
    return g


# -- registry and pipelines --------------------------------------------------------------
def test_default_pipeline_is_the_spec_order() -> None:
    assert DEFAULT_PIPELINE.split(",") == SPEC_PIPELINE
    assert [p.name for p in parse_pipeline(DEFAULT_PIPELINE)] == SPEC_PIPELINE


@pytest.mark.parametrize("name", SPEC_PIPELINE)
def test_each_pass_is_a_registered_dataclass_in_its_own_module(name: str) -> None:
    parse_pipeline("")  # loads the pass modules
    cls = PASS_REGISTRY[name]
    assert issubclass(cls, Pass) and dataclasses.is_dataclass(cls)
    assert cls.name == name
    module = importlib.import_module(cls.__module__)
    assert module.__name__ == "stridec.compiler.passes." + name.replace("-", "_")


def test_pipeline_keeps_order_and_repeats() -> None:
    passes = parse_pipeline(" dce , canonicalize,dce ")
    assert [p.name for p in passes] == ["dce", "canonicalize", "dce"]
    assert parse_pipeline("") == []


def test_unknown_pass_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnsupportedError, match=r"unknown pass 'fold-view'.*fold-views"):
        parse_pipeline("canonicalize,fold-view")


def test_malformed_pipeline_is_rejected() -> None:
    with pytest.raises(UnsupportedError, match="cannot read"):
        parse_pipeline("canonicalize;dce")


def test_pass_options_become_fields() -> None:
    p, q = parse_pipeline("plan-memory{copy-aliased-outputs=true},canonicalize{max-sweeps=3}")
    assert p.copy_aliased_outputs is True
    assert q.max_sweeps == 3
    assert parse_pipeline("plan-memory")[0].copy_aliased_outputs is False


def test_unknown_option_is_named_with_the_known_ones() -> None:
    with pytest.raises(UnsupportedError, match=r"unknown option 'max-sweep'.*max-sweeps"):
        parse_pipeline("canonicalize{max-sweep=3}")


def test_option_of_the_wrong_type_is_rejected() -> None:
    """The message names the option as the pipeline spells it (a hyphen), not the field."""
    with pytest.raises(UnsupportedError, match=r"option 'max-sweeps' expects int; got 'many'"):
        parse_pipeline("canonicalize{max-sweeps=many}")
    with pytest.raises(UnsupportedError, match=r"expects bool; got 'yes'"):
        parse_pipeline("plan-memory{copy-aliased-outputs=yes}")


def test_empty_pipeline_leaves_the_graph_alone() -> None:
    g = _nhwc()
    before = str(g)
    PassManager.parse("").run(g)
    assert str(g) == before


# -- verification after every pass --------------------------------------------------------
@dataclass
class _BreaksTypes(Pass):
    """Gives the first view a result type its operand does not imply."""

    name: ClassVar[str] = "test-breaks-types"

    def run(self, graph: Graph) -> None:
        op = next(op for op in graph.ops if op.name == "permute")
        op.results[0].type = TensorType((2, 4, 5, 3), "float32", Layout((2, 4, 5, 3), (1, 1, 1, 1)))


@dataclass
class _Crashes(Pass):
    name: ClassVar[str] = "test-crashes"

    def run(self, graph: Graph) -> None:
        raise KeyError("oops")


@dataclass
class _RaisesLayoutError(Pass):
    name: ClassVar[str] = "test-layout-error"

    def run(self, graph: Graph) -> None:
        raise LayoutError("layout: sizes (4,) and strides (1, 1) differ")


@pytest.fixture
def test_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    parse_pipeline("")
    for cls in (_BreaksTypes, _Crashes, _RaisesLayoutError):
        monkeypatch.setitem(PASS_REGISTRY, cls.name, cls)


@pytest.mark.usefixtures("test_passes")
def test_a_pass_that_breaks_the_ir_is_named() -> None:
    with pytest.raises(InternalError, match=r"after pass 'test-breaks-types': op #1 'permute'"):
        PassManager.parse("canonicalize,test-breaks-types,dce").run(_nhwc())


@pytest.mark.usefixtures("test_passes")
def test_without_verify_each_the_broken_ir_goes_through() -> None:
    PassManager.parse("test-breaks-types", verify_each=False).run(_nhwc())


@pytest.mark.usefixtures("test_passes")
def test_a_pass_that_crashes_is_named_as_a_bug_with_its_traceback() -> None:
    """A crash inside a pass is no mistake of the caller: an InternalError (not a
    StridecError) saying so, with the original exception and its traceback as the cause."""
    with pytest.raises(InternalError, match=r"bug in stridec: pass 'test-crashes' raised KeyError"
                       ) as e:
        PassManager.parse("dce,test-crashes").run(_nhwc())
    assert not isinstance(e.value, StridecError)
    assert isinstance(e.value.__cause__, KeyError) and e.value.__cause__.__traceback__


@pytest.mark.usefixtures("test_passes")
def test_a_stridec_error_in_a_pass_keeps_its_kind_and_names_the_pass() -> None:
    with pytest.raises(LayoutError, match=r"^pass 'test-layout-error': layout: sizes"):
        PassManager.parse("test-layout-error").run(_nhwc())


@pytest.mark.parametrize("name", SPEC_PIPELINE)
def test_each_pass_alone_leaves_verifiable_ir(name: str) -> None:
    g = stridec.Graph("mixed")
    x = g.input("x", (2, 3, 4, 5), "float16")
    y = x.transpose(1, 3).contiguous().reshape(2, 5, 12).to("float32")
    z = stridec.pad(x[:, :, 1:].pack("NCHW4").unpack("NCHW4", 3), (1, 0))
    g.output(y.flip(2), z, stridec.cat([x, x.flip(1)], 1), x[0, 0].t())
    PassManager.parse(name).run(g)
    g.verify()


# -- printing and timing ------------------------------------------------------------------
def test_print_ir_after_all_dumps_each_pass_in_order() -> None:
    out = io.StringIO()
    pm = PassManager.parse("canonicalize,fold-views,dce", print_ir_after_all=True, stream=out)
    pm.run(_nhwc())
    text = out.getvalue()
    dumps = [line for line in text.splitlines() if line.startswith("// -----// IR Dump After")]
    names = ("canonicalize", "fold-views", "dce")
    assert dumps == [f"// -----// IR Dump After {n} //----- //" for n in names]
    after_fold = text.split("IR Dump After fold-views")[1].split("IR Dump After dce")[0]
    assert "as_strided %x" in after_fold and "permute" not in after_fold


def test_print_ir_after_a_named_pass_only() -> None:
    out = io.StringIO()
    PassManager.parse(DEFAULT_PIPELINE, print_ir_after=("lower-formats",), stream=out).run(_nhwc())
    text = out.getvalue()
    assert text.count("IR Dump After") == 1
    assert "IR Dump After lower-formats" in text and "contiguous" not in text
    assert "copy %x" in text


def test_each_pass_is_timed() -> None:
    pm = PassManager.parse(DEFAULT_PIPELINE)
    pm.run(_nhwc())
    assert [t.name for t in pm.timings] == SPEC_PIPELINE
    assert all(t.seconds >= 0 for t in pm.timings)
    report = pm.timing_report()
    for name in SPEC_PIPELINE:
        assert name in report


def test_on_pass_sees_the_graph_after_each_pass() -> None:
    seen: list[tuple[str, int]] = []
    pm = PassManager.parse(DEFAULT_PIPELINE, on_pass=lambda p, g: seen.append((p.name, len(g.ops))))
    pm.run(_nhwc())
    assert [name for name, _ in seen] == SPEC_PIPELINE
    assert seen[-1][1] == 3  # input, one copy, output


# -- plan-memory's plan -------------------------------------------------------------------
def test_memory_plan_names_aliased_inputs() -> None:
    g = stridec.Graph("plan")
    x = g.input("x", (2, 3))
    g.output(x.t(), x.t().contiguous(), x, x.flip(0))
    PassManager.parse().run(g)
    assert g.memory_plan == [
        OutputPlan(0, "x", Layout((3, 2), (1, 3), 0)),
        OutputPlan(1, None, Layout((3, 2), (2, 1), 0)),
        OutputPlan(2, "x", Layout((2, 3), (3, 1), 0)),
        OutputPlan(3, None, Layout((2, 3), (3, 1), 0)),  # a negative stride: copied
    ]


def test_copy_aliased_outputs_copies_views_of_inputs() -> None:
    g = stridec.Graph("custom_op")
    x = g.input("x", (2, 3))
    g.output(x.t(), x)
    pipeline = DEFAULT_PIPELINE.replace("plan-memory", "plan-memory{copy-aliased-outputs=true}")
    PassManager.parse(pipeline).run(g)
    assert [p.aliases_input for p in g.memory_plan] == [None, None]
    assert [op.name for op in g.ops].count("strided_copy") == 2
    t = torch.arange(6.0).reshape(2, 3)
    got = stridec.run_reference(g, t)
    torch.testing.assert_close(got[0], t.t())
    torch.testing.assert_close(got[1], t)


def test_the_collector_is_paused_during_a_run_and_restored_after() -> None:
    """A pipeline runs with Python's cyclic GC off (its cost grows with the heap) and
    leaves it as it found it, on success and on a failing pass alike."""
    import gc

    import stridec
    from stridec.compiler.pass_manager import PASS_REGISTRY, Pass, PassManager

    seen: list[bool] = []

    class Probe(Pass):
        name = "test-gc-probe"

        def run(self, graph: stridec.Graph) -> None:
            seen.append(gc.isenabled())

    class Boom(Pass):
        name = "test-gc-boom"

        def run(self, graph: stridec.Graph) -> None:
            raise RuntimeError("boom")

    g = stridec.Graph("gc")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous())
    assert gc.isenabled()
    PassManager([Probe()]).run(g)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(Exception, match="boom"):
        PassManager([Probe(), Boom()]).run(g)
    assert gc.isenabled()
    gc.disable()
    try:
        PassManager([Probe()]).run(g)
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
    assert "test-gc-probe" not in PASS_REGISTRY
