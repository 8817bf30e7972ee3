/* A planned copy: the loop nest of an argument block (copy_abi.h) around one micro-kernel
   (copy_micro.h). One library per element size serves every copy of that size: sizes,
   strides, the loop order, the blocking and the micro-kernel are all in the argument
   block. Built with ELEM_BYTES (a cast: CAST_SRC and CAST_DST, copy_cast.h) and
   STRIDEC_SYMBOL defined, after the pool's and the streaming stores' declarations (stridec/compiler/codegen/c/plan.py joins the parts). */
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
#define X(name) M_##name,
    STRIDEC_COPY_MASK(X)
#undef X
    MASK_WORDS
};
enum {
#define X(name, id) K_##name = id,
    STRIDEC_COPY_KERNELS(X)
#undef X
};

#define MAXL STRIDEC_COPY_MAX_LOOPS
#define MAXM STRIDEC_COPY_MAX_MASKS
#define MAXT 256
/* A call moving fewer bytes runs on the calling thread: waking a thread costs a few µs. */
#define PARALLEL_BYTES (1 << 18)
/* The destination rows of a streamed transpose are built in L1, this many bytes a strip
   of TV rows, then streamed whole. */
#define STRIP_BYTES 16384
#define STRIP_COLS (STRIP_BYTES / (TV * WIDE_BYTES))
/* A streamed block's strip of destination rows that follow on, where TV of them are a run
   shorter than SHORT_STRIP_BYTES: a run this long, small enough that the block's source
   rows stay in L1 beside it. */
#define JOINED_ROWS_BYTES 4096
#define SHORT_STRIP_BYTES 512
/* Streamed (de)interleaves build this many bytes of each destination run in L1. */
#define RUN_BYTES 4096

typedef struct {
    const elem_t* src;
    dst_t* dst;
    i64 kernel, L, soff, doff, a, b, K, ls, prefetch;
    i64 n[MAXL], t[MAXL];         /* extent and step of each loop */
    i64 cnt[MAXL];                /* blocks of each loop */
    i64 act[MAXL], nact;          /* the loops of more than one block, outermost first */
    i64 sstep[MAXL], dstep[MAXL]; /* source and destination elements a block on */
    i64 ssb, dsb;                 /* the b loop's strides */
    i64 ssa, dsa;                 /* the a loop's strides (a rows block's runs apart) */
    i64 c, ssc, dsc;              /* a rows block's second loop of runs and its strides;
                                     a permute's matrix's outermost loop */
    i64 ga, gb;                   /* dims of a transpose's a and b sides */
    i64 ga_n[STRIDEC_COPY_MAX_GROUP], ga_s[STRIDEC_COPY_MAX_GROUP];
    i64 gb_n[STRIDEC_COPY_MAX_GROUP], gb_s[STRIDEC_COPY_MAX_GROUP];
    i64 units;
    const char* send;             /* past the last source byte the copy reads */
    int stream, stage;
    i64 M, has_fill;
    dst_t fill;  /* in the destination's type: a cast's fill is the destination's bits */
    /* line[j]: the fill's byte at every address j modulo 64 (the fill's phase follows the
       destination's address, which need not be aligned to its elements) */
    unsigned char line[64] __attribute__((aligned(64)));
    /* permute: the matrix's M elements (pbytes bytes), destination element j from source
       element perm[j] (below); pv: the same for bytes, where the matrix fits a 64-byte
       vector */
    i64 pm, pbytes;
    /* pdense: the matrix is contiguous in the source too (else each element is gathered
       through the table); pinner: elements an index of the a loop, whose last block may be
       shorter (the table's first elements: the a loop is the matrix's outermost on the
       destination); pmax: the table's largest source offset */
    i64 pdense, pinner, pmax;
    unsigned char pv[64] __attribute__((aligned(64)));
    /* masks m < M (last, and not cleared: 25 KiB): bounds, the lanes' coefficient, each
       loop's coefficient and its move a block */
    i64 mlo[MAXM], mhi[MAXM], mlane[MAXM], mc[MAXM][MAXL], mstep[MAXM][MAXL];
    /* a transpose's: each mask's coefficient of each dim of its b side (those of its a
       side are 0 where a side has several dims: the blocks of masked_rows_table) */
    i64 mgb[MAXM][STRIDEC_COPY_MAX_GROUP];
    /* permute's table (not cleared either: permute_table writes the M it reads) */
    int32_t perm[STRIDEC_COPY_MAX_PERMUTE_ELEMENTS];
} job_t;

#ifdef CAST_SRC
/* A run converted, out of line: the loop gcc vectorizes best on its own. */
static __attribute__((noinline)) void cast_rows(dst_t* restrict d, const elem_t* restrict s,
                                                i64 n) {
    cast_run(d, s, n);
}
#endif

ALWAYS_INLINE void put(const job_t* J, dst_t* d, const elem_t* s, i64 n) {
#ifdef CAST_SRC
    if (!J->stream) {
        cast_rows(d, s, n);
        return;
    }
    /* Streamed: from the first line of d on, each line converted in registers and
       streamed from there (where d is aligned to its elements), else converted into L1 a
       run at a time, then streamed out. */
    i64 y = 0;
#ifdef CAST_LINE_RUNS
    if ((uintptr_t)d % DST_BYTES == 0) {
        i64 head = (i64)((-(uintptr_t)d & 63) / DST_BYTES);
        head = head < n ? head : n;
        cast_run(d, s, head);
        for (y = head; y + CV_LINE <= n; y += CV_LINE) {
            dst_t line[CV_LINE] __attribute__((aligned(64)));
            cast_run(line, s + y, CV_LINE);
            stream_line(d + y, line);
        }
        cast_run(d + y, s + y, n - y);
        return;
    }
#endif
    dst_t buf[RUN_BYTES / WIDE_BYTES] __attribute__((aligned(64)));
    for (; y < n; y += RUN_BYTES / WIDE_BYTES) {
        i64 w = n - y < RUN_BYTES / WIDE_BYTES ? n - y : RUN_BYTES / WIDE_BYTES;
        cast_rows(buf, s + y, w);
        stream_copy(d + y, buf, (size_t)w * DST_BYTES);
    }
#else
    if (J->stream) stream_copy(d, s, (size_t)n * ELEM_BYTES);
    else memcpy(d, s, (size_t)n * ELEM_BYTES);
#endif
}

/* n destination elements built in L1 (already converted) written out at d. */
ALWAYS_INLINE void put_out(int stream, dst_t* d, const dst_t* s, i64 n) {
    if (stream) stream_copy(d, s, (size_t)n * DST_BYTES);
    else memcpy(d, s, (size_t)n * DST_BYTES);
}

/* n bytes from s to d for a short run: 32-byte vectors, the last one moved back to end
   with the run, under 32 bytes two words that overlap (a library call costs as much as
   copying a short run); longer runs: memcpy. */
#define SHORT_RUN_BYTES 512
typedef unsigned char run_vec __attribute__((vector_size(32), aligned(1)));
ALWAYS_INLINE void copy_run(void* d, const void* s, size_t n) {
    char* dp = (char*)d;
    const char* sp = (const char*)s;
    if (n > SHORT_RUN_BYTES) {
        memcpy(dp, sp, n);
    } else if (n >= 32) {
        size_t k = 0;
        for (; k + 32 < n; k += 32) *(run_vec*)(dp + k) = *(const run_vec*)(sp + k);
        *(run_vec*)(dp + n - 32) = *(const run_vec*)(sp + n - 32);
    } else if (n >= 16) {
        uint64_t a, b, c, e;
        memcpy(&a, sp, 8); memcpy(&b, sp + 8, 8);
        memcpy(&c, sp + n - 16, 8); memcpy(&e, sp + n - 8, 8);
        memcpy(dp, &a, 8); memcpy(dp + 8, &b, 8);
        memcpy(dp + n - 16, &c, 8); memcpy(dp + n - 8, &e, 8);
    } else if (n >= 8) {  /* two words that overlap: no library call for a few bytes */
        uint64_t a, b;
        memcpy(&a, sp, 8); memcpy(&b, sp + n - 8, 8);
        memcpy(dp, &a, 8); memcpy(dp + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, sp, 4); memcpy(&b, sp + n - 4, 4);
        memcpy(dp, &a, 4); memcpy(dp + n - 4, &b, 4);
    } else if (n >= 2) {
        uint16_t a, b;
        memcpy(&a, sp, 2); memcpy(&b, sp + n - 2, 2);
        memcpy(dp, &a, 2); memcpy(dp + n - 2, &b, 2);
    } else if (n) {
        *dp = *sp;
    }
}

/* Runs shorter than this many bytes that follow on in the destination go a word each
   (gather_runs). */
#define SMALL_RUN_BYTES 64
/* The word a run of n bytes (n <= 64) moves as. */
#define RUN_WORD(n) ((n) <= 8 ? 8 : (n) <= 16 ? 16 : (n) <= 32 ? 32 : 64)
/* Runs a short-run block moves between its shares of the next block's prefetch. */
#define GATHER_PART 64
#define GATHER_WORDS(W) \
    for (; x < fast; x++) memcpy(d + x * (i64)n, s + x * sa, W)

/* `count` runs of n bytes, run x from s + x*sa (bytes) to d + x*n (they follow on in the
   destination): a run shorter than SMALL_RUN_BYTES moved as one word of W >= n bytes
   (8, 16, 32 or 64), whose store the next run's overwrites, so that a run costs one load
   and one store, not a copy of n bytes in pieces and their branches. Words stay within
   `room` bytes from d (what follows the last run there is written later, or is a
   buffer's slack) and below the source's end (J->send); the runs past either go one by
   one, exactly. */
static void gather_runs(const job_t* J, char* d, const char* s, i64 sa, i64 count, size_t n,
                        size_t room) {
    i64 x = 0;
    if (n < SMALL_RUN_BYTES) {
        const size_t W = RUN_WORD(n);
        const char* top = sa > 0 ? s + (count - 1) * sa : s;  /* the highest run's source */
        i64 fast = count;
        /* every run's word inside both (the common case: no division) */
        if ((size_t)(count - 1) * n + W > room || (i64)(J->send - top) < (i64)W) {
            fast = room >= W ? (i64)((room - W) / n) + 1 : 0;
            if (fast > count) fast = count;
            if (sa > 0) {  /* the last run's word below the source's end */
                i64 left = (i64)(J->send - s) - (i64)W;
                i64 lim = left >= 0 ? left / sa + 1 : 0;
                if (fast > lim) fast = lim;
            } else if ((i64)(J->send - s) < (i64)W) {
                fast = 0;  /* the first run's word is the highest */
            }
        }
        switch (W) {
        case 8: GATHER_WORDS(8); break;
        case 16: GATHER_WORDS(16); break;
        case 32: GATHER_WORDS(32); break;
        default: GATHER_WORDS(64); break;
        }
    }
    for (; x < count; x++) copy_run(d + x * (i64)n, s + x * sa, n);
}
#undef GATHER_WORDS

/* A walk along a side's indices: index `at`'s offset on the other side, the sum of its
   digits (the side's dims, innermost first) times their strides, found by divisions where
   the walk starts and on by additions. The offsets go out as pointers, each stored once:
   an array of offsets read back as vectors stalled every block on store forwarding. */
typedef struct {
    i64 digit[STRIDEC_COPY_MAX_GROUP], off, at;
} side_walk;

/* The next block's source runs, prefetched a share at a time while a rows block runs. */
typedef struct {
    const elem_t* base; /* the next block's source, or 0 where there is none */
    i64 y0, na, nb;     /* (transpose: its first index along b) its extents */
    i64 done;           /* its rows (runs) prefetched so far */
    i64 nc;             /* (rows) its extent along the c loop: na * nc runs */
    dst_t* dbase;       /* (rows) the next block's destination */
    const i64* mb;      /* (a transpose masked by rows) the next block's mask bases, */
    unsigned char* ok;  /* its rows that hold them (rows_valid, once `ready`) */
    int ready;
    i64 xa, xc;         /* (rows) run `done`'s index along a and along c */
    side_walk w;        /* (transpose) its b side's walk, where the last call left it */
} next_t;

/* Runs [P->done, upto) of the next rows block (x along a fastest, then along c) into L2
   (prefetcht1), every line of each. The run's indices are counted, not divided out: a
   64-bit division costs 40-90 cycles on a Skylake, more than a short run's copy. */
static void prefetch_runs(const job_t* J, next_t* P, i64 upto) {
    if (!P->base || upto <= P->done) return;
    if (upto > P->na * P->nc) upto = P->na * P->nc;
    const i64 step = 64 / ELEM_BYTES, nb = P->nb;
    i64 xa = P->xa, xc = P->xc;
    for (i64 x = P->done; x < upto; x++) {
        const elem_t* r = P->base + xa * J->ssa + xc * J->ssc;
        for (i64 k = 0; k < nb; k += step) __builtin_prefetch(r + k, 0, 2);
        __builtin_prefetch(r + nb - 1, 0, 2);
        if (++xa == P->na) {
            xa = 0;
            xc++;
        }
    }
    P->xa = xa;
    P->xc = xc;
    P->done = upto;
}

/* The runs of the next rows block that a block of ez parts of ea runs has asked for by the
   time its run x is done: its share, (x + 1) * total / (ez * ea), kept as a quotient and
   a remainder as x grows, with no division a run or a part (P's counters, above); a
   transpose block's rows, the next block's nb over its na. */
typedef struct {
    i64 x, q, r, total, den;
} share_t;

static share_t share_of(i64 total, i64 den) {
    return (share_t){-1, 0, 0, total, den};
}

