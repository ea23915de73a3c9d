"""The copy engine: one planner and one set of kernels for gather, scatter and copy.

Private module.  Callers (``dmlstride.copy``) validate descriptors; this module
still re-checks every bound against the buffer it actually acquired before a
kernel touches memory, and holds every buffer export for the whole call.

A :class:`Plan` is built once per (source layout, destination layout) pair:

* size-1 dimensions are dropped;
* dimensions are ordered by destination stride (outermost first), ties broken
  by source stride, so writes stream;
* neighbours contiguous in both operands are merged;
* the innermost dimension is classified: contiguous in both (``memcpy``), a
  zero source stride (fill), a transposition (the source's fastest dimension is
  another one: 2-D tiles sized for L1 with SSE2 register micro-transposes, or
  SSE2 shuffles for 2-4 interleaved channels), or plain strided;
* a transposition whose source-contiguous run (group K) and destination-
  contiguous run (group J) span several dimensions, as in a scrambled
  dimension order, is copied in J x K blocks (``block``: one task per block,
  offset tables for the rows of each group);
* 4-bit types packed in some memory order go through byte staging blocks
  (unpack, a byte plan, pack; nibbles on one side or on both); other 4-bit
  layouts take the element-wise nibble path.

Gather outputs are allocated through a numpy memory handler that keeps freed
output blocks for reuse (``set_output_cache``).

Work is a flat range of tasks (outer index x segment of the innermost
dimension) that threads split into disjoint destination slabs.
"""

import math

from cpython.buffer cimport PyBUF_ANY_CONTIGUOUS, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cimport numpy as cnp
import numpy as np

cnp.import_array()

