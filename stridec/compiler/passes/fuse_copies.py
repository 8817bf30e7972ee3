"""`fuse-copies`: a copy that reads another copy's buffer reads its source instead.

    %1 = copy %x {space = [2, 4, 5, 3], src = strided<[60, 5, 1, 20], offset: 0>,
                  dst = strided<[60, 15, 3, 1], offset: 0>}            (x.permute(0, 2, 3, 1).contiguous())
    %2 = copy %1 {space = [2, 3, 4, 5], src = strided<[60, 1, 15, 3], offset: 0>,
                  dst = strided<[60, 20, 5, 1], offset: 0>}            (.permute(0, 3, 1, 2).contiguous())
  → %2 = copy %x {space = [2, 3, 4, 5], src = strided<[60, 20, 5, 1], offset: 0>,
                  dst = strided<[60, 20, 5, 1], offset: 0>}

The consumer's `src` addresses the producer's buffer; composing it with the producer's
`dst`⁻¹ and `src` (`stridec.compiler.index_maps.compose`) gives the producer's source
address of every consumer point, as a strided layout — possibly over a refined space
where a consumer dim is split in two. The producer, once unused, goes with `dce`.

It does not fuse when: the producer writes into another buffer (`cat`, `pad` chains);
both copies cast (f32 → f16 → f32 is not f32 → f32); the producer's fill mask cannot be
carried over exactly; or no strided composition exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from stridec.compiler.index_maps import compose, compose_mask, refine
from stridec.compiler.pass_manager import Pass, register_pass
from stridec.compiler.passes.dce import DeadCodeElimination
from stridec.errors import StridecError
from stridec.ir import ops as O
from stridec.ir.dtypes import DType
from stridec.ir.graph import Graph, Op
from stridec.ir.layout import Layout

__all__ = ["FuseCopies", "fuse"]


def refine_coeffs(coeffs: Sequence[int], split: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """A linear form over Q seen over Q': factor sizes (f1, f2, f3) of a dim with
    coefficient c get coefficients (f2·f3·c, f3·c, c)."""
    out: list[int] = []
    for c, factors in zip(coeffs, split, strict=False):
        inner = 1
        scaled = []
        for f in reversed(factors):
            scaled.append(c * inner)
            inner *= f
        out.extend(reversed(scaled))
    return tuple(out)


def _canonical(mask: tuple, sizes: Sequence[int]) -> tuple:
    """A mask with the coefficients of size-1 dims zeroed (their coordinate is always 0),
    so that equal constraints compare equal."""
    coeffs, lo, hi = mask
    return tuple(0 if n == 1 else c for c, n in zip(coeffs, sizes, strict=False)), lo, hi


def _explicit(op: Op) -> bool:
    return op.name == "copy" and op.attrs["space"] is not None


def _stored(fill: float | int | bool, stored: DType, read: DType) -> float | int | bool:
    """`fill` as a producer storing `stored` writes it, read back as `read`: the fill
    0.1 of an f32 pack, cast to f64 by its consumer, is 0.10000000149011612, not 0.1."""
    return torch.tensor(fill, dtype=stored.torch).to(read.torch).item()


def _valid_box(sizes: Sequence[int], masks: Sequence[tuple]) -> list[tuple[int, int]] | None:
    """The box of points where every mask holds, when each mask bounds a single dim.

    A mask `lo <= c·i_k < hi` (c > 0, other coefficients 0 or on size-1 dims) keeps
    `ceil(lo/c) <= i_k < ceil(hi/c)`. NCHW4 with C = 3 has one channel block (co = 0), so
    `0 <= 4·co + ci < 3` bounds ci alone: the box is ci in [0, 3).
    """
    box = [(0, n) for n in sizes]
    for coeffs, lo, hi in masks:
        dims = [k for k, c in enumerate(coeffs) if c != 0 and sizes[k] != 1]
        if len(dims) != 1 or coeffs[dims[0]] < 0:
            return None
        k = dims[0]
        c = coeffs[k]
        start, stop = -(-lo // c), -(-hi // c)
        box[k] = (max(box[k][0], start), min(box[k][1], stop))
        if box[k][0] >= box[k][1]:
            return None
    return box


def _fuse_over_valid_box(consumer: Op, producer: Op) -> dict | None:
    """Fuse a masked consumer whose masked points read past the producer's buffer.

    Padded packing reads channel C (and up) of a C-channel buffer at its masked points:
    no composition covers those addresses. Composing only the valid box gives an affine
    source map; extended to the whole space it is still exact on the valid points, and
    the masked points are never read. Only without refinement and without producer masks.
    """
    c = consumer.attrs
    if not c["masks"] or c["fill"] is None or producer.attrs["masks"]:
        return None
    space = c["space"]
    box = _valid_box(space, c["masks"])
    if box is None:
        return None
    reader = c["src"]
    for k, (start, stop) in enumerate(box):
        reader = reader.slice(k, start, stop, 1)
    comp = compose(reader, producer.attrs["dst"], producer.attrs["src"])
    if comp is None or comp.is_refined:
        return None
    strides = comp.src.strides
    offset = comp.src.offset - sum(start * st for (start, _), st in zip(box, strides, strict=False))
    try:
        src = Layout(space, strides, offset)
    except StridecError:  # the extension would address before the storage's start
        return None
    return {
        "layout": c["layout"],
        "space": space,
        "src": src,
        "dst": c["dst"],
        "masks": c["masks"],
        "fill": c["fill"],
    }


def fuse(consumer: Op, producer: Op) -> tuple[list, dict] | str:
    """Operands and attributes of the fused copy, or the reason it cannot be fused."""
    if not (_explicit(consumer) and _explicit(producer)):
        return "not two explicit copies"
    if len(producer.operands) != 1:
        return "the producer is a fill or writes into another buffer"
    source = producer.operands[0]
    d0, d1, d2 = source.type.dtype, producer.attrs["dtype"], consumer.attrs["dtype"]
    if d0 != d1 and d1 != d2:
        return f"both copies cast ({d0} → {d1} → {d2})"
    comp = compose(consumer.attrs["src"], producer.attrs["dst"], producer.attrs["src"])
    if comp is None:
        boxed = _fuse_over_valid_box(consumer, producer)
        if boxed is None:
            return "no strided composition of the two index maps"
        return [source] + list(consumer.operands[1:]), {**boxed, "dtype": d2 if d0 == d1 else d1}
    c_masks = tuple(
        _canonical((refine_coeffs(c, comp.split), lo, hi), comp.sizes)
        for c, lo, hi in consumer.attrs["masks"] or ()
    )
    p_masks = tuple(
        _canonical(compose_mask(c, lo, hi, comp), comp.sizes)
        for c, lo, hi in producer.attrs["masks"] or ()
    )
    masks, fill = c_masks, consumer.attrs["fill"]
    if p_masks:
        if producer.attrs["fill"] is None:
            # The producer left those points unwritten: the consumer's value there is
            # unspecified, so restricting (or filling) them is as good and reads nothing.
            masks = c_masks + tuple(m for m in p_masks if m not in c_masks)
        elif not c_masks:
            masks, fill = p_masks, _stored(producer.attrs["fill"], d1, d2)
        elif all(m in c_masks for m in p_masks):
            masks = c_masks
        else:
            return "the producer's fill mask is not implied by the consumer's"
    operands = [source] + list(consumer.operands[1:])
    attrs = {
        "layout": consumer.attrs["layout"],
        "dtype": d2 if d0 == d1 else d1,
        "space": comp.sizes,
        "src": comp.src,
        "dst": refine(consumer.attrs["dst"], comp.split),
        "masks": masks or None,
        "fill": fill if masks else None,
    }
    return operands, attrs


def fuse_into_generator(consumer: Op, producer: Op) -> tuple[list, dict] | str:
    """Attributes of a Philox op that writes its values where `consumer` would copy them.

    The generator's natural output is contiguous: logical index i lives at address i. So
    composing the consumer's `src` with that writer gives, at every consumer point, the
    logical index to generate (`index`), and the consumer's `dst` says where it goes:

        %b, %s1 = philox %s {sizes = [2, 3, 4, 5]}
        %p = copy %b {space = [2, 1, 4, 4, 5], src = strided<[60, 80, 20, 5, 1]>, …}   (pack NCHW4)
      → %p, %s1 = philox %s {sizes = [2, 3, 4, 5], space = [2, 1, 4, 4, 5],
                             index = strided<[60, 80, 20, 5, 1]>, dst = …, masks = …}
    """
    if not _explicit(consumer) or producer.name not in ("philox", "philox_uniform"):
        return "not a copy of Philox values"
    if producer.attrs["space"] is not None:
        return "the generator is already placed"
    values = producer.results[0]
    if consumer.operands[0] is not values:
        return "the copy reads the new state, not the values"
    if any(user is not consumer for user, _ in values.uses):
        return "the values have other users"
    if len(consumer.operands) != 1 or consumer.attrs["dtype"] != values.type.dtype:
        return "the copy writes into another buffer or casts"
    if consumer.attrs["masks"] and consumer.attrs["fill"] is None:
        return "the copy restricts its domain"
    # The natural output is contiguous at offset 0: the address the consumer reads *is* the
    # logical index, also at masked points (which are never generated).
    attrs = dict(producer.attrs)
    attrs.update(
        layout=consumer.attrs["layout"],
        space=consumer.attrs["space"],
        index=consumer.attrs["src"],
        dst=consumer.attrs["dst"],
        masks=consumer.attrs["masks"],
        fill=consumer.attrs["fill"],
    )
    return list(producer.operands), attrs


@register_pass
@dataclass
class FuseCopies(Pass):
    """Fuse every copy into the copies that read its buffer (through any views)."""

    name: ClassVar[str] = "fuse-copies"

    def run(self, graph: Graph) -> None:
        # Views left unused by fold-views would pin producers: clear them first.
        DeadCodeElimination().run(graph)
        ops = []
        generators: dict[int, int] = {}  # id of a Philox op -> its index in `ops`
        for op in graph.ops:
            if op.name in ("philox", "philox_uniform"):
                generators[id(op)] = len(ops)
            ops.append(op)
            if not _explicit(op) or not op.operands:
                continue
            producer = op.operands[0].owner
            if producer.name in ("philox", "philox_uniform"):
                placed = fuse_into_generator(op, producer)
                if isinstance(placed, str):
                    continue
                operands, attrs = placed
                generator = type(producer)(operands, attrs)
                generator.graph = graph
                index = generators.pop(id(producer))
                generators[id(generator)] = index
                ops[index] = generator
                ops.pop()
                op.result.replace_all_uses_with(generator.results[0])
                producer.results[1].replace_all_uses_with(generator.results[1])
                op.drop_uses()
                op.graph = None
                producer.drop_uses()
                producer.graph = None
                continue
            fused = fuse(op, producer)
            if isinstance(fused, str):
                continue
            operands, attrs = fused
            new = O.CopyOp(operands, attrs)
            new.graph = graph
            ops[-1] = new
            op.result.replace_all_uses_with(new.result)
            op.drop_uses()
            op.graph = None
        graph.set_ops(ops)
