"""Sans-io tests of the replica side of the RDB channel (Redis 8, ``+RDBCHANNELSYNC``).

The master is the test: it answers with the exact bytes a Redis 8.6.3 master sent in
../shared/redis-wire/a_fullsync_rdbchannel.txt (embedded below, both connections), or with
RDB payloads written by pyrepl's real encoder and streams of real commands. The I/O shell is
replaced by a recorder of what the side asks for on its two connections (connect, write,
close, pause/resume reading, drain steps); a small pipe model plays the master's socket so
that "stop reading" really holds bytes back. Real cores, real bytes, no mocks of the logic.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.replication.replica import ReplState
from pyrepl.replication.replica import rdbchannel as rc
from pyrepl.replication.replica.rdbchannel import BulkHeader, Failed, FullResync, Keepalive, Payload
from tests.support.checks import check_every_move
from tests.support.cores import cmd
from tests.support.rdbchannel_replica import (
    MARK,
    MASTER_ID,
    Node,
    Pipe,
    big_stream,
    expected_digest,
    snapshot,
    to_rdbchannel,
)

S = ReplState
C = rc.RdbChState
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# The proxy log of a_fullsync_rdbchannel.txt: (record, connection, direction, exact bytes).
# main = conn1 (the replica's main channel), rdb = conn2 (the rdb channel).
TRANSCRIPT: list[tuple[int, str, str, bytes]] = [
    (3, "main", "R>M", b'*1\r\n$4\r\nPING\r\n'),
    (4, "main", "M>R", b'-NOAUTH Authentication required.\r\n'),
    (5, "main", "R>M", b'*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n'),
    (6, "main", "M>R", b'+OK\r\n'),
    (7, "main", "R>M",
     b'*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n*7\r\n$8\r\nREPLCONF\r'
     b'\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n$4\r\ncapa\r\n$16\r\nrdb-c'
     b'hannel-repl\r\n'),
    (8, "main", "M>R", b'+OK\r\n+OK\r\n'),
    (9, "main", "R>M",
     b'*3\r\n$5\r\nPSYNC\r\n$40\r\n3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511\r\n$1\r\n1\r\n'),
    (10, "main", "M>R", b'+RDBCHANNELSYNC 10\r\n'),
    (12, "rdb", "R>M", b'*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n'
     b'*11\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$8\r\nrdb-only\r\n$1\r\n1\r\n$11\r\n'
     b'rdb-channel\r\n$1\r\n1\r\n$17\r\nmain-ch-client-id\r\n$2\r\n10\r\n$14\r\nlistening-port'
     b'\r\n$4\r\n6381\r\n'),
    (13, "rdb", "M>R", b'+OK\r\n+OK\r\n'),
    (14, "rdb", "R>M", b'*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n'),
    (15, "rdb", "M>R", b'\n'), (16, "rdb", "M>R", b'\n'),  # keepalive newlines
    (17, "rdb", "M>R", b'\n'), (18, "rdb", "M>R", b'\n'),
    (19, "rdb", "M>R", b'\n+FULLRESYNC e0b8062d0b155a1e43fa2d39d13c0623805c27e1 0\r\n'),
    (20, "main", "M>R",
     b'*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nset\r\n$8\r\nduring:1\r\n$1\r\na\r\n'),
    (21, "main", "M>R", b'*2\r\n$4\r\nincr\r\n$10\r\nduring:ctr\r\n'),
    (22, "main", "M>R", b'*3\r\n$3\r\nset\r\n$8\r\nduring:2\r\n$1\r\nb\r\n'),
    (23, "rdb", "M>R",
     b'$EOF:79b150900a78ca68cdb80090425f0092523acc81\r\nREDIS0013\xfa\tredis-ver\x058.6.3'
     b'\xfa\nredis-bits\xc0@\xfa\x05ctime\xc2\n\xfe\x00k\xfa\x08used-mem\xc2\xe8@\x0e\x00'
     b'\xfa\x0erepl-stream-db\xc0\x00\xfa\x07repl-id(e0b8062d0b155a1e43fa2d39d13c0623805c27e'
     b'1\xfa\x0brepl-offset\xc0\x00\xfa\x08aof-base\xc0\x00\xfe\x00\xfb\x14\x00\x00\x05key:2'
     b'\nvalue:2\x00\x00\x00\x00\x06key:17\nvalue:17\x00\x00\x00\x05key:7\nvalue:7\x00\x00'
     b'\x00\x00\x06key:15\nvalue:15\x00\x00\x00\x05key:5\nvalue:5\x00\x00\x00\x00\x06key:14'
     b'\nvalue:14\x00\x00\x00\x06key:12\nvalue:12\x00\x00\x00\x05key:8\nvalue:8\x00\x00\x00'
     b'\x00\x05key:6\nvalue:6\x00\x00\x00\x00\x06key:16\nvalue:16\x00\x00\x00\x06key:18\nval'
     b'ue:18\x00\x00\x00\x06key:13\nvalue:13\x00\x00\x00\x06key:10\nvalue:10\x00\x00\x00\x06'
     b'key:19\nvalue:19\x00\x00\x00\x06key:11\nvalue:11\x00\x00\x00\x05key:1\nvalue:1\x00'
     b'\x00\x00\x00\x05key:4\nvalue:4\x00\x00\x00\x00\x05key:0\nvalue:0\x00\x00\x00\x00\x05k'
     b'ey:9\nvalue:9\x00\x00\x00\x00\x05key:3\nvalue:3\x00\x00\x00\xff\x10\xf1\xcb\xe6\xcc'
     b'\xc7\x86\x9a79b150900a78ca68cdb80090425f0092523acc81'),
    (26, "main", "R>M", b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$1\r\n0\r\n'),
    (27, "main", "M>R", b'*3\r\n$3\r\nset\r\n$7\r\nafter:1\r\n$1\r\nc\r\n'),
    (28, "main", "R>M", b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n155\r\n'),
    (37, "main", "R>M", b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n155\r\n'),
    (38, "main", "M>R", b'*1\r\n$4\r\nping\r\n'),
    (39, "main", "R>M", b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n169\r\n'),
    (41, "main", "R>M", b'*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n169\r\n'),
]
REPLICA_OWN_ID = b"3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511"  # the replica's id in record 9
# pyrepl's one deliberate difference from a Redis 8 replica's bytes: its capa line offers
# Valkey's dual channel too (each master ignores the capability it does not know)
REDIS8_CAPA = b"$4\r\ncapa\r\n$16\r\nrdb-channel-repl\r\n"
DUAL_CAPA = b"$4\r\ncapa\r\n$12\r\ndual-channel\r\n"


def with_dual_capa(data: bytes) -> bytes:
    """A Redis 8 replica's record, with the capa line pyrepl sends instead."""
    if not data.endswith(REDIS8_CAPA):
        return data
    head, sep, rest = data.rpartition(b"*7\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n")
    assert sep, data
    return head + b"*9\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n" + rest + DUAL_CAPA
