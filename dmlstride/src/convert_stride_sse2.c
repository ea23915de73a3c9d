/* float channel rows (stride 3) with SSE2 shuffles (x86-64's baseline). */
#include "convert_stride.h"

#if CONVERT_HAVE_X86_SIMD
#include <emmintrin.h>

int64_t convert_f32_stride3_sse2(const float *p, int64_t n, float *out) {
    int64_t i = 0;
    /* 4 elements read p[3i .. 3i + 11]; within the row while 3i + 11 <= 3 (n - 1). */
    for (; i + 5 <= n; i += 4) {
        const float *q = p + 3 * i;
        __m128 a = _mm_loadu_ps(q), b = _mm_loadu_ps(q + 4), c = _mm_loadu_ps(q + 8);
        __m128 t1 = _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 2, 3, 0));   /* a0 a3 b2 b2 */
        __m128 t2 = _mm_shuffle_ps(b, c, _MM_SHUFFLE(1, 1, 2, 2));   /* b2 b2 c1 c1 */
        _mm_storeu_ps(out + i, _mm_shuffle_ps(t1, t2, _MM_SHUFFLE(2, 0, 1, 0)));
    }
    return i;
}
#endif
