"""pyrepl.keyspace.zset.ZSet against a plain model: a dict plus ``sorted()``.

The index is a B+tree that counts, in C (``pyrepl/keyspace/_zbtree.c``). Every operation is
compared with the model, and ``ZSet.check()`` asserts the tree's invariants after each (order,
leaf links, every item between its separators, every child's count equal to the items under
it, equal depth, nodes at least a quarter full, one item per dict entry with the dict's
score): the counts are what ranks, index ranges and range deletion rest on, and a wrong one
would show only at some other rank later. The tests run each tree at fanout 4 too, where a
few dozen members already split, merge and borrow across several levels. They run the index's
Python reference (``pyrepl/keyspace/zindex.py``, chunks of ``fanout`` items) the same way: as
plain Python (pyrepl/native.py) it is ZSet's base.
"""

from __future__ import annotations

import math
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import zindex
from pyrepl.keyspace import zset as zsets
from pyrepl.keyspace.zset import ADDED, UNCHANGED, UPDATED, ListpackZSet, ZSet

# ZSet over the Python reference of its index, whichever ZSet's own base is.
ZSetPy = type("ZSetPy", (zsets._Ordered, zindex.ZIndex), {"__slots__": (), "score": ZSet.score})
CLASSES = {"c": ZSet, "python": ZSetPy} if not native.PURE else {"python": ZSet}
# The small sorted set (one listpack) over its reference, whichever ListpackZSet's base is.
LPZSetPy = type("LPZSetPy", (zsets._Ordered, zsets.ListpackZIndexReference), {"__slots__": ()})
LISTPACKS = {"lp-c": ListpackZSet, "lp-python": LPZSetPy} if not native.PURE else \
    {"lp-python": ListpackZSet}


def ordered(model: dict[bytes, float]) -> list[tuple[float, bytes]]:
    return sorted((s, m) for m, s in model.items())


MEMBERS = st.sampled_from([b"", b"a", b"b", b"ab", b"b\x00", b"c", b"d", b"e", b"\xff"]
                          + [b"m%d" % i for i in range(40)])
SCORES = st.one_of(st.integers(-4, 4).map(float),
                   st.sampled_from([math.inf, -math.inf, 0.5, -0.0, 1e300, -2.5]))
OPS = st.one_of(
    st.tuples(st.just("add"), MEMBERS, SCORES),
    st.tuples(st.just("remove"), MEMBERS),
    st.tuples(st.just("delete_range"), st.integers(0, 60), st.integers(0, 60)),
    st.tuples(st.just("pop_first")),
    st.tuples(st.just("pop_last")),
)


FANOUTS = pytest.mark.parametrize(
    "cls,fanout", [(cls, f) for cls in CLASSES.values() for f in (4, 64)]
    + [(cls, 0) for cls in LISTPACKS.values()],
    ids=[f"{name}-{f}" for name in CLASSES for f in (4, 64)] + list(LISTPACKS))


def make(cls, fanout):
    """A sorted set of ``cls``: a B+tree of ``fanout``, or a listpack (fanout 0)."""
    return cls(_fanout=fanout) if fanout else cls()
EACH = pytest.mark.parametrize("cls", list(CLASSES.values()), ids=list(CLASSES))


@FANOUTS
@settings(max_examples=200, deadline=None)
@given(ops=st.lists(OPS, max_size=120))
def test_matches_model(cls, fanout, ops):
    z = make(cls, fanout)
    model: dict[bytes, float] = {}
    for op in ops:
        if op[0] == "add":
            _, m, s = op
            before = model.get(m)
            r = z.set_score(m, s)
            if before is None:
                assert r == ADDED
            elif before == s:
                assert r == UNCHANGED
            else:
                assert r == UPDATED
            if before is None or before != s:
                model[m] = s if s else 0.0
        elif op[0] == "remove":
            assert z.remove(op[1]) == (op[1] in model)
            model.pop(op[1], None)
        elif op[0] == "delete_range":
            ref = ordered(model)
            a, b = op[1], op[2]
            assert z.delete_range(a, b) == len(ref[a:b])
            for _s, m in ref[a:b]:
                del model[m]
        elif model:
            ref = ordered(model)
            item = z.pop_first() if op[0] == "pop_first" else z.pop_last()
            assert item == (ref[0] if op[0] == "pop_first" else ref[-1])
            del model[item[1]]
        z.check()
        assert len(z) == len(model)
    ref = ordered(model)
    assert list(z.items()) == [(m, s) for s, m in ref]
    for i, (s, m) in enumerate(ref):
        assert z.rank(m) == i
        assert z.at(i) == (s, m)
        assert z.score(m) == s
    assert z.rank(b"not-there") is None


