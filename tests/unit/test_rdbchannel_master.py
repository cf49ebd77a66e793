"""Sans-io tests of the master side of the RDB channel (Redis 8's +RDBCHANNELSYNC full sync).

A real ServerCore + Replication, a fake clock, and real bytes: the replicas are real clients of
the core sending exactly what a Redis 8.6.3 replica sends (``../shared/redis-wire/
a_fullsync_rdbchannel.txt``, whose bytes are copied below). The only test double is the OS
boundary: ``WireIO`` stands for ``pyrepl.net.master_io.MasterIO`` and records what would reach each
socket, in order — the I/O shell's writes of each client's output, and the snapshot child's
writes (its preamble at fork time, the RDB and the mark when the test runs the child; it reports
each target as done as the real child does). What a replica receives is parsed and *applied* to
an independent core (RDB through pyrepl's loader, the stream through real command execution) and
the datasets compared with DEBUG DIGEST.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.core.client import Client
from pyrepl.replication.master import (
    LinkInput,
    SlaveState,
)
from tests.support.cores import NOW, cmd
from tests.support.master_side import Master as BaseMaster
from tests.support.master_side import (
    ReplicaCore,
    TwoConnections,
    apply_writes,
    eof_payload,
    fill,
)

S = SlaveState
L = LinkInput
SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

# -- the transcript's bytes (Redis 8.6.3 replica <-> Redis 8.6.3 master) ----------------------
# conn1 = main channel, conn2 = rdb channel; R>M = replica -> master.
T_PING = b'*1\r\n$4\r\nPING\r\n'
T_NOAUTH = b'-NOAUTH Authentication required.\r\n'
T_AUTH = b'*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n'
T_REPLCONF_MAIN = (b'*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n*7\r\n$8\r\n'
                   b'REPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n'
                   b'$4\r\ncapa\r\n$16\r\nrdb-channel-repl\r\n')
T_PSYNC_MAIN = (b'*3\r\n$5\r\nPSYNC\r\n$40\r\n3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511\r\n$1\r\n'
                b'1\r\n')
T_RDBCHANNELSYNC = b'+RDBCHANNELSYNC 10\r\n'  # 10: the master's CLIENT ID of conn1
T_RDB_HELLO = (b'*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*11\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\n'
               b'eof\r\n$8\r\nrdb-only\r\n$1\r\n1\r\n$11\r\nrdb-channel\r\n$1\r\n1\r\n$17\r\n'
               b'main-ch-client-id\r\n$2\r\n10\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n')
T_PSYNC_RDB = b'*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n'
T_FULLRESYNC = b'\n+FULLRESYNC e0b8062d0b155a1e43fa2d39d13c0623805c27e1 0\r\n'  # last \n + line
T_STREAM_DURING = (b'*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nset\r\n$8\r\nduring:1\r\n$1\r\na'
                   b'\r\n' b'*2\r\n$4\r\nincr\r\n$10\r\nduring:ctr\r\n'
                   b'*3\r\n$3\r\nset\r\n$8\r\nduring:2\r\n$1\r\nb\r\n')
T_ACK0 = b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$1\r\n0\r\n'
T_STREAM_AFTER = b'*3\r\n$3\r\nset\r\n$7\r\nafter:1\r\n$1\r\nc\r\n'
T_ACK155 = b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n155\r\n'
T_EOF_RDB = (
    b'$EOF:79b150900a78ca68cdb80090425f0092523acc81\r\nREDIS0013\xfa\tredis-ver\x058.6.3\xfa\n'
    b'redis-bits\xc0@\xfa\x05ctime\xc2\n\xfe\x00k\xfa\x08used-mem\xc2\xe8@\x0e\x00\xfa\x0erepl-'
    b'stream-db\xc0\x00\xfa\x07repl-id(e0b8062d0b155a1e43fa2d39d13c0623805c27e1\xfa\x0brepl-off'
    b'set\xc0\x00\xfa\x08aof-base\xc0\x00\xfe\x00\xfb\x14\x00\x00\x05key:2\nvalue:2\x00\x00\x00'
    b'\x00\x06key:17\nvalue:17\x00\x00\x00\x05key:7\nvalue:7\x00\x00\x00\x00\x06key:15\nvalue:'
    b'15\x00\x00\x00\x05key:5\nvalue:5\x00\x00\x00\x00\x06key:14\nvalue:14\x00\x00\x00\x06key:'
    b'12\nvalue:12\x00\x00\x00\x05key:8\nvalue:8\x00\x00\x00\x00\x05key:6\nvalue:6\x00\x00\x00'
    b'\x00\x06key:16\nvalue:16\x00\x00\x00\x06key:18\nvalue:18\x00\x00\x00\x06key:13\nvalue:13'
    b'\x00\x00\x00\x06key:10\nvalue:10\x00\x00\x00\x06key:19\nvalue:19\x00\x00\x00\x06key:11\n'
    b'value:11\x00\x00\x00\x05key:1\nvalue:1\x00\x00\x00\x00\x05key:4\nvalue:4\x00\x00\x00\x00'
    b'\x05key:0\nvalue:0\x00\x00\x00\x00\x05key:9\nvalue:9\x00\x00\x00\x00\x05key:3\nvalue:3'
    b'\x00\x00\x00\xff\x10\xf1\xcb\xe6\xcc\xc7\x86\x9a79b150900a78ca68cdb80090425f0092523acc81')


class Master(BaseMaster):
    def clean(self) -> None:
        """No state left behind by aborted or finished syncs."""
        side = self.side
        assert side.links == [] and side.feeding.streaming == [] and side.feeding.fed == []
        assert side.snapshots.current is None and self.core.rdb_child_pid == -1
        assert self.info()["connected_slaves"] == 0
        assert self.mem()["mem_clients_slaves"] == 0


# -- an rdb-channel replica, as a Redis 8 replica talks --------------------------------------

class Rdbch(TwoConnections):
    """A logical replica: the main channel and, once opened, the rdb channel."""

    def __init__(self, m: Master, port: int | None = None, capa: tuple[str, ...] = (
            "eof", "psync2", "rdb-channel-repl")) -> None:
        self.m = m
        self.port = port or m.port
        m.port += 1
        self.main = m.connect()
        self.rdb: Client | None = None
        self.main_id = -1
        args: list[str] = []
        for cp in capa:
            args += ["capa", cp]
        m.feed(self.main, cmd("REPLCONF", "listening-port", self.port) + cmd("REPLCONF", *args))
        assert m.take(self.main) == b"+OK\r\n+OK\r\n"

    def psync(self, replid: str = "?", offset: int = -1) -> bytes:
        self.m.feed(self.main, cmd("PSYNC", replid, offset))
        line = self.m.take(self.main)
        if line.startswith(b"+RDBCHANNELSYNC "):
            self.main_id = int(line.split()[1])
        return line

    def open_rdb(self, main_id: int | None = None, psync: bool = True) -> bytes:
        """The second connection: REPLCONF (+ PSYNC ? -1 when the REPLCONF was accepted)."""
        m = self.m
        self.rdb = m.connect()
        mid = self.main_id if main_id is None else main_id
        m.feed(self.rdb, cmd("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                             "main-ch-client-id", mid, "listening-port", self.port))
        reply = m.take(self.rdb)
        if psync and reply == b"+OK\r\n":
            m.feed(self.rdb, cmd("PSYNC", "?", "-1"))
        return reply


def start_sync(m: Master, port: int | None = None) -> Rdbch:
    r = Rdbch(m, port)
    assert r.psync().startswith(b"+RDBCHANNELSYNC ")
    assert r.open_rdb() == b"+OK\r\n"
    return r


class Got:
    def __init__(self, data: bytes) -> None:
        """Split what an rdb channel received: keepalives, +FULLRESYNC, $EOF:<mark>, the RDB,
        the mark — and nothing after it."""
        pos = 0
        while data[pos:pos + 1] == b"\n":
            pos += 1
        self.keepalives = pos
        eol = data.index(b"\r\n", pos)
        parts = data[pos:eol].split()
        assert parts[0] == b"+FULLRESYNC", data[pos:eol]
        self.replid, self.offset = parts[1].decode(), int(parts[2])
        pos = eol + 2
        self.mark, self.rdb = eof_payload(data, pos)


def client_list(m: Master) -> list[str]:
    """CLIENT LIST TYPE replica, one line per connection."""
    reply = m.run("CLIENT", "LIST", "TYPE", "replica")
    head, _, body = reply.partition(b"\r\n")
    assert head == b"$%d" % (len(body) - 2)
    return body[:-2].decode().splitlines()


def assert_replica_equal(tmp_path, m: Master, r: Rdbch, take: bool = False) -> None:  # noqa: ANN001
    """What ``r`` received (the RDB on its rdb channel, then the stream on its main one, all of
    it or, ``take``, what is new) loads into a dataset equal to the master's."""
    got = Got(m.wire(r.rdb))
    rc = ReplicaCore(tmp_path, got.rdb)
    rc.apply(m.take(r.main) if take else m.wire(r.main))
    assert rc.digest() == m.digest()


