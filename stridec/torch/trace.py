"""`stridec.trace(fn, *example_tensors)`: run torch layout code on proxies, get a `Graph`.

    def to_heads(x):                                   # (B, T, H*D) -> (B, H, T, D)
        B, T, _ = x.shape
        return x.view(B, T, 8, -1).transpose(1, 2).contiguous()

    graph = stridec.trace(to_heads, torch.randn(2, 16, 64))
    y = stridec.compile(graph)(x)

Each example tensor becomes a graph input (named after `fn`'s parameters) of its sizes
and dtype; `fn` runs on `Proxy` values whose tensor methods, and the torch functions they
reach through `__torch_function__`, record ops with the builder. Sizes are static: `x.shape`
and `x.size(d)` are plain ints, so shape arithmetic in `fn` runs in Python as usual --
unless `dynamic=` makes some symbolic (docs/symbolic.md): then they are `Sym`s, which take
part in the same arithmetic, and `x.shape` is a tuple. A dim may be declared a multiple
(``"8*B"``), so `chunk(8)` divides it; `/` of a size is exact or refused, and `int()` of
one (Swin's ``int(windows.shape[0] / (H * W / ws / ws))``) is the size (`_SizeInt`).

Traced: the tensor methods of the shared surface (`stridec.ir.builder.SURFACE`: permute,
transpose, reshape, view, split, rot90, ..., with torch's keyword forms), the matching
`torch.*` functions, the builder's functions (`builder.FUNCTIONS`: `torch.cat`, `stack`,
`broadcast_tensors`, `atleast_Nd`, `einsum` as a view, the `*_copy` view variants, ...),
in-place view methods (`unsqueeze_`, `t_`, ...: the proxy's value changes, as a torch
tensor's metadata does; on an argument, the caller's tensor's: `OutputOp.reviews`),
`torch.zeros_like` / `ones_like`, `torch.nn.functional.pad` (constant mode),
`pixel_shuffle`, `pixel_unshuffle` and `torch.nn.functional.unfold` (im2col); einops code
(`einops_backend`). Anything else — arithmetic, reductions, indexing with tensors, other
in-place methods, data-dependent calls — raises
`UnsupportedError` naming the call; so does every draw from torch's random generator, at the call
(`stridec.torch.random`: Philox with an explicit state traces instead).
`contiguous(memory_format=...)` is the tensor itself where it already is
contiguous in that format (channels-last too), else new memory in it; `.to(memory_format=
...)` the tensor itself where torch suggests that format for its strides; `clone` always
new memory, with torch's `preserve_format` strides or in the format given (see
docs/semantics.md).
"""

from __future__ import annotations

import builtins
import contextlib
import dis
import functools
import inspect
import operator
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.overrides import resolve_name

import stridec.ir.builder as B
from stridec.compiler.outputs import check_write_overlap
from stridec.errors import CallError, StridecError, UnsupportedError
from stridec.ir.graph import Graph, Value
from stridec.ir.ops import storage_root
from stridec.ir.symbols import Sym, is_static, parse_size, substitute, symbol
from stridec.torch import einops_backend
from stridec.torch.random import DROPOUTS, RANDOM_CALLS, dropout, random_refusal, refuse_random

__all__ = ["Proxy", "trace"]


def _unsupported(call: str, why: str = "") -> UnsupportedError:
    detail = f" ({why})" if why else ""
    return UnsupportedError(
        f"stridec.trace: {call} is not a layout operation stridec can trace{detail}"
    )


def _value(x: Any, call: str) -> Value:
    if isinstance(x, Proxy):
        return x.value
    if isinstance(x, torch.Tensor):
        raise _unsupported(call, "a torch.Tensor that is not a traced input, e.g. a constant "
                                 "made inside the function, cannot enter a graph")
    raise CallError(f"stridec.trace: {call}: expected a traced tensor; got {type(x).__name__}")


