"""DirectML tensor data types, flags and limits.

This module is the single source of truth for the data-type table (DirectML's
``DML_TENSOR_DATA_TYPE``): every other part of dmlstride asks it for element widths and numpy
equivalents.
"""

from __future__ import annotations

import enum
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from ._limits import (
    MAX_DIMENSION_COUNT,
    MAX_ELEMENT_COUNT,
    MAX_ELEMENT_EXTENT,
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
)
from .errors import DescriptorError

if TYPE_CHECKING:
    from ._typing import DataTypeLike

__all__ = [
    "TensorDataType",
    "TensorFlags",
    "MAX_DIMENSION_COUNT",
    "MINIMUM_BUFFER_TENSOR_ALIGNMENT",
    "MAX_ELEMENT_COUNT",
    "MAX_ELEMENT_EXTENT",
    "data_type",
    "element_bits",
    "element_bytes",
    "numpy_dtype",
]



class TensorDataType(enum.IntEnum):
    """DirectML's ``DML_TENSOR_DATA_TYPE`` values."""

    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13


class TensorFlags(enum.IntFlag):
    """DirectML's ``DML_TENSOR_FLAGS`` bits."""

    NONE = 0
    OWNED_BY_DML = 1


_T = TensorDataType

# The table: data type -> (bits per element, numpy dtype of one unpacked element).
_TABLE: dict[TensorDataType, tuple[int, np.dtype]] = {
    _T.FLOAT32: (32, np.dtype("<f4")),
    _T.FLOAT16: (16, np.dtype("<f2")),
    _T.UINT32: (32, np.dtype("<u4")),
    _T.UINT16: (16, np.dtype("<u2")),
    _T.UINT8: (8, np.dtype("u1")),
    _T.INT32: (32, np.dtype("<i4")),
    _T.INT16: (16, np.dtype("<i2")),
    _T.INT8: (8, np.dtype("i1")),
    _T.FLOAT64: (64, np.dtype("<f8")),
    _T.UINT64: (64, np.dtype("<u8")),
    _T.INT64: (64, np.dtype("<i8")),
    _T.UINT4: (4, np.dtype("u1")),
    _T.INT4: (4, np.dtype("i1")),
}

# numpy dtype -> data type, for the types that have a one-to-one numpy twin.
_FROM_NUMPY: dict[np.dtype, TensorDataType] = {
    dt: t for t, (bits, dt) in _TABLE.items() if bits >= 8
}

_BY_NAME = {t.name.lower(): t for t in TensorDataType}
# What a caller may pass, for messages: every type but UNKNOWN, which describes no tensor.
_VALID_NAMES = ", ".join(t.name.lower() for t in TensorDataType if t is not TensorDataType.UNKNOWN)


def _from_numpy_dtype(dt: np.dtype, given: Any) -> TensorDataType:
    if dt.byteorder == ">" or (dt.byteorder == "=" and not np.little_endian):
        raise DescriptorError(
            f"data_type {given!r} is big-endian; DirectML tensors are little-endian"
        )
    try:
        return _FROM_NUMPY[dt.newbyteorder("<") if dt.itemsize > 1 else dt]
    except KeyError:
        raise DescriptorError(
            f"data_type {given!r} (numpy dtype {dt}) has no DirectML equivalent; "
            f"expected one of {', '.join(str(d) for d in _FROM_NUMPY)}"
        ) from None


def data_type(x: DataTypeLike) -> TensorDataType:
    """Convert ``x`` to a :class:`TensorDataType`.

    Parameters
    ----------
    x : TensorDataType, int, str, numpy dtype or dtype-like
        A member, its integer value, its name in any case (``"float16"``), or a
        numpy dtype or dtype-like (``np.float32``, ``"uint8"``) that maps to a
        DirectML type.

    Returns
    -------
    TensorDataType

    Raises
    ------
    TypeError
        ``x`` is not of a convertible type (``None``, a float, a bool, ...).
    DescriptorError
        ``x`` names no DirectML data type.

    Examples
    --------
    >>> import numpy as np
    >>> data_type("float16")
    <TensorDataType.FLOAT16: 2>
    >>> data_type(np.uint8)
    <TensorDataType.UINT8: 5>
    >>> data_type(13)
    <TensorDataType.INT4: 13>
    """
    if isinstance(x, TensorDataType):
        return x
    if isinstance(x, (bool, np.bool_, np.timedelta64)):  # timedelta64 subclasses np.integer
        raise TypeError(f"data_type must be a TensorDataType, int, str or numpy dtype, not {type(x).__name__}")
    if isinstance(x, (int, np.integer)):
        try:
            return TensorDataType(int(x))
        except ValueError:
            last = max(TensorDataType)
            raise DescriptorError(
                f"data_type {int(x)} is not a DirectML data type; expected 1 ({TensorDataType(1).name}) "
                f"to {int(last)} ({last.name})"
            ) from None
    if isinstance(x, str):
        found = _BY_NAME.get(x.strip().lower())
        if found is not None:
            return found
        try:
            dt = np.dtype(x)
        except (TypeError, ValueError, SyntaxError):
            # numpy parses some malformed strings ("f4,,") with Python's parser.
            raise DescriptorError(
                f"data_type {x!r} is not a DirectML data type name or numpy dtype; expected one "
                f"of {_VALID_NAMES} (in any case), or a numpy dtype name such as 'f4'"
            ) from None
        return _from_numpy_dtype(dt, x)
    if isinstance(x, np.dtype):
        return _from_numpy_dtype(x, x)
    if isinstance(x, type) and issubclass(x, np.generic):
        return _from_numpy_dtype(np.dtype(x), x)
    if any(x is t for t in (bool, int, float, complex)):
        # Python's builtin scalar types are numpy dtype-likes too.  (Identity, not
        # ``in``: ``in`` compares with ``==``, which an array answers elementwise.)
        return _from_numpy_dtype(np.dtype(x), x)
    raise TypeError(
        f"data_type must be a TensorDataType, int, str or numpy dtype, not {type(x).__name__}"
    )


def _valid(x: DataTypeLike) -> TensorDataType:
    t = data_type(x)
    if t is TensorDataType.UNKNOWN:
        raise DescriptorError("data_type is UNKNOWN (0); expected a concrete data type such as FLOAT32")
    return t


def element_bits(x: DataTypeLike) -> int:
    """Bits per element of a data type (4, 8, 16, 32 or 64).

    Examples
    --------
    >>> element_bits("float16"), element_bits(TensorDataType.INT4)
    (16, 4)
    """
    return _TABLE[_valid(x)][0]


def element_bytes(x: DataTypeLike) -> int:
    """Bytes per element, rounded up (4-bit types count as 1).

    Examples
    --------
    >>> element_bytes("float64"), element_bytes("uint4")
    (8, 1)
    """
    return (_TABLE[_valid(x)][0] + 7) // 8


def numpy_dtype(x: DataTypeLike) -> np.dtype[Any]:
    """The numpy dtype that holds one unpacked element of a data type.

    4-bit types unpack to one element per byte: UINT4 -> uint8, INT4 -> int8.

    Examples
    --------
    >>> numpy_dtype("float32")
    dtype('float32')
    >>> numpy_dtype("int4")
    dtype('int8')
    """
    return _TABLE[_valid(x)][1]
