"""scatter: exactly the tensor's elements are written, values convert as numpy.copyto would.

Guard bytes around and between the elements prove that nothing else changes;
the expected bytes come from the reference in ``reference.py``.
"""

from __future__ import annotations

import mmap
import tempfile

import numpy as np
import pytest

import reference as ref
from dmlstride import BufferTensorDesc, DescriptorError, gather, scatter

GUARD = 0xA5


def guarded(n: int) -> bytearray:
    return bytearray([GUARD]) * n


def assert_only_elements_written(buf, before, name, sizes, strides, offset, values):
    """Bytes outside the elements equal ``before``; the elements hold ``values``."""
    after = ref.buffer_bytes(buf)
    expected = bytearray(before)
    ref.scatter_py(values, expected, name, sizes, strides, offset)
    assert after == bytes(expected)
    touched = ref.touched_bytes(name, sizes, strides if strides is not None else ref.packed_strides(sizes), offset)
    untouched = [i for i in range(len(before)) if i not in touched]
    assert untouched, "the layout leaves no byte to guard"
    assert all(after[i] == before[i] for i in untouched)


# --------------------------------------------------------------------------------------
# worked examples


def test_rows_into_a_padded_buffer_keep_the_padding():
    buf = bytearray(b"." * 16)
    rows = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint8)
    assert scatter(rows, BufferTensorDesc("uint8", [2, 3], strides=[5, 1]), buf) is None
    assert bytes(buf) == b"\x01\x02\x03..\x04\x05\x06" + b"." * 8


def test_letters_into_the_seed_layout():
    buf = bytearray(b"xxxxxxxxxxxx")
    letters = np.frombuffer(b"ABCDEF", np.uint8).reshape(2, 3)
    scatter(letters, BufferTensorDesc("uint8", [2, 3], strides=[5, 1]), buf)
    assert bytes(buf) == b"ABCxxDEFxxxx"


def test_column_major_destination():
    buf = bytearray(8)
    letters = np.frombuffer(b"ABCDEF", np.uint8).reshape(2, 3)
    scatter(letters, BufferTensorDesc("uint8", [2, 3], strides=[1, 2]), buf)
    assert bytes(buf) == b"ADBECF\0\0"


def test_nhwc_destination():
    # element (c, h, w) = 100c + 10h + w lands in h, w, c order
    values = np.array([[[[100 * c + 10 * h + w for w in range(2)] for h in range(2)] for c in range(3)]], dtype="<i4")
    buf = bytearray(48)
    scatter(values, BufferTensorDesc("int32", [1, 3, 2, 2], strides=[12, 1, 6, 3]), buf)
    expected = [100 * c + 10 * h + w for h in range(2) for w in range(2) for c in range(3)]
    assert np.frombuffer(bytes(buf), "<i4").tolist() == expected


def test_four_bit_packing_example_and_neighbour_nibble():
    buf = bytearray(b"\xff" * 8)
    scatter(np.array([1, 2, 3, 4, 5], dtype=np.uint8), BufferTensorDesc("uint4", [5]), buf)
    # 0x21 0x43 then the high nibble of the third byte keeps its old value
    assert bytes(buf) == bytes([0x21, 0x43, 0xF5]) + b"\xff" * 5


def test_four_bit_every_other_nibble():
    buf = bytearray([0x5A] * 8)
    scatter(np.array([1, 2, 3, 4], dtype=np.uint8), BufferTensorDesc("uint4", [4], strides=[2]), buf)
    assert bytes(buf[:4]) == bytes([0x51, 0x52, 0x53, 0x54])
    assert bytes(buf[4:]) == bytes([0x5A] * 4)
    buf = bytearray([0x5A] * 8)
    scatter(np.array([-1, -8, 7], dtype=np.int8), BufferTensorDesc("int4", [3], strides=[2]), buf, offset=0)
    assert bytes(buf[:3]) == bytes([0x5F, 0x58, 0x57])
    buf = bytearray([0x00] * 8)
    # odd element offsets: high nibbles only
    scatter(np.array([[9, 10], [11, 12]], dtype=np.uint8), BufferTensorDesc("uint4", [2, 2], strides=[4, 2]), buf,
            offset=0)
    assert bytes(buf[:4]) == bytes([0x09, 0x0A, 0x0B, 0x0C])


def test_int4_negative_values_pack_as_twos_complement():
    buf = bytearray(8)
    scatter(np.arange(-8, 8, dtype=np.int8)[:8], BufferTensorDesc("int4", [8]), buf)
    assert bytes(buf[:4]) == bytes([0x98, 0xBA, 0xDC, 0xFE])
    assert gather(buf, BufferTensorDesc("int4", [8])).tolist() == list(range(-8, 0))


