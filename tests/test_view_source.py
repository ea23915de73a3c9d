"""view_source: the buffer, byte offset and descriptor behind a numpy view.

The reference is numpy itself: the view's own elements, strides and addresses.
"""

from __future__ import annotations

import mmap

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import dmlstride as ds
from dmlstride import DescriptorError, gather, scatter, view, view_source

DTYPES = [np.uint8, np.int16, np.float16, np.uint32, np.float32, np.int64, np.float64]


def _owned(shape, dtype, rng):
    """An array that owns its memory, filled with random bytes."""
    x = np.empty(shape, dtype=dtype)
    x.view(np.uint8).reshape(-1)[:] = rng.integers(0, 256, x.nbytes, dtype=np.uint8)
    return x


def _same(a, b):
    """Same shape and dtype, and bit-identical elements (NaN payloads included)."""
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == \
        np.ascontiguousarray(b).tobytes()


def _random_view(rng):
    """(owner of the memory, a random strided view into it)."""
    rank = int(rng.integers(1, 5))
    shape = tuple(int(n) for n in rng.integers(1, 7, size=rank))
    dtype = np.dtype(DTYPES[int(rng.integers(len(DTYPES)))])
    # 4 spare bytes: a total size rounds the elements' bytes up to a multiple of 4
    owner = _owned(int(np.prod(shape)) * dtype.itemsize + 4, np.uint8, rng)
    x = owner[: -4].view(dtype).reshape(shape)
    index = []
    for n in shape:
        start = int(rng.integers(0, n))
        step = int(rng.integers(1, 3))
        index.append(slice(start, None, step))
    v = x[tuple(index)]
    v = v.transpose(rng.permutation(v.ndim))
    return owner, v


def _check(x, v):
    src = view_source(v)
    assert src.buffer is x
    assert src.offset == v.ctypes.data - x.ctypes.data
    assert src.desc.sizes == (v.shape or (1,))
    assert src.desc == ds.BufferTensorDesc.from_numpy(v)
    assert _same(gather(src.buffer, src.desc, offset=src.offset, check_alignment=False), v.reshape(src.desc.sizes))
    shown = view(src.buffer, src.desc, offset=src.offset, check_alignment=False)
    assert shown.ctypes.data == v.ctypes.data or v.size == 1
    assert _same(shown, v.reshape(src.desc.sizes))
    return src


@pytest.mark.parametrize("seed", range(60))
def test_random_views_are_found_in_their_base(seed):
    rng = np.random.default_rng(seed)
    x, v = _random_view(rng)
    assert v.base is x
    src = _check(x, v)
    # scatter writes through to exactly the view's elements and no other byte
    before = x.view(np.uint8).reshape(-1).copy()
    new = _owned(v.shape, v.dtype, rng)
    scatter(new, src.desc, src.buffer, offset=src.offset, check_alignment=False)
    assert _same(v, new)
    written = np.zeros(x.nbytes, bool)
    for idx in np.ndindex(v.shape):
        at = src.offset + sum(i * s for i, s in zip(idx, v.strides))
        written[at:at + v.itemsize] = True
    changed = x.view(np.uint8).reshape(-1) != before
    assert not (changed & ~written).any()


def test_aligned_offset_needs_no_relaxing():
    x = np.zeros((6, 8), np.float32)
    x.flat = range(48)
    src = view_source(x[2:, 4:])
    assert (src.offset, src.offset % ds.MINIMUM_BUFFER_TENSOR_ALIGNMENT) == (80, 0)
    assert _same(gather(src.buffer, src.desc, offset=src.offset), x[2:, 4:])


def test_unaligned_offset_is_returned_and_the_binding_rule_explained():
    x = np.arange(48, dtype=np.float32).reshape(6, 8).copy()
    buf, off, desc = view_source(x[:, 1:3])
    assert off == 4
    with pytest.raises(DescriptorError, match=r"^offset is 4; a buffer tensor's binding offset must be a "
                                              r"multiple of 16 \(pass check_alignment=False to relax\)"):
        gather(buf, desc, offset=off)
    assert _same(gather(buf, desc, offset=off, check_alignment=False), x[:, 1:3])


def test_offset_need_not_be_a_multiple_of_the_item_size():
    raw = bytearray(64)
    v = np.ndarray((3, 2), dtype=np.float32, buffer=raw, offset=2, strides=(12, 4))
    v[...] = [[1, 2], [3, 4], [5, 6]]
    buf, off, desc = view_source(v)
    assert off == 2 and desc.strides == (3, 1)
    assert gather(buf, desc, offset=off, check_alignment=False).tolist() == [[1, 2], [3, 4], [5, 6]]


def test_a_contiguous_view_is_found_in_its_owner():
    x = np.arange(12, dtype=np.int32)
    src = view_source(x.reshape(3, 4)[1:])
    assert src.buffer is x and src.offset == 16 and src.desc.strides is None


def test_contiguous_array_is_its_own_buffer():
    x = np.arange(12, dtype=np.int32).reshape(3, 4).copy()
    src = view_source(x)
    assert src.buffer is x and src.offset == 0 and src.desc.strides is None


def test_transposed_and_fortran_views():
    x = np.asfortranarray(np.arange(24, dtype=np.int16).reshape(4, 6))
    _check(x, x)
    _check(x, x[1:, ::2].T)


