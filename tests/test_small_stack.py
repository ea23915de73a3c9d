"""Every kernel path on a thread with a 32 KiB stack (the smallest Python allows).

The kernels' staging tiles, offset tables and 4-bit staging blocks live in
heap memory kept per thread, never on the caller's C stack, so a copy made on
a thread started with ``threading.stack_size(32 * 1024)`` must not overflow
it.  Each case runs in a fresh interpreter (a stack overflow is a segfault
that must fail the test, not end the run), with 1 and 2 kernel threads, and
its result is compared with numpy.
"""

import pytest

from subproc import run_script

CASES = {
    # 4-bit, nibbles on both sides, packed in different orders (NHWC -> NCHW).
    "nibble_copy": """
        src_d = ds.BufferTensorDesc.from_layout("uint4", [2, 64, 64, 64], "NHWC")
        dst_d = ds.BufferTensorDesc("uint4", [2, 64, 64, 64])
        src = rng.integers(0, 256, src_d.total_tensor_size_in_bytes, dtype=np.uint8)
        dst = bytearray(dst_d.total_tensor_size_in_bytes)
        expect = pack(unpack(src)[nibble_index(src_d)])
        run(lambda: ds.copy_tensor(src, src_d, dst, dst_d))
        assert bytes(dst) == expect.tobytes()
    """,
    # 4-bit gather from a packed channels-last order: unpack into a byte stage.
    "nibble_gather": """
        d = ds.BufferTensorDesc.from_layout("uint4", [2, 64, 64, 64], "NHWC")
        src = rng.integers(0, 256, d.total_tensor_size_in_bytes, dtype=np.uint8)
        got = run(lambda: ds.gather(src, d))
        assert same(got.ravel(), unpack(src)[nibble_index(d)])
    """,
    # 4-bit scatter into a packed channels-last order: pack from a byte stage.
    "nibble_scatter": """
        d = ds.BufferTensorDesc.from_layout("uint4", [2, 64, 64, 64], "NHWC")
        values = rng.integers(0, 16, d.sizes, dtype=np.uint8)
        dst = bytearray(d.total_tensor_size_in_bytes)
        nibbles = np.zeros(2 * len(dst), np.uint8)
        nibbles[nibble_index(d)] = values.ravel()
        run(lambda: ds.scatter(values, d, dst))
        assert bytes(dst) == pack(nibbles).tobytes()
    """,
    # 8-D scrambled order, float32: the blocked transpose (offset tables + tiles).
    "block_gather": """
        sizes = [2, 4, 8, 2, 4, 16, 4, 8]
        d = ds.BufferTensorDesc.from_layout("float32", sizes, (3, 0, 6, 1, 7, 4, 2, 5))
        assert plan_mode(sizes, d.effective_strides, packed(sizes), 32) == "block"
        src = rng.integers(0, 256, d.total_tensor_size_in_bytes, dtype=np.uint8)
        got = run(lambda: ds.gather(src, d))
        assert same(got, view(src, d))
    """,
    "block_scatter": """
        sizes = [2, 4, 8, 2, 4, 16, 4, 8]
        d = ds.BufferTensorDesc.from_layout("float32", sizes, (3, 0, 6, 1, 7, 4, 2, 5))
        assert plan_mode(sizes, packed(sizes), d.effective_strides, 32) == "block"
        values = rng.standard_normal(sizes).astype(np.float32)
        dst = bytearray(d.total_tensor_size_in_bytes)
        run(lambda: ds.scatter(values, d, dst))
        assert same(view(np.frombuffer(dst, np.uint8), d), values)
    """,
    # A plain 2-D transpose: register micro-kernels and the staging tile.
    "tile": """
        d = ds.BufferTensorDesc("float32", [300, 1030], strides=[1, 300])
        assert plan_mode([300, 1030], [1, 300], [1030, 1], 32) == "tile"
        src = rng.integers(0, 256, d.total_tensor_size_in_bytes, dtype=np.uint8)
        got = run(lambda: ds.gather(src, d))
        assert same(got, view(src, d))
    """,
    # Streaming transposes: whole rows through an L1 tile, and line strips.
    "tile_streaming": """
        _engine._set_stream_min_total(0)
        for dtype, c, hw in (("uint8", 16, 40 * 40), ("float32", 64, 1024), ("uint16", 64, 1000)):
            nchw = ds.BufferTensorDesc(dtype, [1, c, hw, 1])
            nhwc = ds.BufferTensorDesc.from_layout(dtype, [1, c, hw, 1], "NHWC")
            src = rng.integers(0, 256, nhwc.total_tensor_size_in_bytes, dtype=np.uint8)
            dst = bytearray(nchw.total_tensor_size_in_bytes)
            run(lambda: ds.copy_tensor(src, nhwc, dst, nchw))
            assert same(view(np.frombuffer(dst, np.uint8), nchw), view(src, nhwc))
    """,
    # Three planes interleaved into pixels, and back.
    "interleave": """
        d = ds.BufferTensorDesc.from_layout("float32", [4, 3, 128, 128], "NHWC")
        values = rng.standard_normal(d.sizes).astype(np.float32)
        dst = bytearray(d.total_tensor_size_in_bytes)
        run(lambda: ds.scatter(values, d, dst))
        assert same(view(np.frombuffer(dst, np.uint8), d), values)
        assert same(run(lambda: ds.gather(dst, d)), values)
    """,
    # Contiguous copy, broadcast fill and plain strided runs.
    "plain": """
        d = ds.BufferTensorDesc("float32", [256, 1024])
        src = rng.integers(0, 256, d.total_tensor_size_in_bytes, dtype=np.uint8)
        assert same(run(lambda: ds.gather(src, d)), view(src, d))
        b = ds.BufferTensorDesc("uint16", [512, 1024], strides=[1, 0])
        src = rng.integers(0, 256, b.total_tensor_size_in_bytes, dtype=np.uint8)
        assert same(run(lambda: ds.gather(src, b)), view(src, b))
        s = ds.BufferTensorDesc("float64", [256, 128], strides=[257, 2])
        src = rng.integers(0, 256, s.total_tensor_size_in_bytes, dtype=np.uint8)
        assert same(run(lambda: ds.gather(src, s)), view(src, s))
    """,
    # Conversions: a cast with per-channel scale and bias (NHWC uint8 -> NCHW float32),
    # the float16 path, and a blocked 4-bit dequantization.
    "convert": """
        src_d = ds.BufferTensorDesc.from_layout("uint8", [2, 3, 64, 64], "NHWC")
        dst_d = ds.BufferTensorDesc("float32", [2, 3, 64, 64])
        src = rng.integers(0, 256, src_d.total_tensor_size_in_bytes, dtype=np.uint8)
        dst = bytearray(dst_d.total_tensor_size_in_bytes)
        scale = np.array([0.5, 0.25, 2.0], np.float32)
        bias = np.array([-1.0, 3.0, 0.5], np.float32)
        run(lambda: ds.convert(src, src_d, dst, dst_d, scale=scale, bias=bias, axis=1))
        x = view(src, src_d).astype(np.float32)
        assert same(view(np.frombuffer(dst, np.uint8), dst_d), x * scale[:, None, None] + bias[:, None, None])
        h_d = ds.BufferTensorDesc("float16", [2, 3, 64, 64], strides=[12288, 1, 192, 3])
        h = bytearray(h_d.total_tensor_size_in_bytes)
        run(lambda: ds.convert(dst, dst_d, h, h_d))
        assert same(view(np.frombuffer(h, np.uint8), h_d), view(np.frombuffer(dst, np.uint8), dst_d).astype(np.float16))
    """,
    "dequantize": """
        d = ds.BufferTensorDesc("int4", [64, 256])
        raw = rng.integers(0, 256, d.total_tensor_size_in_bytes, dtype=np.uint8)
        scale = (rng.random((64, 8)) + 0.5).astype(np.float32)
        got = run(lambda: ds.dequantize(raw, d, scale, axis=1, block_size=32))
        q = unpack(raw)[: 64 * 256].astype(np.int16)
        q = np.where(q > 7, q - 16, q).reshape(64, 256).astype(np.float32)
        assert same(got, q * np.repeat(scale, 32, axis=1))
    """,
}

