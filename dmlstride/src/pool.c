#include "pool.h"

#include "engine-limits.h"
#include "scratch.h"

#if DMLSTRIDE_HAVE_THREADS
#include <pthread.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <emmintrin.h>
#define DMLS_RELAX() _mm_pause()
#else
#define DMLS_RELAX() ((void)0)
#endif

/* How long a thread watches for the other side before it sleeps: a worker
   after its job, for the next one; the caller, for workers still on its
   job.  Waking a sleeping thread costs 10-15 microseconds on a virtual
   machine (the idle CPU has to be woken up first), more than half of a
   1 MB copy; copies called back to back find their workers awake. */
#define DMLS_POOL_WATCH_NS 50000

static struct {
    pthread_mutex_t mu, busy;
    pthread_cond_t wake, idle;
    int started;      /* workers alive */
    int retire;       /* idle workers asked to exit */
    int tickets;      /* helpers still wanted by the open job */
    int inside;       /* helpers working on the open job */
    int atfork;
    int lanes;        /* lanes of the open job: its helpers and the caller */
    dmls_chunk_fn fn;
    void *ctx;
    uint64_t lane[DMLS_MAX_THREADS];   /* each lane's chunks left (take) */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, NULL, NULL, {0}};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Watch *flag (read without the lock) until it is nonzero (want = 1) or
   zero (want = 0), or the clock passes end. */
static void watch(const int *flag, int want, int64_t end) {
    unsigned i;
    for (i = 1;; i++) {
        if ((__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0) == want) return;
        if ((i & 127) == 0 && now_ns() > end) return;
        DMLS_RELAX();
    }
}

/* Lock mu without going to sleep on a lock held for a few instructions
   (falls back to sleeping after a while). */
static void lock_soon(pthread_mutex_t *mu) {
    int i;
    for (i = 0; i < 4096; i++) {
        if (pthread_mutex_trylock(mu) == 0) return;
        DMLS_RELAX();
    }
    pthread_mutex_lock(mu);
}

/* A lane's chunks not yet taken, [front, back): front in the low 32 bits,
   back in the high (dmls_parallel runs more than INT32_MAX chunks on the
   caller alone; the executor asks for at most 8 a thread). */
#define LANE(front, back) ((uint64_t)(front) | (uint64_t)(back) << 32)

/* The next chunk of lane r, from its front (its own thread) or its back (a
   thread whose lane is done): -1 when none is left. */
