"""Sans-io tests of the master side of Valkey's dual-channel full sync (``+DUALCHANNELSYNC``,
pyrepl.replication.master.dualchannel).

The same harness as test_rdbchannel_master.py: a real ServerCore + Replication, a fake clock
and real bytes; the replicas are real clients of the core sending what a Valkey 8.1 replica
sends (src/replication.c: its main connection's handshake and refused PSYNC, its rdb channel's
``REPLCONF capa eof rdb-only 1 rdb-channel 1 listening-port <p>`` and inline ``SYNC``, then the
main connection's ``REPLCONF set-rdb-client-id <id>`` and ``PSYNC <replid> <offset + 1>``).
The only test double is the OS boundary (``WireIO``: what reaches each socket, the snapshot
child's preamble at fork time, its RDB and mark when the test runs it). What a replica receives
is parsed and *applied* to an independent core (the RDB through pyrepl's loader, the stream
through real command execution) and the datasets compared with DEBUG DIGEST.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.core.client import Client
from pyrepl.replication.master import SlaveState
from pyrepl.replication.master.dualchannel import GRACE_MS, Hold
from pyrepl.replication.wire import EndOffset
from tests.support.cores import cmd
from tests.support.master_side import Master as BaseMaster
from tests.support.master_side import (
    ReplicaCore,
    TwoConnections,
    apply_writes,
    eof_payload,
    fill,
)

S = SlaveState
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

# The history a returning Valkey replica asks for (not this master's: no partial resync)
STALE_ID = "3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511"
OK = b"+OK\r\n"
DUALCHANNELSYNC = b"+DUALCHANNELSYNC\r\n"
NAME = "127.0.0.1:6381"


class Master(BaseMaster):
    @property
    def holds(self) -> dict[int, Hold]:
        return self.side.dual.holds

    def clean(self) -> None:
        """No state left behind by aborted or finished syncs: no replica, no hold, no
        child."""
        side = self.side
        assert side.links == [] and side.feeding.streaming == [] and side.feeding.fed == []
        assert self.holds == {}
        assert side.snapshots.current is None and self.core.rdb_child_pid == -1
        info = self.info()
        assert info["connected_slaves"] == 0 and info["replicas_waiting_psync"] == 0
        assert self.mem()["mem_clients_slaves"] == 0


# -- a Valkey 8.1 replica -------------------------------------------------------------------

class Valkey(TwoConnections):
    """A logical Valkey 8.1 replica: its main connection and, once opened, its rdb
    channel."""

    def __init__(self, m: Master, capa: tuple[str, ...] = ("eof", "psync2", "dual-channel"),
                 version: str = "8.1.1") -> None:
        self.m = m
        self.port = m.port
        m.port += 1
        self.main = m.connect()
        self.rdb: Client | None = None
        self.back = b""  # what the main connection got when it came back
        args: list[str] = []
        for cp in capa:
            args += ["capa", cp]
        m.feed(self.main, cmd("REPLCONF", "listening-port", self.port) + cmd("REPLCONF", *args)
               + cmd("REPLCONF", "version", version))
        assert m.take(self.main) == OK * 3

    def psync(self, replid: str = STALE_ID, offset: int = 1) -> bytes:
        self.m.feed(self.main, cmd("PSYNC", replid, offset))
        return self.m.take(self.main)

    def open_rdb(self, sync: bytes = b"SYNC\r\n") -> None:
        """The rdb channel: its REPLCONF (+OK), then SYNC (inline, as Valkey writes it)."""
        m = self.m
        self.rdb = m.connect()
        m.feed(self.rdb, cmd("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                             "listening-port", self.port))
        assert m.take(self.rdb) == OK
        m.feed(self.rdb, sync)

    def endoff(self) -> EndOffset:
        """The $ENDOFF line the rdb channel got (after any keepalives)."""
        assert self.rdb is not None
        data = self.m.wire(self.rdb).lstrip(b"\n")
        e = EndOffset.parse(data[:data.index(b"\r\n")])
        assert e is not None, data[:80]
        return e

    def come_back(self) -> bytes:
        """The main connection after $ENDOFF: set-rdb-client-id, then PSYNC from the snapshot
        offset + 1. What it got (the replies, +CONTINUE, the stream so far)."""
        m = self.m
        e = self.endoff()
        m.feed(self.main, cmd("REPLCONF", "set-rdb-client-id", e.client_id))
        reply = m.take(self.main)
        if reply != OK:
            return reply
        m.feed(self.main, cmd("PSYNC", e.replid, e.offset + 1))
        self.back = reply + m.take(self.main)
        return self.back

    def ack(self, offset: int | None = None) -> None:
        self.m.feed(self.main, cmd("REPLCONF", "ACK", self.m.repl.master_repl_offset
                                   if offset is None else offset))

    @property
    def pid(self) -> int:
        snap = self.rlink.snapshot
        assert snap is not None
        return snap.pid


def start(m: Master) -> Valkey:
    """A replica refused (+DUALCHANNELSYNC) whose rdb channel sent its SYNC."""
    v = Valkey(m)
    assert v.psync() == DUALCHANNELSYNC
    v.open_rdb()
    return v


def forked(m: Master) -> Valkey:
    """A replica whose snapshot child was forked (no diskless delay)."""
    v = start(m)
    assert v.rlink.state is S.WAIT_BGSAVE_END
    return v


def finish_child(m: Master, pid: int) -> None:
    m.io.run_child(pid)
    m.child_exits(pid)


class Got:
    def __init__(self, data: bytes, fullresync: bool = False) -> None:
        """Split what an rdb channel received: keepalives, $ENDOFF, (+FULLRESYNC), $EOF:<mark>,
        the RDB, the mark, and nothing after it."""
        pos = 0
        while data[pos:pos + 1] == b"\n":
            pos += 1
        self.keepalives = pos
        eol = data.index(b"\r\n", pos)
        e = EndOffset.parse(data[pos:eol])
        assert e is not None, data[pos:eol]
        self.endoff = e
        pos = eol + 2
        if fullresync:
            eol = data.index(b"\r\n", pos)
            parts = data[pos:eol].split()
            assert parts == [b"+FULLRESYNC", e.replid.encode(), b"%d" % e.offset], parts
            pos = eol + 2
        self.mark, self.rdb = eof_payload(data, pos)


def stream_of(v: Valkey, replid: str) -> bytes:
    """What the main connection got after +CONTINUE (checked): the stream."""
    data = v.back + v.m.wire(v.main)
    head = b"+OK\r\n+CONTINUE %s\r\n" % replid.encode()
    assert data.startswith(head), data[:80]
    return data[len(head):]


def assert_replica_equal(tmp_path, m: Master, v: Valkey) -> None:  # noqa: ANN001
    """The replica's dataset (its RDB loaded, then its main connection's stream applied) is
    the master's."""
    assert v.rdb is not None
    got = Got(m.wire(v.rdb))
    stream = stream_of(v, got.endoff.replid)
    rc = ReplicaCore(tmp_path, got.rdb)
    rc.apply(stream)
    assert rc.digest() == m.digest()
    # offsets add up: snapshot offset + what streamed after it == master_repl_offset
    assert got.endoff.offset + len(stream) == m.repl.master_repl_offset
    assert int(rc.aux[b"repl-offset"]) == got.endoff.offset
    assert rc.aux[b"repl-id"] == got.endoff.replid.encode() == m.repl.ids.replid.encode()


