"""The pyrepl master process serving an RDB-channel full sync (Redis 8's +RDBCHANNELSYNC), seen
from a raw two-socket replica that sends exactly what a Redis 8.6.3 replica sends
(../shared/redis-wire/a_fullsync_rdbchannel.txt).

What is checked on real sockets: the handshake replies byte for byte, ``+RDBCHANNELSYNC <the main
connection's CLIENT ID>``, ``\\n`` keepalives on the rdb channel only, ``+FULLRESYNC`` at fork
time, writes streamed on the main channel *while* the forked child is still writing the RDB
(slowed down with ``rdb-key-save-delay``), the RDB's dataset and aux fields, the rdb channel
closed by the master after the child exits, INFO and CLIENT LIST at every phase; then each
connection lost at several points of the sync: the other one is closed, the child is stopped
when nobody needs it, and the master serves the next replica.
"""

from __future__ import annotations

import os

import pytest

from tests.support.rawreplica import Chan, RdbchReplica
from tests.support.rdb import rdb_digest
from tests.support.resp import RawClient, call, encode_command
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

PING = b"*1\r\n$4\r\nping\r\n"


def info(port: int, section: str, password: str | None = None) -> dict[str, str]:
    raw = call(port, "INFO", section, password=password)
    assert isinstance(raw, bytes)
    return dict(line.split(":", 1) for line in raw.decode().splitlines()
                if ":" in line and not line.startswith("#"))


def replica_clients(port: int, password: str | None = None) -> list[dict[str, str]]:
    raw = call(port, "CLIENT", "LIST", "TYPE", "replica", password=password)
    assert isinstance(raw, bytes)
    return [dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
            for line in raw.decode().splitlines()]


def child_pid(srv) -> int:  # noqa: ANN001
    text = wait_for(lambda: "started by pid" in srv.log() and srv.log(), 10,
                    what="the snapshot child")
    return int(str(text).rsplit("Background RDB transfer started by pid ", 1)[1].split()[0])


@pytest.fixture
def master(pyrepl_servers):
    return lambda *extra: pyrepl_servers("--loglevel", "notice", "--repl-ping-replica-period", "3600", *extra)


def test_rdb_channel_full_sync_bytes_phases_and_stream_during_the_transfer(master, tmp_path):
    pw = "pw"
    srv = master("--requirepass", pw, "--repl-diskless-sync-delay", "2",
                 "--rdb-key-save-delay", "1000")  # 1 ms per key: the RDB takes ~2 s
    call(srv.port, "DEBUG", "POPULATE", "2000", "key", "10", password=pw)
    snapshot_digest = call(srv.port, "DEBUG", "DIGEST", password=pw)
    rep = RdbchReplica(srv.port, password=pw)
    try:
        rep.handshake()
        clients = replica_clients(srv.port, pw)
        assert [(c["id"], c["flags"]) for c in clients] == [(str(rep.main_id), "S")]
        inf = info(srv.port, "replication", pw)
        assert inf["connected_slaves"] == "1"
        assert inf["slave0"] == "ip=127.0.0.1,port=7777,state=wait_bgsave,offset=0,lag=0"
        rep.open_rdb()
        keep, replid, snap_off = rep.read_fullresync()
        offset = snap_off
        # (14: the master's first cron loop PINGed into the new backlog, as Redis 7 does)
        assert keep >= 1 and snap_off in (0, 14) and replid.decode() == inf["master_replid"]
        assert rep.main.buf == b""
        # the child is writing the RDB (slowly): writes now stream on the main channel at once
        with RawClient(srv.port) as c:
            assert c.call("AUTH", pw) == b"+OK\r\n"
            for args in (("set", "during:1", "a"), ("incr", "during:ctr"),
                         ("set", "during:2", "b")):
                c.call(*args)
        want = (encode_command("SELECT", "0") + encode_command("set", "during:1", "a")
                + encode_command("incr", "during:ctr") + encode_command("set", "during:2", "b"))
        rep.main.recv_until(lambda b: b.endswith(want), 5)
        assert bytes(rep.main.buf).replace(PING, b"") == want
        offset += len(rep.main.buf) - len(want)  # (a PING of the first cron loop, if any)
        rep.main.buf.clear()
        assert len(rep.rdb.buf) < 2000 * 10  # the RDB is still in flight
        inf = info(srv.port, "replication", pw)
        assert inf["slave0"].startswith("ip=127.0.0.1,port=7777,state=send_bulk_and_stream,")
        assert inf["connected_slaves"] == "1" and "slave1" not in inf
        clients = replica_clients(srv.port, pw)
        assert [c["flags"] for c in clients] == ["S", "SC"]
        assert clients[0]["id"] == str(rep.main_id)
        mem = info(srv.port, "memory", pw)
        # the shared buffer is the backlog's up to its size, the replicas' beyond; INFO adds
        # 4 bytes for the (empty) rax index of the backlog's blocks, as Redis 7.0
        assert int(mem["mem_total_replication_buffers"]) + 4 == \
            int(mem["mem_replication_backlog"]) + int(mem["mem_clients_slaves"])
        pid = child_pid(srv)
        rdb = rep.read_rdb()
        assert rep.rdb.closed_by_peer()  # the master closes it after the child's exit
        got, aux = rdb_digest(tmp_path, rdb)
        assert got == snapshot_digest.decode()
        assert aux[b"repl-id"] == replid and aux[b"repl-offset"] == b"%d" % snap_off
        wait_for(lambda: info(srv.port, "replication", pw)["slave0"].startswith(
            "ip=127.0.0.1,port=7777,state=online,"), 10, what="online")
        assert [c["flags"] for c in replica_clients(srv.port, pw)] == ["S"]
        rep.main.send(encode_command("REPLCONF", "ACK", offset + len(want)))
        call(srv.port, "set", "after:1", "c", password=pw)
        rep.main.read_exact(encode_command("set", "after:1", "c"))
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10, what="the child reaped")
        log = srv.log()
        for line in (
            "Replica 127.0.0.1:7777 is capable of rdb channel synchronization, and partial "
            "sync isn't possible. Full sync will continue with dedicated rdb channel.",
            "Full resync requested by replica 127.0.0.1:7777 (rdb-channel)",
            "Starting BGSAVE for SYNC with target: replicas sockets (rdb-channel)",
            "Starting to deliver RDB and replication stream to replica: 127.0.0.1:7777",
            f"Background RDB transfer started by pid {pid} to replica socket",
            "Synchronization with replica 127.0.0.1:7777 succeeded",
            "RDB transfer completed, rdb only replica (127.0.0.1:7777) should be "
            "disconnected asap",
            "Connection with replica (rdbchannel) 127.0.0.1:7777 lost.",
        ):
            assert line in log, line
        stats = info(srv.port, "stats", pw)
        assert (stats["sync_full"], stats["sync_partial_err"]) == ("1", "1")
    finally:
        rep.close()