static int64_t take(int r, int from_back) {
    uint64_t v = __atomic_load_n(&pool.lane[r], __ATOMIC_ACQUIRE), w;
    uint32_t front, back;
    do {
        front = (uint32_t)v;
        back = (uint32_t)(v >> 32);
        if (front >= back) return -1;
        w = from_back ? LANE(front, back - 1) : LANE(front + 1, back);
    } while (!__atomic_compare_exchange_n(&pool.lane[r], &v, w, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return from_back ? (int64_t)back - 1 : (int64_t)front;
}

/* The chunks are cut into lanes of nearly equal runs, the longer first,
   one a thread: the caller takes lane 0, the helpers lanes 1, 2, ... in
   the order they join.  A thread runs its own lane's chunks in order, then
   takes what is left of the others' (from the back of each, away from the
   chunk its owner is on), so a thread that starts late on a busy machine
   never holds the call up.  Chunks that run at the same time lie a lane
   apart, not side by side: side by side, two threads wrote the lines that
   neighbouring chunks share (destination rows off line boundaries, cut
   into segments) at the same moments, and each such line went back and
   forth between the cores (in one process, alternating, 2 threads: 2-D
   transposes of 3.4-10 MB with rows off line boundaries 1.04-2.2x faster,
   float32 1000 x 1000 1.9-2.2x).  And a copy called again gives each
   thread the same part of its destination as the call before, whose lines
   its core's caches still hold.  Taken from one counter in turn, as they
   were, the parts went to whichever thread came first: against that, two
   builds alternating (2 threads), sets of 20 and 30 unnamed copies of 2-12
   MB ran 1.01-1.52x faster by geometric mean over four runs, copies of
   16-70 MB from memory as fast (0.99-1.00x). */
static void claim(int lane) {
    int64_t c;
    int i;
    while ((c = take(lane, 0)) >= 0) pool.fn(pool.ctx, c);
    for (i = 1; i < pool.lanes; i++)
        while ((c = take((lane + i) % pool.lanes, 1)) >= 0) pool.fn(pool.ctx, c);
}

/* With pool.mu held: lanes for nchunks chunks (see claim). */
static void cut_lanes(int64_t nchunks, int lanes) {
    const int64_t len = nchunks / lanes, extra = nchunks % lanes;
    int64_t at = 0, end;
    int r;
    pool.lanes = lanes;
    for (r = 0; r < lanes; r++) {
        end = at + len + (r < extra ? 1 : 0);
        __atomic_store_n(&pool.lane[r], LANE(at, end), __ATOMIC_RELAXED);
        at = end;
    }
}

/* pool.tickets and pool.retire change under pool.mu, with atomic stores,
   so that a thread watching them without the lock reads whole values;
   pool.inside goes up under the lock and down without it (the caller
   watches it), always atomically. */
#define POOL_SET(field, v) __atomic_store_n(&pool.field, (v), __ATOMIC_RELEASE)
#define POOL_ADD(field, v) __atomic_add_fetch(&pool.field, (v), __ATOMIC_ACQ_REL)

/* With pool.mu held: whether a worker has nothing to do. */
static int nothing_to_do(int have_scratch) {
    return have_scratch && pool.tickets == 0 && pool.retire == 0;
}

static void *worker(void *arg) {
    /* The kernels' staging arena; a worker without one does not start. */
    int have_scratch = dmls_scratch() != NULL, lane;
    (void)arg;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        if (nothing_to_do(have_scratch)) {
            /* Watch for the next job (or a call to retire) for a while,
               then sleep until one signals. */
            const int64_t end = now_ns() + DMLS_POOL_WATCH_NS;
            do {
                pthread_mutex_unlock(&pool.mu);
                watch(&pool.tickets, 1, end);
                lock_soon(&pool.mu);
            } while (nothing_to_do(have_scratch) && now_ns() < end);
            while (nothing_to_do(have_scratch))
                pthread_cond_wait(&pool.wake, &pool.mu);
        }
        if (!have_scratch || pool.retire > 0) {
            if (have_scratch) POOL_ADD(retire, -1);
            pool.started--;
            pthread_mutex_unlock(&pool.mu);
            return NULL;
        }
        lane = pool.lanes - POOL_ADD(tickets, -1) - 1;   /* 1, 2, ... as helpers join */
        POOL_ADD(inside, 1);
        pthread_mutex_unlock(&pool.mu);
        claim(lane);
        /* The caller watches pool.inside: the last one out signals it
           under the lock, in case it has gone to sleep. */
        if (POOL_ADD(inside, -1) == 0) {
            lock_soon(&pool.mu);
            pthread_cond_signal(&pool.idle);
        } else {
            lock_soon(&pool.mu);
        }
    }
}

static void after_fork_child(void) {
    /* The workers do not exist in a forked child: start afresh. */
    pthread_mutex_init(&pool.mu, NULL);
    pthread_mutex_init(&pool.busy, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.idle, NULL);
    pool.started = pool.retire = pool.tickets = pool.inside = 0;
}

/* With pool.mu held: make nthreads - 1 workers available (fewer if the OS
   refuses threads; the caller then does the rest of the work). */
static int grow(int nthreads) {
    int want = nthreads - 1;
    if (want > DMLS_MAX_WORKERS) want = DMLS_MAX_WORKERS;
    while (pool.retire > 0 && pool.started - pool.retire < want)
        POOL_ADD(retire, -1);
    while (pool.started - pool.retire < want) {
        pthread_t th;
        pthread_attr_t attr;
        int ok;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 1 << 20);
        ok = pthread_create(&th, &attr, worker, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        pool.started++;
    }
    return pool.started - pool.retire < want ? pool.started - pool.retire : want;
}

void dmls_parallel(dmls_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads) {
    int64_t c;
    int helpers, i;
    if (nthreads <= 1 || nchunks <= 1 || nchunks > INT32_MAX || pthread_mutex_trylock(&pool.busy) != 0) {
        for (c = 0; c < nchunks; c++) fn(ctx, c);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    if (!pool.atfork) {
        pthread_atfork(NULL, NULL, after_fork_child);
        pool.atfork = 1;
    }
    helpers = grow(nthreads);
    if (helpers > nchunks - 1) helpers = (int)(nchunks - 1);
    pool.fn = fn;
    pool.ctx = ctx;
    cut_lanes(nchunks, helpers + 1);
    POOL_SET(tickets, helpers);     /* a watching worker takes it at once */
    for (i = 0; i < helpers; i++)   /* one sleeper per helper wanted */
        pthread_cond_signal(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    claim(0);
    lock_soon(&pool.mu);
    POOL_SET(tickets, 0);           /* late workers see the job closed */
    if (__atomic_load_n(&pool.inside, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_unlock(&pool.mu);
        watch(&pool.inside, 0, now_ns() + DMLS_POOL_WATCH_NS);
        lock_soon(&pool.mu);
        while (__atomic_load_n(&pool.inside, __ATOMIC_ACQUIRE) > 0)
            pthread_cond_wait(&pool.idle, &pool.mu);
    }
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.busy);
}

void dmls_pool_set_threads(int nthreads) {
    int keep = nthreads - 1;
    if (keep < 0) keep = 0;
    pthread_mutex_lock(&pool.mu);
    if (pool.started - pool.retire > keep) {
        POOL_SET(retire, pool.started - keep);
        pthread_cond_broadcast(&pool.wake);
    }
    pthread_mutex_unlock(&pool.mu);
}

int dmls_pool_workers(void) {
    int n;
    pthread_mutex_lock(&pool.mu);
    n = pool.started;
    pthread_mutex_unlock(&pool.mu);
    return n;
}

#else

void dmls_parallel(dmls_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads) {
    int64_t c;
    (void)nthreads;
    for (c = 0; c < nchunks; c++) fn(ctx, c);
}

void dmls_pool_set_threads(int nthreads) { (void)nthreads; }

int dmls_pool_workers(void) { return 0; }

#endif
