"""Replication faults with real processes: kill -9 and restart of a replica and of a master,
link cuts under write load, a promotion with two siblings, and a master that sends garbage.

Theory of operation: every scenario starts real ``pyrepl`` processes on free loopback ports
(tests/support/procs.py), breaks something the way it breaks in production (SIGKILL, CLIENT KILL
while a writer thread writes, REPLICAOF NO ONE, a fake master written here that lies on the
wire), and then asserts what must survive: the master's sync counters (``sync_full`` /
``sync_partial_ok``) say whether the resync was partial, the ids (``master_replid2``) say which
history was continued, the sync log says why a full sync happened, and DEBUG DIGEST says the
datasets are equal. The fake master is a plain socket server thread: it answers the handshake
like Redis, serves a real RDB (pyrepl.rdb.encoder) once, then breaks the next transfer; the
replica must log a clean error, keep serving its old dataset unchanged and reconnect.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable

import pytest

from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.decoder import load_rdb_file
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.resp.writer import encode_command
from tests.support.load import LoadWriter
from tests.support.procs import ServerProcess, start_pyrepl
from tests.support.redispy import r, repl
from tests.support.resp import parse_command
from tests.support.waits import wait_for, wait_synced

pytestmark = pytest.mark.slow

NO_PINGS = ("--repl-ping-replica-period", "3600")  # no PING may move the offset under a test


# -- helpers ----------------------------------------------------------------------------------

def info(port: int, section: str) -> dict:
    with r(port) as c:
        return c.info(section)


def stats(port: int) -> dict:
    return info(port, "stats")


def start_master(tmp_path, name: str, *extra: str, port: int | None = None) -> ServerProcess:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--repl-diskless-sync-delay", "0", *extra, tmpdir=str(d), port=port)


def start_replica(tmp_path, name: str, master_port: int, *extra: str,
                  port: int | None = None) -> ServerProcess:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    return start_pyrepl("--master", f"127.0.0.1:{master_port}", "--repl-diskless-sync-delay",
                        "0", *extra, role="replica", tmpdir=str(d), port=port)


def write_some(port: int, tag: str, n: int = 200) -> None:
    """Writes of every type into two databases."""
    with r(port) as c:
        p = c.pipeline(transaction=False)
        for i in range(n):
            p.set(f"{tag}:{i}", i)
        p.rpush(f"{tag}:l", *range(20))
        p.hset(f"{tag}:h", mapping={"a": 1, "b": 2})
        p.zadd(f"{tag}:z", {"x": 1.5, "y": -2})
        p.sadd(f"{tag}:s", "m1", "m2")
        p.incrbyfloat(f"{tag}:f", 1.25)
        p.execute()
    with r(port, 3) as c3:
        c3.set(f"{tag}:db3", "v")


def read_events(path: str) -> list[dict]:
    """The sync log's events (a line cut short by a SIGKILL is skipped)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def stop_all(*procs: ServerProcess | None) -> None:
    for p in procs:
        if p is not None:
            p.stop()


# -- kill -9 of a replica -----------------------------------------------------------------------

def test_replica_killed_with_sigkill_restarts_from_its_rdb_and_continues_partially(
        tmp_path) -> None:
    m = start_master(tmp_path, "m", *NO_PINGS)
    rep = start_replica(tmp_path, "r", m.port, "--save", "3600 1")
    rep2 = None
    try:
        write_some(m.port, "one")
        wait_synced(m.port, rep.port)
        saves = info(rep.port, "persistence")["rdb_saves"]
        with r(rep.port) as c:
            c.bgsave()
        wait_for(lambda: info(rep.port, "persistence")["rdb_saves"] > saves, 30,
                 what="the replica's BGSAVE")
        p = info(rep.port, "persistence")
        assert p["rdb_bgsave_in_progress"] == 0 and p["rdb_last_bgsave_status"] == "ok"
        # the replica's RDB carries its master's history: repl-id and repl-offset
        aux = load_rdb_file(os.path.join(rep.dir, "dump.rdb"), 16).aux
        saved_id = aux[b"repl-id"].decode()
        saved_off = int(aux[b"repl-offset"])
        assert saved_id == repl(m.port)["master_replid"]
        assert 0 < saved_off == repl(rep.port)["slave_repl_offset"]
        write_some(m.port, "after-save")  # reaches the replica, not its RDB
        wait_synced(m.port, rep.port)
        before = stats(m.port)
        rep.kill()  # SIGKILL: no shutdown save
        assert not rep.alive()
        write_some(m.port, "while-down")
        mark = len(rep.log())
        rep2 = start_replica(tmp_path, "r", m.port, "--save", "3600 1", port=rep.port)
        wait_synced(m.port, rep2.port)
        after = stats(m.port)
        assert after["sync_full"] == before["sync_full"]
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 1
        log = rep2.log()[mark:]
        assert f"Trying a partial resynchronization (request {saved_id}:{saved_off + 1})." in log
        assert "Successful partial resynchronization with master." in log
        with r(rep2.port) as c:
            assert c.get("after-save:7") == b"7" and c.get("while-down:7") == b"7"
        write_some(m.port, "later")
        wait_synced(m.port, rep2.port)
    finally:
        stop_all(rep2, rep, m)