TRANSCRIPT_RDB = TRANSCRIPT[[r[0] for r in TRANSCRIPT].index(23)][3]
DURING = b"".join(d for seq, _, _, d in TRANSCRIPT if seq in (20, 21, 22))  # 122 bytes


# -- the transcript, byte for byte --------------------------------------------------------------

def _replay(n: Node, order: list[tuple[int, str, str, bytes]]) -> dict[str, bytes]:
    """Feed the master's records in ``order``; return what the replica wrote on each
    connection, checking at every replica record that nothing came later than Redis's."""
    expected = {"main": b"", "rdb": b""}
    got = {"main": b"", "rdb": b""}
    acks = 0
    for seq, conn, direction, data in order:
        if direction == "M>R":
            if conn == "main":
                n.main(data)
            else:
                n.rdb(data)
            if seq == 10:  # +RDBCHANNELSYNC: the second connection was asked for; it is up
                assert n.io.rdb_connects[-1][1:] == ("127.0.0.1", 7380)
                n.side.on_rdb_connected(n.io.rdb_token)
            n.drain()  # the loop runs a requested drain step before the next read
            continue
        if data.startswith(b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK"):
            acks += 1
            if acks > 1:
                n.tick(1000)  # later ACKs come from the once-a-second cron
        expected[conn] += data.replace(REPLICA_OWN_ID, n.own_id) if seq == 9 else \
            with_dual_capa(data)
        token = n.io.token if conn == "main" else n.io.rdb_connects[-1][0]
        got[conn] += n.io.take(token)
        assert expected[conn].startswith(got[conn]) or got[conn].startswith(expected[conn]), \
            (seq, got[conn], expected[conn])
        assert len(got[conn]) >= len(expected[conn]), (seq, "late", got[conn])
    return got


def transcript_node() -> Node:
    n = Node(("masterauth", ["pw"]), replicaof=False)
    n.own_id = n.repl.ids.replid.encode()  # what a fresh node offers in its first PSYNC
    assert n.run("REPLICAOF", "127.0.0.1", "7380") == b"+OK\r\n"
    n.side.on_connected(n.io.token)
    return n


def check_transcript_end(n: Node, got: dict[str, bytes]) -> None:
    for conn in ("main", "rdb"):
        want = b"".join(with_dual_capa(d) for seq, c, di, d in TRANSCRIPT
                        if c == conn and di == "R>M")
        if conn == "main":
            want = want.replace(REPLICA_OWN_ID, n.own_id)
        assert got[conn] == want
    assert n.io.rdb_token in n.io.closed  # the replica closed the rdb channel after the mark
    assert n.side.state is S.CONNECTED and n.side.stream.master.reploff == 169
    assert n.repl.ids.replid == MASTER_ID and n.repl.master_repl_offset == 169
    assert n.run("GET", "key:2") == b"$10\r\nvalue:2\x00\x00\x00\r\n"
    assert n.run("GET", "key:17") == b"$10\r\nvalue:17\x00\x00\r\n"
    assert n.run("MGET", "during:1", "during:ctr", "during:2", "after:1") == \
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\nc\r\n"
    assert n.run("DBSIZE") == b":24\r\n"
    info = n.info()
    assert info["master_link_status"] == "up" and info["slave_repl_offset"] == 169
    assert info["replica_full_sync_buffer_size"] == 0
    assert info["replica_full_sync_buffer_peak"] == rc.BLOCK_SIZE  # 122 bytes: one block


def test_transcript_replay_matches_redis_8_byte_for_byte() -> None:
    n = transcript_node()
    got = _replay(n, TRANSCRIPT)
    check_transcript_end(n, got)
    lines = n.logs()
    for text in ("PSYNC is not possible, initialize RDB channel.",
                 "Starting to receive RDB and replication stream in parallel.",
                 "Loading RDB produced by version 8.6.3",
                 "Done loading RDB, keys loaded: 20, keys expired: 0.",
                 "MASTER <-> REPLICA sync: Finished with success",
                 "MASTER <-> REPLICA sync: Starting to stream replication buffer into the db "
                 "(122 bytes).",
                 "MASTER <-> REPLICA sync: Successfully streamed replication buffer into the db "
                 "(122 bytes in total)"):
        assert text in lines, text
    evs = n.events()
    names = [e["event"] for e in evs]
    assert names[:8] == ["psync_sent", "psync_reply", "rdb_first_byte", "rdb_received",
                         "load_done", "link_up", "buffer_drained", "caught_up"]
    assert len({e["sync_id"] for e in evs[:8]}) == 1
    assert evs[1]["result"] == "rdbchannel" and evs[1]["mode"] == "rdb-channel"
    assert evs[2]["offset"] == 0 and evs[2]["replid"] == MASTER_ID
    assert evs[3]["bytes"] == len(TRANSCRIPT_RDB) - len(b"$EOF:") - 40 - 2
    assert evs[4]["keys"] == 20 and evs[5]["mode"] == "rdb-channel"
    assert evs[6]["bytes"] == 122 and evs[6]["buffer_peak"] == rc.BLOCK_SIZE
    assert evs[6]["buffer_limit"] == 256 * 1024 * 1024  # 0 = the replica class hard limit
    assert evs[6]["offset"] == 122


def _master_bytes_after_rdbchannelsync() -> tuple[bytes, bytes]:
    main = b"".join(d for seq, c, di, d in TRANSCRIPT if c == "main" and di == "M>R" and
                    20 <= seq <= 22)
    rdb = b"".join(d for seq, c, di, d in TRANSCRIPT if c == "rdb" and di == "M>R" and
                   seq >= 15)
    return main, rdb


@SETTINGS
@given(st.lists(st.integers(0, 122), max_size=6), st.lists(st.integers(0, 691), max_size=8),
       st.lists(st.booleans(), min_size=1, max_size=30))
def test_transcript_any_split_and_any_order_of_the_two_connections(
        main_cuts: list[int], rdb_cuts: list[int], order: list[bool]) -> None:
    """The main channel's stream may arrive before, during or after the rdb channel's
    +FULLRESYNC and payload, in any pieces: the result is the same."""
    n = transcript_node()
    n.main(b"-NOAUTH Authentication required.\r\n+OK\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 10\r\n")
    n.side.on_rdb_connected(n.io.rdb_token)
    n.rdb(b"+OK\r\n+OK\r\n")
    main, rdb = _master_bytes_after_rdbchannelsync()

    def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
        out, prev = [], 0
        for cut in sorted(set(cuts)) + [len(data)]:
            if cut > prev:
                out.append(data[prev:cut])
                prev = cut
        return out

    mp, rp = pieces(main, main_cuts), pieces(rdb, rdb_cuts)
    i = 0
    while mp or rp:
        use_main = order[i % len(order)] if mp and rp else bool(mp)
        i += 1
        if use_main:
            n.main(mp.pop(0))
        else:
            n.rdb(rp.pop(0))
    assert n.side.state is S.CONNECTED
    n.drain()
    n.main(cmd("set", "after:1", "c"))
    n.tick(1000)
    n.main(cmd("ping"))
    n.tick(1000)
    got = n.io.take(n.io.token)
    assert got.endswith(cmd("REPLCONF", "ACK", "0") + cmd("REPLCONF", "ACK", "155")
                        + cmd("REPLCONF", "ACK", "169"))
    assert n.io.take(n.io.rdb_token) == b"".join(
        d for seq, c, di, d in TRANSCRIPT if c == "rdb" and di == "R>M")
    assert n.run("MGET", "during:1", "during:ctr", "during:2", "after:1") == \
        b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\nc\r\n"
    assert n.side.stream.master.reploff == 169 and n.repl.master_repl_offset == 169


def test_handshake_without_auth_and_with_masteruser() -> None:
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    assert n.io.take(n.io.token) == cmd("PING")
    n.main(b"+PONG\r\n")
    assert n.io.take(n.io.token) == cmd("REPLCONF", "listening-port", "6381") + cmd(
        "REPLCONF", "capa", "eof", "capa", "psync2", "capa", "rdb-channel-repl", "capa",
        "dual-channel")
    n.main(b"+OK\r\n+OK\r\n")
    assert n.io.take(n.io.token) == cmd("PSYNC", "?", "-1")
    n.main(b"+RDBCHANNELSYNC 7\r\n")
    assert n.io.rdb_connects == [(n.io.rdb_token, "127.0.0.1", 6380)]
    assert n.io.rdb_token != n.io.token
    assert n.run("ROLE").endswith(b"$4\r\nsync\r\n:-1\r\n")
    n.side.on_rdb_connected(n.io.rdb_token)
    assert n.io.take(n.io.rdb_token) == cmd(
        "REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
        "main-ch-client-id", "7", "listening-port", "6381")
    n.rdb(b"+OK\r\n")
    assert n.io.take(n.io.rdb_token) == cmd("PSYNC", "?", "-1")
    # masteruser + masterauth, announced port
    m = Node(("masteruser", ["u"]), ("masterauth", ["p"]), ("replica-announce-port", ["7777"]))
    m.side.start()
    m.side.on_connected(m.io.token)
    m.main(b"+PONG\r\n+OK\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 12345\r\n")
    m.side.on_rdb_connected(m.io.rdb_token)
    assert m.io.take(m.io.rdb_token) == cmd("AUTH", "u", "p") + cmd(
        "REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
        "main-ch-client-id", "12345", "listening-port", "7777")


# -- fallbacks ----------------------------------------------------------------------------------

def test_repl_rdb_channel_no_sends_the_redis_7_capa_line() -> None:
    n = Node(("repl-rdb-channel", ["no"]))
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n")
    assert n.io.take(n.io.token) == cmd("PING") + cmd("REPLCONF", "listening-port", "6381") \
        + cmd("REPLCONF", "capa", "eof", "capa", "psync2")


@pytest.mark.parametrize("diskless", [True, False])
def test_a_master_without_the_capability_gets_the_classic_sync(diskless: bool) -> None:
    """A Redis 7 master ignores capa rdb-channel-repl and answers +FULLRESYNC."""
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    rdb = snapshot(0)
    payload = (b"$EOF:" + MARK + b"\r\n" + rdb + MARK) if diskless else \
        (b"$%d\r\n" % len(rdb) + rdb)
    stream = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n+FULLRESYNC %s 0\r\n\n" % MASTER_ID.encode() + payload
           + stream)
    assert n.side.state is S.CONNECTED and n.io.rdb_connects == []
    assert n.digest() == expected_digest(stream)
    assert n.side.stream.master.reploff == len(stream)
    assert n.info()["replica_full_sync_buffer_peak"] == 0
    assert [e["mode"] for e in n.events() if e["event"] == "link_up"] == \
        ["diskless" if diskless else "disk"]


