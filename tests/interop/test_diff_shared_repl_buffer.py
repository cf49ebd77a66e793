"""Redis 7's shared replication buffer, the same scenario on pyrepl and on redis-server 7.0.15.

A master with ``repl-backlog-size 1mb`` has two replicas, both raw sockets speaking the replica
protocol byte for byte (so what they read and when is in the test's hands):

* ``syncing`` asks for a full sync and then neither reads nor ACKs: a diskless replica waits
  for its first ``REPLCONF ACK`` before it is streamed to, so the master keeps every byte
  since its snapshot for it. Nothing of that sits in a socket buffer: what the master keeps
  is exactly its own doing.
* ``follower`` is online and caught up when its link is lost (it closes), then the master
  takes a burst of 3x ``repl-backlog-size``, and the follower comes back with ``PSYNC <replid>
  <offset+1>``.

While ``syncing`` pins the history, Redis's backlog holds the whole burst, so the follower
continues (``+CONTINUE``) although it is 3 MB behind a 1 MB backlog; without ``syncing``
(``pinned=False``) both masters answer ``+FULLRESYNC``. The continued stream is read to the
end and checked command by command. Then everyone catches up (or goes), and the master's
replication memory returns to the backlog's size. INFO's ``repl_backlog_histlen``,
``mem_total_replication_buffers`` and CLIENT LIST's ``omem`` of the pinning replica are
compared between the two servers (equal up to the few bytes of PINGs each put in its stream
at its own moments).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import encode_command

pytestmark = [pytest.mark.slow, pytest.mark.interop]

MB = 1 << 20
BLOCK = 20440 + 64                       # one 16 KiB block and its node, as Redis counts it
VALUE = "v" * 1000
BURST = 3 * 1024                         # 3 x 1 KB SETs per backlog MB: ~3.2 MB of stream


class FakeReplica:
    """A replica connection driven by the test (bounded reads, timeouts everywhere)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.settimeout(0.25)
        self.buf = bytearray()
        self.acked: int | None = None   # ACKed once: ACK again while waiting, as replicas do

    def _fill(self, deadline: float) -> None:
        while True:
            assert time.monotonic() < deadline, f"timed out with {bytes(self.buf[:80])!r}"
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                if self.acked is not None:
                    self.ack(self.acked)
                continue
            assert chunk, "closed by the master"
            self.buf += chunk
            return

    def line(self, timeout: float = 20) -> bytes:
        """The next line, skipping the master's ``\\n`` keepalives."""
        deadline = time.monotonic() + timeout
        while True:
            while self.buf[:1] == b"\n":
                del self.buf[:1]
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[:i + 2]
                return line
            self._fill(deadline)

    def handshake(self, replid: str = "?", offset: int = -1) -> bytes:
        self.sock.sendall(b"PING\r\n")
        assert self.line() == b"+PONG"
        self.sock.sendall(encode_command("REPLCONF", "listening-port", "9999")
                          + encode_command("REPLCONF", "capa", "eof", "capa", "psync2"))
        assert self.line() == b"+OK" and self.line() == b"+OK"
        self.sock.sendall(encode_command("PSYNC", replid, offset))
        return self.line()

    def read_rdb(self) -> None:
        """The diskless payload up to its end mark."""
        head = self.line()
        assert head.startswith(b"$EOF:"), head
        mark = head[5:]
        deadline = time.monotonic() + 20
        while mark not in self.buf:
            self._fill(deadline)
        del self.buf[:self.buf.index(mark) + len(mark)]

    def ack(self, offset: int) -> None:
        self.acked = offset
        self.sock.sendall(encode_command("REPLCONF", "ACK", offset))

    def read_stream(self, nbytes: int, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.buf) < nbytes:
            self._fill(deadline)
        data = bytes(self.buf[:nbytes])
        del self.buf[:nbytes]
        return data

    def close(self) -> None:
        self.sock.close()


