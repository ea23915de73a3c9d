/* Running a plan: the task loop, the row dispatcher, staged 4-bit copies and
   the split of work over the thread pool. */
#ifndef DMLS_EXECUTE_H
#define DMLS_EXECUTE_H

#include <stdint.h>

#include "plan.h"

/* Work below this many destination bytes runs on the calling thread only. */
#define DMLS_PARALLEL_MIN_BYTES ((int64_t)1 << 18)
/* Contiguous runs of at least this many bytes use streaming stores (in
   plans that stream). */
#define DMLS_STREAM_MIN_RUN ((int64_t)1 << 9)

/* Short contiguous rows not back to back on a side (MODE_MEMCPY, rows of
   16-512 bytes) ask for the lines of the rows a few tasks on first, in
   copies that write at least this many bytes (DMLS_ASK_ROWS_MIN_BYTES;
   smaller ones come from the caches, where the asking only costs: see
   dmls_run_tasks).  A variable so that the tests can reach the asking
   loop with small copies (the bridge's _set_ask_rows_min). */
#define DMLS_ASK_ROWS_MIN_BYTES ((int64_t)11 << 19)  /* 5.5 MiB */
extern int64_t dmls_ask_rows_min_bytes;

/* Copy c from s to d (both at the tensor's start) on up to nthreads
   threads.  scratch: this thread's arena (dmls_scratch()).  The caller has
   checked every bound; nothing here fails. */
void dmls_run(const dmls_copy *c, const char *s, char *d, int nthreads, char *scratch);

/* Tasks t0..t1 of p (task = outer index * segments + segment).  scratch:
   DMLS_SCRATCH_REGION bytes. */
void dmls_run_tasks(const dmls_plan *p, const char *s, char *d, int64_t t0, int64_t t1, char *scratch);

#endif
