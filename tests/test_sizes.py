"""Tests for ``calc_buffer_tensor_size``, ``calculate_strides``, ``broadcast_strides``.

Each function is checked on hand-worked values, on every per-field rule it
applies, and with hypothesis against brute-force references that enumerate
indices with ``itertools.product``.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlstride import (
    DescriptorError,
    TensorDataType,
    broadcast_strides,
    calc_buffer_tensor_size,
    calculate_strides,
    layout_names,
)

U32 = 2**32 - 1
BITS = {
    "FLOAT32": 32, "FLOAT16": 16, "UINT32": 32, "UINT16": 16, "UINT8": 8, "INT32": 32, "INT16": 16,
    "INT8": 8, "FLOAT64": 64, "UINT64": 64, "INT64": 64, "UINT4": 4, "INT4": 4,
}  # fmt: skip
CANONICAL = {1: "W", 2: "HW", 3: "DHW", 4: "NCHW", 5: "NCDHW"}


def indices(sizes):
    return itertools.product(*(range(n) for n in sizes))


def ref_size(bits, sizes, strides):
    """The size formula by enumeration: (largest offset + 1) elements, in bytes, rounded to 4."""
    if strides is None:
        elements = math.prod(sizes)
    else:
        elements = max(sum(i * s for i, s in zip(idx, strides)) for idx in indices(sizes)) + 1
    nbytes = -(-elements * bits // 8)
    return -(-nbytes // 4) * 4


def ref_strides(sizes, order, broadcast=None):
    """Strides found by walking the memory order: the k-th element visited sits at offset k."""
    rank = len(sizes)
    broadcast = broadcast or [False] * rank
    eff = [1 if b else n for n, b in zip(sizes, broadcast)]
    strides = [0] * rank
    # Element k in memory order has index digits over `order`; offset of the unit step along
    # an axis is the position of the element whose only non-zero digit is that axis.
    walk = list(itertools.product(*(range(eff[a]) for a in order)))
    for axis in range(rank):
        if broadcast[axis]:
            continue
        if eff[axis] == 1:
            # A size-1 dimension's stride is the product of the faster sizes.
            pos = order.index(axis)
            strides[axis] = math.prod(eff[a] for a in order[pos + 1 :])
            continue
        unit = tuple(1 if a == axis else 0 for a in order)
        strides[axis] = walk.index(unit)
    return tuple(strides)


small_sizes = st.lists(st.integers(1, 4), min_size=1, max_size=5)


@st.composite
def sizes_and_strides(draw, max_rank=5, max_size=4, max_stride=30):
    sizes = draw(st.lists(st.integers(1, max_size), min_size=1, max_size=max_rank))
    strides = draw(
        st.one_of(
            st.none(),
            st.lists(st.integers(0, max_stride), min_size=len(sizes), max_size=len(sizes)),
        )
    )
    return sizes, strides


# -- calc_buffer_tensor_size: values -----------------------------------------------------


# The worked size examples are checked in test_golden.py (also against the
# DirectML helper); these are further cases.
@pytest.mark.parametrize(
    ("dtype", "sizes", "strides", "expected"),
    [
        ("float32", [1, 1, 3, 5], [15, 15, 5, 1], 60),
        ("float32", [65537, 65536], [65536, 1], 17180131328),
        ("uint8", [1], None, 4),
        ("uint8", [5], None, 8),
        ("uint8", [2, 3], [5, 1], 8),
        ("float32", [2, 3], [5, 1], 32),
        ("uint4", [8], None, 4),
        ("uint4", [1], None, 4),
        ("uint4", [3], [3], 4),  # offsets 0, 3, 6: 7 nibbles
        ("uint4", [3], [4], 8),  # offsets 0, 4, 8: 9 nibbles
        ("float64", [3], [0], 8),
        ("uint16", [4, 4], [0, 0], 4),
    ],
)
def test_calc_buffer_tensor_size_values(dtype, sizes, strides, expected):
    assert calc_buffer_tensor_size(dtype, sizes, strides) == expected


def test_calc_buffer_tensor_size_accepts_every_data_type_form():
    for dt in ("float32", TensorDataType.FLOAT32, 1, np.float32, np.dtype("<f4"), "FLOAT32"):
        assert calc_buffer_tensor_size(dt, (2, 3)) == 24
    assert calc_buffer_tensor_size("int8", np.array([2, 3]), np.array([3, 1])) == 8
    assert calc_buffer_tensor_size("int8", [np.uint32(2), np.int64(3)]) == 8
    assert type(calc_buffer_tensor_size("uint8", [np.int64(3)])) is int


def test_calc_buffer_tensor_size_has_no_element_count_cap():
    # The formula, not the descriptor: more than 2**32 - 1 elements is fine here.
    assert calc_buffer_tensor_size("uint8", [2**32 - 1, 2]) == 2 * (2**32 - 1) + 2
    assert calc_buffer_tensor_size("float32", [65537, 65536]) == 65537 * 65536 * 4
    assert calc_buffer_tensor_size("float32", [65537, 65536], [65536, 1]) == 17180131328


def test_calc_buffer_tensor_size_is_exact_for_huge_inputs():
    # Eight dimensions of the largest size and stride: far beyond 32 or 64 bits in elements
    # when packed, but still below 2**64 bytes with strides of 1.
    assert calc_buffer_tensor_size("uint8", [U32] * 2, [1, 1]) == 2**33  # 2**33 - 3 bytes, rounded
    big = calc_buffer_tensor_size("uint8", [U32], [U32])
    assert big == 2**64 - 3 * 2**32 + 4  # (U32 - 1) * U32 + 1 = 2**64 - 3 * 2**32 + 3, rounded
    assert big < 2**64


@pytest.mark.parametrize(
    ("dtype", "sizes", "strides"),
    [
        ("uint8", [U32] * 3, None),  # product ~ 2**96 bytes
        ("float32", [U32], [U32]),  # ~ 2**66 bytes
        ("float64", [2**31, 2**31, 2**31], [1, 1, U32]),
        ("uint8", [U32] * 8, [U32] * 8),
    ],
)
def test_calc_buffer_tensor_size_refuses_2_to_the_64(dtype, sizes, strides):
    with pytest.raises(DescriptorError, match="2\\*\\*64"):
        calc_buffer_tensor_size(dtype, sizes, strides)


def test_calc_size_at_the_2_to_the_64_boundary():
    # 8-byte elements: (2**61 - 1) elements fit, 2**61 elements are 2**64 bytes.
    sizes = [2**29 + 1, 2]
    assert calc_buffer_tensor_size("uint64", sizes, [U32, 2**29 - 2]) == 2**64 - 8
    with pytest.raises(DescriptorError, match=r"2\*\*64"):
        calc_buffer_tensor_size("uint64", sizes, [U32, 2**29 - 1])
    # 1-byte elements: 2**64 - 4 bytes fit; 2**64 - 2 bytes round up to 2**64.
    sizes = [U32, 4, 3]
    assert calc_buffer_tensor_size("uint8", sizes, [U32, 2**32 - 3, 1]) == 2**64 - 4
    with pytest.raises(DescriptorError, match=r"2\*\*64"):
        calc_buffer_tensor_size("uint8", sizes, [U32, 2**32 - 3, 2])


# -- calc_buffer_tensor_size: per-field rules --------------------------------------------


@pytest.mark.parametrize("dt", [0, "unknown", TensorDataType.UNKNOWN, 14, -3, "float8"])
def test_calc_size_refuses_invalid_data_type(dt):
    with pytest.raises(DescriptorError, match="data_type"):
        calc_buffer_tensor_size(dt, [2, 3])


@pytest.mark.parametrize("sizes", [[], [1] * 9, [2] * 12])
def test_calc_size_refuses_dimension_count(sizes):
    with pytest.raises(DescriptorError, match="sizes"):
        calc_buffer_tensor_size("float32", sizes)


@pytest.mark.parametrize("sizes", [[0], [2, 0, 3], [2**32], [3, 2**40], [-1, 2]])
def test_calc_size_refuses_bad_sizes(sizes):
    with pytest.raises(DescriptorError, match=r"sizes\[\d\]"):
        calc_buffer_tensor_size("float32", sizes)


@pytest.mark.parametrize("strides", [[-1, 1], [1, 2**32], [2**33, 0]])
def test_calc_size_refuses_bad_strides(strides):
    with pytest.raises(DescriptorError, match=r"strides\[\d\]"):
        calc_buffer_tensor_size("float32", [2, 3], strides)


@pytest.mark.parametrize("strides", [[1], [3, 1, 1], [], [1] * 9])
def test_calc_size_refuses_mismatched_strides(strides):
    with pytest.raises(DescriptorError, match="strides"):
        calc_buffer_tensor_size("float32", [2, 3], strides)


def test_calc_size_boundaries_accepted():
    assert calc_buffer_tensor_size("uint8", [U32]) == 2**32
    assert calc_buffer_tensor_size("uint8", [1, 2], [U32, U32]) == 2**32
    assert calc_buffer_tensor_size("uint8", [1] * 8) == 4
    assert calc_buffer_tensor_size("uint8", [2] * 8, [0] * 8) == 4


@pytest.mark.parametrize(
    ("sizes", "strides"),
    [("23", None), (5, None), ([2.0, 3], None), ([True, 2], None), ([2, 3], (1.0, 1)),
     ([2, 3], "ab"), ([2, 3], 7), (None, None), (np.ones((2, 2), int), None)],
)  # fmt: skip
def test_calc_size_wrong_types(sizes, strides):
    with pytest.raises(TypeError):
        calc_buffer_tensor_size("float32", sizes, strides)


def test_calc_size_wrong_data_type_type():
    with pytest.raises(TypeError):
        calc_buffer_tensor_size(None, [2])
    with pytest.raises(TypeError):
        calc_buffer_tensor_size(1.0, [2])


# -- calc_buffer_tensor_size: properties -------------------------------------------------


@given(st.sampled_from(sorted(BITS)), sizes_and_strides())
def test_calc_size_matches_enumeration(name, shape):
    sizes, strides = shape
    got = calc_buffer_tensor_size(name, sizes, strides)
    assert got == ref_size(BITS[name], sizes, strides)
    assert got % 4 == 0
    assert got > 0


@given(
    st.sampled_from(sorted(BITS)),
    st.lists(st.tuples(st.integers(1, U32), st.integers(0, U32)), min_size=1, max_size=8),
)
def test_calc_size_exact_on_full_range(name, dims):
    sizes = [n for n, _ in dims]
    strides = [s for _, s in dims]
    last = sum((n - 1) * s for n, s in dims)
    bits = (last + 1) * BITS[name]
    expected = (bits + 31) // 32 * 4  # ceil to bytes, then to 4 bytes: ceil to 32 bits
    if expected >= 2**64:
        with pytest.raises(DescriptorError):
            calc_buffer_tensor_size(name, sizes, strides)
    else:
        assert calc_buffer_tensor_size(name, sizes, strides) == expected


@given(st.sampled_from(sorted(BITS)), small_sizes)
def test_calc_size_packed_explicit_equals_implicit(name, sizes):
    packed = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    assert calc_buffer_tensor_size(name, sizes, packed) == calc_buffer_tensor_size(name, sizes)


# -- layout_names ------------------------------------------------------------------------


def test_layout_names():
    assert layout_names(2) == ("HW", "WH")
    assert layout_names(3) == ("DHW", "WHD")
    assert layout_names(4) == ("NCHW", "NHWC")
    assert layout_names(5) == ("NCDHW", "NDHWC")
    assert layout_names(7) == ()


# -- calculate_strides: values -----------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "sizes", "expected"),
    [
        ("HW", [2, 3], (3, 1)),
        ("WH", [2, 3], (1, 2)),
        ("DHW", [2, 2, 3], (6, 3, 1)),
        ("WHD", [2, 2, 3], (1, 2, 4)),
        ("NCHW", [1, 1, 3, 5], (15, 15, 5, 1)),
        ("NHWC", [1, 1, 3, 5], (15, 1, 5, 1)),
        ("NCHW", [2, 3, 4, 5], (60, 20, 5, 1)),
        ("NHWC", [2, 3, 4, 5], (60, 1, 15, 3)),
        ("NHWC", [1, 3, 4, 5], (60, 1, 15, 3)),
        ("NCDHW", [2, 3, 4, 5, 6], (360, 120, 30, 6, 1)),
        ("NDHWC", [2, 3, 4, 5, 6], (360, 1, 90, 18, 3)),
        ("CHWN", [2, 3, 4, 5], (1, 40, 10, 2)),
        ("W", [7], (1,)),
        ((0,), [7], (1,)),
        ((1, 0), [2, 3], (1, 2)),
        ((0, 1, 2, 3, 4, 5), [2, 1, 2, 1, 2, 3], (12, 12, 6, 6, 3, 1)),
        ((5, 4, 3, 2, 1, 0), [2, 1, 2, 1, 2, 3], (1, 2, 2, 4, 4, 8)),
        (tuple(range(8)), [2] * 8, (128, 64, 32, 16, 8, 4, 2, 1)),
        ((0, 2, 3, 4, 5, 6, 7, 1), [2, 3, 2, 2, 2, 2, 2, 2], (192, 1, 96, 48, 24, 12, 6, 3)),
    ],
)
def test_calculate_strides_values(layout, sizes, expected):
    assert calculate_strides(layout, sizes) == expected


def test_calculate_strides_layout_string_case_insensitive():
    assert calculate_strides("nhwc", [1, 3, 4, 5]) == (60, 1, 15, 3)
    assert calculate_strides("Wh", [2, 3]) == (1, 2)


def test_calculate_strides_broadcast():
    assert calculate_strides("NCHW", [2, 3, 4, 5], [False, True, False, False]) == (20, 0, 5, 1)
    assert calculate_strides("NHWC", [2, 3, 4, 5], [False, True, False, False]) == (20, 0, 5, 1)
    assert calculate_strides("NHWC", [2, 3, 4, 5], [True, False, False, False]) == (0, 1, 15, 3)
    assert calculate_strides("HW", [2, 3], [True, False]) == (0, 1)
    assert calculate_strides("HW", [2, 3], [True, True]) == (0, 0)
    # A broadcast dimension counts as size 1 in the products of the slower ones.
    assert calculate_strides("HW", [2, 3], (0, 1)) == (1, 0)
    assert calculate_strides("NCHW", [2, 3, 4, 5], [False, False, False, True]) == (12, 4, 1, 0)
    assert calculate_strides((1, 0), [2, 3], np.array([False, True])) == (1, 0)
    assert calculate_strides("HW", [2, 3], [np.True_, np.False_]) == (0, 1)
    assert calculate_strides("HW", [2, 3], None) == (3, 1)


def seed_calculate_strides(layout, sizes, broadcast):
    """DirectML's documented C++ CalculateStrides, line for line."""
    N, C, H, W = 0, 1, 2, 3
    n = 1 if broadcast[N] else sizes[N]
    c = 1 if broadcast[C] else sizes[C]
    h = 1 if broadcast[H] else sizes[H]
    w = 1 if broadcast[W] else sizes[W]
    if layout == "NCHW":
        n_s = 0 if broadcast[N] else c * h * w
        c_s = 0 if broadcast[C] else h * w
        h_s = 0 if broadcast[H] else w
        w_s = 0 if broadcast[W] else 1
    else:
        n_s = 0 if broadcast[N] else h * w * c
        h_s = 0 if broadcast[H] else w * c
        w_s = 0 if broadcast[W] else c
        c_s = 0 if broadcast[C] else 1
    return (n_s, c_s, h_s, w_s)


