"""quantize and dequantize against ONNX's reference implementation and the written formulas.

ONNX's ``ReferenceEvaluator`` runs QuantizeLinear / DequantizeLinear (opset
21) for the 8- and 16-bit types, per tensor, per axis and blocked; the 4-bit
types are checked against the formulas in tests/reference.py
(``saturate(rint(x / scale) + zero_point)``, ``(x - zero_point) * scale``).
"""

from __future__ import annotations

import numpy as np
import pytest

from dmlstride import BufferTensorDesc, dequantize, quantize

from reference import (
    INT_RANGES,
    TYPES,
    dequantize_values,
    gather_np,
    order_strides,
    quantize_values,
    random_bytes,
    scatter_np,
    touched_bytes,
)

onnx = pytest.importorskip("onnx", reason="the onnx package (the 'test' extra) provides the reference")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ONNX_TYPES = {
    "INT8": TensorProto.INT8, "UINT8": TensorProto.UINT8,
    "INT16": TensorProto.INT16, "UINT16": TensorProto.UINT16, "INT32": TensorProto.INT32,
}
SIZES = (4, 6, 10)


def _model(op: str, xtype: int, ytype: int, xshape: tuple[int, ...], sshape: tuple[int, ...], ztype: int | None,
           axis: int, block_size: int, stype: int = TensorProto.FLOAT) -> ReferenceEvaluator:
    inputs = [helper.make_tensor_value_info("x", xtype, xshape), helper.make_tensor_value_info("s", stype, sshape)]
    names = ["x", "s"]
    if ztype is not None:
        inputs.append(helper.make_tensor_value_info("z", ztype, sshape))
        names.append("z")
    node = helper.make_node(op, names, ["y"], axis=axis, block_size=block_size)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", ytype, xshape)])
    return ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))


