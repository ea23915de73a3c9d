/* float16 row conversions with the F16C instructions.  Compiled with a
   target attribute so the rest of the library stays baseline x86-64; used
   only when the CPU reports F16C (see convert_dispatch.c). */
#include "convert_half.h"

#if CONVERT_HAVE_F16C
#include <immintrin.h>

__attribute__((target("avx,f16c")))
void convert_f16_to_f32_row_f16c(const uint16_t *s, int64_t n, float *d) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = _cvtsh_ss(s[i]);
}

__attribute__((target("avx,f16c")))
void convert_f32_to_f16_row_f16c(const float *s, int64_t n, uint16_t *d) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = _cvtss_sh(s[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif
