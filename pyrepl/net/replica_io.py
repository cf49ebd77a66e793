"""The replica side's I/O: the outgoing connection to the master (asyncio / uvloop).

Theory of operation: :class:`ReplicaIO` is the thin shell around the sans-io
:class:`~pyrepl.replication.replica.ReplicaSide`. The side asks for a connection with
``connect(token, host, port)``, writes with ``send(token, data)`` and drops it with
``close(token)``; the shell calls back ``on_connected`` / ``on_connect_failed`` / ``on_data`` /
``on_closed`` with the same token, after stamping ``core.now_ms``, and then flushes whatever the
core queued for other clients (sub-replicas fed by ``feed_raw``). A token identifies one
connection attempt, so events of an abandoned connection never reach the side.

Two connections can exist: the main one (``connect``; a new ``connect`` aborts the previous main
connection and any rdb channel) and, during a Redis 8 rdb-channel full sync, the rdb channel
(``connect_rdb``; its callbacks are the ``on_rdb_*`` ones). ``send`` / ``close`` /
``pause_reading`` / ``resume_reading`` / ``link_info`` take either token. ``request_drain``
schedules one ``drain_step(token)`` call on the loop (``call_soon``): between two steps the loop
runs once, so the main socket — which the side pauses after each buffered read — delivers at
most one read per step while the full-sync buffer drains.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING, Any

from pyrepl import native

if TYPE_CHECKING:
    from pyrepl.net.server import Server
    from pyrepl.replication.ports import ReplicaLinkEvents


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fmt(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr or "")


def _error_text(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError):     # its errno is OpenSSL's, not the system's
        return str(e.reason or e)
    errno = getattr(e, "errno", None)
    if errno:
        return os.strerror(errno)
    return str(e) or type(e).__name__


# The side's callbacks, by connection: the main channel's ``on_*``, the rdb channel's ``on_rdb_*``.
def _on_connected(side: ReplicaLinkEvents, rdb: bool) -> Callable[..., None]:
    return side.on_rdb_connected if rdb else side.on_connected


def _on_connect_failed(side: ReplicaLinkEvents, rdb: bool) -> Callable[..., None]:
    return side.on_rdb_connect_failed if rdb else side.on_connect_failed


def _on_data(side: ReplicaLinkEvents, rdb: bool) -> Callable[..., None]:
    return side.on_rdb_data if rdb else side.on_data


def _on_closed(side: ReplicaLinkEvents, rdb: bool) -> Callable[..., None]:
    return side.on_rdb_closed if rdb else side.on_closed


def _drain_step(side: ReplicaLinkEvents, rdb: bool) -> Callable[..., None]:
    return side.drain_step


class _MasterLinkProtocol(asyncio.Protocol):
    # read at their offsets by the main channel's read in C (_serve.link_received); a
    # __dict__ for the instance's own ``data_received``
    __slots__ = ("io", "token", "rdb", "transport", "__dict__")

    def __init__(self, io: ReplicaIO, token: int, rdb: bool = False) -> None:
        self.io = io
        self.token = token
        self.rdb = rdb  # the rdb channel (Redis 8), else the main channel
        self.transport: asyncio.Transport | None = None
        if _serve is not None and not rdb:   # (the read below, its common case in C)
            self.data_received = MethodType(_serve.link_received, self)  # type: ignore[method-assign]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        """A read (the reference of _serve.link_received, which runs the main channel's)."""
        self.io._dispatch(_on_data, self.rdb, self.token, data)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.io._lost(self, exc)


class ReplicaIO:
    """Outgoing master connections for ``server.core.replication.replica``."""

    __slots__ = ("server", "__dict__")   # (server: read at its offset by _serve.c)

    def __init__(self, server: Server) -> None:
        self.server = server
        self._proto: _MasterLinkProtocol | None = None  # the main channel
        self._task: asyncio.Task[None] | None = None
        self._token = 0
        self._rdb_proto: _MasterLinkProtocol | None = None  # the rdb channel
        self._rdb_task: asyncio.Task[None] | None = None
        self._rdb_token = 0
        self._drain_handle: asyncio.Handle | None = None

    # -- what the side calls ----------------------------------------------------------------
    def connect(self, token: int, host: str, port: int) -> None:
        self._drop()
        self._drop_rdb()
        self._token = token
        if self._stopping():
            return  # the server is shutting down: no new master link
        loop = self.server.loop or asyncio.get_event_loop()
        self._task = loop.create_task(self._connect(token, host, port, False))

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        self._drop_rdb()
        self._rdb_token = token
        if self._stopping():
            return
        loop = self.server.loop or asyncio.get_event_loop()
        self._rdb_task = loop.create_task(self._connect(token, host, port, True))

    def _find(self, token: int) -> _MasterLinkProtocol | None:
        for p in (self._proto, self._rdb_proto):
            if p is not None and p.token == token:
                return p
        return None

    def send(self, token: int, data: bytes) -> None:
        p = self._find(token)
        if p is not None and p.transport is not None and not p.transport.is_closing():
            p.transport.write(data)

    def close(self, token: int) -> None:
        if token == self._token:
            self._drop()
        elif token == self._rdb_token:
            self._drop_rdb()

    def pause_reading(self, token: int) -> None:
        p = self._find(token)
        if p is not None and p.transport is not None and not p.transport.is_closing():
            p.transport.pause_reading()

    def resume_reading(self, token: int) -> None:
        p = self._find(token)
        if p is not None and p.transport is not None and not p.transport.is_closing():
            p.transport.resume_reading()

    def request_drain(self, token: int) -> None:
        """Call ``side.drain_step(token)`` soon (once per request)."""
        if self._drain_handle is not None or self._stopping():
            return
        loop = self.server.loop or asyncio.get_event_loop()
        self._drain_handle = loop.call_soon(self._drain, token)

    def link_info(self, token: int) -> tuple[str, str, int, Any] | None:
        """(peer addr, local addr, fd, transport) of the connection, for the master client."""
        p = self._find(token)
        if p is None or p.transport is None:
            return None
        t = p.transport
        sock = t.get_extra_info("socket")
        fd = sock.fileno() if sock is not None else -1
        return _fmt(t.get_extra_info("peername")), _fmt(t.get_extra_info("sockname")), fd, t

    # -- internals ------------------------------------------------------------------------
    def _stopping(self) -> bool:
        ev = getattr(self.server, "_stop_event", None)
        return ev is not None and ev.is_set()

    def _side(self) -> ReplicaLinkEvents | None:
        repl = self.server.core.replication
        return repl.replica if repl is not None else None

    def _drain(self, token: int) -> None:
        self._drain_handle = None
        self._dispatch(_drain_step, False, token)

    def _drop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        p, self._proto = self._proto, None
        if p is not None and p.transport is not None:
            p.transport.abort()
        h, self._drain_handle = self._drain_handle, None
        if h is not None:
            h.cancel()

    def _drop_rdb(self) -> None:
        task, self._rdb_task = self._rdb_task, None
        if task is not None and not task.done():
            task.cancel()
        p, self._rdb_proto = self._rdb_proto, None
        if p is not None and p.transport is not None:
            p.transport.abort()

    async def _connect(self, token: int, host: str, port: int, rdb: bool) -> None:
        loop = asyncio.get_running_loop()
        try:
            # bind-source-addr: the local address the connections to the master come from
            source = self.server.config.bind_source_addr
            _t, proto = await loop.create_connection(
                lambda: _MasterLinkProtocol(self, token, rdb), host, port,
                local_addr=(source, 0) if source else None, **self._tls())
        except asyncio.CancelledError:
            raise
        except (OSError, ValueError) as e:
            if token == (self._rdb_token if rdb else self._token):
                if rdb:
                    self._rdb_task = None
                else:
                    self._task = None
                self._dispatch(_on_connect_failed, rdb, token, _error_text(e))
            return
        if token != (self._rdb_token if rdb else self._token):  # abandoned while connecting
            if proto.transport is not None:
                proto.transport.abort()
            return
        if rdb:
            self._rdb_task = None
            self._rdb_proto = proto
        else:
            self._task = None
            self._proto = proto
        self._dispatch(_on_connected, rdb, token)

    def _tls(self) -> dict[str, Any]:
        """tls-replication: both channels to the master over TLS, with the client context
        (the master's certificate checked against the CA, not its host name; no SNI)."""
        contexts = self.server.tls
        if not self.server.config.tls_replication or contexts is None:
            return {}
        return {"ssl": contexts.client, "server_hostname": ""}

    def _lost(self, proto: _MasterLinkProtocol, exc: Exception | None) -> None:
        if proto is self._proto:
            self._proto = None
        elif proto is self._rdb_proto:
            self._rdb_proto = None
        else:
            return
        self._dispatch(_on_closed, proto.rdb, proto.token, _error_text(exc) if exc else "")

    def _dispatch(self, event: Callable[[ReplicaLinkEvents, bool], Callable[..., None]],
                  rdb: bool, *args: Any) -> None:
        side = self._side()
        if side is None or self._stopping():
            return  # shutting down: the links are being closed, nothing reconnects
        server = self.server
        core = server.core
        core.now_ms = _now_ms()
        callback = event(side, rdb)
        try:
            callback(*args)
        except Exception as e:  # noqa: BLE001 - a bug must not kill the loop: log, drop, retry
            self._failed(callback, rdb, args[0] if args else None, e)
        if core.pending_flush:
            server.schedule_flush()
        if core.shutdown_asap:
            server.shutdown_from_command()

    def _failed(self, callback: Callable[..., None], rdb: bool, token: int | None,
                e: Exception) -> None:
        """A callback raised: logged, its connection dropped, the side told it closed."""
        self.server.logger.warning(f"Replica link error in {callback.__name__}: {e!r}")
        if token is not None and token == (self._rdb_token if rdb else self._token):
            if rdb:
                self._drop_rdb()
            else:
                self._drop()
        side = self._side()
        if side is None:
            return
        try:
            _on_closed(side, rdb)(token, f"internal error: {e!r}")
        except Exception:  # noqa: BLE001
            pass


_serve = native.load("pyrepl.net._serve")   # (the main channel's read, its common case in C)
if _serve is not None:
    from pyrepl.core.server import ServerCore

    _serve.bind_master_link(_MasterLinkProtocol, ReplicaIO, ServerCore)
