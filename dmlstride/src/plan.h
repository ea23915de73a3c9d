/* A copy plan as the kernels see it.  The planner (dmlstride/_planner.py)
   decides; the Cython bridge checks its decisions against these limits and
   fills the structs; the executor (execute.c) runs them. */
#ifndef DMLS_PLAN_H
#define DMLS_PLAN_H

#include <stdint.h>

#include "engine-limits.h"

enum {
    DMLS_MODE_MEMCPY = 0,      /* innermost run contiguous on both sides */
    DMLS_MODE_FILL = 1,        /* zero source stride: one value repeated */
    DMLS_MODE_STRIDED = 2,     /* element by element */
    DMLS_MODE_TILE = 3,        /* 2-D transpose of (tile dim, innermost dim) */
    DMLS_MODE_NIBBLE = 4,      /* 4-bit, element by element */
    DMLS_MODE_INTERLEAVE = 5,  /* 2-4 planes into interleaved channels */
    DMLS_MODE_BLOCK = 6        /* J x K blocks of multi-dimensional groups */
};

/* MODE_BLOCK: elements in each group (their offset tables live in scratch;
   the planner takes groups of more than 1024 only where smaller ones leave
   no block). */
#define DMLS_BLOCK_GROUP 2048
/* MODE_BLOCK and MODE_TILE in copies larger than the caches (plan
   field l2): a block's source rows are first copied, one after another, to
   a buffer in L2 (SOURCE), and with BOTH the block is transposed into a
   second buffer whose rows are then written to the destination one after
   another (with streaming stores when the plan streams; a tile always
   uses BOTH).  Memory then sees a few long runs at a time instead of one
   line from each of dozens of rows. */
enum { DMLS_L2_NONE = 0, DMLS_L2_SOURCE = 1, DMLS_L2_BOTH = 2 };
/* Row pitch of a block buffer holding rows of n bytes: whole lines, and
   never a multiple of 4 KiB (rows that far apart share one L1 set). */
static inline int64_t dmls_block_pitch(int64_t n) {
    int64_t p = (n + 63) / 64 * 64;
    return p % 4096 == 0 ? p + 64 : p;
}
/* Each L2 buffer holds DMLS_BLOCK_L2_BYTES: rows, then room for a table
   of DMLS_BLOCK_L2_ROWS row offsets (the source buffer's rows, for the
   block kernel; both buffers keep the room, so chunks fit either).  A
   chunk takes at most DMLS_BLOCK_L2_ROWS values of j. */
#define DMLS_BLOCK_L2_BYTES ((int64_t)5 << 16)
#define DMLS_BLOCK_L2_ROWS 1024
#define DMLS_BLOCK_TABLE ((int64_t)DMLS_BLOCK_L2_ROWS * 8)
/* A jn x kn block of w-byte elements goes through L2 in chunks of *jc
   values of j by *kc values of k (returned in both; 0 when not even one
   micro-block fits): the whole block when both buffers (and the row
   table) hold it; else runs
   of about DMLS_BLOCK_L2_RUN bytes on the side that is longer, as many
   whole lines as fit on the other (every chunk's source rows of kc values
   and destination rows of jc must fit their buffer).  The planner
   (block_chunks) mirrors this.
   Source rows of at most DMLS_BLOCK_L2_RUN bytes are taken whole, as many
   as fit, except in a tile's chunks (tile not DMLS_CHUNK_BLOCK) whose
   source rows are longer than DMLS_TILE_L2_WHOLE_ROW bytes and shorter than
   its destination rows:
   those take destination runs of DMLS_BLOCK_L2_RUN bytes, and source runs
   of as many lines as fit.  Whole, a 2428 x 4915 uint8 transpose's source
   rows of 607 bytes left destination runs of 448, each of whose first and
   last lines took ordinary stores (a read for ownership each) among the
   streamed ones.  In one process, the two alternating (2 threads, 8
   rounds), 12 unnamed tile plans so chunked (2-D uint8, int16 and float16
   transposes and a 5-D float16 scatter, 8.6-22 MB) ran 1.09x faster by
   geometric mean (0.97-1.25x), and 10 2-D uint8 and uint16 transposes of
   8.8-54 MB 1.11x (1.02-1.32x); two builds alternating, a fresh 12 one-
   and two-byte tile plans of 8-20 MB 1.06x (0.97-1.21x, uint8 1.07-1.21x)
   and 14 wider or larger ones 1.01x.  Block plans so chunked measured
   0.98x (10, 0.85-1.04x), and those that copy their rows to the source
   buffer (DMLS_L2_SOURCE) keep whole source rows; those through both
   buffers read theirs in place (dmls_block_in_place_chunks, below). */