cdef extern from *:
    """
    /* A small worker pool.  The caller and the workers claim chunks from
       an atomic counter; the caller runs chunks too and then waits only for
       chunks a worker has actually claimed, so a worker the OS has not
       scheduled (a busy machine) never delays a copy: the caller simply does
       its share.  One job at a time: a concurrent caller runs on its own
       thread instead of oversubscribing the CPUs.  Without pthreads the
       kernels run on the calling thread. */
    #include <stdint.h>
    typedef void (*dmls_chunk_fn)(void *ctx, int64_t chunk);
    static char *dmls_scratch(void);
    #if !defined(_WIN32) && !defined(DMLSTRIDE_NO_THREADS)
    #include <pthread.h>
    #include <unistd.h>
    #define DMLSTRIDE_HAVE_THREADS 1
    #define DMLS_MAX_WORKERS 1023
    static struct {
        pthread_mutex_t mu, busy;
        pthread_cond_t wake, idle;
        int started, want, joined, inside, open, atfork;
        uint64_t gen;
        dmls_chunk_fn fn;
        void *ctx;
        int64_t nchunks, next;
    } dmls_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                   PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

    static void dmls_claim(void) {
        int64_t c;
        while ((c = __atomic_fetch_add(&dmls_pool.next, 1, __ATOMIC_ACQ_REL)) < dmls_pool.nchunks)
            dmls_pool.fn(dmls_pool.ctx, c);
    }

    static void *dmls_worker(void *arg) {
        uint64_t seen = 0;
        (void)arg;
        pthread_mutex_lock(&dmls_pool.mu);
        for (;;) {
            while (!(dmls_pool.open && dmls_pool.gen != seen))
                pthread_cond_wait(&dmls_pool.wake, &dmls_pool.mu);
            seen = dmls_pool.gen;
            if (dmls_pool.joined >= dmls_pool.want)
                continue;            /* enough helpers for this job */
            dmls_pool.joined++;
            dmls_pool.inside++;
            pthread_mutex_unlock(&dmls_pool.mu);
            if (dmls_scratch() != NULL)   /* else the caller does the chunks */
                dmls_claim();
            pthread_mutex_lock(&dmls_pool.mu);
            if (--dmls_pool.inside == 0)
                pthread_cond_signal(&dmls_pool.idle);
        }
        return NULL;
    }

    static void dmls_after_fork_child(void) {
        /* The workers do not exist in a forked child: start afresh. */
        pthread_mutex_init(&dmls_pool.mu, NULL);
        pthread_mutex_init(&dmls_pool.busy, NULL);
        pthread_cond_init(&dmls_pool.wake, NULL);
        pthread_cond_init(&dmls_pool.idle, NULL);
        dmls_pool.started = dmls_pool.joined = dmls_pool.inside = dmls_pool.open = 0;
    }

    static void dmls_parallel(dmls_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads) {
        int64_t c;
        if (nthreads <= 1 || nchunks <= 1 || pthread_mutex_trylock(&dmls_pool.busy) != 0) {
            for (c = 0; c < nchunks; c++) fn(ctx, c);
            return;
        }
        pthread_mutex_lock(&dmls_pool.mu);
        if (!dmls_pool.atfork) {
            pthread_atfork(NULL, NULL, dmls_after_fork_child);
            dmls_pool.atfork = 1;
        }
        while (dmls_pool.started < nthreads - 1 && dmls_pool.started < DMLS_MAX_WORKERS) {
            pthread_t th;
            pthread_attr_t attr;
            int ok;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&attr, 1 << 20);
            ok = pthread_create(&th, &attr, dmls_worker, NULL) == 0;
            pthread_attr_destroy(&attr);
            if (!ok) break;          /* fewer helpers; the caller still does all the work */
            dmls_pool.started++;
        }
        dmls_pool.fn = fn;
        dmls_pool.ctx = ctx;
        dmls_pool.nchunks = nchunks;
        dmls_pool.next = 0;
        dmls_pool.want = nthreads - 1;
        dmls_pool.joined = 0;
        dmls_pool.gen++;
        dmls_pool.open = 1;
        pthread_cond_broadcast(&dmls_pool.wake);
        pthread_mutex_unlock(&dmls_pool.mu);
        dmls_claim();
        pthread_mutex_lock(&dmls_pool.mu);
        dmls_pool.open = 0;          /* late workers see the job closed */
        while (dmls_pool.inside > 0)
            pthread_cond_wait(&dmls_pool.idle, &dmls_pool.mu);
        pthread_mutex_unlock(&dmls_pool.mu);
        pthread_mutex_unlock(&dmls_pool.busy);
    }
    #else
    #define DMLSTRIDE_HAVE_THREADS 0
    static void dmls_parallel(dmls_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads) {
        int64_t c;
        (void)nthreads;
        for (c = 0; c < nchunks; c++) fn(ctx, c);
    }
    #endif

    /* Per-thread scratch memory: the staging buffers of the kernels live on
       the heap, not on the caller's C stack (a thread started with a small
       stack must not overflow).  One arena per thread, allocated on first
       use and freed when the thread exits.  Regions: the nibble stages
       (DMLS_SCRATCH_STAGE, DMLS_SCRATCH_STAGE2) and the kernels' tiles and
       tables (DMLS_SCRATCH_KERNEL). */
    #include <stdlib.h>
    #define DMLS_SCRATCH_REGION ((int64_t)1 << 16)
    #define DMLS_SCRATCH_STAGE 0
    #define DMLS_SCRATCH_STAGE2 DMLS_SCRATCH_REGION
    #define DMLS_SCRATCH_KERNEL (2 * DMLS_SCRATCH_REGION)
    #define DMLS_SCRATCH_BYTES (3 * DMLS_SCRATCH_REGION)
    #if !defined(_WIN32)
    #include <pthread.h>
    static pthread_key_t dmls_scratch_key;
    static pthread_once_t dmls_scratch_once = PTHREAD_ONCE_INIT;
    static int dmls_scratch_key_ok = 0;
    static void dmls_scratch_make_key(void) {
        dmls_scratch_key_ok = pthread_key_create(&dmls_scratch_key, free) == 0;
    }
    /* This thread's arena, allocated on first use; NULL if memory ran out. */
    static char *dmls_scratch(void) {
        void *mem;
        pthread_once(&dmls_scratch_once, dmls_scratch_make_key);
        if (!dmls_scratch_key_ok) return NULL;
        mem = pthread_getspecific(dmls_scratch_key);
        if (mem == NULL) {
            if (posix_memalign(&mem, 64, (size_t)DMLS_SCRATCH_BYTES) != 0) return NULL;
            if (pthread_setspecific(dmls_scratch_key, mem) != 0) { free(mem); return NULL; }
        }
        return (char *)mem;
    }
    #else
    static __declspec(thread) char *dmls_scratch_mem;
    static char *dmls_scratch(void) {
        if (dmls_scratch_mem == NULL) dmls_scratch_mem = (char *)malloc((size_t)DMLS_SCRATCH_BYTES);
        return dmls_scratch_mem;
    }
    #endif

    /* Register-transpose micro-kernels (SSE2, the x86-64 baseline: no
       run-time dispatch needed).  A micro-block is N x N elements with
       N = 16 / W: N source rows (one per j, stride sj bytes) each holding N
       contiguous k values are transposed into N destination rows (one per k,
       stride dk bytes) each holding N contiguous j values.  Unaligned loads
       and stores only.  Elsewhere DMLSTRIDE_HAVE_SIMD is 0 and the scalar
       staging tile is used. */
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define DMLSTRIDE_HAVE_SIMD 1

    /* One transpose stage: pairs (x[i], x[i + dist]) for i in each block of
       2 * dist, unpacked at this stage's unit into y[2p], y[2p + 1].  The
       loops have constant bounds and are fully unrolled into registers. */
    #define DMLS_STAGE(x, y, N, dist, LO, HI) do {                                 \\
        int p_ = 0, b_, i_;                                                        \\
        _Pragma("GCC unroll 16") for (b_ = 0; b_ < (N); b_ += 2 * (dist))         \\
        _Pragma("GCC unroll 16") for (i_ = b_; i_ < b_ + (dist); i_++, p_++) {    \\
            y[2 * p_] = LO(x[i_], x[i_ + (dist)]);                                 \\
            y[2 * p_ + 1] = HI(x[i_], x[i_ + (dist)]);                             \\
        }                                                                          \\
    } while (0)
    #define DMLS_LOAD(x, N) do { int i_;                                           \\
        _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \\
            x[i_] = _mm_loadu_si128((const __m128i *)(s + i_ * sj)); } while (0)
    #define DMLS_STORE(x, N) do { int i_;                                          \\
        _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \\
            _mm_storeu_si128((__m128i *)(d + i_ * dk), x[i_]); } while (0)

    /* The register transposes of an N x N micro-block, N = 16 / W: x holds
       the N source rows; the result is in x (W = 1, 4) or y (W = 2, 8). */
    #define DMLS_T1(x, y) do {                                                    \\
        DMLS_STAGE(x, y, 16, 1, _mm_unpacklo_epi8, _mm_unpackhi_epi8);             \\
        DMLS_STAGE(y, x, 16, 2, _mm_unpacklo_epi16, _mm_unpackhi_epi16);           \\
        DMLS_STAGE(x, y, 16, 4, _mm_unpacklo_epi32, _mm_unpackhi_epi32);           \\
        DMLS_STAGE(y, x, 16, 8, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
    #define DMLS_T2(x, y) do {                                                    \\
        DMLS_STAGE(x, y, 8, 1, _mm_unpacklo_epi16, _mm_unpackhi_epi16);            \\
        DMLS_STAGE(y, x, 8, 2, _mm_unpacklo_epi32, _mm_unpackhi_epi32);            \\
        DMLS_STAGE(x, y, 8, 4, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
    #define DMLS_T4(x, y) do {                                                    \\
        DMLS_STAGE(x, y, 4, 1, _mm_unpacklo_epi32, _mm_unpackhi_epi32);            \\
        DMLS_STAGE(y, x, 4, 2, _mm_unpacklo_epi64, _mm_unpackhi_epi64); } while (0)
    #define DMLS_T8(x, y) DMLS_STAGE(x, y, 2, 1, _mm_unpacklo_epi64, _mm_unpackhi_epi64)

    static inline void dmls_micro1(const char *s, int64_t sj, char *d, int64_t dk) {
        __m128i x[16], y[16];
        DMLS_LOAD(x, 16); DMLS_T1(x, y); DMLS_STORE(x, 16);
    }
    static inline void dmls_micro2(const char *s, int64_t sj, char *d, int64_t dk) {
        __m128i x[8], y[8];
        DMLS_LOAD(x, 8); DMLS_T2(x, y); DMLS_STORE(y, 8);
    }
    static inline void dmls_micro4(const char *s, int64_t sj, char *d, int64_t dk) {
        __m128i x[4], y[4];
        DMLS_LOAD(x, 4); DMLS_T4(x, y); DMLS_STORE(x, 4);
    }
    static inline void dmls_micro8(const char *s, int64_t sj, char *d, int64_t dk) {
        __m128i x[2], y[2];
        DMLS_LOAD(x, 2); DMLS_T8(x, y); DMLS_STORE(y, 2);
    }

    /* Transpose a kn x jn block: source k contiguous (stride W), rows j at
       stride sj; destination j contiguous (stride W), rows k at stride dk.
       Returns the number of k rows and j columns covered by whole
       micro-blocks; the caller copies the remainder. */
    static void dmls_simd_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                    int64_t kn, int64_t jn, int64_t *kdone, int64_t *jdone,
                                    char *scratch) {
        const int64_t N = 16 / W;
        const int64_t TK = 64 / W;      /* one source cache line of k */
        const int64_t TJ = 64;          /* source lines kept in L1 per tile */
        /* With 8 or 16 destination rows per micro-block (W <= 2), rows that
           lie a multiple of 4 KiB apart compete for one L1 set: stage the
           micro-blocks in a padded buffer and write each row in one burst.
           Rows closer together (dk not a multiple of 2 KiB) spread over
           enough sets to be written in place. */
        enum { PITCH = 64 * 2 + 64, SPITCH = 64 + 16 };
        char *stage = scratch;                  /* 16 * PITCH bytes */
        const int staged = W <= 2 && dk % 2048 == 0;
        /* Likewise, source rows a multiple of 1 KiB apart conflict in L1
           while the tile revisits them: copy the tile's source lines to a
           padded buffer first (each source line is then read once). */
        char *sstage = scratch + 16 * PITCH;   /* 64 * SPITCH bytes */
        const int sstaged = (sj % 4096) == 0;
        const char *sbase;
        int64_t sstep;
        int64_t kf = kn - kn % N, jf = jn - jn % N, kb, jb, k, j, ke, je, i;
        for (kb = 0; kb < kf; kb += TK) {
            ke = kb + TK < kf ? kb + TK : kf;
            for (jb = 0; jb < jf; jb += TJ) {
                je = jb + TJ < jf ? jb + TJ : jf;
                if (sstaged) {
                    if ((ke - kb) * W == 64)
                        for (j = jb; j < je; j++)
                            memcpy(sstage + (j - jb) * SPITCH, s + j * sj + kb * W, 64);
                    else
                        for (j = jb; j < je; j++)
                            memcpy(sstage + (j - jb) * SPITCH, s + j * sj + kb * W, (size_t)((ke - kb) * W));
                    sbase = sstage - jb * SPITCH - kb * W;
                    sstep = SPITCH;
                } else {
                    sbase = s;
                    sstep = sj;
                }
                for (k = kb; k < ke; k += N) {
                    for (j = jb; j < je; j += N) {
                        const char *sp = sbase + j * sstep + k * W;
                        char *dp = staged ? stage + (j - jb) * W : d + k * dk + j * W;
                        int64_t dstep = staged ? PITCH : dk;
                        switch (W) {
                        case 1: dmls_micro1(sp, sstep, dp, dstep); break;
                        case 2: dmls_micro2(sp, sstep, dp, dstep); break;
                        case 4: dmls_micro4(sp, sstep, dp, dk); break;
                        default: dmls_micro8(sp, sstep, dp, dk); break;
                        }
                    }
                    if (staged)
                        for (i = 0; i < N; i++)
                            memcpy(d + (k + i) * dk + jb * W, stage + i * PITCH, (size_t)((je - jb) * W));
                }
            }
        }
        *kdone = kf;
        *jdone = jf;
    }

    /* Nibble (un)packing, 16 bytes at a time: byte b holds element 2i in its
       low nibble and element 2i + 1 in its high nibble.  Each returns the
       number of bytes done (a multiple of 16); the caller finishes the rest. */
    static int64_t dmls_unpack_nibbles(const unsigned char *q, unsigned char *out, int64_t nbytes) {
        const __m128i m = _mm_set1_epi8(0x0F);
        int64_t k;
        for (k = 0; k + 16 <= nbytes; k += 16) {
            __m128i b = _mm_loadu_si128((const __m128i *)(q + k));
            __m128i lo = _mm_and_si128(b, m);
            __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
            _mm_storeu_si128((__m128i *)(out + 2 * k), _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128((__m128i *)(out + 2 * k + 16), _mm_unpackhi_epi8(lo, hi));
        }
        return k;
    }
    static int64_t dmls_pack_nibbles(const unsigned char *src, unsigned char *q, int64_t nbytes) {
        const __m128i lo = _mm_set1_epi16(0x000F);
        const __m128i hi = _mm_set1_epi16(0x00F0);
        int64_t k;
        for (k = 0; k + 16 <= nbytes; k += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + 2 * k));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + 2 * k + 16));
            a = _mm_or_si128(_mm_and_si128(a, lo), _mm_and_si128(_mm_srli_epi16(a, 4), hi));
            b = _mm_or_si128(_mm_and_si128(b, lo), _mm_and_si128(_mm_srli_epi16(b, 4), hi));
            _mm_storeu_si128((__m128i *)(q + k), _mm_packus_epi16(a, b));
        }
        return k;
    }

    /* 3-channel 32-bit de-interleave (RGB float32 -> planes), SSE2 shuffles:
       four pixels (three vectors) per step.  Returns the pixels done. */
    static int64_t dmls_deint3_32(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        int64_t i;
        for (i = 0; i + 4 <= n; i += 4) {
            __m128 a = _mm_loadu_ps((const float *)(s + 12 * i));       /* r0 g0 b0 r1 */
            __m128 b = _mm_loadu_ps((const float *)(s + 12 * i + 16));  /* g1 b1 r2 g2 */
            __m128 c = _mm_loadu_ps((const float *)(s + 12 * i + 32));  /* b2 r3 g3 b3 */
            __m128 u = _mm_shuffle_ps(b, c, _MM_SHUFFLE(2, 1, 3, 2));   /* r2 g2 r3 g3 */
            __m128 v = _mm_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 3, 0));   /* r0 r1 g1 b1 */
            __m128 x = _mm_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 2, 1));   /* g0 b0 g1 b1 */
            __m128 y = _mm_shuffle_ps(c, c, _MM_SHUFFLE(3, 0, 3, 0));   /* b2 b3 b2 b3 */
            _mm_storeu_ps((float *)(d0 + 4 * i), _mm_shuffle_ps(v, u, _MM_SHUFFLE(2, 0, 1, 0)));
            _mm_storeu_ps((float *)(d1 + 4 * i), _mm_shuffle_ps(x, u, _MM_SHUFFLE(3, 1, 2, 0)));
            _mm_storeu_ps((float *)(d2 + 4 * i), _mm_shuffle_ps(x, y, _MM_SHUFFLE(1, 0, 3, 1)));
        }
        return i;
    }

    /* The inverse: three 32-bit planes -> interleaved pixels. */
    static int64_t dmls_int3_32(const char *s0, const char *s1, const char *s2, char *d, int64_t n) {
        int64_t i;
        for (i = 0; i + 4 <= n; i += 4) {
            __m128 r = _mm_loadu_ps((const float *)(s0 + 4 * i));
            __m128 g = _mm_loadu_ps((const float *)(s1 + 4 * i));
            __m128 b = _mm_loadu_ps((const float *)(s2 + 4 * i));
            __m128 p = _mm_shuffle_ps(r, g, _MM_SHUFFLE(2, 0, 2, 0));   /* r0 r2 g0 g2 */
            __m128 q = _mm_shuffle_ps(b, r, _MM_SHUFFLE(3, 1, 2, 0));   /* b0 b2 r1 r3 */
            __m128 t = _mm_shuffle_ps(g, b, _MM_SHUFFLE(3, 1, 3, 1));   /* g1 g3 b1 b3 */
            _mm_storeu_ps((float *)(d + 12 * i), _mm_shuffle_ps(p, q, _MM_SHUFFLE(2, 0, 2, 0)));
            _mm_storeu_ps((float *)(d + 12 * i + 16), _mm_shuffle_ps(t, p, _MM_SHUFFLE(3, 1, 2, 0)));
            _mm_storeu_ps((float *)(d + 12 * i + 32), _mm_shuffle_ps(q, t, _MM_SHUFFLE(3, 1, 3, 1)));
        }
        return i;
    }

    /* 3-channel byte de-interleave (RGB -> planes) with SSSE3 pshufb, chosen
       at run time: the wheel's baseline stays SSE2.  Returns the number of
       pixels done (a multiple of 16); the caller finishes the rest. */
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #include <tmmintrin.h>
    __attribute__((target("ssse3")))
    static int64_t dmls_deint3_u8_ssse3(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        const __m128i a0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m128i b0 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
        const __m128i c0 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
        const __m128i a1 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
        const __m128i c1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
        const __m128i a2 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
        const __m128i c2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
        int64_t i;
        for (i = 0; i + 16 <= n; i += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + 3 * i));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + 3 * i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + 3 * i + 32));
            _mm_storeu_si128((__m128i *)(d0 + i), _mm_or_si128(_mm_or_si128(
                _mm_shuffle_epi8(a, a0), _mm_shuffle_epi8(b, b0)), _mm_shuffle_epi8(c, c0)));
            _mm_storeu_si128((__m128i *)(d1 + i), _mm_or_si128(_mm_or_si128(
                _mm_shuffle_epi8(a, a1), _mm_shuffle_epi8(b, b1)), _mm_shuffle_epi8(c, c1)));
            _mm_storeu_si128((__m128i *)(d2 + i), _mm_or_si128(_mm_or_si128(
                _mm_shuffle_epi8(a, a2), _mm_shuffle_epi8(b, b2)), _mm_shuffle_epi8(c, c2)));
        }
        return i;
    }
    static int dmls_cpu_ssse3 = -1;
    static int64_t dmls_deint3_u8(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        if (dmls_cpu_ssse3 < 0) {
            __builtin_cpu_init();
            dmls_cpu_ssse3 = __builtin_cpu_supports("ssse3") ? 1 : 0;
        }
        return dmls_cpu_ssse3 ? dmls_deint3_u8_ssse3(s, d0, d1, d2, n) : 0;
    }
    #else
    static int64_t dmls_deint3_u8(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        (void)s; (void)d0; (void)d1; (void)d2; (void)n;
        return 0;
    }
    #endif

    /* Copy with non-temporal stores (no read-for-ownership of the
       destination): for long runs in copies much larger than the caches. */
    static void dmls_stream_copy(char *d, const char *s, int64_t n) {
        int64_t head = (int64_t)((16 - ((uintptr_t)d & 15)) & 15), i;
        if (head > n) head = n;
        memcpy(d, s, (size_t)head);
        d += head; s += head; n -= head;
        for (i = 0; i + 64 <= n; i += 64) {
            __m128i x0 = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i x1 = _mm_loadu_si128((const __m128i *)(s + i + 16));
            __m128i x2 = _mm_loadu_si128((const __m128i *)(s + i + 32));
            __m128i x3 = _mm_loadu_si128((const __m128i *)(s + i + 48));
            _mm_stream_si128((__m128i *)(d + i), x0);
            _mm_stream_si128((__m128i *)(d + i + 16), x1);
            _mm_stream_si128((__m128i *)(d + i + 32), x2);
            _mm_stream_si128((__m128i *)(d + i + 48), x3);
        }
        memcpy(d + i, s + i, (size_t)(n - i));
    }
    static void dmls_store_fence(void) { _mm_sfence(); }
    /* Non-temporal transposes, for copies far larger than the caches: the
       destination is written with streaming stores that skip the read for
       ownership (a third of the memory traffic of an ordinary store), each
       64-byte line in one burst so that it leaves the write-combining buffer
       whole.  Same element mapping as dmls_simd_transpose. */

    /* One line strip: N k rows by 64 / W j (four micro-blocks side by side),
       each destination row's line written with four streaming stores. */
    #define DMLS_LINE(NAME, N, TCHAIN, RES)                                         \\
    static inline void NAME(const char *s, int64_t sj, char *d, int64_t dk) {       \\
        __m128i o[4][N], x[N], y[N];                                                \\
        int q, i;                                                                   \\
        _Pragma("GCC unroll 4") for (q = 0; q < 4; q++) {                           \\
            _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                      \\
                x[i] = _mm_loadu_si128((const __m128i *)(s + (q * (N) + i) * sj));  \\
            TCHAIN(x, y);                                                           \\
            _Pragma("GCC unroll 16") for (i = 0; i < (N); i++) o[q][i] = RES[i];    \\
        }                                                                           \\
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                          \\
        _Pragma("GCC unroll 4") for (q = 0; q < 4; q++)                             \\
            _mm_stream_si128((__m128i *)(d + i * dk + q * 16), o[q][i]);            \\
    }
    DMLS_LINE(dmls_line1, 16, DMLS_T1, x)
    DMLS_LINE(dmls_line2, 8, DMLS_T2, y)
    DMLS_LINE(dmls_line4, 4, DMLS_T4, x)
    DMLS_LINE(dmls_line8, 2, DMLS_T8, y)

    /* Copy rows of nbytes, sj apart, to a buffer of rows sp apart; returns it. */
    static inline const char *dmls_stage_rows(char *buf, int64_t sp, const char *s, int64_t sj,
                                              int64_t rows, int64_t nbytes) {
        int64_t j;
        for (j = 0; j < rows; j++)
            memcpy(buf + j * sp, s + j * sj, (size_t)nbytes);
        return buf;
    }

    /* Destination rows line-aligned (d and dk multiples of 64) and jn a
       multiple of 64 / W: strips of one destination line by four source
       lines of k.  Source rows a multiple of 4 KiB apart would share one L1
       set while a strip walks down them: they are copied to a padded buffer
       first.  Covers rows k < *kdone (a multiple of 16 / W) and all jn. */
    static void dmls_nt_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                  int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
        enum { SP = 256 + 16 };
        char *sst = scratch;                    /* 64 * SP bytes */
        const int64_t N = 16 / W, E = 64 / W, TK = 256 / W;
        const int sstaged = sj % 4096 == 0;
        const int64_t kf = kn - kn % N;
        int64_t jb, kb, ke, k;
        for (jb = 0; jb < jn; jb += E) {
            for (kb = 0; kb < kf; kb += TK) {
                const char *sb = s + jb * sj;
                int64_t ss = sj;
                ke = kb + TK < kf ? kb + TK : kf;
                if (sstaged) {
                    sb = dmls_stage_rows(sst, SP, sb + kb * W, sj, E, (ke - kb) * W) - kb * W;
                    ss = SP;
                }
                for (k = kb; k < ke; k += N) {
                    const char *sp = sb + k * W;
                    char *dp = d + k * dk + jb * W;
                    switch (W) {
                    case 1: dmls_line1(sp, ss, dp, dk); break;
                    case 2: dmls_line2(sp, ss, dp, dk); break;
                    case 4: dmls_line4(sp, ss, dp, dk); break;
                    default: dmls_line8(sp, ss, dp, dk); break;
                    }
                }
            }
        }
        *kdone = kf;
    }

    /* Destination rows back to back (dk = jn * W, jn a multiple of 16 / W
       and jn * W <= 1024): each tile of whole rows is transposed into an L1
       buffer and streamed out as one contiguous run, whatever the
       destination's alignment.  Covers rows k < *kdone. */
    static void dmls_nt_contig(int W, const char *s, int64_t sj, char *d,
                               int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
        enum { TB = 16384, SP = 256 + 16 };
        char *tile = scratch;                   /* TB bytes */
        char *sst = scratch + TB;               /* 64 * SP bytes */
        const int64_t N = 16 / W, row = jn * W;
        /* TK k rows per tile: whole source lines, at most 256 bytes of k per
           source row (so sst holds them when jn <= 64) and TB bytes out. */
        int64_t TK = TB / row / (64 / W) * (64 / W);
        const int sstaged = sj % 4096 == 0 && jn <= 64;
        int64_t kf, kb, ke, k, j;
        if (TK > 256 / W) TK = 256 / W;
        if (TK < N) TK = N;
        kf = kn - kn % N;
        for (kb = 0; kb < kf; kb += TK) {
            const char *sb = s;
            int64_t ss = sj;
            ke = kb + TK < kf ? kb + TK : kf;
            if (sstaged) {
                sb = dmls_stage_rows(sst, SP, s + kb * W, sj, jn, (ke - kb) * W) - kb * W;
                ss = SP;
            }
            for (k = kb; k < ke; k += N)
                for (j = 0; j < jn; j += N) {
                    const char *sp = sb + j * ss + k * W;
                    char *dp = tile + (k - kb) * row + j * W;
                    switch (W) {
                    case 1: dmls_micro1(sp, ss, dp, row); break;
                    case 2: dmls_micro2(sp, ss, dp, row); break;
                    case 4: dmls_micro4(sp, ss, dp, row); break;
                    default: dmls_micro8(sp, ss, dp, row); break;
                    }
                }
            dmls_stream_copy(d + kb * row, tile, (ke - kb) * row);
        }
        *kdone = kf;
    }

    #else
    #define DMLSTRIDE_HAVE_SIMD 0
    static int64_t dmls_int3_32(const char *s0, const char *s1, const char *s2, char *d, int64_t n) {
        (void)s0; (void)s1; (void)s2; (void)d; (void)n;
        return 0;
    }
    static int64_t dmls_deint3_32(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        (void)s; (void)d0; (void)d1; (void)d2; (void)n;
        return 0;
    }
    static int64_t dmls_unpack_nibbles(const unsigned char *q, unsigned char *out, int64_t nbytes) {
        (void)q; (void)out; (void)nbytes;
        return 0;
    }
    static int64_t dmls_pack_nibbles(const unsigned char *src, unsigned char *q, int64_t nbytes) {
        (void)src; (void)q; (void)nbytes;
        return 0;
    }
    static void dmls_stream_copy(char *d, const char *s, int64_t n) { memcpy(d, s, (size_t)n); }
    static void dmls_store_fence(void) {}
    static int64_t dmls_deint3_u8(const char *s, char *d0, char *d1, char *d2, int64_t n) {
        (void)s; (void)d0; (void)d1; (void)d2; (void)n;
        return 0;
    }
    static void dmls_simd_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                    int64_t kn, int64_t jn, int64_t *kdone, int64_t *jdone,
                                    char *scratch) {
        (void)scratch; (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn;
        *kdone = 0;
        *jdone = 0;
    }
    static void dmls_nt_transpose(int W, const char *s, int64_t sj, char *d, int64_t dk,
                                  int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
        (void)scratch; (void)W; (void)s; (void)sj; (void)d; (void)dk; (void)kn; (void)jn;
        *kdone = 0;
    }
    static void dmls_nt_contig(int W, const char *s, int64_t sj, char *d,
                               int64_t kn, int64_t jn, int64_t *kdone, char *scratch) {
        (void)scratch; (void)W; (void)s; (void)sj; (void)d; (void)kn; (void)jn;
        *kdone = 0;
    }
    #endif

    /* Blocked transpose for layouts whose fast runs span several dimensions.
       J elements are contiguous in the destination (element j at j * W from
       a row start) and lie at source offsets js[j]; K elements are contiguous
       in the source (k at k * W) and lie at destination offsets kd[k].  So
       element (j, k) moves from s + js[j] + k * W to d + kd[k] + j * W.
       The block is cut into tiles of L source lines of k (TK = 64 * L / W)
       by TJ = DMLS_BJ / L values of j, in k-major order, and the source
       lines of the tile DMLS_BAHEAD ahead are prefetched.  A side whose rows would compete for a few L1
       sets (sstage, dstage) goes through a padded buffer, so each of its
       lines is read or written in one burst.  The register micro-kernels
       take one pointer per row; ragged edges are copied element by element.
       Reads stay within {s + js[j] + k * W}, writes within
       {d + kd[k] + j * W}, for j < jn and k < kn. */
    enum { DMLS_BJ = 64, DMLS_BPAD = 64, DMLS_BAHEAD = 2 };
    #if DMLSTRIDE_HAVE_SIMD
    #define DMLS_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
    #elif defined(__GNUC__) || defined(__clang__)
    #define DMLS_PREFETCH(p) __builtin_prefetch((p), 0, 2)
    #else
    #define DMLS_PREFETCH(p) ((void)(p))
    #endif
    #if DMLSTRIDE_HAVE_SIMD
    #define DMLS_PLOAD(x, N) do { int i_;                                          \\
        _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \\
            x[i_] = _mm_loadu_si128((const __m128i *)(sr[i_] + ko)); } while (0)
    #define DMLS_PSTORE(x, N) do { int i_;                                         \\
        _Pragma("GCC unroll 16") for (i_ = 0; i_ < (N); i_++)                     \\
            _mm_storeu_si128((__m128i *)(dr[i_] + jo), x[i_]); } while (0)
    /* sr[i] + ko: source row j + i at k; dr[i] + jo: destination row k + i at j. */
    static inline void dmls_pmicro1(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
        __m128i x[16], y[16];
        DMLS_PLOAD(x, 16); DMLS_T1(x, y); DMLS_PSTORE(x, 16);
    }
    static inline void dmls_pmicro2(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
        __m128i x[8], y[8];
        DMLS_PLOAD(x, 8); DMLS_T2(x, y); DMLS_PSTORE(y, 8);
    }
    static inline void dmls_pmicro4(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
        __m128i x[4], y[4];
        DMLS_PLOAD(x, 4); DMLS_T4(x, y); DMLS_PSTORE(x, 4);
    }
    static inline void dmls_pmicro8(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) {
        __m128i x[2], y[2];
        DMLS_PLOAD(x, 2); DMLS_T8(x, y); DMLS_PSTORE(y, 2);
    }
    /* As DMLS_LINE, with one pointer per row: a destination line per k row
       (dr[i] + jo line-aligned), written with streaming stores. */
    #define DMLS_PLINE(NAME, N, TCHAIN, RES)                                        \
    static inline void NAME(const char *const *sr, int64_t ko, char *const *dr, int64_t jo) { \
        __m128i o[4][N], x[N], y[N];                                                \
        int q, i;                                                                   \
        _Pragma("GCC unroll 4") for (q = 0; q < 4; q++) {                           \
            _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                      \
                x[i] = _mm_loadu_si128((const __m128i *)(sr[q * (N) + i] + ko));    \
            TCHAIN(x, y);                                                           \
            _Pragma("GCC unroll 16") for (i = 0; i < (N); i++) o[q][i] = RES[i];    \
        }                                                                           \
        _Pragma("GCC unroll 16") for (i = 0; i < (N); i++)                          \
        _Pragma("GCC unroll 4") for (q = 0; q < 4; q++)                             \
            _mm_stream_si128((__m128i *)(dr[i] + jo + q * 16), o[q][i]);            \
    }
    DMLS_PLINE(dmls_pline1, 16, DMLS_T1, x)
    DMLS_PLINE(dmls_pline2, 8, DMLS_T2, y)
    DMLS_PLINE(dmls_pline4, 4, DMLS_T4, x)
    DMLS_PLINE(dmls_pline8, 2, DMLS_T8, y)
    #endif
    static inline void dmls_block_tiles(int W, const char *s, const int64_t *js, int64_t jn,
                                        char *d, const int64_t *kd, int64_t kn,
                                        int sstage, int dstage, const int64_t L, int nt,
                                        char *scratch) {
        /* A tile is TJ = DMLS_BJ / L rows of j by L source lines of k
           (TK = 64 * L / W).  sst: TJ rows of SP = 64 * L + 16 bytes, at most
           DMLS_BJ * 64 + 16 * DMLS_BJ; dst: TK rows of DP = TJ * W + DMLS_BPAD
           bytes, 64 * L * TJ + 64 * L * DMLS_BPAD / W <= 64 * DMLS_BJ + 256 * DMLS_BPAD. */
        char *sst = scratch;                                    /* DMLS_BJ * 80 bytes */
        char *dst = sst + DMLS_BJ * 80;                         /* 64 * DMLS_BJ + 256 * DMLS_BPAD */
        const char **sr = (const char **)(dst + 64 * DMLS_BJ + 256 * DMLS_BPAD);  /* DMLS_BJ */
        char **dr = (char **)(sr + DMLS_BJ);                    /* 256 */
        const int64_t TJ = DMLS_BJ / L, TK = 64 * L / W;
        const int64_t SP = 64 * L + 16, DP = W * TJ + DMLS_BPAD;
        const int64_t ntj = (jn + TJ - 1) / TJ, ntk = (kn + TK - 1) / TK;
        int64_t kb, jb, k, j, nk, nj, nkf, njf, t, q;
        for (t = 0; t < ntj * ntk; t++) {
            kb = (t / ntj) * TK;
            jb = (t % ntj) * TJ;
            nj = jn - jb < TJ ? jn - jb : TJ;
            nk = kn - kb < TK ? kn - kb : TK;
            if (t + DMLS_BAHEAD < ntj * ntk) {
                /* Source rows are short runs in many pages: ask for the lines
                   of a tile ahead (into L2) so their misses overlap this
                   tile's work. */
                int64_t kb2 = ((t + DMLS_BAHEAD) / ntj) * TK, jb2 = ((t + DMLS_BAHEAD) % ntj) * TJ;
                int64_t nj2 = jn - jb2 < TJ ? jn - jb2 : TJ;
                int64_t nb2 = (kn - kb2 < TK ? kn - kb2 : TK) * W;
                for (j = 0; j < nj2; j++)
                    for (q = 0; q < nb2; q += 64)
                        DMLS_PREFETCH(s + js[jb2 + j] + kb2 * W + q);
            }
            if (sstage) {
                for (j = 0; j < nj; j++)
                    memcpy(sst + j * SP, s + js[jb + j] + kb * W, (size_t)(nk * W));
                for (j = 0; j < nj; j++)
                    sr[j] = sst + j * SP;
            } else {
                for (j = 0; j < nj; j++)
                    sr[j] = s + js[jb + j] + kb * W;
            }
            if (dstage)
                for (k = 0; k < nk; k++)
                    dr[k] = dst + k * DP;
            else
                for (k = 0; k < nk; k++)
                    dr[k] = d + kd[kb + k] + jb * W;
            nkf = 0;
            njf = 0;
    #if DMLSTRIDE_HAVE_SIMD
            {
                const int64_t N = 16 / W;
                nkf = nk - nk % N;
                if (nt) {
                    /* nj is a multiple of 64 / W (the caller's contract) */
                    njf = nj;
                    for (k = 0; k < nkf; k += N)
                        for (j = 0; j < nj; j += 4 * N)
                            switch (W) {
                            case 1: dmls_pline1(sr + j, k, dr + k, j); break;
                            case 2: dmls_pline2(sr + j, 2 * k, dr + k, 2 * j); break;
                            case 4: dmls_pline4(sr + j, 4 * k, dr + k, 4 * j); break;
                            default: dmls_pline8(sr + j, 8 * k, dr + k, 8 * j); break;
                            }
                } else {
                njf = nj - nj % N;
                for (k = 0; k < nkf; k += N)
                    for (j = 0; j < njf; j += N) {
                        switch (W) {
                        case 1: dmls_pmicro1(sr + j, k, dr + k, j); break;
                        case 2: dmls_pmicro2(sr + j, 2 * k, dr + k, 2 * j); break;
                        case 4: dmls_pmicro4(sr + j, 4 * k, dr + k, 4 * j); break;
                        default: dmls_pmicro8(sr + j, 8 * k, dr + k, 8 * j); break;
                        }
                    }
                }
            }
    #endif
            for (k = nkf; k < nk; k++)
                for (j = 0; j < nj; j++)
                    memcpy(dr[k] + j * W, sr[j] + k * W, (size_t)W);
            for (k = 0; k < nkf; k++)
                for (j = njf; j < nj; j++)
                    memcpy(dr[k] + j * W, sr[j] + k * W, (size_t)W);
            if (dstage)
                for (k = 0; k < nk; k++)
                    memcpy(d + kd[kb + k] + jb * W, dst + k * DP, (size_t)(nj * W));
        }
    }
    /* lines: source lines of k per tile row (1 or 4); each value gets its
       own copy of the loops with constant tile sizes.  nt: write whole
       destination lines with streaming stores; the caller guarantees
       !dstage, d + kd[k] line-aligned, and jn and the tile width
       DMLS_BJ / lines multiples of 64 / W. */
    static void dmls_block_transpose(int W, const char *s, const int64_t *js, int64_t jn,
                                     char *d, const int64_t *kd, int64_t kn,
                                     int sstage, int dstage, int lines, int nt, char *scratch) {
        if (lines == 4)
            dmls_block_tiles(W, s, js, jn, d, kd, kn, sstage, dstage, 4, nt, scratch);
        else
            dmls_block_tiles(W, s, js, jn, d, kd, kn, sstage, dstage, 1, nt, scratch);
    }
    /* Columns j0..j1 of a block, element by element (the edges of a
       streamed block: columns before its first line boundary and after its
       last). */
    static void dmls_block_columns(int W, const char *s, const int64_t *js, int64_t j0, int64_t j1,
                                   char *d, const int64_t *kd, int64_t kn) {
        int64_t k, j;
        for (k = 0; k < kn; k++)
            for (j = j0; j < j1; j++)
                memcpy(d + kd[k] + j * W, s + js[j] + k * W, (size_t)W);
    }
    """
    int DMLSTRIDE_HAVE_THREADS
    ctypedef void (*dmls_chunk_fn)(void* ctx, int64_t chunk) noexcept nogil
    void dmls_parallel(dmls_chunk_fn fn, void* ctx, int64_t nchunks, int nthreads) noexcept nogil
    int DMLSTRIDE_HAVE_SIMD
    void dmls_simd_transpose(int W, const char* s, int64_t sj, char* d, int64_t dk,
                             int64_t kn, int64_t jn, int64_t* kdone, int64_t* jdone,
                             char* scratch) noexcept nogil
    void dmls_nt_transpose(int W, const char* s, int64_t sj, char* d, int64_t dk,
                           int64_t kn, int64_t jn, int64_t* kdone, char* scratch) noexcept nogil
    void dmls_nt_contig(int W, const char* s, int64_t sj, char* d,
                        int64_t kn, int64_t jn, int64_t* kdone, char* scratch) noexcept nogil
    int64_t dmls_deint3_u8(const char* s, char* d0, char* d1, char* d2, int64_t n) noexcept nogil
    int64_t dmls_deint3_32(const char* s, char* d0, char* d1, char* d2, int64_t n) noexcept nogil
    int64_t dmls_int3_32(const char* s0, const char* s1, const char* s2, char* d, int64_t n) noexcept nogil
    void dmls_stream_copy(char* d, const char* s, int64_t n) noexcept nogil
    int64_t dmls_unpack_nibbles(const uint8_t* q, uint8_t* out, int64_t nbytes) noexcept nogil
    int64_t dmls_pack_nibbles(const uint8_t* src, uint8_t* q, int64_t nbytes) noexcept nogil
    void dmls_store_fence() noexcept nogil
    void dmls_block_transpose(int W, const char* s, const int64_t* js, int64_t jn,
                              char* d, const int64_t* kd, int64_t kn,
                              int sstage, int dstage, int lines, int nt, char* scratch) noexcept nogil
    char* dmls_scratch() noexcept nogil
    int64_t DMLS_SCRATCH_STAGE, DMLS_SCRATCH_STAGE2, DMLS_SCRATCH_KERNEL
    void dmls_block_columns(int W, const char* s, const int64_t* js, int64_t j0, int64_t j1,
                            char* d, const int64_t* kd, int64_t kn) noexcept nogil

