"""Every C compile unit builds for an instruction set the host may not have.

A unit is built with `-march=native`, and most of its fast paths are chosen by the
preprocessor (`#if defined(__AVX512BW__) ...`): on a host without AVX-512 those blocks are
never compiled, so nothing else in the suite would notice an edit that breaks them. Here
each kind of unit -- the planned copies' libraries of 1-, 2-, 4- and 8-byte elements and
of the casts between float32 and float16 / bfloat16 and from bytes, the Philox unit and
the thread pool -- is compiled (not run) for `x86-64-v4` (AVX-512 F, BW, VL, DQ, CD),
with the backend's flags at -O0 (the code is not run, and every builtin is still checked
against the ISA) and linked into one library that may leave no symbol undefined; the
planned libraries' objects must hold `zmm` instructions and masked stores: the AVX-512
variants were compiled in, not skipped by their conditions.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess

import pytest

from stridec.compiler.codegen.c.parts import unit_parts
from stridec.compiler.codegen.c.philox import PHILOX_C_SOURCE
from stridec.compiler.codegen.c.plan import plan_unit_source
from stridec.compiler.codegen.c.pool import POOL_C_SOURCE
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or shutil.which("gcc") is None,
    reason="needs gcc targeting x86-64",
)

_CASTS = [("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
          ("bfloat16", "float32"), ("uint8", "float32"), ("int8", "float64")]
UNITS: dict[str, str] = {
    **{f"plan_bits{n}": plan_unit_source(n) for n in (1, 2, 4, 8)},
    **{f"plan_{s}_{d}": plan_unit_source(DTYPES[s].itemsize, (s, d)) for s, d in _CASTS},
    "philox": PHILOX_C_SOURCE,
    "pool": POOL_C_SOURCE,
}


def test_every_unit_builds_for_avx512(tmp_path):
    flags = [f for f in cpu.CFLAGS if f not in ("-O3", "-march=native", "-shared")]
    files = []
    for name, source in UNITS.items():
        path = tmp_path / f"{name}.c"
        path.write_text(source)
        files.append(path.name)
    cmd = ["gcc", "-O0", "-march=x86-64-v4", *flags, "-c", *files]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
    # Linked together, every symbol a unit calls must be defined (the pool's included): a
    # C compiler only warns about a function it has not seen declared.
    link = ["gcc", "-shared", "-Wl,--no-undefined", "-o", "units.so",
            *(f.replace(".c", ".o") for f in files), "-pthread", "-lm"]
    done = subprocess.run(link, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(link)} failed:\n{done.stderr}"
    _check_parts(tmp_path, flags)
    objdump = shutil.which("objdump")
    if objdump is None:
        return
    for name in UNITS:
        if name.startswith("plan_"):  # the masked loads and stores of a block's edges
            text = subprocess.run([objdump, "-d", str(tmp_path / f"{name}.o")],
                                  capture_output=True, text=True, check=True).stdout
            assert "zmm" in text, f"{name}: no AVX-512 instruction in its x86-64-v4 build"
            assert re.search(r"vmovdq[ua](8|16|32|64)\s.*\{%k", text), (
                f"{name}: no masked store in its x86-64-v4 build")


def _exports(path) -> set[str]:
    text = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                          text=True, check=True).stdout
    return {line.split()[-1] for line in text.splitlines() if line.split()[1:2] == ["T"]}


def _check_parts(tmp_path, flags: list[str]) -> None:
    """Each unit built in parts (`codegen/c/parts.py`) compiles part by part for x86-64-v4
    too, and its parts, linked, define every symbol they call and export exactly the entry
    points of the whole unit."""
    for name, source in UNITS.items():
        n = unit_parts(source)
        if n == 1:
            continue
        gcc = ["gcc", "-O0", "-march=x86-64-v4", *flags]
        objects = []
        for k in range(1, n + 1):
            objects.append(f"{name}-{k}.o")
            cmd = [*gcc, "-c", f"-DSTRIDEC_PART={k}", "-o", objects[-1], f"{name}.c"]
            done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
            assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr}"
        libraries = {"parts": objects, "whole": [f"{name}.o"]}
        for kind, inputs in libraries.items():
            link = [*gcc, "-shared", "-Wl,--no-undefined", "-o", f"{name}-{kind}.so", *inputs,
                    "-L", str(tmp_path), "-l:units.so", "-pthread", "-lm"]
            done = subprocess.run(link, cwd=tmp_path, capture_output=True, text=True)
            assert done.returncode == 0, f"{' '.join(link)} failed:\n{done.stderr}"
        assert _exports(tmp_path / f"{name}-parts.so") == _exports(tmp_path / f"{name}-whole.so")
