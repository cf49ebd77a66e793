"""The pyrepl master process seen from a raw replica socket: the exact bytes of a full sync
(diskless: written by the forked child straight to the socket; disk: $<len> + the file), the
stream only after the first ACK (diskless), and the child's fate when its replica goes away or
stops reading.

The "replica" is a plain socket speaking what Redis 7.0.15 replicas send; what it receives is
parsed, the RDB loaded with pyrepl's loader and compared with the master's DEBUG DIGEST.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.support.rdb import rdb_digest
from tests.support.resp import RawClient, RawConn, call, encode_command, parse_reply
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow


class RawReplica(RawConn):
    def __init__(self, port: int, listening_port: int = 7777) -> None:
        super().__init__(port)
        self.listening_port = listening_port

    def send(self, *args: str | int) -> None:
        self.sock.sendall(encode_command(*args))

    def handshake(self, *capa: str) -> None:
        self.send("REPLCONF", "listening-port", self.listening_port)
        self.recv_until(lambda b: b.count(b"\r\n") >= 1)
        assert self.take() == b"+OK\r\n"
        args: list[str] = []
        for c in capa:
            args += ["capa", c]
        if args:
            self.send("REPLCONF", *args)
            self.recv_until(lambda b: b.count(b"\r\n") >= 1)
            assert self.take() == b"+OK\r\n"

    def full_sync(self) -> None:
        """A Redis 7 replica's handshake (capa eof psync2) and ``PSYNC ? -1``."""
        self.handshake("eof", "psync2")
        self.send("PSYNC", "?", "-1")


def commands(stream: bytes) -> list[list[bytes]]:
    """Split a replication stream (RESP arrays of bulk strings) into commands."""
    out = []
    pos = 0
    while pos < len(stream):
        eol = stream.index(b"\r\n", pos)
        assert stream[pos:pos + 1] == b"*", stream[pos:pos + 20]
        n = int(stream[pos + 1:eol])
        pos = eol + 2
        argv = []
        for _ in range(n):
            eol = stream.index(b"\r\n", pos)
            ln = int(stream[pos + 1:eol])
            argv.append(stream[eol + 2:eol + 2 + ln])
            pos = eol + 4 + ln
        out.append(argv)
    return out


def without_pings(stream: bytes) -> list[list[bytes]]:
    """The master PINGs into the stream once per repl-ping-replica-period (and at its first
    cron loop with replicas): those are legitimate anywhere."""
    return [c for c in commands(stream) if c != [b"ping"]]


def master_digest(port: int) -> str:
    with RawClient(port) as c:
        return parse_reply(c.call("DEBUG", "DIGEST")).decode()


@pytest.fixture
def master(pyrepl_servers):
    return lambda *extra: pyrepl_servers("--loglevel", "notice", *extra)


