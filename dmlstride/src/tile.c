#include "tile.h"

#include "elements.h"
#include "isa.h"
#include "prefetch.h"
#include "scratch.h"
#include <string.h>

void dmls_tile(int W, const char *s, char *d, int64_t kn, int64_t kss, int64_t kds,
               int64_t j0, int64_t j1, int64_t iss, int64_t ids, char *scratch) {
    DMLS_BY_WIDTH(W, dmls_tile_, (s, d, kn, kss, kds, j0, j1, iss, ids, scratch));
}

void dmls_transpose_plain(int w, const char *sj, int64_t iss, char *dj, int64_t kds, int64_t kn, int64_t jn,
                          int flags, char *scratch) {
    int64_t kdone = 0, jb = 0;
    if (dmls_isa.level >= DMLS_ISA_SSE2)
        dmls_isa.transpose(w, sj, iss, dj, kds, kn, jn, flags, &kdone, &jb, scratch);
    if (kdone == 0) jb = 0;
    if (jb < jn) dmls_tile(w, sj, dj, kn, w, kds, jb, jn, iss, w, scratch);
    if (kdone < kn && jb > 0)
        dmls_tile(w, sj + kdone * w, dj + kdone * kds, kn - kdone, w, kds, 0, jb, iss, w, scratch);
}

/* The rows of a chunk are short runs (a KiB or so) from as many places,
   each of which the hardware prefetcher only follows once it is under way:
   asking for the lines of the row two ahead lets their misses overlap this
   row's copy.  In one process on the same buffers, the two alternating
   (2 threads), the 14 gathers and scatters of 8 unnamed 5-D and 6-D
   permutations of 17-56 MB that go through L2 went from 0.46 to 0.56 of
   the memcpy limit (geometric mean; 1.02-1.53x each), 10 of 5 2-D
   transposes of 38-57 MB with rows off line boundaries from 0.45 to 0.48
   (0.95-1.13x).  Four rows ahead measured about the same, and into L1
   0.77-1.07x of into L2. */
void dmls_rows_to_l2(char *buf, int64_t pitch, const char *s, const int64_t *offs, int64_t stride,
                     int64_t rows, int64_t nbytes) {
    enum { AHEAD = 2 };
    int64_t j, q;
    for (j = 0; j < rows; j++) {
        if (j + AHEAD < rows) {
            const char *r = s + (offs ? offs[j + AHEAD] : (j + AHEAD) * stride);
            for (q = 0; q < nbytes; q += 64) DMLS_PREFETCH_L2(r + q);
        }
        memcpy(buf + j * pitch, s + (offs ? offs[j] : j * stride), (size_t)nbytes);
    }
}

/* The chunk's source reads are short runs from as many rows, one after
   another: on one core they waited on memory, and the transpose and the
   writes that follow them used none of it.  Asking for the next chunk's
   rows while this chunk's go out overlaps the two.  In one process on the
   same buffers, the two alternating (2 threads), 2-D uint8, int16 and
   float16 transposes of 43-57 MB (8001 x 7001, 5003 x 9001, 5000 x 6001,
   6000 x 5000) ran 1.24-1.53x faster, gathers and scatters alike (a
   uint8 gather on one thread 3.4 -> 4.6 GB/s); a 6-D float32 block
   permutation of 49 MB 1.08-1.09x, within the run's noise.  Asked for over the transpose as well (half of them, between
   quarters of it), they gained 1.23-1.33x only: the cut transpose cost
   more.  Into L1 rather than L2: 1.02-1.11x. */
/* Streamed rows off line boundaries begin and end with a line written in
   part, with ordinary stores: each waits for its line to be read (for
   ownership), and stores commit in order, so the streaming stores behind it
   wait too.  Asking for those two lines, to be written, DMLS_PARTIAL_AHEAD
   rows before their own lets the reads overlap the rows between.  Two
   builds alternating (2 threads, 3-4 rounds): 2-D int16, float16 and uint8
   transposes of 34-64 MB through the L2 buffers ran 1.13-1.63x faster (the
   tuned 6: 1.32x by geometric mean, 8 rows ahead the same), a fresh 10
   unnamed copies so planned (tiles and blocks, float64 to int16, 32-70 MB)
   1.19x (0.94-1.57x, 8 faster). */
#define DMLS_PARTIAL_AHEAD 4

void dmls_rows_from_l2(char *d, const int64_t *offs, int64_t stride, const char *buf, int64_t pitch,
                       int64_t rows, int64_t nbytes, int stream, const dmls_rows *next) {
    const int64_t ahead = next != NULL ? next->rows : 0;
    int64_t k, r = 0, upto;
    for (k = 0; k < rows; k++) {
        char *row = d + (offs ? offs[k] : k * stride);
        if (stream && k + DMLS_PARTIAL_AHEAD < rows)
            dmls_prefetch_w_end_lines(d + (offs ? offs[k + DMLS_PARTIAL_AHEAD] : (k + DMLS_PARTIAL_AHEAD) * stride),
                                      nbytes);
        if (stream)
            dmls_isa.stream_copy(row, buf + k * pitch, nbytes);
        else
            memcpy(row, buf + k * pitch, (size_t)nbytes);
        for (upto = ahead * (k + 1) / rows; r < upto; r++) {
            dmls_prefetch_l2_lines(next->s + (next->offs ? next->offs[r] : r * next->stride), next->nbytes);
        }
    }
}

