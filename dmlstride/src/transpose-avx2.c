/* AVX2 micro-blocks for the cached tile transpose (transpose-sse2.c),
   compiled with target attributes (the library stays baseline x86-64) and
   used only when the CPU has AVX2.

   The SSE2 kernel moves 4 x 4 blocks of 4-byte values and 2 x 2 blocks of
   8-byte ones, 16 bytes per load and store.  Here a block is M x M with
   M = 32 / W (8 x 8 and 4 x 4) and every store writes 32 bytes: each
   register is loaded as two 16-byte halves, from source rows j and
   j + M / 2, so the unpacks (which work within a lane) leave destination
   row k's M values in one register, its low lane from the first M / 2
   rows and its high lane from the others.  An 8-byte block takes 8 loads,
   4 unpacks and 4 stores where the SSE2 kernel takes 8, 8 and 8; a 4-byte
   one 16, 16 and 8 where it takes 16, 32 and 16.  Measured on one thread
   against the SSE2 kernel (source rows read in place, see
   transpose-sse2.c): float64 transposes of 0.5-1 MB 1.3-1.6x faster,
   float32 ones 1.1-1.6x.

   Reads s + j * sj .. + M * W and writes d + k * dk .. + M * W for the
   rows and columns covered only.  Bit moves only: any 4- or 8-byte
   values, NaN payloads included, are copied exactly. */
#include "isa.h"

#if DMLSTRIDE_HAVE_AVX2
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* Two 16-byte halves, from p (low lane) and q (high lane). */
static inline AVX2 __m256i halves(const char *p, const char *q) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                   _mm_loadu_si128((const __m128i *)q), 1);
}

/* One 4 x 4 block of 8-byte values. */
static inline AVX2 void wide8(const char *s, int64_t sj, char *d, int64_t dk) {
    const __m256i x0 = halves(s, s + 2 * sj), x1 = halves(s + sj, s + 3 * sj);
    const __m256i x2 = halves(s + 16, s + 2 * sj + 16), x3 = halves(s + sj + 16, s + 3 * sj + 16);
    _mm256_storeu_si256((__m256i *)d, _mm256_unpacklo_epi64(x0, x1));
    _mm256_storeu_si256((__m256i *)(d + dk), _mm256_unpackhi_epi64(x0, x1));
    _mm256_storeu_si256((__m256i *)(d + 2 * dk), _mm256_unpacklo_epi64(x2, x3));
    _mm256_storeu_si256((__m256i *)(d + 3 * dk), _mm256_unpackhi_epi64(x2, x3));
}

/* One 8 x 8 block of 4-byte values: two 4-row halves of k, each a 4 x 4
   transpose per lane. */
static inline AVX2 void wide4(const char *s, int64_t sj, char *d, int64_t dk) {
    int h;
    for (h = 0; h < 2; h++) {
        const char *q = s + 16 * h;
        char *o = d + 4 * h * dk;
        const __m256i t0 = halves(q, q + 4 * sj), t1 = halves(q + sj, q + 5 * sj);
        const __m256i t2 = halves(q + 2 * sj, q + 6 * sj), t3 = halves(q + 3 * sj, q + 7 * sj);
        const __m256i a0 = _mm256_unpacklo_epi32(t0, t1), a1 = _mm256_unpackhi_epi32(t0, t1);
        const __m256i a2 = _mm256_unpacklo_epi32(t2, t3), a3 = _mm256_unpackhi_epi32(t2, t3);
        _mm256_storeu_si256((__m256i *)o, _mm256_unpacklo_epi64(a0, a2));
        _mm256_storeu_si256((__m256i *)(o + dk), _mm256_unpackhi_epi64(a0, a2));
        _mm256_storeu_si256((__m256i *)(o + 2 * dk), _mm256_unpacklo_epi64(a1, a3));
        _mm256_storeu_si256((__m256i *)(o + 3 * dk), _mm256_unpackhi_epi64(a1, a3));
    }
}

static AVX2 int64_t tile_wide_avx2(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                   int64_t nk, int64_t nj) {
    const int64_t M = W >= 4 ? 32 / W : 0;
    int64_t kw, jw, k, j;
    if (M == 0 || nj < M || nk < M) return 0;
    kw = nk - nk % M;
    jw = nj - nj % M;
    if (W == 8) {
        for (k = 0; k < kw; k += 4)
            for (j = 0; j < jw; j += 4) wide8(s + j * sj + k * 8, sj, d + k * dk + j * 8, dk);
    } else {
        for (k = 0; k < kw; k += 8)
            for (j = 0; j < jw; j += 8) wide4(s + j * sj + k * 4, sj, d + k * dk + j * 4, dk);
    }
    return kw;
}

void dmls_transpose_avx2(dmls_isa_t *t) {
    t->tile_wide = tile_wide_avx2;
}
#endif
