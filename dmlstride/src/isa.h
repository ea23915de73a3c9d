/* Instruction-set variants of the kernels and the run-time dispatcher.

   Each job with an SIMD variant has a generic version and one per
   instruction set, in files named for it (*-sse2.c, *-ssse3.c, *-avx2.c).
   dmls_isa holds the variant in use; dmls_isa_select picks the best one the
   CPU supports at or below a level.  SSE2 is the x86-64 baseline, so it is
   compiled in whenever the compiler targets it; SSSE3 and AVX2 are compiled
   with function attributes and used only if the CPU has them.
   Defining DMLSTRIDE_NO_SIMD (or building without __SSE2__, e.g. on other
   architectures) compiles the generic versions only.

   Every SIMD variant returns how much it did (or sets *kdone / *jdone); the
   caller finishes the rest with the generic code, so a generic variant may
   simply do nothing. */
#ifndef DMLS_ISA_H
#define DMLS_ISA_H

#include <stdint.h>

#if defined(__SSE2__) && !defined(DMLSTRIDE_NO_SIMD)
#define DMLSTRIDE_HAVE_SIMD 1
#else
#define DMLSTRIDE_HAVE_SIMD 0
#endif
#if DMLSTRIDE_HAVE_SIMD && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define DMLSTRIDE_HAVE_SSSE3 1
#define DMLSTRIDE_HAVE_AVX2 1
#else
#define DMLSTRIDE_HAVE_SSSE3 0
#define DMLSTRIDE_HAVE_AVX2 0
#endif

enum { DMLS_ISA_GENERIC = 0, DMLS_ISA_SSE2 = 1, DMLS_ISA_SSSE3 = 2, DMLS_ISA_AVX2 = 3 };

/* dmls_isa_t.transpose's flags: where its operands are expected (see tile.c). */
enum {
    /* In cache (a copy too small to come from memory, or an L2 buffer):
       some blocks read the source in place rather than through a staged
       tile, and the next tile's destination lines are asked for into L1
       (else into L2). */
    DMLS_TRANSPOSE_CACHED = 1,
    /* Past the L2 caches: the source lines of the tile after are asked for
       too, into L2. */
    DMLS_TRANSPOSE_SOURCE_AHEAD = 2,
    /* Past the L2 caches, not streaming and not through the L2 buffers:
       1- and 2-byte values into destination rows a multiple of 2 KiB apart
       take tiles of 256 source rows (the planner's tall_tile_segments). */
    DMLS_TRANSPOSE_TALL = 4,
    /* From cache, a copy of at least DMLS_CACHED_TRANSPOSE_BYTES (its two
       sides past half the L3), or a chunk of the L2 buffers of a copy from
       memory: 1- and 2-byte values take tiles of 128 source rows. */
    DMLS_TRANSPOSE_LONG_TILES = 8
};
/* contig_ragged's flags: streaming stores; and a copy of at least
   DMLS_RAGGED_LONG_MIN_BYTES (tile.c), whose one-byte bands from 33-64
   source rows are longer (see transpose-sse2.c). */
enum { DMLS_RAGGED_STREAM = 1, DMLS_RAGGED_LONG = 2 };
/* A tall tile's source rows (DMLS_TRANSPOSE_TALL). */
#define DMLS_TALL_TILE_ROWS 256
/* Source rows at most this many bytes apart (the pixels of an NHWC to NCHW
   copy) lie close together: a band of them is one run of memory, asked for
   as such where asked for at all (transpose-sse2.c), and tile.c sends them
   to nt_shifted whatever the plan's L2 buffers. */
#define DMLS_CLOSE_ROW_BYTES 1024
/* The contiguous band (nt_contig) transposes this many bytes of whole
   destination rows back to back at a time; the planner sends one- and
   two-byte rows too long for a line of k in it through L2 (its
   CONTIG_BAND_BYTES). */
#define DMLS_CONTIG_BAND_BYTES 16384
/* The executor joins streamed interleave tasks of at most this many bytes,
   in runs of at least DMLS_JOIN_MIN_TASKS whose destinations go on from
   each other (execute.c, joined_planes); the planner streams such short
   tasks earlier for that (its interleave_tasks_join). */
