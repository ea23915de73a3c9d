/* The transposing tile for runs of 3, 5-7 and 9-64 bytes (tile-runs.h), and
   for blocks of runs of up to 32 (dmls_run_block: the same loops over a block's
   offset tables, source row j at s + js[j], destination row k at
   d + kd[k]).

   A tile is TK runs of a source row (about DMLS_RUN_TILE_ROW bytes) by
   TJ = DMLS_RUN_TILE_J source rows.  Each source row's piece is read in
   order and its runs stored into the stage, a padded row per k; each
   stage row is then written out whole, one contiguous burst of TJ runs
   per destination row.  A run moves as one load and one store of the
   power of two at or above its width (4, 8, 16 or 32 bytes): the store's
   surplus lands on the next run of its stage row, which is stored after
   it (or on the row's padding), and the load's surplus on the next run of
   its source row, which belongs to the copy, except after a row's last
   run, which moves at its exact width.  The width is a constant in each
   variant, so every move is a few instructions, not a call.  Runs of
   33-64 bytes share one variant, the width a variable there, every move
   exact (two overlapping 32-byte moves).

   Tiles go j-major (a band of TJ source rows along their whole length,
   then the next band), and while one tile is copied the lines of the
   next one, source and destination, are asked for into L2: its TJ source
   pieces and TK destination pieces lie in as many rows, which the
   hardware prefetcher does not follow.  On one thread, a 1080 x 1920
   RGB image turned (3-byte runs) went from 2.3 to 7.2 GB/s so, 1024 x
   1024 x 3 float32 from 3.6 to 11.0 GB/s (rows 12 KiB apart, which into
   L1 crowd its sets: 7.2 GB/s).  A row's runs go four to an iteration:
   on one thread, from memory, 1.2-1.7x faster than one (four shapes of
   3-, 5- and 12-byte runs, five alternating runs each).

   With SSSE3, 3-byte runs go to the stage four rows by four runs at a
   time in registers (dmls_run3_stage_ssse3), the rest as above: in one
   process on the same buffers, alternating with the loop above (2
   threads), 10 permutations keeping a last dimension of 3 bytes (RGB
   images turned, 0.2-34 MB) ran 1.38x faster by geometric mean
   (0.99-1.82x; a 1080 x 1920 image 0.25 -> 0.43 of the memcpy limit),
   those with 3 rows of j or of k even.

   A tile of at most DMLS_RUN_FEW runs a source row, rows at most
   DMLS_RUN_FEW_ROW bytes apart (pixels of a few runs de-interleaved into
   planes), and one of at most DMLS_RUN_FEW source rows into back-to-back
   destination rows (planes interleaved into such pixels) skip the stage:
   TK = kn there left tiles of 3 runs by 64 rows, whose set-up, prefetch
   requests and stage passes cost more than the moves.  They go pixel by
   pixel, every run one wide move (run_few_k, run_few_j), runs of up to
   15 bytes (wider ones, moved as 32 bytes, ran 0.7-1.1x).  Two builds in
   alternating processes, 2 threads: 10 permutations keeping a last
   dimension of 3-14 bytes 1.64x faster (a uint8 de-interleave of 3 planes
   of 3-byte runs 0.29 -> 0.66 of the memcpy limit), 16 unnamed ones of
   2-70 MB 1.29x (0.86-1.79x) and a fresh 16 1.24x (0.86-1.82x).  At most
   4 runs a row, 5-8 ran 1.2x slower; at most 16, 9-16 ran 0.99x.  Source
   rows further apart (every pixel a new line) and destination rows that
   are not back to back (every pixel a new line, which the stage's
   requests into L2 cover) ran 0.5-0.8x that way and keep the stage. */
#include "tile-runs.h"

#include <string.h>

#include "copy-short.h"
#include "isa.h"
#include "prefetch.h"

/* The direct loops' bounds (see the top): runs a source row or source
   rows, the source rows' distance, runs narrower than this. */
enum { DMLS_RUN_FEW = 8, DMLS_RUN_FEW_ROW = 64, DMLS_RUN_FEW_WIDTH = 16 };

enum { DMLS_RUN_TILE_ROW = 256, DMLS_RUN_TILE_J = 64, DMLS_RUN_TILE_PAD = 32 };
/* TK rows of TJ * w + PAD bytes, TK * w <= ROW: at most ROW * TJ + ROW / 3 * PAD. */
typedef char dmls_run_tile_stage_fits[DMLS_RUN_TILE_ROW * DMLS_RUN_TILE_J + DMLS_RUN_TILE_ROW / 3 * DMLS_RUN_TILE_PAD
                                      <= DMLS_RUN_TILE_STAGE ? 1 : -1];
