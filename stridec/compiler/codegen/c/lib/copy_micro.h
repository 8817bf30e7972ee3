/* Micro-kernels of planned copies: blocks moved in vector registers. Built with
   ELEM_BYTES (1, 2, 4 or 8) defined, elements moved as unsigned bits of that size, or for
   a cast with CAST_SRC and CAST_DST: the blocks of the source's bits, each vector
   converted as it is stored (copy_cast.h).

   - tr_block: a TV x TV block transposed in registers (tv_transpose), whole or, where
     the block lies past an edge, with masked loads and stores (AVX-512) or through a
     block in L1 (elsewhere): no element is moved one at a time.
   - sv_reverse: a vector of SV bytes with its lanes in the opposite order (a flip's
     runs). The lanes' kernels (deinterleave, interleave, compress) are in copy_lanes.h. */

#ifndef STRIDEC_COPY_CAST_H
#include "copy_cast.h"  /* elem_t (the source's bits), dst_t, and a cast's conversion */
#endif
#include <stddef.h>

/* ---- the transpose block: TV lanes of TV * ELEM_BYTES bytes. 4- and 8-byte elements
   take 32-byte vectors even where 64-byte ones exist: their 8 x 8 and 4 x 4 blocks are
   transposed by shuffles inside each 128-bit half but for one last round, about half the
   time of the 16 x 16 and 8 x 8 blocks' two-source permutes of 64-byte vectors
   (docs/cpu.md). */
#if defined(__AVX__) && ELEM_BYTES >= 4
#define TV (32 / ELEM_BYTES)
#elif defined(__AVX512BW__) && defined(__AVX512VL__) && ELEM_BYTES == 2
#define TV 16
#elif ELEM_BYTES <= 2
#define TV (16 / ELEM_BYTES < 16 ? 16 / ELEM_BYTES : 16)
#else
#define TV (16 / ELEM_BYTES)
#endif
#define TV_BYTES (TV * ELEM_BYTES)

typedef elem_t tvec __attribute__((vector_size(TV_BYTES)));

/* Masked loads and stores of a tvec's first lanes (AVX-512): the edges of a copy move in
   the same vectors as its middle. */
#if defined(__AVX512F__) && defined(__AVX512VL__) && ELEM_BYTES == 4 && TV == 8
#define TV_MASKED 1
typedef int mvec __attribute__((vector_size(32)));
#define TV_LOAD_MASKED(p, m) \
    ((tvec)__builtin_ia32_loaddqusi256_mask((const int*)(p), (mvec){0}, (unsigned char)(m)))
#define TV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedqusi256_mask((int*)(p), (mvec)(v), (unsigned char)(m))
#elif defined(__AVX512F__) && defined(__AVX512VL__) && ELEM_BYTES == 8 && TV == 4
#define TV_MASKED 1
typedef long long mvec __attribute__((vector_size(32)));
#define TV_LOAD_MASKED(p, m) \
    ((tvec)__builtin_ia32_loaddqudi256_mask((const long long*)(p), (mvec){0}, (unsigned char)(m)))
#define TV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedqudi256_mask((long long*)(p), (mvec)(v), (unsigned char)(m))
#elif ELEM_BYTES == 2 && TV == 16
#define TV_MASKED 1
typedef short mvec __attribute__((vector_size(32)));
#define TV_LOAD_MASKED(p, m) \
    ((tvec)__builtin_ia32_loaddquhi256_mask((const short*)(p), (mvec){0}, (unsigned short)(m)))
#define TV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedquhi256_mask((short*)(p), (mvec)(v), (unsigned short)(m))
#elif ELEM_BYTES == 1 && TV == 16 && defined(__AVX512BW__) && defined(__AVX512VL__)
#define TV_MASKED 1
typedef char mvec __attribute__((vector_size(16)));
#define TV_LOAD_MASKED(p, m) \
    ((tvec)__builtin_ia32_loaddquqi128_mask((const char*)(p), (mvec){0}, (unsigned short)(m)))
#define TV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedquqi128_mask((char*)(p), (mvec)(v), (unsigned short)(m))
#else
#define TV_MASKED 0
#endif