# -- kill -9 of a master ------------------------------------------------------------------------

def _master_with_two_replicas(tmp_path, *replica_extra: str):  # noqa: ANN202
    m = start_master(tmp_path, "m", *NO_PINGS, "--sync-log-file", "sync.ndjson")
    r1 = start_replica(tmp_path, "r1", m.port, *replica_extra)
    r2 = start_replica(tmp_path, "r2", m.port, *replica_extra)
    return m, r1, r2


def _save_on(m: ServerProcess) -> tuple[str, int]:
    """SAVE on the master, check its RDB's history; returns (replid, offset) of that history."""
    # the replicas' snapshot child may still be finishing: SAVE refuses to run beside it
    wait_for(lambda: info(m.port, "persistence")["rdb_bgsave_in_progress"] == 0, 30,
             what="no RDB child")
    old = repl(m.port)
    with r(m.port) as c:
        assert c.save() is True
    aux = load_rdb_file(os.path.join(m.dir, "dump.rdb"), 16).aux
    assert aux[b"repl-id"].decode() == old["master_replid"]
    assert int(aux[b"repl-offset"]) == old["master_repl_offset"]
    return old["master_replid"], old["master_repl_offset"]


def test_master_killed_right_after_save_restarts_and_its_replicas_continue_partially(
        tmp_path) -> None:
    m, r1, r2 = _master_with_two_replicas(tmp_path)
    m2 = None
    try:
        write_some(m.port, "one")
        wait_synced(m.port, r1.port, r2.port)
        old_id, off = _save_on(m)
        assert repl(m.port)["master_repl_offset"] == off  # nothing written after the SAVE
        m.kill()
        m2 = start_master(tmp_path, "m", *NO_PINGS, "--sync-log-file", "sync.ndjson",
                          port=m.port)
        i2 = repl(m2.port)
        assert i2["master_replid2"] == old_id and i2["second_repl_offset"] == off + 1
        assert i2["master_replid"] != old_id and i2["master_repl_offset"] == off
        wait_synced(m2.port, r1.port, r2.port)
        s = stats(m2.port)
        assert s["sync_full"] == 0 and s["sync_partial_ok"] == 2
        for p in (r1.port, r2.port):  # +CONTINUE <new id>: the replicas shifted too
            i = repl(p)
            assert i["master_replid"] == i2["master_replid"]
            assert i["master_replid2"] == old_id and i["second_repl_offset"] == off + 1
        run_id = info(m2.port, "server")["run_id"]
        decisions = [e for e in read_events(os.path.join(m2.dir, "sync.ndjson"))
                     if e["event"] == "psync_decision" and e["run_id"] == run_id]
        assert [(e["result"], e["req_replid"], e["req_offset"]) for e in decisions] == \
            [("continue", old_id, off + 1)] * 2
        write_some(m2.port, "two")
        wait_synced(m2.port, r1.port, r2.port)
    finally:
        stop_all(r1, r2, m2, m)