def pid_of(r: Rdbch) -> int:
    snap = r.rlink.snapshot
    assert snap is not None
    return snap.pid


# -- the transcript, replayed ------------------------------------------------------------------

def test_transcript_replica_bytes_get_redis_8_master_bytes(tmp_path) -> None:
    """Feed our master what the Redis 8.6.3 replica sent, on the same schedule, and compare
    what it sends with what the Redis 8.6.3 master sent (modulo replid, mark and client id)."""
    m = Master(tmp_path, ("requirepass", ["pw"]), ("repl-diskless-sync-delay", ["5"]))
    m.run("DEBUG", "POPULATE", "20", "key", "10")
    m.tick(30)  # a cron before the replica arrives (no PING into an empty replica list)
    t0 = NOW + 268  # the proxy's t=0 was at x.268 s of the master's clock (its log times)
    m.core.now_ms = t0 + 189
    conn1 = m.connect()
    m.feed(conn1, T_PING)
    assert m.take(conn1) == T_NOAUTH
    m.feed(conn1, T_AUTH)
    assert m.take(conn1) == b"+OK\r\n"
    m.feed(conn1, T_REPLCONF_MAIN)
    assert m.take(conn1) == b"+OK\r\n+OK\r\n"
    old_id = m.repl.ids.replid
    m.feed(conn1, T_PSYNC_MAIN)
    got = m.take(conn1)
    assert got == T_RDBCHANNELSYNC.replace(b"10", str(conn1.id).encode())
    replid = m.repl.ids.replid
    assert replid != old_id  # the backlog was created with a new history
    m.core.now_ms = t0 + 196
    conn2 = m.connect()
    hello = T_RDB_HELLO.replace(b"$2\r\n10\r\n", cmd(conn1.id)[4:])
    m.feed(conn2, hello)
    assert m.take(conn2) == b"+OK\r\n+OK\r\n"
    m.feed(conn2, T_PSYNC_RDB)
    assert m.take(conn2) == b"" and m.take(conn1) == b""
    # Redis's crons: \n at 0.76, 1.77, 2.78, 3.79 and 4.80 s, the fork with the last one
    rdb_bytes = b""
    for at in (763, 1772, 2780, 3788, 4797):
        m.tick_to(t0 + at)
        rdb_bytes += m.take(conn2)
        assert m.take(conn1) == b""  # the main channel gets nothing, no keepalives either
    assert rdb_bytes.startswith(b"\n\n\n\n" + T_FULLRESYNC.replace(
        b"e0b8062d0b155a1e43fa2d39d13c0623805c27e1", replid.encode()))
    (pid,) = m.io.children
    # the writes while the child runs stream on the main channel at once
    m.run("set", "during:1", "a")
    m.run("incr", "during:ctr")
    m.run("set", "during:2", "b")
    assert m.take(conn1) == T_STREAM_DURING
    m.tick_to(t0 + 6807)
    m.io.run_child(pid)
    m.child_exits(pid)
    rdb_bytes += m.take(conn2)
    got_ours = Got(rdb_bytes)
    got_redis = Got(b"\n\n\n\n" + T_FULLRESYNC + T_EOF_RDB)
    assert (got_ours.keepalives, got_ours.offset) == (got_redis.keepalives, got_redis.offset) \
        == (5, 0)
    assert got_ours.replid == replid
    # the same dataset as Redis's RDB (v13 there, v10 here), with repl-id/offset aux fields
    ours, theirs = ReplicaCore(tmp_path, got_ours.rdb), ReplicaCore(tmp_path, got_redis.rdb)
    assert ours.digest() == theirs.digest() and len(ours.core.dbs[0].data) == 20
    assert (ours.aux[b"repl-id"], ours.aux[b"repl-offset"]) == (replid.encode(), b"0")
    assert conn2.closed  # the master closes the rdb channel once the child is done
    m.feed(conn1, T_ACK0)
    assert m.take(conn1) == b""
    m.run("set", "after:1", "c")
    assert m.take(conn1) == T_STREAM_AFTER
    m.feed(conn1, T_ACK155)
    assert m.take(conn1) == b"" and m.link(conn1).ack_off == 155 == m.repl.master_repl_offset
    ours.apply(T_STREAM_DURING + T_STREAM_AFTER)
    assert ours.digest() == m.digest()
    name = "127.0.0.1:6381"
    log = m.log()
    i = log.index(f"Replica {name} asks for synchronization")
    assert log[i:i + 12] == [
        f"Replica {name} asks for synchronization",
        f"Partial resynchronization not accepted: Replication ID mismatch (Replica asked for "
        f"'3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511', my replication IDs are '{old_id}' and "
        f"'0000000000000000000000000000000000000000')",
        f"Replication backlog created, my new replication IDs are '{replid}' and "
        f"'0000000000000000000000000000000000000000'",
        f"Replica {name} is capable of rdb channel synchronization, and partial sync isn't "
        f"possible. Full sync will continue with dedicated rdb channel.",
        f"Replica {name} asks for synchronization",
        f"Full resync requested by replica {name} (rdb-channel)",
        "Delay next BGSAVE for diskless SYNC",
        "Starting BGSAVE for SYNC with target: replicas sockets (rdb-channel)",
        f"Starting to deliver RDB and replication stream to replica: {name}",
        f"Background RDB transfer started by pid {pid} to replica socket",
        "Background RDB transfer terminated with success",
        f"Synchronization with replica {name} succeeded",
    ]
    assert log[i + 12:i + 15] == [
        f"Streamed RDB transfer with replica {name} succeeded (socket). Waiting for REPLCONF "
        f"ACK from replica to enable streaming",
        f"RDB transfer completed, rdb only replica ({name}) should be disconnected asap",
        f"Connection with replica (rdbchannel) {name} lost.",
    ]
    st_ = m.core.stats
    assert (st_.sync_full, st_.sync_partial_err, st_.sync_partial_ok) == (1, 1, 0)