/* Lane j of the interleave of a and b's low halves: a[j/2] for even j, b[j/2] for odd. */
ALWAYS_INLINE tvec tv_interleave_mask(int high) {
    tvec m;
#pragma GCC unroll 64
    for (int j = 0; j < TV; j++) m[j] = (elem_t)(j / 2 + (j % 2 ? TV : 0) + (high ? TV / 2 : 0));
    return m;
}

/* r[b] holds source row b (lane a: element (a, b)); afterwards r[a] holds column a. */
#if ELEM_BYTES == 4 && TV == 8
/* 8 x 8 in 32-byte vectors: rows 2i and 2i + 1 unpacked (vpunpckl/hdq), pairs of those
   unpacked as 64-bit lanes (vpunpckl/hqdq), then the 128-bit halves exchanged between
   rows a and a + 4 (vperm2i128): 24 shuffles, all but the last 8 inside a half. */
typedef uint64_t tvec2 __attribute__((vector_size(32)));
ALWAYS_INLINE void tv_transpose(tvec* r) {
    const tvec U0 = {0, 8, 1, 9, 4, 12, 5, 13}, U1 = {2, 10, 3, 11, 6, 14, 7, 15};
    const tvec2 P0 = {0, 4, 2, 6}, P1 = {1, 5, 3, 7};
    const tvec H0 = {0, 1, 2, 3, 8, 9, 10, 11}, H1 = {4, 5, 6, 7, 12, 13, 14, 15};
    tvec t[8], u[8];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {  /* rows 2i, 2i+1: columns (0, 1, 4, 5) and (2, 3, 6, 7) */
        t[2 * i] = __builtin_shuffle(r[2 * i], r[2 * i + 1], U0);
        t[2 * i + 1] = __builtin_shuffle(r[2 * i], r[2 * i + 1], U1);
    }
#pragma GCC unroll 8
    for (int g = 0; g < 2; g++)  /* u[4g + c]: columns c and c + 4 of rows 4g .. 4g + 3 */
        for (int h = 0; h < 2; h++) {
            tvec2 p = (tvec2)t[4 * g + h], q = (tvec2)t[4 * g + h + 2];
            u[4 * g + 2 * h] = (tvec)__builtin_shuffle(p, q, P0);
            u[4 * g + 2 * h + 1] = (tvec)__builtin_shuffle(p, q, P1);
        }
#pragma GCC unroll 8
    for (int c = 0; c < 4; c++) {  /* column c, then c + 4, of all 8 rows */
        r[c] = __builtin_shuffle(u[c], u[c + 4], H0);
        r[c + 4] = __builtin_shuffle(u[c], u[c + 4], H1);
    }
}
#elif ELEM_BYTES == 8 && TV == 4
/* 4 x 4 in 32-byte vectors: rows unpacked in pairs (vunpckl/hpd), then the 128-bit halves
   exchanged (vperm2f128): 8 shuffles. */
ALWAYS_INLINE void tv_transpose(tvec* r) {
    const tvec U0 = {0, 4, 2, 6}, U1 = {1, 5, 3, 7}, H0 = {0, 1, 4, 5}, H1 = {2, 3, 6, 7};
    tvec t0 = __builtin_shuffle(r[0], r[1], U0), t1 = __builtin_shuffle(r[0], r[1], U1);
    tvec t2 = __builtin_shuffle(r[2], r[3], U0), t3 = __builtin_shuffle(r[2], r[3], U1);
    r[0] = __builtin_shuffle(t0, t2, H0);
    r[1] = __builtin_shuffle(t1, t3, H0);
    r[2] = __builtin_shuffle(t0, t2, H1);
    r[3] = __builtin_shuffle(t1, t3, H1);
}
#else
/* log2(TV) rounds of interleaves: rows i and i + TV/2 into rows 2i (their low halves) and
   2i + 1 (their high halves). */
ALWAYS_INLINE void tv_transpose(tvec* r) {
    const tvec LO = tv_interleave_mask(0), HI = tv_interleave_mask(1);
#pragma GCC unroll 8
    for (int n = 1; n < TV; n *= 2) {
        tvec t[TV];
#pragma GCC unroll 64
        for (int i = 0; i < TV / 2; i++) {
            t[2 * i] = __builtin_shuffle(r[i], r[i + TV / 2], LO);
            t[2 * i + 1] = __builtin_shuffle(r[i], r[i + TV / 2], HI);
        }
#pragma GCC unroll 64
        for (int i = 0; i < TV; i++) r[i] = t[i];
    }
}
#endif

