"""The copy engine's typed bridge: plans, buffers, execution, the gather fast path.

Private module.  Callers (``dmlstride.transfer``) validate descriptors; this module
still re-checks every bound against the buffer it actually acquired before a
kernel touches memory, and holds every buffer export for the whole call.

The planner (``dmlstride._planner``) decides how a layout pair is copied; a
:class:`Plan` checks that decision against the C limits and stores it in the
C structs of ``src/plan.h``; the kernels (``src/*.c``, see the README's "How
it is built") run it, with the GIL released for all but tiny copies.

Gather outputs are allocated through a numpy memory handler that keeps freed
output blocks for reuse (``set_output_cache``).
"""

import ctypes
import math

from cpython.buffer cimport (
    PyBUF_ANY_CONTIGUOUS, PyBUF_FORMAT, PyBUF_RECORDS_RO, PyBuffer_Release, PyObject_CheckBuffer,
    PyObject_GetBuffer,
)
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset, strchr

cimport numpy as cnp

from dmlstride._bounds cimport check_range, get_contiguous, refuse_read_only
import numpy as np

from dmlstride._kernels cimport *
# Relative, so that a copy of the package under another name (benchmarks/compare_builds.py)
# plans with its own planner.
from . import _planner

cnp.import_array()
dmls_isa_select(DMLS_ISA_AVX2)
# The machine's bound, read once here (before any test patches the planner's
# copy; _set_band_asks_l2 switches it for the tests).
dmls_band_asks_l2 = _planner.BAND_ASKS_L2

# The C side's limits (src/limits.h); a test checks they agree with Python's.
ALIGNMENT = DMLS_ALIGNMENT
OFFSET_LIMIT = DMLS_OFFSET_LIMIT
MAX_DIMS = DMLS_MAX_DIMS
OUTPUT_CACHE_DEFAULT = DMLS_OUTPUT_CACHE_DEFAULT
MAX_THREADS = DMLS_MAX_THREADS
MAX_WORKERS = DMLS_MAX_WORKERS
BLOCK_GROUP = DMLS_BLOCK_GROUP
STAGE_ELEMS = DMLS_STAGE_ELEMS
CACHED_TRANSPOSE_BYTES = DMLS_CACHED_TRANSPOSE_BYTES
TALL_TILE_BYTES = DMLS_TALL_TILE_BYTES
REPEAT_MIN_ROWS = DMLS_REPEAT_MIN_ROWS
TALL_TILE_ROWS = DMLS_TALL_TILE_ROWS
SMALL_TILE = DMLS_SMALL_TILE
BLOCK_L2_BYTES = DMLS_BLOCK_L2_BYTES
BLOCK_L2_ROWS = DMLS_BLOCK_L2_ROWS
BLOCK_L2_RUN = DMLS_BLOCK_L2_RUN
RUN_TILE_MAX = DMLS_RUN_TILE_MAX
RUN_TILE_WIDE_MAX = DMLS_RUN_TILE_WIDE_MAX
CLOSE_ROW_BYTES = DMLS_CLOSE_ROW_BYTES
CONTIG_BAND_BYTES = DMLS_CONTIG_BAND_BYTES
JOIN_PLANES_TASK_BYTES = DMLS_JOIN_PLANES_TASK_BYTES
JOIN_MIN_TASKS = DMLS_JOIN_MIN_TASKS
JOIN_PIXELS_ROW_BYTES = DMLS_JOIN_PIXELS_ROW_BYTES
PANEL_MIN_CHAIN_BYTES = DMLS_PANEL_MIN_CHAIN_BYTES
PANEL_MIN_FAR_CHAIN_BYTES = DMLS_PANEL_MIN_FAR_CHAIN_BYTES
PANEL_MIN_FAR_TASK_BYTES = DMLS_PANEL_MIN_FAR_TASK_BYTES
PANEL_FAR_TASK_STRIDE = DMLS_PANEL_FAR_TASK_STRIDE
PANEL_MAX_TASK_BYTES = DMLS_PANEL_MAX_TASK_BYTES
PANEL_MIN_ROWS = DMLS_PANEL_MIN_ROWS
PANEL_MIN_WIDE_ROW_BYTES = DMLS_PANEL_MIN_WIDE_ROW_BYTES
SLAB_BYTES = DMLS_SLAB_BYTES

# Copies below this many bytes keep the GIL (releasing it costs more than the copy).
cdef int64_t NOGIL_THRESHOLD = 1 << 14

cdef int g_num_threads = 1


# ---------------------------------------------------------------------------------------
# plans

cdef dict _MODES = {
    "memcpy": DMLS_MODE_MEMCPY, "fill": DMLS_MODE_FILL, "strided": DMLS_MODE_STRIDED,
    "tile": DMLS_MODE_TILE, "nibble": DMLS_MODE_NIBBLE, "interleave": DMLS_MODE_INTERLEAVE,
    "block": DMLS_MODE_BLOCK,
}
cdef dict _KINDS = {
    "plain": DMLS_COPY_PLAIN, "staged": DMLS_COPY_STAGED, "staged_both": DMLS_COPY_STAGED_BOTH,
    "slabs": DMLS_COPY_SLABS,
}


