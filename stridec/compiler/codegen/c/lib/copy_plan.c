/* A planned copy: the loop nest of an argument block (copy_abi.h) around one micro-kernel
   (copy_micro.h). One library per element size serves every copy of that size: sizes,
   strides, the loop order, the blocking and the micro-kernel are all in the argument
   block. Built with ELEM_BYTES and STRIDEC_SYMBOL defined, after the pool's and the
   streaming stores' declarations (stridec/compiler/codegen/c/plan.py joins the parts). */
#ifndef STRIDEC_COPY_ABI_H
#include "copy_abi.h"
#endif
#ifndef TV
#include "copy_micro.h"
#endif
#ifndef STRIDEC_COPY_LANES_H
#include "copy_lanes.h"
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

enum {
#define X(name) H_##name,
    STRIDEC_COPY_HEADER(X)
#undef X
    HEADER_WORDS
};
enum {
#define X(name) L_##name,
    STRIDEC_COPY_LOOP(X)
#undef X
    LOOP_WORDS
};
enum {
#define X(name) G_##name,
    STRIDEC_COPY_GROUP(X)
#undef X
    GROUP_WORDS
};
enum {
#define X(name, id) K_##name = id,
    STRIDEC_COPY_KERNELS(X)
#undef X
};

#define MAXL STRIDEC_COPY_MAX_LOOPS
#define MAXT 256
/* A call moving fewer bytes runs on the calling thread: waking a thread costs a few µs. */
#define PARALLEL_BYTES (1 << 18)
/* The destination rows of a streamed transpose are built in L1, this many bytes a strip
   of TV rows, then streamed whole. */
#define STRIP_BYTES 16384
#define STRIP_COLS (STRIP_BYTES / (TV * ELEM_BYTES))
/* Streamed (de)interleaves build this many bytes of each destination run in L1. */
#define RUN_BYTES 4096

typedef struct {
    const elem_t* src;
    elem_t* dst;
    i64 kernel, L, soff, doff, a, b, K, ls, prefetch;
    i64 n[MAXL], t[MAXL];         /* extent and step of each loop */
    i64 cnt[MAXL];                /* blocks of each loop */
    i64 sstep[MAXL], dstep[MAXL]; /* source and destination elements a block on */
    i64 ssb, dsb;                 /* the b loop's strides */
    i64 ga, gb;                   /* dims of a transpose's a and b sides */
    i64 ga_n[STRIDEC_COPY_MAX_GROUP], ga_s[STRIDEC_COPY_MAX_GROUP];
    i64 gb_n[STRIDEC_COPY_MAX_GROUP], gb_s[STRIDEC_COPY_MAX_GROUP];
    i64 units;
    int stream, stage;
} job_t;

ALWAYS_INLINE void put(const job_t* J, elem_t* d, const elem_t* s, i64 n) {
    if (J->stream) stream_copy(d, s, (size_t)n * ELEM_BYTES);
    else memcpy(d, s, (size_t)n * ELEM_BYTES);
}

/* ---- transpose: the block [x0, x0 + na) x [y0, y0 + nb) of the a and b sides */

/* The offsets on the other side of a side's indices [i0, i0 + n): the sum of each index's
   digits (the side's dims, innermost first) times their strides, found for i0 by
   divisions and on by additions. */
static void side_offsets(const i64* extent, const i64* stride, i64 dims, i64 i0, i64 n,
                         i64* out) {
    i64 digit[STRIDEC_COPY_MAX_GROUP], off = 0, rest = i0;
    for (i64 k = 0; k < dims; k++) {
        digit[k] = rest % extent[k];
        rest /= extent[k];
        off += digit[k] * stride[k];
    }
    for (i64 i = 0; i < n; i++) {
        out[i] = off;
        for (i64 k = 0; k < dims; k++) {
            off += stride[k];
            if (++digit[k] < extent[k]) break;
            off -= extent[k] * stride[k];
            digit[k] = 0;
        }
    }
}

/* Rows [0, na) x columns [0, nb) of source rows s (element x of row y at row y, x0 + x)
   into destination rows d (element y of row x), in TV x TV blocks: whole ones, and where
   the rows or columns end, a block's part (masked) or, without masks, a whole block moved
   back to overlap the one before. */
