"""Server processes on 127.0.0.1: a free port, ``ServerProcess`` (one process with its own
temporary directory and log, stopped by its PID), pyrepl's command line, starting pyrepl,
redis-server (Debian's 7.0.15, or the Redis 8 build of ``make redis-src``) and valkey-server
(that script's Valkey 8.1 build), pyrepl and Redis side by side, a master with replicas and
their clients, and the sync events a pyrepl logged."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from tests.support.paths import REDIS8_SRC, VALKEY_SRC
from tests.support.resp import RawClient
from tests.support.waits import wait_for


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            data = s.recv(64)
            return data.startswith(b"+PONG") or data.startswith(b"-NOAUTH") \
                or data.startswith(b"-LOADING")
    except OSError:
        return False


class ServerProcess:
    """A server process on 127.0.0.1:port with its own temporary directory; as a context
    manager, stopped on the way out."""

    def __init__(self, argv: list[str], port: int, tmpdir: str, name: str,
                 env: dict[str, str] | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self.argv = argv
        self.port = port
        self.dir = tmpdir
        self.name = name
        self.env = env
        self.ready = ready or (lambda: _ping(self.port))
        self.logpath = os.path.join(tmpdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> ServerProcess:
        log = open(self.logpath, "ab")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir, env=self.env)
        try:
            wait_for(lambda: self.proc.poll() is not None or self.ready(), timeout,
                     what=f"{self.name} to accept connections")
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
        return self

    def log(self) -> str:
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._log.close()
        return p.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pyrepl_argv(role: str, port: int, tmpdir: str, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "pyrepl.cli.main", role, "--port", str(port), "--dir", tmpdir,
            "--bind", "127.0.0.1"]
    if "--save" not in extra:
        argv += ["--save", ""]
    if "--enable-debug-command" not in extra:
        argv += ["--enable-debug-command", "yes"]   # as Redis's own test suite runs its servers
    return argv + list(extra)


def start_pyrepl_on_rdb(directory: str) -> ServerProcess:
    """A pyrepl loading a copy of ``directory``'s dump.rdb (in a directory of its own)."""
    target = tempfile.mkdtemp(prefix="pyrepl-rdb-")
    shutil.copy(os.path.join(directory, "dump.rdb"), os.path.join(target, "dump.rdb"))
    return start_pyrepl(tmpdir=target)


def start_pyrepl(*extra: str, role: str = "master", tmpdir: str | None = None,
                 port: int | None = None) -> ServerProcess:
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="pyrepl-test-")
    port = port or free_port()
    return ServerProcess(pyrepl_argv(role, port, tmpdir, *extra), port, tmpdir,
                         f"pyrepl-{port}").start()


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def redis8_server_path() -> str | None:
    """The Redis 8 redis-server that ``make redis-src`` builds, or None when absent."""
    exe = os.path.join(REDIS8_SRC, "src", "redis-server")
    return exe if os.access(exe, os.X_OK) else None


def valkey_server_path() -> str | None:
    """The Valkey 8.1 valkey-server that ``make redis-src`` builds, or None when absent."""
    exe = os.path.join(VALKEY_SRC, "src", "valkey-server")
    return exe if os.access(exe, os.X_OK) else None


def start_valkey(*extra: str, tmpdir: str | None = None, port: int | None = None
                 ) -> ServerProcess:
    """The Valkey 8.1 build of ``make redis-src`` (the test is skipped without it), started
    as ``start_redis`` starts Redis."""
    exe = valkey_server_path()
    if exe is None:
        import pytest

        pytest.skip("the Valkey 8.1 build (make redis-src) is missing: "
                    ".cache/redis-src/valkey-8/src/valkey-server")
    return _start_server(exe, "valkey", extra, tmpdir, port)


def start_redis(*extra: str, tmpdir: str | None = None, port: int | None = None,
                version: int = 7) -> ServerProcess:
    """Debian's redis-server 7.0.15, or with ``version=8`` the Redis 8 build of ``make
    redis-src`` (the test is skipped without it)."""
    if version == 8:
        exe = redis8_server_path()
        if exe is None:
            import pytest

            pytest.skip("the Redis 8 build (make redis-src) is missing: "
                        ".cache/redis-src/redis-8/src/redis-server")
    else:
        exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed (the test command installs it)")
    return _start_server(exe, "redis", extra, tmpdir, port)


def _start_server(exe: str, name: str, extra: tuple[str, ...], tmpdir: str | None,
                  port: int | None) -> ServerProcess:
    tmpdir = tmpdir or tempfile.mkdtemp(prefix=f"{name}-test-")
    port = port or free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmpdir,
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no"]
    if "--save" not in extra:
        argv += ["--save", ""]
    argv += list(extra)
    return ServerProcess(argv, port, tmpdir, f"{name}-{port}").start()


@contextmanager
def side_by_side(*flags: str) -> Iterator[list[ServerProcess]]:
    """pyrepl and redis-server, both started with ``flags``; stopped on the way out."""
    with start_pyrepl(*flags) as ours, start_redis(*flags) as theirs:
        yield [ours, theirs]


@contextmanager
def connected(master: ServerProcess, replicas: list[ServerProcess]
              ) -> Iterator[tuple[RawClient, list[RawClient]]]:
    """A RawClient of ``master`` and one of each replica; on the way out the clients are
    closed and every server is stopped."""
    with ExitStack() as stack:
        for s in (master, *replicas):
            stack.enter_context(s)
        m = stack.enter_context(RawClient(master.port))
        yield m, [stack.enter_context(RawClient(r.port)) for r in replicas]


def sync_events(proc: ServerProcess) -> list[dict]:
    """The sync events a pyrepl process wrote to ``sync.ndjson`` in its directory (none before
    the file exists)."""
    path = os.path.join(proc.dir, "sync.ndjson")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