def start(kind: str) -> Any:
    args = ("--repl-backlog-size", "1mb", "--repl-diskless-sync", "yes",
            "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "3600")
    return start_redis(*args) if kind == "redis" else start_pyrepl(*args)


def info(r: redis.Redis) -> dict[str, Any]:
    return {**r.info("replication"), **r.info("memory")}


def omem(r: redis.Redis) -> dict[str, int]:
    return {c["id"]: int(c["omem"]) for c in r.client_list(_type="replica")}


def run(kind: str, pinned: bool) -> dict[str, Any]:
    srv = start(kind)
    out: dict[str, Any] = {}
    try:
        r = redis.Redis(port=srv.port, decode_responses=True)
        r.set("before", "1")
        follower = FakeReplica(srv.port)
        head = follower.handshake().split()
        assert head[0] == b"+FULLRESYNC"
        replid, offset = head[1].decode(), int(head[2])
        follower.read_rdb()
        follower.ack(offset)
        syncing = None
        if pinned:               # a second replica whose snapshot starts now and never ACKs
            syncing = FakeReplica(srv.port)
            assert syncing.handshake().startswith(b"+FULLRESYNC")
            syncing.read_rdb()
        r.set("follower-sees-this", "1")
        want = encode_command("SELECT", "0") + encode_command("SET", "follower-sees-this", "1")
        # (the master's first cron loop may PING into the new backlog: Redis 7 does)
        end = info(r)["master_repl_offset"]
        got = follower.read_stream(end - offset)
        assert got.replace(encode_command("ping"), b"") == want, got
        offset = end
        follower.ack(offset)
        follower.close()         # the link is lost; the follower knows its offset
        deadline = time.monotonic() + 10
        while r.info("replication")["connected_slaves"] != (1 if pinned else 0):
            assert time.monotonic() < deadline, "the master noticed the lost link"
            time.sleep(0.02)
        p = r.pipeline(transaction=False)
        for i in range(BURST):
            p.set(f"burst:{i}", VALUE)
            if i % 256 == 255:
                p.execute()
        p.execute()
        after_burst = info(r)
        out["histlen"] = after_burst["repl_backlog_histlen"]
        out["mem_total"] = after_burst["mem_total_replication_buffers"]
        out["mem_clients_slaves"] = after_burst["mem_clients_slaves"]
        out["omem"] = sorted(omem(r).values())
        out["first_byte"] = after_burst["repl_backlog_first_byte_offset"]
        out["behind"] = after_burst["master_repl_offset"] - offset
        back = FakeReplica(srv.port)
        reply = back.handshake(replid, offset + 1)
        out["psync"] = reply.split()[0].decode()
        if reply.startswith(b"+CONTINUE"):
            stream = back.read_stream(out["behind"])
            sets = stream.count(b"*3\r\n$3\r\nSET\r\n")
            assert sets == BURST and stream.endswith(
                encode_command("SET", f"burst:{BURST - 1}", VALUE)), "the exact stream"
            back.ack(offset + out["behind"])
        if syncing is not None:  # it loads, ACKs and catches up: nobody pins the burst now
            syncing.ack(offset)
            syncing.read_stream(out["behind"])
            syncing.ack(offset + out["behind"])
        time.sleep(0.3)          # a few event-loop passes: the trim is incremental
        settled = info(r)
        out["settled_total"] = settled["mem_total_replication_buffers"]
        out["settled_histlen"] = settled["repl_backlog_histlen"]
        out["settled_clients_slaves"] = settled["mem_clients_slaves"]
        back.close()
        if syncing is not None:
            syncing.close()
        return out
    finally:
        srv.stop()


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "unpinned"])
def test_backlog_grows_while_a_replica_needs_it_and_settles_back(pinned: bool) -> None:
    res = {kind: run(kind, pinned) for kind in ("redis", "pyrepl")}
    ours, theirs = res["pyrepl"], res["redis"]
    print(res)
    assert ours["psync"] == theirs["psync"] == ("+CONTINUE" if pinned else "+FULLRESYNC")
    assert ours["behind"] > 3 * MB
    if pinned:
        # the backlog holds the whole burst (3x its size), the memory over 1 MB is the
        # replicas', and the pinning replica's share is the whole buffer
        for o in (ours, theirs):
            assert o["histlen"] > o["behind"] and o["mem_total"] > 3 * MB
            assert o["mem_clients_slaves"] == o["mem_total"] - MB
            assert max(o["omem"]) == o["mem_total"]   # it references the first block
        assert abs(ours["histlen"] - theirs["histlen"]) < 200        # (PING bytes)
        assert abs(ours["mem_total"] - theirs["mem_total"]) <= BLOCK
    else:
        for o in (ours, theirs):
            assert MB < o["histlen"] <= MB + 2 * BLOCK and o["mem_clients_slaves"] == 0
    # after the catch-up the replication memory is the backlog's size again
    for o in (ours, theirs):
        assert MB < o["settled_total"] <= MB + 3 * BLOCK, o
        assert o["settled_clients_slaves"] <= 3 * BLOCK
    assert abs(ours["settled_total"] - theirs["settled_total"]) <= BLOCK


@pytest.mark.parametrize("kind", ["redis", "pyrepl"])
def test_a_replica_command_with_a_reply_drops_the_replica(kind: str) -> None:
    """Redis 7.0 never writes a reply on a replication link (it would interleave with the
    stream): a replica that sends PING once streamed to is logged and disconnected."""
    srv = start(kind)
    try:
        r = redis.Redis(port=srv.port, decode_responses=True)
        rep = FakeReplica(srv.port)
        head = rep.handshake().split()
        rep.read_rdb()
        rep.ack(int(head[2]))
        r.set("k", "v")
        rep.read_stream(len(encode_command("SELECT", "0") + encode_command("SET", "k", "v")))
        rep.acked = None
        rep.sock.sendall(encode_command("PING"))
        deadline = time.monotonic() + 10
        data = b""
        while True:      # nothing but the end of the connection (a cron PING at most)
            assert time.monotonic() < deadline, "the master kept the replica"
            try:
                chunk = rep.sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                break
            data += chunk
        assert data.replace(encode_command("ping"), b"") == b""
        assert "Replica generated a reply to command 'ping', disconnecting it: id=" in srv.log()
        assert r.info("replication")["connected_slaves"] == 0
        rep.close()
    finally:
        srv.stop()
