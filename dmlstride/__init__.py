"""dmlstride: DirectML's buffer-tensor memory model for Python.

Tensor descriptors (sizes, strides, data type, total size, alignment), the
exact size calculations, and fast kernels that gather elements from strided
1-8 D buffers into packed arrays, scatter them back and convert layouts, data
types, scale and bias, quantize and dequantize on the way.
"""

try:
    from . import _engine  # noqa: F401  (the compiled kernels; everything below needs them)
except ImportError as _exc:
    from ._import_check import engine_import_error

    raise engine_import_error(_exc) from None

from .conversion import convert, dequantize, quantize
from .datatypes import (
    MAX_DIMENSION_COUNT,
    MAX_ELEMENT_COUNT,
    MAX_ELEMENT_EXTENT,
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    TensorDataType,
    TensorFlags,
    data_type,
    element_bits,
    element_bytes,
    numpy_dtype,
)
from .descriptor import DML_BUFFER_TENSOR_DESC, BufferTensorDesc
from .errors import DescriptorError
from .settings import get_num_threads, output_cache_info, set_num_threads, set_output_cache
from .sizes import broadcast_strides, calc_buffer_tensor_size, calculate_strides, layout_names
from .transfer import copy_tensor, gather, scatter, view
from .viewsource import ViewSource, view_source

__version__ = "0.1.0"

__all__ = [
    "BufferTensorDesc",
    "DML_BUFFER_TENSOR_DESC",
    "DescriptorError",
    "MAX_DIMENSION_COUNT",
    "MAX_ELEMENT_COUNT",
    "MAX_ELEMENT_EXTENT",
    "MINIMUM_BUFFER_TENSOR_ALIGNMENT",
    "TensorDataType",
    "TensorFlags",
    "broadcast_strides",
    "calc_buffer_tensor_size",
    "calculate_strides",
    "convert",
    "copy_tensor",
    "data_type",
    "dequantize",
    "element_bits",
    "element_bytes",
    "gather",
    "get_num_threads",
    "layout_names",
    "numpy_dtype",
    "output_cache_info",
    "quantize",
    "scatter",
    "set_num_threads",
    "set_output_cache",
    "view",
    "view_source",
    "ViewSource",
]
