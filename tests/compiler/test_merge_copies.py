"""Copies into one buffer from one source whose offsets lie on a grid run as one copy
(`stridec/compiler/codegen/merge.py`): YOLOv5's Focus is one deinterleave of pairs,
LLaMA's rotate_half halves one row copy; anything else stays a batch."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import stridec
from stridec.compiler.codegen.merge import merge_copies
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.ir.dtypes import DTYPES
from tests.compiler.test_copy_lanes import _focus, _random

f32 = DTYPES["float32"]


def _piece(src_offset: int, dst_offset: int, sizes=(4, 6), src_strides=(20, 2)) -> CopySpec:
    return CopySpec(sizes, src_strides, src_offset, (6 * 4, 1), dst_offset, f32, f32)


def test_phases_on_a_grid_are_one_copy():
    # Focus's four phases of a (4 x 2, 6 x 2) plane: rows +10 apart, columns +1.
    pieces = [_piece(0, 0), _piece(10, 6), _piece(1, 12), _piece(11, 18)]
    ((spec, members),) = merge_copies(pieces, [3, 3, 3, 3])
    assert members == (0, 1, 2, 3)
    assert sorted(zip(spec.sizes[:2], spec.src_strides[:2], spec.dst_strides[:2],
                      strict=True)) == [(2, 1, 12), (2, 10, 6)]
    assert (spec.src_offset, spec.dst_offset) == (0, 0)


def test_a_progression_is_one_dim():
    pieces = [_piece(2 * k, 6 * k) for k in (2, 0, 3, 1)]
    ((spec, members),) = merge_copies(pieces, [1] * 4)
    assert members == (0, 1, 2, 3)
    assert (spec.sizes[0], spec.src_strides[0], spec.dst_strides[0]) == (4, 2, 6)


@pytest.mark.parametrize("change", ["source", "strides", "offsets", "mask"])
def test_anything_else_stays_apart(change):
    pieces = [_piece(0, 0), _piece(10, 6)]
    sources = [0, 0]
    if change == "source":
        sources = [0, 1]
    elif change == "strides":
        pieces[1] = _piece(10, 6, src_strides=(20, 3))
    elif change == "offsets":
        pieces = [_piece(0, 0), _piece(5, 6), _piece(1, 12)]
    else:
        pieces[1] = dataclasses.replace(pieces[1], masks=(MaskBound((0, 1), 0, 3),))
    parts = merge_copies(pieces, sources[:1] * len(pieces) if change == "offsets" else sources)
    assert [members for _, members in parts] == [(k,) for k in range(len(pieces))]
    assert [spec for spec, _ in parts] == pieces


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    return torch.cat((x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)


@pytest.mark.parametrize(("fn", "shape", "strategy"), [
    (_focus, (2, 3, 10, 134), "deinterleave"),
    (_rotate_half, (3, 5, 128), "linear"),
    (lambda x: torch.cat([x, x, x], 1), (3, 7), "linear"),
], ids=["focus", "rotate_half", "repeat"])
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_model_cats_are_one_pass(fn, shape, strategy, dtype):
    x = _random(shape, getattr(torch, dtype))
    compiled = stridec.compile(stridec.trace(fn, x), backend="cpu")
    (kernel,) = compiled.plan_for(x).kernels
    assert kernel.strategy == strategy and len(kernel.calls) == 1
    assert torch.equal(compiled(x), fn(x))
