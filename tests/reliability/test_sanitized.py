"""The generated C under AddressSanitizer and UndefinedBehaviorSanitizer.

`STRIDEC_SANITIZE=address,undefined` builds the cpu backend's C units with both
sanitizers, every finding fatal (`stridec.runtime.backends.cpu.sanitize_flags`); the
process that loads them has the sanitizers' runtime preloaded. `sanitized_run.py` runs
the guard-page cases and graphs of the fuzzer in such a process. The default profile
builds few units (a float32 pad and cast, Philox, 4 graphs of float32); `--fuzz-long`
runs every guard-page case at every placement and 1,000 graphs of every dtype. The
counts of cases and graphs that ran clean appear in the terminal summary.

A first test shows that the harness can fail: a unit reading one element past a tensor
is reported and the process exits non-zero.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from stridec.runtime.backends import cpu

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _runtime() -> str | None:
    """The AddressSanitizer runtime library of the C compiler, or None."""
    argv = shlex.split(cpu.compiler())
    try:
        found = subprocess.run([*argv, "-print-file-name=libasan.so"], capture_output=True,
                               text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return found if os.path.isabs(found) and os.path.exists(found) else None


pytestmark = pytest.mark.skipif(not cpu.available() or _runtime() is None,
                                reason="needs a C compiler with AddressSanitizer")


def sanitized_env() -> dict[str, str]:
    return {
        **os.environ,
        "STRIDEC_SANITIZE": "address,undefined",
        "LD_PRELOAD": _runtime() or "",
        # Python and torch free with the allocator they got memory from, which ASan
        # cannot always tell apart; leaks at exit are the interpreter's.
        "ASAN_OPTIONS": "detect_leaks=0:alloc_dealloc_mismatch=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


READ_PAST = """
import ctypes, torch
from stridec.runtime.backends import cpu
lib = cpu.load_unit("#include <stdint.h>\\n"
                    "int64_t stridec_read_past(const int64_t *p, int64_t n) { return p[n]; }\\n")
read = lib.stridec_read_past
read.argtypes, read.restype = (ctypes.c_void_p, ctypes.c_int64), ctypes.c_int64
t = torch.zeros(8, dtype=torch.int64)
print(read(t.data_ptr(), 7), flush=True)  # the last element: fine
print(read(t.data_ptr(), 8), flush=True)  # one past the end
"""


def test_the_sanitizers_report_a_read_past_a_tensor() -> None:
    done = subprocess.run([sys.executable, "-c", READ_PAST], env=sanitized_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0, done.stdout
    assert done.stdout.splitlines()[:1] == ["0"]
    assert "AddressSanitizer: heap-buffer-overflow" in done.stderr, done.stderr[-2000:]


def test_the_generated_c_runs_clean_under_the_sanitizers(request: pytest.FixtureRequest,
                                                         fuzz_stats: Counter) -> None:
    long = request.config.getoption("--fuzz-long", default=False)
    args = (["--graphs", "1000", "--dtypes", "all", "--cases", "all", "--places", "all"]
            if long else [])
    done = subprocess.run([sys.executable, str(HERE / "sanitized_run.py"), *args],
                          env=sanitized_env(), capture_output=True, text=True,
                          timeout=6 * 3600 if long else 900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-6000:])
    lines = [line for line in done.stdout.splitlines() if line.startswith("sanitized:")]
    assert len(lines) == 2, done.stdout
    fuzz_stats["sanitized guard-page cases"] += int(lines[0].split()[1])
    fuzz_stats["sanitized graphs"] += int(lines[1].split()[1])
