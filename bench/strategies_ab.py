"""The strategies of `codegen/c/copy.py` against the planned library on the same copy: what
`codegen/c/plan.py`'s `routed` is decided by (a benchmark, never a timed test).

    python bench/strategies_ab.py                       # every case, 2 threads, wall time
    python bench/strategies_ab.py --threads 1 --clock thread --rounds 15 pad_img_f32_64M
    python bench/strategies_ab.py --threads 1 --clock thread --rounds 9 t2d_i8 t2d_i8_odd ...

Each case is a `CopySpec` (pads of images, rows and transposed sources; NCHW4/32 and CHWN4
packs with padded channels and unpacks; fills; transposes of bytes), built into two
kernels -- the strategies' (`_strategy_plan`) and the planned library's
(`plan.planned_call`) -- called straight, in one process, alternating (the order flipped
every round), the caches flushed before each call by a 64 MB read; medians. `old/new`
above 1: the library is faster. `--clock thread` times the calling thread's CPU time
(with `--threads 1`: the whole copy), which a machine other processes share disturbs far
less than wall time.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from stridec.compiler.codegen.c import copy as ccopy
from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends import cpu


def _dtype(t: torch.dtype):
    return DTYPES[str(t).removeprefix("torch.")]


def pad_spec(shape, pads, dtype, perm=None) -> tuple[CopySpec, int, int]:
    """F.pad of a contiguous tensor of `shape` (or of `x.permute(perm)` of one) by `pads`
    (lo, hi) per dim into a contiguous output: (spec, source and output elements)."""
    rank = len(shape)
    if perm:
        base = torch.empty([shape[perm.index(k)] for k in range(rank)], dtype=dtype)
        strides = base.permute(*perm).stride()
    else:
        strides = torch.empty(shape, dtype=dtype).stride()
    out = tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads, strict=True))
    masks = tuple(MaskBound(tuple(int(j == k) for j in range(rank)), lo, lo + n)
                  for k, (n, (lo, hi)) in enumerate(zip(shape, pads, strict=True)) if lo or hi)
    offset = -sum(lo * s for (lo, _), s in zip(pads, strides, strict=True))
    d = _dtype(dtype)
    spec = CopySpec(out, strides, offset, torch.empty(out).stride(), 0, d, d, masks, 0)
    return spec, torch.Size(shape).numel(), torch.Size(out).numel()


def pack_spec(n, c, h, w, k, dtype) -> tuple[CopySpec, int, int]:
    """NCHW -> NCHW<k>, the channels padded with 0 to a multiple of k."""
    cb = -(-c // k)
    d = _dtype(dtype)
    spec = CopySpec((n, cb, k, h, w), (c * h * w, k * h * w, h * w, w, 1), 0,
                    (cb * h * w * k, h * w * k, 1, w * k, k), 0, d, d,
                    (MaskBound((0, k, 1, 0, 0), 0, c),), 0)
    return spec, n * c * h * w, n * cb * k * h * w


def chwn4_spec(n, c, h, w, dtype) -> tuple[CopySpec, int, int]:
    """NCHW -> CHWN4, the channels padded with 0 to a multiple of 4."""
    cb = -(-c // 4)
    d = _dtype(dtype)
    spec = CopySpec((n, cb, 4, h, w), (c * h * w, 4 * h * w, h * w, w, 1), 0,
                    (4, h * w * n * 4, 1, w * n * 4, n * 4), 0, d, d,
                    (MaskBound((0, 4, 1, 0, 0), 0, c),), 0)
    return spec, n * c * h * w, n * cb * 4 * h * w


def unpack_spec(n, c, h, w, k, dtype) -> tuple[CopySpec, int, int]:
    """NCHW<k> -> NCHW of c channels: the padded channels not read, nothing written there."""
    cb = -(-c // k)
    d = _dtype(dtype)
    spec = CopySpec((n, cb, k, h, w), (cb * h * w * k, h * w * k, 1, w * k, k), 0,
                    (c * h * w, k * h * w, h * w, w, 1), 0, d, d,
                    (MaskBound((0, k, 1, 0, 0), 0, c),), None)
    return spec, n * cb * k * h * w, n * c * h * w


def fill_spec(shape, dtype, strides=None) -> tuple[CopySpec, int, int]:
    strides = strides or torch.empty(shape).stride()
    rank = len(shape)
    d = _dtype(dtype)
    spec = CopySpec(shape, (0,) * rank, 0, strides, 0, d, d, (MaskBound((0,) * rank, 1, 1),), 3)
    return spec, 1, 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))


def permute_spec(shape, perm, dtype) -> tuple[CopySpec, int, int]:
    """x.permute(perm).contiguous() of a contiguous x of `shape`."""
    strides = torch.empty(shape).stride()
    out = tuple(shape[p] for p in perm)
    d = _dtype(dtype)
    spec = CopySpec(out, tuple(strides[p] for p in perm), 0, torch.empty(out).stride(), 0, d, d)
    n = torch.Size(shape).numel()
    return spec, n, n


def view_spec(shape, take, dtype) -> tuple[CopySpec, int, int]:
    """take(x).contiguous() of a contiguous x of `shape` (`take` a view: a slice, an
    expand)."""
    x = torch.empty(shape, dtype=dtype)
    v = take(x)
    d = _dtype(dtype)
    spec = CopySpec(tuple(v.shape), v.stride(), v.storage_offset(),
                    torch.empty(v.shape).stride(), 0, d, d)
    return spec, x.numel(), v.numel()


def flip_spec(rows: int, n: int, dtype) -> tuple[CopySpec, int, int]:
    """x.flip(-1) of a contiguous x of (rows, n)."""
    d = _dtype(dtype)
    return CopySpec((rows, n), (n, -1), n - 1, (n, 1), 0, d, d), rows * n, rows * n


f16, f32, i8 = torch.float16, torch.float32, torch.int8
IMG = ((0, 0), (0, 0), (1, 1), (1, 1))
CASES = {
    "pad_img_f32_64M": lambda: pad_spec((16, 64, 112, 112), IMG, f32),
    "pad_img_f32_4M": lambda: pad_spec((1, 64, 112, 112), IMG, f32),
    "pad_img_f32_64K": lambda: pad_spec((1, 4, 28, 28), IMG, f32),
    "pad_img_f16_64M": lambda: pad_spec((16, 64, 112, 112), ((0, 0), (0, 0), (3, 3), (3, 3)),
                                        f16),
    "pad_img_i8_64M": lambda: pad_spec((32, 64, 112, 112), IMG, i8),
    "pad_rows_f16": lambda: pad_spec((4096, 4500), ((0, 0), (0, 108)), f16),
    "pad_chan_f32": lambda: pad_spec((16, 61, 128, 128), ((0, 0), (0, 3), (0, 0), (0, 0)), f32),
    "pad_t_f32": lambda: pad_spec((4096, 4096), ((5, 40), (17, 3)), f32, (1, 0)),
    "pad_t_f16": lambda: pad_spec((4096, 4096), ((5, 40), (17, 3)), f16, (1, 0)),
    "pad_t_f16_4M": lambda: pad_spec((1024, 1024), ((5, 40), (17, 3)), f16, (1, 0)),
    "pack4_c3_i8": lambda: pack_spec(32, 3, 512, 512, 4, i8),
    "pack4_c3_f16": lambda: pack_spec(16, 3, 512, 512, 4, f16),
    "pack4_c5_f32": lambda: pack_spec(8, 5, 512, 512, 4, f32),
    "pack32_c3_f16": lambda: pack_spec(2, 3, 512, 512, 32, f16),
    "pack32_c3_f32": lambda: pack_spec(1, 3, 512, 512, 32, f32),
    "pack32_c3_f16_1M": lambda: pack_spec(1, 3, 128, 128, 32, f16),
    "pack32_c40_f16": lambda: pack_spec(4, 40, 256, 256, 32, f16),
    "pack32_c3_i8": lambda: pack_spec(4, 3, 512, 512, 32, i8),
    "pack64_c3_i8": lambda: pack_spec(2, 3, 512, 512, 64, i8),
    "pack16_c3_i8": lambda: pack_spec(8, 3, 512, 512, 16, i8),
    "pack32_c5_i8": lambda: pack_spec(4, 5, 512, 512, 32, i8),
    "pad_t_i8": lambda: pad_spec((4096, 4096), ((5, 40), (17, 3)), i8, (1, 0)),
    "chwn4_c3_i8": lambda: chwn4_spec(32, 3, 512, 512, i8),
    "chwn4_c3_f16": lambda: chwn4_spec(16, 3, 512, 512, f16),
    "chwn4_c3_f32": lambda: chwn4_spec(8, 3, 512, 512, f32),
    "unpack32_c40_f16": lambda: unpack_spec(4, 40, 256, 256, 32, f16),
    "unpack32_c3_f32": lambda: unpack_spec(2, 3, 512, 512, 32, f32),
    "fill_f32_64M": lambda: fill_spec((4096, 4096), f32),
    "fill_i8_64M": lambda: fill_spec((8192, 8192), i8),
    "fill_f64_1M": lambda: fill_spec((256, 512), torch.float64),
    "fill_f32_strided": lambda: fill_spec((2048, 2048), f32, (4096, 2)),
    # long rows: the race's strided slice (runs of 7.5 KiB, 16 KiB apart), runs of 5 KiB
    # and 60 KiB, one row broadcast, a TTC permutation's runs of 6 KiB, runs past the
    # 64 KiB block
    "slice_rows_f32": lambda: view_spec((4, 2048, 2048), lambda x: x[:, 1::2, 64:-64], f32),
    "slice_rows_f16_5K": lambda: view_spec((4096, 4096), lambda x: x[:, 100:2660], f16),
    "slice_rows_f32_60K": lambda: view_spec((512, 16384), lambda x: x[::2, 64:-64], f32),
    "expand_rows_f32": lambda: view_spec((1, 4096), lambda x: x.expand(2048, 4096), f32),
    "ttc_021_f32": lambda: permute_spec((268, 44, 1498), (1, 0, 2), f32),
    "slice_rows_f32_128K": lambda: view_spec((256, 65536), lambda x: x[::2, 8:-8], f32),
    # gathers and flips of short runs: a strided slice of both dims, a flip of runs of 7,
    # of bytes, a strided destination, a 3-D subsample
    "gather_f32": lambda: view_spec((4096, 4096), lambda x: x[::2, ::5], f32),
    "gather_i8": lambda: view_spec((4096, 8192), lambda x: x[::2, ::5], i8),
    "flip7_f32": lambda: flip_spec(1 << 20, 7, f32),
    "flip9_i8": lambda: flip_spec(1 << 21, 9, i8),
    "flip5_f32_small": lambda: flip_spec(1000, 5, f32),
    "gather3d_f16": lambda: view_spec((64, 256, 512), lambda x: x[:, ::2, ::5], f16),
    "gather_small_f32": lambda: view_spec((256, 256), lambda x: x[::2, ::5], f32),
    # transposes of bytes: the race's rows, a small one, the random suite's (seed 90417)
    "t2d_i8": lambda: permute_spec((4096, 8192), (1, 0), i8),
    "t2d_i8_odd": lambda: permute_spec((4097, 8191), (1, 0), i8),
    "t2d_i8_small": lambda: permute_spec((300, 500), (1, 0), i8),
    "nchw_nhwc_i8": lambda: permute_spec((32, 256, 64, 64), (0, 2, 3, 1), i8),
    "nhwc_nchw_i8": lambda: permute_spec((32, 64, 64, 256), (0, 3, 1, 2), i8),
    "rand08_i8": lambda: permute_spec((55, 303, 3, 115), (3, 0, 2, 1), i8),
    "rand12_i8": lambda: permute_spec((3, 9, 3, 3, 3, 5709), (5, 1, 4, 3, 0, 2), i8),
    "rand18_i8": lambda: permute_spec((3, 3, 5, 21, 121, 15), (4, 3, 1, 5, 0, 2), i8),
    "rand23_i8": lambda: permute_spec((3, 27, 199, 3, 147, 7), (5, 2, 1, 4, 0, 3), i8),
}


def _kernel(spec: CopySpec, plan_one):
    k = ccopy.assemble_kernel([spec], [(0, 1)], "copy", plan_one)
    return k, cpu.load_c_kernel(k.name, k.source, k.calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"of {', '.join(CASES)} (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    flush = torch.ones(16 << 20)
    for name in args.cases or list(CASES):
        spec, n_src, n_dst = CASES[name]()
        (old, run_old), (new, run_new) = (_kernel(spec, ccopy._strategy_plan),
                                          _kernel(spec, cplan.planned_call))
        if not new.calls or not new.calls[0][0].startswith(cplan.SYMBOL_PREFIX):
            print(f"{name}: the planner takes no plan")
            continue
        dtype = spec.dst_dtype.torch
        src = torch.zeros(n_src + 64, dtype=dtype)  # masked-off reads never happen
        dst = torch.zeros(n_dst + 64, dtype=dtype)
        times: dict[str, list[float]] = {"old": [], "new": []}
        runs = [("old", run_old), ("new", run_new)]
        for run in (run_old, run_new):
            run(None, src, dst)
        for r in range(args.rounds):
            for key, run in runs if r % 2 == 0 else runs[::-1]:
                flush.sum()
                t0 = clock()
                run(None, src, dst)
                times[key].append(clock() - t0)
        t_old, t_new = (statistics.median(times[k]) for k in ("old", "new"))
        gb = (n_src + n_dst) * spec.dst_dtype.itemsize / 1e9
        print(f"{name:18s} old {old.strategy:15s} {t_old * 1e3:8.3f} ms  new {new.strategy:15s}"
              f" {t_new * 1e3:8.3f} ms  old/new {t_old / t_new:5.2f}  ({gb / t_new:5.1f} GB/s;"
              f" old {min(times['old']) * 1e3:.2f}-{max(times['old']) * 1e3:.2f},"
              f" new {min(times['new']) * 1e3:.2f}-{max(times['new']) * 1e3:.2f} ms)",
              flush=True)


if __name__ == "__main__":
    main()
