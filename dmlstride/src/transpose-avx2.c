/* AVX2 blocks for the cached tile transpose (transpose-sse2.c), compiled
   with target attributes (the library stays baseline x86-64) and used only
   when the CPU has AVX2: the register transposes of micro-avx2.h over
   strided rows.  4- and 8-byte values go in blocks 32 bytes wide, whose
   stores write 32 bytes a row (on one thread against the SSE2 kernel, with
   source rows read in place, see transpose-sse2.c: float64 transposes of
   0.5-1 MB 1.3-1.6x faster, float32 ones 1.1-1.6x); 1- and 2-byte values
   as pairs of micro-blocks (one above the other in k, or side by side in
   j), half the shuffles per byte.

   Reads s + j * sj .. + 32 and writes d + k * dk .. + 32 (16 for pairs)
   for the rows and columns covered only. */
#include "isa.h"

#if DMLSTRIDE_HAVE_AVX2
#include "micro-avx2.h"

#define AVX2 __attribute__((target("avx2")))

/* Blocks of KB values of k by JB of j over rows k < kw, columns j < jw.
   For 1- and 2-byte values each block takes the strides afresh through an
   empty asm statement, so that the compiler works out the row addresses
   inside the block instead of hoisting one per row out of the loops: a
   pair of 1-byte micro-blocks has 16 source rows and 32 destination rows,
   and its 48 loop-invariant row addresses were kept on the stack and
   reloaded in every block.  Recomputed, a 1-byte transpose in cache ran
   1.15-1.4x faster on one thread; on two, 2-D uint8 transposes of 1-6 MB
   1.1-1.2x faster and uint16 ones of 1-14 MB 1.08-1.25x.  The 4 and 8 rows
   of wider values fit in registers, and the hoisted addresses did as
   well there (float64 371 x 371, 0.97x recomputed). */
#define SRC(i) (sp + (i) * sj_)
#define DST(i) (dp + (i) * dk_)
#define DMLS_BLOCKS(BLOCK, W_, KB, JB) do {                                \
        for (k = 0; k < kw; k += (KB))                                    \
            for (j = 0; j < jw; j += (JB)) {                              \
                const char *sp = s + j * sj + k * (W_);                   \
                char *dp = d + k * dk + j * (W_);                         \
                int64_t sj_ = sj, dk_ = dk;                               \
                if ((W_) <= 2) __asm__("" : "+r"(sj_), "+r"(dk_));        \
                BLOCK(SRC, DST);                                          \
            }                                                             \
    } while (0)

static AVX2 int64_t tile_wide_avx2(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                   int64_t nk, int64_t nj, int64_t *jdone) {
    /* KB x JB blocks: 2N x N pairs for 1- and 2-byte values, 2N x 2N for
       wider ones (N = 16 / W). */
    const int64_t KB = 32 / W, JB = W <= 2 ? 16 / W : 32 / W;
    const int64_t kw = nk - nk % KB, jw = nj - nj % JB;
    int64_t k, j;
    *jdone = 0;
    if (kw == 0 || jw == 0) return 0;
    switch (W) {
    case 1: DMLS_BLOCKS(DMLS_PAIR1, 1, 32, 16); break;
    case 2: DMLS_BLOCKS(DMLS_PAIR2, 2, 16, 8); break;
    case 4: DMLS_BLOCKS(DMLS_WIDE4, 4, 8, 8); break;
    default: DMLS_BLOCKS(DMLS_WIDE8, 8, 4, 4); break;
    }
    *jdone = jw;
    return kw;
}
/* 1- or 2-byte values as N x 2N pairs side by side in j: tiles of 2N
   columns or more (see dmls_simd_transpose), and bands of N to 2N - 1
   rows (and the last N rows of a ragged band) of narrower ones, where the
   SSE2 micro-blocks did them at twice the shuffles per byte (NHWC to NCHW
   gathers of 19-30 uint8 channels and 9-14 uint16 or float16 ones, 6.6-14
   MB on 2 threads, ran 1.07-1.46x faster over two runs of two alternating
   builds).  Wider values: none.  Kept apart from tile_wide_avx2: folded
   into it, the code around its other blocks changed, and 2-D uint8
   transposes in cache ran 0.75-0.8x. */