# --------------------------------------------------------------------------------------
# guard bytes and round trips

LAYOUTS = {
    "packed": ((3, 5), None),
    "padded": ((3, 5), (7, 1)),
    "stepped": ((3, 5), (16, 3)),
    "column_major": ((3, 5), (1, 3)),
    "padded_column_major": ((3, 5), (1, 4)),
    "nhwc": ((2, 3, 2, 4), (26, 1, 12, 3)),
    "rank8": ((2, 1, 2, 1, 2, 1, 2, 2), (64, 3, 17, 9, 8, 1, 3, 1)),
    "size_one_huge_stride": ((1, 4, 1), (2**32 - 1, 2, 2**31)),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", ref.TYPE_NAMES)
@pytest.mark.parametrize("kind", ["bytearray", "memoryview_odd"])
def test_guard_bytes_untouched_and_round_trip(layout, name, kind):
    sizes, strides = LAYOUTS[layout]
    desc = BufferTensorDesc(name, sizes, strides)
    assert not desc.has_overlap
    before = bytes(guarded(48 + desc.total_tensor_size_in_bytes + 17))
    buf = ref.make_buffer(kind, before)
    values = ref.random_values(ref.type_info(name), sizes, len(layout))
    scatter(values, desc, buf, offset=48)
    assert_only_elements_written(buf, before, name, sizes, strides, 48, values)
    back = gather(buf, desc, offset=48)
    assert back.dtype == values.dtype and back.tobytes() == values.tobytes()


@pytest.mark.parametrize("kind", ref.WRITABLE_KINDS)
def test_every_writable_buffer_kind(kind):
    sizes, strides = (3, 4), (6, 1)
    for name in ("uint8", "float16", "float32", "uint64", "uint4"):
        desc = BufferTensorDesc(name, sizes, strides)
        before = bytes(guarded(ref.buffer_length(kind, 32 + desc.total_tensor_size_in_bytes)))
        buf = ref.make_buffer(kind, before)
        values = ref.random_values(ref.type_info(name), sizes, 1)
        scatter(values, desc, buf, offset=32)
        assert_only_elements_written(buf, before, name, sizes, strides, 32, values)


def test_odd_addresses():
    store = bytearray(guarded(1024))
    for start in (1, 3, 7, 13):
        before = bytes(store)
        view = memoryview(store)[start:]
        for name in ("uint16", "int32", "float64", "int4"):
            for sizes, strides in (((4, 5), None), ((4, 5), (1, 4)), ((4, 5), (7, 1))):
                desc = BufferTensorDesc(name, sizes, strides)
                values = ref.random_values(ref.type_info(name), sizes, start)
                scatter(values, desc, view, offset=16)
                expected = bytearray(before[start:])
                ref.scatter_py(values, expected, name, sizes, strides, 16)
                assert bytes(view) == bytes(expected)
                assert bytes(store[:start]) == before[:start]
                before = bytes(store)


SPECIAL_BITS = {
    "float32": ("<u4", [0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000, 0x00000001, 0x807FFFFF]),
    "float16": ("<u2", [0x0001, 0x03FF, 0x8001, 0x8000, 0x7C01, 0xFE01]),
    "float64": ("<u8", [0x7FF0000000000001, 0xFFF8DEADBEEF0001, 0x8000000000000000, 0x000FFFFFFFFFFFFF,
                        0x0000000000000001, 0x7FF4000000000000]),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_BITS))
@pytest.mark.parametrize("strides", [None, (1, 2), (13, 2)], ids=["packed", "transposed", "stepped"])
def test_nan_payloads_negative_zero_and_subnormals_are_bit_exact(name, strides):
    ubits, patterns = SPECIAL_BITS[name]
    values = np.array(patterns, dtype=ubits).view(ref.type_info(name).dtype).reshape(2, 3)
    desc = BufferTensorDesc(name, [2, 3], strides)
    before = bytes(guarded(desc.total_tensor_size_in_bytes + 8))
    buf = bytearray(before)
    scatter(values, desc, buf)
    assert_only_elements_written(buf, before, name, (2, 3), strides, 0, values)
    assert gather(buf, desc).view(ubits).tolist() == np.array(patterns, dtype=ubits).reshape(2, 3).tolist()


