"""`stridec-opt`, the mlir-opt-style driver: in-process through `main(argv)`, and once as
the installed console script reading stdin."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import stridec
from stridec.tools.opt import main

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
    "  %0 = copy %x {layout = strided<[60, 15, 3, 1], offset: 0>, space = [2, 4, 5, 3], "
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


def test_print_ir_after_all(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--print-ir-after-all", "--pass-pipeline=canonicalize,fold-views", str(nhwc_file)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    first, rest = out.split("// -----// IR Dump After canonicalize //----- //\n")[1].split(
        "// -----// IR Dump After fold-views //----- //\n"
    )
    assert "permute %x" in first
    assert "as_strided %x" in rest
    assert out.count("graph @nhwc") == 3  # two dumps, then the result


def test_print_ir_after_one_pass(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--print-ir-after=lower-formats", str(nhwc_file)]) == 0
    out = capsys.readouterr().out
    assert out.count("IR Dump After") == 1 and "IR Dump After lower-formats" in out


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


# -- errors: a message, exit status 1, nothing on stdout -------------------------------------
def test_bad_ir_names_the_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.ir"
    path.write_text(BAD_TYPE)
    assert main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"{path}:3:8: error: ")
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
    assert err.startswith(f"{path}:{bad_line}:8: error: ")


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


def test_bad_pass_option(nhwc_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pass-pipeline=canonicalize{max-sweeps=x}", str(nhwc_file)]) == 1
    assert "option 'max_sweeps' expects int; got 'x'" in capsys.readouterr().err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.ir")]) == 1
    assert "stridec-opt: cannot read" in capsys.readouterr().err


def test_bad_command_line_exits_with_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--emit=llvm"])
    assert exit_info.value.code != 0
    assert "usage: stridec-opt" in capsys.readouterr().err


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
    assert bad.stderr.startswith("<stdin>:3:8: error: ")
