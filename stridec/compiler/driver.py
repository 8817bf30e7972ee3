"""The compile driver: a graph, its inputs' layouts, a target and the `out=` placement
become a `Program` (docs/architecture.md). The runtime (`stridec.runtime.compile`) decides
*when* to compile and caches the answer; this module decides *what* compiling is:

    program = compile_program(graph, {"x": Layout((3, 2), (1, 3), 0)}, "cpu")

- `check_runnable`: what no kernel can run, refused before anything compiles;
- `specialize_inputs`: the graph over the callers' layouts (a layout it cannot take is a
  `CallError` naming the argument);
- `pipeline_passes`: the pass pipeline, with the custom-op contract where asked;
- `compile_program`: specialize, run the passes (writing outputs into `out=` storages
  where given), generate the kernels;
- `symbolic_pipeline` and `lower_class`: the same for a graph over symbolic sizes, once
  per class of bindings.

A target is a kernel backend's name ("triton", "interpret", "cpu"); `kernel_language`
says what each generates (the code-generation target whose `backend` it is,
`codegen.targets`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from stridec.compiler.codegen.program import Program
from stridec.compiler.outputs import OutStorage, OutTarget, stage_outputs, write_outputs
from stridec.compiler.pass_base import Pass
from stridec.errors import CallError, LayoutError, StridecError, UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.ops import NaturalCopyOp

__all__ = ["check_runnable", "compile_program", "kernel_language", "lower_class",
           "pipeline_passes", "specialize_inputs", "symbolic_pipeline"]


def kernel_language(target: str) -> str:
    """`lower_to_program`'s target of kernel backend `target`: the code-generation target
    whose kernels it runs (`codegen.targets.target_of_backend`: Triton for a GPU, C for
    the native CPU backend, Triton for its interpreter), the interpreter's for any other
    (the reference backend plans as the interpreter does).

    >>> kernel_language("cpu"), kernel_language("triton"), kernel_language("reference")
    ('c', 'cuda', 'cpu')
    """
    from stridec.compiler.codegen.targets import target_of_backend

    try:
        return target_of_backend(target).name
    except UnsupportedError:
        return target_of_backend("interpret").name


INT64_MAX = 2**63 - 1


def check_runnable(graph: Graph) -> None:
    """What the IR can state but no kernel can run, refused before anything compiles:

    - a value of more than 2^63 - 1 elements, or addressing an element past 2^63 - 1
      (torch sizes and kernel offsets are int64): `UnsupportedError`;
    - a `copy` whose result layout may give two elements one address (`copy_to` with a
      stride 0, or strides (1, 1) on sizes (2, 3): addresses 0+0, 0+1, 1+0 … collide),
      where the order of the writes would decide the result: `LayoutError`. The rule is
      `Layout.may_overlap`: sorted by stride, each stride exceeds the span inside it.
    """
    for position, op in enumerate(graph.ops):
        where = f"op #{position} '{op.name}'"
        for r in op.results:
            top = r.type.layout.max_index()
            if r.type.numel > INT64_MAX or (top is not None and top > INT64_MAX):
                raise UnsupportedError(
                    f"{where}: result {r.index} of sizes {list(r.type.sizes)} has "
                    f"{r.type.numel} elements and reaches element {top}; the limit is "
                    f"2^63 - 1 = {INT64_MAX}"
                )
        if isinstance(op, NaturalCopyOp) and op.layout.may_overlap():
            layout = op.layout
            raise LayoutError(
                f"{where}: result layout {layout} of sizes {list(layout.sizes)} may write "
                "two elements to one address; expected each stride, smallest first, to "
                "exceed the span of the dims inside it"
            )


def pipeline_passes(pipeline: str, copy_aliased_outputs: bool = False) -> list[Pass]:
    """The passes of `pipeline`; with `copy_aliased_outputs` (the custom-op contract),
    `plan-memory` copies an output that would be a view of an input."""
    from stridec.compiler.pass_manager import parse_pipeline
    from stridec.compiler.passes.plan_memory import PlanMemory

    passes = parse_pipeline(pipeline)
    if copy_aliased_outputs:
        passes = [dataclasses.replace(p, copy_aliased_outputs=True)
                  if isinstance(p, PlanMemory) else p for p in passes]
    return passes


def specialize_inputs(graph: Graph, layouts: Mapping[str, Layout]) -> Graph:
    """`graph` over the inputs' `layouts` (by input name); `CallError` naming the first
    argument whose layout the graph cannot take (a `view` that is no view of a
    transposed input), with the reason."""
    from stridec.compiler.specialize import specialize

    try:
        return specialize(graph, layouts)
    except StridecError as e:
        error = e
    names = list(layouts)
    culprit = names[-1]
    for k in range(1, len(names)):  # the first argument whose layout breaks it
        try:
            specialize(graph, {n: layouts[n] for n in names[:k]})
        except StridecError:
            culprit = names[k - 1]
            break
    lay = layouts[culprit]
    raise CallError(
        f"argument '{culprit}': the graph cannot take strides {list(lay.strides)} "
        f"(offset {lay.offset}): {error}"
    ) from error


def compile_program(graph: Graph, layouts: Mapping[str, Layout], target: str, *,
                    pipeline: str, copy_aliased_outputs: bool = False,
                    outs: tuple[Sequence[OutStorage], Sequence[OutTarget]] | None = None,
                    chooser: Any = None) -> Program:
    """The program of `graph` for inputs of `layouts` on kernel backend `target`: the
    graph specialized, the passes of `pipeline` run, the kernels generated. `outs`:
    (storages, targets) of a call with `out=` (`stridec.runtime.outs`): every output is
    then written into the caller's memory, none aliases an input. `chooser`: what picks
    among the ranked plans of each C copy (`codegen.c.plan.choosing`; measured choice,
    `stridec.runtime.tune.Tuner`), None for the model's first.

    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> from stridec.compiler.pass_manager import DEFAULT_PIPELINE
    >>> program = compile_program(g, {"x": Layout((2, 3), (1, 2), 0)}, "cpu",
    ...                           pipeline=DEFAULT_PIPELINE)
    >>> program.launch_count                 # x given transposed: its .t() is contiguous
    0
    """
    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.compiler.pass_manager import PassManager

    specialized = specialize_inputs(graph, layouts)
    buffers = None
    if outs is not None:
        # Every output is written into caller memory: none aliases an input.
        buffers = write_outputs(specialized, outs[0], outs[1])
        passes = pipeline_passes(pipeline)
    else:
        passes = pipeline_passes(pipeline, copy_aliased_outputs)
    PassManager(passes=passes).run(specialized)
    if outs is not None and buffers is not None:
        stage_outputs(specialized, outs[0], outs[1], buffers)
    language = kernel_language(target)
    if chooser is None or language != "c":
        return lower_to_program(specialized, language)
    from stridec.compiler.codegen.c.plan import choosing

    with choosing(chooser):
        return lower_to_program(specialized, language)


def symbolic_pipeline(graph: Graph, fixed: Mapping[str, int], *, pipeline: str,
                      copy_aliased_outputs: bool = False) -> Graph | None:
    """The passes of `pipeline` run on `graph`, over symbolic sizes, with the symbols of
    `fixed` set (what every class of bindings with those values lowers), or None where
    they cannot run for every value of the others (a view decided only per value)."""
    from stridec.compiler.pass_manager import PassManager

    try:
        bound = graph.bind(dict(fixed)) if fixed else graph.clone()
        PassManager(passes=pipeline_passes(pipeline, copy_aliased_outputs)).run(bound)
    except StridecError:
        return None
    return bound


def lower_class(graph: Graph, target: str, bindings: Mapping[str, Any]) -> Program | None:
    """The kernels of `graph` (after `symbolic_pipeline`) on `target` for the class of
    `bindings`, or None where code generation cannot serve every value of the class (a
    frame decided only per value: each binding is then compiled alone)."""
    from stridec.compiler.codegen.lower import lower_to_program

    try:
        return lower_to_program(graph, kernel_language(target), hint=bindings)
    except StridecError:
        return None
