"""Real cores wired in memory (sans-io link tests).

Each MemNode is a real ServerCore + Replication. The only stand-ins are the OS-boundary
adapters the I/O shell normally provides: MemReplicaIO (ReplicaIO: outgoing connections),
MemMasterIO (MasterIO: the snapshot child writing to sockets, a disk file streamed to a
replica) and MemHost (fork, kill, close). A MemConn is one TCP connection: two byte queues
that the test moves in chunks of any size, so both directions can be split anywhere. Forked
children run their job at fork time (the child sees the dataset as it was then) and report
their exit only when the test lets them progress (MemNet.background) or the cron reaps them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyrepl.core.host import Host
from tests.support.resp import encode_command

TRANSPORT_HIGH_WATER = 64 * 1024   # uvloop pauses a transport's writer above this


def shell_write(c: object, write: Callable[[bytes], object],
                buffered: Callable[[], int] = lambda: 0) -> None:
    """What the I/O shell's ``write_client`` does, for the in-memory fakes: the client's
    replies, then for a streaming replica its replication stream from the shared buffer while
    its transport holds less than the high-water mark (else the bytes wait in the buffer)."""
    if c.closed:  # type: ignore[attr-defined]
        return
    if c.out:  # type: ignore[attr-defined]
        write(c.data_to_send())  # type: ignore[attr-defined]
    link = c.stream  # type: ignore[attr-defined]
    if link is not None:
        take = c.core.replication.master.feeding.take  # type: ignore[attr-defined]
        while buffered() < TRANSPORT_HIGH_WATER:
            views = take(link)
            if not views:
                break
            write(b"".join(views))


@dataclass(eq=False)
class MemConn:
    """One in-memory TCP connection: a replica node's ReplicaIO (``token``) <-> ``client``, a
    client of the master node's core. Also the ``transport`` both ends' clients carry.
    ``rdb``: the replica's second connection (Redis 8 rdb channel), whose callbacks are the
    side's ``on_rdb_*``."""

    net: MemNet
    replica: MemNode
    token: int
    master: MemNode
    client: object
    rdb: bool = False
    to_replica: bytearray = field(default_factory=bytearray)  # from the master side, unread
    to_master: bytearray = field(default_factory=bytearray)  # from the replica side, unread
    open: bool = True
    fin: bool = False  # the master side closes once its output has been read
    paused: bool = False  # the replica paused reading (to_replica waits)

    def abort(self) -> None:
        self.net.abort(self)

    def is_closing(self) -> bool:
        return not self.open

    def get_write_buffer_size(self) -> int:
        return 0


class MemChild:
    """A forked child: ``disk`` (the BGSAVE job already ran) or ``socket`` (wrote its
    targets' preambles at fork time, as the real child does at once; writes the RDB and the
    mark when it progresses)."""

    def __init__(self, pid: int, kind: str, code: int = 0, targets: list | None = None,
                 rdb: bytes = b"", trailer: bytes = b"") -> None:
        self.pid = pid
        self.kind = kind
        self.code = code
        self.exited = kind == "disk"
        self.targets = targets or []
        self.rdb = rdb
        self.trailer = trailer
        self.dropped: set[int] = set()
        self.results: dict[int, tuple[bool, int, str]] = {}


def close_in_memory(client: object, conn_type: type) -> None:
    """Host.close_client for in-memory networks: abort the client's connection (a
    ``conn_type`` transport), or close a client without one after its reply."""
    t = getattr(client, "transport", None)
    if isinstance(t, conn_type):
        t.abort()
    else:
        client.close_after_reply = True  # type: ignore[attr-defined]


class MemHost(Host):
    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node

    def fork_child(self, job: Callable[[], int], purpose: str) -> int:
        pid = self.net.new_pid()
        self.node.children[pid] = MemChild(pid, "disk", code=job())
        return pid

    def kill_child(self, pid: int) -> None:
        self.node.children.pop(pid, None)

    def close_client(self, client: object) -> None:
        close_in_memory(client, MemConn)


