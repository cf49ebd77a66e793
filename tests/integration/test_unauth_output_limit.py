"""An unauthenticated client that does not read its replies is closed once they pass 1 KB,
as Redis's checkClientOutputBufferLimits closes it (auth.tcl "For unauthenticated clients
output buffer is limited"); side by side with redis-server 7.0.15. Once authenticated, the
client's replies are limited as any normal client's (not at all by default)."""

from __future__ import annotations

import socket
import time

import pytest
import redis

from tests.support.procs import redis_server_path, start_pyrepl, start_redis

SET = b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$1\r\n5\r\n"


def _flood(port: int, auth: bool) -> tuple[bool, int]:
    """(closed by the server, commands sent) for up to 1M SETs without reading a reply."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        if auth:
            s.sendall(b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n")
        s.settimeout(5)
        sent = 0
        batch = SET * 1000
        deadline = time.monotonic() + 30
        while sent < 1_000_000 and time.monotonic() < deadline:
            try:
                s.sendall(batch)
            except (BrokenPipeError, ConnectionResetError):
                return True, sent
            except TimeoutError:
                break       # the server stopped reading us: still connected
            sent += 1000
        return False, sent
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["pyrepl", "redis"])
def test_an_unauthenticated_flood_is_closed_an_authenticated_one_is_not(kind: str) -> None:
    if kind == "redis" and redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    start = start_pyrepl if kind == "pyrepl" else start_redis
    with start("--requirepass", "secret") as srv:
        closed, sent = _flood(srv.port, auth=False)
        assert closed, sent
        assert "overcoming of output buffer limits" in srv.log()
        closed, sent = _flood(srv.port, auth=True)
        assert not closed
        assert redis.Redis(port=srv.port, password="secret").ping()
