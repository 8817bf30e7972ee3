/* The element types of a planned copy's unit and, for a cast, the conversion its kernels
   apply as they store. A copy is built with ELEM_BYTES (1, 2, 4 or 8): elements move as
   unsigned bits of that size. A cast is built with CAST_SRC and CAST_DST, dtype codes
   (STRIDEC_DT_*): its kernels read the source's bits (elem_t) as a copy of that size
   does and store each vector converted as torch's CPU .to() converts (casts.h, the rules
   in stridec/compiler/codegen/c/casts.py), in x86's conversion instructions where they
   give the same bits (float32 <-> float16, bytes widened), elsewhere in loops gcc
   vectorizes. */
#ifndef STRIDEC_COPY_CAST_H
#define STRIDEC_COPY_CAST_H

#include <stdint.h>
#include <string.h>

typedef int64_t i64;
#define ALWAYS_INLINE static inline __attribute__((always_inline))

#define STRIDEC_DT_BOOL 1
#define STRIDEC_DT_UINT8 2
#define STRIDEC_DT_INT8 3
#define STRIDEC_DT_INT16 4
#define STRIDEC_DT_INT32 5
#define STRIDEC_DT_INT64 6
#define STRIDEC_DT_UINT32 7
#define STRIDEC_DT_FLOAT16 8
#define STRIDEC_DT_BFLOAT16 9
#define STRIDEC_DT_FLOAT32 10
#define STRIDEC_DT_FLOAT64 11

/* The bytes of a dtype code. */
#define STRIDEC_DT_BYTES(t) ((t) <= STRIDEC_DT_INT8 ? 1 : (t) == STRIDEC_DT_INT16 ? 2 \
    : (t) <= STRIDEC_DT_INT64 ? ((t) == STRIDEC_DT_INT64 ? 8 : 4) : (t) == STRIDEC_DT_UINT32 ? 4 \
    : (t) <= STRIDEC_DT_BFLOAT16 ? 2 : (t) == STRIDEC_DT_FLOAT32 ? 4 : 8)

#ifdef CAST_SRC
#define ELEM_BYTES STRIDEC_DT_BYTES(CAST_SRC)
#define DST_BYTES STRIDEC_DT_BYTES(CAST_DST)
#else
#define DST_BYTES ELEM_BYTES
#endif

#if ELEM_BYTES == 1
typedef uint8_t elem_t;
#elif ELEM_BYTES == 2
typedef uint16_t elem_t;
#elif ELEM_BYTES == 4
typedef uint32_t elem_t;
#elif ELEM_BYTES == 8
typedef uint64_t elem_t;
#else
#error "ELEM_BYTES must be 1, 2, 4 or 8"
#endif

#if DST_BYTES == 1
typedef uint8_t dst_t;
#elif DST_BYTES == 2
typedef uint16_t dst_t;
#elif DST_BYTES == 4
typedef uint32_t dst_t;
#else
typedef uint64_t dst_t;
#endif

/* The larger element of the two sides: buffers in L1 are sized by it. */
#define WIDE_BYTES (ELEM_BYTES > DST_BYTES ? ELEM_BYTES : DST_BYTES)

#ifndef CAST_SRC
/* A copy: n elements of vector v (n a constant: the vector's lanes) stored at d, or its
   first n of N. */
#define STORE_N(d, v, n) memcpy((d), (v), (size_t)(n) * ELEM_BYTES)
#define STORE_PART(d, v, N, n) memcpy((d), (v), (size_t)(n) * ELEM_BYTES)
#else

/* The C types holding a value of the source and the destination. */
#if CAST_SRC == STRIDEC_DT_FLOAT32
typedef float cast_src_c;
#elif CAST_SRC == STRIDEC_DT_FLOAT64
typedef double cast_src_c;
#elif CAST_SRC == STRIDEC_DT_INT8
typedef int8_t cast_src_c;
#elif CAST_SRC == STRIDEC_DT_INT16
typedef int16_t cast_src_c;
#elif CAST_SRC == STRIDEC_DT_INT32
typedef int32_t cast_src_c;
#elif CAST_SRC == STRIDEC_DT_INT64
typedef int64_t cast_src_c;
#elif CAST_SRC == STRIDEC_DT_UINT32
typedef uint32_t cast_src_c;
#elif CAST_SRC == STRIDEC_DT_FLOAT16 || CAST_SRC == STRIDEC_DT_BFLOAT16
typedef uint16_t cast_src_c;  /* the bits */
#else
typedef uint8_t cast_src_c;   /* uint8, bool */
#endif
#if CAST_DST == STRIDEC_DT_FLOAT32
typedef float cast_dst_c;
#elif CAST_DST == STRIDEC_DT_FLOAT64
typedef double cast_dst_c;
#elif CAST_DST == STRIDEC_DT_INT8
typedef int8_t cast_dst_c;
#elif CAST_DST == STRIDEC_DT_INT16
typedef int16_t cast_dst_c;
#elif CAST_DST == STRIDEC_DT_INT32
typedef int32_t cast_dst_c;
#elif CAST_DST == STRIDEC_DT_INT64
typedef int64_t cast_dst_c;
#elif CAST_DST == STRIDEC_DT_UINT32
typedef uint32_t cast_dst_c;
#elif CAST_DST == STRIDEC_DT_FLOAT16 || CAST_DST == STRIDEC_DT_BFLOAT16
typedef uint16_t cast_dst_c;
#else
typedef uint8_t cast_dst_c;
#endif

