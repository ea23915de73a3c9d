#include "alloc.h"

#include <numpy/ndarraytypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "engine-limits.h"

/* A block is one malloc'd region; its data starts at an aligned address
   with a header just before it: the region's start (what free() gets back)
   and the data's capacity. */
#define DMLS_HEADER 16
#define DMLS_ALIGN_SMALL ((size_t)64)    /* a cache line */
#define DMLS_ALIGN_LARGE ((size_t)4096)  /* a page, for blocks the cache keeps */
#define DMLS_CACHE_SLOTS 8

size_t dmls_cache_limit = DMLS_OUTPUT_CACHE_DEFAULT;
size_t dmls_cache_bytes = 0;
int dmls_cache_hit = 0;
static char *dmls_cache_block[DMLS_CACHE_SLOTS];  /* data addresses */

static size_t dmls_block_cap(char *data) {
    size_t c;
    memcpy(&c, data - sizeof c, sizeof c);
    return c;
}
static void *dmls_block_base(char *data) {
    void *b;
    memcpy(&b, data - DMLS_HEADER, sizeof b);
    return b;
}
static void dmls_block_release(char *data) { free(dmls_block_base(data)); }

static void *dmls_block_new(size_t size, int zero) {
    void *base;
    char *data;
    size_t cap = size ? size : 1;
    size_t align = cap >= DMLS_CACHE_MIN ? DMLS_ALIGN_LARGE : DMLS_ALIGN_SMALL;
    size_t pad = DMLS_HEADER + align - 1;
    if (cap > (size_t)-1 - pad) return NULL;
    base = zero ? calloc(1, cap + pad) : malloc(cap + pad);
    if (base == NULL) return NULL;
    data = (char *)(((uintptr_t)base + DMLS_HEADER + align - 1) & ~(uintptr_t)(align - 1));
    memcpy(data - DMLS_HEADER, &base, sizeof base);
    memcpy(data - sizeof cap, &cap, sizeof cap);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (cap >= ((size_t)4 << 20)) {  /* as numpy does for its own large arrays */
        uintptr_t lo = ((uintptr_t)data + 4095) & ~(uintptr_t)4095;
        uintptr_t hi = ((uintptr_t)data + cap) & ~(uintptr_t)4095;
        if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    return data;
}

static void *dmls_out_malloc(void *ctx, size_t size) {
    (void)ctx;
    dmls_cache_hit = 0;
#ifndef Py_GIL_DISABLED
    if (size >= DMLS_CACHE_MIN) {
        /* best fit among blocks no more than a quarter larger */
        int i, best = -1;
        for (i = 0; i < DMLS_CACHE_SLOTS; i++) {
            char *b = dmls_cache_block[i];
            size_t c;
            if (b == NULL) continue;
            c = dmls_block_cap(b);
            if (c >= size && c - size <= size / 4 &&
                    (best < 0 || c < dmls_block_cap(dmls_cache_block[best])))
                best = i;
        }
        if (best >= 0) {
            char *b = dmls_cache_block[best];
            dmls_cache_block[best] = NULL;
            dmls_cache_bytes -= dmls_block_cap(b);
            dmls_cache_hit = 1;
            return b;
        }
    }
#endif
    return dmls_block_new(size, 0);
}

static void *dmls_out_calloc(void *ctx, size_t n, size_t size) {
    (void)ctx;
    if (size && n > (size_t)-1 / size) return NULL;
    return dmls_block_new(n * size, 1);
}

static void dmls_out_free(void *ctx, void *ptr, size_t size) {
    char *data = ptr;
    size_t cap;
    (void)ctx; (void)size;
    if (ptr == NULL) return;
    cap = dmls_block_cap(data);
#ifndef Py_GIL_DISABLED
    if (cap >= DMLS_CACHE_MIN && cap <= dmls_cache_limit - dmls_cache_bytes) {
        int i;
        for (i = 0; i < DMLS_CACHE_SLOTS; i++) {
            if (dmls_cache_block[i] == NULL) {
                dmls_cache_block[i] = data;
                dmls_cache_bytes += cap;
                return;
            }
        }
    }
#endif
    dmls_block_release(data);
}

static void *dmls_out_realloc(void *ctx, void *ptr, size_t size) {
    void *fresh;
    size_t cap;
    if (ptr == NULL) return dmls_out_malloc(ctx, size);
    cap = dmls_block_cap(ptr);
    if (size <= cap && size >= cap / 2) return ptr;
    fresh = dmls_block_new(size, 0);
    if (fresh == NULL) return NULL;
    memcpy(fresh, ptr, size < cap ? size : cap);
    dmls_out_free(ctx, ptr, cap);
    return fresh;
}

/* Free every cached block; keep at most ``limit`` bytes from now on.
   Returns the previous limit. */
size_t dmls_cache_set_limit(size_t limit) {
    size_t old = dmls_cache_limit;
    int i;
    for (i = 0; i < DMLS_CACHE_SLOTS; i++) {
        if (dmls_cache_block[i] != NULL) {
            dmls_block_release(dmls_cache_block[i]);
            dmls_cache_block[i] = NULL;
        }
    }
    dmls_cache_bytes = 0;
    dmls_cache_limit = limit;
    return old;
}

static PyDataMem_Handler dmls_out_handler = {
    "dmlstride_output_cache", 1,
    {NULL, dmls_out_malloc, dmls_out_calloc, dmls_out_realloc, dmls_out_free},
};
PyObject *dmls_out_handler_capsule(void) {
    return PyCapsule_New(&dmls_out_handler, "mem_handler", NULL);
}
