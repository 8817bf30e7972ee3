"""The static specializations of one compiled graph: per call specialization -- the
arguments' strides and storage offsets, the device, the kernel backend and the `out=`
placement -- one `Program`, found in the graph's own cache, the process-wide one or the
disk cache (`stridec.runtime.cache`), else compiled by the compile driver
(`stridec.compiler.driver`) and kept in all three.

    specs = Specializations(graph, inputs, pipeline=DEFAULT_PIPELINE, stats=Stats())
    found = specs.lookup(specs.key_of(tensors), device, "cpu")   # found.program
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from stridec.compiler.codegen.program import Program
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.types import TensorType
from stridec.runtime.cache import MEMORY_CACHE, cache_key
from stridec.runtime.lru import Lru
from stridec.runtime.outs import OutCall
from stridec.version import __version__

__all__ = ["Compiled", "Specializations", "Specialized", "Stats", "capability", "versions"]

# (the logger of `stridec.compile`'s messages since it first logged: docs/design.md)
logger = logging.getLogger("stridec.runtime.compile")


@dataclass
class Stats:
    """Counters of one CompiledGraph: specializations compiled (pipeline + codegen),
    cache hits (in memory or on disk), disk hits alone, and kernel launches; with
    `tune` (measured choice, `runtime/tune.py`), the copies whose plans were timed, those
    whose choice came from the wisdom, and the seconds spent timing."""

    compiles: int = 0
    cache_hits: int = 0
    disk_hits: int = 0
    launches: int = 0
    pipeline_runs: int = 0
    codegen_runs: int = 0
    tuned: int = 0
    wisdom_hits: int = 0
    tune_seconds: float = 0.0


# The package's sources a cached plan depends on: its Python and the C a plan's kernels
# are built from (codegen/c/lib), whose text a cached program holds.
SOURCE_SUFFIXES = (".py", ".c", ".h")


def source_files() -> list[Path]:
    """The files of the stridec package whose text `versions` hashes, sorted."""
    package = Path(__file__).parent.parent  # the stridec package
    return sorted(p for p in package.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())


@functools.cache
def versions() -> dict[str, str]:
    """The versions a cached plan depends on. stridec's own is its release number plus a
    hash of its sources (`source_files`), so a changed compiler never reuses plans of an
    older one."""
    from stridec.runtime.backends import triton_version

    digest = hashlib.sha256()
    package = Path(__file__).parent.parent  # the stridec package
    for path in source_files():
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return {
        "stridec": f"{__version__}+{digest.hexdigest()[:16]}",
        "torch": torch.__version__,
        "triton": triton_version() or "none",
    }


def capability(device: torch.device) -> str:
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"cuda-sm{major}{minor}"
    return device.type



class Specialized(NamedTuple):
    """`Specializations.lookup`'s answer: the program, its key in `programs`, and whether
    putting it there evicted another (a cached call may name the evicted one)."""

    program: Program
    key: tuple
    evicted: bool


class Compiled(NamedTuple):
    """`Specializations.compile`'s answer: the program, and whether it may be kept on disk
    (not where measured choice ran out of budget: a later process with more measures
    again)."""

    program: Program
    keep: bool


class Specializations:
    """The programs of one graph by specialization: `programs`, the graph's front of the
    process-wide cache (no hashing of the graph text on a hit), bounded like it, and
    `specializable`, the specializations the reference backend has checked. Callers hold
    the graph's lock around every method but `key_of`."""

    def __init__(self, graph: Graph, inputs: Sequence[tuple[str, TensorType]], *,
                 pipeline: str, stats: Stats, capacity: int,
                 copy_aliased_outputs: bool = False, tune: float | None = None) -> None:
        self.graph = graph
        self.graph_text = str(graph)
        self.inputs = list(inputs)
        self.pipeline = pipeline
        self.copy_aliased_outputs = copy_aliased_outputs
        self.tune = tune
        self.stats = stats
        self.programs: Lru[tuple, Program] = Lru(capacity)
        self.specializable: Lru[tuple, None] = Lru(capacity)

    @staticmethod
    def key_of(tensors: Sequence[torch.Tensor]) -> tuple:
        """The specialization of a call's tensors: each one's strides and storage offset."""
        return tuple((tuple(t.stride()), t.storage_offset()) for t in tensors)

    def layouts(self, spec: tuple) -> dict[str, Layout]:
        """The inputs' layouts, by name, of specialization `spec`."""
        return {
            name: Layout(t_type.sizes, strides, offset)
            for (name, t_type), (strides, offset) in zip(self.inputs, spec, strict=True)
        }

    def check(self, spec: tuple) -> None:
        """That the graph takes the layouts of `spec` (the reference backend, which
        compiles nothing, gives the same `CallError` as a compiled backend): the graph
        specialized once per spec (`specialize_inputs`)."""
        if spec in self.specializable:
            self.specializable.get(spec)  # stamped used
            return
        from stridec.compiler.driver import specialize_inputs

        specialize_inputs(self.graph, self.layouts(spec))
        self.specializable.put(spec, None)

    def compile(self, spec: tuple, target: str, outs: OutCall | None = None) -> Compiled:
        """The program of a specialization, compiled (`compile_program`)."""
        from stridec.compiler.driver import compile_program, kernel_language

        tuner = None
        if self.tune is not None and kernel_language(target) == "c":
            from stridec.runtime.tune import Tuner

            tuner = Tuner(self.tune)
        program = compile_program(
            self.graph, self.layouts(spec), target, pipeline=self.pipeline,
            copy_aliased_outputs=self.copy_aliased_outputs,
            outs=None if outs is None else (outs.storages, outs.targets), chooser=tuner)
        self.stats.pipeline_runs += 1
        self.stats.codegen_runs += 1
        if tuner is None:
            return Compiled(program, True)
        self.stats.tuned += sum(c.how == "measured" for c in tuner.choices)
        self.stats.wisdom_hits += sum(c.how == "wisdom" for c in tuner.choices)
        self.stats.tune_seconds += tuner.seconds
        return Compiled(program, tuner.complete)

    def lookup(self, spec: tuple, device: torch.device, target: str,
               outs: OutCall | None = None) -> Specialized:
        """The program of this specialization (`spec`, on `device`, for kernel backend
        `target`, writing into `outs`' storages where given)."""
        out_key = None if outs is None else outs.key
        local_key = (spec, str(device), target, out_key)
        program = self.programs.get(local_key)
        if program is not None:
            self.stats.cache_hits += 1
            return Specialized(program, local_key, False)
        key = cache_key(
            {
                "graph": self.graph_text,
                "spec": spec,
                "target": target,
                "device": capability(device),
                "pipeline": self.pipeline,
                "copy_aliased": self.copy_aliased_outputs,
                "outs": out_key,
                **versions(),
                # A tuned plan depends on the threads it was measured with.
                **({} if self.tune is None or target != "cpu"
                   else {"tune": torch.get_num_threads()}),
            }
        )
        program = MEMORY_CACHE.get_memory(key)
        if program is not None:
            self.stats.cache_hits += 1
            logger.debug("graph %r for %s: plan %s from the memory cache",
                         self.graph.name, target, key[:16])
        else:
            program = MEMORY_CACHE.get_disk(key)
            if program is not None:
                self.stats.cache_hits += 1
                self.stats.disk_hits += 1
            else:
                start = time.perf_counter()
                program, keep = self.compile(spec, target, outs)
                self.stats.compiles += 1
                logger.info("graph %r compiled for %s in %.1f ms: %d kernel(s), "
                            "plan %s", self.graph.name, target,
                            1e3 * (time.perf_counter() - start), program.launch_count,
                            key[:16])
                if keep:
                    MEMORY_CACHE.put_disk(key, program)
            MEMORY_CACHE.put_memory(key, program)
        return Specialized(program, local_key, self.programs.put(local_key, program))
