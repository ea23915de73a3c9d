/* A preloaded stand-in for posix_memalign (LD_PRELOAD) for
   tests/test_no_memory.py: while armed, every request of at least 512 KiB
   (the kernels' per-thread staging arena; nothing else in the process asks
   posix_memalign for that much) fails with ENOMEM, either on every thread or
   only on threads other than the main one (the pool's workers).  Everything
   else goes to the C library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NO_SCRATCH_FROM ((size_t)512 << 10)

enum { OFF = 0, EVERY_THREAD = 1, WORKERS_ONLY = 2 };

static int mode = OFF;
static int refused = 0;

/* Arm (EVERY_THREAD or WORKERS_ONLY) or disarm (OFF). */
void no_scratch_arm(int m) { __atomic_store_n(&mode, m, __ATOMIC_SEQ_CST); }

/* Requests refused since the process started. */
int no_scratch_refused(void) { return __atomic_load_n(&refused, __ATOMIC_SEQ_CST); }

int posix_memalign(void **out, size_t alignment, size_t size) {
    typedef int (*memalign_fn)(void **, size_t, size_t);
    static memalign_fn real = NULL;
    memalign_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    int m = __atomic_load_n(&mode, __ATOMIC_SEQ_CST);
    if (m != OFF && size >= NO_SCRATCH_FROM &&
        (m == EVERY_THREAD || (pid_t)syscall(SYS_gettid) != getpid())) {
        __atomic_add_fetch(&refused, 1, __ATOMIC_SEQ_CST);
        return ENOMEM;
    }
    if (fn == NULL) {
        fn = (memalign_fn)dlsym(RTLD_NEXT, "posix_memalign");
        if (fn == NULL) return ENOMEM;
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn(out, alignment, size);
}
