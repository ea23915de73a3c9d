"""Tests for ``BufferTensorDesc`` and its ctypes twin ``DML_BUFFER_TENSOR_DESC``.

Construction and every validity rule of a DirectML buffer tensor (rules 1-7; rule 8 is a
binding rule checked by the copy functions), value semantics, the derived
properties against brute-force references, the methods and the constructors
``from_layout`` and ``from_numpy``.
"""

import copy
import ctypes
import gc
import itertools
import math
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlstride import (
    DML_BUFFER_TENSOR_DESC,
    BufferTensorDesc,
    DescriptorError,
    TensorDataType,
    TensorFlags,
    calc_buffer_tensor_size,
    calculate_strides,
)

U32 = 2**32 - 1
NAMES = [t.name for t in TensorDataType if t is not TensorDataType.UNKNOWN]
BITS = {
    "FLOAT32": 32, "FLOAT16": 16, "UINT32": 32, "UINT16": 16, "UINT8": 8, "INT32": 32, "INT16": 16,
    "INT8": 8, "FLOAT64": 64, "UINT64": 64, "INT64": 64, "UINT4": 4, "INT4": 4,
}  # fmt: skip
CANONICAL = {2: "HW", 3: "DHW", 4: "NCHW", 5: "NCDHW"}
NAMED = {2: ["HW", "WH"], 3: ["DHW", "WHD"], 4: ["NCHW", "NHWC"], 5: ["NCDHW", "NDHWC"]}


# -- brute-force references ---------------------------------------------------------------


def ref_offsets(sizes, strides):
    """Every element's offset, in logical C order, by enumeration."""
    return [sum(i * s for i, s in zip(idx, strides)) for idx in itertools.product(*(range(n) for n in sizes))]


def ref_packed_strides(sizes):
    return tuple(math.prod(sizes[i + 1 :]) for i in range(len(sizes)))


def ref_order_strides(sizes, order):
    """Packed strides for axes listed slowest to fastest: product of the faster sizes."""
    strides = [0] * len(sizes)
    for pos, axis in enumerate(order):
        strides[axis] = math.prod(sizes[a] for a in order[pos + 1 :])
    return tuple(strides)


def ref_flags(sizes, strides):
    offs = ref_offsets(sizes, strides)
    count = len(offs)
    overlap = len(set(offs)) < count
    packed = sorted(offs) == list(range(count))
    broadcast = any(n > 1 and s == 0 for n, s in zip(sizes, strides))
    padded = not overlap and max(offs) + 1 > count
    return packed, broadcast, padded, overlap


@st.composite
def descs(draw, max_rank=5, max_size=4, max_stride=24):
    name = draw(st.sampled_from(NAMES))
    sizes = draw(st.lists(st.integers(1, max_size), min_size=1, max_size=max_rank))
    strides = draw(
        st.one_of(
            st.none(),
            st.lists(st.integers(0, max_stride), min_size=len(sizes), max_size=len(sizes)),
        )
    )
    return BufferTensorDesc(name, sizes, strides)


# -- construction and fields --------------------------------------------------------------


def test_defaults_and_fields():
    d = BufferTensorDesc("float32", [2, 3])
    assert d.data_type is TensorDataType.FLOAT32
    assert d.flags == TensorFlags.NONE
    assert isinstance(d.flags, TensorFlags)
    assert d.dimension_count == 2
    assert d.sizes == (2, 3)
    assert d.strides is None
    assert d.total_tensor_size_in_bytes == 24
    assert d.guaranteed_base_offset_alignment == 0


def test_all_fields_given():
    d = BufferTensorDesc(
        TensorDataType.UINT16,
        (2, 3),
        (4, 1),
        total_tensor_size_in_bytes=64,
        guaranteed_base_offset_alignment=32,
        flags=TensorFlags.OWNED_BY_DML,
    )
    assert d.data_type is TensorDataType.UINT16
    assert d.sizes == (2, 3)
    assert d.strides == (4, 1)
    assert d.total_tensor_size_in_bytes == 64
    assert d.guaranteed_base_offset_alignment == 32
    assert d.flags == TensorFlags.OWNED_BY_DML
    assert d.minimum_size_in_bytes == 16


def test_positional_signature():
    d = BufferTensorDesc("uint8", [4], [2], 16, 8, 1)
    assert (d.strides, d.total_tensor_size_in_bytes, d.guaranteed_base_offset_alignment, d.flags) == (
        (2,),
        16,
        8,
        TensorFlags.OWNED_BY_DML,
    )


def test_fields_are_plain_python_values():
    d = BufferTensorDesc(np.float32, np.array([2, 3], dtype=np.uint32), [np.int64(3), np.uint8(1)], np.uint64(24))
    assert d.sizes == (2, 3) and type(d.sizes) is tuple
    assert all(type(v) is int for v in d.sizes + d.strides)
    assert type(d.total_tensor_size_in_bytes) is int
    assert d.data_type is TensorDataType.FLOAT32


@pytest.mark.parametrize("form", ["float16", "FLOAT16", 2, TensorDataType.FLOAT16, np.float16, np.dtype("<f2")])
def test_data_type_forms(form):
    assert BufferTensorDesc(form, [3]).data_type is TensorDataType.FLOAT16


def test_immutable():
    d = BufferTensorDesc("float32", [2, 3])
    for name in ("sizes", "strides", "data_type", "flags", "total_tensor_size_in_bytes", "_sizes", "new"):
        with pytest.raises(AttributeError):
            setattr(d, name, None)
    with pytest.raises(AttributeError):
        del d.sizes
    assert d.sizes == (2, 3)


