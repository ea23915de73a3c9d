"""The benchmark cases, their buffers, and the implementations they compare.

A :class:`Row` is one operation (``gather``, ``scatter`` or ``copy``, meaning
:func:`dmlstride.copy_tensor`) on one tensor layout.  Every operation is a copy
from a *source side* to a *destination side*; a side is a byte buffer holding
one tensor, either strided (described by a descriptor) or packed (a C-order
array: the output of a gather, the input of a scatter).

:func:`prepare` allocates a row's source once, filled with random bytes, and
every implementation gets its own destination buffer, allocated once, filled
with :data:`FILL` and placed at the same address modulo the page size; each
implementation writes into that memory on every call (nothing is allocated
while timing).  After one call of each the harness compares the destination
buffers byte for byte, padding included.

The peers are the other libraries' idioms for the same copy, one small
function each (see :data:`PEERS`):

* numpy: ``np.copyto(dst_view, src_view)`` where a strided side is viewed with
  ``as_strided(buffer_viewed_as_dtype, shape, byte_strides)`` and a packed one
  is the array itself (INT4 has no numpy view: its column is a vectorised
  numpy unpack, and repack for the copy);
* PyTorch, when importable: ``dst_view.copy_(src_view)`` with
  ``torch.as_strided`` views of tensors sharing the same buffers.

A peer function returns ``None`` for a case it cannot express, and its column
is left empty there.  Adding a peer is one function and one :class:`Peer`
entry.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

# PyTorch's OpenMP workers spin after every call by default and take the CPU from whatever
# runs next in an interleaved loop; let them sleep instead, unless the user chose otherwise.
# This must happen before torch is imported.
OMP_WAIT_POLICY_SET_HERE = "OMP_WAIT_POLICY" not in os.environ
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import as_strided  # noqa: E402

import dmlstride as ds  # noqa: E402

try:  # an optional peer, never a dependency
    import torch
except ImportError:
    torch = None

FILL = 0xA5  # initial byte of every destination buffer, so untouched padding is checked too
PAGE = 4096

# Implementation keys of the main table besides the peers.
DMLSTRIDE = "dmlstride"
DMLSTRIDE_ALIGNED = "dmlstride_aligned"  # the same operation with page-aligned buffers
LIMIT = "limit"


@dataclass(frozen=True)
class Row:
    """One benchmarked operation.

    ``src``/``dst`` are the strided sides; ``None`` means a packed array (the
    output of a gather, the input of a scatter).  ``src_skew``/``dst_skew``
    place a buffer's first byte that many bytes past a page boundary.
    """

    name: str
    group: str  # "layout", "odd", "inner", "broadcast", "align", "int4", "cached" or "tiny"
    op: str  # "gather", "scatter" or "copy"
    src: ds.BufferTensorDesc | None
    dst: ds.BufferTensorDesc | None
    src_offset: int = 0
    dst_offset: int = 0
    src_buffer_bytes: int | None = None  # default: offset + total_tensor_size_in_bytes
    dst_buffer_bytes: int | None = None
    src_skew: int = 0
    dst_skew: int = 0
    scaling: bool = False  # also measured at 1 thread and at the run's thread count
    allocating: bool = False  # also in the allocating-gather table

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
    def src_desc(self) -> ds.BufferTensorDesc:
        return self.src if self.src is not None else _packed(self.dtype.name, self.sizes)

    @property
    def dst_desc(self) -> ds.BufferTensorDesc:
        return self.dst if self.dst is not None else _packed(self.dtype.name, self.sizes)

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

    @property
    def conversion(self) -> bool:
        """A layout conversion: the two sides order the elements differently."""
        return self.group in ("layout", "odd")

    def aligned(self) -> Row:
        """This row with both buffers page-aligned."""
        return dataclasses.replace(self, src_skew=0, dst_skew=0)


# -- the case list ---------------------------------------------------------------------------


def _packed(dtype: str, sizes: tuple[int, ...]) -> ds.BufferTensorDesc:
    return ds.BufferTensorDesc(dtype, sizes)


def _transposing(fwd: str, rev: str, dtype: str, sizes: tuple[int, ...], layout: Any, *,
                 group: str = "layout", copies: int = 1, scaling: tuple[str, ...] = (),
                 allocating: bool = False) -> list[Row]:
    """gather ``layout -> packed`` (named ``fwd``), scatter ``packed -> layout`` (``rev``), and
    ``copies`` copy_tensor rows (0: none; 1: strided -> packed; 2: both directions)."""
    strided = ds.BufferTensorDesc.from_layout(dtype, sizes, layout)
    packed = _packed(dtype, sizes)
    rows = [
        Row(f"gather/{fwd}", group, "gather", strided, None, scaling="gather" in scaling,
            allocating=allocating),
        Row(f"scatter/{rev}", group, "scatter", None, strided, scaling="scatter" in scaling),
    ]
    if copies >= 1:
        rows.append(Row(f"copy/{fwd}", group, "copy", strided, packed, scaling="copy" in scaling))
    if copies >= 2:
        rows.append(Row(f"copy/{rev}", group, "copy", packed, strided))
    return rows


def build_rows(quick: bool = False) -> list[Row]:
    """Every benchmark row; ``quick`` shrinks the tensors to a few MiB.

    At full size every big tensor is 47-72 MiB packed, so that it leaves a 32 MiB L3 cache.
    """

    def pick(full: tuple[int, ...], small: tuple[int, ...]) -> tuple[int, ...]:
        return small if quick else full

    rows: list[Row] = []
    c64 = pick((4, 64, 256, 256), (1, 64, 64, 64))  # float32: 64 MiB / 1 MiB
    rows += _transposing("nhwc-nchw-f32-c64", "nchw-nhwc-f32-c64", "float32", c64, "NHWC",
                         scaling=("gather",), allocating=True)
    rows += _transposing("nhwc-nchw-f32-c3", "nchw-nhwc-f32-c3", "float32",
                         pick((6, 3, 1024, 1024), (1, 3, 256, 512)), "NHWC")
    rows += _transposing("nhwc-nchw-u8-c3", "nchw-nhwc-u8-c3", "uint8",
                         pick((12, 3, 1080, 1920), (2, 3, 270, 480)), "NHWC", scaling=("gather",))
    rows += _transposing("ndhwc-ncdhw-f16", "ncdhw-ndhwc-f16", "float16",
                         pick((4, 32, 32, 64, 128), (1, 16, 16, 32, 64)), "NDHWC", copies=2)
    rows += _transposing("colmajor-rowmajor-f32", "rowmajor-colmajor-f32", "float32",
                         pick((4096, 4096), (1024, 1024)), "WH", scaling=("copy",), allocating=True)
    # An 8-D tensor stored in a scrambled dimension order (axes from slowest to fastest).
    rows += _transposing("permuted8d-packed-f32", "packed-permuted8d-f32", "float32",
                         pick((8, 4, 16, 8, 4, 16, 8, 8), (4, 4, 8, 8, 4, 8, 4, 8)),
                         (3, 0, 6, 1, 7, 4, 2, 5), scaling=("gather",))

    # Odd shapes: dimensions that are not powers of two, channel counts between 5 and 48,
    # 5-D and 6-D scrambled orders, and 8-, 16- and 32-bit integer and 64-bit float types.
    odd = dict(group="odd", copies=0)
    rows += _transposing("nhwc-nchw-f32-c24-301x301", "nchw-nhwc-f32-c24-301x301", "float32",
                         pick((8, 24, 301, 301), (1, 24, 101, 103)), "NHWC", allocating=True, **odd)
    rows += _transposing("nhwc-nchw-f32-c40-171x173", "nchw-nhwc-f32-c40-171x173", "float32",
                         pick((14, 40, 171, 173), (1, 40, 57, 59)), "NHWC", **odd)
    rows += _transposing("nhwc-nchw-f64-c5-301x173", "nchw-nhwc-f64-c5-301x173", "float64",
                         pick((32, 5, 301, 173), (2, 5, 101, 87)), "NHWC", **odd)
    rows += _transposing("nhwc-nchw-i16-c24-173x301", "nchw-nhwc-i16-c24-173x301", "int16",
                         pick((26, 24, 173, 301), (1, 24, 87, 101)), "NHWC", **odd)
    rows += _transposing("scrambled5d-packed-u32", "packed-scrambled5d-u32", "uint32",
                         pick((7, 24, 33, 45, 59), (2, 6, 11, 15, 19)), (3, 0, 4, 2, 1), **odd)
    rows += _transposing("scrambled6d-packed-f32", "packed-scrambled6d-f32", "float32",
                         pick((13, 7, 11, 19, 17, 40), (3, 5, 7, 9, 11, 6)), (4, 1, 5, 0, 3, 2), **odd)
    rows += _transposing("colmajor-rowmajor-f32-3001x5003", "rowmajor-colmajor-f32-3001x5003", "float32",
                         pick((3001, 5003), (601, 1003)), "WH", **odd)
    # Channel counts that are no whole number of 16-byte register blocks: 12 one-byte
    # channels (fewer than one), and a matrix 45 columns wide.
    rows += _transposing("nhwc-nchw-u8-c12-301x499", "nchw-nhwc-u8-c12-301x499", "uint8",
                         pick((32, 12, 301, 499), (2, 12, 61, 99)), "NHWC", **odd)
    rows += _transposing("colmajor-rowmajor-f32-350001x45", "rowmajor-colmajor-f32-350001x45", "float32",
                         pick((350001, 45), (20001, 45)), "WH", **odd)

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
    packed64 = _packed("float32", c64)
    rows += [
        Row("gather/packed-f32", "inner", "gather", packed64, None, scaling=True, allocating=True),
        Row("scatter/packed-f32", "inner", "scatter", None, packed64),
        Row("copy/packed-f32", "inner", "copy", packed64, packed64),
    ]

    # Broadcast (zero-stride) expansion: the destination is packed, so only gather and copy apply.
    for axis, label, dtype in ((1, "c", "float32"), (3, "w", "float32"), (2, "h", "uint16")):
        flags = [i == axis for i in range(4)]
        sizes = c64 if dtype == "float32" else pick((8, 64, 256, 256), (2, 64, 64, 64))
        bcast = ds.BufferTensorDesc.from_layout(dtype, sizes, "NCHW", broadcast=flags)
        tag = f"{label}-{'f32' if dtype == 'float32' else 'u16'}"
        rows += [
            Row(f"gather/broadcast-{tag}", "broadcast", "gather", bcast, None),
            Row(f"copy/broadcast-{tag}", "broadcast", "copy", bcast, _packed(dtype, sizes)),
        ]

    # Packed copies whose buffers sit at other addresses modulo the page size: the destination
    # `k` bytes past the source (dst+k), or the source `k` bytes past the destination (src+k).
    # Each is also timed with both buffers page-aligned, in the same loop.
    for side, skew in (("dst", 16), ("dst", 4), ("dst", 64), ("dst", 2048), ("src", 16)):
        tag = f"packed-f32-{side}+{skew}"
        skews = {"dst_skew": skew} if side == "dst" else {"src_skew": skew}
        rows += [
            Row(f"gather/{tag}", "align", "gather", packed64, None, **skews),
            Row(f"scatter/{tag}", "align", "scatter", None, packed64, **skews),
            Row(f"copy/{tag}", "align", "copy", packed64, packed64, **skews),
        ]

    # Layout conversions with both buffers 16 bytes past a page boundary, where glibc's malloc puts
    # a large numpy array (np.empty of 64 MiB), timed against page-aligned buffers in the same loop.
    placed = (("colmajor-rowmajor-f32", "rowmajor-colmajor-f32", pick((4096, 4096), (1024, 1024)), "WH"),
              ("nhwc-nchw-f32-c64", "nchw-nhwc-f32-c64", c64, "NHWC"))
    for fwd, rev, sizes, layout in placed:
        strided = ds.BufferTensorDesc.from_layout("float32", sizes, layout)
        rows += [
            Row(f"gather/{fwd}-both+16", "align", "gather", strided, None, src_skew=16, dst_skew=16),
            Row(f"scatter/{rev}-both+16", "align", "scatter", None, strided, src_skew=16, dst_skew=16),
        ]

    # INT4 NHWC -> NCHW: gather unpacks to int8, copy keeps packed nibbles.
    int4_sizes = pick((16, 64, 256, 256), (2, 64, 64, 64))
    int4_nhwc = ds.BufferTensorDesc.from_layout("int4", int4_sizes, "NHWC")
    rows += [
        Row("gather/int4-nhwc-nchw", "int4", "gather", int4_nhwc, None),
        Row("copy/int4-nhwc-nchw", "int4", "copy", int4_nhwc, _packed("int4", int4_sizes)),
    ]

    # A 4 MiB gather (it fits in the last-level cache), for the allocating table: outputs of
    # this size are where fresh pages cost most relative to the copy.
    mid = ds.BufferTensorDesc.from_layout("float32", pick((1, 64, 128, 128), (1, 64, 32, 32)), "NHWC")
    rows.append(Row("gather/nhwc-nchw-f32-c64-128x128", "cached", "gather", mid, None, allocating=True))

    # Per-call overhead: a 1x1x3x5 float32 image with 32-byte row pitch, descriptor built once.
    tiny = ds.BufferTensorDesc.from_layout("float32", (1, 1, 3, 5), "NCHW", row_pitch_alignment=32)
    rows.append(Row("gather/tiny-1x1x3x5-f32", "tiny", "gather", tiny, None))
    return rows


# -- buffers -----------------------------------------------------------------------------------


def _round_up(n: int, to: int = 64) -> int:
    return -(-n // to) * to


def placed_bytes(nbytes: int, skew: int = 0) -> np.ndarray:
    """``nbytes`` uninitialised bytes whose first byte lies ``skew`` bytes past a page boundary."""
    base = np.empty(nbytes + 2 * PAGE, np.uint8)
    start = (-base.ctypes.data) % PAGE + skew
    return base[start:start + nbytes]


class Side:
    """A byte buffer holding one tensor, placed ``skew`` bytes past a page boundary."""

    def __init__(self, desc: ds.BufferTensorDesc, offset: int, size: int | None, skew: int,
                 rng: np.random.Generator | None = None) -> None:
        """Random bytes when ``rng`` is given (a source), else :data:`FILL` (a destination)."""
        self.desc = desc
        self.offset = offset
        need = offset + desc.total_tensor_size_in_bytes
        self.raw = placed_bytes(_round_up(max(need, size or 0)), skew)
        if rng is not None:
            self.raw[:] = np.frombuffer(rng.bytes(self.raw.size), np.uint8)
        else:
            self.raw.fill(FILL)
        self.dtype = ds.numpy_dtype(desc.data_type)
        self.shape = desc.sizes
        self.bits = desc.element_bits
        if self.bits >= 8:
            isz = self.dtype.itemsize
            self.typed = self.raw.view(self.dtype)  # "the buffer viewed as dtype"
            self.byte_strides = tuple(s * isz for s in desc.effective_strides)
            self.elem_offset = offset // isz

    def view(self) -> np.ndarray:
        """``as_strided`` view of the tensor (the numpy idiom for a strided buffer)."""
        return as_strided(self.typed[self.elem_offset:], self.shape, self.byte_strides)

    def array(self) -> np.ndarray:
        """The tensor as a C-order array (a packed side only)."""
        n = math.prod(self.shape)
        return self.typed[self.elem_offset:self.elem_offset + n].reshape(self.shape)


@dataclass
class Case:
    """A row's source, filled once, and the means to give each implementation a destination."""

    row: Row
    src: Side

    def new_dst(self) -> Side:
        r = self.row
        return Side(r.dst_desc, r.dst_offset, r.dst_buffer_bytes, r.dst_skew)


