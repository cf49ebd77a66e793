"""The cluster's key -> hash slot function and the keyspace table's per-slot index.

pyrepl/keyspace/hashslot.py (the reference) and its C version (pyrepl/keyspace/_hashslot.h, by
pyrepl.keyspace._ktable) answer Redis's crc16 and keyHashSlot: vectors read from a real
redis-server 7.0.15 (CLUSTER KEYSLOT), the hash-tag rule as a property, and the two held equal
by hypothesis. The index (KeyTable.track_slots, slot_count, slot_keys) is driven by a hypothesis
state machine through the C table and the Python reference at once (sets, overwrites, deletions,
pops, setdefault, clear, copies, shrinks, bulk deletions that make the C table compact, the
index turned on at any point) and checked after every step against a model: the keys in
insertion order, an overwrite keeping a key's place, so a slot's keys newest first are the
model's keys of that slot read backwards. Then the same through ``Database`` and a real
ServerCore: the C handlers and the C runs of plain commands (which write through the table's C
API) and the Python handlers, FLUSHALL, FLUSHDB, DEBUG RELOAD, a replica's ``replace``. Under
PYREPL_PURE=1 the C parts are skipped and the rest runs on the reference.
"""

from __future__ import annotations

import functools
import gc
import random
import sys
import weakref
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pyrepl import native
from pyrepl.keyspace import hashslot, ktable
from pyrepl.keyspace.hashslot import (
    CLUSTER_SLOTS,
    crc16_reference,
    key_hash_slot_reference,
)
from pyrepl.keyspace.ktable import KeyTable, KeyTableReference

_C = native.load("pyrepl.keyspace._ktable")
C_TABLE: Any = None if _C is None else _C.KeyTable
needs_c = pytest.mark.skipif(_C is None, reason="plain Python (PYREPL_PURE=1 or not built): "
                                                "the C KeyTable is not loaded")

TABLES = [pytest.param(KeyTableReference, id="reference"),
          pytest.param(C_TABLE, id="C", marks=needs_c)]
SLOT_FNS = [pytest.param((crc16_reference, key_hash_slot_reference), id="reference"),
            pytest.param((None if _C is None else (_C.crc16, _C.key_hash_slot)), id="C",
                         marks=needs_c)]

slot_of = functools.lru_cache(maxsize=None)(key_hash_slot_reference)   # (the models' slots)


@pytest.fixture(autouse=True)
def _ageing_state() -> Iterator[None]:
    ktable.configure(False, 10, 1)
    ktable.set_clock(1_700_000_000_000)
    ktable.seed(12345)
    yield
    ktable.set_clock(0)


# -- the slot function --------------------------------------------------------------------------

# CLUSTER KEYSLOT of a redis-server 7.0.15 started with --cluster-enabled yes (which agreed with
# key_hash_slot_reference on these and on 3000 random keys of "{", "}", "a", "b", 0x00, 0xff)
REDIS_KEYSLOT = {
    b"foo": 12182, b"somekey": 11058, b"foo{hash_tag}": 2515, b"bar{hash_tag}": 2515,
    b"{user1000}.following": 3443, b"{user1000}.followers": 3443,
    b"foo{}{bar}": 8363,        # an empty tag: the whole key
    b"foo{{bar}}zap": 4015,     # the tag is "{bar"
    b"foo{bar}{zap}": 5061,     # the tag is "bar"
    b"": 0, b"{": 4092, b"}": 12090, b"{}": 15257, b"}{": 12793, b"{a": 10276, b"a}": 5921,
    b"{}a}": 4370, b"\x00\xff{\x80}": 4488,
}


