"""A test run leaves nothing behind in the temporary folder: stridec's caches, Inductor's,
pytest's `tmp_path` folders and every `tempfile` user go to one folder of the run
(tests/conftest.py), removed when the run ends."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_everything_temporary_lives_in_the_runs_folder(tmp_path: Path) -> None:
    root = Path(tempfile.gettempdir())
    assert root.name.startswith("stridec-tests-")
    cache = Path(os.environ["STRIDEC_CACHE_DIR"])
    for path in (tmp_path, Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])):
        assert root in path.parents, path
    shared = os.environ.get("STRIDEC_TESTS_CACHE_DIR")  # the build cache of CI's runs
    assert cache == Path(shared) if shared else root in cache.parents, cache


def test_a_run_leaves_its_temporary_folder_empty(tmp_path: Path) -> None:
    """A pytest run in a subprocess whose temporary folder holds only the roots of two
    earlier runs, one killed (its process is gone) and one still going (this process):
    tests that write to tmp_path, compile and cache kernels and plans (Philox's: its
    library builds in a second, where the planned copies' takes ten); afterwards the
    killed run's root is gone too, and the running one's is left alone."""
    temp = tmp_path / "temp"
    temp.mkdir()
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
    for name, pid in (("stridec-tests-killed", finished.stdout.strip()),
                      ("stridec-tests-running", str(os.getpid()))):
        (temp / name / "stridec-cache").mkdir(parents=True)
        (temp / name / "pid").write_text(pid)
    env = {k: v for k, v in os.environ.items()
           if k not in ("STRIDEC_CACHE_DIR", "STRIDEC_TESTS_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    env["TMPDIR"] = str(temp)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/compiler/test_opt_cli.py::test_output_file",
         "tests/runtime/test_philox_graph.py::test_chained_calls_equal_one_call[cpu]"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout
    assert [p.name for p in temp.iterdir()] == ["stridec-tests-running"]
