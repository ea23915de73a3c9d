"""Threads: the kernels release the GIL, stay correct under concurrency, and
hold every buffer export for the whole call.

* 8 Python threads gathering, scattering and copying disjoint regions of one
  buffer at once give exactly the single-threaded result.
* While one long kernel runs, other Python threads keep running (the GIL is
  released), and two large gathers overlap in wall time.
* A buffer cannot be resized or closed while a kernel runs on it.
* Two threads writing disjoint nibbles that share bytes lose none of them.
* ``DMLSTRIDE_NUM_THREADS`` sets the default kernel thread count.
"""

from __future__ import annotations

import hashlib
import mmap
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import dmlstride
from dmlstride import BufferTensorDesc, _engine, copy_tensor, gather, scatter
from subproc import run_python

N_THREADS = 8


@pytest.fixture
def one_kernel_thread() -> Iterator[None]:
    """Run each kernel call on one thread, so timings measure Python-level concurrency."""
    saved = dmlstride.get_num_threads()
    dmlstride.set_num_threads(1)
    try:
        yield
    finally:
        dmlstride.set_num_threads(saved)


def _run_together(fns: list[Callable[[], None]]) -> list[BaseException]:
    """Run every function in its own thread, released together by a barrier."""
    barrier = threading.Barrier(len(fns))
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> None:
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # reported to the test below
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


# ---------------------------------------------------------------------------------------
# correctness under concurrency

# Each region of the shared buffer: an input tensor stored column-major (so the
# gather transposes), then an output area written by scatter, then one written
# by copy_tensor, each padded so that neighbouring regions share no bytes.
REGION_SHAPES = [
    ("small", "float32", (96, 80)),      # below the engine's threading threshold
    ("large", "uint16", (512, 384)),     # above it: OpenMP teams from 8 Python threads
    ("nibbles", "int4", (64, 50)),       # the 4-bit path, which touches shared bytes
]