@given(
    st.sampled_from(["NCHW", "NHWC"]),
    st.lists(st.integers(1, 50), min_size=4, max_size=4),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_calculate_strides_matches_seed_helper(layout, sizes, broadcast):
    assert calculate_strides(layout, sizes, broadcast) == seed_calculate_strides(layout, sizes, broadcast)


@given(st.integers(3, 8).flatmap(lambda r: st.lists(st.integers(1, 9), min_size=r, max_size=r)))
def test_interleaved_channel_policy(sizes):
    # DirectMLX: N = product of the others, C = 1, spatial i = C * product of later spatial sizes.
    rank = len(sizes)
    c = sizes[1]
    spatial = sizes[2:]
    expected = [math.prod(sizes[1:]), 1] + [c * math.prod(spatial[i + 1 :]) for i in range(len(spatial))]
    order = (0, *range(2, rank), 1)
    assert calculate_strides(order, sizes) == tuple(expected)
    if rank == 4:
        assert calculate_strides("NHWC", sizes) == tuple(expected)
    if rank == 5:
        assert calculate_strides("NDHWC", sizes) == tuple(expected)


@st.composite
def layout_case(draw):
    rank = draw(st.integers(1, 5))
    sizes = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    order = draw(st.permutations(range(rank)))
    broadcast = draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=rank, max_size=rank)))
    return sizes, tuple(order), broadcast