# -- the buffer: blocks, limit, backpressure, drain ---------------------------------------------

def test_buffer_counts_whole_blocks_and_overshoots_the_limit_by_one_block_like_redis() -> None:
    # Redis 8.6.3 with replica-full-sync-buffer-limit 8mb peaked at 9437040 = 9 x 1048560
    buf = rc.FullSyncBuffer(8 * 1024 * 1024)
    chunk = b"x" * 65536
    reads = 0
    while not buf.append(chunk):
        reads += 1
        assert reads < 1000
    assert buf.size == buf.peak == 9437040 == 9 * rc.BLOCK_SIZE
    assert buf.used == (reads + 1) * 65536 <= buf.size
    assert len(buf.blocks) == 9
    out = b""
    while (b := buf.pop_block()) is not None:
        out += b
    assert out == chunk * (reads + 1) and buf.size == 0 and buf.used == 0
    assert buf.peak == 9437040  # the peak is kept
    # a read straddling a block boundary is stored whole, in order, in the next block
    buf = rc.FullSyncBuffer(0)
    data = bytes(range(256)) * 5000  # 1.28 MB in one append
    assert buf.append(data) is False  # no limit
    assert buf.size == 2 * rc.BLOCK_SIZE and [len(b) for b in buf.blocks] == \
        [rc.BLOCK_SIZE, len(data) - rc.BLOCK_SIZE]
    assert buf.pop_block() + buf.pop_block() == data