cdef enum:
    MAXD = 8

cdef enum Mode:
    MODE_MEMCPY = 0
    MODE_FILL = 1
    MODE_STRIDED = 2
    MODE_TILE = 3
    MODE_NIBBLE = 4
    MODE_INTERLEAVE = 5
    MODE_BLOCK = 6

# MODE_BLOCK: at most this many elements in each of the J and K groups (their
# offset tables live on the stack) and in a block (J x K, sized for L2).
cdef enum:
    BLOCK_GROUP = 1024
    BLOCK_ELEMS = 1 << 16

# Copies below this many bytes keep the GIL (releasing it costs more than the copy).
cdef int64_t NOGIL_THRESHOLD = 1 << 14
# Work below this many destination bytes runs on the calling thread only.
cdef int64_t PARALLEL_THRESHOLD = 1 << 18
# Streaming (non-temporal) stores in copies of at least STREAM_MIN_TOTAL bytes
# (well past the L2/L3 sizes): for contiguous runs of at least STREAM_MIN_RUN
# bytes, and for transposes (tile and block paths) in whole destination lines.
cdef int64_t STREAM_MIN_RUN = 1 << 12
cdef int64_t STREAM_MIN_TOTAL = 1 << 25
# Target number of elements per segment of the innermost dimension.
cdef int64_t SEGMENT_ELEMS = 1 << 16

