"""A catalogue of bad inputs across the public API.

Every entry names one wrong argument, the exception it must raise and a
fragment of the message (which names the argument), and every entry checks
that no buffer was written: a refused call leaves each buffer, source array
and ``out`` array byte-for-byte as it was.

The table covers ``BufferTensorDesc`` and its methods, the size functions,
``gather`` (also with ``dtype``/``scale``/``bias``), ``scatter``,
``copy_tensor``, ``view``, ``convert``, ``quantize``, ``dequantize``,
``set_num_threads`` and the command line (``dmlstride.cli.main``: exit status 2 and one line on stderr).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import gc
import mmap
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import dmlstride
from dmlstride import (
    BufferTensorDesc,
    DescriptorError,
    broadcast_strides,
    calc_buffer_tensor_size,
    calculate_strides,
    convert,
    copy_tensor,
    dequantize,
    gather,
    quantize,
    scatter,
    view,
)
from subproc import run_python

U32 = 2**32


def pattern(n: int, seed: int = 11) -> bytes:
    """``n`` recognisable, non-zero-ish bytes."""
    return bytes((i * 37 + seed) & 0xFF for i in range(n))


class Buffers:
    """Fresh buffers of every kind for one catalogue entry.

    ``watched()`` maps a name to the object whose bytes must not change.
    """

    def __init__(self, tmp_path: Any) -> None:
        self.ba = bytearray(pattern(64))                  # writable, 64 bytes
        self.small = bytearray(pattern(7))                # too small for a 2x3 uint8 (needs 8)
        self.by = bytes(pattern(64))                      # read-only
        self.np = np.frombuffer(pattern(128), np.uint8).copy()
        self.np_ro = np.frombuffer(pattern(64), np.uint8).copy()
        self.np_ro.flags.writeable = False
        self._strided_base = np.frombuffer(pattern(128, 5), np.uint8).copy()
        self.strided = self._strided_base[::2]            # not contiguous
        self._mv_base = bytearray(pattern(64, 3))
        self.mv_ro = memoryview(self._mv_base).toreadonly()
        self._mv_strided_base = bytearray(pattern(128, 7))
        self.mv_strided = memoryview(self._mv_strided_base)[::2]
        self.aa = array.array("B", pattern(64, 13))
        self.mm = mmap.mmap(-1, 64)
        self.mm.write(pattern(64, 17))
        path = tmp_path / "ro.bin"
        path.write_bytes(pattern(64, 19))
        self._file = open(path, "rb")
        self.mm_ro = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self.arr = (np.arange(6, dtype=np.uint8) + 1).reshape(2, 3)
        self.arr_u4 = np.array([1, 2, 3, 4, 5, 16], dtype=np.uint8)   # last value out of range
        self.out = np.full((2, 3), 0xAB, dtype=np.uint8)
        self.out_ro = np.full((2, 3), 0xCD, dtype=np.uint8)
        self.out_ro.flags.writeable = False

    def watched(self) -> dict[str, Any]:
        return {
            "ba": self.ba,
            "small": self.small,
            "by": self.by,
            "np": self.np,
            "np_ro": self.np_ro,
            "strided": self._strided_base,
            "mv_ro": self._mv_base,
            "mv_strided": self._mv_strided_base,
            "aa": self.aa,
            "mm": self.mm,
            "mm_ro": self.mm_ro,
            "arr": self.arr,
            "arr_u4": self.arr_u4,
            "out": self.out,
            "out_ro": self.out_ro,
        }

    def snapshot(self) -> dict[str, bytes]:
        return {name: bytes(memoryview(obj).cast("B")) for name, obj in self.watched().items()}

    def close(self) -> None:
        self.mm.close()
        self.mm_ro.close()
        self._file.close()


class CLI:
    """Marker: the entry runs the command line and expects exit status 2."""


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Buffers], Any]
    exc: type
    fragment: str
    # Buffers that must be unchanged afterwards; ``None`` means all of them.
    unchanged: tuple[str, ...] | None = None


def cli(*argv: str) -> Callable[[Buffers], Any]:
    return lambda b: list(argv)


# Shared descriptors.
U8_2x3 = BufferTensorDesc("uint8", [2, 3])                       # 8 bytes
U8_2x3_T = BufferTensorDesc("uint8", [3, 2])
F32_2x3 = BufferTensorDesc("float32", [2, 3])                    # 24 bytes
U4_6 = BufferTensorDesc("uint4", [6])
I4_2 = BufferTensorDesc("int4", [2])
# A valid descriptor (size below 2**64) whose extent is far beyond any buffer.
F32_HUGE = BufferTensorDesc("float32", [2**30 + 1], [U32 - 1], directml_limits=False)
F64_8D = BufferTensorDesc("float64", [2] * 8, [U32 - 1] * 8, directml_limits=False)
# Eight dimensions whose total size is just below 2**63 bytes, with 2**32 - 1 elements.
F64_8D_2_63 = BufferTensorDesc("float64", [2**28 - 1, 2, 2, 2, 2, 1, 1, 1], [U32 - 1] * 8, directml_limits=False)
# Four elements up to 64 GiB apart, each at its own offset.
F64_FAR = BufferTensorDesc("float64", [2, 2], [U32 - 1, U32 - 2], directml_limits=False)
# 256 elements spread over 8 dimensions with distinct huge strides (no two share an offset).
F64_8D_FAR = BufferTensorDesc("float64", [2] * 8, [U32 - 2**k for k in range(8)], directml_limits=False)
# Eight dimensions of 15-16 elements with unrelated strides near 2**32: deciding whether two
# elements share an offset is hard, and the buffer check must refuse it before anyone tries.
U8_8D_HOSTILE_SIZES = [16] * 7 + [15]
U8_8D_HOSTILE_STRIDES = [3382962190, 4058696965, 2541040493, 3800621477, 3509189500, 3187325960, 3394439372,
                         2937193812]


def _hostile() -> BufferTensorDesc:
    """A fresh descriptor each time, so no earlier call has analysed it."""
    return BufferTensorDesc("uint8", U8_8D_HOSTILE_SIZES, U8_8D_HOSTILE_STRIDES, directml_limits=False)


def _ro_out(b: Buffers) -> np.ndarray:
    return b.out_ro


CASES: list[Case] = [
    # ------------------------------------------------------------------ BufferTensorDesc: data_type
    Case("desc-dtype-none", lambda b: BufferTensorDesc(None, [2]), TypeError, "data_type must be"),
    Case("desc-dtype-float", lambda b: BufferTensorDesc(1.5, [2]), TypeError, "data_type must be"),
    Case("desc-dtype-bool", lambda b: BufferTensorDesc(True, [2]), TypeError, "data_type must be"),
    Case("desc-dtype-bytes", lambda b: BufferTensorDesc(b"float32", [2]), TypeError, "data_type must be"),
    Case("desc-dtype-numpy-float-scalar", lambda b: BufferTensorDesc(np.float32(1), [2]), TypeError,
         "data_type must be"),
    Case("desc-dtype-numpy-timedelta-scalar", lambda b: BufferTensorDesc(np.timedelta64(1, "s"), [2]),
         TypeError, "data_type"),
    Case("desc-dtype-unknown", lambda b: BufferTensorDesc(0, [2]), DescriptorError, "UNKNOWN"),
    Case("desc-dtype-unknown-name", lambda b: BufferTensorDesc("unknown", [2]), DescriptorError, "UNKNOWN"),
    Case("desc-dtype-14", lambda b: BufferTensorDesc(14, [2]), DescriptorError, "data_type 14"),
    Case("desc-dtype-negative", lambda b: BufferTensorDesc(-1, [2]), DescriptorError, "data_type -1"),
    Case("desc-dtype-huge-int", lambda b: BufferTensorDesc(2**70, [2]), DescriptorError, "data_type"),
    Case("desc-dtype-bad-name", lambda b: BufferTensorDesc("float33", [2]), DescriptorError, "'float33'"),
    Case("desc-dtype-complex", lambda b: BufferTensorDesc(np.complex64, [2]), DescriptorError, "complex64"),
    Case("desc-dtype-bool-dtype", lambda b: BufferTensorDesc(np.dtype(bool), [2]), DescriptorError,
         "no DirectML equivalent"),
    Case("desc-dtype-structured", lambda b: BufferTensorDesc("f4,f4", [2]), DescriptorError,
         "no DirectML equivalent"),
    Case("desc-dtype-big-endian", lambda b: BufferTensorDesc(">f4", [2]), DescriptorError, "big-endian"),
    # ------------------------------------------------------------------ BufferTensorDesc: sizes
    Case("desc-sizes-none", lambda b: BufferTensorDesc("uint8", None), TypeError, "sizes must be a sequence"),
    Case("desc-sizes-int", lambda b: BufferTensorDesc("uint8", 6), TypeError, "sizes must be a sequence"),
    Case("desc-sizes-str", lambda b: BufferTensorDesc("uint8", "23"), TypeError, "sizes must be a sequence"),
    Case("desc-sizes-bytes", lambda b: BufferTensorDesc("uint8", b"\x02"), TypeError, "sizes must be a sequence"),
    Case("desc-sizes-set", lambda b: BufferTensorDesc("uint8", {2, 3}), TypeError, "sizes must be a sequence"),
    Case("desc-sizes-float", lambda b: BufferTensorDesc("uint8", [2.0, 3]), TypeError, "sizes[0]"),
    Case("desc-sizes-str-item", lambda b: BufferTensorDesc("uint8", [2, "3"]), TypeError, "sizes[1]"),
    Case("desc-sizes-none-item", lambda b: BufferTensorDesc("uint8", [2, None]), TypeError, "sizes[1]"),
    Case("desc-sizes-bool", lambda b: BufferTensorDesc("uint8", [2, True]), TypeError, "sizes[1]"),
    Case("desc-sizes-numpy-float", lambda b: BufferTensorDesc("uint8", [np.float32(2)]), TypeError, "sizes[0]"),
    Case("desc-sizes-numpy-bool", lambda b: BufferTensorDesc("uint8", [np.bool_(True)]), TypeError, "sizes[0]"),
    Case("desc-sizes-numpy-timedelta", lambda b: BufferTensorDesc("uint8", [np.timedelta64(2, "s")]), TypeError,
         "sizes[0]"),
    Case("desc-sizes-float-array", lambda b: BufferTensorDesc("uint8", np.array([2.0, 3.0])), TypeError,
         "sizes[0]"),
    Case("desc-sizes-nested", lambda b: BufferTensorDesc("uint8", [[2], 3]), TypeError, "sizes[0]"),
    Case("desc-sizes-ragged", lambda b: BufferTensorDesc("uint8", [[2, 3], [3]]), TypeError, "sizes[0]"),
    Case("desc-sizes-2d-array", lambda b: BufferTensorDesc("uint8", np.ones((2, 2), np.int64)), TypeError,
         "2-D"),
    Case("desc-sizes-zero", lambda b: BufferTensorDesc("uint8", [2, 0]), DescriptorError, "sizes[1] is 0"),
    Case("desc-sizes-negative", lambda b: BufferTensorDesc("uint8", [-2]), DescriptorError, "sizes[0] is -2"),
    Case("desc-sizes-2**32", lambda b: BufferTensorDesc("uint8", [U32]), DescriptorError, "at most 2**32 - 1"),
    Case("desc-sizes-numpy-2**40", lambda b: BufferTensorDesc("uint8", [np.uint64(2**40)]), DescriptorError,
         "sizes[0] is 1099511627776"),
    Case("desc-sizes-empty", lambda b: BufferTensorDesc("uint8", []), DescriptorError, "dimension_count"),
    Case("desc-sizes-9-dims", lambda b: BufferTensorDesc("uint8", [1] * 9), DescriptorError,
         "sizes has 9 entries"),
    Case("desc-element-count", lambda b: BufferTensorDesc("uint8", [65536, 65536]), DescriptorError,
         "element count"),
    Case("desc-element-count-8-dims", lambda b: BufferTensorDesc("float64", [256] * 8), DescriptorError,
         "element count"),
    # DirectML's C helper wraps this one to 262144 bytes.
    Case("desc-32bit-wrap-example", lambda b: BufferTensorDesc("float32", [65537, 65536], [65536, 1]),
         DescriptorError, "element count"),
    # ------------------------------------------------------------------ BufferTensorDesc: strides
    Case("desc-strides-short", lambda b: BufferTensorDesc("uint8", [2, 3], [1]), DescriptorError,
         "strides has 1 entry; expected 2, one per dimension (sizes has 2)"),
    Case("desc-strides-long", lambda b: BufferTensorDesc("uint8", [2], [1, 1]), DescriptorError,
         "strides has 2 entries"),
    Case("desc-strides-negative", lambda b: BufferTensorDesc("uint8", [2], [-1]), DescriptorError,
         "strides[0] is -1"),
    Case("desc-strides-2**32", lambda b: BufferTensorDesc("uint8", [2], [U32]), DescriptorError,
         "strides[0] is 4294967296"),
    Case("desc-strides-float", lambda b: BufferTensorDesc("uint8", [2, 3], [3, 1.0]), TypeError, "strides[1]"),
    Case("desc-strides-str", lambda b: BufferTensorDesc("uint8", [2], "1"), TypeError, "strides must be"),
    Case("desc-strides-dict", lambda b: BufferTensorDesc("uint8", [2], {0: 1}), TypeError, "strides must be"),
    Case("desc-strides-2d-array", lambda b: BufferTensorDesc("uint8", [2, 2], np.ones((2, 1), np.int64)),
         TypeError, "strides"),
    # ------------------------------------------------------------------ BufferTensorDesc: sizes in bytes
    Case("desc-total-too-small", lambda b: BufferTensorDesc("uint8", [8], total_tensor_size_in_bytes=4),
         DescriptorError, "total_tensor_size_in_bytes is 4"),
    Case("desc-total-2**64", lambda b: BufferTensorDesc("uint8", [8], total_tensor_size_in_bytes=2**64),
         DescriptorError, "less than 2**64"),
    Case("desc-total-negative", lambda b: BufferTensorDesc("uint8", [8], total_tensor_size_in_bytes=-8),
         DescriptorError, "total_tensor_size_in_bytes is -8"),
    Case("desc-total-float", lambda b: BufferTensorDesc("uint8", [8], total_tensor_size_in_bytes=8.0),
         TypeError, "total_tensor_size_in_bytes"),
    Case("desc-total-str", lambda b: BufferTensorDesc("uint8", [8], total_tensor_size_in_bytes="8"),
         TypeError, "total_tensor_size_in_bytes"),
    # FLOAT64 with a last element offset near 2**63: 2**66 bytes.
    Case("desc-overflow-float64-2**63", lambda b: BufferTensorDesc("float64", [2**31 + 1], [U32 - 1], directml_limits=False),
         DescriptorError, "2**64"),
    Case("desc-overflow-8-dims", lambda b: BufferTensorDesc("float64", [2**31 + 1] + [1] * 7, [U32 - 1] * 8,
                                                                         directml_limits=False),
         DescriptorError, "2**64"),
    Case("desc-overflow-uint64-max-extent", lambda b: BufferTensorDesc("uint64", [U32 - 1], [U32 - 1], directml_limits=False),
         DescriptorError, "2**64"),
    # DirectML's limits on the extent: 2**32 - 1 elements up to the last one, and the size of that many.
    Case("desc-extent-2**32+1", lambda b: BufferTensorDesc("float32", [3], strides=[2**31]), DescriptorError,
         "element extent of 4294967297"),
    Case("desc-extent-2**32", lambda b: BufferTensorDesc("uint8", [2], strides=[U32 - 1]), DescriptorError,
         "2**32 - 1"),
    Case("desc-extent-8-dims", lambda b: BufferTensorDesc("uint8", [2] * 8, [2**29] * 8), DescriptorError,
         "element extent"),
    Case("desc-total-2**40", lambda b: BufferTensorDesc("float32", [1], total_tensor_size_in_bytes=2**40),
         DescriptorError, "total_tensor_size_in_bytes is 1099511627776; DirectML's limit for FLOAT32 is 17179869180"),
    Case("desc-total-uint8-past-limit",
         lambda b: BufferTensorDesc("uint8", [U32 - 1], total_tensor_size_in_bytes=U32 + 4), DescriptorError,
         "DirectML's limit for UINT8 is 4294967296"),
    Case("desc-directml-limits-str", lambda b: BufferTensorDesc("uint8", [2], directml_limits="no"), TypeError,
         "directml_limits"),
    Case("from_layout-extent", lambda b: BufferTensorDesc.from_layout("uint8", [3, 3], "HW",
                                                                       row_pitch_alignment=2**31),
         DescriptorError, "element extent"),
    Case("to_rank-keeps-limits-off", lambda b: BufferTensorDesc("uint8", [2], [U32 - 1], directml_limits=False)
         .to_rank(2, directml_limits=True), DescriptorError, "element extent"),
    # ------------------------------------------------------------------ BufferTensorDesc: alignment, flags
    Case("desc-align-3", lambda b: BufferTensorDesc("uint8", [8], guaranteed_base_offset_alignment=3),
         DescriptorError, "guaranteed_base_offset_alignment is 3"),
    Case("desc-align-below-element", lambda b: BufferTensorDesc("float32", [8], guaranteed_base_offset_alignment=2),
         DescriptorError, "element size"),
    Case("desc-align-2**32", lambda b: BufferTensorDesc("float32", [8], guaranteed_base_offset_alignment=U32),
         DescriptorError, "guaranteed_base_offset_alignment is 4294967296"),
    Case("desc-align-negative", lambda b: BufferTensorDesc("float32", [8], guaranteed_base_offset_alignment=-4),
         DescriptorError, "guaranteed_base_offset_alignment is -4"),
    Case("desc-align-none", lambda b: BufferTensorDesc("float32", [8], guaranteed_base_offset_alignment=None),
         TypeError, "guaranteed_base_offset_alignment"),
    Case("desc-align-bool", lambda b: BufferTensorDesc("uint8", [8], guaranteed_base_offset_alignment=True),
         TypeError, "guaranteed_base_offset_alignment"),
    Case("desc-flags-2", lambda b: BufferTensorDesc("uint8", [8], flags=2), DescriptorError, "flags is 0x2"),
    Case("desc-flags-negative", lambda b: BufferTensorDesc("uint8", [8], flags=-1), DescriptorError, "flags"),
    Case("desc-flags-str", lambda b: BufferTensorDesc("uint8", [8], flags="1"), TypeError, "flags"),
    Case("desc-flags-bool", lambda b: BufferTensorDesc("uint8", [8], flags=True), TypeError, "flags"),
    # ------------------------------------------------------------------ BufferTensorDesc methods
    Case("offset_of-past-size", lambda b: U8_2x3.offset_of((2, 0)), IndexError, "index[0] is 2"),
    Case("offset_of-negative", lambda b: U8_2x3.offset_of((0, -1)), IndexError, "index[1] is -1"),
    Case("offset_of-2**64", lambda b: U8_2x3.offset_of((2**64, 0)), IndexError, "index[0]"),
    Case("offset_of-wrong-length", lambda b: U8_2x3.offset_of((1,)), IndexError,
         "index has 1 entry; expected 2, one per dimension"),
    Case("offset_of-float", lambda b: U8_2x3.offset_of((1.0, 0)), TypeError, "index[0]"),
    Case("offset_of-none", lambda b: U8_2x3.offset_of(None), TypeError, "index must be"),
    Case("offset_of-nested", lambda b: U8_2x3.offset_of([[0], [1]]), TypeError, "index[0]"),
    Case("to_rank-9", lambda b: U8_2x3.to_rank(9), DescriptorError, "rank is 9"),
    Case("to_rank-float", lambda b: U8_2x3.to_rank(4.0), TypeError, "rank"),
    Case("to_rank-drop-non-unit", lambda b: U8_2x3.to_rank(1), DescriptorError, "cannot reduce"),
    Case("from_layout-bad-letters", lambda b: BufferTensorDesc.from_layout("uint8", [1, 2, 3, 4], "NCHQ"),
         DescriptorError, "'NCHQ'"),
    Case("from_layout-none", lambda b: BufferTensorDesc.from_layout("uint8", [2, 3], None), TypeError, "layout"),
    Case("from_layout-pitch-zero",
         lambda b: BufferTensorDesc.from_layout("uint8", [2, 3], "HW", row_pitch_alignment=0),
         DescriptorError, "row_pitch_alignment is 0"),
    Case("from_layout-pitch-float",
         lambda b: BufferTensorDesc.from_layout("uint8", [2, 3], "HW", row_pitch_alignment=4.0),
         TypeError, "row_pitch_alignment"),
    Case("from_numpy-list", lambda b: BufferTensorDesc.from_numpy([1, 2]), TypeError,
         "array must be a numpy.ndarray"),
    Case("from_numpy-negative-strides", lambda b: BufferTensorDesc.from_numpy(b.np[::-1]), DescriptorError,
         "array.strides[0]"),
    Case("from_numpy-empty", lambda b: BufferTensorDesc.from_numpy(b.np[:0]), DescriptorError,
         "at least 1"),
    # ------------------------------------------------------------------ size functions
    Case("calc-dtype-unknown", lambda b: calc_buffer_tensor_size(0, [2]), DescriptorError, "UNKNOWN"),
    Case("calc-dtype-none", lambda b: calc_buffer_tensor_size(None, [2]), TypeError, "data_type"),
    Case("calc-sizes-str", lambda b: calc_buffer_tensor_size("uint8", "abc"), TypeError, "sizes"),
    Case("calc-sizes-zero", lambda b: calc_buffer_tensor_size("uint8", [0]), DescriptorError, "sizes[0] is 0"),
    Case("calc-strides-short", lambda b: calc_buffer_tensor_size("uint8", [2, 3], [1]), DescriptorError,
         "strides has 1 entry; expected 2, one per dimension (sizes has 2)"),
    Case("calc-strides-negative", lambda b: calc_buffer_tensor_size("uint8", [2, 3], [1, -1]),
         DescriptorError, "strides[1] is -1"),
    Case("calc-overflow-float64-2**63", lambda b: calc_buffer_tensor_size("float64", [2**31 + 1], [U32 - 1]),
         DescriptorError, "2**64"),
    Case("calc-overflow-8-dims-packed", lambda b: calc_buffer_tensor_size("float64", [U32 - 1] * 8),
         DescriptorError, "2**64"),
    Case("calc-overflow-8-dims-strided",
         lambda b: calc_buffer_tensor_size("uint64", [U32 - 1] * 8, [U32 - 1] * 8),
         DescriptorError, "2**64"),
    Case("calculate_strides-bad-layout", lambda b: calculate_strides("NCHX", [1, 1, 1, 1]), DescriptorError,
         "'NCHX'"),
    Case("calculate_strides-layout-wrong-rank", lambda b: calculate_strides("NCHW", [1, 1, 1]),
         DescriptorError, "rank-3"),
    Case("calculate_strides-layout-none", lambda b: calculate_strides(None, [1, 1]), TypeError, "layout"),
    Case("calculate_strides-layout-bytes", lambda b: calculate_strides(b"HW", [1, 1]), TypeError, "layout"),
    Case("calculate_strides-layout-repeated", lambda b: calculate_strides((0, 0), [1, 1]), DescriptorError,
         "not a permutation"),
    Case("calculate_strides-layout-float", lambda b: calculate_strides((0, 1.0), [1, 1]), TypeError,
         "layout[1]"),
    Case("calculate_strides-rank-6-name", lambda b: calculate_strides("NCDHWX", [1] * 6), DescriptorError,
         "a rank-6 tensor has no dimension letters; give its axes from slowest to fastest in memory "
         "as a tuple of indices, e.g. (0, 1, 2, 3, 4, 5)"),
    Case("calculate_strides-broadcast-short", lambda b: calculate_strides("HW", [1, 1], [True]),
         DescriptorError, "broadcast has 1 entry; expected 2, one per dimension"),
    Case("calculate_strides-broadcast-str", lambda b: calculate_strides("HW", [1, 1], "tt"), TypeError,
         "broadcast"),
    Case("calculate_strides-broadcast-2", lambda b: calculate_strides("HW", [1, 1], [2, 0]), TypeError,
         "broadcast[0]"),
    Case("calculate_strides-stride-overflow",
         lambda b: calculate_strides(tuple(range(8)), [U32 - 1] * 8), DescriptorError, "at most 2**32 - 1"),
    Case("broadcast_strides-not-aligned", lambda b: broadcast_strides([2, 3], [2, 4]), DescriptorError,
         "do not broadcast"),
    Case("broadcast_strides-too-many-dims", lambda b: broadcast_strides([2, 3, 4], [3, 4]), DescriptorError,
         "more dimensions"),
    Case("broadcast_strides-none", lambda b: broadcast_strides(None, [3]), TypeError, "physical_sizes"),
    Case("broadcast_strides-zero", lambda b: broadcast_strides([0], [3]), DescriptorError,
         "physical_sizes[0] is 0"),
    # ------------------------------------------------------------------ gather
    Case("gather-buffer-none", lambda b: gather(None, U8_2x3), TypeError, "buffer protocol"),
    Case("gather-buffer-str", lambda b: gather("abcdefgh", U8_2x3), TypeError, "buffer protocol"),
    Case("gather-buffer-list", lambda b: gather(list(range(8)), U8_2x3), TypeError, "buffer protocol"),
    Case("gather-desc-none", lambda b: gather(b.by, None), TypeError, "desc must be a BufferTensorDesc"),
    Case("gather-desc-tuple", lambda b: gather(b.by, ("uint8", [2, 3])), TypeError, "desc must be"),
    Case("gather-too-small", lambda b: gather(b.small, U8_2x3), BufferError, "too small"),
    Case("gather-total-past-end",
         lambda b: gather(b.by, BufferTensorDesc("uint8", [2], total_tensor_size_in_bytes=80)),
         BufferError, "too small"),
    Case("gather-offset-past-end", lambda b: gather(b.by, U8_2x3, offset=64), BufferError, "too small"),
    Case("gather-offset-2**64", lambda b: gather(b.by, U8_2x3, offset=2**64), BufferError, "offset"),
    Case("gather-offset-negative", lambda b: gather(b.by, U8_2x3, offset=-16), BufferError, "offset is -16"),
    Case("gather-offset-negative-relaxed", lambda b: gather(b.by, U8_2x3, offset=-1, check_alignment=False),
         BufferError, "offset is -1"),
    Case("gather-offset-misaligned", lambda b: gather(b.by, U8_2x3, offset=4), DescriptorError,
         "multiple of 16"),
    Case("gather-offset-guaranteed-alignment",
         lambda b: gather(b.by, BufferTensorDesc("uint8", [2], guaranteed_base_offset_alignment=32), offset=16),
         DescriptorError, "guaranteed_base_offset_alignment"),
    Case("gather-offset-float", lambda b: gather(b.by, U8_2x3, offset=16.0), TypeError, "offset"),
    Case("gather-offset-none", lambda b: gather(b.by, U8_2x3, offset=None), TypeError, "offset"),
    Case("gather-offset-bool", lambda b: gather(b.by, U8_2x3, offset=True), TypeError, "offset"),
    Case("gather-offset-numpy-float", lambda b: gather(b.by, U8_2x3, offset=np.float64(0)), TypeError, "offset"),
    Case("gather-check-alignment-str", lambda b: gather(b.by, U8_2x3, offset=4, check_alignment="no"),
         TypeError, "check_alignment"),
    Case("gather-noncontiguous-ndarray", lambda b: gather(b.strided, U8_2x3), BufferError, "contiguous"),
    Case("gather-noncontiguous-memoryview", lambda b: gather(b.mv_strided, U8_2x3), BufferError, "contiguous"),
    Case("gather-out-shape", lambda b: gather(b.by, U8_2x3, out=b.out.reshape(3, 2)), ValueError,
         "out has shape"),
    Case("gather-out-dtype", lambda b: gather(b.by, U8_2x3, out=b.out.view(np.int8)), TypeError,
         "out has dtype"),
    Case("gather-out-list", lambda b: gather(b.by, U8_2x3, out=[[0] * 3] * 2), TypeError,
         "out must be a numpy.ndarray"),
    Case("gather-out-readonly", lambda b: gather(b.by, U8_2x3, out=_ro_out(b)), BufferError, "out is read-only"),
    Case("gather-out-not-c-contiguous",
         lambda b: gather(b.by, U8_2x3, out=np.asfortranarray(b.out)), BufferError, "C-contiguous"),
    Case("gather-out-buffer-too-small", lambda b: gather(b.small, U8_2x3, out=b.out), BufferError, "too small"),
    # Valid descriptors whose extent dwarfs any buffer: refused, never wrapped.
    Case("gather-extent-2**64", lambda b: gather(b.by, F32_HUGE), BufferError, "too small"),
    Case("gather-8-dims-huge-strides", lambda b: gather(b.by, F64_8D), BufferError, "too small"),
    Case("gather-8-dims-total-near-2**63", lambda b: gather(b.by, F64_8D_2_63), BufferError, "too small"),
    Case("gather-far-elements-out", lambda b: gather(b.by, F64_FAR, out=b.out.astype(np.float64)[:2, :2].copy()),
         BufferError, "too small"),
    # ------------------------------------------------------------------ scatter
    Case("scatter-readonly-bytes", lambda b: scatter(b.arr, U8_2x3, b.by), BufferError, "read-only"),
    Case("scatter-readonly-memoryview", lambda b: scatter(b.arr, U8_2x3, b.mv_ro), BufferError, "read-only"),
    Case("scatter-readonly-ndarray", lambda b: scatter(b.arr, U8_2x3, b.np_ro), BufferError, "read-only"),
    Case("scatter-readonly-mmap", lambda b: scatter(b.arr, U8_2x3, b.mm_ro), BufferError, "read-only"),
    Case("scatter-noncontiguous-ndarray", lambda b: scatter(b.arr, U8_2x3, b.strided), BufferError,
         "contiguous"),
    Case("scatter-noncontiguous-memoryview", lambda b: scatter(b.arr, U8_2x3, b.mv_strided), BufferError,
         "contiguous"),
    Case("scatter-buffer-none", lambda b: scatter(b.arr, U8_2x3, None), TypeError, "buffer protocol"),
    Case("scatter-desc-none", lambda b: scatter(b.arr, None, b.ba), TypeError, "desc must be"),
    Case("scatter-too-small", lambda b: scatter(b.arr, U8_2x3, b.small), BufferError, "too small"),
    Case("scatter-array-module-too-small", lambda b: scatter(b.arr, U8_2x3, b.aa, offset=64), BufferError,
         "too small"),
    Case("scatter-offset-past-end", lambda b: scatter(b.arr, U8_2x3, b.mm, offset=64), BufferError, "too small"),
    Case("scatter-offset-negative", lambda b: scatter(b.arr, U8_2x3, b.ba, offset=-16), BufferError,
         "offset is -16"),
    Case("scatter-offset-misaligned", lambda b: scatter(b.arr, U8_2x3, b.ba, offset=8), DescriptorError,
         "multiple of 16"),
    Case("scatter-offset-float", lambda b: scatter(b.arr, U8_2x3, b.ba, offset=0.0), TypeError, "offset"),
    Case("scatter-shape-transposed", lambda b: scatter(b.arr.T, U8_2x3, b.ba), ValueError,
         "array has shape (3, 2)"),
    Case("scatter-shape-flat", lambda b: scatter(b.arr.ravel(), U8_2x3, b.ba), ValueError, "array has shape (6,)"),
    Case("scatter-shape-scalar", lambda b: scatter(5, U8_2x3, b.ba), ValueError, "array has shape ()"),
    Case("scatter-ragged-list", lambda b: scatter([[1, 2, 3], [4, 5]], U8_2x3, b.ba), ValueError, "array"),
    Case("scatter-dtype-float-to-uint8", lambda b: scatter(b.arr.astype(np.float32), U8_2x3, b.ba), TypeError,
         "array has dtype float32"),
    Case("scatter-dtype-complex-to-float32",
         lambda b: scatter(np.zeros((2, 3), np.complex64), BufferTensorDesc("float32", [2, 3]), b.ba),
         TypeError, "array has dtype complex64"),
    Case("scatter-dtype-object", lambda b: scatter(b.arr.astype(object), U8_2x3, b.ba), TypeError,
         "array holds Python objects"),
    Case("scatter-uint4-16", lambda b: scatter(b.arr_u4, U4_6, b.ba), ValueError, "UINT4 elements must be 0 to 15"),
    Case("scatter-uint4-uint16-300",
         lambda b: scatter(np.array([300, 1], np.uint16), BufferTensorDesc("uint4", [2]), b.ba),
         ValueError, "UINT4"),
    Case("scatter-uint4-from-int8", lambda b: scatter(np.array([1, -1], np.int8), BufferTensorDesc("uint4", [2]),
                                                      b.ba), TypeError, "array has dtype int8"),
    Case("scatter-int4-8", lambda b: scatter(np.array([1, 8], np.int8), I4_2, b.ba), ValueError,
         "INT4 elements must be -8 to 7"),
    Case("scatter-int4-minus-9", lambda b: scatter(np.array([-9, 1], np.int64), I4_2, b.ba), ValueError,
         "INT4 elements must be -8 to 7"),
    Case("scatter-overlapping-destination",
         lambda b: scatter(b.arr, BufferTensorDesc("uint8", [2, 3], [0, 1]), b.ba), DescriptorError, "overlapping"),
    Case("scatter-far-elements", lambda b: scatter(np.ones((2, 2)), F64_FAR, b.ba), BufferError, "too small"),
    Case("scatter-8-dims-huge-strides", lambda b: scatter(np.ones([2] * 8), F64_8D_FAR, b.np), BufferError,
         "too small"),
    Case("scatter-8-dims-hostile-strides",
         lambda b: scatter(np.broadcast_to(np.uint8(0), U8_8D_HOSTILE_SIZES), _hostile(), b.ba), BufferError,
         "buffer too small"),
    Case("scatter-8-dims-hostile-strides-misaligned",
         lambda b: scatter(np.broadcast_to(np.uint8(0), U8_8D_HOSTILE_SIZES), _hostile(), b.ba, offset=1),
         DescriptorError, "offset is 1"),
    Case("scatter-offset-2**62", lambda b: scatter(b.arr, U8_2x3, b.ba, offset=2**62), BufferError, "offset"),
    # ------------------------------------------------------------------ copy_tensor
    Case("copy-sizes-differ", lambda b: copy_tensor(b.by, U8_2x3, b.ba, U8_2x3_T), DescriptorError,
         "sizes"),
    Case("copy-dtype-differs", lambda b: copy_tensor(b.by, U8_2x3, b.ba, BufferTensorDesc("int8", [2, 3])),
         DescriptorError, "data_type"),
    Case("copy-src-none", lambda b: copy_tensor(None, U8_2x3, b.ba, U8_2x3), TypeError, "buffer protocol"),
    Case("copy-dst-none", lambda b: copy_tensor(b.by, U8_2x3, None, U8_2x3), TypeError, "buffer protocol"),
    Case("copy-src-desc-none", lambda b: copy_tensor(b.by, None, b.ba, U8_2x3), TypeError, "src_desc"),
    Case("copy-dst-desc-str", lambda b: copy_tensor(b.by, U8_2x3, b.ba, "uint8"), TypeError, "dst_desc"),
    Case("copy-dst-readonly", lambda b: copy_tensor(b.ba, U8_2x3, b.by, U8_2x3), BufferError, "read-only"),
    Case("copy-dst-noncontiguous", lambda b: copy_tensor(b.by, U8_2x3, b.strided, U8_2x3), BufferError,
         "contiguous"),
    Case("copy-dst-overlapping", lambda b: copy_tensor(b.by, U8_2x3, b.ba, BufferTensorDesc("uint8", [2, 3], [1, 1])),
         DescriptorError, "overlapping"),
    Case("copy-8-dims-hostile-strides", lambda b: copy_tensor(b.by, _hostile(), b.ba, _hostile()), BufferError,
         "src too small"),
    Case("copy-dst-8-dims-hostile-strides",
         lambda b: copy_tensor(b.by, BufferTensorDesc("uint8", U8_8D_HOSTILE_SIZES, [0] * 8), b.ba, _hostile()),
         BufferError, "dst too small"),
    Case("copy-src-too-small", lambda b: copy_tensor(b.small, U8_2x3, b.ba, U8_2x3), BufferError, "too small"),
    Case("copy-dst-too-small", lambda b: copy_tensor(b.by, U8_2x3, b.small, U8_2x3), BufferError, "too small"),
    Case("copy-same-buffer-dst-too-small",
         lambda b: copy_tensor(b.ba, U8_2x3, b.ba, U8_2x3, dst_offset=64), BufferError, "too small"),
    Case("copy-src-offset-negative", lambda b: copy_tensor(b.by, U8_2x3, b.ba, U8_2x3, src_offset=-16),
         BufferError, "src_offset"),
    Case("copy-dst-offset-misaligned", lambda b: copy_tensor(b.by, U8_2x3, b.ba, U8_2x3, dst_offset=3),
         DescriptorError, "dst_offset"),
    Case("copy-dst-offset-past-end", lambda b: copy_tensor(b.by, U8_2x3, b.ba, U8_2x3, dst_offset=64),
         BufferError, "too small"),
    Case("copy-src-offset-str", lambda b: copy_tensor(b.by, U8_2x3, b.ba, U8_2x3, src_offset="0"),
         TypeError, "src_offset"),
    Case("copy-dst-far-elements", lambda b: copy_tensor(b.by, BufferTensorDesc("float64", [2, 2]), b.ba, F64_FAR),
         BufferError, "too small"),
    Case("copy-src-8-dims-near-2**63",
         lambda b: copy_tensor(b.by, F64_8D_2_63, b.ba, BufferTensorDesc("float64", F64_8D_2_63.sizes)),
         BufferError, "too small"),
    Case("copy-extent-2**64", lambda b: copy_tensor(b.by, F32_HUGE, b.ba, F32_HUGE), BufferError, "too small"),
    # ------------------------------------------------------------------ view
    Case("view-int4", lambda b: view(b.by, I4_2), DescriptorError, "4 bits"),
    Case("view-buffer-none", lambda b: view(None, U8_2x3), TypeError, "buffer protocol"),
    Case("view-desc-list", lambda b: view(b.by, [2, 3]), TypeError, "desc must be"),
    Case("view-8-dims-hostile-strides", lambda b: view(b.by, _hostile()), BufferError, "buffer too small"),
    Case("view-too-small", lambda b: view(b.small, U8_2x3), BufferError, "too small"),
    Case("view-offset-past-end", lambda b: view(b.by, U8_2x3, offset=64), BufferError, "too small"),
    Case("view-offset-negative", lambda b: view(b.by, U8_2x3, offset=-16), BufferError, "offset is -16"),
    Case("view-offset-misaligned", lambda b: view(b.by, U8_2x3, offset=1), DescriptorError, "multiple of 16"),
    Case("view-noncontiguous-ndarray", lambda b: view(b.strided, U8_2x3), BufferError, "contiguous"),
    Case("view-extent-2**64", lambda b: view(b.by, F32_HUGE), BufferError, "too small"),
    Case("view-8-dims-total-near-2**63", lambda b: view(b.by, F64_8D_2_63), BufferError, "too small"),
    # ------------------------------------------------------------------ gather with conversion
    Case("gather-dtype-bad-name", lambda b: gather(b.by, U8_2x3, dtype="float33"), DescriptorError, "'float33'"),
    Case("gather-dtype-unknown", lambda b: gather(b.by, U8_2x3, dtype=0), DescriptorError, "UNKNOWN"),
    Case("gather-dtype-float", lambda b: gather(b.by, U8_2x3, dtype=1.5), TypeError, "dtype"),
    Case("gather-scale-string", lambda b: gather(b.by, U8_2x3, scale="2"), TypeError, "scale must be"),
    Case("gather-scale-complex", lambda b: gather(b.by, U8_2x3, scale=1j), TypeError, "scale has dtype"),
    Case("gather-scale-bool", lambda b: gather(b.by, U8_2x3, scale=True), TypeError, "scale has dtype bool"),
    Case("gather-scale-2d", lambda b: gather(b.by, U8_2x3, scale=np.ones((2, 3)), axis=1), ValueError,
         "scale is 2-D"),
    Case("gather-scale-wrong-length", lambda b: gather(b.by, U8_2x3, scale=[1, 2], axis=1), ValueError,
         "scale has length 2; expected sizes[1] = 3"),
    Case("gather-scale-1d-without-axis", lambda b: gather(b.by, U8_2x3, scale=[1, 2, 3]), ValueError, "axis="),
    Case("gather-bias-wrong-length", lambda b: gather(b.by, U8_2x3, bias=[1, 2, 3], axis=0), ValueError,
         "bias has length 3"),
    Case("gather-axis-out-of-range", lambda b: gather(b.by, U8_2x3, scale=2.0, axis=2), ValueError, "axis is 2"),
    Case("gather-axis-negative-out-of-range", lambda b: gather(b.by, U8_2x3, scale=2.0, axis=-3), ValueError,
         "axis is -3"),
    Case("gather-axis-float", lambda b: gather(b.by, U8_2x3, scale=2.0, axis=1.0), TypeError,
         "axis must be an integer"),
    Case("gather-axis-alone-out-of-range", lambda b: gather(b.by, U8_2x3, axis=5), ValueError, "axis is 5"),
    Case("gather-convert-out-dtype", lambda b: gather(b.by, U8_2x3, dtype="float32", out=b.out), TypeError,
         "out has dtype uint8"),
    Case("gather-convert-out-readonly", lambda b: gather(b.by, U8_2x3, scale=2.0, out=b.out_ro), BufferError,
         "read-only"),
    Case("gather-convert-too-small", lambda b: gather(b.small, U8_2x3, dtype="float32"), BufferError, "too small"),
    Case("gather-convert-object-buffer",
         lambda b: gather(np.array(list(range(8)), dtype=object), U8_2x3, dtype="float32"), TypeError,
         "Python objects"),
    Case("gather-convert-offset-misaligned", lambda b: gather(b.by, U8_2x3, offset=3, scale=1.0),
         DescriptorError, "multiple of 16"),
    # ------------------------------------------------------------------ convert
    Case("convert-sizes-differ", lambda b: convert(b.by, U8_2x3, b.ba, U8_2x3_T), DescriptorError, "differ"),
    Case("convert-dst-readonly", lambda b: convert(b.by, U8_2x3, b.np_ro, F32_2x3), BufferError, "read-only"),
    Case("convert-dst-overlapping", lambda b: convert(b.by, U8_2x3, b.ba, BufferTensorDesc("float32", [2, 3], [0, 1])),
         DescriptorError, "overlapping"),
    Case("convert-src-too-small", lambda b: convert(b.small, U8_2x3, b.ba, F32_2x3), BufferError, "too small"),
    Case("convert-dst-too-small", lambda b: convert(b.by, U8_2x3, b.small, F32_2x3), BufferError, "too small"),
    Case("convert-src-object-buffer",
         lambda b: convert(np.array(list(range(8)), dtype=object), U8_2x3, b.ba, F32_2x3), TypeError,
         "Python objects"),
    Case("convert-src-not-buffer", lambda b: convert([1, 2, 3], U8_2x3, b.ba, F32_2x3), TypeError,
         "buffer protocol"),
    Case("convert-scale-wrong-length", lambda b: convert(b.by, U8_2x3, b.ba, F32_2x3, scale=[1.0] * 4, axis=1),
         ValueError, "scale has length 4"),
    Case("convert-axis-out-of-range", lambda b: convert(b.by, U8_2x3, b.ba, F32_2x3, bias=1.0, axis=7),
         ValueError, "axis is 7"),
    Case("convert-dst-offset-misaligned", lambda b: convert(b.by, U8_2x3, b.ba, F32_2x3, dst_offset=8),
         DescriptorError, "dst_offset is 8"),
    Case("convert-src-desc-list", lambda b: convert(b.by, [2, 3], b.ba, F32_2x3), TypeError, "src_desc must be"),
    # ------------------------------------------------------------------ quantize
    Case("quantize-scale-zero", lambda b: quantize(b.arr, U8_2x3, b.ba, 0.0), ValueError, "finite and non-zero"),
    Case("quantize-scale-nan", lambda b: quantize(b.arr, U8_2x3, b.ba, float("nan")), ValueError,
         "finite and non-zero"),
    Case("quantize-scale-inf-per-axis", lambda b: quantize(b.arr, U8_2x3, b.ba, [1.0, np.inf, 2.0]), ValueError,
         "holds inf"),
    Case("quantize-scale-underflows-float32", lambda b: quantize(b.arr, U8_2x3, b.ba, 1e-50), ValueError,
         "finite and non-zero"),
    Case("quantize-scale-string", lambda b: quantize(b.arr, U8_2x3, b.ba, "0.5"), TypeError, "scale must be"),
    Case("quantize-scale-wrong-length", lambda b: quantize(b.arr, U8_2x3, b.ba, [1.0, 2.0]), ValueError,
         "scale has length 2; expected sizes[1] = 3"),
    Case("quantize-scale-3d", lambda b: quantize(b.arr, U8_2x3, b.ba, np.ones((1, 2, 3))), ValueError,
         "scale is 3-D"),
    Case("quantize-axis-out-of-range", lambda b: quantize(b.arr, U8_2x3, b.ba, [1.0, 2.0, 3.0], axis=2),
         ValueError, "axis is 2"),
    Case("quantize-axis-float", lambda b: quantize(b.arr, U8_2x3, b.ba, 1.0, axis=1.5), TypeError,
         "axis must be an integer"),
    Case("quantize-zero-point-too-big", lambda b: quantize(b.arr, U8_2x3, b.ba, 1.0, 256), ValueError,
         "zero_point holds 256; UINT8 zero points must be 0 to 255"),
    Case("quantize-zero-point-negative-uint4", lambda b: quantize(b.arr_u4 % 16, U4_6, b.ba, 1.0, -1), ValueError,
         "zero_point holds -1; UINT4"),
    Case("quantize-zero-point-int4-range", lambda b: quantize([1.0, 2.0], I4_2, b.ba, [1.0, 1.0], [0, 8], axis=0),
         ValueError, "zero_point holds 8; INT4"),
    Case("quantize-zero-point-float", lambda b: quantize(b.arr, U8_2x3, b.ba, 1.0, 1.5), TypeError,
         "zero_point has dtype float64"),
    Case("quantize-zero-point-shape", lambda b: quantize(b.arr, U8_2x3, b.ba, [1.0, 2.0, 3.0], [1, 2]),
         ValueError, "zero_point has shape (2,)"),
    Case("quantize-block-size-mismatch", lambda b: quantize(b.arr, U8_2x3, b.ba, np.ones((2, 1)), block_size=2),
         ValueError, "block_size 2 along axis 1 needs shape (2, 2)"),
    Case("quantize-block-size-1d-scale", lambda b: quantize(b.arr, U8_2x3, b.ba, [1.0, 1.0], block_size=2),
         ValueError, "block_size 2"),
    Case("quantize-block-size-negative", lambda b: quantize(b.arr, U8_2x3, b.ba, 1.0, block_size=-1), ValueError,
         "block_size is -1"),
    Case("quantize-block-size-float", lambda b: quantize(b.arr, U8_2x3, b.ba, 1.0, block_size=2.0), TypeError,
         "block_size must be an integer"),
    Case("quantize-desc-float32", lambda b: quantize(b.arr, F32_2x3, b.ba, 1.0), DescriptorError,
         "quantize writes"),
    Case("quantize-desc-int32", lambda b: quantize(b.arr, BufferTensorDesc("int32", [2, 3]), b.ba, 1.0),
         DescriptorError, "INT32"),
    Case("quantize-array-shape", lambda b: quantize(b.arr.T, U8_2x3, b.ba, 1.0), ValueError, "array has shape"),
    Case("quantize-array-strings", lambda b: quantize([["a"] * 3] * 2, U8_2x3, b.ba, 1.0), TypeError,
         "array has dtype"),
    Case("quantize-buffer-readonly", lambda b: quantize(b.arr, U8_2x3, b.by, 1.0), BufferError, "read-only"),
    Case("quantize-buffer-too-small", lambda b: quantize(b.arr, U8_2x3, b.small, 1.0), BufferError, "too small"),
    Case("quantize-desc-overlapping",
         lambda b: quantize(b.arr, BufferTensorDesc("uint8", [2, 3], [0, 1]), b.ba, 1.0), DescriptorError,
         "overlapping"),
    # ------------------------------------------------------------------ dequantize
    Case("dequantize-dtype-int8", lambda b: dequantize(b.by, U8_2x3, 1.0, dtype="int8"), ValueError,
         "FLOAT32 or FLOAT16"),
    Case("dequantize-dtype-bad-name", lambda b: dequantize(b.by, U8_2x3, 1.0, dtype="float33"), DescriptorError,
         "'float33'"),
    Case("dequantize-int32-zero-point", lambda b: dequantize(b.by, BufferTensorDesc("int32", [2]), 1.0, 0),
         ValueError, "zero_point must be None for INT32"),
    Case("dequantize-desc-float16", lambda b: dequantize(b.by, BufferTensorDesc("float16", [2]), 1.0),
         DescriptorError, "dequantize reads"),
    Case("dequantize-scale-zero-blocked", lambda b: dequantize(b.by, U8_2x3, np.array([[1.0, 0.0], [1.0, 1.0]]),
                                                               block_size=2), ValueError, "finite and non-zero"),
    Case("dequantize-scale-neg-inf", lambda b: dequantize(b.by, U8_2x3, -np.inf), ValueError,
         "finite and non-zero"),
    Case("dequantize-block-size-mismatch",
         lambda b: dequantize(b.by, U8_2x3, np.ones((2, 3)), axis=1, block_size=2), ValueError,
         "needs shape (2, 2)"),
    Case("dequantize-axis-out-of-range", lambda b: dequantize(b.by, U8_2x3, [1.0, 1.0], axis=-3), ValueError,
         "axis is -3"),
    Case("dequantize-zero-point-too-small", lambda b: dequantize(b.by, I4_2, 1.0, -9), ValueError,
         "zero_point holds -9"),
    Case("dequantize-out-dtype", lambda b: dequantize(b.by, U8_2x3, 1.0, out=b.out), TypeError,
         "out has dtype uint8"),
    Case("dequantize-too-small", lambda b: dequantize(b.small, U8_2x3, 1.0), BufferError, "too small"),
    Case("dequantize-object-buffer",
         lambda b: dequantize(np.array(list(range(8)), dtype=object), U8_2x3, 1.0), TypeError, "Python objects"),
    # ------------------------------------------------------------------ threads
    Case("set_num_threads-0", lambda b: dmlstride.set_num_threads(0), ValueError, "at least 1"),
    Case("set_num_threads-float", lambda b: dmlstride.set_num_threads(2.0), TypeError, "n must be an integer"),
    Case("set_num_threads-2**40", lambda b: dmlstride.set_num_threads(2**40), ValueError, "threads"),
    # ------------------------------------------------------------------ command line
    Case("cli-no-arguments", cli(), CLI, "required"),
    Case("cli-max-elements-huge", cli("describe", "--dtype", "uint8", "--sizes", "20000,1000",
                                      "--max-elements", "1000000000"), CLI, "max_elements"),
    Case("cli-unknown-command", cli("frobnicate"), CLI, "invalid choice"),
    Case("cli-missing-dtype", cli("size", "--sizes", "2,3"), CLI, "--dtype"),
    Case("cli-sizes-not-integers", cli("size", "--dtype", "uint8", "--sizes", "2,x"), CLI,
         "comma-separated list of integers"),
    Case("cli-sizes-empty-item", cli("size", "--dtype", "uint8", "--sizes", "2,,3"), CLI,
         "comma-separated list of integers"),
    Case("cli-sizes-zero", cli("size", "--dtype", "uint8", "--sizes", "0,3"), CLI, "sizes[0] is 0"),
    Case("cli-sizes-negative", cli("size", "--dtype", "uint8", "--sizes=-2"), CLI, "sizes[0] is -2"),
    Case("cli-sizes-2**32", cli("size", "--dtype", "uint8", "--sizes", "4294967296"), CLI, "at most 2**32 - 1"),
    Case("cli-sizes-9-dims", cli("size", "--dtype", "uint8", "--sizes", "1,1,1,1,1,1,1,1,1"), CLI,
         "sizes has 9 entries"),
    Case("cli-bad-dtype", cli("size", "--dtype", "float33", "--sizes", "2"), CLI, "'float33'"),
    Case("cli-unknown-dtype", cli("describe", "--dtype", "unknown", "--sizes", "2"), CLI, "UNKNOWN"),
    Case("cli-strides-short", cli("size", "--dtype", "uint8", "--sizes", "2,3", "--strides", "1"), CLI,
         "strides has 1 entry; expected 2"),
    Case("cli-strides-negative", cli("size", "--dtype", "uint8", "--sizes", "2", "--strides=-1"), CLI,
         "strides[0] is -1"),
    Case("cli-size-overflow",
         cli("size", "--dtype", "float64", "--sizes", "2147483649", "--strides", "4294967295"), CLI, "2**64"),
    Case("cli-describe-strides-and-layout",
         cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--strides", "3,1", "--layout", "HW"), CLI,
         "cannot be combined"),
    Case("cli-describe-bad-layout", cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--layout", "XY"), CLI,
         "'XY'"),
    Case("cli-describe-alignment-3", cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--alignment", "3"),
         CLI, "guaranteed_base_offset_alignment is 3"),
    Case("cli-describe-total-too-small",
         cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--total-size", "4"), CLI,
         "total_tensor_size_in_bytes is 4"),
    Case("cli-describe-broadcast-flags",
         cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--layout", "HW", "--broadcast", "1,0,0"), CLI,
         "--broadcast"),
    Case("cli-describe-row-pitch-zero",
         cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--layout", "HW", "--row-pitch", "0"), CLI,
         "row_pitch_alignment is 0"),
    Case("cli-describe-max-elements-text",
         cli("describe", "--dtype", "uint8", "--sizes", "2,3", "--max-elements", "x"), CLI, "not an integer"),
    Case("cli-describe-extent",
         cli("describe", "--dtype", "float32", "--sizes", "3", "--strides", "2147483648"), CLI,
         "directml_limits=False"),
    Case("cli-describe-total-size-limit",
         cli("describe", "--dtype", "float32", "--sizes", "1", "--total-size", "1099511627776"), CLI,
         "DirectML's limit for FLOAT32"),
    Case("cli-describe-no-limits-keeps-32-bit-strides",
         cli("describe", "--dtype", "float32", "--sizes", "3", "--strides", "4294967296", "--no-directml-limits"),
         CLI, "strides[0] is 4294967296"),
    Case("cli-describe-element-count",
         cli("describe", "--dtype", "float32", "--sizes", "65537,65536", "--strides", "65536,1"), CLI,
         "element count"),
]


# ---------------------------------------------------------------------------------------
# Buffers that hold Python objects or pointers.  Moving raw bytes into them
# corrupts reference counts (the interpreter crashes later) and moving bytes out
# of them leaks addresses, so every entry point refuses them before a byte moves.
# These entries run in a child interpreter: should one get through, the crash
# fails its test instead of ending the run.


class _UnionObject(ctypes.Union):
    _fields_ = [("i", ctypes.c_uint64), ("o", ctypes.py_object)]


class _PackedObject(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("i", ctypes.c_uint8), ("o", ctypes.py_object)]


class _UnionCharPointer(ctypes.Union):
    _fields_ = [("i", ctypes.c_uint64), ("p", ctypes.c_char_p)]


class ObjectBuffers:
    """Fresh buffers that hold Python objects (or pointers), and plain partners for them."""

    def __init__(self) -> None:
        self.items = [object() for _ in range(16)]
        self.objs = np.array(self.items, dtype=object)                    # 128 bytes of references
        self.objs2 = np.array(self.items[:2], dtype=object)               # the 16-byte buffer of the report
        self.record = np.zeros(16, dtype=[("x", "f4"), ("o", "O")])        # format T{f:x:O:o:}
        self.record["o"] = self.items
        self.subarray = np.zeros(8, dtype=[("x", "f4"), ("o", "O", (2,))])  # format T{f:x:(2)O:o:}
        self.subarray["o"] = np.array(self.items, dtype=object).reshape(8, 2)
        self.py_object = (ctypes.py_object * 16)(*self.items)             # format <O
        self.union = (_UnionObject * 8)()                                   # format B: the fields tell
        self.packed = (_PackedObject * 8)()
        for k in range(8):
            self.union[k].o = self.items[k]
            self.packed[k].o = self.items[k]
        self.cast = memoryview(self.objs).cast("B")                       # format B over references
        self.strings = [f"s{k}".encode() for k in range(8)]
        self.char_p = (ctypes.c_char_p * 8)(*self.strings)                # format <z
        self.void_p = (ctypes.c_void_p * 8)(*[id(x) for x in self.items[:8]])  # format <P
        self.union_p = (_UnionCharPointer * 8)()
        self.int_p = (ctypes.POINTER(ctypes.c_int) * 8)()                 # format &<i
        self.ba = bytearray(pattern(256))
        self.arr = (np.arange(6, dtype=np.uint8) + 1).reshape(2, 3)
        self.out = np.full((2, 3), 0xAB, dtype=np.uint8)

    def watched(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k not in ("items", "strings", "cast")}

    def snapshot(self) -> dict[str, bytes]:
        return {k: bytes(memoryview(v).cast("B")) for k, v in self.watched().items()}

    def intact(self) -> bool:
        """Every reference still points at its own object (a corrupted one crashes here)."""
        refs = [list(self.objs), list(self.record["o"]), list(self.subarray["o"].ravel()),
                list(self.py_object), [u.o for u in self.union], [p.o for p in self.packed]]
        ok = all(a is b for got in refs for a, b in zip(got, self.items))
        ok = ok and list(self.objs2) == self.items[:2] and list(self.char_p) == self.strings
        gc.collect()
        return ok and len(repr(self.objs)) > 0


def _gather_fast(o: ObjectBuffers, buffer: Any) -> Any:
    """Warm the descriptor's gather fast path on a plain buffer, then gather from ``buffer``."""
    desc = BufferTensorDesc("uint8", [2, 3])
    gather(o.ba, desc)
    return gather(buffer, desc)


