"""Copies in slabs: permutations that would go element by element.

When both sides' fastest dimensions are short and different (a 5-D or 6-D
permutation of small dimensions: 2 x 2 values swapped, 3 channels whose
pixels run on for 5 values), the kernel plan copies one element at a time.
The planner (``plan_slabs``) sends such copies through a buffer instead, a
slab at a time: the channels of one side as planes, permuted in one step and
interleaved (or pulled apart) in the other.  Checked here against the numpy
reference of ``tests/reference.py``: gathers, scatters (every byte around and
between the elements left as it was) and copies into another permutation, on
one thread and two; and the bridge refuses slabs that would leave the copy or
the buffer.
"""

import random

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import _engine, _planner, transfer
from reference import gather_np, scatter_np


@pytest.fixture
def fresh_plans():
    # Plans are kept by descriptor (and by the gather fast path): a test that
    # changes the planner's constants plans afresh, and leaves none behind.
    transfer._plans.clear()
    _engine.forget_gathers()
    yield
    transfer._plans.clear()
    _engine.forget_gathers()


def _kind(dtype, sizes, src, dst):
    return _planner.plan_copy(list(sizes), src, dst, 8 * np.dtype(dtype).itemsize).kind


def _random_bytes(nbytes, seed):
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def _check_gather(desc, seed):
    buf = _random_bytes(desc.total_tensor_size_in_bytes, seed)
    expect = gather_np(buf, desc.data_type, desc.sizes, desc.effective_strides)
    assert ds.gather(buf, desc).tobytes() == expect.tobytes()
    out = np.empty_like(expect)
    assert ds.gather(buf, desc, out=out) is out and out.tobytes() == expect.tobytes()


def _check_scatter(desc, seed):
    # between 64 guard bytes on each side, over random bytes
    dt = ds.numpy_dtype(desc.data_type)
    values = _random_bytes(int(np.prod(desc.sizes)) * dt.itemsize, seed).view(dt).reshape(desc.sizes)
    raw = bytearray(_random_bytes(desc.total_tensor_size_in_bytes + 128, seed + 1).tobytes())
    expect = bytearray(raw)
    scatter_np(values, expect, desc.data_type, desc.sizes, desc.effective_strides, offset=64)
    ds.scatter(values, desc, raw, offset=64)
    assert raw == expect


def _check_copy(src, dst, seed):
    buf = _random_bytes(src.total_tensor_size_in_bytes, seed)
    raw = bytearray(_random_bytes(dst.total_tensor_size_in_bytes, seed + 1).tobytes())
    expect = bytearray(raw)
    values = gather_np(buf, src.data_type, src.sizes, src.effective_strides)
    scatter_np(values, expect, dst.data_type, dst.sizes, dst.effective_strides)
    ds.copy_tensor(buf, src, raw, dst)
    assert raw == expect


# Unnamed 5-D and 6-D permutations whose kernel plan goes element by element
# (each a smaller copy of one measured), gathered or scattered.
CASES = [
    ("uint8", (50, 4, 5, 479, 2), (4, 1, 0, 3, 2), "scatter"),       # 2 channels, rows of 5 pixels
    ("uint8", (35, 4, 88, 59, 2, 2), (3, 1, 0, 2, 5, 4), "scatter"),  # the last two swapped
    ("int16", (47, 48, 19, 2, 3), (0, 2, 1, 4, 3), "gather"),
    ("float16", (2, 12, 55, 12, 9, 7), (3, 5, 2, 1, 4, 0), "scatter"),
    ("uint32", (49, 28, 7, 17, 2, 2), (2, 0, 1, 3, 5, 4), "scatter"),
    ("uint8", (29, 2, 3, 1204, 2), (1, 0, 4, 3, 2), "gather"),
    ("float32", (19, 8, 24, 66, 2, 3), (2, 0, 5, 4, 1, 3), "gather"),
    ("float64", (11, 13, 7, 22, 2, 2), (5, 4, 1, 0, 2, 3), "gather"),
    ("float64", (3, 4, 34, 2, 64, 13), (2, 1, 4, 5, 0, 3), "scatter"),
]


@pytest.mark.parametrize("dtype,sizes,order,op", CASES, ids=str)
def test_element_by_element_permutations_go_in_slabs(dtype, sizes, order, op, threads):
    desc = ds.BufferTensorDesc.from_layout(dtype, sizes, order)
    packed = ds.BufferTensorDesc(dtype, list(sizes))
    src, dst = (desc, packed) if op == "gather" else (packed, desc)
    assert _kind(dtype, sizes, src.effective_strides, dst.effective_strides) == "slabs"
    with pytest.MonkeyPatch.context() as mp:   # the kernel plan the slabs replace
        mp.setattr(_planner, "SLAB_COPIES", False)
        plain = _planner.plan_copy(list(sizes), src.effective_strides, dst.effective_strides,
                                   8 * np.dtype(dtype).itemsize)
        assert plain.kind == "plain" and plain.main.mode == "strided"
    described = transfer._plan(desc, op).describe()
    assert described["mode"] == "slabs" and described["sub"]["mode"] != "strided"
    _check_gather(desc, 1)
    _check_scatter(desc, 2)
    # into another permutation of the same sizes, and back
    other = ds.BufferTensorDesc.from_layout(dtype, sizes, tuple(reversed(order)))
    _check_copy(desc, other, 3)
    _check_copy(other, desc, 4)


