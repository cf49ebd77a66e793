"""Streams in RDB files and DUMP payloads, against real Redis 7.0.15 and the Redis 8 build.

pyrepl writes RDB_TYPE_STREAM_LISTPACKS_2 and Redis 7.0.15 loads it with the same DEBUG DIGEST
and the same XINFO STREAM FULL (times included: they are persisted); Redis 7 (type 19) and
Redis 8 (its newer stream type) write and pyrepl loads with the same digest, and for Redis 7 the
same XINFO STREAM FULL; DUMP/RESTORE of streams works both ways.
"""

from __future__ import annotations

import tempfile

import pytest

from tests.support.procs import redis8_server_path, start_pyrepl, start_pyrepl_on_rdb, start_redis
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

KEYS = ["plain", "groups", "trimmed", "emptied", "bytes"]


def populate(c: RawClient) -> None:
    """Streams with several nodes, tombstones, trims, groups, PELs and consumers."""
    c.call("CONFIG", "SET", "stream-node-max-entries", "5")
    for i in range(1, 40):
        c.call("XADD", "plain", f"{i}-{i % 4}", "f", str(i), "name", "x" * (i % 9))
    for i in range(1, 30):
        fields = ("a", "1", "b", "2") if i % 3 else ("other", "-5", "n", str(i) * 20)
        c.call("XADD", "groups", f"{100 + i}-0", *fields)
    c.call("XDEL", "groups", "103-0", "104-0", "120-0")
    c.call("XGROUP", "CREATE", "groups", "g1", "0")
    c.call("XGROUP", "CREATE", "groups", "g2", "110-0", "ENTRIESREAD", "3")
    c.call("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "6", "STREAMS", "groups", ">")
    c.call("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "4", "STREAMS", "groups", ">")
    c.call("XREADGROUP", "GROUP", "g2", "carol", "NOACK", "COUNT", "2", "STREAMS", "groups", ">")
    c.call("XGROUP", "CREATECONSUMER", "groups", "g2", "idle-one")
    c.call("XACK", "groups", "g1", "101-0")
    c.call("XCLAIM", "groups", "g1", "dave", "0", "102-0", "RETRYCOUNT", "7")
    c.call("CONFIG", "SET", "stream-node-max-entries", "100")
    for i in range(1, 200):
        c.call("XADD", "trimmed", f"{i}-0", "k", "v" * (i % 50))
    c.call("XTRIM", "trimmed", "MAXLEN", "~", "120")
    c.call("XTRIM", "trimmed", "MAXLEN", "100")
    c.call("XADD", "emptied", "5-5", "f", "v")
    c.call("XGROUP", "CREATE", "emptied", "g", "$")
    c.call("XDEL", "emptied", "5-5")
    c.call("XGROUP", "CREATE", "made", "g", "$", "MKSTREAM")
    for i in range(1, 60):
        c.call("XADD", "bytes", f"{i}-0", f"field-{i % 5}", "y" * (i * 13 % 200))
    c.call("SET", "str", "plain string")


def _full(c: RawClient, key: str) -> object:
    return parse_reply(c.call("XINFO", "STREAM", key, "FULL"))


def test_pyrepl_writes_redis7_loads() -> None:
    with start_pyrepl() as pyrepl:
        with RawClient(pyrepl.port) as p:
            populate(p)
            digest = p.call("DEBUG", "DIGEST")
            full = {k: _full(p, k) for k in [*KEYS, "made"]}
            assert p.call("SAVE") == b"+OK\r\n"
        redis = start_redis("--enable-debug-command", "yes", "--dbfilename", "dump.rdb",
                            tmpdir=pyrepl.dir)
        try:
            with RawClient(redis.port) as r:
                assert r.call("DEBUG", "DIGEST") == digest
                for k, v in full.items():
                    assert _full(r, k) == v, k
        finally:
            redis.stop()


@pytest.mark.parametrize("version", [7, 8])
def test_redis_writes_pyrepl_loads(version: int) -> None:
    if version == 8 and redis8_server_path() is None:
        pytest.fail("the Redis 8 build (make redis-src) is missing")
    directory = tempfile.mkdtemp(prefix="redis-streams-")
    redis = start_redis("--enable-debug-command", "yes", tmpdir=directory, version=version)
    with redis, RawClient(redis.port) as r:
        populate(r)
        digest = r.call("DEBUG", "DIGEST")
        full = {k: _full(r, k) for k in [*KEYS, "made"]}
        groups = {k: r.call("XINFO", "GROUPS", k) for k in [*KEYS, "made"]}
        assert r.call("SAVE") == b"+OK\r\n"
    with start_pyrepl_on_rdb(directory) as pyrepl, RawClient(pyrepl.port) as p:
        assert p.call("DEBUG", "DIGEST") == digest
        for k in [*KEYS, "made"]:
            if version == 7:
                assert _full(p, k) == full[k], k
            else:
                assert p.call("XINFO", "GROUPS", k) == groups[k], k


def test_dump_restore_both_ways(pyrepl_server) -> None:
    with start_redis("--enable-debug-command", "yes") as redis_server, \
            RawClient(pyrepl_server.port) as p, RawClient(redis_server.port) as r:
        for src, dst in ((r, p), (p, r)):   # Redis's payloads into pyrepl, then back
            p.call("FLUSHALL")
            r.call("FLUSHALL")
            populate(src)
            for k in KEYS:
                payload = parse_reply(src.call("DUMP", k))
                assert isinstance(payload, bytes)
                assert dst.call("RESTORE", k, "0", payload) == b"+OK\r\n"
                assert _full(p, k) == _full(r, k), k
                assert p.call("DEBUG", "DIGEST-VALUE", k) == r.call("DEBUG", "DIGEST-VALUE", k)
        p.call("CONFIG", "SET", "stream-node-max-entries", "100")
