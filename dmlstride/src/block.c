/* The blocked transpose (DMLS_MODE_BLOCK): layouts whose source-contiguous
   run and destination-contiguous run each span several dimensions, as in a
   scrambled dimension order, are copied in J x K blocks through offset
   tables. */
#include "block.h"

#include <string.h>

#include "copy-short.h"
#include "elements.h"
#include "isa.h"
#include "prefetch.h"
#include "scratch.h"
#include "tile.h"
#include "tile-runs.h"
#if DMLSTRIDE_HAVE_SIMD
#include "micro-sse2.h"
#endif

/* Blocked transpose for layouts whose fast runs span several dimensions.
   J elements are contiguous in the destination (element j at j * W from
   a row start) and lie at source offsets js[j]; K elements are contiguous
   in the source (k at k * W) and lie at destination offsets kd[k].  So
   element (j, k) moves from s + js[j] + k * W to d + kd[k] + j * W.
   The block is cut into tiles of L source lines of k (TK = 64 * L / W)
   by TJ = DMLS_BJ / L values of j, in j-major order (a band of source
   rows along its whole length, then the next: see block_tiles), and the
   source lines of a tile ahead are prefetched (block_ahead; its destination
   lines too, for one-line-tall tiles of rows up to 256 bytes); past the
   last tile, those of the next block's first tiles, where the caller
   passes it (s_next, d_next).  A side whose rows
   would compete for a few L1 sets (sstage, dstage) goes through a padded
   buffer, so each of its lines is read or written in one burst.  The register micro-kernels
   take one pointer per row; ragged edges are overlapping micro-blocks (element
   by element without SIMD).
   Reads stay within {s + js[j] + k * W}, writes within
   {d + kd[k] + j * W}, for j < jn and k < kn. */
enum { DMLS_BJ = 64, DMLS_BPAD = 64, DMLS_BAHEAD = 2, DMLS_BAHEAD_LONG = 12, DMLS_LONG_BAND_TILES = 16 };

/* Blocks of one- to four-byte values in place ask for the destination
   lines of the tile ahead where the destination rows are up to this many
   bytes (eight-byte values up to 256).  In one process on the same
   buffers, alternating in an order shuffled every round (2 threads, 5-7
   rounds, the old kernel against itself as a control: 0.98-1.01x),
   unnamed 5-D and 6-D uint8,
   int16 and float16 permutations of 8-24 MB with rows of 257-1024 bytes
   ran 1.11x faster by geometric mean (16, 0.97-1.57x, 12 of them 1.08x or
   more; control 0.98x), 1.08x on a fresh 10 (0.92-1.42x; control 1.00x)
   and 1.04-1.63x on 5 more; those of 24-64 MB even (10, 0.92-1.09x).
   Rows of 1.5-1.7 KiB ran 0.94-0.97x, and tiles four lines tall asking
   for theirs 0.74-1.08x.  Four-byte values, first measured at 0.96x (4),
   since ask too: two builds alternating, timed as the harness does (2
   threads, 4 rounds), 11 unnamed permutations of 7-69 MB with rows of
   257-1024 bytes ran 1.20x faster by geometric mean (0.93-1.78x; a
   uint32 gather of rows of 464 bytes, 0.68x PyTorch's speed, 1.78x), a
   fresh 16 1.14x (0.96-2.17x); eight-byte ones 1.05x (6, 0.88-1.23x). */
#define DMLS_ASK_ROW_BYTES 1024
/* ... and, for any row length, where a band of tiles writes more than
   DMLS_ASK_BAND_BYTES of destination rows (k of them by TJ values of j)
   in place (DMLS_ASK_DST_BAND; not into a buffer): the band's lines,
   those the next band finishes among them, have left L1 by then and each
   is read for ownership again.  Two builds alternating (2 threads, 4
   rounds), the 8 of a set of 20 unnamed 4-D to 6-D permutations of 4-70 MB
   blocked in place with rows past the bounds above and bands of 52-400 KB
   ran 1.55x faster by geometric mean (1.12-2.63x; a uint32 gather of rows
   of 352 bytes by 600 6.4 -> 16.8 GB/s); asked for while transposing
   into a whole block's buffer as well, those ran 0.83-1.05x (9), and
   keep to the row bounds.  Rows of 1-2 KiB in bands of at most 25 KB
   asking too ran 0.89-1.16x (16, 1.00x by geometric mean but one 1.92x:
   a band of 59 KB). */
#define DMLS_ASK_BAND_BYTES 32768
/* block_tiles' pf: ask for the source lines of the tiles ahead; for the
   destination lines of the tiles ahead (rows as bounded below); and for
   those of wide bands too (the destination is in memory).  Copies the
   caches hold ask for their source lines alone (the planner's
   BLOCK_DST_AHEAD_MIN_TOTAL). */
enum { DMLS_ASK_SRC = 1, DMLS_ASK_DST_BAND = 2, DMLS_ASK_DST_ROWS = 4, DMLS_ASK_SRC_TAIL = 8,
       DMLS_ASK_FAR = 16, DMLS_ASK_DST_PIECES = 32 };
/* DMLS_ASK_SRC_TAIL: with DMLS_ASK_SRC, ask for the line of each source
   row's last byte as well (see block_tiles), for copies that write at
   least this many bytes: their source and destination together no longer
   fit the L3 (32 MiB), and the row's last line comes from memory. */
#define DMLS_ASK_TAIL_MIN_BYTES ((int64_t)16 << 20)
/* DMLS_ASK_FAR: long bands of four- and eight-byte values ask further
   ahead (block_ahead), where the plan says so (block_far). */
