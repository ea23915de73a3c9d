"""gather: the memory model's worked examples, arguments, buffers, and numpy's own strides.

Every expected value comes from the examples of the memory model, from the
byte-level reference in ``reference.py`` or from numpy's ``as_strided``.
"""

from __future__ import annotations

import mmap
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import as_strided

import reference as ref
from dmlstride import BufferTensorDesc, DescriptorError, gather, numpy_dtype

# --------------------------------------------------------------------------------------
# worked examples


def test_padded_rows_gather_to_packed_rows():
    # 2x3, strides {5, 1}, over A B C x x D E F x x (x = padding)
    desc = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    buf = b"ABCxxDEFxx"
    assert desc.total_tensor_size_in_bytes == 8  # the last element is at offset 7
    out = gather(buf, desc)
    assert out.shape == (2, 3)
    assert out.dtype == np.uint8
    assert [bytes(row) for row in out] == [b"ABC", b"DEF"]


def test_padded_rows_of_float32():
    values = {"A": 1.5, "B": -2.0, "C": 3.25, "D": 4.0, "E": -0.5, "F": 6.0, "x": np.nan}
    raw = np.array([values[c] for c in "ABCxxDEFxx"], dtype="<f4").tobytes()
    out = gather(raw, BufferTensorDesc("float32", [2, 3], strides=[5, 1]))
    np.testing.assert_array_equal(out, [[1.5, -2.0, 3.25], [4.0, -0.5, 6.0]])


def test_broadcast_buffer_gathers_to_equal_rows():
    # 2x3, strides {0, 1}, over A B C: logically A B C / A B C
    desc = BufferTensorDesc("uint8", [2, 3], strides=[0, 1])
    out = gather(b"ABC\0", desc)
    assert [bytes(row) for row in out] == [b"ABC", b"ABC"]
    half = np.array([1.0, -2.0, 3.0], dtype="<f2")
    out16 = gather(half.tobytes() + bytes(2), BufferTensorDesc("float16", [2, 3], strides=[0, 1]))
    np.testing.assert_array_equal(out16, [half, half])


def test_column_major_memory_gathers_to_logical_rows():
    # memory A D B E C F holds logical rows A B C / D E F (strides {1, 2})
    out = gather(b"ADBECF\0\0", BufferTensorDesc("uint8", [2, 3], strides=[1, 2]))
    assert out.tobytes() == b"ABCDEF"


def test_dhw_element_offset_example():
    # 2x2x3 "DHW" with strides {6, 3, 1}: element H at (1, 0, 1) is at offset 7
    desc = BufferTensorDesc("uint8", [2, 2, 3], strides=[6, 3, 1])
    out = gather(b"ABCDEFGHIJKL", desc)
    assert bytes([out[1, 0, 1]]) == b"H"
    assert out.tobytes() == b"ABCDEFGHIJKL"


def test_nhwc_1x1x3x5_worked_example():
    # height 3, width 5 as 4-D: packed NCHW and packed NHWC describe the same bytes
    data = np.arange(15, dtype="<f4")
    nchw = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 15, 5, 1])
    nhwc = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 1, 5, 1])
    implicit = BufferTensorDesc("float32", [1, 1, 3, 5])
    for desc in (nchw, nhwc, implicit):
        assert desc.total_tensor_size_in_bytes == 60
        np.testing.assert_array_equal(gather(data.tobytes(), desc), data.reshape(1, 1, 3, 5))


def test_nhwc_with_three_channels():
    # element (c, h, w) has value 100c + 10h + w; NHWC memory is ordered h, w, c
    memory = np.array([100 * c + 10 * h + w for h in range(2) for w in range(2) for c in range(3)], dtype="<i4")
    desc = BufferTensorDesc("int32", [1, 3, 2, 2], strides=[12, 1, 6, 3])
    out = gather(memory.tobytes(), desc)
    expected = np.array([[[[100 * c + 10 * h + w for w in range(2)] for h in range(2)] for c in range(3)]])
    np.testing.assert_array_equal(out, expected)


def test_four_bit_packing_example():
    # packed [1, 2, 3, 4, 5] is the bytes 0x21 0x43 0x05
    raw = bytes([0x21, 0x43, 0x05, 0x00])
    out = gather(raw, BufferTensorDesc("uint4", [5]))
    assert out.dtype == np.uint8
    assert out.tolist() == [1, 2, 3, 4, 5]


