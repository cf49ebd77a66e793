"""The replica side's I/O: the outgoing connection to the master (asyncio / uvloop).

Theory of operation: :class:`ReplicaIO` is the thin shell around the sans-io
:class:`~pyrepl.replication.replica.ReplicaSide`. The side asks for a connection with
``connect(token, host, port)``, writes with ``send(token, data)`` and drops it with
``close(token)``; the shell calls back ``on_connected`` / ``on_connect_failed`` / ``on_data`` /
``on_closed`` with the same token, after stamping ``core.now_ms``, and then flushes whatever the
core queued for other clients (sub-replicas fed by ``feed_raw``). A token identifies one
connection attempt, so events of an abandoned connection never reach the side. At most one
connection exists: a new ``connect`` aborts the previous one.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyrepl.net.server import Server


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fmt(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr or "")


def _error_text(e: BaseException) -> str:
    errno = getattr(e, "errno", None)
    if errno:
        return os.strerror(errno)
    return str(e) or type(e).__name__


class _MasterLinkProtocol(asyncio.Protocol):
    def __init__(self, io: ReplicaIO, token: int) -> None:
        self.io = io
        self.token = token
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def data_received(self, data: bytes) -> None:
        self.io._dispatch("on_data", self.token, data)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.io._lost(self, exc)


class ReplicaIO:
    """Outgoing master connection for ``server.core.replication.replica``."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._proto: _MasterLinkProtocol | None = None
        self._task: asyncio.Task[None] | None = None
        self._token = 0

    # -- what the side calls ----------------------------------------------------------------
    def connect(self, token: int, host: str, port: int) -> None:
        self._drop()
        self._token = token
        if self._stopping():
            return  # the server is shutting down: no new master link
        loop = self.server.loop or asyncio.get_event_loop()
        self._task = loop.create_task(self._connect(token, host, port))

    def send(self, token: int, data: bytes) -> None:
        p = self._proto
        if p is not None and p.token == token and p.transport is not None \
                and not p.transport.is_closing():
            p.transport.write(data)

    def close(self, token: int) -> None:
        if token == self._token:
            self._drop()

    def pause_reading(self, token: int) -> None:
        p = self._proto
        if p is not None and p.token == token and p.transport is not None:
            p.transport.pause_reading()

    def resume_reading(self, token: int) -> None:
        p = self._proto
        if p is not None and p.token == token and p.transport is not None:
            p.transport.resume_reading()

    def link_info(self, token: int) -> tuple[str, str, int, Any] | None:
        """(peer addr, local addr, fd, transport) of the connection, for the master client."""
        p = self._proto
        if p is None or p.token != token or p.transport is None:
            return None
        t = p.transport
        sock = t.get_extra_info("socket")
        fd = sock.fileno() if sock is not None else -1
        return _fmt(t.get_extra_info("peername")), _fmt(t.get_extra_info("sockname")), fd, t

    # -- internals ------------------------------------------------------------------------
    def _stopping(self) -> bool:
        ev = getattr(self.server, "_stop_event", None)
        return ev is not None and ev.is_set()

    def _side(self) -> Any:
        repl = self.server.core.replication
        return repl.replica if repl is not None else None

    def _drop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
        p, self._proto = self._proto, None
        if p is not None and p.transport is not None:
            p.transport.abort()

    async def _connect(self, token: int, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            _t, proto = await loop.create_connection(
                lambda: _MasterLinkProtocol(self, token), host, port)
        except asyncio.CancelledError:
            raise
        except (OSError, ValueError) as e:
            if token == self._token:
                self._task = None
                self._dispatch("on_connect_failed", token, _error_text(e))
            return
        if token != self._token:  # abandoned while connecting
            if proto.transport is not None:
                proto.transport.abort()
            return
        self._task = None
        self._proto = proto
        self._dispatch("on_connected", token)

    def _lost(self, proto: _MasterLinkProtocol, exc: Exception | None) -> None:
        if proto is not self._proto:
            return
        self._proto = None
        self._dispatch("on_closed", proto.token, _error_text(exc) if exc else "")

    def _dispatch(self, method: str, *args: Any) -> None:
        side = self._side()
        if side is None or self._stopping():
            return  # shutting down: the links are being closed, nothing reconnects
        server = self.server
        core = server.core
        core.now_ms = _now_ms()
        try:
            getattr(side, method)(*args)
        except Exception as e:  # noqa: BLE001 - a bug must not kill the loop: log, drop, retry
            server.logger.warning(f"Replica link error in {method}: {e!r}")
            if args and args[0] == self._token:
                self._drop()
            try:
                side.on_closed(args[0], f"internal error: {e!r}")
            except Exception:  # noqa: BLE001
                pass
        if core.pending_flush:
            server.flush_pending()
        if core.shutdown_asap:
            server.shutdown_from_command()