# -- the whole exchange ----------------------------------------------------------------------

def test_the_whole_exchange_byte_for_byte(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["2"]))
    fill(m)
    m.tick(30)  # a cron before the replica arrives (no PING into the stream below)
    old_id = m.repl.ids.replid
    main = m.connect()
    for line in (cmd("REPLCONF", "listening-port", "6381"),
                 cmd("REPLCONF", "capa", "eof", "capa", "psync2", "capa", "dual-channel"),
                 cmd("REPLCONF", "version", "8.1.1")):
        m.feed(main, line)
        assert m.take(main) == OK
    m.feed(main, cmd("PSYNC", STALE_ID, "1"))
    assert m.take(main) == DUALCHANNELSYNC
    # the main connection is a client, not a replica (yet)
    assert m.side.links == [] and main.kind == "normal" and main.flags == ""
    assert m.repl.ids.replid == old_id and m.repl.backlog is None
    assert m.info()["connected_slaves"] == 0
    rdb = m.connect()
    m.feed(rdb, cmd("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                    "listening-port", "6381"))
    assert m.take(rdb) == OK
    m.feed(rdb, b"SYNC\r\n")
    assert m.take(rdb) == b"" and m.take(main) == b""
    replid = m.repl.ids.replid
    assert replid != old_id and m.repl.backlog is not None  # a new history for the backlog
    m.run("SET", "delay:1", "a")  # during the delay: in the snapshot
    m.run("INCR", "delay:ctr")
    offset = m.repl.master_repl_offset
    assert offset == len(cmd("SELECT", "0") + cmd("SET", "delay:1", "a")
                         + cmd("INCR", "delay:ctr"))
    m.tick(1000)
    assert m.take(rdb) == b"\n" and m.io.children == {}  # a keepalive while the delay runs
    m.tick(1000)
    (pid,) = m.io.children
    head = m.take(rdb)
    mark = m.io.children[pid][2]
    assert head == (b"\n$ENDOFF:%d %s 0 %d\r\n$EOF:%s\r\n"
                    % (offset, replid.encode(), rdb.id, mark))
    assert m.info()["replicas_waiting_psync"] == 1
    assert b"\r\nreplicas_waiting_psync:1\r\n" in m.run("INFO", "replication")
    # writes after the fork: held for the main connection
    m.run("SET", "between:1", "b")
    m.run("SELECT", "3")
    m.run("RPUSH", "between:l", "x", "y")
    assert m.take(main) == b""
    m.feed(main, cmd("REPLCONF", "set-rdb-client-id", str(rdb.id)))
    assert m.take(main) == OK
    m.feed(main, cmd("PSYNC", replid, str(offset + 1)))
    assert m.take(main) == (b"+CONTINUE " + replid.encode() + b"\r\n" + cmd("SELECT", "0")
                            + cmd("SET", "between:1", "b") + cmd("SELECT", "3")
                            + cmd("RPUSH", "between:l", "x", "y"))
    assert m.info()["replicas_waiting_psync"] == 0
    assert m.link(main).state is S.SEND_BULK_AND_STREAM
    assert m.info()["slave0"] == ("ip=127.0.0.1,port=6381,state=send_bulk_and_stream,"
                                  "offset=0,lag=0")
    m.run("SET", "during:1", "c")  # the child runs: streamed at once
    assert m.take(main) == cmd("SET", "during:1", "c")
    m.io.run_child(pid)
    m.child_exits(pid)
    got = Got(head + m.take(rdb))
    assert got.keepalives == 1 and got.endoff == EndOffset(offset, replid, 0, rdb.id)
    assert rdb.closed and m.take(main) == b""
    # online at the first ACK (not at the child's exit)
    assert m.link(main).state is S.SEND_BULK_AND_STREAM
    m.feed(main, cmd("REPLCONF", "ACK", str(offset)))
    assert m.take(main) == b"" and m.link(main).state is S.ONLINE
    m.run("SET", "after:1", "d")
    assert m.take(main) == cmd("SET", "after:1", "d")
    rc = ReplicaCore(tmp_path, got.rdb)
    assert (rc.aux[b"repl-id"], rc.aux[b"repl-offset"]) == (replid.encode(), b"%d" % offset)
    rc.apply(cmd("SELECT", "0") + cmd("SET", "between:1", "b") + cmd("SELECT", "3")
             + cmd("RPUSH", "between:l", "x", "y") + cmd("SET", "during:1", "c")
             + cmd("SET", "after:1", "d"))
    assert rc.digest() == m.digest()
    log = m.log()
    i = log.index(f"Replica {NAME} asks for synchronization")
    assert log[i:i + 3] == [
        f"Replica {NAME} asks for synchronization",
        f"Partial resynchronization not accepted: Replication ID mismatch (Replica asked for "
        f"'{STALE_ID}', my replication IDs are '{old_id}' and "
        f"'0000000000000000000000000000000000000000')",
        f"Replica {NAME} is capable of dual channel synchronization, and partial sync isn't "
        f"possible. Full sync will continue with dedicated RDB channel.",
    ]
    assert f"Sending to replica {NAME} RDB end offset {offset} and client-id {rdb.id}" in log
    assert f"Synchronization with replica {NAME} succeeded" in log
    st_ = m.core.stats
    assert (st_.sync_full, st_.sync_partial_err, st_.sync_partial_ok) == (1, 1, 1)


@pytest.mark.parametrize("sync", [b"SYNC\r\n", cmd("SYNC")])
def test_inline_or_resp_sync_gets_endoff_then_the_eof_payload(tmp_path, sync) -> None:
    m = Master(tmp_path)
    fill(m)
    v = Valkey(m)
    assert v.psync() == DUALCHANNELSYNC
    v.open_rdb(sync)
    assert v.rlink.state is S.WAIT_BGSAVE_END and v.rlink.pre_psync
    finish_child(m, v.pid)
    got = Got(m.wire(v.rdb))
    assert got.keepalives == 0 and got.endoff.client_id == v.rdb.id
    assert got.endoff.dbid == 0 and got.endoff.replid == m.repl.ids.replid


def test_psync_on_the_rdb_channel_gets_fullresync_after_endoff(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    m.write_many(3)
    v = Valkey(m)
    assert v.psync() == DUALCHANNELSYNC
    v.open_rdb(cmd("PSYNC", "?", "-1"))
    m.run("SET", "between", "1")
    finish_child(m, v.pid)
    data = m.wire(v.rdb)
    got = Got(data, fullresync=True)
    e = got.endoff
    assert data.startswith(b"$ENDOFF:%d %s 0 %d\r\n+FULLRESYNC %s %d\r\n$EOF:"
                           % (e.offset, e.replid.encode(), v.rdb.id, e.replid.encode(),
                              e.offset))
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    v.ack()
    assert v.mlink.state is S.ONLINE
    # (the RDB as the child wrote it, after the +FULLRESYNC line)
    rc = ReplicaCore(tmp_path, got.rdb)
    rc.apply(stream_of(v, e.replid))
    assert rc.digest() == m.digest()


def test_keepalives_on_the_rdb_channel_while_the_delay_runs(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["3"]))
    m.tick(30)
    v = start(m)
    for _ in range(2):
        m.tick(1000)
    assert m.take(v.rdb) == b"\n\n" and m.io.children == {}
    assert m.take(v.main) == b""  # the main connection gets nothing, no keepalives either
    # before the fork the rdb channel's id is no hold's
    m.feed(v.main, cmd("REPLCONF", "set-rdb-client-id", v.rdb.id))
    assert m.take(v.main) == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
    m.tick(1000)
    assert m.io.children and m.wire(v.rdb).startswith(b"\n$ENDOFF:")


# -- the dataset: writes before the fork, between it and the main PSYNC, and after -----------

@pytest.mark.parametrize("when", ["before-exit", "after-exit", "after-rdb-closed"])
def test_the_replica_rebuilds_the_masters_dataset(tmp_path, when) -> None:
    """The main PSYNC before the child's exit (while the RDB is written, Valkey's usual
    case), after it (the rdb channel closed by the master), or after the replica closed its
    rdb channel once it read the mark (before the master saw the child exit)."""
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["1"]))
    fill(m)
    v = start(m)
    apply_writes(m, ["set", "rpush", "select", "incr", "multi"], 0)  # in the snapshot
    m.tick(1000)
    m.tick(1000)
    pid = v.pid
    apply_writes(m, ["set", "select", "hset", "del", "incr", "zadd"], 1)  # held
    if when == "before-exit":
        assert v.come_back().startswith(OK + b"+CONTINUE ")
        apply_writes(m, ["sadd", "multi", "select", "set"], 2)
        m.io.run_child(pid)
        v.ack(v.endoff().offset)  # loaded before the master saw the exit: online now
        assert v.mlink.state is S.ONLINE and pid in m.io.reaped
        apply_writes(m, ["rpush", "incr"], 3)
        m.child_exits(pid)
    else:
        m.io.run_child(pid)
        if when == "after-rdb-closed":
            m.core.client_closed(v.rdb)  # EOF from the replica after the mark
            assert m.io.dropped == [] and m.host.killed == []  # the child is not disturbed
            apply_writes(m, ["sadd", "multi"], 2)
            m.child_exits(pid)
        else:
            apply_writes(m, ["sadd", "multi"], 2)
            m.child_exits(pid)
            assert v.rdb.closed  # the master closes it once the child is done
        assert m.holds and v.mlink.replconf_only
        apply_writes(m, ["select", "set", "rpush"], 3)
        assert v.come_back().startswith(OK + b"+CONTINUE ")
        assert v.mlink.state is S.SEND_BULK_AND_STREAM and v.mlink.rdb_done
    apply_writes(m, ["set", "incr", "del"], 4)
    if v.mlink.state is not S.ONLINE:
        v.ack()
    assert v.mlink.state is S.ONLINE
    apply_writes(m, ["hset", "select", "set"], 5)
    assert_replica_equal(tmp_path, m, v)
    assert m.holds == {} and m.side.links == [v.mlink] == m.side.feeding.streaming
    assert m.side.snapshots.current is None and m.core.rdb_child_pid == -1
    assert m.info()["connected_slaves"] == 1 and m.info()["replicas_waiting_psync"] == 0


