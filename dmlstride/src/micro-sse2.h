/* SSE2 register-transpose micro-kernels, inlined into the files that tile
   with them (transpose-sse2.c, block.c; block-avx2.c takes DMLS_STAGE for
   its 256-bit pairs).

   A micro-block is N x N elements with N = 16 / W: N source rows (one per j,
   stride sj bytes) each holding N contiguous k values are transposed into N
   destination rows (one per k, stride dk bytes) each holding N contiguous j
   values.  Unaligned loads and stores only.  The "p" variants take one
   pointer per row; the "line" variants write four micro-blocks side by side,
   a whole 64-byte destination line per row, with streaming stores. */
#ifndef DMLS_MICRO_SSE2_H
#define DMLS_MICRO_SSE2_H

#include <emmintrin.h>
#include <stdint.h>

/* One transpose stage: pairs (x[i], x[i + dist]) for i in each block of
   2 * dist, unpacked at this stage's unit into y[2p], y[2p + 1].  The
   loops have constant bounds and are fully unrolled into registers. */
#define DMLS_STAGE(x, y, N, dist, LO, HI) do {                                 \
    int p_ = 0, b_, i_;                                                        \
    _Pragma("GCC unroll 16") for (b_ = 0; b_ < (N); b_ += 2 * (dist))         \
    _Pragma("GCC unroll 16") for (i_ = b_; i_ < b_ + (dist); i_++, p_++) {    \
        y[2 * p_] = LO(x[i_], x[i_ + (dist)]);                                 \
        y[2 * p_ + 1] = HI(x[i_], x[i_ + (dist)]);                             \
    }                                                                          \
} while (0)
#define DMLS_LOAD(x, N) do { int i_;                                           \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \
        x[i_] = _mm_loadu_si128((const __m128i *)(s + i_ * sj)); } while (0)
#define DMLS_STORE(x, N) do { int i_;                                          \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \
        _mm_storeu_si128((__m128i *)(d + i_ * dk), x[i_]); } while (0)

/* The register transposes of an N x N micro-block, N = 16 / W: x holds
   the N source rows; the result is in x (W = 1, 4) or y (W = 2, 8). */
#define DMLS_T1(x, y) do {                                                    \
    DMLS_STAGE(x, y, 16, 1, _mm_unpacklo_epi8, _mm_unpackhi_epi8);             \
    DMLS_STAGE(y, x, 16, 2, _mm_unpacklo_epi16, _mm_unpackhi_epi16);           \
    DMLS_STAGE(x, y, 16, 4, _mm_unpacklo_epi32, _mm_unpackhi_epi32);           \
    DMLS_STAGE(y, x, 16, 8, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
#define DMLS_T2(x, y) do {                                                    \
    DMLS_STAGE(x, y, 8, 1, _mm_unpacklo_epi16, _mm_unpackhi_epi16);            \
    DMLS_STAGE(y, x, 8, 2, _mm_unpacklo_epi32, _mm_unpackhi_epi32);            \
    DMLS_STAGE(x, y, 8, 4, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
#define DMLS_T4(x, y) do {                                                    \
    DMLS_STAGE(x, y, 4, 1, _mm_unpacklo_epi32, _mm_unpackhi_epi32);            \
    DMLS_STAGE(y, x, 4, 2, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
#define DMLS_T8(x, y) DMLS_STAGE(x, y, 2, 1, _mm_unpacklo_epi64, _mm_unpackhi_epi64)

static inline void dmls_micro1(const char *s, int64_t sj, char *d, int64_t dk) {
    __m128i x[16], y[16];
    DMLS_LOAD(x, 16); DMLS_T1(x, y); DMLS_STORE(x, 16);
}
static inline void dmls_micro2(const char *s, int64_t sj, char *d, int64_t dk) {
    __m128i x[8], y[8];
    DMLS_LOAD(x, 8); DMLS_T2(x, y); DMLS_STORE(y, 8);
}
static inline void dmls_micro4(const char *s, int64_t sj, char *d, int64_t dk) {
    __m128i x[4], y[4];
    DMLS_LOAD(x, 4); DMLS_T4(x, y); DMLS_STORE(x, 4);
}
static inline void dmls_micro8(const char *s, int64_t sj, char *d, int64_t dk) {
    __m128i x[2], y[2];
    DMLS_LOAD(x, 2); DMLS_T8(x, y); DMLS_STORE(y, 2);
}


/* An 8 x 8 transpose of 16-bit words: x[0..7] in, o[c] = word c of each
   x[i] in turn (three unpack stages; 5-8 channel de-interleaves and
   interleaves, interleave-sse2.c and interleave-ssse3.c). */
#define DMLS_WORDS8x8(x, o) do {                                                   \
    const __m128i a0_ = _mm_unpacklo_epi16(x[0], x[1]), a1_ = _mm_unpackhi_epi16(x[0], x[1]); \
    const __m128i a2_ = _mm_unpacklo_epi16(x[2], x[3]), a3_ = _mm_unpackhi_epi16(x[2], x[3]); \
    const __m128i a4_ = _mm_unpacklo_epi16(x[4], x[5]), a5_ = _mm_unpackhi_epi16(x[4], x[5]); \
    const __m128i a6_ = _mm_unpacklo_epi16(x[6], x[7]), a7_ = _mm_unpackhi_epi16(x[6], x[7]); \
    const __m128i b0_ = _mm_unpacklo_epi32(a0_, a2_), b1_ = _mm_unpackhi_epi32(a0_, a2_);      \
    const __m128i b2_ = _mm_unpacklo_epi32(a1_, a3_), b3_ = _mm_unpackhi_epi32(a1_, a3_);      \
    const __m128i b4_ = _mm_unpacklo_epi32(a4_, a6_), b5_ = _mm_unpackhi_epi32(a4_, a6_);      \
    const __m128i b6_ = _mm_unpacklo_epi32(a5_, a7_), b7_ = _mm_unpackhi_epi32(a5_, a7_);      \
    o[0] = _mm_unpacklo_epi64(b0_, b4_); o[1] = _mm_unpackhi_epi64(b0_, b4_);                \
    o[2] = _mm_unpacklo_epi64(b1_, b5_); o[3] = _mm_unpackhi_epi64(b1_, b5_);                \
    o[4] = _mm_unpacklo_epi64(b2_, b6_); o[5] = _mm_unpackhi_epi64(b2_, b6_);                \
    o[6] = _mm_unpacklo_epi64(b3_, b7_); o[7] = _mm_unpackhi_epi64(b3_, b7_);                \
} while (0)

/* One line strip: N k rows by 64 / W j (four micro-blocks side by side),
   each destination row's line written with four streaming stores. */
#define DMLS_LINE(NAME, N, TCHAIN, RES)                                         \
static inline void NAME(const char *s, int64_t sj, char *d, int64_t dk, int first) { \
    __m128i o[4][N], x[N], y[N];                                                \
    int q, i;                                                                   \
    _Pragma("GCC unroll 4") for (q = 0; q < 4; q++) {                           \
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                      \
            x[i] = _mm_loadu_si128((const __m128i *)(s + (q * (N) + i) * sj));  \
        TCHAIN(x, y);                                                           \
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++) o[q][i] = RES[i];    \
    }                                                                           \
    _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                          \
        if (i >= first)                                                         \
    _Pragma("GCC unroll 4") for (q = 0; q < 4; q++)                             \
        _mm_stream_si128((__m128i *)(d + i * dk + q * 16), o[q][i]);            \
}
DMLS_LINE(dmls_line1, 16, DMLS_T1, x)
DMLS_LINE(dmls_line2, 8, DMLS_T2, y)
DMLS_LINE(dmls_line4, 4, DMLS_T4, x)
DMLS_LINE(dmls_line8, 2, DMLS_T8, y)

#define DMLS_PLOAD(x, N) do { int i_;                                          \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \
        x[i_] = _mm_loadu_si128((const __m128i *)(sr[i_] + ko)); } while (0)
