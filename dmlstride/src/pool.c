#include "pool.h"

#include "engine-limits.h"
#include "scratch.h"

#if DMLSTRIDE_HAVE_THREADS
#include <pthread.h>

static struct {
    pthread_mutex_t mu, busy;
    pthread_cond_t wake, idle;
    int started;      /* workers alive */
    int retire;       /* idle workers asked to exit */
    int tickets;      /* helpers still wanted by the open job */
    int inside;       /* helpers working on the open job */
    int atfork;
    dmls_chunk_fn fn;
    void *ctx;
    int64_t nchunks, next;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
          PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, NULL, NULL, 0, 0};

static void claim(void) {
    int64_t c;
    while ((c = __atomic_fetch_add(&pool.next, 1, __ATOMIC_ACQ_REL)) < pool.nchunks)
        pool.fn(pool.ctx, c);
}

static void *worker(void *arg) {
    /* The kernels' staging arena; a worker without one does not start. */
    int have_scratch = dmls_scratch() != NULL;
    (void)arg;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (have_scratch && pool.tickets == 0 && pool.retire == 0)
            pthread_cond_wait(&pool.wake, &pool.mu);
        if (!have_scratch || pool.retire > 0) {
            if (have_scratch) pool.retire--;
            pool.started--;
            pthread_mutex_unlock(&pool.mu);
            return NULL;
        }
        pool.tickets--;
        pool.inside++;
        pthread_mutex_unlock(&pool.mu);
        claim();
        pthread_mutex_lock(&pool.mu);
        if (--pool.inside == 0)
            pthread_cond_signal(&pool.idle);
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
        pool.retire--;
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
    if (nthreads <= 1 || nchunks <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
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
    pool.nchunks = nchunks;
    pool.next = 0;
    pool.tickets = helpers;
    for (i = 0; i < helpers; i++)   /* one sleeper per helper wanted */
        pthread_cond_signal(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    claim();
    pthread_mutex_lock(&pool.mu);
    pool.tickets = 0;               /* late workers see the job closed */
    while (pool.inside > 0)
        pthread_cond_wait(&pool.idle, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    pthread_mutex_unlock(&pool.busy);
}

void dmls_pool_set_threads(int nthreads) {
    int keep = nthreads - 1;
    if (keep < 0) keep = 0;
    pthread_mutex_lock(&pool.mu);
    if (pool.started - pool.retire > keep) {
        pool.retire = pool.started - keep;
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
