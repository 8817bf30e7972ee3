/* The argument blocks of the Philox library's calls (stridec/compiler/codegen/philox_plan.py
   plans an op, stridec/compiler/codegen/c/philox.py fills the blocks, philox.c reads
   them): one int64 array each, element positions counted in words of the storages.
   Python reads the field names from this file, so the two sides cannot disagree on the
   order.

   An output call (stridec_philox_bits, stridec_philox_uniform_*): the fields of
   STRIDEC_PHILOX_HEADER, then the R sizes of the iteration space, its R index strides
   and its R destination strides (outermost first), then per mask its R coefficients, lo
   and hi. Element c of the space (logical index i = index_offset + sum(c_k * index
   stride_k)) is written at dst_offset + sum(c_k * dst stride_k) where every mask holds,
   lo <= sum(c_k * coefficient_k) < hi, and gets fill_bits elsewhere.

   The state advance (stridec_philox_advance): the fields of STRIDEC_PHILOX_ADVANCE. */
#ifndef STRIDEC_PHILOX_ABI_H
#define STRIDEC_PHILOX_ABI_H

/* Dims of the iteration space at most: the rank limit (stridec.ir.affine.MAX_RANK,
   checked by codegen/c/philox.py). */
#define STRIDEC_PHILOX_MAX_RANK 25
/* Masks of an output at most: the gather's running mask sums. */
#define STRIDEC_PHILOX_MAX_MASKS 16

#define STRIDEC_PHILOX_HEADER(X)                                                          \
    X(rank)            /* R, dims of the iteration space (1 .. STRIDEC_PHILOX_MAX_RANK) */ \
    X(numel)           /* elements of the output */                                      \
    X(index_offset)                                                                      \
    X(dst_offset)                                                                        \
    X(masks)           /* mask records after the strides (0 .. STRIDEC_PHILOX_MAX_MASKS) */ \
    X(fill_bits)       /* the fill's bits, in the low 2 or 4 bytes */                     \
    X(linear)          /* 1: contiguous output, index == position - dst_offset, no mask */ \
    X(low_bits)        /* uniforms: the float32 bits of low32 and scale32; else 0 */      \
    X(scale_bits)                                                                        \
    X(state0) X(state1) X(state2) X(state3) X(state4) X(state5) /* the state's words */  \
    X(reserved)        /* 0 */

#define STRIDEC_PHILOX_ADVANCE(X)                                                         \
    X(state0) X(state1) X(state2) X(state3) X(state4) X(state5)                          \
    X(new_state0) X(new_state1) X(new_state2) X(new_state3) X(new_state4) X(new_state5)  \
    X(blocks)          /* ceil(numel / 4): the blocks the output used (< 2^63) */

/* A uniform of float32 / float16 / bfloat16 takes the top 24 / 11 / 8 bits of its word,
   the type's own significand (stridec.compiler.codegen.philox_plan.UNIFORM_BITS). */
#define STRIDEC_PHILOX_UNIFORM_BITS_FLOAT32 24
#define STRIDEC_PHILOX_UNIFORM_BITS_FLOAT16 11
#define STRIDEC_PHILOX_UNIFORM_BITS_BFLOAT16 8

#endif
