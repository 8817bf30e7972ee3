"""The copy suites (`bench/run.py --cpu --suite ...`, bench/suites.py, bench/cases.py): their
smoke form runs every suite's tiny rows, each checked against torch; the row definitions
follow their published sources; a row stridec cannot trace is reported, not dropped."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cases, suites  # noqa: E402
from bench import run as bench_run  # noqa: E402
from bench.cases import Case  # noqa: E402
from stridec.runtime.backends import cpu as cpu_backend  # noqa: E402


def _smoke(suite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
           *extra: str) -> dict[str, Any]:
    code = bench_run.main(["--smoke", "--suite", suite, "--out", str(tmp_path), *extra])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*.json")
    assert json_path.name.endswith(f"-cpu-{suite}-smoke.json")
    assert json_path.with_suffix(".md").exists()
    return json.loads(json_path.read_text())


@pytest.mark.parametrize("suite", cases.SUITES)
def test_smoke_checks_every_row(suite: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """Every tiny row is traced, run and compared with torch (or reported untraceable);
    nothing is timed."""
    report = _smoke(suite, tmp_path, capsys, "--seed", "3")
    (rows,) = report["runs"]
    assert [r["name"] for r in rows] == [c.name for c in cases.cases(suite, 3, smoke=True)]
    assert all(r["status"] in ("ok", "untraceable") for r in rows)
    assert all(not r["systems"] or set(r["systems"]) <= {"compile"} for r in rows)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= len(rows) - 5 and all(r["kernels"] >= 1 for r in ok)
    if suite == "symbolic":
        assert all(r["kernels_static"] >= 1 for r in ok)
    if suite == "random":
        assert report["seed"] == 3


def test_hptt_notation_is_torch_permute_on_reversed_sizes() -> None:
    """HPTT's transpose (column-major A, output dim i = input dim perm[i], B column-major)
    is, over the same memory, torch's `x.permute(q)` of the reversed sizes."""
    for perm, _ in cases.HPTT_BENCHMARK[::3]:
        sizes = tuple(range(2, 2 + len(perm)))
        a = np.arange(math.prod(sizes)).reshape(sizes, order="F")
        b_memory = a.transpose(perm).flatten(order="F")
        q, shape = cases.hptt_to_torch(perm, sizes)
        x = torch.from_numpy(a.flatten(order="F")).reshape(shape)
        assert torch.equal(x.permute(q).contiguous().flatten(), torch.from_numpy(b_memory))


def test_ttc_rows_are_the_published_list_scaled() -> None:
    """57 HPTT rows (19 TTC permutations, 3 sizes each) in float32 and float64; every
    tensor 50-100 MB; odd extents stay odd, even ones even."""
    assert len(cases.HPTT_BENCHMARK) == 57
    assert len({p for p, _ in cases.HPTT_BENCHMARK}) == 19
    rows = cases.ttc_cases()
    assert len(rows) == 114
    for r in rows:
        shape, published = r.info["torch_shape"], r.info["hptt_sizes"]
        esize = 4 if r.dtype == "float32" else 8
        assert 50e6 <= math.prod(shape) * esize <= 100e6, r.name
        assert [n % 2 for n in reversed(shape)] == [n % 2 for n in published], r.name


def test_random_rows_follow_their_seed() -> None:
    a, b = cases.random_cases(11), cases.random_cases(11)
    assert [(r.name, r.shape_text, r.description) for r in a] == \
        [(r.name, r.shape_text, r.description) for r in b]
    assert [r.shape_text for r in a] != [r.shape_text for r in cases.random_cases(12)]
    sizes = set()
    for r in a + cases.random_cases(12):
        shape, perm = r.info["torch_shape"], r.info["torch_perm"]
        assert 2 <= len(shape) <= 6 and all(n % 2 == 1 for n in shape)
        assert sorted(perm) == list(range(len(perm))) and perm != sorted(perm)
        esize = torch.empty(0, dtype=getattr(torch, r.dtype)).element_size()
        sizes.add(esize)
        assert 64 * 1024 <= math.prod(shape) * esize <= 100 * 2**20, r.name
    assert sizes == {1, 2, 4, 8}


