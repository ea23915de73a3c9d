"""The gather output cache: freed outputs of at least 1 MiB are reused.

Every result is checked against numpy; the cache's bookkeeping is checked
through ``output_cache_info()``.
"""

import gc
import os
import sys
import threading

import numpy as np
import pytest

import dmlstride as ds
from subproc import run_python

MIB = 1 << 20


@pytest.fixture
def cache():
    """A clean cache with the default limit, restored afterwards."""
    old = ds.set_output_cache(256 * MIB)
    yield
    ds.set_output_cache(old)


def _source(nbytes, seed):
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def _transposed(rows, cols):
    """A uint32 column-major (rows x cols) tensor and its numpy row-major copy."""
    desc = ds.BufferTensorDesc("uint32", (rows, cols), strides=(1, rows))
    buf = _source(desc.total_tensor_size_in_bytes, rows + cols)
    expect = np.ndarray((rows, cols), np.uint32, buffer=buf, strides=(4, 4 * rows)).copy()
    return buf, desc, expect


def test_freed_output_is_kept_and_reused(cache):
    buf, desc, expect = _transposed(1024, 512)  # 2 MiB
    out = ds.gather(buf, desc)
    assert out.flags.owndata and out.flags.c_contiguous and out.flags.writeable
    assert out.base is None
    np.testing.assert_array_equal(out, expect)
    address = out.ctypes.data
    assert ds.output_cache_info()[0] == 0
    del out
    gc.collect()
    held, limit = ds.output_cache_info()
    assert held >= 2 * MIB and limit == 256 * MIB
    # The next output of that size takes the block: same memory, correct bytes.
    buf2, desc2, expect2 = _transposed(1024, 512)
    buf2[:] = _source(buf2.size, 99)
    expect2 = np.ndarray((1024, 512), np.uint32, buffer=buf2, strides=(4, 4096)).copy()
    again = ds.gather(buf2, desc2)
    assert again.ctypes.data == address
    assert ds.output_cache_info()[0] == 0
    np.testing.assert_array_equal(again, expect2)


def test_new_output_says_whether_its_memory_is_new(cache):
    # The engine writes new memory with ordinary stores (its pages fault in
    # through the cache anyway) and reused blocks with streaming stores.
    from dmlstride import _engine

    first, fresh = _engine.new_output((1024, 512), np.uint32)
    assert fresh
    address = first.ctypes.data
    del first
    gc.collect()
    again, fresh = _engine.new_output((1024, 512), np.uint32)
    assert again.ctypes.data == address and not fresh
    small, fresh = _engine.new_output((16,), np.uint32)
    assert fresh


def test_reused_block_is_fully_overwritten(cache):
    # A cached block that held other data never leaks into the next output.
    desc = ds.BufferTensorDesc("uint8", (2048, 1024))
    first = ds.gather(np.full(desc.total_tensor_size_in_bytes, 0xEE, np.uint8), desc)
    del first
    src = _source(desc.total_tensor_size_in_bytes, 5)
    second = ds.gather(src, desc)
    assert second.tobytes() == src.tobytes()


def test_small_outputs_are_not_cached(cache):
    buf, desc, expect = _transposed(256, 256)  # 256 KiB
    out = ds.gather(buf, desc)
    np.testing.assert_array_equal(out, expect)
    del out
    assert ds.output_cache_info()[0] == 0


def test_a_much_larger_block_is_not_used_for_a_small_output(cache):
    big = ds.gather(*_transposed(2048, 1024)[:2])  # 8 MiB
    del big
    held = ds.output_cache_info()[0]
    assert held >= 8 * MIB
    buf, desc, expect = _transposed(1024, 512)  # 2 MiB: the 8 MiB block stays cached
    out = ds.gather(buf, desc)
    np.testing.assert_array_equal(out, expect)
    assert ds.output_cache_info()[0] == held


def test_limit_bounds_what_is_kept(cache):
    ds.set_output_cache(5 * MIB)
    outs = [ds.gather(*_transposed(1024, 512)[:2]) for _ in range(4)]  # 4 x 2 MiB
    del outs
    held, limit = ds.output_cache_info()
    assert limit == 5 * MIB
    assert 2 * MIB <= held <= 5 * MIB


def test_at_most_eight_blocks_are_kept(cache):
    outs = [ds.gather(*_transposed(512, 512)[:2]) for _ in range(12)]  # 12 x 1 MiB
    del outs
    held = ds.output_cache_info()[0]
    assert 8 * MIB <= held < 9 * MIB


def test_zero_limit_turns_the_cache_off_and_frees_blocks(cache):
    out = ds.gather(*_transposed(1024, 512)[:2])
    del out
    assert ds.output_cache_info()[0] > 0
    assert ds.set_output_cache(0) == 256 * MIB
    assert ds.output_cache_info() == (0, 0)
    buf, desc, expect = _transposed(1024, 512)
    out = ds.gather(buf, desc)
    np.testing.assert_array_equal(out, expect)
    del out
    assert ds.output_cache_info() == (0, 0)