cdef int g_num_threads = 1

ctypedef struct plan_t:
    int mode
    int width            # bytes per element (1, 2, 4, 8); 1 for the nibble path
    int src_nibble       # nibble path: source holds packed nibbles (else one byte each)
    int dst_nibble
    int sign_extend      # nibble path: INT4 -> int8
    int nouter
    int64_t on[MAXD]     # outer dimensions, slowest first
    int64_t oss[MAXD]    # their source strides (bytes; elements on the nibble path)
    int64_t ods[MAXD]
    int64_t inner_n
    int64_t inner_ss
    int64_t inner_ds
    int64_t k_n          # tile dimension (MODE_TILE): size and strides
    int64_t k_ss
    int64_t k_ds
    int64_t outer_count
    int64_t seg_len
    int64_t nseg
    int64_t ntasks
    int64_t dst_bytes    # bytes written (for the threading threshold)
    int stream           # long contiguous runs in a copy far larger than the caches
    int bnj              # MODE_BLOCK: the J group (destination-contiguous), fastest first:
    int64_t bjn[MAXD]    #   sizes
    int64_t bjs[MAXD]    #   source strides
    int bnk              # the K group (source-contiguous), fastest first:
    int64_t bkn[MAXD]    #   sizes
    int64_t bkd[MAXD]    #   destination strides
    int64_t bjtot        # elements in each group
    int64_t bktot
    int bsstage          # stage source lines / destination runs through L1 buffers
    int bdstage
    int blines           # source lines of k per tile row (1 or 4)


# ---------------------------------------------------------------------------------------
# element kernels

ctypedef fused elem_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t


cdef inline void _strided(elem_t* tag, const char* s, char* d, int64_t n,
                          int64_t ss, int64_t ds) noexcept nogil:
    cdef elem_t v
    cdef int64_t j
    for j in range(n):
        memcpy(&v, s + j * ss, sizeof(elem_t))
        memcpy(d + j * ds, &v, sizeof(elem_t))


cdef inline void _fill(elem_t* tag, const char* s, char* d, int64_t n, int64_t ds) noexcept nogil:
    cdef elem_t v
    cdef int64_t j
    memcpy(&v, s, sizeof(elem_t))
    if ds == <int64_t>sizeof(elem_t):
        # Contiguous destination: a constant stride lets the compiler vectorize.
        for j in range(n):
            memcpy(d + j * <int64_t>sizeof(elem_t), &v, sizeof(elem_t))
    else:
        for j in range(n):
            memcpy(d + j * ds, &v, sizeof(elem_t))


cdef enum:
    TILE_BYTES = 16384      # staging tile, sized for L1
    TILE_PAD = 64           # bytes of padding per staging row (breaks 4 KiB aliasing)
    TILE_ROW_BYTES = 128    # bytes of k per tile row: TK = TILE_ROW_BYTES / W rows


