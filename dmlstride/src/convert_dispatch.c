/* Run-time choice of the float16 row conversions. */
#include "convert_half.h"

convert_half_ops convert_half = {convert_f16_to_f32_row_soft, convert_f32_to_f16_row_soft, 0};

static int cpu_has_f16c(void) {
#if CONVERT_HAVE_F16C
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    return 0;
#endif
}

int convert_half_select(int allow_hardware) {
#if CONVERT_HAVE_F16C
    if (allow_hardware && cpu_has_f16c()) {
        convert_half.f16_to_f32 = convert_f16_to_f32_row_f16c;
        convert_half.f32_to_f16 = convert_f32_to_f16_row_f16c;
        convert_half.hardware = 1;
        return 1;
    }
#else
    (void)cpu_has_f16c;
    (void)allow_hardware;
#endif
    convert_half.f16_to_f32 = convert_f16_to_f32_row_soft;
    convert_half.f32_to_f16 = convert_f32_to_f16_row_soft;
    convert_half.hardware = 0;
    return 0;
}

/* Interleaved channel rows. */
#include "convert_stride.h"

static int64_t u8_stride3_none(const uint8_t *p, int64_t n, float *out) {
    (void)p; (void)n; (void)out;
    return 0;
}
static int64_t f32_stride3_none(const float *p, int64_t n, float *out) {
    (void)p; (void)n; (void)out;
    return 0;
}

static int64_t u8_f32_none(const uint8_t *p, int64_t stride, int64_t n, float *out, float s, float b) {
    (void)p; (void)stride; (void)n; (void)out; (void)s; (void)b;
    return 0;
}
static int64_t u8_f16_none(const uint8_t *p, int64_t stride, int64_t n, uint16_t *out, float s, float b) {
    (void)p; (void)stride; (void)n; (void)out; (void)s; (void)b;
    return 0;
}
static int64_t f32_f32_none(const float *p, int64_t stride, int64_t n, float *out, float s, float b) {
    (void)p; (void)stride; (void)n; (void)out; (void)s; (void)b;
    return 0;
}
static int64_t f32_f16_none(const float *p, int64_t stride, int64_t n, uint16_t *out, float s, float b) {
    (void)p; (void)stride; (void)n; (void)out; (void)s; (void)b;
    return 0;
}

static int64_t dq4_f32_none(const uint8_t *q, int sign, int64_t n, float *out, const float *s,
                            const float *z, int64_t ps, int64_t div, int64_t j0) {
    (void)q; (void)sign; (void)n; (void)out; (void)s; (void)z; (void)ps; (void)div; (void)j0;
    return 0;
}
static int64_t dq4_f16_none(const uint8_t *q, int sign, int64_t n, uint16_t *out, const float *s,
                            const float *z, int64_t ps, int64_t div, int64_t j0) {
    (void)q; (void)sign; (void)n; (void)out; (void)s; (void)z; (void)ps; (void)div; (void)j0;
    return 0;
}

static const convert_stride_ops none = {u8_stride3_none, f32_stride3_none, u8_f32_none, u8_f16_none,
                                        f32_f32_none, f32_f16_none, dq4_f32_none, dq4_f16_none};

convert_stride_ops convert_stride = {u8_stride3_none, f32_stride3_none, u8_f32_none, u8_f16_none,
                                     f32_f32_none, f32_f16_none, dq4_f32_none, dq4_f16_none};

int convert_stride_select(int allow_simd) {
    convert_stride = none;
#if CONVERT_HAVE_X86_SIMD
    if (allow_simd) {
        convert_stride.f32_stride3 = convert_f32_stride3_sse2;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("ssse3")) convert_stride.u8_stride3 = convert_u8_stride3_ssse3;
        if (__builtin_cpu_supports("avx2")) {
            convert_stride.u8_f32 = convert_u8_f32_avx2;
            convert_stride.f32_f32 = convert_f32_f32_avx2;
            convert_stride.dq4_f32 = convert_dq4_f32_avx2;
            if (__builtin_cpu_supports("f16c")) {
                convert_stride.u8_f16 = convert_u8_f16_avx2;
                convert_stride.f32_f16 = convert_f32_f16_avx2;
                convert_stride.dq4_f16 = convert_dq4_f16_avx2;
            }
        }
        return 1;
    }
#else
    (void)allow_simd;
#endif
    return 0;
}
