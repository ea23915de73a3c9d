"""The planner's decisions on their own (dmlstride._planner), and the limits
the C side states (src/engine-limits.h, src/plan.h) against Python's."""

import math

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import _engine, _limits, _planner


def test_c_limits_agree_with_python():
    assert _engine.ALIGNMENT == _limits.MINIMUM_BUFFER_TENSOR_ALIGNMENT
    assert _engine.OFFSET_LIMIT == _limits.OFFSET_LIMIT
    assert _engine.MAX_DIMS == _limits.MAX_DIMENSION_COUNT == _planner.MAX_DIMS
    assert _engine.OUTPUT_CACHE_DEFAULT == _limits.DEFAULT_OUTPUT_CACHE
    assert _engine.MAX_THREADS == _limits.MAX_THREADS
    assert _engine.MAX_WORKERS == _limits.MAX_THREADS - 1
    assert _engine.BLOCK_GROUP == _planner.BLOCK_GROUP
    assert _engine.STAGE_ELEMS == _planner.STAGE_ELEMS
    assert _engine.CACHED_TRANSPOSE_BYTES == _planner.TRANSPOSE_FROM_MEMORY
    assert _engine.TALL_TILE_BYTES == _planner.TALL_TILE_MIN
    assert _engine.REPEAT_MIN_ROWS == _planner.REPEAT_MIN_ROWS
    assert _engine.TALL_TILE_ROWS == _planner.TALL_TILE_SEGMENT
    assert _engine.SMALL_TILE == _planner.SMALL_TILE
    assert _engine.BLOCK_L2_BYTES == _planner.BLOCK_L2_BYTES
    assert _engine.BLOCK_L2_ROWS == _planner.BLOCK_L2_ROWS
    assert _engine.BLOCK_L2_RUN == _planner.BLOCK_L2_RUN
    assert _engine.RUN_TILE_MAX == _planner.RUN_TILE_MAX
    assert _engine.RUN_TILE_WIDE_MAX == _planner.RUN_TILE_WIDE_MAX
    assert _engine.CLOSE_ROW_BYTES == _planner.CLOSE_ROW_BYTES
    assert _engine.CONTIG_BAND_BYTES == _planner.CONTIG_BAND_BYTES
    assert _engine.JOIN_PLANES_TASK_BYTES == _planner.JOIN_PLANES_TASK_BYTES
    assert _engine.JOIN_MIN_TASKS == _planner.JOIN_MIN_TASKS
    assert _engine.JOIN_PIXELS_ROW_BYTES == _planner.JOIN_PIXELS_ROW_BYTES
    assert _engine.PANEL_MIN_CHAIN_BYTES == _planner.PANEL_MIN_CHAIN_BYTES
    assert _engine.PANEL_MIN_FAR_CHAIN_BYTES == _planner.PANEL_MIN_FAR_CHAIN_BYTES
    assert _engine.PANEL_MIN_FAR_TASK_BYTES == _planner.PANEL_MIN_FAR_TASK_BYTES
    assert _engine.PANEL_FAR_TASK_STRIDE == _planner.PANEL_FAR_TASK_STRIDE
    assert _engine.PANEL_MAX_TASK_BYTES == _planner.PANEL_MAX_TASK_BYTES
    assert _engine.PANEL_MIN_ROWS == _planner.PANEL_MIN_ROWS
    assert _engine.PANEL_MIN_WIDE_ROW_BYTES == _planner.PANEL_MIN_WIDE_ROW_BYTES
    assert _planner.SLAB_BYTES <= _engine.SLAB_BYTES   # a slab fits the thread's buffer


@pytest.mark.parametrize("tile, in_place, lines", [(False, False, 1), (True, False, 1), (True, True, 1),
                                                   (False, True, 1), (True, True, 2), (False, True, 2)],
                         ids=["block", "tile", "tile-in-place", "block-in-place", "tile-in-place-2-lines",
                              "block-in-place-2-lines"])
@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_block_chunks_agree_with_the_kernels(width, tile, in_place, lines):
    # The planner's copies of the kernels' L2 chunking and buffer pitch
    # decide which blocks go through L2 and at what cost: over J and K from
    # 1 to 4096 (every length up to 160, then steps that hit multiples of
    # lines and of 4 KiB pitches and the odd lengths beside them), both
    # must give the same chunks and the same pitch, a block's and a tile's,
    # read in place (one line of k a source row, or two) or through the
    # source buffer.
    lengths = sorted(set(range(1, 161)) | {n + d for n in range(192, 4097, 64) for d in (-1, 0, 1)})
    for jn in lengths:
        for kn in lengths[::7]:
            jc, kc, pitch = _engine._block_chunks(width, jn, kn, tile, in_place, lines)
            assert (jc, kc) == _planner.block_chunks(width, jn, kn, tile, in_place, lines), (jn, kn)
            assert pitch == _planner.block_pitch(jn * width), jn


