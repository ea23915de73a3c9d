/* Scale and bias, QuantizeLinear and DequantizeLinear on staged values.
   Compiled without contraction: a multiply then an add, never an FMA. */
#include "convert.h"
#include "convert_ops.h"

#include <math.h>

/* Round half to even; |v| >= 2**23 is already integral (or inf). */
static inline float rne_f(float v) {
    if (!(fabsf(v) < 8388608.0f)) return v;
    float m = copysignf(8388608.0f, v);
    return (v + m) - m;
}

#define AFFINE(T, x, n, s, ss, b, bs)                                              \
    do {                                                                           \
        if (!(ss) && !(bs)) {                                                      \
            T s0 = (s)[0], b0 = (b)[0];                                            \
            for (int64_t i = 0; i < (n); i++) { T t = (x)[i] * s0; (x)[i] = t + b0; } \
        } else {                                                                   \
            for (int64_t i = 0; i < (n); i++) {                                    \
                T t = (x)[i] * (s)[i * (ss)];                                      \
                (x)[i] = t + (b)[i * (bs)];                                        \
            }                                                                      \
        }                                                                          \
    } while (0)

void convert_op64(double *x, int64_t n, const double *scale, int scale_step,
                  const double *shift, int shift_step) {
    AFFINE(double, x, n, scale, scale_step, shift, shift_step);
}

static void quantize(float *x, int64_t n, const float *s, int ss, const float *z, int zs) {
    for (int64_t i = 0; i < n; i++) {
        float t = x[i] / s[i * ss];
        t = t == t ? t : 0.0f;                  /* NaN quantizes to the zero point */
        x[i] = rne_f(t) + z[i * zs];
    }
}

static void dequantize(float *x, int64_t n, const float *s, int ss, const float *z, int zs) {
    if (!ss && !zs) {
        float s0 = s[0], z0 = z[0];
        for (int64_t i = 0; i < n; i++) { float t = x[i] - z0; x[i] = t * s0; }
        return;
    }
    for (int64_t i = 0; i < n; i++) { float t = x[i] - z[i * zs]; x[i] = t * s[i * ss]; }
}

void convert_op32(int op, float *x, int64_t n, const float *scale, int scale_step,
                  const float *shift, int shift_step) {
    switch (op) {
    case CONVERT_OP_QUANTIZE: quantize(x, n, scale, scale_step, shift, shift_step); break;
    case CONVERT_OP_DEQUANTIZE: dequantize(x, n, scale, scale_step, shift, shift_step); break;
    default: AFFINE(float, x, n, scale, scale_step, shift, shift_step); break;
    }
}