def _params(mode: str, sizes: tuple[int, ...], axis: int, qtype: str, seed: int):
    """(scale, zero point, block_size) for one granularity."""
    rng = np.random.default_rng(seed)
    block = 0
    if mode == "tensor":
        shape: tuple[int, ...] = ()
    elif mode == "axis":
        shape = (sizes[axis],)
    else:
        block = 3
        shape = tuple(-(-n // block) if k == axis else n for k, n in enumerate(sizes))
    scale = (rng.uniform(0.01, 2.0, size=shape) * rng.choice([-1, 1], size=shape)).astype(np.float32)
    lo, hi = INT_RANGES[qtype]
    zp = rng.integers(lo, hi + 1, size=shape).astype(TYPES[qtype].dtype)
    return scale, zp, block


@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("qtype", ["INT8", "UINT8", "INT16", "UINT16"])
def test_quantize_matches_onnx(qtype, axis, mode):
    ax = axis % len(SIZES)
    scale, zp, block = _params(mode, SIZES, ax, qtype, seed=ax + 7)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(SIZES) * rng.choice([1, 50, 1e4], size=SIZES)).astype(np.float32)
    # Halves and saturation (within int32: ONNX's reference casts rint(x / scale) to int32 first).
    x.reshape(-1)[:4] = [0.5, -0.5, 1e6, -1e6]
    desc = BufferTensorDesc(qtype, SIZES, strides=order_strides(SIZES, (2, 0, 1), [1, 0, 2]))
    before = random_bytes(3, desc.total_tensor_size_in_bytes + 32)
    buf = bytearray(before)
    quantize(x, desc, buf, scale, zp, axis=axis, block_size=block, offset=16)
    ref = _model("QuantizeLinear", TensorProto.FLOAT, ONNX_TYPES[qtype], SIZES, scale.shape, ONNX_TYPES[qtype],
                 axis, block)
    with np.errstate(invalid="ignore", over="ignore"):
        expected = ref.run(None, {"x": x, "s": scale, "z": zp})[0]
    got = gather_np(buf, qtype, SIZES, desc.effective_strides, 16)
    assert got.tolist() == expected.tolist()
    assert got.tolist() == quantize_values(x, qtype, scale, zp, axis, block).tolist()
    for i in set(range(len(buf))) - touched_bytes(qtype, SIZES, desc.effective_strides, 16):
        assert buf[i] == before[i]


@pytest.mark.parametrize("dtype", ["FLOAT32", "FLOAT16"])
@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked"])
@pytest.mark.parametrize("axis", [0, 2, -2])
@pytest.mark.parametrize("qtype", ["INT8", "UINT8", "INT16", "UINT16", "INT32"])
def test_dequantize_matches_onnx(qtype, axis, mode, dtype):
    ax = axis % len(SIZES)
    scale, zp, block = _params(mode, SIZES, ax, qtype if qtype != "INT32" else "INT16", seed=ax)
    if dtype == "FLOAT16":
        scale = scale.astype(np.float16)  # ONNX's output type is the scale's type
    q = np.frombuffer(random_bytes(5, int(np.prod(SIZES)) * TYPES[qtype].dtype.itemsize),
                      TYPES[qtype].dtype).reshape(SIZES)
    desc = BufferTensorDesc(qtype, SIZES, strides=order_strides(SIZES, (1, 2, 0), [0, 3, 1]))
    raw = bytearray(random_bytes(6, desc.total_tensor_size_in_bytes))
    scatter_np(q, raw, qtype, SIZES, desc.effective_strides)
    zero = None if qtype == "INT32" else zp.astype(TYPES[qtype].dtype)
    got = dequantize(bytes(raw), desc, scale, zero, axis=axis, block_size=block, dtype=dtype)
    stype = TensorProto.FLOAT16 if dtype == "FLOAT16" else TensorProto.FLOAT
    ref = _model("DequantizeLinear", ONNX_TYPES[qtype], stype, SIZES, scale.shape,
                 None if zero is None else ONNX_TYPES[qtype], axis, block, stype)
    feeds = {"x": q, "s": scale} if zero is None else {"x": q, "s": scale, "z": zero}
    with np.errstate(over="ignore"):
        expected = ref.run(None, feeds)[0]
        formula = dequantize_values(q, scale, zero, axis, block, dtype)
    assert got.dtype == TYPES[dtype].dtype
    assert got.tobytes() == expected.astype(got.dtype).tobytes()
    assert got.tobytes() == formula.tobytes()


@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked"])
@pytest.mark.parametrize("qtype", ["INT4", "UINT4"])
def test_four_bit_follow_the_formulas(qtype, mode):
    """quantize writes nibbles (the other nibble kept); dequantize reads them back."""
    sizes = (3, 7, 5)
    axis = 1
    scale, zp, block = _params(mode, sizes, axis, qtype, seed=2)
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(sizes) * 8).astype(np.float32)
    x.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 100.0, -100.0, 0.0]
    desc = BufferTensorDesc(qtype, sizes, strides=[1, 3 * 5 + 2, 3])   # odd strides: shared bytes
    before = random_bytes(8, desc.total_tensor_size_in_bytes)
    buf = bytearray(before)
    quantize(x, desc, buf, scale, zp, axis=axis, block_size=block)
    expected = quantize_values(x, qtype, scale, zp, axis, block)
    ref = bytearray(before)
    scatter_np(expected, ref, qtype, sizes, desc.effective_strides)
    assert bytes(buf) == bytes(ref)
    lo, hi = INT_RANGES[qtype]
    assert expected.min() >= lo and expected.max() <= hi
    # NaN quantizes to the zero point; +-inf saturate (sign of the scale decides which end).
    z0 = np.asarray(zp).reshape(-1)[0]
    assert expected.reshape(-1)[0] == z0
    for dtype in ("FLOAT32", "FLOAT16"):
        got = dequantize(bytes(buf), desc, scale, zp, axis=axis, block_size=block, dtype=dtype)
        assert got.tobytes() == dequantize_values(expected, scale, zp, axis, block, dtype).tobytes()


def test_formulas_by_hand_int4():
    """The written rules on a few values: halves to even, saturation, zero point added after rint."""
    desc = BufferTensorDesc("int4", [8])
    buf = bytearray(16)
    quantize([0.5, 1.5, 2.5, -0.5, -2.5, 20.0, -20.0, 3.0], desc, buf, 1.0, 1)
    q = gather_np(buf, "INT4", (8,), None)
    assert q.tolist() == [1, 3, 3, 1, -1, 7, -8, 4]
    assert dequantize(buf, desc, 0.25, 1).tolist() == [0.0, 0.5, 0.5, 0.0, -0.5, 1.5, -2.25, 0.75]
    udesc = BufferTensorDesc("uint4", [4])
    ubuf = bytearray(b"\xff" * 16)
    quantize([0.0, 7.4, -1.0, 100.0], udesc, ubuf, 2.0, 8)
    assert list(ubuf[:2]) == [0x8 | (0xC << 4), 0x8 | (0xF << 4)] and ubuf[2:] == b"\xff" * 14


def test_division_is_in_float32():
    """x / scale in float32 (not float64): chosen so the two round differently at a half."""
    x = np.float32(40.120842)
    s = np.float32(1.3154374)   # x / s is 30.5 in float32 (rint: 30), 30.50000014 in float64 (rint: 31)
    assert x / s == np.float32(30.5) and np.float64(x) / np.float64(s) > 30.5
    buf = bytearray(16)
    quantize([x], BufferTensorDesc("int8", [1]), buf, s)
    assert buf[0] == 30


