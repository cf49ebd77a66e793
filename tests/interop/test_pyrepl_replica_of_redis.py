"""A pyrepl replica following a real redis-server 7.0.15 master (Debian's), over real sockets.

Full sync (diskless ``$EOF:`` and disk ``$<len>``) of a dataset that real Redis encodes
compactly (listpack, intset, quicklist, LZF, integers), then writes of every type streamed over;
DEBUG DIGEST must be equal on both sides (pyrepl's is Redis-compatible; redis-server needs
``--enable-debug-command yes``). Partial resyncs after the link is killed from either end and
after a restart of the replica (SHUTDOWN SAVE, start again) must be accepted by Redis
(``sync_partial_ok`` grows, ``sync_full`` does not). INFO replication and ROLE of the pyrepl
replica are compared field by field with a real Redis replica of the same master.
"""

from __future__ import annotations

import random

import pytest
import redis

from pyrepl.core.info import BEYOND_REDIS_7
from tests.support.procs import start_pyrepl, start_redis
from tests.support.redispy import digest, in_sync
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for, wait_synced

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def populate(r: redis.Redis, seed: int = 7) -> None:
    """Every type, in the encodings Redis picks by size, TTLs, three databases."""
    rnd = random.Random(seed)
    r.execute_command("DEBUG", "POPULATE", "3000", "key", "40")
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set(f"int:{i}", rnd.randint(-10**12, 10**12))
        p.set(f"lzf:{i}", ("abcd" * 100) + str(i))  # compressible: LZF in the RDB
    p.rpush("small-list", *range(10))
    p.rpush("big-list", *[f"elem-{i}-" + "x" * rnd.randint(0, 80) for i in range(3000)])
    p.sadd("intset", *range(100))
    p.sadd("listpack-set", *[f"m{i}" for i in range(50)])
    p.sadd("hash-set", *[f"member-{i}" for i in range(1000)])
    p.hset("small-hash", mapping={f"f{i}": i for i in range(20)})
    p.hset("big-hash", mapping={f"field-{i}": "v" * (i % 90) for i in range(2000)})
    p.zadd("small-zset", {f"z{i}": i / 3 for i in range(30)})
    p.zadd("big-zset", {f"zz{i}": rnd.uniform(-1e6, 1e6) for i in range(2000)})
    p.set("ttl:1", "v", px=3_600_000)
    p.hset("ttl:h", "a", "b")
    p.pexpire("ttl:h", 7_200_000)
    p.execute()
    r1 = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=1)
    r1.set("db1:key", "one")
    r1.rpush("db1:list", "a", "b")
    r9 = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=9)
    r9.zadd("db9:z", {"a": 1})
    r1.close()
    r9.close()


def write_every_type(port: int, rounds: int = 3) -> None:
    """Writes whose propagated forms (rewritten by Redis: PEXPIREAT, SET KEEPTTL, SREM for
    SPOP, ...) the replica must apply exactly."""
    r = redis.Redis(port=port)
    for n in range(rounds):
        p = r.pipeline(transaction=False)
        p.set(f"s:{n}", "v")
        p.append(f"s:{n}", "more")
        p.incr("counter")
        p.incrbyfloat("float", 1.25)
        p.execute_command("SETEX", f"ex:{n}", 1000, "x")
        p.expire(f"s:{n}", 500)
        p.persist(f"s:{n}")
        p.getdel("key:1") if n == 0 else p.delete(f"key:{n}")
        p.lpush("small-list", "l1", "l2")
        p.rpop("big-list")
        p.lset("small-list", 0, "changed")
        p.linsert("small-list", "BEFORE", "changed", "ins")
        p.ltrim("big-list", 0, 2000)
        p.lmove("small-list", "moved-list", "LEFT", "RIGHT")
        p.sadd("intset", 1000 + n, "now-a-listpack")
        p.srem("hash-set", "member-1", "member-2")
        p.spop("listpack-set")
        p.smove("hash-set", "other-set", f"member-{10 + n}")
        p.sinterstore("inter", "hash-set", "other-set")
        p.hset("small-hash", "new", n)
        p.hdel("big-hash", f"field-{n}")
        p.hincrby("small-hash", "f1", 5)
        p.hincrbyfloat("small-hash", "f2", 0.5)
        p.zadd("small-zset", {"new": n})
        p.zincrby("big-zset", 2.5, "zz1")
        p.zrem("big-zset", f"zz{n + 5}")
        p.zpopmin("small-zset")
        p.zunionstore("zu", ["small-zset", "big-zset"])
        p.rename(f"lzf:{n}", f"renamed:{n}")
        p.execute()
        with r.pipeline(transaction=True) as t:
            t.incr("tx:a")
            t.rpush("tx:l", n)
            t.execute()
    r1 = redis.Redis(port=port, db=1)
    r1.set("db1:new", "x")
    r1.flushdb()
    r1.set("db1:after-flush", "y")
    r.close()
    r1.close()


# Redis 8 fields pyrepl reports (the rdb channel's replica buffer), its own (the last full
# sync's mode, its buffer's spill) and Valkey's (replicas_waiting_psync) that 7.0.15 has not