@FANOUTS
@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(MEMBERS, SCORES), max_size=80),
       a=st.integers(-2, 90), b=st.integers(0, 90),
       x=SCORES, ex=st.booleans())
def test_ranges_and_bounds(cls, fanout, pairs, a, b, x, ex):
    z = make(cls, fanout)
    for m, s in pairs:
        z.add(m, s)
    ref = ordered(z.dict)
    start = max(a, 0)
    assert z.range(start, b) == ref[start:b]
    assert list(z.iter_from(start)) == ref[start:]
    assert list(z.iter_back_from(a)) == (ref[:a + 1][::-1] if a >= 0 else [])
    # score_start: first index with score >= x (> x when exclusive)
    want_start = sum(1 for s, _ in ref if (s <= x if ex else s < x))
    assert z.score_start(x, ex) == want_start
    # score_stop: index past the last score <= x (< x when exclusive)
    want_stop = sum(1 for s, _ in ref if (s < x if ex else s <= x))
    assert z.score_stop(x, ex) == want_stop
    for m in (b"", b"a", b"b", b"m1", b"zz"):
        assert z.member_bisect(x, m) == sum(1 for item in ref if item < (x, m))


def test_negative_zero_is_stored_as_zero():
    z = ZSet()
    assert z.add(b"a", -0.0) is True
    assert math.copysign(1.0, z.score(b"a")) == 1.0
    assert z.add(b"a", 0.0) is False  # the same score: nothing changes
    z2 = ZSet.from_items([(b"b", -0.0)])
    assert math.copysign(1.0, z2.score(b"b")) == 1.0


def test_equal_scores_order_by_member_bytes():
    z = ZSet()
    for m in (b"b", b"a", b"ab", b"", b"a\x00", b"\xff", b"B"):
        z.add(m, 1.0)
    assert [m for m, _ in z.items()] == [b"", b"B", b"a", b"a\x00", b"ab", b"b", b"\xff"]


def test_from_items_and_copy_are_independent():
    pairs = [(b"m%03d" % i, float(i % 7)) for i in range(100)]
    z = ZSet.from_items(reversed(pairs))
    z.check()
    assert list(z.items()) == sorted(pairs, key=lambda p: (p[1], p[0]))
    dup = z.copy()
    dup.add(b"new", -1.0)
    dup.remove(b"m000")
    dup.check()
    z.check()
    assert len(z) == 100 and z.score(b"m000") == 0.0 and z.score(b"new") is None
    assert len(dup) == 100 and dup.score(b"new") == -1.0


@FANOUTS
def test_update_moves_member(cls, fanout):
    z = make(cls, fanout)
    for i in range(30):
        z.add(b"m%02d" % i, float(i))
    assert z.set_score(b"m00", 100.0) == UPDATED
    assert z.last() == (100.0, b"m00")
    assert z.first() == (1.0, b"m01")
    assert z.rank(b"m00") == 29
    z.check()


@FANOUTS
def test_delete_range_across_many_sublists(cls, fanout):
    z = make(cls, fanout)
    for i in range(200):
        z.add(b"m%03d" % i, float(i))
    assert z.delete_range(3, 190) == 187
    z.check()
    assert [m for m, _ in z.items()] == [b"m000", b"m001", b"m002"] + \
        [b"m%03d" % i for i in range(190, 200)]
    assert z.delete_range(0, 1000) == 13
    assert len(z) == 0
    z.check()
    assert z.delete_range(0, 5) == 0


@FANOUTS
def test_real_load_with_thousands_of_members(cls, fanout):
    z = make(cls, fanout)
    model = {}
    for i in range(5000):
        m = b"member:%d" % ((i * 7919) % 3000)
        s = float((i * 31) % 101)
        z.add(m, s)
        model[m] = s
    z.check()
    ref = ordered(model)
    assert z.range(1000, 1010) == ref[1000:1010]
    assert z.at(2999) == ref[2999]
    assert z.rank(ref[1500][1]) == 1500
    # the iterators fetch 256 items at a time: across those boundaries
    assert list(z.iter_from(250)) == ref[250:]
    assert list(z.iter_back_from(600)) == ref[:601][::-1]
    assert list(z.iter_back_from(10**6)) == ref[::-1]
    assert z.copy().range(0, 3000) == ref
    for _ in range(500):
        z.pop_first()
    z.check()
    assert z.first() == ref[500]