def _ints(args: tuple, call: str) -> tuple[int, ...]:
    """`f(2, 3)`, `f((2, 3))` and `f(torch.Size([2, 3]))` alike, as torch takes sizes;
    numpy integers too (anything with `__index__`)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    for a in args:
        if isinstance(a, (Proxy, torch.Tensor)):
            raise _unsupported(call, "sizes or dims given as tensors")
    try:
        return tuple(a if isinstance(a, Sym) else operator.index(a) for a in args)
    except TypeError:
        raise CallError(f"stridec.trace: {call}: expected ints; got {list(args)!r}") from None


def _unwrap(args: Any, call: str) -> Any:
    """Arguments for a `Value` method: traced tensors as their values (in tuples and
    lists too); a tensor that is no traced input cannot enter the graph."""
    if isinstance(args, Proxy):
        return args.value
    if isinstance(args, torch.Tensor):
        raise _unsupported(call, "a torch.Tensor that is not a traced input")
    if isinstance(args, dict):
        return {k: _unwrap(v, call) for k, v in args.items()}
    if isinstance(args, (list, tuple)) and not isinstance(args, torch.Size):
        return type(args)(_unwrap(a, call) for a in args) if isinstance(args, list) else tuple(
            _unwrap(a, call) for a in args)
    return args


def _dims_tuple(dims: Any) -> tuple[int, ...]:
    return (dims,) if isinstance(dims, int) else tuple(dims)


class _Tracer:
    def __init__(self, graph: Graph, device: torch.device) -> None:
        self.graph = graph
        self.device = device
        self.inputs: list[Proxy] = []  # the arguments, whose metadata is the caller's
        # The argument of each in-place view method called on one (`x.t_()`), in order.
        self.reviews: list[int] = []
        # In-place writes: each root version written over -> the version the write made
        # (`Proxy.value` takes every view of the memory again over the newest one).
        self.newer: dict[int, Value] = {}
        # Symbols torch's ops force equal to a size (`cat` of an `N` and an `M` row):
        # found during one run of `fn`, applied to the inputs of the next.
        self.equal: dict[str, int | Sym] = {}

    def require_equal(self, sizes: Sequence[tuple], dims: Sequence[int] | None) -> None:
        """Sizes that torch requires equal (on `dims`, or on every dim): where two differ
        and one is a bare symbol, remember the equality and start `fn` over."""
        first = sizes[0]
        found = False
        for other in sizes[1:]:
            if len(other) != len(first):
                return  # the op reports the rank mismatch
            for d in range(len(first)) if dims is None else dims:
                a, b = first[d], other[d]
                if a == b:
                    continue
                names = [x.name for x in (a, b) if isinstance(x, Sym) and x.name]
                if not names:
                    continue
                # Keep the earlier symbol (or the int): map the later name to the other.
                key = max(names, key=_symbol_order)
                self.equal[key] = b if key == getattr(a, "name", None) else a
                found = True
        if found:
            raise _Retrace


    def current(self, value: Value) -> Value:
        """`value` over the newest version of its memory: a view of a root version that
        a write has replaced is taken again, view op by view op, over the newest."""
        old = value.root()
        new = self.newer.get(id(old))
        if new is None:
            return value
        while id(new) in self.newer:
            new = self.newer[id(new)]
        return B.replay_views(value, old, new)

    def write(self, dest: Value, src: Any, call: str) -> None:
        """`dest` (a view of some memory) written with `src` (a value, or a number: a fill),
        as torch's in-place writes do; later reads of that memory see the new version."""
        old = dest.root()
        if isinstance(src, Value):
            if src.root() is old and dest.numel() and src.numel():
                expanded = src.type.layout
                if src.shape != dest.shape:
                    expanded = src.expand(*dest.shape).type.layout
                try:
                    check_write_overlap(dest.type.layout, expanded)
                except StridecError as e:
                    raise CallError(f"stridec.trace: {call}: {e}") from None
            written = dest.copy_(src)
        elif isinstance(src, (bool, int, float)) or hasattr(type(src), "__index__"):
            try:  # the number as torch's fill_ converts it (2.7 into int32 is 2), or its error
                number = torch.full((), src, dtype=dest.type.dtype.torch).item()
            except (RuntimeError, OverflowError) as e:
                raise CallError(f"stridec.trace: {call}: {e}") from None
            written = dest.fill_(number)
        else:
            raise _unsupported(call, f"writing a {type(src).__name__}; expected a traced "
                                     "tensor or a number")
        self.newer[id(old)] = written.root()


class _Retrace(Exception):
    """Raised inside `fn` when sizes were found equal: trace again with them unified."""