/* A bool reads as uint8 0 or 1: any byte but 0 is true (a bool made by a uint8 view), as
   torch reads it. */
#if CAST_SRC == STRIDEC_DT_BOOL
#define CV_SRC STRIDEC_DT_UINT8
#define CV_IN(x) ((uint8_t)((x) != 0))
#else
#define CV_SRC CAST_SRC
#define CV_IN(x) (x)
#endif
#define CV_HALF (CV_SRC == STRIDEC_DT_FLOAT16 || CV_SRC == STRIDEC_DT_BFLOAT16)
#define CV_FLOAT (CV_HALF || CV_SRC == STRIDEC_DT_FLOAT32 || CV_SRC == STRIDEC_DT_FLOAT64)
/* A value as float32: the halves widen exactly, everything else by C's conversion (two
   roundings to a half from float64 and the wide integers, as torch's c10::Half(float)). */
#if CV_SRC == STRIDEC_DT_FLOAT16
#define CV_F32(v) stridec_f16_to_f32(v)
#elif CV_SRC == STRIDEC_DT_BFLOAT16
#define CV_F32(v) stridec_bf16_to_f32(v)
#else
#define CV_F32(v) ((float)(v))
#endif

ALWAYS_INLINE cast_dst_c cast_value(cast_src_c x) {
    /* CV_IN(x) throughout: a local of its type kept gcc from vectorizing the bool loops. */
#if CAST_DST == STRIDEC_DT_BOOL
#if CV_HALF
    return (uint8_t)((CV_IN(x) & 0x7fffu) != 0);  /* +-0 has only the sign bit set */
#else
    return (uint8_t)(CV_IN(x) != 0);  /* NaN is true */
#endif
#elif CAST_DST == STRIDEC_DT_FLOAT16
    return stridec_f32_to_f16(CV_F32(CV_IN(x)));
#elif CAST_DST == STRIDEC_DT_BFLOAT16
    return stridec_f32_to_bf16(CV_F32(CV_IN(x)), CV_SRC == STRIDEC_DT_FLOAT16 ? 0x7fc0u : 0xffffu);
#elif CV_HALF && (CAST_DST == STRIDEC_DT_FLOAT32 || CAST_DST == STRIDEC_DT_FLOAT64)
    return (cast_dst_c)CV_F32(CV_IN(x));
#elif CV_FLOAT && CAST_DST != STRIDEC_DT_FLOAT32 && CAST_DST != STRIDEC_DT_FLOAT64
    /* float -> integer: truncation, the smallest integer for NaN and out of range; uint8
       (and float16 -> uint32) through int64, uint32 as torch's vector loop */
#if CV_SRC == STRIDEC_DT_FLOAT64
#define CV_TO(name, v) stridec_f64_to_##name(v)
#else
#define CV_TO(name, v) stridec_f32_to_##name(CV_F32(v))
#endif
#if CAST_DST == STRIDEC_DT_UINT32 && CV_SRC != STRIDEC_DT_FLOAT16
    return CV_TO(u32, CV_IN(x));
#elif CAST_DST == STRIDEC_DT_INT64 || CAST_DST == STRIDEC_DT_UINT8 || CAST_DST == STRIDEC_DT_UINT32
    return (cast_dst_c)CV_TO(i64, CV_IN(x));
#else
    return (cast_dst_c)CV_TO(i32, CV_IN(x));
#endif
#else
    return (cast_dst_c)CV_IN(x);  /* C's conversions: integers wrap, to float round to even */
#endif
}

ALWAYS_INLINE dst_t cast_one(elem_t b) {
    cast_src_c x;
    memcpy(&x, &b, sizeof x);
    cast_dst_c y = cast_value(x);
    dst_t r;
    memcpy(&r, &y, sizeof r);
    return r;
}

#if (CAST_SRC == STRIDEC_DT_FLOAT32 && CAST_DST == STRIDEC_DT_FLOAT16) \
    || (CAST_SRC == STRIDEC_DT_FLOAT16 && CAST_DST == STRIDEC_DT_FLOAT32)
