"""The rdb channel (Redis 8's ``+RDBCHANNELSYNC``) with real processes and real sockets.

Two groups of tests:

* a pyrepl replica process against a minimal Redis 8 master played by this process (the
  ``FakeMaster``: real loopback sockets, the exact bytes of redis-wire/a_fullsync_rdbchannel.txt,
  an RDB written by pyrepl's encoder). The test controls when the snapshot goes out, so it can
  show that the replica stops reading the main channel at ``replica-full-sync-buffer-limit`` and
  the rest of the stream waits on the master's side of the socket (TCP backpressure), that the
  replica closes the rdb channel after the mark and ACKs the snapshot offset, and that a channel
  cut mid-transfer ends in a clean retry with nothing applied twice;
* pyrepl <-> pyrepl: a full sync under a continuous write load ending with identical digests, a
  tiny buffer limit forcing backpressure with nothing lost, each connection killed at several
  points of the sync, and a replica arriving while another one's snapshot is running.

Every scenario ends with equal DEBUG DIGESTs and checks the buffer figures in INFO.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import ExitStack

import pytest

from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.replication.replica.rdbchannel import BLOCK_SIZE
from pyrepl.resp.writer import encode_command
from tests.support.load import LoadWriter, populate_under_load
from tests.support.procs import start_pyrepl, sync_events
from tests.support.redispy import digest, r, repl
from tests.support.resp import parse_command
from tests.support.waits import wait_for, wait_synced

pytestmark = pytest.mark.slow

NOW = 1_700_000_000_000
MASTER_ID = "e0b8062d0b155a1e43fa2d39d13c0623805c27e1"
MARK = b"79b150900a78ca68cdb80090425f0092523acc81"


def cmd(*args: bytes | str | int) -> bytes:
    return encode_command([a if isinstance(a, bytes) else str(a).encode() for a in args])


# -- a Redis 8 master played by the test ---------------------------------------------------------

class Conn:
    """One accepted connection of the fake master, with a RESP array reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(20)
        self.buf = b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def command(self) -> list[bytes]:
        """The next command the replica sent (a RESP array)."""
        while True:
            parsed = parse_command(self.buf)
            if parsed is not None:
                argv, used = parsed
                self.buf = self.buf[used:]
                return argv
            if not self._fill():
                raise ConnectionError("closed by the replica")

    def raw(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise ConnectionError("closed by the replica")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def closed_by_peer(self) -> bool:
        """True once the replica closed this connection (EOF)."""
        try:
            return not self._fill()
        except (ConnectionResetError, OSError):
            return True

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class FakeMaster:
    def __init__(self) -> None:
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.lsock.settimeout(20)
        self.port = self.lsock.getsockname()[1]
        self.conns: list[Conn] = []

    def accept(self) -> Conn:
        s, _ = self.lsock.accept()
        c = Conn(s)
        self.conns.append(c)
        return c

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.lsock.close()

    def main_handshake(self, replica_port: int, client_id: int) -> Conn:
        """Accept the main channel and answer it as Redis 8 does, up to +RDBCHANNELSYNC."""
        main = self.accept()
        assert main.command() == [b"PING"]
        main.send(b"+PONG\r\n")
        assert main.command() == [b"REPLCONF", b"listening-port", str(replica_port).encode()]
        # (Redis 8's capa line, plus Valkey's dual channel and pyrepl's resume, which a Redis 8
        # master ignores)
        assert main.command() == [b"REPLCONF", b"capa", b"eof", b"capa", b"psync2", b"capa",
                                  b"rdb-channel-repl", b"capa", b"dual-channel", b"capa",
                                  b"pyrepl-resume"]
        main.send(b"+OK\r\n+OK\r\n")
        psync = main.command()
        assert psync[0] == b"PSYNC"
        main.send(b"+RDBCHANNELSYNC %d\r\n" % client_id)
        return main

    def rdb_handshake(self, replica_port: int, client_id: int, offset: int) -> Conn:
        rdb = self.accept()
        want = cmd("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                   "main-ch-client-id", client_id, "listening-port", replica_port)
        assert rdb.raw(len(want)) == want  # byte for byte as Redis 8.6.3
        rdb.send(b"+OK\r\n")
        assert rdb.command() == [b"PSYNC", b"?", b"-1"]
        rdb.send(b"\n")
        rdb.send(b"\n+FULLRESYNC %s %d\r\n" % (MASTER_ID.encode(), offset))
        return rdb


class Sender(threading.Thread):
    """Writes the stream on the main socket in 64 KB pieces; ``sent`` shows how far it got
    (a blocked sendall means the replica is not reading: TCP backpressure)."""

    def __init__(self, conn: Conn, data: bytes) -> None:
        super().__init__(daemon=True)
        self.conn, self.data = conn, data
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(0, len(self.data), 65536):
                self.conn.sock.sendall(self.data[i:i + 65536])
                self.sent = min(len(self.data), i + 65536)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def source_core() -> ServerCore:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    c = core.connection_made()
    for i in range(500):
        c.receive_data(cmd("SET", f"snap:{i}", "v" * 50))
    c.receive_data(cmd("RPUSH", "list", *range(100)) + cmd("HSET", "h", "a", "1"))
    return core


def snapshot(offset: int) -> bytes:
    return encode_rdb_bytes(source_core().dbs, aux={"repl-stream-db": 0, "repl-id": MASTER_ID,
                                                    "repl-offset": offset}, now_ms=NOW)


def stream_of(n: int, value_size: int) -> bytes:
    parts = [cmd("SELECT", "0")]
    for i in range(n):
        parts.append(cmd("SET", f"k:{i % 3000}", f"{i:08d}" * (value_size // 8)))
        parts.append(cmd("INCR", "ctr"))  # applied twice would show in the digest
    return b"".join(parts)


def expected_digest(stream: bytes) -> str:
    core = source_core()
    core.connection_made().receive_data(stream)
    return dataset_digest(core.dbs, None)


def start_replica_of_port(tmp_path, port: int, *extra: str, name: str = "r"):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--master", f"127.0.0.1:{port}", "--sync-log-file", "sync.ndjson",
                        *extra, role="replica", tmpdir=str(d))


def stable(get, what: str, timeout: float = 20.0, window: float = 0.3) -> object:
    """Poll ``get()`` until it returns the same value over ``window`` seconds."""
    deadline = time.monotonic() + timeout
    last = get()
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        cur = get()
        if cur != last:
            last, since = cur, time.monotonic()
        elif time.monotonic() - since >= window:
            return cur
    raise AssertionError(f"{what} did not settle")


def test_fake_master_backpressure_at_the_limit_then_snapshot_ack_and_drain(tmp_path) -> None:
    fm = FakeMaster()
    rep = None
    sender = None
    try:
        rep = start_replica_of_port(tmp_path, fm.port, "--replica-full-sync-buffer-limit", "1mb")
        main = fm.main_handshake(rep.port, 42)
        offset = 1000
        rdb_conn = fm.rdb_handshake(rep.port, 42, offset)
        wait_for(lambda: "Starting to receive RDB and replication stream in parallel." in
                 rep.log(), 20, what="the replica to see +FULLRESYNC")
        stream = stream_of(8000, 4000)  # ~32 MB, far more than the limit plus TCP buffers
        sender = Sender(main, stream)
        sender.start()
        # the replica reads one block past the 1 MB limit, then stops reading: the rest of the
        # stream stays on this side (our sendall blocks), nothing is dropped
        size = stable(lambda: repl(rep.port)["replica_full_sync_buffer_size"], "buffer size")
        assert size == 2 * BLOCK_SIZE
        sent = stable(lambda: sender.sent, "sender progress")
        assert sent < len(stream) // 2 and sender.is_alive()
        info = repl(rep.port)
        assert info["master_link_status"] == "down" and info["master_sync_in_progress"] == 1
        assert info["replica_full_sync_buffer_peak"] == 2 * BLOCK_SIZE
        with r(rep.port) as c:
            assert c.info("memory")["mem_replica_full_sync_buffer"] == 2 * BLOCK_SIZE
        assert "Replication buffer limit has been reached (1048576 bytes)" in rep.log()
        # the snapshot: the replica closes the rdb channel after the mark and ACKs the offset
        rdb_conn.send(b"$EOF:" + MARK + b"\r\n" + snapshot(offset) + MARK)
        wait_for(rdb_conn.closed_by_peer, 20, what="the replica to close the rdb channel")
        assert main.command() == [b"REPLCONF", b"ACK", str(offset).encode()]
        sender.join(60)
        assert not sender.is_alive() and sender.error is None
        wait_for(lambda: repl(rep.port)["slave_repl_offset"] == offset + len(stream), 60,
                 what="the whole stream applied")
        assert digest(rep.port) == expected_digest(stream)
        info = repl(rep.port)
        assert info["master_link_status"] == "up"
        assert info["replica_full_sync_buffer_size"] == 0
        assert info["replica_full_sync_buffer_peak"] == 2 * BLOCK_SIZE  # kept after the sync
        drained = [e for e in sync_events(rep) if e["event"] == "buffer_drained"]
        assert len(drained) == 1 and drained[0]["buffer_peak"] == 2 * BLOCK_SIZE
        assert drained[0]["buffer_limit"] == 1024 * 1024
        assert "Successfully streamed replication buffer into the db" in rep.log()
    finally:
        if rep is not None:
            rep.stop()
        fm.close()
        if sender is not None:
            sender.join(5)


@pytest.mark.parametrize("cut", ["rdb-mid-payload", "main-mid-payload", "rdb-before-fullresync"])
def test_fake_master_connection_cut_mid_sync_retries_cleanly(tmp_path, cut: str) -> None:
    fm = FakeMaster()
    rep = None
    try:
        rep = start_replica_of_port(tmp_path, fm.port)
        offset = 500
        stream = stream_of(300, 100)
        rdb = snapshot(offset)
        main = fm.main_handshake(rep.port, 7)
        if cut == "rdb-before-fullresync":
            ch = fm.accept()
            ch.raw(10)
            ch.close()
        else:
            ch = fm.rdb_handshake(rep.port, 7, offset)
            main.send(stream)  # buffered by the replica, must not be applied twice
            ch.send(b"$EOF:" + MARK + b"\r\n" + rdb[:len(rdb) // 2])
            wait_for(lambda: repl(rep.port)["master_sync_read_bytes"] > 0, 20,
                     what="payload bytes read")
            (ch if cut == "rdb-mid-payload" else main).close()
        # the replica drops the other connection too (nothing applied) and starts over
        other = ch if cut == "main-mid-payload" else main
        wait_for(other.closed_by_peer, 20, what="the replica to close the other connection")
        assert repl(rep.port)["replica_full_sync_buffer_size"] == 0
        with r(rep.port) as c:
            assert c.dbsize() == 0
        main = fm.main_handshake(rep.port, 8)
        ch = fm.rdb_handshake(rep.port, 8, offset)
        main.send(stream[:1000])
        ch.send(b"$EOF:" + MARK + b"\r\n" + rdb + MARK)
        assert main.command() == [b"REPLCONF", b"ACK", str(offset).encode()]
        main.send(stream[1000:])
        wait_for(lambda: repl(rep.port)["slave_repl_offset"] == offset + len(stream), 30,
                 what="the stream applied")
        assert digest(rep.port) == expected_digest(stream)
        failed = [e for e in sync_events(rep) if e["event"] == "sync_failed"]
        assert failed, "the failed attempt is logged as a sync event"
    finally:
        if rep is not None:
            rep.stop()
        fm.close()


# -- pyrepl <-> pyrepl ----------------------------------------------------------------------------

def start_master(tmp_path, *extra: str, name: str = "m"):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--repl-diskless-sync-delay", "0", "--sync-log-file", "sync.ndjson",
                        *extra, tmpdir=str(d))


def replica_clients(master_port: int) -> list[dict[str, str]]:
    with r(master_port) as c:
        text = c.execute_command("CLIENT", "LIST").decode()
    out = []
    for line in text.splitlines():
        f = dict(part.split("=", 1) for part in line.split(" ") if "=" in part)
        if "S" in f.get("flags", ""):
            out.append(f)
    return out


def rdb_channel_events(rep) -> list[dict]:
    return [e for e in sync_events(rep) if e["role"] == "replica"]


def test_full_sync_under_write_load_over_the_rdb_channel(tmp_path) -> None:
    m = start_master(tmp_path, "--rdb-key-save-delay", "50")
    writer = LoadWriter(m.port, value_size=20)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 30000, writer, 2000)
        rep = stack.enter_context(start_replica_of_port(tmp_path, m.port))
        peak_master = 0
        deadline = time.monotonic() + 90
        while repl(rep.port).get("master_link_status") != "up":
            assert time.monotonic() < deadline, "link up"
            with r(m.port) as c:
                peak_master = max(peak_master, c.info("memory")["mem_clients_slaves"])
            time.sleep(0.05)
        ops_at_link_up = writer.ops
        wait_for(lambda: writer.ops > ops_at_link_up + 2000, 20, what="writes after link up")
        writer.finish()
        wait_synced(m.port, rep.port)
        with r(m.port) as c:
            assert c.info("stats")["sync_full"] == 1
        evs = rdb_channel_events(rep)
        names = [e["event"] for e in evs]
        assert names[:7] == ["psync_sent", "psync_reply", "rdb_first_byte", "rdb_received",
                             "load_done", "link_up", "buffer_drained"]
        assert evs[1]["result"] == "rdbchannel" and evs[5]["mode"] == "rdb-channel"
        drained = evs[6]
        # writes went on during the transfer: they were buffered on the replica and applied
        assert drained["bytes"] > 0 and drained["buffer_peak"] >= BLOCK_SIZE
        assert drained["buffer_limit"] == 256 * 1024 * 1024
        info = repl(rep.port)
        assert info["replica_full_sync_buffer_size"] == 0
        assert info["replica_full_sync_buffer_peak"] == drained["buffer_peak"]
        log = rep.log()
        assert "Starting to receive RDB and replication stream in parallel." in log
        assert "Starting to stream replication buffer into the db" in log
        # the master no longer holds the stream for the syncing replica: its replica output
        # stayed small while the replica buffered megabytes (Redis: ~1 MB vs ~38 MB)
        assert peak_master < drained["bytes"], (peak_master, drained["bytes"])
        assert len(replica_clients(m.port)) == 1  # the rdb channel is gone


def test_tiny_buffer_limit_forces_backpressure_and_loses_nothing(tmp_path) -> None:
    m = start_master(tmp_path, "--rdb-key-save-delay", "100")
    writer = LoadWriter(m.port, value_size=400)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 20000, writer, 2000)
        rep = stack.enter_context(
            start_replica_of_port(tmp_path, m.port, "--replica-full-sync-buffer-limit", "1"))
        held = 0
        deadline = time.monotonic() + 90
        while repl(rep.port).get("master_link_status") != "up":
            assert time.monotonic() < deadline, "link up"
            with r(m.port) as c:   # the replica's part of the shared buffer (omem)
                held = max([held] + [int(cl["omem"]) for cl in c.client_list(_type="replica")])
            time.sleep(0.05)
        writer.finish()
        wait_synced(m.port, rep.port)
        info = repl(rep.port)
        # one block past the tiny limit (two if a read straddled a block boundary)
        assert BLOCK_SIZE <= info["replica_full_sync_buffer_peak"] <= 2 * BLOCK_SIZE
        assert "Replication buffer limit has been reached (1 bytes)" in rep.log()
        # the replica stopped reading: the master held the rest for it
        assert held > 2 * BLOCK_SIZE, held
        drained = [e for e in rdb_channel_events(rep) if e["event"] == "buffer_drained"]
        assert len(drained) == 1 and drained[0]["buffer_limit"] == 1
        with r(m.port) as c:
            assert c.info("stats")["sync_full"] == 1


def _kill(master_port: int, which: str) -> None:
    flags = "SC" if which == "rdb" else "S"
    ids = [c["id"] for c in replica_clients(master_port) if c["flags"] == flags]
    assert len(ids) == 1, replica_clients(master_port)
    with r(master_port) as c:
        assert c.execute_command("CLIENT", "KILL", "ID", ids[0]) == 1


@pytest.mark.parametrize("which", ["rdb", "main"])
@pytest.mark.parametrize("point", ["waiting-for-the-fork", "mid-transfer"])
def test_each_connection_killed_at_several_points_retries_cleanly(tmp_path, which: str,
                                                                 point: str) -> None:
    waiting = point == "waiting-for-the-fork"
    m = start_master(tmp_path, "--repl-diskless-sync-delay", "3" if waiting else "0",
                     "--rdb-key-save-delay", "0" if waiting else "200")
    writer = LoadWriter(m.port, max_seconds=60, value_size=20)
    with m, writer, ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "10000", "key", "64")
        writer.start()
        rep = stack.enter_context(start_replica_of_port(tmp_path, m.port))
        # both connections exist; then the chosen point of the sync
        wait_for(lambda: {c["flags"] for c in replica_clients(m.port)} == {"S", "SC"}, 20,
                 what="main and rdb channel connected")
        if waiting:
            assert repl(rep.port)["master_sync_read_bytes"] == 0
        else:
            wait_for(lambda: repl(rep.port).get("master_sync_read_bytes", 0) > 0, 20,
                     what="the snapshot flowing")
            wait_for(lambda: repl(rep.port)["replica_full_sync_buffer_size"] > 0, 20,
                     what="stream buffered")
        with r(rep.port) as c:
            keys_before = c.dbsize()
        _kill(m.port, which)
        wait_for(lambda: "sync_failed" in [e["event"] for e in rdb_channel_events(rep)], 20,
                 what="the failed sync logged")
        # nothing of the failed attempt was applied (the retry starts at once and buffers
        # afresh; a stale buffer applied with it would double the INCRs: the digest shows it)
        with r(rep.port) as c:
            assert c.dbsize() == keys_before
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 90, what="retry")
        writer.finish()
        wait_synced(m.port, rep.port)
        clients = replica_clients(m.port)
        assert [c["flags"] for c in clients] == ["S"], clients  # no leaked rdb channel
        with r(m.port) as c:
            assert c.info("replication")["connected_slaves"] == 1
        failed = [e for e in rdb_channel_events(rep) if e["event"] == "sync_failed"]
        # the master aborts the whole sync when it loses either connection, so the replica
        # may notice the other one first
        assert failed[0]["reason"] in ("rdb-channel-lost", "main-channel-lost")
        assert [e["mode"] for e in rdb_channel_events(rep) if e["event"] == "link_up"] == \
            ["rdb-channel"]


def test_a_replica_arriving_while_another_snapshot_runs(tmp_path) -> None:
    m = start_master(tmp_path, "--rdb-key-save-delay", "200")
    writer = LoadWriter(m.port, value_size=20)
    with m, writer, ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "10000", "key", "64")
        writer.start()
        b = stack.enter_context(start_replica_of_port(tmp_path, m.port, name="b"))
        wait_for(lambda: repl(b.port).get("master_sync_read_bytes", 0) > 0, 30,
                 what="B's snapshot flowing")
        c2 = stack.enter_context(start_replica_of_port(tmp_path, m.port, name="c"))
        wait_for(lambda: repl(b.port).get("master_link_status") == "up"
                 and repl(c2.port).get("master_link_status") == "up", 120, what="both up")
        writer.finish()
        wait_synced(m.port, b.port, c2.port)
        for rep in (b, c2):
            evs = rdb_channel_events(rep)
            assert [e["mode"] for e in evs if e["event"] == "link_up"] == ["rdb-channel"]
            assert "sync_failed" not in [e["event"] for e in evs]
        clients = replica_clients(m.port)
        assert sorted(c["flags"] for c in clients) == ["S", "S"], clients
        with r(m.port) as c:
            info = c.info("replication")
            assert info["connected_slaves"] == 2
            assert c.info("stats")["sync_full"] == 2


