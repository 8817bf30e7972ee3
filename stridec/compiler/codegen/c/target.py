"""The C target (`codegen.target`): kernels of the `cpu` backend, C compile units run as
calls (`codegen/c/copy.py`, `codegen/c/philox.py`; over symbolic sizes
`codegen/symbolic_c.py`). Casts convert as torch's CPU `.to()`; a kernel reads every
storage through its data pointer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from stridec.compiler.codegen.c.copy import CCopyKernel, generate_c_copy, generate_c_copy_batch
from stridec.compiler.codegen.c.philox import CPhiloxKernel, generate_c_philox
from stridec.compiler.codegen.merge import merge_copies
from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.compiler.codegen.program import KernelInfo
from stridec.compiler.codegen.spec import CopySpec, Tuning
from stridec.compiler.codegen.symbolic_c import generate_c_copy_symbolic
from stridec.compiler.codegen.target import Target

__all__ = ["CTarget"]


class CTarget(Target):
    """C for the `cpu` backend; `tuning` (a GPU's block sizes) does not apply."""

    name: ClassVar[str] = "c"
    language: ClassVar[str] = "c"
    backend: ClassVar[str] = "cpu"
    typed_storages: ClassVar[bool] = False

    def copy(self, spec: CopySpec, tuning: Tuning | None = None,
             hint: Mapping[str, int] | None = None) -> CCopyKernel:
        if hint is not None:
            return generate_c_copy_symbolic([spec], [(0, 1)], hint)
        return generate_c_copy(spec)

    def copy_batch(self, specs: Sequence[CopySpec], tuning: Tuning | None = None,
                   hint: Mapping[str, int] | None = None) -> CCopyKernel:
        if hint is not None:
            return generate_c_copy_symbolic(specs, [(j + 1, 0) for j in range(len(specs))],
                                            hint)
        return generate_c_copy_batch(specs)

    def philox(self, spec: PhiloxSpec, tuning: Tuning | None = None,
               hint: Mapping[str, int] | None = None) -> CPhiloxKernel:
        return generate_c_philox(spec, spec.state_index, hint=hint)

    def info(self, kernel: Any) -> KernelInfo:
        return KernelInfo(
            kind=kernel.kind, name=kernel.name, source=kernel.source, grid=(1,),
            constexprs={}, num_warps=1, strategy=kernel.strategy, index_bits=64, lang="c",
            calls=kernel.calls,
        )

    def merge(self, specs: Sequence[CopySpec], sources: Sequence[int],
              hint: Mapping[str, int] | None = None
              ) -> list[tuple[CopySpec, tuple[int, ...]]]:
        # Members of one source on a grid of offsets are one copy (codegen/merge.py); a
        # class over symbolic sizes keeps each copy (its offsets are expressions).
        if hint is not None:
            return super().merge(specs, sources, hint)
        return merge_copies(specs, sources)