def test_equal_by_value_and_hashable():
    a = BufferTensorDesc("float32", [2, 3], [3, 1])
    b = BufferTensorDesc(np.float32, (2, 3), np.array([3, 1]))
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert {a: 1}[b] == 1
    others = [
        BufferTensorDesc("int32", [2, 3], [3, 1]),
        BufferTensorDesc("float32", [3, 2], [2, 1]),
        BufferTensorDesc("float32", [2, 3], [1, 2]),
        BufferTensorDesc("float32", [2, 3]),  # strides absent: a different descriptor
        BufferTensorDesc("float32", [2, 3], [3, 1], 28),
        BufferTensorDesc("float32", [2, 3], [3, 1], guaranteed_base_offset_alignment=16),
        BufferTensorDesc("float32", [2, 3], [3, 1], flags=1),
    ]
    for o in others:
        assert a != o
        assert not (a == o)
    assert len(set(others)) == len(others)
    assert a != (2, 3)
    assert a != "float32"


def test_pickle_and_copy_round_trip():
    d = BufferTensorDesc("int4", [3, 5], [8, 1], 32, 16, TensorFlags.OWNED_BY_DML)
    for clone in (pickle.loads(pickle.dumps(d)), copy.copy(d), copy.deepcopy(d)):
        assert clone == d
        assert clone.strides == (8, 1)
        assert clone.flags == TensorFlags.OWNED_BY_DML


def test_repr_names_the_fields():
    r = repr(BufferTensorDesc("uint8", [2, 3], [5, 1]))
    assert "BufferTensorDesc" in r and "UINT8" in r and "[2, 3]" in r and "[5, 1]" in r


# -- the validity rules: one test per rule ----------------------------------------------------


@pytest.mark.parametrize("dt", [0, "unknown", TensorDataType.UNKNOWN])
def test_rule1_unknown_data_type(dt):
    with pytest.raises(DescriptorError, match="data_type"):
        BufferTensorDesc(dt, [2])


@pytest.mark.parametrize("dt", [14, -1, 99, "float8", "bool", np.complex64, ">f4"])
def test_rule1_not_a_data_type(dt):
    with pytest.raises(DescriptorError, match="data_type") as info:
        BufferTensorDesc(dt, [2])
    if not isinstance(dt, type):
        assert str(dt) in str(info.value)


@pytest.mark.parametrize("sizes", [[], (), [1] * 9, [2] * 16])
def test_rule2_dimension_count(sizes):
    with pytest.raises(DescriptorError, match="sizes") as info:
        BufferTensorDesc("float32", sizes)
    assert str(len(sizes)) in str(info.value)
    assert "8" in str(info.value)


def test_rule2_dimension_count_bounds_accepted():
    assert BufferTensorDesc("float32", [7]).dimension_count == 1
    assert BufferTensorDesc("float32", [1, 2, 1, 2, 1, 2, 1, 2]).dimension_count == 8
    assert BufferTensorDesc("float32", [2] * 8, [0] * 8).dimension_count == 8


@pytest.mark.parametrize("strides", [[1], [6, 3, 1], [1] * 9])
def test_rule2_strides_length(strides):
    with pytest.raises(DescriptorError, match="strides") as info:
        BufferTensorDesc("float32", [2, 3], strides)
    assert str(len(strides)) in str(info.value)


@pytest.mark.parametrize(
    ("sizes", "field", "value"),
    [([0], "sizes[0]", "0"), ([2, 0, 3], "sizes[1]", "0"), ([2**32], "sizes[0]", str(2**32)),
     ([1, 2**40], "sizes[1]", str(2**40)), ([-3, 2], "sizes[0]", "-3")],
)  # fmt: skip
def test_rule3_sizes_range(sizes, field, value):
    with pytest.raises(DescriptorError) as info:
        BufferTensorDesc("uint8", sizes)
    assert field in str(info.value)
    assert value in str(info.value)


@pytest.mark.parametrize(
    ("strides", "field", "value"),
    [([-1, 1], "strides[0]", "-1"), ([3, 2**32], "strides[1]", str(2**32)), ([2**63, 1], "strides[0]", str(2**63))],
)
def test_rule3_strides_range(strides, field, value):
    with pytest.raises(DescriptorError) as info:
        BufferTensorDesc("uint8", [2, 3], strides)
    assert field in str(info.value)
    assert value in str(info.value)


def test_rule3_bounds_accepted():
    assert BufferTensorDesc("uint8", [U32]).sizes == (U32,)
    assert BufferTensorDesc("uint8", [2, 1], [U32, U32], directml_limits=False).strides == (U32, U32)
    assert BufferTensorDesc("uint8", [2], [0]).strides == (0,)


@pytest.mark.parametrize(
    ("sizes", "strides"),
    [([2**16, 2**16], None), ([2**16, 2**16], [0, 0]), ([U32, 2], [1, 0]), ([2**8] * 4 + [2], None), ([65537, 65536], [65536, 1])],
)
def test_rule4_element_count(sizes, strides):
    # The logical count is capped, whatever the strides (even all-broadcast).
    with pytest.raises(DescriptorError, match="element count") as info:
        BufferTensorDesc("uint8", sizes, strides)
    assert "sizes" in str(info.value)
    assert str(math.prod(sizes)) in str(info.value)


def test_rule4_bound_accepted():
    # 3 * 5 * 17 * 257 * 65537 == 2**32 - 1
    d = BufferTensorDesc("uint8", [3, 5, 17, 257, 65537], [0, 0, 0, 0, 1])
    assert d.element_count == U32
    assert BufferTensorDesc("float32", [U32], [0]).element_count == U32


