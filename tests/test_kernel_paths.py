"""Kernel paths at sizes the random property tests rarely reach.

Each case is checked against numpy (``as_strided`` views and fancy indexing),
never against dmlstride itself:

* the transposing tile with many rows (k up to 300) and ragged remainders in
  both directions, for every element width, which exercises the register
  micro-kernels, the staging tile and their edges (a regression: the byte
  staging tile once overflowed its stack buffer with k >= 128 and a j
  remainder);
* the de-interleave and interleave kernels for 2 to 8 channels;
* 4-bit tensors packed in any memory order, which go through byte staging
  blocks, including blocks that start on an odd nibble, and 4-bit copies
  with nibbles on both sides (source runs unpacked, reordered as bytes,
  destination runs packed);
* transposes written with streaming (non-temporal) stores, in the tile and
  the block paths, at every destination alignment;
* 1 and 2 threads.
"""

import contextlib
import math

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import _engine, _planner, transfer

WIDTH_DTYPES = ["uint8", "float16", "float32", "float64"]


def _random_buffer(nbytes, seed):
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def _at_line_offset(nbytes, skew, seed):
    # nbytes of random bytes starting skew bytes past a 64-byte line.
    raw = _random_buffer(nbytes + 128, seed)
    start = (-raw.ctypes.data) % 64 + skew
    out = raw[start:start + nbytes]
    assert out.ctypes.data % 64 == skew
    return out


def _numpy_gather(buf, desc):
    dt = ds.numpy_dtype(desc.data_type)
    strides = [s * dt.itemsize for s in desc.effective_strides]
    return np.ndarray(desc.sizes, dt, buffer=buf, strides=strides).copy()


@contextlib.contextmanager
def _isa_level(level):
    # The kernels of the best instruction set at or below level (the CPU may
    # lack the higher ones), then the best the CPU has again.
    chosen = _engine._select_isa(level)
    try:
        assert chosen <= level
        yield chosen
    finally:
        _engine._select_isa(3)


@contextlib.contextmanager
def _stream_threshold(nbytes):
    # Plans made inside stream from nbytes on.  Setting the threshold drops
    # the plans gather, scatter and copy_tensor keep by descriptor, so none
    # made under the other threshold (by an earlier test, or the other
    # parametrization) is reused: checked here.
    ds.gather(bytes(64), ds.BufferTensorDesc("uint8", [2, 3], strides=[1, 2]))
    ds.scatter(np.zeros((2, 3), np.uint8), ds.BufferTensorDesc("uint8", [2, 3], strides=[1, 2]), bytearray(64))
    assert transfer._plans and _engine.gather_specs_held() and _engine.scatter_specs_held()
    old = _engine._set_stream_min_total(nbytes)
    assert not transfer._plans and not _engine.gather_specs_held() and not _engine.scatter_specs_held()
    try:
        yield
    finally:
        _engine._set_stream_min_total(old)


@pytest.fixture
def tiles_stream_from_12_mib(far_rows_through_l2_from_16_mib):
    # Tile plans of one- and two-byte values whose source rows lie 40 bytes
    # or more apart stream from 8 MiB (one-byte ones more than 1 KiB apart
    # from 4 MiB; one-byte ones 9-15 bytes apart and two-byte ones 18-38 from
    # 8 MiB too), of four- and eight-byte values from 2 MiB (with a small L3,
    # those whose rows lie a multiple of 1 KiB apart from 4 or 8 MiB); the tests of
    # such copies under 12 MiB that do not stream (the paths that copies of
    # closer rows, and ones under a raised threshold, still take) pin them
    # with the 12 MiB bound (and the L2 buffers of transposes with source
    # rows far apart at 16 MiB: conftest), cached plans dropped on the way
    # in and out.
    p = _planner
    names = ("TRANSPOSE_STREAM_EIGHTHS_NARROW", "TILE_STREAM_EIGHTHS_IN_CACHE", "TILE_STREAM_EIGHTHS_IN_CACHE_CLOSE",
             "TILE_STREAM_EIGHTHS_BYTE_FAR", "TILE_STREAM_EIGHTHS_SHORT_ROWS", "TILE_STREAM_EIGHTHS_SHORT_BYTE_ROWS",
             "TILE_STREAM_WIDE_SIXTEENTHS", "TILE_STREAM_WIDE_FAR_SIXTEENTHS", "TILE_STREAM_WIDE_ALIASED_SIXTEENTHS",
             "TILE_STREAM_NARROW_ALIASED_SIXTEENTHS")
    old = [getattr(p, name) for name in names]
    pinned = (p.TRANSPOSE_STREAM_EIGHTHS,) * 6 + (2 * p.TRANSPOSE_STREAM_EIGHTHS,) * 4
    for name, value in zip(names, pinned):
        setattr(p, name, value)
    try:
        with _stream_threshold(p.stream_min_total):
            yield
    finally:
        for name, value in zip(names, old):
            setattr(p, name, value)


def _check_scatter(values, desc, out, offset=0, **options):
    # Scatter values into out (random bytes, any writable buffer), against
    # numpy's assignment through a strided view of a copy of it: every byte
    # outside the elements (guard bytes included) must stay as it was.
    dt = values.dtype
    expect = np.frombuffer(bytes(out), np.uint8).copy()
    np.ndarray(desc.sizes, dt, buffer=expect, offset=offset,
               strides=[s * dt.itemsize for s in desc.effective_strides])[...] = values
    ds.scatter(values, desc, out, offset=offset, **options)
    assert bytes(out) == expect.tobytes()


def _check_gather_out(desc, rng):
    # A gather of random bytes into a preallocated out= (which takes the plan
    # as it is, streaming stores included; a fresh output takes it without)
    # against numpy's strided view.
    buf = rng.integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
    expect = _numpy_gather(buf, desc)
    out = np.empty_like(expect)
    assert ds.gather(buf, desc, out=out) is out and out.tobytes() == expect.tobytes()


def _check_column_major_both_ways(desc, src_seed, dst_seed):
    # desc, a column-major k x j matrix: gathered (random bytes) against
    # numpy, and the values scattered back as the column-major j x k matrix
    # of their transpose (random bytes, 64 guard bytes past the end).
    k, j = desc.sizes
    buf = _random_buffer(desc.total_tensor_size_in_bytes, src_seed)
    expect = _numpy_gather(buf, desc)
    assert ds.gather(buf, desc).tobytes() == expect.tobytes()
    back = ds.BufferTensorDesc(desc.data_type, [j, k], strides=[1, j])
    _check_scatter(np.ascontiguousarray(expect.T), back, _random_buffer(back.total_tensor_size_in_bytes + 64, dst_seed))


def _check_gather_out_between_guards(buf, desc, expect, skew, seed, **options):
    # A gather into an out= array skew bytes past a line, in random bytes
    # (skew of them before it, 128 - skew after): out holds expect, and every
    # byte around it stays as it was.
    room = _at_line_offset(expect.nbytes + 128, 0, seed)
    before = room.copy()
    out = np.frombuffer(room, expect.dtype, count=expect.size, offset=skew).reshape(expect.shape)
    assert ds.gather(buf, desc, out=out, **options) is out
    assert out.tobytes() == expect.tobytes()
    assert room[:skew].tobytes() == before[:skew].tobytes()
    assert room[skew + expect.nbytes:].tobytes() == before[skew + expect.nbytes:].tobytes()


def _check_gather_and_scatter(desc, rng):
    # A gather of random bytes against numpy's strided view, and a scatter of
    # random values into random bytes with 16 guard bytes after them
    # (_check_scatter).
    buf = rng.integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
    got = ds.gather(buf, desc)
    assert got.tobytes() == _numpy_gather(buf, desc).tobytes()
    values = np.frombuffer(rng.integers(0, 256, got.nbytes, dtype=np.uint8).tobytes(), got.dtype).reshape(got.shape)
    _check_scatter(values, desc, bytearray(rng.integers(0, 256, desc.total_tensor_size_in_bytes + 16,
                                                        dtype=np.uint8).tobytes()))


@pytest.mark.parametrize("dtype,sizes,segment", [
    ("int16", (4, 150, 100, 100), 2048),    # 300-byte pixels: 4 KiB of each plane a task
    ("float16", (1, 200, 110, 200), 1408),  # as many as leave 16 tasks (22000 pixels)
    ("uint8", (4, 150, 150, 150), None),    # one-byte values keep their segments
])
def test_streamed_two_byte_pixels_take_4_kib_of_each_plane(dtype, sizes, segment, threads):
    # An NHWC to NCHW gather of two-byte values that streams (8.8-13.5 MB)
    # writes up to 4 KiB of each destination row (plane) a task, as long as
    # that leaves MIN_TILE_TASKS tasks; gathered and scattered against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    packed = ds.BufferTensorDesc(dtype, sizes)
    plan = _planner.plan_copy(list(sizes), desc.effective_strides, packed.effective_strides,
                              desc.element_bits).main
    assert plan.mode == "tile" and plan.stream and not plan.l2
    if segment is None:
        assert plan.segment_len * plan.width < _planner.STREAM_TILE_ROW_BYTES
    else:
        assert plan.segment_len == segment and plan.tasks >= _planner.MIN_TILE_TASKS
    _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


def _check_copy_tensor(buf, src_desc, dst_desc, seed):
    # copy_tensor into a random destination buffer of exactly its size,
    # against numpy's assignment through a strided view of a copy of it.
    dst = _random_buffer(dst_desc.total_tensor_size_in_bytes, seed)
    expect = dst.copy()
    dt = ds.numpy_dtype(dst_desc.data_type)
    np.ndarray(dst_desc.sizes, dt, buffer=expect,
               strides=[s * dt.itemsize for s in dst_desc.effective_strides])[...] = _numpy_gather(buf, src_desc)
    ds.copy_tensor(buf, src_desc, dst, dst_desc)
    assert dst.tobytes() == expect.tobytes()


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("k,j", [(297, 17), (129, 33), (300, 65), (64, 64), (17, 300), (16, 16), (31, 1030),
                                 (301, 24), (90, 12), (77, 7), (45, 3), (300, 15), (15, 300), (7, 5), (23, 9)])
def test_transpose_tile_edges(dtype, k, j, threads):
    # Source holds k contiguous (fast) per j; gather to (j-major) C order: a transposition.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    buf = _random_buffer(desc.total_tensor_size_in_bytes, k * 1000 + j)
    got = ds.gather(buf, desc)
    assert got.tobytes() == _numpy_gather(buf, desc).tobytes()
    # And the reverse (scatter into the transposed layout), with guard bytes.
    values = _numpy_gather(_random_buffer(desc.total_tensor_size_in_bytes, 7), desc)
    _check_scatter(values, desc, bytearray(_random_buffer(desc.total_tensor_size_in_bytes + 32, 9).tobytes()))


@pytest.mark.parametrize("dtype,k,j", [("int16", 1100, 4000), ("float16", 1031, 4200), ("int16", 1100, 4096),
                                       ("uint8", 2100, 4500), ("uint8", 2100, 4096)], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_transposes_of_8_to_12_mib_from_cache_take_tiles_of_128_rows(dtype, k, j, level, threads):
    # One- and two-byte transposes from cache of 8-12 MiB, whose tasks have
    # 256 source rows or more, take tiles of 128 of them: whole tiles, a
    # last one of 1 to 127 rows, and k rows past the last whole micro-block,
    # against numpy both ways; destination rows a multiple of 2 KiB apart
    # (4096 values) take the tall tiles instead.
    with _isa_level(level):
        _check_column_major_both_ways(ds.BufferTensorDesc(dtype, [k, j], strides=[1, k]), k + j, k * j)


@pytest.mark.parametrize("level", [0, 1, 2, 3], ids=["generic", "sse2", "ssse3", "avx2"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "uint32", "float64", "int64"])
def test_tile_transposes_at_every_instruction_set_level(level, dtype):
    # With AVX2, 4- and 8-byte values move in 8 x 8 and 4 x 4 blocks that
    # read source rows in place, 1- and 2-byte ones in pairs of micro-blocks;
    # the rows and columns past the last whole block, and every lower level,
    # must give numpy's bytes (random bytes: NaN payloads included).  Shapes:
    # ragged in k and j by less than a block, tiles of 64 rows with a few
    # left, source rows a multiple of 1 KiB apart (staged), and rows as short
    # as one block.
    w = np.dtype(dtype).itemsize
    shapes = [(300, 78), (129, 70), (37, 45), (8, 8), (4, 4), (1024 // w, 78), (2048 // w + 3, 131), (501, 9),
              (33, 17), (200, 24)]
    with _isa_level(level):
        for k, j in shapes:
            desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
            buf = _random_buffer(desc.total_tensor_size_in_bytes, k * 7 + j)
            assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes(), (k, j)
            values = _numpy_gather(_random_buffer(desc.total_tensor_size_in_bytes, j), desc)
            _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 16, k))


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("row_bytes", [512, 1024, 2048, 3072, 5120])
@pytest.mark.parametrize("j", [19, 64, 130])
def test_transpose_source_rows_a_multiple_of_1kib_apart(dtype, row_bytes, j, threads):
    # Source rows whose distance puts many of a tile's rows in one L1 set are
    # copied to a padded buffer before the transpose: the result must be the
    # same as numpy's, ragged edges included.
    w = np.dtype(ds.numpy_dtype(dtype)).itemsize
    k = row_bytes // w
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    buf = _random_buffer(desc.total_tensor_size_in_bytes, row_bytes + j)
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()


@pytest.mark.parametrize("dtype", ["uint8", "int16"])
@pytest.mark.parametrize("row_bytes", [1001, 1023, 1025, 2049, 2060, 4097, 4098, 4120, 6666])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_cached_byte_transposes_off_line_rows(dtype, row_bytes, level, threads):
    # One- and two-byte values in a copy small enough not to stream: with
    # AVX2 their source rows, off a line boundary, are read in place, unless
    # the rows crowd L1's sets (each row, or every other one, within a few
    # bytes of 4 KiB on), which are staged.  Both ways, gather and scatter
    # (with guard bytes past the end), ragged in both directions, against
    # numpy.
    w = np.dtype(dtype).itemsize
    k, j = -(-row_bytes // w), 141
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    with _isa_level(level):
        _check_column_major_both_ways(desc, row_bytes, k)


@pytest.mark.parametrize("dtype,k,j", [("float32", 2001, 1503), ("uint32", 761, 703), ("float64", 1001, 1503),
                                       ("float32", 1503, 2001), ("int16", 2203, 2017), ("uint8", 1500, 3001),
                                       ("float16", 700, 6001), ("float64", 129, 2203)], ids=str)
def test_transposes_through_l2_read_far_source_rows_in_place(dtype, k, j, threads):
    # 2-D transposes into rows off line boundaries stream through the L2
    # buffers (four- and eight-byte ones of 2-12 MiB among them), their
    # source rows, more than 1 KiB apart (1032-8004 bytes here), transposed
    # where they are: gather and scatter (guard bytes past the end), ragged
    # both ways, against numpy.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    plan = transfer._plan(desc, "gather").describe()
    assert plan["stream"] and plan["l2"] == "both"
    assert _planner.l2_reads_in_place(plan["inner"][1])
    _check_column_major_both_ways(desc, k, j)


@pytest.mark.parametrize("dtype,k,j", [("uint8", 2055, 4100), ("uint8", 3001, 2100), ("int16", 1299, 2201),
                                       ("float16", 3001, 777), ("float32", 2111, 1100), ("uint32", 3001, 555),
                                       ("float64", 171, 3003), ("float64", 1201, 700)], ids=str)
@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
def test_transposes_read_in_place_take_a_line_of_k_a_chunk(dtype, k, j, level, streaming, threads):
    # Source rows read where they are (k values, 171-3001, more than 1 KiB
    # apart and not a multiple of it), in segments of j of at least the L2
    # run: chunks of one line of k, 16 values at least, many to a segment
    # (or to a piece of k), the last one ragged (k is no multiple of the
    # chunk), at every instruction set level; gather and scatter (guard
    # bytes past the end) against numpy.
    w = np.dtype(dtype).itemsize
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    with _isa_level(level):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "tile" and plan["l2"] == "both" and plan["stream"]
        assert _planner.l2_reads_in_place(plan["inner"][1])
        assert plan["segment"] * w >= _planner.BLOCK_L2_RUN
        assert plan["l2_chunk"] == (_planner.BLOCK_L2_RUN // w, _planner.in_place_chunk_k(w))
        _check_column_major_both_ways(desc, k, j)


# The start of a script run in a child process (a read past a buffer
# crashes it, not the test run): `region`, SIZE bytes of memory followed by
# an inaccessible page; a buffer whose last byte is region's last reads
# nothing past it or the script dies.  SIZE is set before it.
GUARD_PAGE_SCRIPT = r"""
import ctypes, mmap
import numpy as np
import dmlstride as ds
from dmlstride import _planner, transfer

for name in _planner.L3_BOUNDS:   # (as conftest's large_l3_bounds)
    setattr(_planner, name, _planner.l3_bound(name, small_l3=False))
PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
region = mmap.mmap(-1, SIZE + PAGE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
assert libc.mprotect(ctypes.c_void_p(addr + SIZE), PAGE, 0) == 0   # the last page: no access
"""


def _run_guarded(body, size, tmp_path):
    # GUARD_PAGE_SCRIPT with SIZE = size, then body, which prints "ok".
    from subproc import run_python

    proc = run_python(["-c", f"SIZE = {size}\n" + GUARD_PAGE_SCRIPT + body], tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


IN_PLACE_GUARD_SCRIPT = r"""
for dtype, k, j in (("float32", 1001, 1503), ("float64", 129, 2203), ("int16", 2203, 2017),
                    ("uint8", 1500, 3001), ("uint16", 1031, 4099)):
    for op in ("gather", "scatter"):
        strided = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
        packed = ds.BufferTensorDesc(dtype, [k, j])
        plan = transfer._plan(strided, op).describe()
        assert plan["stream"] and plan["l2"] == "both", (dtype, op, plan)
        # The source ends with the last byte before the inaccessible page.
        need = strided.total_tensor_size_in_bytes
        view = memoryview(region)[SIZE - need:SIZE]
        np.frombuffer(view, np.uint8)[:] = np.frombuffer(np.random.default_rng(k).bytes(need), np.uint8)
        values = np.frombuffer(view, dtype, k * j).copy()   # (the total size may hold padding past them)
        if op == "gather":
            got = ds.gather(view, strided)
            expect = values.reshape(j, k).T
        else:
            out = np.empty(need, np.uint8)
            ds.scatter(np.frombuffer(view, dtype, k * j).reshape(k, j), strided, out)
            got = out[:k * j * values.itemsize].view(dtype).reshape(j, k).T
            expect = values.reshape(k, j)
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expect).tobytes(), (dtype, op)
        view.release()
print("ok")
"""


def test_transposes_through_l2_read_nothing_past_the_source(tmp_path):
    # Source rows read in place by the L2 path (gathers from a column-major
    # buffer, scatters from a packed array) whose last byte is the last byte
    # before an inaccessible page: any read past the source would crash.
    _run_guarded(IN_PLACE_GUARD_SCRIPT, 10 << 20, tmp_path)


@pytest.mark.parametrize("k,j,l2", [(2053, 2053, True), (2897, 2895, True), (2900, 2048, False)], ids=str)
def test_byte_transposes_of_4_to_8_mib_stream(k, j, l2, threads):
    # One-byte 2-D transposes of 4-8 MiB (source rows more than 1 KiB
    # apart) stream: through the L2 buffers into rows off line boundaries,
    # in line-aligned strips into rows of 2 KiB.  Gather and scatter (guard
    # bytes past the end), against numpy.
    desc = ds.BufferTensorDesc("uint8", [k, j], strides=[1, k])
    plan = transfer._plan(desc, "gather").describe()
    assert plan["stream"] and (plan["l2"] == "both") == l2
    assert 4 << 20 <= desc.total_tensor_size_in_bytes < 8 << 20
    _check_column_major_both_ways(desc, k, j)


@pytest.mark.parametrize("dtype,k,j", [("uint8", 2053, 2053), ("uint8", 2900, 2051), ("uint8", 2500, 3001),
                                       ("uint8", 1999, 3999), ("float32", 1001, 1503),
                                       ("float64", 1040, 1031), ("uint32", 1455, 1655), ("int16", 2203, 2017),
                                       ("float16", 2995, 2569), ("uint16", 2051, 2049)], ids=str)
def test_transposes_stay_in_cache_longer_with_a_small_l3(dtype, k, j, threads, monkeypatch):
    # With a small L3's bounds (_planner.L3_BOUNDS), one-byte 2-D transposes
    # with source rows far apart stay in cache (plain stores, no L2 buffers,
    # read from cache: the plan's narrow_cached_bytes) under 8 MiB, four- and
    # eight-byte ones under 12 MiB, where a large L3's stream from 4 and 2
    # MiB; two-byte ones of 8-16 MiB stream with either.  Gather and scatter
    # (guard bytes past the end), against numpy.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    width = np.dtype(dtype).itemsize
    low, high = {1: (4 << 20, 8 << 20), 2: (8 << 20, 16 << 20)}.get(width, (2 << 20, 12 << 20))
    assert low <= desc.total_tensor_size_in_bytes < high
    plan = transfer._plan(desc, "gather").describe()
    assert plan["stream"]
    for name in _planner.L3_BOUNDS:
        monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    with _stream_threshold(_planner.stream_min_total):   # (drops the plans made above)
        plan = transfer._plan(desc, "gather").describe()
        if width == 2:
            assert plan["stream"]
        else:
            assert (plan["mode"], plan["stream"], plan["l2"]) == ("tile", False, "none")
            cached = _planner.tile_cached_bytes(transfer._plan(desc, "gather").layout.main)
            assert cached == {1: 8 << 20}.get(width, 0)
        _check_column_major_both_ways(desc, k, j)


@pytest.mark.parametrize("dtype,k,j", [("float32", 1901, 1999), ("float64", 1303, 1427),
                                       ("float32", 1601, 1799), ("float64", 1103, 1227)], ids=str)
def test_wide_transposes_from_far_rows_stream_from_12_mib_with_a_small_l3(dtype, k, j, threads, monkeypatch):
    # With a small L3's bounds, four- and eight-byte 2-D transposes (source
    # rows far apart) stay in cache under 12 MiB and stream from there
    # (TILE_STREAM_WIDE_FAR_SIXTEENTHS), as NHWC to NCHW gathers of such
    # values (pixels close together) do.  Gather and scatter (guard bytes
    # past the end), against numpy.
    for name in _planner.L3_BOUNDS:
        monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    pixels = ds.BufferTensorDesc.from_layout(dtype, (2, 64 // np.dtype(dtype).itemsize, 331, 331), "NHWC")
    size = desc.total_tensor_size_in_bytes
    assert 8 << 20 <= size < 16 << 20 and 12 << 20 <= pixels.total_tensor_size_in_bytes < 16 << 20
    with _stream_threshold(_planner.stream_min_total):   # (drops plans made under other bounds)
        plan = transfer._plan(desc, "gather").describe()
        assert (plan["mode"], plan["stream"]) == ("tile", size >= 12 << 20)
        if size < 12 << 20:
            assert plan["l2"] == "none"
        plan = transfer._plan(pixels, "gather").describe()
        assert plan["mode"] == "tile" and plan["stream"]
        _check_column_major_both_ways(desc, k, j)


def _check_transposes_under_both_l3s(desc, aliased, monkeypatch, streams, copy_with_large_l3):
    # A 2-D transpose's gather and scatter planned with a small L3's bounds,
    # then a large one's (the plans held dropped in between): tiles whose
    # rows crowd L1's sets (aliased_tile_rows: 128 or more source rows, or 64
    # or more destination rows, a multiple of 1 KiB apart) as ``aliased``
    # says, streaming as streams(small, plan, rows) says; the copies against
    # numpy with the small L3's plans (and the large's).
    k, j = desc.sizes
    for small in (True, False):
        for name in _planner.L3_BOUNDS:
            monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=small))
        with _stream_threshold(_planner.stream_min_total):   # (drops plans made under other bounds)
            for op in ("gather", "scatter"):
                plan = transfer._plan(desc, op).layout.main
                assert plan.mode == "tile"
                rows = (abs(plan.inner[1]), plan.tile[2])
                assert min(plan.inner[0], plan.tile[0]) >= 128
                assert _planner.aliased_tile_rows(plan.inner, plan.tile) == aliased == any(r % 1024 == 0 for r in rows)
                assert plan.stream == streams(small, plan, rows)
            if small or copy_with_large_l3:
                _check_column_major_both_ways(desc, k, j)


@pytest.mark.parametrize("dtype,k,j,aliased", [("float32", 1024, 2048, True), ("float32", 1536, 2048, True),
                                               ("uint32", 2560, 1280, True), ("float64", 768, 1536, True),
                                               ("float32", 1531, 2053, False), ("float64", 1012, 1303, False)],
                         ids=str)
def test_wide_transposes_of_aliased_rows_stream_from_8_mib_with_a_small_l3(dtype, k, j, aliased, threads,
                                                                           monkeypatch):
    # With a small L3's bounds, four- and eight-byte 2-D transposes of 8-16
    # MiB whose rows on either side lie a multiple of 1 KiB apart (the
    # destination's 8 KiB for 1024 x 2048, the source's 6 KiB for 1536 x
    # 2048) stream (TILE_STREAM_WIDE_ALIASED_SIXTEENTHS); odd sizes of 8-16
    # MiB stay in cache, and with a large L3's bounds every one streams.
    # Gather and scatter (guard bytes past the end), against numpy.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    size = desc.total_tensor_size_in_bytes
    assert 8 << 20 <= size <= 16 << 20
    _check_transposes_under_both_l3s(desc, aliased, monkeypatch,
                                     lambda small, plan, rows: aliased or not small or size >= 16 << 20, False)


@pytest.mark.parametrize("dtype,k,j,aliased", [("uint8", 2048, 5120, True), ("float16", 2048, 2560, True),
                                               ("int16", 3072, 1536, True), ("uint8", 3001, 3203, False),
                                               ("float16", 2203, 2501, False)], ids=str)
def test_narrow_transposes_of_aliased_rows_stream_from_8_mib_with_a_small_l3(dtype, k, j, aliased, threads,
                                                                             monkeypatch):
    # With a small L3's bounds, one- and two-byte 2-D transposes of 8-12 MiB
    # whose rows on either side lie a multiple of 1 KiB apart stream
    # (TILE_STREAM_NARROW_ALIASED_SIXTEENTHS); odd sizes keep their own
    # bounds, as every one does with a large L3's: 8 MiB with either, so
    # they stream too.  Gather and scatter (guard bytes past the end),
    # against numpy.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    size = desc.total_tensor_size_in_bytes
    assert 8 << 20 <= size < 12 << 20

    def streams(small, plan, rows):
        own = size >= _planner.narrow_tile_stream_min(plan.width, rows[0])
        assert own
        return aliased or own

    _check_transposes_under_both_l3s(desc, aliased, monkeypatch, streams, True)


@pytest.mark.parametrize("dtype,sizes,op", [("int16", (2, 33, 247, 391), "scatter"),
                                             ("float16", (2, 43, 335, 183), "scatter"),
                                             ("uint8", (2, 41, 467, 251), "gather"),
                                             ("float16", (2, 22, 262, 466), "gather"),
                                             ("int16", (2, 34, 289, 407), "gather"),
                                             ("uint8", (2, 41, 331, 251), "gather"),
                                             ("float16", (2, 22, 200, 466), "gather"),
                                             ("int16", (2, 33, 247, 251), "scatter")], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_narrow_planes_and_pixels_with_a_small_l3(dtype, sizes, level, op, threads, monkeypatch):
    # With a small L3's bounds, NCHW to NHWC scatters of two-byte values
    # (source rows, the planes, far apart) and NHWC to NCHW gathers (source
    # rows, the pixels, close together) of 41 one-byte or 22 two-byte
    # channels run from cache under 8 MiB and stream from there, as with a
    # large L3's; one of 34 two-byte channels (68-byte pixels) streams from 8
    # MiB with its own bounds.  Against numpy, a scatter's guard bytes around
    # the destination.
    for name in _planner.L3_BOUNDS:
        monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    width = np.dtype(dtype).itemsize
    size = desc.total_tensor_size_in_bytes
    assert 4 << 20 <= size < 16 << 20
    with _stream_threshold(_planner.stream_min_total):   # (drops plans made under other bounds)
        plan = transfer._plan(desc, op)
        assert plan.describe()["mode"] == "tile" and plan.describe()["stream"] == (size >= 8 << 20)
        row = abs(plan.layout.main.inner[1])
        far, short = row > _planner.CLOSE_ROW_BYTES, width == 1 or row < 64
        assert _planner.tile_cached_bytes(plan.layout.main) == (8 << 20 if far or short else 0)
        with _isa_level(level):
            if op == "gather":
                buf = _random_buffer(desc.total_tensor_size_in_bytes, 3)
                assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
            else:
                values = _random_buffer(math.prod(sizes) * width, sizes[1]).view(ds.numpy_dtype(dtype)).reshape(sizes)
                _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 128, 5), offset=64)


@pytest.mark.parametrize("dtype,k,j", [("uint8", 2897, 2895), ("int16", 2049, 2047), ("uint8", 3001, 3011),
                                       ("int16", 2203, 2017), ("uint16", 1999, 2861), ("float32", 1452, 1453),
                                       ("float64", 1040, 1031)], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_transposes_around_the_from_memory_size(dtype, k, j, level, stream, threads, tiles_stream_from_12_mib):
    # 2-D transposes just under and over 8 MiB: under it the tile reads one-
    # and two-byte source rows (off a line boundary) in place, over it through
    # the staged tile, as a copy that comes from memory, in segments of
    # MEMORY_TILE_SEGMENT values; below the streaming threshold, and (with it
    # lowered, but not so far that the L2 buffers take them) streaming.
    # Gather and scatter (guard bytes past the end), ragged both ways, against
    # numpy.
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, k])
    nbytes = k * j * np.dtype(dtype).itemsize
    assert (7 << 20) < nbytes < _planner.transpose_stream_min()
    with contextlib.ExitStack() as stack:
        if stream:
            stack.enter_context(_stream_threshold(16 << 20))
        plan = transfer._plan(desc, "gather").describe()
        assert plan["stream"] == stream and plan["l2"] == "none"
        long_segments = nbytes >= _planner.TRANSPOSE_FROM_MEMORY or stream
        assert (plan["segment"] > 64) == long_segments
        stack.enter_context(_isa_level(level))
        _check_column_major_both_ways(desc, k, j)


@pytest.mark.parametrize("dtype,sizes", [("float32", (1024, 2051)), ("float32", (1021, 2560)),
                                         ("float64", (1100, 1300)), ("int32", (769, 3072))], ids=str)
@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_wide_transposes_of_8_to_12_mib_run_from_cache(dtype, sizes, op, level, threads):
    # 4- and 8-byte transposes past 8 MiB that do not stream take the cached
    # tile (rows read in place, rows 4 KiB apart staged 8 at a time), where
    # one- and two-byte ones of that size come from memory; ragged rows and
    # columns; against numpy.
    nbytes = sizes[0] * sizes[1] * np.dtype(dtype).itemsize
    assert (8 << 20) < nbytes < _planner.transpose_stream_min()
    _check_column_major(dtype, *sizes, op, None, level)


@pytest.mark.parametrize("dtype,sizes", [
    ("uint8", (3, 8, 32, 64)), ("uint8", (2, 13, 64, 64)), ("uint8", (5, 40, 33, 64)), ("int8", (16, 64, 64, 64)),
    ("float16", (3, 16, 32, 32)), ("int16", (2, 9, 64, 96)), ("float16", (16, 64, 64, 64)), ("uint16", (3, 61, 64, 64)),
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_short_pixels_into_planes_a_multiple_of_2_kib_take_tall_tiles(dtype, sizes, level, threads):
    # Pixels of 8-64 one- or two-byte channels (source rows of 128 bytes or
    # fewer, read in place) into planes a multiple of 2 KiB long: tiles of
    # 256 pixels, from cache and (4 and 8 MiB) from memory, with ragged
    # channel counts and plane lengths that are no multiple of 256 pixels;
    # against numpy, on a source placed at a line offset.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    buf = _random_buffer(desc.total_tensor_size_in_bytes + 48, sizes[1])[48:]
    with _isa_level(level):
        assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()


@pytest.mark.parametrize("dtype,sizes", [("uint8", (32, 64, 64, 64)), ("uint8", (52, 40, 64, 64)),
                                         ("float16", (16, 64, 64, 64)), ("int16", (8, 48, 96, 128)),
                                         ("uint8", (8, 130, 64, 128)), ("int16", (8, 160, 64, 64)),
                                         ("float16", (2, 150, 128, 128))], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_planes_a_multiple_of_1_kib_into_pixels_from_memory(dtype, sizes, level, threads, tiles_stream_from_12_mib):
    # NCHW to NHWC scatters of 8-12 MiB that do not stream, from planes a
    # multiple of 1 KiB long into pixels of up to 1 KiB: tiles four source
    # lines deep, pixels in one segment or several (130-160 channels), 40 or
    # 130 channels leaving a ragged column; guard bytes past the end, against
    # numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    assert (8 << 20) <= desc.total_tensor_size_in_bytes < _planner.transpose_stream_min()
    assert not transfer._plan(desc, "scatter").describe()["stream"]
    values = _random_buffer(desc.total_tensor_size_in_bytes, sizes[1]).view(ds.numpy_dtype(dtype)).reshape(sizes)
    with _isa_level(level):
        _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, 5))


@pytest.mark.parametrize("sizes,stream", [((2, 9, 61, 53), False), ((1, 11, 70, 47), True),
                                          ((3, 15, 53, 67), False), ((1, 13, 71, 59), True),
                                          ((2, 18, 61, 53), True), ((1, 45, 47, 71), True)], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_one_byte_pixels_in_bands_every_band_in_its_rows(sizes, level, stream, threads):
    # NCHW to NHWC scatters into pixels of 9-15 one-byte channels (each
    # pixel shorter than a micro-block: the band, whether or not the copy
    # streams) and, streaming, of 18 and 45 (a ragged last group): several
    # bands of the buffer a task, whose row tables serve every band, the
    # last band short, pixel counts that are no multiple of a micro-block;
    # guard bytes around the destination, against numpy.
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, "NHWC")
    with _stream_threshold(0 if stream else 1 << 62):
        plan = transfer._plan(desc, "scatter").describe()
        assert plan["mode"] == "tile" and plan["stream"] == stream and plan["tile"][2] == sizes[1]
        assert stream or sizes[1] < 16
        # a task's pixels fill three bands of the buffer or more
        assert plan["tile"][0] >= 3 * min(256, 16384 // sizes[1] // 16 * 16) and plan["tile"][0] % 16 != 0
        values = _random_buffer(math.prod(sizes), sizes[1]).reshape(sizes)
        with _isa_level(level):
            _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 128, 7), offset=64)


@pytest.mark.parametrize("dtype,sizes", [("float16", (4, 25, 263, 217)), ("uint8", (9, 18, 269, 230)),
                                         ("int16", (8, 25, 196, 160)), ("uint8", (5253, 20, 5, 19)),
                                         ("int16", (2, 64, 211, 193)), ("uint8", (3, 33, 301, 347))], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_planes_into_pixels_back_to_back_from_memory(dtype, sizes, level, threads, tiles_stream_from_12_mib):
    # NCHW to NHWC scatters of 8-12 MiB that do not stream, from planes off
    # 1 KiB multiples into pixels of up to 64 channels back to back: tiles
    # four source lines deep (all channels in one tile), ragged channel
    # counts (18, 25, 33) and plane lengths no multiple of the tile; guard
    # bytes past the end, against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    width = np.dtype(dtype).itemsize
    assert (8 << 20) <= desc.total_tensor_size_in_bytes < _planner.transpose_stream_min()
    plan = transfer._plan(desc, "scatter").describe()
    assert plan["mode"] == "tile" and not plan["stream"] and plan["inner"][0] == sizes[1] <= 64
    assert plan["tile"][2] == sizes[1] * width and plan["inner"][1] % 1024 != 0
    values = _random_buffer(math.prod(sizes) * width, sizes[1]).view(ds.numpy_dtype(dtype)).reshape(sizes)
    with _isa_level(level):
        _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, 5))


def _ragged_band(width, channels, stream, long_copy=False):
    # The pixels a band of the engine's contig_ragged takes (transpose-sse2.c:
    # whole micro-blocks of a 16 KiB buffer, at most 256 pixels, or 128 for
    # two-byte and wider values streamed from fewer than 32 planes; 512 of
    # one-byte values from 33-64 planes streamed in a copy of 24 MiB or more,
    # in a 32 KiB buffer).
    n = 16 // width
    if stream and long_copy and width == 1 and 32 < channels <= 64:
        return min(512, 32768 // channels // n * n)
    cap = 128 if stream and width >= 2 and channels < 32 else 256
    return min(cap, 16384 // (channels * width) // n * n)


@pytest.mark.parametrize("dtype,sizes", [
    ("int16", (2, 37, 30, 41)), ("float32", (1, 21, 40, 50)), ("float64", (1, 19, 33, 35)),
    ("uint8", (1, 71, 100, 100)), ("uint32", (1, 127, 10, 30)), ("float16", (1, 25, 17, 61)),
    ("uint8", (2, 45, 40, 50)),
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_ragged_pixels_straight_to_the_destination_or_in_bands(dtype, sizes, level, stream, threads):
    # NCHW to NHWC scatters into pixels of a channel count that is no whole
    # number of 16-byte micro-blocks: from cache through the L1 tile
    # straight into the destination, its ragged column one more micro-block
    # moved back; streaming, a band at a time through the buffer
    # (contig_ragged), the pixels past the last whole micro-block with the
    # last band.  Several bands each, guard bytes around the destination,
    # against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    width = np.dtype(dtype).itemsize
    with _stream_threshold(0 if stream else 1 << 62):
        plan = transfer._plan(desc, "scatter").describe()
        assert plan["mode"] == "tile" and plan["stream"] == stream and plan["tile"][2] == sizes[1] * width
        # a task's pixels fill at least two bands of the 16 KiB buffer
        n = 16 // width
        assert sizes[1] % n != 0 and sizes[1] > n and plan["tile"][0] >= 2 * _ragged_band(width, sizes[1], stream)
        values = _random_buffer(math.prod(sizes) * width, sizes[1]).view(ds.numpy_dtype(dtype)).reshape(sizes)
        with _isa_level(level):
            _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 128, 5), offset=64)


@pytest.mark.parametrize("dtype,channels,pixels", [
    ("int16", 9, 1037), ("float16", 31, 1290), ("int16", 33, 5000), ("float32", 13, 389),
    ("uint32", 31, 647), ("float32", 11, 1201), ("float64", 9, 650), ("float64", 15, 387),
    ("uint8", 31, 1101),
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_few_planes_into_pixels_in_bands_of_128(dtype, channels, pixels, level, threads):
    # Streaming NCHW to NHWC scatters of fewer than 32 two- to eight-byte
    # channels (and 33 two-byte ones, and 31 one-byte ones, which keep bands
    # of 256 pixels): bands of 128 pixels, several a task, the last one
    # short, pixel counts that are no multiple of a micro-block; guard bytes
    # around the destination, against numpy.
    width = np.dtype(dtype).itemsize
    sizes = (2, channels, 1, pixels)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    band = _ragged_band(width, channels, True)
    assert (band == 128) == (width >= 2 and channels < 32)
    with _stream_threshold(0):
        plan = transfer._plan(desc, "scatter").describe()
        assert plan["mode"] == "tile" and plan["stream"] and plan["tile"][2] == channels * width
        assert channels % (16 // width) != 0 and plan["tile"][0] % band != 0
        assert plan["tile"][0] >= 2 * band or channels * width < 16
        values = _random_buffer(math.prod(sizes) * width, channels).view(ds.numpy_dtype(dtype)).reshape(sizes)
        with _isa_level(level):
            _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 128, 5), offset=64)


@pytest.mark.parametrize("channels,pixels", [(33, 790001), (47, 560001), (63, 420001), (31, 850001), (65, 410001)],
                         ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_one_byte_pixels_of_33_to_64_channels_in_long_bands(channels, pixels, level):
    # Streaming NCHW to NHWC scatters of 24 MiB or more into pixels of 33-63
    # one-byte channels: bands of 512 pixels through a 32 KiB buffer (31 and
    # 65 channels, either side of the bounds, keep 256), the last band short
    # and the pixel count no multiple of a micro-block; guard bytes around
    # the destination, against numpy.
    sizes = (1, channels, 1, pixels)
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, "NHWC")
    assert desc.total_tensor_size_in_bytes >= 24 << 20
    band = _ragged_band(1, channels, True, long_copy=True)
    assert (band == 512) == (32 < channels <= 64)
    with _stream_threshold(0):
        plan = transfer._plan(desc, "scatter").describe()
        assert plan["mode"] == "tile" and plan["stream"] and plan["tile"][2] == channels and channels % 16 != 0
        assert plan["tile"][0] >= 3 * band and plan["tile"][0] % band != 0
        values = _random_buffer(math.prod(sizes), channels).reshape(sizes)
        with _isa_level(level):
            _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 128, 5), offset=64)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "float16"])
@pytest.mark.parametrize("sizes,layout,op", [((1200, 2300), "WH", "gather"), ((1200, 2300), "WH", "scatter"),
                                             ((2300, 1200), "WH", "scatter"), ((640, 4100), "WH", "gather"),
                                             ((4100, 640), "WH", "scatter"), ((3, 40, 37, 41), "NHWC", "gather"),
                                             ((4, 40, 47, 53), "NHWC", "gather"),
                                             ((8, 24, 61, 67), "NHWC", "gather")], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_transposes_from_memory_write_256_bytes_of_each_row(dtype, sizes, layout, op, level, threads):
    # One- and two-byte transposes from memory (here streaming, below the
    # size that takes the L2 buffers) into destination rows off line
    # boundaries, not a multiple of 2 KiB apart: tiles of 256 / W source rows
    # wherever a task's columns reach that far, the columns past the last
    # whole tile (and segments shorter than one, a row's last) in tiles of
    # 64.  Segments of 256 values of 2-D matrices, longer ones of NHWC pixels
    # (24 and 40 channels, read in place).  Against numpy; a scatter's guard
    # bytes around the destination.
    strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), layout)
    packed = ds.BufferTensorDesc(dtype, list(sizes))
    src, dst = (strided, packed) if op == "gather" else (packed, strided)
    itemsize = np.dtype(dtype).itemsize
    nbytes = math.prod(sizes) * itemsize
    with contextlib.ExitStack() as stack:
        stack.enter_context(_stream_threshold(2 * nbytes))
        plan = _engine.Plan(list(sizes), src.effective_strides, dst.effective_strides, 8 * itemsize).describe()
        _, _, kds = plan["tile"]
        assert plan["mode"] == "tile" and plan["stream"] and plan["l2"] == "none"
        assert kds % 64 != 0 and kds % 2048 != 0 and plan["segment"] >= 256 // itemsize
        stack.enter_context(_isa_level(level))
        buf = _random_buffer(src.total_tensor_size_in_bytes, nbytes)
        if op == "gather":
            assert ds.gather(buf, strided).tobytes() == _numpy_gather(buf, strided).tobytes()
        else:
            out = bytearray(_random_buffer(strided.total_tensor_size_in_bytes + 128, 7).tobytes())
            _check_scatter(_numpy_gather(buf, packed), strided, out, offset=64)


@pytest.mark.parametrize("dtype,sizes", [
    ("uint8", (2, 65, 61, 67)),     # pieces of 1024 then 1015 pixels, or 512 then 503
    ("int8", (3, 100, 37, 41)),     # a last piece of 493, or of 237 (the tile)
    ("uint8", (1, 120, 95, 97)),
    ("uint8", (2, 150, 101, 107)),  # pieces of 384, the last of 55 (the tile)
    ("uint8", (4, 200, 61, 67)),
    ("uint8", (4, 232, 61, 67)),    # the widest pixels the bound takes
    ("uint8", (4, 233, 61, 67)),    # wider pixels than the bound: the tile
], ids=str)
@pytest.mark.parametrize("l2", [True, False], ids=["l2", "no_l2"])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_streamed_pixels_of_65_to_232_bytes_to_planes(dtype, sizes, l2, level, threads):
    # NHWC to NCHW gathers of one-byte pixels of up to 232 channels, streamed
    # (planned through the L2 buffers, in pieces of 1024 pixels, or not, in
    # pieces of 256-512): pieces of 256 pixels or more take the line-aligned
    # bands of whole destination lines (nt_shifted), shorter ones and wider
    # pixels the tile.  Against numpy, into a fresh output and into out= (and
    # the scatter back, guard bytes after it).
    strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), "NHWC")
    packed = ds.BufferTensorDesc(dtype, list(sizes))
    nbytes = math.prod(sizes)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_stream_threshold(nbytes // 2 if l2 else 2 * nbytes))
        plan = _engine.Plan(list(sizes), strided.effective_strides, packed.effective_strides, 8).describe()
        assert plan["mode"] == "tile" and plan["stream"] and plan["tile_pieces"] is None
        assert plan["tile"][:2] == (sizes[1], 1) and plan["tile"][2] % 64 != 0
        assert plan["l2"] == ("both" if l2 else "none") and plan["segment"] >= 256
        stack.enter_context(_isa_level(level))
        rng = np.random.default_rng(sum(sizes))
        _check_gather_and_scatter(strided, rng)
        _check_gather_out(strided, rng)


def _permutation_plan_and_check(dtype, sizes, order, other_order, op):
    """The planner's plan of ``op`` ("gather", "scatter", or "copy" into the
    ``other_order`` permutation) on the ``order`` permutation of ``sizes``,
    and a function that runs it against numpy: a scatter between guard
    bytes, a copy over random destination bytes (the source buffer is made
    when the function runs, so the plan alone costs no memory)."""
    strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), order)
    packed = ds.BufferTensorDesc(dtype, list(sizes))
    other = ds.BufferTensorDesc.from_layout(dtype, list(sizes), other_order)
    dt = np.dtype(dtype)
    src, dst = {"gather": (strided, packed), "scatter": (packed, strided), "copy": (strided, other)}[op]
    plan = _planner.plan_copy(list(sizes), src.effective_strides, dst.effective_strides, 8 * dt.itemsize).main

    def check():
        buf = _random_buffer(strided.total_tensor_size_in_bytes, math.prod(sizes))
        if op == "gather":
            assert ds.gather(buf, strided).tobytes() == _numpy_gather(buf, strided).tobytes()
        elif op == "scatter":
            out = bytearray(_random_buffer(strided.total_tensor_size_in_bytes + 128, 7).tobytes())
            _check_scatter(_numpy_gather(buf, packed), strided, out, offset=64)
        else:
            out = bytearray(_random_buffer(other.total_tensor_size_in_bytes, 9).tobytes())
            ds.copy_tensor(buf, strided, out, other)
            expect = np.frombuffer(bytes(out), np.uint8).copy()
            np.ndarray(sizes, dt, buffer=expect, strides=[x * dt.itemsize for x in other.effective_strides])[...] = \
                _numpy_gather(buf, strided)
            assert bytes(out) == expect.tobytes()

    return plan, check


def _gather_and_scatter(dtype, sizes, order, op, check_plan):
    """Gather and scatter the ``order`` permutation of ``sizes`` against
    numpy (the scatter's guard bytes and the gaps between its elements
    included), calling ``check_plan`` on the planner's plan of ``op`` first."""
    for each in ("gather", "scatter"):
        plan, check = _permutation_plan_and_check(dtype, sizes, order, order, each)
        if each == op:
            check_plan(plan)
        check()


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (203, 234, 8, 4, 2), (3, 2, 0, 1, 4), "gather"),          # runs of 2 bytes
    ("uint8", (7, 6, 54, 64, 7, 2), (4, 1, 0, 3, 2, 5), "scatter"),
    ("uint8", (48, 38, 173, 4), (2, 1, 0, 3), "scatter"),                # runs of 4 bytes
    ("int16", (52, 35, 99, 4), (2, 1, 0, 3), "gather"),                  # runs of 8 bytes
    ("float16", (29, 39, 57, 6, 2), (3, 0, 2, 1, 4), "copy"),
    ("uint8", (9, 31, 3, 7, 128, 8), (1, 0, 2, 4, 3, 5), "copy"),
    ("float32", (301, 77, 2), (1, 0, 2), "gather"),                      # a 2-D transpose of 8-byte values
], ids=str)
def test_short_contiguous_runs_as_wider_values(dtype, sizes, order, op, level, threads):
    # Permutations that keep a last dimension of 2, 4 or 8 bytes run as
    # permutations of values that wide (the planner's widened plan checked
    # here); gathers, scatters (guard bytes around the destination) and
    # copies into the reversed order of the other dimensions, against numpy.
    plan, check = _permutation_plan_and_check(dtype, sizes, order, list(reversed(order[:-1])) + [order[-1]], op)
    assert plan.width == sizes[-1] * np.dtype(dtype).itemsize
    with _isa_level(level):
        check()


ODD_RUNS = [
    ("uint8", (108, 192, 3), (1, 0, 2)),            # an RGB image turned: runs of 3 bytes
    ("uint8", (37, 5, 3), (1, 0, 2)),               # 3-byte runs: 5 rows of j, 37 of k
    ("uint8", (37, 41, 29, 5), (2, 0, 1, 3)),       # 5 bytes, three dimensions scrambled
    ("float16", (9, 17, 33, 3), (2, 0, 1, 3)),      # 6
    ("uint8", (70, 80, 6), (1, 0, 2)),
    ("uint8", (300, 2, 7), (1, 0, 2)),              # 7, two rows of k (or of j)
    ("int16", (20, 15, 10, 5), (2, 0, 1, 3)),       # 10
    ("float32", (30, 20, 10, 3), (2, 1, 0, 3)),     # 12
    ("uint8", (65, 86, 13), (1, 0, 2)),             # 13: tiles of 64 j and 19 k, both ragged
    ("float16", (129, 3, 7), (1, 0, 2)),            # 14
    ("float64", (40, 30, 2), (1, 0, 2)),            # 16
    ("uint8", (2, 20000, 5), (1, 0, 2)),            # few tasks: k cut in pieces, or j in segments
    ("uint8", (20000, 2, 5), (1, 0, 2)),
    ("uint8", (20011, 2, 5), (1, 0, 2)),            # a prime k: pieces the executor cuts
]


@pytest.fixture(params=[True, False], ids=["run_blocks", "run_tiles"])
def run_blocks(request, monkeypatch):
    # Runs whose source-fast side is a group of dimensions as blocks of runs
    # (RUN_BLOCKS), or every transpose of runs through the run tile.
    yield from _planner_setting(monkeypatch, "RUN_BLOCKS", request.param)


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("op", ["gather", "scatter", "copy"])
@pytest.mark.parametrize("dtype,sizes,order", ODD_RUNS, ids=str)
def test_odd_runs_transposed_whole(dtype, sizes, order, op, level, threads, run_blocks):
    # Permutations that keep a last dimension of 3-16 bytes other than 4 and
    # 8 move its runs whole through the run tile (the planner's plan
    # checked; 3-byte runs in registers four by four with SSSE3), or as a
    # block of runs over its offset tables; gathers from a buffer that ends
    # at the last run, scatters between guard bytes, and copies into the
    # reversed order of the other dimensions over random bytes, against numpy.
    plan, check = _permutation_plan_and_check(dtype, sizes, order, list(reversed(order[:-1])) + [order[-1]], op)
    assert plan.mode in (("tile", "block") if _planner.RUN_BLOCKS else ("tile",))
    assert plan.width == sizes[-1] * np.dtype(dtype).itemsize
    with _isa_level(level):
        check()


def _few_runs_path(plan):
    # Which loop of the run tile a plan's calls take: "few_k" (at most 8 runs
    # a source row, rows at most 64 bytes apart: source row by source row),
    # "few_j" (at most 8 source rows into back-to-back destination rows:
    # destination row by destination row), else "tile" (the staged tile).
    n, iss, _ = plan.inner
    kn, _, kds = plan.tile
    if plan.width < 16 and kn <= 8 and plan.width <= iss <= 64:
        return "few_k"
    if plan.width < 16 and n <= 8 and kds == n * plan.width:
        return "few_j"
    return "tile"


# (dtype, K, J, values a run): the orders (1, 0, 2) of K x J x run and of
# J x K x run, runs of 3-15 bytes other than 4 and 8.
FEW_RUNS = [
    ("uint8", 2, 1001, 3), ("uint8", 3, 999, 3), ("uint8", 8, 1001, 3), ("uint8", 5, 1001, 5),
    ("float16", 5, 1001, 3), ("uint8", 8, 1001, 7), ("uint8", 5, 1001, 9), ("int16", 2, 1001, 5),
    ("uint8", 5, 1001, 11), ("float32", 5, 1001, 3), ("uint8", 2, 1001, 13), ("float16", 2, 1001, 7),
    ("uint8", 2, 1001, 15), ("uint8", 7, 3, 3), ("uint8", 1, 1001, 3),
]


@pytest.mark.parametrize("op", ["gather", "scatter", "copy"])
@pytest.mark.parametrize("turned", [False, True], ids=["k_outer", "j_outer"])
@pytest.mark.parametrize("dtype,k,j,run", FEW_RUNS, ids=str)
def test_few_runs_a_row_transposed_whole(dtype, k, j, run, turned, op, threads):
    # Transposes of a few runs a row (de-interleaving pixels of 1-8 runs of
    # 3-15 bytes into planes, or interleaving planes into such pixels) take
    # the run tile's direct loops, whose moves are wider than a run: gathers,
    # scatters between guard bytes and copies into the other order over
    # random bytes, against numpy.  The plans of the two orders take both
    # loops between them (checked where a dimension has 2-8 rows).
    sizes = (j, k, run) if turned else (k, j, run)
    paths = set()
    for each in ("gather", "scatter"):
        plan, _ = _permutation_plan_and_check(dtype, sizes, (1, 0, 2), (1, 0, 2), each)
        paths.add(_few_runs_path(plan) if plan.mode == "tile" else plan.mode)
    if 2 <= k <= 8 and j > 8:
        assert paths == {"few_k", "few_j"} or run * np.dtype(dtype).itemsize * k > 64, paths
    _, check = _permutation_plan_and_check(dtype, sizes, (1, 0, 2), (0, 1, 2), op)
    check()


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("pad", [1, 3, 13])
@pytest.mark.parametrize("dtype,k,run", [("uint8", 3, 3), ("uint8", 4, 5), ("float16", 2, 7), ("float32", 3, 1)],
                         ids=str)
def test_few_runs_from_padded_pixels(dtype, k, run, pad, op, threads):
    # Pixels of k runs followed by pad values no run holds (source rows
    # further apart than their runs, up to 64 bytes): de-interleaved into
    # planes and interleaved back, the padding read around and, in a scatter,
    # left as it was.  Against numpy.
    j = 777
    pixel = k * run + pad
    desc = ds.BufferTensorDesc(dtype, [k, j, run], strides=[run, pixel, 1])
    rng = np.random.default_rng(pixel)
    buf = rng.integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
    if op == "gather":
        assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
    else:
        values = _numpy_gather(buf, desc)
        out = bytearray(rng.integers(0, 256, desc.total_tensor_size_in_bytes + 64, dtype=np.uint8).tobytes())
        _check_scatter(values, desc, out)


FEW_RUNS_GUARD_SCRIPT = r"""
for dtype, k, j, run in CASES:
    for sizes in ((k, j, run), (j, k, run)):
        dt = np.dtype(dtype)
        strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), (1, 0, 2))
        packed = ds.BufferTensorDesc(dtype, list(sizes))
        need = strided.total_tensor_size_in_bytes
        strides = [x * dt.itemsize for x in strided.effective_strides]
        # gather: the strided source ends with the last byte before the page
        view = memoryview(region)[SIZE - need:SIZE]
        np.frombuffer(view, np.uint8)[:] = np.frombuffer(np.random.default_rng(need).bytes(need), np.uint8)
        expect = np.ndarray(sizes, dt, buffer=view, strides=strides).copy()
        assert ds.gather(view, strided).tobytes() == expect.tobytes(), (dtype, sizes, "gather")
        # scatter: the packed source ends there
        values = np.frombuffer(view, dt, expect.size, need - expect.nbytes).reshape(sizes)
        values[...] = expect
        out = np.zeros(need, np.uint8)
        ds.scatter(values, strided, out)
        assert np.ndarray(sizes, dt, buffer=out, strides=strides).tobytes() == expect.tobytes(), (dtype, sizes)
        del values
        view.release()
print("ok")
"""


def test_few_runs_read_nothing_past_the_source(tmp_path):
    # The direct loops' wide loads (a run read as 4, 8 or 16 bytes) stop at
    # a source row's last run, which is read at its width: gathers and
    # scatters of every width whose source's last byte is the last byte
    # before an inaccessible page (any read past it would crash).
    _run_guarded(FEW_RUNS_GUARD_SCRIPT.replace("CASES", repr(FEW_RUNS)), 1 << 20, tmp_path)


def _planner_setting(monkeypatch, name, value):
    # The planner's setting ``name`` at ``value`` for the plans made inside.
    # Setting the stream threshold to what it is drops the plans held by
    # descriptor, before and after.
    monkeypatch.setattr(_planner, name, value)
    _engine._set_stream_min_total(_planner.stream_min_total)
    yield
    monkeypatch.undo()
    _engine._set_stream_min_total(_planner.stream_min_total)


@pytest.fixture
def no_whole_blocks(monkeypatch):
    # No block streamed whole (takes_whole), which takes the place of the L2
    # buffers where both would do.
    yield from _planner_setting(monkeypatch, "WHOLE_BLOCKS", False)


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype,sizes,order", [
    ("uint8", (40, 30, 24), (1, 0, 2)),
    ("float32", (31, 33, 5), (1, 0, 2)),            # 20
    ("uint8", (43, 29, 17), (1, 0, 2)),
    ("float64", (33, 35, 3), (1, 0, 2)),            # 24
    ("int16", (25, 26, 11), (1, 0, 2)),             # 22
    ("uint8", (20, 45, 31), (1, 0, 2)),
    ("float32", (30, 20, 8), (1, 0, 2)),            # 32
    ("uint8", (7, 9, 11, 21), (2, 0, 1, 3)),
], ids=str)
def test_wide_runs_transposed_whole(dtype, sizes, order, op, threads, run_blocks):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode in (("tile", "block") if _planner.RUN_BLOCKS else ("tile",))
    assert plan.width == sizes[-1] * np.dtype(dtype).itemsize
    check()


# Runs of 17-32 bytes: the run tile, where a copy a run would leave a
# dimension of back-to-back runs far out (first seven) and where its two
# innermost loops are such dimensions of both sides (the other seven, which
# once kept a copy a run).  (dtype, sizes, order, op, run bytes)
WIDE_RUNS = [
    ("uint8", (23, 2, 5, 5, 6, 22), (3, 4, 1, 2, 0, 5), "gather", 22),
    ("int16", (7, 15, 2, 9, 7, 14), (3, 4, 2, 0, 1, 5), "gather", 28),
    ("uint8", (13, 14, 13, 31), (2, 1, 0, 3), "gather", 31),
    ("int16", (10, 13, 2, 7, 10), (3, 0, 2, 1, 4), "scatter", 20),
    ("float32", (3, 18, 23, 7), (2, 1, 0, 3), "scatter", 28),
    ("int16", (20, 19, 3, 14), (2, 1, 0, 3), "scatter", 28),
    ("int16", (10, 13, 2, 7, 16), (3, 0, 2, 1, 4), "gather", 32),
    ("float32", (15, 2, 23, 8), (2, 0, 1, 3), "gather", 32),
    ("uint8", (24, 16, 6, 22), (0, 2, 1, 3), "gather", 22),
    ("float32", (17, 3, 19, 8), (0, 2, 1, 3), "gather", 32),
    ("uint8", (17, 20, 14, 3, 17), (0, 2, 3, 1, 4), "scatter", 17),
    ("float32", (11, 11, 10, 11, 6), (2, 1, 3, 0, 4), "scatter", 24),
    ("uint8", (19, 19, 2, 13, 24), (0, 3, 1, 2, 4), "scatter", 24),
    ("float16", (173, 129, 9), (1, 0, 2), "gather", 18),       # a 2-D transpose of 18-byte runs
]


@pytest.mark.parametrize("dtype,sizes,order,op,run", WIDE_RUNS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in WIDE_RUNS])
def test_runs_of_17_to_32_bytes_take_the_run_tile(dtype, sizes, order, op, run, threads, monkeypatch):
    monkeypatch.setattr(_planner, "RUN_BLOCKS", False)

    def check_plan(plan):
        assert plan.mode == "tile" and plan.width == run

    _gather_and_scatter(dtype, sizes, order, op, check_plan)
    # With the bound at 16 bytes, a copy a run.
    monkeypatch.setattr(_planner, "RUN_TILE_MAX", 16)
    plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
    assert plan.mode == "memcpy" and plan.inner[0] * plan.width == run


# Permutations keeping runs of 33-64 bytes: (dtype, sizes, order, op, run).
LINE_RUNS = [
    ("float64", (24, 6, 2, 40, 6), (3, 1, 2, 0, 4), "gather", 48),     # the source-fast dimension outermost
    ("uint8", (3, 35, 7, 33, 33), (3, 2, 0, 1, 4), "scatter", 33),
    ("int16", (29, 3, 11, 29), (2, 1, 0, 3), "gather", 58),            # a 2-D transpose of 58-byte runs
    ("float32", (5, 41, 17, 16), (2, 0, 1, 3), "scatter", 64),
    ("uint8", (37, 2, 23, 61), (2, 1, 0, 3), "copy", 61),
    ("float16", (37, 31, 17), (1, 0, 2), "gather", 34),                # remainders of the tile both ways
]


@pytest.mark.parametrize("dtype,sizes,order,op,run", LINE_RUNS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in LINE_RUNS])
def test_runs_of_33_to_64_bytes_take_the_run_tile(dtype, sizes, order, op, run, threads, monkeypatch):
    # Runs wider than RUN_TILE_MAX, up to a line, are the values of a run
    # tile (one variant, every move exact) in copies from memory: with the
    # stream threshold at 0 every copy is one.  Gathers, scatters (guard
    # bytes around the destination) and copies into the reversed order of
    # the other dimensions, against numpy.
    def check_plan(plan):
        assert (plan.mode, plan.width, plan.stream, plan.l2) == ("tile", run, False, 0)

    with _stream_threshold(0):
        if op == "copy":
            plan, check = _permutation_plan_and_check(dtype, sizes, order,
                                                      list(reversed(order[:-1])) + [order[-1]], op)
            check_plan(plan)
            check()
        else:
            _gather_and_scatter(dtype, sizes, order, op, check_plan)
    # In cache (the default threshold, these copies small): a copy a run.
    plan = _permutation_plan_and_check(dtype, sizes, order, order, "gather")[0]
    assert plan.mode == "memcpy" and plan.inner[0] * plan.width == run
    # Without the wide runs, a copy a run whatever the size.
    monkeypatch.setattr(_planner, "RUN_TILE_WIDE_MAX", _planner.RUN_TILE_MAX)
    with _stream_threshold(0):
        plan = _permutation_plan_and_check(dtype, sizes, order, order, "gather")[0]
        assert plan.mode == "memcpy" and plan.inner[0] * plan.width == run


@pytest.mark.parametrize("sizes,order,why", [
    ((40, 20, 2, 6), (2, 1, 0, 3), "destination pieces of 2 runs (96 bytes)"),
    ((5, 40, 64, 6), (2, 1, 0, 3), "5 runs back to back in the source (240 bytes)"),
    ((40, 30, 9), (1, 0, 2), "runs of 72 bytes: past RUN_TILE_WIDE_MAX"),
])
def test_wide_runs_the_tile_would_not_pay_for_stay_rows(sizes, order, why):
    with _stream_threshold(0):
        plan = _permutation_plan_and_check("float64", sizes, order, order, "gather")[0]
    assert plan.mode == "memcpy" and plan.width == 8, why


@pytest.mark.parametrize("sizes,order,op,row", [
    ((6, 16, 12, 9, 5), (2, 3, 1, 0, 4), "gather", 6),
    ((18, 6, 8, 4, 5), (3, 1, 2, 0, 4), "scatter", 4),
])
def test_wide_runs_whose_shared_lines_a_copy_a_run_would_read_twice_take_the_run_tile(sizes, order, op, row, threads,
                                                                                       monkeypatch):
    # 40-byte runs whose source-fast dimension (``row`` runs back to back:
    # under RUN_WIDE_TILE_BYTES) is an outer loop of a copy a run with more
    # than 32 KiB of runs inside it: each source line two runs share would be
    # read again that much later.  With the revisit bound at 32 KiB that
    # takes the run tile, checked against numpy.
    monkeypatch.setattr(_planner, "WIDE_RUN_REVISIT_BYTES", 32 << 10)

    def check_plan(plan):
        assert (plan.mode, plan.width, plan.tile[0]) == ("tile", 40, row)
        assert row * 40 < _planner.RUN_WIDE_TILE_BYTES

    with _stream_threshold(0):
        _gather_and_scatter("float64", sizes, order, op, check_plan)
        # Read again within the bound (128 KiB): a copy a run.
        monkeypatch.setattr(_planner, "WIDE_RUN_REVISIT_BYTES", 128 << 10)
        plan = _permutation_plan_and_check("float64", sizes, order, order, op)[0]
        assert plan.mode == "memcpy" and plan.inner[0] * plan.width == 40
        # Source rows of fewer than WIDE_RUN_REVISIT_ROW_BYTES: a copy a run.
        monkeypatch.setattr(_planner, "WIDE_RUN_REVISIT_BYTES", 32 << 10)
        monkeypatch.setattr(_planner, "WIDE_RUN_REVISIT_ROW_BYTES", row * 40 + 1)
        plan = _permutation_plan_and_check("float64", sizes, order, order, op)[0]
        assert plan.mode == "memcpy" and plan.inner[0] * plan.width == 40


@pytest.fixture
def no_short_k_blocks(monkeypatch):
    # No block with a source group of fewer than 8 values (5 float64 values
    # make one: see test_short_source_runs_beside_a_long_group_make_a_block;
    # 4-6 four-byte ones where the copy would go element by element).
    monkeypatch.setattr(_planner, "STRIDED_SHORT_K_BYTES", 1 << 40)
    yield from _planner_setting(monkeypatch, "BLOCK_SHORT_K_BYTES", 1 << 40)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("n", range(2, 18))
def test_short_rows_of_every_count_element_by_element(dtype, n, threads, no_short_k_blocks, no_slabs):
    # Rows of 2-7 values in batches of short strided rows, and rows of 8-17
    # values of tiny transposes (6 rows of k a task; not for the wider
    # values, whose 6 rows make whole micro-blocks): the executor's loop
    # takes each count from 2 to 16 as a constant, others as they come.
    # Gathered and scattered, against numpy.
    sizes, order, mode = (((5, 26, 3, 4, 17, n), (3, 2, 1, 5, 4, 0), "strided") if n < 8
                          else ((3, 10, 15, 37, 6, n), (2, 3, 1, 0, 5, 4), "tile"))
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = ds.BufferTensorDesc(dtype, sizes)
    plan = _planner.plan_copy(list(sizes), desc.effective_strides, packed.effective_strides, desc.element_bits).main
    assert plan.inner[0] == n and plan.mode == mode
    buf = _random_buffer(desc.total_tensor_size_in_bytes, n)
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
    out = bytearray(_random_buffer(desc.total_tensor_size_in_bytes + 128, n + 1).tobytes())
    _check_scatter(_numpy_gather(buf, packed), desc, out, offset=64)


def test_short_runs_at_odd_strides_stay_bytes(threads):
    # Runs of 2 bytes at a source stride of 301 bytes keep one-byte values
    # (a copy a run); gathered against numpy.
    desc = ds.BufferTensorDesc("uint8", [40, 50, 2], strides=[301, 6, 1])
    assert _planner.plan_copy([40, 50, 2], [301, 6, 1], [100, 2, 1], 8).main.width == 1
    buf = _random_buffer(desc.total_tensor_size_in_bytes, 3)
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()


@pytest.mark.parametrize("dtype,sizes,order,op,batch", [
    ("int16", (6, 26, 17, 13, 17, 6), (3, 2, 1, 5, 4, 0), "gather", 17),     # a whole dimension a batch
    ("int16", (6, 26, 17, 13, 17, 6), (3, 2, 1, 5, 4, 0), "scatter", 17),
    ("float32", (7, 4, 39, 22, 4, 6), (5, 3, 0, 1, 2, 4), "scatter", 52),    # 1092 rows cut into batches of 52
    ("uint8", (7, 8, 9, 6, 25, 31), (1, 2, 5, 3, 4, 0), "scatter", 30),
    ("float64", (31, 22, 6, 37, 5), (3, 1, 0, 4, 2), "gather", 37),
    ("float64", (5, 4, 3, 2, 37, 7), (0, 2, 1, 5, 4, 3), "gather", 37),   # 37 x 7 past the batch: whole
    ("uint32", (5, 9, 3, 67, 7), (0, 1, 4, 3, 2), "gather", 67),          # 67 x 7, near twice the batch
    ("float16", (14, 3, 2, 73, 5), (0, 1, 4, 3, 2), "gather", 73),        # 73 x 5
    ("int16", (6, 2, 3, 1, 17, 6), (3, 2, 1, 5, 4, 0), "gather", None),     # too few tasks: no batch
    ("int16", (6, 2, 3, 1, 17, 6), (3, 2, 1, 5, 4, 0), "copy", 2),          # into the reversed order
], ids=str)
def test_short_strided_rows_in_batches(dtype, sizes, order, op, batch, threads, no_short_k_blocks,
                                       k_inside_dimensions, no_slabs):
    # Permutations whose fastest source and destination dimensions are both
    # short and different run element by element, a batch of rows a task
    # (the plan's tile); gathers, scatters (guard bytes around the
    # destination) and a copy into another permutation, against numpy.
    # (Five float64 values a source row make a block otherwise, and the
    # int16 copy one whose K stops at a dimension boundary.)
    plan, check = _permutation_plan_and_check(dtype, sizes, order, list(reversed(order)), op)
    assert plan.mode == "strided" and (plan.tile is None if batch is None else plan.tile[0] == batch)
    check()


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("last", [2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64,
                                  65, 96, 100, 128, 129, 160, 200, 257, 384, 511, 512, 513])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_permutations_that_keep_a_short_last_dimension(dtype, last, stream, threads, monkeypatch):
    # Rows of 2 bytes to 4 KiB contiguous, copied whole at many offsets:
    # every row length the short-row copies distinguish (up to 64 bytes
    # two overlapping moves, then 16-byte moves, the last one overlapping,
    # or for multiples of 32 bytes 64-byte blocks loaded before they are
    # stored, the last one overlapping; rows of up to 512 bytes, of less in
    # a copy that streams; longer ones up to 4 KiB in 64-byte blocks unless
    # the copy streams), rows of 2, 4 and 8 bytes as wider values, and rows
    # past 4 KiB, gathered and scattered (between guard bytes), against numpy.
    # (Runs of 33-64 bytes of a copy that streams would take the run tile:
    # test_runs_of_33_to_64_bytes_take_the_run_tile.)
    monkeypatch.setattr(_planner, "RUN_TILE_WIDE_MAX", _planner.RUN_TILE_MAX)
    with _stream_threshold(0 if stream else 1 << 62):
        _check_short_last_dimension(dtype, last, stream)


def _check_short_last_dimension(dtype, last, stream):
    dt = np.dtype(ds.numpy_dtype(dtype))
    sizes = (37, 29, last)
    packed = ds.BufferTensorDesc(dtype, sizes)
    swapped = ds.BufferTensorDesc(dtype, [29, 37, last], strides=[last, 29 * last, 1])
    buf = _random_buffer(packed.total_tensor_size_in_bytes, last)
    assert ds.gather(buf, swapped).tobytes() == _numpy_gather(buf, swapped).tobytes()
    plan = _engine.Plan(swapped.sizes, swapped.effective_strides, [37 * last, last, 1], swapped.element_bits)
    if last * dt.itemsize in (2, 4, 8) and last > 1:
        # rows of 2, 4 or 8 bytes are values of that width (a transpose)
        assert plan.describe()["width"] == last * dt.itemsize and plan.describe()["mode"] != "memcpy"
    elif last > 1 and 3 <= last * dt.itemsize <= _planner.RUN_TILE_MAX:
        # other rows of up to 32 bytes: runs the run tile transposes whole
        assert plan.describe()["width"] == last * dt.itemsize and plan.describe()["mode"] == "tile"
        assert not plan.describe()["stream"]
    else:
        assert plan.describe()["mode"] == "memcpy" and plan.describe()["stream"] == stream
        # Rows of up to 512 bytes run in source order here (29 innermost, not
        # 37), but for rows of 160 bytes or more: destination order reads
        # them as 37 streams, few enough to keep it.
        row = last * dt.itemsize
        assert plan.describe()["outer"][-1][0] == (29 if row < _planner.SHORT_ROW_STREAM_MIN_BYTES else 37)
    values = _random_buffer(swapped.element_count * dt.itemsize, 50 + last).view(dt).reshape(swapped.sizes)
    _check_scatter(values, swapped, _random_buffer(packed.total_tensor_size_in_bytes + 64, 60 + last),
                   offset=32, check_alignment=False)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("channels", [9, 12, 20, 24, 31, 40])
def test_ragged_channel_counts_both_ways(dtype, channels, threads):
    # Channel counts that leave part of a 16-byte micro-block over (24
    # one-byte channels: one block and 8 left), with batches and planes
    # large enough for several tasks per thread, and pixel counts that
    # leave rows over too (37 * 129 = 4773).
    sizes = (5, channels, 37, 129)
    for layout in ("NHWC", "NCHW"):
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
        other = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW" if layout == "NHWC" else "NHWC")
        buf = _random_buffer(desc.total_tensor_size_in_bytes, channels)
        assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
        _check_copy_tensor(buf, desc, other, 300 + channels)


@pytest.mark.parametrize("dtype,channels", [("uint8", c) for c in (16, 17, 24, 31)]
                         + [("int16", c) for c in (8, 9, 12, 15)])
@pytest.mark.parametrize("pixels", [(7, 9), (33, 61)], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_pixels_of_one_to_two_micro_blocks_to_planes(dtype, channels, pixels, level, stream):
    # Pixels of 16-31 one-byte or 8-15 two-byte values, gathered into planes:
    # with AVX2 a band of fewer values than two micro-blocks goes in pairs
    # of micro-blocks side by side (pixels j and j + 16 / size), then the
    # pixels past the last pair and the channels past the last micro-block
    # in single micro-blocks.  Pixel counts leave both over (7 * 9 = 63).
    # Gathered and scattered back (between guard bytes), against numpy.
    sizes = (3, channels) + pixels
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    buf = _random_buffer(desc.total_tensor_size_in_bytes, channels * 100 + pixels[0])
    values = _numpy_gather(_random_buffer(desc.total_tensor_size_in_bytes, channels), desc)
    with _stream_threshold(0 if stream else 1 << 62), _isa_level(level):
        assert transfer._plan(desc, "gather").describe()["stream"] == stream
        assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
        _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, pixels[1]))


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("channels", [100, 129, 250, 257, 520])
def test_wide_ragged_channel_counts_to_channels_last(dtype, channels, threads):
    # Pixels of up to 512 bytes whose channel count is not a whole number of
    # 16-byte micro-blocks go through a padded tile; wider ones do not.
    # Gathered and copied into an exactly sized buffer, against numpy.
    sizes = (2, channels, 9, 23)
    planar = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW")
    last = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    buf = _random_buffer(planar.total_tensor_size_in_bytes, channels)
    gathered = ds.gather(buf, ds.BufferTensorDesc(dtype, (2, 9, 23, channels),
                                                  strides=[channels * 207, 23, 1, 207]))
    assert gathered.tobytes() == np.ascontiguousarray(_numpy_gather(buf, planar).transpose(0, 2, 3, 1)).tobytes()
    _check_copy_tensor(buf, planar, last, 7)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_small_transpose_with_a_prime_factor_is_cut_into_short_segments(dtype, threads):
    # 371 = 7 * 53 rows have no piece count of 16 or more with pieces of 256:
    # under PIECES_MIN_BYTES (one-byte values, 138 KB) the 371 columns are cut
    # into segments of 64 instead, 6 tasks; from it (rows off line
    # boundaries) the columns stay whole and k is cut into 5 pieces of 75
    # rows, the last 71.  Gathered and scattered against numpy.
    desc = ds.BufferTensorDesc(dtype, [371, 371], strides=[1, 371])
    plan = _engine.Plan([371, 371], desc.effective_strides, [371, 1], desc.element_bits).describe()
    if 371 * 371 * desc.element_bits // 8 < _planner.PIECES_MIN_BYTES:
        assert plan["tasks"] == 6 and plan["segment"] == 64 and plan["tile_pieces"] is None
    else:
        assert plan["tasks"] == 5 and plan["segment"] == 371 and plan["tile_pieces"] == (5, 75)
    _check_gather_and_scatter(desc, np.random.default_rng(371))


@pytest.mark.parametrize("dtype,rows,cols", [("float32", 3001, 1382), ("int16", 3653, 1561),
                                             ("uint8", 8193, 1025), ("float64", 1409, 1201)])
def test_transposes_cut_into_uneven_pieces_of_k(dtype, rows, cols, threads):
    # Column-major matrices of 8-16 MB whose rows (k) have no divisor for
    # enough tasks, into rows off line boundaries: whole segments of 256
    # columns (through L2, of an L2 chunk's columns) and k in uneven pieces
    # (the last shorter), streamed; gathered and scattered with guard bytes
    # against numpy.
    desc = ds.BufferTensorDesc(dtype, [rows, cols], strides=[1, rows])
    plan = transfer._plan(desc, "gather").describe()
    pieces, piece = plan["tile_pieces"]
    segment = plan["l2_chunk"][0] if plan["l2"] != "none" else 256
    assert plan["mode"] == "tile" and plan["segment"] == segment and plan["stream"]
    assert (pieces - 1) * piece < rows < pieces * piece
    _check_gather_and_scatter(desc, np.random.default_rng(rows))


@pytest.mark.parametrize("dtype,channels", [("uint8", c) for c in (5, 6, 8, 9, 10, 12, 13, 15)]
                         + [("int16", c) for c in (5, 6, 7, 9)])
@pytest.mark.parametrize("pitch_extra", [0, 3, "16"])
@pytest.mark.parametrize("hw", [(1, 1), (3, 11), (17, 19), (40, 70)], ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_short_pixels_to_planes(dtype, channels, pitch_extra, hw, stream, level, threads):
    # Pixels of fewer values than a 16-byte micro-block (5-15 one-byte
    # channels, 5-7 two-byte ones), packed or pitch values apart, gathered
    # into planes: 16 bytes are read per pixel only where they end within
    # the buffer's last pixel; the buffer ends right after it.  From cache
    # (not streaming) with AVX2, in pairs of micro-blocks side by side
    # first.  Against numpy.
    size_ = np.dtype(dtype).itemsize
    pitch = 16 // size_ if pitch_extra == "16" else channels + pitch_extra
    n, (h, w) = 3, hw
    desc = ds.BufferTensorDesc(dtype, [n, channels, h, w], [h * w * pitch, 1, w * pitch, pitch])
    size = ((n * h * w - 1) * pitch + channels) * size_
    raw = _random_buffer(desc.total_tensor_size_in_bytes, size + pitch)
    assert desc.total_tensor_size_in_bytes - size < 4
    with _stream_threshold(0 if stream else 1 << 62), _isa_level(level):
        plan = transfer._plan(desc, "gather").describe()
        # (one pixel a plane, 8 one-byte channels: runs of 8 bytes, planned
        # as 3 values of 8 bytes, which a strided copy moves without streaming)
        assert plan["stream"] == stream or (plan["width"] == channels * size_ and plan["mode"] == "strided")
        got = ds.gather(raw, desc)
    strides = [x * size_ for x in (h * w * pitch, 1, w * pitch, pitch)]
    view = np.lib.stride_tricks.as_strided(raw.view(dtype), (n, channels, h, w), strides)
    assert got.tobytes() == np.ascontiguousarray(view).tobytes()


@pytest.mark.parametrize("dtype,sizes,order,op,kn,jn", [
    ("uint8", (3, 4, 5, 47, 14), (2, 1, 0, 4, 3), "scatter", 14, 47),
    ("int8", (5, 6, 14, 68), (1, 0, 3, 2), "gather", 14, 68),
    ("uint8", (4, 3, 9, 61), (0, 1, 3, 2), "gather", 9, 61),
    ("int16", (3, 4, 7, 41), (0, 1, 3, 2), "gather", 7, 41),
    ("float16", (2, 3, 5, 53), (0, 1, 3, 2), "gather", 5, 53),
], ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_small_tiles_of_short_source_rows_past_the_last_micro_block(dtype, sizes, order, op, kn, jn, stream,
                                                                     level, threads):
    # Tiles of kn values a source row (5-15 one-byte values, 5-7 two-byte
    # ones: fewer than a micro-block) by jn columns, one a task, of a
    # permutation: the columns whose 16-byte reads would pass the tile's
    # last source row, and those past the last whole micro-block, go
    # through a buffer of 16-byte rows; destination rows under 128 bytes go
    # out as short copies.  Every byte outside the elements stays as it
    # was (scatter), against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    width = np.dtype(dtype).itemsize
    with _stream_threshold(0 if stream else 1 << 62), _isa_level(level):
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "tile" and plan["stream"] == stream
        assert plan["tile"][:2] == (kn, width) and plan["inner"][0] == jn and plan["inner"][2] == width
        assert kn * jn * width > 512  # past the tiny tiles' own path
        raw = _random_buffer(desc.total_tensor_size_in_bytes, jn)
        if op == "gather":
            assert ds.gather(raw, desc).tobytes() == _numpy_gather(raw, desc).tobytes()
        else:
            values = np.frombuffer(_random_buffer(math.prod(sizes) * width, kn).tobytes(), dtype).reshape(sizes)
            _check_scatter(values, desc, bytearray(_random_buffer(desc.total_tensor_size_in_bytes + 32, 3).tobytes()))


@pytest.mark.parametrize("dtype,channels", [("uint8", 5), ("uint8", 9), ("uint8", 12), ("uint8", 15),
                                            ("int16", 5), ("int16", 7)])
def test_streamed_short_pixels_to_planes_at_every_line_offset(dtype, channels, threads):
    # Streamed, pixels of 5-15 one-byte or 5-7 two-byte channels go to their
    # planes a chunk of 1 KiB of each plane at a time (1024 one-byte pixels,
    # 512 two-byte ones), whole lines with streaming stores: a plane's line
    # cut by a chunk's end is held and written whole with the next chunk's
    # first bytes.  Planes of 1 to 16 chunks and a few pixels more (one chunk
    # ending a line short, a last chunk shorter than a line), each plane at
    # another offset within a line, the buffer ending right after the last
    # pixel; into a fresh output and one filled before.
    for hw in ((1, 1031), (3, 700), (1, 1024 + 17), (7, 1173), (64, 129), (1, 8192 + 5), (1, 512 + 3),
               (5, 103)):
        sizes = (3, channels, *hw)
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
        raw = _random_buffer(desc.total_tensor_size_in_bytes, channels + hw[1])
        with _stream_threshold(0):
            assert transfer._plan(desc, "gather").describe()["stream"]
            got = ds.gather(raw, desc)
            out = np.full(sizes, 0x5A, dtype)
            ds.gather(raw, desc, out=out)
        want = _numpy_gather(raw, desc).tobytes()
        assert got.tobytes() == want and out.tobytes() == want, (dtype, sizes)


@pytest.mark.parametrize("dtype,sizes", [
    ("uint8", (30, 12, 120, 120)),     # 4.9 MiB: past the L2 caches, under 8 MiB
    ("int16", (16, 6, 160, 161)),      # 4.7 MiB
    ("uint8", (2, 9, 701, 499)),       # 6.0 MiB
    ("uint8", (4, 5, 700, 701)),       # 9.4 MiB: the source asked for ahead
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_short_pixels_to_planes_past_l2(dtype, sizes, level, threads):
    # NHWC to NCHW gathers of 5-15 one-byte or 5-7 two-byte channels of 4
    # MiB or more that do not stream: under 8 MiB with AVX2 in pairs of
    # micro-blocks first, larger ones with the source asked for ahead; the
    # buffer ends right after the last pixel.  Against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    assert desc.total_tensor_size_in_bytes >= 4 << 20
    raw = _random_buffer(desc.total_tensor_size_in_bytes, sum(sizes))
    with _isa_level(level):
        assert not transfer._plan(desc, "gather").describe()["stream"]
        got = ds.gather(raw, desc)
    assert got.tobytes() == _numpy_gather(raw, desc).tobytes()


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("sizes,tasks", [((1, 24, 128, 130), 16), ((1, 12, 257, 257), 16),
                                         ((1, 40, 1, 16411), 16), ((1, 9, 66, 500), 20),
                                         ((1, 200, 1, 16411), 16), ((1, 48, 251, 173), 16),
                                         ((1, 45, 251, 173), 16), ((1, 45, 14, 258), 14),
                                         ((1, 48, 7, 593), 16), ((1, 24, 41, 600), 20)], ids=str)
def test_one_image_to_channels_last_is_cut_for_threads(dtype, sizes, tasks, threads):
    # A single image's channels are one short row, so its pixels (k) are cut into pieces of at
    # least 256 that threads can share: the smallest piece count of 16 or more that divides
    # them, if it is no more than 32 (41 x 600 pixels: 20 pieces of 1230), else pieces of at
    # least 64 likewise, but not for channel counts that are no whole number of 16-byte
    # micro-blocks (45: the kernel for those needs 256 rows); else 16 pieces, the last one
    # shorter (257 x 257 pixels rather than 257 pieces of 257; 251 x 173 pixels of 45 or 48
    # channels, 7 x 593 of 48, a prime 16411 of 40), or fewer where no more fit (14 x 258 of 45:
    # 14 pieces of 258).  Pixels of up to 1 KiB stay whole (200 channels of a prime 16411
    # pixels: 16 pieces of 1026, but of float64 4 segments of 64 channels x 4 pieces).
    planar = ds.BufferTensorDesc(dtype, sizes)
    last = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    plan = _engine.Plan(list(sizes), planar.effective_strides, last.effective_strides, planar.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["tasks"] == tasks
    buf = _random_buffer(planar.total_tensor_size_in_bytes, sizes[1])
    _check_copy_tensor(buf, planar, last, 3)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("rows,cols,pieces", [(7919, 45, (16, 495)), (1009, 48, (15, 68)),
                                              (4099, 33, (16, 257)), (65521, 45, (16, 4096))], ids=str)
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "stream"])
def test_prime_row_count_is_cut_in_uneven_pieces(dtype, rows, cols, pieces, stream, threads):
    # A column-major matrix a few dozen columns wide whose row count has no
    # divisor to cut it by (a prime) goes to row-major in pieces of rows that
    # threads share, the last piece shorter; and back.
    colmajor = ds.BufferTensorDesc.from_layout(dtype, (rows, cols), "WH")
    packed = ds.BufferTensorDesc(dtype, (rows, cols))
    dt = ds.numpy_dtype(colmajor.data_type)
    buf = _random_buffer(colmajor.total_tensor_size_in_bytes, rows)
    values = _random_buffer(rows * cols * dt.itemsize, cols).view(dt).reshape(rows, cols)
    out = _random_buffer(colmajor.total_tensor_size_in_bytes, 7)
    expect = out.copy()
    np.ndarray((rows, cols), dt, buffer=expect,
               strides=[s * dt.itemsize for s in colmajor.effective_strides])[...] = values
    old = _engine._set_stream_min_total(0 if stream else 1 << 62)
    try:
        plan = _engine.Plan([rows, cols], colmajor.effective_strides, packed.effective_strides,
                            colmajor.element_bits)
        info = plan.describe()
        assert info["mode"] == "tile" and info["tile_pieces"] == pieces and info["tasks"] == pieces[0]
        assert info["stream"] == stream
        got = np.empty((rows, cols), dt)
        _engine.execute(plan, buf, 0, 0, got, 0, 0)
        ds.scatter(values, colmajor, out)
    finally:
        _engine._set_stream_min_total(old)
    assert got.tobytes() == _numpy_gather(buf, colmajor).tobytes()
    assert out.tobytes() == expect.tobytes()


def _check_column_major(dtype, rows, cols, op, padded, level):
    # A column-major rows x cols matrix gathered, scattered into, or copied
    # into the padded layout with copy_tensor, at the instruction set level
    # given; against numpy.
    dt = np.dtype(dtype)
    colmajor = ds.BufferTensorDesc(dtype, [rows, cols], strides=[1, rows])
    buf = _random_buffer(colmajor.total_tensor_size_in_bytes, rows + cols)
    with _isa_level(level):
        if op == "gather":
            assert ds.gather(buf, colmajor).tobytes() == _numpy_gather(buf, colmajor).tobytes()
        elif op == "scatter":
            values = _random_buffer(rows * cols * dt.itemsize, cols).view(dt).reshape(rows, cols)
            _check_scatter(values, colmajor, _random_buffer(colmajor.total_tensor_size_in_bytes + 64, rows))
        else:
            dst = bytearray(_random_buffer(padded.total_tensor_size_in_bytes + 64, 3).tobytes())
            expect = _expected_copy(buf, colmajor, bytes(dst), padded, 0)
            ds.copy_tensor(buf, colmajor, dst, padded)
            assert bytes(dst) == expect


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype", ["float32", "uint32"])
@pytest.mark.parametrize("op,sizes", [
    ("gather", (1021, 1024)), ("gather", (9, 1024)), ("gather", (70, 2048)),
    ("scatter", (1024, 1021)), ("scatter", (1024, 77)), ("copy", (1000, 500)),
], ids=str)
def test_four_byte_transposes_into_rows_4_kib_apart(level, dtype, op, sizes, threads):
    # Destination rows a multiple of 4 KiB apart, from cache: with AVX2 the
    # 32-byte blocks go through a padded buffer, 8 rows at a time, with
    # ragged rows (1021, 9, 70 of k) and columns (77 values, segments of a
    # 500-value row in a 1024-value pitch) past it; against numpy.
    _check_column_major(dtype, *sizes, op, ds.BufferTensorDesc(dtype, sizes, strides=[1024, 1]), level)


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,op,sizes", [
    ("float32", "gather", (768, 3001)), ("float32", "scatter", (2001, 768)), ("float32", "gather", (256, 130)),
    ("float64", "gather", (384, 1000)), ("float64", "scatter", (1000, 640)), ("int32", "scatter", (77, 1280)),
], ids=str)
def test_wide_transposes_from_rows_an_odd_multiple_of_1_kib_apart(level, dtype, op, sizes, threads):
    # 4- and 8-byte values whose source rows lie 1, 3 or 5 KiB apart are read
    # in place with AVX2 (rows an even multiple apart go through a padded
    # buffer first), from cache and from memory (the 9 MiB float32 ones),
    # with ragged rows and columns; against numpy.
    _check_column_major(dtype, *sizes, op, None, level)


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,op,sizes", [
    ("uint8", "gather", (1024, 1024)), ("int8", "gather", (2048, 3072)), ("uint8", "scatter", (1024, 5120)),
    ("uint8", "scatter", (3072, 1024)), ("int8", "copy", (1024, 1000)), ("uint8", "gather", (1024, 3)),
], ids=str)
def test_one_byte_transposes_into_rows_an_odd_multiple_of_1_kib_apart(level, dtype, op, sizes, threads):
    # One-byte values from cache, source and destination rows a multiple of
    # 1 KiB apart but destination rows not of 2 KiB, go through the padded
    # destination buffer; a 1000-value segment of a 3 KiB pitch (ragged
    # columns) and a matrix three columns wide (no whole micro-block of j);
    # against numpy.
    rows, cols = sizes
    colmajor = ds.BufferTensorDesc(dtype, sizes, strides=[1, rows])
    packed = ds.BufferTensorDesc(dtype, sizes)
    padded = ds.BufferTensorDesc(dtype, sizes, strides=[3072, 1])
    src, dst = {"gather": (colmajor, packed), "scatter": (packed, colmajor), "copy": (colmajor, padded)}[op]
    main = _planner.plan_copy(list(sizes), src.effective_strides, dst.effective_strides, 8).main
    if cols > 16:
        assert main.mode == "tile"
        k, kss, kds = main.tile
        assert kds % 1024 == 0 and kds % 2048 != 0 and main.inner[1] % 1024 == 0
    _check_column_major(dtype, *sizes, op, padded, level)


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,op,sizes", [
    ("float16", "gather", (2051, 1024)),    # 4.2 MB; 3 rows of k past the last tile
    ("uint8", "gather", (4099, 2048)),      # 8.4 MB; 4099 rows (prime): segments of 128 for the tasks
    ("uint8", "gather", (2048, 2048)),      # exactly the least size
    ("float16", "scatter", (1024, 2053)),   # destination rows 2 KiB apart
    ("uint8", "scatter", (4096, 1031)),
    ("float16", "copy", (2100, 1000)),      # 1000 values in a 2 KiB pitch: a ragged segment
    ("uint8", "gather", (3001, 2048)),      # source rows off lines: 64 bytes of k a tile, 57 past the last
    ("int16", "scatter", (2048, 1500)),     # source rows 3000 bytes apart, 28 values of k past the last tile
], ids=str)
def test_tall_tiles_into_rows_2_kib_apart(level, dtype, op, sizes, threads, tiles_stream_from_12_mib):
    # One- and two-byte transposes of 4 MiB or more into destination rows a
    # multiple of 2 KiB apart take tiles of 256 source rows, in segments of
    # as many values where the tasks allow, 128 bytes of k a tile (64 where
    # the source rows are off line boundaries); rows of k past the last tile
    # and segments shorter than a tile, at the SSE2 and AVX2 levels, against
    # numpy.
    dt = np.dtype(dtype)
    colmajor = ds.BufferTensorDesc(dtype, sizes, strides=[1, sizes[0]])
    packed = ds.BufferTensorDesc(dtype, sizes)
    padded = ds.BufferTensorDesc(dtype, sizes, strides=[2048 // dt.itemsize, 1])
    src, dst = {"gather": (colmajor, packed), "scatter": (packed, colmajor), "copy": (colmajor, padded)}[op]
    plan = _planner.plan_copy(list(sizes), src.effective_strides, dst.effective_strides, dt.itemsize * 8).main
    assert _planner.tall_tile_segments(plan)
    _check_column_major(dtype, *sizes, op, padded, level)


@pytest.mark.parametrize("nthreads", [3, 5, 8])
@pytest.mark.parametrize("dtype,sizes,layout", [
    ("float32", (1000, 1000), "WH"),           # 16 tasks of 64 columns, rows off lines
    ("int16", (301, 1777), "WH"),
    ("uint8", (3, 24, 57, 61), "NHWC"),
    ("float64", (5, 7, 9, 11, 13), (3, 0, 4, 2, 1)),
    ("float32", (2, 3, 40, 41), "NHWC"),        # fewer chunks than threads
], ids=str)
def test_chunks_taken_a_lane_apart_cover_the_copy(nthreads, dtype, sizes, layout):
    # Threads take a copy's chunks a lane apart (one lane a thread, lanes of
    # nearly equal runs): at 3, 5 and 8 threads, chunk counts that do not
    # divide into lanes, and fewer chunks than threads, every byte is
    # written once, gathered and scattered, against numpy.
    before = ds.get_num_threads()
    ds.set_num_threads(nthreads)
    try:
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
        dt = np.dtype(ds.numpy_dtype(dtype))
        buf = _random_buffer(desc.total_tensor_size_in_bytes, nthreads)
        assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
        values = _random_buffer(math.prod(sizes) * dt.itemsize, 1).view(dt).reshape(sizes)
        _check_scatter(values, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, 2))
    finally:
        ds.set_num_threads(before)


@pytest.mark.parametrize("pieces,piece", [(16, 10), (16, 7919), (2, 0), (2, -5)])
def test_engine_refuses_pieces_that_do_not_cover_the_rows(monkeypatch, pieces, piece):
    # The engine checks the planner's pieces before any kernel runs on them:
    # too short to reach the last row, or starting past it.
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        plan.main.tile_pieces, plan.main.tile_piece = pieces, piece
        plan.main.tasks = plan.main.outer_count * plan.main.segments * pieces
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    colmajor = ds.BufferTensorDesc.from_layout("float32", (7919, 45), "WH")
    packed = ds.BufferTensorDesc("float32", (7919, 45))
    with pytest.raises(ValueError, match="pieces do not cover"):
        _engine.Plan([7919, 45], colmajor.effective_strides, packed.effective_strides, 32)


@pytest.mark.parametrize("change,match", [
    (lambda p: setattr(p, "mode", "memcpy"), "element width 3"),             # runs only in a transpose
    (lambda p: setattr(p, "tile", (p.tile[0], 6, p.tile[2])), "runs of 3 bytes are transposed only"),
    (lambda p: setattr(p, "inner", (p.inner[0], p.inner[1], 6)), "runs of 3 bytes are transposed only"),
    (lambda p: setattr(p, "stream", True), "runs of 3 bytes are transposed only"),
    (lambda p: setattr(p, "l2", 2), "runs of 3 bytes are transposed only"),
    (lambda p: setattr(p, "width", 65), "element width 65"),                   # past the kernel's widths
    (lambda p: setattr(p, "mode", "block") or setattr(p, "width", 40), "element width 40"),   # a block's
])
def test_engine_refuses_runs_it_would_not_transpose(monkeypatch, change, match):
    # The engine checks a plan of runs (values of 3 to 64 bytes, 32 in a block) before any
    # kernel runs it: only a transpose of runs back to back on both sides,
    # with ordinary stores and no L2 buffers.
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        assert plan.main.mode == "tile" and plan.main.width == 3
        change(plan.main)
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    image = ds.BufferTensorDesc.from_layout("uint8", (108, 192, 3), (1, 0, 2))
    packed = ds.BufferTensorDesc("uint8", (108, 192, 3))
    with pytest.raises(ValueError, match=match):
        _engine.Plan([108, 192, 3], image.effective_strides, packed.effective_strides, 8)


@pytest.mark.parametrize("sizes,strides,tile,match", [
    ((300, 64), (1, 0), (2, 1, 64), "has no tile"),            # a fill's passes take no batch
    ((300, 7), (7, 1), (0, 7, 7), "a tile of 0 values"),        # a batch of no rows
])
def test_engine_refuses_batches_it_would_not_run(monkeypatch, sizes, strides, tile, match):
    # The engine checks the planner's batch of rows (a plan's tile) before
    # any kernel runs: only passes that run it may have one, of one row or more.
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        plan.main.tile = tile
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    with pytest.raises(ValueError, match=match):
        _engine.Plan(list(sizes), list(strides), [sizes[1], 1], 8)


def _single_block_plan(monkeypatch, change):
    """The engine's plan of a single-block float32 (21, 31, 23, 41) gather in
    order (3, 2, 1, 0) (J = 943 values), ``change`` applied to the planner's
    plan first."""
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        assert plan.main.mode == "block" and plan.main.inner[0] == 943
        change(plan.main)
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    sizes = (21, 31, 23, 41)
    desc = ds.BufferTensorDesc.from_layout("float32", sizes, (3, 2, 1, 0))
    packed = ds.BufferTensorDesc("float32", sizes)
    return _engine.Plan(list(sizes), desc.effective_strides, packed.effective_strides, 32)


@pytest.mark.parametrize("segments,segment_len,match", [
    (2, 400, "segments do not cover"),     # the second segment would start past J
    (1, 900, "segments do not cover"),     # one segment short of J's 943 values
    (15, 64, None),                        # the planner's own cut
    (16, 64, "segments do not cover"),     # an empty last segment
    (0, 943, "segments do not cover"),
])
def test_engine_refuses_block_segments_past_the_group(monkeypatch, segments, segment_len, match):
    # A block's segments index its J offset table: the engine checks that
    # they cover J exactly, every one non-empty, before any kernel runs.
    def change(main):
        main.segments, main.segment_len = segments, segment_len
        main.tasks = main.outer_count * segments

    if match is None:
        _single_block_plan(monkeypatch, change)
    else:
        with pytest.raises(ValueError, match=match):
            _single_block_plan(monkeypatch, change)


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_streamed_block_rows_off_the_first_rows_line_offset_take_plain_stores(monkeypatch, level, threads):
    # The streaming line kernels of a block store whole lines to every row
    # of k at the first row's line offset.  A plan that streams a block whose
    # k rows lie other distances apart (which the planner never makes: here
    # forced) must not reach them: it takes plain stores, against numpy.
    plan_copy = _planner.plan_copy

    def forced(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        main = plan.main
        assert main.mode == "block" and any(b % 64 for _, b in main.block.k)
        main.stream, main.l2 = True, 0
        return plan

    monkeypatch.setattr(_planner, "plan_copy", forced)
    sizes = (2, 3, 11, 19, 17, 40)
    desc = ds.BufferTensorDesc.from_layout("float32", sizes, (4, 1, 5, 0, 3, 2))
    packed = ds.BufferTensorDesc("float32", sizes)
    plan = _engine.Plan(list(sizes), packed.effective_strides, desc.effective_strides, 32)
    assert plan.describe()["stream"] and plan.describe()["l2"] == "none"
    values = _random_buffer(packed.total_tensor_size_in_bytes, 3).view(np.float32).reshape(sizes)
    for offset in (0, 64, 16):
        out = _random_buffer(desc.total_tensor_size_in_bytes + 128, offset)
        expect = out.copy()
        np.ndarray(sizes, np.float32, buffer=expect, offset=offset,
                   strides=[s * 4 for s in desc.effective_strides])[...] = values
        with _isa_level(level):
            _engine.execute(plan, values, 0, 0, out, offset, 0)
        assert out.tobytes() == expect.tobytes()


def test_engine_refuses_a_block_whose_rows_are_not_its_j_group(monkeypatch):
    def change(main):
        n, a, b = main.inner
        main.inner = (n + 64, a, b)
        main.segments = -(-(n + 64) // main.segment_len)
        main.tasks = main.outer_count * main.segments

    with pytest.raises(ValueError, match="not its J group"):
        _single_block_plan(monkeypatch, change)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("channels", [2, 3, 4, 5, 6, 7, 8])
def test_channels_deinterleaved_and_interleaved(dtype, channels, threads):
    sizes = (3, channels, 37, 129)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    buf = _random_buffer(desc.total_tensor_size_in_bytes, channels)
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
    # And back: planes interleaved into pixels (scatter), against numpy assignment;
    # up to 7 channels take the interleave kernel (8 of one byte too), more the
    # transposing tile.
    packed = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(sizes, packed.effective_strides, desc.effective_strides, desc.element_bits)
    interleaved = channels <= 7 or (channels == 8 and np.dtype(dtype).itemsize == 1)
    assert plan.describe()["mode"] == ("interleave" if interleaved else "tile")
    dt = ds.numpy_dtype(desc.data_type)
    planes = _random_buffer(desc.element_count * dt.itemsize, 100 + channels).view(dt).reshape(sizes)
    _check_scatter(planes, desc, _random_buffer(desc.total_tensor_size_in_bytes, 200 + channels))


@pytest.mark.parametrize("sizes", [(2, 8, 1, 17), (3, 8, 5, 7), (1, 8, 33, 129), (4, 8, 2, 3), (1, 8, 4, 4),
                                   (5, 8, 1, 4099)], ids=str)
@pytest.mark.parametrize("level", [0, 1, 2, 3], ids=["generic", "sse2", "ssse3", "avx2"])
def test_eight_one_byte_planes_interleave_into_pixels(sizes, level, threads, monkeypatch):
    # Eight one-byte planes into pixels of 8 bytes: an NCHW to NHWC scatter,
    # and the gather of a matrix stored column by column (8 columns) into
    # rows, take the interleave kernel from 16 pixels a plane, 16 pixels a
    # step with SSSE3, the rest pixel by pixel (fewer pixels, and with the
    # channel bound at 7, the transposing tile).  Against numpy, the
    # scatter between guard bytes.
    nhwc = ds.BufferTensorDesc.from_layout("uint8", sizes, "NHWC")
    packed = ds.BufferTensorDesc("uint8", sizes)
    rows = sizes[0] * sizes[2] * sizes[3]
    columns = ds.BufferTensorDesc("uint8", [rows, 8], strides=[1, rows])   # 8 planes of `rows` values

    def modes():
        return (_planner.plan_copy(list(sizes), packed.effective_strides, nhwc.effective_strides, 8).main.mode,
                _planner.plan_copy([rows, 8], columns.effective_strides, [8, 1], 8).main.mode)

    pixels = sizes[2] * sizes[3]
    assert modes() == ("interleave" if pixels >= 16 else "tile", "interleave")
    with _isa_level(level):
        planes = _random_buffer(packed.total_tensor_size_in_bytes, 8).reshape(sizes)
        _check_scatter(planes, nhwc, _random_buffer(nhwc.total_tensor_size_in_bytes + 48, 5))
        buf = _random_buffer(columns.total_tensor_size_in_bytes, 9)
        assert ds.gather(buf, columns).tobytes() == _numpy_gather(buf, columns).tobytes()
    monkeypatch.setattr(_planner, "INTERLEAVE_MAX_BYTE_CHANNELS", 7)
    assert modes() == ("tile", "tile")


@pytest.mark.parametrize("dtype,channels,pad", [
    (d, c, pad) for d in ("uint8", "int8", "uint16", "float16") for c in (3, 4, 5, 6, 7, 8) for pad in (0, 1, 3)
    if (c + pad) * np.dtype(d).itemsize <= (8 if d in ("uint8", "int8") else 14)
    and (c >= 5 or np.dtype(d).itemsize == 2)])
@pytest.mark.parametrize("pixels", [16, 17, 31, 64, 333, 1000, 4099])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
@pytest.mark.parametrize("level", [1, 2, 3], ids=["sse2", "ssse3", "avx2"])
def test_few_channels_to_planes_and_back_by_word_transposes(dtype, channels, pixels, pad, stream, level, threads):
    # 5-8 one-byte and 3-7 two-byte channels per pixel to planes (gather) and
    # planes to pixels (scatter; not 4 two-byte ones): 16 or 8 pixels at a
    # time through a transpose of 16-bit words (for the two-byte ones, and
    # for the scatters, pixels back to back), the pixels left past the last
    # whole step one by one.  The scatter's steps each write 16 bytes of which the next step
    # overwrites the last few: guard bytes after the destination must stay
    # as they were.  Pixels padded by pad values for the gather, up to 8
    # bytes a one-byte pixel (two share a 16-byte read) and 14 a two-byte
    # one.  Streamed or not, every instruction set level, against numpy.
    sizes = [2, channels, 1, pixels]
    pitch = channels + pad
    src_desc = ds.BufferTensorDesc(dtype, sizes, [pixels * pitch, 1, pixels * pitch, pitch])
    with contextlib.ExitStack() as stack:
        stack.enter_context(_stream_threshold(0 if stream else 1 << 62))
        stack.enter_context(_isa_level(level))
        buf = _random_buffer(src_desc.total_tensor_size_in_bytes, pixels + channels)
        assert ds.gather(buf, src_desc).tobytes() == _numpy_gather(buf, src_desc).tobytes()
        nhwc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
        planes = _numpy_gather(_random_buffer(nhwc.total_tensor_size_in_bytes, pixels), ds.BufferTensorDesc(dtype, sizes))
        _check_scatter(planes, nhwc, bytearray(_random_buffer(nhwc.total_tensor_size_in_bytes + 48, 5).tobytes()))


@pytest.mark.parametrize("dtype,channels", [(d, c) for d in WIDTH_DTYPES for c in (2, 3, 4, 5, 6, 7)]
                         + [("uint8", 8), ("int8", 8)])
@pytest.mark.parametrize("skew", [0, 1, 3])
@pytest.mark.parametrize("level", [0, 3], ids=["plain", "avx2"])
def test_interleaved_pixels_stream_in_chunks(dtype, channels, skew, level, threads):
    # Planes into pixels back to back (an NCHW to NHWC scatter) in a copy
    # that streams: 4 KiB of pixels at a time interleaved in L1, then
    # streamed out (whole lines; the ends of each chunk, which share lines
    # with the next one or with the next segment, with ordinary stores),
    # into a destination skew values past a line; planes of 4191 pixels,
    # so chunks end at every offset.  Guard bytes around it, against numpy.
    sizes = (2, channels, 33, 127)
    nhwc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    packed = ds.BufferTensorDesc(dtype, sizes)
    dt = np.dtype(dtype)
    with _stream_threshold(0), _isa_level(level):
        plan = _engine.Plan(list(sizes), packed.effective_strides, nhwc.effective_strides, 8 * dt.itemsize)
        assert plan.describe()["mode"] == "interleave" and plan.describe()["stream"]
        planes = _random_buffer(nhwc.element_count * dt.itemsize, channels).view(dt).reshape(sizes)
        out = _at_line_offset(nhwc.total_tensor_size_in_bytes + 64 + 64, 0, 5 + skew)
        _check_scatter(planes, nhwc, out, offset=64 + skew * dt.itemsize, check_alignment=False)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("sizes", [(3, 5, 7, 9, 11, 6), (2, 13, 4, 19, 23, 7), (5, 3, 2, 3, 40, 2)], ids=str)
def test_short_planes_interleaved_task_by_task(dtype, sizes, threads):
    # A 6-D gather whose planes (the source's runs) are a few values of a
    # dimension far apart: planes into channels, one task per run of values,
    # each task asking for the runs of the task four on (fewer near the end
    # of a thread's chunk of tasks).  Against numpy, bytes compared.
    perm = (2, 5, 0, 3, 1, 4)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, perm)
    packed = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(list(sizes), desc.effective_strides, packed.effective_strides, desc.element_bits).describe()
    assert plan["mode"] == "interleave" and plan["segment"] == plan["inner"][0]
    buf = _random_buffer(desc.total_tensor_size_in_bytes, sum(sizes))
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()


def _nibbles(buf, count, start=0):
    raw = np.frombuffer(buf, np.uint8)
    lo, hi = raw & 0x0F, raw >> 4
    flat = np.stack([lo, hi], axis=1).reshape(-1)
    return flat[start:start + count]


@pytest.mark.parametrize("dtype", ["uint4", "int4"])
@pytest.mark.parametrize(
    "sizes,layout",
    [((2, 3, 64, 64), "NHWC"), ((4, 17, 33, 9), "NHWC"), ((1, 3, 5, 7), "NHWC"),
     ((2, 64, 130, 70), "NHWC"), ((1001,), "W"), ((2, 2, 3, 3, 3), "NDHWC"), ((257, 255), "WH")],
)
def test_four_bit_orders(dtype, sizes, layout, threads):
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
    buf = _random_buffer(desc.total_tensor_size_in_bytes + 16, sum(sizes))
    count = desc.last_offset + 1
    values = _nibbles(buf, count).astype(np.int16)
    if dtype == "int4":
        values = np.where(values > 7, values - 16, values)
    expect = values[desc.offsets()].reshape(sizes)
    got = ds.gather(buf, desc)
    assert np.array_equal(got, expect)
    # Scatter new values: exactly the tensor's nibbles change.
    lo, hi = (-8, 8) if dtype == "int4" else (0, 16)
    new = np.random.default_rng(3).integers(lo, hi, sizes).astype(got.dtype)
    out = bytearray(buf.tobytes())
    ds.scatter(new, desc, out)
    flat = _nibbles(bytes(buf), 2 * len(buf)).copy()
    flat[desc.offsets()] = (new.reshape(-1).astype(np.int16) & 0x0F)
    packed = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
    assert bytes(out) == packed.tobytes()


def _nibble_copy_reference(src, src_desc, dst, dst_desc):
    """What copy_tensor must leave in dst, computed nibble by nibble with numpy."""
    flat = _nibbles(bytes(dst), 2 * len(dst)).copy()
    flat[dst_desc.offsets()] = _nibbles(bytes(src), 2 * len(src))[src_desc.offsets()]
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


def _check_staged_four_bit_copy(src_desc, dst_desc, src_extra, dst_extra, seeds):
    """copy_tensor takes the staged path and leaves exactly the reference bytes (guards included)."""
    plan = _engine.Plan(src_desc.sizes, src_desc.effective_strides, dst_desc.effective_strides, 4)
    assert plan.describe()["mode"] == "staged"
    src = _random_buffer(src_desc.total_tensor_size_in_bytes + src_extra, seeds[0])
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_extra, seeds[1]).tobytes())
    expect = _nibble_copy_reference(src, src_desc, dst, dst_desc)
    ds.copy_tensor(src, src_desc, dst, dst_desc)
    assert bytes(dst) == expect


# (sizes, source order, destination order, destination strides) with nibbles on
# both sides: the staged path unpacks source runs, reorders them as bytes and
# packs destination runs.  Orders are axes from slowest to fastest.
BOTH_PACKED = [
    ((2, 5, 33, 17), (0, 2, 3, 1), (0, 1, 2, 3), None),  # NHWC -> NCHW, odd runs
    ((2, 64, 40, 24), (0, 2, 3, 1), (0, 1, 2, 3), None),  # blocks of whole channel sets
    ((3, 7, 9, 11), (0, 1, 2, 3), (0, 2, 3, 1), None),  # NCHW -> NHWC
    ((2, 3, 4, 5, 6), (0, 2, 3, 4, 1), (0, 1, 2, 3, 4), None),  # NDHWC -> NCDHW
    ((257, 255), (1, 0), (0, 1), None),  # column-major -> row-major
    ((3, 2, 5, 4, 3, 2, 3, 5), (3, 0, 6, 1, 7, 4, 2, 5), tuple(range(8)), None),  # 8-D
    ((4, 3, 33, 65), (0, 2, 3, 1), (0, 1, 2, 3), (7200, 2400, 70, 1)),  # padded destination
    ((1, 1, 300, 301), (0, 1, 3, 2), (0, 1, 2, 3), None),  # blocks chunk a dimension
]


@pytest.mark.parametrize("dtype", ["uint4", "int4"])
@pytest.mark.parametrize("sizes,src_order,dst_order,dst_strides", BOTH_PACKED)
def test_four_bit_copy_with_nibbles_on_both_sides(dtype, sizes, src_order, dst_order, dst_strides,
                                                  threads):
    src_desc = ds.BufferTensorDesc(dtype, sizes, strides=ds.calculate_strides(src_order, sizes))
    dst_desc = ds.BufferTensorDesc(dtype, sizes, strides=dst_strides or ds.calculate_strides(dst_order, sizes))
    _check_staged_four_bit_copy(src_desc, dst_desc, src_extra=8, dst_extra=8, seeds=(sum(sizes), 7))


@pytest.mark.parametrize("dtype", ["uint4", "int4"])
def test_four_bit_copy_from_a_padded_source(dtype, threads):
    # The source is not packed in any order: the blocks are destination runs.
    sizes = (2, 3, 31, 45)
    src_desc = ds.BufferTensorDesc(dtype, sizes, strides=(9000, 3000, 96, 1))
    dst_desc = ds.BufferTensorDesc(dtype, sizes, strides=ds.calculate_strides("NHWC", sizes))
    _check_staged_four_bit_copy(src_desc, dst_desc, src_extra=0, dst_extra=3, seeds=(5, 6))


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_gather_into_out_that_aliases_the_buffer(dtype, threads):
    # Transpose a square tensor in place: out is the very memory being read.
    n = 68  # n * n a multiple of 4: the buffer holds the DWORD-rounded total size
    base = np.arange(n * n, dtype=dtype) if dtype != "uint8" else (np.arange(n * n) % 251).astype(dtype)
    desc = ds.BufferTensorDesc(dtype, [n, n], strides=[1, n])
    expect = base.reshape(n, n).T.copy()
    out = base.reshape(n, n)
    got = ds.gather(base, desc, out=out)
    assert got is out
    assert np.array_equal(out, expect)


# -- the blocked transpose (plan mode "block") ------------------------------------------------
#
# Layouts whose source-contiguous run and destination-contiguous run each span
# several dimensions (a scrambled dimension order) are copied in J x K blocks
# through per-block offset tables.  Cases (sizes, source strides or a layout
# order, all in elements) cover: ragged group sizes (not multiples of a
# micro-block or a tile), groups that hit the size limit and split a dimension,
# source rows a multiple of 4 KiB apart (staged source), destination rows a
# multiple of 4 KiB apart (staged destination for 1- and 2-byte elements),
# and a broadcast outer dimension.
# (name, sizes, layout order or element strides, gather plan is "block", scatter plan is "block")
BLOCK_CASES = [
    ("perm8d", (2, 3, 5, 2, 3, 17, 4, 3), (3, 0, 6, 1, 7, 4, 2, 5), True, True),
    ("perm8d_pow2", (2, 4, 8, 2, 4, 16, 4, 8), (3, 0, 6, 1, 7, 4, 2, 5), True, True),
    # Scatter: K = 11 (330 would leave J at 6) and J = 6 x 5 x 3.
    ("perm5d", (3, 7, 6, 5, 11), (1, 4, 0, 3, 2), True, True),
    ("perm4d_wide", (2, 9, 13, 70), (2, 0, 3, 1), True, True),
    # A source-contiguous run of 2000 exceeds the group limit: it is split.
    ("split_k", (3, 50, 40, 9, 2), (3, 0, 4, 1, 2), True, True),
    # Rows of the destination-contiguous group 4096 elements apart in the
    # strided tensor: staged source lines (gather), staged destination rows
    # for 1- and 2-byte elements (scatter).
    ("page_rows", (2, 9, 6, 5), [4096 * 40, 1, 4096 * 6, 4096], True, True),
    ("page_rows_ragged", (2, 11, 7, 13), [4096 * 120, 1, 4096 * 14, 4096], True, True),
    # Prime dimensions that do not split: the longest K (40 x 17) would leave
    # J one dimension of 11, so the scatter takes K = 40 and J = 11 x 19 x 2.
    ("prime_6d", (2, 3, 11, 19, 17, 40), (4, 1, 5, 0, 3, 2), True, True),
    # A broadcast (zero-stride) outer dimension in front of a scrambled order.
    ("broadcast_outer", (3, 2, 9, 13, 70), [0, 9 * 70, 1, 9 * 70 * 2, 9], True, False),
    # Source rows of 885-960 elements: in copies past the streaming limit
    # they are copied to an L2 buffer first, and, where the destination
    # rows are long or whole lines, the block is written from a second one.
    ("l2_5d", (2, 4, 6, 40, 50), (4, 2, 0, 3, 1), True, True),
    ("l2_ragged", (3, 5, 7, 45, 59), (3, 0, 4, 2, 1), True, True),
    ("l2_4d", (2, 48, 12, 80), (2, 0, 3, 1), True, True),
    # A regression: the destination's innermost stride is 2 elements, so no
    # destination-contiguous group exists and scatter must not block.
    ("stepped_inner", (8, 2, 4), [2, 65, 16], False, False),
]


def _elem_strides(dtype, sizes, spec):
    if isinstance(spec, tuple):
        return list(ds.BufferTensorDesc.from_layout(dtype, sizes, spec).effective_strides)
    return list(spec)


def _block_desc(dtype, sizes, spec):
    strides = _elem_strides(dtype, sizes, spec)
    return ds.BufferTensorDesc(dtype, sizes, strides=strides), strides


def _view(buf, dt, sizes, strides):
    return np.ndarray(sizes, dt, buffer=buf, strides=[s * dt.itemsize for s in strides])


def _plan(sizes, src, dst, width):
    return _engine.Plan(sizes, src, dst, width * 8).describe()


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("name,sizes,spec,gather_block,scatter_block", BLOCK_CASES,
                         ids=[c[0] for c in BLOCK_CASES])
def test_block_transpose_gather_scatter(dtype, name, sizes, spec, gather_block, scatter_block, threads):
    desc, strides = _block_desc(dtype, sizes, spec)
    dt = np.dtype(dtype)
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    assert (_plan(sizes, strides, packed, dt.itemsize)["mode"] == "block") == gather_block
    assert (_plan(sizes, packed, strides, dt.itemsize)["mode"] == "block") == scatter_block
    buf = _random_buffer(desc.total_tensor_size_in_bytes + 24, len(name))
    got = ds.gather(buf, desc)
    assert got.tobytes() == _view(buf, dt, sizes, strides).copy().tobytes()
    if name == "broadcast_outer":
        return  # an overlapping destination cannot be scattered to
    values = _view(_random_buffer(desc.total_tensor_size_in_bytes, 5), dt, sizes, strides).copy()
    out = bytearray(buf.tobytes())
    ds.scatter(values, desc, out)
    expect = buf.copy()
    _view(expect, dt, sizes, strides)[...] = values
    assert bytes(out) == expect.tobytes()


@pytest.mark.parametrize("level", [0, 1, 2, 3], ids=["generic", "sse2", "ssse3", "avx2"])
def test_block_cases_at_every_instruction_set_level(level):
    # The import picks the best kernels the CPU has; each lower level (and
    # AVX2's micro-block pairs, where the CPU has AVX2) must copy the same.
    with _isa_level(level):
        for dtype in WIDTH_DTYPES:
            for name, sizes, spec, _, _ in BLOCK_CASES:
                _check_block_case_copies(dtype, name, sizes, spec, 0)


def test_block_split_keeps_both_runs_long(monkeypatch):
    # (A block that fits the caches: 3.4 MB would take a big block otherwise.)
    monkeypatch.setattr(_planner, "BLOCK_BIG_MIN_TOTAL", 1 << 30)
    sizes = (2, 3, 11, 19, 17, 40)
    strides = _elem_strides("float32", sizes, (4, 1, 5, 0, 3, 2))
    packed = list(ds.BufferTensorDesc("float32", sizes).effective_strides)
    block = _plan(sizes, packed, strides, 4)["block"]
    assert [n for n, _ in block["k"]] == [40]
    assert [n for n, _ in block["j"]] == [11, 19, 2]


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_block_transpose_between_two_scrambled_orders(dtype, threads):
    sizes = (3, 2, 9, 5, 4, 6)
    src_desc, s = _block_desc(dtype, sizes, (2, 0, 5, 3, 1, 4))
    dst_desc, d = _block_desc(dtype, sizes, (4, 1, 3, 0, 5, 2))
    dt = np.dtype(dtype)
    assert _plan(sizes, s, d, dt.itemsize)["mode"] == "block"
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, 1)
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + 16, 2).tobytes())
    expect = np.frombuffer(bytes(dst), np.uint8).copy()
    _view(expect, dt, sizes, d)[...] = _view(src, dt, sizes, s)
    ds.copy_tensor(src, src_desc, dst, dst_desc)
    assert bytes(dst) == expect.tobytes()


def _block_case_plans():
    """(sizes, element width, gather plan, scatter plan) for every block case and width."""
    for name, sizes, spec, _, _ in BLOCK_CASES:
        for dtype in WIDTH_DTYPES:
            _, strides = _block_desc(dtype, sizes, spec)
            packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
            w = np.dtype(dtype).itemsize
            yield sizes, w, _plan(sizes, strides, packed, w), _plan(sizes, packed, strides, w)


def test_block_cases_reach_both_staging_buffers_tile_heights_and_a_split():
    seen = set()
    for sizes, _, gather_plan, scatter_plan in _block_case_plans():
        for plan in (gather_plan, scatter_plan):
            if plan["mode"] == "block":
                src_staged, dst_staged = plan["block"]["staged"]
                seen.add(("source staged", src_staged))
                seen.add(("destination staged", dst_staged))
                seen.add(("lines", plan["block"]["lines"]))
                # A split dimension: a group member that is not a whole dimension.
                whole = set(sizes)
                if any(n not in whole for n, _ in plan["block"]["j"] + plan["block"]["k"]):
                    seen.add("split")
    assert seen == {("source staged", True), ("source staged", False),
                    ("destination staged", True), ("destination staged", False), "split",
                    ("lines", 1), ("lines", 4)}


def test_block_cases_reach_whole_and_segmented_blocks():
    # A block plan with fewer blocks than MIN_BLOCK_TASKS cuts J into segments
    # (tasks) of whole tiles; the cases above have both kinds, and with
    # streaming stores too.
    def kinds():
        seen = set()
        for _, _, gather_plan, scatter_plan in _block_case_plans():
            for plan in (gather_plan, scatter_plan):
                if plan["mode"] == "block":
                    seen.add((plan["segment"] < plan["inner"][0], plan["stream"]))
        return seen
    assert {(True, False), (False, False)} <= kinds()
    with _stream_threshold(0):
        assert (True, True) in kinds()


def _check_one_way(desc, op, seed):
    """Gather from a random buffer, or scatter its values back into a zeroed
    one, and compare with numpy."""
    nbytes = desc.total_tensor_size_in_bytes
    raw = _random_buffer(nbytes, seed)
    expected = _numpy_gather(raw, desc)
    if op == "gather":
        assert ds.gather(raw, desc).tobytes() == expected.tobytes()
    else:
        out = np.zeros(nbytes, np.uint8)
        ds.scatter(expected, desc, out)
        assert out.tobytes() == raw.tobytes()


@pytest.mark.parametrize("dtype,sizes,order,op,whole", [
    ("int16", (5, 3, 5, 636, 124, 2), (4, 0, 3, 5, 1, 2), "gather", False),       # rows of 30 bytes, streamed
    ("uint8", (120, 2, 34, 7, 19, 23), (3, 5, 0, 1, 2, 4), "scatter", False),     # rows of 23 bytes
    ("float16", (29, 26, 7, 31, 13, 6), (2, 4, 3, 5, 0, 1), "scatter", True),     # rows of 156 bytes, whole
], ids=str)
def test_blocks_from_memory_with_rows_off_line_boundaries(dtype, sizes, order, op, whole, threads):
    # Blocks of copies of 16 MiB or more, whose tiles also ask for the line
    # of each source row's last byte (rows that end off a line boundary):
    # in place, streamed and whole, 1 and 2 threads, against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    nbytes = desc.total_tensor_size_in_bytes
    assert nbytes >= 16 << 20
    plan = transfer._plan(desc, op).describe()
    assert plan["mode"] == "block" and plan["l2"] == "none" and plan["block"]["whole"] == whole
    assert math.prod(n for n, _ in plan["block"]["k"]) * plan["width"] % 64 != 0
    _check_one_way(desc, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op,streamed", [
    ("uint32", (42, 24, 11, 38), (3, 2, 1, 0), "scatter", False),        # 126 rows of 1672 bytes of k
    ("float64", (3, 17, 12, 20, 10), (3, 4, 1, 2, 0), "scatter", False),  # segments of 192 rows
    ("float64", (2, 7, 36, 21, 13), (3, 4, 1, 2, 0), "gather", False),    # segments of 64 rows
    ("float32", (49, 42, 7, 37), (2, 3, 1, 0), "gather", False),
    ("float64", (13, 13, 6, 20, 4, 26), (2, 4, 5, 0, 3, 1), "gather", True),  # 16 MiB: streamed
], ids=str)
@pytest.mark.parametrize("far", [True, False], ids=["far", "near"])
def test_long_bands_of_wide_values_ask_further_ahead(dtype, sizes, order, op, streamed, far, threads,
                                                     monkeypatch):
    # Blocks of four- and eight-byte values in place whose bands of 64 rows
    # or more are 16 source lines long or longer ask for the lines of the
    # tile 12 on rather than 2 (block.c's block_ahead) where the plan says
    # so (BLOCK_FAR_ASKS: a small L3), past a block's last tiles into the
    # next block's: gathered and scattered against numpy on 1 and 2
    # threads, asking far and near whatever this machine's L3.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    monkeypatch.setattr(_planner, "BLOCK_FAR_ASKS", far)
    with _stream_threshold(_planner.stream_min_total):   # (drops plans made with the other value)
        plan = transfer._plan(desc, op).describe()
        width = plan["width"]
        assert plan["mode"] == "block" and plan["l2"] == "none" and not plan["block"]["whole"]
        assert plan["block"]["lines"] == 1 and width in (4, 8) and plan["stream"] == streamed
        assert plan["block"]["far"] == far
        assert min(plan["segment"], plan["inner"][0]) >= 64
        assert math.prod(n for n, _ in plan["block"]["k"]) * width >= 16 * 64
        _check_one_way(desc, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("float64", (64, 8, 32, 32), (1, 3, 2, 0), "scatter"),          # 64 rows of a band in one L2 set
    ("uint32", (2, 8, 4, 8, 32, 32), (5, 2, 1, 0, 3, 4), "gather"),  # 32 rows of J, in one set
    ("float32", (2, 2, 32, 4, 16, 64), (4, 5, 0, 3, 1, 2), "scatter"),
    ("float64", (16, 64, 2, 8, 32), (4, 3, 2, 1, 0), "scatter"),     # 512 values of k
    ("uint32", (2, 8, 64, 16, 2, 16), (4, 2, 5, 3, 1, 0), "scatter"),  # 32 values of k: one short tile
    ("float32", (2, 16, 8, 32, 32), (4, 3, 0, 1, 2), "gather"),      # source not staged
], ids=str)
@pytest.mark.parametrize("skew", [0, 16], ids=["on-line", "16-past"])
def test_blocks_of_rows_in_few_l2_sets_take_tall_tiles(dtype, sizes, order, op, skew, threads, monkeypatch):
    # Blocks of four- and eight-byte values streamed in place whose band's
    # source rows share L2 sets (power-of-two strides) take tiles four lines
    # tall, streaming whole lines still (an output 16 bytes past a line
    # takes ordinary stores before its first line boundary): the large L3's
    # bound, forced here, against numpy, guard bytes around, on 1 and 2
    # threads.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    nbytes = desc.total_tensor_size_in_bytes
    monkeypatch.setattr(_planner, "BLOCK_TALL_ALIASED_ROWS", _planner.l3_bound("BLOCK_TALL_ALIASED_ROWS", False))
    with _stream_threshold(1 << 20):   # (streams these copies of 1.6-4 MB)
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "block" and plan["stream"] and plan["l2"] == "none"
        assert plan["block"]["lines"] == 4 and not plan["block"]["whole"]
        j = [(n, a, 0) for n, a in plan["block"]["j"]]
        assert _planner.rows_per_l2_set(j, 1, _planner.BLOCK_DEPTH) > _planner.BLOCK_TALL_ALIASED_ROWS
        src = _at_line_offset(nbytes + 64, skew, sum(sizes))
        expected = _numpy_gather(src[32:], desc)
        if op == "gather":
            assert ds.gather(src, desc, offset=32).tobytes() == expected.tobytes()
            # into an output skew bytes past a line, between guard bytes
            room = _at_line_offset(expected.nbytes + 128, skew, 5)
            guard = room.copy()
            out = room[64:64 + expected.nbytes].view(expected.dtype).reshape(desc.sizes)
            ds.gather(src, desc, offset=32, out=out)
            assert out.tobytes() == expected.tobytes()
            assert room[:64].tobytes() == guard[:64].tobytes()
            assert room[64 + expected.nbytes:].tobytes() == guard[64 + expected.nbytes:].tobytes()
        else:
            out = _at_line_offset(nbytes + 128, skew, 7)
            _check_scatter(expected, desc, out, offset=64)
        # A small L3 keeps them one line tall.
        monkeypatch.setattr(_planner, "BLOCK_TALL_ALIASED_ROWS", _planner.l3_bound("BLOCK_TALL_ALIASED_ROWS", True))
        _engine._set_stream_min_total(1 << 20)   # (drops the plan made above)
        assert transfer._plan(desc, op).describe()["block"]["lines"] == 1


def test_rows_per_l2_set_counts_the_band():
    # Rows sharing an offset modulo 64 KiB among a group's first rows, by
    # hand: 64 rows 4 KiB apart take 16 offsets, 4 rows each.
    assert _planner.rows_per_l2_set([(64, 4096, 0)], 1, 64) == 4
    assert _planner.rows_per_l2_set([(64, 1 << 17, 0)], 1, 64) == 64
    assert _planner.rows_per_l2_set([(8, 4096, 0), (8, 1 << 17, 0)], 1, 64) == 8
    assert _planner.rows_per_l2_set([(8, 4096, 0), (64, 1 << 17, 0)], 1, 64) == 8   # the first 64 rows only
    assert _planner.rows_per_l2_set([(3, 0, 1 << 16), (5, 0, 100)], 2, 64) == 3
    assert _planner.rows_per_l2_set([(100, 68, 0)], 1, 64) == 1


def test_only_a_small_l3_asks_far():
    # The far asks are the small L3's (BLOCK_FAR_ASKS), and only blocks of
    # four- and eight-byte values carry them.
    assert _planner.BLOCK_FAR_ASKS == _planner.SMALL_L3
    wide = transfer._plan(ds.BufferTensorDesc.from_layout("float32", (49, 42, 7, 37), (2, 3, 1, 0)), "gather")
    assert wide.describe()["block"]["far"] == _planner.SMALL_L3
    narrow = transfer._plan(ds.BufferTensorDesc.from_layout("int16", (6, 6, 130, 57, 30), (4, 1, 2, 3, 0)), "gather")
    assert narrow.describe()["mode"] == "block" and not narrow.describe()["block"]["far"]


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("float64", (4, 42, 2, 26, 153), (1, 2, 4, 3, 0), "scatter"),
    ("uint32", (3, 49, 24, 20, 37), (2, 0, 4, 1, 3), "scatter"),
    ("float16", (26, 10, 16, 2, 25, 25), (0, 4, 3, 5, 1, 2), "gather"),
    ("int16", (63, 111, 8, 100), (3, 1, 0, 2), "gather"),
], ids=str)
def test_blocks_of_8_to_12_mib_stream_whole_with_a_small_l3(dtype, sizes, order, op, threads, monkeypatch):
    # Blocks that a large L3's bounds keep in place under 12 MiB stream whole
    # from 8 MiB with a small L3's (BLOCK_WHOLE_EIGHTHS: that L3 is shared);
    # gathered and scattered both ways, against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    assert 8 << 20 <= desc.total_tensor_size_in_bytes < 12 << 20
    plan = transfer._plan(desc, op).describe()
    assert plan["mode"] == "block" and not plan["block"]["whole"] and not plan["stream"]
    for name in _planner.L3_BOUNDS:
        monkeypatch.setattr(_planner, name, _planner.l3_bound(name, small_l3=True))
    with _stream_threshold(_planner.stream_min_total):   # (drops plans made under other bounds)
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "block" and plan["block"]["whole"]
        raw = _random_buffer(desc.total_tensor_size_in_bytes, sum(sizes))
        expected = _numpy_gather(raw, desc)
        assert ds.gather(raw, desc).tobytes() == expected.tobytes()
        out = bytearray(_random_buffer(desc.total_tensor_size_in_bytes + 128, 3).tobytes())
        _check_scatter(expected, desc, out, offset=64)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("sizes", [(1, 61, 70, 72), (1, 67, 65, 100), (2, 40, 53, 200), (1, 4099, 1, 66)], ids=str)
def test_short_pixels_whole_in_pieces_of_k(dtype, sizes, threads):
    # NCHW to NHWC gathers and the scatters back whose pixels of 66-200
    # channels (up to 1 KiB) stay whole, threads sharing pieces of the pixels
    # (equal ones, or a prime 4099 in uneven ones), between guard bytes,
    # against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, (0, 3, 1, 2))
    plan = transfer._plan(desc, "gather").describe()
    if sizes[3] * np.dtype(dtype).itemsize <= 1024:
        assert plan["mode"] == "tile" and plan["segment"] == sizes[3] and plan["tasks"] >= 16
    buf = _random_buffer(desc.total_tensor_size_in_bytes, sizes[3])
    expect = _numpy_gather(buf, desc)
    assert ds.gather(buf, desc).tobytes() == expect.tobytes()
    _check_scatter(expect, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, sizes[2]), offset=16)


@pytest.fixture
def pixels_in_segments(monkeypatch):
    # Rows of j back to back cut into segments of 64 values whatever their
    # length (as those over WHOLE_PIXEL_BYTES are).
    yield from _planner_setting(monkeypatch, "WHOLE_PIXEL_BYTES", 0)


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_transpose_segments_narrower_than_a_micro_block(dtype, level, threads, pixels_in_segments,
                                                        tiles_stream_from_12_mib):
    # 16 column-major k x j matrices to row-major: rows of j are cut into
    # segments of 64 values (pixels_in_segments: rows of up to 1 KiB back to
    # back otherwise stay whole), which leaves a last segment of r = 1 .. N - 1
    # values (N = 16 bytes of them), and k (1043 rows) ends mid micro-block:
    # that segment goes through padded micro-blocks.  Gather and scatter,
    # with guard bytes, against numpy.
    w = np.dtype(dtype).itemsize
    n, k = 16, 1043
    with _isa_level(level):
        for r in range(1, 16 // w):
            j = 64 + r
            desc = ds.BufferTensorDesc(dtype, [n, k, j], strides=[k * j, 1, k])
            plan = transfer._plan(desc, "gather").describe()
            assert plan["mode"] == "tile" and plan["segment"] == 64 and plan["inner"][0] == j
            buf = _random_buffer(desc.total_tensor_size_in_bytes + 16, r)
            expect = _numpy_gather(buf, desc)
            assert ds.gather(buf, desc).tobytes() == expect.tobytes()
            back = ds.BufferTensorDesc(dtype, [n, j, k], strides=[k * j, 1, j])
            _check_scatter(np.ascontiguousarray(expect.transpose(0, 2, 1)), back,
                           _random_buffer(back.total_tensor_size_in_bytes + 64, k + r))


# uint8 blocks with a group of 8-15 values, shorter than a micro-block
# (16 x 16 bytes), and a block cut into segments whose last is 8 values:
# the short side is padded to a micro-block in the kernel's buffers (a short
# k through a staged source, a short j through a staged destination).
# (sizes, layout order, copy that blocks ("gather" / "scatter"), k values,
# j values, segment)
SHORT_GROUP_BLOCKS = [
    ((15, 5, 5, 12, 12), (4, 2, 0, 3, 1), "scatter", 12, 900, 900),
    ((15, 15, 5, 3), (3, 2, 1, 0), "gather", 225, 15, 15),
    ((3, 9, 14, 3, 14), (1, 2, 4, 0, 3), "gather", 9, 14, 14),
    ((15, 9, 5, 3), (1, 3, 2, 0), "gather", 15, 135, 64),
    ((17, 8, 16, 20), (2, 3, 1, 0), "scatter", 320, 136, 64),
]


@pytest.mark.parametrize("level", [0, 1, 2, 3], ids=["generic", "sse2", "ssse3", "avx2"])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("sizes,order,op,kn,jn,segment", SHORT_GROUP_BLOCKS,
                         ids=[f"k{c[3]}-j{c[4]}-seg{c[5]}" for c in SHORT_GROUP_BLOCKS])
def test_block_with_a_group_shorter_than_a_micro_block(sizes, order, op, kn, jn, segment, level, stream,
                                                       threads):
    strided = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    packed = ds.BufferTensorDesc("uint8", sizes)
    s, p = list(strided.effective_strides), list(packed.effective_strides)
    with _stream_threshold(0 if stream else 1 << 62), _isa_level(level):
        plan = _plan(sizes, s, p, 1) if op == "gather" else _plan(sizes, p, s, 1)
        assert plan["mode"] == "block"
        assert math.prod(n for n, _ in plan["block"]["k"]) == kn
        assert math.prod(n for n, _ in plan["block"]["j"]) == jn
        assert plan["segment"] == segment
        _check_block_case_copies("uint8", f"k{kn}-j{jn}", sizes, order, 0)


# uint8 blocks whose K (the source's runs) is 8-15 values, shorter than a
# micro-block, beside a J of 16 or more: with AVX2 each tile reads its
# source rows in place, each row's K bytes exactly, in pairs of
# micro-blocks side by side in j (J of 32 or more a tile: the last pair
# moved back to end at the tile's edge) or single micro-blocks (tiles of
# 16-31 columns: the ragged 25 of 153, the 21 of 85, the 38 of 102 ...);
# without AVX2 through the padded source buffer.  (sizes, layout order,
# copy that blocks, K, J)
SHORT_ROW_BLOCKS = ([((11, 7, 9, 17, k), (0, 1, 4, 3, 2), "scatter", k, 153) for k in range(10, 16)] +
                    [((5, 3, 9, 17, n), (0, 1, 4, 3, 2), "gather", 9, 17 * n) for n in (2, 4, 5, 6, 8)] +
                    [((13, 7, 15, 6, 7, 4), (1, 3, 4, 2, 5, 0), "gather", 13, 840)])


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("sizes,order,op,kn,jn", SHORT_ROW_BLOCKS,
                         ids=[f"{c[2]}-k{c[3]}-j{c[4]}" for c in SHORT_ROW_BLOCKS])
def test_blocks_of_short_source_rows_read_them_in_place(sizes, order, op, kn, jn, level, threads):
    strided = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    packed = ds.BufferTensorDesc("uint8", sizes)
    s, p = list(strided.effective_strides), list(packed.effective_strides)
    with _isa_level(level):
        plan = _plan(sizes, s, p, 1) if op == "gather" else _plan(sizes, p, s, 1)
        assert plan["mode"] == "block" and not plan["stream"]
        assert math.prod(n for n, _ in plan["block"]["k"]) == kn
        assert math.prod(n for n, _ in plan["block"]["j"]) == jn
        # gather (out= between guard bytes) and scatter (guard bytes past the end), against numpy
        buf = _random_buffer(strided.total_tensor_size_in_bytes, kn + jn)
        expect = _numpy_gather(buf, strided)
        _check_gather_out_between_guards(buf, strided, expect, 32, jn)
        _check_scatter(expect, strided, _random_buffer(strided.total_tensor_size_in_bytes + 64, kn))


SHORT_ROW_GUARD_SCRIPT = r"""
for sizes, order, op in (((11, 7, 9, 17, 15), (0, 1, 4, 3, 2), "scatter"),
                         ((11, 7, 9, 17, 10), (0, 1, 4, 3, 2), "scatter"),
                         ((5, 3, 9, 17, 6), (0, 1, 4, 3, 2), "gather"),
                         ((13, 7, 15, 6, 7, 4), (1, 3, 4, 2, 5, 0), "gather")):
    strided = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    n = int(np.prod(sizes))
    need = strided.total_tensor_size_in_bytes if op == "gather" else n
    # The source ends with the last byte before the inaccessible page.
    view = memoryview(region)[SIZE - need:SIZE]
    np.frombuffer(view, np.uint8)[:] = np.frombuffer(np.random.default_rng(n).bytes(need), np.uint8)
    if op == "gather":
        expect = np.ndarray(sizes, np.uint8, buffer=view, strides=strided.effective_strides).copy()
        got = ds.gather(view, strided)
    else:
        expect = np.frombuffer(view, np.uint8).reshape(sizes).copy()
        out = np.zeros(strided.total_tensor_size_in_bytes, np.uint8)
        ds.scatter(np.frombuffer(view, np.uint8).reshape(sizes), strided, out)
        got = np.ndarray(sizes, np.uint8, buffer=out, strides=strided.effective_strides)
    assert got.tobytes() == expect.tobytes(), (sizes, op)
    view.release()
print("ok")
"""


def test_blocks_of_short_source_rows_read_nothing_past_the_source(tmp_path):
    # Blocks of short source rows read in place (above) whose source's last
    # row ends with the last byte before an inaccessible page: a read of 16
    # bytes from that row would crash.
    _run_guarded(SHORT_ROW_GUARD_SCRIPT, 4 << 20, tmp_path)


# Permutations whose source-fast dimension is 4-7 values of 4 or 8 bytes
# (source runs of 28 bytes or more; runs of 4 or 8 uint8 or int16 values
# are values of that width) beside a long destination-fast group: a block
# with a K that short, once a tile of short rows or rows element by element.
# (dtype, sizes, layout order, copy that blocks, width, K values, J values)
SHORT_K_BLOCKS = [
    ("float64", (16, 7, 11, 14), (2, 0, 3, 1), "gather", 8, 7, 154),
    ("float64", (11, 19, 23, 4), (3, 1, 0, 2), "scatter", 8, 4, 253),
    ("float64", (9, 18, 5, 7, 3), (1, 3, 0, 4, 2), "gather", 8, 5, 21),
    ("float64", (13, 18, 5, 6), (1, 3, 0, 2), "scatter", 8, 6, 65),
    ("uint32", (14, 7, 19, 14), (2, 0, 3, 1), "gather", 4, 7, 266),
    ("float32", (6, 18, 22, 7), (3, 1, 0, 2), "scatter", 4, 7, 792),
    ("uint8", (7, 8, 13, 5, 8), (1, 3, 0, 2, 4), "scatter", 8, 5, 91),
    ("uint8", (11, 21, 7, 4, 8), (1, 3, 0, 2, 4), "scatter", 8, 4, 77),
    ("uint8", (3, 23, 15, 21, 4), (1, 3, 2, 0, 4), "scatter", 4, 7, 45),
    ("int16", (5, 14, 18, 5, 4), (3, 1, 0, 2, 4), "scatter", 8, 5, 630),
    ("int16", (23, 6, 7, 4, 4), (1, 3, 0, 2, 4), "scatter", 8, 4, 161),
]


def _short_k_plan(dtype, sizes, order, op):
    return _permutation_plan_and_check(dtype, sizes, order, order, op)[0]


@pytest.mark.parametrize("dtype,sizes,order,op,width,kn,jn", SHORT_K_BLOCKS,
                         ids=[f"{c[0]}-k{c[5]}x{c[4]}" for c in SHORT_K_BLOCKS])
def test_short_source_runs_beside_a_long_group_make_a_block(dtype, sizes, order, op, width, kn, jn, monkeypatch,
                                                           k_inside_dimensions):
    # (K_AT_DIMENSION_BOUNDARIES off, as in test_short_k_blocks_gather_and_scatter.)
    plan = _short_k_plan(dtype, sizes, order, op)
    assert plan.mode == "block" and plan.width == width
    assert plan.block.k_elems == kn and plan.block.j_elems == jn
    assert kn * width >= _planner.BLOCK_SHORT_K_BYTES
    # With the bounds raised past them, such runs are no block's K.
    monkeypatch.setattr(_planner, "BLOCK_SHORT_K_BYTES", kn * width + 1)
    monkeypatch.setattr(_planner, "STRIDED_SHORT_K_BYTES", kn * width + 1)
    plan = _short_k_plan(dtype, sizes, order, op)
    assert plan.mode != "block" or plan.block.k_elems >= 8


# Permutations whose destination-fast dimension is short and whose next one
# is the second dimension of the source's contiguous run: K stops at the
# first source dimension, and J runs on through the destination's.  With
# K_AT_DIMENSION_BOUNDARIES off, K takes a piece of the shared dimension
# (the uint8 gather: a block of 570 x 9, rows of 9 bytes) or the plan is no
# block at all.
K_AT_BOUNDARY_BLOCKS = [
    ("uint8", (1, 14, 19, 25, 15, 9), (0, 3, 5, 1, 4, 2), "gather", 19, 675, ("block", 570, 9)),
    ("uint32", (3, 7, 21, 40, 21), (4, 2, 0, 3, 1), "scatter", 21, 840, ("strided", None, None)),
    ("float16", (2, 26, 32, 6, 4, 21), (1, 5, 0, 2, 4, 3), "scatter", 21, 768, ("strided", None, None)),
    ("uint8", (7, 8, 9, 6, 25, 31), (1, 2, 5, 3, 4, 0), "scatter", 31, 525, ("strided", None, None)),
]


@pytest.fixture
def k_inside_dimensions(monkeypatch):
    yield from _planner_setting(monkeypatch, "K_AT_DIMENSION_BOUNDARIES", False)


@pytest.mark.parametrize("dtype,sizes,order,op,kn,jn,without", K_AT_BOUNDARY_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-k{c[4]}" for c in K_AT_BOUNDARY_BLOCKS])
def test_k_stops_at_a_source_dimension_where_j_runs_on(dtype, sizes, order, op, kn, jn, without, threads):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and (plan.block.k_elems, plan.block.j_elems) == (kn, jn)
    check()


@pytest.mark.parametrize("dtype,sizes,order,op,kn,jn,without", K_AT_BOUNDARY_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-k{c[4]}" for c in K_AT_BOUNDARY_BLOCKS])
def test_without_dimension_boundaries_k_takes_a_piece(dtype, sizes, order, op, kn, jn, without,
                                                      k_inside_dimensions, no_slabs):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == without[0]
    if plan.mode == "block":
        assert (plan.block.k_elems, plan.block.j_elems) == without[1:]
    check()


# Permutations whose first block split (the longest K) leaves J a line or
# two of destination rows, and whose shorter K gives J more than 256 bytes:
# the search goes on to the shorter K.  With BLOCK_J_ENOUGH_BYTES at one
# line, the first split stays.  (dtype, sizes, layout order, op, K x J,
# K x J at one line)
LONGER_J_BLOCKS = [
    ("float64", (3, 4, 26, 51, 14), (0, 1, 4, 3, 2), "gather", (26, 714), (442, 14)),
    ("float16", (85, 12, 36, 66), (3, 1, 2, 0), "gather", (85, 594), (1020, 66)),
]


@pytest.mark.parametrize("dtype,sizes,order,op,split,at_a_line", LONGER_J_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}" for c in LONGER_J_BLOCKS])
def test_a_shorter_k_where_j_would_span_a_line_or_two(dtype, sizes, order, op, split, at_a_line, threads):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and (plan.block.k_elems, plan.block.j_elems) == split
    assert split[1] * plan.width >= _planner.BLOCK_J_ENOUGH_BYTES
    check()


@pytest.fixture
def j_enough_at_a_line(monkeypatch):
    yield from _planner_setting(monkeypatch, "BLOCK_J_ENOUGH_BYTES", 64)


@pytest.mark.parametrize("dtype,sizes,order,op,split,at_a_line", LONGER_J_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}" for c in LONGER_J_BLOCKS])
def test_j_of_a_line_keeps_the_first_split(dtype, sizes, order, op, split, at_a_line, j_enough_at_a_line):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and (plan.block.k_elems, plan.block.j_elems) == at_a_line
    check()


@pytest.fixture
def later_blocks_of_any_size(monkeypatch):
    yield from _planner_setting(monkeypatch, "BLOCK_LATER_MIN_VALUES", 0)


def test_a_shorter_k_only_for_a_block_of_4096_values(threads):
    # K of 19 beside J of 45 (855 values) would replace 114 x 15; it is not
    # taken (such small blocks ran slower), and the first split stays.
    plan, check = _permutation_plan_and_check("float64", (2, 15, 9, 19, 3, 15), (2, 1, 5, 0, 4, 3),
                                              (2, 1, 5, 0, 4, 3), "gather")
    assert plan.mode == "block" and (plan.block.k_elems, plan.block.j_elems) == (114, 15)
    assert 19 * 45 < _planner.BLOCK_LATER_MIN_VALUES
    check()


def test_without_the_bound_on_values_the_small_block_is_taken(later_blocks_of_any_size):
    plan, check = _permutation_plan_and_check("float64", (2, 15, 9, 19, 3, 15), (2, 1, 5, 0, 4, 3),
                                              (2, 1, 5, 0, 4, 3), "gather")
    assert plan.mode == "block" and (plan.block.k_elems, plan.block.j_elems) == (19, 45)
    check()


# Copies of 8 MB or more whose innermost outer dimension steps a line or
# more on both sides, with another stepping under a line on one side: that
# one runs innermost, so consecutive tasks share its lines.  (dtype, sizes,
# layout order, op, mode, outer dimensions in destination order)
SUBLINE_INNERMOST_CASES = [
    ("uint8", (45, 154, 166, 21), (3, 2, 0, 1), "scatter", "block", [(83, 42, 13860), (7, 3451140, 990)]),
    ("int16", (94, 126, 109, 17), (2, 1, 3, 0), "scatter", "tile", [(109, 34, 402696), (126, 3706, 3196)]),
]


@pytest.mark.parametrize("dtype,sizes,order,op,mode,dst_order", SUBLINE_INNERMOST_CASES,
                         ids=[f"{c[0]}-{c[4]}" for c in SUBLINE_INNERMOST_CASES])
def test_a_dimension_that_steps_under_a_line_runs_innermost(dtype, sizes, order, op, mode, dst_order, threads,
                                                            no_cuts):
    # (The int16 tile would be cut in two for a block: 109 beside 17 values.)
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == mode and plan.outer == [dst_order[1], dst_order[0]]
    assert min(plan.outer[-1][1:]) < 64 <= min(plan.outer[0][1:])
    check()


@pytest.fixture
def destination_order(monkeypatch):
    # (The uint8 block's dimension that steps under a line also carries its
    # source rows on: BLOCK_RUN_ON would run it innermost too.)
    monkeypatch.setattr(_planner, "BLOCK_RUN_ON", False)
    yield from _planner_setting(monkeypatch, "SUBLINE_INNERMOST", False)


@pytest.mark.parametrize("dtype,sizes,order,op,mode,dst_order", SUBLINE_INNERMOST_CASES,
                         ids=[f"{c[0]}-{c[4]}" for c in SUBLINE_INNERMOST_CASES])
def test_without_the_rule_the_outer_dimensions_keep_destination_order(dtype, sizes, order, op, mode, dst_order,
                                                                      destination_order, no_cuts):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == mode and plan.outer == dst_order
    check()


def _bound_as_is_or(request, monkeypatch, name):
    # The planner's bound ``name`` as it is (request.param None), or at
    # request.param (the plans held by descriptor dropped, so that the copy
    # runs the plan checked); yields the parameter.
    if request.param is None:
        yield None
        return
    for _ in _planner_setting(monkeypatch, name, request.param):
        yield request.param


@pytest.fixture(params=[None, 0], ids=["8MiB", "none"])
def subline_bound(request, monkeypatch):
    yield from _bound_as_is_or(request, monkeypatch, "SUBLINE_MIN_TOTAL")


def test_copies_under_8_mb_keep_destination_order(subline_bound):
    # A 3.4 MB uint8 scatter so planned: destination order below the bound,
    # the dimension that steps under a line innermost without it.
    bound = subline_bound
    plan, check = _permutation_plan_and_check("uint8", (26, 26, 167, 30), (2, 0, 3, 1), (2, 0, 3, 1), "scatter")
    assert plan.dst_bytes < 8 << 20 and len(plan.outer) >= 2
    if bound is None:
        assert min(plan.outer[-1][1:]) >= 64 and any(min(t[1:]) < 64 for t in plan.outer[:-1])
    else:
        assert min(plan.outer[-1][1:]) < 64 <= min(plan.outer[0][1:])
    check()


# Block plans in place of 8 MiB or more whose source rows (K's run and the J
# dimensions that carry it on) are at most 1 KiB, where an outer dimension
# carries those rows on in the source: that one runs innermost, so each block
# reads on from where the last one stopped.  (dtype, sizes, layout order, op,
# source row bytes, outer dimensions in destination order)
RUN_ON_CASES = [
    ("int16", (139, 90, 342), (2, 1, 0), "scatter", 342, [(2, 342, 4278420), (15, 4104, 1668)]),
    ("uint8", (9, 1045, 1040), (2, 1, 0), "gather", 855, [(11, 855, 98800), (2, 4890600, 520)]),
]


def _source_row(plan):
    return _planner.block_source_run([(n, a, 0) for n, a in plan.block.j], plan.block.k_elems, plan.width)


@pytest.mark.parametrize("dtype,sizes,order,op,row,dst_order", RUN_ON_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in RUN_ON_CASES])
def test_the_dimension_that_carries_short_source_rows_on_runs_innermost(dtype, sizes, order, op, row, dst_order,
                                                                        threads):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and not plan.l2 and not plan.block.whole
    assert plan.dst_bytes >= 8 << 20 and _source_row(plan) == row <= 1024
    assert plan.outer == [dst_order[1], dst_order[0]] and plan.outer[-1][1] == row
    check()


@pytest.fixture
def no_run_on(monkeypatch):
    yield from _planner_setting(monkeypatch, "BLOCK_RUN_ON", False)


@pytest.mark.parametrize("dtype,sizes,order,op,row,dst_order", RUN_ON_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in RUN_ON_CASES])
def test_without_the_run_on_rule_blocks_keep_destination_order(dtype, sizes, order, op, row, dst_order, no_run_on):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and plan.outer == dst_order
    check()


# ... unless the innermost outer dimension (destination order) carries the
# blocks' destination rows on, rows shorter than 512 bytes and than the
# source rows: then that order stays, each block writing on where the last
# one stopped (the lines it left in part).  (dtype, sizes, layout order, op,
# destination row bytes, the dimension that carries them on)
KEEP_DEST_CASES = [
    ("uint8", (7, 19, 13, 49, 101), (4, 3, 1, 2, 0), "scatter", 133, (13, 94031, 133)),
    ("uint8", (64, 17, 23, 21, 16), (4, 2, 3, 0, 1), "gather", 368, (21, 25024, 368)),
]


@pytest.mark.parametrize("dtype,sizes,order,op,row,carrier", KEEP_DEST_CASES,
                         ids=[f"{c[0]}-{c[3]}" for c in KEEP_DEST_CASES])
def test_the_dimension_that_carries_short_destination_rows_on_stays_innermost(dtype, sizes, order, op, row, carrier,
                                                                              threads, monkeypatch):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and not plan.l2 and not plan.block.whole and plan.dst_bytes >= 8 << 20
    assert plan.inner[0] * plan.width == row < min(512, _source_row(plan))
    assert plan.outer[-1] == carrier
    check()
    for _ in _planner_setting(monkeypatch, "BLOCK_KEEP_DEST_RUN", False):
        plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
        assert plan.outer[-1] != carrier and carrier in plan.outer
        assert plan.outer[-1][1] == _source_row(plan) <= 1024
        check()


def test_destination_rows_of_512_bytes_or_more_let_the_source_rows_run_on(monkeypatch):
    # A 9.1 MB uint8 gather whose blocks write rows of 635 bytes, carried on
    # by a dimension of 5, and read rows of 960, carried on by one of 3: the
    # source's runs innermost; with the bound over the row, the
    # destination's.
    sizes, order = (5, 192, 3, 5, 5, 127), (3, 5, 4, 2, 0, 1)
    dest, source = (5, 1828800, 635), (3, 960, 3175)
    plan, check = _permutation_plan_and_check("uint8", sizes, order, order, "gather")
    assert plan.mode == "block" and plan.inner[0] == 635 and _source_row(plan) == 960
    assert plan.outer == [dest, source]
    check()
    for _ in _planner_setting(monkeypatch, "BLOCK_KEEP_DEST_ROW_BYTES", 1024):
        plan, check = _permutation_plan_and_check("uint8", sizes, order, order, "gather")
        assert plan.outer == [source, dest]
        check()


def test_source_rows_over_1_kib_keep_destination_order(monkeypatch):
    # A 22 MB float32 gather whose blocks read rows of 1200 bytes (K's 48
    # bytes carried on by J's first dimension), carried on by an outer
    # dimension: over the bound, it stays where destination order puts it.
    sizes, order = (2, 9, 12, 47, 22, 25), (0, 3, 4, 1, 5, 2)
    plan, check = _permutation_plan_and_check("float32", sizes, order, order, "gather")
    assert plan.mode == "block" and _source_row(plan) == 1200 and plan.dst_bytes >= 8 << 20
    carrier = (9, 1200, 1240800)
    assert carrier in plan.outer[:-1]
    for _ in _planner_setting(monkeypatch, "BLOCK_RUN_ON_MAX_BYTES", 2048):
        plan, check = _permutation_plan_and_check("float32", sizes, order, order, "gather")
        assert plan.outer[-1] == carrier
        check()


@pytest.mark.parametrize("sizes,row,carrier", [
    ((156, 5, 19, 612), 612, (19, 612, 477360)),
    ((700, 5, 19, 130), 130, (19, 130, 455000)),
])
def test_tiles_run_the_dimension_that_carries_their_source_rows_on_innermost(sizes, row, carrier, threads):
    # uint8 scatters of 8.6-9.1 MB planned as tiles of source rows of 130
    # and 612 bytes (whole in each task), carried on by a dimension of 19:
    # that one runs innermost (TILE_RUN_ON); destination order without the
    # rule, or with the rows under its lower bound.  Against numpy each way.
    order = (2, 1, 3, 0)
    plan, check = _permutation_plan_and_check("uint8", sizes, order, order, "scatter")
    assert plan.mode == "tile" and plan.tile_pieces == 1 and plan.tile[0] == row
    assert plan.dst_bytes >= 8 << 20 and plan.outer[-1] == carrier
    check()
    for name, value in (("TILE_RUN_ON", False), ("TILE_RUN_ON_MIN_BYTES", row + 1)):
        with pytest.MonkeyPatch.context() as mp:
            for _ in _planner_setting(mp, name, value):
                plan, check = _permutation_plan_and_check("uint8", sizes, order, order, "scatter")
                assert plan.mode == "tile" and plan.outer[-1] != carrier and carrier in plan.outer
                check()


@pytest.fixture(params=[None, 0], ids=["8MiB", "none"])
def run_on_bound(request, monkeypatch):
    yield from _bound_as_is_or(request, monkeypatch, "BLOCK_RUN_ON_MIN_TOTAL")


def test_copies_under_8_mb_keep_the_order_of_their_blocks(run_on_bound):
    # A 3.8 MB float16 scatter whose blocks read rows of 140 bytes, carried on
    # by a dimension of 37: destination order below the bound, that
    # dimension innermost without it.
    plan, check = _permutation_plan_and_check("float16", (12, 113, 37, 7, 10), (3, 2, 1, 4, 0),
                                              (3, 2, 1, 4, 0), "scatter")
    assert plan.mode == "block" and plan.dst_bytes < 8 << 20 and _source_row(plan) == 140
    carrier = (37, 140, 27120)
    assert (plan.outer[-1] == carrier) == (run_on_bound == 0) and carrier in plan.outer
    check()


# Blocks whose rows lie back to back in the destination in runs of 1 KiB or
# more (the whole block one run, or several), in copies that stream but
# whose rows could not: each block is transposed into a buffer and streamed
# out a run at a time.  Tiles one and four lines tall, a staged source,
# one-byte groups shorter than a micro-block (padded through the kernel's
# buffers), a single task.  (dtype, sizes, layout order, copy that so plans,
# runs a block)
WHOLE_BLOCKS = [
    ("float16", (7, 13, 13, 19, 6), (3, 0, 1, 4, 2), "gather", 1),
    ("float16", (11, 2, 5, 11, 12, 12), (3, 1, 4, 5, 2, 0), "scatter", 1),
    ("float32", (16, 11, 16, 15), (3, 0, 2, 1), "gather", 1),
    ("float32", (20, 8, 10, 10), (2, 1, 3, 0), "scatter", 1),
    ("float64", (11, 4, 6, 5, 12), (1, 0, 4, 3, 2), "gather", 1),
    ("float64", (20, 18, 4, 16), (1, 3, 2, 0), "scatter", 1),
    ("int16", (10, 14, 10, 2, 3, 22), (0, 1, 5, 3, 2, 4), "gather", 1),
    ("uint32", (9, 14, 16, 5, 8), (1, 4, 2, 3, 0), "scatter", 1),
    ("uint8", (22, 9, 13, 12), (3, 0, 2, 1), "gather", 1),
    ("uint8", (22, 4, 13, 15, 12), (0, 1, 4, 3, 2), "scatter", 1),
    ("uint8", (6, 19, 5, 13, 21, 2), (2, 4, 5, 3, 1, 0), "scatter", 1),
    ("float16", (17, 20, 17, 17, 2), (4, 1, 3, 2, 0), "gather", 17),
    ("float32", (19, 8, 11, 3, 3, 3), (4, 5, 2, 0, 3, 1), "scatter", 9),
    ("float64", (17, 5, 4, 7, 3, 4), (4, 5, 1, 3, 2, 0), "scatter", 12),
    ("int16", (16, 16, 5, 10, 16), (4, 1, 2, 3, 0), "gather", 16),
    ("uint32", (9, 7, 4, 11, 4, 11), (1, 4, 0, 5, 3, 2), "scatter", 4),
    ("uint8", (9, 14, 15, 10, 18), (1, 4, 0, 3, 2), "gather", 3),
]


def _row_runs(kgroup, run):
    # The lengths of the runs that rows of run bytes at the k group's
    # destination offsets make, counted byte by byte (each byte once).
    offsets = [0]
    for n, stride in kgroup:
        offsets = [o + i * stride for i in range(n) for o in offsets]
    covered = sorted(o + b for o in offsets for b in range(run))
    assert len(set(covered)) == len(covered)
    runs, start = [], 0
    for i in range(1, len(covered) + 1):
        if i == len(covered) or covered[i] != covered[i - 1] + 1:
            runs.append(covered[i - 1] + 1 - covered[start])
            start = i
    return runs


def _block_bytes(plan):
    return plan.block.j_elems * plan.block.k_elems * plan.width


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,runs", WHOLE_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in WHOLE_BLOCKS])
def test_blocks_whose_rows_make_long_runs_stream_them_whole(dtype, sizes, order, op, runs, level, threads,
                                                            tall_tiles_any_width, small_whole_blocks):
    # With streaming from 0 bytes.
    def check_plan(plan):
        width = plan.width
        assert plan.mode == "block" and plan.block.whole and not plan.stream and plan.l2 == 0
        lengths = _row_runs(plan.block.k, plan.block.j_elems * width)
        assert len(lengths) == runs and min(lengths) >= _planner.BLOCK_WHOLE_MIN_BYTES
        assert _block_bytes(plan) <= _planner.BLOCK_L2_BYTES

    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


# Whole blocks of 4-64 KiB (7.6-62.5 KiB).
SMALL_WHOLE_BLOCKS = [WHOLE_BLOCKS[i] for i in (1, 2, 3, 7, 10, 11, 12, 13, 14, 15, 16)]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,runs", SMALL_WHOLE_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in SMALL_WHOLE_BLOCKS])
def test_whole_blocks_ask_for_the_next_block(dtype, sizes, order, op, runs, level, threads, monkeypatch,
                                             small_whole_blocks):
    # Whole blocks from BLOCK_NEXT_MIN_TOTAL bytes (here 0) are told the next
    # block's source, whose lines those of 4-64 KiB ask for while their
    # runs go out: the copies are the same, block by block.
    def check_plan(plan):
        assert plan.mode == "block" and plan.block.whole and plan.block.next and plan.segments == 1
        assert 4096 <= _block_bytes(plan) <= 65536

    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", 0)
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


@pytest.mark.parametrize("case,whole", [
    (WHOLE_BLOCKS[3], False),    # float32, rows of 80 bytes
    (WHOLE_BLOCKS[6], False),    # int16, 44 bytes
    (WHOLE_BLOCKS[11], False),   # float16, 68 bytes, rows back to back in runs of 17
    (WHOLE_BLOCKS[5], False),    # float64, 160 bytes
    (WHOLE_BLOCKS[13], True),    # float64, 544 bytes: longer than the bound
    (WHOLE_BLOCKS[8], True),     # uint8, 12 bytes: one-byte values keep streaming whole
], ids=lambda c: f"{c[0]}-{c[3]}" if isinstance(c, tuple) else str(c))
def test_whole_blocks_of_short_rows_stay_in_place(case, whole, threads, monkeypatch):
    # With a large L3, blocks of values of two bytes or more whose
    # destination rows are at most BLOCK_WHOLE_SHORT_ROW_BYTES stay in place
    # (copies under BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL, streaming from 0 bytes
    # here); with the bound at 0 (a small L3's), or from the size bound, they
    # stream whole.  Gathered and scattered against numpy each way.
    dtype, sizes, order, op, _ = case
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_BLOCK_BYTES", 0)
    small_l3 = _planner.l3_bound("BLOCK_WHOLE_SHORT_ROW_BYTES", small_l3=True)
    for bounds, expect in (({}, whole), ({"BLOCK_WHOLE_SHORT_ROW_BYTES": small_l3}, True),
                           ({"BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL": 0}, True)):
        with monkeypatch.context() as m:
            for name, value in bounds.items():
                m.setattr(_planner, name, value)
            with _stream_threshold(0):
                def check_plan(plan):
                    assert plan.mode == "block" and plan.block.whole == expect
                    if not expect:
                        assert plan.width >= 2 and plan.block.j_elems * plan.width <= 256
                _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_whole_blocks_ask_for_the_next_block_from_the_bound(monkeypatch, small_whole_blocks):
    dtype, sizes, order, op, _ = SMALL_WHOLE_BLOCKS[0]
    nbytes = math.prod(sizes) * np.dtype(dtype).itemsize
    with _stream_threshold(0):
        monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", nbytes)
        plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
        assert plan.block.whole and plan.block.next
        monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", nbytes + 1)
        plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
        assert plan.block.whole and not plan.block.next


# Whole blocks of more than 64 KiB (75-92 KiB), two or three a copy.
BIG_WHOLE_BLOCKS = [
    ("float32", (36, 2, 28, 19), (1, 3, 2, 0), "scatter"),
    ("uint8", (2, 22, 21, 12, 2, 8), (2, 4, 0, 3, 1, 5), "scatter"),
    ("int16", (31, 2, 24, 3, 21), (3, 4, 2, 0, 1), "gather"),
    ("int16", (14, 3, 6, 19, 25), (2, 4, 3, 1, 0), "scatter"),
    ("float32", (17, 3, 30, 7, 6), (1, 3, 4, 2, 0), "gather"),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", BIG_WHOLE_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in BIG_WHOLE_BLOCKS])
def test_big_whole_blocks_ask_for_the_next_block_on_a_small_l3(dtype, sizes, order, op, level, threads,
                                                              monkeypatch, small_whole_blocks):
    # With a small L3's bound, whole blocks up to the L2 buffer's size are
    # told the next block's source, whose lines they ask for while their
    # runs go out: the copies are the same, block by block.
    def check_plan(plan):
        assert plan.mode == "block" and plan.block.whole and plan.block.next and plan.segments == 1
        assert 65536 < _block_bytes(plan) <= _planner.BLOCK_L2_BYTES
        assert plan.dst_bytes >= 2 * _block_bytes(plan)

    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", 0)
    monkeypatch.setattr(_planner, "WHOLE_AHEAD_MAX_BYTES", _planner.l3_bound("WHOLE_AHEAD_MAX_BYTES", small_l3=True))
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_whole_blocks_ask_for_the_next_block_within_the_size_bounds(monkeypatch, small_whole_blocks):
    # Of whole blocks, those of WHOLE_AHEAD_MIN_BYTES to WHOLE_AHEAD_MAX_BYTES
    # (bounds included) ask: every one up to the L2 buffer's size with a
    # small L3, up to 64 KiB with a large one (as the tests plan).
    assert _planner.l3_bound("WHOLE_AHEAD_MAX_BYTES", small_l3=True) == _planner.BLOCK_L2_BYTES
    assert _planner.l3_bound("WHOLE_AHEAD_MAX_BYTES", small_l3=False) == 64 << 10
    assert _planner.WHOLE_AHEAD_MAX_BYTES == 64 << 10
    assert [_planner.whole_asks_ahead(n) for n in (4095, 4096, 65536, 65537)] == [False, True, True, False]
    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", 0)
    dtype, sizes, order, op = BIG_WHOLE_BLOCKS[0]
    with _stream_threshold(0):
        plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
        nbytes = _block_bytes(plan)
        assert plan.block.whole and not plan.block.next and nbytes > 64 << 10
        monkeypatch.setattr(_planner, "WHOLE_AHEAD_MAX_BYTES", nbytes)
        assert _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.next
        monkeypatch.setattr(_planner, "WHOLE_AHEAD_MIN_BYTES", nbytes + 1)
        assert not _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.next


# Blocks of values of up to four bytes under BLOCK_WHOLE_MIN_BLOCK_BYTES that
# are one run of the destination, of rows of 1 KiB or more.
ONE_RUN_BLOCKS = [
    ("float32", (3, 4, 17, 3, 145), (0, 3, 1, 4, 2), "gather"),       # 17 rows of 1740 bytes
    ("float32", (16, 2, 7, 10, 14, 2), (1, 4, 3, 0, 5, 2), "gather"),  # 7 rows of 1120
    ("float16", (6, 26, 7, 95, 8), (1, 0, 4, 3, 2), "scatter"),        # 8 rows of 1330
    ("int16", (5, 9, 14, 2, 70, 20), (0, 2, 3, 5, 4, 1), "scatter"),   # 20 rows of 1260
    ("uint32", (4, 90, 21, 5, 7), (0, 2, 4, 1, 3), "scatter"),         # 7 rows of 1800
    ("uint8", (20, 2, 23, 613, 2), (3, 1, 0, 4, 2), "gather"),         # 23 rows of 1226
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", ONE_RUN_BLOCKS, ids=str)
def test_small_blocks_of_one_run_of_long_rows_stream_whole(dtype, sizes, order, op, level, threads):
    # With a large L3, a block of 4 KiB to 32 KiB (BLOCK_WHOLE_ONE_RUN_MIN,
    # BLOCK_WHOLE_MIN_BLOCK_BYTES) whose rows lie back to back as one run of
    # the destination, each at least BLOCK_WHOLE_ONE_RUN_ROW bytes, streams
    # whole (here from 0 bytes); gathers and scatters against numpy.
    def check_plan(plan):
        width = plan.width
        row = plan.block.j_elems * width
        assert plan.mode == "block" and plan.block.whole and not plan.stream and plan.l2 == 0
        assert _planner.BLOCK_WHOLE_ONE_RUN_MIN <= _block_bytes(plan) < _planner.BLOCK_WHOLE_MIN_BLOCK_BYTES
        assert row >= _planner.BLOCK_WHOLE_ONE_RUN_ROW and _row_runs(plan.block.k, row) == [_block_bytes(plan)]

    assert _planner.BLOCK_WHOLE_ONE_RUN_MIN == 4096   # (conftest: a large L3's bounds)
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


@pytest.mark.parametrize("dtype,sizes,order,op", ONE_RUN_BLOCKS[:3], ids=str)
def test_small_blocks_of_one_run_stay_in_place_otherwise(dtype, sizes, order, op, monkeypatch):
    # The same blocks stay in place with a small L3's bound (0: off), with
    # rows shorter than BLOCK_WHOLE_ONE_RUN_ROW, or under
    # BLOCK_WHOLE_ONE_RUN_MIN bytes; and so does a block of short rows (68
    # bytes) that is not one run.
    def whole():
        return _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole

    with _stream_threshold(0):
        plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
        assert plan.block.whole
        row = plan.block.j_elems * plan.width
        for name, value in (("BLOCK_WHOLE_ONE_RUN_MIN", _planner.l3_bound("BLOCK_WHOLE_ONE_RUN_MIN", small_l3=True)),
                            ("BLOCK_WHOLE_ONE_RUN_ROW", row + 1), ("BLOCK_WHOLE_ONE_RUN_MIN", 32 << 10)):
            with monkeypatch.context() as m:
                m.setattr(_planner, name, value)
                assert not whole(), name
        plan = _permutation_plan_and_check("float32", (2, 5, 17, 3, 145), (0, 3, 1, 4, 2), (0, 3, 1, 4, 2),
                                           "scatter")[0]
        assert plan.mode == "block" and not plan.block.whole and _block_bytes(plan) < (32 << 10)


def test_blocks_stream_whole_only_from_the_streaming_size(monkeypatch):
    dtype, sizes, order, op, _ = WHOLE_BLOCKS[4]
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_SHORT_ROW_BYTES", 0)    # (its rows are short)
    nbytes = math.prod(sizes) * np.dtype(dtype).itemsize
    with _stream_threshold(nbytes * 8 // _planner.TRANSPOSE_STREAM_EIGHTHS):
        assert _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole
    with _stream_threshold(nbytes * 8 // _planner.TRANSPOSE_STREAM_EIGHTHS + 8):
        assert not _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole
    with _stream_threshold(0):
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_BYTES", _planner.BLOCK_L2_BYTES + 1)
        assert not _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole


def test_whole_blocks_write_their_rows_bytes_only(monkeypatch, threads, small_whole_blocks):
    # A block whose rows make runs of 960 bytes (20 rows of 48 bytes) 15360
    # bytes apart, under the bound, taken whole with the bound at 1 byte: the
    # runs go out one by one, so the gaps between them (the other blocks'
    # rows, written by other tasks) and the guard bytes are never written
    # over.
    dtype, sizes, order = "float32", (16, 12, 12, 5, 4), (2, 0, 4, 3, 1)
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_BYTES", 1)
    with _stream_threshold(0):
        plan, check = _permutation_plan_and_check(dtype, sizes, order, order, "scatter")
        assert plan.mode == "block" and plan.block.whole
        assert _row_runs(plan.block.k, plan.block.j_elems * plan.width) == [960] * 12
        check()


# One- and two-byte blocks whose rows are 256 bytes or longer, in 48 runs or
# more shorter than BLOCK_WHOLE_MIN_BYTES (one a run of two rows back to
# back), also streamed whole.  (dtype, sizes, order, op, runs, row bytes)
MANY_RUN_BLOCKS = [
    ("uint8", (27, 7, 28, 5, 33), (2, 4, 3, 1, 0), "gather", 189, 660),
    ("uint8", (17, 3, 22, 27, 9), (4, 2, 3, 1, 0), "gather", 51, 891),
    ("uint8", (36, 4, 30, 9, 12), (1, 4, 3, 2, 0), "scatter", 108, 540),
    ("uint8", (22, 11, 27, 7, 21), (3, 4, 0, 2, 1), "scatter", 147, 594),
    ("uint8", (14, 21, 34, 4, 29), (3, 4, 2, 1, 0), "scatter", 116, 294),
    ("int16", (2, 33, 37, 26, 7), (3, 2, 4, 0, 1), "gather", 66, 364),
    ("int16", (19, 12, 19, 15, 6), (3, 4, 2, 1, 0), "scatter", 90, 456),
    ("float16", (5, 3, 37, 35, 23), (4, 0, 3, 2, 1), "gather", 111, 322),
    ("float16", (36, 7, 7, 29, 3), (3, 4, 1, 0, 2), "scatter", 87, 504),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,runs,row", MANY_RUN_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in MANY_RUN_BLOCKS])
def test_blocks_of_many_long_rows_stream_them_whole(dtype, sizes, order, op, runs, row, level, threads,
                                                    small_whole_blocks):
    # With streaming from 0 bytes.
    def check_plan(plan):
        assert plan.mode == "block" and plan.block.whole and not plan.stream and plan.l2 == 0
        assert plan.block.j_elems * plan.width == row >= _planner.BLOCK_WHOLE_ROW_BYTES
        lengths = _row_runs(plan.block.k, row)
        assert len(lengths) == runs >= _planner.BLOCK_WHOLE_MIN_RUNS
        assert max(lengths) < _planner.BLOCK_WHOLE_MIN_BYTES

    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_blocks_of_many_runs_stream_whole_only_for_short_values_and_long_rows(monkeypatch):
    dtype, sizes, order, op, runs, row = MANY_RUN_BLOCKS[2]

    def whole(dtype=dtype, sizes=sizes, order=order, op=op):
        return _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole

    with _stream_threshold(0):
        assert whole()
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_RUNS", runs)
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_ROW_BYTES", row)
        assert whole()
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_RUNS", runs + 1)
        assert not whole()
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_MIN_RUNS", runs)
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_ROW_BYTES", row + 1)
        assert not whole()
        monkeypatch.undo()
        # Four-byte values: 51-54 rows of 520-624 bytes, kept in place (not
        # joined along the dimension that carries their rows on: the next
        # tests).
        monkeypatch.setattr(_planner, "BLOCK_JOIN", False)
        for fdtype, fsizes, forder, fop in [("float32", (34, 5, 13, 17, 3), (4, 3, 0, 2, 1), "scatter"),
                                            ("uint32", (4, 29, 39, 3, 18), (3, 4, 1, 0, 2), "scatter")]:
            plan, check = _permutation_plan_and_check(fdtype, fsizes, forder, forder, fop)
            frow = plan.block.j_elems * 4
            assert plan.mode == "block" and not plan.stream and plan.l2 == 0
            assert _planner.BLOCK_WHOLE_ROW_BYTES <= frow < _planner.BLOCK_WHOLE_MIN_BYTES
            assert len(_row_runs(plan.block.k, frow)) >= _planner.BLOCK_WHOLE_MIN_RUNS
            assert not plan.block.whole
            check()


# Blocks of 33 or more rows of 64 bytes to 1 KiB whose innermost outer
# dimension carries their rows on in the destination (its destination
# stride is a row), of which runs of several blocks are joined into one
# whole block (block_join): the dimension's size is no multiple of the
# blocks a buffer takes, so each of its runs ends with a shorter join.
# (dtype, sizes, order, op)
JOINED_BLOCKS = [
    ("uint8", (37, 9, 15, 35), (3, 1, 0, 2), "scatter"),
    ("uint8", (38, 7, 18, 39), (2, 1, 3, 0), "gather"),
    ("int16", (13, 8, 31, 34), (3, 2, 1, 0), "scatter"),
    ("int16", (35, 13, 28, 7), (1, 3, 2, 0), "gather"),
    ("float32", (13, 28, 2, 3, 36), (4, 0, 2, 1, 3), "scatter"),
    ("float32", (36, 11, 9, 13), (2, 1, 3, 0), "gather"),
    ("float64", (23, 6, 2, 7, 38), (4, 0, 3, 1, 2), "scatter"),
    ("float64", (38, 17, 2, 23, 2), (2, 4, 1, 3, 0), "gather"),
]


def _check_joined(plan):
    # A whole block joined along the innermost outer dimension, which
    # carries its rows on, within the bounds: as many blocks as make rows
    # of BLOCK_JOIN_RUN_BYTES, that dimension holds and the buffer takes.
    row = plan.block.j_elems * plan.width
    n, _, dst_stride = plan.outer[-1]
    assert plan.mode == "block" and plan.block.whole and not plan.stream and plan.l2 == 0
    assert dst_stride == row and _row_runs(plan.block.k, row) == [row] * plan.block.k_elems
    assert plan.block.k_elems >= _planner.BLOCK_JOIN_MIN_ROWS and 64 <= row < _planner.BLOCK_JOIN_MAX_ROW
    join = plan.block.join
    assert _planner.BLOCK_JOIN_MIN_BLOCKS <= join < n and n % join != 0
    assert join * row * plan.block.k_elems <= _planner.BLOCK_L2_BYTES
    assert (join * row >= _planner.BLOCK_JOIN_RUN_BYTES > (join - 1) * row
            or (join + 1) * row * plan.block.k_elems > _planner.BLOCK_L2_BYTES)


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", JOINED_BLOCKS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in JOINED_BLOCKS])
def test_whole_blocks_joined_along_the_dimension_that_carries_their_rows(dtype, sizes, order, op, level, threads):
    # With streaming from 0 bytes.  The generic kernels take no whole block
    # (each block goes in place); two threads split runs of blocks.
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, _check_joined)


def test_blocks_join_only_within_the_bounds(monkeypatch):
    dtype, sizes, order, op = JOINED_BLOCKS[2]
    nbytes = math.prod(sizes) * np.dtype(dtype).itemsize

    def plan():
        return _permutation_plan_and_check(dtype, sizes, order, order, op)[0]

    with _stream_threshold(nbytes):
        _check_joined(plan())
    with _stream_threshold(nbytes + 1):   # under stream_min_total
        assert plan().block.join == 0
    with _stream_threshold(0):
        p = plan()
        _check_joined(p)
        row, rows, join = p.block.j_elems * p.width, p.block.k_elems, p.block.join
        for name, joins, no_join in [("BLOCK_JOIN_MIN_ROWS", rows, rows + 1),
                                     ("BLOCK_JOIN_MAX_ROW", row + 1, row),
                                     ("BLOCK_JOIN_MIN_BLOCKS", join, join + 1),
                                     ("BLOCK_JOIN", True, False)]:
            monkeypatch.setattr(_planner, name, joins)
            assert plan().block.join == join
            monkeypatch.setattr(_planner, name, no_join)
            assert plan().block.join == 0
            monkeypatch.undo()
        # Rows of 8 KiB asked: the whole dimension (31 blocks, which the
        # buffer takes), and with less room, as many as it takes.
        monkeypatch.setattr(_planner, "BLOCK_JOIN_RUN_BYTES", 8192)
        assert plan().block.join == p.outer[-1][0] <= _planner.BLOCK_L2_BYTES // (row * rows)
        monkeypatch.setattr(_planner, "BLOCK_L2_BYTES", 20 * row * rows + 1)
        assert plan().block.join == 20


def _joined_plan(outer=None, whole=None, join=None):
    # plan_copy with its main plan changed as given: its outer dimensions,
    # whether blocks are whole, the blocks a join takes.
    plan_copy = _planner.plan_copy

    def changed(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        m = plan.main
        if m.mode == "block":
            if outer is not None:
                m.outer = outer(m.outer)
            if whole is not None:
                m.block.whole = whole
            if join is not None:
                m.block.join = join
        return plan
    return changed


@pytest.mark.parametrize("case", [0, 3, 5])
@pytest.mark.parametrize("change", [
    dict(join=1 << 40),                        # more blocks than the buffer takes
    dict(join=-3),
    dict(outer=lambda o: o[::-1]),             # the innermost outer dimension no longer carries the rows
    dict(whole=False),                         # blocks in place
    dict(join=1 << 20, whole=False),
], ids=["huge", "negative", "turned", "in-place", "in-place-huge"])
def test_engine_joins_blocks_only_where_they_fit(monkeypatch, case, change, threads):
    # A plan's join is the engine's to check: where the blocks are not
    # whole, the innermost outer dimension does not carry their rows on, or
    # the buffer cannot take them, each block goes on its own, and the copy
    # is the same.
    dtype, sizes, order, op = JOINED_BLOCKS[case]
    monkeypatch.setattr(_planner, "plan_copy", _joined_plan(**change))
    with _stream_threshold(0):
        for each in ("gather", "scatter"):
            plan, check = _permutation_plan_and_check(dtype, sizes, order, order, each)
            assert plan.mode == "block"
            check()


def _is_whole_or_l2(plan, whole):
    # A block streamed whole, or through both L2 buffers with streaming stores.
    assert plan.mode == "block" and plan.block.whole == whole
    assert plan.l2 == (0 if whole else 2) and plan.stream == (not whole)


# Blocks that both L2 buffers would take (block_l2_path 2) but that stream
# whole: rows of one run, of many, and runs of several rows back to back
# (the one- and two-byte ones only with BLOCK_L2_OVER_WHOLE_WIDTH off: they
# have BLOCK_L2_OVER_WHOLE_MIN_J values of j or more, see L2_OVER_WHOLE).
WHOLE_OVER_L2 = [
    ("float32", (19, 24, 4, 5, 21), (4, 0, 3, 1, 2), "gather"),
    ("float64", (21, 5, 17, 9, 4), (3, 4, 1, 2, 0), "scatter"),
    ("float64", (16, 22, 3, 5, 11), (4, 1, 3, 0, 2), "gather"),
    ("int16", (10, 10, 17, 19, 15), (3, 0, 4, 2, 1), "scatter"),
    ("int16", (18, 23, 5, 11, 20), (4, 3, 2, 1, 0), "scatter"),
    ("uint8", (19, 16, 16, 9, 21), (3, 2, 4, 0, 1), "gather"),
    ("uint8", (12, 6, 24, 14, 20), (1, 4, 3, 2, 0), "gather"),
    ("uint8", (22, 15, 14, 13, 16), (3, 4, 2, 0, 1), "scatter"),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", WHOLE_OVER_L2, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in WHOLE_OVER_L2])
def test_blocks_stream_whole_rather_than_through_the_l2_buffers(dtype, sizes, order, op, level, threads,
                                                                 monkeypatch):
    # With streaming from 0 bytes, whole and, with whole blocks off, through
    # both L2 buffers.
    monkeypatch.setattr(_planner, "BLOCK_L2_OVER_WHOLE_WIDTH", 0)
    with _stream_threshold(0), _isa_level(level):
        for whole in (True, False):
            monkeypatch.setattr(_planner, "WHOLE_BLOCKS", whole)
            _engine._set_stream_min_total(0)   # drops the plans held by descriptor
            _gather_and_scatter(dtype, sizes, order, op, lambda plan, whole=whole: _is_whole_or_l2(plan, whole))
    monkeypatch.undo()


# One- and two-byte blocks that both L2 buffers would take and that would
# stream whole (WHOLE_OVER_L2's): those with BLOCK_L2_OVER_WHOLE_MIN_J
# values of j or more take the buffers (J of 170-756 values), those with
# fewer stream whole (135 and 147).  (dtype, sizes, order, op, takes L2)
L2_OVER_WHOLE = [(*c, True) for c in WHOLE_OVER_L2 if np.dtype(c[0]).itemsize <= 2] + [
    ("int16", (7, 21, 11, 12, 13), (3, 4, 2, 1, 0), "scatter", False),
    ("int16", (5, 14, 24, 9, 15), (4, 0, 3, 1, 2), "gather", False),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,l2", L2_OVER_WHOLE, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in L2_OVER_WHOLE])
def test_narrow_blocks_with_a_long_j_take_both_buffers_over_whole(dtype, sizes, order, op, l2, level, threads,
                                                                  monkeypatch):
    # With streaming from 0 bytes: through both L2 buffers where J is long
    # enough, else whole; with the rule off (BLOCK_L2_OVER_WHOLE_WIDTH 0),
    # whole.  Gathered and scattered against numpy each way.
    def check_plan(plan, l2):
        assert plan.mode == "block" and plan.width <= _planner.BLOCK_L2_OVER_WHOLE_WIDTH
        assert (plan.block.j_elems >= _planner.BLOCK_L2_OVER_WHOLE_MIN_J) == l2
        _is_whole_or_l2(plan, not l2)

    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, lambda plan: check_plan(plan, l2))
        monkeypatch.setattr(_planner, "BLOCK_L2_OVER_WHOLE_WIDTH", 0)
        _engine._set_stream_min_total(0)   # drops the plans held by descriptor
        _gather_and_scatter(dtype, sizes, order, op, lambda plan: _is_whole_or_l2(plan, True))
    monkeypatch.undo()


# Blocks whose rows all start on one line offset, which both L2 buffers
# would take: with rows of BLOCK_WHOLE_LINE_ROW_BYTES or more they stream
# whole (the first eight), with shorter ones they keep the buffers.
# (dtype, sizes, order, op, row bytes)
LINE_ROWS_WHOLE_OR_L2 = [
    ("float32", (6, 6, 64, 3, 32), (4, 0, 3, 2, 1), "scatter", 1536),
    ("float64", (5, 16, 2, 64, 16), (3, 4, 1, 2, 0), "gather", 2048),
    ("int16", (16, 8, 5, 16, 3, 16), (2, 3, 5, 4, 1, 0), "gather", 1920),
    ("uint8", (12, 32, 6, 24, 8), (2, 0, 3, 1, 4), "gather", 1152),
    ("uint8", (48, 16, 4, 32, 8), (1, 3, 0, 2, 4), "scatter", 1536),
    ("float64", (3, 3, 32, 64), (0, 3, 2, 1), "gather", 512),
    ("int16", (24, 6, 5, 4, 32, 4), (5, 2, 4, 1, 3, 0), "scatter", 576),
    ("uint8", (64, 3, 8, 3, 6, 48), (5, 4, 2, 1, 0, 3), "scatter", 576),
    ("float64", (48, 32, 3, 8), (3, 1, 2, 0), "scatter", 384),
    ("float32", (2, 64, 12, 64), (0, 3, 2, 1), "scatter", 256),
    ("int16", (3, 24, 2, 16, 32, 5), (4, 2, 5, 1, 3, 0), "gather", 320),
]
# ... and such blocks that no L2 buffer would take (source rows too short)
# stream their rows one by one, however long.
LINE_ROWS_IN_PLACE = [
    ("float32", (12, 16, 24, 4, 4, 4), (4, 1, 5, 2, 0, 3), "scatter", 2304),
    ("int16", (48, 48, 4, 6, 2), (1, 4, 2, 3, 0), "gather", 1536),
    ("uint8", (12, 12, 48, 12, 8), (1, 4, 0, 2, 3), "scatter", 1728),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,row", LINE_ROWS_WHOLE_OR_L2,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in LINE_ROWS_WHOLE_OR_L2])
def test_line_aligned_blocks_stream_whole_from_rows_of_a_kib(dtype, sizes, order, op, row, level, threads,
                                                            monkeypatch):
    # With streaming from 0 bytes, and the L2 buffers open to blocks that
    # stream in place (BLOCK_L2_IN_PLACE off; see the next test for them
    # with it on).
    monkeypatch.setattr(_planner, "BLOCK_L2_IN_PLACE", False)

    def check_plan(plan):
        assert plan.mode == "block" and plan.block.j_elems * plan.width == row
        assert all(stride % 64 == 0 for _, stride in plan.block.k)
        _is_whole_or_l2(plan, row >= _planner.BLOCK_WHOLE_LINE_ROW_BYTES)

    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,row", LINE_ROWS_WHOLE_OR_L2,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in LINE_ROWS_WHOLE_OR_L2])
def test_line_aligned_blocks_stream_in_place_rather_than_through_l2(dtype, sizes, order, op, row, level, threads):
    # The same blocks at the default settings (BLOCK_L2_IN_PLACE): those that
    # would go through both L2 buffers (rows under BLOCK_WHOLE_LINE_ROW_BYTES)
    # stream in place instead; rows of the bound or more stream whole.
    # Against numpy.
    def check_plan(plan):
        assert plan.mode == "block" and plan.block.j_elems * plan.width == row
        if row >= _planner.BLOCK_WHOLE_LINE_ROW_BYTES:
            _is_whole_or_l2(plan, True)
        else:
            assert plan.l2 == 0 and plan.stream and not plan.block.whole

    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


@pytest.mark.parametrize("dtype,sizes,order,op,row", LINE_ROWS_IN_PLACE,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in LINE_ROWS_IN_PLACE])
def test_line_aligned_blocks_without_l2_stream_their_rows(dtype, sizes, order, op, row, threads):
    with _stream_threshold(0):
        plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
        assert plan.mode == "block" and plan.block.j_elems * plan.width == row
        assert row >= _planner.BLOCK_WHOLE_LINE_ROW_BYTES and plan.stream
        assert not plan.block.whole and plan.l2 == 0
        check()


def test_line_aligned_blocks_stream_whole_from_the_row_bound(monkeypatch):
    dtype, sizes, order, op, row = LINE_ROWS_WHOLE_OR_L2[0]
    monkeypatch.setattr(_planner, "BLOCK_L2_IN_PLACE", False)
    with _stream_threshold(0):
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_LINE_ROW_BYTES", row)
        assert _permutation_plan_and_check(dtype, sizes, order, order, op)[0].block.whole
        monkeypatch.setattr(_planner, "BLOCK_WHOLE_LINE_ROW_BYTES", row + 1)
        plan = _permutation_plan_and_check(dtype, sizes, order, order, op)[0]
        assert not plan.block.whole and plan.l2 == 2 and plan.stream


# Rows that source order (its innermost dimension the shorter, before any
# batch) would write as more than SHORT_ROW_WRITE_STREAMS streams:
# destination order, gathered and scattered against numpy.
MANY_WRITE_STREAMS = [
    ("float16", (20, 2, 16, 3, 24), (3, 0, 2, 1, 4), "gather"),      # rows of 48 bytes
    ("float64", (12, 8, 5, 6, 5), (3, 1, 0, 2, 4), "gather"),        # 40
    ("int16", (8, 17, 11, 2, 21), (1, 3, 2, 0, 4), "scatter"),       # 42
    ("float32", (4, 12, 10, 3, 12), (1, 3, 2, 0, 4), "scatter"),     # 48
    ("float64", (10, 12, 2, 6, 6), (1, 3, 2, 0, 4), "scatter"),      # 48
    ("uint8", (2, 9, 16, 90, 44), (0, 3, 1, 2, 4), "scatter"),       # 44, 90 streams
    ("uint32", (5, 7, 17, 5, 2, 24), (4, 0, 3, 2, 1, 5), "scatter"),  # 96, 170 streams
]


@pytest.fixture
def revisit_bound_4k(monkeypatch):
    yield from _planner_setting(monkeypatch, "SHORT_ROW_REVISIT_BYTES", 4096)


@pytest.mark.parametrize("dtype,sizes,order,op", MANY_WRITE_STREAMS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in MANY_WRITE_STREAMS])
def test_rows_source_order_writes_as_many_streams_run_in_destination_order(dtype, sizes, order, op, threads):
    def check_plan(plan):
        row = plan.inner[0] * plan.width
        loops = plan.outer + ([plan.tile] if plan.tile else [])   # a batch of rows innermost
        dest = sorted(loops, key=lambda t: t[2], reverse=True)
        source = sorted(loops, key=lambda t: t[1], reverse=True)
        assert plan.mode == "memcpy" and loops == dest
        assert _planner.revisit_bytes(source, row, 2) > _planner.SHORT_ROW_WRITE_STREAMS * row

    _gather_and_scatter(dtype, sizes, order, op, check_plan)


PAIRED_ROWS = [  # (dtype, sizes, order, op): rows of 70, 80 and 114 bytes
    ("float16", (3, 3, 60, 4, 35), (1, 3, 2, 0, 4), "gather"),
    ("float16", (3, 3, 60, 4, 35), (1, 3, 2, 0, 4), "scatter"),
    ("float32", (3, 5, 60, 4, 20), (1, 3, 2, 0, 4), "scatter"),
    ("float16", (7, 5, 7, 9, 6, 57), (4, 3, 2, 1, 0, 5), "gather"),
]


@pytest.mark.parametrize("dtype,sizes,order,op", PAIRED_ROWS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in PAIRED_ROWS])
def test_rows_far_apart_in_both_orders_run_in_pairs(dtype, sizes, order, op, threads, revisit_bound_4k):
    # Short rows whose neighbours either plain order visits 4 KiB (here) or
    # more of copying apart run in destination order with the source's row
    # dimension beside the innermost; gathered and scattered against numpy.
    def check_plan(plan):
        row = plan.inner[0] * plan.width
        dest = sorted(plan.outer, key=lambda t: t[2], reverse=True)
        source = sorted(plan.outer, key=lambda t: t[1], reverse=True)
        assert plan.mode == "memcpy" and plan.tile is None
        assert min(_planner.revisit_bytes(source, row, 2), _planner.revisit_bytes(dest, row, 1)) >= 4096
        assert plan.outer[-1][2] == row and plan.outer[-2][1] == row and plan.outer != dest

    _gather_and_scatter(dtype, sizes, order, op, check_plan)


# Rows shorter than SHORT_ROW_FAR_READ_BYTES in a copy that streams, whose
# source neighbours destination order reads far apart (4 KiB here), run in
# source order where that writes their destination neighbours near (16 KiB
# here), many write streams or not (rows of 72-104 bytes).
FAR_READ_ROWS = [
    ("int16", (8, 11, 12, 2, 3, 37), (1, 2, 4, 3, 0, 5), "gather"),     # 74 bytes, 8 passes
    ("float64", (7, 6, 8, 23, 6, 9), (4, 3, 0, 1, 2, 5), "scatter"),    # 72 bytes, 138 streams
    ("uint32", (2, 2, 4, 11, 2, 21), (0, 4, 3, 2, 1, 5), "scatter"),
    ("float64", (8, 2, 14, 2, 12), (1, 3, 2, 0, 4), "gather"),
    ("float32", (14, 12, 3, 2, 13, 2), (2, 3, 1, 0, 4, 5), "scatter"),
]


@pytest.fixture(params=[True, False], ids=["small-l3", "large-l3"])
def far_reads(request, monkeypatch):
    # The rule as a small L3 has it (rows under 128 bytes) or as a large one
    # has it (off), with its distances brought down to the shapes above, in
    # copies that stream whatever their size.
    small = request.param
    monkeypatch.setattr(_planner, "SHORT_ROW_FAR_READ_BYTES", _planner.l3_bound("SHORT_ROW_FAR_READ_BYTES", small))
    monkeypatch.setattr(_planner, "SHORT_ROW_FAR_READ_APART", 4096)
    monkeypatch.setattr(_planner, "SHORT_ROW_NEAR_WRITE_APART", 16384)
    with _stream_threshold(0):
        yield small


def test_far_read_bounds_by_l3():
    assert _planner.l3_bound("SHORT_ROW_FAR_READ_BYTES", small_l3=True) == 128
    assert _planner.l3_bound("SHORT_ROW_FAR_READ_BYTES", small_l3=False) == 0


@pytest.mark.parametrize("dtype,sizes,order,op", FAR_READ_ROWS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in FAR_READ_ROWS])
def test_rows_read_far_apart_run_in_source_order(dtype, sizes, order, op, threads, far_reads):
    def check_plan(plan):
        row = plan.inner[0] * plan.width
        dest = sorted(plan.outer, key=lambda t: t[2], reverse=True)
        source = sorted(plan.outer, key=lambda t: (t[1], t[2]), reverse=True)
        assert plan.mode == "memcpy" and plan.stream and plan.tile is None and row < 128
        assert _planner.revisit_bytes(dest, row, 1) >= 4096
        assert _planner.revisit_bytes(source, row, 2) <= 16384
        assert (plan.outer == source) == far_reads
        # the rule is the planner's only reason for source order here
        assert _planner.short_rows_order(dest, row, True, far_reads=False) != source
        assert _planner.short_rows_order(dest, row, False) != source

    _gather_and_scatter(dtype, sizes, order, op, check_plan)


@pytest.fixture
def blocks_ask_ahead(monkeypatch):
    # Blocks in place ask for the next block's first tiles, and for the
    # destination lines of the tiles ahead, from 0 bytes.
    monkeypatch.setattr(_planner, "BLOCK_DST_AHEAD_MIN_TOTAL", 0)
    yield from _planner_setting(monkeypatch, "BLOCK_NEXT_MIN_TOTAL", 0)


@pytest.fixture
def blocks_ask_for_destination_lines(monkeypatch):
    # Blocks in place ask for the destination lines of the tiles ahead from 0
    # bytes (the copies below are smaller than the planner's bound).
    yield from _planner_setting(monkeypatch, "BLOCK_DST_AHEAD_MIN_TOTAL", 0)


# Blocks in place whose last tiles ask for the lines of the next block's
# first: blocks of a few tiles, of one, rows back to back, tiles four lines
# tall, sides padded to a micro-block (J or K of 8-12 one-byte values), a
# source staged through the buffer, all six widths.
NEXT_BLOCKS = [
    ("uint8", (45, 4, 3, 3, 3, 54), (3, 2, 5, 1, 0, 4), "gather"),   # 54 x 540, runs of 3 rows
    ("uint8", (13, 31, 6, 17), (1, 3, 2, 0), "scatter"),              # 78 x 17, one tile
    ("uint8", (9, 28, 2, 16, 11), (2, 1, 4, 3, 0), "gather"),         # J of 11: padded
    ("uint8", (2, 5, 33, 4, 26), (1, 2, 4, 3, 0), "gather"),          # K of 8: padded
    ("uint8", (22, 13, 33, 9), (1, 3, 0, 2), "gather"),               # J of 9, four lines tall
    ("int16", (7, 13, 23, 37), (2, 3, 1, 0), "scatter"),
    ("float16", (22, 21, 10, 39), (2, 1, 3, 0), "scatter"),           # four lines tall, ragged
    ("float32", (16, 40, 2, 2, 36), (0, 4, 1, 3, 2), "gather"),
    ("uint32", (38, 16, 20, 8), (3, 1, 2, 0), "scatter"),             # source staged
    ("float64", (7, 39, 21, 5), (3, 0, 2, 1), "gather"),
    ("float64", (3, 6, 14, 15, 5), (2, 0, 3, 4, 1), "gather"),        # K of 6
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", NEXT_BLOCKS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in NEXT_BLOCKS])
def test_blocks_in_place_ask_for_the_next_blocks_first_tiles(dtype, sizes, order, op, level, threads,
                                                            blocks_ask_ahead, tall_tiles_any_width):
    def check_plan(plan):
        assert plan.mode == "block" and plan.block.next and plan.segments == 1 and plan.tasks > 1
        assert not plan.block.whole and plan.l2 == 0 and not plan.stream

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


# Blocks in place of one- and two-byte values whose destination rows are
# 257-1024 bytes (the tiles ask for the lines of each tile ahead's rows):
# the bound's edge (1020 bytes), ragged rows, several blocks and segments.
ASKING_ROW_BLOCKS = [
    ("uint8", (39, 5, 34, 15, 4), (2, 4, 1, 3, 0), "gather"),      # rows of 1020 bytes
    ("uint8", (24, 12, 9, 33, 5), (4, 3, 0, 2, 1), "scatter"),     # 864
    ("uint8", (11, 36, 3, 35, 21), (4, 1, 3, 2, 0), "gather"),     # 735
    ("int16", (32, 19, 34, 14), (3, 0, 2, 1), "gather"),           # 952
    ("int16", (22, 9, 7, 12, 23), (0, 3, 2, 4, 1), "gather"),      # 552
    ("float16", (19, 21, 2, 40, 6), (2, 3, 4, 1, 0), "scatter"),   # 266
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", ASKING_ROW_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in ASKING_ROW_BLOCKS])
def test_blocks_in_place_with_rows_of_up_to_1_kib_ask_for_their_lines(dtype, sizes, order, op, level, threads,
                                                                      blocks_ask_for_destination_lines):
    width = np.dtype(dtype).itemsize

    def check_plan(plan):
        assert plan.mode == "block" and plan.block.lines == 1 and not plan.block.whole
        assert plan.l2 == 0 and not plan.stream and not plan.block.stage_dst
        assert 256 < plan.block.j_elems * width <= 1024

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def _main_plan(dtype, sizes, order, op):
    return _permutation_plan_and_check(dtype, sizes, order, order, op)[0]


# NHWC to NCHW gathers whose channel planes lie a multiple of 2 KiB apart
# (ALIASED_ROW_BYTES), a tile of at most ALIASED_ROWS_MAX rows.
ALIASED_PLANES = [
    ("float32", (2, 16, 16, 32), (0, 2, 3, 1), "gather"),    # planes of 2 KiB
    ("float16", (1, 24, 32, 64), (0, 2, 3, 1), "gather"),    # 4 KiB
    ("uint8", (2, 40, 64, 64), (0, 2, 3, 1), "gather"),      # 4 KiB
    ("float64", (1, 12, 16, 48), (0, 2, 3, 1), "gather"),    # 6 KiB
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", ALIASED_PLANES, ids=[f"{c[0]}-{c[1]}" for c in ALIASED_PLANES])
def test_few_rows_2_kib_apart_keep_ordinary_stores_where_streaming_them_is_slow(dtype, sizes, order, op, level,
                                                                             threads, monkeypatch):
    # On a processor of NT_ALIASED_ROWS_SLOW such tiles do not stream, from
    # any size: the gathers (and the scatters back) against numpy.
    def check_plan(plan):
        assert plan.mode == "tile" and plan.tile[0] <= _planner.ALIASED_ROWS_MAX
        assert plan.tile[2] % _planner.ALIASED_ROW_BYTES == 0 and not plan.stream

    monkeypatch.setattr(_planner, "NT_ALIASED_ROWS_SLOW", True)
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_rows_2_kib_apart_stream_elsewhere_and_past_the_bounds(monkeypatch):
    with _stream_threshold(0):
        # other processors (as the tests plan): they stream
        assert all(_main_plan(*case).stream for case in ALIASED_PLANES)
        monkeypatch.setattr(_planner, "NT_ALIASED_ROWS_SLOW", True)
        assert not any(_main_plan(*case).stream for case in ALIASED_PLANES)
        # planes of 1.5 KiB, 1 KiB past a multiple of 2 KiB: they stream
        plan = _main_plan("float32", (2, 16, 16, 24), (0, 2, 3, 1), "gather")
        assert plan.mode == "tile" and plan.tile[2] == 1536 and plan.stream
        # 24 rows, more than an ALIASED_ROWS_MAX of 16; rows 2 KiB apart, not a multiple of 4 KiB
        monkeypatch.setattr(_planner, "ALIASED_ROWS_MAX", 16)
        assert not _main_plan(*ALIASED_PLANES[0]).stream and _main_plan(*ALIASED_PLANES[1]).stream
        monkeypatch.setattr(_planner, "ALIASED_ROWS_MAX", 256)
        monkeypatch.setattr(_planner, "ALIASED_ROW_BYTES", 4096)
        assert _main_plan(*ALIASED_PLANES[0]).stream and not _main_plan(*ALIASED_PLANES[1]).stream
    # the scatters back write pixels: they stream
    monkeypatch.setattr(_planner, "ALIASED_ROW_BYTES", 2048)
    with _stream_threshold(0):
        assert all(_main_plan(d, s, o, "scatter").stream for d, s, o, _ in ALIASED_PLANES)


# Blocks whose rows would stream one by one, the first K dimension's rows
# a multiple of 2 KiB apart: (case, its rows' bytes, their spacing).
ALIASED_BLOCKS = [
    (("float32", (32, 4, 8, 8), (3, 1, 2, 0), "scatter"), 128, 4096),
    (("float64", (4, 2, 2, 16, 16), (1, 4, 0, 3, 2), "gather"), 128, 2048),
    (("int16", (16, 32, 16, 2), (2, 3, 1, 0), "gather"), 64, 2048),
    (("uint8", (16, 16, 2, 8, 8), (4, 3, 0, 2, 1), "scatter"), 512, 4096),
    (("float64", (16, 2, 16, 2, 4), (3, 1, 4, 2, 0), "gather"), 2048, 2048),
]


@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
@pytest.mark.parametrize("case,row,apart", ALIASED_BLOCKS, ids=[f"{c[0][0]}-{c[0][3]}-{c[0][1]}" for c in ALIASED_BLOCKS])
def test_blocks_of_rows_2_kib_apart_keep_ordinary_stores_where_streaming_them_is_slow(case, row, apart, level,
                                                                                    threads, monkeypatch):
    # On a processor of NT_ALIASED_ROWS_SLOW such blocks do not stream their
    # rows one by one in place, from any size (they go whole, or in place
    # with ordinary stores): the copies (and their reverses) against numpy.
    dtype, sizes, order, op = case

    def check_plan(plan):
        assert plan.mode == "block" and not _streams_rows_in_place(plan)
        assert plan.block.j_elems * plan.width == row and plan.block.k[0][1] == apart

    monkeypatch.setattr(_planner, "NT_ALIASED_ROWS_SLOW", True)
    with _stream_threshold(0), _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def _streams_rows_in_place(plan):
    return plan.stream and plan.l2 == 0 and not plan.block.whole


def test_blocks_of_rows_2_kib_apart_stream_elsewhere_and_past_the_bounds(monkeypatch):
    def streamed():
        return [_streams_rows_in_place(_main_plan(*case)) for case, _, _ in ALIASED_BLOCKS]

    with _stream_threshold(0):
        # other processors (as the tests plan): they stream their rows
        assert streamed() == [True] * 5
        monkeypatch.setattr(_planner, "NT_ALIASED_ROWS_SLOW", True)
        assert streamed() == [False] * 5
        # rows of BLOCK_ALIASED_MAX_ROW_BYTES or more stream
        monkeypatch.setattr(_planner, "BLOCK_ALIASED_MAX_ROW_BYTES", 2048)
        assert streamed() == [False] * 4 + [True]
        # rows 2 KiB apart, not a multiple of 4 KiB, stream with an ALIASED_ROW_BYTES of 4 KiB
        monkeypatch.setattr(_planner, "BLOCK_ALIASED_MAX_ROW_BYTES", 4096)
        monkeypatch.setattr(_planner, "ALIASED_ROW_BYTES", 4096)
        assert streamed() == [False, True, True, False, True]


def test_blocks_ask_for_destination_lines_ahead_from_the_size_bound(monkeypatch):
    # 48.6 MB in place: over the bound; with a last dimension of 8 rather
    # than 54, a copy of 7.2 MB, under it.
    big = ("uint8", (45, 37, 18, 10, 3, 54), (3, 2, 5, 1, 0, 4), "gather")
    small = ("uint8", (45, 37, 18, 10, 3, 8), (3, 2, 5, 1, 0, 4), "gather")
    plan = _main_plan(*big)
    assert plan.mode == "block" and plan.l2 == 0 and not plan.stream and not plan.block.whole
    assert plan.dst_bytes >= _planner.BLOCK_DST_AHEAD_MIN_TOTAL and plan.block.dst_ahead
    under = _main_plan(*small)
    assert under.mode == "block" and under.l2 == 0 and not under.stream
    assert under.dst_bytes < _planner.BLOCK_DST_AHEAD_MIN_TOTAL and not under.block.dst_ahead
    monkeypatch.setattr(_planner, "BLOCK_DST_AHEAD_MIN_TOTAL", under.dst_bytes)
    assert _main_plan(*small).block.dst_ahead
    monkeypatch.setattr(_planner, "BLOCK_DST_AHEAD_MIN_TOTAL", under.dst_bytes + 1)
    assert not _main_plan(*small).block.dst_ahead
    # The bound leaves the next block's asks alone.
    monkeypatch.setattr(_planner, "BLOCK_DST_AHEAD_MIN_TOTAL", 1 << 40)
    assert _main_plan(*big).block.next and not _main_plan(*big).block.dst_ahead


@pytest.fixture(params=[0, 1 << 40], ids=["asking", "not-asking"])
def dst_ahead_bound(request, monkeypatch):
    # Blocks ask for the destination lines of the tiles ahead from 0 bytes, or never.
    for _ in _planner_setting(monkeypatch, "BLOCK_DST_AHEAD_MIN_TOTAL", request.param):
        yield request.param


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", NEXT_BLOCKS[:6] + ASKING_ROW_BLOCKS[:3] + [LINE_ROWS_IN_PLACE[0][:4]],
                         ids=str)
def test_blocks_in_place_with_and_without_destination_asks(dtype, sizes, order, op, level, threads,
                                                           dst_ahead_bound):
    # The same blocks in place (a few tiles, padded sides, tall tiles, rows
    # of up to 1 KiB, long rows) asking for the destination lines of the
    # tiles ahead or not, gathered and scattered against numpy.
    def check_plan(plan):
        assert plan.mode == "block" and plan.l2 == 0 and not plan.stream
        assert plan.block.dst_ahead == (dst_ahead_bound == 0)

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_short_destination_pieces_follow_the_k_dimensions(monkeypatch):
    # k dimensions as (size, source stride, destination stride), rows of 12
    # bytes: five rows back to back make pieces of 60 bytes, 900 apart.
    short = [(5, 1, 12), (76, 5, 900)]
    assert _planner.short_destination_pieces(short, 12)
    # the dimension that carries a piece on may come later in the group
    assert _planner.short_destination_pieces([(76, 5, 900), (5, 1, 12)], 12)
    # pieces of 5 x 14 rows, 840 bytes, one dimension further apart
    assert not _planner.short_destination_pieces([(5, 1, 12), (3, 5, 99999), (14, 15, 60)], 12)
    # one piece of every row: nothing further apart
    assert not _planner.short_destination_pieces([(5, 1, 12), (4, 5, 60)], 12)
    # rows that follow no other row: pieces of a row each
    assert _planner.short_destination_pieces([(7, 1, 5000)], 9)
    monkeypatch.setattr(_planner, "BLOCK_DST_PIECE_ASK_BYTES", 60)
    assert _planner.short_destination_pieces(short, 12)
    monkeypatch.setattr(_planner, "BLOCK_DST_PIECE_ASK_BYTES", 59)
    assert not _planner.short_destination_pieces(short, 12)
    # A block whose rows of 160 bytes are written in place (not through the
    # tile's buffer) is not marked, short as its pieces are.
    monkeypatch.setattr(_planner, "BLOCK_DST_PIECE_ASK_BYTES", 256)
    plan = _main_plan("int16", (64, 2, 30, 62, 40), (1, 3, 2, 4, 0), "gather")
    assert plan.mode == "block" and plan.block.j_elems * plan.width == 160 and not plan.block.stage_dst
    assert _planner.short_destination_pieces([(n, 0, b) for n, b in plan.block.k], 160)
    assert plan.block.dst_ahead and not plan.block.dst_pieces


# Blocks in place whose destination rows of 9-12 one-byte values go through
# the tile's buffer into pieces of 60-72 bytes far apart (and one whose
# pieces are 630 bytes, which does not ask for them).
DST_PIECE_BLOCKS = [
    ("uint8", (6, 2, 40, 15, 76, 5), (2, 4, 3, 5, 1, 0), "scatter", True),
    ("uint8", (10, 17, 11, 145, 6), (2, 3, 1, 4, 0), "scatter", True),
    ("uint8", (7, 3, 20, 11, 6, 12), (1, 3, 2, 5, 0, 4), "gather", True),
    ("uint8", (5, 4, 9, 8, 7, 9), (0, 5, 3, 2, 4, 1), "gather", True),
    ("uint8", (20, 7, 9, 28, 5, 9), (0, 1, 5, 3, 2, 4), "gather", False),
]


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,short", DST_PIECE_BLOCKS, ids=str)
def test_blocks_through_the_destination_buffer_ask_for_short_pieces(dtype, sizes, order, op, short, level,
                                                                    threads, dst_ahead_bound):
    # Asking for the destination lines of such pieces (from 0 bytes) or not
    # (never), gathered and scattered against numpy.
    def check_plan(plan):
        assert plan.mode == "block" and plan.l2 == 0 and not plan.stream and not plan.block.whole
        assert plan.block.j_elems * plan.width < 16   # rows through the tile's buffer
        assert plan.block.dst_pieces == (short and dst_ahead_bound == 0)

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


def test_blocks_ask_for_the_next_only_in_place_or_whole_and_from_the_size_bound(monkeypatch):
    # 48.6 MB: blocks of 54 x 135 bytes, in place.
    big = ("uint8", (45, 37, 18, 10, 3, 54), (3, 2, 5, 1, 0, 4), "gather")
    plan = _main_plan(*big)
    assert plan.mode == "block" and plan.l2 == 0 and not plan.stream and not plan.block.whole
    assert plan.dst_bytes >= _planner.BLOCK_NEXT_MIN_TOTAL and plan.block.next
    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", plan.dst_bytes)
    assert _main_plan(*big).block.next
    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", plan.dst_bytes + 1)
    assert not _main_plan(*big).block.next
    monkeypatch.setattr(_planner, "BLOCK_NEXT_MIN_TOTAL", 0)
    assert all(_main_plan(*case).block.next for case in NEXT_BLOCKS)
    # J cut into segments (too few blocks for two threads): no next block
    # with the same J.
    plan = _main_plan("uint8", (34, 6, 33, 36), (3, 2, 1, 0), "gather")
    assert plan.mode == "block" and plan.segments > 1 and not plan.block.next
    # Whole blocks (J whole, one a task): yes; through L2 and streamed rows: no.
    with _stream_threshold(0):
        for case in (MANY_RUN_BLOCKS[0][:4], WHOLE_OVER_L2[0], LINE_ROWS_WHOLE_OR_L2[-1][:4],
                     LINE_ROWS_IN_PLACE[0][:4]):
            plan = _main_plan(*case)
            assert plan.mode == "block" and (plan.block.whole or plan.l2 or plan.stream)
            assert plan.block.next == (plan.block.whole and plan.segments == 1
                                       and _planner.whole_asks_ahead(_block_bytes(plan)))


# Blocks whose source runs are one micro-block row of k (16-31 one-byte
# values, 8-15 two-byte ones): with AVX2 each tile's micro-blocks go as
# pairs side by side in j, the last 16 bytes of a row of j that is an odd
# number of micro-blocks as one SSE2 micro-block, a ragged one moved back
# over the one before.  (dtype, sizes, order, op, K)
ONE_ROW_OF_K = [
    ("uint8", (15, 23, 4, 16), (3, 0, 2, 1), "gather", 23),
    ("uint8", (12, 16, 22, 24), (3, 0, 2, 1), "scatter", 24),
    ("uint8", (23, 20, 8, 9), (3, 0, 2, 1), "gather", 20),
    ("uint8", (21, 13, 16, 23), (3, 1, 2, 0), "scatter", 23),
    ("uint8", (20, 3, 18, 8, 3), (2, 4, 1, 3, 0), "gather", 20),
    ("uint8", (8, 15, 10, 22), (1, 3, 0, 2), "scatter", 22),
    ("uint8", (19, 6, 22, 14), (3, 1, 2, 0), "gather", 19),
    ("uint8", (19, 23, 3, 23), (3, 1, 0, 2), "scatter", 23),
    ("int16", (9, 14, 10, 16), (2, 0, 3, 1), "gather", 14),
    ("int16", (5, 4, 7, 12, 8), (2, 4, 0, 3, 1), "scatter", 8),
    ("int16", (13, 13, 4, 9, 5), (2, 4, 0, 3, 1), "gather", 13),
    ("int16", (19, 10, 18, 12), (1, 3, 0, 2), "scatter", 12),
    ("int16", (12, 11, 12, 18), (2, 0, 3, 1), "gather", 11),
    ("int16", (6, 2, 8, 20, 8), (2, 1, 4, 3, 0), "scatter", 8),
    ("int16", (18, 8, 5, 18), (2, 0, 3, 1), "gather", 8),
    ("int16", (6, 10, 21, 14), (1, 3, 2, 0), "scatter", 14),
]


@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op,kn", ONE_ROW_OF_K,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in ONE_ROW_OF_K])
def test_blocks_of_one_micro_block_row_of_k(dtype, sizes, order, op, kn, level, threads):
    def check_plan(plan):
        n = 16 // plan.width
        assert plan.mode == "block" and plan.l2 == 0 and plan.block.k_elems == kn
        assert n <= kn < 2 * n

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


# Shorter source runs (10-24 bytes: 5-6 int16 or float16 values, 4-6
# uint32 ones, 4-7 uint8 ones) keep their tiles or rows, though a block
# could take them (4-6 four-byte values are a block's K where the copy
# would otherwise go element by element: test_blocks_of_short_source_runs).
SHORT_K_TILES = [
    ("int16", (18, 5, 15, 4, 17), (3, 0, 2, 4, 1), "gather"),
    ("float16", (8, 13, 22, 6), (1, 3, 0, 2), "scatter"),
    ("uint8", (8, 3, 4, 13, 19), (1, 3, 0, 4, 2), "gather"),
]


@pytest.mark.parametrize("dtype,sizes,order,op", SHORT_K_TILES, ids=[c[0] for c in SHORT_K_TILES])
def test_shorter_source_runs_are_no_block(dtype, sizes, order, op, monkeypatch):
    assert _short_k_plan(dtype, sizes, order, op).mode in ("tile", "strided")
    monkeypatch.setattr(_planner, "BLOCK_SHORT_K_BYTES", 0)   # a block could
    plan = _short_k_plan(dtype, sizes, order, op)
    assert plan.mode == "block" and plan.block.k_elems < 8


@pytest.mark.parametrize("level", [0, 1, 2, 3], ids=["generic", "sse2", "ssse3", "avx2"])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("dtype,sizes,order,op,width,kn,jn", SHORT_K_BLOCKS,
                         ids=[f"{c[0]}-k{c[5]}x{c[4]}" for c in SHORT_K_BLOCKS])
def test_short_k_blocks_gather_and_scatter(dtype, sizes, order, op, width, kn, jn, level, stream, threads,
                                           k_inside_dimensions):
    # Both directions against numpy, the scatter's guard bytes and the
    # elements' gaps included (a block plan for one of them at least).  (K
    # as the search took it before K_AT_DIMENSION_BOUNDARIES, which makes
    # the uint8 scatter's K 21 values.)
    with _stream_threshold(0 if stream else 1 << 62), _isa_level(level):
        for each in ("gather", "scatter"):
            plan, check = _permutation_plan_and_check(dtype, sizes, order, order, each)
            if each == op:
                assert plan.mode == "block" and plan.block.k_elems == kn
            check()


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_one_byte_blocks_hold_four_times_the_values(dtype, threads, monkeypatch):
    # One-byte values may fill a block four times as large as wider ones, so
    # that a short K (175 values here) leaves J room for its next dimension
    # (16 x 13 values rather than 16); gather and scatter against numpy,
    # guard bytes included.  (A block of that size, not a big one as long as
    # the tables allow, which the planner takes from BLOCK_BIG_MIN_TOTAL.)
    _set_planner(monkeypatch, "BLOCK_BIG_MIN_TOTAL", 1 << 40)
    sizes, order = (35, 20, 33, 26, 16), (3, 2, 4, 1, 0)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    plan = _plan(sizes, list(desc.effective_strides), list(ds.BufferTensorDesc(dtype, sizes).effective_strides), 1)
    j = math.prod(n for n, _ in plan["block"]["j"])
    k = math.prod(n for n, _ in plan["block"]["k"])
    assert plan["mode"] == "block" and j == 16 * 13
    assert _planner.BLOCK_ELEMS < j * k <= _planner.block_elems(1)
    buf = _random_buffer(desc.total_tensor_size_in_bytes, 3)
    got = ds.gather(buf, desc)
    assert got.tobytes() == _numpy_gather(buf, desc).tobytes()
    _check_scatter(got, desc, _random_buffer(desc.total_tensor_size_in_bytes + 64, 4))


# Permutations that are one block or a few (no outer dimensions left, or short
# ones), of 0.4-2.5 MB: J is cut into segments of whole tiles (multiples of 64
# values, the last one the rest) so that two threads share the blocks; each
# segment must write its own values only.  The streamed cases have
# destination rows a whole number of lines apart, and stream from just below
# their size (not through L2, which takes blocks whole).
FEW_BLOCKS = [
    ("float32", (21, 31, 23, 41), (3, 2, 1, 0), False),
    ("uint8", (16, 16, 3, 24, 40), (4, 3, 0, 1, 2), False),
    ("float64", (19, 11, 40, 7), (3, 2, 1, 0), False),
    ("float16", (19, 3, 17, 27, 41), (4, 3, 2, 1, 0), False),
    ("uint8", (16, 16, 3, 24, 40), (4, 3, 0, 1, 2), True),
    ("float16", (7, 3, 11, 16, 48), (1, 3, 4, 0, 2), True),
    ("float32", (48, 32, 32, 13), (2, 3, 1, 0), True),
    ("float64", (19, 11, 40, 7), (3, 2, 1, 0), True),
]


@pytest.mark.parametrize("dtype,sizes,order,stream", FEW_BLOCKS,
                         ids=[f"{c[0]}-{'streamed' if c[3] else 'cached'}" for c in FEW_BLOCKS])
def test_few_blocks_are_cut_into_segments_threads_share(dtype, sizes, order, stream, threads):
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    strides = list(desc.effective_strides)
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    w = np.dtype(ds.numpy_dtype(desc.data_type)).itemsize
    with _stream_threshold(math.prod(sizes) * w + 1 if stream else 1 << 62):
        plans = [_plan(sizes, strides, packed, w), _plan(sizes, packed, strides, w)]
        cut = set()
        for plan in plans:
            assert plan["mode"] == "block" and plan["l2"] == "none"
            segments = -(-plan["inner"][0] // plan["segment"])
            assert plan["tasks"] % segments == 0      # every block in as many segments
            if segments > 1:
                cut.add(plan["stream"])
                assert plan["segment"] % 64 == 0
                # blocks * segments come to MIN_BLOCK_TASKS, but for rounding
                # a segment up to whole tiles
                blocks = plan["tasks"] // segments
                share = -(-plan["inner"][0] // -(-_planner.MIN_BLOCK_TASKS // blocks))
                assert plan["segment"] - 64 < share <= plan["segment"]
        assert stream in cut
        buf = _random_buffer(desc.total_tensor_size_in_bytes, 11)
        got = ds.gather(buf, desc)
        assert got.tobytes() == _numpy_gather(buf, desc).tobytes()
        values = _random_buffer(got.nbytes, 12).view(got.dtype).reshape(sizes)
        out = _random_buffer(desc.total_tensor_size_in_bytes, 13)
        expect = out.copy()
        _view(expect, got.dtype, sizes, strides)[...] = values
        ds.scatter(values, desc, out)
        assert out.tobytes() == expect.tobytes()


# -- streaming stores ----------------------------------------------------------------------
# Transposing copies far larger than the caches write the destination with
# non-temporal stores: whole destination rows back to back go through an L1
# tile streamed out as one run; line-aligned destination rows are written one
# 64-byte line at a time, and the columns before the first line boundary and
# after the last one, and the rows past the last whole micro-block, take the
# ordinary path.  Normally only copies of 32 MiB or more stream; the fixture
# lowers that limit so that small tensors reach every edge.


@pytest.fixture
def streaming():
    with _stream_threshold(0):
        yield


def _layout_pair(dtype, sizes, to_channels_last):
    nchw = ds.BufferTensorDesc(dtype, sizes)
    nhwc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    return (nchw, nhwc) if to_channels_last else (nhwc, nchw)


def _expected_copy(src, src_desc, dst_before, dst_desc, dst_offset):
    dt = np.dtype(ds.numpy_dtype(src_desc.data_type))
    values = np.ndarray(src_desc.sizes, dt, buffer=src,
                        strides=[s * dt.itemsize for s in src_desc.effective_strides])
    expect = np.frombuffer(bytearray(dst_before), np.uint8).copy()
    view = np.ndarray(dst_desc.sizes, dt, buffer=expect, offset=dst_offset,
                      strides=[s * dt.itemsize for s in dst_desc.effective_strides])
    view[...] = values
    return expect.tobytes()


def _check_copy_at_offsets(src, src_desc, dst_desc, offsets, slack=64):
    """copy_tensor src into random destinations of slack bytes more, at each
    of offsets that is a whole element, against _expected_copy."""
    itemsize = np.dtype(ds.numpy_dtype(src_desc.data_type)).itemsize
    for dst_offset in sorted(set(offsets)):
        if dst_offset % itemsize:
            continue
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + slack, dst_offset).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect, dst_offset


@pytest.mark.parametrize("dtype,src_skew", [
    (dtype, skew) for dtype in WIDTH_DTYPES for skew in (0, 4, 8, 16, 32, 48)
    if skew % np.dtype(ds.numpy_dtype(dtype)).itemsize == 0])
@pytest.mark.parametrize("cols,pitch", [(320, 320), (333, 384), (37, 64)])
@pytest.mark.parametrize("rows,dst_pitch", [(128, 192), (128, 128), (1024, 1024)],
                         ids=["rows-apart", "back-to-back", "long-rows"])
def test_streaming_transpose_at_every_source_line_offset(dtype, src_skew, cols, pitch, rows, dst_pitch,
                                                         streaming, threads):
    # Source rows a multiple of 64 bytes apart, all at src_skew bytes past a
    # line: the streaming transposes (destination rows apart, or back to
    # back) start their bands at the first line boundary, so that the rest
    # read whole lines.
    src_desc = ds.BufferTensorDesc(dtype, [rows, cols], [pitch, 1])
    dst_desc = ds.BufferTensorDesc(dtype, [rows, cols], [1, dst_pitch])
    plan = _engine.Plan([rows, cols], [pitch, 1], [1, dst_pitch], src_desc.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["stream"]
    src = _at_line_offset(src_desc.total_tensor_size_in_bytes, src_skew, cols + src_skew)
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + 64, rows).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, 0)
    ds.copy_tensor(src, src_desc, dst, dst_desc, check_alignment=False)
    assert bytes(dst) == expect


@pytest.mark.parametrize("dtype,src_skew", [(dtype, skew) for dtype in ("uint8", "int8", "float16", "int16")
                                            for skew in (0, 16, 48, 2, 4, 1)
                                            if skew % np.dtype(dtype).itemsize == 0])
@pytest.mark.parametrize("pitch_bytes", [1024, 2048, 4096, 5120])
@pytest.mark.parametrize("cols", [200, 333, 64, 40])
@pytest.mark.parametrize("dst_skew", [0, 32])
def test_streaming_transposes_read_rows_1_kib_apart_a_line_at_a_time(dtype, src_skew, pitch_bytes, cols, dst_skew,
                                                                    streaming, threads):
    # One- and two-byte source rows a multiple of 1 KiB apart into
    # line-aligned destination rows (whole lines streamed): each band's rows
    # are read a line at a time into scratch, from the first line boundary
    # on when the rows start 16, 32 or 48 bytes past one, from the start
    # otherwise (1, 2 or 4 bytes past), the values before and after
    # in place; the destination 32 bytes past a line leaves its first and
    # last columns to the ordinary path.  Guard bytes after the destination,
    # against numpy.
    itemsize = np.dtype(dtype).itemsize
    rows, pitch = 192, pitch_bytes // itemsize
    src_desc = ds.BufferTensorDesc(dtype, [rows, cols], [pitch, 1])
    dst_desc = ds.BufferTensorDesc(dtype, [rows, cols], [1, 256])
    plan = _engine.Plan([rows, cols], [pitch, 1], [1, 256], src_desc.element_bits).describe()
    assert plan["mode"] == "tile" and plan["stream"] and plan["l2"] == "none"
    src = _at_line_offset(src_desc.total_tensor_size_in_bytes, src_skew, cols + src_skew)
    dst = _at_line_offset(dst_desc.total_tensor_size_in_bytes + dst_skew + 64, 0, rows)
    before = dst.tobytes()
    expect = _expected_copy(src, src_desc, before, dst_desc, dst_skew)
    ds.copy_tensor(src, src_desc, dst[dst_skew:], dst_desc, check_alignment=False)
    assert dst.tobytes() == expect


# Transposes that keep a last dimension of 2-8 values (merged into values of
# 4 or 8 bytes) into a destination off those values' alignment: line-aligned
# strips cannot take them, and they went value by value; eight-byte values
# stream their lines byte-shifted (nt_shifted), narrower ones take the plain
# transpose.  Gathered into an out= array and scattered into a buffer at
# that many bytes past a line, between guard bytes, against numpy.
MERGED_OFF_ALIGNMENT = [  # (dtype, sizes, order, op, merged width, byte skews): destination rows cut in segments
    ("float32", (24, 520, 2), (1, 0, 2), "gather", 8, (4, 36)),
    ("float32", (520, 24, 2), (1, 0, 2), "scatter", 8, (4, 60)),
    ("float16", (24, 520, 4), (1, 0, 2), "gather", 8, (2, 4, 6)),
    ("uint8", (520, 24, 8), (1, 0, 2), "scatter", 8, (1, 5, 7)),
    ("uint8", (32, 1040, 4), (1, 0, 2), "gather", 4, (1, 2, 3)),
    ("int16", (3, 32, 1040, 2), (0, 2, 1, 3), "gather", 4, (2, 34)),
    ("float32", (2, 3, 24, 520, 2), (0, 1, 3, 2, 4), "gather", 8, (4,)),
]


@pytest.mark.parametrize("dtype,sizes,order,op,width,skews", MERGED_OFF_ALIGNMENT,
                         ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in MERGED_OFF_ALIGNMENT])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_merged_values_into_a_destination_off_their_alignment(dtype, sizes, order, op, width, skews, level,
                                                              streaming, threads):
    strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), order)
    dt = np.dtype(dtype)
    packed = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    pair = (strided.effective_strides, packed) if op == "gather" else (packed, strided.effective_strides)
    plan = _planner.plan_copy(list(sizes), *pair, 8 * dt.itemsize).main
    # rows of k a multiple of 64 bytes apart, cut in segments of j
    assert plan.mode == "tile" and plan.width == width and plan.stream
    assert plan.tile[2] % 64 == 0 and plan.segments > 1
    buf = _random_buffer(strided.total_tensor_size_in_bytes, sum(sizes))
    values = _numpy_gather(buf, strided)
    with _isa_level(level):
        for skew in skews:
            assert skew % width != 0
            if op == "gather":
                _check_gather_out_between_guards(buf, strided, values, skew, skew, check_alignment=False)
            else:
                target = _at_line_offset(strided.total_tensor_size_in_bytes + 128, 0, skew + 1)
                _check_scatter(values, strided, target, offset=skew, check_alignment=False)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("bands", [1, 3, 5])
@pytest.mark.parametrize("cols", [16, 37, 70])
@pytest.mark.parametrize("src_pitch", ["4k-apart", "off-lines", "packed"])
@pytest.mark.parametrize("dst_pitch", ["4k-apart", "lines", "lines-skewed", "back-to-back",
                                       "back-to-back-skewed"])
def test_streaming_transpose_in_bands_of_one_destination_line(dtype, bands, cols, src_pitch, dst_pitch,
                                                              streaming, threads):
    # Line-aligned destination rows are written one whole line per band of
    # 64 / W source rows read in place along all their columns: whole bands
    # only (1, 3 or 5 of them, not a multiple of 64 rows), a last strip of
    # micro-block rows that overlaps the one before (37 and 70 columns), source
    # rows a multiple of 4 KiB apart or off line boundaries, destination rows a
    # multiple of 4 KiB apart or of a line, or the destination 16 bytes past a
    # line (a band's first and last columns then take the ordinary path), or rows
    # back to back (pixels of whole lines, as in an NCHW to NHWC conversion, which
    # take the bands from a line boundary; off one, 4- and 8-byte values of 2 or
    # more lines a row take them from each row's first boundary, with a row's last
    # line in part and the next row's first joined into one, and the rest the
    # contiguous L1 tile).
    # Every byte of the destination buffer, guards included, against numpy.
    w = np.dtype(ds.numpy_dtype(dtype)).itemsize
    rows = bands * 64 // w
    spitch = {"4k-apart": 4096 // w * -(-cols * w // 4096), "off-lines": cols + 3, "packed": cols}[src_pitch]
    dpitch = {"4k-apart": 4096 // w, "back-to-back": rows, "back-to-back-skewed": rows}.get(
        dst_pitch, -(-rows * w // 64) * 64 // w + 64 // w)
    skew = 16 if dst_pitch.endswith("skewed") else 0
    src_desc = ds.BufferTensorDesc(dtype, [rows, cols], [spitch, 1])
    dst_desc = ds.BufferTensorDesc(dtype, [rows, cols], [1, dpitch])
    plan = _engine.Plan([rows, cols], [spitch, 1], [1, dpitch], src_desc.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["stream"]
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, rows * cols + spitch)
    dst = _at_line_offset(dst_desc.total_tensor_size_in_bytes + skew + 64, 0, dpitch)
    before = dst.tobytes()
    expect = _expected_copy(src, src_desc, before, dst_desc, skew)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=skew, check_alignment=False)
    assert dst.tobytes() == expect


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("extra_values", [0, 5, 17])
@pytest.mark.parametrize("cols", [16, 37, 300])
@pytest.mark.parametrize("pitch_extra", [1, 3, 9])
@pytest.mark.parametrize("dst_offset", [0, 4, 16])
def test_streaming_transpose_of_rows_off_line_boundaries(dtype, extra_values, cols, pitch_extra, dst_offset,
                                                         streaming, threads):
    # Destination rows of 1 KiB or more, each at its own offset from a line
    # boundary (a pitch of rows + 1, 3 or 9 values): bands of one destination
    # line are transposed into a slot per row and each row's whole lines go
    # out from there with streaming stores, the values before its first line
    # boundary and after its last whole line with ordinary stores; columns past
    # the last whole band (5 or 17 values), a second chunk of rows (300), and
    # rows past the last whole micro-block (37 columns) and destinations off a
    # whole value (4 bytes past a line for float64), which take the other paths.
    # Every byte of the destination buffer, guards included, against numpy.
    w = np.dtype(ds.numpy_dtype(dtype)).itemsize
    rows = 1024 // w + 2 * 64 // w + extra_values
    dpitch = rows + pitch_extra
    src_desc = ds.BufferTensorDesc(dtype, [rows, cols], [cols, 1])
    dst_desc = ds.BufferTensorDesc(dtype, [rows, cols], [1, dpitch])
    plan = _engine.Plan([rows, cols], [cols, 1], [1, dpitch], src_desc.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["stream"]
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, rows + cols)
    nbytes = dst_desc.total_tensor_size_in_bytes + dst_offset + 64
    raw = _random_buffer(nbytes + 64, dpitch + dst_offset)
    start = (-raw.ctypes.data) % 64
    dst = raw[start:start + nbytes]
    expect = _expected_copy(src, src_desc, dst.tobytes(), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert dst.tobytes() == expect


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("columns", [33, 45, 57])
@pytest.mark.parametrize("rows", [1000, 2049])
def test_streaming_gather_of_many_ragged_columns(dtype, columns, rows, streaming, threads):
    # A column-major matrix of 33-57 columns (no whole number of 16-byte
    # micro-blocks a row) gathered row-major with streaming stores: the
    # kernel reads bands of every column and asks for the next band ahead;
    # the last band is shorter, and the rows past the last whole group of
    # micro-blocks take the ordinary path.  Against numpy.
    desc = ds.BufferTensorDesc(dtype, [rows, columns], strides=[1, rows])
    plan = _engine.Plan([rows, columns], desc.effective_strides, [columns, 1], desc.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["stream"]
    buf = _random_buffer(desc.total_tensor_size_in_bytes, rows + columns)
    out = np.full([rows, columns], 3, ds.numpy_dtype(dtype))
    ds.gather(buf, desc, out=out)
    assert out.tobytes() == _numpy_gather(buf, desc).tobytes()


@pytest.fixture(params=[False, True], ids=["band-asks-l1", "band-asks-l2"])
def band_asks_l2(request):
    # The next band's lines asked for into L1 or into L2, whatever the
    # machine's bound (_planner.BAND_ASKS_L2), then the machine's again.
    old = _engine._set_band_asks_l2(request.param)
    assert old == bool(_planner.l3_bound("BAND_ASKS_L2", _planner.SMALL_L3))
    yield request.param
    _engine._set_band_asks_l2(old)


@pytest.mark.parametrize("dtype,c", [("float32", 32), ("float32", 64), ("float32", 129), ("float64", 64),
                                     ("int16", 64), ("uint8", 96)], ids=str)
@pytest.mark.parametrize("src_skew,dst_skew", [(0, 0), (0, 16), (16, 0), (16, 16), (0, 48)], ids=str)
def test_pixel_bands_ask_ahead_into_l1_or_l2(dtype, c, src_skew, dst_skew, band_asks_l2, streaming, threads):
    # NHWC to NCHW gathers of pixels of 32-129 channels (at most 1 KiB, a band
    # of them 2 KiB or more: the next band asked for ahead) into planes of
    # whole lines, the source and the output on a line or 16 or 48 bytes
    # past one (the bands then follow the output's lines, the source's
    # bands starting inside a page), asking into L1 and into L2, against
    # numpy, between guard bytes.
    sizes = (2, c, 24, 40)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    plan = transfer._plan(desc, "gather").describe()
    assert plan["mode"] == "tile" and plan["stream"] and plan["l2"] == "none"
    w = np.dtype(dtype).itemsize
    assert (64 // w) * c * w >= 2048 and c * w <= _planner.CLOSE_ROW_BYTES
    src = _at_line_offset(desc.total_tensor_size_in_bytes, src_skew, c + src_skew)
    expected = _numpy_gather(src, desc)
    room = _at_line_offset(expected.nbytes + 128, dst_skew, c + dst_skew + 1)
    guard = room.copy()
    out = room[64:64 + expected.nbytes].view(expected.dtype).reshape(sizes)
    assert ds.gather(src, desc, out=out, check_alignment=False) is out
    assert out.tobytes() == expected.tobytes()
    assert room[:64].tobytes() == guard[:64].tobytes()
    assert room[64 + expected.nbytes:].tobytes() == guard[64 + expected.nbytes:].tobytes()


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("to_channels_last", [True, False], ids=["to-nhwc", "to-nchw"])
@pytest.mark.parametrize("c,hw", [(16, 40), (17, 1000), (64, 129), (64, 1000), (300, 40)])
@pytest.mark.parametrize("dst_offset", [0, 16, 4, 1])
def test_streaming_transpose_edges(dtype, to_channels_last, c, hw, dst_offset, streaming, threads):
    sizes = [2, c, hw // 8 if hw % 8 == 0 else 1, 8 if hw % 8 == 0 else hw]
    src_desc, dst_desc = _layout_pair(dtype, sizes, to_channels_last)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides, src_desc.element_bits)
    assert plan.describe()["mode"] == "tile" and plan.describe()["stream"]
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, c * hw)
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, c + hw).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert bytes(dst) == expect


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("c", [5, 6, 7, 8])
@pytest.mark.parametrize("hw", [40, 129, 1000])
@pytest.mark.parametrize("dst_offset", [0, 16, 4])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_five_to_eight_channels_to_planes(dtype, c, hw, dst_offset, stream, threads):
    # 5-8 channels per pixel into planes: those that make a whole register
    # micro-block (5-8 four- or eight-byte ones, 8 two-byte ones) go through
    # the transposing tile, one-byte ones 16 bytes a pixel, 5-7 two-byte ones
    # channel by channel; streamed or not, at destination offsets off lines
    # and elements, against numpy.
    sizes = [3, c, 1, hw]
    src_desc, dst_desc = _layout_pair(dtype, sizes, False)
    old = _engine._set_stream_min_total(0 if stream else 1 << 62)
    try:
        src = _random_buffer(src_desc.total_tensor_size_in_bytes, c * hw)
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, c).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect
        assert ds.gather(src, src_desc).tobytes() == _numpy_gather(src, src_desc).tobytes()
    finally:
        _engine._set_stream_min_total(old)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("channels", [5, 7, 9, 11, 6])
@pytest.mark.parametrize("hw", [(37, 53), (19, 41)], ids=str)
def test_streamed_planes_off_lines_with_a_row_past_the_last_strip(dtype, channels, hw, streaming, threads):
    # NHWC to NCHW with streaming stores into planes off line boundaries
    # (1961 or 779 values): bands of one destination line per row, the rows
    # past the last whole micro-block strip (an odd channel count of float64
    # values, 1-3 of float32) either gathered value by value (float64) or
    # written by one more strip moved back.  Against numpy (with the gathered
    # row read one value off, the 16 float64 cases of odd channel counts fail).
    sizes = (2, channels) + hw
    src_desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    values = _random_buffer(src_desc.total_tensor_size_in_bytes, channels)
    np.testing.assert_array_equal(ds.gather(values, src_desc), _numpy_gather(values, src_desc))
    out = np.empty(sizes, dtype)
    ds.gather(values, src_desc, out=out)
    np.testing.assert_array_equal(out, _numpy_gather(values, src_desc))


@pytest.mark.parametrize("dtype", ["uint8", "float16", "int16", "uint32", "float32"])
@pytest.mark.parametrize("channels", [5, 6, 7, 13, 17, 22, 33, 36, 64])
@pytest.mark.parametrize("planes", ["off-lines", "whole-lines"])
def test_streamed_planes_with_rows_past_the_last_strip_of_every_width(dtype, channels, planes, streaming, threads):
    # NHWC to NCHW with streaming stores into planes of 5917 values (off
    # line boundaries: a slot per row, each row's lines streamed from its
    # first boundary) or 6144 (whole lines: bands of one line per plane),
    # 15520 and 15360 one-byte values (a task's piece of each plane then
    # reaches the 1 KiB these kernels take),
    # for channel counts that leave 1 to N - 1 planes past the last whole
    # micro-block strip: one more strip ends at the last plane and stores only
    # the planes past the strip before.  2-byte pixels of 36 channels (72
    # bytes) are planned through L2 and take the same kernel, as do one-byte
    # pixels of 16-64 channels (5-15 take the short-row kernel).  Against numpy
    # into a fresh output and into one filled beforehand (a plane left out
    # keeps its fill).
    hw = {"off-lines": (61, 97), "whole-lines": (64, 96)}[planes]
    if dtype == "uint8":
        hw = {"off-lines": (160, 97), "whole-lines": (160, 96)}[planes]
    sizes = (2, channels) + hw
    src_desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    values = _random_buffer(src_desc.total_tensor_size_in_bytes, channels + hw[1])
    expect = _numpy_gather(values, src_desc)
    assert ds.gather(values, src_desc).tobytes() == expect.tobytes()
    out = np.full(sizes, 7, dtype)
    ds.gather(values, src_desc, out=out)
    assert out.tobytes() == expect.tobytes()


def test_streaming_transposes_with_rows_off_lines_go_through_l2(streaming):
    # Destination rows off line boundaries (planes of 1000, 129 or 41
    # values) go through L2 with streaming stores; line-aligned rows, short
    # rows back to back (when not a whole number of micro-blocks: 256 or more
    # of them, or rows of at most 256 bytes), small channel counts and source
    # rows (pixels) of less than a line, and rows of up to 512 bytes of
    # eight-byte values, do not; nor do tasks that write one destination run
    # of at most STAGE_OVER_L2_BYTES (rows back to back), which are staged.
    def l2(dtype, c, hw, to_channels_last):
        sizes = [2, c, 1, hw]
        src_desc, dst_desc = _layout_pair(dtype, sizes, to_channels_last)
        return _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                            src_desc.element_bits).describe()["l2"]

    assert l2("float32", 64, 1000, False) == "both"      # rows of 4000 bytes
    assert l2("int16", 32, 129, False) == "none"         # pixels of 64 bytes, a run of 8256 bytes: staged
    assert l2("int16", 128, 129, False) == "both"        # pixels of 256 bytes, a run of 33 024 bytes
    assert l2("int16", 127, 129, False) == "none"        # a run of 32 766 bytes: staged
    assert l2("int16", 31, 129, False) == "none"         # pixels of 62 bytes
    assert l2("uint8", 24, 1000, False) == "none"        # pixels of 24 bytes
    assert l2("float64", 200, 41, False) == "none"       # rows of 328 bytes: eight-byte values, the cached tile
    assert l2("float64", 200, 67, False) == "both"       # rows of 536 bytes
    assert l2("float32", 200, 82, False) == "both"       # rows of 328 bytes of four-byte values
    assert l2("float64", 300, 41, False) == "none"       # 300 of them back to back: a padded tile
    assert l2("float32", 64, 49, False) == "none"        # 64 of 196 bytes back to back: the cached tile
    assert l2("int16", 60, 127, False) == "none"         # 60 of 254 bytes
    assert l2("int16", 60, 129, False) == "none"         # 60 of 258 bytes: a run of 15 480 bytes, staged
    assert l2("uint8", 12, 1000, True) == "none"         # pixels of 12 channels back to back
    assert l2("float32", 129, 1000, True) == "both"      # pixels of 516 bytes
    assert l2("float64", 300, 40, False) == "none"       # 320 bytes, back to back
    assert l2("float32", 64, 1024, False) == "none"      # rows of whole lines
    assert l2("uint8", 300, 1024, False) == "none"       # one-byte values too (bands of long segments)
    assert l2("float32", 7, 1000, False) == "none"       # few channels
    assert l2("float32", 64, 1000, True) == "none"       # rows back to back, 256 bytes


@pytest.mark.parametrize("case", [
    ("gather", (8, 130, 16, 96)), ("gather", (8, 300, 24, 64)), ("gather", (16, 77, 9, 192)),
    ("gather", (4, 200, 20, 192)),                      # NHWC to NCHW into planes of whole lines
    ("matrix", (16448, 301)), ("matrix", (17408, 200)),  # into column-major rows of whole lines
    ("scatter", (1, 640, 13, 29)), ("scatter", (2, 448, 7, 31)),    # NCHW to NHWC, planes of under 1 KiB
], ids=str)
@pytest.mark.parametrize("dst_offset", [0, 64, 17])
def test_one_byte_bands_from_close_rows_into_whole_lines(case, dst_offset, streaming, threads):
    # uint8 source rows at most 1 KiB apart into destination rows of whole
    # lines, streamed: line-aligned bands, the rows of j cut into segments
    # of 1024 values (16 bands a task; the matrices' and gathers' rows have
    # more than that, the last segment short where 1024 does not divide
    # them, and 16 tasks or more), and pixels of 448 or 640 bytes back to
    # back kept in bands where the destination starts off a line (17 bytes
    # past) rather than written as one contiguous run.  The destination at,
    # a line past and 17 bytes past its buffer's start; against numpy, guard
    # bytes around.
    op, sizes = case
    if op == "gather":
        src_desc, dst_desc = _layout_pair("uint8", list(sizes), False)
    elif op == "scatter":
        src_desc, dst_desc = _layout_pair("uint8", list(sizes), True)
    else:
        src_desc = ds.BufferTensorDesc("uint8", list(sizes))
        dst_desc = ds.BufferTensorDesc("uint8", list(sizes), strides=[1, sizes[0]])
    assert dst_desc.effective_strides[3 if op == "scatter" else 1] % 64 == 0
    plan = _engine.Plan(list(sizes), src_desc.effective_strides, dst_desc.effective_strides, 8).describe()
    assert plan["mode"] == "tile" and plan["l2"] == "none" and plan["stream"], plan
    if op != "scatter":
        assert plan["inner"][0] > 1024 and plan["segment"] == 1024, plan
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, sizes[1])
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 7).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert bytes(dst) == expect
    if op == "gather":
        nhwc = np.frombuffer(src, np.uint8, count=src_desc.total_tensor_size_in_bytes).reshape(
            sizes[0], sizes[2], sizes[3], sizes[1])
        np.testing.assert_array_equal(ds.gather(src, src_desc), nhwc.transpose(0, 3, 1, 2))



@pytest.mark.parametrize("sizes", [(2, 272, 13, 29), (1, 400, 15, 33), (1, 464, 11, 31)], ids=str)
@pytest.mark.parametrize("dst_offset", [0, 17])
def test_one_byte_pixels_off_whole_lines_stay_one_contiguous_run(sizes, dst_offset, streaming, threads):
    # NCHW to NHWC uint8 scatters from planes under 1 KiB into pixels of
    # 272-464 bytes, not whole lines: streamed as one contiguous run (the
    # one-byte bands are for pixels of whole lines only).  The destination at
    # and 17 bytes past its buffer's start; against numpy, guard bytes around.
    src_desc, dst_desc = _layout_pair("uint8", list(sizes), True)
    assert dst_desc.effective_strides[3] % 64 != 0
    plan = _engine.Plan(list(sizes), src_desc.effective_strides, dst_desc.effective_strides, 8).describe()
    assert plan["mode"] == "tile" and plan["l2"] == "none" and plan["stream"], plan
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, sizes[1])
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 7).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert bytes(dst) == expect

def test_transposes_below_the_copy_streaming_size_stream_without_l2(threads):
    # Between the transposes' streaming size (3/8 of the limit) and the limit
    # itself, a transpose with rows off lines streams from the cached tile;
    # from the limit on it goes through L2.  A 1000 x 301 float32 column-major
    # to row-major copy is 1.2 MB.
    src_desc = ds.BufferTensorDesc.from_layout("float32", [1000, 301], "WH")
    dst_desc = ds.BufferTensorDesc("float32", [1000, 301])
    nbytes = 1000 * 301 * 4
    values = _random_buffer(src_desc.total_tensor_size_in_bytes, 5)
    expect = np.frombuffer(values, np.float32).reshape(301, 1000).T
    old = _engine._set_stream_min_total(2 * nbytes)
    try:
        for limit, l2 in ((2 * nbytes, "none"), (nbytes, "both")):
            _engine._set_stream_min_total(limit)
            plan = _engine.Plan(dst_desc.sizes, src_desc.effective_strides, dst_desc.effective_strides,
                                32).describe()
            assert plan["mode"] == "tile" and plan["stream"] and plan["l2"] == l2
            out = ds.gather(values, src_desc)
            assert out.tobytes() == expect.tobytes()
    finally:
        _engine._set_stream_min_total(old)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("shape", [(300, 1001), (1001, 519), (2003, 519)], ids=str)
@pytest.mark.parametrize("dst_offset", [0, 16, 4])
def test_streaming_transpose_through_l2_in_chunks(dtype, shape, dst_offset, streaming, threads):
    # Column-major to row-major with rows off lines; 1001 or 2003 source
    # values per row do not fit the L2 buffers whole for 64-value segments of
    # rows: chunks of k, the last one short.  (Rows of 519 values are longer
    # than the padded tile of short rows back to back takes.)
    itemsize = np.dtype(dtype).itemsize
    if dst_offset % itemsize:
        dst_offset -= dst_offset % itemsize
    src_desc = ds.BufferTensorDesc(dtype, list(shape), strides=[1, shape[0]])
    dst_desc = ds.BufferTensorDesc(dtype, list(shape))
    plan = _engine.Plan(list(shape), src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    assert plan["mode"] == "tile" and plan["l2"] == "both"
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, shape[0])
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 7).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert bytes(dst) == expect


_FAR_ROWS = [(2500, 2100), (4099, 2053), (2101, 3001)]


@pytest.mark.parametrize("op, shape", [("gather", s) for s in _FAR_ROWS + [(2051, 3072)]]
                         + [("scatter", s) for s in _FAR_ROWS + [(3072, 2051)]], ids=str)
def test_one_byte_transposes_through_l2_from_far_rows(shape, op, streaming, threads):
    # uint8 source rows 2 KiB or more apart (a gather's are cols bytes apart,
    # a scatter's rows) go through L2 read where they are, chunk by chunk (the
    # next chunk's rows asked for while this one goes out); rows a multiple of
    # 1 KiB apart (3072) through the buffer.  Segments of 1024 values of j in
    # two to three chunks each, the last ones short (with a wrong row offset
    # for the chunks after the first, 5 of the 16 fail).  Gather and scatter
    # against numpy, guard bytes around a scatter's column-major destination.
    rows, cols = shape
    colmajor = ds.BufferTensorDesc("uint8", [cols, rows], strides=[1, cols])
    plan_desc = ((colmajor.sizes, colmajor.effective_strides, [rows, 1]) if op == "gather"
                 else (colmajor.sizes, [rows, 1], colmajor.effective_strides))
    plan = _engine.Plan(*plan_desc, 8).describe()
    assert plan["mode"] == "tile" and plan["l2"] == "both" and plan["stream"]
    values = _random_buffer(colmajor.total_tensor_size_in_bytes, rows)   # (rounded up to 4 bytes)
    matrix = values[:rows * cols].reshape(rows, cols)          # the column-major tensor's bytes
    if op == "gather":
        np.testing.assert_array_equal(ds.gather(values, colmajor), matrix.T)
    else:
        packed = np.ascontiguousarray(_random_buffer(rows * cols, cols).reshape(cols, rows))
        before = _random_buffer(rows * cols + 128, 3)
        dst = bytearray(before.tobytes())
        ds.scatter(packed, colmajor, dst, offset=64)
        got = np.frombuffer(bytes(dst), np.uint8)
        np.testing.assert_array_equal(got[64:-64].reshape(rows, cols), packed.T)
        np.testing.assert_array_equal(got[:64], before[:64])
        np.testing.assert_array_equal(got[-64:], before[-64:])


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("shape", [(1001, 63), (2003, 45), (4001, 9), (300, 11), (257, 17)], ids=str)
@pytest.mark.parametrize("dst_offset", [0, 16, 4])
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
def test_short_ragged_rows_back_to_back_through_a_padded_tile(dtype, shape, dst_offset, stream, threads):
    # Column-major to row-major with destination rows of up to 512 bytes that
    # are not a whole number of 16-byte micro-blocks (fewer than one
    # included), 256 rows or more: transposed through a padded tile and
    # written as one run, with ordinary or streaming stores, the rows left
    # after the last micro-block element by element.  Guard bytes around the
    # destination, against numpy.
    itemsize = np.dtype(dtype).itemsize
    dst_offset -= dst_offset % itemsize
    src_desc = ds.BufferTensorDesc(dtype, list(shape), strides=[1, shape[0]])
    dst_desc = ds.BufferTensorDesc(dtype, list(shape))
    old = _engine._set_stream_min_total(0 if stream else 1 << 62)
    try:
        plan = _engine.Plan(list(shape), src_desc.effective_strides, dst_desc.effective_strides,
                            src_desc.element_bits).describe()
        assert plan["mode"] == "tile" and plan["l2"] == "none" and plan["stream"] == stream
        src = _random_buffer(src_desc.total_tensor_size_in_bytes, shape[1])
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 5).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect
    finally:
        _engine._set_stream_min_total(old)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streaming_gather_into_fresh_and_reused_outputs(dtype, streaming, threads):
    # Outputs of 1 MiB and more come from the output cache: the first is new
    # memory (ordinary stores), the second a reused block (streaming stores).
    itemsize = np.dtype(dtype).itemsize
    sizes = [1, 64, 16, (1 << 20) // (64 * 16 * itemsize) + 8]
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    src = _random_buffer(desc.total_tensor_size_in_bytes, itemsize)
    expect = _numpy_gather(src, desc)
    assert ds.gather(src, desc).tobytes() == expect.tobytes()
    assert ds.gather(src, desc).tobytes() == expect.tobytes()


def test_streaming_limit_applies_to_plans_made_afterwards():
    # Transposes of four-byte values stream from 1/16 of the limit
    # (TILE_STREAM_WIDE_SIXTEENTHS); contiguous copies from the limit, or
    # from 10/8 of it counting the bytes read and written.
    sizes = [1, 64, 4, 64]
    nbytes = 64 * 4 * 64 * 4
    src_desc, dst_desc = _layout_pair("float32", sizes, True)
    packed = ds.BufferTensorDesc("float32", sizes).effective_strides

    def streams(transpose=True):
        dst = dst_desc.effective_strides if transpose else packed
        plan = _engine.Plan(sizes, packed, dst, 32)
        assert plan.describe()["mode"] == ("tile" if transpose else "memcpy")
        return plan.describe()["stream"]

    assert not streams() and not streams(False)
    old = _engine._set_stream_min_total(nbytes)
    try:
        assert streams() and streams(False)
        _engine._set_stream_min_total(nbytes * 8 // 5)      # 10/8 of it: 2 * nbytes - 1
        assert streams() and streams(False)
        _engine._set_stream_min_total(nbytes * 8 // 5 + 8)  # 10/8 of it: 2 * nbytes + 8
        assert streams() and not streams(False)
        _engine._set_stream_min_total(nbytes * 16)          # 1/16 of it: nbytes
        assert streams()
        _engine._set_stream_min_total(nbytes * 16 + 16)     # 1/16 of it: nbytes + 1
        assert not streams()
        with pytest.raises(ValueError):
            _engine._set_stream_min_total(-1)
    finally:
        _engine._set_stream_min_total(old)


@pytest.mark.parametrize("dtype,sizes,order,op,early", [
    # planes into pixels (NCHW to NHWC scatters): long tasks
    ("float32", (2, 4, 30, 41), "NHWC", "scatter", True),
    ("float64", (1, 5, 17, 23), "NHWC", "scatter", True),
    ("uint32", (2, 3, 64, 32), "NHWC", "scatter", True),
    ("int16", (2, 4, 30, 41), "NHWC", "scatter", False),
    ("float16", (1, 6, 40, 40), "NHWC", "scatter", False),
    ("uint8", (2, 3, 64, 64), "NHWC", "scatter", True),       # tasks of 12288 bytes
    ("uint8", (5, 3, 2, 3, 90, 84), (4, 2, 0, 3, 5, 1), "scatter", False),  # ... of 252
    # tasks under 256 bytes: of 84 and 128 bytes, each going on from the
    # one before's in runs of 9 and 7; of 120 bytes in runs of 2; of 200
    # bytes whose next task's destination lies 120 bytes on
    ("float32", (47, 9, 9, 3, 7), (4, 2, 0, 1, 3), "gather", True),
    ("uint32", (14, 4, 7, 8, 2, 2), (1, 0, 2, 4, 3, 5), "gather", True),
    ("float32", (2, 13, 3, 5, 47, 10), (4, 3, 1, 0, 5, 2), "scatter", False),
    ("float64", (8, 37, 3, 3, 5, 5), (1, 5, 0, 3, 2, 4), "gather", False),
], ids=str)
def test_interleaves_stream_from_a_quarter_of_the_threshold(dtype, sizes, order, op, early):
    # Interleaving copies of four- and eight-byte values, and of one-byte
    # values in tasks of 4 KiB or more, stream from 2/8 of the threshold;
    # two-byte values and shorter one-byte tasks from all of it; tasks of
    # four- and eight-byte values under 256 bytes only where each task's
    # destination goes on from the one before's, four or more in a run (the
    # executor joins those); of the others, those whose planes' rows go on
    # in the source (the last two here) are joined along it instead, and do
    # not stream at all.  Streamed or not, against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = ds.BufferTensorDesc(dtype, sizes)
    src, dst = (packed, desc) if op == "scatter" else (desc, packed)
    nbytes = packed.total_tensor_size_in_bytes
    dt = np.dtype(dtype)

    def plan():
        d = _engine.Plan(list(sizes), src.effective_strides, dst.effective_strides, 8 * dt.itemsize).describe()
        assert d["mode"] == "interleave"
        return d

    p = plan()
    w = p["width"]   # (two uint32 values a pixel may move as one of 8 bytes)
    task = p["inner"][0] * p["tile"][0] * w
    assert (task < 256) is (len(sizes) > 4)   # the short tasks are those of the 5-D and 6-D cases
    old = _engine._set_stream_min_total(4 * nbytes)              # a quarter of it: nbytes
    try:
        assert plan()["stream"] is early
        if early:
            _engine._set_stream_min_total(4 * nbytes + 8)          # a quarter of it: nbytes + 2
            assert not plan()["stream"]
        _engine._set_stream_min_total(nbytes)
        joined = _planner.interleave_pixels_join(_main_plan(dtype, sizes, order, op))
        assert joined is (sizes in ((2, 13, 3, 5, 47, 10), (8, 37, 3, 3, 5, 5)))
        assert plan()["stream"] is not joined
        for limit in (4 * nbytes, nbytes):
            _engine._set_stream_min_total(limit)
            if op == "gather":
                buf = _random_buffer(desc.total_tensor_size_in_bytes, sum(sizes))
                assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()
            else:
                values = _random_buffer(nbytes, sum(sizes)).view(dt).reshape(sizes)
                out = _at_line_offset(desc.total_tensor_size_in_bytes + 64 + 64, 0, 5)
                _check_scatter(values, desc, out, offset=64 + dt.itemsize, check_alignment=False)
    finally:
        _engine._set_stream_min_total(old)


# A copy that reads its source again (broadcast along H or C) streams from
# the streaming size like any copy, but for rows of at most
# BROADCAST_PLAIN_ROW_BYTES, which keep ordinary stores: 4 KiB with a small
# L3, none with a large one (_planner.L3_BOUNDS).  Each way the bytes are
# numpy's broadcast, at both thread counts.
@pytest.mark.parametrize("plain", [0, 4096])
def test_broadcast_rows_stream_past_the_machine_bound(plain, monkeypatch, threads):
    monkeypatch.setattr(_planner, "BROADCAST_PLAIN_ROW_BYTES", plain)
    assert _planner.l3_bound("BROADCAST_PLAIN_ROW_BYTES", small_l3=True) == 4096
    assert _planner.l3_bound("BROADCAST_PLAIN_ROW_BYTES", small_l3=False) == 0
    rng = np.random.default_rng(plain + threads)
    for dtype, sizes, axis in (("float32", (3, 5, 7, 180), 2), ("int16", (4, 6, 3, 1001), 2),
                               ("uint8", (2, 3, 5, 4096), 2), ("float64", (5, 3, 2, 700), 0)):
        w = np.dtype(dtype).itemsize
        row = int(np.prod(sizes[axis + 1:])) * w   # the dimensions after the broadcast one, merged
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW", broadcast=[a == axis for a in range(4)])
        packed = ds.BufferTensorDesc(dtype, sizes).effective_strides
        with _stream_threshold(0):
            plan = _engine.Plan(sizes, desc.effective_strides, packed, 8 * w).describe()
            assert plan["mode"] == "memcpy" and plan["stream"] == (row > plain), (sizes, plan)
            src = rng.integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
            for skew in (0, 24):
                out = _at_line_offset(int(np.prod(sizes)) * w, skew, skew + 3).view(dtype).reshape(sizes)
                ds.gather(src, desc, out=out)
                np.testing.assert_array_equal(out, _numpy_gather(src, desc))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_streaming_counts_source_bytes_once(axis):
    # A copy whose source is broadcast along a dimension (of 2 here) reads
    # its bytes again; only distinct ones count towards 10/8 of the limit
    # (its rows past BROADCAST_PLAIN_ROW_BYTES, 4 KiB with a small L3, below
    # which rows never stream).  A fill (broadcast along the innermost dimension) never
    # streams.
    sizes = [64, 64, 64 if axis == 2 else 1100]
    sizes[axis] = 2
    nbytes = int(np.prod(sizes)) * 4
    packed = ds.BufferTensorDesc("float32", sizes).effective_strides
    source = list(packed)
    source[axis] = 0
    # Distinct bytes read; a fill counts only what it writes.
    footprint = nbytes if axis == 2 else nbytes + nbytes // 2

    def streams(strides):
        return _engine.Plan(sizes, strides, packed, 32).describe()["stream"]

    assert _engine.Plan(sizes, source, packed, 32).describe()["mode"] == ("fill" if axis == 2 else "memcpy")
    old = _engine._set_stream_min_total(nbytes * 2 * 8 // 10)  # 10/8 of it: 2 * nbytes - 1
    try:
        assert streams(packed) and not streams(source)
        _engine._set_stream_min_total(max(footprint * 8 // 10, nbytes + 1))
        assert streams(packed) and streams(source) == (axis != 2)
        _engine._set_stream_min_total(max(footprint * 8 // 10 + 8, nbytes + 1))
        assert streams(packed) and not streams(source)
        _engine._set_stream_min_total(nbytes)
        assert streams(packed) and streams(source) == (axis != 2)
        _engine._set_stream_min_total(0)
        assert streams(packed) and streams(source) == (axis != 2)
    finally:
        _engine._set_stream_min_total(old)


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("name,sizes,spec,gather_block,scatter_block", BLOCK_CASES,
                         ids=[c[0] for c in BLOCK_CASES])
@pytest.mark.parametrize("dst_offset", [0, 16, 4])
def test_streaming_block_transpose(dtype, name, sizes, spec, gather_block, scatter_block, dst_offset,
                                   streaming, threads):
    _check_block_case_copies(dtype, name, sizes, spec, dst_offset)


def _check_block_case_copies(dtype, name, sizes, spec, dst_offset):
    """Copy a block case strided -> packed and packed -> strided, against numpy."""
    strided, _ = _block_desc(dtype, sizes, spec)
    packed = ds.BufferTensorDesc(dtype, sizes)
    pairs = [(strided, packed)]
    if name != "broadcast_outer":  # an overlapping destination cannot be written
        pairs.append((packed, strided))
    for src_desc, dst_desc in pairs:
        src = _random_buffer(src_desc.total_tensor_size_in_bytes, len(name))
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 3).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect


def test_streaming_block_cases_reach_every_width(streaming):
    # Streamed block plans need destination rows a whole number of lines
    # apart; the cases above include such layouts for every element width.
    widths = set()
    for _, w, _, scatter_plan in _block_case_plans():
        if scatter_plan["mode"] == "block" and scatter_plan["stream"]:
            widths.add(w)
    assert widths == {1, 2, 4, 8}


def test_streaming_block_cases_reach_every_l2_mode(streaming, no_whole_blocks, monkeypatch):
    # Past the streaming limit, long source rows with long or line-aligned
    # destination rows go through two L2 buffers (both); with
    # BLOCK_L2_SOURCE_ONLY, long source rows alone go through the first
    # (source), which is otherwise never planned.  The cases above reach
    # each, with and without streaming (blocks that would stream whole
    # instead kept out).
    seen = _block_l2_modes_seen()
    assert seen >= {("none", False), ("none", True), ("both", True)}
    assert not any(mode == "source" for mode, _ in seen) and ("both", False) not in seen
    monkeypatch.setattr(_planner, "BLOCK_L2_SOURCE_ONLY", True)
    seen = _block_l2_modes_seen()
    assert seen >= {("none", False), ("none", True), ("source", False), ("both", True)}
    assert ("source", True) not in seen and ("both", False) not in seen


def _set_planner(monkeypatch, name, value):
    """Set the planner's setting ``name`` to ``value`` for a test; plans made before are dropped."""
    monkeypatch.setattr(_planner, name, value)
    monkeypatch.setattr(transfer, "_plans", {})


def _lower_limit(monkeypatch, name):
    """Set the planner's size limit ``name`` to 0 for a test (_set_planner)."""
    _set_planner(monkeypatch, name, 0)


@pytest.fixture
def l2_without_streaming(monkeypatch):
    # Blocks go through L2 from a lower size than the one streaming starts
    # at (source and destination together past the L3); let every block
    # case go through L2 with ordinary stores.
    _lower_limit(monkeypatch, "BLOCK_L2_MIN_TOTAL")
    yield


def _block_l2_modes_seen():
    """(L2 mode, streams) of every block plan among the block cases."""
    return {(plan["l2"], plan["stream"]) for _, _, gather_plan, scatter_plan in _block_case_plans()
            for plan in (gather_plan, scatter_plan) if plan["mode"] == "block"}


def test_block_cases_reach_l2_modes_without_streaming(l2_without_streaming, monkeypatch):
    seen = _block_l2_modes_seen()
    assert ("both", False) in seen and not any(mode == "source" for mode, _ in seen)
    assert not any(stream for _, stream in seen)
    monkeypatch.setattr(_planner, "BLOCK_L2_SOURCE_ONLY", True)
    seen = _block_l2_modes_seen()
    assert {("source", False), ("both", False)} <= seen
    assert not any(stream for _, stream in seen)


# Every block case through L2 with ordinary stores (BLOCK_L2_MIN_TOTAL), and
# as a big block transposed in place (BLOCK_BIG_MIN_TOTAL: from a few MiB,
# blocks take both groups as long as the tables allow, and below the L2 size
# they are transposed without the L2 buffers).
@pytest.mark.parametrize("limit", ["BLOCK_L2_MIN_TOTAL", "BLOCK_L2_SOURCE_ONLY", "BLOCK_BIG_MIN_TOTAL"],
                         ids=["l2_without_streaming", "l2_source_only", "big_blocks_in_place"])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("name,sizes,spec,gather_block,scatter_block", BLOCK_CASES,
                         ids=[c[0] for c in BLOCK_CASES])
def test_block_transpose_at_lowered_limits(dtype, name, sizes, spec, gather_block, scatter_block, limit,
                                           monkeypatch, threads):
    # (l2_source_only: through L2 as above, and the source buffer alone
    # where only the source rows are long enough for the buffers)
    if limit == "BLOCK_L2_SOURCE_ONLY":
        _set_planner(monkeypatch, "BLOCK_L2_SOURCE_ONLY", True)
        limit = "BLOCK_L2_MIN_TOTAL"
    _lower_limit(monkeypatch, limit)
    _check_block_case_copies(dtype, name, sizes, spec, 16)


def _block_elems():
    """Elements per block of every block plan among the block cases."""
    return [plan["inner"][0] * math.prod(n for n, _ in plan["block"]["k"]) if plan["mode"] == "block" else 0
            for _, _, gather_plan, scatter_plan in _block_case_plans() for plan in (gather_plan, scatter_plan)]


def test_block_cases_take_big_blocks_in_place(monkeypatch):
    # Big blocks are never smaller, some are larger, and none goes through L2.
    small = _block_elems()
    monkeypatch.setattr(_planner, "BLOCK_BIG_MIN_TOTAL", 0)
    big = _block_elems()
    assert all(b >= a for a, b in zip(small, big)) and any(b > a for a, b in zip(small, big))
    assert all(plan["l2"] == "none" for _, _, gather_plan, scatter_plan in _block_case_plans()
               for plan in (gather_plan, scatter_plan))


@pytest.mark.parametrize("dtype,sizes,order", [("int16", (121, 65, 110, 14), (3, 1, 2, 0)),
                                                ("float16", (130, 20, 6, 121, 6), (0, 4, 3, 2, 1))])
def test_two_byte_blocks_with_twice_the_room(dtype, sizes, order, threads):
    # Two-byte permutations of 21-23 MiB whose blocks take room for twice
    # block_elems values (BLOCK_GROW_MIN_TOTAL): gathered and scattered
    # against numpy.
    for op in ("gather", "scatter"):
        plan = _main_plan(dtype, sizes, order, op)
        assert plan.mode == "block"
        assert _planner.block_elems(2) < plan.block.j_elems * plan.block.k_elems <= 2 * _planner.block_elems(2)
    desc = ds.BufferTensorDesc.from_layout(dtype, list(sizes), list(order))
    _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


def test_a_mid_size_permutation_takes_a_big_block_in_place(threads):
    # 6.4 MB of uint8 in a scrambled 5-D order, at the default limits: big
    # enough for a big block (dimensions 17, 29, 31 and 23 do not split, so
    # a block within one L2 would leave one side 29 or 31 long), small
    # enough for source and destination to stay in L3: no L2 buffers.
    sizes, order = (23, 19, 29, 31, 17), (4, 1, 3, 0, 2)
    values = np.random.default_rng(7).integers(0, 256, sizes, dtype=np.uint8)
    view = values.transpose(order)
    desc = ds.BufferTensorDesc("uint8", list(view.shape), list(view.strides))
    packed = ds.BufferTensorDesc("uint8", desc.sizes).effective_strides
    for plan in (_engine.Plan(desc.sizes, desc.effective_strides, packed, 8).describe(),
                 _engine.Plan(desc.sizes, packed, desc.effective_strides, 8).describe()):
        assert plan["mode"] == "block" and plan["l2"] == "none"
        assert min(plan["inner"][0], math.prod(n for n, _ in plan["block"]["k"])) > 256
    buffer = np.zeros(desc.total_tensor_size_in_bytes, np.uint8)   # rounded up to 4 bytes
    buffer[:values.size] = values.reshape(-1)
    np.testing.assert_array_equal(ds.gather(buffer, desc), view)
    back = np.ones_like(buffer)
    ds.scatter(np.ascontiguousarray(view), desc, back)
    np.testing.assert_array_equal(back[:values.size], values.reshape(-1))


def test_a_big_block_in_place_takes_destination_runs_under_four_lines(threads):
    # 6.2 MB of float16, (37, 31, 29, 97) in order (3, 1, 2, 0): a big block
    # of J = 97 values (194-byte destination runs) by K = 31 x 37 values
    # contiguous in the source, transposed in place.  Past the L2 limit
    # (lowered here), where a big block goes through the L2 buffers and needs
    # destination runs of 256 bytes or whole lines, it is a tile of 37-value
    # source rows instead.  Both copy as numpy does.
    sizes, order = (37, 31, 29, 97), (3, 1, 2, 0)
    desc = ds.BufferTensorDesc.from_layout("float16", sizes, order)
    packed = ds.BufferTensorDesc("float16", sizes).effective_strides
    buf = _random_buffer(desc.total_tensor_size_in_bytes, 8)   # rounded up to 4 bytes
    view = np.ndarray(sizes, np.float16, buffer=buf, strides=[2 * s for s in desc.effective_strides])
    for limit, mode in ((None, "block"), (1 << 20, "tile")):
        with _stream_threshold(limit) if limit else contextlib.nullcontext():
            plan = _engine.Plan(desc.sizes, desc.effective_strides, packed, 16).describe()
            assert plan["mode"] == mode
            if mode == "block":
                assert plan["l2"] == "none" and plan["block"]["j"] == [(97, 2 * 31 * 29 * 37)]  # bytes
                assert sorted(n for n, _ in plan["block"]["k"]) == [31, 37]
            got = ds.gather(buf, desc)
            assert got.tobytes() == np.ascontiguousarray(view).tobytes()
            back = np.zeros_like(buf)
            ds.scatter(got, desc, back)
            assert back[:-2].tobytes() == buf[:-2].tobytes() and not back[-2:].any()


# Permutations that swap two short dimensions: a transpose of a few hundred
# bytes per task, copied element by element (execute.c, tiny_tiles) unless
# most of it is whole register micro-blocks; 16 x 8 is all micro-blocks for
# two- to eight-byte values and none for one-byte ones (16 x 16).
TINY_TILE_CASES = [((3, 4, 5, 5, 13), (0, 1, 2, 4, 3)), ((2, 3, 4, 2, 15, 7), (3, 5, 1, 0, 2, 4)),
                   ((3, 5, 4, 9, 33), (0, 2, 1, 4, 3)), ((4, 3, 16, 8), (0, 1, 3, 2)),
                   ((3, 4, 5, 9), (0, 1, 3, 2))]


def _tiny_tile_kinds(dtype):
    """For each tiny tile case, gather and scatter: None when the plan is not
    a tile of at most 512 bytes, else whether at most three quarters of it
    are whole micro-blocks (the element-by-element path)."""
    w = np.dtype(dtype).itemsize
    n = 16 // w
    kinds = []
    for sizes, order in TINY_TILE_CASES:
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
        packed = ds.BufferTensorDesc(dtype, sizes).effective_strides
        for src, dst in ((desc.effective_strides, packed), (packed, desc.effective_strides)):
            plan = _engine.Plan(sizes, src, dst, 8 * w).describe()
            if plan["mode"] != "tile" or plan["tile"][0] * plan["inner"][0] * w > 512:
                kinds.append(None)
                continue
            kn, jn = plan["tile"][0], plan["inner"][0]
            kinds.append((kn - kn % n) * (jn - jn % n) * 4 <= kn * jn * 3)
    return kinds


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_tiny_tile_cases_reach_both_paths(dtype):
    # Every width has tiles copied element by element; two-byte values also
    # a tiny tile that stays with the micro-blocks.
    kinds = _tiny_tile_kinds(dtype)
    assert True in kinds
    if dtype == "float16":
        assert False in kinds


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("sizes,order", TINY_TILE_CASES, ids=[str(c[0]) for c in TINY_TILE_CASES])
def test_transposes_of_tiny_tiles(sizes, order, dtype, threads):
    _check_permuted_round_trip(dtype, sizes, order, seed=5)


# Tiles whose rows are 8 to 64 bytes on both sides go through two stages in
# L1 (tile-tiny.c; for one-byte values only tiny ones): every row length at
# the edges of a register micro-block and of a stage row, and one value
# past either end, each way round.
def _staged_tile_lengths(dtype):
    w = np.dtype(dtype).itemsize
    edges = {8, 9, 15, 16, 17, 24, 31, 32, 33, 63, 64}
    return sorted({b // w for b in edges if b // w * w >= 8} | {8 // w - 1, 64 // w + 1} - {0})


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_staged_tiles_of_every_row_length(dtype, threads):
    lengths = _staged_tile_lengths(dtype)
    w = np.dtype(dtype).itemsize
    for a in lengths:
        for b in lengths:
            sizes, order = (3, 2, a, b), (1, 0, 3, 2)
            if a >= 8 and b >= 8 and a * w <= 64 and b * w <= 64 and not (w == 1 and b == 8 and a >= 16):
                # (fewer than 8 values a side may be an interleave instead, and
                # 8 one-byte ones beside 16 or more are)
                plan = _permuted_plans(dtype, sizes, order)[1]   # the scatter: a values of k, b of j
                assert plan["mode"] == "tile" and (plan["tile"][0], plan["inner"][0]) == (a, b)
            _check_permuted_round_trip(dtype, sizes, order, seed=a * 100 + b)


@pytest.mark.parametrize("dtype", ["int16", "float16"])
@pytest.mark.parametrize("jn", [8, 9, 15, 16, 17, 31, 33, 64, 65, 200])
@pytest.mark.parametrize("gap", [0, 3])
def test_tiles_of_four_two_byte_values_a_row(dtype, jn, gap, threads):
    # A (2, 0, 3, 1) permutation of (3, 4, 13, jn): tiles of 4 two-byte
    # values a source row (8 bytes) by jn rows, one a task, which take a
    # word kernel of their own (eight rows at a time, the last eight ending
    # at jn); the source rows back to back or 3 values apart.  Gather
    # against numpy; a scatter leaves every byte outside the elements as it
    # was.
    rng = np.random.default_rng(jn * 10 + gap)
    sizes = (3, 4, 13, jn)
    row = 4 + gap                          # memory order H, N, W, C
    desc = ds.BufferTensorDesc(dtype, list(sizes), [row * jn, 1, row * jn * 3, row])
    plan = transfer._plan(desc, "gather").describe()
    assert plan["mode"] == "tile" and plan["tile"][:2] == (4, 2)
    assert plan["inner"] == (jn, 2 * row, 2) and plan["segment"] == jn
    _check_gather_and_scatter(desc, rng)


def test_staged_tiles_with_source_rows_apart():
    # Source rows of a tile with a gap after each (the row's values are
    # contiguous, the rows are not): staged as well, and a tile whose values
    # are not contiguous in the source goes element by element.
    rng = np.random.default_rng(8)
    for dtype in WIDTH_DTYPES:
        w = np.dtype(dtype).itemsize
        for a, b in ((16 // w, 24 // w), (40 // w, 12 // w), (9, 13)):
            if a * w > 64 or b * w > 64:
                continue
            for gap, step in ((3, 1), (0, 2)):
                sizes = (4, b, a)
                strides = [b * (a * step + gap) + 5, a * step + gap, step]   # elements
                tdesc = ds.BufferTensorDesc(dtype, [4, a, b], [strides[0], strides[2], strides[1]])
                buf = rng.integers(0, 256, tdesc.total_tensor_size_in_bytes, dtype=np.uint8)
                view = np.ndarray(sizes, dtype, buffer=buf, strides=[x * w for x in strides])
                t = np.swapaxes(view, 1, 2)
                got = ds.gather(buf, tdesc)
                assert got.tobytes() == np.ascontiguousarray(t).tobytes()
                back = np.zeros_like(buf)
                ds.scatter(got, tdesc, back)
                mask = np.zeros(buf.size // w, bool)
                mask[np.add.outer(np.add.outer(np.arange(4) * strides[0], np.arange(b) * strides[1]),
                                  np.arange(a) * step).ravel()] = True
                byte_mask = np.repeat(mask, w)
                byte_mask = np.concatenate([byte_mask, np.zeros(buf.size - byte_mask.size, bool)])
                assert back[byte_mask].tobytes() == buf[byte_mask].tobytes()
                assert not back[~byte_mask].any()


@contextlib.contextmanager
def _ask_rows_from(nbytes):
    # Single short rows ask for the rows ahead in copies of nbytes or more.
    old = _engine._set_ask_rows_min(nbytes)
    try:
        yield
    finally:
        _engine._set_ask_rows_min(old)


# Short contiguous rows not back to back on a side (a permutation that keeps
# a last dimension of 16-512 bytes): the lines of the rows a few tasks on are
# asked for first (execute.c), single rows in copies of 5.5 MiB or more (here
# from 0 bytes, and not at all) and batches of rows up to 64 bytes; fewer
# tasks than that distance, as many, and many more.
@pytest.mark.parametrize("ask_from", [0, None])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_short_rows_apart_at_every_task_count(dtype, ask_from, threads):
    with _ask_rows_from(ask_from if ask_from is not None else 1 << 62):
        _check_short_rows_apart(dtype)


def test_short_rows_ask_ahead_from_5_5_mib():
    assert _engine._set_ask_rows_min(0) == 11 << 19
    assert _engine._set_ask_rows_min(11 << 19) == 0
    with pytest.raises(ValueError):
        _engine._set_ask_rows_min(-1)


def _check_short_rows_apart(dtype):
    w = np.dtype(dtype).itemsize
    batched = single = 0
    for row_bytes in (16, 24, 33, 40, 56, 64, 72, 96, 200, 512):
        n = row_bytes // w
        for sizes, order in (((2, 3, n), (1, 0, 2)), ((4, 5, n), (1, 0, 2)), ((17, 3, n), (1, 0, 2)),
                             ((9, 31, n), (1, 0, 2)), ((3, 17, 5, n), (2, 0, 1, 3)),
                             ((5, 3, 40, n), (1, 2, 0, 3))):
            for to_packed in (True, False):
                plan = _permuted_plans(dtype, sizes, order)[0 if to_packed else 1]
                if plan["mode"] == "memcpy" and plan["inner"][0] * w == row_bytes:
                    batched += plan["tile"] is not None
                    single += plan["tile"] is None
            _check_permuted_round_trip(dtype, sizes, order, seed=row_bytes)
    assert batched > 0 and single > 0


# Streamed rows of 512 bytes to 4 KiB, and of 128-511 bytes back to back in
# the destination (a permutation that keeps a last dimension of that many
# bytes, in a copy that streams): rows back to back in the destination are
# written as one run of whole lines, the line a row ends in held and streamed
# with the next row's first bytes; rows of every length around a line,
# destination rows back to back and not, one row a task range and many.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_rows_as_whole_lines(dtype, threads):
    w = np.dtype(dtype).itemsize
    for row_bytes in (128, 136, 200, 256, 300, 504, 512, 520, 600, 1000, 1024, 1032, 2047 // w * w, 4096):
        n = row_bytes // w
        for sizes, order in (((1, 1, n), (1, 0, 2)), ((2, 3, n), (1, 0, 2)), ((5, 7, n), (1, 0, 2)),
                             ((3, 5, 4, n), (2, 0, 1, 3)), ((4, 3, 5, n), (1, 2, 0, 3))):
            with _stream_threshold(0):
                plan = _permuted_plans(dtype, sizes, order)[0]
                assert plan["stream"] and (plan["mode"] == "memcpy" or math.prod(sizes[:-1]) == 1)
                _check_permuted_round_trip(dtype, sizes, order, seed=row_bytes)


def _padded_rows(dtype, rows, n, pad):
    """A descriptor of rows[0] x rows[1] rows of n values, each row n + pad values after the last."""
    return ds.BufferTensorDesc(dtype, [*rows, n], [rows[1] * (n + pad), n + pad, 1])


def _padded_rows_plan(desc):
    """The plan (described) of a scatter from packed values into desc."""
    packed = ds.BufferTensorDesc(desc.data_type, desc.sizes).effective_strides
    return _engine.Plan(desc.sizes, packed, desc.effective_strides, desc.element_bits).describe()


def _check_padded_rows(desc, pad, offset, rng, fill, line=None):
    """Scatter random rows into desc's padded rows, in a buffer offset bytes
    into memory filled with fill (with line, the offset that puts the buffer
    line bytes past a 64-byte boundary): the rows' bytes land where numpy
    puts them and every other byte keeps fill; then gather them back."""
    dtype = ds.numpy_dtype(desc.data_type)
    w, n = dtype.itemsize, desc.sizes[-1]
    packed = rng.integers(0, 256, desc.element_count * w, dtype=np.uint8).view(dtype).reshape(desc.sizes)
    raw = np.full(max(offset, 63) + desc.total_tensor_size_in_bytes + 64, fill, np.uint8)
    if line is not None:
        offset = (line - raw.ctypes.data) % 64
    buffer = raw[offset:offset + desc.total_tensor_size_in_bytes]
    ds.scatter(packed, desc, buffer)
    expected = np.full_like(raw, fill)
    for r, values in enumerate(packed.reshape(-1, n).view(np.uint8)):
        at = offset + r * (n + pad) * w
        expected[at:at + n * w] = values
    np.testing.assert_array_equal(raw, expected)
    out = np.zeros(desc.sizes, dtype)
    ds.gather(buffer, desc, out=out)
    np.testing.assert_array_equal(out.view(np.uint8), packed.view(np.uint8))


# Streamed rows into rows further apart (a scatter into padded rows, each
# row's last line cut by its end): the bytes past a row's last line boundary
# go out with ordinary stores at once, nothing held for a next row that does
# not continue it; the padding between rows keeps its bytes.  Rows of every
# length around a line, padded by a value to two lines, the buffer at
# several line offsets; gathered back from the padded rows too.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_rows_into_padded_rows_keep_the_padding(dtype, threads):
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(w)
    for n in (512 // w, 520 // w, 600 // w, 684 // w, 1000 // w, 1032 // w, 2047 // w):
        for pad, offset, rows in ((1, 0, (3, 5)), (16 // w or 1, 16, (1, 7)), (64 // w + 1, 4, (4, 3)),
                                  (128 // w, 48, (2, 9))):
            desc = _padded_rows(dtype, rows, n, pad)
            with _stream_threshold(0):
                plan = _padded_rows_plan(desc)
                assert plan["mode"] == "memcpy" and plan["stream"]
                assert plan["inner"][0] == n and plan["outer"][-1][2] == (n + pad) * w
                _check_padded_rows(desc, pad, offset, rng, 0xA5)


# Streamed rows of 128-511 bytes into rows padded to a multiple of 64 bytes:
# with the buffer on a line boundary every row starts on a line, its whole
# lines are streamed and its last line's bytes take ordinary stores; off a
# line boundary too (padded rows), the first line's bytes then with ordinary
# stores as well.  The padding keeps its bytes either way; gathered back from
# the padded rows too.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_short_rows_on_lines_keep_the_padding(dtype, threads):
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(w + 11)
    for n in sorted({128 // w, 136 // w, 200 // w, 256 // w, 300 // w, 448 // w, 504 // w}):
        for pitch in {-(-(n * w + 1) // 64) * 64, -(-(n * w) // 64) * 64 + 64, 512}:
            pad = (pitch - n * w) // w
            for line, rows in ((0, (3, 7)), (16, (2, 5)), (0, (1, 2))):
                desc = _padded_rows(dtype, rows, n, pad)
                with _stream_threshold(0):
                    plan = _padded_rows_plan(desc)
                    assert plan["mode"] == "memcpy" and plan["stream"]
                    assert all(b % 64 == 0 for _, _, b in plan["outer"]) and plan["outer"][-1][2] == pitch
                    _check_padded_rows(desc, pad, 0, rng, 0xC3, line=line)


# Streamed rows of 128-511 bytes into rows padded by any number of bytes up
# to a page (a region of a wider image: rows of 300 bytes 4096 apart), off
# line boundaries and on them, where the engine streams each row's whole
# lines and asks for its partial first and last lines ahead, and padded by a
# page or more, where the rows keep ordinary stores: every row's bytes land
# where numpy puts them and the padding keeps its bytes, at 1 and 2 threads
# (rows shared out at every task boundary); gathered back too.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_rows_into_rows_a_page_apart_keep_the_padding(dtype, threads):
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(w + 23)
    for n in sorted({128 // w, 200 // w, 300 // w, 392 // w, 511 // w}):
        for gap in (8, 100, 4096 - n * w - 8, 4096 - 64, 4096, 4096 + 40):
            pad = -(-gap // w)
            for line, rows in ((0, (3, 9)), (16, (2, 11)), (40, (1, 3))):
                desc = _padded_rows(dtype, rows, n, pad)
                with _stream_threshold(0):
                    plan = _padded_rows_plan(desc)
                    assert plan["mode"] == "memcpy" and plan["stream"]
                    assert plan["inner"][0] == n and plan["outer"][-1][2] == (n + pad) * w
                    _check_padded_rows(desc, pad, 0, rng, 0x5A, line=line)


# Streaming tile plans whose tasks each write one run of the destination
# (rows back to back of 128 bytes or more that no streaming kernel writes:
# off line boundaries, ragged, fewer than a padded tile's rows) transpose the
# task into a buffer and stream the run out.  Batched NHWC <-> NCHW
# conversions with small planes, gathers and scatters against numpy, the
# strided buffer at several line offsets (the run's first and last lines in
# part).
@pytest.mark.parametrize("dtype,sizes,staged", [
    ("uint8", (9, 149, 8, 4), ("scatter",)),
    ("float16", (8, 124, 11, 13), ("scatter",)),
    ("int16", (8, 79, 11, 23), ("scatter",)),
    ("float32", (8, 37, 7, 5), ("gather", "scatter")),
    ("float64", (8, 29, 3, 7), ("gather", "scatter")),
    ("uint8", (6, 330, 33, 33), ("scatter",)),
    ("uint8", (8, 33, 20, 20), ("gather",)),
    # tasks of at most 32 KiB that were planned through the L2 buffers
    ("int16", (8, 141, 5, 8), ("scatter",)),
    ("uint32", (8, 78, 5, 4), ("scatter",)),
    ("float32", (8, 60, 9, 14), ("gather", "scatter")),
], ids=str)
def test_staged_tasks_stream_their_run(dtype, sizes, staged, threads):
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NHWC")
    packed = ds.BufferTensorDesc(dtype, sizes).effective_strides
    bits, dt = desc.element_bits, ds.numpy_dtype(desc.data_type)
    rng = np.random.default_rng(sum(sizes))
    with _stream_threshold(0):
        plans = {"gather": _engine.Plan(sizes, desc.effective_strides, packed, bits).describe(),
                 "scatter": _engine.Plan(sizes, packed, desc.effective_strides, bits).describe()}
        assert {op for op, plan in plans.items() if plan["stage_tasks"]} == set(staged)
        for op in staged:
            plan = plans[op]
            jn, _, ids = plan["inner"]
            kn, kss, kds = plan["tile"]
            assert plan["mode"] == "tile" and plan["stream"] and plan["l2"] == "none"
            assert kss == ids == dt.itemsize and kds == jn * dt.itemsize >= 128
        for skew in (0, 8, 40):
            buf = _at_line_offset(desc.total_tensor_size_in_bytes, skew, skew + 1)
            np.testing.assert_array_equal(ds.gather(buf, desc), _numpy_gather(buf, desc))
            values = rng.integers(0, 256, desc.element_count * dt.itemsize, dtype=np.uint8).view(dt).reshape(sizes)
            expected = buf.copy()
            view = np.ndarray(sizes, dt, buffer=expected, strides=[a * dt.itemsize for a in desc.effective_strides])
            view[...] = values
            ds.scatter(values, desc, buf)
            np.testing.assert_array_equal(buf, expected)


# The planner's bound on a staged task: one run of at most STAGE_TASK_BYTES
# (the engine's buffer), rows of at least STAGE_TASK_MIN_ROW bytes, copies
# from the size where transposes stream, no L2 buffers or segments.
def test_stage_tasks_bounds():
    def plan(rows, row_bytes, width=1, **kw):
        jn = row_bytes // width
        fields = dict(mode="tile", width=width, outer=[(64, rows * row_bytes, rows * row_bytes)],
                      inner=(jn, 4096, width), tile=(rows, width, row_bytes), segment_len=jn, tasks=64,
                      dst_bytes=_planner.transpose_stream_min(), stream=True)
        fields.update(kw)
        return _planner.KernelPlan(**fields)

    most = _planner.STAGE_TASK_BYTES
    assert _planner.stage_tasks(plan(most // 320, 320))
    assert not _planner.stage_tasks(plan(most // 320 + 1, 320))
    assert _planner.stage_tasks(plan(100, _planner.STAGE_TASK_MIN_ROW))
    assert not _planner.stage_tasks(plan(100, _planner.STAGE_TASK_MIN_ROW - 2, width=2))
    assert _planner.stage_tasks(plan(100, 200, width=4))
    assert not _planner.stage_tasks(plan(100, 200, stream=False))
    assert not _planner.stage_tasks(plan(100, 200, l2=2))
    assert not _planner.stage_tasks(plan(100, 200, segments=2, segment_len=100, tasks=128))
    assert not _planner.stage_tasks(plan(100, 200, dst_bytes=_planner.transpose_stream_min() - 1))
    assert not _planner.stage_tasks(plan(100, 200, tile=(100, 1, 256)))   # rows not back to back
    assert not _planner.stage_tasks(plan(100, 200, mode="block"))
    # planned through both L2 buffers: staged instead up to STAGE_OVER_L2_BYTES a task
    over = _planner.STAGE_OVER_L2_BYTES
    assert _planner.stages_over_l2(plan(over // 256, 256, l2=2))
    assert not _planner.stages_over_l2(plan(over // 256 + 1, 256, l2=2))
    assert not _planner.stages_over_l2(plan(100, 200, l2=2, stream=False))
    assert not _planner.stages_over_l2(plan(100, _planner.STAGE_TASK_MIN_ROW - 4, width=4, l2=2))


# The engine takes staged tasks only in a tile plan that streams.
@pytest.mark.parametrize("sizes,layout,stream", [((64, 9), "WH", False), ((5, 64), "HW", True)], ids=str)
def test_engine_refuses_staged_tasks_outside_streaming_tiles(monkeypatch, sizes, layout, stream):
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        plan.main.stage_tasks, plan.main.stream = True, stream
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    desc = ds.BufferTensorDesc.from_layout("float32", sizes, layout)
    packed = ds.BufferTensorDesc("float32", sizes).effective_strides
    assert _planner.plan_copy(sizes, desc.effective_strides, packed, 32).main.mode == ("tile" if layout == "WH" else "memcpy")
    with pytest.raises(ValueError, match="staged tasks"):
        _engine.Plan(sizes, desc.effective_strides, packed, 32)


# Short rows (16-512 bytes) into padded rows, in a copy that does not stream:
# rows less than two rows apart ask for no destination lines ahead, rows
# further apart do (with the asking from 0 bytes, and as by default).  The
# padding keeps its bytes; gathered back from the padded rows too.
@pytest.mark.parametrize("ask_from", [0, None], ids=["ask", "default"])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_short_rows_into_padded_rows_keep_the_padding(dtype, ask_from, threads):
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(w + 7)
    with contextlib.ExitStack() as stack:
        if ask_from is not None:
            stack.enter_context(_ask_rows_from(ask_from))
        for n in sorted({16 // w, 24 // w, 64 // w, 100 // w, 300 // w, 512 // w} - {0}):
            for pad, rows, offset in ((1, (3, 17), 0), (max(1, 16 // w), (2, 40), 16), (n - 1 or 1, (4, 9), 8),
                                      (n + 1, (2, 13), 4)):
                desc = _padded_rows(dtype, rows, n, pad)
                plan = _padded_rows_plan(desc)
                assert plan["mode"] == "memcpy" and not plan["stream"] and plan["inner"][0] == n
                _check_padded_rows(desc, pad, offset, rng, 0x5A)


# Interleaving tasks of a few pixels of a few channels (at most 8 pixels and
# 64 bytes: planes far apart whose runs are a short dimension) copied element
# by element in batches, gathers and scatters against numpy: 2 to 8 pixels,
# one- to eight-byte values, tasks at and under the bound.
@pytest.mark.parametrize("dtype,sizes,order", [
    ("int16", (23, 32, 19, 23, 2, 5), (1, 5, 0, 3, 2, 4)),
    ("int16", (2, 3, 3, 11, 3, 2), (2, 0, 1, 3, 5, 4)),
    ("uint8", (2, 13, 13, 3, 5, 7), (0, 1, 3, 2, 5, 4)),
    ("float16", (5, 6, 4, 4), (0, 1, 3, 2)),
    ("float32", (12, 3, 2, 3), (1, 0, 3, 2)),
    ("uint32", (10, 8, 2, 9, 2, 7), (0, 1, 4, 3, 5, 2)),
    ("float64", (7, 2, 7, 12, 8, 4), (4, 3, 2, 0, 5, 1)),
], ids=str)
def test_small_interleaving_tasks_in_strided_batches(dtype, sizes, order, threads, monkeypatch, no_slabs):
    # (planned element by element, as where no dimension continues a small
    # interleave's planes in the source: the tests of interleaves joined
    # along the source take the others)
    monkeypatch.setattr(_planner, "small_pixels_join", lambda *args: False)
    with _stream_threshold(_planner.stream_min_total - 1):   # drops the plans held by descriptor
        assert "strided" in [p["mode"] for p in _permuted_plans(dtype, sizes, order)]
        for plan in _permuted_plans(dtype, sizes, order):
            assert plan["mode"] != "interleave" or not _planner.small_interleave(
                plan["inner"][0], plan["tile"][0], plan["width"])
        _check_permuted_round_trip(dtype, sizes, order, seed=sum(sizes))
    # Planned as before (the interleave kernel), the same bytes.
    monkeypatch.setattr(_planner, "INTERLEAVE_SMALL_PIXELS", 0)
    with _stream_threshold(_planner.stream_min_total):   # drops the plans held by descriptor
        assert "interleave" in [p["mode"] for p in _permuted_plans(dtype, sizes, order)]
        _check_permuted_round_trip(dtype, sizes, order, seed=sum(sizes))


def _permuted(dtype, sizes, order, seed):
    """Random values of ``sizes`` and a descriptor of them stored in ``order``."""
    w = np.dtype(dtype).itemsize
    values = np.random.default_rng(seed).integers(0, 256, math.prod(sizes) * w, dtype=np.uint8)
    values = values.view(dtype).reshape(sizes)
    view = values.transpose(order)
    return values, view, ds.BufferTensorDesc(dtype, list(view.shape), [s // w for s in view.strides])


def _permuted_plans(dtype, sizes, order):
    """The gather and scatter plans (described) of values of ``sizes``
    stored in ``order`` (see _permuted), to and from packed."""
    w = np.dtype(dtype).itemsize
    desc = _permuted(dtype, sizes, order, seed=0)[2]
    strides, shape = desc.effective_strides, desc.sizes
    packed = ds.BufferTensorDesc(dtype, shape).effective_strides
    return (_engine.Plan(shape, strides, packed, 8 * w).describe(),
            _engine.Plan(shape, packed, strides, 8 * w).describe())


def _check_permuted_round_trip(dtype, sizes, order, seed):
    """Gather the permuted values into a preallocated array and scatter them
    back into a buffer of other bytes, both against numpy."""
    values, view, desc = _permuted(dtype, sizes, order, seed)
    buffer = np.zeros(desc.total_tensor_size_in_bytes, np.uint8)
    buffer[:values.nbytes] = values.reshape(-1).view(np.uint8)
    out = np.zeros(view.shape, dtype)
    ds.gather(buffer, desc, out=out)
    np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(view).view(np.uint8))
    back = np.full_like(buffer, 0xA5)
    back[values.nbytes:] = 0
    ds.scatter(np.ascontiguousarray(view), desc, back)
    np.testing.assert_array_equal(back, buffer)


def test_block_cases_keep_groups_within_the_first_limit():
    # Groups past BLOCK_GROUP_FIRST are only for layouts that would otherwise
    # have no block: every block case keeps its groups within it.
    for _, _, gather_plan, scatter_plan in _block_case_plans():
        for plan in (gather_plan, scatter_plan):
            if plan["mode"] == "block":
                assert plan["inner"][0] <= _planner.BLOCK_GROUP_FIRST
                assert math.prod(n for n, _ in plan["block"]["k"]) <= _planner.BLOCK_GROUP_FIRST


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_a_group_past_the_first_limit_makes_a_block(dtype, monkeypatch, threads):
    # (113, 5, 12, 60) in the order (1, 3, 0, 2): one side's contiguous run
    # is 12 x 113 = 1356 values, and 113 is prime, so groups of at most 1024
    # take 12 alone, and with the other side's single dimension (60, or part
    # of it) that is a 2-D tile per task; groups of up to BLOCK_GROUP make a
    # block.
    sizes, order = (113, 5, 12, 60), (1, 3, 0, 2)
    w = np.dtype(dtype).itemsize
    _, _, desc = _permuted(dtype, sizes, order, seed=3)
    packed = ds.BufferTensorDesc(dtype, desc.sizes).effective_strides
    pairs = [(desc.effective_strides, packed), (packed, desc.effective_strides)]
    for src, dst in pairs:
        plan = _engine.Plan(desc.sizes, src, dst, 8 * w).describe()
        assert plan["mode"] == "block"
        groups = (plan["inner"][0], math.prod(n for n, _ in plan["block"]["k"]))
        assert _planner.BLOCK_GROUP_FIRST < max(groups) <= _planner.BLOCK_GROUP
    monkeypatch.setattr(_planner, "BLOCK_GROUP", _planner.BLOCK_GROUP_FIRST)
    assert all(_engine.Plan(desc.sizes, src, dst, 8 * w).describe()["mode"] == "tile" for src, dst in pairs)
    monkeypatch.undo()
    _check_permuted_round_trip(dtype, sizes, order, seed=3)


@pytest.mark.parametrize("source_only", [False, True], ids=["in_place", "source_buffer"])
def test_a_permutation_between_the_l2_and_streaming_sizes(threads, source_only, no_whole_blocks, monkeypatch):
    # 17 MB of uint16 in a scrambled 6-D order, at the default limits: past
    # the size from which blocks go through L2 (BLOCK_L2_MIN_TOTAL: its rows
    # lie off line boundaries, so it would not stream in place, and keeps
    # that bound rather than twice it), below the streaming one, its block's
    # source rows long enough for the L2 buffers and its destination rows
    # not: transposed in place, or with BLOCK_L2_SOURCE_ONLY through the
    # source buffer, with ordinary stores (blocks streamed whole, which would
    # take it, kept out).
    _set_planner(monkeypatch, "BLOCK_L2_SOURCE_ONLY", source_only)
    sizes, order = (6, 10, 14, 18, 22, 26), (2, 5, 1, 4, 0, 3)
    values = np.random.default_rng(6).integers(0, 1 << 16, sizes, dtype=np.uint16)
    view = values.transpose(order)
    desc = ds.BufferTensorDesc("uint16", list(view.shape), [s // 2 for s in view.strides])
    packed = ds.BufferTensorDesc("uint16", desc.sizes).effective_strides
    plan = _engine.Plan(desc.sizes, desc.effective_strides, packed, 16).describe()
    assert plan["mode"] == "block" and plan["l2"] == ("source" if source_only else "none")
    assert not plan["stream"]
    np.testing.assert_array_equal(ds.gather(values, desc), view)
    out = np.zeros_like(values)
    ds.scatter(np.ascontiguousarray(view), desc, out)
    np.testing.assert_array_equal(out, values)


@pytest.mark.parametrize("dtype, sizes", [("int8", (2, 20, 3, 40, 70)), ("uint8", (2, 20, 3, 40, 64)),
                                          ("int16", (2, 20, 3, 40, 70)), ("float32", (2, 12, 3, 10, 32))], ids=str)
@pytest.mark.parametrize("dst_offset", [0, 16, 40])
def test_streamed_block_scatters_write_the_columns_around_whole_lines(dtype, sizes, dst_offset, streaming, threads):
    # A streamed block writes whole destination lines with streaming stores;
    # the columns of each row before its first line boundary and after its
    # last go with ordinary stores through the padded micro-blocks.  The
    # blocks here start 0, 16, 32 or 48 bytes past a line (outer offsets of
    # 800 or 1600 bytes, and dst_offset), so both kinds of column are there.
    # Against numpy, with guard bytes before and after (leaving out either
    # kind of column, 20 of the 24 fail).
    perm = (4, 2, 0, 3, 1)
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, perm)
    packed = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(list(sizes), packed.effective_strides, desc.effective_strides, desc.element_bits).describe()
    assert plan["mode"] == "block" and plan["stream"] and plan["l2"] == "none"
    dt = np.dtype(ds.numpy_dtype(dtype))
    values = _random_buffer(math.prod(sizes) * dt.itemsize, 11).view(dt).reshape(sizes)
    nbytes = desc.total_tensor_size_in_bytes
    before = _random_buffer(nbytes + dst_offset + 64, 12)
    raw = np.empty(before.size + 64, np.uint8)
    start = -raw.ctypes.data % 64   # the buffer on a line boundary: the offsets above decide
    got = raw[start:start + before.size]
    got[:] = before
    ds.scatter(values, desc, got, offset=dst_offset, check_alignment=False)
    strides = [s * dt.itemsize for s in desc.effective_strides]
    view = np.lib.stride_tricks.as_strided(got[dst_offset:dst_offset + nbytes].view(dt), sizes, strides)
    np.testing.assert_array_equal(view, values)
    expect = before.copy()
    np.lib.stride_tricks.as_strided(expect[dst_offset:dst_offset + nbytes].view(dt), sizes, strides)[...] = values
    np.testing.assert_array_equal(got, expect)   # nothing else written


def test_streaming_block_cases_reach_l2_chunks(streaming):
    # A block longer than the L2 buffers hold goes through them in chunks of
    # j or of k; with dimensions that do not split (11, 17, 19), such a
    # block keeps both sides' runs long.
    chunked = set()
    for sizes, w, gather_plan, scatter_plan in _block_case_plans():
        for plan in (gather_plan, scatter_plan):
            if plan["mode"] == "block" and plan["l2"] != "none":
                j_elems = math.prod(n for n, _ in plan["block"]["j"])
                k_elems = math.prod(n for n, _ in plan["block"]["k"])
                jc, kc = plan["l2_chunk"]
                assert 0 < jc <= j_elems and 0 < kc <= k_elems
                if jc < j_elems:
                    chunked.add((sizes, w, "j"))
                if kc < k_elems:
                    chunked.add((sizes, w, "k"))
    assert {w for _, w, _ in chunked} >= {2, 4, 8}  # bytes: the C tests chunk them
    assert {side for _, _, side in chunked} == {"j", "k"}
    assert any(s == (2, 3, 11, 19, 17, 40) for s, _, _ in chunked)


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("float64", (2, 9, 2, 83, 3), (4, 3, 0, 1, 2), "gather"),          # J 249 x K 36
    ("float32", (1, 1, 268, 2, 394), (0, 1, 4, 3, 2), "gather"),       # J 394, chunks of 256
    ("uint32", (1291, 1, 1, 17, 5), (2, 1, 4, 3, 0), "scatter"),       # J 1291, chunks of 256
    ("int16", (77, 1, 2, 2, 122, 1), (1, 4, 3, 5, 0, 2), "scatter"),   # J 154 x K 244
    ("uint8", (19, 43, 2, 3, 61), (3, 2, 4, 0, 1), "scatter"),         # J 817 x K 366
    ("uint8", (1, 1, 249, 1, 2, 887), (0, 3, 1, 5, 4, 2), "scatter"),  # rows 887 bytes apart
])
@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
def test_blocks_through_both_buffers_read_their_rows_in_place(dtype, sizes, order, op, level, streaming,
                                                              threads):
    # A block through both L2 buffers transposes each chunk from its source
    # rows where they are, a line of k at a time (16 values at least): k
    # ragged against the chunk, j past a micro-block's multiple, rows close
    # together and far apart, at every instruction set level; gathered and
    # scattered (guard bytes past the end) against numpy.
    w = np.dtype(dtype).itemsize
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    with _isa_level(level):
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "block" and plan["l2"] == "both" and plan["rest"] is None
        j = math.prod(n for n, _ in plan["block"]["j"])
        k = math.prod(n for n, _ in plan["block"]["k"])
        jc, kc = plan["l2_chunk"]
        assert kc == _planner.in_place_chunk_k(w) < k and k % kc != 0 and j % (16 // w) != 0
        assert 0 < jc <= j
        _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (128, 11, 13, 32), (3, 2, 0, 1), "gather"),            # J 416 x K 704, rows 1408 apart
    ("uint8", (9, 1, 32, 64, 9, 8), (4, 5, 1, 3, 0, 2), "scatter"),  # J 288 x K 576, rows 4608 apart
    ("int16", (7, 2, 17, 17, 128), (3, 4, 2, 0, 1), "scatter"),      # J 238 x K 544
    ("float32", (17, 13, 4, 3, 8, 17), (4, 5, 2, 3, 1, 0), "scatter"),  # J 221 x K 816
    ("float64", (7, 1, 17, 32, 9, 9), (3, 5, 4, 2, 1, 0), "scatter"),   # 16 values either way
], ids=str)
@pytest.mark.parametrize("lines", [1, 2])
@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "avx2"])
def test_blocks_through_both_buffers_take_two_lines_of_rows_128_apart(dtype, sizes, order, op, lines, level,
                                                                     streaming, threads, monkeypatch):
    # A block through both L2 buffers whose rows of J all lie a multiple of
    # 128 bytes apart takes two lines of k a chunk from each (the large L3's
    # bound; one with a small L3's, forced here both ways): k ragged against
    # the chunk, at every instruction set level, gathered and scattered
    # (guard bytes past the end) against numpy.
    w = np.dtype(dtype).itemsize
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    monkeypatch.setattr(_planner, "L2_PHASE_LINES", lines)
    _engine._set_stream_min_total(0)   # (drops the plans made with the other number of lines)
    with _isa_level(level):
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "block" and plan["l2"] == "both" and plan["rest"] is None
        assert all(a % _planner.PHASE_BYTES == 0 for n, a in plan["block"]["j"] if n > 1)
        assert plan["l2_lines"] == lines
        k = math.prod(n for n, _ in plan["block"]["k"])
        jc, kc = plan["l2_chunk"]
        assert kc == _planner.in_place_chunk_k(w, lines) < k and k % _planner.in_place_chunk_k(w, 2) != 0
        _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes) + lines))


@pytest.mark.parametrize("dtype,k,row,j", [("uint8", 1100, 1152, 6001), ("int16", 600, 640, 4001),
                                           ("float16", 5750, 5760, 700), ("uint32", 2870, 2880, 600),
                                           ("float64", 700, 720, 1201)], ids=str)
@pytest.mark.parametrize("lines", [1, 2])
def test_transposes_read_in_place_take_two_lines_of_rows_128_apart(dtype, k, row, j, lines, streaming, threads,
                                                                   monkeypatch):
    # 2-D transposes through L2 whose source rows, read where they are, lie
    # a multiple of 128 bytes apart (1152-11520 bytes here, never a multiple
    # of 1 KiB; k values of each, the rest padding) take two lines of k a
    # chunk (one with a small L3's bound, forced here both ways), the last
    # chunk ragged: gathered and scattered (guard bytes past the end)
    # against numpy.
    w = np.dtype(dtype).itemsize
    desc = ds.BufferTensorDesc(dtype, [k, j], strides=[1, row])
    monkeypatch.setattr(_planner, "L2_PHASE_LINES", lines)
    _engine._set_stream_min_total(0)   # (drops the plans made with the other number of lines)
    plan = transfer._plan(desc, "gather").describe()
    assert plan["mode"] == "tile" and plan["l2"] == "both" and plan["stream"]
    assert _planner.l2_reads_in_place(plan["inner"][1]) and plan["inner"][1] % _planner.PHASE_BYTES == 0
    assert plan["l2_lines"] == lines
    assert plan["l2_chunk"] == (_planner.BLOCK_L2_RUN // w, _planner.in_place_chunk_k(w, lines))
    assert k % _planner.in_place_chunk_k(w, 2) != 0
    _check_gather_and_scatter(desc, np.random.default_rng(k + lines))


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_l2_block_gather_into_fresh_and_reused_outputs(dtype, streaming, no_whole_blocks, threads, monkeypatch):
    # A fresh output takes ordinary stores, a reused one streaming stores;
    # the block goes through both L2 buffers either way (kept from streaming
    # whole, which would take it, and from streaming in place:
    # BLOCK_L2_IN_PLACE off).
    monkeypatch.setattr(_planner, "BLOCK_L2_IN_PLACE", False)
    sizes = (2, 2, 16, 8, 2, 16, 8, 8)
    desc, strides = _block_desc(dtype, sizes, (3, 0, 6, 1, 7, 4, 2, 5))
    packed = list(ds.BufferTensorDesc(dtype, sizes).effective_strides)
    w = np.dtype(dtype).itemsize
    plan = _plan(sizes, strides, packed, w)
    assert plan["l2"] == ("none" if w == 1 else "both")
    src = _random_buffer(desc.total_tensor_size_in_bytes, w)
    expect = _view(src, np.dtype(dtype), sizes, strides).copy().tobytes()
    assert ds.gather(src, desc).tobytes() == expect
    assert ds.gather(src, desc).tobytes() == expect


@pytest.mark.parametrize("to_channels_last", [True, False], ids=["to-nhwc", "to-nchw"])
def test_streaming_at_the_default_size(to_channels_last, threads):
    # 36 MiB of float32: past the default limit, no fixture needed.
    sizes = [1, 64, 384, 384]
    src_desc, dst_desc = _layout_pair("float32", sizes, to_channels_last)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides, 32)
    assert plan.describe()["stream"]
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, 11)
    dst = np.zeros(dst_desc.total_tensor_size_in_bytes + 64, np.uint8)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=16)
    expect = _expected_copy(src, src_desc, bytes(len(dst)), dst_desc, 16)
    assert dst.tobytes() == expect


# Long rows are cut into segments (tasks, which may run on different
# threads).  When the destination row is off a cache line, every interior
# segment boundary moves back to a line boundary, so the first segment is
# shorter and the last one longer; with one thread or two, with streaming
# stores or not, every element must land once and nothing outside the tensor
# may change.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("dst_offset", [0, 1, 2, 4, 8, 16, 24, 48, 56, 63])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streaming"])
@pytest.mark.parametrize("layout", ["transpose", "packed", "rows"])
def test_segment_boundaries_at_every_destination_alignment(dtype, dst_offset, stream, layout, threads):
    itemsize = np.dtype(dtype).itemsize
    if dst_offset % itemsize and layout != "packed":
        dst_offset -= dst_offset % itemsize
    if layout == "transpose":  # column-major k x j: 300 rows of k, j in segments
        sizes = [300, 2100]  # streamed through L2: segments of at least 1 KiB
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[1, 300])
        dst_desc = ds.BufferTensorDesc(dtype, sizes)
    elif layout == "packed":
        sizes = [3 * 65536 + 77]
        src_desc = dst_desc = ds.BufferTensorDesc(dtype, sizes)
    else:  # padded rows, each long enough to be cut in segments
        sizes = [3, 2 * 65536 + 5]
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[2 * 65536 + 21, 1])
        dst_desc = ds.BufferTensorDesc(dtype, sizes, strides=[2 * 65536 + 13, 1])
    old = _engine._set_stream_min_total(0 if stream else 1 << 62)
    try:
        plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                            src_desc.element_bits).describe()
        assert plan["stream"] == stream and plan["tasks"] > 1
        src = _random_buffer(src_desc.total_tensor_size_in_bytes, dst_offset + itemsize)
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 5).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    finally:
        _engine._set_stream_min_total(old)
    assert bytes(dst) == expect


def _at_page_offset(nbytes, offset, seed):
    """A random uint8 array of nbytes starting ``offset`` bytes past a page, and its parent."""
    raw = _random_buffer(nbytes + 8192 + 64, seed)
    start = (-raw.ctypes.data) % 4096 + offset
    return raw, raw[start:start + nbytes]


# Contiguous runs with the destination a few bytes past the source modulo
# 4 KiB take their own vector loop (a run of glibc's memcpy is many times
# slower there): every length around the loop's threshold and its 64-byte
# steps, every distance below a line, each element width.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("distance", [0, 1, 3, 4, 8, 16, 24, 40, 60, 63, 64, 65, 4080, 4095])
@pytest.mark.parametrize("src_offset", [0, 8, 53])
def test_contiguous_runs_at_every_short_distance(dtype, distance, src_offset, threads):
    itemsize = np.dtype(dtype).itemsize
    distance -= distance % itemsize
    src_offset -= src_offset % itemsize
    for count in (1, 2047 // itemsize, 2048 // itemsize, 2048 // itemsize + 1, 70001 // itemsize,
                  (300000 + 63) // itemsize):
        desc = ds.BufferTensorDesc(dtype, [count])
        nbytes = count * itemsize
        total = desc.total_tensor_size_in_bytes  # nbytes rounded up to 4
        _, src = _at_page_offset(total, src_offset, count)
        parent, dst = _at_page_offset(total + 128, (src_offset + distance) % 4096, count + 1)
        before = parent.copy()
        ds.copy_tensor(src, desc, dst, desc, check_alignment=False)
        expect = before.copy()
        start = dst.ctypes.data - parent.ctypes.data
        expect[start:start + nbytes] = src[:nbytes]
        assert parent.tobytes() == expect.tobytes()


# Rows of 512 bytes and more are written with streaming stores when the copy
# streams: rows just under and over that, padded on either side, broadcast
# along a dimension, or one element repeated along the row (a fill, which
# streams with a large L3 only: FILL_STREAMS), at several destination
# offsets.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("row_bytes", [496, 512, 520, 1000, 4096, 4104])
@pytest.mark.parametrize("dst_offset", [0, 1, 8, 16, 48])
@pytest.mark.parametrize("source", ["padded", "broadcast", "fill"])
def test_streamed_rows(dtype, row_bytes, dst_offset, source, streaming, threads):
    itemsize = np.dtype(dtype).itemsize
    n = row_bytes // itemsize
    sizes = [3, 5, n]
    if source == "padded":
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[5 * (n + 8), n + 8, 1])
    elif source == "broadcast":
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[n, 0, 1])
    else:  # one element per (i, j), repeated along the row
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[5, 1, 0])
    dst_desc = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    # (a broadcast row of up to BROADCAST_PLAIN_ROW_BYTES, 4 KiB with a small
    # L3, takes ordinary stores: see below; a fill streams with a large L3)
    assert plan["mode"] == ("fill" if source == "fill" else "memcpy")
    assert plan["stream"] == (source == "padded"
                              or source == "broadcast" and row_bytes > _planner.BROADCAST_PLAIN_ROW_BYTES
                              or source == "fill" and bool(_planner.FILL_STREAMS))
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, row_bytes)
    dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + dst_offset + 64, 7).tobytes())
    expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
    ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
    assert bytes(dst) == expect


# A fill (one value repeated along each row) writes its rows with ordinary
# stores whatever the copy's size with a small L3, and streams their whole
# lines with a large one (FILL_STREAMS; the streaming limit lowered to 0
# here): at every destination offset in a line (a whole element apart),
# rows of an odd number of elements over 2 KiB, none of the writes reaching
# past a row or into the bytes around the tensor.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("fill_streams", [0, 1])
def test_fill_at_every_line_offset(dtype, fill_streams, streaming, monkeypatch):
    monkeypatch.setattr(_planner, "FILL_STREAMS", fill_streams)
    itemsize = np.dtype(dtype).itemsize
    n = 2113 // itemsize | 1
    sizes = [3, 7, n]
    src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[7, 1, 0])
    dst_desc = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    assert plan["mode"] == "fill" and plan["stream"] == bool(fill_streams)
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, 11)
    for dst_offset in range(0, 64, itemsize):
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + 128, dst_offset).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect, dst_offset


# Fills that stream (a large L3's FILL_STREAMS, forced here both ways; rows
# of FILL_STREAM_MIN_ROW bytes or more): rows back to back hold the line
# one ends in for the next, which fills it and streams it whole; rows
# padded apart write their partial lines with ordinary stores; a few long
# rows cut into segments (row() in pieces) too.  Every row length around a
# line, every destination offset a whole element apart, 1 and 2 threads
# (task ranges that end in the middle of a held line).  Against numpy's
# broadcast, guard bytes included.
@pytest.mark.parametrize("fill_streams", [0, 1])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_fills_hold_lines_between_rows(dtype, fill_streams, streaming, threads, monkeypatch):
    monkeypatch.setattr(_planner, "FILL_STREAMS", fill_streams)
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(w + 31 * fill_streams)
    for row_bytes, rows, pad in ((120, (5, 9), 0), (128, (3, 7), 0), (200, (4, 33), 0), (1000, (2, 101), 0),
                                 (4104, (3, 5), 0), (72000, (1, 2), 0), (256, (6, 9), 3), (2048, (2, 5), 1)):
        n = row_bytes // w
        sizes = [*rows, n]
        src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[rows[1], 1, 0])
        dst_desc = ds.BufferTensorDesc(dtype, sizes, strides=[rows[1] * (n + pad), n + pad, 1])
        plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides, 8 * w).describe()
        assert plan["mode"] == "fill"
        assert plan["stream"] == (bool(fill_streams) and n * w >= _planner.FILL_STREAM_MIN_ROW), (sizes, plan)
        src = rng.integers(0, 256, src_desc.total_tensor_size_in_bytes, dtype=np.uint8)
        for dst_offset in range(0, 64, w if row_bytes < 4096 else 8 * w):
            dst = bytearray(rng.integers(0, 256, dst_desc.total_tensor_size_in_bytes + 128, dtype=np.uint8).tobytes())
            expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
            ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
            assert bytes(dst) == expect, (sizes, pad, dst_offset)


# The same rows in runs along the innermost outer dimension (dmls_isa.
# fill_rows: AVX2's 32-byte stores, or the SSE2 loop): source values that
# do not merge the outer dimensions (a gap after every run), so that runs
# end and carry, runs of 1, 7, 8 and 77 rows, rows of 16-31 bytes (two
# 16-byte stores), of 32 and of lengths off 32, task ranges that start in
# the middle of a run (2 threads, over 256 KiB), destinations off a line.
# Against numpy, guard bytes included.
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
@pytest.mark.parametrize("row_bytes", [16, 24, 32, 40, 96, 200, 520])
@pytest.mark.parametrize("run", [1, 7, 8, 77])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_fill_rows_in_runs(dtype, run, row_bytes, level, threads):
    itemsize = np.dtype(dtype).itemsize
    sizes = [3, 5 if run > 8 else 700, run, row_bytes // itemsize]
    src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[sizes[1] * (run + 3) + 5, run + 3, 1, 0])
    dst_desc = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    assert plan["mode"] == "fill" and not plan["stream"]
    if run > 1:
        assert plan["outer"][-1][:2] == (run, itemsize)
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, row_bytes + run)
    with _isa_level(level):
        _check_copy_at_offsets(src, src_desc, dst_desc, {0, itemsize, 40})


# Rows of one repeated value of 16 bytes and more (a broadcast along the last
# dimension) are filled inline, eight rows' values loaded before their
# stores, with ordinary stores whatever the copy's size with a small L3
# (with a large one, rows of FILL_STREAM_MIN_ROW bytes or more stream past
# the streaming size): row lengths that are and are not a multiple of 16 bytes or of a
# line, task ranges that are not a multiple of eight rows, outer dimensions
# that carry, at destination offsets off 16 bytes, with the streaming limit
# at 0 and out of reach, on 1 and 2 threads.  Against numpy, guard bytes
# included.
@pytest.mark.parametrize("stream", [False, True], ids=["stores", "streaming"])
@pytest.mark.parametrize("row_bytes", [16, 24, 40, 64, 72, 128, 200, 504, 512, 520, 576, 600, 1000, 2040, 2056,
                                       4104])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_fill_rows(dtype, row_bytes, stream, threads):
    itemsize = np.dtype(dtype).itemsize
    sizes = [3, 5, 77, row_bytes // itemsize]
    src_desc = ds.BufferTensorDesc(dtype, sizes, strides=[385, 77, 1, 0])
    dst_desc = ds.BufferTensorDesc(dtype, sizes)
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, row_bytes)
    with _stream_threshold(0 if stream else 1 << 62):
        plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                            src_desc.element_bits).describe()
        assert plan["mode"] == "fill"
        assert plan["stream"] == (stream and bool(_planner.FILL_STREAMS) and row_bytes >= _planner.FILL_STREAM_MIN_ROW)
        for dst_offset in (0, itemsize, 24):
            dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + 64, dst_offset).tobytes())
            expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
            ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
            assert bytes(dst) == expect, dst_offset


# Contiguous rows of 640 bytes and more are copied with the engine's own
# loop (stores aligned to whole destination lines), shorter ones with
# memcpy: padded rows just under, at and over that length and over whole
# lines, into packed rows (back to back) and out of them, at destination
# offsets off a line and off 16 bytes, on 1 and 2 threads, without
# streaming.  Against numpy, the bytes around the tensor included.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("row_bytes", [632, 640, 648, 1000, 1200, 2040, 2056, 4104])
@pytest.mark.parametrize("direction", ["unpad", "pad"])
def test_own_copy_rows(dtype, row_bytes, direction, threads):
    itemsize = np.dtype(dtype).itemsize
    n = row_bytes // itemsize
    sizes = [2, 9, n]
    padded = ds.BufferTensorDesc(dtype, sizes, strides=[9 * (n + 3), n + 3, 1])
    packed = ds.BufferTensorDesc(dtype, sizes)
    src_desc, dst_desc = (padded, packed) if direction == "unpad" else (packed, padded)
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, row_bytes)
    with _stream_threshold(1 << 62):
        plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                            src_desc.element_bits).describe()
        assert plan["mode"] == "memcpy" and not plan["stream"] and plan["inner"][0] == n
        _check_copy_at_offsets(src, src_desc, dst_desc, {0, itemsize, 16, 40, 48})


# A run whose destination lies 1 to 511 bytes past its source modulo 4 KiB
# is copied from its end back (4K aliasing, see lines.h): packed copies of
# odd lengths with the destination at distances on either side of those
# bounds, streamed and not, on 1 and 2 threads; the bytes around the
# destination untouched.  Against numpy.
@pytest.mark.parametrize("distance", [0, 1, 16, 24, 100, 511, 512, 4095])
@pytest.mark.parametrize("stream", [False, True])
def test_copies_just_past_their_source_modulo_4_kib(distance, stream, threads):
    n = 300_001
    raw_src = _random_buffer(n + 8192, distance)
    src = raw_src[(-raw_src.ctypes.data) % 4096 + 40:][:n]
    raw_dst = _random_buffer(n + 16384, distance + 1)
    start = (-raw_dst.ctypes.data) % 4096 + 40 + distance
    expect = raw_dst.copy()
    expect[start:start + n] = src
    assert (raw_dst[start:].ctypes.data - src.ctypes.data) % 4096 == distance
    desc = ds.BufferTensorDesc("uint8", [n])
    with _stream_threshold(0 if stream else 1 << 62):
        assert _engine.Plan([n], [1], [1], 8).describe()["stream"] == stream
        ds.scatter(src, desc, memoryview(raw_dst)[start:], check_alignment=False)
    assert np.array_equal(raw_dst, expect)


# A contiguous copy that reads its source again (broadcast along N, C or H)
# writes rows of up to BROADCAST_PLAIN_ROW_BYTES (the machine's: 4 KiB with a
# small L3, none with a large one) with ordinary stores whatever its size:
# it never streams them, longer rows it does (the limit lowered to 0 here).
# Its row is every dimension after the broadcast one, merged.
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("row_bytes", [512, 1200, 4096, 4100])
def test_broadcast_copies_stream_only_long_rows(axis, row_bytes):
    sizes = [3, 4, 5, row_bytes // 4]
    flags = [i == axis for i in range(4)]
    src = ds.BufferTensorDesc.from_layout("float32", sizes, "NCHW", broadcast=flags)
    packed = ds.BufferTensorDesc("float32", sizes)
    with _stream_threshold(0):
        plan = _engine.Plan(sizes, src.effective_strides, packed.effective_strides, 32).describe()
        assert plan["mode"] == "memcpy" and plan["stream"] == (int(np.prod(sizes[axis + 1:])) * 4
                                                               > _planner.BROADCAST_PLAIN_ROW_BYTES)
        assert _engine.Plan(sizes, packed.effective_strides, packed.effective_strides, 32).describe()["stream"]
    buf = _random_buffer(src.total_tensor_size_in_bytes, row_bytes)
    with _stream_threshold(0):
        got = ds.gather(buf, src)
    expect = np.ndarray(sizes, np.float32, buffer=buf, strides=[x * 4 for x in src.effective_strides])
    assert got.tobytes() == np.ascontiguousarray(expect).tobytes()


# Rows repeated back to back (a broadcast along H, rows of up to 1024
# bytes, four rows or more a run) are written a run at a time as a periodic
# pattern, whole destination lines with aligned stores, and are never
# batched: rows of 3, 7, 10, 12, 15, 16, 20, 100, 211, 340 and 1024 bytes
# and of 1028 (row by row), runs of 3 (row by row), 4, 5, 37 and 300 (runs
# of under 64 bytes row by row too), destinations off a line at every
# offset a whole element apart, and copies of over 256 KiB that 2 threads
# split in the middle of runs.  Against numpy, guard bytes included.
@pytest.mark.parametrize("dtype,row_values", [("uint8", 3), ("uint8", 7), ("float16", 5), ("float32", 3),
                                              ("uint8", 15), ("uint8", 16), ("uint8", 20), ("int16", 50),
                                              ("uint8", 211), ("float16", 170), ("float32", 256),
                                              ("float64", 128), ("uint32", 257)], ids=str)
@pytest.mark.parametrize("nc,h", [((2, 3), 3), ((3, 5), 4), ((2, 7), 5), ((3, 4), 37), ((5, 21), 300)], ids=str)
def test_rows_repeated_along_h_as_a_pattern(dtype, row_values, nc, h, threads):
    itemsize = np.dtype(ds.numpy_dtype(dtype)).itemsize
    sizes = [nc[0], nc[1], h, row_values]
    src_desc = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW", broadcast=[False, False, True, False])
    dst_desc = ds.BufferTensorDesc(dtype, sizes)
    plan = _engine.Plan(sizes, src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    assert plan["mode"] == "memcpy" and not plan["stream"] and plan["segment"] == row_values
    assert plan["outer"][-1] == (h, 0, row_values * itemsize) and plan["tile"] is None
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, row_values)
    _check_copy_at_offsets(src, src_desc, dst_desc,
                           {0, itemsize, 8, 24, 40, 56} if h < 300 else {0, itemsize, 40}, slack=128)


# Permutations of 8 MiB or more that keep a last dimension of 513-4096
# bytes, far apart in the source, in copies that do not stream: the rows go
# one a task through a loop that asks for the source rows a few tasks on
# (execute.c): rows of 513 bytes (the bound's edge), 968, 1560 and an odd
# 1845, and 4096 (the other edge), on 1 and 2 threads, with and without
# SIMD.  Against numpy, the scatter's guard bytes included.
FAR_ROWS = [
    ("uint8", (130, 130, 513), (1, 0, 2), "gather"),
    ("float32", (7, 58, 45, 11, 22), (2, 1, 0, 3, 4), "gather"),
    ("float64", (135, 83, 3, 65), (1, 0, 2, 3), "scatter"),
    ("uint8", (2, 6, 7, 14, 6, 1845), (3, 1, 4, 2, 0, 5), "scatter"),
    ("float32", (40, 52, 1024), (1, 0, 2), "gather"),
]


@pytest.mark.parametrize("level", [0, 3], ids=["generic", "avx2"])
@pytest.mark.parametrize("dtype,sizes,order,op", FAR_ROWS, ids=[f"{c[0]}-{c[3]}-{c[1]}" for c in FAR_ROWS])
def test_rows_far_apart_from_memory_ask_for_the_rows_ahead(dtype, sizes, order, op, level, threads):
    width = np.dtype(dtype).itemsize

    def check_plan(plan):
        n = plan.inner[0] * width
        assert plan.mode == "memcpy" and not plan.stream and plan.segments == 1 and plan.tile is None
        assert 512 < n <= 4096 and plan.outer and plan.outer[-1][1] != n
        assert math.prod(size for size, _, _ in plan.outer) * n >= _planner.TRANSPOSE_FROM_MEMORY

    with _isa_level(level):
        _gather_and_scatter(dtype, sizes, order, op, check_plan)


# A fill row long enough to be cut into segments (each a task, 65536 values)
# is written from a register in row(): segments that end off 16 bytes and
# rows of a length off every power of two, at destination offsets a whole
# element apart, on 1 and 2 threads.  Against numpy, guard bytes included.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("n", [65536 + 9, 150001])
def test_fill_rows_cut_into_segments(dtype, n, threads):
    itemsize = np.dtype(dtype).itemsize
    src_desc = ds.BufferTensorDesc(dtype, [2, n], strides=[1, 0])
    dst_desc = ds.BufferTensorDesc(dtype, [2, n])
    plan = _engine.Plan([2, n], src_desc.effective_strides, dst_desc.effective_strides,
                        src_desc.element_bits).describe()
    assert plan["mode"] == "fill" and plan["tasks"] > 2 and not plan["stream"]
    src = _random_buffer(src_desc.total_tensor_size_in_bytes, n)
    for dst_offset in (0, itemsize, 40):
        dst = bytearray(_random_buffer(dst_desc.total_tensor_size_in_bytes + 64, dst_offset).tobytes())
        expect = _expected_copy(src, src_desc, bytes(dst), dst_desc, dst_offset)
        ds.copy_tensor(src, src_desc, dst, dst_desc, dst_offset=dst_offset, check_alignment=False)
        assert bytes(dst) == expect, dst_offset


def _asks_tile_ahead(plan, w):
    """Which source of a task ahead a plan's tasks ask for (execute.c,
    task_ask), for a tile plan of one task a row with source rows of k
    contiguous and no L2 buffers: "span", a whole span of at most 8 KiB
    whose next task's lies 4 KiB or more past it either way; "rows", the
    first bytes of each of at most 64 rows of a longer source; else None."""
    if plan["mode"] != "tile" or plan["l2"] != "none" or not plan["outer"] or plan["tile_pieces"]:
        return None
    jn, iss, _ = plan["inner"]
    kn, kss, _ = plan["tile"]
    if plan["segment"] != jn or kss != w or iss <= 0:
        return None
    span = (jn - 1) * iss + kn * w
    if span <= 8192:
        step = plan["outer"][-1][1]
        return "span" if not -span - 4096 < step < span + 4096 else None
    return "rows" if jn <= 64 else None


# Transposes whose tasks each read one short span of the source far from the
# last task's (a 5-D permutation that swaps its last two dimensions), or a
# few longer rows: the span of the task a few on, or the first bytes of each
# row of the next, is asked for first.  Fewer tasks than that distance, as
# many, and more; spans up to the bound and past it; tasks back to back
# (which do not ask) beside them.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_tiles_far_apart_at_every_task_count(dtype, threads):
    w = np.dtype(dtype).itemsize
    kinds = {"span": 0, "rows": 0, None: 0}
    for j, k in ((16, 24), (12, 45), (24, 46), (33, 13), (44, 47), (96, 85 // w), (64, 8192 // 64 // w + 1),
                 (20, 3000 // w), (64, 700 // w), (65, 700 // w)):
        for a, b in ((2, 1), (2, 2), (3, 4), (9, 5), (5, 7), (1, 6)):
            sizes, order = (a, b, j, k), (1, 0, 3, 2)
            for plan in _permuted_plans(dtype, sizes, order):
                if plan["mode"] == "tile":
                    kinds[_asks_tile_ahead(plan, w)] += 1
            _check_permuted_round_trip(dtype, sizes, order, seed=j * k)
    assert kinds["span"] >= 10 and kinds["rows"] >= 4 and kinds[None] > 0


# Streamed transposes whose destination rows lie back to back (rows of whole
# register micro-blocks up to 1 KiB, off line multiples: one stream a task):
# the rows of k past the last whole micro-block go out with the task's last
# band.  Every count of such rows, from none whole (fewer than a micro-block)
# to several bands and a few rows more.
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_streamed_back_to_back_rows_with_every_remainder(dtype, threads, streaming):
    w = np.dtype(dtype).itemsize
    n = 16 // w
    hit = set()
    for row_bytes in (16, 48, 80, 144, 1008):
        j = row_bytes // w
        for k in sorted({n - 1, n, n + 1, 2 * n - 1, 3 * n + 1, 4 * n + n // 2, 257, 515}):
            sizes, order = (2, 3, k, j), (1, 0, 3, 2)
            plan = _permuted_plans(dtype, sizes, order)[1]   # the scatter: rows of j back to back
            if (plan["mode"] == "tile" and plan["stream"] and plan["inner"][2] == w and plan["tile"][1] == w
                    and plan["tile"][2] == plan["inner"][0] * w == row_bytes):
                hit.add(plan["tile"][0] % n)
            _check_permuted_round_trip(dtype, sizes, order, seed=k * j)
    assert len(hit) >= min(n, 4)


# The same with rows of k ragged in j as well (rows back to back of up to 512
# bytes that are no whole number of micro-blocks, 256 rows of k a task or
# more, through the padded tile): every count of rows of k past the last
# whole micro-block, streamed and not.
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
def test_back_to_back_ragged_rows_with_every_remainder(dtype, stream, threads):
    w = np.dtype(dtype).itemsize
    n = 16 // w
    hit = set()
    with _stream_threshold(0 if stream else 1 << 60):
        for j in sorted({n + 1, 3 * n - 1, 300 // w}):
            for k in range(256, 256 + n + 1):
                sizes, order = (2, k, j), (0, 2, 1)
                plan = _permuted_plans(dtype, sizes, order)[1]   # the scatter: rows of j back to back
                if (plan["mode"] == "tile" and plan["stream"] == stream and plan["tile"][2] == plan["inner"][0] * w
                        and plan["inner"][0] % n != 0 and plan["tile"][0] >= 256):
                    hit.add(plan["tile"][0] % n)
                _check_permuted_round_trip(dtype, sizes, order, seed=k * j)
    assert len(hit) == n


@pytest.mark.parametrize("dtype,kn,jn", [(dt, kn, jn) for dt in ("uint8", "int16", "uint32")
                                          for kn, jn in ((2, 11), (3, 13), (6, 28), (7, 24), (5, 8), (5, 9), (5, 51))
                                          if np.dtype(dt).itemsize * kn * jn <= 1024
                                          and np.dtype(dt).itemsize * kn < _planner.BLOCK_SHORT_K_BYTES])
@pytest.mark.parametrize("gap", [0, 3])
@pytest.mark.parametrize("groups", [4, 9, 150])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_runs_of_tiny_tiles_joined(dtype, kn, jn, gap, groups, level, stream, threads):
    # Tiles of kn x jn values whose destination rows go on in the next
    # task's (the innermost outer dimension, groups long, steps the
    # destination by one row of jn values) while their sources lie apart:
    # runs of such tasks are copied tile after tile into a buffer and
    # transposed as one tile (four-byte tiles of up to 320 bytes, or 1 KiB
    # with 5 values a source row or more; source rows of 28 bytes make a
    # block instead).  Runs are cut at the buffer's size (150
    # groups of rows take several runs), at a task chunk's end (2 threads)
    # and where the outer dimensions carry.  Source rows of kn values back
    # to back or 3 values apart.  Plans that stream are joined too (rows of
    # at most 512 bytes), the joined tile's rows streamed.  Gather against
    # numpy; a scatter leaves every byte outside the elements as it was.
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(kn * 1000 + jn * 10 + gap + groups)
    # 150 groups: enough outer tiles for the copy to be cut for 2 threads
    outer = 3 if groups < 150 else (1 << 18) // (kn * groups * jn * w) + 1
    iss = kn + gap                                   # source row stride, elements
    sg = jn * iss + 5                                # tiles apart, so that no dimension merges
    sizes = (outer, kn, groups, jn)                  # destination order: packed
    desc = ds.BufferTensorDesc(dtype, list(sizes), [groups * sg, 1, sg, iss])
    with _stream_threshold(0 if stream else 1 << 60):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "tile" and plan["tile"][0] == kn and plan["inner"][:2] == (jn, iss * w)
        assert plan["outer"][-1] == (groups, sg * w, jn * w) and plan["stream"] == stream
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,c,n", [("uint8", 3, 28), ("uint8", 6, 9), ("int16", 5, 12), ("float32", 3, 21),
                                        ("uint32", 2, 11), ("float64", 4, 4), ("uint8", 5, 66)])
@pytest.mark.parametrize("groups", [4, 9, 150])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_runs_of_short_interleaves_joined(dtype, c, n, groups, stream, threads):
    # Interleaves of c planes of n pixels a task whose destination goes on
    # in the next task's (the innermost outer dimension, groups long, steps
    # it by the task's pixels) while their planes lie apart: in a copy that
    # streams, runs of such tasks are copied plane by plane into a buffer
    # and interleaved as one (runs cut at the buffer's size, at a task
    # chunk's end and where the outer dimensions carry); in one that does
    # not, one task at a time.  Gather against numpy; a scatter leaves every
    # byte outside the elements as it was.
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(c * 1000 + n * 10 + groups)
    outer = 3 if groups < 150 else (1 << 18) // (c * groups * n * w) + 1
    pss = n + 3                                      # plane stride, elements
    sg = c * pss + 5                                 # tasks apart, so that no dimension merges
    sizes = (outer, groups, n, c)                    # destination order: packed
    desc = ds.BufferTensorDesc(dtype, list(sizes), [groups * sg + 7, sg, 1, pss])
    with _stream_threshold(0 if stream else 1 << 60):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "interleave" and plan["stream"] == stream
        assert plan["tile"] == (c, pss * w, w) and plan["inner"] == (n, w, c * w)
        assert plan["outer"][-1] == (groups, sg * w, n * c * w)
        _check_gather_out(desc, rng)
        _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,c,n", [("uint8", 3, 20), ("uint8", 5, 13), ("uint8", 7, 17), ("int16", 6, 6),
                                        ("int16", 2, 14), ("float16", 3, 9), ("float32", 3, 12), ("uint32", 2, 11),
                                        ("float64", 4, 4), ("uint8", 4, 63)])
@pytest.mark.parametrize("along", [4, 9, 300])
@pytest.mark.parametrize("level", [0, 1, 3], ids=["generic", "sse2", "best"])
def test_runs_of_short_interleaves_joined_along_the_source(dtype, c, n, along, level, threads):
    # Interleaves of c planes of n pixels a task, rows under a line, in a
    # copy that does not stream, where a dimension of the source continues
    # each plane's row (its stride there is n values; along long): the
    # planner makes it the innermost outer dimension, and runs of such
    # tasks are interleaved at once from the planes' long rows into a
    # buffer, each task's pixels then copied to its place.  Runs cut at the
    # buffer's size (300 tasks of 64 bytes or more), at a task chunk's end
    # and where the outer dimensions carry.  Gather (fresh and into out=)
    # against numpy; a scatter leaves every byte outside the elements as it
    # was.
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(c * 1000 + n * 10 + along)
    groups = 5                                       # the dimension the destination continues in
    outer = max(2, (1 << 18) // (c * n * along * groups * w) + 1)
    pss = n * along + 3                              # plane stride, elements
    sg = c * pss + 5                                 # groups apart, so that no dimension merges
    sizes = (outer, along, groups, n, c)             # destination order: packed
    desc = ds.BufferTensorDesc(dtype, list(sizes), [groups * sg + 7, n, sg, 1, pss])
    with _stream_threshold(1 << 60):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "interleave" and not plan["stream"]
        assert plan["tile"] == (c, pss * w, w) and plan["inner"] == (n, w, c * w)
        assert plan["outer"][-1] == (along, n * w, groups * n * c * w)
        assert _planner.interleave_pixels_join(_gather_kernel_plan(desc))
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,c,n", [("int16", 5, 2), ("uint32", 5, 2), ("uint8", 3, 3), ("float64", 3, 2),
                                        ("float16", 6, 3), ("uint8", 7, 4)])
@pytest.mark.parametrize("along", [9, 300])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_tiny_interleaves_joined_along_the_source(dtype, c, n, along, stream, threads):
    # Interleaves of a few pixels of a few planes a task (at most 8 pixels
    # and 64 bytes), which went element by element, are interleaves joined
    # along the source where a dimension continues each plane's row for
    # runs of 16 pixels or more; such a copy never streams.  Gather (fresh
    # and into out=) against numpy; a scatter leaves every byte outside the
    # elements as it was.
    w = np.dtype(dtype).itemsize
    assert _planner.small_interleave(n, c, w)
    rng = np.random.default_rng(c * 1000 + n * 10 + along)
    groups = 5
    outer = max(2, (1 << 18) // (c * n * along * groups * w) + 1)
    pss = n * along + 3
    sg = c * pss + 5
    sizes = (outer, along, groups, n, c)
    desc = ds.BufferTensorDesc(dtype, list(sizes), [groups * sg + 7, n, sg, 1, pss])
    with _stream_threshold(0 if stream else 1 << 60):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "interleave" and not plan["stream"]
        assert plan["outer"][-1] == (along, n * w, groups * n * c * w)
        assert _planner.interleave_pixels_join(_gather_kernel_plan(desc))
        _check_gather_out(desc, rng)
        _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,c,n,a1,a2", [("int16", 6, 3, 4, 313), ("int16", 6, 3, 4, 5), ("uint8", 5, 13, 3, 50),
                                              ("float32", 3, 2, 2, 7), ("uint16", 2, 14, 5, 90)])
@pytest.mark.parametrize("level", [0, 3], ids=["generic", "best"])
def test_interleaves_joined_along_a_chain_of_source_dimensions(dtype, c, n, a1, a2, level, threads):
    # Each plane's row of n pixels goes on along a dimension of a1 and then
    # one of a2 (source strides n and n * a1 values), the destination
    # elsewhere (g1 and g2 between them there): both are made the innermost
    # loops, a1 inside, and a run of
    # tasks crosses a1's carries, its planes' rows back to back, up to a2's
    # end (a run of 12 pixels on its own: 4 tasks of 3).  Gather (fresh and
    # into out=) against numpy; a scatter leaves every byte outside the
    # elements as it was.
    w = np.dtype(dtype).itemsize
    rng = np.random.default_rng(c * 100 + n * 10 + a1 + a2)
    g1, g2 = 3, 2                                    # destination dimensions between a1 and a2 and inside a1
    pss = n * a1 * a2 + 5
    s1 = c * pss + 3
    s2 = g1 * s1 + 1
    outer = max(2, (1 << 18) // (c * n * a1 * a2 * g1 * g2 * w) + 1)
    sizes = (outer, a2, g2, a1, g1, n, c)            # destination order: packed
    desc = ds.BufferTensorDesc(dtype, list(sizes), [g2 * s2 + 7, n * a1, s2, n, s1, 1, pss])
    with _stream_threshold(1 << 60):
        kplan = _gather_kernel_plan(desc)
        assert kplan.mode == "interleave" and _planner.interleave_pixels_join(kplan)
        assert [d[:2] for d in kplan.outer[-2:]] == [(a2, n * a1 * w), (a1, n * w)]
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("k1,k2,j1,j2", [(21, 8, 14, 27), (17, 1, 5, 31), (3, 11, 79, 1), (33, 1, 16, 9)])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
def test_one_byte_streamed_tiles_past_their_last_whole_line(k1, k2, j1, j2, level, threads):
    # uint8 tiles of k1 * k2 source-contiguous values by j1 * j2 columns,
    # each task's source and destination one run, destination rows off line
    # boundaries, streamed: whole lines of each destination row a band at a
    # time, and the columns past the last whole line (58 of 378, 27 of 155,
    # 15 of 79, 16 of 144) through the register micro-blocks, their ragged
    # edges moved back.  Gather (fresh and into out=) against numpy; a
    # scatter leaves every byte outside the elements as it was.
    sizes = (3, 2, k1, k2, j1, j2)
    order = (1, 0, 4, 5, 2, 3)
    desc = ds.BufferTensorDesc.from_layout("uint8", list(sizes), order)
    rng = np.random.default_rng(k1 * 100 + j1)
    with _stream_threshold(0):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "tile" and plan["stream"] and plan["tile"][0] == k1 * k2
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


def _panel_desc(dtype, c, n, a1, a2, rows, continues, outer=None):
    # A gather of c planes of n pixels a task into packed (outer, a2, a1,
    # rows, n, c): each plane's row goes on along a1 and then a2 in the
    # source (strides n and n * a1 values), and B, the dimension of rows,
    # steps the destination by one task.  Where B continues the source too
    # (continues), the planes' rows go on through it; else B's rows lie
    # elsewhere.
    w = np.dtype(dtype).itemsize
    chain = n * a1 * a2
    pss = chain * (rows if continues else 1) + 5         # plane stride, elements
    sb = chain if continues else c * pss + 3
    so = (c * pss + 11) if continues else rows * sb + 7
    if outer is None:
        outer = max(2, (300 << 10) // (c * chain * rows * w) + 1)
    sizes = (outer, a2, a1, rows, n, c)
    return ds.BufferTensorDesc(dtype, list(sizes), [so, n * a1, n, sb, 1, pss])


def _panel_plan(desc):
    # The gather's kernel plan, and (chain, B) as the planner's panels() finds
    # them on its outer dimensions (([], None) for none).
    kplan = _gather_kernel_plan(desc)
    row = kplan.inner[0] * kplan.width
    chain = _planner.source_chain(kplan.outer, row)
    return kplan, _planner.panels(kplan.outer, chain, row, row * kplan.tile[0], kplan.width)


@pytest.mark.parametrize("dtype,c,n,a1,a2,rows,continues", [
    ("int16", 6, 3, 4, 313, 7, False), ("float16", 2, 14, 40, 30, 4, True), ("uint8", 5, 13, 50, 30, 3, False),
    ("uint8", 2, 8, 40, 60, 5, True), ("float32", 3, 4, 30, 60, 3, False), ("float64", 2, 3, 40, 40, 5, True),
    ("uint16", 7, 2, 60, 30, 9, False)])
@pytest.mark.parametrize("level", [0, 3], ids=["generic", "best"])
def test_joined_pixels_go_in_panels(dtype, c, n, a1, a2, rows, continues, level, threads):
    # Short interleaves joined along a chain of source dimensions (a1, a2)
    # that holds 16 KiB of tasks or more, where a dimension B steps the
    # destination by one task: B is made the loop just outside the chain
    # (where the planes' rows go on through B in the source, the chain ends
    # inside it), and the engine takes up to 512 bytes of B's rows by as
    # many of the chain's tasks as its buffer holds at a time, each task's
    # rows of B one run of the destination.  Chunks of tasks begin and end
    # inside chains (2 threads: 16 chunks).  Gather (fresh and into out=)
    # against numpy; a scatter leaves every byte outside the elements as it
    # was.
    desc = _panel_desc(dtype, c, n, a1, a2, rows, continues)
    w = np.dtype(dtype).itemsize
    task = c * n * w
    rng = np.random.default_rng(c * 1000 + n * 10 + rows)
    with _stream_threshold(1 << 60):
        kplan, (chain, b) = _panel_plan(desc)
        assert kplan.mode == "interleave" and not kplan.stream and _planner.interleave_pixels_join(kplan)
        tasks = math.prod(kplan.outer[i][0] for i in chain)
        assert tasks == a1 * a2 and tasks * task >= _planner.PANEL_MIN_CHAIN_BYTES
        assert b == len(kplan.outer) - 1 - len(chain) and kplan.outer[b][:1] + kplan.outer[b][2:] == (rows, task)
        assert kplan.tasks % (16 * tasks) != 0
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


def test_joined_pixels_go_in_panels_only_within_the_bounds(monkeypatch):
    # Each bound, on and off its edge: 16 KiB of tasks in the chain, tasks
    # of at most 192 bytes, three rows of B, and plane rows of 16 bytes for
    # four- and eight-byte values.  Off an edge, the copy is joined as it
    # was (or not at all), B not moved inside.  Gather and scatter against
    # numpy either way.
    cases = [  # (dtype, c, n, a1, a2, rows, continues), on the edge first
        (("uint8", 4, 16, 16, 16, 3, False), ("uint8", 4, 16, 15, 17, 3, False)),   # 16384 / 16320 bytes a chain
        (("uint8", 4, 48, 16, 16, 3, False), ("uint8", 4, 49, 16, 16, 3, False)),   # tasks of 192 / 196 bytes
        (("int16", 6, 3, 40, 40, 3, True), ("int16", 6, 3, 40, 40, 2, True)),      # 3 / 2 rows of B
        (("float32", 2, 4, 40, 40, 3, False), ("float32", 2, 3, 40, 40, 3, False)),  # rows of 16 / 12 bytes
    ]
    rng = np.random.default_rng(5)
    with _stream_threshold(1 << 60):
        for on, off in cases:
            for case, expect in ((on, True), (off, False)):
                desc = _panel_desc(*case, outer=2)
                _, (chain, b) = _panel_plan(desc)
                assert (b is not None) == expect and bool(chain) == expect, case
                _check_gather_and_scatter(desc, rng)
        # The planner's bound lowered: B moved outside chains the engine
        # takes as it did before, which stays exact.
        monkeypatch.setattr(_planner, "PANEL_MIN_CHAIN_BYTES", 0)
        transfer._plans.clear()
        desc = _panel_desc("uint8", 4, 16, 15, 17, 3, False, outer=2)
        kplan, (chain, b) = _panel_plan(desc)
        assert b == len(kplan.outer) - 1 - len(chain) and _planner.interleave_pixels_join(kplan)
        _check_gather_and_scatter(desc, rng)
        transfer._plans.clear()


@pytest.mark.parametrize("level", [0, 3], ids=["generic", "best"])
def test_joined_pixels_in_panels_from_short_chains_far_apart(level, threads):
    # Chains of 2-16 KiB of tasks go in panels too where their tasks, of 8
    # bytes or more, lie a page or more apart in the destination (the
    # chain's innermost dimension steps it by B's rows of tasks); each bound
    # on and off its edge, off it the copy joined as before, run by run.
    # Gather and scatter against numpy either way.
    cases = [  # (dtype, c, n, a1, a2, rows), on the edge first
        (("int16", 4, 2, 16, 8, 256), ("int16", 4, 2, 17, 7, 256)),    # chains of 2048 / 1904 bytes
        (("int16", 4, 2, 16, 8, 256), ("int16", 4, 2, 16, 8, 255)),    # tasks 4096 / 4080 bytes apart
        (("uint8", 4, 2, 16, 16, 512), ("uint8", 2, 2, 32, 16, 1024)),  # tasks of 8 / 4 bytes
    ]
    assert _planner.PANEL_MIN_FAR_CHAIN_BYTES == 2048 and _planner.PANEL_FAR_TASK_STRIDE == 4096
    assert _planner.PANEL_MIN_FAR_TASK_BYTES == 8
    rng = np.random.default_rng(17)
    with _stream_threshold(1 << 60):
        for on, off in cases:
            for case, expect in ((on, True), (off, False)):
                dtype, c, n, a1, a2, rows = case
                desc = _panel_desc(dtype, c, n, a1, a2, rows, False, outer=2)
                kplan, (chain, b) = _panel_plan(desc)
                task = c * n * np.dtype(dtype).itemsize
                assert _planner.interleave_pixels_join(kplan), case
                assert a1 * a2 * task < _planner.PANEL_MIN_CHAIN_BYTES
                assert (b is not None) == expect and bool(chain) == expect, case
                if expect:
                    assert b == len(kplan.outer) - 1 - len(chain) and kplan.outer[b][0] == rows
                    assert kplan.outer[-1][2] == rows * task
                    # no chain, no panels (and no chain's stride to read)
                    w = np.dtype(dtype).itemsize
                    assert _planner.panels(kplan.outer, [], n * w, task, w) == ([], None)
                with _isa_level(level):
                    _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,sizes,order", [
    ("uint8", (5, 37, 3, 33), (1, 0, 2, 3)),        # rows of 99 bytes (16-byte moves), runs of 5
    ("uint8", (5, 37, 3, 32), (1, 0, 2, 3)),        # rows of 96 bytes (64-byte blocks)
    ("int16", (2, 3, 41, 40), (0, 2, 1, 3)),        # rows of 80 bytes, runs of 3
    ("float64", (4, 13, 3, 8), (1, 2, 0, 3)),       # rows of 64 bytes, runs of 4
])
def test_short_rows_in_cache_go_run_by_run(dtype, sizes, order, threads):
    # A permutation that keeps a short last dimension, small enough to stay
    # in cache (the rows not asked for ahead): its rows go a run of the
    # innermost outer dimension at a time, at that dimension's strides.
    # Runs whose thread's range of tasks ends or begins inside them (2
    # threads: 16 ranges); gather (fresh and into out=) and scatter against
    # numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, list(sizes), order)
    for op in ("gather", "scatter"):
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "memcpy" and plan["tile"] is None and plan["tasks"] % 16 != 0
        assert 64 <= plan["inner"][0] * plan["width"] <= 120 and plan["outer"][-1][0] in (3, 4, 5)
    rng = np.random.default_rng(sum(sizes))
    _check_gather_out(desc, rng)
    _check_gather_and_scatter(desc, rng)


def test_tiny_interleaves_along_a_short_source_run_go_element_by_element():
    # Runs of fewer than 16 pixels (3 pixels a task, 4 tasks) keep the
    # element-by-element plan, as do tiny interleaves no dimension continues.
    n, c = 3, 6
    for along, step in ((4, n), (9, n + 1)):
        pss = step * along + 3
        sg = c * pss + 5
        desc = ds.BufferTensorDesc("int16", [3, along, 5, n, c], [5 * sg + 7, step, sg, 1, pss])
        assert _gather_kernel_plan(desc).mode == "strided"
        _check_gather_and_scatter(desc, np.random.default_rng(along))


@pytest.mark.parametrize("dtype,c,n", [("uint8", 5, 13), ("int16", 3, 7), ("float32", 4, 9)])
def test_streamed_interleaves_joined_along_the_source_stop_streaming(dtype, c, n, threads):
    # A copy that streams, whose tasks' destinations go on from each other's
    # only two at a time (too few to join along the destination), while a
    # dimension of 40 continues each plane's row: joined along the source,
    # with ordinary stores.  Gather (fresh and into out=) against numpy; a
    # scatter leaves every byte outside the elements as it was.
    w = np.dtype(dtype).itemsize
    pss = n * 40 + 3
    sg = c * pss + 5
    desc = ds.BufferTensorDesc(dtype, [9, 40, 2, n, c], [2 * sg + 7, n, sg, 1, pss])
    rng = np.random.default_rng(c * 10 + n)
    with _stream_threshold(0):
        kplan = _gather_kernel_plan(desc)
        assert kplan.mode == "interleave" and not kplan.stream and _planner.interleave_pixels_join(kplan)
        assert not _planner.interleave_tasks_join(kplan)
        _check_gather_out(desc, rng)
        _check_gather_and_scatter(desc, rng)


@pytest.fixture(params=[None, 0], ids=["256B", "none"])
def joined_task_bound(request, monkeypatch):
    yield from _bound_as_is_or(request, monkeypatch, "INTERLEAVE_STREAM_JOINED_TASK")


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (110, 2, 61, 2, 21), (1, 0, 2, 4, 3), "scatter"),   # 2 planes of 21 pixels, 42 bytes a task
    ("float16", (6, 30, 58, 13, 2), (0, 1, 2, 4, 3), "gather"),   # 2 planes of 13 pixels, 52 bytes
], ids=str)
def test_short_interleaves_joined_along_the_destination_stream_from_a_quarter(dtype, sizes, order, op, threads,
                                                                              joined_task_bound):
    # Interleaves of one- and two-byte values whose tasks (at most 256 bytes)
    # the executor joins along the destination stream from a quarter of the
    # threshold (here 0.5-0.6 MB of a 2 MiB threshold), and so are joined;
    # without the bound they go task by task with ordinary stores.  Against
    # numpy (a gather into out= too, which takes the plan as it is).
    with _stream_threshold(2 << 20):
        plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
        assert plan.mode == "interleave" and _planner.interleave_tasks_join(plan)
        assert plan.dst_bytes // plan.tasks <= 256 and (2 << 20) // 4 <= plan.dst_bytes < 2 << 20
        assert plan.stream == (joined_task_bound is None)
        check()
        if op == "gather":
            _check_gather_out(ds.BufferTensorDesc.from_layout(dtype, list(sizes), order), np.random.default_rng(5))


def test_short_interleaves_joined_along_the_source_do_not_stream(threads):
    # Tasks of 2 float16 planes of 14 pixels (56 bytes) whose destinations go
    # on 4 at a time, while a dimension of 6560 continues each plane's row in
    # the source: joined along the source, with ordinary stores, as without
    # the rule (joined along the destination in runs of 4, streamed, such a
    # copy ran 0.45x); against numpy.
    with _stream_threshold(2 << 20):
        plan, check = _permutation_plan_and_check("float16", (2, 4, 4, 82, 20, 14), (2, 3, 4, 1, 5, 0),
                                                  (2, 3, 4, 1, 5, 0), "scatter")
        assert plan.mode == "interleave" and plan.dst_bytes // plan.tasks == 56
        assert not plan.stream and _planner.interleave_pixels_join(plan)
        check()


def test_longer_interleaves_joined_along_the_destination_keep_the_whole_threshold(threads):
    # Tasks of 440 bytes (5 int16 planes of 44 pixels) do not stream under
    # the threshold, joined or not; against numpy.
    with _stream_threshold(2 << 20):
        plan, check = _permutation_plan_and_check("int16", (5, 6, 75, 2, 5, 44), (0, 2, 3, 1, 5, 4),
                                                  (0, 2, 3, 1, 5, 4), "scatter")
        assert plan.mode == "interleave" and _planner.interleave_tasks_join(plan)
        assert plan.dst_bytes // plan.tasks == 440 and not plan.stream
        check()


def _gather_kernel_plan(desc):
    # The planner's plan for a gather of desc (not the engine's copy of it).
    packed = ds.BufferTensorDesc(desc.data_type, list(desc.sizes))
    return _planner.plan_copy(list(desc.sizes), desc.effective_strides, packed.effective_strides,
                              desc.element_bits).main


def test_interleaves_joined_along_the_source_only_short_rows_that_do_not_stream():
    # The same layout keeps its order where the copy streams, where the
    # planes' rows are a line or longer, and where the dimension is shorter
    # than a run.
    def plan_of(dtype, c, n, along, stream):
        pss, sg = n * along + 3, c * (n * along + 3) + 5
        desc = ds.BufferTensorDesc(dtype, [3, along, 5, n, c], [5 * sg + 7, n, sg, 1, pss])
        with _stream_threshold(0 if stream else 1 << 60):
            return _gather_kernel_plan(desc)
    assert _planner.interleave_pixels_join(plan_of("uint8", 5, 13, 40, False))
    for dtype, c, n, along, stream in (("uint8", 5, 13, 40, True), ("uint8", 4, 64, 40, False),
                                       ("int16", 4, 32, 40, False), ("uint8", 5, 13, 3, False)):
        plan = plan_of(dtype, c, n, along, stream)
        assert plan.mode == "interleave" and not _planner.interleave_pixels_join(plan)
        assert plan.outer[-1][1] != n * plan.width or plan.outer[-1][0] < _planner.JOIN_MIN_TASKS


@pytest.mark.parametrize("dtype", ["float32", "uint32"])
@pytest.mark.parametrize("c", [5, 6, 7])
@pytest.mark.parametrize("gap", [0, 1, 3])
@pytest.mark.parametrize("pixels", [64, 71, 490])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
def test_five_to_seven_four_byte_channels_into_planes(dtype, c, gap, pixels, level, threads):
    # Pixels of 5-7 four-byte channels (gap values apart after each) into
    # planes: a tile of c rows of k, whose pixels AVX2 reads 8 values at a
    # time (the next ones of the source with them) where those reads stay
    # within the tile's rows, the rest through the tile.  Gathered (fresh and
    # into out=) and scattered against numpy.
    width = 7 if pixels == 490 else pixels
    rows = pixels // width
    ps = c + gap
    sizes = (2, c, rows, width)
    desc = ds.BufferTensorDesc(dtype, list(sizes), [rows * width * ps + 5, 1, width * ps, ps])
    plan = transfer._plan(desc, "gather").describe()
    assert plan["mode"] == "tile" and plan["tile"][:2] == (c, 4) and plan["inner"] == (pixels, ps * 4, 4)
    rng = np.random.default_rng(c * 100 + gap * 10 + pixels)
    with _isa_level(level):
        _check_gather_out(desc, rng)
        _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype", ["float64", "int64"])
@pytest.mark.parametrize("c", [3, 4, 5, 7])
@pytest.mark.parametrize("gap", [0, 1, 3])
@pytest.mark.parametrize("pixels", [32, 37, 490])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
def test_three_to_seven_eight_byte_channels_into_planes(dtype, c, gap, pixels, stream, level, threads):
    # Pixels of 3-7 eight-byte channels (gap values apart after each) into
    # planes: a tile of c rows of k, whose pixels AVX2 reads 4 values at a
    # time (8 for 5-7 channels, the next ones of the source with them) where
    # those reads stay within the tile's rows, the rest through the tile,
    # streamed or not.  Gathered (fresh and into out=) and scattered against
    # numpy.
    width = 7 if pixels == 490 else pixels
    rows = pixels // width
    ps = c + gap
    sizes = (2, c, rows, width)
    desc = ds.BufferTensorDesc(dtype, list(sizes), [rows * width * ps + 5, 1, width * ps, ps])
    rng = np.random.default_rng(c * 100 + gap * 10 + pixels)
    with _stream_threshold(0 if stream else 1 << 60):
        plan = transfer._plan(desc, "gather").describe()
        assert plan["mode"] == "tile" and plan["tile"][:2] == (c, 8) and plan["inner"] == (pixels, ps * 8, 8)
        assert plan["stream"] == stream
        with _isa_level(level):
            _check_gather_out(desc, rng)
            _check_gather_and_scatter(desc, rng)


@pytest.mark.parametrize("dtype,sizes,layout", [
    ("uint8", (3001, 3011), "WH"),              # 2-D, source rows 3001 bytes apart
    ("int16", (2, 64, 211, 193), "NHWC"),       # planes off 1 KiB multiples, 64 channels
    ("float16", (3, 55, 72, 437), "NHWC"),      # 55 channels: a ragged column
    ("uint8", (2, 40, 592, 257), "NHWC"),       # pixels of 40 bytes
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
def test_narrow_tiles_of_8_to_12_mib_stream(dtype, sizes, layout, level, threads):
    # One- and two-byte tile plans of 8-12 MiB whose source rows lie 40 bytes
    # or more apart stream (at the default threshold): gather and scatter
    # against numpy, a scatter's guard bytes left as they were.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
    assert (8 << 20) <= desc.total_tensor_size_in_bytes < _planner.transpose_stream_min()
    for op in ("gather", "scatter"):
        plan = transfer._plan(desc, op).describe()
        assert plan["mode"] == "tile" and plan["stream"], op
    with _isa_level(level):
        _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


@pytest.mark.parametrize("dtype,sizes,layout,op", [
    ("uint8", (24, 52, 43, 49), (2, 1, 3, 0), "gather"),      # 24 x 49 tiles, 1176 bytes
    ("int8", (53, 65, 39, 51), (3, 1, 0, 2), "scatter"),      # 51 x 39, 1989 bytes
    ("uint8", (59, 41, 37, 85), (1, 3, 0, 2), "scatter"),     # 85 x 37, 3145 bytes
    ("float16", (71, 14, 73, 38), (2, 0, 3, 1), "gather"),    # 14 x 38 two-byte values, 1064 bytes
], ids=str)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
def test_runs_of_tiles_of_1_to_4_kib_joined(dtype, sizes, layout, op, level, threads):
    # Tiles of 1-4 KiB of one- and two-byte values whose destination rows go
    # on in the next task's are joined too, fewer of them a run (the buffer
    # holds 16 KiB of source rows): the plan has that shape; gather and
    # scatter against numpy, a scatter's guard bytes left as they were.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
    w = np.dtype(dtype).itemsize
    plan = transfer._plan(desc, op).describe()
    kn, jn = plan["tile"][0], plan["inner"][0]
    assert plan["mode"] == "tile" and not plan["stream"] and 1024 < kn * jn * w <= 4096
    assert plan["outer"][-1][2] == jn * w and plan["outer"][-1][0] >= 4
    with _isa_level(level):
        _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


@pytest.fixture
def tall_tiles_any_width(monkeypatch):
    # Blocks whose k rows are adjacent in the destination take tiles four
    # source lines tall at any width and J (under BLOCK_TALL_TILE_MAX_TOTAL),
    # as the engine takes them; by default only wider values within a line.
    monkeypatch.setattr(_planner, "BLOCK_TALL_TILE_MIN_WIDTH", 1)
    yield from _planner_setting(monkeypatch, "BLOCK_TALL_TILE_MAX_J_BYTES", 512)


@pytest.fixture
def small_whole_blocks(monkeypatch):
    # Blocks of any size streamed whole where they qualify: by default those
    # of values up to BLOCK_WHOLE_SMALL_MAX_WIDTH bytes only from
    # BLOCK_WHOLE_MIN_BLOCK_BYTES, more than these small copies' blocks hold,
    # and those of short rows only from BLOCK_WHOLE_SHORT_ROW_MAX_TOTAL.
    monkeypatch.setattr(_planner, "BLOCK_WHOLE_SHORT_ROW_BYTES", 0)
    yield from _planner_setting(monkeypatch, "BLOCK_WHOLE_MIN_BLOCK_BYTES", 0)


@pytest.fixture
def no_cuts(monkeypatch):
    # No copy cut in two (split_for_block).
    yield from _planner_setting(monkeypatch, "SPLIT_FOR_BLOCKS", False)


@pytest.fixture
def cut_small_copies(monkeypatch):
    # Copies of any size cut in two where a dimension stops a block's group
    # (split_for_block), plans made by descriptor dropped on the way in and out.
    yield from _planner_setting(monkeypatch, "SPLIT_MIN_BYTES", 0)


def _copy_plan(dtype, sizes, order, op):
    # The planner's whole plan (a CopyPlan: main and rest) of ``op``
    # ("gather" or "scatter") on the ``order`` permutation of ``sizes``,
    # with that permutation's descriptor.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = ds.BufferTensorDesc(dtype, sizes).effective_strides
    src, dst = (desc.effective_strides, packed) if op == "gather" else (packed, desc.effective_strides)
    return _planner.plan_copy(list(sizes), src, dst, desc.element_bits), desc


def _check_cut_copy(dtype, sizes, order, op, seed):
    # The copy's plan is cut in two; gathered (into a fresh array and into
    # out=) and scattered (random bytes, 16 guard bytes after) against numpy.
    plan, desc = _copy_plan(dtype, sizes, order, op)
    assert plan.main.mode == "block" and plan.rest is not None
    rng = np.random.default_rng(seed)
    if op == "gather":
        buf = rng.integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
        expect = _numpy_gather(buf, desc)
        assert ds.gather(buf, desc).tobytes() == expect.tobytes()
        out = np.empty_like(expect)
        assert ds.gather(buf, desc, out=out) is out and out.tobytes() == expect.tobytes()
    else:
        dt = ds.numpy_dtype(desc.data_type)
        values = np.frombuffer(rng.integers(0, 256, math.prod(sizes) * dt.itemsize, dtype=np.uint8).tobytes(),
                               dt).reshape(sizes)
        _check_scatter(values, desc, bytearray(rng.integers(0, 256, desc.total_tensor_size_in_bytes + 16,
                                                            dtype=np.uint8).tobytes()))


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype,sizes,order", [
    ("uint8", (2, 50, 3, 83, 28), (3, 2, 0, 4, 1)),
    ("int16", (5, 19, 251, 21), (3, 2, 0, 1)),       # a gather's rest is a tile
    ("float16", (3, 80, 127, 51), (3, 0, 2, 1)),
    ("uint32", (5, 37, 59, 47), (3, 0, 2, 1)),
])
def test_copies_cut_in_two(dtype, sizes, order, op, threads, cut_small_copies):
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order", [
    ("float32", (3, 17, 4106), (2, 1, 0)),     # 4106 = 2 x 2053 beside a K of 51: J of 2
    ("uint8", (2, 7, 9003), (2, 1, 0)),        # 9003 = 3 x 3001
    ("float16", (3, 5, 6002), (2, 1, 0)),
])
def test_copies_cut_along_the_destinations_fastest_dimension(dtype, sizes, order, threads, cut_small_copies):
    # The destination's fastest dimension, too long for J's room and with no
    # divisor that fits but a small one, is cut (SPLIT_INNER_J): the first
    # part a block, the rest copied after it.  Against numpy.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_INNER_J", False)
        uncut, _ = _copy_plan(dtype, sizes, order, "gather")
    assert uncut.rest is None and uncut.main.mode == "tile"
    _check_cut_copy(dtype, sizes, order, "gather", sum(sizes))


@pytest.mark.parametrize("dtype,sizes,j", [
    ("int16", (600, 163, 47), [(47, 195600), (21, 1200)]),   # room for 2 of 163 beside 47, 21 as a big block
    ("uint8", (700, 211, 59), [(59, 147700), (17, 700)]),    # 4 of 211 beside 59, 17 as a big block
])
def test_tiles_whose_destination_group_stops_at_primes_are_cut_with_a_big_blocks_room(dtype, sizes, j, threads):
    # Turned over and gathered (8.7-9.2 MB): J's first dimension (a prime)
    # leaves too little room for the next (a prime too) at the block's usual
    # bound for a cut, so the copy stays a tile; with J's room as a big block
    # has it (SPLIT_TILE_BIG_J) that dimension is cut and the first part is a
    # block.  Against numpy.
    order = (2, 1, 0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_TILE_BIG_J", False)
        uncut, _ = _copy_plan(dtype, sizes, order, "gather")
    assert uncut.rest is None and uncut.main.mode == "tile"
    assert uncut.main.dst_bytes >= _planner.SPLIT_MIN_BYTES
    plan, _ = _copy_plan(dtype, sizes, order, "gather")
    assert plan.main.mode == "block" and plan.main.block.j == j
    _check_cut_copy(dtype, sizes, order, "gather", sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op,j", [
    ("uint8", (28, 398, 775), (2, 1, 0), "scatter", [(28, 308450), (36, 775)]),   # J of 2 x 28 beside 398
    ("float32", (773, 758, 4), (2, 1, 0), "gather", [(4, 2343736), (256, 3092)]),  # 2 x 4 beside 758
    ("uint8", (18, 44, 1396, 8), (3, 2, 0, 1), "gather", [(8, 1105632), (128, 792)]),
])
def test_blocks_of_short_destination_rows_cut_for_a_longer_j(dtype, sizes, order, op, j, threads):
    # 8.1-9.4 MB: the block's J group took a small divisor of its second
    # dimension (2 or 4 values, destination rows of 32-56 bytes); cut at the
    # most multiples of a big block's room for it (SPLIT_BLOCK_BIG_J_BYTES),
    # the first part is a block with a J of 1008-1024 values, the rest
    # copied after it.  Without the rule the copy is not cut.  Against numpy.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_BLOCK_BIG_J_BYTES", 0)
        uncut, _ = _copy_plan(dtype, sizes, order, op)
    assert uncut.rest is None and uncut.main.mode == "block"
    assert uncut.main.dst_bytes >= _planner.SPLIT_MIN_BYTES
    assert uncut.main.block.j_elems * np.dtype(dtype).itemsize <= _planner.SPLIT_BLOCK_BIG_J_BYTES
    plan, _ = _copy_plan(dtype, sizes, order, op)
    assert plan.main.block.j == j and plan.rest is not None
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


def test_group_stops_with_j_pieces():
    # J (the destination's fastest dimension, 8 values) takes 4 of 1396 with
    # a big block's room (1024 values): with j_pieces, 1396 is cut at 1280,
    # 10 x 128, after the other stops; none where J takes a whole dimension,
    # or K is shorter than 4 values.
    merged = _planner.merge_dims([(8, 1105632, 1), (1396, 792, 8), (44, 18, 11168), (18, 1, 491392)])
    cut = (next(i for i, t in enumerate(merged) if t[0] == 1396), 1280)
    stops = list(_planner.group_stops(merged, 1, big_j=True, j_pieces=True))
    assert stops[-1] == cut and cut not in list(_planner.group_stops(merged, 1, big_j=True))
    for merged in ([(4, 4, 40), (10, 1, 4000), (10, 40000, 1)], [(2, 1, 11168), (1396, 16, 8), (8, 2, 1)]):
        assert list(_planner.group_stops(merged, 1, big_j=True, j_pieces=True)) == \
            list(_planner.group_stops(merged, 1, big_j=True))
    assert list(_planner.group_stops([(4, 1, 11168), (1396, 16, 8), (8, 4, 1)], 1, big_j=True,
                                     j_pieces=True))[-1] == (1, 1280)


def test_reversals_cut_at_the_destination_groups_stop(threads, no_slabs):
    # uint8 5 x 443 x 13 x 89 turned over and scattered: the cut at K's stop
    # leaves no block, the one at J's does (SPLIT_OTHER_STOPS); element by
    # element without it.  Scattered and gathered against numpy.
    sizes, order = (5, 443, 13, 89), (3, 2, 1, 0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_OTHER_STOPS", False)
        uncut, _ = _copy_plan("uint8", sizes, order, "scatter")
    assert uncut.rest is None and uncut.main.mode == "strided"
    _check_cut_copy("uint8", sizes, order, "scatter", 7)
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    buf = np.random.default_rng(8).integers(0, 256, desc.total_tensor_size_in_bytes, dtype=np.uint8)
    assert ds.gather(buf, desc).tobytes() == _numpy_gather(buf, desc).tobytes()


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("float16", (2, 2062, 30), (2, 1, 0), "gather"),       # 2062 = 2 x 1031: K of 2 x 2, a tile before
    ("float64", (2, 1546, 12), (2, 1, 0), "gather"),       # 1546 = 2 x 773: a block of K = 4 before
    ("int16", (5, 9, 2062, 3), (3, 2, 1, 0), "scatter"),   # element by element before
    ("uint32", (3, 2062, 5), (2, 1, 0), "scatter"),
])
def test_copies_cut_along_a_dimension_k_took_a_small_divisor_of(dtype, sizes, order, op, threads,
                                                                  cut_small_copies, no_slabs):
    # A dimension K took only a small divisor of (2 of 2062) is cut at the
    # most multiples of K's room (SPLIT_PIECES): the first part a block
    # with a K of about 1024 values, the rest copied after it.  Against numpy.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_PIECES", False)
        uncut, _ = _copy_plan(dtype, sizes, order, op)
    assert uncut.rest is None
    assert uncut.main.mode != "block" or uncut.main.block.k_elems < 8
    plan, _ = _copy_plan(dtype, sizes, order, op)
    assert plan.main.mode == "block" and max(plan.main.block.k_elems, plan.main.block.j_elems) >= 1000
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (2, 163, 14, 21, 5, 15), (5, 4, 0, 2, 1, 3), "gather"),   # K of 21 -> 1008 and 399
    ("int16", (4, 26, 557, 5, 3), (3, 2, 0, 4, 1), "scatter"),          # K of 15 -> 1020 and 195
    ("float16", (20, 8, 11, 127, 10), (3, 0, 4, 2, 1), "scatter"),      # K of 10 -> 1020 and 250
])
def test_blocks_of_short_source_runs_cut_in_two(dtype, sizes, order, op, threads, cut_small_copies):
    # Blocks whose K (source runs) is under SPLIT_SHORT_BLOCK_BYTES are cut
    # where a dimension stops K short: the first part's K longer, its J as
    # long.  Both parts against numpy (a gather into a fresh array and into
    # out=, or a scatter with guard bytes).
    plan, _ = _copy_plan(dtype, sizes, order, op)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_SHORT_BLOCK_BYTES", 0)
        mp.setattr(_planner, "SPLIT_SHORT_J_BYTES", 0)
        whole, _ = _copy_plan(dtype, sizes, order, op)
    assert whole.rest is None and whole.main.mode == "block"
    assert whole.main.block.k_elems * whole.main.width < _planner.SPLIT_SHORT_BLOCK_BYTES
    assert plan.main.block.k_elems > whole.main.block.k_elems
    assert plan.main.block.j_elems >= whole.main.block.j_elems
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (53, 1, 1, 175, 6), (1, 2, 4, 3, 0), "scatter"),          # 53 x 210 -> 53 x 1020
    ("uint8", (62, 1, 67, 2, 52), (1, 4, 2, 3, 0), "scatter"),          # the rest a tile
    ("int16", (2, 1, 1, 47, 22, 30), (5, 2, 1, 3, 0, 4), "gather"),     # 30 x 44 -> 30 x 1012
    ("float16", (2, 2, 23, 13, 4, 23), (3, 0, 4, 1, 5, 2), "scatter"),
    ("uint32", (3, 29, 1, 1, 12, 61), (3, 5, 2, 1, 0, 4), "gather"),    # 61 x 36 -> 61 x 1008
])
def test_blocks_of_short_runs_on_both_sides_cut_in_two(dtype, sizes, order, op, threads, cut_small_copies):
    # Blocks whose J (destination runs) is under SPLIT_SHORT_J_BYTES and
    # whose K is under SPLIT_SHORT_JK_BYTES, though not under
    # SPLIT_SHORT_BLOCK_BYTES, are cut where a dimension stops K short: the
    # first part's K longer, its J as long.  Both parts against numpy.
    plan, _ = _copy_plan(dtype, sizes, order, op)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_SHORT_J_BYTES", 0)
        whole, _ = _copy_plan(dtype, sizes, order, op)
    assert whole.rest is None and whole.main.mode == "block"
    w = whole.main.width
    assert whole.main.block.j_elems * w < _planner.SPLIT_SHORT_J_BYTES
    assert _planner.SPLIT_SHORT_BLOCK_BYTES <= whole.main.block.k_elems * w < _planner.SPLIT_SHORT_JK_BYTES
    assert plan.main.block.k_elems > whole.main.block.k_elems
    assert plan.main.block.j_elems >= whole.main.block.j_elems
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


@pytest.fixture
def cut_small_tiny_blocks(monkeypatch):
    # Tiny blocks cut at any size (split_tiny_block), plans made by
    # descriptor dropped on the way in and out.
    yield from _planner_setting(monkeypatch, "SPLIT_TINY_MIN_BYTES", 0)


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (2, 107, 5, 8, 9), (4, 1, 0, 3, 2), "scatter"),          # J of 80 stopped at 107: 960
    ("int16", (5, 5, 538, 3, 2), (2, 4, 3, 1, 0), "gather"),           # J took 2 of 538: 1020
    ("float16", (53, 4, 2, 3, 12, 12), (1, 2, 5, 0, 4, 3), "gather"),  # K of 36 stopped at 53: 1008
    ("uint8", (2, 2, 109, 21, 10), (4, 2, 1, 0, 3), "gather"),         # K of 84 stopped at 109: 1008
    ("int16", (15, 326, 11), (2, 1, 0), "scatter"),
    ("float32", (10, 1149, 6), (2, 1, 0), "scatter"),
    ("uint32", (10, 254, 11), (2, 1, 0), "scatter"),
    ("float64", (5, 4, 2, 113, 11), (1, 4, 3, 0, 2), "scatter"),
    ("int16", (4, 4, 2217, 2, 2), (3, 4, 2, 0, 1), "gather"),
], ids=str)
def test_tiny_blocks_cut_in_two(dtype, sizes, order, op, threads, cut_small_tiny_blocks, no_slabs):
    # Blocks of under SPLIT_TINY_BLOCK_BYTES are cut where their block then
    # holds SPLIT_TINY_GROW times as many values or more: both parts gathered
    # (into a fresh array and into out=) and scattered (guard bytes after)
    # against numpy, the other way too.
    plan, desc = _copy_plan(dtype, sizes, order, op)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "SPLIT_TINY_BLOCK_BYTES", 0)
        whole, _ = _copy_plan(dtype, sizes, order, op)
    assert whole.rest is None and whole.main.mode == "block"
    b, q = whole.main.block, plan.main.block
    assert b.j_elems * b.k_elems * whole.main.width < _planner.SPLIT_TINY_BLOCK_BYTES
    assert q.j_elems * q.k_elems >= _planner.SPLIT_TINY_GROW * b.j_elems * b.k_elems
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))
    _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes) + 1))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint32", (8, 2089, 2), (2, 1, 0), "gather"),
    ("float32", (8, 1327, 7), (2, 1, 0), "gather"),
    ("uint8", (3, 28, 9419), (2, 1, 0), "scatter"),
    ("float16", (4, 97, 151, 3, 2), (3, 4, 2, 1, 0), "gather"),
    ("float64", (12, 1451, 4), (2, 1, 0), "gather"),
    ("uint32", (6, 7, 2, 6577), (3, 1, 0, 2), "scatter"),
])
def test_element_by_element_copies_cut_in_two(dtype, sizes, order, op, threads, no_slabs):
    # Copies otherwise element by element, cut where a dimension stops the
    # block (any size): both parts against numpy.
    _check_cut_copy(dtype, sizes, order, op, sum(sizes))


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint32", (3, 5, 9, 6, 7, 7), (4, 2, 1, 0, 5, 3), "gather"),
    ("uint32", (4, 19, 3, 19, 5, 5), (5, 3, 1, 2, 0, 4), "scatter"),
    ("float32", (33, 3, 2, 118, 2), (4, 0, 3, 1, 2), "gather"),
    ("float32", (36, 23, 6, 4), (3, 1, 0, 2), "scatter"),
    ("float32", (7, 2, 4, 20, 49, 2), (3, 0, 5, 1, 4, 2), "gather"),
    ("float32", (34, 26, 13, 2, 4), (2, 0, 4, 1, 3), "scatter"),
    ("uint32", (16, 4, 5, 21, 3), (3, 0, 2, 4, 1), "gather"),
    ("uint32", (6, 12, 20, 7), (2, 1, 3, 0), "gather"),
])
def test_blocks_of_short_source_runs(dtype, sizes, order, op, threads):
    # Blocks whose K is 4-6 four-byte values (copies that would otherwise go
    # element by element): gathered and scattered against numpy.
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    plan = transfer._plan(desc, op).describe()
    assert plan["mode"] == "block" and plan["rest"] is None
    _check_gather_and_scatter(desc, np.random.default_rng(sum(sizes)))


@pytest.mark.parametrize("op", ["gather", "scatter"])
def test_streaming_copy_cut_in_two(op, threads):
    # 15.8 MB, streamed: a fresh output takes the plan without streaming
    # stores, rest included.
    _check_cut_copy("int16", (79, 19, 251, 21), (3, 2, 0, 1), op, 7)


def test_rest_outside_the_copy_refused(monkeypatch):
    # A rest whose reach passes the whole copy's extent on either side never
    # reaches the kernels.
    sizes, src, dst = [2, 50, 3, 83, 28], [1400, 1, 2800, 8400, 50], [348600, 6972, 2324, 28, 1]
    monkeypatch.setattr(_planner, "SPLIT_MIN_BYTES", 0)
    good = _engine.Plan(sizes, src, dst, 8)
    assert good.layout.rest is not None
    real = _planner.split_for_block
    for shift in [(1, 0), (0, 1), (-good.layout.rest_src - 1, 0)]:
        def shifted(main, dims, width, shift=shift):
            first, rest, rs, rd, rest_dims = real(main, dims, width)
            return first, rest, rs + shift[0], rd + shift[1], rest_dims
        monkeypatch.setattr(_planner, "split_for_block", shifted)
        with pytest.raises(ValueError, match="outside the copy"):
            _engine.Plan(sizes, src, dst, 8)


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("float32", (39, 17, 2, 7, 17, 2), (5, 1, 3, 0, 4, 2), "scatter"),
    ("float16", (260, 7, 397, 2), (3, 0, 2, 1), "scatter"),
    ("uint8", (2, 7, 608, 43, 3), (2, 4, 1, 3, 0), "gather"),
    ("float64", (2, 2, 2, 33, 180, 2), (5, 1, 0, 3, 4, 2), "scatter"),
    ("int16", (4, 15, 17, 68, 7, 2), (1, 4, 3, 2, 5, 0), "gather"),
    ("uint8", (2, 7, 38, 71, 34, 2), (3, 0, 2, 5, 4, 1), "gather"),   # one moved, one kept before it
], ids=str)
def test_strided_plans_with_far_revisited_dimensions_innermost(dtype, sizes, order, op, threads, no_slabs):
    # Element-by-element plans whose tasks' lines a slower dimension comes
    # back to from far away run that dimension innermost (revisit_order):
    # the same outer dimensions, tile and rows, in another order.  Gathers
    # and scatters (guard bytes and the gaps between elements included)
    # against numpy.
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "strided"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "STRIDED_REVISIT_ORDER", False)
        before, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.outer != before.outer and sorted(plan.outer) == sorted(before.outer)
    assert (plan.tile, plan.inner, plan.tasks) == (before.tile, before.inner, before.tasks)
    _gather_and_scatter(dtype, sizes, order, op, lambda p: None)
    check()


@pytest.mark.parametrize("dtype,sizes,order,op,batch", [
    ("int16", (9, 2, 59, 262, 2), (0, 2, 4, 3, 1), "scatter", 131),     # 262 = 2 x 131
    ("float16", (2, 89, 27, 3, 5), (4, 2, 0, 1, 3), "scatter", 89),      # 2 x 89 = 178
    ("uint32", (86, 9, 53, 15, 7, 2), (1, 5, 3, 2, 0, 4), "scatter", None),
], ids=str)
def test_strided_batches_of_a_large_divisor(dtype, sizes, order, op, batch, threads, no_slabs):
    # Short strided rows whose batch dimension has no divisor between 2 and
    # the batch's size take its largest divisor up to BATCH_WHOLE_FACTOR
    # times that (BATCH_GROW).  Gathers and scatters against numpy, guard
    # bytes and the gaps between elements included.
    plan, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_planner, "BATCH_GROW", False)
        before, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == before.mode == "strided" and plan.inner == before.inner
    assert plan.tile[0] > 2 * before.tile[0] and plan.tasks < before.tasks
    if batch is not None:
        assert plan.tile[0] == batch
    _gather_and_scatter(dtype, sizes, order, op, lambda p: None)



# Runs whose source-fast side is a group of dimensions, planned as blocks of
# runs (dtype, sizes, order, run bytes, ops).
RUN_BLOCK_CASES = [
    ("uint8", (81, 4, 25, 4, 12, 5), (4, 1, 2, 0, 3, 5), 5, ("gather", "scatter")),
    ("uint8", (7, 9, 31, 12, 3), (3, 1, 0, 2, 4), 3, ("gather", "scatter")),
    ("float16", (6, 7, 5, 11, 3), (1, 3, 0, 2, 4), 6, ("gather", "scatter")),
    ("float32", (6, 7, 5, 11, 3), (1, 3, 0, 2, 4), 12, ("gather", "scatter")),
    ("uint8", (33, 7, 9, 10, 7), (3, 1, 0, 2, 4), 7, ("gather", "scatter")),
    ("float32", (9, 13, 6, 7, 5), (3, 1, 0, 2, 4), 20, ("scatter",)),
    ("int16", (5, 11, 70, 9, 14), (3, 1, 0, 2, 4), 28, ("scatter",)),
]


@pytest.mark.parametrize("dtype,sizes,order,run,op", [c[:4] + (op,) for c in RUN_BLOCK_CASES for op in c[4]],
                         ids=str)
def test_blocks_of_runs(dtype, sizes, order, run, op, threads, monkeypatch):
    # The run tile's kernel over a block's offset tables (dmls_run_block):
    # the planner's plan checked, then gathers and scatters (guard bytes,
    # the gaps between runs) against numpy; with RUN_BLOCKS off, the run
    # tile, whose tasks are smaller and read fewer than
    # RUN_BLOCK_TILE_BYTES of each source row.
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and plan.width == run and plan.l2 == 0 and not plan.stream
    assert not plan.block.whole and not plan.block.next and plan.block.lines == 1
    check()
    monkeypatch.setattr(_planner, "RUN_BLOCKS", False)
    tile, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert tile.mode == "tile" and tile.width == run and tile.tile[0] * run < _planner.RUN_BLOCK_TILE_BYTES
    assert tile.tile[0] * tile.segment_len < plan.block.k_elems * plan.block.j_elems


@pytest.mark.parametrize("dtype,sizes", [("int16", (169, 14, 391)), ("float32", (5, 268, 243)),
                                          ("uint8", (3, 60, 4096)), ("float16", (80, 9, 1100))], ids=str)
def test_longer_rows_in_source_order(dtype, sizes, threads):
    # Rows of 513 bytes to 4 KiB swapped along the dimension before them
    # (a copy that does not stream: the order whose innermost dimension is
    # the shorter), gathers and scatters against numpy (guard bytes).
    def check_plan(plan):
        assert plan.mode == "memcpy" and not plan.stream
        assert min(plan.outer[-1][1:]) == plan.inner[0] * plan.width   # rows back to back on one side

    _gather_and_scatter(dtype, sizes, (1, 0, 2), "scatter", check_plan)


# Runs whose run tile would write less than a line of each destination row
# a pass, rows that hold more (dtype, sizes, order, op, run bytes).
PARTIAL_RUN_ROWS = [
    ("int16", (2, 8, 3, 60, 17, 3), (2, 3, 4, 1, 0, 5), "scatter", 6),   # 12 of each 96 bytes
    ("uint8", (3, 242, 51, 2, 6), (2, 0, 3, 1, 4), "gather", 6),
    ("float16", (2, 3, 32, 35, 27, 12), (3, 4, 1, 2, 0, 5), "scatter", 24),
    ("float32", (176, 17, 30, 2, 4), (2, 1, 3, 0, 4), "gather", 16),
    ("float64", (60, 2, 2, 95, 2), (3, 0, 2, 1, 4), "scatter", 16),
    ("int16", (142, 50, 18, 3, 7), (3, 2, 0, 1, 4), "gather", 14),
]


@pytest.mark.parametrize("dtype,sizes,order,op,run", PARTIAL_RUN_ROWS, ids=str)
def test_runs_in_short_pieces_of_longer_rows_are_blocks(dtype, sizes, order, op, run, threads, monkeypatch):
    # Where the run tile would write fewer than RUN_BLOCK_PIECE_BYTES of
    # each destination row a pass (its source rows' runs, jn of them) and
    # the rows hold more, a block of runs takes the dimensions that fill
    # them: the plan checked against the tile's, then gathers and scatters
    # against numpy (guard bytes, the gaps between runs).
    plan, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and plan.width == run
    monkeypatch.setattr(_planner, "RUN_BLOCK_PIECE_BYTES", 0)
    tile, _ = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert tile.mode == "tile" and tile.width == run
    piece = tile.inner[0] * run
    assert piece < 72 and tile.tile[2] > piece and tile.tile[0] * run >= _planner.RUN_BLOCK_TILE_BYTES
    assert plan.block.j_elems > tile.inner[0]
    monkeypatch.undo()
    _gather_and_scatter(dtype, sizes, order, op, lambda p: None)


def test_runs_in_short_pieces_bound():
    # The bound itself, on a plan alone (17 MB, no memory): an int16
    # scatter whose tile wrote 12 of each 96 bytes a pass (8 passes over
    # every destination line) is a block; one whose pieces are 90 bytes
    # stays a tile.
    def plan(dtype, sizes, order, op):
        return _permutation_plan_and_check(dtype, sizes, order, order, op)[0]

    assert plan("int16", (2, 8, 3, 3512, 17, 3), (2, 3, 4, 1, 0, 5), "scatter").mode == "block"
    kept = plan("int16", (268, 3, 385, 15, 3), (1, 3, 2, 0, 4), "gather")
    assert kept.mode == "tile" and kept.inner[0] * kept.width == 90


@pytest.mark.parametrize("change,match", [
    (lambda b: setattr(b, "whole", True), "in place"),
    (lambda b: setattr(b, "next", True), "in place"),
    (lambda b: setattr(b, "stage_src", True), "unstaged"),
    (lambda b: setattr(b, "lines", 4), "one line tall"),
])
def test_engine_refuses_blocks_of_runs_it_would_not_run(monkeypatch, change, match):
    # A block of runs runs only in place: the engine refuses a plan that asks
    # for a whole block, the next block, staging or taller tiles.
    plan_copy = _planner.plan_copy

    def broken(*args, **kwargs):
        plan = plan_copy(*args, **kwargs)
        assert plan.main.mode == "block" and plan.main.width == 5
        change(plan.main.block)
        return plan

    monkeypatch.setattr(_planner, "plan_copy", broken)
    sizes, order = (81, 4, 25, 4, 12, 5), (4, 1, 2, 0, 3, 5)
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    packed = ds.BufferTensorDesc("uint8", sizes)
    with pytest.raises(ValueError, match=match):
        _engine.Plan(list(sizes), desc.effective_strides, packed.effective_strides, 8)


@pytest.mark.parametrize("dtype,sizes,order", [
    ("uint8", (480, 1201), (1, 0)),              # rows of 480 bytes
    ("uint8", (304, 2003), (1, 0)),
    ("uint8", (3, 944, 1001), (0, 2, 1)),        # 944
    ("int16", (3, 488, 38, 13), (0, 2, 3, 1)),   # 976: NCHW to NHWC, 488 channels
    ("uint8", (2, 272, 36, 37), (0, 2, 3, 1)),   # 272
], ids=str)
@pytest.mark.parametrize("skew", [0, 16, 37])
def test_long_rows_back_to_back_go_through_l2_as_one_run(dtype, sizes, order, skew, threads, monkeypatch):
    # A streaming scatter whose destination rows lie back to back, longer
    # than a band of whole source lines takes (CONTIG_BAND_BYTES: 257 one-
    # byte values, 513 bytes of two-byte ones), goes through L2, its chunks
    # of whole rows written out as one run; against numpy, the destination
    # at several line offsets (guard bytes around it).  With the bound
    # raised, the rows take the contiguous band (nt_contig) as before.
    strided, values, plan_of = _scatter_case(dtype, sizes, order, 3)
    w, n = values.itemsize, strided.total_tensor_size_in_bytes
    with _stream_threshold(0):
        plan = plan_of()
        row = plan.inner[0] * w
        assert plan.mode == "tile" and plan.stream and plan.tile[2] == row
        assert _planner.CONTIG_BAND_BYTES * w // 64 < row <= 1024
        assert plan.l2 == 2
        _check_scatter(values, strided, _at_line_offset(n + 128, skew, skew), offset=64)
    monkeypatch.setattr(_planner, "CONTIG_BAND_BYTES", 64 * row)
    with _stream_threshold(0):
        plan = plan_of()
        assert plan.mode == "tile" and plan.stream and plan.l2 == 0
        _check_scatter(values, strided, _at_line_offset(n + 128, skew, skew + 1), offset=64)


# Two-byte pixels of whole lines (64-224 channels: rows of 128-448 bytes)
# into a destination off a line boundary take each row's line-aligned bands
# and join a row's last line in part with the next row's first (nt_shifted),
# the joined lines read a line of each plane at a time into scratch where the
# planes lie a multiple of 1 KiB apart (32 x 64 values) and in place, asked
# for ahead, where they do not; 256 channels (rows of 512 bytes) and skews
# that split a value go through the contiguous tile.  Streamed, on 1 and 2
# threads, against numpy, guard bytes around.
@pytest.mark.parametrize("dtype", ["int16", "float16"])
@pytest.mark.parametrize("channels", [64, 96, 224, 256])
@pytest.mark.parametrize("plane", [(32, 64), (29, 71)], ids=str)
@pytest.mark.parametrize("skew", [2, 16, 48, 62, 33])
def test_two_byte_pixels_of_whole_lines_off_a_line(dtype, channels, plane, skew, threads):
    _check_pixels_scattered(dtype, (1, channels) + plane, skew)


def _check_pixels_scattered(dtype, sizes, skew):
    # An NCHW to NHWC scatter of sizes, streamed, into a destination skew
    # bytes past a line: planned as a tile of whole pixels, not through L2.
    # Returns the plan.
    strided, values, plan_of = _scatter_case(dtype, sizes, (0, 2, 3, 1), sizes[1] + skew)
    n = strided.total_tensor_size_in_bytes
    with _stream_threshold(0):
        plan = plan_of()
        assert plan.mode == "tile" and plan.stream and not plan.l2 and plan.tile[2] == sizes[1] * values.itemsize
        _check_scatter(values, strided, _at_line_offset(n + 192, 0, skew), offset=64 + skew,
                       check_alignment=False)
    return plan


# One-byte pixels of whole lines (128-1024 channels) into a destination off
# a line boundary take the joined lines too, each plane's line read into
# scratch a line at a time, where the planes lie a multiple of 1 KiB apart
# (32 x 64 values) or the pixels are more than 512 bytes; the others (29 x 71
# values) the contiguous tile.  Pixels of 512 bytes take the line-aligned
# bands where the destination starts on a line.  Planes at most 1 KiB apart
# (20 x 23 values) keep the bands off a line boundary.  Every skew a line can
# have, streamed, on 1 and 2 threads, against numpy, guard bytes around.
@pytest.mark.parametrize("channels", [128, 192, 512, 640, 1024])
@pytest.mark.parametrize("plane", [(32, 64), (29, 71), (20, 23)], ids=str)
@pytest.mark.parametrize("skew", [0, 1, 16, 33, 63])
def test_one_byte_pixels_of_whole_lines_off_a_line(channels, plane, skew, threads):
    _check_pixels_scattered("uint8", (1, channels) + plane, skew)


# Two-byte pixels of more than 1 KiB (544-960 channels), cut into segments
# of 64 channels, into a destination off a line boundary: each pixel's
# columns before its first line boundary and past its last go through the
# register micro-blocks, beside the segments' line-aligned bands.  Streamed,
# on 1 and 2 threads, against numpy, guard bytes around.
@pytest.mark.parametrize("dtype", ["int16", "float16"])
@pytest.mark.parametrize("channels", [544, 640, 960])
@pytest.mark.parametrize("skew", [2, 16, 46, 62])
def test_two_byte_columns_before_and_past_the_line_bands(dtype, channels, skew, threads):
    assert _check_pixels_scattered(dtype, (1, channels, 13, 29), skew).segments > 1


# Pixels of 512 or 1024 bytes of two to eight bytes a value (at most 512
# values) go through the contiguous tile wherever the destination starts,
# line-aligned or not; its bands of under 256 bytes of each plane ask for the
# band that far on.  Streamed, on 1 and 2 threads, against numpy, guard bytes
# around.
@pytest.mark.parametrize("dtype,channels", [("int16", 256), ("int16", 512),
                                            ("float32", 128), ("float32", 256), ("float64", 64),
                                            ("float64", 128), ("int16", 184), ("float32", 156)], ids=str)
@pytest.mark.parametrize("skew", [0, 16, 48])
def test_pixels_of_512_and_1024_bytes(dtype, channels, skew, threads):
    _check_pixels_scattered(dtype, (1, channels, 13, 29), skew)


# Transposes into destination rows a multiple of 512 bytes apart, from
# source rows more than 1 KiB apart, streamed: two- to eight-byte values go
# through the wide bands (up to four lines of each destination row at a time,
# chunks of 2 KiB of each source row, eight source rows side by side).  Shapes
# give bands left over past the wide ones, chunks in part, source rows a
# multiple of 4 KiB apart, and a row count that is not a multiple of a
# micro-block (which keeps the one-line bands).  Gathered from random bytes
# into a preallocated output and scattered into random bytes with guard
# bytes around, line-aligned, against numpy; 1 and 2 threads.
@pytest.mark.parametrize("dtype,rows,cols", [
    ("int16", 256, 1100), ("float16", 512, 2048), ("uint16", 768, 1030),
    ("float32", 768, 1500), ("float32", 1024, 1024), ("int32", 384, 700), ("float32", 640, 2051),
    ("float64", 320, 1500), ("float64", 512, 512), ("uint64", 192, 300), ("float64", 256, 771),
], ids=str)
def test_transposes_into_rows_a_multiple_of_512_bytes_apart(dtype, rows, cols, threads):
    w = np.dtype(dtype).itemsize
    # scatter: the values (rows x cols, source rows cols * w apart) into the
    # column-major buffer, destination rows rows * w apart
    strided, values, plan_of = _scatter_case(dtype, (rows, cols), (1, 0), rows + cols)
    n = strided.total_tensor_size_in_bytes
    assert rows * w % 512 == 0 and cols * w > 1024
    with _stream_threshold(0):
        plan = plan_of()
        assert plan.mode == "tile" and plan.stream and not plan.l2 and plan.tile[2] == rows * w
        _check_scatter(values, strided, _at_line_offset(n + 192, 0, cols), offset=64)
        # gather: the column-major buffer (source rows rows * w apart) into a
        # line-aligned output of cols x rows (destination rows rows * w apart)
        back = ds.BufferTensorDesc(dtype, [cols, rows], strides=[1, cols])
        buf = _random_buffer(back.total_tensor_size_in_bytes, rows)
        expect = _numpy_gather(buf, back)
        raw = _at_line_offset(expect.nbytes, 0, cols + 1)
        out = np.ndarray(expect.shape, expect.dtype, buffer=raw)
        assert ds.gather(buf, back, out=out) is out and out.tobytes() == expect.tobytes()


def _scatter_case(dtype, sizes, order, seed):
    """A scatter of random values into the ``order`` permutation of
    ``sizes``: its strided descriptor, the values, and a function that
    returns the planner's plan of it (made when called)."""
    strided = ds.BufferTensorDesc.from_layout(dtype, list(sizes), order)
    packed = ds.BufferTensorDesc(dtype, list(sizes))
    values = _numpy_gather(_random_buffer(packed.total_tensor_size_in_bytes, seed), packed)
    return strided, values, lambda: _planner.plan_copy(list(sizes), packed.effective_strides,
                                                       strided.effective_strides, strided.element_bits).main


@pytest.mark.parametrize("dtype,sizes", [("uint8", (320, 1201)), ("uint8", (768, 1031)), ("int16", (288, 1201)),
                                         ("int16", (512, 333))], ids=str)
@pytest.mark.parametrize("skew", [16, 40])
def test_long_rows_of_whole_lines_back_to_back_off_a_line(dtype, sizes, skew, threads):
    # Rows of whole lines back to back (320-1024 bytes: a band of 16 KiB
    # takes less than a line of each source row), the destination off a
    # line boundary: the contiguous band in pieces of whole micro-block rows
    # (not through L2); scattered against numpy, guard bytes around.  (One-
    # byte source rows of at most 1 KiB keep the line-aligned bands instead:
    # see test_one_byte_bands_from_close_rows_into_whole_lines.)
    strided, values, plan_of = _scatter_case(dtype, sizes, (1, 0), 5)
    w, n = values.itemsize, strided.total_tensor_size_in_bytes
    with _stream_threshold(0):
        plan = plan_of()
        row = plan.inner[0] * w
        assert plan.mode == "tile" and plan.stream and not plan.l2 and plan.tile[2] == row and row % 64 == 0
        assert _planner.CONTIG_BAND_BYTES // row < 64 // w
        _check_scatter(values, strided, _at_line_offset(n + 128, skew, skew), offset=64)


@pytest.mark.parametrize("dtype,sizes,order,op", [
    ("uint8", (35, 32, 3, 28, 26), (1, 3, 2, 4, 0), "gather"),       # 35 rows of k: 16 + 16 + 3
    ("uint8", (40, 8, 8, 38, 14), (0, 4, 3, 1, 2), "scatter"),      # 532: a last tile of 20
    ("int16", (14, 25, 32, 20), (3, 1, 2, 0), "scatter"),           # 20
    ("int16", (18, 8, 38, 3, 39), (4, 3, 0, 2, 1), "scatter"),      # 117
    ("float32", (13, 22, 24, 4, 21), (1, 3, 2, 4, 0), "gather"),    # 13
    ("float32", (32, 4, 17, 33), (3, 1, 0, 2), "scatter"),          # 33
    ("float64", (23, 17, 32, 5), (1, 3, 0, 2), "scatter"),          # 5
    ("float64", (20, 31, 6, 21), (3, 1, 2, 0), "scatter"),          # 21
], ids=str)
def test_streamed_blocks_with_rows_of_k_past_the_last_micro_block(dtype, sizes, order, op, threads):
    # Blocks in place with streaming stores whose K is not a whole number of
    # micro-blocks: the rows past the last whole micro-block row go through
    # one more micro-block row moved back into the tile's buffer, and out
    # with ordinary stores; gathered and scattered against numpy.
    with _stream_threshold(0):
        def check_plan(plan):
            n = 16 // plan.width
            assert plan.mode == "block" and plan.stream and not plan.l2 and not plan.block.whole
            assert plan.block.k_elems % n != 0 and plan.block.k_elems > n

        _gather_and_scatter(dtype, sizes, order, op, check_plan)


# Tiles contiguous on both sides (a permutation that swaps the last two
# dimensions of a batch; execute.c, packed_tiles): transposed into a buffer
# in register blocks, the last block of each side moved back to end there,
# a side of fewer values than a micro-block padded (copied first, its
# values past the side written into the rows after), and runs of tiles
# whose destinations lie back to back written out as one.  Each kind of
# block by shape: padded, whole micro-blocks, pairs side by side in j (1-
# and 2-byte values), blocks 32 bytes wide; the gather's tiles lie 5 values
# apart in the source and back to back in the destination (runs cut at the
# buffer's size, at a task chunk's end and where the outer dimensions
# carry), the scatter's the other way round (one tile a run); tiles of up
# to 16 KiB, and larger ones, which other paths take.  Tiles of 2-4
# one-byte values a row, or 2-3 two-byte ones, by 16 bytes of j or more and
# of at most 1 KiB are de-interleaved instead (16 or 8 pixels a step, the
# last step moved back: 16, 17, 29, 31 and 100 columns).
PACKED_TILE_SIDES = [(5, 40), (7, 9), (9, 7), (2, 11), (11, 2), (9, 11), (13, 21), (17, 20), (17, 45),
                     (37, 19), (19, 11), (5, 7), (40, 3), (3, 40), (66, 24), (24, 66), (100, 70), (6, 300),
                     (2, 16), (2, 29), (4, 17), (3, 31), (4, 100), (2, 8), (3, 9), (2, 600)]


def _packed_tile_kind(w, kn, jn):
    """The blocks a packed tile of kn x jn w-byte values takes, by shape
    (None where the executor leaves it to other paths)."""
    n, kb = 16 // w, 32 // w
    jb = n if w <= 2 else kb
    min_row = 5 if w == 1 else 8
    if w <= 2 and 2 <= kn <= 4 - (w - 1) and jn * w >= 16 and kn * jn * w <= 1024:
        return "deint"
    if (kn * w < min_row or jn * w < min_row or (w == 2 and kn == 4 and jn >= 8)
            or (w == 4 and 5 <= kn <= 7 and kn * jn * w > 4096)
            or max(kn, n) * jn * w + 16 > 16384 or max(jn, n) * kn * w + 16 > 16384):
        return None
    if kn < n or jn < n:
        return "padded"
    if kn >= kb and jn >= jb:
        return "blocks"
    if w <= 2 and jn >= kb:
        return "jpairs"
    return "micro"


@pytest.mark.parametrize("dtype", WIDTH_DTYPES)
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "best"])
@pytest.mark.parametrize("stream", [False, True], ids=["cached", "streamed"])
def test_runs_of_packed_tiles(dtype, level, stream, threads):
    w = np.dtype(dtype).itemsize
    kinds = set()
    with _stream_threshold(0 if stream else 1 << 60):
        for kn, jn in PACKED_TILE_SIDES:
            for groups in (4, 150):
                rng = np.random.default_rng(kn * 1000 + jn * 10 + groups)
                outer = 3 if groups < 150 else (1 << 17) // (kn * groups * jn * w) + 1
                sg = kn * jn + 5                              # tiles apart in the source, values
                desc = ds.BufferTensorDesc(dtype, [outer, groups, kn, jn], [groups * sg + 7, sg, 1, kn])
                plan = transfer._plan(desc, "gather").describe()
                kind = _packed_tile_kind(w, kn, jn)
                if (plan["mode"] == "tile" and plan["tile"] == (kn, w, jn * w) and plan["inner"] == (jn, kn * w, w)
                        and plan["l2"] == "none" and plan["tile_pieces"] is None and plan["segment"] == jn
                        and plan["outer"][-1] == (groups, sg * w, kn * jn * w) and plan["stream"] == stream):
                    kinds.add(kind)
                with _isa_level(level):
                    _check_gather_out(desc, rng)
                    _check_gather_and_scatter(desc, rng)
            # one tile alone (no outer dimension: a single task)
            single = ds.BufferTensorDesc(dtype, [kn, jn], [1, kn])
            with _isa_level(level):
                _check_gather_and_scatter(single, np.random.default_rng(kn * 7 + jn))
    expect = {"padded", "blocks", "micro"} | ({"jpairs", "deint"} if w <= 2 else set())
    if w == 8:
        expect.discard("padded")   # every side has at least 2 values
    assert expect <= kinds


# Two-byte blocks whose tiles have 16 columns of j or more go as pairs of
# micro-blocks side by side in j in every band of 8 rows of k (one
# 32-byte store a destination row); narrower ones as pairs one above the
# other.  Blocks of 1035, 120, 40 and 13 columns (120 and 40: an odd number
# of 8-column micro-blocks, the last one alone), 59, 39, 704 and 742 rows
# of k (a ragged last band in most).  (dtype, sizes, layout order, op, K x J)
TWO_BYTE_BLOCKS = [
    ("int16", (59, 23, 45), (2, 1, 0), "gather", (59, 1035)),
    ("float16", (4, 24, 30, 39), (1, 3, 0, 2), "scatter", (39, 120)),
    ("int16", (40, 12, 16, 22), (2, 1, 3, 0), "scatter", (704, 40)),
    ("float16", (53, 26, 14, 13), (3, 1, 0, 2), "gather", (742, 13)),
]


@pytest.mark.parametrize("dtype,sizes,order,op,split", TWO_BYTE_BLOCKS,
                         ids=[f"{c[0]}-{c[3]}-k{c[4][0]}xj{c[4][1]}" for c in TWO_BYTE_BLOCKS])
@pytest.mark.parametrize("level", [1, 3], ids=["sse2", "avx2"])
def test_two_byte_blocks_as_pairs_side_by_side_or_one_above_the_other(dtype, sizes, order, op, split, level,
                                                                      threads):
    plan, check = _permutation_plan_and_check(dtype, sizes, order, order, op)
    assert plan.mode == "block" and plan.width == 2
    assert (plan.block.k_elems, plan.block.j_elems) == split
    with _isa_level(level):
        check()
