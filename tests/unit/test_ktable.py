"""pyrepl/keyspace/ktable.py and _ktable.c: the keyspace's table is a correct mapping (against a
plain dict, over thousands of random operations with enough deletions to compact and shrink),
the C table and the Python reference agree to the age (the same seeded draws), the ageing
follows Redis 7.0's rules (ageing.py), sample() answers live distinct keys and reaches them
all, and the C table neither leaks references nor hides cycles from the collector."""

from __future__ import annotations

import gc
import random
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from pyrepl import native
from pyrepl.keyspace import ageing, ktable
from pyrepl.keyspace.ktable import KeyTableReference

_C = native.load("pyrepl.keyspace._ktable")
C_TABLE: Any = None if _C is None else _C.KeyTable
needs_c = pytest.mark.skipif(_C is None, reason="plain Python (PYREPL_PURE=1 or not built): "
                                                "the C KeyTable is not loaded")

IMPLS = [pytest.param(KeyTableReference, id="reference"),
         pytest.param(C_TABLE, id="C", marks=needs_c)]

T0 = 1_700_000_000_000      # a unix time in ms


@pytest.fixture(autouse=True)
def _ageing_state() -> Iterator[None]:
    ktable.configure(False, 10, 1)
    ktable.set_clock(T0)
    ktable.seed(12345)
    yield
    ktable.configure(False, 10, 1)
    ktable.set_clock(0)


class Collider:
    """A key whose hash collides with its peers: the generic comparison path."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return self.n % 3

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collider) and other.n == self.n

    def __repr__(self) -> str:
        return f"Collider({self.n})"


def test_the_selection_is_the_c_table_unless_plain_python() -> None:
    assert ktable.KeyTable is (KeyTableReference if native.PURE else C_TABLE)


# -- the mapping ------------------------------------------------------------------------------

def _key(rng: random.Random, spread: int) -> Any:
    r = rng.random()
    n = rng.randrange(spread)
    if r < 0.85:
        return b"key:%d" % n
    if r < 0.92:
        return n
    if r < 0.96:
        return ("t", n % 50)
    return Collider(n % 40)


# strings that are integers, which the C table keeps in the entry (_ktable.c, "values"), at the
# edges of its 63 bits and of the canonical form, and values it keeps as references
_INT_EDGES = [b"0", b"-1", b"4611686018427387903", b"4611686018427387904",
              b"-4611686018427387904", b"-4611686018427387905", b"9223372036854775807",
              b"-9223372036854775808", b"99999999999999999999", b"123456789012345678901",
              b"-0", b"01", b"+1", b" 1", b"1 ", b"", b"-", b"1.5"]


def _value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.3:
        return rng.randrange(1000)
    if r < 0.6:
        return b"%d" % rng.randrange(-10**6, 10**6)
    if r < 0.8:
        return rng.choice(_INT_EDGES)
    return b"v%d" % rng.randrange(1000)


def _random_ops(tables: list[Any], ref: dict[Any, Any], rng: random.Random, n_ops: int,
                spread: int) -> None:
    """The same random operations on each table and on a dict ``ref`` holding what they
    hold; every answer compared."""
    for step in range(n_ops):
        op = rng.random()
        k = _key(rng, spread)
        if op < 0.35:
            v = _value(rng)
            ref[k] = v
            for t in tables:
                t[k] = v
        elif op < 0.55:
            want = ref.pop(k, None)
            for t in tables:
                if want is None:
                    with pytest.raises(KeyError):
                        del t[k]
                else:
                    del t[k]
        elif op < 0.62:
            want = ref.pop(k, "none")
            assert all(t.pop(k, "none") == want for t in tables)
        elif op < 0.75:
            want = ref.get(k)
            assert all(t.get(k) == want for t in tables)
            assert all(t.peek(k) == want for t in tables)
            assert all((k in t) == (k in ref) for t in tables)
            if want is not None:
                assert all(t[k] == want for t in tables)
        elif op < 0.8:
            want = ref.setdefault(k, step)
            assert all(t.setdefault(k, step) == want for t in tables)
        elif op < 0.82:
            for t in tables:
                t.shrink()
        elif op < 0.83:   # (no effect but speed: the ages, checked by the callers, included)
            keys = [_key(rng, spread) for _ in range(rng.randrange(80))]
            for t in tables:
                t.prefetch(keys)
        elif op < 0.84 and rng.random() < 0.05:
            ref.clear()
            for t in tables:
                t.clear()
        if step % 97 == 0 or step == n_ops - 1:
            for t in tables:
                assert len(t) == len(ref)
                assert list(t) == list(ref)
                assert list(t.items()) == list(ref.items())
                assert list(t.values()) == list(ref.values())
                assert t == ref


@pytest.mark.parametrize("impl", IMPLS)
def test_a_correct_mapping_after_thousands_of_random_operations(impl: Any) -> None:
    rng = random.Random(7)
    t = impl()
    # a growing phase, a deleting phase (compaction, holes), a small spread (shrink)
    ref: dict[Any, Any] = {}
    _random_ops([t], ref, rng, 6000, 3000)
    for k in list(ref)[: len(ref) * 19 // 20]:
        del t[k]
        del ref[k]
    assert t.shrink() is True
    assert t == ref and list(t) == list(ref)
    _random_ops([t], ref, random.Random(8), 4000, 200)
    assert t == ref


@needs_c
def test_the_c_table_the_reference_and_a_dict_in_step() -> None:
    """Both tables and a dict under one sequence of operations, every answer compared; the
    C table's layout (holes, compactions, growths, shrinks) exercised on the way."""
    c, r = C_TABLE(), KeyTableReference()
    ref: dict[Any, Any] = {}
    rebuilds = set()
    rng = random.Random(21)
    for spread in (5000, 300, 40, 3000):
        _random_ops([c, r], ref, rng, 3000, spread)
        rebuilds.add(c._stats()["index"])
        assert [c.age(k) for k in c] == [r.age(k) for k in r]
    assert len(rebuilds) > 1


