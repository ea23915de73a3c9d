/* SSE2 transposes and streaming copies (the x86-64 baseline). */
#include "isa.h"

#if DMLSTRIDE_HAVE_SIMD
#include <string.h>

#include "copy-short.h"
#include "lines.h"
#include "micro-sse2.h"
#include "scratch.h"

void dmls_interleave_sse2(dmls_isa_t *t);
void dmls_nibble_sse2(dmls_isa_t *t);

/* Source rows at most this many bytes apart (pixels of up to 32 float32
   channels in an NHWC to NCHW copy) are never staged: a tile's rows then lie
   in a few KiB of memory, clear of each other in L1, and staging them cost
   a call to memcpy per row of 8 to 128 bytes (without it: 10 float32
   channels 1.2-1.4x faster, 12 int16 ones 1.5-2.2x, 24 uint8 ones 1.8x;
   rows of 160 bytes and more gained nothing or lost). */
#define DMLS_UNSTAGED_ROW_BYTES 128

/* Whether source rows sj apart crowd L1's sets: each row, or every other
   one, lies within a few bytes of a multiple of 4 KiB from the last (a
   tile's 64 rows then put 32 or more rows' lines in the same sets, four
   times the ways). */
static inline int rows_crowd_sets(int64_t sj) {
    const int64_t r = (sj % 4096 + 4096) % 4096;
    int64_t m, o;
    for (m = 1; m <= 2; m++) {
        o = r * m % 4096;
        if (o < 8 || o > 4096 - 8) return 1;
    }
    return 0;
}

/* Ask for the lines of r[0 .. e] (e >= 0), into L1 when cached, else into
   L2: a tile from memory has its own lines and the next tile's in flight,
   more than L1 holds (a tile of one-byte values four lines deep writes 256
   destination rows of one or two lines each). */
static inline void prefetch_row(const char *r, int64_t e, int cached) {
    int64_t q;
    if (cached) {
        for (q = 0; q < e; q += 64) _mm_prefetch(r + q, _MM_HINT_T0);
        _mm_prefetch(r + e, _MM_HINT_T0);
    } else {
        for (q = 0; q < e; q += 64) _mm_prefetch(r + q, _MM_HINT_T1);
        _mm_prefetch(r + e, _MM_HINT_T1);
    }
}

/* One N x N micro-block (N = 16 / W). */
static inline void simd_micro(int W, const char *sp, int64_t ss, char *dp, int64_t ds) {
    switch (W) {
    case 1: dmls_micro1(sp, ss, dp, ds); break;
    case 2: dmls_micro2(sp, ss, dp, ds); break;
    case 4: dmls_micro4(sp, ss, dp, ds); break;
    default: dmls_micro8(sp, ss, dp, ds); break;
    }
}

/* The tile's padded destination buffer (dmls_simd_transpose's stage):
   16 rows of DMLS_STAGE_PITCH bytes for 1- and 2-byte values (staged), 8
   rows of DMLS_WIDE_PITCH for 4-byte ones (wstaged): 64 values and 64
   bytes of pad a row; a tall tile's rows hold DMLS_TALL_TILE_ROWS values. */
enum {
    DMLS_STAGE_PITCH = 64 * 2 + 64,
    DMLS_WIDE_PITCH = 64 * 4 + 64,
    DMLS_TALL_PITCH = DMLS_TALL_TILE_ROWS * 2 + 64,
    DMLS_TALL_K_BYTES = 128    /* bytes of k a tall tile reads from each source row */
};
typedef char dmls_wide_stage_fits[8 * DMLS_WIDE_PITCH <= 16 * DMLS_STAGE_PITCH ? 1 : -1];
/* A tall tile's stage (16 rows of DMLS_TALL_PITCH) and its staged source
   rows (DMLS_TALL_K_BYTES and 16 of pad each) within the kernels' region of
   the scratch arena. */
typedef char dmls_tall_tile_fits[16 * DMLS_TALL_PITCH + DMLS_TALL_TILE_ROWS * (DMLS_TALL_K_BYTES + 16) <=
                                 DMLS_SCRATCH_REGION ? 1 : -1];

/* Transpose a kn x jn block: source k contiguous (stride W), rows j at
   stride sj; destination j contiguous (stride W), rows k at stride dk.
   Returns the number of k rows and j columns covered by micro-blocks
   (all of them when both are at least 16 / W); the caller copies the
   remainder. */
