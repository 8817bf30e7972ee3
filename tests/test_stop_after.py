"""`--stop-after` (tests/stop_after.py): a run past its time starts no test and ends as
interrupted with its summary and junit XML, with pytest-xdist's workers and without."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SLOW = """
import time

import pytest


@pytest.mark.parametrize("k", range(16))
def test_slow(k):
    time.sleep(0.5)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_past_its_time_ends_with_its_summary_and_junit(tmp_path: Path,
                                                             workers: list[str]) -> None:
    if workers:
        pytest.importorskip("xdist")
    (tmp_path / "test_slow.py").write_text(SLOW)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "stop_after", "-p", "no:cacheprovider",
         "-q", "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), *workers,
         "--stop-after", "1.2", f"--junitxml={junit}", str(tmp_path / "test_slow.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(TESTS)},
    )
    assert done.returncode == 2, done.stdout + done.stderr  # interrupted
    assert "--stop-after: time is up" in done.stdout
    assert " passed" in done.stdout.splitlines()[-1]  # the summary line
    ran = int(ET.parse(junit).getroot().find("testsuite").get("tests"))
    assert 1 <= ran < 16
