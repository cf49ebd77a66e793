"""The master side's OS boundary in memory, and a harness around a real master core (tests of
pyrepl.replication.master with and without the rdb channel).

The only test doubles are the ports the I/O shell implements: ``ForkHost`` (``core.host``: runs
a forked job in-process at fork time, so a disk BGSAVE really writes its file; closing a client
reaches the core at once, as connection_lost does after the shell aborts a transport) and
``WireIO`` (``host.master_io``, :class:`pyrepl.net.master_io.MasterIO`'s interface): it records
what would reach each socket, in order. The shell's writes go through ``memnet.shell_write``
(replies, then the replication stream while the transport is under its high-water mark); a
``stuck`` peer reads nothing, so what is written piles up in its simulated transport buffer.
The socket snapshot child writes each target's preamble at fork time, as the real one does at
once; ``run_child`` writes the RDB and the mark (to all targets, or to ``only``) and records
each target's outcome. A disk transfer (``send_bulk``) completes when the test says so
(``complete_bulk``).

``Master`` is a real ServerCore + Replication with a user client, a fake clock and helpers to
run commands, connect replicas and read what they received; ``ReplicaCore`` is an independent
core that loads a received RDB and applies a received stream, so datasets can be compared with
DEBUG DIGEST. ``parse_full_sync`` splits what a replica received (``Received``);
``online_replica`` takes a replica through a diskless full sync up to streaming.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.config import Config
from pyrepl.core.client import Client
from pyrepl.core.host import Host
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.rdb.decoder import load_rdb_file
from pyrepl.replication.manager import Replication
from pyrepl.replication.master import ReplicaLink
from pyrepl.replication.master.states import S
from tests.support.cores import NOW, cmd
from tests.support.memnet import shell_write


class ForkHost(Host):
    """Runs forked jobs in-process at fork time; the test reports the exit with
    ``Master.child_exits`` as the shell's reaper would."""

    def __init__(self) -> None:
        self.next_pid = 4000
        self.exit_codes: dict[int, int] = {}
        self.killed: list[int] = []
        self.closed: list[Client] = []
        self.fail_fork = False
        self.core: ServerCore | None = None

    def fork_child(self, job: Any, purpose: str) -> int:
        if self.fail_fork:
            raise OSError("Cannot allocate memory")
        self.next_pid += 1
        self.exit_codes[self.next_pid] = job()
        return self.next_pid

    def kill_child(self, pid: int) -> None:
        self.killed.append(pid)

    def close_client(self, client: Client) -> None:
        self.closed.append(client)
        assert self.core is not None
        self.core.client_closed(client)