def make_case(row: Row, seed: int = 0) -> Case:
    rng = np.random.default_rng(seed)
    return Case(row, Side(row.src_desc, row.src_offset, row.src_buffer_bytes, row.src_skew, rng))


# -- implementations ---------------------------------------------------------------------------

Impl = Callable[[], Any]


def dmlstride_impl(case: Case, dst: Side) -> Impl:
    r, src = case.row, case.src
    if r.op == "gather":
        out = dst.array()
        return lambda: ds.gather(src.raw, r.src_desc, offset=r.src_offset, out=out)
    if r.op == "scatter":
        packed = src.array()
        return lambda: ds.scatter(packed, r.dst_desc, dst.raw, offset=r.dst_offset)
    return lambda: ds.copy_tensor(src.raw, r.src_desc, dst.raw, r.dst_desc,
                                  src_offset=r.src_offset, dst_offset=r.dst_offset)


def numpy_impl(case: Case, dst: Side) -> Impl | None:
    """``np.copyto(dst_view, src_view)`` of ``as_strided`` views (vectorised unpack for INT4)."""
    r, src = case.row, case.src
    if r.group == "int4":
        return _int4_reference(case, dst)
    sview = src.array if r.src is None else src.view
    dview = dst.array if r.dst is None else dst.view
    return lambda: np.copyto(dview(), sview())