@needs_c
def test_the_c_table_and_the_reference_agree_to_the_age() -> None:
    for lfu in (False, True):
        ktable.configure(lfu, 1, 1)
        ktable.seed(99)
        c, r = C_TABLE(), KeyTableReference()
        rng = random.Random(11)
        now = T0
        for step in range(8000):
            if step % 300 == 0:
                now += rng.choice([0, 1000, 61_000, 3_600_000])
                ktable.set_clock(now)
            k = b"k%d" % rng.randrange(400)
            op = rng.random()
            if op < 0.4:
                c[k] = r[k] = step
            elif op < 0.7:
                assert c.get(k) == r.get(k)
            elif op < 0.8:
                assert c.pop(k, None) == r.pop(k, None)
            elif op < 0.9:
                assert c.peek(k) == r.peek(k)
            else:
                assert c.setdefault(k, 0) == r.setdefault(k, 0)
        assert list(c) == list(r)
        assert [c.age(k) for k in c] == [r.age(k) for k in r]
        if lfu:     # the counters moved (increments and decay both happened)
            assert len({(c.age(k) or 0) & 255 for k in c}) > 3


def test_the_expected_errors_and_forms() -> None:
    for impl in [KeyTableReference] + ([] if C_TABLE is None else [C_TABLE]):
        t = impl()
        with pytest.raises(KeyError):
            t[b"nope"]
        with pytest.raises(KeyError):
            t.pop(b"nope")
        with pytest.raises(TypeError):
            t[[1]] = 1          # unhashable
        with pytest.raises(TypeError):
            hash(t)
        t.update({b"a": 1})
        t.update([(b"b", 2)])
        t.update(impl.from_dict({b"c": 3}))
        assert dict(t.items()) == {b"a": 1, b"b": 2, b"c": 3}
        assert len(t.keys()) == 3 and b"a" in t.keys() and (b"b", 2) in t.items()
        assert 3 in t.values()
        c = t.copy()
        assert c == t and c is not t and type(c) is impl
        assert not impl() and bool(t)
        assert repr(impl.from_dict({b"x": 1})) == "KeyTable({b'x': 1})"
        assert impl(ageing=False).ageing is False and impl().ageing is True
        assert t != {b"a": 1}
        with pytest.raises(ValueError):
            t.set_age(b"a", 1 << 24)
        with pytest.raises(KeyError):
            t.set_age(b"nope", 1)


