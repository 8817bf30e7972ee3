"""Backends: what turns a `Program`'s kernels into launchers.

A kernel backend reads a `Program` (plain data: kernel sources, buffers, launches) and
returns one launcher per kernel; `stridec.runtime.launch` — the one runner — calls
`launchers[launch.kernel](grid, *storages, **keywords)` for each launch, with the flat
storages of the launch's slots and the kernel's `num_warps` and constexprs as keywords:

    class Backend(Protocol):
        name: str                                   # "triton", "interpret", …
        language: str                               # its kernels' `KernelInfo.lang`
        device: str                                 # the device type of its tensors
        def load(self, program: Program) -> Sequence[Launcher]: ...
        def load_kernel(self, kernel) -> Launcher: ...          # one kernel
        def call_form(self, kernel: KernelInfo) -> CallForm: ...  # over symbolic sizes

A backend is the runtime half of a code-generation target
(`stridec.compiler.codegen.target`, whose `backend` names it): how the target's kernels
are built, cached and loaded (`load`), and how a launcher takes the numbers of a program
over symbolic sizes (`call_form`). `kernel_backend(language, device)` finds the backend
of a kernel and the tensors it runs on.

- `triton`: the generated `@triton.jit` functions, compiled, on CUDA tensors;
- `interpret`: the same functions through Triton's interpreter, on CPU tensors;
- `cpu`: native C kernels built by the system compiler, on CPU tensors;
- `reference`: no kernels: it runs the graph itself in plain torch (`run_reference`),
  the oracle the others are tested against.

`backend(name)` returns the backend object of a kernel backend, importing its module on
first use (so a process that never interprets never imports Triton's interpreter).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stridec.compiler.codegen.program import KernelInfo, Program
from stridec.errors import CallError, UnsupportedError

__all__ = ["Backend", "CallForm", "Launcher", "backend", "BACKEND_KINDS", "KERNEL_BACKENDS",
           "TRITON_EXTRA", "grid_call_form", "kernel_backend", "require_triton",
           "triton_version"]

# Triton is an extra: the `cpu` backend needs no Triton; the GPU and the interpreter do.
TRITON_EXTRA = 'pip install "stridec[triton]"'

# `launcher(grid, *storages, num_warps=…, **constexprs)`: runs one kernel once.
Launcher = Callable[..., None]

#: Each kernel backend's (kernel language, device type): a new backend is a module of this
#: folder with a `BACKEND`, and a row here.
BACKEND_KINDS: dict[str, tuple[str, str]] = {
    "triton": ("triton", "cuda"), "interpret": ("triton", "cpu"), "cpu": ("c", "cpu"),
}
KERNEL_BACKENDS = tuple(BACKEND_KINDS)


@dataclass(frozen=True)
class CallForm:
    """How the runner of a program over symbolic sizes calls one kernel's launcher:
    `launcher(grid, *storages, *args, **options, name=array('q', values) for each of
    `arrays`)`, `grid`, `args` and the arrays' values expressions of the symbols (written
    into the runner's generated code; `launch.SymbolicRunner`)."""

    grid: tuple[Any, ...]
    args: tuple[Any, ...]
    options: Mapping[str, int]
    arrays: Mapping[str, tuple[Any, ...]]


def grid_call_form(kernel: KernelInfo) -> CallForm:
    """A kernel launched over a grid of programs (Triton's): its grid, its runtime scalars
    after the storages, `num_warps` and the constexprs as keywords."""
    return CallForm(kernel.grid, kernel.args,
                    {"num_warps": kernel.num_warps, **kernel.constexprs}, {})


class Backend(Protocol):
    """Loads a program's kernels; `name` keys the runners built over them."""

    name: str
    language: str
    device: str

    def load(self, program: Program) -> Sequence[Launcher]:
        """One launcher per `program.kernels` entry, in order."""
        ...

    def load_kernel(self, kernel: Any) -> Launcher:
        """The launcher of one kernel: a `KernelInfo`, or a generated kernel record
        (`codegen.copy.CopyKernel`, `codegen.c.philox.CPhiloxKernel`, …)."""
        ...

    def call_form(self, kernel: KernelInfo) -> CallForm:
        """How a runner calls `kernel`'s launcher where its numbers are expressions of
        symbols (`CallForm`)."""
        ...


_BACKENDS: dict[str, Any] = {}


def _triton_found() -> bool:
    """Whether `import triton` would find it (located, not imported)."""
    import importlib.util

    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def triton_version() -> str | None:
    """The installed Triton's version, None where it is not installed (read from its
    package metadata: Triton itself is not imported)."""
    from importlib import metadata

    if not _triton_found():
        return None
    for name in ("triton", "pytorch-triton"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def require_triton(what: str) -> None:
    """Raise `UnsupportedError` naming the extra where Triton cannot be imported: `what`
    (the backend "interpret" or "triton", ...) needs it."""
    if not _triton_found():
        raise UnsupportedError(
            f"{what} needs Triton, which is not installed; install the triton extra: "
            f"{TRITON_EXTRA} (the cpu backend, the default on CPU tensors, needs no Triton)"
        )


def kernel_backend(language: str, device: str, what: str = "kernel") -> Backend:
    """The backend that runs kernels of `language` on tensors of device type `device`;
    `CallError` (naming `what`) where none does."""
    for name, kind in BACKEND_KINDS.items():
        if kind == (language, device):
            return backend(name)
    runs = ", ".join(f"{n} ({d})" for n, (lang, d) in BACKEND_KINDS.items() if lang == language)
    raise CallError(
        f"{what}: no kernel backend runs {language} kernels on {device} tensors; "
        f"the backends of {language} kernels: {runs or 'none'}"
    )


def backend(name: str) -> Backend:
    """The kernel backend called `name` (one of `KERNEL_BACKENDS`)."""
    found = _BACKENDS.get(name)
    if found is None:
        if name not in KERNEL_BACKENDS:
            raise UnsupportedError(
                f"no kernel backend {name!r}; expected one of {KERNEL_BACKENDS}"
            )
        if name != "cpu":
            require_triton(f"backend {name!r}")
        found = _BACKENDS[name] = importlib.import_module(
            f"stridec.runtime.backends.{name}"
        ).BACKEND
    return found