static AVX2 int64_t tile_jpairs_avx2(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                     int64_t nk, int64_t nj, int64_t *jdone) {
    const int64_t kw = nk - nk % (16 / W), jw = nj - nj % (32 / W);
    int64_t k, j;
    *jdone = 0;
    if (W > 2 || kw == 0 || jw == 0) return 0;
    if (W == 1)
        DMLS_BLOCKS(DMLS_JPAIR1, 1, 16, 32);
    else
        DMLS_BLOCKS(DMLS_JPAIR2, 2, 8, 16);
    *jdone = jw;
    return kw;
}

/* A packed tile (tile-tiny.c): KB x JB blocks as tile_wide's, over the
   whole tile, the last block of each side moved back to end at kn and at
   jn (their overlapping values written twice, with the same values):
   reads and writes stay within the tile.  For 1- and 2-byte values with
   fewer than 2N values of k, pairs side by side in j.  Through the SSE2
   micro-blocks alone, 20 x 32 uint32 tiles in cache ran at 0.87x the
   speed of the general tile path's AVX2 blocks on one thread, and an
   unnamed uint32 gather of such tiles (2.5 KiB, 14 MB) 0.81x on two. */
static AVX2 int packed_avx2(int W, const char *a, char *b, int64_t kn, int64_t jn) {
    const int64_t KB = 32 / W, JB = W <= 2 ? 16 / W : 32 / W, sj = kn * W, dk = jn * W;
    int64_t k, j;
#define DMLS_MOVED_BLOCKS(BLOCK, W_, KB_, JB_) do {                           \
        for (k = 0;; k += (KB_)) {                                            \
            const int64_t kb = k + (KB_) <= kn ? k : kn - (KB_);              \
            for (j = 0;; j += (JB_)) {                                        \
                const int64_t jb = j + (JB_) <= jn ? j : jn - (JB_);          \
                const char *sp = a + jb * sj + kb * (W_);                     \
                char *dp = b + kb * dk + jb * (W_);                           \
                int64_t sj_ = sj, dk_ = dk;                                   \
                if ((W_) <= 2) __asm__("" : "+r"(sj_), "+r"(dk_));            \
                BLOCK(SRC, DST);                                              \
                if (j + (JB_) >= jn) break;                                   \
            }                                                                 \
            if (k + (KB_) >= kn) break;                                       \
        }                                                                     \
    } while (0)
    if (kn >= KB && jn >= JB) {
        switch (W) {
        case 1: DMLS_MOVED_BLOCKS(DMLS_PAIR1, 1, 32, 16); break;
        case 2: DMLS_MOVED_BLOCKS(DMLS_PAIR2, 2, 16, 8); break;
        case 4: DMLS_MOVED_BLOCKS(DMLS_WIDE4, 4, 8, 8); break;
        default: DMLS_MOVED_BLOCKS(DMLS_WIDE8, 8, 4, 4); break;
        }
    } else if (W <= 2 && kn >= JB && jn >= KB) {
        if (W == 1)
            DMLS_MOVED_BLOCKS(DMLS_JPAIR1, 1, 16, 32);
        else
            DMLS_MOVED_BLOCKS(DMLS_JPAIR2, 2, 8, 16);
    } else {
        return 0;
    }
#undef DMLS_MOVED_BLOCKS
    return 1;
}

#undef SRC
#undef DST

/* K = 5-7 four-byte channels of pixels sj bytes apart into K rows dk
   apart, 8 pixels at a time: each pixel read as 8 values (its K and the
   next ones of the source, never stored), the 8 x 8 block transposed in
   registers, its first K rows stored, 32 bytes each.  The tile's 8 x 8
   blocks want 8 values of k, and 5-7 went through the 4 x 4 SSE2 blocks
   and a ragged row.  Its own transpose rather than micro-avx2.h's
   DMLS_WIDE4 (16-byte halves, the rows from K on stored to a sink): two
   builds alternating (2 threads, 5 rounds), 6 such gathers ran 0.83-1.01x
   that way, 0.89x by geometric mean. */