@pytest.mark.parametrize("fns", SLOT_FNS)
def test_the_slot_function_answers_as_redis(fns: Any) -> None:
    crc16, key_hash_slot = fns
    assert crc16(b"123456789") == 0x31C3       # CRC16/XMODEM's check value (crc16.c's comment)
    assert crc16(b"") == 0
    for key, slot in REDIS_KEYSLOT.items():
        assert key_hash_slot(key) == slot, key
    assert key_hash_slot(b"foo{}{bar}") == crc16(b"foo{}{bar}") & 0x3FFF
    assert key_hash_slot(b"foo{{bar}}zap") == crc16(b"{bar") & 0x3FFF
    assert key_hash_slot(b"foo{bar}{zap}") == key_hash_slot(b"bar") == crc16(b"bar") & 0x3FFF
    for bad in ("foo", 5, bytearray(b"foo"), None):
        with pytest.raises(TypeError):
            key_hash_slot(bad)
        with pytest.raises(TypeError):
            crc16(bad)


def test_the_names_are_the_c_versions_unless_plain_python() -> None:
    if _C is None:
        assert hashslot.key_hash_slot is key_hash_slot_reference
        assert hashslot.crc16 is crc16_reference
    else:
        assert hashslot.key_hash_slot is _C.key_hash_slot
        assert hashslot.crc16 is _C.crc16


braced = st.binary(max_size=12) | st.lists(
    st.sampled_from([b"{", b"}", b"a", b"{}", b"\x00", b"\xff", b"tag"]), max_size=8).map(b"".join)


@pytest.mark.parametrize("fns", SLOT_FNS)
@given(head=braced.filter(lambda b: b"{" not in b), tag=braced.filter(lambda b: b"}" not in b),
       tail=braced)
def test_a_non_empty_tag_alone_is_hashed(fns: Any, head: bytes, tag: bytes, tail: bytes) -> None:
    crc16, key_hash_slot = fns
    key = head + b"{" + tag + b"}" + tail
    assert key_hash_slot(key) == crc16(tag if tag else key) & (CLUSTER_SLOTS - 1)
    assert 0 <= key_hash_slot(key) < CLUSTER_SLOTS


@needs_c
@given(key=braced)
def test_the_c_slot_function_is_the_reference(key: bytes) -> None:
    assert _C.crc16(key) == crc16_reference(key)
    assert _C.key_hash_slot(key) == key_hash_slot_reference(key)


# -- the index, by hand -----------------------------------------------------------------------

def _same_slot(n: int, tag: bytes = b"t") -> list[bytes]:
    return [b"{%s}k%d" % (tag, i) for i in range(n)]


@pytest.mark.parametrize("cls", TABLES)
def test_a_slot_lists_its_keys_newest_first_and_an_overwrite_keeps_its_place(cls: Any) -> None:
    t = cls()
    t.track_slots()
    a, b, c = _same_slot(3)
    slot = slot_of(a)
    assert t.slot_count(slot) == 0 and t.slot_keys(slot, 10) == []
    t[a] = b"1"
    t[b] = b"2"
    t[c] = b"3"
    assert t.slot_keys(slot, 10) == [c, b, a]
    assert t.slot_keys(slot, 2) == [c, b] and t.slot_keys(slot, 0) == []
    t[a] = b"again"              # an overwrite: no move
    assert t.setdefault(b, b"x") == b"2"
    assert t.slot_keys(slot, 10) == [c, b, a] and t.slot_count(slot) == 3
    del t[b]
    assert t.slot_keys(slot, 10) == [c, a]
    t[b] = b"back"               # deleted and added again: the newest
    assert t.slot_keys(slot, 10) == [b, c, a]
    assert t.pop(c) == b"3" and t.pop(c, None) is None
    assert t.slot_keys(slot, 10) == [b, a] and t.slot_count(slot) == 2
    t.setdefault(c, b"new")
    assert t.slot_keys(slot, 10) == [c, b, a]
    other = b"elsewhere"
    t[other] = b"1"
    assert t.slot_keys(slot_of(other), 5) == [other] and t.slot_count(slot) == 3
    t.clear()
    assert t.tracks_slots
    assert t.slot_count(slot) == 0 and t.slot_keys(slot, 10) == [] and t.slot_count(
        slot_of(other)) == 0
    t[a] = b"1"
    assert t.slot_keys(slot, 10) == [a]


