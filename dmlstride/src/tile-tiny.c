/* Tiny transposes through two stages in L1 (tile-tiny.h).

   The tile's jn source rows of kn values go, each as one short copy, to
   rows of a stage DMLS_TINY_ROW bytes apart; the stage is transposed a
   register micro-block (16 x 16 bytes) at a time into a second stage, the
   rows past the tile's being padding; each of the kn rows of the second
   stage then goes out as one short copy.  Element by element, each value
   was a load and a store of its own at a stride: a (0, 1, 2, 4, 3)
   permutation of 40 x 40 x 40 x 28 x 18 uint8 values ran at 1.8 GB/s on
   2 threads, 0.65x PyTorch. */
#include "tile-tiny.h"

#include "copy-short.h"
#include "elements.h"
#include "prefetch.h"

#include <string.h>
#if DMLSTRIDE_HAVE_SIMD
#include "micro-sse2.h"
#endif

#if DMLSTRIDE_HAVE_SIMD
#define P DMLS_TINY_ROW
#define DMLS_TINY_TILE(NAME, W, MICRO)                                                    \
static void NAME(const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn,   \
                 char *stage) {                                                            \
    char *a = stage, *b = stage + P * P;                                                   \
    const int64_t N = 16 / (W), kp = (kn + N - 1) / N * N, jp = (jn + N - 1) / N * N;      \
    int64_t j, k;                                                                          \
    for (j = 0; j < jn; j++) dmls_copy_short(a + j * P, s + j * iss, kn * (W));            \
    for (k = 0; k < kp; k += N)                                                            \
        for (j = 0; j < jp; j += N)                                                        \
            MICRO(a + j * P + k * (W), P, b + k * P + j * (W), P);                         \
    for (k = 0; k < kn; k++) dmls_copy_short(d + k * kds, b + k * P, jn * (W));            \
}
DMLS_TINY_TILE(tiny1, 1, dmls_micro1)
DMLS_TINY_TILE(tiny2, 2, dmls_micro2)
DMLS_TINY_TILE(tiny4, 4, dmls_micro4)
DMLS_TINY_TILE(tiny8, 8, dmls_micro8)
#undef DMLS_TINY_TILE
#undef P

/* Four two-byte values a source row (dmls_tiny_words4): eight rows at a
   time, a 4-way deinterleave of words in 12 unpacks, each of the four
   results a 16-byte store into its destination row; the last eight rows
   end at jn (overlapping the ones before, whose values they write again:
   source and destination never overlap).  Through the stages, such a tile
   transposed 8 x 8 micro-blocks of which half the rows were padding, and
   tiles of 33-64 rows went element by element.  In one process on the
   same buffers, alternating in a shuffled order (2 threads, 9 rounds, the
   old code against itself as a control: 0.85-1.13x), 14 gathers and
   scatters of unnamed 4-D to 6-D int16 and float16 permutations of 2-30 MB
   with such tiles ran 1.55-4.64x faster (2.45x by geometric mean), and a
   (60, 53, 4, 49, 11) float16 gather in order (3, 1, 0, 4, 2), 4 x 11
   tiles, went from 0.7x PyTorch's copy_ to 1.8x. */
static void tiny2_k4(const char *s, int64_t iss, char *d, int64_t kds, int64_t jn) {
    int64_t j = 0;
    for (;;) {
        const char *r;
        __m128i x0, x1, x2, x3, t0, t1, t2, t3, u0, u1, u2, u3;
        char *o;
        if (j + 8 > jn) j = jn - 8;
        r = s + j * iss;
        if (iss == 8) {
            x0 = _mm_loadu_si128((const __m128i *)(const void *)r);
            x1 = _mm_loadu_si128((const __m128i *)(const void *)(r + 16));
            x2 = _mm_loadu_si128((const __m128i *)(const void *)(r + 32));
            x3 = _mm_loadu_si128((const __m128i *)(const void *)(r + 48));
        } else {
#define DMLS_ROW8(i) _mm_loadl_epi64((const __m128i *)(const void *)(r + (i) * iss))
            x0 = _mm_unpacklo_epi64(DMLS_ROW8(0), DMLS_ROW8(1));
            x1 = _mm_unpacklo_epi64(DMLS_ROW8(2), DMLS_ROW8(3));
            x2 = _mm_unpacklo_epi64(DMLS_ROW8(4), DMLS_ROW8(5));
            x3 = _mm_unpacklo_epi64(DMLS_ROW8(6), DMLS_ROW8(7));
#undef DMLS_ROW8
        }
        /* x0: values 0-3 of rows 0 and 1; t0: value 0 and 1 of rows 0 and 2, ... */
        t0 = _mm_unpacklo_epi16(x0, x1);
        t1 = _mm_unpackhi_epi16(x0, x1);
        t2 = _mm_unpacklo_epi16(x2, x3);
        t3 = _mm_unpackhi_epi16(x2, x3);
        u0 = _mm_unpacklo_epi16(t0, t1);   /* value 0 of rows 0-3, value 1 of rows 0-3 */
        u1 = _mm_unpackhi_epi16(t0, t1);   /* values 2 and 3 */
        u2 = _mm_unpacklo_epi16(t2, t3);   /* the same of rows 4-7 */
        u3 = _mm_unpackhi_epi16(t2, t3);
        o = d + j * 2;
        _mm_storeu_si128((__m128i *)(void *)o, _mm_unpacklo_epi64(u0, u2));
        _mm_storeu_si128((__m128i *)(void *)(o + kds), _mm_unpackhi_epi64(u0, u2));
        _mm_storeu_si128((__m128i *)(void *)(o + 2 * kds), _mm_unpacklo_epi64(u1, u3));
        _mm_storeu_si128((__m128i *)(void *)(o + 3 * kds), _mm_unpackhi_epi64(u1, u3));
        j += 8;
        if (j >= jn) return;
    }
}

