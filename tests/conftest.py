"""Shared test setup: `gpu` tests skip cleanly without CUDA; everything a run writes to a
temporary place (stridec's kernel and plan caches, Inductor's cache, pytest's `tmp_path`
folders, any `tempfile` user) lands in one folder of this run, removed when the run ends,
so tests never touch the user's cache and leave nothing behind (pytest-xdist's workers
share their run's folder and caches); under CI hypothesis draws deterministically."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile

import pytest
import torch
from hypothesis import settings
from long_tail import LONG_TAIL
from stop_after import (  # noqa: F401 -- --stop-after: its hooks, as this conftest's
    pytest_addoption,
    pytest_configure,
    pytest_configure_node,
    pytest_runtest_logreport,
    pytest_sessionstart,
)

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


def _parents_root() -> str | None:
    """The root of the run whose pytest-xdist worker this process is (started by the run's
    own process, which names its root in STRIDEC_TESTS_ROOT), else None: a pytest that a
    test starts makes a root of its own."""
    root = os.environ.get("STRIDEC_TESTS_ROOT")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    try:
        with open(os.path.join(root or "", "pid"), encoding="ascii") as f:
            return root if int(f.read()) == os.getppid() else None
    except (OSError, ValueError):
        return None


_INHERITED = _parents_root()
if _INHERITED is None:
    _sweep_stale_roots(tempfile.gettempdir())
    _ROOT = tempfile.mkdtemp(prefix="stridec-tests-")
    with open(os.path.join(_ROOT, "pid"), "w", encoding="ascii") as _f:
        _f.write(str(os.getpid()))
else:  # a worker of the run: the run's folder is its own, removed when the run ends
    _ROOT = _INHERITED
os.environ["STRIDEC_TESTS_ROOT"] = _ROOT
os.environ["TMPDIR"] = _ROOT
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
# .ci/run names one build cache for its three runs (STRIDEC_TESTS_CACHE_DIR), so the long
# tail and the oldest torch's run reuse the suite's C builds instead of compiling them again.
os.environ.setdefault("STRIDEC_CACHE_DIR", os.environ.get("STRIDEC_TESTS_CACHE_DIR")
                      or os.path.join(_ROOT, "stridec-cache"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_ROOT, "inductor-cache"))
# Call keys through torch's getters: the TensorImpl reader is a C++ build against torch's
# headers (backends/cpu.py, `_load_fields`), which the long tail's tests make and check.
os.environ.setdefault("STRIDEC_TENSOR_FIELDS", "0")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _INHERITED is None:
        shutil.rmtree(_ROOT, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(LONG_TAIL):
            item.add_marker(pytest.mark.long)
    # --fuzz-long (tests/reliability/conftest.py) asks for the fuzzers' long search, the
    # graph fuzzer among them, whatever -m says.
    if ("long" not in (config.getoption("markexpr") or "")
            and not config.getoption("--fuzz-long", default=False)):
        tail = pytest.mark.skip(reason="the long tail: run with -m long (CI does)")
        for item in items:
            if "long" in item.keywords:
                item.add_marker(tail)
    if "slow" not in (config.getoption("markexpr") or ""):
        long = pytest.mark.skip(reason="long-running: run with -m slow")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(long)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _build_stats() -> dict[str, float]:
    """This process's cpu backend build counts (`BUILD_STATS`); empty if it never imported
    the backend."""
    import dataclasses
    import sys

    cpu = sys.modules.get("stridec.runtime.backends.cpu")
    if cpu is None:
        return {}
    return dataclasses.asdict(cpu.BUILD_STATS)


_workers_stats: list[dict[str, float]] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, a worker hands its build counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["stridec_build_stats"] = _build_stats()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # pytest-xdist's hook, on the controller
    _workers_stats.append(getattr(node, "workeroutput", {}).get("stridec_build_stats", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """The cpu backend's compile cost over the run (every worker's, under pytest-xdist): C
    compiler runs (one per new library), their total time, and libraries loaded from the
    disk cache instead."""
    runs = [s for s in (_build_stats(), *_workers_stats) if s]
    if not runs:
        return
    total = {key: sum(s.get(key, 0) for s in runs) for key in runs[0]}
    terminalreporter.write_sep("-", "cpu backend builds")
    terminalreporter.write_line(
        f"C compiler runs: {total['compiler_runs']} ({total['compiler_processes']} processes), "
        f"{total['compile_seconds']:.1f} s in all; libraries loaded from the disk cache: "
        f"{total['disk_loads']}"
    )
