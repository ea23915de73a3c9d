# Declarations of the engine's C sources (dmlstride/src), for _engine.pyx.
# Each header says what its functions do; they trust their arguments.

from libc.stdint cimport int64_t


cdef extern from "src/engine-limits.h":
    int DMLS_ALIGNMENT
    long long DMLS_OFFSET_LIMIT
    enum: DMLS_MAX_DIMS
    size_t DMLS_OUTPUT_CACHE_DEFAULT
    int DMLS_MAX_THREADS
    int DMLS_MAX_WORKERS


cdef extern from "src/plan.h":
    enum:
        DMLS_MODE_MEMCPY
        DMLS_MODE_FILL
        DMLS_MODE_STRIDED
        DMLS_MODE_TILE
        DMLS_MODE_NIBBLE
        DMLS_MODE_INTERLEAVE
        DMLS_MODE_BLOCK
        DMLS_COPY_PLAIN
        DMLS_COPY_STAGED
        DMLS_COPY_STAGED_BOTH
        DMLS_COPY_SLABS
    int DMLS_BLOCK_GROUP
    int DMLS_STAGE_ELEMS
    int64_t DMLS_CACHED_TRANSPOSE_BYTES
    int64_t DMLS_TALL_TILE_BYTES
    int DMLS_REPEAT_MIN_ROWS
    int DMLS_SMALL_TILE
    int64_t DMLS_BLOCK_L2_BYTES
    int DMLS_BLOCK_L2_ROWS
    int DMLS_BLOCK_L2_RUN
    int DMLS_CHUNK_BLOCK
    int DMLS_CHUNK_TILE
    int DMLS_CHUNK_IN_PLACE
    int64_t dmls_block_pitch(int64_t n) noexcept nogil
    void dmls_block_chunks(int64_t w, int64_t jn, int64_t kn, int tile, int64_t lines, int64_t* jc,
                           int64_t* kc) noexcept nogil
    void dmls_block_in_place_chunks(int64_t w, int64_t jn, int64_t kn, int64_t lines, int64_t* jc,
                                    int64_t* kc) noexcept nogil

    ctypedef struct dmls_group:
        int ndim
        int64_t size[DMLS_MAX_DIMS]
        int64_t stride[DMLS_MAX_DIMS]
        int64_t elems

    ctypedef struct dmls_plan:
        int mode
        int width
        int src_nibble
        int dst_nibble
        int sign_extend
        int stream
        int outer_ndim
        int64_t outer_size[DMLS_MAX_DIMS]
        int64_t outer_src_stride[DMLS_MAX_DIMS]
        int64_t outer_dst_stride[DMLS_MAX_DIMS]
        int64_t outer_count
        int64_t inner_size
        int64_t inner_src_stride
        int64_t inner_dst_stride
        int64_t tile_size
        int64_t tile_src_stride
        int64_t tile_dst_stride
        int64_t tile_piece
        int64_t tile_pieces
        int64_t segment_len
        int64_t segments
        int64_t tasks
        int64_t dst_bytes
        dmls_group jgroup
        dmls_group kgroup
        int block_stage_src
        int block_stage_dst
        int block_lines
        int block_whole
        int block_next
        int block_dst_ahead
        int block_dst_pieces
        int block_far
        int64_t block_join
        int l2
        int l2_lines
        int64_t narrow_cached_bytes
        int stage_tasks

    ctypedef struct dmls_copy:
        int kind
        int whole_bytes
        int has_rest
        int64_t rest_src
        int64_t rest_dst
        dmls_plan main
        dmls_plan rest
        dmls_plan sub
        dmls_plan src_runs
        dmls_plan dst_runs
        dmls_plan sub2


cdef extern from "src/tile-runs.h":
    int DMLS_RUN_TILE_MAX
    int DMLS_RUN_TILE_WIDE_MAX
    int dmls_run_tile_width(int64_t w)
    int dmls_run_block_width(int64_t w)

cdef extern from "src/scratch.h":
    int64_t DMLS_SLAB_BYTES
    char* dmls_scratch() noexcept nogil


cdef extern from "src/pool.h":
    int DMLSTRIDE_HAVE_THREADS
    ctypedef void (*dmls_chunk_fn)(void* ctx, int64_t chunk) noexcept nogil
    void dmls_parallel(dmls_chunk_fn fn, void* ctx, int64_t nchunks, int nthreads) noexcept nogil
    void dmls_pool_set_threads(int nthreads) noexcept nogil
    int dmls_pool_workers() noexcept nogil


cdef extern from "src/isa.h":
    int DMLSTRIDE_HAVE_SIMD
    enum:
        DMLS_ISA_GENERIC
        DMLS_ISA_SSE2
        DMLS_ISA_SSSE3
        DMLS_ISA_AVX2
    int DMLS_TALL_TILE_ROWS
    int DMLS_CLOSE_ROW_BYTES
    int DMLS_CONTIG_BAND_BYTES
    int DMLS_JOIN_PLANES_TASK_BYTES
    int DMLS_JOIN_MIN_TASKS
    int DMLS_JOIN_PIXELS_ROW_BYTES
    int DMLS_PANEL_MIN_CHAIN_BYTES
    int DMLS_PANEL_MIN_FAR_CHAIN_BYTES
    int DMLS_PANEL_MIN_FAR_TASK_BYTES
    int DMLS_PANEL_FAR_TASK_STRIDE
    int DMLS_PANEL_MAX_TASK_BYTES
    int DMLS_PANEL_MIN_ROWS
    int DMLS_PANEL_MIN_WIDE_ROW_BYTES
    int dmls_isa_select(int max_level) noexcept nogil
    int dmls_band_asks_l2


cdef extern from "src/execute.h":
    void dmls_run(const dmls_copy* c, const char* s, char* d, int nthreads, char* scratch) noexcept nogil
    int64_t dmls_ask_rows_min_bytes


cdef extern from "src/alloc.h":
    object dmls_out_handler_capsule()
    size_t dmls_cache_set_limit(size_t limit) noexcept
    size_t dmls_cache_limit
    size_t dmls_cache_bytes
    int dmls_cache_hit
    size_t DMLS_CACHE_MIN