/* Where a block's rows are: source row b (element x + a of it) at rows[b] + x when the
   rows come from a table (`tab`), else at base + b*stride + x; destination row a likewise,
   element y + b. */
typedef struct {
    const elem_t* const* rows;
    const elem_t* base;
    i64 stride;
} src_rows;
typedef struct {
    dst_t* const* rows;
    dst_t* base;
    i64 stride;
} dst_rows;

ALWAYS_INLINE const elem_t* src_row(src_rows s, int tab, i64 b) {
    return tab ? s.rows[b] : s.base + b * s.stride;
}
/* A block's rows converted and stored one after the other in a loop, not unrolled: each
   conversion reads its row from memory anyway, and unrolled, TV inlined conversions of
   some pairs (bytes to and from bfloat16) took gcc's combiner 20-60 s a unit. */
#ifdef CAST_SRC
#define CAST_STORES_ROLLED _Pragma("GCC unroll 1")
#else
#define CAST_STORES_ROLLED _Pragma("GCC unroll 64")
#endif

ALWAYS_INLINE dst_t* dst_row(dst_rows d, int tab, i64 a) {
    return tab ? d.rows[a] : d.base + a * d.stride;
}

/* Block (a, b), a < TV, b < TV: element x + a of source row y + b lands at element y + b of
   destination row dx + a. */
ALWAYS_INLINE void tr_block(src_rows s, int stab, i64 x, dst_rows d, int dtab, i64 dx, i64 y) {
    tvec r[TV];
#pragma GCC unroll 64
    for (int b = 0; b < TV; b++) memcpy(&r[b], src_row(s, stab, y + b) + x, TV_BYTES);
    tv_transpose(r);
    CAST_STORES_ROLLED
    for (int a = 0; a < TV; a++) STORE_N(dst_row(d, dtab, dx + a) + y, &r[a], TV);
}

/* The part a < na, b < nb (each 1 .. TV) of a block. */
ALWAYS_INLINE void tr_block_part(src_rows s, int stab, i64 x, dst_rows d, int dtab, i64 dx,
                                 i64 y, int na, int nb) {
    tvec r[TV];
#if TV_MASKED
    const unsigned long long ma = (1ull << na) - 1, mb = (1ull << nb) - 1;
#pragma GCC unroll 64
    for (int b = 0; b < TV; b++)
        r[b] = b < nb ? TV_LOAD_MASKED(src_row(s, stab, y + b) + x, ma) : (tvec){0};
    tv_transpose(r);
#ifdef CAST_SRC
    (void)mb;
    for (int a = 0; a < na; a++) STORE_PART(dst_row(d, dtab, dx + a) + y, &r[a], TV, nb);
#else
#pragma GCC unroll 64
    for (int a = 0; a < TV; a++)
        if (a < na) TV_STORE_MASKED(dst_row(d, dtab, dx + a) + y, r[a], mb);
#endif
#else
    memset(r, 0, sizeof r);
    for (int b = 0; b < nb; b++)
        memcpy(&r[b], src_row(s, stab, y + b) + x, (size_t)na * ELEM_BYTES);
    tv_transpose(r);
    for (int a = 0; a < na; a++) STORE_PART(dst_row(d, dtab, dx + a) + y, &r[a], TV, nb);
#endif
}

/* Bytes with AVX-512 BW (copies): a wide block of TV source rows of TW = 64 bytes, each
   128-bit lane of the rows' vectors an independent 16 x 16 block transposed inside the
   lane (vpunpckl/hbw): a source line read whole, a quarter of the 16 x 16 blocks'
   shuffles a byte. Lane L of vector a after the rounds is destination row 16L + a. */
#if ELEM_BYTES == 1 && defined(__AVX512BW__) && !defined(CAST_SRC)
#define TW 64
typedef elem_t wvec __attribute__((vector_size(TW)));
#define W4_(f, o) f(o), f(o + 1), f(o + 2), f(o + 3)
#define W16_(f, o) W4_(f, o), W4_(f, o + 4), W4_(f, o + 8), W4_(f, o + 12)
#define WLO(l) (((l) % 2 ? TW : 0) + (l) / 16 * 16 + (l) % 16 / 2)
#define WHI(l) (WLO(l) + 8)