@given(layout_case())
def test_calculate_strides_walks_memory_in_order(case):
    sizes, order, broadcast = case
    expected = ref_strides(sizes, list(order), broadcast)
    assert calculate_strides(order, sizes, broadcast) == expected
    if len(sizes) in CANONICAL:
        letters = CANONICAL[len(sizes)]
        name = "".join(letters[a] for a in order)
        assert calculate_strides(name, sizes, broadcast) == expected


@given(layout_case())
def test_calculate_strides_is_packed(case):
    sizes, order, broadcast = case
    strides = calculate_strides(order, sizes, broadcast)
    eff = [1 if broadcast and broadcast[a] else n for a, n in enumerate(sizes)]
    offsets = sorted(sum(i * s for i, s in zip(idx, strides)) for idx in indices(eff))
    assert offsets == list(range(math.prod(eff)))
    if broadcast:
        assert all(s == 0 for s, b in zip(strides, broadcast) if b)


# -- calculate_strides: refusals ---------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "sizes"),
    [
        ("NCHW", [2, 3]),
        ("HW", [1, 2, 3, 4]),
        ("NCWW", [1, 2, 3, 4]),
        ("NCHWX", [1, 2, 3, 4]),
        ("NCH", [1, 2, 3, 4]),
        ("XY", [2, 3]),
        ("", [2, 3]),
        ("NCDHW", [1, 2, 3, 4]),
        ("DHW", [2, 2, 2, 2]),
    ],
)
def test_calculate_strides_bad_layout_name(layout, sizes):
    with pytest.raises(DescriptorError, match="layout"):
        calculate_strides(layout, sizes)


