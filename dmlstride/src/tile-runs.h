/* The transposing tile for runs of bytes that are no element width: a
   permutation that keeps a last dimension of 3 one-byte values (an RGB
   image turned), 3 float16 or 3 float32 ones, moves whole runs of 3, 6 or
   12 bytes, a transpose of "values" of that many bytes. */
#ifndef DMLS_TILE_RUNS_H
#define DMLS_TILE_RUNS_H

#include <stdint.h>

/* The widths it takes: 3 to DMLS_RUN_TILE_WIDE_MAX bytes, other than 4
   and 8 (whose values the element kernels take).  Up to DMLS_RUN_TILE_MAX
   each width has a variant of its own, and blocks of runs take them too
   (dmls_run_block_width); wider runs, up to a line, share one variant
   whose moves are exact, and only tiles take them.  The planner
   (RUN_TILE_MAX, RUN_TILE_WIDE_MAX) gives it all of them. */
#define DMLS_RUN_TILE_MAX 32
#define DMLS_RUN_TILE_WIDE_MAX 64
/* (the executor's line arithmetic divides a line by the width) */
typedef char dmls_run_tile_wide_max_fits_a_line[DMLS_RUN_TILE_WIDE_MAX <= 64 ? 1 : -1];
static inline int dmls_run_tile_width(int64_t w) {
    return w >= 3 && w <= DMLS_RUN_TILE_WIDE_MAX && w != 4 && w != 8;
}
static inline int dmls_run_block_width(int64_t w) {
    return dmls_run_tile_width(w) && w <= DMLS_RUN_TILE_MAX;
}

/* A kn x jn transpose of w-byte runs (dmls_run_tile_width(w)): run (k, j)
   from s + j * iss + k * w to d + k * kds + j * w.  Reads stay within the
   bytes from the first run to the last (the gaps between source rows at
   most 64 bytes apart may be read, never past the last run), writes within
   the runs' bytes.  stage: DMLS_RUN_TILE_STAGE bytes. */
#define DMLS_RUN_TILE_STAGE 24576
void dmls_run_tile(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn, char *stage);

/* The same for a block (DMLS_MODE_BLOCK) of such runs (dmls_run_block_width(w)): run (k, j) from
   s + js[j] + k * w to d + kd[k] + j * w, for j < jn and k < kn (K
   contiguous in the source, J in the destination).  Reads and writes stay
   within those runs' bytes. */
void dmls_run_block(int w, const char *s, const int64_t *js, int64_t jn, char *d, const int64_t *kd, int64_t kn,
                    char *stage);

/* tile-runs-ssse3.c: the stage of 3-byte runs, four rows by four runs at a
   time (see there); only where dmls_isa.level >= DMLS_ISA_SSSE3. */
void dmls_run3_stage_ssse3(const char *s, int64_t iss, char *stage, int64_t P, int64_t nj, int64_t na);

#endif