static void dmls_simd_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                int64_t kn, int64_t jn, int flags, int64_t *kdone, int64_t *jdone,
                                char *scratch) {
    const int64_t N = 16 / W;
    /* A tile is TJ source rows by TK values of k.  When all the columns fit
       in one tile (jn <= TJ, a segment of a transpose with long rows of k),
       each destination row gets its whole jn * W bytes per tile anyway:
       tiles four source lines deep then read each source row in bursts of
       four lines (a 3001 x 5003 float32 transpose ran 1.2-1.5x faster than
       with one line).  Wider blocks keep one line of k per tile: the tile
       row writes TK destination rows side by side, and more of them at once
       measured slower (a 24-channel NHWC to NCHW gather, 0.8x).  But from
       memory (not cached), one- and two-byte values take one line and wider
       ones two: the tile then writes 64 / W or 128 / W destination rows
       rather than 256 / W, and its lines stay in L1 beside the next tile's.
       Timed in one process with the depth switched between samples, 2-D
       uint8, int16 and uint16 transposes of 10-29 MB ran 1.03-1.25x faster,
       all 16 of them (0.39 -> 0.43 of the memcpy limit; two lines: 0.41);
       float32 and float64 ones of 12-24 MB 1.01-1.20x, all 10 (one line:
       0.96-1.28x).  In cache, 6 MB and smaller, one line was 0.88-1.03x. */
    const int cached = flags & DMLS_TRANSPOSE_CACHED;
    /* Past the L2 caches (DMLS_TRANSPOSE_TALL), 1- and 2-byte values into
       destination rows a multiple of 2 KiB apart (a 2048 x 2048 float16
       transpose) take tiles of DMLS_TALL_TILE_ROWS source rows by 128
       bytes of k: each staged destination row then goes out as 256 or 512
       bytes rather than 64 or 128, and each source row is read 128 bytes
       at a time.  With the planner's segments of as many values (2
       threads, in one process, the plans and kernels alternating): 2-D
       transposes of 8 MiB (float16 2048 x 2048, 4096 x 1024 and 1024 x
       4096, uint8 4096 x 2048) 1.39-2.43x faster, 8 gathers and scatters;
       of 8-12 MiB 1.25-2.11x (7); of 4-6 MiB 1.22x by geometric mean (13,
       one 0.83x), where copies that do not take the tall tile measured
       0.89-1.20x, the run's noise.  Source rows a multiple of 1 KiB apart
       into other destination rows (a 1536 x 2048 float16 scatter) ran
       0.68-0.96x, and keep 64 rows.
       Source rows of DMLS_UNSTAGED_ROW_BYTES or fewer (pixels of up to 128
       one-byte or 64 two-byte channels, read in place: a tile's 256 rows
       are one run of memory) take the tall tile from cache too, whatever
       the size: in one process on the same buffers, alternating (2
       threads), NHWC to NCHW gathers of 8-64 uint8, int8, int16 or float16
       channels into planes of 32 x 32 to 128 x 128 (0.5-8 MiB) ran 1.12-2.02x
       faster, all 17 (64 float16 channels of 64 x 64, 8 MiB: 1.86x).
       Staged source rows off line boundaries give a tall tile 64 bytes of
       k rather than 128: each row's copy then reads two lines, not three,
       and the tile's staged rows (256 x 80 bytes) stay in a 32 KiB L1
       beside its destination stage, where 256 x 144 did not.  In one
       process on the same buffers, alternating (2 threads), 2-D uint8,
       int16 and float16 transposes of 8-15 MB with such rows ran 1.03-1.45x
       faster (3001 x 4096 uint8 1.43-1.45x both ways, 1.13-1.22x on one
       thread), NHWC to NCHW gathers of 300 one- or two-byte channels
       1.03x; source rows a multiple of 1 KiB apart (2048 x 4096 uint8,
       2048 x 2048 float16) ran 0.87-1.07x, and keep 128 bytes. */
    const int tall = W <= 2 && dk % 2048 == 0 &&
                     ((flags & DMLS_TRANSPOSE_TALL) || (sj <= DMLS_UNSTAGED_ROW_BYTES && cached));
    /* From memory, 1- and 2-byte values into destination rows written in
       place (not a multiple of 2 KiB apart) take tiles of 256 / W source
       rows when the columns reach that far: each tile row then writes 256
       bytes of each destination row (wider values already write 256 or
       more, two lines of k), so that its partly written lines at either
       end are two in five or six rather than two in one or two.  In one
       process on the same buffers, alternating (2 threads), 2-D uint8,
       int8, int16, uint16 and float16 transposes and NHWC to NCHW
       conversions of 8-24 MB with rows off line boundaries ran 1.09x
       faster (geometric mean of 24 one-byte gathers and scatters, 16
       faster, none below 0.91x) and 1.22x (12 two-byte ones, 0.92-1.55x);
       on one thread 1.15x (10, one 0.94x).  256 source rows for two-byte
       values too (512 bytes of each destination row) gained 1.10x only, and
       lost 0.77-0.84x on a 3100 x 4100 int16 gather. */
    const int wide_rows = !tall && !cached && W <= 2 && dk % 2048 != 0 && jn >= 256 / W;
    /* From cache, in copies of 8 MiB or more (two-byte values, up to the
       planner's narrow_cached_bytes) and in the chunks of the L2 buffers
       (DMLS_TRANSPOSE_LONG_TILES), 1- and 2-byte values take tiles of 128
       source rows where a task has 256 or more: each destination row then
       gets 128 values a tile rather than 64.  Two builds side by side in
       one process (benchmarks/compare_builds.py: two passes, 2 threads, 7
       repeats), with 128 rows for all cached tiles first: 28 2-D one- and
       two-byte transposes of 4-16 MB ran 1.04x faster by geometric mean
       (a control of the build against itself 0.98x), those of 10-15 MB
       1.11x (11, 0.96-1.27x), of 8.7-10 MB 1.01x and under 7 MB 0.99x;
       two earlier sets of 6-16 MB 1.05x and 1.09x (14) and 0.99x (16, the
       control 0.99x, single cases 0.87-1.16x); 2-D ones of 35-62 MB
       through the L2 buffers 1.00-1.11x (7, uint8 1.04-1.11x).  From 8
       MiB only, as here, the 28 ran 1.055x (22 faster).  Tiles of 256
       rows ran 0.99x of 128; 128 rows of 4-byte values 1.03x from cache
       (1.02x on 16 float32 and uint32 ones of 8.7-12.3 MB, 0.93-1.21x)
       but 0.94-0.97x on float32 gathers through the L2 buffers.
       Tiles written through the padded destination buffers (staged: see
       below), whose rows hold 64 values, keep 64 rows. */
    const int staged = W <= 2 && (dk % 2048 == 0 || (W == 1 && cached && dk % 1024 == 0 && sj % 1024 == 0));
    const int64_t TJ = tall ? DMLS_TALL_TILE_ROWS : wide_rows ? 256 / W
                       : (flags & DMLS_TRANSPOSE_LONG_TILES) && W <= 2 && jn >= 256 && !staged ? 128 : 64;
    /* From memory, 1- and 2-byte values from source rows a multiple of 1
       KiB apart into destination rows of at most 1 KiB (planes of 64 x 64
       or 128 x 128 into pixels) keep the cached depth of four lines a
       source row, however many columns: in one process on the same
       buffers, alternating (2 threads), NCHW to NHWC scatters of 8-10 MiB
       ran 1.36-1.58x faster with 32-64 uint8 or float16 channels (pixels
       back to back), 1.13-1.48x with 72-160 (6 of 6); with source rows off
       1 KiB multiples 0.92-1.26x, and 2-D transposes, whose destination
       rows are longer, 0.83-1.14x, so not those.
       Source rows off those multiples take the depth too where the
       destination rows lie back to back and one tile's 64 rows hold all
       of j (pixels of up to 64 channels: one contiguous run a tile): in
       one process on the same buffers, alternating in an order shuffled
       every round (2 threads, 5 rounds, the old kernel against itself as
       a control: 0.99x), 14 unnamed NCHW to NHWC scatters of 9-12.5 MB with
       18-46 uint8, int16 or float16 channels ran 1.08x faster by geometric
       mean (0.98-1.15x, 13 faster; two-byte values 1.10x), 11 more of two
       byte channels 1.15x (0.92-1.39x).  Across 57 unnamed 5-D and 6-D
       permutations of 8-12.5 MB that take the tile, all rows so deep
       measured 1.01x (0.83-1.17x), and so are not. */
    const int deep = !cached && W <= 2 && ((dk <= 1024 && sj % 1024 == 0) || (dk == jn * W && jn <= 64)) &&
                     TJ * (256 + 16) <= DMLS_SCRATCH_REGION - 16 * DMLS_STAGE_PITCH;
    const int64_t tall_k = sj % 64 != 0 && sj > DMLS_UNSTAGED_ROW_BYTES ? DMLS_TALL_K_BYTES / 2 : DMLS_TALL_K_BYTES;
    const int64_t TK = (tall ? tall_k : deep ? 256 : jn > TJ ? 64 : cached ? 256
                        : W <= 2 ? 64 : 128) / W;
    /* With 8 or 16 destination rows per micro-block (W <= 2), rows that
       lie a multiple of 4 KiB apart compete for one L1 set: stage the
       micro-blocks in a padded buffer and write each row in one burst.
       Rows closer together (dk not a multiple of 2 KiB) spread over
       enough sets to be written in place; but one-byte values from cache
       into rows an odd multiple of 1 KiB apart (a 1024 x 1024 uint8
       transpose), whose source rows are a multiple of 1 KiB apart as well
       and so go through the padded source buffer anyway, take the padded
       destination buffer too: a cached tile writes 256 rows of k, four to
       every 4 KiB, and their lines crowd a quarter of L1's sets.  In one
       process on the same buffers, alternating (2 threads), 2-D uint8 and
       int8 transposes and NHWC to NCHW scatters of 1-7 MiB with such rows
       ran 1.13-1.37x faster (10 of 12, the others even), 1.08-1.21x on one
       thread; two-byte values ran 0.85-1.03x and source rows off 1 KiB
       multiples (1000 x 3072, 2222 x 3072) 0.91-0.99x, so not those. */
    enum { WPITCH = DMLS_WIDE_PITCH };
    const int64_t PITCH = tall ? DMLS_TALL_PITCH : DMLS_STAGE_PITCH;
    const int64_t SPITCH = TK * W + 16;
    char *stage = scratch;                  /* 16 * PITCH bytes */
    /* Likewise, source rows a multiple of 1 KiB apart conflict in L1
       while the tile revisits them, and rows off a line boundary make a
       quarter of the micro-kernels' loads straddle two lines: copy the
       tile's source lines to a padded buffer first (each source line is
       then read once, in order).  Measured 1.5-1.7x faster for rows off a
       line boundary.  Rows a multiple of 1 KiB apart put 16 or more of the
       tile's 64 rows in each set, past its 8 ways: staged, a 1536 x 1024
       int16 transpose ran 1.8x faster and a 512 x 512 float32 one 1.5x.
       Rows 512 bytes apart (8 to a set) fit, and ran 0.85-0.9x staged.
       Short rows (DMLS_UNSTAGED_ROW_BYTES) never are.  With AVX2's 32-byte
       blocks (dmls_isa.tile_wide) of 4- and 8-byte values, rows off a line
       boundary are read in place: each load takes 16 bytes, a tile row
       reads its source lines twice over at most, and the staging copy cost
       more than the straddling loads (on one thread, a 371 x 371 float64
       transpose 1.3x faster than staged, a 1001 x 999 float32 one 1.3x).
       So are 1- and 2-byte values in those blocks when the source is in
       cache (a copy of under 8 MiB, see tile.c) and its rows do not crowd
       L1's sets: a 1001 x 777 int16 transpose ran 1.25x faster in place, a
       777 x 1333 uint16 one 1.35x, a 1999 x 3001 uint8 one 1.15x (2
       threads).
       From memory the staging copy's in-order reads win (a 3333 x 2222
       uint16 one ran 0.7x in place, 3550 x 3542 and 3001 x 4999 uint8 ones
       of 12-14 MB that do not stream 0.75-0.98x), and so they do for rows
       4097 bytes apart (0.68x in place).
       4- and 8-byte values from source rows an odd multiple of 1 KiB apart
       (3 KiB, 5 KiB: four rows to every 4 KiB, 16 of a tile's 64 in a set)
       are read in place as well: in one process on the same buffers,
       alternating (2 threads), 2-D float32 and float64 transposes of 5-10 MB
       with such rows (768 x 3072, 1280 x 2048, 640 x 1024, ...) ran
       1.09-1.33x faster, all 8; rows an even multiple apart (2 KiB, 4 KiB,
       8 KiB: 32 or 64 to a set) ran 0.45-0.92x in place in 9 cases of 14,
       and keep the copy. */
    char *sstage = scratch + 16 * PITCH;   /* TJ * SPITCH <= 256 * 144 bytes */
    const int avx2 = dmls_isa.level >= DMLS_ISA_AVX2;
    const int wstaged = avx2 && W == 4 && cached && dk % 4096 == 0;
    const int in_place = avx2 && (W >= 4 || (cached && !staged && !rows_crowd_sets(sj)));
    const int sstaged = (sj % (avx2 && W >= 4 ? 2048 : 1024) == 0 || (sj % 64 != 0 && !in_place)) &&
                        sj > DMLS_UNSTAGED_ROW_BYTES;
    const int pfd = kn * dk > ((int64_t)1 << 20);
    const char *sbase;
    int64_t sstep;
    int64_t kf = kn - kn % N, jf = jn - jn % N, kb, jb, k, j, ke, je, i;
    for (kb = 0; kb < kf; kb += TK) {
        ke = kb + TK < kf ? kb + TK : kf;
        for (jb = 0; jb < jf; jb += TJ) {
            je = jb + TJ < jf ? jb + TJ : jf;
            if (pfd) {
                /* Ask for the destination lines of the next tile: its TK
                   rows are as many write streams, more than the hardware
                   prefetcher follows, and each line's read for ownership
                   then overlaps this tile's work (a 2400 x 2400 float32
                   transpose, 0.53 -> 0.64 of a copy of the same bytes; a
                   1800 x 2900 uint16 one, 0.35 -> 0.44).  The lines are
                   ones the next tile writes.  Not for a destination span
                   of 1 MiB or less: the L2 buffers of the chunked copies,
                   and small copies, are in cache already. */
                int64_t nk = jb + TJ < jf ? kb : ke, nj = jb + TJ < jf ? jb + TJ : 0;
                int64_t nke = nk + TK < kf ? nk + TK : kf, nje = nj + TJ < jf ? nj + TJ : jf;
                int64_t e = (nje - nj) * W - 1;
                for (k = nk; k < nke; k++) prefetch_row(d + k * dk + nj * W, e, cached);
            }
            if ((flags & DMLS_TRANSPOSE_SOURCE_AHEAD) && kb + TK < kf) {
                /* Ask for the source lines of the tile TK values on in k
                   (the next one when the columns fit one tile) into L2:
                   its TJ rows are as many read streams, more than the
                   hardware prefetcher follows (see tile.c for the gain; a
                   3100 x 1650 int16 transpose on one thread 6.3 -> 10.8
                   GB/s; into L1 it gained nothing). */
                int64_t nke = kb + 2 * TK < kf ? kb + 2 * TK : kf, e = (nke - kb - TK) * W - 1;
                for (j = jb; j < je; j++) prefetch_row(s + j * sj + (kb + TK) * W, e, 0);
            }
            if (sstaged) {
                if ((ke - kb) * W == 64)
                    for (j = jb; j < je; j++)
                        memcpy(sstage + (j - jb) * SPITCH, s + j * sj + kb * W, 64);
                else
                    for (j = jb; j < je; j++)
                        memcpy(sstage + (j - jb) * SPITCH, s + j * sj + kb * W, (size_t)((ke - kb) * W));
                sbase = sstage - jb * SPITCH - kb * W;
                sstep = SPITCH;
            } else {
                sbase = s;
                sstep = sj;
            }
            k = kb;
            if (wstaged) {
                /* 4-byte values from cache into destination rows a multiple
                   of 4 KiB apart (a 1024 x 1024 float32 transpose), whose
                   lines all fall in a few L1 sets: the AVX2 blocks write
                   KB rows at a time into the padded buffer, each row then
                   copied out whole.  In one process, alternating (2
                   threads), 2-D float32 and uint32 transposes of 1-6 MB with
                   such rows ran 1.1-1.5x faster (1024 x 1024 1.14-1.45x),
                   two of 14 0.96-0.98x.  Written in place, 8-byte values
                   ran faster (a float64 1024 x 512 one 0.8x staged), and
                   from memory the buffer lost too (2048 x 1024 float32
                   0.8x). */
                const int64_t KB = 32 / W;
                for (; k + KB <= ke; k += KB) {
                    int64_t jw = 0;
                    dmls_isa.tile_wide(W, sbase + jb * sstep + k * W, sstep, stage, WPITCH, KB, je - jb, &jw);
                    for (i = 0; i < KB; i += N)
                        for (j = jb + jw; j < je; j += N)
                            simd_micro(W, sbase + j * sstep + (k + i) * W, sstep,
                                       stage + i * WPITCH + (j - jb) * W, WPITCH);
                    for (i = 0; i < KB; i++)
                        memcpy(d + (k + i) * dk + jb * W, stage + i * WPITCH, (size_t)((je - jb) * W));
                }
            }
            if (avx2 && !staged && !wstaged) {
                /* Blocks 32 bytes wide; the columns past the last whole
                   block in micro-blocks, then the rows past it below.  1-
                   and 2-byte values go as pairs side by side in j wherever
                   the tile has 2N columns, one above the other only where
                   it has fewer (and 2N rows): each destination row is then
                   one 32-byte store a pair rather than two 16-byte halves,
                   the high one extracted.  On one thread, the blocks alone
                   over tiles of 64 x 256 in L2 moved a 576 x 448 uint8
                   chunk at 32 GB/s rather than 25; two builds in one
                   process, alternating (2 threads, 8 rounds), 24 unnamed
                   one- and two-byte copies planned as tiles (2-58 MB) ran
                   1.08x faster by geometric mean (0.98-1.29x; 2-D uint8
                   transposes 1.22-1.29x). */
                int64_t jw;
                k += (W <= 2 && (ke - kb < 2 * N || je - jb >= 2 * N) ? dmls_isa.tile_jpairs : dmls_isa.tile_wide)(
                    W, sbase + jb * sstep + kb * W, sstep, d + kb * dk + jb * W, dk, ke - kb, je - jb, &jw);
                jw += jb;
                for (i = kb; i < k; i += N)
                    for (j = jw; j < je; j += N)
                        simd_micro(W, sbase + j * sstep + i * W, sstep, d + i * dk + j * W, dk);
            }
            for (; k < ke; k += N) {
                j = jb;
                if (staged && avx2) {
                    /* Into the padded buffer too, AVX2 pairs of
                       micro-blocks side by side in j first: in one
                       process, alternating (2 threads), 2-D uint8, int16
                       and float16 transposes of 3-8 MB with rows a
                       multiple of 2 KiB apart ran 1.06-1.24x faster. */
                    int64_t jw = 0;
                    dmls_isa.tile_jpairs(W, sbase + jb * sstep + k * W, sstep, stage, PITCH, N, je - jb, &jw);
                    j += jw;
                }
                for (; j < je; j += N) {
                    const char *sp = sbase + j * sstep + k * W;
                    char *dp = staged ? stage + (j - jb) * W : d + k * dk + j * W;
                    simd_micro(W, sp, sstep, dp, staged ? PITCH : dk);
                }
                if (staged)
                    for (i = 0; i < N; i++)
                        memcpy(d + (k + i) * dk + jb * W, stage + i * PITCH, (size_t)((je - jb) * W));
            }
        }
        /* Ragged columns (24 one-byte channels leave 8 after one
           micro-block): one more micro-block column per band, moved back
           to end at jn.  It overlaps the last whole one, whose elements are
           written twice with the same values (source and destination never
           overlap).  Element by element they took a third of a 24-channel
           uint8 NCHW to NHWC conversion's work and most of its time. */
        if (jf < jn && jf > 0)
            for (k = kb; k < ke; k += N)
                simd_micro(W, s + (jn - N) * sj + k * W, sj, d + k * dk + (jn - N) * W, dk);
    }
    /* Ragged rows likewise, as one more micro-block row ending at kn: with
       AVX2, 1- and 2-byte values first in pairs side by side in j (j is
       then the columns they cover, else 0). */
    if (kf < kn && kf > 0 && jf > 0) {
        j = 0;
        if (avx2) dmls_isa.tile_jpairs(W, s + (kn - N) * W, sj, d + (kn - N) * dk, dk, N, jn, &j);
        for (; j + N <= jn; j += N)
            simd_micro(W, s + j * sj + (kn - N) * W, sj, d + (kn - N) * dk + j * W, dk);
        if (jn % N != 0)
            simd_micro(W, s + (jn - N) * sj + (kn - N) * W, sj, d + (kn - N) * dk + (jn - N) * W, dk);
        kf = kn;
    }
    if (jf > 0) jf = jn;
    *kdone = kf;
    *jdone = jf;
}