def test_calculate_strides_no_letters_above_rank_5():
    with pytest.raises(DescriptorError, match="layout"):
        calculate_strides("ABCDEF", [1] * 6)
    assert calculate_strides(tuple(range(6)), [1] * 6) == (1,) * 6


@pytest.mark.parametrize("layout", [(0,), (0, 0), (0, 2), (1, 2), (-1, 0), (0, 1, 2)])
def test_calculate_strides_bad_layout_tuple(layout):
    with pytest.raises(DescriptorError, match="layout"):
        calculate_strides(layout, [2, 3])


@pytest.mark.parametrize("layout", [None, 3, b"HW", (0.0, 1.0), {0, 1}, (True, False)])
def test_calculate_strides_layout_wrong_type(layout):
    with pytest.raises(TypeError):
        calculate_strides(layout, [2, 3])


def test_calculate_strides_broadcast_refusals():
    with pytest.raises(DescriptorError, match="broadcast"):
        calculate_strides("HW", [2, 3], [True])
    with pytest.raises(DescriptorError, match="broadcast"):
        calculate_strides("HW", [2, 3], [True, False, False])
    for bad in ("TF", 1, [True, 2], [True, None], [0.0, 1.0]):
        with pytest.raises(TypeError):
            calculate_strides("HW", [2, 3], bad)


