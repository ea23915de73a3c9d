# What the engine shares with the conversion bridge (_convert.pyx cimports
# these): its thread pool and its per-thread scratch memory, so the package
# runs one pool of workers whatever it does.

from libc.stdint cimport int64_t

ctypedef void (*chunk_fn)(void* ctx, int64_t chunk) noexcept nogil

# Run fn(ctx, c) for every c < nchunks on up to nthreads threads (the caller
# included); returns when all have run.
cdef void run_chunks(chunk_fn fn, void* ctx, int64_t nchunks, int nthreads) noexcept nogil
# This thread's scratch arena (see src/scratch.h), or NULL when memory runs out.
cdef char* thread_scratch() noexcept nogil
