"""The disk cache's cap (`STRIDEC_CACHE_MAX_SIZE`): least recently used entries go first,
a disk hit counts as a use, recent entries stay, foreign files are never touched, the
command line shows and empties it, and processes that compile while another empties
the cache all get right results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import stridec
from stridec.runtime import cache
from stridec.runtime.cache import MEMORY_CACHE, disk_entries, parse_size, trim
from stridec.tools.cache import main as cache_main

MiB = 2**20


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("STRIDEC_CACHE_DIR", str(folder))
    MEMORY_CACHE.clear_memory()
    yield folder
    MEMORY_CACHE.clear_memory()


@pytest.mark.parametrize("text, size", [
    ("1048576", MiB), ("500M", 500 * MiB), ("2G", 2 * 2**30), ("1.5K", 1536), ("64KiB", 65536),
    ("3MB", 3 * MiB), ("0", 0), ("unlimited", None), ("none", None),
])
def test_sizes_parse(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1M", "nan", "inf", "1Q"])
def test_a_bad_size_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_a_bad_cap_warns_and_keeps_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRIDEC_CACHE_MAX_SIZE", "a lot")
    with pytest.warns(RuntimeWarning, match="STRIDEC_CACHE_MAX_SIZE='a lot'"):
        assert cache.max_size() == cache.DEFAULT_MAX_SIZE
    monkeypatch.setenv("STRIDEC_CACHE_MAX_SIZE", "20M")
    assert cache.max_size() == 20 * MiB


def _entry(folder: Path, name: str, size: int, age: float) -> list[Path]:
    """Files of one entry, `size` bytes in all, last used `age` seconds ago."""
    if name.endswith(".so"):  # a C unit: its source, library and checksum
        stem = folder / "kernels" / "c" / name[:-3]
        paths = [stem.with_suffix(".c"), stem.with_suffix(".so"), Path(f"{stem}.so.sha256")]
    elif name.startswith("k_"):
        paths = [folder / "kernels" / name]
    else:
        paths = [folder / "plans" / name]
    stamp = time.time() - age
    for i, p in enumerate(paths):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * (size // len(paths) + (i < size % len(paths))))
        os.utime(p, (stamp, stamp))
    return paths


def test_trim_removes_least_recently_used_entries_first(cache_dir: Path) -> None:
    plan = lambda c: f"{c * 64}.json"  # noqa: E731
    unit = lambda c: f"{c * 32}.so"  # noqa: E731
    old = _entry(cache_dir, plan("a"), 4000, age=500)
    older_unit = _entry(cache_dir, unit("b"), 3000, age=900)
    newer = _entry(cache_dir, "k_" + "c" * 24 + ".py", 2000, age=300)
    newest = _entry(cache_dir, unit("d"), 3000, age=100)
    recent = _entry(cache_dir, plan("e"), 5000, age=1)  # within the grace period
    foreign = [cache_dir / "plans" / "notes.txt", cache_dir / "kernels" / "c" / ".tmp-x.so",
               cache_dir / "README"]
    for p in foreign:
        p.write_bytes(b"y" * 10_000)
        os.utime(p, (0, 0))
    assert sorted(e.kind for e in disk_entries()) == ["c", "c", "plan", "plan", "triton"]
    assert sum(e.size for e in disk_entries()) == 17_000

    assert trim(11_000, grace=60) == (2, 7000)  # the unit of 900 s, the plan of 500 s
    assert not any(p.exists() for p in older_unit + old)
    assert all(p.exists() for p in newer + newest + recent + foreign)
    # Under the cap: nothing goes. Down to 0: everything but the recent entry.
    assert trim(10_000, grace=60) == (0, 0)
    assert trim(0, grace=60) == (2, 5000)
    assert [e.files for e in disk_entries()] == [tuple(map(str, recent))]
    assert all(p.exists() for p in foreign)
    assert trim(0, grace=0) == (1, 5000) and not disk_entries()


def test_the_cap_holds_while_graphs_compile(cache_dir: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """With a cap of a few plans, compiling many specializations keeps the folder near
    it (each process trims after writing a twentieth of the cap); every result is right
    and the newest plan stays."""
    monkeypatch.setenv("STRIDEC_CACHE_MAX_SIZE", "4K")
    monkeypatch.setattr(cache, "GRACE_SECONDS", 0.0)
    g = stridec.Graph("capped")
    x = g.input("x", (6, 8), "float32")
    g.output(x.t().contiguous())
    fn = stridec.compile(g, backend="interpret")
    largest = 0
    for k in range(8):
        t = torch.randn(8 + k, 6)[k:].t()  # a new specialization: offset k * 6
        assert torch.equal(fn(t), t.t().contiguous())
        total = sum(e.size for e in disk_entries())
        largest = max(largest, total)
    assert fn.stats.compiles == 8
    plans = [e for e in disk_entries() if e.kind == "plan"]
    assert 1 <= len(plans) < 8
    # Over the cap by at most what one compile writes (a plan and a kernel module).
    biggest_entry = max(e.size for e in disk_entries())
    assert largest <= 4 * 1024 + 2 * biggest_entry


def test_a_disk_hit_counts_as_a_use(cache_dir: Path) -> None:
    g = stridec.Graph("touched")
    x = g.input("x", (3, 5), "float32")
    g.output(x.t().contiguous())
    t = torch.randn(3, 5)
    stridec.compile(g, backend="interpret")(t)
    for e in disk_entries():
        for f in e.files:
            os.utime(f, (1000, 1000))
    MEMORY_CACHE.clear_memory()
    fn = stridec.compile(g, backend="interpret")
    assert torch.equal(fn(t), t.t().contiguous()) and fn.stats.disk_hits == 1
    (plan,) = [e for e in disk_entries() if e.kind == "plan"]
    assert plan.used > time.time() - 60


def test_the_command_line_shows_trims_and_clears(cache_dir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _entry(cache_dir, "a" * 64 + ".json", 3000, age=100)
    _entry(cache_dir, "b" * 32 + ".so", 3 * MiB, age=200)
    (cache_dir / "plans" / "mine.txt").write_text("kept")
    assert cache_main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"stridec cache: {cache_dir} (STRIDEC_CACHE_DIR)\n")
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert lines["plans"][1:3] == ["1", "2.9"] and lines["C"][4:6] == ["1", "3.0"]
    assert lines["total"][1] == "2" and "cap 1.0 GiB" in out
    assert cache_main(["trim", "--to", "1M"]) == 0
    assert "removed 1 entries (3.0 MiB)" in capsys.readouterr().out
    assert [e.kind for e in disk_entries()] == ["plan"]
    assert cache_main(["clear"]) == 0
    assert "removed 1 entries" in capsys.readouterr().out
    assert not disk_entries() and (cache_dir / "plans" / "mine.txt").exists()
    assert cache_main(["trim", "--to", "lots"]) == 1
    assert "--to: expected a size" in capsys.readouterr().err
    assert cache_main(["nothing"]) == 1


def test_python_m_stridec_cache_needs_no_torch(cache_dir: Path) -> None:
    code = ("import sys; from stridec.__main__ import main; status = main(['cache', 'info']); "
            "assert 'torch' not in sys.modules; sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "STRIDEC_CACHE_DIR": str(cache_dir)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stridec cache: ")


WORKER = r"""
import json, sys, time
import torch, stridec
from stridec.runtime import cache
cache.GRACE_SECONDS = 0.0  # nothing is safe from the eviction: the worst case
go, rounds = sys.argv[1], int(sys.argv[2])
while not __import__("os").path.exists(go):
    time.sleep(0.01)
