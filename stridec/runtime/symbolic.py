"""A call's sizes bound to a graph's symbols, and the class of a binding.

A graph input may have symbolic sizes (`g.input("x", ("N", 64), "float16")`,
`stridec.ir.symbols`). A call binds each symbol to the size of the first dim that names
it alone (or to that size / c, for a dim of ``c*S``: declared a multiple of c, which must
divide it), and then checks every dim: a static dim must have its declared size, a symbol
the value it was bound to, a compound size (``2*N``) its value under the binding. Each
mismatch is a `CallError` naming the argument and the dim:

    bind_call([("x", ("N", 64)), ("y", ("N", 3))], [(5, 64), (3, 3)])
    # CallError: argument 'y': dim 0 is N, which argument 'x' dim 0 binds to 5; got 3

`binding_class(bindings)` (from `stridec.compiler.codegen.spec`) is what a compiled
kernel may depend on besides the static sizes (docs/symbolic.md): per symbol, whether
it is 0, 1, a multiple of 16 or none of these, and whether it fits in int32 — the
specialization bits of the kernels' runtime arguments
(`stridec.compiler.codegen.copy.KernelParams`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from stridec.compiler.codegen.spec import INT32_MAX, binding_class, size_class
from stridec.errors import CallError
from stridec.ir.host_code import HostFunction
from stridec.ir.layout import Layout, copies_at_every_binding
from stridec.ir.symbols import Sym, _py_source, _scaled_binding, evaluate, free_symbols

__all__ = ["bind_call", "binding_class", "fast_binder", "graph_symbols", "size_class"]


def graph_symbols(sizes: Sequence[Sequence[object]]) -> tuple[str, ...]:
    """The symbol names of the inputs' sizes, in order of first appearance."""
    seen: dict[str, None] = {}
    for dims in sizes:
        for d in dims:
            for name in sorted(free_symbols(d)):
                seen.setdefault(name, None)
    return tuple(seen)


def bind_call(
    inputs: Sequence[tuple[str, Sequence[object]]], shapes: Sequence[Sequence[Any]], *,
    exact: bool = True,
) -> dict[str, Any]:
    """The binding of every symbol of `inputs` ((name, declared sizes) per input) by the
    call's `shapes`; `CallError` naming the argument and dim where a size does not fit.
    The count of arguments is the caller's to check. With `exact=False` the sizes are
    taken as given, not as ints: torch `SymInt`s of a fake tensor under `torch.compile`
    bind the symbols to themselves (each comparison a guard, never a specialization)."""
    bindings: dict[str, int] = {}
    where: dict[str, tuple[str, int]] = {}
    deferred: list[tuple[str, int, Sym, int]] = []
    for (name, declared), shape in zip(inputs, shapes, strict=True):
        if len(shape) != len(declared):
            raise CallError(
                f"argument '{name}': expected {len(declared)} dims "
                f"({', '.join(str(d) for d in declared)}); got sizes {list(shape)}"
            )
        for k, (d, n) in enumerate(zip(declared, shape, strict=True)):
            if exact:
                n = int(n)
            if isinstance(d, Sym):
                scaled = d.scaled
                symbol = None if scaled is None else scaled[0]
                if symbol is None or (scaled[1] != 1 and symbol in bindings):
                    deferred.append((name, k, d, n))
                elif symbol not in bindings:
                    bindings[symbol] = _scaled_binding(d, scaled[1], n,
                                                       f"argument '{name}': dim {k}")
                    where[symbol] = (name, k)
                elif bindings[symbol] != n:
                    first, j = where[symbol]
                    raise CallError(
                        f"argument '{name}': dim {k} is {symbol}, which argument '{first}' "
                        f"dim {j} binds to {bindings[symbol]}; got {n}"
                    )
            elif d != n:
                raise CallError(
                    f"argument '{name}': dim {k} has the static size {d}; got {n} "
                    f"(sizes {list(shape)})"
                )
    for name, k, d, n in deferred:
        unbound = sorted(free_symbols(d) - bindings.keys())
        if unbound:
            raise CallError(
                f"argument '{name}': dim {k} is {d}, and no dim of its own binds "
                f"{', '.join(unbound)}; declare some dim as that symbol alone"
            )
        want = evaluate(d, bindings)
        if want != n:
            raise CallError(
                f"argument '{name}': dim {k} is {d} = {want} under "
                f"{_text(bindings)}; got {n}"
            )
    return bindings


