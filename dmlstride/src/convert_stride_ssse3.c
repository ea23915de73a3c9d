/* uint8 channel rows (stride 3) to float with SSSE3's byte shuffle.  Compiled
   with a target attribute; used only when the CPU has SSSE3. */
#include "convert_stride.h"

#if CONVERT_HAVE_X86_SIMD
#include <tmmintrin.h>

__attribute__((target("ssse3")))
int64_t convert_u8_stride3_ssse3(const uint8_t *p, int64_t n, float *out) {
    const __m128i m0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i m1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i m2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i zero = _mm_setzero_si128();
    int64_t i = 0;
    /* 16 elements read p[3i .. 3i + 47]; within the row while 3i + 47 <= 3 (n - 1). */
    for (; i + 17 <= n; i += 16) {
        const uint8_t *q = p + 3 * i;
        __m128i v = _mm_or_si128(
            _mm_or_si128(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)q), m0),
                         _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 16)), m1)),
            _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 32)), m2));
        __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);
        _mm_storeu_ps(out + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, zero)));
        _mm_storeu_ps(out + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, zero)));
        _mm_storeu_ps(out + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, zero)));
        _mm_storeu_ps(out + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, zero)));
    }
    return i;
}
#endif