def test_calculate_strides_validates_sizes():
    with pytest.raises(DescriptorError, match=r"sizes\[1\]"):
        calculate_strides("HW", [2, 0])
    with pytest.raises(DescriptorError, match="sizes"):
        calculate_strides((), [])
    with pytest.raises(DescriptorError, match="sizes"):
        calculate_strides(tuple(range(9)), [1] * 9)
    with pytest.raises(DescriptorError, match=r"sizes\[0\]"):
        calculate_strides("W", [2**32])


def test_calculate_strides_refuses_strides_beyond_32_bits():
    with pytest.raises(DescriptorError, match="strides"):
        calculate_strides("DHW", [2, 2**16, 2**16 + 1])
    # The same sizes with the big dimension broadcast fit.
    assert calculate_strides("DHW", [2, 2**16, 2**16 + 1], [False, True, False]) == (2**16 + 1, 0, 1)


# -- broadcast_strides -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("physical", "sizes", "expected"),
    [
        ([2, 1, 4], [2, 3, 4], (4, 0, 1)),
        ([3], [2, 3], (0, 1)),
        ([1], [2, 3], (0, 0)),
        ([2, 3], [2, 3], (3, 1)),
        ([2, 1], [2, 3], (1, 0)),
        ([3, 1, 5], [2, 3, 4, 5], (0, 5, 0, 1)),
        ([1, 1, 1], [1, 1, 1], (0, 0, 0)),
        ([4], [1, 1, 3, 4], (0, 0, 0, 1)),
    ],
)
def test_broadcast_strides_values(physical, sizes, expected):
    assert broadcast_strides(physical, sizes) == expected


