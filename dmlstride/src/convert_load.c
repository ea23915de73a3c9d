/* Row loaders: any element type to float or double. */
#include <string.h>

#include "convert_half.h"
#include "convert_rows.h"
#include "convert_stride.h"

/* Plain types: a C conversion (integers round to nearest even, as numpy's
   astype does).  Unit stride and the small strides of interleaved channels
   get their own loops, with the stride a constant the compiler can use. */
#define LOAD(name, T, C)                                                                  \
    static void name(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) { \
        const T *p = (const T *)base + e0;                                                \
        C *o = (C *)out;                                                                  \
        if (stride == 1) {                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = (C)p[i];                               \
        } else if (stride == 3) {                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = (C)p[i * 3];                           \
        } else if (stride == 4) {                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = (C)p[i * 4];                           \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = (C)p[i * stride];                      \
        }                                                                                 \
    }

#define LOADS(suffix, C)                                   \
    LOAD(load_f32_##suffix, float, C)                      \
    LOAD(load_f64_##suffix, double, C)                     \
    LOAD(load_u8_##suffix, uint8_t, C)                     \
    LOAD(load_i8_##suffix, int8_t, C)                      \
    LOAD(load_u16_##suffix, uint16_t, C)                   \
    LOAD(load_i16_##suffix, int16_t, C)                    \
    LOAD(load_u32_##suffix, uint32_t, C)                   \
    LOAD(load_i32_##suffix, int32_t, C)                    \
    LOAD(load_u64_##suffix, uint64_t, C)                   \
    LOAD(load_i64_##suffix, int64_t, C)

LOADS(32, float)
LOADS(64, double)

/* Into float, stride 3 (interleaved channels): a SIMD prefix, then the loop. */
static void load_u8_32_simd(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) {
    int64_t done = 0;
    if (stride == 3) done = convert_stride.u8_stride3((const uint8_t *)base + e0, n, (float *)out);
    load_u8_32(base, e0 + done * stride, stride, n - done, (float *)out + done);
}

static void load_f32_32_simd(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) {
    int64_t done = 0;
    if (stride == 3) done = convert_stride.f32_stride3((const float *)base + e0, n, (float *)out);
    load_f32_32(base, e0 + done * stride, stride, n - done, (float *)out + done);
}

/* 4-bit: nibbles, INT4 sign-extended. */
static inline int nibble(const uint8_t *b, int64_t e, int sign) {
    int v = (b[e >> 1] >> ((e & 1) << 2)) & 0xf;
    return sign ? (v ^ 8) - 8 : v;
}

/* Unit stride from an even element: each byte gives two elements; the
   bytes become little-endian pairs of int8/uint8 values (vectorisable),
   then values. */
static inline void unpack_pairs(const uint8_t *q, int64_t nbytes, uint16_t *pairs, int sign) {
    if (sign) {
        for (int64_t k = 0; k < nbytes; k++) {
            unsigned lo = ((unsigned)((q[k] & 0xfu) ^ 8u) - 8u) & 0xffu;
            unsigned hi = ((unsigned)((q[k] >> 4) ^ 8u) - 8u) & 0xffu;
            pairs[k] = (uint16_t)(lo | (hi << 8));
        }
    } else {
        for (int64_t k = 0; k < nbytes; k++) pairs[k] = (uint16_t)((q[k] & 0xfu) | ((unsigned)(q[k] >> 4) << 8));
    }
}

#define LOAD4(name, C, SIGN)                                                              \
    static void name(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) { \
        const uint8_t *b = (const uint8_t *)base;                                         \
        C *o = (C *)out;                                                                  \
        int64_t i = 0;                                                                    \
        if (stride == 1 && !(e0 & 1)) {                                                   \
            uint16_t pairs[CONVERT_CHUNK / 2];                                            \
            const uint8_t *q = b + (e0 >> 1);                                             \
            for (; i + 2 <= n; ) {                                                        \
                int64_t m = (n - i) / 2 < CONVERT_CHUNK / 2 ? (n - i) / 2 : CONVERT_CHUNK / 2; \
                unpack_pairs(q + i / 2, m, pairs, SIGN);                                  \
                const int8_t *sv = (const int8_t *)pairs;                                 \
                const uint8_t *uv = (const uint8_t *)pairs;                               \
                if (SIGN) for (int64_t k = 0; k < 2 * m; k++) o[i + k] = (C)sv[k];        \
                else for (int64_t k = 0; k < 2 * m; k++) o[i + k] = (C)uv[k];             \
                i += 2 * m;                                                               \
            }                                                                             \
        }                                                                                 \
        for (; i < n; i++) o[i] = (C)nibble(b, e0 + i * stride, SIGN);                    \
    }

LOAD4(load_u4_32, float, 0)
LOAD4(load_i4_32, float, 1)
LOAD4(load_u4_64, double, 0)
LOAD4(load_i4_64, double, 1)

/* float16: the dispatched row conversion (F16C or software). */
static void load_f16_32(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) {
    const uint16_t *p = (const uint16_t *)base + e0;
    if (stride == 1) {
        convert_half.f16_to_f32(p, n, (float *)out);
        return;
    }
    uint16_t tmp[CONVERT_STORE_PIECE];
    for (int64_t k = 0; k < n; k += CONVERT_STORE_PIECE) {
        int64_t m = n - k < CONVERT_STORE_PIECE ? n - k : CONVERT_STORE_PIECE;
        for (int64_t i = 0; i < m; i++) tmp[i] = p[(k + i) * stride];
        convert_half.f16_to_f32(tmp, m, (float *)out + k);
    }
}

static void load_f16_64(const char *base, int64_t e0, int64_t stride, int64_t n, void *out) {
    float tmp[CONVERT_STORE_PIECE];
    double *o = (double *)out;
    for (int64_t k = 0; k < n; k += CONVERT_STORE_PIECE) {
        int64_t m = n - k < CONVERT_STORE_PIECE ? n - k : CONVERT_STORE_PIECE;
        load_f16_32(base, e0 + k * stride, stride, m, tmp);
        for (int64_t i = 0; i < m; i++) o[k + i] = (double)tmp[i];
    }
}

const convert_load_fn convert_load32[CONVERT_NTYPES] = {
    0, load_f32_32_simd, load_f16_32, load_u32_32, load_u16_32, load_u8_32_simd, load_i32_32,
    load_i16_32, load_i8_32, load_f64_32, load_u64_32, load_i64_32, load_u4_32, load_i4_32,
};

const convert_load_fn convert_load64[CONVERT_NTYPES] = {
    0, load_f32_64, load_f16_64, load_u32_64, load_u16_64, load_u8_64, load_i32_64,
    load_i16_64, load_i8_64, load_f64_64, load_u64_64, load_i64_64, load_u4_64, load_i4_64,
};
