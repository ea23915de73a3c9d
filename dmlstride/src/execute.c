#include "execute.h"

#include <string.h>

#include "block.h"
#include "copy-short.h"
#include "elements.h"
#include "isa.h"
#include "lines.h"
#include "nibble.h"
#include "pool.h"
#include "prefetch.h"
#include "scratch.h"
#include "tile.h"
#include "tile-runs.h"
#include "tile-tiny.h"

/* A transposition with few source-fast channels (DMLS_SMALL_TILE) goes
   channel by channel, or de-interleaved (2-4), except 5-8 channels, which
   the SIMD kernels of the transposing tile take: 5-8 of four or eight
   bytes and 8 of two (a whole register micro-block) in micro-blocks (NHWC
   to NCHW: 7 float32 channels 1.4-1.9x faster, 8 float16 ones 3x), fewer
   bytes a pixel read 16 bytes a pixel (dmls_isa.rows_short: 5-8 one-byte
   channels 2.1-2.7x faster, 5-7 two-byte ones 1.6-2x).  Those kernels
   need both sides' runs contiguous. */
static inline int few_channels(const dmls_plan *p) {
    const int64_t kn = p->tile_size, w = p->width;
    return kn <= 4 || (kn <= DMLS_SMALL_TILE && (dmls_isa.level < DMLS_ISA_SSE2 || p->tile_src_stride != w ||
                                                   p->inner_dst_stride != w));
}

/* Bytes of interleaved pixels staged at a time before they are streamed. */
#define DMLS_INTERLEAVE_CHUNK 4096
typedef char dmls_interleave_chunk_fits[DMLS_INTERLEAVE_CHUNK + 64 <= DMLS_SCRATCH_REGION ? 1 : -1];

#if defined(DMLS_HAVE_FILL_SPLAT) && DMLSTRIDE_HAVE_SIMD
#define DMLS_HAVE_FILL_STREAM 1
/* n bytes (n >= 16, a multiple of the value's width) of the pattern v from
   d, in a fill that streams (the planner's fill_streams: contiguous rows of
   128 bytes or more, with a large L3), as dmls_lines_out writes a run: its
   whole 64-byte lines with streaming stores; a line held from the row
   before (h) that d continues filled with the row's first bytes and
   streamed whole; the bytes after the row's last line boundary held in
   turn where hold is set (the next row continues them), else written with
   ordinary stores, as are those before its first boundary that no held
   line takes.  pat holds the pattern as it falls from d on, 16 being a
   multiple of the width: the bytes x past d are pat + x % 16 on.  With a
   large L3, ordinary stores filled outputs of 24-491 MB broadcast along W
   at 16-27 GB/s, 1.00-1.38x PyTorch's copy_ and 0.76 of the memcpy limit
   at 491 MB; so streamed, those past the streaming size (rows of 1-16 KB)
   at 41-45 GB/s, 2.1-2.9x PyTorch and 1.98 of the limit at 491 MB, timed
   as the harness does.  Each row's ends written with ordinary stores
   instead of held, a row of 600 bytes after another ran at half that. */
static void fill_lines_out(dmls_held_line *h, char *d, __m128i v, int64_t n, int hold) {
    char pat[96];
    int64_t x, head, end, i;
    __m128i a;
    for (i = 0; i < 96; i += 16) _mm_storeu_si128((__m128i *)(void *)(pat + i), v);
    x = dmls_held_take(h, d, pat, n);   /* (under 64 bytes of pat) */
    head = dmls_line_gap(d + x);
    if (head > n - x) head = n - x;
    memcpy(d + x, pat + x % 16, (size_t)head);
    x += head;
    end = x + (n - x) / 64 * 64;
    a = _mm_loadu_si128((const __m128i *)(const void *)(pat + x % 16));
    for (i = x; i < end; i += 64) {
        _mm_stream_si128((__m128i *)(void *)(d + i), a);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), a);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), a);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), a);
    }
    dmls_held_put(h, d + end, pat + end % 16, n - end, hold);
}
#endif

/* Elements j0..j1 of the innermost dimension at outer offsets (so, do_). */
static void row(const dmls_plan *p, const char *s, char *d, int64_t so, int64_t do_,
                int64_t j0, int64_t j1, const dmls_rows *next, char *d_next, char *scratch) {
    const int w = p->width;
    const int64_t n = j1 - j0, iss = p->inner_src_stride, ids = p->inner_dst_stride;
    switch (p->mode) {
    case DMLS_MODE_BLOCK:
        dmls_block(p, s + so, d + do_, j0, j1, next != NULL ? next->s : NULL, d_next, scratch);
        return;
    case DMLS_MODE_NIBBLE:
        dmls_nibble_row(p, (const uint8_t *)s, (uint8_t *)d, so + j0 * iss, do_ + j0 * ids, n, iss, ids);
        return;
    case DMLS_MODE_INTERLEAVE:
        if (p->stream && ids == p->tile_size * w) {
            /* Pixels back to back in a copy far larger than the caches:
               DMLS_INTERLEAVE_CHUNK bytes of them at a time interleaved
               into the scratch region, at the destination's offset within
               a line, then written out with streaming stores (whole lines;
               their ends with ordinary ones). */
            const int64_t px = DMLS_INTERLEAVE_CHUNK / ids;
            const char *sp = s + so;
            char *dp = d + do_;
            int64_t j, m;
            for (j = j0; j < j1; j += m) {
                char *buf = scratch + ((uintptr_t)(dp + j * ids) & 63);
                m = j1 - j < px ? j1 - j : px;
                DMLS_BY_WIDTH(w, dmls_interleave_, (sp + j * iss, buf, p->tile_size, p->tile_src_stride, m));
                dmls_isa.stream_copy(dp + j * ids, buf, m * ids);
            }
            return;
        }
        DMLS_BY_WIDTH(w, dmls_interleave_, (s + so + j0 * iss, d + do_ + j0 * ids, p->tile_size,
                                            p->tile_src_stride, n));
        return;
    case DMLS_MODE_TILE:
        if (dmls_run_tile_width(w))   /* runs of 3, 5-7 or 9-64 bytes */
            dmls_run_tile(w, s + so + j0 * iss, iss, d + do_ + j0 * ids, p->tile_dst_stride, p->tile_size, n,
                          scratch);
        else if (few_channels(p))
            DMLS_BY_WIDTH(w, dmls_small_k_, (s + so, d + do_, p->tile_size, p->tile_src_stride,
                                             p->tile_dst_stride, j0, j1, iss, ids));
        else
            dmls_transpose(p, s + so, d + do_, j0, j1, next, scratch);
        return;
    default:
        break;
    }
    s += so + j0 * iss;
    d += do_ + j0 * ids;
    if (p->mode == DMLS_MODE_MEMCPY) {
        /* a batch of rows (only short ones are batched, and those run in
           dmls_run_tasks: this keeps any other caller exact) */
        const int64_t kn = p->tile_size > 0 ? p->tile_size : 1;
        int64_t k;
        for (k = 0; k < kn; k++) {
            if (p->stream && n * w >= DMLS_STREAM_MIN_RUN)
                dmls_isa.stream_copy(d + k * p->tile_dst_stride, s + k * p->tile_src_stride, n * w);
            else
                dmls_isa.copy(d + k * p->tile_dst_stride, s + k * p->tile_src_stride, n * w);
        }
    } else if (p->mode == DMLS_MODE_FILL) {
        /* ordinary stores, save for whole lines of fills that stream (the
           planner's fill_streams, a large L3's) */
#ifdef DMLS_HAVE_FILL_STREAM
        if (p->stream && ids == w && n * w >= 16) {
            dmls_held_line none = {NULL, NULL, 0};
            fill_lines_out(&none, d, dmls_splat(s, w), n * w, 0);
        } else
#endif
        if (w == 1 && ids == 1)
            memset(d, *(const unsigned char *)s, (size_t)n);
#ifdef DMLS_HAVE_FILL_SPLAT
        else if (ids == w && n * w >= 16)
            dmls_fill_splat(d, dmls_splat(s, w), n * w);
#endif
        else
            DMLS_BY_WIDTH(w, dmls_fill_, (s, d, n, ids));
    } else {
        /* a batch of strided rows (only short ones are batched, and those
           run in dmls_run_tasks: this keeps any other caller exact) */
        const int64_t kn = p->tile_size > 0 ? p->tile_size : 1;
        int64_t k;
        for (k = 0; k < kn; k++)
            DMLS_BY_WIDTH(w, dmls_strided_, (s + k * p->tile_src_stride, d + k * p->tile_dst_stride, n, iss, ids));
    }
}

/* Advance the outer-dimension odometer idx and both offsets. */
static inline void next_outer(const dmls_plan *p, int64_t *idx, int64_t *so, int64_t *do_) {
    int i;
    for (i = p->outer_ndim - 1; i >= 0; i--) {
        idx[i]++;
        *so += p->outer_src_stride[i];
        *do_ += p->outer_dst_stride[i];
        if (idx[i] < p->outer_size[i]) return;
        *so -= p->outer_size[i] * p->outer_src_stride[i];
        *do_ -= p->outer_size[i] * p->outer_dst_stride[i];
        idx[i] = 0;
    }
}

/* The tasks from the current one, at most left, before the innermost outer
   dimension carries: a run of rows at that dimension's fixed strides. */
static inline int64_t run_left(const dmls_plan *p, const int64_t *idx, int64_t left) {
    const int last = p->outer_ndim - 1;
    const int64_t m = p->outer_size[last] - idx[last];
    return m < left ? m : left;
}

/* Advance the odometer m tasks along such a run (m <= run_left): the last
   step through next_outer, which carries. */
static inline void next_run(const dmls_plan *p, int64_t *idx, int64_t *so, int64_t *do_, int64_t m) {
    const int last = p->outer_ndim - 1;
    idx[last] += m - 1;
    *so += (m - 1) * p->outer_src_stride[last];
    *do_ += (m - 1) * p->outer_dst_stride[last];
    next_outer(p, idx, so, do_);
}

/* m rows of n bytes, sstep bytes apart from s, to rows dstep bytes apart
   from d (dmls_copy_blocks where blocks is set): a run along the innermost
   outer dimension (run_left), its offsets in locals rather than stepped
   through the odometer, whose index and strides every store through a char
   pointer made the compiler reload (a task's few bytes took less time than
   that, in a profile of a joined uint8 interleave of 16-byte tasks).  Two
   builds alternating in one process (2 threads, 7 rounds): 26 unnamed 4-D
   to 6-D permutations of 8-61 MB whose tasks the executor joins along the
   source (joined_pixels) ran 1.10x faster by geometric mean (0.93-1.62x,
   19 faster), 14 of 14-56 MB with tasks of 16-96 bytes 1.07x (0.96-1.36x),
   24 of 1.4-4.9 MB keeping a last dimension of 16-256 bytes 1.06x
   (0.86-1.32x, 19 faster). */
static inline void copy_rows(char *d, const char *s, int64_t n, int64_t m, int64_t sstep, int64_t dstep,
                             int blocks) {
    int64_t g;
    if (blocks)
        for (g = 0; g < m; g++) dmls_copy_blocks(d + g * dstep, s + g * sstep, n);
    else
        for (g = 0; g < m; g++) dmls_copy_short(d + g * dstep, s + g * sstep, n);
}

/* Source and destination offsets of outer index o. */
static inline void outer_offsets(const dmls_plan *p, int64_t o, int64_t *idx, int64_t *so, int64_t *do_) {
    int i;
    *so = *do_ = 0;
    for (i = p->outer_ndim - 1; i >= 0; i--) {
        idx[i] = o % p->outer_size[i];
        o /= p->outer_size[i];
        *so += idx[i] * p->outer_src_stride[i];
        *do_ += idx[i] * p->outer_dst_stride[i];
    }
}

/* The outer index and offsets of a task a few on from the current one:
   the loops that ask for a task's lines before they copy it keep one. */
typedef struct {
    int64_t idx[DMLS_MAX_DIMS];
    int64_t so, do_;
} dmls_odometer;

/* o: n tasks on from the one at idx, so, do_. */
static inline void odometer_ahead(const dmls_plan *p, dmls_odometer *o, const int64_t *idx, int64_t so,
                                  int64_t do_, int64_t n) {
    int64_t i;
    memcpy(o->idx, idx, (size_t)p->outer_ndim * sizeof *idx);
    o->so = so;
    o->do_ = do_;
    for (i = 0; i < n; i++) next_outer(p, o->idx, &o->so, &o->do_);
}

