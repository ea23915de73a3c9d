"""copy_tensor: strided to strided in one pass, scatter's destination rules, overlapping memory.

Expected bytes come from the reference: gather the source, scatter into a copy
of the destination (that is, a copy through a temporary).
"""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from dmlstride import BufferTensorDesc, DescriptorError, copy_tensor, gather

GUARD = 0x5C


def guarded(n: int) -> bytearray:
    return bytearray([GUARD]) * n


def expected_copy(src_raw, dst_raw, name, sizes, src_strides, dst_strides, src_offset=0, dst_offset=0) -> bytes:
    out = bytearray(dst_raw)
    ref.copy_py(src_raw, out, name, sizes, src_strides or ref.packed_strides(sizes),
                dst_strides or ref.packed_strides(sizes), src_offset, dst_offset)
    return bytes(out)


# --------------------------------------------------------------------------------------
# worked examples


def test_nhwc_to_nchw_1x1x3x5_worked_example():
    data = np.arange(15, dtype="<f4")
    nhwc = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 1, 5, 1])
    nchw = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 15, 5, 1])
    dst = bytearray(60)
    assert copy_tensor(data.tobytes(), nhwc, dst, nchw) is None
    # one channel: both layouts hold the same bytes
    assert bytes(dst) == data.tobytes()
    np.testing.assert_array_equal(gather(dst, nchw), data.reshape(1, 1, 3, 5))


def test_nhwc_to_nchw_with_three_channels():
    # element (c, h, w) = 100c + 10h + w; NHWC memory is ordered h, w, c
    nhwc_memory = [100 * c + 10 * h + w for h in range(3) for w in range(5) for c in range(3)]
    nchw_memory = [100 * c + 10 * h + w for c in range(3) for h in range(3) for w in range(5)]
    nhwc = BufferTensorDesc.from_layout("int32", [1, 3, 3, 5], "NHWC")
    assert nhwc.strides == (45, 1, 15, 3)
    nchw = BufferTensorDesc("int32", [1, 3, 3, 5])
    dst = bytearray(nchw.total_tensor_size_in_bytes)
    copy_tensor(np.array(nhwc_memory, "<i4").tobytes(), nhwc, dst, nchw)
    assert np.frombuffer(bytes(dst), "<i4").tolist() == nchw_memory
    # and back
    back = bytearray(nhwc.total_tensor_size_in_bytes)
    copy_tensor(dst, nchw, back, nhwc)
    assert np.frombuffer(bytes(back), "<i4").tolist() == nhwc_memory


def test_padded_to_packed():
    src = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    dst = bytearray(b"........")
    copy_tensor(b"ABCxxDEFxx", src, dst, BufferTensorDesc("uint8", [2, 3]))
    assert bytes(dst) == b"ABCDEF.."


def test_packed_to_padded_keeps_padding():
    dst = bytearray(b"............")
    copy_tensor(b"ABCDEF\0\0", BufferTensorDesc("uint8", [2, 3]), dst, BufferTensorDesc("uint8", [2, 3], strides=[5, 1]))
    assert bytes(dst) == b"ABC..DEF...."


def test_broadcast_to_expanded():
    dst = bytearray(b"________")
    copy_tensor(b"ABC\0", BufferTensorDesc("uint8", [2, 3], strides=[0, 1]), dst, BufferTensorDesc("uint8", [2, 3]))
    assert bytes(dst) == b"ABCABC__"
    # a channel-broadcast NCHW source into NHWC
    plane = np.arange(6, dtype="<f4")
    src = BufferTensorDesc("float32", [1, 4, 2, 3], strides=[0, 0, 3, 1])
    nhwc = BufferTensorDesc.from_layout("float32", [1, 4, 2, 3], "NHWC")
    out = bytearray(nhwc.total_tensor_size_in_bytes)
    copy_tensor(plane.tobytes(), src, out, nhwc)
    assert np.frombuffer(bytes(out), "<f4").tolist() == [float(v) for v in range(6) for _ in range(4)]


def test_column_major_to_row_major():
    dst = bytearray(8)
    copy_tensor(b"ADBECF\0\0", BufferTensorDesc("uint8", [2, 3], strides=[1, 2]), dst, BufferTensorDesc("uint8", [2, 3]))
    assert bytes(dst[:6]) == b"ABCDEF"


# --------------------------------------------------------------------------------------
# destination bytes outside the elements, and the source, stay as they were