#define DMLS_JOIN_PLANES_TASK_BYTES 512
#define DMLS_JOIN_MIN_TASKS 4
/* Tasks of at most DMLS_JOIN_PLANES_TASK_BYTES whose planes' rows are
   shorter than this many bytes are joined along the source instead where
   dimensions continue those rows (execute.c, joined_pixels; the planner's
   JOIN_PIXELS_ROW_BYTES), in copies that then do not stream. */
#define DMLS_JOIN_PIXELS_ROW_BYTES 64
/* Such joined tasks go in panels (execute.c, run_panels; the planner's
   PANEL_MIN_CHAIN_BYTES and the bounds beside it) where the chain of
   source dimensions holds at least this many bytes of tasks and the
   dimension outside it continues the destination a task at a time ... */
#define DMLS_PANEL_MIN_CHAIN_BYTES 16384
/* ... or at least DMLS_PANEL_MIN_FAR_CHAIN_BYTES where the chain's tasks,
   of DMLS_PANEL_MIN_FAR_TASK_BYTES or more each, lie at least
   DMLS_PANEL_FAR_TASK_STRIDE bytes apart in the destination (the innermost
   dimension's stride: a page or more, each task's bytes on a page of
   their own) ... */
#define DMLS_PANEL_MIN_FAR_CHAIN_BYTES 2048
#define DMLS_PANEL_MIN_FAR_TASK_BYTES 8
#define DMLS_PANEL_FAR_TASK_STRIDE 4096
/* ... of tasks of at most this many bytes, in rows of B of at least
   DMLS_PANEL_MIN_ROWS, and for four- and eight-byte values plane rows of
   at least DMLS_PANEL_MIN_WIDE_ROW_BYTES a task. */
#define DMLS_PANEL_MAX_TASK_BYTES 192
#define DMLS_PANEL_MIN_ROWS 3
#define DMLS_PANEL_MIN_WIDE_ROW_BYTES 16

