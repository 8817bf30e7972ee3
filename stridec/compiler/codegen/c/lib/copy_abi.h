/* The argument block of a planned copy (stridec/compiler/copy_plan.py decides it,
   stridec/compiler/codegen/c/plan.py fills it, copy_plan.c reads it): one int64 array,
   the header fields in the order of STRIDEC_COPY_HEADER, then one record of
   STRIDEC_COPY_LOOP fields per loop of the nest, outermost first, then one record of
   STRIDEC_COPY_GROUP fields per dim of the transpose's a side (a_dims of them, innermost
   first) and of its b side (b_dims). Python reads the field names from this file, so the
   two sides cannot disagree on the order.

   The copy runs the loop nest: loop l visits i = 0, step, 2*step, ... < extent, adding
   i * src_stride and i * dst_stride (elements) to the offsets, and at every point of the
   nest the micro-kernel `kernel` moves one block (its extents along the loops a_loop and
   b_loop: min(step, extent - i)). Word 6 is the stream bytes in every copy call (a batch
   sets its members' to its total).

   A transpose's a side is one or more dims that the source holds contiguous together
   (the a loop walks their flattened index x: source offset x, destination offset the sum
   of x's digits times each dim's destination stride), its b side dims that the
   destination holds contiguous together (destination offset y, source offset by y's
   digits): a dim of 4 beside one of 15 makes one side of 60, so the blocks stay whole.

   A masked copy (`masks` > 0) ends with one record of STRIDEC_COPY_MASK fields per mask,
   each followed by one coefficient per loop of the nest (outermost first), then one per
   dim of a transpose's a side and of its b side (a_dims + b_dims, as the side records):
   the element at loop indices i (and lane k of a lane kernel) is copied where every mask
   holds, lo <= lane * k + sum(coefficient_l * i_l) < hi, and elsewhere gets the fill's
   bits (`fill` 1) or is left as it is (`fill` 0). A side loop's coefficient is that of
   its side's first dim; where a side has several dims, the value at its index is the sum
   of its digits times their coefficients, and the a side's must be 0 (a copy, not a
   cast: each source row valid or masked whole). Along a row the masks hold on one
   interval, so a row is fill, a copy, fill; a transpose or interleave block is wholly
   valid (the kernel), wholly masked (fill) or mixed (its source staged with the fill
   around each row's interval, or masked rows read from a row of the fill, then the
   kernel). */
#ifndef STRIDEC_COPY_ABI_H
#define STRIDEC_COPY_ABI_H

#define STRIDEC_COPY_ABI 4
/* Loops of a nest and dims of a transpose's side: the rank limit (stridec.ir.affine.MAX_RANK,
   checked by codegen/c/plan.py); a nest has no more loops than its copy has dims. */
#define STRIDEC_COPY_MAX_LOOPS 25
#define STRIDEC_COPY_MAX_GROUP 25
/* The largest block of a transpose along b (its source rows). */
#define STRIDEC_COPY_MAX_ROWS 1024

#define STRIDEC_COPY_HEADER(X)                                                           \
    X(abi)             /* STRIDEC_COPY_ABI */                                            \
    X(kernel)          /* STRIDEC_COPY_KERNELS */                                        \
    X(loops)           /* loops in the nest (1 .. STRIDEC_COPY_MAX_LOOPS) */             \
    X(src_offset)      /* elements */                                                    \
    X(dst_offset)                                                                        \
    X(parallel)        /* threads it may run on at most (1: the calling thread) */       \
    X(stream_bytes)    /* streams when above the process's threshold; -1: never */       \
    X(a_loop)          /* the source's unit-stride dim's loop (rows: a block's runs'), or -1 */ \
    X(b_loop)          /* the loop of the destination's unit-stride dim, or -1 */        \
    X(lanes)           /* K of an interleave, deinterleave or compress (2 .. 4) */       \
    X(lane_stride)     /* the lanes' stride on their other side */                      \
    X(chunk)           /* blocks a thread claims at a time; 0: eight parts a thread */  \
    X(prefetch)        /* 1: a transpose block prefetches the next block's source */   \
    X(stage)           /* 1: a transpose block's source rows are copied to L2 first */ \
    X(a_dims)          /* dims of a transpose's a side (records after the loops) */    \
    X(b_dims)          /* and of its b side */                                         \
    X(masks)           /* mask records after the sides (0 .. STRIDEC_COPY_MAX_MASKS) */   \
    X(fill)            /* 1: masked elements get fill_bits; 0: they are not written */   \
    X(fill_bits)       /* the fill's bits, in the low ELEM_BYTES bytes */                \
    X(c_loop)          /* rows: a second loop a block holds several runs along; permute:
                          the matrix's outermost dim in blocks, outside the others; or -1 */

