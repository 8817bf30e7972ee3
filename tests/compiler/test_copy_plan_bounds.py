"""The planned copies' C library never reads or writes outside the storages it is given:
every candidate plan of random copies (every element size, odd extents, flips, broadcasts,
overlaps, steps) runs on storages that end, or start, at a page the process may not touch,
so a read or write one element outside faults. The runs go in a child process: a fault
there fails the test instead of ending the suite."""

from __future__ import annotations

import ctypes
import dataclasses
import math
import mmap
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.spec import CopySpec
from stridec.compiler.copy_plan import candidate_plans
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu
from tests.compiler.test_codegen_c_copy import _team
from tests.compiler.test_codegen_copy import random_storage, reference_copy, span

ROOT = Path(__file__).resolve().parents[2]
DTYPE_NAMES = ("int8", "int16", "float32", "float64")
PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAPS: list[mmap.mmap] = []  # kept mapped for the process: tensors point into them


def guarded_storage(nbytes: int, at_end: bool) -> torch.Tensor:
    """`nbytes` bytes whose last byte (`at_end`) or first byte lies next to a PROT_NONE
    page (unlike tests/reliability/test_guard_pages.py's, whose starts keep 8-byte
    alignment, the end here is exact for any length)."""
    body = -(-nbytes // PAGE) * PAGE
    m = mmap.mmap(-1, body + 2 * PAGE)
    _MAPS.append(m)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    for at in (base, base + PAGE + body):
        assert _libc.mprotect(at, PAGE, 0) == 0, os.strerror(ctypes.get_errno())
    start = PAGE + (body - nbytes if at_end else 0)
    return torch.frombuffer(m, dtype=torch.uint8, count=nbytes, offset=start)


def random_spec(rng: random.Random) -> CopySpec:
    """A copy of 1 .. 6 dims of odd and small extents, permuted, stepped, flipped,
    broadcast or overlapping on either side."""
    dtype = DTYPES[rng.choice(DTYPE_NAMES)]
    rank = rng.randint(1, 6)
    sizes = [rng.choice((1, 2, 3, 4, 5, 7, 9, 17, 31, 33, 65)) for _ in range(rank)]
    while rng.random() < 0.3:  # one big dim now and then: several blocks and threads
        sizes[rng.randrange(rank)] = rng.randint(100, 700)
    while math.prod(sizes) > 100_000:
        sizes[sizes.index(max(sizes))] //= 3

    def layout(steps: bool) -> list[int]:
        order = list(range(rank))
        rng.shuffle(order)
        strides, run = [0] * rank, 1
        for k in reversed(order):
            step = rng.choice((1, 1, 1, 2, 3, 4)) if steps else 1
            strides[k] = run * step
            run *= sizes[k] * step + rng.choice((0, 0, 0, 1))
        for k in range(rank):
            if steps and rng.random() < 0.1:
                strides[k] = rng.choice((0, 1, 2))  # broadcast or overlap
            if rng.random() < 0.2:
                strides[k] = -strides[k]
        return strides

    src, dst = layout(True), layout(False)

    def offset(strides):
        return -sum(min(0, (n - 1) * s) for n, s in zip(sizes, strides, strict=True))

    return CopySpec(tuple(sizes), tuple(src), offset(src), tuple(dst), offset(dst),
                    dtype, dtype)


def random_rows_spec(rng: random.Random) -> CopySpec:
    """A row-keeping permutation: 2 .. 5 dims of odd extents whose innermost dim stays
    innermost (rows of 1 .. 70 elements), the outer dims permuted, the source's rows
    padded now and then: the blocked rows plans (several runs a block)."""
    dtype = DTYPES[rng.choice(DTYPE_NAMES)]
    rank = rng.randint(2, 5)
    sizes = [rng.choice((1, 2, 3, 5, 7, 9, 17, 33)) for _ in range(rank - 1)]
    sizes.append(rng.choice((1, 3, 13, 26, 70)))
    order = list(range(rank - 1))
    rng.shuffle(order)
    src, run = [0] * rank, 1
    for k in [*order, rank - 1][::-1]:
        src[k] = run
        run *= sizes[k] + rng.choice((0, 0, 1))
    dst, run = [0] * rank, 1
    for k in reversed(range(rank)):
        dst[k] = run
        run *= sizes[k]
    return CopySpec(tuple(sizes), tuple(src), 0, tuple(dst), 0, dtype, dtype)


def run_guarded(seed: int, count: int, rows: bool = False) -> int:
    """Run every candidate plan of `count` random copies (`rows`: row-keeping
    permutations, `run_specs`' blocked rows) against torch on guarded storages (kept
    mapped for the process); the number of plans run."""
    rng = random.Random(seed)
    return run_specs([random_rows_spec(rng) if rows else random_spec(rng)
                      for _ in range(count)], rows)


def run_specs(specs: list[CopySpec], rows: bool = False) -> int:
    """Every candidate plan of each copy of `specs` against torch on guarded storages,
    cached and streamed, on 1 and 3 threads (`rows`: up to 16 candidates, and each
    blocked rows plan also with blocks of at most 4, prefetching); the number of plans
    run."""
    fns = {}
    ran = 0
    for n, spec in enumerate(specs):
        size = spec.src_dtype.itemsize
        gen = torch.Generator().manual_seed(n)
        src_n = span(spec, spec.src_strides, spec.src_offset)
        dst_n = span(spec, spec.dst_strides, spec.dst_offset)
        values = random_storage(spec.src_dtype, src_n, gen)
        plans = candidate_plans(spec, limit=16 if rows else 4)
        if rows:
            plans += [dataclasses.replace(p, prefetch=True, loops=tuple(
                dataclasses.replace(loop, step=min(loop.step, 4)) for loop in p.loops))
                for p in plans if p.a_loop >= 0 and p.kernel != "permute"]
        for plan in plans:
            key = (plan.elem_bytes, tuple(plan.cast))
            if key not in fns:
                fn = getattr(cpu.load_unit(cplan.plan_unit_source(*key)),
                             cplan.plan_symbol(*key))
                fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_int64)
                fns[key] = fn
            for at_end, threads, stream in ((True, 1, False), (False, 3, True),
                                            (True, 3, True), (False, 1, False)):
                src = guarded_storage(src_n * size, at_end)
                dst = guarded_storage(dst_n * spec.dst_dtype.itemsize, not at_end)
                src, dst = src.view(spec.src_dtype.torch), dst.view(spec.dst_dtype.torch)
                src.copy_(values)
                dst.fill_(7)
                expected = reference_copy(spec, src, dst)
                params = cplan.plan_params(dataclasses.replace(plan, parallel=threads))
                cpu.set_stream_threshold(0 if stream else -1)
                with _team(True, threads):
                    fns[key](src.data_ptr(), dst.data_ptr(),
                              (ctypes.c_int64 * len(params))(*params), threads)
                assert torch.equal(dst, expected), (plan.describe(), spec)
                ran += 1
    return ran