static int far_asks(const dmls_plan *p) {
    return p->block_far ? DMLS_ASK_FAR : 0;
}
/* What a plan's blocks ask for of their source. */
static int source_asks(const dmls_plan *p) {
    return DMLS_ASK_SRC | (p->dst_bytes >= DMLS_ASK_TAIL_MIN_BYTES ? DMLS_ASK_SRC_TAIL : 0) | far_asks(p);
}
/* How many tiles ahead a block's tiles ask for their lines: DMLS_BAHEAD,
   but DMLS_BAHEAD_LONG for four- and eight-byte values in one-line-tall
   tiles whose bands are long (DMLS_LONG_BAND_TILES tiles or more: a KiB
   or more of each source row) and at least one band (DMLS_BJ rows) deep.
   Such a band reads its 64 rows a line each per tile, and a tile of these
   values takes few instructions a line: two tiles ahead came too late to
   hide the misses.  In one process on the same buffers, the distance
   switched between samples (2 threads, 7 rounds), 13 unnamed 5-D and 6-D
   float32, uint32 and float64 permutations of 17-71 MB so asked for (tuned
   among 39) ran 1.20x faster by geometric mean (0.93-1.84x; a (25, 2, 38,
   114, 28) float64 gather 1.8-2.0x in two runs); two fresh sets of 50 and
   45 ran 1.04x (0.85-1.79x) and 1.07x (0.94-1.76x), and 45 of 2-16 MB,
   from cache, 1.005x.  8 tiles ahead measured 1.05x on the second fresh
   set, 20 below 12 on the tuning set; one- and two-byte values 1.01x (30
   of 16-70 MB, 6 or 12 ahead), and keep 2.  All that on an AMD EPYC
   (Zen 3, a 32 MiB L3).  On an Intel Xeon (2 MiB of L2 a core, a 480 MiB
   L3) the same switch ran 2 ahead 1.03x faster than 12 on 40 unnamed such
   blocks and 1.11x on 25 of power-of-two dimensions (1, 3 and 4 ahead
   within 1.5% of 2), and two builds side by side 1.057x on those 65
   (0.94-1.83x), so only plans that say so (DMLS_ASK_FAR: the planner's
   BLOCK_FAR_ASKS) ask that far. */
static inline int64_t block_ahead(int W, int64_t L, int64_t jn, int64_t ntk, int pf) {
    return (pf & DMLS_ASK_FAR) && W >= 4 && L == 1 && jn >= DMLS_BJ && ntk >= DMLS_LONG_BAND_TILES
        ? DMLS_BAHEAD_LONG : DMLS_BAHEAD;
}
#if DMLSTRIDE_HAVE_SIMD
/* The register micro-kernel for one N x N micro-block at (k, j) of a tile,
   into the N rows at rows (their value j on). */
static inline void block_micro_to(int W, const char *const *sr, char *const *rows, int64_t k, int64_t j) {
    switch (W) {
    case 1: dmls_pmicro1(sr + j, k, rows, j); break;
    case 2: dmls_pmicro2(sr + j, 2 * k, rows, 2 * j); break;
    case 4: dmls_pmicro4(sr + j, 4 * k, rows, 4 * j); break;
    default: dmls_pmicro8(sr + j, 8 * k, rows, 8 * j); break;
    }
}
/* ... into the tile's destination rows dr[k..k + N). */
static inline void block_micro(int W, const char *const *sr, char *const *dr, int64_t k, int64_t j) {
    block_micro_to(W, sr, dr + k, k, j);
}
#endif

#if defined(__GNUC__) || defined(__clang__)
#define DMLS_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define DMLS_ALWAYS_INLINE inline
#endif