def test_limit_zero_inherits_the_replica_hard_limit() -> None:
    assert Node().side.channel.full_sync_buffer_limit() == 256 * 1024 * 1024
    n = Node(("client-output-buffer-limit", ["replica", "64mb", "16mb", "60"]))
    assert n.side.channel.full_sync_buffer_limit() == 64 * 1024 * 1024
    n = Node(("client-output-buffer-limit", ["replica", "0", "0", "0"]))
    assert n.side.channel.full_sync_buffer_limit() == 0  # no limit at all
    n = Node(("replica-full-sync-buffer-limit", ["8mb"]))
    assert n.side.channel.full_sync_buffer_limit() == 8 * 1024 * 1024


def stream_during_the_sync(n: Node, commands: int, offset: int = 0, chunk: int = 65536,
                           keepalives: int = 0) -> tuple[bytes, Pipe]:
    """The rdb channel handshaken and its ``+FULLRESYNC`` at ``offset`` received (after
    ``keepalives`` newlines); then ``big_stream(commands)`` written on the main channel and read
    as far as the replica reads: the stream and its pipe."""
    to_rdbchannel(n)
    n.rdb(b"\n" * keepalives + b"+FULLRESYNC %s %d\r\n" % (MASTER_ID.encode(), offset))
    stream = big_stream(commands)
    pipe = Pipe(n, chunk=chunk)
    pipe.write(stream)
    pipe.pump()
    return stream, pipe


