"""Type stub for the private conversion bridge (dmlstride/_convert.pyx)."""

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:
    from typing_extensions import Buffer

# numpy's stubs declare the buffer protocol only for Python >= 3.12
_BufferLike = Buffer | npt.NDArray[Any]

def set_hardware_half(allow: bool) -> bool: ...
def hardware_half() -> bool: ...
def set_simd_rows(allow: bool) -> bool: ...
def f32_to_f16_bits(f: float) -> int: ...
def f64_to_f16_bits(d: float) -> int: ...
def f16_bits_to_f32(h: int) -> float: ...
def extent_bytes(sizes: Sequence[int], strides: Sequence[int], type_code: int) -> int: ...
def run(
    src: _BufferLike,
    src_offset: int,
    src_need: int,
    dst: _BufferLike,
    dst_offset: int,
    dst_need: int,
    sizes: Sequence[int],
    src_strides: Sequence[int],
    dst_strides: Sequence[int],
    param_strides: Sequence[int],
    param_div: Sequence[int],
    src_type: int,
    dst_type: int,
    compute64: bool,
    op: int,
    scale: npt.NDArray[np.floating[Any]],
    shift: npt.NDArray[np.floating[Any]],
    lo: float,
    hi: float,
    nthreads: int,
    refuse_alias: bool = ...,
) -> bool: ...