def test_four_bit_unpacks_every_nibble_value():
    raw = bytes([v | (15 - v) << 4 for v in range(16)])  # nibbles 0, 15, 1, 14, ...
    nibbles = [n for v in range(16) for n in (v, 15 - v)]
    u = gather(raw, BufferTensorDesc("uint4", [32]))
    assert u.dtype == np.uint8 and u.tolist() == nibbles
    i = gather(raw, BufferTensorDesc("int4", [32]))
    assert i.dtype == np.int8
    assert i.tolist() == [n - 16 if n >= 8 else n for n in nibbles]
    assert i.min() == -8 and i.max() == 7
    assert gather(bytes([0xF8, 0, 0, 0]), BufferTensorDesc("int4", [2])).tolist() == [-8, -1]


def test_four_bit_strided_and_broadcast():
    raw = bytes([0x21, 0x43, 0x65, 0x87])  # nibbles 1 2 3 4 5 6 7 8
    assert gather(raw, BufferTensorDesc("uint4", [4], strides=[2])).tolist() == [1, 3, 5, 7]
    assert gather(raw, BufferTensorDesc("uint4", [2, 3], strides=[0, 1])).tolist() == [[1, 2, 3]] * 2
    assert gather(raw, BufferTensorDesc("uint4", [2, 3], strides=[1, 2])).tolist() == [[1, 3, 5], [2, 4, 6]]
    assert gather(raw, BufferTensorDesc("int4", [2, 2], strides=[3, 1])).tolist() == [[1, 2], [4, 5]]
    assert gather(raw, BufferTensorDesc("int4", [3], strides=[3])).tolist() == [1, 4, 7]
    assert gather(raw, BufferTensorDesc("int4", [1], strides=[0]), offset=0).tolist() == [1]
    assert gather(raw, BufferTensorDesc("int4", [2], strides=[7])).tolist() == [1, -8]


# --------------------------------------------------------------------------------------
# the result


@pytest.mark.parametrize("name", ref.TYPE_NAMES)
def test_result_is_a_fresh_packed_array_of_the_element_dtype(name):
    desc = BufferTensorDesc(name, [3, 4], strides=[9, 2])
    raw = bytearray(ref.random_bytes(3, desc.total_tensor_size_in_bytes))
    out = gather(raw, desc)
    assert out.shape == (3, 4)
    assert out.dtype == numpy_dtype(desc.data_type) == ref.TYPES[name].dtype
    assert out.flags.c_contiguous and out.flags.writeable and out.flags.owndata
    assert not np.shares_memory(out, np.frombuffer(raw, np.uint8))
    assert out.tobytes() == ref.gather_py(raw, name, (3, 4), (9, 2)).tobytes()


@pytest.mark.parametrize("rank", range(1, 9))
def test_every_rank(rank):
    sizes = tuple([2, 3, 1, 2, 2, 1, 3, 2][:rank])
    strides = ref.order_strides(sizes, list(range(rank))[::-1], pads=[1] * rank)
    for name in ("uint8", "float16", "int32", "float64", "int4"):
        desc = BufferTensorDesc(name, sizes, strides)
        raw = ref.random_bytes(rank, desc.total_tensor_size_in_bytes)
        assert gather(raw, desc).tobytes() == ref.gather_py(raw, name, sizes, strides).tobytes()
        assert gather(raw, BufferTensorDesc(name, sizes)).tobytes() == ref.gather_py(raw, name, sizes, None).tobytes()


def test_size_one_dimensions_with_huge_strides():
    sizes = (1, 3, 1, 4, 1)
    strides = (2**32 - 1, 4, 2**31, 1, 123456789)
    desc = BufferTensorDesc("float32", sizes, strides)
    assert desc.total_tensor_size_in_bytes == 48
    raw = ref.random_bytes(1, 48)
    assert gather(raw, desc).tobytes() == ref.gather_py(raw, "float32", sizes, strides).tobytes()


