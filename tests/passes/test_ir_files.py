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


def _opt(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = opt_main(args)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("path", IR_FILES, ids=[p.name for p in IR_FILES])
def test_ir_file(path: Path, tmp_path: Path) -> None:
    status, out, err = _opt(_run_line(path))
    assert status == 0, err
    code, log = run_filecheck(path, out, tmp_path)
    assert code == 0, f"{log}\n--- stridec-opt output ---\n{out}"


@pytest.mark.parametrize("path", IR_FILES, ids=[p.name for p in IR_FILES])
def test_checks_see_what_the_pipeline_did(path: Path, tmp_path: Path) -> None:
    """Where the pipeline changes a graph, that graph's CHECK lines must fail on the graph
    as it was: they check the pass's work, not only what was there already."""
    args = _run_line(path)
    for k, chunk in enumerate(path.read_text().split("\n// -----\n")):
        chunk_file = tmp_path / f"case{k}.ir"
        chunk_file.write_text(chunk)
        chunk_args = [str(chunk_file) if a == str(path) else a for a in args]
        unchanged = [a for a in chunk_args if not a.startswith("--pass-pipeline")]
        _, before, _ = _opt([*unchanged, "--pass-pipeline="])
        _, after, _ = _opt(chunk_args)
        if before == after:
            continue  # a case where nothing may change: its checks hold either way
        code, _ = run_filecheck(chunk_file, before, tmp_path)
        assert code != 0, f"{path.name}, case {k}: the CHECK lines also pass without the pipeline"


@pytest.mark.parametrize("path", IR_FILES, ids=[p.name for p in IR_FILES])
def test_ir_file_has_labelled_cases(path: Path) -> None:
    """At least five cases per file, each with its own CHECK-LABEL on its graph."""
    cases = path.read_text().split("\n// -----\n")
    assert len(cases) >= 5, f"{path.name}: {len(cases)} case(s); expected at least 5"
    for k, case in enumerate(cases):
        graphs = [line.split()[1] for line in case.splitlines() if line.startswith("graph @")]
        labels = [line for line in case.splitlines() if line.startswith("// CHECK-LABEL:")]
        assert len(graphs) == 1 and len(labels) == 1, f"{path.name}, case {k}"
        assert f"graph {graphs[0]} {{" in labels[0], f"{path.name}, case {k}: {labels[0]}"


def test_check_lines_can_fail(tmp_path: Path) -> None:
    """A CHECK that does not hold must make filecheck fail (guards the harness itself)."""
    check = tmp_path / "t.ir"
    check.write_text("// CHECK: permute\n")
    code, _ = run_filecheck(check, "graph @g {\n  output\n}\n", tmp_path)
    assert code != 0