static AVX2 int64_t deint_k_32_avx2(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    int64_t j;
    int k;
    if (K < 5 || K > 7 || sj < 4 * K) return 0;
    for (j = 0; j + 8 <= n; j += 8) {
        const char *r = s + j * sj;
        __m256i x[8], u[8], y[8];
        for (k = 0; k < 8; k++) x[k] = _mm256_loadu_si256((const __m256i *)(const void *)(r + k * sj));
        u[0] = _mm256_unpacklo_epi32(x[0], x[1]);
        u[1] = _mm256_unpackhi_epi32(x[0], x[1]);
        u[2] = _mm256_unpacklo_epi32(x[2], x[3]);
        u[3] = _mm256_unpackhi_epi32(x[2], x[3]);
        u[4] = _mm256_unpacklo_epi32(x[4], x[5]);
        u[5] = _mm256_unpackhi_epi32(x[4], x[5]);
        u[6] = _mm256_unpacklo_epi32(x[6], x[7]);
        u[7] = _mm256_unpackhi_epi32(x[6], x[7]);
        /* y[c]: value c (and c + 4 in the high lane) of pixels 0-3, then of 4-7 */
        y[0] = _mm256_unpacklo_epi64(u[0], u[2]);
        y[1] = _mm256_unpackhi_epi64(u[0], u[2]);
        y[2] = _mm256_unpacklo_epi64(u[1], u[3]);
        y[3] = _mm256_unpackhi_epi64(u[1], u[3]);
        y[4] = _mm256_unpacklo_epi64(u[4], u[6]);
        y[5] = _mm256_unpackhi_epi64(u[4], u[6]);
        y[6] = _mm256_unpacklo_epi64(u[5], u[7]);
        y[7] = _mm256_unpackhi_epi64(u[5], u[7]);
        for (k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)(void *)(d + k * dk + j * 4),
                                _mm256_permute2x128_si256(y[k], y[k + 4], 0x20));
        /* rows 4 to K - 1 (K is 5-7) */
        _mm256_storeu_si256((__m256i *)(void *)(d + 4 * dk + j * 4), _mm256_permute2x128_si256(y[0], y[4], 0x31));
        if (K > 5)
            _mm256_storeu_si256((__m256i *)(void *)(d + 5 * dk + j * 4), _mm256_permute2x128_si256(y[1], y[5], 0x31));
        if (K > 6)
            _mm256_storeu_si256((__m256i *)(void *)(d + 6 * dk + j * 4), _mm256_permute2x128_si256(y[2], y[6], 0x31));
    }
    return j;
}

/* K = 3-7 eight-byte channels of pixels sj bytes apart into K rows dk
   apart, 4 pixels at a time: each pixel read as 4 values, or 8 (two
   reads) for K > 4 (its K and the next ones of the source, never stored),
   each 4 x 4 block transposed in registers, its rows under K stored, 32
   bytes each.  nt_shifted's slots and the tile's 2 x 2 blocks, with a
   ragged row gathered value by value, had spent about one instruction a
   byte on 5 channels (see tile.c for what this measured). */
static AVX2 int64_t deint_k_64_avx2(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n) {
    int64_t j;
    int h, i;
    if (K < 3 || K > 7 || sj < 8 * K) return 0;
    for (j = 0; j + 4 <= n; j += 4) {
        const char *r = s + j * sj;
        for (h = 0; 4 * h < K; h++) {
            const char *q = r + 32 * h;
            const __m256d a0 = _mm256_loadu_pd((const double *)(const void *)q);
            const __m256d a1 = _mm256_loadu_pd((const double *)(const void *)(q + sj));
            const __m256d a2 = _mm256_loadu_pd((const double *)(const void *)(q + 2 * sj));
            const __m256d a3 = _mm256_loadu_pd((const double *)(const void *)(q + 3 * sj));
            /* t0: values 0 and 2 of pixels 0, 1; t1: values 1 and 3; t2, t3: of pixels 2, 3 */
            const __m256d t0 = _mm256_unpacklo_pd(a0, a1), t1 = _mm256_unpackhi_pd(a0, a1);
            const __m256d t2 = _mm256_unpacklo_pd(a2, a3), t3 = _mm256_unpackhi_pd(a2, a3);
            __m256d y[4];
            y[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
            y[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
            y[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
            y[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
            for (i = 0; i < 4 && 4 * h + i < K; i++)
                _mm256_storeu_pd((double *)(void *)(d + (4 * h + i) * dk + j * 8), y[i]);
        }
    }
    return j;
}

void dmls_transpose_avx2(dmls_isa_t *t) {
    t->tile_wide = tile_wide_avx2;
    t->tile_jpairs = tile_jpairs_avx2;
    t->deint_k_32 = deint_k_32_avx2;
    t->deint_k_64 = deint_k_64_avx2;
    t->packed = packed_avx2;
}
#endif
