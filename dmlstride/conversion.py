"""Convert while moving: data-type casts, scale and bias, quantize and dequantize.

Each call walks strided elements once, converting on the way:

* :func:`convert` copies a tensor between two strided layouts and data types,
  computing ``y = x * scale + bias``;
* :func:`dmlstride.gather` does the same into a packed array when given
  ``dtype``, ``scale`` or ``bias``;
* :func:`quantize` and :func:`dequantize` follow ONNX's QuantizeLinear and
  DequantizeLinear (opset 21): per tensor, per axis and blocked.

Every argument is checked here, before any byte moves; the private
``_convert`` module re-checks each bound against the buffers it acquired and
runs the C kernels with the GIL released.
"""

from __future__ import annotations

import functools

from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np
import numpy.typing as npt

from . import _convert, _engine
from ._checks import as_int, packed_strides
from .datatypes import TensorDataType, data_type, numpy_dtype
from .descriptor import BufferTensorDesc
from .errors import DescriptorError
from .transfer import _check_desc, _check_offset, _check_out, _refuse_overlapping_destination
from .transfer import gather as _plain_gather

if TYPE_CHECKING:
    from ._typing import BufferLike, DataTypeLike

__all__ = ["convert", "quantize", "dequantize"]

_OutT = TypeVar("_OutT", bound="np.ndarray[Any, Any]")
_T = TensorDataType

#: Types whose presence (as source or destination) makes the arithmetic float64.
COMPUTE64_TYPES = frozenset({_T.FLOAT64, _T.INT64, _T.UINT64, _T.INT32, _T.UINT32})
#: Saturation ranges of the integer types.
INT_RANGE: dict[TensorDataType, tuple[int, int]] = {
    _T.UINT4: (0, 15),
    _T.INT4: (-8, 7),
    _T.UINT8: (0, 255),
    _T.INT8: (-128, 127),
    _T.UINT16: (0, 65535),
    _T.INT16: (-32768, 32767),
    _T.UINT32: (0, 2**32 - 1),
    _T.INT32: (-(2**31), 2**31 - 1),
    _T.UINT64: (0, 2**64 - 1),
    _T.INT64: (-(2**63), 2**63 - 1),
}
#: Types :func:`quantize` writes and :func:`dequantize` reads (the latter also INT32).
QUANTIZED_TYPES = (_T.INT4, _T.UINT4, _T.INT8, _T.UINT8, _T.INT16, _T.UINT16)
_DEQUANTIZED_TYPES = (_T.FLOAT32, _T.FLOAT16)
_OP_AFFINE, _OP_QUANTIZE, _OP_DEQUANTIZE = 0, 1, 2


# -- argument checks -------------------------------------------------------------------


def _dtype_arg(dtype: Any, name: str) -> TensorDataType:
    try:
        t = data_type(dtype)
    except DescriptorError as exc:
        raise DescriptorError(f"{name}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{name}: {exc}") from None
    if t is _T.UNKNOWN:
        raise DescriptorError(f"{name} is UNKNOWN (0); expected a concrete data type such as FLOAT32")
    return t


def _axis_arg(axis: Any, ndim: int) -> int:
    a = as_int(axis, "axis")
    if not -ndim <= a < ndim:
        raise ValueError(f"axis is {a}; expected -{ndim} to {ndim - 1} for a {ndim}-D tensor")
    return a % ndim


def _real_array(value: Any, name: str) -> np.ndarray:
    """``value`` as a numpy array of real numbers (not bool), or TypeError."""
    if isinstance(value, (str, bytes, bytearray)):
        raise TypeError(f"{name} must be a real number or an array of them, not {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number or an array of them ({exc})") from None
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name} has dtype {arr.dtype}; expected real numbers (integers or floats)")
    return arr


def _buffer_fits(buffer: Any, offset: int, need: int, name: str) -> bool:
    # The engine's buffer check: contiguous, and plain data (no Python objects or pointers).
    nbytes, readonly = _engine.buffer_info(buffer, name)
    if offset + need > nbytes:
        raise BufferError(
            f"{name} too small; expected at least {offset + need} bytes (offset {offset} + {need}), got {nbytes}"
        )
    return bool(readonly)


class _Params:
    """Parameter arrays and how an element's index selects its entry."""

    __slots__ = ("scale", "shift", "strides", "div")

    def __init__(self, scale: np.ndarray, shift: np.ndarray, strides: list[int], div: list[int]) -> None:
        self.scale = scale
        self.shift = shift
        self.strides = strides
        self.div = div


