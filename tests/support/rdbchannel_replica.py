"""The replica side of the two-channel full syncs (Redis 8's rdb channel, Valkey's dual
channel) under test: ``ChanIO``, the replica's I/O port recorded (both connections, reads
paused, drain steps); ``Node``, a real replica core on it; ``Pipe``, the master's side of the
main socket (bytes wait there while the replica does not read: TCP backpressure); and a source
dataset with its snapshot and the digest a stream applied to it gives."""

from __future__ import annotations

from collections import defaultdict

from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.encoder import encode_rdb_bytes
from pyrepl.replication.replica import ReplState
from pyrepl.replication.replica.rdbchannel import RdbChState
from tests.support.cores import NOW, cmd
from tests.support.replica_side import ReplicaNode

MASTER_ID = "e0b8062d0b155a1e43fa2d39d13c0623805c27e1"  # the transcript master's replid
MARK = b"79b150900a78ca68cdb80090425f0092523acc81"


class ChanIO:
    """The replica side's I/O port, recorded: both connections, reads paused, drain steps."""

    def __init__(self) -> None:
        self.connects: list[tuple[int, str, int]] = []
        self.rdb_connects: list[tuple[int, str, int]] = []
        self.sent: dict[int, list[bytes]] = defaultdict(list)
        self.closed: list[int] = []
        self.paused: set[int] = set()
        self.log: list[tuple[str, int]] = []  # ("pause" | "resume" | "drain", token)
        self.drains: list[int] = []

    @property
    def token(self) -> int:
        return self.connects[-1][0]

    @property
    def rdb_token(self) -> int:
        return self.rdb_connects[-1][0]

    def connect(self, token: int, host: str, port: int) -> None:
        self.connects.append((token, host, port))

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        self.rdb_connects.append((token, host, port))

    def send(self, token: int, data: bytes) -> None:
        self.sent[token].append(data)

    def close(self, token: int) -> None:
        self.closed.append(token)

    def pause_reading(self, token: int) -> None:
        self.paused.add(token)
        self.log.append(("pause", token))

    def resume_reading(self, token: int) -> None:
        self.paused.discard(token)
        self.log.append(("resume", token))

    def request_drain(self, token: int) -> None:
        self.drains.append(token)
        self.log.append(("drain", token))

    def link_info(self, token: int) -> None:
        return None

    def take(self, token: int) -> bytes:
        out = b"".join(self.sent[token])
        self.sent[token].clear()
        return out


class Node(ReplicaNode):
    io: ChanIO

    def __init__(self, *overrides: tuple[str, list[str]], replicaof: bool = True) -> None:
        super().__init__(ChanIO(), overrides, replicaof)

    def main(self, data: bytes) -> None:
        self.side.on_data(self.io.token, data)

    def rdb(self, data: bytes) -> None:
        self.side.on_rdb_data(self.io.rdb_token, data)

    def drain(self, limit: int = 10_000) -> int:
        """Run the drain steps the side asked for; returns how many ran."""
        steps = 0
        while self.io.drains and steps < limit:
            self.side.drain_step(self.io.drains.pop(0))
            steps += 1
        return steps

    def tick(self, ms: int = 1000) -> None:
        self.core.now_ms += ms
        self.core.tick(self.core.now_ms)

    def digest(self) -> str:
        return dataset_digest(self.core.dbs, self.core.now_ms)

    def info(self) -> dict[str, object]:
        return dict(self.repl.info_fields())

    def events(self) -> list[dict]:
        return [e for e in self.repl.events.recent if e["role"] == "replica"]

    def logs(self) -> list[str]:
        return [m for _, m in self.core.log.lines]


def source_core() -> ServerCore:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    c = core.connection_made()
    for args in (("SET", "s:1", "hello"), ("RPUSH", "l", "a", "b", "1"),
                 ("HSET", "h", "f1", "v1"), ("ZADD", "z", "1.5", "a"), ("SADD", "set", "m"),
                 ("SET", "ttl", "v", "PX", "100000"), ("SELECT", "2"), ("SET", "db2", "x")):
        c.receive_data(cmd(*args))
    return core


def snapshot(offset: int, replid: str = MASTER_ID) -> bytes:
    return encode_rdb_bytes(source_core().dbs, aux={"repl-stream-db": 0, "repl-id": replid,
                                                    "repl-offset": offset}, now_ms=NOW)


def expected_digest(stream: bytes) -> str:
    core = source_core()
    core.connection_made().receive_data(stream)
    return dataset_digest(core.dbs, NOW)


def big_stream(n: int, value_size: int = 1000, tag: str = "k") -> bytes:
    parts = [cmd("SELECT", "0")]
    for i in range(n):
        parts.append(cmd("SET", f"{tag}:{i % 997}", f"{i:08d}" * (value_size // 8)))
        if i % 10 == 0:
            parts.append(cmd("INCR", f"{tag}:ctr"))
    return b"".join(parts)


class Pipe:
    """The master's side of the main socket: bytes wait here while the replica does not read
    (the kernel buffers and the master's output buffer, i.e. TCP backpressure)."""

    def __init__(self, n: Node, chunk: int = 65536) -> None:
        self.n = n
        self.pending = bytearray()
        self.chunk = chunk
        self.delivered = 0
        self.reads = 0

    def write(self, data: bytes) -> None:
        self.pending += data

    def pump(self, max_reads: int = 1_000_000) -> int:
        """Deliver reads while the replica reads the main socket; returns how many."""
        n = self.n
        reads = 0
        while self.pending and n.io.token not in n.io.paused and reads < max_reads:
            data = bytes(self.pending[:self.chunk])
            del self.pending[:self.chunk]
            self.delivered += len(data)
            n.main(data)
            reads += 1
        self.reads += reads
        return reads


def to_rdbchannel(n: Node, auth: bool = False, cid: bytes = b"10") -> None:
    """Handshake on the main channel up to +RDBCHANNELSYNC, the rdb channel connected and its
    handshake answered: the rdb channel waits for +FULLRESYNC."""
    if n.side.state is ReplState.CONNECT:
        n.side.start()
    n.side.on_connected(n.io.token)
    n.main(b"+PONG\r\n" + (b"+OK\r\n" if auth else b"") + b"+OK\r\n+OK\r\n")
    n.main(b"+RDBCHANNELSYNC " + cid + b"\r\n")
    assert n.side.state is ReplState.TRANSFER and n.side.channel.rdbch is not None
    n.side.on_rdb_connected(n.io.rdb_token)
    n.rdb((b"+OK\r\n" if auth else b"") + b"+OK\r\n")
    assert n.side.channel.rdbch.state is RdbChState.RECEIVE_FULLRESYNC
    n.io.take(n.io.token)
    n.io.take(n.io.rdb_token)