static inline void odometer_step(const dmls_plan *p, dmls_odometer *o) {
    next_outer(p, o->idx, &o->so, &o->do_);
}

/* Runs of tasks along the innermost outer dimension (run_left): o is set to
   the first task after the m from idx, so, do_ (the current run, of left
   tasks still to go in all); returns the length of the run o starts, at
   most cap (0 when no task is left). */
static inline int64_t run_after(const dmls_plan *p, dmls_odometer *o, const int64_t *idx, int64_t so,
                                int64_t do_, int64_t m, int64_t left, int64_t cap) {
    int64_t n;
    memcpy(o->idx, idx, (size_t)p->outer_ndim * sizeof *idx);
    o->so = so;
    o->do_ = do_;
    next_run(p, o->idx, &o->so, &o->do_, m);
    n = m < left ? run_left(p, o->idx, left - m) : 0;
    return n < cap ? n : cap;
}

/* Move idx, so, do_ on to o's task. */
static inline void odometer_take(const dmls_plan *p, const dmls_odometer *o, int64_t *idx, int64_t *so,
                                 int64_t *do_) {
    memcpy(idx, o->idx, (size_t)p->outer_ndim * sizeof *idx);
    *so = o->so;
    *do_ = o->do_;
}

/* Ask for the lines of kn source rows of n bytes, kss apart, of the task o
   is at (into L1, or into L2 where into_l1 is 0), and move o on to the next
   task. */
static inline void odometer_ask(const dmls_plan *p, dmls_odometer *o, const char *s, int64_t kn, int64_t kss,
                                int64_t n, int into_l1) {
    int64_t k;
    for (k = 0; k < kn; k++) {
        if (into_l1)
            dmls_prefetch_l1_lines(s + o->so + k * kss, n);
        else
            dmls_prefetch_l2_lines(s + o->so + k * kss, n);
    }
    odometer_step(p, o);
}

/* How many elements to move the segment boundaries of a row back so that
   each boundary falls on a destination cache line: 0 unless the row's
   destination is contiguous and off a line boundary.  Then no line is
   split between two segments (which may run on different threads), and a
   segment's body is whole lines (which streaming stores and the tile path's
   line strips need).  Segments are multiples of 64 elements, so moving every
   interior boundary back by the same e - a elements (fewer than one line)
   keeps each segment non-empty. */
static inline int64_t segment_shift(const dmls_plan *p, const char *d, int64_t do_) {
    const int64_t w = p->width, e = 64 / p->width;
    uintptr_t off = (uintptr_t)(d + do_) % 64;
    if (p->segments < 2 || p->inner_dst_stride != w || p->segment_len % e != 0 ||
            off % (uintptr_t)w != 0 || off == 0 ||
            (p->mode != DMLS_MODE_MEMCPY && p->mode != DMLS_MODE_TILE))
        return 0;
    return e - (int64_t)(64 - off) / w;
}

/* Elements [*j0, *j1) of segment seg of a row whose boundaries move back
   by shift (segment_shift). */
static inline void segment_range(const dmls_plan *p, int64_t seg, int64_t shift, int64_t *j0, int64_t *j1) {
    *j0 = seg == 0 ? 0 : seg * p->segment_len - shift;
    *j1 = seg + 1 == p->segments ? p->inner_size : (seg + 1) * p->segment_len - shift;
}

/* Tasks t0..t1 of a transpose cut into pieces of k (tile_pieces): task t
   is segment t % (outer_count x segments) of piece t / (outer_count x
   segments), as where k divides evenly and its pieces are an outer
   dimension.  So the pool's lanes, runs of consecutive tasks, cut the
   destination by rows of k, and the destination lines that neighbouring
   segments of a row share are written by one thread.  Pieces in turn
   within each segment, as they were, handed the two threads neighbouring
   segments of the same rows on every call: on a virtual machine of two
   vCPUs, whenever they were placed on cores far apart (a cache-line round
   trip between them of 320-350 ns rather than 50-65 ns, for tens of
   seconds at a time), each such line crossed between their caches on
   every call, and a 1978 x 1103 uint32 gather on two threads ran at 7-11
   GB/s, half its speed on one.  Two builds alternating, each round timed
   between two round-trip probes (2 threads, 24 rounds): 16 unnamed copies
   planned in pieces of 3-16 MB ran 1.25x faster by geometric mean with the
   cores far apart (0.93-3.28x; 2-D uint32 and float64 gathers
   1.31-3.28x) and 1.05x with them close (0.84-1.21x; a 2222 x 1333 uint32
   gather 0.84x). */
static void run_pieces(const dmls_plan *p, const char *s, char *d, int64_t t0, int64_t t1, char *scratch) {
    dmls_plan q = *p;
    const int64_t per_piece = p->outer_count * p->segments;
    int64_t idx[DMLS_MAX_DIMS], so, do_, t, u, seg, k0, j0, j1;
    for (t = t0; t < t1; t++) {
        u = t % per_piece;
        seg = u % p->segments;
        k0 = t / per_piece * p->tile_piece;
        q.tile_size = p->tile_size - k0 < p->tile_piece ? p->tile_size - k0 : p->tile_piece;
        outer_offsets(p, u / p->segments, idx, &so, &do_);
        segment_range(p, seg, segment_shift(p, d, do_), &j0, &j1);
        row(&q, s + k0 * p->tile_src_stride, d + k0 * p->tile_dst_stride, so, do_, j0, j1, NULL, NULL, scratch);
    }
    if (p->stream) dmls_isa.store_fence();
}

/* Transposes of at most DMLS_TINY_TILE_BYTES per task (a permutation that
   swaps two short dimensions, as 13 x 5 int16 values of a 5-D tensor in
   50505 tasks) of which at most three quarters are whole register
   micro-blocks go element by element, the width chosen once for all tasks:
   the SIMD kernels' set-up and ragged edges cost more per task than they
   save: 12 unnamed 5-D and 6-D permutations of 3-25 MB of one to four bytes
   per value went from 0.16 to 0.23 of the memcpy limit (geometric mean;
   13 x 5 int16 tiles 0.13 -> 0.35, none slower).  A 16 x 9 float16 tile,
   almost all in micro-blocks, ran at 0.6x element by element. */
#define DMLS_TINY_TILE_BYTES 512
static inline int tiny_tiles(const dmls_plan *p) {
    const int64_t kn = p->tile_size, jn = p->inner_size, n = 16 / p->width;
    if (p->mode != DMLS_MODE_TILE || p->segments != 1 || kn * jn * p->width > DMLS_TINY_TILE_BYTES ||
            dmls_run_tile_width(p->width))
        return 0;
    return (kn - kn % n) * (jn - jn % n) * 4 <= kn * jn * 3;
}

/* Tiles whose rows are 8 to DMLS_TINY_ROW bytes on both sides, both
   contiguous, go through the two stages of dmls_tiny_tile (tile-tiny.h):
   one-byte values where the tile is tiny (tiny_tiles), wider ones
   whatever their count.  In one process on the same buffers, alternating
   (2 threads): 5-D permutations that swap the last two dimensions, 10-31
   MB, tiny tiles of uint8 1.73-4.13x faster than element by element
   (0.16-0.21 -> 0.37-0.58 of the memcpy limit; 0.62-0.90x PyTorch
   before), of int16 and uint32 even (1.02-1.09x); tiles of 2- and 4-byte
   values past tiny_tiles, which took the SIMD tile, 1.13-2.26x (9
   cases, 0.16-0.54 -> 0.33-0.75).  Larger uint8 tiles keep the SIMD tile
   and its pairs of micro-blocks (0.87-1.36x staged).  Tiles of four
   two-byte values a source row and eight or more rows take dmls_tiny_tile
   too, whatever their length: its word kernel (dmls_tiny_words4). */
typedef char dmls_tiny_stage_fits[DMLS_TINY_STAGE <= DMLS_SCRATCH_REGION ? 1 : -1];
static inline int staged_tiles(const dmls_plan *p) {
    if (p->mode != DMLS_MODE_TILE || p->segments != 1 || p->tile_pieces > 1 ||
            p->tile_src_stride != p->width || p->inner_dst_stride != p->width)
        return 0;
    if (dmls_tiny_words4(p->width, p->tile_size, p->inner_size))
        return 1;
    if (!dmls_tiny_tile_fits(p->width, p->tile_size, p->inner_size))
        return 0;
    return p->width > 1 || tiny_tiles(p);
}

/* Tiles contiguous on both sides (a permutation that swaps the last two
   dimensions of a batch: each task's source is kn * jn values back to
   back, and so is its destination), within dmls_packed_fits's buffers
   (under 16 KiB), go through dmls_packed_tiles, runs of tasks whose
   destinations lie back to back (the innermost outer dimension steps the
   destination by a tile) DMLS_PACKED_RUN_BYTES at a time: each such tile
   had been a task of its own through the stages above or dmls_transpose,
   whose set-up cost more than the tile's blocks (a float16 scatter of
   11 x 18 tiles, 396 bytes a task, ran at 0.46 of the memcpy limit).  Two
   builds alternating (2 threads, 3 rounds), tiles of at most 4 KiB: 24
   fresh unnamed gathers and scatters of 2-70 MB so planned ran 1.50x
   faster by geometric mean (1.04-2.94x), 24 others of 4-70 MB 1.51x
   (0.83-2.94x), 23 of 1-10 MB that do not stream 1.33x (0.69-1.90x);
   tiles of 4-16 KiB, which the planner's staged tasks or the general tile
   path took, 1.25x, 1.18x and on a fresh set 1.22x (20 each, 0.82-1.91x;
   the slowest where the old path ran at 18-23 GB/s).  Rows of fewer than
   DMLS_PACKED_MIN_ROW bytes a side (DMLS_PACKED_MIN_BYTE_ROW for one-byte
   values), whose padded blocks are mostly padding, keep their paths (a
   de-interleave of 3 int16 values a row ran 0.58x, of 2-4 one-byte ones
   0.32-0.96x; 5-6 one-byte ones 1.45-1.73x), and so do tiles of four
   two-byte values a row, which have their word kernel (0.55x), and tiles
   past DMLS_PACKED_DEINT_BYTES of 5-7 four-byte values a row, which
   dmls_transpose's deint_k_32 takes (6 x 528 float32 tiles, 12.7 KB, ran
   0.68-0.77x; 6 x 143 ones 1.95x packed). */
#define DMLS_PACKED_RUN_BYTES 16384
/* ... but 2-4 one-byte values a row, or 2-3 two-byte ones, by at least 16
   bytes of j go through dmls_packed_tiles as de-interleaves (tile-tiny.h). */
#define DMLS_PACKED_MIN_ROW 8
#define DMLS_PACKED_MIN_BYTE_ROW 5
#define DMLS_PACKED_DEINT_BYTES 4096
typedef char dmls_packed_fits_join[DMLS_PACKED_RUN_BYTES + DMLS_PACKED_BYTES <= DMLS_SCRATCH_REGION ? 1 : -1];
static inline int packed_tiles(const dmls_plan *p) {
    const int64_t w = p->width, kn = p->tile_size, jn = p->inner_size;
    const int64_t min_row = w == 1 ? DMLS_PACKED_MIN_BYTE_ROW : DMLS_PACKED_MIN_ROW;
    return p->mode == DMLS_MODE_TILE && p->segments == 1 && p->tile_pieces <= 1 && p->l2 == DMLS_L2_NONE &&
           p->tile_src_stride == w && p->inner_dst_stride == w && dmls_packed_fits(w, kn, jn) &&
           p->inner_src_stride == kn * w && p->tile_dst_stride == jn * w &&
           (kn * w >= min_row || dmls_packed_deint(w, kn, jn)) && jn * w >= min_row &&
           !dmls_tiny_words4(w, kn, jn) &&
           !(w == 4 && kn >= 5 && kn <= 7 && kn * jn * w > DMLS_PACKED_DEINT_BYTES);
}

