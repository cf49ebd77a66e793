"""A client read in C (``pyrepl.net._serve.received``) against the Python it stands for
(``ClientProtocol.data_received``, with ``Client.receive_data`` and ``data_to_send``), and
the loop pass's writes in C (``_serve.flush``) against ``Server._flush_deferred``.

Two servers, each with two connections, get the same reads: one through ``received`` and
``flush``, the other through the Python methods. Random command streams (pipelined or lone, split anywhere,
inline and non-canonical requests, MULTI, pub/sub, CLIENT REPLY, a blocking command, QUIT)
must give the same bytes written and the same closes, the same calls on the server (flushes
of other clients' output), and after every read the same value in every slot of both clients
and of the stats (the clock's readings aside: each path reads the clock itself).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.config import Config
from pyrepl.core.client import Client
from pyrepl.core.server import ServerCore
from pyrepl.core.stats import Stats
from pyrepl.net.server import ClientProtocol
from pyrepl.net.server import Server as RealServer
from pyrepl.resp.fastreader import FastRespReader

_native = native.load("pyrepl.net._serve")
if _native is None:
    pytest.skip(f"compares pyrepl/net/_serve.c with its Python reference ({native.WHY_PURE})",
                allow_module_level=True)
received = _native.received


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class Transport:
    def __init__(self) -> None:
        self.log: list[object] = []

    def write(self, data: bytes) -> None:
        self.log.append(bytes(data))

    def close(self) -> None:
        self.log.append("close")

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else None


class Server:
    """The server a ClientProtocol reads for, without a loop: its pass ends when the test
    says (``end_pass``), by ``_serve.flush`` (``native``) or by the Python it stands for."""

    def __init__(self, *more: tuple[str, list[str]], native: bool = False) -> None:
        self.core = ServerCore(Config.load(None, [("save", [""]), *more]), now_ms=1)
        self.log: list[str] = []
        self.native = native

    _flush_scheduled = False

    def schedule_flush(self) -> None:   # (as Server.schedule_flush: once per loop pass)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.log.append("schedule_flush")

    def end_pass(self) -> None:   # (what the loop's call_soon runs)
        (_native.flush if self.native else RealServer._flush_deferred)(self)  # type: ignore

    flush_pending = RealServer.flush_pending

    def shutdown_from_command(self) -> None:
        self.log.append("shutdown")


def world(*more: tuple[str, list[str]], native: bool = False
          ) -> tuple[Server, list[ClientProtocol]]:
    server = Server(*more, native=native)
    protos = []
    for _ in range(2):
        p = ClientProtocol(server)  # type: ignore[arg-type]
        p.connection_made(Transport())  # type: ignore[arg-type]
        protos.append(p)
    return server, protos


_TIMES = {"ctime_ms", "last_interaction_ms"}
_SKIP = {"core", "reader", "transport", "db", "_whole"} | _TIMES


def norm(v: object) -> object:
    """A value compared by content (objects of the core by what they hold)."""
    if v is None or isinstance(v, (bool, int, str, bytes, float)):
        return v
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted(map(repr, v))
    if isinstance(v, dict):
        return sorted((repr(k), norm(x)) for k, x in v.items())
    if hasattr(v, "data") and type(v).__name__ == "Raw":
        return ("raw", v.data)  # type: ignore[attr-defined]
    if hasattr(v, "handler"):     # a Command
        return ("cmd", v.name)  # type: ignore[attr-defined]
    if hasattr(v, "channels"):    # pub/sub subscriptions
        return ("subs", norm(v.channels), norm(v.patterns), norm(v.shard))  # type: ignore
    return (type(v).__name__, norm(getattr(v, "__dict__", None)))


def state(server: Server, protos: list[ClientProtocol]) -> dict:
    out: dict = {"server": list(server.log)}
    for i, p in enumerate(protos):
        c = p.client
        assert c is not None
        out[i] = {name: norm(getattr(c, name)) for name in Client.__slots__
                  if name not in _SKIP}
        out[i]["db"] = c.db.id
        out[i]["transport"] = list(p.transport.log)  # type: ignore[union-attr]
        r = c.reader
        out[i]["reader"] = {name: norm(getattr(r, name)) for name in
                            ("queue", "spent", "consumed", "_fed", "_base", "_pos")}
    stats = server.core.stats
    out["stats"] = {name: getattr(stats, name) for name in Stats.__slots__
                    if name not in ("instant", "ops_samples", "last_ops_sample")}
    out["dirty"] = server.core.dirty
    out["data"] = sorted((k, repr(v)) for k, v in server.core.dbs[0].data.items())
    return out


_COMMANDS = st.sampled_from([
    enc(b"SET", b"k", b"v"), enc(b"GET", b"k"), enc(b"GET", b"nokey"), enc(b"INCR", b"n"),
    enc(b"LPUSH", b"l", b"a"), enc(b"DEL", b"k"), enc(b"PING"), b"PING\r\n", b"\r\n",
    b"*1\r\n$04\r\nPING\r\n", enc(b"MULTI"), enc(b"EXEC"), enc(b"DISCARD"),
    enc(b"SUBSCRIBE", b"ch"), enc(b"UNSUBSCRIBE", b"ch"), enc(b"PUBLISH", b"ch", b"m"),
    enc(b"CLIENT", b"REPLY", b"OFF"), enc(b"CLIENT", b"REPLY", b"ON"),
    enc(b"CLIENT", b"REPLY", b"SKIP"), enc(b"HELLO", b"3"), enc(b"HELLO", b"2"),
    enc(b"SELECT", b"1"), enc(b"SELECT", b"0"), enc(b"NOSUCH"), enc(b"SET", b"k"),
    enc(b"AUTH", b"nopass"), enc(b"BLPOP", b"empty", b"0"), enc(b"QUIT"), b"*2\r\n$3\r\nGE",
    enc(b"ECHO", b"x" * 300), enc(b"EXISTS", b"k"), enc(b"SETBIT", b"b", b"7", b"1"),
    enc(b"BITCOUNT", b"b"),
])


@settings(max_examples=300, deadline=None)
@given(reads=st.lists(st.tuples(st.integers(0, 1), st.lists(_COMMANDS, min_size=1, max_size=4),
                                st.integers(0, 60), st.booleans()), min_size=1, max_size=14))
@example(reads=[(0, [enc(b"SET", b"k", b"v")], 0, False), (0, [enc(b"GET", b"k")], 0, False),
                (0, [enc(b"INCR", b"n")], 0, False)])   # lone requests, the common case
@example(reads=[(0, [enc(b"SUBSCRIBE", b"ch")], 0, True), (1, [enc(b"PUBLISH", b"ch", b"m")], 0,
                                                           False),
                (0, [enc(b"PING")], 0, True)])   # a subscriber's held output, then a read
def test_received_is_data_received(reads):
    """Each read (the commands of one connection, split at a random point into two reads,
    the transport paused or not) leaves both servers the same."""
    same_reads(reads)


@settings(max_examples=100, deadline=None)
@given(reads=st.lists(st.tuples(st.integers(0, 1), st.lists(_COMMANDS, min_size=1, max_size=4),
                                st.integers(0, 60), st.booleans()), min_size=1, max_size=14))
def test_received_is_data_received_with_maxmemory_clients(reads):
    """The same with client eviction on (each read may count its client again: quiet or
    not, ``ServerCore.after_read``): the figures, the quiet flags and the total alike."""
    totals = same_reads(reads, ("maxmemory-clients", ["64mb"]))
    assert totals[0] == totals[1]


_CLUSTER = st.sampled_from([
    enc(b"SET", b"n", b"1"), enc(b"GET", b"l"), enc(b"INCR", b"b"), enc(b"MSET", b"k", b"1",
                                                                         b"n", b"2"),
    enc(b"ASKING"), enc(b"READONLY"), enc(b"READWRITE"), enc(b"GET", b"{k}x"),
])


@settings(max_examples=100, deadline=None)
@given(reads=st.lists(st.tuples(st.integers(0, 1), st.lists(_COMMANDS | _CLUSTER, min_size=1,
                                                            max_size=6),
                                st.integers(0, 60), st.booleans()), min_size=1, max_size=14))
@example(reads=[(0, [enc(b"SET", k, b"v") for k in (b"k", b"n", b"l", b"b")] * 4, 0, False),
                (0, [enc(b"ASKING"), enc(b"GET", b"k"), enc(b"GET", b"n")], 7, False)])
def test_received_is_data_received_in_cluster_mode(reads):
    """The same on a cluster node that serves every other slot (another master the rest):
    runs of served commands, MOVED, CROSSSLOT and ASKING between them alike."""
    import tempfile

    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        same_reads(reads, cluster_dirs=(da, db))


def _clustered(server: Server) -> None:
    """``server`` made a cluster node (nodes.conf in its dir): the even slots its own, the odd
    ones another master's, the cluster OK."""
    from pyrepl.cluster.node import MASTER, ClusterNode
    from pyrepl.core import cluster

    st_ = cluster.start(server.core)
    st_.rename(st_.myself, "a" * 40)
    other = ClusterNode("b" * 40, MASTER, 1)
    other.ip, other.port = "127.0.0.2", 7001
    st_.add_node(other)
    for j in range(16384):
        st_.add_slot(other if j % 2 else st_.myself, j)
    st_.state = 0


