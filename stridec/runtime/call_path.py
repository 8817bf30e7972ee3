"""The call path of a compiled graph. A call that hits its cache (`CompiledGraph.__call__`,
which is `cached_call`): the call key read from the tensors in one pass, one dictionary read,
the program run -- every function a call enters costs it with cold caches, so the path
stays flat. Anything else (a new key, keywords, symbolic sizes, autograd, dispatch modes)
goes to the full path (`full_call`, which is `CompiledGraph._call`; below), which checks
everything and remembers a good call's answer as a `Hit` (or `OutHit`) under its key.

The records the caches of `stridec.runtime.compile` hold are here too, named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch.utils._python_dispatch import _disable_current_modes

from stridec.compiler.codegen.program import Program
from stridec.compiler.copy_plan import PARALLEL_BYTES
from stridec.errors import CallError, StridecError, UnsupportedError
from stridec.ir.dtypes import DTYPES
from stridec.runtime import launch
from stridec.runtime.arguments import as_fake, check_arguments, requires_grad
from stridec.runtime.backends import cpu
from stridec.runtime.backends.reference import run_reference
from stridec.runtime.outs import as_outs, check_out_tensors, check_outs, into_outs
from stridec.runtime.tensors import AlignedStandIns, active_fake_mode, dispatch_modes, misaligned

if TYPE_CHECKING:
    from stridec.runtime.compile import CompiledGraph

__all__ = ["ClassCall", "ClassOutHit", "Hit", "OutHit", "bump_versions", "cached_call",
           "call_aligned", "call_out", "call_reviewing", "call_shared", "call_under_modes",
           "fake_call", "full_call", "one_thread", "out_call_key", "out_key", "plain_call_key",
           "read_out_key", "read_plain_key", "refuse_keywords", "use_builtin_bump",
           "use_builtin_keys", "written_shared"]

_Tensor = torch.Tensor


@dataclass(frozen=True, slots=True)
class Hit:
    """A call key's cached answer: the program and its runner, the device the arguments
    are on, the key of `CompiledGraph._programs` the program sits under, the program's
    launch count, the recency cell of its entry in `_programs` (a hit stamps it, `Lru.touch`,
    without hashing the key again), for a plain call of C kernels the runner's
    `direct` function (None: `run_with`), and the thread count its kernels run on where
    it is known without asking torch (`one_thread`)."""

    program: Program
    runner: launch.Runner
    device: torch.device
    local_key: tuple
    launches: int
    used: list[int]
    direct: Callable[[Sequence[torch.Tensor], list[int], int], list[torch.Tensor]] | None
    threads: int = 0  # `one_thread`: 1, or 0 where each call asks torch


class OutHit(NamedTuple):
    """A cached `out=` call's answer: its `Hit`, for each tensor the program writes
    (its storage slots after the inputs') the out it is, and the C runner's `bound`
    function on the call key's pointers (None: `launch_with`), and the thread count as
    `Hit.threads`."""

    hit: Hit
    storage_outs: tuple[int, ...]
    bound: Callable[[list[int], int], None] | None
    threads: int = 0


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


def one_thread(program: Program, written: Sequence[tuple[int, int]],
               buffers: Sequence[tuple[int, int]] | None = None) -> int:
    """1 where every kernel of `program` is a C copy and all of them together move fewer
    than `PARALLEL_BYTES` (each element written read at the widest size the program
    holds), so each would run on the calling thread whatever it is given (the kernels'
    own test, `lib/copy_plan.c`); else 0: the call asks `torch.get_num_threads()`.
    `written`: (elements, element bytes) of each tensor the kernels may write (the outs,
    the fresh buffers), besides the program's buffers; `buffers`: those of a symbolic
    program bound to one binding (default: the program's own)."""
    if not program.kernels or any(k.kind != "copy" or k.lang != "c" for k in program.kernels):
        return 0
    if buffers is None:
        buffers = [(b.elements, DTYPES[b.dtype].itemsize) for b in program.buffers]
    if any(type(n) is not int for n, _ in buffers):
        return 0  # (symbolic sizes)
    inputs = ([DTYPES[d].itemsize for d in program.input_dtypes]
              if len(program.input_dtypes) == program.n_inputs else [16])
    widest = max([size for _, size in (*written, *buffers)] + inputs)
    moved = sum(n * (size + widest) for n, size in (*written, *buffers))
    return 1 if moved < PARALLEL_BYTES else 0


def written_sizes(tensors: Sequence[Any], written: Sequence[int]) -> list[tuple[int, int]]:
    """(elements, element bytes) of each argument a graph writes in place (`written`: their
    positions), for `one_thread`: a write into an argument stays inside it."""
    return [(tensors[i].numel(), tensors[i].element_size()) for i in written]


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


def use_builtin_bump(bump: Callable[[tuple[torch.Tensor, ...]], Any]) -> None:
    """Bump cached calls' versions with `bump` from now on: the cpu backend's builtin
    (`backends/cpu.py`, `_load_fields`), which bumps as `torch._C._increment_version`
    does without a torch call."""
    global bump_versions
    bump_versions = launch.bump_versions = bump


cpu.bump_loaded.append(use_builtin_bump)


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
    # holds every storage's bytes, so a hit's storages hold its layouts.
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
    if self._reviews:
        return self._call_reviewing(tensors, out, named)
    if out is None:
        if named or not self._keyed or dispatch_modes():
            return self._call(tensors, None, named)
        called = read_plain_key(tensors)
        if called is None:
            return self._call(tensors, None, named)
        key, pointers = called
        # An argument written in place that shares its storage with another (by the
        # pointers the key read; an empty storage shares nothing): `_call_shared`.
        for i in self._written_args:
            if pointers[i] and pointers.count(pointers[i]) > 1:
                return self._call(tensors, None, named)
        hits = self._hits
        hit = hits.data.get(key)
        # The hit counted and its program's entry stamped used, as a hit in `_programs`
        # is (`Lru.touch`, inline); where `_hits` was replaced since the read (an eviction:
        # the hit may name the evicted program), the full path. No lock: nothing from the
        # check to the last store calls out, so no other thread runs between them (GIL).
        if hit is None or self._hits is not hits:
            return self._call(tensors, None, named, called)
        programs = self._programs
        programs.clock += 1
        hit.used[0] = programs.clock
        stats = self.stats
        stats.cache_hits += 1
        stats.launches += hit.launches
        if hit.direct is not None:  # the C kernels, on the pointers the key read; the
            # result finished as `_finish` finishes it (`Runner.direct`)
            return hit.direct(tensors, pointers, hit.threads or torch.get_num_threads())
        outs = launch.run_with(hit.runner, tensors, hit.device)
        result = outs[0] if len(outs) == 1 else tuple(outs)
        return self._finish(tensors, result) if self._after else result
    if named or not self._keyed or dispatch_modes():
        return self._call(tensors, out, named)
    called = read_out_key(tensors, out)
    if called is not None:
        key, pointers = called
        n = len(tensors)
        for i in self._written_args:  # (as without out=, among the arguments only)
            if pointers[i] and pointers[:n].count(pointers[i]) > 1:
                return self._call(tensors, out, named)
        hits = self._hits
        found = hits.data.get(key)
        if found is not None and self._hits is hits:  # (counted and stamped as above)
            hit, storage_outs, bound, threads = found
            programs = self._programs
            programs.clock += 1
            hit.used[0] = programs.clock
            stats = self.stats
            stats.cache_hits += 1
            stats.launches += hit.launches
            outs = (out,) if type(out) is _Tensor else out
            if bound is not None:  # the C kernels, on the pointers the key read
                bound(pointers, threads or torch.get_num_threads())
            else:
                launch.launch_with(hit.runner, (*tensors, *(outs[i] for i in storage_outs)),
                                   hit.device)
            if self.bump_versions:
                bump_versions(outs)
                if self._written:
                    self._bump_written(tensors)
            return out
        if self.symbols:
            return self._call(tensors, out, named, called)
        return self._call_out(tensors, out, called)
    return self._call(tensors, out, named)  # no key: a tensor of another kind, or misaligned


# -- the full path -------------------------------------------------------------------------
# What a call that is not a cached one runs (`CompiledGraph._call` and the calls it takes):
# every check, the specialization looked up or compiled, a good call's answer remembered.

def _no_kernel(*args: Any, **keywords: Any) -> None:
    """The launcher of every kernel of a fake call (`CompiledGraph._fake_call`)."""




def full_call(self: CompiledGraph, tensors: tuple[Any, ...], out: Any, named: dict[str, Any],
              called: tuple[tuple, list[int]] | None = None) -> Any:
    """A call that is not a cached one: symbolic sizes, keyword arguments, the
    reference backend, a key not seen, or arguments without one (`plain_call_key`:
    `called`, its answer where there is one). A good call of a static graph on a
    kernel backend with a key enters `_hits`; a call with an input that requires
    grad never does, and with grad mode on it is differentiable (`_autograd`). Under
    torch dispatch modes, `_call_under_modes`."""
    if dispatch_modes() and not (torch.is_grad_enabled() and requires_grad(tensors)):
        return self._call_under_modes(tensors, out, named)
    if (misaligned(tensors) or out is not None and misaligned(as_outs(out))) and not (
            torch.is_grad_enabled() and requires_grad(tensors)):
        return self._call_aligned(tensors, out, named)
    if (self._written_args and not named and written_shared(tensors, self._written_args)
            and not (torch.is_grad_enabled() and requires_grad(tensors))):
        return self._call_shared(tensors, out)
    if self.symbols:
        if not named and self.backend != "reference":
            if out is None:
                return self._symbolic.call(self, tensors, called)
            result = self._symbolic.call_out(self, tensors, out, called)
            if result is not launch.MISS:
                return result
        return self._symbolic.bound_graph(self, tensors)(*tensors, out=out, **named)
    if requires_grad(tensors):
        called = None
        if torch.is_grad_enabled():
            return self._autograd(tensors, out, named)
    if out is not None:
        if named:
            self.__call__(*tensors, **named)  # raises the keyword-argument error
        return call_out(self, tensors, out, None)
    if named:
        self._refuse_keywords(named)
    device = self._check(tensors)
    if self.backend == "reference":
        self._check_specializable(tensors)
        outs = list(run_reference(self.graph, *tensors))  # (torch bumps its writes)
        return outs[0] if len(outs) == 1 else tuple(outs)
    target = self._target(device)
    program, local_key, _ = self._lookup(self._specs.key_of(tensors), device, target)
    runner = launch.runner(program, target)
    if called is not None:
        key, _ = called
        direct = runner.direct(len(tensors), self._itself,
                               self._written if self.bump_versions else ())
        threads = one_thread(program, written_sizes(tensors, self._written_args))
        with self._lock:
            hit = self._hit(program, runner, device, local_key, direct, threads)
            if hit is not None:
                self._remember(key, hit)
    outs = launch.run_with(runner, tensors, device)
    self.stats.launches += program.launch_count
    return self._finish(tensors, outs[0] if len(outs) == 1 else tuple(outs))


def call_reviewing(self: CompiledGraph, tensors: tuple[Any, ...], out: Any,
                   named: dict[str, Any]) -> Any:
    """A call of a graph that re-views arguments in place (`OutputOp.reviews`): the
    call, then each caller's tensor given its hidden result's sizes, strides and
    offset by `as_strided_` (which bumps its version once, as each of torch's in-place
    view methods does); a returned result that is the argument itself is that tensor."""
    if out is not None:
        raise UnsupportedError(
            f"{self.graph.name}: out= with in-place view methods on arguments is not "
            "supported; call it without out="
        )
    if requires_grad(tensors) and torch.is_grad_enabled():
        names = ", ".join(repr(self._inputs[i][0]) for i, _ in self._reviews)
        raise UnsupportedError(
            f"{self.graph.name}: the graph re-views argument(s) {names} in place, and a "
            "call with an input that requires grad would need its backward through "
            "that, which stridec does not build; call it under torch.no_grad()"
        )
    result = self._call(tensors, None, named)
    results = result if type(result) is tuple else (result,)
    shown = len(results) - len(self._reviews)
    for (i, _), view in zip(self._reviews, results[shown:], strict=True):
        x = tensors[i]
        if view.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
            raise StridecError(
                f"{self.graph.name}: argument {self._inputs[i][0]!r}'s new view is not a "
                "view of its memory (a compiler bug)"
            )
        x.as_strided_(view.shape, view.stride(), view.storage_offset())
    outs = list(results[:shown])
    for i, returned in self._reviews:
        for k in returned:
            outs[k] = tensors[i]
    return outs[0] if shown == 1 else tuple(outs)


def call_under_modes(self: CompiledGraph, tensors: tuple[Any, ...], out: Any,
                     named: dict[str, Any]) -> Any:
    """A call while torch dispatch modes are active, whose allocations may not be
    memory at all. Under a `FakeTensorMode`: fake results with the metadata the call
    gives (`_fake_call`). Under others (make_fx's, a user's): the call as without
    them, allocating outside them (a kernel writes only memory it owns)."""
    mode = active_fake_mode()
    if mode is None:
        with _disable_current_modes():
            return self._call(tensors, out, named)
    return self._fake_call(tensors, out, named, mode)


def call_shared(self: CompiledGraph, tensors: tuple[Any, ...], out: Any) -> Any:
    """A call where an argument the graph writes in place shares its storage with
    another argument (`f(x, x)`, or `cache` and a view of it): the kernels would read
    memory that the writes change under them, where torch's ops run one after the
    other (`a.copy_(b.flip(0))` reads a copy of b made before the write). It runs as
    the reference does, torch's ops in order on the caller's tensors, so values,
    versions and torch's own refusals (a copy from memory it overwrites) are torch's;
    such a refusal is a `CallError` naming the arguments."""
    self._check(tensors)
    self._check_specializable(tensors)
    call = None
    if out is not None:
        call = check_outs(self.graph.name, self._output_types, out, tensors,
                          tensors[0].device if tensors else None)
    try:
        results = run_reference(self.graph, *tensors)
    except RuntimeError as e:
        if isinstance(e, StridecError):
            raise
        names = ", ".join(repr(n) for n, _ in self._inputs)
        raise CallError(
            f"{self.graph.name}: arguments {names} share memory that the graph writes in "
            f"place, and torch refuses the write: {e}"
        ) from None
    if call is None:
        return results[0] if len(results) == 1 else tuple(results)
    return into_outs(call.outs, tuple(results), bump=False)  # (each copy bumps its out)


def call_aligned(self: CompiledGraph, tensors: tuple[Any, ...], out: Any,
                 named: dict[str, Any]) -> Any:
    """A call with a tensor whose data pointer is not a multiple of its element size
    (`misaligned`): the call on aligned stand-ins of the storages such tensors live
    in (`AlignedStandIns`), then the bytes of each out and of each input the graph
    writes in place written back (versions bumped), each result that is a view of a
    stand-in made the same view of the original and each that is an input itself
    that input, so values, strides, aliasing and versions are the call's on aligned
    tensors."""
    outs = None if out is None else as_outs(out)
    stand_ins = AlignedStandIns((*tensors, *(outs or ())))
    staged = tuple(map(stand_ins.of, tensors))
    written = tuple(tensors[i] for i in self._written)
    if outs is None:
        result = self._call(staged, None, named)
        stand_ins.write_back(written)
        self._bump_written(tensors)
        if type(result) is not tuple:
            return tensors[self._itself[0][1]] if self._itself else stand_ins.original(
                result)
        results = list(map(stand_ins.original, result))
        for k, i in self._itself:
            results[k] = tensors[i]
        return tuple(results)
    inner = (stand_ins.of(out) if isinstance(out, torch.Tensor) else
             tuple(map(stand_ins.of, outs)) if isinstance(out, (tuple, list)) else out)
    self._call(staged, inner, named)
    stand_ins.write_back((*outs, *written))
    if self.bump_versions:
        bump_versions(outs)
    self._bump_written(tensors)
    return outs[0] if len(outs) == 1 else outs


def fake_call(self: CompiledGraph, tensors: tuple[Any, ...], out: Any, named: dict[str, Any],
              mode: Any) -> Any:
    """A call under `mode`, a `FakeTensorMode`: the arguments checked as far as
    metadata goes (each a FakeTensor of the mode, or a real tensor where the mode
    takes them: `allow_non_fake_inputs`), no kernel run. Without `out=`, the results
    are what the call gives -- the program's outputs over fake buffers, views of
    inputs where the call returns views -- with no data; with `out=`, the outs,
    their versions bumped."""
    if named:
        self._refuse_keywords(named)
    check_arguments(self.graph.name, self._inputs, tensors, data=False,
                    sizes=not self.symbols)
    tensors = tuple(as_fake(t, name, mode) for (name, _), t in zip(self._inputs, tensors,
                                                                     strict=True))
    if self.symbols:
        return self._symbolic.bound_graph(self, tensors)._fake_call(tensors, out, named, mode)
    device = check_arguments(self.graph.name, self._inputs, tensors, data=False)
    if device is None:
        device = torch.device("cuda" if self.backend == "triton" else "cpu")
    if out is not None:
        outs = check_out_tensors(self.graph.name, self._output_types, out, device,
                                 data=False)[0]
        for i, t in enumerate(outs):
            as_fake(t, "out" if len(outs) == 1 else f"out[{i}]", mode, convert=False)
        if self.bump_versions:
            bump_versions(outs)
        return outs[0] if len(outs) == 1 else outs
    target = "interpret" if self.backend == "reference" else self._target(device)
    program = self._lookup(self._specs.key_of(tensors), device, target).program
    runner = launch.Runner.of(program, [_no_kernel] * len(program.kernels))
    results = runner.run(tensors, device)
    return self._finish(tensors, results[0] if len(results) == 1 else tuple(results))


def refuse_keywords(self: CompiledGraph, named: dict[str, Any]) -> None:
    raise CallError(
        f"{self.graph.name}: expected tensors by position "
        f"({', '.join(n for n, _ in self._inputs)}); got keyword argument(s) "
        f"{', '.join(map(repr, named))}"
    )


def call_out(self: CompiledGraph, tensors: tuple[torch.Tensor, ...], out: Any,
             called: tuple[tuple, list[int]] | None) -> Any:
    """`fn(*tensors, out=...)` that is not a cached call (`__call__` runs those: a
    call whose `out_call_key` key was seen on a good call runs that call's program,
    where its C kernels offer it (`Runner.bound`) straight on the storages' data
    pointers the key read): each output written in place into its `out` tensor,
    which are returned (see the module docstring and `stridec.compiler.outputs`).
    `called`: `out_call_key`'s answer, None where there is none."""
    key = None
    if called is not None:
        key, _ = called
    if requires_grad(tensors):
        key = None
        if torch.is_grad_enabled():
            self._autograd(tensors, out, {})  # raises: out= is not differentiable
    device = self._check(tensors)
    call = check_outs(self.graph.name, self._output_types, out, tensors, device)
    if self.backend == "reference":
        self._check_specializable(tensors)
        # The reference computes every output before writing any: nothing is staged.
        into_outs(call.outs, tuple(run_reference(self.graph, *tensors)), bump=False)
    else:
        target = self._target(device)
        program, local_key, _ = self._lookup(self._specs.key_of(tensors), device, target, call)
        runner = launch.runner(program, target)
        if key is not None:
            positions = {id(t): i for i, t in reversed(list(enumerate(call.outs)))}
            storage_outs = tuple(positions[id(t)] for t in call.storage_tensors)
            # Runner slot -> index in `out_call_key`'s pointers (the inputs', the outs').
            n = len(tensors)
            bound = runner.bound([*range(n), *(n + i for i in storage_outs)],
                                 n + len(call.outs))
            threads = one_thread(program, [(t.numel(), t.element_size()) for t in call.outs]
                                 + written_sizes(tensors, self._written_args))
            with self._lock:
                hit = self._hit(program, runner, device, local_key, None)
                if hit is not None:
                    self._remember(key, OutHit(hit, storage_outs, bound, threads))
        launch.run_with(runner, (*tensors, *call.storage_tensors), device)
        self.stats.launches += program.launch_count
        if self.bump_versions:
            bump_versions(call.outs)
        self._bump_written(tensors)
    return call.outs[0] if len(call.outs) == 1 else call.outs
