"""Every public name of `stridec` has a docstring with an example, and every example is
true: each name in `stridec.__all__` that is a class or a function, and each public
method and property of those classes (the `Value` methods included, with `__call__`,
`__getitem__`, `__iter__` and `__len__`), is documented with a `>>>` example that runs
here as a doctest. An example may use `stridec`, `torch` and `Layout`, and, as the
`Value` methods' examples do, a fresh `g = stridec.Graph("g")` and
`x = g.input("x", (2, 3, 4), "float32")`. `dir(stridec)` lists the public API alone."""

from __future__ import annotations

import doctest
import inspect
import typing
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import stridec

DUNDERS = {"__call__", "__getitem__", "__iter__", "__len__"}


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties of `cls` defined in stridec (not `object`'s or an
    exception's own)."""
    for name in dir(cls):
        if name.startswith("_") and name not in DUNDERS:
            continue
        raw = inspect.getattr_static(cls, name)
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner is None or not owner.__module__.startswith("stridec"):
            continue
        if isinstance(raw, (classmethod, staticmethod)):
            raw = raw.__func__
        if callable(raw) or isinstance(raw, property):
            yield name, raw


def public_names() -> list[tuple[str, Any]]:
    names = []
    for name in stridec.__all__:
        obj = getattr(stridec, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue  # a module (`errors`), constants (DTYPES, FORMATS, __version__)
        names.append((name, obj))
        if inspect.isclass(obj):
            names += [(f"{name}.{m}", raw) for m, raw in _members(obj)]
    return names


PUBLIC = public_names()


def _doc(obj: Any) -> str:
    return (obj.__doc__ if isinstance(obj, property) else inspect.getdoc(obj)) or ""


def test_the_public_names_are_found() -> None:
    found = {name for name, _ in PUBLIC}
    assert {"Value.pack", "Value.unpack", "Graph.philox", "Graph.philox_uniform",
            "Graph.full", "Graph.output", "CompiledGraph.__call__", "Layout.view",
            "compile", "trace", "pad"} <= found
    assert len(found) > 200


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_public_name_has_a_docstring_with_an_example(name: str, obj: Any) -> None:
    doc = _doc(obj)
    assert doc.strip(), f"{name}: no docstring (help({name}) shows nothing)"
    assert ">>>" in doc, f"{name}: its docstring has no >>> example"


@pytest.mark.parametrize("name, obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_example_is_true(name: str, obj: Any) -> None:
    """The example as a doctest, in a namespace of its own (`...` in an expected line
    stands for the rest of a long message)."""
    target = obj.fget if isinstance(obj, property) else obj
    g = stridec.Graph("g")
    globs = {"stridec": stridec, "torch": torch, "Layout": stridec.Layout, "g": g,
             "x": g.input("x", (2, 3, 4), "float32")}
    test = doctest.DocTestParser().get_doctest(_doc(obj), globs, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=True)
    assert runner.failures == 0, f"{name} ({inspect.getmodule(target).__name__}):\n" + \
        "".join(report)


def test_dir_shows_the_public_api_alone() -> None:
    shown = dir(stridec)
    assert shown == sorted(stridec.__all__)
    for helper in ("Any", "annotations", "importlib"):
        assert helper not in shown


def test_as_torch_op_has_a_real_return_type() -> None:
    hints = typing.get_type_hints(stridec.CompiledGraph.as_torch_op)
    assert hints["return"] is not Any
    from stridec.torch import TorchOp

    assert hints["return"].__name__ == "TorchOperator"
    g = stridec.Graph("typed_op")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous())
    op = stridec.compile(g).as_torch_op("docstrings::typed_op")
    assert isinstance(op, hints["return"]) and isinstance(op, TorchOp)