/* Block (a, b), a < TW, b < TV: element x + a of source row y + b lands at element y + b
   of destination row dx + a. */
ALWAYS_INLINE void tr_block_wide(src_rows s, int stab, i64 x, dst_rows d, int dtab, i64 dx,
                                 i64 y) {
    const wvec LO = {W16_(WLO, 0), W16_(WLO, 16), W16_(WLO, 32), W16_(WLO, 48)};
    const wvec HI = {W16_(WHI, 0), W16_(WHI, 16), W16_(WHI, 32), W16_(WHI, 48)};
    wvec r[TV];
#pragma GCC unroll 16
    for (int b = 0; b < TV; b++) memcpy(&r[b], src_row(s, stab, y + b) + x, TW);
#pragma GCC unroll 4
    for (int n = 1; n < TV; n *= 2) {
        wvec t[TV];
#pragma GCC unroll 16
        for (int i = 0; i < TV / 2; i++) {
            t[2 * i] = __builtin_shuffle(r[i], r[i + TV / 2], LO);
            t[2 * i + 1] = __builtin_shuffle(r[i], r[i + TV / 2], HI);
        }
#pragma GCC unroll 16
        for (int i = 0; i < TV; i++) r[i] = t[i];
    }
#pragma GCC unroll 4
    for (int l = 0; l < TW / TV; l++)
#pragma GCC unroll 16
        for (int a = 0; a < TV; a++)
            STORE_N(dst_row(d, dtab, dx + l * TV + a) + y, (const elem_t*)&r[a] + l * TV, TV);
}

/* A 64 x 64 block whose destination rows d[a] + y (a < TW) each start a line: the four
   wide blocks along y leave row 16L + a's four 16-byte parts in lane L of their vectors
   a; two rounds of 128-bit lane shuffles (vshufi64x2) make each row's line a vector,
   streamed. */
#define TR_LINES_WIDE 1
typedef long long wq __attribute__((vector_size(64)));
ALWAYS_INLINE void tr_lines_wide(src_rows s, int stab, i64 x, elem_t* const* d, i64 y) {
    const wvec LO = {W16_(WLO, 0), W16_(WLO, 16), W16_(WLO, 32), W16_(WLO, 48)};
    const wvec HI = {W16_(WHI, 0), W16_(WHI, 16), W16_(WHI, 32), W16_(WHI, 48)};
    const wq E = {0, 1, 4, 5, 8, 9, 12, 13}, O = {2, 3, 6, 7, 10, 11, 14, 15};
    wvec r[TW / TV][TV];
#pragma GCC unroll 4
    for (int k = 0; k < TW / TV; k++) {
#pragma GCC unroll 16
        for (int b = 0; b < TV; b++) memcpy(&r[k][b], src_row(s, stab, y + k * TV + b) + x, TW);
#pragma GCC unroll 4
        for (int n = 1; n < TV; n *= 2) {
            wvec t[TV];
#pragma GCC unroll 16
            for (int i = 0; i < TV / 2; i++) {
                t[2 * i] = __builtin_shuffle(r[k][i], r[k][i + TV / 2], LO);
                t[2 * i + 1] = __builtin_shuffle(r[k][i], r[k][i + TV / 2], HI);
            }
#pragma GCC unroll 16
            for (int i = 0; i < TV; i++) r[k][i] = t[i];
        }
    }
#pragma GCC unroll 16
    for (int a = 0; a < TV; a++) {
        wq A = (wq)r[0][a], B = (wq)r[1][a], C = (wq)r[2][a], D = (wq)r[3][a];
        wq T0 = __builtin_shuffle(A, B, E), T1 = __builtin_shuffle(A, B, O);
        wq T2 = __builtin_shuffle(C, D, E), T3 = __builtin_shuffle(C, D, O);
        __builtin_ia32_movntdq512((wq*)(void*)(d[a] + y), __builtin_shuffle(T0, T2, E));
        __builtin_ia32_movntdq512((wq*)(void*)(d[TV + a] + y), __builtin_shuffle(T1, T3, E));
        __builtin_ia32_movntdq512((wq*)(void*)(d[2 * TV + a] + y), __builtin_shuffle(T0, T2, O));
        __builtin_ia32_movntdq512((wq*)(void*)(d[3 * TV + a] + y), __builtin_shuffle(T1, T3, O));
    }
}
#else
#define TW TV
#endif

