"""ListpackList (pyrepl/keyspace/_lplist.c) against its reference, ListpackListReference, and
both against a deque: the same answers to the same operations, the same listpack bytes (which
the Python listpack reader of pyrepl/keyspace/listpack.py reads back as the elements)."""

from __future__ import annotations

import pickle
import sys
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import lplist
from pyrepl.keyspace.listpack import listpack_entries
from pyrepl.keyspace.lplist import ListpackListReference

needs_c = pytest.mark.skipif(lplist.NATIVE_TYPE is None,
                             reason=f"pyrepl runs as plain Python ({native.WHY_PURE})")

_ELEMENTS = st.one_of(
    st.sampled_from([b"0", b"-1", b"127", b"4096", b"-70000", b"9223372036854775807", b"-0",
                     b"007", b"", b"x"]),
    st.binary(max_size=6),
    st.integers(60, 70).map(lambda n: b"v" * n),
    st.integers(4090, 4100).map(lambda n: b"w" * n),
)
_INDEX = st.integers(-12, 12)
_OPS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["append", "appendleft"]), _ELEMENTS),
    st.tuples(st.sampled_from(["extend", "extendleft"]), st.lists(_ELEMENTS, max_size=3)),
    st.tuples(st.sampled_from(["pop", "popleft", "clear", "reversed"])),
    st.tuples(st.just("insert"), _INDEX, _ELEMENTS),
    st.tuples(st.just("index"), _ELEMENTS),
    st.tuples(st.just("get"), _INDEX),
    st.tuples(st.just("set"), _INDEX, _ELEMENTS),
    st.tuples(st.just("del"), _INDEX),
    st.tuples(st.just("range"), _INDEX, _INDEX),
), max_size=60)


def _apply(lst: object, op: tuple) -> object:
    name = op[0]
    try:
        if name == "get":
            return lst[op[1]]  # type: ignore[index]
        if name == "set":
            lst[op[1]] = op[2]  # type: ignore[index]
            return None
        if name == "del":
            del lst[op[1]]  # type: ignore[attr-defined]
            return None
        if name == "reversed":
            return list(reversed(lst))  # type: ignore[call-overload]
        if name == "range":
            if isinstance(lst, deque) and type(lst) is deque:    # (the model: a slice)
                return list(lst)[max(op[1], 0):max(op[2], 0)]
            return lst.range(op[1], op[2])  # type: ignore[attr-defined]
        return getattr(lst, name)(*op[1:])
    except (IndexError, ValueError) as e:
        return type(e).__name__


def _listpack_elements(lp: bytes) -> list[bytes]:
    return [e if isinstance(e, bytes) else b"%d" % e for e in listpack_entries(lp)]


@needs_c
@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_c_answers_as_the_reference(ops: list[tuple]) -> None:
    c, ref = lplist.NATIVE_TYPE(), ListpackListReference()
    for op in ops:
        assert _apply(c, op) == _apply(ref, op), op
        assert (len(c), list(c), c.to_listpack()) == (len(ref), list(ref), ref.to_listpack())
    lp = c.to_listpack()
    assert _listpack_elements(lp) == list(ref) and c.listpack_bytes() == len(lp)
    assert c == ref and c == deque(ref) and not (c != ref)
    assert c.copy() == c and c.copy().to_listpack() == lp
    assert pickle.loads(pickle.dumps(c)) == c
    assert sys.getsizeof(c) >= len(lp)


@settings(max_examples=100, deadline=None)
@given(_OPS)
def test_the_reference_answers_as_a_deque(ops: list[tuple]) -> None:
    ref, model = ListpackListReference(), deque()
    for op in ops:
        assert _apply(ref, op) == _apply(model, op), op
    assert list(ref) == list(model)
    assert _listpack_elements(ref.to_listpack()) == list(model)


@pytest.mark.parametrize("impl", ["c", "ref"])
def test_elements_must_be_bytes(impl: str) -> None:
    if impl == "c" and lplist.NATIVE_TYPE is None:
        pytest.skip(f"pyrepl runs as plain Python ({native.WHY_PURE})")
    lst = lplist.NATIVE_TYPE() if impl == "c" else ListpackListReference()
    for bad in ("s", 1, None):
        with pytest.raises(TypeError):
            lst.append(bad)
        with pytest.raises(TypeError):
            lst.insert(0, bad)
    lst.append(b"a")
    with pytest.raises(TypeError):
        lst[0] = "b"
    with pytest.raises(IndexError):
        lst[1]
    assert list(lst) == [b"a"]


def test_compact_fills_at_most_one_node() -> None:
    saved = (lplist.limits.count, lplist.limits.bytes)
    try:
        lplist.configure(-2)
        assert type(lplist.compact([b"x" * 100] * 10)) is lplist.ListpackList
        assert type(lplist.compact([b"x" * 100] * 100)) is deque       # > 8 KB
        lplist.configure(4)
        assert type(lplist.compact([b"a"] * 4)) is lplist.ListpackList
        assert type(lplist.compact([b"a"] * 5)) is deque
    finally:
        lplist.limits.count, lplist.limits.bytes = saved
