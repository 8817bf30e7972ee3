"""The C kernels' thread pool: one per process, shared by every compile unit.

A kernel unit (a copy class, the Philox unit) does not start threads: it hands its work to
`stridec_pool_run_v1(fn, arg, units, chunk, nthreads)`, which runs `fn(arg, u0, u1)` over
`[0, units)` in chunks of `chunk` units on the calling thread and up to `nthreads - 1`
pool workers. The pool is its own library (`POOL_C_SOURCE`), loaded before any kernel
unit with `RTLD_GLOBAL` so that the kernels' undefined reference to the symbol resolves to
the one pool of the process (`stridec/runtime/backends/cpu.py`).

- Where torch runs its parallel loops on OpenMP, the runtime sets the library onto
  torch's own OpenMP team (`stridec_pool_use_openmp_v1(GOMP_parallel)`, from
  `runtime/backends/cpu.py`): a call is one parallel region of that team, its chunks
  cut into one contiguous part per thread, each claimed from its own atomic counter: a
  thread takes its own part first (the same part at every call, so data a copy touched
  before is in that core's caches), then helps with the others'. A second pool beside
  torch's would fight it for the cores, since torch's threads spin for a while after
  each of its loops. Otherwise (no OpenMP in torch, a forked child) the library's own
  workers run the calls:
- Workers are started once, when a call first wants them, and then parked: after a
  short spin they sleep on a condition variable, so an idle pool costs nothing. A call
  publishes its task by bumping a generation counter and wakes sleepers only if there are
  any; a call costs a few µs, not a `pthread_create` per thread.
- Chunks are claimed from one atomic word holding the generation (high 32 bits) and the
  next chunk (low 32 bits): a worker that wakes after its task is over finds a newer
  generation, or none left, and claims nothing; the caller waits only for chunks that
  were claimed. On a busy machine a worker that the scheduler starts late costs nothing.
- One task at a time: a call made while another thread's task runs (two Python threads)
  runs its work on its own thread. A forked child starts with no workers.
- A batch (the member copies of a `cat`) is one task: `stridec_pool_run_batch_v1` sets
  up every member's job (its class's `<symbol>_prepare`) and runs all their chunks in
  one parallel region (`stridec_pool_run_many_v1`), so the team starts and meets at its closing
  barrier once per batch, not once per member.

The symbol carries a version: a change of its contract renames it, and so changes the
source (and the cache digest) of every kernel unit that calls it.
"""

from __future__ import annotations

__all__ = ["POOL_C_SOURCE", "POOL_BATCH_SYMBOL", "POOL_DECLARATION", "POOL_SYMBOL",
           "STREAM_DECLARATION",
           "STREAM_SYMBOL"]

POOL_SYMBOL = "stridec_pool_run_v1"
# The process's streaming threshold (bytes), a global of the pool's library: a kernel call
# whose destination is larger writes it with non-temporal stores (STREAM_DECLARATION).
STREAM_SYMBOL = "stridec_stream_bytes_v1"

