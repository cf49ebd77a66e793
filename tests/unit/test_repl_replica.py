"""Sans-io tests of the replica side: the REPL_STATE_* machine driven with real bytes.

The "master" here is the test itself: it answers with the exact bytes a Redis 7.0.15 master
sends (see ../shared/redis-wire), RDB payloads written by pyrepl's real encoder from a real
dataset, and a replication stream of real commands. The I/O shell is replaced by a recorder of
what the side asks for (connect / send / close), which is the side's whole I/O interface.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl import native
from pyrepl.config import Config
from pyrepl.core.host import Host
from pyrepl.core.info import section_persistence
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.replication.ids import NULL_REPLID
from pyrepl.replication.manager import Replication
from pyrepl.replication.replica import (
    TRANSITIONS,
    Input,
    ReplicaSide,
    ReplProtocolError,
    ReplState,
    states,
)
from tests.support.checks import check_every_move
from tests.support.cores import NOW, cmd, run
from tests.support.memnet import close_in_memory, shell_write
from tests.support.replica_side import (
    MARK,
    MASTER_ID,
    RDB,
    REPLIES,
    SRC,
    Node,
    full_sync_bytes,
    source_dataset,
    synced_node,
    with_sub_replica,
)

S = ReplState
NEW_ID = "fbcd4a99c9f32dd5e1610978cc2385f800dafcb9"
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


SRC_DIGEST = dataset_digest(SRC.dbs, NOW)
HANDSHAKE_OUT = (cmd("PING"),
                 cmd("REPLCONF", "listening-port", "6381") + cmd("REPLCONF", "capa", "eof",
                                                                 "capa", "psync2"),
                 cmd("PSYNC", "?", "-1"))
STREAM = (cmd("SELECT", "0") + cmd("SET", "after", "1") + cmd("MULTI") + cmd("INCR", "n")
          + cmd("RPUSH", "l", "z") + cmd("EXEC") + cmd("SELECT", "3") + cmd("DEL", "db3"))


def apply_stream_to_source(stream: bytes) -> str:
    """Digest of the source dataset after running the stream on a copy (what the master has)."""
    core = source_dataset()
    c = core.connection_made()
    c.receive_data(stream)
    return dataset_digest(core.dbs, NOW)


# -- the table ------------------------------------------------------------------------------

def test_every_missing_transition_is_a_typed_error() -> None:
    n = Node()
    check_every_move(n.side, n.side.go, TRANSITIONS, ReplState, Input, ReplProtocolError)


def test_the_handler_tables_cover_the_states_the_table_names() -> None:
    """The side's state -> handler tables against the table and the groups of states.py:
    bytes read have a reader in exactly the states DATA stays in; a closed connection, a
    timeout and a protocol error have a handler in every state with a connection; each
    reply state has its handshake handler."""
    side = Node().side
    assert set(side._readers) == {s for s, i in TRANSITIONS if i is Input.DATA}
    assert set(side._readers) == states.LINE_STATES | {S.TRANSFER, S.CONNECTED}
    for table in (side._closers, side._timeouts, side._protocol_failures):
        assert set(table) == states.LINKED
    assert set(side.handshake._replies) == states.LINE_STATES
    assert states.HANDSHAKE == {s for s in S if S.RECEIVE_PING_REPLY.value <= s.value
                                <= S.RECEIVE_PSYNC_REPLY.value} | {S.RECEIVE_RESUME_REPLY}
    assert states.LINKED == set(S) - {S.NONE, S.CONNECT}


def test_data_in_a_state_that_reads_nothing_is_a_protocol_error() -> None:
    n = Node()
    assert n.side.state is S.CONNECT
    with pytest.raises(ReplProtocolError):
        n.side.receive_data(b"+PONG\r\n")
    n.side.start()
    assert n.side.state is S.CONNECTING
    n.feed(b"+PONG\r\n")  # through the I/O entry point: logged, link dropped, retried later
    assert n.side.state is S.CONNECT
    assert n.io.closed[-1] == n.io.token
    assert any("state machine error" in msg for _, msg in n.core.log.lines)


# -- handshake bytes ------------------------------------------------------------------------

def test_handshake_bytes_are_redis_7_0_15s() -> None:
    n = Node()
    assert n.io.connects == []
    n.side.start()
    assert n.io.connects == [(1, "127.0.0.1", 6380)]
    assert n.side.state is S.CONNECTING
    n.side.on_connected(1)
    assert n.io.take() == HANDSHAKE_OUT[0]
    assert n.side.state is S.RECEIVE_PING_REPLY
    n.feed(b"+PONG\r\n")
    assert n.io.take() == HANDSHAKE_OUT[1]  # pipelined in one write
    assert n.side.state is S.RECEIVE_PORT_REPLY  # no masterauth: no AUTH reply to wait for
    n.feed(b"+OK\r\n")
    assert n.side.state is S.RECEIVE_CAPA_REPLY  # no replica-announce-ip
    n.feed(b"+OK\r\n")
    assert n.io.take() == HANDSHAKE_OUT[2]  # fresh node from config: no cached master
    assert n.side.state is S.RECEIVE_PSYNC_REPLY
    lines = [msg for _, msg in n.core.log.lines]
    for text in ("MASTER <-> REPLICA sync started",
                 "Non blocking connect for SYNC fired the event.",
                 "Master replied to PING, replication can continue...",
                 "Partial resynchronization not possible (no cached master)"):
        assert text in lines


def test_handshake_with_auth_user_and_announce_ip() -> None:
    n = Node(("masterauth", ["pw"]), ("masteruser", ["repl"]),
             ("replica-announce-ip", ["10.0.0.7"]), ("replica-announce-port", ["7777"]))
    n.connect()
    assert n.io.take() == cmd("PING")
    n.feed(b"-NOAUTH Authentication required.\r\n")  # accepted: AUTH follows
    assert n.io.take() == (cmd("AUTH", "repl", "pw") + cmd("REPLCONF", "listening-port", "7777")
                           + cmd("REPLCONF", "ip-address", "10.0.0.7")
                           + cmd("REPLCONF", "capa", "eof", "capa", "psync2"))
    assert n.side.state is S.RECEIVE_AUTH_REPLY
    n.feed(b"+OK\r\n+OK\r\n")
    assert n.side.state is S.RECEIVE_IP_REPLY
    n.feed(b"-ERR unknown option\r\n")  # non critical
    assert n.side.state is S.RECEIVE_CAPA_REPLY
    n.feed(b"+OK\r\n")
    assert n.io.take() == cmd("PSYNC", "?", "-1")
    assert "(Non critical) Master does not understand REPLCONF ip-address: -ERR unknown option" \
        in [m for _, m in n.core.log.lines]


def test_auth_error_fails_the_handshake_and_the_cron_retries() -> None:
    n = Node(("masterauth", ["bad"]))
    n.connect()
    n.feed(b"-NOAUTH Authentication required.\r\n-WRONGPASS invalid username-password pair "
           b"or user is disabled.\r\n+OK\r\n")
    assert n.side.state is S.CONNECT
    assert n.io.closed[-1] == 1
    assert "Unable to AUTH to MASTER: -WRONGPASS invalid username-password pair or user is " \
           "disabled." in [m for _, m in n.core.log.lines]
    ev = n.repl.events.recent[-1]
    assert ev["event"] == "sync_failed" and ev["reason"] == "auth-error"
    n.tick(1000)
    assert n.side.state is S.CONNECTING and n.io.connects[-1][0] == 2


def test_ping_error_reply_fails() -> None:
    n = Node()
    n.connect()
    n.feed(b"-ERR something else\r\n")
    assert n.side.state is S.CONNECT
    assert "Error reply to PING from master: '-ERR something else'" in \
        [m for _, m in n.core.log.lines]


# -- full sync ------------------------------------------------------------------------------

@pytest.mark.parametrize("diskless", [False, True])
def test_full_sync_loads_the_dataset_and_goes_online(diskless: bool) -> None:
    n = Node()
    n.core.dbs[0].data[b"old"] = b"data"  # what this replica held before (it is read-only)
    n.connect()
    n.feed(full_sync_bytes(diskless, offset=1000))
    s = n.side
    assert s.state is S.CONNECTED
    assert n.digest() == SRC_DIGEST  # the old key is gone, the master's dataset is in
    sent = n.io.take()
    expected = b"".join(HANDSHAKE_OUT)
    if diskless:  # the first ACK right after loading puts the replica online
        expected += cmd("REPLCONF", "ACK", "1000")
    assert sent == expected
    info = n.info()
    assert info["master_link_status"] == "up"
    assert info["slave_repl_offset"] == 1000 and info["slave_read_repl_offset"] == 1000
    assert info["master_replid"] == MASTER_ID and info["master_repl_offset"] == 1000
    assert info["master_replid2"] == NULL_REPLID and info["second_repl_offset"] == -1
    assert info["repl_backlog_active"] == 1
    assert info["repl_backlog_first_byte_offset"] == 1001
    mc = [c for c in n.core.clients.values() if c.kind == "master"]
    assert len(mc) == 1 and mc[0].flags == "M"
    evs = n.events()
    assert evs == ["psync_sent", "psync_reply", "rdb_first_byte", "rdb_received", "load_done",
                   "link_up"] + ([] if diskless else ["caught_up"])
    assert n.repl.events.recent[-1 if diskless else -2]["mode"] == \
        ("diskless" if diskless else "disk")
    lines = [m for _, m in n.core.log.lines]
    assert f"Full resync from master: {MASTER_ID}:1000" in lines
    assert ("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to parser"
            if diskless else
            f"MASTER <-> REPLICA sync: receiving {len(RDB)} bytes from master to parser") in lines
    assert "MASTER <-> REPLICA sync: Finished with success" in lines
    # counted as Redis does: the payload header and the keepalives before it, then the payload
    head = REPLIES + b"\n" + b"+FULLRESYNC %s 1000\r\n" % MASTER_ID.encode()
    assert n.core.stats.net_repl_input_bytes == len(full_sync_bytes(diskless, 1000)) - len(head)


@SETTINGS
@given(diskless=st.booleans(), cuts=st.lists(st.integers(0, 1 << 30), max_size=25))
def test_full_sync_then_stream_any_split(diskless: bool, cuts: list[int]) -> None:
    n = Node()
    n.connect()
    data = full_sync_bytes(diskless) + STREAM
    n.feed_split(data, [c % (len(data) + 1) for c in cuts])
    s = n.side
    assert s.state is S.CONNECTED
    assert n.digest() == apply_stream_to_source(STREAM)
    assert s.stream.master.reploff == s.stream.master.read_reploff == len(STREAM)
    assert n.repl.master_repl_offset == len(STREAM)
    assert b"".join(n.repl.backlog.read_from(1)) == STREAM  # passed on verbatim
    assert n.side.stream.master.client.db.id == 3


@pytest.mark.parametrize("diskless", [False, True])
def test_payload_end_and_stream_byte_by_byte(diskless: bool) -> None:
    """The end of the RDB, the EOF mark and the first commands, one byte per read."""
    n = Node()
    n.connect()
    data = full_sync_bytes(diskless) + STREAM
    tail = len(STREAM) + 80
    n.feed(data[:-tail])
    for i in range(len(data) - tail, len(data)):
        assert n.side.state is S.TRANSFER or n.side.state is S.CONNECTED
        n.feed(data[i:i + 1])
    assert n.digest() == apply_stream_to_source(STREAM)
    assert n.side.stream.master.reploff == len(STREAM)


@SETTINGS
@given(cuts=st.lists(st.integers(0, 1 << 30), max_size=20))
def test_partial_resync_any_split(cuts: list[int]) -> None:
    n = synced_node()
    w1 = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.feed(w1)
    n.side.on_closed(n.io.token)
    n.side.on_connected(n.io.token)
    rest = cmd("MULTI") + cmd("INCR", "n") + cmd("EXEC") + cmd("SELECT", "3") + cmd("DEL", "db3")
    data = REPLIES + b"\n" + b"+CONTINUE %s\r\n" % NEW_ID.encode() + rest
    n.feed_split(data, [c % (len(data) + 1) for c in cuts])
    assert n.side.state is S.CONNECTED
    assert n.digest() == apply_stream_to_source(w1 + rest)
    assert n.side.stream.master.reploff == len(w1 + rest)
    assert n.repl.ids.replid == NEW_ID and n.repl.ids.second_repl_offset == len(w1) + 1
    assert b"".join(n.repl.backlog.read_from(1)) == w1 + rest


def test_old_dataset_serves_reads_until_the_swap() -> None:
    n = Node()
    n.core.dbs[0].data[b"old"] = b"v"
    n.connect()
    data = full_sync_bytes(False)
    cut = len(data) - 20
    n.feed(data[:cut])
    assert n.side.state is S.TRANSFER
    assert n.run("GET", "old") == b"$1\r\nv\r\n"
    assert n.run("GET", "s:1") == b"$-1\r\n"
    info = n.info()
    assert info["master_sync_in_progress"] == 1
    read = info["master_sync_read_bytes"]
    assert info["master_sync_total_bytes"] == len(RDB)
    assert read == len(RDB) - 20 and info["master_sync_left_bytes"] == 20
    assert info["master_sync_perc"] == f"{read / len(RDB) * 100:.2f}"
    n.feed(data[cut:])
    assert n.run("GET", "old") == b"$-1\r\n"
    assert n.run("GET", "s:1") == b"$5\r\nhello\r\n"


@pytest.mark.parametrize("load, own_history, expect", [
    ("swapdb", True, 1), ("swapdb", False, 0), ("disabled", True, 0), ("on-empty-db", True, 0)])
def test_a_swapdb_load_of_its_own_history_is_an_async_load(load: str, own_history: bool,
                                                           expect: int) -> None:
    """readSyncBulkPayload's asyncLoading: repl-diskless-load swapdb and a snapshot whose
    replid is ours (a restarted replica's history, its master's backlog too short to go on):
    INFO async_loading:1 while the payload loads, the old dataset answers, a no-async-loading
    command gets -LOADING (cluster/17-diskless-load-swapdb watches for it); a cut payload ends
    it and leaves the old dataset."""
    n = Node(("repl-diskless-load", [load]), ("enable-module-command", ["yes"]))
    if own_history:
        n.repl.ids.replid = MASTER_ID
    n.core.dbs[0].data[b"old"] = b"v"
    c = n.core.connection_made()
    for cut_link in (True, False):
        n.connect()
        data = full_sync_bytes(False)
        cut = len(data) - 20
        n.feed(data[:cut])
        assert dict(section_persistence(n.core))["async_loading"] == expect
        assert n.run("GET", "old") == b"$1\r\nv\r\n"
        module = run(c, "MODULE", "LOAD", "/nonexistent.so")
        assert module.startswith(b"-LOADING") == bool(expect), module
        if cut_link:
            n.side.on_closed(n.io.token, "connection lost")
            n.tick(1)
        else:
            n.feed(data[cut:])
        assert dict(section_persistence(n.core))["async_loading"] == 0
        assert n.run("GET", "old") == (b"$1\r\nv\r\n" if cut_link else b"$-1\r\n")


def test_transfer_progress_fields_for_each_form() -> None:
    n = Node()
    n.connect()
    n.feed(REPLIES + b"+FULLRESYNC %s 0\r\n" % MASTER_ID.encode())
    info = n.info()  # before the header: total -1, perc -0.00 (Redis prints read/-1*100)
    assert (info["master_sync_total_bytes"], info["master_sync_read_bytes"],
            info["master_sync_left_bytes"], info["master_sync_perc"]) == (-1, 0, -1, "-0.00")
    n.feed(b"$EOF:" + MARK + b"\r\n" + RDB[:100])
    info = n.info()
    assert (info["master_sync_total_bytes"], info["master_sync_read_bytes"],
            info["master_sync_left_bytes"], info["master_sync_perc"]) == (0, 100, -100, "0.00")
    keys = [k for k, _ in n.repl.info_fields()]
    assert keys[:15] == [
        "role", "master_host", "master_port", "master_link_status", "master_last_io_seconds_ago",
        "master_sync_in_progress", "slave_read_repl_offset", "slave_repl_offset",
        "replica_full_sync_buffer_size", "replica_full_sync_buffer_peak",  # Redis 8
        "master_sync_total_bytes", "master_sync_read_bytes", "master_sync_left_bytes",
        "master_sync_perc", "master_sync_last_io_seconds_ago"]
    assert keys[15:19] == ["master_link_down_since_seconds", "slave_priority",
                           "slave_read_only", "replica_announced"]


def _corrupt_crc(rdb: bytes) -> bytes:
    return rdb[:-1] + bytes([rdb[-1] ^ 0xFF])


@pytest.mark.parametrize("diskless", [False, True])
@pytest.mark.parametrize("failure", ["crc", "truncated", "mark", "garbage"])
def test_failed_payload_applies_nothing_and_retries(diskless: bool, failure: str) -> None:
    n = synced_node()
    n.feed(cmd("SELECT", "0") + cmd("SET", "kept", "1"))
    before = n.digest()
    n.side.on_closed(n.io.token)  # the link drops: master cached, reconnect at once
    assert n.side.state is S.CONNECTING and n.side.stream.cached is not None
    n.side.on_connected(n.io.token)
    rdb = RDB
    if failure == "crc":
        rdb = _corrupt_crc(RDB)
    elif failure == "garbage":
        rdb = RDB[:30] + b"\xee" * 20 + RDB[50:]
    head = REPLIES + b"+FULLRESYNC %s 0\r\n" % NEW_ID.encode()
    if diskless:
        payload = b"$EOF:" + MARK + b"\r\n" + rdb
        payload += (b"x" * 40) if failure == "mark" else (MARK if failure != "truncated" else b"")
    else:
        payload = b"$%d\r\n" % len(rdb) + rdb
        if failure == "mark":  # no mark in the disk form: a length that cuts the RDB short
            payload = b"$%d\r\n" % (len(rdb) - 9) + rdb[:-9]
    if failure == "truncated":
        payload = payload[:len(payload) - 200]
    token = n.io.token
    n.core.now_ms += 5000
    n.feed(head + payload)
    if failure == "truncated":
        assert n.side.state is S.TRANSFER
        n.side.on_closed(token, "")
    assert n.digest() == before  # nothing half-applied
    assert n.side.stream.cached is not None and n.side.stream.cached.replid == MASTER_ID
    assert n.repl.ids.replid == MASTER_ID
    assert n.side.state is S.CONNECTING and n.io.token == token + 1  # reconnected at once
    ev = [e for e in n.repl.events.recent if e["event"] == "sync_failed"][-1]
    assert ev["reason"] in ("load-error", "connection-lost")
    lines = [m for _, m in n.core.log.lines]
    assert "MASTER <-> REPLICA sync: Discarding temporary DB in background" in lines
    if failure == "mark" and diskless:
        assert "Replication stream EOF marker is broken" in lines


def test_a_dataset_it_cannot_load_is_retried_with_backoff() -> None:
    """A master whose dataset holds a type pyrepl cannot load (a module value here): the refusal is
    logged with a reason code and an event, and the retries back off (1 s, 2 s, 4 s ...) instead
    of looping every second; a new REPLICAOF starts afresh."""
    n = Node()
    n.connect()
    unsupported = b"REDIS0011\xfe\x00\x07\x01k" + b"\x00" * 40   # type 7: a module value
    waits = []
    for attempt in range(1, 5):
        token = n.io.token
        n.feed(full_sync_bytes(False, rdb=unsupported))
        assert n.side.state is S.CONNECT and n.io.token == token     # no immediate retry
        ev = [e for e in n.repl.events.recent if e["event"] == "sync_failed"][-1]
        assert ev["reason"] == "rdb-unsupported"
        assert ev["error"].startswith("Unsupported RDB object type 7 (module-value)")
        waited = 0
        while n.io.token == token:
            n.tick(1000)
            waited += 1000
            assert waited <= 60_000
        waits.append(waited)
        assert any(f"attempt {attempt})" in m for _, m in n.core.log.lines)
        n.side.on_connected(n.io.token)
    assert waits == [1000, 2000, 4000, 8000]
    n.side.set_master("127.0.0.1", 6390)       # REPLICAOF: no backoff carried over
    n.tick(1000)
    assert n.side.state is S.CONNECTING


def test_master_error_and_bad_protocol_in_transfer() -> None:
    n = Node()
    n.connect()
    n.feed(REPLIES + b"+FULLRESYNC %s 0\r\n\n-ERR child died\r\n" % MASTER_ID.encode())
    assert "MASTER aborted replication with an error: ERR child died" in \
        [m for _, m in n.core.log.lines]
    assert n.side.state is S.CONNECTING
    n.side.on_connected(n.io.token)
    n.core.now_ms += 2000
    n.feed(REPLIES + b"+FULLRESYNC %s 0\r\n+hello\r\n" % MASTER_ID.encode())
    assert any(m.startswith("Bad protocol from MASTER, the first byte is not '$' (we received "
                            "'+hello')") for _, m in n.core.log.lines)
    assert n.side.state is S.CONNECTING


@pytest.mark.parametrize("reply", [b"-NOMASTERLINK Can't SYNC while not connected with my master",
                                   b"-LOADING Redis is loading the dataset in memory"])
def test_psync_try_later(reply: bytes) -> None:
    n = Node()
    n.connect()
    n.feed(REPLIES + reply + b"\r\n")
    assert n.side.state is S.CONNECT
    assert "Master is currently unable to PSYNC but should be in the future: " + reply.decode() \
        in [m for _, m in n.core.log.lines]
    n.tick(1000)
    assert n.side.state is S.CONNECTING


def test_psync_unsupported_falls_back_to_sync() -> None:
    n = Node()
    n.connect()
    n.io.take()
    n.feed(REPLIES + b"-ERR unknown command 'PSYNC'\r\n")
    assert n.io.take() == cmd("REPLCONF", "listening-port", "6381") + cmd(
        "REPLCONF", "capa", "eof", "capa", "psync2") + cmd("PSYNC", "?", "-1") + b"SYNC\r\n"
    assert n.side.state is S.TRANSFER
    n.feed(b"$%d\r\n" % len(RDB) + RDB + cmd("SET", "x", "1"))
    assert n.side.state is S.CONNECTED
    assert n.side.stream.master.pre_psync  # no offsets with an old master: no ACKs
    n.tick(1000)
    assert n.io.take() == b""
    assert n.run("GET", "x") == b"$1\r\n1\r\n"


# -- streaming: offsets, ACKs ----------------------------------------------------------------

def test_offsets_inside_multi_and_acks() -> None:
    n = synced_node()
    s = n.side
    part1 = cmd("SELECT", "0") + cmd("MULTI") + cmd("SET", "a", "1")
    part2 = cmd("EXEC")
    n.feed(part1 + part2[:5])
    assert s.stream.master.read_reploff == len(part1) + 5
    assert s.stream.master.reploff == len(cmd("SELECT", "0"))  # a transaction counts at its EXEC
    assert n.run("GET", "a") == b"$-1\r\n"
    n.tick(1000)
    assert n.io.take() == cmd("REPLCONF", "ACK", len(cmd("SELECT", "0")))
    n.feed(part2[5:])
    assert s.stream.master.reploff == s.stream.master.read_reploff == len(part1 + part2)
    assert n.run("GET", "a") == b"$1\r\n1\r\n"
    n.tick(1000)
    assert n.io.take() == cmd("REPLCONF", "ACK", len(part1 + part2))
    assert b"".join(n.repl.backlog.read_from(1)) == part1 + part2


def test_getack_is_answered_with_the_offset_before_it() -> None:
    n = synced_node()
    w = cmd("SELECT", "0") + cmd("SET", "k", "v")
    n.feed(w + cmd("REPLCONF", "GETACK", "*"))
    assert n.io.take() == cmd("REPLCONF", "ACK", len(w))
    assert n.side.stream.master.reploff == len(w + cmd("REPLCONF", "GETACK", "*"))


def test_replica_never_expires_keys_on_its_own_clock() -> None:
    n = synced_node()
    assert n.core.expiry_deletes is False
    n.feed(cmd("SELECT", "0") + cmd("SET", "t", "v", "PX", "10"))
    n.tick(5000)
    assert n.core.dbs[0].data.get(b"t") == b"v"  # still there, logically expired
    assert n.run("GET", "t") == b"$-1\r\n"
    n.feed(cmd("DEL", "t"))
    assert b"t" not in n.core.dbs[0].data


def test_replica_is_read_only_and_master_client_is_not() -> None:
    n = synced_node()
    assert n.run("SET", "x", "1") == b"-READONLY You can't write against a read only replica.\r\n"
    n.feed(cmd("SELECT", "0") + cmd("SET", "x", "1"))
    assert n.run("GET", "x") == b"$1\r\n1\r\n"


def test_error_from_the_master_stream_is_logged_critical() -> None:
    n = synced_node()
    n.feed(cmd("SELECT", "0") + cmd("INCR", "s:1"))
    # Redis's text, the error's '-' included; counted; the link stays up
    assert any(m.startswith("== CRITICAL == This replica is sending an error to its master: "
                            "'-ERR value is not an integer or out of range' after processing the "
                            "command 'incr'") for _, m in n.core.log.lines)
    assert n.core.stats.unexpected_error_replies == 1
    assert n.side.stream.master is not None


def test_inline_protocol_from_master_drops_it_without_caching() -> None:
    n = synced_node()
    n.feed(b"SET a b\r\n")
    assert n.side.stream.cached is None and n.side.stream.master is None
    assert n.side.state is S.CONNECTING
    assert any("Master using the inline protocol. Desync?" in m for _, m in n.core.log.lines)
    n.side.on_connected(n.io.token)
    n.io.take()
    n.feed(REPLIES)
    assert n.io.take().endswith(cmd("PSYNC", "?", "-1"))


# -- link loss, partial resync, id changes -------------------------------------------------------

def test_link_loss_caches_the_master_and_psyncs_partially() -> None:
    n = synced_node()
    w1 = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.feed(w1 + cmd("MULTI") + cmd("SET", "b", "2"))  # an unfinished transaction is dropped
    n.side.on_closed(n.io.token, "Connection reset by peer")
    s = n.side
    assert s.stream.master is None and s.stream.cached is not None
    assert s.stream.cached.reploff == s.stream.cached.read_reploff == len(w1)
    lines = [m for _, m in n.core.log.lines]
    assert ["Connection with master lost.", "Caching the disconnected master state.",
            "Reconnecting to MASTER 127.0.0.1:6380", "MASTER <-> REPLICA sync started"] == \
        lines[-4:]
    info = n.info()
    assert info["master_link_status"] == "down" and info["slave_repl_offset"] == len(w1)
    assert info["master_link_down_since_seconds"] == 0
    assert s.state is S.CONNECTING
    s.on_connected(n.io.token)
    n.io.take()
    n.feed(REPLIES)
    assert n.io.take().endswith(cmd("PSYNC", MASTER_ID, len(w1) + 1))
    rest = cmd("MULTI") + cmd("SET", "b", "2") + cmd("EXEC")
    n.feed(b"+CONTINUE %s\r\n" % MASTER_ID.encode() + rest)
    assert s.state is S.CONNECTED
    assert s.stream.master.reploff == len(w1 + rest)
    assert n.run("GET", "b") == b"$1\r\n2\r\n"
    assert n.repl.ids.replid == MASTER_ID
    assert "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization." in \
        [m for _, m in n.core.log.lines]
    assert b"".join(n.repl.backlog.read_from(1)) == w1 + rest


def test_continue_with_a_new_id_shifts_ids_and_drops_sub_replicas() -> None:
    n = synced_node()
    w = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.feed(w)
    n.side.on_closed(n.io.token)
    n.side.on_connected(n.io.token)
    n.feed(REPLIES + b"+CONTINUE %s\r\n" % NEW_ID.encode())
    ids = n.repl.ids
    assert (ids.replid, ids.replid2, ids.second_repl_offset) == (NEW_ID, MASTER_ID, len(w) + 1)
    assert n.side.stream.master.replid == NEW_ID
    assert "Master replication ID changed to " + NEW_ID in [m for _, m in n.core.log.lines]


def test_bare_continue_keeps_ids() -> None:
    n = synced_node()
    n.side.on_closed(n.io.token)
    n.side.on_connected(n.io.token)
    n.feed(REPLIES + b"+CONTINUE\r\n")
    assert n.side.state is S.CONNECTED and n.repl.ids.replid == MASTER_ID


def test_master_timeout_while_connected() -> None:
    n = synced_node()
    n.tick(60_000)
    assert n.side.state is S.CONNECTED
    n.tick(1_500)
    assert n.side.state is S.CONNECTING and n.side.stream.cached is not None
    assert "MASTER timeout: no data nor PING received..." in [m for _, m in n.core.log.lines]


def test_transfer_timeout_and_keepalives() -> None:
    n = Node()
    n.connect()
    n.feed(REPLIES + b"+FULLRESYNC %s 0\r\n" % MASTER_ID.encode())
    for _ in range(3):  # "\n" keepalives during the BGSAVE keep the transfer alive
        n.tick(40_000)
        n.feed(b"\n")
        assert n.side.state is S.TRANSFER
    n.tick(61_000)
    assert n.side.state is S.CONNECTING
    assert any(m.startswith("Timeout receiving bulk data from MASTER...")
               for _, m in n.core.log.lines)


def test_connect_failure_and_handshake_timeout() -> None:
    n = Node()
    n.side.start()
    n.side.on_connect_failed(n.io.token, "Connection refused")
    assert n.side.state is S.CONNECT
    assert "Error condition on socket for SYNC: Connection refused" in \
        [m for _, m in n.core.log.lines]
    n.tick(1000)
    assert n.side.state is S.CONNECTING
    n.side.on_connected(n.io.token)
    n.tick(61_000)
    assert "Timeout connecting to the MASTER..." in [m for _, m in n.core.log.lines]
    assert n.side.state is S.CONNECTING


# -- every state x input ---------------------------------------------------------------------------

def _reach(state: str) -> Node:
    """A node in ``state``, reached through real bytes."""
    if state == "RECEIVE_AUTH_REPLY":
        n = Node(("masterauth", ["pw"]))
        n.connect()
        n.feed(b"+PONG\r\n")
        return n
    if state == "RECEIVE_IP_REPLY":
        n = Node(("replica-announce-ip", ["10.1.1.1"]))
        n.connect()
        n.feed(b"+PONG\r\n+OK\r\n")
        return n
    if state == "CONNECTED":
        return synced_node()
    if state == "NONE":
        n = synced_node()
        n.side.unset_master()
        return n
    n = Node()
    if state == "CONNECT":
        return n
    n.side.start()
    if state == "CONNECTING":
        return n
    n.side.on_connected(n.io.token)
    steps = {"RECEIVE_PING_REPLY": b"", "RECEIVE_PORT_REPLY": b"+PONG\r\n",
             "RECEIVE_CAPA_REPLY": b"+PONG\r\n+OK\r\n",
             "RECEIVE_PSYNC_REPLY": REPLIES,
             "TRANSFER_HEADER": REPLIES + b"+FULLRESYNC %s 0\r\n" % MASTER_ID.encode(),
             "TRANSFER_PAYLOAD": REPLIES + b"+FULLRESYNC %s 0\r\n$%d\r\n" % (
                 MASTER_ID.encode(), len(RDB))}
    if steps[state]:
        n.feed(steps[state])
    return n


# Expected state after each input, from Redis 7.0.15's replication.c (see the module docstring
# of pyrepl.replication.replica). "same" = unchanged. CONNECTING* = a new connection attempt.
EVENTS = ["connected", "connect_failed", "ok_line", "err_line", "newline", "closed", "timeout",
          "no_one", "replicaof"]
EXPECTED: dict[str, list[str]] = {
    #                   connected  failed   +OK        -ERR       \n         closed timeout no-one replicaof
    "NONE":               ["same", "same", "same", "same", "same", "same", "same", "NONE",
                           "CONNECTING*"],
    "CONNECT":            ["same", "same", "same", "same", "same", "same", "CONNECTING*", "NONE",
                           "CONNECTING*"],
    "CONNECTING":         ["RECEIVE_PING_REPLY", "CONNECT", "CONNECT", "CONNECT", "CONNECT",
                           "CONNECT", "CONNECTING*", "NONE", "CONNECTING*"],
    "RECEIVE_PING_REPLY": ["same", "same", "RECEIVE_PORT_REPLY", "CONNECT", "CONNECT", "CONNECT",
                           "CONNECTING*", "NONE", "CONNECTING*"],
    "RECEIVE_AUTH_REPLY": ["same", "same", "RECEIVE_PORT_REPLY", "CONNECT",
                           "RECEIVE_PORT_REPLY", "CONNECT", "CONNECTING*", "NONE", "CONNECTING*"],
    "RECEIVE_PORT_REPLY": ["same", "same", "RECEIVE_CAPA_REPLY", "RECEIVE_CAPA_REPLY",
                           "RECEIVE_CAPA_REPLY", "CONNECT", "CONNECTING*", "NONE",
                           "CONNECTING*"],
    "RECEIVE_IP_REPLY":   ["same", "same", "RECEIVE_CAPA_REPLY", "RECEIVE_CAPA_REPLY",
                           "RECEIVE_CAPA_REPLY", "CONNECT", "CONNECTING*", "NONE",
                           "CONNECTING*"],
    "RECEIVE_CAPA_REPLY": ["same", "same", "RECEIVE_PSYNC_REPLY", "RECEIVE_PSYNC_REPLY",
                           "RECEIVE_PSYNC_REPLY", "CONNECT", "CONNECTING*", "NONE",
                           "CONNECTING*"],
    "RECEIVE_PSYNC_REPLY": ["same", "same", "TRANSFER", "TRANSFER", "same", "CONNECT",
                            "CONNECTING*", "NONE", "CONNECTING*"],
    "TRANSFER_HEADER":    ["same", "same", "CONNECTING*", "CONNECTING*", "same", "CONNECTING*",
                           "CONNECTING*", "NONE", "CONNECTING*"],
    # payload bytes: "+OK\r\n" is too short to judge, "-ERR boom\r\n" is not an RDB header
    "TRANSFER_PAYLOAD":   ["same", "same", "same", "CONNECTING*", "same", "CONNECTING*",
                           "CONNECTING*", "NONE", "CONNECTING*"],
    "CONNECTED":          ["same", "same", "CONNECTING*", "CONNECTING*", "same", "CONNECTING*",
                           "CONNECTING*", "NONE", "CONNECTING*"],
}


def _apply(n: Node, event: str) -> None:
    s = n.side
    tok = n.io.token if n.io.connects else 0
    if event == "connected":
        s.on_connected(tok)
    elif event == "connect_failed":
        s.on_connect_failed(tok, "Connection refused")
    elif event == "ok_line":
        s.on_data(tok, b"+OK\r\n")
    elif event == "err_line":
        s.on_data(tok, b"-ERR boom\r\n")
    elif event == "newline":
        s.on_data(tok, b"\n")
    elif event == "closed":
        s.on_closed(tok, "Connection reset by peer")
    elif event == "timeout":
        n.tick(62_000)
    elif event == "no_one":
        s.unset_master()
    elif event == "replicaof":
        s.set_master("127.0.0.1", 7000)


@pytest.mark.parametrize("state", list(EXPECTED))
@pytest.mark.parametrize("event", EVENTS)
def test_every_state_and_input(state: str, event: str) -> None:
    n = _reach(state)
    before = n.side.state
    connects = len(n.io.connects)
    digest = n.digest()
    _apply(n, event)
    want = EXPECTED[state][EVENTS.index(event)]
    if want == "same":
        assert n.side.state is before
    elif want == "CONNECTING*":
        assert n.side.state is S.CONNECTING and len(n.io.connects) == connects + 1
    else:
        assert n.side.state is S[want]
    if state not in ("CONNECTED", "NONE") and event != "no_one":
        assert n.digest() == digest  # no input before the swap changes the dataset


# -- roles: REPLICAOF, promotion, restart -----------------------------------------------------------

def test_promotion_shifts_ids_keeps_backlog_and_expires_again() -> None:
    n = synced_node()
    w = cmd("SELECT", "0") + cmd("SET", "a", "1")
    n.feed(w)
    n.side.unset_master()
    ids = n.repl.ids
    assert ids.replid2 == MASTER_ID and ids.second_repl_offset == len(w) + 1
    assert ids.replid != MASTER_ID and len(ids.replid) == 40
    assert n.repl.backlog is not None and n.repl.backlog.last_byte_offset == len(w)
    assert n.core.expiry_deletes is True and n.side.state is S.NONE
    assert n.repl.stream_db == -1
    assert n.core.config.replicaof is None
    info = n.info()
    assert info["role"] == "master" and "master_host" not in info
    lines = [m for _, m in n.core.log.lines]
    assert lines[-4:-1] == ["Connection with master lost.",
                            "Caching the disconnected master state.",
                            "Discarding previously cached master state."]
    assert lines[-1] == (f"Setting secondary replication ID to {MASTER_ID}, valid up to offset: "
                         f"{len(w) + 1}. New replication ID is {ids.replid}")
    assert n.run("SET", "w", "1") == b"+OK\r\n"


def test_replicaof_on_a_master_psyncs_its_own_history() -> None:
    n = Node(replicaof=False)
    n.run("SET", "a", "1")
    n.repl.create_backlog()  # a master with history: its replid/offset are worth offering
    own = n.repl.ids.replid
    assert n.run("REPLICAOF", "127.0.0.1", "6390") == b"+OK\r\n"
    assert n.core.config.replicaof == ("127.0.0.1", 6390)
    assert n.io.connects[-1][1:] == ("127.0.0.1", 6390)
    n.side.on_connected(n.io.token)
    n.feed(REPLIES)
    assert n.io.take().endswith(cmd("PSYNC", own, 1))
    lines = [m for _, m in n.core.log.lines]
    assert "Before turning into a replica, using my own master parameters to synthesize a " \
           "cached master: I may be able to synchronize with the new master with just a " \
           "partial transfer." in lines
    assert any(m.startswith("REPLICAOF 127.0.0.1:6390 enabled (user request from 'id=")
               for m in lines)
    assert n.run("REPLICAOF", "127.0.0.1", "6390") == \
        b"+OK Already connected to specified master\r\n"
    assert n.run("REPLICAOF", "127.0.0.1", "99999") == b"-ERR Invalid master port\r\n"
    assert n.run("REPLICAOF", "127.0.0.1", "x") == b"-ERR Invalid master port\r\n"
    assert n.run("SLAVEOF", "NO", "ONE") == b"+OK\r\n"
    assert n.side.master_host is None
    assert n.run("REPLICAOF", "no", "one") == b"+OK\r\n"


def test_role_replies() -> None:
    n = Node()
    assert n.run("ROLE") == b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6380\r\n$7\r\nconnect\r\n:-1\r\n"
    n.side.start()
    assert b"$10\r\nconnecting\r\n" in n.run("ROLE")
    n.side.on_connected(n.io.token)
    assert b"$9\r\nhandshake\r\n" in n.run("ROLE")
    n.feed(REPLIES + b"+FULLRESYNC %s 77\r\n" % MASTER_ID.encode())
    assert b"$4\r\nsync\r\n:-1\r\n" in n.run("ROLE")
    n.feed(b"$%d\r\n" % len(RDB) + RDB)
    assert n.run("ROLE").endswith(b"$9\r\nconnected\r\n:77\r\n")
    n.side.unset_master()
    off = n.repl.master_repl_offset
    assert n.run("ROLE") == b"*3\r\n$6\r\nmaster\r\n:%d\r\n*0\r\n" % off


def test_restart_from_rdb_offers_the_saved_history(tmp_path) -> None:
    n = synced_node(False, ("dir", [str(tmp_path)]))
    w = cmd("SELECT", "3") + cmd("SET", "a", "1")
    n.feed(w)
    aux = n.repl.rdb_aux()
    assert aux["repl-id"] == MASTER_ID and aux["repl-offset"] == len(w)
    assert aux["repl-stream-db"] == 3
    assert n.core.persistence.save()  # SHUTDOWN SAVE / SAVE write this file
    # a new process: same config, loads the RDB through the real core.load path
    m = Node(("dir", [str(tmp_path)]))
    m.core.persistence.load()
    assert m.digest() == n.digest()
    assert m.side.stream.cached is not None and m.side.stream.cached.reploff == len(w)
    m.connect()
    m.feed(REPLIES)
    assert m.io.take().endswith(cmd("PSYNC", MASTER_ID, len(w) + 1))
    m.feed(b"+CONTINUE %s\r\n" % MASTER_ID.encode() + cmd("SET", "b", "2"))
    assert m.side.state is S.CONNECTED
    assert m.side.stream.master.reploff == len(w) + len(cmd("SET", "b", "2"))
    assert m.core.dbs[3].data[b"b"] == b"2"  # the stream continues in the db it had selected


def test_a_cluster_replica_restarted_from_rdb_offers_the_saved_history(tmp_path) -> None:
    """loadDataFromDisk's !iAmMaster(): a node that nodes.conf makes a replica takes the RDB's
    repl-id and offset as its own history (pyrepl looked at replicaof, which a cluster node
    never has, and kept them as a master's replid2: every restarted cluster replica synced
    in full), so that when the cluster points it at its master it PSYNCs partially."""
    from pyrepl.core import cluster

    n = synced_node(False, ("dir", [str(tmp_path)]))
    w = cmd("SET", "a", "1")
    n.feed(w)
    assert n.core.persistence.save()
    me, master = "a" * 40, "b" * 40
    (tmp_path / "nodes.conf").write_text(
        f"{me} 127.0.0.1:6381@16381 myself,slave {master} 0 0 1 connected\n"
        f"{master} 127.0.0.1:6380@16380 master - 0 0 1 connected 0-16383\n"
        "vars currentEpoch 1 lastVoteEpoch 0\n")
    m = Node(("dir", [str(tmp_path)]), ("cluster-enabled", ["yes"]), replicaof=False)
    cluster.start(m.core)
    m.core.persistence.load()
    assert m.repl.ids.replid == MASTER_ID and m.repl.master_repl_offset == len(w)
    cluster.CoreClusterHost(m.core).set_master("127.0.0.1", 6380)    # (the cluster's cron)
    m.side.on_connected(m.io.token)
    m.feed(REPLIES)
    assert m.io.take().endswith(cmd("PSYNC", MASTER_ID, len(w) + 1))
    m.feed(b"+CONTINUE %s\r\n" % MASTER_ID.encode())
    assert m.side.state is S.CONNECTED


# -- two (or three) real cores wired in memory: link tests -----------------------------------------
#
# The replica side's I/O port is connected to the master core's real Client (PSYNC, REPLCONF,
# WAIT are the master helper's real handlers); bytes travel through a queue pumped by the test.
# Nodes start from one RDB carrying repl-id/repl-offset (the restart path), so they can PSYNC
# without a forked snapshot child; full syncs with a real child are covered by the e2e tests.

class Conn:
    """One in-memory TCP connection: replica side (token) <-> a client of the master core."""

    def __init__(self, net: Net, replica: PairNode, token: int, master: PairNode,
                 client: object) -> None:
        self.net, self.replica, self.token, self.master, self.client = (
            net, replica, token, master, client)
        self.open = True

    def abort(self) -> None:
        if not self.open:
            return
        self.open = False
        net = self.net
        net.queue.append(lambda: self.replica.side.on_closed(self.token, "Connection reset"))
        net.queue.append(lambda: self.master.core.client_closed(self.client))

    close = abort

    def is_closing(self) -> bool:
        return not self.open


class WireIO:
    def __init__(self, net: Net, node: PairNode) -> None:
        self.net = net
        self.node = node
        self.conns: dict[int, Conn] = {}

    def connect(self, token: int, host: str, port: int) -> None:
        net = self.net
        target = net.nodes.get(port)
        side = self.node.side
        if target is None:
            net.queue.append(lambda: side.on_connect_failed(token, "Connection refused"))
            return
        c = target.core.connection_made(f"127.0.0.1:{50000 + token}", f"127.0.0.1:{port}")
        conn = Conn(net, self.node, token, target, c)
        c.transport = conn
        self.conns[token] = conn
        net.queue.append(lambda: side.on_connected(token))

    def send(self, token: int, data: bytes) -> None:
        conn = self.conns.get(token)
        if conn is None or not conn.open:
            return
        self.net.queue.append(lambda: conn.open and conn.client.receive_data(data))

    def close(self, token: int) -> None:
        conn = self.conns.pop(token, None)
        if conn is not None and conn.open:
            conn.open = False
            self.net.queue.append(lambda: conn.master.core.client_closed(conn.client))

    def link_info(self, token: int) -> tuple[str, str, int, object] | None:
        conn = self.conns.get(token)
        if conn is None:
            return None
        return f"127.0.0.1:{conn.master.port}", f"127.0.0.1:{50000 + token}", -1, conn


class WireHost(Host):
    def close_client(self, client: object) -> None:
        close_in_memory(client, Conn)


class PairNode:
    def __init__(self, net: Net, port: int, tmp: str, replicaof: int | None) -> None:
        ov = [("save", [""]), ("port", [str(port)]), ("dir", [tmp])]
        if replicaof is not None:
            ov.append(("replicaof", ["127.0.0.1", str(replicaof)]))
        self.port = port
        self.host = WireHost()
        self.core = ServerCore(Config.load(None, ov), self.host, now_ms=net.now)
        self.host.replica_io = WireIO(net, self)
        self.repl = Replication(self.core)
        self.side = self.repl.replica
        self.client = self.core.connection_made("127.0.0.1:4000", f"127.0.0.1:{port}")
        net.nodes[port] = self

    def run(self, *args: bytes | str | int) -> bytes:
        self.client.receive_data(cmd(*args))
        return self.client.data_to_send()

    def digest(self) -> str:
        return dataset_digest(self.core.dbs, self.core.now_ms)

    def info(self) -> dict[str, object]:
        return dict(self.repl.info_fields())


class Net:
    def __init__(self) -> None:
        from collections import deque
        self.now = NOW
        self.nodes: dict[int, PairNode] = {}
        self.queue: deque = deque()

    def deliver(self) -> bool:
        """Move every client's pending output to the other end of its connection."""
        moved = False
        for node in list(self.nodes.values()):
            core = node.core
            core.pending_flush.clear()
            for c in list(core.clients.values()):
                t = c.transport
                if isinstance(t, Conn) and c.kind != "master":
                    sent: list[bytes] = []
                    shell_write(c, sent.append)
                    data = b"".join(sent)
                    if data and t.open:
                        self.queue.append(lambda t=t, d=data: t.open and
                                          t.replica.side.on_data(t.token, d))
                        moved = True
                    if c.close_after_reply:
                        t.abort()
        return moved

    def pump(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if self.queue:
                self.queue.popleft()()
            elif not self.deliver():
                return
        raise AssertionError("the in-memory network did not settle")

    def tick(self, ms: int = 1000) -> None:
        self.now += ms
        for node in list(self.nodes.values()):
            node.core.now_ms = self.now
            node.core.tick(self.now)
        self.pump()

    def settle(self, cond, what: str, ticks: int = 20) -> None:
        for _ in range(ticks):
            self.pump()
            if cond():
                return
            self.tick()
        raise AssertionError(f"not reached: {what}")


SHARED_ID = "ccb6d8e74f629c6f16a578dd08346ce92e7a6cf3"


def shared_history(tmp_path, names: list[str]) -> dict[str, str]:
    """One RDB (the source dataset, repl-id SHARED_ID, repl-offset 1000) in a dir per node."""
    rdb = encode_rdb_bytes(SRC.dbs, aux={"repl-stream-db": 0, "repl-id": SHARED_ID,
                                         "repl-offset": 1000}, now_ms=NOW)
    dirs = {}
    for name in names:
        d = tmp_path / name
        d.mkdir()
        (d / "dump.rdb").write_bytes(rdb)
        dirs[name] = str(d)
    return dirs


def chain(tmp_path) -> tuple[Net, PairNode, PairNode, PairNode]:
    """A (master 7001) <- B (7002) <- C (7003), all restarted from the same history."""
    dirs = shared_history(tmp_path, ["a", "b", "c"])
    net = Net()
    a = PairNode(net, 7001, dirs["a"], None)
    b = PairNode(net, 7002, dirs["b"], 7001)
    c = PairNode(net, 7003, dirs["c"], 7002)
    for n in (a, b, c):
        n.core.persistence.load()
        n.repl.start()
    net.settle(lambda: b.side.link_up() and c.side.link_up(), "chain links up")
    return net, a, b, c


def test_pair_chain_continues_partially_and_agrees(tmp_path) -> None:
    net, a, b, c = chain(tmp_path)
    assert a.core.stats.sync_partial_ok == 1 and a.core.stats.sync_full == 0
    assert b.core.stats.sync_partial_ok == 1 and b.core.stats.sync_full == 0
    for n in (b, c):  # +CONTINUE <A's new id>: the old history stays valid as replid2
        ids = n.repl.ids
        assert (ids.replid, ids.replid2, ids.second_repl_offset) == \
            (a.repl.ids.replid, SHARED_ID, 1001)
    for i in range(50):
        assert a.run("SET", f"k{i}", i) == b"+OK\r\n"
    a.run("SELECT", "5")
    a.run("RPUSH", "list", "x", "y")
    a.run("MULTI")
    a.run("INCR", "n")
    a.run("HSET", "h", "f", "v")
    a.run("EXEC")
    net.pump()
    assert a.digest() == b.digest() == c.digest() == apply_stream_to_source(
        b"".join(cmd("SET", f"k{i}", i) for i in range(50)) + cmd("SELECT", "5")
        + cmd("RPUSH", "list", "x", "y") + cmd("INCR", "n") + cmd("HSET", "h", "f", "v"))
    off = a.repl.master_repl_offset
    assert off > 1000
    assert b.side.stream.master.reploff == c.side.stream.master.reploff == off
    assert b.repl.master_repl_offset == c.repl.master_repl_offset == off
    assert b"".join(b.repl.backlog.read_from(1001)) == b"".join(a.repl.backlog.read_from(1001))
    assert b"".join(c.repl.backlog.read_from(1001)) == b"".join(a.repl.backlog.read_from(1001))
    net.tick()  # ACKs
    assert f"offset={off}" in dict(a.repl.master.info_replica_lines())["slave0"]
    assert c.run("ROLE") == (b"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7002\r\n"
                             b"$9\r\nconnected\r\n:%d\r\n" % off)


def test_pair_wait_is_answered_through_getack(tmp_path) -> None:
    net, a, b, c = chain(tmp_path)
    a.run("SET", "w", "1")
    a.client.receive_data(cmd("WAIT", "1", "0"))
    net.pump()
    assert a.client.data_to_send() == b":1\r\n"


def test_pair_link_kill_resyncs_partially(tmp_path) -> None:
    net, a, b, c = chain(tmp_path)
    b.run("CLIENT", "KILL", "TYPE", "master")
    net.pump()
    a.run("SET", "during", "1")  # written while B is reconnecting
    net.settle(lambda: b.side.link_up(), "B back")
    net.pump()
    assert a.core.stats.sync_partial_ok == 2 and a.core.stats.sync_full == 0
    assert b.run("GET", "during") == b"$1\r\n1\r\n"
    assert a.digest() == b.digest() == c.digest()
    assert c.side.stream.master.reploff == a.repl.master_repl_offset
    a.run("CLIENT", "KILL", "TYPE", "replica")  # the other end: the master drops B
    a.run("SET", "during2", "2")
    net.settle(lambda: b.side.link_up() and b.run("GET", "during2") == b"$1\r\n2\r\n",
               "B back again")
    assert a.core.stats.sync_partial_ok == 3 and a.core.stats.sync_full == 0


def test_pair_promotion_repoints_the_old_master_partially(tmp_path) -> None:
    net, a, b, c = chain(tmp_path)
    a.run("SET", "before", "1")
    net.pump()
    old_a_id = a.repl.ids.replid
    off = a.repl.master_repl_offset
    assert b.run("REPLICAOF", "NO", "ONE") == b"+OK\r\n"
    ids = b.repl.ids
    assert (ids.replid2, ids.second_repl_offset) == (old_a_id, off + 1)
    assert b.run("SET", "on-new-master", "z") == b"+OK\r\n"
    assert a.run("REPLICAOF", "127.0.0.1", "7002") == b"+OK\r\n"
    net.settle(lambda: a.side.link_up() and c.side.link_up(), "A and C follow B")
    assert b.core.stats.sync_full == 0
    # C at the start, then A (via replid2) and C again (disconnected by the promotion)
    assert b.core.stats.sync_partial_ok == 3
    for n in (a, c):
        assert n.repl.ids.replid == b.repl.ids.replid
        assert n.repl.ids.replid2 == old_a_id and n.repl.ids.second_repl_offset == off + 1
    b.run("INCR", "after")
    net.pump()
    assert a.digest() == b.digest() == c.digest()
    assert a.run("GET", "on-new-master") == b"$1\r\nz\r\n"
    assert a.repl.master_repl_offset == b.repl.master_repl_offset == c.repl.master_repl_offset


# -- the stream passed on in C (pyrepl/replication/_feed.c: feed_raw) ---------------------------

_WRITES = st.sampled_from([
    cmd("SET", "k", "v"), cmd("INCR", "n"), cmd("SELECT", "1"), cmd("SELECT", "0"),
    cmd("MULTI") + cmd("INCR", "n") + cmd("LPUSH", "l", "a"), cmd("EXEC"),
    cmd("SET", "big", "x" * 3000), cmd("PING"), cmd("SET", "huge", "y" * 20000),
])


@pytest.mark.skipif(native.PURE, reason=f"compares _feed.c with its reference ({native.WHY_PURE})")
@SETTINGS
@given(writes=st.lists(_WRITES, min_size=1, max_size=40),
       cuts=st.lists(st.integers(0, 1 << 30), max_size=30), sub=st.booleans())
def test_feed_raw_in_c_passes_on_what_the_python_does(writes: list[bytes], cuts: list[int],
                                                      sub: bool) -> None:
    """Two replicas get the same stream in the same reads; one passes what it applied on
    through ``feed_raw`` (C), the other through ``Replication.feed_raw`` alone (its reads
    through ``ReplicaSide.on_data``, the Python: the C read calls the C feed). Both hold the
    same backlog (bytes, offsets, blocks), offsets and dataset after every read, and schedule
    the same sub-replica writes."""
    import pyrepl.replication.replica.stream as stream_mod

    nodes = [synced_node(), synced_node()]
    subs = [with_sub_replica(x) if sub else None for x in nodes]
    data = b"".join(writes)
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    c_feed = stream_mod._feed
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a == b:
            continue
        seen = []
        for i, x in enumerate(nodes):
            stream_mod._feed = c_feed if i == 0 else None
            try:
                if i == 0:
                    x.feed(data[a:b])
                else:
                    ReplicaSide.on_data(x.side, x.io.token, data[a:b])
            finally:
                stream_mod._feed = c_feed
            bl = x.repl.backlog
            flushes = [c.id for c in x.core.pending_flush]
            for c in x.core.pending_flush:   # (the shell's write: the link takes it all)
                while x.repl.master.feeding.take(c.stream):
                    pass
            x.core.pending_flush.clear()
            ms = x.side.stream.master
            assert bl.last_byte_offset == x.repl.master_repl_offset
            seen.append((b"".join(bl.read_from(bl.first_byte_offset)), bl.first_byte_offset,
                         bl.histlen, bl.nblocks, bl.mem, x.repl.master_repl_offset,
                         ms.reploff, ms.read_reploff, ms.fed, bytes(ms.unapplied), x.digest(),
                         [r.id for r in subs if r is not None] and flushes))
        assert seen[0] == seen[1]
    ms0 = nodes[0].side.stream.master
    assert ms0.reploff == len(data) - len(ms0.unapplied)