ALWAYS_INLINE i64 share_after(share_t* S, i64 x) {
    S->r += (x - S->x) * S->total;
    S->x = x;
    if (S->r >= S->den) {
        if (S->r < 2 * S->den) {  /* the common step: a run of a block as large as the next */
            S->q++;
            S->r -= S->den;
        } else {
            S->q += S->r / S->den;
            S->r %= S->den;
        }
    }
    return S->q;
}

/* Source rows [P->done, upto) of the next rows block (along a) into L2, each the segment
   its nc runs along c make where they follow on in the source (J->ssc == nb): a line a
   prefetch, where short runs, each asked for alone, would cost a prefetch or two a run. */
#define SEGMENT_BYTES 256  /* shorter: the prefetches cost more than the block's copy */
static void prefetch_segments(const job_t* J, next_t* P, i64 upto) {
    if (!P->base || upto <= P->done) return;
    if (upto > P->na) upto = P->na;
    const i64 step = 64 / ELEM_BYTES, len = P->nc * P->nb;
    for (i64 x = P->done; x < upto; x++) {
        const elem_t* r = P->base + x * J->ssa;
        for (i64 k = 0; k < len; k += step) __builtin_prefetch(r + k, 0, 2);
        __builtin_prefetch(r + len - 1, 0, 2);
    }
    P->done = upto;
}

/* Runs longer than this many bytes form a rows block only as a group (copy_plan.py's
   ROWS_SHORT_BYTES: shorter ones are blocked along a dim they follow on in). */
#define ROWS_SHORT_BYTES 4096
#define ROW_GROUP 4
#define ROW_AHEAD 16

/* Source run x of a block's ea runs and then of the next block's (P: x along a fastest,
   then along c), or 0 past them. */
ALWAYS_INLINE const char* group_run(const job_t* J, const elem_t* s, i64 ea, const next_t* P,
                                    i64 x) {
    if (x < ea) return (const char*)(s + x * J->ssa);
    x -= ea;
    if (P && P->base && x < P->na * P->nc)
        return (const char*)(P->base + x % P->na * J->ssa + x / P->na * J->ssc);
    return 0;
}

/* ea streamed runs of n bytes (longer than ROWS_SHORT_BYTES: a slice's rows, apart in the
   source): ROW_GROUP runs at a time, line by line in turn, from the source to the
   destination without L1, each run's source prefetched ROW_AHEAD lines ahead, on into the
   next group's runs and the next block's (P). A run that does not go on from the one
   before starts a stream the hardware prefetcher first has to find; the software prefetch
   keeps the lines of every run in flight across that gap (docs/cpu.md). A last partial
   group goes run by run. */
static void stream_row_groups(const job_t* J, const elem_t* s, dst_t* d, i64 ea, size_t n,
                              const next_t* P) {
    const i64 da = J->dsa, total_lines = (i64)((n + 63) / 64);
    i64 pr = 0, pk = ROW_AHEAD;  /* the prefetch cursor: line pk of runs r + pr .. */
    while (pk >= total_lines) { pk -= total_lines; pr += ROW_GROUP; }
    i64 r = 0;
    for (; r + ROW_GROUP <= ea; r += ROW_GROUP, pr -= ROW_GROUP) {
        const char* sp[ROW_GROUP];
        char* dp[ROW_GROUP];
        size_t lines = n / 64, head[ROW_GROUP];
        for (int g = 0; g < ROW_GROUP; g++) {
            sp[g] = (const char*)(s + (r + g) * J->ssa);
            dp[g] = (char*)(d + (r + g) * da);
            head[g] = (size_t)(-(uintptr_t)dp[g]) & 63;
            memcpy(dp[g], sp[g], head[g]);  /* ordinary stores up to the first line */
            sp[g] += head[g];
            dp[g] += head[g];
            if ((n - head[g]) / 64 < lines) lines = (n - head[g]) / 64;
        }
        for (size_t k = 0; k < lines; k++) {
            for (int g = 0; g < ROW_GROUP; g++) {
                const char* p = group_run(J, s, ea, P, r + pr + g);
                if (p) __builtin_prefetch(p + 64 * pk, 0, 3);  /* t0: NTA lost them */
            }
            if (++pk == total_lines) { pk = 0; pr += ROW_GROUP; }
            for (int g = 0; g < ROW_GROUP; g++) stream_line(dp[g] + 64 * k, sp[g] + 64 * k);
        }
        for (int g = 0; g < ROW_GROUP; g++)  /* the rest of each run: a line, a tail */
            stream_copy(dp[g] + 64 * lines, sp[g] + 64 * lines, n - head[g] - 64 * lines);
        /* the cursor moved on by `lines` lines, not a whole run's: on by the rest, so it
           stays ROW_AHEAD lines ahead of the next group */
        pk += total_lines - (i64)lines;
        if (pk >= total_lines) { pk -= total_lines; pr += ROW_GROUP; }
    }
    for (; r < ea; r++) stream_copy(d + r * da, s + r * J->ssa, n);
}

#ifndef CAST_SRC
/* One run of the destination built in L1 (buf, JOINED_BUF bytes, filled up to
   JOINED_BYTES) from runs appended to it and streamed up to the last whole line whenever
   the next run does not fit, the part of a line after it kept, so that no line but the
   run's first and last is written in pieces; the slack past JOINED_BYTES takes the words
   of the last short runs (gather_runs). The buffer stays apart from the cursor: once its
   address escapes into a call, a cursor beside it would be reloaded from memory after
   every run. */
#define JOINED_BYTES (STRIP_BYTES + 64)
#define JOINED_BUF (JOINED_BYTES + SMALL_RUN_BYTES)
typedef struct {
    char* out;    /* where buf[0] goes */
    size_t have;  /* bytes in buf */
} joined_t;

/* buf's run streamed up to its last whole line, the rest kept at buf's start; nothing
   where the run so far ends in the line it starts in. */
ALWAYS_INLINE void joined_flush(unsigned char* buf, joined_t* B) {
    const uintptr_t end = ((uintptr_t)B->out + B->have) & ~(uintptr_t)63;
    if (end <= (uintptr_t)B->out) return;
    const size_t whole = end - (uintptr_t)B->out;
    stream_copy(B->out, buf, whole);
    memmove(buf, buf + whole, B->have - whole);
    B->out += whole;
    B->have -= whole;
}

/* count runs of n bytes, run x from s + x*sa (bytes), appended to the run in buf. */
ALWAYS_INLINE void joined_append(const job_t* J, unsigned char* buf, joined_t* B,
                                 const char* s, i64 sa, i64 count, size_t n) {
    for (i64 x = 0; x < count;) {
        if (B->have + n > JOINED_BYTES) joined_flush(buf, B);
        i64 k = count - x;
        if (B->have + (size_t)k * n > JOINED_BYTES) k = (i64)((JOINED_BYTES - B->have) / n);
        gather_runs(J, (char*)buf + B->have, s + x * sa, sa, k, n, JOINED_BUF - B->have);
        B->have += (size_t)k * n;
        x += k;
    }
}
#endif

/* Runs shorter than this many bytes of a rows block whose destination is one run go a
   word each over the whole block (rows_words): 8, 16 or 32 bytes. */
#define WORD_RUN_BYTES 32

/* Runs [z0, z1) along c of a rows block (ea runs of n bytes along a, sa bytes apart in
   the source; sc along c) into o, where they follow on: run r (z * ea + x) one word of
   W bytes loaded and stored, the next run's store overwriting its tail, for r < fast and
   where the word stays below the source's end (send); the others exactly. Each word's
   run in the next block (at pn, its runs where this block's are; pn == s: none, the word
   itself) is asked for into L1: a block's runs lie apart in lines no prefetcher follows,
   and each load waited on memory (86 % of the time of 1467 runs of 19 bytes a block).
   Out of line, one copy for its two callers (gcc's time on the unit). */
#define ROWS_WORDS(W)                                                                   \
    for (i64 z = z0; z < z1; z++, r += ea, o += ea * (i64)n) {                         \
        const char* sz = s + z * sc;                                                    \
        const char* pz = pn + (sz - s);                                                 \
        i64 k = fast - r >= ea ? ea : fast - r > 0 ? fast - r : 0;                      \
        if (sa > 0) {                                                                   \
            const i64 left = (i64)(send - sz) - (i64)(W);                               \
            const i64 lim = left >= 0 ? left / sa + 1 : 0;                              \
            k = k < lim ? k : lim;                                                      \
        } else if ((i64)(send - sz) < (i64)(W)) {                                       \
            k = 0;                                                                      \
        }                                                                               \
        for (i64 x = 0; x < k; x++) {                                                   \
            char w[W];                                                                  \
            __builtin_prefetch(pz + x * sa + (W) - 1, 0, 3);                            \
            memcpy(w, sz + x * sa, W);                                                  \
            memcpy(o + x * (i64)n, w, W);                                               \
        }                                                                               \
        for (i64 x = k; x < ea; x++) copy_run(o + x * (i64)n, sz + x * sa, n);          \
    }
static __attribute__((noinline)) void rows_words_part(const char* s, const char* send, char* o,
                                                      i64 ea, size_t n, i64 sa, i64 sc, i64 z0,
                                                      i64 z1, i64 r, i64 fast, const char* pn) {
    if (n <= 8) ROWS_WORDS(8) else if (n <= 16) ROWS_WORDS(16) else ROWS_WORDS(32)
}
#undef ROWS_WORDS

/* A rows block of runs shorter than WORD_RUN_BYTES whose destination is one run (the a
   loop's runs follow on there, then the c loop's: a transpose of elements of a few bytes,
   3-byte pixels of a 9 x 64255 x 3 .permute(1, 0, 2)), not streamed: each run one word in
   the destination's order, over the whole block (part by part, a part of 9 runs cost a
   call and its checks: 2.5 ns a run). A run whose word would pass the block's destination
   or the source's end is copied exactly. `next`: the next block's source, asked for as
   the block goes (s where there is none). */
static __attribute__((noinline)) void rows_words(const job_t* J, const elem_t* s, dst_t* d,
                                                 i64 ea, i64 eb, i64 ec, const elem_t* next) {
    const size_t n = (size_t)eb * ELEM_BYTES, W = RUN_WORD(n);
    const i64 runs = ea * ec;
    const i64 fast = (size_t)runs * n < W ? 0 : (i64)(((size_t)runs * n - W) / n) + 1;
    rows_words_part((const char*)s, J->send, (char*)d, ea, n, J->ssa * ELEM_BYTES,
                    J->ssc * ELEM_BYTES, 0, ec, 0, fast, (const char*)next);
}

/* Part z of ez of a block of the rows kernel: ea runs of eb elements along the a loop (its
   strides ssa and dsa), the next block's source prefetched as it goes (P, or 0; S: how
   much of it the block's runs have asked for). Streamed, runs that follow on in the
   destination are built in L1 and streamed out as one run; long runs of a block of one
   part go in groups (stream_row_groups). */
static void tile_rows(const job_t* J, const elem_t* s, dst_t* d, i64 ea, i64 eb, next_t* P,
                      share_t* S, i64 z, i64 ez) {
    const i64 sa = J->ssa, da = J->dsa;
#define PREFETCH_RUNS(x) \
    if (P) prefetch_runs(J, P, share_after(S, z * ea + (x)))
#ifndef CAST_SRC
    const size_t n = (size_t)eb * ELEM_BYTES;
    /* Runs of a few bytes: asking for each of the next block's runs costs more than its
       copy, and the runs of a line come in together anyway. */
    if (n < 16) P = 0;
    if (!J->stream) {
        if (n > ROWS_SHORT_BYTES) P = 0;  /* long runs: the prefetchers follow them */
        if (da == eb && n < SMALL_RUN_BYTES && (size_t)ea * n >= SEGMENT_BYTES) {
            /* one run in the destination, several words long: a word a run */
            for (i64 x = 0; x < ea; x += GATHER_PART) {
                const i64 e = ea - x < GATHER_PART ? ea : x + GATHER_PART;
                PREFETCH_RUNS(e - 1);
                gather_runs(J, (char*)(d + x * eb), (const char*)(s + x * sa), sa * ELEM_BYTES,
                            e - x, n, (size_t)(ea - x) * n);
            }
            return;
        }
        for (i64 x = 0; x < ea; x++) {
            PREFETCH_RUNS(x);
            copy_run(d + x * da, s + x * sa, n);
        }
        return;
    }
    if (n > ROWS_SHORT_BYTES && ez == 1) {
        stream_row_groups(J, s, d, ea, n, P);
        return;
    }
    if (n % 64 == 0 && ((uintptr_t)d & 63) == 0 && (da * ELEM_BYTES) % 64 == 0) {
        /* Runs of whole lines, each starting one: streamed line by line from the source
           (attention heads' 256-byte rows), no copy through L1. */
        for (i64 x = 0; x < ea; x++) {
            PREFETCH_RUNS(x);
            const char* sp = (const char*)(s + x * sa);
            char* dp = (char*)(d + x * da);
            for (size_t k = 0; k < n; k += 64) stream_line(dp + k, sp + k);
        }
        return;
    }
    if (da == eb && eb * ELEM_BYTES <= STRIP_BYTES / 2) {
        /* The block's destination is one run. */
        unsigned char buf[JOINED_BUF] __attribute__((aligned(64)));
        joined_t B = {(char*)d, 0};
        for (i64 x = 0; x < ea; x += GATHER_PART) {
            const i64 e = ea - x < GATHER_PART ? ea : x + GATHER_PART;
            PREFETCH_RUNS(e - 1);
            joined_append(J, buf, &B, (const char*)(s + x * sa), sa * ELEM_BYTES, e - x, n);
        }
        stream_copy(B.out, buf, B.have);
        return;
    }
#endif
    for (i64 x = 0; x < ea; x++) {
        PREFETCH_RUNS(x);
        put(J, d + x * da, s + x * sa, eb);
    }
#undef PREFETCH_RUNS
}

