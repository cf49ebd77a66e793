"""Connections that arrive while a busy script blocks the event loop.

Redis's processEventsWhileBlocked runs the accept handlers too: a redis-cli opened to send
SCRIPT KILL while a script loops, or a client that connects while a script from the AOF runs
at start, is accepted and answered (-BUSY, -LOADING, the kill) before the script ends. The
event loop cannot accept while it is blocked, so :class:`BlockedAccepts` does it in the
script's hook: each new socket is served through a :class:`BlockedTransport` (non-blocking
``send``, what the socket does not take kept in order), and once the loop runs again each
socket is handed to the loop (``connect_accepted_socket``) with the same protocol, which
takes the loop's transport (:meth:`BlockedTransport.hand_over`, the bytes still unsent first).

Only the plain TCP and Unix listeners are served so; TLS connections wait for the loop, as
TLS clients' reads do during a busy script (README).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

#: Redis's MAX_ACCEPTS_PER_CALL: at most this many connections a listener a pass
MAX_ACCEPTS_PER_CALL = 1000
#: asyncio's (and uvloop's) default high-water mark, what set_write_buffer_limits() restores
DEFAULT_HIGH_WATER = 64 * 1024


class BlockedTransport:
    """The transport of a connection accepted while the loop is blocked, until the loop's
    own takes over. It writes with ``send`` at once and keeps what the socket did not take;
    pause_writing / resume_writing follow the high-water mark as a transport's do."""

    def __init__(self, sock: socket.socket, protocol: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self.protocol = protocol
        self.loop = loop
        self.pending = bytearray()
        self.high = DEFAULT_HIGH_WATER
        self.paused = False
        self.closing = False        # close() or abort() was called
        self.gone = False           # the socket is closed (nothing to hand over)

    # -- the transport's interface, as the protocol and the core use it --------------------
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self.sock
        try:
            if name == "peername":
                return self.sock.getpeername()
            if name == "sockname":
                return self.sock.getsockname()
        except OSError:
            return default
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closing or not data:
            return
        if not self.pending:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError:
                self.abort()
                return
            if n == len(data):
                return
            data = memoryview(data)[n:]
        self.pending += data
        if not self.paused and len(self.pending) > self.high:
            self.paused = True
            self.protocol.pause_writing()

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def get_write_buffer_size(self) -> int:
        return len(self.pending)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = DEFAULT_HIGH_WATER if high is None else high

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        """What is unsent still goes (through the loop's transport, once handed over)."""
        if self.closing:
            return
        self.closing = True
        self.flush()
        if not self.pending:
            self._lost()

    def abort(self) -> None:
        if self.gone:
            return
        self.closing = True
        self.pending.clear()
        self._lost()

    # -- the blocked passes and the hand-over ----------------------------------------------
    def flush(self) -> None:
        """As much of the unsent bytes as the socket takes now."""
        if not self.pending or self.gone:
            return
        try:
            n = self.sock.send(self.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.abort()
            return
        del self.pending[:n]
        if self.paused and len(self.pending) <= self.high // 4:
            self.paused = False
            self.protocol.resume_writing()

    def _lost(self) -> None:
        """The socket closed now, the protocol told at the loop's next pass (as a transport
        tells it)."""
        self.gone = True
        try:
            self.sock.close()
        except OSError:
            pass
        self.loop.call_soon(self.protocol.connection_lost, None)

    def hand_over(self, transport: asyncio.Transport) -> None:
        """The loop's transport takes over: the unsent bytes first, a close asked for
        meanwhile done after them, the write pause as the new transport's buffer makes it."""
        client = self.protocol.client
        if client is not None:
            client.transport = transport
            client.write_paused = False
        if self.pending:
            transport.write(bytes(self.pending))    # (may pause it: pause_writing)
            self.pending.clear()
        if self.closing:
            transport.close()


class BlockedAccepts:
    """Accepts from the plain listeners while the loop is blocked (``accept``), and hands the
    connections to the loop once it runs again."""

    def __init__(self, factory: Any, loop_of: Any) -> None:
        self.factory = factory          # the listeners' protocol factory
        self.loop_of = loop_of          # () -> the running loop
        self.waiting: list[BlockedTransport] = []

    def accept(self, listen_fd: int) -> None:
        """Up to MAX_ACCEPTS_PER_CALL connections from the listener ``listen_fd``, each with
        a protocol of its own that the core sees as any new client."""
        loop = self.loop_of()
        if loop is None:
            return
        lsock = socket.socket(fileno=os.dup(listen_fd))
        try:
            lsock.setblocking(False)
            for _ in range(MAX_ACCEPTS_PER_CALL):
                try:
                    sock, _addr = lsock.accept()
                except OSError:     # (none left: BlockingIOError)
                    break
                sock.setblocking(False)
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                protocol = self.factory()
                t = BlockedTransport(sock, protocol, loop)
                if not self.waiting:
                    loop.call_soon(self._hand_over_all)
                self.waiting.append(t)
                protocol.connection_made(t)
        finally:
            lsock.close()

    def flush(self) -> None:
        """Each waiting connection's unsent bytes, as far as its socket takes them."""
        for t in self.waiting:
            if t.pending:
                t.flush()

    def _hand_over_all(self) -> None:
        waiting, self.waiting = self.waiting, []
        for t in waiting:
            if not t.gone:
                t.loop.create_task(self._hand_over(t))

    @staticmethod
    async def _hand_over(t: BlockedTransport) -> None:
        try:
            await t.loop.connect_accepted_socket(lambda: t.protocol, t.sock)
        except OSError:
            t.abort()
