"""StrSet and StrDict (pyrepl/keyspace/_strtab.c) against their references, StrSetReference and
StrDictReference: the same answers to the same operations, the same iteration order and length,
through growth past each index width, deletions that leave holes, compaction and the automatic
shrink; keys of every length prefix (empty, 253/254/255 bytes, > 65535 bytes) and keys whose
32-bit hashes collide; the layout's invariants and its size, the random picks, pickling and
copies, and that the memory goes back after many operations."""

from __future__ import annotations

import copy
import gc
import pickle
import random
import sys
import tracemalloc
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.keyspace import strtab
from pyrepl.keyspace.strtab import StrDictReference, StrSetReference

needs_c = pytest.mark.skipif(strtab.NATIVE_SET is None,
                             reason=f"pyrepl runs as plain Python ({native.WHY_PURE})")
IMPLS = ["c", "reference"] if strtab.NATIVE_SET is not None else ["reference"]


def _set_type(impl: str):  # type: ignore[no-untyped-def]
    return strtab.NATIVE_SET if impl == "c" else StrSetReference


def _dict_type(impl: str):  # type: ignore[no-untyped-def]
    return strtab.NATIVE_DICT if impl == "c" else StrDictReference


def _colliding_pair() -> tuple[bytes, bytes]:
    """Two keys of one length whose hashes agree in their low 32 bits (this process's seed)."""
    seen: dict[int, bytes] = {}
    i = 0
    while True:
        k = b"c%08d" % i
        h = hash(k) & 0xFFFFFFFF
        if h in seen:
            return seen[h], k
        seen[h] = k
        i += 1


COLLIDING = _colliding_pair()
LONG_KEYS = [b"a" * 253, b"b" * 254, b"c" * 255, b"d" * 300, b"e" * 70000]
_KEYS = st.one_of(
    st.sampled_from([b"", b"x", b"member:1", *COLLIDING, *LONG_KEYS]),
    st.binary(max_size=10),
    st.integers(0, 40).map(lambda i: b"g%d" % i),
)
_VALUES = st.one_of(st.sampled_from([b"", b"v", b"1" * 100]), st.binary(max_size=6))
_NOT_BYTES = st.sampled_from(["x", 1, bytearray(b"x"), None])


def _blob_cost(k: bytes) -> int:
    hdr = 1 if len(k) < 254 else 5 if len(k) < 1 << 32 else 9
    return (hdr + len(k) + 15) & ~15


def _check_layout(t: object) -> None:
    """The invariants _strtab.c states, and __sizeof__ counting exactly what it holds."""
    s = t._stats()  # type: ignore[attr-defined]
    isize = s["index"]
    usable = isize * 2 // 3
    assert s["used"] == len(t)  # type: ignore[arg-type]
    assert s["used"] <= s["entries"] <= s["capacity"] <= usable
    assert s["used"] <= s["fill"] <= usable < isize
    assert s["index_width"] == (1 if isize <= 128 else 2 if isize <= 32768 else 4)
    keys: list[bytes] = list(t)  # type: ignore[call-overload]
    assert s["blob_bytes"] == sum(_blob_cost(k) for k in keys)
    es = 24 if isinstance(t, strtab.NATIVE_DICT) else 16
    assert sys.getsizeof(t) == (64 + isize * s["index_width"] + s["capacity"] * es
                                + s["blob_bytes"])


# -- StrSet -----------------------------------------------------------------------------------