static DMLS_ALWAYS_INLINE void block_tiles(int W, const char *s, const int64_t *js, int64_t jn,
                               char *d, const int64_t *kd, int64_t kn,
                               int sstage, int dstage, const int64_t L, int nt, int pf, char *scratch,
                               const char *s_next, char *d_next) {
    /* A tile is TJ = DMLS_BJ / L rows of j by L source lines of k
       (TK = 64 * L / W).  sst: TJ rows of SP = 64 * L + 16 bytes, at most
       DMLS_BJ * 64 + 16 * DMLS_BJ; dst: TK rows of DP = TJ * W + DMLS_BPAD
       bytes, 64 * L * TJ + 64 * L * DMLS_BPAD / W <= 64 * DMLS_BJ + 256 * DMLS_BPAD. */
    char *sst = scratch;                                    /* DMLS_BJ * 80 bytes */
    char *dst = sst + DMLS_BJ * 80;                         /* 64 * DMLS_BJ + 256 * DMLS_BPAD */
    const char **sr = (const char **)(dst + 64 * DMLS_BJ + 256 * DMLS_BPAD);  /* DMLS_BJ */
    char **dr = (char **)(sr + DMLS_BJ);                    /* 256 */
    char **br = dr + 256;                                   /* 16: rows of dst */
    const int64_t TJ = DMLS_BJ / L, TK = 64 * L / W;
    const int64_t SP = 64 * L + 16, DP = W * TJ + DMLS_BPAD;
    const int64_t ntj = (jn + TJ - 1) / TJ, ntk = (kn + TK - 1) / TK;
    const int64_t ahead = block_ahead(W, L, jn, ntk, pf);
    int64_t kb, jb, k, j, nk, nj, nkf, njf, t, q;
    int padk = 0, padj = 0, short_k = 0;
    (void)nt;   /* streaming lines need the SIMD variant */
    (void)br;   /* as do the rows past a streamed tile's last micro-block */
    (void)short_k;   /* and rows read in place (AVX2) */
#if DMLSTRIDE_HAVE_SIMD
    if (!nt && dmls_isa.level >= DMLS_ISA_SSE2) {
        /* A side shorter than a micro-block (8-15 one-byte values: a 5-D
           uint8 permutation whose runs are a dimension of 13 and one of
           15) would go element by element.  It is padded to one
           micro-block instead.  Short rows of k: the source rows are
           copied to the buffer's rows of SP bytes, which the micro-blocks
           read past (never the source), and the missing destination rows
           are rows of the destination buffer, never copied out.  Short
           rows of j: the destination rows go through the buffer, of which
           only nj values a row are copied out, and the missing source
           rows are the first one again.
           With AVX2, short rows of 8-15 one-byte values beside a j of 16
           or more are read in place instead, each as its own bytes
           exactly (dmls_isa.block_short): through the buffer, each row's
           copy was two stores that the micro-block's 16-byte load of it
           then waited on.  Two builds side by side (2 threads, two passes
           of 7 repeats), 12 unnamed uint8 permutations of 11-64 MB so
           blocked ran 1.14x faster by geometric mean (1.01-1.42x), a fresh
           20 of 5.5-66 MB 1.16x (1.03-1.32x, all faster). */
        padk = kn < 16 / W;
        padj = jn < 16 / W;
        short_k = padk && !padj && dmls_isa.level >= DMLS_ISA_AVX2 && W == 1 && kn >= 8;
        if (padk) sstage = !short_k;
        if (padj) dstage = 1;
    }
#endif
    /* Tiles j-major: each band of TJ source rows is read along its whole
       length, so the second line of a row's 64 bytes off a line boundary
       is still in L1 for the next tile.  In one process on the same
       buffers, alternating (2 threads), against k-major (every band's
       first TK values, then the next TK): 5-D and 6-D uint8, int16,
       uint32 and float64 permutations of 4-21 MB ran 1.03-2.28x faster
       (21 of 26 gathers and scatters, 9 of them 1.3x or more), the
       others 0.94-0.99x; the 5-D, 6-D and 8-D ones of 49-64 MB that go
       through L2 or stream 0.98-1.03x. */
    /* A buffered side's row pointers are the same for every tile: set once,
       not a tile at a time.  Blocks whose source runs are shorter than a
       micro-block (padded through the source buffer: 8-11 one-byte values,
       rows of 11 one-byte values padded through the destination buffer) spent
       a sixth of their instructions there; in one process on the same
       buffers, alternating in a shuffled order (2 threads, 9 rounds, a
       control of the old kernel against itself at 1.00-1.01x), three unnamed
       uint8 ones of 15-26 MB at 0.27-0.41 of the memcpy limit ran 1.13-1.15x
       faster, a source-buffered 16 MB one 1.06x, and unbuffered ones even
       (0.95-1.00x, 2). */
    if (sstage)
        for (j = 0; j < TJ; j++) sr[j] = sst + j * SP;
    if (dstage)
        for (k = 0; k < TK; k++) dr[k] = dst + k * DP;
    for (t = 0; t < ntj * ntk; t++) {
        jb = (t / ntk) * TJ;
        kb = (t % ntk) * TK;
        nj = jn - jb < TJ ? jn - jb : TJ;
        nk = kn - kb < TK ? kn - kb : TK;
#if DMLSTRIDE_HAVE_SIMD
        if (!nt && dmls_isa.level >= DMLS_ISA_SSE2) {
            /* A last tile narrower than a micro-block (70 values of j in
               tiles of 64 leave 6) would go element by element: it is
               moved back to be one micro-block wide, overlapping the tile
               before (those elements are written twice, with the same
               values). */
            const int64_t N = 16 / W;
            if (nj < N && jb > 0) {
                jb = jn - N;
                nj = N;
            }
            if (nk < N && kb > 0) {
                kb = kn - N;
                nk = N;
            }
        }
#endif
        /* The tile ahead (block_ahead): of this block, or past its last tile
           one of the next block's (the same tables, at s_next and
           d_next).  A block of a few tiles (rows of 54 one-byte values by
           135) otherwise starts every time with all its lines missing: see
           BLOCK_NEXT_MIN_TOTAL in the planner for what that measured. */
        int64_t ta = t + ahead;
        const char *sa = s;
        char *da = d;
        if (ta >= ntj * ntk && s_next != NULL) {
            ta -= ntj * ntk;
            sa = s_next;
            da = d_next;
        }
        if (ta < ntj * ntk) {
            /* Source rows are short runs in many pages: ask for the lines
               of a tile ahead (into L2) so their misses overlap this
               tile's work. */
            int64_t jb2 = (ta / ntk) * TJ, kb2 = (ta % ntk) * TK;
            int64_t nj2 = jn - jb2 < TJ ? jn - jb2 : TJ;
            int64_t nb2 = (kn - kb2 < TK ? kn - kb2 : TK) * W;
            /* A row's piece is asked for a line every 64 bytes from its
               start, and with DMLS_ASK_SRC_TAIL the line of its last
               byte too where the piece ends the row (the pieces before
               it end in the line the next one starts in).  Without that
               last ask, rows off line boundaries left their last line to
               miss in every band.  Two builds alternating (2 threads,
               6-8 rounds): 16 unnamed 5-D and 6-D permutations of
               10-57 MB, the lowest blocked ones among them, ran 1.10x
               faster by geometric mean (an int16 gather of rows of 30
               bytes 1.98x, of 120 bytes 1.69x; float16 scatters of rows
               of 24 and 156 bytes 1.26x); two fresh sets of 24 and 26,
               asking at every size, 1.06x and 1.00x.  Under 16 MiB,
               where the source comes from the L3, asking measured
               0.89-0.99x (5; an A/A control of the old build against
               itself 0.93-1.15x).  A line every 64 bytes and the last of
               every piece (the boundary lines twice) measured about the
               same as the last line alone (1.01x, 0.99x). */
            /* The loops are written out per case: a piece of one line's
               bytes at most (one-line-tall tiles) takes one ask, and the
               tail test is made once a tile (the destination rows' asks
               below likewise: a row within a line takes its two asks
               without a loop).  The single loop before
               spent more instructions asking than transposing in blocks
               of eight-byte values with short source runs (callgrind: 39
               million against 19 in a float64 gather of runs of 72
               bytes).  Two builds alternating (2 threads, 6-8 rounds), 16
               unnamed 5-D and 6-D blocks of 8-30 MB of four- and
               eight-byte values ran 1.05x and 1.04x faster by geometric
               mean in two runs, 24 blocks of any width of 8-70 MB 1.00x
               and 1.06x (an A/A control 1.00x). */
            if (pf & DMLS_ASK_SRC) {
                const char *r0 = sa + kb2 * W;
                const int64_t *jr = js + jb2;
                const int tail = (pf & DMLS_ASK_SRC_TAIL) && kb2 + TK >= kn;
                if (L == 1 && tail)
                    for (j = 0; j < nj2; j++) {
                        DMLS_PREFETCH_L2(r0 + jr[j]);
                        DMLS_PREFETCH_L2(r0 + jr[j] + nb2 - 1);
                    }
                else if (L == 1)
                    for (j = 0; j < nj2; j++)
                        DMLS_PREFETCH_L2(r0 + jr[j]);
                else
                    for (j = 0; j < nj2; j++) {
                        for (q = 0; q < nb2; q += 64)
                            DMLS_PREFETCH_L2(r0 + jr[j] + q);
                        if (tail) DMLS_PREFETCH_L2(r0 + jr[j] + nb2 - 1);
                    }
            }
            /* Its destination rows too (into L1), when each is a write
               stream of its own (one-line-tall tiles; streaming stores
               take care of others, and rows through the tile's buffer ask
               where the plan finds their destination in short pieces far
               apart, DMLS_ASK_DST_PIECES: see the planner's
               BLOCK_DST_PIECE_ASK_BYTES): with 16 or more
               rows of under a few lines, far apart, the read for
               ownership of each line then overlaps this tile's work
               instead of stalling its stores.  A 5-D float32 permutation
               of 11.5 MB (rows of 80 bytes) ran 1.4-1.5x faster.  Rows
               longer than 4 lines are written across several tiles, in
               order, which the hardware prefetcher follows: there the
               requests only cost (0.9x on rows of 1-2 KiB), unless a
               band of tiles writes more than L1 keeps (DMLS_ASK_BAND_BYTES).
               But one- to four-byte rows of up to 1 KiB, whose tiles
               write 64 to 256 bytes of each, gain from them too
               (DMLS_ASK_ROW_BYTES). */
            if ((pf & DMLS_ASK_DST_ROWS) && (!dstage || (pf & DMLS_ASK_DST_PIECES)) && !nt && L == 1 &&
                    da != NULL &&
                    (jn * W <= (W <= 4 ? DMLS_ASK_ROW_BYTES : 256) ||
                     ((pf & DMLS_ASK_DST_BAND) && kn * (jn < TJ ? jn : TJ) * W > DMLS_ASK_BAND_BYTES))) {
                const int64_t nk2 = nb2 / W, e = nj2 * W - 1;
                char *r0 = da + jb2 * W;
                const int64_t *kr = kd + kb2;
                if (e < 64)
                    for (k = 0; k < nk2; k++) {
                        DMLS_PREFETCH_W(r0 + kr[k]);
                        DMLS_PREFETCH_W(r0 + kr[k] + e);
                    }
                else
                    for (k = 0; k < nk2; k++) {
                        for (q = 0; q < e; q += 64)
                            DMLS_PREFETCH_W(r0 + kr[k] + q);
                        DMLS_PREFETCH_W(r0 + kr[k] + e);
                    }
            }
        }
        if (sstage)
            for (j = 0; j < nj; j++)
                dmls_copy_short(sst + j * SP, s + js[jb + j] + kb * W, nk * W);
        else
            for (j = 0; j < nj; j++)
                sr[j] = s + js[jb + j] + kb * W;
        if (!dstage)
            for (k = 0; k < nk; k++)
                dr[k] = d + kd[kb + k] + jb * W;
        if (padj)
            for (j = nj; j < 16 / W; j++) sr[j] = sr[0];
        if (padk)
            for (k = nk; k < 16 / W; k++) dr[k] = dst + k * DP;
        nkf = 0;
        njf = 0;
#if DMLSTRIDE_HAVE_SIMD
        if (short_k) {
            /* rows read in place, their bytes only (else element by
               element below) */
            if (dmls_isa.block_short(sr, dr, nk, nj) == nj) {
                nkf = nk;
                njf = nj;
            }
        } else if (dmls_isa.level >= DMLS_ISA_SSE2) {
            const int64_t N = 16 / W;
            /* a padded side counts as one whole micro-block */
            const int64_t nkm = padk ? N : nk, njm = padj ? N : nj;
            nkf = nkm - nkm % N;
            if (nt) {
                /* nj is a multiple of 64 / W (the caller's contract) */
                njf = nj;
                for (k = 0; k < nkf; k += N)
                    for (j = 0; j < nj; j += 4 * N)
                        switch (W) {
                        case 1: dmls_pline1(sr + j, k, dr + k, j); break;
                        case 2: dmls_pline2(sr + j, 2 * k, dr + k, 2 * j); break;
                        case 4: dmls_pline4(sr + j, 4 * k, dr + k, 4 * j); break;
                        default: dmls_pline8(sr + j, 8 * k, dr + k, 8 * j); break;
                        }
                if (nkf < nk && kb + nk >= N) {
                    /* The rows past the last whole micro-block row (fewer
                       than N): one more micro-block row, moved back to end
                       at nk (kb + nk >= N: within the rows), transposed into
                       the tile's destination buffer, of which only those
                       rows are copied out, whole, with ordinary stores.
                       Element by element, a call to memcpy each, they took
                       most of the time of a uint8 block of 20 rows of k. */
                    for (q = 0; q < N; q++) br[q] = dst + q * DP;
                    for (j = 0; j < nj; j += N) block_micro_to(W, sr, br, nk - N, j);
                    for (k = nkf; k < nk; k++) dmls_copy_short(dr[k], br[k - (nk - N)], nj * W);
                    nkf = nk;
                }
            } else {
                njf = njm - njm % N;
                /* Two micro-blocks at a time where the instruction set has
                   a variant for it, one at a time for the rows left. */
                for (k = dmls_isa.block_pairs(W, sr, dr, nkf, njf); k < nkf; k += N)
                    for (j = 0; j < njf; j += N)
                        block_micro(W, sr, dr, k, j);
                /* Ragged edges as one more micro-block row or column, moved
                   back to end at the edge: it overlaps the last whole one
                   (those elements are written twice, with the same values;
                   source and destination never overlap here). */
                if (njf < njm && njf > 0) {
                    for (k = 0; k < nkf; k += N)
                        block_micro(W, sr, dr, k, njm - N);
                    njf = njm;
                }
                if (nkf < nkm && nkf > 0) {
                    for (j = 0; j + N <= njm; j += N)
                        block_micro(W, sr, dr, nkm - N, j);
                    if (njm >= N) {
                        if (njm % N != 0) block_micro(W, sr, dr, nkm - N, njm - N);
                        nkf = nkm;
                    }
                }
                /* (a padded side is done whole) */
                if (nkf > nk) nkf = nk;
                if (njf > nj) njf = nj;
            }
        }
#endif
        for (k = nkf; k < nk; k++)
            for (j = 0; j < nj; j++)
                memcpy(dr[k] + j * W, sr[j] + k * W, (size_t)W);
        for (k = 0; k < nkf; k++)
            for (j = njf; j < nj; j++)
                memcpy(dr[k] + j * W, sr[j] + k * W, (size_t)W);
        if (dstage)
            for (k = 0; k < nk; k++)
                dmls_copy_short(d + kd[kb + k] + jb * W, dst + k * DP, nj * W);
    }
}

