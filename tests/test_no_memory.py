"""Without memory for the kernels' staging buffers, a copy fails cleanly.

Each thread takes its staging memory from the heap on its first copy.  When
that allocation fails on the calling thread, the copy (or conversion) raises
``MemoryError`` before any byte of the destination changes; when it fails on a
pool worker, the worker leaves and the calling thread does the whole copy.

The failure is made exact, not provoked by exhausting memory (which also
starves the interpreter's own allocations at unpredictable points): a small
library preloaded into a fresh interpreter (tests/c/no_scratch.c) makes
``posix_memalign`` refuse requests of the staging arena's size while armed.
Skipped only where that cannot be done: no C compiler, not Linux, or under
AddressSanitizer (which must be the first library loaded).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccompiler import c_compiler
from subproc import WAIT_FOR, run_script

SHIM = Path(__file__).resolve().parent / "c" / "no_scratch.c"

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs LD_PRELOAD and glibc"),
    pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                       reason="AddressSanitizer must be the first preloaded library"),
]

PRELUDE = WAIT_FOR + """
import ctypes, os, sys
import numpy as np
import dmlstride as ds
from dmlstride import _engine

shim = ctypes.CDLL(os.environ["NO_SCRATCH_SHIM"])
EVERY_THREAD, WORKERS_ONLY = 1, 2
rng = np.random.default_rng(5)

def armed(mode, call, settled=lambda: True):
    # The call's exception message (None when it returned) and the number of
    # staging allocations refused meanwhile; the refusals stay armed until
    # settled() holds (a worker started by the call asks for its memory on
    # its own time).
    before = shim.no_scratch_refused()
    shim.no_scratch_arm(mode)
    try:
        call()
    except MemoryError as exc:
        error = str(exc)
    else:
        error = None
    finally:
        assert wait_for(settled)
        shim.no_scratch_arm(0)
    return error, shim.no_scratch_refused() - before

"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    cc = c_compiler()
    lib = tmp_path_factory.mktemp("shim") / "no_scratch.so"
    build = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                            str(SHIM), "-o", str(lib), "-ldl"],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    return lib


def run_case(body, shim, tmp_path):
    printed = run_script(PRELUDE, body, tmp_path, LD_PRELOAD=str(shim), NO_SCRATCH_SHIM=str(shim))
    assert printed == ""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_copy_without_staging_memory_raises_before_any_byte_moves(threads, shim, tmp_path):
    run_case(f"""
        ds.set_num_threads({threads})
        # A column-major float32 matrix: a transpose through staging tiles.
        d = ds.BufferTensorDesc("float32", [300, 1030], strides=[1, 300])
        values = rng.standard_normal(d.sizes).astype(np.float32)
        src = np.ascontiguousarray(values.T).tobytes()
        out = np.full(d.sizes, 7, np.float32)
        error, refused = armed(EVERY_THREAD, lambda: ds.gather(src, d, out=out))
        assert error == "no memory for the copy's staging buffers", error
        assert refused >= 1, refused
        assert (out == 7).all()
        packed = bytearray(d.total_tensor_size_in_bytes)
        error, refused = armed(EVERY_THREAD, lambda: ds.scatter(values, d, packed))
        assert error == "no memory for the copy's staging buffers", error
        assert not any(packed)
        # With memory, the same calls work.
        ds.gather(src, d, out=out)
        assert np.array_equal(out, values)
        ds.scatter(values, d, packed)
        assert bytes(packed) == src
    """, shim, tmp_path)


def test_a_conversion_without_staging_memory_raises_before_any_byte_moves(shim, tmp_path):
    run_case("""
        d = ds.BufferTensorDesc("float32", [64, 700])
        values = rng.standard_normal(d.sizes).astype(np.float32)
        out = np.full(d.sizes, 7, np.float16)
        error, refused = armed(EVERY_THREAD, lambda: ds.gather(values, d, dtype="float16", out=out))
        assert error == "no memory for the conversion's staging buffers; nothing was written", error
        assert refused >= 1, refused
        assert (out == 7).all()
        ds.gather(values, d, dtype="float16", out=out)
        assert np.array_equal(out, values.astype(np.float16))
    """, shim, tmp_path)


def test_a_worker_without_staging_memory_leaves_the_work_to_the_caller(shim, tmp_path):
    run_case("""
        ds.set_num_threads(2)
        d = ds.BufferTensorDesc("float32", [600, 1030], strides=[1, 600])
        values = rng.standard_normal(d.sizes).astype(np.float32)
        src = np.ascontiguousarray(values.T).tobytes()
        conv = ds.BufferTensorDesc("float32", [256, 1024])
        wide = rng.standard_normal(conv.sizes).astype(np.float32)
        # No worker has run yet: the first one starts inside the armed call,
        # finds no staging memory and leaves (the refusals stay armed until
        # it has); the caller copies everything.
        assert _engine.pool_workers() == 0
        out = np.zeros(d.sizes, np.float32)
        no_workers = lambda: _engine.pool_workers() == 0
        error, refused = armed(WORKERS_ONLY, lambda: ds.gather(src, d, out=out), no_workers)
        assert error is None, error
        assert refused >= 1, refused
        assert np.array_equal(out, values)
        half = np.zeros(conv.sizes, np.float16)
        error, refused = armed(WORKERS_ONLY, lambda: ds.gather(wide, conv, dtype="float16", out=half),
                               no_workers)
        assert error is None, error
        assert refused >= 1, refused
        assert np.array_equal(half, wide.astype(np.float16))
        # With memory, a worker starts, stays and shares the work.
        out[:] = 0
        ds.gather(src, d, out=out)
        assert np.array_equal(out, values)
        assert _engine.pool_workers() == 1, _engine.pool_workers()
    """, shim, tmp_path)