/* Copy with non-temporal stores (no read-for-ownership of the
   destination): for long runs in copies much larger than the caches.  Only
   whole 64-byte lines are streamed; the bytes before the first line
   boundary and after the last one take ordinary stores (a line streamed in
   part is merged in memory, and a neighbouring run may write the rest of
   it). */
static void dmls_stream_copy(char *d, const char *s, int64_t n) {
    int64_t head = dmls_line_gap(d);
    if (head > n) head = n;
    memcpy(d, s, (size_t)head);
    d += head; s += head; n -= head;
    dmls_copy_body(d, s, n, 1);
}

/* Runs of at least this many bytes take dmls_copy's own loop. */
#define DMLS_OWN_COPY_MIN 640

/* Copy with ordinary stores: runs of DMLS_OWN_COPY_MIN bytes or more with
   a plain SSE2 loop whose stores are aligned to whole destination lines,
   shorter ones with memcpy.  glibc's memcpy (its AVX-512 variant here)
   wrote rows of 640 bytes to a few KiB that are not in cache at 0.6-0.9x
   the speed of this loop: in one process on the same buffers, alternating
   (2 threads), copies of 11-31 MB through padded rows (640-6000 bytes of
   float16, float32, float64 or uint8 values, pitches a few bytes longer),
   rows broadcast along H (1200 bytes) and planes broadcast along N ran
   1.13-1.65x faster in 23 cases of 29, 0.96-1.00x in the others; rows of
   300-512 bytes 0.85-1.02x (memcpy kept); rows of 8 KiB, planes of 60 KB,
   slices of 32 KB planes and packed copies of 4-24 MB 0.97-1.25x; copies of
   1-4 MB in cache 0.98-1.08x.  glibc also
   copies runs of a few KiB to a few hundred KiB with "rep movsb", which on
   some CPUs runs ten to twenty times slower when the destination is 1 to 63
   bytes past the source modulo 4 KiB (each store aliases a load just ahead
   of it); this loop does not. */
static void dmls_copy(char *d, const char *s, int64_t n) {
    int64_t head;
    if (n < DMLS_OWN_COPY_MIN || d == s) {
        memcpy(d, s, (size_t)n);
        return;
    }
    head = dmls_line_gap(d);
    memcpy(d, s, (size_t)head);
    d += head; s += head; n -= head;
    dmls_copy_body(d, s, n, 0);
}

/* Non-temporal transposes, for copies far larger than the caches: the
   destination is written with streaming stores that skip the read for
   ownership (a third of the memory traffic of an ordinary store), each
   64-byte line in one burst so that it leaves the write-combining buffer
   whole.  Same element mapping as dmls_simd_transpose. */

/* Copy rows of nbytes, sj apart, to a buffer of rows sp apart; returns it. */
static inline const char *dmls_stage_rows(char *buf, int64_t sp, const char *s, int64_t sj,
                                          int64_t rows, int64_t nbytes) {
    int64_t j;
    for (j = 0; j < rows; j++)
        memcpy(buf + j * sp, s + j * sj, (size_t)nbytes);
    return buf;
}

/* Transpose rows k0..k1 (k1 - k0 a multiple of 16 / W) by columns j < nj
   (a multiple of 16 / W) of a source (row j of k at sb + j * ss + k * W)
   into buf, destination row k at (k - k0) * pitch: a group of 16 / W
   source rows at a time, each group read along the whole band before the
   next, so a few rows are read as runs of lines at a time instead of every
   row of the band a micro-block at a time.  That order is for bands of
   many rows read straight from memory: with 40 or 48 float32 channels (an
   NCHW to NHWC gather of 64 MB), the k-major order read 40-48 rows side by
   side, more streams than the hardware prefetcher follows, and ran at
   0.65-0.7x of it.  ahead: bytes of each group's rows past k1 (the next
   band, within the rows of s, sj apart) asked for into L2 before the group
   is read, 0 for none. */
static inline void dmls_band_to_buffer(int W, const char *sb, int64_t ss, int64_t k0, int64_t k1,
                                       int64_t nj, char *buf, int64_t pitch,
                                       const char *s, int64_t sj, int64_t ahead) {
    const int64_t N = 16 / W;
    int64_t k, j, i, q;
    for (j = 0; j < nj; j += N) {
        if (ahead > 0)
            for (i = j; i < j + N; i++)
                for (q = 0; q < ahead; q += 64) _mm_prefetch(s + i * sj + k1 * W + q, _MM_HINT_T1);
        for (k = k0; k < k1; k += N)
            simd_micro(W, sb + j * ss + k * W, ss, buf + (k - k0) * pitch + j * W, pitch);
    }
}

/* Source rows on the same line offset but off a line boundary (the
   source 16 bytes past one, say): how many k (a multiple of 16 / W) come
   before the first boundary, for a first band that ends there, so that
   every other band reads whole lines (a 4096 x 4096 float32 transpose
   took 1.11x the aligned time with bands from k = 0); else 0. */
static inline int64_t dmls_line_head(int W, const char *s, int64_t sj) {
    const int64_t skew = (int64_t)((uintptr_t)s % 64);
    return sj % 64 == 0 && skew % 16 == 0 ? (64 - skew) % 64 / W : 0;
}

/* One line strip (N = 16 / W rows of k by E = 64 / W source rows, each
   destination row's line streamed), its rows before first left alone. */
static inline void line_strip(int W, const char *s, int64_t sj, char *d, int64_t dk, int first) {
    switch (W) {
    case 1: dmls_line1(s, sj, d, dk, first); break;
    case 2: dmls_line2(s, sj, d, dk, first); break;
    case 4: dmls_line4(s, sj, d, dk, first); break;
    default: dmls_line8(s, sj, d, dk, first); break;
    }
}

/* Destination rows a multiple of 512 bytes apart (a transpose whose rows
   are a power of two long: 4096 x 4096 float32, 2048 x 2048 float64),
   written one line a row by dmls_nt_transpose's bands below, put every
   line at the same place of 512 bytes, and memory took them at a quarter
   of its speed: one thread streaming a line to each of many rows 16 KiB
   apart ran at 6.6 GB/s, two lines side by side at 13, four at 22, one line
   to rows 576 or 640 bytes apart at 22.  Here up to DMLS_WIDE_LINES bands
   of E = 64 / W source rows go through a buffer, DMLS_WIDE_CHUNK_BYTES of
   each source row at a time, and each destination row gets its lines of
   them together.  The source rows are read DMLS_WIDE_ROWS at a time along
   the chunk (eight rows a multiple of 4 KiB apart fill one of L1's sets,
   which has eight ways: four float32 rows at a time ran 0.90x, a band of
   16 rows side by side as fast as eight where the rows spread over the
   sets, the chunk's rows copied to a buffer first 0.86x), the next eight's
   lines asked for into L2 over them.  Two builds in alternating processes
   (2 threads, 5 rounds): float32 and float64 transposes of 33-67 MB with
   destination rows 8-16 KiB apart ran 1.32-1.77x faster (float32 4096 x
   4000 8.3 -> 12.3 GB/s, float64 1000 x 4096 9.2 -> 16.4), with source
   rows a multiple of 4 KiB apart too (4096 x 4096 float32) 1.07-1.20x;
   int16 and uint16 ones 1.53-1.67x, and 1.23x with such source rows (each
   task two or four bands wide: the planner's WIDE_BAND_BYTES); a fresh 13
   of two- to eight-byte values, 25-67 MB, many of their dimensions odd,
   1.02-1.87x (controls that do not take them 0.98-1.04x).  One-byte
   values, whose micro-blocks read 16 rows at a time, measured 0.71-1.10x
   and keep the bands.  Returns the columns done, a multiple of E (0 when
   the buffer is not to be had). */
