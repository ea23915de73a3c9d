"""Tests for the data-type table, flags, limits and the data-type conversions.

Covers ``TensorDataType``, ``TensorFlags``, the module constants, ``data_type``,
``element_bits``, ``element_bytes`` and ``numpy_dtype`` against DirectML's data-type table.
"""

import enum

import numpy as np
import pytest

import dmlstride
from dmlstride import (
    MAX_DIMENSION_COUNT,
    MAX_ELEMENT_COUNT,
    MINIMUM_BUFFER_TENSOR_ALIGNMENT,
    DescriptorError,
    TensorDataType,
    TensorFlags,
    data_type,
    element_bits,
    element_bytes,
    numpy_dtype,
)

# DirectML's DML_TENSOR_DATA_TYPE, transcribed: value -> (name, bits).
DML_TYPE_TABLE = {
    0: ("UNKNOWN", None),
    1: ("FLOAT32", 32),
    2: ("FLOAT16", 16),
    3: ("UINT32", 32),
    4: ("UINT16", 16),
    5: ("UINT8", 8),
    6: ("INT32", 32),
    7: ("INT16", 16),
    8: ("INT8", 8),
    9: ("FLOAT64", 64),
    10: ("UINT64", 64),
    11: ("INT64", 64),
    12: ("UINT4", 4),
    13: ("INT4", 4),
}

# The numpy type holding one unpacked element of each valid type.
NUMPY_TWIN = {
    "FLOAT32": np.float32,
    "FLOAT16": np.float16,
    "UINT32": np.uint32,
    "UINT16": np.uint16,
    "UINT8": np.uint8,
    "INT32": np.int32,
    "INT16": np.int16,
    "INT8": np.int8,
    "FLOAT64": np.float64,
    "UINT64": np.uint64,
    "INT64": np.int64,
    "UINT4": np.uint8,
    "INT4": np.int8,
}

VALID_NAMES = [name for name, bits in DML_TYPE_TABLE.values() if bits is not None]
BYTE_SIZED = [name for name in VALID_NAMES if DML_TYPE_TABLE[TensorDataType[name].value][1] >= 8]


# -- the enums and constants ------------------------------------------------------------


def test_tensor_data_type_is_int_enum_with_directml_values():
    assert issubclass(TensorDataType, enum.IntEnum)
    assert {m.value: m.name for m in TensorDataType} == {v: n for v, (n, _) in DML_TYPE_TABLE.items()}
    assert len(TensorDataType) == 14
    assert TensorDataType.UNKNOWN == 0
    assert TensorDataType.INT4 == 13


def test_tensor_flags_is_int_flag():
    assert issubclass(TensorFlags, enum.IntFlag)
    assert TensorFlags.NONE == 0
    assert TensorFlags.OWNED_BY_DML == 1
    assert {m.name for m in TensorFlags} >= {"OWNED_BY_DML"}
    assert TensorFlags(0) is TensorFlags.NONE


def test_constants():
    assert MAX_DIMENSION_COUNT == 8
    assert MINIMUM_BUFFER_TENSOR_ALIGNMENT == 16
    assert MAX_ELEMENT_COUNT == 2**32 - 1


def test_descriptor_error_is_a_value_error():
    assert issubclass(DescriptorError, ValueError)
    with pytest.raises(ValueError):
        data_type(99)


def test_public_names_exported():
    for name in (
        "TensorDataType",
        "TensorFlags",
        "MAX_DIMENSION_COUNT",
        "MINIMUM_BUFFER_TENSOR_ALIGNMENT",
        "MAX_ELEMENT_COUNT",
        "DescriptorError",
        "data_type",
        "element_bits",
        "numpy_dtype",
        "calc_buffer_tensor_size",
        "calculate_strides",
        "broadcast_strides",
        "BufferTensorDesc",
    ):
        assert name in dmlstride.__all__
        assert hasattr(dmlstride, name)


# -- data_type: accepted forms ----------------------------------------------------------


@pytest.mark.parametrize("member", list(TensorDataType))
def test_data_type_member_and_value(member):
    assert data_type(member) is member
    assert data_type(int(member)) is member
    assert data_type(np.int64(member.value)) is member
    assert data_type(np.uint8(member.value)) is member


@pytest.mark.parametrize("member", list(TensorDataType))
def test_data_type_name_any_case(member):
    name = member.name
    for spelling in (name, name.lower(), name.capitalize(), name.swapcase()):
        assert data_type(spelling) is member


def test_data_type_name_examples():
    assert data_type("float16") is TensorDataType.FLOAT16
    assert data_type("Int4") is TensorDataType.INT4
    assert data_type("uint4") is TensorDataType.UINT4


