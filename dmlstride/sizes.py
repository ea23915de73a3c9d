"""Size and stride calculations: DMLCalcBufferTensorSize, CalculateStrides, broadcasting.

All arithmetic is exact (Python integers); nothing wraps around.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._limits import MAX_FIELD_VALUE, TOTAL_SIZE_LIMIT
from ._checks import as_int, as_sizes, as_strides, counted, last_index, product
from .datatypes import element_bits
from .errors import DescriptorError

if TYPE_CHECKING:
    from ._typing import DataTypeLike

__all__ = [
    "calc_buffer_tensor_size",
    "calculate_strides",
    "broadcast_strides",
    "layout_names",
    "layout_order",
]

# Canonical dimension letters, in logical (sizes) order, for each rank that has them.
_CANONICAL_LETTERS = {1: "W", 2: "HW", 3: "DHW", 4: "NCHW", 5: "NCDHW"}

# The named layouts of each rank, in the order `BufferTensorDesc.layout` tries them.
_NAMED_LAYOUTS = {
    2: ("HW", "WH"),
    3: ("DHW", "WHD"),
    4: ("NCHW", "NHWC"),
    5: ("NCDHW", "NDHWC"),
}


def layout_names(rank: int) -> tuple[str, ...]:
    """The named layouts of a rank, in the fixed order :attr:`BufferTensorDesc.layout` tries them.

    Examples
    --------
    >>> layout_names(4)
    ('NCHW', 'NHWC')
    """
    return _NAMED_LAYOUTS.get(rank, ())


def _bytes_for(bits_per_element: int, elements: int) -> int:
    nbytes = (elements * bits_per_element + 7) // 8
    return (nbytes + 3) // 4 * 4


def calc_buffer_tensor_size(data_type: DataTypeLike, sizes: Sequence[int], strides: Sequence[int] | None = None) -> int:
    """Minimum implied size in bytes of a buffer tensor (``DMLCalcBufferTensorSize``).

    ``bits = (number of elements up to and including the last one) * bits per
    element``; the result is ``ceil(bits / 8)`` rounded up to a multiple of 4.
    The computation is exact: unlike DirectML's C helper it never wraps around.

    Parameters
    ----------
    data_type : data-type-like
        Anything :func:`dmlstride.data_type` accepts.
    sizes : sequence of int
        1 to 8 sizes, each 1 to 2**32 - 1.
    strides : sequence of int, optional
        One stride (in elements, 0 to 2**32 - 1) per dimension; ``None`` means packed.

    Returns
    -------
    int
        Bytes, a multiple of 4.

    Raises
    ------
    DescriptorError
        A field breaks a per-field rule, or the result is 2**64 bytes or more.
    TypeError
        A field has the wrong type.

    Examples
    --------
    >>> calc_buffer_tensor_size("uint32", [2, 3], [6, 2])
    44
    >>> calc_buffer_tensor_size("int4", [9])
    8
    >>> calc_buffer_tensor_size("float32", [65537, 65536], [65536, 1])
    17180131328
    """
    bits = element_bits(data_type)
    sizes = as_sizes(sizes)
    if strides is None:
        elements = product(sizes)
    else:
        strides = as_strides(strides, len(sizes))
        elements = last_index(sizes, strides) + 1
    nbytes = _bytes_for(bits, elements)
    if nbytes >= TOTAL_SIZE_LIMIT:
        raise DescriptorError(
            f"minimum implied size is {nbytes} bytes; expected less than 2**64 "
            "(TotalTensorSizeInBytes is a UINT64)"
        )
    return nbytes


def layout_order(layout: str | Sequence[int], rank: int) -> tuple[int, ...]:
    """Axis indices from slowest to fastest in memory for a layout string or tuple.

    Examples
    --------
    >>> layout_order("NHWC", 4)
    (0, 2, 3, 1)
    >>> layout_order((1, 0), 2)
    (1, 0)
    """
    rank = as_int(rank, "rank")
    if isinstance(layout, str):
        letters = _CANONICAL_LETTERS.get(rank)
        if letters is None:
            raise DescriptorError(
                f"layout {layout!r} is a name, but a rank-{rank} tensor has no dimension letters; "
                "give its axes from slowest to fastest in memory as a tuple of indices, e.g. "
                f"{tuple(range(rank))}"
            )
        name = layout.strip().upper()
        if sorted(name) != sorted(letters):
            raise DescriptorError(
                f"layout {layout!r} is not a permutation of {letters!r}, the dimension letters "
                f"of a rank-{rank} tensor (sizes are given in {letters} order)"
            )
        return tuple(letters.index(ch) for ch in name)
    if isinstance(layout, (bytes, bytearray)) or not isinstance(layout, Sequence):
        raise TypeError(f"layout must be a string or a sequence of axis indices, not {type(layout).__name__}")
    order = tuple(as_int(a, f"layout[{i}]") for i, a in enumerate(layout))
    if sorted(order) != list(range(rank)):
        raise DescriptorError(
            f"layout {tuple(order)} is not a permutation of the axes 0..{rank - 1} of a rank-{rank} tensor"
        )
    return order


def _as_broadcast(broadcast: Any, rank: int) -> tuple[bool, ...]:
    if broadcast is None:
        return (False,) * rank
    if isinstance(broadcast, (str, bytes)) or not isinstance(broadcast, (Sequence, np.ndarray)):
        raise TypeError(f"broadcast must be a sequence of booleans, not {type(broadcast).__name__}")
    if isinstance(broadcast, np.ndarray) and broadcast.ndim != 1:
        raise TypeError(f"broadcast must be a flat sequence of booleans; got a {broadcast.ndim}-D array")
    if len(broadcast) != rank:
        raise DescriptorError(
            f"broadcast has {counted(len(broadcast), 'entry', 'entries')}; expected {rank}, one per dimension"
        )
    out = []
    for i, b in enumerate(broadcast):
        if not isinstance(b, (bool, int, np.bool_, np.integer)) or b not in (0, 1):
            raise TypeError(f"broadcast[{i}] must be a boolean, not {b!r}")
        out.append(bool(b))
    return tuple(out)


def _row_axis(order: Sequence[int]) -> int | None:
    """The axis whose stride a row pitch rounds: the one that steps from row to row.

    For ranks with an H dimension (2 to 5), H: a row is everything stored inside
    one H step (W elements, or W x C when channels are innermost).  When H is the
    fastest memory dimension an H step holds a single element, and for ranks
    without H, the second-fastest memory dimension is used instead.
    """
    letters = _CANONICAL_LETTERS.get(len(order), "")
    if "H" in letters and order[-1] != letters.index("H"):
        return letters.index("H")
    return order[-2] if len(order) >= 2 else None


def _strides_for_order(
    sizes: Sequence[int],
    order: Sequence[int],
    broadcast: Sequence[bool],
    row_pitch: int | None = None,
) -> tuple[int, ...]:
    """Packed strides for a memory order; broadcast dims count as size 1 and get stride 0.

    ``row_pitch`` (in elements) rounds the running product up to a multiple of
    itself where the row axis (:func:`_row_axis`) begins, so every row starts
    on that boundary and the elements inside a row stay packed.
    """
    strides = [0] * len(sizes)
    running = 1
    row_axis = _row_axis(order) if row_pitch is not None else None
    for axis in reversed(order):
        if axis == row_axis:
            running = -(-running // row_pitch) * row_pitch
        strides[axis] = 0 if broadcast[axis] else running
        running *= 1 if broadcast[axis] else sizes[axis]
    for axis, s in enumerate(strides):
        if s > MAX_FIELD_VALUE:
            raise DescriptorError(
                f"strides[{axis}] would be {s}; expected at most 2**32 - 1 = {MAX_FIELD_VALUE} "
                "(the tensor is too large for 32-bit strides)"
            )
    return tuple(strides)


def calculate_strides(
    layout: str | Sequence[int],
    sizes: Sequence[int],
    broadcast: Sequence[bool] | None = None,
) -> tuple[int, ...]:
    """Strides that lay out ``sizes`` (in canonical logical order) in a memory order.

    The ``CalculateStrides`` helper of DirectML's documentation, generalised to
    any rank and permutation.

    Parameters
    ----------
    layout : str or sequence of int
        A permutation of the rank's dimension letters naming the memory order
        from slowest to fastest (``"HW"``/``"WH"``, ``"DHW"``/``"WHD"``,
        ``"NCHW"``/``"NHWC"``, ``"NCDHW"``/``"NDHWC"``, ...), or a tuple of
        axis indices from slowest to fastest, for any rank 1-8.
    sizes : sequence of int
        Sizes in canonical logical order (``{N, C, H, W}`` for 4-D).
    broadcast : sequence of bool, optional
        Dimensions flagged here count as size 1 in the products and get stride 0.

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> calculate_strides("NHWC", [1, 1, 3, 5])
    (15, 1, 5, 1)
    >>> calculate_strides("NHWC", [1, 3, 4, 5])
    (60, 1, 15, 3)
    >>> calculate_strides("NCHW", [2, 3, 4, 5], broadcast=[False, True, False, False])
    (20, 0, 5, 1)
    """
    sizes = as_sizes(sizes)
    order = layout_order(layout, len(sizes))
    return _strides_for_order(sizes, order, _as_broadcast(broadcast, len(sizes)))


def broadcast_strides(physical_sizes: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...]:
    """Strides that broadcast a packed physical shape to ``sizes``, right-aligned.

    As ONNX Runtime's DirectML backend does: walking from the last dimension, a
    physical size of 1 (or a missing dimension) gets stride 0, any other must
    equal the desired size and gets the running packed product.

    Raises
    ------
    DescriptorError
        The shapes do not right-align.

    Examples
    --------
    >>> broadcast_strides([2, 1, 4], [2, 3, 4])
    (4, 0, 1)
    >>> broadcast_strides([3], [2, 3])
    (0, 1)
    """
    physical = as_sizes(physical_sizes, "physical_sizes")
    sizes = as_sizes(sizes)
    if len(physical) > len(sizes):
        raise DescriptorError(
            f"physical_sizes {physical} has more dimensions than sizes {sizes}; cannot broadcast"
        )
    strides = [0] * len(sizes)
    running = 1
    for k in range(1, len(sizes) + 1):
        want = sizes[-k]
        have = physical[-k] if k <= len(physical) else 1
        if have == 1:
            strides[-k] = 0
        elif have == want:
            strides[-k] = running
            running *= have
        else:
            wanted = "1" if want == 1 else f"1 (to broadcast) or {want}"
            raise DescriptorError(
                f"physical_sizes {physical} do not broadcast to sizes {sizes}: aligned from the "
                f"right, physical_sizes[{len(physical) - k}] is {have} where sizes[{len(sizes) - k}] "
                f"is {want}; expected {wanted}"
            )
    for axis, s in enumerate(strides):
        if s > MAX_FIELD_VALUE:
            raise DescriptorError(
                f"strides[{axis}] would be {s}; expected at most 2**32 - 1 = {MAX_FIELD_VALUE} "
                "(the physical tensor is too large for 32-bit strides)"
            )
    return tuple(strides)