/* Runs of tiny tiles joined into one.  A tile whose destination rows go
   on in the next task's (the innermost outer dimension steps the
   destination by the tile's row, jn values) while its source rows lie
   elsewhere (a 6-D permutation: 2 x 11 uint32 values a task, 88 bytes,
   in 59400 tasks) is a few short copies and a transpose of a few values
   per task.  Up to DMLS_JOIN_BYTES of source rows of such a run of tasks
   are copied, tile after tile, into a buffer, each tile's rows
   inner_src_stride apart as they are in the source; the buffer is then
   one tile of the run's jn values per row, which the tile path transposes
   with its kernels for long tiles, writing each destination row once
   over the whole run.  Tiles of at most DMLS_JOIN_TILE_BYTES only (320
   bytes of four-byte values, but see below): larger ones amortise their
   own overheads.
   In one process on the same buffers, alternating with the tiles one a
   task (2 threads, 7 rounds, an A/A control beside it), through a buffer
   of 8 KiB: 17 unnamed 4-D to 6-D gathers and scatters of 2-20 MB with
   tiles of up to 1 KiB ran 1.06-4.13x faster (2.1x by geometric mean), the
   88-byte tiles above 3.6-5.4x; 8-byte values, tiles of four two-byte
   values a row (dmls_tiny_words4), larger four-byte tiles and runs of
   three tasks 0.64-1.05x, and are not joined.  Through 16 KiB, tiles of
   1.1-4 KiB of one- and two-byte values ran 1.24x faster (0.90-2.05x, 10
   gathers and scatters of 2-20 MB), and those of up to 1 KiB as fast as
   through 8 KiB (1.01x over 26).

   Plans that stream are joined as well, where a tile's destination rows
   are at most DMLS_JOIN_STREAM_ROW_BYTES (the joined tile's rows, m * jn
   values, stream as one): those past the tiny-tile path's size went one
   tile a task, rows of 40-400 bytes each streamed on its own.  Two builds
   alternating (2 threads, 3 rounds), a fresh set of 12 unnamed 4-D to 6-D
   gathers and scatters of 8-70 MB so planned ran 1.69x faster by geometric
   mean (0.79-4.26x, 10 faster; a (11, 2, 57, 5, 133, 38) int16 gather,
   2 x 38 tiles, 3.0 -> 7.0 GB/s); tuned on 12 others, where a 2 x 1220
   uint8 tile (1220-byte rows, streamed at 0.9 of the memcpy limit) ran
   0.48x joined, hence the bound.

   Four-byte values with 5 or more a source row (rows of 20 bytes and
   more) are joined in tiles of up to DMLS_JOIN_WIDE_ROWS_TILE_BYTES: two
   builds side by side (2 threads, two passes of 7 repeats), 16 unnamed
   float32 and uint32 gathers and scatters of 12-68 MB with tiles of 320
   bytes to 1 KiB ran 0.99x joined, the six with 5-6 values a row
   1.12-1.86x and the ten with 2-4 0.54-1.29x (0.80x by geometric mean);
   then, 5-6 values a row only, a fresh 16 of 12-68 MB 1.36x (0.83-2.36x,
   14 faster) and a fresh 12 of 2.5-13.6 MB, from cache, 1.96x
   (1.43-2.62x, all faster). */
#define DMLS_JOIN_BYTES 16384
#define DMLS_JOIN_TILE_BYTES 4096
#define DMLS_JOIN_WIDE_TILE_BYTES 320
#define DMLS_JOIN_WIDE_ROWS_TILE_BYTES 1024
#define DMLS_JOIN_WIDE_ROWS_MIN 5
#define DMLS_JOIN_STREAM_ROW_BYTES 512
typedef char dmls_join_fits[DMLS_JOIN_BYTES <= DMLS_SCRATCH_REGION ? 1 : -1];
/* The most tasks a run joins (0: the plan's tiles are not joined). */
static inline int64_t joined_tiles(const dmls_plan *p) {
    const int last = p->outer_ndim - 1;
    const int64_t w = p->width, kn = p->tile_size, jn = p->inner_size, iss = p->inner_src_stride;
    int64_t m;
    if (p->mode != DMLS_MODE_TILE || p->segments != 1 || p->tile_pieces > 1 || p->l2 != DMLS_L2_NONE ||
            last < 0 || (p->stream && jn * w > DMLS_JOIN_STREAM_ROW_BYTES) ||
            p->tile_src_stride != w || p->inner_dst_stride != w || kn < 1 || jn < 1 ||
            w > 4 || dmls_tiny_words4(w, kn, jn) || iss < kn * w || kn * jn * w > DMLS_JOIN_TILE_BYTES ||
            p->outer_dst_stride[last] != jn * w || p->outer_size[last] < 4 ||
            (w == 4 && kn * jn * w > (kn >= DMLS_JOIN_WIDE_ROWS_MIN ? DMLS_JOIN_WIDE_ROWS_TILE_BYTES
                                                                     : DMLS_JOIN_WIDE_TILE_BYTES)))
        return 0;
    if (jn > DMLS_JOIN_BYTES / iss) return 0;
    m = DMLS_JOIN_BYTES / (jn * iss);
    return m >= 4 ? m : 0;
}

/* The innermost outer dimensions that continue an interleave's plane rows
   in the source, each from the one inside it (the planner's source_chain,
   made innermost: chain_innermost): the tasks from the one at idx to the
   chain's end (idx NULL: the chain's tasks in all; 0 without one). */
static inline int64_t source_chain(const dmls_plan *p, const int64_t *idx) {
    int64_t want = p->inner_size * p->width, tasks = 1, left = 0;
    int i;
    for (i = p->outer_ndim - 1; i >= 0 && p->outer_size[i] > 1 && p->outer_src_stride[i] == want; i--) {
        left += (p->outer_size[i] - 1 - (idx != NULL ? idx[i] : 0)) * tasks;
        tasks *= p->outer_size[i];
        want *= p->outer_size[i];
    }
    return i == p->outer_ndim - 1 ? 0 : left + 1;
}

/* Runs of short interleaves joined the same way.  An interleave task of a
   few pixels (a 5-D permutation: 3 one-byte planes of 28 pixels a task, 84
   bytes, in 763560 tasks) whose destination goes on in the next task's
   (the innermost outer dimension steps the destination by the task's
   pixels), in a copy that streams, wrote its few pixels with streaming
   stores, parts of lines, after a few short plane rows interleaved.  Up
   to DMLS_JOIN_BYTES of such a run's plane rows are copied, plane by
   plane, into a buffer, each plane's rows back to back (the next run's
   asked for into L2 meanwhile); the buffer is then one interleave of the
   run's pixels, streamed out in whole lines.  Tasks of at most
   DMLS_JOIN_PLANES_TASK_BYTES.  Two builds alternating (2 threads, 3
   rounds): 8 unnamed 4-D to 6-D gathers and scatters of 16-64 MB so
   planned ran 1.75x faster by geometric mean (1.24-2.28x; that uint8
   gather 0.2 -> 0.4 of the memcpy limit), tuned on; a fresh set of 12
   1.71x (0.85-2.9x, 11 faster).  Copies that do not stream measured
   0.66-1.34x joined (7 in a fresh set), and are not so; those whose
   planes' rows go on in the source are joined along it (joined_pixels).
   The most tasks a run joins (0: not joined), along the destination or
   along_source (a plan joined so does not stream). */
static inline int64_t joined_interleaves(const dmls_plan *p, int along_source) {
    const int last = p->outer_ndim - 1;
    const int64_t w = p->width, c = p->tile_size, n = p->inner_size;
    int64_t m;
    if (p->mode != DMLS_MODE_INTERLEAVE || p->segments != 1 || last < 0 || c < 1 || n < 1 ||
            p->inner_src_stride != w || p->inner_dst_stride != c * w || p->tile_dst_stride != w ||
            c * n * w > DMLS_JOIN_PLANES_TASK_BYTES)
        return 0;
    if (along_source ? p->stream || n * w >= DMLS_JOIN_PIXELS_ROW_BYTES || source_chain(p, NULL) < DMLS_JOIN_MIN_TASKS
                     : !p->stream || p->outer_dst_stride[last] != n * c * w || p->outer_size[last] < DMLS_JOIN_MIN_TASKS)
        return 0;
    m = DMLS_JOIN_BYTES / (c * n * w);
    return m >= DMLS_JOIN_MIN_TASKS ? m : 0;
}
static inline int64_t joined_planes(const dmls_plan *p) { return joined_interleaves(p, 0); }

/* Runs of short interleaves whose pixels go on in the source instead (the
   innermost outer dimension steps each plane's row by the task's pixels,
   and any dimensions outside it that go on from it, source_chain; the
   planner puts such dimensions innermost, interleave_pixels_join):
   up to DMLS_JOIN_BYTES of a run's pixels are interleaved at once, from
   each plane's one long row, into a buffer, and each task's pixels are
   then copied to its destination.  Task by task, a few pixels each, the
   interleave went pixel by pixel (a 5-D uint8 gather: 5 planes of 13
   pixels a task, 491040 tasks), and each task read its planes' rows from
   as many lines, most of whose other bytes the tasks of that dimension
   read again later.  Tasks of at most DMLS_JOIN_PLANES_TASK_BYTES whose
   planes' rows are under DMLS_JOIN_PIXELS_ROW_BYTES, in runs of at least
   DMLS_JOIN_MIN_TASKS.  Two builds alternating (2 threads, 5-6 rounds),
   45 unnamed 4-D to 6-D gathers and scatters so planned ran 1.97x faster
   by geometric mean, a fresh 11 1.97x (that uint8 gather 12.0 -> 3.7 ms;
   see the planner's JOIN_PIXELS_ROW_BYTES). */
static inline int64_t joined_pixels(const dmls_plan *p) { return joined_interleaves(p, 1); }

/* Joined pixels in panels.  Where the dimension just outside the source
   chain, B, steps the destination by one task (a task's destination goes
   on in B's next row), joined pixels went a chain's run at a time: each
   task's few bytes to its own place, far from the last task's, and next to
   them only a whole chain later, DMLS_PANEL_MIN_CHAIN_BYTES of tasks or
   more on, when their lines had left L1 (an int16 scatter in order
   (2, 4, 3, 0, 5, 1): 36 bytes a task, 2504 tasks a chain, 0.2 of the
   memcpy limit).  A panel is up to DMLS_PANEL_ROW_BYTES of B's rows by as
   many of the chain's tasks as the buffer then holds: each row's pixels
   are interleaved into the buffer at once, and each task then gets the
   panel's rows as one run of its destination.  Panels are the copy's units
   of work, which the threads share (run_copy): cut out of the threads'
   ranges of tasks, they formed only where a range held whole chains, and
   on 2 threads (16 ranges) long chains never did.  Two builds alternating
   (2 threads, 4 rounds): 41 unnamed 4-D to 6-D permutations of 8-70 MB
   that panels or the planner's bounds beside them were tuned on ran 1.52x
   faster by geometric mean (0.85-4.22x, the slowest ones those off the
   bounds, whose plans are as they were); a fresh 30 (seeds 2200-2999)
   1.74x (0.97-6.33x, 29 faster; a uint8 gather of 4 planes of 7 pixels a
   task 17.4 -> 2.7 ms). */
#define DMLS_PANEL_ROW_BYTES 512
/* Whether a chain of chain_bytes of tasks of task bytes, shorter than
   DMLS_PANEL_MIN_CHAIN_BYTES, still goes in panels: its tasks far apart in
   the destination (isa.h, DMLS_PANEL_MIN_FAR_CHAIN_BYTES).  Run by run,
   each task's few bytes went to a page of their own, and the bytes beside
   them a chain later.  Two builds alternating in one process (2 threads,
   7 rounds): unnamed 4-D to 6-D permutations of 11-63 MB whose chains hold
   2-16 KiB of tasks ran 1.05-1.9x faster in panels where the tasks lie
   5.6 KiB or more apart, 0.91-0.93x where they lie within 3.1 KiB; with
   the bounds, a fresh 23 so planned 1.33x by geometric mean (0.85-4.22x,
   18 faster; a float16 scatter of 28-byte tasks 1.6 -> 6.7 GB/s).  See
   the planner's PANEL_MIN_FAR_CHAIN_BYTES. */
static inline int far_chain(const dmls_plan *p, int64_t chain_bytes, int64_t task) {
    const int64_t step = p->outer_dst_stride[p->outer_ndim - 1];
    return chain_bytes >= DMLS_PANEL_MIN_FAR_CHAIN_BYTES && task >= DMLS_PANEL_MIN_FAR_TASK_BYTES &&
           (step >= DMLS_PANEL_FAR_TASK_STRIDE || step <= -DMLS_PANEL_FAR_TASK_STRIDE);
}

