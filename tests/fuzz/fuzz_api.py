"""Fuzz dmlstride's public API with arbitrary descriptors, offsets and buffers.

One fuzz target, :func:`one_input`, turns a byte string into one call of the
public API (``BufferTensorDesc`` and its methods, the size functions,
``gather``, ``scatter``, ``copy_tensor``, ``view``, ``convert`` and ``gather``
with conversion, ``quantize``/``dequantize``, or the command line) and
checks the outcome:

* only documented exceptions escape (``DescriptorError``, ``TypeError``,
  ``BufferError``, ``ValueError``, ``IndexError``, ``OverflowError``), each
  with a one-line message;
* every call the rules allow succeeds, and every call they forbid (an element
  outside the buffer, a read-only destination, an overlapping destination, a
  field out of range, ...) is refused;
* descriptors with 5 to 8 dimensions and strides near 2**32 (where deciding
  overlap is hard) get every property and entry point answered within a
  bounded CPU time, and the buffer checks refuse a small buffer at once;
* a call that succeeds gives exactly what a numpy fancy-index reference gives,
  byte for byte; a scatter or copy writes the tensor's elements and nothing
  else; a refused call writes nothing;
* the interpreter never crashes.

Running it
----------
From the repository root, with dmlstride importable (installed, or built in
place and on ``PYTHONPATH``)::

    python tests/fuzz/fuzz_api.py --seconds 60            # about a minute
    python tests/fuzz/fuzz_api.py --seconds 3600          # an hour
    python tests/fuzz/fuzz_api.py --engine hypothesis --seconds 600

The engine is atheris (coverage-guided, ``pip install atheris``) when it is
installed, else hypothesis.  With atheris, arguments after ``--`` go to
libFuzzer, e.g. a corpus directory and ``-jobs=2``::

    python tests/fuzz/fuzz_api.py --seconds 600 -- corpus/ -jobs=2

A failing input is printed (hex) and, with atheris, saved as ``crash-*``; add
it to ``tests/fuzz/regressions/`` (any file name) and ``tests/test_fuzz_smoke.py``
replays it on every test run.  Replay one by hand with
``python tests/fuzz/fuzz_api.py --replay FILE``.

The last line of a run is ``executions: N in S s (R/s)``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import operator
import os
import sys
import time
import traceback
from typing import Any

import numpy as np

try:  # atheris instruments dmlstride's Python code for coverage when it is present
    import atheris  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - depends on the environment
    atheris = None

if atheris is not None and __name__ == "__main__" and "hypothesis" not in sys.argv:
    with atheris.instrument_imports(include=["dmlstride"]):
        import dmlstride
        import dmlstride.cli
else:
    import dmlstride
    import dmlstride.cli

from dmlstride import (
    BufferTensorDesc,
    TensorDataType,
    broadcast_strides,
    calc_buffer_tensor_size,
    calculate_strides,
    convert,
    copy_tensor,
    dequantize,
    gather,
    numpy_dtype,
    quantize,
    scatter,
    view,
)

# The suite's reference (tests/reference.py): sizes, offsets and gather/scatter
# from the memory model alone, independent of the package.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reference as ref  # noqa: E402

# The inputs (tests/fuzz/fuzz_inputs.py) sit beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_inputs import (  # noqa: E402
    ALLOWED,
    Buf,
    OUTCOMES,
    Reader,
    U32,
    VALID_TYPES,
    Violations,
    as_ints,
    buffer_length,
    buffer_violations,
    bytes_needed,
    check,
    desc_violations,
    expect,
    is_int,
    offset_violations,
    ref_gather,
    ref_scatter,
    same_bytes,
    shape_violations,
    tame_desc,
    wild_check_alignment,
    wild_dims,
    wild_int,
    wild_offset,
)

EXECUTIONS = 0
# ---------------------------------------------------------------------------------------
# the operations

def op_descriptor(r: Reader) -> None:
    dt = r.pick(VALID_TYPES) if r.chance(200) else r.pick([0, 14, -1, "float16", "f4", ">f4", "bool",
                                                           "unknown", np.uint8, np.complex64, None,
                                                           1.0, True, np.int64(9)])
    ndim = r.below(10)
    sizes = wild_dims(r, ndim, 6, 1)
    strides = None if r.chance(80) else wild_dims(r, ndim if r.chance(230) else ndim + 1, 9, 0)
    total = None if r.chance(150) else wild_int(r, 4096)
    align = 0 if r.chance(150) else wild_int(r, 64)
    flags = 0 if r.chance(200) else wild_int(r, 3)
    fields = (dt, sizes, strides, total, align, flags, r.chance(226))   # the last: directml_limits
    try:
        d = expect(lambda: BufferTensorDesc(*fields), desc_violations(*fields), "BufferTensorDesc")
    except ALLOWED:
        return
    sizes_i = as_ints(sizes)
    strides_i = None if strides is None else as_ints(strides)
    check(d.sizes == tuple(sizes_i), "sizes not kept")
    minimum = ref.min_size(d.data_type, sizes_i, strides_i)
    check(d.minimum_size_in_bytes == minimum, f"minimum size {d.minimum_size_in_bytes} != {minimum}")
    check(d.total_tensor_size_in_bytes == (minimum if total is None else int(total)), "total not kept")
    eff = strides_i if strides_i is not None else None
    if eff is not None:
        check(d.last_offset == sum((n - 1) * s for n, s in zip(sizes_i, eff)), "last_offset")
    check(d.element_count == int(np.prod(sizes_i, dtype=object)), "element_count")
    again = BufferTensorDesc(*d.__reduce__()[1])
    check(again == d and again.directml_limits == d.directml_limits, "pickle round trip")
    c = d.to_ctypes()
    check(c.DimensionCount == len(sizes_i) and c.TotalTensorSizeInBytes == d.total_tensor_size_in_bytes,
          "to_ctypes")
    if d.element_count <= 64:
        d.explain()


def op_sizes(r: Reader) -> None:
    which = r.below(3)
    if which == 0:
        dt = r.pick(VALID_TYPES) if r.chance(220) else r.pick([0, None, "x", 2.0])
        ndim = r.below(10)
        sizes = wild_dims(r, ndim, 1 << 16, 1)
        strides = None if r.chance(90) else wild_dims(r, ndim if r.chance(230) else ndim + 1, 1 << 16, 0)
        violations, _ = shape_violations(dt, sizes, strides)
        try:
            got = expect(lambda: calc_buffer_tensor_size(dt, sizes, strides), violations, "calc_buffer_tensor_size")
        except ALLOWED:
            return
        want = ref.min_size(dt, as_ints(sizes), None if strides is None else as_ints(strides))
        check(got == want, f"calc_buffer_tensor_size {got} != {want}")
    elif which == 1:
        ndim = r.below(9) + 1
        sizes = [r.pick([1, 2, 3, 5, 2**16, 2**31, 2**32 - 1]) for _ in range(ndim)]
        if r.chance(128):
            layout = r.pick(["HW", "WH", "DHW", "WHD", "NCHW", "NHWC", "NCDHW", "NDHWC", "nchw", "XY", "", "W"])
        else:
            layout = tuple(r.below(ndim + 1) for _ in range(ndim if r.chance(220) else ndim + 1))
        broadcast = None if r.chance(160) else [r.chance(100) for _ in range(ndim if r.chance(230) else 1)]
        try:
            got = calculate_strides(layout, sizes, broadcast)
        except ALLOWED as exc:
            check("\n" not in str(exc), "multi-line message")
            return
        check(len(got) == ndim and all(0 <= s < U32 for s in got), f"strides {got} out of range")
        # The strides are packed: sorted by stride, each is the product of the faster sizes.
        bc = broadcast or [False] * ndim
        check(all(got[i] == 0 for i in range(ndim) if bc[i]), f"broadcast dimensions of {got} not 0")
        live = sorted((s, sizes[i]) for i, s in enumerate(got) if not bc[i])
        running = 1
        for s, n in live:
            check(s == running, f"calculate_strides({layout!r}, {sizes}) = {got} is not packed")
            running *= n
    else:
        ndim = r.below(4) + 1
        sizes = [r.below(4) + 1 for _ in range(ndim)]
        physical = [n if r.chance(160) else r.pick([1, n + 1, 0]) for n in sizes[r.below(ndim + 1):]]
        if r.chance(10):
            physical = [1] + physical
        try:
            got = broadcast_strides(physical, sizes)
        except ALLOWED as exc:
            check("\n" not in str(exc), "multi-line message")
            return
        # Reference: numpy's broadcast_to of a packed array, in elements.
        base = np.zeros(physical or [1], dtype=np.uint8)
        want = np.broadcast_to(base.reshape(physical) if physical else base[0], sizes).strides
        check(all(g == w for g, w, n in zip(got, want, sizes) if n > 1),
              f"broadcast_strides({physical}, {sizes}) = {got}, numpy {want}")


def op_gather(r: Reader) -> None:
    desc, _ = tame_desc(r)
    if desc is None:
        return
    check_alignment = wild_check_alignment(r)
    off = wild_offset(r, 64)
    buf = Buf(r, buffer_length(r, min(bytes_needed(off, desc), 4096)))
    try:
        before = buf.raw()
        violations = offset_violations(off, desc, check_alignment) | buffer_violations(buf, off, desc, False)
        out, out_violations = wild_out(r, desc)
        violations |= out_violations
        out_before = out.copy() if isinstance(out, np.ndarray) else None
        try:
            got = expect(lambda: gather(buf.obj, desc, offset=off, out=out, check_alignment=check_alignment),
                         violations, "gather")
        except ALLOWED:
            if out_before is not None:
                check(same_bytes(out, out_before), "gather wrote out although refused")
            return
        finally:
            check(np.array_equal(buf.raw(), before), "gather modified its source")
        if out is not None:
            check(got is out, "gather did not return out")
        want = ref_gather(before, int(off), desc)
        check(same_bytes(got, want), f"gather result differs from the reference for {desc!r} at {off}")
    finally:
        buf.close()


def wild_out(r: Reader, desc: BufferTensorDesc) -> tuple[Any, Violations]:
    """An ``out`` argument for gather (usually None), and the rules it breaks."""
    dtype = numpy_dtype(desc.data_type)
    k = r.byte()
    if k < 190:
        return None, set()
    if k < 230:
        return np.full(desc.sizes, 7, dtype=dtype), set()
    b = r.byte()
    kind = b % 5
    if kind == 0:
        return np.full(tuple(desc.sizes) + (1,), 7, dtype=dtype), {"ValueError"}
    if kind == 1:
        other = np.dtype(np.float32) if dtype != np.float32 else np.dtype(np.int32)
        return np.full(desc.sizes, 7, dtype=other), {"TypeError"}
    if kind == 2:
        out = np.full(desc.sizes, 7, dtype=dtype)
        out.flags.writeable = False
        return out, {"BufferError"}
    if kind == 3:
        out = np.full(tuple(reversed(desc.sizes)), 7, dtype=dtype).T
        return out, set() if out.flags.c_contiguous else {"BufferError"}
    if b >= 200:
        return np.full(desc.sizes, None, dtype=object), {"TypeError"}     # holds Python objects
    return np.full(desc.sizes, 7, dtype=dtype).tolist(), {"TypeError"}


def wild_values(r: Reader, desc: BufferTensorDesc) -> tuple[Any, Violations]:
    """Values to scatter, and the rules they break on their own."""
    dtype = numpy_dtype(desc.data_type)
    rng = np.random.default_rng(r.uint(2))
    four = desc.element_bits == 4
    k = r.byte()
    if k < 200:
        if four:
            lo, hi = (-8, 8) if desc.data_type is TensorDataType.INT4 else (0, 16)
            values = rng.integers(lo, hi, size=desc.sizes).astype(dtype)
            if r.chance(30):
                values.flat[r.below(values.size)] = r.pick([hi, lo - 1]) if lo < 0 else hi
                return values, {"ValueError"}
            return values, set()
        values = rng.integers(0, 256, size=desc.element_count * dtype.itemsize, dtype=np.uint8)
        return values.view(dtype).reshape(desc.sizes), set()
    if k < 220:
        shape = tuple(desc.sizes) + (1,) if r.chance(128) else tuple(reversed(desc.sizes)) + (2,)
        return np.zeros(shape, dtype=dtype), {"ValueError"}
    if k < 240:
        other = r.pick([np.float64, np.int64, np.complex64, np.bool_, np.uint64, np.int8])
        values = np.zeros(desc.sizes, dtype=other)
        ok = np.can_cast(values.dtype, dtype, casting="same_kind")
        return values, set() if ok else {"TypeError"}
    if k < 250:
        values = np.zeros(desc.sizes, dtype=dtype).tolist()
        ok = np.can_cast(np.asarray(values).dtype, dtype, casting="same_kind")
        return values, set() if ok else {"TypeError"}
    if k >= 253:
        # Python objects, as an object array (253, 254) or a nested list of them (255): refused, never converted.
        values = np.empty(desc.sizes, dtype=object)
        values.flat[:] = [object() for _ in range(values.size)]
        return (values if k < 255 else values.tolist()), {"TypeError"}
    return [[0] * (r.below(3) + 2), [0]], {"ValueError"}      # ragged


def op_scatter(r: Reader) -> None:
    desc, _ = tame_desc(r)
    if desc is None:
        return
    values, value_violations = wild_values(r, desc)
    check_alignment = wild_check_alignment(r)
    off = wild_offset(r, 64)
    buf = Buf(r, buffer_length(r, min(bytes_needed(off, desc), 4096)))
    try:
        before = buf.raw()
        violations = (offset_violations(off, desc, check_alignment) | value_violations
                      | buffer_violations(buf, off, desc, True))
        if desc.has_overlap:
            violations.add("DescriptorError")
        try:
            expect(lambda: scatter(values, desc, buf.obj, offset=off, check_alignment=check_alignment),
                   violations, "scatter")
        except ALLOWED:
            check(np.array_equal(buf.raw(), before), "scatter wrote although refused")
            return
        want = before.copy()
        ref_scatter(want, int(off), desc, np.asarray(values))
        check(np.array_equal(buf.raw(), want), f"scatter result differs from the reference for {desc!r} at {off}")
    finally:
        buf.close()


def op_copy(r: Reader) -> None:
    src_desc, _ = tame_desc(r)
    if src_desc is None:
        return
    if r.chance(230):
        ndim = src_desc.dimension_count
        style = r.byte()
        if style < 80:
            strides = None
        elif style < 200:
            strides = [r.pick([0, 1, 1, 2, 3, 4, 6, 8]) for _ in range(ndim)]
        else:
            strides = list(calculate_strides(tuple(range(ndim))[::-1], src_desc.sizes))   # column-major
        try:
            dst_desc = BufferTensorDesc(src_desc.data_type, src_desc.sizes, strides)
        except ALLOWED:
            return
    else:
        dst_desc, _ = tame_desc(r)
        if dst_desc is None:
            return
    check_alignment = wild_check_alignment(r)
    soff = wild_offset(r, 64)
    doff = wild_offset(r, 64)
    same = r.chance(70)
    sneed = bytes_needed(soff, src_desc)
    dneed = bytes_needed(doff, dst_desc)
    sbuf = Buf(r, buffer_length(r, min(max(sneed, dneed) if same else sneed, 4096)))
    dbuf = sbuf if same else Buf(r, buffer_length(r, min(dneed, 4096)))
    try:
        sbefore = sbuf.raw()
        dbefore = dbuf.raw()
        violations = (offset_violations(soff, src_desc, check_alignment)
                      | offset_violations(doff, dst_desc, check_alignment)
                      | buffer_violations(sbuf, soff, src_desc, False)
                      | buffer_violations(dbuf, doff, dst_desc, True))
        if src_desc.sizes != dst_desc.sizes or src_desc.data_type is not dst_desc.data_type:
            violations.add("DescriptorError")
        if dst_desc.has_overlap:
            violations.add("DescriptorError")
        try:
            expect(lambda: copy_tensor(sbuf.obj, src_desc, dbuf.obj, dst_desc, src_offset=soff, dst_offset=doff,
                                       check_alignment=check_alignment), violations, "copy_tensor")
        except ALLOWED:
            check(np.array_equal(dbuf.raw(), dbefore), "copy_tensor wrote although refused")
            check(np.array_equal(sbuf.raw(), sbefore), "copy_tensor changed its source although refused")
            return
        want = dbefore.copy()
        ref_scatter(want, int(doff), dst_desc, ref_gather(sbefore, int(soff), src_desc))
        check(np.array_equal(dbuf.raw(), want),
              f"copy_tensor result differs from the reference: {src_desc!r} at {soff} -> {dst_desc!r} at {doff}"
              f"{' (same buffer)' if same else ''}")
        if not same:
            check(np.array_equal(sbuf.raw(), sbefore), "copy_tensor modified its source")
    finally:
        sbuf.close()
        if dbuf is not sbuf:
            dbuf.close()


def op_view(r: Reader) -> None:
    desc, _ = tame_desc(r)
    if desc is None:
        return
    check_alignment = wild_check_alignment(r)
    off = wild_offset(r, 64)
    buf = Buf(r, buffer_length(r, min(bytes_needed(off, desc), 4096)))
    try:
        before = buf.raw()
        violations = offset_violations(off, desc, check_alignment) | buffer_violations(buf, off, desc, False)
        if desc.element_bits == 4:
            violations.add("DescriptorError")
        try:
            v = expect(lambda: view(buf.obj, desc, offset=off, check_alignment=check_alignment), violations, "view")
        except ALLOWED:
            return
        check(same_bytes(np.ascontiguousarray(v), ref_gather(before, int(off), desc)), "view differs")
        check(v.flags.writeable == (buf.writable and not desc.has_overlap), "view writability")
        del v
    finally:
        buf.close()


def op_methods(r: Reader) -> None:
    desc, _ = tame_desc(r)
    if desc is None:
        return
    which = r.below(3)
    if which == 0:
        index = [r.below(n + 1) - (1 if r.chance(10) else 0) for n in desc.sizes]
        if r.chance(20):
            index = index[:-1] if index else [0]
        if r.chance(10) and index:
            index[0] = r.wrong_type()
        try:
            got = desc.offset_of(index)
        except ALLOWED as exc:
            check("\n" not in str(exc), "multi-line message")
            ok = (len(index) == desc.dimension_count and all(is_int(i) for i in index)
                  and all(0 <= i < n for i, n in zip(index, desc.sizes)))
            check(not ok, f"offset_of refused a valid index {index}: {exc}")
            return
        check(got == sum(int(i) * s for i, s in zip(index, desc.effective_strides)), "offset_of value")
        check(all(0 <= i < n for i, n in zip(index, desc.sizes)), "offset_of accepted an index out of range")
    elif which == 1:
        rank = r.below(10)
        try:
            d2 = desc.to_rank(rank)
        except ALLOWED:
            return
        check(d2.dimension_count == rank and d2.element_count == desc.element_count, "to_rank")
        check(np.array_equal(np.sort(d2.offsets()), np.sort(desc.offsets())), "to_rank moved elements")
    else:
        offs = desc.offsets()
        check(offs.size == desc.element_count and int(offs.max()) == desc.last_offset, "offsets")
        check(desc.has_overlap == (np.unique(offs).size != offs.size), "has_overlap")


def hostile_desc(r: Reader) -> BufferTensorDesc:
    """5 to 8 dimensions of up to 16 elements with strides near 2**32, where overlap is hard to decide."""
    ndim = 5 + r.below(4)
    big = r.chance(160)
    sizes = [(r.below(5) + 12 if big else r.below(16) + 1) for _ in range(ndim)]
    while int(np.prod(sizes, dtype=np.float64)) >= U32:
        sizes[sizes.index(max(sizes))] -= 1
    strides = [2**31 + r.uint(4) % 2**31 for _ in range(ndim)]
    style = r.byte()
    if style < 90:
        # The last stride a small combination of the others: an overlap for the analysis to find.
        combo = abs(sum((r.below(7) - 3) * s for s in strides[:-1]))
        if 0 < combo < U32:
            strides[-1] = combo
    elif style < 130:
        strides = [U32 - 1 - r.below(64) for _ in range(ndim)]
    dt = r.pick([TensorDataType.UINT8, TensorDataType.FLOAT32, TensorDataType.INT4, TensorDataType.FLOAT64])
    return BufferTensorDesc(dt, sizes, strides, directml_limits=False)


# CPU seconds any one call may spend on a hostile descriptor (the analysis itself
# stays under 0.1 s; the margin keeps a busy machine from failing the run).
HOSTILE_CPU_LIMIT = 0.25


def timed(call: Any, label: str) -> Any:
    """``call()``, checked to return (or raise an allowed error) within HOSTILE_CPU_LIMIT of CPU time."""
    start = time.thread_time()
    try:
        return call()
    finally:
        spent = time.thread_time() - start
        check(spent < HOSTILE_CPU_LIMIT, f"{label} took {spent:.3f} s of CPU")


def op_hostile(r: Reader) -> None:
    """Many dimensions, huge strides: every property and entry point answers quickly and safely."""
    desc = hostile_desc(r)
    which = r.below(5)
    if which == 0:
        overlap = timed(lambda: desc.has_overlap, "has_overlap")
        status = dmlstride._overlap.overlap_status(desc.sizes, desc.effective_strides)
        check(overlap is (status is not False), "has_overlap disagrees with the analysis")
        check(timed(lambda: desc.is_padded, "is_padded") is (not overlap and desc.last_offset + 1 > desc.element_count),
              "is_padded")
        packed = timed(lambda: desc.is_packed, "is_packed")
        if desc.element_count <= 1 << 14:
            truth = ref.overlaps(desc.sizes, desc.effective_strides)
            check(status in (None, truth), f"overlap analysis says {status} for {desc!r}, enumeration {truth}")
            offs = np.sort(ref.element_offsets_np(desc.sizes, desc.effective_strides))
            check(packed is bool(np.array_equal(offs, np.arange(offs.size))), "is_packed")
    elif which == 1:
        text = timed(lambda: desc.explain(r.pick([1, 8, 64])), "explain")
        status = dmlstride._overlap.overlap_status(desc.sizes, desc.effective_strides)
        check(("overlap not ruled out" in text) is (status is None), "explain's overlap wording")
    else:
        # A small buffer: the bounds check refuses at once, before any overlap analysis.
        buf = bytearray(r.below(64))
        before = bytes(buf)
        values = np.broadcast_to(np.zeros((), dtype=numpy_dtype(desc.data_type)), desc.sizes)
        calls = {2: lambda: scatter(values, desc, buf, check_alignment=False),
                 3: lambda: copy_tensor(buf, desc, buf, desc, check_alignment=False),
                 4: lambda: view(buf, desc, check_alignment=False)}
        label = {2: "hostile scatter", 3: "hostile copy_tensor", 4: "hostile view"}[which]
        try:
            timed(lambda: expect(calls[which], {"BufferError"} | ({"DescriptorError"} if which == 4 and
                                                                     desc.element_bits == 4 else set()), label),
                  label)
        except ALLOWED:
            pass
        check(bytes(buf) == before, f"{label} wrote although refused")


CLI_WORDS = ["size", "describe", "--dtype", "--sizes", "--strides", "--layout", "--broadcast", "--row-pitch",
             "--total-size", "--alignment", "--max-elements", "--version", "float32", "uint8", "int4", "x",
             "2,3", "1,1,3,5", "0", "-1", "3", "4294967296", "4294967295,4294967295", "2,,3", "", "NCHW", "HW",
             "C", "1,0", "16", "64", "65537,65536", "65536,1", "=", "--sizes=-1", "--strides=-2,1", "1.5",
             "NHWC", "WH", "2147483649", "8"]


def op_cli(r: Reader) -> None:
    argv = [r.pick(CLI_WORDS) for _ in range(r.below(9))]
    if "--max-elements" in argv:
        i = argv.index("--max-elements")
        argv[i + 1:i + 2] = [r.pick(["0", "1", "8", "64", "-1", "x"])]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = dmlstride.cli.main(argv)
        except SystemExit as stop:  # pragma: no cover - main returns instead
            rc = stop.code
    text = err.getvalue()
    check(rc in (0, 2), f"cli {argv} returned {rc!r}")
    if rc == 2:
        lines = text.splitlines()
        check(len(lines) == 1 and lines[0].startswith("dmlstride: error: "),
              f"cli {argv} error output is not one line: {text!r}")
        check("Traceback" not in text, "traceback on stderr")


# ---------------------------------------------------------------------------------------
# conversion: convert, gather with dtype/scale/bias, quantize and dequantize

QUANTIZED = ["INT4", "UINT4", "INT8", "UINT8", "INT16", "UINT16"]


def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    """Byte-equal, except that any NaN matches any NaN (payloads may differ)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype.kind != "f":
        return got.tobytes() == want.tobytes()
    nan = np.isnan(got)
    return bool(np.array_equal(nan, np.isnan(want))) and got[~nan].tobytes() == want[~nan].tobytes()


