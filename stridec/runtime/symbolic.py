"""A call's sizes bound to a graph's symbols, and the class of a binding.

A graph input may have symbolic sizes (`g.input("x", ("N", 64), "float16")`,
`stridec.ir.symbols`). A call binds each symbol to the size of the first dim that names
it alone, and then checks every dim: a static dim must have its declared size, a symbol
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

from collections.abc import Mapping, Sequence
from typing import Any

from stridec.compiler.codegen.spec import binding_class, size_class
from stridec.errors import CallError
from stridec.ir.symbols import Sym, evaluate, free_symbols

__all__ = ["bind_call", "binding_class", "graph_symbols", "size_class"]


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
                symbol = d.name
                if symbol is None:
                    deferred.append((name, k, d, n))
                elif symbol not in bindings:
                    bindings[symbol] = n
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


def _text(bindings: Mapping[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in bindings.items())
