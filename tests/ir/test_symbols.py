"""Symbolic sizes (`stridec.ir.symbols`): random expressions built from symbols, ints, +,
-, *, // and % evaluate as Python's integer arithmetic on the same values, print and parse
back to themselves, and the static proofs hold at every sampled value."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stridec.errors import CallError, LayoutError, VerificationError
from stridec.ir.symbols import (
    Sym,
    as_size,
    as_sizes,
    bind_sizes,
    ceil_div,
    evaluate,
    free_symbols,
    is_static,
    parse_size,
    size_max,
    size_min,
    statically_false,
    statically_true,
    substitute,
    symbol,
)

NAMES = ("N", "M", "batch_x")


@st.composite
def exprs(draw: st.DrawFn, depth: int = 3) -> tuple[object, object]:
    """(an expression of symbols, the same as a function of the values)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            name = draw(st.sampled_from(NAMES))
            return symbol(name), lambda v, name=name: v[name]
        k = draw(st.integers(-5, 9))
        return k, lambda v, k=k: k
    (a, fa), (b, fb) = draw(exprs(depth - 1)), draw(exprs(depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "ceil"]))
    if op == "+":
        return a + b, lambda v: fa(v) + fb(v)
    if op == "-":
        return a - b, lambda v: fa(v) - fb(v)
    if op == "*":
        return a * b, lambda v: fa(v) * fb(v)
    d = draw(st.integers(1, 6))
    if op == "//":
        return _floordiv(a, d), lambda v: fa(v) // d
    if op == "%":
        return _mod(a, d), lambda v: fa(v) % d
    return ceil_div(a, d), lambda v: -(-fa(v) // d)


def _floordiv(a: object, d: int) -> object:
    return a // d  # type: ignore[operator]


def _mod(a: object, d: int) -> object:
    return a % d  # type: ignore[operator]


values = st.fixed_dictionaries({n: st.integers(1, 40) for n in NAMES})


@settings(max_examples=150, deadline=None)
@given(exprs(), st.lists(values, min_size=1, max_size=5))
def test_expressions_evaluate_as_python_ints(e: tuple[object, object], points: list) -> None:
    expr, fn = e
    for v in points:
        assert evaluate(expr, v) == fn(v)
        assert evaluate(substitute(expr, {"N": v["N"]}), v) == fn(v)
        assert substitute(expr, {"N": symbol("N")}) == expr
    if isinstance(expr, Sym):
        assert parse_size(str(expr)) == expr
        assert pickle.loads(pickle.dumps(expr)) == expr
        names = sorted(free_symbols(expr))
        compiled = expr.compile(names)
        for v in points:
            assert compiled(*(v[n] for n in names)) == fn(v)
    else:
        assert isinstance(expr, int) and is_static(expr)


@settings(max_examples=150, deadline=None)
@given(exprs(), exprs(), st.lists(values, min_size=1, max_size=8))
def test_proofs_hold_at_every_value(a: tuple, b: tuple, points: list) -> None:
    (x, fx), (y, fy) = a, b
    for rel, check in [
        (x <= y, lambda v: fx(v) <= fy(v)),
        (x < y, lambda v: fx(v) < fy(v)),
        (x >= y, lambda v: fx(v) >= fy(v)),
    ]:
        if statically_true(rel):
            assert all(check(v) for v in points)
        if statically_false(rel):
            assert not any(check(v) for v in points)
    if isinstance(x, Sym) or isinstance(y, Sym):
        if x == y:
            assert all(fx(v) == fy(v) for v in points)


def test_canonical_forms() -> None:
    n, m = symbol("N"), symbol("M")
    assert (n + 2) * 4 - 4 * n == 8 and type((n + 2) * 4 - 4 * n) is int
    assert (4 * n + 5) // 4 == n + 1
    assert (2 * n + 2) // 4 == (n + 1) // 2
    assert str((n + 1) // 2) == "(N+1)//2"
    assert (n + m) * (n - m) == n * n - m * m
    assert hash(n * m + 1) == hash(m * n + 1)
    assert str(n * 64 + 3) == "64*N+3"
    assert free_symbols((n, 64, (m, n * 4))) == frozenset({"N", "M"})
    assert not is_static((1, n)) and is_static((1, (2, 3)))


def test_decisions_and_refusals() -> None:
    n = symbol("N")
    assert statically_true(n <= 4 * n) and not statically_true(n <= 4)
    assert statically_false(n < 1) and statically_true(n - 1 >= 0)
    assert statically_true(n * n >= 2 * n - 1) and not statically_true(n * n >= 2 * n)
    assert statically_true((n + 1) // 2 >= 1) and not statically_true(n // 2 >= 1)
    assert statically_true(6 * ((n + 1) // 2) - 4 < 3 * n)  # the floor's upper bound
    assert n != 1 and not (n == 1)  # an identity, not a value
    assert min(0, n) == 0 and max(n, 0) == n
    assert size_max(n, n + 2) == n + 2 and size_min(n, 2 * n) == n
    with pytest.raises(LayoutError, match="depends on the value of N"):
        bool(n < 3)
    with pytest.raises(LayoutError, match="depends on the value of N"):
        size_max(n, 3)
    with pytest.raises(LayoutError, match="symbolic size N"):
        range(n)  # type: ignore[arg-type]
    with pytest.raises(LayoutError, match="no value for the symbol N"):
        evaluate(n + 1, {"M": 2})
    with pytest.raises(LayoutError, match="by the symbolic size N"):
        _floordiv(8, n)  # type: ignore[arg-type]
    assert _floordiv(6 * n * n + 2 * n, 2 * n) == 3 * n + 1 and _mod(6 * n, 2 * n) == 0


def test_bind_sizes() -> None:
    n, m = symbol("N"), symbol("M")
    assert bind_sizes((n, 64, m), (8, 64, 3), {}) == {"N": 8, "M": 3}
    assert bind_sizes((n + 2, n), (7, 5), {}) == {"N": 5}  # the bare N binds first
    assert bind_sizes((n,), (0,), {}) == {"N": 0}
    for sizes, actual, bindings, message in [
        ((n, 64), (8, 32), {}, "dim 1 has the static size 64; got 32"),
        ((n,), (5,), {"N": 8}, "dim 0 is N, which is 8 with N = 8"),
        ((n + 2,), (5,), {}, "needs the symbol"),
        ((n, 2), (5,), {}, "expected 2 dims"),
    ]:
        with pytest.raises(CallError, match=message):
            bind_sizes(sizes, actual, dict(bindings), "x")


def test_as_size() -> None:
    assert as_sizes(("N", 64, symbol("M"))) == (symbol("N"), 64, symbol("M"))
    assert as_size(3) == 3
    with pytest.raises(LayoutError, match="sizes: a symbolic size must be an identifier"):
        as_size("2N", "sizes")
    for bad in (True, 1.5, None):  # the wrong type: one class wherever (docs/errors.md)
        with pytest.raises(VerificationError, match="sizes: expected an int or a symbol name"):
            as_size(bad, "sizes")
    with pytest.raises(LayoutError, match="unexpected"):
        parse_size("N+")
