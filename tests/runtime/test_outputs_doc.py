"""docs/outputs.md is a test: its ```python blocks run in order in one namespace, and its
```mlir block is what the example graph prints, and parses back to the same text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import stridec

DOC = Path(__file__).resolve().parents[2] / "docs" / "outputs.md"


def test_python_blocks_run(capsys: pytest.CaptureFixture[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 6
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 -- the doc's code
    printed = capsys.readouterr().out
    (ir,) = re.findall(r"```mlir\n(.*?)```", text, re.S)
    assert ir in printed
    assert str(stridec.parse(ir)) == ir
