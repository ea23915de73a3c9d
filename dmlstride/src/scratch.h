/* Per-thread scratch memory for the kernels' staging buffers.

   No kernel keeps a large buffer on the C stack (a thread started with a
   small stack must not overflow): each thread gets one arena from the heap
   on first use, freed when the thread exits.  The arena is cut into regions
   so that nested users do not overlap: the two 4-bit stages, the
   kernels' own tiles and tables (at most DMLS_SCRATCH_REGION bytes), the
   L2 buffers of a staged block transpose, the joined source rows of a
   run of tiny tiles, and a slab of a copy in slabs. */
#ifndef DMLS_SCRATCH_H
#define DMLS_SCRATCH_H

#include <stdint.h>

#define DMLS_SCRATCH_REGION ((int64_t)1 << 16)
#define DMLS_SCRATCH_STAGE 0
#define DMLS_SCRATCH_STAGE2 DMLS_SCRATCH_REGION
#define DMLS_SCRATCH_KERNEL (2 * DMLS_SCRATCH_REGION)
/* The two L2 buffers of a staged block (DMLS_BLOCK_L2_*), after the
   regions above, each ending with a table of row offsets. */
#define DMLS_SCRATCH_BLOCK_BYTES (5 * DMLS_SCRATCH_REGION)   /* DMLS_BLOCK_L2_BYTES */
#define DMLS_SCRATCH_BLOCK_SRC (3 * DMLS_SCRATCH_REGION)
#define DMLS_SCRATCH_BLOCK_DST (DMLS_SCRATCH_BLOCK_SRC + DMLS_SCRATCH_BLOCK_BYTES)
/* The source rows of a run of tiny tiles joined into one (execute.c). */
#define DMLS_SCRATCH_JOIN (DMLS_SCRATCH_BLOCK_DST + DMLS_SCRATCH_BLOCK_BYTES)
/* A slab of a copy in slabs (execute.c), whose steps may use every region
   above. */
#define DMLS_SLAB_BYTES ((int64_t)1 << 18)
#define DMLS_SCRATCH_SLAB (DMLS_SCRATCH_JOIN + DMLS_SCRATCH_REGION)
#define DMLS_SCRATCH_BYTES (DMLS_SCRATCH_SLAB + DMLS_SLAB_BYTES)

/* This thread's arena (DMLS_SCRATCH_BYTES, 64-byte aligned), allocated on
   first use; NULL when memory runs out. */
char *dmls_scratch(void);

#endif