#ifndef CAST_SRC
/* A streamed rows block whose destination is one run over all its parts (the c loop goes
   on where the a loop's runs end there): built in L1 across the parts and streamed whole
   lines at a time, so that only the block's first and last lines are written in pieces;
   part by part, each part's few runs would start and end inside lines. Runs of whole
   lines that start on one need no buffer: each line streams straight from the source. */
static void tile_rows_joined(const job_t* J, const elem_t* s, dst_t* d, i64 ea, i64 eb,
                             i64 ec, next_t* P) {
    const size_t n = (size_t)eb * ELEM_BYTES;
    unsigned char buf[JOINED_BUF] __attribute__((aligned(64)));
    joined_t B = {(char*)d, 0};
    /* Runs shorter than a line: the next block's, asked for one by one, cost more than
       they save; where they follow on in the source along c, each of its source rows
       along a is one segment, asked for a line at a time. */
    const int segments = J->ssc == eb && ec * eb * ELEM_BYTES >= SEGMENT_BYTES;
    /* the next block's source for the words' prefetch, or the block's own */
    const char* next = P && P->base ? (const char*)P->base : (const char*)s;
    if (n < 64 && !segments) P = 0;
    if (n < WORD_RUN_BYTES && (size_t)ea * n <= JOINED_BYTES - 64) {
        /* Runs of a few bytes (12-byte pixels of a 9 x 759 transpose): a word each over
           as many parts as the buffer takes (rows_words_part), streamed out between;
           part by part, and with the next block's runs asked for by prefetch_runs, they
           took twice as long as the same block not streamed (a word's prefetch is one
           instruction). */
        const i64 per = (i64)((JOINED_BYTES - 64) / ((size_t)ea * n));
        for (i64 z0 = 0; z0 < ec; z0 += per) {
            const i64 z1 = ec - z0 < per ? ec : z0 + per;
            rows_words_part((const char*)s, J->send, (char*)buf + B.have, ea, n,
                            J->ssa * ELEM_BYTES, J->ssc * ELEM_BYTES, z0, z1, 0, INT64_MAX / 2,
                            next);
            B.have += (size_t)(z1 - z0) * (size_t)ea * n;
            joined_flush(buf, &B);
        }
        stream_copy(B.out, buf, B.have);
        return;
    }
    /* through L1, rotate_half's 128-byte halves took 1.7x as long */
    const int lines = n % 64 == 0 && ((uintptr_t)d & 63) == 0;
    char* o = (char*)d;
    for (i64 z = 0; z < ec; z++) {
        const elem_t* sz = s + z * J->ssc;
        if (P && segments) prefetch_segments(J, P, (z + 1) * P->na / ec);
        else if (P) prefetch_runs(J, P, (z + 1) * (P->na * P->nc) / ec);  /* a part's share */
        if (!lines) {
            joined_append(J, buf, &B, (const char*)sz, J->ssa * ELEM_BYTES, ea, n);
            continue;
        }
        for (i64 x = 0; x < ea; x++, o += n) {
            const char* sp = (const char*)(sz + x * J->ssa);
            for (size_t k = 0; k < n; k += 64) stream_line(o + k, sp + k);
        }
    }
    stream_copy(B.out, buf, B.have);
}
#endif

/* ---- masks */

