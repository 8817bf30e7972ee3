/* Lane micro-kernels of planned copies: the deinterleave, interleave and compress of
   K = 2 .. 8 lanes (space-to-depth, pixel shuffle and unshuffle, YOLOv5 Focus, complex
   pairs, NHWC <-> NCHW with C = 3, a transpose of 2, 3 or 4 rows, x[..., ::K]) as one
   streaming pass: K vector loads, a few two-source permutes, K vector stores.

   Built with ELEM_BYTES, elem_t and dst_t defined (copy_cast.h): a cast's outputs are
   converted as they are stored. Every permute's index vector
   is a literal constant (MASK: each lane a constant expression of its index), so it is one
   vpermt2b / w / d / q with AVX-512 (VBMI for bytes) and whatever the compiler's pattern
   matching makes of it with AVX2 or SSE2. Computed by a loop inside the kernel instead,
   gcc did not fold the K = 3 and 4 chains of 1- and 2-byte
   elements into constants and rebuilt them at every vector, a hundred times slower.

   K = 2 and 4 are rounds of even/odd splits (deinterleave) or low/high interleaves
   (interleave), one permute an output vector a round; K = 3 a permute of the first two
   inputs and one with the third; K = 5 .. 8 the same chain over all K inputs (a permute
   of the first two, then one with each further input, `SPLIT_OUT` / `JOIN_OUT`). */
#ifndef STRIDEC_COPY_LANES_H
#define STRIDEC_COPY_LANES_H

/* The vector: the widest whose two-source variable permute is one instruction. */
#if defined(__AVX512F__) && (ELEM_BYTES >= 4 || (ELEM_BYTES == 2 && defined(__AVX512BW__)) \
                             || (ELEM_BYTES == 1 && defined(__AVX512VBMI__)))
#define LV_BYTES 64
#elif defined(__AVX2__)
#define LV_BYTES 32
#else
#define LV_BYTES 16
#endif
#define LV (LV_BYTES / ELEM_BYTES)
/* The most lanes (compiler/copy_plan.py's MAX_LANES; a cast's 4: no plan of a cast takes more) */
#ifdef CAST_SRC
#define LANES_MAX 4
#else
#define LANES_MAX 8
#endif
typedef elem_t lvec __attribute__((vector_size(LV_BYTES)));

/* Masked loads and stores of an lvec's first lanes (AVX-512): a run's tail moves in one
   instruction a vector, not through a memcpy of a length known only at run time (about
   20 ns a block of a few pixels, docs/cpu.md). */
#if LV_BYTES == 64 && defined(__AVX512BW__)
#define LV_MASKED 1
#if ELEM_BYTES == 1
typedef char lmvec __attribute__((vector_size(64)));
#define LV_LOAD_MASKED(p, m) \
    ((lvec)__builtin_ia32_loaddquqi512_mask((const char*)(p), (lmvec){0}, (m)))
#define LV_STORE_MASKED(p, v, m) __builtin_ia32_storedquqi512_mask((char*)(p), (lmvec)(v), (m))
#elif ELEM_BYTES == 2
typedef short lmvec __attribute__((vector_size(64)));
#define LV_LOAD_MASKED(p, m) \
    ((lvec)__builtin_ia32_loaddquhi512_mask((const short*)(p), (lmvec){0}, (unsigned)(m)))
#define LV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedquhi512_mask((short*)(p), (lmvec)(v), (unsigned)(m))
#elif ELEM_BYTES == 4
typedef int lmvec __attribute__((vector_size(64)));
#define LV_LOAD_MASKED(p, m) \
    ((lvec)__builtin_ia32_loaddqusi512_mask((const int*)(p), (lmvec){0}, (unsigned short)(m)))
#define LV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedqusi512_mask((int*)(p), (lmvec)(v), (unsigned short)(m))
#else
typedef long long lmvec __attribute__((vector_size(64)));
#define LV_LOAD_MASKED(p, m) \
    ((lvec)__builtin_ia32_loaddqudi512_mask((const long long*)(p), (lmvec){0}, (unsigned char)(m)))
#define LV_STORE_MASKED(p, v, m) \
    __builtin_ia32_storedqudi512_mask((long long*)(p), (lmvec)(v), (unsigned char)(m))
