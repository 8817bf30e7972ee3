"""Faults of the on-disk cache (`STRIDEC_CACHE_DIR`) that tests/runtime/test_cache.py does
not already cover. Proven there: truncated, empty, binary, non-object, checksum-failing,
inconsistent and wrong-format entries and an entry of another key are discarded and
rebuilt; a damaged kernel file is rewritten; writes are atomic; a cache path that is a
file falls back to memory.

Here:
- an entry written by another stridec, triton or torch version, or for another device,
  is never used (each test first shows that the planted entry *would* be used by that
  version, so the test can fail);
- foreign files in the cache folder (unrelated files, a leftover temp file of a writer
  that died, a folder where an entry belongs) are left alone and cost nothing;
- a cache folder that cannot be created or written: plans in memory, one warning each
  for plans and for kernels however many graphs compile; a read-only folder (skipped
  where the tests run as root, who writes anyway); a missing folder is created;
- two processes compiling the same graph at the same moment both succeed, and the entry
  they leave is whole and serves a third process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import stridec
from stridec.runtime import specialization as specialization_module
from stridec.runtime.backends import cpu as c_build
from stridec.runtime.backends import triton as loader
from stridec.runtime.cache import MEMORY_CACHE, _digest


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache folder, and an empty memory cache before and after."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(folder))
    MEMORY_CACHE.clear_memory()
    yield folder
    MEMORY_CACHE.clear_memory()


def flip_graph(dim: int, name: str = "faults") -> stridec.Graph:
    g = stridec.Graph(name)
    x = g.input("x", (3, 5), "float32")
    g.output(x.flip(dim).contiguous())
    return g


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "plans").glob("*.json"))


def sample() -> torch.Tensor:
    return torch.arange(15, dtype=torch.float32).reshape(3, 5)


# --------------------------------------------------------------------------- foreign versions

OTHER = {
    "stridec": {"stridec": "0.0.1+0123456789abcdef"},
    "triton": {"triton": "2.0.0"},
    "torch": {"torch": "1.13.0"},
}


def _poison_with_flip1(entry: Path) -> None:
    """Replace the entry's program (of flip(0)) by the program of flip(1), with a valid
    checksum: whoever uses the entry gets flip(1)."""
    other = stridec.compile(flip_graph(1, "other")).plan_for(sample()).program
    envelope = json.loads(entry.read_text())
    envelope["program"] = other.to_json()
    envelope["digest"] = _digest(envelope["program"])
    entry.write_text(json.dumps(envelope))


@pytest.mark.parametrize("component", [*OTHER, "device"])
def test_an_entry_of_another_version_is_not_used(cache_dir: Path, component: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real_versions = specialization_module.versions()
    if component == "device":
        monkeypatch.setattr(specialization_module, "capability", lambda device: "cuda-sm80")
    else:
        monkeypatch.setattr(specialization_module, "versions",
                            lambda: {**real_versions, **OTHER[component]})
    t = sample()
    # Written by "another version": an entry that version would use (shown by poisoning it).
    assert torch.equal(stridec.compile(flip_graph(0))(t), t.flip(0))
    (foreign,) = entries(cache_dir)
    _poison_with_flip1(foreign)
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(flip_graph(0))
    assert torch.equal(fn(t), t.flip(1)) and fn.stats.disk_hits == 1  # it is live for them
    poisoned = foreign.read_bytes()
    before = len(entries(cache_dir))

    monkeypatch.undo()  # this version again
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(cache_dir))
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(flip_graph(0))
    assert torch.equal(fn(t), t.flip(0))
    assert (fn.stats.compiles, fn.stats.disk_hits) == (1, 0)
    assert foreign.read_bytes() == poisoned  # not ours to judge: left as it was
    assert len(entries(cache_dir)) == before + 1  # its own entry, beside the foreign one


# --------------------------------------------------------------------------- foreign files


def test_foreign_files_are_left_alone(cache_dir: Path) -> None:
    """An unrelated file, a temp file of a writer that died, a non-JSON file and a folder
    where this graph's entry belongs: the graph still compiles and runs right, and the
    foreign files are untouched."""
    t = sample()
    stridec.compile(flip_graph(0)).plan_for(t)
    (entry,) = entries(cache_dir)
    entry.unlink()
    entry.mkdir()  # a folder where the entry belongs
    plans = cache_dir / "plans"
    foreign = {
        plans / "README.txt": b"not a plan",
        plans / ".tmp-dead-writer.json": b'{"key": "half a wri',
        plans / ("0" * 64 + ".json.bak"): b"\x00\x01",
        cache_dir / "kernels" / "notes.md": b"# mine",
    }
    for path, data in foreign.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(flip_graph(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the entry cannot be written
        assert torch.equal(fn(t), t.flip(0))
    assert fn.stats.compiles == 1
    assert entry.is_dir()
    assert {p: p.read_bytes() for p in foreign} == foreign


# --------------------------------------------------------------------------- unwritable


def _cache_warnings(caught: list[warnings.WarningMessage]) -> tuple[list[str], list[str]]:
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    plans = [m for m in messages if "memory only" in m]
    kernels = [m for m in messages if "kernel cache directory" in m]
    return plans, kernels


def _run_three_graphs(folder: Path) -> list[warnings.WarningMessage]:
    """Three Philox graphs (their C unit builds in a second, a copy's in several), each
    against the reference backend."""
    start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for sizes, name in (((3, 5), "ro_a"), ((5, 3), "ro_b"), ((3, 5), "ro_c")):
            g = stridec.Graph(name)
            g.output(*g.philox(g.input("state", (6,), "uint32"), sizes))
            fn = stridec.compile(g)
            got, want = fn(start.clone()), stridec.run_reference(g, start.clone())
            for a, b in zip(got, want, strict=True):
                assert torch.equal(a.view(torch.int32), b.view(torch.int32))
            assert fn.stats.compiles == 1
    return caught


def test_a_folder_that_cannot_be_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STRIDEC_CACHE_DIR under a regular file (not even root can create it): three graphs
    compile and run from memory, with one warning for plans and one for kernels."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    folder = blocker / "cache"
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(folder))
    monkeypatch.setattr(loader, "_warned", set())
    monkeypatch.setattr(loader, "_loaded", {})  # kernels are written again, as in a new process
    monkeypatch.setattr(c_build, "_units", {})
    MEMORY_CACHE.clear_memory()
    try:
        plans, kernels = _cache_warnings(_run_three_graphs(folder))
    finally:
        MEMORY_CACHE.clear_memory()
    assert len(plans) == 1 and str(folder) in plans[0]
    assert len(kernels) == 1
    assert not folder.exists()


def test_a_read_only_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "read-only"
    (folder / "plans").mkdir(parents=True)
    (folder / "kernels").mkdir()
    for path in (folder / "plans", folder / "kernels", folder):
        path.chmod(0o500)
    try:
        probe = folder / "plans" / "probe"
        try:
            probe.write_text("")
        except PermissionError:
            pass
        else:
            probe.unlink()
            pytest.skip("running as root: chmod 0o500 does not stop writes (see "
                        "test_a_folder_that_cannot_be_created for the unwritable case)")
        monkeypatch.setenv("STRIDEC_CACHE_DIR", str(folder))
        monkeypatch.setattr(loader, "_warned", set())
        monkeypatch.setattr(loader, "_loaded", {})
        monkeypatch.setattr(c_build, "_units", {})
        MEMORY_CACHE.clear_memory()
        plans, kernels = _cache_warnings(_run_three_graphs(folder))
        assert len(plans) == 1 and len(kernels) == 1
        assert list((folder / "plans").iterdir()) == []
    finally:
        MEMORY_CACHE.clear_memory()
        for path in (folder, folder / "plans", folder / "kernels"):
            path.chmod(0o700)


def test_a_missing_folder_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "not" / "yet" / "there"
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(folder))
    MEMORY_CACHE.clear_memory()
    try:
        plans, kernels = _cache_warnings(_run_three_graphs(folder))
    finally:
        MEMORY_CACHE.clear_memory()
    assert plans == [] and kernels == []
    assert len(entries(folder)) == 3


# --------------------------------------------------------------------------- two processes

CHILD = r"""
import json, os, sys, time
import torch, stridec
from stridec.runtime.specialization import versions as _versions
go = sys.argv[1]
open(sys.argv[2], "w").close()  # ready: imported, about to wait
deadline = time.time() + 120
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.001)
g = stridec.Graph("racing")  # Philox: a C unit of about a second (a copy's takes several)
g.output(*g.philox(g.input("state", (6,), "uint32"), (4, 6, 10)))
fn = stridec.compile(g)
start = torch.tensor([5, 0xFFFFFFFF, 0, 0, 7, 9], dtype=torch.int64).to(torch.uint32)
got, want = fn(start.clone()), stridec.run_reference(g, start.clone())
ok = all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(got, want))
print(json.dumps({"ok": ok, "versions": _versions(), "compiles": fn.stats.compiles,
                  "disk_hits": fn.stats.disk_hits}))
