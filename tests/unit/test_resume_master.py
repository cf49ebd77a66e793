"""A cut full sync that resumes, master side (pyrepl.replication.master.resume), on the real
core with ``WireIO`` for the OS (tests/support/master_side.py).

A replica that said ``capa pyrepl-resume`` gets its snapshot's id in +FULLRESYNC; its link is
cut halfway through the payload; its new connection asks ``REPLCONF resume <id>
resume-offset <n>`` and gets ``$RESUME:<n>`` and the payload from there, then the stream from
the snapshot offset. What it had before the cut and what it got after are put together and
loaded by an independent core: the digest must be the master's. A Redis replica (no capa)
never sees the id; an unknown id, an offset past the copy, a changed history are refused.
"""

from __future__ import annotations

import pytest

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.replication.master.states import S
from tests.support.cores import cmd
from tests.support.master_side import Master, ReplicaCore, fill

RESUME = "pyrepl-resume"


def _split_preamble(wire: bytes) -> tuple[str, int, str, bytes]:
    """+FULLRESYNC <replid> <offset> <id>\\r\\n then the rest."""
    line, rest = wire.split(b"\r\n", 1)
    parts = line.decode().split()
    assert parts[0] == "+FULLRESYNC" and len(parts) == 4, line
    return parts[1], int(parts[2]), parts[3], rest


def _resume(m: Master, rid: str, have: int):  # noqa: ANN202
    c = m.replica("eof", "psync2", RESUME)
    c.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(have)))
    assert c.data_to_send() == b"+OK\r\n"
    m.send(c, "PSYNC", "?", "-1")
    return c


def _resumed_stream(m: Master, c, snap: tuple[str, int, str], have: int,  # noqa: ANN001
                    payload: bytes) -> bytes:
    """What a resumed connection got: the same +FULLRESYNC, $RESUME:<have> and the payload
    from ``have``; returns the stream that followed."""
    r2, off2, rid2, rest = _split_preamble(m.wire(c))
    assert (r2, off2, rid2) == snap
    head = b"$RESUME:%d\r\n" % have
    assert rest.startswith(head + payload[have:])
    return rest[len(head) + len(payload) - have:]


def _load(tmp_path, m: Master, payload: bytes, stream: bytes, mark: bytes | None) -> None:  # noqa: ANN001
    rdb = payload[:-40] if mark is not None else payload
    if mark is not None:
        assert payload[-40:] == mark
    rc = ReplicaCore(tmp_path, rdb)
    rc.apply(stream)
    assert rc.digest() == m.digest()


@pytest.mark.parametrize("cut_at", [0.0, 0.5, 1.0])
def test_a_diskless_sync_cut_resumes_from_the_byte_it_stopped_at(tmp_path, cut_at) -> None:  # noqa: ANN001
    m = Master(tmp_path)
    fill(m)
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    targets, rdb, trailer = m.io.children[pid]
    replid, offset, rid, rest = _split_preamble(dict(targets)[a])
    assert rest.startswith(b"$EOF:") and offset == m.repl.master_repl_offset
    payload = rdb + trailer
    m.run("SET", "after-fork", "1")          # the stream the replica needs after the snapshot
    have = int(len(payload) * cut_at)
    m.core.client_closed(a)                  # cut: it got ``have`` payload bytes
    assert m.host.killed == []               # the child goes on: its copy is kept
    assert any(f"Full sync of replica 127.0.0.1:6381 cut: snapshot {rid}" in ln
               for ln in m.log())
    m.run("INCR", "during-cut")
    m.io.run_child(pid)
    m.child_exits(pid)
    b = _resume(m, rid, have)
    link = m.link(b)
    assert link.state is S.SEND_BULK and link.resume_from == have
    # its only cut sync came back: the held stream is the link's now, the copy stays while sent
    assert m.side.resume.kept == {} and m.io.kept_size(rid) > 0
    m.run("SET", "after-resume", "2")
    m.io.complete_bulk(m.core, b)
    m.flush()
    assert link.state is S.ONLINE
    m.tick(1000)
    assert m.io.kept_ids() == []       # sent: the copy goes at the cron
    stream = _resumed_stream(m, b, (replid, offset, rid), have, payload)
    _load(tmp_path, m, payload, stream, trailer)
    dec = m.events("psync_decision")[-1]
    assert dec["result"] == "resume" and dec["offset"] == have


