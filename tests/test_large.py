"""Large tensors: offsets and sizes beyond 2**31 and 2**32 are never truncated.

The buffers are allocated zeroed (``numpy.zeros`` uses ``calloc``), so the
operating system only backs the few pages a test touches; the tests that
address multi-GiB buffers cost little memory.  The one that gathers an output
above 2**31 bytes writes about 2 GiB; it is also marked ``slow``, since merely
faulting in 2 GiB of fresh pages takes seconds on some virtual machines.

Marked ``bigmem``: deselect with ``-m "not bigmem"`` on small machines.  Each
test also skips itself when the machine reports too little available memory.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from dmlstride import BufferTensorDesc, copy_tensor, gather, scatter, view

pytestmark = pytest.mark.bigmem

GiB = 1 << 30


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def needs_memory(nbytes: int) -> None:
    avail = _available_bytes()
    if avail is not None and avail < nbytes:
        pytest.skip(f"needs about {nbytes / GiB:.1f} GiB of available memory, have {avail / GiB:.1f}")


def zeros(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes, dtype=np.uint8)


# (data type, sizes, strides): each puts elements at element offsets past 2**31
# or 2**32, and byte offsets past 2**32 for the wider types.
FAR_LAYOUTS = [
    ("uint8", [2, 3], [2**31 + 5, 1]),            # element offsets just past 2**31
    ("uint8", [3, 2], [2**32 - 1, 1]),            # past 2**32 (uint32 wrap would land near 0)
    ("uint16", [2, 2], [2**31 + 1, 1]),           # byte offsets past 2**32
    ("float64", [2, 2], [2**29 + 3, 1]),          # byte offsets past 2**32 via the element size
    ("int4", [2, 3], [2**32 - 1, 1]),             # nibble offsets past 2**32
    ("uint4", [3, 2, 2], [2**31 + 7, 1, 2**30]),  # three far dimensions
]


def _values(dt: str, sizes: list[int]) -> np.ndarray:
    from dmlstride import numpy_dtype

    n = int(np.prod(sizes))
    if dt == "int4":
        raw = (np.arange(n) % 15) - 7
    elif dt == "uint4":
        raw = (np.arange(n) % 15) + 1
    else:
        raw = np.arange(n) + 3
    return raw.astype(numpy_dtype(dt)).reshape(sizes)


def _assert_only_elements_written(buf: np.ndarray, base: int, offsets: np.ndarray, bits: int) -> None:
    """Around every element, the bytes that hold no element are still zero.

    (Scanning the whole multi-GiB buffer would touch every page; the
    neighbourhoods are where an off-by-some-bits offset would land.)
    """
    if bits == 4:
        spans = {(base + int(o) // 2, base + int(o) // 2 + 1) for o in offsets}
    else:
        width = bits // 8
        spans = {(base + int(o) * width, base + (int(o) + 1) * width) for o in offsets}
    held = set()
    for lo, hi in spans:
        held.update(range(lo, hi))
    for lo, hi in spans:
        for pos in range(max(0, lo - 64), min(len(buf), hi + 64)):
            if pos not in held:
                assert buf[pos] == 0, f"byte {pos} was written"
    assert buf[:base].tobytes() == bytes(base)


@pytest.mark.parametrize("dt,sizes,strides", FAR_LAYOUTS, ids=[f"{d}-{s[0]}" for d, s, _ in FAR_LAYOUTS])
def test_far_offsets_round_trip(dt, sizes, strides):
    desc = BufferTensorDesc(dt, sizes, strides, directml_limits=False)
    # Element offsets past 2**31, or byte offsets past 2**32.
    assert desc.last_offset > 2**31 or desc.last_offset * desc.element_bits // 8 > 2**32
    base = 32
    total = base + desc.total_tensor_size_in_bytes
    needs_memory(256 << 20)           # only a few pages are touched
    buf = zeros(total)
    values = _values(dt, sizes)
    scatter(values, desc, buf, offset=base)

    # Exactly the elements landed at their exact offsets: no byte elsewhere changed.
    bits = desc.element_bits
    offsets = desc.offsets()
    assert offsets.max() == desc.last_offset
    if bits == 4:
        touched = base + offsets // 2
        nibbles = np.where(offsets % 2 == 1, buf[touched] >> 4, buf[touched] & 0xF)
        np.testing.assert_array_equal(nibbles, values.ravel().astype(np.uint8) & 0xF)
    else:
        width = bits // 8
        for k, off in enumerate(offsets):
            start = base + int(off) * width
            got = buf[start:start + width].view(values.dtype)[0]
            assert got == values.ravel()[k], (k, int(off))
    _assert_only_elements_written(buf, base, offsets, bits)

    np.testing.assert_array_equal(gather(buf, desc, offset=base), values)

    # copy_tensor from the far layout to a packed one, and view the far one.
    packed = BufferTensorDesc(dt, sizes)
    dst = bytearray(packed.total_tensor_size_in_bytes)
    copy_tensor(buf, desc, dst, packed, src_offset=base)
    np.testing.assert_array_equal(gather(dst, packed), values)
    if bits >= 8:
        np.testing.assert_array_equal(view(buf, desc, offset=base), values)


def test_truncated_far_offsets_would_differ():
    stride = 2**32 - 3
    desc = BufferTensorDesc("uint8", [2, 2], [stride, 1])
    needs_memory(256 << 20)
    buf = zeros(desc.total_tensor_size_in_bytes)
    buf[:16] = 0xEE                       # decoys where a wrapped offset would land
    buf[stride] = 1
    buf[stride + 1] = 2
    got = gather(buf, desc)
    np.testing.assert_array_equal(got, [[0xEE, 0xEE], [1, 2]])


@pytest.mark.slow
def test_gather_output_above_2_gib():
    """An output of 2**31 + 32 bytes from a source range of about 2 GiB.

    The source holds two interleaved float32 channels; the gather splits them
    into planes, so both read and write offsets pass 2**31 bytes.
    """
    needs_memory(6 * GiB)
    per_channel = 2**28 + 4
    desc = BufferTensorDesc("float32", [2, per_channel], [1, 2])
    out_bytes = 2 * per_channel * 4
    assert out_bytes > 2**31
    src = np.zeros(2 * per_channel, dtype=np.float32)
    markers = [0, 1, 2, 3, 2**28, 2**28 + 1, 2**29 - 1, 2**29 + 4, 2 * per_channel - 2, 2 * per_channel - 1]
    for k in markers:
        src[k] = float(k % 1000 + 1)
    out = gather(src, desc)
    assert out.nbytes == out_bytes
    for k in markers:
        assert out[k % 2, k // 2] == float(k % 1000 + 1), k
    assert np.count_nonzero(out) == len(markers)
