/* Row storers: float or double to any element type.

   Integers: NaN becomes 0, the value is saturated to [lo, hi] (integers,
   so clamping before rounding gives the same result as after), then
   rounded half to even by adding and subtracting 2**23 (float) or 2**52
   (double), which is exact below those magnitudes; the compile flags
   forbid contracting or reassociating that arithmetic. */
#include <math.h>
#include <string.h>

#include "convert_half.h"
#include "convert_rows.h"

static inline float sat_f(float v, float lo, float hi) {
    v = v == v ? v : 0.0f;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    float m = copysignf(8388608.0f, v);           /* |v| <= 2**16 here */
    return (v + m) - m;
}

static inline double sat_d(double v, double lo, double hi) {
    v = v == v ? v : 0.0;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    double m = copysign(4503599627370496.0, v);   /* |v| < 2**33 here */
    return (v + m) - m;
}

static inline double rne_d(double v) {
    if (!(fabs(v) < 4503599627370496.0)) return v;   /* integral, inf or NaN */
    double m = copysign(4503599627370496.0, v);
    return (v + m) - m;
}

/* Up to 16-bit integers from float; wider ones go through double. */
#define STORE_SMALL32(name, T)                                                            \
    static void name(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,   \
                     double lo, double hi) {                                              \
        const float *x = (const float *)in;                                               \
        T *p = (T *)base + e0;                                                            \
        float l = (float)lo, h = (float)hi;                                               \
        if (stride == 1) {                                                                \
            for (int64_t i = 0; i < n; i++) p[i] = (T)(int32_t)sat_f(x[i], l, h);         \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) p[i * stride] = (T)(int32_t)sat_f(x[i], l, h); \
        }                                                                                 \
    }

#define STORE_SMALL64(name, T, I)                                                         \
    static void name(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,   \
                     double lo, double hi) {                                              \
        const double *x = (const double *)in;                                             \
        T *p = (T *)base + e0;                                                            \
        if (stride == 1) {                                                                \
            for (int64_t i = 0; i < n; i++) p[i] = (T)(I)sat_d(x[i], lo, hi);             \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) p[i * stride] = (T)(I)sat_d(x[i], lo, hi);    \
        }                                                                                 \
    }

STORE_SMALL32(store_u8_32, uint8_t)
STORE_SMALL32(store_i8_32, int8_t)
STORE_SMALL32(store_u16_32, uint16_t)
STORE_SMALL32(store_i16_32, int16_t)
STORE_SMALL64(store_u8_64, uint8_t, int32_t)
STORE_SMALL64(store_i8_64, int8_t, int32_t)
STORE_SMALL64(store_u16_64, uint16_t, int32_t)
STORE_SMALL64(store_i16_64, int16_t, int32_t)
STORE_SMALL64(store_u32_64, uint32_t, int64_t)
STORE_SMALL64(store_i32_64, int32_t, int64_t)

static inline int64_t to_i64(double v) {
    if (v != v) return 0;
    v = rne_d(v);
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

static inline uint64_t to_u64(double v) {
    if (v != v) return 0;
    v = rne_d(v);
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    if (v <= 0.0) return 0;
    return (uint64_t)v;
}

static void store_i64_64(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    (void)lo; (void)hi;
    const double *x = (const double *)in;
    int64_t *p = (int64_t *)base + e0;
    for (int64_t i = 0; i < n; i++) p[i * stride] = to_i64(x[i]);
}

static void store_u64_64(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    (void)lo; (void)hi;
    const double *x = (const double *)in;
    uint64_t *p = (uint64_t *)base + e0;
    for (int64_t i = 0; i < n; i++) p[i * stride] = to_u64(x[i]);
}

/* 4-bit: saturate like an 8-bit integer to [lo, hi], write one nibble. */
static inline void put_nibble(uint8_t *b, int64_t e, int v) {
    uint8_t *q = b + (e >> 1);
    if (e & 1) *q = (uint8_t)((*q & 0x0f) | ((v & 0xf) << 4));
    else *q = (uint8_t)((*q & 0xf0) | (v & 0xf));
}

static void store_nib_32(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    const float *x = (const float *)in;
    float l = (float)lo, h = (float)hi;
    for (int64_t i = 0; i < n; i++) put_nibble((uint8_t *)base, e0 + i * stride, (int)sat_f(x[i], l, h));
}

static void store_nib_64(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    const double *x = (const double *)in;
    for (int64_t i = 0; i < n; i++) put_nibble((uint8_t *)base, e0 + i * stride, (int)sat_d(x[i], lo, hi));
}

/* Floats. */
#define STORE_FLOAT(name, S, T)                                                           \
    static void name(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,   \
                     double lo, double hi) {                                              \
        (void)lo; (void)hi;                                                               \
        const S *x = (const S *)in;                                                       \
        T *p = (T *)base + e0;                                                            \
        if (stride == 1) {                                                                \
            for (int64_t i = 0; i < n; i++) p[i] = (T)x[i];                               \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) p[i * stride] = (T)x[i];                      \
        }                                                                                 \
    }

