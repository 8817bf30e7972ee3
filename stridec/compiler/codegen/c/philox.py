"""C source for the `philox` op on the CPU: Philox4x32-10 bits or uniforms, DirectML semantics.

The same kernel as the Triton one (`stridec.compiler.codegen.philox`); both render one plan
(`stridec.compiler.codegen.philox_plan`, which validates and coalesces the spec): the
iteration space `c` of sizes `n` maps to

    logical index  i(c) = index_offset + Σ c_k · index_strides_k   (row-major in the output)
    destination    d(c) = dst_offset   + Σ c_k · dst_strides_k      (flat output storage)

and element `d` receives word `i mod 4` of Philox4x32-10(counter + ⌊i/4⌋, key), the
counter sum taken mod 2^128, or the fill where a mask `lo <= Σ coeffs_k · c_k < hi`
fails. Uniforms are `fma(float32(bits >> (32 - d)) · 2^-d, scale32, low32)` (`d` the
dtype's `UNIFORM_BITS`: 24, 11, 8), rounded to float16 / bfloat16 to nearest even
(`codegen.c.casts`).

One compile unit serves every philox op: its source is a constant (`PHILOX_C_SOURCE`)
and everything about the spec is a runtime argument, so one library is built per
machine; over symbolic sizes (`generate_c_philox(..., hint=...)`) the parameters are
expressions of the symbols, evaluated per call. It exports, each with the signature of
the C copy kernels `void f(const void *state, void *dst, const int64_t *p, int64_t nthreads)`:

* `stridec_philox_bits` (uint32 / int32 words), `stridec_philox_uniform_f32`,
  `stridec_philox_uniform_f16`, `stridec_philox_uniform_bf16`: the output. `state` is
  the flat storage holding the 6 state words, `dst` the flat output storage;
* `stridec_philox_advance`: `dst` is the flat storage of `new_state`.

A philox op is two calls, in this order: the output, then `stridec_philox_advance`.
The state may therefore alias `new_state` (an in-place `out=` state): every thread of the
first call has finished reading the state before the second reads it (once, into locals)
and writes the advanced counter.

The int64 parameters `p` of an output call (`philox_params`), element positions counted
in words of the storages:

    p[0] = R, the rank of the iteration space (1 … MAX_RANK)  p[1] = numel of the output
    p[2] = index_offset        p[3] = dst_offset           p[4] = M, the number of masks
    p[5] = the fill's bits (low 16 or 32 bits)             p[6] = 1 for the linear path
    p[7] = the float32 bits of low32, p[8] = those of scale32 (uniforms; else 0)
    p[9 : 15]  the positions of state words 0 … 5 in `state`
    p[15] = 0
    p[16 : 16+R] sizes, p[16+R : 16+2R] index strides, p[16+2R : 16+3R] dst strides,
    then per mask: R coefficients, lo, hi.

The linear path (`p[6] == 1`: the output is contiguous, `i == d - dst_offset`, no mask)
walks counters: block `q` gives elements `4q … 4q+3`. Anything else walks the iteration
space with an odometer (additions, not divisions) and computes one block per element.
Either way 16 blocks run side by side in arrays gcc vectorizes (32 × 32 → 64-bit
products as `vpmuludq`). When there is enough work, the calling thread and up to
`nthreads - 1` workers of the process's thread pool (`codegen/c/pool.py`) share it in
chunks claimed from an atomic counter, and the call waits only for chunks a worker has
claimed: on a busy machine a worker the scheduler wakes late finds nothing left, and the
call costs what one thread costs.

The parameters of the advance call (`advance_params`):

    p[0 : 6]  the positions of state words 0 … 5 in `state`
    p[6 : 12] the positions of new_state words 0 … 5 in `dst`
    p[12] = ⌈numel / 4⌉, the number of blocks the output used (< 2^63)

Worked example (the linear path): counter `ffffffff 0 0 0`, element `i = 9` of a
contiguous output is block `q = ⌊9/4⌋ = 2`, counter `2^32 − 1 + 2` (words
`00000001 00000001 0 0`), word `9 mod 4 = 1`, stored at `dst_offset + 9`.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from stridec.compiler.codegen.c.casts import C_PRELUDE
from stridec.compiler.codegen.c.copy import CKernel
from stridec.compiler.codegen.c.parts import PARTS_DECLARATION
from stridec.compiler.codegen.c.pool import POOL_DECLARATION
from stridec.compiler.codegen.philox_plan import (
    UNIFORM_BITS,
    PhiloxPlan,
    PhiloxSpec,
    dst_elements,
    is_linear,
    plan_philox,
    plans,
)
from stridec.errors import ShapeError, UnsupportedError
from stridec.ir.affine import MAX_RANK
from stridec.ir.dtypes import DType
from stridec.ir.symbols import Sym, ceil_div, statically_true

__all__ = [
    "PHILOX_C_SOURCE",
    "CPhiloxKernel",
    "advance_params",
    "call_fits",
    "generate_c_philox",
    "philox_params",
    "philox_symbol",
]

HEADER_WORDS = 16
MAX_MASKS = 16  # the C kernel's running mask sums, `m[16]`
ADVANCE_SYMBOL = "stridec_philox_advance"
_SYMBOLS = {
    "bits": "stridec_philox_bits",
    "float32": "stridec_philox_uniform_f32",
    "float16": "stridec_philox_uniform_f16",
    "bfloat16": "stridec_philox_uniform_bf16",
}
# Random123 philox.h constants, written out again (not imported): the C kernel, the
# Triton kernel and the numpy reference are kept independent so that each checks the
# others.
_CONSTANTS = r"""
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
"""

_COMMON = r"""
#include <stdlib.h>

