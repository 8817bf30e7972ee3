/* The C kernels' thread pool, one per process: a library of its own, loaded before any
   kernel unit (how it works: stridec/compiler/codegen/c/pool.py). */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "calls_abi.h"
#include "pool.h"
#include "stream.h"

typedef int64_t i64;

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

/* The kernels' streaming threshold (lib/stream.h): never, until the runtime sets it from
   the last-level cache's size. */
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
   exits (the key's destructor); STRIDEC_SCRATCH_BYTES in lib/pool.h. */
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
   prepares[k](src, dst, params, nthreads, jobs[k]) (its record of STRIDEC_BATCH_CALL at
   calls[k * BC_WORDS], calls_abi.h), then all run in one parallel region of works[k]
   (stridec_pool_run_many_v1). One entry from Python for the whole batch. */
typedef i64 (*stridec_prepare_fn)(const void *, void *, const i64 *, i64, void *);

void stridec_pool_run_batch_v1(i64 n, stridec_prepare_fn const *prepares,
                               stridec_task_fn const *works, const i64 *calls,
                               void *const *jobs, i64 nthreads) {
    if (n <= 0) return;
    i64 units[n];
    for (i64 k = 0; k < n; k++) {
        const i64 *call = calls + k * BC_WORDS;
        units[k] = prepares[k]((const void *)call[BC_src], (void *)call[BC_dst],
                               (const i64 *)call[BC_params], nthreads, jobs[k]);
    }
    stridec_pool_run_many_v1(n, works, jobs, units, nthreads);
}
