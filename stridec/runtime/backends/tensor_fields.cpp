/* stridec cpu backend: what a cached call's key reads of a tensor, read from its TensorImpl
   (runtime/backends/calls.c, `key_part`; cpu.py, `_load_fields`). The torch getters read the
   same fields through ten Python calls a tensor; with cold caches those calls are most of
   a small copy's call (docs/cpu.md, "The call key from the tensors' fields"). Built against
   the installed torch's headers, so the fields are where that torch puts them. */
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COWDeleter.h>

#include <cstdint>
#include <cstring>
#include <typeinfo>

#include "tensor_fields.h"

/* The vtable address every c10::TensorImpl itself has (no subclass's: a sparse, nested,
   wrapper or opaque tensor), read from a plain tensor (`stridec_tensor_fields_setup_v1`):
   one compare on a word the reader loads anyway, where typeid reads two more. */
static const void *plain_vtable;

static const void *vtable_of(const void *impl) {
    const void *vtable;
    std::memcpy(&vtable, impl, sizeof(vtable));
    return vtable;
}

/* Records the vtable of the plain tensor whose TensorImpl is at `impl`; 1 where it is a
   c10::TensorImpl itself, else 0 (and the reader reads nothing). */
extern "C" int stridec_tensor_fields_setup_v1(const void *impl_address) {
    auto *impl = static_cast<const c10::TensorImpl *>(impl_address);
    plain_vtable = nullptr;
    if (impl == nullptr || typeid(*impl) != typeid(c10::TensorImpl)) return 0;
    plain_vtable = vtable_of(impl);
    return 1;
}

/* Fills `f` from the TensorImpl at `impl` and returns 1 where the tensor is a plain strided
   CPU tensor whose fields the getters read as they are here; else 0 (the caller reads the
   getters, which raise or answer for every other kind). Never throws. */
extern "C" int stridec_tensor_fields_v1(const void *impl_address, stridec_tensor_fields *f) {
    try {
        auto *impl = static_cast<const c10::TensorImpl *>(impl_address);
        if (impl == nullptr || plain_vtable == nullptr || vtable_of(impl) != plain_vtable)
            return 0;
        if (impl->is_python_dispatch() || impl->has_symbolic_sizes_strides()
            || !impl->is_cpu())
            return 0;
        const c10::Storage &storage = impl->storage();
        if (!storage) return 0;
        c10::StorageImpl *s = storage.unsafeGetStorageImpl();
        if (s->sym_nbytes().is_heap_allocated()) return 0;
        /* A copy-on-write storage's address is its shared original's until a write
           materializes it (as `UntypedStorage.data_ptr()` does): the getters' path. */
        if (s->data_ptr().get_deleter() == &c10::impl::cow::cow_deleter) return 0;
        f->data = reinterpret_cast<std::uintptr_t>(s->mutable_data());
        f->nbytes = static_cast<std::int64_t>(s->nbytes());
        const c10::IntArrayRef sizes = impl->sizes(), strides = impl->strides();
        if (sizes.size() > STRIDEC_FIELDS_MAX_DIMS) return 0;
        f->ndim = static_cast<std::int64_t>(sizes.size());
        for (std::size_t k = 0; k < sizes.size(); k++) {
            f->sizes[k] = sizes[k];
            f->strides[k] = strides[k];
        }
        f->offset = impl->storage_offset();
        f->scalar_type = static_cast<std::int64_t>(impl->dtype().toScalarType());
        f->is_neg = impl->is_neg();
        f->is_conj = impl->is_conj();
        f->requires_grad = impl->requires_grad();
        return 1;
    } catch (...) {
        return 0;
    }
}

/* The c10::ScalarType of the tensor whose TensorImpl is at `impl` (cpu.py maps each to its
   torch.dtype once, on empty tensors of every dtype); -1 where it has none. */
extern "C" std::int64_t stridec_scalar_type_v1(const void *impl_address) {
    try {
        auto *impl = static_cast<const c10::TensorImpl *>(impl_address);
        return static_cast<std::int64_t>(impl->dtype().toScalarType());
    } catch (...) {
        return -1;
    }
}

/* Bumps the version of the tensor whose TensorImpl is at `impl`, as
   torch._C._increment_version does (an inference tensor has none: left as it is). */
extern "C" void stridec_bump_version_v1(void *impl_address) {
    try {
        auto *impl = static_cast<c10::TensorImpl *>(impl_address);
        if (!impl->is_inference()) impl->bump_version();
    } catch (...) {
    }
}
