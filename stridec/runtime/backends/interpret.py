"""The interpret backend: the generated `@triton.jit` functions run through Triton's
interpreter (`InterpretedFunction`) on CPU tensors — no GPU, no environment variable.

Triton's interpreter patches `triton.language` globally while a kernel runs, so two
threads interpreting at once would break each other: launches take one lock.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Any

from stridec.compiler.codegen.program import Program
from stridec.runtime.backends import grid_call_form
from stridec.runtime.backends.triton import load_jit

__all__ = ["BACKEND", "InterpretBackend", "InterpretedKernel", "interpreter_fma_is_exact"]

_interpreter_lock = threading.RLock()


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would stay held in the child forever.
    global _interpreter_lock
    _interpreter_lock = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)
# id of a loaded jit function → (that function, its InterpretedFunction): the function is
# held, so its id is not reused while the entry stands.
_interpreted: dict[int, tuple[Any, Any]] = {}

_FMA_PROBE = """import triton
import triton.language as tl


@triton.jit
def stridec_fma_probe(x_ptr, out_ptr):
    a = tl.load(x_ptr)
    tl.store(out_ptr, tl.fma(a, a, tl.load(x_ptr + 1)))
"""


class InterpretedKernel:
    """A launcher of one kernel through Triton's interpreter:
    `launcher(grid, *storages, **keywords)` (`num_warps` is accepted and ignored)."""

    __slots__ = ("function",)

    def __init__(self, jit: Any) -> None:
        entry = _interpreted.get(id(jit))
        if entry is None:
            from triton.runtime.interpreter import InterpretedFunction

            entry = _interpreted[id(jit)] = (jit, InterpretedFunction(jit.fn))
        self.function = entry[1]

    def __call__(self, grid: tuple[int, ...], *args: Any, **keywords: Any) -> None:
        with _interpreter_lock:
            self.function[grid](*args, **keywords)


def interpreted(source: str, name: str) -> InterpretedKernel:
    """The launcher of kernel `name` of the Triton module `source`."""
    if "tl.fma" in source:
        _warn_if_fma_rounds_twice()
    return InterpretedKernel(load_jit(source, name))


@functools.cache
def interpreter_fma_is_exact() -> bool:
    """Whether Triton's interpreter rounds `tl.fma` once, as the GPU does.

    With a = 1 + 2^-12 and c = -(1 + 2^-11): a·a = 1 + 2^-11 + 2^-24 exactly, so one
    rounding gives 2^-24, while rounding the product first (a tie, to even: 1 + 2^-11)
    gives 0. Triton's interpreter rounds once from 3.9 on.
    """
    import torch

    x = torch.tensor([1 + 2**-12, -(1 + 2**-11)], dtype=torch.float32)
    out = torch.zeros(1, dtype=torch.float32)
    InterpretedKernel(load_jit(_FMA_PROBE, "stridec_fma_probe"))((1,), x, out)
    return out.item() == 2**-24


def _warn_if_fma_rounds_twice() -> None:
    """Uniform philox kernels compute `low + (high - low)·u` with `tl.fma`: say so once
    when this interpreter rounds it twice (its last bit may then differ from the GPU's)."""
    if not interpreter_fma_is_exact():
        import triton

        warnings.warn(
            f"philox_uniform on the interpret backend: Triton {triton.__version__}'s "
            "interpreter rounds tl.fma twice (fixed in Triton 3.9), so some uniforms may "
            "differ in the last bit from the GPU and from stridec.run_reference",
            RuntimeWarning,
            stacklevel=3,
        )


class InterpretBackend:
    """Generated kernels through Triton's interpreter, on CPU tensors."""

    name = "interpret"
    language = "triton"
    device = "cpu"
    call_form = staticmethod(grid_call_form)

    def load(self, program: Program) -> list[InterpretedKernel]:
        return [self.load_kernel(k) for k in program.kernels]

    def load_kernel(self, kernel: Any) -> InterpretedKernel:
        return interpreted(kernel.source, kernel.name)


BACKEND = InterpretBackend()