#define DMLS_BLOCK_L2_RUN 1024
#define DMLS_TILE_L2_WHOLE_ROW 256
/* What a chunk is cut for (dmls_block_chunks' tile): a block's, a tile's,
   or a tile's whose source rows are read where they are rather than copied
   to the source buffer (rows far apart: see tile.c). */
enum { DMLS_CHUNK_BLOCK = 0, DMLS_CHUNK_TILE = 1, DMLS_CHUNK_IN_PLACE = 2 };
/* Such a tile's chunks of DMLS_BLOCK_L2_RUN bytes of j (a whole run) take
   only this many values of k: one line of each source row, and at least
   16 values (two lines of 8-byte ones).  With as many lines of k as the
   destination buffer held (3 to 38: 192 one-byte values, 288 four-byte
   ones), a chunk's source lines and that buffer filled most of a 512 KiB
   L2 between them, and its transpose, from cache, ran at two thirds of its
   speed alone (the same transpose run twice over each chunk cost 0.4 of
   the whole copy on one thread, a 10120 x 5450 uint8 gather).  In one
   process on the same buffers, the chunk sizes alternating (2 threads, 5
   rounds), 2-D transposes of 20-70 MB so planned ran 1.22x faster by
   geometric mean with one line (6 uint8 ones, 1.14-1.33x), 1.27x (7 int16
   and float16, 1.07-1.46x), 1.41x (6 uint32 and float32, 1.30-1.52x);
   float64 ones 1.21x with 16 values (9, 1.09-1.37x), 1.09x with one line; a
   fresh 26 of every width so chunked 1.19x (0.84-1.42x, 24 faster).  32
   bytes of one-byte values ran 0.84x, and two lines of one- and two-byte
   values 1.07x and 1.24x.  Source rows copied to the buffer (closer
   together, or a multiple of 1 KiB apart) ran 0.92x with one line and keep
   their chunks. */
/* Source rows that all lie a multiple of 128 bytes apart (the planner's
   PHASE_BYTES) take `lines` lines of k rather than one (its l2_lines: 2 on a
   machine with a large L3, where it was measured, else 1).  One line from
   each of a chunk's rows then falls at the same place within every 256
   bytes of memory, and a core asking for lines so placed got them at well
   under half the rate of lines spread over those places.  On an Intel Xeon
   (one thread, one line from each of 512 rows at a time, the next chunk's
   rows asked for ahead as these kernels do): rows 42-46 x 256 bytes apart
   4.5-4.7 GB/s, 6 and 12 KiB apart 3.6-3.7, 91 x 128 bytes apart 6.4, rows
   at other multiples of 16 or 64 bytes 9.4-10.9; two lines from each row
   6.8-8.5, 10.4 and 10.0-12.0; four 11.8-13.4.  In one process on the same buffers,
   the chunks alternating (2 threads, 5 rounds), 24 unnamed 5-D and 6-D
   permutations of 19-68 MB through both buffers with such rows ran 1.17x
   faster by geometric mean with two lines (0.97-1.57x; four: 1.15x, one at
   0.76x), 16 tiles read in place 1.07x (0.92-1.46x).  Two builds side by
   side (compare_builds, 2 threads, two passes of 5 repeats): a fresh 24 of
   one- to four-byte values (both kinds, 8-67 MB) 1.11x (0.90-1.43x, 20
   faster), 16 copies that keep one line 0.995x. */
