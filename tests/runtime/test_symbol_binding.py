"""A call's sizes bound to the inputs' symbolic sizes (`stridec.runtime.symbolic`): each
symbol takes the size of the first dim that is that symbol alone, every other dim is
checked against the binding, and a mismatch is a `CallError` naming the argument and dim."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stridec.errors import CallError
from stridec.ir.symbols import symbol
from stridec.runtime.symbolic import bind_call, binding_class, graph_symbols, size_class

N, M = symbol("N"), symbol("M")


@given(n=st.integers(0, 10**6), m=st.integers(0, 100))
def test_every_symbol_takes_its_first_dims_size(n: int, m: int) -> None:
    inputs = [("x", (N, 64)), ("y", (M, N, 3)), ("z", (2 * N + M,))]
    assert bind_call(inputs, [(n, 64), (m, n, 3), (2 * n + m,)]) == {"N": n, "M": m}
    assert graph_symbols([sizes for _, sizes in inputs]) == ("N", "M")


def test_a_static_dim_that_differs_names_the_argument_and_dim() -> None:
    with pytest.raises(CallError, match=r"argument 'x': dim 1 has the static size 64; got 65"):
        bind_call([("x", (N, 64))], [(3, 65)])


def test_a_symbol_bound_two_ways_names_both_arguments() -> None:
    with pytest.raises(
        CallError, match=r"argument 'y': dim 0 is N, which argument 'x' dim 0 binds to 5; got 3"
    ):
        bind_call([("x", (N, 64)), ("y", (N, 3))], [(5, 64), (3, 3)])


def test_a_compound_size_is_checked_under_the_binding() -> None:
    with pytest.raises(CallError, match=r"argument 'z': dim 0 is 2\*N = 8 under N = 4; got 9"):
        bind_call([("x", (N,)), ("z", (2 * N,))], [(4,), (9,)])
    with pytest.raises(CallError, match=r"no dim of its own binds N"):
        bind_call([("z", (N + 1,))], [(8,)])


def test_a_multiple_of_a_symbol_binds_it() -> None:
    """A dim of 2*N (declared a multiple of 2) binds N to half its size, which must be
    whole; a later dim of N is checked against it, and so is a 2*N after an N."""
    assert bind_call([("z", (2 * N,)), ("x", (N,))], [(8,), (4,)]) == {"N": 4}
    assert bind_call([("x", (N,)), ("z", (2 * N,))], [(4,), (8,)]) == {"N": 4}
    with pytest.raises(CallError, match=r"argument 'z': dim 0 is 2\*N, a multiple of 2"
                                        r" \(declared so\); got 9"):
        bind_call([("z", (2 * N,))], [(9,)])
    with pytest.raises(CallError, match=r"argument 'x': dim 0 is N, which argument 'z' dim 0 "
                                        r"binds to 4; got 5"):
        bind_call([("z", (2 * N,)), ("x", (N,))], [(8,), (5,)])


def test_a_rank_that_differs_is_refused() -> None:
    with pytest.raises(CallError, match=r"argument 'x': expected 2 dims \(N, 64\)"):
        bind_call([("x", (N, 64))], [(3, 64, 1)])


def test_classes_are_zero_one_multiples_of_16_and_the_rest() -> None:
    assert [size_class(v) for v in (0, 1, 2, 15, 16, 48, 49)] == [
        "0", "1", "n", "n", "16k", "16k", "n"
    ]
    assert binding_class({"N": 32, "M": 2**31}) == (("N", "16k", True), ("M", "16k", False))
    # 16 batch sizes 2..17 fall in two classes.
    assert len({binding_class({"N": n}) for n in range(2, 18)}) == 2
