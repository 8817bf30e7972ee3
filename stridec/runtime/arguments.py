"""A call's arguments: the checks every call makes before anything runs (each failure a
`CallError` naming the argument), and the kernel backend they run on."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from stridec.errors import CallError, UnsupportedError
from stridec.ir.graph import Graph
from stridec.ir.layout import Layout
from stridec.ir.ops import AsStridedOp, ExplicitCopyOp, FillOp
from stridec.ir.types import TensorType
from stridec.runtime.tensors import FakeTensor, without_memory

__all__ = ["as_fake", "check_arguments", "check_declared", "cpu_backend", "declared_inputs",
           "requires_grad", "resolve_backend"]


def check_arguments(where: str, inputs: Sequence[tuple[str, TensorType]],
                    tensors: Sequence[Any], *, data: bool = True,
                    sizes: bool = True) -> torch.device | None:
    """The arguments of a call to a graph of `inputs` (name, type), checked: their count
    (`where` names the callee), type, layout, dtype, sizes and one device for all; with
    `data`, also that each tensor has memory a kernel can address (`without_memory`), is
    no neg view and its storage holds its layout (tensors without data — fake or meta —
    skip those). Without `sizes` the sizes are left to the
    caller (symbolic ones: `bind_call`). Returns the tensors' device (None without
    tensors); raises `CallError` naming the argument."""
    if len(tensors) != len(inputs):
        names = ", ".join(n for n, _ in inputs)
        raise CallError(
            f"{where}: expected {len(inputs)} tensor argument(s) ({names}); got {len(tensors)}"
        )
    device = None
    for (name, t_type), t in zip(inputs, tensors, strict=True):
        if not isinstance(t, torch.Tensor):
            raise CallError(f"argument '{name}': expected a torch.Tensor; got {type(t).__name__}")
        if t.is_nested:
            raise CallError(f"argument '{name}': expected a strided tensor; got a nested tensor")
        if t.layout != torch.strided:
            # Sparse and opaque (mkldnn) tensors have no strides or storage to specialize on.
            raise CallError(
                f"argument '{name}': expected a strided tensor; got layout {t.layout}"
            )
        if t.dtype != t_type.dtype.torch:
            raise CallError(f"argument '{name}': expected dtype {t_type.dtype}; got {t.dtype}")
        if sizes:
            shape = tuple(t.shape) if data else tuple(int(n) for n in t.shape)
            if shape != t_type.sizes:
                raise CallError(
                    f"argument '{name}': expected sizes {list(t_type.sizes)}; got {list(shape)}"
                )
        if data and t.is_neg():
            # A neg view (`z.conj().imag`) stores x and means -x: kernels read storage.
            raise CallError(
                f"argument '{name}': expected a tensor without a pending negation; got a "
                "neg view (pass it through .resolve_neg() first)"
            )
        missing = without_memory(t) if data else None
        if missing is not None:
            raise CallError(
                f"argument '{name}': expected a tensor with memory of its own; got {missing}"
            )
        if device is None:
            device = t.device
        elif t.device != device:
            raise CallError(f"argument '{name}': expected device {device}; got {t.device}")
        if data and t.numel():
            # torch strides and offsets are >= 0: the lowest index is the offset, the
            # highest offset + Σ (n_k - 1)·stride_k. (Plain ints: this runs every call.)
            strides, offset = t.stride(), t.storage_offset()
            last = offset + sum((n - 1) * st for n, st in zip(t.shape, strides, strict=True))
            storage = t.untyped_storage().nbytes() // t.element_size()
            if last >= storage:
                layout = Layout(tuple(t.shape), tuple(strides), offset)
                raise CallError(
                    f"argument '{name}': layout {layout} reaches element {last}, past its "
                    f"storage of {storage} elements"
                )
    return device


def check_declared(
    t: torch.Tensor, name: str, layout: Layout, storage: int | None, raw: bool
) -> None:
    """An input declared with a layout or storage: with that layout, its storage must
    hold the declared elements; with another, the graph must not read its storage
    directly (as_strided), whose meaning the declared layout fixed."""
    actual = Layout(tuple(t.shape), tuple(t.stride()), t.storage_offset())
    if actual.same_addresses(layout):
        held = t.untyped_storage().nbytes() // t.element_size()
        if storage is not None and held < storage:
            raise CallError(
                f"argument '{name}': expected a storage of at least {storage} elements "
                f"(declared); got {held}"
            )
    elif raw:
        raise CallError(
            f"argument '{name}': the graph reads this input's storage (as_strided) as "
            f"declared, layout {layout}; got strides {list(actual.strides)}, offset "
            f"{actual.offset}"
        )



def declared_inputs(graph: Graph) -> list[tuple[int, Layout, int | None, bool]]:
    """Per input declared with a layout or storage: its position, layout, storage and
    whether the graph reads its storage directly (an `as_strided`, or an explicit copy
    of text IR, over it), so that its meaning depends on the declared layout."""
    raw: set[int] = set()
    for op in graph.ops:
        if isinstance(op, (AsStridedOp, ExplicitCopyOp)) and not isinstance(op, FillOp):
            raw.add(id(op.operands[0].root()))
    return [
        (i, v.type.layout, v.owner.storage, id(v) in raw)
        for i, v in enumerate(graph.inputs)
        if v.owner.declared
    ]


_fallback_warned: list[bool] = []


def cpu_backend() -> str:
    """What `auto` runs CPU tensors on: `cpu` when C kernels build here, else `interpret`
    (warned once per process); neither (no C compiler, no Triton): `UnsupportedError`
    naming both."""
    from stridec.runtime.backends import TRITON_EXTRA, triton_version
    from stridec.runtime.backends.cpu import available, compiler

    if available():
        return "cpu"
    if triton_version() is None:
        raise UnsupportedError(
            f"backend 'auto' on CPU tensors: no working C compiler ({compiler()!r}; set "
            "STRIDEC_CC or CC) for the cpu backend, and no Triton for the interpreter "
            f"(install the triton extra: {TRITON_EXTRA})"
        )
    if not _fallback_warned:
        _fallback_warned.append(True)
        warnings.warn(
            f"stridec: no working C compiler ({compiler()!r}; set STRIDEC_CC or CC): backend "
            "'auto' runs CPU tensors through Triton's interpreter ('interpret'), which is slow",
            RuntimeWarning,
            stacklevel=4,
        )
    return "interpret"


def as_fake(t: Any, name: str, mode: Any, convert: bool = True) -> Any:
    """`t` as a FakeTensor of `mode`: itself, or a real tensor converted where the mode
    takes real tensors (`convert`, `allow_non_fake_inputs`); `CallError` naming the
    argument otherwise, as torch refuses to mix them."""
    if isinstance(t, FakeTensor):
        if t.fake_mode is not mode:
            raise CallError(f"argument '{name}': expected a FakeTensor of the active "
                            "FakeTensorMode; got one of another mode")
        return t
    if convert and mode.allow_non_fake_inputs:
        return mode.from_tensor(t)
    raise CallError(
        f"argument '{name}': expected a FakeTensor under the active FakeTensorMode; got a "
        f"{type(t).__name__} (convert it with mode.from_tensor(t), or make the mode with "
        "allow_non_fake_inputs=True)"
    )


def requires_grad(tensors: tuple[Any, ...]) -> bool:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            return True
    return False




def resolve_backend(backend: str, device: torch.device,
                    inputs: Sequence[tuple[str, TensorType]]) -> str:
    """The kernel backend a call of tensors on `device` runs on under `backend` (`auto`:
    triton on CUDA, `cpu_backend` on the CPU); `CallError`, naming the first of `inputs`,
    where the backend cannot run tensors of that device."""
    if backend == "auto":
        backend = "triton" if device.type == "cuda" else cpu_backend()
    # Every argument is on `device` (`check_arguments`): the message names the first.
    where = f"argument '{inputs[0][0]}': " if inputs else ""
    if backend == "triton" and device.type != "cuda":
        raise CallError(f"{where}backend 'triton' runs CUDA tensors; got tensors on {device}")
    if backend in ("interpret", "cpu") and device.type != "cpu":
        raise CallError(f"{where}backend {backend!r} runs CPU tensors; got tensors on "
                        f"{device}")
    return backend