typedef int64_t i64;
typedef uint32_t u32;
typedef uint64_t u64;

/* Blocks computed side by side: arrays of this many lanes are what gcc vectorizes. */
#define LANES 16
/* Before a loop over the lanes that fills an array the rounds then load as vectors: not
   unrolled, so gcc vectorizes it as a loop; unrolled first, it stores lane by lane and the
   vector loads stall on those stores. */
#define LANE_LOOP _Pragma("GCC unroll 1")
#define MAXT 256
/* Below this much work (blocks or positions) a call runs on one thread: 2^15 blocks take
   tens of µs on one core, several times what waking a parked pool worker costs. */
#define PARALLEL_BLOCKS (1 << 15)

typedef struct {
    u64 ctr_lo, ctr_hi; /* the 128-bit counter: words 0-1, words 2-3 */
    u32 key0, key1;
} philox_key_t;

static philox_key_t read_state(const u32 *state, const i64 *pos) {
    u32 w[6];
    for (int k = 0; k < 6; k++) w[k] = state[pos[k]];
    philox_key_t s;
    s.ctr_lo = (u64)w[0] | (u64)w[1] << 32;
    s.ctr_hi = (u64)w[2] | (u64)w[3] << 32;
    s.key0 = w[4];
    s.key1 = w[5];
    return s;
}

/* The counter words of ctr + q[l] (mod 2^128), l < LANES, into x[0..3][l]. */
static inline void philox_counters(const philox_key_t *s, const u64 *restrict q,
                                   u32 x[4][LANES]) {
    LANE_LOOP
    for (int l = 0; l < LANES; l++) {
        u64 lo = s->ctr_lo + q[l];
        u64 hi = s->ctr_hi + (lo < q[l]); /* the carry out of the low 64 bits */
        x[0][l] = (u32)lo;
        x[1][l] = (u32)(lo >> 32);
        x[2][l] = (u32)hi;
        x[3][l] = (u32)(hi >> 32);
    }
}

/* Philox4x32-10 (Random123) of the counters ctr + q[l] (mod 2^128), l < LANES: word w of
   lane l lands in y[w][l]. One round, hi/lo the halves of the 64-bit products:
   (x0, x1, x2, x3) -> (hi(M1·x2) ^ x1 ^ k0, lo(M1·x2), hi(M0·x0) ^ x3 ^ k1, lo(M0·x0)),
   the key bumped by (W0, W1) between rounds.

   With AVX-512 or AVX2 the 32 x 32 -> 64-bit products are vpmuludq on the even and odd
   lanes (gcc's own vectorization widens to 64-bit lanes and uses the slower vpmullq);
   elsewhere plain C that gcc vectorizes as it can. */
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
#define VLANES 16
typedef __m512i vec_t;
#define V_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_STORE(p, v) _mm512_storeu_si512((void *)(p), v)
#define V_SET1(x) _mm512_set1_epi32((int)(x))
#define V_MUL_EVEN(a, b) _mm512_mul_epu32(a, b)
#define V_SRL64(a, n) _mm512_srli_epi64(a, n)
#define V_SLL64(a, n) _mm512_slli_epi64(a, n)
#define V_ODD_FROM(even, odd) _mm512_mask_blend_epi32((__mmask16)0xAAAA, even, odd)
#define V_XOR3(a, b, c) _mm512_ternarylogic_epi32(a, b, c, 0x96)
#elif defined(__AVX2__)
#define VLANES 8
typedef __m256i vec_t;
#define V_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_STORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define V_SET1(x) _mm256_set1_epi32((int)(x))
#define V_MUL_EVEN(a, b) _mm256_mul_epu32(a, b)
#define V_SRL64(a, n) _mm256_srli_epi64(a, n)
#define V_SLL64(a, n) _mm256_slli_epi64(a, n)
#define V_ODD_FROM(even, odd) _mm256_blend_epi32(even, odd, 0xAA)
#define V_XOR3(a, b, c) _mm256_xor_si256(_mm256_xor_si256(a, b), c)
#endif