def test_the_hold_pins_the_stream_beyond_the_backlog_size(tmp_path) -> None:
    """Between the fork and the main PSYNC the stream from the snapshot offset on stays in
    the buffer whatever the backlog size, until the hold ends."""
    m = Master(tmp_path, ("repl-backlog-size", ["16kb"]))
    fill(m)
    v = forked(m)
    offset = v.endoff().offset
    backlog = m.repl.backlog
    for i in range(200):  # well over 16 kB
        m.run("SET", f"between:{i}", "v" * 500)
    m.tick(1000)
    finish_child(m, v.pid)
    m.tick(1000)
    assert m.repl.master_repl_offset - offset > 4 * 16 * 1024
    assert backlog.can_serve(offset + 1) and backlog.first_byte_offset <= offset + 1
    assert m.mem()["mem_total_replication_buffers"] > 4 * 16 * 1024
    # the grace period over: the stream is the backlog's again, trimmed to its size
    for _ in range(GRACE_MS // 1000 + 1):
        m.tick(1000)
    assert m.holds == {}
    m.run("SET", "after", "1")
    m.tick(1000)
    assert not backlog.can_serve(offset + 1) and backlog.histlen < 3 * 16 * 1024


@pytest.mark.parametrize("when", ["before-exit", "after-exit"])
def test_the_main_psync_after_more_than_the_backlog_size_was_held(tmp_path, when) -> None:
    m = Master(tmp_path, ("repl-backlog-size", ["16kb"]))
    fill(m)
    v = forked(m)
    pid = v.pid
    for i in range(200):  # well over 16 kB
        m.run("SET", f"between:{i}", "v" * 500)
    if when == "after-exit":
        finish_child(m, pid)
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    if when == "before-exit":
        finish_child(m, pid)
    v.ack()
    assert v.mlink.state is S.ONLINE
    assert_replica_equal(tmp_path, m, v)


# -- the rdb channel's end ---------------------------------------------------------------------

def test_rdb_channel_closed_after_the_mark_keeps_the_hold(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    m.io.run_child(pid)
    m.core.client_closed(v.rdb)
    assert f"Connection with replica (rdbchannel) {NAME} lost." in m.log()
    assert list(m.holds) == [v.rdb.id] and m.holds[v.rdb.id].gone_ms == m.core.now_ms
    assert m.core.rdb_child_pid == pid and m.host.killed == []
    m.child_exits(pid)
    assert m.holds and m.info()["replicas_waiting_psync"] == 1
    assert m.events("replica_lost") == []
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    v.ack()
    assert v.mlink.state is S.ONLINE and m.holds == {}
    assert_replica_equal(tmp_path, m, v)


@pytest.mark.parametrize("main_back", [False, True])
def test_rdb_channel_lost_before_the_end_fails_the_sync(tmp_path, main_back) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    m.run("SET", "between", "1")
    if main_back:  # the main connection attached already: it goes too
        assert v.come_back().startswith(OK + b"+CONTINUE ")
    cid = v.rdb.id
    m.core.client_closed(v.rdb)
    assert m.holds == {}
    assert m.io.dropped == [cid] and m.host.killed == [pid]
    assert "Diskless rdb transfer, last replica dropped, killing fork child." in m.log()
    lost = m.events("replica_lost")
    if main_back:
        assert v.main.closed and v.mlink.state is S.CLOSED
        assert [e["reason"] for e in lost] == ["rdb-channel-lost"]
    else:
        assert not v.main.closed  # a client still: the replica gives up its sync itself
        assert [e["reason"] for e in lost] == ["closed"]
        m.feed(v.main, cmd("REPLCONF", "set-rdb-client-id", cid))
        assert m.take(v.main) == b"-ERR Unrecognized RDB client id %d\r\n" % cid
        m.core.client_closed(v.main)
    m.clean()


def test_rdb_channel_lost_spares_the_other_replica_and_the_child(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["2"]))
    fill(m)
    a = start(m)
    b = start(m)
    m.tick(1000)
    m.tick(1000)
    (pid,) = m.io.children
    assert a.pid == b.pid == pid and sorted(m.holds) == sorted([a.rdb.id, b.rdb.id])
    m.run("SET", "between", "1")
    m.core.client_closed(b.rdb)  # lost before the child wrote its RDB
    assert list(m.holds) == [a.rdb.id]
    assert m.io.dropped == [b.rdb.id] and m.host.killed == [] and m.core.rdb_child_pid == pid
    finish_child(m, pid)
    assert a.come_back().startswith(OK + b"+CONTINUE ")
    a.ack()
    assert a.mlink.state is S.ONLINE and m.side.links == [a.mlink]
    assert_replica_equal(tmp_path, m, a)
    m.feed(b.main, cmd("REPLCONF", "set-rdb-client-id", b.rdb.id))
    assert m.take(b.main) == b"-ERR Unrecognized RDB client id %d\r\n" % b.rdb.id


def test_main_connection_lost_after_attaching_stops_the_transfer(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    m.core.client_closed(v.main)
    assert v.rdb.closed and m.host.killed == [pid]
    assert [e["reason"] for e in m.events("replica_lost")] == ["closed"]
    m.clean()


@pytest.mark.parametrize("main_back", [False, True])
def test_the_child_failing_for_the_rdb_channel_fails_the_sync(tmp_path, main_back) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    if main_back:
        assert v.come_back().startswith(OK + b"+CONTINUE ")
    m.io.child_broken.add(v.rdb.id)  # the child's writes fail
    m.io.run_child(pid)
    m.child_exits(pid, 1)
    assert v.rdb.closed and m.holds == {}
    if main_back:
        assert v.main.closed
    else:
        assert v.come_back() == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
        m.core.client_closed(v.main)
    m.clean()


def test_wait_counts_the_main_connection_only_once_online(tmp_path) -> None:
    m = Master(tmp_path)
    v = forked(m)
    finish_child(m, v.pid)
    v.come_back()
    m.run("SET", "k", "v")
    assert m.run("WAIT", "1", "0") == b""  # blocked: the replica is not online
    assert m.take(v.main).endswith(cmd("REPLCONF", "GETACK", "*"))
    v.ack(v.endoff().offset)  # its RDB loaded: online, not acked that far yet
    assert v.mlink.state is S.ONLINE and m.wire(m.user) == b""
    v.ack()
    assert m.wire(m.user) == b":1\r\n"


@pytest.mark.parametrize("rdb_open", [True, False])
def test_replicaof_drops_the_holds(tmp_path, rdb_open) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    if not rdb_open:
        finish_child(m, pid)
    assert m.holds
    m.side.disconnect_replicas()
    assert m.holds == {} and v.rdb.closed
    if rdb_open:
        assert m.host.killed == [pid]
    assert v.come_back() == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
    m.core.client_closed(v.main)
    m.clean()


# -- the grace period and the output limit -----------------------------------------------------

def test_the_hold_outlives_the_rdb_channel_for_the_grace_period_only(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    finish_child(m, v.pid)  # delivered; the master closed the rdb channel
    assert v.rdb.closed and list(m.holds) == [v.rdb.id]
    gone = m.holds[v.rdb.id].gone_ms
    assert gone == m.core.now_ms
    m.run("SET", "between", "1")
    while m.core.now_ms + 1000 <= gone + GRACE_MS:
        m.tick(1000)
    assert m.core.now_ms == gone + GRACE_MS
    assert m.info()["replicas_waiting_psync"] == 1  # 60 s: still held
    m.tick(1000)
    assert m.holds == {} and m.info()["replicas_waiting_psync"] == 0
    assert any(x.startswith("Replica main channel failed to establish PSYNC within the grace "
                            "period (61 seconds). Freeing RDB client") for x in m.log())
    assert v.come_back() == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
    assert v.mlink.replconf_only
    m.core.client_closed(v.main)
    m.clean()


def test_the_main_connection_back_within_the_grace_period(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    finish_child(m, v.pid)
    for _ in range(59):
        m.tick(1000)
        m.run("INCR", "ctr")
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    v.ack()
    assert_replica_equal(tmp_path, m, v)
    for _ in range(70):  # no hold left to expire: the replica stays
        m.tick(1000)
        v.ack()
    assert v.mlink.state is S.ONLINE and m.side.links == [v.mlink]


@pytest.mark.parametrize("rdb_open", [True, False])
def test_the_hold_over_the_replica_output_limit_is_dropped(tmp_path, rdb_open) -> None:
    # (a replica's hard limit is at least the backlog's size, 1 MB here)
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "2mb", "0", "0"]))
    fill(m)
    v = forked(m)
    pid = v.pid
    if not rdb_open:
        finish_child(m, pid)
    for i in range(20):
        m.run("SET", f"big:{i}", "x" * 150_000)
    assert m.holds  # checked by the cron, once a second
    m.tick(1000)
    assert m.holds == {}
    assert m.core.stats.client_outbuf_limit_disconnections == 1
    assert any("scheduled to be closed ASAP for overcoming of output buffer limits" in x
               for x in m.log())
    if rdb_open:  # the rdb channel goes, and the child with it
        assert v.rdb.closed and m.host.killed == [pid]
        assert m.events("replica_lost")[-1]["reason"] == "output-buffer-limit"
    assert v.come_back() == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
    m.core.client_closed(v.main)
    m.clean()


def test_the_hold_under_the_output_limit_stays(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "2mb", "0", "0"]))
    fill(m)
    v = forked(m)
    for i in range(5):  # (under the backlog's size too)
        m.run("SET", f"big:{i}", "x" * 150_000)
    m.tick(1000)
    assert list(m.holds) == [v.rdb.id]
    finish_child(m, v.pid)
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    v.ack()
    assert_replica_equal(tmp_path, m, v)


