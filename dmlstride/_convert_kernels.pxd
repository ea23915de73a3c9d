# Declarations of the conversion kernels' C sources (dmlstride/src/convert*),
# for _convert.pyx.  Each header says what its functions do; they trust
# their arguments.

from libc.stdint cimport int64_t, uint16_t


cdef extern from "src/convert.h":
    enum:
        CONVERT_MAX_DIMS
        CONVERT_NTYPES
        CONVERT_OP_AFFINE
        CONVERT_OP_QUANTIZE
        CONVERT_OP_DEQUANTIZE

    ctypedef struct convert_job:
        int ndim
        int64_t sizes[8]
        int64_t src_strides[8]
        int64_t dst_strides[8]
        int64_t param_strides[8]
        int64_t param_div[8]
        int src_type
        int dst_type
        int compute64
        int op
        const void* scale
        const void* shift
        double lo
        double hi
        int nthreads

    ctypedef void (*convert_chunk_fn)(void* ctx, int64_t chunk) noexcept nogil
    ctypedef struct convert_runtime:
        void (*parallel)(convert_chunk_fn fn, void* ctx, int64_t nchunks, int nthreads) noexcept nogil
        char* (*scratch)() noexcept nogil

    void convert_set_runtime(convert_runtime rt) noexcept nogil
    int convert_run(const convert_job* job, const char* src, char* dst) nogil


cdef extern from "src/convert_half.h":
    ctypedef struct convert_half_ops:
        int hardware

    convert_half_ops convert_half
    int convert_half_select(int allow_hardware)
    uint16_t convert_f32_to_f16(float f)
    uint16_t convert_f64_to_f16(double d)
    float convert_f16_to_f32(uint16_t h)


cdef extern from "src/convert_stride.h":
    int convert_stride_select(int allow_simd)
