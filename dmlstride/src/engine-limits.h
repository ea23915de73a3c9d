/* The engine's limits, stated once for the C side.  _engine exposes them as
   constants and a test checks that they agree with the Python package. */
#ifndef DMLS_LIMITS_H
#define DMLS_LIMITS_H

/* Buffer offsets and strides are bound to this alignment (bytes). */
#define DMLS_ALIGNMENT 16
/* A byte offset at or past this lies beyond any buffer a process can map. */
#define DMLS_OFFSET_LIMIT ((long long)1 << 62)
/* Dimensions of a tensor. */
#define DMLS_MAX_DIMS 8
/* Default byte limit of the gather output cache. */
#define DMLS_OUTPUT_CACHE_DEFAULT ((size_t)256 << 20)
/* Kernel threads: the calling thread plus at most DMLS_MAX_WORKERS workers. */
#define DMLS_MAX_THREADS 1024
#define DMLS_MAX_WORKERS (DMLS_MAX_THREADS - 1)

#endif
