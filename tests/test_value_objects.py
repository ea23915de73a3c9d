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
        assert not isinstance(value, (dict, list, _engine.Plan, _engine.GatherSpec))
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


def test_fast_path_refuses_what_it_was_not_told_about():
    _engine.forget_gathers()
    d = BufferTensorDesc("uint8", [4])
    ds.gather(bytes(16), d)
    # An object that claims to equal the descriptor is no descriptor.
    class Impostor:
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return hash(d)

    with pytest.raises(TypeError, match="BufferTensorDesc"):
        ds.gather(bytes(16), Impostor())  # type: ignore[arg-type]


@pytest.mark.parametrize("desc", [None, 0, "uint8", object()])
def test_fast_path_with_nothing_registered_refuses_non_descriptors(desc):
    _engine.forget_gathers()
    with pytest.raises(TypeError, match="desc must be a BufferTensorDesc"):
        ds.gather(bytes(16), desc)