@pytest.mark.parametrize("rdb_channel", ["yes", "no"])
def test_master_killed_after_writes_that_followed_its_save_forces_full_syncs(
        tmp_path, rdb_channel: str) -> None:
    m, r1, r2 = _master_with_two_replicas(tmp_path, "--repl-rdb-channel", rdb_channel)
    m2 = None
    try:
        write_some(m.port, "one")
        wait_synced(m.port, r1.port, r2.port)
        old_id, off = _save_on(m)
        write_some(m.port, "lost")  # after the SAVE: the replicas have it, the RDB does not
        wait_synced(m.port, r1.port, r2.port)
        lost_off = repl(m.port)["master_repl_offset"]
        assert lost_off > off
        m.kill()
        m2 = start_master(tmp_path, "m", *NO_PINGS, "--sync-log-file", "sync.ndjson",
                          port=m.port)
        wait_synced(m2.port, r1.port, r2.port)
        s = stats(m2.port)
        assert s["sync_full"] == 2 and s["sync_partial_ok"] == 0 and s["sync_partial_err"] == 2
        run_id = info(m2.port, "server")["run_id"]
        decisions = [e for e in read_events(os.path.join(m2.dir, "sync.ndjson"))
                     if e["event"] == "psync_decision" and e["run_id"] == run_id]
        # the replicas asked for the old id past the point the restarted master can vouch for
        # (a full sync: classic, or through an rdb channel when the replicas offer one)
        result = "rdbchannel" if rdb_channel == "yes" else "full"
        assert [(e["result"], e["reason"], e["req_replid"], e["req_offset"])
                for e in decisions] == [(result, "replid-mismatch", old_id, lost_off + 1)] * 2
        assert (f"Partial resynchronization not accepted: Requested offset for second ID was "
                f"{lost_off + 1}, but I can reply up to {off + 1}") in m2.log()
        for p in (r1.port, r2.port):  # consistent with the master: the lost writes are gone
            with r(p) as c:
                assert c.get("lost:1") is None and c.get("one:1") == b"1"
        write_some(m2.port, "two")
        wait_synced(m2.port, r1.port, r2.port)
    finally:
        stop_all(r1, r2, m2, m)


# -- link cuts under write load -----------------------------------------------------------------

def test_link_cuts_under_write_load_resync_partially_every_time(tmp_path) -> None:
    m = start_master(tmp_path, "m", "--repl-backlog-size", "128mb")
    with r(m.port) as c:  # DEBUG POPULATE is not propagated: before the replica starts
        c.execute_command("DEBUG", "POPULATE", "3000", "pre", "32")
    rep = start_replica(tmp_path, "r", m.port)
    writer = LoadWriter(m.port, max_ops=3_000_000)
    cuts = 6
    try:
        wait_synced(m.port, rep.port)
        base = stats(m.port)
        writer.start()
        wait_for(lambda: writer.ops > 1000, 20, what="write load running")
        for i in range(cuts):
            partial = stats(m.port)["sync_partial_ok"]
            if i % 2 == 0:
                with r(m.port) as c:
                    assert c.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
            else:
                with r(rep.port) as c:
                    assert c.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
            wait_for(lambda p=partial: stats(m.port)["sync_partial_ok"] > p
                     and repl(rep.port)["master_link_status"] == "up", 30,
                     what=f"partial resync after cut {i}")
            ops = writer.ops
            wait_for(lambda o=ops: writer.ops > o + 500 or writer.error is not None, 20,
                     what="writes between cuts")
        writer.finish()
        wait_synced(m.port, rep.port)
        s = stats(m.port)
        assert s["sync_full"] == base["sync_full"]
        assert s["sync_partial_ok"] == base["sync_partial_ok"] + cuts
        with r(m.port) as c:
            assert int(c.get("load:counter")) == writer.ops // 2
    finally:
        writer.stop_event.set()
        stop_all(rep, m)


# -- promotion with two siblings -----------------------------------------------------------------

def test_promoted_sibling_serves_the_other_sibling_and_the_old_master_partially(
        tmp_path) -> None:
    m = start_master(tmp_path, "m", *NO_PINGS)
    r1 = start_replica(tmp_path, "r1", m.port, *NO_PINGS)
    r2 = start_replica(tmp_path, "r2", m.port, *NO_PINGS)
    try:
        write_some(m.port, "pre")
        wait_synced(m.port, r1.port, r2.port)
        old_id, off = repl(m.port)["master_replid"], repl(m.port)["master_repl_offset"]
        before = stats(r1.port)
        marks = {p.port: len(p.log()) for p in (m, r2)}
        with r(r1.port) as c:
            assert c.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        i1 = repl(r1.port)
        assert i1["role"] == "master"
        assert i1["master_replid2"] == old_id and i1["second_repl_offset"] == off + 1
        new_id = i1["master_replid"]
        write_some(r1.port, "promoted")
        for p in (r2.port, m.port):
            with r(p) as c:
                assert c.execute_command("REPLICAOF", "127.0.0.1", str(r1.port)) == b"OK"
        wait_synced(r1.port, r2.port, m.port)
        after = stats(r1.port)
        assert after["sync_full"] == before["sync_full"] == 0
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 2
        for proc in (m, r2):
            i = repl(proc.port)
            assert i["role"] == "slave"
            assert (i["master_replid"], i["master_replid2"], i["second_repl_offset"]) == \
                (new_id, old_id, off + 1)
            log = proc.log()[marks[proc.port]:]
            assert f"Trying a partial resynchronization (request {old_id}:{off + 1})." in log
            assert f"Master replication ID changed to {new_id}" in log  # +CONTINUE <new id>
        with r(m.port) as c:
            assert c.get("promoted:3") == b"3"
        write_some(r1.port, "after")
        wait_synced(r1.port, r2.port, m.port)
    finally:
        stop_all(r2, m, r1)


