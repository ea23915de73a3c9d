"""The benchmark cases and the implementations they compare.

A :class:`Row` is one operation (``gather``, ``scatter`` or ``copy``, meaning
:func:`dmlstride.copy_tensor`) on one tensor layout.  :func:`prepare` allocates
its buffers once and returns the competing implementations as zero-argument
callables; each returns the bytes it produced (the gathered array, or its own
destination buffer) so the harness can check that they all agree before it
times them.

The numpy baselines are the idioms people reach for:

* gather: ``as_strided(typed_view, shape, byte_strides).copy()`` and
  ``np.ndarray(shape, dtype, buffer=raw, offset=..., strides=...).copy()``;
* scatter: the same two views of the destination, assigned ``view[...] = packed``;
* copy: ``dst_view[...] = src_view`` with both views built either way;
* memcpy: ``np.copyto`` of packed arrays of the same number of bytes (the
  practical limit);
* INT4 has no numpy view, so its baseline is a vectorised numpy unpack
  (and repack, for the copy) written here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

import dmlstride as ds

try:  # an optional extra column, never a dependency
    import torch
except ImportError:
    torch = None

FILL = 0xA5  # initial byte of every destination buffer, so untouched padding is checked too

# Implementation keys, in table order.
DMLSTRIDE = "dmlstride"
NP_AS_STRIDED = "numpy_as_strided"
NP_NDARRAY = "numpy_ndarray"
NP_REFERENCE = "numpy_reference"
MEMCPY = "memcpy"
TORCH = "torch"
NUMPY_KEYS = (NP_AS_STRIDED, NP_NDARRAY, NP_REFERENCE)


@dataclass(frozen=True)
class Row:
    """One benchmarked operation.

    ``src``/``dst`` are the strided sides; ``None`` means a packed numpy array
    (the output of a gather, the input of a scatter).
    """

    name: str
    group: str  # "layout", "inner", "broadcast", "int4" or "tiny"
    op: str  # "gather", "scatter" or "copy"
    src: ds.BufferTensorDesc | None
    dst: ds.BufferTensorDesc | None
    src_offset: int = 0
    dst_offset: int = 0
    src_buffer_bytes: int | None = None  # default: offset + total_tensor_size_in_bytes
    dst_buffer_bytes: int | None = None
    scaling: bool = False  # also measured at 1 and 2 threads

    @property
    def desc(self) -> ds.BufferTensorDesc:
        """The strided side (the source of a gather or copy, the destination of a scatter)."""
        d = self.dst if self.op == "scatter" else self.src
        assert d is not None
        return d

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.desc.sizes

    @property
    def dtype(self) -> np.dtype:
        return ds.numpy_dtype(self.desc.data_type)

    @property
    def bytes_moved(self) -> int:
        """Bytes of the tensor in packed form as the destination holds it.

        For every type of 8 bits or more that is ``element_count * itemsize``;
        an INT4 gather produces one int8 per element, an INT4 copy writes
        packed nibbles.
        """
        if self.op == "copy":
            assert self.dst is not None
            return (self.dst.element_count * self.dst.element_bits + 7) // 8
        return self.desc.element_count * self.dtype.itemsize


@dataclass
class Prepared:
    """A row's buffers and the implementations to compare."""

    impls: dict[str, Callable[[], Any]]
    new_gather: Callable[[], np.ndarray] | None = None  # an allocating dmlstride gather


# -- the case list ---------------------------------------------------------------------------


def _packed(dtype: str, sizes: tuple[int, ...]) -> ds.BufferTensorDesc:
    return ds.BufferTensorDesc(dtype, sizes)