cdef int _load_outer(dmls_plan* c, outer) except -1:
    """Store outer dims (size, source stride, destination stride), slowest first."""
    if len(outer) > DMLS_MAX_DIMS:
        raise ValueError(f"plan: {len(outer)} outer dimensions; at most {DMLS_MAX_DIMS}")
    c.outer_ndim = len(outer)
    c.outer_count = 1
    for i, (n, a, b) in enumerate(outer):
        c.outer_size[i] = n
        c.outer_src_stride[i] = a
        c.outer_dst_stride[i] = b
        c.outer_count *= n
    return 0


cdef int _load_slabs(dmls_copy* c, layout) except -1:
    """Store the two steps of a copy in slabs, checking that every slab stays
    within the copy's extents on both sides and each step within the buffer."""
    _load_plan(&c.sub, layout.sub)
    _load_plan(&c.sub2, layout.sub2)
    for kp in (layout.sub, layout.sub2):
        if kp.stream or kp.l2 or kp.stage_tasks or (kp.block is not None and (kp.block.whole or kp.block.join)):
            raise ValueError("plan: a step of a copy in slabs streams or uses the L2 buffers")
    # exact Python ints: the furthest slab, then the furthest byte of each step
    slab_src = sum((n - 1) * a for n, a, _ in layout.main.outer)
    slab_dst = sum((n - 1) * b for n, _, b in layout.main.outer)
    if (layout.main.inner != (1, layout.main.width, layout.main.width)
            or any(a < 0 or b < 0 for _, a, b in layout.main.outer)
            or layout.sub_extent[1] > DMLS_SLAB_BYTES or layout.sub2_extent[0] > DMLS_SLAB_BYTES
            or slab_src + layout.sub_extent[0] > layout.src_extent
            or slab_dst + layout.sub2_extent[1] > layout.dst_extent):
        raise ValueError("plan: a slab lies outside the copy or its buffer")
    return 0


cdef int _load_group(dmls_group* g, dims, int64_t elems) except -1:
    if len(dims) > DMLS_MAX_DIMS or not 1 <= elems <= DMLS_BLOCK_GROUP:
        raise ValueError(f"plan: a block group of {elems} elements; at most {DMLS_BLOCK_GROUP}")
    g.ndim = len(dims)
    g.elems = elems
    for i, (n, stride) in enumerate(dims):
        g.size[i] = n
        g.stride[i] = stride
    return 0


cdef int _load_plan(dmls_plan* c, kp) except -1:
    """Store a planner KernelPlan in ``c``, checking what the kernels rely on."""
    memset(c, 0, sizeof(dmls_plan))
    c.mode = _MODES[kp.mode]
    c.width = kp.width
    if c.width not in (1, 2, 4, 8) and not (c.mode == DMLS_MODE_TILE and dmls_run_tile_width(c.width)
                                            or c.mode == DMLS_MODE_BLOCK and dmls_run_block_width(c.width)):
        raise ValueError(f"plan: element width {c.width}; expected 1, 2, 4 or 8 (or runs of 3 to "
                         f"{DMLS_RUN_TILE_WIDE_MAX} bytes in a tile, 3 to {DMLS_RUN_TILE_MAX} in a block)")
    c.src_nibble = kp.src_nibble
    c.dst_nibble = kp.dst_nibble
    c.sign_extend = kp.sign_extend
    c.stream = kp.stream
    _load_outer(c, kp.outer)
    c.inner_size, c.inner_src_stride, c.inner_dst_stride = kp.inner
    if kp.tile is not None:
        if c.mode in (DMLS_MODE_FILL, DMLS_MODE_NIBBLE):
            raise ValueError(f"plan: a {kp.mode} plan has no tile")
        c.tile_size, c.tile_src_stride, c.tile_dst_stride = kp.tile
        if c.tile_size < 1:
            raise ValueError(f"plan: a tile of {c.tile_size} values")
    if c.width not in (1, 2, 4, 8) and (kp.tile is None or c.tile_src_stride != c.width
                                        or c.inner_dst_stride != c.width or kp.stream or kp.l2):
        raise ValueError(f"plan: runs of {c.width} bytes are transposed only with both sides' "
                         f"fastest runs contiguous, without streaming or L2 buffers")
    if c.width not in (1, 2, 4, 8) and c.mode == DMLS_MODE_BLOCK and (
            kp.block.whole or kp.block.next or kp.block.stage_src or kp.block.stage_dst or kp.block.lines != 1):
        raise ValueError(f"plan: blocks of {c.width}-byte runs go in place, one line tall, unstaged")
    channels = 8 if c.width == 1 else 7   # the interleave kernels' most channels
    if c.mode == DMLS_MODE_INTERLEAVE and not 2 <= c.tile_size <= channels:
        raise ValueError(f"plan: {c.tile_size} interleaved channels of {c.width} bytes; "
                         f"expected 2 to {channels}")
    if kp.l2 not in (0, 1, 2) or (kp.l2 and c.mode not in (DMLS_MODE_BLOCK, DMLS_MODE_TILE)):
        raise ValueError(f"plan: L2 mode {kp.l2} for a {kp.mode} plan")
    c.l2 = kp.l2
    if kp.l2_lines not in (1, 2) or (kp.l2_lines != 1 and not kp.l2):
        raise ValueError(f"plan: {kp.l2_lines} lines of k a chunk for L2 mode {kp.l2}")
    c.l2_lines = kp.l2_lines
    if kp.stage_tasks and not (c.mode == DMLS_MODE_TILE and kp.stream):
        raise ValueError(f"plan: staged tasks in a {kp.mode} plan that does not stream")
    c.stage_tasks = kp.stage_tasks
    c.narrow_cached_bytes = _planner.tile_cached_bytes(kp)
    c.segment_len = kp.segment_len
    c.segments = kp.segments
    c.tasks = kp.tasks
    c.dst_bytes = kp.dst_bytes
    pieces, piece = int(kp.tile_pieces), int(kp.tile_piece)   # exact Python ints
    if pieces > 1 and (c.mode != DMLS_MODE_TILE or piece < 1
                       or not (pieces - 1) * piece < c.tile_size <= pieces * piece):
        raise ValueError("plan: pieces do not cover the transposed dimension")
    c.tile_pieces = pieces
    c.tile_piece = piece
    seg_len, segs = int(kp.segment_len), int(kp.segments)   # exact Python ints
    if (seg_len < 1 or segs < 1 or not (segs - 1) * seg_len < c.inner_size <= segs * seg_len
            or c.tasks != c.outer_count * c.segments * max(pieces, 1)):
        raise ValueError("plan: segments do not cover the innermost dimension")
    if c.mode == DMLS_MODE_BLOCK:
        if kp.block.j_elems != c.inner_size:   # segments index the J offset table
            raise ValueError("plan: a block's innermost dimension is not its J group")
        _load_group(&c.jgroup, kp.block.j, kp.block.j_elems)
        _load_group(&c.kgroup, kp.block.k, kp.block.k_elems)
        c.block_stage_src = kp.block.stage_src
        c.block_stage_dst = kp.block.stage_dst
        c.block_lines = kp.block.lines
        c.block_whole = kp.block.whole
        c.block_next = kp.block.next
        c.block_dst_ahead = kp.block.dst_ahead
        c.block_dst_pieces = kp.block.dst_pieces
        c.block_far = kp.block.far
        c.block_join = kp.block.join
    return 0