dmls_rows dmls_next_chunk(const dmls_rows *src, int64_t w, int64_t jn, int64_t kn, int64_t jc, int64_t kc,
                          int64_t j0, int64_t k0, const dmls_rows *next_task) {
    /* on in k, else the first k of the next j, else the next task's first */
    const int64_t nk0 = k0 + kc < kn ? k0 + kc : 0, nj0 = k0 + kc < kn ? j0 : j0 + jc;
    const dmls_rows *from = nj0 < jn ? src : next_task;
    const int64_t first = nj0 < jn ? nj0 : 0;
    dmls_rows next = {src->s, src->offs, src->stride, 0, 0};
    if (from == NULL) return next;
    next.s = from->s + nk0 * w + (from->offs ? 0 : first * from->stride);
    next.offs = from->offs ? from->offs + first : NULL;
    next.stride = from->stride;
    next.rows = from->rows - first < jc ? from->rows - first : jc;
    next.nbytes = (kn - nk0 < kc ? kn - nk0 : kc) * w;
    return next;
}

/* Through L2, for destination rows off line boundaries: chunks of jc x kc
   (dmls_block_chunks, a tile's): the chunk's source rows copied to a buffer one
   after another, transposed into a second buffer, whose rows are then
   written out with streaming stores for their whole lines.  Destination
   rows back to back of whole micro-blocks (the planner's
   CONTIG_BAND_BYTES) whose chunks take whole rows are transposed into the
   buffer back to back too and written out as one run, in pieces of
   DMLS_RUN_PIECE bytes (between which the next chunk's rows are asked
   for), rather than row by row, each row's first and last lines, shared
   with the rows beside it, with ordinary stores.  Ragged rows back to back
   keep the rows: 5 unnamed uint8, int16 and float16 gathers so planned
   ran 0.86-0.93x as one run (one 1.6x).  Returns 0 when the buffers
   cannot take a chunk. */
#define DMLS_RUN_PIECE 4096
static int transpose_through_l2(int w, const char *sj, int64_t iss, char *dj, int64_t kds, int64_t kn,
                                int64_t jn, int64_t lines, const dmls_rows *next_task, char *scratch) {
    /* Values from source rows more than DMLS_CLOSE_ROW_BYTES apart (not a
       multiple of 1 KiB, whose rows would crowd L1's sets): the chunk's
       rows, asked for into L2 while the chunk before went out, are
       transposed where they are rather than copied to the buffer first.  In
       one process on the same buffers, alternating (2 threads), 2-D uint8
       transposes of 46-53 MB ran 1.07-1.12x faster (8 gathers and scatters,
       two runs), rows 2 KiB or more apart; two-byte ones measured
       0.94-1.10x then and stayed out.  Later, two builds alternating (2
       threads, 4 rounds), 2-D transposes and 3-D to 5-D permutations of
       4-60 MB planned through L2: four- and eight-byte ones 1.17x and 1.12x
       by geometric mean (12 and 15, 0.94-1.34x), two-byte ones 1.15x (16,
       1.04-1.28x), rows 1-2 KiB apart 1.22x (16, 1.07-1.36x), and a fresh
       20 of every width 1.14x (0.99-1.24x).  Source rows closer together
       (pixels of an NHWC copy, a 141-column matrix) had measured down to
       0.67x: those read their rows as runs of the buffer.  Chunks read in
       place take one line of k, or two (lines: see dmls_in_place_chunk_k), of
       each row (DMLS_CHUNK_IN_PLACE, plan.h). */
    const int in_place = iss > DMLS_CLOSE_ROW_BYTES && iss % 1024 != 0;
    const int chunk_flags = DMLS_TRANSPOSE_CACHED | DMLS_TRANSPOSE_LONG_TILES;
    const dmls_rows rows = {sj, NULL, iss, jn, 0};
    int64_t jc, kc, sp, dp, j0, k0, nj, n;
    int one_run;
    char *arena = dmls_scratch(), *sb, *db;
    dmls_block_chunks(w, jn, kn, in_place ? DMLS_CHUNK_IN_PLACE : DMLS_CHUNK_TILE, lines, &jc, &kc);
    if (arena == NULL || kc == 0) return 0;
    one_run = jc == jn && kds == jn * w && jn % (16 / w) == 0;
    sp = dmls_block_pitch(kc * w);
    dp = dmls_block_pitch(jc * w);
    if (one_run) dp = kds;   /* (dp >= jc * w before: the buffer holds it) */
    sb = arena + DMLS_SCRATCH_BLOCK_SRC;
    db = arena + DMLS_SCRATCH_BLOCK_DST;
    for (j0 = 0; j0 < jn; j0 += jc) {
        nj = jn - j0 < jc ? jn - j0 : jc;
        for (k0 = 0; k0 < kn; k0 += kc) {
            const dmls_rows next = dmls_next_chunk(&rows, w, jn, kn, jc, kc, j0, k0, next_task);
            n = kn - k0 < kc ? kn - k0 : kc;
            if (in_place) {
                dmls_transpose_plain(w, sj + j0 * iss + k0 * w, iss, db, dp, n, nj, chunk_flags, scratch);
            } else {
                dmls_rows_to_l2(sb, sp, sj + j0 * iss + k0 * w, NULL, iss, nj, n * w);
                dmls_transpose_plain(w, sb, sp, db, dp, n, nj, chunk_flags, scratch);
            }
            if (one_run) {
                const int64_t all = n * kds, pieces = all / DMLS_RUN_PIECE, rest = all % DMLS_RUN_PIECE;
                if (pieces > 0)
                    dmls_rows_from_l2(dj + k0 * kds, NULL, DMLS_RUN_PIECE, db, DMLS_RUN_PIECE, pieces,
                                      DMLS_RUN_PIECE, 1, &next);
                if (rest > 0)
                    dmls_rows_from_l2(dj + k0 * kds + pieces * DMLS_RUN_PIECE, NULL, rest,
                                      db + pieces * DMLS_RUN_PIECE, rest, 1, rest, 1, pieces > 0 ? NULL : &next);
            } else {
                dmls_rows_from_l2(dj + k0 * kds + j0 * w, NULL, kds, db, dp, n, nj * w, 1, &next);
            }
        }
    }
    return 1;
}

