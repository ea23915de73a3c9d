/* Tiny transposes through two stages in L1: a permutation that swaps two
   short dimensions (the last two of a 5-D tensor, 28 x 18 uint8 values a
   task in tens of thousands of tasks) moves each tile as whole rows into a
   padded stage, transposes the stage in register micro-blocks, and moves
   the stage's rows out whole.  Tiles of four two-byte values a source row
   take a word kernel of their own, without the stages.  Tiles contiguous
   on both sides (dmls_packed_tiles) go in register blocks, a run of them
   through one buffer. */
#ifndef DMLS_TILE_TINY_H
#define DMLS_TILE_TINY_H

#include <stdint.h>

#include "isa.h"

/* The longest row, either side, a stage row holds (bytes), and the stage's
   size: two DMLS_TINY_ROW x DMLS_TINY_ROW byte buffers. */
#define DMLS_TINY_ROW 64
#define DMLS_TINY_STAGE (2 * DMLS_TINY_ROW * DMLS_TINY_ROW)

/* Whether a kn x jn tile of w-byte values takes dmls_tiny_tile: both
   sides' rows at least 8 bytes (shorter ones are a copy of a few values,
   which the element loop does as fast) and at most a stage row. */
static inline int dmls_tiny_tile_fits(int64_t w, int64_t kn, int64_t jn) {
    return DMLSTRIDE_HAVE_SIMD && dmls_isa.level >= DMLS_ISA_SSE2 && (w == 1 || w == 2 || w == 4 || w == 8) &&
           kn * w >= 8 && jn * w >= 8 && kn * w <= DMLS_TINY_ROW && jn * w <= DMLS_TINY_ROW;
}

/* Whether a kn x jn tile of w-byte values takes dmls_tiny_tile's word
   kernel instead of the stages: four two-byte values a source row (8
   bytes), at least eight rows, however many (no stage row bounds them). */
static inline int dmls_tiny_words4(int64_t w, int64_t kn, int64_t jn) {
    return DMLSTRIDE_HAVE_SIMD && dmls_isa.level >= DMLS_ISA_SSE2 && w == 2 && kn == 4 && jn >= 8;
}

/* A kn x jn transpose of w-byte values (dmls_tiny_tile_fits or dmls_tiny_words4): value
   (k, j) from s + j * iss + k * w to d + k * kds + j * w.  Reads stay
   within source rows j < jn of kn values, writes within destination rows
   k < kn of jn values.  stage: DMLS_TINY_STAGE bytes, which it does not
   need initialised (the padding it transposes is never copied out). */
void dmls_tiny_tile(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn, char *stage);

/* Whether m kn x jn tiles of w-byte values, each contiguous on both sides
   (source rows of kn values back to back, destination rows of jn), take
   dmls_packed_tiles: its buffers' bounds (a, the tile with the rows a
   padded micro-block reads past it; b, the run with the rows written past
   its last tile). */
#define DMLS_PACKED_BYTES 16384
static inline int dmls_packed_fits(int64_t w, int64_t kn, int64_t jn) {
    const int64_t n = 16 / (w > 0 ? w : 1);
    return DMLSTRIDE_HAVE_SIMD && dmls_isa.level >= DMLS_ISA_SSE2 && (w == 1 || w == 2 || w == 4 || w == 8) &&
           kn >= 1 && jn >= 1 && kn <= DMLS_PACKED_BYTES && jn <= DMLS_PACKED_BYTES &&
           (kn > n ? kn : n) * jn * w + 16 <= DMLS_PACKED_BYTES && (jn > n ? jn : n) * kn * w + 16 <= DMLS_PACKED_BYTES;
}

/* Tiles of 2-4 one-byte values a source row, or 2-3 two-byte ones, by at
   least 16 bytes of j, of at most DMLS_PACKED_DEINT_MAX bytes:
   dmls_packed_tiles de-interleaves each (dmls_isa's deint_small, deint3_u8,
   deint_k_16), whose padded micro-blocks would be mostly padding.  Two
   builds alternating (2 threads, 4 rounds): 20 unnamed 4-D to 6-D
   permutations of 8-70 MB so planned, tuned on, ran 1.59x faster by
   geometric mean (0.94-3.36x), a fresh 30 1.44x (0.64-2.93x); of those,
   tiles past 1 KiB ran 0.82-1.40x (9: an int16 scatter of 3 x 186 tiles
   0.82x over 8 rounds, where the tile kernels had taken them), and keep
   their paths. */
#define DMLS_PACKED_DEINT_MAX 1024
static inline int dmls_packed_deint(int64_t w, int64_t kn, int64_t jn) {
    return (w == 1 ? kn >= 2 && kn <= 4 && jn >= 16 : w == 2 && kn >= 2 && kn <= 3 && jn >= 8) &&
           kn * jn * w <= DMLS_PACKED_DEINT_MAX;
}

/* m tiles (dmls_packed_fits), tile g's source at s + g * sstep (its jn
   rows of kn values back to back), its destination at d + g * kn * jn * w
   (kn rows of jn values back to back, the tiles back to back): transposed
   into b, which then goes to d as one run, with streaming stores where
   stream is set (where it is not, tiles whose blocks stay within them
   (dmls_isa.packed) go straight to d).  While tile g goes, the lines of next + g * sstep (g <
   nm: the next run's) are asked for.  a: DMLS_PACKED_BYTES; b: m tiles and
   DMLS_PACKED_BYTES more. */
void dmls_packed_tiles(int w, const char *s, int64_t sstep, char *d, int64_t kn, int64_t jn, int64_t m,
                       int stream, const char *next, int64_t nm, char *a, char *b);

#endif
