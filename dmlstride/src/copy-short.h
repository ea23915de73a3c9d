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

#endif