_SET_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), _KEYS),
    st.tuples(st.just("update"), st.lists(_KEYS, max_size=5)),
    st.tuples(st.just("discard"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("remove"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("in"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("pop")),
    st.tuples(st.just("difference_update"), st.lists(st.one_of(_KEYS, _NOT_BYTES), max_size=5)),
    st.tuples(st.just("grow"), st.integers(1, 300)),
    st.tuples(st.just("purge"), st.integers(1, 4)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("intersection"), st.lists(_KEYS, max_size=5)),
    st.tuples(st.just("difference"), st.lists(_KEYS, max_size=5)),
    st.tuples(st.just("union"), st.lists(_KEYS, max_size=5)),
), max_size=40)


def _set_apply(s, op: tuple) -> object:  # type: ignore[no-untyped-def]
    name, *args = op
    if name == "in":
        return args[0] in s
    if name == "grow":
        base = len(s)
        s.update([b"grown:%d" % (base + i) for i in range(args[0])])
        return len(s)
    if name == "purge":     # every n-th member out, leaving holes through the entries
        for m in list(s)[::args[0]]:
            s.discard(m)
        return len(s)
    if name == "shrink":
        s.shrink()      # (whether it did differs: the reference has no layout to tighten)
        return None
    if name in ("remove", "pop"):
        try:
            return getattr(s, name)(*args)
        except KeyError:
            return "KeyError"
    if name in ("intersection", "difference", "union"):
        return getattr(s, name)(set(args[0]), args[0])
    return getattr(s, name)(*args)


def _check_random_set(c, ref) -> None:  # type: ignore[no-untyped-def]
    members = set(ref)
    if members:
        assert c.random_member() in members
    else:
        with pytest.raises(KeyError):
            c.random_member()
    for k in (0, 1, 2, len(members) // 2, len(members), len(members) + 3):
        got = c.sample(k)
        assert len(got) == min(k, len(members)) == len(set(got)) and set(got) <= members
        got = c.choices(k)
        assert len(got) == (k if members else 0) and set(got) <= members


@needs_c
@settings(max_examples=500, deadline=None)
@given(_SET_OPS)
def test_strset_answers_as_the_reference(ops: list[tuple]) -> None:
    c, ref = strtab.NATIVE_SET(), StrSetReference()
    for op in ops:
        assert _set_apply(c, op) == _set_apply(ref, op), op
        assert len(c) == len(ref) and list(c) == list(ref), op
        _check_layout(c)
    _check_random_set(c, ref)
    assert c == ref and ref == c and c == set(ref) and c == frozenset(ref) and not (c != ref)
    assert c.copy() == c and list(c.copy()) == list(c)
    assert list(pickle.loads(pickle.dumps(c))) == list(c)
    other = strtab.NATIVE_SET(list(ref)[::2])
    assert c.intersection(other) == set(ref).intersection(other)
    assert c.difference(other, {b"x"}) == set(ref).difference(other, {b"x"})
    c.difference_update(other)
    ref.difference_update(list(other))
    assert list(c) == list(ref)
    c.update(other)
    ref.update(list(other))
    assert list(c) == list(ref)


@settings(max_examples=100, deadline=None)
@given(_SET_OPS)
def test_the_set_reference_is_a_set_in_insertion_order(ops: list[tuple]) -> None:
    """Against a dict's keys (a set in insertion order), popping the last."""
    ref, model = StrSetReference(), dict[bytes, None]()
    for op in ops:
        got = _set_apply(ref, op)
        name, *args = op
        if name in ("add", "update", "grow"):
            for m in ([args[0]] if name == "add" else args[0] if name == "update" else
                      [b"grown:%d" % (len(model) + i) for i in range(args[0])]):
                model.setdefault(m, None)
        elif name in ("discard", "remove", "difference_update", "purge"):
            gone = ([args[0]] if name in ("discard", "remove") else args[0]
                    if name == "difference_update" else list(model)[::args[0]])
            assert name != "remove" or (got == "KeyError") == (
                type(args[0]) is not bytes or args[0] not in model)
            for m in gone:
                if type(m) is bytes:
                    model.pop(m, None)
        elif name == "pop":
            assert got == (model.popitem()[0] if model else "KeyError")
        elif name == "clear":
            model.clear()
        elif name == "in":
            assert got == (type(args[0]) is bytes and args[0] in model)
        elif name in ("intersection", "difference", "union"):
            assert got == getattr(set(model), name)(args[0])
        assert list(ref) == list(model) and len(ref) == len(model), op
    assert ref == set(model)
    _check_random_set(ref, ref)


# -- StrDict ----------------------------------------------------------------------------------

_DICT_OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), _KEYS, _VALUES),
    st.tuples(st.just("get"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("getitem"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("del"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("pop"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("pop_default"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("popitem")),
    st.tuples(st.just("setdefault"), _KEYS, _VALUES),
    st.tuples(st.just("update_dict"), st.dictionaries(_KEYS, _VALUES, max_size=4)),
    st.tuples(st.just("update_pairs"), st.lists(st.tuples(_KEYS, _VALUES), max_size=4)),
    st.tuples(st.just("in"), st.one_of(_KEYS, _NOT_BYTES)),
    st.tuples(st.just("grow"), st.integers(1, 300)),
    st.tuples(st.just("purge"), st.integers(1, 4)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("listing")),
), max_size=40)


def _dict_apply(d, op: tuple) -> object:  # type: ignore[no-untyped-def]
    name, *args = op
    try:
        if name == "set":
            d[args[0]] = args[1]
            return None
        if name == "getitem":
            return d[args[0]]
        if name == "del":
            del d[args[0]]
            return None
        if name == "pop_default":
            return d.pop(args[0], b"dflt")
        if name in ("update_dict", "update_pairs"):
            return d.update(args[0])
        if name == "in":
            return args[0] in d
        if name == "grow":
            base = len(d)
            d.update([(b"grown:%d" % (base + i), b"%d" % i) for i in range(args[0])])
            return len(d)
        if name == "purge":
            for k in list(d)[::args[0]]:
                del d[k]
            return len(d)
        if name == "shrink":
            d.shrink()
            return None
        if name == "listing":
            return d.keys(), d.values(), d.items()
        return getattr(d, name)(*args)
    except KeyError:
        return "KeyError"


def _check_random_dict(c, ref) -> None:  # type: ignore[no-untyped-def]
    items = dict(c.items())
    assert items == dict(ref.items())
    if items:
        assert c.random_key() in items
        k, v = c.random_item()
        assert items[k] is v
    else:
        with pytest.raises(KeyError):
            c.random_key()
        with pytest.raises(KeyError):
            c.random_item()
    for k in (0, 1, 2, len(items) // 2, len(items), len(items) + 3):
        got = c.sample(k)
        assert len(got) == min(k, len(items)) == len(set(got)) and set(got) <= items.keys()
        assert all(items[f] == v for f, v in c.sample(k, True))
        got = c.choices(k, True)
        assert len(got) == (k if items else 0) and all(items[f] == v for f, v in got)


@needs_c
@settings(max_examples=500, deadline=None)
@given(_DICT_OPS)
def test_strdict_answers_as_the_reference(ops: list[tuple]) -> None:
    c, ref = strtab.NATIVE_DICT(), StrDictReference()
    for op in ops:
        assert _dict_apply(c, op) == _dict_apply(ref, op), op
        assert len(c) == len(ref) and c.items() == ref.items(), op
        _check_layout(c)
    _check_random_dict(c, ref)
    assert c == ref and ref == c and c == dict(ref) and not (c != ref)
    assert c.copy() == c and c.copy().items() == c.items()
    assert pickle.loads(pickle.dumps(c)).items() == c.items()
    assert strtab.NATIVE_DICT(c).items() == c.items() == strtab.NATIVE_DICT(ref).items()
    for k in list(ref)[:5]:
        assert c[k] is c.get(k) and c.get(k) == ref[k]


@settings(max_examples=100, deadline=None)
@given(_DICT_OPS)
def test_the_dict_reference_is_a_dict_of_bytes(ops: list[tuple]) -> None:
    """Against a plain dict, given only bytes (a dict has no shrink; it lists views)."""
    ref, model = StrDictReference(), dict[bytes, bytes]()
    for op in ops:
        if any(type(a) is not bytes for a in op[1:] if not isinstance(a, (int, dict, list))):
            continue
        got = _dict_apply(ref, op)
        want = None if op[0] == "shrink" else _dict_apply(model, op)
        if op[0] == "listing":
            want = tuple(list(x) for x in want)  # type: ignore[attr-defined]
        assert got == want, op
        assert list(ref.items()) == list(model.items()), op
    assert ref == model
    _check_random_dict(ref, ref)


# -- deterministic cases ------------------------------------------------------------------------

@pytest.mark.parametrize("impl", IMPLS)
def test_growth_past_every_index_width_and_back(impl: str) -> None:
    """30,000 members (an int32 index), two thirds removed in random order (holes, then
    compaction and the automatic shrink), then pops down to empty: the order stays insertion
    order throughout, as the reference's."""
    rnd = random.Random(7)
    keys = [b"member:%d" % i for i in range(30000)]
    s, ref = _set_type(impl)(), StrSetReference()
    widths = set()
    for i, k in enumerate(keys):
        s.add(k)
        ref.add(k)
        if impl == "c" and i % 997 == 0:
            widths.add(s._stats()["index_width"])
    assert list(s) == list(ref) == keys
    gone = rnd.sample(keys, 20000)
    for k in gone:
        s.remove(k)
        ref.remove(k)
    assert list(s) == list(ref)
    while ref:
        assert s.pop() == ref.pop()
    assert len(s) == 0 and list(s) == []
    if impl == "c":
        assert widths == {1, 2, 4}
        _check_layout(s)
        assert s._stats() == {"used": 0, "entries": 0, "capacity": 0, "index": 8,
                              "index_width": 1, "fill": 0, "blob_bytes": 0}


@pytest.mark.parametrize("impl", IMPLS)
def test_dict_growth_and_deletions_keep_insertion_order(impl: str) -> None:
    d, ref = _dict_type(impl)(), {}
    for i in range(25000):
        k, v = b"field:%d" % i, b"value:%d" % i
        d[k] = v
        ref[k] = v
    for i in range(0, 25000, 3):
        del d[b"field:%d" % i]
        del ref[b"field:%d" % i]
    d[b"field:0"] = ref[b"field:0"] = b"back at the end"
    d[b"field:1"] = ref[b"field:1"] = b"updated in place"
    assert d.items() == list(ref.items())
    if impl == "c":
        _check_layout(d)


@needs_c
@pytest.mark.parametrize("seed", [1, 2])
def test_long_random_runs_answer_as_the_reference(seed: int) -> None:
    """40,000 seeded operations in phases that grow a set and a hash to thousands of keys and
    empty them (nearly) again, so that compaction, resizes and the automatic shrink run many
    times."""
    rnd = random.Random(seed)
    pool = [b"k%d" % i for i in range(6000)] + [b"", *COLLIDING, *LONG_KEYS[:4]]
    c, ref = strtab.NATIVE_SET(), StrSetReference()
    cd, refd = strtab.NATIVE_DICT(), StrDictReference()
    live: list[bytes] = []      # the members, for a uniform pick of one to delete
    where: dict[bytes, int] = {}

    def drop(k: bytes) -> None:
        i = where.pop(k)
        last = live.pop()
        if last != k:
            live[i] = last
            where[last] = i

    indexes = set()
    for phase in range(8):
        growing = phase % 2 == 0
        for n in range(5000):
            r = rnd.random()
            if r < (0.8 if growing else 0.05) or not live:
                k = rnd.choice(pool)
                c.add(k)
                ref.add(k)
                v = b"%d" % n
                cd[k] = v
                refd[k] = v
                if k not in where:
                    where[k] = len(live)
                    live.append(k)
            elif r < 0.9:
                k = rnd.choice(live) if not growing else rnd.choice(pool)
                assert (k in c) == (k in ref) == (k in where)
                c.discard(k)
                ref.discard(k)
                assert cd.pop(k, None) == refd.pop(k, None)
                if k in where:
                    drop(k)
            else:
                k = c.pop()
                assert k == ref.pop() and cd.popitem()[0] == refd.popitem()[0] == k
                drop(k)
            if n % 500 == 0:
                assert list(c) == list(ref) and cd.items() == refd.items()
                _check_layout(c)
                _check_layout(cd)
                indexes.add(c._stats()["index"])
        assert list(c) == list(ref) and cd.items() == refd.items()
    assert {8, 4096} <= indexes     # (grown to thousands of slots, shrunk back to 8)


@pytest.mark.parametrize("impl", IMPLS)
def test_long_empty_and_colliding_keys(impl: str) -> None:
    a, b = COLLIDING
    assert a != b and hash(a) & 0xFFFFFFFF == hash(b) & 0xFFFFFFFF and len(a) == len(b)
    keys = [b"", a, b, *LONG_KEYS, b"e" * 69999, b"e" * 70001]
    s = _set_type(impl)(keys)
    assert list(s) == keys and all(k in s for k in keys)
    assert b"e" * 70002 not in s and b"z" * 254 not in s
    s.remove(a)
    assert b in s and a not in s and list(s) == [k for k in keys if k != a]
    d = _dict_type(impl)((k, k[:3]) for k in keys)
    assert [d[k] for k in keys] == [k[:3] for k in keys]
    del d[b]
    assert d[a] == a[:3] and b not in d
    if impl == "c":
        _check_layout(s)
        _check_layout(d)


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_and_values_must_be_bytes(impl: str) -> None:
    s, d = _set_type(impl)(), _dict_type(impl)()
    for bad in ("x", 1, bytearray(b"x"), None):
        with pytest.raises(TypeError):
            s.add(bad)
        with pytest.raises(TypeError):
            s.update([b"ok", bad])
        with pytest.raises(TypeError):
            d[bad] = b"v"
        with pytest.raises(TypeError):
            d[b"k"] = bad
        with pytest.raises(TypeError):
            d.update({b"k": bad})
        assert bad not in s and bad not in d and d.get(bad, 5) == 5
        s.discard(bad)
        with pytest.raises(KeyError):
            s.remove(bad)
        with pytest.raises(KeyError):
            d[bad]
    with pytest.raises(TypeError):
        d.setdefault(b"k")      # (None is no value for a StrDict)
    with pytest.raises(TypeError):
        _set_type(impl)([b"a", "b"])
    with pytest.raises(ValueError):
        d.update([(b"k",)])
    assert list(s) == [b"ok"] and d.items() == [] and b"k" not in d


@pytest.mark.parametrize("impl", IMPLS)
def test_changing_size_during_iteration_raises(impl: str) -> None:
    s = _set_type(impl)([b"a", b"b", b"c"])
    for mutate in (lambda: s.add(b"new"), lambda: s.discard(b"b"), s.pop):
        it = iter(s)
        next(it)
        mutate()
        with pytest.raises(RuntimeError):
            next(it)
    d = _dict_type(impl)([(b"a", b"1"), (b"b", b"2")])
    it = iter(d)
    next(it)
    d[b"a"] = b"changed"        # (a value replaced: not a change of size)
    assert next(it) == b"b"
    it = iter(d)
    next(it)
    d[b"z"] = b"26"
    with pytest.raises(RuntimeError):
        next(it)
    it = iter(d)
    del d[b"z"]
    with pytest.raises(RuntimeError):
        next(it)


@needs_c
def test_an_add_and_a_remove_between_two_steps_are_noticed() -> None:
    """(dict misses this: the size is the same. The C types count changes, not the size.)"""
    s = strtab.NATIVE_SET([b"a", b"b", b"c"])
    it = iter(s)
    next(it)
    s.add(b"d")
    s.discard(b"d")
    with pytest.raises(RuntimeError):
        next(it)
    it = iter(s)
    assert it.__length_hint__() == 3
    next(it)
    assert it.__length_hint__() == 2


@pytest.mark.parametrize("impl", IMPLS)
def test_pickles_and_copies_keep_contents_and_order(impl: str) -> None:
    s = _set_type(impl)([b"z", b"", b"a" * 300, b"m"])
    s.discard(b"")
    d = _dict_type(impl)([(b"z", b"1"), (b"a" * 300, b""), (b"m", b"3")])
    for x in (s, d):
        for y in (pickle.loads(pickle.dumps(x)), copy.copy(x), copy.deepcopy(x), x.copy()):
            assert type(y) is type(x) and list(y) == list(x) and y == x
    assert d.copy().items() == d.items()
    c = s.copy()
    c.add(b"only in the copy")
    assert b"only in the copy" not in s


@pytest.mark.parametrize("impl", IMPLS)
def test_set_algebra_and_equality(impl: str) -> None:
    S = _set_type(impl)
    s = S([b"a", b"b", b"c", b"d"])
    assert s.intersection({b"a", b"b", b"x"}, [b"b", b"a"], S([b"a", b"b"])) == {b"a", b"b"}
    assert s.intersection(iter([b"c"]), {b"c": 1}) == {b"c"}
    assert s.intersection() == set(s) and s.difference() == set(s)
    assert s.difference({b"a"}, [b"b"], S([b"c"])) == {b"d"}
    assert s.union([b"x"], S([b"y"])) == {b"a", b"b", b"c", b"d", b"x", b"y"}
    assert s == {b"a", b"b", b"c", b"d"} == s and s != {b"a"} and s != S([b"a"])
    assert s == frozenset(s) and s == S(reversed(list(s))) and s != [b"a", b"b", b"c", b"d"]
    s.difference_update(s)
    assert len(s) == 0 and s == set()
    D = _dict_type(impl)
    d = D([(b"a", b"1"), (b"b", b"2")])
    assert d == {b"b": b"2", b"a": b"1"} and d != {b"a": b"1"} and d != {b"a": b"1", b"b": b"x"}
    assert d == D([(b"b", b"2"), (b"a", b"1")]) and d != [(b"a", b"1"), (b"b", b"2")]
    with pytest.raises(TypeError):
        hash(s)
    with pytest.raises(TypeError):
        hash(d)


@pytest.mark.parametrize("impl", IMPLS)
def test_pop_and_popitem_take_the_last(impl: str) -> None:
    s = _set_type(impl)([b"a", b"b", b"c"])
    s.discard(b"c")
    assert s.pop() == b"b" and s.pop() == b"a"
    with pytest.raises(KeyError):
        s.pop()
    d = _dict_type(impl)([(b"a", b"1"), (b"b", b"2")])
    assert d.popitem() == (b"b", b"2") and d.pop(b"a") == b"1" and d.pop(b"a", None) is None
    with pytest.raises(KeyError):
        d.popitem()


@pytest.mark.parametrize("impl", IMPLS)
def test_dict_answers_the_stored_value_object(impl: str) -> None:
    v = b"".join([b"value", b":1"])
    d = _dict_type(impl)()
    d[b"k"] = v
    assert d[b"k"] is v and d.get(b"k") is v and d.setdefault(b"k", b"other") is v
    assert d.values()[0] is v and d.items()[0][1] is v and d.pop(b"k") is v
    assert d.setdefault(b"n", v) is v and d[b"n"] is v


@needs_c
def test_sizes_of_a_small_set_and_a_small_hash() -> None:
    """Ten 7-byte members: a 64-byte object, a 16-slot int8 index, ten 16-byte entries and ten
    16-byte blobs: 400 B (a Python set of ten bytes objects: ~1,200 B)."""
    members = [b"member%d" % i for i in range(10)]
    assert {len(m) for m in members} == {7}
    s = strtab.NATIVE_SET(members)
    assert sys.getsizeof(s) == 64 + 16 + 10 * 16 + 10 * 16 == 400
    grown = strtab.NATIVE_SET()
    for m in members:
        grown.add(m)
    assert sys.getsizeof(grown) == 400
    d = strtab.NATIVE_DICT((m, b"v") for m in members)
    assert sys.getsizeof(d) == 64 + 16 + 10 * 24 + 10 * 16
    assert sys.getsizeof(strtab.NATIVE_SET()) == 64 + 8
    assert sys.getsizeof(strtab.NATIVE_SET([b"x" * 300])) == 64 + 8 + 16 + 320
    assert s.shrink() is False
    s.update([b"x", b"y"])
    assert s.shrink() is True and s._stats()["capacity"] == 12 and s.shrink() is False
    _check_layout(s)


@needs_c
def test_deletions_shrink_the_table_on_their_own() -> None:
    s = strtab.NATIVE_SET(b"%d" % i for i in range(100000))
    big = sys.getsizeof(s)
    for i in range(99990):
        s.remove(b"%d" % i)
    _check_layout(s)
    st_ = s._stats()
    assert st_["index"] <= 32 and st_["capacity"] <= 20 and sys.getsizeof(s) < big / 1000
    # pops from the end leave no holes and shrink too
    s = strtab.NATIVE_SET(b"%d" % i for i in range(100000))
    while len(s) > 3:
        s.pop()
    assert s._stats()["index"] <= 16 and list(s) == [b"0", b"1", b"2"]


@needs_c
def test_random_picks_are_uniform_and_seeded() -> None:
    """Uniform over the live members though a third of the entries are holes; sample's two
    ways (a shuffle of all, random picks) give distinct members; seed() repeats a draw."""
    from pyrepl.keyspace import _strtab  # type: ignore[attr-defined]
    _strtab.seed(42)
    s = strtab.NATIVE_SET(b"m%d" % i for i in range(30))
    for i in range(0, 30, 3):
        s.remove(b"m%d" % i)
    assert s._stats()["entries"] - len(s) > 0
    counts = Counter(s.random_member() for _ in range(20000))
    assert set(counts) == set(s) and max(counts.values()) < 1.25 * min(counts.values())
    counts = Counter(m for _ in range(2000) for m in s.sample(3))
    assert set(counts) == set(s) and max(counts.values()) < 1.4 * min(counts.values())
    for k in (1, 5, 6, 7, 19, 20, 21):
        got = s.sample(k)
        assert len(got) == min(k, 20) == len(set(got)) and set(got) <= set(s)
    _strtab.seed(1)
    first = (s.sample(5), s.choices(5), s.random_member())
    _strtab.seed(1)
    assert (s.sample(5), s.choices(5), s.random_member()) == first
    d = strtab.NATIVE_DICT((b"f%d" % i, b"%d" % i) for i in range(10))
    counts = Counter(d.random_key() for _ in range(10000))
    assert len(counts) == 10 and max(counts.values()) < 1.25 * min(counts.values())
    assert strtab.NATIVE_SET().choices(3) == [] and strtab.NATIVE_SET().sample(3) == []


@needs_c
def test_subclasses_work_and_copy_answers_the_base_type() -> None:
    class HashWithTTL(strtab.NATIVE_DICT):
        __slots__ = ("ttl",)

    h = HashWithTTL([(b"a", b"1")])
    h.ttl = {b"a": 5}
    h[b"b"] = b"2"
    assert h.items() == [(b"a", b"1"), (b"b", b"2")] and type(h.copy()) is strtab.NATIVE_DICT
    assert sys.getsizeof(h) > sys.getsizeof(h.copy())
    assert pickle.loads(pickle.dumps(strtab.NATIVE_SET([b"x"]))) == {b"x"}


@needs_c
def test_memory_goes_back_after_many_operations() -> None:
    """100k operations of every kind, then everything dropped: what tracemalloc counts comes
    back (no blob, entry or reference leaked), and the values' reference counts too."""
    value = b"".join([b"shared", b"value"])
    refs = sys.getrefcount(value)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(5):
        s, d = strtab.NATIVE_SET(), strtab.NATIVE_DICT()
        for i in range(2000):
            k = b"key:%d" % i
            s.add(k)
            d[k] = value
            if i % 3 == 0:
                s.discard(b"key:%d" % (i // 2))
                d.pop(b"key:%d" % (i // 2), None)
        s.update([b"x" * 300, b"y" * 70000])
        d.update({b"x" * 300: value})
        d.setdefault(b"sd", value)
        c, e = s.copy(), d.copy()
        list(s), d.items(), d.values(), s.sample(50), d.sample(50, True), d.choices(9, True)
        s.intersection(c, {b"key:1"}), s.difference(c), s.union(c)
        pickle.loads(pickle.dumps(d))
        while len(s) > 100:
            s.pop()
            d.popitem()
        s.shrink(), d.shrink()
        d.clear()
        del s, d, c, e
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after - before < 4096, after - before
    assert sys.getrefcount(value) == refs


def test_the_module_binds_the_c_types_or_the_references() -> None:
    if native.PURE:
        assert strtab.StrSet is StrSetReference and strtab.StrDict is StrDictReference
        assert strtab.NATIVE_SET is None and strtab.NATIVE_DICT is None
    else:
        assert strtab.StrSet.__module__ == strtab.StrDict.__module__ == "pyrepl.keyspace._strtab"
