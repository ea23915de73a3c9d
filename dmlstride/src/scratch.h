/* Per-thread scratch memory for the kernels' staging buffers.

   No kernel keeps a large buffer on the C stack (a thread started with a
   small stack must not overflow): each thread gets one arena from the heap
   on first use, freed when the thread exits.  The arena is cut into regions
   so that nested users do not overlap: the two 4-bit stages and the
   kernels' own tiles and tables (at most DMLS_SCRATCH_REGION bytes). */
#ifndef DMLS_SCRATCH_H
#define DMLS_SCRATCH_H

#include <stdint.h>

#define DMLS_SCRATCH_REGION ((int64_t)1 << 16)
#define DMLS_SCRATCH_STAGE 0
#define DMLS_SCRATCH_STAGE2 DMLS_SCRATCH_REGION
#define DMLS_SCRATCH_KERNEL (2 * DMLS_SCRATCH_REGION)
#define DMLS_SCRATCH_BYTES (3 * DMLS_SCRATCH_REGION)

/* This thread's arena (DMLS_SCRATCH_BYTES, 64-byte aligned), allocated on
   first use; NULL when memory runs out. */
char *dmls_scratch(void);

#endif
