/* The gather output allocator: a numpy memory handler with a small cache of
   freed output blocks.

   Freshly mapped memory is zeroed by the kernel on first touch, one page
   fault at a time: for a large gather that costs about as much as the copy
   itself.  Arrays that gather() allocates carry this numpy memory handler;
   when such an array is freed, its block (if at least DMLS_CACHE_MIN bytes)
   is kept, up to a byte limit, and the next output of a similar size reuses
   it, already mapped.  Every call comes from numpy with the GIL held (array
   creation, resize and deallocation), so the cache needs no lock; a
   free-threaded build does not cache.  A block's data starts on a page
   boundary if it is at least DMLS_CACHE_MIN bytes, else on a 64-byte cache
   line (malloc's own large blocks start 16 bytes past a page, so every
   vector store would split a cache line); a header just before the data
   holds the start of the malloc'd region and the capacity. */
#ifndef DMLS_ALLOC_H
#define DMLS_ALLOC_H

#include <Python.h>
#include <stddef.h>

#define DMLS_CACHE_MIN ((size_t)1 << 20)

extern size_t dmls_cache_limit;  /* bytes the cache may hold */
extern size_t dmls_cache_bytes;  /* bytes it holds */
extern int dmls_cache_hit;       /* the last allocation reused a cached block */

/* A new reference to a "mem_handler" capsule for PyDataMem_SetHandler. */
PyObject *dmls_out_handler_capsule(void);

/* Free every cached block; keep at most limit bytes from now on.  Returns
   the previous limit. */
size_t dmls_cache_set_limit(size_t limit);

#endif