def _affine_params(
    scale: Any, bias: Any, axis: Any, sizes: tuple[int, ...], compute64: bool
) -> _Params:
    """scale and bias for ``x * scale + bias``: scalars, or 1-D of length ``sizes[axis]``."""
    ct = np.float64 if compute64 else np.float32
    ndim = len(sizes)
    ax = None if axis is None else _axis_arg(axis, ndim)
    arrays = []
    per_axis = False
    for value, name, default in ((scale, "scale", 1.0), (bias, "bias", 0.0)):
        if value is None:
            arrays.append(np.array(default))
            continue
        arr = _real_array(value, name)
        if arr.ndim == 1:
            if ax is None:
                raise ValueError(f"{name} is 1-D (length {arr.shape[0]}); pass axis= to say which dimension it runs along")
            if arr.shape[0] != sizes[ax]:
                raise ValueError(
                    f"{name} has length {arr.shape[0]}; expected sizes[{ax}] = {sizes[ax]} (one value per index along axis {ax})"
                )
            per_axis = True
        elif arr.ndim != 0:
            raise ValueError(f"{name} is {arr.ndim}-D with shape {arr.shape}; expected a scalar or a 1-D array")
        arrays.append(arr)
    strides = [0] * ndim
    if per_axis:
        assert ax is not None
        strides[ax] = 1
        arrays = [a if a.ndim else np.full(sizes[ax], a) for a in arrays]
    # ct(value): each parameter rounded once to the compute type, as numpy would.
    s, b = (np.ascontiguousarray(a.astype(ct).reshape(-1)) for a in arrays)
    return _Params(s, b, strides, [1] * ndim)


