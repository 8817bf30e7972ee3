"""What the bench scripts print: every row's shape shows its inputs' sizes (the cat row's
three inputs as three shapes, not its rank-6 parameter), the device header shows no
`driver None` on a CPU, and the kernel inspector's batched tiles fit its table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.inspect_kernels import lower, strategy_text, tile_text  # noqa: E402
from bench.run import device_text  # noqa: E402
from bench.workloads import WORKLOADS, by_name, dims_text  # noqa: E402


@pytest.mark.parametrize("w", WORKLOADS, ids=lambda w: w.name)
def test_shape_text_names_the_input_sizes(w) -> None:  # type: ignore[no-untyped-def]
    """A row whose inputs all have the parameter's sizes shows it; one with other inputs
    (the cat's three, a Philox state) shows either the parameter or each input's sizes."""
    shape = w.shape("tiny")
    text = w.shape_text(shape)
    inputs = [dims_text(v.type.sizes) for v in w.graph("tiny").inputs]
    assert text == dims_text(shape) or text == ", ".join(inputs), (text, inputs)


def test_the_cat_row_shows_three_shapes() -> None:
    row = by_name("cat_channels_fp16")
    inputs = [dims_text(v.type.sizes) for v in row.graph("tiny").inputs]
    assert len(inputs) == 3
    assert row.shape_text(row.shape("tiny")) == ", ".join(inputs)


def test_device_text() -> None:
    assert device_text({"name": "cpu", "driver": None}) == "cpu"
    assert device_text({"name": "NVIDIA H200", "driver": "570.1"}) == "NVIDIA H200 (driver 570.1)"


def test_batched_tiles_and_strategies_fit_the_inspector_table() -> None:
    """The cat row's one kernel is a batch of three members: tile and strategy are written
    once with a count, within the table's columns (12 and 16 characters)."""
    program = lower(by_name("cat_channels_fp16").graph("full"))
    (kernel,) = program.kernels
    members = {name.split("_")[0] for name in kernel.constexprs}
    tile, strategy = tile_text(dict(kernel.constexprs)), strategy_text(kernel.strategy)
    assert tile.startswith(f"{len(members)}×") and len(tile) <= 12
    assert strategy == f"batch {len(members)}×linear" and len(strategy) <= 16
    assert tile_text({"TILE_A": 64, "TILE_B": 32}) == "64x32"
    assert tile_text({"M0_BLOCK": 8, "M1_BLOCK": 16}) == "8/16"
    assert strategy_text("tiled_transpose") == "tiled_transpose"
    assert strategy_text("batch(linear,gather)") == "batch linear/gather"