#define DMLS_WIDE_LINES 4
#define DMLS_WIDE_CHUNK_BYTES 2048
#define DMLS_WIDE_ROWS 8
typedef char dmls_wide_buffer_fits[DMLS_WIDE_CHUNK_BYTES / 2 * DMLS_WIDE_LINES * 64 <= DMLS_SCRATCH_BLOCK_BYTES ? 1 : -1];
static int64_t dmls_nt_wide(int W, const char *s, int64_t sj, char *d, int64_t dk, int64_t kn, int64_t jn) {
    const int64_t N = 16 / W, E = 64 / W, U = DMLS_WIDE_ROWS;   /* W >= 2: N <= U */
    const int64_t L = jn / E < DMLS_WIDE_LINES ? jn / E : DMLS_WIDE_LINES, J = L * E, P = L * 64;
    const int64_t KC = DMLS_WIDE_CHUNK_BYTES / W;
    char *buf = dmls_scratch();
    int64_t j0, k0, n, u, k, q, r;
    if (buf == NULL) return 0;
    buf += DMLS_SCRATCH_BLOCK_DST;
    for (j0 = 0; j0 + J <= jn; j0 += J) {
        for (k0 = 0; k0 < kn; k0 += KC) {
            n = kn - k0 < KC ? kn - k0 : KC;
            for (u = 0; u < J; u += U) {
                const char *sb = s + (j0 + u) * sj + k0 * W;
                /* the next unit's rows: the next U of this chunk, or the first of the next */
                const char *nx = u + U < J ? sb + U * sj : k0 + KC < kn ? s + j0 * sj + (k0 + KC) * W : NULL;
                const int64_t nn = u + U < J ? n : kn - k0 - KC < KC ? kn - k0 - KC : KC;
                const int64_t lines = nx == NULL ? 0 : U * ((nn * W + 63) / 64), steps = n / N;
                int64_t asked = 0, upto;
                for (k = 0; k < n; k += N) {
                    for (upto = lines * (k / N + 1) / steps; asked < upto; asked++)
                        _mm_prefetch(nx + asked % U * sj + asked / U * 64, _MM_HINT_T1);
                    for (q = 0; q < U; q += N)
                        simd_micro(W, sb + q * sj + k * W, sj, buf + k * P + (u + q) * W, P);
                }
            }
            for (k = 0; k < n; k++) {
                char *dr = d + (k0 + k) * dk + j0 * W;
                const char *br = buf + k * P;
                for (r = 0; r < P; r += 64) dmls_copy_line(dr, br, r, 1);
            }
        }
    }
    return j0;
}

/* Destination rows line-aligned (d and dk multiples of 64) and jn a
   multiple of 64 / W: bands of E = 64 / W source rows (j), each read along
   all of k, N = 16 / W rows of k at a time, so that every destination row
   gets one whole line per band, written with streaming stores.  A band
   reads as few source rows side by side as whole lines allow (16 for
   float32), in place.  Passes of 64 source rows by 64 k instead (four
   lines per float32 destination row), with source rows 4 KiB apart or off
   line boundaries staged in an L1 buffer and destination rows a multiple
   of 4 KiB apart too, measured 0.69 of the memcpy limit against 0.98 on 9
   transposes of 32-64 MB with both sides line-aligned (geometric mean of
   their gathers and scatters; float32 4096 x 4096 1.46x, uint8 8192 x 8192
   1.31x) and 0.65 against 0.79 on 12 other 2-D, NHWC and NDHWC shapes of
   15-62 MB (the rows this path takes 1.08-2.2x, one 0.94x); 2 threads, the
   two in one process on the same buffers, alternating.  Covers rows
   k < *kdone (all of them when kn >= N) and all jn.

   One- and two-byte values from source rows a multiple of 1 KiB apart
   (a 4096 x 4096 uint8 transpose, 2048 x 4096 float16) put a band's 64
   or 32 rows in one to four of L1's sets, each row's line loaded again for
   every micro-block row that reads it: such a band is read a line of each
   row at a time into scratch (64 bytes a row, the next line asked for
   into L2), from the first line boundary on where the rows start 0, 16,
   32 or 48 bytes past one, and transposed from there.  In one process on
   the same buffers, alternating (2 threads), 2-D uint8, int8 and float16
   transposes of 12-32 MB with such source rows ran 1.23-1.53x faster (14
   gathers and scatters over two runs; rows 1 KiB apart 1.06-1.12x, one
   8 MiB one 0.97x), others even.  float32 (16 rows a band): 1.02-1.03x,
   and one 0.88x; it reads in place.  Reads stay within
   s + j * sj + [0, kn * W) for j < jn. */
#define DMLS_BAND_AHEAD_BYTES 256
static void dmls_nt_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                              int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
    const int64_t N = 16 / W, E = 64 / W;
    const int64_t kf = kn - kn % N;
    const int by_lines = W <= 2 && sj % 1024 == 0 && scratch != NULL;   /* E rows of 64 bytes */
    int64_t j0, k, kk, r;
    int first;
    *kdone = kf == 0 ? 0 : kn;
    if (kf == 0)
        return;
    /* Destination rows a multiple of 512 bytes apart: wide bands first, of
       rows k < kf, and their rows from kf on as one more strip ending at kn
       (see below). */
    j0 = W >= 2 && jn >= 2 * E && dk % 512 == 0 && sj > DMLS_CLOSE_ROW_BYTES
         ? dmls_nt_wide(W, s, sj, d, dk, kf, jn) : 0;
    if (kf < kn)
        for (k = 0; k < j0; k += E)
            line_strip(W, s + k * sj + (kn - N) * W, sj, d + k * W + (kn - N) * dk, dk, (int)(kf - (kn - N)));
    for (; j0 < jn; j0 += E) {   /* jn is a multiple of E */
        const char *sb = s + j0 * sj;
        char *db = d + j0 * W;
        /* Source rows close together (pixels of an NHWC to NCHW gather, at
           most 1 KiB) make a band one run of 2-16 KiB: its E rows are read
           side by side, N values at a time, and the hardware prefetcher
           fell behind.  The next band's lines are asked for into L1 a few
           at a time over this band's micro-blocks.  In one process on the
           same buffers, alternating (2 threads), gathers of 48-256 float32
           channels, 64 float64 or int16 ones (4-8 planes of 256 x 256 or
           256 x 128) ran 1.06-2.05x faster (128 float32 channels 2.05x, 64
           float64 1.58x), and with the source 16 bytes past a line, which
           cost 1.28-1.5x the aligned time on one thread, as fast as
           aligned; 24-32 float64, 32-40 float32 and 32 int16 channels
           0.96-1.07x, even.  Bands of under 2 KiB (16 float32 channels,
           0.92x with requests) and rows further apart (each its own
           stream: a 4096 x 4096 float32 transpose 0.94x) go without.
           That was on an AMD EPYC (32 KiB of L1, 512 KiB of L2 a core).
           On an Intel Xeon (48 KiB, 2 MiB), timed as the harness times
           them (each copy among the others, 7-9 repeats), the asks into L1
           made a band starting 2 or 3 KiB past a page boundary (a
           destination 16 bytes past a line: the bands follow its lines)
           1.3-1.4x slower than an aligned one, which the harness's bound
           of 1.2x missed; asked into L2 instead (dmls_band_asks_l2, the
           planner's BAND_ASKS_L2 with a large L3), 9 NHWC to NCHW gathers
           of 24-256 float32 channels, 64 float64 or int16 ones and 128
           float16 ones, 20-67 MB, aligned and 16 bytes past, ran 1.07x
           faster by geometric mean (two runs each; aligned 1.05x, past
           1.09x, one at 0.93x), 64 float32 channels 16 bytes past
           1.19-1.23x: 1.06-1.17x its aligned time over two harness runs,
           against 1.26-1.36x. */
        const int64_t ask = E * sj >= 2048 && sj <= DMLS_CLOSE_ROW_BYTES && j0 + E < jn ? E * sj / 64 + 1 : 0;
        const int ask_l2 = dmls_band_asks_l2;
        /* Rows further apart than that: as each micro-block row reaches a
           line of k, the line DMLS_BAND_AHEAD_BYTES on in each of the
           band's E rows is asked for into L2 (the band is E read streams,
           more than the hardware prefetcher follows).  In one process on
           the same buffers, alternating in an order shuffled every round
           (2 threads, 9 rounds, the old kernel against itself as a control:
           0.94-1.06x), 28 unnamed 2-D transposes and NCHW-like gathers and
           scatters of 12-60 MB with line-aligned destination rows ran 1.20x
           faster by geometric mean: one- and two-byte values 1.19-1.66x in
           15 of 18 (uint8 4032 x 5440 1.19x and 1.23x, int16 4 x 3392 x
           2144 1.66x and 1.50x), the other three 0.96-1.03x; 4- and 8-byte
           ones 0.96-1.06x, even.  128 or 384 bytes ahead measured the
           same. */
        const int ahead = sj > DMLS_CLOSE_ROW_BYTES;
        const int64_t steps = (kn + N - 1) / N;
        /* By lines (see above): k0..k1, whole lines of each row when the
           rows start 16-byte steps past a line boundary (k0 the values
           before the first one), E values of k at a time. */
        const int64_t skew = (int64_t)((uintptr_t)sb % 64);
        const int64_t k0 = by_lines && skew % 16 == 0 ? (64 - skew) % 64 / W : 0;
        const int64_t k1 = by_lines && kf > k0 ? k0 + (kf - k0) / E * E : k0;
        int64_t asked = 0, upto;
        for (k = 0; k < kn; k += N) {
            if (k >= k0 && k < k1) {
                for (r = 0; r < E; r++) {
                    if (k + 2 * E <= kn) _mm_prefetch(sb + r * sj + (k + E) * W, _MM_HINT_T1);
                    memcpy(scratch + r * 64, sb + r * sj + k * W, 64);
                }
                for (kk = 0; kk < E; kk += N) {
                    if (W == 1)
                        dmls_line1(scratch + kk, 64, db + (k + kk) * dk, dk, 0);
                    else
                        dmls_line2(scratch + kk * 2, 64, db + (k + kk) * dk, dk, 0);
                }
                k += E - N;
                continue;
            }
            for (upto = ask * (k / N + 1) / steps; asked < upto; asked++) {
                if (ask_l2)
                    _mm_prefetch(sb + E * sj + asked * 64, _MM_HINT_T1);
                else
                    _mm_prefetch(sb + E * sj + asked * 64, _MM_HINT_T0);
            }
            if (ahead && k * W % 64 == 0 && k * W + DMLS_BAND_AHEAD_BYTES < kn * W)
                for (r = 0; r < E; r++) _mm_prefetch(sb + r * sj + k * W + DMLS_BAND_AHEAD_BYTES, _MM_HINT_T1);
            /* Rows past the last whole micro-block row (7 channels leave 3 of 4)
               as one more strip of N rows ending at kn, of which only the rows
               from kf on are stored: the others are the strip before's.
               Element by element they took 3/7 of a 7-channel float32 NHWC to
               NCHW conversion's work.  Storing the strip's rows before kf as
               well (again, with the same values) cost its planes a line more
               per band for each: in one process on the same buffers,
               alternating (2 threads), gathers of 7 and 10 float32 channels
               and 9 float64 ones (45-53 MB) ran 1.11-1.21x faster without. */
            kk = k < kf ? k : kn - N;
            first = k < kf ? 0 : (int)(kf - kk);
            line_strip(W, sb + kk * W, sj, db + kk * dk, dk, first);
        }
    }
}