@pytest.mark.parametrize("cls", TABLES)
def test_track_slots_indexes_the_keys_present_in_their_order(cls: Any) -> None:
    t = cls()
    keys = _same_slot(50)
    for k in keys:
        t[k] = k
    for k in keys[10:20]:
        del t[k]
    t[keys[0]] = b"overwritten"
    assert not t.tracks_slots
    with pytest.raises(RuntimeError):
        t.slot_count(0)
    with pytest.raises(RuntimeError):
        t.slot_keys(0, 1)
    t.track_slots()
    t.track_slots()              # (again: nothing)
    live = keys[:10] + keys[20:]
    assert t.slot_keys(slot_of(keys[0]), 100) == live[::-1]
    assert t.slot_count(slot_of(keys[0])) == 40


@pytest.mark.parametrize("cls", TABLES)
def test_a_tracking_table_takes_bytes_keys_only(cls: Any) -> None:
    t = cls()
    t[b"a"] = 1
    t[7] = 2
    with pytest.raises(TypeError):
        t.track_slots()
    assert not t.tracks_slots
    del t[7]
    t.track_slots()
    for bad in (7, "a", (b"a",)):
        with pytest.raises(TypeError):
            t[bad] = 1
        with pytest.raises(TypeError):
            t.setdefault(bad, 1)
        assert bad not in t
    assert len(t) == 1 and t.slot_count(slot_of(b"a")) == 1


@pytest.mark.parametrize("cls", TABLES)
def test_the_queries_check_their_arguments(cls: Any) -> None:
    t = cls()
    t.track_slots()
    t[b"foo"] = b"1"
    for slot in (-1, CLUSTER_SLOTS, 1 << 70, -(1 << 70)):
        with pytest.raises(ValueError):
            t.slot_count(slot)
        with pytest.raises(ValueError):
            t.slot_keys(slot, 1)
    with pytest.raises(ValueError):
        t.slot_keys(12182, -1)
    with pytest.raises(TypeError):
        t.slot_count("1")
    with pytest.raises(TypeError):
        t.slot_keys(12182, 1.5)
    assert t.slot_keys(12182, 1 << 70) == [b"foo"]
    assert t.slot_count(True) == 0 and t.slot_keys(CLUSTER_SLOTS - 1, 3) == []


@pytest.mark.parametrize("cls", TABLES)
def test_a_reshard_loop_takes_a_slot_s_keys_ten_at_a_time(cls: Any) -> None:
    """redis-cli --cluster reshard: GETKEYSINSLOT slot 10, MIGRATE them (deleted here), again,
    while other keys come and go."""
    t = cls()
    t.track_slots()
    keys = _same_slot(95, b"m")
    slot = slot_of(keys[0])
    for i, k in enumerate(keys):
        t[k] = b"v"
        t[b"other%d" % i] = b"v"
    expect = keys[::-1]
    while expect:
        got = t.slot_keys(slot, 10)
        assert got == expect[:10]
        for k in got:
            del t[k]
        t[b"other-late%d" % len(expect)] = b"v"
        expect = expect[10:]
        assert t.slot_count(slot) == len(expect)
        assert t.slot_keys(slot, 1) == expect[:1]
    assert t.slot_keys(slot, 10) == [] and t.slot_count(slot) == 0
    t[keys[3]] = b"back"
    assert t.slot_keys(slot, 10) == [keys[3]]


@pytest.mark.parametrize("cls", TABLES)
def test_deleted_keys_in_a_list_do_not_show(cls: Any) -> None:
    """The newest keys of a slot deleted, then a rebuild (shrink) or a copy with their holes
    still in the C table's list."""
    t = cls()
    t.track_slots()
    keys = _same_slot(200, b"h")
    slot = slot_of(keys[0])
    for k in keys:
        t[k] = b"v"
    for k in keys[30:]:
        del t[k]
    assert t.slot_keys(slot, 1) == [keys[29]]
    for k in keys[1:25]:
        del t[k]
    c = t.copy()
    assert t.shrink()
    for table in (t, c):
        assert table.slot_count(slot) == 6
        assert table.slot_keys(slot, 100) == [*keys[25:30][::-1], keys[0]]


