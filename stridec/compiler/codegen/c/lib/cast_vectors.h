/* Conversions between float32 and float16 / bfloat16 in vector registers, bit for bit as
   casts.h's element helpers (the rules: stridec/compiler/codegen/c/casts.py), for the
   kernels of codegen/c/copy.py (casts.py's c_convert_run and c_convert_lanes choose them
   by dtype pair). Pasted after casts.h.

   stridec_run_<src>_<dst>(s, d, n), float32 <-> float16: converts the first elements of
   s[0 .. n) into d in x86's conversion instructions, 16 at a time with AVX-512, else 8
   with F16C (vcvtps2ph rounds to nearest even and keeps a NaN's sign and top payload bits
   quieted, vcvtph2ps is exact: the helpers' bits; gcc does not vectorize the helpers for
   these pairs itself), and returns how many it converted (the rest: the helpers).

   stridec_lanes_<src>_<dst>(v): CONVERT_LANES lanes in registers, 16 on AVX-512 with its
   16-bit lanes on 256-bit registers too (BW, VL; float32 in a __m512, the halves' bits in
   a __m256i), else 8 on AVX2 with F16C (a __m256 and a __m128i). float16 as the runs;
   bfloat16 -> float32 is the bits shifted up; float32 -> bfloat16 rounds to nearest even
   on the integer bits, every NaN 0xffff, as stridec_f32_to_bf16 (AVX512_BF16's
   vcvtneps2bf16 would quiet NaNs instead and flush subnormal inputs to zero); the 8-lane
   form packs its results to 16 bits with vpackusdw, which keeps every value up to
   0xffff. */
#ifndef STRIDEC_CAST_VECTORS_H
#define STRIDEC_CAST_VECTORS_H
/* The intrinsics' header only where they are used: it is large. */
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#define STRIDEC_ROUND_EVEN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline int64_t stridec_run_float32_float16(const float *restrict s, uint16_t *restrict d,
                                                  int64_t n) {
    int64_t j = 0;
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(d + j), _mm512_cvtps_ph(_mm512_loadu_ps(s + j),
                                                                STRIDEC_ROUND_EVEN));
#elif defined(__F16C__) && defined(__AVX__)
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(d + j), _mm256_cvtps_ph(_mm256_loadu_ps(s + j),
                                                             STRIDEC_ROUND_EVEN));
#endif
    return j;
}

static inline int64_t stridec_run_float16_float32(const uint16_t *restrict s, float *restrict d,
                                                  int64_t n) {
    int64_t j = 0;
#if defined(__AVX512F__)
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(d + j, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + j))));
#elif defined(__F16C__) && defined(__AVX__)
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(d + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j))));
#endif
    return j;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define CONVERT_LANES 16
static inline __m256i stridec_lanes_float32_float16(__m512 v) {
    return _mm512_cvtps_ph(v, STRIDEC_ROUND_EVEN);
}
typedef uint32_t stridec_lanes_u32 __attribute__((vector_size(64)));
static inline __m256i stridec_lanes_float32_bfloat16(__m512 v) {
    stridec_lanes_u32 w = (stridec_lanes_u32)v;
    stridec_lanes_u32 nan = (stridec_lanes_u32)((w & 0x7fffffffu) > 0x7f800000u);
    stridec_lanes_u32 r = ((w + 0x7fffu + ((w >> 16) & 1u)) >> 16) | (nan & 0xffffu);
    return _mm512_cvtepi32_epi16((__m512i)r);
}
static inline __m512 stridec_lanes_float16_float32(__m256i h) {
    return _mm512_cvtph_ps(h);
}
static inline __m512 stridec_lanes_bfloat16_float32(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#elif defined(__AVX2__) && defined(__F16C__)
#define CONVERT_LANES 8
static inline __m128i stridec_lanes_float32_float16(__m256 v) {
    return _mm256_cvtps_ph(v, STRIDEC_ROUND_EVEN);
}
typedef uint32_t stridec_lanes_u32 __attribute__((vector_size(32)));
static inline __m128i stridec_lanes_float32_bfloat16(__m256 v) {
    stridec_lanes_u32 w = (stridec_lanes_u32)v;
    stridec_lanes_u32 nan = (stridec_lanes_u32)((w & 0x7fffffffu) > 0x7f800000u);
    __m256i r = (__m256i)(((w + 0x7fffu + ((w >> 16) & 1u)) >> 16) | (nan & 0xffffu));
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}
static inline __m256 stridec_lanes_float16_float32(__m128i h) {
    return _mm256_cvtph_ps(h);
}
static inline __m256 stridec_lanes_bfloat16_float32(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif
#endif