#endif
/* The mask of a vector's first `count` lanes (none below 1, all from LV). */
ALWAYS_INLINE unsigned long long lv_mask(i64 count) {
    return count <= 0 ? 0 : count >= LV ? ~0ull >> (64 - LV) : (1ull << count) - 1;
}
#else
#define LV_MASKED 0
#endif

/* The index vectors, as constants: lane l of each is a constant expression of l,
   listed for the LV lanes by LANES. EVEN / ODD pick the even / odd elements of two
   vectors, LO / HI interleave their low / high halves; S3k_A and S3k_B are the two steps
   of output k of a 3-lane split, J3k_A and J3k_B of output k of a 3-lane join. */
#define LQ_(f, o) f(o), f(o + 1), f(o + 2), f(o + 3)
#define L16_(f, o) LQ_(f, o), LQ_(f, o + 4), LQ_(f, o + 8), LQ_(f, o + 12)
#if LV == 2
#define LANES(f) f(0), f(1)
#elif LV == 4
#define LANES(f) LQ_(f, 0)
#elif LV == 8
#define LANES(f) LQ_(f, 0), LQ_(f, 4)
#elif LV == 16
#define LANES(f) L16_(f, 0)
#elif LV == 32
#define LANES(f) L16_(f, 0), L16_(f, 16)
#else
#define LANES(f) L16_(f, 0), L16_(f, 16), L16_(f, 32), L16_(f, 48)
#endif
#define MASK(f) ((lvec){LANES(f)})

#define EVEN(l) (2 * (l))
#define ODD(l) (2 * (l) + 1)
#define LO(l) ((l) / 2 + ((l) % 2 ? LV : 0))
#define HI(l) ((l) / 2 + LV / 2 + ((l) % 2 ? LV : 0))
/* split: lane l of output k is element 3l + k of the three inputs */
#define S3A(k, l) (3 * (l) + (k) < 2 * LV ? 3 * (l) + (k) : 0)
#define S3B(k, l) (3 * (l) + (k) >= 2 * LV ? 3 * (l) + (k) - LV : (l))
/* join: lane l of output k (element kLV + l) is element (kLV + l)/3 of input (kLV + l)%3 */
#define J3A(k, l) (((k) * LV + (l)) % 3 < 2 ? ((k) * LV + (l)) % 3 * LV + ((k) * LV + (l)) / 3 : 0)
#define J3B(k, l) (((k) * LV + (l)) % 3 == 2 ? LV + ((k) * LV + (l)) / 3 : (l))
#define S30A(l) S3A(0, l)
#define S31A(l) S3A(1, l)
#define S32A(l) S3A(2, l)
#define S30B(l) S3B(0, l)
#define S31B(l) S3B(1, l)
#define S32B(l) S3B(2, l)
#define J30A(l) J3A(0, l)
#define J31A(l) J3A(1, l)
#define J32A(l) J3A(2, l)
#define J30B(l) J3B(0, l)
#define J31B(l) J3B(1, l)
#define J32B(l) J3B(2, l)

#define LSH(a, b, m) __builtin_shuffle((a), (b), MASK(m))

/* The chains of K = 5 .. 8 lanes: index vectors of (K, output k, step j, lane l), listed by
   LANESX with K, k and j literals. Step 1 permutes inputs 0 and 1, step j > 1 the chain so
   far (lane l kept) with input j; a step that takes nothing is the identity (folded). */
#define LQX_(f, K, k, j, o) f(K, k, j, o), f(K, k, j, o + 1), f(K, k, j, o + 2), f(K, k, j, o + 3)
#define L16X_(f, K, k, j, o) \
    LQX_(f, K, k, j, o), LQX_(f, K, k, j, o + 4), LQX_(f, K, k, j, o + 8), LQX_(f, K, k, j, o + 12)
