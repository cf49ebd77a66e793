"""`unixsocket` / `unixsocketperm`: pyrepl listens on a Unix socket as redis-server does.

redis-cli -s, redis-benchmark -s and redis-py's ``unix_socket_path`` work; clients on it are
CLIENT LIST ``flags=U`` with ``addr=<path>:0`` (as real Redis shows them); the socket file gets
``unixsocketperm``'s mode, a stale file at the path is replaced, the file is removed at
shutdown, and ``port 0`` serves the Unix socket alone.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import tempfile
from typing import Any

import pytest
import redis

from tests.support.procs import ServerProcess, free_port, redis_server_path

pytestmark = [pytest.mark.slow]


def unix_ping(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect(path)
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start(kind: str, tmp: str, path: str, *extra: str, port: int = 0) -> ServerProcess:
    if kind == "pyrepl":
        argv = [sys.executable, "-m", "pyrepl.cli.main", "master", "--port", str(port),
                "--dir", tmp, "--save", "", "--unixsocket", path, *extra]
    else:
        exe = redis_server_path()
        if exe is None:
            pytest.skip("redis-server is not installed (the test command installs it)")
        argv = [exe, "--port", str(port), "--dir", tmp, "--save", "", "--daemonize", "no",
                "--unixsocket", path, *extra]
    return ServerProcess(argv, port, tmp, f"{kind}-unix", ready=lambda: unix_ping(path)).start()


def client_line(path: str) -> str:
    out = subprocess.run(["redis-cli", "-s", path, "CLIENT", "LIST"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    return out.strip().splitlines()[0]


@pytest.mark.parametrize("kind", ["redis", "pyrepl"])
def test_unix_socket_serves_clients_as_redis(tmp_path: Any, kind: str) -> None:
    # a short path: Redis writes a client's addr ("<path>:0") into 78 bytes, so a long
    # tmp_path (pytest-xdist's worker directory) would cut the ":0" off its CLIENT LIST line
    path = os.path.join(tempfile.mkdtemp(prefix="us-"), "s.sock")
    srv = start(kind, str(tmp_path), path, "--unixsocketperm", "700")
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
        cli = ["redis-cli", "-s", path]
        assert subprocess.run([*cli, "SET", "k", "v"], capture_output=True, text=True,
                              timeout=10).stdout.strip() == "OK"
        assert subprocess.run([*cli, "GET", "k"], capture_output=True, text=True,
                              timeout=10).stdout.strip() == "v"
        line = client_line(path)
        fields = dict(f.split("=", 1) for f in line.split(" "))
        assert fields["addr"] == f"{path}:0" and fields["laddr"] == f"{path}:0"
        assert fields["flags"] == "U"
        r = redis.Redis(unix_socket_path=path)
        assert r.incr("n") == 1 and r.get("k") == b"v"
        assert "unixsocket" in r.config_get("unixsocket*")
        assert r.config_get("unixsocketperm") == {"unixsocketperm": "700"}
        r.close()
        bench = subprocess.run(["redis-benchmark", "-s", path, "-n", "2000", "-q", "-t",
                                "set,get"], capture_output=True, text=True, timeout=120)
        assert bench.returncode == 0, bench.stderr
        assert re.search(r"SET: [\d.]+ requests per second", bench.stdout), bench.stdout
        assert re.search(r"GET: [\d.]+ requests per second", bench.stdout), bench.stdout
        assert subprocess.run([*cli, "SHUTDOWN"], capture_output=True, timeout=10) is not None
        assert srv.proc is not None
        srv.proc.wait(15)
        assert srv.proc.returncode == 0
        assert not os.path.exists(path)                       # removed at shutdown
        assert "Removing the unix socket file." in srv.log()
    finally:
        srv.stop()


def test_a_long_paths_client_addr_is_cut_as_redis_cuts_it() -> None:
    """Redis writes "<path>:0" into NET_ADDR_STR_LEN (78) bytes: a path of 90 bytes shows
    its first 77 in CLIENT LIST's addr and laddr, on both servers alike."""
    base = tempfile.mkdtemp(prefix="us-")
    sub = os.path.join(base, "d" * (90 - len(base) - len("/s.sock") - 1))
    seen = []
    for kind in ("redis", "pyrepl"):
        d = os.path.join(sub, kind[0])
        os.makedirs(d)
        path = os.path.join(d, "s.sock")
        assert len(path) == 92
        srv = start(kind, d, path)
        try:
            fields = dict(f.split("=", 1) for f in client_line(path).split(" "))
            seen.append((fields["addr"], fields["laddr"]))
        finally:
            srv.stop()
    assert seen[0] == seen[1]
    assert seen[0][0] == seen[0][1] and seen[0][0] == path[:77]


def test_stale_socket_file_is_replaced_and_tcp_works_beside(tmp_path: Any) -> None:
    path = str(tmp_path / "stale.sock")
    with open(path, "w") as f:
        f.write("left over by a crashed server")
    port = free_port()
    srv = start("pyrepl", str(tmp_path), path, "--bind", "127.0.0.1", port=port)
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert redis.Redis(unix_socket_path=path).ping()
        with redis.Redis(port=port) as tcp:
            assert tcp.ping()
            flags = {line["addr"]: line["flags"] for line in tcp.client_list()}
            assert all(f == "N" for a, f in flags.items() if not a.startswith("/"))
        assert f"The server is now ready to accept connections at {path}" in srv.log()
    finally:
        srv.stop()


def test_debug_local_allows_the_unix_socket(tmp_path: Any) -> None:
    """enable-debug-command local: a Unix-socket client is local."""
    path = str(tmp_path / "d.sock")
    srv = start("pyrepl", str(tmp_path), path, "--enable-debug-command", "local")
    try:
        r = redis.Redis(unix_socket_path=path)
        assert r.execute_command("DEBUG", "SLEEP", "0") in (b"OK", "OK", True)
        r.close()
    finally:
        srv.stop()
