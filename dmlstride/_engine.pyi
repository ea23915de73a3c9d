"""Type stub for the private Cython copy engine."""

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .descriptor import BufferTensorDesc

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:
    from typing_extensions import Buffer

# numpy's stubs declare the buffer protocol only for Python >= 3.12
_BufferLike = Buffer | npt.NDArray[Any]

ALIGNMENT: int
OFFSET_LIMIT: int
MAX_DIMS: int
OUTPUT_CACHE_DEFAULT: int
MAX_THREADS: int
MAX_WORKERS: int
BLOCK_GROUP: int
STAGE_ELEMS: int
CACHED_TRANSPOSE_BYTES: int
TALL_TILE_BYTES: int
REPEAT_MIN_ROWS: int
TALL_TILE_ROWS: int
SMALL_TILE: int
BLOCK_L2_BYTES: int
BLOCK_L2_ROWS: int
BLOCK_L2_RUN: int
RUN_TILE_MAX: int
RUN_TILE_WIDE_MAX: int
CLOSE_ROW_BYTES: int
CONTIG_BAND_BYTES: int
JOIN_PLANES_TASK_BYTES: int
JOIN_MIN_TASKS: int
JOIN_PIXELS_ROW_BYTES: int
PANEL_MIN_CHAIN_BYTES: int
PANEL_MIN_FAR_CHAIN_BYTES: int
PANEL_MIN_FAR_TASK_BYTES: int
PANEL_FAR_TASK_STRIDE: int
PANEL_MAX_TASK_BYTES: int
PANEL_MIN_ROWS: int
PANEL_MIN_WIDE_ROW_BYTES: int
SLAB_BYTES: int

class Plan:
    src_extent: int
    dst_extent: int
    layout: Any
    def __init__(
        self,
        sizes: Sequence[int],
        src_strides: Sequence[int],
        dst_strides: Sequence[int],
        element_bits: int,
        src_nibble: bool = ...,
        dst_nibble: bool = ...,
        sign_extend: bool = ...,
    ) -> None: ...
    def describe(self) -> dict[str, Any]: ...

def execute(
    plan: Plan,
    src: _BufferLike,
    src_offset: int,
    src_need: int,
    dst: _BufferLike,
    dst_offset: int,
    dst_need: int,
    refuse_alias: bool = ...,
    fresh_dst: bool = ...,
    src_name: str = ...,
    dst_name: str = ...,
) -> bool: ...
def buffer_info(obj: _BufferLike, name: str = ...) -> tuple[int, bool]: ...
def check_plain(obj: object, name: str) -> None: ...
def buffer_format_kind(fmt: bytes) -> str: ...
def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def have_threads() -> bool: ...
def new_output(shape: Sequence[int], dtype: np.dtype[Any]) -> tuple[npt.NDArray[Any], bool]: ...
def pool_workers() -> int: ...
def _select_isa(max_level: int) -> int: ...
def set_output_cache(nbytes: int) -> int: ...
def _block_chunks(width: int, jn: int, kn: int, tile: bool = False, in_place: bool = False,
                  lines: int = 1) -> tuple[int, int, int]: ...
def _set_ask_rows_min(nbytes: int) -> int: ...
def _set_band_asks_l2(on: bool) -> bool: ...
def _set_stream_min_total(nbytes: int) -> int: ...
def output_cache_info() -> tuple[int, int]: ...

class TransferSpec:
    def __init__(
        self, plan: Plan, sizes: Sequence[int], dtype: np.dtype[Any], total: int, align: int
    ) -> None: ...

def gather_fast(
    buffer: _BufferLike,
    desc: BufferTensorDesc,
    offset: int,
    out: npt.NDArray[Any] | None,
    check_alignment: bool,
) -> npt.NDArray[Any] | None: ...
def remember_gather(desc: BufferTensorDesc, spec: TransferSpec) -> None: ...
def forget_gathers() -> None: ...
def gather_specs_held() -> int: ...
def scatter_fast(
    array: object,
    desc: BufferTensorDesc,
    buffer: _BufferLike,
    offset: int,
    check_alignment: bool,
) -> bool: ...
def remember_scatter(desc: BufferTensorDesc, spec: TransferSpec) -> None: ...
def scatter_specs_held() -> int: ...

class CopySpec:
    def __init__(self, plan: Plan, src_total: int, dst_total: int, src_align: int, dst_align: int) -> None: ...

def copy_fast(
    src: _BufferLike,
    src_desc: BufferTensorDesc,
    dst: _BufferLike,
    dst_desc: BufferTensorDesc,
    src_offset: int,
    dst_offset: int,
    check_alignment: bool,
) -> bool: ...
def remember_copy(src_desc: BufferTensorDesc, dst_desc: BufferTensorDesc, spec: CopySpec) -> None: ...
def copy_specs_held() -> int: ...
