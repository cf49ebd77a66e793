"""The whole data model replicated both ways with real Redis 7.0.15 (issue 11's end-to-end check).

A master's dataset and its live stream use every family pyrepl has: streams with consumer groups,
pending entries, claims and trims; sparse and dense HyperLogLogs (PFCOUNT's cache refresh
propagated); bitmaps and BITFIELD; geo indexes and GEOSEARCHSTORE; SORT ... STORE; RESTORE of a
payload the master DUMPed; served blocking pops (BLPOP, BZPOPMIN, BLMOVE: they reach replicas as
the pops they became); PUBLISH; a Lua script's effects;
plus strings, lists, hashes, sets and zsets. Half of it is written before the replica connects
(it arrives in the RDB), half after (it arrives as the stream).

Both directions: the master is redis-server 7.0.15 or pyrepl, and each has two replicas, a real
redis-server 7.0.15 and a pyrepl. Both replicas must end with the master's DEBUG DIGEST and its
HyperLogLog bytes, with the same XINFO STREAM FULL as each other (times aside: a replica stamps
consumers' seen-time with its own clock, and knows a group's entries-read only when its master
sent it, as Redis's replicas do), and never answer their master with an error.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import digest, info, wait_in_sync
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

STREAMS = ("s:plain", "s:groups", "s:trim")
HLLS = ("h:sparse", "h:dense", "h:merged")


def blocked_pop(port: int, pop: tuple[str, ...], push: tuple[str, ...]) -> bytes:
    """A client blocks on ``pop``; another's ``push`` serves it; the served reply."""
    with RawClient(port) as waiting, RawClient(port) as pusher:
        waiting.send(*pop)
        deadline = time.monotonic() + 10
        while int(info(redis.Redis(port=port), "clients")["blocked_clients"]) < 1:
            assert time.monotonic() < deadline, "the client never blocked"
            time.sleep(0.01)
        pusher.call(*push)
        return waiting.read_reply()


def workload(c: RawClient, port: int, tag: str) -> None:
    t = tag
    # streams: groups, pending entries, acks, claims, trims
    for i in range(1, 60):
        c.call("XADD", "s:plain", "*", "n", str(i), "tag", t)
    for i in range(1, 40):
        c.call("XADD", "s:groups", "*", "a", str(i), "b", "x" * (i % 7))
    c.call("XGROUP", "CREATE", "s:groups", f"g-{t}", "0")
    c.call("XREADGROUP", "GROUP", f"g-{t}", "alice", "COUNT", "10", "STREAMS", "s:groups", ">")
    c.call("XREADGROUP", "GROUP", f"g-{t}", "bob", "COUNT", "5", "STREAMS", "s:groups", ">")
    pending = parse_reply(c.call("XPENDING", "s:groups", f"g-{t}", "-", "+", "3"))
    assert isinstance(pending, list) and len(pending) == 3
    c.call("XACK", "s:groups", f"g-{t}", pending[0][0])
    c.call("XCLAIM", "s:groups", f"g-{t}", "carol", "0", pending[1][0], "RETRYCOUNT", "4")
    c.call("XAUTOCLAIM", "s:groups", f"g-{t}", "dave", "0", "0-0", "COUNT", "2")
    for i in range(1, 300):
        c.call("XADD", "s:trim", "MAXLEN", "~", "150", "*", "k", "v" * (i % 40))
    c.call("XTRIM", "s:trim", "MINID", "0-1")
    # HyperLogLog: sparse, dense, merged; PFCOUNT refreshes (and propagates) the cache
    c.call("PFADD", "h:sparse", *(f"{t}-e{i}" for i in range(20)))
    c.call("PFADD", "h:dense", *(f"{t}-d{i}" for i in range(3000)))
    c.call("PFCOUNT", "h:sparse")
    c.call("PFMERGE", "h:merged", "h:sparse", "h:dense")
    # bitmaps
    for off in (1, 7, 100, 4095, 70000):
        c.call("SETBIT", f"b:{t}", str(off), "1")
    c.call("BITFIELD", f"bf:{t}", "SET", "i8", "0", "-5", "INCRBY", "u4", "#3", "9",
           "OVERFLOW", "SAT", "INCRBY", "i16", "100", "40000")
    c.call("BITOP", "XOR", f"bx:{t}", f"b:{t}", f"bf:{t}")
    # geo
    c.call("GEOADD", "geo", "13.361389", "38.115556", f"Palermo-{t}", "15.087269",
           "37.502669", f"Catania-{t}", "2.3522", "48.8566", f"Paris-{t}")
    c.call("GEOSEARCHSTORE", f"geo:near:{t}", "geo", "FROMLONLAT", "15", "37", "BYRADIUS",
           "300", "km", "ASC", "STOREDIST")
    c.call("GEORADIUS", "geo", "15", "37", "200", "km", "STORE", f"geo:r:{t}")
    # SORT ... STORE (BY and GET patterns)
    c.call("RPUSH", f"l:sort:{t}", "3", "1", "2")
    for i in (1, 2, 3):
        c.call("SET", f"w:{t}:{i}", str(10 - i))
        c.call("HSET", f"o:{t}:{i}", "name", f"n{i}")
    c.call("SORT", f"l:sort:{t}", "BY", f"w:{t}:*", "GET", f"o:{t}:*->name", "STORE",
           f"sorted:{t}")
    # RESTORE of a payload the master made
    c.call("ZADD", f"z:{t}", "1", "a", "2.5", "b")
    payload = parse_reply(c.call("DUMP", f"z:{t}"))
    assert isinstance(payload, bytes)
    c.call("RESTORE", f"z:restored:{t}", "0", payload)
    c.call("RESTORE", f"z:restored:{t}", "100000", payload, "REPLACE")
    # served blocking pops: the replicas get the pops they became
    assert blocked_pop(port, ("BLPOP", f"bl:{t}", "5"), ("RPUSH", f"bl:{t}", "x", "y")) != \
        b"*-1\r\n"
    assert blocked_pop(port, ("BZPOPMIN", f"bz:{t}", "5"), ("ZADD", f"bz:{t}", "1", "m")) != \
        b"*-1\r\n"
    assert blocked_pop(port, ("BLMOVE", f"src:{t}", f"dst:{t}", "LEFT", "RIGHT", "5"),
                       ("LPUSH", f"src:{t}", "moved")) == b"$5\r\nmoved\r\n"
    # a script's writes (Redis 7 replicates their effects)
    c.call("EVAL", "redis.call('SET', KEYS[1], ARGV[1]); redis.call('INCRBY', KEYS[2], 5)"
           "; return redis.call('LPUSH', KEYS[3], 'x')", "3", f"lua:s:{t}", f"lua:n:{t}",
           f"lua:l:{t}", "v")
    # PUBLISH is propagated (nobody listens here; test_pubsub_replication checks delivery)
    c.call("PUBLISH", f"chan:{t}", "hello")
    c.call("SPUBLISH", f"shard:{t}", "hello")
    # the other families
    c.call("SET", f"str:{t}", "v", "PX", "600000")
    c.call("HSET", f"hash:{t}", "f1", "1", "f2", "2")
    c.call("HINCRBYFLOAT", f"hash:{t}", "f3", "1.5")
    c.call("SADD", f"set:{t}", "a", "b", "c")
    c.call("SPOP", f"set:{t}")
    c.call("ZINCRBY", f"z:{t}", "3", "a")
    c.call("LPUSH", f"list:{t}", "1", "2", "3")
    c.call("LMOVE", f"list:{t}", f"list2:{t}", "LEFT", "RIGHT")