def test_the_hold_over_the_soft_limit_for_too_long_is_dropped(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "0", "256kb", "2"]))
    fill(m)
    v = forked(m)
    finish_child(m, v.pid)
    for i in range(20):
        m.run("SET", f"big:{i}", "x" * 20000)
    for _ in range(3):
        m.tick(1000)
        assert m.holds  # over the soft limit, not for more than 2 s yet
    m.tick(1000)
    assert m.holds == {}


# -- REPLCONF ------------------------------------------------------------------------------------

def test_set_rdb_client_id_unknown_ids(tmp_path) -> None:
    m = Master(tmp_path)
    v = forked(m)
    c = m.connect()
    for bad in (9999, m.user.id, c.id, v.main.id):  # unknown; a normal client; itself; main
        assert m.run("REPLCONF", "set-rdb-client-id", bad, client=c) == \
            b"-ERR Unrecognized RDB client id %d\r\n" % bad
    assert m.run("REPLCONF", "set-rdb-client-id", "x", client=c) == \
        b"-ERR value is not an integer or out of range\r\n"
    assert m.run("REPLCONF", "set-rdb-client-id", v.rdb.id, client=c) == OK
    assert m.side.links == [v.rlink]  # REPLCONF does not make a replica


def test_psync_from_the_snapshot_offset_without_set_rdb_client_id(tmp_path) -> None:
    """Without naming its rdb channel the main connection's PSYNC is an ordinary partial
    resync (online at once, as Valkey's); the hold stays for its rdb channel."""
    m = Master(tmp_path)
    v = forked(m)
    e = v.endoff()
    m.feed(v.main, cmd("PSYNC", e.replid, e.offset + 1))
    assert m.take(v.main) == b"+CONTINUE %s\r\n" % e.replid.encode()
    assert v.mlink.state is S.ONLINE and v.mlink.mode == "partial"
    assert list(m.holds) == [v.rdb.id]