def test_backpressure_at_the_limit_nothing_lost_and_the_buffer_always_drains() -> None:
    limit = 4 * 1024 * 1024
    n = Node(("replica-full-sync-buffer-limit", [str(limit)]))
    offset = 5000
    # ~8 MB written while the snapshot is in flight
    stream, pipe = stream_during_the_sync(n, 8000, offset, keepalives=2)
    # at the limit the replica stopped reading: one block past the limit, the rest waits
    assert n.io.token in n.io.paused
    assert n.side.full_sync_buffer_bytes() == 5 * rc.BLOCK_SIZE
    assert n.side.channel.fsbuf.used == pipe.delivered < len(stream)
    assert len(pipe.pending) == len(stream) - pipe.delivered > 2_000_000
    info = n.info()
    assert info["replica_full_sync_buffer_size"] == info["replica_full_sync_buffer_peak"] \
        == 5 * rc.BLOCK_SIZE
    assert dict(n.repl.memory_fields())["mem_replica_full_sync_buffer"] == 5 * rc.BLOCK_SIZE
    assert info["master_link_status"] == "down" and info["master_sync_in_progress"] == 1
    assert "Replication buffer limit has been reached (4194304 bytes), stopped buffering " \
           "replication stream. Further accumulation may occur on master side." in n.logs()
    # the snapshot arrives: link up before the buffer is applied, ACK at the snapshot offset
    rdb = snapshot(offset)
    n.rdb(b"$EOF:" + MARK + b"\r\n" + rdb[:1000])
    assert n.side.state is S.TRANSFER
    n.rdb(rdb[1000:] + MARK)
    assert n.side.state is S.CONNECTED and n.side.channel.rdbch is None
    assert n.io.take(n.io.token) == cmd("REPLCONF", "ACK", offset)
    info = n.info()
    assert info["master_link_status"] == "up" and info["slave_repl_offset"] == offset
    assert info["replica_full_sync_buffer_size"] == 5 * rc.BLOCK_SIZE
    # drain: a step applies two blocks; the socket then gets to deliver at most one read;
    # the master keeps writing one chunk per step meanwhile, and the buffer still empties
    more = big_stream(3000, tag="more")[len(cmd("SELECT", "0")):]
    pos = 0
    sizes = []
    steps = 0
    while n.io.drains:
        steps += 1
        assert steps < 1000
        n.side.drain_step(n.io.drains.pop(0))
        if pos < len(more):
            pipe.write(more[pos:pos + 65536])
            pos += 65536
        if n.side.channel.fsbuf is None:
            break  # drained: the main channel is read freely again
        assert pipe.pump() <= 1  # at most one new chunk per two applied
        sizes.append(n.side.channel.fsbuf.used)
    assert n.side.channel.fsbuf is None and steps >= 3
    buffered = pipe.delivered  # every byte read from +FULLRESYNC to the end of the drain
    assert all(a > b for a, b in zip(sizes, sizes[1:], strict=False))  # it only shrinks
    pipe.write(more[pos:])
    pipe.pump()  # the link is a plain stream again: everything the master holds comes in
    assert not pipe.pending and n.io.token not in n.io.paused
    assert n.side.stream.master.reploff == offset + len(stream) + len(more)
    assert n.repl.master_repl_offset == offset + len(stream) + len(more)
    assert n.digest() == expected_digest(stream + more)
    drained = [e for e in n.events() if e["event"] == "buffer_drained"]
    assert len(drained) == 1
    assert drained[0]["buffer_peak"] == 5 * rc.BLOCK_SIZE and drained[0]["buffer_limit"] == limit
    assert drained[0]["bytes"] == buffered  # what was buffered, including reads meanwhile
    info = n.info()
    assert info["replica_full_sync_buffer_size"] == 0
    assert info["replica_full_sync_buffer_peak"] == 5 * rc.BLOCK_SIZE  # not reset
    # sub-replicas and the backlog got exactly the master's bytes at the master's offsets
    assert b"".join(n.repl.backlog.read_from(n.repl.backlog.first_byte_offset)) == \
        (stream + more)[-n.repl.backlog.histlen:]


def test_a_tiny_limit_stops_reading_after_one_read() -> None:
    n = Node(("replica-full-sync-buffer-limit", ["1"]))  # one block is over the limit
    stream, pipe = stream_during_the_sync(n, 300, chunk=16384)
    # paused after the first read
    assert pipe.reads == 1 and n.side.channel.fsbuf.size == rc.BLOCK_SIZE
    assert n.io.log == [("pause", n.io.token)]
    n.rdb(b"$EOF:" + MARK + b"\r\n" + snapshot(0) + MARK)
    while n.io.drains:
        n.side.drain_step(n.io.drains.pop(0))
    pipe.pump()
    assert not pipe.pending and n.side.channel.fsbuf is None
    assert n.digest() == expected_digest(stream)
    assert n.side.stream.master.reploff == len(stream)


def test_every_read_while_draining_is_followed_by_a_pause() -> None:
    n = Node()
    stream, pipe = stream_during_the_sync(n, 6000, chunk=16384)
    assert n.side.channel.fsbuf.used == len(stream) and n.io.log == []  # under the limit: all read
    n.rdb(b"$EOF:" + MARK + b"\r\n" + snapshot(0) + MARK)
    more = big_stream(1000, tag="more")[len(cmd("SELECT", "0")):]
    pipe.write(more)  # the master keeps writing
    steps = 0
    while n.io.drains:
        steps += 1
        n.side.drain_step(n.io.drains.pop(0))
        draining = n.side.channel.fsbuf is not None
        reads = pipe.pump()
        if draining:
            # the step (re)opened reading and asked for the next step; one read, paused again
            assert reads == 1 and n.io.log[-2:] == [("drain", n.io.token),
                                                    ("pause", n.io.token)]
            if steps > 1:
                assert n.io.log[-3] == ("resume", n.io.token)
    assert steps >= 3 and not pipe.pending and n.side.channel.fsbuf is None
    assert n.digest() == expected_digest(stream + more)
    assert n.side.stream.master.reploff == len(stream) + len(more)


def test_no_writes_during_the_sync_drains_an_empty_buffer_at_once() -> None:
    n = Node()
    to_rdbchannel(n)
    rdb = snapshot(77)
    n.rdb(b"+FULLRESYNC %s 77\r\n$EOF:" % MASTER_ID.encode() + MARK + b"\r\n" + rdb + MARK)
    assert n.side.state is S.CONNECTED and n.side.channel.fsbuf is None and n.io.drains == []
    assert n.io.take(n.io.token) == cmd("REPLCONF", "ACK", "77")
    ev = [e for e in n.events() if e["event"] == "buffer_drained"]
    assert ev[0]["bytes"] == 0 and ev[0]["buffer_peak"] == 0
    assert "MASTER <-> REPLICA sync: Starting to stream replication buffer into the db " \
           "(0 bytes)." in n.logs()
    n.main(cmd("SET", "x", "1"))  # streaming directly now
    assert n.side.stream.master.reploff == 77 + len(cmd("SET", "x", "1"))


