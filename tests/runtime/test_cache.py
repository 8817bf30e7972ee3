"""The plan caches: the bounded in-process LRU and the on-disk store under
`STRIDEC_CACHE_DIR` (docs/design.md#execution-and-backends): reuse across processes,
atomic writes, damaged entries discarded and rebuilt, and a cache directory that cannot be
written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import stridec
from stridec.compiler.codegen.program import BufferSpec, KernelInfo, Launch, OutputSpec, Program
from stridec.runtime import compile as compile_module
from stridec.runtime.backends import triton as launch
from stridec.runtime.cache import MEMORY_CACHE, PlanCache
from stridec.runtime.specialization import source_files as specialization_sources


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An empty cache directory, and an empty memory cache before and after."""
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(tmp_path))
    MEMORY_CACHE.clear_memory()
    yield tmp_path
    MEMORY_CACHE.clear_memory()


def nchw4_graph() -> stridec.Graph:
    g = stridec.Graph("cached")
    x = g.input("x", (2, 3, 4, 5), "int8")
    g.output(x.pack("NCHW4"), x.permute(0, 2, 3, 1).contiguous())
    return g


def nchw4(t: torch.Tensor) -> torch.Tensor:
    """NCHW4 in torch: C = 3 padded to 4 with zeros, split, the block moved innermost."""
    n, c, h, w = t.shape
    padded = torch.nn.functional.pad(t, (0, 0, 0, 0, 0, 4 - c))
    return padded.reshape(n, 1, 4, h, w).permute(0, 1, 3, 4, 2).contiguous()


def run_and_check(fn: stridec.CompiledGraph) -> None:
    t = torch.arange(120, dtype=torch.int8).reshape(2, 3, 4, 5)
    packed, nhwc = fn(t)
    assert torch.equal(packed, nchw4(t))
    assert torch.equal(nhwc, t.permute(0, 2, 3, 1).contiguous())


def entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "plans").glob("*.json"))


# --------------------------------------------------------------------------- new processes

CHILD = r"""
import dataclasses, json, sys
import torch, stridec
from stridec.runtime.specialization import versions as _versions
if sys.argv[1] == "forbid":  # the second process must not need the compiler at all
    import stridec.compiler.codegen.lower as lower
    import stridec.compiler.pass_manager as pm
    def forbidden(*args, **kwargs):
        raise AssertionError("the pass pipeline or code generation ran")
    pm.PassManager.run = forbidden
    lower.lower_to_program = forbidden
g = stridec.Graph("cached")
x = g.input("x", (2, 3, 4, 5), "int8")
g.output(x.pack("NCHW4"), x.permute(0, 2, 3, 1).contiguous())
fn = stridec.compile(g)
t = torch.arange(120, dtype=torch.int8).reshape(2, 3, 4, 5)
padded = torch.nn.functional.pad(t, (0, 0, 0, 0, 0, 1))
want = padded.reshape(2, 1, 4, 4, 5).permute(0, 1, 3, 4, 2).contiguous()
error = None
try:
    for _ in range(2):
        packed, nhwc = fn(t)
        assert torch.equal(packed, want)
        assert torch.equal(nhwc, t.permute(0, 2, 3, 1).contiguous())
except AssertionError as e:
    error = str(e)
print(json.dumps({"versions": _versions(), "error": error,
                  "stats": dataclasses.asdict(fn.stats),
                  "passes_imported": "stridec.compiler.passes" in sys.modules}))
"""