def derived_sizes(types: Iterable[Any]) -> tuple[Sym, ...]:
    """The sizes among `types` (the `TensorType`s of a graph's values) that are
    expressions of symbols other than one bare symbol: `(N + 1) // 2`, `N - 1`, `N // 4`.
    Where one of them is 0 or 1 while a symbol it reads is above 1, torch decides what a
    class plan, planned for every value of the class, cannot: a `contiguous` of a view
    whose dim has size 1 is that view, at N = 2 of `x[::2]` as at N = 1 of `x`. A
    binding that makes one so (`degenerate`) is planned alone, for its sizes."""
    seen: dict[Sym, None] = {}
    for t in types:
        for d in t.sizes:
            if isinstance(d, Sym) and d.name is None:
                seen.setdefault(d, None)
    return tuple(seen)


def refused_views(ops: Iterable[Any]) -> tuple[Any, ...]:
    """The reshapes and flattens among `ops` over a symbolic layout that do not view for
    every value of their symbols, so the class plan copies: `x[:, ::2].flatten()` of an
    (N, M) input views where M is even (M = 2 * ceil(M / 2)) and copies where it is odd.
    torch decides per call; `views_at` tells the bindings where the class plan's copy is
    not torch's answer."""
    refused = []
    for op in ops:
        if not (hasattr(op, "viewed_at") and op.operands):
            continue
        layout = op.operands[0].type.layout
        symbolic = free_symbols((layout.sizes, layout.strides, layout.offset))
        if symbolic and op.viewed(layout) is None and not _copies_always(op, layout):
            refused.append(op)
    return tuple(refused)


def _copies_always(op: Any, layout: Layout) -> bool:
    """Whether `op` (a reshape) copies at every binding its class plan serves, so no call
    needs asking (`copies_at_every_binding`: repeat_kv's reshape of its expanded heads)."""
    sizes = getattr(op, "sizes", None)
    return isinstance(sizes, tuple) and copies_at_every_binding(layout, sizes)


def views_at(refused: Sequence[Any], bindings: Mapping[str, int]) -> bool:
    """Whether one of `refused` (`refused_views`) views at `bindings`: torch's result then
    aliases its input where the class plan copies, so the binding is planned alone."""
    for op in refused:
        layout = op.operands[0].type.layout
        sizes = evaluate(layout.sizes, bindings)
        if min(sizes, default=1) <= 0:
            return True  # empty (`x[1:]` at N = 0: N - 1 < 0): planned alone, as torch sizes it
        concrete = Layout(sizes, evaluate(layout.strides, bindings),
                          evaluate(layout.offset, bindings))
        if op.viewed_at(concrete, bindings) is not None:
            return True
    return False


def degenerate(sizes: Sequence[Sym], bindings: Mapping[str, int]) -> bool:
    """Whether one of `sizes` (`derived_sizes`) is 0 or 1 at `bindings` while a symbol it
    reads is above 1 (a size of symbols all 0 or 1 is a constant of their class plan)."""
    return any(evaluate(d, bindings) <= 1 and any(bindings[s] > 1 for s in free_symbols(d))
               for d in sizes)


class FastBinding(NamedTuple):
    """`fast_binder`'s answer for a call that passed every check."""

    device: Any
    bindings: dict[str, int]  # as `bind_call` gives them
    cls: tuple  # their `binding_class`
    values: tuple[int, ...]  # the symbols' values, in the order `fast_binder` was given


