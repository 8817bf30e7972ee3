/* The records of the C kernels' calls, stated once: lib/pool.c reads a batch's calls
   (stridec_pool_run_batch_v1), stridec/runtime/backends/calls.c reads the packed calls
   its builtins take and writes a batch's, stridec/runtime/backends/cpu.py writes both
   (it reads the field names from this file, so the sides cannot disagree on the order).
   Every field is one int64 word; a record is its list's fields in order.

   STRIDEC_BATCH_CALL: one call of a batch, its job set up by its class's
   <symbol>_prepare(src, dst, params, nthreads, job): the source's and destination's
   addresses and that of its argument block.

   STRIDEC_RUN_CALL: one call of calls.c's run(): the class's entry point, the slots of
   its source and destination in the list of pointers, its argument block's address.

   STRIDEC_BATCH_SPEC_HEAD, then one STRIDEC_BATCH_SPEC_CALL per call: calls.c's batch():
   stridec_pool_run_batch_v1's address, the calls, the addresses of the prepares' and the
   works' arrays, the bytes of every job together; per call its source and destination
   slots, its argument block's address and its job's offset (a multiple of 64 below the
   jobs' bytes). */
#ifndef STRIDEC_CALLS_ABI_H
#define STRIDEC_CALLS_ABI_H

#define STRIDEC_BATCH_CALL(X) X(src) X(dst) X(params)
#define STRIDEC_RUN_CALL(X) X(entry) X(src_slot) X(dst_slot) X(params)
#define STRIDEC_BATCH_SPEC_HEAD(X) X(entry) X(calls) X(prepares) X(works) X(job_bytes)
#define STRIDEC_BATCH_SPEC_CALL(X) X(src_slot) X(dst_slot) X(params) X(job_offset)

#define STRIDEC_CALLS_ENUM_(list, prefix) \
    enum { list(STRIDEC_CALLS_FIELD_##prefix) prefix##_WORDS };
#define STRIDEC_CALLS_FIELD_BC(name) BC_##name,
#define STRIDEC_CALLS_FIELD_RC(name) RC_##name,
#define STRIDEC_CALLS_FIELD_BH(name) BH_##name,
#define STRIDEC_CALLS_FIELD_BS(name) BS_##name,
/* BC_src ... BC_WORDS, RC_entry ... RC_WORDS, BH_entry ... BH_WORDS, BS_src_slot ... */
STRIDEC_CALLS_ENUM_(STRIDEC_BATCH_CALL, BC)
STRIDEC_CALLS_ENUM_(STRIDEC_RUN_CALL, RC)
STRIDEC_CALLS_ENUM_(STRIDEC_BATCH_SPEC_HEAD, BH)
STRIDEC_CALLS_ENUM_(STRIDEC_BATCH_SPEC_CALL, BS)

#endif
