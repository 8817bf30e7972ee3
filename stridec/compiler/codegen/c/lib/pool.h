/* The process's thread pool as a kernel unit sees it (lib/pool.c defines it;
   stridec/compiler/codegen/c/pool.py). The runtime loads the pool's library before any
   unit, with its symbols global, so these resolve to the one pool of the process. A name
   carries a version: a change of its contract renames it, and so changes the text (and
   the cache key) of every unit that calls it; Python reads the names here. */
#ifndef STRIDEC_POOL_H
#define STRIDEC_POOL_H
typedef void (*stridec_task_fn)(void *arg, int64_t u0, int64_t u1);
/* fn(arg, u0, u1) over [0, units) in chunks of `chunk`, on this thread and up to
   nthreads - 1 workers. */
extern void stridec_pool_run_v1(stridec_task_fn fn, void *arg, int64_t units, int64_t chunk,
                                int64_t nthreads);
/* The calling thread's scratch buffer of STRIDEC_SCRATCH_BYTES (4 KiB aligned), allocated
   on its first request and kept for the thread's life; 0 if it cannot be allocated. */
#define STRIDEC_SCRATCH_BYTES (1 << 19)
extern void *stridec_pool_scratch_v1(void);
#endif
