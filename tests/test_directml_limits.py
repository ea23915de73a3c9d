"""DirectML's limits on a buffer tensor's extent, and ``directml_limits=False``.

DirectML refuses a buffer tensor whose element extent (offset of the last
element + 1) exceeds 2**32 - 1, or whose ``TotalTensorSizeInBytes`` exceeds the
size of 2**32 - 1 elements of its type.  ``directml_limits=False`` lifts those
rules and the element-count rule, never the 32-bit field limits.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlstride
from dmlstride import BufferTensorDesc, DescriptorError, TensorDataType, calc_buffer_tensor_size
from dmlstride.cli import main

import reference as ref

U32 = 2**32 - 1
TYPES = [t for t in TensorDataType if t is not TensorDataType.UNKNOWN]


def limit_bytes(t: TensorDataType) -> int:
    """The reference size formula for an extent of 2**32 - 1 elements."""
    return ref.min_size(t.name, [U32], None)


def test_constants():
    assert dmlstride.MAX_ELEMENT_EXTENT == 2**32 - 1
    assert dmlstride.MAX_ELEMENT_COUNT == 2**32 - 1


def test_issue_examples_are_refused():
    with pytest.raises(DescriptorError, match=r"element extent of 4294967297.*2\*\*32 - 1") as info:
        BufferTensorDesc("float32", [3], strides=[2**31])
    assert "strides" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(DescriptorError, match=r"total_tensor_size_in_bytes is 1099511627776; "
                                              r"DirectML's limit for FLOAT32 is 17179869180 bytes"):
        BufferTensorDesc("float32", [1], total_tensor_size_in_bytes=2**40)


def test_issue_examples_at_the_limit_stay_valid():
    d = BufferTensorDesc("uint8", [2**32 - 1])
    assert d.total_tensor_size_in_bytes == 2**32           # rounds up past 2**32 - 1 bytes
    d = BufferTensorDesc("float32", [2], strides=[2**32 - 2])
    assert d.last_offset + 1 == 2**32 - 1
    assert d.total_tensor_size_in_bytes == 4 * (2**32 - 1)


@pytest.mark.parametrize("t", TYPES, ids=[t.name for t in TYPES])
def test_total_size_limit_per_type(t):
    cap = limit_bytes(t)
    assert BufferTensorDesc(t, [1], total_tensor_size_in_bytes=cap).total_tensor_size_in_bytes == cap
    assert BufferTensorDesc(t, [U32]).total_tensor_size_in_bytes == cap
    with pytest.raises(DescriptorError, match=f"total_tensor_size_in_bytes is {cap + 1}; DirectML's limit"):
        BufferTensorDesc(t, [1], total_tensor_size_in_bytes=cap + 1)
    lifted = BufferTensorDesc(t, [1], total_tensor_size_in_bytes=cap + 1, directml_limits=False)
    assert lifted.total_tensor_size_in_bytes == cap + 1


@pytest.mark.parametrize("sizes, strides", [([2], [U32]), ([3, 2], [2**31 - 1, 1]), ([2] * 8, [2**29] * 8),
                                            ([2, 2**16, 2], [1, 2**16, 2**31])])
def test_extent_past_the_limit(sizes, strides):
    last = max(ref.element_offsets_np(sizes, strides))
    assert last + 1 > U32
    with pytest.raises(DescriptorError, match="element extent"):
        BufferTensorDesc("uint8", sizes, strides)
    d = BufferTensorDesc("uint8", sizes, strides, directml_limits=False)
    assert d.last_offset == last
    assert d.minimum_size_in_bytes == ref.min_size("uint8", sizes, strides)


@given(st.lists(st.integers(1, 2**16), min_size=1, max_size=4).flatmap(
    lambda sizes: st.tuples(st.just(sizes), st.lists(st.integers(0, 2**32 - 1), min_size=len(sizes),
                                                     max_size=len(sizes)))),
    st.sampled_from(TYPES))
def test_limits_match_the_reference(shape, t):
    sizes, strides = shape
    count = int(np.prod(sizes, dtype=object))
    extent = sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
    minimum = ref.min_size(t.name, sizes, strides)
    ok = count <= U32 and extent <= U32
    if ok:
        d = BufferTensorDesc(t, sizes, strides)
        assert d.total_tensor_size_in_bytes == minimum <= limit_bytes(t)
    else:
        with pytest.raises(DescriptorError):
            BufferTensorDesc(t, sizes, strides)
    if minimum < 2**64:
        d = BufferTensorDesc(t, sizes, strides, directml_limits=False)
        assert d.total_tensor_size_in_bytes == minimum
        assert d.directml_limits is False


def test_lifting_keeps_the_32_bit_field_limits():
    big = BufferTensorDesc("uint8", [65536, 65536], directml_limits=False)   # 2**32 elements
    assert big.element_count == 2**32
    with pytest.raises(DescriptorError, match="element count"):
        BufferTensorDesc("uint8", [65536, 65536])
    with pytest.raises(DescriptorError, match=r"sizes\[0\] is 4294967296"):
        BufferTensorDesc("uint8", [2**32], directml_limits=False)
    with pytest.raises(DescriptorError, match=r"strides\[0\] is 4294967296"):
        BufferTensorDesc("uint8", [2], [2**32], directml_limits=False)
    with pytest.raises(DescriptorError, match="2\\*\\*64"):
        BufferTensorDesc("uint8", [2], total_tensor_size_in_bytes=2**64, directml_limits=False)
    with pytest.raises(DescriptorError):
        BufferTensorDesc("float64", [2**31 + 1], [U32], directml_limits=False)    # minimum size >= 2**64
    with pytest.raises(TypeError, match="directml_limits must be a bool"):
        BufferTensorDesc("uint8", [2], directml_limits=0)


def test_calc_buffer_tensor_size_has_no_limit():
    assert calc_buffer_tensor_size("float32", [3], [2**31]) == 4 * (2**32 + 1)
    assert calc_buffer_tensor_size("uint8", [65536, 65536]) == 2**32


def test_every_constructor_takes_the_switch():
    with pytest.raises(DescriptorError, match="element extent"):
        BufferTensorDesc.from_layout("uint8", [3, 3], "HW", row_pitch_alignment=2**31)
    d = BufferTensorDesc.from_layout("uint8", [3, 3], "HW", row_pitch_alignment=2**31, directml_limits=False)
    assert d.strides == (2**31, 1) and not d.directml_limits
    # A numpy view with far strides over a small buffer (nothing is read).
    base = np.zeros(8, np.uint8)
    far = np.lib.stride_tricks.as_strided(base, shape=(3, 2), strides=(2**31, 1))
    with pytest.raises(DescriptorError, match="element extent"):
        BufferTensorDesc.from_numpy(far)
    assert BufferTensorDesc.from_numpy(far, directml_limits=False).strides == (2**31, 1)
    assert BufferTensorDesc.from_numpy(base, directml_limits=False).directml_limits is False
    assert BufferTensorDesc.from_numpy(np.array(1.0, np.float32), directml_limits=False).directml_limits is False


def test_the_switch_survives_to_rank_pickle_and_repr():
    d = BufferTensorDesc("uint8", [3], [2**31], directml_limits=False)
    r = d.to_rank(4)
    assert r.directml_limits is False and r.sizes == (1, 1, 1, 3)
    assert r.to_rank(1) == d and r.to_rank(1).directml_limits is False
    with pytest.raises(DescriptorError, match="element extent"):
        d.to_rank(2, directml_limits=True)
    again = pickle.loads(pickle.dumps(d))
    assert again == d and again.directml_limits is False
    assert repr(d).endswith(", directml_limits=False)")
    strict = BufferTensorDesc("uint8", [3])
    assert "directml_limits" not in repr(strict)
    assert pickle.loads(pickle.dumps(strict)).directml_limits is True
    # The switch says how the fields were checked; equality and hashing compare the fields.
    loose = BufferTensorDesc("uint8", [3], directml_limits=False)
    assert loose == strict and hash(loose) == hash(strict)


def test_cli_switch(capsys):
    assert main(["describe", "--dtype", "float32", "--sizes", "3", "--strides", "2147483648"]) == 2
    err = capsys.readouterr().err
    assert "element extent" in err and len(err.splitlines()) == 1
    assert main(["describe", "--dtype", "float32", "--sizes", "3", "--strides", "2147483648",
                 "--no-directml-limits"]) == 0
    out = capsys.readouterr().out
    assert "directml_limits=False" in out and "17179869188 bytes" in out
    assert main(["describe", "--dtype", "uint8", "--sizes", "3,3", "--layout", "HW", "--row-pitch", "2147483648",
                 "--no-directml-limits"]) == 0
    assert "strides=[2147483648, 1]" in capsys.readouterr().out
