/* The walk: an odometer over the outer dimensions, each row converted in
   chunks through a staging buffer (load, arithmetic, store), rows split
   into segments that worker threads share. */
#include "convert.h"
#include "convert_ops.h"
#include "convert_half.h"
#include "convert_rows.h"
#include "convert_stride.h"
#include "scratch.h"

#include <stddef.h>

_Static_assert(sizeof(convert_chunk) <= DMLS_SCRATCH_BYTES, "a chunk's staging fits the scratch arena");

/* Elements per task: a row segment. */
#define SEGMENT (64 * CONVERT_CHUNK)
/* Fewer elements than this run on the calling thread alone. */
#define PARALLEL_MIN ((int64_t)1 << 17)

/* Parameter values for elements j0 .. j0 + n - 1 of a row whose parameters
   start at base: a pointer and a step (0: one value for the whole chunk). */
static const void *params(const convert_job *job, const void *arr, size_t w, int64_t base,
                          int64_t j0, int64_t n, void *buf, int *step) {
    int last = job->ndim - 1;
    int64_t ps = job->param_strides[last], div = job->param_div[last];
    const char *a = (const char *)arr;
    if (ps == 0 || (div > 1 && j0 / div == (j0 + n - 1) / div)) {
        *step = 0;
        return a + (size_t)(base + (j0 / div) * ps) * w;
    }
    *step = 1;
    if (div == 1 && ps == 1) return a + (size_t)(base + j0) * w;
    /* Blocks: fill each block's span with its value (no division per element). */
    int64_t blk = j0 / div, end = (blk + 1) * div - j0;   /* end of the first block, chunk-relative */
    const char *v = a + (size_t)(base + blk * ps) * w;
    for (int64_t i = 0; i < n; v += (size_t)ps * w, end += div) {
        int64_t stop = end < n ? end : n;
        if (w == sizeof(float)) {
            float f = *(const float *)v;
            for (; i < stop; i++) ((float *)buf)[i] = f;
        } else {
            double d = *(const double *)v;
            for (; i < stop; i++) ((double *)buf)[i] = d;
        }
    }
    return buf;
}

/* The arithmetic on n staged values, elements j .. j + n - 1 of a row whose
   parameters start at po.  Blocks of at least MIN_SPAN elements run span by
   span with one parameter value each; otherwise the values are gathered. */
#define MIN_SPAN 16

#define DEFINE_APPLY(name, T, OP)                                                          \
    static void name(const convert_job *job, T *x, int64_t n, int64_t po, int64_t j, T *pa, T *pb) { \
        int last = job->ndim - 1;                                                          \
        int64_t ps = job->param_strides[last], div = job->param_div[last];                 \
        int sa, sb;                                                                        \
        if (ps != 0 && div >= MIN_SPAN) {                                                  \
            int64_t blk = j / div, end = (blk + 1) * div - j;                              \
            const T *s = (const T *)job->scale + po + blk * ps;                            \
            const T *z = (const T *)job->shift + po + blk * ps;                            \
            for (int64_t i = 0; i < n; s += ps, z += ps, end += div) {                     \
                int64_t stop = end < n ? end : n;                                          \
                OP(x + i, stop - i, s, 0, z, 0);                                           \
                i = stop;                                                                  \
            }                                                                              \
            return;                                                                        \
        }                                                                                  \
        const T *a = params(job, job->scale, sizeof(T), po, j, n, pa, &sa);                \
        const T *b = params(job, job->shift, sizeof(T), po, j, n, pb, &sb);                \
        OP(x, n, a, sa, b, sb);                                                            \
    }

#define OP32(...) convert_op32(job->op, __VA_ARGS__)
DEFINE_APPLY(apply32, float, OP32)
DEFINE_APPLY(apply64, double, convert_op64)

/* The fused one-pass rows (convert_stride.h) for a float32 job with one
   scale and bias for the whole row, into a contiguous destination: returns
   how many leading elements of the n at source element e0, destination
   element d0 they did (0 when no fused row fits). */
