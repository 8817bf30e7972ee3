"""Load generated Triton source and launch it on CUDA or through Triton's interpreter.

Generated source is written to a file named by its hash (Triton reads a kernel's
source back through `inspect`, so it must live in a real file) and imported once per
process. The same `@triton.jit` function runs compiled on CUDA tensors and, wrapped in
Triton's `InterpretedFunction`, on CPU tensors — no environment variable involved.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["KernelHandle", "load_kernel", "kernel_dir"]

_lock = threading.Lock()
_loaded: dict[tuple[str, str], "KernelHandle"] = {}


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
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclass
class KernelHandle:
    """A loaded `@triton.jit` function; `run` picks compiled or interpreted execution."""

    name: str
    source: str
    jit: Any
    _interpreted: Any = field(default=None, repr=False)

    def run(self, grid: tuple[int, ...], *args: Any, **constexprs: Any) -> None:
        on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if on_cuda:
            self.jit[grid](*args, **constexprs)
            return
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
        path = os.path.join(kernel_dir(), f"k_{digest}.py")
        try:
            with open(path) as f:
                current = f.read()
        except OSError:
            current = None
        if current != source:
            _write_atomically(path, source)
        spec = importlib.util.spec_from_file_location(f"stridec_kernels.k_{digest}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        handle = KernelHandle(name=name, source=source, jit=getattr(module, name))
        _loaded[key] = handle
        return handle