@pytest.mark.parametrize("new_shape", [(100,), (300_000,), (1024, 1024)])
def test_outputs_can_be_resized(cache, new_shape):
    buf, desc, expect = _transposed(1024, 512)
    out = ds.gather(buf, desc)
    out.resize(new_shape, refcheck=False)
    flat = expect.reshape(-1)
    n = min(flat.size, out.size)
    np.testing.assert_array_equal(out.reshape(-1)[:n], flat[:n])
    if out.size > flat.size:
        assert not out.reshape(-1)[flat.size:].any()  # numpy zero-fills the growth
    del out


@pytest.mark.parametrize("rows", [256, 1023, 1024, 4097])
def test_cached_outputs_start_on_a_page_boundary(cache, rows):
    # malloc puts large blocks 16 bytes past a page; the handler's blocks
    # start on a page (fresh, reused and resized alike), so vector stores
    # never split a cache line.
    buf, desc, expect = _transposed(rows, 1024)
    out = ds.gather(buf, desc)
    assert out.ctypes.data % 4096 == 0
    np.testing.assert_array_equal(out, expect)
    del out
    again = ds.gather(buf, desc)
    assert again.ctypes.data % 4096 == 0
    np.testing.assert_array_equal(again, expect)
    again.resize((3 * rows, 1024), refcheck=False)
    assert again.ctypes.data % 64 == 0
    np.testing.assert_array_equal(again[:rows], expect)
    assert not again[rows:].any()
    again.resize((rows // 3, 1024), refcheck=False)
    np.testing.assert_array_equal(again, expect[: rows // 3])
    del again


def test_outputs_behave_like_numpy_arrays(cache):
    buf, desc, expect = _transposed(1024, 512)
    out = ds.gather(buf, desc)
    out += 1
    np.testing.assert_array_equal(out, expect + 1)
    copied = out.copy()
    pickled = __import__("pickle").loads(__import__("pickle").dumps(out))
    np.testing.assert_array_equal(copied, pickled)
    view = out[::2]
    del out
    gc.collect()
    # A view keeps the block alive: nothing is cached while it exists.
    assert ds.output_cache_info()[0] == 0
    np.testing.assert_array_equal(view, (expect + 1)[::2])
    del view
    assert ds.output_cache_info()[0] >= 2 * MIB


def test_outputs_freed_in_other_threads(cache):
    buf, desc, expect = _transposed(1024, 512)
    errors = []

    def work():
        try:
            for _ in range(20):
                out = ds.gather(buf, desc)
                if not np.array_equal(out, expect):
                    errors.append("mismatch")
                del out
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ds.output_cache_info()[0] <= 256 * MIB


def test_gather_with_out_does_not_touch_the_cache(cache):
    buf, desc, expect = _transposed(1024, 512)
    out = np.empty((1024, 512), np.uint32)
    ds.gather(buf, desc, out=out)
    np.testing.assert_array_equal(out, expect)
    del out
    assert ds.output_cache_info()[0] == 0


@pytest.mark.parametrize("value", [-1, sys.maxsize + 1])
def test_bad_limits_are_refused(value):
    before = ds.output_cache_info()
    with pytest.raises(ValueError, match="output cache limit"):
        ds.set_output_cache(value)
    assert ds.output_cache_info() == before


@pytest.mark.parametrize("value", [1.5, "1", True, None])
def test_non_integer_limits_are_refused(value):
    before = ds.output_cache_info()
    with pytest.raises(TypeError, match="max_bytes"):
        ds.set_output_cache(value)
    assert ds.output_cache_info() == before


@pytest.mark.parametrize("env,limit", [
    ("0", 0), ("1048576", MIB), (" 1048576\n", MIB), ("junk", 256 * MIB), ("-5", 256 * MIB),
    # ASCII decimal digits only; a huge value of any length is capped at sys.maxsize.
    ("1_048_576", 256 * MIB), ("+1048576", 256 * MIB), ("\u0661\u0660\u0664\u0668\u0665\u0667\u0666", 256 * MIB),
    pytest.param("9" * 5000, sys.maxsize, id="5000-nines"), (str(sys.maxsize + 1), sys.maxsize),
    pytest.param("0" * 5000 + "1048576", MIB, id="5000-zeros-1048576"),
])
def test_environment_sets_the_default_limit(env, limit, tmp_path):
    res = run_python(["-c", "import dmlstride as ds; print(ds.output_cache_info()[1])"], tmp_path,
                      DMLSTRIDE_OUTPUT_CACHE=env)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout) == limit


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_uses_and_frees_outputs(cache, tmp_path):
    buf, desc, expect = _transposed(1024, 512)
    out = ds.gather(buf, desc)
    del out  # one block cached in the parent, inherited by the child
    code = (
        "import os, sys, numpy as np, dmlstride as ds\n"
        "desc = ds.BufferTensorDesc('float32', (1024, 512), strides=(1, 1024))\n"
        "buf = np.arange(desc.element_count, dtype=np.float32)\n"
        "a = ds.gather(buf, desc); del a\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ok = all(np.array_equal(ds.gather(buf, desc), buf.reshape(512, 1024).T) for _ in range(3))\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    res = run_python(["-W", "ignore", "-c", code], tmp_path)
    assert res.returncode == 0, res.stderr
