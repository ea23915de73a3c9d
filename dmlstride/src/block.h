/* The blocked transpose of multi-dimensional groups (DMLS_MODE_BLOCK). */
#ifndef DMLS_BLOCK_H
#define DMLS_BLOCK_H

#include "plan.h"

/* Fill the offset tables of p's groups at the start of scratch
   (DMLS_SCRATCH_REGION bytes): once for a run of p's tasks, which all use
   the same tables. */
void dmls_block_tables(const dmls_plan *p, char *scratch);

/* Values [j0, j1) of J of one J x K block of p at the given outer offsets
   (s, d), all of K.  scratch: the region dmls_block_tables filled for p
   (offset tables, then tiles). */
void dmls_block(const dmls_plan *p, const char *s, char *d, int64_t j0, int64_t j1, char *scratch);

#endif