PRELUDE = """
import sys, threading
import numpy as np
import dmlstride as ds
from dmlstride import _engine

ds.set_num_threads(int(sys.argv[1]))
rng = np.random.default_rng(5)


def run(call):
    box = {}

    def body():
        try:
            box["value"] = call()
        except BaseException as exc:  # reported by the main thread
            box["error"] = exc

    threading.stack_size(32 * 1024)
    t = threading.Thread(target=body)
    t.start()
    threading.stack_size(0)
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def packed(sizes):
    out, run_ = [], 1
    for n in reversed(sizes):
        out.insert(0, run_)
        run_ *= n
    return out


def plan_mode(sizes, src, dst, bits):
    return _engine.Plan(list(sizes), list(src), list(dst), bits).describe()["mode"]


def view(buf, d):
    dt = np.dtype(ds.numpy_dtype(d.data_type))
    return np.ndarray(d.sizes, dt, buffer=buf, strides=[s * dt.itemsize for s in d.effective_strides])


def same(a, b):
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def unpack(b):
    b = np.asarray(b, np.uint8)
    return np.stack([b & 15, b >> 4], axis=1).ravel()


def pack(n):
    return (n[0::2] & 15) | ((n[1::2] & 15) << 4)


def nibble_index(d):
    idx = np.zeros(d.sizes, np.int64)
    for axis, (n, s) in enumerate(zip(d.sizes, d.effective_strides)):
        shape = [1] * len(d.sizes)
        shape[axis] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    return idx.ravel()

"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_path_on_a_32_kib_stack(case, threads, tmp_path):
    printed = run_script(PRELUDE, CASES[case], tmp_path, args=(str(threads),))
    assert printed == ""
