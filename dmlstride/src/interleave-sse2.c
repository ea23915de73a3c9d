/* SSE2 shuffles for 3 interleaved channels of 32-bit values. */
#include "isa.h"

#if DMLSTRIDE_HAVE_SIMD
#include <emmintrin.h>

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

void dmls_interleave_sse2(dmls_isa_t *t) {
    t->deint3_32 = dmls_deint3_32;
    t->int3_32 = dmls_int3_32;
}
#endif
