/* stridec cpu backend: a cached call's kernel calls as builtin functions of Python
   (runtime/backends/cpu.py, `calls_module`). A call through ctypes converts each argument
   and goes through libffi; with cold caches that is most of a small copy's time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "calls_abi.h"
#include "tensor_fields.h"

/* A copy class's entry point (lib/copy_plan.c, codegen/c/copy.py). */
typedef void (*stridec_kernel_fn)(const void *src, void *dst, const int64_t *params,
                                  int64_t nthreads);

typedef struct {
    stridec_kernel_fn fn;
    const void *src;
    void *dst;
    const int64_t *params;
} stridec_call;

enum { STACK_CALLS = 8 };

/* The address at `slot` of the list `pointers` (Python ints); -1 with an error set. */
static int pointer_at(PyObject *pointers, int64_t slot, void **out) {
    if (slot < 0 || slot >= (int64_t)PyList_GET_SIZE(pointers)) {
        PyErr_Format(PyExc_IndexError, "stridec calls: pointer slot %lld of a list of %zd",
                     (long long)slot, PyList_GET_SIZE(pointers));
        return -1;
    }
    void *p = PyLong_AsVoidPtr(PyList_GET_ITEM(pointers, slot));
    if (p == NULL && PyErr_Occurred()) return -1;
    *out = p;
    return 0;
}

/* run(calls, pointers, threads): `calls` packed records of STRIDEC_RUN_CALL (calls_abi.h:
   kernel address, source slot, destination slot, parameters address), each run on
   pointers[source slot] and pointers[destination slot] with `threads`, in order, the GIL
   released (as ctypes does). */
static PyObject *run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyBytes_CheckExact(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "stridec calls: run(calls: bytes, pointers: list, threads: int)");
        return NULL;
    }
    Py_ssize_t bytes = PyBytes_GET_SIZE(args[0]);
    if (bytes % (RC_WORDS * (Py_ssize_t)sizeof(int64_t)) != 0) {
        PyErr_SetString(PyExc_ValueError, "stridec calls: calls is not whole records");
        return NULL;
    }
    long long threads = PyLong_AsLongLong(args[2]);
    if (threads == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = bytes / (RC_WORDS * (Py_ssize_t)sizeof(int64_t));
    const char *packed = PyBytes_AS_STRING(args[0]);
    stridec_call stack[STACK_CALLS];
    stridec_call *calls = stack;
    if (n > STACK_CALLS) {
        calls = PyMem_Malloc((size_t)n * sizeof(stridec_call));
        if (calls == NULL) return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t q[RC_WORDS];
        void *src, *dst;
        memcpy(q, packed + i * (Py_ssize_t)sizeof(q), sizeof(q));
        if (pointer_at(args[1], q[RC_src_slot], &src) < 0
            || pointer_at(args[1], q[RC_dst_slot], &dst) < 0) {
            if (calls != stack) PyMem_Free(calls);
            return NULL;
        }
        calls[i].fn = (stridec_kernel_fn)(intptr_t)q[RC_entry];
        calls[i].src = src;
        calls[i].dst = dst;
        calls[i].params = (const int64_t *)(intptr_t)q[RC_params];
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        calls[i].fn(calls[i].src, calls[i].dst, calls[i].params, (int64_t)threads);
    Py_END_ALLOW_THREADS
    if (calls != stack) PyMem_Free(calls);
    Py_RETURN_NONE;
}


/* A batch's entry point (codegen/c/pool.py, stridec_pool_run_batch_v1). */
typedef void (*stridec_batch_fn)(int64_t n, const void *prepares, const void *works,
                                 const int64_t *calls, void *const *jobs, int64_t nthreads);

enum { STACK_JOB_BYTES = 16384 };

/* batch(spec, pointers, threads): a batch's calls in one parallel region. `spec` packed
   int64s: a record of STRIDEC_BATCH_SPEC_HEAD, then one of STRIDEC_BATCH_SPEC_CALL per
   call (calls_abi.h); the calls go to the entry point as STRIDEC_BATCH_CALL records. */
static PyObject *batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyBytes_CheckExact(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "stridec calls: batch(spec: bytes, pointers: list, threads: int)");
        return NULL;
    }
    Py_ssize_t bytes = PyBytes_GET_SIZE(args[0]);
    const char *packed = PyBytes_AS_STRING(args[0]);
    int64_t head[BH_WORDS];
    if (bytes < (Py_ssize_t)sizeof(head)) goto malformed;
    memcpy(head, packed, sizeof(head));
    int64_t n = head[BH_calls], job_bytes = head[BH_job_bytes];
    if (n < 1 || n > (1 << 20) || job_bytes < 0 || job_bytes > (1LL << 30)
        || bytes != (Py_ssize_t)(sizeof(head) + (size_t)n * BS_WORDS * sizeof(int64_t)))
        goto malformed;
    long long threads = PyLong_AsLongLong(args[2]);
    if (threads == -1 && PyErr_Occurred()) return NULL;
    int64_t stack_calls[BC_WORDS * STACK_CALLS];
    void *stack_jobs[STACK_CALLS];
    _Alignas(64) char stack_memory[STACK_JOB_BYTES];
    int64_t *calls = stack_calls;
    void **jobs = stack_jobs;
    char *memory = stack_memory, *held = NULL;
    if (n > STACK_CALLS || job_bytes > STACK_JOB_BYTES) {
        held = PyMem_Malloc((size_t)n * (BC_WORDS * sizeof(int64_t) + sizeof(void *))
                            + (size_t)job_bytes + 64);
        if (held == NULL) return PyErr_NoMemory();
        calls = (int64_t *)held;
        jobs = (void **)(calls + BC_WORDS * n);
        memory = (char *)(((uintptr_t)(jobs + n) + 63) & ~(uintptr_t)63);
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t q[BS_WORDS];
        void *src, *dst;
        memcpy(q, packed + sizeof(head) + (size_t)k * sizeof(q), sizeof(q));
        const int64_t at = q[BS_job_offset];
        if (at < 0 || at > job_bytes || at % 64 != 0) {
            PyMem_Free(held);
            goto malformed;
        }
        if (pointer_at(args[1], q[BS_src_slot], &src) < 0
            || pointer_at(args[1], q[BS_dst_slot], &dst) < 0) {
            PyMem_Free(held);
            return NULL;
        }
        int64_t *call = calls + BC_WORDS * k;
        call[BC_src] = (int64_t)(intptr_t)src;
        call[BC_dst] = (int64_t)(intptr_t)dst;
        call[BC_params] = q[BS_params];
        jobs[k] = memory + at;
    }
    stridec_batch_fn run_batch = (stridec_batch_fn)(intptr_t)head[BH_entry];
    Py_BEGIN_ALLOW_THREADS
    run_batch(n, (const void *)(intptr_t)head[BH_prepares],
              (const void *)(intptr_t)head[BH_works], calls, jobs, (int64_t)threads);
    Py_END_ALLOW_THREADS
    PyMem_Free(held);
    Py_RETURN_NONE;