def _index(axis: Any) -> int | None:
    """axis as an integer if it is one (operator.index accepts it; bools and
    numpy.timedelta64, a subclass of numpy.integer, are not), else None."""
    if isinstance(axis, (bool, np.bool_)):
        return None
    try:
        return operator.index(axis)
    except TypeError:
        return None


def wild_affine(r: Reader, sizes: tuple[int, ...]) -> tuple[Any, Any, Any, Violations]:
    """scale, bias and axis for convert / gather, and the rules they break."""
    v: Violations = set()
    ndim = len(sizes)
    axis: Any = None
    k = r.byte()
    if k < 120:
        axis = r.below(ndim) - (ndim if r.chance(60) else 0)
    elif k < 140:
        axis = r.pick([ndim, -ndim - 1, 99])
        v.add("ValueError")
    elif k < 150:
        axis = r.wrong_type()
        if axis is not None:
            v.add("TypeError")

    def one() -> Any:
        j = r.byte()
        if j < 80:
            return None
        if j < 160:
            return r.pick([0.5, -1.25, 3.0, 0.0, 1e30, float("nan"), float("inf"), 7, np.float32(0.1), np.int64(-3)])
        if j < 230:
            if isinstance(axis, int) and not isinstance(axis, bool) and -ndim <= axis < ndim:
                n = sizes[axis] + (r.pick([-1, 1]) if r.chance(20) else 0)
            else:
                n = r.below(4) + 1
            values = np.random.default_rng(r.uint(2)).standard_normal(max(n, 0)) * 10
            return values.tolist() if r.chance(128) else values.astype(r.pick([np.float32, np.float64, np.int16]))
        return r.pick(["2", 1j, True, [[1.0]], [1.0, "x"]])

    scale, bias = one(), one()
    for p in (scale, bias):
        if p is None:
            continue
        arr = np.asarray(p)
        if isinstance(p, str) or arr.dtype.kind not in "fiu":
            v.add("TypeError")
            continue
        if arr.ndim == 1:
            good_axis = _index(axis) is not None and -ndim <= _index(axis) < ndim
            if axis is None or (good_axis and arr.shape[0] != sizes[_index(axis)]):
                v.add("ValueError")
        elif arr.ndim > 1:
            v.add("ValueError")
    return scale, bias, axis, v