def test_strides_up_to_2_to_the_32_over_a_sparse_file(tmp_path):
    desc = BufferTensorDesc("uint16", [2, 3], strides=[2**32 - 1, 1], directml_limits=False)
    total = desc.total_tensor_size_in_bytes
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as fh:
        fh.truncate(16 + total + 16)
    with open(path, "r+b") as fh:
        m = mmap.mmap(fh.fileno(), 16 + total + 16)
    try:
        far = 16 + (2**32 - 1) * 2
        m[16:24] = b"\xa5" * 8
        m[far - 2:far + 8] = b"\xa5" * 10
        values = np.array([[1, 2, 3], [4, 5, 6]], dtype="<u2")
        scatter(values, desc, m, offset=16)
        assert m[16:24] == np.array([1, 2, 3], "<u2").tobytes() + b"\xa5\xa5"
        assert m[far - 2:far + 8] == b"\xa5\xa5" + np.array([4, 5, 6], "<u2").tobytes() + b"\xa5\xa5"
        np.testing.assert_array_equal(gather(m, desc, offset=16), values)
    finally:
        m.close()


# --------------------------------------------------------------------------------------
# refusals, each before any byte is written

OVERLAPPING = [
    ("broadcast_rows", [2, 3], [0, 1]),
    ("broadcast_inner", [3, 2], [1, 0]),
    ("diagonal", [2, 2], [1, 1]),
    ("hidden", [2, 3], [2, 1]),
    ("all_zero", [2, 2, 2], [0, 0, 0]),
]


@pytest.mark.parametrize("name", ["uint8", "float32", "int64", "uint4"])
@pytest.mark.parametrize("case,sizes,strides", OVERLAPPING, ids=[c[0] for c in OVERLAPPING])
def test_overlapping_destination_is_refused(name, case, sizes, strides):
    desc = BufferTensorDesc(name, sizes, strides)
    assert desc.has_overlap
    before = bytes(guarded(64))
    buf = bytearray(before)
    values = np.zeros(sizes, dtype=ref.type_info(name).dtype)
    with pytest.raises(DescriptorError):
        scatter(values, desc, buf)
    assert bytes(buf) == before


@pytest.mark.parametrize("kind", ref.READ_ONLY_KINDS + ["mmap_read"])
def test_read_only_buffers_are_refused(kind):
    desc = BufferTensorDesc("uint8", [2, 3], strides=[4, 1])
    values = np.ones((2, 3), np.uint8)
    raw = bytes(guarded(16))
    if kind == "mmap_read":
        with tempfile.TemporaryFile() as fh:
            fh.write(raw)
            fh.flush()
            buf = mmap.mmap(fh.fileno(), 16, access=mmap.ACCESS_READ)
    else:
        buf = ref.make_buffer(kind, raw)
    with pytest.raises(BufferError):
        scatter(values, desc, buf)
    assert ref.buffer_bytes(buf) == raw


def test_non_contiguous_and_non_buffer_destinations_are_refused():
    desc = BufferTensorDesc("uint8", [4])
    store = bytearray(guarded(64))
    for buf in (memoryview(store)[::2], np.frombuffer(store, np.uint8)[::3]):
        with pytest.raises(BufferError):
            scatter(np.ones(4, np.uint8), desc, buf)
    assert bytes(store) == bytes(guarded(64))
    for obj in ([0] * 16, None, "x" * 16):
        with pytest.raises(TypeError):
            scatter(np.ones(4, np.uint8), desc, obj)


@pytest.mark.parametrize("name", ["uint8", "float32", "int4"])
def test_offset_alignment_and_bounds_are_checked_before_writing(name):
    desc = BufferTensorDesc(name, [3, 4], strides=[5, 1])
    total = desc.total_tensor_size_in_bytes
    values = ref.random_values(ref.type_info(name), (3, 4), 3)
    before = bytes(guarded(32 + total))
    buf = bytearray(before)
    for off in (1, 8, 17):
        with pytest.raises(DescriptorError):
            scatter(values, desc, buf, offset=off)
    for off in (-16, -1):
        with pytest.raises((BufferError, ValueError)):
            scatter(values, desc, buf, offset=off, check_alignment=False)
    with pytest.raises(BufferError) as info:
        scatter(values, desc, buf, offset=48)
    assert str(48 + total) in str(info.value) and str(len(buf)) in str(info.value)
    with pytest.raises(BufferError):
        scatter(values, desc, buf, offset=33, check_alignment=False)
    with pytest.raises(BufferError):
        scatter(values, desc, buf[: total - 1])
    aligned = BufferTensorDesc(name, [3, 4], strides=[5, 1], guaranteed_base_offset_alignment=32)
    with pytest.raises(DescriptorError):
        scatter(values, aligned, buf, offset=16)
    assert bytes(buf) == before
    # relaxed alignment, still in bounds: written exactly
    scatter(values, desc, buf, offset=32, check_alignment=False)
    scatter(values, aligned, buf, offset=16, check_alignment=False)
    expected = bytearray(before)
    ref.scatter_py(values, expected, name, (3, 4), (5, 1), 32)
    ref.scatter_py(values, expected, name, (3, 4), (5, 1), 16)
    assert bytes(buf) == bytes(expected)


