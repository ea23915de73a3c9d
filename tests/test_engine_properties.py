"""The kernels against the reference: random layouts, every code path, big threaded copies.

The reference (``reference.py``) does the byte arithmetic of the memory model
directly; the engine's plan description is used only to prove that each code
path (element width, memcpy run, fill, strided, tiled transposition, nibble,
merged and unmerged dimensions, threaded slabs) is really exercised.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference as ref
from dmlstride import (
    BufferTensorDesc,
    DescriptorError,
    copy_tensor,
    gather,
    get_num_threads,
    scatter,
    set_num_threads,
)
from dmlstride import _engine

seeds = st.integers(0, 2**32 - 1)


def make_desc(layout: ref.Layout) -> BufferTensorDesc:
    return BufferTensorDesc(layout.data_type, layout.sizes, layout.strides, layout.total)


def same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """Equal shape, dtype and bytes (so NaN payloads and -0.0 count)."""
    assert a.shape == b.shape
    assert a.dtype == b.dtype
    assert a.flags.c_contiguous
    assert a.tobytes() == b.tobytes()


# --------------------------------------------------------------------------------------
# the two references agree


@settings(max_examples=80)
@given(layout=ref.layouts(), seed=seeds)
def test_the_two_references_agree(layout, seed):
    eff = layout.effective
    offset = 16
    raw = ref.random_bytes(seed, offset + layout.total + 3)
    a = ref.gather_py(raw, layout.data_type, layout.sizes, layout.strides, offset)
    b = ref.gather_np(raw, layout.data_type, layout.sizes, layout.strides, offset)
    same_bits(a, b)
    if not ref.overlaps(layout.sizes, eff):
        values = ref.random_values(layout.info, layout.sizes, seed + 1)
        x, y = bytearray(raw), bytearray(raw)
        ref.scatter_py(values, x, layout.data_type, layout.sizes, eff, offset)
        ref.scatter_np(values, y, layout.data_type, layout.sizes, eff, offset)
        assert x == y
        # Only the tensor's bytes may differ from the original.
        touched = ref.touched_bytes(layout.data_type, layout.sizes, eff, offset)
        assert all(x[i] == raw[i] for i in range(len(raw)) if i not in touched)


def test_reference_golden_cases():
    # The layouts: padded, broadcast, column-major; and nibble packing.
    padded = b"ABCxxDEFxx"
    assert ref.gather_py(padded, "UINT8", (2, 3), (5, 1)).tobytes() == b"ABCDEF"
    assert ref.gather_py(b"ABC", "UINT8", (2, 3), (0, 1)).tobytes() == b"ABCABC"
    assert ref.gather_py(b"ADBECF", "UINT8", (2, 3), (1, 2)).tobytes() == b"ABCDEF"
    assert ref.pack_nibbles([1, 2, 3, 4, 5]) == bytes([0x21, 0x43, 0x05])
    assert ref.gather_py(bytes([0x21, 0x43, 0x05]), "UINT4", (5,), None).tolist() == [1, 2, 3, 4, 5]
    assert ref.gather_py(bytes([0xF8]), "INT4", (2,), None).tolist() == [-8, -1]
    assert ref.min_size("UINT32", (2, 3), (6, 2)) == 44
    assert ref.min_size("INT4", (9,), None) == 8
    buf = bytearray(b"..........")
    ref.scatter_py(np.frombuffer(b"ABCDEF", np.uint8).reshape(2, 3), buf, "UINT8", (2, 3), (5, 1))
    assert bytes(buf) == b"ABC..DEF.."


# --------------------------------------------------------------------------------------
# gather, scatter, copy_tensor against the reference


@settings(max_examples=500)
@given(data=st.data(), layout=ref.layouts(), seed=seeds)
def test_gather_matches_reference(data, layout, seed):
    kind, offset, aligned, length = data.draw(ref.placements(layout.total))
    raw = ref.random_bytes(seed, length)
    buf = ref.make_buffer(kind, raw)
    desc = make_desc(layout)
    expected = ref.gather_py(raw, layout.data_type, layout.sizes, layout.strides, offset)
    same_bits(gather(buf, desc, offset=offset, check_alignment=aligned), expected)
    # again, once the descriptor has a cached plan
    same_bits(gather(buf, desc, offset=offset, check_alignment=aligned), expected)
    out = np.empty(layout.sizes, dtype=layout.info.dtype)
    assert gather(buf, desc, offset=offset, check_alignment=aligned, out=out) is out
    same_bits(out, expected)
    assert ref.buffer_bytes(buf) == raw


@settings(max_examples=500)
@given(data=st.data(), layout=ref.layouts(), seed=seeds)
def test_scatter_matches_reference_and_round_trips(data, layout, seed):
    kind, offset, aligned, length = data.draw(ref.placements(layout.total, kinds=ref.WRITABLE_KINDS))
    raw = ref.random_bytes(seed, length)
    buf = ref.make_buffer(kind, raw)
    desc = make_desc(layout)
    values = ref.random_values(layout.info, layout.sizes, seed ^ 0x5A5A)
    if ref.overlaps(layout.sizes, layout.effective):
        with pytest.raises(DescriptorError):
            scatter(values, desc, buf, offset=offset, check_alignment=aligned)
        assert ref.buffer_bytes(buf) == raw
        return
    scatter(values, desc, buf, offset=offset, check_alignment=aligned)
    expected = bytearray(raw)
    ref.scatter_py(values, expected, layout.data_type, layout.sizes, layout.strides, offset)
    # The whole buffer: every byte outside the tensor's elements is unchanged.
    assert ref.buffer_bytes(buf) == bytes(expected)
    same_bits(gather(buf, desc, offset=offset, check_alignment=aligned), values)


@st.composite
def copy_cases(draw):
    src = draw(ref.layouts())
    dst = draw(ref.layouts(types=[src.data_type], sizes=src.sizes, overlap=draw(st.integers(0, 7)) == 0))
    return src, dst


@settings(max_examples=400)
@given(data=st.data(), case=copy_cases(), seed=seeds)
def test_copy_tensor_matches_reference(data, case, seed):
    src, dst = case
    skind, soff, saligned, slen = data.draw(ref.placements(src.total))
    dkind, doff, daligned, dlen = data.draw(ref.placements(dst.total, kinds=ref.WRITABLE_KINDS))
    aligned = saligned and daligned
    sraw, draw_ = ref.random_bytes(seed, slen), ref.random_bytes(seed + 1, dlen)
    sbuf, dbuf = ref.make_buffer(skind, sraw), ref.make_buffer(dkind, draw_)
    sdesc, ddesc = make_desc(src), make_desc(dst)
    if ref.overlaps(dst.sizes, dst.effective):
        with pytest.raises(DescriptorError):
            copy_tensor(sbuf, sdesc, dbuf, ddesc, src_offset=soff, dst_offset=doff, check_alignment=False)
        assert ref.buffer_bytes(dbuf) == draw_
        return
    if not aligned:
        soff, doff = 16 * (soff // 16), 16 * (doff // 16)
    copy_tensor(sbuf, sdesc, dbuf, ddesc, src_offset=soff, dst_offset=doff)
    expected = bytearray(draw_)
    ref.copy_py(sraw, expected, src.data_type, src.sizes, src.effective, dst.effective, soff, doff)
    assert ref.buffer_bytes(dbuf) == bytes(expected)
    assert ref.buffer_bytes(sbuf) == sraw


@settings(max_examples=300)
@given(case=copy_cases(), seed=seeds, soff=st.integers(0, 48), doff=st.integers(0, 48),
       views=st.sampled_from(["same", "memoryviews", "ndarrays"]))
def test_copy_tensor_within_one_buffer_is_as_if_through_a_temporary(case, seed, soff, doff, views):
    src, dst = case
    if ref.overlaps(dst.sizes, dst.effective):
        dst = dst._replace(strides=None, total=ref.min_size(dst.data_type, dst.sizes, None))
    length = max(soff + src.total, doff + dst.total) + 5
    raw = ref.random_bytes(seed, length)
    store = bytearray(raw)
    if views == "same":
        sbuf, dbuf, so, do = store, store, soff, doff
    elif views == "memoryviews":
        # Two different objects, each starting at the tensor (often an odd address).
        sbuf, dbuf, so, do = memoryview(store)[soff:], memoryview(store)[doff:], 0, 0
    else:
        arr = np.frombuffer(store, dtype=np.uint8)
        ro = arr.view()
        ro.flags.writeable = False
        sbuf, dbuf, so, do = ro, arr, soff, doff
    try:
        copy_tensor(sbuf, make_desc(src), dbuf, make_desc(dst), src_offset=so, dst_offset=do,
                    check_alignment=False)
    except (ValueError, BufferError) as exc:
        # A clear refusal is allowed only when the two byte ranges overlap.
        assert soff < doff + dst.total and doff < soff + src.total, exc
        assert len(str(exc)) > 20 and bytes(store) == raw
        return
    expected = bytearray(raw)
    ref.copy_py(raw, expected, src.data_type, src.sizes, src.effective, dst.effective, soff, doff)
    assert bytes(store) == bytes(expected)


@settings(max_examples=60)
@given(layout=ref.layouts(), seed=seeds)
def test_gather_into_out_matches_reference(layout, seed):
    raw = ref.random_bytes(seed, 32 + layout.total)
    desc = make_desc(layout)
    out = np.empty(layout.sizes, dtype=layout.info.dtype)
    result = gather(raw, desc, offset=32, out=out)
    assert result is out
    same_bits(out, ref.gather_py(raw, layout.data_type, layout.sizes, layout.strides, 32))


@settings(max_examples=40)
@given(layout=ref.layouts(max_rank=8, max_elements=2**12), seed=seeds)
def test_larger_tensors_match_the_numpy_reference(layout, seed):
    raw = ref.random_bytes(seed, layout.total)
    desc = make_desc(layout)
    same_bits(gather(raw, desc), ref.gather_np(raw, layout.data_type, layout.sizes, layout.strides))
    if not ref.overlaps(layout.sizes, layout.effective):
        values = ref.random_values(layout.info, layout.sizes, seed)
        buf = bytearray(raw)
        scatter(values, desc, buf)
        expected = bytearray(raw)
        ref.scatter_np(values, expected, layout.data_type, layout.sizes, layout.strides)
        assert buf == expected


# --------------------------------------------------------------------------------------
# every code path, each element width


WIDTH_TYPES = {1: "UINT8", 2: "FLOAT16", 4: "FLOAT32", 8: "INT64"}

# The documented plan modes; the planner may add specialisations of them (a
# few-channel interleave, staged nibble blocks), so cases list what they accept.
DOCUMENTED_MODES = {"memcpy", "fill", "strided", "tile", "nibble"}
TRANSPOSING = {"strided", "tile", "interleave"}

# (name, sizes, strides, accepted gather modes, outer dims after merging, inner run length);
# None: not asserted (transpositions may reorder their loops).
PATH_CASES = [
    ("packed_merged", (2, 3, 4, 5), None, {"memcpy"}, 0, 120),
    ("padded_rows_unmerged", (3, 4, 5), (30, 7, 1), {"memcpy"}, 2, 5),
    ("padded_planes_partly_merged", (3, 4, 5), (24, 5, 1), {"memcpy"}, 1, 20),
    ("broadcast_inner_fill", (3, 5), (1, 0), {"fill"}, 1, 5),
    ("broadcast_outer_memcpy", (4, 6), (0, 1), {"memcpy"}, 1, 6),
    ("stepped_strided_merged", (4, 5), (10, 2), {"strided"}, 0, 20),
    ("stepped_strided_unmerged", (4, 5), (11, 2), {"strided"}, 1, 5),
    ("short_transpose", (5, 3), (1, 5), TRANSPOSING, None, None),
    ("transpose_tile", (5, 9), (1, 5), {"tile"}, None, None),
    ("nhwc_tile", (2, 3, 4, 10), (120, 1, 30, 3), {"tile"}, None, None),
    ("rank8_merged", (2, 1, 2, 2, 1, 2, 3, 2), (48, 7, 24, 12, 5, 6, 2, 1), {"memcpy"}, 0, 96),
    ("rank8_padded", (2, 1, 2, 2, 1, 2, 3, 2), (50, 7, 24, 12, 5, 6, 2, 1), {"memcpy"}, 1, 48),
]


def _packed(sizes):
    return ref.packed_strides(sizes)


@pytest.mark.parametrize("width", sorted(WIDTH_TYPES))
@pytest.mark.parametrize("name,sizes,strides,modes,nouter,inner", PATH_CASES, ids=[c[0] for c in PATH_CASES])
def test_each_path_and_width_matches_reference(width, name, sizes, strides, modes, nouter, inner):
    dt = WIDTH_TYPES[width]
    eff = strides if strides is not None else _packed(sizes)
    plan = _engine.Plan(sizes, eff, _packed(sizes), width * 8, True, False, False).describe()
    assert plan["mode"] in modes and plan["width"] == width
    if nouter is not None:
        assert (len(plan["outer"]), plan["inner"][0]) == (nouter, inner)
    desc = BufferTensorDesc(dt, sizes, strides)
    raw = ref.random_bytes(width, 32 + desc.total_tensor_size_in_bytes + 7)
    for kind in ("bytearray", "memoryview_odd"):
        buf = ref.make_buffer(kind, raw)
        same_bits(gather(buf, desc, offset=32), ref.gather_py(raw, dt, sizes, eff, 32))
        values = ref.random_values(ref.TYPES[dt], sizes, 7)
        if ref.overlaps(sizes, eff):
            continue
        scatter(values, desc, buf, offset=32)
        expected = bytearray(raw)
        ref.scatter_py(values, expected, dt, sizes, eff, 32)
        assert ref.buffer_bytes(buf) == bytes(expected)
        # And as a copy from a packed source into this layout.
        dst = ref.make_buffer(kind, raw)
        packed = BufferTensorDesc(dt, sizes)
        src = values.tobytes().ljust(packed.total_tensor_size_in_bytes, b"\0")
        copy_tensor(src, packed, dst, desc, dst_offset=32)
        assert ref.buffer_bytes(dst) == bytes(expected)


@pytest.mark.parametrize("dt", ref.NIBBLE_TYPE_NAMES)
@pytest.mark.parametrize(
    "sizes,strides",
    [((5,), None), ((2, 3), (5, 1)), ((3, 4), (1, 3)), ((4, 3), (0, 1)), ((3, 3), (2, 7)), ((2, 2, 3), (1, 13, 4))],
)
def test_nibble_path_matches_reference(dt, sizes, strides):
    eff = strides if strides is not None else _packed(sizes)
    plan = _engine.Plan(sizes, eff, _packed(sizes), 4, True, False, dt == "INT4").describe()
    assert plan["mode"] in ("nibble", "staged")
    desc = BufferTensorDesc(dt, sizes, strides)
    raw = ref.random_bytes(len(sizes), 16 + desc.total_tensor_size_in_bytes)
    got = gather(raw, desc, offset=16)
    same_bits(got, ref.gather_py(raw, dt, sizes, eff, 16))
    lo, hi = ref.NIBBLE_RANGE[dt]
    assert lo <= int(got.min()) and int(got.max()) <= hi
    if ref.overlaps(sizes, eff):
        return
    values = ref.random_values(ref.TYPES[dt], sizes, 3)
    buf = bytearray(raw)
    scatter(values, desc, buf, offset=16)
    expected = bytearray(raw)
    ref.scatter_py(values, expected, dt, sizes, eff, 16)
    assert buf == expected


# Transpositions: k is the source's fastest dimension, j the destination's.  Few
# channels (k <= 8) de-interleave; more go through tiles, with register-sized
# micro-blocks where both fast strides are one element and scalar remainders
# where k or j is not a multiple of the micro-block.
TRANSPOSE_K = [2, 3, 4, 5, 8, 9, 16, 17, 33, 70, 130, 257]
TRANSPOSE_J = [8, 15, 16, 17, 64, 100, 200]


@pytest.mark.parametrize("width", sorted(WIDTH_TYPES))
@pytest.mark.parametrize("variant", ["column_major", "padded_columns", "stepped", "batched_nhwc"])
def test_transpositions_match_reference(width, variant):
    dt = WIDTH_TYPES[width]
    info = ref.TYPES[dt]
    for k in TRANSPOSE_K:
        for j in TRANSPOSE_J:
            if variant == "column_major":
                sizes, strides = (k, j), (1, k)
            elif variant == "padded_columns":
                sizes, strides = (k, j), (1, k + 3)
            elif variant == "stepped":
                sizes, strides = (k, j), (2, 2 * k + 1)
            else:
                sizes = (2, k, 3, j)
                strides = ref.order_strides(sizes, (0, 2, 3, 1))
            plan = _engine.Plan(sizes, strides, _packed(sizes), width * 8, True, False, False).describe()
            assert plan["mode"] in TRANSPOSING, (sizes, strides)
            desc = BufferTensorDesc(dt, sizes, strides)
            raw = ref.random_bytes(k * j, 16 + desc.total_tensor_size_in_bytes)
            where = (variant, sizes, strides, dt)
            assert gather(raw, desc, offset=16).tobytes() == ref.gather_np(raw, dt, sizes, strides, 16).tobytes(), where
            # scatter into the transposed layout: the same pair of dimensions, swapped roles
            values = ref.random_values(info, sizes, k + j)
            buf = bytearray(raw)
            scatter(values, desc, buf, offset=16)
            expected = bytearray(raw)
            ref.scatter_np(values, expected, dt, sizes, strides, 16)
            assert buf == expected, where


@pytest.mark.parametrize("dt", ref.NIBBLE_TYPE_NAMES)
@pytest.mark.parametrize(
    "sizes,order",
    [
        ((8, 9), (0, 1)),  # packed: one run of nibbles
        ((9, 8), (1, 0)),  # column-major nibbles
        ((3, 5, 7), (2, 0, 1)),
        ((2, 5, 3, 9), (0, 2, 3, 1)),  # NHWC, odd channel count
        ((7, 3, 3, 5), (0, 2, 3, 1)),
        ((4, 65535), (0, 1)),  # blocks of an odd number of nibbles: odd starts
        ((5, 3, 21845), (0, 2, 1)),
        ((3, 200, 700), (0, 2, 1)),  # a dimension split into chunks
    ],
)
def test_nibbles_packed_in_any_order_match_reference(dt, sizes, order):
    strides = ref.order_strides(sizes, order)
    plan = _engine.Plan(sizes, strides, _packed(sizes), 4, True, False, dt == "INT4").describe()
    assert plan["mode"] in ("nibble", "staged")
    desc = BufferTensorDesc(dt, sizes, strides)
    raw = ref.random_bytes(sum(sizes), 32 + desc.total_tensor_size_in_bytes + 1)
    for kind in ("bytes", "memoryview_odd"):
        got = gather(ref.make_buffer(kind, raw), desc, offset=32)
        assert got.tobytes() == ref.gather_np(raw, dt, sizes, strides, 32).tobytes()
    values = ref.random_values(ref.TYPES[dt], sizes, 5)
    buf = ref.make_buffer("memoryview_odd", raw)
    scatter(values, desc, buf, offset=32)
    expected = bytearray(raw)
    ref.scatter_np(values, expected, dt, sizes, strides, 32)
    assert ref.buffer_bytes(buf) == bytes(expected)
    # copy between two nibble layouts: packed C order <-> this order
    dst = bytearray(raw)
    copy_tensor(bytes(buf), desc, dst, BufferTensorDesc(dt, sizes), src_offset=32, dst_offset=32)
    expected = bytearray(raw)
    ref.scatter_np(values, expected, dt, sizes, None, 32)
    assert dst == expected


def test_copy_paths_between_two_strided_layouts():
    # copy_tensor plans from both stride sets: check the modes it reaches.
    cases = [
        ((4, 6), (6, 1), (8, 1), "memcpy"),
        ((4, 6), (0, 1), (6, 1), "memcpy"),
        ((4, 6), (1, 0), (6, 1), "fill"),
        ((4, 6), (1, 0), (12, 2), "fill"),
        ((4, 6), (12, 2), (6, 1), "strided"),
        ((6, 16), (1, 6), (16, 1), "tile"),
        ((1, 3, 4, 9), (108, 1, 27, 3), (108, 36, 9, 1), "tile"),
        ((1, 3, 4, 9), (108, 36, 9, 1), (108, 1, 27, 3), TRANSPOSING),
    ]
    for sizes, s, d, mode in cases:
        for width, dt in WIDTH_TYPES.items():
            got = _engine.Plan(sizes, s, d, width * 8).describe()["mode"]
            assert got in mode if isinstance(mode, set) else got == mode
            sdesc, ddesc = BufferTensorDesc(dt, sizes, s), BufferTensorDesc(dt, sizes, d)
            sraw = ref.random_bytes(1, sdesc.total_tensor_size_in_bytes)
            draw_ = ref.random_bytes(2, ddesc.total_tensor_size_in_bytes + 16)
            dbuf = bytearray(draw_)
            copy_tensor(sraw, sdesc, dbuf, ddesc)
            expected = bytearray(draw_)
            ref.copy_py(sraw, expected, dt, sizes, s, d)
            assert dbuf == expected, (sizes, s, d, dt)


def test_the_cases_above_reach_every_documented_mode():
    seen = set()
    for _, sizes, strides, _, _, _ in PATH_CASES:
        eff = strides if strides is not None else _packed(sizes)
        for width in WIDTH_TYPES:
            seen.add(_engine.Plan(sizes, eff, _packed(sizes), width * 8, True, False, False).describe()["mode"])
            seen.add(_engine.Plan(sizes, _packed(sizes), eff, width * 8, False, True, False).describe()["mode"])
    seen.add(_engine.Plan((2, 3), (5, 1), (3, 1), 4, True, False, False).describe()["mode"])
    assert DOCUMENTED_MODES <= seen, f"not reached: {sorted(DOCUMENTED_MODES - seen)}"


# Source rows a multiple of 4 KiB apart (the transpose may stage them) and
# row lengths that are not multiples of a micro-block.
@pytest.mark.parametrize("width", sorted(WIDTH_TYPES))
def test_transpositions_with_page_multiple_row_strides(width):
    dt = WIDTH_TYPES[width]
    info = ref.TYPES[dt]
    for row_bytes in (4096, 8192):
        pitch = row_bytes // width
        for k in sorted({40 // width + 1, 100, pitch // 2 + 3, pitch}):
            for j in (16, 70):
                sizes, strides = (k, j), (1, pitch)
                desc = BufferTensorDesc(dt, sizes, strides)
                raw = ref.random_bytes(k + j, desc.total_tensor_size_in_bytes)
                where = (sizes, strides, dt)
                assert gather(raw, desc).tobytes() == ref.gather_np(raw, dt, sizes, strides).tobytes(), where
                values = ref.random_values(info, sizes, k)
                buf = bytearray(raw)
                scatter(values, desc, buf)
                expected = bytearray(raw)
                ref.scatter_np(values, expected, dt, sizes, strides)
                assert buf == expected, where


# --------------------------------------------------------------------------------------
# big tensors, 1 and 2 threads: the threaded and tiled paths against the numpy reference


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = get_num_threads()
    set_num_threads(request.param)
    if _engine.have_threads():
        assert get_num_threads() == request.param
    yield request.param
    set_num_threads(before)


def nhwc(sizes):
    return ref.order_strides(sizes, (0, 2, 3, 1))


# (name, data type, sizes, strides): every one is more than 1 MiB unpacked.
BIG = [
    ("nhwc_c3_f32", "FLOAT32", (2, 3, 256, 256), nhwc((2, 3, 256, 256))),
    ("nhwc_c64_f32", "FLOAT32", (1, 64, 64, 80), nhwc((1, 64, 64, 80))),
    ("nhwc_c64_long_rows_f32", "FLOAT32", (1, 64, 5, 1024), nhwc((1, 64, 5, 1024))),
    ("nhwc_c3_u8", "UINT8", (4, 3, 320, 320), nhwc((4, 3, 320, 320))),
    ("nhwc_c64_f16", "FLOAT16", (2, 64, 48, 96), nhwc((2, 64, 48, 96))),
    ("nchw_padded_rows_u16", "UINT16", (2048, 300), (320, 1)),
    ("padded_long_rows_f32", "FLOAT32", (4, 70000), (70016, 1)),
    ("padded_planes_f64", "FLOAT64", (3, 5, 100, 100), (51000, 10200, 102, 1)),
    ("transpose_u8", "UINT8", (1024, 1200), (1, 1024)),
    ("transpose_i64", "INT64", (400, 420), (1, 400)),
    ("stepped_f32", "FLOAT32", (600, 500), (1000, 2)),
    ("broadcast_fill_f32", "FLOAT32", (1024, 512), (1, 0)),
    ("broadcast_rows_u32", "UINT32", (700, 500), (0, 1)),
    ("nibble_padded_uint4", "UINT4", (1024, 1100), (1104, 1)),
    ("nibble_transpose_int4", "INT4", (1100, 1000), (1, 1100)),
]


@pytest.mark.parametrize("name,dt,sizes,strides", BIG, ids=[b[0] for b in BIG])
def test_big_gather_and_scatter_match_reference(threads, name, dt, sizes, strides):
    info = ref.TYPES[dt]
    desc = BufferTensorDesc(dt, sizes, strides)
    count = int(np.prod(sizes))
    assert count * max(1, info.bits // 8) > 1 << 20
    raw = ref.random_bytes(len(name), 32 + desc.total_tensor_size_in_bytes + 9)
    buf = ref.make_buffer("memoryview_odd" if threads == 2 else "bytearray", raw)
    got = gather(buf, desc, offset=32)
    same_bits(got, ref.gather_np(raw, dt, sizes, strides, 32))
    if info.bits > 4:
        plan = _engine.Plan(sizes, strides, ref.packed_strides(sizes), info.bits, True, False, False)
        assert plan.describe()["tasks"] >= 2  # enough work to split across threads
    if ref.overlaps(sizes, strides):
        return
    values = ref.random_values(info, sizes, 11)
    scatter(values, desc, buf, offset=32)
    expected = bytearray(raw)
    ref.scatter_np(values, expected, dt, sizes, strides, 32)
    assert ref.buffer_bytes(buf) == bytes(expected)


BIG_COPIES = [
    ("nchw_to_nhwc_c3", "FLOAT32", (2, 3, 256, 256), None, nhwc((2, 3, 256, 256))),
    ("nhwc_to_nchw_c3", "FLOAT32", (2, 3, 256, 256), nhwc((2, 3, 256, 256)), None),
    ("nchw_to_nhwc_c64", "FLOAT32", (1, 64, 64, 80), None, nhwc((1, 64, 64, 80))),
    ("nhwc_to_nchw_c64", "FLOAT16", (2, 64, 48, 96), nhwc((2, 64, 48, 96)), None),
    ("nhwc_c64_to_padded_nchw", "FLOAT32", (1, 64, 40, 100), nhwc((1, 64, 40, 100)), (268800, 4200, 104, 1)),
    ("padded_to_packed_u16", "UINT16", (2048, 300), (320, 1), None),
    ("packed_to_padded_u8", "UINT8", (1500, 1000), None, (1024, 1)),
    ("broadcast_to_expanded_f32", "FLOAT32", (8, 3, 200, 200), (0, 40000, 200, 1), None),
    ("channel_broadcast_to_nhwc_f32", "FLOAT32", (1, 64, 64, 80), (0, 0, 80, 1), nhwc((1, 64, 64, 80))),
    ("nibble_padded_to_packed", "UINT4", (2048, 1030), (1040, 1), None),
]


@pytest.mark.parametrize("name,dt,sizes,src_strides,dst_strides", BIG_COPIES, ids=[b[0] for b in BIG_COPIES])
def test_big_copy_tensor_matches_reference(threads, name, dt, sizes, src_strides, dst_strides):
    sdesc = BufferTensorDesc(dt, sizes, src_strides)
    ddesc = BufferTensorDesc(dt, sizes, dst_strides)
    assert not ddesc.has_overlap
    sraw = ref.random_bytes(1, sdesc.total_tensor_size_in_bytes + 16)
    draw_ = ref.random_bytes(2, ddesc.total_tensor_size_in_bytes + 48)
    dbuf = bytearray(draw_)
    copy_tensor(sraw, sdesc, dbuf, ddesc, src_offset=16, dst_offset=32)
    expected = bytearray(draw_)
    ref.scatter_np(ref.gather_np(sraw, dt, sizes, src_strides, 16), expected, dt, sizes, dst_strides, 32)
    assert dbuf == expected


def test_big_copy_within_one_buffer_overlapping_ranges(threads):
    # NCHW -> NHWC where the destination range starts inside the source range.
    sizes = (1, 64, 64, 80)
    sdesc = BufferTensorDesc("FLOAT32", sizes)
    ddesc = BufferTensorDesc("FLOAT32", sizes, nhwc(sizes))
    n = sdesc.total_tensor_size_in_bytes
    raw = ref.random_bytes(5, n + 4096)
    buf = bytearray(raw)
    try:
        copy_tensor(buf, sdesc, buf, ddesc, src_offset=0, dst_offset=4096)
    except (ValueError, BufferError) as exc:  # a clear refusal is allowed, nothing written
        assert len(str(exc)) > 20 and buf == raw
        return
    expected = bytearray(raw)
    ref.scatter_np(ref.gather_np(raw, "FLOAT32", sizes, None, 0), expected, "FLOAT32", sizes, nhwc(sizes), 4096)
    assert buf == expected


def test_set_num_threads_round_trip():
    before = get_num_threads()
    try:
        set_num_threads(2)
        assert get_num_threads() == (2 if _engine.have_threads() else 1)
        set_num_threads(1)
        assert get_num_threads() == 1
        with pytest.raises(ValueError):
            set_num_threads(0)
        assert get_num_threads() == 1
    finally:
        set_num_threads(before)
