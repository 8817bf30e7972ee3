/* Non-temporal ("streaming") stores, in every copy unit (stridec/compiler/codegen/c/pool.py;
   lib/pool.c defines the threshold). An ordinary store to a line that is not in the cache
   first reads the line from memory (read for ownership), so a copy moves three lines per
   line written: the source, the destination read and the destination written back. A
   streaming store writes a whole 64-byte line without reading it (two transfers) and
   leaves it out of the cache: worth it only for a destination too large to stay there for
   its consumer anyway, which the threshold decides per call (stream_wanted; the runtime
   sets it from the last-level cache's size). The intrinsics' builtins are used directly:
   the intrinsics header costs more to parse than a unit does to compile. */
#ifndef STRIDEC_STREAM_H
#define STRIDEC_STREAM_H
/* Destination bytes above which a call streams (-1: never); set by the runtime. */
extern int64_t stridec_stream_bytes_v1;
static inline int stream_wanted(int64_t dst_bytes) {
    int64_t t = __atomic_load_n(&stridec_stream_bytes_v1, __ATOMIC_RELAXED);
    return t >= 0 && dst_bytes > t;
}
/* One 64-byte line from s (any alignment) to d (64-byte aligned), not through the cache. */
#if defined(__AVX512F__)
typedef long long stream_v __attribute__((vector_size(64)));
static inline void stream_line(void* d, const void* s) {
    stream_v x;
    memcpy(&x, s, 64);
    __builtin_ia32_movntdq512((stream_v*)d, x);
}
#elif defined(__AVX__)
typedef long long stream_v __attribute__((vector_size(32)));
static inline void stream_line(void* d, const void* s) {
    stream_v x, y;
    memcpy(&x, s, 32);
    memcpy(&y, (const char*)s + 32, 32);
    __builtin_ia32_movntdq256((stream_v*)d, x);
    __builtin_ia32_movntdq256((stream_v*)d + 1, y);
}
#elif defined(__SSE2__)
typedef long long stream_v __attribute__((vector_size(16)));
static inline void stream_line(void* d, const void* s) {
    for (int k = 0; k < 4; k++) {
        stream_v x;
        memcpy(&x, (const char*)s + 16 * k, 16);
        __builtin_ia32_movntdq((stream_v*)d + k, x);
    }
}
#else
static inline void stream_line(void* d, const void* s) { memcpy(d, s, 64); }
#endif
/* Orders this thread's streaming stores before what follows (the end of its work). */
static inline void stream_end(void) {
#if defined(__SSE__)
    __builtin_ia32_sfence();
#endif
}
/* n bytes from s to d: ordinary stores up to d's next 64-byte boundary, whole lines
   streamed, the tail ordinary again. Runs shorter than a line past the head: memcpy. */
static inline __attribute__((always_inline)) void stream_copy(void* d, const void* s,
                                                            size_t n) {
    char* dp = (char*)d;
    const char* sp = (const char*)s;
    size_t head = (size_t)(-(uintptr_t)dp) & 63;
    if (n < head + 64) { memcpy(dp, sp, n); return; }
    if (head) { memcpy(dp, sp, head); dp += head; sp += head; n -= head; }
    for (; n >= 64; n -= 64, dp += 64, sp += 64) stream_line(dp, sp);
    if (n) memcpy(dp, sp, n);
}
/* n bytes of a repeated pattern at d: `line` holds it from its first byte, 64 bytes, and
   d is aligned to the pattern's period (an element of the fill), as stream_copy. */
static inline void stream_fill(void* d, const void* line, size_t n) {
    char* dp = (char*)d;
    size_t head = (size_t)(-(uintptr_t)dp) & 63;
    if (n < head + 64) {
        for (size_t k = 0; k < n; k += 64) memcpy(dp + k, line, n - k < 64 ? n - k : 64);
        return;
    }
    if (head) { memcpy(dp, line, head); dp += head; n -= head; }
    for (; n >= 64; n -= 64, dp += 64) stream_line(dp, line);
    if (n) memcpy(dp, line, n);
}
#endif
