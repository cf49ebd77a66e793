"""IntSet (pyrepl/keyspace/_intset.c) against its reference, IntSetReference: the same answers
to the same operations and the same intset bytes (Redis's layout: the width its widest member
ever needed, the integers ascending), which containers.intset_entries reads back."""

from __future__ import annotations

import pickle
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import intset
from pyrepl.keyspace.intset import IntSetReference
from pyrepl.keyspace.strtab import StrSet
from pyrepl.rdb.containers import intset_entries

needs_c = pytest.mark.skipif(intset.NATIVE_TYPE is None,
                             reason=f"pyrepl runs as plain Python ({native.WHY_PURE})")

# integers at each width's edges, so that adds widen the intset from 16 to 32 to 64 bits
_VALUES = st.one_of(
    st.sampled_from([0, 1, -1, 32767, -32768, 32768, -32769, (1 << 31) - 1, -(1 << 31),
                     1 << 31, -(1 << 31) - 1, (1 << 63) - 1, -(1 << 63)]),
    st.integers(-100, 100),
).map(lambda v: b"%d" % v)
_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), _VALUES),
    st.tuples(st.just("update"), st.lists(_VALUES, max_size=4)),
    st.tuples(st.just("discard"), _VALUES),
    st.tuples(st.just("remove"), _VALUES),
    st.tuples(st.just("in"), st.one_of(_VALUES, st.sampled_from([b"01", b"-0", b"+1", b"x"]))),
    st.tuples(st.just("pop")),
    st.tuples(st.just("difference_update"), st.lists(_VALUES, max_size=4)),
), max_size=60)


def _apply(s: object, op: tuple) -> object:
    name = op[0]
    if name == "in":
        return op[1] in s  # type: ignore[operator]
    if name in ("remove", "pop"):
        try:
            return getattr(s, name)(*op[1:])
        except KeyError:
            return "KeyError"
    return getattr(s, name)(*op[1:])


def _state(s: object) -> tuple:
    return (len(s), list(s), s.to_intset())  # type: ignore[arg-type,attr-defined]


@needs_c
@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_c_answers_as_the_reference(ops: list[tuple]) -> None:
    c, ref = intset.NATIVE_TYPE(), IntSetReference()
    for op in ops:
        assert _apply(c, op) == _apply(ref, op), op
        assert _state(c) == _state(ref), op
    blob = c.to_intset()
    assert [b"%d" % v for v in intset_entries(blob)] == list(ref)
    assert c == ref and c == set(ref) and not (c != ref)
    assert c.copy() == c and c.copy().to_intset() == blob
    assert intset.NATIVE_TYPE.from_intset(blob).to_intset() == blob
    assert pickle.loads(pickle.dumps(c)) == c
    assert sys.getsizeof(c) >= len(blob)
    assert c.intersection({b"0", b"1"}) == set(ref) & {b"0", b"1"}
    assert c.difference({b"0"}) == set(ref) - {b"0"}


@given(_OPS)
@settings(max_examples=100, deadline=None)
def test_the_reference_is_a_sorted_set(ops: list[tuple]) -> None:
    """The reference answers as a set, lists its members ascending, and writes an intset
    Redis's reader reads back."""
    ref, model = IntSetReference(), set()
    for op in ops:
        if op[0] != "pop":
            assert _apply(ref, op) == _apply(model, op), op
        elif model:
            top = max(model, key=int)
            assert ref.pop() == top
            model.discard(top)
    assert list(ref) == sorted(model, key=int)
    assert [b"%d" % v for v in intset_entries(ref.to_intset())] == list(ref)


@pytest.mark.parametrize("impl", ["c", "ref"])
def test_members_are_canonical_integers(impl: str) -> None:
    if impl == "c" and intset.NATIVE_TYPE is None:
        pytest.skip(f"pyrepl runs as plain Python ({native.WHY_PURE})")
    s = intset.NATIVE_TYPE() if impl == "c" else IntSetReference()
    for bad in (b"01", b"-0", b"+1", b"1.0", b"", b"9223372036854775808"):
        with pytest.raises(ValueError):
            s.add(bad)
    with pytest.raises(TypeError):
        s.add(1)
    s.add(b"-5")
    assert list(s) == [b"-5"] and b"-5" in s and 5 not in s
    blob = s.to_intset()
    cls = type(s)
    assert cls.from_intset(blob) == s
    assert cls.from_intset(blob[:-1]) is None                  # a short body
    assert cls.from_intset(b"\x03\x00\x00\x00" + blob[4:]) is None     # width 3
    two = IntSetReference([b"1", b"2"]).to_intset()
    assert cls.from_intset(two[:8] + two[10:] + two[8:10]) is None     # not ascending


def test_widths_are_kept_after_removals() -> None:
    """Redis never narrows an intset: the widest member's width stays after it goes."""
    for cls in filter(None, (intset.NATIVE_TYPE, IntSetReference)):
        s = cls([b"1", b"70000"])
        s.discard(b"70000")
        assert s.to_intset()[:4] == (4).to_bytes(4, "little")


def test_compact_follows_the_limit() -> None:
    saved = intset.limits.entries
    try:
        intset.configure(3)
        assert type(intset.compact([b"1", b"2", b"3"])) is intset.IntSet
        assert type(intset.compact([b"1", b"2", b"3", b"4"])) is StrSet
        assert type(intset.compact([b"1", b"x"])) is StrSet
    finally:
        intset.configure(saved)