def test_quantize_from_an_aliasing_array():
    """The float32 source lives in the destination buffer itself: read from a copy first."""
    buf = np.zeros(8, np.float32)
    buf[:4] = [1.0, 2.0, 3.0, 4.0]
    src = buf[:4]
    quantize(src, BufferTensorDesc("uint8", [4]), buf, 0.5)
    assert buf.view(np.uint8)[:4].tolist() == [2, 4, 6, 8]


def test_dequantize_out():
    desc = BufferTensorDesc("uint8", [2, 2])
    out = np.full((2, 2), 7, np.float16)
    res = dequantize(bytes([1, 2, 3, 4]), desc, [1.0, 0.5], [1, 0], axis=1, dtype="float16", out=out)
    assert res is out
    assert out.tolist() == [[0.0, 1.0], [2.0, 2.0]]


def test_a_block_longer_than_the_axis_is_the_whole_axis():
    desc = BufferTensorDesc("uint8", [2, 3])
    raw = bytes([1, 2, 3, 4, 5, 6]) + bytes(10)
    scale = np.array([[0.5], [2.0]], np.float32)
    for block in (3, 4, 2**50):
        got = dequantize(raw, desc, scale, axis=1, block_size=block)
        assert got.tolist() == [[0.5, 1.0, 1.5], [8.0, 10.0, 12.0]]


def test_large_blocked_int4_with_threads():
    """Enough elements to be split between threads (nibble destinations stay on one thread)."""
    import dmlstride

    rows, cols, block = 64, 4096, 32
    rng = np.random.default_rng(9)
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    scale = (np.abs(w).reshape(rows, cols // block, block).max(axis=2) / 7 + 1e-3).astype(np.float32)
    zp = rng.integers(-2, 3, size=scale.shape).astype(np.int8)
    desc = BufferTensorDesc("int4", [rows, cols])
    threads = dmlstride.get_num_threads()
    try:
        dmlstride.set_num_threads(4)
        buf = bytearray(desc.total_tensor_size_in_bytes)
        quantize(w, desc, buf, scale, zp, axis=1, block_size=block)
        q = gather_np(buf, "INT4", (rows, cols), None)
        expected = quantize_values(w, "INT4", scale, zp, 1, block)
        assert q.tobytes() == expected.tobytes()
        got = dequantize(bytes(buf), desc, scale, zp, axis=1, block_size=block, dtype="float16")
        assert got.tobytes() == dequantize_values(expected, scale, zp, 1, block, "FLOAT16").tobytes()
    finally:
        dmlstride.set_num_threads(threads)


@pytest.mark.parametrize("block", [0, 32, 64, 96, 16])
@pytest.mark.parametrize("qtype", ["INT4", "UINT4"])
def test_contiguous_four_bit_rows_simd_and_scalar_agree(qtype, block):
    """Contiguous 4-bit rows (the one-pass SIMD rows take groups of 32 inside a block) of every
    length from 1 to 100, packed and padded (so rows start on a byte and mid-byte), per tensor
    or blocked along the row, to float32 and float16 (hardware and software), with the SIMD
    rows on and off, against the written formula."""
    from dmlstride import _convert
    from dmlstride import conversion

    rng = np.random.default_rng(9)
    lo, hi = INT_RANGES[qtype]
    hw_before = conversion._hardware_half()
    try:
        for w in range(1, 101):
            q = rng.integers(lo, hi + 1, size=(2, w)).astype(np.int8)
            shape = (2, -(-w // block)) if block else ()
            scale = rng.uniform(0.01, 2.0, size=shape).astype(np.float32)
            zp = rng.integers(lo, hi + 1, size=shape).astype(np.int8)
            for row_stride in (w, w + 1):
                nib = np.zeros(2 * row_stride + 34, np.uint8)
                for r in range(2):
                    nib[r * row_stride:r * row_stride + w] = q[r] & 0xF
                raw = (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()
                desc = BufferTensorDesc(qtype, [2, w], strides=[row_stride, 1])
                for dtype in ("FLOAT32", "FLOAT16"):
                    expected = dequantize_values(q, scale, zp, 1, block, dtype).tobytes()
                    for simd, hw in ((True, True), (True, False), (False, True)):
                        _convert.set_simd_rows(simd)
                        conversion._set_hardware_half(hw)
                        got = dequantize(raw, desc, scale, zp, axis=1, block_size=block, dtype=dtype)
                        assert got.tobytes() == expected, (w, row_stride, dtype, simd, hw)
    finally:
        _convert.set_simd_rows(True)
        conversion._set_hardware_half(hw_before)