ALWAYS_INLINE void tr_rows_with(src_rows s, int stab, i64 x0, dst_rows d, int dtab, i64 na,
                                i64 nb) {
    for (i64 x = 0; x < na; x += TV) {
        i64 pa = na - x < TV ? na - x : TV;
#if !TV_MASKED
        if (pa < TV && na >= TV) x = na - TV, pa = TV;
#endif
        for (i64 y = 0; y < nb; y += TV) {
            i64 pb = nb - y < TV ? nb - y : TV;
#if !TV_MASKED
            if (pb < TV && nb >= TV) y = nb - TV, pb = TV;
#endif
            if (pa == TV && pb == TV) tr_block(s, stab, x0 + x, d, dtab, x, y);
            else tr_block_part(s, stab, x0 + x, d, dtab, x, y, (int)pa, (int)pb);
        }
    }
}

/* d's rows start at x: dst_row(d, x) is destination row x of the block. */
static void tr_rows(src_rows s, int stab, i64 x0, dst_rows d, int dtab, i64 na, i64 nb) {
    if (stab) {
        if (dtab) tr_rows_with(s, 1, x0, d, 1, na, nb);
        else tr_rows_with(s, 1, x0, d, 0, na, nb);
    } else {
        if (dtab) tr_rows_with(s, 0, x0, d, 1, na, nb);
        else tr_rows_with(s, 0, x0, d, 0, na, nb);
    }
}

/* Source rows of a staged block lie this many elements more than the block's width apart,
   so that a column of them does not fall into one set of L1. */
#define STAGE_PAD (64 / ELEM_BYTES)

static void tile_transpose(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na, i64 nb) {
    const elem_t* rows[STRIDEC_COPY_MAX_ROWS];
    elem_t* outs[TV];
    i64 off[STRIDEC_COPY_MAX_ROWS > TV ? STRIDEC_COPY_MAX_ROWS : TV];
    /* The source rows: a table where the b side has several dims, else base and stride. */
    src_rows s = {rows, J->src + so + J->gb_s[0] * (y0 % J->gb_n[0]), J->gb_s[0]};
    int stab = J->gb > 1;
    if (stab) {
        side_offsets(J->gb_n, J->gb_s, J->gb, y0, nb, off);
        for (i64 y = 0; y < nb; y++) rows[y] = J->src + so + off[y];
    }
    /* Staged: the block's source rows first copied, each as one run, into the thread's
       scratch buffer (in L2), then transposed from there. */
    elem_t* stage = J->stage ? (elem_t*)stridec_pool_scratch_v1() : 0;
    const i64 ps = na + STAGE_PAD;
    if (stage && nb * ps * ELEM_BYTES <= STRIDEC_SCRATCH_BYTES) {
        for (i64 y = 0; y < nb; y++) {
            const elem_t* r = src_row(s, stab, y);
            if (y + 2 < nb) {
                const elem_t* next = src_row(s, stab, y + 2);
                for (i64 k = 0; k < na; k += 64 / ELEM_BYTES) __builtin_prefetch(next + k);
            }
            memcpy(stage + y * ps, r, (size_t)na * ELEM_BYTES);
        }
        s = (src_rows){0, stage, ps};
        stab = 0;
    }
    const int dtab = J->ga > 1;
    elem_t* const dbase = J->dst + dof + J->ga_s[0] * (x0 % J->ga_n[0]);
    elem_t buf[TV * STRIP_COLS] __attribute__((aligned(64)));
    for (i64 x = 0; x < na; x += TV) {
        i64 h = na - x < TV ? na - x : TV;
#if !TV_MASKED
        if (h < TV && na >= TV) x = na - TV, h = TV;  /* overlap the strip before */
#endif
        if (dtab) {
            side_offsets(J->ga_n, J->ga_s, J->ga, x0 + x, h, off);
            for (i64 a = 0; a < h; a++) outs[a] = J->dst + dof + off[a];
        } else {
            for (i64 a = 0; a < h; a++) outs[a] = dbase + (x + a) * J->ga_s[0];
        }
        if (!J->stream) {  /* TV destination rows written by the blocks straight */
            if (dtab) tr_rows(s, stab, x, (dst_rows){outs, 0, 0}, 1, h, nb);
            else tr_rows(s, stab, x, (dst_rows){0, outs[0], J->ga_s[0]}, 0, h, nb);
            continue;
        }
        /* Streamed into TV destination rows that each start a line, whole lines long:
           each line from the registers, streamed. */
        int lines = h == TV && nb % TV_LINE == 0;
        for (i64 a = 0; lines && a < h; a++) lines = ((uintptr_t)outs[a] & 63) == 0;
        if (lines) {
            for (i64 y = 0; y < nb; y += TV_LINE) tr_line_nt(s, stab, x, outs, y);
            continue;
        }
        /* Streamed otherwise: the TV destination rows built in L1, STRIP_COLS at a time,
           then streamed out whole (as one run where they are contiguous), so every line
           but a run's first and last is written once, whole, without being read. */
        for (i64 y = 0; y < nb; y += STRIP_COLS) {
            i64 w = nb - y < STRIP_COLS ? nb - y : STRIP_COLS;
            src_rows sy = s;
            if (stab) sy.rows += y;
            else sy.base += y * s.stride;
            tr_rows(sy, stab, x, (dst_rows){0, buf, w}, 0, h, w);
            int joined = 1;
            for (i64 a = 1; a < h; a++) joined &= outs[a] == outs[a - 1] + w;
            if (joined) stream_copy(outs[0] + y, buf, (size_t)(h * w) * ELEM_BYTES);
            else
                for (i64 a = 0; a < h; a++)
                    stream_copy(outs[a] + y, buf + a * w, (size_t)w * ELEM_BYTES);
        }
    }
}

