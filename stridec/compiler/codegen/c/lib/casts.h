/* Element conversions as torch's CPU .to() gives them, bit for bit (the rules:
   stridec/compiler/codegen/c/casts.py's docstring). Pasted once at the top of a compile
   unit: the strategies' casts call them, the planned library's casts (copy_cast.h)
   too. Branch-free selects over integer bit patterns, so gcc vectorizes loops of them;
   they need IEEE arithmetic (no -ffast-math) and flush-to-zero off. */
#ifndef STRIDEC_CASTS_H
#define STRIDEC_CASTS_H
#include <stdint.h>
#include <string.h>

static inline uint32_t stridec_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float stridec_f32_of_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* float16 bits -> float32, exact; a NaN keeps its payload (shifted up 13 bits) with the
   quiet bit set, as x86's vcvtph2ps. */
static inline float stridec_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t normal = (em << 13) + 0x38000000u; /* exponent + (127 - 15) */
    uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13) | (em > 0x7c00u ? 0x400000u : 0u);
    /* A subnormal is em * 2^-24 = 2^-14 * (1 + em / 1024) - 2^-14, exact in float32 (an
       int -> float conversion here would keep gcc from vectorizing the loop). */
    uint32_t subnormal = stridec_f32_bits(stridec_f32_of_bits((em << 13) | 0x38800000u) - 0x1p-14f);
    uint32_t mag = em >= 0x7c00u ? special : em >= 0x400u ? normal : subnormal;
    return stridec_f32_of_bits(sign | mag);
}

/* float32 -> float16 bits, round to nearest even; a NaN keeps its sign and top 10 payload
   bits with the quiet bit set, as x86's vcvtps2ph. */
static inline uint16_t stridec_f32_to_f16(float f) {
    uint32_t w = stridec_f32_bits(f);
    uint32_t sign = (w >> 16) & 0x8000u;
    uint32_t a = w & 0x7fffffffu;
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    /* Normal: rebias the exponent by -(127 - 15) and round the 13 dropped bits to even. */
    uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    /* Below 2^-14: |f| + 0.5 rounds |f| to a multiple of 2^-24 (the float16 subnormal
       step) in the float adder; the low bits then count those steps (1024 is 2^-14). */
    uint32_t subnormal = stridec_f32_bits(stridec_f32_of_bits(a) + 0.5f) - 0x3f000000u;
    uint32_t mag = a > 0x7f800000u ? nan
                 : a >= 0x477ff000u ? 0x7c00u /* >= 65520 rounds to inf */
                 : a >= 0x38800000u ? normal
                 : subnormal;
    return (uint16_t)(sign | mag);
}

static inline float stridec_bf16_to_f32(uint16_t b) {
    return stridec_f32_of_bits((uint32_t)b << 16);
}

/* float32 -> bfloat16 bits, round to nearest even; every NaN becomes `nan`. */
static inline uint16_t stridec_f32_to_bf16(float f, uint16_t nan) {
    uint32_t w = stridec_f32_bits(f);
    uint32_t rounded = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
    return (w & 0x7fffffffu) > 0x7f800000u ? nan : (uint16_t)rounded;
}

/* float -> int32 / int64 as x86's cvtt* instructions: truncation, and the smallest
   integer for NaN and out-of-range values. C leaves those undefined, so only an in-range
   value (else 0) reaches the C conversion. */
#define STRIDEC_TRUNCATE(name, F, I, IN_RANGE, MIN) \
    static inline I name(F x) {                        \
        int ok = IN_RANGE;                             \
        I t = (I)(ok ? x : (F)0);                      \
        return ok ? t : MIN;                           \
    }
STRIDEC_TRUNCATE(stridec_f32_to_i32, float, int32_t, x >= -0x1p31f && x < 0x1p31f, INT32_MIN)
STRIDEC_TRUNCATE(stridec_f32_to_i64, float, int64_t, x >= -0x1p63f && x < 0x1p63f, INT64_MIN)
STRIDEC_TRUNCATE(stridec_f64_to_i32, double, int32_t, x > -0x1.00000002p31 && x < 0x1p31, INT32_MIN)
STRIDEC_TRUNCATE(stridec_f64_to_i64, double, int64_t, x >= -0x1p63 && x < 0x1p63, INT64_MIN)
/* float -> uint32 as torch's vector loop: values from 2^31 up convert as x - 2^31 with the
   top bit flipped back; NaN gives 0x80000000, values from 2^32 up give 0. */
static inline uint32_t stridec_f32_to_u32(float x) {
    int high = x >= 0x1p31f;
    return (uint32_t)stridec_f32_to_i32(high ? x - 0x1p31f : x) ^ (high ? 0x80000000u : 0u);
}
static inline uint32_t stridec_f64_to_u32(double x) {
    int high = x >= 0x1p31;
    return (uint32_t)stridec_f64_to_i32(high ? x - 0x1p31 : x) ^ (high ? 0x80000000u : 0u);
}
#endif
