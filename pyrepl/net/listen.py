"""The listening sockets: TCP on ``bind``:``port``, TLS on ``bind``:``tls-port``, the Unix socket.

:class:`Listeners` binds them (all addresses of ``bind`` or none, ``-addr`` optional, as Redis's
``listenToPort``), serves each with the server's protocol factory, and moves them on CONFIG SET:
``port``/``bind``/``tls-port`` bind the new addresses first and close the old listeners only
once that worked (a failed bind leaves everything as it was); a new TLS context is taken by the
TLS listeners without closing their sockets (each is served again from a duplicate of the same
listening socket), so connections waiting in the accept queue are kept.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections.abc import Callable


class Listeners:
    def __init__(self, factory: Callable[[], asyncio.Protocol], backlog: Callable[[], int]) -> None:
        self.factory = factory
        self.backlog = backlog                  # tcp-backlog, read at each bind
        self.tcp: list[asyncio.base_events.Server] = []
        self.tls: list[asyncio.base_events.Server] = []
        self.unix: asyncio.base_events.Server | None = None
        self.unix_path = ""
        self.tls_context: ssl.SSLContext | None = None

    # -- binding -----------------------------------------------------------------------------
    def bind(self, bind: list[str], port: int) -> list[socket.socket]:
        """Bind and listen on every address of ``bind`` (``-addr`` = optional); all or none.
        An empty ``bind`` listens nowhere (as Redis's ``bind ""``), and so does one whose
        addresses are all optional and unavailable."""
        socks: list[socket.socket] = []
        try:
            for addr in bind:
                optional = addr.startswith("-")
                host = addr[1:] if optional else addr
                host = {"*": "0.0.0.0", "::*": "::"}.get(host, host)
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                s = socket.socket(family, socket.SOCK_STREAM)
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if family == socket.AF_INET6:
                        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    s.bind((host, port))
                    s.listen(self.backlog())
                    s.setblocking(False)
                except OSError as e:
                    s.close()
                    if optional:
                        continue
                    shown = addr[1:] if optional else addr
                    raise OSError(e.errno, f"Could not create server TCP listening socket "
                                           f"{shown}:{port}: bind: {e.strerror}") from e
                socks.append(s)
        except OSError:
            for s in socks:
                s.close()
            raise
        return socks

    def bind_unix(self, path: str, perm: int) -> socket.socket:
        """anetUnixServer: a stale socket file is removed first; chmod when perm is set."""
        try:
            os.unlink(path)
        except OSError:
            pass     # "don't care if this fails", as Redis
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(path)
            if perm:
                os.chmod(path, perm)
            s.listen(self.backlog())
            s.setblocking(False)
        except OSError as e:
            s.close()
            # (a path too long has no errno nor strerror: the exception's own text then)
            raise OSError(e.errno, f"{e.strerror or e}: {path}") from e
        return s

    # -- serving -----------------------------------------------------------------------------
    async def serve(self, socks: list[socket.socket], tls: bool = False) -> None:
        """Accept on ``socks``: plain TCP, or TLS with the current TLS context."""
        loop = asyncio.get_running_loop()
        for s in socks:
            srv = await loop.create_server(self.factory, sock=s,
                                           ssl=self.tls_context if tls else None)
            (self.tls if tls else self.tcp).append(srv)

    async def serve_unix(self, sock: socket.socket, path: str) -> None:
        loop = asyncio.get_running_loop()
        self.unix = await loop.create_unix_server(self.factory, sock=sock)
        self.unix_path = path

    def move(self, bind: list[str], port: int, tls: bool, loop: asyncio.AbstractEventLoop) -> None:
        """Listen on ``bind``:``port`` (0: not at all), then close the old listeners of that
        kind. Raises OSError, before anything changed, when the new addresses cannot be bound."""
        socks = self.bind(bind, port) if port else []
        old = self.tls if tls else self.tcp
        if tls:
            self.tls = []
        else:
            self.tcp = []
        for srv in old:
            srv.close()
        loop.create_task(self.serve(socks, tls))

    def use_tls_context(self, ctx: ssl.SSLContext, loop: asyncio.AbstractEventLoop) -> None:
        """New TLS connections use ``ctx``: each TLS listener is served again from a duplicate
        of its socket (closing the old server closes only its own copy)."""
        self.tls_context = ctx
        servers, self.tls = self.tls, []
        self._serve_again(servers, True, loop)

    def reserve(self, ctx: ssl.SSLContext | None, loop: asyncio.AbstractEventLoop) -> None:
        """Every TCP listener (plain or TLS) served again from a duplicate of its socket: with
        TLS and ``ctx``, or plain when None (the cluster bus's listener: tls-cluster)."""
        servers = [*self.tcp, *self.tls]
        self.tcp, self.tls = [], []
        self.tls_context = ctx
        self._serve_again(servers, ctx is not None, loop)

    def _serve_again(self, servers: list[asyncio.base_events.Server], tls: bool,
                     loop: asyncio.AbstractEventLoop) -> None:
        """``servers``' sockets served again (TLS or not) from duplicates: closing a server
        closes only its own copy, so connections waiting in the accept queue are kept."""
        socks = [socket.socket(fileno=os.dup(s.fileno())) for srv in servers
                 for s in (srv.sockets or ())]
        for srv in servers:
            srv.close()
        for s in socks:
            s.setblocking(False)
        loop.create_task(self.serve(socks, tls))

    def plain_fds(self) -> list[int]:
        """The plain TCP and the Unix listening sockets' descriptors (what a busy script's
        passes accept from: pyrepl.net.blocked)."""
        servers = (*self.tcp, *((self.unix,) if self.unix else ()))
        return [s.fileno() for srv in servers for s in (srv.sockets or ())]

    def close(self) -> None:
        for srv in (*self.tcp, *self.tls, *((self.unix,) if self.unix else ())):
            srv.close()