static inline i64 floordiv(i64 a, i64 b) {  /* b > 0 */
    i64 q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline i64 ceildiv(i64 a, i64 b) { return -floordiv(-a, b); }

/* [*a, *b) narrowed to the j where every mask holds: lo <= base[m] + c_m*j < hi, c_m mask
   m's coefficient of loop l (or its lanes', l < 0). Empty: [n, n). */
ALWAYS_INLINE void clip(const job_t* J, const i64* base, i64 l, i64 n, i64* a, i64* b) {
    for (i64 m = 0; m < J->M; m++) {
        i64 c = l < 0 ? J->mlane[m] : J->mc[m][l], lo = J->mlo[m], hi = J->mhi[m];
        i64 B = base[m], x, y;
        if (c == 1) { x = lo - B; y = hi - B; }  /* a pad's bound: no division */
        else if (c > 0) { x = ceildiv(lo - B, c); y = ceildiv(hi - B, c); }
        else if (c < 0) { x = floordiv(B - hi, -c) + 1; y = floordiv(B - lo, -c) + 1; }
        else if (lo <= B && B < hi) continue;
        else { x = 0; y = 0; }
        if (x > *a) *a = x;
        if (y < *b) *b = y;
    }
    if (*b <= *a) *a = *b = n;
}

/* n bytes of the fill at d: whole lines streamed when the call streams, the rest from
   the fill's line at d's phase. */
static void fill_bytes(const job_t* J, int stream, char* d, size_t n) {
    size_t head = (size_t)(-(uintptr_t)d) & 63;
    if (stream && n >= head + 64) {
        memcpy(d, J->line + (64 - head) % 64, head);
        d += head;
        n -= head;
        for (; n >= 64; n -= 64, d += 64) stream_line(d, J->line);
    }
    while (n) {
        size_t o = (uintptr_t)d & 63, k = 64 - o < n ? 64 - o : n;
        memcpy(d, J->line + o, k);
        d += k;
        n -= k;
    }
}

typedef dst_t fill_vec __attribute__((vector_size(32)));
typedef dst_t fill_word __attribute__((vector_size(8)));

/* n elements of the fill, `step` elements apart, from d: a contiguous run in 32-byte (or
   8-byte) vectors, the last one moved back to end with the run (the fill repeats every
   element, so any whole number of elements on it is the same bytes), a long streamed run
   by whole lines (`stream`: the call's, or 0 for a buffer in L1). */
ALWAYS_INLINE void fill_to(const job_t* J, int stream, dst_t* d, i64 step, i64 n) {
    if (n <= 0) return;
    const dst_t f = J->fill;
    const size_t bytes = (size_t)n * DST_BYTES;
    char* p = (char*)d;
    if (step != 1) {
        for (i64 y = 0; y < n; y++) memcpy(d + y * step, &f, DST_BYTES);
    } else if (stream && bytes >= 128) {
        fill_bytes(J, stream, p, bytes);
    } else if (bytes >= 32) {
        const fill_vec v = (fill_vec){0} + f;
        size_t k = 0;
        for (; k + 32 <= bytes; k += 32) memcpy(p + k, &v, 32);
        if (k < bytes) memcpy(p + bytes - 32, &v, 32);
    } else if (bytes >= 8) {
        const fill_word v = (fill_word){0} + f;
        size_t k = 0;
        for (; k + 8 <= bytes; k += 8) memcpy(p + k, &v, 8);
        if (k < bytes) memcpy(p + bytes - 8, &v, 8);
    } else {
        for (i64 y = 0; y < n; y++) memcpy(d + y, &f, DST_BYTES);
    }
}

ALWAYS_INLINE void fill_run(const job_t* J, dst_t* d, i64 step, i64 n) {
    fill_to(J, J->stream, d, step, n);
}

/* Whether every element of a block (ea along loop a, eb along b, K lanes) holds every
   mask (1), some mask holds on none of them (0), or neither (-1). */
static int block_state(const job_t* J, const i64* mb, i64 ea, i64 eb, i64 K) {
    int all = 1;
    for (i64 m = 0; m < J->M; m++) {
        i64 lo = mb[m], hi = mb[m];
        i64 span[3] = {J->a >= 0 ? J->mc[m][J->a] * (ea - 1) : 0,
                       J->b >= 0 ? J->mc[m][J->b] * (eb - 1) : 0, J->mlane[m] * (K - 1)};
        for (int k = 0; k < 3; k++) {
            if (span[k] < 0) lo += span[k];
            else hi += span[k];
        }
        if (hi < J->mlo[m] || lo >= J->mhi[m]) return 0;
        if (lo < J->mlo[m] || hi >= J->mhi[m]) all = 0;
    }
    return all ? 1 : -1;
}

/* Whether mask m holds at every element of a block (ea along a, eb along b). */
static int mask_holds(const job_t* J, const i64* mb, i64 m, i64 ea, i64 eb) {
    i64 lo = mb[m], hi = mb[m];
    i64 span[2] = {J->a >= 0 ? J->mc[m][J->a] * (ea - 1) : 0,
                   J->b >= 0 ? J->mc[m][J->b] * (eb - 1) : 0};
    for (int k = 0; k < 2; k++) {
        if (span[k] < 0) lo += span[k];
        else hi += span[k];
    }
    return lo >= J->mlo[m] && hi < J->mhi[m];
}

/* Row [0, n) of a stage: source elements [a, b) of it from s, around them the fill (a
   copy's) or zeros (a cast's: its fill is the destination's bits, written over the
   converted row). */
static void stage_row(const job_t* J, elem_t* d, const elem_t* s, i64 n, i64 a, i64 b) {
#ifdef CAST_SRC
    (void)J;
    memset(d, 0, (size_t)a * ELEM_BYTES);
    if (b > a) memcpy(d + a, s + a, (size_t)(b - a) * ELEM_BYTES);
    memset(d + b, 0, (size_t)(n - b) * ELEM_BYTES);
#else
    fill_to(J, 0, d, 1, a);
    if (b > a) memcpy(d + a, s + a, (size_t)(b - a) * ELEM_BYTES);
    fill_to(J, 0, d + b, 1, n - b);
#endif
}

/* ---- transpose: the block [x0, x0 + na) x [y0, y0 + nb) of the a and b sides */


static void side_seek(side_walk* w, const i64* extent, const i64* stride, i64 dims, i64 i0) {
    i64 rest = i0;
    w->off = 0;
    w->at = i0;
    for (i64 k = 0; k < dims; k++) {
        w->digit[k] = rest % extent[k];
        rest /= extent[k];
        w->off += w->digit[k] * stride[k];
    }
}

/* How many of the next n indices lie in the walk's current run of the innermost dim:
   their offsets are w->off + j * stride[0] (j below that), no division, no carry. */
ALWAYS_INLINE i64 side_run(const side_walk* w, const i64* extent, i64 n) {
    const i64 left = extent[0] - w->digit[0];
    return left < n ? left : n;
}

/* The walk `run` indices on (run <= side_run's count): the innermost digit advanced, and
   the carry where it reaches its extent. */
ALWAYS_INLINE void side_skip(side_walk* w, const i64* extent, const i64* stride, i64 dims,
                             i64 run) {
    w->at += run;
    w->off += run * stride[0];
    if ((w->digit[0] += run) < extent[0]) return;
    w->off -= extent[0] * stride[0];
    w->digit[0] = 0;
    for (i64 k = 1; k < dims; k++) {
        w->off += stride[k];
        if (++w->digit[k] < extent[k]) break;
        w->off -= extent[k] * stride[k];
        w->digit[k] = 0;
    }
}

/* out[0, n): `base` plus walk w's next n offsets, a run of the innermost dim at a time
   (a step a row carried each row's digits through memory). A macro: the rows are source
   or destination pointers. */
#define SIDE_ROWS(w, extent, stride, dims, base, n, out)                                \
    for (i64 i_ = 0; i_ < (n);) {                                                       \
        const i64 run_ = side_run(&(w), extent, (n) - i_);                              \
        for (i64 j_ = 0; j_ < run_; j_++)                                               \
            (out)[i_ + j_] = (base) + (w).off + j_ * (stride)[0];                       \
        i_ += run_;                                                                     \
        side_skip(&(w), extent, stride, dims, run_);                                    \
    }

/* Source rows [y0, y0 + n) of the b side from `base`. */
static void side_src_rows(const job_t* J, const elem_t* base, i64 y0, i64 n,
                          const elem_t** out) {
    side_walk w;
    side_seek(&w, J->gb_n, J->gb_s, J->gb, y0);
    SIDE_ROWS(w, J->gb_n, J->gb_s, J->gb, base, n, out);
}

/* Rows [0, na) x columns [0, nb) of source rows s (element x of row y at row y, x0 + x)
   into destination rows d (element y of row x), in TV x TV blocks: whole ones, and where
   the rows or columns end, a block's part (masked) or, without masks, a whole block moved
   back to overlap the one before. */
ALWAYS_INLINE void tr_rows_with(src_rows s, int stab, i64 x0, dst_rows d, int dtab, i64 na,
                                i64 nb) {
    i64 xw = 0;  /* rows [0, xw) x columns [0, yw): wide blocks */
    const i64 yw = nb / TV * TV;
#if TW > TV
    for (; xw + TW <= na; xw += TW)
        for (i64 y = 0; y < yw; y += TV) tr_block_wide(s, stab, x0 + xw, d, dtab, xw, y);
#endif
    for (i64 x = 0; x < na; x += TV) {
        i64 pa = na - x < TV ? na - x : TV;
#if !TV_MASKED
        if (pa < TV && na >= TV) x = na - TV, pa = TV;
#endif
        for (i64 y = x + pa <= xw ? yw : 0; y < nb; y += TV) {
            i64 pb = nb - y < TV ? nb - y : TV;
#if !TV_MASKED
            if (pb < TV && nb >= TV) y = nb - TV, pb = TV;
#endif
            if (pa == TV && pb == TV) tr_block(s, stab, x0 + x, d, dtab, x, y);
            else tr_block_part(s, stab, x0 + x, d, dtab, x, y, (int)pa, (int)pb);
        }
    }
}

/* d's rows start at x: dst_row(d, x) is destination row x of the block. The rows come by
   address: a struct passed by value was stored a field at a time and loaded as a vector,
   stalling each call on store forwarding. */
static void tr_rows(const src_rows* sp, int stab, i64 x0, const dst_rows* dp, int dtab,
                    i64 na, i64 nb) {
    const src_rows s = {sp->rows, sp->base, sp->stride};
    const dst_rows d = {dp->rows, dp->base, dp->stride};
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

/* ok[y] for rows [0, nb) of a block of a transpose masked by rows (masked_rows_table)
   whose mask bases are mb and first index along b y0: whether every mask holds on the
   row, by its index's digits on the b side; returns the rows that hold. */
static i64 rows_valid(const job_t* J, const i64* mb, i64 y0, i64 nb, unsigned char* ok) {
    i64 val[MAXM], digit[STRIDEC_COPY_MAX_GROUP], rest = y0, valid = 0;
    for (i64 m = 0; m < J->M; m++) val[m] = mb[m] - J->mc[m][J->b] * y0;
    for (i64 k = 0; k < J->gb; k++) {
        digit[k] = rest % J->gb_n[k];
        rest /= J->gb_n[k];
        for (i64 m = 0; m < J->M; m++) val[m] += digit[k] * J->mgb[m][k];
    }
    for (i64 y = 0; y < nb; y++) {
        int holds = 1;
        for (i64 m = 0; m < J->M; m++) holds &= J->mlo[m] <= val[m] && val[m] < J->mhi[m];
        ok[y] = (unsigned char)holds;
        valid += holds;
        for (i64 k = 0; k < J->gb; k++) {
            for (i64 m = 0; m < J->M; m++) val[m] += J->mgb[m][k];
            if (++digit[k] < J->gb_n[k]) break;
            for (i64 m = 0; m < J->M; m++) val[m] -= J->gb_n[k] * J->mgb[m][k];
            digit[k] = 0;
        }
    }
    return valid;
}

/* The lines of bytes [a, e) into L2 (prefetcht1), but `*last`, the line asked for
   before; `*last` becomes e's. */
ALWAYS_INLINE void prefetch_lines(uintptr_t a, uintptr_t e, uintptr_t* last) {
    for (uintptr_t line = a & ~(uintptr_t)63; line < e; line += 64)
        if (line != *last) __builtin_prefetch((const void*)line, 0, 2);
    *last = (e - 1) & ~(uintptr_t)63;
}

/* Rows [P->done, upto) of the next block into L2 (prefetcht1), every line of each (of a
   block masked by rows, the rows it reads). */
static void prefetch_rows(const job_t* J, next_t* P, i64 upto) {
    if (!P->base || upto <= P->done) return;
    if (upto > P->nb) upto = P->nb;
    const i64 na = P->na;
    if (P->mb && !P->ready) {
        rows_valid(J, P->mb, P->y0, P->nb, P->ok);
        P->ready = 1;
    }
    side_walk* w = &P->w;  /* a seek divides by each dim: only where the walk is elsewhere */
    const i64 s0 = J->gb_s[0];
    uintptr_t last = 0;  /* the line asked for last: rows under a line share theirs */
    if (w->at != P->y0 + P->done) side_seek(w, J->gb_n, J->gb_s, J->gb, P->y0 + P->done);
    for (i64 y = P->done; y < upto;) {
        const i64 run = side_run(w, J->gb_n, upto - y);
        const elem_t* r = P->base + w->off;
        if (!P->mb && s0 > 0 && s0 * ELEM_BYTES <= 64) {  /* rows under a line apart */
            prefetch_lines((uintptr_t)r, (uintptr_t)(r + (run - 1) * s0 + na), &last);
        } else {
            for (i64 j = 0; j < run; j++, r += s0)
                if (!P->mb || P->ok[y + j])
                    prefetch_lines((uintptr_t)r, (uintptr_t)(r + na), &last);
        }
        y += run;
        side_skip(w, J->gb_n, J->gb_s, J->gb, run);
    }
    P->done = upto;
}

/* Destination rows outs[0, h) (h <= TW; x: the first's index in the block) of a streamed block:
   each line from the registers where the rows start a line and are whole lines long,
   else built in L1 in `buf` and streamed out. */
static void streamed_rows(src_rows s, int stab, i64 x, dst_t* const* outs, i64 h, i64 nb,
                          dst_t* buf) {
    /* Streamed into TV destination rows that each start a line, whole lines long:
       each line from the registers, streamed. */
#ifdef CAST_SRC
    int lines = CV_PER_LINE && h == TV && nb % CV_LINE == 0;
#else
    int lines = h == TV && nb % TV_LINE == 0;
#endif
    for (i64 a = 0; lines && a < h; a++) lines = ((uintptr_t)outs[a] & 63) == 0;
#if !defined(CAST_SRC) || CV_PER_LINE
    if (lines) {
#ifdef CAST_SRC
        for (i64 y = 0; y < nb; y += CV_LINE) tr_line_nt(s, stab, x, outs, y);
#else
        for (i64 y = 0; y < nb; y += TV_LINE) tr_line_nt(s, stab, x, outs, y);
#endif
        return;
    }
#endif
    /* Streamed otherwise: the TV destination rows built in L1, STRIP_COLS at a time,
       then streamed out whole (as one run where they are contiguous), so every line
       but a run's first and last is written once, whole, without being read. */
    const i64 cols = h > TV ? TV * STRIP_COLS / h : STRIP_COLS;
    for (i64 y = 0; y < nb; y += cols) {
        i64 w = nb - y < cols ? nb - y : cols;
        src_rows sy = s;
        if (stab) sy.rows += y;
        else sy.base += y * s.stride;
        tr_rows(&sy, stab, x, &(dst_rows){0, buf, w}, 0, h, w);
        for (i64 a = 0, e; a < h; a = e) {  /* each run of rows that follow on */
            for (e = a + 1; e < h && outs[e] == outs[e - 1] + w; e++) {}
            stream_copy(outs[a] + y, buf + a * w, (size_t)((e - a) * w) * DST_BYTES);
        }
    }
}

static void tile_transpose_from(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na,
                                i64 nb, const i64* mb, next_t* P, const elem_t** table,
                                const elem_t* keep);

/* P: the next block, whose source lines this one prefetches as it goes, or 0. */
static void tile_transpose(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na, i64 nb,
                           const i64* mb, next_t* P) {
    tile_transpose_from(J, so, dof, x0, y0, na, nb, mb, P, 0, 0);
}

/* tile_transpose, its source rows `table` where given: rows at `keep` (a row of the fill)
   are not staged. */
static void tile_transpose_from(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na,
                                i64 nb, const i64* mb, next_t* P, const elem_t** table,
                                const elem_t* keep) {
    const elem_t* rows[STRIDEC_COPY_MAX_ROWS];
    dst_t* outs[TW];
    /* The source rows: a table where the b side has several dims, else base and stride. */
    src_rows s = {rows, J->src + so + J->gb_s[0] * (y0 % J->gb_n[0]), J->gb_s[0]};
    int stab = J->gb > 1 || table;
    if (table) {
        s.rows = table;
    } else if (stab) {
        side_src_rows(J, J->src + so, y0, nb, rows);
    }
    /* Staged: the block's source rows first copied, each as one run, into the thread's
       scratch buffer (in L2), then transposed from there. */
    const i64 ps = na + STAGE_PAD;
    if (mb) {  /* a mixed block: rows staged with the fill around their valid elements */
        elem_t* stage = (elem_t*)stridec_pool_scratch_v1();
        i64 base[MAXM];
        for (i64 y = 0; y < nb; y++) {
            for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mc[m][J->b] * y;
            i64 a = 0, b = na;
            clip(J, base, J->a, na, &a, &b);
            stage_row(J, stage + y * ps, src_row(s, stab, y), na, a, b);
        }
        s = (src_rows){0, stage, ps};
        stab = 0;
    }
    elem_t* stage = J->stage && !mb ? (elem_t*)stridec_pool_scratch_v1() : 0;
    if (stage && nb * ps * ELEM_BYTES <= STRIDEC_SCRATCH_BYTES) {
        for (i64 y = 0; y < nb; y++) {
            const elem_t* r = src_row(s, stab, y);
            if (y + 2 < nb) {
                const elem_t* next = src_row(s, stab, y + 2);
                for (i64 k = 0; k < na; k += 64 / ELEM_BYTES) __builtin_prefetch(next + k);
            }
            if (table && r == keep) continue;
            memcpy(stage + y * ps, r, (size_t)na * ELEM_BYTES);
            if (table) table[y] = stage + y * ps;
        }
        if (!table) s = (src_rows){0, stage, ps};
        stab = table != 0;
    }
    const int dtab = J->ga > 1;
    share_t S = share_of(P ? P->nb : 0, na);  /* the next block's rows, as x goes */
    dst_t* const dbase = J->dst + dof + J->ga_s[0] * (x0 % J->ga_n[0]);
    /* the destination rows' walk, where the a side has several dims */
    side_walk dw = {.at = -1};
    if (dtab) side_seek(&dw, J->ga_n, J->ga_s, J->ga, x0);
    dst_t buf[TV * STRIP_COLS] __attribute__((aligned(64)));
    /* Streamed rows that follow on (the block's destination one run), whose TV rows are a
       run of a few lines (SHORT_STRIP_BYTES), not whole lines: strips of as many rows as
       make about JOINED_ROWS_BYTES, each streamed as one run (TV rows at a time, most of
       the run's lines are cut at an end and written through the cache). */
    const i64 joined = JOINED_ROWS_BYTES / DST_BYTES < TV * STRIP_COLS
                           ? JOINED_ROWS_BYTES / DST_BYTES : TV * STRIP_COLS;
    const i64 strip_rows = joined / nb / TV * TV;  /* buf holds strip_rows x nb */
    if (J->stream && !dtab && J->ga_s[0] == nb && TV * nb * DST_BYTES < SHORT_STRIP_BYTES
        && nb * DST_BYTES % 64) {
        for (i64 x = 0; x < na; x += strip_rows) {
            i64 h = na - x < strip_rows ? na - x : strip_rows;
            if (P) prefetch_rows(J, P, share_after(&S, x + h - 1));
            tr_rows(&s, stab, x, &(dst_rows){0, buf, nb}, 0, h, nb);
            stream_copy(dbase + x * nb, buf, (size_t)(h * nb) * DST_BYTES);
        }
        return;
    }
#ifdef TR_LINES_WIDE
    const i64 strip = TW;  /* destination rows a strip */
#else
    const i64 strip = J->stream ? TV : TW;
#endif
    for (i64 x = 0; x < na; x += strip) {
        i64 h = na - x < strip ? na - x : strip;
#if !TV_MASKED
        if (h < TV && na >= TV) x = na - TV, h = TV;  /* overlap the strip before */
#endif
        if (P) prefetch_rows(J, P, share_after(&S, x + h - 1));
        if (dtab) {
            if (dw.at != x0 + x) side_seek(&dw, J->ga_n, J->ga_s, J->ga, x0 + x);
            SIDE_ROWS(dw, J->ga_n, J->ga_s, J->ga, J->dst + dof, h, outs);
        } else {
            for (i64 a = 0; a < h; a++) outs[a] = dbase + (x + a) * J->ga_s[0];
        }
        if (!J->stream) {  /* TV destination rows written by the blocks straight */
            if (dtab) tr_rows(&s, stab, x, &(dst_rows){outs, 0, 0}, 1, h, nb);
            else tr_rows(&s, stab, x, &(dst_rows){0, outs[0], J->ga_s[0]}, 0, h, nb);
            continue;
        }
#ifdef TR_LINES_WIDE
        /* Streamed into TW destination rows that each start a line, whole lines long:
           64 x 64 blocks, each row's line from the registers, streamed. */
        int wide = h == TW && nb % TW == 0;
        for (i64 a = 0; wide && a < h; a++) wide = ((uintptr_t)outs[a] & 63) == 0;
        if (wide) {
            for (i64 y = 0; y < nb; y += TW) tr_lines_wide(s, stab, x, outs, y);
            continue;
        }
#endif
        streamed_rows(s, stab, x, outs, h, nb, buf);
    }
}

/* ---- K interleaved lanes: deinterleave (split), interleave (join), compress */

static void split_rows(const elem_t* s, dst_t* d, i64 ls, i64 n, int K, int all) {
    lanes_split(s, d, ls, n, K, !all);  /* copy_lanes.h */
}

#if LV_BYTES == 64 && !defined(CAST_SRC)
/* Pixels [0, n) of K lanes (n a whole number of vectors, each lane's run starting a line):
   each output vector is a line, streamed from the registers. */
ALWAYS_INLINE void split_lines_k(const elem_t* s, dst_t* d, i64 ls, i64 n, int K) {
    for (i64 y = 0; y < n; y += LV) {
        lvec v[LANES_MAX], o[LANES_MAX];
        for (int j = 0; j < K; j++) memcpy(&v[j], s + K * y + j * LV, LV_BYTES);
        lanes_split_vec(v, o, K, 0);
        for (int k = 0; k < K; k++) stream_line(d + k * ls + y, &o[k]);
    }
}
#endif

static void tile_split(const job_t* J, const elem_t* s, dst_t* d, i64 nb, int all) {
    const int K = (int)J->K, rows = all ? K : 1;
    const i64 ls = J->ls;
    if (!J->stream) {
        split_rows(s, d, ls, nb, K, all);
        return;
    }
#if LV_BYTES == 64 && !defined(CAST_SRC)
    if (all && nb % LV == 0 && ((uintptr_t)d & 63) == 0 && (ls * ELEM_BYTES) % 64 == 0) {
        if (K == 2) split_lines_k(s, d, ls, nb, 2);
        else if (K == 3) split_lines_k(s, d, ls, nb, 3);
        else if (K == 4) split_lines_k(s, d, ls, nb, 4);
        else if (K == 5) split_lines_k(s, d, ls, nb, 5);
        else if (K == 6) split_lines_k(s, d, ls, nb, 6);
        else if (K == 7) split_lines_k(s, d, ls, nb, 7);
        else split_lines_k(s, d, ls, nb, 8);  /* not a cast's (LANES_MAX 8) */
        return;
    }
#endif
    const i64 run = RUN_BYTES / WIDE_BYTES;
    dst_t buf[LANES_MAX * (RUN_BYTES / WIDE_BYTES)] __attribute__((aligned(64)));
    for (i64 y = 0; y < nb; y += run) {
        i64 w = nb - y < run ? nb - y : run;
        split_rows(s + K * y, buf, w, w, K, all);
        for (int k = 0; k < rows; k++) stream_copy(d + k * ls + y, buf + k * w,
                                                   (size_t)w * DST_BYTES);
    }
}

static void join_rows(const elem_t* s, i64 ls, dst_t* d, i64 n, int K) {
    lanes_join(s, ls, d, n, K);  /* copy_lanes.h */
}

/* Lanes [lo, hi) from s, the fill for the others (all K: lo = 0, hi = K). */
static void tile_join(const job_t* J, const elem_t* s, i64 ls, dst_t* d, i64 na, int lo,
                      int hi) {
    const int K = (int)J->K;
    if (!J->stream) {
        if (lo == 0 && hi == K) join_rows(s, ls, d, na, K);
        else lanes_join_filled(s, ls, d, na, K, lo, hi, J->fill);
        return;
    }
    const i64 run = RUN_BYTES / WIDE_BYTES / K;
    dst_t buf[RUN_BYTES / WIDE_BYTES] __attribute__((aligned(64)));
    for (i64 x = 0; x < na; x += run) {
        i64 w = na - x < run ? na - x : run;
        if (lo == 0 && hi == K) join_rows(s + x, ls, buf, w, K);
        else lanes_join_filled(s + x, ls, buf, w, K, lo, hi, J->fill);
        stream_copy(d + K * x, buf, (size_t)(K * w) * DST_BYTES);
    }
}

/* d[y] = s[-y] for y < n: whole vectors reversed in registers; a rest shorter than a
   vector as the last whole vector again (overlapping the one before), or, in a run
   shorter than a vector, through a vector in L1. */
ALWAYS_INLINE void reverse_run(const elem_t* s, dst_t* d, i64 n) {
    i64 y = 0;
    for (; y + SV <= n; y += SV) {
        svec v;
        memcpy(&v, s - y - (SV - 1), SV_BYTES);
        v = sv_reverse(v);
        STORE_N(d + y, &v, SV);
    }
    if (y == n) return;
    if (n >= SV) {
        svec v;
        memcpy(&v, s - (n - 1), SV_BYTES);
        v = sv_reverse(v);
        STORE_N(d + n - SV, &v, SV);
        return;
    }
    /* The run's n elements at the top of a vector, so that reversed they lead it. */
    svec v = {0};
    memcpy((elem_t*)&v + (SV - n), s - (n - 1), (size_t)n * ELEM_BYTES);
    v = sv_reverse(v);
    STORE_PART(d, &v, SV, n);
}

static void tile_reverse(const job_t* J, const elem_t* s, dst_t* d, i64 nb) {
    if (!J->stream) {
        reverse_run(s, d, nb);
        return;
    }
    const i64 run = RUN_BYTES / WIDE_BYTES;
    dst_t buf[RUN_BYTES / WIDE_BYTES] __attribute__((aligned(64)));
    for (i64 y = 0; y < nb; y += run) {
        i64 w = nb - y < run ? nb - y : run;
        reverse_run(s - y, buf, w);
        stream_copy(d + y, buf, (size_t)w * DST_BYTES);
    }
}

static void tile_gather(const job_t* J, const elem_t* s, dst_t* d, i64 nb) {
    const i64 ss = J->ssb, ds = J->dsb;
#ifdef CAST_SRC
    for (i64 y = 0; y < nb; y++) d[y * ds] = cast_one(s[y * ss]);
#else
    for (i64 y = 0; y < nb; y++) d[y * ds] = s[y * ss];
#endif
}

/* ---- masked blocks (a cast's fill is in the destination's type: the masked points of
   a block it converts are written with it after, or around, the converted ones) */

/* A block of a row kernel (rows, gather, compress, reverse) where masks apply: the fill,
   the kernel on the elements every mask holds at, the fill. */
ALWAYS_INLINE void masked_row(const job_t* J, const elem_t* s, dst_t* d, const i64* mb, i64 eb) {
    i64 a = 0, b = eb, ds = J->dsb;
    clip(J, mb, J->b, eb, &a, &b);
    if (J->has_fill) fill_run(J, d, ds, a);
    if (b > a) {
        const elem_t* sa = s + a * J->ssb;
        dst_t* da = d + a * ds;
        switch (J->kernel) {
        case K_rows: put(J, da, sa, b - a); break;
        case K_compress: tile_split(J, sa, da, b - a, 0); break;
        case K_reverse: tile_reverse(J, sa, da, b - a); break;
        default: tile_gather(J, sa, da, b - a); break;
        }
    }
    if (J->has_fill) fill_run(J, d + b * ds, ds, eb - b);
}

#ifdef CAST_SRC
/* A cast's mixed interleave block: RUN_BYTES of the destination at a time built in L1,
   the K lanes joined (lanes [lo, hi) read, by_lane; else each lane's valid elements
   staged, zeros around them), converted, then each lane's masked elements the fill. */
static void masked_join_cast(const job_t* J, const elem_t* s, dst_t* d, const i64* mb, i64 ea,
                             int by_lane, int lo, int hi) {
    const i64 K = J->K, run = RUN_BYTES / WIDE_BYTES / 4;
    dst_t buf[RUN_BYTES / WIDE_BYTES] __attribute__((aligned(64)));
    elem_t stage[RUN_BYTES / WIDE_BYTES] __attribute__((aligned(64)));
    i64 base[MAXM], va[LANES_MAX], vb[LANES_MAX];
    for (i64 x = 0; x < ea; x += run) {
        const i64 w = ea - x < run ? ea - x : run;
        for (i64 k = 0; k < K; k++) {
            if (by_lane) {
                va[k] = k >= lo && k < hi ? 0 : w;
                vb[k] = k >= lo && k < hi ? w : w;
                continue;
            }
            for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mlane[m] * k + J->mc[m][J->a] * x;
            va[k] = 0, vb[k] = w;
            clip(J, base, J->a, w, &va[k], &vb[k]);
            stage_row(J, stage + k * w, s + x + k * J->ls, w, va[k], vb[k]);
        }
        if (by_lane) lanes_join_filled(s + x, J->ls, buf, w, (int)K, lo, hi, 0);
        else join_rows(stage, w, buf, w, (int)K);
        for (i64 k = 0; k < K; k++) {
            fill_to(J, 0, buf + k, K, va[k]);
            fill_to(J, 0, buf + K * vb[k] + k, K, w - vb[k]);
        }
        put_out(J->stream, d + K * x, buf, K * w);
    }
}
#endif

/* An interleave block where masks apply: its destination run of K*ea the fill where no
   element is valid, else the K lanes staged with the fill around their valid elements,
   then joined. */
static void masked_join(const job_t* J, const elem_t* s, dst_t* d, const i64* mb, i64 ea) {
    const i64 K = J->K;
    int state = block_state(J, mb, ea, 1, K);
    if (state == 1) {
        tile_join(J, s, J->ls, d, ea, 0, (int)K);
        return;
    }
    if (state == 0) {
        fill_run(J, d, 1, K * ea);
        return;
    }
    int by_lane = 1;  /* the masks vary along the lanes only: lanes [lo, hi) valid */
    for (i64 m = 0; m < J->M; m++) by_lane &= J->mc[m][J->a] == 0;
    i64 lo = 0, hi = K;
    if (by_lane) clip(J, mb, -1, K, &lo, &hi);
#ifdef CAST_SRC
    masked_join_cast(J, s, d, mb, ea, by_lane, (int)lo, (int)hi);
#else
    if (by_lane) {
        tile_join(J, s, J->ls, d, ea, (int)lo, (int)hi);
        return;
    }
    i64 part = STRIDEC_SCRATCH_BYTES / (K * ELEM_BYTES), base[MAXM];
    if (ea > part) {
        for (i64 x = 0; x < ea; x += part) {
            for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mc[m][J->a] * x;
            masked_join(J, s + x, d + K * x, base, ea - x < part ? ea - x : part);
        }
        return;
    }
    elem_t* stage = (elem_t*)stridec_pool_scratch_v1();
    for (i64 k = 0; k < K; k++) {
        for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mlane[m] * k;
        i64 a = 0, b = ea;
        clip(J, base, J->a, ea, &a, &b);
        stage_row(J, stage + k * ea, s + k * J->ls, ea, a, b);
    }
    tile_join(J, stage, ea, d, ea, 0, (int)K);
#endif
}

/* A block whose source rows [ya, yb) are valid, the others masked: TV destination rows
   at a time built in L1 (the fill, once, then the valid rows' transpose into its columns
   [ya, yb)) and written whole, so each destination line is written once (a pack's padded
   lanes: NCHW32 of 3 channels). 0 where nb is wider than a strip. */
#if ELEM_BYTES == 1 && !defined(CAST_SRC) && defined(__AVX512F__)
#include <immintrin.h>
#define BYTE_WORDS 1
/* Rows [0, 16) of a padded block of bytes, row a at d + a*nb: the k <= 4 valid columns'
   bytes (source rows s + j*ss, element x + a) and the fill up to 4 columns, as 16 words
   of 4 bytes (each row's bytes zero-extended, vpmovzxbd, shifted into place) stored by
   one scatter: a pack of 3 channels into NCHW32 is 3 loads a 16 rows, not a 16 x 16
   transpose of 3 rows. */
ALWAYS_INLINE __m512i byte_word_lanes(const elem_t* s, i64 ss, i64 x, i64 k, uint32_t fill) {
    const uint32_t f = fill * 0x01010101u;
    __m512i w = _mm512_set1_epi32((int)(k == 4 ? 0u : f & (~0u << (8 * k))));
    for (i64 j = 0; j < k; j++)
        w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_cvtepu8_epi32(
            _mm_loadu_si128((const __m128i*)(const void*)(s + j * ss + x))), (unsigned)(8 * j)));
    return w;
}