def torch_impl(case: Case, dst: Side) -> Impl | None:
    """``dst_view.copy_(src_view)`` of ``torch.as_strided`` views of the same buffers."""
    if torch is None or case.row.group == "int4":
        return None
    src = case.src

    def tview(side: Side) -> Callable[[], Any]:
        base = torch.from_numpy(side.typed)
        shape, strides, off = side.shape, side.desc.effective_strides, side.elem_offset
        return lambda: torch.as_strided(base, shape, strides, off)

    sview, dview = tview(src), tview(dst)
    return lambda: dview().copy_(sview())


@dataclass(frozen=True)
class Peer:
    """Another library's way of doing the same copy: one column of the main table."""

    key: str
    label: str  # column header
    impl: Callable[[Case, Side], Impl | None]  # None where the peer cannot express the case
    available: bool = True
    threads: Callable[[int], None] | None = None  # set the peer's thread count


def _torch_threads(n: int) -> None:
    torch.set_num_threads(n)


PEERS = [
    Peer("numpy", "numpy", numpy_impl),
    Peer("torch", "PyTorch", torch_impl, available=torch is not None,
         threads=_torch_threads if torch is not None else None),
]


# -- the thread-matched memcpy limit ------------------------------------------------------------


class ThreadedCopy:
    """``np.copyto`` of a packed buffer split into equal contiguous chunks, one per thread.

    The worker threads persist across calls, so their start-up is not timed; numpy
    releases the GIL while it copies, so the chunks run in parallel.
    """

    def __init__(self, threads: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.threads = threads
        self.pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="memcpy") if threads > 1 else None

    def plan(self, dst: np.ndarray, src: np.ndarray) -> Impl:
        n = dst.size
        cuts = [min(n, _round_up(n * i // self.threads)) for i in range(self.threads)] + [n]
        pieces = [(dst[a:b], src[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
        first, rest = pieces[0], pieces[1:]
        if not rest or self.pool is None:
            return lambda: np.copyto(dst, src)
        pool = self.pool

        def run() -> None:
            futures = [pool.submit(np.copyto, d, s) for d, s in rest]
            np.copyto(*first)
            for f in futures:
                f.result()

        return run

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def limit_impl(case: Case, copier: ThreadedCopy) -> Impl:
    """memcpy of the row's bytes between page-aligned packed buffers, independent of dmlstride."""
    n = case.row.bytes_moved
    src = placed_bytes(_round_up(n))[:n]
    src[:] = np.frombuffer(np.random.default_rng(1).bytes(n), np.uint8)
    dst = placed_bytes(_round_up(n))[:n]
    dst.fill(FILL)
    return copier.plan(dst, src)


# -- the allocating idioms (second table) and the per-call case ------------------------------------


def allocating_impls(case: Case) -> dict[str, Impl]:
    """A gather that returns a new array each call, and numpy's ``as_strided(...).copy()``."""
    r, src = case.row, case.src
    raw, desc, off = src.raw, r.src_desc, r.src_offset
    return {
        "new": lambda: ds.gather(raw, desc, offset=off),
        "numpy_copy": lambda: src.view().copy(),
    }


def tiny_impls(case: Case) -> dict[str, tuple[str, Impl]]:
    """Per-call idioms for a small gather: key -> (label, callable returning the gathered array)."""
    r, src = case.row, case.src
    raw, desc, off = src.raw, r.src_desc, r.src_offset
    shape, dtype, typed, bstrides = src.shape, src.dtype, src.typed, src.byte_strides
    out = np.empty(shape, dtype)
    np_out = np.empty(shape, dtype)
    impls: dict[str, tuple[str, Impl]] = {
        DMLSTRIDE: ("dmlstride.gather(buf, desc)", lambda: ds.gather(raw, desc, offset=off)),
        "dmlstride_out": ("dmlstride.gather(buf, desc, out=out)",
                          lambda: ds.gather(raw, desc, offset=off, out=out)),
        "numpy_as_strided": ("as_strided(...).copy()", lambda: as_strided(typed, shape, bstrides).copy()),
        "numpy_ndarray": ("np.ndarray(buffer=...).copy()",
                          lambda: np.ndarray(shape, dtype, buffer=raw, offset=off, strides=bstrides).copy()),
        "numpy_copyto": ("np.copyto(out, as_strided(...))",
                         lambda: _copyto(np_out, as_strided(typed, shape, bstrides))),
    }
    if torch is not None:
        tbase, estrides = torch.from_numpy(typed), r.src_desc.effective_strides
        tout = torch.from_numpy(np.empty(shape, dtype))
        impls["torch_contiguous"] = ("torch.as_strided(...).contiguous()",
                                     lambda: torch.as_strided(tbase, shape, estrides).contiguous())
        impls["torch_copy"] = ("out.copy_(torch.as_strided(...))",
                               lambda: tout.copy_(torch.as_strided(tbase, shape, estrides)))
    return impls


def _copyto(out: np.ndarray, a: np.ndarray) -> np.ndarray:
    np.copyto(out, a)
    return out


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


def _int4_reference(case: Case, dst: Side) -> Impl:
    r, raw, soff, sizes = case.row, case.src.raw, case.row.src_offset, case.row.sizes
    if r.op == "gather":
        out = dst.array()
        return lambda: np.copyto(out, _int4_nhwc_to_nchw(raw, soff, sizes))
    count, doff = r.src_desc.element_count, r.dst_offset

    def copy() -> None:
        dst.raw[doff:doff + (count + 1) // 2] = pack_int4(_int4_nhwc_to_nchw(raw, soff, sizes))

    return copy


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