@pytest.mark.parametrize("name", BYTE_SIZED)
def test_data_type_numpy_forms(name):
    expected = TensorDataType[name]
    scalar = NUMPY_TWIN[name]
    dt = np.dtype(scalar)
    assert data_type(scalar) is expected
    assert data_type(dt) is expected
    assert data_type(dt.name) is expected
    assert data_type(dt.str) is expected  # "<f4", "|u1", ...
    assert data_type(dt.char) is expected
    assert data_type(dt.newbyteorder("<")) is expected


def test_data_type_numpy_examples():
    assert data_type(np.float32) is TensorDataType.FLOAT32
    assert data_type("uint8") is TensorDataType.UINT8
    assert data_type(np.dtype("f2")) is TensorDataType.FLOAT16
    assert data_type(np.intc) is TensorDataType.INT32
    assert data_type(float) is TensorDataType.FLOAT64
    assert data_type(np.zeros(2, np.int16).dtype) is TensorDataType.INT16


def test_data_type_returns_the_enum_type():
    for x in (1, "float32", np.float32, np.dtype("u1")):
        assert type(data_type(x)) is TensorDataType


# -- data_type: refusals ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [None, 1.0, 2.5, True, False, np.True_, [1], (1,), object(), b"float32", 1j,
     np.float32(1.0), np.timedelta64(1, "s"), np.datetime64(1, "s")],
)  # fmt: skip
def test_data_type_wrong_type(bad):
    with pytest.raises(TypeError):
        data_type(bad)


def test_data_type_array_is_a_type_error():
    # An array is neither a data type nor a dtype-like; it must not be compared elementwise.
    with pytest.raises(TypeError):
        data_type(np.zeros(3))
    with pytest.raises(TypeError):
        data_type(np.zeros(3, np.float32))


@pytest.mark.parametrize("bad", [14, 15, -1, 2**32, 255])
def test_data_type_unknown_value(bad):
    with pytest.raises(DescriptorError, match="data_type"):
        data_type(bad)


@pytest.mark.parametrize(
    "bad",
    ["float8", "bfloat16", "", "  ", "nope", "bool", "complex64", "U3", "O", "f4,,", "(", "f4,i4"],
)
def test_data_type_unknown_name(bad):
    with pytest.raises(DescriptorError, match="data_type"):
        data_type(bad)


@pytest.mark.parametrize("bad", [np.bool_, bool, complex, np.complex64, np.dtype("U2"), np.dtype("f4,i4")])
def test_data_type_numpy_without_directml_twin(bad):
    with pytest.raises(DescriptorError, match="data_type"):
        data_type(bad)


@pytest.mark.parametrize("bad", [">f4", ">i2", np.dtype(">f8"), np.dtype(">u4")])
def test_data_type_big_endian_refused(bad):
    with pytest.raises(DescriptorError, match="big-endian"):
        data_type(bad)


# -- element_bits, element_bytes, numpy_dtype -------------------------------------------


@pytest.mark.parametrize("value", [v for v, (_, bits) in DML_TYPE_TABLE.items() if bits is not None])
def test_element_bits_table(value):
    name, bits = DML_TYPE_TABLE[value]
    assert element_bits(value) == bits
    assert element_bits(name.lower()) == bits
    assert element_bits(TensorDataType(value)) == bits
    assert type(element_bits(value)) is int
    assert element_bytes(value) == max(1, bits // 8)


def test_element_bits_examples():
    assert element_bits("float16") == 16
    assert element_bits(TensorDataType.INT4) == 4
    assert element_bits(np.float64) == 64
    assert element_bytes("uint4") == 1


@pytest.mark.parametrize("func", [element_bits, element_bytes, numpy_dtype])
def test_unknown_has_no_width_or_dtype(func):
    for unknown in (TensorDataType.UNKNOWN, 0, "unknown"):
        with pytest.raises(DescriptorError, match="UNKNOWN"):
            func(unknown)
    with pytest.raises(DescriptorError):
        func(14)
    with pytest.raises(TypeError):
        func(None)


@pytest.mark.parametrize("name", VALID_NAMES)
def test_numpy_dtype_table(name):
    dt = numpy_dtype(name)
    assert isinstance(dt, np.dtype)
    assert dt == np.dtype(NUMPY_TWIN[name])
    assert dt.byteorder in "=<|"
    bits = element_bits(name)
    assert dt.itemsize == max(1, bits // 8)


def test_numpy_dtype_four_bit_types_unpack_one_per_byte():
    assert numpy_dtype("uint4") == np.dtype(np.uint8)
    assert numpy_dtype(TensorDataType.INT4) == np.dtype(np.int8)
    assert numpy_dtype(13) == np.int8


@pytest.mark.parametrize("name", BYTE_SIZED)
def test_numpy_dtype_round_trip(name):
    member = TensorDataType[name]
    assert data_type(numpy_dtype(member)) is member
