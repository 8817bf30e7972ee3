"""The Triton targets (`codegen.target`): "cuda", Triton kernels compiled for a GPU, and
"cpu", the same kernels for Triton's interpreter on CPU tensors (the plans differ only
where the interpreter is slow: `codegen.copy.plan_copy`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from stridec.compiler.codegen.batch import CopyBatchKernel, generate_copy_batch
from stridec.compiler.codegen.copy import CopyKernel, generate_copy
from stridec.compiler.codegen.philox import PhiloxKernel, generate_philox
from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.compiler.codegen.program import KernelInfo
from stridec.compiler.codegen.spec import CopySpec, Tuning
from stridec.compiler.codegen.target import Target

__all__ = ["TritonTarget", "TritonInterpreterTarget"]


class TritonTarget(Target):
    """Triton kernels compiled for a GPU (the `triton` backend)."""

    name: ClassVar[str] = "cuda"
    language: ClassVar[str] = "triton"
    backend: ClassVar[str] = "triton"
    typed_storages: ClassVar[bool] = True
    # Whether `tuning` sets a Philox kernel's block and warps (a GPU's launch only).
    tunes_philox: ClassVar[bool] = True

    def copy(self, spec: CopySpec, tuning: Tuning | None = None,
             hint: Mapping[str, int] | None = None) -> CopyKernel:
        return generate_copy(spec, self.name, tuning, hint)

    def copy_batch(self, specs: Sequence[CopySpec], tuning: Tuning | None = None,
                   hint: Mapping[str, int] | None = None) -> CopyBatchKernel:
        return generate_copy_batch(specs, self.name, tuning, hint)

    def philox(self, spec: PhiloxSpec, tuning: Tuning | None = None,
               hint: Mapping[str, int] | None = None) -> PhiloxKernel:
        if not self.tunes_philox:
            tuning = None
        block = tuning.blocks[0] if tuning and tuning.blocks else None
        warps = tuning.num_warps if tuning and tuning.num_warps else 4
        return generate_philox(spec, self.name, block, warps, hint=hint)

    def info(self, kernel: Any) -> KernelInfo:
        constexprs = kernel.constexprs
        if not isinstance(constexprs, dict):
            constexprs = dict(constexprs)
        return KernelInfo(
            kind=kernel.kind,
            name=kernel.name,
            source=kernel.source,
            grid=tuple(kernel.grid),
            constexprs=constexprs,
            num_warps=getattr(kernel, "num_warps", 4),
            strategy=getattr(kernel, "strategy", ""),
            index_bits=kernel.index_bits,
            params=tuple(getattr(kernel, "params", ())),
            args=tuple(getattr(kernel, "args", ())),
            detail=getattr(kernel, "detail", ""),
            limits=tuple(getattr(kernel, "limits", ())),
            lang=self.language,
        )


class TritonInterpreterTarget(TritonTarget):
    """The same Triton kernels for Triton's interpreter on CPU tensors (the `interpret`
    backend), planned for it."""

    name: ClassVar[str] = "cpu"
    backend: ClassVar[str] = "interpret"
    tunes_philox: ClassVar[bool] = False
