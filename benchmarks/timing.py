"""The timing method both benchmark scripts share.

A sample is ``number`` back-to-back calls (enough to last ``min_sample_ns``),
timed together; every contestant gives one sample per repeat, in an order
shuffled afresh every repeat (from a fixed seed, so runs are repeatable), so
that none always runs first or after the same neighbour; results are medians
over the repeats with the interquartile range as the spread.  (A rotating
order, A B C, B C A, C A B, keeps every contestant after the same neighbour
but once: whichever followed the memcpy limit found its data pushed out of L3
by it, and an A/A run of two identical contestants read 10-20% apart.)
Back-to-back calls let each contestant find its own buffers where its
previous call left them (in cache when they fit), as a loop over batches
does; every contestant is timed the same way.  Before each sample the caller sleeps for a millisecond, so that
no contestant's helper threads (dmlstride's workers watch for the next job
for up to 50 microseconds after each one) are still running when the next
contestant starts.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from typing import Any, Callable


SETTLE_S = 0.001
"""Pause before each sample: longer than any contestant's threads stay awake after a call."""

ORDER_SEED = 20261124
"""Seed of the order in which contestants take their samples."""


def sample(fn: Callable[[], Any], number: int) -> float:
    """Nanoseconds per call, over ``number`` back-to-back calls."""
    start = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return (time.perf_counter_ns() - start) / number


def calls_per_sample(fn: Callable[[], Any], min_sample_ns: int) -> int:
    """Calls that make a sample last at least ``min_sample_ns``."""
    once = min(sample(fn, 1) for _ in range(2))
    return max(1, min(100_000, math.ceil(min_sample_ns / max(once, 1.0))))


def interleaved(fns: dict[Any, Callable[[], Any]], number: dict[Any, int], repeats: int,
                before: Callable[[Any], None] | None = None) -> dict[Any, list[float]]:
    """Time every callable once per repeat, in an order shuffled every repeat."""
    keys = list(fns)
    samples: dict[Any, list[float]] = {k: [] for k in keys}
    order = random.Random(ORDER_SEED)
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            for key in order.sample(keys, len(keys)):
                if before is not None:
                    before(key)
                time.sleep(SETTLE_S)
                samples[key].append(sample(fns[key], number[key]))
    finally:
        gc.enable()
    return samples


def spread(xs: list[float]) -> float:
    """Interquartile range over the median (NaN for fewer than 4 values)."""
    if len(xs) < 4:
        return float("nan")
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return (q3 - q1) / statistics.median(xs)


def summarise(samples: dict[Any, list[float]]) -> tuple[dict[Any, float], dict[Any, float]]:
    """Median and spread of each contestant's samples."""
    return ({k: statistics.median(v) for k, v in samples.items()},
            {k: spread(v) for k, v in samples.items()})