/* Destination rows off line boundaries, each at its own offset: bands of
   E = 64 / W source rows as in dmls_nt_transpose, each transposed into a
   slot of 128 bytes per destination row k (the band before in its first
   half, this one in its second), from which the row's line that this band
   completes, h_k + (b - 1) E .. h_k + b E for the h_k values before the
   row's first line boundary, goes out whole with streaming stores.  The
   first band writes the h_k values before that boundary, and after the
   last whole band the values of its line that are there go out, with
   ordinary stores; the columns from the last whole band on are the
   caller's.  Rows in chunks of KC (KC * 128 bytes of scratch).  Rows
   past the last whole micro-block (kn not a multiple of N) are one more
   strip of N rows ending at kn, moved back by back = kf + N - kn rows,
   with slots of its own (the N slots after the last chunk's); only its
   rows from kf on go out, the first back being the strip before's (8-byte
   values gather their one such row instead).  The offsets h_k are bytes:
   a destination off its values' alignment (W bytes of merged values,
   pairs of float32 four bytes past a line) goes out the same way, rows of
   whole lines back to back excepted (dmls_nt_joined goes by values); rows
   off line boundaries so placed, which had gone through L2 or the plain
   transpose, ran 1.03x faster by geometric mean so (12 2-D to 4-D
   transposes of 21-60 MB, 0.96-1.26x, two builds side by side).
   Reads stay within s + j * sj + [0, kn * W)
   for j < nb * E, writes within d + k * dk + [0, nb * E * W) for k < kn.
   See tile.c (DMLS_SHIFTED_MIN_RUN) for where it is used and what it
   measured. */
static int dmls_nt_joined(int W, const char *s, int64_t sj, char *d, int64_t kn, int64_t jn, char *scratch);
enum { DMLS_SHIFTED_KC = 256, DMLS_SHIFTED_SLOT = 128 };
/* Bands of rows close together asked for ahead from this many bytes (see below). */
#define DMLS_SHIFTED_RUN_BYTES 1536
/* Band b's line of a destination row out of its slot (sl + 64, the band's
   64 bytes; sl, the last band's): the bytes before the row's first line
   boundary for the first band, else the line it completes, streamed; then
   the band's bytes kept for the next. */
static inline void dmls_slot_out(char *row, char *sl, int64_t b) {
    const int64_t h = dmls_line_gap(row);
    if (b == 0)
        memcpy(row, sl + 64, (size_t)h);
    else
        dmls_copy_body(row + h + (b - 1) * 64, sl + h, 64, 1);
    memcpy(sl, sl + 64, 64);
}
/* The chunk's slots and the extra strip's fit the kernel's scratch region. */
typedef char dmls_shifted_slots_fit[(DMLS_SHIFTED_KC + 16) * DMLS_SHIFTED_SLOT <= DMLS_SCRATCH_REGION ? 1 : -1];
static void dmls_nt_shifted(int W, const char *s, int64_t sj, char *d, int64_t dk,
                            int64_t kn, int64_t jn, int64_t *kdone, int64_t *jdone, char *scratch) {
    enum { KC = DMLS_SHIFTED_KC, SLOT = DMLS_SHIFTED_SLOT };
    const int64_t N = 16 / W, E = 64 / W;
    const int64_t kf = kn - kn % N, nb = jn / E;
    const int64_t back = kf + N - kn;   /* rows the extra strip moves back (row k >= kf is k - back) */
    /* Eight-byte values leave at most one row past the last whole strip:
       it is gathered value by value into its slot, rather than written by
       an extra strip moved back a row.  In one process on the same
       buffers, alternating (2 threads), NHWC to NCHW gathers of 5-11
       float64 channels (62-77 MB) ran 1.01-1.14x faster, 5 channels
       1.12-1.14x in two runs, when the strip stored its row before kf
       again; with that row left out, the strip still ran 0.83-0.95x of
       the gathered row (5 and 11 channels).  Narrower values leave up to
       N - 1 such rows, which cost more gathered (7 float32 channels
       0.83x): they keep the extra strip. */
    const int gather_rest = W == 8;
    int64_t k0, nk, b, k, i, h, q, ke, re;
    *kdone = *jdone = 0;
    if (dk % W != 0 || kf == 0 || nb < 2)
        return;
    if (dk == jn * W && dk % 64 == 0) {   /* rows of whole lines back to back */
        if ((uintptr_t)d % (uintptr_t)W == 0 && dmls_nt_joined(W, s, sj, d, kn, jn, scratch)) {
            *kdone = kn;
            *jdone = jn;
        }
        return;
    }
    for (k0 = 0; k0 < kf; k0 += nk) {
        nk = kf - k0 < KC ? kf - k0 : KC;
        /* the last chunk goes on with the extra strip (or the row left,
           re), in the slots after its own */
        ke = !gather_rest && k0 + nk == kf && kf < kn ? kf + N : k0 + nk;
        re = gather_rest && k0 + nk == kf ? kn : ke;
        /* The next band's source lines (its E rows, from k0 to the chunk's
           end), asked for into L2 a few at a time over this band's
           micro-blocks: the band reads E rows side by side, more streams
           than the hardware prefetcher follows.  In one process on the same
           buffers, the two alternating (2 threads), 2-D float32 and float64
           transposes of 46-57 MB (3001 x 5003, 3000 x 5000, 5001 x 2999,
           2000 x 3001, 1500 x 4001) ran 1.04-1.30x faster, gathers and
           scatters.  Where the rows lie close together (pixels of an NHWC
           to NCHW gather, at most 1 KiB apart, the chunk all of k), the
           band is one run of memory, and its lines are asked for as such
           into L1 (see dmls_nt_transpose): in one process on the same
           buffers, alternating (2 threads), gathers of 24-40 float32
           channels into planes of 171 x 173 and 301 x 301 values ran
           1.27-1.58x faster (the 40-channel one 1.57x).  Bands of such
           rows under DMLS_SHIFTED_RUN_BYTES go without: a few lines of one
           run, which the hardware prefetcher follows.  Asked for into L1
           as a run, then into L2 row by row (the chunk past kn with the
           extra strip, which missed the test for a run), they cost NHWC to
           NCHW gathers of 5-33 channels of 2-4 bytes (47-125 MB) half
           their speed: in one process on the same buffers, alternating (2
           threads), 5 float32 and uint32 channels ran 1.86-2.08x faster
           without, 6 float32 1.5x, 11 and 17 float64 1.07-1.11x, 13 and
           36 int16 1.84x and 1.98x (36 by way of tile.c's choice below),
           33 float32 1.34x; 24 and 28 float32 channels (bands of 1536 and
           1792 bytes) 0.94x, so they keep theirs. */
        const int64_t rb = ((re < kn ? re : kn) - k0) * W, lines = (rb + 63) / 64, steps = (ke - k0) / N;
        const int close = sj <= DMLS_CLOSE_ROW_BYTES && k0 == 0 && re >= kn;
        const int run = close && E * sj >= DMLS_SHIFTED_RUN_BYTES, quiet = close && !run;
        for (b = 0; b < nb; b++) {
            const char *sb = s + b * E * sj;
            const int64_t ask = b + 1 < nb && !quiet ? (run ? E * sj / 64 + 1 : E * lines) : 0;
            int64_t asked = 0, upto;
            for (k = k0; k < ke; k += N) {
                const int64_t kk = k < kf ? k : k - back;
                char *sl = scratch + (k - k0) * SLOT;
                if (run)
                    for (upto = ask * ((k - k0) / N + 1) / steps; asked < upto; asked++)
                        _mm_prefetch(sb + E * sj + asked * 64, _MM_HINT_T0);
                else
                    for (upto = ask * ((k - k0) / N + 1) / steps; asked < upto; asked++)
                        _mm_prefetch(sb + (E + asked / lines) * sj + k0 * W + asked % lines * 64, _MM_HINT_T1);
                for (q = 0; q < 4; q++)
                    simd_micro(W, sb + q * N * sj + kk * W, sj, sl + 64 + q * 16, SLOT);
                for (i = 0; i < N; i++, sl += SLOT)
                    if (!(k >= kf && kk + i < kf)) dmls_slot_out(d + (kk + i) * dk, sl, b);
            }
            for (k = ke; k < re; k++) {   /* the row left (8-byte values) */
                char *sl = scratch + (k - k0) * SLOT;
                for (i = 0; i < E; i++) memcpy(sl + 64 + 8 * i, sb + i * sj + k * 8, 8);
                dmls_slot_out(d + k * dk, sl, b);
            }
        }
        /* The last whole band's values past the last whole line. */
        for (k = k0; k < re; k++) {
            const int64_t r = k < kf || gather_rest ? k : k - back;
            char *row = d + r * dk, *sl = scratch + (k - k0) * SLOT;
            if (k >= kf && r < kf) continue;   /* the extra strip's rows before kf: not its own */
            h = dmls_line_gap(row);
            memcpy(row + h + (nb - 1) * 64, sl + h, (size_t)(64 - h));
        }
    }
    *kdone = kn;
    *jdone = nb * E;
}

/* Destination rows back to back (dk = jn * W, jn a multiple of 16 / W
   and jn * W <= 1024): each tile of whole rows is transposed into an L1
   buffer and streamed out as one contiguous run, whatever the
   destination's alignment.  As in dmls_contig_ragged, each group of source
   rows asks for its next band ahead (a tile reads 20-64 rows side by
   side): in one process on the same buffers, the two alternating (2
   threads), 8 NCHW to NHWC conversions and column-major to row-major
   gathers of 14-66 MB (uint8 to float64) ran 1.02-1.64x faster.
   The rows of k past the last whole micro-block go out with the last
   band, so that a task's destination is one stream: left to the caller's
   scalar tile (element by element, with ordinary stores right behind the
   band's streaming ones), tiles of 7-47 rows of k ran at 0.17-0.45 of the
   memcpy limit however the band was written (whole lines only, without
   the rows' ends, measured the same).  In one
   process on the same buffers, alternating (2 threads), 28 unnamed 4-D to
   6-D gathers and scatters of 15-86 MB with such rows (tasks of 7-4995
   rows of k) ran 1.66x faster by geometric mean (1.01-3.16x; a uint8
   gather with tiles of 30 x 96 values 0.23 -> 0.72 of the memcpy limit),
   14 without them 1.02x.  Covers rows k < *kdone: all of them when
   kn >= 16 / W. */
