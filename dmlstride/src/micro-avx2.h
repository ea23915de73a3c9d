/* AVX2 register transposes of blocks 32 bytes wide, inlined into the
   files that tile with them (transpose-avx2.c, block-avx2.c), which
   compile them with the avx2 target attribute.  For 4- and 8-byte values a
   block is M x M, M = 32 / W (8 x 8 and 4 x 4).

   The SSE2 micro-kernels (micro-sse2.h) move 16 bytes per load and store.
   Here every store writes 32 bytes: each register is loaded as two 16-byte
   halves, from source rows j and j + M / 2, so the unpacks (which work
   within a 128-bit lane) leave destination row k's M values in one
   register, its low lane from the first M / 2 rows and its high lane from
   the others.  An 8-byte block takes 8 loads, 4 unpacks and 4 stores where
   the SSE2 kernel takes 8, 8 and 8; a 4-byte one 16, 16 and 8 where it
   takes 16, 32 and 16.  Bit moves only: any values, NaN payloads included,
   are copied exactly.

   For 1- and 2-byte values a block is a pair of SSE2 micro-blocks
   (N = 16 / W): each source row gives 32 bytes, the micro-blocks at k and
   at k + N side by side in the two lanes; the same chain of unpack stages
   transposes both, and lane 0 of result i is destination row k + i, lane 1
   row k + N + i.  Half the shuffles per byte of the SSE2 kernel, and no
   register copies (three-operand forms).  The pair may also lie side by
   side in j (DMLS_JPAIR*: 16-byte halves from rows j and j + N, 32-byte
   stores), for bands of k too short for one above the other.

   SRC(i) is the address of source row i at the block's first k (k
   contiguous), DST(i) that of destination row i at its first j (j
   contiguous): macros of the including file, for strided rows or tables of
   row pointers alike. */
#ifndef DMLS_MICRO_AVX2_H
#define DMLS_MICRO_AVX2_H

#include <immintrin.h>

#include "micro-sse2.h"   /* DMLS_STAGE */

/* The unpack stages of a 1-byte (16 rows) and a 2-byte (8 rows) micro-block
   in each lane, from x (the result in x for 1 byte, in y for 2). */
#define DMLS_STAGES1                                                                   \
    DMLS_STAGE(x, y, 16, 1, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8);               \
    DMLS_STAGE(y, x, 16, 2, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16);             \
    DMLS_STAGE(x, y, 16, 4, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32);             \
    DMLS_STAGE(y, x, 16, 8, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64)
#define DMLS_STAGES2                                                                   \
    DMLS_STAGE(x, y, 8, 1, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16);              \
    DMLS_STAGE(y, x, 8, 2, _mm256_unpacklo_epi32, _mm256_unpackhi_epi32);              \
    DMLS_STAGE(x, y, 8, 4, _mm256_unpacklo_epi64, _mm256_unpackhi_epi64)

/* Two 16-byte halves: from p in the low lane, from q in the high one. */
#define DMLS_HALVES(p, q)                                                                  \
    _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p))), \
                            _mm_loadu_si128((const __m128i *)(q)), 1)

/* N source rows of 32 bytes to 2N destination rows of 16. */
#define DMLS_PAIR_OF(SRC, DST, N, STAGES, RES) do {                                    \
    __m256i x[N], y[N];                                                                \
    int i_;                                                                            \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                              \
        x[i_] = _mm256_loadu_si256((const __m256i *)(SRC(i_)));                        \
    STAGES;                                                                            \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++) {                            \
        _mm_storeu_si128((__m128i *)(DST(i_)), _mm256_castsi256_si128(RES[i_]));       \
        _mm_storeu_si128((__m128i *)(DST((N) + i_)), _mm256_extracti128_si256(RES[i_], 1)); \
    }                                                                                  \
} while (0)
#define DMLS_PAIR1(SRC, DST) DMLS_PAIR_OF(SRC, DST, 16, DMLS_STAGES1, x)
/* A pair of 1-byte micro-blocks whose destination rows are stored in order,
   k to k + 31, for rows closer together than a store (each one's store
   spills into the next row, which is stored after it). */
#define DMLS_PAIR1_IN_ORDER(SRC, DST) do {                                             \
    __m256i x[16], y[16];                                                              \
    int i_;                                                                            \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < 16; i_++)                               \
        x[i_] = _mm256_loadu_si256((const __m256i *)(SRC(i_)));                        \
    DMLS_STAGES1;                                                                      \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < 16; i_++)                               \
        _mm_storeu_si128((__m128i *)(DST(i_)), _mm256_castsi256_si128(x[i_]));         \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < 16; i_++)                               \
        _mm_storeu_si128((__m128i *)(DST(16 + i_)), _mm256_extracti128_si256(x[i_], 1)); \
} while (0)
#define DMLS_PAIR2(SRC, DST) DMLS_PAIR_OF(SRC, DST, 8, DMLS_STAGES2, y)

