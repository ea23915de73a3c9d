/* AVX2 blocks for the blocked transpose (block.c), compiled with target
   attributes (the library stays baseline x86-64) and used only when the
   CPU has AVX2: the register transposes of micro-avx2.h through one
   pointer per row.  1- and 2-byte values go as pairs of micro-blocks, half
   the shuffles per byte of the SSE2 kernel.  4- and 8-byte values, whose
   micro-blocks are few shuffles (2 stages and 1), gained nothing as pairs;
   they go in 2N x 2N blocks whose stores write 32 bytes a row: scrambled
   5-D and 6-D float32 / float64 / uint32 permutations of 10-25 MB ran
   1.1-1.27x faster (in-process toggle, 2 threads), none slower.  Reads
   sr[j] + k * W .. + 2N * W, writes dr[k] + j * W .. + 2N * W, for the rows
   and columns given only. */
#include "isa.h"

#if DMLSTRIDE_HAVE_AVX2
#include <immintrin.h>
#include <string.h>

#include "micro-avx2.h"
#include "micro-sse2.h"   /* micro-blocks for a last N columns */

#define AVX2 __attribute__((target("avx2")))

/* The blocks through one pointer per row: sr[i] + ko is source row i at
   the block's first k, dr[i] + jo destination row i at its first j. */
#define SRC(i) (sr[i] + ko)
#define DST(i) (dr[i] + jo)
#define DMLS_PTR_BLOCK(NAME, BLOCK)                                                    \
static inline AVX2 void NAME(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) { \
    BLOCK(SRC, DST);                                                                   \
}
DMLS_PTR_BLOCK(pair1, DMLS_PAIR1)
DMLS_PTR_BLOCK(pair1_in_order, DMLS_PAIR1_IN_ORDER)
DMLS_PTR_BLOCK(pair2, DMLS_PAIR2)
DMLS_PTR_BLOCK(jpair1, DMLS_JPAIR1)
DMLS_PTR_BLOCK(jpair2, DMLS_JPAIR2)
DMLS_PTR_BLOCK(wide4, DMLS_WIDE4)
DMLS_PTR_BLOCK(wide8, DMLS_WIDE8)
#undef SRC
#undef DST

/* Every pair of micro-blocks in rows k < nk - nk % 2N, columns j < nj. */
#define DMLS_PAIRS(PAIR, W_) do {                                                     \
        for (k = 0; k < kp; k += 2 * (16 / (W_)))                                     \
            for (j = 0; j < nj; j += 16 / (W_))                                       \
                PAIR(sr + j, (W_) * k, dr + k, (W_) * j);                             \
    } while (0)

/* 2N x 2N blocks of 4- or 8-byte values in rows k < kp; where nj is an
   odd multiple of N, the last N columns as two SSE2 micro-blocks. */
#define DMLS_WIDES(WIDE, MICRO, W_) do {                                              \
        for (k = 0; k < kp; k += 32 / (W_)) {                                         \
            for (j = 0; j + 32 / (W_) <= nj; j += 32 / (W_))                          \
                WIDE(sr + j, (W_) * k, dr + k, (W_) * j);                             \
            if (j < nj) {                                                             \
                MICRO(sr + j, (W_) * k, dr + k, (W_) * j);                            \
                MICRO(sr + j, (W_) * k + 16, dr + k + 16 / (W_), (W_) * j);           \
            }                                                                         \
        }                                                                             \
    } while (0)

/* Every band of N rows (nk a multiple of N; one band where nk = N) as
   pairs side by side in j, 2N columns a pair; where nj is an odd multiple
   of N, the last N columns of each band as one SSE2 micro-block. */
#define DMLS_JPAIR_BANDS(JPAIR, MICRO, W_) do {                                       \
        for (k = 0; k < nk; k += 16 / (W_)) {                                         \
            for (j = 0; j + 32 / (W_) <= nj; j += 32 / (W_))                          \
                JPAIR(sr + j, (W_) * k, dr + k, (W_) * j);                            \
            if (j < nj) MICRO(sr + j, (W_) * k, dr + k, (W_) * j);                    \
        }                                                                             \
    } while (0)

/* Returns the rows of k done: all of them for 4- and 8-byte values and for
   a band of exactly one micro-block row (nk = N, source runs of N to
   2N - 1 values), else nk - nk % 2N.  nk and nj are multiples of N.  A
   band of one micro-block row, which pairs one above the other leave to
   the SSE2 kernel, goes as pairs side by side in j: in one process on the
   same buffers, alternating in an order shuffled every round (2 threads,
   5 rounds), 16 unnamed 5-D and 6-D uint8, int16 and float16 permutations
   of 3-62 MB whose blocks have source runs of 16-31 bytes ran 1.13x
   faster by geometric mean (1.16x against a control of the old kernel
   against itself of 1.02x; one-byte gathers and scatters of 16-62 MB up
   to 1.4-1.6x, 0.25 -> 0.45 of the memcpy limit); a fresh 18 of 2-58 MB
   1.19x (0.98-1.79x; control 1.00x, 0.47 -> 0.56 of the limit).  Longer
   bands whose last tile is such a row measured 1.01x (14, control 1.01x);
   the last such row of longer bands, left after pairs one above the
   other, 0.98x (16 of 15-60 MB), and stays with the SSE2 kernel.
   Two-byte values with 16 columns or more go as pairs side by side in j
   in every band (all nk rows done): each destination row is one 32-byte
   store a pair, not two 16-byte halves.  In one process, alternating (2
   threads, 8 rounds, two runs), 14 unnamed int16 and float16 block
   permutations of 7-57 MB ran 1.06x faster by geometric mean (0.93-1.27x);
   uint8 ones measured 0.99x (0.82-1.12x over 10) and keep the pairs one
   above the other. */