/* ---- K interleaved lanes: deinterleave (split), interleave (join), compress */

static void split_rows(const elem_t* s, elem_t* d, i64 ls, i64 n, int K, int all) {
    lanes_split(s, d, ls, n, K, !all);  /* copy_lanes.h */
}

static void tile_split(const job_t* J, const elem_t* s, elem_t* d, i64 nb, int all) {
    const int K = (int)J->K, rows = all ? K : 1;
    const i64 ls = J->ls;
    if (!J->stream) {
        split_rows(s, d, ls, nb, K, all);
        return;
    }
    const i64 run = RUN_BYTES / ELEM_BYTES;
    elem_t buf[4 * (RUN_BYTES / ELEM_BYTES)] __attribute__((aligned(64)));
    for (i64 y = 0; y < nb; y += run) {
        i64 w = nb - y < run ? nb - y : run;
        split_rows(s + K * y, buf, w, w, K, all);
        for (int k = 0; k < rows; k++) stream_copy(d + k * ls + y, buf + k * w,
                                                   (size_t)w * ELEM_BYTES);
    }
}

static void join_rows(const elem_t* s, i64 ls, elem_t* d, i64 n, int K) {
    lanes_join(s, ls, d, n, K);  /* copy_lanes.h */
}

static void tile_join(const job_t* J, const elem_t* s, elem_t* d, i64 na) {
    const int K = (int)J->K;
    if (!J->stream) {
        join_rows(s, J->ls, d, na, K);
        return;
    }
    const i64 run = RUN_BYTES / ELEM_BYTES / K;
    elem_t buf[RUN_BYTES / ELEM_BYTES] __attribute__((aligned(64)));
    for (i64 x = 0; x < na; x += run) {
        i64 w = na - x < run ? na - x : run;
        join_rows(s + x, J->ls, buf, w, K);
        stream_copy(d + K * x, buf, (size_t)(K * w) * ELEM_BYTES);
    }
}

/* d[y] = s[-y] for y < n: whole vectors reversed in registers; a rest shorter than a
   vector as the last whole vector again (overlapping the one before), or, in a run
   shorter than a vector, through a vector in L1. */
ALWAYS_INLINE void reverse_run(const elem_t* s, elem_t* d, i64 n) {
    i64 y = 0;
    for (; y + SV <= n; y += SV) {
        svec v;
        memcpy(&v, s - y - (SV - 1), SV_BYTES);
        v = sv_reverse(v);
        memcpy(d + y, &v, SV_BYTES);
    }
    if (y == n) return;
    if (n >= SV) {
        svec v;
        memcpy(&v, s - (n - 1), SV_BYTES);
        v = sv_reverse(v);
        memcpy(d + n - SV, &v, SV_BYTES);
        return;
    }
    /* The run's n elements at the top of a vector, so that reversed they lead it. */
    svec v = {0};
    memcpy((elem_t*)&v + (SV - n), s - (n - 1), (size_t)n * ELEM_BYTES);
    v = sv_reverse(v);
    memcpy(d, &v, (size_t)n * ELEM_BYTES);
}

