# cython: freethreading_compatible = False
"""Private bridge to the conversion kernels (dmlstride/src/convert*.c).

``dmlstride.conversion`` validates every argument; this module acquires the
buffers, re-checks every bound against the memory it actually holds (element
extents, parameter indices), and runs the kernel with the GIL released.
"""

from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS,
    PyBUF_FORMAT,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport int64_t, uint16_t, uintptr_t

cimport numpy as cnp

from dmlstride._bounds cimport check_range, get_contiguous, refuse_read_only

from dmlstride._convert_kernels cimport *
from dmlstride._engine cimport run_chunks, thread_scratch

cnp.import_array()

# The engine's thread pool and scratch memory serve the conversions too.
cdef convert_runtime _runtime
_runtime.parallel = <void (*)(convert_chunk_fn, void*, int64_t, int) noexcept nogil>run_chunks
_runtime.scratch = thread_scratch
convert_set_runtime(_runtime)

# Bytes per element of each data type code (DirectML's values); 4-bit types: 0.
_WIDTH = (0, 4, 2, 4, 2, 1, 4, 2, 1, 8, 8, 8, 0, 0)
# Below this many elements the kernel runs without releasing the GIL.
cdef int64_t NOGIL_THRESHOLD = 1 << 14

convert_half_select(1)
convert_stride_select(1)


def set_simd_rows(bint allow):
    """Allow (True) or forbid (False) the SIMD row loaders; return whether any is in use."""
    return bool(convert_stride_select(allow))


def set_hardware_half(bint allow):
    """Allow (True) or forbid (False) F16C conversions; return whether they are in use."""
    return bool(convert_half_select(allow))


def hardware_half():
    """Whether float16 conversions use the CPU's F16C instructions."""
    return bool(convert_half.hardware)


def f32_to_f16_bits(float f):
    """The software path's float16 bits of a float32 value (for tests)."""
    return convert_f32_to_f16(f)


def f64_to_f16_bits(double d):
    """The software path's float16 bits of a float64 value (for tests)."""
    return convert_f64_to_f16(d)


def f16_bits_to_f32(uint16_t h):
    """The software path's float32 value of float16 bits (for tests)."""
    return convert_f16_to_f32(h)


cdef int _acquire(Py_buffer* view, object obj, bint writable, str name) except -1:
    # What a buffer holds (plain data, no Python objects or pointers) was checked by
    # the caller through the engine's buffer check; this re-acquires it for the call.
    get_contiguous(view, obj, PyBUF_ANY_CONTIGUOUS, name)
    refuse_read_only(view, writable, name)
    return 0


def extent_bytes(sizes, strides, int type_code):
    """Bytes from a tensor's first element to the end of its last one."""
    last = 0
    for n, s in zip(sizes, strides):
        last += (n - 1) * s
    w = _WIDTH[type_code]
    return (last + 2) // 2 if w == 0 else (last + 1) * w


cdef int _fill(int64_t* out, values, int ndim, int64_t minimum, str what) except -1:
    cdef int i
    if len(values) != ndim:
        raise ValueError(f"{what} has {len(values)} entries; expected {ndim}")
    for i in range(ndim):
        v = values[i]
        if not minimum <= v < 2**40:
            raise ValueError(f"{what}[{i}] is {v}; expected {minimum} to 2**40")
        out[i] = v
    return 0