typedef char dmls_run_tile_pad_fits[DMLS_RUN_TILE_PAD >= DMLS_RUN_TILE_MAX ? 1 : -1];

/* One run of W bytes as a move of the power of two at or above W (up to
   32; wider runs exactly). */
static DMLS_COPY_INLINE void run_wide(char *d, const char *s, const int W) {
    if (W <= 4)
        memcpy(d, s, 4);
    else if (W <= 8)
        memcpy(d, s, 8);
    else if (W <= 16)
        memcpy(d, s, 16);
    else if (W <= 32)
        memcpy(d, s, 32);
    else
        dmls_copy_short(d, s, W);
}

/* One run of W bytes exactly: two moves (3 bytes as 2 + 1). */
static DMLS_COPY_INLINE void run_exact(char *d, const char *s, const int W) {
    if (W == 3) {
        memcpy(d, s, 2);
        d[2] = s[2];
    } else {
        dmls_copy_short(d, s, W);
    }
}

/* Source row j at s + j * iss, destination row k at d + k * kds; or, for a
   block (js, kd not NULL), at s + js[j] and d + kd[k]. */
#define RUN_SRC(j) (js != NULL ? s + js[j] : s + (j) * iss)
#define RUN_DST(k) (kd != NULL ? d + kd[k] : d + (k) * kds)

/* A tile with few runs a source row (kn <= DMLS_RUN_FEW), rows iss >= W
   bytes apart: source row by source row, its runs to their kn destination
   rows, each written in order along j.  A run's wide store lands on the
   next run of its destination row, written after it; a wide load on the
   row's next run, or past its last one on the gap before the next row or
   that row itself (iss >= W), read after it: only the last row's moves are
   exact. */
static DMLS_COPY_INLINE void run_few_k(const int W, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn,
                                       int64_t jn) {
    int64_t j, k;
    for (j = 0; j + 1 < jn; j++) {
        const char *sp = s + j * iss;
        char *dp = d + j * W;
        for (k = 0; k < kn; k++) run_wide(dp + k * kds, sp + k * W, W);
    }
    for (k = 0; k < kn; k++) run_exact(d + k * kds + j * W, s + j * iss + k * W, W);
}

/* A tile with few source rows (jn <= DMLS_RUN_FEW) into back-to-back
   destination rows (kds == jn * W: pixels of jn runs): pixel by pixel, its
   runs from the jn source rows.  Wide stores land on the pixel's next run
   or the next pixel's first, written after them; wide loads on the next
   run of their source row, read for the next pixel: only the last pixel's
   moves are exact. */
static DMLS_COPY_INLINE void run_few_j(const int W, const char *s, int64_t iss, char *d, int64_t kn, int64_t jn) {
    int64_t j, k;
    for (k = 0; k + 1 < kn; k++) {
        const char *sp = s + k * W;
        char *dp = d + k * jn * W;
        for (j = 0; j < jn; j++) run_wide(dp + j * W, sp + j * iss, W);
    }
    for (j = 0; j < jn; j++) run_exact(d + k * jn * W + j * W, s + j * iss + k * W, W);
}

