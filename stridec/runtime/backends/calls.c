/* stridec cpu backend: a cached call's kernel calls as builtin functions of Python
   (runtime/backends/cpu.py, `calls_module`). A call through ctypes converts each argument
   and goes through libffi; with cold caches that is most of a small copy's time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "calls_abi.h"

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

/* Appends tensor `t`'s part of a call key to `key` and its storage's address to `ptrs`
   (`call_path.out_call_key`); 1 done, 0 not a plain strided tensor (a RuntimeError, or
   another type), -1 an error. */
static int key_part(PyObject *t, PyObject *key, PyObject *ptrs, int conj, uintptr_t *low) {
    if (Py_TYPE(t) != tensor_type) return 0;
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