def test_all_zero_strides_broadcast_one_element():
    for name in ("uint8", "float16", "uint32", "int64", "uint4"):
        desc = BufferTensorDesc(name, [3, 2, 4], strides=[0, 0, 0])
        raw = ref.random_bytes(2, desc.total_tensor_size_in_bytes)
        out = gather(raw, desc)
        assert (out == out.reshape(-1)[0]).all()
        assert out.tobytes() == ref.gather_py(raw, name, (3, 2, 4), (0, 0, 0)).tobytes()


# --------------------------------------------------------------------------------------
# bits are moved exactly


SPECIAL_BITS = {
    "float32": ("<u4", [0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000, 0x00000001, 0x7F800000, 0xFFFFFFFF]),
    "float16": ("<u2", [0x0001, 0x03FF, 0x8001, 0x8000, 0x7C01, 0x7E00, 0xFD55, 0x7C00]),
    "float64": ("<u8", [0x7FF0000000000001, 0xFFF8DEADBEEF0001, 0x8000000000000000, 0x0000000000000001]),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_BITS))
@pytest.mark.parametrize("layout", ["packed", "stepped", "transposed", "broadcast"])
def test_nan_payloads_negative_zero_and_subnormals_are_bit_exact(name, layout):
    ubits, patterns = SPECIAL_BITS[name]
    pool = np.array(patterns * 8, dtype=ubits)  # at least 32 elements
    if layout == "packed":
        sizes, strides = (4, 8), None
    elif layout == "stepped":
        sizes, strides = (4, 4), (8, 2)
    elif layout == "transposed":
        sizes, strides = (8, 4), (1, 8)
    else:
        sizes, strides = (4, 8), (0, 1)
    desc = BufferTensorDesc(name, sizes, strides)
    raw = pool.tobytes()[: desc.total_tensor_size_in_bytes].ljust(desc.total_tensor_size_in_bytes, b"\0")
    out = gather(raw, desc)
    assert out.view(ubits).tobytes() == ref.gather_py(raw, name, sizes, strides).tobytes()


# --------------------------------------------------------------------------------------
# out=


def test_out_is_filled_and_returned():
    desc = BufferTensorDesc("int16", [2, 3], strides=[4, 1])
    raw = np.arange(8, dtype="<i2").tobytes()
    out = np.full((2, 3), -1, dtype=np.int16)
    result = gather(raw, desc, out=out)
    assert result is out
    assert out.tolist() == [[0, 1, 2], [4, 5, 6]]
    # again, into the same array (a cached plan may now be in use)
    raw2 = np.arange(10, 18, dtype="<i2").tobytes()
    assert gather(raw2, desc, out=out) is out
    assert out.tolist() == [[10, 11, 12], [14, 15, 16]]


def test_out_for_four_bit_types():
    out = np.zeros(5, dtype=np.int8)
    assert gather(bytes([0x21, 0x43, 0x0F, 0]), BufferTensorDesc("int4", [5]), out=out) is out
    assert out.tolist() == [1, 2, 3, 4, -1]


def _bad_outs():
    base = np.zeros((2, 3), dtype=np.float32)
    ro = np.zeros((2, 3), dtype=np.float32)
    ro.flags.writeable = False
    return {
        "shape": np.zeros((3, 2), dtype=np.float32),
        "flat": np.zeros(6, dtype=np.float32),
        "dtype": np.zeros((2, 3), dtype=np.float64),
        "same_size_dtype": np.zeros((2, 3), dtype=np.int32),
        "big_endian": np.zeros((2, 3), dtype=">f4"),
        "non_contiguous": np.zeros((2, 6), dtype=np.float32)[:, ::2],
        "fortran": np.asfortranarray(base),
        "read_only": ro,
        "list": [[0.0] * 3] * 2,
    }


@pytest.mark.parametrize("what", sorted(_bad_outs()))
@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_bad_out_is_refused_and_left_untouched(what, warm):
    desc = BufferTensorDesc("float32", [2, 3], strides=[4, 1])
    raw = np.arange(8, dtype="<f4").tobytes()
    if warm:
        gather(raw, desc)
        gather(raw, desc, out=np.empty((2, 3), np.float32))
    out = _bad_outs()[what]
    before = np.array(out, copy=True)
    with pytest.raises((TypeError, ValueError, BufferError)):
        gather(raw, desc, out=out)
    np.testing.assert_array_equal(np.asarray(out), before)