/* The panel dimension B (an index into the outer dimensions; -1 where
   tasks do not go in panels) of a plan whose tasks joined_pixels joins,
   and the tasks of the chain inside it: the innermost dimensions that
   continue each plane's row in the source, up to B, which may continue
   them too. */
static inline int panel_dim(const dmls_plan *p, int64_t *chain_tasks) {
    const int64_t w = p->width, task = p->tile_size * p->inner_size * w;
    int64_t want = p->inner_size * w, tasks = 1;
    int i;
    for (i = p->outer_ndim - 1; i >= 0 && p->outer_size[i] > 1 && p->outer_src_stride[i] == want; i--) {
        if (i < p->outer_ndim - 1 && p->outer_dst_stride[i] == task) break;
        tasks *= p->outer_size[i];
        want *= p->outer_size[i];
    }
    *chain_tasks = tasks;
    if (i == p->outer_ndim - 1 || i < 0 || p->outer_size[i] < DMLS_PANEL_MIN_ROWS ||
            p->outer_dst_stride[i] != task || task > DMLS_PANEL_MAX_TASK_BYTES ||
            (w >= 4 && p->inner_size * w < DMLS_PANEL_MIN_WIDE_ROW_BYTES) ||
            tasks < DMLS_JOIN_MIN_TASKS || tasks > INT64_MAX / task ||
            (tasks * task < DMLS_PANEL_MIN_CHAIN_BYTES && !far_chain(p, tasks * task, task)))
        return -1;
    return i;
}

/* A panel plan's geometry: B (outer dimension pb) of nrows rows, in
   groups of rows rows, each by chunks of m of the chain's ch tasks; the
   buffer's rows pitch bytes apart.  Each row's interleave is at least
   DMLS_JOIN_MIN_TASKS tasks and a line of each plane; the rows are whole
   lines, DMLS_JOIN_BYTES in all, never within 256 bytes of a multiple of
   4 KiB: the loads of one row then waited on the stores to another (a
   panel of 4 rows of 4088 bytes ran 0.6-0.7x). */
typedef struct {
    int pb;
    int64_t ch, nrows, rows, m, pitch, groups, chunks, units;
} dmls_panels;

static inline int panels_of(const dmls_plan *p, dmls_panels *g) {
    const int64_t task = p->tile_size * p->inner_size * p->width, row = p->inner_size * p->width;
    int64_t least, most;
    if (joined_pixels(p) <= 0 || (g->pb = panel_dim(p, &g->ch)) < 0) return 0;
    least = (64 + row - 1) / row > DMLS_JOIN_MIN_TASKS ? (64 + row - 1) / row : DMLS_JOIN_MIN_TASKS;
    most = DMLS_JOIN_BYTES / (least * task + 320);
    g->nrows = p->outer_size[g->pb];
    g->rows = (DMLS_PANEL_ROW_BYTES + task - 1) / task;
    if (g->rows > most) g->rows = most;
    if (g->rows > g->nrows) g->rows = g->nrows;
    g->pitch = DMLS_JOIN_BYTES / g->rows / 64 * 64;
    if (g->pitch % 4096 < 256 || g->pitch % 4096 > 3840) g->pitch -= 320;
    g->m = g->pitch / task;
    g->groups = (g->nrows + g->rows - 1) / g->rows;
    g->chunks = (g->ch + g->m - 1) / g->m;
    /* (the outer dimensions outside B, B's groups, the chain's chunks) */
    g->units = p->outer_count / (g->nrows * g->ch) * g->groups * g->chunks;
    return 1;
}

/* The tasks ahead whose destination run_panels asks for (see its copy-out). */
enum { DMLS_PANEL_RUN_AHEAD = 2 };

/* Units u0..u1 of a panel plan (panels_of): each a group of B's rows by a
   chunk of the chain's tasks.  Each row's pixels of the chunk are
   interleaved into the buffer at once, then each task gets the group's
   rows as one run of its destination.  Without a buffer (buf NULL: no
   arena), each task is interleaved into its destination. */
static void run_panels(const dmls_plan *p, const dmls_panels *g, const char *s, char *d, int64_t u0, int64_t u1,
                       char *buf) {
    const int w = p->width;
    const int64_t c = p->tile_size, n = p->inner_size, kss = p->tile_src_stride, task = c * n * w;
    const int64_t row = n * w, bss = p->outer_src_stride[g->pb];
    int64_t u, t, r, k;
    dmls_odometer o;
    for (u = u0; u < u1; u++) {
        /* units in order: chunks of a group, groups of B, then outside B */
        const int64_t gc = u % g->chunks, bg = u / g->chunks % g->groups, out = u / g->chunks / g->groups;
        const int64_t b0 = bg * g->rows, g0 = gc * g->m;
        const int64_t nb = g->nrows - b0 < g->rows ? g->nrows - b0 : g->rows;
        const int64_t mm = g->ch - g0 < g->m ? g->ch - g0 : g->m;
        /* the next unit's rows of the planes, if the chain goes on there,
           into L2 (a unit reads nb * c rows side by side, more than the
           hardware follows) */
        const int64_t later = gc + 1 < g->chunks && u + 1 < u1 ? (g->ch - g0 - mm < g->m ? g->ch - g0 - mm : g->m) : 0;
        const char *sr;
        outer_offsets(p, (out * g->nrows + b0) * g->ch + g0, o.idx, &o.so, &o.do_);
        sr = s + o.so;
        if (buf == NULL) {
            for (t = 0; t < mm; t++) {
                for (r = 0; r < nb; r++)
                    DMLS_BY_WIDTH(w, dmls_interleave_, (sr + r * bss + t * row, d + o.do_ + r * task, c, kss, n));
                if (t + 1 < mm) odometer_step(p, &o);
            }
            continue;
        }
        for (r = 0; r < nb; r++) {
            for (k = 0; k < c && later > 0; k++)
                dmls_prefetch_l2_lines(sr + r * bss + k * kss + mm * row, later * row);
            DMLS_BY_WIDTH(w, dmls_interleave_, (sr + r * bss, buf + r * g->pitch, c, kss, mm * n));
        }
        /* Each task's run (its nb rows, back to back) goes to its own place
           with ordinary stores, each line read for ownership first: the
           whole lines of the run DMLS_PANEL_RUN_AHEAD tasks on are asked
           for before this one is copied.  Not its first and last lines,
           in part: the unit beside it along B, maybe on the other thread,
           writes the rest of them, and asked for too they went back and
           forth (two panel scatters 0.43x and 0.45x).  Two builds
           alternating (2 threads, 6 rounds): the unnamed int16 scatter
           of 36-byte tasks at 0.37 of the memcpy limit 1.25-1.37x
           faster, 12 panel plans drawn from seeds 5000-5399 1.17x by
           geometric mean, re-run with 18 fresh from seeds 5800-6299
           1.08x over the 30 (0.84-1.36x; the two of 10 MB, from cache,
           0.84-0.99x). */
        {
            dmls_odometer oa;
            if (mm > DMLS_PANEL_RUN_AHEAD)
                odometer_ahead(p, &oa, o.idx, o.so, o.do_, DMLS_PANEL_RUN_AHEAD);
            for (t = 0; t < mm; t++) {
                char *dt = d + o.do_;
                if (t + DMLS_PANEL_RUN_AHEAD < mm) {
                    const char *a = d + oa.do_, *end = a + nb * task;
                    for (a += dmls_line_gap(a); a + 64 <= end; a += 64) DMLS_PREFETCH_W(a);
                    if (t + DMLS_PANEL_RUN_AHEAD + 1 < mm) odometer_step(p, &oa);
                }
                copy_rows(dt, buf + t * task, task, nb, g->pitch, task, 0);
                if (t + 1 < mm) odometer_step(p, &o);
            }
        }
    }
}

/* The longest rows that take that inline copy.  Up to 64 bytes first;
   the attention-head permutation (4, 512, 16, 64) float16 in order
   (0, 2, 1, 3), 128-byte rows, then ran at 0.9x PyTorch.  In one process,
   alternating, 512 against 64: 128-byte rows 1.5-1.8x faster, 150-400
   bytes 1.1-2.1x, 480-760 bytes even (0.93-1.2x).  Copies that stream
   (from 64 MB, (32, 1024, 16, 64) float16) took the dispatch still, at
   0.75x PyTorch for the scatter; inline, with dmls_copy_blocks, that
   scatter ran 1.9x faster, its gather 1.1x, rows of 96 and 128 uint8 in a
   copy of 18-23 MB 1.3-2.1x, of 150 int16 or 200 float32 0.9-1.05x. */
#define DMLS_SHORT_ROW_BYTES 512
/* Rows longer than that, up to DMLS_INLINE_ROW_BYTES, are copied inline too
   when the copy does not stream, in 64-byte blocks (dmls_copy_blocks, the
   last one overlapping): each row through row() and dmls_copy paid a
   dispatch, a head and a tail call to memcpy.  In one process on the same
   buffers, alternating (2 threads): permutations that keep a last
   dimension of 748-1000 bytes (float32 (109, 84, 187) in order (1, 0, 2),
   which ran at 0.93x PyTorch) and padded rows of 1.2-4 KB, 5-17 MB,
   1.06-1.37x faster, rows broadcast along H of 800 bytes 1.04-1.24x; copies
   that stream, and rows past 4 KiB, keep row() (up to 16 KiB gained
   1.03-1.19x more, within the noise). */
#define DMLS_INLINE_ROW_BYTES 4096
#ifdef DMLS_HAVE_FILL_SPLAT
/* Whether a fill's rows take the inline fill of dmls_run_tasks: contiguous
   rows of 16 bytes or more, each a whole task.  Rows of 2-8 KiB filled
   there (or in row(), from a register) rather than by dmls_fill_'s element
   loop ran even, float64 ones 1.10x faster; those in a copy of 8-10 MB
   (in cache) 1.9-2.0x (in one process on the same buffers, alternating, 2
   threads). */
static inline int fill_rows_inline(const dmls_plan *p) {
    return p->mode == DMLS_MODE_FILL && p->segments == 1 && p->inner_dst_stride == p->width &&
           p->inner_size * p->width >= 16;
}
#endif
/* Tasks that copy a row through row() and ask for the source of a task
   ahead before they copy their own (task_ask): planes into channels a few
   values a task (interleave plans: each plane of the task four on into L1,
   see dmls_run_tasks), and transpose tasks (a tile plan, one task a row,
   no L2 buffers):

   - a source that is one span of at most DMLS_TILE_AHEAD_SPAN bytes, far
     from the next task's (the innermost outer dimension's source stride at
     least 4 KiB past the span either way): the whole span of the task four
     on, into L2.  A 5-D permutation that swaps its last two dimensions
     reads a 2 KB tile from a new place every task, which the hardware
     prefetcher only follows once it is under way.  In one process on the
     same buffers, alternating (2 threads, 7 rounds): 14 unnamed 4-D to 6-D
     gathers and scatters of 7-86 MB so planned ran 1.18x faster by
     geometric mean (0.95-2.04x; a float32 gather of 32 MB 0.39 -> 0.79 of
     the memcpy limit).  Found on 24 others: the 15 it takes 1.15-2.58x (12)
     and 0.94-0.99x (3); those whose tasks' sources lie back to back (the
     prefetcher's case) 0.66-1.06x, so they ask for nothing.
   - a longer source of at most DMLS_TILE_AHEAD_ROWS rows (each a source
     row of k, apart): the first DMLS_TILE_AHEAD_ROW_BYTES of each row of
     the next task, into L2, so that its first band does not wait on as
     many misses.  17 unnamed 4-D to 6-D gathers and scatters of 16-72 MB
     so planned ran 1.07x faster (0.98-1.27x, 13 faster; a uint8 gather
     with rows 25 KB apart 0.58 -> 0.74 of the limit in that A/B), 18
     others 1.13x (0.94-1.81x, 16 faster; a float16 gather of 93 MB 0.16 ->
     0.29).  Two tasks ahead measured the same.  Seven of the benchmark
     harness's cases ask so (NCHW to NHWC scatters of 12-64 channels, the
     350001 x 45 gather: 0.93-1.22x, 1.05x by geometric mean). */