@pytest.mark.parametrize("impl", IMPLS)
def test_changing_the_size_while_iterating_raises(impl: Any) -> None:
    for view in (lambda t: t, lambda t: t.keys(), lambda t: t.values(), lambda t: t.items()):
        t = impl.from_dict({b"k%d" % i: i for i in range(20)})
        it = iter(view(t))
        next(it)
        t[b"new"] = 1
        with pytest.raises(RuntimeError):
            next(it)
        t = impl.from_dict({b"k%d" % i: i for i in range(20)})
        it = iter(view(t))
        next(it)
        del t[b"k5"]
        with pytest.raises(RuntimeError):
            next(it)
    t = impl.from_dict({b"k%d" % i: i for i in range(20)})
    for k in t:             # an overwrite is no change of size
        t[k] = 0
    assert set(t.values()) == {0}


# -- ageing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", IMPLS)
def test_lru_stamps_on_get_and_set_but_not_on_peek_contains_or_iteration(impl: Any) -> None:
    t = impl()
    t[b"a"] = 1
    clock = ageing.lru_clock(T0)
    assert t.age(b"a") == clock
    ktable.set_clock(T0 + 5000)
    _ = t.peek(b"a"), b"a" in t, list(t), list(t.items()), t.age(b"a")
    assert t.age(b"a") == clock
    assert t.get(b"a") == 1 and t.age(b"a") == clock + 5
    ktable.set_clock(T0 + 9000)
    assert t[b"a"] == 1 and t.age(b"a") == clock + 9
    ktable.set_clock(T0 + 12000)
    t[b"a"] = 2                     # an overwrite touches
    assert t.age(b"a") == clock + 12
    ktable.set_clock(T0 + 20000)
    t.setdefault(b"a", 0)
    assert t.age(b"a") == clock + 20
    assert t.age(b"missing") is None
    t.set_age(b"a", 77)
    assert t.age(b"a") == 77
    ktable.set_clock((1 << 24) * 1000 + 3000)  # the clock wraps at 24 bits
    t[b"w"] = 0
    assert t.age(b"w") == 3


@pytest.mark.parametrize("impl", IMPLS)
def test_a_table_without_ageing_never_stamps(impl: Any) -> None:
    t = impl(ageing=False)
    t[b"a"] = 1
    ktable.set_clock(T0 + 50_000)
    t.get(b"a")
    t[b"a"] = 2
    assert t.age(b"a") == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_lfu_initial_value_increments_and_decay(impl: Any) -> None:
    ktable.configure(True, 10, 1)
    t = impl()
    t[b"a"] = 1
    minutes = ageing.lfu_minutes(T0)
    assert t.age(b"a") == (minutes << 8) | ageing.LFU_INIT_VAL
    # at counter 5 an access always increments (probability 1 / (0 * 10 + 1))
    t.get(b"a")
    assert t.age(b"a") == (minutes << 8) | 6
    # many accesses: logarithmic, so far below the number of accesses
    for _ in range(1000):
        t.get(b"a")
    counter = t.age(b"a") & 255
    assert 7 < counter < 40
    # 3 minutes later with a decay time of 1: three taken off, one maybe added
    ktable.set_clock(T0 + 3 * 60_000)
    t.peek(b"a")
    assert t.age(b"a") & 255 == counter           # (peek: no touch)
    t.get(b"a")
    after = t.age(b"a")
    assert after >> 8 == ageing.lfu_minutes(T0 + 3 * 60_000)
    assert counter - 3 <= after & 255 <= counter - 2
    # the same arithmetic as ageing.lfu_touch with the same draw
    ktable.seed(5)
    draw = ktable._Splitmix64(5).random
    before = t.age(b"a")
    ktable.set_clock(T0 + 60 * 60_000)
    t.get(b"a")
    assert t.age(b"a") == ageing.lfu_touch(before, T0 + 60 * 60_000, 10, 1, draw)
    t.set_age(b"a", (ageing.lfu_minutes(T0 + 60 * 60_000) << 8) | 255)    # saturated: stays
    t.get(b"a")
    assert t.age(b"a") & 255 == 255


