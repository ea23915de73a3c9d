# Bounds checks shared by the Cython bridges (_engine, _convert): inline, so
# each bridge compiles its own copy from this one definition.

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