class WireIO:
    """What MasterIO puts on each socket, in order (see the module docstring)."""

    def __init__(self) -> None:
        self.wire: dict[int, bytearray] = {}
        self.tbuf: dict[int, int] = {}  # simulated transport buffer sizes
        self.streams_started: list[int] = []  # clients whose stream started (stream_started)
        self.sync_bandwidth = 0  # the last set_sync_bandwidth
        # copies kept for resumed syncs: id -> (the child writing it or 0, its bytes or None);
        # a child's copy holds the payload from byte ``copy_base`` on (the real child's tail
        # ring: a test sets where a cut found the child)
        self.kept: dict[str, tuple[int, bytes | None]] = {}
        self.kept_bases: dict[str, int] = {}
        self.copy_base = 0
        self.stuck: set[int] = set()  # peers that read nothing: writes pile up in the transport
        self.busy: set[int] = set()  # transports that are not drained
        self.children: dict[int, tuple] = {}
        self.results: dict[int, dict[int, tuple[bool, int, str]]] = {}
        self.dropped: list[int] = []
        self.reaped: list[int] = []
        self.bulks: dict[int, tuple[Client, bytes]] = {}
        self.cancelled: list[int] = []
        self.next_pid = 9000
        self.child_broken: set[int] = set()  # client ids the child fails to write to
        self.fail_fork = False

    def out(self, c: Client) -> bytearray:
        return self.wire.setdefault(c.id, bytearray())

    def shell_write(self, c: Client) -> None:
        if c.id in self.stuck:
            def pile_up(data: bytes) -> None:
                self.tbuf[c.id] = self.tbuf.get(c.id, 0) + len(data)
            shell_write(c, pile_up, lambda: self.tbuf.get(c.id, 0))
        else:
            shell_write(c, self.out(c).extend)

    def buffered(self, c: Client) -> int:
        return self.tbuf.get(c.id, 0)

    def stream_started(self, c: Client) -> None:
        self.streams_started.append(c.id)

    def prepare_handover(self, c: Client) -> bool:
        self.shell_write(c)
        return c.id not in self.busy

    def set_sync_bandwidth(self, bps: int) -> None:
        self.sync_bandwidth = bps

    def start_socket_snapshot(self, targets, payload, trailer, timeout_ms, keep=None):  # noqa: ANN001
        if self.fail_fork:
            raise OSError("Cannot allocate memory")
        self.next_pid += 1
        if keep is not None:    # the child's copy: whole when it has run (run_child)
            self.kept[keep[0]] = (self.next_pid, None)
        for c, pre in targets:  # the real child writes the preambles first, at once
            self.out(c).extend(pre)
        # a forked child sees the dataset as it was at fork time: encode it now
        self.children[self.next_pid] = (targets, b"".join(payload()), trailer)
        self.results[self.next_pid] = {}
        return self.next_pid

    def run_child(self, pid: int, only: list[Client] | None = None) -> None:
        """The child writes RDB + mark to every live target (or to ``only``)."""
        targets, rdb, trailer = self.children[pid]
        res = self.results[pid]
        for c, pre in targets:
            if only is not None and c not in only:
                continue
            if c.id in self.dropped or c.id in self.child_broken:
                res[c.id] = (False, len(pre), "Broken pipe")
                continue
            self.out(c).extend(rdb + trailer)
            res[c.id] = (True, len(pre) + len(rdb) + len(trailer), "")
        for rid, (kpid, _) in list(self.kept.items()):
            if kpid == pid and only is None:
                self.kept[rid] = (pid, (rdb + trailer)[self.copy_base:])
                self.kept_bases[rid] = self.copy_base

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        return self.results.pop(pid, {})

    def socket_target_done(self, pid: int, cid: int) -> bool:
        r = self.results.get(pid, {}).get(cid)
        return r is not None and r[0]

    def drop_socket_target(self, c: Client) -> None:
        self.dropped.append(c.id)

    def reap_child(self, pid: int) -> None:
        self.reaped.append(pid)

    def send_bulk(self, c: Client, path: str) -> int:
        with open(path, "rb") as f:
            data = f.read()
        self.bulks[c.id] = (c, b"$%d\r\n" % len(data) + data)
        return len(data)

    def complete_bulk(self, core: ServerCore, c: Client) -> None:
        _, data = self.bulks.pop(c.id)
        self.out(c).extend(data)
        core.replication.master.bulk_sent(c, True, len(data))

    def cancel_bulk(self, c: Client) -> None:
        self.cancelled.append(c.id)

    def keep_file(self, rid: str, path: str) -> None:
        with open(path, "rb") as f:
            self.kept[rid] = (0, f.read())

    def kept_size(self, rid: str) -> int:
        k = self.kept.get(rid)
        return self.kept_base(rid) + len(k[1]) if k is not None and k[1] is not None else -1

    def kept_base(self, rid: str) -> int:
        k = self.kept.get(rid)
        if k is None:
            return -1
        return self.kept_bases.get(rid, 0 if k[1] is not None else -1)

    def kept_ids(self) -> list[str]:
        return list(self.kept)

    def drop_kept(self, rid: str) -> None:
        self.kept.pop(rid, None)
        self.kept_bases.pop(rid, None)

    def send_kept(self, c: Client, rid: str, offset: int, header: bytes) -> None:
        k = self.kept.get(rid)
        base = self.kept_base(rid)
        if k is None or k[1] is None or offset < base:
            raise OSError(f"no whole copy kept as {rid} from byte {offset}")
        self.bulks[c.id] = (c, header + k[1][offset - base:])