# -- sample -----------------------------------------------------------------------------------

@pytest.mark.parametrize("impl", IMPLS)
def test_sample_answers_live_distinct_keys_and_reaches_them_all(impl: Any) -> None:
    t = impl()
    assert t.sample(5) == []
    for i in range(2000):
        t[b"k%d" % i] = i
    for i in range(0, 2000, 3):
        del t[b"k%d" % i]
    live = set(t)
    seen: set[Any] = set()
    for _ in range(3000):
        s = t.sample(5)
        assert 0 < len(s) <= 5 and len(set(s)) == len(s) and set(s) <= live
        seen.update(s)
    assert len(seen) > 0.95 * len(live)
    assert len(t.sample(0)) == 0
    big = t.sample(200)
    assert len(set(big)) == len(big) > 100 and set(big) <= live
    small = impl.from_dict({b"a": 1, b"b": 2})
    assert sorted(small.sample(10)) == [b"a", b"b"]


# -- memory (C) -------------------------------------------------------------------------------

@needs_c
def test_shrink_gives_memory_back_and_entries_are_24_bytes() -> None:
    t = C_TABLE()
    empty = sys.getsizeof(t)
    for i in range(100_000):
        t[b"k%d" % i] = None
    full = sys.getsizeof(t)
    st = t._stats()
    assert full - empty < st["index"] * 4 + st["capacity"] * 24 + 64
    assert st["capacity"] <= 1.5 * st["used"] + 8     # entries grown by half, not for the index
    for i in range(99_000):
        del t[b"k%d" % i]
    assert t.shrink() is True and t.shrink() is False
    assert sys.getsizeof(t) < full / 20
    assert list(t) == [b"k%d" % i for i in range(99_000, 100_000)]


@needs_c
def test_no_reference_leaks() -> None:
    value, key = object(), b"a key that is not interned %d" % 1
    before = sys.getrefcount(value), sys.getrefcount(key)
    t = C_TABLE()
    for i in range(50):
        t[b"k%d" % i] = value
    t[key] = value
    t[key] = value
    t.get(key)
    t.setdefault(key, value)
    t.peek(key)
    _ = list(t.items()), list(t.values()), t.copy(), t.sample(10)
    del _
    t.pop(key)
    t.update({key: value})
    del t[key]
    t.setdefault(key, value)
    assert sys.getrefcount(value) == before[0] + 51
    t.clear()
    assert (sys.getrefcount(value), sys.getrefcount(key)) == before
    t = C_TABLE.from_dict({key: value})
    del t
    assert (sys.getrefcount(value), sys.getrefcount(key)) == before


