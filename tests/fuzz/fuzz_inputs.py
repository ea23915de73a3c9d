"""The fuzz harness's inputs: reading values from the fuzz data, the rules those
values break (computed independently of the package), and the descriptors and
buffers the data-moving calls get.  Used by ``fuzz_api.py``.
"""

from __future__ import annotations

import array
import collections
import ctypes
import mmap
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

import dmlstride
from dmlstride import (
    BufferTensorDesc,
    DescriptorError,
    TensorDataType,
    calc_buffer_tensor_size,
    calculate_strides,
)

# The suite's reference (tests/reference.py): sizes, offsets and gather/scatter
# from the memory model alone, independent of the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reference as ref  # noqa: E402

ALLOWED = (DescriptorError, TypeError, BufferError, ValueError, IndexError, OverflowError)
U32 = 2**32
VALID_TYPES = [t for t in TensorDataType if t is not TensorDataType.UNKNOWN]
INTERESTING = [
    0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 63, 64, 255, 256, 4095, 4096,
    2**15, 2**16 - 1, 2**16, 2**16 + 1, 2**30, 2**31 - 1, 2**31, 2**31 + 1,
    2**32 - 1, 2**32, 2**32 + 1, 2**62 - 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
    -1, -2, -16, -(2**31), -(2**63),
]

# (operation, outcome) -> count, reported at the end of a run.
OUTCOMES: collections.Counter[tuple[str, str]] = collections.Counter()


class Failure(AssertionError):
    """The API broke its contract on this input."""


