"""Results written into caller memory (`fn(*inputs, out=...)`, DirectML's output tensor
descriptions): the graph a call with `out=` tensors compiles.

Each distinct `out` storage (per dtype) becomes one more graph input, `out:<k>`, declared
with its storage size and a layout every out window in it is a box of (`buffer_layout`):
the bounding box of the windows when they share strides, else the flat storage. Output
`i` then becomes an explicit copy of its value into that input, writing the window's
strides and offset, and the output is the window viewed over the buffer:

    %out:0 = input {name = "out:0", storage = 10} : tensor<2x5xf32>    (pitch 5, width 3)
    %1 = strided_copy %0, %out:0 {space = [2, 3], src = …, dst = strided<[5, 1], offset: 0>}
    %2 = as_strided %1 {sizes = [2, 3], strides = [5, 1], offset = 0}
    output %2

`write_outputs` does this before the pass pipeline, so `fuse-copies` composes the copy
into `out` with the copy that made the value: one kernel per output, straight into the
caller's memory; outputs that are windows of one buffer, written one after the other
into disjoint boxes of it, are one batched launch (a zero-copy cat).

An `out` that may share memory with an input is *staged* (`stage_outputs`, after the
pipeline): its value is computed as without `out=`, into a buffer of its own (copied
first when it is a view of an input), and a last copy writes it into `out`. No kernel
then writes memory that a later or concurrent program reads: Philox's `out=(bits,
state)` with the state as its own out reads the old state in one launch and writes the
new one in the next. `may_meet` decides overlap; it is exact for windows of one lattice
and conservative otherwise (staging a safe case costs one copy, never a wrong answer).

A program over symbolic sizes is planned once for every out a call may give: its call
writes an output straight into the caller's out where `direct_outputs` says the program
lets it (a buffer that is that output alone), and the runtime copies the others in
(`stridec.runtime.outs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stridec.compiler.rewriting import Rewriter, explicit_copy
from stridec.errors import LayoutError, StridecError
from stridec.ir import ops as O
from stridec.ir.graph import Graph, Op, Value
from stridec.ir.layout import Layout
from stridec.ir.symbols import is_static

if TYPE_CHECKING:
    from stridec.compiler.codegen.program import Program

__all__ = [
    "OutStorage",
    "OutTarget",
    "buffer_layout",
    "byte_layout",
    "check_write_overlap",
    "direct_outputs",
    "may_meet",
    "stage_outputs",
    "write_outputs",
]


@dataclass(frozen=True, slots=True)
class OutStorage:
    """One caller storage outputs are written into: its size in elements of `dtype`, and
    whether its outputs are staged (they may share memory with an input)."""

    elements: int
    dtype: str
    staged: bool = False


@dataclass(frozen=True, slots=True)
class OutTarget:
    """Where output `i` goes: a window (`layout`, in elements) of storage `storage`."""

    storage: int
    layout: Layout


def byte_layout(sizes: Sequence[int], strides: Sequence[int], offset: int, itemsize: int) -> Layout:
    """The bytes a tensor covers, as a layout over its storage's bytes: each element is one
    more innermost dim of `itemsize` bytes at stride 1, so tensors of different dtypes over
    one storage compare too."""
    return Layout(
        (*sizes, itemsize), tuple(s * itemsize for s in strides) + (1,), offset * itemsize
    )


def _lattice(a: Layout, b: Layout) -> tuple[list[int], list[int], list[int], list[int]] | None:
    """Sizes of `a`, sizes of `b` and the strides of the dims where one of them moves, when
    they agree there; None when some dim has two strides."""
    na, nb, strides = [], [], []
    for n, m, s, t in zip(a.sizes, b.sizes, a.strides, b.strides, strict=True):
        if n == 1 and m == 1 and (s != t or s <= 0):
            continue  # a stride no element moves along: the dim says nothing
        if n > 1 and m > 1 and s != t:
            return None
        na.append(n)
        nb.append(m)
        strides.append(s if n > 1 else t)
    return na, nb, strides, []


def may_meet(a: Layout, b: Layout) -> bool:
    """Whether two layouts over one storage may address a common index (conservative:
    False only when provably disjoint). Each must give its own elements distinct indices.

    Exact for two windows of one lattice (equal strides where both move): each offset is
    written in the strides, largest first (`offset = Σ c_k·s_k`), which places each window
    as a box of coordinates; when the box spanning both is itself free of overlaps,
    addresses meet exactly where coordinates do, so the windows are disjoint iff their
    boxes miss in some dim. Channels 0..1 and 2..3 of a contiguous (2, 4, 3) buffer:
    strides (12, 3, 1), offsets 0 and 6 = 0·12 + 2·3 + 0·1, boxes [0, 2) and [2, 4) in
    dim 1: disjoint. The offsets are placed as they are and, failing that, `b`'s relative
    to `a`'s; where neither gives an overlap-free span, only the index ranges are compared.
    """
    if a.numel == 0 or b.numel == 0:
        return False
    if a.max_index() < b.min_index() or b.max_index() < a.min_index():
        return False
    if a.rank != b.rank:
        return True
    if a.offset > b.offset:
        a, b = b, a
    lattice = _lattice(a, b)
    if lattice is None:
        return True
    na, nb, strides, _ = lattice
    if any(s <= 0 for s in strides):
        return True
    for start_a, start_b in ((a.offset, b.offset), (0, b.offset - a.offset)):
        ca, cb = _digits(start_a, strides), _digits(start_b, strides)
        if ca is None or cb is None:
            continue
        lo = [min(x, y) for x, y in zip(ca, cb, strict=True)]
        hi = [max(x + n, y + m) for x, y, n, m in zip(ca, cb, na, nb, strict=True)]
        span = Layout(tuple(h - q for h, q in zip(hi, lo, strict=True)), tuple(strides), 0)
        if not span.may_overlap():
            return all(x < y + m and y < x + n for x, y, n, m in zip(ca, cb, na, nb, strict=True))
    return True


def check_write_overlap(dst: Layout, src: Layout) -> None:
    """`LayoutError` where `src` (a write's source, over the memory it writes) reads some
    element `dst` writes, unless each point reads the element it writes (`x.copy_(x)`:
    nothing changes): torch refuses such a copy where it can tell, and its answer where it
    cannot depends on its loop order. `_meets` decides (exact where it can be)."""
    if src.same_addresses(dst):
        return
    # A broadcast source reads each of its elements once per broadcast dim: its elements.
    read = Layout(tuple(1 if st == 0 else n for n, st in zip(src.sizes, src.strides,
                                                            strict=True)),
                  src.strides, src.offset)
    try:
        meet = read.may_overlap() or _meets(dst, read)
    except StridecError:  # an order of symbolic sizes no proof decides
        meet = True
    if meet:
        raise LayoutError(
            f"write: the source (sizes {list(src.sizes)}, layout {src}) reads elements the "
            f"write overwrites (layout {dst}) in the same memory: some elements of the "
            "input tensor and the written-to tensor refer to a single memory location, as "
            "torch refuses; clone() the source first"
        )


# Layouts this small are compared address by address.
_EXACT_ELEMENTS = 1 << 14


def _meets(a: Layout, b: Layout) -> bool:
    """Whether two layouts over one storage share an address: exact address by address
    for small static ones; else disjoint where the offsets differ by no multiple of the
    strides' gcd (a column `x[:, 1]` and `x[:, 2]` of a (3, 3) x: strides 3, offsets 1 and
    2), else `may_meet` (exact for windows of one lattice, conservative otherwise)."""
    if is_static((a.sizes, a.strides, a.offset, b.sizes, b.strides, b.offset)):
        if a.numel + b.numel <= _EXACT_ELEMENTS:
            return not _addresses(a).isdisjoint(_addresses(b))
        g = 0
        for lay in (a, b):
            for n, s in zip(lay.sizes, lay.strides, strict=True):
                if n > 1:
                    g = math.gcd(g, s)
        if g > 1 and (a.offset - b.offset) % g:
            return False
    return may_meet(a, b)


def _addresses(layout: Layout) -> set[int]:
    found = {layout.offset}
    for n, s in zip(layout.sizes, layout.strides, strict=True):
        found = {f + i * s for f in found for i in range(n)}
    return found


def _digits(value: int, strides: Sequence[int]) -> list[int] | None:
    """`value` written in `strides`, largest first (`value = Σ c_k·s_k`, each `c_k` as
    large as it can be); None when a remainder is left."""
    digits = [0] * len(strides)
    for k in sorted(range(len(strides)), key=lambda k: -strides[k]):
        digits[k], value = divmod(value, strides[k])
    return None if value else digits


def buffer_layout(windows: Sequence[Layout], elements: int) -> Layout:
    """A layout of a storage of `elements` that each window is a box of: the box spanning
    the windows when they share strides (and each is a box of it), else the flat storage.
    Copies into boxes of one layout batch into one launch (`lower_to_program`)."""
    flat = Layout((elements,), (1,), 0)
    live = [w for w in windows if w.numel]
    if not live:
        return flat
    first = live[0]
    strides = first.strides
    if any(w.rank != first.rank for w in live):
        return flat
    for w in live:
        for n, s, t in zip(w.sizes, w.strides, strides, strict=True):
            if n > 1 and s != t:
                return flat
    if any(s <= 0 for s in strides):
        return flat
    base = min(w.offset for w in live)
    starts = []
    for w in live:
        rest = w.offset - base
        start = [0] * len(strides)
        for k in sorted(range(len(strides)), key=lambda k: -strides[k]):
            start[k], rest = divmod(rest, strides[k])
        if rest:
            return flat
        starts.append(start)
    sizes = tuple(
        max(st[k] + w.sizes[k] for st, w in zip(starts, live, strict=True))
        for k in range(first.rank)
    )
    span = Layout(sizes, strides, base)
    if span.may_overlap() or not span.fits(elements):
        return flat
    return span


def _unique_name(graph: Graph, base: str) -> str:
    names = {op.arg_name for op in graph.ops if isinstance(op, O.InputOp)}
    name = base
    while name in names:
        name += "'"
    return name


def _storage_inputs(graph: Graph, storages: Sequence[OutStorage],
                    targets: Sequence[OutTarget]) -> list[Op]:
    """One declared input per out storage (not yet in the graph)."""
    inputs: list[Op] = []
    for k, st in enumerate(storages):
        windows = [t.layout for t in targets if t.storage == k]
        layout = buffer_layout(windows, st.elements)
        attrs = {
            "name": _unique_name(graph, f"out:{k}"),
            "sizes": layout.sizes,
            "dtype": st.dtype,
            "layout": None if layout.is_default() else layout,
            "storage": st.elements,
        }
        inputs.append(O.InputOp((), attrs))
    return inputs


def _write(rw: Rewriter, value: Value, buffer: Value, window: Layout) -> Value:
    """An explicit copy of `value` into the window `window` of `buffer`'s storage."""
    return explicit_copy(
        rw,
        value,
        layout=buffer.type.layout,
        dtype=value.type.dtype,
        space=value.type.sizes,
        src=value.type.layout,
        dst=window,
        into=buffer,
    )


