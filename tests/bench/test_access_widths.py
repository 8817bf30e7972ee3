"""The full-size benchmark rows compile to the widest accesses their layouts allow (sm_90).

No GPU is needed: `bench/inspect_kernels.py` lowers a row as `stridec.compile` does for a
CUDA tensor, compiles it with Triton for Hopper and reads the SASS with the `cuobjdump`
Triton carries. The oracle is the hardware: a thread's global access is at most 16 bytes
(LDG.E.128 / STG.E.128), and memory-bound code should use that width wherever the data
is contiguous and 16-byte aligned (HOPPER.md, "16-byte accesses per thread"). Where a
side cannot be vectorized (rows of an odd number of int8 elements start unaligned) the
test says so and checks that side is at least not wider than its alignment allows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import stridec  # noqa: E402

inspect = pytest.importorskip("bench.inspect_kernels")
try:
    import triton  # noqa: F401

    if not Path(inspect._tool("cuobjdump")).exists():
        pytest.skip("Triton's cuobjdump is not installed", allow_module_level=True)
except ImportError:
    pytest.skip("Triton is not installed", allow_module_level=True)

from bench.workloads import by_name  # noqa: E402
from stridec.compiler.codegen.spec import Tuning  # noqa: E402

VECTOR = 16  # bytes: the widest global access of one thread


def reports(graph: stridec.Graph, tuning: Tuning | None = None) -> list:
    program = inspect.lower(graph, tuning)
    return inspect.inspect_program(graph, program)


# Rows whose both sides are contiguous and aligned somewhere: 16-byte loads and stores.
BOTH_SIDES = [
    "transpose2d_float32",
    "transpose2d_float16",
    "transpose2d_int8",
    "nchw_to_nhwc_fp16",
    "nhwc_to_nchw_fp16",
    "attention_permute_0213",
    "pack_nchw32_int8",
    "pack_nchw64_int8",
    "unpack_nchw32_int8",
    "pitched_rows_float16",
    "strided_slice_float32",
    "expand_float32",
]


@pytest.mark.parametrize("row", BOTH_SIDES)
def test_rows_load_and_store_16_bytes_per_access(row: str) -> None:
    (r,) = reports(by_name(row).graph("full"))
    assert r.widest_load == VECTOR and r.widest_store == VECTOR, (r.loads, r.stores)
    assert r.local == 0  # no spills to local memory


def test_a_cast_in_a_transpose_keeps_both_sides_vectorized() -> None:
    # fp32 in, fp16 out: 16-byte loads; stores of 8 halves are 16 bytes too.
    (r,) = reports(by_name("cast_transpose_fp32_fp16").graph("full"))
    assert r.widest_load == VECTOR and r.widest_store == VECTOR, (r.loads, r.stores)


def test_64_bit_indexing_still_vectorizes() -> None:
    """Past 2^31 elements the index is int64; aligned rows still get 16-byte accesses."""
    row = by_name("above_2e31_transpose_int8")
    (kernel,) = inspect.lower(row.graph("full")).kernels
    assert kernel.index_bits == 64
    (r,) = reports(row.graph("full"))
    assert r.widest_load == VECTOR and r.widest_store == VECTOR, (r.loads, r.stores)


def test_odd_int8_rows_cannot_vectorize() -> None:
    """16387-byte rows start at every alignment: no access may be wider than a byte."""
    (r,) = reports(by_name("transpose2d_int8_odd").graph("full"))
    assert r.widest_load == 1 and r.widest_store == 1, (r.loads, r.stores)


def test_gather_over_a_row_major_destination_stores_16_bytes() -> None:
    """NCHW -> NHWC with C = 3 as a gather: the flat index is the destination address, so
    stores are 16-byte vectors (loads gather 2-byte halves)."""
    (r,) = reports(by_name("nchw_to_nhwc_c3_fp16").graph("full"), Tuning(strategy="gather"))
    assert r.widest_store == VECTOR, r.stores
    assert r.widest_load == 2, r.loads


def test_tuning_overrides_tile_and_warps() -> None:
    (r,) = reports(by_name("transpose2d_float32").graph("full"), Tuning(None, (32, 128), 4))
    assert r.tile == {"TILE_A": 32, "TILE_B": 128} and r.num_warps == 4
    assert r.widest_load == VECTOR and r.widest_store == VECTOR, (r.loads, r.stores)
