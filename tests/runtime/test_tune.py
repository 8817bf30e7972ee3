"""Measured choice of copy plans, `stridec.compile(graph, tune=...)` (`runtime/tune.py`,
docs/cpu.md "Measured choice"): off by default and then the model's plan, on it times the
ranked plans and keeps the winner as wisdom in the disk cache, reused by later graphs
and processes, within its budget; unreadable wisdom falls back with a warning; whatever
plan runs, the result is torch's. No test here times anything: the tuner's clock is
replaced where a test needs its decisions, each call of a plan advancing it by that
plan's made-up cost (speed lives in bench/run.py --tune)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import stridec
from stridec.compiler.codegen.c import plan as c_plan
from stridec.errors import CallError
from stridec.runtime import launch, tune
from stridec.runtime.backends import cpu
from stridec.runtime.cache import MEMORY_CACHE

pytestmark = pytest.mark.skipif(not cpu.available(), reason="needs a C compiler")

SHAPE = (300, 500)  # a transpose of float32 the model ranks 4 plans for


@pytest.fixture(scope="module", autouse=True)
def _library() -> None:
    """The planned library of 4-byte elements loaded once, from the run's cache (tests
    below move the cache to an empty folder; a loaded library is not built again)."""
    cpu.load_unit(c_plan.plan_unit_source(4))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    yield tmp_path
    MEMORY_CACHE.clear_memory()


def transpose_graph(name: str = "tr", shape: tuple[int, ...] = SHAPE,
                    dims: tuple[int, ...] = (1, 0), to: str | None = None) -> stridec.Graph:
    """The transpose of `dims`, cast to `to` as it is moved where given."""
    g = stridec.Graph(name)
    x = g.input("x", shape, "float32")
    y = x.permute(*dims)
    g.output(y.contiguous().to(to) if to else y.contiguous())
    return g


def blocks_of(shape: tuple[int, ...] = SHAPE, dims: tuple[int, ...] = (1, 0),
              to: str | None = None) -> list[tuple[int, ...]]:
    """The argument blocks of the ranked plans of the graph's copy, best first."""
    seen: list[list[tuple[int, ...]]] = []

    def record(spec: Any, plans: list[Any]) -> Any:
        seen.append([c_plan.plan_params(p) for p in plans])
        return plans[0]

    from stridec.compiler.codegen.lower import lower_to_program
    from stridec.compiler.pass_manager import DEFAULT_PIPELINE, PassManager

    graph = transpose_graph("probe", shape, dims, to)
    PassManager.parse(DEFAULT_PIPELINE).run(graph)
    with c_plan.choosing(record):
        lower_to_program(graph, "c")
    assert len(seen) == 1 and len(seen[0]) >= 2, "the copy needs two ranked plans here"
    return seen[0]


def program_blocks(fn: stridec.CompiledGraph, t: torch.Tensor) -> list[tuple[int, ...]]:
    """The argument blocks the program of this call runs."""
    program = fn.plan_for(t).program
    return [tuple(params) for k in program.kernels for _s, _a, _b, params in k.calls]


def check(fn: stridec.CompiledGraph, shape: tuple[int, ...] = SHAPE,
          dims: tuple[int, ...] = (1, 0)) -> torch.Tensor:
    t = torch.randn(shape)
    assert torch.equal(fn(t), t.permute(*dims).contiguous())
    return t


@pytest.fixture
def costs(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[float]], list[int]]:
    """`costs([c0, c1, ...])`: from now on the tuner's clock advances by c_k for each call
    of plan k (and by nothing else); returns the list of plans called, in order."""
    now = [0.0]
    called: list[int] = []
    original = launch.planned_copy_runs

    def install(per_plan: list[float]) -> list[int]:
        def runs(elem_bytes: int, blocks: Any, src: Any, dst: Any, cast: Any = ()) -> list[Any]:
            real = original(elem_bytes, blocks, src, dst, cast)

            def timed(k: int) -> Callable[[], None]:
                def run() -> None:
                    real[k]()
                    called.append(k)
                    now[0] += per_plan[k]
                return run
            return [timed(k) for k in range(len(real))]

        monkeypatch.setattr(launch, "planned_copy_runs", runs)
        monkeypatch.setattr(tune, "clock", lambda: now[0])
        return called

    return install


def wisdom_files(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "wisdom").glob("*.json"))


