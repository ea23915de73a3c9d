"""convert, gather with dtype/scale/bias, and the float16 paths, against tests/reference.py.

The reference computes ``x.astype(ct) * ct(scale) + ct(bias)`` with numpy and
rounds it by the written rules (floats to nearest even, integers half to
even, saturated, NaN to 0); sources and destinations are laid out and read
back with the reference's own byte arithmetic.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import pytest

import dmlstride
from dmlstride import BufferTensorDesc, DescriptorError, convert, gather

# The package's ``convert`` attribute is the function; the module holds the private switches.
convert_module = importlib.import_module("dmlstride.conversion")

from reference import (
    BYTE_TYPE_NAMES,
    FLOAT_NAMES,
    INT_RANGES,
    NIBBLE_RANGE,
    TYPE_NAMES,
    TYPES,
    convert_values,
    gather_np,
    order_strides,
    random_bytes,
    random_values,
    scatter_np,
    touched_bytes,
)

SIZES = (2, 3, 5)
#: An NHWC-like order with padding after each row and each plane.
SRC_ORDER, SRC_PADS = (0, 2, 1), [1, 2, 1]
#: A different destination order, also padded.
DST_ORDER, DST_PADS = (1, 0, 2), [2, 0, 3]
PARAMS = [
    pytest.param(None, None, None, id="plain"),
    pytest.param(0.7, -3.25, None, id="scalar"),
    pytest.param([1.5, -2.0, 0.3], [1, 2, 3.5], 1, id="per-axis"),
    pytest.param(-0.01, [100.0, -7.0], 0, id="per-axis-bias"),
]


@pytest.fixture(params=[True, False], ids=["hw-f16", "soft-f16"])
def half_path(request):
    """Run with the CPU's float16 instructions (where present) and with the software path."""
    before = convert_module._hardware_half()
    convert_module._set_hardware_half(request.param)
    yield request.param
    convert_module._set_hardware_half(before)


def source_values(name: str, sizes: tuple[int, ...], seed: int) -> np.ndarray:
    """Values that hit the edges: random bit patterns for integers, for floats a mix of
    large, small, exact halves, NaN and infinities."""
    info = TYPES[name]
    if name not in FLOAT_NAMES:
        return random_values(info, sizes, seed)
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(sizes) * rng.choice([1, 100, 1e5, 1e12, 1e40], size=sizes)
    flat = v.reshape(-1)
    specials = [np.nan, np.inf, -np.inf, 2.5, -0.5, 255.5, -128.5, 65519.0, 65520.0, 3e38, -0.0]
    flat[: len(specials)] = specials[: flat.size]
    with np.errstate(over="ignore"):
        return v.astype(info.dtype)


def strided_source(name: str, sizes: tuple[int, ...], seed: int = 3) -> tuple[bytes, BufferTensorDesc, np.ndarray]:
    vals = source_values(name, sizes, seed)
    desc = BufferTensorDesc(name, sizes, strides=order_strides(sizes, SRC_ORDER, SRC_PADS))
    raw = bytearray(random_bytes(seed, desc.total_tensor_size_in_bytes + 16))
    scatter_np(vals, raw, name, sizes, desc.effective_strides)
    return bytes(raw), desc, vals


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    if got.tobytes() != expected.tobytes():
        bad = np.flatnonzero(got.view(np.uint8).reshape(got.size, -1).tolist() !=
                             expected.view(np.uint8).reshape(expected.size, -1).tolist())
        raise AssertionError(f"first differences {got.reshape(-1)[:8]} vs {expected.reshape(-1)[:8]} ({bad[:4]})")


# ------------------------------------------------------------------------- every type pair


@pytest.mark.parametrize("dst", TYPE_NAMES)
@pytest.mark.parametrize("src", TYPE_NAMES)
@pytest.mark.parametrize(("scale", "bias", "axis"), PARAMS)
def test_gather_every_type_pair(src, dst, scale, bias, axis, half_path):
    raw, desc, vals = strided_source(src, SIZES)
    got = gather(raw, desc, dtype=dst, scale=scale, bias=bias, axis=axis)
    _same(got, convert_values(vals, src, dst, scale, bias, axis))