/* A task whose destination is one run (jn values a row, kn rows back to
   back, at most DMLS_SCRATCH_BLOCK_BYTES in all) transposed from cache into
   the L2 buffer, which is then streamed out as that run: its whole lines
   with streaming stores, the partial ones at its ends with ordinary stores
   (the planner's stage_tasks says where).  Returns 0 when there is no
   buffer. */
static int transpose_staged(int w, const char *sj, int64_t iss, char *dj, int64_t kds, int64_t kn, int64_t jn,
                            char *scratch) {
    char *stage = dmls_scratch();
    if (stage == NULL) return 0;
    stage += DMLS_SCRATCH_BLOCK_DST;
    dmls_transpose_plain(w, sj, iss, stage, kds, kn, jn, DMLS_TRANSPOSE_CACHED, scratch);
    dmls_isa.stream_copy(dj, stage, kn * kds);
    return 1;
}

/* Where a tile plan's transpose finds its operands (DMLS_TRANSPOSE_*).  A
   copy of fewer than DMLS_CACHED_TRANSPOSE_BYTES (plan.h, one side) that
   does not stream runs from cache: its source and destination together stay
   within half the L3, and the tile reads its source rows in place where it
   can (see dmls_isa_t.transpose).  A larger one, or one that streams, comes
   from memory: its source rows are read through the staged tile and the
   next tile's destination lines are asked for into L2 rather than L1.
   Against the in-place reads, 16 2-D transposes of 10-60 MB (uint8, int16,
   uint16, float32; 2 threads) went from 0.30 to 0.38 of the memcpy limit,
   the uint8 ones 1.5-1.8x faster; 16 of 1.5-6.3 MB ran faster in place
   (0.56 of the limit against 0.39).
   4- and 8-byte values run from cache up to DMLS_CACHED_WIDE_TRANSPOSE_BYTES:
   in one process on the same buffers, alternating (2 threads), 16 gathers
   and scatters of 2-D float32, float64 and int32 transposes and NHWC to
   NCHW conversions of 8-12 MiB (1024 x 2048, 512 x 4096, 1100 x 1300
   float64, 24 and 40 channels) ran 1.10x faster by geometric mean
   (0.94-1.33x); 2-D uint8 and float16 ones of 8 MiB ran 0.81-1.03x, and
   keep the 8 MiB bound, which the planner passes on for one- and two-byte
   tiles as the plan's narrow_cached_bytes (it had given 12-16 MiB there on
   a machine with an L3 of at most 64 MiB; with that L3 shared with other
   jobs those copies ran faster streamed: see the planner's L3_BOUNDS).

   From DMLS_SOURCE_AHEAD_BYTES, past the L2 caches of both cores, the tile
   also asks for the source lines of the tile after: in one run, on the same
   buffers, 24 2-D transposes of 10-29 MB (uint8 to float64) went from 0.28
   to 0.35 of the memcpy limit, all but one faster, and 16 of 1.5-7.6 MB
   asking for them too from 0.55 to 0.65, those of 1.5-2 MB 0.85-0.95x. */
#define DMLS_SOURCE_AHEAD_BYTES ((int64_t)4 << 20)
typedef char dmls_source_ahead_below_cached[DMLS_SOURCE_AHEAD_BYTES <= DMLS_CACHED_TRANSPOSE_BYTES ? 1 : -1];

/* The bytes of the plan's whole copy, or cap when there are cap or more
   (each factor is checked before it multiplies, so nothing overflows).  A
   task of a transpose cut into pieces of k sees one piece as its
   tile_size: the pieces count at their full length. */