def test_a_disk_sync_cut_while_sending_resumes_from_the_kept_file(tmp_path) -> None:
    m = Master(tmp_path, ("repl-diskless-sync", ["no"]))
    fill(m)
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    replid, offset, rid, _ = _split_preamble(m.take(a))
    m.run("SET", "during-bgsave", "1")
    m.child_exits(m.core.rdb_child_pid, 0)
    assert m.link(a).state is S.SEND_BULK
    with open(m.core.persistence.rdb_path(), "rb") as f:
        disk = f.read()
    m.core.client_closed(a)                  # cut in the middle of the file
    m.run("SET", "k", "v")                   # a later BGSAVE replaces the file: the copy stays
    m.run("BGSAVE")
    m.child_exits(m.core.rdb_child_pid, 0)
    have = len(disk) // 3
    b = _resume(m, rid, have)
    m.io.complete_bulk(m.core, b)
    m.flush()
    _, _, _, rest = _split_preamble(m.wire(b))
    head = b"$RESUME:%d\r\n" % have
    assert rest.startswith(head)
    got = rest[len(head):]
    assert got[:len(disk) - have] == disk[have:]
    _load(tmp_path, m, disk, got[len(disk) - have:], None)


def test_resume_is_only_for_replicas_that_asked_and_within_what_is_kept(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    redis_like = m.replica("eof", "psync2")
    m.send(redis_like, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    pre = dict(m.io.children[pid][0])[redis_like]
    assert pre.split(b"\r\n")[0].count(b" ") == 2     # +FULLRESYNC <replid> <offset>: no id
    m.core.client_closed(redis_like)
    assert m.host.killed == [pid]            # nothing to keep: the child stops, as Redis's
    c = m.replica("eof", "psync2", RESUME)
    c.receive_data(cmd("REPLCONF", "resume", "0" * 40, "resume-offset", "10"))
    assert c.data_to_send() == b"-ERR no snapshot %s to resume\r\n" % (b"0" * 40)
    # a real cut, then an offset past the copy, then a changed history
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    pid = max(m.io.children)
    _, _, rid, _ = _split_preamble(dict(m.io.children[pid][0])[a])
    m.core.client_closed(a)
    m.io.run_child(pid)
    m.child_exits(pid)
    size = m.io.kept_size(rid)
    assert size > 0
    c.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(size + 1)))
    assert c.data_to_send() == (b"-ERR resume offset %d is out of the snapshot's copy\r\n"
                                % (size + 1))
    m.run("REPLICAOF", "NO", "ONE")           # (a no-op on a master: the history is the same)
    assert rid in m.side.resume.kept
    m.side.disconnect_replicas()              # what REPLICAOF does to the history
    assert rid not in m.side.resume.kept and m.io.kept_size(rid) == -1


def test_what_is_kept_is_freed_after_the_window(tmp_path) -> None:
    m = Master(tmp_path, ("repl-full-sync-resume-window", ["5"]))
    fill(m)
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    _, _, rid, _ = _split_preamble(dict(m.io.children[pid][0])[a])
    m.core.client_closed(a)
    m.io.run_child(pid)
    m.child_exits(pid)
    for _ in range(5):
        m.tick(1000)
    assert rid in m.side.resume.kept
    m.tick(1100)
    assert rid not in m.side.resume.kept and m.io.kept_ids() == []
    assert any("freed (no replica came back in time)" in ln for ln in m.log())


def test_window_zero_offers_nothing(tmp_path) -> None:
    m = Master(tmp_path, ("repl-full-sync-resume-window", ["0"]))
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    pre = dict(m.io.children[pid][0])[a]
    assert pre.split(b"\r\n")[0].count(b" ") == 2
    assert m.io.kept == {}


