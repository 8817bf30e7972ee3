"""Code-generation targets (`stridec.compiler.codegen.target`, `codegen.targets`): every
registered target implements the whole interface, lowering reaches kernels only through
it, and a target added at run time is lowered to like a built-in one."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

import pytest

import stridec
from stridec.compiler.codegen import targets as registry
from stridec.compiler.codegen.c.target import CTarget
from stridec.compiler.codegen.lower import lower_to_program
from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.compiler.codegen.program import KernelInfo
from stridec.compiler.codegen.spec import CopySpec, Tuning
from stridec.compiler.codegen.target import Target
from stridec.compiler.codegen.targets import (
    BUILTIN,
    register_target,
    target,
    target_of_backend,
    targets,
)
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager
from stridec.errors import CallError, UnsupportedError
from stridec.ir.dtypes import as_dtype
from stridec.runtime.backends import (
    BACKEND_KINDS,
    KERNEL_BACKENDS,
    CallForm,
    backend,
    kernel_backend,
)

F32, U32 = as_dtype("float32"), as_dtype("uint32")
INTERFACE = ("copy", "copy_batch", "philox", "info", "merge")
ATTRIBUTES = {"name": str, "language": str, "backend": str, "typed_storages": bool}


def lowered(graph: stridec.Graph) -> stridec.Graph:
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    return graph


def cat_and_philox() -> stridec.Graph:
    """A cat of a plain and a transposed input (one batch into one buffer), a philox whose
    transposed copy fuses into it, and a transposing copy."""
    g = stridec.Graph("cat_and_philox")
    x = g.input("x", (4, 6), "float32")
    y = g.input("y", (3, 4), "float32")
    s = g.input("state", (6,), "uint32")
    bits, s1 = g.philox(s, (5, 7))
    g.output(stridec.cat([x, y.t()], 1), bits.t().contiguous(), s1, x.t().contiguous())
    return g


@pytest.mark.parametrize("t", targets(), ids=lambda t: t.name)
def test_every_registered_target_implements_the_whole_interface(t: Target) -> None:
    assert isinstance(t, Target) and not type(t).__abstractmethods__
    for name, kind in ATTRIBUTES.items():
        assert isinstance(getattr(t, name), kind), f"{t.name}: {name}"
    for name in INTERFACE:  # the signatures the lowering calls
        ours = inspect.signature(getattr(Target, name)).parameters
        theirs = inspect.signature(getattr(type(t), name)).parameters
        assert list(theirs) == list(ours), f"{t.name}.{name}{tuple(theirs)}"
    assert t.backend in KERNEL_BACKENDS and target_of_backend(t.backend) is t
    copy = CopySpec((4, 6), (1, 4), 0, (6, 1), 0, F32, F32)
    other = CopySpec((4, 6), (6, 1), 0, (6, 1), 24, F32, F32)
    philox = PhiloxSpec((5, 7), (7, 1), 0, (1, 5), 0, 35, U32)
    for kind, kernel in (("copy", t.copy(copy)), ("copy", t.copy_batch([copy, other])),
                         ("philox", t.philox(philox))):
        info = t.info(kernel)
        assert isinstance(info, KernelInfo) and info.kind == kind
        assert info.lang == t.language and info.source
    parts = t.merge([copy, other], [0, 1])
    assert sorted(i for _, ix in parts for i in ix) == [0, 1]


def test_the_builtin_targets_are_registered_by_name() -> None:
    assert [t.name for t in BUILTIN] == ["cuda", "cpu", "c"]
    assert all(target(t.name) is t for t in BUILTIN) and target(BUILTIN[2]) is BUILTIN[2]
    unknown = "no code-generation target 'metal'; expected one of 'c', .*'cpu', 'cuda'"
    with pytest.raises(UnsupportedError, match=unknown):
        target("metal")
    with pytest.raises(UnsupportedError, match="backend 'metal'"):
        target_of_backend("metal")
    with pytest.raises(UnsupportedError, match="expected a Target; got str"):
        register_target("c")  # type: ignore[arg-type]
    with pytest.raises(CallError, match="philox k: no kernel backend runs c kernels on cuda "
                       "tensors; the backends of c kernels: cpu [(]cpu[)]"):
        kernel_backend("c", "cuda", "philox k")


class Recording(CTarget):
    """The C target, recording what the lowering asks of it."""

    name: ClassVar[str] = "c-recording"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def copy(self, spec: CopySpec, tuning: Tuning | None = None,
             hint: Mapping[str, int] | None = None) -> Any:
        self.asked.append("copy")
        return super().copy(spec, tuning, hint)

    def copy_batch(self, specs: Sequence[CopySpec], tuning: Tuning | None = None,
                   hint: Mapping[str, int] | None = None) -> Any:
        self.asked.append(f"copy_batch of {len(specs)}")
        return super().copy_batch(specs, tuning, hint)

    def philox(self, spec: PhiloxSpec, tuning: Tuning | None = None,
               hint: Mapping[str, int] | None = None) -> Any:
        self.asked.append("philox")
        return super().philox(spec, tuning, hint)


def test_lowering_reaches_kernels_only_through_the_target(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A target registered at run time is lowered to by name; every kernel comes from its
    methods, and the program is the built-in C target's, kernel for kernel."""
    monkeypatch.setattr(registry, "_TARGETS", dict(registry._TARGETS))  # (this test's only)
    recording = register_target(Recording())
    graph = lowered(cat_and_philox())
    program = lower_to_program(graph, "c-recording")
    assert sorted(recording.asked) == ["copy", "copy_batch of 2", "philox"]
    reference = lower_to_program(graph, "c")
    assert [asdict(k) for k in program.kernels] == [asdict(k) for k in reference.kernels]
    assert program.launches == reference.launches