def _warm_name_cache() -> None:
    """NAME_CACHE (one per process, each spelling added at its first lookup) as once every
    command ran: the two servers share it, so a name the first server's read added would
    change the second's run of the same read (plainrun.select ends a run at a name it does
    not know yet)."""
    from pyrepl.commands.table import COMMANDS
    from pyrepl.core.dispatch import _PROTECTED_COMMANDS, NAME_CACHE

    for name, cmd in COMMANDS.items():
        if not cmd.subcommands and cmd.name not in _PROTECTED_COMMANDS:
            for spelling in (name, name.upper()):
                NAME_CACHE.setdefault(spelling, cmd)


def same_reads(reads, *more: tuple[str, list[str]], cluster_dirs: tuple[str, str] | None = None
               ) -> tuple[int, int]:
    _warm_name_cache()
    if cluster_dirs is not None:
        more = (*more, ("dir", [cluster_dirs[0]]))
    a = world(*more, native=True)
    if cluster_dirs is not None:
        more = (*more[:-1], ("dir", [cluster_dirs[1]]))
    b = world(*more)
    if cluster_dirs is not None:
        for w in (a, b):
            _clustered(w[0])
    for who, cmds, cut, paused in reads:
        for w in (a, b):
            w[1][who].client.write_paused = paused  # type: ignore[union-attr]
        data = b"".join(cmds)
        cut = min(cut, len(data))
        for chunk in (data[:cut], data[cut:]):
            if not chunk:
                continue
            received(a[1][who], chunk)
            ClientProtocol.data_received(b[1][who], chunk)
            assert state(*a) == state(*b)
            if cut % 3:   # (else the pass goes on: the next read finds the flush scheduled)
                a[0].end_pass()
                b[0].end_pass()
                assert state(*a) == state(*b)
    return a[0].core.client_eviction.total, b[0].core.client_eviction.total


