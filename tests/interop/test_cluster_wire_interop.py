"""The cluster bus codec against a real redis-server 7.0.15 in cluster mode: this test plays a
node with nothing but pyrepl.cluster.wire and sockets. Redis MEETs it, and the MEET decodes to
what Redis says of itself (and re-encodes to the very bytes Redis sent); the node answers with
an encoded PONG, then PINGs Redis over a link of its own, and Redis takes it in: CLUSTER NODES
shows its name, address, hostname extension, flags, config epoch and claimed slots, and the
node it gossiped about. Malformed messages leave Redis up and make it log exactly the warning
that decoding the same bytes raises as BusError.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import time
from collections import deque
from collections.abc import Iterator

import pytest

from pyrepl.cluster.wire import (
    FAIL,
    FLAG0_EXT_DATA,
    MEET,
    NULL_NAME,
    PING,
    PONG,
    PUBLISH,
    BusError,
    Ext,
    FrameReader,
    Gossip,
    Message,
    bitmap_of,
    decode,
    encode,
)
from tests.support.procs import ServerProcess, free_port, redis_server_path, start_redis
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

MASTER, MYSELF = 1, 16          # CLUSTER_NODE_MASTER, CLUSTER_NODE_MYSELF
REDIS_HOSTNAME = "redis-a.example"
OUR_HOSTNAME = "pyrepl-fake.example"
REDIS_SLOTS = [0, 1, 2, 5000, 16383]
OUR_SLOTS = [100, 101, 102]


@pytest.fixture
def cluster_redis() -> Iterator[tuple[ServerProcess, int]]:
    """A cluster-enabled redis-server and its bus port."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    tmp = tempfile.mkdtemp(prefix="redis-cluster-wire-")
    bus = free_port()
    with start_redis("--cluster-enabled", "yes",
                     "--cluster-config-file", os.path.join(tmp, "nodes.conf"),
                     "--cluster-port", str(bus), "--cluster-node-timeout", "60000",
                     "--cluster-announce-hostname", REDIS_HOSTNAME, tmpdir=tmp) as srv:
        yield srv, bus


class BusConn:
    """One bus connection of the fake node: a socket and the FrameReader cutting its stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.settimeout(0.05)
        self.reader = FrameReader()
        self.frames: deque[bytes] = deque()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_some(self) -> bool:
        """One recv of at most 50ms; frames that completed go to ``frames``."""
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        if not data:
            raise ConnectionError("Redis closed the bus connection")
        self.reader.receive_data(data)
        while (f := self.reader.next_frame()) is not None:
            self.frames.append(f)
        return True

    def next_frame(self, timeout: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout
        while not self.frames:
            assert time.monotonic() < deadline, "timed out waiting for a bus message"
            self.read_some()
        return self.frames.popleft()


class FakeNode:
    """A cluster node made of wire.encode / wire.decode: a master with a few slots."""

    def __init__(self) -> None:
        self.name = secrets.token_hex(20).encode()
        self.port = free_port()               # its client port: nothing listens there
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.cport = self.listener.getsockname()[1]
        self.ghost = secrets.token_hex(20).encode()   # a node it gossips about
        self.ghost_port, self.ghost_cport = free_port(), free_port()
        self.received: list[Message] = []

    def hello(self, mtype: int) -> Message:
        return Message(mtype, self.name, current_epoch=9, config_epoch=3,
                       myslots=bitmap_of(OUR_SLOTS), port=self.port, cport=self.cport,
                       flags=MASTER, exts=[Ext.hostname(OUR_HOSTNAME)],
                       gossip=[Gossip(self.ghost, 0, 0, "127.0.0.1", self.ghost_port,
                                      self.ghost_cport, MASTER, 0)])

    def take(self, raw: bytes) -> Message:
        """Decode a message of Redis's and check it re-encodes to the same bytes."""
        msg = decode(raw)
        assert msg is not None
        assert encode(msg) == raw
        self.received.append(msg)
        return msg

    def pump(self, conn: BusConn) -> None:
        """Read what Redis sent on its link to us; answer its PINGs as a node does."""
        conn.read_some()
        while conn.frames:
            msg = self.take(conn.frames.popleft())
            if msg.type == PING:
                conn.send(encode(self.hello(PONG)))


def bulk(reply: bytes) -> str:
    assert reply.startswith(b"$"), reply
    return reply.split(b"\r\n", 1)[1][:-2].decode()


def node_line(c: RawClient, name: bytes) -> list[str] | None:
    for line in bulk(c.call("CLUSTER", "NODES")).splitlines():
        fields = line.split()
        if fields and fields[0] == name.decode():
            return fields
    return None


def warnings_logged(srv: ServerProcess) -> list[str]:
    """The text of every warning line in Redis's log ("pid:role date time # text")."""
    return [line.split(" # ", 1)[1] for line in srv.log().splitlines() if " # " in line]


def forged_ping(sender: bytes, extra: bytes, **fields: int) -> bytes:
    """A PING with header fields overwritten (offsets of cluster.h); totlen stays right."""
    b = bytearray(encode(Message(PING, sender)) + extra)
    b[4:8] = len(b).to_bytes(4, "big")
    for off, (value, size) in {14: (fields.get("count", 0), 2),
                               2214: (fields.get("extensions", 0), 2)}.items():
        b[off:off + size] = value.to_bytes(size, "big")
    b[2253] = fields.get("mflags0", 0)
    return bytes(b)


