"""view: zero-copy numpy views with byte strides = element strides x item size."""

from __future__ import annotations

import mmap
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference as ref
from dmlstride import BufferTensorDesc, DescriptorError, gather, numpy_dtype, view


def test_padded_rows_view():
    buf = bytearray(b"ABCxxDEFxx")
    desc = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    v = view(buf, desc)
    assert v.shape == (2, 3) and v.strides == (5, 1) and v.dtype == np.uint8
    assert v.tobytes() == b"ABCDEF"
    assert v.flags.writeable
    v[1, 2] = ord("f")  # writes go to the buffer
    assert bytes(buf) == b"ABCxxDEfxx"
    buf[0] = ord("a")  # and the buffer's changes show in the view
    assert v[0, 0] == ord("a")


def test_broadcast_view_is_read_only():
    buf = bytearray(b"ABC\0")
    v = view(buf, BufferTensorDesc("uint8", [2, 3], strides=[0, 1]))
    assert v.strides == (0, 1)
    assert [bytes(r) for r in v] == [b"ABC", b"ABC"]
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1
    assert bytes(buf) == b"ABC\0"


@pytest.mark.parametrize("sizes,strides", [([2, 2], [1, 1]), ([2, 3], [2, 1]), ([3, 2], [1, 0]), ([2, 2, 2], [0, 0, 1])])
def test_any_overlap_makes_the_view_read_only(sizes, strides):
    desc = BufferTensorDesc("float32", sizes, strides)
    assert desc.has_overlap
    v = view(bytearray(64), desc)
    assert not v.flags.writeable


@pytest.mark.parametrize("name", ref.BYTE_TYPE_NAMES)
def test_strides_are_element_strides_times_item_size(name):
    sizes, strides = (2, 3, 4), (40, 1, 3)
    desc = BufferTensorDesc(name, sizes, strides)
    raw = ref.random_bytes(2, 32 + desc.total_tensor_size_in_bytes)
    buf = bytearray(raw)
    v = view(buf, desc, offset=32)
    item = np.dtype(numpy_dtype(desc.data_type)).itemsize
    assert v.dtype == numpy_dtype(desc.data_type)
    assert v.shape == sizes
    assert v.strides == tuple(s * item for s in strides)
    assert v.tobytes() == ref.gather_py(raw, name, sizes, strides, 32).tobytes()
    assert np.shares_memory(v, np.frombuffer(buf, np.uint8))
    # implicit strides: packed row-major
    packed = view(buf, BufferTensorDesc(name, sizes))
    assert packed.strides == tuple(s * item for s in ref.packed_strides(sizes))
    assert packed.flags.c_contiguous


def test_size_one_dimensions_keep_their_strides():
    desc = BufferTensorDesc("float32", [1, 3, 1], strides=[2**32 - 1, 2, 12345])
    v = view(bytearray(64), desc)
    assert v.shape == (1, 3, 1)
    assert v.strides == ((2**32 - 1) * 4, 8, 12345 * 4)


def test_zero_copy_in_both_directions():
    arr = np.zeros(32, dtype=np.float32)
    desc = BufferTensorDesc("float32", [4, 4], strides=[1, 4])  # column-major
    v = view(arr, desc)
    assert np.shares_memory(v, arr)
    v[...] = np.arange(16, dtype=np.float32).reshape(4, 4)
    assert arr[:16].tolist() == np.arange(16, dtype=np.float32).reshape(4, 4).T.reshape(-1).tolist()
    arr[1] = 99.0
    assert v[1, 0] == 99.0


@pytest.mark.parametrize("kind", ref.BUFFER_KINDS)
def test_every_buffer_kind(kind):
    desc = BufferTensorDesc("int16", [3, 4], strides=[6, 1])
    length = ref.buffer_length(kind, 16 + desc.total_tensor_size_in_bytes + 2)
    raw = ref.random_bytes(3, length)
    buf = ref.make_buffer(kind, raw)
    v = view(buf, desc, offset=16)
    assert v.tobytes() == ref.gather_py(raw, "int16", (3, 4), (6, 1), 16).tobytes()
    if kind in ref.READ_ONLY_KINDS:
        assert not v.flags.writeable
        return
    assert v.flags.writeable
    v[2, 3] = 0x1234
    expected = bytearray(raw)
    ref.scatter_py(np.array([0x1234], "<i2"), expected, "int16", (1,), (1,), 16 + 2 * (2 * 6 + 3))
    assert ref.buffer_bytes(buf) == bytes(expected)


def test_fortran_ordered_numpy_buffer():
    # a contiguous buffer whose memory order is not C order: view it like gather reads it
    # (its raw bytes), or refuse it as a buffer
    arr = np.asfortranarray(np.arange(64, dtype=np.uint8).reshape(8, 8))
    desc = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    expected = gather(arr, desc, offset=16)
    assert expected.tobytes() == ref.gather_py(arr.tobytes(order="A"), "uint8", (2, 3), (5, 1), 16).tobytes()
    try:
        v = view(arr, desc, offset=16)
    except BufferError:
        return
    assert v.tobytes() == expected.tobytes()
    assert np.shares_memory(v, arr)