static int64_t copy_bytes_upto(const dmls_plan *p, int64_t cap) {
    const int cut = p->tile_pieces > 1;
    const int64_t f[5] = {p->outer_count, p->inner_size, cut ? p->tile_piece : p->tile_size,
                          cut ? p->tile_pieces : 1, p->width};
    int64_t n = 1;
    int i;
    for (i = 0; i < 5; i++) {
        if (f[i] < 1) return 0;
        if (n > (cap - 1) / f[i]) return cap;
        n *= f[i];
    }
    return n;
}

/* The flags of a plan's transpose (see above): a copy that streams comes
   from memory whatever its size. */
static int transpose_flags(const dmls_plan *p) {
    const int64_t cached = p->width >= 4 ? DMLS_CACHED_WIDE_TRANSPOSE_BYTES
                           : p->narrow_cached_bytes > 0 ? p->narrow_cached_bytes : DMLS_CACHED_TRANSPOSE_BYTES;
    const int64_t bytes = copy_bytes_upto(p, cached);
    int flags = 0;
    if (!p->stream && bytes < cached) flags |= DMLS_TRANSPOSE_CACHED;
    if (p->stream || bytes >= DMLS_SOURCE_AHEAD_BYTES) flags |= DMLS_TRANSPOSE_SOURCE_AHEAD;
    if (!p->stream && !p->l2 && bytes >= DMLS_TALL_TILE_BYTES) flags |= DMLS_TRANSPOSE_TALL;
    if ((flags & DMLS_TRANSPOSE_CACHED) && bytes >= DMLS_CACHED_TRANSPOSE_BYTES) flags |= DMLS_TRANSPOSE_LONG_TILES;
    return flags;
}

/* Streaming transposes whose destination rows are off line boundaries
   take dmls_isa.nt_shifted (bands of one destination line, each row's
   whole lines streamed) where a task's piece of each row is at least this
   many bytes: 4- and 8-byte values, and 2-byte ones not planned through
   L2.  In one process on the same buffers, the two alternating (2
   threads), 2-D float32 and float64 transposes of 38-57 MB went from the
   L2 buffers 1.11-1.33x faster, NHWC to NCHW gathers of 24-40 float32 or
   float64 channels (31-66 MB) 1.18-1.79x, of 24 int16 and 40 float16 ones
   1.22x and 1.68x; through L2, 2-D int16 and uint8 ones ran 0.65-0.77x,
   and uint8 ones outside it 0.84-1.10x, so those keep their paths.  Pieces
   of 64 float32 values (a copy of 12-32 MB cut for threads) ran 0.78-0.91x
   of the cached tile with streaming stores: their first and last lines,
   written in part, are a quarter of them. */
#define DMLS_SHIFTED_MIN_RUN 1024
/* A copy planned through L2 takes nt_shifted only where a task's source
   rows (its kn values of k) are at most DMLS_SHIFTED_L2_SHORT bytes;
   longer ones the L2 buffers read as runs long enough, and write each
   destination row's piece whole.  In one process on the same buffers,
   nt_shifted against the L2 buffers (2 threads, 9 rounds; 2-D
   float32/float64 transposes and NHWC to NCHW gathers of 44-111 MB): rows
   of 84-160 bytes (21-40 float32 channels, 17 float64) 1.15-2.05x, of
   180-920 bytes 0.49-0.94x (77 float32 channels 0.49x, a 141-column matrix
   scattered 0.61-0.63x).  Rows of 1 KiB or more had taken nt_shifted too
   (1.6-48 KB measured 0.94-1.35x, 3001 x 5003 float32 1.11-1.23x) until
   the L2 buffers' rows asked for their partial lines ahead
   (DMLS_PARTIAL_AHEAD): since, two builds alternating (2 threads, 3-4
   rounds), 6 2-D float32, float64 and uint32 transposes of 36-60 MB ran
   1.22x faster through the buffers (0.98-1.51x), a fresh 10 unnamed
   copies so planned (32-70 MB) 1.19x (0.94-1.55x, 8 faster). */
#define DMLS_SHIFTED_L2_SHORT 160
/* Source rows close together (DMLS_CLOSE_ROW_BYTES apart at most: the
   pixels of an NHWC to NCHW gather) take nt_shifted whatever the plan's L2
   buffers and the rows' length, 2-byte values included.  Those figures above were measured
   while nt_shifted asked for such rows' lines ahead in a way that halved
   the speed of some (transpose-sse2.c): since, in one process on the same
   buffers, alternating (2 threads), NHWC to NCHW gathers planned through
   L2 ran 1.13-1.74x faster through nt_shifted than through the L2
   buffers (22 and 40 float64 channels 1.45x and 1.27x, 48, 77 and 130
   float32 1.52x, 1.41x and 1.13x, 36 and 64 int16 1.74x and 1.50x;
   40-125 MB), 2-D float32 transposes whose rows of 141 values lie 564
   bytes apart 1.10x and 1.13x.
   Rows further apart keep the bounds above: 2-D int16 and float16
   transposes of 34-40 MB through nt_shifted ran 0.82-0.89x.  One-byte
   pixels of 16-64 channels go the same way (pixels of 5-15 take
   rows_short above), where they took the cached tile and ordinary
   stores: in one process on the same buffers, alternating (2 threads),
   NHWC to NCHW gathers of 16-64 uint8 and int8 channels (24-40 MB) ran
   1.08-1.66x faster, 1.37x by geometric mean of 10; of 500 and 700
   channels 0.95x and 0.86x, so pixels of more than a line keep the
   tile.
   Pixels of 65-232 one-byte channels (DMLS_SHIFTED_BYTE_PIXEL_MAX) go so
   too, in pieces of DMLS_SHIFTED_BYTE_MIN_RUN or more (their tasks take
   about 60 KB of source, 320-960 pixels): they had taken the tile, or the
   L2 buffers for 1024 pixels.  Two builds alternating (2 threads, 4
   rounds), NHWC to NCHW gathers and de-interleaves of 65-190 uint8 and
   int8 channels, 11-70 MB, ran 1.33x faster over 8 fresh shapes
   (1.00-1.69x), and 1.39-1.59x by set over the 16 tuned on.  The bound
   was 192 then (230-301 channels had measured 0.77-0.98x); raised to 232,
   two builds alternating (2 threads, 3 rounds), NHWC to NCHW gathers and
   de-interleaves of 194-232 channels, 13-70 MB, ran 1.21x faster by
   geometric mean (8, 1.02-1.50x) and 1.16x on a fresh 8 (0.94-1.52x). */