@pytest.mark.parametrize("version", ["8.1.1", "0.0.0", "255.255.255", "..", "1..", ".2.",
                                     "007.08.9", "8.1.", "0255.0.0"])
def test_replconf_version_valid(tmp_path, version) -> None:
    m = Master(tmp_path)
    c = m.connect()
    assert m.run("REPLCONF", "version", version, client=c) == OK
    assert m.link(c).version == version


@pytest.mark.parametrize("version", ["", "8", "8.1", "8.1.1.1", "256.0.0", "8.1.256",
                                     "8.1.1-rc1", "v8.1.1", "a.b.c", " 8.1.1", "8.1.1 ",
                                     "-1.0.0", "+1.0.0", "8.1.1\n", "\u0663.1.1",
                                     "1000.0.0", "...."])
def test_replconf_version_bad_formats(tmp_path, version) -> None:
    m = Master(tmp_path)
    c = m.connect()
    text = version.replace("\n", " ").encode()
    assert m.run("REPLCONF", "version", version, client=c) == \
        b"-ERR Unrecognized version format: " + text + b"\r\n"


def test_a_replica_without_history_is_offered_the_dual_channel_sync_too(tmp_path) -> None:
    m = Master(tmp_path)
    v = Valkey(m)
    assert v.psync("?", -1) == DUALCHANNELSYNC
    assert m.core.stats.sync_partial_err == 0 and m.core.stats.sync_full == 0
    d = m.events("psync_decision")[-1]
    assert (d["result"], d["req_replid"], d["req_offset"]) == ("dualchannel", "?", -1)
    v.open_rdb()
    assert m.core.stats.sync_full == 1
    finish_child(m, v.pid)
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    v.ack()
    assert_replica_equal(tmp_path, m, v)