@needs_c
def test_a_string_that_is_an_integer_is_kept_in_the_entry_and_read_back_as_it_was() -> None:
    """Redis's OBJ_ENCODING_INT: the entry keeps the integer, not the bytes object (no reference
    held, ~40 B a key less), and every read makes the same bytes again."""
    ints = [b"%d" % v for v in (0, 7, -7, 10**18, -(10**18), (1 << 62) - 1, -(1 << 62))]
    kept = [b"%d" % v for v in ((1 << 62), -(1 << 62) - 1, (1 << 63) - 1)] + [
        b"-0", b"007", b"+1", b"1 ", b"", b"12345678901234567890123", b"x"]
    t = C_TABLE()
    for v in ints + kept:
        before = sys.getrefcount(v)
        t[b"k"] = v
        held = sys.getrefcount(v) - before
        assert held == (0 if v in ints else 1), v
        got = t[b"k"]
        assert got == v and type(got) is bytes
        assert t.get(b"k") == t.peek(b"k") == t.setdefault(b"k", b"other") == v
        assert list(t.values()) == [v] and list(t.items()) == [(b"k", v)]
        assert t == {b"k": v} and t.copy() == t and repr(t) == repr({b"k": v}).join(
            ("KeyTable(", ")"))
        assert t.pop(b"k") == v and len(t) == 0
        t.setdefault(b"k", v)
        assert t[b"k"] == v
        del t[b"k"]
    import tracemalloc
    tracemalloc.start()
    try:
        for name, make in (("ints", lambda i: b"%d" % (i * 7919)), ("text", lambda i: b"v%06d" % i)):
            t = C_TABLE()
            keys = [b"n:%d" % i for i in range(20_000)]
            base = tracemalloc.get_traced_memory()[0]
            for k in keys:
                t[k] = make(int(k[2:]))
            grown = (tracemalloc.get_traced_memory()[0] - base) / len(keys)
            if name == "ints":
                per_int = grown
            else:
                assert grown - per_int >= 32, (per_int, grown)   # a bytes object a key saved
            assert all(t[k] == make(int(k[2:])) for k in keys)
            del t
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_cycle_through_a_value_is_collected(impl: Any) -> None:
    class Box:
        pass

    t = impl()
    b = Box()
    t[b"self"] = [t, b]
    alive = weakref.ref(b)
    del t, b
    gc.collect()
    assert alive() is None


@needs_c
def test_a_table_of_strings_stays_out_of_the_collector() -> None:
    t = C_TABLE()
    t[b"a"] = b"b"
    assert not gc.is_tracked(t)
    t[b"h"] = {}
    assert gc.is_tracked(t)


# -- the keyspace on KeyTables (a ServerCore with a fake clock) --------------------------------

def test_the_databases_hold_keytables_through_flush_swap_and_reload(tmp_path: Any) -> None:
    from tests.support.cores import CoreHarness

    h = CoreHarness()
    db = h.core.dbs[0]
    assert type(db.data) is ktable.KeyTable and db.data.ageing
    assert type(db.expires) is ktable.KeyTable and not db.expires.ageing
    h.run("SET", "k", "v")
    h.run("SWAPDB", "0", "1")
    assert type(h.core.dbs[1].data) is ktable.KeyTable and b"k" in h.core.dbs[1].data
    h.run("FLUSHALL")
    assert type(h.core.dbs[1].data) is ktable.KeyTable and not h.core.dbs[1].data
    h.run("SET", "a", "1")
    h.run("PEXPIRE", "a", "100000")
    h.core.dbs[0].replace({b"x": b"1"}, {b"x": 5})     # (a dict is copied into a table)
    assert type(h.core.dbs[0].data) is ktable.KeyTable
    assert type(h.core.dbs[0].expires) is ktable.KeyTable and not h.core.dbs[0].expires.ageing


def test_reads_stamp_ages_as_redis_and_notouch_reads_do_not() -> None:
    from tests.support.cores import T0, CoreHarness

    h = CoreHarness()
    data = h.core.dbs[0].data
    h.run("SET", "k", "1")              # the C hot path, where the extensions run
    h.run("RPUSH", "l", "x")
    start = ageing.lru_clock(T0)
    assert data.age(b"k") == start
    h.core.tick(T0 + 7000)
    for cmd in (("EXISTS", "k"), ("TYPE", "k"), ("TTL", "k"), ("PTTL", "k"),
                ("OBJECT", "ENCODING", "k"), ("SCAN", "0", "TYPE", "string"), ("KEYS", "*"),
                ("RANDOMKEY",), ("DBSIZE",)):
        h.run(*cmd)
        assert data.age(b"k") == start, cmd
    for n, cmd in enumerate((("GET", "k"), ("TOUCH", "k"), ("INCR", "k"), ("SET", "k", "2"),
                             ("APPEND", "k", "x"), ("STRLEN", "k"))):
        h.core.tick(T0 + 10_000 * (n + 1))
        h.run(*cmd)
        assert data.age(b"k") == ageing.lru_clock(T0 + 10_000 * (n + 1)), cmd
    h.core.tick(T0 + 100_000)
    h.run("LPUSH", "l", "y")
    assert data.age(b"l") == ageing.lru_clock(T0 + 100_000)