@pytest.mark.parametrize("dst", TYPE_NAMES)
@pytest.mark.parametrize("src", TYPE_NAMES)
def test_convert_every_type_pair_strided_to_strided(src, dst):
    """Padded source to padded destination: elements as the reference, every other byte kept."""
    raw, sdesc, vals = strided_source(src, SIZES, seed=5)
    ddesc = BufferTensorDesc(dst, SIZES, strides=order_strides(SIZES, DST_ORDER, DST_PADS))
    before = random_bytes(9, ddesc.total_tensor_size_in_bytes + 32)
    buf = bytearray(before)
    convert(raw, sdesc, buf, ddesc, scale=[2.0, 0.5, -1.0], bias=0.25, axis=1, dst_offset=16)
    expected = convert_values(vals, src, dst, [2.0, 0.5, -1.0], 0.25, 1)
    _same(gather_np(buf, dst, SIZES, ddesc.effective_strides, 16), expected)
    touched = touched_bytes(dst, SIZES, ddesc.effective_strides, 16)
    for i in set(range(len(buf))) - touched:
        assert buf[i] == before[i], f"byte {i} outside the destination's elements changed"
    if TYPES[dst].bits == 4:
        # The other nibble of each touched byte: a reference scatter into the old bytes agrees.
        ref = bytearray(before)
        scatter_np(expected, ref, dst, SIZES, ddesc.effective_strides, 16)
        assert bytes(buf) == bytes(ref)


# ------------------------------------------------------------------------- edges, spelled out


@pytest.mark.parametrize(
    ("src", "dst", "values", "expected"),
    [
        ("FLOAT32", "UINT8", [np.nan, np.inf, -np.inf, 255.5, 256.0, -0.5, 0.5, 1.5, 2.5, -1.0],
         [0, 255, 0, 255, 255, 0, 0, 2, 2, 0]),
        ("FLOAT32", "INT8", [np.nan, 127.5, -128.5, -129.0, 126.5, -2.5, 3.5], [0, 127, -128, -128, 126, -2, 4]),
        ("FLOAT32", "UINT4", [np.nan, 15.5, 16.0, -1.0, 7.5, 8.5], [0, 15, 15, 0, 8, 8]),
        ("FLOAT32", "INT4", [np.nan, 7.5, -8.5, -9.0, 6.5, -0.5], [0, 7, -8, -8, 6, 0]),
        ("FLOAT32", "INT16", [32767.5, -32768.5, 1e10, -np.inf], [32767, -32768, 32767, -32768]),
        ("FLOAT32", "UINT16", [65535.5, 65534.5, -3.0, np.nan], [65535, 65534, 0, 0]),
        ("FLOAT64", "INT32", [2147483647.5, -2147483648.5, 1e300, np.nan], [2**31 - 1, -(2**31), 2**31 - 1, 0]),
        ("FLOAT64", "UINT32", [4294967295.5, 4294967294.5, -1e300], [2**32 - 1, 2**32 - 2, 0]),
        ("FLOAT64", "INT64", [1e19, -1e19, 9.2e18, np.nan, 4503599627370497.0, 0.5, 1.5],
         [2**63 - 1, -(2**63), 9200000000000000000, 0, 4503599627370497, 0, 2]),
        ("FLOAT64", "UINT64", [1e20, 2.0**64, 2.0**63, -0.6, np.inf], [2**64 - 1, 2**64 - 1, 2**63, 0, 2**64 - 1]),
        ("FLOAT32", "FLOAT16", [65519.0, 65520.0, -65520.0, 1e-8, 2.0**-25, 3 * 2.0**-26],
         [65504.0, np.inf, -np.inf, 0.0, 0.0, 2.0**-24]),
        ("FLOAT64", "FLOAT16", [65519.99, 65520.0, 1 + 2.0**-11 + 2.0**-40, 2.0**-25 + 2.0**-60],
         [65504.0, np.inf, 1 + 2.0**-10, 2.0**-24]),
        ("FLOAT64", "FLOAT32", [1e39, -1e39, 1 + 2.0**-24, 1 + 3 * 2.0**-24], [np.inf, -np.inf, 1.0, 1 + 2.0**-22]),
        ("INT64", "INT64", [2**53 + 1, -(2**63), 2**63 - 1], [2**53, -(2**63), 2**63 - 1]),
        ("UINT64", "UINT64", [2**64 - 1, 2**53 + 1], [2**64 - 1, 2**53]),
        ("INT32", "FLOAT16", [70000, -65519, 2049], [np.inf, -65504.0, 2048.0]),
    ],
)
def test_edges_follow_the_written_rules(src, dst, values, expected):
    """NaN, infinities, halves, saturation and overflow, with the results spelled out."""
    sdt, ddt = TYPES[src].dtype, TYPES[dst].dtype
    x = np.array(values, dtype=object).astype(sdt) if src not in FLOAT_NAMES else np.array(values, dtype=sdt)
    desc = BufferTensorDesc(src, [x.size])
    got = gather(x, desc, dtype=dst)
    want = np.array(expected, dtype=object).astype(ddt) if dst not in FLOAT_NAMES else np.array(expected, ddt)
    assert got.tolist() == want.tolist()
    _same(got, convert_values(x, src, dst))