# -- capa dual-channel ignored: the one-channel sync ---------------------------------------------

@pytest.mark.parametrize("over", [("repl-rdb-channel", ["no"]),
                                  ("repl-diskless-sync", ["no"])])
def test_capa_dual_channel_ignored_without_rdb_channel_or_diskless(tmp_path, over) -> None:
    m = Master(tmp_path, over)
    fill(m)
    v = Valkey(m)
    assert not v.mlink.capa_dual_channel
    line = v.psync()
    assert v.mlink.state in (S.WAIT_BGSAVE_END, S.SEND_BULK)
    replid, offset = m.repl.ids.replid, m.repl.master_repl_offset
    fullresync = b"+FULLRESYNC %s %d\r\n" % (replid.encode(), offset)
    if over[0] == "repl-diskless-sync":  # disk: the reply now, the file once saved
        assert line == fullresync
    else:                                # diskless: the child writes it
        assert line.startswith(fullresync + b"$EOF:")
    assert m.events("psync_decision")[-1]["result"] == "full"
    assert m.holds == {} and not any("dual channel" in x for x in m.log())


def test_config_switched_off_between_replconf_and_psync(tmp_path) -> None:
    m = Master(tmp_path)
    v = Valkey(m)
    assert v.mlink.capa_dual_channel
    m.core.config.set("repl-rdb-channel", "no")
    assert v.psync().startswith(b"+FULLRESYNC ")
    assert v.mlink.state is S.WAIT_BGSAVE_END