#if defined(__AVX512F__)
/* The counter words of ctr + q[l], l < 16, in registers: 64-bit sums, then their low and
   high halves gathered into 32-bit lanes. */
static inline void philox_counters_v(const philox_key_t *s, const u64 *q, vec_t *x0, vec_t *x1,
                                     vec_t *x2, vec_t *x3) {
    const __m512i cl = _mm512_set1_epi64((long long)s->ctr_lo);
    const __m512i ch = _mm512_set1_epi64((long long)s->ctr_hi);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                          29, 31);
    __m512i qa = _mm512_loadu_si512((const void *)q);
    __m512i qb = _mm512_loadu_si512((const void *)(q + 8));
    __m512i la = _mm512_add_epi64(cl, qa), lb = _mm512_add_epi64(cl, qb);
    __m512i ha = _mm512_mask_add_epi64(ch, _mm512_cmplt_epu64_mask(la, qa), ch, one);
    __m512i hb = _mm512_mask_add_epi64(ch, _mm512_cmplt_epu64_mask(lb, qb), ch, one);
    *x0 = _mm512_permutex2var_epi32(la, even, lb);
    *x1 = _mm512_permutex2var_epi32(la, odd, lb);
    *x2 = _mm512_permutex2var_epi32(ha, even, hb);
    *x3 = _mm512_permutex2var_epi32(ha, odd, hb);
}
#elif defined(__AVX2__)
static inline __m256i philox_halves(__m256i a, __m256i b, int imm_odd) {
    __m256 f = imm_odd ? _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0xDD)
                       : _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), 0x88);
    return _mm256_permute4x64_epi64(_mm256_castps_si256(f), 0xD8);
}
/* As the AVX-512 version, for 8 lanes. */
static inline void philox_counters_v(const philox_key_t *s, const u64 *q, vec_t *x0, vec_t *x1,
                                     vec_t *x2, vec_t *x3) {
    const __m256i cl = _mm256_set1_epi64x((long long)s->ctr_lo);
    const __m256i ch = _mm256_set1_epi64x((long long)s->ctr_hi);
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    __m256i qa = _mm256_loadu_si256((const __m256i *)q);
    __m256i qb = _mm256_loadu_si256((const __m256i *)(q + 4));
    __m256i la = _mm256_add_epi64(cl, qa), lb = _mm256_add_epi64(cl, qb);
    /* unsigned la < qa as a signed compare of both with the top bit flipped: -1 or 0 */
    __m256i ca = _mm256_cmpgt_epi64(_mm256_xor_si256(qa, sign), _mm256_xor_si256(la, sign));
    __m256i cb = _mm256_cmpgt_epi64(_mm256_xor_si256(qb, sign), _mm256_xor_si256(lb, sign));
    __m256i ha = _mm256_sub_epi64(ch, ca), hb = _mm256_sub_epi64(ch, cb);
    *x0 = philox_halves(la, lb, 0);
    *x1 = philox_halves(la, lb, 1);
    *x2 = philox_halves(ha, hb, 0);
    *x3 = philox_halves(ha, hb, 1);
}
#endif

/* Out of line: one copy for the unit's eight callers (every variant's linear and gather
   loops), a call per LANES blocks. Inlined in each, it was a quarter of gcc's time on
   the unit. */