ALWAYS_INLINE void byte_words(const elem_t* s, i64 ss, i64 x, i64 k, elem_t* d, i64 nb,
                              uint32_t fill) {
    const __m512i w = byte_word_lanes(s, ss, x, k, fill);
    const __m512i at = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)nb));
    _mm512_i32scatter_epi32((void*)d, at, w, 1);
}

/* The same 16 rows where they are whole lines together (nb 16, 32 or 64, d on a line,
   the valid columns from a multiple of 4): each line one two-source permute of the words
   and the fill (vpermt2d), stored whole, streamed with `nt`. */
ALWAYS_INLINE void byte_lines(const elem_t* s, i64 ss, i64 x, i64 k, elem_t* d, i64 nb,
                              i64 ya, uint32_t fill, int nt) {
    const __m512i w = byte_word_lanes(s, ss, x, k, fill);
    const __m512i f = _mm512_set1_epi32((int)(fill * 0x01010101u));
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    /* shifts, not divisions: this runs every 16 rows */
    const int per = (int)(nb >> 2), shift = __builtin_ctz((unsigned)per), rows = 16 >> shift;
    const __mmask16 on = _mm512_cmpeq_epi32_mask(_mm512_and_si512(lane, _mm512_set1_epi32(per - 1)),
                                                 _mm512_set1_epi32((int)(ya / 4)));
    const __m512i row = _mm512_srli_epi32(lane, (unsigned)shift);
    for (int l = 0; l < per; l++) {  /* 16 rows are per lines */
        const __m512i idx = _mm512_mask_add_epi32(_mm512_set1_epi32(16), on, row,
                                                  _mm512_set1_epi32(l * rows));
        const __m512i v = _mm512_permutex2var_epi32(w, idx, f);
        if (nt) _mm512_stream_si512((void*)(d + 64 * l), v);
        else _mm512_storeu_si512((void*)(d + 64 * l), v);
    }
}
#endif

static int tile_transpose_filled(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na,
                                 i64 nb, i64 ya, i64 yb) {
    if (nb > STRIP_COLS) return 0;
    dst_t buf[TV * STRIP_COLS] __attribute__((aligned(64)));
    const int stream = J->stream;
    fill_to(J, 0, buf, 1, TV * nb);
    const i64 ds = J->ga_s[0];
    const src_rows s = {0, J->src + so + J->gb_s[0] * (y0 + ya), J->gb_s[0]};
    dst_t* const d = J->dst + dof + x0 * ds;
#ifdef BYTE_WORDS
    /* rows of 16 bytes or more whose valid columns are 4 or fewer, the fill after them */
    const int words = yb - ya <= 4 && ya + 4 <= nb && nb * TV < (1LL << 31) && TV == 16;
    const int lines = words && ds == nb && (nb == 16 || nb == 32 || nb == 64) && ya % 4 == 0
                      && ((uintptr_t)d & 63) == 0;
    const uint32_t fw = (uint32_t)J->fill;  /* a local: the stores below may alias J */
#endif
    i64 x = 0;
#ifdef BYTE_WORDS
    if (lines) {  /* a loop of its own: nothing but the lines, its operands in registers */
        const elem_t* const sb = s.base;
        const i64 ss = s.stride, k = yb - ya;
        for (; x + TV <= na; x += TV) byte_lines(sb, ss, x, k, d + x * ds, nb, ya, fw, stream);
    }
#endif
    for (; x < na; x += TV) {
        i64 h = na - x < TV ? na - x : TV;
        if (!stream && ds == nb) {  /* the fill, then the valid columns over it in L1 */
            fill_to(J, 0, d + x * ds, 1, h * nb);
#ifdef BYTE_WORDS
            if (words && h == TV) {
                byte_words(s.base, s.stride, x, yb - ya, d + x * ds + ya, nb, fw);
                continue;
            }
#endif
            tr_rows(&s, 0, x, &(dst_rows){0, d + x * ds + ya, nb}, 0, h, yb - ya);
            continue;
        }
#ifdef BYTE_WORDS
        if (words && h == TV) byte_words(s.base, s.stride, x, yb - ya, buf + ya, nb, fw);
        else
#endif
        tr_rows(&s, 0, x, &(dst_rows){0, buf + ya, nb}, 0, h, yb - ya);
        if (ds == nb) put_out(stream, d + x * ds, buf, h * nb);
        else
            for (i64 a = 0; a < h; a++) put_out(stream, d + (x + a) * ds, buf + a * nb, nb);
    }
    return 1;
}

