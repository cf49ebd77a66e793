"""Sans-io tests of expiry and propagation: ServerCore driven directly with a fake clock.

Lazy expiry (a read or write finds the key past its time), active expiry (``core.tick``), the
``DEL`` a master propagates for every expired key, replica mode (keys are hidden but only the
master's DEL removes them), and the exact absolute times of the propagation rewrites.
"""

from __future__ import annotations

import pytest

import pyrepl.commands  # noqa: F401
from tests.support.cores import T0, CoreHarness
from tests.support.resp import encode_command

Harness = CoreHarness


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_lazy_expiry_on_read_propagates_del(h: Harness) -> None:
    assert h.run("SET", "k", "v", "PX", "100") == b"+OK\r\n"
    assert h.take() == [[b"SET", b"k", b"v", b"PXAT", b"%d" % (T0 + 100)]]
    h.at(99)
    assert h.run("GET", "k") == b"$1\r\nv\r\n"
    assert h.take() == []
    h.at(100)  # expired when the time is reached, not after
    assert h.run("GET", "k") == b"$-1\r\n"
    assert h.take() == [[b"DEL", b"k"]]
    assert h.core.stats.expired_keys == 1
    assert b"k" not in h.core.dbs[0].data
    assert h.run("GET", "k") == b"$-1\r\n"
    assert h.take() == []  # deleted once, propagated once


def test_lazy_expiry_on_write_deletes_first(h: Harness) -> None:
    h.run("SET", "n", "41", "PX", "10")
    h.run("RPUSH", "l", "x")
    h.run("PEXPIRE", "l", "10")
    h.take()
    h.at(10)
    assert h.run("INCR", "n") == b":1\r\n"  # the old value is gone
    fed = h.take()
    assert [b"DEL", b"n"] in fed and [b"INCR", b"n"] in fed
    assert fed.index([b"DEL", b"n"]) < fed.index([b"INCR", b"n"])
    assert h.run("TTL", "n") == b":-1\r\n"
    assert h.run("SET", "l", "s") == b"+OK\r\n"
    assert h.run("TYPE", "l") == b"+string\r\n"


