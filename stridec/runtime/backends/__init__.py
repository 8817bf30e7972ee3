"""Backends: what turns a `Program`'s kernels into launchers.

A kernel backend reads a `Program` (plain data: kernel sources, buffers, launches) and
returns one launcher per kernel; `stridec.runtime.launch` — the one runner — calls
`launchers[launch.kernel](grid, *storages, **keywords)` for each launch, with the flat
storages of the launch's slots and the kernel's `num_warps` and constexprs as keywords:

    class Backend(Protocol):
        name: str                                   # "triton", "interpret", …
        def load(self, program: Program) -> Sequence[Launcher]: ...

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
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from stridec.compiler.codegen.program import Program
from stridec.errors import UnsupportedError

__all__ = ["Backend", "Launcher", "backend", "KERNEL_BACKENDS", "TRITON_EXTRA",
           "require_triton", "triton_version"]

# Triton is an extra: the `cpu` backend needs no Triton; the GPU and the interpreter do.
TRITON_EXTRA = 'pip install "stridec[triton]"'

# `launcher(grid, *storages, num_warps=…, **constexprs)`: runs one kernel once.
Launcher = Callable[..., None]

KERNEL_BACKENDS = ("triton", "interpret", "cpu")


class Backend(Protocol):
    """Loads a program's kernels; `name` keys the runners built over them."""

    name: str

    def load(self, program: Program) -> Sequence[Launcher]:
        """One launcher per `program.kernels` entry, in order."""
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