def test_rule5_total_below_minimum():
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes") as info:
        BufferTensorDesc("float32", [2, 3], None, 20)
    assert "20" in str(info.value) and "24" in str(info.value)
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("uint8", [2, 3], [5, 1], 7)
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("uint8", [2], None, -4)
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("uint8", [2], None, 0)


def test_rule5_total_at_least_2_to_the_64():
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("uint8", [2], None, 2**64)
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("uint8", [2], None, 2**70)


def test_rule5_minimum_implied_size_at_least_2_to_the_64():
    # Valid sizes and strides whose minimum implied size is beyond a UINT64.
    with pytest.raises(DescriptorError, match="total_tensor_size_in_bytes"):
        BufferTensorDesc("float32", [U32], [U32], directml_limits=False)


def test_rule5_larger_total_accepted():
    assert BufferTensorDesc("float32", [2, 3], None, 24).total_tensor_size_in_bytes == 24
    assert BufferTensorDesc("float32", [2, 3], None, 4096).total_tensor_size_in_bytes == 4096
    assert BufferTensorDesc("float32", [2, 3], None, 27).total_tensor_size_in_bytes == 27
    assert BufferTensorDesc("uint8", [2], None, 2**64 - 1, directml_limits=False).total_tensor_size_in_bytes == 2**64 - 1
    d = BufferTensorDesc("uint8", [U32], [U32], directml_limits=False)
    assert d.total_tensor_size_in_bytes == d.minimum_size_in_bytes == 2**64 - 3 * 2**32 + 4


@pytest.mark.parametrize(
    ("dt", "align"),
    [("float32", 3), ("float32", 6), ("float32", 12), ("float32", 2), ("float32", 1), ("float64", 4),
     ("uint8", -1), ("uint8", -16), ("uint8", 2**32), ("uint8", 2**40), ("int4", 3), ("float16", 1)],
)  # fmt: skip
def test_rule6_alignment(dt, align):
    with pytest.raises(DescriptorError, match="guaranteed_base_offset_alignment") as info:
        BufferTensorDesc(dt, [4], guaranteed_base_offset_alignment=align)
    assert str(align) in str(info.value)


@pytest.mark.parametrize(
    ("dt", "align"),
    [("float32", 0), ("float32", 4), ("float32", 16), ("float32", 2**31), ("float64", 8), ("float16", 2),
     ("uint8", 1), ("int4", 1), ("uint4", 2), ("int64", 256)],
)  # fmt: skip
def test_rule6_alignment_accepted(dt, align):
    assert BufferTensorDesc(dt, [4], guaranteed_base_offset_alignment=align).guaranteed_base_offset_alignment == align


@pytest.mark.parametrize("flags", [2, 3, 4, 0x80000000, -1, 2**32])
def test_rule7_unknown_flags(flags):
    with pytest.raises(DescriptorError, match="flags"):
        BufferTensorDesc("float32", [4], flags=flags)


@pytest.mark.parametrize("flags", [0, 1, TensorFlags.NONE, TensorFlags.OWNED_BY_DML, np.uint32(1)])
def test_rule7_known_flags_accepted(flags):
    d = BufferTensorDesc("float32", [4], flags=flags)
    assert d.flags == int(flags)
    assert isinstance(d.flags, TensorFlags)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"data_type": None},
        {"data_type": 1.0},
        {"sizes": "23"},
        {"sizes": 6},
        {"sizes": None},
        {"sizes": [2.0, 3]},
        {"sizes": [True, 3]},
        {"sizes": [np.timedelta64(2, "s"), 3]},  # a numpy integer subclass, but not a count
        {"sizes": [np.float32(2), 3]},
        {"sizes": np.ones((2, 3), dtype=int)},
        {"strides": [3.0, 1]},
        {"strides": "31"},
        {"strides": 3},
        {"strides": [np.timedelta64(3, "s"), 1]},
        {"total_tensor_size_in_bytes": np.timedelta64(24, "s")},
        {"total_tensor_size_in_bytes": 24.0},
        {"total_tensor_size_in_bytes": "24"},
        {"guaranteed_base_offset_alignment": 4.0},
        {"guaranteed_base_offset_alignment": None},
        {"flags": None},
        {"flags": 1.0},
    ],
)
def test_wrong_types(kwargs):
    args = {"data_type": "float32", "sizes": [2, 3]} | kwargs
    with pytest.raises(TypeError):
        BufferTensorDesc(**args)


# -- derived properties: worked cases -----------------------------------------------------


@pytest.mark.parametrize(
    ("dt", "sizes", "strides", "packed", "broadcast", "padded", "overlap"),
    [
        ("uint8", [2, 3], None, True, False, False, False),
        ("uint8", [2, 3], [3, 1], True, False, False, False),
        ("uint8", [2, 3], [1, 2], True, False, False, False),
        ("uint8", [2, 3], [0, 1], False, True, False, True),
        ("uint8", [2, 3], [5, 1], False, False, True, False),
        ("uint8", [2, 3], [4, 1], False, False, True, False),  # one gap, same rounded bytes
        ("uint8", [2, 2], [1, 1], False, False, False, True),
        ("uint8", [2, 2], [2, 2], False, False, False, True),  # gaps and overlap: not padded
        ("uint8", [3, 3], [2, 3], False, False, True, False),  # interleaved, no overlap
        ("uint8", [4, 3], [2, 3], False, False, False, True),  # 3*2 == 2*3
        ("uint8", [1, 3], [0, 1], True, False, False, False),  # stride 0 on a size-1 dim
        ("uint8", [1], [9], True, False, False, False),
        ("uint8", [3], [2], False, False, True, False),
        ("float32", [1, 1, 3, 5], [15, 1, 5, 1], True, False, False, False),
        ("float32", [2, 3, 4, 5], [0, 20, 5, 1], False, True, False, True),
        ("int4", [5], None, True, False, False, False),
    ],
)
def test_flag_properties(dt, sizes, strides, packed, broadcast, padded, overlap):
    d = BufferTensorDesc(dt, sizes, strides)
    assert (d.is_packed, d.is_broadcast, d.is_padded, d.has_overlap) == (packed, broadcast, padded, overlap)
    for value in (d.is_packed, d.is_broadcast, d.is_padded, d.has_overlap):
        assert type(value) is bool