def test_block_chunks_refuse_other_lines():
    for lines in (0, 3, -1):
        with pytest.raises(ValueError, match="lines must be 1 or 2"):
            _engine._block_chunks(1, 2048, 2048, True, True, lines)


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_chunks_read_in_place_take_two_lines_where_asked(width):
    # Two lines of k a source row (at least 16 values) in a tile's chunk
    # read in place from a run of j on, and in a block's through both
    # buffers whatever its j; one line (or 16 values) otherwise.
    run, kn = _planner.BLOCK_L2_RUN // width, 3000
    assert _planner.in_place_chunk_k(width, 2) == max(128 // width, 16)
    assert _planner.in_place_chunk_k(width, 1) == max(64 // width, 16)
    for jn in (run, run + 1, 5000):
        assert _planner.block_chunks(width, jn, kn, tile=True, in_place=True, lines=2) == (
            run, _planner.in_place_chunk_k(width, 2))
    for jn, kn in ((5000, 3000), (300, 288), (40, 2000)):
        jc, kc = _planner.block_chunks(width, jn, kn, in_place=True, lines=2)
        assert kc == min(_planner.in_place_chunk_k(width, 2), _planner.block_chunks(width, jn, kn, tile=True,
                                                                                     in_place=True, lines=2)[1])
    # a block's own chunks (through the source buffer) take no lines
    assert _planner.block_chunks(width, 5000, 3000, lines=2) == _planner.block_chunks(width, 5000, 3000)


@pytest.mark.parametrize("row_bytes, lines", [(1152, 2), (1280, 2), (11520, 2), (1160, 1), (1088, 1),
                                              (11584, 1), (2048, 1)])
def test_rows_a_multiple_of_128_bytes_apart_take_two_lines(row_bytes, lines, monkeypatch):
    # A 2-D transpose through L2 whose source rows are read in place takes
    # two lines of k a chunk where the rows lie a multiple of PHASE_BYTES
    # apart (a large L3's bound); rows a multiple of 1 KiB apart are copied
    # to the buffer (no lines of their own), others take one line.  A small
    # L3 keeps one line everywhere.
    desc = ds.BufferTensorDesc("uint8", [row_bytes, 6000], strides=[1, row_bytes])
    monkeypatch.setattr(_planner, "L2_PHASE_LINES", _planner.l3_bound("L2_PHASE_LINES", small_l3=False))
    plan = _planner.plan_copy(desc.sizes, desc.strides, [6000, 1], 8)
    assert plan.main.mode == "tile" and plan.main.l2 == 2 and plan.main.inner[1] == row_bytes
    assert plan.main.l2_lines == lines == _planner.l2_lines(plan.main)
    assert _planner.describe(plan)["l2_lines"] == lines
    if _planner.l2_reads_in_place(row_bytes):
        assert _planner.describe(plan)["l2_chunk"][1] == _planner.in_place_chunk_k(1, lines)
    monkeypatch.setattr(_planner, "L2_PHASE_LINES", _planner.l3_bound("L2_PHASE_LINES", small_l3=True))
    assert _planner.plan_copy(desc.sizes, desc.strides, [6000, 1], 8).main.l2_lines == 1


def test_a_block_takes_two_lines_only_where_every_row_of_j_is_128_apart():
    # A block through both buffers: the j group's strides (those of
    # dimensions longer than 1) must all be multiples of PHASE_BYTES.
    kp = _planner.KernelPlan(mode="block", width=2, outer=[], inner=(238, 4352, 2), tile=(544, 2, 476), l2=2,
                             block=_planner.BlockGroups(j=[(14, 73984), (17, 4352)], k=[(544, 476)],
                                                        j_elems=238, k_elems=544, stage_src=False,
                                                        stage_dst=False, lines=1))
    assert _planner.l2_lines(kp) == _planner.L2_PHASE_LINES
    kp.block.j = [(14, 73984), (17, 4360)]
    assert _planner.l2_lines(kp) == 1
    kp.block.j = [(1, 73990), (17, 4352)]   # a dimension of 1 moves no row
    assert _planner.l2_lines(kp) == _planner.L2_PHASE_LINES
    kp.l2 = 1   # through the source buffer: rows copied there
    assert _planner.l2_lines(kp) == 1


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_a_tile_read_in_place_takes_one_line_of_k_a_chunk(width):
    # Source rows read where they are: from BLOCK_L2_RUN bytes of j (a
    # segment of exactly that many, or more), a chunk takes one line of each
    # source row (16 values at least), where the same tile through the
    # source buffer takes as many lines as fit.
    run, kn = _planner.BLOCK_L2_RUN // width, 3000
    for jn in (run, run + 1, 5000):
        jc, kc = _planner.block_chunks(width, jn, kn, tile=True, in_place=True)
        assert jc == run
        assert kc == max(64 // width, 16) == _planner.in_place_chunk_k(width)
        assert _planner.block_chunks(width, jn, kn, tile=True)[1] > kc
    # j short of a run: the chunks are cut as before
    short = run - 16
    assert (_planner.block_chunks(width, short, kn, tile=True, in_place=True)
            == _planner.block_chunks(width, short, kn, tile=True))


def test_l2_reads_in_place_follows_the_row_stride():
    assert _planner.l2_reads_in_place(_planner.CLOSE_ROW_BYTES + 1)
    assert _planner.l2_reads_in_place(10120)
    assert not _planner.l2_reads_in_place(_planner.CLOSE_ROW_BYTES)
    assert not _planner.l2_reads_in_place(900)
    assert not _planner.l2_reads_in_place(3 * 1024)   # a multiple of 1 KiB: copied to the buffer


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_a_block_read_in_place_takes_one_line_of_k_a_chunk(width):
    # A block through both buffers reads its source rows where they are, in
    # a tile's chunks so read with at most one line of k (16 values at
    # least), however short its j: where the block's own chunks take whole
    # rows of k or as many lines as fit.
    line = _planner.in_place_chunk_k(width)
    run = _planner.BLOCK_L2_RUN // width
    for jn, kn in ((5000, 3000), (run, 3000), (run - 16, 3000), (300, 288), (40, 2000), (3000, 40)):
        jc, kc = _planner.block_chunks(width, jn, kn, in_place=True)
        tj, tk = _planner.block_chunks(width, jn, kn, tile=True, in_place=True)
        assert (jc, kc) == (tj, min(tk, line))
        assert 0 < kc <= min(line, kn) and 0 < jc <= jn
        assert kc < _planner.block_chunks(width, jn, kn)[1] or kn <= line


def test_a_tile_chunk_takes_long_destination_runs_where_a_block_takes_whole_rows():
    # Source rows of 607 one-byte values and longer destination rows: a
    # block's chunk takes them whole (448 of them), a tile's 1024 values
    # of j and whole lines of k; rows of 256 bytes stay whole in both.
    assert _planner.block_chunks(1, 4915, 607) == (448, 607)
    jc, kc = _planner.block_chunks(1, 4915, 607, tile=True)
    assert jc == _planner.BLOCK_L2_RUN and 0 < kc < 607 and kc % 64 == 0
    assert _planner.block_chunks(1, 4915, 256, tile=True)[1] == 256
    assert _planner.block_chunks(2, 4915, 300, tile=True)[0] == _planner.BLOCK_L2_RUN // 2


def test_block_chunks_rejects_what_the_kernels_never_see():
    for args in [(3, 10, 10), (1, -1, 10), (2, 10, -5), (4, 1 << 41, 1)]:
        with pytest.raises(ValueError):
            _engine._block_chunks(*args)


def test_size_one_dims_dropped_and_contiguous_dims_merged():
    plan = _planner.plan_copy([1, 4, 1, 5, 6], [999, 30, 7, 6, 1], [999, 30, 7, 6, 1], 32)
    assert plan.kind == "plain"
    assert plan.main.mode == "memcpy"
    assert plan.main.outer == []
    assert plan.main.inner == (120, 4, 4)       # 4 * 5 * 6 elements, 4 bytes apart


def test_dims_ordered_by_destination_stride():
    # A transposition: the source's fastest dimension is the destination's slowest.
    plan = _planner.plan_copy([300, 1030], [1, 300], [1030, 1], 16)
    assert plan.main.mode == "tile"
    assert plan.main.inner == (1030, 600, 2)     # destination-contiguous
    assert plan.main.tile == (300, 2, 2060)      # source-contiguous


def _permuted_strides(op, dtype, sizes, order):
    """The source and destination strides (in elements) of a gather or
    scatter of the ``order`` permutation of ``sizes``, and its element bits."""
    d = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    strided = list(d.effective_strides)
    return ((strided, packed) if op == "gather" else (packed, strided)) + (d.element_bits,)


def _permuted_plan(op, dtype, sizes, order):
    src, dst, bits = _permuted_strides(op, dtype, sizes, order)
    return _planner.plan_copy(list(sizes), src, dst, bits).main


def test_short_strided_rows_run_in_batches(monkeypatch, no_slabs):
    # Rows of 6 int16 values whose fastest source and destination dimensions
    # differ and are both short (neither a tile nor a block): the innermost
    # outer dimension, 17 rows 12 bytes apart on both sides, becomes a batch
    # of rows per task.
    sizes = (6, 26, 17, 13, 17, 6)
    g = _permuted_plan("gather", "int16", sizes, (3, 2, 1, 5, 4, 0))
    assert g.mode == "strided" and g.inner == (6, 204, 2) and g.tile == (17, 12, 12)
    # (the 6 values 2 bytes apart in the source, slowest in the destination,
    # then run innermost: see test_strided_plans_run_far_revisited_dimensions_innermost)
    assert g.outer == [(26, 1224, 45084), (17, 31824, 2652), (13, 541008, 204), (6, 2, 1172184)]
    assert g.tasks == g.outer_count == 6 * 26 * 17 * 13
    # A longer one is cut: 1092 rows (2^2 x 3 x 7 x 13) of 4 values, batches
    # of 52, the largest divisor within STRIDED_BATCH_VALUES values (no
    # block of 4-value source runs, which would take this copy).
    monkeypatch.setattr(_planner, "STRIDED_SHORT_K_BYTES", _planner.BLOCK_SHORT_K_BYTES)
    s = _permuted_plan("scatter", "float32", (7, 4, 39, 22, 4, 6), (5, 3, 0, 1, 2, 4))
    assert s.mode == "strided" and s.inner == (4, 24, 4)
    assert s.tile == (52, 2112, 16) and (21, 52 * 2112, 52 * 16) in s.outer
    assert 52 * 4 <= _planner.STRIDED_BATCH_VALUES < 78 * 4      # 78 divides 1092 too
    assert s.outer_count * 52 * 4 == 7 * 4 * 39 * 22 * 4 * 6
    # Too few tasks left: rows one a task, as before.
    f = _permuted_plan("gather", "int16", (6, 2, 3, 1, 17, 6), (3, 2, 1, 5, 4, 0))
    assert f.mode == "strided" and f.tile is None and f.tasks == f.outer_count
    assert f.outer_count // 17 < _planner.STRIDED_BATCH_MIN_TASKS


def test_short_strided_rows_batch_a_large_divisor_where_small_ones_are_all_that_fit(monkeypatch, no_slabs):
    # 262 rows (2 x 131) of 2 int16 values: no divisor between 2 and the
    # batch's 128 rows, so batches of 131 (within BATCH_WHOLE_FACTOR times
    # the batch), not of 2 rows (8 bytes a task).
    sizes, order = (87, 2, 59, 262, 2), (0, 2, 4, 3, 1)
    s = _permuted_plan("scatter", "int16", sizes, order)
    assert s.mode == "strided" and s.inner == (2, 61832, 2)
    assert s.tile == (131, 4, 4) and (2, 524, 524) in s.outer
    assert s.outer_count * 131 * 2 == math.prod(sizes)
    most = _planner.STRIDED_BATCH_VALUES // 2
    assert 131 <= most * _planner.BATCH_WHOLE_FACTOR and not any(262 % q == 0 for q in range(3, most + 1))
    monkeypatch.setattr(_planner, "BATCH_GROW", False)
    assert _permuted_plan("scatter", "int16", sizes, order).tile == (2, 4, 4)
    monkeypatch.setattr(_planner, "BATCH_GROW", True)
    # A prime beyond that (263 rows) has no divisor at all: no batch.
    p = _permuted_plan("scatter", "int16", (87, 2, 59, 263, 2), order)
    assert p.mode == "strided" and p.tile is None


def test_short_strided_rows_of_a_prime_count_batch_whole(monkeypatch, no_slabs):
    # 37 rows of 7 float64 values (a prime count, no divisor within the
    # batch's STRIDED_BATCH_VALUES = 36 rows of 7): the whole dimension is
    # each task's batch, up to BATCH_WHOLE_FACTOR times the batch.
    sizes, order = (21, 14, 7, 2, 37, 7), (0, 2, 1, 5, 4, 3)
    g = _permuted_plan("gather", "float64", sizes, order)
    assert g.mode == "strided" and g.inner[0] == 7 and g.tile[0] == 37
    assert 36 * 7 <= _planner.STRIDED_BATCH_VALUES < 37 * 7 <= 2 * _planner.STRIDED_BATCH_VALUES
    assert g.tasks * 37 * 7 == math.prod(sizes)
    # Past twice the batch (73 rows of 7), rows one a task, as before.
    g = _permuted_plan("gather", "float64", (21, 14, 7, 2, 73, 7), order)
    assert g.mode == "strided" and g.tile is None
    # A divisor that fits, at least half the dimension, stays the batch:
    # 38 rows = 2 x 19, batches of 19.
    g = _permuted_plan("gather", "float64", (21, 14, 7, 2, 38, 7), order)
    assert g.mode == "strided" and g.tile[0] == 19
    # Short contiguous rows keep their divisors: 23 rows of 48 bytes, none
    # (copied a run at a time, not as the run tile's values).
    monkeypatch.setattr(_planner, "RUN_TILE_WIDE_MAX", _planner.RUN_TILE_MAX)
    p = _permuted_plan("gather", "float32", (35, 36, 38, 23, 12), (3, 2, 1, 0, 4))
    assert p.mode == "memcpy" and p.tile is None


def test_small_interleaving_tasks_are_copied_in_strided_batches(monkeypatch, no_slabs):
    # Tasks of at most INTERLEAVE_SMALL_PIXELS pixels and INTERLEAVE_SMALL_BYTES
    # bytes (2 pixels of 5 int16 channels: 20 bytes) go element by element in
    # batches, not through the interleave kernel, where the executor cannot
    # join them along the source.  This one it can (the dimension of 23
    # continues each plane's row): an interleave that does not stream.
    sizes, order = (32, 5, 23, 23, 19, 2), (2, 0, 4, 3, 5, 1)
    joined = _permuted_plan("scatter", "int16", sizes, order)
    assert joined.mode == "interleave" and not joined.stream and _planner.interleave_pixels_join(joined)
    monkeypatch.setattr(_planner, "small_pixels_join", lambda *args: False)
    p = _permuted_plan("scatter", "int16", sizes, order)
    assert p.mode == "strided" and p.tile is not None and p.tile[0] > 1
    assert _planner.small_interleave(2, 5, 2)
    # At the bounds: 8 pixels of 8 bytes, or 64 bytes, still small; a ninth
    # pixel, or a 65th byte, is not.
    assert _planner.small_interleave(8, 4, 2) and _planner.small_interleave(4, 2, 8)
    assert not _planner.small_interleave(9, 1, 1) and not _planner.small_interleave(5, 13, 1)
    # 13 float32 pixels of 5 channels a task (260 bytes): interleaved.
    q = _permuted_plan("scatter", "float32", (53, 34, 5, 42, 13), (0, 3, 1, 4, 2))
    assert q.mode == "interleave" and q.inner[0] == 13 and q.tile[0] == 5
    # With the bound lowered to nothing, the small tasks interleave again.
    monkeypatch.setattr(_planner, "INTERLEAVE_SMALL_PIXELS", 0)
    assert _permuted_plan("scatter", "int16", sizes, order).mode == "interleave"


def test_interleaves_join_along_the_source_only_where_neighbours_meet_soon(monkeypatch):
    # 2 pixels of 5 uint32 channels a task, each plane's row going on along
    # dimensions of 13475 and 99 (the whole copy): joined along them, a
    # task's destination would meet the next one's beside it only after
    # 539 KB of copying (revisit_bytes), so it goes element by element; with
    # the bound raised it is joined, the chain innermost, its first link
    # inside.
    sizes, order = (245, 55, 99, 2, 5), (4, 2, 0, 1, 3)
    p = _permuted_plan("gather", "uint32", sizes, order)
    assert p.mode == "strided"
    monkeypatch.setattr(_planner, "JOIN_PIXELS_REVISIT_BYTES", 1 << 30)
    q = _permuted_plan("gather", "uint32", sizes, order)
    assert q.mode == "interleave" and not q.stream and _planner.interleave_pixels_join(q)
    assert [d[:2] for d in q.outer] == [(99, 107800), (13475, 8)]
    assert _planner.revisit_bytes(q.outer, 40, 2) == 13475 * 40 > 512 << 10


def test_short_contiguous_runs_are_wider_values():
    # Runs of 2, 4 or 8 contiguous bytes on both sides (a permutation that
    # keeps a last dimension of two or four values) are planned as values of
    # that width, so that the transposing kernels take them.
    g = _permuted_plan("gather", "uint8", (203, 234, 8, 4, 2), (3, 2, 0, 1, 4))
    assert g.width == 2 and g.mode in ("tile", "block")
    f = _permuted_plan("scatter", "float16", (29, 39, 57, 6, 2), (3, 0, 2, 1, 4))
    assert f.width == 4 and f.mode in ("tile", "block")
    # A run of 2 at an odd stride is no value.
    odd = _planner.plan_copy([40, 50, 2], [301, 6, 1], [100, 2, 1], 8).main
    assert odd.width == 1 and odd.mode == "memcpy" and odd.inner == (2, 1, 1)


@pytest.mark.parametrize("op,dtype,sizes,order,tile,inner", [
    # an RGB image turned: runs of 3 bytes; j = 1920 pixels, k = 1080
    ("gather", "uint8", (1080, 1920, 3), (1, 0, 2), (1080, 3, 5760), (1920, 3240, 3)),
    ("scatter", "uint8", (1080, 1920, 3), (1, 0, 2), (1920, 3, 3240), (1080, 5760, 3)),
    ("gather", "float16", (73, 8, 97, 68, 3), (3, 1, 0, 2, 4), (97, 6, 408), (68, 339888, 6)),
    ("scatter", "int16", (30, 20, 10, 7), (2, 1, 0, 3), (10, 14, 8400), (30, 2800, 14)),   # 14 bytes
    ("gather", "float64", (40, 30, 2), (1, 0, 2), (40, 16, 480), (30, 640, 16)),              # 16 bytes
])
def test_odd_runs_are_values_of_the_run_tile(op, dtype, sizes, order, tile, inner, monkeypatch):
    # Contiguous runs of 3-16 bytes on both sides other than 4 and 8 (a
    # permutation that keeps a last dimension of 3 bytes, 3 float16, 7
    # int16 or 2 float64 values) are the values of a transpose (the
    # engine's run tile): the destination's fastest dimension is j, the
    # source's k; no streaming, no L2 buffers.  (Blocks of runs off: the
    # 7-value int16 scatter's source side is a group, 10 x 30 runs.)
    monkeypatch.setattr(_planner, "RUN_BLOCKS", False)
    p = _permuted_plan(op, dtype, sizes, order)
    assert (p.mode, p.width, p.tile, p.inner) == ("tile", inner[2], tile, inner)
    assert not p.stream and p.l2 == 0
    assert p.outer_count * p.inner[0] * p.tile[0] * p.width == math.prod(sizes) * np.dtype(dtype).itemsize


@pytest.mark.parametrize("op,dtype,sizes,order,why", [
    ("gather", "float64", (40, 30, 5), (1, 0, 2), "runs of 40 bytes: past RUN_TILE_MAX"),
    ("gather", "float16", (40, 30, 17), (1, 0, 2), "runs of 34 bytes: past RUN_TILE_MAX"),
    ("gather", "uint8", (40, 30, 4), (1, 0, 2), "runs of 4 bytes: values of that width"),
])
def test_other_runs_keep_their_plans(op, dtype, sizes, order, why):
    p = _permuted_plan(op, dtype, sizes, order)
    assert p.width in (1, 2, 4, 8), why


def test_odd_runs_without_a_source_fast_dimension_stay_rows():
    # Runs of 3 bytes whose source rows are padded (no dimension has the runs
    # back to back in the source): rows copied one by one, as before.
    p = _planner.plan_copy([40, 50, 3], [301, 6, 1], [150, 3, 1], 8).main
    assert p.mode == "memcpy" and p.width == 1 and p.inner == (3, 1, 1)
    assert _planner.plan_runs([(40, 301, 150), (50, 6, 3)], 3, 6000) is None


@pytest.mark.parametrize("dtype,sizes,whole", [
    ("float16", (1, 347, 503, 72), True),      # 144-byte pixels: 16 pieces of k, pixels whole
    ("uint8", (1, 600, 700, 200), True),
    ("float32", (1, 101, 103, 250), True),     # 1000 bytes
    ("float64", (1, 101, 103, 250), False),    # 2000 bytes: past WHOLE_PIXEL_BYTES
    ("uint8", (1, 40, 50, 200), False),        # 2000 pixels: too few for 16 pieces of 256
])
def test_short_pixels_stay_whole(dtype, sizes, whole):
    # An NCHW to NHWC gather whose pixels (rows of j back to back) hold more
    # than 64 values keeps them whole, one segment, where its pixels (k) give
    # 16 tasks of 256 or more; threads share pieces of k.
    p = _permuted_plan("gather", dtype, sizes, (0, 3, 1, 2))   # (N, H, W, C) from an NCHW buffer
    assert p.mode == "tile" and p.tile[2] == sizes[3] * p.width
    if whole:
        assert p.segments == 1 and p.segment_len == sizes[3] and p.tasks >= _planner.MIN_TILE_TASKS
    else:
        assert p.segments > 1 and p.segment_len < sizes[3]


def test_short_rows_run_with_the_shorter_dimension_innermost():
    # 128-byte rows (64 float16 values) of a (0, 2, 1, 3) permutation: the
    # gather writes them in destination order and reads 16 streams; the
    # scatter runs in source order, so that it too has the 16 innermost
    # (written as 16 streams) rather than 1024 rows 2 KiB apart.
    sizes = (32, 1024, 16, 64)
    g = _permuted_plan("gather", "float16", sizes, (0, 2, 1, 3))
    s = _permuted_plan("scatter", "float16", sizes, (0, 2, 1, 3))
    assert g.mode == s.mode == "memcpy" and g.inner == s.inner == (64, 2, 2)
    assert g.outer == [(32, 2097152, 2097152), (1024, 128, 2048), (16, 131072, 128)]
    assert s.outer == [(32, 2097152, 2097152), (1024, 2048, 128), (16, 128, 131072)]


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype,last,streams,order", [
    # rows of 200 and 504 bytes read as 29 or 256 streams in destination order: kept
    ("float32", 50, 29, "destination"),
    ("uint8", 504, 29, "destination"),
    ("int16", 80, 256, "destination"),
    # rows of 160 bytes and more, but 257 streams: source order, as shorter rows
    ("float32", 40, 257, "source"),
    ("float32", 39, 29, "source"),        # 156 bytes
    ("uint32", 17, 29, "source"),         # 68 bytes
])
def test_rows_of_a_few_lines_read_as_few_streams_keep_destination_order(op, dtype, last, streams, order):
    # A permutation that keeps its last dimension (rows of `last` values)
    # and swaps the two before it, one of 23 and one of `streams`: in
    # destination order the rows are read as `streams` streams, in source
    # order written as 23.  From SHORT_ROW_STREAM_MIN_BYTES a row, up to
    # SHORT_ROW_STREAMS streams, destination order stays; shorter rows, or
    # more streams, run in source order, whose innermost dimension is the
    # shorter.
    sizes = (6, 23, streams, last) if op == "gather" else (6, streams, 23, last)
    d = ds.BufferTensorDesc.from_layout(dtype, sizes, (0, 2, 1, 3))
    w = np.dtype(dtype).itemsize
    packed = [s * w for s in ds.BufferTensorDesc(dtype, sizes).effective_strides]
    strided = [s * w for s in d.effective_strides]
    src, dst = (strided, packed) if op == "gather" else (packed, strided)
    dims = [(sizes[i], src[i], dst[i]) for i in range(3)]
    dest = sorted(dims, key=lambda t: t[2], reverse=True)
    source = sorted(dims, key=lambda t: t[1], reverse=True)
    assert dest[-1][0] == streams and source[-1][0] == 23
    p = _permuted_plan(op, dtype, sizes, (0, 2, 1, 3))
    assert p.mode == "memcpy" and p.inner == (last, w, w)
    assert p.outer == (dest if order == "destination" else source)
    row = last * w
    assert (order == "destination") == (_planner.SHORT_ROW_STREAM_MIN_BYTES <= row <= _planner.SHORT_ROW_BYTES
                                        and streams <= _planner.SHORT_ROW_STREAMS)


@pytest.mark.parametrize("small_l3", [False, True], ids=["large-l3", "small-l3"])
def test_copies_of_rows_apart_stream_from_24_mib_with_a_small_l3(monkeypatch, small_l3):
    # A contiguous copy streams from 40 MiB read and written; one whose rows
    # lie apart on a side (a pitched copy: an outer dimension left after
    # merging) from 24 MiB with a small L3.  (size, source stride,
    # destination stride) triples in bytes; bytes written.
    monkeypatch.setattr(_planner, "COPY_STREAM_ROWS_EIGHTHS",
                        _planner.l3_bound("COPY_STREAM_ROWS_EIGHTHS", small_l3=small_l3))
    total = _planner.stream_min_total
    for written in (14 << 20, 19 << 20, 20 << 20):
        rows = written // 4096
        pitched = [(rows, 4608, 4096), (4096, 1, 1)]
        packed = [(written, 1, 1)]
        assert _planner.copy_streams("memcpy", packed, written) == (2 * written >= total * 10 // 8)
        assert _planner.copy_streams("memcpy", pitched, written) == (
            2 * written >= total * (6 if small_l3 else 10) // 8)
    # The plan of such a copy, and its bytes against numpy.
    desc = ds.BufferTensorDesc("float32", [7 << 8, 2048], strides=[2048 + 96, 1])   # 14 MiB, rows 384 bytes apart
    _engine._set_stream_min_total(_planner.stream_min_total)   # (plans made before dropped)
    plan = _planner.plan_copy(list(desc.sizes), list(desc.effective_strides), [2048, 1], 32).main
    assert plan.mode == "memcpy" and plan.stream == small_l3
    buf = np.random.default_rng(7).integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
    expect = np.ndarray(desc.sizes, np.float32, buffer=buf, strides=[s * 4 for s in desc.effective_strides])
    assert ds.gather(buf, desc).tobytes() == expect.tobytes()
    _engine._set_stream_min_total(_planner.stream_min_total)


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype,outer,streams,last", [
    ("int16", 14, 1693, 391),      # rows of 782 bytes: 1693 streams one way, 14 the other
    ("float32", 5, 2683, 243),     # 972 bytes
    ("uint8", 3, 600, 4096),       # 4 KiB, the bound
    ("float16", 9, 800, 1100),     # 2200 bytes
])
def test_longer_rows_of_a_copy_that_does_not_stream_take_the_fewer_streams(monkeypatch, op, dtype, outer, streams,
                                                                          last):
    # Rows of 513 bytes to SHORT_ROW_PLAIN_BYTES (4 KiB) in a copy that does
    # not stream take the order whose innermost dimension is the shorter, as
    # shorter rows do: in destination order a scatter of (n, 14, 391) int16
    # reads n rows 10948 bytes apart a pass; in source order it reads each
    # row once and writes 14 streams.  A copy that streams, or rows past the
    # bound, keep destination order.
    sizes = (outer, streams, last) if op == "gather" else (streams, outer, last)
    w = np.dtype(dtype).itemsize
    nbytes = outer * streams * last * w

    def order_of():
        p = _permuted_plan(op, dtype, sizes, (1, 0, 2))
        assert p.mode == "memcpy" and p.inner == (last, w, w)
        dest = sorted(p.outer, key=lambda t: t[2], reverse=True)
        source = sorted(p.outer, key=lambda t: t[1], reverse=True)
        assert dest[-1][0] == streams and source[-1][0] == outer
        return "source" if p.outer == source else "destination" if p.outer == dest else None

    assert not _planner.copy_streams("memcpy", [(nbytes // w, w, w)], nbytes)
    assert order_of() == ("source" if last * w <= _planner.SHORT_ROW_PLAIN_BYTES else "destination")
    monkeypatch.setattr(_planner, "SHORT_ROW_PLAIN_BYTES", _planner.SHORT_ROW_BYTES)
    assert order_of() == "destination"
    monkeypatch.undo()
    monkeypatch.setattr(_planner, "stream_min_total", nbytes // 2)   # the same copy streaming
    assert order_of() == "destination"


@pytest.mark.parametrize("dtype,sizes,order,op,streams", [
    ("uint8", (3, 35, 16, 201, 44), (0, 3, 1, 2, 4), "scatter", 201),
    ("float16", (152, 2, 6, 379, 21), (2, 3, 0, 1, 4), "gather", 2 * 152),
    ("int16", (68, 5032, 30), (1, 0, 2), "gather", 68),
    ("uint32", (9, 19, 17, 5, 2, 24), (4, 0, 3, 2, 1, 5), "scatter", 17 * 5 * 2),
    ("float64", (11, 12, 14, 15, 15, 18), (4, 1, 0, 3, 2, 5), "gather", 14 * 15 * 11 * 12),   # rows of 144 bytes
    ("float64", (11, 12, 14, 15, 15, 16), (4, 1, 0, 3, 2, 5), "gather", 14 * 15 * 11 * 12),   # whole lines
    ("float32", (35, 36, 38, 23, 12), (3, 2, 1, 0, 4), "scatter", 36 * 38 * 23),
], ids=str)
def test_rows_that_source_order_writes_as_many_streams_keep_destination_order(monkeypatch, dtype, sizes, order,
                                                                              op, streams):
    # Source order, whose innermost dimension is the shorter, would write
    # ``streams`` rows before coming back beside the first (the rows of the
    # dimensions inside the one whose destination stride is the row), more
    # than SHORT_ROW_WRITE_STREAMS: destination order stays, however many
    # streams it reads (short_rows_order on the merged dimensions outside the
    # rows, and the plan's loops).  With the bound at ``streams``, source order.
    # (Rows of 33-64 bytes copied a run at a time, not as the run tile's values.)
    monkeypatch.setattr(_planner, "RUN_TILE_WIDE_MAX", _planner.RUN_TILE_MAX)
    outer, last = _row_dims(op, dtype, sizes, order)
    row = last * np.dtype(dtype).itemsize
    source = sorted(outer, key=lambda t: (t[1], t[2]), reverse=True)
    assert source[-1][0] < outer[-1][0]
    assert _planner.revisit_bytes(source, row, 2) == streams * row and streams > _planner.SHORT_ROW_WRITE_STREAMS
    for plain in (True, False):
        assert _planner.short_rows_order(outer, row, plain) == outer
    p = _permuted_plan(op, dtype, sizes, order)
    loops = p.outer + ([p.tile] if p.tile is not None else [])
    assert p.mode == "memcpy" and loops == sorted(loops, key=lambda t: t[2], reverse=True)
    monkeypatch.setattr(_planner, "SHORT_ROW_WRITE_STREAMS", streams)
    assert _planner.short_rows_order(outer, row, False) == source
    monkeypatch.setattr(_planner, "SHORT_ROW_WRITE_STREAMS", streams - 1)
    assert _planner.short_rows_order(outer, row, False) == outer


def _row_dims(op, dtype, sizes, order):
    """The merged dimensions outside the rows of a permutation keeping its
    last dimension (destination order, strides in bytes) and the row's
    value count."""
    w = np.dtype(dtype).itemsize
    src, dst, _ = _permuted_strides(op, dtype, sizes, order)
    merged = _planner.merge_dims([(n, a * w, b * w) for n, a, b in zip(sizes, src, dst)])
    assert merged[-1][1:] == (w, w)
    return merged[:-1], merged[-1][0]


@pytest.mark.parametrize("outer,row,side,expect", [
    ([(3, 100, 7), (5, 20, 700)], 20, 1, 20),            # innermost: the row beside is the next one
    ([(3, 100, 7), (5, 20, 700)], 7, 2, 5 * 7),           # inside the first: 5 rows
    ([(3, 100, 7), (5, 20, 700)], 9, 2, 15 * 9),          # none: the whole copy
])
def test_revisit_bytes(outer, row, side, expect):
    assert _planner.revisit_bytes(outer, row, side) == expect


@pytest.mark.parametrize("sizes,src,dst,why", [
    ([64, 1024, 256], [256, 16384, 1], [262144, 256, 1], "rows of 1 KiB in a copy that streams"),
    ([8, 512, 1250], [1250, 10000, 1], [640000, 1250, 1], "rows of 5000 bytes: past the short rows"),
    ([16, 1024, 4], [0, 4, 1], [4096, 4, 1], "a broadcast dimension"),
    ([1024, 16, 9], [9, 9216, 1], [144, 9, 1], "source order puts 1024 innermost"),
])
def test_other_row_copies_keep_destination_order(sizes, src, dst, why):
    plan = _planner.plan_copy(sizes, src, dst, 32).main
    assert plan.mode == "memcpy"
    assert [b for _, _, b in plan.outer] == sorted((b for _, _, b in plan.outer), reverse=True), why


@pytest.mark.parametrize("sizes,src,dst,mode", [
    ([64, 64], [64, 1], [64, 1], "memcpy"),
    ([64, 64], [1, 0], [64, 1], "fill"),
    ([64, 64], [128, 2], [64, 1], "strided"),
    ([64, 64], [1, 64], [64, 1], "tile"),
    ([1000, 3], [1, 1000], [3, 1], "interleave"),
    ([2, 4, 8, 2, 4, 16, 4, 8], None, None, "block"),
])
def test_kernel_choice(sizes, src, dst, mode):
    if src is None:
        d = ds.BufferTensorDesc.from_layout("float32", sizes, (3, 0, 6, 1, 7, 4, 2, 5))
        src = list(d.effective_strides)
        dst = list(ds.BufferTensorDesc("float32", sizes).effective_strides)
    assert _planner.plan_copy(sizes, src, dst, 32).main.mode == mode


def test_block_groups_fit_the_c_tables():
    d = ds.BufferTensorDesc.from_layout("uint8", [3, 50, 40, 9, 2], (3, 0, 4, 1, 2))
    plan = _planner.plan_copy(d.sizes, d.effective_strides, [720 * 50, 720, 18, 2, 1], 8).main
    assert plan.mode == "block"
    assert plan.block.j_elems <= _planner.BLOCK_GROUP and plan.block.k_elems <= _planner.BLOCK_GROUP
    assert plan.block.j_elems * plan.block.k_elems <= _planner.block_elems(1)


def test_four_bit_staging():
    nhwc = ds.BufferTensorDesc.from_layout("uint4", [2, 64, 64, 64], "NHWC")
    nchw = ds.BufferTensorDesc("uint4", [2, 64, 64, 64])
    both = _planner.plan_copy(nhwc.sizes, nhwc.effective_strides, nchw.effective_strides, 4)
    assert both.kind == "staged_both" and both.whole_bytes
    assert both.main.inner[0] <= _planner.STAGE_ELEMS
    unpack = _planner.plan_copy(nhwc.sizes, nhwc.effective_strides, nchw.effective_strides, 4,
                                True, False)
    assert unpack.kind == "staged" and unpack.sub.width == 1
    # Not packed in any order: element by element.
    odd = _planner.plan_copy([100], [3], [2], 4)
    assert odd.kind == "plain" and odd.main.mode == "nibble"


def test_segments_cover_long_rows():
    plan = _planner.plan_copy([1 << 20], [1], [1], 8).main
    assert plan.segments * plan.segment_len >= plan.inner[0] > (plan.segments - 1) * plan.segment_len
    assert plan.tasks == plan.segments > 1


def _transpose_2d(rows, cols, bits):
    # A column-major rows x cols matrix gathered to row-major.
    return _planner.plan_copy([rows, cols], [1, rows], [cols, 1], bits).main


@pytest.mark.parametrize("rows,cols,bits", [(2511, 2503, 16), (3550, 3542, 8), (3700, 4441, 8),
                                            (2400, 2222, 16), (3000, 4001, 8), (1900, 1777, 32),
                                            (1000, 1999, 64)])
def test_transposes_from_memory_take_long_segments(rows, cols, bits, far_rows_through_l2_from_16_mib):
    # Transposes of TRANSPOSE_FROM_MEMORY bytes or more, with
    # destination rows off line boundaries and rows of at least four long
    # segments, copy MEMORY_TILE_SEGMENT values per segment (k cut into equal
    # pieces where that leaves too few tasks), and cover the rows exactly.
    plan = _transpose_2d(rows, cols, bits)
    width = bits // 8
    assert rows * cols * width >= _planner.TRANSPOSE_FROM_MEMORY
    assert plan.mode == "tile" and not plan.l2 and plan.tile[2] % 64 != 0
    assert _planner.memory_tile_segments(plan)
    assert plan.segment_len == _planner.MEMORY_TILE_SEGMENT
    assert plan.segments * plan.segment_len >= cols > (plan.segments - 1) * plan.segment_len
    assert plan.tasks == plan.outer_count * plan.segments * plan.tile_pieces >= _planner.MIN_TILE_TASKS
    assert plan.outer_count * plan.tile[0] == rows


@pytest.mark.parametrize("rows,cols,bits,l2", [
    (2047, 2047, 8, False), (2053, 2053, 8, True),      # 4.19 (just under 4 MiB) and 4.21 MB
    (2047, 2047, 16, False), (2203, 2017, 16, True),    # 8.38 (just under 8 MiB) and 8.9 MB
])
def test_narrow_transposes_go_through_l2_where_they_stream(rows, cols, bits, l2):
    # 2-D transposes of one- and two-byte values (source rows far apart)
    # stream and take the L2 buffers from TILE_L2_FAR_BYTE_MIN_TOTAL and
    # TILE_L2_FAR_NARROW_MIN_TOTAL bytes (wider ones:
    # test_wide_tiles_stream_from_2_mib).
    plan = _transpose_2d(rows, cols, bits)
    nbytes = rows * cols * bits // 8
    bound = _planner.TILE_L2_FAR_BYTE_MIN_TOTAL if bits == 8 else _planner.TILE_L2_FAR_NARROW_MIN_TOTAL
    assert plan.mode == "tile" and plan.tile[2] % 64 != 0
    assert plan.inner[1] > _planner.CLOSE_ROW_BYTES
    assert (nbytes >= bound) == l2 == bool(plan.l2) == plan.stream


@pytest.mark.parametrize("sizes,l2", [((2, 24, 411, 413), False), ((2, 40, 301, 331), False),
                                      ((2, 24, 431, 421), True)])   # 32.6, 31.9, 34.8 MB
def test_close_wide_pixels_go_through_l2_from_the_streaming_size(sizes, l2):
    # NHWC to NCHW float32 gathers (source rows, the pixels, close together)
    # of 17-33 MB stream without the L2 buffers; from stream_min_total they
    # take them.
    strided = list(ds.BufferTensorDesc.from_layout("float32", list(sizes), "NHWC").effective_strides)
    packed = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    plan = _planner.plan_copy(list(sizes), strided, packed, 32).main
    nbytes = math.prod(sizes) * 4
    assert plan.mode == "tile" and plan.stream and plan.inner[1] <= _planner.CLOSE_ROW_BYTES
    assert nbytes >= _planner.TILE_L2_EARLY_MIN_TOTAL
    assert (nbytes >= _planner.stream_min_total) == l2 and bool(plan.l2) == l2


def _main_plan(dtype, sizes, order, op):
    return _permutation_plan(dtype, sizes, order, op)[0].main


def _block_shape(plan):
    return plan.block.j_elems, plan.block.k_elems


@pytest.mark.parametrize("dtype,sizes,order", [
    ("int16", (121, 65, 110, 14), (3, 1, 2, 0)),        # 23.1 MiB
    ("float16", (130, 20, 6, 121, 6), (0, 4, 3, 2, 1)),  # 21.6 MiB
    ("int16", (57, 4, 75, 12, 29, 4), (5, 2, 4, 1, 0, 3)),
])
@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_two_byte_blocks_from_memory_take_twice_the_room(dtype, sizes, order, op, monkeypatch):
    # From BLOCK_GROW_MIN_TOTAL bytes, a two-byte block takes room for twice
    # block_elems values where that leaves neither group shorter and the path
    # through L2 the same: the plan with the room it had before, beside it.
    # (Shapes of 21-23 MiB chosen where two-byte blocks went through L2 from
    # 16 MiB, as they do with BLOCK_L2_WIDE_TIMES at 1.)
    monkeypatch.setattr(_planner, "BLOCK_L2_WIDE_TIMES", 1)
    plan = _main_plan(dtype, sizes, order, op)
    monkeypatch.setattr(_planner, "BLOCK_GROW_WIDTHS", ())
    before = _main_plan(dtype, sizes, order, op)
    assert math.prod(sizes) * 2 >= _planner.BLOCK_GROW_MIN_TOTAL
    assert plan.mode == before.mode == "block"
    (j, k), (j0, k0) = _block_shape(plan), _block_shape(before)
    assert j >= j0 and k >= k0 and j * k > j0 * k0
    assert j0 * k0 <= _planner.block_elems(2) < j * k <= 2 * _planner.block_elems(2)
    assert (plan.l2, plan.stream) == (before.l2, before.stream)
    assert plan.tasks < before.tasks


@pytest.mark.parametrize("dtype,sizes,order,op,l2", [
    ("float32", (385, 188, 3, 2, 16), (2, 4, 3, 0, 1), "gather", False),   # 26.5 MiB
    ("float64", (983, 12, 2, 2, 52), (3, 1, 4, 2, 0), "gather", False),    # 18.7 MiB
    ("float64", (25, 40, 2, 15, 16, 5), (2, 3, 4, 0, 5, 1), "scatter", False),  # 18.3 MiB
    ("int16", (91, 30, 2, 21, 129), (4, 3, 0, 1, 2), "gather", True),      # 28.2 MiB, rows off lines
    ("float16", (18, 12, 476, 125), (3, 2, 0, 1), "gather", True),        # 24.5 MiB, rows off lines
    ("uint8", (2, 9, 64, 93, 206), (4, 0, 3, 1, 2), "gather", True),       # 21.0 MiB
    ("float32", (36, 1244, 354), (2, 1, 0), "scatter", False),             # 60.5 MiB
    ("uint8", (106, 559, 332), (2, 1, 0), "gather", True),                 # 18.8 MiB
], ids=str)
def test_blocks_that_stream_in_place_skip_l2(dtype, sizes, order, op, l2, monkeypatch):
    # Blocks may take the L2 buffers from BLOCK_L2_MIN_TOTAL bytes; those that
    # would stream in place (rows on line boundaries) do not
    # (BLOCK_L2_IN_PLACE; for two- to eight-byte values BLOCK_L2_WIDE_TIMES
    # below the streaming threshold too): transposed in place, streamed.
    # The one-byte blocks here write rows off line boundaries.
    total = math.prod(sizes) * np.dtype(dtype).itemsize
    assert total >= _planner.BLOCK_L2_MIN_TOTAL
    plan = _main_plan(dtype, sizes, order, op)
    assert plan.mode == "block" and (plan.l2 != 0) is l2
    if not l2:
        assert plan.stream and not plan.block.whole
    monkeypatch.setattr(_planner, "BLOCK_L2_IN_PLACE", False)
    assert (_main_plan(dtype, sizes, order, op).l2 != 0) is (l2 or total >= _planner.stream_min_total)
    monkeypatch.setattr(_planner, "BLOCK_L2_WIDE_TIMES", 1)
    assert _main_plan(dtype, sizes, order, op).l2 != 0


@pytest.mark.parametrize("sizes,order", [((80, 65, 110, 14), (3, 1, 2, 0)),     # 15.3 MiB
                                         ((90, 20, 6, 121, 6), (0, 4, 3, 2, 1))])  # 15.0 MiB
def test_two_byte_blocks_in_cache_keep_their_room(sizes, order, monkeypatch):
    # Under BLOCK_GROW_MIN_TOTAL the block keeps block_elems values (these
    # two would grow from a lower bound).
    plan = _main_plan("int16", sizes, order, "gather")
    assert math.prod(sizes) * 2 < _planner.BLOCK_GROW_MIN_TOTAL
    assert _block_shape(plan)[0] * _block_shape(plan)[1] <= _planner.block_elems(2)
    monkeypatch.setattr(_planner, "BLOCK_GROW_MIN_TOTAL", 1 << 20)
    assert _block_shape(_main_plan("int16", sizes, order, "gather")) > _block_shape(plan)


def test_two_byte_blocks_keep_their_room_where_a_group_would_shrink(monkeypatch):
    # A 51.9 MiB int16 scatter: with twice the room, J would be the shorter
    # (320 values rather than 640), so the block stays as it was.
    sizes, order = (32, 59, 40, 60, 6), (3, 1, 4, 2, 0)
    plan = _main_plan("int16", sizes, order, "scatter")
    monkeypatch.setattr(_planner, "BLOCK_GROW_WIDTHS", ())
    assert _block_shape(plan) == _block_shape(_main_plan("int16", sizes, order, "scatter"))
    monkeypatch.setattr(_planner, "block_elems", lambda width, room=2 * _planner.BLOCK_ELEMS: room)
    assert _block_shape(_main_plan("int16", sizes, order, "scatter"))[0] < _block_shape(plan)[0]


@pytest.mark.parametrize("rows,cols,bits,segment", [(2111, 2047, 16, 128), (3001, 3011, 8, 192),
                                                    (1999, 2861, 16, 128)])
def test_long_segments_give_way_to_enough_tasks(rows, cols, bits, segment, far_rows_through_l2_from_16_mib):
    # Where k has no divisor that brings the tasks to MIN_TILE_TASKS, the rows
    # are cut into shorter segments again: the longest whole 64-value tiles up
    # to about MIN_TILE_TASKS of them that still give that many tasks (2861
    # values: 16 of 192 would be 15, so 128).
    plan = _transpose_2d(rows, cols, bits)
    assert _planner.memory_tile_segments(plan)
    assert plan.segment_len == segment
    assert plan.tasks >= _planner.MIN_TILE_TASKS
    assert plan.segments * plan.segment_len >= cols > (plan.segments - 1) * plan.segment_len


def _covers_k_in_pieces(plan, rows):
    # k (rows values) is covered exactly: equal pieces as an outer dimension,
    # or tile_pieces pieces of tile_piece rows, the last one shorter.
    if plan.tile_pieces > 1:
        assert plan.tile[0] == rows and plan.tile_piece >= _planner.MIN_TILE_PIECE
        assert (plan.tile_pieces - 1) * plan.tile_piece < rows <= plan.tile_pieces * plan.tile_piece
    else:
        assert plan.outer_count * plan.tile[0] == rows and plan.outer_count > 1


@pytest.mark.parametrize("rows,cols,bits", [(8193, 1025, 8), (3001, 1382, 32), (3653, 1561, 16),
                                            (1811, 1421, 32), (371, 371, 64), (435, 654, 32)])
def test_rows_off_lines_cut_k_where_segments_would_be_64_values(rows, cols, bits):
    # A prime-like k with destination rows off line boundaries, at least
    # PIECES_MIN_BYTES: rather than segments of 64 values (which the shorter
    # segments would be), the segments stay as long as before and k is cut
    # into pieces of at least MIN_TILE_PIECE rows.
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile" and plan.tile[2] % 64 != 0 and plan.dst_bytes >= _planner.PIECES_MIN_BYTES
    assert plan.segment_len > _planner.PIECES_OVER_SEGMENTS_OF
    assert plan.segments * plan.segment_len >= cols > (plan.segments - 1) * plan.segment_len
    _covers_k_in_pieces(plan, rows)
    assert plan.tasks == plan.outer_count * plan.segments * plan.tile_pieces


@pytest.mark.parametrize("rows,cols,bits,why", [
    (8193, 1025, 8, "bound raised"),    # as above, with PIECES_MIN_BYTES past its size
    (354, 326, 8, "small"),             # 115 KB
    (2119, 1024, 16, "rows line-aligned"),  # 2 KiB destination rows
])
def test_segments_of_64_values_where_pieces_do_not_apply(monkeypatch, rows, cols, bits, why,
                                                        far_rows_through_l2_from_16_mib):
    if why == "bound raised":
        monkeypatch.setattr(_planner, "PIECES_MIN_BYTES", 1 << 40)
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile" and plan.segment_len == 64 and plan.tile_pieces == 1
    assert plan.outer_count == 1 and plan.tile[0] == rows
    assert (plan.tile[2] % 64 == 0) == (why == "rows line-aligned")


@pytest.mark.parametrize("rows,cols,bits,why", [
    (1777, 1501, 16, "in cache"),          # 5.1 MB
    (2047, 2047, 8, "in cache"),           # 4.0 MB, just under
    (1201, 1301, 32, "through L2"),        # 6.0 MB: four-byte values from 2 MiB
    (8192, 1024, 8, "rows line-aligned"),  # 1024-byte destination rows
    (16001, 1000, 8, "short rows"),        # 1000 values: fewer than four segments
    (5011, 7919, 8, "through L2"),         # 39.7 MB: the L2 buffers take it
])
def test_other_transposes_keep_short_segments(rows, cols, bits, why):
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile"
    assert not _planner.memory_tile_segments(plan), why
    assert plan.segment_len < _planner.MEMORY_TILE_SEGMENT or plan.segment_len == cols or plan.l2, why


def _permutation_plan(dtype, sizes, order, op):
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = ds.BufferTensorDesc(dtype, sizes).effective_strides
    src, dst = (desc.effective_strides, packed) if op == "gather" else (packed, desc.effective_strides)
    return _planner.plan_copy(list(sizes), src, dst, desc.element_bits), src, dst


def _element_offsets(sizes, strides):
    # Every element's offset (elements), in C order of its index.
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) * s for n, s in zip(sizes, strides)], indexing="ij")
    return sum(grids).reshape(-1)


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype,sizes,order,cut", [
    ("uint8", (22, 50, 22, 83, 28), (3, 2, 0, 4, 1), 3),   # 83 beside 28 values: room for 36
    ("int16", (79, 19, 251, 21), (3, 2, 0, 1), 2),         # 251 beside 21: room for 39 or 48
    ("float16", (58, 80, 127, 51), (3, 0, 2, 1), 2),       # 127 beside 80 or 51
])
def test_tile_cut_in_two_where_a_dimension_stops_the_block(dtype, sizes, order, cut, op):
    # A tile with a side of under SPLIT_TILE_SIDE_BYTES, where a dimension
    # with no divisor that fits stops a block's group: its first part (the
    # most whole multiples of the room) is a block, the rest runs after it
    # from the offsets of that dimension's first index past the part.
    plan, src, dst = _permutation_plan(dtype, sizes, order, op)
    width = np.dtype(dtype).itemsize
    assert plan.kind == "plain" and plan.main.mode == "block" and plan.rest is not None
    n = sizes[cut]
    head = plan.main.dst_bytes // (math.prod(sizes) // n * width)
    assert plan.main.dst_bytes + plan.rest.dst_bytes == math.prod(sizes) * width
    assert 0 < head < n and plan.main.dst_bytes == head * math.prod(sizes) // n * width
    assert (plan.rest_src, plan.rest_dst) == (head * src[cut] * width, head * dst[cut] * width)
    rest_sizes = list(sizes)
    rest_sizes[cut] = n - head
    assert plan.rest_extent == (sum((m - 1) * a for m, a in zip(rest_sizes, src)) * width + width,
                                sum((m - 1) * b for m, b in zip(rest_sizes, dst)) * width + width)
    assert plan.rest_src + plan.rest_extent[0] <= plan.src_extent
    assert plan.rest_dst + plan.rest_extent[1] <= plan.dst_extent
    with_rest = _planner.describe(plan)["rest"]
    assert with_rest == {"mode": plan.rest.mode, "src": plan.rest_src, "dst": plan.rest_dst}


