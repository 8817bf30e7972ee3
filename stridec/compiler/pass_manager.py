"""Named passes, pipelines as strings, verification and printing after every pass, timing.

    pm = PassManager.parse("canonicalize,fold-views,dce", print_ir_after_all=True)
    pm.run(graph)

A pass is a dataclass whose fields are its options and whose `name` is the kebab-case
pipeline name (xDSL's `ModulePass`); options are written `name{key=value key2=value}`,
as in MLIR's pass pipeline syntax.
"""

from __future__ import annotations

import dataclasses
import gc
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from stridec.compiler.pass_base import PASS_REGISTRY, Pass, register_pass
from stridec.errors import InternalError, StridecError, UnsupportedError, VerificationError
from stridec.ir.graph import Graph
from stridec.ir.symbols import generic_sizes
from stridec.ir.verifier import verify_graph

__all__ = ["Pass", "PassManager", "PASS_REGISTRY", "register_pass", "DEFAULT_PIPELINE"]

DEFAULT_PIPELINE = (
    "canonicalize,fold-views,lower-formats,fuse-copies,eliminate-copies,dce,cse,plan-memory,"
    "merge-fills"
)

def _load_passes() -> None:
    # Importing the package registers every pass module.
    import stridec.compiler.passes  # noqa: F401


def _convert_option(pass_name: str, key: str, f: dataclasses.Field, text: str) -> Any:
    """`text` as the type of field `f`; an error names the option `key` as the user wrote it."""
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        if "bool" in kind:
            if text not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text in ("true", "1")
        if "int" in kind:
            return int(text)
        if "float" in kind:
            return float(text)
    except ValueError:
        raise UnsupportedError(
            f"pass '{pass_name}': option '{key}' expects {kind}; got {text!r}"
        ) from None
    return text


_PIPELINE_ITEM = re.compile(r"\s*([A-Za-z0-9_-]+)\s*(?:\{([^}]*)\})?\s*(?:,|$)")


_MLIR_ANCHOR = re.compile(r"\s*builtin\.module\s*\((.*)\)\s*\Z", re.S)
_FORM = ("a flat list of passes, 'canonicalize{max-sweeps=4},fold-views' (or mlir-opt's "
         "'builtin.module(canonicalize,fold-views)')")


def parse_pipeline(text: str) -> list[Pass]:
    """`"canonicalize{max-sweeps=4},fold-views"` → pass instances, unknown names rejected.
    mlir-opt's form, the list inside `builtin.module(...)`, is read the same: a graph is
    one module, with no nested ops to anchor passes on."""
    _load_passes()
    passes: list[Pass] = []
    pos = 0
    text = text.strip()
    anchored = _MLIR_ANCHOR.match(text)
    if anchored is not None:
        text = anchored.group(1).strip()
    if "(" in text or ")" in text:
        raise UnsupportedError(
            f"pass pipeline: cannot read {text!r}: a graph has no nested ops to anchor "
            f"passes on (func.func(...)); expected {_FORM}"
        )
    while pos < len(text):
        m = _PIPELINE_ITEM.match(text, pos)
        if m is None or m.end() == pos:
            raise UnsupportedError(
                f"pass pipeline: cannot read {text[pos:]!r} in {text!r}; expected {_FORM}"
            )
        name, options = m.group(1), m.group(2)
        cls = PASS_REGISTRY.get(name)
        if cls is None:
            known = ", ".join(sorted(PASS_REGISTRY))
            raise UnsupportedError(f"pass pipeline: unknown pass '{name}' (known: {known})")
        fields = (
            {f.name.replace("_", "-"): f for f in dataclasses.fields(cls)}
            if dataclasses.is_dataclass(cls)
            else {}
        )
        kwargs = {}
        for item in (options or "").split():
            key, _, value = item.partition("=")
            f = fields.get(key)
            if f is None:
                options = ", ".join(fields) or "none"
                raise UnsupportedError(
                    f"pass '{name}': unknown option '{key}' (options: {options})"
                )
            kwargs[f.name] = _convert_option(name, key, f, value)
        passes.append(cls(**kwargs))
        pos = m.end()
    return passes


@dataclass
class PassTiming:
    name: str
    seconds: float


@dataclass
class PassManager:
    """Runs passes in order; verifies after each; optionally prints the IR after each."""

    passes: list[Pass] = field(default_factory=list)
    verify_each: bool = True
    print_ir_after_all: bool = False
    print_ir_after: tuple[str, ...] = ()
    stream: TextIO | None = None
    timings: list[PassTiming] = field(default_factory=list)
    on_pass: Callable[[Pass, Graph], None] | None = None

    @classmethod
    def parse(cls, pipeline: str = DEFAULT_PIPELINE, **options: Any) -> PassManager:
        return cls(passes=parse_pipeline(pipeline), **options)

    def run(self, graph: Graph) -> Graph:
        """Run the passes in order (verifying, printing, timing as configured). Python's
        cyclic garbage collector is paused meanwhile, as `timeit` pauses it: a pipeline
        allocates many small objects and no cycles it must free early, and each full
        collection would walk the whole heap, so its cost would grow with the graph (at
        10,000 ops it was about a fifth of the time). Collection resumes afterwards."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._run(graph)
        finally:
            if collecting:
                gc.enable()

    def _run(self, graph: Graph) -> Graph:
        out = self.stream or sys.stdout
        for p in self.passes:
            start = time.perf_counter()
            try:
                with generic_sizes():
                    p.run(graph)
            except StridecError as e:  # keep the error as it is, say which pass raised it
                e.args = (f"pass '{p.name}': {e}",)
                raise
            except Exception as e:  # a bug in a pass: say so and which pass, keep the cause
                raise InternalError(
                    f"bug in stridec: pass '{p.name}' raised {type(e).__name__}: {e} "
                    "(the traceback of the cause shows where)"
                ) from e
            self.timings.append(PassTiming(p.name, time.perf_counter() - start))
            if self.verify_each:
                try:
                    # The verdict of `graph.verify()`; an op the pass left as it was is
                    # not re-inferred (see `verify_graph`).
                    verify_graph(graph, incremental=True)
                except VerificationError as e:
                    # The graph verified before the pass (the builder, the parser and
                    # `stridec.compile` verify it), so the pass broke it: a bug in stridec.
                    raise InternalError(
                        f"bug in stridec: after pass '{p.name}': {e} (the pass left IR "
                        "that does not verify)"
                    ) from e
            if self.print_ir_after_all or p.name in self.print_ir_after:
                out.write(f"// -----// IR Dump After {p.name} //----- //\n{graph}")
            if self.on_pass is not None:
                self.on_pass(p, graph)
        return graph

    def timing_report(self) -> str:
        total = sum(t.seconds for t in self.timings) or 1e-12
        lines = ["pass                 ms      %"]
        for t in self.timings:
            lines.append(f"{t.name:<18} {t.seconds * 1e3:7.2f} {100 * t.seconds / total:6.1f}")
        return "\n".join(lines)
