"""``BufferTensorDesc``: an immutable, validated ``DML_BUFFER_TENSOR_DESC``."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _overlap
from ._checks import (
    as_int,
    as_sizes,
    as_strides,
    counted,
    last_index,
    packed_strides,
    product,
)
from ._limits import MAX_DIMENSION_COUNT, MAX_FIELD_VALUE, TOTAL_SIZE_LIMIT
from .datatypes import (
    MAX_ELEMENT_COUNT,
    MAX_ELEMENT_EXTENT,
    TensorDataType,
    TensorFlags,
    data_type as _to_data_type,
    element_bits as _element_bits,
    numpy_dtype,
)
from .errors import DescriptorError
from .sizes import (
    _as_broadcast,
    _bytes_for,
    _strides_for_order,
    calc_buffer_tensor_size,
    calculate_strides,
    layout_names,
    layout_order,
)

if TYPE_CHECKING:
    from ._typing import DataTypeLike

__all__ = ["BufferTensorDesc", "DML_BUFFER_TENSOR_DESC"]


class DML_BUFFER_TENSOR_DESC(ctypes.Structure):
    """``DML_BUFFER_TENSOR_DESC`` with its C layout from DirectML's headers (48 bytes on 64-bit)."""

    _fields_ = [
        ("DataType", ctypes.c_int),
        ("Flags", ctypes.c_uint),
        ("DimensionCount", ctypes.c_uint),
        ("Sizes", ctypes.POINTER(ctypes.c_uint)),
        ("Strides", ctypes.POINTER(ctypes.c_uint)),
        ("TotalTensorSizeInBytes", ctypes.c_uint64),
        ("GuaranteedBaseOffsetAlignment", ctypes.c_uint),
    ]


_KNOWN_FLAGS = int(TensorFlags.OWNED_BY_DML)


def _max_total_size(data_type: TensorDataType) -> int:
    """DirectML's cap on ``TotalTensorSizeInBytes``: the minimum implied size of the largest extent."""
    return calc_buffer_tensor_size(data_type, [MAX_ELEMENT_EXTENT])