#define DMLS_CONTIG_AHEAD_BYTES 256
typedef char dmls_nt_contig_fits[DMLS_CONTIG_BAND_BYTES + 1024 * 15 + 64 * (256 + 16) <= DMLS_SCRATCH_REGION ? 1 : -1];
static void dmls_nt_contig(int W, const char *s, int64_t sj, char *d,
                           int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
    enum { TB = DMLS_CONTIG_BAND_BYTES, TR = 1024 * 15, SP = 256 + 16 };
    char *tile = scratch;                   /* TB + TR bytes: a band and N - 1 rows of up to 1 KiB */
    char *sst = scratch + TB + TR;          /* 64 * SP bytes */
    const int64_t N = 16 / W, row = jn * W;
    /* TK k rows per tile: whole source lines, at most 256 bytes of k per
       source row (so sst holds them when jn <= 64) and TB bytes out; rows
       too long for a line of k in TB, as many micro-block rows as fit.
       Those had taken one micro-block row (a quarter of each source line
       a band, the line read again by three more bands, 257-1024 one-byte
       values or 513-1024 bytes of two-byte ones): two builds alternating,
       timed as the harness does (2 threads, 3 rounds), 6 unnamed uint8,
       int16 and float16 copies of 12-70 MB so planned ran 1.23-3.57x
       faster (a uint8 gather of rows of 304 bytes 2.5 -> 9.0 GB/s).  (The
       planner sends most such rows through L2: CONTIG_BAND_BYTES.) */
    int64_t TK = TB / row / (64 / W) * (64 / W);
    const int sstaged = sj % 4096 == 0 && jn <= 64;
    int64_t kf, kb, ke, n, skip, head = dmls_line_head(W, s, sj);
    if (TK < 64 / W) TK = TB / row / N * N;
    if (TK > 256 / W) TK = 256 / W;
    if (TK < N) TK = N;
    if (head > TK) head = 0;    /* a first band no longer than the others */
    kf = kn - kn % N;
    /* Each group of source rows asks for the band DMLS_CONTIG_AHEAD_BYTES on
       (the next band, or the first one that far when a band takes less of
       each row: pixels of more than 64 values, TK * W under 256 bytes).
       Asking for the next band only, one or two lines ahead, left such
       pixels waiting on memory: in one process on the same buffers,
       alternating (2 threads, 7 rounds), 11 NCHW to NHWC scatters of 14-70
       MB with pixels of 108-448 channels (rows of 160-704 bytes) ran 1.15-2.38x
       faster (int16 pixels of 184 channels 6.6 -> 15.6 GB/s), those of
       752-992 bytes 0.96-1.01x, and shorter pixels (whose bands reach 256
       bytes) take the next band as before. */
    skip = TK * W < DMLS_CONTIG_AHEAD_BYTES ? (DMLS_CONTIG_AHEAD_BYTES / (TK * W) - 1) * TK : 0;
    for (kb = 0; kb < kf; kb = ke) {
        const char *sb = s;
        int64_t ss = sj, far;
        ke = kb == 0 && head > 0 ? head : kb + TK;
        if (ke > kf) ke = kf;
        far = kf - ke - skip < TK ? kf - ke - skip : TK;
        if (sstaged) {
            sb = dmls_stage_rows(sst, SP, s + kb * W, sj, jn, (ke - kb) * W) - kb * W;
            ss = SP;
        }
        dmls_band_to_buffer(W, sb, ss, kb, ke, jn, tile, row, far > 0 ? s + skip * W : s, sj, far > 0 ? far * W : 0);
        n = ke - kb;
        if (ke == kf && kf < kn) {
            /* The rows of k past the last whole micro-block (kn % N of
               them, fewer than N) go out with the last band: one more
               micro-block row, moved back to end at kn, into the buffer
               after it (its first rows are the band's last again, with the
               same values; a band is at least N rows, so kn - N >= kb). */
            dmls_band_to_buffer(W, s, sj, kn - N, kn, jn, tile + (kn - N - kb) * row, row, s, sj, 0);
            n = kn - kb;
        }
        dmls_stream_copy(d + kb * row, tile, n * row);
    }
    *kdone = kf > 0 ? kn : kf;
}

/* One N x N micro-block through row pointers (block.c's convention: byte
   offsets ko into the source rows, jo into the destination rows). */
static inline void simd_pmicro(int W, const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
    switch (W) {
    case 1: dmls_pmicro1(sr, ko, dr, jo); break;
    case 2: dmls_pmicro2(sr, ko, dr, jo); break;
    case 4: dmls_pmicro4(sr, ko, dr, jo); break;
    default: dmls_pmicro8(sr, ko, dr, jo); break;
    }
}

/* Rows back to back (jn * W bytes apart, a multiple of 64) that start h
   bytes before a line boundary (0 < h < 64, every row the same): the
   values from the first boundary of each row to its last, hw = h / W to
   jn - tw (tw = E - hw), are line-aligned bands (dmls_nt_transpose, with
   the source hw rows on); a row's last tw values and the next row's first
   hw make one more line, transposed through row pointers (the next row's
   read one value further on) into a line of scratch and streamed out.
   Only the first row's first hw values and the last row's last tw go out
   with ordinary stores.  Returns 0, having touched nothing, where it does
   not apply: rows not so placed.  Reads stay within s + j * sj + [0, kn * W)
   for j < jn, writes within d + [0, kn * jn * W).

   The joined lines read E source rows side by side along all of k, more
   streams than the hardware prefetcher follows: for two-byte values (32
   rows) each row's line DMLS_JOINED_AHEAD bytes on is asked for into L2
   as a step reaches a new line (see below), and rows a multiple of 1 KiB apart, whose
   lines crowd a few of L1's and L2's sets, are read as dmls_nt_transpose
   reads them, a line of each row at a time into scratch (the next one
   asked for into L2).  One-byte values (64 rows) are always read so: read
   in place, their joined lines had measured 0.77-1.66x the contiguous
   tile (dmls_nt_contig) over five NCHW to NHWC scatters, and asked for
   ahead as two-byte ones are, 0.92x and 1.21x where read by lines 1.04x
   and 1.31x (planes of 100 x 100 values; see tile.c's
   DMLS_JOINED_MAX_ROW for the rest).  Two-byte values: in one process on
   the same buffers, alternating (2 threads), 14 NCHW to NHWC scatters of
   64-256 int16, uint16 or float16 channels, 16-70 MB, 16-48 bytes past a
   line, which had taken the contiguous tile, ran 1.33x faster by geometric
   mean (0.59-2.32x; from 0.95-2.48x their time page-aligned to 0.91-1.24x
   for up to 192 channels), and 8 more 1.51x (1.20-2.66x).  Pixels of 256 two-byte
   channels (512 bytes) measured 0.59-1.24x, and tile.c sends them to the
   contiguous tile.  Then two builds in alternating processes, a fresh 10
   of 64-224 channels (12-70 MB): 1.52x (1.10-2.46x), from 1.07-3.10x
   their time page-aligned to 0.99-1.41x.  Four- and eight-byte values
   (16 and 8 rows) keep reading in place unasked.
   Two-byte lines had been asked for into L1, where the 32 rows' requests
   evicted each other's lines before the loads came: in a profile of an
   NCHW to NHWC uint16 scatter of 64 channels 16 bytes past a line, 37% of
   the time went to the joined lines' loads.  Asked for into L2 (in one
   process on the same buffers, alternating, 2 threads), 12 such scatters
   of 64-128 channels, 14-40 MB, ran 1.21x faster by geometric mean
   (1.02-1.60x), 13 of 96-352 channels 1.10x (0.96-1.45x), and two builds
   side by side, a fresh 16 of 96-480 channels 1.06x (0.87-1.44x, 12
   faster; 96 channels 1.34x and 1.44x); as far ahead as
   128, 256 or 1024 bytes measured the same (0.997-1.000x).  Their time
   against page-aligned went from 1.28x by geometric mean (at most 2.23x)
   to 1.11x (at most 1.37x, pixels of 64 channels, half of whose lines
   are joined ones). */
#define DMLS_JOINED_AHEAD 512
/* N joined lines of dmls_nt_joined: the E rows from rows[0..E) at byte ko
   transposed into dr (N lines of 64 bytes) and streamed out to out, out +
   dk, ..., one line a destination row. */
static inline void joined_lines_out(int W, const char *const *rows, int64_t ko, char *const *dr,
                                    char *out, int64_t dk) {
    const int64_t N = 16 / W;
    int64_t i, q;
    for (q = 0; q < 4; q++)
        simd_pmicro(W, rows + q * N, ko, dr, q * 16);
    for (i = 0; i < N; i++)
        dmls_copy_body(out + i * dk, dr[i], 64, 1);
}
static int dmls_nt_joined(int W, const char *s, int64_t sj, char *d, int64_t kn, int64_t jn, char *scratch) {
    const int64_t N = 16 / W, E = 64 / W, dk = jn * W;
    const int64_t h = dmls_line_gap(d), hw = h / W, tw = E - hw;
    const int by_lines = W == 1 || (W == 2 && sj % 1024 == 0), ahead = W == 2 && !by_lines;
    char *stage = scratch + 1024;   /* by lines: E rows of 64 bytes after dr's N */
    const char *sr[64], *st[64];
    char *dr[16];
    int64_t kd, k, kk, i;
    if (h == 0 || h % W != 0 || kn < N + 1 || jn < 2 * E || dk % 64 != 0)
        return 0;
    dmls_nt_transpose(W, s + hw * sj, sj, d + h, dk, kn, jn - E, &kd, scratch);
    if (kd < kn)
        return 0;   /* not reached: kn >= N */
    for (i = 0; i < E; i++) {
        sr[i] = i < tw ? s + (jn - tw + i) * sj : s + (i - tw) * sj + W;
        st[i] = stage + i * 64;
    }
    for (i = 0; i < N; i++)
        dr[i] = scratch + i * 64;   /* dmls_nt_transpose is done with scratch */
    k = 0;
    if (by_lines)
        for (; k + E <= kn - 1; k += E) {
            for (i = 0; i < E; i++) {
                if (k + 2 * E <= kn - 1) _mm_prefetch(sr[i] + (k + E) * W, _MM_HINT_T1);
                memcpy(stage + i * 64, sr[i] + k * W, 64);
            }
            for (kk = 0; kk < E; kk += N)
                joined_lines_out(W, st, kk * W, dr, d + (k + kk) * dk + h + (jn - E) * W, dk);
        }
    for (; k + N <= kn - 1; k += N) {
        if (ahead && k * W % 64 == 0 && (k + N) * W + DMLS_JOINED_AHEAD <= (kn - 1) * W)
            for (i = 0; i < E; i++) _mm_prefetch(sr[i] + k * W + DMLS_JOINED_AHEAD, _MM_HINT_T1);
        joined_lines_out(W, sr, k * W, dr, d + k * dk + h + (jn - E) * W, dk);
    }
    for (; k < kn - 1; k++) {
        for (i = 0; i < E; i++)
            memcpy(dr[0] + i * W, sr[i] + k * W, (size_t)W);
        memcpy(d + k * dk + h + (jn - E) * W, dr[0], 64);
    }
    for (i = 0; i < hw; i++)
        memcpy(d + i * W, s + i * sj, (size_t)W);
    for (i = jn - tw; i < jn; i++)
        memcpy(d + (kn - 1) * dk + i * W, s + i * sj + (kn - 1) * W, (size_t)W);
    return 1;
}

/* Fewer than N = 16 / W columns of j (a task's last segment of 8 of 200
   one-byte channels, say), which no micro-block fits: each N rows of k
   are one micro-block into a buffer, the source rows past jn - 1 read
   from row jn - 1 again, and each destination row's jn values copied out
   of the buffer (the last N rows moved back to end at kn, overlapping
   the ones before with the same values).  Element by element, such a
   task of 8 x 9000 values took longer than one of 64 x 9000.  Reads stay
   within s + j * sj + [0, kn * W) for j < jn, writes within
   d + k * dk + [0, jn * W) for k < kn. */
static void dmls_narrow(int W, const char *s, int64_t sj, char *d, int64_t dk,
                        int64_t kn, int64_t jn, int64_t *kdone) {
    const int64_t N = 16 / W, n = jn * W;
    char buf[16 * 16];
    const char *sr[16];
    char *dr[16];
    int64_t i, k, kk;
    *kdone = 0;
    if (jn < 1 || jn >= N || kn < N)
        return;
    for (i = 0; i < N; i++) {
        sr[i] = s + (i < jn ? i : jn - 1) * sj;
        dr[i] = buf + i * 16;
    }
    for (k = 0; k < kn; k += N) {
        kk = k + N <= kn ? k : kn - N;
        simd_pmicro(W, sr, kk * W, dr, 0);
        for (i = 0; i < N; i++)
            dmls_copy_short(d + (kk + i) * dk, dr[i], n);
    }
    *kdone = kn;
}