def test_parts_of_a_cut_copy_cover_each_element_once():
    # The two parts' destination offsets (each part's own elements, the rest
    # shifted by its offset) are the whole copy's, each once, and each comes
    # with its own source offset: checked element by element on a small cut.
    sizes, order = (2, 50, 3, 83, 28), (3, 2, 0, 4, 1)
    old = _planner.SPLIT_MIN_BYTES
    _planner.SPLIT_MIN_BYTES = 0
    try:
        plan, src, dst = _permutation_plan("uint8", sizes, order, "gather")
    finally:
        _planner.SPLIT_MIN_BYTES = old
    assert plan.main.mode == "block" and plan.rest is not None
    head = plan.rest_dst // dst[3]
    assert plan.rest_src == head * src[3]
    first, rest = list(sizes), list(sizes)
    first[3], rest[3] = head, sizes[3] - head
    pairs = np.concatenate([
        np.stack([_element_offsets(first, src), _element_offsets(first, dst)], 1),
        np.stack([_element_offsets(rest, src) + plan.rest_src, _element_offsets(rest, dst) + plan.rest_dst], 1)])
    whole = np.stack([_element_offsets(sizes, src), _element_offsets(sizes, dst)], 1)
    order_by_dst = np.argsort(pairs[:, 1])
    assert np.array_equal(pairs[order_by_dst], whole[np.argsort(whole[:, 1])])