def info_keys(port: int) -> list[str]:
    """The field names of INFO replication, in order, from the raw reply (Redis 8's, Valkey's
    and pyrepl's additions left out: the other side is a 7.0.15 replica)."""
    with RawClient(port) as c:
        text = parse_reply(c.call("INFO", "replication")).decode()
    keys = [line.split(":")[0] for line in text.split("\r\n") if ":" in line]
    return [k for k in keys if k not in BEYOND_REDIS_7]


def stats(port: int) -> dict:
    with redis.Redis(port=port) as r:
        return r.info("stats")


@pytest.fixture
def master(tmp_path):
    d = tmp_path / "master"
    d.mkdir()
    srv = start_redis("--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0",
                      tmpdir=str(d))
    try:
        with redis.Redis(port=srv.port) as r:
            populate(r)
        yield srv
    finally:
        srv.stop()


def start_replica(tmp_path, master_port: int, *extra: str, port: int | None = None):
    d = tmp_path / "replica"
    d.mkdir(exist_ok=True)
    return start_pyrepl("--master", f"127.0.0.1:{master_port}", *extra, role="replica",
                        tmpdir=str(d), port=port)


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_full_sync_then_every_type_streams_over(tmp_path, master, diskless: str) -> None:
    with redis.Redis(port=master.port) as m:
        m.config_set("repl-diskless-sync", diskless)
    with start_replica(tmp_path, master.port) as rep:
        wait_synced(master.port, rep.port)
        assert stats(master.port)["sync_full"] == 1
        log = rep.log()
        assert ("receiving streamed RDB from master with EOF" in log) == (diskless == "yes")
        assert "MASTER <-> REPLICA sync: Finished with success" in log
        write_every_type(master.port)
        wait_synced(master.port, rep.port)
        with redis.Redis(port=rep.port) as s:
            assert s.get("counter") == b"3"
            assert s.get("db1:after-flush") is None  # db 0 connection
            assert redis.Redis(port=rep.port, db=1).get("db1:after-flush") == b"y"
            with pytest.raises(redis.exceptions.ReadOnlyError):
                s.set("x", "1")
            clients = s.client_list(_type="master")
            assert len(clients) == 1 and clients[0]["flags"] == "M"


@pytest.mark.parametrize("side", ["replica", "master"])
def test_partial_resync_after_the_link_is_killed(tmp_path, master, side: str) -> None:
    with start_replica(tmp_path, master.port) as rep:
        wait_synced(master.port, rep.port)
        before = stats(master.port)
        if side == "replica":
            with redis.Redis(port=rep.port) as s:
                assert s.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
        else:
            with redis.Redis(port=master.port) as m:
                assert m.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
        write_every_type(master.port, rounds=2)  # while the link is down or coming back
        wait_synced(master.port, rep.port)
        after = stats(master.port)
        assert after["sync_full"] == before["sync_full"]
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 1
        log = rep.log()
        assert "Connection with master lost." in log
        assert "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization." in log


def test_restarted_replica_continues_partially(tmp_path, master) -> None:
    rep = start_replica(tmp_path, master.port)
    port = rep.port
    try:
        wait_synced(master.port, rep.port)
        write_every_type(master.port, rounds=1)
        with redis.Redis(port=master.port, db=5) as m5:
            m5.set("in-db-5", "x")  # the stream now has db 5 selected
        wait_synced(master.port, rep.port)
        with redis.Redis(port=rep.port) as s:
            with pytest.raises(redis.exceptions.ConnectionError):
                s.execute_command("SHUTDOWN", "SAVE")
        wait_for(lambda: not rep.alive(), 15, what="replica exit")
    finally:
        rep.stop()
    before = stats(master.port)
    with redis.Redis(port=master.port, db=5) as m5:
        m5.set("while-down", "1")  # no SELECT: continues in db 5
    with start_replica(tmp_path, master.port, port=port) as rep2:
        wait_synced(master.port, rep2.port)
        after = stats(master.port)
        assert after["sync_full"] == before["sync_full"]
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 1
        with redis.Redis(port=rep2.port, db=5) as s5:
            assert s5.get("while-down") == b"1"
        assert "Trying a partial resynchronization (request " in rep2.log()


