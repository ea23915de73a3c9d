/* A small worker pool that splits a copy into chunks.

   The chunks are cut into lanes, one a thread (the caller's first), each
   claimed from an atomic counter of its own: a thread runs its lane, then
   what is left of the others'.  The caller runs chunks too and then waits
   only for the workers that actually joined, so a worker the OS has not
   scheduled (a busy machine) never delays a copy.
   A call wakes only the helpers it wants (nthreads - 1), one signal each;
   lowering the thread count (dmls_pool_set_threads) lets the surplus workers
   exit.  A thread watches for the other side for up to 50 microseconds
   before it sleeps (a worker for the next job, the caller for the workers
   on its job), so copies called back to back do not pay for waking a
   thread.  One job at a time: a concurrent caller runs its chunks on its own
   thread.  Without pthreads (or with DMLSTRIDE_NO_THREADS) every chunk runs
   on the calling thread. */
#ifndef DMLS_POOL_H
#define DMLS_POOL_H

#include <stdint.h>

#if !defined(_WIN32) && !defined(DMLSTRIDE_NO_THREADS)
#define DMLSTRIDE_HAVE_THREADS 1
#else
#define DMLSTRIDE_HAVE_THREADS 0
#endif

typedef void (*dmls_chunk_fn)(void *ctx, int64_t chunk);

/* Run fn(ctx, c) for every c < nchunks on up to nthreads threads, each
   thread first the chunks of its own lane (a run of about nchunks /
   threads of them, in order). */
void dmls_parallel(dmls_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads);

/* Keep at most nthreads - 1 workers: idle surplus workers exit. */
void dmls_pool_set_threads(int nthreads);

/* Workers currently running (started and not yet exited). */
int dmls_pool_workers(void);

#endif