@pytest.mark.parametrize("dtype,sizes,order,op,why", [
    ("int16", (11, 42, 17, 37, 60), (4, 3, 0, 2, 1), "scatter", "a block already"),
    ("float64", (41, 61, 41, 53), (2, 0, 3, 1), "scatter", "long sides"),     # 488 x 424 bytes
    ("uint8", (2, 50, 3, 83, 28), (3, 2, 0, 4, 1), "gather", "small"),       # 0.7 MB
    ("uint8", (22, 50, 22, 80, 28), (3, 2, 0, 4, 1), "gather", "divisor"),   # 80 = 4 x 20
    ("uint8", (22, 50, 22, 83, 28), (3, 2, 0, 4, 1), "gather", "switched off"),
])
def test_copies_not_cut(dtype, sizes, order, op, why, monkeypatch):
    if why == "switched off":
        monkeypatch.setattr(_planner, "SPLIT_FOR_BLOCKS", False)
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.rest is None and _planner.describe(plan)["rest"] is None, why
    assert plan.main.dst_bytes == math.prod(sizes) * np.dtype(dtype).itemsize


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint32", (1322, 877, 7), (2, 1, 0), "gather"),       # 1322 = 2 x 661
    ("int16", (38, 28, 1091, 5), (3, 2, 1, 0), "gather"),  # 1091 prime
    ("float16", (5, 563, 117, 103), (2, 3, 1, 0), "scatter"),
    ("uint8", (314, 463, 4), (2, 1, 0), "gather"),         # 0.6 MB: at any size
])
def test_element_by_element_copies_cut_for_a_block(dtype, sizes, order, op, monkeypatch, no_slabs):
    # Copies that would go element by element (a destination-fast dimension
    # of under 8 values, no block) where a dimension that no divisor splits
    # stops the block's group: cut in two, the first part a block, whatever
    # their size; with the cut switched off, element by element.
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.main.mode == "block" and plan.rest is not None
    assert plan.main.dst_bytes + plan.rest.dst_bytes == math.prod(sizes) * np.dtype(dtype).itemsize
    assert _planner.describe(plan)["rest"] is not None
    monkeypatch.setattr(_planner, "SPLIT_FOR_BLOCKS", False)
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.main.mode == "strided" and plan.rest is None