def _region_layout(dt: str, shape: tuple[int, int]):
    rows, cols = shape
    src = BufferTensorDesc(dt, [rows, cols], [1, rows])              # column-major input
    dst = BufferTensorDesc.from_layout(dt, [rows, cols], "HW", row_pitch_alignment=64)
    cpy = BufferTensorDesc(dt, [rows, cols], [1, rows + 3])          # padded column-major
    parts = []
    at = 0
    for d in (src, dst, cpy):
        parts.append(at)
        at += -(-d.total_tensor_size_in_bytes // 64) * 64 + 64
    return (src, dst, cpy), parts, at


@pytest.mark.parametrize("name,dt,shape", REGION_SHAPES, ids=[r[0] for r in REGION_SHAPES])
def test_eight_threads_disjoint_regions_match_single_thread(name, dt, shape):
    (src, dst, cpy), (o_src, o_dst, o_cpy), region = _region_layout(dt, shape)
    rng = np.random.default_rng(2024)
    initial = rng.integers(0, 256, size=region * N_THREADS, dtype=np.uint8)

    def work(buf: np.ndarray, i: int) -> None:
        base = i * region
        values = gather(buf, src, offset=base + o_src)
        if dt == "int4":
            values = (values.astype(np.int16) * (i % 3 - 1)).clip(-8, 7).astype(np.int8)
        else:
            values = values[::-1].copy()
        scatter(values, dst, buf, offset=base + o_dst)
        copy_tensor(buf, dst, buf, cpy, src_offset=base + o_dst, dst_offset=base + o_cpy)

    expected = initial.copy()
    for i in range(N_THREADS):
        work(expected, i)
    # The single-threaded result really moved data.
    assert not np.array_equal(expected, initial)

    for _ in range(5):
        shared = initial.copy()
        errors = _run_together([lambda i=i: work(shared, i) for i in range(N_THREADS)])
        assert errors == []
        np.testing.assert_array_equal(shared, expected)


def test_threads_gathering_one_source_concurrently():
    """Many threads reading the same region at once all get the same answer."""
    desc = BufferTensorDesc("float32", [300, 200], [1, 300])
    src = np.random.default_rng(7).standard_normal(300 * 200).astype(np.float32)
    expected = src.reshape(200, 300).T
    results: list[np.ndarray] = [np.empty(0)] * N_THREADS

    def read(i: int) -> None:
        for _ in range(10):
            results[i] = gather(src, desc)

    assert _run_together([lambda i=i: read(i) for i in range(N_THREADS)]) == []
    for r in results:
        np.testing.assert_array_equal(r, expected)


# ---------------------------------------------------------------------------------------
# the GIL is released

def _long_transpose(mib: int) -> tuple[np.ndarray, BufferTensorDesc]:
    n = int((mib << 20) ** 0.5)
    desc = BufferTensorDesc("uint8", [n, n], [1, n])
    total = desc.total_tensor_size_in_bytes
    src = np.tile(np.arange(251, dtype=np.uint8), total // 251 + 1)[:total]
    return src, desc


def test_python_threads_run_while_a_kernel_runs(one_kernel_thread):
    """A spinning Python thread makes progress in the middle of one long gather.

    If the kernel held the GIL, no bytecode of another thread could run between
    the call's start and end.
    """
    src, desc = _long_transpose(64)
    out = np.empty(desc.sizes, np.uint8)
    stamps: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        gather(src, desc, out=out)
        t1 = time.perf_counter()
    finally:
        stop.set()
        spinner.join()
    margin = (t1 - t0) * 0.2
    inside = [s for s in stamps if t0 + margin < s < t1 - margin]
    assert t1 - t0 > 0.005, "the gather was too short to observe"
    assert len(inside) > 100, f"only {len(inside)} spinner steps during a {t1 - t0:.3f}s gather"
    np.testing.assert_array_equal(out[:3, :3], src.reshape(desc.sizes).T[:3, :3])


def test_two_gathers_overlap_in_time(one_kernel_thread):
    """Short gathers in one thread complete while a long gather runs in another."""
    src, desc = _long_transpose(64)
    out = np.empty(desc.sizes, np.uint8)
    small = BufferTensorDesc("uint8", [256, 256], [1, 256])
    small_src = np.arange(256 * 256, dtype=np.uint32).astype(np.uint8)
    done: list[float] = []
    window: list[float] = []
    stop = threading.Event()

    def short_ones() -> None:
        while not stop.is_set():
            gather(small_src, small)
            done.append(time.perf_counter())

    def long_one() -> None:
        window.append(time.perf_counter())
        gather(src, desc, out=out)
        window.append(time.perf_counter())
        stop.set()

    assert _run_together([long_one, short_ones]) == []
    t0, t1 = window
    margin = (t1 - t0) * 0.2
    inside = [s for s in done if t0 + margin < s < t1 - margin]
    assert len(inside) >= 5, f"{len(inside)} short gathers finished during a {t1 - t0:.3f}s gather"


# Two concurrent gathers must take less than this many times one.
LIMIT = 1.6
# A reference ratio at or above this means the machine had no second core to give.
BUSY = 1.3


def _best(fn: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _concurrency_ratio(one: Callable[[int], None], repeat: int = 3) -> float:
    """Best wall time of two concurrent calls over the best time of one."""
    single = _best(lambda: one(0), repeat)

    def both() -> None:
        assert _run_together([lambda: one(0), lambda: one(1)]) == []

    return _best(both, repeat) / single


def test_two_concurrent_gathers_take_less_than_twice_one(one_kernel_thread):
    """Wall time of two concurrent 64 MiB transposing gathers, against one.

    Each gather runs on one kernel thread, so only Python-level concurrency
    can make two of them finish in less than twice the time of one.  The best
    of a few attempts counts.  On a shared machine the second core may be
    busy: a GIL-free reference workload (SHA-256 of a large buffer) is timed
    right after each attempt; when even the reference could not use two cores,
    the gathers must scale at least about as well as it did at that moment.
    """
    src, desc = _long_transpose(64)
    outs = [np.empty(desc.sizes, np.uint8) for _ in range(2)]
    blob = bytes(16 << 20)

    def one_gather(i: int) -> None:
        gather(src, desc, out=outs[i])

    def one_hash(i: int) -> None:
        hashlib.sha256(blob).digest()

    # Each attempt times the gathers and then the reference, so a pair of
    # ratios comes from (nearly) the same moment of a machine whose load changes.
    pairs: list[tuple[float, float | None]] = []
    for _ in range(6):
        ratio = _concurrency_ratio(one_gather)
        if ratio < LIMIT:
            pairs.append((ratio, None))
            break
        reference = _concurrency_ratio(one_hash)
        pairs.append((ratio, reference))
        if reference >= BUSY and ratio <= reference * 1.15:
            # No free second core at that moment (another process held it): the
            # gathers scaled like a GIL-free reference workload, which a
            # GIL-holding gather could not do.
            break
    print(f"concurrency ratios (gathers, reference): {pairs}")
    assert np.array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0][:2, :3], src.reshape(desc.sizes[::-1])[:3, :2].T)
    ratio, reference = pairs[-1]
    assert ratio < LIMIT or (reference is not None and reference >= BUSY and ratio <= reference * 1.15), (
        f"two concurrent gathers take {ratio:.2f}x the time of one, a GIL-free reference "
        f"{reference:.2f}x at the same moment (attempts {pairs}): the gathers do not run concurrently"
    )


# ---------------------------------------------------------------------------------------
# buffer exports are held for the whole call

def _while_running(call: Callable[[], None], probe: Callable[[], bool]) -> tuple[bool, float, float, float]:
    """Run ``call`` in a thread; from this thread, poll ``probe`` until it reports True.

    Returns (seen, when, call_start, call_end).
    """
    window: list[float] = []

    def run() -> None:
        window.append(time.perf_counter())
        call()
        window.append(time.perf_counter())

    worker = threading.Thread(target=run)
    seen, when = False, 0.0
    worker.start()
    while worker.is_alive():
        if probe():
            seen, when = True, time.perf_counter()
            break
    worker.join()
    return seen, when, window[0], window[1] if len(window) > 1 else float("nan")


def _bytearray_probe(buf: bytearray, errors: list[str]) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            buf.extend(b"\0")          # harmless when it succeeds: past the tensor
        except BufferError as exc:
            errors.append(str(exc))
            return True
        return False

    return probe


@pytest.mark.parametrize("operation", ["gather", "scatter", "copy_tensor"])
def test_bytearray_cannot_be_resized_during_a_call(one_kernel_thread, operation):
    n = 4096
    desc = BufferTensorDesc("uint8", [n, n], [1, n])
    buf = bytearray(desc.total_tensor_size_in_bytes + 64)
    buf[: n * n] = np.tile(np.arange(251, dtype=np.uint8), n * n // 251 + 1)[: n * n].tobytes()
    values = np.ascontiguousarray(np.frombuffer(buf, np.uint8, count=n * n).reshape(n, n).T)
    other = bytearray(len(buf))
    errors: list[str] = []
    out = np.empty((n, n), np.uint8)
    if operation == "gather":
        call = lambda: gather(buf, desc, out=out)                     # noqa: E731
    elif operation == "scatter":
        call = lambda: scatter(values, desc, buf)                     # noqa: E731
    else:
        call = lambda: copy_tensor(other, BufferTensorDesc("uint8", [n, n]), buf, desc)  # noqa: E731
    for _ in range(5):
        seen, when, t0, t1 = _while_running(call, _bytearray_probe(buf, errors))
        if seen:
            break
    assert seen, "the buffer could be resized throughout the call"
    assert t0 < when < t1
    assert errors and all("export" in e.lower() for e in errors), errors
    # Released afterwards: resizing works again.
    buf.extend(b"\0")
    if operation == "gather":
        assert np.array_equal(out, values)


def test_mmap_cannot_be_closed_during_a_call(one_kernel_thread):
    n = 4096
    desc = BufferTensorDesc("uint8", [n, n], [1, n])
    mm = mmap.mmap(-1, desc.total_tensor_size_in_bytes)
    try:
        pattern = np.tile(np.arange(251, dtype=np.uint8), n * n // 251 + 1)[: n * n]
        mm[: n * n] = pattern.tobytes()
        out = np.empty((n, n), np.uint8)
        close_errors: list[str] = []

        def probe() -> bool:
            try:
                mm.resize(len(mm))             # raises only while an export is held
            except BufferError:
                pass
            else:
                return False
            try:
                mm.close()
            except BufferError as exc:
                close_errors.append(str(exc))
                return True
            raise AssertionError("mmap closed while its buffer was exported")

        for _ in range(5):
            seen, when, t0, t1 = _while_running(lambda: gather(mm, desc, out=out), probe)
            if seen:
                break
        assert seen, "the mmap was never seen exported during the call"
        assert t0 < when < t1
        assert close_errors and "export" in close_errors[0]
        assert np.array_equal(out, np.ascontiguousarray(pattern.reshape(n, n).T))
        assert not mm.closed
    finally:
        mm.close()
    assert mm.closed


# -- the default thread count --------------------------------------------------------------


def _threads_at_import(tmp_path, value: str) -> tuple[int, bool, int]:
    """(get_num_threads(), built with threads, CPUs available) in a fresh interpreter."""
    code = ("import os, dmlstride as ds\n"
            "from dmlstride import _engine\n"
            "cpus = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()\n"
            "print(ds.get_num_threads(), int(_engine.have_threads()), cpus)")
    res = run_python(["-c", code], tmp_path, DMLSTRIDE_NUM_THREADS=value)
    assert res.returncode == 0, res.stderr
    n, have, cpus = res.stdout.split()
    return int(n), bool(int(have)), int(cpus)


@pytest.mark.parametrize("value,expect", [("1", 1), ("3", 3), (" 2 ", 2), ("\t3\n", 3), ("1024", 1024),
                                          ("5000", 1024), ("9" * 30, 1024),
                                          pytest.param("9" * 5000, 1024, id="5000-nines"),
                                          pytest.param("0" * 5000 + "3", 3, id="5000-zeros-3")])
def test_environment_sets_the_default_thread_count(tmp_path, value, expect):
    # Counts above the 1024 that set_num_threads accepts are capped there.
    n, have, _ = _threads_at_import(tmp_path, value)
    assert n == (expect if have else 1)


@pytest.mark.parametrize("value", ["", "0", "-2", "two", "1.5",
                                   # ASCII decimal digits only: not what int() also reads
                                   "1_0", "+3", "\u0663", "\u0661\u0660", "\uff13", "\u00a03\u00a0",
                                   "1e3", "0x10", pytest.param("-" + "9" * 5000, id="minus-5000-nines")])
def test_unusable_environment_values_fall_back_to_the_cpu_count(tmp_path, value):
    n, have, cpus = _threads_at_import(tmp_path, value)
    assert n == (max(1, cpus) if have else 1)


# ---------------------------------------------------------------------------------------
# 4-bit writes that share bytes but not nibbles: two tensors may interleave
# nibble by nibble in one buffer; the bytes where a kernel writes only one
# nibble are updated atomically, so no nibble of the other is lost.

def _nibbles(buf) -> np.ndarray:
    b = np.frombuffer(bytes(buf), np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).ravel()


@pytest.mark.parametrize("trial", range(30))
def test_two_scatters_interleaved_nibble_by_nibble(trial):
    # Nibbles 0, 3, 6, ... (offset 0) and 2, 5, 8, ... (offset 1 byte): every
    # byte holds one nibble of one tensor and, in most, one of the other.
    n = 2**20
    d = BufferTensorDesc("uint4", [n], strides=[3])
    buf = bytearray(d.total_tensor_size_in_bytes + 1)
    a = np.full(n, 5, np.uint8)
    b = np.full(n, 10, np.uint8)
    assert _run_together([lambda: scatter(a, d, buf, offset=0, check_alignment=False),
                          lambda: scatter(b, d, buf, offset=1, check_alignment=False)]) == []
    nib = _nibbles(buf)
    assert (nib[np.arange(n) * 3] == 5).all()
    assert (nib[2 + np.arange(n) * 3] == 10).all()


@pytest.mark.parametrize("trial", range(20))
def test_staged_copy_and_a_scatter_into_its_gaps(trial):
    # Rows of 32 nibbles every 33: the copy (packed source, staged through
    # bytes) writes runs whose edge bytes share a nibble with the gaps, which
    # the scatter fills at the same time.
    rows = 1 << 16
    dst = BufferTensorDesc("uint4", [rows, 32], strides=[33, 1])
    src = BufferTensorDesc("uint4", [rows, 32])
    gaps = BufferTensorDesc("uint4", [rows - 1], strides=[33])
    plan = _engine.Plan(src.sizes, src.effective_strides, dst.effective_strides, 4)
    assert plan.describe()["mode"] == "staged"
    rng = np.random.default_rng(trial)
    source = rng.integers(0, 256, src.total_tensor_size_in_bytes, dtype=np.uint8).tobytes()
    buf = bytearray(dst.total_tensor_size_in_bytes)
    fill = np.full(rows - 1, 9, np.uint8)
    assert _run_together([lambda: copy_tensor(source, src, buf, dst, check_alignment=False),
                          lambda: scatter(fill, gaps, buf, offset=16, check_alignment=False)]) == []
    nib = _nibbles(buf)
    r, c = np.divmod(np.arange(rows * 32), 32)
    assert (nib[r * 33 + c] == _nibbles(source)[: rows * 32]).all()
    assert (nib[32 + 33 * np.arange(rows - 1)] == 9).all()