malformed:
    PyErr_SetString(PyExc_ValueError, "stridec calls: a malformed batch");
    return NULL;
}

/* The attributes a call key reads (`setup`): getset descriptors of torch's tensor type,
   read as attribute access reads them, and method descriptors, called on the tensor. */
enum { A_DTYPE, A_SHAPE, A_STRIDE, A_OFFSET, A_IS_CPU, A_DEVICE, A_IS_NEG, A_STORAGE,
       A_REQUIRES_GRAD, A_IS_CONJ, A_NBYTES, A_STORAGE_PTR, N_ATTRS };
static PyObject *attrs[N_ATTRS];
static PyTypeObject *tensor_type;

/* setup(tensor_type, descriptors): the descriptors in the order of the enum above. */
static PyObject *setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[1])
        || PyTuple_GET_SIZE(args[1]) != N_ATTRS) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: setup(type, descriptors)");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_XSETREF(tensor_type, (PyTypeObject *)args[0]);
    for (int i = 0; i < N_ATTRS; i++) {
        PyObject *d = PyTuple_GET_ITEM(args[1], i);
        Py_INCREF(d);
        Py_XSETREF(attrs[i], d);
    }
    Py_RETURN_NONE;
}

/* Attribute `i` of `t`: a getset read, or a method called without arguments. */
static PyObject *read_attr(int i, PyObject *t) {
    PyObject *d = attrs[i];
    descrgetfunc get = Py_TYPE(d)->tp_descr_get;
    if (Py_TYPE(d) == &PyGetSetDescr_Type) return get(d, t, (PyObject *)Py_TYPE(t));
    return PyObject_Vectorcall(d, &t, 1, NULL);
}

/* The TensorImpl reader of tensor_fields.cpp (`fields`; NULL: the getters), and each
   c10::ScalarType's torch.dtype (None where it has none). */