def test_plain_convert_is_the_formula_with_scale_1_bias_0():
    """Without scale and bias the arithmetic still runs: -0.0 + 0.0 is +0.0, as numpy gives."""
    x = np.array([-0.0, 1.0, -2.0], np.float32)
    got = gather(x, BufferTensorDesc("float32", [3]), dtype="float32")
    assert np.signbit(got).tolist() == [False, False, True]
    expected = x.astype(np.float32) * np.float32(1) + np.float32(0)
    assert got.tobytes() == expected.tobytes()


def test_no_fused_multiply_add():
    """x * s + b rounds twice: with values chosen so a fused multiply-add would differ."""
    x = np.float32(1 + 2.0**-12)
    s = np.float32(1 + 2.0**-12)
    b = np.float32(-(1 + 2.0**-11))
    # Exact x * s = 1 + 2**-11 + 2**-24, rounds to 1 + 2**-11 (ties to even), so the result is 0;
    # fused, the result would be 2**-24.
    got = gather(np.array([x]), BufferTensorDesc("float32", [1]), scale=s, bias=b)
    assert got[0] == x * s + b == 0.0


def test_scale_rounds_to_the_compute_type_once():
    """A Python float scale is rounded to float32 for float32 arithmetic, not used in double."""
    x = np.array([3, 0, 0, 0], np.uint8)  # a tensor's buffer range is a multiple of 4 bytes
    got = gather(x, BufferTensorDesc("uint8", [1]), dtype="float64", scale=0.1)
    assert got[0] == np.float64(3) * np.float64(0.1)  # float64 arithmetic: dst is FLOAT64
    got32 = gather(x, BufferTensorDesc("uint8", [1]), dtype="float32", scale=0.1)
    assert got32[0] == np.float32(3) * np.float32(0.1)


# ------------------------------------------------------------------------- layouts


def test_image_preprocessing_nhwc_uint8_to_nchw_float32():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(2, 5, 8, 3), dtype=np.uint8)  # NHWC in memory
    desc = BufferTensorDesc.from_layout("uint8", [2, 3, 5, 8], "NHWC")
    scale = np.array([1 / 58.395, 1 / 57.12, 1 / 57.375], np.float32)
    bias = -np.array([123.675, 116.28, 103.53], np.float32) * scale
    got = gather(img, desc, dtype="float32", scale=scale, bias=bias, axis=1)
    nchw = img.transpose(0, 3, 1, 2)
    expected = nchw.astype(np.float32) * scale[:, None, None] + bias[:, None, None]
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dst", ["FLOAT32", "FLOAT16", "INT8", "UINT4"])
def test_broadcast_source(dst):
    """A zero-stride source expands: every row repeats the one stored row."""
    row = np.array([1.25, -3.5, 200.0, 7.0], np.float32)
    desc = BufferTensorDesc("float32", [3, 4], strides=[0, 1])
    got = gather(row, desc, dtype=dst, scale=0.5)
    _same(got, convert_values(np.broadcast_to(row, (3, 4)), "FLOAT32", dst, 0.5))
    ddesc = BufferTensorDesc(dst, [3, 4])
    buf = bytearray(ddesc.total_tensor_size_in_bytes)
    convert(row, desc, buf, ddesc, scale=0.5)
    _same(gather_np(buf, dst, (3, 4), None), convert_values(np.broadcast_to(row, (3, 4)), "FLOAT32", dst, 0.5))