/* Tiles contiguous on both sides (dmls_packed_tiles): micro-blocks read
   the tile's rows in place, kn * W bytes apart, and write the destination
   rows jn * W bytes apart into the run's buffer.  Where a side has at
   least N values its last micro-block is moved back to end at the side's
   end (its values written twice, with the same values); a side of fewer
   values takes one padded micro-block, whose values past the side land
   in the rows after (written later, in order: bands of k in turn, each
   micro-block's rows in order) or past the tile's end. */
#define DMLS_PACKED_TILE(NAME, W, MICRO)                                            \
static void NAME(const char *a, char *b, int64_t kn, int64_t jn) {                  \
    const int64_t N = 16 / (W), ap = kn * (W), bp = jn * (W);                       \
    int64_t k = 0, j, kb, jb;                                                       \
    for (;;) {                                                                      \
        kb = k + N <= kn || kn < N ? k : kn - N;                                    \
        for (j = 0;;) {                                                             \
            jb = j + N <= jn || jn < N ? j : jn - N;                                \
            MICRO(a + jb * ap + kb * (W), ap, b + kb * bp + jb * (W), bp);          \
            j += N;                                                                 \
            if (j >= jn) break;                                                     \
        }                                                                           \
        k += N;                                                                     \
        if (k >= kn) break;                                                         \
    }                                                                               \
}
DMLS_PACKED_TILE(packed1, 1, dmls_micro1)
DMLS_PACKED_TILE(packed2, 2, dmls_micro2)
DMLS_PACKED_TILE(packed4, 4, dmls_micro4)
DMLS_PACKED_TILE(packed8, 8, dmls_micro8)
#undef DMLS_PACKED_TILE
#endif

void dmls_packed_tiles(int w, const char *s, int64_t sstep, char *d, int64_t kn, int64_t jn, int64_t m,
                       int stream, const char *next, int64_t nm, char *a, char *b) {
#if DMLSTRIDE_HAVE_SIMD
    const int64_t n = 16 / w, tb = kn * jn * w;
    const int copy_in = kn < n || jn < n;
    int64_t g;
    if (dmls_packed_deint(w, kn, jn)) {
        /* De-interleaved into the buffer, then out as one run.  A scatter
           of 2 x 29 uint8 tiles (58-byte tasks, streamed), which went value
           by value into each task's two rows, ran 4.5x faster. */
        for (g = 0; g < m; g++) {
            if (g < nm) dmls_prefetch_l1_lines(next + g * sstep, tb);
            DMLS_BY_WIDTH(w, dmls_deinterleave_, (s + g * sstep, b + g * tb, kn, jn * w, jn));
        }
    } else if (!stream && !copy_in && dmls_isa.packed(w, s, d, kn, jn)) {
        /* Blocks that stay within the tile: straight into the destination. */
        for (g = 0; g < m; g++) {
            if (g < nm) dmls_prefetch_l1_lines(next + g * sstep, tb);
            if (g > 0) dmls_isa.packed(w, s + g * sstep, d + g * tb, kn, jn);
        }
        return;
    } else {
        for (g = 0; g < m; g++) {
            const char *t = s + g * sstep;
            if (g < nm) dmls_prefetch_l1_lines(next + g * sstep, tb);
            if (copy_in) {
                memcpy(a, t, (size_t)tb);
                t = a;
            }
            if (dmls_isa.packed(w, t, b + g * tb, kn, jn)) continue;
            switch (w) {
            case 1: packed1(t, b + g * tb, kn, jn); break;
            case 2: packed2(t, b + g * tb, kn, jn); break;
            case 4: packed4(t, b + g * tb, kn, jn); break;
            default: packed8(t, b + g * tb, kn, jn); break;
            }
        }
    }
    if (stream)
        dmls_isa.stream_copy(d, b, m * tb);
    else
        memcpy(d, b, (size_t)(m * tb));
#else
    (void)w; (void)s; (void)sstep; (void)d; (void)kn; (void)jn; (void)m; (void)stream; (void)next; (void)nm;
    (void)a; (void)b;
#endif
}

void dmls_tiny_tile(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn, char *stage) {
#if DMLSTRIDE_HAVE_SIMD
    if (dmls_tiny_words4(w, kn, jn)) {
        tiny2_k4(s, iss, d, kds, jn);
        return;
    }
    switch (w) {
    case 1: tiny1(s, iss, d, kds, kn, jn, stage); return;
    case 2: tiny2(s, iss, d, kds, kn, jn, stage); return;
    case 4: tiny4(s, iss, d, kds, kn, jn, stage); return;
    default: tiny8(s, iss, d, kds, kn, jn, stage); return;
    }
#else
    (void)w; (void)s; (void)iss; (void)d; (void)kds; (void)kn; (void)jn; (void)stage;
#endif
}
