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