def _ref_convert(values: np.ndarray, src: str, dst: str, scale: Any, bias: Any, axis: Any) -> np.ndarray:
    ax = None if axis is None else int(axis) % values.ndim
    return ref.convert_values(values, src, dst, scale, bias, ax)


def op_convert(r: Reader) -> None:
    src_desc, _ = tame_desc(r)
    if src_desc is None:
        return
    dst_type = r.pick(VALID_TYPES)
    if r.chance(40):
        ddesc, _ = tame_desc(r)
        if ddesc is None:
            return
    else:
        ndim = src_desc.dimension_count
        strides = None if r.chance(100) else [r.pick([0, 1, 2, 3, 5, 8]) for _ in range(ndim)]
        ddesc = BufferTensorDesc(dst_type, src_desc.sizes, strides)
    dst_desc = ddesc
    scale, bias, axis, violations = wild_affine(r, src_desc.sizes)
    check_alignment = wild_check_alignment(r)
    soff = wild_offset(r, 64)
    doff = wild_offset(r, 64)
    to_gather = r.byte() >= 150
    same = not to_gather and r.chance(60)
    sneed = bytes_needed(soff, src_desc)
    dneed = bytes_needed(doff, dst_desc)
    sbuf = Buf(r, buffer_length(r, min(max(sneed, dneed) if same else sneed, 4096)))
    dbuf = sbuf if same else Buf(r, buffer_length(r, min(dneed, 4096)))
    src_name, dst_name = src_desc.data_type.name, dst_desc.data_type.name
    try:
        sbefore = sbuf.raw()
        dbefore = dbuf.raw()
        violations |= offset_violations(soff, src_desc, check_alignment) | buffer_violations(sbuf, soff, src_desc, False)
        if to_gather:
            if scale is None and bias is None:
                scale = 1.0  # the converting path
            try:
                got = expect(lambda: gather(sbuf.obj, src_desc, offset=soff, check_alignment=check_alignment,
                                            dtype=dst_name, scale=scale, bias=bias, axis=axis),
                             violations, "gather-convert")
            except ALLOWED:
                return
            finally:
                check(np.array_equal(sbuf.raw(), sbefore), "gather with conversion modified its source")
            want = _ref_convert(ref_gather(sbefore, int(soff), src_desc), src_name, dst_name, scale, bias, axis)
            check(same_values(got, want), f"gather {src_name}->{dst_name} differs from the reference for {src_desc!r}")
            return
        violations |= offset_violations(doff, dst_desc, check_alignment) | buffer_violations(dbuf, doff, dst_desc, True)
        if src_desc.sizes != dst_desc.sizes or dst_desc.has_overlap:
            violations.add("DescriptorError")
        try:
            expect(lambda: convert(sbuf.obj, src_desc, dbuf.obj, dst_desc, scale=scale, bias=bias, axis=axis,
                                   src_offset=soff, dst_offset=doff, check_alignment=check_alignment),
                   violations, "convert")
        except ALLOWED:
            check(np.array_equal(dbuf.raw(), dbefore), "convert wrote although refused")
            check(np.array_equal(sbuf.raw(), sbefore), "convert changed its source although refused")
            return
        values = _ref_convert(ref_gather(sbefore, int(soff), src_desc), src_name, dst_name, scale, bias, axis)
        want = dbefore.copy()
        ref_scatter(want, int(doff), dst_desc, values)
        got_raw = dbuf.raw()
        # Compare element values (NaN payloads aside) and every byte outside the elements.
        touched = ref.touched_bytes(dst_name, dst_desc.sizes, dst_desc.strides or ref.packed_strides(dst_desc.sizes),
                                    int(doff))
        outside = np.ones(want.size, bool)
        outside[sorted(touched)] = False
        check(np.array_equal(got_raw[outside], want[outside]), "convert wrote outside the destination's elements")
        check(same_values(ref_gather(got_raw, int(doff), dst_desc), ref_gather(want, int(doff), dst_desc)),
              f"convert {src_name}->{dst_name} differs from the reference{' (same buffer)' if same else ''}")
    finally:
        sbuf.close()
        if dbuf is not sbuf:
            dbuf.close()


