"""The examples run as a user runs them (in-process here: import the file, call main())."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    """Three graphs compiled, the IR before and after the passes and one line per kernel
    shown (not its source: the whole output fits in a screen or two), every output
    checked against torch inside the example (it asserts), on the GPU when there is one
    and as native C kernels otherwise."""
    spec = importlib.util.spec_from_file_location("quickstart", EXAMPLES / "quickstart.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    out = capsys.readouterr().out
    for name in ("nchw_to_nhwc", "nchw_to_nchw4", "slice_and_broadcast"):
        assert f"=== {name}: IR as built" in out
        assert f"{name}: " in out and "equal torch" in out
    assert out.count("--- after the passes") == 3
    kernel_lines = [line for line in out.splitlines() if line.startswith("kernel ")]
    assert len(kernel_lines) == 4
    assert all("plan.kernels[" in line and ".source)" in line for line in kernel_lines)
    assert "@triton.jit" not in out and "#include" not in out  # no kernel source
    assert len(out.splitlines()) < 100
    assert "all outputs match torch" in out.splitlines()[-1]
    assert "docs/codegen.md" in out  # where the lowered IR and the kernels are explained
    assert (EXAMPLES.parent / "docs" / "codegen.md").exists()