@pytest.mark.parametrize("case", ["replica-rdb-channel-no", "master-rdb-channel-no",
                                  "master-disk-based"])
def test_repl_rdb_channel_no_on_either_side_or_disk_sync_gives_the_classic_sync(
        tmp_path, case: str) -> None:
    master_extra = {"master-rdb-channel-no": ("--repl-rdb-channel", "no"),
                    "master-disk-based": ("--repl-diskless-sync", "no")}.get(case, ())
    replica_extra = ("--repl-rdb-channel", "no") if case == "replica-rdb-channel-no" else ()
    m = start_master(tmp_path, *master_extra)
    with m, ExitStack() as stack:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "5000", "key", "32")
        rep = stack.enter_context(start_replica_of_port(tmp_path, m.port, *replica_extra))
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        with r(m.port) as c:
            c.set("after", "1")
        wait_synced(m.port, rep.port)
        evs = rdb_channel_events(rep)
        assert [e["result"] for e in evs if e["event"] == "psync_reply"] == ["full"]
        assert [e["mode"] for e in evs if e["event"] == "link_up"] == \
            ["disk" if case == "master-disk-based" else "diskless"]
        assert "initialize RDB channel" not in rep.log()
        assert repl(rep.port)["replica_full_sync_buffer_peak"] == 0
        decisions = [e for e in sync_events(m) if e["event"] == "psync_decision"]
        assert [e["result"] for e in decisions] == ["full"]