def test_redis_meets_a_node_made_of_the_codec(cluster_redis: tuple[ServerProcess, int]) -> None:
    srv, bus = cluster_redis
    node = FakeNode()
    conns: list[BusConn] = []
    try:
        with RawClient(srv.port) as c:
            assert c.call("CLUSTER", "ADDSLOTS", *REDIS_SLOTS) == b"+OK\r\n"
            assert c.call("CLUSTER", "SET-CONFIG-EPOCH", 7) == b"+OK\r\n"
            redis_id = bulk(c.call("CLUSTER", "MYID"))
            state = "ok" if b"cluster_state:ok" in c.call("CLUSTER", "INFO") else "fail"
            assert c.call("CLUSTER", "MEET", "127.0.0.1", node.port, node.cport) == b"+OK\r\n"

            # Redis connects to our bus port and sends MEET.
            node.listener.settimeout(10)
            a = BusConn(node.listener.accept()[0])
            conns.append(a)
            meet = node.take(a.next_frame())
            assert meet.type == MEET and meet.ver == 1
            assert meet.sender.decode() == redis_id
            assert (meet.port, meet.cport, meet.pport) == (srv.port, bus, 0)
            assert meet.myslots == bitmap_of(REDIS_SLOTS)
            assert (meet.config_epoch, meet.current_epoch, meet.offset) == (7, 7, 0)
            assert meet.flags == MASTER | MYSELF and meet.slaveof == NULL_NAME
            assert meet.myip == "" and meet.state == (0 if state == "ok" else 1)
            assert meet.gossip == []     # it knows no one else yet
            assert meet.exts == [Ext.hostname(REDIS_HOSTNAME)]
            assert meet.mflags == bytes((FLAG0_EXT_DATA, 0, 0))

            # We answer with a PONG: the handshake completes under our name.
            a.send(encode(node.hello(PONG)))

            def known() -> list[str] | None:
                node.pump(a)
                return node_line(c, node.name)

            line = wait_for(known, 10, what="Redis to learn our name")
            assert isinstance(line, list) and "handshake" not in line[2]

            # Our own link to Redis: a PING, answered by a PONG.
            b = BusConn(socket.create_connection(("127.0.0.1", bus), timeout=10))
            conns.append(b)
            b.send(encode(node.hello(PING)))
            pong = node.take(b.next_frame())
            assert pong.type == PONG and pong.sender.decode() == redis_id
            assert pong.current_epoch == 9     # taken from our PING before answering
            assert all(len(g.name) == 40 for g in pong.gossip)

            want = [node.name.decode(), f"127.0.0.1:{node.port}@{node.cport},{OUR_HOSTNAME}",
                    "master", "-"]

            def settled() -> bool:
                node.pump(a)
                f = node_line(c, node.name)
                return f is not None and f[:4] == want and f[6:] == ["3", "connected",
                                                                     "100-102"]

            wait_for(settled, 10, what=f"Redis to list {want} with epoch 3 and our slots")
            assert f"127.0.0.1:{node.port}@{node.cport}" == want[1].split(",")[0]
            assert b"cluster_current_epoch:9" in c.call("CLUSTER", "INFO")
            ghost = wait_for(lambda: node_line(c, node.ghost), 10, what="the gossiped node")
            assert isinstance(ghost, list)
            assert ghost[1] == f"127.0.0.1:{node.ghost_port}@{node.ghost_cport}"
            assert ghost[2].split(",")[0] == "master"

            # Malformed messages: Redis logs a warning, keeps the link, stays up.
            h16 = (16).to_bytes(4, "big") + bytes(4)
            bad = [
                forged_ping(node.name, bytes(44), count=3),
                forged_ping(node.name, bytes(4), extensions=1, mflags0=FLAG0_EXT_DATA),
                forged_ping(node.name, (12).to_bytes(4, "big") + bytes(12), extensions=1,
                            mflags0=FLAG0_EXT_DATA),
                forged_ping(node.name, (24).to_bytes(4, "big") + bytes(12), extensions=1,
                            mflags0=FLAG0_EXT_DATA),
                forged_ping(node.name, h16 + bytes(8), extensions=1),
            ]
            fail = bytearray(encode(Message(FAIL, node.name))[:2280])   # a short FAIL
            fail[4:8] = (2280).to_bytes(4, "big")
            publish = bytearray(encode(Message(PUBLISH, node.name, channel=b"ch", message=b"m")))
            publish[2260:2264] = (9).to_bytes(4, "big")                # message_len lies
            bad += [bytes(fail), bytes(publish)]
            for frame in bad:
                with pytest.raises(BusError) as e:
                    decode(frame)
                text = str(e.value)
                b.send(frame)
                wait_for(lambda t=text: t in warnings_logged(srv), 10,
                         what=f"Redis to log {text!r}")
            assert srv.alive()
            assert "Received invalid ping packet with gossip count 3 that exceeds total " \
                "packet length (2300)" in warnings_logged(srv)

            # The link still frames correctly: a good PING gets its PONG.
            b.send(encode(node.hello(PING)))
            assert node.take(b.next_frame()).type == PONG
            assert c.call("PING") == b"+PONG\r\n"

            # A bad signature is a framing error: Redis logs it and drops that link.
            x = BusConn(socket.create_connection(("127.0.0.1", bus), timeout=10))
            conns.append(x)
            x.send(b"RCmc" + encode(node.hello(PING))[4:])
            with pytest.raises(ConnectionError):
                _until_closed(x)
            r = FrameReader()
            r.receive_data(b"RCmc" + encode(node.hello(PING))[4:8])
            with pytest.raises(BusError) as e:
                r.next_frame()
            assert str(e.value) in warnings_logged(srv)
            assert srv.alive() and c.call("PING") == b"+PONG\r\n"
    finally:
        for conn in conns:
            conn.close()
        node.listener.close()


def _until_closed(conn: BusConn, timeout: float = 10.0) -> None:
    """Read until Redis closes the connection (ConnectionError), for at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conn.read_some()
    raise AssertionError("Redis kept the connection open")
