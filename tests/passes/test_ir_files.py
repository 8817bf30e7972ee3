"""Run every `tests/passes/*.ir` file: its RUN line names the stridec-opt arguments, its
CHECK lines are matched by the `filecheck` package (FileCheck semantics), in-process.

    // RUN: stridec-opt %s --split-input-file --pass-pipeline=canonicalize | filecheck %s
"""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest
from filecheck.matcher import Matcher
from filecheck.options import Options

from stridec.tools.opt import main as opt_main

HERE = Path(__file__).parent
IR_FILES = sorted(HERE.glob("*.ir"))


def _run_line(path: Path) -> list[str]:
    for line in path.read_text().splitlines():
        if line.startswith("// RUN:"):
            command = line[len("// RUN:"):].split("|")[0]
            words = shlex.split(command)
            assert words[0] == "stridec-opt", f"{path.name}: RUN must start with stridec-opt"
            return [str(path) if w == "%s" else w for w in words[1:]]
    raise AssertionError(f"{path.name}: no '// RUN:' line")


def run_filecheck(check_file: Path, output: str, tmp_path: Path) -> tuple[int, str]:
    produced = tmp_path / "output.txt"
    produced.write_text(output)
    opts = Options(match_filename=str(check_file), input_file=str(produced))
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        status = Matcher.from_opts(opts).run()
    return status, log.getvalue()


@pytest.mark.parametrize("path", IR_FILES, ids=[p.name for p in IR_FILES])
def test_ir_file(path: Path, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = opt_main(_run_line(path))
    assert status == 0, err.getvalue()
    code, log = run_filecheck(path, out.getvalue(), tmp_path)
    assert code == 0, f"{log}\n--- stridec-opt output ---\n{out.getvalue()}"


def test_check_lines_can_fail(tmp_path: Path) -> None:
    """A CHECK that does not hold must make filecheck fail (guards the harness itself)."""
    check = tmp_path / "t.ir"
    check.write_text("// CHECK: permute\n")
    code, _ = run_filecheck(check, "graph @g {\n  output\n}\n", tmp_path)
    assert code != 0