# -- a fake master that breaks the wire ----------------------------------------------------------

FAKE_ID = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed"
NEW_ID = "0badc0de0badc0de0badc0de0badc0de0badc0de"
EOF_MARK = b"7f3a9c1e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a"


def _source_dataset() -> ServerCore:
    """A real dataset of every type in two databases (what the fake master serves)."""
    import pyrepl.commands  # noqa: F401  (fills the command table)

    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=int(time.time() * 1000))
    c = core.connection_made()
    for argv in (["SET", "s", "hello"], ["SET", "big", "x" * 3000], ["RPUSH", "l", "a", "b", "1"],
                 ["SADD", "set", "m1", "m2"], ["HSET", "h", "f", "v", "n", "2"],
                 ["ZADD", "z", "1.5", "a", "-2", "b"], ["SET", "ttl", "v", "EX", "100000"],
                 ["SELECT", "2"], ["SET", "db2", "two"],
                 ["RPUSH", "db2:l", *[f"e{i}" for i in range(200)]]):
        c.receive_data(encode_command([a.encode() for a in argv]))
    return core


SRC = _source_dataset()
SRC_DIGEST = dataset_digest(SRC.dbs, None).encode()


def _rdb(replid: str) -> bytes:
    return encode_rdb_bytes(SRC.dbs, aux={"repl-stream-db": 0, "repl-id": replid,
                                          "repl-offset": 0}, now_ms=SRC.now_ms)


class FakeMaster(threading.Thread):
    """A Redis-like master on 127.0.0.1: answers the handshake; connection 1 gets a valid full
    sync and is closed once the replica has ACKed it; connection 2 gets ``bad``; later
    connections are recorded and held (bounded by a deadline)."""

    def __init__(self, bad: Callable[[socket.socket], None], max_seconds: float = 120) -> None:
        super().__init__(daemon=True)
        self.bad = bad
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.deadline = time.monotonic() + max_seconds
        self.stop_event = threading.Event()
        self.psyncs: list[list[bytes]] = []  # the PSYNC of each connection, in order
        self.acks: list[int] = []
        self.error: BaseException | None = None

    def running(self) -> bool:
        return not self.stop_event.is_set() and time.monotonic() < self.deadline

    def run(self) -> None:
        n = 0
        try:
            while self.running():
                try:
                    conn, _ = self.sock.accept()
                except TimeoutError:
                    continue
                n += 1
                with conn:
                    conn.settimeout(0.1)
                    self._serve(conn, n)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.sock.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)

    def psync_count(self) -> int:
        """PSYNCs seen so far (re-raises what broke the fake itself, for wait_for to show)."""
        if self.error is not None:
            raise self.error
        return len(self.psyncs)

    def _commands(self, conn: socket.socket):  # noqa: ANN202 - generator of argv lists
        buf = b""
        while self.running():
            while True:
                parsed = parse_command(buf)
                if parsed is None:
                    break
                argv, used = parsed
                buf = buf[used:]
                yield argv
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data

    def _serve(self, conn: socket.socket, n: int) -> None:
        cmds = self._commands(conn)
        for argv in cmds:
            name = argv[0].upper()
            if name == b"PING":
                conn.sendall(b"+PONG\r\n")
            elif name == b"REPLCONF":
                conn.sendall(b"+OK\r\n")
            elif name in (b"PSYNC", b"SYNC"):
                self.psyncs.append(argv)
                break
            else:
                conn.sendall(b"-ERR unexpected\r\n")
        else:
            return
        if n == 1:
            rdb = _rdb(FAKE_ID)
            conn.sendall(b"+FULLRESYNC %s 0\r\n$%d\r\n" % (FAKE_ID.encode(), len(rdb)) + rdb)
            for argv in cmds:  # the replica ACKs once it has loaded the RDB
                if argv[:2] == [b"REPLCONF", b"ACK"]:
                    self.acks.append(int(argv[2]))
                    return  # close: the replica caches this master and PSYNCs again
            return
        if n == 2:
            self.bad(conn)
        for _ in cmds:  # hold the connection until the replica closes it (or the deadline)
            pass


