"""examples/torch_custom_op.py runs as a user runs it (in-process: import the file, call
main()): a stridec op inside torch.compile, trained three steps, every loss, gradient and
weight equal to the plain torch model's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch_custom_op.py"


def test_torch_custom_op_example(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("torch_custom_op_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    worst = module.main(steps=3)
    assert worst < 1e-5
    out = capsys.readouterr().out
    assert out.count("step ") == 3
    assert "matches plain torch under torch.compile" in out
    assert "graph @to_tokens_adjoint" in out