static int64_t fused(const convert_job *job, const char *src, int64_t e0, int64_t ss, char *dst,
                     int64_t d0, int64_t n, int64_t po) {
    float s = ((const float *)job->scale)[po], b = ((const float *)job->shift)[po];
    int half = job->dst_type == CONVERT_FLOAT16 && convert_half.hardware;
    if (job->dst_type != CONVERT_FLOAT32 && !half) return 0;
    if (job->src_type == CONVERT_UINT8) {
        const uint8_t *p = (const uint8_t *)src + e0;
        return half ? convert_stride.u8_f16(p, ss, n, (uint16_t *)dst + d0, s, b)
                    : convert_stride.u8_f32(p, ss, n, (float *)dst + d0, s, b);
    }
    if (job->src_type == CONVERT_FLOAT32) {
        const float *p = (const float *)src + e0;
        return half ? convert_stride.f32_f16(p, ss, n, (uint16_t *)dst + d0, s, b)
                    : convert_stride.f32_f32(p, ss, n, (float *)dst + d0, s, b);
    }
    return 0;
}

/* The fused 4-bit DequantizeLinear rows: a contiguous row starting on a
   byte, into a contiguous float32 or float16 destination. */
static int64_t fused_dq4(const convert_job *job, const char *src, int64_t e0, char *dst, int64_t d0,
                         int64_t n, int64_t po, int64_t j0) {
    int last = job->ndim - 1;
    int sign = job->src_type == CONVERT_INT4;
    const uint8_t *q = (const uint8_t *)src + (e0 >> 1);
    const float *s = (const float *)job->scale + po, *z = (const float *)job->shift + po;
    int64_t ps = job->param_strides[last], div = job->param_div[last];
    if (e0 & 1) return 0;
    if (job->dst_type == CONVERT_FLOAT32)
        return convert_stride.dq4_f32(q, sign, n, (float *)dst + d0, s, z, ps, div, j0);
    if (job->dst_type == CONVERT_FLOAT16 && convert_half.hardware)
        return convert_stride.dq4_f16(q, sign, n, (uint16_t *)dst + d0, s, z, ps, div, j0);
    return 0;
}

/* Elements j0 .. j1 - 1 of the row at source element so, destination
   element do_, parameter index po.  When the destination row is contiguous
   and of the compute type, values are loaded and computed in place there. */
static void row(const convert_job *job, const char *src, char *dst, int64_t so, int64_t do_,
                int64_t po, int64_t j0, int64_t j1, convert_chunk *buf) {
    int last = job->ndim - 1;
    int64_t ss = job->src_strides[last], ds = job->dst_strides[last];
    union convert_lane *x = &buf->x, *pa = &buf->pa, *pb = &buf->pb;
    if (job->compute64) {
        convert_load_fn load = convert_load64[job->src_type];
        convert_store_fn store = convert_store64[job->dst_type];
        int direct = job->dst_type == CONVERT_FLOAT64 && ds == 1;
        for (int64_t j = j0; j < j1; j += CONVERT_CHUNK) {
            int64_t n = j1 - j < CONVERT_CHUNK ? j1 - j : CONVERT_CHUNK;
            double *v = direct ? (double *)dst + do_ + j : x->d;
            load(src, so + j * ss, ss, n, v);
            apply64(job, v, n, po, j, pa->d, pb->d);
            if (!direct) store(v, n, dst, do_ + j * ds, ds, job->lo, job->hi);
        }
    } else {
        convert_load_fn load = convert_load32[job->src_type];
        convert_store_fn store = convert_store32[job->dst_type];
        int direct = job->dst_type == CONVERT_FLOAT32 && ds == 1;
        if (job->op == CONVERT_OP_AFFINE && job->param_strides[last] == 0 && ds == 1)
            j0 += fused(job, src, so + j0 * ss, ss, dst, do_ + j0, j1 - j0, po);
        else if (job->op == CONVERT_OP_DEQUANTIZE && ss == 1 && ds == 1 &&
                 (job->src_type == CONVERT_INT4 || job->src_type == CONVERT_UINT4))
            j0 += fused_dq4(job, src, so + j0, dst, do_ + j0, j1 - j0, po, j0);
        for (int64_t j = j0; j < j1; j += CONVERT_CHUNK) {
            int64_t n = j1 - j < CONVERT_CHUNK ? j1 - j : CONVERT_CHUNK;
            float *v = direct ? (float *)dst + do_ + j : x->f;
            load(src, so + j * ss, ss, n, v);
            apply32(job, v, n, po, j, pa->f, pb->f);
            if (!direct) store(v, n, dst, do_ + j * ds, ds, job->lo, job->hi);
        }
    }
}

