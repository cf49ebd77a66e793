"""ListpackHash (pyrepl/keyspace/_lphash.c) against its reference, ListpackHashReference: the
same answers to the same operations, the same listpack bytes (which Redis's reader, the
Python one of pyrepl/keyspace/listpack.py, reads back as the hash's fields and values)."""

from __future__ import annotations

import pickle
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import lphash
from pyrepl.keyspace.listpack import listpack_entries
from pyrepl.keyspace.lphash import ListpackHashReference
from pyrepl.keyspace.strtab import StrDict

needs_c = pytest.mark.skipif(lphash.NATIVE_TYPE is None,
                             reason=f"pyrepl runs as plain Python ({native.WHY_PURE})")

# fields and values that hit every listpack encoding: canonical integers of each width (and
# the strings that look like integers but are not), 6-bit, 12-bit and 32-bit string lengths
_INTS = st.sampled_from([0, 1, 127, 128, -1, 4095, -4096, 4096, 32767, -32768, 32768,
                         (1 << 23) - 1, -(1 << 23), 1 << 23, (1 << 31) - 1, -(1 << 31),
                         1 << 31, (1 << 63) - 1, -(1 << 63)])
_STRINGS = st.one_of(
    _INTS.map(lambda v: b"%d" % v),
    st.sampled_from([b"", b"-0", b"007", b"+1", b" 1", b"1 ", b"9223372036854775808",
                     b"-9223372036854775809", b"1.5", b"x"]),
    st.binary(max_size=8),
    st.integers(60, 70).map(lambda n: b"v" * n),
    st.integers(4090, 4100).map(lambda n: b"w" * n),
)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), _STRINGS, _STRINGS),
    st.tuples(st.just("del"), _STRINGS),
    st.tuples(st.just("pop"), _STRINGS),
    st.tuples(st.just("get"), _STRINGS),
    st.tuples(st.just("clear")),
), max_size=60)


def _apply(h: object, op: tuple) -> object:
    name = op[0]
    if name == "set":
        h[op[1]] = op[2]  # type: ignore[index]
        return None
    if name == "del":
        try:
            del h[op[1]]  # type: ignore[attr-defined]
        except KeyError:
            return "KeyError"
        return None
    if name == "pop":
        return h.pop(op[1], None)  # type: ignore[attr-defined]
    if name == "get":
        return (h.get(op[1]), op[1] in h)  # type: ignore[attr-defined,operator]
    h.clear()  # type: ignore[attr-defined]
    return None


def _state(h: object) -> tuple:
    return (len(h), h.items(), h.keys(), h.values(), list(h), h.to_listpack())  # type: ignore


@needs_c
@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_c_answers_as_the_reference(ops: list[tuple]) -> None:
    c, ref = lphash.NATIVE_TYPE(), ListpackHashReference()
    for op in ops:
        assert _apply(c, op) == _apply(ref, op), op
        assert _state(c) == _state(ref), op
    lp = c.to_listpack()
    flat = [e if isinstance(e, bytes) else b"%d" % e for e in listpack_entries(lp)]
    assert flat == [s for kv in ref.items() for s in kv]
    assert c == ref and c == dict(ref.items()) and not (c != ref)
    copy = c.copy()
    assert copy == c and copy.to_listpack() == lp
    assert pickle.loads(pickle.dumps(c)) == c
    assert sys.getsizeof(c) >= len(lp)


@given(_OPS)
@settings(max_examples=100, deadline=None)
def test_the_reference_keeps_dict_order_and_writes_redis_listpacks(ops: list[tuple]) -> None:
    """The reference is a dict in insertion order; its listpack reads back as its items."""
    ref, model = ListpackHashReference(), {}
    for op in ops:
        assert _apply(ref, op) == _apply(model, op), op
    assert ref.items() == list(model.items())
    flat = [e if isinstance(e, bytes) else b"%d" % e for e in listpack_entries(ref.to_listpack())]
    assert flat == [s for kv in model.items() for s in kv]


@pytest.mark.parametrize("impl", ["c", "ref"])
def test_fields_and_values_must_be_bytes(impl: str) -> None:
    if impl == "c" and lphash.NATIVE_TYPE is None:
        pytest.skip(f"pyrepl runs as plain Python ({native.WHY_PURE})")
    h = lphash.NATIVE_TYPE() if impl == "c" else ListpackHashReference()
    with pytest.raises(TypeError):
        h["f"] = b"v"
    with pytest.raises(TypeError):
        h[b"f"] = 1
    h[b"f"] = b"v"
    with pytest.raises(KeyError):
        h[b"g"]
    assert h.get("f") is None and "f" not in h


def test_compact_follows_the_limits() -> None:
    """compact: a listpack within hash-max-listpack-entries / -value, else a dict."""
    saved = (lphash.limits.entries, lphash.limits.value)
    try:
        lphash.configure(4, 8)
        assert type(lphash.compact({b"a": b"1", b"b": b"2"})) is lphash.ListpackHash
        assert type(lphash.compact({b"a": b"123456789"})) is StrDict
        assert type(lphash.compact({b"%d" % i: b"" for i in range(5)})) is StrDict
        lphash.configure(0, 8)
        assert type(lphash.compact({b"a": b"1"})) is StrDict
    finally:
        lphash.configure(*saved)
