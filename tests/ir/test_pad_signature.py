"""`stridec.pad` takes torch.nn.functional.pad's arguments: (input, pad, mode, value)."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import stridec
from stridec.errors import CallError


def test_pad_has_torch_signature() -> None:
    ours = inspect.signature(stridec.pad).parameters
    theirs = inspect.signature(F.pad).parameters
    assert list(ours)[:4] == list(theirs) == ["input", "pad", "mode", "value"]
    assert ours["mode"].default == theirs["mode"].default == "constant"


@pytest.mark.parametrize("how", ["positional", "keywords"])
def test_pad_called_as_torch_is(how: str) -> None:
    g = stridec.Graph("pad_as_torch")
    x = g.input("x", (2, 3), "float32")
    if how == "positional":
        g.output(stridec.pad(x, (1, 1, 0, 2), "constant", -1.0))
    else:
        g.output(stridec.pad(input=x, pad=(1, 1, 0, 2), mode="constant", value=-1.0))
    t = torch.randn(2, 3)
    got = stridec.compile(g, backend="reference")(t)
    assert torch.equal(got, F.pad(t, (1, 1, 0, 2), value=-1.0))


def test_the_old_fill_keyword_is_refused_naming_value() -> None:
    g = stridec.Graph("pad_fill")
    x = g.input("x", (2, 3), "float32")
    with pytest.raises(CallError, match=r"'fill'.*value="):
        stridec.pad(x, (1, 1), fill=2.0)
