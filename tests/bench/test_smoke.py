"""The benchmark suite's CPU smoke test: every row of `bench/workloads.py` at its tiny size,
through the interpret backend, checked against torch (or, for the Philox rows, against
`stridec.run_reference`); then `bench/run.py --smoke` end to end. Nothing is timed here.

A row that stridec gets wrong goes into KNOWN_BUGS with the bug's description: it stays
in the suite as a strict xfail, so it is seen (and the xfail fails once the bug is fixed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import stridec  # noqa: E402
from bench import report as reporting  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.workloads import (  # noqa: E402
    HOST_OVERHEAD,
    PHILOX_WINDOW,
    WORKLOADS,
    Mismatch,
    Workload,
    by_name,
)
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402

# name -> the stridec bug that makes the row fail (none known today).
KNOWN_BUGS: dict[str, str] = {}
ROWS = [*WORKLOADS, HOST_OVERHEAD]
MIB = 1 << 20


def _params() -> list:
    return [
        pytest.param(w, id=w.name, marks=pytest.mark.xfail(reason=KNOWN_BUGS[w.name], strict=True))
        if w.name in KNOWN_BUGS else pytest.param(w, id=w.name)
        for w in ROWS
    ]


def _flip_last(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` whose last element differs in its lowest bit (any dtype)."""
    t = t.clone()
    words = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    t.reshape(-1).view(words)[-1] ^= 1
    return t