# Pasted into the copy units: non-temporal ("streaming") stores. An ordinary store to a
# line that is not in the cache first reads the line from memory (read for ownership),
# so a copy moves three lines per line written: the source, the destination read and the
# destination written back. A streaming store writes a whole 64-byte line without
# reading it (two transfers) and leaves it out of the cache: worth it only for a
# destination too large to stay there for its consumer anyway, which is what the
# threshold decides per call (`stream_wanted`; `runtime/backends/cpu.py` sets it from
# the last-level cache's size). The intrinsics' builtins are used directly: the
# intrinsics header costs more to parse than a unit does to compile.
STREAM_DECLARATION = r"""
/* Destination bytes above which a call streams (-1: never); set by the runtime. */
extern int64_t stridec_stream_bytes_v1;
static inline int stream_wanted(int64_t dst_bytes) {
    int64_t t = __atomic_load_n(&stridec_stream_bytes_v1, __ATOMIC_RELAXED);
    return t >= 0 && dst_bytes > t;
}
/* One 64-byte line from s (any alignment) to d (64-byte aligned), not through the cache. */
#if defined(__AVX512F__)
typedef long long stream_v __attribute__((vector_size(64)));
static inline void stream_line(void* d, const void* s) {
    stream_v x;
    memcpy(&x, s, 64);
    __builtin_ia32_movntdq512((stream_v*)d, x);
}
#elif defined(__AVX__)
typedef long long stream_v __attribute__((vector_size(32)));
static inline void stream_line(void* d, const void* s) {
    stream_v x, y;
    memcpy(&x, s, 32);
    memcpy(&y, (const char*)s + 32, 32);
    __builtin_ia32_movntdq256((stream_v*)d, x);
    __builtin_ia32_movntdq256((stream_v*)d + 1, y);
}
#elif defined(__SSE2__)
typedef long long stream_v __attribute__((vector_size(16)));
static inline void stream_line(void* d, const void* s) {
    for (int k = 0; k < 4; k++) {
        stream_v x;
        memcpy(&x, (const char*)s + 16 * k, 16);
        __builtin_ia32_movntdq((stream_v*)d + k, x);
    }
}
#else
static inline void stream_line(void* d, const void* s) { memcpy(d, s, 64); }
#endif
/* Orders this thread's streaming stores before what follows (the end of its work). */
static inline void stream_end(void) {
#if defined(__SSE__)
    __builtin_ia32_sfence();
#endif
}
/* n bytes from s to d: ordinary stores up to d's next 64-byte boundary, whole lines
   streamed, the tail ordinary again. Runs shorter than a line past the head: memcpy. */
static inline __attribute__((always_inline)) void stream_copy(void* d, const void* s,
                                                            size_t n) {
    char* dp = (char*)d;
    const char* sp = (const char*)s;
    size_t head = (size_t)(-(uintptr_t)dp) & 63;
    if (n < head + 64) { memcpy(dp, sp, n); return; }
    if (head) { memcpy(dp, sp, head); dp += head; sp += head; n -= head; }
    for (; n >= 64; n -= 64, dp += 64, sp += 64) stream_line(dp, sp);
    if (n) memcpy(dp, sp, n);
}
/* n bytes of a repeated pattern at d: `line` holds it from its first byte, 64 bytes, and
   d is aligned to the pattern's period (an element of the fill), as stream_copy. */
static inline void stream_fill(void* d, const void* line, size_t n) {
    char* dp = (char*)d;
    size_t head = (size_t)(-(uintptr_t)dp) & 63;
    if (n < head + 64) {
        for (size_t k = 0; k < n; k += 64) memcpy(dp + k, line, n - k < 64 ? n - k : 64);
        return;
    }
    if (head) { memcpy(dp, line, head); dp += head; n -= head; }
    for (; n >= 64; n -= 64, dp += 64) stream_line(dp, line);
    if (n) memcpy(dp, line, n);
}
"""

# The size of each thread's scratch buffer (`stridec_pool_scratch_v1`): one definition for
# the pool's library, which allocates it, and the kernel units, which check that what they
# stage there fits.
_SCRATCH_BYTES = "#define STRIDEC_SCRATCH_BYTES (1 << 19)"

# Pasted into every kernel unit that hands work to the pool.
POOL_DECLARATION = r"""
typedef void (*stridec_task_fn)(void *arg, int64_t u0, int64_t u1);
/* The process's thread pool (codegen/c/pool.py): fn(arg, u0, u1) over [0, units) in
   chunks of `chunk`, on this thread and up to nthreads - 1 workers. */
extern void stridec_pool_run_v1(stridec_task_fn fn, void *arg, int64_t units, int64_t chunk,
                                int64_t nthreads);
/* The calling thread's scratch buffer of STRIDEC_SCRATCH_BYTES (4 KiB aligned), allocated
   on its first request and kept for the thread's life; 0 if it cannot be allocated. */
@SCRATCH_BYTES@
extern void *stridec_pool_scratch_v1(void);
""".replace("@SCRATCH_BYTES@", _SCRATCH_BYTES)

# The entry point of a batch's one parallel region (`stridec_pool_run_batch_v1`).
POOL_BATCH_SYMBOL = "stridec_pool_run_batch_v1"

