/* Fused rows with AVX2: load, convert, apply the arithmetic and store in
   one pass, for the common image rows (uint8 or float32 at element stride 1,
   3 or 4: planar rows and the interleaved channels of NHWC with C = 3 or 4,
   with scale and bias) and for 4-bit DequantizeLinear rows, into contiguous
   float32 or float16.  Compiled with target attributes (the library stays
   baseline x86-64); used only when the CPU has AVX2 (and F16C for float16
   outputs).

   Each returns how many leading elements it did; the caller's staged loop
   does the rest.  They read only the row's own elements' span,
   p[0 .. stride * (n - 1)], and write out[0 .. done - 1].  The arithmetic is
   the staged path's, bit for bit: a float32 multiply, then an add (or a
   subtract, then a multiply), never a fused multiply-add (the target has no
   FMA), then round to nearest even for float16. */
#include "convert_stride.h"

#if CONVERT_HAVE_X86_SIMD
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))
#define AVX2_F16C __attribute__((target("avx2,f16c")))

/* 16 uint8 elements at stride 1, 3 or 4 from q (bytes of the row only). */
static inline AVX2 __m128i u8x16(const uint8_t *q, int64_t stride) {
    if (stride == 1) return _mm_loadu_si128((const __m128i *)q);
    if (stride == 3) {
        const __m128i m0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m128i m1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
        const __m128i m2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
        return _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)q), m0),
                                         _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 16)), m1)),
                            _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 32)), m2));
    }
    /* stride 4: byte 0 of each 32-bit word */
    const __m128i m = _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m128i a = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)q), m);
    __m128i b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 16)), m);
    __m128i c = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 32)), m);
    __m128i d = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 48)), m);
    return _mm_unpacklo_epi64(_mm_unpacklo_epi32(a, b), _mm_unpacklo_epi32(c, d));
}

/* How many leading elements a 16-wide uint8 loop may do: the last group's
   reads end at q + 16 * stride - 1 (stride 3: 47, stride 4: 60 are the
   highest bytes used; the loads touch up to 16 * stride - 1), which must lie
   within the span p[0 .. stride * (n - 1)]. */
static inline int64_t u8_groups_end(int64_t stride, int64_t n) {
    /* need 16 * i_last + 16 * stride - 1 <= stride * (n - 1) for the group at i_last */
    int64_t span = stride * (n - 1) + 1;                 /* bytes in the row's span */
    int64_t reach = 16 * stride;                         /* bytes a group's loads touch */
    if (span < reach) return 0;
    /* the group starting at element i touches bytes stride*i .. stride*i + reach - 1 */
    return ((span - reach) / stride / 16 + 1) * 16;
}

static inline AVX2 __m256 affine(__m256 x, __m256 s, __m256 b) {
    return _mm256_add_ps(_mm256_mul_ps(x, s), b);
}

#define STORE_F32(p, v) _mm256_storeu_ps((p), (v))
#define STORE_F16(p, v) _mm_storeu_si128((__m128i *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))

#define U8_ROW(name, T, TARGET, STORE)                                                        \
    TARGET int64_t name(const uint8_t *p, int64_t stride, int64_t n, T *out, float s, float b) { \
        if (stride != 1 && stride != 3 && stride != 4) return 0;                              \
        const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(b);                          \
        int64_t end = u8_groups_end(stride, n);                                               \
        for (int64_t i = 0; i < end; i += 16) {                                               \
            __m128i v = u8x16(p + stride * i, stride);                                        \
            __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));                          \
            __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));       \
            STORE(out + i, affine(lo, vs, vb));                                               \
            STORE(out + i + 8, affine(hi, vs, vb));                                           \
        }                                                                                     \
        return end;                                                                           \
    }

U8_ROW(convert_u8_f32_avx2, float, AVX2, STORE_F32)
U8_ROW(convert_u8_f16_avx2, uint16_t, AVX2_F16C, STORE_F16)