class Master:
    """A real master core with a user client; the I/O shell's part is ``flush``."""

    def __init__(self, tmp_path, *overrides: tuple[str, list[str]], now: int = NOW) -> None:  # noqa: ANN001
        ov = [("save", [""]), ("port", ["6380"]), ("enable-debug-command", ["yes"]),
              ("dir", [str(tmp_path)]), ("repl-diskless-sync-delay", ["0"])]
        cfg = Config.load(None, [*ov, *overrides])
        self.host = ForkHost()
        self.io = WireIO()
        self.host.master_io = self.io
        self.core = ServerCore(cfg, self.host, now_ms=now)
        self.host.core = self.core
        self.repl = Replication(self.core)
        self.side = self.repl.master
        self.user = self.core.connection_made("127.0.0.1:40000", "127.0.0.1:6380")
        if cfg.requirepass:
            self.user.receive_data(cmd("AUTH", cfg.requirepass))
            assert self.user.data_to_send() == b"+OK\r\n"
        self.port = 6381

    def flush(self) -> None:
        """The I/O shell's part: write what clients produced (after checking that the backlog,
        when there is one, ends at master_repl_offset, which Replication alone keeps)."""
        core = self.core
        b = self.repl.backlog
        assert b is None or b.first_byte_offset + b.histlen - 1 == self.repl.master_repl_offset
        pending, core.pending_flush = core.pending_flush, []
        for c in pending:
            self.io.shell_write(c)
        for c in list(core.clients.values()):
            self.io.shell_write(c)

    def run(self, *args: bytes | str | int, client: Client | None = None) -> bytes:
        c = client or self.user
        c.receive_data(cmd(*args))
        out = c.data_to_send()
        self.flush()
        return out

    def feed(self, c: Client, data: bytes) -> None:
        """Raw bytes from a peer, then the shell writes what was produced."""
        c.receive_data(data)
        self.flush()

    def send(self, c: Client, *args: bytes | str | int) -> None:
        self.feed(c, cmd(*args))

    def write_many(self, n: int, prefix: str = "k", start: int = 0) -> None:
        for i in range(start, start + n):
            self.run("SET", f"{prefix}:{i}", f"value-{i}")

    def tick(self, ms: int) -> None:
        self.core.now_ms += ms
        self.core.tick(self.core.now_ms)
        self.flush()

    def tick_to(self, at: int) -> None:
        self.tick(at - self.core.now_ms)

    def connect(self) -> Client:
        return self.core.connection_made(f"127.0.0.1:{50000 + self.port}", "127.0.0.1:6380")

    def replica(self, *capa: str, port: int | None = None) -> Client:
        """A connection that did Redis 7.0.15's handshake up to (not including) PSYNC."""
        port = port or self.port
        self.port += 1
        c = self.core.connection_made(f"127.0.0.1:{50000 + port}", "127.0.0.1:6380")
        c.receive_data(cmd("REPLCONF", "listening-port", port))
        assert c.data_to_send() == b"+OK\r\n"
        if capa:
            args: list[str] = []
            for cp in capa:
                args += ["capa", cp]
            c.receive_data(cmd("REPLCONF", *args))
            assert c.data_to_send() == b"+OK\r\n"
        return c

    def wire(self, c: Client) -> bytes:
        return bytes(self.io.out(c))

    def take(self, c: Client) -> bytes:
        w = self.io.out(c)
        data = bytes(w)
        w.clear()
        return data

    def child_exits(self, pid: int, code: int | None = None) -> None:
        if code is None:
            code = self.host.exit_codes.get(pid, 0)
        self.core.child_exited(pid, code)
        self.flush()

    def info(self) -> dict[str, object]:
        return dict(self.repl.info_fields())

    def mem(self) -> dict[str, object]:
        return dict(self.repl.memory_fields())

    def events(self, name: str | None = None) -> list[dict]:
        return [e for e in self.repl.events.recent if name is None or e["event"] == name]

    def log(self) -> list[str]:
        return [m for _, m in self.core.log.lines]

    def digest(self) -> str:
        return dataset_digest(self.core.dbs, None)

    def link(self, c: Client) -> ReplicaLink:
        assert isinstance(c.repl, ReplicaLink)
        return c.repl


class ReplicaCore:
    """An independent core that loads a received RDB and applies a received stream."""

    def __init__(self, tmp_path, rdb: bytes, name: str = "replica") -> None:  # noqa: ANN001
        path = os.path.join(str(tmp_path), f"{name}-{os.urandom(4).hex()}.rdb")
        with open(path, "wb") as f:
            f.write(rdb)
        cfg = Config.load(None, [("save", [""])])
        self.core = ServerCore(cfg, now_ms=NOW)
        loaded = load_rdb_file(path, cfg.databases)
        self.aux = loaded.aux
        for i, db in enumerate(self.core.dbs):
            db.data = loaded.data[i]
            db.expires = loaded.expires[i]
        self.client = self.core.connection_made("127.0.0.1:6380", "127.0.0.1:6381")
        self.applied = 0

    def apply(self, stream: bytes) -> None:
        self.client.receive_data(stream)
        self.client.data_to_send()
        self.applied += len(stream)

    def digest(self) -> str:
        return dataset_digest(self.core.dbs, None)


