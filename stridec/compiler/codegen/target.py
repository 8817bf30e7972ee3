"""Code-generation targets: what `lower_to_program` asks of a language it writes kernels
in (docs/adding-a-target.md).

Lowering decides *what* runs (which copies share a launch, which storage each reads and
writes, in what order); a target decides *how* each kernel is written, as tinygrad's
renderers do for one scheduled graph. The plans are the targets' common ground: a copy's
`CopySpec` and a philox op's `PhiloxSpec` / `codegen.philox_plan.plan_philox`. A target is
one object of a `Target` subclass:

- `copy(spec)`: the kernel of one copy, launched over the storages `(src, dst)`;
- `copy_batch(specs)`: one kernel of copies into disjoint boxes of one buffer, launched
  over `(dst, src_0, …)`;
- `philox(spec)`: the kernel of a `philox` / `philox_uniform` op, over `(state, dst,
  new_state)`;
- `merge(specs, sources)`: the copies of one buffer as the target launches them (the C
  target runs copies on a grid of offsets as one; by default each stays itself);
- `info(kernel)`: the kernel as the `Program` records it (`KernelInfo`), the source and
  the numbers the runtime's backend needs to build, cache, load and launch it;
- `name` (what `lower_to_program(graph, name)` takes), `language` (`KernelInfo.lang` of its
  kernels), `backend` (the runtime's kernel backend that runs them,
  `stridec.runtime.backends`), `typed_storages` (a copy kernel reads each storage viewed
  as its elements' dtype, as Triton's typed pointers do; False: through raw data
  pointers, as the C kernels do).

The registry of targets is `codegen.targets`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.compiler.codegen.program import KernelInfo
from stridec.compiler.codegen.spec import CopySpec, Tuning

__all__ = ["Target"]


class Target(ABC):
    """One language kernels are generated in (the module docstring lists the members).
    `tuning` overrides a kernel's plan (`bench/tune.py`; a target may ignore it); `hint`
    is the binding whose class a spec over symbolic sizes is generated for (None for a
    static spec)."""

    name: ClassVar[str]
    language: ClassVar[str]
    backend: ClassVar[str]
    typed_storages: ClassVar[bool]

    @abstractmethod
    def copy(self, spec: CopySpec, tuning: Tuning | None = None,
             hint: Mapping[str, int] | None = None) -> Any:
        """The kernel of one copy, launched over `(src, dst)`."""

    @abstractmethod
    def copy_batch(self, specs: Sequence[CopySpec], tuning: Tuning | None = None,
                   hint: Mapping[str, int] | None = None) -> Any:
        """One kernel of `specs`, copies into disjoint boxes of one buffer that none of
        them reads, launched over `(dst, src_0, …)`."""

    @abstractmethod
    def philox(self, spec: PhiloxSpec, tuning: Tuning | None = None,
               hint: Mapping[str, int] | None = None) -> Any:
        """The kernel of a philox op, launched over `(state, dst, new_state)`."""

    @abstractmethod
    def info(self, kernel: Any) -> KernelInfo:
        """`kernel` (what `copy`, `copy_batch` or `philox` returned) as a `Program`
        records it."""

    def merge(self, specs: Sequence[CopySpec], sources: Sequence[int],
              hint: Mapping[str, int] | None = None
              ) -> list[tuple[CopySpec, tuple[int, ...]]]:
        """`specs`, copies into one buffer (copy j reads `sources[j]`), as the copies
        this target launches: (copy, the indices of the specs it carries out), in order.
        Each one as it is, unless a target knows better."""
        return [(spec, (j,)) for j, spec in enumerate(specs)]