/* lines: source lines of k per tile row (1 or 4); each value of it and
   of W gets its own copy of the loops with constant tile sizes and
   element copies.  nt: write whole
   destination lines with streaming stores; the caller guarantees
   !dstage, d + kd[k] line-aligned, and jn and the tile width
   DMLS_BJ / lines multiples of 64 / W.  pf: DMLS_ASK_SRC, prefetch the
   source lines of the tiles ahead (not for a source already in cache),
   with DMLS_ASK_SRC_TAIL the line of each row's last byte too;
   DMLS_ASK_DST_ROWS, the destination's, for short rows; with
   DMLS_ASK_DST_BAND the destination's of wide bands too (a destination in
   memory, not a buffer).  s_next, d_next: the next block's source and
   destination (the same tables), whose first tiles' lines the last tiles
   ask for, or NULL. */
static void block_transpose(int W, const char *s, const int64_t *js, int64_t jn,
                            char *d, const int64_t *kd, int64_t kn,
                            int sstage, int dstage, int lines, int nt, int pf, char *scratch,
                            const char *s_next, char *d_next) {
#define DMLS_BLOCK_TILES(W_) do {                                                         \
        if (lines == 4)                                                                   \
            block_tiles(W_, s, js, jn, d, kd, kn, sstage, dstage, 4, nt, pf, scratch, s_next, d_next);   \
        else                                                                              \
            block_tiles(W_, s, js, jn, d, kd, kn, sstage, dstage, 1, nt, pf, scratch, s_next, d_next);   \
    } while (0)
    switch (W) {
    case 1: DMLS_BLOCK_TILES(1); break;
    case 2: DMLS_BLOCK_TILES(2); break;
    case 4: DMLS_BLOCK_TILES(4); break;
    default: DMLS_BLOCK_TILES(8); break;
    }