cdef inline void _tile(elem_t* tag, const char* s, char* d,
                       int64_t kn, int64_t kss, int64_t kds,
                       int64_t j0, int64_t j1, int64_t iss, int64_t ids, char* stage) noexcept nogil:
    # Transpose a (kn x [j0, j1)) block: the source's fast dimension is k, the
    # destination's is j.  Each tile is read in source order (a short
    # contiguous run of k per j) into an L1-resident staging buffer, then
    # written out in destination order, one contiguous burst per k.
    # TK rows of P = TJ * W + TILE_PAD bytes, with TK * TJ * W <= TILE_BYTES and
    # TK <= TILE_ROW_BYTES (W >= 1): stage holds TILE_BYTES + TILE_ROW_BYTES * TILE_PAD.
    cdef int64_t TK = TILE_ROW_BYTES // sizeof(elem_t)
    cdef int64_t TJ
    cdef int64_t P
    cdef int64_t kb, ke, jb, je, a, b, nk, nj
    cdef const char* sp
    cdef char* tp
    cdef elem_t v
    if TK > kn:
        TK = kn
    TJ = TILE_BYTES // (TK * <int64_t>sizeof(elem_t))
    TJ = (TJ // 16) * 16
    if TJ > 1024:
        TJ = 1024
    P = TJ * <int64_t>sizeof(elem_t) + TILE_PAD
    kb = 0
    while kb < kn:
        ke = kb + TK
        if ke > kn:
            ke = kn
        nk = ke - kb
        jb = j0
        while jb < j1:
            je = jb + TJ
            if je > j1:
                je = j1
            nj = je - jb
            # gather the tile into stage[a][b]
            for b in range(nj):
                sp = s + kb * kss + (jb + b) * iss
                tp = stage + b * <int64_t>sizeof(elem_t)
                for a in range(nk):
                    memcpy(&v, sp + a * kss, sizeof(elem_t))
                    memcpy(tp + a * P, &v, sizeof(elem_t))
            # write it out: one burst per destination row
            if ids == <int64_t>sizeof(elem_t):
                for a in range(nk):
                    memcpy(d + (kb + a) * kds + jb * ids, stage + a * P, <size_t>(nj * ids))
            else:
                for a in range(nk):
                    tp = stage + a * P
                    for b in range(nj):
                        memcpy(&v, tp + b * <int64_t>sizeof(elem_t), sizeof(elem_t))
                        memcpy(d + (kb + a) * kds + (jb + b) * ids, &v, sizeof(elem_t))
            jb = je
        kb = ke


cdef inline void _deinterleave(elem_t* tag, const char* s, char* d, int64_t kn, int64_t kds,
                               int64_t n) noexcept nogil:
    # Source holds kn interleaved channels (k stride = one element, j stride =
    # kn elements); destination holds kn planes kds bytes apart, each
    # contiguous.  Constant strides per branch let the compiler vectorize.
    cdef int64_t b
    cdef elem_t v0, v1, v2, v3
    cdef char* d0 = d
    cdef char* d1 = d + kds
    cdef char* d2 = d + 2 * kds
    cdef char* d3 = d + 3 * kds
    cdef int64_t done
    if kn == 3 and (sizeof(elem_t) == 1 or sizeof(elem_t) == 4):
        if sizeof(elem_t) == 1:
            done = dmls_deint3_u8(s, d0, d1, d2, n)
        else:
            done = dmls_deint3_32(s, d0, d1, d2, n)
        s = s + 3 * done * <int64_t>sizeof(elem_t)
        d0 = d0 + done * <int64_t>sizeof(elem_t)
        d1 = d1 + done * <int64_t>sizeof(elem_t)
        d2 = d2 + done * <int64_t>sizeof(elem_t)
        n = n - done
    if kn == 2:
        for b in range(n):
            memcpy(&v0, s + (2 * b) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v1, s + (2 * b + 1) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(d0 + b * <int64_t>sizeof(elem_t), &v0, sizeof(elem_t))
            memcpy(d1 + b * <int64_t>sizeof(elem_t), &v1, sizeof(elem_t))
    elif kn == 3:
        for b in range(n):
            memcpy(&v0, s + (3 * b) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v1, s + (3 * b + 1) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v2, s + (3 * b + 2) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(d0 + b * <int64_t>sizeof(elem_t), &v0, sizeof(elem_t))
            memcpy(d1 + b * <int64_t>sizeof(elem_t), &v1, sizeof(elem_t))
            memcpy(d2 + b * <int64_t>sizeof(elem_t), &v2, sizeof(elem_t))
    else:
        for b in range(n):
            memcpy(&v0, s + (4 * b) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v1, s + (4 * b + 1) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v2, s + (4 * b + 2) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(&v3, s + (4 * b + 3) * <int64_t>sizeof(elem_t), sizeof(elem_t))
            memcpy(d0 + b * <int64_t>sizeof(elem_t), &v0, sizeof(elem_t))
            memcpy(d1 + b * <int64_t>sizeof(elem_t), &v1, sizeof(elem_t))
            memcpy(d2 + b * <int64_t>sizeof(elem_t), &v2, sizeof(elem_t))
            memcpy(d3 + b * <int64_t>sizeof(elem_t), &v3, sizeof(elem_t))


cdef inline void _interleave(elem_t* tag, const char* s, char* d, int64_t kn, int64_t kss,
                             int64_t n) noexcept nogil:
    # kn (2..4) source planes kss bytes apart, each contiguous, interleaved
    # into the destination: d[j * kn + a] = plane_a[j].
    cdef int64_t b
    cdef elem_t v0, v1, v2, v3
    cdef const char* s0 = s
    cdef const char* s1 = s + kss
    cdef const char* s2 = s + 2 * kss
    cdef const char* s3 = s + 3 * kss
    cdef int64_t W = <int64_t>sizeof(elem_t)
    cdef int64_t done
    if kn == 3 and sizeof(elem_t) == 4:
        done = dmls_int3_32(s0, s1, s2, d, n)
        s0 = s0 + done * W
        s1 = s1 + done * W
        s2 = s2 + done * W
        d = d + 3 * done * W
        n = n - done
    if kn == 2:
        for b in range(n):
            memcpy(&v0, s0 + b * W, sizeof(elem_t))
            memcpy(&v1, s1 + b * W, sizeof(elem_t))
            memcpy(d + (2 * b) * W, &v0, sizeof(elem_t))
            memcpy(d + (2 * b + 1) * W, &v1, sizeof(elem_t))
    elif kn == 3:
        for b in range(n):
            memcpy(&v0, s0 + b * W, sizeof(elem_t))
            memcpy(&v1, s1 + b * W, sizeof(elem_t))
            memcpy(&v2, s2 + b * W, sizeof(elem_t))
            memcpy(d + (3 * b) * W, &v0, sizeof(elem_t))
            memcpy(d + (3 * b + 1) * W, &v1, sizeof(elem_t))
            memcpy(d + (3 * b + 2) * W, &v2, sizeof(elem_t))
    elif kn == 4:
        for b in range(n):
            memcpy(&v0, s0 + b * W, sizeof(elem_t))
            memcpy(&v1, s1 + b * W, sizeof(elem_t))
            memcpy(&v2, s2 + b * W, sizeof(elem_t))
            memcpy(&v3, s3 + b * W, sizeof(elem_t))
            memcpy(d + (4 * b) * W, &v0, sizeof(elem_t))
            memcpy(d + (4 * b + 1) * W, &v1, sizeof(elem_t))
            memcpy(d + (4 * b + 2) * W, &v2, sizeof(elem_t))
            memcpy(d + (4 * b + 3) * W, &v3, sizeof(elem_t))
    else:
        for b in range(kn):
            _strided(tag, s + b * kss, d + b * W, n, W, kn * W)


cdef inline void _small_k(elem_t* tag, const char* s, char* d,
                          int64_t kn, int64_t kss, int64_t kds,
                          int64_t j0, int64_t j1, int64_t iss, int64_t ids) noexcept nogil:
    # Few source-fast channels: copy each channel as a strided run, in blocks
    # so the source block stays in cache across channels.
    cdef int64_t BLOCK = 4096
    cdef int64_t W = <int64_t>sizeof(elem_t)
    cdef int64_t jb, je, a
    jb = j0
    while jb < j1:
        je = jb + BLOCK
        if je > j1:
            je = j1
        if kss == W and iss == kn * W and ids == W and kn <= 4:
            _deinterleave(tag, s + jb * iss, d + jb * ids, kn, kds, je - jb)
        else:
            for a in range(kn):
                _strided(tag, s + a * kss + jb * iss, d + a * kds + jb * ids, je - jb, iss, ids)
        jb = je


cdef inline void _nibble_row(const plan_t* p, const uint8_t* s, uint8_t* d,
                             int64_t so, int64_t do_, int64_t n, int64_t ss, int64_t ds) noexcept nogil:
    cdef int64_t j, x, y
    cdef uint8_t v, b
    for j in range(n):
        x = so + j * ss
        y = do_ + j * ds
        if p.src_nibble:
            b = s[x >> 1]
            v = (b >> 4) if (x & 1) else (b & 0x0F)
        else:
            v = s[x] & 0x0F
        if p.dst_nibble:
            if y & 1:
                d[y >> 1] = <uint8_t>((d[y >> 1] & 0x0F) | (v << 4))
            else:
                d[y >> 1] = <uint8_t>((d[y >> 1] & 0xF0) | v)
        else:
            if p.sign_extend and (v & 0x08):
                d[y] = <uint8_t>(v | 0xF0)
            else:
                d[y] = v


cdef void _tile_any(int w, const char* s, char* d, int64_t kn, int64_t kss, int64_t kds,
                    int64_t j0, int64_t j1, int64_t iss, int64_t ids, char* stage) noexcept nogil:
    if w == 4:
        _tile[uint32_t](NULL, s, d, kn, kss, kds, j0, j1, iss, ids, stage)
    elif w == 2:
        _tile[uint16_t](NULL, s, d, kn, kss, kds, j0, j1, iss, ids, stage)
    elif w == 1:
        _tile[uint8_t](NULL, s, d, kn, kss, kds, j0, j1, iss, ids, stage)
    else:
        _tile[uint64_t](NULL, s, d, kn, kss, kds, j0, j1, iss, ids, stage)


cdef inline int64_t _whole_lines(const char* d, int64_t w, int64_t n, int64_t* head) noexcept nogil:
    """Of n elements of w bytes from d: set head to those before the first
    64-byte line boundary and return how many fill whole lines after it (0
    when d is not a multiple of w or no whole line fits)."""
    cdef int64_t e = 64 // w
    head[0] = 0
    if (<uintptr_t>d) % w != 0:
        return 0
    head[0] = <int64_t>((64 - (<uintptr_t>d) % 64) % 64) // w
    if head[0] >= n:
        return 0
    return (n - head[0]) // e * e


cdef void _transpose(const plan_t* p, const char* s, char* d, int64_t j0, int64_t j1,
                     char* scratch) noexcept nogil:
    """Tile path for the (k, inner) pair over inner elements j0..j1."""
    cdef int w = p.width
    cdef int64_t jn = j1 - j0
    cdef int64_t kdone = 0, ja = 0, jb = 0, body
    cdef const char* sj = s + j0 * p.inner_ss
    cdef char* dj = d + j0 * p.inner_ds
    # The SIMD kernels cover rows k < kdone of columns ja..jb; the rest goes
    # through the scalar staging tile.
    if DMLSTRIDE_HAVE_SIMD and p.k_ss == w and p.inner_ds == w:
        if p.stream and p.k_ds == jn * w and jn % (16 // w) == 0 and jn * w <= 1024:
            # Whole destination rows back to back: one contiguous stream.
            dmls_nt_contig(w, sj, p.inner_ss, dj, p.k_n, jn, &kdone, scratch)
            jb = jn
        elif p.stream and p.k_ds % 64 == 0:
            # Line-aligned strips; the columns before the first line boundary
            # and after the last one are left to the scalar tile.
            body = _whole_lines(dj, w, jn, &ja)
            jb = ja + body
            if body > 0:
                dmls_nt_transpose(w, sj + ja * p.inner_ss, p.inner_ss, dj + ja * w, p.k_ds,
                                  p.k_n, jb - ja, &kdone, scratch)
        else:
            dmls_simd_transpose(w, sj, p.inner_ss, dj, p.k_ds, p.k_n, jn, &kdone, &jb, scratch)
    if kdone == 0:
        ja = 0
        jb = 0
    if ja > 0:
        _tile_any(w, sj, dj, p.k_n, p.k_ss, p.k_ds, 0, ja, p.inner_ss, p.inner_ds, scratch)
    if jb < jn:
        _tile_any(w, sj, dj, p.k_n, p.k_ss, p.k_ds, jb, jn, p.inner_ss, p.inner_ds, scratch)
    if kdone < p.k_n and jb > ja:
        _tile_any(w, sj + kdone * p.k_ss, dj + kdone * p.k_ds, p.k_n - kdone, p.k_ss, p.k_ds,
                  ja, jb, p.inner_ss, p.inner_ds, scratch)


cdef inline void _group_offsets(int nd, const int64_t* n, const int64_t* st, int64_t* out) noexcept nogil:
    # out[i] = byte offset of element i of a group of nd dimensions (fastest first).
    cdef int64_t cnt = 1, r, q
    cdef int i
    out[0] = 0
    for i in range(nd):
        for r in range(1, n[i]):
            for q in range(cnt):
                out[r * cnt + q] = out[q] + r * st[i]
        cnt *= n[i]


cdef void _block(const plan_t* p, const char* s, char* d, char* scratch) noexcept nogil:
    """One J x K block (MODE_BLOCK) at the given outer offsets."""
    # bjtot, bktot <= BLOCK_GROUP (checked by the planner): 2 x 8 KiB of
    # tables at the start of scratch, the tiles' buffers after them.
    cdef int64_t* js = <int64_t*>scratch
    cdef int64_t* kd = js + BLOCK_GROUP
    cdef char* tiles = <char*>(kd + BLOCK_GROUP)
    _group_offsets(p.bnj, p.bjn, p.bjs, js)
    _group_offsets(p.bnk, p.bkn, p.bkd, kd)
    cdef int64_t w = p.width, ja = 0, body = 0
    if DMLSTRIDE_HAVE_SIMD and p.stream:
        # Streaming stores, whole lines only: the columns before the first
        # line boundary and after the last one are copied element by element.
        body = _whole_lines(d, w, p.bjtot, &ja)
    if body == 0:
        dmls_block_transpose(p.width, s, js, p.bjtot, d, kd, p.bktot, p.bsstage, p.bdstage, p.blines, 0, tiles)
        return
    dmls_block_columns(p.width, s, js, 0, ja, d, kd, p.bktot)
    dmls_block_transpose(p.width, s, js + ja, body, d + ja * w, kd, p.bktot, p.bsstage, 0, p.blines, 1, tiles)
    dmls_block_columns(p.width, s, js, ja + body, p.bjtot, d, kd, p.bktot)


cdef void _row(const plan_t* p, const char* s, char* d, int64_t so, int64_t do_,
               int64_t j0, int64_t j1, char* scratch) noexcept nogil:
    """Copy elements j0..j1 of the innermost dimension at outer offsets (so, do_)."""
    cdef int w = p.width
    cdef int64_t n = j1 - j0
    if p.mode == MODE_BLOCK:
        _block(p, s + so, d + do_, scratch)
        return
    if p.mode == MODE_NIBBLE:
        _nibble_row(p, <const uint8_t*>s, <uint8_t*>d,
                    so + j0 * p.inner_ss, do_ + j0 * p.inner_ds, n, p.inner_ss, p.inner_ds)
        return
    if p.mode == MODE_INTERLEAVE:
        s = s + so + j0 * p.inner_ss
        d = d + do_ + j0 * p.inner_ds
        if w == 4:
            _interleave[uint32_t](NULL, s, d, p.k_n, p.k_ss, n)
        elif w == 2:
            _interleave[uint16_t](NULL, s, d, p.k_n, p.k_ss, n)
        elif w == 1:
            _interleave[uint8_t](NULL, s, d, p.k_n, p.k_ss, n)
        else:
            _interleave[uint64_t](NULL, s, d, p.k_n, p.k_ss, n)
        return
    if p.mode == MODE_TILE and p.k_n <= 8:
        if w == 4:
            _small_k[uint32_t](NULL, s + so, d + do_, p.k_n, p.k_ss, p.k_ds, j0, j1, p.inner_ss, p.inner_ds)
        elif w == 2:
            _small_k[uint16_t](NULL, s + so, d + do_, p.k_n, p.k_ss, p.k_ds, j0, j1, p.inner_ss, p.inner_ds)
        elif w == 1:
            _small_k[uint8_t](NULL, s + so, d + do_, p.k_n, p.k_ss, p.k_ds, j0, j1, p.inner_ss, p.inner_ds)
        else:
            _small_k[uint64_t](NULL, s + so, d + do_, p.k_n, p.k_ss, p.k_ds, j0, j1, p.inner_ss, p.inner_ds)
        return
    if p.mode == MODE_TILE:
        _transpose(p, s + so, d + do_, j0, j1, scratch)
        return
    s = s + so + j0 * p.inner_ss
    d = d + do_ + j0 * p.inner_ds
    if p.mode == MODE_MEMCPY:
        if p.stream and n * w >= STREAM_MIN_RUN:
            dmls_stream_copy(d, s, n * w)
        else:
            memcpy(d, s, <size_t>(n * w))
    elif p.mode == MODE_FILL:
        if w == 1 and p.inner_ds == 1:
            memset(d, (<const uint8_t*>s)[0], <size_t>n)
        elif w == 4:
            _fill[uint32_t](NULL, s, d, n, p.inner_ds)
        elif w == 2:
            _fill[uint16_t](NULL, s, d, n, p.inner_ds)
        elif w == 1:
            _fill[uint8_t](NULL, s, d, n, p.inner_ds)
        else:
            _fill[uint64_t](NULL, s, d, n, p.inner_ds)
    else:
        if w == 4:
            _strided[uint32_t](NULL, s, d, n, p.inner_ss, p.inner_ds)
        elif w == 2:
            _strided[uint16_t](NULL, s, d, n, p.inner_ss, p.inner_ds)
        elif w == 1:
            _strided[uint8_t](NULL, s, d, n, p.inner_ss, p.inner_ds)
        else:
            _strided[uint64_t](NULL, s, d, n, p.inner_ss, p.inner_ds)


cdef inline void _next_outer(const plan_t* p, int64_t* idx, int64_t* so, int64_t* do_) noexcept nogil:
    """Advance the outer-dimension odometer ``idx`` (dims in p.on/oss/ods) and both offsets."""
    cdef int i = p.nouter - 1
    while i >= 0:
        idx[i] += 1
        so[0] += p.oss[i]
        do_[0] += p.ods[i]
        if idx[i] < p.on[i]:
            return
        so[0] -= p.on[i] * p.oss[i]
        do_[0] -= p.on[i] * p.ods[i]
        idx[i] = 0
        i -= 1


cdef void _run_tasks(const plan_t* p, const char* s, char* d, int64_t t0, int64_t t1,
                     char* scratch) noexcept nogil:
    """Run tasks t0..t1 (task = outer index * nseg + segment) with an odometer."""
    cdef int64_t idx[MAXD]
    cdef int64_t so = 0, do_ = 0, rem, o, seg, j0, j1, t
    cdef int i
    if t0 >= t1:
        return
    o = t0 // p.nseg
    seg = t0 % p.nseg
    rem = o
    i = p.nouter - 1
    while i >= 0:
        idx[i] = rem % p.on[i]
        rem = rem // p.on[i]
        so += idx[i] * p.oss[i]
        do_ += idx[i] * p.ods[i]
        i -= 1
    t = t0
    while t < t1:
        j0 = seg * p.seg_len
        j1 = j0 + p.seg_len
        if j1 > p.inner_n:
            j1 = p.inner_n
        _row(p, s, d, so, do_, j0, j1, scratch)
        t += 1
        seg += 1
        if seg == p.nseg:
            seg = 0
            _next_outer(p, idx, &so, &do_)
    if p.stream:
        dmls_store_fence()


ctypedef struct job_t:
    const plan_t* p
    const plan_t* sub
    const plan_t* sruns      # nibbles on both sides (else NULL)
    const plan_t* druns
    const char* s
    char* d
    int64_t chunk
    int64_t total


cdef void _task_chunk(void* ctx, int64_t c) noexcept nogil:
    cdef job_t* j = <job_t*>ctx
    cdef int64_t t0 = c * j.chunk
    cdef int64_t t1 = t0 + j.chunk
    cdef char* scratch = dmls_scratch()   # allocated before this thread took the chunk
    if t1 > j.total:
        t1 = j.total
    if j.druns != NULL:
        _run_staged_both(j.p, j.sub, j.sruns, j.druns, j.s, j.d, t0, t1, scratch)
    elif j.sub != NULL:
        _run_staged(j.p, j.sub, j.s, j.d, t0, t1, scratch)
    else:
        _run_tasks(j.p, j.s, j.d, t0, t1, scratch)


cdef void _split(const plan_t* p, const plan_t* sub, const char* s, char* d,
                 int64_t total, int nthreads,
                 const plan_t* sruns=NULL, const plan_t* druns=NULL) noexcept nogil:
    """Run ``total`` tasks (or staged blocks), split into chunks across the pool."""
    cdef job_t job
    job.sruns = sruns
    job.druns = druns
    cdef int64_t nchunks = nthreads * 8
    if nchunks > total:
        nchunks = total
    job.p = p
    job.sub = sub
    job.s = s
    job.d = d
    job.total = total
    job.chunk = (total + nchunks - 1) // nchunks
    nchunks = (total + job.chunk - 1) // job.chunk
    dmls_parallel(_task_chunk, &job, nchunks, nthreads)


cdef void _execute(const plan_t* p, const char* s, char* d, int nthreads,
                   char* scratch) noexcept nogil:
    if nthreads <= 1 or p.dst_bytes < PARALLEL_THRESHOLD or p.ntasks < 2 or p.mode == MODE_NIBBLE:
        _run_tasks(p, s, d, 0, p.ntasks, scratch)
    else:
        _split(p, NULL, s, d, p.ntasks, nthreads)


# ---------------------------------------------------------------------------------------
# 4-bit tensors packed in some memory order: unpack (or pack) blocks through a
# byte staging buffer and let a byte plan do the layout change.

cdef enum:
    STAGE_ELEMS = 1 << 16


cdef inline void _unpack(const uint8_t* s, int64_t nib0, int64_t n, uint8_t* out, int sign) noexcept nogil:
    cdef int64_t i = 0, k, pairs
    cdef const uint8_t* q
    cdef uint8_t b
    if n <= 0:
        return
    if nib0 & 1:
        out[0] = s[nib0 >> 1] >> 4
        i = 1
    q = s + ((nib0 + i) >> 1)
    pairs = (n - i) >> 1
    for k in range(dmls_unpack_nibbles(q, out + i, pairs), pairs):
        b = q[k]
        out[i + 2 * k] = b & 0x0F
        out[i + 2 * k + 1] = b >> 4
    if i + 2 * pairs < n:
        out[n - 1] = q[pairs] & 0x0F
    if sign:
        for k in range(n):
            out[k] = <uint8_t>((out[k] ^ 0x08) - 0x08)


cdef inline void _pack(const uint8_t* src, int64_t n, uint8_t* d, int64_t nib0) noexcept nogil:
    cdef int64_t i = 0, k, pairs
    cdef uint8_t* q
    if n <= 0:
        return
    if nib0 & 1:
        d[nib0 >> 1] = <uint8_t>((d[nib0 >> 1] & 0x0F) | ((src[0] & 0x0F) << 4))
        i = 1
    q = d + ((nib0 + i) >> 1)
    pairs = (n - i) >> 1
    for k in range(dmls_pack_nibbles(src + i, q, pairs), pairs):
        q[k] = <uint8_t>((src[i + 2 * k] & 0x0F) | ((src[i + 2 * k + 1] & 0x0F) << 4))
    if i + 2 * pairs < n:
        q[pairs] = <uint8_t>((q[pairs] & 0xF0) | (src[n - 1] & 0x0F))


cdef inline void _block_offsets(const plan_t* p, int64_t blk, int64_t* so, int64_t* do_) noexcept nogil:
    """Source and destination offsets of staged block ``blk`` (outer dims in p.on/oss/ods)."""
    cdef int64_t rem = blk, ix
    cdef int i = p.nouter - 1
    so[0] = 0
    do_[0] = 0
    while i >= 0:
        ix = rem % p.on[i]
        rem = rem // p.on[i]
        so[0] += ix * p.oss[i]
        do_[0] += ix * p.ods[i]
        i -= 1


cdef void _run_staged(const plan_t* p, const plan_t* sub, const char* s, char* d,
                      int64_t b0, int64_t b1, char* scratch) noexcept nogil:
    """Blocks b0..b1 of a staged 4-bit copy (outer dims in p.on/oss/ods)."""
    cdef uint8_t* stage = <uint8_t*>(scratch + DMLS_SCRATCH_STAGE)
    cdef char* kernel = scratch + DMLS_SCRATCH_KERNEL
    cdef int64_t blk, so, do_
    for blk in range(b0, b1):
        _block_offsets(p, blk, &so, &do_)
        if p.src_nibble:
            _unpack(<const uint8_t*>s, so, p.inner_n, stage, p.sign_extend)
            _run_tasks(sub, <const char*>stage, d + do_, 0, sub.ntasks, kernel)
        else:
            _run_tasks(sub, s + so, <char*>stage, 0, sub.ntasks, kernel)
            _pack(stage, p.inner_n, <uint8_t*>d, do_)


cdef void _execute_staged(const plan_t* p, const plan_t* sub, const char* s, char* d,
                          int nthreads, char* scratch) noexcept nogil:
    # Packing into nibbles (p.dst_nibble) stays on one thread: neighbouring
    # blocks may share a byte.
    if nthreads <= 1 or p.dst_bytes < PARALLEL_THRESHOLD or p.outer_count < 2 or p.dst_nibble:
        _run_staged(p, sub, s, d, 0, p.outer_count, scratch)
    else:
        _split(p, sub, s, d, p.outer_count, nthreads)


cdef void _runs(const plan_t* r, uint8_t* stage, uint8_t* buf, int64_t nib0, bint unpack) noexcept nogil:
    """Move one staged block between the byte stage and 4-bit ``buf``, run by run.

    ``r`` describes the block as seen from one side: ``r.inner_n`` nibbles
    contiguous in ``buf`` per run, and the runs' outer dims ``r.on`` with
    their stage strides ``r.oss`` (bytes) and ``buf`` strides ``r.ods``
    (nibbles), relative to ``nib0``.
    """
    cdef int64_t idx[MAXD]
    cdef int64_t so = 0, o = 0, t
    cdef int i
    for i in range(r.nouter):
        idx[i] = 0
    for t in range(r.outer_count):
        if unpack:
            _unpack(buf, nib0 + o, r.inner_n, stage + so, 0)
        else:
            _pack(stage + so, r.inner_n, buf, nib0 + o)
        _next_outer(r, idx, &so, &o)


cdef void _run_staged_both(const plan_t* p, const plan_t* sub, const plan_t* sruns,
                           const plan_t* druns, const char* s, char* d,
                           int64_t b0, int64_t b1, char* scratch) noexcept nogil:
    """Blocks b0..b1 of a 4-bit copy with nibbles on both sides: unpack each
    block's source runs into bytes, let the byte plan ``sub`` reorder them into
    destination order, pack the destination runs."""
    cdef uint8_t* stage = <uint8_t*>(scratch + DMLS_SCRATCH_STAGE)
    cdef uint8_t* stage2 = <uint8_t*>(scratch + DMLS_SCRATCH_STAGE2)
    cdef int64_t blk, so, do_
    for blk in range(b0, b1):
        _block_offsets(p, blk, &so, &do_)
        _runs(sruns, stage, <uint8_t*>s, so, True)
        _run_tasks(sub, <const char*>stage, <char*>stage2, 0, sub.ntasks,
                   scratch + DMLS_SCRATCH_KERNEL)
        _runs(druns, stage2, <uint8_t*>d, do_, False)


cdef int64_t _set_outer(plan_t* p, outer) except -1:
    """Store the outer dims (n, source stride, destination stride) in ``p``; return their count."""
    p.nouter = len(outer)
    p.outer_count = 1
    for i, (n, a, b) in enumerate(outer):
        p.on[i] = n
        p.oss[i] = a
        p.ods[i] = b
        p.outer_count *= n
    return p.outer_count


cdef void _execute_staged_both(const plan_t* p, const plan_t* sub, const plan_t* sruns,
                               const plan_t* druns, const char* s, char* d, int nthreads,
                               bint whole_bytes, char* scratch) noexcept nogil:
    # Blocks run in parallel only when every block writes whole destination
    # bytes (no two blocks share one).
    if nthreads <= 1 or not whole_bytes or p.dst_bytes < PARALLEL_THRESHOLD or p.outer_count < 2:
        _run_staged_both(p, sub, sruns, druns, s, d, 0, p.outer_count, scratch)
    else:
        _split(p, sub, s, d, p.outer_count, nthreads, sruns, druns)


def _run_dims(block, int side):
    """Runs of a staged block as seen from one side (1: source, 2: destination).

    ``block`` is a list of (n, source stride, destination stride) in elements.
    The block is laid out in the stage packed in that side's order (its dims
    sorted by that side's stride).  Returns (stage strides of each block dim,
    run length, outer run dims as (n, stage stride, side stride)).
    """
    order = sorted(range(len(block)), key=lambda i: block[i][side], reverse=True)
    stage = [0] * len(block)
    running = 1
    for i in reversed(order):
        stage[i] = running
        running *= block[i][0]
    # Merge the fastest dims while they are contiguous on this side too.
    run = 1
    k = len(order) - 1
    while k >= 0 and block[order[k]][side] == run:
        run *= block[order[k]][0]
        k -= 1
    outer = [(block[i][0], stage[i], block[i][side]) for i in order[:k + 1]]
    return stage, run, outer


def _set_stream_min_total(int64_t nbytes):
    """Set the copy size from which plans made afterwards use streaming stores; return the old one.

    Private: lets the tests reach the streaming kernels with small tensors.
    """
    global STREAM_MIN_TOTAL
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    old = STREAM_MIN_TOTAL
    STREAM_MIN_TOTAL = nbytes
    return old


def _take_group(dims, int stride_side, int64_t unit, int64_t limit, first):
    """Pop a group of dims whose strides on one side run contiguously.

    Starting from ``first`` (or the dim whose stride is ``unit``), take the dim
    whose stride on ``stride_side`` (1 source, 2 destination) equals ``unit``
    times the elements taken so far, while at most ``limit`` elements; a dim
    that does not fit whole is split by its largest divisor that does (the
    rest stays in ``dims``).  Returns (group, elements).
    """
    group = []
    total = 1
    while True:
        if first is not None:
            n, a, b = first
            first = None
        else:
            want = unit * total
            for i, t in enumerate(dims):
                if t[stride_side] == want:
                    n, a, b = dims.pop(i)
                    break
            else:
                break
        room = limit // total
        if n > room:
            c = room
            while c > 1 and n % c:
                c -= 1
            if c > 1:
                group.append((c, a, b))
                dims.append((n // c, a * c, b * c))
                total *= c
            else:
                dims.append((n, a, b))
            break
        group.append((n, a, b))
        total *= n
    return group, total


def _rows_per_set(group, int side, int64_t rows):
    """How many of ``rows`` consecutive group elements share an L1 set (4 KiB period)."""
    g = 4096
    for t in group:
        g = math.gcd(g, t[side])
    return rows * g // 4096


cdef bint _init_block(plan_t* p, merged, int64_t width) except -1:
    """Plan MODE_BLOCK if the layout has a source-contiguous group K and a
    destination-contiguous group J that are both long enough and at least one
    of them spans several dimensions (or a split one); else change nothing."""
    cdef int i
    dims = list(merged)
    inner = dims.pop()
    # J starts at the destination's unit-stride dimension (the innermost).
    if inner[2] != width or any(b == 0 for n, a, b in merged):
        return False
    kgroup, ktot = _take_group(dims, 1, width, BLOCK_GROUP, None)
    if ktot < 8:
        return False
    jgroup, jtot = _take_group(dims, 2, width, min(BLOCK_GROUP, BLOCK_ELEMS // ktot), inner)
    # Two single dimensions are a plain 2-D transpose: the tile path does those.
    if jtot < 8 or (len(kgroup) == 1 and len(jgroup) == 1):
        return False
    dims.sort(key=lambda t: (t[2], t[1]), reverse=True)
    p.mode = MODE_BLOCK
    p.bnj = len(jgroup)
    p.bnk = len(kgroup)
    for i, (n, a, b) in enumerate(jgroup):
        p.bjn[i] = n
        p.bjs[i] = a
    for i, (n, a, b) in enumerate(kgroup):
        p.bkn[i] = n
        p.bkd[i] = b
    p.bjtot = jtot
    p.bktot = ktot
    # When consecutive k rows are adjacent in the destination (the first K
    # dimension's stride is the whole J run) and short (a band of 4-line-tall
    # tiles covers 256 * jtot <= 16 KiB, in L1 while its j tiles fill it),
    # tiles of 4 source lines by 16 j read each source row in longer bursts.
    # Otherwise every k row is its own write stream: keep tiles one line tall.
    p.blines = 4 if kgroup[0][2] == jtot * width and jtot <= 64 else 1
    # Rows a multiple of 4 KiB apart share an L1 set: stage a side when a
    # tile's rows would put more than 8 lines in one set.
    p.bsstage = _rows_per_set(jgroup, 1, 64 // p.blines) > 8
    # Wider elements write 4 or 2 destination rows per micro-block, which the
    # store path absorbs (staging them measured slower).
    p.bdstage = width <= 2 and _rows_per_set(kgroup, 2, 64 * p.blines // width) > 8
    outer_count = _set_outer(p, dims)
    p.inner_n = jtot
    p.inner_ss = jgroup[0][1]
    p.inner_ds = width
    p.k_n = ktot
    p.k_ss = width
    p.k_ds = kgroup[0][2]
    p.seg_len = jtot
    p.nseg = 1
    p.ntasks = outer_count
    p.dst_bytes = outer_count * jtot * ktot * width
    # Streaming stores write whole destination lines, four per k row and
    # tile (one-line-tall tiles of 64 columns): every k row must start on the
    # same line offset.  Four-line-tall tiles write one line per row and
    # tile; streamed that way they measured slower, so they keep plain stores.
    p.stream = (p.dst_bytes >= STREAM_MIN_TOTAL and p.blines == 1 and not p.bdstage
                and jtot >= 64 // width and all(b % 64 == 0 for n, a, b in kgroup))
    return True


def _staged_split(dims, int side):
    """Split dims (n, src, dst strides in elements) for staging, or None.

    ``side`` 1: the source holds nibbles, 2: the destination does.  That side
    must be packed in some order (strides, sorted, are running products of
    the sizes).  Returns (outer dims, block dims, block elements): every block
    is one contiguous run of nibbles of at most STAGE_ELEMS elements.
    """
    order = sorted(dims, key=lambda t: t[side], reverse=True)
    running = 1
    for n, a, b in reversed(order):
        if (a, b)[side - 1] != running:
            return None
        running *= n
    block = []
    elems = 1
    i = len(order) - 1
    while i >= 0 and elems * order[i][0] <= STAGE_ELEMS:
        elems *= order[i][0]
        block.insert(0, order[i])
        i -= 1
    outer = list(order[:i + 1])
    if outer:
        # Chunk the next dimension by the largest divisor that still fits.
        n, a, b = outer[len(outer) - 1]
        c = STAGE_ELEMS // elems
        while c > 1 and n % c:
            c -= 1
        if c > 1:
            outer[len(outer) - 1] = (n // c, a * c, b * c)
            block.insert(0, (c, a, b))
            elems *= c
    return outer, block, elems


# ---------------------------------------------------------------------------------------
# planning

cdef class Plan:
    """A copy plan for one (sizes, source strides, destination strides, element type).

    Parameters
    ----------
    sizes : sequence of int
        Logical sizes, 1-8 dimensions.
    src_strides, dst_strides : sequence of int
        Element strides of each side (non-negative).
    element_bits : int
        4, 8, 16, 32 or 64.
    src_nibble, dst_nibble : bool
        4-bit only: whether each side holds packed nibbles (``True``) or one
        element per byte.
    sign_extend : bool
        4-bit only: sign-extend INT4 nibbles into bytes.
    """

    cdef plan_t p
    cdef plan_t sub          # staged 4-bit copies: the byte plan run per block
    cdef plan_t sruns        # nibbles on both sides: the block's runs in the source
    cdef plan_t druns        # ... and in the destination
    cdef bint staged
    cdef bint both           # staged with nibbles on both sides
    cdef bint whole_bytes    # ... and every block writes whole destination bytes
    cdef readonly object src_extent
    cdef readonly object dst_extent

    def __init__(self, sizes, src_strides, dst_strides, int element_bits,
                 bint src_nibble=True, bint dst_nibble=True, bint sign_extend=False):
        cdef int ndim = len(sizes)
        if ndim < 1 or ndim > MAXD or len(src_strides) != ndim or len(dst_strides) != ndim:
            raise ValueError("plan: sizes and strides must have 1 to 8 matching entries")
        if element_bits not in (4, 8, 16, 32, 64):
            raise ValueError(f"plan: element_bits is {element_bits}; expected 4, 8, 16, 32 or 64")
        nibble = element_bits == 4
        width = 1 if nibble else element_bits // 8
        # Extents (bytes each side must have from its base), computed exactly.
        src_last = 0
        dst_last = 0
        for n, a, b in zip(sizes, src_strides, dst_strides):
            if n < 1 or a < 0 or b < 0:
                raise ValueError("plan: sizes must be >= 1 and strides >= 0")
            src_last += (n - 1) * a
            dst_last += (n - 1) * b
        if nibble:
            self.src_extent = (src_last + 2) // 2 if src_nibble else src_last + 1
            self.dst_extent = (dst_last + 2) // 2 if dst_nibble else dst_last + 1
        else:
            self.src_extent = (src_last + 1) * width
            self.dst_extent = (dst_last + 1) * width
        # Extents stay exact Python ints: a plan whose extent exceeds every
        # possible buffer is refused by the range check in execute(), before
        # any memory is touched.  The C fields below are bounded by the
        # descriptor limits (sizes and strides < 2**32, width <= 8).
        unit = 1 if nibble else width
        dims = [(int(n), int(a) * unit, int(b) * unit) for n, a, b in zip(sizes, src_strides, dst_strides) if n > 1]
        # Order: destination stride descending (slowest first), then source stride.
        dims.sort(key=lambda t: (t[2], t[1]), reverse=True)
        merged = []
        for n, a, b in dims:
            if merged:
                pn, pa, pb = merged[len(merged) - 1]
                if pa == a * n and pb == b * n:
                    merged[len(merged) - 1] = (pn * n, a, b)
                    continue
            merged.append((n, a, b))
        if not merged:
            merged = [(1, unit, unit)]
        cdef plan_t* p = &self.p
        p.width = width
        p.src_nibble = src_nibble if nibble else 0
        p.dst_nibble = dst_nibble if nibble else 0
        p.sign_extend = sign_extend if nibble else 0
        inner_n, inner_ss, inner_ds = merged[len(merged) - 1]
        outer = merged[:len(merged) - 1]
        p.k_n = 1
        p.k_ss = 0
        p.k_ds = 0
        self.staged = False
        self.both = False
        self.whole_bytes = False
        if nibble:
            p.mode = MODE_NIBBLE
            raw = [(int(n), int(a), int(b)) for n, a, b in zip(sizes, src_strides, dst_strides) if n > 1]
            if p.src_nibble != p.dst_nibble:
                split = _staged_split(raw, 1 if p.src_nibble else 2) if raw else None
                if split is not None and split[2] >= 64:
                    self._init_staged(split, sizes)
                    return
            elif p.src_nibble and raw:
                # Nibbles on both sides: blocks contiguous on whichever side is
                # packed in some order, unpacked and repacked run by run.
                for side in (1, 2):
                    split = _staged_split(raw, side)
                    if split is not None and split[2] >= 64:
                        self._init_staged(split, sizes)
                        return
        elif inner_ss == width and inner_ds == width:
            p.mode = MODE_MEMCPY
        elif inner_ss == 0:
            p.mode = MODE_FILL
        elif _init_block(p, merged, width):
            return
        else:
            p.mode = MODE_STRIDED
            # Transposition: another dimension is the source's fastest.
            best = -1
            for i, (n, a, b) in enumerate(outer):
                if 0 < a < inner_ss and (best < 0 or a < outer[best][1]):
                    best = i
            if best >= 0 and inner_n >= 8:
                p.mode = MODE_TILE
                p.k_n, p.k_ss, p.k_ds = outer.pop(best)
            elif best >= 0 and inner_n <= 4 and inner_ds == width:
                # Interleave a few channels: the source-fast dimension k becomes
                # the loop, the destination-fast (small) one the channels.
                n, a, b = outer[best]
                if a == width and b == inner_n * width:
                    outer.pop(best)
                    p.mode = MODE_INTERLEAVE
                    p.k_n, p.k_ss, p.k_ds = inner_n, inner_ss, inner_ds
                    inner_n, inner_ss, inner_ds = n, a, b
        outer_count = _set_outer(p, outer)
        p.inner_n = inner_n
        p.inner_ss = inner_ss
        p.inner_ds = inner_ds
        row_elems = inner_n * p.k_n
        if p.mode == MODE_NIBBLE or row_elems <= SEGMENT_ELEMS:
            p.seg_len = inner_n
        else:
            p.seg_len = max(64, (SEGMENT_ELEMS // p.k_n) // 64 * 64)
            if p.seg_len > inner_n:
                p.seg_len = inner_n
        p.nseg = (inner_n + p.seg_len - 1) // p.seg_len
        p.ntasks = outer_count * p.nseg
        count = 1
        for n in sizes:
            count *= n
        p.dst_bytes = count * width
        p.stream = (p.mode == MODE_MEMCPY or p.mode == MODE_TILE) and p.dst_bytes >= STREAM_MIN_TOTAL

    cdef _init_staged(self, split, sizes):
        outer, block, elems = split
        cdef plan_t* p = &self.p
        cdef Plan sub
        # Block-relative strides: the nibble side is the staging buffer (bytes).
        bsizes = [n for n, a, b in block]
        bsrc = [a for n, a, b in block]
        bdst = [b for n, a, b in block]
        if p.src_nibble and p.dst_nibble:
            # Each side's nibbles go through its own stage, packed in that
            # side's order; the byte plan reorders one stage into the other.
            bsrc, srun, souter = _run_dims(block, 1)
            bdst, drun, douter = _run_dims(block, 2)
            _set_outer(&self.sruns, souter)
            _set_outer(&self.druns, douter)
            self.sruns.inner_n = srun
            self.druns.inner_n = drun
            self.both = True
            # Blocks start, and destination runs start and end, on even nibbles.
            self.whole_bytes = drun % 2 == 0 and all(
                b % 2 == 0 for n, a, b in list(outer) + douter)
        sub = Plan(bsizes, bsrc, bdst, 8)
        self.sub = sub.p
        self.staged = True
        count = _set_outer(p, outer)
        p.inner_n = elems
        p.inner_ss = 1
        p.inner_ds = 1
        p.seg_len = elems
        p.nseg = 1
        p.ntasks = count
        total = 1
        for n in sizes:
            total *= n
        p.dst_bytes = total
        p.stream = 0

    def describe(self):
        """A dict describing the plan (for tests and the benchmark)."""
        names = {MODE_MEMCPY: "memcpy", MODE_FILL: "fill", MODE_STRIDED: "strided",
                 MODE_TILE: "tile", MODE_NIBBLE: "nibble", MODE_INTERLEAVE: "interleave",
                 MODE_BLOCK: "block"}
        info = {
            "mode": "staged" if self.staged else names[self.p.mode],
            "width": self.p.width,
            "outer": [(self.p.on[i], self.p.oss[i], self.p.ods[i]) for i in range(self.p.nouter)],
            "inner": (self.p.inner_n, self.p.inner_ss, self.p.inner_ds),
            "tile": (self.p.k_n, self.p.k_ss, self.p.k_ds)
                    if self.p.mode in (MODE_TILE, MODE_INTERLEAVE) else None,
            "tasks": self.p.ntasks,
            "segment": self.p.seg_len,
            "stream": bool(self.p.stream),
            "both_nibbles": bool(self.both),
            "whole_bytes": bool(self.whole_bytes),
        }
        if self.p.mode == MODE_BLOCK:
            # J: (size, source stride) fastest first; K: (size, destination stride).
            info["block"] = {
                "j": [(self.p.bjn[i], self.p.bjs[i]) for i in range(self.p.bnj)],
                "k": [(self.p.bkn[i], self.p.bkd[i]) for i in range(self.p.bnk)],
                "staged": (bool(self.p.bsstage), bool(self.p.bdstage)),
                "lines": self.p.blines,
            }
        return info


# ---------------------------------------------------------------------------------------
# gather outputs: a small cache of freed output blocks

cdef extern from *:
    """
    /* Freshly mapped memory is zeroed by the kernel on first touch, one page
       fault at a time: for a large gather that costs about as much as the
       copy itself.  Arrays that gather() allocates carry this numpy memory
       handler; when such an array is freed, its block (if at least
       DMLS_CACHE_MIN bytes) is kept, up to a byte limit, and the next output
       of a similar size reuses it, already mapped.  Every call comes from
       numpy with the GIL held (array creation, resize and deallocation), so
       the cache needs no lock; a free-threaded build does not cache.  Each
       block has a header holding its capacity; the data starts
       DMLS_HEADER bytes in (16-byte aligned, as malloc's blocks are). */
    #include <stdlib.h>
    #include <string.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    #define DMLS_HEADER 64
    #define DMLS_CACHE_SLOTS 8
    #define DMLS_CACHE_MIN ((size_t)1 << 20)
    static size_t dmls_cache_limit = (size_t)256 << 20;
    static size_t dmls_cache_bytes = 0;
    static char *dmls_cache_block[DMLS_CACHE_SLOTS];
    static int dmls_cache_hit = 0;  /* the last allocation reused a cached block */

    static size_t dmls_block_cap(char *base) { size_t c; memcpy(&c, base, sizeof c); return c; }

    static void *dmls_block_new(size_t size, int zero) {
        void *base = NULL;
        size_t cap = size ? size : 1;
        if (cap > (size_t)-1 - DMLS_HEADER) return NULL;
        base = zero ? calloc(1, cap + DMLS_HEADER) : malloc(cap + DMLS_HEADER);
        if (base == NULL) return NULL;
        memcpy(base, &cap, sizeof cap);
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (cap >= ((size_t)4 << 20)) {  /* as numpy does for its own large arrays */
            uintptr_t lo = ((uintptr_t)base + 4095) & ~(uintptr_t)4095;
            uintptr_t hi = ((uintptr_t)base + cap + DMLS_HEADER) & ~(uintptr_t)4095;
            if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
        }
    #endif
        return (char *)base + DMLS_HEADER;
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
                return b + DMLS_HEADER;
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
        char *base;
        size_t cap;
        (void)ctx; (void)size;
        if (ptr == NULL) return;
        base = (char *)ptr - DMLS_HEADER;
        cap = dmls_block_cap(base);
    #ifndef Py_GIL_DISABLED
        if (cap >= DMLS_CACHE_MIN && cap <= dmls_cache_limit - dmls_cache_bytes) {
            int i;
            for (i = 0; i < DMLS_CACHE_SLOTS; i++) {
                if (dmls_cache_block[i] == NULL) {
                    dmls_cache_block[i] = base;
                    dmls_cache_bytes += cap;
                    return;
                }
            }
        }
    #endif
        free(base);
    }

    static void *dmls_out_realloc(void *ctx, void *ptr, size_t size) {
        void *fresh;
        size_t cap;
        if (ptr == NULL) return dmls_out_malloc(ctx, size);
        cap = dmls_block_cap((char *)ptr - DMLS_HEADER);
        if (size <= cap && size >= cap / 2) return ptr;
        fresh = dmls_block_new(size, 0);
        if (fresh == NULL) return NULL;
        memcpy(fresh, ptr, size < cap ? size : cap);
        dmls_out_free(ctx, ptr, cap);
        return fresh;
    }

    /* Free every cached block; keep at most ``limit`` bytes from now on.
       Returns the previous limit. */
    static size_t dmls_cache_set_limit(size_t limit) {
        size_t old = dmls_cache_limit;
        int i;
        for (i = 0; i < DMLS_CACHE_SLOTS; i++) {
            if (dmls_cache_block[i] != NULL) {
                free(dmls_cache_block[i]);
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
    static PyObject *dmls_out_handler_capsule(void) {
        return PyCapsule_New(&dmls_out_handler, "mem_handler", NULL);
    }
    """
    object dmls_out_handler_capsule()
    size_t dmls_cache_set_limit(size_t limit) noexcept
    size_t dmls_cache_limit
    size_t dmls_cache_bytes
    int dmls_cache_hit
    size_t DMLS_CACHE_MIN

cdef extern from "numpy/arrayobject.h":
    object PyDataMem_SetHandler(object handler)

cdef object _OUTPUT_HANDLER = dmls_out_handler_capsule()


cdef cnp.ndarray _new_output(int nd, cnp.npy_intp* dims, int type_num, bint* fresh):
    """An uninitialised C-ordered array whose memory comes from the output cache.

    ``fresh`` is set when the memory is newly allocated (not a reused block):
    its pages fault in, zeroed by the kernel, on first write.
    """
    # Outputs too small to be cached skip the handler switch (two context
    # variable updates, which would double the cost of a tiny gather).
    cdef int64_t nbytes = cnp.PyDataType_ELSIZE(cnp.PyArray_DescrFromType(type_num))
    cdef int i
    for i in range(nd):
        if dims[i] >= <cnp.npy_intp>DMLS_CACHE_MIN or nbytes >= <int64_t>DMLS_CACHE_MIN:
            nbytes = DMLS_CACHE_MIN
            break
        nbytes *= dims[i]
    if nbytes < <int64_t>DMLS_CACHE_MIN:
        fresh[0] = True
        return cnp.PyArray_EMPTY(nd, dims, type_num, 0)
    global dmls_cache_hit
    old = PyDataMem_SetHandler(_OUTPUT_HANDLER)
    try:
        dmls_cache_hit = 0
        arr = cnp.PyArray_EMPTY(nd, dims, type_num, 0)
        fresh[0] = not dmls_cache_hit
        return arr
    finally:
        PyDataMem_SetHandler(old)


def new_output(shape, dtype):
    """``numpy.empty(shape, dtype)`` allocated through the output cache.

    Returns (array, fresh): ``fresh`` is False when a cached block was reused.
    """
    cdef cnp.npy_intp dims[MAXD]
    cdef int nd = len(shape)
    cdef int i
    cdef bint fresh = True
    if nd < 1 or nd > MAXD:
        raise ValueError(f"new_output: {nd} dimensions; expected 1 to {MAXD}")
    for i in range(nd):
        dims[i] = shape[i]
    arr = _new_output(nd, dims, np.dtype(dtype).num, &fresh)
    return arr, fresh


def set_output_cache(Py_ssize_t nbytes):
    """Free the cached output blocks and keep at most ``nbytes`` from now on (0: none)."""
    if nbytes < 0:
        raise ValueError(f"output cache size is {nbytes}; expected at least 0")
    return dmls_cache_set_limit(<size_t>nbytes)


def output_cache_info():
    """(bytes held in cached blocks, byte limit)."""
    return dmls_cache_bytes, dmls_cache_limit


# ---------------------------------------------------------------------------------------
# buffers and execution

cdef int _acquire(Py_buffer* view, object obj, bint writable, str name) except -1:
    try:
        PyObject_GetBuffer(obj, view, PyBUF_ANY_CONTIGUOUS)
    except TypeError:
        raise TypeError(
            f"{name} must support the buffer protocol (bytes, bytearray, memoryview, "
            f"array.array, numpy.ndarray, mmap, ...), not {type(obj).__name__}"
        ) from None
    except (BufferError, ValueError) as exc:
        # numpy reports a non-contiguous array as ValueError, others as BufferError.
        raise BufferError(f"{name} is not a contiguous buffer ({exc}); expected contiguous memory") from None
    if writable and view.readonly:
        PyBuffer_Release(view)
        raise BufferError(f"{name} is read-only; expected a writable buffer")
    return 0


cdef int _check_range(Py_buffer* view, Py_ssize_t off, object need, object extent, str name) except -1:
    if off < 0:
        raise BufferError(f"{name} offset is {off}; expected at least 0")
    if need < extent:
        need = extent
    if off + need > view.len:
        raise BufferError(
            f"{name} too small; expected at least {off + need} bytes "
            f"(offset {off} + {need}), got {view.len}"
        )
    return 0


cdef inline int _run_plan(Plan plan, const char* s, char* d, int nthreads,
                          bint fresh=False) except -1:
    # fresh: the destination was just allocated.  Its pages fault in on first
    # write and the kernel zeroes them through the cache, so non-temporal
    # stores would only bypass lines that are already there: use plain stores.
    cdef const plan_t* p = &plan.p
    cdef plan_t local
    # The kernels' staging memory: this thread's heap arena (never the C stack).
    cdef char* scratch = dmls_scratch()
    if scratch == NULL:
        raise MemoryError("no memory for the copy's staging buffers")
    if fresh and p.stream:
        local = plan.p
        local.stream = 0
        p = &local
    if plan.both:
        if p.dst_bytes < NOGIL_THRESHOLD:
            _run_staged_both(p, &plan.sub, &plan.sruns, &plan.druns, s, d, 0, p.outer_count,
                             scratch)
        else:
            with nogil:
                _execute_staged_both(p, &plan.sub, &plan.sruns, &plan.druns, s, d, nthreads,
                                     plan.whole_bytes, scratch)
    elif plan.staged:
        if p.dst_bytes < NOGIL_THRESHOLD:
            _execute_staged(p, &plan.sub, s, d, 1, scratch)
        else:
            with nogil:
                _execute_staged(p, &plan.sub, s, d, nthreads, scratch)
    elif p.dst_bytes < NOGIL_THRESHOLD:
        _execute(p, s, d, 1, scratch)
    else:
        with nogil:
            _execute(p, s, d, nthreads, scratch)
    return 0


def execute(Plan plan not None, object src, Py_ssize_t src_offset, object src_need,
            object dst, Py_ssize_t dst_offset, object dst_need, bint refuse_alias=False,
            bint fresh_dst=False):
    """Run ``plan`` from ``src`` to ``dst``; return False (doing nothing) on aliasing.

    Both buffers are acquired for the whole call; each range
    ``[offset, offset + max(need, plan extent))`` is checked against the
    acquired length before any memory is touched.  With ``refuse_alias``, if
    the two byte ranges intersect, nothing is copied and False is returned.
    """
    cdef Py_buffer sv, dv
    cdef const char* s
    cdef char* d
    cdef uintptr_t s0, s1, d0, d1
    cdef int nthreads = g_num_threads
    _acquire(&sv, src, False, "source buffer")
    try:
        _acquire(&dv, dst, True, "destination buffer")
        try:
            _check_range(&sv, src_offset, src_need, plan.src_extent, "source buffer")
            _check_range(&dv, dst_offset, dst_need, plan.dst_extent, "destination buffer")
            s = <const char*>sv.buf + src_offset
            d = <char*>dv.buf + dst_offset
            if refuse_alias:
                s0 = <uintptr_t>s
                s1 = s0 + <uintptr_t>(<int64_t>plan.src_extent)
                d0 = <uintptr_t>d
                d1 = d0 + <uintptr_t>(<int64_t>plan.dst_extent)
                if s0 < d1 and d0 < s1:
                    return False
            _run_plan(plan, s, d, nthreads, fresh_dst)
        finally:
            PyBuffer_Release(&dv)
    finally:
        PyBuffer_Release(&sv)
    return True


def buffer_info(object obj, str name="buffer"):
    """Return (nbytes, readonly) of a contiguous buffer, with dmlstride's errors."""
    cdef Py_buffer v
    _acquire(&v, obj, False, name)
    try:
        return v.len, bool(v.readonly)
    finally:
        PyBuffer_Release(&v)


def set_num_threads(int n):
    """Set the number of kernel threads (1 when built without threads)."""
    global g_num_threads
    if n < 1:
        raise ValueError(f"number of threads is {n}; expected at least 1")
    g_num_threads = n if DMLSTRIDE_HAVE_THREADS else 1


def get_num_threads():
    """Number of kernel threads in use."""
    return g_num_threads


def have_threads():
    """Whether the kernels can use worker threads (pthreads)."""
    return bool(DMLSTRIDE_HAVE_THREADS)


# ---------------------------------------------------------------------------------------
# gather fast path

cdef class GatherSpec:
    """What a gather needs, resolved once per descriptor and cached on it."""

    cdef Plan plan
    cdef int ndim
    cdef cnp.npy_intp dims[MAXD]
    cdef int type_num
    cdef object dtype
    cdef object total
    cdef Py_ssize_t align

    def __init__(self, Plan plan not None, sizes, dtype, total, Py_ssize_t align):
        cdef int i
        self.plan = plan
        self.ndim = len(sizes)
        for i in range(self.ndim):
            self.dims[i] = sizes[i]
        self.dtype = dtype
        self.type_num = dtype.num
        self.total = total
        self.align = align


def gather_fast(object buffer, object desc, object offset, object out, object check_alignment,
                object desc_type):
    """Gather for the common, already-validated case; None means "take the checked path".

    Taken only when ``desc`` is exactly ``desc_type`` with a cached
    :class:`GatherSpec`, ``offset`` is a plain int that passes the binding
    rule, and ``out`` is None or a matching array.  Bounds are always checked
    against the acquired buffer.
    """
    cdef GatherSpec g
    cdef Py_ssize_t off
    cdef Py_buffer sv
    cdef cnp.ndarray arr
    cdef int i
    cdef uintptr_t s0, s1, d0, d1
    cdef bint fresh
    if type(desc) is not desc_type or type(offset) is not int:
        return None
    if check_alignment is not True and check_alignment is not False:
        return None
    spec = (<dict>desc._cache).get("gather_spec")
    if spec is None:
        return None
    g = <GatherSpec>spec
    if offset < 0 or offset >= (1 << 62):
        return None
    off = offset
    if check_alignment and ((off & 15) or (g.align and off % g.align)):
        return None
    if out is not None:
        if type(out) is not cnp.ndarray:
            return None
        arr = <cnp.ndarray>out
        if (cnp.PyArray_NDIM(arr) != g.ndim or cnp.PyArray_TYPE(arr) != g.type_num
                or not cnp.PyArray_IS_C_CONTIGUOUS(arr) or not cnp.PyArray_ISWRITEABLE(arr)
                or not cnp.PyArray_ISNOTSWAPPED(arr)):
            return None
        for i in range(g.ndim):
            if cnp.PyArray_DIMS(arr)[i] != g.dims[i]:
                return None
    _acquire(&sv, buffer, False, "buffer")
    try:
        # Bounds first: nothing is allocated for a buffer that cannot hold the tensor.
        _check_range(&sv, off, g.total, g.plan.src_extent, "buffer")
        fresh = False
        if out is None:
            arr = _new_output(g.ndim, g.dims, g.type_num, &fresh)
        else:
            # An out array sharing memory with the source range takes the checked path.
            s0 = <uintptr_t>sv.buf + <uintptr_t>off
            s1 = s0 + <uintptr_t>(<int64_t>g.plan.src_extent)
            d0 = <uintptr_t>cnp.PyArray_DATA(arr)
            d1 = d0 + <uintptr_t>cnp.PyArray_NBYTES(arr)
            if s0 < d1 and d0 < s1:
                return None
        _run_plan(g.plan, <const char*>sv.buf + off, <char*>cnp.PyArray_DATA(arr), g_num_threads, fresh)
    finally:
        PyBuffer_Release(&sv)
    return arr
