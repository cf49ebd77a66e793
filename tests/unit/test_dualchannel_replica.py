"""Sans-io tests of the replica side of Valkey 8's dual-channel full sync (``+DUALCHANNELSYNC``).

The master is the test: it speaks as a Valkey 8.1 master speaks to a replica that offered
``capa dual-channel`` (valkey src/replication.c: ``+DUALCHANNELSYNC`` on the main connection;
on the rdb channel ``AUTH`` / ``REPLCONF capa eof rdb-only 1 rdb-channel 1 listening-port <port>``
answered ``+OK``, an inline ``SYNC``, ``\\n`` keepalives, ``$ENDOFF:<offset> <replid> <dbid>
<client id>`` and ``$EOF:<mark>`` + RDB + mark; on the main connection ``REPLCONF
set-rdb-client-id <id>`` answered ``+OK`` and ``PSYNC <replid> <offset + 1>`` answered
``+CONTINUE <replid>`` and the stream from ``<offset> + 1``). RDB payloads are written by
pyrepl's real encoder, streams are real commands, and the datasets are compared by digest.
The harness (the recorded two-connection I/O port, the replica node, the snapshot and stream
helpers, the pipe that models TCP backpressure) is the Redis 8 rdb channel's, reused from
tests/unit/test_rdbchannel_replica.py: one fake per port.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl.replication.replica import ReplState
from pyrepl.replication.replica import rdbchannel as rc
from pyrepl.replication.replica.rdbchannel import BulkHeader, Failed, Keepalive, Payload
from pyrepl.replication.wire import EndOffset
from tests.support.cores import cmd
from tests.support.rdbchannel_replica import (
    MARK,
    MASTER_ID,
    Node,
    Pipe,
    big_stream,
    expected_digest,
    snapshot,
)

S = ReplState
C = rc.RdbChState
VALKEY_ID = "8f1c0d2b7a6e5f4039281706f5e4d3c2b1a09f8e"  # the Valkey master's replid
RID = VALKEY_ID.encode()
OFFSET = 1000  # the snapshot's end offset ($ENDOFF): the main connection PSYNCs from 1001
CID = 5  # the rdb channel's client id on the master
RDB = snapshot(OFFSET, VALKEY_ID)
PAYLOAD = b"$EOF:" + MARK + b"\r\n" + RDB + MARK
# the stream after the snapshot: order matters (SET then APPEND, INCR twice, RPUSH, two dbs)
STREAM = (cmd("SELECT", "0") + cmd("SET", "s:1", "x") + cmd("APPEND", "s:1", "y")
          + cmd("INCR", "ctr") + cmd("RPUSH", "l", "c") + cmd("DEL", "h") + cmd("INCR", "ctr")
          + cmd("SELECT", "2") + cmd("SET", "db2", "y") + cmd("APPEND", "db2", "z"))
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# The replica's writes, byte for byte (what a Valkey 8.1 replica writes, plus Redis 8's capa).
CAPA = (b"*9\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$4\r\ncapa\r\n$6\r\npsync2\r\n"
        b"$4\r\ncapa\r\n$16\r\nrdb-channel-repl\r\n$4\r\ncapa\r\n$12\r\ndual-channel\r\n")
RDB_REPLCONF = (b"*9\r\n$8\r\nREPLCONF\r\n$4\r\ncapa\r\n$3\r\neof\r\n$8\r\nrdb-only\r\n$1\r\n1"
                b"\r\n$11\r\nrdb-channel\r\n$1\r\n1\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n")
SET_RDB_CLIENT_ID = b"*3\r\n$8\r\nREPLCONF\r\n$17\r\nset-rdb-client-id\r\n$1\r\n5\r\n"
PSYNC_1001 = b"*3\r\n$5\r\nPSYNC\r\n$40\r\n" + RID + b"\r\n$4\r\n1001\r\n"
ACK_1000 = b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$4\r\n1000\r\n"


CONTINUE = b"+CONTINUE %s\r\n" % RID


def endoff(offset: int = OFFSET, cid: int = CID, dbid: int = 0) -> bytes:
    return b"$ENDOFF:%d %s %d %d\r\n" % (offset, RID, dbid, cid)


def to_dualchannel(n: Node, auth: bool = False) -> None:
    """The main connection's handshake up to +DUALCHANNELSYNC, the rdb channel connected and
    its REPLCONF answered: SYNC went out, the rdb channel waits for $ENDOFF."""
    if n.side.state is S.CONNECT:
        n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n" + (b"+OK\r\n" if auth else b"") + b"+OK\r\n+OK\r\n")
    n.main(b"+DUALCHANNELSYNC\r\n")
    assert n.side.state is S.TRANSFER and n.side.channel.rdbch is not None
    n.side.on_rdb_connected(n.io.rdb_token)
    n.rdb((b"+OK\r\n" if auth else b"") + b"+OK\r\n")
    assert n.side.channel.rdbch.state is C.RECEIVE_FULLRESYNC
    assert n.io.take(n.io.rdb_token).endswith(b"SYNC\r\n")
    n.io.take(n.io.token)


def with_old_data() -> Node:
    """A master with one key (``old``) that REPLICAOF turns into a replica of 127.0.0.1:6380
    (it offers its own history in PSYNC)."""
    n = Node(replicaof=False)
    n.run("SET", "old", "1")
    assert n.run("REPLICAOF", "127.0.0.1", "6380") == b"+OK\r\n"
    return n


def finish(n: Node, order: str, stream: bytes = STREAM, cid: int = CID,
           offset: int = OFFSET, payload: bytes = PAYLOAD) -> None:
    """From SYNC sent: $ENDOFF, the main connection's preamble and stream, and the RDB, the
    RDB loaded before +CONTINUE ("rdb-first") or after the stream began ("continue-first")."""
    n.rdb(b"\n" + endoff(offset, cid))
    n.main(b"+OK\r\n")
    if order == "rdb-first":
        n.rdb(payload)
        assert n.side.state is S.TRANSFER
        n.main(b"\n" + CONTINUE + stream)
    else:
        n.main(b"\n" + CONTINUE + stream[:7])
        n.rdb(payload[:100])
        n.main(stream[7:])
        n.rdb(payload[100:])
    n.drain()


def failed_reasons(n: Node) -> list[str]:
    return [e["reason"] for e in n.events() if e["event"] == "sync_failed"]


# -- the exchange, byte for byte -----------------------------------------------------------------

# (connection, what, bytes): "M>R" the master's bytes, "R>M" what the replica must have written
# by then (exactly: nothing earlier, nothing later), "up" the connection comes up, "tick" the
# cron's second.
AFTER = cmd("SET", "after", "1")
EXCHANGE: list[tuple[str, str, bytes]] = [
    ("main", "up", b""),
    ("main", "R>M", b"*1\r\n$4\r\nPING\r\n"),
    ("main", "M>R", b"+PONG\r\n"),
    ("main", "R>M", b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
     b"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n" + CAPA),
    ("main", "M>R", b"+OK\r\n+OK\r\n+OK\r\n"),
    ("main", "R>M", b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n"),
    ("main", "M>R", b"+DUALCHANNELSYNC\r\n"),
    ("rdb", "up", b""),
    ("rdb", "R>M", b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + RDB_REPLCONF),
    ("rdb", "M>R", b"+OK\r\n"),  # AUTH's reply: SYNC waits for REPLCONF's
    ("rdb", "M>R", b"+OK\r\n"),
    ("rdb", "R>M", b"SYNC\r\n"),
    ("rdb", "M>R", b"\n"),
    ("rdb", "M>R", b"\n"),
    ("rdb", "M>R", endoff()),
    ("main", "R>M", SET_RDB_CLIENT_ID),
    ("main", "M>R", b"+OK\r\n"),
    ("main", "R>M", PSYNC_1001),
    ("main", "M>R", CONTINUE + STREAM[:40]),
    ("rdb", "M>R", PAYLOAD[:300]),
    ("main", "M>R", STREAM[40:]),
    ("rdb", "M>R", PAYLOAD[300:]),
    ("main", "R>M", ACK_1000),  # at once, at the snapshot's offset
    ("main", "M>R", AFTER),
    ("main", "tick", b""),
    ("main", "R>M", cmd("REPLCONF", "ACK", OFFSET + len(STREAM) + len(AFTER))),
]


def test_valkey_exchange_byte_for_byte_on_both_connections() -> None:
    n = Node(("masterauth", ["pw"]))
    n.side.start()
    for i, (conn, what, data) in enumerate(EXCHANGE):
        if what == "up":
            if conn == "main":
                n.side.on_connected(n.io.token)
            else:
                assert n.io.rdb_connects == [(n.io.rdb_token, "127.0.0.1", 6380)]
                assert n.io.rdb_token != n.io.token
                n.side.on_rdb_connected(n.io.rdb_token)
        elif what == "tick":
            n.tick(1000)
        elif what == "M>R":
            (n.main if conn == "main" else n.rdb)(data)
            n.drain()  # the loop runs a requested drain step before the next read
        if what == "R>M":
            continue
        # what the replica wrote since: the R>M records that follow, exactly
        want = {"main": b"", "rdb": b""}
        for c2, w2, d2 in EXCHANGE[i + 1:]:
            if w2 != "R>M":
                break
            want[c2] += d2
        assert n.io.take(n.io.token) == want["main"], (conn, what, data)
        if n.io.rdb_connects:
            assert n.io.take(n.io.rdb_token) == want["rdb"], (conn, what, data)
    s = n.side
    assert s.state is S.CONNECTED and s.channel.rdbch is None and s.channel.fsbuf is None
    assert n.io.rdb_token in n.io.closed and n.io.token not in n.io.closed
    end = OFFSET + len(STREAM) + len(AFTER)
    assert s.stream.master.reploff == end and n.repl.master_repl_offset == end
    assert n.repl.ids.replid == VALKEY_ID
    assert n.digest() == expected_digest(STREAM + AFTER)
    assert n.run("GET", "s:1") == b"$2\r\nxy\r\n" and n.run("GET", "ctr") == b"$1\r\n2\r\n"
    assert n.run("LRANGE", "l", "0", "-1") == \
        b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n1\r\n$1\r\nc\r\n"
    info = n.info()
    assert info["master_link_status"] == "up" and info["slave_repl_offset"] == end
    assert info["replica_full_sync_buffer_size"] == 0
    assert info["replica_full_sync_buffer_peak"] == rc.BLOCK_SIZE
    # sub-replicas and the backlog got the master's bytes from 1001 on
    backlog = n.repl.backlog
    assert b"".join(backlog.read_from(backlog.first_byte_offset)) == \
        (STREAM + AFTER)[-backlog.histlen:]
    logs = n.logs()
    for text in ("Dual channel replication: PSYNC is not possible, initialize RDB channel.",
                 f"Dual channel replication: received the snapshot end offset 1000 of "
                 f"{VALKEY_ID}, rdb client id 5",
                 f"Dual channel replication: Trying a partial resynchronization using main "
                 f"channel (request {VALKEY_ID}:1001).",
                 "MASTER <-> REPLICA sync: Finished with success"):
        assert text in logs, text


def test_handshake_without_auth_with_masteruser_and_an_announced_port() -> None:
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n")
    assert n.io.take(n.io.token) == (
        b"*1\r\n$4\r\nPING\r\n*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6381\r\n"
        + CAPA)
    n.main(b"+OK\r\n+OK\r\n+DUALCHANNELSYNC\r\n")
    assert n.io.take(n.io.token) == cmd("PSYNC", "?", "-1")  # nothing more on main
    assert n.run("ROLE").endswith(b"$4\r\nsync\r\n:-1\r\n")
    n.side.on_rdb_connected(n.io.rdb_token)
    assert n.io.take(n.io.rdb_token) == RDB_REPLCONF  # no AUTH, no main-ch-client-id
    n.rdb(b"+OK\r\n")
    assert n.io.take(n.io.rdb_token) == b"SYNC\r\n"  # inline, as Valkey writes it
    m = Node(("masteruser", ["u"]), ("masterauth", ["p"]), ("replica-announce-port", ["7777"]))
    m.side.start()
    m.side.on_connected(m.io.token)
    m.main(b"+PONG\r\n+OK\r\n+OK\r\n+OK\r\n+DUALCHANNELSYNC\r\n")
    m.side.on_rdb_connected(m.io.rdb_token)
    assert m.io.take(m.io.rdb_token) == cmd("AUTH", "u", "p") + cmd(
        "REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1", "listening-port", "7777")
    m.rdb(b"+OK\r\n")
    assert m.io.take(m.io.rdb_token) == b""  # AUTH's reply: REPLCONF's is still awaited
    m.rdb(b"+OK\r\n\n" + b"$ENDOFF:0 %s 0 18446744073709551615\r\n" % RID)
    assert m.io.take(m.io.rdb_token) == b"SYNC\r\n"
    # the client id is sent as the master wrote it (an unsigned 64-bit id)
    assert m.io.take(m.io.token).endswith(
        cmd("REPLCONF", "set-rdb-client-id", "18446744073709551615"))


# -- the two orders of (RDB loaded, +CONTINUE) ---------------------------------------------------

@pytest.mark.parametrize("order", ["continue-first", "rdb-first"])
def test_both_orders_give_the_same_dataset_offsets_acks_and_events(order: str) -> None:
    n = with_old_data()
    to_dualchannel(n)
    finish(n, order)
    s = n.side
    assert s.state is S.CONNECTED and s.channel.fsbuf is None and s.channel.rdbch is None
    assert not s.channel.awaits_main
    assert n.digest() == expected_digest(STREAM)  # the old key went with the old dataset
    assert n.run("GET", "s:1") == b"$2\r\nxy\r\n" and n.run("GET", "ctr") == b"$1\r\n2\r\n"
    assert s.stream.master.reploff == OFFSET + len(STREAM)
    assert n.repl.master_repl_offset == OFFSET + len(STREAM) and n.repl.ids.replid == VALKEY_ID
    assert n.io.take(n.io.token) == SET_RDB_CLIENT_ID + PSYNC_1001 + ACK_1000
    assert n.io.take(n.io.rdb_token) == b""
    assert n.io.rdb_token in n.io.closed
    n.main(cmd("SET", "after", "1"))  # streaming directly now
    assert s.stream.master.reploff == OFFSET + len(STREAM) + len(cmd("SET", "after", "1"))
    evs = n.events()
    names = [e["event"] for e in evs]
    assert names == ["psync_sent", "psync_reply", "rdb_first_byte", "rdb_received", "load_done",
                     "link_up", "buffer_drained", "caught_up"]
    assert len({e["sync_id"] for e in evs}) == 1
    by = {e["event"]: e for e in evs}
    assert by["psync_reply"]["result"] == "dualchannel"
    assert by["psync_reply"]["mode"] == "dual-channel"
    assert by["rdb_first_byte"]["mode"] == "dual-channel"
    assert by["rdb_first_byte"]["offset"] == OFFSET
    assert by["rdb_first_byte"]["replid"] == VALKEY_ID
    payload_bytes = len(RDB) + len(MARK)  # Redis counts the mark as read
    assert by["rdb_received"]["mode"] == "dual-channel"
    assert by["rdb_received"]["bytes"] == payload_bytes
    assert by["load_done"]["mode"] == "dual-channel" and by["load_done"]["keys"] == 7
    assert by["link_up"]["mode"] == "dual-channel" and by["link_up"]["result"] == "full"
    assert by["link_up"]["offset"] == OFFSET and by["link_up"]["replid"] == VALKEY_ID
    assert by["buffer_drained"]["bytes"] == len(STREAM)
    assert by["buffer_drained"]["offset"] == OFFSET + len(STREAM)
    assert by["buffer_drained"]["buffer_peak"] == rc.BLOCK_SIZE
    assert by["caught_up"]["offset"] == OFFSET + len(STREAM) + len(cmd("SET", "after", "1"))


def test_rdb_loaded_first_waits_for_continue_and_swaps_nothing_before_it() -> None:
    n = with_old_data()
    before = n.digest()
    to_dualchannel(n)
    n.rdb(endoff())
    n.rdb(PAYLOAD)  # the whole RDB before the main connection's +OK
    s = n.side
    assert s.channel.rdbch is None and n.io.rdb_token in n.io.closed  # done: closed at once
    assert s.state is S.TRANSFER and s.channel.awaits_main
    assert n.digest() == before and n.run("GET", "old") == b"$1\r\n1\r\n"
    assert n.io.take(n.io.token) == SET_RDB_CLIENT_ID  # no ACK: the link is not up
    info = n.info()
    assert info["master_link_status"] == "down" and info["master_sync_in_progress"] == 1
    assert [e["event"] for e in n.events()][-1] == "rdb_first_byte"
    # the master closing the finished rdb channel is no failure
    n.side.on_rdb_closed(n.io.rdb_token, "")
    n.main(b"+OK\r\n")
    assert n.io.take(n.io.token) == PSYNC_1001
    assert s.state is S.TRANSFER and n.digest() == before
    n.main(b"\n\n")  # keepalives before +CONTINUE
    assert s.state is S.TRANSFER and n.digest() == before
    n.main(CONTINUE[:5])
    assert s.state is S.TRANSFER  # a partial +CONTINUE line is not one
    n.main(CONTINUE[5:] + STREAM[:9])  # +CONTINUE and a partial first command: the swap
    assert s.state is S.CONNECTED
    assert n.io.take(n.io.token) == ACK_1000
    n.drain()
    n.main(STREAM[9:])
    n.drain()
    assert n.digest() == expected_digest(STREAM)
    assert s.stream.master.reploff == OFFSET + len(STREAM) and failed_reasons(n) == []


def test_continue_alone_after_the_rdb_drains_an_empty_buffer() -> None:
    n = Node()
    to_dualchannel(n)
    n.rdb(endoff() + PAYLOAD)
    n.main(b"+OK\r\n")
    n.main(CONTINUE)
    s = n.side
    assert s.state is S.CONNECTED and s.channel.fsbuf is None and n.io.drains == []
    assert n.io.take(n.io.token).endswith(ACK_1000)
    ev = [e for e in n.events() if e["event"] == "buffer_drained"]
    assert ev and ev[0]["bytes"] == 0 and ev[0]["offset"] == OFFSET
    n.main(STREAM)
    assert n.digest() == expected_digest(STREAM)
    assert s.stream.master.reploff == OFFSET + len(STREAM)


# -- keepalives ----------------------------------------------------------------------------------

def test_keepalives_before_endoff_keep_the_transfer_alive() -> None:
    n = Node()
    to_dualchannel(n)
    for _ in range(9):  # 90 s of the master's fork delay, a newline every 10 s
        n.tick(10_000)
        n.rdb(b"\n")
    s = n.side
    assert s.state is S.TRANSFER and failed_reasons(n) == []
    assert n.io.take(n.io.token) == b""  # no set-rdb-client-id before $ENDOFF
    n.rdb(endoff() + b"\n\n")  # and after it, before the payload header
    assert n.io.take(n.io.token) == SET_RDB_CLIENT_ID
    n.main(b"+OK\r\n\n")
    n.main(b"\n" + CONTINUE + STREAM)
    n.rdb(PAYLOAD)
    n.drain()
    assert s.state is S.CONNECTED and n.digest() == expected_digest(STREAM)
    assert s.stream.master.reploff == OFFSET + len(STREAM)


def test_silence_before_endoff_times_out() -> None:
    n = Node()
    to_dualchannel(n)
    n.tick(1000)
    n.tick(61_000)
    assert failed_reasons(n) == ["timeout"]


def test_keepalives_before_continue_count_as_io_for_repl_timeout() -> None:
    n = Node()
    to_dualchannel(n)
    n.rdb(endoff() + PAYLOAD)  # the RDB loaded: the rdb channel is closed, only main talks
    n.main(b"+OK\r\n")
    for second in range(10, 100, 10):  # 90 s > repl-timeout, a newline every 10 s
        n.tick(10_000)
        assert failed_reasons(n) == [], f"timed out at {second} s"
        n.main(b"\n")
    n.main(CONTINUE + STREAM)
    n.drain()
    assert n.side.state is S.CONNECTED and n.digest() == expected_digest(STREAM)


# -- failures: a clean retry, nothing half-applied -----------------------------------------------

#: each failure and the reason of the one ``sync_failed`` it causes
FAILURES = {
    "rdb-connect-failed": "rdb-channel-connect-error",
    "rdb-replconf-err": "rdb-channel-replconf-error",
    "main-bytes-before-endoff": "psync-error",
    "bad-endoff": "psync-error",
    "short-endoff": "psync-error",
    "fullresync-on-rdb": "psync-error",
    "rdb-lost-before-endoff": "rdb-channel-lost",
    "main-lost-before-endoff": "main-channel-lost",
    "timeout": "timeout",
    "setid-err": "psync-error",
    "main-lost-awaiting-setid": "main-channel-lost",
    "psync-fullresync": "psync-error",
    "psync-err": "psync-error",
    "main-lost-mid-payload": "main-channel-lost",
    "rdb-lost-mid-payload": "rdb-channel-lost",
    "bad-crc": "load-error",
    # the RDB loaded first, the main connection has not been given its stream yet
    "setid-err-after-load": "psync-error",
    "main-lost-after-load": "main-channel-lost",
    "timeout-after-load": "timeout",
    "psync-fullresync-after-load": "psync-error",
    "psync-err-after-load": "psync-error",
    "main-lost-awaiting-continue": "main-channel-lost",
}
Step = Callable[[], object]


def _fail(n: Node, failure: str) -> None:
    """A dual-channel sync driven step by step; after the step at which ``failure`` can
    strike, it does."""
    s = n.side
    reset = "Connection reset by peer"
    rdb_first = failure.endswith("-after-load") or failure == "main-lost-awaiting-continue"

    def start() -> None:
        s.on_connected(n.io.token)
        n.main(b"+PONG\r\n+OK\r\n+OK\r\n+DUALCHANNELSYNC\r\n")

    def main_lost() -> None:
        s.on_closed(n.io.token, reset)

    steps: list[tuple[Step, dict[str, Step]]] = [
        (start, {"rdb-connect-failed": lambda: s.on_rdb_connect_failed(n.io.rdb_token,
                                                                      "Connection refused")}),
        (lambda: s.on_rdb_connected(n.io.rdb_token),
         {"rdb-replconf-err": lambda: n.rdb(b"-ERR Unrecognized REPLCONF option: "
                                            b"rdb-channel\r\n")}),
        (lambda: n.rdb(b"+OK\r\n\n"),  # SYNC sent; a keepalive while the master forks
         {"main-bytes-before-endoff": lambda: n.main(cmd("SELECT", "0")),
          "bad-endoff": lambda: n.rdb(b"$ENDOFF:abc\r\n"),
          "short-endoff": lambda: n.rdb(b"$ENDOFF:1000 %s 0\r\n" % RID),
          "fullresync-on-rdb": lambda: n.rdb(b"+FULLRESYNC %s 1000\r\n" % RID),
          "rdb-lost-before-endoff": lambda: s.on_rdb_closed(n.io.rdb_token, ""),
          "main-lost-before-endoff": main_lost,
          "timeout": lambda: (n.tick(1000), n.tick(61_000))}),
        (lambda: n.rdb(endoff()),
         {"setid-err": lambda: n.main(b"-ERR Unrecognized RDB client id 5\r\n"),
          "main-lost-awaiting-setid": main_lost}),
    ]
    if rdb_first:
        steps += [
            (lambda: n.rdb(PAYLOAD),
             {"setid-err-after-load": lambda: n.main(b"-ERR Unrecognized RDB client id 5\r\n"),
              "main-lost-after-load": main_lost,
              "timeout-after-load": lambda: (n.tick(1000), n.tick(61_000))}),
            (lambda: n.main(b"+OK\r\n"),
             {"psync-fullresync-after-load":
              lambda: n.main(b"+FULLRESYNC %s 2000\r\n" % RID),
              "psync-err-after-load": lambda: n.main(b"-ERR Can't PSYNC\r\n"),
              "main-lost-awaiting-continue": main_lost}),
        ]
    else:
        steps += [
            (lambda: n.main(b"+OK\r\n"),
             {"psync-fullresync": lambda: n.main(b"+FULLRESYNC %s 2000\r\n" % RID),
              "psync-err": lambda: n.main(b"-NOMASTERLINK Can't SYNC while not connected "
                                          b"with my master\r\n")}),
            # +CONTINUE and a stream that must never be applied
            (lambda: n.main(b"\n" + CONTINUE + cmd("SELECT", "0") + cmd("SET", "during", "x")),
             {}),
            (lambda: n.rdb(PAYLOAD[:len(PAYLOAD) // 2]),
             {"main-lost-mid-payload": main_lost,
              "rdb-lost-mid-payload": lambda: s.on_rdb_closed(n.io.rdb_token, reset),
              "bad-crc": lambda: n.rdb(PAYLOAD[len(PAYLOAD) // 2:-41]
                                       + bytes([PAYLOAD[-41] ^ 0xFF]) + MARK)}),
        ]
    for step, strikes in steps:
        step()
        assert failed_reasons(n) == [], (failure, "a step before the failure failed")
        if failure in strikes:
            strikes[failure]()
            return
    raise AssertionError(failure)


@pytest.mark.parametrize("failure", FAILURES)
def test_failure_applies_nothing_closes_both_connections_and_retries(failure: str) -> None:
    n = with_old_data()
    before = n.digest()
    cached = n.side.stream.cached
    _fail(n, failure)
    s = n.side
    assert failed_reasons(n) == [FAILURES[failure]]  # the failure, and only it
    assert n.digest() == before  # the old dataset, untouched (even with the RDB loaded)
    assert n.run("GET", "old") == b"$1\r\n1\r\n" and n.run("GET", "during") == b"$-1\r\n"
    assert s.channel.fsbuf is None and s.channel.rdbch is None
    assert s.full_sync_buffer_bytes() == 0 and not s.channel.awaits_main
    assert not s.load.loading
    assert n.io.rdb_connects[-1][0] in n.io.closed  # the rdb channel is closed
    assert s.stream.cached is cached  # still offered: PSYNC history kept
    # a clean retry: a new main connection at once (CONNECTING) or within the cron second
    if s.state is S.CONNECT:
        n.tick(1000)
    assert s.state is S.CONNECTING
    assert n.io.connects[-2][0] in n.io.closed  # the failed main connection is closed
    # the retry works (another client id), with the stream applied exactly once
    stream = cmd("SELECT", "0") + cmd("SET", "during", "y") + cmd("INCR", "n")
    rdb_token = n.io.rdb_token
    n.io.take(n.io.token)
    to_dualchannel(n)
    assert n.io.rdb_token != rdb_token
    finish(n, "continue-first", stream, cid=6)
    assert s.state is S.CONNECTED
    assert n.digest() == expected_digest(stream)
    assert s.stream.master.reploff == OFFSET + len(stream)
    assert n.io.take(n.io.token) == cmd("REPLCONF", "set-rdb-client-id", "6") + PSYNC_1001 \
        + ACK_1000
    assert failed_reasons(n) == [FAILURES[failure]]


def test_failure_logs() -> None:
    n = Node()
    to_dualchannel(n)
    n.rdb(endoff())
    n.main(b"-ERR Unrecognized RDB client id 5\r\n")
    assert "Dual channel replication: Primary does not understand REPLCONF identify: -ERR " \
           "Unrecognized RDB client id 5" in n.logs()
    assert "Aborting dual channel sync. Main channel psync result: -ERR Unrecognized RDB " \
           "client id 5" in n.logs()
    ev = [e for e in n.events() if e["event"] == "sync_failed"][-1]
    assert ev["error"] == "-ERR Unrecognized RDB client id 5"
    n = Node()
    to_dualchannel(n)
    n.rdb(b"$ENDOFF:abc\r\n")
    assert "Received unexpected $ENDOFF response: $ENDOFF:abc" in n.logs()
    assert [e["error"] for e in n.events() if e["event"] == "sync_failed"] == ["$ENDOFF:abc"]
    n = Node()
    to_dualchannel(n)
    n.rdb(endoff())
    n.main(b"+OK\r\n+FULLRESYNC %s 2000\r\n" % RID)
    assert f"Aborting dual channel sync. Main channel psync result: PSYNC on the main channel: " \
           f"+FULLRESYNC {VALKEY_ID} 2000" in n.logs()


def test_unterminated_bytes_before_endoff_fail_the_sync() -> None:
    n = Node()
    to_dualchannel(n)
    n.main(b"+OK")  # not a line yet, but no byte may come before $ENDOFF: failed at once
    assert failed_reasons(n) == ["psync-error"]
    assert n.side.channel.rdbch is None and not n.side.channel.buffering


# -- backpressure on the main connection after +CONTINUE -----------------------------------------

@pytest.mark.parametrize("order", ["continue-first", "rdb-first"])
def test_buffer_limit_pauses_the_main_connection_and_nothing_is_lost(order: str) -> None:
    n = Node(("replica-full-sync-buffer-limit", ["1"]))  # one block is over the limit
    to_dualchannel(n)
    n.rdb(endoff())
    n.main(b"+OK\r\n")
    stream = big_stream(300)
    pipe = Pipe(n, chunk=16384)
    if order == "rdb-first":
        n.rdb(PAYLOAD)
    pipe.write(b"\n" + CONTINUE + stream)
    pipe.pump()
    s = n.side
    if order == "continue-first":
        assert pipe.reads == 1 and n.io.token in n.io.paused  # one read, then backpressure
        assert s.channel.fsbuf.used == pipe.delivered - len(b"\n" + CONTINUE)
        assert s.state is S.TRANSFER
        n.rdb(PAYLOAD)
    assert s.state is S.CONNECTED
    steps = 0
    while n.io.drains or pipe.pending:
        steps += 1
        assert steps < 1000
        n.drain(1)
        pipe.pump()
    assert not pipe.pending and s.channel.fsbuf is None
    assert n.digest() == expected_digest(stream)
    assert s.stream.master.reploff == OFFSET + len(stream)
    assert n.info()["replica_full_sync_buffer_peak"] >= rc.BLOCK_SIZE


# -- the dialect is the master's answer ----------------------------------------------------------

def test_a_redis_8_master_still_gets_the_redis_8_rdb_channel_after_the_new_capa_line() -> None:
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n")
    assert n.io.take(n.io.token).endswith(CAPA)  # the same capa line for either master
    n.main(b"+OK\r\n+OK\r\n+RDBCHANNELSYNC 10\r\n")
    n.io.take(n.io.token)
    n.side.on_rdb_connected(n.io.rdb_token)
    assert n.io.take(n.io.rdb_token) == cmd(
        "REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1", "main-ch-client-id",
        "10", "listening-port", "6381")
    n.rdb(b"+OK\r\n")
    assert n.io.take(n.io.rdb_token) == cmd("PSYNC", "?", "-1")  # not SYNC
    stream = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.main(stream)  # Redis 8: the main connection streams at once, no preamble
    n.rdb(b"\n+FULLRESYNC %s 0\r\n$EOF:" % MASTER_ID.encode() + MARK + b"\r\n" + snapshot(0)
          + MARK)
    n.drain()
    assert n.side.state is S.CONNECTED
    assert n.digest() == expected_digest(stream)
    assert n.side.stream.master.reploff == len(stream)
    assert n.io.take(n.io.token) == cmd("REPLCONF", "ACK", "0")  # no set-rdb-client-id
    evs = n.events()
    assert [e["mode"] for e in evs if e["event"] in ("psync_reply", "link_up")] == \
        ["rdb-channel", "rdb-channel"]


def test_endoff_on_a_redis_8_rdb_channel_fails_the_sync() -> None:
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n+RDBCHANNELSYNC 10\r\n")
    n.side.on_rdb_connected(n.io.rdb_token)
    n.rdb(b"+OK\r\n" + endoff())
    assert failed_reasons(n) == ["psync-error"]
    assert n.side.channel.rdbch is None and n.side.channel.fsbuf is None


# -- the rdb channel protocol object, Valkey's dialect -------------------------------------------

def test_rdb_channel_object_in_valkey_dialect() -> None:
    ch = rc.RdbChannel(None, 6381, [b"pw"])
    ch.start()
    ch.connected()
    assert ch.data_to_send() == cmd("AUTH", "pw") + RDB_REPLCONF
    ch.receive_data(b"+OK\r\n")
    assert ch.data_to_send() == b"" and ch.state is C.RECEIVE_REPLCONF_REPLY
    ch.receive_data(b"+OK\r\n\n")
    assert ch.data_to_send() == b"SYNC\r\n" and ch.state is C.RECEIVE_FULLRESYNC
    ch.receive_data(b"\r\n" + endoff(OFFSET, 42, 3) + b"\n$EOF:" + MARK + b"\r\nREDIS")
    events = []
    while (ev := ch.next_event()) is not None:
        events.append(ev)
    assert events == [Keepalive(), Keepalive(), EndOffset(OFFSET, VALKEY_ID, 3, 42), Keepalive(),
                      BulkHeader(True, MARK, 0), Payload(b"REDIS")]
    assert (ch.replid, ch.offset, ch.state) == (VALKEY_ID, OFFSET, C.RDB_LOADING)
    ch.loaded()
    assert ch.done and ch.data_to_send() == b""


@pytest.mark.parametrize("line", [b"+FULLRESYNC %s 0" % RID, b"$ENDOFF:abc",
                                  b"$ENDOFF:1 %s 0" % RID, b"-ERR no"])
def test_rdb_channel_object_in_valkey_dialect_fails_on_anything_but_endoff(line: bytes) -> None:
    ch = rc.RdbChannel(None, 6381)
    ch.start()
    ch.connected()
    ch.receive_data(b"+OK\r\n" + line + b"\r\n")
    ev = ch.next_event()
    assert type(ev) is Failed and ev.reason == "psync-error" and ch.done
    assert ev.error == line.decode()


@pytest.mark.parametrize(("line", "want"), [
    (b"$ENDOFF:1000 %s 0 5" % RID, EndOffset(1000, VALKEY_ID, 0, 5)),
    (b"$ENDOFF:0 %s 15 18446744073709551615" % RID,
     EndOffset(0, VALKEY_ID, 15, 18446744073709551615)),
    (b"$ENDOFF:abc", None),
    (b"$ENDOFF:", None),
    (b"$ENDOFF:1000 %s 0" % RID, None),
    (b"$ENDOFF:1000 %s x 5" % RID, None),
    (b"$ENDOFF:1000 %s 0 -5" % RID, None),
    (b"$ENDOFF:1000 %s 0 5" % (RID + b"X"), None),  # a replid over 40 characters
    (b"+ENDOFF:1000 %s 0 5" % RID, None),
])
def test_end_offset_parse(line: bytes, want: EndOffset | None) -> None:
    assert EndOffset.parse(line) == want
    if want is not None:
        assert want.format() == line + b"\r\n"


def test_dualchannelsync_moves_the_main_connection_to_transfer() -> None:
    n = Node()
    n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n+OK\r\n+OK\r\n")
    assert n.side.state is S.RECEIVE_PSYNC_REPLY
    n.main(b"\n\n+DUALCHANNELSYNC\r\n")  # keepalives before the PSYNC reply
    assert n.side.state is S.TRANSFER
    assert n.side.load.mode == "dual-channel" and n.side.channel.awaits_main
    assert n.io.rdb_connects == [(n.io.rdb_token, "127.0.0.1", 6380)]


# -- any split, any interleaving -----------------------------------------------------------------

HYP_STREAM = big_stream(40, value_size=64) + cmd("SELECT", "2") + cmd("INCR", "db2:ctr")
HYP_RDB = b"\n\n" + endoff() + b"\n" + PAYLOAD  # after SYNC: keepalives, $ENDOFF, one more
HYP_SETID_REPLY = b"+OK\r\n"
HYP_MAIN = b"\n\n" + CONTINUE + HYP_STREAM  # after PSYNC: keepalives, +CONTINUE, the stream


def _hyp_run(rdb_cuts: list[int], main_cuts: list[int], order: list[bool],
             drains: list[bool]) -> Node:
    """One dual-channel sync with the master's bytes cut at ``*_cuts`` and interleaved by
    ``order``; a main piece goes out only once the replica wrote the request it answers."""
    n = Node()
    to_dualchannel(n)

    def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
        out, prev = [], 0
        for cut in sorted(c for c in set(cuts) if 0 < c < len(data)) + [len(data)]:
            out.append(data[prev:cut])
            prev = cut
        return out

    rp = pieces(HYP_RDB, rdb_cuts)
    # the reply to set-rdb-client-id is cut apart from what answers PSYNC: the master sends
    # that only after the PSYNC the reply triggers
    mp = pieces(HYP_SETID_REPLY, main_cuts) + pieces(HYP_MAIN, [c - len(HYP_SETID_REPLY)
                                                                 for c in main_cuts])
    sent = b""
    i = 0
    while mp or rp:
        sent += n.io.take(n.io.token)
        main_ok = bool(mp) and SET_RDB_CLIENT_ID in sent
        use_main = main_ok and (not rp or order[i % len(order)])
        if use_main:
            n.main(mp.pop(0))
        else:
            assert rp, "the replica never asked for the main connection's bytes"
            n.rdb(rp.pop(0))
        if drains[i % len(drains)]:
            n.drain()
        i += 1
    n.drain()
    sent += n.io.take(n.io.token)
    assert sent == SET_RDB_CLIENT_ID + PSYNC_1001 + ACK_1000
    assert n.io.take(n.io.rdb_token) == b""
    return n


def _outcome(n: Node) -> tuple[object, ...]:
    s = n.side
    return (s.state, n.digest(), s.stream.master.reploff, n.repl.master_repl_offset,
            n.repl.ids.replid, n.info()["slave_repl_offset"], s.channel.fsbuf is None,
            tuple(failed_reasons(n)))


@cache
def unsplit() -> tuple[object, ...]:
    """The outcome of unsplit delivery: the whole rdb channel, then the main connection's
    reply to set-rdb-client-id, then the rest of it."""
    return _outcome(_hyp_run([], [], [False], [False]))


def test_unsplit_delivery_is_the_reference() -> None:
    end = OFFSET + len(HYP_STREAM)
    assert unsplit() == (S.CONNECTED, expected_digest(HYP_STREAM), end, end, VALKEY_ID, end,
                         True, ())
    n = _hyp_run([], [], [True], [True])  # the main's bytes as soon as they may come
    assert _outcome(n) == unsplit()


@SETTINGS
@given(st.lists(st.integers(0, len(HYP_RDB)), max_size=10),
       st.lists(st.integers(0, len(HYP_SETID_REPLY) + len(HYP_MAIN)), max_size=10),
       st.lists(st.booleans(), min_size=1, max_size=30),
       st.lists(st.booleans(), min_size=1, max_size=8))
def test_any_split_and_interleaving_of_the_two_connections(
        rdb_cuts: list[int], main_cuts: list[int], order: list[bool],
        drains: list[bool]) -> None:
    """The RDB may load before, while or after the main connection's +OK, +CONTINUE and
    stream arrive, in any pieces: the dataset and the offsets are those of unsplit delivery."""
    n = _hyp_run(rdb_cuts, main_cuts, order, drains)
    assert _outcome(n) == unsplit()
    assert [e["event"] for e in n.events()][:7] == [
        "psync_sent", "psync_reply", "rdb_first_byte", "rdb_received", "load_done", "link_up",
        "buffer_drained"]
