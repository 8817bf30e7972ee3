"""The examples run as a user runs them (in-process here: import the file, call main())."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_quickstart(capsys: pytest.CaptureFixture[str]) -> None:
    """Three graphs compiled, the IR before and after the passes and every kernel shown,
    every output checked against torch inside the example (it asserts), on the GPU when
    there is one and as native C kernels otherwise."""
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
    assert out.count("@triton.jit") + out.count("stridec C copy kernel") >= 3
    assert out.rstrip().endswith("all outputs match torch")
    assert "docs/codegen.md" in out  # where the kernel headers are explained
    assert (EXAMPLES.parent / "docs" / "codegen.md").exists()