@pytest.mark.parametrize(("src", "dst"), [("INT4", "UINT4"), ("UINT4", "INT4"), ("UINT4", "FLOAT16"),
                                          ("INT4", "INT4"), ("FLOAT32", "INT4"), ("INT8", "UINT4")])
@pytest.mark.parametrize("step", [1, 3])
def test_nibbles_on_either_side_with_odd_strides(src, dst, step):
    sizes = (3, 7)
    vals = source_values(src, sizes, 2)
    if src in FLOAT_NAMES:
        with np.errstate(invalid="ignore"):
            vals = np.where(np.isfinite(vals), vals % 40 - 20, vals).astype(np.float32)
    sdesc = BufferTensorDesc(src, sizes, strides=[7 * step + 1, step])
    raw = bytearray(random_bytes(1, sdesc.total_tensor_size_in_bytes))
    scatter_np(vals, raw, src, sizes, sdesc.effective_strides)
    ddesc = BufferTensorDesc(dst, sizes, strides=[1, 3 * step + 2])
    before = random_bytes(4, ddesc.total_tensor_size_in_bytes)
    buf = bytearray(before)
    convert(bytes(raw), sdesc, buf, ddesc, scale=1.5, bias=-1.0)
    expected = convert_values(vals, src, dst, 1.5, -1.0)
    ref = bytearray(before)
    scatter_np(expected, ref, dst, sizes, ddesc.effective_strides)
    assert bytes(buf) == bytes(ref)
    _same(gather(bytes(raw), sdesc, dtype=dst, scale=1.5, bias=-1.0), expected)


@pytest.mark.parametrize(("src", "dst"), [("UINT8", "UINT8"), ("INT16", "FLOAT32"), ("FLOAT32", "INT16"),
                                          ("UINT4", "UINT4")])
def test_convert_overlapping_ranges_go_through_a_temporary(src, dst):
    """Source and destination in one buffer, overlapping: the result is as if copied first."""
    sizes = (4, 6)
    sdesc = BufferTensorDesc(src, sizes)
    ddesc = BufferTensorDesc(dst, sizes, strides=[1, 4])
    buf = bytearray(random_bytes(8, 256))
    if TYPES[src].bits == 4:
        vals = random_values(TYPES[src], sizes, 1)
    else:
        vals = (np.arange(24).reshape(sizes) - 5).astype(TYPES[src].dtype)
    scatter_np(vals, buf, src, sizes, None, 16)
    ref = bytearray(buf)
    scatter_np(convert_values(vals, src, dst, 2.0, 1.0), ref, dst, sizes, ddesc.effective_strides, 32)
    convert(buf, sdesc, buf, ddesc, src_offset=16, dst_offset=32, scale=2.0, bias=1.0)
    assert bytes(buf) == bytes(ref)


def test_gather_out_and_out_aliasing_the_buffer():
    sizes = (4, 4)
    vals = np.arange(16, dtype=np.int16).reshape(sizes) * 7 - 40
    desc = BufferTensorDesc("int16", sizes, strides=[1, 4])
    out = np.empty(sizes, np.float32)
    res = gather(vals, desc, dtype="float32", scale=0.5, out=out)
    assert res is out
    _same(out, convert_values(vals.T, "INT16", "FLOAT32", 0.5))
    # out is the source buffer itself (same bytes: int16 reinterpretation would clash, so use float32).
    f = np.arange(16, dtype=np.float32).reshape(sizes)
    expected = convert_values(f.T.copy(), "FLOAT32", "FLOAT32", 2.0)
    fdesc = BufferTensorDesc("float32", sizes, strides=[1, 4])
    assert gather(f, fdesc, scale=2.0, out=f) is f
    _same(f, expected)


def test_negative_axis_and_size_one_dims():
    x = np.arange(4 * 1 * 3 * 1, dtype=np.uint8).reshape(4, 1, 3, 1)
    desc = BufferTensorDesc("uint8", x.shape)
    got = gather(x, desc, dtype="float32", scale=[1.0, 10.0, 100.0], axis=-2)
    _same(got, convert_values(x, "UINT8", "FLOAT32", [1.0, 10.0, 100.0], axis=2))


def test_axis_alone_keeps_the_plain_gather():
    x = np.array([-0.0, 1.0], np.float32)
    got = gather(x, BufferTensorDesc("float32", [2]), axis=0)
    assert got.tobytes() == x.tobytes()