def _full_header(length: int) -> bytes:
    return b"+FULLRESYNC %s 0\r\n$%d\r\n" % (NEW_ID.encode(), length)


def _garbage_after_continue(conn: socket.socket) -> None:
    conn.sendall(b"+CONTINUE\r\n*zz\r\n")


def _inline_after_continue(conn: socket.socket) -> None:
    conn.sendall(b"+CONTINUE\r\n")
    conn.sendall(b"this is not the replication protocol\r\n")


def _length_shorter_than_rdb(conn: socket.socket) -> None:
    rdb = _rdb(NEW_ID)
    conn.sendall(_full_header(len(rdb) - 10) + rdb)


def _length_longer_then_eof(conn: socket.socket) -> None:
    rdb = _rdb(NEW_ID)
    conn.sendall(_full_header(len(rdb) + 100) + rdb)
    conn.shutdown(socket.SHUT_WR)  # EOF before the announced length


def _truncated_rdb(conn: socket.socket) -> None:
    rdb = _rdb(NEW_ID)[:-200]
    conn.sendall(_full_header(len(rdb)) + rdb)


def _truncated_eof_form(conn: socket.socket) -> None:
    rdb = _rdb(NEW_ID)[:-200]
    conn.sendall(b"+FULLRESYNC %s 0\r\n$EOF:%s\r\n" % (NEW_ID.encode(), EOF_MARK) + rdb
                 + EOF_MARK)


def _bad_crc(conn: socket.socket) -> None:
    rdb = _rdb(NEW_ID)
    rdb = rdb[:-1] + bytes([rdb[-1] ^ 0xFF])  # the last byte of the CRC64
    conn.sendall(_full_header(len(rdb)) + rdb)


@pytest.mark.parametrize("bad,error", [
    (_garbage_after_continue, "Protocol error (invalid mbulk count) from client"),
    (_inline_after_continue, "Receiving inline protocol from master, master stream "
                             "corruption?"),
    (_length_shorter_than_rdb, "Failed trying to load the MASTER synchronization DB from "
                               "socket"),
    (_length_longer_then_eof, "I/O error trying to sync with MASTER"),
    (_truncated_rdb, "Failed trying to load the MASTER synchronization DB from socket"),
    (_truncated_eof_form, "Failed trying to load the MASTER synchronization DB from socket"),
    (_bad_crc, "Wrong RDB checksum"),
], ids=["garbage-after-continue", "inline-after-continue", "bulk-length-short",
        "bulk-length-long-then-eof", "truncated-rdb", "truncated-rdb-eof-form", "bad-crc"])
def test_bad_input_from_the_master_keeps_the_old_dataset_and_reconnects(
        tmp_path, bad: Callable[[socket.socket], None], error: str) -> None:
    fake = FakeMaster(bad)
    fake.start()
    rep = None
    try:
        rep = start_replica(tmp_path, "r", fake.port)
        # connection 1: a real RDB is loaded, acked, then the link drops
        wait_for(lambda: fake.psync_count() >= 2 and fake.acks, 30,
                 what="the first sync and the reconnect")
        assert fake.psyncs[0] == [b"PSYNC", b"?", b"-1"]
        assert fake.psyncs[1] == [b"PSYNC", FAKE_ID.encode(), b"1"]  # the cached master
        with r(rep.port) as c:
            assert c.execute_command("DEBUG", "DIGEST") == SRC_DIGEST
        # connection 2 breaks; a clean error, a new connection, the old dataset intact
        wait_for(lambda: fake.psync_count() >= 3, 30, what="a new connection after the error")
        log = rep.log()
        assert error in log, log[-3000:]
        assert "Traceback" not in log and "Replica link error" not in log
        assert rep.alive()
        with r(rep.port) as c:
            assert c.execute_command("DEBUG", "DIGEST") == SRC_DIGEST
            assert c.get("s") == b"hello" and c.lrange("l", 0, -1) == [b"a", b"b", b"1"]
            assert c.info("replication")["master_link_status"] == "down"
        if bad in (_garbage_after_continue, _inline_after_continue):
            # a master that broke the stream is not cached: the next sync is a full one
            assert fake.psyncs[2] == [b"PSYNC", b"?", b"-1"]
        else:
            assert fake.psyncs[2][0] == b"PSYNC"
        assert fake.error is None, fake.error
    finally:
        stop_all(rep)
        fake.stop()
    assert not fake.is_alive()