static DMLS_COPY_INLINE void run_tile(const int W, const char *s, int64_t iss, const int64_t *js, char *d,
                                      int64_t kds, const int64_t *kd, int64_t kn, int64_t jn, char *stage) {
    const int64_t TJ = DMLS_RUN_TILE_J, P = TJ * W + DMLS_RUN_TILE_PAD;
    int64_t TK = DMLS_RUN_TILE_ROW / W, jb, kb, nj, nk, a, b, wide, nkb, njb, nnj, nnk, a0, b0;
    if (W < DMLS_RUN_FEW_WIDTH && js == NULL && kd == NULL && kn > 0 && jn > 0) {
        if (kn <= DMLS_RUN_FEW && iss >= W && iss <= DMLS_RUN_FEW_ROW) {
            run_few_k(W, s, iss, d, kds, kn, jn);
            return;
        }
        if (jn <= DMLS_RUN_FEW && kds == jn * W) {
            run_few_j(W, s, iss, d, kn, jn);
            return;
        }
    }
    if (TK > kn) TK = kn;
    for (jb = 0; jb < jn; jb += TJ) {
        nj = jn - jb < TJ ? jn - jb : TJ;
        for (kb = 0; kb < kn; kb += TK) {
            nk = kn - kb < TK ? kn - kb : TK;
            wide = kb + nk < kn ? nk : nk - 1;   /* the row's last run exact */
            /* the next tile: on along k, else the next band's first (none after the last) */
            nkb = kb + nk < kn ? kb + nk : 0;
            njb = kb + nk < kn ? jb : jb + nj;
            nnj = njb < jn ? (jn - njb < TJ ? jn - njb : TJ) : 0;
            nnk = kn - nkb < TK ? kn - nkb : TK;
            a0 = b0 = 0;
#if DMLSTRIDE_HAVE_SSSE3
            if (W == 3 && js == NULL && nk >= 6 && nj >= 4 && dmls_isa.level >= DMLS_ISA_SSSE3) {
                /* four rows by four runs in registers: the runs before a0 of
                   the rows before b0 (whose 16-byte loads stay within nk runs) */
                a0 = ((nk - 6) / 4 + 1) * 4;
                b0 = nj - nj % 4;
                dmls_run3_stage_ssse3(s + jb * iss + kb * W, iss, stage, P, b0, a0);
            }
#endif
            for (b = 0; b < nj; b++) {
                const char *sp = RUN_SRC(jb + b) + kb * W;
                char *tp = stage + b * W;
                if (b < nnj) dmls_prefetch_l2_lines(RUN_SRC(njb + b) + nkb * W, nnk * W);
                for (a = b < b0 ? a0 : 0; a + 4 <= wide; a += 4) {
                    run_wide(tp + a * P, sp + a * W, W);
                    run_wide(tp + (a + 1) * P, sp + (a + 1) * W, W);
                    run_wide(tp + (a + 2) * P, sp + (a + 2) * W, W);
                    run_wide(tp + (a + 3) * P, sp + (a + 3) * W, W);
                }
                for (; a < wide; a++) run_wide(tp + a * P, sp + a * W, W);
                if (wide < nk) dmls_copy_short(tp + wide * P, sp + wide * W, W);
            }
            for (a = 0; a < nk; a++) {
                if (a < nnk && nnj > 0) dmls_prefetch_l2_lines(RUN_DST(nkb + a) + njb * W, nnj * W);
                dmls_copy_short(RUN_DST(kb + a) + jb * W, stage + a * P, nj * W);
            }
        }
    }
}

/* Every width a constant of its own copy of run_tile, over the row
   addresses the caller names (iss, js, kds, kd: the tile's tables are
   constant NULLs, so its addresses need no test). */
#define DMLS_RUN_CASE(W_) case W_: run_tile(W_, s, iss, js, d, kds, kd, kn, jn, stage); break;
#define DMLS_RUN_WIDTHS                                                                                  \
    switch (w) {                                                                                         \
    DMLS_RUN_CASE(3) DMLS_RUN_CASE(5) DMLS_RUN_CASE(6) DMLS_RUN_CASE(7)                                   \
    DMLS_RUN_CASE(9) DMLS_RUN_CASE(10) DMLS_RUN_CASE(11) DMLS_RUN_CASE(12) DMLS_RUN_CASE(13) DMLS_RUN_CASE(14) \
    DMLS_RUN_CASE(15) DMLS_RUN_CASE(16) DMLS_RUN_CASE(17) DMLS_RUN_CASE(18) DMLS_RUN_CASE(19) DMLS_RUN_CASE(20) \
    DMLS_RUN_CASE(21) DMLS_RUN_CASE(22) DMLS_RUN_CASE(23) DMLS_RUN_CASE(24) DMLS_RUN_CASE(25) DMLS_RUN_CASE(26) \
    DMLS_RUN_CASE(27) DMLS_RUN_CASE(28) DMLS_RUN_CASE(29) DMLS_RUN_CASE(30) DMLS_RUN_CASE(31) DMLS_RUN_CASE(32) \
    default:                                     /* 33 to DMLS_RUN_TILE_WIDE_MAX: one variant */     \
        if (w > DMLS_RUN_TILE_MAX && w <= DMLS_RUN_TILE_WIDE_MAX)                                        \
            run_tile((int)w, s, iss, js, d, kds, kd, kn, jn, stage);                                     \
        break;                                                                                           \
    }

void dmls_run_tile(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn, char *stage) {
    const int64_t *const js = NULL, *const kd = NULL;
    DMLS_RUN_WIDTHS
}

void dmls_run_block(int w, const char *s, const int64_t *js, int64_t jn, char *d, const int64_t *kd, int64_t kn,
                    char *stage) {
    const int64_t iss = 0, kds = 0;
    DMLS_RUN_WIDTHS
}