def test_element_properties():
    d = BufferTensorDesc("int4", [3, 5], [8, 1], 64)
    assert d.element_bits == 4
    assert d.element_count == 15
    assert d.minimum_size_in_bytes == 12  # 21 nibbles -> 11 bytes -> 12
    assert d.total_tensor_size_in_bytes == 64
    assert d.effective_strides == (8, 1)
    p = BufferTensorDesc("float64", [2, 3, 4])
    assert p.element_bits == 64
    assert p.element_count == 24
    assert p.effective_strides == (12, 4, 1)
    assert p.minimum_size_in_bytes == 192


def test_element_count_is_logical():
    d = BufferTensorDesc("float32", [4, 5], [0, 0])
    assert d.element_count == 20
    assert d.minimum_size_in_bytes == 4


@pytest.mark.parametrize(
    ("sizes", "strides", "layout"),
    [
        ([1, 1, 3, 5], None, "NCHW"),
        ([1, 1, 3, 5], [15, 15, 5, 1], "NCHW"),
        ([1, 1, 3, 5], [15, 1, 5, 1], "NHWC"),
        ([2, 3, 4, 5], [60, 1, 15, 3], "NHWC"),
        ([5, 1, 1, 1], [1, 1, 1, 1], "NCHW"),  # both match: NCHW comes first
        ([2, 3], None, "HW"),
        ([2, 3], [1, 2], "WH"),
        ([1, 1], [1, 1], "HW"),
        ([2, 2, 3], [6, 3, 1], "DHW"),
        ([2, 2, 3], [1, 2, 4], "WHD"),
        ([2, 3, 4, 5, 6], None, "NCDHW"),
        ([2, 3, 4, 5, 6], [360, 1, 90, 18, 3], "NDHWC"),
        ([2, 3], [5, 1], None),  # padded
        ([2, 3], [0, 1], None),  # broadcast
        ([1, 1, 3, 5], [0, 15, 5, 1], None),  # N stride must be exactly the packed one
        ([2, 3, 4, 5], [60, 20, 1, 4], None),  # NCWH is no canonical 4-D layout
        ([2, 2, 2, 2, 2, 2], None, None),  # rank 6 has no named layouts
    ],
)
def test_layout(sizes, strides, layout):
    assert BufferTensorDesc("float32", sizes, strides).layout == layout


# -- methods ------------------------------------------------------------------------------


def test_offset_of():
    assert BufferTensorDesc("uint8", [2, 2, 3], [6, 3, 1]).offset_of((1, 0, 1)) == 7
    assert BufferTensorDesc("uint8", [2, 2, 3]).offset_of([1, 0, 1]) == 7
    assert BufferTensorDesc("uint8", [2, 3], [5, 1]).offset_of((1, 2)) == 7
    assert BufferTensorDesc("uint8", [2, 3], [1, 2]).offset_of((1, 2)) == 5
    assert BufferTensorDesc("uint8", [2, 3], [0, 1]).offset_of((1, 2)) == 2
    assert BufferTensorDesc("uint8", [2, 3]).offset_of(np.array([1, 1])) == 4
    assert BufferTensorDesc("uint8", [2, 2], [U32, U32], directml_limits=False).offset_of((1, 1)) == 2 * U32
    assert type(BufferTensorDesc("uint8", [2, 3]).offset_of((np.int64(1), 0))) is int


@pytest.mark.parametrize("index", [(2, 0), (0, 3), (-1, 0), (0, -1)])
def test_offset_of_out_of_range(index):
    with pytest.raises(IndexError):
        BufferTensorDesc("uint8", [2, 3]).offset_of(index)


def test_offset_of_wrong_arity_or_type():
    d = BufferTensorDesc("uint8", [2, 3])
    with pytest.raises((IndexError, ValueError)):
        d.offset_of((1,))
    with pytest.raises((IndexError, ValueError)):
        d.offset_of((1, 1, 0))
    with pytest.raises(TypeError):
        d.offset_of((1.0, 0))
    with pytest.raises(TypeError):
        d.offset_of(1)


def test_offsets():
    off = BufferTensorDesc("uint8", [2, 3], [5, 1]).offsets()
    assert isinstance(off, np.ndarray)
    assert off.dtype == np.int64
    assert off.shape == (6,)
    assert off.tolist() == [0, 1, 2, 5, 6, 7]
    assert BufferTensorDesc("uint8", [2, 3], [1, 2]).offsets().tolist() == [0, 2, 4, 1, 3, 5]
    assert BufferTensorDesc("uint8", [2, 3], [0, 1]).offsets().tolist() == [0, 1, 2, 0, 1, 2]
    assert BufferTensorDesc("uint8", [2, 2, 3]).offsets().tolist() == list(range(12))
    assert BufferTensorDesc("uint8", [1], [7]).offsets().tolist() == [0]
    big = BufferTensorDesc("uint8", [2, 2], [U32, 2**31], directml_limits=False)
    assert big.offsets().tolist() == [0, 2**31, U32, U32 + 2**31]


