/* Short copies without a call: short contiguous rows, the staging rows
   of the blocked transpose and the rows of a padded micro-block are a few
   bytes to a few lines long, where a memcpy call costs more than the
   moves. */
#ifndef DMLS_COPY_SHORT_H
#define DMLS_COPY_SHORT_H

#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define DMLS_COPY_INLINE __attribute__((always_inline)) inline
#else
#define DMLS_COPY_INLINE inline
#endif

/* The first and the last m bytes of n (m <= n <= 2 m; m a constant where
   it is inlined): the bytes where they meet are written twice, with the
   same values.  No buffer on the stack: the blocked transpose inlines this
   in every variant of its tile loop, and arrays there (with a sanitizer's
   guard zones) overflowed a thread stack of 32 KiB. */
static DMLS_COPY_INLINE void dmls_copy_ends(char *d, const char *s, int64_t n, int m) {
    memcpy(d, s, (size_t)m);
    memcpy(d + n - m, s + n - m, (size_t)m);
}

/* n bytes from s to d (no overlap): up to 64 bytes as two overlapping
   moves of 32, 16, 8 or 4 (byte by byte under 4); longer, 16-byte moves,
   the last one overlapping the one before. */
static DMLS_COPY_INLINE void dmls_copy_short(char *d, const char *s, int64_t n) {
    int64_t i;
    if (n > 64) {
        for (i = 0; i + 16 < n; i += 16) memcpy(d + i, s + i, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 32) {
        dmls_copy_ends(d, s, n, 32);
    } else if (n >= 16) {
        dmls_copy_ends(d, s, n, 16);
    } else if (n >= 8) {
        dmls_copy_ends(d, s, n, 8);
    } else if (n >= 4) {
        dmls_copy_ends(d, s, n, 4);
    } else {
        for (i = 0; i < n; i++) d[i] = s[i];
    }
}

/* n bytes from s to d (no overlap), n > 64 and a multiple of 32: all four
   loads of each 64 bytes before its stores (the last 64 overlapping the
   ones before), as glibc's memcpy does, rather than a load and a store at
   a time.  The short rows of a (0, 2, 1, 3) permutation of 96-256 bytes
   ran 1.1-1.8x faster so (in one process, alternating, 2 threads); rows of
   150-208 bytes ran 0.7-0.95x, and take dmls_copy_short. */
#if defined(__SSE2__)
#include <emmintrin.h>
static DMLS_COPY_INLINE void dmls_copy_blocks(char *d, const char *s, int64_t n) {
    int64_t i = 0;
    __m128i a, b, c, e;
    for (;;) {
        if (i + 64 > n) i = n - 64;
        a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_storeu_si128((__m128i *)(void *)(d + i), a);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 16), b);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 32), c);
        _mm_storeu_si128((__m128i *)(void *)(d + i + 48), e);
        i += 64;
        if (i >= n) return;
    }
}

/* The w-byte value at s (w = 1, 2, 4 or 8) in every lane: loaded at its
   own width, since a load that spans a wider zeroed variable and the
   narrower copy into it waits for both stores to retire (a short-row fill
   spent most of its time there). */
static DMLS_COPY_INLINE __m128i dmls_splat(const char *s, int w) {
    switch (w) {
    case 1: return _mm_set1_epi8(*s);
    case 2: { int16_t x; memcpy(&x, s, 2); return _mm_set1_epi16(x); }
    case 4: { int32_t x; memcpy(&x, s, 4); return _mm_set1_epi32(x); }
    default: { int64_t x; memcpy(&x, s, 8); return _mm_set1_epi64x(x); }
    }
}

/* n bytes (n >= 16, a multiple of the value's width) of the pattern v:
   16-byte stores, the last one overlapping the one before (16 being a
   multiple of the width keeps the values in step). */
static DMLS_COPY_INLINE void dmls_fill_splat(char *d, __m128i v, int64_t n) {
    int64_t i;
    for (i = 0; i + 16 < n; i += 16) _mm_storeu_si128((__m128i *)(void *)(d + i), v);
    _mm_storeu_si128((__m128i *)(void *)(d + n - 16), v);
}
#define DMLS_HAVE_FILL_SPLAT 1
#else
#define dmls_copy_blocks dmls_copy_short
#endif

#endif