static stridec_tensor_fields_fn fields_fn;
static PyObject *scalar_dtypes;
/* tensor_fields.cpp's version bump, and torch._C._increment_version for other tensors. */
static void (*bump_fn)(const void *impl);
static PyObject *increment_version;

/* The address of tensor `t`'s TensorImpl: a torch.Tensor object is PyObject_HEAD, then an
   at::Tensor, one pointer to it (`fields` checks that against `Tensor._cdata`). */
static const void *impl_of(PyObject *t) {
    const void *impl;
    memcpy(&impl, (const char *)t + sizeof(PyObject), sizeof(impl));
    return impl;
}

/* A tuple of `n` ints; NULL with an error set. */
static PyObject *int_tuple(const int64_t *v, int64_t n) {
    PyObject *tuple = PyTuple_New((Py_ssize_t)n);
    if (tuple == NULL) return NULL;
    for (int64_t k = 0; k < n; k++) {
        PyObject *x = PyLong_FromLongLong(v[k]);
        if (x == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, (Py_ssize_t)k, x);
    }
    return tuple;
}

/* `key_part` from the tensor's fields (tensor_fields.cpp): the same values the getters
   give, read without a torch call. 1 done, 0 read the getters instead, -1 an error. */
static int key_part_of_fields(PyObject *t, PyObject *key, PyObject *ptrs, int conj,
                              uintptr_t *low) {
    stridec_tensor_fields f;
    if (fields_fn(impl_of(t), &f) != 1 || f.scalar_type < 0
        || f.scalar_type >= PyTuple_GET_SIZE(scalar_dtypes))
        return 0;
    PyObject *dtype = PyTuple_GET_ITEM(scalar_dtypes, f.scalar_type);
    if (dtype == Py_None) return 0;
    PyObject *v[9] = {Py_NewRef(dtype), int_tuple(f.sizes, f.ndim),
                      int_tuple(f.strides, f.ndim), PyLong_FromLongLong(f.offset),
                      Py_NewRef(Py_True), PyBool_FromLong(f.is_neg),
                      PyLong_FromLongLong(f.nbytes), PyBool_FromLong(f.requires_grad),
                      conj ? PyBool_FromLong(f.is_conj) : NULL};
    int n = conj ? 9 : 8, done = -1;
    PyObject *ptr = PyLong_FromVoidPtr((void *)f.data);
    if (ptr != NULL) {
        done = 0;
        for (int i = 0; i < n && done == 0; i++) done = v[i] == NULL ? -1 : 0;
    }
    if (done == 0) done = PyList_Append(ptrs, ptr);
    for (int i = 0; i < n && done == 0; i++) done = PyList_Append(key, v[i]);
    if (done == 0) {
        *low |= f.data;
        done = 1;
    }
    Py_XDECREF(ptr);
    for (int i = 0; i < 9; i++) Py_XDECREF(v[i]);
    return done;
}

/* Appends tensor `t`'s part of a call key to `key` and its storage's address to `ptrs`
   (`call_path.out_call_key`); 1 done, 0 not a plain strided tensor (a RuntimeError, or
   another type), -1 an error. */
static int key_part(PyObject *t, PyObject *key, PyObject *ptrs, int conj, uintptr_t *low) {
    if (Py_TYPE(t) != tensor_type) return 0;
    if (fields_fn != NULL) {
        int part = key_part_of_fields(t, key, ptrs, conj, low);
        if (part != 0) return part;
    }
    PyObject *storage = read_attr(A_STORAGE, t);
    PyObject *v[9] = {NULL};
    int n = conj ? 9 : 8, done = -1;
    if (storage == NULL) goto failed;
    v[0] = read_attr(A_DTYPE, t);
    if (v[0] == NULL) goto failed;
    v[1] = read_attr(A_SHAPE, t);
    if (v[1] == NULL) goto failed;
    v[2] = read_attr(A_STRIDE, t);
    if (v[2] == NULL) goto failed;
    v[3] = read_attr(A_OFFSET, t);
    if (v[3] == NULL) goto failed;
    v[4] = read_attr(A_IS_CPU, t);
    if (v[4] == NULL) goto failed;
    if (v[4] != Py_True) {
        Py_SETREF(v[4], read_attr(A_DEVICE, t));
        if (v[4] == NULL) goto failed;
    }
    v[5] = read_attr(A_IS_NEG, t);
    if (v[5] == NULL) goto failed;
    v[6] = read_attr(A_NBYTES, storage);
    if (v[6] == NULL) goto failed;
    v[7] = read_attr(A_REQUIRES_GRAD, t);
    if (v[7] == NULL) goto failed;
    if (conj) {
        v[8] = read_attr(A_IS_CONJ, t);
        if (v[8] == NULL) goto failed;
    }
    PyObject *ptr = read_attr(A_STORAGE_PTR, storage);
    if (ptr == NULL) goto failed;
    uintptr_t address = (uintptr_t)PyLong_AsVoidPtr(ptr);
    if (address == 0 && PyErr_Occurred()) {
        Py_DECREF(ptr);
        goto failed;
    }
    *low |= address;
    done = PyList_Append(ptrs, ptr);
    Py_DECREF(ptr);
    for (int i = 0; i < n && done == 0; i++) done = PyList_Append(key, v[i]);
    if (done == 0) done = 1;
failed:
    if (done < 0 && PyErr_ExceptionMatches(PyExc_RuntimeError)) {
        PyErr_Clear();  /* NotImplementedError too: no storage, sizes or strides */
        done = 0;
    }
    Py_XDECREF(storage);
    for (int i = 0; i < 9; i++) Py_XDECREF(v[i]);
    return done;
}

