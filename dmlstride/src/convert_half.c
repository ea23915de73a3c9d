/* Bit-exact software float16 conversions (IEEE 754 binary16). */
#include "convert_half.h"

#include <string.h>

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint64_t f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

/* m >> shift, rounded to nearest even (a subnormal float16's significand). */
static uint16_t shift_round(uint64_t m, unsigned shift) {
    uint64_t k = m >> shift, rem = m & ((1ull << shift) - 1u), half = 1ull << (shift - 1u);
    if (rem > half || (rem == half && (k & 1u))) k++;
    return (uint16_t)k;
}

uint16_t convert_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) {                       /* inf or NaN */
        if (a == 0x7f800000u) return sign | 0x7c00u;
        uint16_t h = (uint16_t)(0x7c00u | ((a >> 13) & 0x3ffu));
        return sign | (h == 0x7c00u ? 0x7c01u : h);
    }
    if (a >= 0x477ff000u) return sign | 0x7c00u;   /* >= 65520 rounds to inf */
    if (a < 0x38800000u) {                        /* below 2**-14: subnormal or zero */
        if (a <= 0x33000000u) return sign;        /* <= 2**-25: ties to zero */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        return sign | shift_round(m, 126u - e);   /* shift 14 .. 24 */
    }
    uint32_t r = a - 0x38000000u;                 /* rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);               /* round to nearest even */
    return sign | (uint16_t)(r >> 13);
}

uint16_t convert_f64_to_f16(double d) {
    uint64_t u = f64_bits(d);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
    uint64_t a = u & 0x7fffffffffffffffull;
    if (a >= 0x7ff0000000000000ull) {
        if (a == 0x7ff0000000000000ull) return sign | 0x7c00u;
        uint16_t h = (uint16_t)(0x7c00u | ((a >> 42) & 0x3ffu));
        return sign | (h == 0x7c00u ? 0x7c01u : h);
    }
    if (a >= 0x40effe0000000000ull) return sign | 0x7c00u;   /* >= 65520 */
    if (a < 0x3f10000000000000ull) {                         /* below 2**-14 */
        if (a <= 0x3e60000000000000ull) return sign;         /* <= 2**-25 */
        uint64_t e = a >> 52, m = (a & 0xfffffffffffffull) | 0x10000000000000ull;
        return sign | shift_round(m, (unsigned)(1051u - e));   /* shift 43 .. 53 */
    }
    uint64_t r = a - 0x3f00000000000000ull;                  /* rebias 1023 -> 15 */
    r += 0x1ffffffffffull + ((r >> 42) & 1u);
    return sign | (uint16_t)(r >> 42);
}

float convert_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1fu) {
        u = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        u = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        u = sign;
    } else {                                      /* subnormal: normalise */
        uint32_t ee = 113u;
        while (!(m & 0x400u)) { m <<= 1; ee--; }
        u = sign | (ee << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void convert_f16_to_f32_row_soft(const uint16_t *s, int64_t n, float *d) {
    for (int64_t i = 0; i < n; i++) d[i] = convert_f16_to_f32(s[i]);
}

void convert_f32_to_f16_row_soft(const float *s, int64_t n, uint16_t *d) {
    for (int64_t i = 0; i < n; i++) d[i] = convert_f32_to_f16(s[i]);
}