/* 8 float32 elements at stride 1 or 3 from q. */
static inline AVX2 __m256 f32x8(const float *q, int64_t stride) {
    if (stride == 1) return _mm256_loadu_ps(q);
    /* element k of the row is q[3k]: k = 0, 1, 2 in a (0, 3, 6), 3, 4, 5 in b
       (lanes 1, 4, 7), 6, 7 in c (lanes 2, 5) */
    __m256 a = _mm256_loadu_ps(q), b = _mm256_loadu_ps(q + 8), c = _mm256_loadu_ps(q + 16);
    __m256 v = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x92), c, 0x24);
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5));
}

/* As u8_groups_end, for 8-wide float32 groups (reads in elements of 4 bytes). */
static inline int64_t f32_groups_end(int64_t stride, int64_t n) {
    int64_t span = stride * (n - 1) + 1, reach = 8 * stride;
    if (span < reach) return 0;
    return ((span - reach) / stride / 8 + 1) * 8;
}

#define F32_ROW(name, T, TARGET, STORE)                                                       \
    TARGET int64_t name(const float *p, int64_t stride, int64_t n, T *out, float s, float b) { \
        if (stride != 1 && stride != 3) return 0;                                             \
        const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(b);                          \
        int64_t end = f32_groups_end(stride, n);                                              \
        for (int64_t i = 0; i < end; i += 8) STORE(out + i, affine(f32x8(p + stride * i, stride), vs, vb)); \
        return end;                                                                           \
    }

F32_ROW(convert_f32_f32_avx2, float, AVX2, STORE_F32)
F32_ROW(convert_f32_f16_avx2, uint16_t, AVX2_F16C, STORE_F16)

/* 32 4-bit elements (16 bytes, low nibble first) as four vectors of 8
   float32 values, INT4 sign-extended when sign is set. */
static inline AVX2 void nibbles32(const uint8_t *q, int sign, __m256 x[4]) {
    const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    __m128i v = _mm_loadu_si128((const __m128i *)q);
    __m128i lo = _mm_and_si128(v, low), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
    __m128i a = _mm_unpacklo_epi8(lo, hi), b = _mm_unpackhi_epi8(lo, hi);   /* elements 0-15, 16-31 */
    if (sign) {
        a = _mm_sub_epi8(_mm_xor_si128(a, eight), eight);
        b = _mm_sub_epi8(_mm_xor_si128(b, eight), eight);
        x[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(a));
        x[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(a, 8)));
        x[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        x[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
    } else {
        x[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(a));
        x[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(a, 8)));
        x[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
        x[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
    }
}

/* DequantizeLinear of a contiguous 4-bit row: element i is nibble i of q
   (the row starts on a byte), parameters s[k * ps], z[k * ps] for element i
   in block k = (j0 + i) / div.  Groups of 32 elements, each inside one block
   (ps == 0, or div a multiple of 32 and j0 a multiple of 32; otherwise
   nothing is done). */
#define DEQUANT4(name, T, TARGET, STORE)                                                      \
    TARGET int64_t name(const uint8_t *q, int sign, int64_t n, T *out, const float *s,        \
                        const float *z, int64_t ps, int64_t div, int64_t j0) {                \
        if (ps != 0 && (div % 32 != 0 || j0 % 32 != 0)) return 0;                             \
        int64_t i = 0;                                                                        \
        for (; i + 32 <= n; i += 32) {                                                        \
            int64_t k = ps != 0 ? ((j0 + i) / div) * ps : 0;                                  \
            const __m256 vs = _mm256_set1_ps(s[k]), vz = _mm256_set1_ps(z[k]);                \
            __m256 x[4];                                                                      \
            nibbles32(q + i / 2, sign, x);                                                    \
            for (int g = 0; g < 4; g++) STORE(out + i + 8 * g, _mm256_mul_ps(_mm256_sub_ps(x[g], vz), vs)); \
        }                                                                                     \
        return i;                                                                             \
    }

DEQUANT4(convert_dq4_f32_avx2, float, AVX2, STORE_F32)
DEQUANT4(convert_dq4_f16_avx2, uint16_t, AVX2_F16C, STORE_F16)
#endif