/* (lines other than 2 take one line) */
static inline int64_t dmls_in_place_chunk_k(int64_t w, int64_t lines) {
    const int64_t k = 64 * (lines == 2 ? 2 : 1) / w;
    return k > 16 ? k : 16;
}
static inline void dmls_block_chunks(int64_t w, int64_t jn, int64_t kn, int tile, int64_t lines,
                                     int64_t *jc, int64_t *kc) {
    const int64_t room = DMLS_BLOCK_L2_BYTES - DMLS_BLOCK_TABLE, e = 64 / w;
    int64_t j = jn, k = kn;
    *jc = *kc = 0;
    if (jn < 1 || kn < 1) return;
    if (jn <= DMLS_BLOCK_L2_ROWS && jn * dmls_block_pitch(kn * w) <= room &&
            kn * dmls_block_pitch(jn * w) <= room) {
        *jc = jn;
        *kc = kn;
        return;
    }
    if (kn * w <= DMLS_BLOCK_L2_RUN && !(tile && kn * w > DMLS_TILE_L2_WHOLE_ROW && jn > kn)) {
        /* short source rows whole; as many of them as fit */
        j = room / dmls_block_pitch(kn * w);
        if (j > (room / kn / 64 - 1) * e) j = (room / kn / 64 - 1) * e;
        j -= j % e;
        if (j > DMLS_BLOCK_L2_ROWS) j = DMLS_BLOCK_L2_ROWS;
        if (j > jn) j = jn;
    } else {
        if (jn * w > DMLS_BLOCK_L2_RUN) j = DMLS_BLOCK_L2_RUN / w;
        k = (room / j / 64 - 1) * e;            /* j * pitch(k * w) <= room */
        if (k > room / dmls_block_pitch(j * w)) k = room / dmls_block_pitch(j * w);
        if (tile == DMLS_CHUNK_IN_PLACE && jn * w >= DMLS_BLOCK_L2_RUN && k > dmls_in_place_chunk_k(w, lines))
            k = dmls_in_place_chunk_k(w, lines);
        k -= k % e;
        if (k > kn) k = kn;
    }
    if (j < 16 / w || k < 16 / w) return;
    *jc = j;
    *kc = k;
}
/* A block through both buffers (DMLS_L2_BOTH) reads each chunk's source
   rows where they are, as a tile's chunks read in place do (tile.c), and
   takes the chunks of such a tile, of one line of k (dmls_in_place_chunk_k;
   two for rows a multiple of 128 bytes apart) whatever the length of j: the rows,
   asked for into L2 while the chunk before went out (dmls_rows_from_l2),
   are transposed from there into the destination buffer.  They had been copied to the source buffer first,
   a whole row of the block or as many lines as fit at a time.  In one
   process on the same buffers, alternating in a shuffled order (2
   threads, 4 rounds, the old code against itself as a control: 1.01x and
   1.00x), 20 unnamed 5-D and 6-D permutations of 8-70 MB so planned ran
   1.22x faster by geometric mean (0.86-1.42x), a fresh 20 1.15x
   (0.87-1.38x, 17 faster).  Read in place with the chunks as they were,
   1.13x on the first 20 (0.73x where j was under a run and a chunk held
   288 values of k); in place only where J's rows are far apart (as a
   tile's), 1.14x on the fresh 20.  Later, against the old code in a third
   fresh 20, 1.22x; with chunks of j of 512 bytes, of up to 2 KiB, or of
   two lines of k, 0.91x, 1.00x and 0.98x of these chunks. */