def test_received_takes_the_general_path_for_anything_else():
    """A closed client, a bytearray, a protocol before its client: the Python method runs
    (and answers as it does)."""
    server, (p, q) = world(native=True)
    received(p, bytearray(enc(b"PING")))
    assert p.transport.log == []  # type: ignore[union-attr]   (the reply waits for the pass's end)
    server.end_pass()
    assert p.transport.log == [b"+PONG\r\n"]  # type: ignore[union-attr]
    q.client.closed = True  # type: ignore[union-attr]
    received(q, enc(b"PING"))
    server.end_pass()
    assert q.transport.log == []  # type: ignore[union-attr]
    fresh = ClientProtocol(server)  # type: ignore[arg-type]
    assert received(fresh, enc(b"PING")) is None   # (no client yet: nothing to do)
    with pytest.raises(TypeError):
        received(p)


def test_the_slots_it_moves_exist():
    """A renamed slot fails at import (bind), not at a read: here, a class without one."""
    from pyrepl.net._serve import bind

    from pyrepl.resp.fastreader import first

    class NoSlots:
        pass

    from pyrepl._dispatch import execute

    from pyrepl.commands.table import Command
    from pyrepl.core.dispatch import NAME_CACHE, execute_run
    from pyrepl.keyspace.db import Database
    from pyrepl.resp.fastreader import release

    with pytest.raises((TypeError, AttributeError)):
        bind(NoSlots, Client, Stats, FastRespReader, ServerCore, Command, NAME_CACHE, execute,
             execute_run, first, release, Database)
    with pytest.raises((TypeError, AttributeError)):   # (the database's tables: slots)
        bind(ClientProtocol, Client, Stats, FastRespReader, ServerCore, Command, NAME_CACHE,
             execute, execute_run, first, release, NoSlots)
    with pytest.raises(TypeError):   # (the name cache is a dict)
        bind(ClientProtocol, Client, Stats, FastRespReader, ServerCore, Command, [], execute,
             execute_run, first, release, Database)
    # (bind again as the server module did, so later tests see the real classes and the real
    # dispatch: a stale argument here once bound ServerCore in the dispatch's place)
    bind(ClientProtocol, Client, Stats, FastRespReader, ServerCore, Command, NAME_CACHE, execute,
         execute_run, first, release, Database)


