"""Processes that fork or spawn while stridec is busy, run by tests/reliability/test_fork.py
as `python fork_scenarios.py <scenario> <folder>`, each in a process of its own: a hang
is caught by the test's timeout, and by this script's own deadline on every child it
waits for. Exit status 0: every process finished and every result equals torch's.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import torch

import stridec
from stridec.runtime.backends import cpu

# A child must finish its work within this many seconds (it builds at most a few small
# C units; a hung child waits forever).
CHILD_SECONDS = float(os.environ.get("CHILD_SECONDS", 120))


def transpose_graph(name: str, dtype: str = "float32", rows: int = 96) -> stridec.Graph:
    g = stridec.Graph(name)
    x = g.input("x", (rows, 136), dtype)
    g.output(x.t().contiguous(), x.flip(0)[::2].contiguous())
    return g


def check(fn: Callable[..., tuple[torch.Tensor, ...]], dtype: torch.dtype = torch.float32,
          rows: int = 96, threads: int | None = None) -> None:
    """`fn(x)` equals torch's; with `threads`, the kernels run on that many threads."""
    x = torch.arange(rows * 136).reshape(rows, 136).to(dtype)
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(threads or torch_threads)
    try:
        a, b = fn(x)
    finally:
        torch.set_num_threads(torch_threads)
    if not (torch.equal(a, x.t()) and a.stride() == (rows, 1)
            and torch.equal(b, x.flip(0)[::2])):
        raise SystemExit(f"wrong result in process {os.getpid()}")


def wait_child(pid: int, what: str) -> None:
    """Wait for child `pid` at most CHILD_SECONDS; a child still running is killed and
    reported as hung."""
    deadline = time.monotonic() + CHILD_SECONDS
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                raise SystemExit(f"{what}: child exited with {code}")
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise SystemExit(f"{what}: child hung (killed after {CHILD_SECONDS:.0f} s)")