@FANOUTS
def test_random_updates_keep_counts_and_order(cls, fanout):
    """Many moves, in place and across leaves, removals and range deletions on a set big
    enough for several levels, checked against the model throughout."""
    rng = random.Random(7)
    z = make(cls, fanout)
    model: dict[bytes, float] = {}
    for step in range(20000):
        m = b"m%d" % rng.randrange(2000)
        op = rng.random()
        if op < 0.8:
            s = float(rng.randrange(300))
            z.set_score(m, s)
            model[m] = s
        elif op < 0.97:
            assert z.remove(m) == (model.pop(m, None) is not None)
        else:
            a = rng.randrange(len(model) + 1)
            b = a + rng.randrange(30)
            ref = ordered(model)
            assert z.delete_range(a, b) == len(ref[a:b])
            for _s, mm in ref[a:b]:
                del model[mm]
        if step % (100 if fanout < 64 else 1000) == 0:
            z.check()
    z.check()
    ref = ordered(model)
    assert z.range(0, len(ref)) == ref
    assert [z.rank(m) for _s, m in ref] == list(range(len(ref)))


@EACH
def test_bad_input_is_refused_and_changes_nothing(cls):
    z = cls.from_items([(b"a", 1.0), (b"b", 2.0)])
    with pytest.raises(ValueError):
        z.set_score(b"c", math.nan)
    with pytest.raises(ValueError):
        z.set_score(b"a", math.nan)
    with pytest.raises(TypeError):
        z.set_score("a", 1.0)
    with pytest.raises(TypeError):
        z.remove(None)
    with pytest.raises(IndexError):
        z.at(2)
    with pytest.raises(AttributeError):
        z.dict = {}     # read-only: the index and the dict change together or not at all
    z.check()
    assert list(z.items()) == [(b"a", 1.0), (b"b", 2.0)]


@pytest.mark.skipif(native.PURE, reason=f"the C B+tree's levels ({native.WHY_PURE})")
def test_tree_grows_and_shrinks_through_levels():
    """At fanout 4, 3,000 members take several levels; removing them all in random order
    merges and borrows back to one leaf, the invariants checked at every step."""
    rng = random.Random(11)
    z = ZSet(_fanout=4)
    members = [b"m%d" % i for i in range(3000)]
    rng.shuffle(members)
    depths = []
    for i, m in enumerate(members):
        assert z.set_score(m, float(rng.randrange(100))) == ADDED
        if i % 97 == 0:
            z.check()
            depths.append(z._depth())
    assert z._depth() >= 5 and depths == sorted(depths)
    rng.shuffle(members)
    for i, m in enumerate(members):
        assert z.remove(m) is True
        if i % 13 == 0 or len(z) < 50:
            z.check()
    assert len(z) == 0 and z._depth() == 0
    z.check()
    with pytest.raises(ValueError):
        ZSet(_fanout=3)


def test_memory_usage_counts_the_tree_and_the_members():
    """MEMORY USAGE of a sorted set counts its nodes (``__sizeof__``) and its dict's members
    and scores, growing with the set as a hash of the same members does."""
    from pyrepl.core.memory import key_size

    sizes = {}
    for n in (5, 1000, 20000):
        z = ZSet()
        h = {}
        for i in range(n):
            z.set_score(b"member:%d" % i, float(i))
            h[b"member:%d" % i] = b"%d" % i
        base = ZSet.__basicsize__
        assert z.__sizeof__() >= base + n * 16          # a leaf slot per member, at least
        sizes[n] = key_size(b"z", z, 5)
        assert sizes[n] > key_size(b"h", h, 5) * 0.9   # members, scores and the tree
    assert sizes[1000] > 1000 * 100         # the member bytes alone are ~45 each
    per_1k, per_20k = sizes[1000] / 1000, sizes[20000] / 20000
    assert 0.5 < per_20k / per_1k < 2       # a cost per member, not per set


@pytest.mark.skipif(native.PURE, reason=f"pyrepl runs as plain Python ({native.WHY_PURE})")
@settings(max_examples=200, deadline=None)
@given(ops=st.lists(OPS, max_size=80))
def test_listpack_c_writes_the_references_bytes(ops):
    """_lpzset.c and its reference hold the same listpack (Redis's: member, d2string(score),
    ascending) after the same operations, and answer them alike."""
    c, ref = ListpackZSet(), LPZSetPy()
    for op in ops:
        if op[0] == "add":
            assert c.set_score(op[1], op[2]) == ref.set_score(op[1], op[2])
        elif op[0] == "remove":
            assert c.remove(op[1]) == ref.remove(op[1])
        elif op[0] == "delete_range":
            assert c.delete_range(op[1], op[2]) == ref.delete_range(op[1], op[2])
        elif len(ref):
            assert (c.pop_first() == ref.pop_first()) if op[0] == "pop_first" else \
                (c.pop_last() == ref.pop_last())
        assert c.to_listpack() == ref.to_listpack(), op
    assert c.dict == ref.dict
    assert sys.getsizeof(c) >= len(c.to_listpack())