def test_a_partial_resync_stays_partial_with_the_capability(tmp_path) -> None:
    m = Master(tmp_path)
    v = forked(m)
    finish_child(m, v.pid)
    v.come_back()
    v.ack()
    m.write_many(5)
    replid, offset = m.repl.ids.replid, m.repl.master_repl_offset
    m.core.client_closed(v.main)
    w = Valkey(m)
    assert w.psync(replid, offset - 10).startswith(b"+CONTINUE " + replid.encode() + b"\r\n")
    assert w.mlink.state is S.ONLINE and w.mlink.mode == "partial"


# -- events ----------------------------------------------------------------------------------------

def test_events_of_one_dual_channel_sync(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    v = forked(m)
    pid = v.pid
    assert v.come_back().startswith(OK + b"+CONTINUE ")
    finish_child(m, pid)
    assert [e["event"] for e in m.events()] == ["psync_decision", "fullsync_fork",
                                                "fullsync_rdb_sent"]
    v.ack()
    ev = m.events()
    assert [e["event"] for e in ev] == ["psync_decision", "fullsync_fork", "fullsync_rdb_sent",
                                        "replica_online"]
    assert len({e["sync_id"] for e in ev}) == 1 and ev[0]["sync_id"]
    assert {e["peer"] for e in ev} == {NAME}
    d, fork, sent, online = ev
    assert (d["result"], d["reason"], d["req_replid"], d["req_offset"]) == \
        ("dualchannel", "replid-mismatch", STALE_ID, 1)
    assert fork["mode"] == sent["mode"] == online["mode"] == "dual-channel"
    e = Got(m.wire(v.rdb)).endoff
    assert fork["offset"] == sent["offset"] == online["offset"] == e.offset
    assert sent["bytes"] == len(m.wire(v.rdb))
    assert fork["replid"] == online["replid"] == m.repl.ids.replid
    assert v.mlink.sync_id == ev[0]["sync_id"] and v.mlink.mode == "dual-channel"
    assert m.events("replica_lost") == [] and m.events("partial_sent") == []


def test_events_of_two_replicas_keep_their_sync_ids(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["2"]))
    a, b = start(m), start(m)
    m.tick(1000)
    m.tick(1000)
    finish_child(m, a.pid)
    for v in (b, a):
        assert v.come_back().startswith(OK + b"+CONTINUE ")
        v.ack()
    ids = {}
    for e in m.events():
        ids.setdefault(e["peer"], set()).add(e["sync_id"])
    assert sorted(ids) == ["127.0.0.1:6381", "127.0.0.1:6382"]
    assert all(len(s) == 1 for s in ids.values()) and ids[a.mlink.name()] != ids[b.mlink.name()]
    assert len(m.events("replica_online")) == 2


# -- any interleaving ------------------------------------------------------------------------------

OPS = st.lists(st.sampled_from(["set", "incr", "rpush", "select", "multi", "del"]),
               max_size=6)
# the main connection comes back (set-rdb-client-id + PSYNC) at one of these points, or never
BACK = ["forked", "rdb-written", "rdb-closed-by-replica", "exited", "later", None]
# the rdb channel lost before its RDB was written: before the fork (during the delay), after
# it, or after the main connection came back
EARLY = [None, "before-fork", "forked", "after-back"]


@SETTINGS
@given(phases=st.lists(OPS, min_size=6, max_size=6), delay=st.integers(0, 2),
       back=st.sampled_from(BACK), early=st.sampled_from(EARLY),
       replica_closes=st.booleans(), ack_first=st.booleans(), classic=st.booleans())