def test_threads_agree_with_one_thread():
    """A tensor large enough to be split between threads gives the same bytes."""
    sizes = (4, 3, 200, 300)
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, size=(4, 200, 300, 3), dtype=np.uint8)
    desc = BufferTensorDesc.from_layout("uint8", list(sizes), "NHWC")
    threads = dmlstride.get_num_threads()
    try:
        dmlstride.set_num_threads(1)
        one = gather(img, desc, dtype="float16", scale=[0.1, 0.2, 0.3], bias=-1.0, axis=1)
        dmlstride.set_num_threads(4)
        four = gather(img, desc, dtype="float16", scale=[0.1, 0.2, 0.3], bias=-1.0, axis=1)
    finally:
        dmlstride.set_num_threads(threads)
    assert one.tobytes() == four.tobytes()
    _same(one, convert_values(img.transpose(0, 3, 1, 2), "UINT8", "FLOAT16", [0.1, 0.2, 0.3], -1.0, 1))


def test_object_buffers_are_refused():
    objs = np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        gather(objs, BufferTensorDesc("uint8", [2]), dtype="float32")
    buf = bytearray(16)
    with pytest.raises(TypeError, match="Python objects"):
        convert(objs, BufferTensorDesc("uint8", [2]), buf, BufferTensorDesc("uint8", [2]))
    assert bytes(buf) == bytes(16)


# ------------------------------------------------------------------------- float16 paths


def test_float16_paths_are_bit_exact():
    """Every float16 pattern to float32, and float32/float64 patterns to float16, both paths."""
    all_half = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    f32 = np.frombuffer(rng.bytes(4 * 200000), np.float32).copy()
    # Values near float16's range and rounding points, quiet NaNs only (the arithmetic quiets them).
    bits = all_half.astype(np.float32).view(np.uint32).astype(np.int64)[:, None] + np.arange(-2, 3)
    near = (bits & 0xFFFFFFFF).astype(np.uint32).view(np.float32).reshape(-1)
    f32 = np.concatenate([f32, near])
    f32 = f32[~np.isnan(f32)]
    finite = all_half[np.isfinite(all_half)].astype(np.float64)
    f64 = np.concatenate([rng.standard_normal(100000) * 10.0 ** rng.integers(-9, 6, 100000),
                          finite * (1 + 2.0**-12), finite * (1 - 2.0**-30), finite * (1 + 2.0**-11), [np.inf]])
    before = convert_module._hardware_half()
    try:
        for hw in (True, False):
            convert_module._set_hardware_half(hw)
            up = gather(all_half, BufferTensorDesc("float16", [65536]), dtype="float32")
            ok = ~np.isnan(all_half)
            # (x * 1 + 0: -0.0 comes out as +0.0, as the formula gives)
            assert up[ok].tobytes() == (all_half[ok].astype(np.float32) * np.float32(1) + np.float32(0)).tobytes()
            assert np.isnan(up[~ok]).all()
            down = gather(f32, BufferTensorDesc("float32", [f32.size]), dtype="float16")
            down64 = gather(f64, BufferTensorDesc("float64", [f64.size]), dtype="float16")
            with np.errstate(over="ignore"):
                assert down.tobytes() == (f32 * np.float32(1) + np.float32(0)).astype(np.float16).tobytes()
                assert down64.tobytes() == (f64 * 1.0 + 0.0).astype(np.float16).tobytes()
    finally:
        convert_module._set_hardware_half(before)


def test_software_float16_helpers_match_numpy():
    from dmlstride import _convert

    for v in [0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, 1e-30, float("inf")]:
        with np.errstate(over="ignore"):
            h32, h64 = np.float32(v).astype(np.float16), np.float64(v).astype(np.float16)
        assert _convert.f32_to_f16_bits(v) == int(h32.view(np.uint16))
        assert _convert.f64_to_f16_bits(v) == int(h64.view(np.uint16))
    for h in range(0, 65536, 7):
        half = np.uint16(h).view(np.float16)
        if not np.isnan(half):
            assert _convert.f16_bits_to_f32(h) == float(half)
    qnan = np.float32(np.nan)
    assert np.isnan(np.uint16(_convert.f32_to_f16_bits(float(qnan))).view(np.float16))


def test_hardware_switch_reports_its_state():
    before = convert_module._hardware_half()
    try:
        assert convert_module._set_hardware_half(False) is False
        assert convert_module._hardware_half() is False
        convert_module._set_hardware_half(True)
    finally:
        convert_module._set_hardware_half(before)