cdef int _load_runs(dmls_plan* c, runs) except -1:
    memset(c, 0, sizeof(dmls_plan))
    _load_outer(c, runs.outer)
    c.inner_size = runs.run
    return 0


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

    cdef dmls_copy c
    cdef dmls_copy* plain_stores     # the same copy without streaming stores (or NULL)
    cdef readonly object layout      # the planner's decision (a _planner.CopyPlan)
    cdef readonly object src_extent
    cdef readonly object dst_extent

    def __init__(self, sizes, src_strides, dst_strides, int element_bits,
                 bint src_nibble=True, bint dst_nibble=True, bint sign_extend=False):
        layout = _planner.plan_copy(sizes, src_strides, dst_strides, element_bits,
                                    src_nibble, dst_nibble, sign_extend)
        memset(&self.c, 0, sizeof(dmls_copy))
        self.c.kind = _KINDS[layout.kind]
        self.c.whole_bytes = layout.whole_bytes
        _load_plan(&self.c.main, layout.main)
        if layout.kind == "slabs":
            _load_slabs(&self.c, layout)
        elif layout.kind != "plain":
            if not 1 <= layout.main.inner[0] <= DMLS_STAGE_ELEMS:
                raise ValueError(f"plan: staging blocks of {layout.main.inner[0]} elements; "
                                 f"at most {DMLS_STAGE_ELEMS}")
            _load_plan(&self.c.sub, layout.sub)
        if layout.kind == "staged_both":
            _load_runs(&self.c.src_runs, layout.src_runs)
            _load_runs(&self.c.dst_runs, layout.dst_runs)
        if layout.rest is not None:
            # The rest of a copy cut in two must lie within the whole copy's
            # extents on both sides (exact Python ints).
            if (layout.kind != "plain" or layout.rest_src < 0 or layout.rest_dst < 0
                    or layout.rest_src + layout.rest_extent[0] > layout.src_extent
                    or layout.rest_dst + layout.rest_extent[1] > layout.dst_extent):
                raise ValueError("plan: the rest of a copy cut in two lies outside the copy")
            _load_plan(&self.c.rest, layout.rest)
            self.c.has_rest = 1
            self.c.rest_src = layout.rest_src
            self.c.rest_dst = layout.rest_dst
        if (self.c.main.stream or self.c.rest.stream) and self.plain_stores == NULL:
            self.plain_stores = <dmls_copy*>malloc(sizeof(dmls_copy))
            if self.plain_stores == NULL:
                raise MemoryError()
            memcpy(self.plain_stores, &self.c, sizeof(dmls_copy))
            self.plain_stores.main.stream = 0
            self.plain_stores.main.stage_tasks = 0   # (streamed out of its buffer)
            self.plain_stores.rest.stream = 0
            self.plain_stores.rest.stage_tasks = 0
        self.layout = layout
        self.src_extent = layout.src_extent
        self.dst_extent = layout.dst_extent

    def __dealloc__(self):
        free(self.plain_stores)

    def describe(self):
        """A dict describing the plan (for tests and the benchmark)."""
        return _planner.describe(self.layout)