#define CAST_F16C 1
#endif
#if (defined(CAST_F16C) && (defined(__F16C__) || defined(__AVX512F__))) \
    || (ELEM_BYTES == 1 && (defined(__AVX2__) || defined(__AVX512F__)))
#include <immintrin.h>
#endif
/* The pairs whose runs convert in explicit vectors: a streamed run converts line by line
   in registers (the others convert a buffer's worth at a time: gcc's loops lose on lines). */
#if defined(CAST_F16C) || (CAST_SRC == STRIDEC_DT_FLOAT32 && CAST_DST == STRIDEC_DT_BFLOAT16) \
    || (CAST_SRC == STRIDEC_DT_BFLOAT16 && CAST_DST == STRIDEC_DT_FLOAT32)
#define CAST_LINE_RUNS 1
#endif

/* d[j] = the cast of s[j], j < n: float32 <-> float16 in vcvtps2ph / vcvtph2ps (16 lanes
   with AVX-512, 8 with F16C), which give the helpers' bits; float32 <-> bfloat16 on
   vectors of integer bits; 1-byte sources widened in vpmovzx / vpmovsx; everything else,
   and the rest, in a loop gcc vectorizes. */
ALWAYS_INLINE void cast_run(dst_t* restrict d, const elem_t* restrict s, i64 n) {
    i64 j = 0;
#if defined(CAST_F16C) && CAST_SRC == STRIDEC_DT_FLOAT32
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i*)(void*)(d + j), _mm512_cvtps_ph(
            _mm512_loadu_ps((const void*)(s + j)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#if defined(__F16C__) && defined(__AVX__)
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i*)(void*)(d + j), _mm256_cvtps_ph(
            _mm256_loadu_ps((const void*)(s + j)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#elif defined(CAST_F16C)
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps((void*)(d + j), _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i*)(const void*)(s + j))));
#endif
#if defined(__F16C__) && defined(__AVX__)
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps((void*)(d + j), _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i*)(const void*)(s + j))));
#endif
#elif CAST_SRC == STRIDEC_DT_FLOAT32 && CAST_DST == STRIDEC_DT_BFLOAT16
    /* Rounded to nearest even on the integer bits, every NaN 0xffff, as stridec_f32_to_bf16
       (AVX512_BF16's vcvtneps2bf16 would quiet NaNs instead and flush subnormal inputs to
       zero): 16 lanes at a time where 64-byte vectors are, then 8. */
#define BF16_NARROW(L)                                                                      \
    {                                                                                       \
        typedef uint32_t w_v __attribute__((vector_size(4 * L)));                           \
        typedef uint16_t h_v __attribute__((vector_size(2 * L)));                           \
        for (; j + L <= n; j += L) {                                                        \
            w_v w;                                                                          \
            memcpy(&w, s + j, sizeof w);                                                    \
            w_v nan = (w_v)((w & 0x7fffffffu) > 0x7f800000u);                               \
            h_v h = __builtin_convertvector(                                                \
                ((w + 0x7fffu + ((w >> 16) & 1u)) >> 16) | (nan & 0xffffu), h_v);           \
            memcpy(d + j, &h, sizeof h);                                                    \
        }                                                                                   \
    }
#if defined(__AVX512F__) && defined(__AVX512BW__)
    BF16_NARROW(16)
#endif
    BF16_NARROW(8)
#elif ELEM_BYTES == 1 && DST_BYTES > 1 && (defined(__AVX512F__) || defined(__AVX2__))
    /* Bytes widen exactly into every wider type, 16 at a time (AVX-512; AVX2: 8, the
       floats but float64): zero- or sign-extended (vpmovzx / vpmovsx; a bool's 0 or 1),
       to float32 (vcvtdq2ps) for the floats. A float32 of a byte's value is a half's and
       a bfloat16's exactly (8 significant bits at most), so vcvtps2ph and the bits' top
       half give the helpers' bits. gcc vectorizes none of the helpers' loops for the
       halves itself, and widens bytes in scalar inserts. */
#if CAST_SRC == STRIDEC_DT_INT8
#define BYTES_TO(n, bits) _mm##n##_cvtepi8_epi##bits
#else
#define BYTES_TO(n, bits) _mm##n##_cvtepu8_epi##bits
#endif
#define CAST_FLOAT_DST (CAST_DST == STRIDEC_DT_FLOAT16 || CAST_DST == STRIDEC_DT_BFLOAT16 \
                        || CAST_DST == STRIDEC_DT_FLOAT32)
#if defined(__AVX512F__)
#if DST_BYTES == 2 && !CAST_FLOAT_DST && defined(__AVX512BW__)
    for (; j + 32 <= n; j += 32) {  /* int16: 32 at a time (vpmovzxbw / vpmovsxbw) */
        __m256i b = _mm256_loadu_si256((const __m256i*)(const void*)(s + j));
#if CAST_SRC == STRIDEC_DT_BOOL
        b = _mm256_min_epu8(b, _mm256_set1_epi8(1));  /* any byte but 0 is true: 1 */
#endif
        _mm512_storeu_si512((void*)(d + j), BYTES_TO(512, 16)(b));
    }
