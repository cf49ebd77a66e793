"""MIGRATE between pyrepl and redis-server 7.0.15, both ways (the payload is DUMP's, the
target runs RESTORE): every type moves with its TTL, COPY keeps the source, REPLACE
overwrites, KEYS moves several, a missing key answers NOKEY, the target's error and a target
that does not answer give Redis's replies; side by side, pyrepl answers what Redis answers."""

from __future__ import annotations

import pytest
import redis

from tests.support.procs import free_port, start_pyrepl, start_redis

pytestmark = [pytest.mark.interop]


@pytest.fixture
def nodes():
    with start_pyrepl() as p, start_redis() as r, start_pyrepl() as p2:
        yield {"pyrepl": p, "redis": r, "pyrepl2": p2}


def _fill(c: redis.Redis) -> None:
    c.flushall()
    c.set("s", "v", px=100_000)
    c.set("n", 12345)
    c.rpush("l", *range(300))
    c.hset("h", mapping={f"f{i}": i for i in range(20)})
    c.sadd("set", "a", "b", 3)
    c.zadd("z", {"m1": 1.5, "m2": 2})
    c.xadd("x", {"f": "v"}, id="1-1")


def _run(src: redis.Redis, port: int) -> list[object]:
    out: list[object] = []
    for argv in (("MIGRATE", "127.0.0.1", port, "s", 0, 5000),
                 ("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "COPY"),
                 ("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "COPY"),       # BUSYKEY
                 ("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "COPY", "REPLACE"),
                 ("MIGRATE", "127.0.0.1", port, "", 3, 5000, "KEYS", "l", "h", "set", "z",
                  "x", "missing"),
                 ("MIGRATE", "127.0.0.1", port, "missing", 0, 5000),
                 ("MIGRATE", "127.0.0.1", port, "k", 0, 5000, "KEYS", "n"),
                 ("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "AUTH", "wrong"),
                 ("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "BOGUS"),
                 ("MIGRATE", "127.0.0.1", port, "n", "x", 5000),
                 ("MIGRATE", "127.0.0.1", free_port(), "n", 0, 1000)):
        try:
            out.append(src.execute_command(*argv))
        except redis.ResponseError as e:
            out.append(("error", str(e)))
    return out


def _dataset(c: redis.Redis) -> dict[int, dict[bytes, object]]:
    seen = {}
    for db in (0, 3):
        c.execute_command("SELECT", db)
        seen[db] = {k: (c.type(k), c.dump(k), c.pttl(k) > 0) for k in sorted(c.keys())}
    c.execute_command("SELECT", 0)
    return seen


@pytest.mark.parametrize("direction", ["pyrepl->redis", "redis->pyrepl", "pyrepl->pyrepl"])
def test_migrate_moves_what_redis_moves(nodes, direction: str) -> None:
    src_name, dst_name = direction.split("->")
    if src_name == dst_name:
        dst_name = "pyrepl2"
    results = []
    for src_kind in (src_name, "redis"):
        src = redis.Redis(port=nodes[src_kind].port)
        dst_node = nodes[dst_name] if src_kind == src_name else nodes["pyrepl2"]
        dst = redis.Redis(port=dst_node.port)
        _fill(src)
        dst.flushall()
        replies = _run(src, dst_node.port)
        results.append((replies, _dataset(src), _dataset(dst)))
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]        # what is left at the source
    got, want = results[0][2], results[1][2]
    assert {db: {k: (t, ttl) for k, (t, _, ttl) in keys.items()} for db, keys in got.items()} \
        == {db: {k: (t, ttl) for k, (t, _, ttl) in keys.items()} for db, keys in want.items()}
    assert got[3].keys() == {b"l", b"h", b"set", b"z", b"x"}
    assert b"s" in got[0] and got[0][b"s"][2]     # moved with its TTL


def test_the_keys_moved_leave_the_replica_too(nodes) -> None:
    """MIGRATE propagates as DEL of the keys the target acknowledged (COPY: nothing)."""
    import time

    src = redis.Redis(port=nodes["pyrepl"].port)
    _fill(src)
    with start_pyrepl("--replicaof", "127.0.0.1", str(nodes["pyrepl"].port)) as rep:
        r = redis.Redis(port=rep.port)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and r.dbsize() != src.dbsize():
            time.sleep(0.05)
        assert r.dbsize() == 7
        port = nodes["redis"].port
        assert src.execute_command("MIGRATE", "127.0.0.1", port, "n", 0, 5000, "COPY") == b"OK"
        assert src.execute_command("MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", "l",
                                   "h") == b"OK"
        src.set("fence", 1)
        while time.monotonic() < deadline and r.get("fence") is None:
            time.sleep(0.05)
        assert sorted(r.keys()) == sorted(src.keys())
        assert r.exists("n") and not r.exists("l", "h")
