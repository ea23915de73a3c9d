/* SSSE3 (pshufb) de-interleave and interleave of 3 byte channels, compiled
   with a function attribute and chosen at run time: the wheel's baseline
   stays SSE2. */
#include "isa.h"

#if DMLSTRIDE_HAVE_SSSE3
#include <tmmintrin.h>

/* 3-channel byte de-interleave (RGB -> planes).  Returns the number of
   pixels done (a multiple of 16); the caller finishes the rest. */
__attribute__((target("ssse3")))
static int64_t dmls_deint3_u8_ssse3(const char *s, char *d0, char *d1, char *d2, int64_t n) {
    const __m128i a0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b0 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i c0 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i a1 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i c1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i a2 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i c2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    int64_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + 3 * i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 3 * i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 3 * i + 32));
        _mm_storeu_si128((__m128i *)(d0 + i), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(a, a0), _mm_shuffle_epi8(b, b0)), _mm_shuffle_epi8(c, c0)));
        _mm_storeu_si128((__m128i *)(d1 + i), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(a, a1), _mm_shuffle_epi8(b, b1)), _mm_shuffle_epi8(c, c1)));
        _mm_storeu_si128((__m128i *)(d2 + i), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(a, a2), _mm_shuffle_epi8(b, b2)), _mm_shuffle_epi8(c, c2)));
    }
    return i;
}

/* The inverse: three byte planes -> interleaved pixels (planes -> RGB),
   16 pixels (48 bytes out) per step: each output vector gathers its bytes
   from the three planes with one shuffle each.  Returns the pixels done. */
__attribute__((target("ssse3")))
static int64_t dmls_int3_u8_ssse3(const char *s0, const char *s1, const char *s2, char *d, int64_t n) {
    const __m128i r0 = _mm_setr_epi8(0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, 5);
    const __m128i g0 = _mm_setr_epi8(-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1);
    const __m128i b0 = _mm_setr_epi8(-1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1);
    const __m128i r1 = _mm_setr_epi8(-1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10, -1);
    const __m128i g1 = _mm_setr_epi8(5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10);
    const __m128i b1 = _mm_setr_epi8(-1, 5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1);
    const __m128i r2 = _mm_setr_epi8(-1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1, -1);
    const __m128i g2 = _mm_setr_epi8(-1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1);
    const __m128i b2 = _mm_setr_epi8(10, -1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15);
    int64_t i;
    for (i = 0; i + 16 <= n; i += 16) {
        __m128i r = _mm_loadu_si128((const __m128i *)(s0 + i));
        __m128i g = _mm_loadu_si128((const __m128i *)(s1 + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s2 + i));
        _mm_storeu_si128((__m128i *)(d + 3 * i), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(r, r0), _mm_shuffle_epi8(g, g0)), _mm_shuffle_epi8(b, b0)));
        _mm_storeu_si128((__m128i *)(d + 3 * i + 16), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(r, r1), _mm_shuffle_epi8(g, g1)), _mm_shuffle_epi8(b, b1)));
        _mm_storeu_si128((__m128i *)(d + 3 * i + 32), _mm_or_si128(_mm_or_si128(
            _mm_shuffle_epi8(r, r2), _mm_shuffle_epi8(g, g2)), _mm_shuffle_epi8(b, b2)));
    }
    return i;
}

void dmls_isa_ssse3(dmls_isa_t *t) {
    t->level = DMLS_ISA_SSSE3;
    t->deint3_u8 = dmls_deint3_u8_ssse3;
    t->int3_u8 = dmls_int3_u8_ssse3;
}
#endif