# --------------------------------------------------------------------------------------
# offsets, alignment and bounds


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_offset_rules(warm):
    desc = BufferTensorDesc("float32", [2, 3], strides=[4, 1])  # 32 bytes
    raw = ref.random_bytes(9, 128)
    if warm:
        gather(raw, desc)
    for off in (0, 16, 32, 96):
        assert gather(raw, desc, offset=off).tobytes() == ref.gather_py(raw, "float32", (2, 3), (4, 1), off).tobytes()
    for off in (1, 4, 8, 15, 20, 33):
        with pytest.raises(DescriptorError, match=str(off)):
            gather(raw, desc, offset=off)
        got = gather(raw, desc, offset=off, check_alignment=False)
        assert got.tobytes() == ref.gather_py(raw, "float32", (2, 3), (4, 1), off).tobytes()
    with pytest.raises((BufferError, ValueError)):
        gather(raw, desc, offset=-16)
    with pytest.raises((BufferError, ValueError)):
        gather(raw, desc, offset=-1, check_alignment=False)
    for bad in (16.0, "16", None, np.float64(16)):
        with pytest.raises(TypeError):
            gather(raw, desc, offset=bad)
    assert gather(raw, desc, offset=np.int64(16)).tobytes() == gather(raw, desc, offset=16).tobytes()


@pytest.mark.parametrize("align", [32, 64, 256])
def test_guaranteed_base_offset_alignment(align):
    desc = BufferTensorDesc("uint8", [4, 4], strides=[5, 1], guaranteed_base_offset_alignment=align)
    raw = ref.random_bytes(4, 1024)
    for off in range(0, 512, 16):
        if off % align:
            with pytest.raises(DescriptorError, match=str(align)):
                gather(raw, desc, offset=off)
            # only the alignment part is relaxed
            assert gather(raw, desc, offset=off, check_alignment=False).tobytes() == \
                ref.gather_py(raw, "uint8", (4, 4), (5, 1), off).tobytes()
        else:
            assert gather(raw, desc, offset=off).tobytes() == ref.gather_py(raw, "uint8", (4, 4), (5, 1), off).tobytes()


@pytest.mark.parametrize("name", ["uint8", "float32", "int64", "uint4"])
@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_buffer_must_hold_offset_plus_total_size(name, warm):
    # total_tensor_size_in_bytes larger than the minimum: the whole range must fit
    small = BufferTensorDesc(name, [3, 3], strides=[4, 1])
    desc = BufferTensorDesc(name, [3, 3], strides=[4, 1], total_tensor_size_in_bytes=small.total_tensor_size_in_bytes + 40)
    total = desc.total_tensor_size_in_bytes
    for off in (0, 32):
        exact = ref.random_bytes(5, off + total)
        if warm:
            gather(exact, desc, offset=off)
        expected = ref.gather_py(exact, name, (3, 3), (4, 1), off).tobytes()
        assert gather(exact, desc, offset=off).tobytes() == expected
        assert gather(bytearray(exact), desc, offset=off, check_alignment=False).tobytes() == expected
        short = exact[:-1]
        for check in (True, False):
            with pytest.raises(BufferError) as info:
                gather(short, desc, offset=off, check_alignment=check)
            message = str(info.value)
            assert str(off + total) in message and str(len(short)) in message
        # a buffer holding the elements but not the whole declared range
        with pytest.raises(BufferError):
            gather(exact[: off + small.total_tensor_size_in_bytes], desc, offset=off)
    with pytest.raises(BufferError):
        gather(b"", desc)
    with pytest.raises(BufferError):
        gather(ref.random_bytes(5, 2**12), desc, offset=2**40)


# --------------------------------------------------------------------------------------
# buffers


@pytest.mark.parametrize("kind", ref.BUFFER_KINDS)
@pytest.mark.parametrize("name", ["uint8", "float16", "float32", "int64", "int4"])
def test_every_buffer_kind(kind, name):
    sizes, strides = (3, 5), (7, 1)
    desc = BufferTensorDesc(name, sizes, strides)
    length = ref.buffer_length(kind, 16 + desc.total_tensor_size_in_bytes + 3)
    raw = ref.random_bytes(len(kind), length)
    buf = ref.make_buffer(kind, raw)
    expected = ref.gather_py(raw, name, sizes, strides, 16).tobytes()
    assert gather(buf, desc, offset=16).tobytes() == expected
    assert gather(buf, desc, offset=16).tobytes() == expected  # again, with a warm plan
    assert ref.buffer_bytes(buf) == raw


