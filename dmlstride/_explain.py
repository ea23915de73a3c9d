"""Text pictures of a buffer tensor: its logical view and its memory view.

:func:`explain` draws a :class:`~dmlstride.BufferTensorDesc` the way the
"Using strides to express padding and memory layout" page does:

* every distinct element offset gets a name (``A``-``Z``, then ``a``-``z``
  without ``x``, then two-letter names), in the order the offsets first appear
  when the elements are visited in logical C order, so a broadcast tensor shows
  the same letter wherever it repeats;
* the logical view prints one row per run of the last dimension, with a blank
  line between the 2-D slices of higher dimensions;
* the memory view is an ``offset:`` / ``value:`` table over the element offsets
  ``0 .. E - 1``, where ``E = max(last_offset + 1, size * stride over the
  dimensions with a non-zero stride)``; offsets that no element uses are
  padding, drawn as ``x``; offsets that several elements share are listed on
  ``repeats:`` lines.

Columns are one name wide and separated by one space, so a value row reads like
that page's tables (``A B C x x D E F x x``); offset labels wider than a column
are stacked on extra ruler lines, each label starting above its own column.
Large tensors are summarised without enumerating their elements.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .descriptor import BufferTensorDesc

__all__ = ["element_name", "explain", "offset_extent"]

#: Single-character element names: ``x`` is left out because it marks padding.
_ALPHABET = string.ascii_uppercase + string.ascii_lowercase.replace("x", "")
PADDING = "x"
#: In a summary's memory preview: an offset used by an element that is not listed.
LATER = "."

_PREVIEW_ELEMENTS = 8  # elements listed by a summary of a tensor too large to draw
_PREVIEW_OFFSETS = 16  # offsets shown by a summary's memory preview
_ROW = 32  # offsets per memory-table row before it wraps
_MAX_READERS = 4  # element indices listed on one repeats: line
_MAX_REPEAT_LINES = 8  # repeats: lines before the rest are counted
_MASK_LIMIT = 1 << 21  # largest extent whose used offsets a summary counts with a bitmap


#: Largest ``max_elements`` explain() accepts: a drawing is for reading, not for dumping memory.
MAX_DRAWN_ELEMENTS = 4096

def element_name(number: int) -> str:
    """The name of the ``number``-th distinct element offset (0-based).

    ``A`` to ``Z``, then ``a`` to ``z`` without ``x`` (which marks padding),
    then two-letter names from the same 51 characters, then three-letter names.

    Parameters
    ----------
    number : int
        Non-negative position in order of first appearance.

    Returns
    -------
    str

    Examples
    --------
    >>> [element_name(i) for i in (0, 1, 25, 26, 48, 49, 50, 51, 52)]
    ['A', 'B', 'Z', 'a', 'w', 'y', 'z', 'AA', 'AB']
    """
    number = operator.index(number)
    if number < 0:
        raise ValueError(f"number is {number}; expected at least 0")
    base = len(_ALPHABET)
    length, count = 1, base
    while number >= count:
        number -= count
        length += 1
        count = base**length
    chars = []
    for _ in range(length):
        number, digit = divmod(number, base)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def offset_extent(desc: BufferTensorDesc) -> int:
    """Number of element offsets the memory view covers.

    ``max(last_offset + 1, max(size * stride for dimensions with stride > 0))``:
    the span up to the last element, widened so that padding after the last row
    of a padded dimension (the ``x x`` that ends ``A B C x x D E F x x``) is shown.

    Examples
    --------
    >>> from dmlstride import BufferTensorDesc
    >>> offset_extent(BufferTensorDesc("uint8", [2, 3], strides=[5, 1]))
    10
    >>> offset_extent(BufferTensorDesc("uint8", [2, 3], strides=[0, 1]))
    3
    """
    spans = [n * s for n, s in zip(desc.sizes, desc.effective_strides) if s > 0]
    return max([desc.last_offset + 1, *spans])


def explain(desc: BufferTensorDesc, max_elements: int = 64) -> str:
    """Draw the logical view and the memory view of a buffer tensor.

    Parameters
    ----------
    desc : BufferTensorDesc
        The tensor to draw.
    max_elements : int, optional
        Tensors with more elements than this, or whose memory view would span
        more than ``4 * max_elements`` offsets, are summarised: a header, a
        summary line, the first few elements and offsets, and ``...``.  The
        summary never enumerates the elements, so it is fast for any size.
        1 to ``MAX_DRAWN_ELEMENTS`` (4096), default 64: at most 4096 elements
        over at most 16384 offsets are ever drawn in full.

    Returns
    -------
    str
        Lines separated by ``\\n``, without a trailing newline:

        * a header: data type, sizes, strides (``packed (implicit)`` when the
          descriptor has none), the classification (packed, padded, broadcast,
          overlapping, overlap not ruled out) and the layout name when there
          is one;
        * ``summary:`` element count, offset extent, padding count and overlap;
        * ``logical view:`` one name per element;
        * ``memory view``: the ``offset:`` and ``value:`` rows (offsets count
          elements, so nibbles for 4-bit types), ``x`` for padding;
        * ``repeats:`` lines for offsets that several elements share.

    Raises
    ------
    TypeError
        ``max_elements`` is not an integer.
    ValueError
        ``max_elements`` is less than 1 or more than ``MAX_DRAWN_ELEMENTS``.

    Examples
    --------
    >>> from dmlstride import BufferTensorDesc
    >>> print(explain(BufferTensorDesc("uint8", [2, 3], strides=[5, 1])))
    UINT8 tensor, sizes [2, 3], strides [5, 1]: padded
    ...
    value:  A B C x x D E F x x
    """
    if isinstance(max_elements, bool) or not isinstance(max_elements, (int, np.integer)):
        raise TypeError(f"max_elements must be an integer, not {type(max_elements).__name__}")
    max_elements = operator.index(max_elements)
    if not 1 <= max_elements <= MAX_DRAWN_ELEMENTS:
        raise ValueError(
            f"max_elements is {max_elements}; expected 1 to {MAX_DRAWN_ELEMENTS} "
            "(larger tensors are summarised, never drawn whole)"
        )
    extent = offset_extent(desc)
    count = desc.element_count
    if count <= max_elements and extent <= 4 * max_elements:
        return "\n".join(_draw(desc, extent))
    return "\n".join(_summarise(desc, extent, max_elements))


# -- pieces shared by both forms -------------------------------------------------------------


def _dims(values: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _index_text(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")"


def _unravel(flat: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for n in reversed(sizes):
        flat, i = divmod(flat, n)
        index.append(i)
    return tuple(reversed(index))


def _header(desc: BufferTensorDesc) -> str:
    if desc.strides is None:
        strides = f"strides packed (implicit) = {_dims(desc.effective_strides)}"
    else:
        strides = f"strides {_dims(desc.strides)}"
    words = []
    if desc.is_packed:
        words.append("packed")
    if desc.is_padded:
        words.append("padded")
    if desc.is_broadcast:
        words.append("broadcast")
    status = desc._overlap_status()
    if status:
        words.append("overlapping")
    elif status is None:
        words.append("overlap not ruled out")
    layout = desc.layout
    if layout is not None:
        words.append(f"layout {layout}")
    return f"{desc.data_type.name} tensor, sizes {_dims(desc.sizes)}, {strides}: {', '.join(words)}"


def _overlap_text(desc: BufferTensorDesc) -> str:
    status = desc._overlap_status()
    if status is False:
        return "no overlap"
    if status is None:
        return "overlap not ruled out (offsets not proven distinct within the analysis bound)"
    axes = [str(k) for k, (n, s) in enumerate(zip(desc.sizes, desc.effective_strides)) if n > 1 and s == 0]
    if axes:
        plural = "s" if len(axes) > 1 else ""
        return f"overlap (broadcast along dimension{plural} {', '.join(axes)})"
    return "overlap (distinct elements share offsets)"


def _summary_line(desc: BufferTensorDesc, extent: int, distinct: int | None) -> str:
    count = desc.element_count
    plural = "" if count == 1 else "s"
    parts = [f"summary: {count} element{plural}, element offsets 0..{extent - 1} (extent {extent})"]
    if distinct is None:
        parts.append("padding not counted (offsets that may repeat, over a large extent)")
    else:
        if distinct != count:
            parts.append(f"{distinct} distinct")
        parts.append(f"{extent - distinct} padding offsets ({PADDING})")
    parts.append(_overlap_text(desc))
    return ", ".join(parts)


def _memory_heading(desc: BufferTensorDesc, what: str, legend: str) -> str:
    bits = desc.element_bits
    if bits < 8:
        unit = f"offsets in {bits}-bit elements (nibbles), two per byte, low nibble first"
    else:
        unit = f"offsets in {bits}-bit elements, {bits // 8} byte{'s' if bits > 8 else ''} each"
    return f"memory view{what} ({unit}; {legend}):"


def _table(values: list[str], width: int, more: bool = False) -> list[str]:
    """``offset:``/``value:`` rows for offsets ``0 .. len(values) - 1``, wrapped every _ROW columns.

    Every column is ``width`` characters plus one space; an offset label starts
    above its column, and labels that would touch the previous one go on the
    next free ruler line.
    """
    lines: list[str] = []
    for start in range(0, len(values), _ROW):
        chunk = values[start : start + _ROW]
        last_chunk = start + _ROW >= len(values)
        rulers: list[list[str]] = []
        for k in range(len(chunk)):
            label = str(start + k)
            pos = k * (width + 1)
            for ruler in rulers:
                if pos > len(ruler):
                    break
            else:
                ruler = []
                rulers.append(ruler)
            ruler.extend(" " * (pos - len(ruler)))
            ruler.extend(label)
        value_row = " ".join(v.ljust(width) for v in chunk).rstrip()
        if more and last_chunk:
            pos = len(chunk) * (width + 1)
            if pos > len(rulers[0]):
                rulers[0].extend(" " * (pos - len(rulers[0])))
                rulers[0].extend("...")
            value_row += " ..."
        if lines:
            lines.append("")
        lines.append("offset: " + "".join(rulers[0]))
        lines.extend("        " + "".join(r) for r in rulers[1:])
        lines.append("value:  " + value_row)
    return lines


def _logical_rows(names: list[str], sizes: tuple[int, ...], width: int) -> list[str]:
    row = sizes[-1]
    slice_rows = sizes[-2] if len(sizes) >= 2 else 1
    lines: list[str] = []
    for r in range(len(names) // row):
        if r and len(sizes) >= 3 and r % slice_rows == 0:
            lines.append("")
        lines.append(" ".join(n.ljust(width) for n in names[r * row : (r + 1) * row]).rstrip())
    return lines


def _repeat_lines(desc: BufferTensorDesc, readers: dict[int, list[int]], names: dict[int, str]) -> list[str]:
    shared = [(off, flats) for off, flats in readers.items() if len(flats) > 1]
    lines = []
    for off, flats in shared[:_MAX_REPEAT_LINES]:
        shown = ", ".join(_index_text(_unravel(f, desc.sizes)) for f in flats[:_MAX_READERS])
        if len(flats) > _MAX_READERS:
            shown += ", ..."
        lines.append(f"repeats: {names[off]} at offset {off} is read by {len(flats)} elements {shown}")
    if len(shared) > _MAX_REPEAT_LINES:
        lines.append(f"repeats: ... and {len(shared) - _MAX_REPEAT_LINES} more shared offsets")
    return lines


# -- the full picture ------------------------------------------------------------------------


def _letter_offsets(
    flats_offsets: Iterable[tuple[int, int]],
) -> tuple[dict[int, list[int]], dict[int, str], int]:
    """Letter each distinct offset in order of first appearance.

    Returns the logical (flat) indices reading each offset, each offset's
    name, and the widest name's length.
    """
    readers: dict[int, list[int]] = {}
    for flat, off in flats_offsets:
        readers.setdefault(off, []).append(flat)
    names = {off: element_name(k) for k, off in enumerate(readers)}
    return readers, names, max(len(n) for n in names.values())


def _draw(desc: BufferTensorDesc, extent: int) -> list[str]:
    offsets = desc.offsets().tolist()
    readers, names, width = _letter_offsets(enumerate(offsets))
    memory = [names.get(off, PADDING) for off in range(extent)]
    lines = [_header(desc), _summary_line(desc, extent, len(names)), ""]
    lines.append("logical view:")
    lines.extend(_logical_rows([names[off] for off in offsets], desc.sizes, width))
    lines.append("")
    lines.append(_memory_heading(desc, "", f"{PADDING} = padding"))
    lines.extend(_table(memory, width))
    repeats = _repeat_lines(desc, readers, names)
    if repeats:
        lines.append("")
        lines.extend(repeats)
    return lines


# -- the summary of a large tensor -----------------------------------------------------------


def _spread(mask: np.ndarray, n: int, s: int) -> np.ndarray:
    """``out[k] = any(mask[k - i * s] for i in range(n))``, in O(len(mask) * log n)."""
    extent = len(mask)
    out = np.zeros_like(mask)
    block = mask.copy()  # covers shifts 0 .. length - 1
    length = 1
    done = 0  # out covers shifts 0 .. done - 1
    while n:
        if n & 1:
            d = done * s
            if d < extent:
                out[d:] |= block[: extent - d]
            done += length
        n >>= 1
        if n:
            d = length * s
            if d < extent:
                block[d:] |= block[: extent - d].copy()
            length *= 2
    return out


def _distinct_offsets(desc: BufferTensorDesc, extent: int) -> int | None:
    """Number of distinct element offsets, or None when that would be too costly to find."""
    if not desc.has_overlap:
        return desc.element_count
    dims = [(n, s) for n, s in zip(desc.sizes, desc.effective_strides) if n > 1 and s > 0]
    if not dims:
        return 1
    if len(dims) == sum(n > 1 for n in desc.sizes):
        reduced = desc  # nothing broadcast: dropping size-1 dimensions changes no answer
    else:
        reduced = type(desc)(desc.data_type, [n for n, _ in dims], [s for _, s in dims])
    if not reduced.has_overlap:
        return reduced.element_count
    if extent > _MASK_LIMIT:
        return None
    mask = np.zeros(extent, dtype=np.bool_)
    mask[0] = True
    for n, s in dims:
        mask = _spread(mask, n, s)
    return int(np.count_nonzero(mask))


def _reachable_below(desc: BufferTensorDesc, limit: int) -> set[int]:
    """The element offsets below ``limit`` that some element uses."""
    reach = {0}
    for n, s in zip(desc.sizes, desc.effective_strides):
        if n > 1 and s > 0:
            reach = {r + i * s for r in reach for i in range(min(n, (limit - 1 - r) // s + 1))}
    return reach


def _summarise(desc: BufferTensorDesc, extent: int, max_elements: int) -> list[str]:
    count = desc.element_count
    lines = [_header(desc), _summary_line(desc, extent, _distinct_offsets(desc, extent))]
    if count > max_elements:
        reason = f"{count} elements > max_elements = {max_elements}"
    else:
        reason = f"extent {extent} > 4 * max_elements = {4 * max_elements}"
    lines.append(f"too large to draw in full ({reason}); showing the first elements and offsets")
    lines.append("")

    listed = count if count <= max_elements else min(count, _PREVIEW_ELEMENTS)
    strides = desc.effective_strides
    flats_offsets = []
    for flat in range(listed):
        index = _unravel(flat, desc.sizes)
        flats_offsets.append((flat, sum(i * s for i, s in zip(index, strides))))
    readers, names, width = _letter_offsets(flats_offsets)

    if listed == count:
        lines.append("logical view:")
        lines.extend(_logical_rows([names[off] for _, off in flats_offsets], desc.sizes, width))
    else:
        lines.append(f"first {listed} of {count} elements, in logical order:")
        for flat, off in flats_offsets:
            lines.append(f"{names[off]} = {_index_text(_unravel(flat, desc.sizes))} at offset {off}")
        lines.append("...")
    lines.append("")

    shown = min(extent, _PREVIEW_OFFSETS)
    used = _reachable_below(desc, shown)
    memory = [names.get(off, LATER if off in used else PADDING) for off in range(shown)]
    legend = f"{PADDING} = padding"
    if LATER in memory:
        legend += f", {LATER} = used by an element not listed"
    what = "" if shown == extent else f", first {shown} of {extent} offsets"
    lines.append(_memory_heading(desc, what, legend))
    lines.extend(_table(memory, width, more=shown < extent))
    if listed == count:
        repeats = _repeat_lines(desc, readers, names)
        if repeats:
            lines.append("")
            lines.extend(repeats)
    return lines
