/* Convert while moving: one pass over strided source and destination
   elements, converting each element's data type and applying scale and
   bias, quantization or dequantization on the way.

   The caller (dmlstride/_convert.pyx) has checked every bound: each
   source and destination element offset lies inside the acquired buffers,
   each parameter index inside the parameter arrays.  The kernels only walk.

   Element offsets are in elements (for 4-bit types: nibbles, low nibble
   first), relative to the base pointers.  The last dimension is the row
   the inner loops convert; the others are walked by an odometer. */
#ifndef DMLS_CONVERT_H
#define DMLS_CONVERT_H

#include <stdint.h>

/* x86 variants (SSE2, SSSE3, F16C) are compiled with target attributes and
   chosen at run time; other compilers and architectures, and builds with
   DMLSTRIDE_NO_SIMD, take the portable paths only. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(DMLSTRIDE_NO_SIMD)
#define CONVERT_HAVE_X86 1
#else
#define CONVERT_HAVE_X86 0
#endif

#define CONVERT_MAX_DIMS 8
/* Elements converted per chunk of a row (the staging buffers' length). */
#define CONVERT_CHUNK 512
/* Elements a strided load or store converts at a time through its small
   temporary on the stack (the chunk's own buffers live in the per-thread
   scratch arena). */
#define CONVERT_STORE_PIECE 64

/* Data-type codes: DirectML's DML_TENSOR_DATA_TYPE values. */
enum {
    CONVERT_FLOAT32 = 1, CONVERT_FLOAT16 = 2, CONVERT_UINT32 = 3, CONVERT_UINT16 = 4,
    CONVERT_UINT8 = 5, CONVERT_INT32 = 6, CONVERT_INT16 = 7, CONVERT_INT8 = 8,
    CONVERT_FLOAT64 = 9, CONVERT_UINT64 = 10, CONVERT_INT64 = 11, CONVERT_UINT4 = 12,
    CONVERT_INT4 = 13, CONVERT_NTYPES = 14
};

/* What happens between loading and storing, in the compute type:
   AFFINE      y = x * scale + bias          (float32 or float64)
   QUANTIZE    y = rint(x / scale) + zp      (float32; NaN / scale gives zp)
   DEQUANTIZE  y = (x - zp) * scale          (float32) */
enum { CONVERT_OP_AFFINE = 0, CONVERT_OP_QUANTIZE = 1, CONVERT_OP_DEQUANTIZE = 2 };

typedef struct {
    int ndim;                            /* 1..CONVERT_MAX_DIMS */
    int64_t sizes[CONVERT_MAX_DIMS];     /* each >= 1 */
    int64_t src_strides[CONVERT_MAX_DIMS];
    int64_t dst_strides[CONVERT_MAX_DIMS];
    /* Parameter index of an element: sum over k of (i_k / param_div[k]) * param_strides[k]. */
    int64_t param_strides[CONVERT_MAX_DIMS];
    int64_t param_div[CONVERT_MAX_DIMS]; /* each >= 1 */
    int src_type, dst_type;              /* CONVERT_* codes; 4-bit types are packed */
    int compute64;                       /* compute in double, else float */
    int op;                              /* CONVERT_OP_* */
    const void *scale;                   /* float[] or double[] (compute64) */
    const void *shift;                   /* bias or zero point, same type as scale */
    double lo, hi;                       /* integer destinations: saturation range */
    int nthreads;                        /* >= 1; 4-bit destinations always use 1 */
} convert_job;

/* One chunk's staging: the converted values and the two parameter lanes. */
union convert_lane {
    float f[CONVERT_CHUNK];
    double d[CONVERT_CHUNK];
};
typedef struct {
    union convert_lane x, pa, pb;
} convert_chunk;

/* Where the kernels get their threads and staging memory: the bridge
   installs the engine's pool and per-thread scratch arena (one pool for the
   whole package).  parallel runs fn(ctx, c) for every c < nchunks on up to
   nthreads threads and returns when all have run, every thread it uses
   having scratch memory; scratch returns this thread's arena (at least
   sizeof(convert_chunk) bytes) or NULL.  Until they are installed the kernels
   run on the calling thread and find no staging memory (convert_run fails). */
typedef void (*convert_chunk_fn)(void *ctx, int64_t chunk);
typedef struct {
    void (*parallel)(convert_chunk_fn fn, void *ctx, int64_t nchunks, int nthreads);
    char *(*scratch)(void);
} convert_runtime;

void convert_set_runtime(convert_runtime rt);

/* Run the job completely; returns 0, or -1 when the calling thread has no
   memory for its staging buffers (nothing done). */
int convert_run(const convert_job *job, const char *src, char *dst);

#endif
