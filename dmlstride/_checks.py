"""Field validators shared by every public entry point.

Each validator returns a plain Python value (exact ints, tuples) or raises
``TypeError`` for a wrong type and :class:`DescriptorError` for a wrong value,
with a message naming the field, the value given and what was expected.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._limits import MAX_DIMENSION_COUNT, MAX_FIELD_VALUE, TOTAL_SIZE_LIMIT
from .errors import DescriptorError



def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 entry"``, ``"2 entries"``: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def as_int(value: Any, name: str) -> int:
    """An exact Python int from an int or numpy integer; bools, floats and timedeltas are refused."""
    # np.timedelta64 subclasses np.signedinteger, but a duration is not a count.
    if isinstance(value, (bool, np.bool_, np.timedelta64)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} ({value!r})")
    return operator.index(value)


def as_dims(values: Any, name: str, *, minimum: int, expected_len: int | None = None) -> tuple[int, ...]:
    """Validate a sequence of 1 to 8 unsigned 32-bit integers, each >= ``minimum``."""
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of integers, not {type(values).__name__}")
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise TypeError(f"{name} must be a flat sequence of integers; got a {values.ndim}-D array")
    n = len(values)
    if expected_len is not None and n != expected_len:
        raise DescriptorError(
            f"{name} has {counted(n, 'entry', 'entries')}; expected {expected_len}, one per "
            f"dimension (sizes has {expected_len})"
        )
    if not 1 <= n <= MAX_DIMENSION_COUNT:
        raise DescriptorError(
            f"{name} has {counted(n, 'entry', 'entries')}; expected 1 to {MAX_DIMENSION_COUNT} "
            f"(a buffer tensor's dimension_count is 1 to {MAX_DIMENSION_COUNT})"
        )
    out = []
    for i, v in enumerate(values):
        iv = as_int(v, f"{name}[{i}]")
        if iv < minimum:
            what = "every size must be at least 1" if minimum == 1 else "every stride must be at least 0"
            raise DescriptorError(f"{name}[{i}] is {iv}; {what}")
        if iv > MAX_FIELD_VALUE:
            raise DescriptorError(f"{name}[{i}] is {iv}; expected at most 2**32 - 1 = {MAX_FIELD_VALUE}")
        out.append(iv)
    return tuple(out)


def as_sizes(sizes: Any, name: str = "sizes") -> tuple[int, ...]:
    return as_dims(sizes, name, minimum=1)


def as_strides(strides: Any, ndim: int, name: str = "strides") -> tuple[int, ...]:
    return as_dims(strides, name, minimum=0, expected_len=ndim)


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major packed strides (last dimension fastest)."""
    out = [0] * len(sizes)
    running = 1
    for i in range(len(sizes) - 1, -1, -1):
        out[i] = running
        running *= sizes[i]
    return tuple(out)


def last_index(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """Element offset of the last element: sum((size - 1) * stride)."""
    return sum((n - 1) * s for n, s in zip(sizes, strides))


def product(values: Sequence[int]) -> int:
    p = 1
    for v in values:
        p *= v
    return p