def wild_quant_params(r: Reader, sizes: tuple[int, ...], qtype: str | None) -> tuple[Any, Any, Any, Any, Violations]:
    """scale, zero point, axis and block size for quantize / dequantize, and the rules they break."""
    v: Violations = set()
    ndim = len(sizes)
    rng = np.random.default_rng(r.uint(2))
    axis: Any = r.below(ndim) - (ndim if r.chance(50) else 0)
    if r.chance(15):
        axis = r.pick([ndim, -ndim - 1, 1.0])
    ax_ok = isinstance(axis, int) and -ndim <= axis < ndim
    mode = r.below(3)
    block: Any = 0
    if mode == 0:
        shape: tuple[int, ...] = ()
    elif mode == 1:
        shape = (sizes[axis] if ax_ok else 2,)
        if not ax_ok and shape[0] != 1:
            v.add("TypeError" if isinstance(axis, float) else "ValueError")
    else:
        block = r.pick([1, 2, 3, 4])
        if ax_ok:
            shape = tuple(-(-n // block) if k == axis % ndim else n for k, n in enumerate(sizes))
        else:
            shape = tuple(sizes)
            v.add("TypeError" if isinstance(axis, float) else "ValueError")
    if isinstance(axis, float):
        v.add("TypeError")
    if r.chance(20) and len(shape) > 0:
        shape = shape[:-1] + (shape[-1] + 1,)
        if not (mode == 1 and shape == (1,)):
            v.add("ValueError")
    if r.chance(10):
        block = r.pick([-1, 2.0])
        v.add("ValueError" if block == -1 else "TypeError")
    scale = np.asarray(rng.uniform(0.05, 3, size=shape) * rng.choice([-1, 1], size=shape), dtype=np.float32)
    if r.chance(20) and scale.size:
        scale.flat[0] = r.pick([0.0, np.nan, np.inf, -np.inf])
        v.add("ValueError")
    zp: Any = None
    if qtype is not None and r.chance(150):
        lo, hi = ref.INT_RANGES[qtype] if qtype in QUANTIZED else (-4, 4)
        zp = rng.integers(lo, hi + 1, size=shape)
        if r.chance(20):
            zp = np.asarray(zp).astype(np.int64)
            if zp.size:
                zp.flat[0] = r.pick([lo - 1, hi + 1])
                v.add("ValueError")
        if qtype == "INT32":
            v.add("ValueError")
    return scale, zp, axis, block, v


def op_quant(r: Reader) -> None:
    desc, _ = tame_desc(r)
    if desc is None:
        return
    if r.chance(220):
        qtype = r.pick(QUANTIZED + ["INT32"])
        try:
            desc = BufferTensorDesc(qtype, desc.sizes, desc.strides)
        except ALLOWED:
            return
    qname = desc.data_type.name
    sizes = desc.sizes
    scale, zp, axis, block, violations = wild_quant_params(
        r, sizes, qname if qname in QUANTIZED or qname == "INT32" else None)
    check_alignment = wild_check_alignment(r)
    off = wild_offset(r, 64)
    buf = Buf(r, buffer_length(r, min(bytes_needed(off, desc), 4096)))
    try:
        before = buf.raw()
        violations |= offset_violations(off, desc, check_alignment)
        if r.byte() < 128:
            violations |= buffer_violations(buf, off, desc, True)
            if qname not in QUANTIZED or desc.has_overlap:
                violations.add("DescriptorError")
            x = (np.random.default_rng(r.uint(2)).standard_normal(sizes) * 20).astype(np.float32)
            try:
                expect(lambda: quantize(x, desc, buf.obj, scale, zp, axis=axis, block_size=block, offset=off,
                                        check_alignment=check_alignment), violations, "quantize")
            except ALLOWED:
                check(np.array_equal(buf.raw(), before), "quantize wrote although refused")
                return
            want = before.copy()
            ax = int(axis) % len(sizes)
            ref_scatter(want, int(off), desc, ref.quantize_values(x, qname, scale, zp, ax, block))
            check(np.array_equal(buf.raw(), want), f"quantize differs from the reference for {desc!r}")
            return
        violations |= buffer_violations(buf, off, desc, False)
        if qname not in QUANTIZED and qname != "INT32":
            violations.add("DescriptorError")
        dtype = r.pick(["float32", "float16", "float32", "int8"])
        if dtype == "int8":
            violations.add("ValueError")
        try:
            got = expect(lambda: dequantize(buf.obj, desc, scale, zp, axis=axis, block_size=block, dtype=dtype,
                                            offset=off, check_alignment=check_alignment), violations, "dequantize")
        except ALLOWED:
            return
        finally:
            check(np.array_equal(buf.raw(), before), "dequantize modified its source")
        ax = int(axis) % len(sizes)
        with np.errstate(over="ignore"):
            want = ref.dequantize_values(ref_gather(before, int(off), desc), scale, zp, ax, block, dtype.upper())
        check(same_values(got, want), f"dequantize differs from the reference for {desc!r}")
    finally:
        buf.close()


OPERATIONS = [op_descriptor, op_sizes, op_gather, op_gather, op_scatter, op_scatter, op_copy, op_copy,
              op_view, op_methods, op_cli, op_hostile, op_convert, op_convert, op_quant, op_quant]


def one_input(data: bytes) -> None:
    """The fuzz target: one API call decided by ``data``, checked against the rules."""
    global EXECUTIONS
    EXECUTIONS += 1
    r = Reader(data)
    OPERATIONS[r.below(len(OPERATIONS))](r)


# ---------------------------------------------------------------------------------------
# drivers

def _report(start: float) -> None:
    elapsed = time.monotonic() - start
    if OUTCOMES:
        print("outcomes (operation: result or exception, count):")
        for (label, outcome), n in sorted(OUTCOMES.items()):
            print(f"  {label}: {outcome}: {n}")
    print(f"executions: {EXECUTIONS} in {elapsed:.1f} s ({EXECUTIONS / max(elapsed, 1e-9):.0f}/s)", flush=True)


def run_hypothesis(seconds: float, seed: int | None) -> int:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    start = time.monotonic()
    base = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"engine: hypothesis, seed {base}", flush=True)
    batch = 0
    while time.monotonic() - start < seconds:
        @hseed(base + batch)
        @settings(max_examples=300, deadline=None, database=None, derandomize=False,
                  phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
                  print_blob=True)
        @given(st.binary(max_size=400))
        def target(data: bytes) -> None:
            one_input(data)

        try:
            target()
        except Exception:
            _report(start)
            print("FAILURE:", flush=True)
            traceback.print_exc(file=sys.stdout)
            return 1
        batch += 1
    _report(start)
    return 0


def run_atheris(seconds: float, extra: list[str]) -> int:
    print("engine: atheris", flush=True)
    args = [sys.argv[0], f"-max_total_time={int(max(1, seconds))}", "-rss_limit_mb=4096", *extra]
    atheris.Setup(args, one_input)
    atheris.Fuzz()
    return 0  # libFuzzer exits on its own and prints "Done N runs in S second(s)"


def replay(paths: list[str]) -> int:
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        print(f"replaying {path} ({len(data)} bytes): {data.hex()}")
        one_input(data)
    print("all inputs passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description="Fuzz dmlstride's public API.")
    p.add_argument("--seconds", type=float, default=60.0, help="how long to run (default 60)")
    p.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    p.add_argument("--seed", type=int, help="hypothesis engine: base seed")
    p.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs once and stop")
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if atheris is not None else "hypothesis"
    if engine == "atheris":
        if atheris is None:
            p.error("atheris is not installed (pip install atheris)")
        return run_atheris(args.seconds, extra)
    return run_hypothesis(args.seconds, args.seed)


if __name__ == "__main__":
    sys.exit(main())