#define DMLS_PSTORE(x, N) do { int i_;                                         \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \
        _mm_storeu_si128((__m128i *)(dr[i_] + jo), x[i_]); } while (0)
/* sr[i] + ko: source row j + i at k; dr[i] + jo: destination row k + i at j. */
static inline void dmls_pmicro1(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
    __m128i x[16], y[16];
    DMLS_PLOAD(x, 16); DMLS_T1(x, y); DMLS_PSTORE(x, 16);
}
static inline void dmls_pmicro2(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
    __m128i x[8], y[8];
    DMLS_PLOAD(x, 8); DMLS_T2(x, y); DMLS_PSTORE(y, 8);
}
static inline void dmls_pmicro4(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
    __m128i x[4], y[4];
    DMLS_PLOAD(x, 4); DMLS_T4(x, y); DMLS_PSTORE(x, 4);
}
static inline void dmls_pmicro8(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
    __m128i x[2], y[2];
    DMLS_PLOAD(x, 2); DMLS_T8(x, y); DMLS_PSTORE(y, 2);
}
/* As DMLS_LINE, with one pointer per row: a destination line per k row
   (dr[i] + jo line-aligned), written with streaming stores. */
#define DMLS_PLINE(NAME, N, TCHAIN, RES)                                        \
static inline void NAME(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) { \
    __m128i o[4][N], x[N], y[N];                                                \
    int q, i;                                                                   \
    _Pragma("GCC unroll 4") for (q = 0; q < 4; q++) {                           \
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                      \
            x[i] = _mm_loadu_si128((const __m128i *)(sr[q * (N) + i] + ko));    \
        TCHAIN(x, y);                                                           \
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++) o[q][i] = RES[i];    \
    }                                                                           \
    _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                          \
    _Pragma("GCC unroll 4") for (q = 0; q < 4; q++)                             \
        _mm_stream_si128((__m128i *)(dr[i] + jo + q * 16), o[q][i]);            \
}
DMLS_PLINE(dmls_pline1, 16, DMLS_T1, x)
DMLS_PLINE(dmls_pline2, 8, DMLS_T2, y)
DMLS_PLINE(dmls_pline4, 4, DMLS_T4, x)
DMLS_PLINE(dmls_pline8, 2, DMLS_T8, y)

#endif