def run(object src, Py_ssize_t src_offset, object src_need,
        object dst, Py_ssize_t dst_offset, object dst_need,
        sizes, src_strides, dst_strides, param_strides, param_div,
        int src_type, int dst_type, bint compute64, int op,
        cnp.ndarray scale not None, cnp.ndarray shift not None,
        double lo, double hi, int nthreads, bint refuse_alias=False):
    """Convert the strided elements of ``src`` into those of ``dst``.

    ``sizes`` and the strides (in elements) describe both tensors after
    merging; ``scale`` and ``shift`` are C-contiguous float32 (float64 with
    ``compute64``) arrays indexed by ``param_strides`` and ``param_div``.
    Each byte range ``[offset, offset + max(need, extent))`` and each
    parameter index is checked before any memory is touched.  With
    ``refuse_alias``, if the two byte ranges intersect nothing is done and
    False is returned.
    """
    cdef convert_job job
    cdef Py_buffer sv, dv
    cdef const char* s
    cdef char* d
    cdef uintptr_t s0, s1, d0, d1
    cdef int ndim = len(sizes)
    cdef int i, rc
    cdef int64_t total = 1
    if not 1 <= ndim <= CONVERT_MAX_DIMS:
        raise ValueError(f"sizes has {ndim} entries; expected 1 to {CONVERT_MAX_DIMS}")
    if not (1 <= src_type < CONVERT_NTYPES and 1 <= dst_type < CONVERT_NTYPES):
        raise ValueError(f"type codes {src_type}, {dst_type}; expected 1 to {CONVERT_NTYPES - 1}")
    if op not in (CONVERT_OP_AFFINE, CONVERT_OP_QUANTIZE, CONVERT_OP_DEQUANTIZE) or (op and compute64):
        raise ValueError(f"operation {op} with compute64={compute64} is not supported")
    job.ndim = ndim
    _fill(job.sizes, sizes, ndim, 1, "sizes")
    _fill(job.src_strides, src_strides, ndim, 0, "src_strides")
    _fill(job.dst_strides, dst_strides, ndim, 0, "dst_strides")
    _fill(job.param_strides, param_strides, ndim, 0, "param_strides")
    _fill(job.param_div, param_div, ndim, 1, "param_div")
    for i in range(ndim):
        total *= job.sizes[i]
        if total > 2**40:
            raise ValueError("sizes hold more than 2**40 elements")
    cdef int pdtype = cnp.NPY_FLOAT64 if compute64 else cnp.NPY_FLOAT32
    last_param = 0
    for i in range(ndim):
        last_param += ((sizes[i] - 1) // param_div[i]) * param_strides[i]
    for arr, what in ((scale, "scale"), (shift, "shift")):
        if cnp.PyArray_TYPE(arr) != pdtype or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
            raise TypeError(f"{what} must be a C-contiguous {'float64' if compute64 else 'float32'} array")
        if last_param >= cnp.PyArray_SIZE(arr):
            raise ValueError(f"{what} has {cnp.PyArray_SIZE(arr)} values; the tensor reads index {last_param}")
    src_extent = extent_bytes(sizes, src_strides, src_type)
    dst_extent = extent_bytes(sizes, dst_strides, dst_type)
    job.src_type = src_type
    job.dst_type = dst_type
    job.compute64 = compute64
    job.op = op
    job.scale = cnp.PyArray_DATA(scale)
    job.shift = cnp.PyArray_DATA(shift)
    job.lo = lo
    job.hi = hi
    job.nthreads = nthreads if nthreads >= 1 else 1
    _acquire(&sv, src, False, "source buffer")
    try:
        _acquire(&dv, dst, True, "destination buffer")
        try:
            check_range(&sv, src_offset, src_need, src_extent, "source buffer")
            check_range(&dv, dst_offset, dst_need, dst_extent, "destination buffer")
            s = <const char*>sv.buf + src_offset
            d = <char*>dv.buf + dst_offset
            if refuse_alias:
                s0 = <uintptr_t>s
                s1 = s0 + <uintptr_t>(<int64_t>src_extent)
                d0 = <uintptr_t>d
                d1 = d0 + <uintptr_t>(<int64_t>dst_extent)
                if s0 < d1 and d0 < s1:
                    return False
            if total < NOGIL_THRESHOLD:
                rc = convert_run(&job, s, d)
            else:
                with nogil:
                    rc = convert_run(&job, s, d)
            if rc != 0:
                raise MemoryError("no memory for the conversion's staging buffers; nothing was written")
        finally:
            PyBuffer_Release(&dv)
    finally:
        PyBuffer_Release(&sv)
    return True


