"""gather, scatter, copy_tensor and view: moving elements through arbitrary strides.

Every argument is checked here, once, before the private Cython engine runs;
the engine re-checks each bound against the buffer it actually acquired and
holds every buffer export for the whole call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from . import _engine
from ._checks import as_int, packed_strides
from ._limits import MINIMUM_BUFFER_TENSOR_ALIGNMENT, OFFSET_LIMIT
from .datatypes import TensorDataType, numpy_dtype
from .descriptor import BufferTensorDesc
from .errors import DescriptorError

if TYPE_CHECKING:
    from ._typing import BufferLike, DataTypeLike

_OutT = TypeVar("_OutT", bound="np.ndarray[Any, Any]")

__all__ = ["gather", "scatter", "copy_tensor", "view"]

_FOUR_BIT_RANGE = {TensorDataType.UINT4: (0, 15), TensorDataType.INT4: (-8, 7)}
#: Most plans kept for reuse.
_PLAN_CACHE_LIMIT = 256


def _check_desc(desc: Any, name: str = "desc") -> BufferTensorDesc:
    if not isinstance(desc, BufferTensorDesc):
        raise TypeError(f"{name} must be a BufferTensorDesc, not {type(desc).__name__}")
    return desc


def _check_offset(offset: Any, desc: BufferTensorDesc, check_alignment: bool, name: str) -> int:
    if not isinstance(check_alignment, (bool, np.bool_)):
        raise TypeError(f"check_alignment must be a bool, not {type(check_alignment).__name__}")
    off = as_int(offset, name)
    if off < 0:
        raise BufferError(f"{name} is {off}; expected at least 0")
    if check_alignment:
        if off % MINIMUM_BUFFER_TENSOR_ALIGNMENT:
            raise DescriptorError(
                f"{name} is {off}; a buffer tensor's binding offset must be a multiple of "
                f"{MINIMUM_BUFFER_TENSOR_ALIGNMENT} (pass check_alignment=False to relax)"
            )
        align = desc.guaranteed_base_offset_alignment
        if align and off % align:
            raise DescriptorError(
                f"{name} is {off}; expected a multiple of guaranteed_base_offset_alignment ({align})"
            )
    if off >= OFFSET_LIMIT:
        raise BufferError(f"{name} is {off}; it lies past the end of any buffer")
    return off


# Plans by (direction, descriptor) or ("copy", source, destination).  Descriptors
# are immutable values, so equal descriptors share plans; nothing is stored on
# them.  The oldest plan goes when the cache is full.
_plans: dict[tuple[Any, ...], _engine.Plan] = {}


def _cached(key: tuple[Any, ...], make: Callable[[], _engine.Plan]) -> _engine.Plan:
    plan = _plans.get(key)
    if plan is None:
        plan = make()
        if len(_plans) >= _PLAN_CACHE_LIMIT:
            del _plans[next(iter(_plans))]
        _plans[key] = plan
    return plan


def _plan(desc: BufferTensorDesc, direction: str) -> _engine.Plan:
    """Plan between the descriptor's layout and a packed C-ordered array."""
    bits = desc.element_bits
    packed = packed_strides(desc.sizes)
    signed = desc.data_type is TensorDataType.INT4
    if direction == "gather":
        make = lambda: _engine.Plan(desc.sizes, desc.effective_strides, packed, bits, True, False, signed)
    else:
        make = lambda: _engine.Plan(desc.sizes, packed, desc.effective_strides, bits, False, True, signed)
    return _cached((direction, desc), make)


def _refuse_overlapping_destination(desc: BufferTensorDesc, name: str) -> None:
    status = desc._overlap_status()
    if status is None:
        raise DescriptorError(
            f"{name}'s element offsets could not be proven distinct within the overlap analysis' "
            f"work bound (sizes {desc.sizes}, strides {desc.effective_strides}); refusing to write "
            "through a destination that might overlap"
        )
    if status:
        raise DescriptorError(
            f"{name} has overlapping elements (two indices share an offset, e.g. broadcast strides "
            f"{desc.effective_strides}); writing through it would depend on write order"
        )