def test_randomkey_and_the_cron_giving_memory_back() -> None:
    from tests.support.cores import T0, CoreHarness

    h = CoreHarness()
    assert h.run("RANDOMKEY") == b"$-1\r\n"
    for i in range(3000):
        h.run("SET", f"k{i}", "v")
    h.run("PEXPIRE", "k7", "100000")
    db = h.core.dbs[0]
    assert db.sample_keys(5, volatile=True) == [b"k7"]
    assert len(set(db.sample_keys(5))) == 5 and db.age(b"k1") == ageing.lru_clock(T0)
    assert db.age(b"nope") is None
    assert h.run("RANDOMKEY").split(b"\r\n")[1].startswith(b"k")
    data = h.core.dbs[0].data
    before = data._stats()["capacity"]
    for i in range(2990):
        h.run("DEL", f"k{i}")
    h.core.tick(T0 + 100)       # databasesCron: tryResizeHashTables
    assert h.core.dbs[0].data._stats()["capacity"] < before / 10
    assert sorted(h.core.dbs[0].data) == sorted(b"k%d" % i for i in range(2990, 3000))


@pytest.mark.parametrize("impl", IMPLS)
def test_entry_at_says_where_the_value_is_held(impl: Any) -> None:
    """DEBUG OBJECT's "at:": a value object's address; in the C table an integer kept in the
    entry is at the entry's, the same while it changes."""
    t = impl()
    t[b"s"] = b"text"
    assert t.entry_at(b"s") == id(t.peek(b"s"))
    t[b"n"] = b"20000"
    at = t.entry_at(b"n")
    t[b"n"] = b"20001"
    if impl is KeyTableReference:       # the reference holds the new bytes object
        assert t.entry_at(b"n") == id(t.peek(b"n"))
    else:                               # the same entry, changed in place
        assert t.entry_at(b"n") == at
    with pytest.raises(KeyError):
        t.entry_at(b"missing")


@pytest.mark.parametrize("impl", IMPLS)
def test_prefetch_changes_nothing(impl: Any) -> None:
    """prefetch (a run's lookups started early) stamps no age and draws nothing from the LFU
    generator, moves no entry, does not disturb an iteration, skips what is not bytes or not
    there, takes more than its 64 keys (the rest ignored), and wants a list."""
    ktable.configure(True, 10, 1)    # (LFU: a touch draws from the generator)
    keys = [b"key:%d" % i for i in range(0, 600, 3)] + [7, Collider(4), "text", None, b""]

    def made() -> Any:
        t = impl()
        for i in range(300):
            t[b"key:%d" % i] = b"v%d" % i if i % 3 else b"%d" % i
        t[7] = b"seven"
        t[Collider(4)] = b"c"
        return t

    def ages_after_reads(t: Any, prefetch: bool) -> list[Any]:
        ktable.seed(5)
        if prefetch:
            t.prefetch(keys)
        for _ in range(4):
            for k in list(t):
                t.get(k)
        return [(k, t.peek(k), t.age(k)) for k in t]

    t = made()
    before = [(k, t.peek(k), t.age(k)) for k in t]
    it = iter(t)
    next(it)
    t.prefetch(keys)
    t.prefetch([])
    next(it)                                   # (an iterator sees no change)
    assert [(k, t.peek(k), t.age(k)) for k in t] == before
    assert ages_after_reads(made(), True) == ages_after_reads(made(), False)
    empty = impl(ageing=False)
    empty.prefetch(keys)
    assert len(empty) == 0
    with pytest.raises(TypeError):
        t.prefetch(tuple(keys))
