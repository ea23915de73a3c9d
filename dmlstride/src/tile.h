/* The transposing tile path: a 2-D transpose of (tile dim k, innermost j),
   by the SIMD variant in use where it applies, by the scalar staging tile
   for everything it leaves. */
#ifndef DMLS_TILE_H
#define DMLS_TILE_H

#include <stdint.h>

#include "plan.h"

/* The scalar staging tile for width W: see element-template.h. */
void dmls_tile(int W, const char *s, char *d, int64_t kn, int64_t kss, int64_t kds,
               int64_t j0, int64_t j1, int64_t iss, int64_t ids, char *scratch);

/* A kn x jn transpose with plain stores: source k contiguous (rows j at
   iss), destination j contiguous (rows k at kds); the SIMD variant where it
   applies, the scalar tile for the rest.  scratch: DMLS_SCRATCH_REGION
   bytes less the block tables (the kernels take at most 24 KiB).  flags:
   DMLS_TRANSPOSE_* (isa.h), where the operands are expected. */
void dmls_transpose_plain(int w, const char *s, int64_t iss, char *d, int64_t kds, int64_t kn, int64_t jn,
                          int flags, char *scratch);

/* A chunk's source rows into an L2 buffer (the copies through L2, plan.h):
   row j, nbytes from s + offs[j] (s + j * stride when offs is NULL), to
   buf + j * pitch, each row's lines asked for into L2 two rows ahead of its
   copy. */
void dmls_rows_to_l2(char *buf, int64_t pitch, const char *s, const int64_t *offs, int64_t stride,
                     int64_t rows, int64_t nbytes);

/* Rows in memory: row j is nbytes from s + offs[j] (s + j * stride when
   offs is NULL), j < rows. */
typedef struct {
    const char *s;
    const int64_t *offs;
    int64_t stride, rows, nbytes;
} dmls_rows;

/* The source rows of the chunk after chunk (j0, k0) of a jn x kn copy of
   w-byte values cut into chunks of jc x kc (k within j): rows of src (row
   j's values from k = 0 on), else, after the last chunk, the first chunk
   of next_task's rows (the next task's; NULL for none).  No rows when
   there is none. */
dmls_rows dmls_next_chunk(const dmls_rows *src, int64_t w, int64_t jn, int64_t kn, int64_t jc, int64_t kc,
                          int64_t j0, int64_t k0, const dmls_rows *next_task);

/* A chunk's transposed rows out of an L2 buffer: row k, nbytes from
   buf + k * pitch to d + offs[k] (d + k * stride when offs is NULL),
   k < rows, with streaming stores when stream.  Meanwhile the lines of
   next (the next chunk's source rows; NULL or no rows for none) are asked
   for into L2, spread evenly over the rows written, so that the next
   chunk's copy into L2 finds them there. */
void dmls_rows_from_l2(char *d, const int64_t *offs, int64_t stride, const char *buf, int64_t pitch,
                       int64_t rows, int64_t nbytes, int stream, const dmls_rows *next);

/* Inner elements j0..j1 of p's (tile, inner) pair, s and d at the row's
   outer offsets.  next: the source rows of the task the caller runs next
   (its inner elements, from k = 0; nbytes unused), or NULL: a transpose
   through L2 asks for its first chunk's rows while its own last chunk
   goes out.  scratch: DMLS_SCRATCH_REGION bytes. */
void dmls_transpose(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, const dmls_rows *next,
                    char *scratch);

/* Of n elements of w bytes from d: set *head to those before the first
   64-byte line boundary and return how many fill whole lines after it (0
   when d is not a multiple of w or no whole line fits). */
static inline int64_t dmls_whole_lines(const char *d, int64_t w, int64_t n, int64_t *head) {
    int64_t e = 64 / w;
    *head = 0;
    if ((uintptr_t)d % (uintptr_t)w != 0) return 0;
    *head = (int64_t)((64 - (uintptr_t)d % 64) % 64) / w;
    if (*head >= n) return 0;
    return (n - *head) / e * e;
}

#endif
