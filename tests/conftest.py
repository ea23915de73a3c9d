"""Shared test configuration.

Hypothesis profiles: ``dev`` (default, quick), ``ci`` (more examples).  Select
with ``HYPOTHESIS_PROFILE=ci``.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "dev",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def far_rows_through_l2_from_16_mib(monkeypatch):
    # Transposes whose source rows lie far apart go through the L2 buffers
    # from where they stream (2 MiB for four- and eight-byte values, 4 MiB
    # for one-byte ones, 8 MiB for two-byte ones); the tests of the paths
    # such copies take outside L2 pin the 16 MiB of closer rows.
    from dmlstride import _planner

    for name in ("TILE_L2_WIDE_MIN_TOTAL", "TILE_L2_FAR_BYTE_MIN_TOTAL", "TILE_L2_FAR_NARROW_MIN_TOTAL"):
        monkeypatch.setattr(_planner, name, _planner.TILE_L2_EARLY_MIN_TOTAL)


@pytest.fixture(autouse=True)
def large_l3_bounds(monkeypatch):
    # A few planner bounds hang on the size of the machine's L3
    # (_planner.L3_BOUNDS); the tests plan with those of a large L3 on every
    # machine, and the ones of a small L3 where they say so.  Likewise one
    # rule hangs on the processor (_planner.NT_ALIASED_ROWS_SLOW): off
    # unless a test says so.
    from dmlstride import _engine, _planner

    changed = _planner.NT_ALIASED_ROWS_SLOW
    monkeypatch.setattr(_planner, "NT_ALIASED_ROWS_SLOW", False)
    for name in _planner.L3_BOUNDS:
        value = _planner.l3_bound(name, small_l3=False)
        changed |= getattr(_planner, name) != value
        monkeypatch.setattr(_planner, name, value)
    if changed:   # (plans kept by descriptor, made under the others, dropped)
        _engine._set_stream_min_total(_planner.stream_min_total)


@pytest.fixture
def no_slabs(monkeypatch):
    # Copies that would go element by element go in slabs through a buffer
    # from SLAB_MIN_TOTAL bytes (tests/test_slabs.py); the tests of the
    # element-by-element plans and kernels keep them.  Setting the stream
    # threshold to what it is drops the plans held by descriptor, before and
    # after.
    from dmlstride import _engine, _planner

    monkeypatch.setattr(_planner, "SLAB_COPIES", False)
    _engine._set_stream_min_total(_planner.stream_min_total)
    yield
    monkeypatch.undo()
    _engine._set_stream_min_total(_planner.stream_min_total)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    # The engine's thread count, 1 and 2, for the test's copies.
    import dmlstride as ds

    before = ds.get_num_threads()
    ds.set_num_threads(request.param)
    yield request.param
    ds.set_num_threads(before)