@needs_c
def test_a_walk_unlinks_the_holes_it_passes() -> None:
    """A deletion leaves its key's entry in the C table's list, a hole; slot_keys unlinks those
    it passes, a rebuild drops them all, a key into a slot without keys starts its list anew."""
    t = C_TABLE()
    t.track_slots()
    keys = _same_slot(50, b"w")
    slot = slot_of(keys[0])
    for k in keys:
        t[k] = b"v"
    for k in keys[40:]:             # the 10 newest
        del t[k]
    assert t._slot_holes(slot) == 10
    assert t.slot_keys(slot, 1) == [keys[39]]
    assert t._slot_holes(slot) == 0
    for k in keys[10:20] + keys[30:35]:
        del t[k]
    assert t._slot_holes(slot) == 15
    assert t.slot_keys(slot, 6) == keys[35:40][::-1] + [keys[29]]
    assert t._slot_holes(slot) == 10            # (the walk stopped before the older ones)
    assert t.slot_keys(slot, 100) == keys[35:40][::-1] + keys[20:30][::-1] + keys[:10][::-1]
    assert t._slot_holes(slot) == 0
    for k in keys[20:25]:
        del t[k]
    assert t._slot_holes(slot) == 5
    assert t.copy()._slot_holes(slot) == 0
    for k in keys[:10]:
        del t[k]
    assert t._slot_holes(slot) == 15            # (the oldest too, after the last key)
    for k in keys:
        t.pop(k, None)
    assert t.slot_count(slot) == 0
    t[keys[0]] = b"new"            # no keys in the slot: its holes are dropped
    assert t._slot_holes(slot) == 0 and t.slot_keys(slot, 5) == [keys[0]]
    for i in range(200):
        t[b"{w}more%d" % i] = b"v"
    for i in range(0, 200, 2):
        del t[b"{w}more%d" % i]
    assert t._slot_holes(slot) == 100
    while t._stats()["entries"] != len(t):     # (compacted by new keys in other slots)
        t[b"filler%d" % t._stats()["entries"]] = b"v"
    assert t._slot_holes(slot) == 0
    assert t.slot_keys(slot, 3) == [b"{w}more199", b"{w}more197", b"{w}more195"]
    assert all(t._slot_holes(slot_of(b"filler%d" % i)) == 0 for i in range(150, 400, 7))


@needs_c
def test_a_rebuild_of_a_big_table_makes_every_list_again() -> None:
    """Over CLUSTER_SLOTS keys a rebuild starts every slot's list anew (under it, only those of
    the keys it keeps): no hole left, each list ended."""
    t = C_TABLE()
    t.track_slots()
    n = 40_000
    for i in range(n):
        t[b"big:%d" % i] = b"v"
    for i in range(0, n, 3):
        del t[b"big:%d" % i]
    slots = {slot_of(b"big:%d" % i) for i in range(0, 3000)}
    assert any(t._slot_holes(s) > 0 for s in slots)
    assert t.shrink() is False
    entries = t._stats()["entries"]
    i = 0
    while t._stats()["entries"] >= entries:
        t[b"new:%d" % i] = b"v"
        i += 1
    assert len(t) >= CLUSTER_SLOTS
    assert all(t._slot_holes(s) == 0 for s in slots)
    live = [b"big:%d" % i for i in range(n) if i % 3] + [b"new:%d" % j for j in range(i)]
    _check_index(t, live, list(slots)[:300])


@pytest.mark.parametrize("cls", TABLES)
def test_a_copy_keeps_the_index_and_its_order(cls: Any) -> None:
    t = cls()
    keys = _same_slot(30)
    for k in keys:
        t[k] = b"v"
    t.track_slots()
    for k in keys[::3]:
        del t[k]
    c = t.copy()
    assert c.tracks_slots
    slot = slot_of(keys[0])
    assert c.slot_keys(slot, 100) == t.slot_keys(slot, 100) == [
        k for k in reversed(keys) if k not in keys[::3]]
    c[b"{t}new"] = b"1"
    assert c.slot_count(slot) == t.slot_count(slot) + 1
    assert not cls().copy().tracks_slots