def test_odd_address_memoryview_slices():
    store = bytearray(ref.random_bytes(6, 4096))
    for start in (1, 3, 5, 7, 9, 15):
        view = memoryview(store)[start:]
        assert np.frombuffer(view, np.uint8).ctypes.data % 2 == 1
        for name in ("uint16", "float32", "float64", "uint64", "uint4"):
            for sizes, strides in (((4, 6), None), ((4, 6), (1, 4)), ((4, 6), (9, 1)), ((3, 4), (0, 1))):
                desc = BufferTensorDesc(name, sizes, strides)
                got = gather(view, desc, offset=16)
                assert got.tobytes() == ref.gather_py(bytes(view), name, sizes, strides, 16).tobytes()


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_non_contiguous_buffers_are_refused(warm):
    desc = BufferTensorDesc("uint8", [4])
    store = bytearray(64)
    if warm:
        gather(store, desc)
    for buf in (memoryview(store)[::2], np.zeros(64, np.uint8)[::2], np.zeros((8, 8), np.uint8)[:, :4]):
        with pytest.raises(BufferError):
            gather(buf, desc)


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_objects_without_the_buffer_protocol_are_refused(warm):
    desc = BufferTensorDesc("uint8", [4])
    if warm:
        gather(bytes(4), desc)
    for obj in ([0, 1, 2, 3], "abcd", None, 1234, (1, 2, 3, 4)):
        with pytest.raises(TypeError):
            gather(obj, desc)


def test_desc_must_be_a_buffer_tensor_desc():
    for bad in (None, "uint8", (4,), BufferTensorDesc("uint8", [4]).to_ctypes()):
        with pytest.raises(TypeError):
            gather(bytes(16), bad)


def test_fortran_ordered_numpy_buffer_is_read_in_memory_order():
    arr = np.asfortranarray(np.arange(64, dtype=np.uint8).reshape(8, 8))
    raw = arr.tobytes(order="A")  # the bytes in memory order
    desc = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    assert gather(arr, desc, offset=16).tobytes() == ref.gather_py(raw, "uint8", (2, 3), (5, 1), 16).tobytes()


def test_mmap_read_only_and_writable():
    raw = ref.random_bytes(8, 256)
    with tempfile.TemporaryFile() as fh:
        fh.write(raw)
        fh.flush()
        for access in (mmap.ACCESS_READ, mmap.ACCESS_WRITE, mmap.ACCESS_COPY):
            m = mmap.mmap(fh.fileno(), 256, access=access)
            try:
                desc = BufferTensorDesc("int32", [3, 5], strides=[6, 1])
                assert gather(m, desc, offset=32).tobytes() == ref.gather_py(raw, "int32", (3, 5), (6, 1), 32).tobytes()
            finally:
                m.close()


def test_strides_up_to_2_to_the_32_over_a_sparse_file(tmp_path):
    # A stride of 2**32 - 1 elements over a sparse file (only touched pages are real).
    for name, width in (("uint8", 1), ("float32", 4)):
        desc = BufferTensorDesc(name, [2, 3], strides=[2**32 - 1, 1], directml_limits=False)
        total = desc.total_tensor_size_in_bytes
        assert total == ((2**32 + 2) * width + 3) // 4 * 4
        path = tmp_path / f"sparse-{name}.bin"
        with open(path, "wb") as fh:
            fh.truncate(16 + total)
        with open(path, "r+b") as fh:
            m = mmap.mmap(fh.fileno(), 16 + total)
        try:
            first = ref.random_bytes(1, 3 * width)
            second = ref.random_bytes(2, 3 * width)
            far = 16 + (2**32 - 1) * width
            m[16:16 + 3 * width] = first
            m[far:far + 3 * width] = second
            out = gather(m, desc, offset=16)
            assert out.tobytes() == first + second
            with pytest.raises(BufferError):
                gather(m, desc, offset=32)
        finally:
            m.close()


# --------------------------------------------------------------------------------------
# agreement with numpy