/* Prefetches into L2 the bytes [off, off + n) of rows r[0], ..., r[rows - 1]. */
static inline void prefetch_rows(const char *const *r, int64_t rows, int64_t off, int64_t n) {
    int64_t i, q;
    for (i = 0; i < rows; i++)
        for (q = 0; q < n; q += 64) _mm_prefetch(r[i] + off + q, _MM_HINT_T1);
}

/* Destination rows back to back (dk = jn * W, jn * W <= 512) with jn not a
   multiple of N = 16 / W: 9-15 one-byte channels, say, in an NCHW to NHWC
   gather, which no whole micro-block fits.  A band of TK values of k is
   transposed into a buffer of rows jn * W apart, a group of N source rows
   at a time along the whole band (as dmls_band_to_buffer by rows), and
   goes out as one run.  With jn >= N the last group is moved back to end at jn,
   overlapping the one before (those values are written twice, the same
   both times).  With jn < N the one group reads source row jn - 1 again
   for its missing rows, and each buffer row's store spills past the row
   into the next one, whose own store comes after it (the band's last
   spills into the buffer's slack).  Element by element, 12 one-byte
   channels ran at 1.7 GB/s on 2 threads.  Each group's next band is
   asked for while this one is transposed: 30-60 source rows are more than
   the hardware prefetcher follows.  A streaming copy (its source beyond
   L3) went from 0.71 to 0.96 of the memcpy limit (45 float32 columns of
   60 MB).  The engine sends it streaming copies, and rows shorter than a
   micro-block: from the cache, the L1 tile (dmls_transpose_plain) straight
   into the destination ran 1.31x faster than bands through this buffer
   (see dmls_transpose in tile.c).  Reads stay within
   s + j * sj + [0, kn * W) for j < jn (the prefetches too), writes within
   d + [0, kn * jn * W).  Covers rows k < *kdone. */
/* The values of k a band of dmls_contig_ragged takes at most: 256, but
   DMLS_RAGGED_FEW_BAND for two-byte and wider values streamed from fewer
   than DMLS_RAGGED_FEW_ROWS source rows (an NCHW to NHWC scatter of under
   32 channels), whose bands of 256 values read 512 bytes to 2 KiB of each
   plane.  In one process on the same buffers, alternating in a shuffled
   order (2 threads, 5 rounds), with the old code against itself as a
   control: 16 unnamed such scatters of 8-70 MB of up to 24 channels ran
   1.14x faster by geometric mean (control 1.01x; float32 1.05-1.53x), 20
   more of pixels under 128 bytes 1.13x (control 1.01x; pixels of 35-47
   two-byte channels 0.96x, 0.87-1.09x: hence the bound on the rows), 20
   unnamed 2-D to 6-D permutations so planned 1.06x (0.97-1.21x, control
   1.01x); with the bound, a fresh 28 (16 scatters, 12 permutations) 1.11x
   (0.90-1.43x, 25 faster; control 1.00x).  Bands of 64 and 96 values
   measured 1.02x and 1.05x where 128 measured 1.06x; bands of 8 KiB of
   the buffer rather than 16 KiB 1.03x (40-45 float32 channels
   0.82-0.91x: 44-48 values a band).  The cause is not pinned down: with
   256 values, asking for half of the next band's lines, or none, measured
   1.01x and 1.02x (control 1.01x), so it is not the requests ahead alone.
   One-byte values (256 bytes of each plane a band already) measured
   0.73-1.20x with 128, and keep 256. */
#define DMLS_RAGGED_FEW_ROWS 32
#define DMLS_RAGGED_FEW_BAND 128
/* ... and one-byte values from DMLS_RAGGED_FEW_ROWS to
   DMLS_RAGGED_BYTE_MAX_ROWS source rows (33-63 channels: a band of 256
   reads 256 bytes of each plane) in copies of DMLS_RAGGED_LONG_MIN_BYTES
   or more (DMLS_RAGGED_LONG) take bands of DMLS_RAGGED_BYTE_BAND values,
   a buffer of up to 32 KiB.  In one process on the same buffers,
   alternating in a shuffled order (2 threads, 5 rounds), with the old
   code against itself as a control: 12 unnamed uint8 copies of 33-47
   channels (11 NCHW to NHWC scatters, a 5-D permutation) of 14-69 MB ran
   1.16x faster by geometric mean (0.94-1.29x; control 1.01x), a fresh 20
   (12 scatters, 8 permutations) 1.07x (0.91-1.24x; control 1.01x).  Over
   those and 7 more, the 27 of 24 MiB or more ran 1.17x (0.99-1.29x), the
   4 of 21-24 MB 0.98-1.09x and the 8 of 21 MB or less 0.96x (0.91-1.04x,
   the L3 holding their source): hence the bound on the size, read off
   these sets.  Channels 12-27 measured 0.86-0.96x so, 65-428 0.71-1.07x,
   and keep 256. */
#define DMLS_RAGGED_BYTE_MAX_ROWS 64
#define DMLS_RAGGED_BYTE_BAND 512
/* The values of k of a band of jn source rows of W-byte values (bytes a
   destination row: jn * W): whole micro-block rows of the band's buffer,
   16 KiB or (DMLS_RAGGED_BYTE_BAND) 32 KiB, within the bounds above. */
static inline int64_t ragged_band(int W, int64_t jn, int flags) {
    const int64_t N = 16 / W, row = jn * W > 0 ? jn * W : 1;
    const int stream = flags & DMLS_RAGGED_STREAM;
    int64_t cap = 256, bytes = 16384, tk;
    if (stream && W >= 2 && jn < DMLS_RAGGED_FEW_ROWS) cap = DMLS_RAGGED_FEW_BAND;
    if (stream && (flags & DMLS_RAGGED_LONG) && W == 1 && jn > DMLS_RAGGED_FEW_ROWS &&
            jn <= DMLS_RAGGED_BYTE_MAX_ROWS) {
        cap = DMLS_RAGGED_BYTE_BAND;
        bytes = DMLS_RAGGED_BYTE_BAND * DMLS_RAGGED_BYTE_MAX_ROWS;
    }
    tk = bytes / row / N * N;
    return tk < cap ? tk : cap;
}

typedef char dmls_contig_ragged_fits[DMLS_RAGGED_BYTE_BAND * DMLS_RAGGED_BYTE_MAX_ROWS + 15 * 512 + 64 +
                                     (2 * 512 + 2 * DMLS_RAGGED_BYTE_BAND) * 8 <= DMLS_SCRATCH_REGION ? 1 : -1];
static void dmls_contig_ragged(int W, const char *s, int64_t sj, char *d,
                               int64_t kn, int64_t jn, int flags, int64_t *kdone, char *scratch) {
    enum { TB = DMLS_RAGGED_BYTE_BAND * DMLS_RAGGED_BYTE_MAX_ROWS, MAXJ = 512, TR = 15 * MAXJ,
           MAXK = DMLS_RAGGED_BYTE_BAND };
    const int64_t N = 16 / W, row = jn * W;
    const int stream = flags & DMLS_RAGGED_STREAM;
    char *out = scratch;                                   /* (TK + N - 1) * row + 16 <= TB + TR + 16 */
    const char **sr = (const char **)(scratch + TB + TR + 64);  /* jn or N <= MAXJ */
    char **dr = (char **)(sr + MAXJ);                      /* TK <= MAXK */
    const char **sk = (const char **)(dr + MAXK);          /* jn <= MAXJ: sr at the band's k */
    char **dl = (char **)(sk + MAXJ);                      /* TK: dr at the last group's j */
    /* With AVX2 the groups go as pairs of micro-blocks one above the other
       in k (dmls_isa.block_pairs, half the shuffles a byte; one-byte rows
       shorter than a group through dmls_isa.pairs_in_order, whose stores
       keep the order of the rows they spill into): in one process on the
       same buffers, alternating (2 threads), NCHW to NHWC scatters of 17-40
       one-byte channels and 12-20 two-byte ones (3.4-9.5 MB) ran 1.15-1.35x
       faster (6 of 6), of 9-15 one-byte channels (1.8-5.7 MB) 1.13-1.30x
       (4 of 4). */
    const int pairs = dmls_isa.level >= DMLS_ISA_AVX2 && (jn > N ? W <= 2 : W == 1);
    const int64_t jr = jn > N ? jn : N;   /* source rows the groups read (row jn - 1 again below N) */
    const int64_t TK = ragged_band(W, jn, flags);
    int64_t kf = kn - kn % N, kb, nk, j, k, jl, ahead, kp, kl;
    *kdone = 0;
    if (jn < 1 || row > 512 || TK < N || kf == 0) return;
    for (j = 0; j < jr; j++) sr[j] = s + (j < jn ? j : jn - 1) * sj;
    jl = jn > N ? jn - N : 0;   /* the last group's first row */
    /* The buffer's rows are the same for every band.  For one-byte values
       they are set once: set per band, the tables took as many
       instructions as the transposes (9 channels, from cache), and in one
       process on the same buffers, alternating in a shuffled order (2
       threads, 5-7 rounds, the old code against itself as a control:
       1.00-1.02x), NCHW to NHWC scatters of 9-15 uint8 channels (2.5-6.2
       MB) ran 1.56-1.73x faster, of 11-45 (29-51 MB, streaming)
       0.97-1.45x (1.22x for 18 channels).  Two-byte values measured
       0.76-1.23x set once (17-46 channels, 24-51 MB, repeated: 1.10x,
       0.91x, 1.00x, 1.06x), and keep setting them per band.  (The first
       band is the longest, so its tables serve every band after it.) */
    for (kb = 0; kb < kf; kb += nk) {
        nk = kf - kb < TK ? kf - kb : TK;
        ahead = (kf - kb - nk < TK ? kf - kb - nk : TK) * W;
        kp = kl = 0;   /* rows of k the pairs did: the groups before the last one, the last one */
        if (kb == 0 || W != 1) {
            for (k = 0; k < nk; k++) dr[k] = out + k * row;
            if (pairs && jn > N)
                for (k = 0; k < nk; k++) dl[k] = dr[k] + jl * W;
        }
        if (pairs) {
            if (ahead > 0) prefetch_rows(sr, jn, (kb + nk) * W, ahead);
            for (j = 0; j < jr; j++) sk[j] = sr[j] + kb * W;
            if (jn > N) {
                kp = dmls_isa.block_pairs(W, sk, dr, nk, (jl + N - 1) / N * N);
                kl = dmls_isa.block_pairs(W, sk + jl, dl, nk, N);
            } else {
                kp = kl = dmls_isa.pairs_in_order(sk, dr, nk);
            }
        }
        for (j = 0; j < jl; j += N) {
            if (ahead > 0 && !pairs) prefetch_rows(sr + j, N, (kb + nk) * W, ahead);
            for (k = kp; k < nk; k += N)
                simd_pmicro(W, sr + j, (kb + k) * W, dr + k, j * W);
        }
        if (ahead > 0 && !pairs) prefetch_rows(sr + jl, N, (kb + nk) * W, ahead);
        for (k = kl; k < nk; k += N)
            simd_pmicro(W, sr + jl, (kb + k) * W, dr + k, jl * W);
        if (kb + nk == kf && kf < kn) {
            /* The rows of k past the last whole micro-block (fewer than N)
               go out with the last band, as in dmls_nt_contig: one more
               micro-block row of each group, moved back to end at kn, into
               the buffer after the band (nk >= N, so kn - N >= kb; the
               band's last rows again, with the same values).  In one
               process on the same buffers, alternating (2 threads), 16
               unnamed 4-D to 6-D gathers and scatters of 13-92 MB with
               such rows ran 1.06x faster by geometric mean (0.99-1.24x;
               tasks of 256 or more rows of k, so the scalar rows were a
               small part). */
            char *rr[16];
            for (k = 0; k < N; k++) rr[k] = out + (kn - N - kb + k) * row;
            for (j = 0; j < jl; j += N)
                simd_pmicro(W, sr + j, (kn - N) * W, rr, j * W);
            simd_pmicro(W, sr + jl, (kn - N) * W, rr, jl * W);
            nk = kn - kb;
        }
        if (stream)
            dmls_stream_copy(d + kb * row, out, nk * row);
        else
            memcpy(d + kb * row, out, (size_t)(nk * row));
    }
    *kdone = kn;
}