@overload
def gather(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    *,
    offset: int = 0,
    out: None = None,
    check_alignment: bool = True,
    dtype: DataTypeLike | None = None,
    scale: npt.ArrayLike | None = None,
    bias: npt.ArrayLike | None = None,
    axis: int | None = None,
) -> npt.NDArray[Any]: ...
@overload
def gather(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    *,
    offset: int = 0,
    out: _OutT,
    check_alignment: bool = True,
    dtype: DataTypeLike | None = None,
    scale: npt.ArrayLike | None = None,
    bias: npt.ArrayLike | None = None,
    axis: int | None = None,
) -> _OutT: ...
def gather(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    *,
    offset: int = 0,
    out: np.ndarray[Any, Any] | None = None,
    check_alignment: bool = True,
    dtype: DataTypeLike | None = None,
    scale: npt.ArrayLike | None = None,
    bias: npt.ArrayLike | None = None,
    axis: int | None = None,
) -> np.ndarray[Any, Any]:
    """Read the tensor ``desc`` describes, ``offset`` bytes into ``buffer``, into a packed array.

    Parameters
    ----------
    buffer : buffer-like
        Any contiguous object exporting the buffer protocol (bytes, bytearray,
        memoryview, array.array, numpy array, mmap, ...).  Its raw bytes are used;
        it must hold plain data (see Raises).
    desc : BufferTensorDesc
    offset : int, optional
        Byte offset of the tensor's buffer range; a multiple of 16 and of
        ``desc.guaranteed_base_offset_alignment`` (DirectML's binding rule).
    out : numpy.ndarray, optional
        A writable C-contiguous array of shape ``desc.sizes`` and dtype
        ``numpy_dtype(desc.data_type)`` to fill.
    check_alignment : bool, optional
        ``False`` relaxes only the alignment rule for ``offset``; bounds are always checked.
    dtype : data-type-like, optional
        With ``dtype``, ``scale`` or ``bias`` given, the result holds
        ``x * scale + bias`` converted to ``dtype`` (default: the descriptor's
        type) as :func:`dmlstride.convert` converts; ``out`` then has dtype
        ``numpy_dtype(dtype)``.
    scale, bias : float or 1-D array-like, optional
        Scalars, or 1-D of length ``desc.sizes[axis]`` (per channel).
    axis : int, optional
        The dimension 1-D ``scale`` and ``bias`` run along.

    Returns
    -------
    numpy.ndarray
        Shape ``desc.sizes``, C order, dtype ``numpy_dtype(desc.data_type)``
        (or of ``dtype``; ``out`` itself when given).  4-bit types unpack to
        one element per byte (INT4 sign-extended).

    Raises
    ------
    BufferError
        ``offset + desc.total_tensor_size_in_bytes`` exceeds the buffer, or the
        buffer is not contiguous.
    DescriptorError
        ``offset`` breaks the alignment rule.
    TypeError
        ``buffer`` or ``out`` holds Python objects (a numpy object dtype, format
        ``O`` anywhere, ctypes ``py_object``) or pointers, or has a buffer format
        that is not plain data.  The same holds for every buffer and array given
        to :func:`scatter`, :func:`copy_tensor` and :func:`view`.

    Examples
    --------
    >>> buf = b"ABCxxDEFxx" + bytes(6)
    >>> d = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    >>> gather(buf, d).tobytes()
    b'ABCDEF'
    >>> gather(buf, d, dtype="float32", scale=0.5, bias=[0, 100], axis=0).tolist()
    [[32.5, 33.0, 33.5], [134.0, 134.5, 135.0]]
    """
    if dtype is not None or scale is not None or bias is not None:
        from .conversion import _gather_converted

        return _gather_converted(buffer, desc, offset, out, check_alignment, dtype, scale, bias, axis)
    if axis is not None:
        _check_desc(desc)
        as_int(axis, "axis")
        if not -desc.dimension_count <= axis < desc.dimension_count:
            n = desc.dimension_count
            raise ValueError(f"axis is {axis}; expected -{n} to {n - 1} for a {n}-D tensor")
    result = _engine.gather_fast(buffer, desc, offset, out, check_alignment)
    if result is not None:
        return result
    _check_desc(desc)
    off = _check_offset(offset, desc, check_alignment, "offset")
    plan = _plan(desc, "gather")
    dtype = numpy_dtype(desc.data_type)
    _check_fits(buffer, off, max(desc.total_tensor_size_in_bytes, plan.src_extent))
    fresh = False
    if out is None:
        out, fresh = _engine.new_output(desc.sizes, dtype)
    else:
        _check_out(out, desc, dtype)
    if not _engine.execute(plan, buffer, off, desc.total_tensor_size_in_bytes, out, 0, 0, True, fresh,
                           "buffer", "out"):
        # out shares memory with the tensor's buffer range: go through a temporary.
        tmp, _ = _engine.new_output(desc.sizes, dtype)
        _engine.execute(plan, buffer, off, desc.total_tensor_size_in_bytes, tmp, 0, 0, src_name="buffer")
        np.copyto(out, tmp)
    if type(desc) is BufferTensorDesc:
        # Later gathers through an equal descriptor take the engine's fast path.
        _engine.remember_gather(desc, _engine.TransferSpec(
            plan, desc.sizes, dtype, desc.total_tensor_size_in_bytes, desc.guaranteed_base_offset_alignment
        ))
    return out