def check(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


# ---------------------------------------------------------------------------------------
# reading values from the fuzz input

class Reader:
    """Draws values from the fuzz input; past its end every draw is 0."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos < len(self.data):
            b = self.data[self.pos]
            self.pos += 1
            return b
        return 0

    def uint(self, nbytes: int) -> int:
        chunk = self.data[self.pos:self.pos + nbytes]
        self.pos += len(chunk)
        return int.from_bytes(chunk.ljust(nbytes, b"\0"), "little")

    def below(self, n: int) -> int:
        return (self.uint(1) if n <= 256 else self.uint(4)) % n

    def chance(self, per256: int) -> bool:
        return self.byte() < per256

    def pick(self, seq: Any) -> Any:
        return seq[self.below(len(seq))]

    def interesting(self) -> int:
        v = self.pick(INTERESTING)
        return v + (self.below(5) - 2 if self.chance(40) else 0)

    def wrong_type(self) -> Any:
        return self.pick([
            1.0, 2.5, float("nan"), None, "2", "", True, False, np.float32(2), np.float64(1),
            np.bool_(True), np.timedelta64(2, "s"), [2], (1, 2), {"a": 1}, b"\x02", 3 + 0j, object(),
        ])

    def int_like(self, value: int) -> Any:
        """``value`` as a Python int or a numpy integer that can hold it."""
        if self.chance(24):
            for t in (np.uint8, np.int32, np.uint32, np.int64, np.uint64):
                info = np.iinfo(t)
                if info.min <= value <= info.max and self.chance(128):
                    return t(value)
        return value


def wild_int(r: Reader, small: int) -> Any:
    """Mostly a small valid int; sometimes a boundary value, a big one or a wrong type."""
    k = r.byte()
    if k < 170:
        return r.int_like(r.below(small))
    if k < 225:
        return r.int_like(r.interesting())
    if k < 240:
        return r.uint(r.pick([4, 5, 8, 9]))
    return r.wrong_type()


def wild_dims(r: Reader, ndim: int, small: int, lo: int) -> Any:
    kind = r.byte()
    if kind < 220:
        values = [wild_int(r, small) if r.chance(60) else r.below(small - lo) + lo for _ in range(ndim)]
        if r.chance(20):
            plain = np.array([int(v) if is_int(v) and 0 <= v < 2**63 else 1 for v in values], dtype=np.int64)
            values = plain.astype(r.pick([np.int64, np.uint32, np.int8, np.float64]))
        elif r.chance(40):
            values = tuple(values)
        return values
    if kind < 235:
        return [[r.below(4) + 1] * (r.below(2) + 1) for _ in range(ndim)]   # nested / ragged
    return r.wrong_type()


def is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_, np.timedelta64))


def is_dims_container(values: Any) -> bool:
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, (Sequence, np.ndarray)):
        return False
    return not (isinstance(values, np.ndarray) and values.ndim != 1)


def as_ints(values: Any) -> list[int]:
    return [int(v) for v in values]


# ---------------------------------------------------------------------------------------
# the rules, computed independently
#
# Each ``*_violations`` function returns the set of exception class names the
# broken rules call for.  A call must succeed when the set is empty; otherwise
# it must raise one of them (which one depends on the order the library checks
# in, which is not part of the contract).

Violations = set


def dims_violations(values: Any, minimum: int, expected_len: int | None = None) -> Violations:
    if not is_dims_container(values):
        return {"TypeError"}
    v: Violations = set()
    n = len(values)
    if expected_len is not None and n != expected_len:
        v.add("DescriptorError")
    if not 1 <= n <= 8:
        v.add("DescriptorError")
    for x in values:
        if not is_int(x):
            v.add("TypeError")
        elif not minimum <= int(x) < U32:
            v.add("DescriptorError")
    return v


def dtype_violations(dt: Any) -> tuple[Violations, TensorDataType | None]:
    try:
        t = dmlstride.data_type(dt)
    except TypeError:
        return {"TypeError"}, None
    except DescriptorError:
        return {"DescriptorError"}, None
    if t is TensorDataType.UNKNOWN:
        return {"DescriptorError"}, None
    return set(), t


def shape_violations(dt: Any, sizes: Any, strides: Any) -> tuple[Violations, int | None]:
    """Violations of the data type, sizes and strides, and the minimum size when they are valid."""
    v, t = dtype_violations(dt)
    sv = dims_violations(sizes, 1)
    v |= sv
    if strides is not None:
        v |= dims_violations(strides, 0, len(sizes) if not sv else None)
    if v or t is None:
        return v, None
    minimum = ref.min_size(t, as_ints(sizes), None if strides is None else as_ints(strides))
    if minimum >= 2**64:
        v.add("DescriptorError")
    return v, minimum


def desc_violations(dt: Any, sizes: Any, strides: Any, total: Any, align: Any, flags: Any,
                    limits: bool = True) -> Violations:
    v, minimum = shape_violations(dt, sizes, strides)
    if not v and limits:
        # DirectML's limits: at most 2**32 - 1 elements, and an element extent (last offset + 1) as large.
        count = 1
        for n in as_ints(sizes):
            count *= n
        extent = count if strides is None else sum((n - 1) * s for n, s in zip(as_ints(sizes), as_ints(strides))) + 1
        if count >= U32 or extent >= U32:
            v.add("DescriptorError")
    if total is not None:
        if not is_int(total):
            v.add("TypeError")
        elif not 0 <= int(total) < 2**64 or (minimum is not None and int(total) < minimum):
            v.add("DescriptorError")
        elif limits and not v and int(total) > ref.min_size(dmlstride.data_type(dt), [U32 - 1], None):
            v.add("DescriptorError")
    if not is_int(align):
        v.add("TypeError")
    elif int(align) != 0:
        a = int(align)
        _, t = dtype_violations(dt)
        elem = (dmlstride.element_bits(t) + 7) // 8 if t is not None else 1
        if a < 0 or a & (a - 1) or a < elem or a >= U32:
            v.add("DescriptorError")
    if not is_int(flags):
        v.add("TypeError")
    elif int(flags) not in (0, 1):
        v.add("DescriptorError")
    return v


def expect(call: Any, violations: Violations, label: str) -> Any:
    """Run ``call``: it must succeed exactly when nothing is violated, else raise a violated rule's class."""
    try:
        result = call()
    except ALLOWED as exc:
        message = str(exc)
        name = type(exc).__name__
        check(message != "" and "\n" not in message, f"{label}: message {message!r} is not one line")
        check(bool(violations), f"{label}: refused a valid call with {name}: {message}")
        check(name in violations or ("ValueError" in violations and isinstance(exc, ValueError)),
              f"{label}: raised {name} ({message}); expected one of {sorted(violations)}")
        OUTCOMES[(label, name)] += 1
        raise
    check(not violations, f"{label}: accepted a call that must be refused ({sorted(violations)})")
    OUTCOMES[(label, "ok")] += 1
    return result


# ---------------------------------------------------------------------------------------
# reference gather and scatter on the raw bytes (tests/reference.py), from the
# descriptor's own fields (implicit strides are computed by the reference)

def ref_gather(raw: np.ndarray, off: int, desc: BufferTensorDesc) -> np.ndarray:
    return ref.gather_np(raw, desc.data_type.name, desc.sizes, desc.strides, off)


def ref_scatter(raw: np.ndarray, off: int, desc: BufferTensorDesc, values: np.ndarray) -> None:
    ref.scatter_np(values, raw, desc.data_type.name, desc.sizes, desc.strides, off)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------------------
# descriptors and buffers for the data-moving calls

def tame_desc(r: Reader) -> tuple[BufferTensorDesc | None, Any]:
    """A descriptor of at most 256 elements with tame or extreme strides (or None and its fields)."""
    dt = r.pick(VALID_TYPES) if r.chance(250) else r.pick([0, 14, "float33", None])
    ndim = r.pick([1, 1, 2, 2, 2, 3, 3, 4, 5, 8]) if r.chance(252) else r.pick([0, 9])
    sizes = [r.below(4) + 1 for _ in range(ndim)]
    while sizes and int(np.prod(sizes)) > 256:
        sizes[sizes.index(max(sizes))] = 1
    style = r.byte()
    if style < 60:
        strides = None
    elif style < 200:
        strides = [r.pick([0, 1, 1, 2, 3, 4, 5, 7, 8, 16]) for _ in range(ndim)]
    elif style < 230:
        order = list(range(ndim))
        for i in range(ndim - 1, 0, -1):
            j = r.below(i + 1)
            order[i], order[j] = order[j], order[i]
        try:
            strides = list(calculate_strides(tuple(order), sizes)) if ndim else []
        except ALLOWED:
            strides = [1] * ndim
        strides = [s + (r.below(3) if r.chance(60) else 0) for s in strides]
    else:
        strides = [r.pick([0, 1, 2**31 - 1, 2**31, 2**32 - 1, r.uint(4)]) for _ in range(ndim)]
    total = None
    if r.chance(60):
        extra = r.pick([0, 1, 3, 4, 16, 64]) if r.chance(230) else r.interesting()
        try:
            total = calc_buffer_tensor_size(dt, sizes, strides) + extra
        except ALLOWED:
            total = extra
    align = 0 if r.chance(200) else r.pick([1, 2, 4, 8, 16, 32, 64, 3, 12, 2**31])
    # Extreme strides describe tensors past DirectML's limits: lift them (no draw, so saved inputs keep
    # their meaning); the other styles keep the limits, which a wild total can still break.
    fields = (dt, sizes, strides, total, align, 0, style < 230)   # the last: directml_limits
    try:
        return expect(lambda: BufferTensorDesc(*fields), desc_violations(*fields), "tame BufferTensorDesc"), fields
    except ALLOWED:
        return None, fields


# The first kind (what an exhausted input picks) is the plainest writable buffer.
BUFFER_KINDS = ["bytearray", "ndarray", "bytes", "ndarray-f32", "ndarray-ro", "ndarray-strided",
                "memoryview", "memoryview-ro", "memoryview-strided", "array", "mmap", "bytearray", "ndarray"]
# Buffers of Python objects or pointers, drawn for the top byte values (older saved inputs keep their kinds).
UNSAFE_KINDS = ["objects", "objects-record", "objects-ctypes", "objects-union", "objects-cast", "pointers-char_p"]


class _UnionObject(ctypes.Union):
    _fields_ = [("i", ctypes.c_uint64), ("o", ctypes.py_object)]


def unsafe_buffer(kind: str, length: int) -> tuple[Any, list[Any]]:
    """A buffer of about ``length`` bytes holding Python objects or pointers, and the objects it refers to."""
    n = max(length // 8, 1)
    items: list[Any] = [object() for _ in range(n)]
    if kind == "objects":
        return np.array(items, dtype=object), items
    if kind == "objects-record":
        rec = np.zeros(n, dtype=[("x", "f4"), ("o", "O")])
        rec["o"] = items
        return rec, items
    if kind == "objects-ctypes":
        return (ctypes.py_object * n)(*items), items
    if kind == "objects-union":
        u = (_UnionObject * n)()
        for k in range(n):
            u[k].o = items[k]
        return u, items
    if kind == "objects-cast":
        base = np.array(items, dtype=object)
        return memoryview(base).cast("B"), [base, *items]
    strings = [b"s%d" % k for k in range(n)]
    return (ctypes.c_char_p * n)(*strings), strings


class Buf:
    """A buffer object of some kind, plus how to read its bytes and whether it is usable."""

    def __init__(self, r: Reader, length: int) -> None:
        b = r.byte()
        self.kind = UNSAFE_KINDS[b % len(UNSAFE_KINDS)] if b >= 244 else BUFFER_KINDS[b % len(BUFFER_KINDS)]
        seed = r.uint(2)
        data = np.random.default_rng(seed).integers(0, 256, size=max(length, 0) + 8, dtype=np.uint8)
        self.contiguous = True
        self.writable = True
        k = self.kind
        # Holds Python object references or pointers: every entry point must refuse it (TypeError).
        self.unsafe = k.startswith(("objects", "pointers"))
        self._close = None
        if self.unsafe:
            self.obj, self.items = unsafe_buffer(k, length)
        elif k == "bytes":
            self.obj = data[:length].tobytes()
            self.writable = False
        elif k == "bytearray":
            self.obj = bytearray(data[:length].tobytes())
        elif k == "ndarray":
            self.obj = data[:length].copy()
        elif k == "ndarray-f32":
            n = length // 4
            self.obj = data[:n * 4].copy().view(np.float32)
        elif k == "ndarray-ro":
            self.obj = data[:length].copy()
            self.obj.flags.writeable = False
            self.writable = False
        elif k == "ndarray-strided":
            base = np.repeat(data[:length], 2)
            self.obj = base[::2]
            self.contiguous = length <= 1
        elif k == "memoryview":
            self.obj = memoryview(bytearray(data[:length].tobytes()))
        elif k == "memoryview-ro":
            self.obj = memoryview(bytearray(data[:length].tobytes())).toreadonly()
            self.writable = False
        elif k == "memoryview-strided":
            self.obj = memoryview(bytearray(np.repeat(data[:length], 2).tobytes()))[::2]
            self.contiguous = length <= 1
        elif k == "array":
            self.obj = array.array("B", data[:length].tobytes())
        else:
            mm = mmap.mmap(-1, max(length, 1))
            mm.write(data[:max(length, 1)].tobytes())
            self.obj = mm
            self._close = mm.close

    def raw(self) -> np.ndarray:
        """A copy of the bytes the buffer exposes."""
        if self.unsafe:
            return np.frombuffer(bytes(memoryview(self.obj).cast("B")), dtype=np.uint8).copy()
        if isinstance(self.obj, np.ndarray):
            return np.ascontiguousarray(self.obj).view(np.uint8).reshape(-1).copy()
        return np.frombuffer(bytes(self.obj), dtype=np.uint8).copy()

    @property
    def nbytes(self) -> int:
        return int(self.raw().size)

    def close(self) -> None:
        if self._close is not None:
            self._close()


def wild_offset(r: Reader, near: int) -> Any:
    k = r.byte()
    if k < 150:
        return r.int_like(16 * r.below(4))
    if k < 200:
        return r.below(max(near, 1) + 32)
    if k < 240:
        return r.int_like(r.interesting())
    return r.wrong_type()


def offset_violations(off: Any, desc: BufferTensorDesc, check_alignment: Any) -> Violations:
    v: Violations = set()
    if not isinstance(check_alignment, (bool, np.bool_)):
        v.add("TypeError")
    if not is_int(off):
        v.add("TypeError")
        return v
    off = int(off)
    if off < 0:
        v.add("BufferError")
    elif check_alignment is True or (isinstance(check_alignment, np.bool_) and check_alignment):
        if off % 16 or (desc.guaranteed_base_offset_alignment and off % desc.guaranteed_base_offset_alignment):
            v.add("DescriptorError")
    return v


def buffer_violations(buf: Buf, off: Any, desc: BufferTensorDesc, write: bool) -> Violations:
    v: Violations = set()
    if buf.unsafe:
        v.add("TypeError")
    if not buf.contiguous:
        v.add("BufferError")
    if write and not buf.writable:
        v.add("BufferError")
    if is_int(off) and int(off) + desc.total_tensor_size_in_bytes > buf.nbytes:
        v.add("BufferError")
    return v


def wild_check_alignment(r: Reader) -> Any:
    k = r.byte()
    if k < 180:
        return True
    if k < 250:
        return False
    return r.pick([np.bool_(True), np.bool_(False), 1, 0, "no", None])


def bytes_needed(off: Any, desc: BufferTensorDesc) -> int:
    """Bytes a buffer needs for the tensor at ``off`` (a wild offset counts as 0)."""
    return (int(off) if is_int(off) and 0 <= off < 4096 else 0) + desc.total_tensor_size_in_bytes


def buffer_length(r: Reader, need: int) -> int:
    k = r.byte()
    if k < 120:
        return need + r.below(40)
    if k < 190:
        return max(0, need - 1 - r.below(8))
    return r.below(2048)
