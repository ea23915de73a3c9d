/* The SIMD row variants, chosen at run time: stride-3 channel loads
   (element i of the row at p[3 * i]) into the staging buffer, and the fused
   one-pass rows (convert_fused_avx2.c) that load, compute and store.  Each
   converts a prefix of the row and returns how many elements it did (the
   caller's staged loop does the rest); each reads only bytes of the row's
   own elements' span, p[0 .. stride * (n - 1)]. */
#ifndef DMLS_CONVERT_STRIDE_H
#define DMLS_CONVERT_STRIDE_H

#include <stdint.h>

#include "convert.h"

/* Fused rows: n elements p[i * stride] (the function's own strides only;
   others return 0) to contiguous out[i] = convert(p[i * stride] * s + b),
   in one pass.  They return the leading elements done, as above. */
typedef int64_t (*convert_fused_u8_f32)(const uint8_t *p, int64_t stride, int64_t n, float *out, float s, float b);
typedef int64_t (*convert_fused_u8_f16)(const uint8_t *p, int64_t stride, int64_t n, uint16_t *out, float s, float b);
typedef int64_t (*convert_fused_f32_f32)(const float *p, int64_t stride, int64_t n, float *out, float s, float b);
typedef int64_t (*convert_fused_f32_f16)(const float *p, int64_t stride, int64_t n, uint16_t *out, float s, float b);

/* DequantizeLinear of a contiguous 4-bit row starting on a byte: out[i] =
   (nibble i - z[k]) * s[k], k = ((j0 + i) / div) * ps (sign: INT4). */
typedef int64_t (*convert_fused_dq4_f32)(const uint8_t *q, int sign, int64_t n, float *out, const float *s,
                                         const float *z, int64_t ps, int64_t div, int64_t j0);
typedef int64_t (*convert_fused_dq4_f16)(const uint8_t *q, int sign, int64_t n, uint16_t *out, const float *s,
                                         const float *z, int64_t ps, int64_t div, int64_t j0);

typedef struct {
    int64_t (*u8_stride3)(const uint8_t *p, int64_t n, float *out);   /* SSSE3 */
    int64_t (*f32_stride3)(const float *p, int64_t n, float *out);    /* SSE2 */
    /* AVX2 (float16 outputs: and F16C): strides 1, 3, 4 from uint8, 1, 3 from float32 */
    convert_fused_u8_f32 u8_f32;
    convert_fused_u8_f16 u8_f16;
    convert_fused_f32_f32 f32_f32;
    convert_fused_f32_f16 f32_f16;
    convert_fused_dq4_f32 dq4_f32;
    convert_fused_dq4_f16 dq4_f16;
} convert_stride_ops;

extern convert_stride_ops convert_stride;

#if CONVERT_HAVE_X86 && defined(__SSE2__)
#define CONVERT_HAVE_X86_SIMD 1
int64_t convert_u8_stride3_ssse3(const uint8_t *p, int64_t n, float *out);
int64_t convert_f32_stride3_sse2(const float *p, int64_t n, float *out);
int64_t convert_u8_f32_avx2(const uint8_t *p, int64_t stride, int64_t n, float *out, float s, float b);
int64_t convert_u8_f16_avx2(const uint8_t *p, int64_t stride, int64_t n, uint16_t *out, float s, float b);
int64_t convert_f32_f32_avx2(const float *p, int64_t stride, int64_t n, float *out, float s, float b);
int64_t convert_f32_f16_avx2(const float *p, int64_t stride, int64_t n, uint16_t *out, float s, float b);
int64_t convert_dq4_f32_avx2(const uint8_t *q, int sign, int64_t n, float *out, const float *s,
                             const float *z, int64_t ps, int64_t div, int64_t j0);
int64_t convert_dq4_f16_avx2(const uint8_t *q, int sign, int64_t n, uint16_t *out, const float *s,
                             const float *z, int64_t ps, int64_t div, int64_t j0);
#else
#define CONVERT_HAVE_X86_SIMD 0
#endif

/* Choose the variants (SIMD when allowed and the CPU has it); returns 1 if
   any SIMD variant is in use. */
int convert_stride_select(int allow_simd);

#endif
