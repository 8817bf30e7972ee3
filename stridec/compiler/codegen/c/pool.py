"""The C kernels' thread pool: one per process, shared by every compile unit.

A kernel unit (a copy class, the Philox unit) does not start threads: it hands its work to
`stridec_pool_run_v1(fn, arg, units, chunk, nthreads)`, which runs `fn(arg, u0, u1)` over
`[0, units)` in chunks of `chunk` units on the calling thread and up to `nthreads - 1`
pool workers. The pool is its own library (`lib/pool.c`, `POOL_C_SOURCE`), loaded before
any kernel unit with `RTLD_GLOBAL` so that the kernels' undefined reference to the symbol
resolves to the one pool of the process (`stridec/runtime/backends/cpu.py`).

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

A unit sees the pool through `lib/pool.h` (`POOL_DECLARATION`) and the streaming stores
through `lib/stream.h` (`STREAM_DECLARATION`). A symbol carries a version: a change of its
contract renames it, and so changes the source (and the cache digest) of every kernel
unit that calls it. The names are stated in the C alone; this module reads them there.
"""

from __future__ import annotations

import re

from stridec.compiler.codegen.c.library import library_text, unit_text

__all__ = ["POOL_BATCH_SYMBOL", "POOL_C_SOURCE", "POOL_DECLARATION", "POOL_OPENMP_SYMBOL",
           "POOL_SYMBOL", "STREAM_DECLARATION", "STREAM_SYMBOL"]

# Pasted into every kernel unit that hands work to the pool.
POOL_DECLARATION = library_text("pool.h")
# Pasted into the copy units: the streaming threshold and the non-temporal stores.
STREAM_DECLARATION = library_text("stream.h")
# The pool's library: lib/pool.c with the two headers above pasted in.
POOL_C_SOURCE = unit_text("pool.c")


def _versioned(text: str, stem: str) -> str:
    """The one name `<stem>_v<N>` in `text`: an entry point's name, version included."""
    names = set(re.findall(rf"\b{stem}_v[0-9]+\b", text))
    if len(names) != 1:
        raise ValueError(f"C library: expected one {stem}_v<N>; found {sorted(names)}")
    return names.pop()


# fn(arg, u0, u1) over [0, units) on the pool (a kernel unit calls it).
POOL_SYMBOL = _versioned(POOL_DECLARATION, "stridec_pool_run")
# The process's streaming threshold (bytes), a global of the pool's library: a kernel call
# whose destination is larger writes it with non-temporal stores.
STREAM_SYMBOL = _versioned(STREAM_DECLARATION, "stridec_stream_bytes")
# The entry point of a batch's one parallel region.
POOL_BATCH_SYMBOL = _versioned(POOL_C_SOURCE, "stridec_pool_run_batch")
# Sets the pool onto torch's OpenMP team (the runtime hands it `GOMP_parallel`).
POOL_OPENMP_SYMBOL = _versioned(POOL_C_SOURCE, "stridec_pool_use_openmp")