enum { STACK_TENSORS = 8, FIELD_WORDS = 5 };  /* a tensor's words besides its sizes, strides */

/* The call key of `tensors` and `outs` (NULL: none) read from every tensor's fields
   (`fields`): the words of each tensor (its scalar type, dims, sizes, strides, storage
   offset, neg bit, requires_grad and for an out its conj bit, storage bytes; with `out=`
   the input count and which storages are shared, each one's first index) as one bytes
   object, the getters' key told apart by its type (`("out", bytes)` with `out=`): one
   object to hash and compare instead of a tuple of tuples. NULL with no error set where
   some tensor is not read so (the getters' key then), NULL with an error on failure. */
static PyObject *packed_key(PyObject *tensors, PyObject *out, Py_ssize_t n,
                            Py_ssize_t n_outs) {
    Py_ssize_t count = n + n_outs;
    stridec_tensor_fields stack[STACK_TENSORS], *f = stack;
    if (count > STACK_TENSORS) {
        f = PyMem_Malloc((size_t)count * sizeof(*f));
        if (f == NULL) return PyErr_NoMemory();
    }
    PyObject *result = NULL, *ptrs = NULL, *bytes = NULL;
    Py_ssize_t words = out != NULL ? 1 + count : 0;
    uintptr_t low = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = i < n ? PyTuple_GET_ITEM(tensors, i)
                            : (Py_TYPE(out) == tensor_type ? out : PyTuple_GET_ITEM(out, i - n));
        if (Py_TYPE(t) != tensor_type || fields_fn(impl_of(t), &f[i]) != 1) goto done;
        words += FIELD_WORDS + 2 * f[i].ndim;
        low |= f[i].data;
    }
    if (low & 7) goto done;  /* (misaligned: the getters' key gives None) */
    ptrs = PyList_New(count);
    bytes = PyBytes_FromStringAndSize(NULL, words * (Py_ssize_t)sizeof(int64_t));
    if (ptrs == NULL || bytes == NULL) goto failed;
    int64_t *w = (int64_t *)PyBytes_AS_STRING(bytes);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *ptr = PyLong_FromVoidPtr((void *)f[i].data);
        if (ptr == NULL) goto failed;
        PyList_SET_ITEM(ptrs, i, ptr);
        *w++ = f[i].scalar_type;
        *w++ = f[i].ndim;
        memcpy(w, f[i].sizes, (size_t)f[i].ndim * sizeof(int64_t));
        w += f[i].ndim;
        memcpy(w, f[i].strides, (size_t)f[i].ndim * sizeof(int64_t));
        w += f[i].ndim;
        *w++ = f[i].offset;
        *w++ = f[i].is_neg | f[i].requires_grad << 1 | (i >= n && f[i].is_conj) << 2;
        *w++ = f[i].nbytes;
    }
    if (out != NULL) {
        *w++ = n;
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_ssize_t first = i;
            for (Py_ssize_t j = 0; j < i; j++)
                if (f[j].data == f[i].data) {
                    first = j;
                    break;
                }
            *w++ = first;
        }
    }
    PyObject *key = bytes;
    bytes = NULL;
    if (out != NULL) {
        PyObject *word = PyUnicode_InternFromString("out");
        PyObject *pair = word == NULL ? NULL : PyTuple_Pack(2, word, key);
        Py_XDECREF(word);
        Py_DECREF(key);
        if (pair == NULL) goto failed;
        key = pair;
    }
    result = PyTuple_Pack(2, key, ptrs);
    Py_DECREF(key);
    goto done;