typedef struct {
    int level;   /* DMLS_ISA_* in use */
    /* Transpose a kn x jn block: source k contiguous (stride W), rows j at
       stride sj; destination j contiguous, rows k at stride dk.  Covers rows
       k < *kdone and columns j < *jdone; scratch: 45 KiB.  flags:
       DMLS_TRANSPOSE_* (where the operands are expected). */
    void (*transpose)(int W, const char *s, int64_t sj, char *d, int64_t dk,
                      int64_t kn, int64_t jn, int flags, int64_t *kdone, int64_t *jdone, char *scratch);
    /* The same with streaming stores, destination rows line-aligned (d and
       dk multiples of 64, jn a multiple of 64 / W); covers rows k < *kdone
       and all jn.  Uses no scratch. */
    void (*nt_transpose)(int W, const char *s, int64_t sj, char *d, int64_t dk,
                         int64_t kn, int64_t jn, int64_t *kdone, char *scratch);
    /* Destination rows back to back (dk = jn * W, jn a multiple of 16 / W,
       jn * W <= 1024), streamed out as one run; rows k < *kdone.  scratch:
       48 KiB. */
    void (*nt_contig)(int W, const char *s, int64_t sj, char *d,
                      int64_t kn, int64_t jn, int64_t *kdone, char *scratch);
    /* Destination rows back to back (dk = jn * W) with jn not a multiple
       of 16 / W (fewer included) and jn * W <= 512, written with streaming
       stores under DMLS_RAGGED_STREAM; rows k < *kdone.  flags:
       DMLS_RAGGED_*.  scratch: 56 KiB. */
    void (*contig_ragged)(int W, const char *s, int64_t sj, char *d,
                          int64_t kn, int64_t jn, int flags, int64_t *kdone, char *scratch);
    /* Values of W = 1 or 2 bytes, fewer than 16 / W (5 or more worth it)
       per source row (source rows sj >= kn * W apart, destination rows k at
       dk with j contiguous), written with streaming stores when stream is
       set; covers columns j < *jdone (a multiple of 16 / W).  flags:
       DMLS_TRANSPOSE_* (where the operands are expected).  scratch: 16 KiB. */
    void (*rows_short)(int W, const char *s, int64_t sj, char *d, int64_t dk,
                       int64_t kn, int64_t jn, int stream, int flags, int64_t *jdone, char *scratch);
    /* Three interleaved channels <-> three planes; return the pixels done. */
    int64_t (*deint3_u8)(const char *s, char *d0, char *d1, char *d2, int64_t n);
    int64_t (*deint3_32)(const char *s, char *d0, char *d1, char *d2, int64_t n);
    int64_t (*int3_32)(const char *s0, const char *s1, const char *s2, char *d, int64_t n);
    int64_t (*int3_u8)(const char *s0, const char *s1, const char *s2, char *d, int64_t n);
    /* Nibbles <-> bytes (low nibble first, unpacked nibbles sign-extended when
       sign is set); return the packed bytes done. */
    int64_t (*unpack_nibbles)(const unsigned char *q, unsigned char *out, int64_t nbytes, int sign);
    int64_t (*pack_nibbles)(const unsigned char *src, unsigned char *q, int64_t nbytes);
    /* Copy with non-temporal stores, and the fence that ends a run of them. */
    void (*stream_copy)(char *d, const char *s, int64_t n);
    void (*store_fence)(void);
    /* Copy n bytes with ordinary stores, as memcpy (no overlap). */
    void (*copy)(char *d, const char *s, int64_t n);
    /* The blocked transpose's micro-blocks two at a time (block.c): N = 16 / W
       rows of j by 2N values of k (2N x 2N blocks for 4- and 8-byte values),
       through one pointer per row (sr[j] + k * W is source row j at k,
       dr[k] + j * W destination row k at j), for every j < nj (a multiple of
       N) and k below the value returned (a multiple of 2N, at most nk; or nk
       itself where nk = N, a single row of micro-blocks done as pairs side
       by side in j, and for 2-byte values with nj >= 16, every row done
       so). */
    int64_t (*block_pairs)(int W, const char *const *sr, char *const *dr, int64_t nk, int64_t nj);
    /* The cached tile transpose's blocks 32 bytes wide (transpose-avx2.c):
       source row j at s + j * sj (k contiguous), destination row k at
       d + k * dk (j contiguous); 32 / W values of k by 32 / W of j for 4-
       and 8-byte values, by 16 / W for 1- and 2-byte ones.  Covers every
       k below the value returned and j below *jdone (whole blocks; 0 and
       0 without a variant). */
    int64_t (*tile_wide)(int W, const char *s, int64_t sj, char *d, int64_t dk, int64_t nk, int64_t nj,
                         int64_t *jdone);
    /* The same for 1- and 2-byte values in blocks of 16 / W values of k
       by 32 / W of j (a pair of micro-blocks side by side in j), for tiles
       of 32 / W columns or more and for bands too short for tile_wide's (0
       and 0 for wider values). */
    int64_t (*tile_jpairs)(int W, const char *s, int64_t sj, char *d, int64_t dk, int64_t nk, int64_t nj,
                           int64_t *jdone);
    /* nt_transpose for destination rows off line boundaries (d and dk
       multiples of W, not of 64): each row's whole lines go out with
       streaming stores, the bytes before its first line boundary and after
       its last whole line with ordinary ones; rows of whole lines back to
       back (dk = jn * W) all of it or nothing (4- and 8-byte values).
       Covers rows k < *kdone of columns j < *jdone (both 0 where it does
       not apply).  scratch: 34 KiB. */
    void (*nt_shifted)(int W, const char *s, int64_t sj, char *d, int64_t dk,
                       int64_t kn, int64_t jn, int64_t *kdone, int64_t *jdone, char *scratch);
    /* transpose for fewer than N = 16 / W columns of j (1 <= jn < N) and
       at least N rows of k: one micro-block per N rows of k, the missing
       source rows read from the last one, and each destination row's jn
       values copied out of it.  Covers all rows (*kdone = kn) or none. */
    void (*narrow)(int W, const char *s, int64_t sj, char *d, int64_t dk,
                   int64_t kn, int64_t jn, int64_t *kdone);
    /* K = 5-8 one-byte channels of n pixels sj bytes apart (K <= sj <= 8)
       into K rows dk apart (row c at d + c * dk, pixel j at + j); reads
       s + [0, (n - 1) * sj + 16) at most.  Returns the pixels done (a
       multiple of 16; 0 without a variant). */
    int64_t (*deint_k_u8)(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n);
    /* The inverse for K = 5-8: K rows kss apart (row c at s + c * kss) into
       n pixels of K bytes back to back at d, writing d + [0, n * K) only.
       Returns the pixels done (0 without a variant). */
    int64_t (*int_k_u8)(const char *s, int64_t kss, char *d, int K, int64_t n);
    /* The same for K = 3-7 two-byte channels (pixels sj >= 2K bytes apart,
       reads s + [0, (n - 1) * sj + 16) at most; multiples of 8 pixels). */
    int64_t (*deint_k_16)(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n);
    int64_t (*int_k_16)(const char *s, int64_t kss, char *d, int K, int64_t n);
    /* block_pairs for one group of 16 one-byte rows (nj = 16), storing the
       destination rows in order k = 0, 1, ... (each store may spill into
       the next row); returns the rows of k done (0 without a variant). */
    int64_t (*pairs_in_order)(const char *const *sr, char *const *dr, int64_t nk);
    /* Fill rows of a broadcast along the last dimension: row r (r < rows)
       is n bytes (16 <= n, a multiple of w) at d + r * dstep, every
       w-byte value the one at s + r * sstep (w = 1, 2, 4 or 8).  Returns
       the rows done: all of them, or 0 without a variant. */
    int64_t (*fill_rows)(char *d, const char *s, int w, int64_t n, int64_t rows, int64_t sstep,
                         int64_t dstep);
    /* The same as deint_k_16 for K = 5-7 four-byte channels (pixels sj >=
       4K bytes apart, reads s + [0, (n - 1) * sj + 32) at most; multiples
       of 8 pixels): each pixel read as 8 values, transposed 8 x 8, the
       first K rows stored. */
    int64_t (*deint_k_32)(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n);
    /* The same for K = 3-7 eight-byte channels (pixels sj >= 8K bytes
       apart, reads s + [0, (n - 1) * sj + R) at most, R = 32 for K = 3-4
       and 64 for K = 5-7; multiples of 4 pixels). */
    int64_t (*deint_k_64)(const char *s, int64_t sj, char *d, int64_t dk, int K, int64_t n);
    /* A kn x jn tile contiguous on both sides (dmls_packed_tiles): source
       rows of kn values back to back at a, destination rows of jn values
       back to back at b, in blocks 32 bytes wide, the last one on each side
       moved back to end there.  Returns 0, having done nothing, where a side
       is shorter than a block (or without a variant). */
    int (*packed)(int W, const char *a, char *b, int64_t kn, int64_t jn);
    /* K = 2 or 4 one-byte channels, or 2 two-byte ones, of n pixels back to
       back at s into K planes dk bytes apart at d (plane c at d + c * dk):
       steps of 16 pixels (8 of two bytes), the last moved back to end at n
       (its values written twice, the same ones).  Reads s + [0, n * K * W),
       writes the planes' first n values.  Returns n, or 0 (having done
       nothing) for fewer pixels than a step or without a variant. */
    int64_t (*deint_small)(int W, int K, const char *s, char *d, int64_t dk, int64_t n);
    /* The blocked transpose's tile of short rows of one-byte values
       (block.c): 8 to 15 bytes (kn) from each source row sr[j], read as
       those bytes exactly; every destination row dr[k] (k < kn) written
       at all columns j < nj (nj >= 16; the group of columns past the last
       whole one moved back to end at nj, its values written twice).
       Returns nj, or 0 without a variant (having touched nothing). */
    int64_t (*block_short)(const char *const *sr, char *const *dr, int64_t kn, int64_t nj);
} dmls_isa_t;

extern dmls_isa_t dmls_isa;

/* Whether nt_transpose asks for the next band of source rows close
   together into L2 rather than L1 (see dmls_nt_transpose): 0 unless the
   engine sets it from the planner's BAND_ASKS_L2, a bound of the L3. */
extern int dmls_band_asks_l2;

/* Use the best variants at or below max_level that the CPU supports;
   returns the level chosen. */
int dmls_isa_select(int max_level);

/* The variants of each instruction set (each file fills in its own). */
void dmls_isa_generic(dmls_isa_t *t);
#if DMLSTRIDE_HAVE_SIMD
void dmls_isa_sse2(dmls_isa_t *t);
#endif
#if DMLSTRIDE_HAVE_SSSE3
void dmls_isa_ssse3(dmls_isa_t *t);
#endif
#if DMLSTRIDE_HAVE_AVX2
void dmls_isa_avx2(dmls_isa_t *t);
void dmls_fill_avx2(dmls_isa_t *t);
#endif

#endif