def test_counters_are_exact_across_digits_and_never_change_a_value_someone_holds():
    """``slot_add`` writes a counter's digits in place when only the slot holds the int: the
    sums stay exact where the int grows a digit (2^30), where a carry reaches its second digit
    (2^31) and past 2^60 (the API's path), and an int that anyone else holds keeps its
    value."""
    server, (p, _q) = world()
    stats = server.core.stats
    req = enc(b"PING")
    for start in (2**30 - 3 * len(req), 2**31 - 2 * len(req), 2**60 - 2 * len(req), 7 * 2**60):
        stats.net_input_bytes = start + int("0")     # (an int of its own, not a constant)
        held = stats.net_input_bytes
        received(p, req)
        assert held == start and stats.net_input_bytes == start + len(req)
        del held
        for k in range(2, 6):
            received(p, req)
            assert stats.net_input_bytes == start + k * len(req)
            assert stats.net_input_bytes + 0 == int(str(stats.net_input_bytes))
    assert p.client.net_in == 20 * len(req)  # type: ignore[union-attr]


def test_the_pass_hook_writes_at_the_end_of_each_pass_of_uvloops_loop():
    """hook_pass on a real uvloop loop: the replies that reads queued in core.pending_flush
    leave at the end of the loop's next pass (libuv's check phase), without a call_soon (the
    server here schedules nothing); a write that fails goes to the loop's exception handler;
    unhook_pass closes the handle (twice: nothing more), and the loop closes cleanly."""
    import asyncio

    import uvloop
    import uvloop.loop as uvl

    server, (p, q) = world(native=True)
    loop = uvloop.new_event_loop()
    caught: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: caught.append(ctx))
    hook = _native.hook_pass(loop, uvl.libuv_get_loop_t_ptr(loop), uvl.__file__, server)
    try:
        received(p, enc(b"SET", b"k", b"v"))
        received(q, enc(b"GET", b"k"))
        assert p.transport.log == [] and q.transport.log == []  # type: ignore[union-attr]
        loop.run_until_complete(asyncio.sleep(0))
        assert p.transport.log == [b"+OK\r\n"]  # type: ignore[union-attr]
        assert q.transport.log == [b"$1\r\nv\r\n"]  # type: ignore[union-attr]
        assert server.core.pending_flush == [] and caught == []

        def refuse(data: bytes) -> None:
            raise RuntimeError("the transport refuses")
        p.transport.write = refuse  # type: ignore[union-attr]
        received(p, enc(b"PING"))
        loop.run_until_complete(asyncio.sleep(0))
        assert [type(c.get("exception")) for c in caught] == [RuntimeError]
        assert "pass's writes failed" in caught[0]["message"]

        class NotAServer:
            core = object()
        with pytest.raises(TypeError):   # (its core is no ServerCore: nothing hooked)
            _native.hook_pass(loop, uvl.libuv_get_loop_t_ptr(loop), uvl.__file__, NotAServer())
    finally:
        _native.unhook_pass(hook)
        _native.unhook_pass(hook)
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def _uv_pair(loop, family: str):
    """A uvloop transport over one end of a connected pair (TCP on loopback or a Unix socket
    pair), the other end a plain blocking socket to read from, with small buffers so that a
    few KB fill them."""
    import socket

    if family == "tcp":
        lsock = socket.create_server(("127.0.0.1", 0))
        peer = socket.create_connection(lsock.getsockname())
        ours, _ = lsock.accept()
        lsock.close()
    else:
        ours, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

    class Proto:
        lost: list[object] = []

        def connection_made(self, t):
            pass

        def connection_lost(self, exc):
            self.lost.append(exc)

        def pause_writing(self):
            pass

        def resume_writing(self):
            pass

        def data_received(self, data):
            pass

        def eof_received(self):
            return False
    proto = Proto()
    t, _ = loop.run_until_complete(loop.connect_accepted_socket(lambda: proto, ours))
    return t, ours.fileno(), peer, proto