static void tile_reverse(const job_t* J, const elem_t* s, elem_t* d, i64 nb) {
    if (!J->stream) {
        reverse_run(s, d, nb);
        return;
    }
    const i64 run = RUN_BYTES / ELEM_BYTES;
    elem_t buf[RUN_BYTES / ELEM_BYTES] __attribute__((aligned(64)));
    for (i64 y = 0; y < nb; y += run) {
        i64 w = nb - y < run ? nb - y : run;
        reverse_run(s - y, buf, w);
        stream_copy(d + y, buf, (size_t)w * ELEM_BYTES);
    }
}

static void tile_gather(const job_t* J, const elem_t* s, elem_t* d, i64 nb) {
    const i64 ss = J->ssb, ds = J->dsb;
    for (i64 y = 0; y < nb; y++) d[y * ds] = s[y * ss];
}

/* ---- the loop nest */

ALWAYS_INLINE void block(const job_t* J, const i64* idx, i64 so, i64 dof) {
    const elem_t* s = J->src + so;
    elem_t* d = J->dst + dof;
    i64 ea = 1, eb = 1;
    if (J->a >= 0) {
        i64 rest = J->n[J->a] - idx[J->a] * J->t[J->a];
        ea = rest < J->t[J->a] ? rest : J->t[J->a];
    }
    if (J->b >= 0) {
        i64 rest = J->n[J->b] - idx[J->b] * J->t[J->b];
        eb = rest < J->t[J->b] ? rest : J->t[J->b];
    }
    switch (J->kernel) {
    case K_rows: put(J, d, s, eb); break;
    case K_transpose:
        tile_transpose(J, so, dof, idx[J->a] * J->t[J->a], idx[J->b] * J->t[J->b], ea, eb);
        break;
    case K_deinterleave: tile_split(J, s, d, eb, 1); break;
    case K_interleave: tile_join(J, s, d, ea); break;
    case K_compress: tile_split(J, s, d, eb, 0); break;
    case K_reverse: tile_reverse(J, s, d, eb); break;
    default: tile_gather(J, s, d, eb); break;
    }
}

/* Blocks [u0, u1) of the nest, in its order (the last loop fastest): the position of u0
   found by divisions, the others by additions. */
static void work(const job_t* J, i64 u0, i64 u1) {
    const i64 L = J->L;
    i64 idx[MAXL], so = J->soff, dof = J->doff, u = u0;
    for (i64 l = L - 1; l >= 0; l--) {
        idx[l] = u % J->cnt[l];
        u /= J->cnt[l];
        so += idx[l] * J->sstep[l];
        dof += idx[l] * J->dstep[l];
    }
    for (u = u0; u < u1; u++) {
        block(J, idx, so, dof);
        for (i64 l = L - 1; l >= 0; l--) {
            so += J->sstep[l];
            dof += J->dstep[l];
            if (++idx[l] < J->cnt[l]) break;
            so -= J->cnt[l] * J->sstep[l];
            dof -= J->cnt[l] * J->dstep[l];
            idx[l] = 0;
        }
        if (J->prefetch && u + 1 < u1) {  /* the next block's source rows, into L2 */
            const elem_t* s = J->src + so;
            i64 rest = J->n[J->b] - idx[J->b] * J->t[J->b];
            i64 eb = rest < J->t[J->b] ? rest : J->t[J->b];
            for (i64 y = 0; y < eb; y++) __builtin_prefetch(s + y * J->ssb, 0, 2);
        }
    }
}

static void work_task(void* arg, i64 u0, i64 u1) {
    const job_t* J = (const job_t*)arg;
    work(J, u0, u1);
    if (J->stream) stream_end();
}

/* The job of one call, set up in `job` (CAT(STRIDEC_SYMBOL, _job_bytes)() bytes): its
   blocks, negated when they run on the calling thread alone, 0 if none (or the block is
   not one this library reads). CAT(STRIDEC_SYMBOL, _work)(job, u0, u1) runs blocks
   [u0, u1) (a batch's one parallel region, stridec_pool_run_many_v1). */
