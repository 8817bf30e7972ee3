"""Load generated Triton source and launch it on CUDA or through Triton's interpreter.

Generated source is written to a file named by its hash (Triton reads a kernel's
source back through `inspect`, so it must live in a real file) and imported once per
process. The same `@triton.jit` function runs compiled on CUDA tensors and, wrapped in
Triton's `InterpretedFunction`, on CPU tensors — no environment variable involved.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["KernelHandle", "load_kernel", "kernel_dir"]

_lock = threading.Lock()
_interpreter_lock = threading.RLock()
_loaded: dict[tuple[str, str], KernelHandle] = {}


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "stridec")


def kernel_dir() -> str:
    """Folder holding generated kernel modules: `$STRIDEC_CACHE_DIR/kernels`, by default
    under the user's cache dir (`$XDG_CACHE_HOME/stridec` or `~/.cache/stridec`)."""
    root = os.environ.get("STRIDEC_CACHE_DIR") or default_cache_dir()
    path = os.path.join(root, "kernels")
    os.makedirs(path, exist_ok=True)
    return path


def _write_atomically(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:  # never leave a stray temp file behind
            os.remove(tmp)
        except OSError:
            pass
        raise


_private_dir: str | None = None


def _private_kernel_dir() -> str:
    """A folder of this process alone, for when the cache dir cannot be written."""
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="stridec-kernels-")
        atexit.register(shutil.rmtree, _private_dir, ignore_errors=True)
    return _private_dir


def _kernel_file(digest: str, source: str) -> str:
    """Path of a file holding exactly `source`: `kernel_dir()/k_<digest>.py`, (re)written
    when missing or damaged; in a private temp folder, with one warning, when the cache
    dir cannot be written (Triton needs a real file, so there is no memory-only mode)."""
    try:
        path = os.path.join(kernel_dir(), f"k_{digest}.py")
        try:
            with open(path, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = None
        if current != source:
            _write_atomically(path, source)
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
            _write_atomically(path, source)
        return path


_warned: set[str] = set()


@dataclass
class KernelHandle:
    """A loaded `@triton.jit` function; `run` picks compiled or interpreted execution."""

    name: str
    source: str
    jit: Any
    _interpreted: Any = field(default=None, repr=False)

    def run(self, grid: tuple[int, ...], *args: Any, **constexprs: Any) -> None:
        for a in args:  # a plain loop: this runs on every launch (no generator to create)
            if isinstance(a, torch.Tensor) and a.is_cuda:
                self.jit[grid](*args, **constexprs)
                return
        # Triton's interpreter patches `triton.language` globally while a kernel runs, so
        # two threads interpreting at once break each other: one at a time.
        with _interpreter_lock:
            if self._interpreted is None:
                from triton.runtime.interpreter import InterpretedFunction

                self._interpreted = InterpretedFunction(self.jit.fn)
            self._interpreted[grid](*args, **constexprs)


def load_kernel(source: str, name: str) -> KernelHandle:
    """Import `name` from `source` (written to a file keyed by the source hash)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    key = (digest, name)
    with _lock:
        handle = _loaded.get(key)
        if handle is not None:
            return handle
        path = _kernel_file(digest, source)
        spec = importlib.util.spec_from_file_location(f"stridec_kernels.k_{digest}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        handle = KernelHandle(name=name, source=source, jit=getattr(module, name))
        _loaded[key] = handle
        return handle
