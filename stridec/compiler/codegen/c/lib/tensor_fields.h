/* What runtime/backends/tensor_fields.cpp reads of a tensor for a cached call's key and
   runtime/backends/calls.c turns into the key's Python values (`call_path.plain_call_key`):
   stated once for both sides. */
#ifndef STRIDEC_TENSOR_FIELDS_H
#define STRIDEC_TENSOR_FIELDS_H

#include <stdint.h>

/* Tensors of more dims take the getters' path (above the rank limit, ir/affine.py). */
#define STRIDEC_FIELDS_MAX_DIMS 32

typedef struct {
    int64_t ndim;
    int64_t sizes[STRIDEC_FIELDS_MAX_DIMS];
    int64_t strides[STRIDEC_FIELDS_MAX_DIMS];
    int64_t offset;       /* storage offset, elements */
    int64_t scalar_type;  /* c10::ScalarType */
    int64_t nbytes;       /* the storage's bytes */
    uintptr_t data;       /* the storage's address */
    int is_neg, is_conj, requires_grad;
} stridec_tensor_fields;

/* 1: `f` filled, the tensor a plain strided CPU tensor; 0: read the getters instead. */
typedef int (*stridec_tensor_fields_fn)(const void *impl, stridec_tensor_fields *f);

#endif
