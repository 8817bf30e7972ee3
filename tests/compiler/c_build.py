"""Compile a C test harness with the system gcc into a shared library and load it (ctypes).

Only for the tests of the C kernel sources: each test module builds one library, once.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from stridec.compiler.codegen.c.pool import POOL_SYMBOL
from stridec.runtime.backends.cpu import load_pool

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="needs gcc on PATH")
# The flags of a native build; the C sources must give the same bits with and without
# vector extensions, so some tests build twice.
NATIVE = ("-O3", "-march=native")
PORTABLE = ("-O2",)
AVX2 = ("-O3", "-mavx2", "-mfma", "-mf16c")  # the AVX2 code paths on an AVX-512 machine


def host_has(flag: str) -> bool:
    """Whether the host CPU lists `flag` (e.g. "avx2") in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


def build_shared(source: str, folder: Path, name: str, flags: tuple[str, ...]) -> ctypes.CDLL:
    """Write `source` to `folder/name.c`, compile it to `folder/name.so` and load it."""
    assert GCC is not None
    c_file = folder / f"{name}.c"
    so_file = folder / f"{name}.so"
    c_file.write_text(source)
    cmd = [GCC, *flags, "-fopenmp", "-shared", "-fPIC", "-o", str(so_file), str(c_file), "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr}")
    if POOL_SYMBOL in source:  # a kernel unit: it calls the process's thread pool
        load_pool()
    return ctypes.CDLL(str(so_file))