#undef DMLS_BLOCK_TILES
}

/* out[i] = byte offset of element i of a group (fastest dimension first). */
static void group_offsets(const dmls_group *g, int64_t *out) {
    int64_t cnt = 1, r, q;
    int i;
    out[0] = 0;
    for (i = 0; i < g->ndim; i++) {
        for (r = 1; r < g->size[i]; r++)
            for (q = 0; q < cnt; q++)
                out[r * cnt + q] = out[q] + r * g->stride[i];
        cnt *= g->size[i];
    }
}

/* The kernel region holds both offset tables and, after them, block_tiles'
   buffers (sst, dst, sr, dr, br) or dmls_transpose_plain's: the SIMD
   transpose's 21 KiB (isa.h) or the scalar tile's stage. */
enum { DMLS_BLOCK_TABLES = 2 * DMLS_BLOCK_GROUP * 8 };
typedef char dmls_block_tiles_fit[DMLS_BLOCK_TABLES + DMLS_BJ * 80 + 64 * DMLS_BJ + 256 * DMLS_BPAD +
                                  (DMLS_BJ + 256 + 16) * 8 <= DMLS_SCRATCH_REGION ? 1 : -1];
typedef char dmls_block_plain_fits[DMLS_BLOCK_TABLES + (21 << 10) <= DMLS_SCRATCH_REGION &&
                                   DMLS_BLOCK_TABLES + DMLS_TILE_STAGE_BYTES <= DMLS_SCRATCH_REGION ? 1 : -1];
