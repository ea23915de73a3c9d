"""Types of the public API's arguments, for type checkers.

Buffers are buffer-protocol objects (:data:`BufferLike`:
``collections.abc.Buffer``, before Python 3.12 ``typing_extensions.Buffer``,
which type checkers ship, so nothing is imported at run time; and numpy
arrays).  A data type may be spelled any way
:func:`dmlstride.data_type` accepts; :data:`DataTypeName` lists the strings a
type checker accepts (at run time names are accepted in any case).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, Union

DataTypeName = Literal[
    # DirectML's names, in lower and upper case
    "float32", "float16", "uint32", "uint16", "uint8", "int32", "int16", "int8",
    "float64", "uint64", "int64", "uint4", "int4",
    "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16", "INT8",
    "FLOAT64", "UINT64", "INT64", "UINT4", "INT4",
    # numpy's spellings of the types with a numpy twin (little-endian or byte-sized)
    "f2", "f4", "f8", "<f2", "<f4", "<f8",
    "u1", "u2", "u4", "u8", "|u1", "<u2", "<u4", "<u8",
    "i1", "i2", "i4", "i8", "|i1", "<i2", "<i4", "<i8",
    "e", "f", "d", "B", "H", "I", "Q", "b", "h", "i", "q",
    "half", "single", "double", "ubyte", "ushort", "uintc", "ulonglong", "byte", "short", "intc",
    "longlong",
]

if TYPE_CHECKING:
    import numpy as np

    from .datatypes import TensorDataType

    if sys.version_info >= (3, 12):
        from collections.abc import Buffer as Buffer
    else:
        from typing_extensions import Buffer as Buffer

    #: A buffer-protocol object.  numpy arrays are named too: before Python 3.12 their
    #: stubs do not declare the protocol's ``__buffer__`` method.
    BufferLike = Union[Buffer, "np.ndarray[Any, Any]"]

    #: numpy scalar types with a DirectML equivalent.
    NumpyScalar = Union[
        np.float16, np.float32, np.float64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.int8, np.int16, np.int32, np.int64,
    ]
    #: Every spelling of a data type the API accepts.
    DataTypeLike = Union[
        TensorDataType,
        int,
        DataTypeName,
        "np.dtype[NumpyScalar]",
        type[NumpyScalar],
        type[float],
        type[int],
    ]
