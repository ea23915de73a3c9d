"""Descriptors stay values: the engine keeps its plans beside them, never on them."""

import copy
import pickle

import numpy as np
import pytest

import dmlstride as ds
from dmlstride import _engine, transfer
from dmlstride.descriptor import BufferTensorDesc

from reference import gather_np


def _slots(d: BufferTensorDesc) -> dict[str, object]:
    return {name: getattr(d, name) for name in BufferTensorDesc.__slots__}


def _use(d: BufferTensorDesc, packed: BufferTensorDesc) -> None:
    buf = bytearray(d.total_tensor_size_in_bytes + 16)
    arr = np.arange(int(np.prod(d.sizes)), dtype=np.float32).reshape(d.sizes)
    ds.scatter(arr, d, buf)
    for _ in range(3):                       # the checked path, then the fast path
        assert np.array_equal(ds.gather(buf, d), arr)
    out = np.empty(d.sizes, np.float32)
    ds.gather(buf, d, out=out)
    dst = bytearray(packed.total_tensor_size_in_bytes)
    ds.copy_tensor(buf, d, dst, packed)
    ds.view(buf, d)


def test_use_stores_no_engine_state_on_the_descriptor():
    d = BufferTensorDesc.from_layout("float32", [1, 3, 4, 5], "NHWC")
    packed = BufferTensorDesc("float32", [1, 3, 4, 5])
    hash(d), hash(packed), d.has_overlap, packed.has_overlap   # memoised derived values, computed now
    before, before_packed = _slots(d), _slots(packed)
    _use(d, packed)
    assert _slots(d) == before and _slots(packed) == before_packed
    for value in [*_slots(d).values(), *_slots(packed).values()]:
        assert not isinstance(value, (dict, list, _engine.Plan, _engine.TransferSpec))
    assert not any("cache" in name for name in BufferTensorDesc.__slots__)


def test_used_descriptors_pickle_and_copy_back_equal():
    d = BufferTensorDesc("float32", [2, 3, 4], strides=[16, 5, 1], guaranteed_base_offset_alignment=16)
    _use(d, BufferTensorDesc("float32", [2, 3, 4]))
    for again in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d), copy.copy(d)):
        assert again == d and hash(again) == hash(d) and repr(again) == repr(d)
        assert _slots(again)["_overlap"] in (None, d.has_overlap)


def test_equal_descriptors_share_plans_and_gather_alike():
    _engine.forget_gathers()
    a = BufferTensorDesc("uint8", [3, 4], strides=[7, 1])
    b = BufferTensorDesc("uint8", [3, 4], strides=[7, 1])
    assert a == b and a is not b
    buf = bytes(range(32))
    expect = gather_np(buf, a.data_type, a.sizes, a.strides)
    assert np.array_equal(ds.gather(buf, a), expect)        # registers the spec
    assert _engine.gather_specs_held() == 1
    assert np.array_equal(ds.gather(buf, b), expect)        # found by equality, not identity
    assert np.array_equal(ds.gather(buf, a), expect)
    assert _engine.gather_specs_held() == 1


def test_plan_caches_are_bounded():
    _engine.forget_gathers()
    buf = bytes(4096)
    for n in range(1, 600):
        d = BufferTensorDesc("uint8", [2, n % 50 + 1], strides=[n + 60, 1])
        assert ds.gather(buf, d).shape == (2, n % 50 + 1)
    assert len(transfer._plans) <= transfer._PLAN_CACHE_LIMIT
    assert _engine.gather_specs_held() <= 256
    for n in range(1, 300):
        d = BufferTensorDesc("uint8", [2, n % 50 + 1], strides=[n + 60, 1])
        ds.scatter(np.zeros((2, n % 50 + 1), np.uint8), d, bytearray(4096))
        ds.copy_tensor(bytes(4096), d, bytearray(4096), d)
    assert _engine.scatter_specs_held() <= 256 and _engine.copy_specs_held() <= 256
    assert _engine.scatter_specs_held() >= 50 and _engine.copy_specs_held() >= 50


def _impostor(d: BufferTensorDesc) -> object:
    """An object that claims to equal the descriptor (and hashes alike): no descriptor."""

    class Impostor:
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash(d)

    return Impostor()


def test_fast_path_refuses_what_it_was_not_told_about():
    _engine.forget_gathers()
    d = BufferTensorDesc("uint8", [4])
    ds.gather(bytes(16), d)
    with pytest.raises(TypeError, match="BufferTensorDesc"):
        ds.gather(bytes(16), _impostor(d))  # type: ignore[arg-type]


@pytest.mark.parametrize("desc", [None, 0, "uint8", object()])
def test_fast_path_with_nothing_registered_refuses_non_descriptors(desc):
    _engine.forget_gathers()
    with pytest.raises(TypeError, match="desc must be a BufferTensorDesc"):
        ds.gather(bytes(16), desc)


