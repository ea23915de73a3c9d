/* The run tile's stage for 3-byte runs with SSSE3 (pshufb), compiled with a
   function attribute and chosen at run time: the wheel's baseline stays
   SSE2. */
#include "tile-runs.h"

#include "isa.h"

#if DMLSTRIDE_HAVE_SSSE3
#include <tmmintrin.h>

/* Runs 0..na-1 of source rows 0..nj-1 (row b at s + b * iss, run a at
   3 a) into stage row a (pitch P) at 3 b, for four rows by four runs at a
   time: each row's 16 bytes from run a widened to four 4-byte lanes (one
   run each), the 4 x 4 lanes transposed, each run's four narrowed back to
   12 bytes and stored as 16: the 4 over land where the next four rows go
   (stored after) or on the stage row's padding.  nj and na are multiples
   of 4; every row holds at least na + 2 runs (the 16-byte loads stay
   within them). */
__attribute__((target("ssse3")))
void dmls_run3_stage_ssse3(const char *s, int64_t iss, char *stage, int64_t P, int64_t nj, int64_t na) {
    const __m128i widen = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
    const __m128i narrow = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    int64_t a, b;
    for (b = 0; b < nj; b += 4) {
        const char *r0 = s + b * iss, *r1 = r0 + iss, *r2 = r1 + iss, *r3 = r2 + iss;
        char *t = stage + b * 3;
        for (a = 0; a < na; a += 4) {
            const __m128i x0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(r0 + 3 * a)), widen);
            const __m128i x1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(r1 + 3 * a)), widen);
            const __m128i x2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(r2 + 3 * a)), widen);
            const __m128i x3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(r3 + 3 * a)), widen);
            const __m128i t0 = _mm_unpacklo_epi32(x0, x1), t1 = _mm_unpacklo_epi32(x2, x3);
            const __m128i t2 = _mm_unpackhi_epi32(x0, x1), t3 = _mm_unpackhi_epi32(x2, x3);
            _mm_storeu_si128((__m128i *)(void *)(t + a * P), _mm_shuffle_epi8(_mm_unpacklo_epi64(t0, t1), narrow));
            _mm_storeu_si128((__m128i *)(void *)(t + (a + 1) * P), _mm_shuffle_epi8(_mm_unpackhi_epi64(t0, t1), narrow));
            _mm_storeu_si128((__m128i *)(void *)(t + (a + 2) * P), _mm_shuffle_epi8(_mm_unpacklo_epi64(t2, t3), narrow));
            _mm_storeu_si128((__m128i *)(void *)(t + (a + 3) * P), _mm_shuffle_epi8(_mm_unpackhi_epi64(t2, t3), narrow));
        }
    }
}
#else
typedef int dmls_tile_runs_ssse3_empty;   /* ISO C: no empty translation unit */
#endif
