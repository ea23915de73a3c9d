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
#endif

void dmls_tiny_tile(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn, char *stage) {
#if DMLSTRIDE_HAVE_SIMD
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