# -- the gather fast path from numpy arrays ----------------------------------------------------

_G_DESC = BufferTensorDesc("float32", [3, 5], strides=[8, 1])          # 84 bytes, rows 32 apart


def _warm_gather() -> None:
    _engine.forget_gathers()
    ds.gather(bytes(_G_DESC.total_tensor_size_in_bytes), _G_DESC)       # the checked path registers it


def _ref(raw: np.ndarray, offset: int = 0) -> np.ndarray:
    # The array's bytes in memory order (random bytes: compare them, not floats, some are NaN).
    return gather_np(raw.tobytes(order="A"), "float32", _G_DESC.sizes, _G_DESC.strides, offset).tobytes()


_BYTES = np.random.default_rng(7).integers(0, 256, 256, dtype=np.uint8)


@pytest.mark.parametrize("make,offset", [
    (lambda: _BYTES.copy(), 0),
    (lambda: _BYTES.copy(), 96),
    (lambda: _BYTES[:84].copy(), 0),                                   # exactly the tensor's bytes
    (lambda: _BYTES[16:].copy().view(np.float32).reshape(6, 10), 32),  # a typed 2-D array
    (lambda: np.asfortranarray(_BYTES[:240].reshape(12, 20)), 16),     # F-contiguous: memory order
    (lambda: _BYTES[32:200].view(np.uint16).reshape(4, 21)[1:], 0),    # a C-contiguous view
    (lambda: np.frombuffer(_BYTES.tobytes(), np.uint8), 48),           # read-only
], ids=["uint8", "offset", "exact", "float32-2d", "fortran", "view", "read-only"])
def test_gather_fast_path_from_arrays_reads_their_bytes(make, offset):
    _warm_gather()
    raw = make()
    for _ in range(2):
        out = ds.gather(raw, _G_DESC, offset=offset)
        assert out.tobytes() == _ref(raw, offset)
    into = np.full((3, 5), -1, np.float32)
    assert ds.gather(raw, _G_DESC, offset=offset, out=into) is into
    assert into.tobytes() == _ref(raw, offset)


@pytest.mark.parametrize("make,offset,exc,match", [
    (lambda: np.zeros(83, np.uint8), 0, BufferError, "too small"),
    (lambda: np.zeros(128, np.uint8), 48, BufferError, "too small"),
    (lambda: np.zeros(0, np.uint8), 0, BufferError, "too small"),
    (lambda: np.zeros(512, np.uint8)[::2], 0, BufferError, "not a contiguous"),
    (lambda: np.zeros((16, 32), np.uint8)[:, :16], 0, BufferError, "not a contiguous"),
    (lambda: np.zeros(128, object), 0, TypeError, "Python objects"),
    (lambda: np.zeros(128, np.uint8), 8, ds.DescriptorError, "multiple of 16"),
], ids=["short", "offset-past-end", "empty", "strided", "strided-2d", "objects", "misaligned"])
def test_gather_fast_path_from_arrays_refuses_as_the_checked_path_does(make, offset, exc, match):
    _warm_gather()
    with pytest.raises(exc, match=match):
        ds.gather(make(), _G_DESC, offset=offset)


def test_gather_fast_path_from_an_array_into_its_own_bytes():
    _warm_gather()
    raw = _BYTES.copy()
    expect = _ref(raw)
    out = raw[128:188].view(np.float32).reshape(3, 5)        # outside the source range
    assert ds.gather(raw, _G_DESC, out=out) is out
    assert out.tobytes() == expect
    raw = _BYTES.copy()
    expect = _ref(raw)
    out = raw[16:76].view(np.float32).reshape(3, 5)          # inside it: read as a copy
    assert ds.gather(raw, _G_DESC, out=out) is out
    assert out.tobytes() == expect


# -- the scatter fast path ----------------------------------------------------------------------

_S_DESC = BufferTensorDesc("float32", [3, 4], strides=[7, 1])


def _scatter_np(buf: bytes, desc: BufferTensorDesc, values: object, offset: int = 0) -> bytes:
    # numpy's assignment through a strided view of a copy of buf: the reference.
    out = np.frombuffer(bytearray(buf), np.uint8)
    view = np.ndarray(desc.sizes, np.float32, buffer=out, offset=offset,
                      strides=[s * 4 for s in desc.effective_strides])
    view[...] = np.array(values, copy=True)
    return out.tobytes()


def _warm_scatter() -> bytearray:
    _engine.forget_gathers()
    buf = bytearray(range(128))
    ds.scatter(np.ones((3, 4), np.float32), _S_DESC, buf)          # the checked path registers it
    assert _engine.scatter_specs_held() == 1
    return buf


