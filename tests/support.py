"""Test support: free ports, polling waits, real server processes, a raw RESP client.

Everything here talks to real processes over real loopback sockets.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.02,
             what: str = "condition") -> object:
    """Poll ``cond`` until it returns a truthy value; raise AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - keep polling until the deadline
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


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
    """A server process on 127.0.0.1:port with its own temporary directory."""

    def __init__(self, argv: list[str], port: int, tmpdir: str, name: str) -> None:
        self.argv = argv
        self.port = port
        self.dir = tmpdir
        self.name = name
        self.logpath = os.path.join(tmpdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> ServerProcess:
        log = open(self.logpath, "ab")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir)
        try:
            wait_for(lambda: self.proc.poll() is not None or _ping(self.port), timeout,
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


def pyrepl_argv(role: str, port: int, tmpdir: str, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "pyrepl.cli.main", role, "--port", str(port), "--dir", tmpdir,
            "--bind", "127.0.0.1"]
    if "--save" not in extra:
        argv += ["--save", ""]
    return argv + list(extra)


def start_pyrepl(*extra: str, role: str = "master", tmpdir: str | None = None,
                 port: int | None = None) -> ServerProcess:
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="pyrepl-test-")
    port = port or free_port()
    return ServerProcess(pyrepl_argv(role, port, tmpdir, *extra), port, tmpdir,
                         f"pyrepl-{port}").start()


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def start_redis(*extra: str, tmpdir: str | None = None, port: int | None = None) -> ServerProcess:
    exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed (the test command installs it)")
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="redis-test-")
    port = port or free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmpdir,
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no"]
    if "--save" not in extra:
        argv += ["--save", ""]
    argv += list(extra)
    return ServerProcess(argv, port, tmpdir, f"redis-{port}").start()


# -- a raw RESP client ---------------------------------------------------------------------

class RespError(Exception):
    pass


class RawClient:
    """Sends commands as RESP arrays and returns each reply's exact bytes (RESP2 or RESP3)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *a: object) -> None:
        self.close()

    def send(self, *args: bytes | str | int) -> None:
        self.sock.sendall(encode_command(*args))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: bytes | str | int) -> bytes:
        self.send(*args)
        return self.read_reply()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by server")
        self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _skip(self, pos: int) -> int:
        """Return the end position of the reply starting at pos (reading more as needed)."""
        while len(self.buf) <= pos:
            self._fill()
        t = self.buf[pos:pos + 1]
        eol = self._line(pos)
        head = self.buf[pos + 1:eol]
        end = eol + 2
        if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return end
        if t in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return end
            while len(self.buf) < end + n + 2:
                self._fill()
            return end + n + 2
        if t in (b"*", b"~", b">", b"%", b"|"):
            n = int(head)
            if n < 0:
                return end
            count = n * 2 if t in (b"%", b"|") else n
            p = end
            for _ in range(count):
                p = self._skip(p)
            if t == b"|":  # attribute: followed by the real reply
                p = self._skip(p)
            return p
        raise RespError(f"bad reply type byte {t!r} in {self.buf[pos:pos + 40]!r}")

    def read_reply(self) -> bytes:
        end = self._skip(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply


def encode_command(*args: bytes | str | int) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


def parse_reply(data: bytes) -> object:
    """Decode one raw reply into Python values (errors become RespError instances)."""
    val, _ = _parse(data, 0)
    return val


def _parse(data: bytes, pos: int) -> tuple[object, int]:
    t = data[pos:pos + 1]
    eol = data.index(b"\r\n", pos)
    head = data[pos + 1:eol]
    end = eol + 2
    if t == b"+":
        return head, end
    if t == b"-":
        return RespError(head.decode()), end
    if t == b":":
        return int(head), end
    if t == b"_":
        return None, end
    if t == b",":
        return float(head), end
    if t == b"#":
        return head == b"t", end
    if t == b"(":
        return int(head), end
    if t in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return None, end
        return data[end:end + n], end + n + 2
    if t in (b"*", b"~", b">"):
        n = int(head)
        if n < 0:
            return None, end
        out = []
        p = end
        for _ in range(n):
            v, p = _parse(data, p)
            out.append(v)
        return out, p
    if t == b"%":
        n = int(head)
        out2 = []
        p = end
        for _ in range(n):
            k, p = _parse(data, p)
            v, p = _parse(data, p)
            out2.append((k, v))
        return dict(out2), p
    raise RespError(f"bad type {t!r}")
