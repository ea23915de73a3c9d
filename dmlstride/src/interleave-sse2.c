/* SSE2 shuffles for 3 interleaved channels of 32-bit values and 3-7 of
   16-bit ones, and for 2 or 4 of one byte and 2 of two into planes. */
#include "isa.h"

#if DMLSTRIDE_HAVE_SIMD
#include <emmintrin.h>

#include "micro-sse2.h"   /* DMLS_WORDS8x8 */

/* 3-channel 32-bit de-interleave (RGB float32 -> planes), SSE2 shuffles:
   four pixels (three vectors) per step.  Returns the pixels done. */
static int64_t dmls_deint3_32(const char *s, char *d0, char *d1, char *d2, int64_t n) {
    int64_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __m128 a = _mm_loadu_ps((const float *)(s + 12 * i));       /* r0 g0 b0 r1 */
        __m128 b = _mm_loadu_ps((const float *)(s + 12 * i + 16));  /* g1 b1 r2 g2 */
        __m128 c = _mm_loadu_ps((const float *)(s + 12 * i + 32));  /* b2 r3 g3 b3 */
        __m128 u = _mm_shuffle_ps(b, c, _MM_SHUFFLE(2, 1, 3, 2));   /* r2 g2 r3 g3 */
        __m128 v = _mm_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 3, 0));   /* r0 r1 g1 b1 */
        __m128 x = _mm_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 2, 1));   /* g0 b0 g1 b1 */
        __m128 y = _mm_shuffle_ps(c, c, _MM_SHUFFLE(3, 0, 3, 0));   /* b2 b3 b2 b3 */
        _mm_storeu_ps((float *)(d0 + 4 * i), _mm_shuffle_ps(v, u, _MM_SHUFFLE(2, 0, 1, 0)));
        _mm_storeu_ps((float *)(d1 + 4 * i), _mm_shuffle_ps(x, u, _MM_SHUFFLE(3, 1, 2, 0)));
        _mm_storeu_ps((float *)(d2 + 4 * i), _mm_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 3, 1)));
    }
    return i;
}