@pytest.mark.parametrize("dtype,sizes,order,op,k", [
    ("uint32", (3, 5, 9, 6, 7, 7), (4, 2, 1, 0, 5, 3), "gather", 6),
    ("uint32", (4, 19, 3, 19, 5, 5), (5, 3, 1, 2, 0, 4), "scatter", 5),
    ("float32", (36, 23, 6, 4), (3, 1, 0, 2), "scatter", 4),
])
def test_short_source_runs_make_a_block_before_element_by_element(dtype, sizes, order, op, k, monkeypatch, no_slabs):
    # A copy that would go element by element takes a block whose K is 4-6
    # four-byte values (runs of STRIDED_SHORT_K_BYTES or more), a K the
    # block bound of other copies (BLOCK_SHORT_K_BYTES) turns down.
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.main.mode == "block" and plan.main.block.k_elems == k and plan.rest is None
    assert _planner.STRIDED_SHORT_K_BYTES <= 4 * k < _planner.BLOCK_SHORT_K_BYTES
    monkeypatch.setattr(_planner, "STRIDED_SHORT_K_BYTES", _planner.BLOCK_SHORT_K_BYTES)
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.main.mode == "strided"


def test_short_two_byte_runs_stay_element_by_element(monkeypatch, no_slabs):
    # Runs of 4-7 two-byte values (8-14 bytes) keep their rows; with the
    # bound at 10 bytes, this one's 5 values make a block's K.
    case = ("int16", (80, 5, 59, 22, 5, 5), (5, 0, 3, 1, 2, 4), "scatter")
    assert _permutation_plan(*case)[0].main.mode == "strided"
    monkeypatch.setattr(_planner, "STRIDED_SHORT_K_BYTES", 10)
    plan = _permutation_plan(*case)[0].main
    assert plan.mode == "block" and plan.block.k_elems == 5


