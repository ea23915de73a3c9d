"""4-bit writes on two threads that share bytes but not nibbles.

Two tensors may interleave nibble by nibble in one buffer; a kernel writing
one must leave every nibble of the other as the other thread wrote it, even
while both run at once with the GIL released.  The byte updates where a
tensor holds only one of the two nibbles are atomic, so no nibble is lost.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import _engine


def _nibbles(buf) -> np.ndarray:
    b = np.frombuffer(bytes(buf), np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).ravel()


def _at_once(*calls) -> None:
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call):
        try:
            barrier.wait()
            call()
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("trial", range(30))
def test_two_scatters_interleaved_nibble_by_nibble(trial):
    # Nibbles 0, 3, 6, ... (offset 0) and 2, 5, 8, ... (offset 1 byte): every
    # byte holds one nibble of one tensor and, in most, one of the other.
    n = 2**20
    d = ds.BufferTensorDesc("uint4", [n], strides=[3])
    buf = bytearray(d.total_tensor_size_in_bytes + 1)
    a = np.full(n, 5, np.uint8)
    b = np.full(n, 10, np.uint8)
    _at_once(lambda: ds.scatter(a, d, buf, offset=0, check_alignment=False),
             lambda: ds.scatter(b, d, buf, offset=1, check_alignment=False))
    nib = _nibbles(buf)
    assert (nib[np.arange(n) * 3] == 5).all()
    assert (nib[2 + np.arange(n) * 3] == 10).all()


@pytest.mark.parametrize("trial", range(20))
def test_staged_copy_and_a_scatter_into_its_gaps(trial):
    # Rows of 32 nibbles every 33: the copy (packed source, staged through
    # bytes) writes runs whose edge bytes share a nibble with the gaps, which
    # the scatter fills at the same time.
    rows = 1 << 16
    dst = ds.BufferTensorDesc("uint4", [rows, 32], strides=[33, 1])
    src = ds.BufferTensorDesc("uint4", [rows, 32])
    gaps = ds.BufferTensorDesc("uint4", [rows - 1], strides=[33])
    assert _engine.Plan(src.sizes, src.effective_strides, dst.effective_strides, 4).describe()["mode"] \
        == "staged"
    rng = np.random.default_rng(trial)
    source = rng.integers(0, 256, src.total_tensor_size_in_bytes, dtype=np.uint8).tobytes()
    buf = bytearray(dst.total_tensor_size_in_bytes)
    fill = np.full(rows - 1, 9, np.uint8)
    _at_once(lambda: ds.copy_tensor(source, src, buf, dst, check_alignment=False),
             lambda: ds.scatter(fill, gaps, buf, offset=16, check_alignment=False))
    nib = _nibbles(buf)
    r, c = np.divmod(np.arange(rows * 32), 32)
    assert (nib[r * 33 + c] == _nibbles(source)[: rows * 32]).all()
    assert (nib[32 + 33 * np.arange(rows - 1)] == 9).all()