class MemMasterIO:
    """pyrepl.net.master_io.MasterIO's interface, in memory."""

    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node
        self.sync_bandwidth = 0  # the last set_sync_bandwidth

    def buffered(self, c: object) -> int:
        return 0

    def stream_started(self, c: object) -> None:
        """(a MemConn writes all it is given at once: nothing to hold back)"""

    def prepare_handover(self, c: object) -> bool:
        t = getattr(c, "transport", None)
        if not isinstance(t, MemConn) or not t.open or c.closed:  # type: ignore[attr-defined]
            return False
        if c.out:  # type: ignore[attr-defined]
            t.to_replica += c.data_to_send()  # type: ignore[attr-defined]
        return True

    def set_sync_bandwidth(self, bps: int) -> None:
        self.sync_bandwidth = bps

    def start_socket_snapshot(self, targets: list, payload: Callable[[], object],
                              trailer: bytes, timeout_ms: int,
                              keep: tuple[str, str] | None = None) -> int:
        pid = self.net.new_pid()
        rdb = b"".join(payload())  # type: ignore[call-overload]
        ch = MemChild(pid, "socket", targets=list(targets), rdb=rdb, trailer=trailer)
        for c, pre in ch.targets:  # the preambles go out at once
            t = c.transport
            if isinstance(t, MemConn) and t.open:
                t.to_replica += pre
            else:
                ch.dropped.add(c.id)
        self.node.children[pid] = ch
        return pid

    def socket_target_done(self, pid: int, cid: int) -> bool:
        ch = self.node.children.get(pid)
        res = ch.results.get(cid) if ch is not None else self.node.results.get(pid, {}).get(cid)
        return res is not None and res[0]

    def drop_socket_target(self, c: object) -> None:
        for ch in self.node.children.values():
            ch.dropped.add(c.id)  # type: ignore[attr-defined]

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        return self.node.results.pop(pid, {})

    def reap_child(self, pid: int) -> None:
        ch = self.node.children.get(pid)
        if ch is not None and ch.exited:
            self.node.reap(pid)

    def send_bulk(self, c: object, path: str) -> int:
        with open(path, "rb") as f:  # opened at once, as MasterIO does
            data = f.read()
        self.node.bulks[c.id] = (c, data)  # type: ignore[attr-defined]
        return len(data)

    def cancel_bulk(self, c: object) -> None:
        self.node.bulks.pop(c.id, None)  # type: ignore[attr-defined]

    # (no copies are kept in memory: a cut sync here starts over)
    def keep_file(self, rid: str, path: str) -> None:
        pass

    def kept_size(self, rid: str) -> int:
        return -1

    def kept_base(self, rid: str) -> int:
        return -1

    def kept_ids(self) -> list[str]:
        return []

    def drop_kept(self, rid: str) -> None:
        pass

    def send_kept(self, c: object, rid: str, offset: int, header: bytes) -> None:
        raise OSError(f"no whole copy kept as {rid}")


class MemReplicaIO:
    """pyrepl.net.replica_io.ReplicaIO's interface, in memory: the main connection and, during
    a Redis 8 rdb-channel full sync, the rdb channel (callbacks ``on_rdb_*``)."""

    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node
        self.token = 0
        self.rdb_token = 0
        self.conn: MemConn | None = None
        self.rdb_conn: MemConn | None = None
        self.connects = 0
        self._drain_gen = 0
        self._drain_pending = False

    def connect(self, token: int, host: str, port: int) -> None:
        self._drop()
        self._drop_rdb()
        self.token = token
        self.connects += 1
        self.net.post(lambda: self._connected(token, port, False))

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        self._drop_rdb()
        self.rdb_token = token
        self.net.post(lambda: self._connected(token, port, True))

    def _connected(self, token: int, port: int, rdb: bool) -> None:
        if token != (self.rdb_token if rdb else self.token):
            return  # abandoned while connecting
        side = self.node.repl.replica
        target = self.net.nodes.get(port)
        if target is None or not target.listening:
            failed = side.on_rdb_connect_failed if rdb else side.on_connect_failed
            failed(token, "Connection refused")
            return
        self.net.next_cport += 1
        c = target.core.connection_made(f"127.0.0.1:{self.net.next_cport}",
                                        f"127.0.0.1:{port}")
        conn = MemConn(self.net, self.node, token, target, c, rdb=rdb)
        c.transport = conn
        if rdb:
            self.rdb_conn = conn
        else:
            self.conn = conn
        self.net.conns.append(conn)
        (side.on_rdb_connected if rdb else side.on_connected)(token)

    def find(self, token: int) -> MemConn | None:
        for conn in (self.conn, self.rdb_conn):
            if conn is not None and conn.token == token:
                return conn
        return None

    def send(self, token: int, data: bytes) -> None:
        conn = self.find(token)
        if conn is not None and conn.open:
            conn.to_master += data

    def close(self, token: int) -> None:
        if token == self.token:
            self._drop()
        elif token == self.rdb_token:
            self._drop_rdb()

    def pause_reading(self, token: int) -> None:
        conn = self.find(token)
        if conn is not None:
            conn.paused = True

    def resume_reading(self, token: int) -> None:
        conn = self.find(token)
        if conn is not None:
            conn.paused = False

    def request_drain(self, token: int) -> None:
        """``side.drain_step(token)`` soon, once per request (the loop's call_soon)."""
        if self._drain_pending:
            return
        self._drain_pending = True
        gen = self._drain_gen

        def drain() -> None:
            if gen != self._drain_gen:
                return  # the connection was dropped meanwhile (the handle was cancelled)
            self._drain_pending = False
            self.node.repl.replica.drain_step(token)

        self.net.post(drain)

    def _close(self, conn: MemConn | None) -> None:
        if conn is not None and conn.open:
            conn.open = False
            conn.to_replica.clear()
            conn.to_master.clear()
            self.net.post(lambda: conn.master.core.client_closed(conn.client))

    def _drop(self) -> None:
        conn, self.conn = self.conn, None
        self._drain_gen += 1
        self._drain_pending = False
        self._close(conn)

    def _drop_rdb(self) -> None:
        conn, self.rdb_conn = self.rdb_conn, None
        self._close(conn)

    def link_info(self, token: int) -> tuple[str, str, int, object] | None:
        conn = self.find(token)
        if conn is None:
            return None
        return (f"127.0.0.1:{conn.master.port}", conn.client.addr,  # type: ignore[attr-defined]
                -1, conn)