@pytest.mark.parametrize("w", _params())
def test_row_matches_torch_at_tiny_size(w: Workload) -> None:
    """Two fresh random inputs; each output equals the oracle's element for element, in
    the number of kernels the row promises (one per materialized output,
    docs/design.md#performance-targets); and the row's check fails when one element of the
    output is wrong."""
    graph = w.graph("tiny")
    fn = stridec.compile(graph, backend="interpret")
    for seed in (0, 1):
        inputs = w.inputs("tiny", "cpu", seed=seed)
        assert fn.plan_for(*inputs).launches == w.kernels
        outputs = fn(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        w.check("tiny", graph, inputs, outputs)
    broken = (_flip_last(outputs[0]), *outputs[1:])
    with pytest.raises(Mismatch):
        w.check("tiny", graph, inputs, broken)


def test_philox_window_check_covers_both_ends() -> None:
    """A draw larger than two windows is checked at its first and last words, as at full
    size on the GPU (a window at 4k is a draw from counter + k): a correct draw passes,
    one wrong word near the end is caught."""
    w = dataclasses.replace(by_name("philox_bits_uint32"),
                            shapes={"full": (3, 3 * PHILOX_WINDOW), "tiny": (3, 3 * PHILOX_WINDOW)})
    graph = w.graph("tiny")
    inputs = w.inputs("tiny", "cpu", seed=3)
    bits, state = stridec.compile(graph, backend="interpret")(*inputs)
    w.check("tiny", graph, inputs, (bits, state))
    with pytest.raises(Mismatch, match="values"):
        w.check("tiny", graph, inputs, (_flip_last(bits), state))
    with pytest.raises(Mismatch, match="new_state"):
        w.check("tiny", graph, inputs, (bits, _flip_last(state)))


def test_full_size_rows_hold_a_tensor_of_256_mib() -> None:
    """docs/design.md#performance-targets: measured on tensors of at least 256 MiB (sizes
    read off the graph's types, nothing allocated)."""
    for w in WORKLOADS:
        graph = w.graph("full")
        values = [*graph.inputs, *graph.output_op.operands]
        largest = max(math.prod(v.type.sizes) * v.type.dtype.itemsize for v in values)
        assert largest >= 256 * MIB, f"{w.name}: largest tensor {largest / MIB:.0f} MiB"


def test_row_above_2e31_plans_64_bit_indexing() -> None:
    """The full-size row has more than 2^31 elements, so its kernel must index in int64
    (its tiny version in int32). `torch.empty` of 2.25 GiB is not touched: the plan only
    reads sizes and strides."""
    w = by_name("above_2e31_transpose_int8")
    sizes = w.shape("full")
    assert math.prod(sizes) > 2**31
    try:
        big = torch.empty(sizes, dtype=torch.int8)
    except RuntimeError as e:  # an address space too small for 2 GiB
        pytest.skip(f"cannot reserve 2.25 GiB of host memory: {e}")
    plan = stridec.compile(w.graph("full"), backend="interpret").plan_for(big)
    assert [k.index_bits for k in plan.kernels] == [64]
    tiny = stridec.compile(w.graph("tiny"), backend="interpret").plan_for(*w.inputs("tiny", "cpu"))
    assert [k.index_bits for k in tiny.kernels] == [32]


def test_select_matches_patterns_and_substrings() -> None:
    names = [bench_run._item_name(k, w) for k, w in bench_run.select(["pack_nchw4*", "philox"])]
    assert names == ["pack_nchw4_int8", "pack_nchw4_c3_int8", "philox_bits_uint32",
                     "philox_uniform_float32"]
    assert len(bench_run.select(None)) == len(WORKLOADS) + 2


def test_smoke_run_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`bench/run.py --smoke`: every row checked, the compile-time rows run in two fresh
    processes (the second a disk hit), a JSON and a markdown file written, exit code 0."""
    code = bench_run.main(["--smoke", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    (json_path,) = tmp_path.glob("*.json")
    report = json.loads(json_path.read_text())
    compile_row = next(r for r in report["rows"] if r["kind"] == "compile_time")
    if compile_row["status"] == "sources-changed":  # someone edited stridec meanwhile
        report["failures"].remove("compile_time")
        code = 0 if not report["failures"] else code
    assert code == 0, f"failed rows: {report['failures']}\n{out[-3000:]}"
    assert report["mode"] == "smoke" and report["backend"] == "interpret"
    assert {"name", "driver"} <= set(report["device"])
    assert {"torch", "triton", "stridec"} <= set(report["versions"])
    names = [r["name"] for r in report["rows"]]
    assert names == [w.name for w in WORKLOADS] + [HOST_OVERHEAD.name, "compile_time"]
    for row in report["rows"]:
        if row["kind"] == "bandwidth":
            assert row["bytes_read"] > 0 and row["bytes_written"] > 0, row["name"]
            assert row["systems"] == {}, "smoke mode times nothing"
    if compile_row["status"] == "ok":
        assert compile_row["cold"]["compiles"] == 1 and compile_row["warm"]["disk_hits"] == 1
    assert json_path.with_suffix(".md").exists()
    assert f"{len(report['rows'])}/{len(report['rows'])}" in out  # the progress display


def test_json_written_after_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A run stopped between rows (a time limit) keeps the rows it measured: the JSON is
    written after each, `complete` false until the end; a whole run leaves one JSON,
    complete, under the same name."""
    names = [w.name for _, w in bench_run.select(
        ["transpose2d_float32", "expand_float32", "strided_slice_float32"])]  # run order
    measured = bench_run.measure_bandwidth

    def stop_at_the_third(w: Any, s: Any, progress: Any) -> dict[str, Any]:
        if w.name == names[2]:
            raise KeyboardInterrupt  # what a SIGINT from a time limit raises
        return measured(w, s, progress)

    monkeypatch.setattr(bench_run, "measure_bandwidth", stop_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        bench_run.main(["--smoke", "--only", *names, "--out", str(tmp_path)])
    (json_path,) = tmp_path.glob("*.json")
    report = json.loads(json_path.read_text())
    assert [r["name"] for r in report["rows"]] == names[:2]
    assert report["complete"] is False and report["failures"] == []
    assert not list(tmp_path.glob("*.part"))
    monkeypatch.setattr(bench_run, "measure_bandwidth", measured)
    json_path.unlink()
    assert bench_run.main(["--smoke", "--only", *names, "--out", str(tmp_path)]) == 0
    (json_path,) = tmp_path.glob("*.json")
    report = json.loads(json_path.read_text())
    assert [r["name"] for r in report["rows"]] == names and report["complete"] is True
    capsys.readouterr()


def test_cpu_timing_fills_every_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With host-clock timing the report path sees numbers: GB/s, % of copy, ratios to
    eager, % of fill for Philox, µs per call; the chart is written or its skip explained."""
    code = bench_run.main(["--smoke", "--cpu-timing", "--cpu-repeats", "1", "--host-calls", "2",
                           "--host-batches", "1", "--out", str(tmp_path),
                           "--only", "transpose2d_float32", "philox_bits", "host_overhead"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*.json")
    report = json.loads(json_path.read_text())
    transpose, philox, host = report["rows"]
    for row in (transpose, philox):
        for system in ("stridec", "eager"):
            entry = row["systems"][system]
            assert entry["ms"] > 0 and entry["gbps"] > 0 and entry["pct_copy"] > 0
        assert row["copy"]["bytes"] == row["bytes_total"] // 2 * 2
        assert row["vs_eager"] == pytest.approx(
            row["systems"]["eager"]["ms"] / row["systems"]["stridec"]["ms"])
    assert philox["pct_fill"] > 0 and transpose["pct_fill"] is None
    assert host["systems"]["stridec"]["us_per_call"] > 0
    table = json_path.with_suffix(".md").read_text()
    assert "| `transpose2d_float32` |" in table and "µs per cached call" in table
    assert json_path.with_suffix(".png").exists() or "chart skipped" in out
    # The CPU's vector extensions, which decide the code the C kernels run, head the page.
    assert report["device"]["isa"] == bench_run._cpu_isa()
    assert f"({report['device']['isa']}; " in table


def _cpu_race_row(name: str, tmp_path: Path,
                  capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Path]:
    """The JSON row of a one-round `--cpu` race of row `name` (no torch.compile, no cache
    flush), and the JSON file's path."""
    code = bench_run.main(["--cpu", "--only", name, "--cpu-repeats", "1",
                           "--no-torch-compile", "--cpu-flush-mb", "0", "--out",
                           str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*.json")
    (row,) = json.loads(json_path.read_text())["rows"]
    return row, json_path


@pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")
def test_cpu_race_times_the_streaming_copy(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`--cpu`: beside the memcpy, a streaming copy of the same bytes is timed in the same
    rounds, and eager's time over it (bound × eager) is reported and tabled."""
    row, json_path = _cpu_race_row("transpose2d_int8_odd", tmp_path, capsys)
    assert row["stream"]["bytes"] == row["copy"]["bytes"] == row["bytes_total"] // 2 * 2
    assert row["stream"]["ms"] > 0
    assert row["bound_vs_eager"] == pytest.approx(
        row["systems"]["eager"]["ms"] / row["stream"]["ms"])
    assert row["stream_fill"] is None  # the odd transpose reads as much as it writes
    table = json_path.with_suffix(".md").read_text()
    assert "| stream GB/s | write GB/s | bound × eager |" in table


@pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")
def test_cpu_race_bounds_a_row_that_writes_more_than_it_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A broadcast row materialized writes far more than it reads: the race also times a
    streaming write of its output's bytes, and its bound is eager's time over the slower
    of that and the streaming copy."""
    row, _ = _cpu_race_row("expand_float32", tmp_path, capsys)
    assert row["bytes_written"] > row["bytes_read"]
    assert row["stream_fill"]["bytes"] == row["bytes_written"]
    floor = max(row["stream"]["ms"], row["stream_fill"]["ms"])
    assert row["bound_vs_eager"] == pytest.approx(row["systems"]["eager"]["ms"] / floor)


def test_result_files_never_overwrite(tmp_path: Path) -> None:
    report = {"device": {"name": "NVIDIA H200"}, "mode": "gpu", "date": "2026-01-02T03:04:05"}
    first = reporting.result_stem(report, tmp_path)
    assert first.name == "2026-01-02-nvidia-h200"
    first.with_suffix(".json").write_text("{}")
    assert reporting.result_stem(report, tmp_path).name == "2026-01-02-nvidia-h200-2"


def test_tune_smoke_checks_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench/tune.py --smoke`: every variant of every row's plan (strategies, tiles, warps)
    is lowered for CUDA and run through the interpreter on the tiny sizes; each output is
    checked against the row's oracle, and the exit status says whether any was wrong."""
    from bench import tune

    assert tune.main(["--smoke"]) == 0
    out = capsys.readouterr().out
    assert " 0 wrong" in out and "WRONG" not in out
    for w in WORKLOADS:
        assert w.name in out


def test_tune_reports_a_variant_that_differs_from_the_oracle() -> None:
    """The sweep's check can fail: against a wrong oracle every variant is marked wrong."""
    from bench import tune

    w = by_name("transpose2d_float32")
    wrong = dataclasses.replace(w, eager=lambda s: lambda x: x.t().contiguous() + 1)
    s = bench_run.Session(torch.device("cpu"), "tiny", "auto", None, False)
    row = tune.tune_row(wrong, s)
    assert len(row["variants"]) > 1
    assert not any(v["correct"] for v in row["variants"])
    assert all("Mismatch" in v["error"] for v in row["variants"])
