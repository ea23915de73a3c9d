"""The planner's decisions on their own (dmlstride._planner), and the limits
the C side states (src/engine-limits.h, src/plan.h) against Python's."""

import pytest

import dmlstride as ds
from dmlstride import _engine, _limits, _planner


def test_c_limits_agree_with_python():
    assert _engine.ALIGNMENT == _limits.MINIMUM_BUFFER_TENSOR_ALIGNMENT
    assert _engine.OFFSET_LIMIT == _limits.OFFSET_LIMIT
    assert _engine.MAX_DIMS == _limits.MAX_DIMENSION_COUNT == _planner.MAX_DIMS
    assert _engine.OUTPUT_CACHE_DEFAULT == _limits.DEFAULT_OUTPUT_CACHE
    assert _engine.MAX_THREADS == _limits.MAX_THREADS
    assert _engine.MAX_WORKERS == _limits.MAX_THREADS - 1
    assert _engine.BLOCK_GROUP == _planner.BLOCK_GROUP
    assert _engine.STAGE_ELEMS == _planner.STAGE_ELEMS


def test_size_one_dims_dropped_and_contiguous_dims_merged():
    plan = _planner.plan_copy([1, 4, 1, 5, 6], [999, 30, 7, 6, 1], [999, 30, 7, 6, 1], 32)
    assert plan.kind == "plain"
    assert plan.main.mode == "memcpy"
    assert plan.main.outer == []
    assert plan.main.inner == (120, 4, 4)       # 4 * 5 * 6 elements, 4 bytes apart


def test_dims_ordered_by_destination_stride():
    # A transposition: the source's fastest dimension is the destination's slowest.
    plan = _planner.plan_copy([300, 1030], [1, 300], [1030, 1], 16)
    assert plan.main.mode == "tile"
    assert plan.main.inner == (1030, 600, 2)     # destination-contiguous
    assert plan.main.tile == (300, 2, 2060)      # source-contiguous


@pytest.mark.parametrize("sizes,src,dst,mode", [
    ([64, 64], [64, 1], [64, 1], "memcpy"),
    ([64, 64], [1, 0], [64, 1], "fill"),
    ([64, 64], [128, 2], [64, 1], "strided"),
    ([64, 64], [1, 64], [64, 1], "tile"),
    ([1000, 3], [1, 1000], [3, 1], "interleave"),
    ([2, 4, 8, 2, 4, 16, 4, 8], None, None, "block"),
])
def test_kernel_choice(sizes, src, dst, mode):
    if src is None:
        d = ds.BufferTensorDesc.from_layout("float32", sizes, (3, 0, 6, 1, 7, 4, 2, 5))
        src = list(d.effective_strides)
        dst = list(ds.BufferTensorDesc("float32", sizes).effective_strides)
    assert _planner.plan_copy(sizes, src, dst, 32).main.mode == mode


def test_block_groups_fit_the_c_tables():
    d = ds.BufferTensorDesc.from_layout("uint8", [3, 50, 40, 9, 2], (3, 0, 4, 1, 2))
    plan = _planner.plan_copy(d.sizes, d.effective_strides, [720 * 50, 720, 18, 2, 1], 8).main
    assert plan.mode == "block"
    assert plan.block.j_elems <= _planner.BLOCK_GROUP and plan.block.k_elems <= _planner.BLOCK_GROUP
    assert plan.block.j_elems * plan.block.k_elems <= _planner.BLOCK_ELEMS


def test_four_bit_staging():
    nhwc = ds.BufferTensorDesc.from_layout("uint4", [2, 64, 64, 64], "NHWC")
    nchw = ds.BufferTensorDesc("uint4", [2, 64, 64, 64])
    both = _planner.plan_copy(nhwc.sizes, nhwc.effective_strides, nchw.effective_strides, 4)
    assert both.kind == "staged_both" and both.whole_bytes
    assert both.main.inner[0] <= _planner.STAGE_ELEMS
    unpack = _planner.plan_copy(nhwc.sizes, nhwc.effective_strides, nchw.effective_strides, 4,
                                True, False)
    assert unpack.kind == "staged" and unpack.sub.width == 1
    # Not packed in any order: element by element.
    odd = _planner.plan_copy([100], [3], [2], 4)
    assert odd.kind == "plain" and odd.main.mode == "nibble"


def test_segments_cover_long_rows():
    plan = _planner.plan_copy([1 << 20], [1], [1], 8).main
    assert plan.segments * plan.segment_len >= plan.inner[0] > (plan.segments - 1) * plan.segment_len
    assert plan.tasks == plan.segments > 1


def test_plan_refuses_what_no_descriptor_can_produce():
    with pytest.raises(ValueError, match="1 to 8"):
        _planner.plan_copy([2] * 9, [1] * 9, [1] * 9, 8)
    with pytest.raises(ValueError, match="element_bits"):
        _planner.plan_copy([2], [1], [1], 12)
    with pytest.raises(ValueError, match="sizes must be"):
        _planner.plan_copy([0], [1], [1], 8)


def test_describe_is_the_planner_decision():
    plan = _engine.Plan([300, 1030], [1, 300], [1030, 1], 16)
    info = plan.describe()
    assert info["mode"] == plan.layout.main.mode == "tile"
    assert info["tile"] == plan.layout.main.tile