@settings(max_examples=150)
@given(data=st.data(), layout=ref.layouts(types=ref.BYTE_TYPE_NAMES), seed=st.integers(0, 2**32 - 1))
def test_agrees_with_numpy_as_strided(data, layout, seed):
    offset = data.draw(st.integers(0, 40))
    raw = ref.random_bytes(seed, offset + layout.total)
    item = layout.info.dtype.itemsize
    first = np.frombuffer(raw, dtype=layout.info.dtype, count=1, offset=offset)
    expected = as_strided(first, shape=layout.sizes, strides=[s * item for s in layout.effective]).copy()
    desc = BufferTensorDesc(layout.data_type, layout.sizes, layout.strides, layout.total)
    got = gather(raw, desc, offset=offset, check_alignment=False)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


@settings(max_examples=100)
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=5),
    dtype=st.sampled_from(["<f4", "<f2", "u1", "<i8", "<u2", "<f8"]),
    data=st.data(),
)
def test_agrees_with_numpy_views(shape, dtype, data):
    # numpy's own strided views (slices with steps, transposes) as described by from_numpy
    count = int(np.prod(shape)) * 3
    # a few spare elements past the array: the declared size rounds up to 4 bytes
    base = np.frombuffer(ref.random_bytes(len(shape), (count + 8) * np.dtype(dtype).itemsize), dtype=dtype)
    arr = base[:count].reshape([n * 3 if i == 0 else n for i, n in enumerate(shape)])
    steps = tuple(slice(None, None, data.draw(st.integers(1, 3))) for _ in shape)
    v = arr[steps]
    v = v.transpose(data.draw(st.permutations(range(v.ndim))))
    desc = BufferTensorDesc.from_numpy(v)
    start = v.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    got = gather(base, desc, offset=start, check_alignment=False)
    assert got.tobytes() == np.ascontiguousarray(v).tobytes()


def test_out_sharing_memory_with_the_buffer():
    # out receives the tensor as it was before the call.
    store = np.arange(32, dtype=np.float32)
    desc = BufferTensorDesc("float32", [4, 4], strides=[1, 4])
    expected = ref.gather_py(store.tobytes(), "float32", (4, 4), (1, 4))
    out = store[:16].reshape(4, 4)
    assert gather(store, desc, out=out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("warm", [False, True], ids=["first_call", "after_a_good_call"])
def test_huge_offsets_and_extents_are_buffer_errors(warm):
    desc = BufferTensorDesc("uint8", [4, 4])
    if warm:
        gather(bytes(16), desc)
    for off in (2**40, 2**62, 2**63, 2**64, 2**100):
        with pytest.raises(BufferError):
            gather(bytes(64), desc, offset=off)
        with pytest.raises(BufferError):
            gather(bytes(64), desc, offset=off + 3, check_alignment=False)
    # descriptors whose extent or declared range is near 2**63 bytes
    far = BufferTensorDesc("uint8", [2**31 - 1, 2], strides=[2**32 - 1, 1], directml_limits=False)
    declared = BufferTensorDesc("float32", [3], total_tensor_size_in_bytes=2**64 - 4, directml_limits=False)
    for big in (far, declared):
        with pytest.raises(BufferError) as info:
            gather(bytes(64), big)
        assert str(big.total_tensor_size_in_bytes) in str(info.value) and "64" in str(info.value)


@pytest.mark.parametrize("name", ref.TYPE_NAMES)
@pytest.mark.parametrize("sizes,strides", [((4, 6), (1, 4)), ((3, 5), (7, 1)), ((2, 3, 4), (1, 8, 2)), ((4, 6), (0, 1))])
@pytest.mark.parametrize("shift", [0, 8, 32])
def test_out_viewing_the_buffer_bytes(name, sizes, strides, shift):
    info = ref.type_info(name)
    desc = BufferTensorDesc(name, sizes, strides)
    count = int(np.prod(sizes))
    raw = ref.random_bytes(shift, 32 + desc.total_tensor_size_in_bytes + count * info.dtype.itemsize)
    store = np.frombuffer(bytearray(raw), np.uint8)
    expected = ref.gather_py(raw, name, sizes, strides, 32)
    out = np.frombuffer(store, dtype=info.dtype, count=count, offset=shift).reshape(sizes)
    assert gather(store, desc, offset=32, out=out) is out
    assert out.tobytes() == expected.tobytes()
