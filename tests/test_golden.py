"""Golden tests: every worked example of DirectML's buffer-tensor documentation, by hand.

Letters stand for elements as in DirectML's documentation (``A B C / D E F``); buffers are
``uint8`` so a letter is one byte, and ``x`` marks padding.
"""

import ctypes

import numpy as np
import pytest

from dmlstride import (
    DML_BUFFER_TENSOR_DESC,
    MAX_DIMENSION_COUNT,
    MAX_ELEMENT_COUNT,
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    BufferTensorDesc,
    DescriptorError,
    TensorDataType,
    broadcast_strides,
    calc_buffer_tensor_size,
    calculate_strides,
    gather,
    scatter,
)

U32 = 2**32 - 1


def rows(buffer, desc):
    """The logical view of a uint8 tensor as strings, one per row (last dimension)."""
    arr = gather(buffer, desc)
    return ["".join(map(chr, row)) for row in arr.reshape(-1, arr.shape[-1])]


def padded(data, nbytes):
    return data + b"\0" * (nbytes - len(data))


# -- section 1: sizes and strides ---------------------------------------------------------


def test_row_major_2x3():
    d = BufferTensorDesc("uint8", [2, 3])
    assert d.effective_strides == (3, 1)
    assert calculate_strides("HW", [2, 3]) == (3, 1)
    assert rows(padded(b"ABCDEF", 8), d) == ["ABC", "DEF"]
    # The H stride is the distance from A to D.
    assert d.offset_of((1, 0)) - d.offset_of((0, 0)) == 3
    assert d.is_packed and d.layout == "HW"


def test_column_major_2x3():
    d = BufferTensorDesc("uint8", [2, 3], [1, 2])
    assert calculate_strides("WH", [2, 3]) == (1, 2)
    assert rows(padded(b"ADBECF", 8), d) == ["ABC", "DEF"]
    assert d.is_packed and d.layout == "WH"
    buf = bytearray(8)
    scatter(np.frombuffer(b"ABCDEF", np.uint8).reshape(2, 3), d, buf)
    assert bytes(buf[:6]) == b"ADBECF"


def test_dhw_2x2x3():
    d = BufferTensorDesc("uint8", [2, 2, 3], [6, 3, 1])
    assert calculate_strides("DHW", [2, 2, 3]) == (6, 3, 1)
    assert BufferTensorDesc("uint8", [2, 2, 3]).effective_strides == (6, 3, 1)
    memory = b"ABCDEFGHIJKL"
    assert rows(memory, d) == ["ABC", "DEF", "GHI", "JKL"]
    # Element H is at (d=1, h=0, w=1): {1, 0, 1} . {6, 3, 1} = 7.
    assert d.offset_of((1, 0, 1)) == 7
    assert memory[d.offset_of((1, 0, 1))] == ord("H")
    # D stride: A to G; H stride: A to D (not A to G, a slip in one seed); W stride: A to B.
    a = d.offset_of((0, 0, 0))
    assert memory[a + 6] == ord("G") and memory[a + 3] == ord("D") and memory[a + 1] == ord("B")
    # Packed: a 12-element buffer, no two elements share an offset.
    assert d.is_packed and not d.has_overlap
    assert sorted(d.offsets().tolist()) == list(range(12))
    assert d.layout == "DHW"


def test_whd_layout():
    # W slowest, then H, then D fastest.
    assert calculate_strides("WHD", [2, 2, 3]) == (1, 2, 4)


def test_broadcast_2x3_over_3_elements():
    d = BufferTensorDesc("uint8", [2, 3], [0, 1])
    assert rows(padded(b"ABC", 4), d) == ["ABC", "ABC"]
    assert int(d.offsets().max()) + 1 == 3  # physical size, in elements
    assert d.element_count == 6  # logical size
    assert d.is_broadcast and d.has_overlap and not d.is_packed and not d.is_padded
    assert d.minimum_size_in_bytes == 4


def test_broadcast_nchw_channel_stride_0():
    # In NCHW with a C stride of 0, every channel holds the same H x W values.
    d = BufferTensorDesc("float32", [1, 3, 2, 2], [4, 0, 2, 1])
    plane = np.array([1.5, -2.0, 3.25, 4.0], np.float32)
    out = gather(plane.tobytes(), d)
    assert out.shape == (1, 3, 2, 2)
    for c in range(3):
        np.testing.assert_array_equal(out[0, c], plane.reshape(2, 2))
    assert calculate_strides("NCHW", [1, 3, 2, 2], [False, True, False, False]) == (4, 0, 2, 1)