#endif
    for (; j + 16 <= n; j += 16) {
        __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(s + j));
#if CAST_SRC == STRIDEC_DT_BOOL
        b = _mm_min_epu8(b, _mm_set1_epi8(1));
#endif
        void* o = (void*)(d + j);
#if CAST_FLOAT_DST
        const __m512 f = _mm512_cvtepi32_ps(BYTES_TO(512, 32)(b));
#if CAST_DST == STRIDEC_DT_FLOAT16
        _mm256_storeu_si256((__m256i*)o, _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
#elif CAST_DST == STRIDEC_DT_BFLOAT16
        _mm256_storeu_si256((__m256i*)o,
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(f), 16)));
#else
        _mm512_storeu_ps(o, f);
#endif
#elif CAST_DST == STRIDEC_DT_FLOAT64
        const __m512i w = BYTES_TO(512, 32)(b);
        _mm512_storeu_pd(o, _mm512_cvtepi32_pd(_mm512_castsi512_si256(w)));
        _mm512_storeu_pd((double*)o + 8, _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(w, 1)));
#elif DST_BYTES == 2
        _mm256_storeu_si256((__m256i*)o, BYTES_TO(256, 16)(b));
#elif DST_BYTES == 4
        _mm512_storeu_si512(o, BYTES_TO(512, 32)(b));
#else
        _mm512_storeu_si512(o, BYTES_TO(512, 64)(b));
        _mm512_storeu_si512((char*)o + 64, BYTES_TO(512, 64)(_mm_srli_si128(b, 8)));
#endif
    }
#elif CAST_FLOAT_DST && (CAST_DST != STRIDEC_DT_FLOAT16 || defined(__F16C__))
    for (; j + 8 <= n; j += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i*)(const void*)(s + j));
#if CAST_SRC == STRIDEC_DT_BOOL
        b = _mm_min_epu8(b, _mm_set1_epi8(1));
#endif
        const __m256 f = _mm256_cvtepi32_ps(BYTES_TO(256, 32)(b));
        void* o = (void*)(d + j);
#if CAST_DST == STRIDEC_DT_FLOAT16
        _mm_storeu_si128((__m128i*)o, _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
#elif CAST_DST == STRIDEC_DT_BFLOAT16
        const __m256i h = _mm256_srli_epi32(_mm256_castps_si256(f), 16);
        _mm_storeu_si128((__m128i*)o, _mm_packus_epi32(_mm256_castsi256_si128(h),
                                                       _mm256_extracti128_si256(h, 1)));
#else
        _mm256_storeu_ps(o, f);
#endif
    }
#endif
#elif CAST_SRC == STRIDEC_DT_BFLOAT16 && CAST_DST == STRIDEC_DT_FLOAT32
#define BF16_WIDEN(L)                                                                       \
    {                                                                                       \
        typedef uint32_t w_v __attribute__((vector_size(4 * L)));                           \
        typedef uint16_t h_v __attribute__((vector_size(2 * L)));                           \
        for (; j + L <= n; j += L) { /* the bits shifted up */                              \
            h_v h;                                                                          \
            memcpy(&h, s + j, sizeof h);                                                    \
            w_v w = __builtin_convertvector(h, w_v) << 16;                                  \
            memcpy(d + j, &w, sizeof w);                                                    \
        }                                                                                   \
    }
#if defined(__AVX512F__)
    BF16_WIDEN(16)
#endif
    BF16_WIDEN(8)
#endif
    /* Typed views of the bits (s may be a vector register's lanes of elem_t). */
    typedef cast_src_c __attribute__((may_alias)) src_view;
    typedef cast_dst_c __attribute__((may_alias)) dst_view;
    const src_view* restrict sv = (const src_view*)(const void*)s;
    dst_view* restrict dv = (dst_view*)(void*)d;
    for (; j < n; j++) dv[j] = cast_value(sv[j]);
}

/* The first n of the N (a constant, at most 256) elements of v converted, stored at d:
   the whole vector converted in registers, its first n stored. */
ALWAYS_INLINE void cast_part(dst_t* d, const elem_t* v, i64 N, i64 n) {
    dst_t t[256] __attribute__((aligned(64)));
    cast_run(t, v, N);
    memcpy(d, t, (size_t)n * DST_BYTES);
}

#define STORE_N(d, v, n) cast_run((d), (const elem_t*)(const void*)(v), (n))
#define STORE_PART(d, v, N, n) cast_part((d), (const elem_t*)(const void*)(v), (N), (n))
#endif

#endif