def test_disk_style_header_on_the_rdb_channel_is_accepted() -> None:
    n = Node()
    to_rdbchannel(n)
    rdb = snapshot(3)
    n.main(cmd("SET", "b", "2"))
    n.rdb(b"+FULLRESYNC %s 3\r\n$%d\r\n" % (MASTER_ID.encode(), len(rdb)) + rdb)
    assert n.side.state is S.CONNECTED
    n.drain()
    assert n.run("GET", "b") == b"$1\r\n2\r\n"
    assert n.side.stream.master.reploff == 3 + len(cmd("SET", "b", "2"))


# -- failure paths: a clean retry, nothing half-applied -----------------------------------------

Step = Callable[[], object]
#: each failure and the reason of the one ``sync_failed`` it causes (None: none, the link is
#: dropped by REPLICAOF, which logs its own event)
FAILURES = {"main-lost-waiting": "main-channel-lost", "main-lost-mid-payload": "main-channel-lost",
            "rdb-lost-waiting": "rdb-channel-lost", "rdb-lost-mid-payload": "rdb-channel-lost",
            "rdb-connect-failed": "rdb-channel-connect-error", "bad-crc": "load-error",
            "broken-mark": "load-error", "replconf-err": "rdb-channel-replconf-error",
            "auth-err": "rdb-channel-replconf-error", "psync-err": "psync-error",
            "psync-continue": "psync-error", "master-error": "master-error",
            "bad-header": "bad-protocol", "timeout": "timeout",
            "bad-rdbchannelsync": "psync-error", "data-before-handshake": "protocol-error",
            "replicaof-no-one": "promoted", "replicaof-other": "replicaof"}