def test_rows_of_wide_values_keep_their_plan():
    # Four- and eight-byte values element by element in tasks of
    # SLAB_WIDE_TASK_BYTES or more stay so.
    sizes, order = (2511, 3, 2, 2, 17, 4), (2, 3, 4, 0, 5, 1)
    desc = ds.BufferTensorDesc.from_layout("float64", sizes, order)
    packed = ds.BufferTensorDesc("float64", list(sizes))
    plan = _planner.plan_copy(list(sizes), desc.effective_strides, packed.effective_strides, 64)
    assert plan.kind == "plain" and plan.main.mode == "strided"
    assert plan.main.dst_bytes >= _planner.SLAB_WIDE_TASK_BYTES * plan.main.tasks


def test_small_copies_keep_their_plan(monkeypatch):
    # Under SLAB_MIN_TOTAL bytes the kernel plan stays.
    sizes, order = (3, 4, 5, 479, 2), (4, 1, 0, 3, 2)
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    packed = ds.BufferTensorDesc("uint8", list(sizes))
    assert np.prod(sizes) < _planner.SLAB_MIN_TOTAL
    assert _kind("uint8", sizes, packed.effective_strides, desc.effective_strides) == "plain"
    monkeypatch.setattr(_planner, "SLAB_MIN_TOTAL", 0)
    assert _kind("uint8", sizes, packed.effective_strides, desc.effective_strides) == "slabs"


def test_random_permutations_in_slabs_of_every_size(fresh_plans, monkeypatch):
    # Small permutations of small dimensions, every copy that can go in slabs
    # made to (no least size), the slabs from 64 bytes to the planner's bound
    # (dimensions cut to fit included), on one thread and two: gathers and
    # scatters against the reference.
    monkeypatch.setattr(_planner, "SLAB_MIN_TOTAL", 0)
    monkeypatch.setattr(_planner, "SLAB_MIN_BYTES", 1)
    rng = random.Random(11)
    slabs = 0
    for case in range(600):
        monkeypatch.setattr(_planner, "SLAB_BYTES", rng.choice([64, 256, 1024, 4096, _planner.SLAB_BYTES]))
        transfer._plans.clear()
        _engine.forget_gathers()
        ds.set_num_threads(rng.choice([1, 2]))
        ndim = rng.randint(3, 6)
        sizes = tuple(rng.randint(2, 9) for _ in range(ndim))
        order = list(range(ndim))
        rng.shuffle(order)
        dtype = rng.choice(["uint8", "int16", "float16", "uint32", "float32", "float64", "int64"])
        desc = ds.BufferTensorDesc.from_layout(dtype, sizes, tuple(order))
        slabs += transfer._plan(desc, "gather").describe()["mode"] == "slabs"
        _check_gather(desc, case)
        _check_scatter(desc, case)
    ds.set_num_threads(1)
    assert slabs >= 30   # (the draw gives 37)


def _slab_plan():
    sizes, order = (50, 4, 5, 479, 2), (4, 1, 0, 3, 2)
    desc = ds.BufferTensorDesc.from_layout("uint8", sizes, order)
    packed = ds.BufferTensorDesc("uint8", list(sizes))
    return list(sizes), list(packed.effective_strides), list(desc.effective_strides)


def _one_slab_more(main):
    n, a, b = main.outer[0]
    main.outer[0] = (n + 1, a, b)
    main.tasks = main.outer_count


@pytest.mark.parametrize("change,match", [
    (lambda p: setattr(p, "sub_extent", (p.sub_extent[0], _engine.SLAB_BYTES + 1)), "outside the copy or its buffer"),
    (lambda p: setattr(p, "sub2_extent", (_engine.SLAB_BYTES + 1, p.sub2_extent[1])), "outside the copy or its buffer"),
    (lambda p: setattr(p, "sub_extent", (p.sub_extent[0] + 1, p.sub_extent[1])), "outside the copy or its buffer"),
    (lambda p: setattr(p, "sub2_extent", (p.sub2_extent[0], p.sub2_extent[1] + 1)), "outside the copy or its buffer"),
    (lambda p: _one_slab_more(p.main), "outside the copy or its buffer"),
    (lambda p: setattr(p.sub, "stream", True), "streams or uses the L2 buffers"),
    (lambda p: setattr(p.sub2, "l2", 2), "L2"),
], ids=["buffer-by-sub", "buffer-by-sub2", "source", "destination", "one-slab-more", "stream", "l2"])
def test_engine_refuses_slabs_outside_the_copy_or_the_buffer(monkeypatch, change, match):
    # A slab plan that would read or write past the copy's extents (a slab
    # more, a step reaching a byte further) or past the thread's buffer, or
    # whose steps would stream or take the L2 buffers (regions of the same
    # arena), never reaches the kernels.
    sizes, src, dst = _slab_plan()
    real = _planner.plan_slabs
    assert _engine.Plan(sizes, src, dst, 8).layout.kind == "slabs"

    def changed(*args):
        plan = real(*args)
        change(plan)
        return plan

    monkeypatch.setattr(_planner, "plan_slabs", changed)
    with pytest.raises(ValueError, match=match):
        _engine.Plan(sizes, src, dst, 8)