#define DMLS_TILE_AHEAD_SPAN 8192
#define DMLS_TILE_AHEAD_ROWS 64
#define DMLS_TILE_AHEAD_ROW_BYTES 256
/* Tasks that read a few short runs (tiny transposes, short planes
   interleaved) of at most this many bytes each ask for those of a task
   ahead (see dmls_run_tasks). */
#define DMLS_TASK_AHEAD_RUN 1024
typedef struct {
    int64_t rows, stride, bytes, ahead;   /* rows of bytes each, stride apart, tasks ahead; rows 0: none */
    int into_l1;                          /* into L1, else into L2 */
} dmls_task_ask;
static inline dmls_task_ask task_ask(const dmls_plan *p) {
    dmls_task_ask a = {0, 0, 0, 0, 0};
    int64_t span, st;
    if (p->mode == DMLS_MODE_INTERLEAVE && p->segments == 1 &&
            p->inner_size * p->inner_src_stride <= DMLS_TASK_AHEAD_RUN) {
        a.rows = p->tile_size;   /* the task's planes */
        a.stride = p->tile_src_stride;
        a.bytes = p->inner_size * p->inner_src_stride;
        a.ahead = 4;
        a.into_l1 = 1;
        return a;
    }
    if (p->mode != DMLS_MODE_TILE || p->segments != 1 || p->tile_pieces > 1 || p->l2 != DMLS_L2_NONE ||
            p->outer_ndim < 1 || p->tile_src_stride != p->width || p->inner_src_stride <= 0 ||
            p->tile_size < 1 || p->inner_size < 1)
        return a;
    if (p->inner_src_stride <= DMLS_TILE_AHEAD_SPAN && p->inner_size <= DMLS_TILE_AHEAD_SPAN &&
            p->tile_size <= DMLS_TILE_AHEAD_SPAN) {
        span = (p->inner_size - 1) * p->inner_src_stride + p->tile_size * p->width;
        if (span <= DMLS_TILE_AHEAD_SPAN) {
            st = p->outer_src_stride[p->outer_ndim - 1];
            if (st <= -span - 4096 || st >= span + 4096) {
                a.rows = 1;
                a.bytes = span;   /* (stride unused) */
                a.ahead = 4;
            }
            return a;
        }
    }
    if (p->inner_size <= DMLS_TILE_AHEAD_ROWS) {
        a.rows = p->inner_size;
        a.stride = p->inner_src_stride;
        a.bytes = p->tile_size < DMLS_TILE_AHEAD_ROW_BYTES / p->width ? p->tile_size * p->width
                                                                       : DMLS_TILE_AHEAD_ROW_BYTES;
        a.ahead = 1;
    }
    return a;
}

#if DMLSTRIDE_HAVE_SIMD
/* Streamed rows shorter than DMLS_STREAM_MIN_RUN (which took ordinary
   stores) from this many bytes take stream_rows too where the destination
   rows are back to back: in one process on the same buffers, alternating
   (2 threads), gathers of 41-100 MB with rows of 133-448 bytes ran 1.17x
   faster by geometric mean (0.98-1.51x; a float64 one 0.53 -> 0.80 of the
   memcpy limit); rows of 33-37 bytes far apart in the source 0.58-0.63x. */
#define DMLS_STREAM_BACK_TO_BACK_MIN 128

/* ... and so do rows of that many bytes or more that each start on a
   line boundary of the destination (every outer destination stride a
   multiple of 64, the first row on a line: a scatter into rows padded to
   64-512 bytes, or a permutation keeping a last dimension of whole lines).
   Their whole lines are streamed, the last line's bytes take ordinary
   stores.  Each such row took ordinary stores throughout, a read for
   ownership of every line: in one process on the same buffers,
   alternating in a shuffled order (2 threads, 5 rounds, the old loop
   against itself as a control: 0.94-1.26x), 14 unnamed scatters of 27-69
   MB into rows of 128-511 bytes padded to 64-512 ran 1.43x faster by
   geometric mean (1.06-2.36x), and 11 scatters of 4-D to 6-D permutations
   keeping such rows 1.04-2.11x (1.45x).  Rows that start off a line (a
   row of 480 bytes after another) ran 0.84-1.57x, about 1.04x: those keep
   ordinary stores unless padded (below), and so do rows of 64-127 bytes (a
   uint8 scatter of 100-byte rows into rows 512 apart 0.68x). */
static inline int rows_on_lines(const dmls_plan *p, const char *first) {
    int i;
    if ((uintptr_t)first % 64 != 0) return 0;
    for (i = 0; i < p->outer_ndim; i++)
        if (p->outer_dst_stride[i] % 64 != 0) return 0;
    return 1;
}

/* ... and so do padded rows anywhere: the innermost outer dimension steps
   the destination by more than a row and less than a row and
   DMLS_PAD_GAP_MAX bytes (a scatter into pitched rows, a region of a wider
   image), so that the rows follow one another through the destination,
   with their first and last lines asked for ahead (stream_rows).  With
   ordinary stores, each row's lines waited on reads for ownership: in one
   process on the same buffers, alternating in a shuffled order (2
   threads, 9 rounds), 6 scatters of 24-40 MB into rows of 300-400 bytes
   padded to 128-4096, the destination 16 bytes past a line, ran 1.34-1.53x
   faster; 12 unnamed 3-D to 6-D permutations that keep a last dimension of
   138-480 bytes, whose rows lie 9 KB to 6 MB apart, ran 0.92x streamed
   (0.79-1.26x), and keep ordinary stores. */
#define DMLS_PAD_GAP_MAX 4096
static inline int padded_rows(const dmls_plan *p) {
    const int last = p->outer_ndim - 1;
    const int64_t n = p->inner_size * p->width;
    return last >= 0 && p->outer_dst_stride[last] > n && p->outer_dst_stride[last] - n < DMLS_PAD_GAP_MAX;
}

/* Tasks t0..t1 of a streamed copy of contiguous rows of n >= 64 bytes, one
   row a task (idx, so, do_: task t0's; line: 64 bytes of scratch).  Rows
   back to back in the destination are one run of whole lines: the line
   a row ends in is held in line and streamed whole with the next row's
   first bytes; only the task range's first and last lines, and those of
   rows not back to back, take ordinary stores (other tasks may write the
   rest of them).  Source rows not back to back ask for their lines AHEAD
   rows on into L2.  Each row through row() and dmls_stream_copy wrote its
   first and last lines in two parts with ordinary stores, a read for
   ownership each, and waited on its source: permutations keeping a last
   dimension of 600-2400 bytes in copies of 34-69 MB ran at 0.73-0.91x
   PyTorch.  In one process on the same buffers, alternating (2 threads),
   20 such gathers and scatters (3-D to 5-D, rows of 520-3943 bytes, 26-115
   MB) ran 1.57x faster by geometric mean (0.97-2.53x; the five fastest from
   0.29-0.65 to 0.72-1.25 of the memcpy limit); the lines held alone gained
   0.98-1.43x, the requests the rest.
   Rows not back to back (a scatter into padded rows) hold nothing: their
   last line's bytes go out with ordinary stores at once.  Held, they were
   copied to the line buffer and from it at the next row, just after the
   row's streaming stores, and a row of 684 int16 bytes into rows 704 apart
   spent a third of its time on those copies' loads (one thread, 8.4 GB/s;
   rows of 688 bytes, which end on a line, 19 GB/s).  In one process on the
   same buffers, alternating in a shuffled order (2 threads, 7 rounds, the
   old loop against itself as a control: 0.91-1.13x), 16 unnamed scatters
   of 25-90 MB into rows padded to 64-512 bytes ran 1.23x faster by
   geometric mean (0.96-2.04x; those whose rows end on a line, or lie back
   to back, 0.96-1.01x); 20 gathers and scatters of 5-D and 6-D
   permutations keeping a last dimension of 512-2400 bytes 1.04x (control
   1.02x).
   Those ordinary stores each wait for their line to be read for ownership,
   and the streaming stores behind them wait too: the partial first and
   last lines of the row AHEAD rows on are asked for, to be written, as
   the tile's rows out of L2 do (tile.c).  In one process on the same
   buffers, alternating in a shuffled order (2 threads, 9 rounds),
   scatters of 24-50 MB into rows of 388-1200 bytes padded to 64-4096 ran
   1.04-2.15x faster with their rows on lines (rows of 388-392 bytes 4096
   apart 1.8-2.1x), 1.07-1.30x with the destination 16 bytes past one; 12
   unnamed permutations keeping a last dimension of 138-480 bytes 0.99x and
   1.01x (two runs). */
static void stream_rows(const dmls_plan *p, const char *s, char *d, int64_t t0, int64_t t1, int64_t *idx,
                        int64_t so, int64_t do_, char *line) {
    const int64_t n = p->inner_size * p->width;
    const int last = p->outer_ndim - 1;
    const int ask = last >= 0 && p->outer_src_stride[last] != n;
    const int chain = last >= 0 && p->outer_dst_stride[last] == n;
    enum { AHEAD = 8 };
    int64_t t;
    dmls_odometer ah;
    dmls_held_line held = {line, NULL, 0};
    /* (one odometer AHEAD rows on: the source lines, the destination's ends) */
    if (ask || !chain) odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < AHEAD ? t1 - t0 : AHEAD);
    for (t = t0; t < t1; t++) {
        if ((ask || !chain) && t + AHEAD < t1) {
            if (ask) dmls_prefetch_l2_lines(s + ah.so, n);
            if (!chain) dmls_prefetch_w_end_lines(d + ah.do_, n);
            odometer_step(p, &ah);
        }
        dmls_lines_out(&held, d + do_, s + so, n, chain && t + 1 < t1);
        next_outer(p, idx, &so, &do_);
    }
    dmls_isa.store_fence();
}
#endif

#if DMLSTRIDE_HAVE_SIMD
/* Rows of up to DMLS_REPEAT_MAX_ROW bytes repeated back to back in the
   destination (the innermost outer dimension has source stride 0 and
   destination stride one row: a broadcast along H) are written a run of
   DMLS_REPEAT_MIN_ROWS rows or more at a time, as a periodic pattern: the
   row copied into a buffer often enough to hold a row and 64 bytes more,
   the run then written a whole destination line at a time with aligned
   stores, each line loaded from the buffer at its phase within the row.
   Row by row (a copy and a request for the same source lines each), such
   copies ran at 0.70-0.93x PyTorch's copy_ on 8 of 20 unnamed broadcasts
   along H (float16 rows of 256 and 340 bytes, float32 of 180-388, int16 of
   460, uint8 of 211 and 257; 5-38 MB).  In one process on the same
   buffers, alternating in a shuffled order (2 threads, 9 rounds, the old
   code against itself as a control: 0.96-1.09x), those 20 (one- to
   eight-byte values, rows of 132-2048 bytes, 5-67 MB) ran 1.43x faster by
   geometric mean (0.99-2.82x; the two with rows past 1 KiB, which keep
   the row by row copy, 0.99x and 1.00x; memory-bound ones of 67 MB
   1.00-1.03x) and every one at least 1.01x PyTorch; the run written from a
   pattern of whole rows in 64-byte blocks, without aligning the stores,
   1.32x.  Rows under 64 bytes, which the planner batched a few to a task
   and copied one at a time, take it too (see REPEAT_MIN_ROWS in the
   planner for what that measured). */
#define DMLS_REPEAT_MAX_ROW 1024
static inline int repeats_rows(const dmls_plan *p) {
    const int last = p->outer_ndim - 1;
    const int64_t n = p->inner_size * p->width;
    return p->mode == DMLS_MODE_MEMCPY && p->segments == 1 && p->tile_size <= 1 && last >= 0 &&
           p->outer_src_stride[last] == 0 && p->outer_dst_stride[last] == n &&
           p->outer_size[last] >= DMLS_REPEAT_MIN_ROWS && n <= DMLS_REPEAT_MAX_ROW;
}

/* m rows of the n bytes at s (1 <= n <= DMLS_REPEAT_MAX_ROW) back to back
   from d (the last run of a task range may be shorter than
   DMLS_REPEAT_MIN_ROWS, and a run may be under 64 bytes: those go row by
   row); buf: at least
   2 * DMLS_REPEAT_MAX_ROW + 64 bytes of scratch.  Writes d .. d + m * n
   only. */
