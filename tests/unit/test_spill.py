"""The spill of a full sync's pending stream to disk (``repl-full-sync-spill-threshold``):
the on-disk queue (pyrepl/replication/spill.py), the replica's full-sync buffer that uses it
(a model of bytes in, bytes out: every byte once, in order, with the counters the INFO fields
and events report), a whole rdb-channel sync whose buffer spilled, and the master's side: a
classic full sync (diskless and disk) whose writes pass the replica output limit, dropped
without the spill (Redis's loop) and completed with it, the replica equal to the master."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl.core.info import section_stats as info_stats
from pyrepl.replication.replica.rdbchannel import BLOCK_SIZE, FullSyncBuffer
from pyrepl.replication.spill import SpillFile
from tests.support.rdbchannel_replica import (
    MARK,
    Node,
    big_stream,
    expected_digest,
    snapshot,
    to_rdbchannel,
)

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- the queue on disk ---------------------------------------------------------------------------

def test_the_file_is_gone_from_dir_at_once_and_its_bytes_come_out_in_order(tmp_path) -> None:
    q = SpillFile(str(tmp_path), "t")
    assert os.listdir(tmp_path) == []          # unlinked: a crash leaves nothing behind
    q.append(b"hello ")
    q.append(memoryview(b"world"))
    assert (q.pending, q.written, q.consumed, q.peak) == (11, 11, 0, 11)
    assert q.read(3) == b"hel" and q.read(100) == b"lo world" and q.read(5) == b""
    assert (q.pending, q.written, q.consumed) == (0, 11, 11)
    assert os.fstat(q.fd).st_size == 0         # drained: truncated, its space given back
    q.append(b"again")
    assert q.read(5) == b"again"
    q.close()
    q.close()                                   # (twice is harmless)


@given(ops=st.lists(st.one_of(st.binary(min_size=1, max_size=300).map(lambda b: ("w", b)),
                              st.integers(min_value=1, max_value=400).map(lambda n: ("r", n))),
                    max_size=60))
@SETTINGS
def test_the_queue_is_a_fifo_of_bytes(tmp_path, ops) -> None:
    q = SpillFile(str(tmp_path), "fifo")
    model = bytearray()
    peak = 0
    try:
        for op, arg in ops:
            if op == "w":
                q.append(arg)
                model += arg
                peak = max(peak, len(model))
            else:
                got = q.read(arg)
                assert got == bytes(model[:arg])
                del model[:arg]
            assert q.pending == len(model) and q.peak == peak
            assert q.written - q.consumed == q.pending
    finally:
        q.close()


# -- the replica's full-sync buffer ----------------------------------------------------------------

def drain(buf: FullSyncBuffer) -> bytes:
    out = []
    while (b := buf.pop_block()) is not None:
        out.append(b)
    return b"".join(out)


def test_past_the_threshold_the_rest_goes_to_disk_and_reading_never_stops(tmp_path) -> None:
    buf = FullSyncBuffer(limit=4 * BLOCK_SIZE, spill_at=2 * BLOCK_SIZE, spill_dir=str(tmp_path))
    data = bytes(range(256)) * (BLOCK_SIZE // 128)      # ~2 blocks a piece
    stops = [buf.append(data) for _ in range(10)]
    assert stops == [False] * 10                         # (without spill: stops at the limit)
    assert buf.size == 2 * BLOCK_SIZE                    # memory: the first piece only
    assert buf.spilled == buf.on_disk == 9 * len(data)
    assert buf.used == 10 * len(data) and buf.peak == 2 * BLOCK_SIZE
    assert drain(buf) == data * 10
    assert buf.used == 0 and buf.on_disk == 0 and buf.size == 0
    buf.close()


def test_a_threshold_above_the_limit_spills_at_the_limit(tmp_path) -> None:
    buf = FullSyncBuffer(limit=BLOCK_SIZE, spill_at=8 * BLOCK_SIZE, spill_dir=str(tmp_path))
    assert buf.spill_at == BLOCK_SIZE
    off = FullSyncBuffer(limit=BLOCK_SIZE)
    chunk = b"x" * (BLOCK_SIZE // 2)
    assert [off.append(chunk) for _ in range(3)] == [False, False, True]   # Redis: stops
    assert [buf.append(chunk) for _ in range(3)] == [False, False, False]
    assert buf.spilled == len(chunk)
    buf.close()


@given(ops=st.lists(st.one_of(st.integers(min_value=1, max_value=3 * BLOCK_SIZE // 2)
                              .map(lambda n: ("append", n)),
                              st.just(("pop", 0))), max_size=40),
       spill_blocks=st.integers(min_value=0, max_value=4),
       limit_blocks=st.integers(min_value=0, max_value=6))
@SETTINGS
def test_the_buffer_model_every_byte_once_in_order(tmp_path, ops, spill_blocks,
                                                  limit_blocks) -> None:
    """Appends and pops in any order, any threshold and limit: the bytes come out as they went
    in; memory stays within the threshold plus one append (spilling never stops reading);
    used, total and spilled add up."""
    buf = FullSyncBuffer(limit=limit_blocks * BLOCK_SIZE, spill_at=spill_blocks * BLOCK_SIZE,
                         spill_dir=str(tmp_path))
    model = bytearray()
    out = bytearray()
    seq = 0
    try:
        for op, n in ops:
            if op == "append":
                data = bytes([seq % 251]) * n   # (each append its own byte: order shows)
                seq += 1
                stop = buf.append(data)
                model += data
                if buf.spill_at:
                    assert not stop
                    assert sum(map(len, buf.blocks)) <= buf.spill_at
                else:
                    assert buf.spilled == 0 and stop == buf.full()
            else:
                b = buf.pop_block()
                if b is None:
                    assert not model[len(out):]
                else:
                    out += b
            assert buf.used == len(model) - len(out)
            assert buf.used == sum(map(len, buf.blocks)) + buf.on_disk
            assert buf.total == len(model)
        out += drain(buf)
        assert bytes(out) == bytes(model)
        assert buf.on_disk == 0 and buf.used == 0
    finally:
        buf.close()


# -- a whole sync whose buffer spilled -------------------------------------------------------

def test_an_rdb_channel_sync_whose_buffer_spilled_applies_every_byte(tmp_path) -> None:
    n = Node(("replica-full-sync-buffer-limit", ["4mb"]),
             ("repl-full-sync-spill-threshold", ["1mb"]), ("dir", [str(tmp_path)]))
    fds = open_fds()
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n")
    stream = big_stream(12_000)                     # ~12 MB: three times the limit
    for i in range(0, len(stream), 65536):
        n.main(stream[i:i + 65536])
    assert n.io.token not in n.io.paused            # spilling: reading never stopped
    info = n.info()
    assert info["replica_full_sync_buffer_size"] <= 2 * BLOCK_SIZE
    assert info["replica_full_sync_buffer_on_disk"] > len(stream) - 2 * BLOCK_SIZE
    assert info["replica_full_sync_buffer_spilled"] == info["replica_full_sync_buffer_on_disk"]
    assert os.listdir(tmp_path) == [] and open_fds() == fds + 1   # the one spill file
    n.rdb(b"$EOF:" + MARK + b"\r\n" + snapshot(0, "a" * 40) + MARK)
    for _ in range(10_000):
        if not n.side.channel.buffering:
            break
        n.drain()
    assert not n.side.channel.buffering
    assert n.digest() == expected_digest(stream)
    assert n.side.stream.master.reploff == len(stream)
    info = n.info()
    assert info["replica_full_sync_buffer_on_disk"] == 0
    assert info["replica_full_sync_buffer_spilled"] > 0
    assert open_fds() == fds                        # the file is closed
    drained = [e for e in n.events() if e["event"] == "buffer_drained"]
    assert drained[-1]["spilled"] == info["replica_full_sync_buffer_spilled"]
    assert drained[-1]["bytes"] == len(stream)
    assert any("reached the spill threshold" in x for x in n.logs())


def test_without_the_threshold_the_sync_stops_reading_at_the_limit(tmp_path) -> None:
    n = Node(("replica-full-sync-buffer-limit", ["1mb"]), ("dir", [str(tmp_path)]))
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n")
    n.main(big_stream(3000))
    assert n.io.token in n.io.paused
    assert n.info()["replica_full_sync_buffer_spilled"] == 0


@pytest.mark.parametrize("when", ["append", "pop"])
def test_a_spill_file_that_fails_fails_the_sync_and_nothing_is_applied(tmp_path, when,
                                                                         monkeypatch) -> None:
    n = Node(("repl-full-sync-spill-threshold", ["1mb"]), ("dir", [str(tmp_path)]))
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n")
    before = n.digest()
    stream = big_stream(3000)
    if when == "append":
        monkeypatch.setattr(SpillFile, "append", _enospc)
        n.main(stream)
        assert not n.side.channel.buffering
        failed = [e for e in n.events() if e["event"] == "sync_failed"]
        assert failed[-1]["reason"] == "spill-error"
        assert "No space left on device" in failed[-1]["error"]
        assert n.digest() == before
    else:
        n.main(stream)
        monkeypatch.setattr(SpillFile, "read", _enospc)
        n.rdb(b"$EOF:" + MARK + b"\r\n" + snapshot(0, "a" * 40) + MARK)
        for _ in range(100):
            n.drain()
        assert not n.side.channel.buffering
        downs = [e for e in n.events() if e["event"] == "link_down"]
        assert downs[-1]["reason"] == "spill-error"
    assert any("Replication buffer spill file: No space left on device" in x
               for x in n.logs())


def _enospc(self, *args: object) -> None:
    raise OSError(28, "No space left on device")


# -- the master: a replica's pending stream during its full sync -------------------------------

def _writes(m, n: int, tag: str, size: int = 400) -> None:  # noqa: ANN001
    for i in range(n):
        m.run("SET", f"{tag}:{i % 1500}", f"{i:08d}" * (size // 8))


def _master(tmp_path, threshold: str, *extra: tuple[str, list[str]]):  # noqa: ANN001, ANN202
    from tests.support.master_side import Master

    return Master(tmp_path, ("repl-backlog-size", ["16kb"]),
                  ("client-output-buffer-limit", ["replica", "256kb", "0", "0"]),
                  ("repl-full-sync-spill-threshold", [threshold]), *extra)


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_a_full_sync_past_the_limits_spills_and_the_replica_gets_every_byte(
        tmp_path, diskless) -> None:
    """Without spill the limits drop the replica (Redis's loop); with it the sync ends with
    the replica equal to the master, the master's buffer bounded, the bytes counted."""
    from tests.support.master_side import ReplicaCore, parse_full_sync

    for threshold in ("0", "64kb"):
        (tmp_path / threshold).mkdir()
        m = _master(tmp_path / threshold, threshold, ("repl-diskless-sync", [diskless]))
        _writes(m, 200, "before")
        r = m.replica("eof", "psync2")
        m.send(r, "PSYNC", "?", "-1")
        link = m.link(r)
        snap = link.snapshot
        assert snap is not None
        peak = 0
        for k in range(6):   # 6 x 400 KB written while the snapshot is made
            _writes(m, 1000, f"during{k}")
            m.tick(100)
            peak = max(peak, int(m.mem()["mem_total_replication_buffers"]))
        stats = m.core.stats
        if threshold == "0":
            assert link.closed and stats.client_outbuf_limit_disconnections == 1
            assert [e["reason"] for e in m.events("replica_lost")] == ["output-buffer-limit"]
            continue
        assert not link.closed and stats.client_outbuf_limit_disconnections == 0
        assert link.spill is not None and stats.repl_spilled_bytes == link.spill.written > 2**20
        assert peak < 64 * 1024 + 256 * 1024           # the threshold and a few blocks
        if diskless == "yes":
            m.io.run_child(snap.pid)
        m.child_exits(snap.pid)
        if diskless == "no":
            _writes(m, 500, "sending")                  # while the file goes out: spilled too
            m.io.complete_bulk(m.core, r)
        _writes(m, 300, "after")
        m.send(r, "REPLCONF", "ACK", "0")
        m.flush()
        got = parse_full_sync(m.wire(r))
        rep = ReplicaCore(tmp_path, got.rdb)
        rep.apply(got.stream)
        assert rep.digest() == m.digest()
        assert snap.offset + len(got.stream) == m.repl.master_repl_offset
        assert link.spill is None                      # drained: an ordinary link again
        online = m.events("replica_online")
        assert online and online[-1]["sync_id"] == link.sync_id
        # (spilled by the time it went online: it goes on spilling until its file drains)
        assert 0 < online[-1]["spilled"] <= stats.repl_spilled_bytes
        assert dict(info_stats(m.core))["total_repl_spilled_bytes"] == stats.repl_spilled_bytes
        assert os.listdir(tmp_path / threshold) == [] or diskless == "no"   # (only dump.rdb)


@given(plan=st.lists(st.tuples(st.integers(min_value=1, max_value=60),
                               st.integers(min_value=10, max_value=3000)),
                     min_size=4, max_size=10),
       threshold_kb=st.sampled_from([16, 40, 128]),
       exit_at=st.integers(min_value=0, max_value=9),
       ack_at=st.integers(min_value=0, max_value=9))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_spill_model_offsets_and_bytes_line_up(tmp_path_factory, plan, threshold_kb,
                                                    exit_at, ack_at) -> None:
    """Bursts of writes of any size at any point of a diskless full sync (before the child's
    exit, between it and the first ACK, after), any threshold: the replica rebuilt from the
    RDB and the stream equals the master, the stream is exactly (snapshot offset, master
    offset], what was spilled all came back, nothing was dropped, and the shared buffer never
    held much more than the threshold for the replica."""
    from tests.support.master_side import ReplicaCore, parse_full_sync

    tmp = tmp_path_factory.mktemp("spill")
    m = _master(tmp, f"{threshold_kb}kb")
    _writes(m, 50, "before")
    r = m.replica("eof", "psync2")
    m.send(r, "PSYNC", "?", "-1")
    link = m.link(r)
    snap = link.snapshot
    assert snap is not None
    exited = acked = False
    backlog_size = 16 * 1024
    for i, (count, size) in enumerate(plan):
        if i == exit_at and not exited:
            m.io.run_child(snap.pid)
            m.child_exits(snap.pid)
            exited = True
        if i == ack_at and exited and not acked:
            m.send(r, "REPLCONF", "ACK", "0")
            acked = True
        _writes(m, count, f"p{i}", size)
        m.tick(100)
        assert not link.closed
        buf = int(m.mem()["mem_total_replication_buffers"])
        # the backlog's share, the replica's (up to the threshold and the block being filled)
        assert buf <= backlog_size + threshold_kb * 1024 + 3 * 64 * 1024 + 4 * size
    if not exited:
        m.io.run_child(snap.pid)
        m.child_exits(snap.pid)
    if not acked:
        m.send(r, "REPLCONF", "ACK", "0")
    m.flush()
    got = parse_full_sync(m.wire(r))
    rep = ReplicaCore(tmp, got.rdb)
    rep.apply(got.stream)
    assert rep.digest() == m.digest()
    assert snap.offset + len(got.stream) == m.repl.master_repl_offset
    assert m.core.stats.client_outbuf_limit_disconnections == 0
    spilled = m.core.stats.repl_spilled_bytes
    assert (link.spill is None) and (spilled == 0 or spilled <= len(got.stream))