/* A line of each of TV destination rows from TV_PER_LINE blocks side by side, each row's
   line written by streaming stores one after the other (so the line leaves whole): d[a]
   + y on a line, for a < TV. */
#ifndef CAST_SRC
#define TV_LINE (64 / ELEM_BYTES)
#define TV_PER_LINE (TV_LINE / TV)
#if defined(__AVX512F__) && TV_BYTES == 64
typedef long long tv_nt __attribute__((vector_size(64)));
#define TV_STREAM(p, v) __builtin_ia32_movntdq512((tv_nt*)(void*)(p), (tv_nt)(v))
#elif defined(__AVX__) && TV_BYTES == 32
typedef long long tv_nt __attribute__((vector_size(32)));
#define TV_STREAM(p, v) __builtin_ia32_movntdq256((tv_nt*)(void*)(p), (tv_nt)(v))
#elif defined(__SSE2__) && TV_BYTES == 16
typedef long long tv_nt __attribute__((vector_size(16)));
#define TV_STREAM(p, v) __builtin_ia32_movntdq((tv_nt*)(void*)(p), (tv_nt)(v))
#else
#define TV_STREAM(p, v) memcpy((p), &(v), TV_BYTES)
#endif

ALWAYS_INLINE void tr_line_nt(src_rows s, int stab, i64 x, elem_t* const* d, i64 y) {
    tvec r[TV_PER_LINE][TV];
#pragma GCC unroll 4
    for (int k = 0; k < TV_PER_LINE; k++) {
#pragma GCC unroll 64
        for (int b = 0; b < TV; b++) memcpy(&r[k][b], src_row(s, stab, y + k * TV + b) + x, TV_BYTES);
        tv_transpose(r[k]);
    }
#pragma GCC unroll 64
    for (int a = 0; a < TV; a++)
#pragma GCC unroll 4
        for (int k = 0; k < TV_PER_LINE; k++) TV_STREAM(d[a] + y + k * TV, r[k][a]);
}
#else
/* A cast's: CV_LINE destination elements a line, CV_PER_LINE blocks side by side (0 where
   one block's row converted is longer than a line), each row's line converted into a
   line in registers and streamed from there. */
#define CV_LINE (64 / DST_BYTES)
#define CV_PER_LINE (CV_LINE >= TV ? CV_LINE / TV : 0)
#if CV_PER_LINE
ALWAYS_INLINE void tr_line_nt(src_rows s, int stab, i64 x, dst_t* const* d, i64 y) {
    tvec r[CV_PER_LINE][TV];
#pragma GCC unroll 8
    for (int k = 0; k < CV_PER_LINE; k++) {
#pragma GCC unroll 64
        for (int b = 0; b < TV; b++) memcpy(&r[k][b], src_row(s, stab, y + k * TV + b) + x, TV_BYTES);
        tv_transpose(r[k]);
    }
    CAST_STORES_ROLLED
    for (int a = 0; a < TV; a++) {
        dst_t line[CV_LINE] __attribute__((aligned(64)));
#pragma GCC unroll 8
        for (int k = 0; k < CV_PER_LINE; k++) STORE_N(line + k * TV, &r[k][a], TV);
        stream_line(d[a] + y, line);
    }
}
#endif
#endif

/* ---- flips, on vectors of SV bytes */
#if defined(__AVX512F__) && (ELEM_BYTES >= 4 || (ELEM_BYTES == 2 && defined(__AVX512BW__)) \
                             || (ELEM_BYTES == 1 && defined(__AVX512VBMI__)))
#define SV_BYTES 64
#elif defined(__AVX2__)
#define SV_BYTES 32
#else
#define SV_BYTES 16
#endif
#define SV (SV_BYTES / ELEM_BYTES)
typedef elem_t svec __attribute__((vector_size(SV_BYTES)));

/* The lanes of v in the opposite order. */
ALWAYS_INLINE svec sv_reverse(svec v) {
    svec m;
#pragma GCC unroll 64
    for (int l = 0; l < SV; l++) m[l] = (elem_t)(SV - 1 - l);
    return __builtin_shuffle(v, m);
}