static __attribute__((noinline)) void philox_lanes(const philox_key_t *s, const u64 *restrict q,
                                u32 y[4][LANES]) {
#ifdef VLANES
    const vec_t m0 = V_SET1(PHILOX_M0), m1 = V_SET1(PHILOX_M1);
    for (int v = 0; v < LANES; v += VLANES) {
        vec_t x0, x1, x2, x3;
        philox_counters_v(s, q + v, &x0, &x1, &x2, &x3);
        u32 k0 = s->key0, k1 = s->key1;
        for (int r = 0; r < 10; r++) {
            /* 64-bit products of the even lanes, and of the odd lanes shifted down */
            vec_t e0 = V_MUL_EVEN(x0, m0), o0 = V_MUL_EVEN(V_SRL64(x0, 32), m0);
            vec_t e1 = V_MUL_EVEN(x2, m1), o1 = V_MUL_EVEN(V_SRL64(x2, 32), m1);
            vec_t hi0 = V_ODD_FROM(V_SRL64(e0, 32), o0), lo0 = V_ODD_FROM(e0, V_SLL64(o0, 32));
            vec_t hi1 = V_ODD_FROM(V_SRL64(e1, 32), o1), lo1 = V_ODD_FROM(e1, V_SLL64(o1, 32));
            x0 = V_XOR3(hi1, x1, V_SET1(k0));
            x2 = V_XOR3(hi0, x3, V_SET1(k1));
            x1 = lo1;
            x3 = lo0;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        V_STORE(&y[0][v], x0);
        V_STORE(&y[1][v], x1);
        V_STORE(&y[2][v], x2);
        V_STORE(&y[3][v], x3);
    }
#else
    u32 x[4][LANES];
    philox_counters(s, q, x);
    for (int l = 0; l < LANES; l++) {
        u32 x0 = x[0][l], x1 = x[1][l], x2 = x[2][l], x3 = x[3][l];
        u32 k0 = s->key0, k1 = s->key1;
#pragma GCC unroll 10
        for (int r = 0; r < 10; r++) {
            u64 p0 = (u64)PHILOX_M0 * x0;
            u64 p1 = (u64)PHILOX_M1 * x2;
            u32 n0 = (u32)(p1 >> 32) ^ x1 ^ k0;
            u32 n2 = (u32)(p0 >> 32) ^ x3 ^ k1;
            x1 = (u32)p1;
            x3 = (u32)p0;
            x0 = n0;
            x2 = n2;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        y[0][l] = x0;
        y[1][l] = x1;
        y[2][l] = x2;
        y[3][l] = x3;
    }
#endif
}

/* y[w][l] -> out[4l + w]: the four words of each block side by side, as a 4 x 4 transpose
   of 32-bit lanes per four blocks (gcc's own interleaving of the plain loop is slower). */
typedef u32 u32x4 __attribute__((vector_size(16)));
static inline void interleave4_u32(u32 *restrict out, const u32 y[4][LANES]) {
    for (int l = 0; l < LANES; l += 4) {
        u32x4 a, b, c, d;
        memcpy(&a, &y[0][l], 16);
        memcpy(&b, &y[1][l], 16);
        memcpy(&c, &y[2][l], 16);
        memcpy(&d, &y[3][l], 16);
        u32x4 ab0 = __builtin_shuffle(a, b, (u32x4){0, 4, 1, 5});
        u32x4 ab1 = __builtin_shuffle(a, b, (u32x4){2, 6, 3, 7});
        u32x4 cd0 = __builtin_shuffle(c, d, (u32x4){0, 4, 1, 5});
        u32x4 cd1 = __builtin_shuffle(c, d, (u32x4){2, 6, 3, 7});
        u32x4 r[4] = {__builtin_shuffle(ab0, cd0, (u32x4){0, 1, 4, 5}),
                      __builtin_shuffle(ab0, cd0, (u32x4){2, 3, 6, 7}),
                      __builtin_shuffle(ab1, cd1, (u32x4){0, 1, 4, 5}),
                      __builtin_shuffle(ab1, cd1, (u32x4){2, 3, 6, 7})};
        memcpy(out + 4 * l, r, sizeof r);
    }
}

typedef struct {
    philox_key_t key;
    void *dst;
    i64 R, numel, ioff, doff, M;
    i64 fill;
    float low, scale;
    const i64 *n, *is, *ds, *mk;
    i64 work; /* blocks (linear) or positions (gather) */
    int linear;
} philox_job_t;

static void philox_job_init(philox_job_t *J, const void *state, void *dst, const i64 *p) {
    memset(J, 0, sizeof *J);
    J->key = read_state((const u32 *)state, p + 9);
    J->dst = dst;
    J->R = p[0];
    J->numel = p[1];
    J->ioff = p[2];
    J->doff = p[3];
    J->M = p[4];
    J->fill = p[5];
    J->linear = (int)p[6];
    u32 low = (u32)p[7], scale = (u32)p[8];
    memcpy(&J->low, &low, 4);
    memcpy(&J->scale, &scale, 4);
    J->n = p + 16;
    J->is = p + 16 + J->R;
    J->ds = p + 16 + 2 * J->R;
    J->mk = p + 16 + 3 * J->R;
    i64 space = 1;
    for (i64 k = 0; k < J->R; k++) space *= J->n[k];
    J->work = J->linear ? (J->numel + 3) / 4 : space;
}

typedef void (*philox_work_fn)(const philox_job_t *J, i64 w0, i64 w1);

/* One call's work as a task of the process's thread pool (codegen/c/pool.py). */
typedef struct {
    const philox_job_t *J;
    philox_work_fn fn;
} philox_task_t;

static void philox_task(void *arg, i64 w0, i64 w1) {
    const philox_task_t *T = (const philox_task_t *)arg;
    T->fn(T->J, w0, w1);
}

/* Run [0, J->work) on this thread and up to nthreads - 1 pool workers. */
static void philox_run(const philox_job_t *J, philox_work_fn fn, i64 nthreads) {
    if (J->work <= 0) return;
    if (nthreads > MAXT) nthreads = MAXT;
    if (nthreads <= 1 || J->work < PARALLEL_BLOCKS) { /* a block or a position: one Philox */
        fn(J, 0, J->work);
        return;
    }
    philox_task_t T = {J, fn};
    i64 chunk = J->work / (8 * nthreads); /* 8 chunks a thread: the faster ones take more */
    chunk = chunk < 4096 ? 4096 : (chunk + LANES - 1) / LANES * LANES;
    stridec_pool_run_v1(philox_task, &T, J->work, chunk, nthreads);
}

/* new_state = (counter + blocks mod 2^128, key), the state read once before any write:
   new_state may be the state itself. */
#if IN_PART(1)
void stridec_philox_advance(const void *state, void *dst, const i64 *p, i64 nthreads) {
    (void)nthreads;
    philox_key_t s = read_state((const u32 *)state, p);
    u64 lo = s.ctr_lo + (u64)p[12];
    u64 hi = s.ctr_hi + (lo < (u64)p[12]);
    u32 w[6] = {(u32)lo, (u32)(lo >> 32), (u32)hi, (u32)(hi >> 32), s.key0, s.key1};
    u32 *out = (u32 *)dst;
    for (int k = 0; k < 6; k++) out[p[6 + k]] = w[k];
}
#endif
"""

# One output variant: `out_t` the stored element, CONVERT(w, J) the value of word `w`.
_VARIANT = r"""
static inline @OUT_T@ @NAME@_convert(u32 w, float low, float scale) {
    (void)low; (void)scale;
    return @CONVERT@;
}

/* Blocks [q0, q1) of a contiguous output: elements 4q ... 4q+3 (those below numel). */
static void @NAME@_linear(const philox_job_t *J, i64 q0, i64 q1) {
    @OUT_T@ *restrict dst = (@OUT_T@ *)J->dst + J->doff;
    const float low = J->low, scale = J->scale;
    u64 q[LANES];
    u32 y[4][LANES];
    for (i64 b = q0; b < q1; b += LANES) {
        LANE_LOOP
        for (int l = 0; l < LANES; l++) q[l] = (u64)(b + l);
        philox_lanes(&J->key, q, y);
        if (b + LANES <= q1 && 4 * (b + LANES) <= J->numel) {
            @STORE_FULL@
        } else {
            for (int l = 0; l < LANES && b + l < q1; l++)
                for (int w = 0; w < 4; w++) {
                    i64 i = 4 * (b + l) + w;
                    if (i < J->numel) dst[i] = @NAME@_convert(y[w][l], low, scale);
                }
        }
    }
}

/* Positions [p0, p1) of the iteration space, row-major: rows of the innermost dim in runs
   of LANES, the outer dims by an odometer (additions, not divisions). Built at -O2: its
   loops move one element at a time through index arithmetic and masks, which -O3 only
   multiplied into more code (a third of gcc's time on the unit); the rounds are
   philox_lanes'. */
static __attribute__((optimize("O2"))) void @NAME@_gather(const philox_job_t *J, i64 p0, i64 p1) {
    @OUT_T@ *restrict dst = (@OUT_T@ *)J->dst;
    const i64 R = J->R, M = J->M, K = R - 1; /* R >= 1; K: the innermost dim */
    const i64 *n = J->n, *is = J->is, *ds = J->ds, *mk = J->mk;
    const i64 nk = n[K], isk = is[K], dsk = ds[K];
    const float low = J->low, scale = J->scale;
    @OUT_T@ fill;
    memcpy(&fill, &J->fill, sizeof fill); /* little-endian: the low bytes */
    /* i, d, m[]: the logical index, destination and mask sums at the start of the row */
    i64 c[@MAX_RANK@], m[16];
    i64 i = J->ioff, d = J->doff;
    for (i64 j = 0; j < M; j++) m[j] = 0;
    i64 rest = p0;
    for (i64 k = K; k >= 0; k--) {
        c[k] = rest % n[k];
        rest /= n[k];
        if (k == K) continue;
        i += c[k] * is[k];
        d += c[k] * ds[k];
        for (i64 j = 0; j < M; j++) m[j] += c[k] * mk[j * (R + 2) + k];
    }
    u64 q[LANES];
    i64 idx[LANES], at[LANES];
    int valid[LANES];
    u32 y[4][LANES];
    @OUT_T@ val[LANES];
    i64 left = p1 - p0, first = c[K];
    while (left > 0) {
        i64 end = nk - first < left ? nk : first + left;
        for (i64 t = first; t < end; t += LANES) {
            int lanes = end - t < LANES ? (int)(end - t) : LANES;
            LANE_LOOP
            for (int l = 0; l < LANES; l++) {
                idx[l] = i + (t + l) * isk;
                at[l] = d + (t + l) * dsk;
                valid[l] = l < lanes;
            }
            for (i64 j = 0; j < M; j++) {
                const i64 *mj = mk + j * (R + 2);
                const i64 lo = mj[R], hi = mj[R + 1], base = m[j], step = mj[K];
                LANE_LOOP
                for (int l = 0; l < LANES; l++) {
                    i64 v = base + (t + l) * step;
                    valid[l] &= lo <= v && v < hi;
                }
            }
            LANE_LOOP
            for (int l = 0; l < LANES; l++) /* a masked-out lane may index anywhere */
                q[l] = (u64)((valid[l] ? idx[l] : 0) >> 2);
            philox_lanes(&J->key, q, y);
            for (int l = 0; l < LANES; l++) {
                i64 w = idx[l] & 3; /* the four words loaded unconditionally: a select */
                u32 y0 = y[0][l], y1 = y[1][l], y2 = y[2][l], y3 = y[3][l];
                u32 word = w == 0 ? y0 : w == 1 ? y1 : w == 2 ? y2 : y3;
                @OUT_T@ v = @NAME@_convert(word, low, scale);
                val[l] = valid[l] ? v : fill;
            }
            if (dsk == 1) {
                @OUT_T@ *restrict out = dst + at[0];
                for (int l = 0; l < lanes; l++) out[l] = val[l];
            } else {
                for (int l = 0; l < lanes; l++) dst[at[l]] = val[l];
            }
        }
        left -= end - first;
        first = 0;
        for (i64 k = K - 1; k >= 0; k--) { /* the next row */
            c[k]++;
            i += is[k];
            d += ds[k];
            for (i64 j = 0; j < M; j++) m[j] += mk[j * (R + 2) + k];
            if (c[k] < n[k]) break;
            c[k] = 0;
            i -= n[k] * is[k];
            d -= n[k] * ds[k];
            for (i64 j = 0; j < M; j++) m[j] -= n[k] * mk[j * (R + 2) + k];
        }
    }
}

void @NAME@(const void *state, void *dst, const i64 *p, i64 nthreads) {
    philox_job_t J;
    philox_job_init(&J, state, dst, p);
    philox_run(&J, J.linear ? @NAME@_linear : @NAME@_gather, nthreads);
}
"""



def _uniform(dtype: str) -> str:
    """float32(bits >> (32 - d)) · 2^-d is exact (d <= 24 bits, the dtype's own); one fused
    multiply-add then rounds once."""
    d = UNIFORM_BITS[dtype]
    return f"__builtin_fmaf((float)(int32_t)(w >> {32 - d}) * 0x1p-{d}f, scale, low)"


_VARIANTS = {
    "bits": ("u32", "w"),
    "float32": ("float", _uniform("float32")),
    "float16": ("uint16_t", f"stridec_f32_to_f16({_uniform('float16')})"),
    "bfloat16": ("uint16_t", f"stridec_f32_to_bf16({_uniform('bfloat16')}, 0xffffu)"),
}


# The store of LANES whole blocks: bits through the explicit 4 x 4 transpose, uniforms by
# the converting loop, which gcc vectorizes with its interleave (faster there).
_STORE_FULL = {
    "bits": "interleave4_u32(dst + 4 * b, y);",
}
_STORE_LOOP = """@OUT_T@ *restrict out = dst + 4 * b;
            for (int l = 0; l < LANES; l++)
                for (int w = 0; w < 4; w++) out[4 * l + w] = @NAME@_convert(y[w][l], low, scale);"""


# The unit is built in two parts at once (`codegen/c/parts.py`): the advance, the bits and
# float32 in the first, float16 and bfloat16 in the second.
_PART = {"bits": 1, "float32": 1, "float16": 2, "bfloat16": 2}


def _source() -> str:
    parts = ["/* stridec C Philox4x32-10 kernels (one compile unit for every philox op) */",
             C_PRELUDE, PARTS_DECLARATION, f"#define STRIDEC_PARTS {max(_PART.values())}",
             POOL_DECLARATION, _CONSTANTS, _COMMON]
    for key, (out_t, convert) in _VARIANTS.items():
        parts.append(
            f"#if IN_PART({_PART[key]})"
            + _VARIANT.replace("@STORE_FULL@", _STORE_FULL.get(key, _STORE_LOOP))
            .replace("@NAME@", _SYMBOLS[key])
            .replace("@OUT_T@", out_t)
            .replace("@CONVERT@", convert)
            .replace("@MAX_RANK@", str(MAX_RANK))
            + "#endif"
        )
    return "\n".join(parts)


PHILOX_C_SOURCE = _source()


def philox_symbol(spec: PhiloxSpec) -> str:
    """The exported function writing `spec`'s output."""
    if spec.distribution == "bits":
        return _SYMBOLS["bits"]
    return _SYMBOLS[plan_philox(spec).dtype.name]


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _nonneg(x: Any) -> bool:
    """`x >= 0` for every value of its symbols (an int: as it is)."""
    return statically_true(x >= 0) if isinstance(x, Sym) else x >= 0


def _word_positions(words: Sequence[Any], what: str) -> tuple[Any, ...]:
    out = tuple(w if isinstance(w, Sym) else int(w) for w in words)
    if len(out) != 6 or not all(_nonneg(w) for w in out):
        raise ShapeError(f"philox: {what} must be 6 word positions >= 0; got {words!r}")
    return out


def philox_params(spec: PhiloxSpec, state_words: Sequence[int] = range(6),
                  hint: Mapping[str, int] | None = None) -> tuple[int, ...]:
    """The int64 parameters of `spec`'s output call (layout in the module docstring);
    `state_words` are the element positions of the 6 state words in the state storage.
    Over symbolic sizes (with `hint`, a binding of the class), expressions."""
    plan, at, _ = plans(spec, hint)
    return _params(plan, at, state_words)


def _params(plan: PhiloxPlan, at: PhiloxPlan, state_words: Sequence[Any]) -> tuple[Any, ...]:
    rank = len(plan.sizes)
    linear = at.space_numel > 0 and is_linear(plan)
    header = [
        rank, plan.numel, plan.index_offset, plan.dst_offset, len(plan.masks),
        plan.fill_bits, int(linear),
        _f32_bits(plan.low32) if plan.uniform else 0,
        _f32_bits(plan.scale32) if plan.uniform else 0,
        *_word_positions(state_words, "state words"), 0,
    ]
    assert len(header) == HEADER_WORDS
    if len(plan.masks) > MAX_MASKS:
        raise UnsupportedError(
            f"philox: at most {MAX_MASKS} masks are supported; got {len(plan.masks)}"
        )
    # The gather path may walk the space in any order (each element's value depends on its
    # logical index only): destination strides descending (at the hint, for a symbolic
    # plan: any order is right for every value), so the writes run forward through memory
    # instead of striding across it.
    # A rank-0 space is walked as one dim of size 1 (the gather path needs an innermost dim).
    order = sorted(range(rank), key=lambda k: -abs(at.dst_strides[k]))
    sizes = [plan.sizes[k] for k in order] or [1]
    params = header + sizes
    params += [plan.index_strides[k] for k in order] or [0]
    params += [plan.dst_strides[k] for k in order] or [0]
    for coeffs, lo, hi in plan.masks:
        params += [*(coeffs[k] for k in order), lo, hi] if order else [0, lo, hi]
    params[0] = len(sizes)
    return tuple(params)


def advance_params(
    numel: Any, state_words: Sequence[Any] = range(6),
    new_state_words: Sequence[Any] = range(6),
) -> tuple[Any, ...]:
    """The int64 parameters of the `stridec_philox_advance` call of an output of `numel`
    (an expression over symbolic sizes)."""
    blocks = ceil_div(numel if isinstance(numel, Sym) else int(numel), 4)
    return (*_word_positions(state_words, "state words"),
            *_word_positions(new_state_words, "new_state words"), blocks)


def call_fits(symbol: str, params: Sequence[Any]) -> bool:
    """Whether `params` are whole parameters of the philox call `symbol` (the layouts in the
    module docstring): for checking a program read back from disk before it runs. A
    symbolic parameter (a program over symbolic sizes) must be >= 0 for every value where
    the value must be."""
    p = tuple(params)
    if symbol == ADVANCE_SYMBOL:
        return len(p) == 13 and all(_nonneg(w) for w in p)
    if symbol not in _SYMBOLS.values() or len(p) < HEADER_WORDS:
        return False
    rank, masks = p[0], p[4]
    if isinstance(rank, Sym) or isinstance(masks, Sym) or isinstance(p[6], Sym):
        return False
    return (1 <= rank <= MAX_RANK and 0 <= masks <= MAX_MASKS and _nonneg(p[1]) and p[6] in (0, 1)
            and all(_nonneg(w) for w in p[9:15])
            and len(p) == HEADER_WORDS + 3 * rank + masks * (rank + 2))


@dataclass(frozen=True, slots=True)
class CPhiloxKernel(CKernel):
    """A philox op as calls of the compiled C unit `PHILOX_C_SOURCE` (`CKernel`), with the
    launch's storages `(state, dst, new_state)`. `dst_elements` is the smallest flat
    destination storage (in elements) the output addresses, of `dst_dtype`."""

    _: KW_ONLY
    dst_elements: int
    dst_dtype: DType
    kind: str = "philox"


def generate_c_philox(
    spec: PhiloxSpec,
    state_words: Sequence[int] = range(6),
    new_state_words: Sequence[int] = range(6),
    hint: Mapping[str, int] | None = None,
) -> CPhiloxKernel:
    """The C kernel of `spec`: the output call, then the state advance. `state_words` /
    `new_state_words` are the element positions of the 6 words in the state and new_state
    storages (a strided or offset state view). Bad specs raise `ShapeError` /
    `UnsupportedError` naming the field, as `generate_philox`.

    A spec over symbolic sizes is planned for the class of the binding `hint`
    (`codegen.philox_plan.symbolic_plan`): the same compiled unit, its calls' parameters
    expressions of the symbols (`Program.bind` / `SymbolicRunner` evaluate them per
    call), the state advance ⌈numel/4⌉ among them."""
    plan, at, _ = plans(spec, hint)
    if at.space_numel == 0:
        if isinstance(plan.space_numel, Sym):
            raise UnsupportedError(
                f"philox: the hint {dict(hint or {})} makes the space {plan.sizes} empty; "
                "plan for a binding that writes something"
            )
        strategy = "empty"
    else:
        strategy = "linear" if is_linear(plan) else "gather"
    calls: list[tuple[str, int, int, tuple[Any, ...]]] = []
    if at.space_numel > 0:
        symbol = _SYMBOLS["bits" if not plan.uniform else plan.dtype.name]
        calls.append((symbol, 0, 1, _params(plan, at, state_words)))
    calls.append((ADVANCE_SYMBOL, 0, 2, advance_params(plan.numel, state_words,
                                                         new_state_words)))
    digest = hashlib.sha256(repr(calls).encode()).hexdigest()[:16]
    return CPhiloxKernel(
        name=f"stridec_c_philox_{digest}",
        strategy=strategy,
        source=PHILOX_C_SOURCE,
        calls=tuple(calls),
        numel=plan.numel,
        dst_elements=dst_elements(plan, at),
        dst_dtype=plan.dtype,
    )


def run_calls(lib: Any, calls: Sequence[tuple[str, int, int, Sequence[int]]],
              storages: Sequence[Any], nthreads: int) -> None:
    """Make `calls` on a loaded library (ctypes) over storages with `data_ptr()` — for
    tests and direct use; a program runs them through the runtime."""
    import ctypes

    for symbol, src_arg, dst_arg, params in calls:
        fn = getattr(lib, symbol)
        array = (ctypes.c_int64 * len(params))(*params)
        fn(ctypes.c_void_p(storages[src_arg].data_ptr()),
           ctypes.c_void_p(storages[dst_arg].data_ptr()), array, ctypes.c_int64(nthreads))