def fast_binder(inputs: Sequence[tuple[str, Any]], symbols: Sequence[str], *,
                derived: Sequence[Sym] = ()) -> Any:
    """One generated function of a call's tensors doing, for a graph of `inputs` (name,
    `TensorType` without a declared layout) over `symbols`, every check a call to the
    class plan needs at once -- the count; plain strided, not nested, not neg-viewed
    `torch.Tensor`s of the declared dtypes on one device; static dims, symbols bound
    consistently, compound sizes; each input in its declared (symbolic) layout; each
    storage holding its layout; none requiring grad (a differentiable call) -- returning
    a `FastBinding`, or None where any check fails: the caller then takes the full
    path (`check_arguments`, `bind_call`), which names what does not fit. None (no
    function) where some symbol is bound by no dim of its own. `derived`
    (`derived_sizes`): None where the binding is `degenerate` for them too (the full
    path then plans it alone)."""
    import torch

    where: dict[str, str] = {}
    lines = [f"if len(ts) != {len(inputs)}: return None"]
    later: list[tuple[int, int, Sym]] = []
    for i, (_, t_type) in enumerate(inputs):
        sizes = t_type.sizes
        lines += [
            f"t{i} = ts[{i}]",
            f"if type(t{i}) is not _Tensor or t{i}.layout is not _strided"
            f" or t{i}.is_nested or t{i}.dtype is not _dtype{i} or t{i}.is_neg()"
            f" or t{i}.requires_grad: return None",
            f"s{i} = t{i}.shape",
        ]
        lines.append(f"if len(s{i}) != {len(sizes)}: return None")
        lines.append(f"if t{i}.device != device: return None" if i
                     else f"device = t{i}.device")
        for k, d in enumerate(sizes):
            scaled = d.scaled if isinstance(d, Sym) else None
            if scaled is not None and scaled[0] not in where:
                name, c = scaled
                where[name] = f"_{len(where)}"
                if c == 1:
                    lines.append(f"{where[name]} = s{i}[{k}]")
                else:  # a size declared a multiple of c
                    lines.append(f"if s{i}[{k}] % {c}: return None")
                    lines.append(f"{where[name]} = s{i}[{k}] // {c}")
            elif isinstance(d, Sym):
                later.append((i, k, d))  # a compound size: checked once all are bound
            else:
                lines.append(f"if s{i}[{k}] != {d}: return None")
    if set(symbols) - where.keys():
        return None
    for i, k, d in later:
        lines.append(f"if s{i}[{k}] != {_py_source(d, where)}: return None")
    for i, (_, t_type) in enumerate(inputs):
        layout = t_type.layout
        strides = "".join(f"{_py_source(st, where)}, " for st in layout.strides)
        lines += [
            f"st{i} = t{i}.stride()", f"o{i} = t{i}.storage_offset()",
            f"if st{i} != ({strides}) or o{i} != "
            f"{_py_source(layout.offset, where)}: return None",
            f"if t{i}.numel() and {_py_source(layout.offset, where)} + "
            + "".join(f"(s{i}[{k}] - 1) * st{i}[{k}] + " for k in range(len(t_type.sizes)))
            + "0"
            + f" >= t{i}.untyped_storage().nbytes() // t{i}.element_size(): return None",
        ]
    for d in derived:
        above = " or ".join(f"{where[s]} > 1" for s in sorted(free_symbols(d)))
        lines.append(f"if {_py_source(d, where)} <= 1 and ({above}): return None")
    # The class straight from the values (`binding_class` of the bindings, same order).
    cls = "".join(
        f"({n!r}, '0' if {v} == 0 else '1' if {v} == 1 else '16k' if {v} % 16 == 0 else 'n', "
        f"{v} <= {INT32_MAX}), " for n, v in where.items()
    )
    # (tuple.__new__: a record without the Python-level constructor a NamedTuple has)
    lines.append(
        f"return _new(FastBinding, (device, "
        f"{{{''.join(f'{n!r}: {v}, ' for n, v in where.items())}}}, "
        f"({cls}), ({''.join(f'{where[n]}, ' for n in symbols)})))"
    )
    scope: dict[str, Any] = {"_Tensor": torch.Tensor, "_strided": torch.strided,
                             "_new": tuple.__new__, "FastBinding": FastBinding}
    for i, (_, t_type) in enumerate(inputs):
        scope[f"_dtype{i}"] = t_type.dtype.torch
    check = HostFunction("check", "ts", scope)
    check.add(*lines)
    return check.build()


def _text(bindings: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in bindings.items())