def test_padded_2x3_with_h_stride_5():
    memory = b"ABCxxDEFxx"
    d = BufferTensorDesc("uint8", [2, 3], [5, 1])
    assert rows(memory, d) == ["ABC", "DEF"]
    assert d.is_padded and not d.has_overlap and not d.is_packed
    assert d.offsets().tolist() == [0, 1, 2, 5, 6, 7]
    assert d.minimum_size_in_bytes == 8
    # A scatter writes the six elements and leaves the padding alone (the padding rule).
    buf = bytearray(b"xxxxxxxxxx")
    scatter(np.frombuffer(b"ABCDEF", np.uint8).reshape(2, 3), d, buf)
    assert bytes(buf) == memory


def test_overlap_1_1_on_2x2():
    d = BufferTensorDesc("uint8", [2, 2], [1, 1])
    assert d.has_overlap and not d.is_broadcast
    assert rows(padded(b"ABC", 4), d) == ["AB", "BC"]
    assert d.offsets().tolist() == [0, 1, 1, 2]


# -- the 2-D tensor of height 3 and width 5 as 4-D -----------------------------------------


def test_hw_3x5_as_nchw_implicit():
    d = BufferTensorDesc("float32", [1, 1, 3, 5])
    assert d.strides is None
    assert d.effective_strides == (15, 15, 5, 1)
    assert d.layout == "NCHW" and d.is_packed
    assert d.total_tensor_size_in_bytes == 60
    assert not d.to_ctypes().Strides


def test_hw_3x5_as_nchw_explicit():
    # N = C*H*W = 15, C = H*W = 15, H = W = 5, W = 1.
    assert calculate_strides("NCHW", [1, 1, 3, 5]) == (15, 15, 5, 1)
    d = BufferTensorDesc("float32", [1, 1, 3, 5], [15, 15, 5, 1])
    assert d.layout == "NCHW" and d.is_packed
    assert d.total_tensor_size_in_bytes == 60
    assert d.offsets().tolist() == list(range(15))
    assert BufferTensorDesc("float32", [3, 5], [5, 1]).to_rank(4) == d


def test_hw_3x5_as_nhwc():
    # N = H*W*C = 15, H = W*C = 5, W = C = 1, C = 1.
    assert calculate_strides("NHWC", [1, 1, 3, 5]) == (15, 1, 5, 1)
    d = BufferTensorDesc("float32", [1, 1, 3, 5], [15, 1, 5, 1])
    assert d.layout == "NHWC" and d.is_packed
    assert d.total_tensor_size_in_bytes == 60
    assert BufferTensorDesc.from_layout("float32", [1, 1, 3, 5], "NHWC") == d


def test_lower_rank_padded_with_leading_ones():
    d = BufferTensorDesc("float16", [3, 5]).to_rank(4)
    assert d.sizes == (1, 1, 3, 5)
    assert BufferTensorDesc("float16", [2, 3, 5]).to_rank(5).sizes == (1, 1, 2, 3, 5)


def test_interleaved_channel_strides():
    assert calculate_strides("NHWC", [1, 3, 4, 5]) == (60, 1, 15, 3)
    assert calculate_strides((0, 2, 3, 1), [1, 3, 4, 5]) == (60, 1, 15, 3)
    assert BufferTensorDesc("float32", [1, 3, 4, 5], [60, 1, 15, 3]).layout == "NHWC"


def test_onnx_runtime_broadcast():
    assert broadcast_strides([2, 1, 4], [2, 3, 4]) == (4, 0, 1)
    physical = np.arange(8, dtype=np.int16).reshape(2, 1, 4)
    d = BufferTensorDesc("int16", [2, 3, 4], broadcast_strides([2, 1, 4], [2, 3, 4]))
    np.testing.assert_array_equal(gather(physical.tobytes(), d), np.broadcast_to(physical, (2, 3, 4)))
    with pytest.raises(DescriptorError):
        broadcast_strides([2, 2, 4], [2, 3, 4])


def test_seed_calculate_strides_with_broadcast():
    # DirectML's documented helper: a broadcast dimension counts as 1 and gets stride 0.
    assert calculate_strides("NCHW", [2, 3, 4, 5], [False, True, False, False]) == (20, 0, 5, 1)
    assert calculate_strides("NHWC", [2, 3, 4, 5], [False, False, True, False]) == (15, 1, 0, 3)


# -- section 2: data types and 4-bit packing -----------------------------------------------


def test_int4_packing():
    d = BufferTensorDesc("int4", [5])
    assert d.total_tensor_size_in_bytes == 4
    assert gather(bytes([0x21, 0x43, 0x05]) + bytes(13), d).tolist() == [1, 2, 3, 4, 5]
    buf = bytearray(b"\xff" * 16)
    scatter(np.array([1, 2, 3, 4, 5], np.int8), d, buf)
    assert bytes(buf) == bytes([0x21, 0x43, 0xF5]) + b"\xff" * 13


