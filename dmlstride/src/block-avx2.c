/* AVX2 micro-block pairs for the blocked transpose (block.c), compiled with
   target attributes (the library stays baseline x86-64) and used only when
   the CPU has AVX2.

   The SSE2 micro-kernel transposes an N x N micro-block (N = 16 / W) from
   N source rows of 16 bytes.  Here each source row gives 32 bytes, the
   micro-blocks at k and at k + N side by side in the two 128-bit lanes; the
   unpack instructions work within a lane, so the same chain of stages
   transposes both, and lane 0 of result i is destination row k + i, lane 1
   row k + N + i.  Half the shuffles per byte of the SSE2 kernel, and no
   register copies (three-operand forms).  That is for 1- and 2-byte
   elements, whose micro-blocks are mostly shuffles (4 and 3 stages); for 4
   and 8 bytes (2 stages and 1) such pairs measured no faster.  Those go in
   blocks 32 bytes wide instead (micro-avx2.h), 2N x 2N, whose stores write
   32 bytes a row: scrambled 5-D and 6-D float32 / float64 / uint32
   permutations of 10-25 MB ran 1.1-1.27x faster (in-process toggle, 2
   threads), none slower.  Reads sr[j] + k * W .. + 2N * W, writes
   dr[k] + j * W .. + 2N * W, for the rows and columns given only. */
#include "isa.h"

#if DMLSTRIDE_HAVE_AVX2
#include <immintrin.h>

#include "micro-avx2.h"
#include "micro-sse2.h"   /* DMLS_STAGE, and micro-blocks for a last N columns */

#define AVX2 __attribute__((target("avx2")))

#define DMLS_PAIR(NAME, N, STAGES, RES)                                               \
static inline AVX2 void NAME(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) { \
    __m256i x[N], y[N];                                                               \
    int i;                                                                            \
    _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                                \
        x[i] = _mm256_loadu_si256((const __m256i *)(sr[i] + ko));                     \
    STAGES;                                                                           \
    _Pragma("GCC unroll 16") for (i = 0; i < (N); i++) {                              \
        _mm_storeu_si128((__m128i *)(dr[i] + jo), _mm256_castsi256_si128(RES[i]));    \
        _mm_storeu_si128((__m128i *)(dr[(N) + i] + jo), _mm256_extracti128_si256(RES[i], 1)); \
    }                                                                                 \
}
DMLS_PAIR(pair1, 16,
          DMLS_STAGE(x, y, 16, 1, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);
          DMLS_STAGE(y, x, 16, 2, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16);
          DMLS_STAGE(x, y, 16, 4, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32);
          DMLS_STAGE(y, x, 16, 8, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64), x)
DMLS_PAIR(pair2, 8,
          DMLS_STAGE(x, y, 8, 1, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16);
          DMLS_STAGE(y, x, 8, 2, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32);
          DMLS_STAGE(x, y, 8, 4, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64), y)

/* Every pair of micro-blocks in rows k < nk - nk % 2N, columns j < nj. */
#define DMLS_PAIRS(PAIR, W_) do {                                                     \
        for (k = 0; k < kp; k += 2 * (16 / (W_)))                                     \
            for (j = 0; j < nj; j += 16 / (W_))                                       \
                PAIR(sr + j, (W_) * k, dr + k, (W_) * j);                             \
    } while (0)

/* 2N x 2N blocks of 4- or 8-byte values in rows k < kp; where nj is an
   odd multiple of N, the last N columns as two SSE2 micro-blocks. */
#define SRC(i) (sr[j + (i)] + k * w_)
#define DST(i) (dr[k + (i)] + j * w_)
#define DMLS_WIDES(WIDE, MICRO, W_) do {                                              \
        const int64_t w_ = (W_);                                                      \
        for (k = 0; k < kp; k += 32 / (W_)) {                                         \
            for (j = 0; j + 32 / (W_) <= nj; j += 32 / (W_))                          \
                WIDE(SRC, DST);                                                       \
            if (j < nj) {                                                             \
                MICRO(sr + j, (W_) * k, dr + k, (W_) * j);                            \
                MICRO(sr + j, (W_) * k + 16, dr + k + 16 / (W_), (W_) * j);           \
            }                                                                         \
        }                                                                             \
    } while (0)

static AVX2 int64_t block_pairs_avx2(int W, const char *const *sr, char *const *dr, int64_t nk, int64_t nj) {
    const int64_t kp = nk - nk % (32 / W);
    int64_t k, j;
    switch (W) {
    case 1: DMLS_PAIRS(pair1, 1); return kp;
    case 2: DMLS_PAIRS(pair2, 2); return kp;
    case 4: DMLS_WIDES(DMLS_WIDE4, dmls_pmicro4, 4); return kp;
    default: DMLS_WIDES(DMLS_WIDE8, dmls_pmicro8, 8); return kp;
    }
}
#undef SRC
#undef DST

void dmls_transpose_avx2(dmls_isa_t *t);

void dmls_isa_avx2(dmls_isa_t *t) {
    t->level = DMLS_ISA_AVX2;
    t->block_pairs = block_pairs_avx2;
    dmls_transpose_avx2(t);
}
#endif