# --------------------------------------------------------------------------- off and on


def test_off_by_default_runs_the_models_plan_and_reads_no_wisdom(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    """Without `tune`, nothing is timed and a wisdom entry that chose another plan is
    not read: the program runs the model's first plan."""
    blocks = blocks_of()
    called = costs([1.0, 0.1, 1.0, 1.0][:len(blocks)])
    tuned = stridec.compile(transpose_graph("a"), tune=100.0)
    t = check(tuned)
    assert program_blocks(tuned, t) == [blocks[1]] and wisdom_files(cache_dir)
    called.clear()
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(transpose_graph("b"))
    assert fn.tune is None
    t = check(fn)
    assert program_blocks(fn, t) == [blocks[0]]
    assert called == [] and fn.stats.tuned == fn.stats.wisdom_hits == 0


def test_on_times_the_ranked_plans_and_keeps_the_faster(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    blocks = blocks_of()
    n = len(blocks)
    called = costs([1.0] * (n - 1) + [0.5])  # the model's last plan takes half the time
    fn = stridec.compile(transpose_graph(), tune=100.0)
    t = check(fn)
    assert program_blocks(fn, t) == [blocks[-1]]
    assert fn.stats.tuned == 1 and fn.stats.wisdom_hits == 0
    assert set(called) == set(range(n))  # every plan was timed
    # Rounds in rotated order: each plan comes first in some round.
    rounds = [called[1 + r * n:1 + (r + 1) * n] for r in range(len(called) // n)]
    assert {r[0] for r in rounds if len(r) == n} == set(range(n))
    (entry,) = wisdom_files(cache_dir)
    assert tuple(json.loads(entry.read_text())["block"]) == blocks[-1]


def test_a_small_gain_keeps_the_models_plan(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    """A plan 3 % faster than the model's first does not replace it (MIN_GAIN, 5 %)."""
    blocks = blocks_of()
    costs([1.0] + [0.97] * (len(blocks) - 1))
    fn = stridec.compile(transpose_graph(), tune=100.0)
    t = check(fn)
    assert program_blocks(fn, t) == [blocks[0]] and fn.stats.tuned == 1
    assert wisdom_files(cache_dir)  # the model's plan, measured, is remembered too


@pytest.mark.parametrize("winner", range(4))
def test_whatever_plan_wins_the_result_is_torchs(
        cache_dir: Path, costs: Callable[[list[float]], list[int]], winner: int) -> None:
    """Each ranked plan made the winner in turn, on a rank-2 and a rank-4 transpose."""
    for shape, dims in ((SHAPE, (1, 0)), ((5, 7, 9, 11), (3, 1, 0, 2))):
        blocks = blocks_of(shape, dims)
        if winner >= len(blocks):
            continue
        costs([0.5 if k == winner else 1.0 for k in range(len(blocks))])
        fn = stridec.compile(transpose_graph(f"w{winner}", shape, dims), tune=100.0)
        t = check(fn, shape, dims)
        assert program_blocks(fn, t) == [blocks[winner]]
        for other in (t.t().contiguous().t(),) if len(shape) == 2 else ():
            assert torch.equal(fn(other), other.permute(*dims).contiguous())


@pytest.mark.parametrize("winner", range(4))
def test_casts_are_measured_and_whatever_plan_wins_the_bits_are_torchs(
        cache_dir: Path, costs: Callable[[list[float]], list[int]], winner: int) -> None:
    """A transposing cast's ranked plans are timed as a copy's (on its pair's library),
    each made the winner in turn, from NaN payloads, infinities and subnormals."""
    shape, dims = (5, 7, 9, 11), (3, 1, 0, 2)
    blocks = blocks_of(shape, dims, "float16")
    if winner >= len(blocks):
        return
    called = costs([0.5 if k == winner else 1.0 for k in range(len(blocks))])
    fn = stridec.compile(transpose_graph(f"c{winner}", shape, dims, "float16"), tune=100.0)
    t = (torch.randint(-(1 << 31), 1 << 31, shape, dtype=torch.int64).to(torch.int32)
         .view(torch.float32))
    want = t.permute(*dims).contiguous().to(torch.float16)
    assert torch.equal(fn(t).view(torch.int16), want.view(torch.int16))
    assert program_blocks(fn, t) == [blocks[winner]]
    assert fn.stats.tuned == 1 and set(called) == set(range(len(blocks)))


def test_tune_is_checked() -> None:
    g = transpose_graph()
    for bad in ("yes", -1.0, float("nan"), float("inf"), [1]):
        with pytest.raises(CallError, match="tune must be False, True or a budget"):
            stridec.compile(g, tune=bad)  # type: ignore[arg-type]
    assert stridec.compile(g, tune=True).tune == tune.DEFAULT_BUDGET
    assert stridec.compile(g, tune=0).tune == 0.0
    assert stridec.compile(g).tune is None


# --------------------------------------------------------------------------- the budget


def test_the_budget_bounds_the_time_measured(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    """Each call costs one second of the tuner's clock: a budget of 10 seconds makes
    exactly 10 calls (the warm one and whole rounds while they fit), never an 11th."""
    blocks = blocks_of()
    n = len(blocks)
    called = costs([1.0] * n)
    budget = 1 + tune.MIN_ROUNDS * n + 1  # the warm call, MIN_ROUNDS rounds, one call more
    fn = stridec.compile(transpose_graph(), tune=float(budget))
    check(fn)
    assert len(called) == budget and fn.stats.tune_seconds == budget
    assert fn.stats.tuned == 1 and wisdom_files(cache_dir)


def test_a_budget_too_small_keeps_the_models_plan_in_memory_only(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    """Too little budget for MIN_ROUNDS rounds: the model's plan, the program not kept on
    disk, and the wisdom saying at which budget it was cut, so a later call with no more
    budget times nothing; one with more measures again. Budget 0 calls nothing."""
    blocks = blocks_of()
    n = len(blocks)
    called = costs([1.0] * (n - 1) + [0.5])
    fn = stridec.compile(transpose_graph(), tune=float(1 + n))
    t = check(fn)
    assert program_blocks(fn, t) == [blocks[0]]
    assert len(called) <= 1 + n and fn.stats.tune_seconds <= 1 + n
    assert fn.stats.tuned == 0 and not list((cache_dir / "plans").glob("*.json"))
    (entry,) = wisdom_files(cache_dir)
    assert json.loads(entry.read_text())["cut_at"] == 1 + n
    for name, budget, runs in (("same", 1 + n, [blocks[0]]), ("zero", 0, [blocks[0]]),
                               ("more", 100.0, [blocks[-1]])):
        called.clear()
        MEMORY_CACHE.clear_memory()
        fn = stridec.compile(transpose_graph(name), tune=budget)
        t = check(fn)
        assert program_blocks(fn, t) == runs
        assert (called == []) == (name != "more")
    assert "cut_at" not in json.loads(entry.read_text())


# --------------------------------------------------------------------------- wisdom


def test_wisdom_serves_another_graph_without_timing(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    """A second graph with the same copy (another name, so another plan entry) takes the
    first one's choice from the wisdom, even with no budget (`tune=0`)."""
    blocks = blocks_of()
    called = costs([1.0] * (len(blocks) - 1) + [0.5])
    check(stridec.compile(transpose_graph("first"), tune=100.0))
    called.clear()
    fn = stridec.compile(transpose_graph("second"), tune=0)
    t = check(fn)
    assert called == [] and program_blocks(fn, t) == [blocks[-1]]
    assert fn.stats.wisdom_hits == 1 and fn.stats.tuned == 0


def _damage_garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xffnot json")


def _damage_other_key(path: Path) -> None:
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "key": "0" * 64}))


def _damage_foreign_block(path: Path) -> None:
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "block": [1, 2, 3]}))


def _damage_no_block(path: Path) -> None:
    entry = json.loads(path.read_text())
    del entry["block"]
    path.write_text(json.dumps(entry))


@pytest.mark.parametrize("damage", [_damage_garbage, _damage_other_key,
                                    _damage_foreign_block, _damage_no_block])
def test_unreadable_wisdom_falls_back_with_one_warning(
        cache_dir: Path, costs: Callable[[list[float]], list[int]],
        damage: Callable[[Path], None]) -> None:
    """A damaged entry: one RuntimeWarning, the entry removed, and the model's plan where
    there is no budget to measure again (then measured again and rewritten)."""
    blocks = blocks_of()
    called = costs([1.0] * (len(blocks) - 1) + [0.5])
    check(stridec.compile(transpose_graph("first"), tune=100.0))
    (entry,) = wisdom_files(cache_dir)
    damage(entry)
    MEMORY_CACHE.clear_memory()
    called.clear()
    with pytest.warns(RuntimeWarning, match="wisdom entry .* is unreadable") as caught:
        fn = stridec.compile(transpose_graph("second"), tune=0)
        t = check(fn)
    assert len([w for w in caught if "wisdom" in str(w.message)]) == 1
    assert program_blocks(fn, t) == [blocks[0]] and called == []
    assert not entry.exists()
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(transpose_graph("third"), tune=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = check(fn)
    assert program_blocks(fn, t) == [blocks[-1]] and fn.stats.tuned == 1
    assert entry.exists()


def test_a_damaged_plan_entry_is_rebuilt_from_the_wisdom(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    blocks = blocks_of()
    called = costs([1.0] * (len(blocks) - 1) + [0.5])
    check(stridec.compile(transpose_graph(), tune=100.0))
    (plan_entry,) = (cache_dir / "plans").glob("*.json")
    plan_entry.write_text("{")
    MEMORY_CACHE.clear_memory()
    called.clear()
    fn = stridec.compile(transpose_graph(), tune=100.0)
    t = check(fn)
    assert fn.stats.compiles == 1 and fn.stats.wisdom_hits == 1 and called == []
    assert program_blocks(fn, t) == [blocks[-1]]


def test_the_cache_tool_counts_and_clears_wisdom(
        cache_dir: Path, costs: Callable[[list[float]], list[int]]) -> None:
    from stridec.runtime import cache

    blocks = blocks_of()
    costs([1.0] * len(blocks))
    check(stridec.compile(transpose_graph(), tune=100.0))
    assert [e.kind for e in cache.disk_entries()].count("wisdom") == 1
    cache.clear()
    assert not wisdom_files(cache_dir)


CHILD = r"""
import dataclasses, json, sys
import torch, stridec
g = stridec.Graph(sys.argv[1])
x = g.input("x", (300, 500), "float32")
g.output(x.t().contiguous())
fn = stridec.compile(g, tune=float(sys.argv[2]))
t = torch.randn(300, 500)
ok = torch.equal(fn(t), t.t().contiguous())
program = fn.plan_for(t).program
blocks = [list(p) for k in program.kernels for *_, p in k.calls]
print(json.dumps({"ok": ok, "stats": dataclasses.asdict(fn.stats), "blocks": blocks}))
"""


def test_wisdom_is_reused_by_another_process(tmp_path: Path) -> None:
    """Process 1 measures (real timing: which plan wins is not asserted); process 2, a
    graph of another name with no budget, runs the same plan from the wisdom. (Their
    cache starts with the libraries built: copied from this run's.)"""
    from stridec.compiler.codegen.c.pool import POOL_C_SOURCE

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["STRIDEC_CACHE_DIR"] = str(tmp_path)
    units = tmp_path / "kernels" / "c"
    units.mkdir(parents=True)
    cpu.load_pool()
    for source in (POOL_C_SOURCE, c_plan.plan_unit_source(4)):
        (kept,) = cpu.source_files(source)
        for suffix in ("", ".so", ".so.sha256"):
            path = kept[:-2] + suffix if suffix else kept
            shutil.copy(path, units)

    def child(name: str, budget: float) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", CHILD, name, str(budget)], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = child("across_1", 30.0)
    second = child("across_2", 0.0)
    assert first["ok"] and second["ok"]
    assert first["stats"]["tuned"] == 1 and second["stats"]["tuned"] == 0
    assert second["stats"]["wisdom_hits"] == 1
    assert second["blocks"] == first["blocks"]


def test_derived_graphs_keep_tune() -> None:
    """The torch operator of a tuned graph, and its backward, are tuned alike; an untuned
    graph's are not."""
    import stridec.torch  # noqa: F401 -- the operator factory

    op = stridec.compile(transpose_graph("derived"), tune=5.0).as_torch_op(
        "stridec_tune_test::transpose")
    assert op.compiled.tune == 5.0 and op.backward_op.compiled.tune == 5.0
    plain = stridec.compile(transpose_graph("derived_plain")).as_torch_op(
        "stridec_tune_test::transpose_plain")
    assert plain.compiled.tune is None and plain.backward_op.compiled.tune is None