#if LV == 2
#define LANESX(f, K, k, j) f(K, k, j, 0), f(K, k, j, 1)
#elif LV == 4
#define LANESX(f, K, k, j) LQX_(f, K, k, j, 0)
#elif LV == 8
#define LANESX(f, K, k, j) LQX_(f, K, k, j, 0), LQX_(f, K, k, j, 4)
#elif LV == 16
#define LANESX(f, K, k, j) L16X_(f, K, k, j, 0)
#elif LV == 32
#define LANESX(f, K, k, j) L16X_(f, K, k, j, 0), L16X_(f, K, k, j, 16)
#else
#define LANESX(f, K, k, j) \
    L16X_(f, K, k, j, 0), L16X_(f, K, k, j, 16), L16X_(f, K, k, j, 32), L16X_(f, K, k, j, 48)
#endif
/* split: lane l of output k is element e = Kl + k of the K inputs, input e / LV */
#define SPE_(K, k, l) ((K) * (l) + (k))
#define SPX(K, k, j, l) ((j) == 1 ? (SPE_(K, k, l) / LV == 0 ? SPE_(K, k, l) % LV            \
                                     : SPE_(K, k, l) / LV == 1 ? LV + SPE_(K, k, l) % LV : 0) \
                         : SPE_(K, k, l) / LV == (j) ? LV + SPE_(K, k, l) % LV : (l))
/* join: lane l of output k is element e = kLV + l, element e / K of input e % K */
#define JNE_(K, k, l) ((k) * LV + (l))
#define JNX(K, k, j, l) ((j) == 1 ? (JNE_(K, k, l) % (K) == 0 ? JNE_(K, k, l) / (K)             \
                                     : JNE_(K, k, l) % (K) == 1 ? LV + JNE_(K, k, l) / (K) : 0) \
                         : JNE_(K, k, l) % (K) == (j) ? LV + JNE_(K, k, l) / (K) : (l))
#define LSHX(a, b, f, K, k, j) __builtin_shuffle((a), (b), ((lvec){LANESX(f, K, k, j)}))
#define CHAIN_STEP_(x, f, K, k, j) if ((j) < (K)) c_ = LSHX(c_, x[(j) < (K) ? (j) : 0], f, K, k, j)
#define CHAIN_(x, f, K, k)                                                                   \
    ({                                                                                       \
        lvec c_ = LSHX(x[0], x[1], f, K, k, 1);                                              \
        CHAIN_STEP_(x, f, K, k, 2); CHAIN_STEP_(x, f, K, k, 3); CHAIN_STEP_(x, f, K, k, 4);  \
        CHAIN_STEP_(x, f, K, k, 5); CHAIN_STEP_(x, f, K, k, 6); CHAIN_STEP_(x, f, K, k, 7);  \
        c_;                                                                                  \
    })
#define SPLIT_OUT(v, K, k) CHAIN_(v, SPX, K, k)
#define JOIN_OUT(r, K, k) CHAIN_(r, JNX, K, k)
/* Outputs 1 .. K-1 of a chain (o[0] done by the caller) */
#define OUTS_(o, x, OUT, K)                                       \
    do {                                                          \
        o[1] = OUT(x, K, 1); o[2] = OUT(x, K, 2); o[3] = OUT(x, K, 3); \
        o[4] = OUT(x, K, 4);                                      \
        if (5 < (K)) o[5] = OUT(x, K, 5);                         \
        if (6 < (K)) o[6] = OUT(x, K, 6);                         \
        if (7 < (K)) o[7] = OUT(x, K, 7);                         \
    } while (0)
#define SPLIT_K_(K)                                         \
    do {                                                    \
        o[0] = SPLIT_OUT(v, K, 0);                          \
        if (!first) OUTS_(o, v, SPLIT_OUT, K);              \
    } while (0)
#define JOIN_K_(K)                         \
    do {                                   \
        o[0] = JOIN_OUT(r, K, 0);          \
        OUTS_(o, r, JOIN_OUT, K);          \
    } while (0)

/* Outputs o[k] (k < K; k < 1 with `first`: a compress) of K vectors v holding LV pixels of
   K interleaved lanes. */
