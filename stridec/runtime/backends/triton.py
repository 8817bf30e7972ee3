"""The Triton backend: generated Triton source loaded as `@triton.jit` functions and
launched compiled, on CUDA tensors.

Generated source is written to a file named by its hash, `kernels/k_<digest>.py` in the
disk cache, and run once per process from its text, which Triton's `@jit` reads back
through `inspect` and so through `linecache` (primed with it: the file, a cache entry,
may be trimmed or cleared while the process uses it). The interpret backend runs the same
functions through Triton's interpreter.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import linecache
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from stridec.compiler.codegen.program import Program
from stridec.runtime.backends import grid_call_form
from stridec.runtime.cache import disk_cache_dir, keep_text, note_written, write_atomically

__all__ = [
    "BACKEND", "CompiledKernel", "TritonBackend", "load_jit", "kernel_dir", "scalar_type",
    "signature", "source_files",
]

_lock = threading.Lock()
_loaded: dict[tuple[str, str], Any] = {}


def _after_fork_in_child() -> None:
    # A lock another thread held at the fork would stay held in the child forever.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def kernel_dir() -> str:
    """Folder holding generated kernel modules: `$STRIDEC_CACHE_DIR/kernels`, by default
    under the user's cache dir (`$XDG_CACHE_HOME/stridec` or `~/.cache/stridec`)."""
    path = os.path.join(disk_cache_dir(), "kernels")
    os.makedirs(path, exist_ok=True)
    return path




_private_dir: str | None = None


def _private_kernel_dir() -> str:
    """A folder of this process alone, for when the cache dir cannot be written."""
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="stridec-kernels-")
        atexit.register(_remove_private_dir, _private_dir, os.getpid())
    return _private_dir


def _remove_private_dir(path: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child inherits the exit hook, not the folder
        shutil.rmtree(path, ignore_errors=True)


def _kernel_file(digest: str, source: str) -> str:
    """Path of a file holding exactly `source`: `kernel_dir()/k_<digest>.py`, (re)written
    when missing or damaged; in a private temp folder, with one warning, when the cache
    dir cannot be written (Triton needs a real file, so there is no memory-only mode)."""
    try:
        path = os.path.join(kernel_dir(), f"k_{digest}.py")
        if keep_text(path, source):
            note_written(len(source))
        return path
    except OSError as e:
        fallback = _private_kernel_dir()
        if fallback not in _warned:
            _warned.add(fallback)
            warnings.warn(
                f"stridec: kernel cache directory is not writable ({e}); generated kernels "
                f"go to {fallback!r}",
                RuntimeWarning,
                stacklevel=4,
            )
        path = os.path.join(fallback, f"k_{digest}.py")
        if not os.path.exists(path):
            write_atomically(path, source)
        return path


_warned: set[str] = set()


def _digest(source: str) -> str:
    """A kernel module's key in the disk cache: its file is `k_<digest>.py`."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def source_files(source: str) -> list[str]:
    """Where a kernel module of `source` is kept once loaded (the file name is its cache
    key), for people: nothing is written."""
    return [os.path.join(disk_cache_dir(), "kernels", f"k_{_digest(source)}.py")]


def load_jit(source: str, name: str) -> Any:
    """The `@triton.jit` function `name` of `source` (its module written to a file keyed
    by the source hash and imported once per process)."""
    digest = _digest(source)
    key = (digest, name)
    with _lock:
        jit = _loaded.get(key)
        if jit is not None:
            return jit
        path = _kernel_file(digest, source)
        spec = importlib.util.spec_from_file_location(f"stridec_kernels.k_{digest}", path)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        # Run from the text, which `inspect` (Triton's `@jit`) reads back through
        # linecache: a cache entry, the file may be trimmed or cleared while in use.
        linecache.cache[path] = (len(source), None, source.splitlines(keepends=True), path)
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - our own text
        jit = _loaded[key] = getattr(module, name)
        return jit


def scalar_type(value: int) -> str:
    """Triton's type of an integer argument, as its launcher picks it by value: "i32" when
    it fits in 32 bits, else "i64"."""
    return "i32" if -(2**31) <= value < 2**31 else "i64"


def signature(
    jit: Any, pointer_types: Sequence[str], args: Sequence[int], constexprs: Mapping[str, int]
) -> dict[str, str]:
    """The signature of a generated kernel for `triton.compiler.ASTSource`, typed as a
    launch types it: its pointers (`pointer_types`, e.g. "*fp16"), then its runtime scalars
    by value (`args`, `codegen.copy.KernelParams`), then its constexprs."""
    params = [p.name for p in jit.params if not p.is_constexpr]
    pointers = params[: len(params) - len(args)]
    if len(pointers) != len(pointer_types):
        raise ValueError(
            f"{jit.fn.__name__}: {len(pointers)} pointer parameters and {len(args)} scalars; "
            f"got {len(pointer_types)} pointer types"
        )
    types = dict(zip(pointers, pointer_types, strict=True))
    types.update(zip(params[len(pointers):], map(scalar_type, args), strict=True))
    types.update({c: "constexpr" for c in constexprs})
    return types


class CompiledKernel:
    """A launcher of one kernel compiled for CUDA: `launcher(grid, *storages, **keywords)`.

    Triton launches on the current device and its current stream; `runtime/launch.py`
    makes the tensors' device current first (`run_with` for a program, `_launch` for a
    single kernel).
    """

    __slots__ = ("jit",)

    def __init__(self, jit: Any) -> None:
        self.jit = jit

    def __call__(self, grid: tuple[int, ...], *args: Any, **keywords: Any) -> None:
        self.jit[grid](*args, **keywords)


class TritonBackend:
    """Generated kernels compiled by Triton, on CUDA tensors."""

    name = "triton"
    language = "triton"
    device = "cuda"
    call_form = staticmethod(grid_call_form)

    def load(self, program: Program) -> list[CompiledKernel]:
        return [self.load_kernel(k) for k in program.kernels]

    def load_kernel(self, kernel: Any) -> CompiledKernel:
        return CompiledKernel(load_jit(kernel.source, kernel.name))


BACKEND = TritonBackend()