class MemNode:
    """A real ServerCore + Replication on the in-memory network, with a user client."""

    def __init__(self, net: MemNet, port: int, tmpdir: str, *overrides: tuple[str, list[str]],
                 replicaof: int | None = None) -> None:
        import pyrepl.commands  # noqa: F401  (fills the command table)
        from pyrepl.config import Config
        from pyrepl.core.server import ServerCore
        from pyrepl.replication.manager import Replication

        ov: list[tuple[str, list[str]]] = [("save", [""]), ("port", [str(port)]),
                                           ("dir", [tmpdir]), *overrides]
        if replicaof is not None:
            ov.append(("replicaof", ["127.0.0.1", str(replicaof)]))
        self.net = net
        self.port = port
        self.listening = True
        self.children: dict[int, MemChild] = {}
        self.results: dict[int, dict[int, tuple[bool, int, str]]] = {}
        self.bulks: dict[int, tuple[object, bytes]] = {}
        self.host = MemHost(net, self)
        self.core = ServerCore(Config.load(None, ov), self.host, now_ms=net.now)
        self.host.master_io = MemMasterIO(net, self)
        self.host.replica_io = MemReplicaIO(net, self)
        self.repl = Replication(self.core)
        self.side = self.repl.replica
        self.events: list[dict] = []  # every sync event (events.recent is trimmed)
        self.repl.events.sink = self.events.append
        self.user = self.core.connection_made("127.0.0.1:4000", f"127.0.0.1:{port}")
        net.nodes[port] = self

    def run(self, *args: bytes | str | int) -> bytes:
        """One command from the user client; returns its reply bytes."""
        self.user.receive_data(encode_command(*args))
        out = self.user.data_to_send()
        self.net.flush()
        return out

    def child_step(self) -> bool:
        """The oldest child progresses: a socket child writes, an exited one is reaped."""
        if not self.children:
            return False
        pid = min(self.children)
        ch = self.children[pid]
        if ch.exited:
            self.reap(pid)
            return True
        ok_any = False
        for c, pre in ch.targets:
            t = c.transport
            if c.id in ch.dropped or not isinstance(t, MemConn) or not t.open:
                ch.results[c.id] = (False, 0, "Broken pipe")
                continue
            t.to_replica += ch.rdb + ch.trailer
            ch.results[c.id] = (True, len(pre) + len(ch.rdb) + len(ch.trailer), "")
            ok_any = True
        ch.code = 0 if ok_any else 1
        ch.exited = True
        return True

    def reap(self, pid: int) -> None:
        ch = self.children.pop(pid)
        if ch.kind == "socket":
            self.results[pid] = ch.results
        self.core.child_exited(pid, ch.code)
        self.net.flush()

    def reap_exited(self) -> None:
        for pid in sorted(self.children):
            ch = self.children.get(pid)
            if ch is not None and ch.exited:
                self.reap(pid)

    def bulk_step(self) -> bool:
        """The oldest disk transfer completes: pending replies, ``$<len>``, the file."""
        if not self.bulks:
            return False
        cid = min(self.bulks)
        c, data = self.bulks.pop(cid)
        t = c.transport  # type: ignore[attr-defined]
        master = self.repl.master
        if isinstance(t, MemConn) and t.open:
            if c.out:  # type: ignore[attr-defined]
                t.to_replica += c.data_to_send()  # type: ignore[attr-defined]
            head = b"$%d\r\n" % len(data)
            t.to_replica += head + data
            master.bulk_sent(c, True, len(head) + len(data))
        else:
            master.bulk_sent(c, False, 0, "connection closed")
        self.net.flush()
        return True