def test_diskless_bytes_from_the_child_and_stream_after_ack(master, tmp_path) -> None:
    srv = master("--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "3600")
    call(srv.port, "DEBUG", "POPULATE", "3000", "key", "20")
    call(srv.port, "HSET", "h", "f", "v")
    want = master_digest(srv.port)
    r = RawReplica(srv.port)
    try:
        r.full_sync()
        head = r.read_line().split()
        assert head[0] == b"+FULLRESYNC" and head[2] == b"0" and len(head[1]) == 40
        eof = r.read_line()
        assert eof.startswith(b"$EOF:") and len(eof) == 45
        mark = eof[5:]
        r.recv_until(lambda b: mark in b)
        rdb, rest = r.take().split(mark, 1)
        assert rest == b"" and rdb.startswith(b"REDIS0010")
        got, aux = rdb_digest(tmp_path, rdb)
        assert got == want
        assert aux[b"repl-id"] == head[1] and aux[b"repl-offset"] == b"0"
        call(srv.port, "SET", "after", "1")
        time.sleep(0.3)  # give the master every chance to (wrongly) send before the ACK
        r.sock.setblocking(False)
        try:
            early = r.sock.recv(100)
        except BlockingIOError:
            early = b""
        r.sock.setblocking(True)
        assert early == b""
        r.send("REPLCONF", "ACK", "0")
        r.recv_until(lambda b: encode_command("SET", "after", "1") in b)
        assert without_pings(r.take()) == [[b"SELECT", b"0"], [b"SET", b"after", b"1"]]
        log = srv.log()
        pid = int(log.split("Background RDB transfer started by pid ")[1].split()[0])
        assert "Streamed RDB transfer with replica 127.0.0.1:7777 succeeded" in log
        # the parent never wrote the snapshot bytes itself: it counts what the child reported
        stats = parse_reply(RawClient(srv.port).call("INFO", "stats")).decode()
        repl_out = int(stats.split("total_net_repl_output_bytes:")[1].split()[0])
        handshake = 2 * len(b"+OK\r\n")  # REPLCONF replies, before it was a replica
        assert repl_out == r.received - handshake
        assert not os.path.exists(f"/proc/{pid}")
    finally:
        r.close()


def test_disk_bulk_is_length_prefixed_and_followed_by_the_stream(master, tmp_path) -> None:
    srv = master("--repl-diskless-sync", "no", "--repl-ping-replica-period", "3600")
    call(srv.port, "DEBUG", "POPULATE", "20000", "key", "50")
    want = master_digest(srv.port)
    r = RawReplica(srv.port)
    try:
        r.full_sync()
        head = r.read_line().split()
        assert head[0] == b"+FULLRESYNC"
        call(srv.port, "SET", "during", "1")
        r.recv_until(lambda b: b.lstrip(b"\n").startswith(b"$") and b"\r\n" in b)
        while r.buf[:1] == b"\n":  # keepalives while the BGSAVE ran
            del r.buf[:1]
        n = int(r.read_line()[1:])
        expect = encode_command("SET", "during", "1")
        r.recv_until(lambda b: len(b) >= n and expect in b[n:])
        data = r.take()
        rdb, rest = data[:n], data[n:]
        # no CRLF after the payload; the held stream follows at once (no ACK needed)
        assert without_pings(rest) == [[b"SELECT", b"0"], [b"SET", b"during", b"1"]]
        with open(os.path.join(srv.dir, "dump.rdb"), "rb") as f:
            assert f.read() == rdb
        assert rdb_digest(tmp_path, rdb)[0] == want
    finally:
        r.close()


def test_the_child_is_stopped_when_its_only_replica_leaves(master) -> None:
    srv = master("--repl-diskless-sync-delay", "0")
    call(srv.port, "DEBUG", "POPULATE", "1000000", "key", "200")  # ~220 MB of RDB
    r = RawReplica(srv.port)
    r.full_sync()
    r.recv_until(lambda b: len(b) > 100_000)  # the transfer is under way; now stop reading
    pid = int(wait_for(lambda: "started by pid" in srv.log() and
                       srv.log().split("Background RDB transfer started by pid ")[1].split()[0],
                       10, what="the child pid"))
    assert os.path.exists(f"/proc/{pid}")
    r.close()
    wait_for(lambda: "Diskless rdb transfer, last replica dropped, killing fork child."
             in srv.log(), 15, what="the child to be killed")
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10, what="the child to be gone")
    assert "Connection with replica 127.0.0.1:7777 lost." in srv.log()
    # the master goes on serving and can sync the next replica
    assert call(srv.port, "PING") == b"PONG"
    r2 = RawReplica(srv.port, 7778)
    try:
        r2.handshake("eof", "psync2")
        r2.send("PSYNC", "?", "-1")
        assert r2.read_line().startswith(b"+FULLRESYNC ")
    finally:
        r2.close()


def test_a_replica_that_stops_reading_times_out_in_the_child(master) -> None:
    srv = master("--repl-diskless-sync-delay", "0", "--repl-timeout", "2")
    call(srv.port, "DEBUG", "POPULATE", "1000000", "key", "200")
    r = RawReplica(srv.port)
    try:
        r.full_sync()
        r.recv_until(lambda b: len(b) > 100_000)
        # stop reading: the child makes no progress for repl-timeout and gives up
        wait_for(lambda: "Disconnecting timedout replica (full sync): 127.0.0.1:7777"
                 in srv.log(), 20, what="the full-sync timeout")
        assert "Background transfer error" in srv.log()
        info = parse_reply(RawClient(srv.port).call("INFO", "replication")).decode()
        assert "connected_slaves:0" in info
    finally:
        r.close()


def test_a_disk_replica_leaving_mid_bulk_is_forgotten(master) -> None:
    srv = master("--repl-diskless-sync", "no")
    call(srv.port, "DEBUG", "POPULATE", "1000000", "key", "200")
    r = RawReplica(srv.port)
    r.full_sync()
    assert r.read_line().startswith(b"+FULLRESYNC ")
    r.recv_until(lambda b: len(b) > 200_000, 60)
    assert r.buf.lstrip(b"\n").startswith(b"$")
    r.close()
    wait_for(lambda: "Connection with replica 127.0.0.1:7777 lost." in srv.log(), 15,
             what="the replica to be dropped")
    assert call(srv.port, "SET", "k", "v") == b"OK"
    info = parse_reply(RawClient(srv.port).call("INFO", "replication")).decode()
    assert "connected_slaves:0" in info