def _block_chunks(int64_t width, int64_t jn, int64_t kn, bint tile=False, bint in_place=False,
                  int64_t lines=1):
    """(values of j, values of k) per L2 chunk of a jn x kn block of
    ``width``-byte values (of a tile's values of j by k when ``tile``; of
    one whose source rows are read in place when ``in_place``: a tile's so
    read, or a block's through both buffers, taking ``lines`` lines of k,
    1 or 2, from each row), and the row pitch of a buffer for rows of jn
    values, as the kernels compute them.

    Private: lets the tests hold the planner's copies of these
    (``_planner.block_chunks``, ``_planner.block_pitch``) to the kernels'.
    """
    cdef int64_t jc = 0, kc = 0
    if width not in (1, 2, 4, 8) or jn < 0 or kn < 0 or jn > (1 << 40) or kn > (1 << 40):
        raise ValueError("width must be 1, 2, 4 or 8 and jn, kn in [0, 2**40]")
    if lines not in (1, 2):
        raise ValueError(f"lines must be 1 or 2, not {lines}")
    if in_place and not tile:
        dmls_block_in_place_chunks(width, jn, kn, lines, &jc, &kc)
    else:
        dmls_block_chunks(width, jn, kn, (DMLS_CHUNK_IN_PLACE if in_place else DMLS_CHUNK_TILE) if tile
                          else DMLS_CHUNK_BLOCK, lines, &jc, &kc)
    return jc, kc, dmls_block_pitch(jn * width)


def _set_ask_rows_min(int64_t nbytes):
    """Set the copy size from which short rows ask for the rows ahead; return the old one.

    Private: lets the tests reach that loop (execute.c) with small tensors.
    The kernels read it as they run, so no plan is dropped.
    """
    global dmls_ask_rows_min_bytes
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    old = dmls_ask_rows_min_bytes
    dmls_ask_rows_min_bytes = nbytes
    return old


def _set_band_asks_l2(bint on):
    """Set whether bands of source rows close together ask for the next
    band into L2 (else into L1); return the old setting.

    Private: lets the tests run that kernel both ways on any machine.  The
    kernels read it as they run, so no plan is dropped.
    """
    global dmls_band_asks_l2
    old = bool(dmls_band_asks_l2)
    dmls_band_asks_l2 = on
    return old


def _set_stream_min_total(int64_t nbytes):
    """Set the copy size from which plans made afterwards use streaming stores; return the old one.

    Private: lets the tests reach the streaming kernels with small tensors.
    Plans kept by descriptor (gather, scatter and copy_tensor's cache, the
    fast paths' specs) were made under the old threshold and are dropped.
    """
    if nbytes < 0:
        raise ValueError("nbytes must be >= 0")
    old = _planner.stream_min_total
    _planner.stream_min_total = nbytes
    from . import transfer
    transfer._plans.clear()
    forget_gathers()
    return old


def _select_isa(int max_level):
    """Use the kernel variants of instruction-set level ``max_level`` at most
    (0 generic, 1 SSE2, 2 SSSE3, 3 AVX2) that the CPU supports; return the level chosen.

    Private: lets the tests run the generic kernels on a SIMD build.
    """
    return dmls_isa_select(max_level)


# ---------------------------------------------------------------------------------------
# gather outputs: a small cache of freed output blocks (src/alloc.c)

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
    cdef cnp.npy_intp dims[DMLS_MAX_DIMS]
    cdef int nd = len(shape)
    cdef int i
    cdef bint fresh = True
    if nd < 1 or nd > DMLS_MAX_DIMS:
        raise ValueError(f"new_output: {nd} dimensions; expected 1 to {DMLS_MAX_DIMS}")
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

# What a buffer holds.  The kernels move raw bytes, which is safe only for plain
# data: bytes written over Python object references (pointers the interpreter
# follows and counts) or other pointers crash the process, and bytes read from
# them leak addresses.  A buffer is accepted only when every code of its
# exported format is plain data; a numpy array is judged by its dtype, and a
# ctypes object also by its fields (its unions and packed structures export a
# bare "B").
cdef enum:
    PLAIN = 0
    POINTERS = 1
    UNKNOWN_FORMAT = 2
    OBJECTS = 3

cdef const char* _PLAIN_CODES = b"@=<>!^0123456789(),{}T xcbB?hHiIlLqQnNefdgspuw\t\n"


cdef int _format_kind(const char* f) noexcept:
    """Classify a struct-module / PEP 3118 format string (NULL means "B")."""
    cdef int kind = PLAIN
    cdef char c
    if f == NULL:
        return PLAIN
    while f[0]:
        c = f[0]
        f += 1
        if c == b'O':
            return OBJECTS
        if c == b':':
            # A field name, ":name:", which may hold any letter.
            while f[0] and f[0] != b':':
                f += 1
            if not f[0]:
                return UNKNOWN_FORMAT if kind == PLAIN else kind
            f += 1
        elif c == b'Z' and (f[0] == b'f' or f[0] == b'd' or f[0] == b'g'):
            f += 1                             # a complex number
        elif c == b'P' or c == b'&' or c == b'X' or c == b'z' or c == b'Z':
            kind = POINTERS                    # void*, pointer-to, function, char*, wchar_t*
        elif strchr(_PLAIN_CODES, c) == NULL and kind == PLAIN:
            kind = UNKNOWN_FORMAT
    return kind


