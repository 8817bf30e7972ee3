"""The copies of a symbolic cat into one buffer are one launch on every backend that
launches kernels: on `cpu` the C batch kernels, on `interpret` (and `triton`) the Triton
batch kernel, whose members' sizes, strides, offsets and program ranges are runtime
arguments evaluated per call from the class's symbol values. Values, strides and storage
sharing are torch's; one plan per class of the symbols' values."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_oracle import check_against_torch

import stridec
from stridec.ir.symbols import Sym
from stridec.runtime.symbolic import binding_class

BACKENDS = ["interpret", "cpu"]


def symbolic_dim_cat() -> stridec.Graph:
    """cat([x (N, 4, 6), y (M, 4, 6)], 0): sizes N + M; the cat and a view of it out."""
    g = stridec.Graph("cat_symbolic_dim")
    x = g.input("x", ("N", 4, 6), "float32")
    y = g.input("y", ("M", 4, 6), "float32")
    z = stridec.cat([x, y], 0)
    g.output(z, z.transpose(0, 2))
    return g


def static_dim_cat() -> stridec.Graph:
    """cat([x (N, 4, 6), w (N, 3, 6), x], 1): a static dim, members sized by N."""
    g = stridec.Graph("cat_static_dim")
    x = g.input("x", ("N", 4, 6), "float16")
    w = g.input("w", ("N", 3, 6), "float16")
    g.output(stridec.cat([x, w, x], 1))
    return g


def symbolic_dim_call(n: int, m: int) -> tuple[tuple[torch.Tensor, ...], Any]:
    a, b = torch.randn(n, 4, 6), torch.randn(m, 4, 6)
    z = torch.cat([a, b], 0)
    return (a, b), (z, z.transpose(0, 2))


def static_dim_call(n: int, m: int) -> tuple[tuple[torch.Tensor, ...], Any]:
    a, c = torch.randn(n, 4, 6).half(), torch.randn(n, 3, 6).half()
    return (a, c), torch.cat([a, c, a], 1)


CASES = {"symbolic_dim": (symbolic_dim_cat, symbolic_dim_call),
         "static_dim": (static_dim_cat, static_dim_call)}


def check_call(fn: Any, case: str, n: int, m: int) -> None:
    """One call against torch: values, strides, storage sharing (with the inputs, and
    between the outputs), and the cat one launch (none where it writes nothing)."""
    _, make = CASES[case]
    inputs, want = make(n, m)
    launches = fn.stats.launches
    got = fn(*inputs)
    check_against_torch(got, want, inputs)
    if isinstance(want, tuple) and want[0].numel():
        assert (got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()) \
            == (want[0].untyped_storage().data_ptr() == want[1].untyped_storage().data_ptr())
    plan = fn.plan_for(*inputs)
    written = (want[0] if isinstance(want, tuple) else want).numel()
    assert plan.launches == fn.stats.launches - launches == (1 if written else 0)
    assert plan.program.symbols  # the class plan, not a plan per binding


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 40), m=st.integers(0, 40), case=st.sampled_from(sorted(CASES)),
       backend=st.sampled_from(BACKENDS))
def test_a_symbolic_cat_is_one_launch_equal_to_torch(
    n: int, m: int, case: str, backend: str
) -> None:
    fn = stridec.compile(CASES[case][0](), backend=backend)
    check_call(fn, case, n, m)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_many_sizes_of_a_symbolic_cat_cost_two_code_generations(case: str, backend: str) -> None:
    """16 sizes of N (M fixed): two classes (N a multiple of 16 or not), one launch each
    call, torch's values."""
    fn = stridec.compile(CASES[case][0](), backend=backend)
    sizes = [2, 3, 5, 16, 7, 9, 11, 32, 13, 17, 19, 23, 29, 31, 37, 3]
    for n in sizes:
        check_call(fn, case, n, 5)
    assert fn.stats.codegen_runs <= 2
    assert fn.stats.codegen_runs == len({binding_class({"N": n, "M": 5}) for n in sizes})


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_interpret_cat_is_a_triton_batch_of_the_class(case: str) -> None:
    """On `interpret` the one launch is a symbolic Triton batch kernel: its arguments and
    grid are expressions of the symbols, its members the cat's copies."""
    fn = stridec.compile(CASES[case][0](), backend="interpret")
    inputs, _ = CASES[case][1](3, 5)
    fn(*inputs)
    program = fn.plan_for(*inputs).program
    (launch,) = program.launches
    kernel = program.kernels[launch.kernel]
    members = {"symbolic_dim": 2, "static_dim": 3}[case]
    assert kernel.lang == "triton" and kernel.name.startswith("stridec_copy_batch_")
    assert f"copy batch: {members} copies into one buffer" in kernel.source
    assert any(isinstance(v, Sym) for v in (*kernel.grid, *kernel.args))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_the_triton_batch_index_width_is_a_class_bit(target: str) -> None:
    """The Triton batch of a class planned at small sizes indexes in int32, and its
    program's `fits` refuses a binding whose indices pass 2^31 - 1 (the call then takes
    the class's int64 plan); planned at such a binding, the batch indexes in int64."""
    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager

    g = symbolic_dim_cat()
    PassManager.parse(DEFAULT_PIPELINE).run(g)
    wide = {"N": 2**27, "M": 5}  # 24 * 2^27 elements: past int32
    small = lower_to_program(g, target, hint={"N": 3, "M": 5})
    (launch,) = small.launches
    assert small.kernels[launch.kernel].index_bits == 32
    assert small.fits({"N": 7, "M": 9}) and not small.fits(wide)
    big = lower_to_program(g, target, hint=wide)
    (launch,) = big.launches
    assert big.kernels[launch.kernel].index_bits == 64 and big.fits(wide)