static inline void dmls_block_in_place_chunks(int64_t w, int64_t jn, int64_t kn, int64_t lines, int64_t *jc,
                                              int64_t *kc) {
    dmls_block_chunks(w, jn, kn, DMLS_CHUNK_IN_PLACE, lines, jc, kc);
    if (*kc > dmls_in_place_chunk_k(w, lines)) *kc = dmls_in_place_chunk_k(w, lines);
}
/* MODE_TILE: a copy of at least this many bytes (one side) comes from
   memory, not cache, whether it streams or not: see tile.c for what its
   transposes do differently, and the planner (TRANSPOSE_FROM_MEMORY) for its
   segments. */
#define DMLS_CACHED_TRANSPOSE_BYTES ((int64_t)8 << 20)
/* ... and for 4- and 8-byte values this many (tile.c, transpose_flags):
   their tiles read 64 source rows of 128 or 256 bytes, and from cache go on
   reading them in place (or staged 8 rows at a time into rows 4 KiB apart)
   up to the size where a transpose streams anyway. */
#define DMLS_CACHED_WIDE_TRANSPOSE_BYTES ((int64_t)16 << 20)
/* MODE_TILE: a 1- or 2-byte transpose of at least this many bytes that
   neither streams nor goes through L2, into destination rows a multiple of
   2 KiB apart, takes tiles of DMLS_TALL_TILE_ROWS (isa.h) source rows (the
   planner's TALL_TILE_MIN and TALL_TILE_SEGMENT; see transpose-sse2.c). */
#define DMLS_TALL_TILE_BYTES ((int64_t)4 << 20)
/* MODE_TILE with at most this many source-fast channels copies each channel
   as a strided run (or de-interleaves 2-4 of them), unless there are more
   than 4 that a SIMD kernel takes (execute.c, few_channels). */
#define DMLS_SMALL_TILE 8
/* Destination rows back to back of up to 512 bytes, not a whole number of
   micro-blocks: through a padded tile (dmls_isa.contig_ragged) when at least
   this many rows are copied in one go (the planner's RAGGED_MIN_ROWS). */
#define DMLS_RAGGED_MIN_ROWS 256
/* MODE_MEMCPY: a row repeated back to back at least this many times (a
   broadcast along H) is written a run at a time as a periodic pattern
   (execute.c, repeat_row); the planner does not batch such rows (its
   REPEAT_MIN_ROWS). */
#define DMLS_REPEAT_MIN_ROWS 4
/* Staged 4-bit copies: elements per staging block (one scratch region). */
#define DMLS_STAGE_ELEMS 65536

/* A group of dimensions of a block, fastest first: sizes and the strides
   (bytes) on the side where the group is not contiguous. */
typedef struct {
    int ndim;
    int64_t size[DMLS_MAX_DIMS];
    int64_t stride[DMLS_MAX_DIMS];
    int64_t elems;
} dmls_group;

