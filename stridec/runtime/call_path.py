"""The call path of a compiled graph that hits its cache (`CompiledGraph.__call__`, which
is `cached_call`): the call key read from the tensors in one pass, one dictionary read,
the program run -- every function a call enters costs it with cold caches, so the path
stays flat. Anything else (a new key, keywords, symbolic sizes, autograd, dispatch modes)
goes to `CompiledGraph._call`, which checks everything and remembers a good call's
answer as a `Hit` (or `OutHit`) under its key.

The records the caches of `stridec.runtime.compile` hold are here too, named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from stridec.compiler.codegen.program import Program
from stridec.runtime import launch
from stridec.runtime.backends import cpu
from stridec.runtime.tensors import dispatch_modes

__all__ = ["ClassCall", "ClassOutHit", "Hit", "OutHit", "bump_versions", "cached_call",
           "into_outs", "out_call_key", "out_key", "plain_call_key", "read_out_key",
           "read_plain_key", "use_builtin_keys", "written_shared"]

_Tensor = torch.Tensor


@dataclass(frozen=True, slots=True)
class Hit:
    """A call key's cached answer: the program and its runner, the device the arguments
    are on, the key of `CompiledGraph._programs` the program sits under, the program's
    launch count, the recency cell of its entry in `_programs` (a hit stamps it, `Lru.touch`,
    without hashing the key again), and for a plain call of C kernels the runner's
    `direct` function (None: `run_with`)."""

    program: Program
    runner: launch.Runner
    device: torch.device
    local_key: tuple
    launches: int
    used: list[int]
    direct: Callable[[Sequence[torch.Tensor], list[int], int], list[torch.Tensor]] | None


class OutHit(NamedTuple):
    """A cached `out=` call's answer: its `Hit`, for each tensor the program writes
    (its storage slots after the inputs') the out it is, and the C runner's `bound`
    function on the call key's pointers (None: `launch_with`)."""

    hit: Hit
    storage_outs: tuple[int, ...]
    bound: Callable[[list[int], int], None] | None


class ClassCall(NamedTuple):
    """A class plan a call reaches straight from `fast_binder`'s answer."""

    launches: int  # per call
    call: Callable[..., Any]  # `SymbolicRunner.call`
    program: Program
    runner: launch.SymbolicRunner


class ClassOutHit(NamedTuple):
    """A symbolic `out=` call that passed every check: its class and device (the key of
    its `ClassCall`), and which outs the program writes straight."""

    cls: tuple
    device: torch.device
    writes: tuple[bool, ...]


def out_key(tensors: tuple[Any, ...], out: Any) -> tuple | None:
    """The call key of a call with `out=` (`out_call_key`'s first part)."""
    found = out_call_key(tensors, out)
    if found is None:
        return None
    key, _ = found
    return key


def out_call_key(tensors: tuple[Any, ...], out: Any) -> tuple[tuple, list[int]] | None:
    """The call key of a call with `out=` and the storages' data pointers (the inputs',
    then each out's). The key, one flat tuple: "out", per input its dtype, sizes, strides,
    offset, device (`True` for the CPU), neg bit, storage bytes and `requires_grad`, per
    out the same and its conj bit, the input count, then which of all the tensors share
    a storage (by data pointer: each one's first index among them). `check_outs` and the
    program are functions of it: overlaps are decided from layouts within one storage, and
    storages are told apart by pointer; and every storage of a good call's key holds its
    layout. None where an argument or an out is not a plain strided `torch.Tensor` (the
    full path then names the problem), or where a storage's pointer is not a multiple of
    8 (the full path stages a misaligned tensor). (One pass, each attribute read once: a cached call
    with cold caches pays for every object and call it touches. A `torch.Tensor` of
    another layout is told by what it refuses instead of by two more reads: a sparse or
    mkldnn tensor has no storage, a nested one no sizes -- `RuntimeError`s, and a test
    holds torch to it.)"""
    outs = (out,) if type(out) is _Tensor else out
    if type(outs) is not tuple:
        return None
    key: list[Any] = ["out"]
    ptrs = []
    n = len(tensors)
    low = 0
    try:
        for t in (*tensors, *outs):
            if type(t) is not _Tensor:
                return None
            storage = t.untyped_storage()
            key += (t.dtype, t.shape, t.stride(), t.storage_offset(), t.is_cpu or t.device,
                    t.is_neg(), storage.nbytes(), t.requires_grad)
            if len(ptrs) >= n:  # an out
                key.append(t.is_conj())
            ptr = storage.data_ptr()
            low |= ptr
            ptrs.append(ptr)
    except RuntimeError:  # NotImplementedError too: no storage, sizes or strides
        return None
    if low & 7:  # a storage off 8 bytes, maybe off its elements: `_call_aligned`
        return None
    key.append(n)
    key += map(ptrs.index, ptrs)  # (no comprehension: one function fewer to enter)
    return tuple(key), ptrs


def plain_call_key(tensors: tuple[Any, ...]) -> tuple[tuple, list[int]] | None:
    """The call key of a call without `out=` and the storages' data pointers, one per
    tensor: one flat tuple of, per tensor, its dtype, sizes, strides, storage offset,
    device (`True` for the CPU), neg bit, storage bytes and `requires_grad` (a key where
    one is True is never remembered: such a call is differentiable, `_call`), read in one
    pass as
    `out_call_key` reads its key (a tensor of another layout told by what it refuses). Every
    condition `CompiledGraph._check` and `_target` test is a function of it, the
    storage's bound included (the layout's last byte against its bytes), and so is the
    specialization: a key seen on a call that passed every check and found its program
    is valid and runs that program. None where an argument is not a plain strided
    `torch.Tensor`, or a storage's pointer is not a multiple of 8: such calls always take
    the full path (which stages a misaligned tensor, `_call_aligned`)."""
    key: list[Any] = []
    ptrs = []
    low = 0
    try:
        for t in tensors:
            if type(t) is not _Tensor:
                return None
            storage = t.untyped_storage()
            key += (t.dtype, t.shape, t.stride(), t.storage_offset(), t.is_cpu or t.device,
                    t.is_neg(), storage.nbytes(), t.requires_grad)
            ptr = storage.data_ptr()
            low |= ptr
            ptrs.append(ptr)
    except RuntimeError:  # NotImplementedError too: no storage, sizes or strides
        return None
    if low & 7:  # a storage off 8 bytes, maybe off its elements: `_call_aligned`
        return None
    return tuple(key), ptrs


# The call keys a cached call reads: the functions above, or builtin functions that read
# the same keys (`use_builtin_keys`).
read_out_key = out_call_key
read_plain_key = plain_call_key


def use_builtin_keys(out_key_fn: Callable[[tuple[Any, ...], Any], Any],
                     plain_key_fn: Callable[[tuple[Any, ...]], Any]) -> None:
    """Read cached calls' keys with these functions from now on: the cpu backend's
    builtin ones (`backends/cpu.py`, `calls_module`), which return what `out_call_key`
    and `plain_call_key` return and enter no Python code (a cached call with cold caches
    pays for every bytecode it runs)."""
    global read_out_key, read_plain_key
    read_out_key, read_plain_key = out_key_fn, plain_key_fn


cpu.keys_loaded.append(use_builtin_keys)


# A write into an out bumps its version counter, as torch's out= ops do (inference-mode
# tensors have none and are skipped): autograd then refuses a backward that saved the
# out before the write.
bump_versions = launch.bump_versions


def into_outs(outs: tuple[torch.Tensor, ...], results: Any, bump: bool = True) -> Any:
    """The outs of a call given the program's `results`: each result that is not its out
    (an out the program did not write straight) copied in, every result computed before
    any copy -- a result in the memory of an out still to be written is cloned first.
    With `bump`, the version of each out the program wrote straight is bumped (a copy
    bumps its own)."""
    if type(results) is not tuple:
        results = (results,)
    if bump:
        bump_versions(tuple(o for o, r in zip(outs, results, strict=True) if r is o))
    pending = [(o, r) for o, r in zip(outs, results, strict=True) if r is not o]
    ptrs = {o.untyped_storage().data_ptr() for o, _ in pending if o.numel()}
    pending = [(o, r.clone() if r.numel() and r.untyped_storage().data_ptr() in ptrs
                else r) for o, r in pending]
    for o, r in pending:
        o.copy_(r)
    return outs[0] if len(outs) == 1 else outs


def written_shared(tensors: tuple[Any, ...], written: tuple[int, ...]) -> bool:
    """Whether an argument at a position of `written` shares its storage with another
    argument (by the storages' data pointers; an empty storage shares nothing)."""
    pointers = []
    for t in tensors:
        try:
            pointers.append(t.untyped_storage().data_ptr())
        except (AttributeError, RuntimeError):  # not a plain tensor: the full path names it
            pointers.append(0)
    for i in written:
        if i < len(pointers) and pointers[i] and pointers.count(pointers[i]) > 1:
            return True
    return False


def cached_call(self: Any, *tensors: torch.Tensor, out: Any = None, **named: Any) -> Any:
    # `CompiledGraph.__call__` (`self` the CompiledGraph). A cached call runs here, in this
    # one function: with cold caches every function a call enters costs it (the race's
    # calls). Its key (`plain_call_key`, `out_call_key`)
    # holds every storage's bytes, so a hit's storages hold its layouts (`_stamp`
    # counts it).
    """Run the graph on `tensors` (one per input, by position): one tensor, or a tuple
    for several outputs; with `out=` (a tensor or a tuple, one per output) each output
    is written into the caller's tensor, which is returned. Arguments are checked
    first (`CallError` names the argument); a new specialization compiles once.

    >>> g = stridec.Graph("t")
    >>> x = g.input("x", (2, 3), "float32")
    >>> g.output(x.t().contiguous())
    >>> fn = stridec.compile(g)
    >>> t = torch.randn(2, 3)
    >>> torch.equal(fn(t), t.t().contiguous())
    True
    >>> o = torch.empty(3, 2)
    >>> fn(t, out=o) is o
    True
    """
    if self._written_args and written_shared(tensors, self._written_args):
        if self._reviews:
            return self._call_reviewing(tensors, out, named)
        return self._call(tensors, out, named)  # (no cached call: `_call_shared`)
    if self._reviews:
        return self._call_reviewing(tensors, out, named)
    if out is None:
        if named or not self._keyed or dispatch_modes():
            return self._call(tensors, None, named)
        called = read_plain_key(tensors)
        if called is None:
            return self._call(tensors, None, named)
        key, pointers = called
        hits = self._hits
        hit = hits.data.get(key)
        if hit is None or not self._stamp(hits, hit):
            return self._call(tensors, None, named, called)
        self.stats.launches += hit.launches
        if hit.direct is not None:  # the C kernels, on the pointers the key read
            result = hit.direct(tensors, pointers, torch.get_num_threads())
        else:
            outs = launch.run_with(hit.runner, tensors, hit.device)
            result = outs[0] if len(outs) == 1 else tuple(outs)
        return self._finish(tensors, result) if self._after else result
    if named or not self._keyed or dispatch_modes():
        return self._call(tensors, out, named)
    called = read_out_key(tensors, out)
    if called is not None:
        key, pointers = called
        hits = self._hits
        found = hits.data.get(key)
        if found is not None:
            hit, storage_outs, bound = found
            if self._stamp(hits, hit):
                if bound is not None:  # the C kernels, on the pointers the key read
                    bound(pointers, torch.get_num_threads())
                else:
                    outs = (out,) if type(out) is torch.Tensor else out
                    launch.launch_with(hit.runner,
                                       (*tensors, *(outs[i] for i in storage_outs)),
                                       hit.device)
                self.stats.launches += hit.launches
                if self.bump_versions:
                    bump_versions((out,) if type(out) is torch.Tensor else out)
                    if self._written:
                        self._bump_written(tensors)
                return out
        if self.symbols:
            return self._call(tensors, out, named, called)
        return self._call_out(tensors, out, called)
    return self._call(tensors, out, named)  # no key: a tensor of another kind, or misaligned
