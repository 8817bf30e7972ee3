"""`stridec-opt`, the mlir-opt-style driver: in-process through `main(argv)`, and once as
the installed console script reading stdin."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stridec
from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PASS_REGISTRY
from stridec.tools.opt import _split, main

NHWC = """\
graph @nhwc {
  %x = input {name = "x"} : tensor<2x3x4x5xf32>
  %0 = permute %x {dims = [0, 2, 3, 1]} : tensor<2x4x5x3xf32, strided<[60, 5, 1, 20], offset: 0>>
  %1 = contiguous %0 : tensor<2x4x5x3xf32>
  output %1
}
"""
NHWC_LOWERED = (
    "graph @nhwc {\n"
    '  %x = input {name = "x"} : tensor<2x3x4x5xf32>\n'
    "  %0 = strided_copy %x {layout = strided<[60, 15, 3, 1], offset: 0>, space = [2, 4, 5, 3], "
    "src = strided<[60, 5, 1, 20], offset: 0>, dst = strided<[60, 15, 3, 1], offset: 0>} "
    ": tensor<2x4x5x3xf32>\n"
    "  output %0\n"
    "}\n"
)
BAD_TYPE = """\
graph @bad {
  %x = input {name = "x"} : tensor<2x3xf32>
  %0 = permute %x {dims = [1, 0]} : tensor<3x2xf32>
  output %0
}
"""


@pytest.fixture
def nhwc_file(tmp_path: Path) -> Path:
    path = tmp_path / "nhwc.ir"
    path.write_text(NHWC)
    return path


def test_default_pipeline_from_a_file(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(nhwc_file)]) == 0
    out, err = capsys.readouterr()
    assert out == NHWC_LOWERED
    assert err == ""


def test_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(NHWC))
    assert main([]) == 0
    assert capsys.readouterr().out == NHWC_LOWERED
    monkeypatch.setattr(sys, "stdin", io.StringIO(NHWC))
    assert main(["-"]) == 0
    assert capsys.readouterr().out == NHWC_LOWERED


def test_pass_pipeline(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pass-pipeline=fold-views", str(nhwc_file)]) == 0
    out = capsys.readouterr().out
    assert "as_strided %x {sizes = [2, 4, 5, 3], strides = [60, 5, 1, 20], offset = 0}" in out
    assert "%1 = contiguous %0" in out
    assert str(stridec.parse(out)) == out  # what it prints reads back


def test_empty_pipeline_prints_the_input(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--pass-pipeline=", str(nhwc_file)]) == 0
    assert capsys.readouterr().out == NHWC


def test_print_ir_after_all_goes_to_stderr(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As mlir-opt: the dumps go to stderr, headed `// -----// IR Dump After PASS //----- //`,
    and stdout holds the result alone."""
    argv = ["--print-ir-after-all", "--pass-pipeline=canonicalize,fold-views", str(nhwc_file)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.count("graph @nhwc") == 1 and str(stridec.parse(out)) == out  # the result only
    assert "as_strided %x" in out
    first, rest = err.split("// -----// IR Dump After canonicalize //----- //\n")[1].split(
        "// -----// IR Dump After fold-views //----- //\n"
    )
    assert "permute %x" in first
    assert rest == out  # the last dump is the result


def test_dump_headers_are_not_split_markers(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dump header is never read as `--split-input-file`'s `// -----` separator line."""
    assert main(["--print-ir-after-all", "--pass-pipeline=canonicalize", str(nhwc_file)]) == 0
    err = capsys.readouterr().err
    header = err.splitlines()[0]
    assert header == "// -----// IR Dump After canonicalize //----- //"
    assert len(_split(err)) == 1


def test_print_ir_after_all_with_an_output_file(
    nhwc_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.ir"
    argv = ["--print-ir-after-all", str(nhwc_file), "-o", str(target)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert target.read_text() == NHWC_LOWERED
    assert err.count("IR Dump After") == len(DEFAULT_PIPELINE.split(","))


def test_print_ir_after_one_pass(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--print-ir-after=lower-formats", str(nhwc_file)]) == 0
    out, err = capsys.readouterr()
    assert out == NHWC_LOWERED
    assert err.count("IR Dump After") == 1 and "IR Dump After lower-formats" in err


def test_timing_goes_to_stderr(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--timing", str(nhwc_file)]) == 0
    out, err = capsys.readouterr()
    assert out == NHWC_LOWERED
    for name in ("canonicalize", "fuse-copies", "plan-memory"):
        assert name in err


def test_output_file(nhwc_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out.ir"
    assert main([str(nhwc_file), "-o", str(target)]) == 0
    assert target.read_text() == NHWC_LOWERED
    assert capsys.readouterr().out == ""


def test_split_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two.ir"
    path.write_text(NHWC + "// -----\n" + NHWC.replace("@nhwc", "@second"))
    assert main(["--split-input-file", str(path)]) == 0
    first, second = capsys.readouterr().out.split("// -----\n")
    assert first == NHWC_LOWERED
    assert second == NHWC_LOWERED.replace("@nhwc", "@second")


def test_emit_triton(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--emit=triton", "--target=cpu", str(nhwc_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# kernel 0: copy")
    assert out.count("@triton.jit") == 1


def _plan_kernel(backend: str):
    """The one kernel the runtime runs for NHWC on `backend`."""
    import torch

    plan = stridec.compile(stridec.parse(NHWC), backend=backend).plan_for(
        torch.zeros(2, 3, 4, 5))
    (kernel,) = plan.kernels
    return kernel


def _plan_source(backend: str) -> str:
    return _plan_kernel(backend).source


def test_emit_c_is_the_c_the_cpu_backend_runs(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--emit=c` (and `--emit=kernels`, whose target is `cpu` by default) prints the C
    source the `cpu` backend builds for the same graph, under a C comment."""
    kernel = _plan_kernel("cpu")  # C = 3 channels: the planned library's interleave
    for argv in (["--emit=c"], ["--emit=kernels"], ["--emit=kernels", "--target=cpu"]):
        assert main([*argv, str(nhwc_file)]) == 0
        out = capsys.readouterr().out
        head, source = out.split("\n", 1)
        assert head == f"/* kernel 0: copy ({kernel.strategy}), C */"
        assert source == kernel.source + "\n"


def test_target_chooses_what_emit_kernels_prints(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--target=interpret` and `--target=cuda` give Triton: the interpreter's is what
    the `interpret` backend runs; `--emit=triton --target=cpu` means the interpreter's."""
    assert main(["--emit=kernels", "--target=interpret", str(nhwc_file)]) == 0
    interpreted = capsys.readouterr().out
    assert interpreted.startswith("# kernel 0: copy (tiled_transpose)")
    assert _plan_source("interpret") + "\n" in interpreted
    assert main(["--emit=triton", "--target=interpret", str(nhwc_file)]) == 0
    assert capsys.readouterr().out == interpreted
    assert main(["--emit=kernels", "--target=cuda", str(nhwc_file)]) == 0
    cuda = capsys.readouterr().out
    assert cuda.count("@triton.jit") == 1
    assert main(["--emit=triton", str(nhwc_file)]) == 0  # cuda by default
    assert capsys.readouterr().out == cuda


@pytest.mark.parametrize("argv, says", [
    (["--emit=c", "--target=cuda"], "--emit=c prints the cpu target's C kernels"),
    (["--target=cpu"], "--target=cpu chooses kernels"),
])
def test_a_target_that_names_nothing_is_a_command_line_error(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main([*argv, str(nhwc_file)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and f"stridec-opt: error: {says}" in err


# -- errors: a message, exit status 1, nothing on stdout -------------------------------------
def test_bad_ir_names_the_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.ir"
    path.write_text(BAD_TYPE)
    assert main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}:3:37: error: ")  # at the type written
    assert "tensor<3x2xf32, strided<[1, 3], offset: 0>>" in err  # what the type should be


def test_bad_ir_in_a_split_file_counts_lines_from_the_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "split.ir"
    path.write_text(NHWC + "// -----\n" + BAD_TYPE)
    assert main(["--split-input-file", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    bad_line = NHWC.count("\n") + 1 + 3  # the first case, the separator, line 3 of the second
    assert err.startswith(f"{path}:{bad_line}:37: error: ")


def test_syntax_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = "graph @g {\n  %x = input {name = } : tensor<2xf32>\n}\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("<stdin>:2:")
    assert "error:" in err


def test_unknown_pass(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pass-pipeline=canonicalize,fold-view", str(nhwc_file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "error: pass pipeline: unknown pass 'fold-view'" in err
    assert "fold-views" in err  # the known passes are listed


def test_bad_pass_option_is_named_as_typed(
    nhwc_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--pass-pipeline=canonicalize{max-sweeps=x}", str(nhwc_file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "option 'max-sweeps' expects int; got 'x'" in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.ir")]) == 1
    assert "stridec-opt: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--emit=llvm"], ["--no-such-flag"], ["a.ir", "b.ir"], ["--pass-pipeline"]]
)
def test_bad_command_line_exits_1_with_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Status 1 as for every other error (mlir-opt's, and what docs/passes.md says)."""
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: stridec-opt")
    assert "stridec-opt: error: " in err


# -- the pass list ---------------------------------------------------------------------------
def test_help_lists_every_pass_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: stridec-opt")
    for option in ("--pass-pipeline", "--print-ir-after-all", "--list-passes", "--emit"):
        assert option in out
    listed = _listed_passes(out.split("\npasses (--pass-pipeline")[1])
    assert set(listed) == _registered()


def test_list_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-passes"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    listed = _listed_passes(out)
    assert set(listed) == _registered()
    # The default pipeline's passes come first, in its order.
    assert list(listed)[: len(DEFAULT_PIPELINE.split(","))] == DEFAULT_PIPELINE.split(",")
    for name, summary in listed.items():
        assert summary.endswith(".") and "SPEC" not in summary, (name, summary)
    assert DEFAULT_PIPELINE in out


def _registered() -> set[str]:
    import stridec.compiler.passes  # noqa: F401  (registers them)

    return set(PASS_REGISTRY)


def _listed_passes(text: str) -> dict[str, str]:
    """`  name  One line.` rows of the pass list: name -> line, in order."""
    rows = re.findall(r"^  ([a-z-]+)  +(\S.*)$", text, re.M)
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), names
    return dict(rows)


# -- the installed entry point ------------------------------------------------------------------
def test_installed_console_script_reads_stdin() -> None:
    script = Path(sys.executable).parent / "stridec-opt"
    if not script.exists():
        found = shutil.which("stridec-opt")
        if found is None:
            pytest.skip("stridec-opt is not installed (pip install -e .)")
        script = Path(found)
    done = subprocess.run(
        [str(script), "--pass-pipeline=canonicalize,fold-views,lower-formats,dce"],
        input=NHWC, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == NHWC_LOWERED
    bad = subprocess.run([str(script)], input=BAD_TYPE, capture_output=True, text=True,
                         timeout=120, check=False)
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr.startswith("<stdin>:3:37: error: ")


def test_a_graph_without_output_fails_as_compile_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stridec.compile refuses a graph with no `output` op; so does stridec-opt (its
    passes would otherwise delete every op as dead), at the graph's closing brace."""
    text = NHWC.replace("  output %1\n", "")
    with pytest.raises(stridec.CallError, match="no output op"):
        stridec.compile(stridec.parse(text))
    path = tmp_path / "open.ir"
    path.write_text(text)
    assert main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}:5:1: error: graph @nhwc has no 'output' op")


def test_mlir_opts_pipeline_form(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pass-pipeline=builtin.module(canonicalize,fold-views)", str(nhwc_file)]) == 0
    anchored = capsys.readouterr().out
    assert main(["--pass-pipeline=canonicalize,fold-views", str(nhwc_file)]) == 0
    assert capsys.readouterr().out == anchored
    assert main(["--pass-pipeline=builtin.module(func.func(cse))", str(nhwc_file)]) == 1
    assert "no nested ops" in capsys.readouterr().err
