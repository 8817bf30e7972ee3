"""The fastest plain copy and the fastest plain write this machine does: the CPU race's
second and third yardsticks.

`dst.copy_(src)` of a contiguous buffer (the race's "memcpy") writes through the cache: a
line written that is not in the cache is first read from memory (read for ownership), so
the copy moves three lines per line. A copy with non-temporal ("streaming") stores moves
two; in the race on the 2-core test machine it runs about 1.3 times the memcpy's speed.
That copy, split into one contiguous part per thread, is the practical limit of a kernel
that has to read and write a row's bytes: a row copy (a slice, padded rows, a broadcast,
a cat) does not beat it in practice, so `eager ms / stream ms` bounds how much faster than
torch eager such a row can become (the "bound × eager" of the report).

A row that writes more than it reads (a broadcast materialized, random numbers, a fill)
has a second floor: it cannot take less time than writing its output's bytes. The
streaming write of that many bytes (`stream_fill`, the same stores, one contiguous part
per thread) times it; the row's bound is eager's time over the slower of the two.

The C unit is built and loaded by the `cpu` backend (its compiler, flags and disk cache)
and runs on the backend's thread pool, with the backend's streaming store primitive.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import torch

from stridec.compiler.codegen.c.pool import POOL_DECLARATION, STREAM_DECLARATION
from stridec.runtime.backends import cpu as cpu_backend

__all__ = ["stream_copy", "stream_fill"]

SOURCE = (
    "/* bench: a contiguous copy with streaming stores, one contiguous part a thread */\n"
    "#include <stdint.h>\n#include <string.h>\n"
    + POOL_DECLARATION + STREAM_DECLARATION
    + r"""
typedef struct { char* d; const char* s; int64_t n, parts; } part_job;

/* Part u of `parts`: its bounds on 64-byte multiples, the last part taking the rest. */
static int64_t bound(const part_job* J, int64_t u) {
    return u >= J->parts ? J->n : (J->n / J->parts * u) & ~(int64_t)63;
}

static void copy_parts(void* arg, int64_t u0, int64_t u1) {
    const part_job* J = (const part_job*)arg;
    for (int64_t u = u0; u < u1; u++) {
        int64_t a = bound(J, u), b = bound(J, u + 1);
        stream_copy(J->d + a, J->s + a, (size_t)(b - a));
    }
    stream_end();
}

/* The same parts written with a repeated 64-byte line (the byte 0x07). */
static void fill_parts(void* arg, int64_t u0, int64_t u1) {
    const part_job* J = (const part_job*)arg;
    char line[64] __attribute__((aligned(64)));
    memset(line, 7, sizeof line);
    for (int64_t u = u0; u < u1; u++) {
        int64_t a = bound(J, u), b = bound(J, u + 1);
        stream_fill(J->d + a, line, (size_t)(b - a));
    }
    stream_end();
}

void bench_stream_fill(void* d, int64_t n, int64_t nthreads) {
    part_job J = {(char*)d, 0, n, nthreads < 1 ? 1 : nthreads};
    stridec_pool_run_v1(fill_parts, &J, J.parts, 1, J.parts);
}

void bench_stream_copy(void* d, const void* s, int64_t n, int64_t nthreads) {
    part_job J = {(char*)d, (const char*)s, n, nthreads < 1 ? 1 : nthreads};
    stridec_pool_run_v1(copy_parts, &J, J.parts, 1, J.parts);
}
"""
)


def stream_copy(dst: torch.Tensor, src: torch.Tensor) -> Callable[[], None]:
    """A call that copies contiguous CPU `src` into `dst` (same byte count) with
    streaming stores on `torch.get_num_threads()` threads."""
    if not (src.is_contiguous() and dst.is_contiguous()) or src.nbytes != dst.nbytes:
        raise ValueError(f"stream_copy: two contiguous tensors of equal byte counts "
                         f"expected, got {src.nbytes} and {dst.nbytes} bytes")
    fn = cpu_backend.load_unit(SOURCE).bench_stream_copy
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    fn.restype = None
    args = (dst.data_ptr(), src.data_ptr(), src.nbytes, torch.get_num_threads())
    return lambda: fn(*args)


def stream_fill(dst: torch.Tensor) -> Callable[[], None]:
    """A call that writes every byte of contiguous CPU `dst` (the byte 7) with streaming
    stores on `torch.get_num_threads()` threads: the fastest write of that many bytes."""
    if not dst.is_contiguous():
        raise ValueError(f"stream_fill: a contiguous tensor expected, got strides "
                         f"{tuple(dst.stride())} for sizes {tuple(dst.shape)}")
    fn = cpu_backend.load_unit(SOURCE).bench_stream_fill
    fn.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    fn.restype = None
    args = (dst.data_ptr(), dst.nbytes, torch.get_num_threads())
    return lambda: fn(*args)