def test_group_stop_finds_the_dimension_and_the_most_that_fits():
    # (size, source stride, destination stride) bytes, destination order: K
    # is the 50 values of source stride 1, J the 28 of destination stride 1
    # and room for 1024 // 28 = 36 more; 83 has no divisor past 1.
    merged = [(22, 1400, 2556400), (50, 1, 51128), (22, 30800, 2324), (83, 677600, 28), (28, 50, 1)]
    assert next(_planner.group_stops(merged, 1), None) == (3, 72)
    merged[3] = (80, 677600, 28)   # 20 of 80 fits: more than half the room
    assert next(_planner.group_stops(merged, 1), None) is None


def test_a_copy_element_by_element_tries_the_destination_groups_stop(monkeypatch, no_slabs):
    # uint8 3 x 2473 x 97 x 82 turned over (scattered): K stops at 97 (prime)
    # beside 82 values, J at 2473 (prime) beside 3.  Cut at K's stop, K grows
    # and leaves J no room: no block.  Cut at J's (the most multiples of its
    # room, 341), the first part is a block and so is the rest.
    sizes = [3, 2473, 97, 82]
    turned = ds.BufferTensorDesc.from_layout("uint8", sizes, (3, 2, 1, 0))
    packed = ds.BufferTensorDesc("uint8", sizes)
    dims = list(zip(sizes, packed.effective_strides, turned.effective_strides))
    assert list(_planner.group_stops(_planner.merge_dims(dims), 1)) == [(1, 96), (2, 2387)]
    copy = _planner.plan_copy(sizes, packed.effective_strides, turned.effective_strides, 8)
    assert copy.main.mode == "block" and copy.rest is not None
    assert copy.main.block.j_elems == 3 * 341 and copy.rest_dst == 2387 * 3
    monkeypatch.setattr(_planner, "SPLIT_OTHER_STOPS", False)
    copy = _planner.plan_copy(sizes, packed.effective_strides, turned.effective_strides, 8)
    assert copy.main.mode == "strided" and copy.rest is None


@pytest.mark.parametrize("op,dtype,sizes,order,whole", [
    # blocks of 12, 15 and 27 KiB of two-, one- and four-byte values: in place
    ("scatter", "int16", (261, 1572, 3, 2, 4), (4, 0, 3, 1, 2), False),
    ("gather", "uint8", (37, 17, 14, 265, 7, 3), (1, 5, 0, 4, 2, 3), False),
    ("scatter", "uint32", (11, 12, 7, 33, 6, 22), (3, 0, 2, 4, 5, 1), False),
    # a block of 10 KiB of eight-byte values: whole
    ("gather", "float64", (38, 94, 9, 5, 2, 15), (0, 1, 4, 3, 5, 2), True),
])
def test_small_blocks_of_narrower_values_stay_in_place(monkeypatch, op, dtype, sizes, order, whole):
    # Blocks of values of up to BLOCK_WHOLE_SMALL_MAX_WIDTH bytes are streamed
    # whole only from BLOCK_WHOLE_MIN_BLOCK_BYTES; with no such bound, each of
    # these (copies of 12-58 MB whose blocks' rows make runs of 1-16 KiB) is.
    plan = _permuted_plan(op, dtype, sizes, order)
    assert plan.mode == "block" and plan.block.whole == whole
    assert plan.block.j_elems * plan.block.k_elems * plan.width < _planner.BLOCK_WHOLE_MIN_BLOCK_BYTES
    assert (plan.width <= _planner.BLOCK_WHOLE_SMALL_MAX_WIDTH) != whole
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_BLOCK_BYTES", 0)
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_SHORT_ROW_BYTES", 0)    # (nor on short rows)
    plan = _permuted_plan(op, dtype, sizes, order)
    assert plan.mode == "block" and plan.block.whole


def test_group_stop_with_a_big_blocks_room_for_j():
    # int16 600 x 163 x 47 turned over: K takes the 600 values, which leaves
    # J room for 109 values at the usual bound, 2 of 163 past J's 47 (under
    # SPLIT_MIN_ROOM: no stop); with a big block's room for J (1024 values,
    # 21 of 163) 163 is cut at 147 = 7 x 21.
    merged = [(600, 2, 15322), (163, 1200, 94), (47, 195600, 2)]
    assert list(_planner.group_stops(merged, 2)) == []
    assert list(_planner.group_stops(merged, 2, big_j=True)) == [(1, 147)]


def test_group_stop_cuts_a_dimension_k_took_a_small_divisor_of(monkeypatch):
    # A float16 array of 2 x 37078 x 226 turned over: K takes the 2 values
    # of source stride 2 and 2 of the 37078 (2 x 18539), 4 values in all;
    # 37078 is cut at 72 x 512 (K's room past the first dimension).
    merged = [(2, 2, 16759256), (37078, 4, 452), (226, 148312, 2)]
    assert next(_planner.group_stops(merged, 2), None) == (1, 36864)
    monkeypatch.setattr(_planner, "SPLIT_PIECES", False)
    assert next(_planner.group_stops(merged, 2), None) is None
    monkeypatch.undo()
    merged[1] = (37080, 4, 452)   # 360 of 37080 fits, more than half of 512
    stop = next(_planner.group_stops(merged, 2), None)
    assert stop is None or stop[0] != 1   # (J's own dimension may still be cut)


@pytest.mark.parametrize("rows,cols,bits", [(2048, 2048, 16), (4096, 2048, 8), (1024, 4096, 8), (3000, 2048, 8),
                                            (2560, 2048, 16), (5000, 1024, 16)])
def test_tall_tiles_take_long_segments(rows, cols, bits, monkeypatch):
    # One- and two-byte transposes of TALL_TILE_MIN bytes or more that do not
    # stream, into destination rows a multiple of 2 KiB apart (cols values
    # per row here), copy TALL_TILE_SEGMENT values per segment, with k cut
    # into equal pieces for the tasks, and cover the rows exactly.  (Such
    # tiles stream from 8 MiB, one-byte ones from 4 MiB: the 12 MiB bound
    # keeps the larger ones here from streaming.)
    monkeypatch.setattr(_planner, "TRANSPOSE_STREAM_EIGHTHS_NARROW", _planner.TRANSPOSE_STREAM_EIGHTHS)
    monkeypatch.setattr(_planner, "TILE_STREAM_EIGHTHS_IN_CACHE", _planner.TRANSPOSE_STREAM_EIGHTHS)
    monkeypatch.setattr(_planner, "TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE", _planner.TRANSPOSE_STREAM_EIGHTHS)
    monkeypatch.setattr(_planner, "TILE_STREAM_EIGHTHS_BYTE_FAR", _planner.TRANSPOSE_STREAM_EIGHTHS)
    plan = _transpose_2d(rows, cols, bits)
    assert rows * cols * bits // 8 >= _planner.TALL_TILE_MIN
    assert plan.mode == "tile" and not plan.stream and not plan.l2 and plan.tile[2] % 2048 == 0
    assert _planner.tall_tile_segments(plan)
    assert plan.segment_len == _planner.TALL_TILE_SEGMENT
    assert plan.segments * plan.segment_len == cols
    assert plan.tasks == plan.outer_count * plan.segments >= _planner.MIN_TILE_TASKS
    assert plan.outer_count * plan.tile[0] == rows


@pytest.mark.parametrize("rows,cols,bits,why", [
    (1024, 1024, 16, "in cache"),              # 2 MiB
    (2048, 2048, 32, "four-byte values"),
    (2048, 1536, 16, "destination rows 3 KiB apart"),
    (2048, 4096, 16, "streams"),               # 16 MiB
    (64, 32768, 16, "source rows of 128 bytes"),
])
def test_other_transposes_keep_their_segments(rows, cols, bits, why):
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile"
    assert not _planner.tall_tile_segments(plan), why
    assert plan.segment_len != _planner.TALL_TILE_SEGMENT or plan.segment_len == cols, why


@pytest.mark.parametrize("rows,cols", [(4096, 4096), (3001, 4096), (6000, 3072), (4100, 4352)])
def test_streamed_two_byte_transposes_into_rows_512_bytes_apart_take_wide_segments(rows, cols):
    # Two-byte transposes that stream, into destination rows a multiple of
    # 512 bytes apart (cols values each) from source rows more than 1 KiB
    # apart, copy at least WIDE_BAND_BYTES of each destination row per
    # segment: the C side's wide bands then write up to four lines of each.
    plan = _transpose_2d(rows, cols, 16)
    assert plan.mode == "tile" and plan.stream and not plan.l2 and plan.tile[2] == cols * 2
    assert _planner.wide_band_segments(plan)
    assert plan.segment_len * 2 >= _planner.WIDE_BAND_BYTES
    assert plan.segments * plan.segment_len >= cols > (plan.segments - 1) * plan.segment_len


@pytest.mark.parametrize("rows,cols,bits,why", [
    (8192, 4096, 8, "one-byte values"),
    (4096, 4000, 16, "destination rows 8000 bytes apart"),
    (4096, 4096, 32, "four-byte values (wide bands in any segment of 64)"),
    (256, 65536, 16, "source rows of 512 bytes"),
])
def test_other_streamed_transposes_keep_their_segments(rows, cols, bits, why):
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile" and plan.stream, why
    assert not _planner.wide_band_segments(plan), why


def test_plan_refuses_what_no_descriptor_can_produce():
    with pytest.raises(ValueError, match="1 to 8"):
        _planner.plan_copy([2] * 9, [1] * 9, [1] * 9, 8)
    with pytest.raises(ValueError, match="element_bits"):
        _planner.plan_copy([2], [1], [1], 12)
    with pytest.raises(ValueError, match="sizes must be"):
        _planner.plan_copy([0], [1], [1], 8)


def test_describe_is_the_planner_decision():
    plan = _engine.Plan([300, 1030], [1, 300], [1030, 1], 16)
    info = plan.describe()
    assert info["mode"] == plan.layout.main.mode == "tile"
    assert info["tile"] == plan.layout.main.tile


@pytest.mark.parametrize("op,dtype,sizes,order,j,k", [
    # a float32 gather of 53 MB: source rows of 882 values (3528 bytes),
    # destination rows of 50 (200 bytes, short of BLOCK_L2_DEST_RUN)
    ("gather", "float32", (63, 40, 15, 7, 50), (4, 1, 2, 0, 3), 50, 882),
    # a uint8 scatter of 52 MB: source rows of 1020 bytes, destination rows of 130
    ("scatter", "uint8", (26, 25, 13, 17, 24, 15), (5, 3, 4, 2, 1, 0), 130, 1020),
])
def test_blocks_whose_source_rows_alone_are_long_are_transposed_in_place(monkeypatch, op, dtype, sizes, order,
                                                                        j, k):
    # Blocks whose runs allow the source L2 buffer alone (block_l2_mode 1)
    # take it only with BLOCK_L2_SOURCE_ONLY; by default they are transposed
    # in place (blocks streamed whole, which would take these, kept out).
    monkeypatch.setattr(_planner, "WHOLE_BLOCKS", False)
    p = _permuted_plan(op, dtype, sizes, order)
    assert p.mode == "block" and p.l2 == 0 and (p.block.j_elems, p.block.k_elems) == (j, k)
    monkeypatch.setattr(_planner, "BLOCK_L2_SOURCE_ONLY", True)
    p = _permuted_plan(op, dtype, sizes, order)
    assert p.mode == "block" and p.l2 == 1 and (p.block.j_elems, p.block.k_elems) == (j, k)


@pytest.mark.parametrize("h", [8, 14, 28])
def test_four_line_block_tiles_only_below_their_bound(monkeypatch, h):
    # A float32 block whose k rows are adjacent in the destination (J = 13
    # values, 52 bytes, and the first K dimension's stride is those 52 bytes):
    # tiles four source lines tall below BLOCK_TALL_TILE_MAX_TOTAL bytes, one
    # line tall from it, the bound counted in bytes copied.
    sizes = [24, 32, h, 16, 13]
    desc = ds.BufferTensorDesc.from_layout("float32", sizes, [4, 2, 0, 1, 3])
    packed = list(ds.BufferTensorDesc("float32", sizes).effective_strides)
    total = math.prod(sizes) * 4

    def lines():
        info = _planner.describe(_planner.plan_copy(sizes, list(desc.effective_strides), packed, 32))
        assert info["mode"] == "block" and info["l2"] == "none"
        assert info["block"]["j"] == [(13, desc.effective_strides[4] * 4)]
        return info["block"]["lines"]

    assert lines() == (4 if total < _planner.BLOCK_TALL_TILE_MAX_TOTAL else 1)
    monkeypatch.setattr(_planner, "BLOCK_TALL_TILE_MAX_TOTAL", total)
    assert lines() == 1
    monkeypatch.setattr(_planner, "BLOCK_TALL_TILE_MAX_TOTAL", total + 1)
    assert lines() == 4


