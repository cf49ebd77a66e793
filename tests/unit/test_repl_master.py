"""Sans-io tests of the master side: real ServerCore + Replication, a fake clock, real bytes.

The replicas here are real clients of the core sending the exact bytes a Redis 7.0.15 replica
sends (REPLCONF, PSYNC, REPLCONF ACK). The only test double is the OS boundary: ``WireIO`` stands
for ``pyrepl.net.master_io.MasterIO`` and records what would reach each replica's socket, in
order (the I/O shell's writes of the client's output, and the snapshot child's writes), and
``ForkHost`` runs a forked job in-process (the disk BGSAVE job really writes the RDB file). What
each replica receives is then parsed and *applied* to a second, independent core: RDB through
pyrepl's real loader, the stream through real command execution, and the datasets compared with
DEBUG DIGEST.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.core.client import Client
from pyrepl.replication.master.states import (
    INFO_STATE,
    TRANSITIONS,
    LinkInput,
    LinkStateError,
    ReplicaLink,
    S,
)
from tests.support.checks import check_every_move
from tests.support.cores import cmd
from tests.support.master_side import (
    Master,
    ReplicaCore,
    apply_writes,
    fill,
    online_replica,
    parse_full_sync,
)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
OTHER_ID = "033f47035796237037ee52e3e0b14820a2010d4d"
PING = b"*1\r\n$4\r\nping\r\n"
GETACK = b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"


# -- the other end: parse and apply what a replica received -----------------------------------


# -- the transition table --------------------------------------------------------------------

def test_transition_table_is_total_and_typed() -> None:
    """The table, with the rdb channel's states (was also test_rdbchannel_master's
    test_transition_table_with_the_rdb_channel_states) and Valkey's dual channel's main
    connection: state, input -> next state."""
    rows = """
        NONE                  PARTIAL           ONLINE
        NONE                  FULL              WAIT_BGSAVE_START
        WAIT_BGSAVE_START     SNAPSHOT_STARTED  WAIT_BGSAVE_END
        WAIT_BGSAVE_START     ATTACHED          WAIT_BGSAVE_END
        WAIT_BGSAVE_END       RDB_SAVED         SEND_BULK
        WAIT_BGSAVE_END       RDB_STREAMED      ONLINE
        WAIT_BGSAVE_END       RDB_ONLY_DONE     RDB_TRANSMITTED
        SEND_BULK             BULK_SENT         ONLINE
        SEND_BULK             RDB_ONLY_DONE     RDB_TRANSMITTED
        NONE                  RDB_CHANNEL       WAIT_RDB_CHANNEL
        WAIT_RDB_CHANNEL      SNAPSHOT_STARTED  SEND_BULK_AND_STREAM
        SEND_BULK_AND_STREAM  RDB_STREAMED      ONLINE
        SEND_BULK_AND_STREAM  FIRST_ACK         ONLINE
        NONE                  DUAL_CHANNEL_PSYNC  SEND_BULK_AND_STREAM
        NONE                  RESUME            WAIT_BGSAVE_END
    """
    expected = {(S[a], LinkInput[b]): S[c] for a, b, c in map(str.split, rows.strip().splitlines())}
    expected |= {(s, LinkInput.CLOSED): S.CLOSED for s in S if s is not S.CLOSED}
    assert TRANSITIONS == expected
    # every state x input: the table's move, or a typed error leaving the state unchanged
    link = ReplicaLink(Client.__new__(Client))
    check_every_move(link, link.go, TRANSITIONS, S, LinkInput, LinkStateError)
    # Redis 8 shows a main channel waiting for its rdb channel as wait_bgsave
    assert INFO_STATE == {S.WAIT_BGSAVE_START: "wait_bgsave", S.WAIT_BGSAVE_END: "wait_bgsave",
                          S.SEND_BULK: "send_bulk", S.ONLINE: "online",
                          S.WAIT_RDB_CHANNEL: "wait_bgsave",
                          S.SEND_BULK_AND_STREAM: "send_bulk_and_stream"}
    assert (S.WAIT_RDB_CHANNEL.value, S.SEND_BULK_AND_STREAM.value) == (11, 12)


def test_the_side_is_composed_of_phases_that_declare_their_state(tmp_path) -> None:
    """MasterSide holds one object per phase, each slotted (all its state declared in
    ``__init__``), reaching the others only through their public methods; the guards the
    phases ask are the states module's."""
    import ast
    import pathlib

    import pyrepl.replication.master as pkg

    side = Master(tmp_path).side
    phases = {"feeding": side.feeding, "snapshots": side.snapshots, "acks": side.acks,
              "sync": side.sync, "resume": side.resume}
    for obj in (side, *phases.values()):
        assert not hasattr(obj, "__dict__"), type(obj).__name__
        for name in type(obj).__slots__:
            assert hasattr(obj, name), f"{type(obj).__name__}.{name} not set in __init__"
    assert side.snapshots.feeding is side.feeding and side.acks.snapshots is side.snapshots
    assert side.sync.acks is side.acks and {p.side for p in phases.values()} == {side}
    # nobody's private attribute but its own (the core's call depth is read project-wide)
    for path in sorted(pathlib.Path(pkg.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr != "_call_depth"):
                assert isinstance(node.value, ast.Name) and node.value.id == "self", \
                    f"{path.name}:{node.lineno}: .{node.attr} of another object"


# -- REPLCONF --------------------------------------------------------------------------------

def test_replconf_options_and_errors(tmp_path) -> None:
    m = Master(tmp_path, ("protected-mode", ["no"]))   # (a replica from another host)
    c = m.core.connection_made("10.0.0.7:41000", "127.0.0.1:6380")
    assert m.run("REPLCONF", "listening-port", "6390", client=c) == b"+OK\r\n"
    assert m.run("REPLCONF", "ip-address", "10.1.2.3", "capa", "eof", "capa", "psync2",
                 "capa", "rdb-channel-repl", client=c) == b"+OK\r\n"
    link = m.link(c)
    assert (link.listening_port, link.ip_address, link.capa_eof, link.capa_psync2) == \
        (6390, "10.1.2.3", True, True)
    assert link.name() == "10.1.2.3:6390"
    assert m.run("REPLCONF", "listening-port", client=c) == b"-ERR syntax error\r\n"
    assert m.run("REPLCONF", "listening-port", "x", client=c) == \
        b"-ERR value is not an integer or out of range\r\n"
    assert m.run("REPLCONF", "foo", "bar", client=c) == \
        b"-ERR Unrecognized REPLCONF option: foo\r\n"
    assert m.run("REPLCONF", "ip-address", "a" * 256, client=c) == \
        b"-ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes\r\n"
    assert m.run("REPLCONF", "rdb-only", "2", client=c) == \
        b"-ERR value is out of range, value must between 0 and 1\r\n"
    # Redis 8's rdb-channel option (issue 4)
    assert m.run("REPLCONF", "rdb-channel", "1", client=c) == b"+OK\r\n"
    # ACK from a client that is not a replica, GETACK to a master: no reply at all
    assert m.run("REPLCONF", "ACK", "10", client=c) == b""
    assert m.run("REPLCONF", "GETACK", "*", client=c) == b""
    assert m.run("REPLCONF", client=c) == b"+OK\r\n"
    # a client without a port is named by its peer address
    d = m.core.connection_made("10.0.0.8:41001", "127.0.0.1:6380")
    m.run("REPLCONF", "capa", "eof", client=d)
    assert m.link(d).name() == "10.0.0.8:<unknown-replica-port>"
    assert m.side.links == []


# -- diskless full sync ----------------------------------------------------------------------

def test_diskless_full_sync_bytes_offsets_and_stream_after_first_ack(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    old_id = m.repl.ids.replid
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", OTHER_ID, "1")
    # A fresh replica offers its own id: refused (sync_partial_err), backlog created, new id.
    new_id = m.repl.ids.replid
    assert new_id != old_id and m.repl.backlog is not None
    log = m.log()
    assert "Replica 127.0.0.1:6381 asks for synchronization" in log
    assert (f"Partial resynchronization not accepted: Replication ID mismatch (Replica asked "
            f"for '{OTHER_ID}', my replication IDs are '{old_id}' and "
            f"'0000000000000000000000000000000000000000')") in log
    assert (f"Replication backlog created, my new replication IDs are '{new_id}' and "
            f"'0000000000000000000000000000000000000000'") in log
    assert "Starting BGSAVE for SYNC with target: replicas sockets" in log
    st = m.core.stats
    assert (st.sync_full, st.sync_partial_ok, st.sync_partial_err) == (1, 0, 1)
    (pid,) = m.io.children
    assert m.core.rdb_child_pid == pid and m.core.rdb_child_purpose == "socket"
    assert f"Background RDB transfer started by pid {pid}" in m.log()
    assert m.info()["slave0"] == "ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0"
    # the parent wrote nothing: what is there is the child's preamble (+FULLRESYNC, $EOF:)
    assert m.wire(r) == dict(m.io.children[pid][0])[r] and m.wire(r).startswith(b"+FULLRESYNC")
    # writes while the child runs are held, not written
    m.run("SET", "during:1", "a")
    m.run("INCR", "during:ctr")
    m.io.run_child(pid)
    m.child_exits(pid, 0)
    assert "Background RDB transfer terminated with success" in m.log()
    assert ("Streamed RDB transfer with replica 127.0.0.1:6381 succeeded (socket). Waiting for "
            "REPLCONF ACK from slave to enable streaming") in m.log()
    assert "Synchronization with replica 127.0.0.1:6381 succeeded" in m.log()
    assert m.core.rdb_child_pid == -1
    assert m.core.persistence.saves == 0  # a socket transfer is not a save
    got = parse_full_sync(m.wire(r))
    assert got.kind == "eof" and (got.replid, got.offset) == (new_id, 0)
    assert got.stream == b""  # nothing after the mark until the first ACK
    assert m.info()["slave0"] == "ip=127.0.0.1,port=6381,state=online,offset=0,lag=0"
    m.run("SET", "during:2", "b")
    assert parse_full_sync(m.wire(r)).stream == b""
    m.send(r, "REPLCONF", "ACK", "0")
    got = parse_full_sync(m.wire(r))
    assert got.stream == (cmd("SELECT", "0") + cmd("SET", "during:1", "a")
                          + cmd("INCR", "during:ctr") + cmd("SET", "during:2", "b"))
    rc = ReplicaCore(tmp_path, got.rdb)
    assert rc.aux[b"repl-id"] == new_id.encode() and rc.aux[b"repl-offset"] == b"0"
    rc.apply(got.stream)
    assert rc.digest() == m.digest()
    assert m.repl.master_repl_offset == len(got.stream)
    m.run("SET", "after:1", "c")  # live from now on
    assert parse_full_sync(m.wire(r)).stream.endswith(cmd("SET", "after:1", "c"))
    ev = m.events()
    names = [e["event"] for e in ev]
    assert names[:4] == ["psync_decision", "fullsync_fork", "fullsync_rdb_sent", "replica_online"]
    d = ev[0]
    assert (d["result"], d["reason"], d["req_replid"], d["req_offset"], d["replid"]) == \
        ("full", "replid-mismatch", OTHER_ID, 1, old_id)
    assert ev[1]["mode"] == "diskless" and ev[1]["offset"] == 0
    assert ev[2]["bytes"] == len(m.wire(r)) - len(got.stream) - len(cmd("SET", "after:1", "c"))
    assert len({e["sync_id"] for e in ev[:4]}) == 1
    assert m.core.stats.net_repl_output_bytes == len(m.wire(r))


def test_snapshot_offset_is_fullresync_offset_and_rdb_repl_offset(tmp_path) -> None:
    m = Master(tmp_path)
    first = m.replica("eof", "psync2")
    m.send(first, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    m.io.run_child(pid)
    m.child_exits(pid)
    m.send(first, "REPLCONF", "ACK", "0")
    m.write_many(25)
    offset = m.repl.master_repl_offset
    assert offset > 0
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    pid2 = max(m.io.children)
    m.io.run_child(pid2)
    m.child_exits(pid2)
    got = parse_full_sync(m.wire(r))
    assert got.offset == offset
    rc = ReplicaCore(tmp_path, got.rdb)
    assert rc.aux[b"repl-offset"] == str(offset).encode()
    assert rc.aux[b"repl-id"] == m.repl.ids.replid.encode()
    assert m.core.stats.sync_partial_err == 0  # "?" is not a failed partial attempt
    assert m.events("psync_decision")[-1]["reason"] == "no-history"


def test_diskless_delay_shares_one_snapshot_and_sends_keepalives(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    fill(m)
    a = m.replica("eof", "psync2")
    m.send(a, "PSYNC", OTHER_ID, "1")
    assert "Delay next BGSAVE for diskless SYNC" in m.log()
    assert m.io.children == {}
    m.tick(1000)
    b = m.replica("eof", "psync2")
    m.send(b, "PSYNC", "?", "-1")
    for _ in range(3):
        m.tick(1000)
    assert m.io.children == {}  # a's idle time (4 s) is still under the delay
    assert m.wire(a) == b"\n" * 4 and m.wire(b) == b"\n" * 3
    m.run("SET", "before-fork", "1")  # not held: the snapshot will contain it
    m.tick(1000)
    (pid,) = m.io.children
    targets = m.io.children[pid][0]
    assert [c for c, _ in targets] == [a, b]
    offset = m.repl.master_repl_offset
    m.run("SET", "in-flight", "2")
    # a third replica while the socket child runs must wait for the next snapshot
    c3 = m.replica("eof", "psync2")
    m.send(c3, "PSYNC", "?", "-1")
    assert "Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC" in m.log()
    m.tick(1000)
    assert m.wire(c3) == b"\n"
    # no keepalive into a socket the child writes to: its preamble (at fork) is the last byte
    assert m.wire(a) == b"\n" * 5 + dict(targets)[a]
    m.io.run_child(pid)
    m.child_exits(pid)
    assert list(m.io.children) == [pid]  # the third replica waits for its own delay
    for r in (a, b):
        got = parse_full_sync(m.wire(r))
        assert got.keepalives == (5 if r is a else 4) and got.offset == offset
        m.send(r, "REPLCONF", "ACK", str(offset))
        got = parse_full_sync(m.wire(r))
        rc = ReplicaCore(tmp_path, got.rdb)
        rc.apply(got.stream)
        assert rc.digest() == m.digest()
    assert m.events("fullsync_fork")[0]["sync_id"] != m.events("fullsync_fork")[1]["sync_id"]
    for _ in range(4):
        m.tick(1000)
    pid2 = max(m.io.children)
    assert pid2 != pid
    m.io.run_child(pid2)
    m.child_exits(pid2)
    m.send(c3, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    got = parse_full_sync(m.wire(c3))
    rc = ReplicaCore(tmp_path, got.rdb)
    rc.apply(got.stream)
    assert rc.digest() == m.digest()


def test_diskless_max_replicas_starts_without_waiting_the_delay(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["60"]),
               ("repl-diskless-sync-max-replicas", ["2"]))
    a = m.replica("eof", "psync2")
    m.send(a, "PSYNC", "?", "-1")
    m.tick(100)
    assert m.io.children == {}
    b = m.replica("eof", "psync2")
    m.send(b, "PSYNC", "?", "-1")
    m.tick(100)
    (pid,) = m.io.children
    assert [c for c, _ in m.io.children[pid][0]] == [a, b]


def test_replica_without_eof_capa_gets_a_disk_snapshot(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r = m.replica("psync2")  # no capa eof
    m.send(r, "PSYNC", "?", "-1")
    assert "Starting BGSAVE for SYNC with target: disk" in m.log()
    assert m.core.rdb_child_purpose == "disk"


def test_transport_not_drained_is_not_handed_to_the_child(tmp_path) -> None:
    m = Master(tmp_path)
    r = m.replica("eof", "psync2")
    m.io.busy.add(r.id)
    m.send(r, "PSYNC", "?", "-1")
    assert m.io.children == {}
    assert m.link(r).state is S.WAIT_BGSAVE_START
    m.io.busy.clear()
    m.tick(100)
    assert len(m.io.children) == 1 and m.link(r).state is S.WAIT_BGSAVE_END


# -- disk-based full sync ------------------------------------------------------------------------

def test_disk_full_sync_join_running_bgsave_then_bulk_and_stream(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    fill(m)
    a = m.replica("eof", "psync2")
    m.send(a, "PSYNC", OTHER_ID, "1")
    replid = m.repl.ids.replid
    pid = m.core.rdb_child_pid
    assert pid in m.host.exit_codes and m.core.rdb_child_purpose == "disk"
    log = m.log()
    assert "Starting BGSAVE for SYNC with target: disk" in log
    assert f"Background saving started by pid {pid}" in log
    assert m.wire(a) == b"+FULLRESYNC %s 0\r\n" % replid.encode()  # at once, before the file
    m.run("SET", "during:1", "a")
    # a second replica arrives while the BGSAVE runs: it joins it, with a copy of a's buffer
    b = m.replica("eof", "psync2")
    m.send(b, "PSYNC", "?", "-1")
    assert "Waiting for end of BGSAVE for SYNC" in m.log()
    assert m.wire(b) == b"+FULLRESYNC %s 0\r\n" % replid.encode()
    assert m.events("fullsync_fork")[-1]["reason"] == "attached"
    m.run("INCR", "during:ctr")
    m.tick(1000)  # keepalives while the disk child works
    assert m.wire(a).endswith(b"\r\n\n") and m.wire(b).endswith(b"\r\n\n")
    m.child_exits(pid, 0)
    assert "Background saving terminated with success" in m.log()
    assert m.info()["slave0"] == "ip=127.0.0.1,port=6381,state=send_bulk,offset=0,lag=0"
    m.run("SET", "during:2", "b")
    with open(m.core.persistence.rdb_path(), "rb") as f:
        disk = f.read()
    for r in (a, b):
        m.io.complete_bulk(m.core, r)
        m.flush()
        got = parse_full_sync(m.wire(r))
        assert got.kind == "len" and got.rdb == disk and got.offset == 0
        # the held stream follows the bulk at once (no ACK needed in disk mode); b joining
        # re-armed SELECT (slaveseldb = -1), as in Redis; the cron's first loop PINGs
        assert got.stream == (cmd("SELECT", "0") + cmd("SET", "during:1", "a")
                              + cmd("SELECT", "0") + cmd("INCR", "during:ctr") + PING
                              + cmd("SET", "during:2", "b"))
        rc = ReplicaCore(tmp_path, got.rdb)
        rc.apply(got.stream)
        assert rc.digest() == m.digest()
    assert m.info()["slave1"] == "ip=127.0.0.1,port=6382,state=online,offset=0,lag=0"
    assert m.core.persistence.saves == 1


def test_disk_sync_cannot_join_a_user_bgsave(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    fill(m)
    assert m.run("BGSAVE") == b"+Background saving started\r\n"
    user_pid = m.core.rdb_child_pid
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    assert ("Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC"
            in m.log())
    assert m.wire(r) == b""
    m.child_exits(user_pid, 0)
    # the next BGSAVE starts as soon as the previous child is gone
    assert m.core.rdb_child_pid not in (-1, user_pid)
    assert m.wire(r).startswith(b"+FULLRESYNC ")


def test_losing_the_last_disk_replica_kills_the_child_only_without_save_points(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    pid = m.core.rdb_child_pid
    m.core.client_closed(r)
    assert m.host.killed == [pid] and m.core.rdb_child_pid == -1
    assert "Connection with replica 127.0.0.1:6381 lost." in m.log()
    m2 = Master(tmp_path, ("repl-diskless-sync", ["no"]), ("save", ["3600", "1"]))
    r2 = m2.replica("eof", "psync2")
    m2.send(r2, "PSYNC", "?", "-1")
    m2.core.client_closed(r2)
    assert m2.host.killed == [] and m2.core.rdb_child_pid != -1


def two_diskless_replicas(tmp_path) -> tuple[Master, Client, Client]:  # noqa: ANN001
    """A master with repl-diskless-sync-delay 1 and two replicas that asked for a full sync."""
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["1"]))
    a = m.replica("eof", "psync2")
    b = m.replica("eof", "psync2")
    m.send(a, "PSYNC", "?", "-1")
    m.send(b, "PSYNC", "?", "-1")
    return m, a, b


def test_losing_replicas_mid_socket_transfer_stops_the_child_with_the_last(tmp_path) -> None:
    m, a, b = two_diskless_replicas(tmp_path)
    m.tick(1000)
    m.tick(1000)
    (pid,) = m.io.children
    m.core.client_closed(a)
    assert m.io.dropped == [a.id] and m.host.killed == []
    m.core.client_closed(b)
    assert m.io.dropped == [a.id, b.id] and m.host.killed == [pid]
    assert "Diskless rdb transfer, last replica dropped, killing fork child." in m.log()
    assert m.core.rdb_child_pid == -1 and m.side.snapshots.current is None
    lost = m.events("replica_lost")
    assert [e["reason"] for e in lost] == ["closed", "closed"]


def test_a_replica_the_child_could_not_serve_is_dropped(tmp_path) -> None:
    m, a, b = two_diskless_replicas(tmp_path)
    m.tick(2000)
    (pid,) = m.io.children
    m.io.child_broken.add(b.id)
    m.io.run_child(pid)
    m.child_exits(pid, 0)
    assert m.link(a).state is S.ONLINE
    assert m.link(b).state is S.CLOSED and b in m.host.closed
    assert ("Diskless rdb transfer, write error sending DB to replica: Broken pipe"
            in m.log())


def test_fork_failure_tells_the_waiting_replicas(tmp_path) -> None:
    m = Master(tmp_path)
    m.host.fail_fork = True
    m.io.start_socket_snapshot = lambda *a: (_ for _ in ()).throw(OSError("Cannot fork"))
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    assert m.wire(r) == b"-ERR BGSAVE failed, replication can't continue\r\n"
    assert r.close_after_reply and m.side.links == []
    assert "BGSAVE for replication failed" in m.log()
    assert "Can't save in background: fork: Cannot fork" in m.log()
    d = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    d.host.fail_fork = True
    r2 = d.replica("eof", "psync2")
    d.send(r2, "PSYNC", "?", "-1")
    assert d.wire(r2) == b"-ERR BGSAVE failed, replication can't continue\r\n"


def test_flushall_kills_the_snapshot_and_fails_the_waiting_replica(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    fill(m)
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    pid = m.core.rdb_child_pid
    m.run("FLUSHALL")
    assert m.host.killed == [pid]
    m.tick(100)
    assert "SYNC failed. BGSAVE child returned an error" in m.log()
    assert m.link(r).state is S.CLOSED
    assert m.events("replica_lost")[-1]["reason"] == "snapshot-failed"


def test_rdb_only_replica_gets_the_rdb_and_is_closed(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r = m.replica("eof")
    assert m.run("REPLCONF", "rdb-only", "1", client=r) == b"+OK\r\n"
    m.send(r, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    m.run("SET", "x", "1")
    assert m.link(r).ref is None  # no place in the replication buffer for an rdb-only replica
    m.io.run_child(pid)
    m.child_exits(pid)
    assert m.link(r).state is S.CLOSED and r in m.host.closed
    assert ("RDB transfer completed, rdb only replica (127.0.0.1:6381) should be disconnected "
            "asap") in m.log()
    got = parse_full_sync(m.wire(r))
    assert got.stream == b"" and ReplicaCore(tmp_path, got.rdb).digest() != m.digest()


def test_old_sync_command_gets_no_fullresync_line(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r = m.core.connection_made("127.0.0.1:55555", "127.0.0.1:6380")
    m.send(r, "SYNC")
    assert "Starting BGSAVE for SYNC with target: disk" in m.log()  # no capa eof
    pid = m.core.rdb_child_pid
    m.child_exits(pid, 0)
    m.io.complete_bulk(m.core, r)
    m.flush()
    got = parse_full_sync(m.wire(r), expect_fullresync=False)
    assert ReplicaCore(tmp_path, got.rdb).digest() == m.digest()
    assert m.events("psync_decision")[-1]["reason"] == "replica-requested"
    assert m.core.stats.sync_full == 1 and m.core.stats.sync_partial_err == 0
    m.tick(120_000)  # no ACKs expected from a SYNC replica: no timeout
    assert m.link(r).state is S.ONLINE


def test_psync_refused_with_pending_output_and_ignored_when_already_replica(tmp_path) -> None:
    m = Master(tmp_path)
    r = m.core.connection_made("127.0.0.1:55555", "127.0.0.1:6380")
    r.receive_data(cmd("REPLCONF", "capa", "eof") + cmd("PSYNC", "?", "-1"))
    assert r.data_to_send() == b"+OK\r\n-ERR SYNC and PSYNC are invalid with pending output\r\n"
    r.receive_data(cmd("PSYNC", "?", "-1"))
    m.flush()
    assert m.link(r).state is S.WAIT_BGSAVE_END
    r.receive_data(cmd("PSYNC", "?", "-1"))  # a replica sending PSYNC again: ignored
    assert r.data_to_send() == b"" and m.core.stats.sync_full == 1
    assert m.run("MULTI") == b"+OK\r\n"
    assert m.run("PSYNC", "?", "-1") == b"-ERR Command not allowed inside a transaction\r\n"


# -- partial resync -------------------------------------------------------------------------------


def test_partial_resync_after_link_loss_sends_exact_backlog(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    r, got = online_replica(m)
    rc = ReplicaCore(tmp_path, got.rdb)
    m.run("SET", "before:1", "x")
    rc.apply(parse_full_sync(m.wire(r)).stream)
    acked = m.repl.master_repl_offset
    m.core.client_closed(r)  # CLIENT KILL TYPE replica / connection reset
    assert "Connection with replica 127.0.0.1:6381 lost." in m.log()
    # a MULTI/EXEC unit and more writes while the replica is away
    for args in (("MULTI",), ("SET", "gap:1", "v1"), ("INCR", "gap:ctr"), ("SET", "gap:2", "v2"),
                 ("EXEC",), ("SET", "after-kill:1", "y")):
        m.run(*args)
    expected = b"".join(m.repl.backlog.read_from(acked + 1))
    assert expected.startswith(b"*1\r\n$5\r\nMULTI\r\n")
    r2 = m.replica("eof", "psync2", port=6381)
    m.send(r2, "PSYNC", m.repl.ids.replid, str(acked + 1))
    assert m.wire(r2) == b"+CONTINUE %s\r\n" % m.repl.ids.replid.encode() + expected
    assert (f"Partial resynchronization request from 127.0.0.1:6381 accepted. Sending "
            f"{len(expected)} bytes of backlog starting from offset {acked + 1}.") in m.log()
    st = m.core.stats
    assert (st.sync_full, st.sync_partial_ok, st.sync_partial_err) == (1, 1, 0)
    rc.apply(expected)
    assert rc.digest() == m.digest()
    m.run("SET", "live", "1")
    assert m.wire(r2).endswith(cmd("SET", "live", "1"))
    assert m.info()["slave0"].startswith("ip=127.0.0.1,port=6381,state=online,")
    ev = m.events()
    dec = [e for e in ev if e["event"] == "psync_decision"][-1]
    assert (dec["result"], dec["reason"], dec["req_offset"]) == ("continue", "continue", acked + 1)
    sent = m.events("partial_sent")[-1]
    assert sent["bytes"] == len(expected) and sent["offset"] == acked + 1
    # a replica without capa psync2 gets the bare +CONTINUE
    m.core.client_closed(r2)
    r3 = m.replica("eof", port=6381)
    m.send(r3, "PSYNC", m.repl.ids.replid, str(m.repl.master_repl_offset + 1))
    assert m.wire(r3) == b"+CONTINUE\r\n"


def test_continue_through_replid2_after_promotion_shift(tmp_path) -> None:
    m = Master(tmp_path)
    r, _ = online_replica(m)
    m.write_many(3)
    old_id = m.repl.ids.replid
    off = m.repl.master_repl_offset
    m.core.client_closed(r)
    m.repl.ids.shift(off)  # what a promotion does
    m.run("SET", "new", "1")
    r2 = m.replica("eof", "psync2", port=6381)
    m.send(r2, "PSYNC", old_id, str(off + 1))
    assert m.wire(r2).startswith(b"+CONTINUE %s\r\n" % m.repl.ids.replid.encode())
    # beyond second_repl_offset the old id is not valid
    r3 = m.replica("eof", "psync2")
    m.send(r3, "PSYNC", old_id, str(off + 2))
    assert (f"Partial resynchronization not accepted: Requested offset for second ID was "
            f"{off + 2}, but I can reply up to {off + 1}") in m.log()
    assert m.events("psync_decision")[-1]["reason"] == "replid-mismatch"


def test_offset_before_backlog_and_offset_ahead_force_full_sync(tmp_path) -> None:
    m = Master(tmp_path, ("repl-backlog-size", ["16kb"]))
    r, _ = online_replica(m)
    first_acked = m.repl.master_repl_offset
    m.core.client_closed(r)
    m.write_many(1500)  # ~60 KB: more than the 16 KB backlog and one 20 KB block
    b = m.repl.backlog
    assert b.first_byte_offset > first_acked + 1
    # Redis trims whole head blocks when it adds one: the history exceeds the size by less
    # than the head block, plus what the newest block took since
    assert 16384 < b.histlen <= 16384 + b.head.size + b.tail.used
    r2 = m.replica("eof", "psync2", port=6381)
    m.send(r2, "PSYNC", m.repl.ids.replid, str(first_acked + 1))
    assert ("Unable to partial resync with replica 127.0.0.1:6381 for lack of backlog (Replica "
            f"request was: {first_acked + 1}).") in m.log()
    dec = m.events("psync_decision")[-1]
    assert (dec["result"], dec["reason"]) == ("full", "offset-before-backlog")
    assert dec["gap"] == b.first_byte_offset - (first_acked + 1)
    assert dec["backlog_size"] == 16384 and dec["backlog_histlen"] == b.histlen
    assert m.core.stats.sync_partial_err == 1
    r3 = m.replica("eof", "psync2", port=6382)
    ahead = m.repl.master_repl_offset + 5
    m.send(r3, "PSYNC", m.repl.ids.replid, str(ahead))
    assert ("Warning: replica 127.0.0.1:6382 tried to PSYNC with an offset that is greater than "
            "the master replication offset.") in m.log()
    assert m.events("psync_decision")[-1]["reason"] == "offset-ahead"
    r4 = m.replica("eof", "psync2", port=6383)
    assert m.run("PSYNC", m.repl.ids.replid, "abc", client=r4) == \
        b"-ERR value is not an integer or out of range\r\n"
    assert "Replica 127.0.0.1:6383 asks for synchronization but with a wrong offset" in m.log()


# -- the cron: PING, keepalives, timeouts -----------------------------------------------------

def test_ping_every_period_into_the_stream_and_backlog(tmp_path) -> None:
    m = Master(tmp_path, ("repl-ping-replica-period", ["3"]))
    m.tick(1000)  # cron loop 0 ran without replicas
    r, got = online_replica(m)
    m.take(r)
    off = m.repl.master_repl_offset
    seen = []
    for _ in range(9):
        m.tick(1000)
        m.send(r, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
        seen.append(m.take(r))
    assert seen == [b"", b"", PING, b"", b"", PING, b"", b"", PING]
    assert m.repl.master_repl_offset == off + 3 * len(PING)
    assert b"".join(m.repl.backlog.read_from(off + 1)) == PING * 3
    lag = m.events("replica_lag")
    assert len(lag) == 3 and all(e["lag_bytes"] == len(PING) for e in lag)


def test_replica_timeout_disconnects_a_silent_replica(tmp_path) -> None:
    m = Master(tmp_path, ("repl-timeout", ["5"]))
    r, _ = online_replica(m)
    for _ in range(5):
        m.tick(1000)
    assert m.link(r).state is S.ONLINE
    m.tick(1000)
    assert m.link(r).state is S.CLOSED and r in m.host.closed
    assert "Disconnecting timedout replica (streaming sync): 127.0.0.1:6381" in m.log()
    lost = m.events("replica_lost")[-1]
    assert lost["reason"] == "timeout" and lost["lag_ms"] >= 6000
    assert m.info()["connected_slaves"] == 0


# -- output buffer limits --------------------------------------------------------------------

def test_hard_limit_disconnects_a_replica_that_cannot_keep_up(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "64kb", "0", "0"]),
               ("repl-backlog-size", ["100kb"]))
    r, _ = online_replica(m)
    assert m.side.feeding.hard_limit == 100 * 1024  # a replica limit below the backlog is raised to it
    m.io.stuck.add(r.id)  # the replica reads nothing: its transport buffer grows
    m.write_many(2000)
    assert m.link(r).state is S.ONLINE and m.io.tbuf[r.id] > 64 * 1024
    m.write_many(1000, start=2000)
    assert m.link(r).state is S.CLOSED and r in m.host.closed
    assert m.core.stats.client_outbuf_limit_disconnections == 1
    assert m.info().get("slave0") is None
    lines = [x for x in m.log() if "overcoming of output buffer limits" in x]
    assert len(lines) == 1 and lines[0].startswith("Client id=")
    assert "flags=S" in lines[0]
    lost = m.events("replica_lost")[-1]
    assert lost["reason"] == "output-buffer-limit" and lost["buffer_limit"] == 100 * 1024
    assert lost["buffer_peak"] >= 100 * 1024
    info = dict(__import__("pyrepl.core.info", fromlist=["x"]).section_stats(m.core))
    assert info["client_output_buffer_limit_disconnections"] == 1


def test_soft_limit_needs_its_seconds(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "0", "100kb", "2"]))
    r, _ = online_replica(m)
    m.io.stuck.add(r.id)
    link = m.link(r)
    m.write_many(5000)  # ~200 KB the replica does not read: over the soft limit, clock starts
    assert link.state is S.ONLINE and link.soft_since_ms == m.core.now_ms
    m.tick(1000)
    m.tick(1000)
    assert link.state is S.ONLINE  # 2 s over the limit: not more than soft-seconds yet
    m.tick(1000)
    assert link.state is S.CLOSED
    assert m.events("replica_lost")[-1]["reason"] == "output-buffer-limit"
    # a replica that drains below the soft limit in time stays
    r2, _ = online_replica(m)
    m.io.stuck.add(r2.id)
    m.write_many(5000)
    assert m.link(r2).soft_since_ms >= 0
    m.tick(1000)
    m.io.stuck.discard(r2.id)
    m.io.tbuf[r2.id] = 0  # it read everything, and reads what the buffer kept for it
    m.flush()
    for _ in range(4):
        m.tick(1000)
    assert m.link(r2).state is S.ONLINE and m.link(r2).soft_since_ms == -1


def test_held_stream_over_the_limit_drops_the_waiting_replica_and_child(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "64kb", "0", "0"]),
               ("repl-backlog-size", ["16kb"]))
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    m.write_many(300)
    # the buffer keeps every byte since the fork for it: one 20 KB block so far
    assert m.link(r).state is S.WAIT_BGSAVE_END and m.side.feeding.pending_bytes(m.link(r)) == 20504
    assert m.repl.backlog.pending(m.link(r).ref) > 10000
    m.write_many(2000, start=300)
    assert m.link(r).state is S.CLOSED
    assert m.host.killed == [pid] and m.io.dropped == [r.id]
    assert m.events("replica_lost")[-1]["reason"] == "output-buffer-limit"


def test_stream_goes_to_each_replica_once_per_batch(tmp_path) -> None:
    m = Master(tmp_path)
    reps = [online_replica(m)[0] for _ in range(3)]
    m.flush()
    m.user.receive_data(b"".join(cmd("SET", f"p:{i}", "v") for i in range(50)))
    pend = m.core.pending_flush
    assert sorted(c.id for c in pend) == sorted(c.id for c in reps)  # once each
    # nothing copied per replica: the stream waits in the shared buffer for each of them
    sent = len(cmd("SELECT", "0") + b"".join(cmd("SET", f"p:{i}", "v") for i in range(50)))
    assert all(c.out == [] and m.repl.backlog.pending(m.link(c).ref) == sent for c in reps)
    m.user.data_to_send()
    m.flush()
    tails = {m.take(c)[-200:] for c in reps}
    assert len(tails) == 1


# -- WAIT --------------------------------------------------------------------------------------

def test_wait_blocks_sends_getack_and_unblocks_on_ack(tmp_path) -> None:
    m = Master(tmp_path)
    assert m.run("WAIT", "0", "0") == b":0\r\n"
    assert m.run("WAIT", "1", "-1") == b"-ERR timeout is negative\r\n"
    assert m.run("WAIT", "x", "0") == b"-ERR value is not an integer or out of range\r\n"
    assert m.run("WAIT", "1", "x") == b"-ERR timeout is not an integer or out of range\r\n"
    r, _ = online_replica(m)
    m.take(r)
    m.run("SET", "k", "v")
    woff = m.repl.master_repl_offset
    assert m.user.woff == woff
    # WAIT then a pipelined command: the PING waits behind the blocked WAIT
    m.user.receive_data(cmd("WAIT", "1", "0") + cmd("PING"))
    assert m.user.data_to_send() == b"" and m.user.blocked is not None
    m.flush()
    assert m.take(r) == cmd("SELECT", "0") + cmd("SET", "k", "v") + GETACK
    assert m.repl.master_repl_offset == woff + len(GETACK)
    m.send(r, "REPLCONF", "ACK", str(woff - 1))
    assert m.user.blocked is not None
    m.send(r, "REPLCONF", "ACK", str(woff + len(GETACK)))
    assert m.user.blocked is None
    assert m.take(m.user) == b":1\r\n+PONG\r\n"
    # a second WAIT with nothing new in the stream does not ask again; after a write it does
    m.user.receive_data(cmd("WAIT", "2", "0"))
    m.flush()
    assert m.take(r) == b""
    m.core.unblock(m.user, 1)
    m.run("SET", "k2", "v")
    m.user.receive_data(cmd("WAIT", "2", "0"))
    m.flush()
    assert m.take(r) == cmd("SET", "k2", "v") + GETACK
    m.core.unblock(m.user, 1)
    m.side.acks.waiters.clear()


def test_wait_timeout_multi_and_closed_waiter(tmp_path) -> None:
    m = Master(tmp_path)
    r, _ = online_replica(m)
    m.run("SET", "k", "v")
    m.user.receive_data(cmd("WAIT", "1", "1500"))
    m.flush()
    m.tick(1000)
    assert m.user.blocked is not None
    m.tick(600)
    assert m.user.blocked is None and m.take(m.user) == b":0\r\n"
    # inside MULTI/EXEC WAIT never blocks
    assert m.run("MULTI") == b"+OK\r\n"
    m.run("SET", "k", "w")
    m.run("WAIT", "1", "0")
    assert m.run("EXEC") == b"*2\r\n+OK\r\n:0\r\n"
    # a client that goes away while waiting is forgotten
    other = m.core.connection_made("127.0.0.1:40001", "127.0.0.1:6380")
    m.run("SET", "k", "x", client=other)
    other.receive_data(cmd("WAIT", "1", "0"))
    m.core.client_closed(other)
    m.send(r, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    assert m.side.acks.waiters == []


def test_wait_counts_only_online_replicas_acked_at_the_offset(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    a, _ = online_replica(m)
    b, _ = online_replica(m)
    w = m.replica("eof", "psync2")
    m.send(w, "PSYNC", "?", "-1")  # waiting for a snapshot: does not count
    m.run("SET", "k", "v")
    off = m.repl.master_repl_offset
    m.send(w, "REPLCONF", "ACK", str(off + 100))
    m.send(a, "REPLCONF", "ACK", str(off))
    assert m.side.acks.count_acks(off) == 1
    m.send(b, "REPLCONF", "ACK", str(off))
    assert m.run("WAIT", "2", "0") == b":2\r\n"
    assert m.info()["slave1"] == f"ip=127.0.0.1,port=6382,state=online,offset={off},lag=0"


# -- min-replicas ------------------------------------------------------------------------------

def test_min_replicas_refuse_writes_without_enough_good_replicas(tmp_path) -> None:
    m = Master(tmp_path, ("min-replicas-to-write", ["1"]), ("min-replicas-max-lag", ["3"]))
    assert m.run("SET", "k", "v") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    assert m.run("GET", "k") == b"$-1\r\n"  # reads are fine
    r, _ = online_replica(m)
    assert m.info()["min_slaves_good_slaves"] == 1
    assert m.run("SET", "k", "v") == b"+OK\r\n"
    for _ in range(4):
        m.tick(1000)  # no ACK for 4 s > max lag 3
    assert m.info()["min_slaves_good_slaves"] == 0
    assert m.run("SET", "k", "v") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    m.send(r, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    m.tick(1000)
    assert m.run("SET", "k", "v") == b"+OK\r\n"
    assert m.run("CONFIG", "SET", "min-replicas-to-write", "2") == b"+OK\r\n"
    assert m.run("SET", "k", "v") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    assert m.run("CONFIG", "SET", "min-replicas-max-lag", "0") == b"+OK\r\n"
    assert m.run("SET", "k", "v") == b"+OK\r\n"  # lag 0 disables the check, as Redis


def test_min_replicas_set_at_run_time_reaches_the_dispatch(tmp_path) -> None:
    """The dispatch in C reads min-replicas-to-write from the core (kept in step by the
    config's callback): a CONFIG SET takes effect at the next write, both ways. (20 writes
    each through ``Client.process``, which calls the C ``execute``: a command's first call and
    its sampled ones take the Python path, the rest the C.)"""
    m = Master(tmp_path, ("min-replicas-max-lag", ["3"]))
    online_replica(m)
    c = m.user

    def run_c(*args: str) -> bytes:
        c.reader.feed(cmd(*args))
        c.process()
        return c.data_to_send()

    for i in range(20):
        assert run_c("SET", "k", str(i)) == b"+OK\r\n"
    assert m.run("CONFIG", "SET", "min-replicas-to-write", "2") == b"+OK\r\n"
    assert m.core.min_replicas_to_write == 2
    for _ in range(20):
        assert run_c("SET", "k", "v") == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    assert m.run("CONFIG", "SET", "min-slaves-to-write", "0") == b"+OK\r\n"
    for i in range(20):
        assert run_c("SET", "k", f"w{i}") == b"+OK\r\n"
    assert m.run("GET", "k") == b"$3\r\nw19\r\n"


# -- introspection -----------------------------------------------------------------------------

def test_info_client_list_and_memory(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync-delay", ["5"]))
    r, _ = online_replica(m)
    w = m.replica("eof", "psync2")
    assert m.run("REPLCONF", "ip-address", "10.9.8.7", client=w) == b"+OK\r\n"
    m.send(w, "PSYNC", "?", "-1")
    info = m.info()
    keys = list(info)
    assert keys[:4] == ["role", "connected_slaves", "slave0", "slave1"]
    assert info["connected_slaves"] == 2
    assert info["slave1"] == "ip=10.9.8.7,port=6382,state=wait_bgsave,offset=0,lag=0"
    assert r.kind == "replica" and "S" in r.flags
    lst = m.run("CLIENT", "LIST", "TYPE", "replica").decode()
    assert lst.count("flags=S ") == 2 and f"id={r.id} " in lst
    assert m.run("CLIENT", "LIST", "TYPE", "slave").decode() == lst
    m.io.stuck.add(r.id)
    for i in range(40):
        m.run("SET", f"big{i}", "x" * 50000)   # 2 MB: the stuck replica pins what it lacks
    mem = dict(m.repl.memory_fields())
    b = m.repl.backlog
    lk = m.link(r)
    # Redis 7.0's accounting: the shared buffer over repl-backlog-size is the replicas'
    assert mem["mem_total_replication_buffers"] == b.mem > 2_000_000 - 64 * 1024
    assert mem["mem_clients_slaves"] == b.mem - (1 << 20)
    assert mem["mem_replication_backlog"] == (1 << 20) + 4
    assert b.histlen > (1 << 20) and b.first_byte_offset <= lk.ref.block.repl_offset
    # CLIENT LIST: omem / oll of the stuck replica are its part of the shared buffer
    line = next(ln for ln in m.run("CLIENT", "LIST", "TYPE", "replica").decode().split("\n")
                if f"id={r.id} " in ln)
    assert f" oll={b.blocks(lk.ref)} omem={b.usage(lk.ref)} " in line
    # the one waiting for its snapshot is not fed yet
    assert m.link(w).ref is None
    assert m.run("CLIENT", "KILL", "TYPE", "replica") == b":2\r\n"
    assert m.info()["connected_slaves"] == 0 and m.side.links == []


# -- the stream is exact: any interleaving of writes and sync phases ------------------------------

WRITES = st.lists(st.sampled_from(["set", "incr", "rpush", "hset", "sadd", "zadd", "del",
                                   "select", "multi"]), min_size=0, max_size=12)


@SETTINGS
@given(phases=st.lists(WRITES, min_size=6, max_size=6), disk=st.booleans(),
       second=st.booleans(), pings=st.integers(0, 2))
def test_any_interleaving_of_writes_and_phases_replicates_exactly(tmp_path, phases, disk,
                                                                  second, pings) -> None:
    over = [("repl-ping-replica-period", ["1"])]
    if disk:
        over.append(("repl-diskless-sync", ["no"]))
    m = Master(tmp_path, *over)
    apply_writes(m, phases[0], 0)
    a = m.replica("eof", "psync2")
    m.send(a, "PSYNC", "?", "-1")
    apply_writes(m, phases[1], 1)
    for _ in range(pings):
        m.tick(1000)
    b = None
    if second and disk:  # joins the running BGSAVE
        b = m.replica("eof", "psync2")
        m.send(b, "PSYNC", "?", "-1")
    apply_writes(m, phases[2], 2)
    pid = m.side.snapshots.current.pid
    if not disk:
        m.io.run_child(pid)
    m.child_exits(pid)
    apply_writes(m, phases[3], 3)
    for r in (a, b):
        if r is None:
            continue
        if disk:
            m.io.complete_bulk(m.core, r)
        else:
            m.send(r, "REPLCONF", "ACK", "0")
    m.flush()
    apply_writes(m, phases[4], 4)
    m.tick(1000)
    apply_writes(m, phases[5], 5)
    for r in (a, b):
        if r is None:
            continue
        got = parse_full_sync(m.wire(r))
        rc = ReplicaCore(tmp_path, got.rdb)
        rc.apply(got.stream)
        assert rc.digest() == m.digest()
        # offsets add up: snapshot offset + bytes streamed after it == master_repl_offset
        assert got.offset + len(got.stream) == m.repl.master_repl_offset
        assert int(rc.aux[b"repl-offset"]) == got.offset


def test_child_reported_timeout_disconnects_that_replica(tmp_path) -> None:
    m = Master(tmp_path)
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    # what the child reports for a replica that stopped reading for repl-timeout
    m.io.results[pid] = {r.id: (False, 65536, "timeout")}
    m.child_exits(pid, 1)
    assert "Background transfer error" in m.log()
    assert "Disconnecting timedout replica (full sync): 127.0.0.1:6381" in m.log()
    assert m.link(r).state is S.CLOSED
    assert m.events("replica_lost")[-1]["reason"] == "timeout"
    # a child that died without reporting fails every replica it served
    r2 = m.replica("eof", "psync2")
    m.send(r2, "PSYNC", "?", "-1")
    pid2 = max(m.io.children)
    m.child_exits(pid2, -9)
    assert "Background transfer terminated by signal 9" in m.log()
    assert "SYNC failed. BGSAVE child returned an error" in m.log()
    assert m.link(r2).state is S.CLOSED


def test_limits_are_checked_once_per_new_block_not_per_write(tmp_path) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "1mb", "0", "0"]))
    r, _ = online_replica(m)
    calls = []
    real = m.io.buffered
    m.io.buffered = lambda c: calls.append(c.id) or real(c)
    b = m.repl.backlog
    first = b.tail.id if b.tail is not None else -1
    m.user.receive_data(b"".join(cmd("SET", f"k:{i}", f"value-{i}") for i in range(2000)))
    m.user.data_to_send()
    assert 3 <= b.tail.id - first == len(calls) <= 5   # ~80 KB: a check per 20 KB block
    m.io.stuck.add(r.id)
    m.write_many(30000, start=2000)  # ~1.2 MB piles up: the drop
    assert m.link(r).state is S.CLOSED


OPS = st.lists(st.one_of(st.tuples(st.just("write"), st.integers(1, 40_000)),
                         st.tuples(st.just("flush"), st.just(0)),
                         st.tuples(st.just("drain"), st.integers(0, 100))),
               min_size=1, max_size=60)


@SETTINGS
@given(ops=OPS)
def test_hard_limit_is_detected_at_the_exact_write_that_crosses_it(tmp_path, ops) -> None:
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "1mb", "0", "0"]))
    r, _ = online_replica(m)
    m.io.stuck.add(r.id)  # what the shell writes stays in the transport until drained
    link = m.link(r)
    b = m.repl.backlog
    for op, arg in ops:
        if op == "write":
            # Redis checks when a block is added: the replica's part of the buffer, from its
            # block to the end of the newest one, plus what its transport holds
            blk, tail_id = link.ref.block, b.tail.id if b.tail is not None else -1
            m.user.receive_data(cmd("SET", "k", "x" * arg))
            m.user.data_to_send()
            t = b.tail
            blk = blk or b.head      # (attached at the first write)
            used = (t.repl_offset + t.size - blk.repl_offset + 64 * (t.id - blk.id + 1)
                    + m.io.tbuf.get(r.id, 0) + r.pending_output())
            if t.id != tail_id and used >= 1024 * 1024:
                assert link.state is S.CLOSED
                return
            assert link.state is S.ONLINE
        elif op == "flush":
            m.flush()
        else:
            m.io.tbuf[r.id] = m.io.tbuf.get(r.id, 0) * arg // 100


def test_config_set_of_the_limit_applies_to_connected_replicas(tmp_path) -> None:
    m = Master(tmp_path)  # default: replica 256mb 64mb 60
    r, _ = online_replica(m)
    m.io.stuck.add(r.id)
    m.write_many(40000)  # ~1.6 MB pending: fine under 256 MB
    assert m.link(r).state is S.ONLINE
    assert m.run("CONFIG", "SET", "client-output-buffer-limit", "replica 1mb 0 0") == b"+OK\r\n"
    m.tick(100)
    assert m.link(r).state is S.CLOSED
    assert m.core.stats.client_outbuf_limit_disconnections == 1


@SETTINGS
@given(before=WRITES, during=WRITES, gap=WRITES, after=WRITES, cut=st.integers(0, 100))
def test_partial_resync_continues_exactly_where_the_replica_stopped(tmp_path, before, during,
                                                                   gap, after, cut) -> None:
    m = Master(tmp_path)
    apply_writes(m, before, 0)
    r, got = online_replica(m)
    apply_writes(m, during, 1)
    got = parse_full_sync(m.wire(r))
    # the link dies after the replica applied a prefix of the stream (whole commands only)
    rc = ReplicaCore(tmp_path, got.rdb)
    cmds = split_commands(got.stream)
    want = len(cmds) * cut // 100
    keep = 0  # a replica's offset moves past a transaction only at its EXEC
    in_multi = False
    for i, c in enumerate(cmds[:want]):
        in_multi = (in_multi or c == cmd("MULTI")) and c != cmd("EXEC")
        if not in_multi:
            keep = i + 1
    rc.apply(b"".join(cmds[:keep]))
    offset = got.offset + rc.applied
    m.core.client_closed(r)
    apply_writes(m, gap, 2)
    r2 = m.replica("eof", "psync2", port=6381)
    m.send(r2, "PSYNC", m.repl.ids.replid, str(offset + 1))
    data = m.wire(r2)
    head = b"+CONTINUE %s\r\n" % m.repl.ids.replid.encode()
    assert data.startswith(head)
    rc.apply(data[len(head):])
    apply_writes(m, after, 3)
    rc.apply(m.wire(r2)[len(data):])
    assert rc.digest() == m.digest()
    assert offset + len(m.wire(r2)) - len(head) == m.repl.master_repl_offset
    assert m.core.stats.sync_partial_ok == 1 and m.core.stats.sync_full == 1


def split_commands(stream: bytes) -> list[bytes]:
    """The stream as the list of its commands' exact bytes."""
    out = []
    pos = 0
    while pos < len(stream):
        eol = stream.index(b"\r\n", pos)
        n = int(stream[pos + 1:eol])
        end = eol + 2
        for _ in range(n):
            eol = stream.index(b"\r\n", end)
            end = eol + 2 + int(stream[end + 1:eol]) + 2
        out.append(stream[pos:end])
        pos = end
    return out


def test_a_reply_to_a_streaming_replica_drops_it_as_redis(tmp_path) -> None:
    """Redis 7.0 never writes a reply on a replication link: a replica whose command produced
    one is logged and dropped (its stream must not be interleaved with replies)."""
    m = Master(tmp_path)
    r, _ = online_replica(m)
    m.run("SET", "a", "1")
    before = bytes(m.wire(r))
    m.send(r, "REPLCONF", "ACK", str(m.repl.master_repl_offset))   # no reply: fine
    assert m.link(r).state is S.ONLINE
    m.send(r, "PING")
    assert m.link(r).state is S.CLOSED and r in m.host.closed
    assert any("Replica generated a reply to command 'ping', disconnecting it: id=" in ln
               for ln in m.log())
    assert m.events("replica_lost")[-1]["reason"] == "invalid-use"
    assert bytes(m.wire(r)) == before and r.out == []   # +PONG never reached the socket