def _rebuild(graph: Graph, targets: Sequence[OutTarget], which: set[int],
             buffers: list[Value]) -> None:
    """Write the outputs in `which` into their storages' inputs `buffers`, in output
    order, chaining the copies into one storage; each output becomes its window."""
    out_op = graph.output_op
    assert out_op is not None
    rw = Rewriter(graph)
    rw.ops = graph.ops[:-1]
    latest = list(buffers)
    for i, t in enumerate(targets):
        if i in which:
            latest[t.storage] = _write(rw, out_op.operands[i], latest[t.storage], t.layout)
    for i, t in enumerate(targets):
        if i in which:
            w = t.layout
            view = rw.create(
                O.AsStridedOp, [latest[t.storage]],
                {"sizes": w.sizes, "strides": w.strides, "offset": w.offset},
            )
            out_op.set_operand(i, view.result)
    rw.keep(out_op)
    graph.set_ops(rw.ops)


def write_outputs(graph: Graph, storages: Sequence[OutStorage],
                  targets: Sequence[OutTarget]) -> list[Value]:
    """Before the pipeline: add one input per out storage (staged ones too, so slots
    follow storage order) and write each output that is not staged into its window.
    Returns the storage inputs, by storage, for `stage_outputs`."""
    out_op = graph.output_op
    assert out_op is not None
    inputs = _storage_inputs(graph, storages, targets)
    # The graph's inputs first (an input reads nothing, so it may move up), then the out
    # storages: defined before any op that may come to write them (a placed generator),
    # and numbered after the caller's arguments.
    body = graph.ops[:-1]
    graph.set_ops([*(op for op in body if isinstance(op, O.InputOp)), *inputs,
                   *(op for op in body if not isinstance(op, O.InputOp)), out_op])
    buffers = [op.result for op in inputs]
    direct = {i for i, t in enumerate(targets) if not storages[t.storage].staged}
    _rebuild(graph, targets, direct, buffers)
    return buffers