def _symbol_order(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (-1, name)


class Proxy:
    """A traced tensor: wraps a graph `Value`; its methods mirror `torch.Tensor`."""

    __slots__ = ("_value", "_tracer")

    def __init__(self, value: Value, tracer: _Tracer) -> None:
        self._value = value
        self._tracer = tracer

    @property
    def value(self) -> Value:
        """The graph value this tensor is now: after an in-place write into its memory,
        the same view of the memory's new version (torch's views see the write)."""
        value = self._value
        if self._tracer.newer:
            value = self._value = self._tracer.current(value)
        return value

    @value.setter
    def value(self, value: Value) -> None:
        self._value = value

    def _wrap(self, value: Value) -> Proxy:
        return Proxy(value, self._tracer)

    def _wrap_all(self, values: Sequence[Value]) -> tuple[Proxy, ...]:
        return tuple(Proxy(v, self._tracer) for v in values)

    # -- the torch function protocol -------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = resolve_name(func) or getattr(func, "__name__", repr(func))
        if name.startswith("torch.functional."):  # torch.split lives there
            name = "torch." + name[len("torch.functional."):]
        handler = _FUNCTIONS.get(name)
        if handler is None and "." not in name:  # torch._VF's (atleast_3d of a list)
            handler = _FUNCTIONS.get(f"torch.{name}")
        if handler is None and name.startswith("torch.Tensor."):
            method = name[len("torch.Tensor."):]
            if method in _METHODS:
                return getattr(args[0], method)(*args[1:], **kwargs)
        if handler is None:
            raise _unsupported(name)
        return handler(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        """The shared surface (`stridec.ir.builder.SURFACE`) not overridden here: the
        `Value` method of that name, on unwrapped arguments, its results wrapped."""
        if name in B.SURFACE:
            member = getattr(self.value, name)
            if isinstance(member, Value):  # a property: .T, .mT
                return self._wrap(member)

            def method(*args: Any, **kwargs: Any) -> Any:
                call = f"Tensor.{name}"
                out = member(*_unwrap(args, call), **_unwrap(kwargs, call))
                return self._wrap_result(out)

            return method
        if f"torch.Tensor.{name}" in RANDOM_CALLS:
            raise random_refusal(f"Tensor.{name}")
        if hasattr(torch.Tensor, name):
            raise _unsupported(f"Tensor.{name}")
        raise AttributeError(f"'Proxy' object has no attribute {name!r}")

    def _wrap_result(self, out: Any) -> Any:
        if isinstance(out, Value):
            return self._wrap(out)
        if isinstance(out, tuple):
            return tuple(self._wrap_result(o) for o in out)
        return out

    # -- metadata ------------------------------------------------------------------------
    @property
    def shape(self) -> Any:
        """A `torch.Size`; a tuple when some size is symbolic (`stridec.ir.symbols.Sym`,
        which takes part in shape arithmetic like an int)."""
        sizes = self.value.shape
        return torch.Size(sizes) if is_static(sizes) else tuple(sizes)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self) -> int:
        return self.value.ndim

    def dim(self) -> int:
        return self.value.ndim

    ndimension = dim

    def numel(self) -> int:
        return self.value.numel()

    nelement = numel

    @property
    def dtype(self) -> torch.dtype:
        return self.value.type.dtype.torch

    @property
    def device(self) -> torch.device:
        return self._tracer.device

    @property
    def is_cuda(self) -> bool:
        return self._tracer.device.type == "cuda"

    @property
    def requires_grad(self) -> bool:
        return False

    @property
    def layout(self) -> torch.layout:
        return torch.strided

    def element_size(self) -> int:
        return self.value.type.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.value.type.dtype.is_floating

    def is_contiguous(self, memory_format: torch.memory_format = torch.contiguous_format) -> bool:
        """Answered from the graph, where inputs are taken as contiguous (the compiled
        graph specializes on the caller's strides; this answer cannot)."""
        if memory_format != torch.contiguous_format:
            raise _unsupported("Tensor.is_contiguous(memory_format=...)")
        return self.value.type.layout.is_contiguous()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Any:
        return iter(self.unbind(0))

    def __repr__(self) -> str:
        return f"Proxy({self.value.type})"

    # -- views ---------------------------------------------------------------------------
    def permute(self, *dims: Any, **kwargs: Any) -> Proxy:
        if "dims" in kwargs:
            dims = (kwargs.pop("dims"),)
        _no_more(kwargs, "Tensor.permute")
        return self._wrap(self.value.permute(*_ints(dims, "Tensor.permute")))

    def expand(self, *sizes: Any, size: Any = None, implicit: bool = False) -> Proxy:
        target = _ints(_positional_or(sizes, size, "Tensor.expand", "size"), "Tensor.expand")
        own = self.value.shape
        lead = len(target) - len(own)
        if lead >= 0:
            # torch requires each size that is not 1 to be the target's: unify symbols.
            dims = [d for d in range(len(own)) if own[d] != 1 and target[lead + d] != -1]
            pairs = (tuple(own[d] for d in dims), tuple(target[lead + d] for d in dims))
            self._tracer.require_equal(pairs, None)
        return self._wrap(self.value.expand(*target))

    def expand_as(self, other: Any) -> Proxy:
        return self.expand(_value(other, "Tensor.expand_as").shape)

    def broadcast_to(self, *sizes: Any, size: Any = None) -> Proxy:
        return self.expand(*_positional_or(sizes, size, "Tensor.broadcast_to", "size"))

    def __getitem__(self, index: Any) -> Proxy:
        items = index if isinstance(index, tuple) else (index,)
        for i in items:
            if isinstance(i, (Proxy, torch.Tensor, list)) or isinstance(i, bool):
                raise _unsupported("Tensor.__getitem__", "indexing with tensors, lists or "
                                   "bools (advanced indexing) gathers data")
            if isinstance(i, builtins.slice) and any(
                isinstance(b, (Proxy, torch.Tensor)) for b in (i.start, i.stop, i.step)
            ):
                raise _unsupported("Tensor.__getitem__", "slice bounds given as tensors")
        return self._wrap(self.value[index])

    # -- in-place writes into memory: the caller's tensor, for an argument ----------------
    def __setitem__(self, index: Any, value: Any) -> None:
        """`x[index] = y`: `y` (a traced tensor, broadcast and cast as torch does, or a
        number) written into the elements `x[index]` addresses (`Value.copy_`)."""
        dest = self[index].value
        src = _unwrap(value, "Tensor.__setitem__")
        while isinstance(src, Value) and src.ndim > dest.ndim and src.shape[0] == 1:
            src = src.squeeze(0)  # torch drops a value's leading 1s first
        self._tracer.write(dest, src, "Tensor.__setitem__")

    def copy_(self, src: Any, non_blocking: bool = False) -> Proxy:
        """`x.copy_(y)`: `y` written into `x`'s elements; returns `x` itself, as torch."""
        if not isinstance(src, Proxy):
            _value(src, "Tensor.copy_")  # names what cannot enter the graph
        self._tracer.write(self.value, src.value, "Tensor.copy_")
        return self

    def fill_(self, value: Any) -> Proxy:
        """`x.fill_(v)`: `v` (a number, or a traced 0-dim tensor) written into every
        element of `x`; returns `x` itself."""
        self._tracer.write(self.value, _unwrap(value, "Tensor.fill_"), "Tensor.fill_")
        return self

    def zero_(self) -> Proxy:
        return self.fill_(0)

    def reshape(self, *shape: Any, **kwargs: Any) -> Proxy:
        shape = _positional_or(shape, kwargs.pop("shape", None), "Tensor.reshape", "shape")
        _no_more(kwargs, "Tensor.reshape")
        return self._wrap(self.value.reshape(*_ints(shape, "Tensor.reshape")))

    def view(self, *shape: Any, **kwargs: Any) -> Proxy:
        dtype = kwargs.pop("dtype", None)
        shape = _positional_or(shape, kwargs.pop("size", None), "Tensor.view", "size")
        _no_more(kwargs, "Tensor.view")
        if dtype is None and len(shape) == 1 and isinstance(shape[0], torch.dtype):
            shape, dtype = (), shape[0]
        if dtype is not None:  # the bytes read as `dtype`: a bitcast, sharing the memory
            if shape:
                raise CallError(f"stridec.trace: Tensor.view: expected sizes or a dtype, not "
                                f"both; got {list(shape)} and {dtype}")
            return self._wrap(self.value.view(dtype=dtype))
        return self._wrap(self.value.view(*_ints(shape, "Tensor.view")))

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Proxy:
        return self._wrap(self.value.unflatten(dim, _ints((sizes,), "Tensor.unflatten")))

    def flip(self, *dims: Any, **kwargs: Any) -> Proxy:
        dims = _positional_or(dims, kwargs.pop("dims", None), "Tensor.flip", "dims")
        _no_more(kwargs, "Tensor.flip")
        return self._wrap(self.value.flip(*_ints(dims, "Tensor.flip")))

    def split(self, split_size: Any = None, dim: int = 0, **kwargs: Any) -> tuple[Proxy, ...]:
        sizes = kwargs.pop("split_size_or_sections", split_size)
        _no_more(kwargs, "Tensor.split")
        if not isinstance(sizes, int) and sizes is not None:
            sizes = _ints((sizes,), "Tensor.split")
        return self._wrap_all(self.value.split(sizes, dim))

    # -- in-place view methods: this tensor's sizes and strides change, as torch's do ----
    def _in_place(self, name: str, *args: Any, **kwargs: Any) -> Proxy:
        self.value = getattr(self, name)(*args, **kwargs).value
        # An argument's memory: the call bumps the caller's tensor's version (a view of
        # it shares its counter), and on the argument itself re-views it (`OutputOp.reviews`).
        root = storage_root(self.value)
        for i, v in enumerate(self._tracer.graph.inputs):
            if v is root:
                self._tracer.reviews.append(i)
        return self

    def unsqueeze_(self, dim: int) -> Proxy:
        return self._in_place("unsqueeze", dim)

    def squeeze_(self, dim: Any = None) -> Proxy:
        return self._in_place("squeeze", dim)

    def transpose_(self, dim0: int, dim1: int) -> Proxy:
        return self._in_place("transpose", dim0, dim1)

    def swapdims_(self, dim0: int, dim1: int) -> Proxy:
        return self._in_place("swapdims", dim0, dim1)

    def swapaxes_(self, axis0: int, axis1: int) -> Proxy:
        return self._in_place("swapaxes", axis0, axis1)

    def t_(self) -> Proxy:
        return self._in_place("t")

    def as_strided_(self, size: Any, stride: Any, storage_offset: Any = None) -> Proxy:
        return self._in_place("as_strided", size, stride, storage_offset)

    def detach_(self) -> Proxy:
        return self

    # -- copies --------------------------------------------------------------------------
    # `contiguous`, `clone` and `.to` take torch's memory formats as the `Value` methods
    # do (which hand a tensor back itself exactly where torch's do).
    def contiguous(self, memory_format: torch.memory_format = torch.contiguous_format) -> Proxy:
        return self._wrap(self.value.contiguous(memory_format))

    def clone(self, memory_format: torch.memory_format = torch.preserve_format) -> Proxy:
        return self._wrap(self.value.clone(memory_format))

    def to(self, *args: Any, **kwargs: Any) -> Proxy:
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        memory_format = kwargs.pop("memory_format", torch.preserve_format)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        _no_more(kwargs, "Tensor.to")
        flags = []
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            elif isinstance(a, (str, torch.device, int)) and not isinstance(a, bool):
                device = a
            elif isinstance(a, Proxy):
                dtype = a.dtype
            elif isinstance(a, bool):  # non_blocking, then copy, given by position
                flags.append(a)
            else:
                raise _unsupported("Tensor.to", f"argument {a!r}")
        if len(flags) > 1:
            copy = flags[1]
        if device is not None and torch.device(device).type != self._tracer.device.type:
            raise _unsupported(f"Tensor.to(device={device!r})", "graphs run on their "
                               "inputs' device")
        return self._wrap(self.value.to(dtype, memory_format=memory_format, copy=bool(copy)))

    def type(self, dtype: Any = None, **kwargs: Any) -> Proxy:
        if dtype is None or isinstance(dtype, str):
            raise _unsupported("Tensor.type", "only type(torch.dtype) casts")
        return self.to(dtype)

    # -- everything else is not a layout operation ---------------------------------------
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise _unsupported("Tensor.__bool__", "control flow on tensor values")

    def __index__(self) -> int:
        raise _unsupported("Tensor.__index__", "a tensor's value used as an int")

    __int__ = __float__ = __index__


def _refuse(dunder: str) -> Callable[..., Any]:
    def refused(self: Proxy, *args: Any) -> Any:
        raise _unsupported(f"Tensor.{dunder}", "arithmetic and comparisons compute values")

    refused.__name__ = dunder
    return refused


for _dunder in ("__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ "
                "__floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __matmul__ "
                "__rmatmul__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ __or__ "
                "__ror__ __xor__ __rxor__ __lshift__ __rshift__ __lt__ __le__ __gt__ __ge__ "
                "__eq__ __ne__ __iadd__ __isub__ __imul__ __itruediv__").split():
    setattr(Proxy, _dunder, _refuse(_dunder))
Proxy.__hash__ = object.__hash__  # type: ignore[method-assign] -- __eq__ is refused above


def _positional_or(args: tuple, keyword: Any, call: str, name: str) -> tuple:
    """Sizes or dims by position, or by torch's keyword (`reshape(shape=...)`)."""
    if keyword is None:
        return args
    if args:
        raise CallError(f"stridec.trace: {call}: '{name}' given by position and by keyword")
    return (keyword,)


def _no_more(kwargs: dict, call: str) -> None:
    if kwargs:
        raise _unsupported(call, f"keyword argument(s) {sorted(kwargs)}")


# Every tensor method trace understands: the shared surface, and the ones only a traced
# tensor has (`type` is a Value's TensorType; devices and memory formats are torch's; an
# in-place view method changes a tensor's sizes, and a graph's values are immutable).
IN_PLACE_VIEWS = ("unsqueeze_", "squeeze_", "transpose_", "swapdims_", "swapaxes_", "t_",
                  "as_strided_", "detach_")
TRACE_ONLY = frozenset({"type", "device", "is_cuda", "requires_grad", "layout",
                        *IN_PLACE_VIEWS})
_METHODS = {name for name in B.SURFACE if not name.startswith("_")} | {
    name for name, member in vars(Proxy).items()
    if not name.startswith("_") and name != "value"  # the graph value, no tensor method
    and (callable(member) or isinstance(member, property))}


# -- torch functions ---------------------------------------------------------------------
def _cat(tensors: Sequence[Any], dim: int = 0, **kwargs: Any) -> Proxy:
    _no_more({k: v for k, v in kwargs.items() if k != "out" or v is not None}, "torch.cat")
    tensors = list(tensors)
    if not tensors:
        raise CallError("stridec.trace: torch.cat: expected a non-empty list of tensors")
    first = _proxy(tensors[0], "torch.cat")
    values = [_value(t, "torch.cat") for t in tensors]
    rank = first.value.ndim
    if rank and all(v.ndim == rank for v in values) and -rank <= dim < rank:
        others = [d for d in range(rank) if d != dim % rank]
        first._tracer.require_equal([v.shape for v in values], others)
    return first._wrap(B.cat(values, dim))


def _stack(tensors: Sequence[Any], dim: int = 0, **kwargs: Any) -> Proxy:
    _no_more({k: v for k, v in kwargs.items() if k != "out" or v is not None}, "torch.stack")
    tensors = [_proxy(t, "torch.stack") for t in tensors]
    if tensors:
        tensors[0]._tracer.require_equal([t.value.shape for t in tensors], None)
    if not tensors:
        raise CallError("stridec.trace: torch.stack: expected a non-empty list of tensors")
    return tensors[0]._wrap(B.stack([t.value for t in tensors], dim))


def _stacker(name: str) -> Callable[..., Proxy]:
    """torch.hstack / vstack / dstack as the builder's."""
    build = getattr(B, name)

    def stacked(tensors: Sequence[Any], **kwargs: Any) -> Proxy:
        _no_more({k: v for k, v in kwargs.items() if k != "out" or v is not None},
                 f"torch.{name}")
        tensors = [_proxy(t, f"torch.{name}") for t in tensors]
        if not tensors:
            raise CallError(f"stridec.trace: torch.{name}: expected a non-empty list of tensors")
        return tensors[0]._wrap(build([t.value for t in tensors]))

    return stacked


def _proxy(x: Any, call: str) -> Proxy:
    _value(x, call)
    return x


def _pad(input: Any, pad: Sequence[int], mode: str = "constant",
         value: float | None = None) -> Proxy:
    x = _proxy(input, "torch.nn.functional.pad")
    if mode != "constant":
        raise _unsupported(f"torch.nn.functional.pad(mode={mode!r})", "only constant padding")
    pads = _ints((pad,), "torch.nn.functional.pad")
    return x._wrap(B.pad(x.value, pads, value=value))


def _pixel_shuffle(input: Any, upscale_factor: int) -> Proxy:
    x = _proxy(input, "torch.nn.functional.pixel_shuffle")
    return x._wrap(B.pixel_shuffle(x.value, upscale_factor))


def _pixel_unshuffle(input: Any, downscale_factor: int) -> Proxy:
    x = _proxy(input, "torch.nn.functional.pixel_unshuffle")
    return x._wrap(B.pixel_unshuffle(x.value, downscale_factor))


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _im2col(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
            stride: Any = 1) -> Proxy:
    """torch.nn.functional.unfold of (N, C, H, W) -> (N, C*kh*kw, L): pad, one unfold per
    spatial dim (window (k-1)*d + 1, every d-th element kept), then
    out[n, (c*kh + i)*kw + j, oh*OW + ow] = x[n, c, oh*sh + i*dh, ow*sw + j*dw]."""
    x = _proxy(input, "torch.nn.functional.unfold")
    if x.ndim != 4:
        raise _unsupported("torch.nn.functional.unfold", f"input of rank {x.ndim}; traced for "
                           "batched (N, C, H, W) input")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_pair(v) for v in (kernel_size, dilation,
                                                                  padding, stride))
    v = x.value
    if ph or pw:
        v = B.pad(v, (pw, pw, ph, ph))
    v = v.unfold(2, (kh - 1) * dh + 1, sh).unfold(3, (kw - 1) * dw + 1, sw)
    if dh > 1:
        v = v.slice(4, None, None, dh)
    if dw > 1:
        v = v.slice(5, None, None, dw)
    n, c, oh, ow = v.shape[:4]
    v = v.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return x._wrap(B._fresh(v))


