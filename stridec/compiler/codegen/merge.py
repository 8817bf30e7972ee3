"""Copies into one buffer that differ only in where they start, as one copy with a dim more.

A cat of the phases of one tensor -- YOLOv5's Focus (`x[..., ::2, ::2]`, `x[..., 1::2,
::2]`, `x[..., ::2, 1::2]`, `x[..., 1::2, 1::2]` along C), LLaMA's rotate_half halves
(`cat((x2, x1), -1)`) -- is a batch of copies of one source with equal sizes and strides
whose offsets lie on a grid. Together they are one copy with a dim per axis of the grid
(Focus: a dim of 2 with source stride 1 and one with source stride W; the halves: a dim of
2 with source stride -64 and destination stride 64), which reads the source once, as one
stream -- Focus's phases become the deinterleave of two lanes, not four passes that each
read every line for half its elements.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

from stridec.compiler.codegen.spec import CopySpec, copy_symbols, is_fill_only

__all__ = ["merge_copies"]

_Part = tuple[CopySpec, tuple[int, ...]]


def merge_copies(specs: Sequence[CopySpec], sources: Sequence[int]) -> list[_Part]:
    """`specs`, copies into one buffer that write disjoint elements (`sources[j]`: what
    copy j reads), as fewer copies where their offsets lie on a grid: a list of (copy, the
    indices of the specs it carries out), in the order of each one's first spec. Copies
    with masks, fills or symbolic sizes stay as they are."""
    groups: dict[tuple, list[_Part]] = {}
    order: list[tuple] = []
    for j, (spec, source) in enumerate(zip(specs, sources, strict=True)):
        plain = not spec.masks and not is_fill_only(spec) and not copy_symbols(spec)
        key = ((source, spec.sizes, spec.src_strides, spec.dst_strides, spec.src_dtype,
                spec.dst_dtype) if plain else (j,))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((spec, (j,)))
    parts = [part for key in order for part in _join(groups[key])]
    return sorted(parts, key=lambda part: part[1][0])


def _with_dim(spec: CopySpec, n: int, src_stride: int, dst_stride: int) -> CopySpec:
    return dataclasses.replace(spec, sizes=(n, *spec.sizes),
                               src_strides=(src_stride, *spec.src_strides),
                               dst_strides=(dst_stride, *spec.dst_strides))


def _delta(a: CopySpec, b: CopySpec) -> tuple[int, int]:
    return b.src_offset - a.src_offset, b.dst_offset - a.dst_offset


def _join(parts: list[_Part]) -> list[_Part]:
    """Copies equal but for their offsets, joined while their offsets make a progression
    (one dim of as many) or pairs at one distance (a dim of 2, then again)."""
    while len(parts) > 1:
        parts = sorted(parts, key=lambda p: (p[0].dst_offset, p[0].src_offset))
        step = _delta(parts[0][0], parts[1][0])
        if all(_delta(a[0], b[0]) == step for a, b in itertools.pairwise(parts)):
            indices = tuple(sorted(i for _, ix in parts for i in ix))
            return [(_with_dim(parts[0][0], len(parts), *step), indices)]
        paired = _pairs(parts)
        if paired is None:
            return parts
        parts = paired
    return parts


def _pairs(parts: list[_Part]) -> list[_Part] | None:
    """The parts as pairs (p, p + delta) for one delta, each a part with a dim of 2; None
    if no delta pairs them all."""
    if len(parts) % 2:
        return None
    at = {(p[0].src_offset, p[0].dst_offset): k for k, p in enumerate(parts)}
    for j in range(1, len(parts)):
        ds, dd = _delta(parts[0][0], parts[j][0])
        taken: set[int] = set()
        pairs = []
        for k, (spec, ix) in enumerate(parts):
            if k in taken:
                continue
            q = at.get((spec.src_offset + ds, spec.dst_offset + dd))
            if q is None or q in taken or q == k:
                break
            taken |= {k, q}
            pairs.append((_with_dim(spec, 2, ds, dd), tuple(sorted(ix + parts[q][1]))))
        else:
            return pairs
    return None
