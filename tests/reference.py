"""Reference gather/scatter over raw bytes, and test-data generators.

Written from the memory model alone (the memory model), independently of the
package: the element offset of index ``i`` is ``sum(i[k] * strides[k])``; an
element of ``w`` bytes lives in bytes ``[offset + k * w, offset + (k + 1) * w)``;
a 4-bit element at element offset ``k`` lives in byte ``k // 2``, low nibble
when ``k`` is even, high nibble when odd; INT4 is two's complement.

Two implementations of each operation: ``gather_py``/``scatter_py`` walk the
elements in plain Python (the reference for small tensors), and
``gather_np``/``scatter_np`` do the same byte arithmetic with numpy fancy
indexing (fast enough for tensors of several MiB).  ``test_engine_properties``
checks that the two agree.  Nothing here calls dmlstride's kernels.

The buffer helpers build every kind of buffer object the API accepts from a
``bytes`` value and read any of them back as ``bytes``; the hypothesis
strategies generate descriptors, offsets and buffers.
"""

from __future__ import annotations

import array
import itertools
import mmap
import tempfile
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st

# --------------------------------------------------------------------------------------
# the data-type table (DirectML's DML_TENSOR_DATA_TYPE), kept here so the reference does not ask the package


class TypeInfo(NamedTuple):
    name: str
    value: int
    bits: int
    dtype: np.dtype  # one unpacked element
    signed_nibble: bool


_ROWS = [
    ("FLOAT32", 1, 32, "<f4"),
    ("FLOAT16", 2, 16, "<f2"),
    ("UINT32", 3, 32, "<u4"),
    ("UINT16", 4, 16, "<u2"),
    ("UINT8", 5, 8, "u1"),
    ("INT32", 6, 32, "<i4"),
    ("INT16", 7, 16, "<i2"),
    ("INT8", 8, 8, "i1"),
    ("FLOAT64", 9, 64, "<f8"),
    ("UINT64", 10, 64, "<u8"),
    ("INT64", 11, 64, "<i8"),
    ("UINT4", 12, 4, "u1"),
    ("INT4", 13, 4, "i1"),
]
TYPES: dict[str, TypeInfo] = {
    name: TypeInfo(name, value, bits, np.dtype(dt), name == "INT4") for name, value, bits, dt in _ROWS
}
TYPE_NAMES = [row[0] for row in _ROWS]
BYTE_TYPE_NAMES = [n for n in TYPE_NAMES if TYPES[n].bits >= 8]
NIBBLE_TYPE_NAMES = ["UINT4", "INT4"]
NIBBLE_RANGE = {"UINT4": (0, 15), "INT4": (-8, 7)}


def type_info(data_type: Any) -> TypeInfo:
    """Look a data type up by name (any case), by enum member or by its DirectML value."""
    if isinstance(data_type, str):
        return TYPES[data_type.upper()]
    name = getattr(data_type, "name", None)
    if isinstance(name, str) and name.upper() in TYPES:
        return TYPES[name.upper()]
    for info in TYPES.values():
        if info.value == int(data_type):
            return info
    raise KeyError(data_type)


# --------------------------------------------------------------------------------------
# offsets and sizes