def _scatter_fast(o: ObjectBuffers, buffer: Any, array: Any = None) -> Any:
    """Warm the descriptor's scatter fast path on a fresh plain buffer, then scatter into ``buffer``."""
    desc = BufferTensorDesc("uint8", [2, 3])
    scatter(o.arr, desc, bytearray(16))
    return scatter(o.arr if array is None else array, desc, buffer)


def _copy_fast(o: ObjectBuffers, src: Any, dst: Any) -> Any:
    """Warm the descriptor pair's copy fast path on fresh plain buffers, then copy from ``src`` to ``dst``."""
    a, b = BufferTensorDesc("uint8", [16]), BufferTensorDesc("uint8", [16])
    copy_tensor(bytes(16), a, bytearray(16), b)
    return copy_tensor(src, a, dst, b)


U8_16 = BufferTensorDesc("uint8", [16])
F32_2 = BufferTensorDesc("float32", [2])

OBJECT_CASES: list[Case] = [
    # gather reads references as bytes: address leaks and references nobody counts.
    Case("gather-objects-ndarray", lambda o: gather(o.objs2, U8_16), TypeError, "buffer holds Python objects"),
    Case("gather-objects-fast-path", lambda o: _gather_fast(o, o.objs), TypeError, "buffer holds Python objects"),
    Case("gather-objects-structured", lambda o: gather(o.record, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-subarray", lambda o: gather(o.subarray, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-ctypes-py_object", lambda o: gather(o.py_object, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-ctypes-union", lambda o: gather(o.union, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-ctypes-packed", lambda o: gather(o.packed, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-memoryview", lambda o: gather(memoryview(o.objs), U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-memoryview-cast", lambda o: gather(o.cast, U8_2x3), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-memoryview-cast-fast-path", lambda o: _gather_fast(o, o.cast), TypeError,
         "buffer holds Python objects"),
    Case("gather-objects-out", lambda o: gather(o.ba, U8_2x3, out=np.empty((2, 3), object)), TypeError,
         "out holds Python objects"),
    Case("gather-pointers-char_p", lambda o: gather(o.char_p, U8_2x3), TypeError, "buffer holds pointers"),
    Case("gather-pointers-void_p", lambda o: gather(o.void_p, U8_2x3), TypeError, "buffer holds pointers"),
    Case("gather-pointers-pointer-to", lambda o: gather(o.int_p, U8_2x3), TypeError, "buffer holds pointers"),
    Case("gather-pointers-union", lambda o: gather(o.union_p, U8_2x3), TypeError, "buffer holds pointers"),
    Case("gather-pointers-memoryview-cast", lambda o: gather(memoryview(o.ba).cast("P"), U8_2x3), TypeError,
         "buffer holds pointers"),
    # scatter writes bytes over references: the interpreter crashes when it next uses them.
    Case("scatter-objects-buffer", lambda o: scatter(np.full(16, 0x41, np.uint8), U8_16, o.objs2), TypeError,
         "buffer holds Python objects"),
    Case("scatter-objects-structured", lambda o: scatter(o.arr, U8_2x3, o.record), TypeError,
         "buffer holds Python objects"),
    Case("scatter-objects-ctypes-py_object", lambda o: scatter(o.arr, U8_2x3, o.py_object), TypeError,
         "buffer holds Python objects"),
    Case("scatter-objects-ctypes-union", lambda o: scatter(o.arr, U8_2x3, o.union), TypeError,
         "buffer holds Python objects"),
    Case("scatter-objects-memoryview-cast", lambda o: scatter(o.arr, U8_2x3, o.cast), TypeError,
         "buffer holds Python objects"),
    Case("scatter-pointers-char_p", lambda o: scatter(o.arr, U8_2x3, o.char_p), TypeError,
         "buffer holds pointers"),
    Case("scatter-objects-fast-path", lambda o: _scatter_fast(o, o.objs), TypeError,
         "buffer holds Python objects"),
    Case("scatter-objects-memoryview-cast-fast-path", lambda o: _scatter_fast(o, o.cast), TypeError,
         "buffer holds Python objects"),
    Case("scatter-pointers-fast-path", lambda o: _scatter_fast(o, o.char_p), TypeError, "buffer holds pointers"),
    Case("scatter-objects-array-fast-path", lambda o: _scatter_fast(o, bytearray(16), o.objs[:6].reshape(2, 3)),
         TypeError, "array holds Python objects"),
    Case("scatter-objects-array", lambda o: scatter(o.objs[:6].reshape(2, 3), U8_2x3, o.ba), TypeError,
         "array holds Python objects"),
    Case("scatter-objects-array-list", lambda o: scatter([o.items[:3], o.items[3:6]], U8_2x3, o.ba), TypeError,
         "array holds Python objects"),
    Case("scatter-objects-array-union", lambda o: scatter(o.union, BufferTensorDesc("uint8", [8]), o.ba),
         TypeError, "array holds Python objects"),
    Case("scatter-pointers-array", lambda o: scatter(o.void_p, BufferTensorDesc("uint64", [8]), o.ba), TypeError,
         "array holds pointers"),
    # copy_tensor, either side.
    Case("copy-objects-src", lambda o: copy_tensor(o.objs, U8_16, o.ba, U8_16), TypeError,
         "src holds Python objects"),
    Case("copy-objects-dst", lambda o: copy_tensor(o.ba, U8_16, o.objs, U8_16), TypeError,
         "dst holds Python objects"),
    Case("copy-objects-dst-structured", lambda o: copy_tensor(o.ba, F32_2, o.record, F32_2), TypeError,
         "dst holds Python objects"),
    Case("copy-objects-dst-ctypes-union", lambda o: copy_tensor(o.ba, U8_16, o.union, U8_16), TypeError,
         "dst holds Python objects"),
    Case("copy-objects-same-buffer", lambda o: copy_tensor(o.objs, U8_16, o.objs, U8_16, dst_offset=16),
         TypeError, "src holds Python objects"),
    Case("copy-pointers-dst", lambda o: copy_tensor(o.ba, U8_16, o.char_p, U8_16), TypeError,
         "dst holds pointers"),
    Case("copy-objects-src-fast-path", lambda o: _copy_fast(o, o.objs, bytearray(16)), TypeError,
         "src holds Python objects"),
    Case("copy-objects-dst-fast-path", lambda o: _copy_fast(o, bytes(16), o.objs), TypeError,
         "dst holds Python objects"),
    Case("copy-pointers-dst-fast-path", lambda o: _copy_fast(o, bytes(16), o.char_p), TypeError,
         "dst holds pointers"),
    # view hands out the references' bytes as a writable numpy array.
    Case("view-objects", lambda o: view(o.objs, U8_16), TypeError, "buffer holds Python objects"),
    Case("view-objects-structured", lambda o: view(o.record, F32_2), TypeError, "buffer holds Python objects"),
    Case("view-objects-ctypes-py_object", lambda o: view(o.py_object, U8_16), TypeError,
         "buffer holds Python objects"),
    Case("view-pointers-char_p", lambda o: view(o.char_p, U8_16), TypeError, "buffer holds pointers"),
]


def run_object_cases() -> None:
    """In a child interpreter: run every entry of OBJECT_CASES, one "PASS id" or "FAIL id: why" line each."""
    for case in OBJECT_CASES:
        o = ObjectBuffers()
        before = o.snapshot()
        try:
            case.call(o)
        except Exception as exc:  # noqa: BLE001 - the class is checked below
            message = str(exc)
            why = None
            if not isinstance(exc, case.exc):
                why = f"raised {type(exc).__name__}: {message}"
            elif case.fragment not in message or "\n" in message:
                why = f"message {message!r}"
        else:
            why = "nothing was refused"
        after = o.snapshot()
        changed = [k for k in before if after[k] != before[k]]
        if changed:
            why = f"{why or 'refused'}, but {changed} changed"
        if not o.intact():
            why = f"{why or 'refused'}, but a reference was corrupted"
        print(f"FAIL {case.id}: {why}" if why else f"PASS {case.id}", flush=True)


@pytest.fixture(scope="module")
def object_case_results() -> tuple[dict[str, str], str]:
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as cwd:
        proc = run_python(["-c", "import test_bad_inputs as t; t.run_object_cases()"], cwd, PYTHONPATH=here)
    results = {}
    for line in proc.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        case_id, _, why = rest.partition(": ")
        results[case_id] = f"{verdict} {why}".strip()
    return results, f"exit status {proc.returncode}; stderr: {proc.stderr[-2000:]}"


@pytest.mark.parametrize("case", OBJECT_CASES, ids=[c.id for c in OBJECT_CASES])
def test_object_buffer_refused(case, object_case_results):
    results, child = object_case_results
    assert case.id in results, f"the child stopped before this entry ({child})"
    assert results[case.id] == "PASS", results[case.id]


def test_catalogue_is_large_and_ids_unique():
    ids = [c.id for c in CASES + OBJECT_CASES]
    assert len(ids) == len(set(ids)), "duplicate catalogue ids"
    assert len(CASES) >= 80
    # Every public entry point appears.
    for prefix in ("desc-", "calc-", "calculate_strides-", "broadcast_strides-", "gather-", "scatter-",
                   "copy-", "view-", "convert-", "quantize-", "dequantize-", "cli-"):
        assert any(i.startswith(prefix) for i in ids), prefix


@pytest.fixture
def buffers(tmp_path):
    b = Buffers(tmp_path)
    yield b
    b.close()


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    from dmlstride import cli as cli_module

    try:
        rc = cli_module.main(argv)
    except SystemExit as stop:
        rc = stop.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


class _Deadline(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail a call that runs longer than ``seconds`` (a refusal must come at once, not hang the run).

    Uses SIGALRM, which interrupts Python-level loops; elsewhere it only runs the call.
    """
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Deadline(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def refuse_at_once():
    """Every catalogue entry must end quickly: a hang fails its test instead of stopping the run."""
    with deadline(20):
        yield


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, buffers, capsys):
    before = buffers.snapshot()
    threads = dmlstride.get_num_threads()
    if case.exc is CLI:
        rc, out, err = _run_cli(case.call(buffers), capsys)
        assert rc == 2
        assert out == ""
        assert "Traceback" not in err
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("dmlstride: error: ")
        assert case.fragment in lines[0]
    else:
        with pytest.raises(case.exc) as info:
            case.call(buffers)
        # The exact class asked for (a DescriptorError is also a ValueError, so
        # a ValueError entry accepts it, but not e.g. a plain ValueError for a
        # DescriptorError entry).
        assert isinstance(info.value, case.exc)
        assert case.fragment in str(info.value), str(info.value)
        assert "\n" not in str(info.value)
    after = buffers.snapshot()
    names = case.unchanged if case.unchanged is not None else tuple(before)
    for name in names:
        assert after[name] == before[name], f"{name} was modified by a refused call"
    assert dmlstride.get_num_threads() == threads


def test_refused_scatter_leaves_every_nibble():
    """4-bit scatter: one bad value in the last place, and no nibble is written."""
    buf = bytearray(pattern(32))
    before = bytes(buf)
    values = np.arange(1, 33, dtype=np.uint8) % 16
    values[-1] = 16
    with pytest.raises(ValueError, match="UINT4"):
        scatter(values, BufferTensorDesc("uint4", [32]), buf)
    assert bytes(buf) == before


def test_refused_copy_through_temporary_leaves_destination():
    """copy_tensor between overlapping ranges of one buffer refuses before writing."""
    buf = bytearray(pattern(64))
    before = bytes(buf)
    src = BufferTensorDesc("uint8", [4, 4], [4, 1])
    dst = BufferTensorDesc("uint8", [4, 4], [1, 4], total_tensor_size_in_bytes=64)
    with pytest.raises(BufferError, match="too small"):
        copy_tensor(buf, src, buf, dst, dst_offset=16)
    assert bytes(buf) == before
