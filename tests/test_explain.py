"""BufferTensorDesc.explain(): pictures of logical and memory views.

The golden pictures are worked out by hand from DirectML's documented drawings and the
drawing rules: one name per distinct offset in order of first appearance in
logical C order; the memory view covers offsets 0 .. E - 1 with
E = max(last_offset + 1, size * stride over dims with stride > 0); padding is x;
columns are one name wide, offset labels that do not fit go on extra ruler lines.
"""

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlstride._explain as ex
from dmlstride import BufferTensorDesc

U8 = "memory view (offsets in 8-bit elements, 1 byte each; x = padding):"
F32 = "memory view (offsets in 32-bit elements, 4 bytes each; x = padding):"
PREFIX = 8  # len("offset: ") == len("value:  ")


def ruler(*labels_at):
    """A continuation ruler line: (column, label) pairs, column counted from 0."""
    line = ""
    for col, label in labels_at:
        pos = PREFIX + 2 * col
        line += " " * (pos - len(line)) + label
    return line


def section(text, title):
    """Lines after the line ``title`` up to the next blank line."""
    lines = text.split("\n")
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def logical_view(text):
    """Lines of the logical view, blank lines between slices included."""
    lines = text.split("\n")
    start = lines.index("logical view:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("memory view"))
    return lines[start : end - 1]  # a blank line ends the section


def value_tokens(text):
    """Tokens of every value: row, in order (a wrapped table has several)."""
    out = []
    for line in text.split("\n"):
        if line.startswith("value:"):
            out.extend(line.split()[1:])
    return out


# -- DirectML's documented examples, drawn in full --------------------------------------------------


def test_row_major_2x3():
    d = BufferTensorDesc("uint8", [2, 3])
    assert d.explain() == "\n".join(
        [
            "UINT8 tensor, sizes [2, 3], strides packed (implicit) = [3, 1]: packed, layout HW",
            "summary: 6 elements, element offsets 0..5 (extent 6), 0 padding offsets (x), no overlap",
            "",
            "logical view:",
            "A B C",
            "D E F",
            "",
            U8,
            "offset: 0 1 2 3 4 5",
            "value:  A B C D E F",
        ]
    )


def test_column_major_2x3():
    # Seed: offsets 0..5 hold A D B E C F; the logical view is still A B C / D E F.
    d = BufferTensorDesc("uint8", [2, 3], strides=[1, 2])
    assert d.explain() == "\n".join(
        [
            "UINT8 tensor, sizes [2, 3], strides [1, 2]: packed, layout WH",
            "summary: 6 elements, element offsets 0..5 (extent 6), 0 padding offsets (x), no overlap",
            "",
            "logical view:",
            "A B C",
            "D E F",
            "",
            U8,
            "offset: 0 1 2 3 4 5",
            "value:  A D B E C F",
        ]
    )


def test_dhw_2x2x3():
    # Seed: two 2x3 slices separated by a blank line; memory A..L in order.  Offsets 10
    # and 11 are two characters wide: 11 would touch 10, so it goes on a second ruler line.
    d = BufferTensorDesc("uint8", [2, 2, 3])
    assert d.explain() == "\n".join(
        [
            "UINT8 tensor, sizes [2, 2, 3], strides packed (implicit) = [6, 3, 1]: packed, layout DHW",
            "summary: 12 elements, element offsets 0..11 (extent 12), 0 padding offsets (x), no overlap",
            "",
            "logical view:",
            "A B C",
            "D E F",
            "",
            "G H I",
            "J K L",
            "",
            U8,
            "offset: 0 1 2 3 4 5 6 7 8 9 10",
            ruler((11, "11")),
            "value:  A B C D E F G H I J K L",
        ]
    )
    assert "A B C\nD E F\n\nG H I\nJ K L" in d.explain()
    assert "A B C D E F G H I J K L" in d.explain()


def test_broadcast_2x3_over_3_elements():
    # Seed: logically A B C / A B C, stored as the 3 elements A B C with a height stride of 0.
    d = BufferTensorDesc("uint8", [2, 3], strides=[0, 1])
    assert d.explain() == "\n".join(
        [
            "UINT8 tensor, sizes [2, 3], strides [0, 1]: broadcast, overlapping",
            "summary: 6 elements, element offsets 0..2 (extent 3), 3 distinct, 0 padding offsets (x), "
            "overlap (broadcast along dimension 0)",
            "",
            "logical view:",
            "A B C",
            "A B C",
            "",
            U8,
            "offset: 0 1 2",
            "value:  A B C",
            "",
            "repeats: A at offset 0 is read by 2 elements (0, 0), (1, 0)",
            "repeats: B at offset 1 is read by 2 elements (0, 1), (1, 1)",
            "repeats: C at offset 2 is read by 2 elements (0, 2), (1, 2)",
        ]
    )


def test_padded_2x3_stride_5():
    # Seed: the buffer A B C x x D E F x x with a height stride of 5; E = max(7 + 1, 2 * 5) = 10.
    d = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    text = d.explain()
    assert text == "\n".join(
        [
            "UINT8 tensor, sizes [2, 3], strides [5, 1]: padded",
            "summary: 6 elements, element offsets 0..9 (extent 10), 4 padding offsets (x), no overlap",
            "",
            "logical view:",
            "A B C",
            "D E F",
            "",
            U8,
            "offset: 0 1 2 3 4 5 6 7 8 9",
            "value:  A B C x x D E F x x",
        ]
    )
    assert [line for line in text.split("\n") if line.startswith("value:")] == ["value:  A B C x x D E F x x"]


def test_nhwc_1x1x3x5():
    # Seed: 2-D height 3, width 5 as 4-D NHWC, strides {15, 1, 5, 1}: offset = 5h + w.
    d = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 1, 5, 1])
    assert d.explain() == "\n".join(
        [
            "FLOAT32 tensor, sizes [1, 1, 3, 5], strides [15, 1, 5, 1]: packed, layout NHWC",
            "summary: 15 elements, element offsets 0..14 (extent 15), 0 padding offsets (x), no overlap",
            "",
            "logical view:",
            "A B C D E",
            "F G H I J",
            "K L M N O",
            "",
            F32,
            "offset: 0 1 2 3 4 5 6 7 8 9 10  12  14",
            ruler((11, "11"), (13, "13")),
            "value:  A B C D E F G H I J K L M N O",
        ]
    )


