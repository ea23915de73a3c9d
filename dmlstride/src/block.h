/* The blocked transpose of multi-dimensional groups (DMLS_MODE_BLOCK). */
#ifndef DMLS_BLOCK_H
#define DMLS_BLOCK_H

#include "plan.h"

/* One J x K block of p at the given outer offsets (s, d).  scratch:
   DMLS_SCRATCH_REGION bytes (offset tables and tiles). */
void dmls_block(const dmls_plan *p, const char *s, char *d, char *scratch);

#endif
