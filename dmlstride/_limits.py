"""Every numeric limit dmlstride enforces, stated once.

The Python modules import these names; the compiled engine's own copies
(array bounds in C) are checked against them by the test suite.
"""

#: Largest ``DimensionCount`` a buffer tensor may have (``DML_TENSOR_DIMENSION_COUNT_MAX1``).
MAX_DIMENSION_COUNT = 8
#: A buffer tensor's binding offset is always a multiple of this many bytes.
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16
#: Largest value of one size or stride field (they are 32-bit unsigned integers).
MAX_FIELD_VALUE = 2**32 - 1
#: Largest logical element count (product of sizes) of a buffer tensor.
MAX_ELEMENT_COUNT = 2**32 - 1
#: Largest element extent (offset of the last element + 1) of a buffer tensor; DirectML
#: also caps ``TotalTensorSizeInBytes`` at the minimum implied size of this many elements.
MAX_ELEMENT_EXTENT = 2**32 - 1
#: ``TotalTensorSizeInBytes`` is a 64-bit unsigned integer: it stays below this.
TOTAL_SIZE_LIMIT = 2**64
#: A byte offset at or past this lies beyond any buffer a process can map.
OFFSET_LIMIT = 2**62
#: Most kernel threads :func:`dmlstride.set_num_threads` accepts.
MAX_THREADS = 1024
#: Default limit of the gather output cache, in bytes.
DEFAULT_OUTPUT_CACHE = 256 << 20