@pytest.mark.parametrize("name", ["cuda", "cpu", "c"])
def test_a_target_by_name_or_object_lowers_alike(name: str) -> None:
    graph = lowered(cat_and_philox())
    by_name, by_object = lower_to_program(graph, name), lower_to_program(graph, target(name))
    assert [asdict(k) for k in by_name.kernels] == [asdict(k) for k in by_object.kernels]
    assert {k.lang for k in by_name.kernels} == {target(name).language}


def _compared_strings(path: Path) -> set[str]:
    """The string constants `path` compares with (`==`, `!=`, `in`, `not in`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                for c in ast.walk(operand):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        found.add(c.value)
    return found


def test_lowering_and_launching_branch_on_no_target() -> None:
    """Adding a target edits neither the lowering nor the runner: neither compares
    anything with a target's name or language (the runner's `device.type == "cuda"` is a
    torch device, not a target)."""
    names = {t.name for t in BUILTIN} | {t.language for t in BUILTIN}
    package = Path(stridec.__file__).parent
    assert not _compared_strings(package / "compiler" / "codegen" / "lower.py") & names
    languages = {t.language for t in BUILTIN}
    assert not _compared_strings(package / "runtime" / "launch.py") & languages


@pytest.mark.parametrize("name", KERNEL_BACKENDS)
def test_every_kernel_backend_implements_the_runtime_half(name: str) -> None:
    """Each kernel backend is the runtime half of the target that names it: its language
    and device are its `BACKEND_KINDS` row, and it says how its launchers are called."""
    if name != "cpu":
        pytest.importorskip("triton")
    on = backend(name)
    assert (on.name, (on.language, on.device)) == (name, BACKEND_KINDS[name])
    assert callable(on.load) and callable(on.load_kernel)
    t = target_of_backend(name)
    assert t.language == on.language and kernel_backend(t.language, on.device) is on
    program = lower_to_program(lowered(cat_and_philox()), t)
    forms = [on.call_form(k) for k in program.kernels]
    assert all(isinstance(f, CallForm) for f in forms) and len(forms) == 3