# ------------------------------------------------------------------------- misc


def test_every_saturation_range_matches_the_type():
    for name, (lo, hi) in INT_RANGES.items():
        if name in NIBBLE_RANGE:
            assert NIBBLE_RANGE[name] == (lo, hi)
        else:
            info = np.iinfo(TYPES[name].dtype)
            assert (info.min, info.max) == (lo, hi)
    assert set(INT_RANGES) | FLOAT_NAMES == set(TYPE_NAMES)
    assert set(BYTE_TYPE_NAMES) < set(TYPE_NAMES)


def test_sizes_must_match():
    with pytest.raises(DescriptorError, match="differ"):
        convert(bytes(16), BufferTensorDesc("uint8", [2, 3]), bytearray(64), BufferTensorDesc("float32", [3, 2]))


@pytest.mark.parametrize("src,dst", list(itertools.product(["UINT8", "FLOAT32"], ["FLOAT16", "INT4"])))
def test_out_dtype_follows_dtype(src, dst):
    x = np.zeros(4, TYPES[src].dtype)
    got = gather(x, BufferTensorDesc(src, [4]), dtype=dst)
    assert got.dtype == TYPES[dst].dtype


# ------------------------------------------------------------------------- SIMD row loaders


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dst", ["FLOAT32", "FLOAT16"])
@pytest.mark.parametrize("src", ["UINT8", "FLOAT32"])
def test_channel_rows_simd_and_scalar_agree(src, dst, channels, half_path):
    """Planar (C = 1) and interleaved (NHWC, C = 3 or 4) rows of every length from 1 to 70,
    to float32 and float16, with and without the SIMD rows, one scale and bias per channel."""
    from dmlstride import _convert

    rng = np.random.default_rng(3)
    scale = [1.0, 0.5, 2.0, -0.25][:channels]
    bias = [0.0, -3.5, 1.25, 100.0][:channels]
    try:
        for w in range(1, 71):
            x = (rng.integers(0, 256, size=(2, w, channels)) if src == "UINT8"
                 else rng.standard_normal((2, w, channels)) * 1e3).astype(TYPES[src].dtype)
            if src == "FLOAT32":   # NaN, inf, -0, float16 overflow
                k = min(4, x.size)
                x.reshape(-1)[:k] = [np.nan, np.inf, -0.0, 7e4][:k]
            pad = np.zeros(2 * w * channels + 16, x.dtype)
            pad[: x.size] = x.reshape(-1)
            desc = BufferTensorDesc(src, [2, channels, w], strides=[channels * w, 1, channels])
            results = []
            for simd in (True, False):
                _convert.set_simd_rows(simd)
                results.append(gather(pad, desc, dtype=dst.lower(), scale=scale, bias=bias, axis=1))
            expected = convert_values(x.transpose(0, 2, 1), src, dst, scale, bias, axis=1)
            _same(results[0], expected)
            _same(results[1], expected)
    finally:
        _convert.set_simd_rows(True)


GUARD_SCRIPT = r"""
import ctypes, mmap, sys
import numpy as np
import dmlstride as ds

PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
region = mmap.mmap(-1, 2 * PAGE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
assert libc.mprotect(ctypes.c_void_p(addr + PAGE), PAGE, 0) == 0   # the second page: no access
for name, itemsize in (("uint8", 1), ("float32", 4)):
    for c in (1, 3, 4):
        for w in (8, 9, 16, 17, 33, 64, 65):
            for dtype in ("float32", "float16"):
                # An NHWC tensor whose last byte is the last byte before the guard page.
                desc = ds.BufferTensorDesc.from_layout(name, [1, c, 1, w], "NHWC")
                need = desc.total_tensor_size_in_bytes
                start = PAGE - need
                view = memoryview(region)[start:PAGE]
                out = ds.gather(view, desc, dtype=dtype, scale=2.0, check_alignment=False)
                assert out.shape == (1, c, 1, w)
                view.release()
print("ok")
"""


def test_simd_rows_read_nothing_past_the_tensor(tmp_path):
    """A tensor ending right before an inaccessible page: any read past it would crash."""
    from subproc import run_python

    proc = run_python(["-c", GUARD_SCRIPT], tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