static void repeat_row(char *d, const char *s, int64_t n, int64_t m, char *buf) {
    const int64_t total = n * m, rows = (n + 64 + n - 1) / n, step = 64 % n;
    int64_t off, ph, head;
    if (m < DMLS_REPEAT_MIN_ROWS || total < 64) {
        for (off = 0; off < total; off += n) dmls_copy_short(d + off, s, n);
        return;
    }
    /* rows * n >= n + 64 bytes: a load of 64 at any phase below n */
    for (off = 0; off < rows * n; off += n) dmls_copy_short(buf + off, s, n);
    head = dmls_line_gap(d);   /* < 64 <= total */
    if (head > 0) dmls_copy_short(d, buf, head);
    ph = head % n;
    for (off = head; off + 64 <= total; off += 64) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(buf + ph));
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(buf + ph + 16));
        const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(buf + ph + 32));
        const __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(buf + ph + 48));
        _mm_store_si128((__m128i *)(void *)(d + off), a);
        _mm_store_si128((__m128i *)(void *)(d + off + 16), b);
        _mm_store_si128((__m128i *)(void *)(d + off + 32), c);
        _mm_store_si128((__m128i *)(void *)(d + off + 48), e);
        ph += step;   /* (ph + 64) % n */
        if (ph >= n) ph -= n;
    }
    if (off < total) dmls_copy_short(d + off, buf + ph, total - off);
}
typedef char dmls_repeat_fits[2 * DMLS_REPEAT_MAX_ROW + 64 <= DMLS_SCRATCH_REGION ? 1 : -1];
#endif

int64_t dmls_ask_rows_min_bytes = DMLS_ASK_ROWS_MIN_BYTES;

/* Whole blocks joined along the innermost outer dimension (the planner's
   block join): where that dimension's destination stride is J's row, m
   blocks in a row of it are one buffer, written out as runs of m rows. */
static inline int64_t joined_blocks(const dmls_plan *p) {
    const int last = p->outer_ndim - 1;
    if (p->mode != DMLS_MODE_BLOCK || p->block_join < 2 || !p->block_whole || p->segments != 1 ||
            p->l2 != DMLS_L2_NONE || last < 0 || p->outer_dst_stride[last] != p->inner_size * p->width)
        return 0;
    return p->block_join;
}

static void run_joined_blocks(const dmls_plan *p, const char *s, char *d, int64_t t0, int64_t t1,
                              int64_t *idx, int64_t so, int64_t do_, char *scratch) {
    const int last = p->outer_ndim - 1;
    const int64_t most = joined_blocks(p), step = p->outer_src_stride[last];
    int64_t t, m, i;
    dmls_odometer next;
    for (t = t0; t < t1; t += m) {
        /* up to the end of the dimension's row, of the tasks, of the join */
        m = run_left(p, idx, t1 - t);
        if (m > most) m = most;
        run_after(p, &next, idx, so, do_, m, 0, 0);   /* the next run's first block */
        if (m < 2 || !dmls_block_joined(p, s + so, d + do_, m, step, t + m < t1 ? s + next.so : NULL, scratch))
            for (i = 0; i < m; i++) {   /* block by block */
                dmls_block(p, s + so, d + do_, 0, p->inner_size, NULL, NULL, scratch);
                next_outer(p, idx, &so, &do_);
            }
        odometer_take(p, &next, idx, &so, &do_);
    }
    dmls_isa.store_fence();
}

void dmls_run_tasks(const dmls_plan *p, const char *s, char *d, int64_t t0, int64_t t1, char *scratch) {
    int64_t idx[DMLS_MAX_DIMS], so, do_, seg, j0, j1, t, shift, mjoin;
    int planes;
    dmls_task_ask ask;
    if (t0 >= t1) return;
    if (p->mode == DMLS_MODE_TILE && p->tile_pieces > 1) {
        run_pieces(p, s, d, t0, t1, scratch);
        return;
    }
    if (p->mode == DMLS_MODE_BLOCK) dmls_block_tables(p, scratch);
    outer_offsets(p, t0 / p->segments, idx, &so, &do_);
    if (joined_blocks(p)) {
        run_joined_blocks(p, s, d, t0, t1, idx, so, do_, scratch);
        return;
    }
#if DMLSTRIDE_HAVE_SIMD
    if (p->mode == DMLS_MODE_MEMCPY && p->stream && p->segments == 1 && p->tile_size <= 1 &&
            (p->inner_size * p->width >= DMLS_STREAM_MIN_RUN ||
             (p->inner_size * p->width >= DMLS_STREAM_BACK_TO_BACK_MIN && p->outer_ndim > 0 &&
              (p->outer_dst_stride[p->outer_ndim - 1] == p->inner_size * p->width || rows_on_lines(p, d + do_) ||
               padded_rows(p)))) &&
            p->inner_size * p->width <= DMLS_INLINE_ROW_BYTES &&
            dmls_isa.level >= DMLS_ISA_SSE2) {
        stream_rows(p, s, d, t0, t1, idx, so, do_, scratch);
        return;
    }
#endif
    if (p->mode == DMLS_MODE_MEMCPY && p->segments == 1 && p->inner_size * p->width <= DMLS_INLINE_ROW_BYTES &&
            (!p->stream || p->inner_size * p->width < DMLS_STREAM_MIN_RUN)) {
        /* Short contiguous rows (a permutation that keeps a short last
           dimension): one inline copy per row instead of a dispatch and a
           library call, which took most of the time for rows of 36 bytes.
           A copy that streams writes such rows with plain stores anyway
           (row() streams from DMLS_STREAM_MIN_RUN bytes). */
        const int64_t n = p->inner_size * p->width;
        /* Rows not back to back with the next one on a side (the
           batch's next row, or the innermost outer dimension's) are each a
           stream of their own there, more streams than the hardware
           prefetcher follows (a gather of 56-byte rows read 306): their
           lines AHEAD tasks on are asked for into L1 first, a batch's
           source rows, and single rows of 16-512 bytes on either side.  In
           one process on the same buffers, alternating (2 threads), 32
           unnamed 5-D and 6-D permutations of 16-64 MB that keep a last
           dimension of 17-512 bytes ran 1.12x faster by geometric mean
           (0.93-1.73x; 0.37-0.64 -> 0.64-1.09 of the memcpy limit in the
           five fastest), with rows of 64 bytes or more only; 14 more of
           4-D and 5-D permutations with rows of 17-59 bytes, dimensions
           such as 31, 43 or 53 that leave no batch, 1.14x (0.88-2.07x; a
           uint8 gather of 33-byte rows 53 streams apart 0.12 -> 0.21).
           A batch's destination rows ran 0.80x so: those keep the plain
           loop. */
        /* ... in copies of 5.5 MiB or more.  Smaller ones (source and
           destination together in the caches of the two cores, as when a
           copy runs again on the same buffers) ran faster without the
           asking: in one process on the same buffers, alternating (2
           threads, 7-9 rounds, the old loop against itself as a control:
           0.99-1.01x), 16 unnamed permutations of 0.05-0.6 MB 1.37x by
           geometric mean (1.07-1.83x), those of 0.5-4 MiB 1.2-1.8x, and
           in three sets of 4-5.5 MiB (at times when memory ran slow and
           fast) about 1.2x, 0.82-1.93x, the losses in rows of 370-480
           bytes.  From there the asking pays more often than not: copies
           of 5.5-8 MiB ran 0.65-1.42x without it (0.90x when memory ran
           slow, 1.1x when it ran fast), of 8-40 MB 0.82x (0.37-1.21x).
           (Batches of rows: 1.04x, 0.82-1.38x; they keep the asking.) */
        const int last = p->outer_ndim - 1;
        const int ask_rows = n >= 16 && n <= DMLS_SHORT_ROW_BYTES && last >= 0 && p->tile_size <= 1 &&
                             p->dst_bytes >= dmls_ask_rows_min_bytes;
        const int ask_src = p->tile_size > 1 ? p->tile_src_stride != n : ask_rows && p->outer_src_stride[last] != n;
        /* ... but not destination rows less than two rows apart (padded
           rows, a scatter into a pitched layout): one stream a constant
           step under a row past the last, which the hardware prefetcher
           follows, the requests only instructions.  In one process on the
           same buffers, alternating in a shuffled order (2 threads, 7
           rounds, the old loop against itself as a control: 0.96-1.07x),
           28 unnamed scatters of 10-90 MB into such rows of 20-511 bytes
           ran 1.10x faster by geometric mean in two sets (0.97-1.54x);
           20 gathers and scatters of permutations keeping a last
           dimension of 17-512 bytes 0.99x (control 1.00x), where asking
           for no destination rows at all ran 0.91x (0.63-1.07x). */
        const int ask_dst = ask_rows && (p->outer_dst_stride[last] < n || p->outer_dst_stride[last] >= 2 * n);
        /* Longer rows (up to DMLS_INLINE_ROW_BYTES) far apart in the
           source, in a copy from memory that does not stream: each row's
           first lines missed before the hardware prefetcher took up its
           stream, and the copies of 8-32 MB that keep a last dimension of
           0.5-4 KiB ran at 0.66-0.99x PyTorch in 6 of 24.  The source
           lines of the row four tasks on are asked for into L2.  In one
           process on the same buffers, alternating in a shuffled order (2
           threads, 9 rounds, the old loop against itself as a control:
           0.996x), those 24 unnamed 4-D to 6-D gathers and scatters ran
           1.25x faster by geometric mean (0.85-1.70x; every one at least
           1.04x PyTorch), two rows ahead 1.21x, into L1 1.05x; copies of
           3-7 MB, from cache, 0.93-1.05x, so they ask for nothing. */
        const int ask_far = n > DMLS_SHORT_ROW_BYTES && last >= 0 && p->outer_src_stride[last] != n &&
                            p->outer_count >= DMLS_CACHED_TRANSPOSE_BYTES / n;
#if DMLSTRIDE_HAVE_SIMD
        if (repeats_rows(p)) {
            /* Runs of one source row repeated back to back (a broadcast
               along H): each run at once, as a periodic pattern. */
            for (t = t0; t < t1;) {
                const int64_t m = run_left(p, idx, t1 - t);
                repeat_row(d + do_, s + so, n, m, scratch);
                next_run(p, idx, &so, &do_, m);
                t += m;
            }
            return;
        }
#endif
        if (p->tile_size > 1) {
            /* a batch of rows a task (the planner's batch_short_rows) */
            const int64_t kn = p->tile_size, kss = p->tile_src_stride, kds = p->tile_dst_stride;
            if (ask_src) {
                enum { AHEAD = 4 };
                dmls_odometer ah;
                odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < AHEAD ? t1 - t0 : AHEAD);
                for (t = t0; t < t1; t++) {
                    if (t + AHEAD < t1) odometer_ask(p, &ah, s, kn, kss, n, 1);
                    copy_rows(d + do_, s + so, n, kn, kss, kds, 0);
                    next_outer(p, idx, &so, &do_);
                }
                return;
            }
            for (t = t0; t < t1; t++) {
                copy_rows(d + do_, s + so, n, kn, kss, kds, 0);
                next_outer(p, idx, &so, &do_);
            }
            return;
        }
        if (ask_src || ask_dst || ask_far) {
            /* (rows of up to DMLS_SHORT_ROW_BYTES: 16 tasks on, into L1) */
            const int64_t ahead = ask_far ? 4 : 16;
            dmls_odometer ah;
            odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < ahead ? t1 - t0 : ahead);
            for (t = t0; t < t1; t++) {
                if (t + ahead < t1) {
                    if (ask_src) dmls_prefetch_l1_lines(s + ah.so, n);
                    if (ask_dst) dmls_prefetch_l1_lines(d + ah.do_, n);
                    if (ask_far) dmls_prefetch_l2_lines(s + ah.so, n);
                    odometer_step(p, &ah);
                }
                if (n > 64 && (n % 32 == 0 || n > DMLS_SHORT_ROW_BYTES))
                    dmls_copy_blocks(d + do_, s + so, n);
                else
                    dmls_copy_short(d + do_, s + so, n);
                next_outer(p, idx, &so, &do_);
            }
            return;
        }
        if (last >= 0) {
            /* run by run along the innermost outer dimension (copy_rows) */
            const int blocks = n > 64 && (n % 32 == 0 || n > DMLS_SHORT_ROW_BYTES);
            int64_t m;
            for (t = t0; t < t1; t += m) {
                m = run_left(p, idx, t1 - t);
                copy_rows(d + do_, s + so, n, m, p->outer_src_stride[last], p->outer_dst_stride[last], blocks);
                next_run(p, idx, &so, &do_, m);
            }
            return;
        }
        if (t0 < t1) dmls_copy_short(d + do_, s + so, n);   /* no outer dimension: one task */
        return;
    }