def test_a_sync_dropped_at_the_output_limits_is_not_kept(tmp_path) -> None:
    # its stream could not be held within the limits: the next sync is a new one, as Redis's
    m = Master(tmp_path, ("client-output-buffer-limit", ["replica", "64kb", "0", "0"]),
               ("repl-backlog-size", ["16kb"]))
    r = m.replica("eof", "psync2", RESUME)
    m.send(r, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    m.write_many(2300)
    assert m.link(r).state is S.CLOSED
    assert m.events("replica_lost")[-1]["reason"] == "output-buffer-limit"
    assert m.side.resume.kept == {} and m.host.killed == [pid]


def test_a_resume_that_waits_for_the_copy_gets_it_when_the_child_ends(tmp_path) -> None:
    m = Master(tmp_path)
    fill(m)
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    targets, rdb, trailer = m.io.children[pid]
    _, _, rid, _ = _split_preamble(dict(targets)[a])
    have = len(rdb) // 2
    m.core.client_closed(a)
    b = _resume(m, rid, have)              # the child is still writing the copy
    assert m.link(b).state is S.WAIT_BGSAVE_END and m.side.resume.kept == {}
    m.tick(1000)
    assert m.wire(b).endswith(b"\r\n\n")    # kept alive meanwhile
    m.io.run_child(pid)
    m.child_exits(pid)
    assert m.link(b).state is S.SEND_BULK
    m.io.complete_bulk(m.core, b)
    m.flush()
    _, _, _, rest = _split_preamble(m.wire(b))
    rest = rest.lstrip(b"\n")
    head = b"$RESUME:%d\r\n" % have
    assert rest.startswith(head)
    payload = rdb + trailer
    got = rest[len(head):]
    _load(tmp_path, m, payload[:have] + got[:len(payload) - have], got[len(payload) - have:],
          trailer)


def _rdb_channel_sync(m: Master):  # noqa: ANN202
    """A pyrepl replica's rdb-channel sync (Redis 8's dialect, capa pyrepl-resume on the main
    connection), forked: (main, rdb channel, child pid, (replid, offset, snapshot id) of its
    +FULLRESYNC, the payload's RDB, its trailer)."""
    main = m.replica("eof", "psync2", "rdb-channel-repl", RESUME)
    m.send(main, "PSYNC", "?", "-1")
    line = m.take(main)
    assert line.startswith(b"+RDBCHANNELSYNC ")
    rdb = m.connect()
    m.feed(rdb, cmd("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                    "main-ch-client-id", int(line.split()[1]), "listening-port", 6381))
    assert m.take(rdb) == b"+OK\r\n"
    m.feed(rdb, cmd("PSYNC", "?", "-1"))
    m.tick(6000)          # (repl-diskless-sync-delay)
    (pid,) = m.io.children
    targets, rdb_bytes, trailer = m.io.children[pid]
    replid, offset, rid, rest = _split_preamble(dict(targets)[rdb])
    assert rest.startswith(b"$EOF:")
    return main, rdb, pid, (replid, offset, rid), rdb_bytes, trailer


@pytest.mark.parametrize("lost", ["rdb", "main"])
@pytest.mark.parametrize("kept", [0.0, 0.4, 1.0])
def test_a_cut_rdb_channel_sync_resumes_with_the_stream_the_replica_kept(
        tmp_path, lost: str, kept: float) -> None:  # noqa: ANN001
    m = Master(tmp_path)
    fill(m)
    main, rdb, pid, snap, rdb_bytes, trailer = _rdb_channel_sync(m)
    _, offset, rid = snap
    payload = rdb_bytes + trailer
    m.run("SET", "during", "1")
    m.run("INCR", "during-ctr")
    streamed = m.take(main)                 # the main channel streams while the RDB goes
    assert streamed
    j = int(len(streamed) * kept)           # what the replica's buffer got of it
    have = len(payload) // 2
    m.core.client_closed(rdb if lost == "rdb" else main)
    assert main.closed and rdb.closed and m.host.killed == []
    assert m.info()["resume_kept_snapshots"] == 1
    m.run("SET", "during-cut", "2")
    m.io.run_child(pid)
    m.child_exits(pid)
    c = m.replica("eof", "psync2", RESUME)
    c.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(have),
                       "stream-offset", str(offset + 1 + j)))
    assert c.data_to_send() == b"+OK\r\n"
    m.send(c, "PSYNC", "?", "-1")
    link = m.link(c)
    assert link.state is S.SEND_BULK and link.mode == "rdb-channel"
    assert m.info()["resume_kept_snapshots"] == 0      # (its only cut sync came back)
    stats = m.core.stats
    assert (stats.repl_resumed_syncs, stats.repl_resumed_bytes, stats.sync_full) == (1, have, 1)
    m.io.complete_bulk(m.core, c)
    m.flush()
    assert link.state is S.ONLINE
    stream = _resumed_stream(m, c, snap, have, payload)
    _load(tmp_path, m, payload, streamed[:j] + stream, trailer)
    assert any(f"stream from offset {offset + 1 + j}" in ln for ln in m.log())


def test_a_stream_offset_not_kept_is_refused(tmp_path) -> None:  # noqa: ANN001
    m = Master(tmp_path)
    fill(m)
    _, rdb, _, (_, offset, rid), _, _ = _rdb_channel_sync(m)
    m.core.client_closed(rdb)
    c = m.replica("eof", "psync2", RESUME)
    for bad in (offset, m.repl.master_repl_offset + 2):
        c.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", "10",
                           "stream-offset", str(bad)))
        assert c.data_to_send().startswith(b"-ERR stream offset %d is not kept" % bad)