"""


def _child(folder: Path, go: Path, ready: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["STRIDEC_CACHE_DIR"] = str(folder)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(go), str(ready)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict[str, Any]:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_two_processes_compile_the_same_graph_at_once(tmp_path: Path) -> None:
    """Both start, import, and wait on a flag; the flag goes up and both compile the same
    graph at the same moment into one cache folder. Both results are right; the folder
    holds one whole entry and no temp file, and a third process runs from it."""
    folder = tmp_path / "shared"
    go = tmp_path / "go"
    readies = [tmp_path / "ready0", tmp_path / "ready1"]
    children = [_child(folder, go, r) for r in readies]
    deadline = time.time() + 180
    while not all(r.exists() for r in readies):
        assert time.time() < deadline, "the children did not start"
        assert all(c.poll() is None for c in children), "a child died before the race"
        time.sleep(0.01)
    go.touch()
    first, second = (_result(c) for c in children)
    assert first["ok"] and second["ok"]
    if first["versions"] != second["versions"]:
        pytest.skip("stridec's sources changed while the children ran (a tree being edited)")
    assert first["compiles"] + second["compiles"] + first["disk_hits"] + second["disk_hits"] == 2
    (entry,) = entries(folder)
    envelope = json.loads(entry.read_text())
    assert envelope["key"] == entry.stem and envelope["digest"] == _digest(envelope["program"])
    assert [p.name for p in (folder / "plans").iterdir()] == [entry.name]

    third = _result(_child(folder, tmp_path / "go", tmp_path / "ready2"))
    if third["versions"] != first["versions"]:
        pytest.skip("stridec's sources changed while the children ran (a tree being edited)")
    assert third["ok"] and (third["compiles"], third["disk_hits"]) == (0, 1)


# --------------------------------------------------------------------------- disk faults
# Each runs cache_fault_scenarios.py in a process of its own, which builds its kernels (a
# few seconds a process): the CI suite runs a full folder, a noexec one and a killed
# build, `-m slow` the others. Full, read-only and noexec folders are tmpfs mounts in a
# mount namespace of the process's own (`unshare -rm`: unprivileged where the system
# allows user namespaces; skipped where it does not).

SCENARIOS = Path(__file__).with_name("cache_fault_scenarios.py")


def _scenario_env(cache: Path, tmp: Path) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "STRIDEC_CACHE_DIR": str(cache), "TMPDIR": str(tmp),
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}


def _scenario(env: dict[str, str], mounts: str = "", scenario: str = "") -> dict[str, Any]:
    """Run the scenario (after the shell lines `mounts`, in a mount namespace of its own
    where there are any): its warnings, error, builds and whether it finished."""
    command = [sys.executable, str(SCENARIOS), scenario]
    if mounts:
        script = f"set -e\n{mounts}\nexec {' '.join(map(shlex.quote, command))}\n"
        command = ["unshare", "-rm", "sh", "-c", script]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    builds = next(line for line in lines if line.startswith("BUILDS:")).split()
    return {"warnings": [line[9:] for line in lines if line.startswith("WARNING: ")],
            "errors": [line[7:] for line in lines if line.startswith("ERROR: ")],
            "builds": int(builds[1]), "loads": int(builds[3]),
            "done": any(line.startswith("DONE") for line in lines)}


def _mountable(tmp_path: Path) -> None:
    """Skip unless this system lets a process mount a tmpfs in a namespace of its own."""
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    try:
        ok = subprocess.run(["unshare", "-rm", "sh", "-c",
                             f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(probe))}"],
                            capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    if not ok:
        pytest.skip("cannot mount a tmpfs in a user and mount namespace here")


def _tmpfs(folder: Path, options: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    return f"mount -t tmpfs -o {options} tmpfs {shlex.quote(str(folder))}"


@pytest.mark.parametrize("scenario", [
    "", pytest.param("no_room_check", marks=pytest.mark.slow)], ids=["free-space", "writes"])
def test_a_full_cache_folder(tmp_path: Path, scenario: str) -> None:
    """The cache on a full filesystem (a 16 KiB tmpfs, less than any unit's source): the C
    kernels are built in the process's private folder, one warning; the plans live in
    memory, one warning. Found by the free space, or (`writes`) by the writes themselves
    failing with ENOSPC."""
    _mountable(tmp_path)
    cache = tmp_path / "full"
    got = _scenario(_scenario_env(cache, tmp_path), _tmpfs(cache, "size=16k"), scenario)
    assert got["done"] and got["errors"] == [] and got["builds"] > 0
    c_warnings = [w for w in got["warnings"] if "C kernels are built in" in w]
    assert len(c_warnings) == 1 and str(cache) in c_warnings[0], got["warnings"]


@pytest.mark.slow
def test_a_full_cache_and_temp_folder_is_a_build_error_saying_what_to_change(
        tmp_path: Path) -> None:
    _mountable(tmp_path)
    cache, tmp = tmp_path / "full", tmp_path / "full-tmp"
    got = _scenario(_scenario_env(cache, tmp),
                    _tmpfs(cache, "size=16k") + "\n" + _tmpfs(tmp, "size=16k"))
    assert got["done"] and len(got["errors"]) == 1, got
    error = got["errors"][0]
    assert error.startswith("BuildError: cpu backend: cannot write the files of a C kernel")
    assert str(cache) in error and "set STRIDEC_CACHE_DIR" in error


@pytest.mark.slow
def test_a_read_only_cache_folder(tmp_path: Path) -> None:
    """A read-only mount, empty (kernels built privately, one warning) and then holding a
    cache another process filled (every kernel loaded from it, nothing built)."""
    _mountable(tmp_path)
    cache = tmp_path / "ro"
    quoted = shlex.quote(str(cache))
    got = _scenario(_scenario_env(cache, tmp_path),
                    _tmpfs(cache, "size=64m") + f"\nmount -o remount,ro {quoted}")
    assert got["done"] and got["errors"] == [] and got["builds"] > 0
    assert any("C kernels are built in" in w for w in got["warnings"]), got["warnings"]
    filled = tmp_path / "filled"
    first = _scenario(_scenario_env(filled, tmp_path))
    assert first["done"] and first["builds"] + first["loads"] > 0
    again = _scenario(_scenario_env(filled, tmp_path),
                      f"mount --bind {shlex.quote(str(filled))} {shlex.quote(str(filled))}\n"
                      f"mount -o remount,bind,ro {shlex.quote(str(filled))}")
    assert again["done"] and again["errors"] == [] and again["builds"] == 0
    assert again["loads"] > 0


def test_a_noexec_cache_folder(tmp_path: Path) -> None:
    """The cache and the temporary folder on `noexec` mounts (the dynamic loader refuses
    their libraries): the kernels are built there and loaded from memory, one warning."""
    _mountable(tmp_path)
    cache, tmp = tmp_path / "noexec", tmp_path / "noexec-tmp"
    got = _scenario(_scenario_env(cache, tmp),
                    _tmpfs(cache, "size=64m,noexec") + "\n" + _tmpfs(tmp, "size=64m,noexec"))
    assert got["done"] and got["errors"] == [] and got["builds"] > 0
    refused = [w for w in got["warnings"] if "dynamic loader refuses" in w]
    assert len(refused) == 1 and "loaded from memory" in refused[0], got["warnings"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncated", "garbage_with_its_checksum"])
def test_damaged_libraries_are_rebuilt(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    env = _scenario_env(cache, tmp_path)
    assert _scenario(env)["done"]
    libraries = sorted((cache / "kernels" / "c").glob("*.so"))
    assert libraries
    for lib in libraries:
        data = lib.read_bytes()
        if damage == "truncated":
            lib.write_bytes(data[: len(data) // 3])
        else:  # garbage the checksum vouches for: the loader refuses it
            garbage = bytes(range(256)) * 64
            lib.write_bytes(garbage)
            Path(f"{lib}.sha256").write_text(hashlib.sha256(garbage).hexdigest())
    again = _scenario(env)
    assert again["done"] and again["errors"] == [] and again["builds"] == len(libraries)
    assert again["warnings"] == []


def test_a_build_killed_then_retried(tmp_path: Path) -> None:
    """A process killed (SIGKILL) in the middle of building its kernels: the next process
    builds them and runs; the killed build's temporary files, once stale, are removed."""
    cache = tmp_path / "cache"
    slow, started = tmp_path / "slow", tmp_path / "started"
    wrapper = tmp_path / "cc"
    wrapper.write_text(f'#!/bin/sh\n: > {shlex.quote(str(started))}\n'
                       f'if [ -e {shlex.quote(str(slow))} ]; then sleep 600; fi\n'
                       f'exec {c_build.compiler()} "$@"\n')
    wrapper.chmod(0o755)
    env = {**_scenario_env(cache, tmp_path), "STRIDEC_CC": str(wrapper)}
    slow.touch()
    victim = subprocess.Popen([sys.executable, str(SCENARIOS)], env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not started.exists():
        assert time.time() < deadline and victim.poll() is None, "the build never started"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(60)
    left = list((cache / "kernels" / "c").glob(".tmp-*"))
    assert left, "the killed build left no temporary file to clean"
    for path in left:  # as old as a build that died long ago
        os.utime(path, (time.time() - 2 * c_build.STALE_SECONDS,) * 2)
    slow.unlink()
    again = _scenario(env)
    assert again["done"] and again["errors"] == [] and again["builds"] > 0
    assert not any(p.exists() for p in left)