def test_any_interleaving_replicates_exactly_or_leaves_nothing(
        tmp_path, phases, delay, back, early, replica_closes, ack_first, classic) -> None:
    """Writes everywhere, the main connection back at any point (or never), the rdb channel
    lost early or closed by the replica after the mark, an ACK before the child's exit, a
    classic replica waiting for its own snapshot: the replica's dataset is the master's, or
    (rdb channel lost early, main connection never back) the sync failed and left
    nothing."""
    m = Master(tmp_path, ("repl-diskless-sync-delay", [str(delay)]))
    apply_writes(m, phases[0], 0)
    v = Valkey(m)
    assert v.psync() == DUALCHANNELSYNC
    apply_writes(m, phases[1], 1)
    v.open_rdb()
    w = None
    if classic:  # a classic replica arriving now waits for a snapshot of its own
        w = m.replica("eof", "psync2")
        m.send(w, "PSYNC", "?", "-1")
    lost = False       # the rdb channel went before its RDB: the sync fails
    returned = False   # the main connection's PSYNC was taken
    given_up = False   # the main connection was told its rdb channel is unknown

    def come_back() -> None:
        nonlocal returned, given_up
        if returned or given_up:
            return
        reply = v.come_back()
        if lost:
            assert reply == b"-ERR Unrecognized RDB client id %d\r\n" % v.rdb.id
            given_up = True
            m.core.client_closed(v.main)   # the replica gives this sync up
        else:
            assert reply.startswith(OK + b"+CONTINUE ")
            assert v.mlink.state is S.SEND_BULK_AND_STREAM and m.holds == {}
            returned = True

    def lose_rdb_channel() -> None:
        nonlocal lost
        m.core.client_closed(v.rdb)
        lost = True
        assert m.holds == {}
        if returned:
            assert v.main.closed   # the master ends the attached main connection too
        elif b"$ENDOFF:" in m.wire(v.rdb):
            come_back()            # (told its rdb channel is unknown)
        else:
            m.core.client_closed(v.main)   # before the fork: nothing to come back with

    if early == "before-fork" and delay:
        lose_rdb_channel()
    for _ in range(delay + 1):
        m.tick(1000)
        apply_writes(m, phases[2][:1], 2)
    if lost:
        assert not any(any(t is v.rdb for t, _ in job[0]) for job in m.io.children.values())
    else:
        pid = v.pid
        assert list(m.holds) == [v.rdb.id]
        apply_writes(m, phases[2], 2)
        if back == "forked":
            come_back()
        if early == "forked" or (early == "after-back" and returned):
            lose_rdb_channel()
            assert pid in m.host.killed or (w is not None and m.link(w).snapshot is not None
                                            and m.link(w).snapshot.pid == pid)
        apply_writes(m, phases[3], 3)
    if not lost:
        m.io.run_child(pid)
        if back == "rdb-written":
            come_back()
        if replica_closes:  # the replica read the mark and closes its rdb channel
            m.core.client_closed(v.rdb)
            assert m.host.killed == [] and m.io.dropped == []
        if back == "rdb-closed-by-replica":
            come_back()
        if ack_first and returned:
            v.ack(v.endoff().offset)
            assert v.mlink.state is S.ONLINE
        apply_writes(m, phases[4], 4)
        m.child_exits(pid)
        assert v.rdb.closed
        if returned:  # online at its ACK only
            assert v.mlink.state is (S.ONLINE if ack_first else S.SEND_BULK_AND_STREAM)
        else:
            assert list(m.holds) == [v.rdb.id]
        if back == "later":
            for _ in range(5):
                m.tick(1000)
                apply_writes(m, phases[4][:2], 4)
        if back in ("exited", "later"):
            come_back()
    apply_writes(m, phases[5], 5)
    if back is None and not lost:  # never back: the grace period ends the hold
        for _ in range(GRACE_MS // 1000 + 2):
            m.tick(1000)
        assert m.holds == {}
        m.core.client_closed(v.main)
    if w is not None:  # the classic replica's own snapshot, then it goes
        for _ in range(delay + 2):
            m.tick(1000)
        snap = m.link(w).snapshot
        if snap is not None and m.link(w).state is S.WAIT_BGSAVE_END:
            finish_child(m, snap.pid)
        m.core.client_closed(w)
    if lost or not returned:
        assert lost or back is None
        assert not v.mlink.online
        m.tick(1000)
        m.clean()
        return
    assert v.mlink.state in (S.SEND_BULK_AND_STREAM, S.ONLINE)
    if v.mlink.state is S.SEND_BULK_AND_STREAM:
        v.ack()
    assert v.mlink.state is S.ONLINE
    m.tick(1000)
    assert_replica_equal(tmp_path, m, v)
    side = m.side
    assert side.links == [v.mlink] == side.feeding.streaming and m.holds == {}
    assert side.snapshots.current is None and m.core.rdb_child_pid == -1
    # one sync, one id; no loss reported for the rdb channel's normal end
    mine = [e for e in m.events() if e["peer"] == NAME and e["event"] != "replica_lag"]
    assert len({e["sync_id"] for e in mine}) == 1
    kinds = [e["event"] for e in mine]
    assert kinds[:2] == ["psync_decision", "fullsync_fork"]
    assert mine[0]["result"] == "dualchannel"
    assert "replica_lost" not in kinds and kinds.count("replica_online") == 1
    assert {e["mode"] for e in mine if "mode" in e} == {"dual-channel"}
    m.core.client_closed(v.main)
    m.clean()