failed:
    if (!PyErr_Occurred()) PyErr_NoMemory();
    result = NULL;
done:
    Py_XDECREF(bytes);
    Py_XDECREF(ptrs);
    if (f != stack) PyMem_Free(f);
    return result;
}

/* The call key of `tensors` with `out` (NULL: none) and the storages' addresses, or None. */
static PyObject *make_key(PyObject *tensors, PyObject *out) {
    if (!PyTuple_CheckExact(tensors) || tensor_type == NULL) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: a key of a tuple, after setup");
        return NULL;
    }
    int with_out = out != NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tensors), n_outs = 0;
    if (with_out) {
        if (Py_TYPE(out) == tensor_type) n_outs = 1;
        else if (PyTuple_CheckExact(out)) n_outs = PyTuple_GET_SIZE(out);
        else Py_RETURN_NONE;
    }
    if (fields_fn != NULL) {
        PyObject *packed = packed_key(tensors, out, n, n_outs);
        if (packed != NULL || PyErr_Occurred()) return packed;
    }
    PyObject *key = PyList_New(0), *ptrs = PyList_New(0), *result = NULL;
    uintptr_t low = 0;
    if (key == NULL || ptrs == NULL) goto done;
    if (with_out) {
        PyObject *word = PyUnicode_InternFromString("out");
        if (word == NULL || PyList_Append(key, word) < 0) {
            Py_XDECREF(word);
            goto done;
        }
        Py_DECREF(word);
    }
    for (Py_ssize_t i = 0; i < n + n_outs; i++) {
        PyObject *t = i < n ? PyTuple_GET_ITEM(tensors, i)
                            : (Py_TYPE(out) == tensor_type ? out : PyTuple_GET_ITEM(out, i - n));
        int part = key_part(t, key, ptrs, i >= n, &low);
        if (part < 0) goto done;
        if (part == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (low & 7) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (with_out) {
        PyObject *count = PyLong_FromSsize_t(n);
        if (count == NULL || PyList_Append(key, count) < 0) {
            Py_XDECREF(count);
            goto done;
        }
        Py_DECREF(count);
        Py_ssize_t m = PyList_GET_SIZE(ptrs);
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_ssize_t first = i;
            for (Py_ssize_t j = 0; j < i; j++) {
                int same = PyObject_RichCompareBool(PyList_GET_ITEM(ptrs, j),
                                                    PyList_GET_ITEM(ptrs, i), Py_EQ);
                if (same < 0) goto done;
                if (same) {
                    first = j;
                    break;
                }
            }
            PyObject *index = PyLong_FromSsize_t(first);
            if (index == NULL || PyList_Append(key, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
    }
    PyObject *tuple = PyList_AsTuple(key);
    if (tuple != NULL) {
        result = PyTuple_Pack(2, tuple, ptrs);
        Py_DECREF(tuple);
    }
done:
    Py_XDECREF(key);
    Py_XDECREF(ptrs);
    return result;
}

/* out_key(tensors, out): `call_path.out_call_key`, the same key and pointers, or None. */
static PyObject *out_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: out_key(tensors, out)");
        return NULL;
    }
    return make_key(args[0], args[1]);
}

/* plain_key(tensors): `call_path.plain_call_key`, the same key and pointers, or None. */
static PyObject *plain_key(PyObject *self, PyObject *tensors) {
    (void)self;
    return make_key(tensors, NULL);
}

/* fields(reader, dtypes, bumper, increment): read keys through the TensorImpl reader at
   address `reader` (tensor_fields.cpp) from now on, `dtypes` each c10::ScalarType's
   torch.dtype (None where it has none), and bump versions (`bump`) through `bumper`,
   `increment` (torch._C._increment_version) for tensors of other types;
   fields(0, None, 0, increment) goes back to the getters and to `increment`. */
static PyObject *fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || !(PyTuple_CheckExact(args[1]) || args[1] == Py_None)) {
        PyErr_SetString(PyExc_TypeError,
                        "stridec calls: fields(reader, dtypes, bumper, increment)");
        return NULL;
    }
    void *reader = PyLong_AsVoidPtr(args[0]);
    if (reader == NULL && PyErr_Occurred()) return NULL;
    void *bumper = PyLong_AsVoidPtr(args[2]);
    if (bumper == NULL && PyErr_Occurred()) return NULL;
    if ((reader != NULL && args[1] == Py_None) || args[3] == Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "stridec calls: fields(reader, dtypes, bumper, increment)");
        return NULL;
    }
    fields_fn = NULL;
    bump_fn = NULL;
    Py_XSETREF(scalar_dtypes, reader == NULL ? NULL : Py_NewRef(args[1]));
    Py_XSETREF(increment_version, Py_NewRef(args[3]));
    fields_fn = (stridec_tensor_fields_fn)(intptr_t)reader;
    bump_fn = (void (*)(const void *))(intptr_t)bumper;
    Py_RETURN_NONE;
}