def test_a_buffer_holding_the_elements_but_not_the_declared_range_is_refused():
    desc = BufferTensorDesc("float32", [2, 2], total_tensor_size_in_bytes=64)
    buf = bytearray(guarded(32))
    with pytest.raises(BufferError):
        scatter(np.ones((2, 2), np.float32), desc, buf)
    assert bytes(buf) == bytes(guarded(32))


@pytest.mark.parametrize("shape", [(3, 2), (6,), (3,), (1, 2, 3), (2, 3, 1), (), (2, 1)])
def test_shape_must_be_exactly_the_sizes(shape):
    desc = BufferTensorDesc("float32", [2, 3])
    buf = bytearray(guarded(24))
    with pytest.raises(ValueError):
        scatter(np.ones(shape, np.float32), desc, buf)
    assert bytes(buf) == bytes(guarded(24))


# --------------------------------------------------------------------------------------
# value conversion: as numpy.copyto(..., casting="same_kind"), refused otherwise

SOURCE_DTYPES = ["?", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "<c8", ">i4", ">f8"]
DEST_TYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("dest", DEST_TYPES)
@pytest.mark.parametrize("source", SOURCE_DTYPES)
def test_conversion_follows_numpy_same_kind(source, dest):
    sizes, strides = (2, 3), (4, 1)
    desc = BufferTensorDesc(dest, sizes, strides)
    dst_dtype = ref.type_info(dest).dtype
    values = np.array([[0, 1, 2], [3, 4, 5]]).astype(source)
    before = bytes(guarded(desc.total_tensor_size_in_bytes + 8))
    buf = bytearray(before)
    if np.can_cast(values.dtype, dst_dtype, casting="same_kind"):
        scatter(values, desc, buf)
        converted = np.empty(sizes, dst_dtype)
        np.copyto(converted, values, casting="same_kind")
        assert_only_elements_written(buf, before, dest, sizes, strides, 0, converted)
    else:
        with pytest.raises(TypeError):
            scatter(values, desc, buf)
        assert bytes(buf) == before


def test_conversion_that_wraps_like_copyto():
    values = np.array([300, 65535, 256, 255], dtype="<u2")
    buf = bytearray(8)
    scatter(values, BufferTensorDesc("uint8", [4]), buf)
    converted = np.empty(4, np.uint8)
    np.copyto(converted, values, casting="same_kind")
    assert bytes(buf[:4]) == converted.tobytes() == bytes([44, 255, 0, 255])
    signed = np.array([200, -200, 127], dtype="<i8")
    scatter(signed, BufferTensorDesc("int8", [3]), buf)
    np.copyto(converted[:3].view(np.int8), signed, casting="same_kind")
    assert bytes(buf[:3]) == converted[:3].tobytes()


def test_source_array_layouts_and_array_likes():
    desc = BufferTensorDesc("int16", [2, 3], strides=[3, 1])
    expected = np.array([[1, 2, 3], [4, 5, 6]], dtype="<i2")
    for source in (
        expected.copy(),
        np.asfortranarray(expected),
        np.array([[1, 4], [2, 5], [3, 6]], dtype="<i2").T,  # a transposed view
        np.array([[1, 0, 2, 0, 3], [4, 0, 5, 0, 6]], dtype="<i2")[:, ::2],  # a strided view
        expected.astype(">i2"),  # byte-swapped
        [[1, 2, 3], [4, 5, 6]],  # nested lists
    ):
        keep = np.array(source, copy=True)
        buf = bytearray(12)
        scatter(source, desc, buf)
        assert np.frombuffer(bytes(buf), "<i2").tolist() == [1, 2, 3, 4, 5, 6]
        np.testing.assert_array_equal(np.asarray(source), keep)  # the source is not modified


# --------------------------------------------------------------------------------------
# 4-bit ranges

FOUR_BIT_RANGE = {"uint4": (0, 15), "int4": (-8, 7)}


FOUR_BIT_SOURCE = {"uint4": "<u8", "int4": "<i8"}


@pytest.mark.parametrize("name", sorted(FOUR_BIT_RANGE))
def test_four_bit_range_boundaries_are_accepted(name):
    lo, hi = FOUR_BIT_RANGE[name]
    values = np.array([lo, hi, lo + 1, hi - 1, 0], dtype=FOUR_BIT_SOURCE[name])
    buf = bytearray(guarded(8))
    scatter(values, BufferTensorDesc(name, [5]), buf)
    assert gather(buf, BufferTensorDesc(name, [5])).tolist() == values.tolist()
    assert buf[2] >> 4 == GUARD >> 4  # the unused high nibble of the last byte