def _model_slots(keys: list[bytes]) -> dict[int, list[bytes]]:
    """Each slot's keys, newest first, of keys in insertion order."""
    out: dict[int, list[bytes]] = defaultdict(list)
    for k in reversed(keys):
        out[slot_of(k)].append(k)
    return out


def _check_index(t: Any, keys: list[bytes], slots: Any = None,
                 model: dict[int, list[bytes]] | None = None) -> None:
    if model is None:
        model = _model_slots(keys)
    for slot in (model if slots is None else slots):
        expect = model.get(slot, [])
        assert t.slot_count(slot) == len(expect), slot
        assert t.slot_keys(slot, len(expect) + 5) == expect, slot
        assert t.slot_keys(slot, 3) == expect[:3], slot


@pytest.mark.parametrize("cls", TABLES)
def test_the_index_survives_growth_compaction_and_shrink(cls: Any) -> None:
    """Thousands of keys over few slots: the C table grows (rebuilds), compacts in place (at
    full capacity with an eighth of holes) and shrinks, each moving the entries the links name."""
    rng = random.Random(5)
    t = cls()
    t.track_slots()
    order: dict[bytes, None] = {}
    tags = [b"a", b"b", b"c", b"d"]
    rebuilds = 0
    for rnd in range(12):
        for i in range(rng.randrange(500, 3000)):
            k = b"{%s}%d:%d" % (rng.choice(tags), rnd, i) if rng.random() < 0.8 else b"r%d:%d" % (
                rnd, i)
            t[k] = b"%d" % i
            order[k] = None
        entries = t._stats()["entries"]
        victims = rng.sample(list(order), k=int(len(order) * rng.choice([0.2, 0.5, 0.9])))
        for k in victims:
            if rng.random() < 0.5:
                del t[k]
            else:
                t.pop(k)
            del order[k]
        compacted = t._stats()["entries"] < entries     # (the reference: as holes are made)
        i = 0
        while not compacted and i < 20_000:     # new keys after holes: the C table compacts
            k = b"{%s}late%d:%d" % (rng.choice(tags), rnd, i)      # to make room
            t[k] = b"x"
            order[k] = None
            i += 1
            compacted = t._stats()["entries"] < entries + i
        rebuilds += compacted
        if rnd % 4 == 3:
            t.shrink()
        keys = list(order)
        assert list(t) == keys
        _check_index(t, keys, [slot_of(b"{%s}" % g) for g in tags])
    _check_index(t, list(order))
    assert rebuilds >= 6
    for k in list(order):
        del t[k]
    assert all(t.slot_count(s) == 0 for s in range(0, CLUSTER_SLOTS, 7))
    assert t.slot_count(slot_of(b"{a}")) == 0


@needs_c
def test_the_c_index_costs_eight_bytes_an_entry_and_its_heads() -> None:
    t = C_TABLE()
    for i in range(10_000):
        t[b"key:%d" % i] = None
    off = sys.getsizeof(t)
    t.track_slots()
    on = sys.getsizeof(t)
    ecap = t._stats()["capacity"]
    assert on - off == CLUSTER_SLOTS * 8 + ecap * 8
    t.clear()
    assert sys.getsizeof(t) == sys.getsizeof(C_TABLE()) + CLUSTER_SLOTS * 8


@needs_c
def test_a_tracking_c_table_in_a_cycle_is_collected() -> None:
    class Box:
        pass

    t = C_TABLE()
    t.track_slots()
    b = Box()
    t[b"self"] = [t, b]
    t[b"{self}other"] = b"1"
    alive = weakref.ref(b)
    del t, b
    gc.collect()            # (tp_clear empties the table and its index, then it is freed)
    assert alive() is None