/* A fill row of a masked_rows_table block holds this many elements at most. */
#define FILL_ROW_BYTES 4096

/* A masked block of a transpose whose sides have several dims (a CHWN4 pack: the lanes,
   then the batch, one b side of whole lines): no mask depends on the a side, so each
   source row is valid or masked whole, by the digits of its index on the b side. With
   the fill, a masked row is read from a row of the fill and the block is one transpose;
   without, each run of valid rows is transposed on its own. */
static void masked_rows_table(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na,
                              i64 nb, const i64* mb, next_t* P) {
#ifdef CAST_SRC
    (void)J, (void)so, (void)dof, (void)x0, (void)y0, (void)na, (void)nb, (void)mb, (void)P;
#else
    const i64 cap = FILL_ROW_BYTES / ELEM_BYTES;
    if (J->has_fill && na > cap) {  /* no mask depends on a: the same rows in each part */
        for (i64 x = 0; x < na; x += cap)
            masked_rows_table(J, so + x, dof, x0 + x, y0, na - x < cap ? na - x : cap, nb, mb,
                              x + cap < na ? 0 : P);
        return;
    }
    unsigned char ok[STRIDEC_COPY_MAX_ROWS];
    const i64 valid = rows_valid(J, mb, y0, nb, ok);
    if (valid == nb) {
        tile_transpose(J, so, dof, x0, y0, na, nb, 0, P);
        return;
    }
    if (!J->has_fill) {  /* masked rows' destination columns left as they are */
        for (i64 y = 0, e; y < nb; y = e) {
            for (e = y + 1; e < nb && ok[e] == ok[y]; e++) {}
            if (ok[y]) tile_transpose(J, so, dof + y, x0, y0 + y, na, e - y, 0, P);
        }
        return;
    }
    elem_t fill_row[FILL_ROW_BYTES / ELEM_BYTES] __attribute__((aligned(64)));
    fill_to(J, 0, fill_row, 1, na);
    const elem_t* rows[STRIDEC_COPY_MAX_ROWS];
    side_src_rows(J, J->src + so, y0, nb, rows);
    for (i64 y = 0; y < nb; y++) if (!ok[y]) rows[y] = fill_row;
    tile_transpose_from(J, so, dof, x0, y0, na, nb, 0, P, rows, fill_row);
#endif
}

/* A transpose block where masks apply: the kernel where every element is valid, the fill
   of its destination rows where none is, else its source rows staged (tile_transpose),
   in parts that fit the thread's scratch buffer. */
