/* One output variant of philox.c, included once per element type (no include guard):
   the entry point PHILOX_NAME, storing PHILOX_OUT elements, word w's value
   PHILOX_CONVERT(w, low, scale); with PHILOX_INTERLEAVE, whole blocks stored through
   interleave4_u32. It undefines those parameters at its end. */
static inline PHILOX_OUT PHILOX_FN(convert)(u32 w, float low, float scale) {
    (void)low; (void)scale;
    return PHILOX_CONVERT(w, low, scale);
}

/* Blocks [q0, q1) of a contiguous output: elements 4q ... 4q+3 (those below numel). */
static void PHILOX_FN(linear)(const philox_job_t *J, i64 q0, i64 q1) {
    PHILOX_OUT *restrict dst = (PHILOX_OUT *)J->dst + J->doff;
    const float low = J->low, scale = J->scale;
    u64 q[LANES];
    u32 y[4][LANES];
    for (i64 b = q0; b < q1; b += LANES) {
        LANE_LOOP
        for (int l = 0; l < LANES; l++) q[l] = (u64)(b + l);
        philox_lanes(&J->key, q, y);
        if (b + LANES <= q1 && 4 * (b + LANES) <= J->numel) {
#ifdef PHILOX_INTERLEAVE
            interleave4_u32(dst + 4 * b, y);
#else
            PHILOX_OUT *restrict out = dst + 4 * b;
            for (int l = 0; l < LANES; l++)
                for (int w = 0; w < 4; w++) out[4 * l + w] = PHILOX_FN(convert)(y[w][l], low, scale);
#endif
        } else {
            for (int l = 0; l < LANES && b + l < q1; l++)
                for (int w = 0; w < 4; w++) {
                    i64 i = 4 * (b + l) + w;
                    if (i < J->numel) dst[i] = PHILOX_FN(convert)(y[w][l], low, scale);
                }
        }
    }
}

/* Positions [p0, p1) of the iteration space, row-major: rows of the innermost dim in runs
   of LANES, the outer dims by an odometer (additions, not divisions). Built at -O2: its
   loops move one element at a time through index arithmetic and masks, which -O3 only
   multiplied into more code (a third of gcc's time on the unit); the rounds are
   philox_lanes'. */
static __attribute__((optimize("O2"))) void PHILOX_FN(gather)(const philox_job_t *J, i64 p0, i64 p1) {
    PHILOX_OUT *restrict dst = (PHILOX_OUT *)J->dst;
    const i64 R = J->R, M = J->M, K = R - 1; /* R >= 1; K: the innermost dim */
    const i64 *n = J->n, *is = J->is, *ds = J->ds, *mk = J->mk;
    const i64 nk = n[K], isk = is[K], dsk = ds[K];
    const float low = J->low, scale = J->scale;
    PHILOX_OUT fill;
    memcpy(&fill, &J->fill, sizeof fill); /* little-endian: the low bytes */
    /* i, d, m[]: the logical index, destination and mask sums at the start of the row */
    i64 c[STRIDEC_PHILOX_MAX_RANK], m[STRIDEC_PHILOX_MAX_MASKS];
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
    PHILOX_OUT val[LANES];
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
                PHILOX_OUT v = PHILOX_FN(convert)(word, low, scale);
                val[l] = valid[l] ? v : fill;
            }
            if (dsk == 1) {
                PHILOX_OUT *restrict out = dst + at[0];
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

void PHILOX_NAME(const void *state, void *dst, const i64 *p, i64 nthreads) {
    philox_job_t J;
    philox_job_init(&J, state, dst, p);
    philox_run(&J, J.linear ? PHILOX_FN(linear) : PHILOX_FN(gather), nthreads);
}

#undef PHILOX_NAME
#undef PHILOX_OUT
#undef PHILOX_CONVERT
#undef PHILOX_INTERLEAVE
