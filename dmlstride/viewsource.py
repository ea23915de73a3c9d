"""``view_source``: the buffer, byte offset and descriptor behind a numpy view."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .descriptor import BufferTensorDesc
from .errors import DescriptorError

if TYPE_CHECKING:
    from ._typing import BufferLike

__all__ = ["ViewSource", "view_source"]

_MAX_BASE_DEPTH = 64  # links followed along ``.base``; real chains are a few long


class ViewSource(NamedTuple):
    """What :func:`view_source` returns: ``gather(buffer, desc, offset=offset)`` reads the view."""

    #: The contiguous object that holds the view's memory: an array's base array (read-only
    #: when the view is) or, failing that, the buffer object numpy wraps (bytes, mmap, ...).
    buffer: BufferLike
    #: Byte offset of the view's first element in ``buffer``.
    offset: int
    #: The view's sizes, element strides and data type.
    desc: BufferTensorDesc


def _chain(array: np.ndarray[Any, Any]) -> list[Any]:
    """``array``, its base, the base's base, ...: every object that may own the view's memory."""
    out: list[Any] = [array]
    obj = array.base
    while obj is not None and len(out) < _MAX_BASE_DEPTH:
        out.append(obj)
        # ndarrays, and objects that wrap one (as_strided's helper), name what they view in .base
        obj = getattr(obj, "base", None)
    return out


def _span(obj: Any) -> tuple[int, int] | None:
    """(address, length in bytes) of a contiguous buffer ``obj``, or None if it is not one."""
    if isinstance(obj, np.ndarray):
        if not (obj.flags.c_contiguous or obj.flags.f_contiguous) or obj.nbytes == 0:
            return None
        return int(obj.ctypes.data), int(obj.nbytes)
    try:
        with memoryview(obj) as mv:
            if not mv.contiguous or mv.nbytes == 0:
                return None
            raw = np.frombuffer(mv, dtype=np.uint8)
            return int(raw.ctypes.data), int(mv.nbytes)
    except (TypeError, ValueError, BufferError):
        return None


def _read_only(obj: Any) -> Any:
    """``obj`` itself if it is read-only, else a read-only view of the same memory."""
    if isinstance(obj, np.ndarray):
        if not obj.flags.writeable:
            return obj
        frozen = obj.view()
        frozen.flags.writeable = False
        return frozen
    mv = memoryview(obj)
    return mv if mv.readonly else mv.toreadonly()


def view_source(array: npt.NDArray[Any]) -> ViewSource:
    """The buffer a numpy view lives in, the view's byte offset there, and its descriptor.

    ``gather(a, BufferTensorDesc.from_numpy(a))`` refuses a non-contiguous
    view ``a``, because a buffer is read as raw bytes from its start and a
    strided view's bytes are not one contiguous block.  ``view_source(a)``
    finds the contiguous memory the view lives in instead, so that the same
    elements can be described to DirectML: ``gather(buffer, desc,
    offset=offset)`` equals ``a``, ``view(buffer, desc, offset=offset)`` shows
    the same elements, and ``scatter(x, desc, buffer, offset=offset)`` writes
    through to them.

    DirectML binds a tensor at a byte offset that is a multiple of 16.  The
    offset of a view is wherever the view starts (``x[:, 1:]`` of a float32
    array starts 4 bytes in), so it often is not: :func:`gather` and the other
    calls then refuse it unless given ``check_alignment=False``, which lifts
    only that rule (bounds are always checked).  ``offset %
    MINIMUM_BUFFER_TENSOR_ALIGNMENT == 0`` tells whether a real DirectML
    binding could use the view as it is.

    Parameters
    ----------
    array : numpy.ndarray
        Any view whose strides are non-negative multiples of its item size
        (zero strides, as from ``numpy.broadcast_to``, are fine), of a dtype
        with a DirectML equivalent.

    Returns
    -------
    ViewSource
        A named tuple ``(buffer, offset, desc)``.  ``buffer`` is the deepest
        contiguous array on the chain ``array``, ``array.base``,
        ``array.base.base``, ... that holds all the view's elements: the array
        that owns the memory, which numpy makes the ``base`` of every view of
        it (``array`` itself when it owns its memory).  When no array on the
        chain is contiguous, it is the buffer object numpy wraps (``bytes``,
        ``mmap``, ...).  When ``array`` is read-only and that buffer is not, a
        read-only view of it is returned instead, so the result never grants
        writes the view did not allow.

    Raises
    ------
    TypeError
        ``array`` is not a numpy array.
    DescriptorError
        The view cannot be described: a stride is negative (DirectML strides
        are unsigned, so a reversed view has no descriptor; flip it back or copy
        it), not a multiple of the item size, the array is empty, or its dtype
        has no DirectML equivalent.
    BufferError
        No contiguous buffer on the ``.base`` chain holds the view, or the view
        ends so close to the end of its buffer that the descriptor's total size
        (rounded up to a multiple of 4 bytes) would run past it.

    Examples
    --------
    >>> import numpy as np
    >>> from dmlstride import gather, view
    >>> x = np.zeros((6, 8), dtype=np.float32)
    >>> x.flat = range(48)
    >>> a = x[2:, 4:]                       # 4 x 4, rows 8 floats apart, 80 bytes in
    >>> src = view_source(a)
    >>> src.buffer is x, src.offset, src.desc
    (True, 80, BufferTensorDesc(FLOAT32, sizes=[4, 4], strides=[8, 1], total_tensor_size_in_bytes=112))
    >>> src.offset % 16                     # a multiple of 16: DirectML could bind it as it is
    0
    >>> bool((gather(src.buffer, src.desc, offset=src.offset) == a).all())
    True
    >>> b = x[:, 1:3]                       # starts 4 bytes in: not a binding offset
    >>> buf, off, desc = view_source(b)
    >>> off
    4
    >>> bool((view(buf, desc, offset=off, check_alignment=False) == b).all())
    True
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"array must be a numpy.ndarray, not {type(array).__name__}")
    for axis, (n, s) in enumerate(zip(array.shape, array.strides)):
        if n > 1 and s < 0:
            raise DescriptorError(
                f"array.strides[{axis}] is {s} bytes: axis {axis} runs backwards in memory, and "
                "DirectML strides are unsigned, so this view has no descriptor; flip that axis "
                "back (numpy.flip) and describe the flipped view, or copy it (numpy.ascontiguousarray)"
            )
    desc = BufferTensorDesc.from_numpy(array)
    item = array.itemsize
    start = int(array.ctypes.data)
    end = start + sum((n - 1) * s for n, s in zip(array.shape, array.strides) if n > 1) + item
    total = desc.total_tensor_size_in_bytes
    holders = []  # (object, its address, its length) of every contiguous buffer holding the view
    for obj in _chain(array):
        span = _span(obj)
        if span is not None and span[0] <= start and end <= span[0] + span[1]:
            holders.append((obj, span[0], span[1]))
    if not holders:
        raise BufferError(
            "array's memory is not inside one contiguous buffer on its .base chain; copy it "
            "(numpy.ascontiguousarray) and describe the copy"
        )
    # The deepest array holding the view: the owner of the memory.  (It also has the most room
    # after the view, since it contains every shallower holder.)
    arrays = [h for h in holders if isinstance(h[0], np.ndarray)]
    obj, base, nbytes = arrays[-1] if arrays else holders[-1]
    if start - base + total <= nbytes:
        buffer = obj if array.flags.writeable else _read_only(obj)
        return ViewSource(buffer, start - base, desc)
    raise BufferError(
        f"array ends {base + nbytes - end} bytes before the end of its buffer, but the descriptor's "
        f"total size ({total} bytes, the elements' bytes rounded up to a multiple of 4) needs "
        f"{start - base + total} bytes from the buffer's start and the buffer has {nbytes}; copy "
        "the array into a buffer with room to spare"
    )