static void masked_transpose(const job_t* J, i64 so, i64 dof, i64 x0, i64 y0, i64 na,
                             i64 nb, const i64* mb, next_t* P) {
    if (J->ga > 1 || J->gb > 1) {  /* P: the next block, of a transpose masked by rows */
        masked_rows_table(J, so, dof, x0, y0, na, nb, mb, P);
        return;
    }
    int state = block_state(J, mb, na, nb, 1);
    if (state == 1) {
        tile_transpose(J, so, dof, x0, y0, na, nb, 0, 0);
        return;
    }
    dst_t* const d = J->dst + dof + x0 * J->ga_s[0];
    const i64 ds = J->ga_s[0];
    const int fill = (int)J->has_fill;  /* 0: masked points are left as they are */
    if (state == 0) {
        for (i64 x = 0; fill && x < na; x++) fill_run(J, d + x * ds, 1, nb);
        return;
    }
    /* whether the masks that do not hold on the whole block vary along a only, or along
       b only (a block of one column or row varies along the other side alone) */
    int by_a = nb == 1, by_b = na == 1;
    if (!by_a && !by_b) {
        by_a = by_b = 1;
        for (i64 m = 0; m < J->M; m++) {
            if (mask_holds(J, mb, m, na, nb)) continue;
            if (J->mc[m][J->b]) by_a = 0;
            if (J->mc[m][J->a]) by_b = 0;
        }
    }
    if (by_b) {  /* source rows [ya, yb) valid: their transpose, the fill around it */
        i64 ya = 0, yb = nb;
        clip(J, mb, J->b, nb, &ya, &yb);
        if (fill && yb > ya && tile_transpose_filled(J, so, dof, x0, y0, na, nb, ya, yb))
            return;
        if (yb > ya) tile_transpose(J, so, dof + ya, x0, y0 + ya, na, yb - ya, 0, 0);
        for (i64 x = 0; fill && x < na; x++) {
            fill_run(J, d + x * ds, 1, ya);
            fill_run(J, d + x * ds + yb, 1, nb - yb);
        }
        return;
    }
    if (by_a) {  /* source columns [xa, xb) valid: whole destination rows of the fill */
        i64 xa = 0, xb = na;
        clip(J, mb, J->a, na, &xa, &xb);
        for (i64 x = 0; fill && x < xa; x++) fill_run(J, d + x * ds, 1, nb);
        if (xb > xa) tile_transpose(J, so + xa, dof, x0 + xa, y0, xb - xa, nb, 0, 0);
        for (i64 x = xb; fill && x < na; x++) fill_run(J, d + x * ds, 1, nb);
        return;
    }
#ifdef CAST_SRC
    if (1) {  /* a cast stages no fill (it is the destination's): halves, as without one */
#else
    if (!fill) {  /* no fill to stage with: halves along a, down to columns (by_b) */
#endif
        i64 h = na / 2, base[MAXM];
        masked_transpose(J, so, dof, x0, y0, h, nb, mb, 0);
        for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mc[m][J->a] * h;
        masked_transpose(J, so + h, dof, x0 + h, y0, na - h, nb, base, 0);
        return;
    }
    i64 rows = STRIDEC_SCRATCH_BYTES / ((na + STAGE_PAD) * ELEM_BYTES);
    if (rows >= nb) {
        tile_transpose(J, so, dof, x0, y0, na, nb, mb, 0);
        return;
    }
    i64 base[MAXM];
    for (i64 y = 0; y < nb; y += rows) {
        for (i64 m = 0; m < J->M; m++) base[m] = mb[m] + J->mc[m][J->b] * y;
        masked_transpose(J, so, dof + y, x0, y0 + y, na, nb - y < rows ? nb - y : rows, base,
                         0);
    }
}

/* ---- the loop nest */

ALWAYS_INLINE void block(const job_t* J, const i64* idx, i64 so, i64 dof, const i64* mb,
                         next_t* P) {
    const elem_t* s = J->src + so;
    dst_t* d = J->dst + dof;
    i64 ea = 1, eb = 1, ec = 1;
    if (J->c >= 0) {
        i64 rest = J->n[J->c] - idx[J->c] * J->t[J->c];
        ec = rest < J->t[J->c] ? rest : J->t[J->c];
    }
    if (J->a >= 0) {
        i64 rest = J->n[J->a] - idx[J->a] * J->t[J->a];
        ea = rest < J->t[J->a] ? rest : J->t[J->a];
    }
    if (J->b >= 0) {
        i64 rest = J->n[J->b] - idx[J->b] * J->t[J->b];
        eb = rest < J->t[J->b] ? rest : J->t[J->b];
    }
    if (J->kernel == K_fill) {
        fill_run(J, d, J->dsb, eb);
        return;
    }
    if (J->M) {
        if (J->kernel == K_transpose)
            masked_transpose(J, so, dof, idx[J->a] * J->t[J->a], idx[J->b] * J->t[J->b], ea,
                             eb, mb, P);
        else if (J->kernel == K_interleave) masked_join(J, s, d, mb, ea);
        else masked_row(J, s, d, mb, eb);
        return;
    }
    switch (J->kernel) {
    case K_rows:
        if (J->a >= 0) {
            /* Streamed, each part's destination run (built in L1, or a block's one run)
               is written through the cache at its first and last line, which start and
               end inside a line: the next block's are asked for (read for ownership) a
               block ahead. */
            if (P && P->base && J->stream && J->dsa == eb && J->dsc == P->na * eb) {
                /* the parts' runs follow on: the block's one run, its two ends (asking for
                   every part's would bring in the lines it streams) */
                __builtin_prefetch(P->dbase, 1, 3);
                __builtin_prefetch(P->dbase + P->nc * P->na * eb - 1, 1, 3);
            } else if (P && P->base && J->stream && (J->dsa == eb || P->na == 1))
                for (i64 z = 0; z < P->nc; z++) {
                    __builtin_prefetch(P->dbase + z * J->dsc, 1, 3);
                    __builtin_prefetch(P->dbase + z * J->dsc + P->na * eb - 1, 1, 3);
                }
#ifndef CAST_SRC
            if (ec > 1 && !J->stream && J->dsa == eb && J->dsc == ea * eb
                && eb * ELEM_BYTES < WORD_RUN_BYTES) {
                rows_words(J, s, d, ea, eb, ec, P && P->base ? P->base : s);
                break;
            }
            if (ec > 1 && J->stream && J->dsa == eb && J->dsc == ea * eb &&
                eb * ELEM_BYTES <= STRIP_BYTES / 2) {
                tile_rows_joined(J, s, d, ea, eb, ec, P);
                break;
            }
#endif
#ifndef CAST_SRC
            if (P && J->c >= 0 && J->ssc == eb && eb * ELEM_BYTES < 64
                && ec * eb * ELEM_BYTES >= SEGMENT_BYTES) {
                /* short runs that follow on in the source along c: the next block's
                   source rows asked for a segment at a time (prefetch_segments) */
                for (i64 z = 0; z < ec; z++) {
                    prefetch_segments(J, P, (z + 1) * P->na / ec);
                    tile_rows(J, s + z * J->ssc, d + z * J->dsc, ea, eb, 0, 0, z, ec);
                }
                break;
            }
#endif
            share_t S = share_of(P ? P->na * P->nc : 0, ec * ea);
            for (i64 z = 0; z < ec; z++)
                tile_rows(J, s + z * J->ssc, d + z * J->dsc, ea, eb, P, &S, z, ec);
        } else {
            put(J, d, s, eb);
        }
        break;
    case K_transpose:
        tile_transpose(J, so, dof, idx[J->a] * J->t[J->a], idx[J->b] * J->t[J->b], ea, eb, 0,
                       P);
        break;
    case K_deinterleave: tile_split(J, s, d, eb, 1); break;
    case K_interleave: tile_join(J, s, J->ls, d, ea, 0, (int)J->K); break;
    case K_compress: tile_split(J, s, d, eb, 0); break;
    case K_reverse: tile_reverse(J, s, d, eb); break;
    default: tile_gather(J, s, d, eb); break;
    }
}

/* The nest's position at block u (its loops' indices, the source and destination
   offsets, the masks' bases), found by divisions. */
ALWAYS_INLINE void odometer_seek(const job_t* J, i64 u, i64* idx, i64* so, i64* dof,
                                 i64* mb) {
    *so = J->soff;
    *dof = J->doff;
    for (i64 m = 0; m < J->M; m++) mb[m] = 0;
    for (i64 l = J->L - 1; l >= 0; l--) {
        idx[l] = u % J->cnt[l];
        u /= J->cnt[l];
        *so += idx[l] * J->sstep[l];
        *dof += idx[l] * J->dstep[l];
        for (i64 m = 0; m < J->M; m++) mb[m] += idx[l] * J->mstep[m][l];
    }
}

/* On to the next block by additions: an odometer over the loops of more than one block. */
ALWAYS_INLINE void odometer_step(const job_t* J, i64* idx, i64* so, i64* dof, i64* mb) {
    for (i64 j = J->nact - 1; j >= 0; j--) {
        const i64 l = J->act[j];
        *so += J->sstep[l];
        *dof += J->dstep[l];
        for (i64 m = 0; m < J->M; m++) mb[m] += J->mstep[m][l];
        if (++idx[l] < J->cnt[l]) break;
        *so -= J->cnt[l] * J->sstep[l];
        *dof -= J->cnt[l] * J->dstep[l];
        for (i64 m = 0; m < J->M; m++) mb[m] -= J->cnt[l] * J->mstep[m][l];
        idx[l] = 0;
    }
}

/* Blocks [u0, u1) of the nest, in its order (the last loop fastest): the position of u0
   found by divisions, the others by additions. */
static void work(const job_t* J, i64 u0, i64 u1) {
    const i64 L = J->L, M = J->M;
    i64 idx[MAXL], so, dof, u, mb[MAXM];
    odometer_seek(J, u0, idx, &so, &dof, mb);
    const int pf = J->prefetch && J->a >= 0 && (J->kernel == K_transpose || J->kernel == K_rows);
    unsigned char next_ok[STRIDEC_COPY_MAX_ROWS];
    for (u = u0; u < u1; u++) {
        i64 here[MAXL], hso = so, hdo = dof, hmb[MAXM];
        for (i64 l = 0; l < L; l++) here[l] = idx[l];
        for (i64 m = 0; m < M; m++) hmb[m] = mb[m];
        odometer_step(J, idx, &so, &dof, mb);
        /* a transpose block prefetches the next block's source lines as it goes */
        next_t P = {0, 0, 0, 0, 0, 1, 0, 0, next_ok, 0};
        if (pf && u + 1 < u1) {
            i64 ra = J->n[J->a] - idx[J->a] * J->t[J->a];
            i64 rb = J->n[J->b] - idx[J->b] * J->t[J->b];
            P.base = J->src + so;
            P.dbase = J->dst + dof;
            P.y0 = idx[J->b] * J->t[J->b];
            P.na = ra < J->t[J->a] ? ra : J->t[J->a];
            P.nb = rb < J->t[J->b] ? rb : J->t[J->b];
            if (M) P.mb = mb;  /* the next block's, after odometer_step */
            if (J->c >= 0) {
                i64 rc = J->n[J->c] - idx[J->c] * J->t[J->c];
                P.nc = rc < J->t[J->c] ? rc : J->t[J->c];
            }
        }
        block(J, here, hso, hdo, hmb, pf ? &P : 0);
    }
}

/* work() of a row kernel's masked blocks (a pad's rows, fill, a copy, fill): each block
   moved before the odometer moves on, without the general block's dispatch, so a short
   row costs little more than its clip. */
static void work_masked_rows(const job_t* J, i64 u0, i64 u1) {
    const i64 b = J->b, tb = J->t[b], nb = J->n[b];
    i64 idx[MAXL], so, dof, mb[MAXM];
    odometer_seek(J, u0, idx, &so, &dof, mb);
    for (i64 u = u0; u < u1; u++) {
        const i64 rest = nb - idx[b] * tb;
        masked_row(J, J->src + so, J->dst + dof, mb, rest < tb ? rest : tb);
        odometer_step(J, idx, &so, &dof, mb);
    }
}

/* A flip's runs shorter than this many bytes go an element at a time (work_elements):
   faster than a vector through L1 each (copy_plan.py's REVERSE_MIN_BYTES). */
#define REVERSE_MIN_BYTES 64

#ifdef CAST_SRC
#define MOVE_ONE(x) cast_one(x)
#else
#define MOVE_ONE(x) (x)
#endif

/* eb elements ss apart from s to d, ds apart; a flip's (ss -1, ds 1) in a loop of its
   own, whose constant strides gcc can vectorize. */
ALWAYS_INLINE void move_elements(const elem_t* s, dst_t* d, i64 eb, i64 ss, i64 ds) {
    if (ss == -1 && ds == 1)
        for (i64 y = 0; y < eb; y++) d[y] = MOVE_ONE(s[-y]);
    else
        for (i64 y = 0; y < eb; y++) d[y * ds] = MOVE_ONE(s[y * ss]);
}

/* work() of a gather's blocks, or a flip's of short runs, none masked: each block's
   elements moved one at a time, without the general block's dispatch; where a block is
   a whole run, the blocks along the innermost loop of several walked by additions and
   the odometer moved once at the end of them (a flip of rows of 7 costs 7 moves and two
   additions a row). */
static void work_elements(const job_t* J, i64 u0, i64 u1) {
    const i64 b = J->b, tb = J->t[b], nb = J->n[b], ss = J->ssb, ds = J->dsb;
    const i64 q = J->cnt[b] == 1 && J->nact > 0 ? J->act[J->nact - 1] : -1;
    i64 idx[MAXL], so, dof, mb[MAXM];
    odometer_seek(J, u0, idx, &so, &dof, mb);
    for (i64 u = u0; u < u1;) {
        if (q >= 0) {
            i64 k = J->cnt[q] - idx[q];
            if (k > u1 - u) k = u1 - u;
            const i64 sq = J->sstep[q], dq = J->dstep[q];
            const elem_t* s = J->src + so;
            dst_t* d = J->dst + dof;
            for (i64 r = 0; r < k; r++, s += sq, d += dq) move_elements(s, d, nb, ss, ds);
            so += (k - 1) * sq;
            dof += (k - 1) * dq;
            idx[q] += k - 1;
            odometer_step(J, idx, &so, &dof, mb);
            u += k;
            continue;
        }
        const i64 rest = nb - idx[b] * tb;
        move_elements(J->src + so, J->dst + dof, rest < tb ? rest : tb, ss, ds);
        odometer_step(J, idx, &so, &dof, mb);
        u++;
    }
}

/* ---- permute: small matrices contiguous on both sides */

typedef unsigned char pvec __attribute__((vector_size(64)));

/* Matrix s (pm elements) permuted into d: where the matrix fits a vector, one load, one
   byte permute and one store (`wide`: of the whole vector, whose bytes past the matrix
   the matrices after it overwrite; else the matrix's bytes alone), else element by
   element through the table. A load stays below the source's end (J->send). */
ALWAYS_INLINE void permute_one(const job_t* J, const elem_t* s, dst_t* d, int wide) {
#if defined(__AVX512VBMI__) && !defined(CAST_SRC)
    if (J->pbytes <= 64) {
        pvec v = {0};
        const pvec idx = *(const pvec*)J->pv;
        if (J->send - (const char*)s >= 64) memcpy(&v, s, 64);
        else memcpy(&v, s, (size_t)J->pbytes);
        v = __builtin_shuffle(v, idx);
        if (wide) memcpy(d, &v, 64);
        else copy_run(d, &v, (size_t)J->pbytes);
        return;
    }
#else
    (void)wide;
#endif
    for (i64 j = 0; j < J->pm; j++) d[j] = MOVE_ONE(s[J->perm[j]]);
}

/* The first m elements of a matrix larger than a vector (or gathered), through the table;
   the next one's source (`next`, or 0) asked for a line each line's worth of elements
   moved: the reads jump about the matrix, where the prefetchers do not follow them.
   Streamed: built in L1, streamed whole. */
#define PERMUTE_LINE (64 / ELEM_BYTES)
#if defined(__AVX512F__) && !defined(CAST_SRC)
#include <immintrin.h>
/* A line's worth of elements, e from e0, by vector gathers: of 4 and 8 bytes one; of 1 and
   2 bytes, 16 at a time, the 4-byte word at each kept to its low element (vpmovdb,
   vpmovdw), so the caller makes sure the words stay below the source's end. */
#define PERMUTE_GATHER 1
ALWAYS_INLINE void permute_gather_line(const job_t* J, const elem_t* s, dst_t* o, i64 e0) {
#if ELEM_BYTES == 8
    const __m256i idx = _mm256_loadu_si256((const __m256i*)(J->perm + e0));
    _mm512_storeu_si512((void*)(o + e0), _mm512_i32gather_epi64(idx, (const void*)s, 8));
#elif ELEM_BYTES == 4
    const __m512i idx = _mm512_loadu_si512((const void*)(J->perm + e0));
    _mm512_storeu_si512((void*)(o + e0), _mm512_i32gather_epi32(idx, (const void*)s, 4));
#else
    for (i64 g = e0; g < e0 + PERMUTE_LINE; g += 16) {
        const __m512i idx = _mm512_loadu_si512((const void*)(J->perm + g));
        const __m512i w = _mm512_i32gather_epi32(idx, (const void*)s, ELEM_BYTES);
#if ELEM_BYTES == 1
        _mm_storeu_si128((__m128i*)(o + g), _mm512_cvtepi32_epi8(w));
#else
        _mm256_storeu_si256((__m256i*)(o + g), _mm512_cvtepi32_epi16(w));
#endif
    }
#endif
}
#endif
static void permute_table_one(const job_t* J, const elem_t* s, dst_t* d, const elem_t* next,
                              i64 m) {
    dst_t buf[STRIDEC_COPY_MAX_PERMUTE_TABLE / DST_BYTES] __attribute__((aligned(64)));
    dst_t* o = J->stream ? buf : d;
    i64 j = 0;
#ifdef PERMUTE_GATHER
    /* the words gathered for elements of 1 or 2 bytes end below the source's end */
    const int gather = ELEM_BYTES >= 4 || (const char*)(s + J->pmax) + 4 <= J->send;
#endif
    for (; j + PERMUTE_LINE <= m; j += PERMUTE_LINE) {
        /* a line of the next matrix a line's worth of elements moved */
        if (next) __builtin_prefetch(J->pdense ? next + j : next + J->perm[j], 0, 2);
#ifdef PERMUTE_GATHER
        if (gather) {
            permute_gather_line(J, s, o, j);
            continue;
        }
#endif
        for (i64 e = j; e < j + PERMUTE_LINE; e++) o[e] = MOVE_ONE(s[J->perm[e]]);
    }
    for (; j < m; j++) o[j] = MOVE_ONE(s[J->perm[j]]);
    if (J->stream) stream_copy(d, buf, (size_t)m * DST_BYTES);
}
#undef PERMUTE_LINE

/* work() of the permute kernel: each block one matrix, moved before the odometer moves
   on; the matrices along the innermost loop of several walked by additions, a matrix
   stored whole (64 bytes) where the ones after it in that walk overwrite the rest. */
static void work_permute(const job_t* J, i64 u0, i64 u1) {
    const i64 q = J->nact > 0 ? J->act[J->nact - 1] : -1;
    const i64 cover = J->pbytes < 64 ? (64 - J->pbytes + J->pbytes - 1) / J->pbytes : 0;
    const int follow = q >= 0 && J->dstep[q] == J->pm;
    const i64 tl = J->c >= 0 ? J->c : J->a;  /* the matrix's outermost loop */
    i64 idx[MAXL], so, dof, mb[MAXM];
    odometer_seek(J, u0, idx, &so, &dof, mb);
    for (i64 u = u0; u < u1;) {
        i64 k = q >= 0 ? J->cnt[q] - idx[q] : 1;
        if (k > u1 - u) k = u1 - u;
        const i64 sq = q >= 0 ? J->sstep[q] : 0, dq = q >= 0 ? J->dstep[q] : 0;
        const elem_t* s = J->src + so;
        dst_t* d = J->dst + dof;
        if (J->pbytes > STRIDEC_COPY_MAX_PERMUTE || !J->pdense)
            for (i64 r = 0; r < k; r++, s += sq, d += dq) {
                /* the tiled loop's last block: the table's first elements */
                const i64 left = J->n[tl] - (idx[tl] + (q == tl ? r : 0)) * J->t[tl];
                const i64 m = left < J->t[tl] ? left * J->pinner : J->pm;
                permute_table_one(J, s, d, r + 1 < k ? s + sq : 0, m);
            }
        else
            for (i64 r = 0; r < k; r++, s += sq, d += dq)
                permute_one(J, s, d, follow && r + cover < k);
        if (q >= 0) {
            so += (k - 1) * sq;
            dof += (k - 1) * dq;
            idx[q] += k - 1;
        }
        odometer_step(J, idx, &so, &dof, mb);
        u += k;
    }
}

/* Blocks of pixels shorter than this many bytes (K lanes), whose pixels end inside a
   vector, that follow on along the innermost loop on the lanes' side are joined in L1
   (lanes_joined), LANES_JOIN_BYTES at a time: blocks of whole vectors move as fast
   alone (MAE's patchify, 16 float32 pixels a block). */
#define LANES_SHORT_BYTES 256
#define LANES_JOIN_BYTES 4096

/* k blocks of n pixels along a loop q, whose lanes' runs follow on (q moves them n
   elements): a deinterleave's pixels from s (q's source step sq apart) gathered into L1
   and split as one run of k*n pixels into d; an interleave's lanes from s joined as one
   run, its pixel runs then scattered to d (q's destination step dq apart). A block of 3
   pixels split alone costs a vector's tail and its masked stores (26 ns). */
static void lanes_joined(const job_t* J, const elem_t* s, dst_t* d, i64 k, i64 n, i64 sq,
                         i64 dq) {
    const int K = (int)J->K;
    const i64 per = LANES_JOIN_BYTES / (K * n * WIDE_BYTES);
    if (J->kernel == K_interleave) {
        dst_t buf[LANES_JOIN_BYTES / DST_BYTES] __attribute__((aligned(64)));
        for (i64 r = 0; r < k; r += per) {
            const i64 w = k - r < per ? k - r : per;
            join_rows(s + r * n, J->ls, buf, w * n, K);
            for (i64 j = 0; j < w; j++) {
                if (J->stream) stream_copy(d + (r + j) * dq, buf + j * K * n,
                                           (size_t)(K * n) * DST_BYTES);
                else copy_run(d + (r + j) * dq, buf + j * K * n, (size_t)(K * n) * DST_BYTES);
            }
        }
        return;
    }
    elem_t buf[LANES_JOIN_BYTES / ELEM_BYTES] __attribute__((aligned(64)));
    for (i64 r = 0; r < k; r += per) {
        const i64 w = k - r < per ? k - r : per;
        for (i64 j = 0; j < w; j++)
            copy_run(buf + j * K * n, s + (r + j) * sq, (size_t)(K * n) * ELEM_BYTES);
        tile_split(J, buf, d + r * n, w * n, 1);
    }
}

/* work() of a lane kernel's unmasked blocks where its micro-kernel's dim (b: a
   deinterleave's, a compress's; a: an interleave's) is one block: the blocks along the
   innermost loop of several walked by additions, without the general block's dispatch;
   short ones whose lanes' runs follow on along it joined (lanes_joined). */
static void work_lanes(const job_t* J, i64 u0, i64 u1) {
    const i64 q = J->act[J->nact - 1], sq = J->sstep[q], dq = J->dstep[q];
    const int inter = J->kernel == K_interleave;
    const i64 n = J->n[inter ? J->a : J->b];
    const int joined = (J->kernel == K_deinterleave || inter) && (inter ? sq : dq) == n
                       && n % LV && J->K * n * WIDE_BYTES < LANES_SHORT_BYTES;
    i64 idx[MAXL], so, dof, mb[MAXM];
    odometer_seek(J, u0, idx, &so, &dof, mb);
    for (i64 u = u0; u < u1;) {
        i64 k = J->cnt[q] - idx[q];
        if (k > u1 - u) k = u1 - u;
        const elem_t* s = J->src + so;
        dst_t* d = J->dst + dof;
        if (joined && k > 1) {
            lanes_joined(J, s, d, k, n, sq, dq);
        } else if (inter) {
            for (i64 r = 0; r < k; r++, s += sq, d += dq)
                tile_join(J, s, J->ls, d, J->n[J->a], 0, (int)J->K);
        } else {
            const int all = J->kernel == K_deinterleave;
            for (i64 r = 0; r < k; r++, s += sq, d += dq) tile_split(J, s, d, J->n[J->b], all);
        }
        so += (k - 1) * sq;
        dof += (k - 1) * dq;
        idx[q] += k - 1;
        odometer_step(J, idx, &so, &dof, mb);
        u += k;
    }
}

/* The permute kernel's table from the matrix's loops (a_loop on, the a loop's block its
   step, the others whole): 0 where they are not a matrix contiguous on the destination of
   at most STRIDEC_COPY_MAX_PERMUTE_TABLE bytes and STRIDEC_COPY_MAX_PERMUTE_ELEMENTS
   elements, a tiled a loop the matrix's outermost there. pdense: contiguous in the source
   too. */
static int permute_table(job_t* J, const i64* p) {
    const i64* q = p + HEADER_WORDS;
    const i64 tl = J->c >= 0 ? J->c : J->a;  /* the matrix's outermost loop */
    i64 M = 1, n[MAXL], ss[MAXL], ds[MAXL], k = 0;
    for (i64 l = 0; l < J->a; l++)
        if (l != tl && J->t[l] != 1) return 0;  /* a block is one matrix */
    for (i64 l = tl; l < J->L; l = l < J->a ? J->a : l + 1, k++) {
        const i64* r = q + l * LOOP_WORDS;
        if ((l != tl && J->t[l] != J->n[l]) || J->t[l] < 1 || J->t[l] > J->n[l]) return 0;
        n[k] = J->t[l];
        ss[k] = r[L_src_stride];
        ds[k] = r[L_dst_stride];
        if (ss[k] > INT32_MAX / STRIDEC_COPY_MAX_PERMUTE_ELEMENTS
            || ss[k] < -(INT32_MAX / STRIDEC_COPY_MAX_PERMUTE_ELEMENTS)) return 0;
        M *= n[k];
        if (M * ELEM_BYTES > STRIDEC_COPY_MAX_PERMUTE_TABLE
            || M > STRIDEC_COPY_MAX_PERMUTE_ELEMENTS) return 0;
    }
    J->pinner = M / n[0];
    if (J->t[tl] < J->n[tl] && ds[0] != J->pinner) return 0;
    unsigned char seen[STRIDEC_COPY_MAX_PERMUTE_ELEMENTS] = {0};
    unsigned char read[STRIDEC_COPY_MAX_PERMUTE_ELEMENTS] = {0};
    i64 i[MAXL] = {0}, so = 0, dof = 0;
    J->pdense = 1;
    J->pmax = 0;
    for (i64 e = 0; e < M; e++) {
        if (so > J->pmax) J->pmax = so;
        if (dof < 0 || dof >= M || seen[dof]) return 0;
        seen[dof] = 1;
        if (so < 0 || so >= M || read[so]) J->pdense = 0;
        else read[so] = 1;
        J->perm[dof] = (int32_t)so;
        for (i64 j = k - 1; j >= 0; j--) {  /* the next index, the last loop fastest */
            so += ss[j];
            dof += ds[j];
            if (++i[j] < n[j]) break;
            so -= n[j] * ss[j];
            dof -= n[j] * ds[j];
            i[j] = 0;
        }
    }
    J->pm = M;
    J->pbytes = M * ELEM_BYTES;
    for (i64 b = 0; b < 64 && J->pdense; b++)  /* destination byte b from source byte pv[b] */
        J->pv[b] = (unsigned char)(b < J->pbytes ? J->perm[b / ELEM_BYTES] * ELEM_BYTES
                                                       + b % ELEM_BYTES : 0);
    return 1;
}

static void work_task(void* arg, i64 u0, i64 u1) {
    const job_t* J = (const job_t*)arg;
    const i64 lane_dim = J->kernel == K_interleave ? J->a : J->b;
    if (J->kernel == K_permute)
        work_permute(J, u0, u1);
    else if (J->M && J->kernel != K_transpose && J->kernel != K_interleave && J->kernel != K_fill)
        work_masked_rows(J, u0, u1);
    else if (!J->M && J->kernel >= K_deinterleave && J->kernel <= K_compress && J->nact > 0
             && lane_dim >= 0 && J->cnt[lane_dim] == 1)
        work_lanes(J, u0, u1);
    else if (!J->M && (J->kernel == K_gather || (J->kernel == K_reverse
                                                 && J->n[J->b] * ELEM_BYTES < REVERSE_MIN_BYTES)))
        work_elements(J, u0, u1);
    else
        work(J, u0, u1);
    if (J->stream) stream_end();
}

/* A small copy's pages asked for at once, a line of each, before its first block: with
   cold caches and TLB the page walks then run side by side, not one after another as the
   blocks reach each page (docs/cpu.md, "The call path with cold caches"). Only for copies
   moving at most TOUCH_BYTES (`moved`, read and written) whose spans are not much larger
   than that (a step slice's gaps are not asked for). */
#define TOUCH_BYTES ((i64)4 << 20)
static void touch_pages(const job_t* J, const i64* p, double moved) {
    if (moved > TOUCH_BYTES) return;
    i64 slo = J->soff, shi = J->soff, dlo = J->doff, dhi = J->doff;
    const i64* q = p + HEADER_WORDS;
    for (i64 l = 0; l < J->L; l++, q += LOOP_WORDS) {
        const i64 ds = q[L_src_stride] * (J->n[l] - 1), dd = q[L_dst_stride] * (J->n[l] - 1);
        if (ds < 0) slo += ds; else shi += ds;
        if (dd < 0) dlo += dd; else dhi += dd;
    }
    if (J->kernel >= K_deinterleave && J->kernel <= K_compress) {  /* K lanes an element */
        const i64 lanes = (J->K - 1) * (J->ls < 0 ? -J->ls : J->ls);
        shi += lanes;
        dhi += lanes;
    }
    const i64 sb = (shi - slo + 1) * ELEM_BYTES, db = (dhi - dlo + 1) * DST_BYTES;
    if (sb + db > 2 * moved) return;
    const char* s0 = (const char*)(J->src + slo);
    const char* d0 = (const char*)(J->dst + dlo);
    for (i64 k = 0; k < sb; k += 4096) __builtin_prefetch(s0 + k, 0, 3);
    for (i64 k = 0; k < db; k += 4096) __builtin_prefetch(d0 + k, 1, 3);
}

/* Sets up J, the job of the call of argument block p from src into dst: 1, or 0 where
   the block is not one this library reads (its numel in *numel). */
static int setup(const void* src, void* dst, const i64* p, job_t* J, i64* numel_out) {
    memset(J, 0, offsetof(job_t, mlo));
    J->src = (const elem_t*)src;
    J->dst = (dst_t*)dst;
    J->kernel = p[H_kernel];
    J->L = p[H_loops];
    J->soff = p[H_src_offset];
    J->doff = p[H_dst_offset];
    J->a = p[H_a_loop];
    J->b = p[H_b_loop];
    J->K = p[H_lanes];
    J->ls = p[H_lane_stride];
    J->prefetch = p[H_prefetch];
    J->c = p[H_c_loop];
    if (p[H_abi] != STRIDEC_COPY_ABI || J->L < 1 || J->L > MAXL || J->kernel < K_rows
        || J->kernel > K_permute || J->a < -1 || J->a >= J->L || J->b < -1 || J->b >= J->L
        || J->c < -1 || J->c >= J->L)
        return 0;
    /* a second loop of runs: a rows block's, beside its a loop; a permute's: its matrix's
       outermost dim, in blocks, outside the loops of the others */
    if (J->c >= 0 && (J->kernel == K_permute ? J->c >= J->a
                      : J->kernel != K_rows || J->a < 0 || J->c == J->a || J->c == J->b))
        return 0;
    int lanes = J->kernel >= K_deinterleave && J->kernel <= K_compress;
    if ((lanes && (J->K < 2 || J->K > LANES_MAX)) || (J->kernel == K_interleave ? J->a : J->b) < 0
        || (J->kernel == K_transpose && J->a < 0))
        return 0;
    i64 units = 1, numel = 1, send = J->soff + 1;  /* (elements) */
    const i64* q = p + HEADER_WORDS;
    for (i64 l = 0; l < J->L; l++, q += LOOP_WORDS) {
        J->n[l] = q[L_extent];
        J->t[l] = q[L_step];
        if (J->n[l] < 0 || J->t[l] < 1) return 0;
        J->cnt[l] = (J->n[l] + J->t[l] - 1) / J->t[l];
        J->sstep[l] = J->t[l] * q[L_src_stride];
        J->dstep[l] = J->t[l] * q[L_dst_stride];
        if (l == J->b) J->ssb = q[L_src_stride], J->dsb = q[L_dst_stride];
        if (l == J->a) J->ssa = q[L_src_stride], J->dsa = q[L_dst_stride];
        if (l == J->c) J->ssc = q[L_src_stride], J->dsc = q[L_dst_stride];
        units *= J->cnt[l];
        numel *= J->n[l];
        if (q[L_src_stride] > 0 && J->n[l] > 0) send += (J->n[l] - 1) * q[L_src_stride];
        if (J->cnt[l] > 1) J->act[J->nact++] = l;
    }
    J->send = (const char*)(J->src + send);
    J->ga = p[H_a_dims];
    J->gb = p[H_b_dims];
    J->stage = (int)p[H_stage];
    J->M = p[H_masks];
    J->has_fill = p[H_fill];
    if (J->M < 0 || J->M > MAXM || J->has_fill < 0 || J->has_fill > 1
        || (J->kernel == K_fill && (J->b < 0 || !J->has_fill)))
        return 0;
    if (J->kernel == K_permute && (J->M || J->a < 0 || !permute_table(J, p)))
        return 0;
    if (J->M && (J->kernel == K_deinterleave || (J->kernel == K_rows && J->a >= 0)
                 || J->c >= 0
                 || (J->kernel == K_interleave && !J->has_fill)))
        return 0;  /* masks the blocks below do not take (the planner makes none) */
    {
        i64 bits = p[H_fill_bits];
        memcpy(&J->fill, &bits, DST_BYTES);  /* little-endian: the low bytes */
        for (int k = 0; k < 64; k++)  /* byte k of a line: byte (k - dst) % DST_BYTES */
            J->line[k] = ((const unsigned char*)&J->fill)[(k - (uintptr_t)dst) % DST_BYTES];
    }
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
    if (J->ga < 0 || J->gb < 0 || J->ga > STRIDEC_COPY_MAX_GROUP || J->gb > STRIDEC_COPY_MAX_GROUP)
        return 0;
    q = p + HEADER_WORDS + J->L * LOOP_WORDS + (J->ga + J->gb) * GROUP_WORDS;
    /* masks on a transpose's sides of several dims: none of its a side's (each row valid
       or masked whole), and not a cast's (its fill is no source row) */
    const int by_rows = J->kernel == K_transpose && (J->ga > 1 || J->gb > 1);
#ifdef CAST_SRC
    if (J->M && by_rows) return 0;
#endif
    for (i64 m = 0; m < J->M; m++, q += J->L + J->ga + J->gb) {
        J->mlo[m] = q[M_lo];
        J->mhi[m] = q[M_hi];
        J->mlane[m] = q[M_lane];
        q += MASK_WORDS;
        for (i64 l = 0; l < J->L; l++) {
            J->mc[m][l] = q[l];
            J->mstep[m][l] = J->t[l] * q[l];
        }
        for (i64 k = 0; k < J->ga; k++)
            if (by_rows && q[J->L + k]) return 0;
        for (i64 k = 0; k < J->gb; k++) J->mgb[m][k] = q[J->L + J->ga + k];
        if (by_rows && J->mc[m][J->a]) return 0;
    }
    if (J->M && !by_rows) J->prefetch = 0;
    if (J->prefetch && (J->a < 0 || J->b < 0)) J->prefetch = 0;
    J->units = units;
    J->stream = stream_wanted(p[H_stream_bytes]);
    *numel_out = numel * (lanes ? J->K : 1);
    return 1;
}

/* The job of one call, set up in `job` (CAT(STRIDEC_SYMBOL, _job_bytes)() bytes): its
   blocks, negated when they run on the calling thread alone, 0 if none (or the block is
   not one this library reads: CAT(STRIDEC_SYMBOL, _check) tells which).
   CAT(STRIDEC_SYMBOL, _work)(job, u0, u1) runs blocks [u0, u1) (a batch's one parallel
   region, stridec_pool_run_many_v1). */
i64 CAT(STRIDEC_SYMBOL, _prepare)(const void* src, void* dst, const i64* p, i64 nthreads,
                                  void* job) {
    job_t* J = (job_t*)job;
    i64 numel = 0;
    if (!setup(src, dst, p, J, &numel) || J->units == 0) return 0;
    const i64 units = J->units;
    if (nthreads > p[H_parallel]) nthreads = p[H_parallel];
    if (nthreads > MAXT) nthreads = MAXT;
    const double moved = (double)numel * (ELEM_BYTES + DST_BYTES);
    if (moved < PARALLEL_BYTES) nthreads = 1;
    if (nthreads <= 1 || units < 2) {  /* on the calling thread: its pages asked for first */
        if (numel > 0) touch_pages(J, p, moved);
        return -units;
    }
    return units;
}

/* 1 where this library reads argument block p (every plan the planner makes), 0 where it
   would refuse it and move nothing: the runtime asks once, as it loads a kernel. */
i64 CAT(STRIDEC_SYMBOL, _check)(const i64* p) {
    static char none[64] __attribute__((aligned(64)));  /* addresses nothing reads */
    job_t J;
    i64 numel = 0;
    return setup(none, none, p, &J, &numel);
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