def test_zero_d_view():
    x = np.arange(12, dtype=np.float64).reshape(3, 4).copy()
    v = x[1, 2, ...]
    src = _check(x, v)
    assert src.offset == 6 * 8 and src.desc.sizes == (1,)


def test_negative_strides_are_refused_clearly():
    x = np.arange(16, dtype=np.float32)
    with pytest.raises(DescriptorError, match=r"^array.strides\[0\] is -4 bytes: axis 0 runs backwards in "
                                              r"memory, and DirectML strides are unsigned"):
        view_source(x[::-1])
    with pytest.raises(DescriptorError, match=r"array.strides\[1\] is -8 bytes"):
        view_source(x.reshape(4, 4)[:, ::-2])
    # a reversed axis of size 1 reverses nothing
    _check(x.reshape(4, 4).base, x.reshape(4, 4)[:, ::-1][:, :1])


def test_broadcast_views_are_described_with_zero_strides():
    x = np.arange(12, dtype=np.float32).reshape(3, 4).copy()
    b = np.broadcast_to(x[:, None, :2], (3, 5, 2))
    src = view_source(b)
    assert src.desc.strides == (4, 0, 1) and src.desc.is_broadcast and src.desc.has_overlap
    assert np.shares_memory(src.buffer, x) and not src.buffer.flags.writeable  # b is read-only
    assert _same(gather(src.buffer, src.desc, offset=src.offset), b)
    assert _same(view(src.buffer, src.desc, offset=src.offset), b)
    before = x.copy()
    with pytest.raises((BufferError, DescriptorError)):
        scatter(np.zeros(b.shape, b.dtype), src.desc, src.buffer, offset=src.offset)
    assert _same(x, before)


def test_read_only_base():
    data = bytes(range(64))
    x = np.frombuffer(data, dtype=np.uint8).reshape(8, 8)
    v = x[1::2, 2:6]
    src = view_source(v)
    assert not src.buffer.flags.writeable
    assert _same(gather(src.buffer, src.desc, offset=src.offset, check_alignment=False), v)
    assert not view(src.buffer, src.desc, offset=src.offset, check_alignment=False).flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        scatter(np.zeros(v.shape, v.dtype), src.desc, src.buffer, offset=src.offset, check_alignment=False)
    assert data == bytes(range(64))


def test_read_only_view_of_a_writable_base_stays_read_only():
    x = np.arange(32, dtype=np.uint8).reshape(4, 8)
    v = x[:, ::2]
    v.flags.writeable = False
    src = view_source(v)
    assert not src.buffer.flags.writeable and x.flags.writeable
    assert src.buffer.ctypes.data == x.ctypes.data and src.buffer.nbytes == x.nbytes
    with pytest.raises(BufferError, match="read-only"):
        scatter(np.zeros(v.shape, v.dtype), src.desc, src.buffer, offset=src.offset)
    assert (x == np.arange(32).reshape(4, 8)).all()


def test_buffer_objects_behind_arrays():
    mm = mmap.mmap(-1, 256)
    try:
        x = np.frombuffer(mm, dtype=np.float32).reshape(8, 8)
        x[...] = np.arange(64).reshape(8, 8)
        v = x[4:, 1::3]
        src = view_source(v)
        assert np.shares_memory(np.asarray(src.buffer), x)
        assert _same(gather(src.buffer, src.desc, offset=src.offset, check_alignment=False), v)
        del x, v, src
    finally:
        try:
            mm.close()
        except BufferError:  # a view is still alive in this frame's garbage; closing is not the point
            pass


def test_as_strided_views():
    x = np.arange(20, dtype=np.int32)
    w = as_strided(x, shape=(4, 5), strides=(16, 4))  # overlapping windows
    src = view_source(w)
    assert src.buffer is x
    assert src.desc.strides == (4, 1) and src.desc.has_overlap
    assert _same(gather(src.buffer, src.desc, offset=src.offset), w)


def test_views_that_end_near_the_end_of_their_buffer():
    x = np.zeros(10, np.uint8)
    with pytest.raises(BufferError, match=r"^array ends 0 bytes before the end of its buffer, but the "
                                          r"descriptor's total size \(12 bytes"):
        view_source(x[1:])
    # a deeper base with room is found instead
    big = np.zeros(64, np.uint8)
    v = big[:10][1:]
    src = view_source(v)
    assert src.buffer is big and src.offset == 1


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: [1, 2, 3], TypeError, "array must be a numpy.ndarray, not list"),
        (lambda: memoryview(bytes(16)), TypeError, "array must be a numpy.ndarray, not memoryview"),
        (lambda: np.zeros((3, 0), np.float32)[:, :], DescriptorError, "every size must be at least 1"),
        (lambda: np.zeros(4, np.complex64)[::2], DescriptorError, "no DirectML equivalent"),
        (lambda: np.zeros(4, ">f4")[::2], DescriptorError, "big-endian"),
        (lambda: np.zeros(4, dtype=[("a", "<f4"), ("b", "u1")])["a"], DescriptorError,
         r"array.strides\[0\] is 5 bytes; expected a non-negative multiple of the item size"),
    ],
)
def test_views_that_cannot_be_described(make, error, message):
    with pytest.raises(error, match=message):
        view_source(make())


def test_exported():
    assert "view_source" in ds.__all__ and "ViewSource" in ds.__all__
    src = view_source(np.zeros(4, np.uint8))
    assert isinstance(src, ds.ViewSource) and src._fields == ("buffer", "offset", "desc")
