"""pyrepl <-> pyrepl replication with real processes: full sync under write load, chains,
promotion with replid2, restarts of the master and of the replica without a full sync.

Every scenario ends with equal DEBUG DIGESTs, and asserts the master's sync counters
(``sync_full`` / ``sync_partial_ok``) so a silent full sync cannot pass for a partial one.
"""

from __future__ import annotations

import pytest
import redis

from tests.support.load import LoadWriter, populate_under_load
from tests.support.procs import start_pyrepl
from tests.support.redispy import r, repl
from tests.support.waits import wait_for, wait_synced

pytestmark = pytest.mark.slow


def stats(port: int) -> dict:
    with r(port) as c:
        return c.info("stats")


def start_master(tmp_path, name: str = "a", *extra: str, port: int | None = None):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--repl-diskless-sync-delay", "0", *extra, tmpdir=str(d), port=port)


def start_replica(tmp_path, name: str, master_port: int, *extra: str, port: int | None = None):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--master", f"127.0.0.1:{master_port}", "--repl-diskless-sync-delay",
                        "0", *extra, role="replica", tmpdir=str(d), port=port)


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_full_sync_under_write_load(tmp_path, diskless: str) -> None:
    a = start_master(tmp_path, "a", "--repl-diskless-sync", diskless,
                     "--rdb-key-save-delay", "20")
    b = None
    writer = LoadWriter(a.port, max_seconds=90)
    try:
        populate_under_load(a.port, 30000, writer, 2000)
        b = start_replica(tmp_path, "b", a.port)
        wait_for(lambda: repl(b.port).get("master_link_status") == "up", 60, what="link up")
        ops_at_link_up = writer.ops
        wait_for(lambda: writer.ops > ops_at_link_up + 2000, 20,
                 what=f"writes after link up (at {ops_at_link_up}: {writer.error!r})")
        writer.finish()
        wait_synced(a.port, b.port)
        assert stats(a.port)["sync_full"] == 1
        log = b.log()
        assert ("with EOF to parser" in log) == (diskless == "yes")
        # writes went on during the transfer: the replica applied a stream after the snapshot
        assert repl(b.port)["slave_repl_offset"] > 0
    finally:
        writer.stop_event.set()
        if b is not None:
            b.stop()
        a.stop()


def start_chain(tmp_path):
    a = start_master(tmp_path, "a")
    with r(a.port) as c:
        c.execute_command("DEBUG", "POPULATE", "2000")
        c.rpush("list", *range(100))
    b = start_replica(tmp_path, "b", a.port)
    c = start_replica(tmp_path, "c", b.port)
    return a, b, c


def write_some(port: int, tag: str, n: int = 200) -> None:
    with r(port) as c:
        p = c.pipeline(transaction=False)
        for i in range(n):
            p.set(f"{tag}:{i}", i)
        p.hset(f"{tag}:h", mapping={"a": 1, "b": 2})
        p.zadd(f"{tag}:z", {"x": 1.5})
        p.sadd(f"{tag}:s", "m")
        p.execute()
    with r(port, 4) as c4:
        c4.set(f"{tag}:db4", "v")


def test_chain_agrees_on_data_ids_and_offsets(tmp_path) -> None:
    a, b, c = start_chain(tmp_path)
    try:
        wait_synced(a.port, b.port)
        write_some(a.port, "chain")
        wait_synced(a.port, b.port, c.port)
        ia, ib, ic = repl(a.port), repl(b.port), repl(c.port)
        assert ia["master_replid"] == ib["master_replid"] == ic["master_replid"]
        assert ia["master_repl_offset"] == ib["master_repl_offset"] == ic["master_repl_offset"]
        assert ib["connected_slaves"] == 1 and ib["slave0"]["port"] == c.port
        # the middle node passes the stream on verbatim: a partial resync of C from B works
        with r(c.port) as cc:
            cc.execute_command("CLIENT", "KILL", "TYPE", "master")
        write_some(a.port, "gap")
        wait_synced(a.port, b.port, c.port)
        assert stats(b.port)["sync_partial_ok"] == 1
    finally:
        c.stop()
        b.stop()
        a.stop()