/* The inverse: three 32-bit planes -> interleaved pixels. */
static int64_t dmls_int3_32(const char *s0, const char *s1, const char *s2, char *d, int64_t n) {
    int64_t i;
    for (i = 0; i + 4 <= n; i += 4) {
        __m128 r = _mm_loadu_ps((const float *)(s0 + 4 * i));
        __m128 g = _mm_loadu_ps((const float *)(s1 + 4 * i));
        __m128 b = _mm_loadu_ps((const float *)(s2 + 4 * i));
        __m128 p = _mm_shuffle_ps(r, g, _MM_SHUFFLE(2, 0, 2, 0));   /* r0 r2 g0 g2 */
        __m128 q = _mm_shuffle_ps(b, r, _MM_SHUFFLE(3, 1, 2, 0));   /* b0 b2 r1 r3 */
        __m128 t = _mm_shuffle_ps(g, b, _MM_SHUFFLE(3, 1, 3, 1));   /* g1 g3 b1 b3 */
        _mm_storeu_ps((float *)(d + 12 * i), _mm_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0)));
        _mm_storeu_ps((float *)(d + 12 * i + 16), _mm_shuffle_ps(t, p, _MM_SHUFFLE(3, 1, 2, 0)));
        _mm_storeu_ps((float *)(d + 12 * i + 32), _mm_shuffle_ps(q, t, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    return i;
}

/* K = 3-7 two-byte channels <-> K planes, 8 pixels a step: a 16-byte load
   from each pixel holds its channels as words 0 .. K - 1 (and the next
   pixel's first ones past them), and an 8 x 8 transpose of words (three
   unpack stages) leaves channel c of the 8 pixels in register c.  The
   inverse transposes 16 bytes of each plane into a register a pixel and
   stores each one 2K bytes after the last (its last 16 - 2K bytes are the
   next one's first).  24 unpacks for 8 pixels, where element by element
   took a load and a store per value. */

static inline void dmls_deint16_step(const char *s, int64_t sj, char *d, int64_t dk, const int K) {
    __m128i x[8], o[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = _mm_loadu_si128((const __m128i *)(s + i * sj));
    DMLS_WORDS8x8(x, o);
    for (i = 0; i < K; i++) _mm_storeu_si128((__m128i *)(d + i * dk), o[i]);
}

static int64_t dmls_deint_k_16(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    int64_t i = 0;
    if (K < 3 || K > 7 || sj < 2 * K) return 0;
    switch (K) {
    case 3: for (; i + 8 <= n; i += 8) dmls_deint16_step(s + i * sj, sj, d + 2 * i, dk, 3); break;
    case 4: for (; i + 8 <= n; i += 8) dmls_deint16_step(s + i * sj, sj, d + 2 * i, dk, 4); break;
    case 5: for (; i + 8 <= n; i += 8) dmls_deint16_step(s + i * sj, sj, d + 2 * i, dk, 5); break;
    case 6: for (; i + 8 <= n; i += 8) dmls_deint16_step(s + i * sj, sj, d + 2 * i, dk, 6); break;
    default: for (; i + 8 <= n; i += 8) dmls_deint16_step(s + i * sj, sj, d + 2 * i, dk, 7); break;
    }
    return i;
}

static inline void dmls_int16_step(const char *s, int64_t kss, char *d, const int K) {
    __m128i x[8], o[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = i < K ? _mm_loadu_si128((const __m128i *)(s + i * kss)) : _mm_setzero_si128();
    DMLS_WORDS8x8(x, o);
    for (i = 0; i < 8; i++) _mm_storeu_si128((__m128i *)(d + 2 * i * K), o[i]);
}

static int64_t dmls_int_k_16(const char *s, int64_t kss, char *d, int K, int64_t n) {
    int64_t i = 0;
    if (K < 3 || K > 7) return 0;
    /* a step writes d + [2iK, 2(i + 7)K + 16), within the 2nK bytes */
    switch (K) {
    case 3: for (; (i + 7) * 6 + 16 <= n * 6; i += 8) dmls_int16_step(s + 2 * i, kss, d + i * 6, 3); break;
    case 4: for (; (i + 7) * 8 + 16 <= n * 8; i += 8) dmls_int16_step(s + 2 * i, kss, d + i * 8, 4); break;
    case 5: for (; (i + 7) * 10 + 16 <= n * 10; i += 8) dmls_int16_step(s + 2 * i, kss, d + i * 10, 5); break;
    case 6: for (; (i + 7) * 12 + 16 <= n * 12; i += 8) dmls_int16_step(s + 2 * i, kss, d + i * 12, 6); break;
    default: for (; (i + 7) * 14 + 16 <= n * 14; i += 8) dmls_int16_step(s + 2 * i, kss, d + i * 14, 7); break;
    }
    return i;
}

/* Two or four one-byte channels, or two two-byte ones, into planes
   (dmls_isa_t.deint_small): the even and odd values of each 16-bit (or
   32-bit) word split by masks and shifts and packed back together, twice
   for four channels.  The two-byte values are sign-extended into 32-bit
   lanes and packed with signed saturation, which gives back each 16-bit
   value exactly.  Element by element, a 2 x 29 uint8 tile (a scatter of
   58-byte tasks) cost about 8 instructions a byte. */
static int64_t dmls_deint_small(int W, int K, const char *s, char *d, int64_t dk, int64_t n) {
    const __m128i lo8 = _mm_set1_epi16(0x00ff);
    const int64_t step = W == 1 ? 16 : 8;
    int64_t j = 0, jb;
    if ((W == 1 && K != 2 && K != 4) || (W == 2 && K != 2) || W > 2 || n < step)
        return 0;
    for (;;) {
        jb = j + step <= n ? j : n - step;
        if (W == 2) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + 4 * jb));
            const __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(s + 4 * jb + 16));
            _mm_storeu_si128((__m128i *)(void *)(d + 2 * jb),
                             _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(x, 16), 16),
                                             _mm_srai_epi32(_mm_slli_epi32(y, 16), 16)));
            _mm_storeu_si128((__m128i *)(void *)(d + dk + 2 * jb),
                             _mm_packs_epi32(_mm_srai_epi32(x, 16), _mm_srai_epi32(y, 16)));
        } else if (K == 2) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + 2 * jb));
            const __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(s + 2 * jb + 16));
            _mm_storeu_si128((__m128i *)(void *)(d + jb),
                             _mm_packus_epi16(_mm_and_si128(x, lo8), _mm_and_si128(y, lo8)));
            _mm_storeu_si128((__m128i *)(void *)(d + dk + jb),
                             _mm_packus_epi16(_mm_srli_epi16(x, 8), _mm_srli_epi16(y, 8)));
        } else {
            const char *p = s + 4 * jb;
            const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
            const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
            const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
            const __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
            /* channels 0 and 2, and 1 and 3, of pixels 0-7 and of 8-15 */
            const __m128i e0 = _mm_packus_epi16(_mm_and_si128(a, lo8), _mm_and_si128(b, lo8));
            const __m128i e1 = _mm_packus_epi16(_mm_and_si128(c, lo8), _mm_and_si128(e, lo8));
            const __m128i o0 = _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
            const __m128i o1 = _mm_packus_epi16(_mm_srli_epi16(c, 8), _mm_srli_epi16(e, 8));
            _mm_storeu_si128((__m128i *)(void *)(d + jb),
                             _mm_packus_epi16(_mm_and_si128(e0, lo8), _mm_and_si128(e1, lo8)));
            _mm_storeu_si128((__m128i *)(void *)(d + 2 * dk + jb),
                             _mm_packus_epi16(_mm_srli_epi16(e0, 8), _mm_srli_epi16(e1, 8)));
            _mm_storeu_si128((__m128i *)(void *)(d + dk + jb),
                             _mm_packus_epi16(_mm_and_si128(o0, lo8), _mm_and_si128(o1, lo8)));
            _mm_storeu_si128((__m128i *)(void *)(d + 3 * dk + jb),
                             _mm_packus_epi16(_mm_srli_epi16(o0, 8), _mm_srli_epi16(o1, 8)));
        }
        j += step;
        if (j >= n) break;
    }
    return n;
}

void dmls_interleave_sse2(dmls_isa_t *t) {
    t->deint3_32 = dmls_deint3_32;
    t->int3_32 = dmls_int3_32;
    t->deint_k_16 = dmls_deint_k_16;
    t->int_k_16 = dmls_int_k_16;
    t->deint_small = dmls_deint_small;
}
#endif