def test_ttl_rounding_with_fake_clock(h: Harness) -> None:
    h.run("SET", "k", "v", "PX", "1500")
    assert h.run("PTTL", "k") == b":1500\r\n"
    assert h.run("TTL", "k") == b":2\r\n"  # (1500 + 500) / 1000
    h.at(1000)
    assert h.run("PTTL", "k") == b":500\r\n"
    assert h.run("TTL", "k") == b":1\r\n"
    h.at(1001)
    assert h.run("TTL", "k") == b":0\r\n"
    assert h.run("EXPIRETIME", "k") == b":%d\r\n" % ((T0 + 1500 + 500) // 1000)
    assert h.run("PEXPIRETIME", "k") == b":%d\r\n" % (T0 + 1500)


def test_active_expiry_via_tick(h: Harness) -> None:
    for i in range(50):
        h.run("SET", f"k{i}", "v", "PX", str(100 + i))
    h.run("SET", "stay", "v")
    h.run("SET", "later", "v", "EX", "100")
    h.take()
    h.core.tick(T0 + 120)
    db = h.core.dbs[0]
    gone = {f"k{i}".encode() for i in range(21)}
    for _ in range(10):  # a slice per tick: a few ticks always finish the pass
        h.core.tick(T0 + 120)
    assert not gone & set(db.data)
    assert {f"k{i}".encode() for i in range(21, 50)} <= set(db.data)
    dels = [argv for argv in h.take() if argv[0] == b"DEL"]
    assert sorted(argv[1] for argv in dels) == sorted(gone)
    assert h.core.stats.expired_keys == 21
    for _ in range(10):
        h.core.tick(T0 + 200)
    assert set(db.data) == {b"stay", b"later"}


def test_replica_mode_hides_but_keeps_expired_keys(h: Harness) -> None:
    h.run("SET", "k", "v", "PX", "10")
    h.take()
    h.core.expiry_deletes = False  # a replica: only the master's DEL removes keys
    h.at(50)
    assert h.run("GET", "k") == b"$-1\r\n"
    assert h.run("EXISTS", "k") == b":0\r\n"
    assert h.run("KEYS", "*") == b"*0\r\n"
    assert h.run("SCAN", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    assert b"k" in h.core.dbs[0].data
    for _ in range(5):
        h.core.tick(T0 + 60)
    assert b"k" in h.core.dbs[0].data
    assert h.take() == []
    # EXPIRE with a time in the past is stored, not executed as a DEL.
    h.run("SET", "p", "v")
    h.take()
    assert h.run("EXPIRE", "p", "-1") == b":1\r\n"
    assert h.take() == [[b"PEXPIREAT", b"p", b"%d" % (T0 + 60 - 1000)]]  # tick set the clock
    assert b"p" in h.core.dbs[0].data
    assert h.run("GETEX", "p", "PXAT", "1") == b"$-1\r\n"  # already (logically) expired


def test_propagation_rewrites_exact_times(h: Harness) -> None:
    h.run("SET", "k", "v")
    h.take()
    cases = [
        (("EXPIRE", "k", "10"), [[b"PEXPIREAT", b"k", b"%d" % (T0 + 10000)]]),
        (("PEXPIRE", "k", "10", "GT"), []),
        (("PEXPIRE", "k", "20000", "GT"), [[b"PEXPIREAT", b"k", b"%d" % (T0 + 20000), b"GT"]]),
        (("EXPIREAT", "k", "2000000000"), [[b"PEXPIREAT", b"k", b"2000000000000"]]),
        (("PEXPIREAT", "k", "2000000000001"), [[b"PEXPIREAT", b"k", b"2000000000001"]]),
        (("SETEX", "s", "5", "v"), [[b"SET", b"s", b"v", b"PXAT", b"%d" % (T0 + 5000)]]),
        (("PSETEX", "s", "5", "v"), [[b"SET", b"s", b"v", b"PXAT", b"%d" % (T0 + 5)]]),
        (("SET", "s", "v", "EXAT", "2000000000", "GET"),
         [[b"SET", b"s", b"v", b"PXAT", b"2000000000000"]]),
        (("SET", "s", "w", "GET", "KEEPTTL", "get"), [[b"SET", b"s", b"w", b"KEEPTTL"]]),
        (("GETEX", "s", "EX", "7"), [[b"PEXPIREAT", b"s", b"%d" % (T0 + 7000)]]),
        (("GETEX", "s"), []),
        (("GETEX", "s", "PERSIST"), [[b"PERSIST", b"s"]]),
        (("GETEX", "s", "PERSIST"), []),
        (("GETEX", "s", "EXAT", "1"), [[b"DEL", b"s"]]),
        (("INCRBYFLOAT", "f", "1.5"), [[b"SET", b"f", b"1.5", b"KEEPTTL"]]),
        (("GETSET", "f", "2"), [[b"SET", b"f", b"2"]]),
        (("GETDEL", "f"), [[b"DEL", b"f"]]),
        (("GETDEL", "f"), []),
        (("EXPIRE", "k", "0"), [[b"DEL", b"k"]]),
        (("EXPIRE", "k", "10"), []),
        (("DEL", "nokey"), []),
        (("SETRANGE", "r", "0", ""), []),
        (("APPEND", "r", "x"), [[b"APPEND", b"r", b"x"]]),
        (("PERSIST", "r"), []),
        (("RENAME", "r", "r"), []),
        (("MOVE", "r", "1"), [[b"MOVE", b"r", b"1"]]),
    ]
    for argv, expected in cases:
        h.run(*argv)
        assert h.take() == expected, argv


def test_keys_scan_hide_expired_without_deleting(h: Harness) -> None:
    h.run("SET", "a", "1", "PX", "5")
    h.run("SET", "b", "1")
    h.take()
    h.at(10)
    assert h.run("KEYS", "*") == b"*1\r\n$1\r\nb\r\n"
    assert b"a" in h.core.dbs[0].data  # KEYS filters, like Redis's keyIsExpired
    assert h.take() == []
    assert h.run("SCAN", "0", "MATCH", "a") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    assert h.take() == [[b"DEL", b"a"]]  # SCAN expires what it meets


def test_watch_is_invalidated_by_string_and_key_commands(h: Harness) -> None:
    other = h.core.connection_made()
    for setup, write in ((("SET", "w", "1"), ("APPEND", "w", "x")),
                         (("SET", "w", "1"), ("INCRBYFLOAT", "w", "1")),
                         (("SET", "w", "1"), ("SETRANGE", "w", "0", "z")),
                         (("SET", "w", "1"), ("EXPIRE", "w", "100")),
                         (("SET", "w", "1", "EX", "100"), ("PERSIST", "w")),
                         (("SET", "w", "1"), ("RENAME", "w", "w2")),
                         (("SET", "x", "1"), ("RENAME", "x", "w")),
                         (("SET", "w", "1"), ("GETDEL", "w")),
                         (("SET", "w", "1"), ("GETEX", "w", "PX", "100"))):
        h.run("FLUSHALL")
        h.run(*setup)
        assert h.run("WATCH", "w") == b"+OK\r\n"
        other.receive_data(encode_command(*write))
        other.data_to_send()
        h.run("MULTI")
        h.run("PING")
        assert h.run("EXEC") == b"*-1\r\n", write