ALWAYS_INLINE void lanes_split_vec(const lvec* v, lvec* o, int K, int first) {
    if (K == 2) {
        o[0] = LSH(v[0], v[1], EVEN);
        if (!first) o[1] = LSH(v[0], v[1], ODD);
    } else if (K == 4) {
        lvec a0 = LSH(v[0], v[1], EVEN), a2 = LSH(v[2], v[3], EVEN);
        o[0] = LSH(a0, a2, EVEN);
        if (!first) {
            lvec a1 = LSH(v[0], v[1], ODD), a3 = LSH(v[2], v[3], ODD);
            o[1] = LSH(a1, a3, EVEN);
            o[2] = LSH(a0, a2, ODD);
            o[3] = LSH(a1, a3, ODD);
        }
#if LANES_MAX > 4
    } else if (K == 5) {
        SPLIT_K_(5);
    } else if (K == 6) {
        SPLIT_K_(6);
    } else if (K == 7) {
        SPLIT_K_(7);
    } else if (K == 8) {
        SPLIT_K_(8);
#endif
    } else {
        o[0] = LSH(LSH(v[0], v[1], S30A), v[2], S30B);
        if (!first) {
            o[1] = LSH(LSH(v[0], v[1], S31A), v[2], S31B);
            o[2] = LSH(LSH(v[0], v[1], S32A), v[2], S32B);
        }
    }
}

/* Outputs o[j] (j < K) interleaving K vectors r of LV elements each. */
ALWAYS_INLINE void lanes_join_vec(const lvec* r, lvec* o, int K) {
    if (K == 2) {
        o[0] = LSH(r[0], r[1], LO);
        o[1] = LSH(r[0], r[1], HI);
    } else if (K == 4) {
        lvec b0 = LSH(r[0], r[2], LO), b1 = LSH(r[0], r[2], HI);
        lvec b2 = LSH(r[1], r[3], LO), b3 = LSH(r[1], r[3], HI);
        o[0] = LSH(b0, b2, LO);
        o[1] = LSH(b0, b2, HI);
        o[2] = LSH(b1, b3, LO);
        o[3] = LSH(b1, b3, HI);
#if LANES_MAX > 4
    } else if (K == 5) {
        JOIN_K_(5);
    } else if (K == 6) {
        JOIN_K_(6);
    } else if (K == 7) {
        JOIN_K_(7);
    } else if (K == 8) {
        JOIN_K_(8);
#endif
    } else {
        o[0] = LSH(LSH(r[0], r[1], J30A), r[2], J30B);
        o[1] = LSH(LSH(r[0], r[1], J31A), r[2], J31B);
        o[2] = LSH(LSH(r[0], r[1], J32A), r[2], J32B);
    }
}

/* Pixels [0, n) of K lanes: d[k*ls + y] = s[K*y + k] (k < K), or with `first` (a
   compress, which reads K*(n - 1) + 1 elements) d[y] = s[K*y]. Whole vectors, then the
   rest through vectors in L1. */
ALWAYS_INLINE void lanes_split_k(const elem_t* s, dst_t* d, i64 ls, i64 n, int K, int first) {
    const int outs = first ? 1 : K;
    i64 y = 0;
    for (; y + LV < n + !first; y += LV) {
        lvec v[LANES_MAX], o[LANES_MAX];
        for (int j = 0; j < K; j++) memcpy(&v[j], s + K * y + j * LV, LV_BYTES);
        lanes_split_vec(v, o, K, first);
        for (int k = 0; k < outs; k++) STORE_N(d + k * ls + y, &o[k], LV);
    }
    if (y < n) {
        lvec v[LANES_MAX] = {{0}}, o[LANES_MAX];
        const i64 left = K * (n - y) - (first ? K - 1 : 0);
#if LV_MASKED
        for (int j = 0; j < K; j++) v[j] = LV_LOAD_MASKED(s + K * y + j * LV, lv_mask(left - j * LV));
#else
        memcpy(v, s + K * y, (size_t)left * ELEM_BYTES);
#endif
        lanes_split_vec(v, o, K, first);
#if LV_MASKED && !defined(CAST_SRC)
        for (int k = 0; k < outs; k++) LV_STORE_MASKED(d + k * ls + y, o[k], lv_mask(n - y));
#else
        for (int k = 0; k < outs; k++) STORE_PART(d + k * ls + y, &o[k], LV, n - y);
#endif
    }
}

/* Pixels [0, n) of K rows interleaved: d[K*x + k] = s[x + k*ls] for lanes k in [lo, hi),
   the fill f for the others (which are not read). */
