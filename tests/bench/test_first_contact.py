"""bench/gpu_first_contact.sh: its phases fit one 570-second command of a GPU machine by
their deadlines, its dry run (the same phases on the CPU) passes end to end and leaves at
most 8 files in one folder, and a phase past its deadline is stopped without stopping the
next."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_first_contact.sh"
PHASES = ["env", "quickstart", "torch-op", "philox", "gpu-tests", "host", "bench"]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and timeout")


def _run(out: Path, *args: str, python: Path | str = sys.executable,
         timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(out), "PYTHON": str(python)}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def _summary(out: Path) -> dict[str, str]:
    """Phase name -> its status, from summary.txt."""
    lines = (out / "summary.txt").read_text().splitlines()
    return {line.split()[0]: line.split()[1] for line in lines
            if line.split() and line.split()[0] in PHASES}


def test_the_phases_fit_one_command_by_their_deadlines(tmp_path: Path) -> None:
    done = _run(tmp_path, "--plan")
    plan = [line.split() for line in done.stdout.splitlines()]
    assert [p[0] for p in plan] == PHASES
    budgets = [int(p[1]) for p in plan]
    assert [int(p[2]) for p in plan] == [sum(budgets[: k + 1]) for k in range(len(plan))]
    assert sum(budgets) < 570  # the deadline of the last phase, from the start
    rerun = _run(tmp_path, "--plan", "--only", "host,bench", "--budget", "bench:300").stdout
    assert rerun.split() == ["host", str(budgets[5]), str(budgets[5]),
                             "bench", "300", str(budgets[5] + 300)]


def test_dry_run_end_to_end(tmp_path: Path) -> None:
    """Every phase on the CPU: ok, its CUDA parts skipped with a line saying so; at most 8
    files, none in a folder; the junit XMLs, the JSON of env, Philox and host overhead, and
    bench/run.py's rows."""
    done = _run(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert _summary(tmp_path) == dict.fromkeys(PHASES, "ok")
    files = sorted(p for p in tmp_path.rglob("*"))
    assert all(p.is_file() and p.parent == tmp_path for p in files), files
    assert len(files) <= 8, files
    log = (tmp_path / "log.txt").read_text()
    assert log.count("(dry run:") >= len(PHASES)  # each phase says what it leaves out
    for junit in ("torch-op.xml", "gpu-tests.xml"):
        suite = ET.parse(tmp_path / junit).getroot().find("testsuite")
        assert int(suite.get("tests")) > 0 and suite.get("failures") == suite.get("errors") == "0"
    results = json.loads((tmp_path / "first-contact.json").read_text())
    assert results["env"]["torch"]
    assert {row["dtype"] for row in results["philox"]} == {"uint32", "float32", "float16",
                                                           "bfloat16"}
    assert all(row["ok"] for row in results["philox"])
    assert set(results["host"]["us"]) >= {"fn(x)", "fn(x, out=o)", "op(x)"}
    (bench,) = [p for p in files if p.suffix == ".json" and p.name != "first-contact.json"]
    report = json.loads(bench.read_text())
    assert report["complete"] and len(report["rows"]) == 10 and not report["failures"]


def test_a_phase_past_its_deadline_is_stopped_and_the_next_runs(tmp_path: Path) -> None:
    """A host phase that hangs (its Python replaced by a sleep) is stopped at its deadline
    (5 s, 20 s in a dry run), said so; bench, after it, still runs; the summary is written
    and the script fails."""
    python = tmp_path / "python"
    python.write_text('#!/usr/bin/env bash\n'
                      'case "$*" in *"first_contact.py host"*) exec sleep 300 ;; esac\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    out = tmp_path / "out"
    done = _run(out, "--dry-run", "--only", "host,bench", "--budget", "host:5", python=python)
    assert done.returncode == 1, done.stdout[-3000:]
    assert _summary(out) == {"host": "timeout", "bench": "ok"}
    log = (out / "log.txt").read_text()
    assert "=== host: timeout after" in log
    took = int(log.split("=== host: timeout after ")[1].split()[0])
    assert took <= 20
