/* stridec's Philox4x32-10 kernels on the CPU: one compile unit for every philox op (the
   semantics: stridec/compiler/codegen/c/philox.py and docs/philox.md). Every spec reaches
   it at run time as an argument block (philox_abi.h), so one library is built per machine.
   codegen/c/philox.py pastes before it the conversions (casts.h), and the files it
   includes in their place.

   The linear path (a contiguous output, index == position - dst_offset, no mask) walks
   counters: block q gives elements 4q ... 4q+3. Anything else walks the iteration space
   with an odometer (additions, not divisions) and computes one block per element. Either
   way 16 blocks run side by side in arrays gcc vectorizes (32 x 32 -> 64-bit products as
   vpmuludq). When there is enough work, the calling thread and up to nthreads - 1 workers
   of the process's thread pool share it in chunks claimed from an atomic counter, and the
   call waits only for chunks a worker has claimed: on a busy machine a worker the
   scheduler wakes late finds nothing left, and the call costs what one thread costs.

   Built in two parts at once (codegen/c/parts.py): the advance, the bits and float32 in
   the first, float16 and bfloat16 in the second. */
#define STRIDEC_PARTS 2
#include <stdlib.h>
#include "parts.h"
#include "pool.h"
#include "philox_abi.h"

/* Random123 philox.h constants, written out again (not imported): the C kernel, the Triton
   kernel and the numpy reference are kept independent so that each checks the others. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

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

/* The argument blocks' words by name (philox_abi.h): PHILOX_P_numel, ADVANCE_P_blocks, ... */
#define PHILOX_P_FIELD(name) PHILOX_P_##name,
enum { STRIDEC_PHILOX_HEADER(PHILOX_P_FIELD) PHILOX_P_WORDS };
#define ADVANCE_P_FIELD(name) ADVANCE_P_##name,
enum { STRIDEC_PHILOX_ADVANCE(ADVANCE_P_FIELD) ADVANCE_P_WORDS };

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
    J->key = read_state((const u32 *)state, p + PHILOX_P_state0);
    J->dst = dst;
    J->R = p[PHILOX_P_rank];
    J->numel = p[PHILOX_P_numel];
    J->ioff = p[PHILOX_P_index_offset];
    J->doff = p[PHILOX_P_dst_offset];
    J->M = p[PHILOX_P_masks];
    J->fill = p[PHILOX_P_fill_bits];
    J->linear = (int)p[PHILOX_P_linear];
    u32 low = (u32)p[PHILOX_P_low_bits], scale = (u32)p[PHILOX_P_scale_bits];
    memcpy(&J->low, &low, 4);
    memcpy(&J->scale, &scale, 4);
    J->n = p + PHILOX_P_WORDS; /* sizes, index strides, dst strides, masks */
    J->is = p + PHILOX_P_WORDS + J->R;
    J->ds = p + PHILOX_P_WORDS + 2 * J->R;
    J->mk = p + PHILOX_P_WORDS + 3 * J->R;
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
    philox_key_t s = read_state((const u32 *)state, p + ADVANCE_P_state0);
    u64 blocks = (u64)p[ADVANCE_P_blocks];
    u64 lo = s.ctr_lo + blocks;
    u64 hi = s.ctr_hi + (lo < blocks);
    u32 w[6] = {(u32)lo, (u32)(lo >> 32), (u32)hi, (u32)(hi >> 32), s.key0, s.key1};
    u32 *out = (u32 *)dst;
    for (int k = 0; k < 6; k++) out[p[ADVANCE_P_new_state0 + k]] = w[k];
}
#endif

/* The output entry points, one per element type: philox_variant.h defines PHILOX_NAME
   (with PHILOX_NAME_convert, _linear, _gather) storing PHILOX_OUT elements, the value of
   word w being PHILOX_CONVERT(w, low, scale); PHILOX_INTERLEAVE stores whole blocks
   through interleave4_u32 (the bits: faster there than gcc's own interleave, which wins
   for the converting loops of the uniforms). */
#define PHILOX_PASTE(a, b) a##_##b
#define PHILOX_JOIN(a, b) PHILOX_PASTE(a, b)
#define PHILOX_FN(suffix) PHILOX_JOIN(PHILOX_NAME, suffix)

/* float32(bits >> (32 - d)) * 2^-d is exact (d <= 24 bits, the type's own); one fused
   multiply-add then rounds once. */
#define PHILOX_UNIFORM(w, d, low, scale) \
    __builtin_fmaf((float)(int32_t)((w) >> (32 - (d))) * (1.0f / (float)(1 << (d))), scale, low)

#if IN_PART(1)
#define PHILOX_NAME stridec_philox_bits
#define PHILOX_OUT u32
#define PHILOX_CONVERT(w, low, scale) (w)
#define PHILOX_INTERLEAVE 1
#include "philox_variant.h"

#define PHILOX_NAME stridec_philox_uniform_f32
#define PHILOX_OUT float
#define PHILOX_CONVERT(w, low, scale) \
    PHILOX_UNIFORM(w, STRIDEC_PHILOX_UNIFORM_BITS_FLOAT32, low, scale)
#include "philox_variant.h"
#endif

#if IN_PART(2)
#define PHILOX_NAME stridec_philox_uniform_f16
#define PHILOX_OUT uint16_t
#define PHILOX_CONVERT(w, low, scale) \
    stridec_f32_to_f16(PHILOX_UNIFORM(w, STRIDEC_PHILOX_UNIFORM_BITS_FLOAT16, low, scale))
#include "philox_variant.h"

#define PHILOX_NAME stridec_philox_uniform_bf16
#define PHILOX_OUT uint16_t
#define PHILOX_CONVERT(w, low, scale) \
    stridec_f32_to_bf16(PHILOX_UNIFORM(w, STRIDEC_PHILOX_UNIFORM_BITS_BFLOAT16, low, scale), 0xffffu)
#include "philox_variant.h"
#endif