/* 2N source rows of 16 bytes to N destination rows of 32: the same stages
   on a pair of micro-blocks side by side in j (rows j and j + N in the two
   lanes of one register), so that lane 0 of result i is destination row
   k + i at columns 0 .. N - 1 and lane 1 the same row at N .. 2N - 1, and
   each row is one 32-byte store.  For 1- and 2-byte values in bands of N to
   2N - 1 rows of k, too few for a pair of micro-blocks one above the other
   (24 one-byte channels, or 12 two-byte ones, of an NHWC to NCHW copy). */
#define DMLS_JPAIR_OF(SRC, DST, N, STAGES, RES) do {                                   \
    __m256i x[N], y[N];                                                                \
    int i_;                                                                            \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                              \
        x[i_] = DMLS_HALVES(SRC(i_), SRC((N) + i_));                                   \
    STAGES;                                                                            \
    _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                              \
        _mm256_storeu_si256((__m256i *)(DST(i_)), RES[i_]);                            \
} while (0)
#define DMLS_JPAIR1(SRC, DST) DMLS_JPAIR_OF(SRC, DST, 16, DMLS_STAGES1, x)
#define DMLS_JPAIR2(SRC, DST) DMLS_JPAIR_OF(SRC, DST, 8, DMLS_STAGES2, y)

#define DMLS_STORE32(p, x) _mm256_storeu_si256((__m256i *)(p), (x))

/* One 4 x 4 block of 8-byte values. */
#define DMLS_WIDE8(SRC, DST) do {                                                       \
    const __m256i x0_ = DMLS_HALVES(SRC(0), SRC(2)), x1_ = DMLS_HALVES(SRC(1), SRC(3)); \
    const __m256i x2_ = DMLS_HALVES(SRC(0) + 16, SRC(2) + 16);                           \
    const __m256i x3_ = DMLS_HALVES(SRC(1) + 16, SRC(3) + 16);                           \
    DMLS_STORE32(DST(0), _mm256_unpacklo_epi64(x0_, x1_));                              \
    DMLS_STORE32(DST(1), _mm256_unpackhi_epi64(x0_, x1_));                              \
    DMLS_STORE32(DST(2), _mm256_unpacklo_epi64(x2_, x3_));                              \
    DMLS_STORE32(DST(3), _mm256_unpackhi_epi64(x2_, x3_));                              \
} while (0)

/* One 8 x 8 block of 4-byte values: rows k .. k + 3 from the first 16
   bytes of each source row, k + 4 .. k + 7 from the next 16, each a 4 x 4
   transpose per lane. */
#define DMLS_WIDE4_HALF(SRC, DST, h) do {                                                   \
    const __m256i t0_ = DMLS_HALVES(SRC(0) + 16 * (h), SRC(4) + 16 * (h));                 \
    const __m256i t1_ = DMLS_HALVES(SRC(1) + 16 * (h), SRC(5) + 16 * (h));                 \
    const __m256i t2_ = DMLS_HALVES(SRC(2) + 16 * (h), SRC(6) + 16 * (h));                 \
    const __m256i t3_ = DMLS_HALVES(SRC(3) + 16 * (h), SRC(7) + 16 * (h));                 \
    const __m256i a0_ = _mm256_unpacklo_epi32(t0_, t1_), a1_ = _mm256_unpackhi_epi32(t0_, t1_); \
    const __m256i a2_ = _mm256_unpacklo_epi32(t2_, t3_), a3_ = _mm256_unpackhi_epi32(t2_, t3_); \
    DMLS_STORE32(DST(4 * (h)), _mm256_unpacklo_epi64(a0_, a2_));                           \
    DMLS_STORE32(DST(4 * (h) + 1), _mm256_unpackhi_epi64(a0_, a2_));                       \
    DMLS_STORE32(DST(4 * (h) + 2), _mm256_unpacklo_epi64(a1_, a3_));                       \
    DMLS_STORE32(DST(4 * (h) + 3), _mm256_unpackhi_epi64(a1_, a3_));                       \
} while (0)
#define DMLS_WIDE4(SRC, DST) do { DMLS_WIDE4_HALF(SRC, DST, 0); DMLS_WIDE4_HALF(SRC, DST, 1); } while (0)

#endif