@pytest.mark.parametrize("dtype,j,lines", [
    ("float32", 13, 4), ("float64", 8, 4),     # J within a line
    ("float32", 17, 1), ("float64", 9, 1),     # J past a line
    ("int16", 25, 1), ("uint8", 60, 1),        # one- and two-byte values
])
def test_four_line_block_tiles_only_for_wider_values_within_a_line(monkeypatch, dtype, j, lines):
    # Blocks whose k rows are adjacent in the destination take tiles four
    # source lines tall only for values of BLOCK_TALL_TILE_MIN_WIDTH bytes
    # or more whose J is at most BLOCK_TALL_TILE_MAX_J_BYTES; with both
    # bounds opened, every one of these does.
    sizes = [24, 32, 8, 16, j]
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, [4, 2, 0, 1, 3])
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    assert math.prod(sizes) * desc.element_bits // 8 < _planner.BLOCK_TALL_TILE_MAX_TOTAL

    def plan():
        info = _planner.describe(_planner.plan_copy(sizes, list(desc.effective_strides), packed,
                                                    desc.element_bits))
        assert info["mode"] == "block" and info["inner"][0] == j
        return info["block"]["lines"]

    assert plan() == lines
    monkeypatch.setattr(_planner, "BLOCK_TALL_TILE_MIN_WIDTH", 1)
    monkeypatch.setattr(_planner, "BLOCK_TALL_TILE_MAX_J_BYTES", 512)
    assert plan() == 4


@pytest.mark.parametrize("dtype,j,lines", [
    ("float32", 13, 4), ("float64", 8, 4), ("float32", 17, 4), ("float64", 9, 4),
    ("int16", 25, 4), ("float16", 40, 4),      # two-byte values, J past a line
    ("uint8", 60, 1), ("int8", 20, 1),         # one-byte values keep tiles one line tall
])
def test_four_line_block_tiles_for_two_byte_values_and_up_with_a_small_l3(monkeypatch, dtype, j, lines):
    # With a small L3's bounds (_planner.L3_BOUNDS), blocks whose k rows are
    # adjacent in the destination take tiles four source lines tall for
    # values of two bytes or more whatever their J (up to 64 values).
    for name in ("BLOCK_TALL_TILE_MIN_WIDTH", "BLOCK_TALL_TILE_MAX_J_BYTES"):
        monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    sizes = [24, 32, 8, 16, j]
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, [4, 2, 0, 1, 3])
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    info = _planner.describe(_planner.plan_copy(sizes, list(desc.effective_strides), packed, desc.element_bits))
    assert info["mode"] == "block" and info["inner"][0] == j
    assert info["block"]["lines"] == lines


@pytest.mark.parametrize("rows,cols,bits,streams", [
    (3001, 3011, 8, True),      # 9.0 MB of bytes, source rows 3001 bytes apart
    (2203, 2017, 16, True),     # 8.9 MB of int16
    (2897, 2895, 8, True),      # just under 8 MiB, but one-byte rows far apart: from 4 MiB
    (1452, 1853, 32, True),     # 10.8 MB of four-byte values: those stream from 2 MiB
    (2501, 2511, 16, True),     # 12.6 MB: past 12 MiB, as before
])
def test_narrow_tiles_stream_from_8_mib(rows, cols, bits, streams):
    # Tile plans of one- and two-byte values whose source rows lie 40 bytes
    # or more apart stream from 8 MiB (TRANSPOSE_STREAM_EIGHTHS_NARROW of the
    # streaming threshold; one-byte ones whose source rows lie more than 1 KiB
    # apart, as these, from 4 MiB), wider values from 2 MiB.
    plan = _transpose_2d(rows, cols, bits)
    assert plan.mode == "tile" and abs(plan.inner[1]) >= _planner.TILE_STREAM_NARROW_MIN_ROW
    assert plan.stream == streams
    assert _planner.tile_stream_min(bits // 8, abs(plan.inner[1])) == (
        4 << 20 if bits == 8 else 8 << 20 if bits == 16 else _planner.wide_tile_stream_min(abs(plan.inner[1])))


@pytest.mark.parametrize("dtype,sizes,streams", [
    ("uint8", (2, 9, 701, 701), True),     # 8.8 MB: pixels of 9 bytes, past 8 MiB
    ("uint8", (2, 12, 601, 601), True),    # 8.7 MB
    ("uint8", (3, 15, 433, 433), True),    # 8.4 MB
    ("uint8", (2, 15, 501, 541), False),   # 8.1 MB, but 7.8 MiB
    ("uint8", (2, 8, 701, 801), False),    # 9.0 MB of 8-byte pixels (the word transposes): from 12 MiB
    ("uint8", (2, 16, 501, 601), False),   # 9.6 MB of 16-byte pixels: from 12 MiB
    ("uint8", (2, 16, 641, 641), True),    # 13.1 MB: past 12 MiB
    ("int16", (2, 9, 501, 501), True),     # 9.0 MB: pixels of 18 bytes
    ("int16", (2, 19, 331, 351), True),    # 8.8 MB: of 38 bytes
    ("int16", (2, 13, 401, 401), False),   # 8.4 MB, but 7.97 MiB
    ("int16", (2, 8, 601, 501), False),    # 9.6 MB of 16-byte pixels: from 12 MiB
], ids=str)
@pytest.mark.parametrize("small_l3", [False, True], ids=["large_l3", "small_l3"])
def test_short_pixels_to_planes_stream_from_8_mib(dtype, sizes, streams, small_l3, monkeypatch):
    # NHWC to NCHW gathers of 9-15 one-byte or 9-19 two-byte channels
    # (source rows SHORT_ROWS bytes apart) stream from 8 MiB with a large L3,
    # like rows 40 bytes or more apart; with a small L3 the one-byte ones do
    # too, and the two-byte ones from 12 MiB, as other close rows do.
    if small_l3:
        for name in _planner.L3_BOUNDS:
            monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    width = np.dtype(dtype).itemsize
    plan = _permuted_plan("gather", dtype, sizes, (0, 2, 3, 1))
    nbytes = math.prod(sizes) * width
    row = sizes[1] * width
    assert plan.mode == "tile" and plan.inner[1] == row and plan.tile[0] == sizes[1]
    early = not small_l3 or width == 1
    assert plan.stream == (streams if early else nbytes >= 12 << 20)
    lo, hi = _planner.SHORT_ROWS[width]
    assert _planner.tile_stream_min(width, row) == (8 << 20 if lo <= row <= hi and early else 12 << 20)


@pytest.mark.parametrize("rows,cols,bits,streams", [
    (2001, 1503, 32, True),     # 12.0 MB of float32: under 12 MiB, but four-byte values
    (1001, 1503, 64, True),     # 12.0 MB of float64
    (760, 701, 32, True),       # 2.13 MB: just past 2 MiB
    (700, 701, 32, False),      # 1.96 MB: under it, in cache
    (511, 511, 64, False),      # 2.09 MB, but the 2 MiB bound is 2 097 152 bytes
    (2001, 1503, 16, False),    # 6.0 MB of int16: narrow values keep 8 MiB
])
def test_wide_tiles_stream_from_2_mib(rows, cols, bits, streams):
    # Tile plans of four- and eight-byte values stream from 2 MiB
    # (wide_tile_stream_min), and with source rows far apart (a 2-D
    # transpose's) go through the L2 buffers from there too
    # (TILE_L2_WIDE_MIN_TOTAL).
    plan = _transpose_2d(rows, cols, bits)
    nbytes = rows * cols * bits // 8
    assert plan.mode == "tile" and plan.inner[1] > _planner.CLOSE_ROW_BYTES
    assert plan.stream == streams == (bits >= 32 and nbytes >= _planner.wide_tile_stream_min(plan.inner[1]))
    assert bool(plan.l2) == streams == (bits >= 32 and nbytes >= _planner.TILE_L2_WIDE_MIN_TOTAL)


@pytest.mark.parametrize("dtype,sizes,streams", [("float32", (2, 40, 173, 147), True),   # 8.1 MB
                                                 ("float64", (2, 24, 61, 97), True),     # 2.3 MB
                                                 ("float32", (1, 24, 61, 97), False)])   # 0.6 MB
def test_wide_pixels_stream_from_2_mib_without_l2(dtype, sizes, streams):
    # NHWC to NCHW gathers of four- and eight-byte values (source rows, the
    # pixels, close together) stream from 2 MiB too, but keep out of the L2
    # buffers until stream_min_total.
    strided = list(ds.BufferTensorDesc.from_layout(dtype, list(sizes), "NHWC").effective_strides)
    packed = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    plan = _planner.plan_copy(list(sizes), strided, packed, np.dtype(dtype).itemsize * 8).main
    assert plan.mode == "tile" and plan.inner[1] <= _planner.CLOSE_ROW_BYTES
    assert plan.stream == streams and not plan.l2


@pytest.mark.parametrize("dtype,sizes,op,streams", [
    ("uint8", (3, 21, 403, 340), "gather", False),    # pixels of 21 bytes: rows 21 bytes apart
    ("int16", (1, 8, 467, 1200), "gather", False),    # pixels of 16 bytes
    ("int16", (1, 18, 467, 555), "gather", True),     # pixels of 36 bytes (SHORT_ROWS)
    ("uint8", (3, 12, 403, 640), "gather", True),     # pixels of 12 bytes (SHORT_ROWS)
    ("uint8", (2, 40, 592, 257), "gather", True),     # pixels of 40 bytes
    ("float16", (3, 55, 72, 437), "scatter", True),   # planes into pixels: rows a plane apart
    ("float32", (3, 30, 217, 116), "gather", True),   # 9.1 MB of four-byte values: from 2 MiB
])
def test_nhwc_conversions_of_8_to_12_mib_stream_by_row_distance(dtype, sizes, op, streams):
    # NHWC conversions of 8-12 MiB: one- and two-byte tile plans stream when
    # their source rows lie at least TILE_STREAM_NARROW_MIN_ROW bytes apart
    # or SHORT_ROWS bytes apart (9-15 one-byte values, 9-19 two-byte ones),
    # four- and eight-byte ones whatever the distance.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    nbytes = desc.total_tensor_size_in_bytes
    assert (8 << 20) <= nbytes < _planner.transpose_stream_min()
    packed = ds.BufferTensorDesc(dtype, sizes)
    src, dst = (desc, packed) if op == "gather" else (packed, desc)
    plan = _planner.plan_copy(list(sizes), src.effective_strides, dst.effective_strides,
                              np.dtype(dtype).itemsize * 8).main
    assert plan.mode == "tile" and plan.stream == streams


@pytest.mark.parametrize("outer,expect", [
    # The dimension one source row long (stride 70 there) moves in beside the
    # innermost, which is one destination row long.
    ([(3, 70, 9000), (100, 210, 280), (4, 50000, 70)], [(100, 210, 280), (3, 70, 9000), (4, 50000, 70)]),
    ([(100, 210, 280), (3, 70, 9000), (4, 50000, 70)], None),      # already beside it
    ([(3, 70, 9000), (4, 50000, 140)], None),                      # innermost not one destination row
    ([(3, 71, 9000), (100, 210, 280), (4, 50000, 70)], None),      # no dimension one source row long
    ([(17, 70, 9000), (100, 2000, 280), (4, 50000, 70)], None),    # 68 rows a pair: more than 64
])
def test_pair_short_rows(outer, expect):
    assert _planner.pair_short_rows(outer, 70) == expect


def test_short_rows_far_apart_in_both_orders_run_in_pairs(monkeypatch):
    # Rows of 70 bytes whose neighbours are megabytes of copying apart in
    # source order (on the destination side) and in destination order (on
    # the source side): destination order with the source's row dimension
    # moved in beside the innermost, so that both sides run in streams.
    sizes, order = (3, 3, 25105, 4, 35), (1, 3, 2, 0, 4)
    for op in ("gather", "scatter"):
        p = _permuted_plan(op, "float16", sizes, order)
        assert p.mode == "memcpy" and p.inner == (35, 2, 2)
        dest = sorted(p.outer, key=lambda t: t[2], reverse=True)
        source = sorted(p.outer, key=lambda t: t[1], reverse=True)
        assert min(_planner.revisit_bytes(source, 70, 2),
                   _planner.revisit_bytes(dest, 70, 1)) >= _planner.SHORT_ROW_REVISIT_BYTES
        assert p.outer[-1][2] == 70 and p.outer[-2][1] == 70
        assert p.outer == _planner.pair_short_rows(dest, 70)
        monkeypatch.setattr(_planner, "SHORT_ROW_PAIR_BYTES", 0)
        assert _permuted_plan(op, "float16", sizes, order).outer in (dest, source)
        monkeypatch.undo()
    # Rows of 152 bytes (SHORT_ROW_PAIR_BYTES or more) keep a plain order.
    sizes, order = (6, 103, 35, 7, 38), (3, 1, 2, 0, 4)
    p = _permuted_plan("gather", "uint32", sizes, order)
    dest = sorted(p.outer, key=lambda t: t[2], reverse=True)
    source = sorted(p.outer, key=lambda t: t[1], reverse=True)
    assert p.inner == (38, 4, 4) and 152 >= _planner.SHORT_ROW_PAIR_BYTES
    assert min(_planner.revisit_bytes(source, 152, 2),
               _planner.revisit_bytes(dest, 152, 1)) >= _planner.SHORT_ROW_REVISIT_BYTES
    assert p.outer in (dest, source)
    monkeypatch.setattr(_planner, "SHORT_ROW_PAIR_BYTES", 256)
    assert _permuted_plan("gather", "uint32", sizes, order).outer == _planner.pair_short_rows(dest, 152)