typedef char dmls_block_run_stage_fits[DMLS_BLOCK_TABLES + DMLS_RUN_TILE_STAGE <= DMLS_SCRATCH_REGION ? 1 : -1];
/* The arena's block buffers hold what the chunks need. */
typedef char dmls_block_buffers_fit[DMLS_SCRATCH_BLOCK_BYTES >= DMLS_BLOCK_L2_BYTES ? 1 : -1];

/* The block through L2 (p->l2, see plan.h), in chunks of jc x kc.
   SOURCE (dmls_block_chunks): each source row's piece of the chunk,
   js[j] + k0 * w, is copied to a row of a buffer, one row after another,
   and the chunk transposed from there straight to the destination.  BOTH
   (dmls_block_in_place_chunks, one line of k): the chunk is transposed
   from the source rows where they are into a second buffer, whose rows
   are then written to d + kd[k] + j0 * w one after another, with
   streaming stores when p->stream.  Returns 0, having touched nothing,
   when not even a chunk of one micro-block fits (the caller copies the
   block without the buffers). */
/* (a BOTH chunk's rows of k, at most dmls_in_place_chunk_k(1, 2) = 128,
   have their table in the destination buffer's room for DMLS_BLOCK_L2_ROWS) */
typedef char dmls_block_in_place_rows_fit[2 * 64 <= DMLS_BLOCK_L2_ROWS ? 1 : -1];
static int block_through_l2(const dmls_plan *p, const char *s, const int64_t *js, int64_t jn, char *d,
                            const int64_t *kd, const char *s_next, char *tiles) {
    const int64_t w = p->width, kn = p->kgroup.elems;
    const int64_t room = DMLS_BLOCK_L2_BYTES - DMLS_BLOCK_TABLE;
    const dmls_rows rows = {s, js, 0, jn, 0}, next_block = {s_next, js, 0, jn, 0};
    int64_t jc, kc, sp, dp, *srows, *drows, j, k, j0, k0, nj, n;
    char *arena = dmls_scratch(), *sb, *db;
    if (p->l2 == DMLS_L2_SOURCE)
        dmls_block_chunks(w, jn, kn, DMLS_CHUNK_BLOCK, 1, &jc, &kc);
    else
        dmls_block_in_place_chunks(w, jn, kn, p->l2_lines, &jc, &kc);
    if (arena == NULL || kc == 0)
        return 0;
    sp = dmls_block_pitch(kc * w);
    dp = dmls_block_pitch(jc * w);
    sb = arena + DMLS_SCRATCH_BLOCK_SRC;
    db = arena + DMLS_SCRATCH_BLOCK_DST;
    /* the block kernel's row tables, in each buffer's room past its rows */
    srows = (int64_t *)(sb + room);
    drows = (int64_t *)(db + room);
    if (p->l2 == DMLS_L2_SOURCE)
        for (j = 0; j < jc; j++) srows[j] = j * sp;
    else
        for (k = 0; k < kc; k++) drows[k] = k * dp;
    for (j0 = 0; j0 < jn; j0 += jc) {
        nj = jn - j0 < jc ? jn - j0 : jc;
        for (k0 = 0; k0 < kn; k0 += kc) {
            /* (see dmls_rows_from_l2; the next block's J starts at the same table) */
            const dmls_rows next = dmls_next_chunk(&rows, w, jn, kn, jc, kc, j0, k0, s_next ? &next_block : NULL);
            n = kn - k0 < kc ? kn - k0 : kc;
            if (p->l2 == DMLS_L2_SOURCE) {
                dmls_rows_to_l2(sb, sp, s + k0 * w, js + j0, 0, nj, n * w);
                block_transpose(p->width, sb, srows, nj, d + j0 * w, kd + k0, n, 0, p->block_stage_dst,
                                p->block_lines, 0, DMLS_ASK_DST_ROWS | far_asks(p), tiles, NULL, NULL);
                continue;
            }
            block_transpose(p->width, s + k0 * w, js + j0, nj, db, drows, n, p->block_stage_src, 0,
                            p->block_lines, 0, 0, tiles, NULL, NULL);
            dmls_rows_from_l2(d + j0 * w, kd + k0, 0, db, dp, n, nj * w,
                              p->stream && dmls_isa.level >= DMLS_ISA_SSE2, &next);
        }
    }
    return 1;
}

void dmls_block_tables(const dmls_plan *p, char *scratch) {
    /* jgroup.elems, kgroup.elems <= DMLS_BLOCK_GROUP: 2 x 16 KiB of tables
       at the start of scratch, the tiles' buffers after them
       (dmls_block_tiles_fit). */
    group_offsets(&p->jgroup, (int64_t *)scratch);
    group_offsets(&p->kgroup, (int64_t *)scratch + DMLS_BLOCK_GROUP);
}

/* Whether every row of k starts at the same offset within a line (the
   group's destination strides are whole lines apart): the streaming line
   kernels store to every row at the offset of the first, with aligned
   stores.  The planner streams a block without L2 only then; checked here
   too, so that no plan can send them to rows off that offset. */