def run_child(cache_dir: Path, mode: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["STRIDEC_CACHE_DIR"] = str(cache_dir)
    done = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_key_hashes_the_c_library_too() -> None:
    # A cached program holds its kernels' C text: a change to lib/*.c or *.h alone must
    # not reuse programs built from the old text.
    names = {path.name for path in specialization_sources()}
    assert {"copy_plan.c", "copy_abi.h", "copy_micro.h", "specialization.py"} <= names


def test_a_second_process_reuses_the_disk_entry(cache_dir: Path) -> None:
    """Process 1 compiles and writes the entry; process 2, with the pass pipeline and
    code generation made to fail, runs from the disk entry alone."""
    for attempt in range(3):
        folder = cache_dir / f"attempt{attempt}"  # empty for each attempt
        first = run_child(folder, "compile")
        second = run_child(folder, "forbid")
        if first["versions"] == second["versions"]:
            break
        # stridec's sources changed between the two processes (the key hashes them, so
        # the entry was rightly not reused): only in a tree being edited; try again.
    else:
        pytest.skip("stridec's sources kept changing between the two processes")
    assert first["error"] is None
    stats = first["stats"]
    assert stats["compiles"] == stats["pipeline_runs"] == stats["codegen_runs"] == 1
    assert stats["disk_hits"] == 0 and stats["cache_hits"] == 1 and stats["launches"] == 4
    assert len(entries(folder)) == 1

    assert second["error"] is None
    assert first["passes_imported"] and not second["passes_imported"]  # not even loaded
    stats = second["stats"]
    assert stats["compiles"] == stats["pipeline_runs"] == stats["codegen_runs"] == 0
    assert stats["disk_hits"] == 1 and stats["launches"] == 4


# --------------------------------------------------------------------------- in process


def test_memory_then_disk_then_compile(cache_dir: Path) -> None:
    fn = stridec.compile(nchw4_graph())
    run_and_check(fn)
    assert (fn.stats.compiles, fn.stats.disk_hits) == (1, 0)
    (entry,) = entries(cache_dir)
    envelope = json.loads(entry.read_text())
    assert envelope["key"] == entry.stem

    fn = stridec.compile(nchw4_graph())  # a new CompiledGraph: the memory cache serves it
    run_and_check(fn)
    assert (fn.stats.compiles, fn.stats.cache_hits, fn.stats.disk_hits) == (0, 1, 0)

    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(nchw4_graph())  # only the disk has it
    run_and_check(fn)
    assert (fn.stats.compiles, fn.stats.disk_hits, fn.stats.pipeline_runs) == (0, 1, 0)
    assert fn.stats.codegen_runs == 0


def test_the_key_separates_graphs_specializations_and_pipelines(cache_dir: Path) -> None:
    t = torch.zeros(2, 3, 4, 5, dtype=torch.int8)
    fn = stridec.compile(nchw4_graph())
    fn.plan_for(t)
    fn.plan_for(t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2))  # NHWC memory
    other = stridec.Graph("cached")
    other.output(other.input("x", (2, 3, 4, 5), "int8").pack("NHWC"))
    stridec.compile(other).plan_for(t)
    stridec.compile(nchw4_graph(), pipeline="canonicalize,fold-views,lower-formats,"
                                            "fuse-copies,eliminate-copies,plan-memory").plan_for(t)
    assert len(entries(cache_dir)) == 4


# --------------------------------------------------------------------------- damaged entries


def _damage_truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _damage_empty(path: Path) -> None:
    path.write_bytes(b"")


def _damage_binary(path: Path) -> None:
    path.write_bytes(b"\xff\xfe\x00garbage\x80")


def _damage_foreign(path: Path) -> None:
    """A whole, valid entry — of another key."""
    envelope = json.loads(path.read_text())
    envelope["key"] = "0" * 64
    path.write_text(json.dumps(envelope))


def _damage_not_an_object(path: Path) -> None:
    path.write_text("[1, 2, 3]")


def _damage_flipped_source(path: Path) -> None:
    """Still valid JSON with the right key, but a kernel's source changed: the stored
    checksum catches it (without it the kernel would fail to compile — or worse)."""
    envelope = json.loads(path.read_text())
    program = json.loads(envelope["program"])
    source = program["kernels"][0]["source"]
    program["kernels"][0]["source"] = source[:9] + chr(ord(source[9]) ^ 1) + source[10:]
    envelope["program"] = json.dumps(program, sort_keys=True)
    path.write_text(json.dumps(envelope))


def _damage_inconsistent(path: Path) -> None:
    """Valid JSON, right key and checksum, but a launch of a kernel that does not exist."""
    from stridec.runtime.cache import _digest

    envelope = json.loads(path.read_text())
    program = json.loads(envelope["program"])
    program["launches"][0]["kernel"] = 7
    envelope["program"] = json.dumps(program, sort_keys=True)
    envelope["digest"] = _digest(envelope["program"])
    path.write_text(json.dumps(envelope))


def _damage_wrong_format(path: Path) -> None:
    from stridec.runtime.cache import _digest

    envelope = json.loads(path.read_text())
    envelope["program"] = json.dumps({"format": 999})
    envelope["digest"] = _digest(envelope["program"])
    path.write_text(json.dumps(envelope))


DAMAGE = [_damage_truncated, _damage_empty, _damage_binary, _damage_foreign,
          _damage_not_an_object, _damage_flipped_source, _damage_inconsistent,
          _damage_wrong_format]