def test_equal_descriptors_share_scatter_specs_and_scatter_alike():
    buf = _warm_scatter()
    twin = BufferTensorDesc("float32", [3, 4], strides=[7, 1])
    assert twin == _S_DESC and twin is not _S_DESC
    values = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    for d in (twin, _S_DESC, twin):
        before = bytes(buf)
        ds.scatter(values + len(d.sizes), d, buf)
        assert bytes(buf) == _scatter_np(before, d, values + len(d.sizes))
    assert _engine.scatter_specs_held() == 1


@pytest.mark.parametrize("values", [
    np.arange(12, dtype=np.float64).reshape(3, 4) / 3,           # converted
    np.arange(12, dtype=np.int32).reshape(3, 4),                   # converted
    np.arange(12, dtype=np.float32).reshape(4, 3).T,               # not C-contiguous
    np.arange(12, dtype=">f4").reshape(3, 4),                      # byte-swapped
    [[1.5, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],               # not an array
    np.arange(12, dtype=np.float32).reshape(3, 4)[None][0],        # a view, still plain
], ids=["float64", "int32", "transposed", "big-endian", "list", "view"])
def test_scatter_fast_path_hands_on_what_it_does_not_take(values):
    buf = _warm_scatter()
    before = bytes(buf)
    ds.scatter(values, _S_DESC, buf)
    assert bytes(buf) == _scatter_np(before, _S_DESC, values)


def test_scatter_fast_path_reads_an_aliasing_array_as_a_copy():
    buf = _warm_scatter()
    raw = np.frombuffer(buf, np.uint8)
    values = raw[4:52].view(np.float32).reshape(3, 4)        # inside the destination range
    before = bytes(buf)
    expect = _scatter_np(before, _S_DESC, values.copy())
    ds.scatter(values, _S_DESC, buf)
    assert bytes(buf) == expect


@pytest.mark.parametrize("call,exc,match", [
    (lambda v: ds.scatter(v, _S_DESC, bytes(128)), BufferError, "read-only"),
    (lambda v: ds.scatter(v, _S_DESC, bytearray(40)), BufferError, "too small"),
    (lambda v: ds.scatter(v, _S_DESC, bytearray(128), offset=96), BufferError, "too small"),
    (lambda v: ds.scatter(v, _S_DESC, bytearray(128), offset=4), ds.DescriptorError, "multiple of 16"),
    (lambda v: ds.scatter(v, _S_DESC, bytearray(128), offset=-16), BufferError, "at least 0"),
    (lambda v: ds.scatter(v[:2], _S_DESC, bytearray(128)), ValueError, "shape"),
    (lambda v: ds.scatter(v.astype(np.complex64), _S_DESC, bytearray(128)), TypeError, "same_kind"),
], ids=["read-only", "small", "offset-past-end", "misaligned", "negative-offset", "shape", "casting"])
def test_scatter_fast_path_refuses_as_the_checked_path_does(call, exc, match):
    _warm_scatter()
    with pytest.raises(exc, match=match):
        call(np.ones((3, 4), np.float32))


def test_scatter_fast_path_relaxed_alignment_and_offset():
    buf = _warm_scatter()
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = bytes(buf)
    ds.scatter(values, _S_DESC, buf, offset=4, check_alignment=False)
    assert bytes(buf) == _scatter_np(before, _S_DESC, values, offset=4)


@pytest.mark.parametrize("dtype,bad", [("uint4", 16), ("int4", -9)])
def test_four_bit_scatters_keep_checking_values(dtype, bad):
    _engine.forget_gathers()
    d = BufferTensorDesc(dtype, [2, 3])
    buf = bytearray(16)
    ds.scatter(np.zeros((2, 3), np.int8 if dtype == "int4" else np.uint8), d, buf)
    assert _engine.scatter_specs_held() == 0
    values = np.zeros((2, 3), np.int8 if dtype == "int4" else np.uint8)
    values[1, 2] = bad
    with pytest.raises(ValueError, match="elements must be"):
        ds.scatter(values, d, buf)
    assert buf == bytearray(16)


def test_scatter_fast_path_refuses_an_impostor_descriptor():
    _warm_scatter()
    with pytest.raises(TypeError, match="BufferTensorDesc"):
        ds.scatter(np.ones((3, 4), np.float32), _impostor(_S_DESC), bytearray(128))  # type: ignore[arg-type]


def test_copy_fast_path_refuses_an_impostor_descriptor():
    src, dst = _warm_copy()
    with pytest.raises(TypeError, match="BufferTensorDesc"):
        ds.copy_tensor(src, _impostor(_C_SRC), dst, _C_DST)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="BufferTensorDesc"):
        ds.copy_tensor(src, _C_SRC, dst, _impostor(_C_DST))  # type: ignore[arg-type]