# The metaclasses of ctypes' data types: a set lookup is cheaper than isinstance.
_CTYPES_META = frozenset(type(t) for t in (ctypes.c_int, ctypes.Structure, ctypes.Union, ctypes.c_int * 1,
                                           ctypes.POINTER(ctypes.c_int), ctypes.CFUNCTYPE(None)))


cdef int _ctypes_kind(object tp) except -1:
    """What a ctypes type holds, judged from its fields down to simple types."""
    cdef int kind = PLAIN
    if issubclass(tp, (ctypes._Pointer, ctypes._CFuncPtr)):
        return POINTERS
    code = getattr(tp, "_type_", None)
    if issubclass(tp, ctypes._SimpleCData):
        # "O" is py_object; "z", "Z" and "P" are char*, wchar_t* and void*.
        return OBJECTS if code == "O" else POINTERS if code in ("z", "Z", "P") else PLAIN
    if issubclass(tp, ctypes.Array):
        return _ctypes_kind(code)
    for klass in tp.__mro__:
        for field in vars(klass).get("_fields_", ()):
            kind = max(kind, _ctypes_kind(field[1]))
    return kind


cdef int _refuse_unsafe(object obj, const char* fmt, str name) except -1:
    """Raise TypeError unless the buffer ``obj`` exported (format ``fmt``) holds plain data."""
    cdef int kind = PLAIN
    if cnp.PyArray_Check(obj):
        if cnp.PyDataType_FLAGS(<cnp.dtype>cnp.PyArray_DESCR(<cnp.ndarray>obj)) & 1:   # NPY_ITEM_REFCOUNT
            raise TypeError(
                f"{name} holds Python objects (numpy dtype {obj.dtype}); "
                "expected a buffer of plain numbers or bytes"
            )
        return 0
    kind = _format_kind(fmt)
    detail = None
    if kind == PLAIN:
        if type(obj) is bytes or type(obj) is bytearray:
            return 0
        # A memoryview can recast a buffer ("B"); look at what it was made from too.
        base = obj.obj if type(obj) is memoryview else obj
        if cnp.PyArray_Check(base):
            return _refuse_unsafe(base, NULL, name)
        if type(type(base)) not in _CTYPES_META:
            return 0
        kind = _ctypes_kind(type(base))
        if kind == PLAIN:
            return 0
        detail = f"ctypes type {type(base).__name__}"
    if detail is None:
        detail = f"buffer format {(<bytes>fmt).decode('latin-1')!r}"
    if kind == OBJECTS:
        raise TypeError(f"{name} holds Python objects ({detail}); expected a buffer of plain numbers or bytes")
    if kind == POINTERS:
        raise TypeError(f"{name} holds pointers ({detail}); expected a buffer of plain numbers or bytes")
    raise TypeError(
        f"{name} has {detail}, which is not plain data dmlstride can vouch for; "
        "expected a buffer of plain numbers or bytes"
    )


cdef int _acquire(Py_buffer* view, object obj, bint writable, str name) except -1:
    # A numpy array is judged by its dtype (some, such as datetime64, have no
    # buffer format); anything else by the format it exports.
    cdef bint is_array = cnp.PyArray_Check(obj)
    if is_array:
        _refuse_unsafe(obj, NULL, name)
    get_contiguous(view, obj, PyBUF_ANY_CONTIGUOUS if is_array else PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT, name)
    if not is_array:
        try:
            _refuse_unsafe(obj, view.format, name)
        except BaseException:
            PyBuffer_Release(view)
            raise
    refuse_read_only(view, writable, name)
    return 0


def buffer_format_kind(bytes fmt):
    """How a buffer format is judged: "plain", "objects", "pointers" or "unknown"."""
    return ("plain", "pointers", "unknown", "objects")[_format_kind(fmt)]


def check_plain(object obj, str name):
    """Refuse (TypeError) a buffer-protocol object that holds Python objects or pointers.

    Objects without the buffer protocol pass; any layout is accepted.
    """
    cdef Py_buffer v
    if cnp.PyArray_Check(obj):
        _refuse_unsafe(obj, NULL, name)
        return
    if not PyObject_CheckBuffer(obj):
        return
    try:
        PyObject_GetBuffer(obj, &v, PyBUF_RECORDS_RO)
    except (TypeError, BufferError, ValueError):
        return
    try:
        _refuse_unsafe(obj, v.format, name)
    finally:
        PyBuffer_Release(&v)