def test_to_rank_pads_leading_ones():
    d = BufferTensorDesc("float32", [3, 5])
    d4 = d.to_rank(4)
    assert d4.sizes == (1, 1, 3, 5)
    assert d4.strides is None
    assert d4.layout == "NCHW"
    assert d4.total_tensor_size_in_bytes == 60
    e4 = BufferTensorDesc("float32", [3, 5], [5, 1]).to_rank(4)
    assert e4.sizes == (1, 1, 3, 5)
    assert e4.strides == (15, 15, 5, 1)  # DirectML's documented explicit NCHW strides
    assert e4.offsets().tolist() == list(range(15))
    assert d.to_rank(2) == d


def test_to_rank_keeps_every_other_field():
    d = BufferTensorDesc("int4", [2, 3], [5, 1], 64, 16, TensorFlags.OWNED_BY_DML)
    d5 = d.to_rank(5)
    assert d5.sizes == (1, 1, 1, 2, 3)
    assert d5.data_type is TensorDataType.INT4
    assert d5.total_tensor_size_in_bytes == 64
    assert d5.guaranteed_base_offset_alignment == 16
    assert d5.flags == TensorFlags.OWNED_BY_DML
    assert d5.offsets().tolist() == d.offsets().tolist()
    assert d5.is_padded and not d5.has_overlap


def test_to_rank_refusals():
    d = BufferTensorDesc("float32", [3, 5])
    with pytest.raises(DescriptorError, match="rank"):
        d.to_rank(9)
    with pytest.raises(DescriptorError, match="rank"):
        d.to_rank(0)
    with pytest.raises(DescriptorError):
        d.to_rank(1)  # the leading dimension has size 3
    with pytest.raises(TypeError):
        d.to_rank(4.0)
    assert BufferTensorDesc("float32", [1, 1, 3, 5]).to_rank(2) == d


@given(descs(max_rank=4), st.integers(1, 8))
def test_to_rank_preserves_the_tensor(d, rank):
    if rank < d.dimension_count and any(n != 1 for n in d.sizes[: d.dimension_count - rank]):
        with pytest.raises(DescriptorError):
            d.to_rank(rank)
        return
    r = d.to_rank(rank)
    assert r.dimension_count == rank
    trimmed = tuple(n for n in d.sizes)
    while len(trimmed) > rank:
        trimmed = trimmed[1:]
    assert r.sizes == (1,) * (rank - len(trimmed)) + trimmed
    assert r.offsets().tolist() == d.offsets().tolist()
    assert (r.strides is None) == (d.strides is None)
    assert r.total_tensor_size_in_bytes == d.total_tensor_size_in_bytes
    assert (r.is_packed, r.is_broadcast, r.is_padded, r.has_overlap) == (
        d.is_packed,
        d.is_broadcast,
        d.is_padded,
        d.has_overlap,
    )


# -- from_layout --------------------------------------------------------------------------


def test_from_layout_examples():
    d = BufferTensorDesc.from_layout("float32", [1, 1, 3, 5])
    assert d.effective_strides == (15, 15, 5, 1) and d.layout == "NCHW"
    n = BufferTensorDesc.from_layout("float32", [1, 1, 3, 5], "NHWC")
    assert n.strides == (15, 1, 5, 1) and n.layout == "NHWC"
    assert n.total_tensor_size_in_bytes == 60
    assert BufferTensorDesc.from_layout("uint8", [2, 3], "WH").strides == (1, 2)
    assert BufferTensorDesc.from_layout("uint8", [2, 3], (1, 0)).strides == (1, 2)
    assert BufferTensorDesc.from_layout("uint8", [2] * 6, tuple(range(6))).effective_strides == (32, 16, 8, 4, 2, 1)
    b = BufferTensorDesc.from_layout("float16", [2, 3, 4, 5], "NCHW", broadcast=[False, True, False, False])
    assert b.strides == (20, 0, 5, 1)
    assert b.is_broadcast and b.has_overlap
    assert b.data_type is TensorDataType.FLOAT16
    assert isinstance(b, BufferTensorDesc)


@pytest.mark.parametrize(
    ("dt", "sizes", "layout", "align", "strides"),
    [
        ("uint8", [2, 3], "HW", 4, (4, 1)),
        ("uint8", [2, 3], "HW", 3, (3, 1)),  # rows already on the boundary
        ("uint8", [2, 3], "HW", 1, (3, 1)),
        ("uint8", [2, 3], "WH", 4, (1, 4)),
        ("float32", [1, 1, 3, 5], "NCHW", 32, (24, 24, 8, 1)),
        ("float32", [1, 3, 2, 2], "NHWC", 16, (16, 1, 8, 3)),  # a row is W x C = 6 elements -> 8
        # A row pitch pads rows, not pixels: the H stride is rounded, W x C stays packed.
        ("uint8", [1, 3, 224, 224], "NHWC", 256, (172032, 1, 768, 3)),
        ("float32", [1, 3, 5, 7], "NCHW", 32, (120, 40, 8, 1)),
        ("uint8", [2, 4, 3, 5, 6], "NDHWC", 64, (960, 1, 320, 64, 4)),
        ("uint8", [2, 3, 5], "WHD", 8, (1, 8, 24)),      # a row is one D run of 2 elements -> 8
        ("uint8", [2, 3, 5], "DWH", 8, (40, 1, 8)),       # H fastest: the second-fastest (W) is rounded
        ("uint8", [2, 3, 4], (1, 2, 0), 16, (1, 16, 2)),  # a tuple layout of a rank with H, as "HWD"
        ("uint8", [2, 3, 4, 5, 6, 7], (0, 1, 2, 3, 4, 5), 16, (5760, 1920, 480, 96, 16, 1)),  # no H
        ("float16", [2, 3, 5], "DHW", 16, (24, 8, 1)),
        ("int4", [2, 3], "HW", 1, (4, 1)),  # 3 nibbles -> 2 bytes = 4 nibbles
        ("uint4", [2, 4], "HW", 4, (8, 1)),
        ("uint8", [7], "W", 16, (1,)),
    ],
)
def test_from_layout_row_pitch(dt, sizes, layout, align, strides):
    d = BufferTensorDesc.from_layout(dt, sizes, layout, row_pitch_alignment=align)
    assert d.effective_strides == strides