static int rows_on_line_offset(const dmls_group *g) {
    int i;
    for (i = 0; i < g->ndim; i++)
        if (g->size[i] > 1 && g->stride[i] % 64 != 0) return 0;
    return 1;
}

/* The k group's dimensions whose destination strides run on from rows of
   run bytes (the first run bytes apart, each next one the one before times
   its size), marked in chain; returns the bytes of one such run of rows
   (run times their sizes), 0 on overflow.  The planner's whole_run_bytes. */
static int64_t chained_run(const dmls_group *g, int64_t run, int *chain) {
    int64_t want = run;
    int i;
    for (i = 0; i < g->ndim; i++) chain[i] = 0;
    for (;;) {
        for (i = 0; i < g->ndim; i++)
            if (!chain[i] && g->size[i] > 1 && g->stride[i] == want) break;
        if (i == g->ndim) return want;
        chain[i] = 1;
        if (want > INT64_MAX / g->size[i]) return 0;
        want *= g->size[i];
    }
}

/* A whole block (p->block_whole, all of J): its rows, jn * w bytes each, make
   runs of L bytes in the destination (the rows of k's chained dimensions,
   back to back), one for each value of its other k dimensions.  The block
   is transposed into the L2 destination buffer, run after run, then each
   run is written out with streaming stores, its lines whole (its first and
   last in part with ordinary stores).  Only the rows' own bytes are
   written, whatever the other dimensions' strides.  Its rows, written in
   place with ordinary stores, had each line read for ownership first: in
   one process on the same buffers, alternating in a shuffled order (2
   threads, 5 rounds), with the old plan against itself as a control (0.98x
   and 1.00x), 12 unnamed 5-D and 6-D permutations of 15-57 MB whose blocks
   are one run each ran 1.32x faster by geometric mean (0.93-1.72x; a
   15.5 MB float64 gather of blocks of 3840 bytes 0.54 -> 0.68 of the
   memcpy limit), a fresh 18 of 300 of 12-64 MB 1.38x (1.07-1.98x, every
   one faster).  Returns 0, having touched nothing, where the buffers
   cannot take it.

   m > 1 (dmls_block_joined): m such blocks, step source bytes apart,
   whose rows each run on into the next block's (no chained dimensions:
   L is one row), are transposed into the buffer side by side, block b's
   rows b * L into runs of m rows, and each run goes out as one.

   s_next (the planner's block_next, else NULL): the next block's source,
   at the same offsets js, whose lines are asked for into L2 while this
   block's runs go out (and its transpose asks for the first tiles', as
   blocks in place do): such a block's source rows are short runs from
   many places, each block started with all of them missing, and its
   stores left the core idle meanwhile.  The planner passes it for blocks
   of the sizes where that paid (its whole_asks_ahead). */
/* A run streamed out begins and ends with a line written in part, with
   ordinary stores, each of which waits for its line to be read for
   ownership: the lines of the run this many runs on are asked for first
   (as dmls_rows_from_l2 does for its rows).  Two builds alternating (2
   threads, 6 rounds), 8 unnamed 5-D and 6-D permutations of 40-65 MB
   with whole blocks, among the lowest of the benchmark's, ran 1.04-1.18x
   faster, a fresh 14 of 17-70 MB 0.99-1.17x (1.05x by geometric mean
   over the 22), and a fresh 20 of 8-70 MB 1.06x (0.97-1.30x). */
#define DMLS_WHOLE_RUN_AHEAD 2
typedef char dmls_block_whole_tables_fit[2 * DMLS_BLOCK_GROUP * 8 <= DMLS_SCRATCH_BLOCK_BYTES ? 1 : -1];
static int block_whole(const dmls_plan *p, const char *s, const int64_t *js, int64_t jn, char *d,
                       int64_t kn, char *tiles, const char *s_next, int64_t m, int64_t step) {
    const int64_t w = p->width;
    const dmls_group *g = &p->kgroup;
    dmls_group inbuf = *g, runs = *g;
    char *arena = dmls_scratch(), *buf;
    int64_t *bkd, *roff, L, at, nruns, r, jr, b;
    int chain[DMLS_MAX_DIMS], i;
    if (arena == NULL || dmls_isa.level < DMLS_ISA_SSE2 || m < 1 || jn > DMLS_BLOCK_L2_BYTES / w ||
            kn > DMLS_BLOCK_L2_BYTES / (jn * w) || m > DMLS_BLOCK_L2_BYTES / (jn * kn * w) ||
            kn > DMLS_BLOCK_GROUP)
        return 0;
    L = chained_run(g, jn * w, chain);
    if (L < jn * w || L > kn * jn * w || (m > 1 && L != jn * w)) return 0;
    /* In the buffer: chained dimensions at their destination strides, the
       others (fastest first) run after run; runs: those others alone, at
       their destination strides. */
    at = m * L;
    runs.ndim = 0;
    runs.elems = 1;
    for (i = 0; i < g->ndim; i++) {
        if (chain[i] || g->size[i] <= 1) continue;
        inbuf.stride[i] = at;
        at *= g->size[i];
        runs.size[runs.ndim] = g->size[i];
        runs.stride[runs.ndim++] = g->stride[i];
        runs.elems *= g->size[i];
    }
    if (at != m * kn * jn * w) return 0;
    nruns = runs.elems;
    buf = arena + DMLS_SCRATCH_BLOCK_DST;
    bkd = (int64_t *)(arena + DMLS_SCRATCH_BLOCK_SRC);
    roff = bkd + DMLS_BLOCK_GROUP;
    group_offsets(&inbuf, bkd);
    group_offsets(&runs, roff);
    for (b = 0; b < m; b++)
        block_transpose(p->width, s + b * step, js, jn, buf + b * L, bkd, kn, p->block_stage_src,
                        p->block_stage_dst, p->block_lines, 0,
                        source_asks(p) | (p->block_dst_ahead ? DMLS_ASK_DST_ROWS : 0), tiles,
                        b + 1 < m ? (s_next != NULL ? s + (b + 1) * step : NULL) : s_next, NULL);
    for (r = 0, jr = 0; r < nruns; r++) {
        if (s_next != NULL)
            for (; jr < jn * (r + 1) / nruns; jr++) dmls_prefetch_l2_lines(s_next + js[jr], kn * w);
        if (r + DMLS_WHOLE_RUN_AHEAD < nruns)   /* (see DMLS_WHOLE_RUN_AHEAD) */
            dmls_prefetch_w_end_lines(d + roff[r + DMLS_WHOLE_RUN_AHEAD], m * L);
        dmls_isa.stream_copy(d + roff[r], buf + r * m * L, m * L);
    }
    return 1;
}

