"""Shared test setup: `gpu` tests skip cleanly without CUDA; everything a run writes to a
temporary place (stridec's kernel and plan caches, Inductor's cache, pytest's `tmp_path`
folders, any `tempfile` user) lands in one folder of this run, removed when the run ends,
so tests never touch the user's cache and leave nothing behind; under CI hypothesis
draws deterministically."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import pytest
import torch
from hypothesis import settings

# CI runs the same examples every time (a red CI blocks landing, so it must not depend on
# the draw); local runs keep hypothesis' random search, which is how new bugs are found.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# One temporary root for the whole run. TMPDIR also reaches subprocesses and every
# `tempfile` user in this one (pytest's basetemp and Inductor's cache are read lazily
# from `tempfile.gettempdir()`); the caches are named explicitly as well.


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _sweep_stale_roots(parent: str) -> None:
    """Remove the roots of earlier runs that were killed (by a timeout, say) before they
    could remove their own: each root names its run's process, and a root whose process
    is gone is stale. Roots of runs still going are left alone."""
    for path in glob.glob(os.path.join(parent, "stridec-tests-*")):
        try:
            with open(os.path.join(path, "pid"), encoding="ascii") as f:
                pid = int(f.read())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(path, ignore_errors=True)


_sweep_stale_roots(tempfile.gettempdir())
_ROOT = tempfile.mkdtemp(prefix="stridec-tests-")
with open(os.path.join(_ROOT, "pid"), "w", encoding="ascii") as _f:
    _f.write(str(os.getpid()))
os.environ["TMPDIR"] = _ROOT
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
os.environ.setdefault("STRIDEC_CACHE_DIR", os.path.join(_ROOT, "stridec-cache"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_ROOT, "inductor-cache"))


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_ROOT, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """The cpu backend's compile cost over the run: C compiler runs (one per new library),
    their total time, and libraries loaded from the disk cache instead."""
    import sys

    cpu = sys.modules.get("stridec.runtime.backends.cpu")
    if cpu is None:
        return
    stats = cpu.BUILD_STATS
    terminalreporter.write_sep("-", "cpu backend builds")
    terminalreporter.write_line(
        f"C compiler runs: {stats.compiler_runs} ({stats.compiler_processes} processes), "
        f"{stats.compile_seconds:.1f} s in all; libraries loaded from the disk cache: "
        f"{stats.disk_loads}"
    )