cdef inline int _run_plan(Plan plan, const char* s, char* d, int nthreads,
                          bint fresh=False, bint hold_gil=False) except -1:
    # fresh: the destination was just allocated.  Its pages fault in on first
    # write and the kernel zeroes them through the cache, so non-temporal
    # stores would only bypass lines that are already there: use plain stores.
    cdef const dmls_copy* c = plan.plain_stores if fresh and plan.plain_stores != NULL else &plan.c
    # The kernels' staging memory: this thread's heap arena (never the C stack).
    cdef char* scratch = dmls_scratch()
    if scratch == NULL:
        raise MemoryError("no memory for the copy's staging buffers")
    # hold_gil: s or d was read off an array without acquiring its buffer,
    # which only the GIL keeps from being resized or freed meanwhile.
    if c.main.dst_bytes < NOGIL_THRESHOLD or hold_gil:
        dmls_run(c, s, d, 1, scratch)
    else:
        with nogil:
            dmls_run(c, s, d, nthreads, scratch)
    return 0


def execute(Plan plan not None, object src, Py_ssize_t src_offset, object src_need,
            object dst, Py_ssize_t dst_offset, object dst_need, bint refuse_alias=False,
            bint fresh_dst=False, str src_name="source buffer", str dst_name="destination buffer"):
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
    _acquire(&sv, src, False, src_name)
    try:
        _acquire(&dv, dst, True, dst_name)
        try:
            check_range(&sv, src_offset, src_need, plan.src_extent, src_name)
            check_range(&dv, dst_offset, dst_need, plan.dst_extent, dst_name)
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
    # Surplus pool workers (from a higher count before) exit.
    dmls_pool_set_threads(g_num_threads)


def get_num_threads():
    """Number of kernel threads in use."""
    return g_num_threads


cdef void run_chunks(chunk_fn fn, void* ctx, int64_t nchunks, int nthreads) noexcept nogil:
    dmls_parallel(<dmls_chunk_fn>fn, ctx, nchunks, nthreads)


cdef char* thread_scratch() noexcept nogil:
    return dmls_scratch()


def pool_workers():
    """Pool worker threads alive now (they start on demand, up to the thread count - 1)."""
    return dmls_pool_workers()


def have_threads():
    """Whether the kernels can use worker threads (pthreads)."""
    return bool(DMLSTRIDE_HAVE_THREADS)


# ---------------------------------------------------------------------------------------
# fast paths for repeated gathers, scatters and copies

cdef class TransferSpec:
    """What a gather or a scatter needs, resolved once per descriptor
    (see :func:`remember_gather` and :func:`remember_scatter`)."""

    cdef Plan plan
    cdef int ndim
    cdef cnp.npy_intp dims[DMLS_MAX_DIMS]
    cdef int type_num
    cdef object dtype
    cdef object total
    cdef Py_ssize_t align
    cdef int64_t need      # max(total, plan.src_extent), or -1 from DMLS_OFFSET_LIMIT on
    cdef int64_t extent    # plan.src_extent, or -1 likewise

    def __init__(self, Plan plan not None, sizes, dtype, total, Py_ssize_t align):
        cdef int i
        self.plan = plan
        need = max(total, plan.src_extent)
        self.need = need if need < DMLS_OFFSET_LIMIT else -1
        self.extent = plan.src_extent if self.need >= 0 else -1
        self.ndim = len(sizes)
        for i in range(self.ndim):
            self.dims[i] = sizes[i]
        self.dtype = dtype
        self.type_num = dtype.num
        self.total = total
        self.align = align


cdef class CopySpec:
    """What a copy_tensor between two descriptors needs (see :func:`remember_copy`)."""

    cdef Plan plan
    cdef object src_total
    cdef object dst_total
    cdef Py_ssize_t src_align
    cdef Py_ssize_t dst_align

    def __init__(self, Plan plan not None, src_total, dst_total, Py_ssize_t src_align, Py_ssize_t dst_align):
        self.plan = plan
        self.src_total = src_total
        self.dst_total = dst_total
        self.src_align = src_align
        self.dst_align = dst_align


cdef object _OFFSET_LIMIT = DMLS_OFFSET_LIMIT
cdef Py_ssize_t SPEC_LIMIT = 256
# A private sentinel, never a descriptor: nothing a caller passes is it.
cdef object _NO_DESC = object()
# The descriptor type the specs were registered for; only it takes a fast path.
cdef object _desc_type = None


cdef class _Specs:
    """Specs by descriptor, or by (source, destination) pair of them.

    Descriptors are immutable values whose equality and hash cover every
    field a spec is derived from, so an equal descriptor shares the spec.
    The oldest entry goes when the registry is full (SPEC_LIMIT).  The last
    key found is also remembered by identity, so a loop over one descriptor
    never hashes it.  ``b`` is None for a single descriptor.
    """

    cdef dict by_key
    cdef object last_a
    cdef object last_b
    cdef object last_spec

    def __cinit__(self):
        self.by_key = {}
        self.clear()

    cdef void clear(self):
        self.by_key.clear()
        self.last_a = _NO_DESC
        self.last_b = None
        self.last_spec = None

    cdef object find(self, object a, object b):
        if a is self.last_a and b is self.last_b:
            return self.last_spec
        if type(a) is not _desc_type or (b is not None and type(b) is not _desc_type):
            return None
        spec = self.by_key.get(a if b is None else (a, b))
        if spec is not None:
            self.last_a = a
            self.last_b = b
            self.last_spec = spec
        return spec

    cdef void remember(self, object a, object b, object spec):
        global _desc_type
        key = a if b is None else (a, b)
        if key not in self.by_key and len(self.by_key) >= SPEC_LIMIT:
            del self.by_key[next(iter(self.by_key))]
        self.by_key[key] = spec
        _desc_type = type(a)
        self.last_a = a
        self.last_b = b
        self.last_spec = spec