@needs_c
def test_slot_keys_hands_out_references_it_owns() -> None:
    t = C_TABLE()
    t.track_slots()
    k = b"{z}" + b"key" * 3
    t[k] = b"1"
    slot = slot_of(k)
    before = sys.getrefcount(k)
    got = t.slot_keys(slot, 1)
    held = sys.getrefcount(k)
    assert held == before + 1
    assert got[0] is k
    del got, t
    after = sys.getrefcount(k)
    assert after == before - 1


# -- the index, as a state machine against a model ------------------------------------------

KEYS = st.builds(lambda tag, n: tag + b"%d" % n,
                 st.sampled_from([b"{a}", b"{b}", b"x{c}", b"", b"{}"]), st.integers(0, 15))
VALUES = st.sampled_from([b"v", b"12", b"-3", b"x" * 30, None])


class SlotIndexMachine(RuleBasedStateMachine):
    """The reference and (when loaded) the C table, driven alike; ``model`` the keys in
    insertion order, their values."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Any] = [KeyTableReference()]
        if C_TABLE is not None:
            self.tables.append(C_TABLE())
        self.model: dict[bytes, Any] = {}
        self.tracking = False
        self.touched: set[int] = {0, 1, CLUSTER_SLOTS - 1}
        self.had: set[int] = set()     # the slots with keys at the last check
        self.fresh = 0
        # shallow checks read a slot's count and newest key only: the C table's lists keep the
        # holes of deleted keys until a walk passes them (or a rebuild), which full reads are
        self.shallow = False

    @initialize(track=st.booleans())
    def start(self, track: bool) -> None:
        if track:
            self.track()

    def _touch(self, k: bytes) -> None:
        self.touched.add(slot_of(k))

    @rule(k=KEYS, v=VALUES)
    def set(self, k: bytes, v: Any) -> None:
        for t in self.tables:
            t[k] = v
        self.model[k] = v
        self._touch(k)

    @rule(k=KEYS, v=VALUES)
    def setdefault(self, k: bytes, v: Any) -> None:
        want = self.model.setdefault(k, v)
        for t in self.tables:
            assert t.setdefault(k, v) == want
        self._touch(k)

    @rule(k=KEYS)
    def delete(self, k: bytes) -> None:
        if k in self.model:
            del self.model[k]
            for t in self.tables:
                del t[k]
        else:
            for t in self.tables:
                with pytest.raises(KeyError):
                    del t[k]

    @rule(k=KEYS)
    def pop(self, k: bytes) -> None:
        want = self.model.pop(k, "absent")
        for t in self.tables:
            assert t.pop(k, "absent") == want

    @precondition(lambda self: self.model)
    @rule(i=st.integers(0, 1 << 20), how=st.sampled_from(["del", "pop"]))
    def delete_present(self, i: int, how: str) -> None:
        k = list(self.model)[i % len(self.model)]
        if how == "del":
            self.delete(k)
        else:
            self.pop(k)

    @precondition(lambda self: self.model)
    @rule(i=st.integers(0, 1 << 20), newest=st.booleans())
    def delete_end_of_a_slot(self, i: int, newest: bool) -> None:
        """A slot's head (newest) or its last key: the ends of its list."""
        k = list(self.model)[i % len(self.model)]
        same = [x for x in self.model if slot_of(x) == slot_of(k)]
        self.delete(same[-1] if newest else same[0])

    @rule(tag=st.sampled_from([b"{a}", b"{d}", b"{e}"]), n=st.integers(1, 150))
    def bulk_add(self, tag: bytes, n: int) -> None:
        for _ in range(n):
            self.fresh += 1
            self.set(tag + b"f%d" % self.fresh, b"%d" % self.fresh)

    @rule(frac=st.sampled_from([0.15, 0.3, 0.6]), seed=st.integers(0, 1000),
          tag=st.sampled_from([b"{a}", b"{d}", b"{e}"]))
    def churn(self, frac: float, seed: int, tag: bytes) -> None:
        """Holes, then new keys until the C table has compacted (its entries array full with
        an eighth of holes: every live entry after a hole moves)."""
        self.bulk_delete(frac, seed)
        if C_TABLE is None:
            return
        c = self.tables[-1]
        for _ in range(2000):
            was = c._stats()["entries"]
            self.bulk_add(tag, 1)
            if c._stats()["entries"] <= was:
                break

    @rule(frac=st.sampled_from([0.3, 0.6, 0.95]), seed=st.integers(0, 1000))
    def bulk_delete(self, frac: float, seed: int) -> None:
        victims = random.Random(seed).sample(list(self.model), int(len(self.model) * frac))
        for k in victims:
            self.delete(k)

    @rule()
    def clear(self) -> None:
        for t in self.tables:
            t.clear()
        self.model.clear()

    @rule()
    def track(self) -> None:
        for t in self.tables:
            t.track_slots()
        self.tracking = True

    @rule()
    def toggle_depth(self) -> None:
        self.shallow = not self.shallow

    @rule()
    def shrink(self) -> None:
        done = [t.shrink() for t in self.tables]
        del done

    @rule()
    def copy(self) -> None:
        self.tables = [t.copy() for t in self.tables]

    @precondition(lambda self: self.tracking)
    @rule(bad=st.sampled_from([5, "s", (b"t",)]))
    def non_bytes_key(self, bad: Any) -> None:
        for t in self.tables:
            with pytest.raises(TypeError):
                t[bad] = b"v"
            assert bad not in t

    @invariant()
    def agree(self) -> None:
        keys = list(self.model)
        for t in self.tables:
            assert list(t) == keys
            assert t.tracks_slots == self.tracking
        if not self.tracking:
            for t in self.tables:
                with pytest.raises(RuntimeError):
                    t.slot_count(0)
            return
        # every slot with keys, every slot emptied since the last check, and a few others
        # that had keys once (teardown checks them all)
        model = _model_slots(keys)
        touched = sorted(self.touched)
        check = set(model) | self.had | set(random.Random(len(keys)).sample(
            touched, min(20, len(touched))))
        self.had = set(model)
        for t in self.tables:
            if t is not self.tables[0]:     # (the C table's lists: ended, holes or not)
                assert all(t._slot_holes(slot) >= 0 for slot in check)
            if self.shallow:
                for slot in check:
                    expect = model.get(slot, [])
                    assert t.slot_count(slot) == len(expect), slot
                    assert t.slot_keys(slot, 1) == expect[:1], slot
            else:
                _check_index(t, keys, check, model)

    def teardown(self) -> None:
        if self.tracking:
            for t in self.tables:
                assert sum(map(t.slot_count, range(CLUSTER_SLOTS))) == len(self.model)
                _check_index(t, list(self.model))


SlotIndexMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestSlotIndex = SlotIndexMachine.TestCase


# -- through Database and a real server ----------------------------------------------------------

def _db_index_right(db: Any) -> None:
    """The database's index against its table's own order (a slot's keys newest first)."""
    keys = list(db.data)
    model = _model_slots(keys)
    for slot, expect in model.items():
        assert db.count_keys_in_slot(slot) == len(expect)
        assert db.keys_in_slot(slot, 1_000_000) == expect
    assert sum(db.count_keys_in_slot(s) for s in range(CLUSTER_SLOTS)) == len(keys)


def test_flush_and_replace_keep_the_database_tracking() -> None:
    from tests.support.cores import make_core

    core = make_core()
    db = core.dbs[0]
    db.set(b"{a}1", b"x")
    db.track_slots()
    assert db.tracks_slots and db.data.tracks_slots and not db.expires.tracks_slots
    db.add(b"{a}2", b"y")
    db.set_expire(b"{a}2", core.now_ms + 10_000)
    assert db.keys_in_slot(slot_of(b"a"), 5) == [b"{a}2", b"{a}1"]
    assert db.flush() == 2
    assert db.data.tracks_slots and db.count_keys_in_slot(slot_of(b"a")) == 0
    db.set(b"{a}3", b"z")
    assert db.keys_in_slot(slot_of(b"a"), 5) == [b"{a}3"]
    db.flush(lazy=True)
    assert db.data.tracks_slots and len(db) == 0
    # a replica's snapshot, DEBUG RELOAD: a dict or the loader's KeyTable
    db.replace({b"{a}1": b"1", b"{a}2": b"2", b"b": b"3"}, {b"b": core.now_ms + 5})
    assert db.data.tracks_slots and not db.expires.tracks_slots
    assert db.keys_in_slot(slot_of(b"a"), 5) == [b"{a}2", b"{a}1"]
    loaded = KeyTable()
    for k in (b"{q}1", b"{q}2", b"zz"):
        loaded[k] = k
    db.replace(loaded, KeyTable(ageing=False), lazy=True)
    assert db.data is loaded and loaded.tracks_slots
    assert db.keys_in_slot(slot_of(b"q"), 5) == [b"{q}2", b"{q}1"]
    assert db.count_keys_in_slot(slot_of(b"a")) == 0
    _db_index_right(db)
    other = core.dbs[1]                 # (a database never told to track)
    other.flush()
    other.replace({b"k": b"v"}, {})
    assert not other.tracks_slots and not other.data.tracks_slots
    with pytest.raises(RuntimeError):
        other.count_keys_in_slot(0)