@pytest.mark.parametrize("damage", DAMAGE, ids=[d.__name__[8:] for d in DAMAGE])
def test_a_damaged_entry_is_discarded_and_rebuilt(cache_dir: Path, damage: Any) -> None:
    run_and_check(stridec.compile(nchw4_graph()))
    (entry,) = entries(cache_dir)
    good = json.loads(entry.read_text())
    damage(entry)
    MEMORY_CACHE.clear_memory()

    fn = stridec.compile(nchw4_graph())
    run_and_check(fn)
    assert (fn.stats.compiles, fn.stats.disk_hits) == (1, 0)
    (rebuilt,) = entries(cache_dir)
    assert json.loads(rebuilt.read_text()) == good  # rewritten whole, and deterministic

    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(nchw4_graph())
    run_and_check(fn)
    assert (fn.stats.compiles, fn.stats.disk_hits) == (0, 1)


def test_a_damaged_kernel_file_is_rewritten(cache_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "_loaded", {})  # no kernel loaded yet, as in a new process
    run_and_check(stridec.compile(nchw4_graph(), backend="interpret"))
    kernels = sorted((cache_dir / "kernels").glob("k_*.py"))
    assert len(kernels) == 2
    sources = {p: p.read_text() for p in kernels}
    for p in kernels:
        p.write_text("this is not python (")
    monkeypatch.setattr(launch, "_loaded", {})
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(nchw4_graph(), backend="interpret")
    run_and_check(fn)
    assert fn.stats.disk_hits == 1
    assert {p: p.read_text() for p in kernels} == sources


def test_a_damaged_c_library_is_rebuilt(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cpu backend's libraries: a damaged one fails its checksum and is rebuilt."""
    from stridec.runtime.backends import cpu as build

    # The builtin call module is built once per process, into whichever cache is current
    # then: it is not one of this graph's libraries, so it is left out of the count.
    build.calls_module()
    builtin = set((cache_dir / "kernels" / "c").glob("*.so"))
    monkeypatch.setattr(build, "_units", {})
    # Philox: its C unit builds in about a second, a copy's in several
    g = stridec.Graph("damaged")
    g.output(*g.philox(g.input("state", (6,), "uint32"), (4, 5)))
    start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)

    def run_and_check(fn: stridec.CompiledGraph) -> None:
        for a, b in zip(fn(start.clone()), stridec.run_reference(g, start.clone()), strict=True):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))

    run_and_check(stridec.compile(g, backend="cpu"))
    libraries = sorted(set((cache_dir / "kernels" / "c").glob("*.so")) - builtin)
    assert libraries
    good = {p: p.read_bytes() for p in libraries}
    for p in libraries:  # a new file over the name: this process still maps the old one
        damaged = p.with_suffix(".damaged")
        damaged.write_bytes(b"\x7fELF damaged")
        damaged.replace(p)
    monkeypatch.setattr(build, "_units", {})
    MEMORY_CACHE.clear_memory()
    runs = build.BUILD_STATS.compiler_runs
    fn = stridec.compile(g, backend="cpu")
    run_and_check(fn)
    assert fn.stats.disk_hits == 1
    assert build.BUILD_STATS.compiler_runs - runs == len(libraries)
    assert all(p.read_bytes() != b"\x7fELF damaged" and len(p.read_bytes()) > 1000
               for p in good)


def test_writes_are_atomic_and_leave_no_temp_files(cache_dir: Path) -> None:
    """Threads writing and reading one key never see a partial entry (each write is a
    temp file renamed over the entry), and no temp file is left behind."""
    cache = PlanCache()
    fn = stridec.compile(nchw4_graph())
    program = fn.plan_for(torch.zeros(2, 3, 4, 5, dtype=torch.int8)).program
    key = "f" * 64
    cache.put_disk(key, program)
    failures: list[str] = []

    def writer() -> None:
        for _ in range(30):
            cache.put_disk(key, program)

    def reader() -> None:
        for _ in range(60):
            got = cache.get_disk(key)
            if got is None or got.to_json() != program.to_json():
                failures.append("a reader saw a missing or partial entry")

    threads = [threading.Thread(target=f) for f in (writer, writer, reader, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    leftovers = [p.name for p in (cache_dir / "plans").iterdir() if not p.name.endswith(".json")
                 or p.name.startswith(".tmp")]
    assert leftovers == []


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_an_unwritable_cache_dir_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            backend: str) -> None:
    """STRIDEC_CACHE_DIR names a file: plans stay in memory and kernels (Triton modules or
    C libraries) go to a private temp folder, each with a warning; results are right."""
    from stridec.runtime.backends import cpu

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(blocker))
    monkeypatch.setattr(launch, "_loaded", {})
    monkeypatch.setattr(launch, "_warned", set())
    monkeypatch.setattr(cpu, "_units", {})  # as in a new process
    MEMORY_CACHE.clear_memory()
    try:
        g = stridec.Graph("unwritable")  # a graph no other test compiles
        # Philox: its C unit builds in a second, a copy's in several
        g.output(*g.philox(g.input("state", (6,), "uint32"), (3, 5)))
        fn = stridec.compile(g, backend=backend)
        start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = fn(start.clone())
        for a, b in zip(got, stridec.run_reference(g, start.clone()), strict=True):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert any("memory only" in m for m in messages)
        assert any("not writable" in m and "kernels" in m for m in messages)
        assert fn.stats.compiles == 1
    finally:
        MEMORY_CACHE.clear_memory()