cdef _Specs _gathers = _Specs()
cdef _Specs _scatters = _Specs()
cdef _Specs _copies = _Specs()


cdef inline bint _offset_ok(object offset, object check_alignment, Py_ssize_t align):
    # A plain int offset inside the offset limit that passes the binding rule.
    cdef Py_ssize_t off
    if type(offset) is not int or offset < 0 or offset >= _OFFSET_LIMIT:
        return False
    off = offset
    return not (check_alignment and ((off & (DMLS_ALIGNMENT - 1)) or (align and off % align)))


cdef TransferSpec _usable_spec(_Specs specs, object desc, object offset, object check_alignment):
    # The spec registered for desc when offset and check_alignment let the
    # call take its fast path, else None.
    if check_alignment is not True and check_alignment is not False:
        return None
    spec = specs.find(desc, None)
    if spec is None or not _offset_ok(offset, check_alignment, (<TransferSpec>spec).align):
        return None
    return <TransferSpec>spec


cdef inline bint _array_fits(cnp.ndarray arr, TransferSpec g):
    # A C-contiguous, native-order array of the spec's shape and exact type.
    cdef int i
    if (cnp.PyArray_NDIM(arr) != g.ndim or cnp.PyArray_TYPE(arr) != g.type_num
            or not cnp.PyArray_IS_C_CONTIGUOUS(arr) or not cnp.PyArray_ISNOTSWAPPED(arr)):
        return False
    for i in range(g.ndim):
        if cnp.PyArray_DIMS(arr)[i] != g.dims[i]:
            return False
    return True


cdef inline bint _ranges_meet(uintptr_t a, int64_t an, uintptr_t b, int64_t bn):
    return a < b + <uintptr_t>bn and b < a + <uintptr_t>an


def remember_gather(object desc, TransferSpec spec not None):
    """Register ``spec`` for later gathers through ``desc``, a validated descriptor.

    Only descriptors of the type registered here take the fast path.
    """
    _gathers.remember(desc, None, spec)


def remember_scatter(object desc, TransferSpec spec not None):
    """Register ``spec`` for later scatters through ``desc``.

    transfer.scatter registers a descriptor only after a checked scatter
    through it succeeded (so it is valid and its elements do not overlap),
    and only for types whose values need no range check (not the 4-bit ones).
    """
    _scatters.remember(desc, None, spec)


def remember_copy(object src_desc, object dst_desc, CopySpec spec not None):
    """Register ``spec`` for later copies from ``src_desc`` to ``dst_desc``.

    transfer.copy_tensor registers a pair only after a checked copy through
    it succeeded (so both are valid, agree in sizes and type, and the
    destination's elements do not overlap).
    """
    _copies.remember(src_desc, dst_desc, spec)


def forget_gathers():
    """Empty the gather, scatter and copy-spec registries (for tests)."""
    _gathers.clear()
    _scatters.clear()
    _copies.clear()


def gather_specs_held():
    """Number of descriptors with a registered gather spec."""
    return len(_gathers.by_key)


def scatter_specs_held():
    """Number of descriptors with a registered scatter spec."""
    return len(_scatters.by_key)


def copy_specs_held():
    """Number of descriptor pairs with a registered copy spec."""
    return len(_copies.by_key)


def gather_fast(object buffer, object desc, object offset, object out, object check_alignment):
    """Gather for the common, already-validated case; None means "take the checked path".

    Taken only when ``desc`` has a spec registered by :func:`remember_gather`,
    ``offset`` is a plain int that passes the binding rule, and ``out`` is
    None or a matching array.  Bounds are always checked: against the acquired
    buffer, or for a copy that runs under the GIL from a numpy array, against
    the array's own bytes.
    """
    cdef TransferSpec g
    cdef Py_ssize_t off
    cdef Py_buffer sv
    cdef cnp.ndarray arr
    cdef const char* src
    g = _usable_spec(_gathers, desc, offset, check_alignment)
    if g is None:
        return None
    off = offset
    if out is not None:
        if type(out) is not cnp.ndarray:
            return None
        arr = <cnp.ndarray>out
        if not _array_fits(arr, g) or not cnp.PyArray_ISWRITEABLE(arr):
            return None
    src = _small_array_source(buffer, off, g)
    if src != NULL:
        return _gather_into(g, src, out, True)
    _acquire(&sv, buffer, False, "buffer")
    try:
        # Bounds first: nothing is allocated for a buffer that cannot hold the tensor.
        if g.need < 0 or off + g.need > sv.len:
            check_range(&sv, off, g.total, g.plan.src_extent, "buffer")
        return _gather_into(g, <const char*>sv.buf + off, out, False)
    finally:
        PyBuffer_Release(&sv)