def _transposing(fwd: str, rev: str, dtype: str, sizes: tuple[int, ...], layout: Any,
                 scaling: tuple[str, ...] = (), both_copies: bool = False) -> list[Row]:
    """gather ``layout -> packed`` (named ``fwd``), scatter ``packed -> layout`` (``rev``), copy."""
    strided = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
    packed = _packed(dtype, sizes)
    rows = [
        Row(f"gather/{fwd}", "layout", "gather", strided, None, scaling="gather" in scaling),
        Row(f"scatter/{rev}", "layout", "scatter", None, strided, scaling="scatter" in scaling),
        Row(f"copy/{fwd}", "layout", "copy", strided, packed, scaling="copy" in scaling),
    ]
    if both_copies:
        rows.append(Row(f"copy/{rev}", "layout", "copy", packed, strided))
    return rows


def build_rows(quick: bool = False) -> list[Row]:
    """Every benchmark row; ``quick`` shrinks the tensors to a few MiB.

    At full size every big tensor is 62-72 MiB packed, so that it leaves a 32 MiB L3 cache.
    """

    def pick(full: tuple[int, ...], small: tuple[int, ...]) -> tuple[int, ...]:
        return small if quick else full

    rows: list[Row] = []
    c64 = pick((4, 64, 256, 256), (1, 64, 64, 64))  # float32: 64 MiB / 1 MiB
    rows += _transposing("nhwc-nchw-f32-c64", "nchw-nhwc-f32-c64", "float32", c64, "NHWC", scaling=("gather",))
    rows += _transposing("nhwc-nchw-f32-c3", "nchw-nhwc-f32-c3", "float32",
                         pick((6, 3, 1024, 1024), (1, 3, 256, 512)), "NHWC")
    rows += _transposing("nhwc-nchw-u8-c3", "nchw-nhwc-u8-c3", "uint8",
                         pick((12, 3, 1080, 1920), (2, 3, 270, 480)), "NHWC", scaling=("gather",))
    rows += _transposing("ndhwc-ncdhw-f16", "ncdhw-ndhwc-f16", "float16",
                         pick((4, 32, 32, 64, 128), (1, 16, 16, 32, 64)), "NDHWC", both_copies=True)
    rows += _transposing("colmajor-rowmajor-f32", "rowmajor-colmajor-f32", "float32",
                         pick((4096, 4096), (1024, 1024)), "WH", scaling=("copy",))
    # An 8-D tensor stored in a scrambled dimension order (axes from slowest to fastest).
    rows += _transposing("permuted8d-packed-f32", "packed-permuted8d-f32", "float32",
                         pick((8, 4, 16, 8, 4, 16, 8, 8), (4, 4, 8, 8, 4, 8, 4, 8)),
                         (3, 0, 6, 1, 7, 4, 2, 5), scaling=("gather",))

    # Inner-contiguous: padded rows, a batch slice, packed.
    pitch_sizes = pick((1, 1, 4096, 4000), (1, 1, 1024, 1000))
    padded = ds.BufferTensorDesc.from_layout("float32", pitch_sizes, "NCHW", row_pitch_alignment=256)
    rows += [
        Row("gather/padded-packed-f32", "inner", "gather", padded, None),
        Row("scatter/packed-padded-f32", "inner", "scatter", None, padded),
        Row("copy/padded-packed-f32", "inner", "copy", padded, _packed("float32", pitch_sizes)),
    ]
    full = pick((8, 64, 256, 256), (8, 16, 64, 64))  # the whole tensor in the buffer
    part = (full[0] // 2,) + full[1:]  # batches 2..2+N/2 of it
    whole = _packed("float32", full)
    part_desc = ds.BufferTensorDesc("float32", part, strides=whole.effective_strides)
    start = 2 * whole.effective_strides[0] * 4
    rows += [
        Row("gather/batch-slice-f32", "inner", "gather", part_desc, None, src_offset=start,
            src_buffer_bytes=whole.total_tensor_size_in_bytes),
        Row("scatter/batch-slice-f32", "inner", "scatter", None, part_desc, dst_offset=start,
            dst_buffer_bytes=whole.total_tensor_size_in_bytes),
        Row("copy/batch-slice-f32", "inner", "copy", part_desc, _packed("float32", part), src_offset=start,
            src_buffer_bytes=whole.total_tensor_size_in_bytes),
    ]
    rows += [
        Row("gather/packed-f32", "inner", "gather", _packed("float32", c64), None, scaling=True),
        Row("scatter/packed-f32", "inner", "scatter", None, _packed("float32", c64)),
        Row("copy/packed-f32", "inner", "copy", _packed("float32", c64), _packed("float32", c64)),
    ]

    # Broadcast (zero-stride) expansion: the destination is packed, so only gather and copy apply.
    for axis, label in ((1, "c"), (3, "w")):
        flags = [i == axis for i in range(4)]
        bcast = ds.BufferTensorDesc.from_layout("float32", c64, "NCHW", broadcast=flags)
        rows += [
            Row(f"gather/broadcast-{label}-f32", "broadcast", "gather", bcast, None),
            Row(f"copy/broadcast-{label}-f32", "broadcast", "copy", bcast, _packed("float32", c64)),
        ]

    # INT4 NHWC -> NCHW: gather unpacks to int8, copy keeps packed nibbles.
    int4_sizes = pick((16, 64, 256, 256), (2, 64, 64, 64))
    int4_nhwc = ds.BufferTensorDesc.from_layout("int4", int4_sizes, "NHWC")
    rows += [
        Row("gather/int4-nhwc-nchw", "int4", "gather", int4_nhwc, None),
        Row("copy/int4-nhwc-nchw", "int4", "copy", int4_nhwc, _packed("int4", int4_sizes)),
    ]

    # Per-call overhead: a 1x1x3x5 float32 image with 32-byte row pitch, descriptor built once.
    tiny = ds.BufferTensorDesc.from_layout("float32", (1, 1, 3, 5), "NCHW", row_pitch_alignment=32)
    rows.append(Row("gather/tiny-1x1x3x5-f32", "tiny", "gather", tiny, None))
    return rows


# -- buffers and views -----------------------------------------------------------------------


def _round_up(n: int, to: int = 64) -> int:
    return -(-n // to) * to


def _random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.frombuffer(bytearray(rng.bytes(n)), dtype=np.uint8)


class _Side:
    """A raw byte buffer holding one strided tensor, plus the ways to view it."""

    def __init__(self, desc: ds.BufferTensorDesc, offset: int, size: int | None,
                 rng: np.random.Generator | None = None) -> None:
        """Random bytes when ``rng`` is given (a source), else :data:`FILL` (a destination)."""
        self.desc = desc
        self.offset = offset
        need = offset + desc.total_tensor_size_in_bytes
        nbytes = _round_up(max(need, size or 0))
        if rng is not None:
            self.raw = _random_bytes(rng, nbytes)
        else:
            self.raw = np.full(nbytes, FILL, dtype=np.uint8)
        self.dtype = ds.numpy_dtype(desc.data_type)
        self.shape = desc.sizes
        if desc.element_bits >= 8:
            isz = self.dtype.itemsize
            self.typed = self.raw.view(self.dtype)[offset // isz:]  # the "src_u8 viewed as dtype"
            self.byte_strides = tuple(s * isz for s in desc.effective_strides)
            self.elem_offset = offset // isz

    def as_strided(self) -> np.ndarray:
        return as_strided(self.typed, self.shape, self.byte_strides)

    def ndarray(self) -> np.ndarray:
        return np.ndarray(self.shape, self.dtype, buffer=self.raw, offset=self.offset, strides=self.byte_strides)


# -- INT4: the vectorised numpy baseline ----------------------------------------------------------


def unpack_int4(raw: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` INT4 nibbles of ``raw`` (low nibble first), sign-extended to int8."""
    nibbles = np.stack((raw & 0x0F, raw >> 4), axis=-1).reshape(-1)[:count]
    return ((nibbles ^ 8) - 8).view(np.int8)  # uint8 arithmetic wraps: 15 -> 255 -> -1


def pack_int4(values: np.ndarray) -> np.ndarray:
    """Pack int8 values in -8..7 (an even count, C order) two to a byte, low nibble first."""
    u = values.reshape(-1).view(np.uint8) & 0x0F
    return u[0::2] | (u[1::2] << 4)


def _int4_nhwc_to_nchw(raw: np.ndarray, offset: int, sizes: tuple[int, ...]) -> np.ndarray:
    n, c, h, w = sizes
    count = n * c * h * w
    flat = unpack_int4(raw[offset:offset + (count + 1) // 2], count)
    return flat.reshape(n, h, w, c).transpose(0, 3, 1, 2)


# -- prepare ---------------------------------------------------------------------------------------


def prepare(row: Row, *, preallocated: bool = False, seed: int = 0) -> Prepared:
    """Allocate ``row``'s buffers and build the implementations to compare.

    With ``preallocated``, every gather implementation writes into an output
    allocated once (``gather(out=...)``, ``np.copyto(out, view)``) instead of
    allocating a new array per call.
    """
    rng = np.random.default_rng(seed)
    packed_src = _random_bytes(rng, row.bytes_moved)
    if row.op == "gather":
        impls, new_gather = _gather_impls(row, rng, preallocated)
    else:
        new_gather = None
        impls = _scatter_impls(row, rng) if row.op == "scatter" else _copy_impls(row, rng)
    if row.op == "gather" and not preallocated:
        impls[MEMCPY] = lambda: _copy_new(packed_src)
    else:
        packed_dst = np.empty_like(packed_src)
        impls[MEMCPY] = lambda: np.copyto(packed_dst, packed_src)
    return Prepared(impls, new_gather)


def _copy_new(a: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    np.copyto(out, a)
    return out


def _gather_impls(row: Row, rng: np.random.Generator, preallocated: bool) -> tuple[dict, Callable]:
    assert row.src is not None
    src = _Side(row.src, row.src_offset, row.src_buffer_bytes, rng)
    desc, off, raw, shape, dtype = row.src, row.src_offset, src.raw, src.shape, src.dtype

    def new_gather() -> np.ndarray:
        return ds.gather(raw, desc, offset=off)

    impls: dict[str, Callable[[], Any]] = {}
    if preallocated:
        outs = [np.empty(shape, dtype) for _ in range(4)]
        impls[DMLSTRIDE] = lambda: ds.gather(raw, desc, offset=off, out=outs[0])
    else:
        impls[DMLSTRIDE] = new_gather

    if row.group == "int4":
        if preallocated:
            impls[NP_REFERENCE] = lambda: _copyto(outs[1], _int4_nhwc_to_nchw(raw, off, shape))
        else:
            impls[NP_REFERENCE] = lambda: _int4_nhwc_to_nchw(raw, off, shape).copy()
        return impls, new_gather

    typed, bstrides = src.typed, src.byte_strides
    if preallocated:
        impls[NP_AS_STRIDED] = lambda: _copyto(outs[1], as_strided(typed, shape, bstrides))
        impls[NP_NDARRAY] = lambda: _copyto(
            outs[2], np.ndarray(shape, dtype, buffer=raw, offset=off, strides=bstrides))
    else:
        impls[NP_AS_STRIDED] = lambda: as_strided(typed, shape, bstrides).copy()
        impls[NP_NDARRAY] = lambda: np.ndarray(shape, dtype, buffer=raw, offset=off, strides=bstrides).copy()
    if torch is not None:
        tbase = torch.from_numpy(typed)
        estrides = desc.effective_strides
        if preallocated:
            tout = torch.from_numpy(outs[3])
            impls[TORCH] = lambda: tout.copy_(torch.as_strided(tbase, shape, estrides))
        else:
            impls[TORCH] = lambda: torch.as_strided(tbase, shape, estrides).contiguous()
    return impls, new_gather


def _copyto(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    np.copyto(out, a)
    return out


def _scatter_impls(row: Row, rng: np.random.Generator) -> dict:
    assert row.dst is not None
    desc, off = row.dst, row.dst_offset
    dtype = ds.numpy_dtype(desc.data_type)
    packed = _random_bytes(rng, row.bytes_moved).view(dtype).reshape(desc.sizes)
    sides = {k: _Side(desc, off, row.dst_buffer_bytes) for k in (DMLSTRIDE, NP_AS_STRIDED, NP_NDARRAY)}

    def dml(d: _Side = sides[DMLSTRIDE]) -> np.ndarray:
        ds.scatter(packed, desc, d.raw, offset=off)
        return d.raw

    def np_as_strided(d: _Side = sides[NP_AS_STRIDED]) -> np.ndarray:
        d.as_strided()[...] = packed
        return d.raw

    def np_ndarray(d: _Side = sides[NP_NDARRAY]) -> np.ndarray:
        d.ndarray()[...] = packed
        return d.raw

    impls = {DMLSTRIDE: dml, NP_AS_STRIDED: np_as_strided, NP_NDARRAY: np_ndarray}
    if torch is not None:
        t = _Side(desc, off, row.dst_buffer_bytes)
        tdst, tsrc, estrides, eoff = torch.from_numpy(t.raw.view(dtype)), torch.from_numpy(packed), \
            desc.effective_strides, t.elem_offset

        def torch_scatter() -> np.ndarray:
            torch.as_strided(tdst, desc.sizes, estrides, eoff).copy_(tsrc)
            return t.raw

        impls[TORCH] = torch_scatter
    return impls


def _copy_impls(row: Row, rng: np.random.Generator) -> dict:
    assert row.src is not None and row.dst is not None
    src = _Side(row.src, row.src_offset, row.src_buffer_bytes, rng)
    dst = {k: _Side(row.dst, row.dst_offset, row.dst_buffer_bytes)
           for k in (DMLSTRIDE, NP_AS_STRIDED, NP_NDARRAY, NP_REFERENCE)}
    sdesc, ddesc, soff, doff = row.src, row.dst, row.src_offset, row.dst_offset

    def dml(d: _Side = dst[DMLSTRIDE]) -> np.ndarray:
        ds.copy_tensor(src.raw, sdesc, d.raw, ddesc, src_offset=soff, dst_offset=doff)
        return d.raw

    if row.group == "int4":
        count = sdesc.element_count

        def reference(d: _Side = dst[NP_REFERENCE]) -> np.ndarray:
            d.raw[doff:doff + (count + 1) // 2] = pack_int4(_int4_nhwc_to_nchw(src.raw, soff, sdesc.sizes))
            return d.raw

        return {DMLSTRIDE: dml, NP_REFERENCE: reference}

    def np_as_strided(d: _Side = dst[NP_AS_STRIDED]) -> np.ndarray:
        d.as_strided()[...] = src.as_strided()
        return d.raw

    def np_ndarray(d: _Side = dst[NP_NDARRAY]) -> np.ndarray:
        d.ndarray()[...] = src.ndarray()
        return d.raw

    impls = {DMLSTRIDE: dml, NP_AS_STRIDED: np_as_strided, NP_NDARRAY: np_ndarray}
    if torch is not None:
        t = dst[NP_REFERENCE]  # unused otherwise: the torch column writes here
        tsrc = torch.from_numpy(src.typed)
        tdst = torch.from_numpy(t.typed)
        sizes = sdesc.sizes

        def torch_copy() -> np.ndarray:
            torch.as_strided(tdst, sizes, ddesc.effective_strides).copy_(
                torch.as_strided(tsrc, sizes, sdesc.effective_strides))
            return t.raw

        impls[TORCH] = torch_copy
    return impls


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