def _drain(sock, want: int) -> bytes:
    import select
    got = bytearray()
    while len(got) < want and select.select([sock], [], [], 0)[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    return bytes(got)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["tcp", "unix"]),
       st.lists(st.tuples(st.integers(1, 60_000), st.sampled_from(["none", "read", "pass"])),
                min_size=1, max_size=25))
def test_send_reply_is_the_transports_write(family, steps):
    """_serve.send_reply (write_one's write) against uvloop's transport.write, the reference:
    replies of random sizes, the peer reading some or none between them and the loop running
    or not, arrive whole and in order, as the transport's writes alone would deliver them. It
    writes to the socket itself only when the transport holds nothing of its own and the
    socket takes the whole reply; otherwise the transport has the reply (or its rest)."""
    import asyncio

    import uvloop

    loop = uvloop.new_event_loop()
    t, fd, peer, _proto = _uv_pair(loop, family)
    try:
        sent = bytearray()
        got = bytearray()
        for i, (size, then) in enumerate(steps):
            data = bytes([65 + i % 26]) * size
            held = t.get_write_buffer_size()
            direct = _native.send_reply(t, fd, data)
            if held or t.get_write_buffer_size():
                assert direct is False
            if i == 0 and size <= 1000:   # (an empty socket takes it)
                assert direct is True
            sent += data
            if then == "read":
                got += _drain(peer, len(sent) - len(got))
            elif then == "pass":
                loop.run_until_complete(asyncio.sleep(0))
        for _ in range(100_000):
            if len(got) == len(sent):
                break
            loop.run_until_complete(asyncio.sleep(0))
            got += _drain(peer, len(sent) - len(got))
        assert bytes(got) == bytes(sent)
    finally:
        t.close()
        peer.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


def test_send_reply_leaves_anything_else_to_the_transport():
    """No uvloop stream transport, no fd, a closing transport, a peer gone: the transport's
    write has the bytes, and on a peer gone uvloop closes the transport as its own write
    does (connection_lost), the server raising nothing."""
    import asyncio

    import uvloop

    fake = Transport()
    assert _native.send_reply(fake, 5, b"+OK\r\n") is False
    assert fake.log == [b"+OK\r\n"]
    loop = uvloop.new_event_loop()
    try:
        t, fd, peer, proto = _uv_pair(loop, "tcp")
        assert _native.send_reply(t, -1, b"+A\r\n") is False   # (no fd: the transport's)
        assert _native.send_reply(t, fd, b"+B\r\n") is True
        assert _drain(peer, 8) == b"+A\r\n+B\r\n"
        peer.close()
        for _ in range(50):   # (the first write after the close may still succeed: an RST)
            if t.is_closing():
                break
            _native.send_reply(t, fd, b"+C\r\n")
            loop.run_until_complete(asyncio.sleep(0.01))
        assert t.is_closing()
        loop.run_until_complete(asyncio.sleep(0))
        assert len(proto.lost) == 1
        for write in (t.write, lambda data: _native.send_reply(t, fd, data)):
            with pytest.raises(RuntimeError, match="closed"):   # (closed: as its write)
                write(b"+D\r\n")
        # closing with bytes of its own still to write: they go first, then the transport's
        t, fd, peer, proto = _uv_pair(loop, "unix")
        t.write(b"x" * 200_000)
        assert t.get_write_buffer_size() > 0
        t.close()
        assert _native.send_reply(t, fd, b"+E\r\n") is False
        got = bytearray()
        for _ in range(10_000):
            loop.run_until_complete(asyncio.sleep(0))
            got += _drain(peer, 1 << 20)
            if proto.lost:
                break
        assert bytes(got) == b"x" * 200_000 + b"+E\r\n"   # (uvloop's write: after them)
        peer.close()
    finally:
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