def stage_outputs(graph: Graph, storages: Sequence[OutStorage],
                  targets: Sequence[OutTarget], buffers: list[Value]) -> None:
    """After the pipeline: write each staged output into its out storage's input (from
    `write_outputs`), last, from a buffer of its own (a view of an input is copied into
    one first)."""
    staged = {i for i, t in enumerate(targets) if storages[t.storage].staged}
    if not staged:
        return
    out_op = graph.output_op
    assert out_op is not None
    rw = Rewriter(graph)
    rw.ops = graph.ops[:-1]
    for i in sorted(staged):
        v = out_op.operands[i]
        if isinstance(v.root().owner, O.InputOp):  # memory `out` may overwrite: copy it first
            layout = Layout.contiguous(v.type.sizes)
            fresh = explicit_copy(rw, v, layout=layout, dtype=v.type.dtype, space=v.type.sizes,
                                  src=v.type.layout, dst=layout)
            out_op.set_operand(i, fresh)
    rw.keep(out_op)
    graph.set_ops(rw.ops)
    _rebuild(graph, targets, staged, buffers)
    from stridec.compiler.passes.dce import DeadCodeElimination

    DeadCodeElimination().run(graph)  # the views the staged outputs no longer read


def direct_outputs(program: Program) -> dict[int, int]:
    """{output: buffer} of the outputs a caller's out can be written straight into: a
    buffer slot that is this output alone, at offset 0, whose elements are the output's
    (a layout without holes over the whole buffer: an out of its strides is the
    buffer)."""
    found: dict[int, int] = {}
    slots = [o.slot for o in program.outputs]
    for k, o in enumerate(program.outputs):
        j = o.slot - program.n_inputs
        numel: Any = 1
        for n in o.sizes:
            numel = numel * n
        # (`==` of sizes is exact: equal for every value of the symbols)
        if (j >= 0 and slots.count(o.slot) == 1 and o.offset == 0 and o.dtype is None
                and program.buffers[j].elements == numel):
            found[k] = j
    return found