STORE_FLOAT(store_f32_32, float, float)
STORE_FLOAT(store_f64_32, float, double)
STORE_FLOAT(store_f32_64, double, float)
STORE_FLOAT(store_f64_64, double, double)

static void store_f16_32(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    (void)lo; (void)hi;
    uint16_t *p = (uint16_t *)base + e0;
    if (stride == 1) {
        convert_half.f32_to_f16((const float *)in, n, p);
        return;
    }
    uint16_t tmp[CONVERT_STORE_PIECE];
    for (int64_t k = 0; k < n; k += CONVERT_STORE_PIECE) {
        int64_t m = n - k < CONVERT_STORE_PIECE ? n - k : CONVERT_STORE_PIECE;
        convert_half.f32_to_f16((const float *)in + k, m, tmp);
        for (int64_t i = 0; i < m; i++) p[(k + i) * stride] = tmp[i];
    }
}

/* From double straight to float16 (one rounding, as numpy does). */
static void store_f16_64(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,
                         double lo, double hi) {
    (void)lo; (void)hi;
    const double *x = (const double *)in;
    uint16_t *p = (uint16_t *)base + e0;
    for (int64_t i = 0; i < n; i++) p[i * stride] = convert_f64_to_f16(x[i]);
}

/* Wider integers from float: widen to double (exact) and store from there. */
#define STORE_VIA64(name, target)                                                         \
    static void name(const void *in, int64_t n, char *base, int64_t e0, int64_t stride,   \
                     double lo, double hi) {                                              \
        double tmp[CONVERT_STORE_PIECE];                                                  \
        const float *x = (const float *)in;                                               \
        for (int64_t k = 0; k < n; k += CONVERT_STORE_PIECE) {                            \
            int64_t m = n - k < CONVERT_STORE_PIECE ? n - k : CONVERT_STORE_PIECE;        \
            for (int64_t i = 0; i < m; i++) tmp[i] = (double)x[k + i];                    \
            target(tmp, m, base, e0 + k * stride, stride, lo, hi);                        \
        }                                                                                 \
    }

STORE_VIA64(store_u32_32, store_u32_64)
STORE_VIA64(store_i32_32, store_i32_64)
STORE_VIA64(store_u64_32, store_u64_64)
STORE_VIA64(store_i64_32, store_i64_64)

const convert_store_fn convert_store32[CONVERT_NTYPES] = {
    0, store_f32_32, store_f16_32, store_u32_32, store_u16_32, store_u8_32, store_i32_32,
    store_i16_32, store_i8_32, store_f64_32, store_u64_32, store_i64_32, store_nib_32, store_nib_32,
};

const convert_store_fn convert_store64[CONVERT_NTYPES] = {
    0, store_f32_64, store_f16_64, store_u32_64, store_u16_64, store_u8_64, store_i32_64,
    store_i16_64, store_i8_64, store_f64_64, store_u64_64, store_i64_64, store_nib_64, store_nib_64,
};