cdef inline const char* _small_array_source(object buffer, Py_ssize_t off, TransferSpec g):
    # The source range of a gather small enough to run under the GIL
    # (NOGIL_THRESHOLD), read straight off a plain numpy array that holds it:
    # C- or F-contiguous (what the buffer protocol would accept), of plain
    # data, and long enough.  NULL for anything else, which then goes through
    # the buffer protocol (and its errors).  Acquiring and releasing the
    # array's buffer was a sixth of a tiny gather's time.
    cdef cnp.ndarray a
    if type(buffer) is not cnp.ndarray or g.need < 0 or g.plan.c.main.dst_bytes >= NOGIL_THRESHOLD:
        return NULL
    a = <cnp.ndarray>buffer
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) or cnp.PyArray_IS_F_CONTIGUOUS(a)):
        return NULL
    if cnp.PyDataType_FLAGS(<cnp.dtype>cnp.PyArray_DESCR(a)) & 1:   # NPY_ITEM_REFCOUNT
        return NULL
    if off + g.need > <int64_t>cnp.PyArray_NBYTES(a):
        return NULL
    return <const char*>cnp.PyArray_DATA(a) + off


cdef object _gather_into(TransferSpec g, const char* src, object out, bint hold_gil):
    # The gather of g from src (bounds checked) into out, or into a new array
    # when out is None; None when out shares memory with the source range.
    cdef bint fresh = False
    cdef cnp.ndarray arr
    if out is None:
        arr = _new_output(g.ndim, g.dims, g.type_num, &fresh)
    else:
        arr = <cnp.ndarray>out
        if g.extent < 0 or _ranges_meet(<uintptr_t>src, g.extent, <uintptr_t>cnp.PyArray_DATA(arr),
                                        cnp.PyArray_NBYTES(arr)):
            # An out array sharing memory with the source range takes the checked path.
            return None
    _run_plan(g.plan, src, <char*>cnp.PyArray_DATA(arr), g_num_threads, fresh, hold_gil)
    return arr


def scatter_fast(object array, object desc, object buffer, object offset, object check_alignment):
    """Scatter for the common, already-validated case; False means "take the checked path".

    Taken only when ``desc`` has a spec registered by :func:`remember_scatter`,
    ``offset`` is a plain int that passes the binding rule, and ``array`` is a
    C-contiguous numpy array of the descriptor's shape and exact dtype that
    does not share memory with the destination range.  The buffer must be
    writable and is bounds-checked as it is acquired.
    """
    cdef TransferSpec g
    cdef Py_ssize_t off
    cdef Py_buffer dv
    cdef cnp.ndarray arr
    if type(array) is not cnp.ndarray:
        return False
    g = _usable_spec(_scatters, desc, offset, check_alignment)
    if g is None:
        return False
    off = offset
    arr = <cnp.ndarray>array
    if not _array_fits(arr, g) or <int64_t>cnp.PyArray_NBYTES(arr) < <int64_t>g.plan.src_extent:
        return False
    _acquire(&dv, buffer, True, "buffer")
    try:
        check_range(&dv, off, g.total, g.plan.dst_extent, "buffer")
        if _ranges_meet(<uintptr_t>cnp.PyArray_DATA(arr), cnp.PyArray_NBYTES(arr),
                        <uintptr_t>dv.buf + <uintptr_t>off, g.plan.dst_extent):
            # An array sharing memory with the destination range takes the checked path (a copy).
            return False
        _run_plan(g.plan, <const char*>cnp.PyArray_DATA(arr), <char*>dv.buf + off, g_num_threads)
    finally:
        PyBuffer_Release(&dv)
    return True


def copy_fast(object src, object src_desc, object dst, object dst_desc,
              object src_offset, object dst_offset, object check_alignment):
    """copy_tensor for the common, already-validated case; False means "take the checked path".

    Taken only when the pair has a spec registered by :func:`remember_copy`,
    both offsets are plain ints that pass the binding rule, and the two byte
    ranges do not overlap.  Both buffers are acquired (the destination
    writable) and bounds-checked, the source first, as the checked path does.
    """
    cdef CopySpec g
    cdef Py_ssize_t soff, doff
    cdef Py_buffer sv, dv
    cdef const char* s
    cdef char* d
    if check_alignment is not True and check_alignment is not False:
        return False
    spec = _copies.find(src_desc, dst_desc)
    if spec is None:
        return False
    g = <CopySpec>spec
    if not (_offset_ok(src_offset, check_alignment, g.src_align)
            and _offset_ok(dst_offset, check_alignment, g.dst_align)):
        return False
    soff = src_offset
    doff = dst_offset
    _acquire(&sv, src, False, "src")
    try:
        check_range(&sv, soff, g.src_total, g.plan.src_extent, "src")
        _acquire(&dv, dst, True, "dst")
        try:
            check_range(&dv, doff, g.dst_total, g.plan.dst_extent, "dst")
            s = <const char*>sv.buf + soff
            d = <char*>dv.buf + doff
            if _ranges_meet(<uintptr_t>s, g.plan.src_extent, <uintptr_t>d, g.plan.dst_extent):
                # Overlapping ranges go through a temporary on the checked path.
                return False
            _run_plan(g.plan, s, d, g_num_threads)
        finally:
            PyBuffer_Release(&dv)
    finally:
        PyBuffer_Release(&sv)
    return True
