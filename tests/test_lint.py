"""The tree passes the project's linter (`ruff check`, configured in pyproject.toml): what
the style rules catch -- unused imports, loop variables a closure reads late, long lines --
fails here, in the suite, not in review."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the dev extra)")
    done = subprocess.run([ruff, "check", "--no-cache", "stridec", "tests", "bench", "examples"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