/* bump(tensors): torch._C._increment_version(tensors) for a tuple, each torch.Tensor's
   version bumped through `fields`'s bumper, any other item handed to `increment` (which
   bumps a tensor subclass's and raises for what is no tensor). */
static PyObject *bump(PyObject *self, PyObject *tensors) {
    (void)self;
    if (increment_version == NULL) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: bump before fields");
        return NULL;
    }
    if (bump_fn == NULL || !PyTuple_CheckExact(tensors))
        return PyObject_CallOneArg(increment_version, tensors);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tensors); i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i);
        if (Py_TYPE(t) == tensor_type) {
            bump_fn(impl_of(t));
            continue;
        }
        PyObject *one = PyTuple_Pack(1, t);
        if (one == NULL) return NULL;
        PyObject *done = PyObject_CallOneArg(increment_version, one);
        Py_DECREF(one);
        if (done == NULL) return NULL;
        Py_DECREF(done);
    }
    Py_RETURN_NONE;
}

/* impl(tensor): the address `fields` reads a tensor's TensorImpl at, for the caller to
   check against `Tensor._cdata` before it turns the reader on. */
static PyObject *impl(PyObject *self, PyObject *t) {
    (void)self;
    if (tensor_type == NULL || Py_TYPE(t) != tensor_type) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: impl(a torch.Tensor), after setup");
        return NULL;
    }
    return PyLong_FromVoidPtr((void *)impl_of(t));
}

/* huge(address, nbytes): ask for transparent huge pages over the whole 2 MiB pages of a
   fresh buffer before anything writes it (madvise MADV_HUGEPAGE, a hint: where the
   kernel has them, a 64 MiB buffer's first writes fault 32 times instead of 16,384). */
static PyObject *huge(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "stridec calls: huge(address, nbytes)");
        return NULL;
    }
    uintptr_t address = (uintptr_t)PyLong_AsVoidPtr(args[0]);
    if (address == 0 && PyErr_Occurred()) return NULL;
    long long nbytes = PyLong_AsLongLong(args[1]);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
#ifdef MADV_HUGEPAGE
    const uintptr_t page = (uintptr_t)2 << 20;
    uintptr_t lo = (address + page - 1) & ~(page - 1);
    uintptr_t hi = nbytes > 0 ? (address + (uintptr_t)nbytes) & ~(page - 1) : 0;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fields", (PyCFunction)(void (*)(void))fields, METH_FASTCALL,
     "fields(reader, dtypes): keys read through a TensorImpl reader"},
    {"impl", impl, METH_O, "impl(tensor): the TensorImpl address `fields` reads"},
    {"bump", bump, METH_O, "bump(tensors): torch._C._increment_version(tensors)"},
    {"huge", (PyCFunction)(void (*)(void))huge, METH_FASTCALL,
     "huge(address, nbytes): transparent huge pages over a fresh buffer's whole pages"},
    {"batch", (PyCFunction)(void (*)(void))batch, METH_FASTCALL,
     "batch(spec, pointers, threads): a batch's calls in one parallel region"},
    {"setup", (PyCFunction)(void (*)(void))setup, METH_FASTCALL,
     "setup(tensor_type, descriptors): the attributes `key` reads"},
    {"out_key", (PyCFunction)(void (*)(void))out_key, METH_FASTCALL,
     "out_key(tensors, out): call_path.out_call_key"},
    {"plain_key", plain_key, METH_O, "plain_key(tensors): call_path.plain_call_key"},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(calls, pointers, threads): the kernel calls packed in `calls` on `pointers`"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "stridec_calls", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

/* The module object; called from Python with the GIL held (ctypes.PYFUNCTYPE). */
PyObject *stridec_calls_module_v1(void) { return PyModule_Create(&module); }