# --------------------------------------------------------------------------- bounds


def _program(tag: int) -> Program:
    return Program(0, [BufferSpec(1, "float32")], [KernelInfo("copy", f"k{tag}", "", (1,), {})],
                   [Launch(0, (0, 0), (None, None))], [OutputSpec(0, (), (), 0)], f"ir {tag}")


def test_the_memory_cache_is_a_bounded_lru() -> None:
    cache = PlanCache(capacity=2)
    a, b, c = _program(1), _program(2), _program(3)
    cache.put_memory("a", a)
    cache.put_memory("b", b)
    assert cache.get_memory("a") is a  # a is now the most recent
    cache.put_memory("c", c)  # evicts b, the least recent
    assert cache.get_memory("b") is None
    assert cache.get_memory("a") is a and cache.get_memory("c") is c


def test_compiled_graphs_respect_the_bounds(cache_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Five specializations through a memory cache of 2 and a per-graph front of 3."""
    monkeypatch.setattr(MEMORY_CACHE, "capacity", 2)
    monkeypatch.setattr(compile_module, "LOCAL_CAPACITY", 3)
    g = stridec.Graph("bounded")
    x = g.input("x", (2, 3), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g)
    storage = torch.randn(20)
    for offset in range(5):
        t = torch.as_strided(storage, (2, 3), (3, 1), offset)
        assert torch.equal(fn(t), t.t().contiguous())
        assert len(MEMORY_CACHE._memory) <= 2
        assert len(fn._programs) <= 3
    assert fn.stats.compiles == 5
    t = torch.as_strided(storage, (2, 3), (3, 1), 0)  # evicted from both: read from disk
    assert torch.equal(fn(t), t.t().contiguous())
    assert fn.stats.compiles == 5 and fn.stats.disk_hits == 1


# --------------------------------------------------------------------------- threads


def test_threads_share_one_compiled_graph(cache_dir: Path) -> None:
    """Four threads call one CompiledGraph with two specializations at once: every
    result is right (interpreted kernels take turns: Triton's interpreter patches global
    state) and each specialization compiles once."""
    g = stridec.Graph("threads")
    x = g.input("x", (16, 12), "float32")
    g.output(x.t().contiguous(), x.flip(1).contiguous())
    fn = stridec.compile(g)
    failures: list[str] = []

    def work() -> None:
        try:
            for i in range(6):
                t = torch.randn(16, 12) if i % 2 else torch.randn(12, 16).t()
                a, b = fn(t)
                if not (torch.equal(a, t.t().contiguous()) and torch.equal(b, t.flip(1))):
                    failures.append("wrong result")
        except Exception as e:  # noqa: BLE001 - report every failure of every thread
            failures.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert fn.stats.compiles == 2 and fn.stats.launches == 4 * 6 * 2 - 4 * 3


def test_a_cpu_program_read_back_from_disk_runs_without_rebuilding(cache_dir: Path) -> None:
    """A C program (copies and Philox) passes the checks of a disk entry: a new
    CompiledGraph finds it on disk and compiles nothing."""
    g = stridec.Graph("cpu_disk")
    s = g.input("s", (6,), "int32")
    x = g.input("x", (3, 5), "float32")
    bits, state = g.philox(s, (2, 3))
    g.output(x.t().contiguous(), bits, state)
    args = (torch.zeros(6, dtype=torch.int32), torch.randn(3, 5))
    first = stridec.compile(g, backend="cpu")
    want = first(*args)
    MEMORY_CACHE.clear_memory()
    again = stridec.compile(g, backend="cpu")
    got = again(*args)
    assert (again.stats.compiles, again.stats.disk_hits) == (0, 1)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