def fork_and_run(what: str, work: Callable[[], None]) -> None:
    """Fork; the child runs `work` and exits 0 (1 on any exception); the parent waits."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported, then the child exits
            print(f"child of {what}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    wait_child(pid, what)


def fork_during_build(folder: str) -> None:
    """A thread builds a C unit (the compiler, a wrapper that sleeps, is inside its run
    when the fork happens, so the build lock is held); the child compiles and runs graphs
    of its own, which take that lock."""
    check(stridec.compile(transpose_graph("warm"), backend="cpu"))  # the pool, loaded
    flag = os.path.join(folder, "building")
    wrapper = os.path.join(folder, "slow-cc")
    with open(wrapper, "w", encoding="ascii") as f:
        f.write(f'#!/bin/sh\n: > "{flag}"\nsleep 2\nexec {cpu.compiler()} "$@"\n')
    os.chmod(wrapper, 0o755)
    plain_cc = cpu.compiler()
    os.environ["STRIDEC_CC"] = wrapper
    unit = f"int stridec_fork_probe(void) {{ return {os.getpid()}; }}\n"
    builder = threading.Thread(target=cpu.load_unit, args=(unit,), daemon=True)
    builder.start()
    deadline = time.monotonic() + CHILD_SECONDS
    while not os.path.exists(flag):
        if time.monotonic() > deadline or not builder.is_alive():
            raise SystemExit("the build never started")
        time.sleep(0.01)

    def child() -> None:
        os.environ["STRIDEC_CC"] = plain_cc
        check(stridec.compile(transpose_graph("child"), backend="cpu"))
        check(stridec.compile(transpose_graph("child8", "int8"), backend="cpu"), torch.int8)

    fork_and_run("fork during a build", child)
    builder.join(CHILD_SECONDS)
    if builder.is_alive():
        raise SystemExit("the parent's build never finished")


def fork_after_threads(folder: str) -> None:
    """Kernels ran on several threads (torch's OpenMP team, then the pool's own workers);
    another thread keeps calling kernels while the parent forks; each child runs them on
    two threads. (torch's own parallel ops run on one thread in the child, as in a
    DataLoader worker: GNU OpenMP hangs a forked child whose parent's main thread ran a
    parallel region, with or without stridec.)"""
    torch.set_num_threads(2)
    fn = stridec.compile(transpose_graph("threads", rows=2048), backend="cpu")
    for openmp in (True, False):
        cpu.use_torch_openmp(openmp)
        check(fn, rows=2048)
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            check(fn, rows=2048)

    runner = threading.Thread(target=busy, daemon=True)
    runner.start()

    def child() -> None:
        torch.set_num_threads(1)
        for _ in range(3):
            check(fn, rows=2048, threads=2)
        check(stridec.compile(transpose_graph("threads2", rows=1024), backend="cpu"),
              rows=1024, threads=2)

    try:
        for k in range(4):
            fork_and_run(f"fork {k} after threaded kernels", child)
    finally:
        stop.set()
        runner.join(CHILD_SECONDS)


def fork_with_every_lock_held(folder: str) -> None:
    """Another thread holds every lock of stridec's at the fork (each module's, the plan
    cache's, a compiled graph's); the child compiles and runs graphs on the cpu and
    interpret backends, calls that graph, and registers and calls a torch op."""
    from stridec.runtime import cache, launch
    from stridec.runtime.backends import interpret, triton
    from stridec.torch import custom_op

    fn = stridec.compile(transpose_graph("held"), backend="cpu")
    check(fn)
    locks = [cpu._lock, triton._lock, interpret._interpreter_lock, launch._RUNNERS_LOCK,
             cache.MEMORY_CACHE._lock, custom_op._REGISTRY_LOCK, fn._lock]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        for lock in locks:
            lock.acquire()
        holding.set()
        release.wait()
        for lock in reversed(locks):
            lock.release()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    if not holding.wait(CHILD_SECONDS):
        raise SystemExit("the locks were never taken")

    def child() -> None:
        check(fn)
        fn.plan_for(torch.zeros(96, 136))
        check(stridec.compile(transpose_graph("new8", "int8"), backend="cpu"), torch.int8)
        check(stridec.compile(transpose_graph("interp", rows=3), backend="interpret"),
              rows=3)
        op = stridec.compile(transpose_graph("op")).as_torch_op("stridec_fork::op")
        check(op)

    try:
        fork_and_run("fork with every lock held", child)
    finally:
        release.set()
        holder.join(CHILD_SECONDS)


class Items(torch.utils.data.Dataset):
    """Each item computed by a compiled graph in the worker that loads it."""

    def __init__(self) -> None:
        self.fn = stridec.compile(transpose_graph("loader"), backend="cpu")

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.arange(96 * 136).reshape(96, 136).float() + i
        return (x, *self.fn(x))


def dataloader_workers(folder: str) -> None:
    """DataLoader with num_workers=2 (forked workers) while another thread compiles."""
    data = Items()
    check(data.fn)
    stop = threading.Event()

    def compiling() -> None:
        k = 0
        while not stop.is_set():
            fn = stridec.compile(transpose_graph(f"bg{k}", rows=8 + k % 5), backend="cpu")
            check(fn, rows=8 + k % 5)
            k += 1

    background = threading.Thread(target=compiling, daemon=True)
    background.start()
    try:
        loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=2,
                                             timeout=CHILD_SECONDS)
        seen = 0
        for x, a, b in loader:
            if not (torch.equal(a, x.t()) and torch.equal(b, x.flip(0)[::2])):
                raise SystemExit("a worker's result differs from torch's")
            seen += 1
        if seen != len(data):
            raise SystemExit(f"{seen} of {len(data)} items")
    finally:
        stop.set()
        background.join(CHILD_SECONDS)


def spawned_work(i: int) -> bool:
    fn = stridec.compile(transpose_graph(f"spawned{i}"), backend="cpu")
    check(fn)
    return True


def spawn_workers(folder: str) -> None:
    import multiprocessing

    check(stridec.compile(transpose_graph("parent"), backend="cpu"))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        if not all(pool.map_async(spawned_work, range(2)).get(CHILD_SECONDS)):
            raise SystemExit("a spawned worker failed")


SCENARIOS = {
    "fork_with_every_lock_held": fork_with_every_lock_held,
    "fork_during_build": fork_during_build,
    "fork_after_threads": fork_after_threads,
    "dataloader_workers": dataloader_workers,
    "spawn_workers": spawn_workers,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2])
