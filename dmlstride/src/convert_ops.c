/* Scale and bias, QuantizeLinear and DequantizeLinear on staged values.
   Compiled without contraction: a multiply then an add, never an FMA. */
#include "convert.h"
#include "convert_ops.h"

#include <math.h>

/* Round half to even; |v| >= 2**23 is already integral (or inf): adding
   and subtracting 2**23 (with v's sign) leaves it unchanged there too. */
static inline float rne_f(float v) {
    float m = fabsf(v) < 8388608.0f ? copysignf(8388608.0f, v) : 0.0f;
    return (v + m) - m;
}

/* Parameters come as one value (step 0) or one per element (step 1); scale
   and shift always share the step (they share their indexing). */
#define AFFINE(T, x, n, s, ss, b)                                                 \
    do {                                                                          \
        if (!(ss)) {                                                              \
            T s0 = (s)[0], b0 = (b)[0];                                           \
            for (int64_t i = 0; i < (n); i++) { T t = (x)[i] * s0; (x)[i] = t + b0; } \
        } else {                                                                  \
            for (int64_t i = 0; i < (n); i++) { T t = (x)[i] * (s)[i]; (x)[i] = t + (b)[i]; } \
        }                                                                         \
    } while (0)

void convert_op64(double *x, int64_t n, const double *scale, int scale_step,
                  const double *shift, int shift_step) {
    (void)shift_step;
    AFFINE(double, x, n, scale, scale_step, shift);
}

static void quantize(float *x, int64_t n, const float *s, int ss, const float *z) {
    if (!ss) {
        float s0 = s[0], z0 = z[0];
        for (int64_t i = 0; i < n; i++) {
            float t = x[i] / s0;
            t = t == t ? t : 0.0f;              /* NaN quantizes to the zero point */
            x[i] = rne_f(t) + z0;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float t = x[i] / s[i];
        t = t == t ? t : 0.0f;
        x[i] = rne_f(t) + z[i];
    }
}

static void dequantize(float *x, int64_t n, const float *s, int ss, const float *z) {
    if (!ss) {
        float s0 = s[0], z0 = z[0];
        for (int64_t i = 0; i < n; i++) { float t = x[i] - z0; x[i] = t * s0; }
        return;
    }
    for (int64_t i = 0; i < n; i++) { float t = x[i] - z[i]; x[i] = t * s[i]; }
}

void convert_op32(int op, float *x, int64_t n, const float *scale, int scale_step,
                  const float *shift, int shift_step) {
    (void)shift_step;
    switch (op) {
    case CONVERT_OP_QUANTIZE: quantize(x, n, scale, scale_step, shift); break;
    case CONVERT_OP_DEQUANTIZE: dequantize(x, n, scale, scale_step, shift); break;
    default: AFFINE(float, x, n, scale, scale_step, shift); break;
    }
}