def test_read_only_mmap_gives_read_only_view():
    with tempfile.TemporaryFile() as fh:
        fh.write(bytes(range(64)))
        fh.flush()
        m = mmap.mmap(fh.fileno(), 64, access=mmap.ACCESS_READ)
    v = view(m, BufferTensorDesc("uint8", [4, 4], strides=[8, 1]))
    assert not v.flags.writeable
    assert v.tolist() == [[8 * r + c for c in range(4)] for r in range(4)]
    del v
    m.close()


def test_odd_address_buffer():
    store = bytearray(ref.random_bytes(4, 200))
    mv = memoryview(store)[3:]
    desc = BufferTensorDesc("float64", [3, 4], strides=[5, 1])
    v = view(mv, desc, offset=16)
    assert v.tobytes() == ref.gather_py(bytes(mv), "float64", (3, 4), (5, 1), 16).tobytes()
    v[0, 0] = 1.5
    assert np.frombuffer(bytes(store[19:27]), "<f8")[0] == 1.5


@pytest.mark.parametrize("name", ["uint4", "int4"])
def test_four_bit_types_cannot_be_viewed(name):
    with pytest.raises((ValueError, TypeError)) as info:
        view(bytearray(16), BufferTensorDesc(name, [4]))
    assert "gather" in str(info.value)


def test_offset_alignment_and_bounds():
    desc = BufferTensorDesc("uint32", [2, 3], strides=[4, 1])  # 7 elements: 28 bytes
    assert desc.total_tensor_size_in_bytes == 28
    raw = ref.random_bytes(5, 64)
    buf = bytearray(raw)
    assert view(buf, desc, offset=32).tobytes() == ref.gather_py(raw, "uint32", (2, 3), (4, 1), 32).tobytes()
    for off in (4, 8, 12, 33):
        with pytest.raises(DescriptorError):
            view(buf, desc, offset=off)
    v = view(buf, desc, offset=4, check_alignment=False)
    assert v.tobytes() == ref.gather_py(raw, "uint32", (2, 3), (4, 1), 4).tobytes()
    v = view(buf, desc, offset=3, check_alignment=False)  # unaligned items are fine for numpy
    assert v.tobytes() == ref.gather_py(raw, "uint32", (2, 3), (4, 1), 3).tobytes()
    with pytest.raises(BufferError) as info:
        view(buf, desc, offset=48)
    assert "76" in str(info.value) and "64" in str(info.value)
    with pytest.raises(BufferError):
        view(buf, desc, offset=41, check_alignment=False)
    with pytest.raises((BufferError, ValueError)):
        view(buf, desc, offset=-16)
    aligned = BufferTensorDesc("uint32", [2, 3], strides=[4, 1], guaranteed_base_offset_alignment=32)
    with pytest.raises(DescriptorError):
        view(buf, aligned, offset=16)
    assert view(buf, aligned, offset=32).shape == (2, 3)
    # the whole declared range must fit, not just the elements
    big = BufferTensorDesc("uint32", [2, 3], strides=[4, 1], total_tensor_size_in_bytes=48)
    with pytest.raises(BufferError):
        view(buf, big, offset=32)
    assert bytes(buf) == raw


def test_non_contiguous_and_non_buffers_are_refused():
    desc = BufferTensorDesc("uint8", [4])
    with pytest.raises(BufferError):
        view(memoryview(bytearray(64))[::2], desc)
    with pytest.raises(BufferError):
        view(np.zeros((8, 8), np.uint8)[:, :4], desc)
    with pytest.raises(TypeError):
        view([0] * 16, desc)
    with pytest.raises(TypeError):
        view(bytes(16), (4,))


@settings(max_examples=150)
@given(data=st.data(), layout=ref.layouts(types=ref.BYTE_TYPE_NAMES), seed=st.integers(0, 2**32 - 1))
def test_view_agrees_with_gather_and_the_reference(data, layout, seed):
    kind, offset, aligned, length = data.draw(ref.placements(layout.total))
    raw = ref.random_bytes(seed, length)
    buf = ref.make_buffer(kind, raw)
    desc = BufferTensorDesc(layout.data_type, layout.sizes, layout.strides, layout.total)
    v = view(buf, desc, offset=offset, check_alignment=aligned)
    expected = ref.gather_py(raw, layout.data_type, layout.sizes, layout.strides, offset)
    assert v.shape == layout.sizes and v.dtype == expected.dtype
    assert v.strides == tuple(s * v.itemsize for s in layout.effective)
    assert np.ascontiguousarray(v).tobytes() == expected.tobytes()
    assert gather(buf, desc, offset=offset, check_alignment=aligned).tobytes() == expected.tobytes()
    writable = kind not in ref.READ_ONLY_KINDS and not ref.overlaps(layout.sizes, layout.effective)
    assert v.flags.writeable == writable


def test_huge_offsets_and_extents_are_buffer_errors():
    far = BufferTensorDesc("uint8", [2**31 - 1, 2], strides=[2**32 - 1, 1], directml_limits=False)
    declared = BufferTensorDesc("float32", [3], total_tensor_size_in_bytes=2**64 - 4, directml_limits=False)
    for desc in (far, declared):
        with pytest.raises(BufferError):
            view(bytearray(64), desc)
    for off in (2**62, 2**64):
        with pytest.raises(BufferError):
            view(bytearray(64), BufferTensorDesc("uint8", [4]), offset=off)