SERVER_KEYS = ["{a}1", "{a}2", "{a}3", "{b}1", "{b}2", "n", "m", "{a}n"]


@st.composite
def server_requests(draw: st.DrawFn) -> list[str]:
    k = draw(st.sampled_from(SERVER_KEYS))
    k2 = draw(st.sampled_from(SERVER_KEYS))
    return draw(st.sampled_from([
        ["SET", k, "v"], ["SET", k, "12"], ["INCR", k], ["INCRBY", k, "5"], ["DEL", k],
        ["DEL", k, k2], ["UNLINK", k], ["GETDEL", k], ["MSET", k, "1", k2, "2"],
        ["MSETNX", k, "1", k2, "2"], ["SETNX", k, "1"], ["APPEND", k, "z"],
        ["LPUSH", k, "a"], ["RPOP", k], ["HSET", k, "f", "1"], ["HDEL", k, "f"],
        ["SADD", k, "m"], ["SREM", k, "m"], ["ZADD", k, "1", "m"], ["ZREM", k, "m"],
        ["RENAME", k, k2], ["COPY", k, k2, "REPLACE"], ["MOVE", k, "1"],
        ["PEXPIRE", k, "1"], ["EXPIRE", k, "100"], ["GET", k], ["EXISTS", k],
        ["SET", k, "v", "PX", "1"], ["GETEX", k, "PX", "1"], ["FLUSHDB"], ["FLUSHALL"],
        ["FLUSHALL", "ASYNC"], ["SELECT", "1"], ["SELECT", "0"], ["SET", k, "v", "GET"],
    ]))


@pytest.mark.parametrize("c_handlers", [pytest.param(True, id="C handlers", marks=needs_c),
                                        pytest.param(False, id="Python handlers")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.lists(server_requests(), min_size=1, max_size=12), max_size=12))
def test_every_write_path_keeps_the_index(c_handlers: bool, batches: list[list[list[str]]],
                                         tmp_path_factory: Any) -> None:
    """Each batch arrives in one read (a run of plain commands goes through _plainrun.c's
    writes when the extensions are loaded); after each, db 0's index agrees with its table."""
    from pyrepl.commands import hot
    from tests.support.cores import cmd, make_core

    core = make_core(("dir", [str(tmp_path_factory.mktemp("slots"))]))
    db = core.dbs[0]
    db.track_slots()
    c = core.connection_made()
    hot.install(c_handlers)
    try:
        for i, batch in enumerate(batches):
            c.receive_data(b"".join(cmd(*r) for r in batch))
            if i == len(batches) // 2:
                c.receive_data(cmd("DEBUG", "RELOAD"))
            c.data_to_send()
            core.now_ms += 2                # (a PEXPIRE 1 is past: a read deletes the key)
            core.dbs[0].active_expire(100)
            assert core.dbs[0] is db and db.data.tracks_slots
            assert not db.expires.tracks_slots
            _db_index_right(db)
    finally:
        hot.install(True)
