/* AVX2 fills for broadcasts along the last dimension (dmls_isa.fill_rows),
   compiled with target attributes (the library stays baseline x86-64) and
   used only when the CPU has AVX2: 32-byte stores, half the stores of the
   SSE2 loop, and a run of rows with fixed strides at a time, without the
   executor's odometer between rows.  Eight rows' values are loaded before
   their stores, as the SSE2 loop does (a value loaded just before its
   row's stores waited on the stores before it). */
#include "isa.h"

#if DMLSTRIDE_HAVE_AVX2
#include <immintrin.h>

#include "copy-short.h"   /* dmls_splat */

#define AVX2 __attribute__((target("avx2")))

/* The w-byte value at s in every lane (dmls_splat's, in both halves). */
static inline AVX2 __m256i splat32(const char *s, int w) {
    return _mm256_broadcastsi128_si256(dmls_splat(s, w));
}

/* n bytes (n >= 16) of the pattern v: 32-byte stores, the last one
   overlapping the one before (32 being a multiple of the width keeps the
   values in step); under 32 bytes, two 16-byte ones. */
static inline AVX2 void fill32(char *d, __m256i v, int64_t n) {
    int64_t i;
    if (n < 32) {
        const __m128i h = _mm256_castsi256_si128(v);
        _mm_storeu_si128((__m128i *)(void *)d, h);
        _mm_storeu_si128((__m128i *)(void *)(d + n - 16), h);
        return;
    }
    for (i = 0; i + 32 < n; i += 32) _mm256_storeu_si256((__m256i *)(void *)(d + i), v);
    _mm256_storeu_si256((__m256i *)(void *)(d + n - 32), v);
}

static AVX2 int64_t fill_rows_avx2(char *d, const char *s, int w, int64_t n, int64_t rows, int64_t sstep,
                                   int64_t dstep) {
    __m256i v[8];
    int64_t r, q, m;
    for (r = 0; r < rows; r += m) {
        m = rows - r < 8 ? rows - r : 8;
        for (q = 0; q < m; q++) v[q] = splat32(s + (r + q) * sstep, w);
        for (q = 0; q < m; q++) fill32(d + (r + q) * dstep, v[q], n);
    }
    return rows;
}

void dmls_fill_avx2(dmls_isa_t *t) {
    t->fill_rows = fill_rows_avx2;
}
#endif