def xinfo_full(c: RawClient, key: str) -> Any:
    """XINFO STREAM FULL without the consumers' seen/active times (each node's own clock)."""
    def strip(v: Any) -> Any:
        if isinstance(v, list):
            out = []
            skip = False
            for i, x in enumerate(v):
                if skip:
                    skip = False
                    continue
                if i % 2 == 0 and x in (b"seen-time", b"active-time") and len(v) % 2 == 0:
                    skip = True
                    continue
                out.append(strip(x))
            return out
        return v
    return strip(parse_reply(c.call("XINFO", "STREAM", key, "FULL")))


def run(master_kind: str) -> None:
    start_master = start_pyrepl if master_kind == "pyrepl" else start_redis
    master = start_master("--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0")
    replicas = []
    try:
        with RawClient(master.port) as mc:
            workload(mc, master.port, "rdb")
            for start in (start_redis, start_pyrepl):     # one replica of each kind
                replicas.append(start("--enable-debug-command", "yes", "--replicaof",
                                      "127.0.0.1", str(master.port)))
            m = redis.Redis(port=master.port)
            rs = [redis.Redis(port=rp.port) for rp in replicas]
            for r in rs:
                wait_in_sync(m, r)
            workload(mc, master.port, "stream")
            for r in rs:
                wait_in_sync(m, r)
            assert digest(rs[0]) == digest(rs[1]) == digest(m)
            with RawClient(replicas[0].port) as real, RawClient(replicas[1].port) as ours:
                # a replica knows a group's entries-read only when its master said it (XGROUP
                # SETID ... ENTRIESREAD): compare the two replicas, not replica and master
                for key in STREAMS:
                    assert xinfo_full(ours, key) == xinfo_full(real, key), key
                for key in HLLS:
                    assert ours.call("GET", key) == real.call("GET", key) == mc.call("GET", key)
                assert ours.call("DBSIZE") == real.call("DBSIZE") == mc.call("DBSIZE")
        # neither replica ever answered its master with an error
        assert info(rs[1], "stats")["unexpected_error_replies"] == "0"
        for rp in replicas:
            assert "CRITICAL" not in rp.log(), rp.log()[-2000:]
    finally:
        for rp in replicas:
            rp.stop()
        master.stop()


@pytest.mark.parametrize("master_kind", ["redis", "pyrepl"])
def test_every_family_replicates_both_ways(master_kind: str) -> None:
    run(master_kind)