def test_an_rdb_channel_closed_after_its_whole_rdb_is_not_a_cut(tmp_path) -> None:  # noqa: ANN001
    m = Master(tmp_path)
    fill(m)
    main, rdb, pid, _, _, _ = _rdb_channel_sync(m)
    m.io.run_child(pid)
    m.core.client_closed(rdb)               # the replica closes it after the mark: done
    m.child_exits(pid)
    assert m.link(main).state is S.ONLINE
    assert m.side.resume.kept == {} and not any(" cut: snapshot" in ln for ln in m.log())
    m.tick(1000)
    assert m.io.kept_ids() == []            # the child's copy goes too


def test_a_diskless_copy_that_starts_after_the_replica_s_byte_is_refused(tmp_path) -> None:  # noqa: ANN001
    """The child holds only its last repl-full-sync-resume-tail bytes in memory: its copy
    starts that far back from the cut (``copy_base`` here). A replica that had less resyncs in
    full; one within the copy gets the rest from its byte."""
    m = Master(tmp_path)
    fill(m)
    m.io.copy_base = base = 100
    a = m.replica("eof", "psync2", RESUME)
    m.send(a, "PSYNC", "?", "-1")
    (pid,) = m.io.children
    targets, rdb, trailer = m.io.children[pid]
    _, _, rid, _ = _split_preamble(dict(targets)[a])
    m.core.client_closed(a)
    # back before the child ended: the copy's base is not known, so a later byte is taken on
    # trust and judged when the copy is whole
    early = m.replica("eof", "psync2", RESUME)
    early.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(base - 1)))
    assert early.data_to_send() == b"+OK\r\n"
    m.send(early, "PSYNC", "?", "-1")
    assert m.link(early).state is S.WAIT_BGSAVE_END
    m.io.run_child(pid)
    m.child_exits(pid)
    assert early.closed            # its byte was not in the copy: it will resync in full
    assert any("does not hold byte 99" in ln for ln in m.log())
    # the copy is whole now: judged at once
    c = m.replica("eof", "psync2", RESUME)
    c.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(base - 1)))
    assert c.data_to_send().startswith(b"-ERR resume offset 99 is out of the snapshot's copy")
    d = m.replica("eof", "psync2", RESUME)
    d.receive_data(cmd("REPLCONF", "resume", rid, "resume-offset", str(base + 50)))
    assert d.data_to_send() == b"+OK\r\n"
    m.send(d, "PSYNC", "?", "-1")
    m.io.complete_bulk(m.core, d)
    m.flush()
    _, _, _, rest = _split_preamble(m.wire(d))
    head = b"$RESUME:%d\r\n" % (base + 50)
    assert rest.startswith(head + (rdb + trailer)[base + 50:])
