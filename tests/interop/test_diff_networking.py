"""Networking, side by side with redis-server 7.0.15 (Redis's networking.tcl): CONFIG SET bind
(a bad address refused with Redis's text, the old listeners kept; ``""`` listens nowhere until
set again), and protected-mode: with it on (the default) and no
password for the default user, a connection from anywhere but 127.0.0.1 / ::1 (127.0.0.2
included, as Redis's islocalClient) gets -DENIED and is closed, and is counted in
rejected_connections, not total_connections_received; a password (requirepass, or one given
to the default user by ACL) or protected-mode no lets it in."""

from __future__ import annotations

import re
import socket

import pytest

from tests.support.procs import ServerProcess
from tests.support.resp import RawClient, parse_reply


def _from(port: int, source: str, *argv: str) -> bytes:
    """What a connection from ``source`` gets for ``argv`` (PING by default), up to its end."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    try:
        s.sendall(b"".join(b"$%d\r\n%s\r\n" % (len(a), a.encode())
                           for a in (argv or ("PING",))).join((b"*%d\r\n" % len(argv or
                                                                             ("PING",)), b"")))
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


def _stats(admin: RawClient) -> tuple[int, int]:
    info = parse_reply(admin.call("INFO", "stats")).decode()
    return (int(re.search(r"total_connections_received:(\d+)", info).group(1)),  # type: ignore[union-attr]
            int(re.search(r"rejected_connections:(\d+)", info).group(1)))  # type: ignore[union-attr]


def test_protected_mode_as_redis(each_server: ServerProcess) -> None:
    with RawClient(each_server.port) as admin:
        admin.call("CONFIG", "SET", "protected-mode", "yes")    # (the test servers run with no)
        before = _stats(admin)
        denied = _from(each_server.port, "127.0.0.2")
        assert denied.startswith(b"-DENIED Redis is running in protected mode because "
                                 b"protected mode is enabled and no password is set for the "
                                 b"default user.") and denied.endswith(b"from the outside.\r\n")
        after = _stats(admin)
        assert after == (before[0], before[1] + 1)     # rejected, not counted as received
        assert _from(each_server.port, "127.0.0.1") == b"+PONG\r\n"
        admin.call("CONFIG", "SET", "requirepass", "secret")
        assert _from(each_server.port, "127.0.0.2", "AUTH", "secret") == b"+OK\r\n"
        admin.call("AUTH", "secret")
        admin.call("CONFIG", "SET", "requirepass", "")
        assert _from(each_server.port, "127.0.0.2") == denied
        admin.call("ACL", "SETUSER", "default", ">pw")
        assert _from(each_server.port, "127.0.0.2", "AUTH", "pw") == b"+OK\r\n"
        admin.call("ACL", "SETUSER", "default", "nopass")
        assert _from(each_server.port, "127.0.0.2") == denied
        admin.call("CONFIG", "SET", "protected-mode", "no")
        assert _from(each_server.port, "127.0.0.2") == b"+PONG\r\n"


def test_config_set_bind_as_redis(each_server: ServerProcess) -> None:
    port = each_server.port
    with RawClient(port) as admin:
        assert admin.call("CONFIG", "SET", "bind", "999.999.999.999") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to "
            b"specified addresses.\r\n")
        with RawClient(port) as c:                  # still listening where it was
            assert c.call("PING") == b"+PONG\r\n"
        assert admin.call("CONFIG", "SET", "bind", "") == b"+OK\r\n"
        assert parse_reply(admin.call("CONFIG", "GET", "bind")) == [b"bind", b""]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert admin.call("PING") == b"+PONG\r\n"     # (connections made before stay)
        assert admin.call("CONFIG", "SET", "bind", "127.0.0.1") == b"+OK\r\n"
        with RawClient(port) as c:
            assert c.call("PING") == b"+PONG\r\n"
