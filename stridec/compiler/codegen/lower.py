"""`lower-to-triton`: a graph after the default pipeline becomes a `Program`.

Every explicit `copy` becomes one copy kernel (`codegen.copy`), every `philox` /
`philox_uniform` one Philox kernel (`codegen.philox`); views cost nothing (they only
change which storage slot and layout an output reads). Kernels of numel 0 are not
launched at all. One pair merges: a fill of a new buffer whose only reader is a copy of
a box into it (pad, and the adjoints of slices) is held back one step and, when that
copy comes, both become one masked copy (`fill_then_box_copy`): each element written
once, not twice.
"""

from __future__ import annotations

import math
from typing import Any

from stridec.compiler.codegen.copy import generate_copy
from stridec.compiler.codegen.philox import PhiloxSpec, generate_philox
from stridec.compiler.codegen.program import BufferSpec, KernelInfo, Launch, OutputSpec, Program
from stridec.compiler.codegen.spec import CopySpec, MaskBound, Tuning, fill_then_box_copy
from stridec.errors import UnsupportedError
from stridec.ir.graph import Graph, Value
from stridec.ir.layout import Layout

__all__ = ["lower_to_program"]


def _info(kernel: Any) -> KernelInfo:
    constexprs = kernel.constexprs
    if not isinstance(constexprs, dict):
        constexprs = dict(constexprs)
    return KernelInfo(
        kind=kernel.kind,
        name=kernel.name,
        source=kernel.source,
        grid=tuple(kernel.grid),
        constexprs=constexprs,
        num_warps=getattr(kernel, "num_warps", 4),
        strategy=getattr(kernel, "strategy", ""),
        index_bits=kernel.index_bits,
    )


def _bits_view(dtype_name: str) -> str | None:
    # Kernels read and write unsigned words as their int32 bit patterns.
    return "int32" if dtype_name == "uint32" else None


