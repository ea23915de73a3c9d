/* SSSE3 (pshufb) de-interleave and interleave of 3 and 5-8 byte channels, compiled
   with a function attribute and chosen at run time: the wheel's baseline
   stays SSE2. */
#include "isa.h"

#if DMLSTRIDE_HAVE_SSSE3
#include <tmmintrin.h>

#include "micro-sse2.h"   /* DMLS_WORDS8x8 */

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

/* K = 5-8 one-byte channels <-> K planes, 16 pixels a step.  Pixels 2i and
   2i + 1 of a step are one 16-byte load, shuffled (pshufb) into 16-bit
   words, word c = (channel c of pixel 2i, of pixel 2i + 1); the eight
   loads are then an 8 x 8 transpose of words (three unpack stages), after
   which register c holds channel c of the 16 pixels.  8 shuffles and 24
   unpacks for 16 pixels, where the 16 x 16 byte transpose of the wider
   channel counts (dmls_rows_short) takes 64 unpacks and 16 stores of a
   tile for the same pixels.  The inverse runs the same network on the
   planes and packs each result's two pixels into 2K bytes with one more
   shuffle. */

/* The shuffle of a pixel pair into words (byte 2c from byte c, 2c + 1
   from byte sj + c, for channels c < K), or with pack its inverse (byte c
   from 2c, K + c from 2c + 1, pixels K bytes apart). */
static __m128i dmls_pair_mask(int K, int64_t sj, int pack) {
    char m[16];
    int c;
    for (c = 0; c < 16; c++) m[c] = (char)0x80;
    for (c = 0; c < K; c++) {
        if (pack) {
            m[c] = (char)(2 * c);
            m[K + c] = (char)(2 * c + 1);
        } else {
            m[2 * c] = (char)c;
            m[2 * c + 1] = (char)(sj + c);
        }
    }
    return _mm_loadu_si128((const __m128i *)m);
}

__attribute__((target("ssse3")))
static inline void dmls_deint_step(const char *s, int64_t sj, char *d, int64_t dk, const int K, __m128i m) {
    __m128i x[8], o[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(s + 2 * i * sj)), m);
    DMLS_WORDS8x8(x, o);
    for (i = 0; i < K; i++) _mm_storeu_si128((__m128i *)(d + i * dk), o[i]);
}

__attribute__((target("ssse3")))
static int64_t dmls_deint_k_u8_ssse3(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    __m128i m;
    int64_t i = 0;
    if (K < 5 || K > 8 || sj < K || sj > 8) return 0;
    m = dmls_pair_mask(K, sj, 0);
    /* each step reads pixels i .. i + 14 (16 bytes from each even one) */
    switch (K) {
    case 5: for (; i + 16 <= n; i += 16) dmls_deint_step(s + i * sj, sj, d + i, dk, 5, m); break;
    case 6: for (; i + 16 <= n; i += 16) dmls_deint_step(s + i * sj, sj, d + i, dk, 6, m); break;
    case 7: for (; i + 16 <= n; i += 16) dmls_deint_step(s + i * sj, sj, d + i, dk, 7, m); break;
    default: for (; i + 16 <= n; i += 16) dmls_deint_step(s + i * sj, sj, d + i, dk, 8, m); break;
    }
    return i;
}

__attribute__((target("ssse3")))
static inline void dmls_int_step(const char *s, int64_t kss, char *d, const int K, __m128i m) {
    __m128i x[8], o[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = i < K ? _mm_loadu_si128((const __m128i *)(s + i * kss)) : _mm_setzero_si128();
    DMLS_WORDS8x8(x, o);
    /* ascending: each store's last 16 - 2K bytes are the next one's first */
    for (i = 0; i < 8; i++) _mm_storeu_si128((__m128i *)(d + 2 * i * K), _mm_shuffle_epi8(o[i], m));
}

__attribute__((target("ssse3")))
static int64_t dmls_int_k_u8_ssse3(const char *s, int64_t kss, char *d, int K, int64_t n) {
    __m128i m;
    int64_t i = 0;
    if (K < 5 || K > 8) return 0;
    m = dmls_pair_mask(K, K, 1);
    /* a step writes d + [i K, (i + 14) K + 16): within n K bytes while
       (i + 14) K + 16 <= n K */
    switch (K) {
    case 5: for (; (i + 14) * 5 + 16 <= n * 5; i += 16) dmls_int_step(s + i, kss, d + i * 5, 5, m); break;
    case 6: for (; (i + 14) * 6 + 16 <= n * 6; i += 16) dmls_int_step(s + i, kss, d + i * 6, 6, m); break;
    case 7: for (; (i + 14) * 7 + 16 <= n * 7; i += 16) dmls_int_step(s + i, kss, d + i * 7, 7, m); break;
    default: for (; i + 16 <= n; i += 16) dmls_int_step(s + i, kss, d + i * 8, 8, m); break;
    }
    return i;
}

void dmls_isa_ssse3(dmls_isa_t *t) {
    t->level = DMLS_ISA_SSSE3;
    t->deint3_u8 = dmls_deint3_u8_ssse3;
    t->int3_u8 = dmls_int3_u8_ssse3;
    t->deint_k_u8 = dmls_deint_k_u8_ssse3;
    t->int_k_u8 = dmls_int_k_u8_ssse3;
}
#endif