# -- the copy_tensor fast path --------------------------------------------------------------------

_C_SRC = BufferTensorDesc.from_layout("float32", [1, 3, 2, 5], "NHWC")
_C_DST = BufferTensorDesc("float32", [1, 3, 2, 5], strides=[64, 20, 8, 1])


def _copy_np(src: bytes, dst: bytes, soff: int = 0, doff: int = 0) -> bytes:
    # numpy's assignment between strided views of copies of both: the reference.
    s = np.frombuffer(bytes(src), np.uint8)
    out = np.frombuffer(bytearray(dst), np.uint8)
    sv = np.ndarray(_C_SRC.sizes, np.float32, buffer=s, offset=soff,
                    strides=[x * 4 for x in _C_SRC.effective_strides])
    dv = np.ndarray(_C_DST.sizes, np.float32, buffer=out, offset=doff,
                    strides=[x * 4 for x in _C_DST.effective_strides])
    dv[...] = sv.copy()
    return out.tobytes()


def _warm_copy() -> tuple[bytearray, bytearray]:
    _engine.forget_gathers()
    src = bytearray(np.arange(64, dtype=np.float32).tobytes())
    dst = bytearray(512)
    ds.copy_tensor(src, _C_SRC, dst, _C_DST)                  # the checked path registers the pair
    assert _engine.copy_specs_held() == 1
    return src, dst


def test_equal_descriptor_pairs_share_copy_specs_and_copy_alike():
    src, dst = _warm_copy()
    twins = (BufferTensorDesc.from_layout("float32", [1, 3, 2, 5], "NHWC"),
             BufferTensorDesc("float32", [1, 3, 2, 5], strides=[64, 20, 8, 1]))
    assert twins == (_C_SRC, _C_DST) and twins[0] is not _C_SRC
    for i, (a, b) in enumerate((twins, (_C_SRC, _C_DST), twins)):
        src[:] = (np.arange(64, dtype=np.float32) * (i + 2)).tobytes()
        before = bytes(dst)
        ds.copy_tensor(src, a, dst, b)
        assert bytes(dst) == _copy_np(bytes(src), before)
    assert _engine.copy_specs_held() == 1


def test_copy_fast_path_at_offsets_and_relaxed_alignment():
    src, dst = _warm_copy()
    src += bytes(64)
    for soff, doff, check in ((16, 32, True), (4, 8, False), (0, 12, False)):
        before = bytes(dst)
        ds.copy_tensor(src, _C_SRC, dst, _C_DST, src_offset=soff, dst_offset=doff, check_alignment=check)
        assert bytes(dst) == _copy_np(bytes(src), before, soff, doff)


def test_copy_fast_path_hands_overlapping_ranges_to_the_temporary():
    _warm_copy()
    buf = bytearray(np.arange(256, dtype=np.float32).tobytes())
    before = bytes(buf)
    ds.copy_tensor(buf, _C_SRC, buf, _C_DST, src_offset=32, dst_offset=0)
    assert bytes(buf) == _copy_np(before, before, 32, 0)


@pytest.mark.parametrize("call,exc,match", [
    (lambda s, d: ds.copy_tensor(s, _C_SRC, bytes(d), _C_DST), BufferError, "dst is read-only"),
    (lambda s, d: ds.copy_tensor(s[:100], _C_SRC, d, _C_DST), BufferError, "src too small"),
    (lambda s, d: ds.copy_tensor(s, _C_SRC, d[:200], _C_DST), BufferError, "dst too small"),
    (lambda s, d: ds.copy_tensor(s[:100], _C_SRC, bytes(d), _C_DST), BufferError, "src too small"),
    (lambda s, d: ds.copy_tensor(s, _C_SRC, d, _C_DST, dst_offset=400), BufferError, "dst too small"),
    (lambda s, d: ds.copy_tensor(s, _C_SRC, d, _C_DST, src_offset=8), ds.DescriptorError, "multiple of 16"),
    (lambda s, d: ds.copy_tensor(s, _C_SRC, d, _C_DST, dst_offset=-16), BufferError, "at least 0"),
    (lambda s, d: ds.copy_tensor(s, _C_SRC, d, _C_SRC, dst_offset=16.0), TypeError, "integer"),
], ids=["read-only", "src-small", "dst-small", "src-first", "offset-past-end", "misaligned",
        "negative", "float-offset"])
def test_copy_fast_path_refuses_as_the_checked_path_does(call, exc, match):
    src, dst = _warm_copy()
    before = bytes(dst)
    with pytest.raises(exc, match=match):
        call(src, dst)
    assert bytes(dst) == before