class BufferTensorDesc:
    """A validated, immutable DirectML buffer-tensor description.

    Parameters
    ----------
    data_type : data-type-like
        Anything :func:`dmlstride.data_type` accepts, except UNKNOWN.
    sizes : sequence of int
        1 to 8 logical sizes, each 1 to 2**32 - 1, in canonical order.
    strides : sequence of int, optional
        Element strides, 0 to 2**32 - 1, one per dimension; ``None`` (default)
        means packed row-major, as a null ``Strides`` pointer does.
    total_tensor_size_in_bytes : int, optional
        Size of the buffer range holding the tensor; at least the minimum
        implied size, below 2**64.  Defaults to the minimum implied size.
    guaranteed_base_offset_alignment : int, optional
        0, or a power of two at least the element size in bytes.
    flags : TensorFlags, optional
    directml_limits : bool, optional
        ``True`` (default) applies DirectML's limits on a tensor's extent: at
        most 2**32 - 1 elements (the product of the sizes), an element extent
        (offset of the last element + 1) of at most 2**32 - 1, and a
        ``total_tensor_size_in_bytes`` of at most the minimum implied size of
        2**32 - 1 elements (16 GiB - 4 bytes for FLOAT32).  ``False`` lifts
        those three rules to describe larger tensors for general strided work;
        every size and stride must still fit in 32 bits and the total in 64.
        The setting is kept by pickling and :meth:`to_rank` and shown by
        ``repr`` when ``False``; it takes no part in equality or hashing (two
        descriptors with the same fields describe the same tensor).

    Raises
    ------
    DescriptorError
        A field breaks one of DirectML's rules for a buffer tensor (sizes 1 to
        2**32 - 1, strides 0 to 2**32 - 1, at most 2**32 - 1 elements, an
        element extent of at most 2**32 - 1, a total size of at least the
        minimum implied size, ...); the message names the field, the value
        given and the limit.  ``directml_limits=False`` lifts the element-count
        and extent rules.
    TypeError
        A field has the wrong type.

    Examples
    --------
    >>> d = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 1, 5, 1])
    >>> d.layout, d.total_tensor_size_in_bytes, d.is_packed
    ('NHWC', 60, True)
    >>> padded = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    >>> padded.is_padded, padded.offset_of((1, 2))
    (True, 7)
    >>> BufferTensorDesc("float32", [3], strides=[2**31])
    Traceback (most recent call last):
        ...
    dmlstride.errors.DescriptorError: strides (2147483648,) with sizes (3,) give an element extent of 4294967297 (last element offset 4294967296 + 1); DirectML's limit is 2**32 - 1 = 4294967295 elements (pass directml_limits=False to lift it)
    >>> BufferTensorDesc("float32", [3], strides=[2**31], directml_limits=False).minimum_size_in_bytes
    17179869188
    """

    __slots__ = (
        "_data_type",
        "_flags",
        "_sizes",
        "_strides",
        "_total",
        "_alignment",
        "_effective",
        "_last",
        "_overlap",
        "_hash",
        "_directml_limits",
    )

    def __init__(
        self,
        data_type: DataTypeLike,
        sizes: Sequence[int],
        strides: Sequence[int] | None = None,
        total_tensor_size_in_bytes: int | None = None,
        guaranteed_base_offset_alignment: int = 0,
        flags: int = TensorFlags.NONE,
        directml_limits: bool = True,
    ) -> None:
        if not isinstance(directml_limits, (bool, np.bool_)):
            raise TypeError(f"directml_limits must be a bool, not {type(directml_limits).__name__}")
        limits = bool(directml_limits)
        dt = _to_data_type(data_type)
        if dt is TensorDataType.UNKNOWN:
            raise DescriptorError("data_type is UNKNOWN (0); expected one of the 13 valid data types")
        sizes_t = as_sizes(sizes)
        strides_t = None if strides is None else as_strides(strides, len(sizes_t))
        count = product(sizes_t)
        if limits and count > MAX_ELEMENT_COUNT:
            raise DescriptorError(
                f"sizes {sizes_t} hold {count} elements; the element count must be at most "
                f"2**32 - 1 = {MAX_ELEMENT_COUNT} (pass directml_limits=False to lift DirectML's limits)"
            )
        effective = strides_t if strides_t is not None else packed_strides(sizes_t)
        last = last_index(sizes_t, effective)
        if limits and last + 1 > MAX_ELEMENT_EXTENT:
            raise DescriptorError(
                f"strides {strides_t} with sizes {sizes_t} give an element extent of {last + 1} "
                f"(last element offset {last} + 1); DirectML's limit is 2**32 - 1 = {MAX_ELEMENT_EXTENT} "
                "elements (pass directml_limits=False to lift it)"
            )
        try:
            minimum = calc_buffer_tensor_size(dt, sizes_t, strides_t)
        except DescriptorError:
            # Every field is valid here; only a minimum of 2**64 bytes or more is left.
            last = last_index(sizes_t, strides_t or packed_strides(sizes_t))
            raise DescriptorError(
                f"sizes {sizes_t} with strides {strides_t} put the last element at offset {last}, "
                f"so the tensor needs {_bytes_for(_element_bits(dt), last + 1)} bytes (its minimum "
                "implied size), but total_tensor_size_in_bytes is a UINT64 and must be below "
                "2**64; use smaller strides or sizes"
            ) from None
        if total_tensor_size_in_bytes is None:
            total = minimum
        else:
            total = as_int(total_tensor_size_in_bytes, "total_tensor_size_in_bytes")
            if total < minimum:
                raise DescriptorError(
                    f"total_tensor_size_in_bytes is {total}; expected at least the minimum "
                    f"implied size, {minimum}"
                )
            if total >= TOTAL_SIZE_LIMIT:
                raise DescriptorError(
                    f"total_tensor_size_in_bytes is {total}; expected less than 2**64"
                )
            if limits and total > _max_total_size(dt):
                raise DescriptorError(
                    f"total_tensor_size_in_bytes is {total}; DirectML's limit for {dt.name} is "
                    f"{_max_total_size(dt)} bytes, the size of 2**32 - 1 elements "
                    "(pass directml_limits=False to lift it)"
                )
        align = as_int(guaranteed_base_offset_alignment, "guaranteed_base_offset_alignment")
        if align != 0:
            elem_bytes = (_element_bits(dt) + 7) // 8
            if align < 0 or align & (align - 1) or align < elem_bytes or align > MAX_FIELD_VALUE:
                raise DescriptorError(
                    f"guaranteed_base_offset_alignment is {align}; expected 0 (no promise) or a "
                    f"power of two from the element size ({counted(elem_bytes, 'byte')}) to 2**31"
                )
        fl = as_int(flags, "flags")
        if fl < 0 or fl & ~_KNOWN_FLAGS:
            raise DescriptorError(
                f"flags is {fl:#x}; expected only known bits (NONE = 0, OWNED_BY_DML = 1)"
            )
        set_ = object.__setattr__
        set_(self, "_data_type", dt)
        set_(self, "_flags", TensorFlags(fl))
        set_(self, "_sizes", sizes_t)
        set_(self, "_strides", strides_t)
        set_(self, "_total", total)
        set_(self, "_alignment", align)
        set_(self, "_effective", effective)
        set_(self, "_last", last)
        set_(self, "_overlap", None)
        set_(self, "_hash", None)
        set_(self, "_directml_limits", limits)

    # -- immutability, equality, hashing -------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BufferTensorDesc is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"BufferTensorDesc is immutable; cannot delete {name!r}")

    def _key(self) -> tuple:
        return (
            self._data_type,
            self._flags,
            self._sizes,
            self._strides,
            self._total,
            self._alignment,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BufferTensorDesc):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        parts = [f"{self._data_type.name}", f"sizes={list(self._sizes)}"]
        if self._strides is not None:
            parts.append(f"strides={list(self._strides)}")
        parts.append(f"total_tensor_size_in_bytes={self._total}")
        if self._alignment:
            parts.append(f"guaranteed_base_offset_alignment={self._alignment}")
        if self._flags:
            parts.append(f"flags={self._flags!r}")
        if not self._directml_limits:
            parts.append("directml_limits=False")
        return f"BufferTensorDesc({', '.join(parts)})"

    def __reduce__(self) -> tuple:
        args = (int(self._data_type), self._sizes, self._strides, self._total, self._alignment, int(self._flags))
        return (BufferTensorDesc, args if self._directml_limits else (*args, False))

    # -- fields ---------------------------------------------------------------------------

    @property
    def data_type(self) -> TensorDataType:
        """The element type."""
        return self._data_type

    @property
    def flags(self) -> TensorFlags:
        """``DML_TENSOR_FLAGS``."""
        return self._flags

    @property
    def dimension_count(self) -> int:
        """Number of dimensions, 1 to 8."""
        return len(self._sizes)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Logical size of each dimension."""
        return self._sizes

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Element strides as given, or ``None`` when packed-implicit."""
        return self._strides

    @property
    def total_tensor_size_in_bytes(self) -> int:
        """Size in bytes of the buffer range that holds the tensor."""
        return self._total

    @property
    def guaranteed_base_offset_alignment(self) -> int:
        """Promised alignment of the binding offset (0: no promise)."""
        return self._alignment

    @property
    def directml_limits(self) -> bool:
        """Whether DirectML's extent limits were applied (``directml_limits`` of the constructor)."""
        return self._directml_limits

    # -- derived properties ---------------------------------------------------------------

    @property
    def element_bits(self) -> int:
        """Bits per element."""
        return _element_bits(self._data_type)

    @property
    def element_count(self) -> int:
        """Logical element count, the product of the sizes."""
        return product(self._sizes)

    @property
    def minimum_size_in_bytes(self) -> int:
        """Minimum implied size (``DMLCalcBufferTensorSize``)."""
        return calc_buffer_tensor_size(self._data_type, self._sizes, self._strides)

    @property
    def effective_strides(self) -> tuple[int, ...]:
        """The strides in use: as given, or packed row-major when ``strides`` is None."""
        return self._effective

    @property
    def last_offset(self) -> int:
        """Element offset of the last element, ``sum((size - 1) * stride)``."""
        return self._last

    def _overlap_status(self) -> bool | None:
        """Overlap proven (True), distinct offsets proven (False), or not decided (None)."""
        o = self._overlap
        if o is None:
            status = _overlap.overlap_status(self._sizes, self._effective)
            o = "unknown" if status is None else status
            object.__setattr__(self, "_overlap", o)
        return None if o == "unknown" else o

    @property
    def has_overlap(self) -> bool:
        """Do two distinct indices share an element offset (or might they)?

        Exact whenever the overlap analysis decides within its work bound,
        which covers every descriptor whose strides nest (each stride beyond the
        extent of the smaller ones), every broadcast, and small and typical
        descriptors.  Past the bound the answer is ``True``: the offsets could
        not be proven distinct, so the descriptor is treated as overlapping.
        """
        return self._overlap_status() is not False

    @property
    def is_packed(self) -> bool:
        """Every element has its own offset and the offsets fill ``0 .. count - 1``.

        Decided by sorting the strides, without the overlap analysis.
        """
        return _overlap.is_packed(self._sizes, self._effective)

    @property
    def is_broadcast(self) -> bool:
        """Some dimension of size > 1 has stride 0."""
        return any(n > 1 and s == 0 for n, s in zip(self._sizes, self._effective))

    @property
    def is_padded(self) -> bool:
        """No overlap, and the strides leave gaps (more offsets than elements).

        Past the overlap analysis' work bound ``has_overlap`` is ``True``, so this is ``False``.
        """
        return self._last + 1 > self.element_count and not self.has_overlap

    @property
    def layout(self) -> str | None:
        """The first named layout of this rank whose packed strides equal ``effective_strides``.

        Tried in the order of :func:`dmlstride.layout_names` (``NCHW`` before ``NHWC``).
        """
        for name in layout_names(len(self._sizes)):
            try:
                if calculate_strides(name, self._sizes) == self._effective:
                    return name
            except DescriptorError:
                continue
        return None

    # -- methods --------------------------------------------------------------------------

    def offset_of(self, index: Sequence[int]) -> int:
        """Element offset of a logical index: the dot product of index and strides.

        Raises
        ------
        IndexError
            An index component is negative or not below its size.

        Examples
        --------
        >>> BufferTensorDesc("uint8", [2, 2, 3]).offset_of((1, 0, 1))
        7
        """
        if isinstance(index, (str, bytes)) or not isinstance(index, (Sequence, np.ndarray)):
            raise TypeError(f"index must be a sequence of integers, not {type(index).__name__}")
        if len(index) != len(self._sizes):
            raise IndexError(
                f"index has {counted(len(index), 'entry', 'entries')}; expected {len(self._sizes)}, "
                "one per dimension"
            )
        total = 0
        for k, (i, n, s) in enumerate(zip(index, self._sizes, self._effective)):
            i = as_int(i, f"index[{k}]")
            if not 0 <= i < n:
                raise IndexError(f"index[{k}] is {i}; expected 0 to {n - 1}")
            total += i * s
        return total

    def offsets(self) -> np.ndarray:
        """Element offset of every element, as a flat int64 array in logical C order.

        Examples
        --------
        >>> BufferTensorDesc("uint8", [2, 3], strides=[5, 1]).offsets().tolist()
        [0, 1, 2, 5, 6, 7]
        """
        if self._last >= 2**63:
            raise DescriptorError(f"the last element offset {self._last} does not fit in int64")
        out = np.zeros(1, dtype=np.int64)
        for n, s in zip(self._sizes, self._effective):
            out = (out[:, None] + np.arange(n, dtype=np.int64) * np.int64(s)).reshape(-1)
        return out

    def to_rank(self, rank: int, *, directml_limits: bool | None = None) -> BufferTensorDesc:
        """Pad leading dimensions with size 1 up to ``rank`` (or drop leading size-1 dims).

        Explicit strides of the new leading dimensions continue the packed
        pattern (size times stride of the dimension below).  ``directml_limits``
        defaults to this descriptor's setting.

        Examples
        --------
        >>> BufferTensorDesc("float32", [3, 5], strides=[5, 1]).to_rank(4).strides
        (15, 15, 5, 1)
        """
        rank = as_int(rank, "rank")
        if not 1 <= rank <= MAX_DIMENSION_COUNT:
            raise DescriptorError(f"rank is {rank}; expected 1 to {MAX_DIMENSION_COUNT}")
        sizes, strides = list(self._sizes), None if self._strides is None else list(self._strides)
        while len(sizes) > rank:
            if sizes[0] != 1:
                raise DescriptorError(
                    f"cannot reduce sizes {self._sizes} to rank {rank}: leading dimension of size {sizes[0]} != 1"
                )
            sizes.pop(0)
            if strides is not None:
                strides.pop(0)
        while len(sizes) < rank:
            if strides is not None:
                strides.insert(0, min(sizes[0] * strides[0], MAX_FIELD_VALUE))
            sizes.insert(0, 1)
        limits = self._directml_limits if directml_limits is None else directml_limits
        return BufferTensorDesc(
            self._data_type, sizes, strides, self._total, self._alignment, self._flags, limits
        )

    @classmethod
    def from_layout(
        cls,
        data_type: DataTypeLike,
        sizes: Sequence[int],
        layout: str | Sequence[int] = "NCHW",
        *,
        broadcast: Sequence[bool] | None = None,
        row_pitch_alignment: int | None = None,
        directml_limits: bool = True,
    ) -> BufferTensorDesc:
        """Describe a tensor laid out in memory as ``layout``.

        Parameters
        ----------
        data_type, sizes
            As for the constructor; sizes in canonical logical order.
        layout : str or sequence of int
            Memory order from slowest to fastest, as for :func:`calculate_strides`.
            A string must be a permutation of the rank's dimension letters.
        broadcast : sequence of bool, optional
            Dimensions that are broadcast (stride 0).
        row_pitch_alignment : int, optional
            A graphics row pitch in bytes: rows are padded so that each starts on a
            multiple of this many bytes, and the elements inside a row stay packed.
            For ranks 2 to 5 (which have an H dimension) the H stride is rounded
            up; a row is everything stored inside one H step: W elements, or
            W x C when channels are innermost (NHWC, NDHWC).  For other ranks,
            and when H is the fastest memory dimension, the stride of the
            second-fastest memory dimension is rounded instead.
        directml_limits : bool, optional
            As for the constructor.

        Examples
        --------
        >>> BufferTensorDesc.from_layout("float32", [1, 1, 3, 5], "NHWC").strides
        (15, 1, 5, 1)
        >>> BufferTensorDesc.from_layout("uint8", [2, 3], "HW", row_pitch_alignment=4).strides
        (4, 1)
        >>> BufferTensorDesc.from_layout("uint8", [1, 3, 224, 224], "NHWC", row_pitch_alignment=256).strides
        (172032, 1, 768, 3)
        """
        dt = _to_data_type(data_type)
        bits = _element_bits(dt)
        sizes_t = as_sizes(sizes)
        order = layout_order(layout, len(sizes_t))
        bc = _as_broadcast(broadcast, len(sizes_t))
        pitch = None
        if row_pitch_alignment is not None:
            align = as_int(row_pitch_alignment, "row_pitch_alignment")
            if align <= 0 or (align * 8) % bits:
                raise DescriptorError(
                    f"row_pitch_alignment is {align}; expected a positive number of bytes "
                    f"that is a whole number of {bits}-bit elements"
                )
            pitch = align * 8 // bits
        strides = _strides_for_order(sizes_t, order, bc, pitch)
        return cls(dt, sizes_t, strides, directml_limits=directml_limits)

    @classmethod
    def from_numpy(cls, array: np.ndarray, *, directml_limits: bool = True) -> BufferTensorDesc:
        """Describe the memory of an existing numpy array, starting at its first element.

        The array's strides must be non-negative multiples of its item size.  A
        C-contiguous array gets ``strides=None``; a 0-d array is described as sizes ``(1,)``.
        ``directml_limits`` is as for the constructor.

        Examples
        --------
        >>> import numpy as np
        >>> a = np.zeros((4, 6), dtype=np.float32)[:, :3]
        >>> BufferTensorDesc.from_numpy(a)
        BufferTensorDesc(FLOAT32, sizes=[4, 3], strides=[6, 1], total_tensor_size_in_bytes=84)
        """
        if not isinstance(array, np.ndarray):
            raise TypeError(f"array must be a numpy.ndarray, not {type(array).__name__}")
        dt = _to_data_type(array.dtype)
        if array.ndim == 0:
            return cls(dt, (1,), directml_limits=directml_limits)
        if array.size == 0:
            raise DescriptorError(f"array has shape {array.shape}; every size must be at least 1")
        item = array.itemsize
        if array.flags.c_contiguous:
            return cls(dt, array.shape, directml_limits=directml_limits)
        strides = []
        for axis, (n, s) in enumerate(zip(array.shape, array.strides)):
            if n == 1:
                # Any stride describes a size-1 dimension; keep numpy's when it is a valid
                # one, so the layout stays recognisable (a batch of 1 in NHWC memory).
                ok = s >= 0 and s % item == 0 and s // item <= MAX_FIELD_VALUE
                strides.append(s // item if ok else 0)
                continue
            if s < 0 or s % item:
                raise DescriptorError(
                    f"array.strides[{axis}] is {s} bytes; expected a non-negative multiple "
                    f"of the item size ({item})"
                )
            strides.append(s // item)
        return cls(dt, array.shape, strides, directml_limits=directml_limits)

    def to_ctypes(self) -> DML_BUFFER_TENSOR_DESC:
        """A ``DML_BUFFER_TENSOR_DESC`` ctypes structure with the C layout of DirectML's headers.

        The structure keeps its own size and stride arrays alive.

        Examples
        --------
        >>> import ctypes
        >>> s = BufferTensorDesc("float32", [1, 1, 3, 5]).to_ctypes()
        >>> ctypes.sizeof(s), s.DimensionCount, s.Sizes[3], bool(s.Strides)
        (48, 4, 5, False)
        """
        n = len(self._sizes)
        sizes = (ctypes.c_uint * n)(*self._sizes)
        desc = DML_BUFFER_TENSOR_DESC()
        desc.DataType = int(self._data_type)
        desc.Flags = int(self._flags)
        desc.DimensionCount = n
        desc.Sizes = ctypes.cast(sizes, ctypes.POINTER(ctypes.c_uint))
        keep = [sizes]
        if self._strides is not None:
            strides = (ctypes.c_uint * n)(*self._strides)
            desc.Strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_uint))
            keep.append(strides)
        desc.TotalTensorSizeInBytes = self._total
        desc.GuaranteedBaseOffsetAlignment = self._alignment
        desc._keepalive = keep  # type: ignore[attr-defined]
        return desc

    def explain(self, max_elements: int = 64) -> str:
        """Draw the logical view and the memory view of the tensor, as DirectML's documentation does.

        Each distinct element offset gets a letter (A, B, C, ...) in order of
        first appearance in logical C order, so broadcast elements repeat their
        letter in the logical view.  The memory view is an ``offset:``/``value:``
        table over element offsets ``0 .. E - 1`` in which padding shows as
        ``x``; ``repeats:`` lines list offsets shared by several elements.

        Parameters
        ----------
        max_elements : int, optional
            Tensors with more elements than this, or a memory view wider than
            ``4 * max_elements`` offsets, are summarised instead of drawn; the
            summary never enumerates the elements.  1 to 4096
            (``dmlstride._explain.MAX_DRAWN_ELEMENTS``), default 64: so at most
            4096 elements over at most 16384 offsets are ever drawn in full.

        Returns
        -------
        str
            The picture, lines joined by ``\\n``.  See :func:`dmlstride._explain.explain`.

        Raises
        ------
        TypeError
            ``max_elements`` is not an integer.
        ValueError
            ``max_elements`` is less than 1 or more than 4096.

        Examples
        --------
        >>> print(BufferTensorDesc("uint8", [2, 3], strides=[5, 1]).explain())
        UINT8 tensor, sizes [2, 3], strides [5, 1]: padded
        summary: 6 elements, element offsets 0..9 (extent 10), 4 padding offsets (x), no overlap
        <BLANKLINE>
        logical view:
        A B C
        D E F
        <BLANKLINE>
        memory view (offsets in 8-bit elements, 1 byte each; x = padding):
        offset: 0 1 2 3 4 5 6 7 8 9
        value:  A B C x x D E F x x
        >>> print(BufferTensorDesc("uint8", [2, 3], strides=[0, 1]).explain())
        UINT8 tensor, sizes [2, 3], strides [0, 1]: broadcast, overlapping
        ...
        logical view:
        A B C
        A B C
        ...
        value:  A B C
        <BLANKLINE>
        repeats: A at offset 0 is read by 2 elements (0, 0), (1, 0)
        repeats: B at offset 1 is read by 2 elements (0, 1), (1, 1)
        repeats: C at offset 2 is read by 2 elements (0, 2), (1, 2)
        """
        from ._explain import explain

        return explain(self, max_elements)