def test_masterauth_and_info_fields_match_a_real_redis_replica(tmp_path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    m = start_redis("--enable-debug-command", "yes", "--requirepass", "pw",
                    "--repl-diskless-sync-delay", "0", tmpdir=str(d))
    d2 = tmp_path / "rr"
    d2.mkdir()
    real = start_redis("--replicaof", "127.0.0.1", str(m.port), "--masterauth", "pw",
                       "--enable-debug-command", "yes", tmpdir=str(d2))
    rep = start_replica(tmp_path, m.port, "--masterauth", "pw")
    with m, real, rep, redis.Redis(port=m.port, password="pw") as mr, \
            redis.Redis(port=rep.port) as ours, redis.Redis(port=real.port) as theirs:
        mr.execute_command("DEBUG", "POPULATE", "500")
        wait_for(lambda: mr.info("replication")["connected_slaves"] == 2, 20,
                 what="two replicas")
        wait_synced_auth = lambda port: (  # noqa: E731
            redis.Redis(port=port).info("replication")["slave_repl_offset"]
            == mr.info("replication")["master_repl_offset"])
        wait_for(lambda: wait_synced_auth(real.port) and wait_synced_auth(rep.port), 20,
                 what="both replicas in sync")
        assert ours.execute_command("DEBUG", "DIGEST") == theirs.execute_command("DEBUG", "DIGEST")
        assert info_keys(rep.port) == info_keys(real.port)
        ours_role = ours.execute_command("ROLE")
        theirs_role = theirs.execute_command("ROLE")
        assert [type(x) for x in ours_role] == [type(x) for x in theirs_role]
        assert ours_role[:4] == theirs_role[:4]  # slave, host, port, connected
        # the master lists both replicas, each with its listening port
        lines = [v for k, v in mr.info("replication").items() if k.startswith("slave")]
        assert {str(x["port"]) for x in lines} == {str(rep.port), str(real.port)}
        # link down: both report the same fields again
        mr.execute_command("CONFIG", "SET", "requirepass", "other")  # reconnects will fail
        mr.execute_command("CLIENT", "KILL", "TYPE", "replica")
        wait_for(lambda: ours.info("replication")["master_link_status"] == "down"
                 and theirs.info("replication")["master_link_status"] == "down", 20,
                 what="links down")
        assert info_keys(rep.port) == info_keys(real.port)
        wait_for(lambda: "Unable to AUTH to MASTER" in rep.log(), 10, what="auth error log")


def test_promoted_pyrepl_replica_serves_the_old_redis_master_partially(tmp_path, master) -> None:
    """Failover: the pyrepl replica is promoted; the old Redis master is repointed to it and
    continues partially through replid2 (pyrepl's master side answers +CONTINUE <new id>)."""
    with start_replica(tmp_path, master.port) as rep:
        wait_synced(master.port, rep.port)
        s = redis.Redis(port=rep.port)
        m = redis.Redis(port=master.port)
        old_id = m.info("replication")["master_replid"]
        assert s.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        info = s.info("replication")
        assert info["role"] == "master" and info["master_replid2"] == old_id
        s.set("on-new-master", "z")
        assert m.execute_command("REPLICAOF", "127.0.0.1", str(rep.port)) == b"OK"
        wait_for(lambda: m.info("replication").get("master_link_status") == "up", 20,
                 what="old master follows")
        wait_for(lambda: m.get("on-new-master") == b"z", 20, what="write reached")
        assert s.info("stats")["sync_full"] == 0
        assert s.info("stats")["sync_partial_ok"] == 1
        assert m.info("replication")["master_replid2"] == old_id
        assert digest(master.port) == digest(rep.port)
        s.close()
        m.close()


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_transfer_progress_and_stale_reads_during_a_slow_sync(tmp_path, diskless: str) -> None:
    """While the (slowed) snapshot flows, INFO reports the transfer with Redis's fields and the
    old dataset keeps answering reads; after the swap the master's dataset is there."""
    d = tmp_path / "m"
    d.mkdir()
    # a diskless delay so both replicas share one child (and are in the transfer together)
    m = start_redis("--enable-debug-command", "yes", "--repl-diskless-sync-delay", "2",
                    "--repl-diskless-sync", diskless, "--rdb-key-save-delay", "1000",
                    tmpdir=str(d))
    d2 = tmp_path / "rr"
    d2.mkdir()
    real = start_redis("--enable-debug-command", "yes", tmpdir=str(d2))
    rep = start_pyrepl(role="master", tmpdir=str(tmp_path))
    with m, real, rep, redis.Redis(port=m.port) as mr, redis.Redis(port=rep.port) as ours, \
            redis.Redis(port=real.port) as theirs:
        mr.execute_command("DEBUG", "POPULATE", "2000")
        ours.set("old-key", "old")
        assert ours.execute_command("REPLICAOF", "127.0.0.1", str(m.port)) == b"OK"
        theirs.execute_command("REPLICAOF", "127.0.0.1", str(m.port))
        wait_for(lambda: ours.info("replication")["master_sync_in_progress"] == 1
                 and theirs.info("replication")["master_sync_in_progress"] == 1, 20,
                 what="both replicas in the transfer")
        assert info_keys(rep.port) == info_keys(real.port)
        assert ours.get("old-key") == b"old"  # replica-serve-stale-data yes: old data serves
        info = ours.info("replication")
        if diskless == "yes":
            wait_for(lambda: ours.info("replication")["master_sync_read_bytes"] > 0, 20,
                     what="payload bytes")
            info = ours.info("replication")
            assert info["master_sync_total_bytes"] == 0
            assert info["master_sync_left_bytes"] == -info["master_sync_read_bytes"]
        else:  # the disk form: the length is unknown (-1) until the file is written
            assert info["master_sync_total_bytes"] == -1
        wait_for(lambda: in_sync(m.port, rep.port) and in_sync(m.port, real.port), 60,
                 what="both synced")
        assert ours.get("old-key") is None
        assert digest(m.port) == digest(rep.port) == digest(real.port)