def test_promotion_repoints_the_old_master_partially(tmp_path) -> None:
    a, b, c = start_chain(tmp_path)
    try:
        write_some(a.port, "pre")
        wait_synced(a.port, b.port, c.port)
        old_id = repl(a.port)["master_replid"]
        off = repl(a.port)["master_repl_offset"]
        before = stats(b.port)
        with r(b.port) as cb:
            assert cb.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        ib = repl(b.port)
        assert ib["role"] == "master"
        assert ib["master_replid2"] == old_id and ib["second_repl_offset"] == off + 1
        write_some(b.port, "promoted")
        with r(a.port) as ca:
            assert ca.execute_command("REPLICAOF", "127.0.0.1", str(b.port)) == b"OK"
        wait_synced(b.port, a.port, c.port)
        after = stats(b.port)
        assert after["sync_full"] == before["sync_full"]
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 2  # A and C
        for p in (a.port, c.port):
            i = repl(p)
            assert i["master_replid"] == ib["master_replid"]
            assert i["master_replid2"] == old_id
        assert "Successful partial resynchronization with master." in a.log()
    finally:
        c.stop()
        b.stop()
        a.stop()


def test_restart_master_and_replica_without_full_sync(tmp_path) -> None:
    a = start_master(tmp_path, "a")
    b = start_replica(tmp_path, "b", a.port)
    a2 = b2 = None
    try:
        write_some(a.port, "one")
        wait_synced(a.port, b.port)
        # the master restarts from its own RDB: replid2 keeps the old history
        with r(a.port) as ca:
            with pytest.raises(redis.exceptions.ConnectionError):
                ca.execute_command("SHUTDOWN", "SAVE")
        wait_for(lambda: not a.alive(), 15, what="master exit")
        a2 = start_master(tmp_path, "a", port=a.port)
        write_some(a2.port, "two")
        wait_synced(a2.port, b.port)
        s = stats(a2.port)
        assert s["sync_full"] == 0 and s["sync_partial_ok"] == 1
        # then the replica restarts from its RDB and continues partially too
        with r(b.port) as cb:
            with pytest.raises(redis.exceptions.ConnectionError):
                cb.execute_command("SHUTDOWN", "SAVE")
        wait_for(lambda: not b.alive(), 15, what="replica exit")
        write_some(a2.port, "three")
        b2 = start_replica(tmp_path, "b", a2.port, port=b.port)
        wait_synced(a2.port, b2.port)
        s = stats(a2.port)
        assert s["sync_full"] == 0 and s["sync_partial_ok"] == 2
    finally:
        for p in (b2, a2, b, a):
            if p is not None:
                p.stop()


def test_bind_source_addr_as_redis(tmp_path) -> None:
    """``bind-source-addr`` (Redis's networking.tcl): a replica's connection to its master
    comes from that address, which the master shows (a pyrepl master and a Redis one, whose
    protected mode is off: 127.0.0.2 is not 127.0.0.1 to it)."""
    from tests.support.procs import start_redis

    for start in (start_pyrepl, start_redis):
        master = start("--protected-mode", "no")
        replica = start_pyrepl("--bind-source-addr", "127.0.0.2")
        try:
            r(replica.port).execute_command("REPLICAOF", "127.0.0.1", str(master.port))
            wait_for(lambda rp=replica.port: repl(rp).get("master_link_status") == "up",
                     timeout=20, what="the link up")
            assert repl(master.port)["slave0"]["ip"] == "127.0.0.2"
        finally:
            replica.stop()
            master.stop()


def test_client_kill_of_the_master_link_marks_it_down_at_once(tmp_path) -> None:
    """CLIENT KILL of the master client frees it at once (Redis's freeClient(server.master)):
    the link is down from the kill, not from when the loop sees the socket close. Redis's
    cluster/06-slave-stop-cond kills it inside MULTI and then sleeps 20 s (DEBUG SLEEP), so a
    replica must count that sleep in its data age and not fail over; the down time started
    after the sleep before."""
    with start_master(tmp_path) as m, start_replica(tmp_path, "b", m.port) as rp:
        wait_synced(m.port, rp.port)
        with r(m.port) as mc:
            mc.execute_command("CLIENT", "PAUSE", "10000")   # (no reconnection)
        with r(rp.port) as c:
            mine = next(cl for cl in c.client_list() if "M" in cl["flags"])
            pipe = c.pipeline(transaction=True)
            pipe.execute_command("CLIENT", "KILL", mine["addr"])
            pipe.execute_command("DEBUG", "SLEEP", "2")
            pipe.execute()
            info = c.info("replication")
            assert info["master_link_status"] == "down"
            assert info["master_link_down_since_seconds"] >= 2