class MemNet:
    """The in-memory network and fake clock shared by MemNodes."""

    CHUNKS = (1, 2, 5, 16, 64, 300, 1500, 1 << 16, 1 << 30)

    def __init__(self, now_ms: int = 1_700_000_000_000, rng: object = None) -> None:
        import random
        from collections import deque

        self.now = now_ms
        self.rng = rng if rng is not None else random.Random(0)
        self.nodes: dict[int, MemNode] = {}
        self.conns: list[MemConn] = []
        self.events: deque[Callable[[], object]] = deque()
        self.next_pid = 5000
        self.next_cport = 40000

    def new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def post(self, fn: Callable[[], object]) -> None:
        self.events.append(fn)

    def abort(self, conn: MemConn, why: str = "Connection reset by peer") -> None:
        """Both ends learn the connection is gone; bytes in flight are lost."""
        if not conn.open:
            return
        conn.open = False
        conn.to_replica.clear()
        conn.to_master.clear()
        io = conn.replica.host.replica_io
        side, token = conn.replica.side, conn.token
        if io.conn is conn:
            io.conn = None
            self.post(lambda: side.on_closed(token, why))
        elif io.rdb_conn is conn:
            io.rdb_conn = None
            self.post(lambda: side.on_rdb_closed(token, why))
        self.post(lambda: conn.master.core.client_closed(conn.client))
        self.conns = [c for c in self.conns if c.open]

    def flush(self) -> None:
        """The I/O shell's writes: every master-side client's output goes on its connection."""
        for node in self.nodes.values():
            node.core.pending_flush.clear()
        for conn in list(self.conns):
            if not conn.open:
                continue
            c = conn.client
            shell_write(c, conn.to_replica.extend)
            if c.close_after_reply:  # type: ignore[attr-defined]
                conn.fin = True
            if conn.fin and not conn.to_replica:
                self.abort(conn, "Connection closed")

    def deliver(self, conn: MemConn, direction: str, n: int) -> int:
        """Move up to ``n`` bytes of one direction to the reader; returns how many."""
        if not conn.open or (direction == "m2r" and conn.paused):
            return 0
        buf = conn.to_replica if direction == "m2r" else conn.to_master
        chunk = bytes(buf[:n])
        del buf[:n]
        if chunk:
            if direction == "m2r" and conn.rdb:
                conn.replica.side.on_rdb_data(conn.token, chunk)
            elif direction == "m2r":
                conn.replica.side.on_data(conn.token, chunk)
            else:
                conn.client.receive_data(chunk)  # type: ignore[attr-defined]
        self.flush()
        return len(chunk)

    def busy(self) -> list[tuple[MemConn, str]]:
        out = []
        for conn in self.conns:
            if conn.open:
                if conn.to_replica and not conn.paused:
                    out.append((conn, "m2r"))
                if conn.to_master:
                    out.append((conn, "r2m"))
        return out

    def step(self) -> bool:
        """One thing happens: a queued event, else a random chunk moves. False when quiet."""
        if self.events:
            self.events.popleft()()
            self.flush()
            return True
        busy = self.busy()
        if not busy:
            return False
        conn, direction = self.rng.choice(busy)
        self.deliver(conn, direction, self.rng.choice(self.CHUNKS))
        return True

    def pump(self, limit: int = 200_000) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError("the in-memory network did not settle")

    def background(self) -> bool:
        """One child or disk transfer progresses; False when none is pending."""
        for node in self.nodes.values():
            if node.child_step() or node.bulk_step():
                return True
        return False

    def tick(self, ms: int = 1000) -> None:
        """The clock advances; every node's cron runs (reaping exited children first)."""
        self.now += ms
        for node in list(self.nodes.values()):
            node.core.now_ms = self.now
        for node in list(self.nodes.values()):
            node.reap_exited()
            node.core.tick(self.now)
            self.flush()