def apply_writes(m: Master, ops: list[str], tag: int, keys: int = 5, stride: int = 7) -> None:
    """Phase ``tag`` of a hypothesis test of the replication stream: the writes ``ops`` (set,
    incr, rpush, hset, sadd, zadd, del, select, multi) on ``keys`` keys per type, in three
    databases."""
    for i, op in enumerate(ops):
        k = f"k{(tag * stride + i) % keys}"
        if op == "set":
            m.run("SET", f"s:{k}", f"v{tag}-{i}")
        elif op == "incr":
            m.run("INCR", f"n:{k}")
        elif op == "rpush":
            m.run("RPUSH", f"l:{k}", f"e{i}", "x")
        elif op == "hset":
            m.run("HSET", f"h:{k}", f"f{i}", f"v{tag}")
        elif op == "sadd":
            m.run("SADD", f"z:s:{k}", f"m{i}")
        elif op == "zadd":
            m.run("ZADD", f"z:{k}", str(i), f"m{tag}")
        elif op == "del":
            m.run("DEL", f"s:{k}", f"l:{k}")
        elif op == "select":
            m.run("SELECT", str((tag + i) % 3))
        else:
            m.run("MULTI")
            m.run("SET", f"t:{k}", "1")
            m.run("INCR", f"n:{k}")
            m.run("EXEC")


def fill(m: Master) -> None:
    for args in (("SET", "s:1", "hello"), ("RPUSH", "l", "a", "b", "1"),
                 ("SADD", "set", "m1", "m2"), ("HSET", "h", "f", "v", "n", "2"),
                 ("ZADD", "z", "1.5", "a", "-2", "b"), ("SELECT", "2"), ("SET", "in2", "x"),
                 ("SELECT", "0")):
        m.run(*args)


@dataclass
class Received:
    replid: str
    offset: int
    rdb: bytes
    stream: bytes
    kind: str
    keepalives: int


def parse_full_sync(data: bytes, expect_fullresync: bool = True) -> Received:
    """Split a full sync as a replica reads it: keepalives, +FULLRESYNC, keepalives, payload
    ($EOF:<mark> ... <mark> or $<len> ... with no CRLF), then the stream."""
    pos = 0
    keep = 0
    replid, offset = "", -1
    while data[pos:pos + 1] == b"\n":
        pos += 1
        keep += 1
    if expect_fullresync:
        eol = data.index(b"\r\n", pos)
        parts = data[pos:eol].split()
        assert parts[0] == b"+FULLRESYNC", data[pos:eol]
        replid, offset = parts[1].decode(), int(parts[2])
        pos = eol + 2
    while data[pos:pos + 1] == b"\n":
        pos += 1
        keep += 1
    eol = data.index(b"\r\n", pos)
    head = data[pos:eol]
    pos = eol + 2
    assert head.startswith(b"$"), head
    if head.startswith(b"$EOF:"):
        mark = head[5:]
        assert len(mark) == 40 and all(ch in b"0123456789abcdef" for ch in mark)
        end = data.index(mark, pos)
        return Received(replid, offset, data[pos:end], data[end + 40:], "eof", keep)
    n = int(head[1:])
    return Received(replid, offset, data[pos:pos + n], data[pos + n:], "len", keep)


class TwoConnections:
    """A logical replica of a two-channel sync: its main connection and, once opened, its
    rdb channel, with their links on the master ``m``."""

    m: Master
    main: Client
    rdb: Client | None

    @property
    def mlink(self) -> ReplicaLink:
        return self.m.link(self.main)

    @property
    def rlink(self) -> ReplicaLink:
        assert self.rdb is not None
        return self.m.link(self.rdb)


def eof_payload(data: bytes, pos: int) -> tuple[bytes, bytes]:
    """An rdb channel's ``$EOF:<mark>\r\n<RDB><mark>`` from ``pos``, and nothing after it:
    (the mark, the RDB)."""
    eol = data.index(b"\r\n", pos)
    head = data[pos:eol]
    assert head.startswith(b"$EOF:") and len(head) == 45, head
    mark = head[5:]
    assert all(ch in b"0123456789abcdef" for ch in mark)
    end = data.index(mark, eol + 2)
    assert data[end + 40:] == b""
    return mark, data[eol + 2:end]


def online_replica(m: Master, *capa: str) -> tuple[Client, Received]:
    """A replica taken through a diskless full sync up to streaming."""
    r = m.replica(*(capa or ("eof", "psync2")))
    m.send(r, "PSYNC", "?", "-1")
    for _ in range(10):  # the diskless delay, if any
        if m.link(r).state is S.WAIT_BGSAVE_END:
            break
        m.tick(1000)
    pid = m.link(r).snapshot.pid
    m.io.run_child(pid)
    m.child_exits(pid)
    m.send(r, "REPLCONF", "ACK", str(m.repl.master_repl_offset))
    return r, parse_full_sync(m.wire(r))