def _full_like(input: Any, fill_value: float, *, dtype: Any = None, **kwargs: Any) -> Proxy:
    x = _proxy(input, "torch.full_like")
    kwargs.pop("device", None)
    kwargs.pop("layout", None)
    kwargs.pop("requires_grad", None)
    memory_format = kwargs.pop("memory_format", torch.preserve_format)
    _no_more(kwargs, "torch.full_like")
    return x._wrap(B.full_like(x.value, fill_value, dtype, memory_format))


def _method(name: str) -> Callable[..., Any]:
    def call(input: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(_proxy(input, f"torch.{name}"), name)(*args, **kwargs)

    return call


def _first_proxy(args: Any) -> Proxy | None:
    if isinstance(args, Proxy):
        return args
    if isinstance(args, (list, tuple)) and not isinstance(args, torch.Size):
        for a in args:
            found = _first_proxy(a)
            if found is not None:
                return found
    return None


def _builder_function(name: str) -> Callable[..., Any]:
    """`torch.<name>` as the builder's function of that name (`stridec.ir.builder.FUNCTIONS`),
    on unwrapped arguments, its results wrapped."""
    build = getattr(B, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        what = f"torch.{name}"
        if kwargs.pop("out", None) is not None:
            raise _unsupported(f"{what}(out=...)", "writes into a tensor given")
        first = _first_proxy(args)
        if first is None:
            first = _first_proxy(tuple(kwargs.values()))
        if first is None:
            raise CallError(f"stridec.trace: {what}: expected a traced tensor")
        out = build(*_unwrap(args, what), **_unwrap(kwargs, what))
        return first._wrap_result(list(out) if isinstance(out, list) else out)

    return call


def einops_reduce(x: Proxy, operation: str, axes: tuple[int, ...]) -> Proxy:
    """einops' `reduce` on a traced tensor: only where it takes each element as it is --
    every reduced axis of length 1, `min` / `max` (`prod` of floats; a sum of -0.0 is
    +0.0) -- as torch's reduction gives it: new row-major memory."""
    exact = operation in ("min", "max") or (operation == "prod" and
                                            x.value.type.dtype.is_floating)
    if not exact or any(x.value.shape[a] != 1 for a in axes):
        raise _unsupported(f"einops.reduce(..., {operation!r})", "a reduction computes values; "
                           "only min, max or a float prod over axes of length 1 is a layout")
    return x._wrap(B._fresh(x.value.squeeze(axes)))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f"torch.{name}": _method(name)
    for name in ("permute", "transpose", "swapaxes", "swapdims", "t", "reshape", "flatten",
                 "unflatten", "squeeze", "unsqueeze", "flip", "fliplr", "flipud", "movedim",
                 "moveaxis", "narrow", "select", "chunk", "split", "unbind", "clone", "detach",
                 "roll", "tile", "repeat_interleave", "broadcast_to", "numel", "as_strided",
                 "diagonal", "tensor_split", "ravel", "hsplit", "vsplit", "dsplit", "adjoint",
                 "rot90", "split_with_sizes", "unsafe_split", "unsafe_chunk", "narrow_copy",
                 "conj", "resolve_conj", "resolve_neg")
}
_FUNCTIONS.update({f"torch.{name}": _builder_function(name)
                   for name in B.FUNCTIONS if not hasattr(B.ValueBuilder, name)})
_FUNCTIONS.update({
    "torch.cat": _cat,
    "torch.concat": _cat,
    "torch.concatenate": _cat,
    "torch.stack": _stack,
    "torch.hstack": _stacker("hstack"),
    "torch.vstack": _stacker("vstack"),
    "torch.dstack": _stacker("dstack"),
    "torch.nn.functional.pad": _pad,
    "torch._C._nn.pad": _pad,
    "torch.nn.functional.pixel_shuffle": _pixel_shuffle,
    "torch.pixel_shuffle": _pixel_shuffle,
    "torch.nn.functional.pixel_unshuffle": _pixel_unshuffle,
    "torch.pixel_unshuffle": _pixel_unshuffle,
    "torch.nn.functional.unfold": _im2col,
    "torch.zeros_like": lambda input, **kw: _full_like(input, 0, **kw),
    "torch.ones_like": lambda input, **kw: _full_like(input, 1, **kw),
    "torch.full_like": _full_like,
    **{name: dropout for name in DROPOUTS},  # where it does not train: `refuse_random`
})


# -- trace -------------------------------------------------------------------------------
def _input_names(fn: Callable[..., Any], count: int) -> list[str]:
    """`fn`'s positional parameter names when they name every example, else x0, x1, ..."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= count and len(set(positional[:count])) == count:
        return positional[:count]
    return [f"x{i}" for i in range(count)]


def _outputs(result: Any) -> list[Value]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    values = []
    for k, item in enumerate(items):
        if not isinstance(item, Proxy):
            raise CallError(
                f"stridec.trace: the function must return traced tensors (or a tuple or "
                f"list of them); result {k} is {type(item).__name__}"
            )
        values.append(item.value)
    if not values:
        raise CallError("stridec.trace: the function returned no tensors")
    return values


def _input_sizes(
    names: list[str], examples: Sequence[torch.Tensor], dynamic: Any
) -> list[tuple[int | Sym, ...]]:
    """Each input's sizes, with the dims `dynamic` marks as symbols ``s0, s1, ...`` (in
    order of input, then dim) or as the names it gives. `dynamic`: False; True (every dim
    of size > 1); or a mapping from input index (or name) to dims, a list of dims or a
    mapping from dim to symbol name or declared size (`_declared_size`)."""
    sizes = [tuple(t.shape) for t in examples]
    if dynamic is False or dynamic is None:
        return sizes
    if dynamic is True:
        marked = {i: {d: None for d, n in enumerate(s) if n > 1} for i, s in enumerate(sizes)}
    elif isinstance(dynamic, dict):
        marked = {}
        for key, dims in dynamic.items():
            i = names.index(key) if isinstance(key, str) and key in names else key
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(sizes):
                raise CallError(
                    f"stridec.trace: dynamic: {key!r} is neither an input index in "
                    f"[0, {len(sizes)}) nor an input name ({', '.join(names) or 'none'})"
                )
            dims = dims if isinstance(dims, dict) else {d: None for d in _dims_tuple(dims)}
            rank = len(sizes[i])
            for d in dims:
                if not isinstance(d, int) or isinstance(d, bool) or not -rank <= d < rank:
                    raise CallError(
                        f"stridec.trace: dynamic: dim {d!r} of input '{names[i]}' is out of "
                        f"range for its rank {rank}"
                    )
            marked[i] = {d % rank: n for d, n in dims.items()}
    else:
        raise CallError(
            f"stridec.trace: dynamic must be True, False or a mapping from inputs to dims; "
            f"got {dynamic!r}"
        )
    out, count = [], 0
    for i, s in enumerate(sizes):
        dims = marked.get(i, {})
        row: list[int | Sym] = []
        for d, n in enumerate(s):
            if d in dims:
                size, count = _declared_size(dims[d], count, n, f"dim {d} of input "
                                                              f"'{names[i]}'")
                row.append(size)
            else:
                row.append(n)
        out.append(tuple(row))
    return out


def _declared_size(spec: Any, count: int, example: int, where: str) -> tuple[Sym, int]:
    """The symbolic size `dynamic` gives a dim, and the count of automatic names used:
    None (``s<count>``); a symbol name (``"B"``); ``c*S`` (``"8*B"``: a multiple of 8, S
    the size / 8); or ``{"multiple_of": c}`` with an optional ``"name"`` (S)."""
    multiple, name = 1, spec
    if isinstance(spec, dict):
        unknown = set(spec) - {"multiple_of", "name"}
        multiple, name = spec.get("multiple_of", 1), spec.get("name")
        if unknown or not isinstance(multiple, int) or isinstance(multiple, bool) \
                or multiple < 1:
            raise CallError(
                f"stridec.trace: dynamic: {where}: expected a symbol name, a size like "
                f"'8*B' or {{'multiple_of': 8, 'name': 'B'}} (a positive int); got {spec!r}"
            )
    if name is None:
        size: Any = multiple * symbol(f"s{count}")
        count += 1
    elif isinstance(name, str):
        try:
            size = multiple * parse_size(name)
        except StridecError as e:
            raise CallError(f"stridec.trace: dynamic: {where}: {e}") from None
    else:
        raise CallError(f"stridec.trace: dynamic: {where}: expected a symbol name; got "
                        f"{name!r}")
    if not isinstance(size, Sym) or size.scaled is None:
        raise CallError(
            f"stridec.trace: dynamic: {where}: expected one symbol, or a positive int "
            f"times one ('8*B': a multiple of 8); got {name!r}"
        )
    c = size.scaled[1]
    if example % c:
        raise CallError(
            f"stridec.trace: dynamic: {where} is declared {size}, a multiple of {c}; the "
            f"example's size {example} is not"
        )
    return size, count


def trace(
    fn: Callable[..., Any],
    *example_tensors: torch.Tensor,
    name: str | None = None,
    dynamic: Any = False,
) -> Graph:
    """Run `fn` on proxies of `example_tensors` (their sizes and dtypes; strides are
    specialized when the compiled graph is called) and return the recorded `Graph`.

    `dynamic` makes sizes symbolic (docs/symbolic.md): True marks every dim of size > 1;
    ``{0: [0]}`` marks dim 0 of input 0 (``{"x": {0: "N"}}`` names the symbol;
    ``{"x": {0: "8*B"}}`` or ``{"x": {0: {"multiple_of": 8}}}`` declares the size a
    multiple of 8, so ``chunk(8)`` and einops' ``(b1 b2)`` divide it exactly). Each
    marked dim is a symbol of its own unless torch's ops require two sizes equal (the
    non-cat dims of `torch.cat`, every dim of `torch.stack`): then they are one.

    >>> def to_heads(x):
    ...     B, T, C = x.shape
    ...     return x.view(B, T, 2, C // 2).transpose(1, 2).contiguous()
    >>> g = stridec.trace(to_heads, torch.randn(2, 5, 8))
    >>> print(g.outputs[0].type)
    tensor<2x2x5x4xf32>
    """
    if not callable(fn):
        raise CallError(f"stridec.trace: expected a callable; got {type(fn).__name__}")
    names = _input_names(fn, len(example_tensors))
    for n, t in zip(names, example_tensors, strict=True):
        if not isinstance(t, torch.Tensor):
            raise CallError(
                f"stridec.trace: argument '{n}': expected a torch.Tensor; got {type(t).__name__}"
            )
    if name is None:
        name = getattr(fn, "__name__", "traced")
        name = name if name.isidentifier() else "traced"
    device = example_tensors[0].device if example_tensors else torch.device("cpu")
    einops_backend.register()  # einops code traces as written, where einops is installed
    sizes = _input_sizes(names, example_tensors, dynamic)
    equal: dict[str, int | Sym] = {}
    while True:
        graph = Graph(name)
        tracer = _Tracer(graph, device)
        tracer.equal = dict(equal)
        proxies = [
            Proxy(graph.input(n, _unified(s, equal), t.dtype), tracer)
            for n, s, t in zip(names, sizes, example_tensors, strict=True)
        ]
        tracer.inputs = list(proxies)
        try:
            with refuse_random(), _sizes_through_int(fn, not is_static(sizes)):
                result = fn(*proxies)
        except _Retrace:
            equal = tracer.equal
            continue
        graph.output(*_outputs(result), *(proxies[i].value for i in tracer.reviews),
                     reviews=[names[i] for i in tracer.reviews])
        graph.verify()
        return graph


class _IntType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.int)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, builtins.int)


class _SizeInt(builtins.int, metaclass=_IntType):
    """`int` in the modules of a traced function over symbolic sizes, while it runs:
    ``int(size)`` of a symbolic size (an integer at every value of its symbols, as
    ``/`` gives one only where it divides exactly) is the size itself -- Swin's
    ``int(windows.shape[0] / (H * W / ws / ws))``; every other call is Python's `int`,
    and ``isinstance(v, int)`` answers as for `int`."""

    def __new__(cls, x: Any = 0, *args: Any, **kwargs: Any) -> Any:
        if isinstance(x, Sym) and not args and not kwargs:
            return x
        return builtins.int(x, *args, **kwargs)


# Modules whose functions trace does not look into for `int` (their code is not the
# traced layout code, and their sizes are stridec's own).
_LIBRARIES = frozenset({"stridec", "torch", "einops", "numpy", "builtins", "functools",
                        "typing", "collections", "math", "operator"})


def _int_globals(fn: Any) -> list[dict]:
    """The module globals of `fn` and of the Python functions it reaches through global
    names (`window_reverse` called from a lambda, or `swin.window_reverse`), recursively,
    whose code calls `int`: where trace puts `_SizeInt` (torch.fx's `wrap` patches
    builtins the same way). A module that defines `int` itself is left alone."""
    found: dict[int, dict] = {}
    seen: set[int] = set()
    pending = [fn]
    while pending:
        f = pending.pop()
        while isinstance(f, functools.partial):
            f = f.func
        if inspect.ismethod(f):
            f = f.__func__
        if not isinstance(f, types.FunctionType):
            # A callable object's code: an nn.Module's forward, else its class's __call__.
            forward = getattr(type(f), "forward", None)
            if not isinstance(forward, types.FunctionType):
                forward = inspect.getattr_static(type(f), "__call__", None)
            if not isinstance(forward, types.FunctionType):
                continue
            f = forward
        module = str(f.__globals__.get("__name__", "")).split(".")[0]
        if id(f.__code__) in seen or module in _LIBRARIES:
            continue
        seen.add(id(f.__code__))
        codes = [f.__code__]
        while codes:
            code = codes.pop()
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            module_of: Any = None  # a module loaded by name: `swin.window_reverse`
            for ins in dis.get_instructions(code):
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and module_of is not None:
                    pending.append(getattr(module_of, ins.argval, None))
                module_of = None
                if ins.opname != "LOAD_GLOBAL":
                    continue
                target = f.__globals__.get(ins.argval)
                if ins.argval == "int":
                    if f.__globals__.get("int", _SizeInt) is _SizeInt:
                        found[id(f.__globals__)] = f.__globals__
                elif isinstance(target, types.ModuleType):
                    module_of = target
                elif callable(target):
                    pending.append(target)
    return list(found.values())


@contextlib.contextmanager
def _sizes_through_int(fn: Any, symbolic: bool) -> Iterator[None]:
    """While `fn` traces over symbolic sizes: `int` is `_SizeInt` in the modules of the
    code it runs that calls `int` (`_int_globals`), restored after."""
    patched = _int_globals(fn) if symbolic else []
    with _PATCH_LOCK:  # traces in several threads: the last one out restores `int`
        for g in patched:
            g["int"] = _SizeInt
            _PATCHED[id(g)] = _PATCHED.get(id(g), 0) + 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            for g in patched:
                _PATCHED[id(g)] -= 1
                if not _PATCHED[id(g)]:
                    del _PATCHED[id(g)]
                    if g.get("int") is _SizeInt:
                        del g["int"]


_PATCH_LOCK = threading.Lock()
_PATCHED: dict[int, int] = {}  # id of a module's globals -> the traces patching it now


def _unified(sizes: tuple, equal: dict[str, int | Sym]) -> tuple:
    """`sizes` with the symbols found equal replaced, to a fixed point."""
    while True:
        new = substitute(sizes, equal)
        if new == sizes:
            return tuple(sizes)
        sizes = new

