/* Runs of bytes written as whole 64-byte lines: the copy loop that streams
   them (or stores them aligned), and a line held between runs that continue
   each other, so that a line cut by a run's end is streamed whole with the
   next run's first bytes rather than written in two parts with ordinary
   stores (a read for ownership and a merge each).  SSE2 only. */
#ifndef DMLS_LINES_H
#define DMLS_LINES_H

#include "isa.h"

#include <stdint.h>

/* Bytes from p to the next 64-byte line boundary (0 on one). */
static inline int64_t dmls_line_gap(const void *p) {
    return (int64_t)((64 - ((uintptr_t)p & 63)) & 63);
}

#if DMLSTRIDE_HAVE_SIMD
#include <emmintrin.h>
#include <string.h>

/* One 64-byte step of dmls_copy_body: s + i to d + i. */
static inline void dmls_copy_line(char *d, const char *s, int64_t i, const int stream) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
    if (stream) {
        _mm_stream_si128((__m128i *)(void *)(d + i), x0);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), x1);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), x2);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), x3);
    } else {
        _mm_store_si128((__m128i *)(void *)(d + i), x0);
        _mm_store_si128((__m128i *)(void *)(d + i + 16), x1);
        _mm_store_si128((__m128i *)(void *)(d + i + 32), x2);
        _mm_store_si128((__m128i *)(void *)(d + i + 48), x3);
    }
}

/* A run of at least DMLS_BACKWARD_MIN bytes whose destination lies 1 to
   DMLS_BACKWARD_SPAN - 1 bytes past its source modulo 4 KiB is copied from
   its end back to its start.  Copied forwards, the loads run a few steps
   ahead of the stores, and each load then meets an earlier store to the
   same address modulo 4 KiB (4K aliasing): the core takes the load to
   depend on the store and holds it back.  Backwards, every load lies below
   the stores before it.  A destination before its source modulo 4 KiB
   aliases the other way round, and goes forwards.  Two builds, each
   setting in its own process, alternating (2 threads): float32 copies of
   64 MiB 1-100 bytes past took 1.01-1.08x the aligned time forwards and
   0.99-1.05x backwards (three runs each); from a source the caches hold
   (pages never written, which all read as the one zero page) 1.13-1.60x
   and 0.99-1.00x; of 1 and 8 MiB, in cache, 88 bytes past 1.10-1.17x and
   0.99-1.02x.  At 200-400 bytes past both ran as fast as aligned. */
#define DMLS_BACKWARD_MIN 1024
#define DMLS_BACKWARD_SPAN 512

/* Copy n bytes to a 16-byte aligned d, 64 bytes per step, with streaming
   or ordinary aligned stores (stream is a constant where this is inlined),
   backwards where the destination lies just past the source (above). */
static inline void dmls_copy_body(char *d, const char *s, int64_t n, const int stream) {
    const int64_t body = n & ~(int64_t)63;
    int64_t i;
    if (n >= DMLS_BACKWARD_MIN && ((uintptr_t)d - (uintptr_t)s - 1) % 4096 < DMLS_BACKWARD_SPAN - 1) {
        memcpy(d + body, s + body, (size_t)(n - body));
        for (i = body - 64; i >= 0; i -= 64) dmls_copy_line(d, s, i, stream);
        return;
    }
    for (i = 0; i < body; i += 64) dmls_copy_line(d, s, i, stream);
    memcpy(d + body, s + body, (size_t)(n - body));
}

/* A line held between runs: the first gap bytes of the line at `at`, kept
   in line (64 bytes the caller provides); gap 0 when none is held. */
typedef struct {
    char *line;
    char *at;
    int64_t gap;
} dmls_held_line;

/* The held line before a run of n bytes from s to d: filled from s and
   streamed whole if d continues it and n bytes fill it (returns the bytes
   of s it took), else written as it is with ordinary stores (returns 0). */
static inline int64_t dmls_held_take(dmls_held_line *h, char *d, const char *s, int64_t n) {
    int64_t need = 0;
    if (h->gap > 0) {
        need = 64 - h->gap;
        if (d == h->at + h->gap && n >= need) {
            memcpy(h->line + h->gap, s, (size_t)need);
            dmls_copy_body(h->at, h->line, 64, 1);
        } else {
            memcpy(h->at, h->line, (size_t)h->gap);
            need = 0;
        }
        h->gap = 0;
    }
    return need;
}

/* A run's last n bytes (under a line) from s to d: held where hold is set,
   else written with ordinary stores. */
static inline void dmls_held_put(dmls_held_line *h, char *d, const char *s, int64_t n, int hold) {
    if (n > 0 && hold) {
        memcpy(h->line, s, (size_t)n);
        h->at = d;
        h->gap = n;
    } else {
        memcpy(d, s, (size_t)n);
    }
}

/* n bytes from s to d with streaming stores for whole lines.  A held line
   that d continues, with n bytes enough to fill it, is filled and streamed
   whole; one that d does not continue is written as it is, with ordinary
   stores.  The bytes before d's first line boundary and after its last take
   ordinary stores, except that the last ones are held instead when hold is
   set (the next run is expected to continue them; the caller writes the
   last run with hold clear, or its held bytes stay unwritten). */
static inline void dmls_lines_out(dmls_held_line *h, char *d, const char *s, int64_t n, int hold) {
    const int64_t took = dmls_held_take(h, d, s, n);
    int64_t head, body;
    d += took;
    s += took;
    n -= took;
    head = dmls_line_gap(d);
    if (head > n) head = n;
    memcpy(d, s, (size_t)head);
    d += head;
    s += head;
    n -= head;
    body = n & ~(int64_t)63;
    dmls_copy_body(d, s, body, 1);
    dmls_held_put(h, d + body, s + body, n - body, hold);
}
#endif

#endif