static AVX2 int64_t block_pairs_avx2(int W, const char *const *sr, char *const *dr, int64_t nk, int64_t nj) {
    const int64_t kp = nk - nk % (32 / W);
    int64_t k, j;
    switch (W) {
    case 1:
        if (nk == 16) { DMLS_JPAIR_BANDS(jpair1, dmls_pmicro1, 1); return nk; }
        DMLS_PAIRS(pair1, 1); return kp;
    case 2:
        if (nj >= 16 || nk == 8) { DMLS_JPAIR_BANDS(jpair2, dmls_pmicro2, 2); return nk; }
        DMLS_PAIRS(pair2, 2); return kp;
    case 4: DMLS_WIDES(wide4, dmls_pmicro4, 4); return kp;
    default: DMLS_WIDES(wide8, dmls_pmicro8, 8); return kp;
    }
}

/* One group of 16 one-byte rows (sr[0..15]) by the pairs of micro-blocks
   in rows k < nk - nk % 32, every destination row stored after the one
   before (dmls_contig_ragged's rows of 9-15 bytes).  Returns the rows of k
   done. */
static AVX2 int64_t pairs_in_order_avx2(const char *const *sr, char *const *dr, int64_t nk) {
    const int64_t kp = nk - nk % 32;
    int64_t k;
    for (k = 0; k < kp; k += 32) pair1_in_order(sr, k, dr + k, 0);
    return kp;
}

/* Short source rows of one-byte values (isa.h, block_short): each row's
   kn bytes (8-15) gathered into a register from two 8-byte loads within
   the row, one from its start and one ending at its end, the second moved
   up to its place by a byte shuffle (the bytes where the two meet are the
   same in both; those from kn on are zero, their transposed rows never
   stored).  Through the padded source buffer, each row had been two
   stores, then a load of 16 bytes across both that waited for them to
   reach the cache. */
static inline AVX2 __m128i short_row(const char *r, int64_t kn, __m128i up) {
    const __m128i lo = _mm_loadl_epi64((const __m128i *)(const void *)r);
    const __m128i hi = _mm_loadl_epi64((const __m128i *)(const void *)(r + kn - 8));
    return _mm_or_si128(lo, _mm_shuffle_epi8(hi, up));
}
static AVX2 int64_t block_short_avx2(const char *const *sr, char *const *dr, int64_t kn, int64_t nj) {
    int64_t j, i, c;
    char m[16];
    __m128i up;
    if (kn < 8 || kn >= 16 || nj < 16) return 0;
    for (c = 0; c < 16; c++) m[c] = c >= kn - 8 && c < kn ? (char)(c - (kn - 8)) : (char)0x80;
    up = _mm_loadu_si128((const __m128i *)(const void *)m);
    if (nj >= 32) {
        /* pairs of micro-blocks side by side in j, 32 columns a pair */
        for (j = 0;; j += 32) {
            const int64_t jb = j + 32 <= nj ? j : nj - 32;
            __m256i x[16], y[16];
            _Pragma("GCC unroll 16") for (i = 0; i < 16; i++)
                x[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(short_row(sr[jb + i], kn, up)),
                                               short_row(sr[jb + 16 + i], kn, up), 1);
            DMLS_STAGES1;
            for (i = 0; i < kn; i++) _mm256_storeu_si256((__m256i *)(void *)(dr[i] + jb), x[i]);
            if (jb + 32 >= nj) break;
        }
        return nj;
    }
    for (j = 0;; j += 16) {
        const int64_t jb = j + 16 <= nj ? j : nj - 16;
        __m128i x[16], y[16];
        _Pragma("GCC unroll 16") for (i = 0; i < 16; i++) x[i] = short_row(sr[jb + i], kn, up);
        DMLS_T1(x, y);
        for (i = 0; i < kn; i++) _mm_storeu_si128((__m128i *)(void *)(dr[i] + jb), x[i]);
        if (jb + 16 >= nj) break;
    }
    return nj;
}

void dmls_transpose_avx2(dmls_isa_t *t);

void dmls_isa_avx2(dmls_isa_t *t) {
    t->level = DMLS_ISA_AVX2;
    t->block_pairs = block_pairs_avx2;
    t->pairs_in_order = pairs_in_order_avx2;
    t->block_short = block_short_avx2;
    dmls_transpose_avx2(t);
    dmls_fill_avx2(t);
}
#endif