def _check_fits(buffer: Any, offset: int, need: int, name: str = "buffer") -> tuple[int, bool]:
    """Refuse a buffer that cannot hold ``need`` bytes at ``offset``; return (length, read-only)."""
    nbytes, readonly = _engine.buffer_info(buffer, name)
    if offset + need > nbytes:
        raise BufferError(
            f"{name} too small; expected at least {offset + need} bytes (offset {offset} + {need}), got {nbytes}"
        )
    return nbytes, readonly


def _check_writable_fits(buffer: Any, offset: int, need: int, name: str = "buffer") -> None:
    """:func:`_check_fits` for a destination, which must also be writable."""
    _, readonly = _check_fits(buffer, offset, need, name)
    if readonly:
        raise BufferError(f"{name} is read-only; expected a writable buffer")


def _check_out(out: Any, desc: BufferTensorDesc, dtype: np.dtype) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, not {type(out).__name__}")
    _engine.check_plain(out, "out")
    if out.shape != desc.sizes:
        raise ValueError(f"out has shape {out.shape}; expected {desc.sizes}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}; expected {dtype}")
    if not out.flags.c_contiguous:
        raise BufferError("out is not C-contiguous; expected a C-contiguous array")
    if not out.flags.writeable:
        raise BufferError("out is read-only; expected a writable array")


def _prepare_source(array: Any, desc: BufferTensorDesc) -> np.ndarray:
    """Convert ``array`` to a C-contiguous array of the descriptor's dtype, or refuse."""
    dtype = numpy_dtype(desc.data_type)
    # Before numpy reads it: a buffer of objects or pointers is refused, not converted.
    _engine.check_plain(array, "array")
    arr = np.asarray(array)
    _engine.check_plain(arr, "array")
    if arr.shape != desc.sizes:
        raise ValueError(f"array has shape {arr.shape}; expected exactly {desc.sizes} (desc.sizes)")
    if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        raise TypeError(
            f"array has dtype {arr.dtype}; cannot convert to {dtype} "
            f"({desc.data_type.name}) under casting='same_kind'"
        )
    rng = _FOUR_BIT_RANGE.get(desc.data_type)
    if rng is not None:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < rng[0] or hi > rng[1]:
            raise ValueError(
                f"array holds values from {lo} to {hi}; {desc.data_type.name} elements "
                f"must be {rng[0]} to {rng[1]}"
            )
    if arr.dtype == dtype and arr.flags.c_contiguous:
        return arr
    out = np.empty(desc.sizes, dtype=dtype)
    np.copyto(out, arr, casting="same_kind")
    return out