def test_model_rows_are_their_size() -> None:
    """At 1 MiB every row's largest tensor (input or output; a cache write's new entries)
    is 0.75-1.3 MiB."""
    for r in cases.model_cases():
        if r.size != "1M":
            continue
        inputs = r.inputs()
        if r.mutates:
            largest = inputs[1].nbytes
        else:
            out = r.fn(*inputs)
            largest = max([t.nbytes for t in inputs] + [out.nbytes])
        assert 0.75 * 2**20 <= largest <= 1.3 * 2**20, (r.name, largest)


def _case(fn: Any, into: Any = None) -> Case:
    return Case(name="probe", suite="models", description="probe", dtype="float32", fn=fn,
                make_inputs=lambda gen: [torch.randn(5, 7, generator=gen)],
                shape_text="5x7", into=into)


def _measure(case: Case) -> dict[str, Any]:
    s = bench_run.Session(torch.device("cpu"), "cpu", "interpret", None, False)
    return suites.measure_case(case, s, bench_run.Progress(1), smoke=True)


def test_a_row_stridec_cannot_trace_is_reported() -> None:
    row = _measure(_case(lambda x: (x + 1).t().contiguous()))
    assert row["status"] == "untraceable" and "__add__" in row["error"]
    assert row["kernels"] is None


def test_a_wrong_output_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check before timing can fail: against a wrong oracle stridec's output differs."""
    real = suites._expected
    monkeypatch.setattr(suites, "_expected", lambda c, xs: tuple(t + 1 for t in real(c, xs)))
    row = _measure(_case(lambda x: x.t().contiguous()))
    assert row["status"] == "mismatch" and "differ" in row["error"]


def test_a_wrong_eager_form_is_an_error() -> None:
    row = _measure(_case(lambda x: x.t().contiguous(),
                         into=lambda outs, x: outs[0].copy_(x.t().flip(0))))
    assert row["status"] == "error" and "into" in row["error"]


def test_summary_targets() -> None:
    def row(name: str, eager: float, compile_: float, memcpy: float) -> dict[str, Any]:
        return {"name": name, "status": "ok", "vs_eager": eager, "vs_compile": compile_,
                "frac_memcpy": memcpy}

    good = [row("a", 2.0, 2.0, 0.9), row("b", 1.8, 1.6, 0.85)]
    assert suites.summarize("ttc", good)["met"] and suites.summarize("models", good)["met"]
    one_slow = good + [row("c", 1.2, 0.9, 0.9)]
    m = suites.summarize("ttc", one_slow)
    assert not m["met"] and m["below_1_compile"] == ["c"]
    assert not suites.summarize("ttc", [row("a", 2.0, 2.0, 0.5)])["met"]  # under 0.8 memcpy
    sym = [{"name": "s", "status": "ok", "vs_static": 0.97, "kernels": 1, "kernels_static": 1}]
    assert suites.summarize("symbolic", sym)["met"]
    sym[0]["kernels"] = 3
    assert suites.summarize("symbolic", sym)["kernels_unequal"] == ["s"]


@pytest.mark.parametrize("n", range(1, 9))
def test_balanced_orders_put_every_system_after_every_other_equally_often(n: int) -> None:
    orders = bench_run.balanced_orders(n)
    follows: dict[tuple[int, int], int] = {}
    for order in orders:
        assert sorted(order) == list(range(n))
        for a, b in zip(order, order[1:], strict=False):
            follows[a, b] = follows.get((a, b), 0) + 1
    assert len(follows) == n * (n - 1) and len(set(follows.values())) <= 1


def test_instances_of_a_system_are_pooled(capsys: pytest.CaptureFixture[str]) -> None:
    """Calls named as instances of one system are timed apart and reported as one system:
    the median of all their samples, each instance's own median beside it."""
    s = bench_run.Session(torch.device("cpu"), "cpu", "cpu", None, False, interleave=4)
    ran: list[str] = []
    names = ("symbolic 1", "static 1", "static 2", "symbolic 2")
    calls = {name: (lambda name=name: ran.append(name)) for name in names}
    row: dict[str, Any] = {"systems": {}}
    bench_run._time_interleaved(calls, 64, 32, s, row, bench_run.Progress(0),
                                {name: name.split()[0] for name in names})
    assert set(row["systems"]) == {"symbolic", "static"}
    assert set(row["systems"]["static"]["instances"]) == {"static 1", "static 2"}
    assert {name: ran.count(name) for name in names} == dict.fromkeys(names, 5)


@pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")
def test_quick_times_one_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--quick --only ROW`: one row timed beside eager, the memcpy and the streaming copy,
    without torch.compile; ratios and fractions filled in, the chart written or skipped."""
    code = bench_run.main(["--cpu", "--suite", "models", "--quick", "--only",
                           "pixel_shuffle_64K", "--cpu-repeats", "1", "--cpu-flush-mb", "0",
                           "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*.json")
    (rows,) = json.loads(json_path.read_text())["runs"]
    (row,) = rows
    assert row["preallocated"] and set(row["systems"]) == {"stridec", "eager"}
    assert row["vs_eager"] == pytest.approx(
        row["systems"]["eager"]["ms"] / row["systems"]["stridec"]["ms"])
    assert row["frac_memcpy"] == pytest.approx(row["copy"]["ms"] / row["systems"]["stridec"]["ms"])
    assert row["stream"]["ms"] > 0
    assert row["load"] >= 0  # the machine's load average at the row's start
    assert "| `pixel_shuffle_64K` |" in json_path.with_suffix(".md").read_text()
    assert json_path.with_suffix(".png").exists() or "chart skipped" in out
    # `python bench/suites.py FILE.json` draws the page again from the JSON alone.
    json_path.with_suffix(".md").unlink()
    assert json_path.with_suffix(".md") in suites.rewrite(json_path)
    assert "20th-percentile" in json_path.with_suffix(".md").read_text()


@pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")
def test_one_thread_timed_by_cpu_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--threads 1 --clock thread`: every system on the calling thread, timed by its CPU
    time (what other processes' work on a shared machine does not add to); the file says
    so in its name and settings. The thread clock without one thread is refused."""
    threads = torch.get_num_threads()
    try:
        assert bench_run.main(["--cpu", "--suite", "models", "--quick", "--only",
                               "pixel_shuffle_64K", "--clock", "thread"]) == 2
        code = bench_run.main(["--cpu", "--suite", "models", "--quick", "--only",
                               "pixel_shuffle_64K", "--cpu-repeats", "1", "--cpu-flush-mb",
                               "0", "--threads", "1", "--clock", "thread", "--out",
                               str(tmp_path)])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*-cpu-models-1t-cputime.json")
    report = json.loads(json_path.read_text())
    assert report["settings"]["threads"] == 1 and report["settings"]["clock"] == "thread"
    assert "time.thread_time" in report["settings"]["timer"]
    assert report["runs"][0][0]["systems"]["stridec"]["ms"] > 0


@pytest.mark.skipif(not cpu_backend.available(), reason="no C compiler")
def test_tune_times_a_tuned_system_beside_the_untuned(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """`--tune SECONDS`: stridec compiled with `tune=SECONDS` is a system of the row,
    "tuned", timed in the same rounds; the row says what its first call measured and the
    untuned over tuned ratio, the page has its "Measured choice" section."""
    code = bench_run.main(["--cpu", "--suite", "models", "--quick", "--only",
                           "pixel_shuffle_64K", "--cpu-repeats", "1", "--cpu-flush-mb", "0",
                           "--tune", "0.5", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    (json_path,) = tmp_path.glob("*-cpu-models-tune.json")
    report = json.loads(json_path.read_text())
    assert report["settings"]["tune"] == 0.5
    (row,) = report["runs"][0]
    assert set(row["systems"]) == {"stridec", "eager", "tuned"}
    assert set(row["tune"]) == {"measured", "wisdom", "seconds", "first_call_s", "changed"}
    assert row["tuned_vs_untuned"] == pytest.approx(
        row["systems"]["stridec"]["ms"] / row["systems"]["tuned"]["ms"])
    page = json_path.with_suffix(".md").read_text()
    assert "## Measured choice" in page and "| `pixel_shuffle_64K` |" in page