def test_cli_row_pitch_pads_rows(capsys):
    from dmlstride.cli import main

    assert main(["describe", "--dtype", "uint8", "--sizes", "1,3,224,224", "--layout", "NHWC",
                 "--row-pitch", "256", "--max-elements", "1"]) == 0
    assert "strides=[172032, 1, 768, 3]" in capsys.readouterr().out


@pytest.mark.parametrize(("dt", "align"), [("uint8", 0), ("uint8", -4), ("float32", 2), ("float32", 6), ("float64", 4)])
def test_from_layout_bad_row_pitch(dt, align):
    with pytest.raises(DescriptorError, match="row_pitch_alignment"):
        BufferTensorDesc.from_layout(dt, [2, 3], "HW", row_pitch_alignment=align)


def test_from_layout_refusals():
    with pytest.raises(DescriptorError, match="layout"):
        BufferTensorDesc.from_layout("float32", [2, 3])  # NCHW is 4-D
    with pytest.raises(DescriptorError, match="layout"):
        BufferTensorDesc.from_layout("float32", [2, 3, 4, 5], "NCHWX")
    with pytest.raises(DescriptorError, match="broadcast"):
        BufferTensorDesc.from_layout("float32", [2, 3], "HW", broadcast=[True])
    with pytest.raises(DescriptorError, match="data_type"):
        BufferTensorDesc.from_layout("unknown", [2, 3], "HW")
    with pytest.raises(DescriptorError, match=r"sizes\[0\]"):
        BufferTensorDesc.from_layout("uint8", [0, 3], "HW")
    with pytest.raises(TypeError):
        BufferTensorDesc.from_layout("uint8", [2, 3], "HW", row_pitch_alignment=4.0)
    with pytest.raises(TypeError):
        BufferTensorDesc.from_layout("uint8", [2, 3], "HW", True)  # broadcast is keyword-only