def test_four_bit_nibble_order_and_sign():
    # Element k lives in byte k // 2: the low nibble when k is even, the high one when odd.
    assert gather(bytes([0xF0]) + bytes(3), BufferTensorDesc("uint4", [2])).tolist() == [0, 15]
    assert gather(bytes([0xF0]) + bytes(3), BufferTensorDesc("int4", [2])).tolist() == [0, -1]
    assert gather(bytes([0x78, 0x00, 0x00, 0x00]), BufferTensorDesc("int4", [2])).tolist() == [-8, 7]
    strided = BufferTensorDesc("int4", [2, 2], [4, 1])  # nibbles 0, 1, 4, 5
    assert gather(bytes([0x21, 0x43, 0x65, 0x07]), strided).tolist() == [[1, 2], [5, 6]]
    assert TensorDataType.INT4 == 13 and TensorDataType.UINT4 == 12


# -- section 3: DMLCalcBufferTensorSize ----------------------------------------------------


def directml_c_helper(data_type, sizes, strides=None):
    """DirectML's inline C helper (as DirectML documents it), with C's unsigned wrap-around."""
    size = {1: 4, 3: 4, 6: 4, 2: 2, 4: 2, 7: 2, 5: 1, 8: 1}.get(int(data_type), 0)
    if size == 0:
        return 0
    if strides is None:
        total = sizes[0]
        for n in sizes[1:]:
            total = total * n % 2**64
        total = total * size % 2**64
    else:
        last = 0  # UINT
        for n, s in zip(sizes, strides):
            last = (last + (n - 1) * s) % 2**32
        total = (last + 1) % 2**32 * size % 2**32  # UINT * UINT, then widened
    return (total + 3) % 2**64 & ~3


@pytest.mark.parametrize(
    ("dt", "sizes", "strides", "expected"),
    [
        ("uint32", [2, 3], [6, 2], 44),
        ("float16", [2, 3], [0, 1], 8),
        ("int4", [5], None, 4),
        ("int4", [9], None, 8),
        ("float32", [1, 1, 3, 5], None, 60),
        ("float32", [1, 1, 3, 5], [15, 1, 5, 1], 60),
    ],
)
def test_spec_size_examples(dt, sizes, strides, expected):
    assert calc_buffer_tensor_size(dt, sizes, strides) == expected
    if dt != "int4":
        assert directml_c_helper(TensorDataType[dt.upper()], sizes, strides) == expected


def test_size_where_directml_helper_wraps():
    sizes, strides = [65537, 65536], [65536, 1]
    assert directml_c_helper(TensorDataType.FLOAT32, sizes, strides) == 262144
    assert calc_buffer_tensor_size("float32", sizes, strides) == 17180131328
    assert calc_buffer_tensor_size(TensorDataType.FLOAT32, sizes, strides) == (65536 * 65536 + 65535 + 1) * 4


def test_size_of_unknown_data_type_is_refused_not_zero():
    assert directml_c_helper(TensorDataType.UNKNOWN, [2, 3]) == 0
    with pytest.raises(DescriptorError, match="data_type"):
        calc_buffer_tensor_size(TensorDataType.UNKNOWN, [2, 3])


def test_padded_size_uses_the_last_element():
    # MinimumImpliedSizeInBytes = roundup((IndexOfLastElement + 1) * ElementSizeInBytes, 4)
    assert calc_buffer_tensor_size("float16", [2, 3], [5, 1]) == 16  # 8 elements * 2
    assert calc_buffer_tensor_size("uint8", [2, 3], [5, 1]) == 8


# -- section 4: limits ---------------------------------------------------------------------


def test_limits():
    assert MAX_DIMENSION_COUNT == 8
    assert MINIMUM_BUFFER_TENSOR_ALIGNMENT == 16
    assert MAX_ELEMENT_COUNT == 2**32 - 1
    # 2**32 - 1 elements is 16 GB of FLOAT32; one more is refused.
    d = BufferTensorDesc("float32", [U32])
    assert d.minimum_size_in_bytes == 4 * U32 == 16 * 2**30 - 4
    with pytest.raises(DescriptorError, match="element count"):
        BufferTensorDesc("float32", [2**16, 2**16])
    with pytest.raises(DescriptorError):
        BufferTensorDesc("float32", [0])


# -- section 5: the C layout ---------------------------------------------------------------


def test_ctypes_field_offsets_and_size():
    S = DML_BUFFER_TENSOR_DESC
    expected = [
        ("DataType", 0, 4),
        ("Flags", 4, 4),
        ("DimensionCount", 8, 4),
        ("Sizes", 16, 8),
        ("Strides", 24, 8),
        ("TotalTensorSizeInBytes", 32, 8),
        ("GuaranteedBaseOffsetAlignment", 40, 4),
    ]
    assert [(name, getattr(S, name).offset, getattr(S, name).size) for name, _ in S._fields_] == expected
    assert ctypes.sizeof(S) == 48
    s = BufferTensorDesc("float32", [1, 1, 3, 5], [15, 1, 5, 1]).to_ctypes()
    assert ctypes.sizeof(s) == 48
    assert [s.Strides[i] for i in range(4)] == [15, 1, 5, 1]