#define DMLS_SHIFTED_BYTE_PIXEL_MAX 232
#define DMLS_SHIFTED_BYTE_MIN_RUN 256
/* Whether a streaming transpose of rows off line boundaries (kn values of w
   bytes a source row, rows iss bytes apart, jn of them) takes nt_shifted,
   by the bounds above. */
static int takes_nt_shifted(const dmls_plan *p, int w, int64_t kn, int64_t jn, int64_t iss) {
    const int close = iss <= DMLS_CLOSE_ROW_BYTES;
    if (!p->stream) return 0;
    if (w == 1) return close && kn <= DMLS_SHIFTED_BYTE_PIXEL_MAX &&
                       jn >= (kn <= 64 ? DMLS_SHIFTED_MIN_RUN : DMLS_SHIFTED_BYTE_MIN_RUN);
    if (jn * w < DMLS_SHIFTED_MIN_RUN) return 0;
    if (w == 2 && p->l2 && !close) return 0;
    if (w != 2 && w < 4) return 0;
    return !p->l2 || close || kn * w <= DMLS_SHIFTED_L2_SHORT;
}

/* One- and two-byte rows of whole lines back to back, off a line
   boundary, take nt_shifted's joined lines up to DMLS_JOINED_MAX_ROW bytes
   (pixels of 512 or 1024 bytes of two-byte values excepted: they take the
   contiguous tile), one-byte ones from planes a multiple of 1 KiB apart or
   of DMLS_JOINED_BYTE_MIN_ROW bytes or more.  Against the contiguous tile,
   two builds side by side (benchmarks/compare_builds.py, 2 threads, two
   passes of 7 repeats), NCHW to NHWC scatters of 8-48 MB into a destination
   16 bytes past a line: 13 with one-byte pixels of 128-1024 channels from
   planes a multiple of 1 KiB apart (where the tile's bands crowd a few of
   L2's sets) or of more than 512 bytes ran 1.00-2.21x faster (192, 320
   and 640 channels 1.6x, 2.2x and 2.2x), and then took 1.01-1.36x their
   time page-aligned (through the tile, on an earlier set, 1.5-2.7x); of a
   fresh 16 of 128-1024 channels, planes of random sizes, the 9 that take
   them 1.53x by geometric mean (0.94-2.14x; the other 7, whose paths do not
   change, 0.96-1.06x); 6 with two-byte ones of 288-480 channels (rows of
   576-960 bytes) 1.15-1.54x.  One-byte pixels of 128-512 bytes from planes
   of random sizes measured 0.63-0.95x (the tile reads such planes well),
   longer rows 0.94-1.03x (1536 and 2048 one-byte channels, 640 and 768
   two-byte ones), and one-byte pixels from planes at most
   DMLS_CLOSE_ROW_BYTES apart 0.89-1.02x (byte_bands below): those keep
   their paths.  Two-byte pixels of 512 bytes had measured 0.59-1.24x (four
   scatters of 18-60 MB). */
#define DMLS_JOINED_MAX_ROW 1024
#define DMLS_JOINED_BYTE_MIN_ROW 576

/* Copies of at least this many bytes give contig_ragged DMLS_RAGGED_LONG
   (isa.h): their one-byte bands of 33-64 channels are longer (see
   transpose-sse2.c for what that measured, and the bound). */
#define DMLS_RAGGED_LONG_MIN_BYTES ((int64_t)24 << 20)

/* Of jn pixels iss bytes apart, each of pixel bytes (pixel <= reach), the
   first ones, a multiple of step, whose reads of reach bytes from their
   start stay within the pixels (deint_k_32 and deint_k_64 read a pixel's
   next values with its own). */
static int64_t pixels_reading_within(int64_t jn, int64_t reach, int64_t pixel, int64_t iss, int64_t step) {
    const int64_t last = jn - 1 - (reach - pixel + iss - 1) / iss;
    return last >= step - 1 ? (last + 1) / step * step : 0;
}