typedef struct {
    int mode;               /* DMLS_MODE_* */
    int width;              /* bytes per element (1, 2, 4, 8); 1 on the nibble path */
    int src_nibble;         /* nibble path: the source holds packed nibbles */
    int dst_nibble;
    int sign_extend;        /* nibble path: INT4 -> int8 */
    int stream;             /* write with streaming stores */
    /* Outer dimensions, slowest first; strides in bytes (in nibbles on a
       nibble side). */
    int outer_ndim;
    int64_t outer_size[DMLS_MAX_DIMS];
    int64_t outer_src_stride[DMLS_MAX_DIMS];
    int64_t outer_dst_stride[DMLS_MAX_DIMS];
    int64_t outer_count;    /* product of outer_size */
    /* The innermost dimension. */
    int64_t inner_size;
    int64_t inner_src_stride;
    int64_t inner_dst_stride;
    /* MODE_TILE, MODE_INTERLEAVE, MODE_BLOCK: the other dimension of the
       transpose (the source-fast one; the channels of an interleave). */
    int64_t tile_size;
    int64_t tile_src_stride;
    int64_t tile_dst_stride;
    /* MODE_TILE with tile_pieces > 1: each task copies one piece of
       tile_piece values of k (the last one the rest), so that a transpose
       whose k cannot be cut into equal pieces (a prime count) still gives
       threads work to share.  0 or 1: k whole. */
    int64_t tile_piece;
    int64_t tile_pieces;
    /* Work: tasks = outer_count x segments of segment_len inner elements
       (x tile_pieces). */
    int64_t segment_len;
    int64_t segments;
    int64_t tasks;
    int64_t dst_bytes;      /* bytes written (threading threshold) */
    /* MODE_BLOCK: J is contiguous in the destination (strides: source), K
       in the source (strides: destination). */
    dmls_group jgroup;
    dmls_group kgroup;
    int block_stage_src;    /* stage source lines / destination rows in L1 */
    int block_stage_dst;
    int block_lines;        /* source lines of k per tile row (1 or 4) */
    int block_whole;        /* each block into a buffer, streamed out whole (dmls_block) */
    int block_next;         /* in place or whole: ask for the next block's lines (dmls_block) */
    int block_dst_ahead;    /* in place or whole: ask for the destination lines of the tiles ahead (dmls_block) */
    int block_dst_pieces;   /* in place, rows through the tile's buffer: ask for those lines too (block.c) */
    int block_far;          /* long bands of four- and eight-byte values ask further ahead (block.c's block_ahead) */
    int64_t block_join;     /* whole: at most this many blocks a buffer, along the innermost outer
                               dimension where it carries on J's rows (dmls_block_joined); 0: one */
    int l2;                 /* DMLS_L2_*: copy through L2 buffers (see above) */
    int l2_lines;           /* through L2 with source rows read in place: lines of k a chunk takes of
                               each row (dmls_in_place_chunk_k: 1 or 2) */
    /* MODE_TILE of 1- and 2-byte values: copies of fewer bytes than this
       that do not stream run from cache (tile.c, transpose_flags); 0:
       DMLS_CACHED_TRANSPOSE_BYTES.  The planner's tile_cached_bytes. */
    int64_t narrow_cached_bytes;
    /* MODE_TILE that streams: a task whose destination is one run (rows
       back to back) and whose rows would take the cached tile is
       transposed into a buffer and streamed out (tile.c; a fresh output,
       written without streaming stores, takes the cached tile). */
    int stage_tasks;
} dmls_plan;

/* One copy: a plan, a staged 4-bit copy (outer blocks of main, each
   moved through a byte stage by the byte plan sub), or a copy in slabs
   through a buffer (outer slabs of main, sub and sub2).  A plain copy may be
   cut in two along one dimension (the planner's split_for_block): main
   copies the first part, rest the others from rest_src and rest_dst
   bytes on. */
enum { DMLS_COPY_PLAIN = 0, DMLS_COPY_STAGED = 1, DMLS_COPY_STAGED_BOTH = 2, DMLS_COPY_SLABS = 3 };

typedef struct {
    int kind;               /* DMLS_COPY_* */
    int whole_bytes;        /* STAGED_BOTH: no two blocks share a destination byte */
    int has_rest;           /* PLAIN: rest runs after main */
    int64_t rest_src;
    int64_t rest_dst;
    dmls_plan main;
    dmls_plan rest;
    dmls_plan sub;
    /* STAGED_BOTH: a block's runs on each side: inner_size nibbles per run,
       outer dims with stage strides (outer_src_stride, bytes) and buffer
       strides (outer_dst_stride, nibbles). */
    dmls_plan src_runs;
    dmls_plan dst_runs;
    /* SLABS: each slab (an outer index of main) copied by sub from the
       source into the thread's buffer (DMLS_SCRATCH_SLAB), then by sub2
       from the buffer to the destination. */
    dmls_plan sub2;
} dmls_copy;

#endif