@pytest.mark.parametrize(
    "name,bad,dtype",
    [("uint4", 16, "u1"), ("uint4", 255, "u1"), ("uint4", 16, "<u2"), ("uint4", 2**40, "<u8"),
     ("int4", 8, "i1"), ("int4", -9, "i1"), ("int4", 127, "<i2"), ("int4", -128, "<i2"), ("int4", -2**40, "<i8")],
)
def test_four_bit_values_out_of_range_are_refused_before_writing(name, bad, dtype):
    values = np.array([[1, 2, 3], [4, 5, bad]], dtype=dtype)
    buf = bytearray(guarded(16))
    for strides in (None, (1, 2), (8, 1)):
        with pytest.raises(ValueError):
            scatter(values, BufferTensorDesc(name, [2, 3], strides), buf)
        assert bytes(buf) == bytes(guarded(16))


@pytest.mark.parametrize("name", sorted(FOUR_BIT_RANGE))
def test_four_bit_sources_in_range_from_other_integer_dtypes(name):
    lo, hi = FOUR_BIT_RANGE[name]
    expected = np.arange(lo, hi + 1)
    for dtype in ("u1", "i1", "<i2", "<u4", "<i8", "?"):
        if not np.can_cast(dtype, ref.type_info(name).dtype, casting="same_kind"):
            continue
        if dtype != "?" and expected.astype(dtype).astype(np.int64).tolist() != expected.tolist():
            continue  # this dtype cannot hold the whole range
        desc = BufferTensorDesc(name, [expected.size], strides=[3])
        buf = bytearray(guarded(desc.total_tensor_size_in_bytes))
        before = bytes(buf)
        source = expected.astype(dtype)
        scatter(source, desc, buf)
        assert gather(buf, desc).tolist() == source.astype(np.int64).tolist()
        assert_only_elements_written(buf, before, name, (expected.size,), (3,), 0,
                                     source.astype(ref.type_info(name).dtype))


@pytest.mark.parametrize("name", sorted(FOUR_BIT_RANGE))
def test_four_bit_refuses_what_same_kind_refuses(name):
    buf = bytearray(guarded(8))
    with pytest.raises(TypeError):
        scatter(np.array([1.0, 2.0, 3.0]), BufferTensorDesc(name, [3]), buf)
    if name == "uint4":
        with pytest.raises(TypeError):  # signed to unsigned is not a same-kind cast
            scatter(np.array([1, 2, 3], dtype=np.int8), BufferTensorDesc(name, [3]), buf)
    assert bytes(buf) == bytes(guarded(8))


def test_source_array_sharing_memory_with_the_destination():
    # The values written are the array's values before the call, as numpy.copyto gives.
    store = np.arange(64, dtype=np.uint8)
    source = store[:36].reshape(6, 6)
    expected_values = source.copy()
    desc = BufferTensorDesc("uint8", [6, 6], strides=[1, 6])  # transposed over the same bytes
    expected = bytearray(store.tobytes())
    ref.scatter_py(expected_values, expected, "uint8", (6, 6), (1, 6))
    scatter(source, desc, store)
    assert store.tobytes() == bytes(expected)
    np.testing.assert_array_equal(gather(store, desc), expected_values)


@pytest.mark.parametrize("name", ref.TYPE_NAMES)
@pytest.mark.parametrize("layout", ["padded", "column_major", "nhwc", "stepped"])
@pytest.mark.parametrize("shift", [0, 16, 48])
def test_source_viewing_the_destination_bytes(name, layout, shift):
    sizes, strides = LAYOUTS[layout]
    info = ref.type_info(name)
    desc = BufferTensorDesc(name, sizes, strides)
    count = int(np.prod(sizes))
    n = 64 + desc.total_tensor_size_in_bytes + count * info.dtype.itemsize
    raw = ref.random_bytes(shift, n)
    if info.bits == 4:
        raw = bytes(b & 0x07 for b in raw)  # in range for both 4-bit types
    store = np.frombuffer(bytearray(raw), np.uint8)
    source = np.frombuffer(store, dtype=info.dtype, count=count, offset=shift).reshape(sizes)
    values = source.copy()
    expected = bytearray(raw)
    ref.scatter_py(values, expected, name, sizes, strides, 16)
    scatter(source, desc, store, offset=16)
    assert store.tobytes() == bytes(expected)
