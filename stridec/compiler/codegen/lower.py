"""`lower_to_program`: a graph after the default pipeline becomes a `Program` (after the
passes; not a pass itself).

Every explicit `copy` becomes one copy kernel (`codegen.copy`), every `philox` /
`philox_uniform` one Philox kernel (`codegen.philox`); views cost nothing (they only
change which storage slot and layout an output reads). Kernels of numel 0 are not
launched at all. A copy with a `frame` (a fill merged with the copies into its buffer by
the `merge-fills` pass) is one masked copy over its framed space (`copy_spec`).

Consecutive copies into disjoint boxes of one buffer (cat: one copy per input, each into
its slice) run as one kernel (`codegen.batch`), launched with (buffer, source of each):
a copy joins the open group when it writes the group's buffer, in the buffer's own
strides, a box that meets no member's box in some dim, and neither it nor any member
reads that buffer. Programs of one launch run in any order; disjoint writes and no reads
of what they write make that order irrelevant.
Over symbolic sizes the boxes must be disjoint for every value of the symbols
(`dst_box` and `boxes_disjoint` prove it), and the group is the class's batch kernel, C or
Triton alike: each member's sizes, strides, offsets and (Triton) program range are
expressions of the symbols, evaluated per call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.compiler.codegen.program import BufferSpec, KernelInfo, Launch, OutputSpec, Program
from stridec.compiler.codegen.spec import (
    Box,
    CopySpec,
    MaskBound,
    Tuning,
    copy_spec,
    dst_box,
    is_fill_only,
)
from stridec.compiler.codegen.target import Target
from stridec.compiler.codegen.targets import target as target_named
from stridec.errors import UnsupportedError
from stridec.ir.affine import boxes_disjoint
from stridec.ir.dtypes import as_dtype
from stridec.ir.graph import Graph, Value
from stridec.ir.index_maps import image_box, refine
from stridec.ir.layout import Layout
from stridec.ir.ops import (
    AsStridedOp,
    CopyOp,
    ExplicitCopyOp,
    InputOp,
    NaturalCopyOp,
    OutputOp,
    PhiloxOp,
    PhiloxUniformOp,
)
from stridec.ir.symbols import (
    Sym,
    UndecidedError,
    statically_true,
)

__all__ = ["lower_to_program"]


def _bits_view(dtype_name: str) -> str | None:
    # Kernels read and write unsigned words as their int32 bit patterns.
    return "int32" if dtype_name == "uint32" else None


# Most copies one batch kernel runs: each adds a pointer parameter and a branch, so
# Triton's compile time grows with the count, and a program passes one comparison per
# member before its own; a longer cat takes one launch per 32 inputs.
MAX_BATCH = 32

@dataclass
class _Member:
    spec: CopySpec
    src_slot: int
    reads: int | None  # the slot read, None for a fill
    box: Box | None  # where it writes in its buffer's layout; None when not a box
    ops: tuple[int, ...]  # positions in the graph of the ops this copy carries out
    # The buffer's layout `box` counts in: the layout itself, or it with dims split
    # (`_split_frame`); boxes of one frame only are compared.
    frame: Layout | None = None


@dataclass
class _Group:
    """Copies into one buffer, to be launched as one kernel (see the module docstring)."""

    dst_slot: int
    members: list[_Member] = field(default_factory=list)

    def admits(self, m: _Member, dst_slot: int) -> bool:
        first = self.members[0]
        if dst_slot != self.dst_slot or len(self.members) >= MAX_BATCH:
            return False
        if m.spec.dst_dtype != first.spec.dst_dtype or m.box is None:
            return False
        if any(x.reads == dst_slot for x in (*self.members, m)):
            return False
        # Boxes of one frame: the group's, or the newcomer's where the group's members
        # are boxes of it too (a piece of one window row among pieces of several).
        frame = first.frame
        boxes: list[Box | None] = [x.box for x in self.members]
        box = m.box if m.frame == frame else _box_in(m, frame)
        if box is None:
            frame, box = m.frame, m.box
            boxes = [x.box if x.frame == frame else _box_in(x, frame) for x in self.members]
        if not all(b is not None and boxes_disjoint(b, box) for b in boxes):
            return False
        for x, b in zip(self.members, boxes, strict=True):
            x.box, x.frame = b, frame
        m.box, m.frame = box, frame
        return True


def _box_in(m: _Member, frame: Layout | None) -> Box | None:
    """Where member `m` writes, as a box of `frame` (a view of its buffer's layout); None
    where it is none, or cannot be told for every value of the symbols."""
    if frame is None:
        return None
    try:
        return image_box(Layout(m.spec.sizes, m.spec.dst_strides, m.spec.dst_offset), frame)
    except UndecidedError:
        return None


def _split_frame(dst: Layout, whole: Layout) -> Layout | None:
    """`whole` with each dim split where `dst` steps through it by more than one element
    at a time, so that what `dst` writes may be a box of it: Swin's shifted windows
    written into a caller's (8, 7, 7, C) out, one copy per piece of the roll walking
    (2, 1, 1, rows, cols, C) at window strides 4 and 2 and 1 (in units of a window), write
    windows {0, 4}, {1, 5}, ... -- no box of dim 0; over dim 0 split as (2, 2, 2) each is
    one. Static layouts with no stride inside another dim's step; None where no dim
    splits or the steps do not divide it."""
    if not (dst.is_static() and whole.is_static()):
        return None
    steps: list[set[int]] = [set() for _ in whole.sizes]
    for n, s in zip(dst.sizes, dst.strides, strict=True):
        if n == 1 or s == 0:
            continue
        for m, (size, stride) in enumerate(zip(whole.sizes, whole.strides, strict=True)):
            if size > 1 and stride and abs(s) % abs(stride) == 0 and (
                    1 < abs(s) // abs(stride) < size):
                steps[m].add(abs(s) // abs(stride))
                break
    if not any(steps):
        return None
    split = []
    for size, found in zip(whole.sizes, steps, strict=True):
        factors, inner = [], 1
        for q in sorted(found):
            if q % inner:
                return None
            factors.append(q // inner)
            inner = q
        if size % inner:
            return None
        split.append((size // inner, *reversed(factors)))
    return refine(whole, split)


class _Lowering:
    def __init__(self, graph: Graph, target: Target, tuning: Tuning | None = None,
                 hint: Mapping[str, int] | None = None) -> None:
        self.graph = graph
        self.target = target
        self.tuning = tuning
        # A graph over symbolic sizes: the binding whose class its kernels serve.
        self.hint = hint
        self.slot: dict[int, int] = {}
        self.buffers: list[BufferSpec] = []
        self.kernels: list[KernelInfo] = []
        self.kernel_index: dict[tuple, int] = {}
        self.launches: list[Launch] = []
        self.n_inputs = 0
        # Copies into one buffer not launched yet: they may become one kernel.
        self.group: _Group | None = None
        self.layouts: dict[int, Layout] = {}  # each copy buffer's layout, by slot
        self.slot_dtypes: list[str] = []  # the dtype each slot's storage holds

    def read_view(self, slot: int, dtype: Any) -> str | None:
        """How a kernel reads `slot` as elements of `dtype`: the dtype its storage is
        viewed as (None: as it is). A storage read as another type (a `bitcast`) is
        viewed as that type: the bits, never converted."""
        bits = _bits_view(dtype.name)
        if bits is not None or self.slot_dtypes[slot] == dtype.name:
            return bits
        return dtype.name

    def new_buffer(self, value: Value, elements: int) -> int:
        if not isinstance(elements, Sym):
            elements = max(elements, 1)
        self.buffers.append(BufferSpec(elements, value.type.dtype.name))
        self.slot_dtypes.append(value.type.dtype.name)
        slot = self.n_inputs + len(self.buffers) - 1
        self.slot[id(value)] = slot
        return slot

    def add_launch(
        self, kernel: Any, args: tuple[int, ...], views: tuple, ops: tuple[int, ...]
    ) -> None:
        if kernel.numel == 0 and kernel.kind == "copy":
            return
        info = self.target.info(kernel)
        # A C kernel's name covers its params; a Triton kernel's source only its class.
        key = (info.name, info.grid, info.args, tuple(info.constexprs.items()), info.num_warps)
        index = self.kernel_index.get(key)
        if index is None:
            index = len(self.kernels)
            self.kernels.append(info)
            self.kernel_index[key] = index
        self.launches.append(Launch(index, args, views, tuple(sorted(set(ops)))))

    def slot_of(self, value: Value) -> int:
        return self.slot[id(value.root())]

    def copy(self, op: ExplicitCopyOp, position: int) -> None:
        layout = op.layout
        if op.writes_into:
            dst_slot = self.slot_of(op.operands[1])
            self.slot[id(op.result)] = dst_slot
        else:
            dst_slot = self.new_buffer(op.result, layout.min_storage_size())
            self.layouts[dst_slot] = layout
        src_slot = self.slot_of(op.operands[0]) if op.operands else dst_slot
        self._submit(copy_spec(op), src_slot, dst_slot, (position,))

    def _box(self, spec: CopySpec, dst_slot: int) -> tuple[Box | None, Layout | None]:
        """Where `spec` writes in its buffer, as a box of the buffer's layout or of that
        layout with dims split (`_split_frame`), and the layout it counts in."""
        layout = self.layouts.get(dst_slot)
        if layout is None:
            return None, None
        # Over symbolic sizes, a box for every value of the symbols (or None).
        try:
            box = dst_box(spec, layout.sizes, layout.strides, layout.offset)
            if box is None and spec.rank != layout.rank:
                # A copy over a split space (a cat read through a view, cut by
                # `fuse-copies`) still writes a box of the buffer: its image there.
                dst = Layout(spec.sizes, spec.dst_strides, spec.dst_offset)
                box = image_box(dst, layout)
                frame = None if box is not None else _split_frame(dst, layout)
                if frame is not None:
                    return image_box(dst, frame), frame
        except UndecidedError:  # a bound that depends on the symbols' values
            return None, None
        return box, layout

    def _submit(
        self, spec: CopySpec, src_slot: int, dst_slot: int, ops: tuple[int, ...]
    ) -> None:
        """Add a copy to the open group, or launch that group and open one with it. `ops`:
        the positions of the graph's ops it carries out."""
        if spec.numel == 0:
            return
        box, frame = self._box(spec, dst_slot)
        member = _Member(spec, src_slot, None if is_fill_only(spec) else src_slot, box, ops,
                         frame)
        if self.group is not None and self.group.admits(member, dst_slot):
            self.group.members.append(member)
            return
        self._launch_group()
        self.group = _Group(dst_slot, [member])

    def _launch_group(self) -> None:
        group, self.group = self.group, None
        if group is None:
            return
        dst = group.dst_slot
        members = group.members
        # The copies the target launches: members merged where it runs them as one.
        parts = self.target.merge([m.spec for m in members], [m.src_slot for m in members],
                                  self.hint)
        ops = tuple(i for m in members for i in m.ops)
        slots = [members[ix[0]].src_slot for _, ix in parts]
        typed = self.target.typed_storages
        dst_view = _bits_view(members[0].spec.dst_dtype.name) if typed else None
        reads = [self.read_view(s, spec.src_dtype) if typed else None
                 for (spec, _), s in zip(parts, slots, strict=True)]
        if len(parts) == 1:
            kernel = self.target.copy(parts[0][0], self.tuning, self.hint)
            self.add_launch(kernel, (slots[0], dst), (reads[0], dst_view), ops)
            return
        kernel = self.target.copy_batch([spec for spec, _ in parts], self.tuning, self.hint)
        self.add_launch(kernel, (dst, *slots), (dst_view, *reads), ops)

    def flush(self) -> None:
        """Launch the open group."""
        self._launch_group()

    def philox(self, op: PhiloxOp | PhiloxUniformOp, position: int) -> None:
        self.flush()
        state = op.operands[0]
        sizes = op.sizes
        # Word k of the state (sizes (6,) or (1, 1, 1, 6): k is the last coordinate) is
        # read where its layout puts it: any view of the words is read in place.
        state_layout = state.type.layout
        state_index = tuple(
            state_layout.index_of((0,) * (state_layout.rank - 1) + (k,)) for k in range(6)
        )
        bits, new_state = op.results
        if len(op.operands) == 2:  # placed into a caller's buffer
            bits_slot = self.slot_of(op.operands[1])
            self.slot[id(bits)] = bits_slot
        else:
            bits_slot = self.new_buffer(bits, bits.type.layout.min_storage_size())
        state_slot = self.new_buffer(new_state, 6)
        uniform = isinstance(op, PhiloxUniformOp)
        if op.space is None:  # natural: contiguous, logical index = address
            space, index, dst = sizes, Layout.contiguous(sizes), Layout.contiguous(sizes)
        else:
            space, index, dst = op.space, op.index, op.dst
        spec = PhiloxSpec(
            sizes=space,
            index_strides=index.strides,
            index_offset=index.offset,
            dst_strides=dst.strides,
            dst_offset=dst.offset,
            numel=math.prod(sizes),
            dst_dtype=bits.type.dtype,
            distribution="uniform" if uniform else "bits",
            low=op.low if uniform else 0.0,
            high=op.high if uniform else 1.0,
            masks=tuple(MaskBound(c, lo, hi) for c, lo, hi in op.masks or ()),
            fill=op.fill if op.fill is not None else 0,
            state_index=state_index,
        )
        kernel = self.target.philox(spec, self.tuning, self.hint)
        self.add_launch(
            kernel,
            (self.slot_of(state), bits_slot, state_slot),
            (self.read_view(self.slot_of(state), as_dtype("int32")),
             _bits_view(bits.type.dtype.name), "int32"),
            (position,),
        )

    def run(self) -> Program:
        inputs = self.graph.inputs
        self.n_inputs = len(inputs)
        self.slot_dtypes = [v.type.dtype.name for v in inputs]
        for i, v in enumerate(inputs):
            self.slot[id(v)] = i
            # Copies write into an input only where it is a caller's `out` storage, its
            # windows boxes of this layout (`compiler.outputs`): they batch as a cat does.
            self.layouts[i] = v.type.layout
        outputs: list[OutputSpec] = []
        for position, op in enumerate(self.graph.ops):
            if isinstance(op, (InputOp, AsStridedOp)):
                continue
            if isinstance(op, NaturalCopyOp):
                raise UnsupportedError(
                    "lower_to_program: a copy in natural form (no space, src, dst) should "
                    "have been made explicit by lower-formats in the pipeline"
                )
            if isinstance(op, CopyOp):
                self.copy(op, position)
            elif isinstance(op, (PhiloxOp, PhiloxUniformOp)):
                self.philox(op, position)
            elif isinstance(op, OutputOp):
                self.flush()
                for k, v in enumerate(op.operands):
                    lay = v.type.layout
                    if any(statically_true(st < 0) if isinstance(st, Sym) else st < 0
                           for st in lay.strides):
                        raise UnsupportedError(
                            f"lower_to_program: output {k} has layout {lay}, with a negative "
                            "stride no torch tensor can hold; expected a pipeline that ends "
                            "with plan-memory, which copies such an output"
                        )
                    slot = self.slot_of(v)
                    # A view of the slot's bytes as another type (a `bitcast`) says which.
                    dtype = v.type.dtype.name
                    read = None if self.slot_dtypes[slot] == dtype else dtype
                    outputs.append(OutputSpec(slot, lay.sizes, lay.strides, lay.offset, read))
            elif op.aliases_operand():
                continue
            else:
                raise UnsupportedError(
                    f"lower_to_program: op '{op.name}' should have been lowered by the pipeline"
                )
        self.flush()
        symbols = tuple(sorted(self.hint)) if self.hint is not None else ()
        return Program(
            self.n_inputs, self.buffers, self.kernels, self.launches, outputs, str(self.graph),
            symbols, tuple(self.slot_dtypes[: self.n_inputs]),
        )


def lower_to_program(graph: Graph, target: str | Target = "cuda", tuning: Tuning | None = None,
                     hint: Mapping[str, int] | None = None) -> Program:
    """Generate the kernels of `graph` (after the default pipeline) for `target`, a
    code-generation target or its name (`codegen.target`): "cuda" (Triton), "cpu" (Triton
    kernels for the interpreter) or "c" (C for the `cpu` backend); `tuning` overrides
    every kernel's CUDA plan (sweeps in `bench/tune.py`). A graph over
    symbolic sizes is lowered for the class of the binding `hint` (`plan_copy`,
    `generate_philox`): a `Program` over those symbols, its kernels' arguments and grids
    symbolic."""
    return _Lowering(graph, target_named(target), tuning, hint).run()