class _Lowering:
    def __init__(self, graph: Graph, target: str, tuning: Tuning | None = None) -> None:
        self.graph = graph
        self.target = target
        self.tuning = tuning
        self.slot: dict[int, int] = {}
        self.buffers: list[BufferSpec] = []
        self.kernels: list[KernelInfo] = []
        self.kernel_index: dict[str, int] = {}
        self.launches: list[Launch] = []
        self.n_inputs = 0
        # A fill of a new buffer, held back one step: a copy into that buffer may absorb it.
        self.pending: tuple[Value, CopySpec, int] | None = None

    def new_buffer(self, value: Value, elements: int) -> int:
        self.buffers.append(BufferSpec(max(elements, 1), value.type.dtype.name))
        slot = self.n_inputs + len(self.buffers) - 1
        self.slot[id(value)] = slot
        return slot

    def add_launch(self, kernel: Any, args: tuple[int, ...], views: tuple) -> None:
        if kernel.numel == 0 and kernel.kind == "copy":
            return
        index = self.kernel_index.get(kernel.name)
        if index is None:
            index = len(self.kernels)
            self.kernels.append(_info(kernel))
            self.kernel_index[kernel.name] = index
        self.launches.append(Launch(index, args, views))

    def slot_of(self, value: Value) -> int:
        return self.slot[id(value.root())]

    def copy(self, op: Any) -> None:
        a = op.attrs
        layout: Layout = a["layout"]
        pending, self.pending = self.pending, None
        if len(op.operands) == 2:
            dst_slot = self.slot_of(op.operands[1])
            self.slot[id(op.result)] = dst_slot
        else:
            dst_slot = self.new_buffer(op.result, layout.min_storage_size())
        space = a["space"]
        if op.operands:
            source = op.operands[0]
            src_slot = self.slot_of(source)
            src, src_dtype = a["src"], source.type.dtype
            src_strides, src_offset = src.strides, src.offset
        else:  # a fill: nothing is read
            src_slot, src_dtype = dst_slot, a["dtype"]
            src_strides, src_offset = (0,) * len(space), 0
        masks = tuple(MaskBound(c, lo, hi) for c, lo, hi in a["masks"] or ())
        fill = a["fill"]
        if not op.operands:
            masks = (MaskBound((0,) * len(space), 1, 1),)  # never valid: every point is `fill`
        # fill None with masks: a domain restriction (masked points are not written).
        spec = CopySpec(
            sizes=space,
            src_strides=src_strides,
            src_offset=src_offset,
            dst_strides=a["dst"].strides,
            dst_offset=a["dst"].offset,
            src_dtype=src_dtype,
            dst_dtype=a["dtype"],
            masks=masks,
            fill=fill,  # type: ignore[arg-type]
        )
        if pending is not None:
            merged = self._absorb(pending, op, spec)
            if merged is not None:
                spec = merged
            else:
                self._launch_copy(pending[1], pending[2], pending[2])
        if not op.operands and self._fill_can_wait(op):
            self.pending = (op.result, spec, dst_slot)
            return
        self._launch_copy(spec, src_slot, dst_slot)

    def _fill_can_wait(self, op: Any) -> bool:
        """A fill of a whole new buffer whose only reader is one copy into it."""
        return len(op.result.uses) == 1 and op.result.uses[0][0].name == "copy"

    def _absorb(
        self, pending: tuple[Value, CopySpec, int], op: Any, spec: CopySpec
    ) -> CopySpec | None:
        """`fill_then_box_copy` of the held-back fill and `op`, when `op` copies into it."""
        value, fill_spec, _ = pending
        if len(op.operands) != 2 or op.operands[1] is not value:
            return None
        return fill_then_box_copy(fill_spec, spec)

    def _launch_copy(self, spec: CopySpec, src_slot: int, dst_slot: int) -> None:
        kernel = generate_copy(spec, self.target, self.tuning)
        self.add_launch(
            kernel,
            (src_slot, dst_slot),
            (_bits_view(spec.src_dtype.name), _bits_view(spec.dst_dtype.name)),
        )

    def flush(self) -> None:
        """Launch a held-back fill that nothing absorbed."""
        if self.pending is not None:
            _, spec, slot = self.pending
            self.pending = None
            self._launch_copy(spec, slot, slot)

    def philox(self, op: Any) -> None:
        self.flush()
        state = op.operands[0]
        sizes = op.attrs["sizes"]
        if state.type.layout != Layout.contiguous(state.type.sizes):
            raise UnsupportedError("philox: the state must be a contiguous tensor of 6 words")
        a = op.attrs
        bits, new_state = op.results
        bits_slot = self.new_buffer(bits, bits.type.layout.min_storage_size())
        state_slot = self.new_buffer(new_state, 6)
        uniform = op.name == "philox_uniform"
        if a["space"] is None:  # natural: contiguous, logical index = address
            space, index, dst = sizes, Layout.contiguous(sizes), Layout.contiguous(sizes)
        else:
            space, index, dst = a["space"], a["index"], a["dst"]
        spec = PhiloxSpec(
            sizes=space,
            index_strides=index.strides,
            index_offset=index.offset,
            dst_strides=dst.strides,
            dst_offset=dst.offset,
            numel=math.prod(sizes),
            dst_dtype=bits.type.dtype,
            distribution="uniform" if uniform else "bits",
            low=a.get("low", 0.0) if uniform else 0.0,
            high=a.get("high", 1.0) if uniform else 1.0,
            masks=tuple(MaskBound(c, lo, hi) for c, lo, hi in a["masks"] or ()),
            fill=a["fill"] if a["fill"] is not None else 0,
        )
        tuning = self.tuning if self.target == "cuda" else None
        block = tuning.blocks[0] if tuning and tuning.blocks else None
        warps = tuning.num_warps if tuning and tuning.num_warps else 4
        kernel = generate_philox(spec, self.target, block, warps)
        self.add_launch(
            kernel,
            (self.slot_of(state), bits_slot, state_slot),
            ("int32", _bits_view(bits.type.dtype.name), "int32"),
        )

    def run(self) -> Program:
        inputs = self.graph.inputs
        self.n_inputs = len(inputs)
        for i, v in enumerate(inputs):
            self.slot[id(v)] = i
        outputs: list[OutputSpec] = []
        for op in self.graph.ops:
            if op.name in ("input", "as_strided"):
                continue
            if op.name == "copy":
                self.copy(op)
            elif op.name in ("philox", "philox_uniform"):
                self.philox(op)
            elif op.name == "output":
                self.flush()
                for v in op.operands:
                    lay = v.type.layout
                    outputs.append(OutputSpec(self.slot_of(v), lay.sizes, lay.strides, lay.offset))
            elif op.aliases_operand():
                continue
            else:
                raise UnsupportedError(
                    f"lower-to-triton: op '{op.name}' should have been lowered by the pipeline"
                )
        self.flush()
        return Program(
            self.n_inputs, self.buffers, self.kernels, self.launches, outputs, str(self.graph)
        )


def lower_to_program(graph: Graph, target: str = "cuda", tuning: Tuning | None = None) -> Program:
    """Generate the kernels of `graph` (after the default pipeline) for `target`;
    `tuning` overrides every kernel's CUDA plan (sweeps in `bench/tune.py`)."""
    return _Lowering(graph, target, tuning).run()