def _quant_params(
    scale: Any,
    zero_point: Any,
    axis: Any,
    block_size: Any,
    sizes: tuple[int, ...],
    qtype: TensorDataType,
) -> _Params:
    """scale and zero point of QuantizeLinear / DequantizeLinear, checked and laid out."""
    ndim = len(sizes)
    bs = as_int(block_size, "block_size")
    if bs < 0:
        raise ValueError(f"block_size is {bs}; expected 0 (per tensor or per axis) or a positive block length")
    as_int(axis, "axis")
    s = _real_array(scale, "scale")
    strides = [0] * ndim
    div = [1] * ndim
    if bs > 0:
        ax = _axis_arg(axis, ndim)
        blocks = -(-sizes[ax] // bs)
        want = sizes[:ax] + (blocks,) + sizes[ax + 1 :]
        if s.shape != want:
            raise ValueError(
                f"scale has shape {s.shape}; block_size {bs} along axis {ax} needs shape {want} "
                f"(ceil({sizes[ax]} / {bs}) = {blocks} blocks)"
            )
        strides = [0 if w == 1 else p for w, p in zip(want, packed_strides(want))]
        div[ax] = min(bs, sizes[ax])   # a block longer than the axis is the whole axis
    elif s.ndim == 0 or (s.ndim == 1 and s.shape[0] == 1):
        pass  # per tensor: axis is not used
    elif s.ndim == 1:
        ax = _axis_arg(axis, ndim)
        if s.shape[0] != sizes[ax]:
            raise ValueError(
                f"scale has length {s.shape[0]}; expected sizes[{ax}] = {sizes[ax]} (per axis {ax}), "
                "or a scalar (per tensor)"
            )
        strides[ax] = 1
    else:
        raise ValueError(
            f"scale is {s.ndim}-D with shape {s.shape}; expected a scalar, a 1-D array (per axis) "
            "or, with block_size > 0, the tensor's rank"
        )
    s32 = s.astype(np.float32)
    if not np.all(np.isfinite(s32)) or np.any(s32 == 0):
        bad = s32[~np.isfinite(s32) | (s32 == 0)].reshape(-1)[0]
        raise ValueError(f"scale holds {bad} (as float32); quantization scales must be finite and non-zero")
    if zero_point is None:
        z = np.zeros(s.shape, np.float32)
    else:
        if qtype is _T.INT32:
            raise ValueError("zero_point must be None for INT32 (DequantizeLinear has no INT32 zero point)")
        zarr = _real_array(zero_point, "zero_point")
        if zarr.dtype.kind == "f":
            raise TypeError(f"zero_point has dtype {zarr.dtype}; expected integers of the quantized type's range")
        if zarr.ndim != 0 and zarr.shape != s.shape:
            raise ValueError(f"zero_point has shape {zarr.shape}; expected scale's shape {s.shape} or a scalar")
        lo, hi = INT_RANGE[qtype]
        if zarr.size and (int(zarr.min()) < lo or int(zarr.max()) > hi):
            bad = int(zarr.min()) if int(zarr.min()) < lo else int(zarr.max())
            raise ValueError(f"zero_point holds {bad}; {qtype.name} zero points must be {lo} to {hi}")
        z = np.broadcast_to(zarr, s.shape).astype(np.float32)
    return _Params(
        np.ascontiguousarray(s32.reshape(-1)), np.ascontiguousarray(z.reshape(-1)), strides, div
    )


# -- the walk --------------------------------------------------------------------------


def _merge(
    sizes: tuple[int, ...], strides: list[tuple[int, ...]], params: _Params
) -> tuple[list[int], list[list[int]], list[int], list[int]]:
    """Drop size-1 dimensions and merge neighbours contiguous in every stride array."""
    return _merged(tuple(sizes), tuple(tuple(s) for s in strides), tuple(params.strides), tuple(params.div))


@functools.lru_cache(maxsize=256)
def _merged(
    sizes: tuple[int, ...], strides: tuple[tuple[int, ...], ...], pstrides: tuple[int, ...], pdiv: tuple[int, ...]
) -> tuple[list[int], list[list[int]], list[int], list[int]]:
    # (Cached: a loop over batches asks the same question every call.  Callers only read the lists.)
    keep = [k for k, n in enumerate(sizes) if n > 1] or [len(sizes) - 1]
    n_ = [sizes[k] for k in keep]
    st = [[s[k] for k in keep] for s in strides]
    ps = [pstrides[k] if sizes[k] > 1 else 0 for k in keep]
    dv = [pdiv[k] for k in keep]
    i = len(n_) - 2
    while i >= 0:
        inner = n_[i + 1]
        if (
            dv[i] == 1
            and dv[i + 1] == 1
            and all(s[i] == s[i + 1] * inner for s in st)
            and ps[i] == ps[i + 1] * inner
        ):
            n_[i] *= inner
            for s in st:
                s[i] = s[i + 1]
                del s[i + 1]
            ps[i] = ps[i + 1]
            del n_[i + 1], ps[i + 1], dv[i + 1]
        i -= 1
    return n_, st, ps, dv


def _run(
    src: Any,
    src_offset: int,
    src_need: int,
    src_type: TensorDataType,
    src_strides: tuple[int, ...],
    dst: Any,
    dst_offset: int,
    dst_need: int,
    dst_type: TensorDataType,
    dst_strides: tuple[int, ...],
    sizes: tuple[int, ...],
    params: _Params,
    op: int,
    compute64: bool,
    bounds: tuple[int, int],
    refuse_alias: bool = False,
) -> bool:
    n_, (ss, ds), ps, dv = _merge(sizes, [src_strides, dst_strides], params)
    lo, hi = bounds
    return bool(
        _convert.run(
            src, src_offset, src_need, dst, dst_offset, dst_need,
            n_, ss, ds, ps, dv, int(src_type), int(dst_type), compute64, op,
            params.scale, params.shift, float(lo), float(hi), _engine.get_num_threads(), refuse_alias,
        )
    )


def _bounds(t: TensorDataType) -> tuple[int, int]:
    return INT_RANGE.get(t, (0, 0))


def _unpacked(t: TensorDataType) -> TensorDataType:
    """The type a 4-bit element has once unpacked to one per byte."""
    return {_T.UINT4: _T.UINT8, _T.INT4: _T.INT8}.get(t, t)


# -- gather with conversion ------------------------------------------------------------


def _gather_converted(
    buffer: Any,
    desc: Any,
    offset: Any,
    out: Any,
    check_alignment: Any,
    dtype: Any,
    scale: Any,
    bias: Any,
    axis: Any,
) -> np.ndarray[Any, Any]:
    """:func:`dmlstride.gather` with ``dtype``, ``scale`` or ``bias`` given."""
    _check_desc(desc)
    dst_t = desc.data_type if dtype is None else _dtype_arg(dtype, "dtype")
    src_t = desc.data_type
    off = _check_offset(offset, desc, check_alignment, "offset")
    compute64 = src_t in COMPUTE64_TYPES or dst_t in COMPUTE64_TYPES
    params = _affine_params(scale, bias, axis, desc.sizes, compute64)
    ndt = numpy_dtype(dst_t)
    if out is not None:
        _check_out(out, desc, ndt)
    _buffer_fits(buffer, off, desc.total_tensor_size_in_bytes, "buffer")
    result = np.empty(desc.sizes, ndt) if out is None else out
    packed = packed_strides(desc.sizes)
    args = (desc.sizes, params, _OP_AFFINE, compute64, _bounds(dst_t))
    if not _run(buffer, off, desc.total_tensor_size_in_bytes, src_t, desc.effective_strides,
                result, 0, 0, _unpacked(dst_t), packed, *args, refuse_alias=True):
        tmp = np.empty(desc.sizes, ndt)
        _run(buffer, off, desc.total_tensor_size_in_bytes, src_t, desc.effective_strides,
             tmp, 0, 0, _unpacked(dst_t), packed, *args)
        np.copyto(result, tmp)
    return result


# -- public entry points ---------------------------------------------------------------


def convert(
    src: BufferLike,
    src_desc: BufferTensorDesc,
    dst: BufferLike,
    dst_desc: BufferTensorDesc,
    *,
    scale: npt.ArrayLike | None = None,
    bias: npt.ArrayLike | None = None,
    axis: int | None = None,
    src_offset: int = 0,
    dst_offset: int = 0,
    check_alignment: bool = True,
) -> None:
    """Copy a tensor between strided layouts, converting ``y = x * scale + bias`` to ``dst_desc``'s type.

    One pass over the elements: each source element (``src_desc``'s type) is
    converted to the compute type (float32, or float64 when either type is
    FLOAT64, INT64, UINT64, INT32 or UINT32), multiplied by ``scale``, ``bias``
    added (no fused multiply-add), and the result rounded to ``dst_desc``'s
    type: floats to nearest even (float16 overflow becomes inf), integers half
    to even and saturated, NaN becoming 0; 4-bit types saturate to their
    4-bit range.  Only the destination's elements are written: padding and
    the other nibble of a 4-bit byte stay as they were.  If the two byte
    ranges overlap in memory the conversion reads from a temporary copy.

    Parameters
    ----------
    src : buffer-like
    src_desc : BufferTensorDesc
    dst : writable buffer-like
    dst_desc : BufferTensorDesc
        Same sizes as ``src_desc``; must not overlap (``dst_desc.has_overlap``).
    scale, bias : float or 1-D array-like, optional
        Scalars (default 1 and 0), or 1-D of length ``sizes[axis]``, one value
        per index along ``axis`` (per channel).  Each is rounded once to the
        compute type.
    axis : int, optional
        The dimension 1-D ``scale`` and ``bias`` run along (negative counts from the end).
    src_offset, dst_offset : int, optional
        Byte offsets of the tensors' buffer ranges (multiples of 16 and of the
        descriptor's ``guaranteed_base_offset_alignment``).
    check_alignment : bool, optional
        ``False`` relaxes only the alignment rule for the offsets.

    Raises
    ------
    BufferError
        A buffer is too small, not contiguous, or the destination is read-only.
    DescriptorError
        The sizes differ, the destination overlaps, an offset breaks the alignment rule.
    TypeError
        A buffer holds Python objects, or ``scale``/``bias`` are not real numbers.
    ValueError
        ``scale``/``bias`` have the wrong shape, or ``axis`` is out of range.

    Examples
    --------
    >>> import numpy as np
    >>> nhwc = BufferTensorDesc.from_layout("uint8", [1, 3, 1, 2], "NHWC")
    >>> nchw = BufferTensorDesc("float32", [1, 3, 1, 2])
    >>> pixels = bytes([10, 20, 30, 40, 50, 60]) + bytes(10)
    >>> out = np.zeros(6, np.float32)
    >>> convert(pixels, nhwc, out, nchw, scale=0.5, bias=[0, 100, 200], axis=1)
    >>> out.tolist()
    [5.0, 20.0, 110.0, 125.0, 215.0, 230.0]
    """
    _check_desc(src_desc, "src_desc")
    _check_desc(dst_desc, "dst_desc")
    if src_desc.sizes != dst_desc.sizes:
        raise DescriptorError(
            f"dst_desc.sizes {dst_desc.sizes} differ from src_desc.sizes {src_desc.sizes}; expected the same sizes"
        )
    soff = _check_offset(src_offset, src_desc, check_alignment, "src_offset")
    doff = _check_offset(dst_offset, dst_desc, check_alignment, "dst_offset")
    _refuse_overlapping_destination(dst_desc, "dst_desc")
    src_t, dst_t = src_desc.data_type, dst_desc.data_type
    compute64 = src_t in COMPUTE64_TYPES or dst_t in COMPUTE64_TYPES
    params = _affine_params(scale, bias, axis, src_desc.sizes, compute64)
    _buffer_fits(src, soff, src_desc.total_tensor_size_in_bytes, "src")
    if _buffer_fits(dst, doff, dst_desc.total_tensor_size_in_bytes, "dst"):
        raise BufferError("dst is read-only; expected a writable buffer")
    sizes = src_desc.sizes
    args = (sizes, params, _OP_AFFINE, compute64, _bounds(dst_t))
    dst_side = (dst, doff, dst_desc.total_tensor_size_in_bytes, dst_t, dst_desc.effective_strides)
    if not _run(src, soff, src_desc.total_tensor_size_in_bytes, src_t, src_desc.effective_strides,
                *dst_side, *args, refuse_alias=True):
        # The byte ranges overlap: read the source from a packed copy.
        tmp = _plain_gather(src, src_desc, offset=soff, check_alignment=False)
        _run(tmp, 0, 0, _unpacked(src_t), packed_strides(sizes), *dst_side, *args)


def quantize(
    array: npt.ArrayLike,
    desc: BufferTensorDesc,
    buffer: BufferLike,
    scale: npt.ArrayLike,
    zero_point: npt.ArrayLike | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    offset: int = 0,
    check_alignment: bool = True,
) -> None:
    """ONNX QuantizeLinear (opset 21): write ``saturate(rint(x / scale) + zero_point)`` through ``desc``.

    ``x`` and ``scale`` are taken as float32 and the division is done in
    float32; ``rint`` rounds half to even; the result saturates to the range
    of ``desc``'s type (INT4, UINT4, INT8, UINT8, INT16 or UINT16).  A NaN
    quantizes to the zero point.  The elements are written as
    :func:`dmlstride.scatter` writes them: padding and the other nibble of a
    4-bit byte stay as they were.

    Parameters
    ----------
    array : array-like
        Real numbers, shape exactly ``desc.sizes``.
    desc : BufferTensorDesc
        The quantized tensor; must not overlap.
    buffer : writable buffer-like
    scale : float or array-like
        Per tensor: a scalar.  Per axis: 1-D of length ``sizes[axis]``.
        Blocked (``block_size > 0``): the tensor's shape with
        ``ceil(sizes[axis] / block_size)`` along ``axis``.  Finite and non-zero.
    zero_point : int or array-like of int, optional
        Scale's shape (or a scalar), within the quantized type's range; default 0.
    axis : int, optional
        Dimension of per-axis and blocked parameters (default 1; negative counts from the end).
    block_size : int, optional
        0 (default), or the block length along ``axis``.
    offset, check_alignment
        As for :func:`dmlstride.scatter`.

    Raises
    ------
    BufferError, DescriptorError, TypeError, ValueError
        Checked before any byte moves; the buffer is unchanged on error.

    Examples
    --------
    >>> import numpy as np
    >>> desc = BufferTensorDesc("uint8", [2, 3])
    >>> buf = bytearray(16)
    >>> quantize([[0.0, 0.5, 1.0], [1.5, -1.0, 300.0]], desc, buf, 0.5, 10)
    >>> list(buf[:6])
    [10, 11, 12, 13, 8, 255]
    """
    _check_desc(desc)
    qtype = desc.data_type
    if qtype not in QUANTIZED_TYPES:
        raise DescriptorError(
            f"desc.data_type is {qtype.name}; quantize writes "
            f"{', '.join(t.name for t in QUANTIZED_TYPES)}"
        )
    off = _check_offset(offset, desc, check_alignment, "offset")
    _refuse_overlapping_destination(desc, "desc")
    x = _real_array(array, "array")
    if x.shape != desc.sizes:
        raise ValueError(f"array has shape {x.shape}; expected exactly {desc.sizes} (desc.sizes)")
    params = _quant_params(scale, zero_point, axis, block_size, desc.sizes, qtype)
    if _buffer_fits(buffer, off, desc.total_tensor_size_in_bytes, "buffer"):
        raise BufferError("buffer is read-only; expected a writable buffer")
    src = np.ascontiguousarray(x, dtype=np.float32)
    args = (desc.sizes, params, _OP_QUANTIZE, False, INT_RANGE[qtype])
    dst_side = (buffer, off, desc.total_tensor_size_in_bytes, qtype, desc.effective_strides)
    packed = packed_strides(desc.sizes)
    if not _run(src, 0, 0, _T.FLOAT32, packed, *dst_side, *args, refuse_alias=True):
        _run(src.copy(), 0, 0, _T.FLOAT32, packed, *dst_side, *args)


@overload
def dequantize(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    scale: npt.ArrayLike,
    zero_point: npt.ArrayLike | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    dtype: DataTypeLike = "float32",
    offset: int = 0,
    out: None = None,
    check_alignment: bool = True,
) -> npt.NDArray[np.floating[Any]]: ...
@overload
def dequantize(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    scale: npt.ArrayLike,
    zero_point: npt.ArrayLike | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    dtype: DataTypeLike = "float32",
    offset: int = 0,
    out: _OutT,
    check_alignment: bool = True,
) -> _OutT: ...
def dequantize(
    buffer: BufferLike,
    desc: BufferTensorDesc,
    scale: npt.ArrayLike,
    zero_point: npt.ArrayLike | None = None,
    *,
    axis: int = 1,
    block_size: int = 0,
    dtype: DataTypeLike = "float32",
    offset: int = 0,
    out: np.ndarray[Any, Any] | None = None,
    check_alignment: bool = True,
) -> np.ndarray[Any, Any]:
    """ONNX DequantizeLinear (opset 21): ``(x - zero_point) * scale`` into a packed array.

    ``x`` (``desc``'s type: INT4, UINT4, INT8, UINT8, INT16, UINT16, or INT32
    without a zero point) is read through ``desc``; the subtraction and the
    multiplication are done in float32 and the result rounded to ``dtype``
    (float32 or float16, to nearest even).

    Parameters
    ----------
    buffer : buffer-like
    desc : BufferTensorDesc
    scale, zero_point, axis, block_size
        As for :func:`quantize`.
    dtype : data-type-like, optional
        ``"float32"`` (default) or ``"float16"``.
    offset, check_alignment
        As for :func:`dmlstride.gather`.
    out : numpy.ndarray, optional
        A writable C-contiguous array of shape ``desc.sizes`` and dtype ``dtype`` to fill.

    Returns
    -------
    numpy.ndarray
        Shape ``desc.sizes``, dtype ``dtype`` (``out`` itself when given).

    Examples
    --------
    >>> desc = BufferTensorDesc("int4", [2, 4])
    >>> weights = bytes([0x21, 0xf8, 0x10, 0x32]) + bytes(12)   # low nibble first
    >>> dequantize(weights, desc, [0.5, 2.0], axis=0).tolist()
    [[0.5, 1.0, -4.0, -0.5], [0.0, 2.0, 4.0, 6.0]]
    """
    _check_desc(desc)
    qtype = desc.data_type
    if qtype not in QUANTIZED_TYPES and qtype is not _T.INT32:
        raise DescriptorError(
            f"desc.data_type is {qtype.name}; dequantize reads "
            f"{', '.join(t.name for t in QUANTIZED_TYPES)} or INT32"
        )
    out_t = _dtype_arg(dtype, "dtype")
    if out_t not in _DEQUANTIZED_TYPES:
        raise ValueError(f"dtype is {out_t.name}; dequantize produces FLOAT32 or FLOAT16")
    off = _check_offset(offset, desc, check_alignment, "offset")
    params = _quant_params(scale, zero_point, axis, block_size, desc.sizes, qtype)
    ndt = numpy_dtype(out_t)
    if out is not None:
        _check_out(out, desc, ndt)
    _buffer_fits(buffer, off, desc.total_tensor_size_in_bytes, "buffer")
    result = np.empty(desc.sizes, ndt) if out is None else out
    packed = packed_strides(desc.sizes)
    src_side = (buffer, off, desc.total_tensor_size_in_bytes, qtype, desc.effective_strides)
    args = (desc.sizes, params, _OP_DEQUANTIZE, False, (0, 0))
    if not _run(*src_side, result, 0, 0, out_t, packed, *args, refuse_alias=True):
        tmp = np.empty(desc.sizes, ndt)
        _run(*src_side, tmp, 0, 0, out_t, packed, *args)
        np.copyto(result, tmp)
    return result


def _set_hardware_half(allow: bool) -> bool:
    """Allow or forbid the CPU's float16 conversion instructions; return whether in use.

    A switch for tests: with ``False`` every float16 conversion takes the
    bit-exact software path.
    """
    return bool(_convert.set_hardware_half(bool(allow)))


def _hardware_half() -> bool:
    """Whether float16 conversions use the CPU's F16C instructions."""
    return bool(_convert.hardware_half())