ALWAYS_INLINE void lanes_join_k(const elem_t* s, i64 ls, dst_t* d, i64 n, int K, int lo,
                                int hi, elem_t f) {
    const lvec fv = (lvec){0} + f;
    i64 x = 0;
    for (; x + LV <= n; x += LV) {
        lvec r[LANES_MAX], o[LANES_MAX];
        for (int k = 0; k < K; k++)
            if (k >= lo && k < hi) memcpy(&r[k], s + x + k * ls, LV_BYTES);
            else r[k] = fv;
        lanes_join_vec(r, o, K);
        for (int j = 0; j < K; j++) STORE_N(d + K * x + j * LV, &o[j], LV);
    }
    if (x < n) {
        lvec r[LANES_MAX], o[LANES_MAX];
        for (int k = 0; k < K; k++) r[k] = fv;
#if LV_MASKED
        for (int k = lo; k < hi; k++) r[k] = LV_LOAD_MASKED(s + x + k * ls, lv_mask(n - x));
#else
        for (int k = lo; k < hi; k++) memcpy(&r[k], s + x + k * ls, (size_t)(n - x) * ELEM_BYTES);
#endif
        lanes_join_vec(r, o, K);
#if LV_MASKED && !defined(CAST_SRC)
        for (int j = 0; j < K; j++)
            LV_STORE_MASKED(d + K * x + j * LV, o[j], lv_mask(K * (n - x) - j * LV));
#else
        STORE_PART(d + K * x, o, K * LV, K * (n - x));
#endif
    }
}

static void lanes_split(const elem_t* s, dst_t* d, i64 ls, i64 n, int K, int first) {
    switch (K) {
    case 2: lanes_split_k(s, d, ls, n, 2, first); break;
    case 3: lanes_split_k(s, d, ls, n, 3, first); break;
#if LANES_MAX > 4
    case 4: lanes_split_k(s, d, ls, n, 4, first); break;
    case 5: lanes_split_k(s, d, ls, n, 5, first); break;
    case 6: lanes_split_k(s, d, ls, n, 6, first); break;
    case 7: lanes_split_k(s, d, ls, n, 7, first); break;
    default: lanes_split_k(s, d, ls, n, 8, first); break;
#else
    default: lanes_split_k(s, d, ls, n, 4, first); break;
#endif
    }
}

static void lanes_join(const elem_t* s, i64 ls, dst_t* d, i64 n, int K) {
    switch (K) {
    case 2: lanes_join_k(s, ls, d, n, 2, 0, 2, 0); break;
    case 3: lanes_join_k(s, ls, d, n, 3, 0, 3, 0); break;
#if LANES_MAX > 4
    case 4: lanes_join_k(s, ls, d, n, 4, 0, 4, 0); break;
    case 5: lanes_join_k(s, ls, d, n, 5, 0, 5, 0); break;
    case 6: lanes_join_k(s, ls, d, n, 6, 0, 6, 0); break;
    case 7: lanes_join_k(s, ls, d, n, 7, 0, 7, 0); break;
    default: lanes_join_k(s, ls, d, n, 8, 0, 8, 0); break;
#else
    default: lanes_join_k(s, ls, d, n, 4, 0, 4, 0); break;
#endif
    }
}

/* lanes_join with lanes [lo, hi) read and the others the fill f (a pack's padding). */
static void lanes_join_filled(const elem_t* s, i64 ls, dst_t* d, i64 n, int K, int lo, int hi,
                              elem_t f) {
    switch (K) {
    case 2: lanes_join_k(s, ls, d, n, 2, lo, hi, f); break;
    case 3: lanes_join_k(s, ls, d, n, 3, lo, hi, f); break;
#if LANES_MAX > 4
    case 4: lanes_join_k(s, ls, d, n, 4, lo, hi, f); break;
    case 5: lanes_join_k(s, ls, d, n, 5, lo, hi, f); break;
    case 6: lanes_join_k(s, ls, d, n, 6, lo, hi, f); break;
    case 7: lanes_join_k(s, ls, d, n, 7, lo, hi, f); break;
    default: lanes_join_k(s, ls, d, n, 8, lo, hi, f); break;
#else
    default: lanes_join_k(s, ls, d, n, 4, lo, hi, f); break;
#endif
    }
}

#endif