@pytest.mark.parametrize("seed", [1005, 5008])
def test_wide_runs_that_flip_or_gather_are_right(seed):
    # Seeds whose copies of runs of 2 are planned as a reverse (int8 pairs) or a gather
    # (int16 pairs) of wider elements: each plan runs in the library of its own element
    # size, not the copy's.
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    script = ("from tests.compiler.test_copy_plan_bounds import run_guarded\n"
              f"print(run_guarded({seed}, 40))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (seed, done.stderr[-3000:])


def test_plans_stay_inside_their_storages():
    seed = random.randrange(1 << 30)
    script = ("from tests.compiler.test_copy_plan_bounds import (SHORT_RUNS, WIDE_BYTES,"
              " _permuted, run_guarded, run_specs)\n"
              f"print(run_guarded({seed}, 40) + run_guarded({seed}, 40, rows=True)"
              f" + run_specs([_permuted(*a) for a in WIDE_BYTES])"
              f" + run_specs([_permuted(*a) for a in SHORT_RUNS], rows=True))")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (f"seed {seed}", done.returncode, done.stderr[-3000:])
    assert int(done.stdout.split()[-1]) >= 40 + len(WIDE_BYTES) + len(SHORT_RUNS)


def _permuted(sizes, perm, dtype, out=None) -> CopySpec:
    strides = torch.empty(sizes).stride()
    shape = tuple(sizes[p] for p in perm)
    return CopySpec(shape, tuple(strides[p] for p in perm), 0, torch.empty(shape).stride(), 0,
                    DTYPES[dtype], DTYPES[out or dtype])


# Transposes of bytes in 64 x 16 blocks (lib/copy_micro.h, tr_block_wide) and streamed
# 64 x 64 blocks of whole lines (tr_lines_wide): whole, cut at every edge, through a table
# of destination rows (copies only: a cast's unit keeps the 16 x 16 blocks).
WIDE_BYTES = (((192, 256), (1, 0), "int8"), ((67, 131), (1, 0), "uint8"),
              ((2, 80, 9, 13), (0, 2, 3, 1), "int8"), ((3, 17, 40, 7), (3, 0, 2, 1), "int8"))

# Runs of a few bytes that follow on in the destination, each moved as one wider word
# (lib/copy_plan.c, gather_runs): the words of the runs at the source's end must not
# read past it (a 3-byte run moved as 8 bytes), nor those at a block's end write past
# it; 3-, 5- and 33-byte runs, the source's last run last in the walk; the permute
# kernel's matrices, each loaded as a 64-byte vector; short lane blocks gathered in L1.
SHORT_RUNS = (((7, 33, 9, 3), (0, 2, 1, 3), "uint8"), ((5, 9, 13, 5), (2, 0, 1, 3), "int8"),
              ((3, 17, 5, 33), (1, 2, 0, 3), "uint8"), ((9, 5, 3), (1, 0, 2), "int16"),
              # small matrices permuted whole (the permute kernel's 64-byte loads and
              # stores), one after the other and apart
              ((11, 3, 3), (0, 2, 1), "int16"), ((5, 9, 3, 7), (1, 0, 3, 2), "int8"),
              ((7, 5, 9), (0, 2, 1), "float64"),
              # a block of runs whose destination is one run, a word a run over the whole
              # block (rows_words): 3-, 14-, 19- and 22-byte runs; runs whose source lies
              # apart along both dims of the block (19 bytes, 32-byte words)
              ((9, 301, 3), (1, 0, 2), "int8"), ((5, 41, 7), (1, 0, 2), "int16"),
              ((7, 23, 19), (1, 0, 2), "uint8"), ((5, 41, 11), (1, 0, 2), "int16"),
              ((3, 3, 9, 5, 19), (1, 3, 2, 0, 4), "uint8"),
              # blocks of 3 pixels of 3 lanes joined along the loop outside them
              # (lanes_joined): a deinterleave and the interleave back
              ((3, 5, 7, 5, 3, 3), (5, 0, 2, 3, 1, 4), "int16"),
              ((3, 3, 35, 5, 3), (1, 3, 2, 4, 0), "int16"),
              # matrices permuted through the table (copies larger than L2): slabs of
              # 14.6 KB streamed, and of 630 bytes through the cache
              ((300, 13, 47, 3), (0, 3, 2, 1), "float64"),
              ((4000, 5, 7, 9), (0, 3, 2, 1), "int16"),
              # blocks contiguous in the destination alone, gathered through the table,
              # in tiles of the outermost dim whose last is shorter (300 = 37 x 8 + 4)
              ((300, 5, 3, 73, 3, 3), (1, 4, 3, 0, 5, 2), "uint8"),
              ((13, 20011), (1, 0), "float64"))