void dmls_transpose(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, const dmls_rows *next,
                    char *scratch) {
    const int w = p->width;
    const int64_t kn = p->tile_size, kss = p->tile_src_stride, kds = p->tile_dst_stride;
    const int64_t iss = p->inner_src_stride, ids = p->inner_dst_stride;
    int64_t jn, kdone = 0, ja = 0, jb = 0, body;
    const char *sj;
    char *dj;
    if (w == 4 && kn >= 5 && kn <= 7 && kss == 4 && ids == 4 && iss >= 4 * kn && j1 - j0 >= 64 &&
            !(p->stream && kds % 64 == 0)) {
        /* 5-7 four-byte channels in rows of 64 pixels or more
           (deint_k_32): the pixels whose 32-byte reads stay within the
           tile's rows, the rest through the tile.  Two builds alternating
           (2 threads, 3-6 rounds), 8 fresh unnamed gathers of 12-60 MB so
           planned (NHWC to NCHW, 5-D and 6-D) ran 1.02-1.52x faster (one
           0.97x in a second run), a uint32 de-interleave of 5 channels into
           planes of 90 values (0.70x PyTorch in one run) 1.19-1.66x.  Rows
           of 21 pixels ran 0.61-0.91x (the tile's kernels on a ragged rest
           each task) and streamed rows on whole lines (the tile writes them
           with streaming stores) 0.63x: those keep the tile. */
        const int64_t jw = pixels_reading_within(j1 - j0, 32, 4 * kn, iss, 8);
        if (jw > 0) j0 += dmls_isa.deint_k_32(s + j0 * iss, iss, d + j0 * 4, kds, (int)kn, jw);
        if (j0 >= j1) return;
    }
    if (w == 8 && kn >= 3 && kn <= 7 && kss == 8 && ids == 8 && iss >= 8 * kn && j1 - j0 >= 32 &&
            !(p->stream && kds % 64 == 0)) {
        /* 3-7 eight-byte channels the same way (deint_k_64), 4 pixels at
           a time, each read as 32 or 64 bytes.  Streamed, these had taken
           nt_shifted (about an instruction a byte for 5 channels: 195
           million for three gathers of 67 MB).  Two builds alternating (2
           threads, 6 rounds), 14 unnamed float64 NHWC to NCHW gathers of
           3-7 channels, 8-70 MB, and the harness's of 5 channels ran
           1.09x faster by geometric mean (0.99-1.27x; 5-7 channels
           1.03-1.27x, 3-4 channels 0.99-1.05x), a fresh 12 (builds
           swapped) 1.11x (0.95-1.69x). */
        const int64_t jw = pixels_reading_within(j1 - j0, kn > 4 ? 64 : 32, 8 * kn, iss, 4);
        if (jw > 0) j0 += dmls_isa.deint_k_64(s + j0 * iss, iss, d + j0 * 8, kds, (int)kn, jw);
        if (j0 >= j1) return;
    }
    jn = j1 - j0;
    sj = s + j0 * iss;
    dj = d + j0 * ids;
    /* The SIMD variant covers rows k < kdone of columns ja..jb; the scalar
       tile does the rest. */
    if (dmls_isa.level >= DMLS_ISA_SSE2 && w <= 2 && kss == w && ids == w && kn * w < 16 && kn > 4) {
        /* 5-15 one-byte values per source row, 5-7 two-byte ones: fewer
           than a micro-block. */
        dmls_isa.rows_short(w, sj, iss, dj, kds, kn, jn, p->stream,
                            transpose_flags(p), &jb, scratch);
        if (jb > 0) kdone = kn;
    } else if (dmls_isa.level >= DMLS_ISA_SSE2 && kss == w && ids == w && jn < 16 / w &&
               !(kds == jn * w && kn >= DMLS_RAGGED_MIN_ROWS)) {
        /* Fewer columns than a micro-block (a last segment of a row, or
           8-15 one-byte values) and not back to back (contig_ragged's):
           padded micro-blocks rather than element by element. */
        dmls_isa.narrow(w, sj, iss, dj, kds, kn, jn, &kdone);
        jb = jn;
    } else if (dmls_isa.level >= DMLS_ISA_SSE2 && kss == w && ids == w) {
        /* Pixels of 512 or 1024 bytes (at most 512 values) take the
           contiguous tile wherever they start: the line-aligned bands below
           write one line of each pixel a band, every line a multiple of 512
           bytes from the last, and ran at 8-12 GB/s where the contiguous
           tile streams one run.  In one process on the same buffers,
           alternating (2 threads, 7 rounds), 10 NCHW to NHWC scatters of
           22-59 MB with such pixels (uint8 to float64, page-aligned or 16-48
           bytes past a line) ran 1.17-1.80x faster (uint32 pixels of 128
           channels 8.3 -> 14.8 GB/s), one of 12 MB 0.94x, and 13 more of an
           earlier set 1.16-1.86x; one-byte pixels of 1024 values 0.92x, and
           pixels of 256, 640, 768 and 896 bytes 0.62-1.11x, which keep the
           bands.  One-byte pixels of 512 values keep them too: from planes
           a multiple of 16 KiB apart, the tile's bands of 32 bytes of each
           of 512 planes crowd a few of L2's sets and lose the lines they ask
           for ahead.  Two builds side by side (benchmarks/compare_builds.py,
           2 threads, two passes of 7 repeats), 8 NCHW to NHWC uint8
           scatters of 4-34 MB with 512 channels, page-aligned, ran 1.32x
           faster by geometric mean through the bands (0.98-2.27x; 128 x 128
           and 256 x 256 planes 1.79x and 2.27x). */
        const int pixels_512 = w >= 2 && !p->l2 && kds % 512 == 0 && jn <= 512;
        /* But one-byte pixels of 320 to 1023 bytes of whole lines, not a
           multiple of 512, from planes at most DMLS_CLOSE_ROW_BYTES apart
           (an NCHW to NHWC scatter of 20 x 23 pixels into 960 channels)
           keep the bands below when the destination starts off a line
           boundary, as numpy's large arrays do: two builds side by side
           (benchmarks/compare_builds.py, 2 threads, two passes of 3
           repeats), 9 unnamed such uint8 scatters of 17-47 MB with 640-960
           channels ran 1.11-1.79x faster than through the contiguous tile
           (1.35x by geometric mean), a fresh 12 of 12-17 MB 1.41x
           (1.17-1.74x), and in one process, the plans alternating, 384, 448
           and 576 channels 1.32x, 1.43x and 1.64x; pixels of 512 and 1024
           bytes measured 0.69-0.99x, and keep the contiguous tile. */
        const int byte_bands = w == 1 && iss <= DMLS_CLOSE_ROW_BYTES && kds > 256 && kds % 64 == 0 &&
                               kds % 512 != 0;
        if (p->stream && kds == jn * w && kds % 64 == 0 && (uintptr_t)dj % 64 != 0 && !pixels_512 &&
                (w >= 4 || (kds <= DMLS_JOINED_MAX_ROW && !byte_bands &&
                            (w == 2 || iss % 1024 == 0 || kds >= DMLS_JOINED_BYTE_MIN_ROW)))) {
            /* Rows of whole lines back to back, off a line boundary (an
               NHWC output a few bytes past one): line-aligned bands from
               each row's first boundary, and a row's last line in part
               with the next row's first as one more line (nt_shifted).
               Against the contiguous tile below, in one process on the
               same buffers (2 threads), 4 NCHW to NHWC conversions of
               48-66 MB of 24-64 float32 or float64 channels, the
               destination 4-16 bytes past a line, ran 1.13-1.70x faster;
               two-byte ones of 64-192 channels 1.33x and 1.51x by
               geometric mean over two sets (see transpose-sse2.c), and
               one- and two-byte ones up to DMLS_JOINED_MAX_ROW bytes
               (above). */
            dmls_isa.nt_shifted(w, sj, iss, dj, kds, kn, jn, &kdone, &jb, scratch);
            if (kdone == kn && jb == jn) return;
        }
        if (p->stream && !p->l2 && kds == jn * w && jn % (16 / w) == 0 && jn * w <= 1024 && !byte_bands &&
                (kds % 64 != 0 || (uintptr_t)dj % 64 != 0 || pixels_512)) {
            /* Whole destination rows back to back: one contiguous stream.
               Not rows of whole lines from a line boundary (pixels of 16,
               32 or 48 float32 channels), which the line-aligned strips
               below write a band of source rows at a time.  Against the
               L1 tile, which reads every source row of a tile side by
               side, 14 NCHW to NHWC (and NCDHW to NDHWC) conversions of
               21-64 MB with such pixels (float16 to float64) ran
               1.21-2.33x faster, 64 and 128 uint8 channels and 96
               float32 ones as fast (in one process on the same buffers,
               alternating, 2 threads).  (Longer rows of one- and
               two-byte values, whose bands would read less than a line of
               each source row, are planned through L2: see
               transpose_through_l2.) */
            dmls_isa.nt_contig(w, sj, iss, dj, kn, jn, &kdone, scratch);
            jb = jn;
        } else if (kds == jn * w && jn % (16 / w) != 0 && jn * w <= 512 && kn >= DMLS_RAGGED_MIN_ROWS &&
                   (p->stream || jn < 16 / w)) {
            /* The same with a ragged row: through a tile of whole
               micro-blocks, streamed out a band at a time.  A copy that
               does not stream takes the L1 tile below instead (its ragged
               column one more micro-block, moved back), straight into the
               destination, unless its rows are shorter than a micro-block.
               In one process on the same buffers, alternating in a
               shuffled order (2 threads, 5 rounds), with the old code
               against itself as a control (1.00x, 1.01x): 20 unnamed NCHW
               to NHWC scatters of 5-48 one- to eight-byte channels, 1-12
               MB, ran 1.31x faster by geometric mean (0.81-1.57x, 18
               faster; 0.59 -> 0.78 of the memcpy limit), and 20 unnamed
               5-D and 6-D permutations of 3.5-11.6 MB with such rows 1.13x
               (0.95-1.68x).  Streaming copies of 13-64 MB ran 0.79x so
               (0.56-1.13x) and keep the band.  In cache, one thread, 21
               uint8 channels went from 6.8 to 12.9 GB/s, 9 uint32 ones
               from 13.2 to 19.0. */
            dmls_isa.contig_ragged(w, sj, iss, dj, kn, jn,
                                   (p->stream ? DMLS_RAGGED_STREAM : 0) |
                                   (p->dst_bytes >= DMLS_RAGGED_LONG_MIN_BYTES ? DMLS_RAGGED_LONG : 0),
                                   &kdone, scratch);
            jb = jn;
        } else if (p->stream && kds % 64 == 0 && (uintptr_t)dj % (uintptr_t)w != 0) {
            /* A destination off its values' alignment (merged values: pairs
               of float32 as eight-byte ones, a buffer four bytes past a
               line) has no line-aligned strips, and went value by value
               through the scalar tile, 5-11.5x the aligned time (2-D and
               4-D transposes of 16-134 MB keeping a last dimension of 2-8
               values; 1.1-2.0x now).  Eight-byte values stream their lines out of
               nt_shifted's slots, byte-shifted, and narrower ones take the
               plain transpose with ordinary stores: in one process on the
               same buffers, alternating (2 threads), nt_shifted ran 1.08x
               faster than the plain transpose by geometric mean on 8 such
               gathers and scatters of eight-byte values (0.94-1.29x), 0.96x
               on four-byte ones (0.83-1.08x). */
            if (w >= 8) {
                dmls_isa.nt_shifted(w, sj, iss, dj, kds, kn, jn, &kdone, &jb, scratch);
                if (kdone > 0) goto rest;
            }
            dmls_transpose_plain(w, sj, iss, dj, kds, kn, jn, transpose_flags(p), scratch);
            return;
        } else if (p->stream && kds % 64 == 0) {
            /* Line-aligned strips; the columns before the first line
               boundary and after the last one are left to the scalar tile. */
            body = dmls_whole_lines(dj, w, jn, &ja);
            jb = ja + body;
            if (body > 0)
                dmls_isa.nt_transpose(w, sj + ja * iss, iss, dj + ja * w, kds, kn, jb - ja, &kdone, scratch);
        } else {
            /* Rows off line boundaries: through L2 when planned (and the
               copy streams: a fresh output takes plain stores). */
            if (takes_nt_shifted(p, w, kn, jn, iss)) {
                dmls_isa.nt_shifted(w, sj, iss, dj, kds, kn, jn, &kdone, &jb, scratch);
                if (kdone > 0) goto rest;
            }
            if (p->l2 && p->stream && transpose_through_l2(w, sj, iss, dj, kds, kn, jn, p->l2_lines, next, scratch))
                return;
            if (p->stage_tasks && p->stream && kds == jn * w && kn <= DMLS_SCRATCH_BLOCK_BYTES / kds &&
                    transpose_staged(w, sj, iss, dj, kds, kn, jn, scratch))
                return;
            dmls_transpose_plain(w, sj, iss, dj, kds, kn, jn, transpose_flags(p), scratch);
            return;
        }
    }
rest:
    if (kdone == 0) ja = jb = 0;
    if (kdone > 0 && w <= 2) {
        /* One-byte columns before ja and past jb (the last band's, under
           a line: nt_shifted's 58 of 378 columns) through the register
           micro-blocks too, their ragged edges moved back; value by value
           they took most of the instructions of a uint8 gather of 168 x
           378 tiles, which ran 1.25-1.36x faster (two builds alternating,
           2 threads, 4-8 rounds).  Two-byte ones too: an NCHW to NHWC
           scatter of 640 float16 channels into a destination 16 bytes past
           a line, whose first segment of each pixel has 24 such columns and
           its last 8, spent a fifth of its time on them value by value, at
           1.6-1.8x its page-aligned time.  Two builds side by side
           (benchmarks/compare_builds.py, 2 threads, two passes of 7
           repeats), 12 unnamed such scatters of 520-1500 two-byte channels
           (10-38 MB) and 5 int16 transposes and NHWC to NCHW gathers, 16
           bytes past a line, ran 1.04x faster by geometric mean (0.91-1.20x,
           8 faster), 0.98x page-aligned, where they have no such columns;
           their time 16 bytes past a line went from 1.17x their
           page-aligned time by geometric mean (at most 1.70x) to 1.07x (at
           most 1.38x). */
        if (ja > 0) dmls_transpose_plain(w, sj, iss, dj, kds, kn, ja, transpose_flags(p), scratch);
        if (jb < jn)
            dmls_transpose_plain(w, sj + jb * iss, iss, dj + jb * w, kds, kn, jn - jb, transpose_flags(p), scratch);
    } else {
        if (ja > 0) dmls_tile(w, sj, dj, kn, kss, kds, 0, ja, iss, ids, scratch);
        if (jb < jn) dmls_tile(w, sj, dj, kn, kss, kds, jb, jn, iss, ids, scratch);
    }
    if (kdone < kn && jb > ja)
        dmls_tile(w, sj + kdone * kss, dj + kdone * kds, kn - kdone, kss, kds, ja, jb, iss, ids, scratch);
}
