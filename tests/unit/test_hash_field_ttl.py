"""Hash field expiration in the sans-io core, with a fake clock.

Lazy expiry (a read of an expired field deletes it and propagates HDEL on a master; a replica
hides it from clients but its master's stream still sees it), the active expiry function the
cron calls (``hashttl.active_expire``), the listpackex field order, HEXPIRE's propagation
rewrites, RDB / DUMP round trips of every hash-with-TTL type (22 to 25) and the digest.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.keyspace import hashttl
from pyrepl.keyspace.digest import key_digest
from pyrepl.keyspace.hashttl import HashEx, make_hashex
from pyrepl.rdb.containers import build_listpack
from pyrepl.rdb.decoder import RdbDecoder
from pyrepl.rdb.dump import dump_payload, load_payload
from pyrepl.rdb.encoder import encode_len, encode_rdb_bytes, encode_string
from tests.support.cores import T0, CoreHarness


class Harness(CoreHarness):
    def as_replica(self) -> None:
        self.core.expiry_deletes = False

    def from_master(self, *args: str) -> bytes:
        self.core.applying_master_stream = True
        try:
            return self.run(*args)
        finally:
            self.core.applying_master_stream = False


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_hexpire_replies_and_propagation(h: Harness) -> None:
    h.run("HSET", "k", "a", "1", "b", "2", "c", "3")
    h.take()
    assert h.run("HEXPIRE", "k", "10", "FIELDS", "2", "a", "zz") == b"*2\r\n:1\r\n:-2\r\n"
    assert h.take() == [[b"HPEXPIREAT", b"k", b"%d" % (T0 + 10_000), b"FIELDS", b"1", b"a"]]
    assert h.run("HTTL", "k", "FIELDS", "3", "a", "b", "x") == b"*3\r\n:10\r\n:-1\r\n:-2\r\n"
    assert h.run("HPEXPIRE", "k", "100", "GT", "FIELDS", "2", "a", "b") == b"*2\r\n:0\r\n:0\r\n"
    assert h.take() == []
    # A time already past deletes the fields: MULTI HDEL HDEL EXEC, no HPEXPIREAT.
    assert h.run("HPEXPIREAT", "k", "5", "FIELDS", "2", "a", "b") == b"*2\r\n:2\r\n:2\r\n"
    assert h.take() == [[b"MULTI"], [b"HDEL", b"k", b"a"], [b"HDEL", b"k", b"b"], [b"EXEC"]]
    assert h.run("HPEXPIREAT", "k", "5", "FIELDS", "1", "c") == b"*1\r\n:2\r\n"
    assert h.take() == [[b"HDEL", b"k", b"c"]]
    assert h.run("EXISTS", "k") == b":0\r\n"


def test_lazy_expiry_on_a_master(h: Harness) -> None:
    h.run("HSET", "k", "a", "1", "b", "2")
    h.run("HPEXPIRE", "k", "100", "FIELDS", "1", "a")
    h.take()
    h.at(100)
    assert h.run("HGET", "k", "a") == b"$1\r\n1\r\n"      # expired only after its time
    h.at(101)
    assert h.run("HLEN", "k") == b":2\r\n"                # stored fields are counted
    assert h.run("HGETALL", "k") == b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert h.take() == []                                 # skipped, not deleted
    assert h.run("HGET", "k", "a") == b"$-1\r\n"
    assert h.take() == [[b"HDEL", b"k", b"a"]]
    assert h.run("HLEN", "k") == b":1\r\n"


def test_last_field_deletes_the_hash(h: Harness) -> None:
    h.run("HSET", "k", "a", "1")
    h.run("HPEXPIRE", "k", "10", "FIELDS", "1", "a")
    h.at(50)
    h.take()
    assert h.run("HINCRBY", "k", "a", "5") == b":5\r\n"   # a new hash, the field without TTL
    assert h.take() == [[b"MULTI"], [b"HDEL", b"k", b"a"], [b"HINCRBY", b"k", b"a", b"5"],
                        [b"EXEC"]]
    assert h.run("HTTL", "k", "FIELDS", "1", "a") == b"*1\r\n:-1\r\n"


def test_hset_clears_hincrby_keeps(h: Harness) -> None:
    h.run("HSET", "k", "a", "1", "b", "2")
    h.run("HPEXPIRE", "k", "1000", "FIELDS", "2", "a", "b")
    h.run("HINCRBY", "k", "a", "1")
    h.run("HINCRBYFLOAT", "k", "a", "0.5")
    assert h.run("HPTTL", "k", "FIELDS", "2", "a", "b") == b"*2\r\n:1000\r\n:1000\r\n"
    assert h.run("HSET", "k", "b", "3") == b":0\r\n"
    assert h.run("HPTTL", "k", "FIELDS", "2", "a", "b") == b"*2\r\n:1000\r\n:-1\r\n"
    assert h.run("HPERSIST", "k", "FIELDS", "2", "a", "b") == b"*2\r\n:1\r\n:-1\r\n"


def test_replica_hides_but_never_deletes(h: Harness) -> None:
    h.as_replica()
    h.from_master("HSET", "k", "a", "1", "b", "2")
    h.from_master("HPEXPIREAT", "k", str(T0 - 1), "FIELDS", "1", "a")   # kept on a replica
    assert h.run("HGET", "k", "a") == b"$-1\r\n"
    assert h.run("HGETALL", "k") == b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert h.run("HEXISTS", "k", "a") == b":0\r\n"
    assert h.core.dbs[0].data[b"k"][b"a"] == b"1"
    assert hashttl.active_expire(h.core, T0 + 10_000) == (0, 0)
    # The master's stream still sees the field; its HDEL removes it.
    assert h.from_master("HINCRBY", "k", "a", "1") == b":2\r\n"
    assert h.from_master("HDEL", "k", "a") == b":1\r\n"
    assert b"a" not in h.core.dbs[0].data[b"k"]
    # Only the master's own commands were passed on (to sub-replicas): no HDEL of its own.
    assert [a[0] for a in h.take()] == [b"HSET", b"HPEXPIREAT", b"HINCRBY", b"HDEL"]


def test_active_expire(h: Harness) -> None:
    for i in range(5):
        h.run("HSET", f"k{i}", "a", "1", "b", "2")
        h.run("HPEXPIRE", f"k{i}", "10", "FIELDS", "1", "a")
    h.run("HPEXPIRE", "k0", "10", "FIELDS", "1", "b")
    h.run("RENAME", "k4", "moved")         # found again by the walk over the keys
    h.take()
    checked, deleted = hashttl.active_expire(h.core, T0 + 5)
    assert deleted == 0 and checked >= 4
    checked, deleted = hashttl.active_expire(h.core, T0 + 11)
    assert deleted == 6
    fed = h.take()
    assert sorted(map(tuple, fed)) == sorted(
        [(b"HDEL", b"k0", b"a"), (b"HDEL", b"k0", b"b")] +
        [(b"HDEL", b"k%d" % i, b"a") for i in (1, 2, 3)] + [(b"HDEL", b"moved", b"a")])
    assert h.run("EXISTS", "k0") == b":0\r\n"
    assert h.run("HLEN", "moved") == b":1\r\n"
    assert hashttl.active_expire(h.core, T0 + 20) == (0, 0) or h.take() == []


def test_active_expire_budget(h: Harness) -> None:
    for i in range(100):
        h.run("HSET", f"k{i}", "a", "1")
        h.run("HPEXPIRE", f"k{i}", "10", "FIELDS", "1", "a")
    ticks = iter(range(0, 10**12, 10**6))        # 1 ms per clock read
    h.core.clock_ns = lambda: next(ticks)
    _checked, deleted = hashttl.active_expire(h.core, T0 + 11, budget_us=1000)
    assert 0 < deleted < 100
    while hashttl.active_expire(h.core, T0 + 11, budget_us=1000)[1]:
        pass
    assert h.run("DBSIZE") == b":0\r\n"


def test_listpackex_order(h: Harness) -> None:
    h.run("HSET", "k", "a", "1", "b", "2", "c", "3", "d", "4")
    h.run("HPEXPIRE", "k", "500", "FIELDS", "1", "c")
    h.run("HPEXPIRE", "k", "100", "FIELDS", "2", "d", "b")
    assert list(h.core.dbs[0].data[b"k"]) == [b"b", b"d", b"c", b"a"]
    h.run("HPERSIST", "k", "FIELDS", "1", "d")
    assert list(h.core.dbs[0].data[b"k"]) == [b"b", b"c", b"a", b"d"]
    assert h.run("OBJECT", "ENCODING", "k") == b"$10\r\nlistpackex\r\n"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from([0, 0, 5, 7, 9]))))
def test_order_invariant_and_rdb_round_trip(ops: list[tuple[str, int]]) -> None:
    h = Harness()
    h.run("HSET", "k", *[x for f in "abcdef" for x in (f, f.upper())])
    for f, t in ops:
        if t:
            h.run("HPEXPIREAT", "k", str(T0 + t * 1000), "FIELDS", "1", f)
        else:
            h.run("HPERSIST", "k", "FIELDS", "1", f)
    v = h.core.dbs[0].data[b"k"]
    if type(v) is HashEx:
        times = [v.ttl.get(f) for f in v]
        timed = [t for t in times if t is not None]
        assert times[:len(timed)] == timed == sorted(timed)
    rdb = encode_rdb_bytes(h.core.dbs[:1], now_ms=T0)
    dec = RdbDecoder(databases=16)
    dec.receive_data(rdb)
    dec.receive_data(b"")
    loaded = None
    while (ev := dec.next_event()) is not None:
        if hasattr(ev, "value"):
            loaded = ev.value
    assert loaded == v and list(loaded) == list(v)
    assert getattr(loaded, "ttl", {}) == getattr(v, "ttl", {})
    back = load_payload(dump_payload(v))
    assert list(back) == list(v) and getattr(back, "ttl", {}) == getattr(v, "ttl", {})


def _decode_one(t: int, body: bytes) -> object:
    rdb = b"REDIS0012" + bytes((t,)) + encode_string(b"k") + body + b"\xff" + bytes(8)
    dec = RdbDecoder(databases=1, verify_checksum=False)
    dec.receive_data(rdb)
    dec.receive_data(b"")
    while (ev := dec.next_event()) is not None:
        if hasattr(ev, "value"):
            return ev.value
    raise AssertionError("no key")


@pytest.mark.parametrize("t", [22, 23, 24, 25])
def test_every_hfe_rdb_type(t: int) -> None:
    low = T0
    if t in (22, 24):
        fields = [(0, b"x", b"1"), (5 + 1 if t == 24 else low + 5, b"y", b"2"),
                  (1 if t == 24 else low, b"z", b"3")]
        body = (low.to_bytes(8, "little") if t == 24 else b"") + encode_len(3)
        for ttl, f, v in fields:
            body += encode_len(ttl) + encode_string(f) + encode_string(v)
    else:
        lp = build_listpack([b"z", b"3", low, b"y", b"2", low + 5, b"x", b"1", 0])
        body = (low.to_bytes(8, "little") if t == 25 else b"") + encode_string(lp)
    v = _decode_one(t, body)
    assert type(v) is HashEx
    assert list(v.items()) == [(b"z", b"3"), (b"y", b"2"), (b"x", b"1")]
    assert v.ttl == {b"z": low, b"y": low + 5}


def test_digest_marks_fields_with_ttl() -> None:
    plain = {b"a": b"1", b"b": b"2"}
    ex = make_hashex([(b"a", b"1", 0), (b"b", b"2", 0)])
    assert key_digest(ex, None) == key_digest(plain, None)
    ex.ttl[b"a"] = T0
    assert key_digest(ex, None) != key_digest(plain, None)


def test_rdb_version_only_with_field_ttls(h: Harness) -> None:
    h.run("HSET", "k", "a", "1")
    assert encode_rdb_bytes(h.core.dbs, now_ms=T0)[:9] == b"REDIS0010"
    h.run("HPEXPIRE", "k", "100", "FIELDS", "1", "a")
    assert encode_rdb_bytes(h.core.dbs, now_ms=T0)[:9] == b"REDIS0012"
    h.run("HPERSIST", "k", "FIELDS", "1", "a")
    assert encode_rdb_bytes(h.core.dbs, now_ms=T0)[:9] == b"REDIS0010"


def test_copy_move_keep_ttls(h: Harness) -> None:
    h.run("HSET", "k", "a", "1")
    h.run("HPEXPIRE", "k", "100", "FIELDS", "1", "a")
    h.run("COPY", "k", "c")
    h.run("MOVE", "c", "3")
    h.run("SELECT", "3")
    assert h.run("HPTTL", "c", "FIELDS", "1", "a") == b"*1\r\n:100\r\n"
    assert h.run("TYPE", "c") == b"+hash\r\n"


def test_the_server_cron_expires_fields(h: Harness) -> None:
    """ServerCore.tick runs the hash-field expiry (activeExpireCycle's part), not only reads;
    DEBUG SET-ACTIVE-EXPIRE 0 stops it as it stops key expiry."""
    h.run("HSET", "k", "a", "1", "b", "2")
    h.run("HPEXPIRE", "k", "10", "FIELDS", "1", "a")
    h.take()
    h.core.cron.active_expire_enabled = False
    h.at(50)
    h.core.tick(h.core.now_ms)
    assert h.take() == [] and h.run("HLEN", "k") == b":2\r\n"   # (HLEN counts it, as Redis)
    h.core.cron.active_expire_enabled = True
    h.core.tick(h.core.now_ms)
    assert h.take() == [[b"HDEL", b"k", b"a"]]
    assert h.run("HLEN", "k") == b":1\r\n"


def test_sort_reads_fields_of_hashes_with_ttls(h: Harness) -> None:
    """SORT ... BY/GET key->field sees a field with a TTL until it expires."""
    h.run("RPUSH", "l", "1", "2")
    h.run("HSET", "o1", "w", "20", "n", "one")
    h.run("HSET", "o2", "w", "10", "n", "two")
    h.run("HPEXPIRE", "o1", "10", "FIELDS", "1", "n")
    h.run("HPEXPIRE", "o2", "100000", "FIELDS", "1", "w")
    assert h.run("SORT", "l", "BY", "o*->w", "GET", "o*->n") == \
        b"*2\r\n$3\r\ntwo\r\n$3\r\none\r\n"
    h.at(50)
    assert h.run("SORT", "l", "BY", "o*->w", "GET", "o*->n") == b"*2\r\n$3\r\ntwo\r\n$-1\r\n"
