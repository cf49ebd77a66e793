"""MIGRATE's connections to other instances (Redis's migrate_cached_sockets): blocking sockets,
one per host:port, kept for the next MIGRATE and closed after 10 idle seconds or when 64 are
open and another is needed (one dropped at random), as cluster.c's migrateGetSocket does.

MIGRATE blocks the server while it talks to the target, as Redis's does (connSyncWrite /
connSyncReadLine with the command's timeout): the event loop is not involved.
"""

from __future__ import annotations

import random
import socket
import time

CACHE_ITEMS = 64       # MIGRATE_SOCKET_CACHE_ITEMS
CACHE_TTL = 10         # MIGRATE_SOCKET_CACHE_TTL, seconds


class MigrateLink:
    """One cached connection: ``last_dbid`` the database its last SELECT chose (-1: none)."""

    __slots__ = ("sock", "last_dbid", "last_use", "_buf")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.last_dbid = -1
        self.last_use = time.time()
        self._buf = b""

    def send(self, data: bytes, timeout_ms: int) -> None:
        """All of ``data`` in 64 KB writes; OSError (TimeoutError on the timeout)."""
        self.sock.settimeout(timeout_ms / 1000)
        for pos in range(0, len(data), 64 * 1024):
            self.sock.sendall(data[pos:pos + 64 * 1024])

    def read_line(self, timeout_ms: int, limit: int = 1024) -> bytes:
        """One reply line without its CRLF (connSyncReadLine: at most ``limit`` bytes);
        OSError (TimeoutError on the timeout), ConnectionError when the peer closed."""
        self.sock.settimeout(timeout_ms / 1000)
        while b"\n" not in self._buf:
            if len(self._buf) >= limit:
                break
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("connection closed by the target")
            self._buf += chunk
        line, sep, rest = self._buf.partition(b"\n")
        if not sep:
            line, rest = self._buf[:limit], self._buf[limit:]
        self._buf = rest
        return line.rstrip(b"\r")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class MigrateLinks:
    """The cache, by ``host:port``."""

    def __init__(self) -> None:
        self.links: dict[bytes, MigrateLink] = {}

    def get(self, host: bytes, port: bytes, timeout_ms: int) -> MigrateLink:
        """The cached link or a new one (OSError when it cannot connect within the timeout)."""
        name = host + b":" + port
        link = self.links.get(name)
        if link is not None:
            link.last_use = time.time()
            return link
        if len(self.links) >= CACHE_ITEMS:
            victim = random.choice(list(self.links))
            self.links.pop(victim).close()
        sock = socket.create_connection((host.decode("latin-1"), int(port)),
                                        timeout=timeout_ms / 1000)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = self.links[name] = MigrateLink(sock)
        return link

    def close(self, host: bytes, port: bytes) -> None:
        link = self.links.pop(host + b":" + port, None)
        if link is not None:
            link.close()

    def close_idle(self, now_s: float) -> None:
        """migrateCloseTimedoutSockets: the links unused for more than 10 seconds."""
        for name, link in list(self.links.items()):
            if now_s - link.last_use > CACHE_TTL:
                del self.links[name]
                link.close()

    def __len__(self) -> int:
        return len(self.links)