@st.composite
def pitch_case(draw):
    name = draw(st.sampled_from(NAMES))
    rank = draw(st.integers(2, 5))
    sizes = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    order = tuple(draw(st.permutations(range(rank))))
    elem_bytes = max(1, BITS[name] // 8)
    align = elem_bytes * draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    return name, sizes, order, align


def row_axis_of(order):
    """The issue's rule: H, unless H is the fastest memory dimension; else the second-fastest."""
    letters = CANONICAL.get(len(order), "")
    if "H" in letters and order[-1] != letters.index("H"):
        return letters.index("H")
    return order[-2]


@given(pitch_case())
def test_from_layout_row_pitch_property(case):
    name, sizes, order, align = case
    bits = BITS[name]
    d = BufferTensorDesc.from_layout(name, sizes, order, row_pitch_alignment=align)
    strides = d.effective_strides
    row = row_axis_of(order)
    inside = order[order.index(row) + 1:]            # the dimensions stored inside one row step
    outside = order[:order.index(row)]
    # Inside a row the elements are packed exactly as without a pitch.
    assert {a: strides[a] for a in inside} == {
        a: s for a, s in zip(inside, ref_order_strides([sizes[a] for a in inside], list(range(len(inside)))))}
    # The row stride is the smallest multiple of the pitch that holds a row.
    row_elems = math.prod(sizes[a] for a in inside)
    pitch_bits = align * 8
    assert strides[row] * bits % pitch_bits == 0
    assert row_elems * bits <= strides[row] * bits < row_elems * bits + pitch_bits
    # Every row starts on the boundary.
    for idx in itertools.product(*(range(n) for n in sizes)):
        if all(idx[a] == 0 for a in inside):
            assert d.offset_of(idx) * bits % pitch_bits == 0
    # The slower dimensions are packed over the padded rows, and nothing overlaps.
    chain = [*outside, row]
    for axis, below in zip(chain, chain[1:]):
        assert strides[axis] == strides[below] * sizes[below]
    assert not d.has_overlap
    # Without padding to add, it is the plain layout.
    if (row_elems * bits) % pitch_bits == 0:
        assert strides == ref_order_strides(sizes, order)


@given(st.integers(2, 5).flatmap(lambda r: st.tuples(st.lists(st.integers(1, 5), min_size=r, max_size=r), st.permutations(range(r)))))
def test_from_layout_names_and_tuples_agree(case):
    sizes, order = case
    letters = CANONICAL[len(sizes)]
    name = "".join(letters[a] for a in order)
    a = BufferTensorDesc.from_layout("uint16", sizes, name)
    b = BufferTensorDesc.from_layout("uint16", sizes, tuple(order))
    assert a == b
    assert a.effective_strides == ref_order_strides(sizes, list(order))
    assert a.is_packed
    expected = next((n for n in NAMED[len(sizes)] if ref_order_strides(sizes, [letters.index(c) for c in n]) == a.effective_strides), None)
    assert a.layout == expected


# -- from_numpy ---------------------------------------------------------------------------


def test_from_numpy_examples():
    c = np.zeros((2, 3), np.float32)
    d = BufferTensorDesc.from_numpy(c)
    assert (d.data_type, d.sizes, d.strides, d.total_tensor_size_in_bytes) == (TensorDataType.FLOAT32, (2, 3), None, 24)
    f = BufferTensorDesc.from_numpy(np.asfortranarray(c))
    assert f.effective_strides == (1, 2) and f.layout == "WH"
    s = BufferTensorDesc.from_numpy(np.zeros((4, 6), np.float32)[:, :3])
    assert s.strides == (6, 1) and s.total_tensor_size_in_bytes == 84 and s.is_padded
    t = BufferTensorDesc.from_numpy(np.zeros((3, 4), np.int16).T)
    assert t.sizes == (4, 3) and t.effective_strides == (1, 4)
    e = BufferTensorDesc.from_numpy(np.zeros(10, np.uint8)[::3])
    assert e.sizes == (4,) and e.effective_strides == (3,)
    b = BufferTensorDesc.from_numpy(np.broadcast_to(np.arange(3, dtype=np.int64), (2, 3)))
    assert b.effective_strides == (0, 1) and b.is_broadcast
    z = BufferTensorDesc.from_numpy(np.array(5, dtype=np.float64))
    assert z.sizes == (1,) and z.data_type is TensorDataType.FLOAT64
    nhwc = np.zeros((1, 3, 5, 2), np.float32).transpose(0, 3, 1, 2)  # N, C, H, W view of NHWC memory
    n = BufferTensorDesc.from_numpy(nhwc)
    assert n.sizes == (1, 2, 3, 5)
    assert n.effective_strides == (30, 1, 10, 2)
    assert n.layout == "NHWC"
    # A size-1 dimension whose numpy stride is unusable still gets a valid one.
    odd = np.zeros((3, 4), np.float32)[::-1][:1].T
    assert BufferTensorDesc.from_numpy(odd).sizes == (4, 1)


@pytest.mark.parametrize(
    "array",
    [
        np.zeros(4, np.float32)[::-1],
        np.zeros((3, 3), np.uint8)[::-1, :],
        np.lib.stride_tricks.as_strided(np.zeros(16, np.float32), shape=(3,), strides=(6,)),
        np.zeros((2, 0), np.float32),
        np.zeros(3, np.bool_),
        np.zeros(3, np.complex64),
        np.zeros(3, ">f4"),
        np.zeros((1,) * 9, np.uint8),
    ],
)
def test_from_numpy_refusals(array):
    with pytest.raises(DescriptorError):
        BufferTensorDesc.from_numpy(array)


def test_from_numpy_negative_stride_message():
    with pytest.raises(DescriptorError, match="strides"):
        BufferTensorDesc.from_numpy(np.zeros(4, np.float32)[::-1])


@pytest.mark.parametrize("obj", [[1, 2, 3], b"abc", memoryview(b"abcd"), None])
def test_from_numpy_wants_an_ndarray(obj):
    with pytest.raises(TypeError):
        BufferTensorDesc.from_numpy(obj)


@st.composite
def numpy_views(draw):
    dtype = draw(st.sampled_from([np.uint8, np.int16, np.float32, np.float64, np.uint64]))
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    base = np.zeros(shape, dtype)
    steps = [draw(st.integers(1, 3)) for _ in shape]
    starts = [draw(st.integers(0, n - 1)) for n in shape]
    view = base[tuple(slice(s, None, k) for s, k in zip(starts, steps))]
    view = view.transpose(draw(st.permutations(range(view.ndim))))
    if draw(st.booleans()):
        view = view[:, None] if view.ndim < 4 else view
    return view


NUMPY_TO_DML = {
    np.dtype(np.uint8): TensorDataType.UINT8,
    np.dtype(np.int16): TensorDataType.INT16,
    np.dtype(np.float32): TensorDataType.FLOAT32,
    np.dtype(np.float64): TensorDataType.FLOAT64,
    np.dtype(np.uint64): TensorDataType.UINT64,
}


@given(numpy_views())
def test_from_numpy_offsets_match_the_array(view):
    d = BufferTensorDesc.from_numpy(view)
    assert d.sizes == view.shape
    assert d.data_type is NUMPY_TO_DML[view.dtype]
    item = view.itemsize
    expected = [sum(i * s for i, s in zip(idx, view.strides)) // item for idx in np.ndindex(*view.shape)]
    assert d.offsets().tolist() == expected
    # The offsets address exactly the array's elements in the memory starting at view[0, ...].
    flat = np.lib.stride_tricks.as_strided(view, shape=(int(d.offsets().max()) + 1,), strides=(item,))
    np.testing.assert_array_equal(
        np.lib.stride_tricks.as_strided(flat, shape=view.shape, strides=[s * item for s in d.effective_strides]),
        view,
    )
    if view.flags.c_contiguous:
        assert d.strides is None


# -- to_ctypes ----------------------------------------------------------------------------


def test_ctypes_layout():
    S = DML_BUFFER_TENSOR_DESC
    assert ctypes.sizeof(S) == 48
    assert ctypes.alignment(S) == 8
    offsets = {name: getattr(S, name).offset for name, _ in S._fields_}
    assert offsets == {
        "DataType": 0,
        "Flags": 4,
        "DimensionCount": 8,
        "Sizes": 16,
        "Strides": 24,
        "TotalTensorSizeInBytes": 32,
        "GuaranteedBaseOffsetAlignment": 40,
    }
    sizes = {name: getattr(S, name).size for name, _ in S._fields_}
    assert sizes == {
        "DataType": 4,
        "Flags": 4,
        "DimensionCount": 4,
        "Sizes": 8,
        "Strides": 8,
        "TotalTensorSizeInBytes": 8,
        "GuaranteedBaseOffsetAlignment": 4,
    }


def test_to_ctypes_values_and_raw_bytes():
    d = BufferTensorDesc("float16", [2, 3, 4], [0, 8, 2], 2**33 + 4, 64, TensorFlags.OWNED_BY_DML,
                         directml_limits=False)
    s = d.to_ctypes()
    assert isinstance(s, DML_BUFFER_TENSOR_DESC)
    assert ctypes.sizeof(s) == 48
    assert (s.DataType, s.Flags, s.DimensionCount) == (2, 1, 3)
    assert [s.Sizes[i] for i in range(3)] == [2, 3, 4]
    assert [s.Strides[i] for i in range(3)] == [0, 8, 2]
    assert s.TotalTensorSizeInBytes == 2**33 + 4
    assert s.GuaranteedBaseOffsetAlignment == 64
    raw = ctypes.string_at(ctypes.addressof(s), 48)
    dt, flags, ndim, p_sizes, p_strides, total, align = struct.unpack("<iII4xQQQI4x", raw)
    assert (dt, flags, ndim, total, align) == (2, 1, 3, 2**33 + 4, 64)
    assert p_sizes and p_strides
    assert list((ctypes.c_uint * 3).from_address(p_sizes)) == [2, 3, 4]
    assert list((ctypes.c_uint * 3).from_address(p_strides)) == [0, 8, 2]


def test_to_ctypes_null_strides_when_packed_implicit():
    s = BufferTensorDesc("float32", [1, 1, 3, 5]).to_ctypes()
    assert not s.Strides
    assert struct.unpack_from("<Q", ctypes.string_at(ctypes.addressof(s), 48), 24) == (0,)
    assert [s.Sizes[i] for i in range(4)] == [1, 1, 3, 5]
    assert s.TotalTensorSizeInBytes == 60
    assert (s.DataType, s.Flags, s.GuaranteedBaseOffsetAlignment) == (1, 0, 0)


def test_to_ctypes_keeps_its_arrays_alive():
    s = BufferTensorDesc("uint8", [U32, 1], [1, U32]).to_ctypes()
    t = BufferTensorDesc("uint8", [7, 6, 5, 4, 3, 2, 1, 1], [0] * 8).to_ctypes()
    gc.collect()
    junk = [(ctypes.c_uint * 8)(*([0xDEADBEEF] * 8)) for _ in range(200)]
    assert [s.Sizes[0], s.Sizes[1], s.Strides[0], s.Strides[1]] == [U32, 1, 1, U32]
    assert [t.Sizes[i] for i in range(8)] == [7, 6, 5, 4, 3, 2, 1, 1]
    assert [t.Strides[i] for i in range(8)] == [0] * 8
    assert len(junk) == 200


# -- properties against brute force -------------------------------------------------------


@given(descs())
def test_offsets_match_enumeration(d):
    off = d.offsets()
    assert off.dtype == np.int64 and off.ndim == 1
    assert off.tolist() == ref_offsets(d.sizes, d.effective_strides)
    for k, idx in enumerate(itertools.product(*(range(n) for n in d.sizes))):
        assert d.offset_of(idx) == off[k]


@given(descs())
def test_flags_match_enumeration(d):
    assert (d.is_packed, d.is_broadcast, d.is_padded, d.has_overlap) == ref_flags(d.sizes, d.effective_strides)


@given(descs(max_rank=8, max_size=2, max_stride=12))
def test_flags_match_enumeration_high_rank(d):
    assert (d.is_packed, d.is_broadcast, d.is_padded, d.has_overlap) == ref_flags(d.sizes, d.effective_strides)


@st.composite
def scaled_strides(draw):
    # Strides sharing a large common factor: overlap questions that need exact arithmetic.
    rank = draw(st.integers(2, 4))
    sizes = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    g = draw(st.integers(1, 10**6))
    strides = [g * draw(st.integers(0, 9)) for _ in sizes]
    return sizes, strides


@given(scaled_strides())
def test_has_overlap_exact_with_large_strides(case):
    sizes, strides = case
    d = BufferTensorDesc("uint8", sizes, strides)
    offs = ref_offsets(sizes, strides)
    assert d.has_overlap == (len(set(offs)) < len(offs))


@given(descs())
def test_sizes_and_defaults_consistent(d):
    assert d.effective_strides == (d.strides if d.strides is not None else ref_packed_strides(d.sizes))
    assert d.element_count == math.prod(d.sizes)
    assert d.minimum_size_in_bytes == calc_buffer_tensor_size(d.data_type, d.sizes, d.strides)
    assert d.total_tensor_size_in_bytes == d.minimum_size_in_bytes
    offs = ref_offsets(d.sizes, d.effective_strides)
    nibbles_or_bits = (max(offs) + 1) * BITS[d.data_type.name]
    assert d.minimum_size_in_bytes == -(-nibbles_or_bits // 32) * 4
    # layout: the first named layout whose packed strides are exactly the effective ones.
    rank = d.dimension_count
    expected = None
    for name in NAMED.get(rank, []):
        letters = CANONICAL[rank]
        if ref_order_strides(d.sizes, [letters.index(c) for c in name]) == d.effective_strides:
            expected = name
            break
    assert d.layout == expected
    if d.layout is not None:
        assert calculate_strides(d.layout, d.sizes) == d.effective_strides
