"""Differential tests of the generic key commands: pyrepl against real redis-server 7.0.15.

Four parts: a hand-written table of edge cases (every option and error) replayed in RESP2 and
RESP3 with every reply compared byte for byte; glob patterns (KEYS and SCAN MATCH) over a
keyspace of awkward key names; a hypothesis test of random command sequences over a few keys
(time-dependent replies are compared with a tolerance: both servers run the same commands a
few milliseconds apart); and a propagation check comparing what pyrepl's core hands to
replication (``ServerCore.repl_feed``, in-process) with what real Redis sends to a replica
attached with SYNC (the taps of tests/support/differential.py).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.differential import (
    PROTOS,
    Pair,
    check_propagation,
    check_timed,
    run_sequence,
    sequence_settings,
)
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

FUTURE_S = "4102444800"  # 2100-01-01
FUTURE_MS = "4102444800123"
BIG = "9223372036854775807"
SMALL = "-9223372036854775808"

CASES: list[tuple[str, ...]] = [
    ("SET", "a", "1"), ("SET", "b", "2"), ("RPUSH", "l", "x"),
    # DEL / UNLINK / EXISTS / TYPE / TOUCH
    ("EXISTS", "a"), ("EXISTS", "a", "a", "b", "nokey"), ("EXISTS",), ("TOUCH", "a", "b", "c"),
    ("TYPE", "a"), ("TYPE", "l"), ("TYPE", "nokey"), ("TYPE",), ("TYPE", "a", "b"),
    ("DEL", "nokey"), ("DEL", "a", "a", "nokey"), ("DEL",), ("EXISTS", "a"),
    ("SET", "a", "1"), ("UNLINK", "a", "b", "zz"), ("UNLINK",), ("DBSIZE",),
    # EXPIRE family and its options
    ("SET", "e", "v"), ("TTL", "e"), ("PTTL", "e"), ("EXPIRETIME", "e"), ("PEXPIRETIME", "e"),
    ("TTL", "nokey"), ("PTTL", "nokey"), ("EXPIRETIME", "nokey"), ("PEXPIRETIME", "nokey"),
    ("EXPIRE", "e", "100"), ("TTL", "e"), ("EXPIRE", "nokey", "100"),
    ("EXPIRE", "e", "x"), ("EXPIRE", "e", "1.5"), ("EXPIRE", "e", ""), ("EXPIRE", "e"),
    ("EXPIRE", "e", "100", "NX"), ("EXPIRE", "e", "200", "XX"), ("TTL", "e"),
    ("EXPIRE", "e", "50", "GT"), ("EXPIRE", "e", "300", "GT"), ("TTL", "e"),
    ("EXPIRE", "e", "400", "LT"), ("EXPIRE", "e", "100", "lt"), ("TTL", "e"),
    ("EXPIRE", "e", "100", "NX", "XX"), ("EXPIRE", "e", "100", "GT", "LT"),
    ("EXPIRE", "e", "100", "NX", "GT"), ("EXPIRE", "e", "50", "XX", "GT"),
    ("EXPIRE", "e", "100", "FOO"), ("EXPIRE", "e", "100", "nx", "bar"),
    ("EXPIRE", "nokey", "100", "FOO"), ("EXPIRE", "e", "x", "FOO"), ("EXPIRE", "e", "x", "NX", "XX"),
    ("EXPIRE", "e", "9223372036854775"), ("EXPIRE", "e", "9223372036854776"),
    ("EXPIRE", "e", "-9223372036854775"), ("EXPIRE", "e", "-9223372036854776"),
    ("EXPIRE", "e", BIG), ("PEXPIRE", "e", BIG), ("PEXPIRE", "e", "9223372036854775000"),
    ("EXPIREAT", "e", "9223372036854775"), ("PEXPIREAT", "e", BIG), ("PEXPIRETIME", "e"),
    ("EXPIREAT", "e", "9223372036854776"), ("PEXPIREAT", "e", SMALL), ("EXISTS", "e"),
    ("SET", "e", "v"), ("PERSIST", "e"), ("EXPIREAT", "e", FUTURE_S), ("EXPIRETIME", "e"),
    ("PEXPIRETIME", "e"), ("PEXPIREAT", "e", FUTURE_MS), ("PEXPIRETIME", "e"), ("EXPIRETIME", "e"),
    ("PEXPIREAT", "e", FUTURE_MS, "GT"), ("PEXPIREAT", "e", "4102444800124", "GT"),
    ("PEXPIRETIME", "e"), ("EXPIRE", "e", "100", "XX"), ("TTL", "e"),
    ("PERSIST", "e"), ("PERSIST", "e"), ("PERSIST", "nokey"), ("TTL", "e"),
    ("EXPIRE", "e", "100", "XX"), ("EXPIRE", "e", "100", "GT"), ("EXPIRE", "e", "100", "LT"),
    ("TTL", "e"), ("EXPIRE", "e", "100", "NX"), ("TTL", "e"),
    ("EXPIRE", "e", "0"), ("EXISTS", "e"), ("SET", "e", "v"), ("EXPIRE", "e", "-5"),
    ("EXISTS", "e"), ("SET", "e", "v"), ("PEXPIRE", "e", "-1"), ("EXISTS", "e"),
    ("SET", "e", "v"), ("EXPIREAT", "e", "1"), ("EXISTS", "e"),
    ("SET", "e", "v"), ("PEXPIREAT", "e", "0"), ("EXISTS", "e"),
    ("SET", "e", "v", "EX", "100"), ("EXPIRE", "e", "-1", "GT"), ("TTL", "e"),
    ("EXPIRE", "e", "-1", "LT"), ("EXISTS", "e"),
    # RENAME / RENAMENX
    ("SET", "s", "v", "EX", "100"), ("RENAME", "s", "d"), ("TTL", "d"), ("EXISTS", "s"),
    ("RENAME", "nokey", "x"), ("RENAME", "nokey", "nokey"), ("RENAME", "d", "d"),
    ("RENAMENX", "d", "d"), ("RENAMENX", "nokey", "nokey"), ("SET", "o", "other"),
    ("RENAMENX", "d", "o"), ("RENAMENX", "d", "n"), ("GET", "n"), ("RENAME", "n", "o"),
    ("GET", "o"), ("TTL", "o"), ("RENAME", "l", "o"), ("TYPE", "o"), ("RENAME", "o"),
    # MOVE / COPY
    ("SET", "m", "v"), ("MOVE", "m", "1"), ("EXISTS", "m"), ("MOVE", "m", "1"),
    ("SELECT", "1"), ("GET", "m"), ("SET", "m2", "x"), ("SELECT", "0"), ("SET", "m2", "y"),
    ("MOVE", "m2", "1"), ("MOVE", "m2", "0"), ("MOVE", "m2", "16"), ("MOVE", "m2", "-1"),
    ("MOVE", "m2", "x"), ("MOVE", "m2", "4294967296"), ("MOVE", "nokey", "0"),
    ("MOVE", "nokey", "1"), ("MOVE", "nokey", "99"),
    ("SET", "c", "v", "EX", "100"), ("COPY", "c", "c2"), ("GET", "c2"), ("TTL", "c2"),
    ("COPY", "c", "c2"), ("COPY", "c", "c2", "REPLACE"), ("COPY", "c", "c"),
    ("COPY", "c", "c", "DB", "0"), ("COPY", "c", "c", "DB", "1"), ("COPY", "c", "c", "DB", "1"),
    ("COPY", "c", "c", "DB", "1", "REPLACE"), ("COPY", "nokey", "x"), ("COPY", "c", "x", "DB"),
    ("COPY", "c", "x", "DB", "16"), ("COPY", "c", "x", "DB", "y"), ("COPY", "c", "x", "FOO"),
    ("COPY", "c", "x", "REPLACE", "REPLACE"), ("COPY", "c"), ("COPY", "l", "l2"),
    ("RPUSH", "l2", "more"), ("LRANGE", "l", "0", "-1"), ("LRANGE", "l2", "0", "-1"),
    ("SELECT", "1"), ("KEYS", "*"), ("TTL", "c"), ("FLUSHDB",), ("SELECT", "0"),
    # KEYS / RANDOMKEY / DBSIZE
    ("KEYS", "*"), ("KEYS", "c*"), ("KEYS", "?"), ("KEYS", "[cl]*"), ("KEYS", "nomatch"),
    ("KEYS",), ("KEYS", "a", "b"),
    # SCAN argument errors (cursor values are implementation-specific: only errors here)
    ("SCAN", "x"), ("SCAN", " 0"), ("SCAN", "-"), ("SCAN", "18446744073709551616"),
    ("SCAN", "0", "COUNT", "0"), ("SCAN", "0", "COUNT", "-1"), ("SCAN", "0", "COUNT", "x"),
    ("SCAN", "0", "COUNT"), ("SCAN", "0", "MATCH"), ("SCAN", "0", "TYPE"),
    ("SCAN", "0", "FOO", "bar"), ("SCAN",), ("SCAN", "x", "COUNT", "0"),
    # OBJECT
    ("SET", "i", "12345"), ("SET", "em", "hello"), ("SET", "raw", "x" * 45),
    ("SET", "neg", "-1"), ("SET", "big", "12345678901234567890"),
    ("OBJECT", "ENCODING", "i"), ("OBJECT", "ENCODING", "em"), ("OBJECT", "ENCODING", "raw"),
    ("OBJECT", "ENCODING", "neg"), ("OBJECT", "ENCODING", "big"), ("OBJECT", "ENCODING", "l"),
    ("OBJECT", "encoding", "nokey"), ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "a", "b"),
    ("OBJECT",), ("OBJECT", "FOO"), ("OBJECT", "HELP"), ("OBJECT", "help", "x"),
    ("OBJECT", "FREQ", "i"), ("OBJECT", "FREQ", "nokey"), ("OBJECT", "IDLETIME", "nokey"),
    ("OBJECT", "REFCOUNT", "nokey"), ("OBJECT", "REFCOUNT", "i"), ("OBJECT", "REFCOUNT", "raw"),
    ("OBJECT", "REFCOUNT", "l"),
    ("SADD", "si", "1", "2", "3"), ("OBJECT", "ENCODING", "si"),
    ("SADD", "ss", "a", "1"), ("OBJECT", "ENCODING", "ss"),
    ("HSET", "h", "f", "v"), ("OBJECT", "ENCODING", "h"),
    ("HSET", "hb", "f", "v" * 65), ("OBJECT", "ENCODING", "hb"),
    ("ZADD", "z", "1", "m"), ("OBJECT", "ENCODING", "z"),
    ("ZADD", "zb", "1", "m" * 65), ("OBJECT", "ENCODING", "zb"),
    # the empty key name
    ("SET", "", "empty"), ("EXISTS", ""), ("TYPE", ""), ("KEYS", "?*"), ("RENAME", "", "e2"),
    ("GET", "e2"), ("del", "e2"), ("Exists", "e2"),
    # COMMAND GETKEYS of the "numkeys key [key ...]" commands (keys found by parsing numkeys
    # as Redis's getkeys procs do: atoi, 1..the arguments left, else no keys at all)
    ("COMMAND", "GETKEYS", "ZUNION", "2", "a", "b"), ("COMMAND", "GETKEYS", "ZUNION", "0", "a"),
    ("COMMAND", "GETKEYS", "ZUNION", "3", "a", "b"),
    ("COMMAND", "GETKEYS", "ZUNION", "02", "a", "b"),
    ("COMMAND", "GETKEYS", "ZUNION", "2x", "a", "b"), ("COMMAND", "GETKEYS", "ZUNION", "-1", "a"),
    ("COMMAND", "GETKEYS", "ZUNION", "1", "a", "b", "c"),
    ("COMMAND", "GETKEYS", "ZINTER", " 1", "a"), ("COMMAND", "GETKEYS", "ZDIFF", "+2", "a", "b"),
    ("COMMAND", "GETKEYS", "ZINTERCARD", "2", "a", "b"),
    ("COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", "a", "b"),
    ("COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "3", "a", "b"),
    ("COMMAND", "GETKEYS", "ZINTERSTORE", "d", "x", "a"),
    ("COMMAND", "GETKEYS", "ZDIFFSTORE", "d", "1", "a", "b"),
    ("COMMAND", "GETKEYS", "SINTERCARD", "2", "a", "b"),
    ("COMMAND", "GETKEYS", "SINTERCARD", "3", "a", "b"),
    ("COMMAND", "GETKEYS", "SINTERCARD", "0", "a"),
    ("COMMAND", "GETKEYS", "SINTERCARD", "02", "a", "b"),
    ("COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"),
    ("COMMAND", "GETKEYS", "LMPOP", "3", "a", "b", "LEFT"),
    ("COMMAND", "GETKEYS", "LMPOP", "4", "a", "b", "LEFT"),
    ("COMMAND", "GETKEYS", "LMPOP", "2x", "a", "b", "LEFT"),
    ("COMMAND", "GETKEYS", "ZMPOP", "1", "a", "MIN"),
    ("COMMAND", "GETKEYS", "ZMPOP", "2", "a", "MIN"),
    ("COMMAND", "GETKEYS", "ZMPOP", "3", "a", "MIN"), ("COMMAND", "GETKEYS", "KEYS", "*"),
    ("COMMAND", "GETKEYS", "DEL"), ("COMMAND", "GETKEYS", "ECHO", "x"),
]


def full_scan(client: RawClient, *opts: str, limit: int = 100000) -> list[bytes]:
    """Every key a complete SCAN iteration returns (with duplicates, if any)."""
    out: list[bytes] = []
    cursor = b"0"
    for _ in range(limit):
        reply = parse_reply(client.call("SCAN", cursor, *opts))
        assert isinstance(reply, list), reply
        cursor, keys = reply
        out.extend(keys)
        if cursor == b"0":
            return out
    raise AssertionError("SCAN did not terminate")


@pytest.mark.parametrize("proto", [2, 3])
def test_edge_cases(pair):
    for argv in CASES:
        pair.check(*argv)


# -- glob patterns ---------------------------------------------------------------------------

GLOB_ALPHABET = b"ab*?[]^-\\\x80\xffA"


def test_glob_patterns_against_redis(pair):
    """KEYS and SCAN MATCH with random patterns over awkward key names."""
    rnd = random.Random(20240607)
    keys = {bytes(rnd.choice(GLOB_ALPHABET) for _ in range(rnd.randint(1, 5)))
            for _ in range(200)}
    for k in keys:
        pair.check("SET", k, "1")
    patterns = [bytes(rnd.choice(GLOB_ALPHABET) for _ in range(rnd.randint(0, 6)))
                for _ in range(1500)]
    patterns += [b"*", b"**", b"[", b"[^", b"[]", b"[^]", b"\\", b"[a-]", b"[\xff-a]",
                 b"*[a", b"a\\", b"[\\]]*", b"?*?"]
    for pat in patterns:
        pair.check("KEYS", pat)
    for pat in patterns[:150]:
        a = sorted(full_scan(pair.a, "MATCH", pat, "COUNT", "7"))
        b = sorted(set(full_scan(pair.b, "MATCH", pat, "COUNT", "7")))
        assert a == b, pat


@pytest.mark.parametrize("proto", [3])
def test_scan_full_iteration(pair):
    """A full SCAN returns every key exactly once, with MATCH, TYPE and COUNT."""
    for i in range(300):
        pair.check("SET", f"s:{i}", "v")
    for i in range(50):
        pair.check("RPUSH", f"l:{i}", "v")
    for opts in ((), ("COUNT", "1"), ("COUNT", "1000"), ("MATCH", "s:1*"),
                 ("TYPE", "list"), ("TYPE", "LIST", "COUNT", "3"), ("TYPE", "string"),
                 ("TYPE", "hash"), ("TYPE", "nosuchtype"), ("MATCH", "l:*", "TYPE", "list"),
                 ("count", "5", "match", "*3*")):
        mine = full_scan(pair.a, *opts)
        theirs = full_scan(pair.b, *opts)
        assert len(mine) == len(set(mine)), opts
        assert sorted(mine) == sorted(set(theirs)), opts


def test_scan_survives_deletes_and_inserts(pyrepl_server):
    """Keys present during the whole iteration are returned although others come and go."""
    c = RawClient(pyrepl_server.port)
    try:
        c.call("FLUSHALL")
        for i in range(500):
            c.call("SET", f"stay:{i}", "v")
            c.call("SET", f"go:{i}", "v")
        seen: set[bytes] = set()
        cursor = b"0"
        step = 0
        for _ in range(10000):
            cursor, keys = parse_reply(c.call("SCAN", cursor, "COUNT", "20"))
            seen.update(keys)
            # Between calls delete some keys (including ones already returned) and add others.
            for j in range(step * 10, step * 10 + 10):
                c.call("DEL", f"go:{j}")
                c.call("SET", f"new:{step}:{j}", "v")
            step += 1
            if cursor == b"0":
                break
        assert cursor == b"0"
        assert {f"stay:{i}".encode() for i in range(500)} <= seen
        # Never a key that was already gone before the scan returned it.
        for k in seen:
            if k.startswith(b"go:"):
                assert int(k[3:]) < 10 * step
    finally:
        c.close()


def test_expired_keys_hidden(pair):
    pair.check("SET", "live", "v")
    pair.check("SET", "dying", "v", "PX", "40")
    pair.check("RPUSH", "dying2", "v")
    pair.check("PEXPIRE", "dying2", "40")
    # KEYS filters expired keys without deleting them; wait until both hide them.
    wait_for(lambda: pair.both("KEYS", "*") == (b"*1\r\n$4\r\nlive\r\n",) * 2, 5,
             what="keys to expire on both servers")
    assert sorted(full_scan(pair.a)) == sorted(full_scan(pair.b)) == [b"live"]
    for argv in (("EXISTS", "dying", "dying2"), ("TTL", "dying"), ("TYPE", "dying2"),
                 ("DBSIZE",), ("RANDOMKEY",), ("PERSIST", "dying"),
                 ("EXPIRE", "dying", "10"), ("RENAME", "dying", "x"), ("COPY", "dying", "x"),
                 ("MOVE", "dying2", "1"), ("DEL", "dying", "live"), ("RANDOMKEY",)):
        pair.check(*argv)


# -- random command sequences -------------------------------------------------------------------

KEYS = st.sampled_from(["k0", "k1", "k2", "k3", ""])
# Relative times are either in the past or far away (both servers run each command a few
# ms apart, so a TTL that ends mid-sequence, or GT/LT between two equal relative times, would
# race). GT/LT therefore go with the absolute variants only.
SECS = st.one_of(st.integers(-3, 0).map(str), st.sampled_from(
    ["100", "200", "1000", "x", "", "1.5", "9223372036854775", BIG]))
MSECS = st.one_of(st.integers(-3, 0).map(str), st.sampled_from(
    ["100000", "200000", "x", BIG, SMALL]))
ABS_SECS = st.sampled_from(["0", "1", FUTURE_S, "4102444801", "x", "9223372036854775", BIG])
ABS_MSECS = st.sampled_from(["0", "1", FUTURE_MS, "4102444800124", "x", BIG, SMALL])
REL_OPTS = st.lists(st.sampled_from(["NX", "XX", "xx", "FOO"]), max_size=2)
EXPIRE_OPTS = st.lists(st.sampled_from(["NX", "XX", "GT", "LT", "gt", "FOO"]), max_size=2)
PATTERNS = st.sampled_from(["*", "k*", "k[0-1]", "?", "k?", "*[^0]", "", "\\k*", "[k"])
TIMED = {"TTL": 1, "PTTL": 1000, "EXPIRETIME": 1, "PEXPIRETIME": 1000}

COMMAND = st.one_of(
    st.tuples(st.sampled_from(["SET"]), KEYS, st.sampled_from(["v", "1", "x" * 50])),
    st.tuples(st.sampled_from(["RPUSH", "SADD"]), KEYS, st.sampled_from(["a", "b"])),
    st.tuples(st.sampled_from(["DEL", "UNLINK", "EXISTS", "TOUCH"]),
              st.lists(KEYS, min_size=0, max_size=3)).map(lambda t: (t[0], *t[1])),
    st.tuples(st.sampled_from(["TYPE", "PERSIST", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME",
                               "GET"]), KEYS),
    st.tuples(st.just("EXPIRE"), KEYS, SECS, REL_OPTS).map(lambda t: (*t[:3], *t[3])),
    st.tuples(st.just("PEXPIRE"), KEYS, MSECS, REL_OPTS).map(lambda t: (*t[:3], *t[3])),
    st.tuples(st.just("EXPIREAT"), KEYS, ABS_SECS, EXPIRE_OPTS).map(lambda t: (*t[:3], *t[3])),
    st.tuples(st.just("PEXPIREAT"), KEYS, ABS_MSECS, EXPIRE_OPTS)
    .map(lambda t: (*t[:3], *t[3])),
    st.tuples(st.sampled_from(["RENAME", "RENAMENX"]), KEYS, KEYS),
    st.tuples(st.just("MOVE"), KEYS, st.sampled_from(["0", "1", "x", "16"])),
    st.tuples(st.just("COPY"), KEYS, KEYS, st.sampled_from(
        [(), ("REPLACE",), ("DB", "1"), ("DB", "1", "REPLACE"), ("DB", "0"), ("BAD",)]))
    .map(lambda t: ("COPY", t[1], t[2], *t[3])),
    st.tuples(st.just("KEYS"), PATTERNS),
    st.tuples(st.just("SELECT"), st.sampled_from(["0", "1"])),
    st.just(("DBSIZE",)),
    st.just(("__SCAN__",)),
    st.just(("__RANDOMKEY__",)),
)


def run_command(p: Pair, *argv: str) -> None:
    name = argv[0]
    if name == "__SCAN__":
        assert sorted(full_scan(p.a)) == sorted(set(full_scan(p.b)))
    elif name == "__RANDOMKEY__":
        ra, rb = p.both("RANDOMKEY")
        assert (parse_reply(ra) is None) == (parse_reply(rb) is None), (ra, rb)
    elif name in TIMED:
        check_timed(p, argv, TIMED[name])
    else:
        p.check(*argv)


@sequence_settings(80)
@given(proto=PROTOS, cmds=st.lists(COMMAND, min_size=5, max_size=30))
def test_random_sequences(pairs, proto, cmds):
    p = pairs[proto]
    p.both("SELECT", "0")
    run_sequence(p, cmds, check=run_command)
    for db in ("0", "1"):
        p.check("SELECT", db)
        p.check("KEYS", "*")
        for key in ("k0", "k1", "k2", "k3", ""):
            p.check("TYPE", key)
            check_timed(p, ("PTTL", key), 1000)
    p.both("SELECT", "0")


# -- propagation ---------------------------------------------------------------------------------

PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("SET", "a", "1"), ("SET", "b", "2"), ("DEL", "a", "nokey"), ("DEL", "nokey"),
    ("UNLINK", "b"), ("SET", "a", "1"),
    ("EXPIRE", "a", "100"), ("PEXPIRE", "a", "100000"), ("EXPIREAT", "a", FUTURE_S),
    ("PEXPIREAT", "a", FUTURE_MS), ("EXPIRE", "a", "100", "GT"), ("EXPIRE", "a", "100", "NX"),
    ("PEXPIRE", "a", "5000000", "xx"), ("EXPIRE", "nokey", "100"), ("EXPIRE", "a", "x"),
    ("PERSIST", "a"), ("PERSIST", "a"), ("EXPIRE", "a", "-1"), ("SET", "a", "1"),
    ("EXPIREAT", "a", "1"), ("SET", "a", "1"), ("PEXPIREAT", "a", "5"),
    ("SET", "r", "v"), ("RENAME", "r", "r2"), ("RENAME", "r2", "r2"), ("RENAMENX", "r2", "r2"),
    ("SET", "r3", "x"), ("RENAMENX", "r2", "r3"), ("RENAME", "r2", "r3"),
    ("MOVE", "r3", "1"), ("MOVE", "nokey", "1"), ("SET", "c", "v"), ("COPY", "c", "c2"),
    ("COPY", "c", "c2"), ("COPY", "c", "c2", "REPLACE"), ("COPY", "c", "c3", "DB", "2"),
    ("TOUCH", "c"), ("EXISTS", "c"), ("TYPE", "c"), ("TTL", "c"),
]


def test_propagation(tapped_redis):
    check_propagation(tapped_redis.port, PROPAGATION_CASES)


def test_shared_integers_follow_the_maxmemory_policy(pair):
    """OBJECT REFCOUNT of a small integer (Redis's maxmemory.tcl): shared with no maxmemory or
    a policy that keeps no per-key LRU/LFU field, each key's own under an LRU or LFU policy."""
    try:
        for policy in ("allkeys-random", "allkeys-lru", "volatile-lfu", "noeviction"):
            pair.check("CONFIG", "SET", "maxmemory", "1073741824")
            pair.check("CONFIG", "SET", "maxmemory-policy", policy)
            pair.check("SET", "a", "1")
            pair.check("OBJECT", "REFCOUNT", "a")
            pair.check("SET", "b", "10000")
            pair.check("OBJECT", "REFCOUNT", "b")
    finally:
        pair.check("CONFIG", "SET", "maxmemory", "0")
        pair.check("CONFIG", "SET", "maxmemory-policy", "noeviction")