@pytest.mark.parametrize(
    ("physical", "sizes"),
    [([2], [3]), ([2, 3], [3, 2]), ([3, 4], [4]), ([1, 3], [3]), ([2, 2], [2, 3]), ([4], [2, 3])],
)
def test_broadcast_strides_misaligned(physical, sizes):
    with pytest.raises(DescriptorError):
        broadcast_strides(physical, sizes)


def test_broadcast_strides_validates_fields():
    with pytest.raises(DescriptorError, match="physical_sizes"):
        broadcast_strides([0], [2])
    with pytest.raises(DescriptorError, match="sizes"):
        broadcast_strides([2], [2, 0])
    with pytest.raises(TypeError):
        broadcast_strides("2", [2])
    with pytest.raises(TypeError):
        broadcast_strides([2], [2.0])


def test_broadcast_strides_refuses_strides_beyond_32_bits():
    with pytest.raises(DescriptorError, match="strides"):
        broadcast_strides([2, 2**16, 2**16 + 1], [2, 2**16, 2**16 + 1])


@st.composite
def broadcast_case(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    dropped = draw(st.integers(0, len(sizes)))
    kept = sizes[dropped:]
    ones = draw(st.lists(st.booleans(), min_size=len(kept), max_size=len(kept)))
    physical = [1 if one else n for n, one in zip(kept, ones)]
    if not physical:
        physical = [1]
    return physical, sizes


@given(broadcast_case())
def test_broadcast_strides_reads_the_right_element(case):
    physical, sizes = case
    strides = broadcast_strides(physical, sizes)
    lead = len(sizes) - len(physical)
    for idx in indices(sizes):
        src = [0 if p == 1 else i for i, p in zip(idx[lead:], physical)]
        packed = 0
        for i, p in zip(src, physical):
            packed = packed * p + i
        assert sum(i * s for i, s in zip(idx, strides)) == packed


@given(broadcast_case())
def test_broadcast_strides_agrees_with_numpy(case):
    physical, sizes = case
    itemsize = 2
    base = np.arange(math.prod(physical), dtype=np.int16).reshape(physical)
    view = np.broadcast_to(base, sizes)
    expected = tuple(s // itemsize for s in view.strides)
    got = broadcast_strides(physical, sizes)
    # numpy may give any stride to a size-1 dimension; compare where it matters.
    assert all(g == e for g, e, n in zip(got, expected, sizes) if n > 1)