def test_nchw_implicit_and_explicit_draw_the_same_views():
    implicit = BufferTensorDesc("float32", [1, 1, 3, 5]).explain().split("\n")
    explicit = BufferTensorDesc("float32", [1, 1, 3, 5], strides=[15, 15, 5, 1]).explain().split("\n")
    assert implicit[0] == (
        "FLOAT32 tensor, sizes [1, 1, 3, 5], strides packed (implicit) = [15, 15, 5, 1]: packed, layout NCHW"
    )
    assert explicit[0] == "FLOAT32 tensor, sizes [1, 1, 3, 5], strides [15, 15, 5, 1]: packed, layout NCHW"
    assert implicit[1:] == explicit[1:]


# -- other shapes, worked by hand --------------------------------------------------------


def test_overlap_without_broadcast():
    # strides {1, 1} on 2x2: (0,0)->0 A, (0,1)->1 B, (1,0)->1 B again, (1,1)->2 C.
    d = BufferTensorDesc("uint8", [2, 2], strides=[1, 1])
    text = d.explain()
    assert text.split("\n")[0] == "UINT8 tensor, sizes [2, 2], strides [1, 1]: overlapping"
    assert section(text, "logical view:") == ["A B", "B C"]
    assert "offset: 0 1 2\nvalue:  A B C" in text
    assert text.endswith("\n\nrepeats: B at offset 1 is read by 2 elements (0, 1), (1, 0)")
    assert "overlap (distinct elements share offsets)" in text


def test_one_dimensional_with_gaps():
    # [4] strides [2]: last offset 6, but 4 * 2 = 8, so offsets 0..7 with a trailing x.
    text = BufferTensorDesc("uint8", [4], strides=[2]).explain()
    assert section(text, "logical view:") == ["A B C D"]
    assert "offset: 0 1 2 3 4 5 6 7\nvalue:  A x B x C x D x" in text
    assert "4 padding offsets (x)" in text


def test_trailing_padding_of_a_size_one_dimension_is_shown():
    # [1, 3] strides [5, 1]: E = max(2 + 1, 1 * 5) = 5; no gaps inside, so still "packed".
    text = BufferTensorDesc("uint8", [1, 3], strides=[5, 1]).explain()
    assert text.split("\n")[0].endswith("strides [5, 1]: packed")
    assert "value:  A B C x x" in text


def test_four_dimensional_slices_are_separated_by_blank_lines():
    text = BufferTensorDesc("uint8", [2, 2, 1, 2]).explain()
    assert "logical view:\nA B\n\nC D\n\nE F\n\nG H\n\n" in text


def test_channel_broadcast_nchw():
    # NCHW 1x2x2x2 with C stride 0: both channels read the same 4 values A B C D.
    d = BufferTensorDesc("uint8", [1, 2, 2, 2], strides=[4, 0, 2, 1])
    text = d.explain()
    assert "logical view:\nA B\nC D\n\nA B\nC D\n" in text
    assert "value:  A B C D" in text
    assert "repeats: D at offset 3 is read by 2 elements (0, 0, 1, 1), (0, 1, 1, 1)" in text
    assert "overlap (broadcast along dimension 1)" in text