i64 CAT(STRIDEC_SYMBOL, _prepare)(const void* src, void* dst, const i64* p, i64 nthreads,
                                  void* job) {
    job_t* J = (job_t*)job;
    memset(J, 0, sizeof *J);
    J->src = (const elem_t*)src;
    J->dst = (elem_t*)dst;
    J->kernel = p[H_kernel];
    J->L = p[H_loops];
    J->soff = p[H_src_offset];
    J->doff = p[H_dst_offset];
    J->a = p[H_a_loop];
    J->b = p[H_b_loop];
    J->K = p[H_lanes];
    J->ls = p[H_lane_stride];
    J->prefetch = p[H_prefetch];
    if (p[H_abi] != STRIDEC_COPY_ABI || J->L < 1 || J->L > MAXL || J->kernel < K_rows
        || J->kernel > K_reverse || J->a < -1 || J->a >= J->L || J->b < -1 || J->b >= J->L)
        return 0;
    int lanes = J->kernel >= K_deinterleave && J->kernel <= K_compress;
    if ((lanes && (J->K < 2 || J->K > 4)) || (J->kernel == K_interleave ? J->a : J->b) < 0
        || (J->kernel == K_transpose && J->a < 0))
        return 0;
    i64 units = 1, numel = 1;
    const i64* q = p + HEADER_WORDS;
    for (i64 l = 0; l < J->L; l++, q += LOOP_WORDS) {
        J->n[l] = q[L_extent];
        J->t[l] = q[L_step];
        if (J->n[l] < 0 || J->t[l] < 1) return 0;
        J->cnt[l] = (J->n[l] + J->t[l] - 1) / J->t[l];
        J->sstep[l] = J->t[l] * q[L_src_stride];
        J->dstep[l] = J->t[l] * q[L_dst_stride];
        if (l == J->b) J->ssb = q[L_src_stride], J->dsb = q[L_dst_stride];
        units *= J->cnt[l];
        numel *= J->n[l];
    }
    J->ga = p[H_a_dims];
    J->gb = p[H_b_dims];
    J->stage = (int)p[H_stage];
    if (J->kernel == K_transpose) {
        /* Each side's dims must make up its loop's extent; a block has at most
           STRIDEC_COPY_MAX_ROWS rows. */
        if (J->ga < 1 || J->ga > STRIDEC_COPY_MAX_GROUP || J->gb < 1
            || J->gb > STRIDEC_COPY_MAX_GROUP || J->t[J->b] > STRIDEC_COPY_MAX_ROWS)
            return 0;
        i64 na = 1, nb = 1;
        for (i64 k = 0; k < J->ga; k++, q += GROUP_WORDS) {
            J->ga_n[k] = q[G_extent];
            J->ga_s[k] = q[G_stride];
            if (J->ga_n[k] < 1) return 0;
            na *= J->ga_n[k];
        }
        for (i64 k = 0; k < J->gb; k++, q += GROUP_WORDS) {
            J->gb_n[k] = q[G_extent];
            J->gb_s[k] = q[G_stride];
            if (J->gb_n[k] < 1) return 0;
            nb *= J->gb_n[k];
        }
        if (na != J->n[J->a] || nb != J->n[J->b]) return 0;
    }
    if (J->prefetch && J->b < 0) J->prefetch = 0;
    if (units == 0) return 0;
    J->units = units;
    J->stream = stream_wanted(p[H_stream_bytes]);
    if (nthreads > p[H_parallel]) nthreads = p[H_parallel];
    if (nthreads > MAXT) nthreads = MAXT;
    if ((double)numel * (lanes ? J->K : 1) * 2 * ELEM_BYTES < PARALLEL_BYTES) nthreads = 1;
    return nthreads <= 1 || units < 2 ? -units : units;
}

void CAT(STRIDEC_SYMBOL, _work)(void* job, i64 u0, i64 u1) { work_task(job, u0, u1); }

i64 CAT(STRIDEC_SYMBOL, _job_bytes)(void) { return (i64)sizeof(job_t); }

void STRIDEC_SYMBOL(const void* src, void* dst, const i64* p, i64 nthreads) {
    job_t J;
    i64 units = CAT(STRIDEC_SYMBOL, _prepare)(src, dst, p, nthreads, &J);
    if (units <= 0) {
        if (units < 0) work_task(&J, 0, -units);
        return;
    }
    if (nthreads > p[H_parallel]) nthreads = p[H_parallel];
    if (nthreads > MAXT) nthreads = MAXT;
    i64 chunk = p[H_chunk] > 0 ? p[H_chunk] : (units + 8 * nthreads - 1) / (8 * nthreads);
    stridec_pool_run_v1(work_task, &J, units, chunk, nthreads);
}
