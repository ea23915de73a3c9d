/* Lines asked for ahead of their use: one address into L1 or L2, or every
   line of a range of bytes. */
#ifndef DMLS_PREFETCH_H
#define DMLS_PREFETCH_H

#include <stdint.h>

/* DMLS_PREFETCH_W: a line about to be written, into L1: a read prefetch
   on the baseline x86-64 build (PREFETCHW is not in it); a line no other
   core holds arrives exclusive, and the store needs no further request. */
#if defined(__GNUC__) || defined(__clang__)
#define DMLS_PREFETCH_L1(p) __builtin_prefetch((p), 0, 3)
#define DMLS_PREFETCH_L2(p) __builtin_prefetch((p), 0, 2)
#define DMLS_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define DMLS_PREFETCH_L1(p) ((void)(p))
#define DMLS_PREFETCH_L2(p) ((void)(p))
#define DMLS_PREFETCH_W(p) ((void)(p))
#endif

/* Always inlined: GCC finds that a function which only asks for lines
   writes nothing, and drops the calls to one it keeps out of line (in the
   run tile's variants it did, and no line was asked for). */
#if defined(__GNUC__) || defined(__clang__)
#define DMLS_PREFETCH_INLINE __attribute__((always_inline)) inline
#else
#define DMLS_PREFETCH_INLINE inline
#endif

/* The lines of the n bytes (n >= 1) from p: an address every 64 bytes and
   the last byte's, into L1 or into L2. */
static DMLS_PREFETCH_INLINE void dmls_prefetch_l1_lines(const char *p, int64_t n) {
    int64_t q;
    for (q = 0; q < n; q += 64) DMLS_PREFETCH_L1(p + q);
    DMLS_PREFETCH_L1(p + n - 1);
}
static DMLS_PREFETCH_INLINE void dmls_prefetch_l2_lines(const char *p, int64_t n) {
    int64_t q;
    for (q = 0; q < n; q += 64) DMLS_PREFETCH_L2(p + q);
    DMLS_PREFETCH_L2(p + n - 1);
}

/* The lines of the n bytes (n >= 1) from p that the run fills only in
   part, its first and its last, to be written (a run written with
   streaming stores writes those with ordinary ones, each of which would
   wait for its line to be read for ownership). */
static DMLS_PREFETCH_INLINE void dmls_prefetch_w_end_lines(const char *p, int64_t n) {
    if ((uintptr_t)p % 64 != 0) DMLS_PREFETCH_W(p);
    if ((uintptr_t)(p + n) % 64 != 0) DMLS_PREFETCH_W(p + n - 1);
}

#endif