def test_many_readers_and_many_repeats_are_cut_short():
    text = BufferTensorDesc("uint8", [10, 2], strides=[0, 1]).explain()
    assert "repeats: A at offset 0 is read by 10 elements (0, 0), (1, 0), (2, 0), (3, 0), ...\n" in text
    text = BufferTensorDesc("uint8", [2, 20], strides=[0, 1]).explain()
    repeats = [line for line in text.split("\n") if line.startswith("repeats:")]
    assert len(repeats) == 9
    assert repeats[-1] == "repeats: ... and 12 more shared offsets"


def test_four_bit_offsets_are_nibbles():
    text = BufferTensorDesc("uint4", [2, 3], strides=[5, 1]).explain()
    assert "memory view (offsets in 4-bit elements (nibbles), two per byte, low nibble first; x = padding):" in text
    assert "value:  A B C x x D E F x x" in text
    assert "nibble" in BufferTensorDesc("int4", [3]).explain()
    assert "nibble" not in BufferTensorDesc("uint8", [3]).explain()


def test_element_names():
    names = [ex.element_name(i) for i in range(51)]
    assert names[:26] == [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    assert names[26:] == [chr(c) for c in range(ord("a"), ord("z") + 1) if chr(c) != "x"]
    assert [ex.element_name(i) for i in (51, 52, 101, 102)] == ["AA", "AB", "Az", "BA"]
    assert ex.element_name(51 + 51 * 51) == "AAA"
    with pytest.raises(ValueError):
        ex.element_name(-1)


def test_more_than_51_offsets_use_two_letter_columns():
    # 60 elements: A..Z, a..z without x (51 names), then AA..AI; columns become 2 wide.
    text = BufferTensorDesc("uint8", [60]).explain()
    expected = [ex.element_name(i) for i in range(60)]
    assert value_tokens(text) == expected
    assert "value:  A  B  C  D" in text
    assert section(text, "logical view:") == [" ".join(n.ljust(2) for n in expected).rstrip()]


def test_long_memory_rows_wrap_every_32_offsets():
    text = BufferTensorDesc("uint8", [40]).explain()
    lines = text.split("\n")
    assert [line for line in lines if line.startswith("offset:")][1].startswith("offset: 32  34")
    assert len(value_tokens(text)) == 40


# -- every picture agrees with offsets() ---------------------------------------------------


@st.composite
def small_descs(draw):
    rank = draw(st.integers(1, 4))
    sizes = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    strides = draw(st.none() | st.lists(st.integers(0, 9), min_size=rank, max_size=rank))
    dtype = draw(st.sampled_from(["uint8", "float16", "int4", "float64"]))
    return BufferTensorDesc(dtype, sizes, strides)


@given(small_descs())
def test_picture_matches_offsets(d):
    offsets = d.offsets().tolist()
    first = list(dict.fromkeys(offsets))  # distinct offsets in order of first appearance
    name = {off: ex.element_name(k) for k, off in enumerate(first)}
    width = max(len(n) for n in name.values())
    extent = max([d.last_offset + 1] + [n * s for n, s in zip(d.sizes, d.effective_strides) if s > 0])
    text = d.explain(max_elements=256)
    lines = text.split("\n")

    # logical view: names in C order, one row per run of the last dimension
    rows = logical_view(text)
    assert [t for row in rows for t in row.split()] == [name[o] for o in offsets]
    row_count = len(offsets) // d.sizes[-1]
    slices = row_count // d.sizes[-2] if d.dimension_count >= 3 else 1
    assert len(rows) == row_count + slices - 1
    assert all(len(row.split()) == d.sizes[-1] for row in rows if row)

    # memory view: a name per used offset, x elsewhere, each under its own offset label
    assert value_tokens(text) == [name.get(o, "x") for o in range(extent)]
    for i, line in enumerate(lines):
        if not line.startswith("value:"):
            continue
        j = i - 1
        rulers = []
        while not lines[j].startswith("offset:"):
            rulers.append(lines[j])
            j -= 1
        rulers.append(lines[j])
        labels = {}
        for r in rulers:
            for pos in range(PREFIX, len(r)):
                if r[pos] != " " and (pos == PREFIX or r[pos - 1] == " "):
                    labels[pos] = r[pos:].split()[0]
        for pos, token in labels.items():
            assert (pos - PREFIX) % (width + 1) == 0
            assert line[pos:].split()[0] == name.get(int(token), "x")

    # repeats: one line per shared offset (up to the limit)
    shared = sum(1 for o in first if offsets.count(o) > 1)
    assert sum(1 for line in lines if line.startswith("repeats:")) == min(shared, 8) + (shared > 8)
    assert f"{extent - len(first)} padding offsets (x)" in lines[1]


# -- summaries of large tensors ------------------------------------------------------------


def test_huge_tensor_is_summarised_quickly(monkeypatch):
    def refuse(self):
        raise AssertionError("offsets() must not be called on a huge tensor")

    monkeypatch.setattr(BufferTensorDesc, "offsets", refuse)
    d = BufferTensorDesc("float32", [65535, 65535])
    start = time.perf_counter()
    text = d.explain()
    assert time.perf_counter() - start < 1.0
    lines = text.split("\n")
    assert len(lines) < 40
    assert lines[0] == "FLOAT32 tensor, sizes [65535, 65535], strides packed (implicit) = [65535, 1]: packed, layout HW"
    # 65535**2 = 4294836225 elements, packed: offsets 0..4294836224, no padding
    assert lines[1] == (
        "summary: 4294836225 elements, element offsets 0..4294836224 (extent 4294836225), "
        "0 padding offsets (x), no overlap"
    )
    assert "A = (0, 0) at offset 0" in lines
    assert "H = (0, 7) at offset 7" in lines
    assert "I = (0, 8) at offset 8" not in lines
    assert "value:  A B C D E F G H . . . . . . . . ..." in lines
    assert "..." in lines


def test_largest_element_count_is_summarised(monkeypatch):
    monkeypatch.setattr(BufferTensorDesc, "offsets", None)
    text = BufferTensorDesc("uint8", [2**32 - 1]).explain()
    assert "summary: 4294967295 elements, element offsets 0..4294967294" in text
    assert "A = (0) at offset 0" in text


def test_huge_column_major_preview_marks_later_elements():
    # Strides [1, 65535]: elements (0, j) sit at 65535 * j, so offsets 1..15 belong to
    # elements (1, 0), (2, 0), ... that the preview does not list.
    text = BufferTensorDesc("uint8", [65535, 65535], strides=[1, 65535]).explain()
    assert "B = (0, 1) at offset 65535" in text
    assert "value:  A . . . . . . . . . . . . . . . ..." in text
    assert ". = used by an element not listed" in text


def test_huge_overlap_counts_distinct_offsets():
    # strides [1, 1]: offsets i + j take every value 0..131068, so nothing is padding.
    text = BufferTensorDesc("uint8", [65535, 65535], strides=[1, 1]).explain()
    assert "element offsets 0..131068 (extent 131069), 131069 distinct, 0 padding offsets (x)" in text


def test_huge_broadcast_counts_distinct_offsets_without_enumerating(monkeypatch):
    monkeypatch.setattr(BufferTensorDesc, "offsets", None)
    text = BufferTensorDesc("uint8", [100000, 50, 20], strides=[0, 20, 1]).explain()
    assert "element offsets 0..999 (extent 1000), 1000 distinct, 0 padding offsets (x)" in text
    assert "overlap (broadcast along dimension 0)" in text


def test_summary_padding_count_matches_brute_force():
    d = BufferTensorDesc("uint8", [300, 70], strides=[7, 3])
    distinct = len(np.unique(d.offsets()))
    extent = 299 * 7 + 69 * 3 + 1
    assert extent == 2301
    text = d.explain(max_elements=16)
    assert f"{distinct} distinct, {extent - distinct} padding offsets (x)" in text
    # the first offsets: 0, 3, 6 are (0, j); 7 is (1, 0), not listed; 1, 2, 4, 5 are padding
    assert "value:  A x x B x x C . x D . x E . . F ..." in text


def test_few_elements_far_apart_are_summarised_with_their_logical_view():
    text = BufferTensorDesc("uint8", [2, 3], strides=[1000, 1]).explain()
    assert "extent 2000 > 4 * max_elements = 256" in text
    assert section(text, "logical view:") == ["A B C", "D E F"]
    assert "value:  A B C x x x x x x x x x x x x x ..." in text
    assert "1994 padding offsets (x)" in text


def test_max_elements_decides_between_picture_and_summary():
    d = BufferTensorDesc("uint8", [2, 3], strides=[5, 1])
    assert "too large" in d.explain(max_elements=5)
    assert "too large" not in d.explain(max_elements=6)
    assert "too large" in d.explain(max_elements=2)  # extent 10 > 4 * 2


@pytest.mark.parametrize("bad", ["64", 1.5, True, None])
def test_max_elements_must_be_an_integer(bad):
    with pytest.raises(TypeError, match="max_elements"):
        BufferTensorDesc("uint8", [2]).explain(bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_max_elements_must_be_positive(bad):
    with pytest.raises(ValueError, match="max_elements"):
        BufferTensorDesc("uint8", [2]).explain(bad)


def test_max_elements_is_bounded():
    # A drawing is for reading: asking to draw millions of elements is refused, not attempted.
    desc = BufferTensorDesc("uint8", [20000, 1000])
    with pytest.raises(ValueError, match="max_elements"):
        desc.explain(10**9)
    assert "summar" in desc.explain(4096).lower()