def _far_revisit(plan, dim):
    """Bytes of other tasks between two values of outer dimension ``dim``."""
    kn = plan.tile[0] if plan.tile is not None else 1
    i = plan.outer.index(dim)
    return 2 * plan.width * kn * plan.inner[0] * math.prod(n for n, _, _ in plan.outer[i + 1:])


def test_strided_plans_run_far_revisited_dimensions_innermost(monkeypatch):
    # An int16 gather whose source rows interleave three values of a
    # dimension that lies 5.8 MB apart in the destination (outermost in
    # destination order): every source line was read three times, the whole
    # copy apart.  That dimension now runs innermost; the dimension already
    # innermost, which continues the destination, stays next to it.
    sizes, order = (3, 102, 75, 21, 9, 2), (3, 1, 5, 2, 4, 0)
    plan = _main_plan("int16", sizes, order, "gather")
    monkeypatch.setattr(_planner, "STRIDED_REVISIT_ORDER", False)
    before = _main_plan("int16", sizes, order, "gather")
    assert plan.mode == before.mode == "strided"
    interleaved = (3, 2, 5783400)
    assert before.outer[0] == interleaved and _far_revisit(before, interleaved) > _planner.FAR_REVISIT
    assert plan.outer == before.outer[1:] + [interleaved]
    assert (plan.tile, plan.inner) == (before.tile, before.inner)


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint32", (31, 57, 4, 130, 4), (0, 3, 1, 4, 2), "scatter"),    # comes back within 7 KiB
    ("float32", (103, 3, 2, 65, 17, 2), (3, 5, 0, 1, 4, 2), "gather"),
    ("int16", (1570, 94, 3, 9, 5), (3, 1, 0, 4, 2), "gather"),
])
def test_strided_plans_keep_near_revisits_in_order(dtype, sizes, order, op, monkeypatch, no_slabs):
    # Dimensions that come back to a task's lines within FAR_REVISIT bytes
    # keep the destination order (moving them measured 0.57-0.88x); planned
    # element by element, as where no dimension continues a small
    # interleave's planes in the source.
    monkeypatch.setattr(_planner, "small_pixels_join", lambda *args: False)
    plan = _main_plan(dtype, sizes, order, op)
    monkeypatch.setattr(_planner, "STRIDED_REVISIT_ORDER", False)
    before = _main_plan(dtype, sizes, order, op)
    assert plan.mode == "strided" and plan.outer == before.outer
    for dim in plan.outer:
        if any(0 < x < 64 for x in dim[1:]):
            assert _far_revisit(plan, dim) <= _planner.FAR_REVISIT


@pytest.mark.parametrize("dtype,sizes,order,op,cut", [
    ("uint8", (15, 163, 14, 21, 5, 15), (5, 4, 0, 2, 1, 3), "gather", True),    # K of 21: cut, J of 75 kept
    ("uint8", (14, 1741, 366, 2, 3), (3, 4, 0, 2, 1), "scatter", False),         # K of 36, but J 1741 -> 358
    ("uint8", (47, 101, 3, 10, 116), (2, 4, 3, 1, 0), "scatter", False),         # J of 47 short, K of 580
])
def test_blocks_of_short_source_runs_cut_only_where_j_keeps_its_length(dtype, sizes, order, op, cut, monkeypatch):
    # (without the cut for a longer J, which takes the third: SPLIT_BLOCK_BIG_J_BYTES)
    monkeypatch.setattr(_planner, "SPLIT_BLOCK_BIG_J_BYTES", 0)
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert plan.main.mode == "block" and plan.main.dst_bytes >= _planner.SPLIT_MIN_BYTES
    assert (plan.rest is not None) == cut
    if cut:
        assert plan.main.block.j_elems == 75 and plan.main.block.k_elems * plan.main.width >= 1000


#: Tiny blocks (under SPLIT_TINY_BLOCK_BYTES) of 31-57 MB and the blocks
#: their cut's first part holds: J x K values before, J x K after.
TINY_BLOCKS = [
    ("uint8", (587, 301, 4, 3, 19), (4, 1, 0, 3, 2), "scatter", (12, 19), (1020, 19)),
    ("float32", (14, 212, 1198, 4), (2, 1, 3, 0), "gather", (8, 14), (1024, 14)),     # 1198 = 2 x 599
    ("int16", (2, 12, 63, 1923, 2, 3), (3, 2, 0, 4, 5, 1), "gather", (18, 12), (1020, 12)),  # J took 3 of 1923
    ("float64", (758, 32, 2, 5, 2, 8), (5, 3, 1, 0, 2, 4), "scatter", (8, 8), (1024, 8)),
    ("float16", (29, 12, 16, 79, 5, 7), (3, 2, 5, 0, 4, 1), "gather", (35, 12), (1015, 12)),  # 79 prime
]


@pytest.mark.parametrize("dtype,sizes,order,op,before,after", TINY_BLOCKS, ids=str)
def test_tiny_blocks_cut_where_their_block_grows(dtype, sizes, order, op, before, after, monkeypatch):
    # A block of under SPLIT_TINY_BLOCK_BYTES is cut at a dimension that
    # stops its own J or K group: the first part's block at least
    # SPLIT_TINY_GROW times as many values, neither group shorter; the
    # rest copied after it.  (Whole: without that cut, nor the cut for a
    # longer J, which takes three of these too: SPLIT_BLOCK_BIG_J_BYTES.)
    plan, _, _ = _permutation_plan(dtype, sizes, order, op)
    monkeypatch.setattr(_planner, "SPLIT_TINY_BLOCK_BYTES", 0)
    monkeypatch.setattr(_planner, "SPLIT_BLOCK_BIG_J_BYTES", 0)
    whole, _, _ = _permutation_plan(dtype, sizes, order, op)
    assert whole.rest is None and whole.main.mode == "block"
    w = whole.main.width
    b = whole.main.block
    assert (b.j_elems, b.k_elems) == before and b.j_elems * b.k_elems * w < 1024
    q = plan.main.block
    assert plan.rest is not None and plan.main.mode == "block" and (q.j_elems, q.k_elems) == after
    assert q.j_elems >= b.j_elems and q.k_elems >= b.k_elems
    assert q.j_elems * q.k_elems >= _planner.SPLIT_TINY_GROW * b.j_elems * b.k_elems


def test_tiny_block_bounds(monkeypatch):
    # The cut at its bounds: blocks of SPLIT_TINY_BLOCK_BYTES or more, copies
    # under SPLIT_TINY_MIN_BYTES and first parts that grow less than
    # SPLIT_TINY_GROW times are left whole.
    dtype, sizes, order, op, before, after = TINY_BLOCKS[0]
    block_bytes = before[0] * before[1]
    total = math.prod(sizes)
    grow = after[0] * after[1] / block_bytes

    def cut(**settings):
        with pytest.MonkeyPatch.context() as mp:
            for name, value in settings.items():
                mp.setattr(_planner, name, value)
            return _permutation_plan(dtype, sizes, order, op)[0].rest is not None

    assert cut() and cut(SPLIT_TINY_BLOCK_BYTES=block_bytes + 1)
    assert not cut(SPLIT_TINY_BLOCK_BYTES=block_bytes)
    assert cut(SPLIT_TINY_MIN_BYTES=total) and not cut(SPLIT_TINY_MIN_BYTES=total + 1)
    assert cut(SPLIT_TINY_GROW=int(grow)) and not cut(SPLIT_TINY_GROW=int(grow) + 1)
    # (the bounds the README states: blocks of under 1 KiB, copies from 2 MiB)
    assert (_planner.SPLIT_TINY_BLOCK_BYTES, _planner.SPLIT_TINY_MIN_BYTES) == (1024, 2 << 20)


def test_a_copy_cut_along_the_destinations_fastest_dimension(monkeypatch):
    # A float64 reversal of (24441, 22, 4): K is the source's 88 values,
    # and J's first dimension, 24441 = 3 x 8147, has no divisor within J's
    # room of 744 but 3.  The copy is cut along it: 744 x 32 values as
    # blocks, the rest (633) after them.
    sizes, order = (24441, 22, 4), (2, 1, 0)
    plan, _, dst = _permutation_plan("float64", sizes, order, "scatter")
    room = min(_planner.BLOCK_GROUP_FIRST, _planner.block_elems(8) // 88)
    assert room == 744 and 24441 % room == 633
    assert plan.main.mode == "block" and plan.main.block.k_elems == 88
    assert plan.main.block.j_elems > 8 and (24441 - 633) % plan.main.block.j_elems == 0
    assert plan.rest is not None and plan.rest.block.j_elems == 633
    assert plan.rest_dst == (24441 - 633) * dst[0] * 8
    monkeypatch.setattr(_planner, "SPLIT_INNER_J", False)
    uncut, _, _ = _permutation_plan("float64", sizes, order, "scatter")
    assert uncut.rest is None and uncut.main.mode == "tile" and uncut.main.tile[0] == 4


def test_runs_from_a_group_of_source_dimensions_make_a_block(monkeypatch):
    # Runs of 5 bytes whose source-fast side is two dimensions (4 x 81 runs
    # back to back): a block of runs, in place, rather than the run tile's
    # tasks of 4 x 12 runs (20 bytes of each source row).
    sizes, order = (81, 4, 252, 4, 12, 5), (4, 1, 2, 0, 3, 5)
    plan = _main_plan("uint8", sizes, order, "gather")
    assert plan.mode == "block" and plan.width == 5
    assert plan.block.k_elems >= 4 * 81 and plan.block.j_elems == 12
    assert plan.block.k_elems * plan.block.j_elems * 5 <= _planner.RUN_BLOCK_BYTES
    assert (plan.l2, plan.stream, plan.block.whole, plan.block.next) == (0, False, False, False)
    monkeypatch.setattr(_planner, "RUN_BLOCKS", False)
    tile = _main_plan("uint8", sizes, order, "gather")
    assert tile.mode == "tile" and tile.width == 5 and tile.tile[0] == 4


def test_runs_whose_tile_reads_long_source_rows_keep_the_run_tile():
    # An 18-byte-run transpose whose run tile reads 129 runs (2322 bytes) of
    # each source row a task: at least RUN_BLOCK_TILE_BYTES, so the tile.
    plan = _main_plan("float16", (173, 129, 9), (1, 0, 2), "gather")
    assert plan.mode == "tile" and plan.width == 18
    assert plan.tile[0] * 18 >= _planner.RUN_BLOCK_TILE_BYTES


def test_aliased_tile_rows_count_the_rows_a_band_puts_in_one_l1_set():
    # Rows a band of up to 64 puts 16 or more to an L1 set (4 KiB period);
    # source rows only where there are 128 or more (an NCHW to NHWC copy of
    # 32 or 64 channels of 256 x 256 planes is not aliased: it keeps its
    # bounds), destination rows from as few as 16 (4 KiB apart).
    def aliased(source_rows, source_stride, dest_rows, dest_stride):
        return _planner.aliased_tile_rows((source_rows, source_stride, 1), (dest_rows, 1, dest_stride))
    assert aliased(128, 65536, 4096, 128) and aliased(256, -4096, 8, 0)
    assert not aliased(64, 65536, 4096, 128) and not aliased(32, 262144, 16384, 32)
    assert not aliased(4096, 512, 4096, 256)            # 8 of 64 rows to a set, either side
    assert aliased(4096, 256, 64, 1024) and not aliased(4096, 256, 64, 512)
    assert aliased(4096, 256, 16, 4096) and not aliased(4096, 256, 8, 4096)
    assert not aliased(4096, 0, 4096, 0)                # broadcast rows
