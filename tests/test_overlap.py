"""Self-overlap analysis: exact against brute force, bounded in time, safe past its bound.

``has_overlap`` asks whether two distinct indices share an element offset.  The
analysis is exact wherever it decides; past its work bound it reports
"not decided", ``has_overlap`` answers True and writes through such a
destination are refused.  The timing tests run every entry point on hostile
descriptors (8 dimensions, strides near 2**32) in a fresh interpreter under a
timeout, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlstride as ds
from dmlstride import BufferTensorDesc, DescriptorError, _overlap
from dmlstride.cli import main as cli_main

from reference import element_offsets_np, overlaps
from subproc import run_python

# CPU-time bounds hold for an ordinary build; an instrumented one (tests/asan.sh sets
# DMLSTRIDE_TIME_SCALE) runs every call several times slower.
TIME_SCALE = float(os.environ.get("DMLSTRIDE_TIME_SCALE") or 1)

# The descriptor of the report: it builds at once, and the buffer is 16 bytes.
ISSUE_SIZES = [16] * 7 + [15]
ISSUE_STRIDES = [3382962190, 4058696965, 2541040493, 3800621477, 3509189500, 3187325960, 3394439372, 2937193812]
# 8-D, no cheap proof either way and beyond the search bound (found by a seeded search);
# its extent, 2.8e9 bytes, fits an anonymous mapping that is never touched.
UNDECIDED_SIZES = [14] * 8
UNDECIDED_STRIDES = [21285731, 18894729, 25335912, 20733911, 33401258, 31859633, 32623136, 29514989]


def _random_strides(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(2**31, 2**32) for _ in range(n)]


HOSTILE = (
    [(ISSUE_SIZES, ISSUE_STRIDES)]
    + [([n] * 8, _random_strides(seed, 8)) for n in (4, 6, 8, 10, 12, 14) for seed in (1, 2)]
    + [([16] * 7 + [15], _random_strides(seed, 8)) for seed in (3, 4)]
    + [([84] * 5, _random_strides(5, 5)), ([23] * 7, _random_strides(6, 7)), ([40] * 6, _random_strides(7, 6)),
       ([1625] * 3, _random_strides(8, 3)), ([255] * 4, _random_strides(9, 4)),
       ([65535, 65537], _random_strides(10, 2)), ([2**31 - 1, 2], [2**32 - 1, 2**32 - 2]),
       ([3, 5, 7, 11, 13, 17, 19, 23], _random_strides(11, 8)),
       ([2] * 8, [2**32 - 1 - k for k in range(8)]), ([15] * 8, [2**32 - 1 - 2 * k for k in range(8)]),
       ([300, 300, 300, 150], _random_strides(12, 4)), ([65535, 32768, 2], _random_strides(13, 3)),
       (UNDECIDED_SIZES, UNDECIDED_STRIDES)]
)


@contextlib.contextmanager
def bounds(half_vectors: int, nodes: int) -> Iterator[None]:
    """Run the analysis with other work bounds (to reach each stage on small inputs)."""
    saved = _overlap.MAX_HALF_VECTORS, _overlap.MAX_SEARCH_NODES
    _overlap.MAX_HALF_VECTORS, _overlap.MAX_SEARCH_NODES = half_vectors, nodes
    try:
        yield
    finally:
        _overlap.MAX_HALF_VECTORS, _overlap.MAX_SEARCH_NODES = saved


def packed_by_enumeration(sizes: list[int], strides: list[int]) -> bool:
    offs = np.sort(element_offsets_np(sizes, strides))
    return bool(np.array_equal(offs, np.arange(offs.size)))


# -- exact against brute force ------------------------------------------------------------


@st.composite
def small_cases(draw):
    """Up to 8 dimensions and a few thousand elements, strides small or sharing a big factor."""
    rank = draw(st.integers(1, 8))
    sizes = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank).filter(lambda s: math.prod(s) <= 4096))
    scale = draw(st.sampled_from([1, 1, 1, 7, 2**20 + 3, 2**31 - 1]))
    strides = [scale * draw(st.integers(0, 40)) for _ in sizes]
    return sizes, [min(s, 2**32 - 1) for s in strides]


@st.composite
def large_stride_cases(draw):
    """Strides in [2**31, 2**32); the last one sometimes a small combination of the others."""
    rank = draw(st.integers(2, 8))
    sizes = draw(st.lists(st.integers(2, 4), min_size=rank, max_size=rank).filter(lambda s: math.prod(s) <= 6000))
    strides = [draw(st.integers(2**31, 2**32 - 1)) for _ in sizes]
    if draw(st.booleans()):
        coeffs = [draw(st.integers(-3, 3)) for _ in sizes[:-1]]
        combo = abs(sum(c * s for c, s in zip(coeffs, strides)))
        if 0 < combo < 2**32:
            strides[-1] = combo
    return sizes, strides


@given(st.one_of(small_cases(), large_stride_cases()))
def test_decided_answers_match_brute_force(case):
    sizes, strides = case
    truth = overlaps(sizes, strides)
    # These are all within the default bound, so the answer is always decided.
    assert _overlap.overlap_status(sizes, strides) is truth
    d = BufferTensorDesc("uint8", sizes, strides, directml_limits=False)
    assert d.has_overlap is truth
    assert d.is_packed is packed_by_enumeration(sizes, strides)
    assert d.is_padded is (not truth and d.last_offset + 1 > d.element_count)


@given(st.one_of(small_cases(), large_stride_cases()))
def test_each_stage_is_exact_on_its_own(case):
    sizes, strides = case
    truth = overlaps(sizes, strides)
    # Only the cheap proofs and reductions: exact or undecided.
    with bounds(0, 0):
        assert _overlap.overlap_status(sizes, strides) in (None, truth)
    # Cheap proofs, then the depth-first search alone.
    with bounds(0, 10**9):
        assert _overlap.overlap_status(sizes, strides) is truth
    # Each search alone on the whole problem, without the cheap steps.
    dims = sorted((s, n - 1) for n, s in zip(sizes, strides) if n > 1 and s > 0)
    if len(dims) >= 2 and len(dims) == sum(n > 1 for n in sizes):
        first, second, _ = _overlap._halves(dims)
        assert _overlap._meet_in_the_middle(first, second) is truth
        with bounds(0, 10**9):
            assert _overlap._search(dims) is truth


@given(st.lists(st.integers(1, 6), min_size=1, max_size=6).filter(lambda s: math.prod(s) <= 2000), st.data())
def test_is_packed_matches_enumeration(sizes, data):
    # Permuted packed strides are packed; nudging one stride breaks it.
    order = data.draw(st.permutations(range(len(sizes))))
    strides = [0] * len(sizes)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= sizes[axis]
    k = data.draw(st.integers(0, len(sizes) - 1))
    strides[k] += data.draw(st.sampled_from([0, 0, 1, -1]))
    strides = [max(s, 0) for s in strides]
    assert BufferTensorDesc("uint8", sizes, strides, directml_limits=False).is_packed is packed_by_enumeration(sizes, strides)


@given(st.lists(st.integers(2, 2**31), min_size=3, max_size=3).filter(lambda s: math.prod(s) < 2**32),
       st.lists(st.integers(1, 2**32 - 1), min_size=3, max_size=3))
def test_three_dimensions_are_always_decided(sizes, strides):
    assert _overlap.overlap_status(sizes, strides) is not None


def test_past_the_bound_the_answer_is_none_and_has_overlap_is_true():
    assert _overlap.overlap_status(UNDECIDED_SIZES, UNDECIDED_STRIDES) is None
    d = BufferTensorDesc("uint8", UNDECIDED_SIZES, UNDECIDED_STRIDES, directml_limits=False)
    assert d.has_overlap is True
    assert d.is_padded is False
    assert d.is_packed is False


def test_the_reported_descriptor_is_answered_conservatively():
    assert _overlap.overlap_status(ISSUE_SIZES, ISSUE_STRIDES) in (None, True)
    assert BufferTensorDesc("uint8", ISSUE_SIZES, ISSUE_STRIDES, directml_limits=False).has_overlap


# -- what the entry points do past the bound ------------------------------------------------


@pytest.fixture
def undecided():
    d = BufferTensorDesc("uint8", UNDECIDED_SIZES, UNDECIDED_STRIDES, directml_limits=False)
    mm = mmap.mmap(-1, d.total_tensor_size_in_bytes)  # anonymous: pages stay untouched
    mm[:4] = b"\x11\x22\x33\x44"
    yield d, mm
    mm.close()


def test_scatter_refuses_a_destination_not_proven_distinct(undecided):
    d, mm = undecided
    with pytest.raises(DescriptorError, match="could not be proven distinct within the overlap analysis") as info:
        ds.scatter(np.broadcast_to(np.uint8(7), d.sizes), d, mm)
    assert "\n" not in str(info.value)
    assert mm[:4] == b"\x11\x22\x33\x44" and mm[d.last_offset] == 0


def test_copy_tensor_refuses_a_destination_not_proven_distinct(undecided):
    d, mm = undecided
    with pytest.raises(DescriptorError, match="dst_desc's element offsets could not be proven distinct"):
        ds.copy_tensor(mm, d, mm, d)
    assert mm[:4] == b"\x11\x22\x33\x44"


def test_view_is_read_only_when_not_proven_distinct(undecided):
    d, mm = undecided
    v = ds.view(mm, d)
    assert not v.flags.writeable
    assert v[0, 0, 0, 0, 0, 0, 0, 0] == 0x11
    del v


def test_explain_and_describe_say_not_ruled_out(capsys):
    d = BufferTensorDesc("uint8", UNDECIDED_SIZES, UNDECIDED_STRIDES, directml_limits=False)
    text = d.explain()
    assert text.splitlines()[0].endswith(": overlap not ruled out")
    assert "overlap not ruled out (offsets not proven distinct within the analysis bound)" in text
    assert cli_main(["describe", "--dtype", "uint8", "--sizes", ",".join(map(str, UNDECIDED_SIZES)),
                     "--strides", ",".join(map(str, UNDECIDED_STRIDES))]) == 0
    out = capsys.readouterr().out
    assert "\noverlap:           not ruled out\n" in out
    assert "\npacked:            no\n" in out and "\npadded:            no\n" in out


def test_decided_overlap_keeps_its_own_message():
    d = BufferTensorDesc("uint8", [2, 3], [1, 1])
    with pytest.raises(DescriptorError, match="has overlapping elements"):
        ds.scatter(np.zeros((2, 3), np.uint8), d, bytearray(16))


# -- bounded time, cheap checks first ---------------------------------------------------------

_TIMING = r"""
import json, sys, time, numpy as np, dmlstride as ds
from dmlstride import cli

