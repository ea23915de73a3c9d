"""Type stub for the private Cython copy engine."""

from collections.abc import Sequence
from typing import Any

ALIGNMENT: int
MAX_DIMS: int
OUTPUT_CACHE_DEFAULT: int
MAX_THREADS: int
MAX_WORKERS: int
BLOCK_GROUP: int
STAGE_ELEMS: int

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
    src: Any,
    src_offset: int,
    src_need: int,
    dst: Any,
    dst_offset: int,
    dst_need: int,
    refuse_alias: bool = ...,
    fresh_dst: bool = ...,
) -> bool: ...
def buffer_info(obj: Any, name: str = ...) -> tuple[int, bool]: ...
def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def have_threads() -> bool: ...
def pool_workers() -> int: ...
def _select_isa(max_level: int) -> int: ...
def new_output(shape: Sequence[int], dtype: Any) -> tuple[Any, bool]: ...
def set_output_cache(nbytes: int) -> int: ...
def _set_stream_min_total(nbytes: int) -> int: ...
def output_cache_info() -> tuple[int, int]: ...

class GatherSpec:
    def __init__(self, plan: Plan, sizes: Sequence[int], dtype: Any, total: int, align: int) -> None: ...

def gather_fast(
    buffer: Any,
    desc: Any,
    offset: Any,
    out: Any,
    check_alignment: Any,
    desc_type: type,
) -> Any: ...
