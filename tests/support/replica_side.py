"""The replica side in memory. ``ReplicaNode`` is a real replica-side ServerCore + Replication
at the fake clock whose replica side talks to a recorded I/O port. ``Node`` is one on
``RecordingIO`` (what the side connects to, writes and closes), fed what a Redis 7.0.15 master
sends: the handshake replies, ``+FULLRESYNC`` and an RDB that pyrepl's real encoder wrote from
a real dataset (``SRC``, ``RDB``; ``full_sync_bytes``). ``synced_node`` is one that went
through that full sync and is streaming."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyrepl.config import Config
from pyrepl.core.host import Host
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.replication.manager import Replication
from pyrepl.replication.replica import ReplState
from tests.support.cores import NOW, cmd


class ReplicaNode:
    """A real replica-side ServerCore + Replication at the fake clock (port 6381, a replica of
    127.0.0.1:6380 unless ``replicaof`` is False; then ``overrides``) whose replica side talks
    to the recorded I/O port ``io``, with a user client."""

    def __init__(self, io: Any, overrides: Sequence[tuple[str, list[str]]],
                 replicaof: bool = True) -> None:
        # (no capa pyrepl-resume unless a test asks: the handshake is Redis's / Valkey's bytes)
        ov = [("save", [""]), ("port", ["6381"]), ("repl-full-sync-resume-window", ["0"])]
        if replicaof:
            ov.append(("replicaof", ["127.0.0.1", "6380"]))
        self.host = Host()
        self.host.replica_io = self.io = io
        self.core = ServerCore(Config.load(None, [*ov, *overrides]), self.host, now_ms=NOW)
        self.repl = Replication(self.core)
        self.side = self.repl.replica
        self.client = self.core.connection_made("127.0.0.1:5000", "127.0.0.1:6381")

    def run(self, *args: bytes | str | int) -> bytes:
        self.client.receive_data(cmd(*args))
        return self.client.data_to_send()


MASTER_ID = "a05af3755f57545a48bd356f49c00cb6f3d914fa"
MARK = b"3349e433c1144143783d87ecbc6ba7dfda6a0f50"


class RecordingIO:
    """The replica side's I/O port, recorded: what it connects to, writes and closes."""

    def __init__(self) -> None:
        self.connects: list[tuple[int, str, int]] = []
        self.sent: list[tuple[int, bytes]] = []
        self.closed: list[int] = []

    @property
    def token(self) -> int:
        return self.connects[-1][0]

    def connect(self, token: int, host: str, port: int) -> None:
        self.connects.append((token, host, port))

    def send(self, token: int, data: bytes) -> None:
        self.sent.append((token, data))

    def close(self, token: int) -> None:
        self.closed.append(token)

    def link_info(self, token: int) -> None:
        return None

    def take(self) -> bytes:
        out = b"".join(d for _, d in self.sent)
        self.sent.clear()
        return out


class Node(ReplicaNode):
    io: RecordingIO

    def __init__(self, *overrides: tuple[str, list[str]], replicaof: bool = True) -> None:
        # Redis 7.0.15's handshake (the Redis 8 rdb channel has its own tests)
        super().__init__(RecordingIO(), [("repl-rdb-channel", ["no"]), *overrides], replicaof)

    def feed(self, data: bytes) -> None:
        self.side.on_data(self.io.token, data)

    def feed_split(self, data: bytes, cuts: list[int]) -> None:
        prev = 0
        for cut in sorted(set(cuts)) + [len(data)]:
            if cut > prev:
                self.feed(data[prev:cut])
                prev = cut

    def tick(self, advance_ms: int) -> None:
        self.core.now_ms += advance_ms
        self.core.tick(self.core.now_ms)

    def digest(self) -> str:
        return dataset_digest(self.core.dbs, self.core.now_ms)

    def events(self) -> list[str]:
        return [e["event"] for e in self.repl.events.recent]

    def info(self) -> dict[str, object]:
        return dict(self.repl.info_fields())

    def connect(self) -> None:
        """start() and the TCP connection comes up."""
        self.side.start()
        self.side.on_connected(self.io.token)


def source_dataset() -> ServerCore:
    """A real dataset with every type, TTLs and two databases (the 'master's data')."""
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    c = core.connection_made()
    for args in (
        ("SET", "s:1", "hello"), ("SET", "s:int", "12345"), ("SET", "s:big", "x" * 5000),
        ("RPUSH", "l", "a", "b", "c", "1"), ("SADD", "set", "m1", "m2", "77"),
        ("HSET", "h", "f1", "v1", "f2", "2"), ("ZADD", "z", "1.5", "a", "-2", "b"),
        ("SET", "ttl", "v", "PX", "100000"), ("SELECT", "3"), ("SET", "db3", "three"),
        ("RPUSH", "db3:l", *[f"e{i}" for i in range(300)]),
    ):
        c.receive_data(cmd(*args))
    return core


SRC = source_dataset()
RDB = encode_rdb_bytes(SRC.dbs, aux={"repl-stream-db": 0, "repl-id": MASTER_ID,
                                     "repl-offset": 0}, now_ms=NOW)


REPLIES = b"+PONG\r\n+OK\r\n+OK\r\n"


def full_sync_bytes(diskless: bool, offset: int = 0, rdb: bytes = RDB) -> bytes:
    head = REPLIES + b"\n" + b"+FULLRESYNC %s %d\r\n" % (MASTER_ID.encode(), offset) + b"\n\n"
    if diskless:
        return head + b"$EOF:" + MARK + b"\r\n" + rdb + MARK
    return head + b"$%d\r\n" % len(rdb) + rdb


def synced_node(diskless: bool = False, *overrides: tuple[str, list[str]]) -> Node:
    n = Node(*overrides)
    n.connect()
    n.feed(full_sync_bytes(diskless))
    assert n.side.state is ReplState.CONNECTED
    n.io.take()
    return n


class _DrainedIO:
    """The master side's I/O port for a sub-replica whose socket takes everything."""

    def buffered(self, c: object) -> int:
        return 0

    def stream_started(self, c: object) -> None:
        pass


def with_sub_replica(n: Node) -> object:
    """An online sub-replica streaming from ``n`` (its link as the master side makes it)."""
    from pyrepl.replication.master import LinkInput

    n.host.master_io = _DrainedIO()   # type: ignore[attr-defined]
    r = n.core.connection_made("127.0.0.1:50000", "127.0.0.1:6381")
    m = n.repl.master
    link = m.link_for(r)
    link.listening_port = 7000
    m.add_replica(link)
    link.go(LinkInput.PARTIAL)
    m.feeding.start_stream(link)
    return r