def cpu(f):
    t = time.thread_time(); w = time.perf_counter()
    try:
        f()
    except BufferError:
        pass
    return time.thread_time() - t, time.perf_counter() - w

worst = {}
for sizes, strides in json.loads(sys.argv[1]):
    make = lambda: ds.BufferTensorDesc("uint8", sizes, strides, directml_limits=False)
    calls = {
        "has_overlap": lambda d: d.has_overlap, "is_packed": lambda d: d.is_packed,
        "is_padded": lambda d: d.is_padded, "layout": lambda d: d.layout,
        "explain": lambda d: d.explain(),
        "scatter": lambda d: ds.scatter(np.broadcast_to(np.uint8(0), d.sizes), d, bytearray(16)),
        "copy_tensor": lambda d: ds.copy_tensor(bytes(16), d, bytearray(16), d),
        "view": lambda d: ds.view(bytearray(16), d),
    }
    for name, call in calls.items():
        # The least of three tries on fresh descriptors: a busy machine can only
        # slow a try down, while a slow analysis is slow every time.
        t = min(cpu(lambda d=make(): call(d)) for _ in range(3))
        if t > worst.get(name, (0, 0)):
            worst[name] = t
print(json.dumps(worst))
"""


def test_every_entry_point_is_quick_on_hostile_descriptors(tmp_path):
    # CPU time of this thread, the least of three tries, so a busy machine does not fail the
    # test; a hang hits the timeout.
    res = run_python(["-c", _TIMING, json.dumps(HOSTILE)], tmp_path)
    assert res.returncode == 0, res.stderr
    worst = json.loads(res.stdout)
    assert set(worst) == {"has_overlap", "is_packed", "is_padded", "layout", "explain", "scatter",
                          "copy_tensor", "view"}
    for name, (cpu, _wall) in worst.items():
        assert cpu < 0.1 * TIME_SCALE, f"{name} took {cpu:.3f} s of CPU"


def test_the_reported_scatter_refuses_the_buffer_at_once(tmp_path):
    code = (
        "import time, numpy as np, dmlstride as ds\n"
        f"d = ds.BufferTensorDesc('uint8', {ISSUE_SIZES}, strides={ISSUE_STRIDES}, directml_limits=False)\n"
        "t = time.thread_time()\n"
        "try:\n"
        "    ds.scatter(np.broadcast_to(np.uint8(0), d.sizes), d, bytearray(16))\n"
        "except BufferError as e:\n"
        "    print(type(e).__name__, time.thread_time() - t, e)\n"
    )
    res = run_python(["-c", code], tmp_path)
    assert res.returncode == 0, res.stderr
    name, seconds, message = res.stdout.split(" ", 2)
    assert name == "BufferError" and "too small" in message
    assert float(seconds) < 0.01 * TIME_SCALE  # the bounds check runs before any overlap analysis


def test_describe_on_the_reported_descriptor_finishes(tmp_path):
    res = run_python(["-m", "dmlstride", "describe", "--dtype", "uint8",
                      "--sizes", ",".join(map(str, ISSUE_SIZES)),
                      "--strides", ",".join(map(str, ISSUE_STRIDES)), "--no-directml-limits"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "overlap" in res.stdout and "packed:" in res.stdout


@pytest.mark.parametrize("sizes,strides", HOSTILE[:8])
def test_hostile_analysis_is_conservative(sizes, strides):
    # Whatever the answer, a destination the analysis did not clear is never written.
    status = _overlap.overlap_status(sizes, strides)
    d = BufferTensorDesc("uint8", sizes, strides, directml_limits=False)
    assert d.has_overlap is (status is not False)
    assert not (d.is_padded and d.has_overlap)