ok = True
for k in range(rounds):
    g = stridec.Graph(f"w{k % 3}")
    x = g.input("x", (4 + k % 3, 6), "float32")
    g.output(x.t().contiguous())
    t = torch.randn(4 + k % 3, 6)
    for backend in ("cpu", "interpret"):
        stridec.runtime.cache.MEMORY_CACHE.clear_memory()
        ok &= torch.equal(stridec.compile(g, backend=backend)(t), t.t().contiguous())
print(json.dumps({"ok": bool(ok)}))
"""

CLEARER = r"""
import os, sys, time
from stridec.runtime import cache
go, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.01)
n = 0
while not os.path.exists(stop):
    cache.clear()
    n += 1
    time.sleep(0.01)
print(n)
"""


def test_processes_compile_while_another_clears_the_cache(tmp_path: Path) -> None:
    """Two processes compile and run graphs (C units, Triton kernel modules, plans) into
    one cache folder with a cap of 1 byte and no grace period, while a third empties the
    folder in a loop: every result is right, no process fails."""
    folder = tmp_path / "shared"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(STRIDEC_CACHE_DIR=str(folder), STRIDEC_CACHE_MAX_SIZE="1")
    go, stop = tmp_path / "go", tmp_path / "stop"
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(go), "3"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    clearer = subprocess.Popen([sys.executable, "-c", CLEARER, str(go), str(stop)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    go.touch()
    try:
        results = [w.communicate(timeout=300) for w in workers]
    finally:
        stop.touch()
    cleared, err = clearer.communicate(timeout=60)
    assert clearer.returncode == 0, err
    for w, (out, err) in zip(workers, results, strict=True):
        assert w.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"ok": True}
    assert int(cleared) > 1