def scatter(
    array: npt.ArrayLike,
    desc: BufferTensorDesc,
    buffer: BufferLike,
    *,
    offset: int = 0,
    check_alignment: bool = True,
) -> None:
    """Write ``array`` into the elements of the tensor ``desc`` describes in ``buffer``.

    Exactly the tensor's elements are written: padding, bytes past the last
    element and, for 4-bit types, the neighbouring nibble stay as they were
    (a byte shared with a nibble outside the tensor is updated atomically, so
    another thread may write that nibble at the same time).

    Parameters
    ----------
    array : array-like
        Shape exactly ``desc.sizes``; converted as ``numpy.copyto(...,
        casting="same_kind")`` would, refused otherwise.
    desc : BufferTensorDesc
        Must not overlap (``desc.has_overlap``), or the result would depend on write order.
        A descriptor whose offsets the overlap analysis cannot prove distinct
        within its work bound counts as overlapping and is refused too.
    buffer : writable buffer-like
    offset, check_alignment
        As for :func:`gather`.

    Raises
    ------
    BufferError
        The buffer is read-only, not contiguous or too small.
    DescriptorError
        The destination overlaps (or is not proven not to), or ``offset``
        breaks the alignment rule.  Buffer checks come first: a buffer too
        small for the descriptor is refused before any overlap analysis.
    TypeError
        ``array``'s dtype cannot be converted under ``same_kind``, or ``array``
        or ``buffer`` holds Python objects or pointers.
    ValueError
        ``array`` has the wrong shape, or 4-bit values are out of range.

    Examples
    --------
    >>> import numpy as np
    >>> buf = bytearray(b"." * 16)
    >>> rows = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint8)
    >>> scatter(rows, BufferTensorDesc("uint8", [2, 3], strides=[5, 1]), buf)
    >>> bytes(buf[:10])
    b'\\x01\\x02\\x03..\\x04\\x05\\x06..'
    """
    if _engine.scatter_fast(array, desc, buffer, offset, check_alignment):
        return
    _check_desc(desc)
    off = _check_offset(offset, desc, check_alignment, "offset")
    _check_writable_fits(buffer, off, desc.total_tensor_size_in_bytes)
    _refuse_overlapping_destination(desc, "desc")
    src = _prepare_source(array, desc)
    plan = _plan(desc, "scatter")
    total = desc.total_tensor_size_in_bytes
    if not _engine.execute(plan, src, 0, 0, buffer, off, total, True, src_name="array", dst_name="buffer"):
        # The array shares memory with the destination range: read from a copy.
        _engine.execute(plan, src.copy(), 0, 0, buffer, off, total, src_name="array", dst_name="buffer")
    if type(desc) is BufferTensorDesc and desc.data_type not in _FOUR_BIT_RANGE:
        # Later scatters through an equal descriptor take the engine's fast path.
        _engine.remember_scatter(desc, _engine.TransferSpec(
            plan, desc.sizes, src.dtype, total, desc.guaranteed_base_offset_alignment
        ))


