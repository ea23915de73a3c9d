"""The kernel thread pool: a call wakes only the helpers it wants, and lowering
the thread count lets the surplus workers exit.

Raising the count to 1024 once used to leave 1023 workers that every later
call woke with a broadcast (a 1 MiB gather went from about 60 us to about
480 us per call, for good).  Each case runs in a fresh interpreter so that
the pool starts empty.
"""

import os

import pytest

from dmlstride import _engine
from subproc import WAIT_FOR, run_script

pytestmark = pytest.mark.skipif(not _engine.have_threads(), reason="built without threads")

PRELUDE = WAIT_FOR + """
import os, statistics, time
import numpy as np
import dmlstride as ds
from dmlstride import _engine

desc = ds.BufferTensorDesc("float32", [512, 512])      # 1 MiB, split over threads
buf = np.arange(512 * 512, dtype=np.float32).view(np.uint8)
out = np.empty((512, 512), np.float32)


def per_call_us(calls=400):
    times = []
    for _ in range(calls):
        t = time.perf_counter_ns()
        ds.gather(buf, desc, out=out)
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


def os_threads():
    return len(os.listdir("/proc/self/task"))
"""


def _run(body, tmp_path):
    return run_script(PRELUDE, body, tmp_path)


def test_surplus_workers_exit_when_the_count_is_lowered(tmp_path):
    _run("""
        ds.set_num_threads(64)
        ds.gather(buf, desc, out=out)
        assert _engine.pool_workers() == 63, _engine.pool_workers()
        ds.set_num_threads(2)
        assert wait_for(lambda: _engine.pool_workers() == 1), _engine.pool_workers()
        # A later call still uses its helper, and the result is right.
        ds.gather(buf, desc, out=out)
        assert _engine.pool_workers() == 1
        assert out.tobytes() == buf.tobytes()
        ds.set_num_threads(1)
        assert wait_for(lambda: _engine.pool_workers() == 0), _engine.pool_workers()
    """, tmp_path)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc/self/task")
def test_os_thread_count_drops_back(tmp_path):
    _run("""
        ds.set_num_threads(2)
        ds.gather(buf, desc, out=out)
        base = os_threads()
        ds.set_num_threads(256)
        ds.gather(buf, desc, out=out)
        assert os_threads() >= base + 200, (base, os_threads())
        ds.set_num_threads(2)
        assert wait_for(lambda: os_threads() <= base), (base, os_threads())
    """, tmp_path)


def test_a_call_costs_the_same_after_raising_and_lowering_the_count(tmp_path):
    # Generous margins for a shared machine: the old pool was 8x slower after.
    out = _run("""
        ds.set_num_threads(2)
        per_call_us(50)
        before = per_call_us()
        base = os_threads() if os.path.isdir("/proc/self/task") else None
        ds.set_num_threads(1024)
        ds.gather(buf, desc, out=out)
        ds.set_num_threads(2)
        if base is None:
            time.sleep(1)
        else:
            wait_for(lambda: os_threads() <= base)
        per_call_us(50)
        after = min(per_call_us(), per_call_us())
        print(f"before {before:.1f} us, after {after:.1f} us")
        assert after <= 1.5 * before + 20, (before, after)
    """, tmp_path)
    print(out)
