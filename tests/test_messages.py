"""Error messages read as English and say what to change: counts agree with their nouns, nothing
lists UNKNOWN as a choice, and no message blames a field the caller did not pass."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import BufferTensorDesc, DescriptorError
from dmlstride._explain import MAX_DRAWN_ELEMENTS
from dmlstride.cli import main


def _message(call) -> str:
    with pytest.raises(Exception) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda: BufferTensorDesc("uint8", [2, 3], strides=[1]),
         "strides has 1 entry; expected 2, one per dimension (sizes has 2)"),
        (lambda: BufferTensorDesc("uint8", [2, 3, 4], strides=[1, 1]),
         "strides has 2 entries; expected 3, one per dimension (sizes has 3)"),
        (lambda: BufferTensorDesc("uint8", [2] * 9),
         "sizes has 9 entries; expected 1 to 8 (a buffer tensor's dimension_count is 1 to 8)"),
        (lambda: BufferTensorDesc("uint8", [2, 3]).offset_of((1,)),
         "index has 1 entry; expected 2, one per dimension"),
        (lambda: ds.calculate_strides("HW", [2, 3], [True]), "broadcast has 1 entry; expected 2, one per dimension"),
        (lambda: ds.calculate_strides("HW", [2, 3], [True] * 3),
         "broadcast has 3 entries; expected 2, one per dimension"),
        (lambda: BufferTensorDesc("uint8", [4], guaranteed_base_offset_alignment=3),
         "guaranteed_base_offset_alignment is 3; expected 0 (no promise) or a power of two from the "
         "element size (1 byte) to 2**31"),
        (lambda: BufferTensorDesc("float16", [4], guaranteed_base_offset_alignment=1),
         "guaranteed_base_offset_alignment is 1; expected 0 (no promise) or a power of two from the "
         "element size (2 bytes) to 2**31"),
        (lambda: ds.broadcast_strides([3], [2, 1]),
         "physical_sizes (3,) do not broadcast to sizes (2, 1): aligned from the right, physical_sizes[0] "
         "is 3 where sizes[1] is 1; expected 1"),
        (lambda: ds.broadcast_strides([3, 4], [2, 5, 4]),
         "physical_sizes (3, 4) do not broadcast to sizes (2, 5, 4): aligned from the right, "
         "physical_sizes[0] is 3 where sizes[1] is 5; expected 1 (to broadcast) or 5"),
        (lambda: ds.data_type(99), "data_type 99 is not a DirectML data type; expected 1 (FLOAT32) to 13 (INT4)"),
        (lambda: ds.calculate_strides("ABCDEF", [1] * 6),
         "layout 'ABCDEF' is a name, but a rank-6 tensor has no dimension letters; give its axes from "
         "slowest to fastest in memory as a tuple of indices, e.g. (0, 1, 2, 3, 4, 5)"),
    ],
)
def test_messages(call, expected):
    assert _message(call) == expected


def test_an_unknown_name_lists_only_the_valid_types():
    message = _message(lambda: ds.data_type("float31"))
    assert message.startswith("data_type 'float31' is not a DirectML data type name or numpy dtype; expected one of ")
    assert "unknown" not in message.lower()
    for t in ds.TensorDataType:
        if t is not ds.TensorDataType.UNKNOWN:
            assert re.search(rf"\b{t.name.lower()}\b", message), t


def test_a_size_beyond_a_uint64_does_not_blame_a_total_the_caller_never_gave():
    d = 2**32 - 1
    message = _message(lambda: BufferTensorDesc("float64", [d], strides=[d], **_no_limits()))
    last = (d - 1) * d
    size = -(-(last + 1) * 8 // 4) * 4  # (last + 1) float64 elements, rounded up to 4 bytes
    assert message == (
        f"sizes ({d},) with strides ({d},) put the last element at offset {last}, so the tensor needs "
        f"{size} bytes (its minimum implied size), but total_tensor_size_in_bytes is a UINT64 and must "
        "be below 2**64; use smaller strides or sizes"
    )
    assert "cannot be below" not in message


def _no_limits() -> dict[str, bool]:
    """Lift DirectML's element limits where the constructor can (they would refuse first)."""
    import inspect

    params = inspect.signature(BufferTensorDesc).parameters
    return {"directml_limits": False} if "directml_limits" in params else {}


def test_a_non_contiguous_numpy_view_points_at_view_source():
    a = np.zeros((4, 4), np.float32)[:, :2]
    with pytest.raises(BufferError) as info:
        ds.gather(a, BufferTensorDesc.from_numpy(a))
    assert "not a contiguous buffer" in str(info.value)
    assert "dmlstride.view_source(view)" in str(info.value)


def test_cli_flag_counts(capsys):
    assert main(["describe", "--dtype", "uint8", "--sizes", "2,3", "--broadcast", "1"]) == 2
    err = capsys.readouterr().err
    assert "has 1 flag; expected 2, one per dimension" in err
    assert main(["describe", "--dtype", "uint8", "--sizes", "2", "--broadcast", "1,0"]) == 2
    assert "has 2 flags; expected 1, one per dimension" in capsys.readouterr().err


def test_explain_states_its_cap():
    for doc in (BufferTensorDesc.explain.__doc__, ds._explain.explain.__doc__):
        assert str(MAX_DRAWN_ELEMENTS) in doc and "1 to" in doc
    d = BufferTensorDesc("uint8", [MAX_DRAWN_ELEMENTS])
    assert "too large to draw" not in d.explain(MAX_DRAWN_ELEMENTS)
    with pytest.raises(ValueError, match=str(MAX_DRAWN_ELEMENTS)):
        d.explain(MAX_DRAWN_ELEMENTS + 1)