static int64_t segments_per_row(const convert_job *job) {
    int64_t n = job->sizes[job->ndim - 1];
    return (n + SEGMENT - 1) / SEGMENT;
}

/* Tasks t0 .. t1 - 1, task t being segment t % S of row t / S. */
static void run_tasks(const convert_job *job, const char *src, char *dst, int64_t t0, int64_t t1,
                      convert_chunk *buf) {
    int outer = job->ndim - 1;
    int64_t S = segments_per_row(job), n = job->sizes[outer];
    int64_t idx[CONVERT_MAX_DIMS];
    int64_t r = t0 / S, seg = t0 % S;
    for (int k = outer - 1; k >= 0; k--) {
        idx[k] = r % job->sizes[k];
        r /= job->sizes[k];
    }
    for (int64_t t = t0; t < t1;) {
        int64_t so = 0, do_ = 0, po = 0;
        for (int k = 0; k < outer; k++) {
            so += idx[k] * job->src_strides[k];
            do_ += idx[k] * job->dst_strides[k];
            if (job->param_strides[k]) po += (idx[k] / job->param_div[k]) * job->param_strides[k];
        }
        for (; seg < S && t < t1; seg++, t++) {
            int64_t j0 = seg * SEGMENT, j1 = j0 + SEGMENT < n ? j0 + SEGMENT : n;
            row(job, src, dst, so, do_, po, j0, j1, buf);
        }
        if (seg == S) {
            seg = 0;
            for (int k = outer - 1; k >= 0; k--) {
                if (++idx[k] < job->sizes[k]) break;
                idx[k] = 0;
            }
        }
    }
}

static char *no_scratch(void) { return NULL; }

static void serial(convert_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads) {
    (void)nthreads;
    for (int64_t c = 0; c < nchunks; c++) fn(ctx, c);
}

static convert_runtime runtime = {serial, no_scratch};

void convert_set_runtime(convert_runtime rt) {
    runtime = rt;
}

/* Tasks in chunks of grain, claimed by the pool's threads in turn (a thread
   that starts late finds the work already taken). */
typedef struct {
    const convert_job *job;
    const char *src;
    char *dst;
    int64_t tasks, grain;
} shared_work;

static void run_chunk(void *ctx, int64_t c) {
    const shared_work *sh = (const shared_work *)ctx;
    int64_t t0 = c * sh->grain, t1 = t0 + sh->grain < sh->tasks ? t0 + sh->grain : sh->tasks;
    run_tasks(sh->job, sh->src, sh->dst, t0, t1, (convert_chunk *)runtime.scratch());
}

int convert_run(const convert_job *job, const char *src, char *dst) {
    /* The chunk buffers come from this thread's scratch arena, never the C stack
       (a thread started with a small stack must not overflow). */
    convert_chunk *buf = (convert_chunk *)runtime.scratch();
    if (buf == NULL) return -1;
    int64_t rows = 1, total = 1;
    for (int k = 0; k < job->ndim - 1; k++) rows *= job->sizes[k];
    for (int k = 0; k < job->ndim; k++) total *= job->sizes[k];
    int64_t tasks = rows * segments_per_row(job);
    int nt = job->nthreads;
    /* Nibbles of one byte may belong to different tasks: one thread only. */
    if (job->dst_type == CONVERT_UINT4 || job->dst_type == CONVERT_INT4 || total < PARALLEL_MIN) nt = 1;
    if (nt > tasks) nt = (int)tasks;
    if (nt <= 1) {
        run_tasks(job, src, dst, 0, tasks, buf);
        return 0;
    }
    shared_work sh = {job, src, dst, tasks, tasks / ((int64_t)nt * 16)};
    if (sh.grain < 1) sh.grain = 1;
    runtime.parallel(run_chunk, &sh, (tasks + sh.grain - 1) / sh.grain, nt);
    return 0;
}