def _fail(n: Node, failure: str) -> None:
    """A sync driven step by step; after the step at which ``failure`` can strike, it does."""
    s = n.side
    rdb = snapshot(0)
    reset = "Connection reset by peer"

    def rdbchannelsync() -> None:
        n.main(b"+PONG\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 10\r\n")
        n.main(cmd("SELECT", "0") + cmd("SET", "during", "x"))  # buffered, must never apply

    steps: list[tuple[Step, dict[str, Step]]] = [
        (lambda: s.on_connected(n.io.token),
         {"bad-rdbchannelsync": lambda: n.main(b"+PONG\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC\r\n")}),
        (rdbchannelsync,
         {"rdb-connect-failed": lambda: s.on_rdb_connect_failed(n.io.rdb_token,
                                                                "Connection refused"),
          "data-before-handshake": lambda: n.rdb(b"+OK\r\n")}),
        (lambda: s.on_rdb_connected(n.io.rdb_token),
         {"auth-err": lambda: n.rdb(b"-WRONGPASS invalid username-password pair or user is "
                                    b"disabled.\r\n"),
          "replconf-err": lambda: n.rdb(b"-ERR Unrecognized RDB client id: 10\r\n")}),
        (lambda: n.rdb(b"+OK\r\n"), {}),   # REPLCONF main-ch-client-id answered; PSYNC sent
        (lambda: n.rdb(b"\n"),   # (the master's keepalive while its child starts)
         {"main-lost-waiting": lambda: s.on_closed(n.io.token, reset),
          "rdb-lost-waiting": lambda: s.on_rdb_closed(n.io.rdb_token, ""),
          "psync-err": lambda: n.rdb(b"-NOMASTERLINK Can't SYNC while not connected with my "
                                     b"master\r\n"),
          "psync-continue": lambda: n.rdb(b"+CONTINUE %s\r\n" % MASTER_ID.encode()),
          "timeout": lambda: (n.tick(1000), n.tick(61_000)),
          "replicaof-no-one": s.unset_master,
          "replicaof-other": lambda: s.set_master("127.0.0.1", 7001)}),
        (lambda: n.rdb(b"+FULLRESYNC %s 0\r\n" % MASTER_ID.encode()),
         {"master-error": lambda: n.rdb(b"-ERR snapshot child failed\r\n"),
          "bad-header": lambda: n.rdb(b"REDIS0011\r\n")}),
        (lambda: n.rdb(b"$EOF:" + MARK + b"\r\n"),
         {"bad-crc": lambda: n.rdb(rdb[:-1] + bytes([rdb[-1] ^ 0xFF]) + MARK),
          "broken-mark": lambda: n.rdb(rdb + b"X" * 40)}),
        (lambda: n.rdb(rdb[: len(rdb) // 2]),
         {"main-lost-mid-payload": lambda: s.on_closed(n.io.token, reset),
          "rdb-lost-mid-payload": lambda: s.on_rdb_closed(n.io.rdb_token, reset)}),
    ]
    for step, strikes in steps:
        step()
        if failure in strikes:
            strikes[failure]()
            return
    raise AssertionError(failure)


@pytest.mark.parametrize("failure", FAILURES)
def test_failure_applies_nothing_closes_both_connections_and_retries(failure: str) -> None:
    n = Node(replicaof=False)
    n.run("SET", "old", "1")
    n.run("REPLICAOF", "127.0.0.1", "6380")
    before = n.digest()
    cached = n.side.stream.cached
    _fail(n, failure)
    s = n.side
    # the failure, and only it, ended the sync (the steps before it were a sync going well)
    failed = [e["reason"] for e in n.events() if e["event"] == "sync_failed"]
    assert failed == [FAILURES[failure]], failed
    assert n.digest() == before  # the old dataset, untouched
    assert s.channel.fsbuf is None and s.channel.rdbch is None and s.full_sync_buffer_bytes() == 0
    assert n.run("GET", "during") == b"$-1\r\n"
    if n.io.rdb_connects:
        assert n.io.rdb_connects[-1][0] in n.io.closed  # the rdb channel is closed
    if failure == "replicaof-no-one":
        assert s.state is S.NONE and n.info()["role"] == "master"
        return
    assert s.stream.cached is cached  # still offered: PSYNC history kept
    # a clean retry: a new main connection at once (CONNECTING) or within the cron second
    if s.state is S.CONNECT:
        n.tick(1000)
    assert s.state is S.CONNECTING
    assert n.io.connects[-2][0] in n.io.closed  # the failed main connection is closed
    # and the retry works, with the stream applied exactly once
    stream = cmd("SELECT", "0") + cmd("SET", "during", "y") + cmd("INCR", "n")
    s.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 11\r\n")
    s.on_rdb_connected(n.io.rdb_token)
    n.main(stream[:10])
    n.rdb(b"+OK\r\n+FULLRESYNC %s 0\r\n$EOF:" % MASTER_ID.encode() + MARK + b"\r\n"
          + snapshot(0) + MARK)
    n.main(stream[10:])
    n.drain()
    assert s.state is S.CONNECTED
    assert n.digest() == expected_digest(stream)
    assert s.stream.master.reploff == len(stream)


def test_failure_logs_are_redis_style() -> None:
    n = Node()
    to_rdbchannel(n)
    n.rdb(b"+FULLRESYNC %s 0\r\n$EOF:" % MASTER_ID.encode() + MARK + b"\r\n")
    rdb = snapshot(0)
    n.rdb(rdb[:-1] + bytes([rdb[-1] ^ 0xFF]) + MARK)
    assert any(m.startswith("Failed trying to load the MASTER synchronization DB from socket")
               for m in n.logs())
    assert "MASTER <-> REPLICA sync: Discarding temporary DB in background" in n.logs()
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 10\r\n")
    n.side.on_rdb_connected(n.io.rdb_token)
    n.rdb(b"-ERR Unrecognized RDB client id: 10\r\n")
    assert "Master rejected the rdb channel handshake: -ERR Unrecognized RDB client id: 10" \
        in n.logs()
    ev = [e for e in n.events() if e["event"] == "sync_failed"][-1]
    assert ev["reason"] == "rdb-channel-replconf-error"
    assert ev["error"] == "-ERR Unrecognized RDB client id: 10"


def test_main_link_lost_while_draining_caches_the_applied_offset() -> None:
    n = Node(("replica-full-sync-buffer-limit", ["1"]))
    stream, pipe = stream_during_the_sync(n, 4000)
    n.rdb(b"$EOF:" + MARK + b"\r\n" + snapshot(0) + MARK)
    n.side.drain_step(n.io.drains.pop(0))  # one step: part of the buffer applied
    applied = n.side.stream.master.reploff
    assert 0 < applied < pipe.delivered
    peak = n.info()["replica_full_sync_buffer_peak"]
    n.side.on_closed(n.io.token, "Connection reset by peer")
    assert n.side.channel.fsbuf is None and n.side.stream.cached is not None
    assert n.side.stream.cached.reploff == applied  # the rest is resent after +CONTINUE
    assert n.info()["replica_full_sync_buffer_peak"] == peak
    assert n.side.state is S.CONNECTING
    n.side.drain_step(n.io.drains.pop(0)) if n.io.drains else None  # a stale step: no-op
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n")
    assert n.io.take(n.io.token).endswith(cmd("PSYNC", MASTER_ID, applied + 1))
    n.main(b"+CONTINUE %s\r\n" % MASTER_ID.encode() + stream[applied:])
    assert n.digest() == expected_digest(stream)
    assert n.side.stream.master.reploff == len(stream)


def test_info_role_and_events_during_an_rdb_channel_sync() -> None:
    n = Node()
    to_rdbchannel(n)
    info = n.info()
    assert info["master_sync_in_progress"] == 1 and info["master_link_status"] == "down"
    assert info["master_sync_total_bytes"] == -1
    assert info["replica_full_sync_buffer_size"] == 0
    keys = [k for k, _ in n.repl.info_fields()]
    i = keys.index("slave_repl_offset")
    assert keys[i + 1:i + 3] == ["replica_full_sync_buffer_size", "replica_full_sync_buffer_peak"]
    n.rdb(b"+FULLRESYNC %s 0\r\n$EOF:" % MASTER_ID.encode() + MARK + b"\r\n"
          + snapshot(0)[:50])
    n.main(cmd("SELECT", "0") + cmd("SET", "q", "1"))
    info = n.info()
    assert (info["master_sync_total_bytes"], info["master_sync_read_bytes"]) == (0, 50)
    assert info["replica_full_sync_buffer_size"] == rc.BLOCK_SIZE
    assert n.run("ROLE").endswith(b"$4\r\nsync\r\n:-1\r\n")
    mem = dict(n.repl.memory_fields())
    assert mem["mem_replica_full_sync_buffer"] == rc.BLOCK_SIZE
    assert mem["mem_total_replication_buffers"] >= rc.BLOCK_SIZE


# -- the rdb channel protocol object: every state x input ---------------------------------------

def test_every_missing_rdb_channel_transition_is_a_typed_error() -> None:
    ch = rc.RdbChannel(b"1", 6381)
    check_every_move(ch, ch._go, rc.TRANSITIONS, rc.RdbChState, rc.RdbChInput, rc.RdbChannelError)


def _channel(state: str) -> rc.RdbChannel:
    ch = rc.RdbChannel(b"10", 6381, [b"pw"])
    if state == "NONE":
        return ch
    ch.start()
    if state == "SEND_HANDSHAKE":
        return ch
    ch.connected()
    ch.data_to_send()
    steps = {"RECEIVE_AUTH_REPLY": b"", "RECEIVE_REPLCONF_REPLY": b"+OK\r\n",
             "RECEIVE_FULLRESYNC": b"+OK\r\n+OK\r\n",
             "RDB_HEADER": b"+OK\r\n+OK\r\n+FULLRESYNC %s 0\r\n" % MASTER_ID.encode(),
             "RDB_PAYLOAD": b"+OK\r\n+OK\r\n+FULLRESYNC %s 0\r\n$EOF:%s\r\n" % (
                 MASTER_ID.encode(), MARK)}
    if steps[state]:
        ch.receive_data(steps[state])
    ch.data_to_send()
    while ch.next_event() is not None:
        pass
    return ch


INPUTS = {"ok": b"+OK\r\n", "err": b"-ERR x\r\n", "newline": b"\n", "eof": b"",
          "fullresync": b"+FULLRESYNC %s 5\r\n" % MASTER_ID.encode(),
          "header": b"$EOF:%s\r\n" % MARK, "garbage": b"garbage\r\n"}
# state after the input, and the event it produces (None: no event). "raise": typed error.
CH_EXPECTED: dict[str, dict[str, tuple[str, type | None]]] = {
    "NONE": {k: ("NONE", None) for k in INPUTS},
    "SEND_HANDSHAKE": {**{k: ("raise", None) for k in INPUTS}, "eof": ("NONE", Failed)},
    "RECEIVE_AUTH_REPLY": {"ok": ("RECEIVE_REPLCONF_REPLY", None), "err": ("NONE", Failed),
                           "newline": ("RECEIVE_REPLCONF_REPLY", None), "eof": ("NONE", Failed),
                           "fullresync": ("RECEIVE_REPLCONF_REPLY", None),
                           "header": ("RECEIVE_REPLCONF_REPLY", None),
                           "garbage": ("RECEIVE_REPLCONF_REPLY", None)},
    "RECEIVE_REPLCONF_REPLY": {"ok": ("RECEIVE_FULLRESYNC", None), "err": ("NONE", Failed),
                               "newline": ("RECEIVE_FULLRESYNC", None),
                               "eof": ("NONE", Failed),
                               "fullresync": ("RECEIVE_FULLRESYNC", None),
                               "header": ("RECEIVE_FULLRESYNC", None),
                               "garbage": ("RECEIVE_FULLRESYNC", None)},
    "RECEIVE_FULLRESYNC": {"ok": ("NONE", Failed), "err": ("NONE", Failed),
                           "newline": ("RECEIVE_FULLRESYNC", Keepalive), "eof": ("NONE", Failed),
                           "fullresync": ("RDB_LOADING", FullResync), "header": ("NONE", Failed),
                           "garbage": ("NONE", Failed)},
    "RDB_HEADER": {"ok": ("NONE", Failed), "err": ("NONE", Failed),
                   "newline": ("RDB_LOADING", Keepalive), "eof": ("NONE", Failed),
                   "fullresync": ("NONE", Failed), "header": ("RDB_LOADING", BulkHeader),
                   "garbage": ("NONE", Failed)},
    "RDB_PAYLOAD": {**{k: ("RDB_LOADING", Payload) for k in INPUTS}, "eof": ("NONE", Failed)},
}


@pytest.mark.parametrize("state", list(CH_EXPECTED))
@pytest.mark.parametrize("inp", list(INPUTS))
def test_rdb_channel_every_state_and_input(state: str, inp: str) -> None:
    ch = _channel(state)
    want_state, want_event = CH_EXPECTED[state][inp]
    if want_state == "raise":
        with pytest.raises(rc.RdbChannelError):
            ch.receive_data(INPUTS[inp])
        return
    ch.receive_data(INPUTS[inp])
    assert ch.state is rc.RdbChState[want_state]
    ev = ch.next_event()
    if want_event is None:
        assert ev is None
    else:
        assert type(ev) is want_event
        if want_event is Payload:
            assert ev.data == INPUTS[inp]
        if want_event is Failed:
            assert ev.reason and ev.message
    if state == "RECEIVE_REPLCONF_REPLY" and want_state == "RECEIVE_FULLRESYNC":
        assert ch.data_to_send() == cmd("PSYNC", "?", "-1")
    else:
        assert ch.data_to_send() == b""


@SETTINGS
@given(st.lists(st.integers(0, 200), max_size=10))
def test_rdb_channel_events_do_not_depend_on_the_split(cuts: list[int]) -> None:
    data = (b"+OK\r\n+OK\r\n\n\n\n+FULLRESYNC %s 42\r\n\n$EOF:%s\r\n" % (MASTER_ID.encode(), MARK)
            + b"REDIS0011...payload...")
    ch = rc.RdbChannel(b"10", 6381, [b"pw"])
    ch.start()
    ch.connected()
    prev = 0
    events: list[object] = []
    for cut in sorted(c for c in set(cuts) if c < len(data)) + [len(data)]:
        if cut > prev:
            ch.receive_data(data[prev:cut])
            prev = cut
            while (ev := ch.next_event()) is not None:
                events.append(ev)
    payload = b"".join(e.data for e in events if type(e) is Payload)
    others = [e for e in events if type(e) is not Payload]
    assert payload == b"REDIS0011...payload..."
    assert others == [Keepalive(), Keepalive(), Keepalive(), FullResync(MASTER_ID, 42),
                      Keepalive(), BulkHeader(True, MARK, 0)]
    assert ch.data_to_send() == cmd("AUTH", "pw") + cmd(
        "REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1", "main-ch-client-id",
        "10", "listening-port", "6381") + cmd("PSYNC", "?", "-1")
    ch.loaded()
    assert ch.done
    ch.receive_data(b"anything after the mark")
    assert ch.next_event() is None
