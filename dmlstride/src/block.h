/* The blocked transpose of multi-dimensional groups (DMLS_MODE_BLOCK). */
#ifndef DMLS_BLOCK_H
#define DMLS_BLOCK_H

#include "plan.h"

/* Fill the offset tables of p's groups at the start of scratch
   (DMLS_SCRATCH_REGION bytes): once for a run of p's tasks, which all use
   the same tables. */
void dmls_block_tables(const dmls_plan *p, char *scratch);

/* Values [j0, j1) of J of one J x K block of p at the given outer offsets
   (s, d), all of K.  s_next, d_next: the source and destination of the
   block the caller copies next (its outer offsets; all of its J), or NULL:
   a block through L2 asks for its first chunk's rows while its own last
   chunk goes out, a block in place (p->block_next) for the lines of its
   first tiles while its own last tiles go, and a small whole block for all
   its source lines while its own runs go out.  scratch: the region
   dmls_block_tables filled for p (offset tables, then tiles). */
void dmls_block(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, const char *s_next,
                char *d_next, char *scratch);

/* m whole blocks of p (p->block_whole) at outer offsets step source bytes
   apart along the innermost outer dimension, whose destination offsets
   carry on J's rows (each block's rows run on into the next one's): the m
   blocks are transposed into one buffer and their rows written out as
   runs of m rows.  s_next: the next block after them, as for dmls_block.
   Returns 0, having touched nothing, where the buffers cannot take them. */
int dmls_block_joined(const dmls_plan *p, const char *s, char *d, int64_t m, int64_t step, const char *s_next,
                      char *scratch);

#endif