/* Source rows of kn values of W = 1 or 2 bytes, fewer than a 16-byte
   micro-block (pixels of 5-15 one-byte channels or 5-7 two-byte ones in an
   NHWC to NCHW copy), sj >= kn * W bytes apart: each group of N = 16 / W
   rows is read 16 bytes per row (the bytes past a row's kn values are its
   neighbour's, and are dropped) and transposed into a tile of N rows of TJ
   values, whose first kn rows then go out, TJ values to each destination
   row.  Only rows whose 16 bytes lie within the last row's end are read in
   place; the last few (and all of a tile too short for that) are first
   copied to a buffer of 16-byte rows, and go the same way.  Those rows
   went element by element before: a tiny tile of a permutation (47 x 14
   uint8 values a task, 22000 tasks) spent most of its time on the
   columns past its last whole micro-block.  Destination rows shorter
   than DMLS_SHORT_OUT_BYTES go out as inline short copies, not as calls
   or (streaming) as lines held and written in parts.  In one process on
   the same buffers, alternating in a shuffled order (2 threads, 9
   rounds), 16 unnamed 4-D to 6-D permutations of 1-64 MB with such
   tiles ran 1.07x faster by geometric mean (0.93-2.15x, four 1.59-2.15x;
   the 47 x 14 scatter 2.3-2.4x, from 0.73x PyTorch's copy_ to 2.4x) and
   24 NHWC to NCHW gathers and scatters of 5-15 one-byte or 5-7 two-byte
   channels 1.00x (0.89-1.21x; an A/A control of the same code read
   0.95-1.04x).  Element by element, 12
   one-byte channels ran at 0.7x numpy's speed; channel by channel, 5-8
   one-byte channels ran 2.1-2.7x slower than this, 5-7 two-byte ones
   1.6-2x.

   The source is read as one stream; from memory (flags:
   DMLS_TRANSPOSE_SOURCE_AHEAD), each micro-block asks for the lines
   AHEAD bytes past its own, within the last row's end.  In one process on
   the same buffers, the two alternating (2 threads), NHWC to NCHW gathers
   of 9-15 uint8 or 6-7 uint16 channels, 34-60 MB, ran 1.18-1.30x faster
   (1024 bytes ahead 1.15-1.24x, 8192 1.13-1.28x) and those of 7-9 MB
   0.92-1.31x; one of 3.4 MB, below the tile's 4 MiB line for asking
   ahead, 0.93x. */
#define DMLS_SHORT_TJ 1024
/* Streamed, a tile holds DMLS_SHORT_TJ_STREAMED_BYTES of each plane: as
   many one-byte values, half as many two-byte ones.  In one process on the
   same buffers, alternating in a shuffled order (2 threads, 5 rounds),
   with the old code against itself as a control: 6 unnamed NHWC to NCHW gathers and permutations of 13-57
   MB so planned ran 1.08x faster by geometric mean (1.01-1.15x), a fresh
   20 of 13-68 MB 1.06x (0.85-1.18x, 17 faster; control 1.01x).  From
   cache (1-8 MB, not streamed) 16 measured 0.98x (0.84-1.02x; control
   1.00x) and keep DMLS_SHORT_TJ; one-byte values with 512 measured 0.96x
   (16, 0.85-1.12x), and all values with 2048 0.91x (22). */
#define DMLS_SHORT_TJ_STREAMED_BYTES 1024
typedef char dmls_short_streamed_fits[DMLS_SHORT_TJ_STREAMED_BYTES <= DMLS_SHORT_TJ ? 1 : -1];
#define DMLS_SHORT_OUT_BYTES 128
/* its tile of 16 rows of DMLS_SHORT_TJ bytes, a line for each of up to 15
   rows after it (and one spare), and the buffer of 16 rows of 16 bytes */
typedef char dmls_rows_short_fits[16 * DMLS_SHORT_TJ + 16 * 64 + 16 * 16 <= DMLS_SCRATCH_REGION ? 1 : -1];
static void dmls_rows_short(int W, const char *s, int64_t sj, char *d, int64_t dk,
                            int64_t kn, int64_t jn, int stream, int flags, int64_t *jdone, char *scratch) {
    enum { AHEAD = 4096 };
    const int64_t N = 16 / W;
    const int64_t TJ = stream ? DMLS_SHORT_TJ_STREAMED_BYTES / W : DMLS_SHORT_TJ;
    char *tile = scratch;                   /* N * TJ * W = 16 * TJ <= 16 * DMLS_SHORT_TJ bytes */
    char *pend = scratch + 16 * DMLS_SHORT_TJ;   /* kn lines, streamed: a line of each row begun by the chunk before */
    const char *end = s + (jn - 1) * sj + kn * W;   /* past the last row's values */
    /* 5-8 one-byte channels (two pixels to a 16-byte read), 5-7 two-byte
       ones: the word transposes (NULL for the others) */
    int64_t (*const deint)(const char *, int64_t, char *, int64_t, int, int64_t) =
        W == 1 && kn <= 8 && sj <= 8 ? dmls_isa.deint_k_u8 : W == 2 ? dmls_isa.deint_k_16 : NULL;
    int64_t last, jf, j0, nj, j, k, q;
    char *stage = scratch + 16 * DMLS_SHORT_TJ + 16 * 64;   /* 16 rows of 16 bytes: rows past the safe reads */
    dmls_held_line held[16];
    *jdone = 0;
    if ((W != 1 && W != 2) || kn < 1 || kn >= N || sj < kn * W || jn < 1) return;
    for (k = 0; k < kn; k++) {
        held[k].line = pend + k * 64;
        held[k].gap = 0;
    }
    /* Row j's 16-byte read ends within the last row's values when
       j * sj + 16 <= (jn - 1) * sj + kn * W. */
    last = jn - 1 - (16 - kn * W + sj - 1) / sj;
    jf = last >= N - 1 ? (last + 1) / N * N : 0;
    if (deint != NULL && !stream) {
        /* straight into the destination rows */
        *jdone = deint(s, sj, d, dk, (int)kn, jf);
        if (*jdone > 0) return;
    }
    for (j0 = 0; j0 < jn; j0 += TJ) {
        const int64_t nin = jf - j0 >= TJ ? TJ : jf > j0 ? jf - j0 : 0;
        nj = jn - j0 < TJ ? jn - j0 : TJ;
        j = 0;
        if (deint != NULL)
            j = deint(s + j0 * sj, sj, tile, TJ * W, (int)kn, nin);
        if (j == 0 && dmls_isa.level >= DMLS_ISA_AVX2 && (flags & DMLS_TRANSPOSE_CACHED)) {
            /* From cache (a copy of under DMLS_CACHED_TRANSPOSE_BYTES that
               does not stream), AVX2 pairs of micro-blocks side by side in j
               (half the shuffles a byte): in one process, alternating (2
               threads), NHWC to NCHW gathers of 5-15 uint8 or 6-7 uint16
               channels of 1.9-3.7 MB ran 1.37-1.76x faster, and of 4.2-7.7
               MiB 1.31-1.93x (8 such gathers, two runs; 0.89-0.93x for two
               of them in a run where the limit memcpy too ran at a third of
               its speed).  Larger ones (with the source asked for ahead,
               row group by row group) ran 0.78-0.98x, 9-12 MiB ones that
               do not stream 0.94-1.35x, and keep the loop below. */
            dmls_isa.tile_jpairs(W, s + j0 * sj, sj, tile, TJ * W, N, nin, &j);
        }
        for (; j < nin; j += N) {
            const char *r = s + (j0 + j) * sj;
            if (flags & DMLS_TRANSPOSE_SOURCE_AHEAD)
                for (q = AHEAD; q < AHEAD + N * sj && q < end - r; q += 64)
                    _mm_prefetch(r + q, _MM_HINT_T0);
            simd_micro(W, r, sj, tile + j * W, TJ * W);
        }
        for (j = nin; j < nj; j += N) {
            const int64_t m = nj - j < N ? nj - j : N;
            int64_t r;
            for (r = 0; r < m; r++) dmls_copy_short(stage + r * 16, s + (j0 + j + r) * sj, kn * W);
            simd_micro(W, stage, 16, tile + j * W, TJ * W);
        }
        if (jn * W < DMLS_SHORT_OUT_BYTES) {
            for (k = 0; k < kn; k++) dmls_copy_short(d + k * dk + j0 * W, tile + k * TJ * W, nj * W);
            continue;
        }
        for (k = 0; k < kn; k++) {
            if (stream) {
                /* Whole lines with streaming stores.  A row's line cut by
                   the chunk's end is held (in pend) and goes out whole
                   with the next chunk's first bytes;
                   only a task's first and last lines take ordinary stores
                   (another task may write the rest of them).  Planes off
                   line boundaries (a plane of 301 x 499 bytes) had two
                   lines a row and chunk written in parts with ordinary
                   stores: in one process on the same buffers, alternating
                   (2 threads), NHWC to NCHW gathers of 5-14 uint8 channels
                   (19-55 MB, planes off lines) ran 1.11-1.42x faster, 7
                   int16 ones 1.07x; planes on line boundaries are copied
                   as before. */
                dmls_lines_out(&held[k], d + k * dk + j0 * W, tile + k * TJ * W, nj * W, j0 + nj < jn);
            } else {
                memcpy(d + k * dk + j0 * W, tile + k * TJ * W, (size_t)(nj * W));
            }
        }
    }
    *jdone = jn;
}

static void sfence(void) { _mm_sfence(); }

void dmls_isa_sse2(dmls_isa_t *t) {
    t->level = DMLS_ISA_SSE2;
    t->transpose = dmls_simd_transpose;
    t->nt_transpose = dmls_nt_transpose;
    t->nt_shifted = dmls_nt_shifted;
    t->nt_contig = dmls_nt_contig;
    t->contig_ragged = dmls_contig_ragged;
    t->rows_short = dmls_rows_short;
    t->narrow = dmls_narrow;
    t->stream_copy = dmls_stream_copy;
    t->store_fence = sfence;
    t->copy = dmls_copy;
    dmls_interleave_sse2(t);
    dmls_nibble_sse2(t);
}
#endif