void dmls_block(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, const char *s_next,
                char *d_next, char *scratch) {
    const int64_t *js = (const int64_t *)scratch + j0;
    const int64_t *kd = (const int64_t *)scratch + DMLS_BLOCK_GROUP;
    char *tiles = scratch + 2 * DMLS_BLOCK_GROUP * (int64_t)sizeof(int64_t);
    const int64_t w = p->width, jn = j1 - j0, kn = p->kgroup.elems;
    /* what blocks in place ask for ahead */
    const int ask = source_asks(p) | (p->block_dst_ahead ? DMLS_ASK_DST_BAND | DMLS_ASK_DST_ROWS : 0) |
                    (p->block_dst_pieces ? DMLS_ASK_DST_PIECES : 0);
    int64_t ja = 0, body = 0;
    d += j0 * w;
    if (dmls_run_block_width(w)) {
        /* runs of 3, 5-7 or 9-32 bytes: the run tile over the tables (planned
           in place: no L2 buffers, no streaming, no whole blocks) */
        dmls_run_block((int)w, s, js, jn, d, kd, kn, tiles);
        return;
    }
    if (p->l2 != DMLS_L2_NONE) {
        /* The streaming line kernels below are not planned for these. */
        if (!block_through_l2(p, s, js, jn, d, kd, j0 == 0 && j1 == p->inner_size ? s_next : NULL, tiles))
            block_transpose(p->width, s, js, jn, d, kd, kn, p->block_stage_src, p->block_stage_dst,
                            p->block_lines, 0, source_asks(p) | DMLS_ASK_DST_ROWS, tiles, NULL, NULL);
        return;
    }
    if (p->block_whole && j0 == 0 && j1 == p->inner_size &&
            block_whole(p, s, js, jn, d, kn, tiles, p->block_next ? s_next : NULL, 1, 0))
        return;
    if (dmls_isa.level >= DMLS_ISA_SSE2 && p->stream && kn >= 16 / w && rows_on_line_offset(&p->kgroup))
        /* Streaming stores, whole lines only: the columns before the first
           line boundary and after the last one go with ordinary stores.  (A
           group of k shorter than a micro-block takes the padded buffers
           of block_tiles, with ordinary stores.) */
        body = dmls_whole_lines(d, w, jn, &ja);
    if (body == 0) {
        const int whole_j = p->block_next && j0 == 0 && j1 == p->inner_size;
        block_transpose(p->width, s, js, jn, d, kd, kn, p->block_stage_src, p->block_stage_dst,
                        p->block_lines, 0, ask, tiles,
                        whole_j ? s_next : NULL, whole_j ? d_next : NULL);
        return;
    }
    /* The columns before the first line boundary and after the last one
       with ordinary stores, through the tile's padded micro-blocks.
       Element by element (a call to memcpy each), they took half a
       uint8 scatter's time where each row's first 32 bytes lie before a
       boundary: in one process on the same buffers, alternating (2
       threads), 5-D uint8 and int8 scatters of 14-20 MB ran 1.5-1.95x
       faster; blocks of wider values, and with no such columns, even. */
    if (ja > 0)
        block_transpose(p->width, s, js, ja, d, kd, kn, p->block_stage_src, p->block_stage_dst,
                        p->block_lines, 0, ask, tiles, NULL, NULL);
    block_transpose(p->width, s, js + ja, body, d + ja * w, kd, kn, p->block_stage_src, 0,
                    p->block_lines, 1, source_asks(p), tiles, NULL, NULL);
    if (ja + body < jn)
        block_transpose(p->width, s, js + ja + body, jn - ja - body, d + (ja + body) * w, kd, kn,
                        p->block_stage_src, p->block_stage_dst, p->block_lines, 0,
                        ask, tiles, NULL, NULL);
}

int dmls_block_joined(const dmls_plan *p, const char *s, char *d, int64_t m, int64_t step, const char *s_next,
                      char *scratch) {
    const int64_t *js = (const int64_t *)scratch;
    char *tiles = scratch + 2 * DMLS_BLOCK_GROUP * (int64_t)sizeof(int64_t);
    if (!p->block_whole || p->l2 != DMLS_L2_NONE || dmls_run_block_width(p->width) || p->segments != 1)
        return 0;
    return block_whole(p, s, js, p->inner_size, d, p->kgroup.elems, tiles, p->block_next ? s_next : NULL, m, step);
}