# -- REPLCONF on the rdb channel ------------------------------------------------------------------

def test_replconf_rdb_channel_options_and_unrecognized_ids(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    r = Rdbch(m)
    assert r.psync() == b"+RDBCHANNELSYNC %d\r\n" % r.main.id
    c = m.connect()
    for bad in (9999, m.user.id, c.id):  # unknown; a normal client; itself
        assert m.run("REPLCONF", "main-ch-client-id", bad, client=c) == \
            b"-ERR Unrecognized RDB client id: %d\r\n" % bad
    assert m.run("REPLCONF", "main-ch-client-id", "x", client=c) == \
        b"-ERR value is not an integer or out of range\r\n"
    assert m.run("REPLCONF", "rdb-channel", "2", client=c) == \
        b"-ERR value is out of range, value must between 0 and 1\r\n"
    # a classic replica (waiting for its snapshot) is not waiting for an rdb channel
    w = Rdbch(m, capa=("eof", "psync2"))
    assert w.psync() == b"" and w.mlink.state is S.WAIT_BGSAVE_START
    assert m.run("REPLCONF", "main-ch-client-id", w.main.id, client=c) == \
        b"-ERR Unrecognized RDB client id: %d\r\n" % w.main.id
    # the right id: +OK, the flags say rdb channel
    assert r.open_rdb(psync=False) == b"+OK\r\n"
    assert r.rdb.flags == "C" and r.mlink.rdb_channel is r.rdb and r.rlink.main is r.mlink
    # a second rdb channel for the same main channel is refused
    assert m.run("REPLCONF", "main-ch-client-id", r.main.id, client=c) == \
        b"-ERR Unrecognized RDB client id: %d\r\n" % r.main.id
    assert m.side.links == [r.mlink, w.mlink]  # REPLCONF does not make a replica


def test_rdb_channel_psync_needs_its_main_channel_still_waiting(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    r = Rdbch(m)
    r.psync()
    assert r.open_rdb(psync=False) == b"+OK\r\n"
    m.feed(r.rdb, cmd("PSYNC", "?", "-1"))
    assert r.rlink.state is S.WAIT_BGSAVE_START
    assert r.rdb.flags == "SC" and r.main.flags == "S"
    # PSYNC again on either channel is ignored
    m.feed(r.rdb, cmd("PSYNC", "?", "-1"))
    m.feed(r.main, cmd("PSYNC", "?", "-1"))
    assert m.take(r.rdb) == b"" and m.take(r.main) == b""


# -- fallbacks: classic full sync ------------------------------------------------------------

@pytest.mark.parametrize("over,capa", [
    ((), ("eof", "psync2")),  # a Redis 7 replica: no capability
    ((("repl-rdb-channel", ["no"]),), ("eof", "psync2", "rdb-channel-repl")),
    ((("repl-diskless-sync", ["no"]),), ("eof", "psync2", "rdb-channel-repl")),
])
def test_without_the_capability_or_the_config_the_sync_is_classic(tmp_path, over, capa) -> None:
    m = Master(tmp_path, *over)
    r = Rdbch(m, capa=capa)
    line = r.psync()
    assert line == b"" or line.startswith(b"+FULLRESYNC")  # (diskless: the child writes it)
    assert r.main_id == -1 and r.mlink.main is None and r.mlink.state in (
        S.WAIT_BGSAVE_START, S.WAIT_BGSAVE_END)
    assert not any("rdb channel" in x for x in m.log())
    assert m.events("psync_decision")[-1]["result"] == "full"


def test_config_switched_off_between_replconf_and_psync_gives_classic(tmp_path) -> None:
    m = Master(tmp_path)
    r = Rdbch(m)
    m.core.config.set("repl-rdb-channel", "no")
    assert not r.psync().startswith(b"+RDBCHANNELSYNC")
    assert r.mlink.state is S.WAIT_BGSAVE_END


def test_a_partial_resync_stays_partial_with_the_capability(tmp_path) -> None:
    m = Master(tmp_path)
    a = start_sync(m)
    pid = pid_of(a)
    m.io.run_child(pid)
    m.child_exits(pid)
    m.write_many(5)
    replid, offset = m.repl.ids.replid, m.repl.master_repl_offset
    m.core.client_closed(a.main)
    b = Rdbch(m)
    line = b.psync(replid, offset - 10)
    assert line.startswith(b"+CONTINUE " + replid.encode() + b"\r\n")
    assert b.mlink.state is S.ONLINE and m.core.stats.sync_partial_ok == 1


# -- the stream from the snapshot offset, the master's buffers at backlog size ----------------------

def test_main_channel_streams_from_the_snapshot_offset_while_the_rdb_is_in_flight(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    m.write_many(10)
    r = start_sync(m)
    pid = pid_of(r)
    offset = m.repl.master_repl_offset
    assert r.mlink.state is S.SEND_BULK_AND_STREAM and r.mlink.psync_offset == offset
    assert m.take(r.main) == b""
    m.run("SELECT", "2")
    m.run("SET", "during:1", "x" * 100)
    m.run("SELECT", "0")
    for _ in range(200):
        m.run("INCR", "during:ctr")
    streamed = m.take(r.main)
    # at once, from offset + 1, SELECT first (the stream's db was reset at fork time)
    assert streamed.startswith(cmd("SELECT", "2") + cmd("SET", "during:1", "x" * 100))
    assert offset + len(streamed) == m.repl.master_repl_offset
    # nothing waits for the replica: the master's buffers are the backlog only
    mem = m.mem()
    assert m.repl.backlog.pending(r.mlink.ref) == 0 and mem["mem_clients_slaves"] == 0
    assert mem["mem_total_replication_buffers"] == mem["mem_replication_backlog"] - 4 == \
        m.repl.backlog.mem
    m.io.run_child(pid)
    m.child_exits(pid)
    got = Got(m.wire(r.rdb))
    assert got.offset == offset and got.replid == m.repl.ids.replid
    rc = ReplicaCore(tmp_path, got.rdb)
    assert rc.aux[b"repl-offset"] == str(offset).encode()
    rc.apply(streamed)
    assert rc.digest() == m.digest()


def test_classic_diskless_holds_what_the_rdb_channel_streams(tmp_path) -> None:
    """The same writes during the same kind of sync: held by the master (classic) vs streamed
    at once (rdb channel)."""
    held = {}
    for rdbch in (False, True):
        m = Master(tmp_path)
        fill(m)
        capa = ("eof", "psync2", "rdb-channel-repl") if rdbch else ("eof", "psync2")
        r = Rdbch(m, capa=capa)
        r.psync()
        if rdbch:
            r.open_rdb()
        m.write_many(300, prefix="during")
        held[rdbch] = m.repl.backlog.pending(r.mlink.ref)   # kept in the buffer for it
    assert held[False] > 300 * 20 and held[True] == 0


# -- online: first ACK or child exit ----------------------------------------------------------

def test_info_client_list_and_states_through_the_sync(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    r = Rdbch(m)
    r.psync()
    info = m.info()
    assert info["connected_slaves"] == 1
    assert info["slave0"] == "ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0"
    assert r.open_rdb() == b"+OK\r\n"
    info = m.info()
    assert info["connected_slaves"] == 1 and "slave1" not in info
    assert info["slave0"] == "ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0"
    lst = client_list(m)
    assert [x.split(" flags=")[1].split()[0] for x in lst] == ["S", "SC"]
    assert [int(x.split()[0][3:]) for x in lst] == [r.main.id, r.rdb.id]
    for _ in range(5):
        m.tick(1000)
    assert m.info()["slave0"] == \
        "ip=127.0.0.1,port=6381,state=send_bulk_and_stream,offset=0,lag=0"
    assert m.run("ROLE") == b"*3\r\n$6\r\nmaster\r\n:%d\r\n*0\r\n" % \
        m.repl.master_repl_offset  # not online yet: ROLE lists no replica
    pid = pid_of(r)
    m.io.run_child(pid)
    m.child_exits(pid)
    info = m.info()
    assert info["connected_slaves"] == 1
    assert info["slave0"] == "ip=127.0.0.1,port=6381,state=online,offset=0,lag=0"
    lst = client_list(m)
    assert len(lst) == 1 and " flags=S " in lst[0]


def test_main_goes_online_on_the_first_ack_before_the_child_exits(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r = start_sync(m)
    pid = pid_of(r)
    m.run("SET", "during", "1")
    m.io.run_child(pid)  # the RDB is out; the child has not been reaped yet
    m.feed(r.main, cmd("REPLCONF", "ACK", r.mlink.psync_offset))
    assert pid in m.io.reaped  # the ACK made the master look for the child's end first
    assert r.mlink.state is S.ONLINE and "Synchronization with replica 127.0.0.1:6381 " \
        "succeeded" in m.log()
    assert r.rlink.state is S.WAIT_BGSAVE_END  # until the child's exit is seen
    m.child_exits(pid)
    assert r.rdb.closed and r.mlink.state is S.ONLINE
    assert m.log().count("Synchronization with replica 127.0.0.1:6381 succeeded") == 1
    ev = m.events()
    assert [e["event"] for e in ev] == ["psync_decision", "fullsync_fork", "replica_online",
                                        "fullsync_rdb_sent"]
    assert len({e["sync_id"] for e in ev}) == 1
    d, fork, online, sent = ev
    assert (d["result"], d["reason"]) == ("rdbchannel", "no-history")
    assert fork["mode"] == online["mode"] == sent["mode"] == "rdb-channel"
    assert fork["offset"] == sent["offset"] == online["offset"] == r.mlink.psync_offset
    assert sent["bytes"] == len(m.wire(r.rdb))  # (its +OK was taken by open_rdb)
    m.run("SET", "after", "1")
    assert m.wire(r.main).endswith(cmd("SET", "after", "1"))
    assert m.side.acks.count_acks(r.mlink.psync_offset) == 1


def test_replica_closing_the_rdb_channel_after_the_mark_is_the_normal_end(tmp_path) -> None:
    """A Redis 8 replica closes the rdb channel once it read the mark, possibly before the
    master saw the child exit: the sync goes on; the main channel goes online at the exit."""
    m = Master(tmp_path)
    fill(m)
    r = start_sync(m)
    pid = pid_of(r)
    m.io.run_child(pid)
    m.core.client_closed(r.rdb)  # EOF from the replica
    assert r.main.closed is False and r.mlink.state is S.SEND_BULK_AND_STREAM
    assert m.io.dropped == [] and m.host.killed == []  # the child is not disturbed
    assert "Connection with replica (rdbchannel) 127.0.0.1:6381 lost." in m.log()
    closed_ms = m.core.now_ms
    m.tick(700)
    m.run("SET", "during", "2")
    out0 = m.core.stats.net_repl_output_bytes
    ok, nbytes, _ = m.io.results[pid][r.rdb.id]     # what the child reported for it
    assert ok
    m.child_exits(pid)
    assert r.mlink.state is S.ONLINE and m.side.snapshots.current is None
    assert m.events("replica_lost") == []
    # its transfer is counted and reported at the child's end, timed to the close
    (sent,) = m.events("fullsync_rdb_sent")
    assert sent["bytes"] == nbytes > 0 and sent["mode"] == "rdb-channel"
    assert sent["duration_ms"] == closed_ms - r.mlink.joined_ms
    assert m.core.stats.net_repl_output_bytes - out0 >= nbytes
    assert_replica_equal(tmp_path, m, r, take=False)


def test_several_replicas_within_the_delay_share_one_snapshot(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["3"]))
    fill(m)
    a = start_sync(m)
    m.tick(1000)
    b = start_sync(m)
    m.run("SET", "before-fork", "1")  # in the snapshot, not streamed
    # a classic replica waits for a snapshot of its own (rdb channels ask for their own)
    c = Rdbch(m, capa=("eof", "psync2"))
    c.psync()
    for _ in range(3):
        m.tick(1000)
    (pid,) = m.io.children
    targets = [t for t, _ in m.io.children[pid][0]]
    assert targets == [a.rdb, b.rdb]  # the child writes to the rdb channels only
    offset = m.repl.master_repl_offset
    assert a.mlink.psync_offset == b.mlink.psync_offset == offset
    assert c.mlink.state is S.WAIT_BGSAVE_START
    assert "Current BGSAVE has socket target" not in " ".join(m.log())
    m.run("SET", "in-flight", "2")
    # a replica arriving now waits for the next snapshot
    d = start_sync(m)
    assert d.rlink.state is S.WAIT_BGSAVE_START
    assert "Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC" in m.log()
    assert d.main_id == d.main.id and m.take(d.main) == b""
    m.io.run_child(pid)
    m.child_exits(pid)
    for r in (a, b):
        assert r.mlink.state is S.ONLINE and r.rdb.closed
        got = Got(m.wire(r.rdb))
        rc = ReplicaCore(tmp_path, got.rdb)
        rc.apply(m.wire(r.main))
        assert got.offset == offset and rc.digest() == m.digest()
    assert m.info()["connected_slaves"] == 4
    # the next fork serves one group: the classic replica (first in line), then d
    for _ in range(4):
        m.tick(1000)
    pid2 = max(m.io.children)
    assert [t for t, _ in m.io.children[pid2][0]] == [c.main]
    m.io.run_child(pid2)
    m.child_exits(pid2)
    m.tick(1000)
    pid3 = max(m.io.children)
    assert [t for t, _ in m.io.children[pid3][0]] == [d.rdb]
    m.io.run_child(pid3)
    m.child_exits(pid3)
    assert d.mlink.state is S.ONLINE
    assert_replica_equal(tmp_path, m, d, take=True)


def test_wait_counts_the_replica_only_once_online(tmp_path) -> None:
    m = Master(tmp_path)
    r = start_sync(m)
    m.run("SET", "k", "v")
    out = m.run("WAIT", "1", "0")
    assert out == b""  # blocked: the replica is not online
    assert m.take(r.main).endswith(cmd("REPLCONF", "GETACK", "*"))
    pid = pid_of(r)
    m.io.run_child(pid)
    m.child_exits(pid)
    assert r.mlink.state is S.ONLINE and m.wire(m.user) == b""  # online, not acked yet
    m.feed(r.main, cmd("REPLCONF", "ACK", m.repl.master_repl_offset))
    assert m.wire(m.user) == b":1\r\n"


# -- losing either connection: a clean abort -----------------------------------------------------

def test_main_lost_before_the_rdb_channel_arrives(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    r = Rdbch(m)
    r.psync()
    m.core.client_closed(r.main)
    assert "Connection with replica 127.0.0.1:6381 lost." in m.log()
    assert r.open_rdb() == b"-ERR Unrecognized RDB client id: %d\r\n" % r.main.id
    m.clean()
    assert m.events("replica_lost")[-1]["reason"] == "closed"


def _rdb_channel_at(tmp_path, point: str) -> tuple[Master, Rdbch]:
    """A filled master and a replica whose rdb channel got to ``point``: its REPLCONF only
    (``replconf``), its PSYNC waiting out the sync delay (``delay``) or the snapshot being
    sent (``transfer``)."""
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5" if point == "delay" else "0"]))
    fill(m)
    r = Rdbch(m)
    r.psync()
    r.open_rdb(psync=point != "replconf")
    return m, r


@pytest.mark.parametrize("point", ["replconf", "delay", "transfer"])
def test_main_lost_aborts_the_rdb_channel(tmp_path, point) -> None:
    m, r = _rdb_channel_at(tmp_path, point)
    pid = pid_of(r) if point == "transfer" else None
    m.run("SET", "x", "1")
    m.core.client_closed(r.main)
    assert r.rdb.closed and r.rlink.state is S.CLOSED
    if point == "transfer":
        assert m.io.dropped == [r.rdb.id] and m.host.killed == [pid]
        assert "Diskless rdb transfer, last replica dropped, killing fork child." in m.log()
        assert m.core.rdb_child_pid == -1 and m.side.snapshots.current is None
        assert pid is not None
    else:
        m.tick(6000)
        assert m.io.children == {}  # no snapshot for nobody
    m.clean()
    lost = m.events("replica_lost")
    assert len(lost) == 1 and lost[0]["reason"] == "closed"  # once, for the logical replica
    # the next replica syncs normally
    n = start_sync(m)
    for _ in range(6):
        m.tick(1000)
    pid2 = pid_of(n)
    m.io.run_child(pid2)
    m.child_exits(pid2)
    assert n.mlink.state is S.ONLINE


@pytest.mark.parametrize("point", ["replconf", "delay", "transfer"])
def test_rdb_channel_lost_aborts_the_main_channel(tmp_path, point) -> None:
    m, r = _rdb_channel_at(tmp_path, point)
    if point == "transfer":
        pid = pid_of(r)
        m.run("SET", "during", "1")
        assert m.take(r.main)  # streaming already
    m.core.client_closed(r.rdb)
    assert r.main.closed and r.mlink.state is S.CLOSED
    if point == "transfer":
        assert m.io.dropped == [r.rdb.id]
        assert "Diskless rdb transfer, last replica dropped, killing fork child." in m.log()
        assert pid not in m.io.results  # its results were collected
    m.clean()
    lost = m.events("replica_lost")
    assert len(lost) == 1 and lost[0]["reason"] == "rdb-channel-lost"


def test_rdb_channel_lost_mid_transfer_spares_the_other_replica(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    m.core.config.set("repl-diskless-sync-max-replicas", "2")
    m.core.config.set("repl-diskless-sync-delay", "60")
    a = start_sync(m)
    b = start_sync(m)
    m.tick(1)  # the cron starts the pending fork: max-replicas reached
    pid = pid_of(a)
    assert pid_of(b) == pid
    m.run("SET", "during", "1")
    m.core.client_closed(b.rdb)  # lost before the child wrote its RDB
    assert b.main.closed and not a.main.closed
    assert m.io.dropped == [b.rdb.id] and m.core.rdb_child_pid == pid  # the child goes on
    m.io.run_child(pid)
    m.child_exits(pid)
    assert a.mlink.state is S.ONLINE and m.side.links == [a.mlink]
    assert_replica_equal(tmp_path, m, a, take=False)


def test_the_child_failing_for_the_rdb_channel_aborts_both(tmp_path) -> None:
    m = Master(tmp_path)
    r = start_sync(m)
    pid = pid_of(r)
    m.io.dropped.append(r.rdb.id)  # the child's writes fail (reset by the peer)
    m.io.run_child(pid)
    m.child_exits(pid, 1)
    assert r.main.closed and r.rdb.closed
    assert "Background transfer error" in m.log()
    assert "Rdb channel transfer to replica 127.0.0.1:6381 failed, aborting the sync" in m.log()
    m.clean()


def test_flushall_killing_the_child_aborts_the_rdb_channel_sync(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r = start_sync(m)
    pid = pid_of(r)
    m.core.kill_rdb_child = lambda: setattr(m.core, "rdb_child_pid", -1)  # type: ignore
    m.run("FLUSHALL")
    m.tick(10)
    assert r.main.closed and r.rdb.closed and pid not in m.io.results
    m.clean()


def test_fork_failure_tells_the_rdb_channel_and_closes_both(tmp_path) -> None:
    m = Master(tmp_path)
    m.io.fail_fork = True
    r = Rdbch(m)
    r.psync()
    r.open_rdb()
    assert m.wire(r.rdb).endswith(b"-ERR BGSAVE failed, replication can't continue\r\n")
    assert r.rdb.close_after_reply and r.main.closed
    assert m.events("replica_lost")[-1]["reason"] == "bgsave-failed"
    m.side.client_closed(r.rdb)
    m.core.clients.pop(r.rdb.id)
    m.clean()


def test_a_main_channel_without_rdb_channel_times_out(tmp_path) -> None:
    m = Master(tmp_path, ("repl-timeout", ["5"]))
    r = Rdbch(m)
    r.psync()
    for _ in range(5):
        m.tick(1000)
        assert not r.main.closed
    m.tick(1000)
    assert r.main.closed
    assert "Disconnecting timedout replica (no rdb channel): 127.0.0.1:6381" in m.log()
    m.clean()


def test_a_main_channel_whose_rdb_channel_waits_for_a_busy_child_does_not_time_out(
        tmp_path) -> None:
    m = Master(tmp_path, ("repl-timeout", ["5"]))
    a = Rdbch(m, capa=("eof", "psync2"))
    a.psync()  # a classic sync holds the child
    (pid,) = m.io.children
    r = start_sync(m)
    for _ in range(8):
        m.tick(1000)
    assert not r.main.closed and r.rlink.state is S.WAIT_BGSAVE_START
    assert m.wire(r.rdb).count(b"\n") == m.wire(r.rdb).count(b"\r\n") + 8  # keepalives
    m.io.run_child(pid)
    m.child_exits(pid)
    m.tick(1000)
    assert r.rlink.state is S.WAIT_BGSAVE_END


def test_output_limit_on_the_streaming_main_channel_aborts_the_sync(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "1mb", "0", "0"]))
    r = start_sync(m)
    m.io.stuck.add(r.main.id)  # the replica stops reading its main channel
    for i in range(40):
        m.run("SET", f"k{i}", "x" * 30000)
    assert r.main.closed and r.rdb.closed
    assert m.core.stats.client_outbuf_limit_disconnections == 1
    assert m.events("replica_lost")[-1]["reason"] == "output-buffer-limit"
    m.clean()


def test_replicaof_disconnects_both_channels(tmp_path) -> None:
    m = Master(tmp_path)
    r = start_sync(m)
    m.side.disconnect_replicas()
    assert r.main.closed and r.rdb.closed
    m.clean()


# -- any interleaving, any kill point -----------------------------------------------------------

OPS = st.lists(st.sampled_from(["set", "incr", "rpush", "select", "multi", "del"]),
               max_size=8)


@SETTINGS
@given(phases=st.lists(OPS, min_size=5, max_size=5), n=st.integers(1, 3),
       ack_first=st.booleans(), pings=st.integers(0, 2),
       kill=st.one_of(st.none(), st.tuples(st.integers(0, 2), st.sampled_from(["main", "rdb"]),
                                           st.integers(0, 3))))
def test_any_interleaving_replicates_exactly_and_any_loss_leaves_nothing(
        tmp_path, phases, n, ack_first, pings, kill) -> None:
    m = Master(tmp_path, ("repl-ping-replica-period", ["1"]),
               ("repl-diskless-sync-delay", ["2"]))
    apply_writes(m, phases[0], 0)
    reps = []
    for _ in range(n):
        reps.append(start_sync(m))
        apply_writes(m, phases[1], 1)

    def maybe_kill(point: int) -> None:
        if kill is None or kill[2] != point or kill[0] >= len(reps):
            return
        r = reps[kill[0]]
        if point == 3 and r.mlink.state is S.ONLINE:  # after the sync: the rdb channel is
            assert r.rdb.closed                       # gone; losing the main is a plain loss
            if kill[1] == "rdb":
                return
        m.core.client_closed(r.main if kill[1] == "main" else r.rdb)
        assert r.main.closed and r.rdb.closed
        reps.remove(r)

    maybe_kill(0)
    for _ in range(3 + pings):
        m.tick(1000)
    if not m.io.children:  # everyone left before the fork
        m.clean()
        return
    (pid,) = m.io.children
    maybe_kill(1)
    apply_writes(m, phases[2], 2)
    maybe_kill(2)
    if pid in m.io.results:  # the child was not stopped (someone still needs it)
        m.io.run_child(pid)
        if ack_first:
            for r in reps:
                m.feed(r.main, cmd("REPLCONF", "ACK", r.mlink.psync_offset))
        apply_writes(m, phases[3], 3)
        m.child_exits(pid)
    maybe_kill(3)
    apply_writes(m, phases[4], 4)
    m.tick(1000)
    for r in reps:
        assert r.mlink.state is S.ONLINE and r.rdb.closed
        got = Got(m.wire(r.rdb))
        stream = m.wire(r.main)
        rc = ReplicaCore(tmp_path, got.rdb)
        rc.apply(stream)
        assert rc.digest() == m.digest()
        # offsets add up: snapshot offset + bytes streamed after it == master_repl_offset
        assert got.offset + len(stream) == m.repl.master_repl_offset
        assert int(rc.aux[b"repl-offset"]) == got.offset
    side = m.side
    assert side.links == [r.mlink for r in reps] == side.feeding.streaming
    assert side.feeding.fed == side.feeding.streaming and side.snapshots.current is None and m.core.rdb_child_pid == -1
    assert m.info()["connected_slaves"] == len(reps)
    for r in reps:
        m.core.client_closed(r.main)
    m.clean()


# -- the snapshot child's side of the I/O adapter (in-process, real sockets and a pipe) ---------

def test_snapshot_child_writes_preambles_first_and_reports_each_target_when_done() -> None:
    import socket

    from pyrepl.net.master_io import MasterIO, _SocketJob, stream_to_sockets

    a, a_peer = socket.socketpair()
    b, b_peer = socket.socketpair()
    for sock in (a, b):
        sock.setblocking(False)  # as the child's inherited fds are
    b_peer.close()  # this replica is gone: the child's writes fail
    r, w = os.pipe()
    early: list[bytes] = []

    def payload():  # noqa: ANN202
        # +FULLRESYNC (the preamble) reached the replica before the RDB is even produced
        early.append(a_peer.recv(100))
        yield b"RDB-1|"
        yield b"RDB-2|"

    code = stream_to_sockets([(11, a.fileno(), b"+FULLRESYNC x 0\r\n$EOF:M\r\n"),
                              (12, b.fileno(), b"+FULLRESYNC x 0\r\n$EOF:M\r\n")],
                             payload, b"MARK", 2000, w)
    assert code == 0 and early == [b"+FULLRESYNC x 0\r\n$EOF:M\r\n"]
    assert a_peer.recv(100) == b"RDB-1|RDB-2|MARK"
    lines = os.read(r, 1000).decode().splitlines()
    # the finished replica is reported as soon as it got its mark; the failed one at the end
    sent = len(b"+FULLRESYNC x 0\r\n$EOF:M\r\nRDB-1|RDB-2|MARK")
    assert lines[0] == f"11 1 {sent} -"
    assert lines[1].startswith("12 0 0 ") and len(lines) == 2
    os.close(r)
    # the parent reads the lines available so far, partial lines included, without blocking
    io = MasterIO(None)  # type: ignore[arg-type]
    r, w = os.pipe()
    os.set_blocking(r, False)
    io._jobs[77] = _SocketJob(77, r, {})
    os.write(w, b"11 1 4096 -\n12 1 40")
    assert io.socket_target_done(77, 11) and not io.socket_target_done(77, 12)
    os.write(w, b"96 -\n13 0 0 Broken pipe\n")
    assert io.socket_target_done(77, 12) and not io.socket_target_done(77, 13)
    assert not io.socket_target_done(78, 11)  # no such child
    os.close(w)
    assert io.finish_socket_snapshot(77) == {11: (True, 4096, ""), 12: (True, 4096, ""),
                                             13: (False, 0, "Broken pipe")}
    for sock in (a, a_peer, b):
        sock.close()


def test_the_parent_waits_for_the_line_the_child_writes_right_after_the_mark() -> None:
    """A Redis 8 replica closes its rdb channel as soon as it read the mark; the child writes
    that replica's result line only after the mark, so the parent can see the close first.
    It then waits for the line (briefly: a line that never comes is a lost transfer)."""
    import threading
    import time

    from pyrepl.net.master_io import RESULT_WAIT_S, MasterIO, _SocketJob

    io = MasterIO(None)  # type: ignore[arg-type]
    r, w = os.pipe()
    os.set_blocking(r, False)
    io._jobs[77] = _SocketJob(77, r, {})
    later = threading.Timer(0.02, os.write, (w, b"11 1 4096 -\n"))
    later.start()
    t0 = time.monotonic()
    assert io.socket_target_done(77, 11)        # the line came 20 ms after the close
    assert time.monotonic() - t0 < RESULT_WAIT_S + 0.5
    later.join()
    # no line for 12: False once the wait is over, bounded
    t0 = time.monotonic()
    assert not io.socket_target_done(77, 12)
    assert RESULT_WAIT_S <= time.monotonic() - t0 < RESULT_WAIT_S + 0.5
    # the child ended its reports without one for 13 (it exited): False at once
    os.close(w)
    t0 = time.monotonic()
    assert not io.socket_target_done(77, 13)
    assert time.monotonic() - t0 < RESULT_WAIT_S / 2
    assert io.finish_socket_snapshot(77) == {11: (True, 4096, "")}