/* Masks of a copy at most: a bound on each side of every dim, and a few more. */
#define STRIDEC_COPY_MAX_MASKS 64

#define STRIDEC_COPY_LOOP(X) X(extent) X(step) X(src_stride) X(dst_stride)

/* A dim of a transpose's side: its extent and its stride on the other side (the
   destination's for the a side, the source's for the b side). */
#define STRIDEC_COPY_GROUP(X) X(extent) X(stride)

/* A mask: its bounds and its coefficient of the lanes of a lane kernel (0 for the
   others); the loops' coefficients follow it, then the sides' dims'. */
#define STRIDEC_COPY_MASK(X) X(lo) X(hi) X(lane)

/* The micro-kernels, with what they move for a block of extents ea (along a_loop) and eb
   (along b_loop) at offsets so, do:
   rows          dst[do + y] = src[so + y]                        y < eb (b: stride 1 both)
                 (with an a loop: dst[do + x*da + y] = src[so + x*sa + y], x < ea, its
                 strides sa and da; with a c loop too, also over z < ec at z*sc and z*dc)
   transpose     dst[do + A(x0 + x) + y] = src[so + x + B(y0 + y)]  x < ea, y < eb
                 (x0, y0: the block's first index along the a and b loops, whose strides
                 are 1 and 0, 0 and 1; A, B: the sides' offsets on the other side)
   deinterleave  dst[do + k*lane_stride + y] = src[so + y*K + k]   k < K, y < eb
   interleave    dst[do + x*K + k] = src[so + x + k*lane_stride]   k < K, x < ea
   compress      dst[do + y] = src[so + y*K]                       y < eb
   gather        dst[do + y*ddb] = src[so + y*ssb]                 y < eb
   reverse       dst[do + y] = src[so - y]                         y < eb (a flip)
   fill          dst[do + y*ddb] = fill_bits                       y < eb (src unread)
   permute       dst[do + j] = src[so + T(j)]                      j < M
                 (a small matrix contiguous on the destination: the loops from a_loop
                 on, each one block, and c_loop's block (its step) where c_loop >= 0, else
                 a_loop's, whose indices' destination offsets make 0 .. M - 1, the blocked
                 loop's the largest (its last block the first elements); T their source
                 offsets: where they make 0 .. M - 1 too and M * ELEM_BYTES is at most
                 STRIDEC_COPY_MAX_PERMUTE bytes, moved as one vector, else at most
                 STRIDEC_COPY_MAX_PERMUTE_TABLE bytes and STRIDEC_COPY_MAX_PERMUTE_ELEMENTS
                 elements moved an element at a time in L1; b_loop is the last loop)
   (ssb, ddb: the b loop's strides.) */
#define STRIDEC_COPY_KERNELS(X) \
    X(rows, 0) X(transpose, 1) X(deinterleave, 2) X(interleave, 3) X(compress, 4) X(gather, 5) \
    X(reverse, 6) X(fill, 7) X(permute, 8)

/* The largest matrix of the permute kernel, in bytes: a vector's. */
#define STRIDEC_COPY_MAX_PERMUTE 64
/* The largest matrix it moves through its table of T, in bytes (a block in L1 beside its
   destination) and in elements (the table's). */
#define STRIDEC_COPY_MAX_PERMUTE_TABLE 16384
#define STRIDEC_COPY_MAX_PERMUTE_ELEMENTS 2048

#endif
