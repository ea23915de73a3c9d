"""Which buffer formats the engine moves bytes for.

Only plain data: every code of the exported format must be a number, bool,
character, fixed-size string or padding.  Python object references (``O``)
and pointers (``P``, ``&``, ``X``, ctypes' ``z``/``Z``) are refused, and so is
any code the engine does not know.  The object and pointer buffers themselves
are exercised, in a child interpreter, by ``test_bad_inputs.py``.
"""

from __future__ import annotations

import array
import ctypes
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dmlstride import BufferTensorDesc, gather
from dmlstride._engine import buffer_format_kind

PLAIN_CODES = "xcbB?hHiIlLqQnNefdgspuw"
ORDER = "@=<>!^"


@pytest.mark.parametrize("dtype", ["u1", "i1", "<u2", ">i4", "<f2", "<f4", "f8", "c8", "c16", "g", "?", "S5",
                                   "U3", "V8", "f4,i2", "(2,3)f4", "u1,(2,)f8", [("O", "f4"), ("x", "u1")]])
def test_numpy_plain_formats(dtype):
    fmt = memoryview(np.zeros(2, dtype=dtype)).format
    assert buffer_format_kind(fmt.encode()) == "plain", fmt


@pytest.mark.parametrize("code", list("bBhHiIlLqQnNfde?c") + ["5s", "3x"])
def test_struct_module_codes_are_plain(code):
    struct.calcsize(code)   # a real struct-module format
    assert buffer_format_kind(code.encode()) == "plain"


@pytest.mark.parametrize("fmt, kind", [
    (b"O", "objects"), (b"<O", "objects"), (b"T{f:x:O:o:}", "objects"), (b"T{f:x:(2)O:o:}", "objects"),
    (b"T{<i:a:T{<O:inner:}:s:}", "objects"), (b"T{P:p:O:o:}", "objects"),
    (b"P", "pointers"), (b"<P", "pointers"), (b"&<i", "pointers"), (b"X{}", "pointers"), (b"<z", "pointers"),
    (b"<Z", "pointers"), (b"T{<i:a:<P:p:}", "pointers"),
    (b"t", "unknown"), (b"T{<i:a:<t:b:}", "unknown"), (b"y", "unknown"), (b"T{<i:unterminated", "unknown"),
    (b"\xff", "unknown"),
    (b"Zf", "plain"), (b"<Zd", "plain"), (b"T{<f:Opacity:<O:o:}", "objects"), (b"T{<f:Opacity:}", "plain"),
    (b"", "plain"),
])
def test_format_kinds(fmt, kind):
    assert buffer_format_kind(fmt) == kind


# A reference grammar: a sequence of items, each an optional byte order, an
# optional count or shape, and a code; structures nest items and name fields.
def _items(depth: int) -> st.SearchStrategy[str]:
    code = st.sampled_from(list(PLAIN_CODES) + ["Zf", "Zd", "Zg"])
    if depth > 0:
        code = code | st.lists(st.tuples(_items(depth - 1), st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}",
                                                                          fullmatch=True)),
                               min_size=1, max_size=3).map(lambda fs: "T{" + "".join(f"{i}:{n}:" for i, n in fs) + "}")
    count = st.sampled_from(["", "2", "16", "(2)", "(2,3)"])
    item = st.tuples(st.sampled_from(["", *ORDER]), count, code).map("".join)
    return st.lists(item, min_size=1, max_size=4).map("".join)


@given(_items(2), st.data())
def test_plain_grammar(fmt, data):
    """Plain formats (field names included, whatever their letters) pass; one bad code anywhere is refused."""
    assert buffer_format_kind(fmt.encode()) == "plain", fmt
    cut = data.draw(st.integers(0, len(fmt)))
    # Insert at an item boundary only if the cut is not inside a field name.
    inside_name = fmt[:cut].count(":") % 2 == 1
    bad, kind = data.draw(st.sampled_from([("O", "objects"), ("P", "pointers"), ("&B", "pointers"),
                                           ("t", "unknown")]))
    if not inside_name:
        got = buffer_format_kind((fmt[:cut] + bad + fmt[cut:]).encode())
        # An object code always wins; any other bad code is refused, as whichever kind the
        # neighbouring codes make it (a "t" between "Z" and "f" leaves a bare "Z", ctypes' wchar_t*).
        assert got == "objects" if kind == "objects" else got != "plain", (fmt, cut, bad, got)


def test_plain_buffers_of_every_kind_still_gather():
    d = BufferTensorDesc("uint8", [4])
    class Plain(ctypes.Union):
        _fields_ = [("i", ctypes.c_uint32), ("f", ctypes.c_float)]
    plain = [bytes(16), bytearray(16), np.zeros(4, "f4"), np.zeros(2, "M8[ns]"), np.zeros(2, "f4,i4"),
             array.array("d", [0, 0]), (ctypes.c_double * 2)(), (Plain * 4)(), memoryview(bytearray(16)).cast("d"),
             memoryview(np.zeros(4, "f4")).cast("B"), np.zeros(4, "f4").view(np.recarray)]
    for buf in plain:
        assert gather(buf, d).tolist() == [0, 0, 0, 0], type(buf)