#ifdef DMLS_HAVE_FILL_SPLAT
    if (fill_rows_inline(p)) {
        /* Rows of one value each (a broadcast along the last dimension):
           inline, eight rows' values loaded before their stores, rather
           than a dispatch and a fill loop a row.  In one
           process, alternating, against numpy's copyto (2 threads), 64- and
           128-byte rows of float32, uint16 and uint8 in copies of 1-67 MB
           went from 0.74-1.31x to 1.95-3.55x (one thread: 0.42-0.60x to
           1.15-1.93x); loading each value just before its row's stores ran
           1.0-1.5x slower than in eights. */
        const int w = p->width;
        const int64_t n = p->inner_size * w;
        const int last = p->outer_ndim - 1;
        int64_t dofs[8], q, m;
        __m128i v[8];
#ifdef DMLS_HAVE_FILL_STREAM
        if (p->stream) {
            /* rows back to back (the innermost outer dimension's): the line
               one row ends in held for the next */
            const int chain = last >= 0 && p->outer_dst_stride[last] == n;
            char line[64];
            dmls_held_line held = {line, NULL, 0};
            for (t = t0; t < t1; t++) {
                fill_lines_out(&held, d + do_, dmls_splat(s + so, w), n, chain && t + 1 < t1);
                next_outer(p, idx, &so, &do_);
            }
            dmls_isa.store_fence();
            return;
        }
#endif
        if (last >= 0) {
            /* Runs of rows along the innermost outer dimension through the
               instruction set's variant where it has one (AVX2: 32-byte
               stores, no odometer between rows).  In one process,
               alternating with the loop below (9 rounds, the loop against
               itself as a control: 0.98x and 1.02x), 9 broadcasts along W
               in cache (rows of 16-512 bytes of every width, 0.1-3.7 MB)
               ran 1.50-2.90x faster on one thread and 1.43-2.54x on two;
               three of 66-67 MB, bound by memory, 0.95-1.12x. */
            for (t = t0; t < t1; t += m) {
                m = run_left(p, idx, t1 - t);
                if (dmls_isa.fill_rows(d + do_, s + so, w, n, m, p->outer_src_stride[last],
                                       p->outer_dst_stride[last]) == 0)
                    break;
                next_run(p, idx, &so, &do_, m);
            }
            if (t >= t1) return;
            t0 = t;
        }
        for (t = t0; t < t1; t += m) {
            m = t1 - t < 8 ? t1 - t : 8;
            for (q = 0; q < m; q++) {
                v[q] = dmls_splat(s + so, w);
                dofs[q] = do_;
                next_outer(p, idx, &so, &do_);
            }
            for (q = 0; q < m; q++) dmls_fill_splat(d + dofs[q], v[q], n);
        }
        return;
    }
#endif
    mjoin = joined_tiles(p);
    planes = 0;
    if (mjoin == 0) {
        mjoin = joined_planes(p);
        planes = mjoin > 0;
    }
    if (mjoin > 0) {
        /* Runs of tasks joined: each run's tiles copied into the buffer
           (joined_tiles), or each plane's rows of the run, back to back
           (joined_planes), the next run's asked for meanwhile; then one
           tile of the run's m * jn rows, or one interleave of its pixels. */
        const int64_t w = p->width, jn = p->inner_size, iss = p->inner_src_stride;
        const int64_t kn = p->tile_size, pss = p->tile_src_stride;
        const int64_t span = (jn - 1) * iss + kn * w, slot = jn * iss;
        const int64_t sstep = p->outer_src_stride[p->outer_ndim - 1];
        char *join = dmls_scratch();
        dmls_plan q = *p;
        dmls_odometer nx;   /* the next run's first task */
        int64_t m, nm, g, k;
        if (join != NULL) {
            join += DMLS_SCRATCH_JOIN;
            for (t = t0; t < t1; t += m) {
                m = run_left(p, idx, t1 - t);
                if (m > mjoin) m = mjoin;
                nm = run_after(p, &nx, idx, so, do_, m, t1 - t, mjoin);
                if (planes) {
                    /* plane k's row of task g at (k * m + g) * jn values */
                    for (k = 0; k < kn; k++)
                        for (g = 0; g < m; g++) {
                            if (g < nm) dmls_prefetch_l2_lines(s + nx.so + g * sstep + k * pss, jn * w);
                            dmls_copy_short(join + (k * m + g) * jn * w, s + so + g * sstep + k * pss, jn * w);
                        }
                    q.tile_src_stride = m * jn * w;
                } else {
                    for (g = 0; g < m; g++) {
                        if (g < nm) dmls_prefetch_l1_lines(s + nx.so + g * sstep, span);
                        dmls_copy_short(join + g * slot, s + so + g * sstep, span);
                    }
                }
                /* the whole copy's size (which the transpose's flags go by)
                   stays as it was */
                q.inner_size = m * jn;
                q.outer_count = p->outer_count / m > 0 ? p->outer_count / m : 1;
                row(&q, join, d, 0, do_, 0, m * jn, NULL, NULL, scratch);
                odometer_take(p, &nx, idx, &so, &do_);
            }
            return;
        }
    }
    mjoin = joined_pixels(p);
    if (mjoin > 0) {
        /* Runs of tasks whose pixels go on in the source (joined_pixels):
           each run one interleave into the buffer, then each task's pixels
           to its destination (in panels where the copy's units are those:
           run_panels). */
        const int w = p->width;
        const int64_t c = p->tile_size, kss = p->tile_src_stride, task = c * p->inner_size * w;
        char *join = dmls_scratch();
        int64_t m, g, r;
        if (join != NULL) {
            join += DMLS_SCRATCH_JOIN;
            for (t = t0; t < t1; t += m) {
                m = source_chain(p, idx);
                if (m > t1 - t) m = t1 - t;
                if (m > mjoin) m = mjoin;
                DMLS_BY_WIDTH(w, dmls_interleave_, (s + so, join, c, kss, m * p->inner_size));
                for (g = 0; g < m; g += r) {
                    r = run_left(p, idx, m - g);
                    copy_rows(d + do_, join + g * task, task, r, task, p->outer_dst_stride[p->outer_ndim - 1], 0);
                    next_run(p, idx, &so, &do_, r);
                }
            }
            return;
        }
    }
    if (packed_tiles(p)) {
        /* Runs of packed tiles (packed_tiles): the next run's tiles asked
           for into L1 while each of this run's goes. */
        const int64_t w = p->width, kn = p->tile_size, jn = p->inner_size, tb = kn * jn * w;
        const int last = p->outer_ndim - 1;
        const int64_t sstep = last >= 0 ? p->outer_src_stride[last] : 0;
        const int64_t mmax = last >= 0 && p->outer_dst_stride[last] == tb && DMLS_PACKED_RUN_BYTES / tb > 1
                                 ? DMLS_PACKED_RUN_BYTES / tb : 1;
        char *b = dmls_scratch();
        dmls_odometer nx;
        int64_t m, nm;
        if (b != NULL) {
            b += DMLS_SCRATCH_JOIN;
            if (last < 0)   /* a single task */
                dmls_packed_tiles((int)w, s + so, 0, d + do_, kn, jn, 1, p->stream, s, 0, scratch, b);
            for (t = t0; last >= 0 && t < t1; t += m) {
                m = run_left(p, idx, t1 - t);
                if (m > mmax) m = mmax;
                nm = run_after(p, &nx, idx, so, do_, m, t1 - t, mmax);
                dmls_packed_tiles((int)w, s + so, sstep, d + do_, kn, jn, m, p->stream, s + nx.so, nm, scratch, b);
                odometer_take(p, &nx, idx, &so, &do_);
            }
            if (p->stream) dmls_isa.store_fence();
            return;
        }
    }
    if (staged_tiles(p)) {
        /* Each task's source is one short span, as below: the span of the
           task AHEAD on is asked for into L1 first. */
        const int64_t kn = p->tile_size, jn = p->inner_size, iss = p->inner_src_stride;
        const int64_t kds = p->tile_dst_stride, span = (jn - 1) * iss + kn * p->width;
        const int ahead = iss >= 0 && span <= DMLS_TASK_AHEAD_RUN;
        dmls_odometer ah;
        enum { AHEAD = 4 };
        if (ahead) {
            odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < AHEAD ? t1 - t0 : AHEAD);
        }
        for (t = t0; t < t1; t++) {
            if (ahead && t + AHEAD < t1) odometer_ask(p, &ah, s, 1, 0, span, 1);
            dmls_tiny_tile(p->width, s + so, iss, d + do_, kds, kn, jn, scratch);
            next_outer(p, idx, &so, &do_);
        }
        return;
    }
    if ((p->mode == DMLS_MODE_STRIDED && p->segments == 1 && p->inner_size <= 16) || tiny_tiles(p)) {
        /* Short strided rows likewise, one a task (or a batch of
           tile_size of them, the planner's batch_strided_rows), and tiny
           transposes (tiny_tiles), tile_size such rows a task: the width
           chosen once, not per row. */
        const int64_t kn = p->tile_size > 0 ? p->tile_size : 1;
        const int64_t kss = p->tile_src_stride, kds = p->tile_dst_stride;
        const int64_t n = p->inner_size, iss = p->inner_src_stride, ids = p->inner_dst_stride;
        /* Each task's source is one short span (at most
           DMLS_TASK_AHEAD_RUN bytes: a tiny transpose of a 6-D
           permutation reads 7 channels of 23 pixels, 322 bytes of int16),
           far from the last task's: the span of the task AHEAD on is asked
           for into L1 first, as for interleaving (see below).  In one
           process on the same buffers, alternating (2 threads), a 6-D int16
           scatter of 26 MB ran 1.55x faster (0.38 -> 0.60 of the memcpy
           limit), 5-D uint8 and 6-D uint16 and float32 ones of 4-28 MB
           0.96-1.15x.  Not where the span holds more lines than the task
           has values (a 5-D uint8 gather of 2 x 3 values a task, 408 and
           204 bytes apart, asked for 16 lines a task for its 6 bytes, a
           quarter of its time, at 0.84x numpy's speed): two builds
           alternating in one process (2 threads, two passes of 7 repeats),
           it ran 1.90x and 2.26x faster (rare: one of 150 unnamed draws in
           five seeds, none of 6000 more). */
        const int64_t span = (n - 1) * iss + (kn - 1) * kss + p->width;
        const int ahead = iss >= 0 && kss >= 0 && span <= DMLS_TASK_AHEAD_RUN && span <= n * kn * 64;
        int64_t k;
        dmls_odometer ah;
        enum { AHEAD = 4 };
        if (ahead) {
            odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < AHEAD ? t1 - t0 : AHEAD);
        }
        /* Rows of 2-16 values each with their count a constant, so that
           the element loop is unrolled: in one process on the same buffers,
           alternating (2 threads), 16 4-D to 6-D permutations of batched
           short strided rows (2-17 MB) ran 1.30x faster by geometric mean
           (0.98-1.62x). */
#define DMLS_ROWS_OF(W_, N_) \
            for (k = 0; k < kn; k++) dmls_strided_##W_(s + so + k * kss, d + do_ + k * kds, N_, iss, ids)
#define DMLS_TASK_ROWS(W_) do {                                                   \
            for (t = t0; t < t1; t++) {                                           \
                if (ahead && t + AHEAD < t1) odometer_ask(p, &ah, s, 1, 0, span, 1); \
                switch (n) {                                                      \
                case 2: DMLS_ROWS_OF(W_, 2); break;                               \
                case 3: DMLS_ROWS_OF(W_, 3); break;                               \
                case 4: DMLS_ROWS_OF(W_, 4); break;                               \
                case 5: DMLS_ROWS_OF(W_, 5); break;                               \
                case 6: DMLS_ROWS_OF(W_, 6); break;                               \
                case 7: DMLS_ROWS_OF(W_, 7); break;                               \
                case 8: DMLS_ROWS_OF(W_, 8); break;                               \
                case 9: DMLS_ROWS_OF(W_, 9); break;                               \
                case 10: DMLS_ROWS_OF(W_, 10); break;                             \
                case 11: DMLS_ROWS_OF(W_, 11); break;                             \
                case 12: DMLS_ROWS_OF(W_, 12); break;                             \
                case 13: DMLS_ROWS_OF(W_, 13); break;                             \
                case 14: DMLS_ROWS_OF(W_, 14); break;                             \
                case 15: DMLS_ROWS_OF(W_, 15); break;                             \
                case 16: DMLS_ROWS_OF(W_, 16); break;                             \
                default: DMLS_ROWS_OF(W_, n); break;                              \
                }                                                                 \
                next_outer(p, idx, &so, &do_);                                    \
            }                                                                     \
        } while (0)
        switch (p->width) {
        case 1: DMLS_TASK_ROWS(1); break;
        case 2: DMLS_TASK_ROWS(2); break;
        case 4: DMLS_TASK_ROWS(4); break;
        default: DMLS_TASK_ROWS(8); break;
        }