POOL_C_SOURCE = r"""/* stridec C kernels' thread pool (one per process) */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

typedef int64_t i64;
typedef void (*stridec_task_fn)(void *arg, int64_t u0, int64_t u1);

#define MAXW 255
/* Polls of the generation before a worker sleeps: tens of µs, so calls made back to
   back find it awake, while an idle process does not keep a core busy. */
#define SPIN 4096

#if defined(__x86_64__) || defined(__i386__)
#define PAUSE() __builtin_ia32_pause()
#else
#define PAUSE() ((void)0)
#endif

/* The OpenMP runtime torch runs its own parallel loops on (libgomp's entry point for a
   `#pragma omp parallel`), when the process has one: a call then runs on torch's own team
   of threads instead of this pool's workers. Two pools side by side fight for the cores:
   after each of its loops torch's team spins for a while, and a pool worker that wants a
   core meanwhile gets a share of one (or is preempted holding a chunk). */
typedef void (*gomp_parallel_fn)(void (*)(void *), void *, unsigned, unsigned);
static gomp_parallel_fn gomp_parallel;

/* The kernels' streaming threshold (codegen/c/pool.py STREAM_DECLARATION): never, until
   the runtime sets it from the last-level cache's size. */
int64_t stridec_stream_bytes_v1 = -1;

static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sleep_cond = PTHREAD_COND_INITIALIZER;

/* The task of generation `gen`. Its fields are written by the caller before it publishes
   `next` and `gen`, and read by a worker between loading `next` and claiming a chunk of it
   with a compare-and-swap: if the caller moved on meanwhile, `next` changed and the
   claim fails, so a chunk only runs with the fields of its own generation. */
static struct {
    stridec_task_fn fn;
    void *arg;
    i64 units, chunk, chunks;
    uint64_t next; /* gen << 32 | the next chunk */
    i64 done;      /* chunks finished */
    uint32_t gen;
    int wanted;    /* threads of the task, the caller included */
    int workers;   /* started (ids 1 .. workers) */
    int sleepers;
} P;

static void claim(uint32_t g) {
    for (;;) {
        uint64_t v = __atomic_load_n(&P.next, __ATOMIC_ACQUIRE);
        if ((uint32_t)(v >> 32) != g) return;
        i64 c = (i64)(uint32_t)v;
        stridec_task_fn fn = __atomic_load_n(&P.fn, __ATOMIC_RELAXED);
        void *arg = __atomic_load_n(&P.arg, __ATOMIC_RELAXED);
        i64 units = __atomic_load_n(&P.units, __ATOMIC_RELAXED);
        i64 chunk = __atomic_load_n(&P.chunk, __ATOMIC_RELAXED);
        i64 chunks = __atomic_load_n(&P.chunks, __ATOMIC_RELAXED);
        if (c >= chunks) return;
        if (!__atomic_compare_exchange_n(&P.next, &v, v + 1, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        i64 u0 = c * chunk, u1 = u0 + chunk < units ? u0 + chunk : units;
        fn(arg, u0, u1);
        __atomic_fetch_add(&P.done, 1, __ATOMIC_RELEASE);
    }
}

static void *worker(void *p) {
    int id = (int)(intptr_t)p;
    uint32_t seen = __atomic_load_n(&P.gen, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = __atomic_load_n(&P.gen, __ATOMIC_ACQUIRE)) == seen) {
            if (++spins < SPIN) {
                PAUSE();
                continue;
            }
            pthread_mutex_lock(&sleep_lock);
            __atomic_add_fetch(&P.sleepers, 1, __ATOMIC_SEQ_CST);
            while (__atomic_load_n(&P.gen, __ATOMIC_SEQ_CST) == seen)
                pthread_cond_wait(&sleep_cond, &sleep_lock);
            __atomic_sub_fetch(&P.sleepers, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&sleep_lock);
            spins = 0;
        }
        seen = g;
        if (id < __atomic_load_n(&P.wanted, __ATOMIC_RELAXED)) claim(g);
    }
    return 0;
}

/* A forked child has none of the parent's threads. */
static void after_fork_child(void) {
    gomp_parallel = 0; /* an OpenMP team does not survive a fork either */
    pthread_mutex_init(&submit_lock, 0);
    pthread_mutex_init(&sleep_lock, 0);
    pthread_cond_init(&sleep_cond, 0);
    P.workers = 0;
    P.sleepers = 0;
}

__attribute__((constructor)) static void pool_init(void) {
    pthread_atfork(0, 0, after_fork_child);
}

/* Whether this library loads and runs: the backend's availability probe. */
int64_t stridec_probe(int64_t x) { return x + 1; }

void stridec_pool_use_openmp_v1(void *entry) { gomp_parallel = (gomp_parallel_fn)entry; }

typedef struct {
    stridec_task_fn fn;
    void *arg;
    i64 units, chunk, chunks, parts;
    i64 next[MAXW + 1]; /* the next chunk of each part */
} team_task;

/* A thread's number, fixed for the thread's life: the same thread starts on the same part
   of every call, so a copy run again finds its share of the data in its core's caches. */
static __thread int team_id = -1;
static int team_ids;

static void team_body(void *p) {
    team_task *t = (team_task *)p;
    if (team_id < 0) team_id = __atomic_fetch_add(&team_ids, 1, __ATOMIC_RELAXED);
    i64 parts = t->parts, first = team_id % parts;
    /* its own part first, then what is left of the others' */
    for (i64 k = 0; k < parts; k++) {
        i64 q = (first + k) % parts, lo = q * t->chunks / parts, hi = (q + 1) * t->chunks / parts;
        for (;;) {
            i64 c = lo + __atomic_fetch_add(&t->next[q], 1, __ATOMIC_RELAXED);
            if (c >= hi) break;
            i64 u0 = c * t->chunk, u1 = u0 + t->chunk < t->units ? u0 + t->chunk : t->units;
            t->fn(t->arg, u0, u1);
        }
    }
}

void stridec_pool_run_v1(stridec_task_fn fn, void *arg, i64 units, i64 chunk, i64 nthreads) {
    if (units <= 0) return;
    if (chunk < 1) chunk = 1;
    if (nthreads > MAXW + 1) nthreads = MAXW + 1;
    if (nthreads <= 1 || units <= chunk) {
        fn(arg, 0, units);
        return;
    }
    gomp_parallel_fn team = __atomic_load_n(&gomp_parallel, __ATOMIC_ACQUIRE);
    if (team) {  /* the implicit barrier at its end: every chunk is done on return */
        team_task t;
        t.fn = fn;
        t.arg = arg;
        t.units = units;
        t.chunk = chunk;
        t.chunks = (units + chunk - 1) / chunk;
        i64 wanted = t.chunks < nthreads ? t.chunks : nthreads;
        t.parts = wanted;
        for (i64 q = 0; q < wanted; q++) t.next[q] = 0;
        team(team_body, &t, (unsigned)wanted, 0);
        return;
    }
    if (pthread_mutex_trylock(&submit_lock) != 0) {
        fn(arg, 0, units);
        return;
    }
    if (P.workers < nthreads - 1) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        while (P.workers < nthreads - 1) {
            pthread_t thread;
            if (pthread_create(&thread, &attr, worker, (void *)(intptr_t)(P.workers + 1)))
                break; /* none to be had: fewer workers */
            P.workers++;
        }
        pthread_attr_destroy(&attr);
    }
    i64 chunks = (units + chunk - 1) / chunk;
    if (chunks > ((i64)1 << 30)) {
        chunk = (units + ((i64)1 << 30) - 1) >> 30;
        chunks = (units + chunk - 1) / chunk;
    }
    uint32_t g = P.gen + 1;
    __atomic_store_n(&P.fn, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&P.arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&P.units, units, __ATOMIC_RELAXED);
    __atomic_store_n(&P.chunk, chunk, __ATOMIC_RELAXED);
    __atomic_store_n(&P.chunks, chunks, __ATOMIC_RELAXED);
    __atomic_store_n(&P.done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&P.wanted, (int)nthreads, __ATOMIC_RELAXED);
    __atomic_store_n(&P.next, (uint64_t)g << 32, __ATOMIC_RELEASE);
    __atomic_store_n(&P.gen, g, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&P.sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&sleep_lock);
        pthread_cond_broadcast(&sleep_cond);
        pthread_mutex_unlock(&sleep_lock);
    }
    claim(g);
    /* A claimed chunk is work under way on another core: spin for it, and yield only once
       it takes much longer (its worker was preempted). */
    for (long spins = 0; __atomic_load_n(&P.done, __ATOMIC_ACQUIRE) < chunks; spins++) {
        if (spins < (1L << 20)) PAUSE();
        else sched_yield();
    }
    pthread_mutex_unlock(&submit_lock);
}

/* Several tasks in one parallel region (the member copies of a batch, a `cat`): task k
   runs fns[k](args[k], u0, u1) over [0, |units[k]|), and the chunks of all tasks are
   claimed as one list, so the team starts and meets at its closing barrier once, not
   once per task. The list holds one part per thread: part t is slice t of every task
   (units [u*t/T, u*(t+1)/T) of a task of u units, T threads), each slice cut into
   chunks (8, or one a unit when it has fewer). A task's units follow its destination,
   so part t writes the t-th stretch of every member: the stretch of the batch's buffer
   that torch's own cat gives thread t, one run of memory per thread instead of members
   shared out whole, and every thread the same share of every member's bytes. A thread
   takes its own part's chunks first, then helps with the others' (stridec_pool_run_v1).
   units[k] < 0: a small task that wants no other thread; when every task is small they
   all run on this thread. */
#define SLICE_CHUNKS 8
typedef struct {
    stridec_task_fn const *fns;
    void *const *args;
    const i64 *units, *cstart; /* cstart[k]: task k's first chunk in a part; [n]: a part */
    i64 n, parts;
} many_task;

static void many_body(void *p, i64 c0, i64 c1) {
    const many_task *m = (const many_task *)p;
    i64 per = m->cstart[m->n];
    for (i64 c = c0; c < c1; c++) {
        i64 t = c / per, r = c % per;
        i64 k = 0, hi = m->n - 1; /* the task of chunk r: cstart[k] <= r < cstart[k + 1] */
        while (k < hi) {
            i64 mid = (k + hi + 1) / 2;
            if (m->cstart[mid] <= r) k = mid;
            else hi = mid - 1;
        }
        i64 units = m->units[k] < 0 ? -m->units[k] : m->units[k];
        i64 lo = units * t / m->parts, len = units * (t + 1) / m->parts - lo;
        i64 chunks = m->cstart[k + 1] - m->cstart[k], j = r - m->cstart[k];
        i64 u0 = lo + len * j / chunks, u1 = lo + len * (j + 1) / chunks;
        if (u1 > u0) m->fns[k](m->args[k], u0, u1);
    }
}

void stridec_pool_run_many_v1(i64 n, stridec_task_fn const *fns, void *const *args,
                              const i64 *units, i64 nthreads) {
    if (n <= 0) return;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > MAXW + 1) nthreads = MAXW + 1;
    int parallel = 0;
    for (i64 k = 0; k < n; k++) parallel |= units[k] > 0;
    if (!parallel || nthreads == 1) {
        for (i64 k = 0; k < n; k++)
            if (units[k]) fns[k](args[k], 0, units[k] < 0 ? -units[k] : units[k]);
        return;
    }
    i64 cstart[n + 1];
    cstart[0] = 0;
    for (i64 k = 0; k < n; k++) {
        i64 u = units[k] < 0 ? -units[k] : units[k];
        i64 slice = (u + nthreads - 1) / nthreads; /* the longest slice */
        cstart[k + 1] = cstart[k] + (slice < SLICE_CHUNKS ? (slice > 0 ? slice : 1)
                                                          : SLICE_CHUNKS);
    }
    many_task m = {fns, args, units, cstart, n, nthreads};
    stridec_pool_run_v1(many_body, &m, nthreads * cstart[n], 1, nthreads);
}

/* Each thread's scratch buffer (the staged source rows of the 1-byte transposes, in L2),
   one per thread for the process rather than one per kernel unit; freed when its thread
   exits (the key's destructor). */
@SCRATCH_BYTES@
static __thread void *scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_keyed;

static void scratch_key_init(void) { scratch_keyed = pthread_key_create(&scratch_key, free) == 0; }

void *stridec_pool_scratch_v1(void) {
    if (scratch) return scratch;
    pthread_once(&scratch_once, scratch_key_init);
    void *p;
    if (!scratch_keyed || posix_memalign(&p, 4096, STRIDEC_SCRATCH_BYTES)) return 0;
    if (pthread_setspecific(scratch_key, p)) {
        free(p);
        return 0;
    }
    return scratch = p;
}

/* A batch of n copy calls: call k's job is set up in jobs[k] by
   prepares[k](src, dst, params, nthreads, jobs[k]) (its source, destination and
   parameters' addresses at calls[3k .. 3k+2]), then all run in one parallel region of
   works[k] (stridec_pool_run_many_v1). One entry from Python for the whole batch. */
typedef i64 (*stridec_prepare_fn)(const void *, void *, const i64 *, i64, void *);

void stridec_pool_run_batch_v1(i64 n, stridec_prepare_fn const *prepares,
                               stridec_task_fn const *works, const i64 *calls,
                               void *const *jobs, i64 nthreads) {
    if (n <= 0) return;
    i64 units[n];
    for (i64 k = 0; k < n; k++)
        units[k] = prepares[k]((const void *)calls[3 * k], (void *)calls[3 * k + 1],
                               (const i64 *)calls[3 * k + 2], nthreads, jobs[k]);
    stridec_pool_run_many_v1(n, works, jobs, units, nthreads);
}
""".replace("@SCRATCH_BYTES@", _SCRATCH_BYTES)
