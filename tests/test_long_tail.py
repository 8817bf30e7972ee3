"""Every entry of the suite's long tail (`LONG_TAIL` in tests/long_tail.py) names a test
that exists: a renamed test must not slip out of both the suite and the tail."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from long_tail import LONG_TAIL

ROOT = Path(__file__).resolve().parents[1]


def test_every_long_tail_entry_names_a_test() -> None:
    missing = []
    for entry in LONG_TAIL:
        path, _, name = entry.partition("::")
        # "test[param": the test's parameters whose id starts with `param` (a value the
        # file spells as a string).
        name, _, param = name.partition("[")
        source = ROOT / path
        text = source.read_text() if source.is_file() else ""
        if not source.is_file() or (
                name and not re.search(rf"^def {re.escape(name)}\(", text, re.M)) or (
                param and f'"{param}' not in text):
            missing.append(entry)
    assert not missing, f"LONG_TAIL entries that name no test: {missing}"


def test_the_tail_is_what_minus_m_long_selects() -> None:
    """In one file of the tail: `-m long` collects its tail tests and nothing else."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", "long", "tests/reliability/test_large.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    selected = [line for line in done.stdout.splitlines() if "::" in line]
    assert selected
    assert all(line.startswith(LONG_TAIL) for line in selected), selected
    assert re.search(r"\d+ deselected", done.stdout), done.stdout