def copy_tensor(
    src: BufferLike,
    src_desc: BufferTensorDesc,
    dst: BufferLike,
    dst_desc: BufferTensorDesc,
    *,
    src_offset: int = 0,
    dst_offset: int = 0,
    check_alignment: bool = True,
) -> None:
    """Copy a tensor from one strided layout to another in one pass.

    Examples: NCHW -> NHWC, padded -> packed, broadcast -> expanded.  Both
    descriptors need the same sizes and data type; the destination follows the
    rules of :func:`scatter`.  If the two byte ranges overlap in memory the
    copy goes through a temporary, so the result is always what a copy via a
    temporary would give.

    Examples
    --------
    >>> nhwc = BufferTensorDesc.from_layout("uint8", [1, 2, 2, 2], "NHWC")
    >>> nchw = BufferTensorDesc("uint8", [1, 2, 2, 2])
    >>> dst = bytearray(16)
    >>> copy_tensor(b"aAbBcCdD" + bytes(8), nhwc, dst, nchw)
    >>> bytes(dst[:8])
    b'abcdABCD'
    """
    if _engine.copy_fast(src, src_desc, dst, dst_desc, src_offset, dst_offset, check_alignment):
        return
    _check_desc(src_desc, "src_desc")
    _check_desc(dst_desc, "dst_desc")
    if src_desc.sizes != dst_desc.sizes:
        raise DescriptorError(
            f"dst_desc.sizes {dst_desc.sizes} differ from src_desc.sizes {src_desc.sizes}; expected the same sizes"
        )
    if src_desc.data_type is not dst_desc.data_type:
        raise DescriptorError(
            f"dst_desc.data_type {dst_desc.data_type.name} differs from src_desc.data_type "
            f"{src_desc.data_type.name}; expected the same data type"
        )
    soff = _check_offset(src_offset, src_desc, check_alignment, "src_offset")
    doff = _check_offset(dst_offset, dst_desc, check_alignment, "dst_offset")
    _check_fits(src, soff, src_desc.total_tensor_size_in_bytes, "src")
    _check_writable_fits(dst, doff, dst_desc.total_tensor_size_in_bytes, "dst")
    _refuse_overlapping_destination(dst_desc, "dst_desc")
    bits = src_desc.element_bits
    plan = _cached(
        ("copy", src_desc, dst_desc),
        lambda: _engine.Plan(src_desc.sizes, src_desc.effective_strides, dst_desc.effective_strides, bits),
    )
    done = _engine.execute(
        plan, src, soff, src_desc.total_tensor_size_in_bytes,
        dst, doff, dst_desc.total_tensor_size_in_bytes, True, src_name="src", dst_name="dst",
    )
    if not done:
        # The ranges overlap in memory: go through a packed temporary.
        tmp = gather(src, src_desc, offset=soff, check_alignment=False)
        _engine.execute(
            _plan(dst_desc, "scatter"), tmp, 0, 0, dst, doff, dst_desc.total_tensor_size_in_bytes,
            dst_name="dst",
        )
    if type(src_desc) is BufferTensorDesc and type(dst_desc) is BufferTensorDesc:
        # Later copies between an equal pair of descriptors take the engine's fast path.
        _engine.remember_copy(src_desc, dst_desc, _engine.CopySpec(
            plan, src_desc.total_tensor_size_in_bytes, dst_desc.total_tensor_size_in_bytes,
            src_desc.guaranteed_base_offset_alignment, dst_desc.guaranteed_base_offset_alignment,
        ))


def view(
    buffer: BufferLike, desc: BufferTensorDesc, *, offset: int = 0, check_alignment: bool = True
) -> npt.NDArray[Any]:
    """A zero-copy numpy view of the tensor ``desc`` describes in ``buffer``.

    Byte strides are element strides times the item size.  The view is
    read-only when the descriptor overlaps (e.g. broadcast, or offsets the
    overlap analysis cannot prove distinct within its bound) or the buffer is
    read-only.  4-bit types cannot be viewed; use :func:`gather`.

    Examples
    --------
    >>> import numpy as np
    >>> buf = bytearray(b"ABCxxDEFxx" + bytes(6))
    >>> v = view(buf, BufferTensorDesc("uint8", [2, 3], strides=[5, 1]))
    >>> v.tobytes(), v.strides
    (b'ABCDEF', (5, 1))
    """
    _check_desc(desc)
    if desc.element_bits < 8:
        raise DescriptorError(
            f"{desc.data_type.name} elements are 4 bits wide and cannot be viewed by numpy; "
            "use gather() to unpack them"
        )
    off = _check_offset(offset, desc, check_alignment, "offset")
    nbytes, readonly = _check_fits(buffer, off, desc.total_tensor_size_in_bytes)
    dtype = numpy_dtype(desc.data_type)
    if isinstance(buffer, np.ndarray):
        # Any contiguous array (C or Fortran order): its raw bytes in memory order, no copy.
        raw = buffer.ravel(order="K").view(np.uint8)
    else:
        raw = np.frombuffer(buffer, dtype=np.uint8, count=nbytes) if nbytes else np.empty(0, np.uint8)
    strides = tuple(s * dtype.itemsize for s in desc.effective_strides)
    out = np.ndarray(desc.sizes, dtype=dtype, buffer=raw, offset=off, strides=strides)
    if readonly or desc.has_overlap:
        out.flags.writeable = False
    return out
