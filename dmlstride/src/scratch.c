#include "scratch.h"

#include <stdlib.h>

#if !defined(_WIN32)
#include <pthread.h>

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok = 0;

static void make_key(void) { key_ok = pthread_key_create(&key, free) == 0; }

char *dmls_scratch(void) {
    void *mem;
    pthread_once(&key_once, make_key);
    if (!key_ok) return NULL;
    mem = pthread_getspecific(key);
    if (mem == NULL) {
        if (posix_memalign(&mem, 64, (size_t)DMLS_SCRATCH_BYTES) != 0) return NULL;
        if (pthread_setspecific(key, mem) != 0) {
            free(mem);
            return NULL;
        }
    }
    return (char *)mem;
}
#else
/* Without pthread keys the arena of an exiting thread is not freed. */
static __declspec(thread) char *mem;

char *dmls_scratch(void) {
    if (mem == NULL) mem = (char *)malloc((size_t)DMLS_SCRATCH_BYTES);
    return mem;
}
#endif