def test_replica_closing_the_rdb_channel_after_the_mark_goes_online(master, tmp_path):
    """As a Redis 8 replica does: it closes the rdb channel as soon as it read the mark."""
    srv = master("--repl-diskless-sync-delay", "0")
    call(srv.port, "DEBUG", "POPULATE", "50000", "key", "20")
    rep = RdbchReplica(srv.port)
    try:
        rep.handshake()
        rep.open_rdb()
        rep.read_fullresync()
        rep.read_rdb()
        rep.rdb.close()
        wait_for(lambda: info(srv.port, "replication")["slave0"].startswith(
            "ip=127.0.0.1,port=7777,state=online,"), 10, what="online")
        call(srv.port, "SET", "after", "1")
        want = encode_command("SELECT", "0") + encode_command("SET", "after", "1")
        rep.main.recv_until(lambda b: b.endswith(want), 10)
        assert bytes(rep.main.buf).replace(PING, b"") == want  # (cron PINGs are legitimate)
        assert "Diskless rdb transfer, last replica dropped" not in srv.log()
        assert "Connection with replica 127.0.0.1:7777 lost." not in srv.log()
    finally:
        rep.close()


@pytest.mark.parametrize("lost,point", [
    ("main", "before-rdb-channel"), ("main", "delay"), ("main", "transfer"),
    ("rdb", "before-psync"), ("rdb", "delay"), ("rdb", "transfer"),
])
def test_losing_either_connection_aborts_cleanly(master, lost, point):
    delay = "3" if point == "delay" else "0"
    srv = master("--repl-diskless-sync-delay", delay, "--rdb-key-save-delay", "200")
    call(srv.port, "DEBUG", "POPULATE", "100000", "key", "20")  # ~20 s of child work
    rep = RdbchReplica(srv.port)
    pid = None
    try:
        rep.handshake()
        if point != "before-rdb-channel":
            rep.open_rdb(psync=point != "before-psync")
        if point == "transfer":
            rep.read_fullresync()
            pid = child_pid(srv)
            rep.rdb.recv_until(lambda b: len(b) > 50)  # the RDB is flowing
            assert os.path.exists(f"/proc/{pid}")
        if lost == "main":
            rep.main.close()
            if rep.rdb is not None:
                assert rep.rdb.closed_by_peer(), "the rdb channel must be closed too"
        else:
            rep.rdb.close()
            assert rep.main.closed_by_peer(), "the main channel must be closed too"
        if pid is not None:
            wait_for(lambda: "Diskless rdb transfer, last replica dropped, killing fork child."
                     in srv.log(), 15, what="the child to be stopped")
            wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10, what="the child gone")
        wait_for(lambda: info(srv.port, "replication")["connected_slaves"] == "0", 10,
                 what="no replica left")
        assert replica_clients(srv.port) == []
        mem = info(srv.port, "memory")
        assert mem["mem_clients_slaves"] == "0"
    finally:
        rep.close()
    # the master serves the next replica fully
    call(srv.port, "CONFIG", "SET", "rdb-key-save-delay", "0")
    nxt = RdbchReplica(srv.port, 7778)
    try:
        nxt.handshake()
        nxt.open_rdb()
        nxt.read_fullresync()
        nxt.read_rdb()
        wait_for(lambda: info(srv.port, "replication").get("slave0", "").startswith(
            "ip=127.0.0.1,port=7778,state=online,"), 20, what="the next replica online")
    finally:
        nxt.close()
    # a snapshot was started for the aborted sync only if it got that far
    forks = srv.log().count("Starting BGSAVE for SYNC")
    assert forks == (2 if point == "transfer" else 1)


def test_a_redis_7_style_replica_gets_the_classic_sync(master):
    """No capa rdb-channel-repl: +FULLRESYNC on the one connection (see also the interop
    tests with a real redis-server 7.0.15 replica)."""
    srv = master("--repl-diskless-sync-delay", "0")
    call(srv.port, "SET", "k", "v")
    c = Chan(srv.port)
    try:
        c.send(encode_command("REPLCONF", "listening-port", "7777")
               + encode_command("REPLCONF", "capa", "eof", "capa", "psync2"))
        c.read_exact(b"+OK\r\n+OK\r\n")
        c.send(encode_command("PSYNC", "?", "-1"))
        assert c.read_line().startswith(b"+FULLRESYNC ")
        assert c.read_line().startswith(b"$EOF:")
    finally:
        c.close()