PAIRS = [
    ("nchw_to_nhwc", (2, 3, 4, 5), None, "NHWC"),
    ("nhwc_to_padded_nchw", (2, 3, 4, 5), "NHWC", (70, 22, 5, 1)),
    ("broadcast_to_stepped", (3, 4), (0, 1), (9, 2)),
    ("padded_to_column_major", (3, 4), (6, 1), (1, 3)),
    ("transposed_to_padded_transposed", (9, 17), (1, 9), (1, 11)),
    ("rank8", (2, 1, 2, 2, 1, 2, 1, 3), None, (97, 5, 40, 20, 5, 3, 5, 1)),
    ("rank1_stepped", (7,), (3,), (2,)),
]


def _strides(spec, sizes, name):
    if isinstance(spec, str):
        return BufferTensorDesc.from_layout(name, sizes, spec).effective_strides
    return spec


@pytest.mark.parametrize("case,sizes,src_spec,dst_spec", PAIRS, ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("name", ref.TYPE_NAMES)
def test_guard_bytes_untouched(case, sizes, src_spec, dst_spec, name):
    s, d = _strides(src_spec, sizes, name), _strides(dst_spec, sizes, name)
    sdesc, ddesc = BufferTensorDesc(name, sizes, s), BufferTensorDesc(name, sizes, d)
    assert not ddesc.has_overlap
    sraw = ref.random_bytes(len(case), 16 + sdesc.total_tensor_size_in_bytes)
    before = bytes(guarded(32 + ddesc.total_tensor_size_in_bytes + 9))
    for skind, dkind in (("bytes", "bytearray"), ("memoryview_odd", "memoryview_odd"), ("ndarray_u1", "mmap")):
        src, dst = ref.make_buffer(skind, sraw), ref.make_buffer(dkind, before)
        copy_tensor(src, sdesc, dst, ddesc, src_offset=16, dst_offset=32)
        after = ref.buffer_bytes(dst)
        assert after == expected_copy(sraw, before, name, sizes, s, d, 16, 32)
        touched = ref.touched_bytes(name, sizes, ddesc.effective_strides, 32)
        assert all(after[i] == GUARD for i in range(len(after)) if i not in touched)
        assert ref.buffer_bytes(src) == sraw
        np.testing.assert_array_equal(gather(dst, ddesc, offset=32), gather(sraw, sdesc, offset=16))


@pytest.mark.parametrize("name", ["uint4", "int4"])
def test_four_bit_neighbour_nibbles_untouched(name):
    sizes = (3, 5)
    src = BufferTensorDesc(name, sizes, strides=[1, 3])  # column-major nibbles
    for dst_strides in ((10, 2), (1, 6), (11, 1), None):
        dst = BufferTensorDesc(name, sizes, dst_strides)
        sraw = ref.random_bytes(7, src.total_tensor_size_in_bytes)
        before = ref.random_bytes(8, dst.total_tensor_size_in_bytes + 16)
        buf = bytearray(before)
        copy_tensor(sraw, src, buf, dst)
        assert bytes(buf) == expected_copy(sraw, before, name, sizes, (1, 3), dst_strides)
        assert gather(buf, dst).tolist() == gather(sraw, src).tolist()


# --------------------------------------------------------------------------------------
# refusals, each before any byte is written


def test_sizes_and_data_types_must_match():
    dst = bytearray(guarded(64))
    with pytest.raises(ValueError):
        copy_tensor(bytes(64), BufferTensorDesc("uint8", [2, 3]), dst, BufferTensorDesc("uint8", [3, 2]))
    with pytest.raises(ValueError):
        copy_tensor(bytes(64), BufferTensorDesc("uint8", [6]), dst, BufferTensorDesc("uint8", [1, 6]))
    for a, b in (("uint8", "int8"), ("float32", "int32"), ("float16", "uint16"), ("uint4", "int4")):
        with pytest.raises((ValueError, TypeError)):
            copy_tensor(bytes(64), BufferTensorDesc(a, [2, 3]), dst, BufferTensorDesc(b, [2, 3]))
    assert bytes(dst) == bytes(guarded(64))


@pytest.mark.parametrize("strides", [(0, 1), (1, 0), (1, 1), (2, 1)])
def test_overlapping_destination_is_refused(strides):
    dst = bytearray(guarded(64))
    with pytest.raises(DescriptorError):
        copy_tensor(bytes(64), BufferTensorDesc("float32", [2, 3]), dst, BufferTensorDesc("float32", [2, 3], strides))
    assert bytes(dst) == bytes(guarded(64))


@pytest.mark.parametrize("kind", ref.READ_ONLY_KINDS)
def test_read_only_destination_is_refused(kind):
    raw = bytes(guarded(64))
    dst = ref.make_buffer(kind, raw)
    with pytest.raises(BufferError):
        copy_tensor(bytes(64), BufferTensorDesc("uint16", [2, 3]), dst, BufferTensorDesc("uint16", [2, 3]))
    assert ref.buffer_bytes(dst) == raw


def test_non_contiguous_buffers_are_refused():
    desc = BufferTensorDesc("uint8", [4])
    store = bytearray(guarded(64))
    with pytest.raises(BufferError):
        copy_tensor(memoryview(store)[::2], desc, bytearray(16), desc)
    with pytest.raises(BufferError):
        copy_tensor(bytes(16), desc, memoryview(store)[::2], desc)
    with pytest.raises(TypeError):
        copy_tensor([0] * 16, desc, store, desc)
    with pytest.raises(TypeError):
        copy_tensor(bytes(16), "uint8", store, desc)
    assert bytes(store) == bytes(guarded(64))


def test_offsets_alignment_and_bounds_are_checked_before_writing():
    sdesc = BufferTensorDesc("float32", [3, 4], strides=[5, 1])  # 56 bytes
    ddesc = BufferTensorDesc("float32", [3, 4], strides=[1, 3], guaranteed_base_offset_alignment=32)
    src = ref.random_bytes(1, 128)
    before = bytes(guarded(128))
    dst = bytearray(before)
    for so, do in ((8, 0), (0, 8), (0, 16), (17, 32)):
        with pytest.raises(DescriptorError):
            copy_tensor(src, sdesc, dst, ddesc, src_offset=so, dst_offset=do)
    for so, do in ((-16, 0), (0, -32)):
        with pytest.raises((BufferError, ValueError)):
            copy_tensor(src, sdesc, dst, ddesc, src_offset=so, dst_offset=do, check_alignment=False)
    with pytest.raises(BufferError) as info:
        copy_tensor(src, sdesc, dst, ddesc, src_offset=80)
    assert str(80 + 56) in str(info.value) and "128" in str(info.value)
    with pytest.raises(BufferError) as info:
        copy_tensor(src, sdesc, dst, ddesc, dst_offset=96)
    assert str(96 + ddesc.total_tensor_size_in_bytes) in str(info.value)
    with pytest.raises(BufferError):
        copy_tensor(src[:55], sdesc, dst, ddesc)
    assert bytes(dst) == before
    # relaxed alignment, in bounds
    copy_tensor(src, sdesc, dst, ddesc, src_offset=4, dst_offset=20, check_alignment=False)
    assert bytes(dst) == expected_copy(src, before, "float32", (3, 4), (5, 1), (1, 3), 4, 20)


# --------------------------------------------------------------------------------------
# source and destination in the same memory: the result is what a copy through
# a temporary gives, or the call is refused with a clear error (nothing written)


def copied_or_clearly_refused(store, raw, call) -> bool:
    """Run ``call``; True if it copied, False if it refused (then ``store`` is unchanged)."""
    try:
        call()
    except (ValueError, BufferError) as exc:
        assert len(str(exc)) > 20, f"unclear refusal: {exc!r}"
        assert bytes(store) == bytes(raw)
        return False
    return True



def _in_place_cases():
    sizes = (2, 3, 4, 5)
    nhwc = ref.order_strides(sizes, (0, 2, 3, 1))
    return [
        ("shift_forward", "float32", sizes, None, None, 0, 16),
        ("shift_backward", "float32", sizes, None, None, 16, 0),
        ("shift_forward_u8", "uint8", sizes, None, None, 0, 16),
        ("transpose_in_place", "float32", sizes, None, nhwc, 0, 0),
        ("transpose_shifted", "float16", sizes, nhwc, None, 32, 0),
        ("padded_to_packed_in_place", "int32", (6, 7), (9, 1), None, 0, 0),
        ("packed_to_padded_in_place", "int32", (6, 7), None, (9, 1), 0, 0),
        ("broadcast_expands_over_itself", "uint16", (5, 8), (0, 1), None, 0, 0),
        ("reverse_order_overlap", "uint64", (4, 6), (1, 4), (6, 1), 16, 0),
        ("nibbles_shifted", "uint4", (7, 9), None, (1, 7), 0, 16),
        ("nibbles_in_place", "int4", (7, 9), (9, 1), (1, 7), 0, 0),
    ]


@pytest.mark.parametrize("case,name,sizes,s,d,so,do", _in_place_cases(), ids=[c[0] for c in _in_place_cases()])
@pytest.mark.parametrize("how", ["same_object", "memoryviews", "numpy_views"])
def test_overlapping_memory_is_as_if_through_a_temporary(case, name, sizes, s, d, so, do, how):
    sdesc, ddesc = BufferTensorDesc(name, sizes, s), BufferTensorDesc(name, sizes, d)
    n = max(so + sdesc.total_tensor_size_in_bytes, do + ddesc.total_tensor_size_in_bytes) + 16
    raw = ref.random_bytes(n, n)
    store = bytearray(raw)
    if how == "same_object":
        src, dst = store, store
    elif how == "memoryviews":
        src, dst = memoryview(store), memoryview(store)
    else:
        arr = np.frombuffer(store, np.uint8)
        src, dst = arr.view(), arr.view()
        src.flags.writeable = False
    if not copied_or_clearly_refused(store, raw, lambda: copy_tensor(src, sdesc, dst, ddesc, src_offset=so,
                                                                     dst_offset=do)):
        return
    assert bytes(store) == expected_copy(raw, raw, name, sizes, s, d, so, do)


def test_overlapping_memory_at_odd_offsets():
    sdesc = BufferTensorDesc("float32", [8, 8], strides=[1, 8])
    ddesc = BufferTensorDesc("float32", [8, 8])
    for so in range(0, 12, 3):
        for do in range(0, 12, 5):
            raw = ref.random_bytes(so * 16 + do, 300)
            store = bytearray(raw)
            if not copied_or_clearly_refused(store, raw, lambda: copy_tensor(
                    memoryview(store)[1:], sdesc, memoryview(store)[1:], ddesc,
                    src_offset=so, dst_offset=do, check_alignment=False)):
                continue
            assert bytes(store[1:]) == expected_copy(raw[1:], raw[1:], "float32", (8, 8), (1, 8), None, so, do)
            assert store[0] == raw[0]


def test_disjoint_ranges_of_one_buffer():
    sizes = (3, 4, 6)
    sdesc = BufferTensorDesc("int16", sizes)
    ddesc = BufferTensorDesc("int16", sizes, ref.order_strides(sizes, (2, 1, 0)))
    raw = ref.random_bytes(3, 512)
    store = bytearray(raw)
    copy_tensor(store, sdesc, store, ddesc, src_offset=0, dst_offset=160)
    assert bytes(store) == expected_copy(raw, raw, "int16", sizes, None, ddesc.strides, 0, 160)


def test_no_packed_temporary_between_separate_buffers():
    import tracemalloc

    sizes = (1, 64, 64, 64)  # 1 MiB of float32
    sdesc = BufferTensorDesc("float32", sizes)
    ddesc = BufferTensorDesc.from_layout("float32", sizes, "NHWC")
    nbytes = sdesc.total_tensor_size_in_bytes
    src = ref.random_bytes(1, nbytes)
    dst = bytearray(nbytes)
    copy_tensor(src, sdesc, dst, ddesc)  # plans are built and cached outside the measurement
    gather(src, sdesc)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        gather(src, sdesc)  # control: numpy allocations are traced
        _, gather_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        copy_tensor(src, sdesc, dst, ddesc)
        _, copy_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert gather_peak >= nbytes
    assert copy_peak < nbytes // 8
    expected = bytearray(nbytes)
    ref.scatter_np(ref.gather_np(src, "float32", sizes, None), expected, "float32", sizes, ddesc.strides)
    assert dst == expected


def test_huge_extents_and_offsets_are_buffer_errors():
    far = BufferTensorDesc("uint8", [2**31 - 1, 2], strides=[2**32 - 1, 1], directml_limits=False)
    dst = bytearray(guarded(64))
    with pytest.raises(BufferError):
        copy_tensor(bytes(64), far, dst, BufferTensorDesc("uint8", [2**31 - 1, 2], strides=[2**32 - 1, 1], directml_limits=False))
    small = BufferTensorDesc("uint8", [4])
    for off in (2**62, 2**64):
        with pytest.raises(BufferError):
            copy_tensor(bytes(64), small, dst, small, src_offset=off)
        with pytest.raises(BufferError):
            copy_tensor(bytes(64), small, dst, small, dst_offset=off)
    assert bytes(dst) == bytes(guarded(64))