#undef DMLS_TASK_ROWS
#undef DMLS_ROWS_OF
        return;
    }
    ask = task_ask(p);
    if (ask.rows > 0) {
        /* Tasks through row() that ask for the source of a task ahead
           (task_ask).  Planes into channels a few values a task (a 6-D
           permutation whose planes are 23 values of 7 dimensions far
           apart): each task reads its planes' short runs from as many
           places, and waited on each; the runs of the task four on are
           asked for into L1.  In one process on the same buffers,
           alternating (2 threads), 6-D gathers of 26-28 MB ran 1.13x
           (float32) and 2.74x (int16) faster (0.25 -> 0.64 of the memcpy
           limit); ones of 4-8 MB, in cache, 0.97-1.02x.  Eight tasks on
           measured the same from memory, 0.87x in cache. */
        dmls_odometer ah;
        odometer_ahead(p, &ah, idx, so, do_, t1 - t0 < ask.ahead ? t1 - t0 : ask.ahead);
        for (t = t0; t < t1; t++) {
            if (t + ask.ahead < t1) odometer_ask(p, &ah, s, ask.rows, ask.stride, ask.bytes, ask.into_l1);
            row(p, s, d, so, do_, 0, p->inner_size, NULL, NULL, scratch);
            next_outer(p, idx, &so, &do_);
        }
        if (p->stream) dmls_isa.store_fence();
        return;
    }
    seg = t0 % p->segments;
    shift = segment_shift(p, d, do_);
    for (t = t0; t < t1; t++) {
        segment_range(p, seg, shift, &j0, &j1);
        /* A copy through both L2 buffers is told where the next task's
           source rows are (dmls_block, dmls_transpose), so that its last
           chunk asks for them.  In one process on the same buffers,
           alternating (2 threads): 5-D and 6-D float32, float64, uint32 and
           uint16 block permutations of 33-112 MB 1.02-1.22x faster, 8 of 9
           gathers and scatters (one 0.98x); transposes through L2 in tasks
           of a few chunks 1.16-1.28x (scatters into 77- and 141-column
           matrices, a 100-channel uint8 NHWC gather), of many chunks
           (2-D transposes of long rows) 0.89-1.06x, even by geometric
           mean.  Blocks in place that ask for the next one's first tiles
           (p->block_next) are told its destination too. */
        dmls_rows next = {NULL, NULL, p->inner_src_stride, 0, 0};
        char *d_next = NULL;
        if (((p->mode == DMLS_MODE_BLOCK && (p->l2 == DMLS_L2_BOTH || p->block_next) && p->segments == 1) ||
                (p->mode == DMLS_MODE_TILE && p->l2 && p->stream)) && t + 1 < t1) {
            int64_t nidx[DMLS_MAX_DIMS], nso = so, ndo = do_, a, b;
            if (seg + 1 < p->segments) {
                segment_range(p, seg + 1, shift, &a, &b);
            } else {
                memcpy(nidx, idx, (size_t)p->outer_ndim * sizeof *idx);
                next_outer(p, nidx, &nso, &ndo);
                segment_range(p, 0, segment_shift(p, d, ndo), &a, &b);
            }
            next.s = s + nso + a * p->inner_src_stride;
            next.rows = b - a;
            d_next = d + ndo + a * p->inner_dst_stride;
        }
        row(p, s, d, so, do_, j0, j1, next.s != NULL ? &next : NULL, d_next, scratch);
        if (++seg == p->segments) {
            seg = 0;
            next_outer(p, idx, &so, &do_);
            shift = segment_shift(p, d, do_);
        }
    }
    if (p->stream) dmls_isa.store_fence();
}

/* Blocks b0..b1 of a staged 4-bit copy with nibbles on one side: unpack a
   block into the byte stage and let the byte plan write the destination,
   or let the byte plan fill the stage and pack it. */
static void run_staged(const dmls_copy *c, const char *s, char *d, int64_t b0, int64_t b1, char *scratch) {
    const dmls_plan *p = &c->main;
    uint8_t *stage = (uint8_t *)(scratch + DMLS_SCRATCH_STAGE);
    char *kernel = scratch + DMLS_SCRATCH_KERNEL;
    int64_t idx[DMLS_MAX_DIMS], blk, so, do_;
    for (blk = b0; blk < b1; blk++) {
        outer_offsets(p, blk, idx, &so, &do_);
        if (p->src_nibble) {
            dmls_unpack((const uint8_t *)s, so, p->inner_size, stage, p->sign_extend);
            dmls_run_tasks(&c->sub, (const char *)stage, d + do_, 0, c->sub.tasks, kernel);
        } else {
            dmls_run_tasks(&c->sub, s + so, (char *)stage, 0, c->sub.tasks, kernel);
            dmls_pack(stage, p->inner_size, (uint8_t *)d, do_);
        }
    }
}

/* Move one staged block between the byte stage and 4-bit buf, run by run:
   r->inner_size nibbles contiguous in buf per run; the runs' outer dims
   with their stage strides (outer_src_stride, bytes) and buf strides
   (outer_dst_stride, nibbles), relative to nib0. */
static void move_runs(const dmls_plan *r, uint8_t *stage, uint8_t *buf, int64_t nib0, int unpack) {
    int64_t idx[DMLS_MAX_DIMS], so = 0, o = 0, t;
    int i;
    for (i = 0; i < r->outer_ndim; i++) idx[i] = 0;
    for (t = 0; t < r->outer_count; t++) {
        if (unpack)
            dmls_unpack(buf, nib0 + o, r->inner_size, stage + so, 0);
        else
            dmls_pack(stage + so, r->inner_size, buf, nib0 + o);
        next_outer(r, idx, &so, &o);
    }
}

/* Blocks b0..b1 of a 4-bit copy with nibbles on both sides: unpack each
   block's source runs into bytes, let the byte plan reorder them into
   destination order, pack the destination runs. */
static void run_staged_both(const dmls_copy *c, const char *s, char *d, int64_t b0, int64_t b1,
                            char *scratch) {
    uint8_t *stage = (uint8_t *)(scratch + DMLS_SCRATCH_STAGE);
    uint8_t *stage2 = (uint8_t *)(scratch + DMLS_SCRATCH_STAGE2);
    int64_t idx[DMLS_MAX_DIMS], blk, so, do_;
    for (blk = b0; blk < b1; blk++) {
        outer_offsets(&c->main, blk, idx, &so, &do_);
        move_runs(&c->src_runs, stage, (uint8_t *)s, so, 1);
        dmls_run_tasks(&c->sub, (const char *)stage, (char *)stage2, 0, c->sub.tasks,
                       scratch + DMLS_SCRATCH_KERNEL);
        move_runs(&c->dst_runs, stage2, (uint8_t *)d, do_, 0);
    }
}

/* Slabs b0..b1 of a copy in slabs (the planner's plan_slabs): each slab's
   source into this thread's buffer by sub, its channels as planes, then
   from the buffer to its destination by sub2 (both planned for the
   buffer's size: no L2 buffers, no streaming stores). */
static void run_slabs(const dmls_copy *c, const char *s, char *d, int64_t b0, int64_t b1, char *scratch) {
    char *buf = scratch + DMLS_SCRATCH_SLAB, *kernel = scratch + DMLS_SCRATCH_KERNEL;
    int64_t idx[DMLS_MAX_DIMS], blk, so, do_;
    for (blk = b0; blk < b1; blk++) {
        outer_offsets(&c->main, blk, idx, &so, &do_);
        dmls_run_tasks(&c->sub, s + so, buf, 0, c->sub.tasks, kernel);
        dmls_run_tasks(&c->sub2, buf, d + do_, 0, c->sub2.tasks, kernel);
    }
}

typedef struct {
    const dmls_copy *c;
    const dmls_plan *p;     /* a plain copy's plan: its main one or its rest */
    const char *s;
    char *d;
    const dmls_panels *g;   /* a plain copy's panels, or NULL */
    int64_t chunk;
    int64_t total;
} job;

/* Units [t0, t1) of c: tasks of a plain copy's plan p, or its panels where
   run_copy found them (g), blocks of a staged one. */
static void run_units(const dmls_copy *c, const dmls_plan *p, const dmls_panels *g, const char *s, char *d,
                      int64_t t0, int64_t t1, char *scratch) {
    if (c->kind == DMLS_COPY_SLABS)
        run_slabs(c, s, d, t0, t1, scratch);
    else if (c->kind == DMLS_COPY_STAGED_BOTH)
        run_staged_both(c, s, d, t0, t1, scratch);
    else if (c->kind == DMLS_COPY_STAGED)
        run_staged(c, s, d, t0, t1, scratch);
    else if (g != NULL)
        run_panels(p, g, s, d, t0, t1, scratch != NULL ? scratch + DMLS_SCRATCH_JOIN : NULL);
    else
        dmls_run_tasks(p, s, d, t0, t1, scratch);
}

static void job_chunk(void *ctx, int64_t chunk) {
    const job *j = (const job *)ctx;
    int64_t t0, t1;
    /* (chunks in order: the pool cuts them into lanes, one a thread) */
    t0 = chunk * j->chunk;
    t1 = t0 + j->chunk < j->total ? t0 + j->chunk : j->total;
    /* A pool thread has its arena before it takes a chunk. */
    run_units(j->c, j->p, j->g, j->s, j->d, t0, t1, dmls_scratch());
}

/* c with p its main plan, or a plain copy with p its rest. */
static void run_copy(const dmls_copy *c, const dmls_plan *p, const char *s, char *d, int nthreads,
                     char *scratch) {
    /* Units run in parallel only when no two of them write the same byte:
       packing nibbles on one side stays on one thread (neighbouring blocks
       may share a byte), nibbles on both sides only with whole_bytes, and
       the element-wise nibble path never. */
    /* (a plain copy's tasks, or its panels: run_panels) */
    dmls_panels panels;
    const dmls_panels *g = c->kind == DMLS_COPY_PLAIN && panels_of(p, &panels) ? &panels : NULL;
    const int64_t units = c->kind != DMLS_COPY_PLAIN ? p->outer_count : g != NULL ? g->units : p->tasks;
    int parallel = nthreads > 1 && p->dst_bytes >= DMLS_PARALLEL_MIN_BYTES && units >= 2;
    job j;
    int64_t nchunks;
    if (c->kind == DMLS_COPY_PLAIN && p->mode == DMLS_MODE_NIBBLE) parallel = 0;
    if (c->kind == DMLS_COPY_STAGED && p->dst_nibble) parallel = 0;
    if (c->kind == DMLS_COPY_STAGED_BOTH && !c->whole_bytes) parallel = 0;
    if (!parallel) {
        run_units(c, p, g, s, d, 0, units, scratch);
        return;
    }
    nchunks = (int64_t)nthreads * 8 < units ? (int64_t)nthreads * 8 : units;
    j.c = c;
    j.p = p;
    j.s = s;
    j.d = d;
    j.g = g;
    j.total = units;
    j.chunk = (units + nchunks - 1) / nchunks;
    nchunks = (units + j.chunk - 1) / j.chunk;
    dmls_parallel(job_chunk, &j, nchunks, nthreads);
}

void dmls_run(const dmls_copy *c, const char *s, char *d, int nthreads, char *scratch) {
    run_copy(c, &c->main, s, d, nthreads, scratch);
    if (c->kind == DMLS_COPY_PLAIN && c->has_rest)
        run_copy(c, &c->rest, s + c->rest_src, d + c->rest_dst, nthreads, scratch);
}
