"""DUMP / RESTORE against real Redis: payloads cross both ways, errors byte for byte.

* every value pyrepl holds, DUMPed by pyrepl, RESTOREs into redis-server 7.0.15 with the same
  DEBUG DIGEST-VALUE, and every value Redis 7.0.15 DUMPs (its compact listpack / intset
  encodings) RESTOREs into pyrepl with the same digest; Redis 8's payloads (RDB 12/13) too,
  when a Redis 8 server is at hand;
* RESTORE's options and errors answer as Redis's (RESP2 and RESP3);
* propagation: a relative TTL goes out absolute with ABSTTL, a REPLACE of an already expired
  value as a DEL.
"""

from __future__ import annotations

import pytest

from tests.support.differential import check_propagation
from tests.support.procs import start_redis
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

DATA: list[tuple[str, ...]] = [
    ("SET", "str", "hello"), ("SET", "int", "12345"), ("SET", "big", "x" * 70000),
    ("RPUSH", "list", "a", "b", "1", "2" * 100), ("RPUSH", "biglist", *map(str, range(300))),
    ("SADD", "intset", "1", "2", "3"), ("SADD", "set", "x", "2"),
    ("SADD", "bigset", *(f"m{i}" for i in range(200))),
    ("HSET", "hash", "f", "v", "n", "1"),
    ("HSET", "bighash", *(x for i in range(200) for x in (f"f{i}", "v" * (i % 70)))),
    ("ZADD", "zset", "1.5", "m", "2", "n", "-inf", "low"),
    ("ZADD", "bigzset", *(x for i in range(200) for x in (str(i / 3), f"z{i}"))),
]
KEYS = [argv[1] for argv in DATA]


def digest(c: RawClient, key: str) -> bytes:
    return c.call("DEBUG", "DIGEST-VALUE", key)


def fill(c: RawClient) -> None:
    c.call("FLUSHALL")
    for argv in DATA:
        assert not c.call(*argv).startswith(b"-"), argv


def test_payloads_cross_both_ways(pyrepl_server) -> None:
    with start_redis("--enable-debug-command", "yes") as redis, \
            RawClient(pyrepl_server.port) as ours, RawClient(redis.port) as theirs:
        fill(ours)
        fill(theirs)
        for key in KEYS:
            want = digest(theirs, key)
            assert digest(ours, key) == want, key
            mine = parse_reply(ours.call("DUMP", key))
            redis_payload = parse_reply(theirs.call("DUMP", key))
            assert theirs.call("RESTORE", f"{key}:from-pyrepl", "0", mine) == b"+OK\r\n"
            assert ours.call("RESTORE", f"{key}:from-redis", "0", redis_payload) == b"+OK\r\n"
            assert digest(theirs, f"{key}:from-pyrepl") == want, key
            assert digest(ours, f"{key}:from-redis") == want, key


def test_redis_8_payloads_restore(pyrepl_server, tmp_path) -> None:
    with start_redis("--enable-debug-command", "yes", tmpdir=str(tmp_path), version=8) as r8, \
            RawClient(pyrepl_server.port) as ours, RawClient(r8.port) as theirs:
        fill(ours)
        fill(theirs)
        for key in KEYS:
            payload = parse_reply(theirs.call("DUMP", key))
            assert int.from_bytes(payload[-10:-8], "little") >= 11
            assert ours.call("RESTORE", f"{key}:r8", "0", payload) == b"+OK\r\n", key
            assert digest(ours, f"{key}:r8") == digest(ours, key), key


CASES: list[tuple[str, ...]] = [
    ("SET", "k", "v"), ("DUMP", "k"), ("DUMP", "missing"), ("DUMP",), ("DUMP", "a", "b"),
    ("RESTORE", "k", "0", "x"), ("RESTORE", "k2", "-1", "x"), ("RESTORE", "k2", "x", "x"),
    ("RESTORE", "k2", "0", "garbage-payload"), ("RESTORE", "k2", "0", ""),
    ("RESTORE", "k", "0", "x", "REPLACE", "BOGUS"), ("RESTORE", "k", "0", "x", "IDLETIME"),
    ("RESTORE", "k", "0", "x", "IDLETIME", "-1"), ("RESTORE", "k", "0", "x", "FREQ", "256"),
    ("RESTORE", "k", "0", "x", "FREQ", "1", "IDLETIME", "1"), ("RESTORE", "k", "0", "x", "x"),
    ("RESTORE", "k"), ("RPUSH", "l", "a"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_cases_byte_for_byte(pair) -> None:
    for argv in CASES:
        pair.check(*argv)
    # payload based cases, with a payload both accept
    payload = parse_reply(pair.b.call("DUMP", "k"))
    for argv in [("RESTORE", "new", "0", payload), ("GET", "new"),
                 ("RESTORE", "new", "0", payload), ("RESTORE", "new", "0", payload, "REPLACE"),
                 ("RESTORE", "l", "0", payload, "replace", "absttl", "idletime", "5"),
                 ("TYPE", "l"), ("RESTORE", "t", "1", payload, "ABSTTL"), ("EXISTS", "t"),
                 ("RESTORE", "t", "4102444800123", payload, "ABSTTL", "FREQ", "5"),
                 ("PEXPIRETIME", "t"), ("RESTORE", "k", "1", payload, "REPLACE", "ABSTTL"),
                 ("EXISTS", "k"), ("RESTORE", "bad", "0", payload[:-1] + b"\x00")]:
        pair.check(*argv)


def test_propagation(tapped_redis) -> None:
    with RawClient(tapped_redis.port) as c:
        c.call("SET", "src", "value")
        payload = parse_reply(c.call("DUMP", "src"))
    check_propagation(tapped_redis.port, [
        ("RESTORE", "a", "0", payload), ("RESTORE", "a", "0", payload),
        ("RESTORE", "b", "4102444800123", payload, "ABSTTL"),
        ("RESTORE", "c", "100000", payload),                 # -> absolute TTL + ABSTTL
        ("RESTORE", "a", "1", payload, "REPLACE", "ABSTTL"),   # expired: -> DEL a
        ("RESTORE", "zz", "1", payload, "ABSTTL"),             # expired, nothing replaced
    ], timed_replies=frozenset())
