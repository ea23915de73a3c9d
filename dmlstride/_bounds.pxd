# Buffer checks shared by the Cython bridges (_engine, _convert): inline, so
# each bridge compiles its own copy from this one definition.

from cpython.buffer cimport PyBuffer_Release, PyObject_GetBuffer


cdef inline int get_contiguous(Py_buffer* view, object obj, int flags, str name) except -1:
    """Acquire ``obj``'s contiguous buffer, or raise TypeError / BufferError naming ``name``."""
    try:
        PyObject_GetBuffer(obj, view, flags)
    except TypeError:
        raise TypeError(
            f"{name} must support the buffer protocol (bytes, bytearray, memoryview, "
            f"array.array, numpy.ndarray, mmap, ...), not {type(obj).__name__}"
        ) from None
    except (BufferError, ValueError) as exc:
        # numpy reports a non-contiguous array as ValueError, others as BufferError.
        raise BufferError(
            f"{name} is not a contiguous buffer ({exc}); expected contiguous memory (for a strided "
            "numpy view, dmlstride.view_source(view) gives the buffer it lives in, its byte offset "
            "and its descriptor)"
        ) from None
    return 0


cdef inline int refuse_read_only(Py_buffer* view, bint writable, str name) except -1:
    """Release ``view`` and raise BufferError when a writable buffer was wanted and it is not."""
    if writable and view.readonly:
        PyBuffer_Release(view)
        raise BufferError(f"{name} is read-only; expected a writable buffer")
    return 0


cdef inline int check_range(Py_buffer* view, Py_ssize_t off, object need, object extent, str name) except -1:
    """Refuse unless ``need`` bytes (at least ``extent``) at ``off`` lie inside ``view``."""
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
