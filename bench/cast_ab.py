"""Casts on the planned library against the strategies of `codegen/c/copy.py`: each copy's
two kernels called straight, in one process, interleaved, caches flushed before each call
(a read of 64 MiB), medians; printed as the strategies' time over the library's (> 1: the
library is faster). `--threads 1` times the calling thread's CPU time (the default),
`--threads 2` the wall clock of two threads.

    python bench/cast_ab.py [--size 1M|64M ...] [--reps 9] [--threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from stridec.compiler.codegen.c import copy as ccopy
from stridec.compiler.codegen.c import plan as cplan
from stridec.compiler.codegen.spec import CopySpec, MaskBound
from stridec.ir.dtypes import DTYPES
from stridec.runtime.backends.cpu import CpuKernel


def _contiguous(sizes):
    strides, n = [], 1
    for s in reversed(sizes):
        strides.append(n)
        n *= s
    return tuple(reversed(strides))


def _permute(sizes, perm, src, dst):
    strides = _contiguous(sizes)
    out = tuple(sizes[p] for p in perm)
    return CopySpec(out, tuple(strides[p] for p in perm), 0, _contiguous(out), 0,
                    DTYPES[src], DTYPES[dst])


def cases(total: int) -> list[tuple[str, CopySpec]]:
    """Cast copies of `total` elements (about): rows, transposes, the lanes, flips."""
    side = int(total ** 0.5) // 16 * 16
    hw = int((total // 3) ** 0.5)
    out = []
    for s, d in (("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
                 ("bfloat16", "float32"), ("int64", "float32"), ("float32", "int32"),
                 ("uint8", "float32"), ("float64", "float32"), ("bool", "float32")):
        out.append((f"rows_{s}_{d}", _permute((total,), (0,), s, d)))
    for s, d in (("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"),
                 ("bfloat16", "float32"), ("uint8", "float32"), ("float32", "float64"),
                 ("int32", "int64"), ("uint8", "float16"), ("uint8", "bfloat16"),
                 ("int8", "float64"), ("uint8", "int16"), ("bool", "float16")):
        out.append((f"transpose_{s}_{d}", _permute((side, side), (1, 0), s, d)))
    # image bytes HWC -> CHW float (a deinterleave of 3), and back (an interleave)
    out.append(("hwc_to_chw_uint8_float32", _permute((hw, hw, 3), (2, 0, 1), "uint8", "float32")))
    out.append(("chw_to_hwc_float32_uint8", _permute((3, hw, hw), (1, 2, 0), "float32", "uint8")))
    out.append(("nchw_to_nhwc_float32_float16",
                _permute((1, 64, side // 8, side // 8), (0, 2, 3, 1), "float32", "float16")))
    out.append(("nchw_to_nhwc_uint8_float16",
                _permute((1, 64, side // 8, side // 8), (0, 2, 3, 1), "uint8", "float16")))
    flip = _permute((side, side), (0, 1), "float32", "float16")
    out.append(("flip_float32_float16", CopySpec(flip.sizes, (side, -1), side - 1,
                                                 flip.dst_strides, 0, flip.src_dtype,
                                                 flip.dst_dtype)))
    out.append(("slice2_float32_float16", CopySpec((side, side // 2), (side, 2), 0,
                                                   (side // 2, 1), 0, DTYPES["float32"],
                                                   DTYPES["float16"])))
    return out + masked_cases(total)


def _pad(sizes, pads, src, dst, fill=0.0):
    """A contiguous `sizes` source padded by `pads` (before, after) on each dim, into a
    contiguous output; the source's storage starts before its first element by as many
    elements as the pads shift it."""
    strides = _contiguous(sizes)
    out = tuple(n + lo + hi for n, (lo, hi) in zip(sizes, pads, strict=True))
    rank = len(sizes)
    masks = tuple(MaskBound(tuple(int(j == k) for j in range(rank)), lo, lo + n)
                  for k, (n, (lo, hi)) in enumerate(zip(sizes, pads, strict=True)) if lo or hi)
    return CopySpec(out, strides, 0, _contiguous(out), 0, DTYPES[src], DTYPES[dst], masks,
                    fill)


def _pack(n, c, h, w, k, src, dst):
    """NCHW -> NCHW<k>, the channels padded to a multiple of k with zeros."""
    cb = -(-c // k)
    out = (n, cb, h, w, k)
    ostr = _contiguous(out)
    spec = CopySpec((n, cb, k, h, w), (c * h * w, k * h * w, h * w, w, 1), 0,
                    (ostr[0], ostr[1], ostr[4], ostr[2], ostr[3]), 0, DTYPES[src],
                    DTYPES[dst], (MaskBound((0, k, 1, 0, 0), 0, c),), 0.0)
    return spec


def masked_cases(total: int) -> list[tuple[str, CopySpec]]:
    """Pads and padded packs that cast, of about `total` elements: the masked casts."""
    side = int(total ** 0.5) // 16 * 16
    hw = int((total // 16) ** 0.5)
    px = int((total // 3) ** 0.5)
    out = []
    for s, d in (("float16", "float32"), ("float32", "float16"), ("uint8", "float32"),
                 ("float32", "bfloat16")):
        out.append((f"pad_{s}_{d}", _pad((16, hw, hw), ((0, 0), (1, 1), (1, 1)), s, d)))
    for s, d in (("float32", "float16"), ("uint8", "float32"), ("float16", "float32")):
        out.append((f"pack4_c3_{s}_{d}", _pack(1, 3, px, px, 4, s, d)))
    out.append(("pack32_c3_float32_float16", _pack(1, 3, px // 3, px, 32, "float32", "float16")))
    tr = _pad((side, side), ((1, 1), (1, 1)), "float32", "float16")
    out.append(("pad_transposed_float32_float16", dataclasses.replace(tr, src_strides=(1, side))))
    return out


def _kernel(name, cls, params):
    return CpuKernel(name, ccopy._unit_source(cls), [(cls.symbol, 0, 1, params)])


def _storage(spec: CopySpec, strides, offset, dtype, fill=False):
    n = offset + 1 + sum((s - 1) * abs(st) for s, st in zip(spec.sizes, strides, strict=True))
    if fill:
        return (torch.randn(n) * 100).to(dtype.torch)
    return torch.empty(n, dtype=dtype.torch)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", nargs="*", default=["1M", "64M"])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    flush = torch.empty(64 << 18)
    for size in args.size:
        total = int(size[:-1]) << {"K": 10, "M": 20}[size[-1]]
        ratios = []
        for name, spec in cases(total // 4):  # elements of about `size` bytes of float32
            if args.only and not any(o in name for o in args.only):
                continue
            planned = cplan.planned_call(spec)
            old = ccopy._strategy_plan(spec)
            if planned is None or old is None:
                print(f"{name}_{size}: not planned")
                continue
            new_k = _kernel("new", *planned)
            old_k = _kernel("old", *old)
            src = _storage(spec, spec.src_strides, spec.src_offset, spec.src_dtype, True)
            dst_a = _storage(spec, spec.dst_strides, spec.dst_offset, spec.dst_dtype)
            dst_b = _storage(spec, spec.dst_strides, spec.dst_offset, spec.dst_dtype)
            old_k(None, src, dst_a)
            new_k(None, src, dst_b)
            assert torch.equal(dst_a.view(torch.uint8), dst_b.view(torch.uint8)), name
            times = {"old": [], "new": []}
            for _ in range(args.reps):
                for which, k, d in (("old", old_k, dst_a), ("new", new_k, dst_b)):
                    flush.add_(1)
                    t0 = clock()
                    k(None, src, d)
                    times[which].append(clock() - t0)
            o, n = statistics.median(times["old"]), statistics.median(times["new"])
            ratios.append(o / n)
            print(f"{name}_{size}: {planned[0].strategy:16s} old {o * 1e3:8.3f} ms  "
                  f"new {n * 1e3:8.3f} ms  old/new {o / n:5.2f}", flush=True)
        if ratios:
            print(f"geomean old/new {size}: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