def packed_strides(sizes: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Row-major packed strides: the last dimension is the fastest."""
    out = []
    running = 1
    for n in reversed(sizes):
        out.append(running)
        running *= n
    return tuple(reversed(out))


def order_strides(sizes: Any, order: Any, pads: Any = None, step: int = 1) -> tuple[int, ...]:
    """Strides that lay dimensions out in ``order`` (slowest first).

    The fastest dimension gets stride ``step``; each slower one gets the extent
    of the one below it plus ``pads[dim]`` elements of padding.
    """
    strides = [0] * len(sizes)
    running = step
    for d in reversed(list(order)):
        strides[d] = running
        running = running * sizes[d] + (pads[d] if pads is not None else 0)
    return tuple(strides)


def element_offsets(sizes: Any, strides: Any) -> list[int]:
    """Element offset of every index, in logical C order (pure Python)."""
    return [
        sum(i * s for i, s in zip(index, strides))
        for index in itertools.product(*(range(n) for n in sizes))
    ]


def element_offsets_np(sizes: Any, strides: Any) -> np.ndarray:
    """``element_offsets`` as a flat int64 array, built by broadcasting."""
    grid = np.zeros((1,) * len(sizes), dtype=np.int64)
    for axis, (n, s) in enumerate(zip(sizes, strides)):
        shape = [1] * len(sizes)
        shape[axis] = n
        grid = grid + (np.arange(n, dtype=np.int64) * np.int64(s)).reshape(shape)
    return grid.reshape(-1)


def overlaps(sizes: Any, strides: Any) -> bool:
    """Do two distinct indices share an element offset?  (Brute force.)"""
    offs = np.sort(element_offsets_np(sizes, strides))
    return bool((offs[1:] == offs[:-1]).any())


def min_size(data_type: Any, sizes: Any, strides: Any | None) -> int:
    """The size formula: bytes for the last element, rounded up to a multiple of 4."""
    bits = type_info(data_type).bits
    if strides is None:
        count = 1
        for n in sizes:
            count *= n
    else:
        count = sum((n - 1) * s for n, s in zip(sizes, strides)) + 1
    nbytes = -(-count * bits // 8)
    return -(-nbytes // 4) * 4


def element_extent(data_type: Any, sizes: Any, strides: Any) -> int:
    """Bytes from the base up to and including the last element's byte."""
    last = sum((n - 1) * s for n, s in zip(sizes, strides))
    bits = type_info(data_type).bits
    return last // 2 + 1 if bits == 4 else (last + 1) * bits // 8


def touched_bytes(data_type: Any, sizes: Any, strides: Any, offset: int = 0) -> set[int]:
    """Byte positions that hold (part of) an element of the tensor."""
    bits = type_info(data_type).bits
    out: set[int] = set()
    for k in element_offsets(sizes, strides):
        if bits == 4:
            out.add(offset + k // 2)
        else:
            w = bits // 8
            out.update(range(offset + k * w, offset + (k + 1) * w))
    return out


# --------------------------------------------------------------------------------------
# nibbles


def pack_nibbles(values: Any) -> bytes:
    """Pack 4-bit values (any ints; the low 4 bits are kept) two per byte, low nibble first."""
    vals = [int(v) & 0xF for v in values]
    if len(vals) % 2:
        vals.append(0)
    return bytes(vals[i] | (vals[i + 1] << 4) for i in range(0, len(vals), 2))


def unpack_nibbles(raw: bytes, count: int, signed: bool) -> list[int]:
    """The first ``count`` 4-bit elements of ``raw``; INT4 sign-extended."""
    out = []
    for k in range(count):
        v = (raw[k // 2] >> 4) if k % 2 else (raw[k // 2] & 0xF)
        out.append(v - 16 if signed and v >= 8 else v)
    return out


# --------------------------------------------------------------------------------------
# the reference, pure Python


def gather_py(raw: Any, data_type: Any, sizes: Any, strides: Any | None, offset: int = 0) -> np.ndarray:
    """Read the tensor into a packed C-ordered array, one element at a time."""
    info = type_info(data_type)
    raw = bytes(raw)
    if strides is None:
        strides = packed_strides(sizes)
    offs = element_offsets(sizes, strides)
    if info.bits == 4:
        vals = []
        for k in offs:
            byte = raw[offset + k // 2]
            v = (byte >> 4) if k % 2 else (byte & 0xF)
            vals.append(v - 16 if info.signed_nibble and v >= 8 else v)
        return np.array(vals, dtype=info.dtype).reshape(tuple(sizes))
    w = info.bits // 8
    out = bytearray()
    for k in offs:
        start = offset + k * w
        chunk = raw[start:start + w]
        assert len(chunk) == w, "reference read past the end of the buffer"
        out += chunk
    return np.frombuffer(bytes(out), dtype=info.dtype).reshape(tuple(sizes)).copy()


def scatter_py(values: np.ndarray, raw: bytearray, data_type: Any, sizes: Any, strides: Any | None,
               offset: int = 0) -> None:
    """Write ``values`` (already of the element dtype) into ``raw``, one element at a time.

    Elements are written in logical C order, so where two indices share an
    offset the later one wins (the callers only use this for overlap-free
    destinations).
    """
    info = type_info(data_type)
    if strides is None:
        strides = packed_strides(sizes)
    offs = element_offsets(sizes, strides)
    flat = np.ascontiguousarray(values, dtype=info.dtype).reshape(-1)
    assert flat.size == len(offs)
    if info.bits == 4:
        for k, v in zip(offs, flat.tolist()):
            pos = offset + k // 2
            nib = v & 0xF
            raw[pos] = (raw[pos] & 0x0F) | (nib << 4) if k % 2 else (raw[pos] & 0xF0) | nib
        return
    w = info.bits // 8
    data = flat.tobytes()
    for j, k in enumerate(offs):
        start = offset + k * w
        assert start + w <= len(raw), "reference wrote past the end of the buffer"
        raw[start:start + w] = data[j * w:(j + 1) * w]


def copy_py(src_raw: Any, dst_raw: bytearray, data_type: Any, sizes: Any, src_strides: Any,
            dst_strides: Any, src_offset: int = 0, dst_offset: int = 0) -> None:
    """Copy through a temporary: gather from ``src_raw``, then scatter into ``dst_raw``."""
    tmp = gather_py(bytes(src_raw), data_type, sizes, src_strides, src_offset)
    scatter_py(tmp, dst_raw, data_type, sizes, dst_strides, dst_offset)


# --------------------------------------------------------------------------------------
# the reference, numpy fancy indexing (for big tensors)


def _byte_index(info: TypeInfo, offs: np.ndarray, offset: int) -> np.ndarray:
    w = info.bits // 8
    return (np.int64(offset) + offs * w)[:, None] + np.arange(w, dtype=np.int64)


def gather_np(raw: Any, data_type: Any, sizes: Any, strides: Any | None, offset: int = 0) -> np.ndarray:
    """``gather_py`` with numpy fancy indexing."""
    info = type_info(data_type)
    src = np.frombuffer(bytes(raw), dtype=np.uint8)
    if strides is None:
        strides = packed_strides(sizes)
    offs = element_offsets_np(sizes, strides)
    if info.bits == 4:
        byte = src[offset + offs // 2]
        nib = np.where(offs % 2 == 1, byte >> 4, byte & 0xF).astype(np.int16)
        if info.signed_nibble:
            nib = np.where(nib >= 8, nib - 16, nib)
        return nib.astype(info.dtype).reshape(tuple(sizes))
    picked = src[_byte_index(info, offs, offset)]
    return picked.reshape(-1).view(info.dtype).reshape(tuple(sizes)).copy()


def scatter_np(values: np.ndarray, raw: bytearray, data_type: Any, sizes: Any, strides: Any | None,
               offset: int = 0) -> None:
    """``scatter_py`` with numpy fancy indexing (overlap-free destinations only)."""
    info = type_info(data_type)
    dst = np.frombuffer(raw, dtype=np.uint8)  # a writable view of the bytearray
    if strides is None:
        strides = packed_strides(sizes)
    offs = element_offsets_np(sizes, strides)
    flat = np.ascontiguousarray(values, dtype=info.dtype).reshape(-1)
    if info.bits == 4:
        nib = flat.view(np.uint8) & np.uint8(0xF)
        pos = offset + offs // 2
        high = offs % 2 == 1
        cur = dst[pos[high]]
        dst[pos[high]] = (cur & np.uint8(0x0F)) | (nib[high] << np.uint8(4))
        cur = dst[pos[~high]]
        dst[pos[~high]] = (cur & np.uint8(0xF0)) | nib[~high]
        return
    dst[_byte_index(info, offs, offset)] = flat.view(np.uint8).reshape(-1, info.bits // 8)


# --------------------------------------------------------------------------------------
# buffer objects

#: Buffer kinds that refuse writes.
READ_ONLY_KINDS = ["bytes", "readonly_memoryview", "readonly_ndarray"]
#: Buffer kinds scatter/copy_tensor can write to.
WRITABLE_KINDS = [
    "bytearray",
    "memoryview",
    "memoryview_odd",
    "array_B",
    "array_d",
    "ndarray_u1",
    "ndarray_f4",
    "ndarray_2d",
    "mmap",
    "memmap",
]
BUFFER_KINDS = READ_ONLY_KINDS + WRITABLE_KINDS
#: Kinds whose length must be a multiple of this many bytes.
KIND_UNIT = {"array_d": 8, "ndarray_f4": 4, "ndarray_2d": 8}


def buffer_length(kind: str, needed: int) -> int:
    """The smallest length of at least ``needed`` bytes that ``kind`` can hold."""
    unit = KIND_UNIT.get(kind, 1)
    return max(unit, -(-needed // unit) * unit)


def make_buffer(kind: str, data: bytes) -> Any:
    """A buffer object of the given kind whose raw bytes are ``data``."""
    n = len(data)
    if kind == "bytes":
        return bytes(data)
    if kind == "readonly_memoryview":
        return memoryview(bytes(data))
    if kind == "readonly_ndarray":
        a = np.frombuffer(bytes(data), dtype=np.uint8).copy()
        a.flags.writeable = False
        return a
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    if kind == "memoryview_odd":
        # A slice starting at an odd address (bytearray storage is at least 8-aligned).
        return memoryview(bytearray(b"\x5a" + data + b"\xa5"))[1:n + 1]
    if kind == "array_B":
        return array.array("B", data)
    if kind == "array_d":
        assert n % 8 == 0
        a = array.array("d")
        a.frombytes(data)
        return a
    if kind == "ndarray_u1":
        return np.frombuffer(data, dtype=np.uint8).copy()
    if kind == "ndarray_f4":
        assert n % 4 == 0
        return np.frombuffer(data, dtype=np.float32).copy()
    if kind == "ndarray_2d":
        assert n % 8 == 0
        return np.frombuffer(data, dtype=np.uint16).copy().reshape(-1, 4)
    if kind == "mmap":
        if n == 0:
            raise ValueError("an mmap buffer needs at least one byte")
        m = mmap.mmap(-1, n)
        m[:] = data
        return m
    if kind == "memmap":
        with tempfile.TemporaryFile() as fh:
            mm = np.memmap(fh, dtype=np.uint8, mode="w+", shape=(n,))
        mm[:] = np.frombuffer(data, dtype=np.uint8)
        return mm
    raise ValueError(f"unknown buffer kind {kind!r}")


def buffer_bytes(obj: Any) -> bytes:
    """The raw bytes of any contiguous buffer object."""
    with memoryview(obj) as m, m.cast("B") as b:
        return bytes(b)


# --------------------------------------------------------------------------------------
# hypothesis strategies


class Layout(NamedTuple):
    data_type: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None  # None: packed, implicit
    total: int  # total_tensor_size_in_bytes

    @property
    def effective(self) -> tuple[int, ...]:
        return self.strides if self.strides is not None else packed_strides(self.sizes)

    @property
    def info(self) -> TypeInfo:
        return TYPES[self.data_type]


def _clamp_sizes(sizes: list[int], max_elements: int) -> tuple[int, ...]:
    out = []
    running = 1
    for n in sizes:
        n = max(1, min(n, max_elements // running))
        running *= n
        out.append(n)
    return tuple(out)


@st.composite
def sizes_st(draw: Any, *, max_rank: int = 8, max_elements: int = 256) -> tuple[int, ...]:
    rank = draw(st.sampled_from([r for r in (1, 2, 2, 3, 3, 4, 5, 6, 7, 8) if r <= max_rank]))
    big = 24 if rank <= 3 else 6
    raw = draw(st.lists(st.integers(1, big), min_size=rank, max_size=rank))
    return _clamp_sizes(raw, max_elements)


@st.composite
def strides_st(draw: Any, sizes: tuple[int, ...], *, overlap: bool) -> tuple[int, ...] | None:
    """Strides for ``sizes``: packed in any dimension order, padded, stepped, and
    (when ``overlap``) broadcast or arbitrary.  Size-1 dimensions sometimes get
    huge strides, which must not matter."""
    rank = len(sizes)
    kinds = ["implicit", "explicit"] + ["last_first"] * 3 + ["order"] * 4 + (["wild"] * 2 if overlap else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "implicit":
        return None
    if kind == "explicit":
        strides = list(packed_strides(sizes))
    elif kind in ("order", "last_first"):
        if kind == "order":
            order = draw(st.permutations(range(rank)))
        else:
            # One dimension becomes the fastest (channels-last style): a transposition.
            d = draw(st.integers(0, rank - 1))
            order = [x for x in range(rank) if x != d] + [d]
        pads = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3, 7]), min_size=rank, max_size=rank))
        step = draw(st.sampled_from([1, 1, 1, 2, 3]))
        strides = list(order_strides(sizes, order, pads, step))
        if overlap:
            for d in range(rank):
                if draw(st.integers(0, 5)) == 0:
                    strides[d] = 0
    else:
        strides = draw(st.lists(st.integers(0, 9), min_size=rank, max_size=rank))
    for d in range(rank):
        if sizes[d] == 1 and draw(st.integers(0, 3)) == 0:
            strides[d] = draw(st.sampled_from([0, 1, 12345, 2**31, 2**32 - 1]))
    return tuple(strides)


@st.composite
def layouts(draw: Any, *, types: list[str] | None = None, overlap: bool = True, max_rank: int = 8,
            max_elements: int = 256, sizes: tuple[int, ...] | None = None) -> Layout:
    """A descriptor's fields.  With ``overlap=False`` no two indices share an offset."""
    name = draw(st.sampled_from(types or TYPE_NAMES))
    if sizes is None:
        sizes = draw(sizes_st(max_rank=max_rank, max_elements=max_elements))
    strides = draw(strides_st(sizes, overlap=overlap))
    if not overlap and strides is not None and overlaps(sizes, strides):
        strides = order_strides(sizes, range(len(sizes)))
    total = min_size(name, sizes, strides) + draw(st.sampled_from([0, 0, 0, 4, 5, 17, 64]))
    return Layout(name, sizes, strides, total)


@st.composite
def placements(draw: Any, total: int, *, kinds: list[str] | None = None) -> tuple[str, int, bool, int]:
    """(buffer kind, offset, check_alignment, buffer length) for a tensor range of ``total`` bytes."""
    kind = draw(st.sampled_from(kinds or BUFFER_KINDS))
    aligned = draw(st.booleans())
    offset = 16 * draw(st.integers(0, 3)) if aligned else draw(st.integers(0, 40))
    tail = draw(st.sampled_from([0, 0, 1, 3, 16]))
    return kind, offset, aligned, buffer_length(kind, offset + total + tail)


def random_bytes(seed: int, n: int) -> bytes:
    return np.random.default_rng(seed).bytes(n)


def random_values(info: TypeInfo, sizes: tuple[int, ...], seed: int) -> np.ndarray:
    """Values of the element dtype: random bit patterns, or random in range for 4-bit types."""
    rng = np.random.default_rng(seed)
    count = 1
    for n in sizes:
        count *= n
    if info.bits == 4:
        lo, hi = NIBBLE_RANGE[info.name]
        return rng.integers(lo, hi + 1, size=sizes).astype(info.dtype)
    return np.frombuffer(rng.bytes(count * info.dtype.itemsize), dtype=info.dtype).reshape(sizes).copy()


# --------------------------------------------------------------------------------------
# conversion, quantization and dequantization: the written formulas in numpy

#: Types whose presence makes convert's arithmetic float64.
COMPUTE64_NAMES = {"FLOAT64", "INT64", "UINT64", "INT32", "UINT32"}
FLOAT_NAMES = {"FLOAT16", "FLOAT32", "FLOAT64"}
#: Saturation range of each integer type.
INT_RANGES = {
    "UINT4": (0, 15), "INT4": (-8, 7), "UINT8": (0, 255), "INT8": (-128, 127),
    "UINT16": (0, 2**16 - 1), "INT16": (-(2**15), 2**15 - 1),
    "UINT32": (0, 2**32 - 1), "INT32": (-(2**31), 2**31 - 1),
    "UINT64": (0, 2**64 - 1), "INT64": (-(2**63), 2**63 - 1),
}


def compute_type(src: str, dst: str) -> type:
    """float64 when either type is FLOAT64, INT64, UINT64, INT32 or UINT32, else float32."""
    return np.float64 if src in COMPUTE64_NAMES or dst in COMPUTE64_NAMES else np.float32


def _along(values: Any, ct: type, ndim: int, axis: int | None) -> np.ndarray:
    """A scalar, or a 1-D parameter shaped to broadcast along ``axis``."""
    arr = np.asarray(values).astype(ct)
    if arr.ndim == 1:
        assert axis is not None
        shape = [1] * ndim
        shape[axis] = arr.shape[0]
        arr = arr.reshape(shape)
    return arr


def round_to_type(y: np.ndarray, dst: str) -> np.ndarray:
    """Round compute-type values to ``dst``: floats to nearest even (numpy's astype);
    integers half to even, NaN to 0, saturated to the type's range (4-bit: one per byte)."""
    info = TYPES[dst]
    if dst in FLOAT_NAMES:
        with np.errstate(over="ignore", invalid="ignore"):
            return y.astype(info.dtype)
    lo, hi = INT_RANGES[dst]
    r = np.rint(np.where(np.isnan(y), 0, y)).astype(np.float64)
    out = np.zeros(y.shape, dtype=info.dtype)
    high = r >= float(hi) if hi < 2**53 else r >= float(2**64 if dst == "UINT64" else 2**63)
    low = r <= float(lo)
    mid = ~(high | low)
    out[high] = hi
    out[low] = lo
    out[mid] = r[mid].astype(info.dtype)
    return out


def convert_values(x: np.ndarray, src: str, dst: str, scale: Any = None, bias: Any = None,
                   axis: int | None = None) -> np.ndarray:
    """``x.astype(ct) * ct(scale) + ct(bias)`` rounded to ``dst``; ``x`` holds unpacked values."""
    ct = compute_type(src, dst)
    s = _along(1 if scale is None else scale, ct, x.ndim, axis)
    b = _along(0 if bias is None else bias, ct, x.ndim, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(ct) * s + b
    return round_to_type(y.astype(ct), dst)


def _param_grid(p: Any, sizes: tuple[int, ...], axis: int, block_size: int) -> np.ndarray:
    """A quantization parameter expanded to the tensor's shape (per tensor, axis or block)."""
    arr = np.asarray(p)
    if arr.ndim == 0 or arr.size == 1 and block_size == 0:
        return np.broadcast_to(arr.reshape(()), sizes)
    if block_size == 0:
        shape = [1] * len(sizes)
        shape[axis] = arr.shape[0]
        return np.broadcast_to(arr.reshape(shape), sizes)
    return np.repeat(arr, block_size, axis=axis).take(np.arange(sizes[axis]), axis=axis)


def quantize_values(x: Any, qtype: str, scale: Any, zero_point: Any = None, axis: int = 1,
                    block_size: int = 0) -> np.ndarray:
    """saturate(rint(x / scale) + zero_point), the division in float32, NaN giving the zero point."""
    x32 = np.asarray(x).astype(np.float32)
    sizes = x32.shape
    axis %= len(sizes)
    s = _param_grid(np.asarray(scale).astype(np.float32), sizes, axis, block_size)
    z = _param_grid(np.asarray(0 if zero_point is None else zero_point).astype(np.int64), sizes, axis,
                    block_size)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = np.rint(x32 / s)
    q = np.where(np.isnan(q), 0, q).astype(np.float64) + z
    lo, hi = INT_RANGES[qtype]
    return np.clip(q, lo, hi).astype(TYPES[qtype].dtype)


def dequantize_values(q: Any, scale: Any, zero_point: Any = None, axis: int = 1, block_size: int = 0,
                      dtype: str = "FLOAT32") -> np.ndarray:
    """(x - zero_point) * scale in float32, rounded to ``dtype``."""
    q = np.asarray(q)
    sizes = q.shape
    axis %= len(sizes)
    s = _param_grid(np.asarray(scale).astype(np.float32), sizes, axis, block_size)
    z = _param_grid(np.asarray(0 if zero_point is None else zero_point), sizes, axis, block_size)
    y = (q.astype(np.float32) - z.astype(np.float32)) * s
    return y.astype(TYPES[dtype].dtype)
