"""A raw RESP client: ``RawClient`` returns each reply's exact bytes (RESP2 or RESP3),
``RawConn`` is a socket with a receive buffer (the raw replicas build on it); encoding
commands and parsing replies and commands; one command on a fresh connection (``call``) and
INFO over a RawClient."""

from __future__ import annotations

import socket
import time


class RespError(Exception):
    pass


class RawClient:
    """Sends commands as RESP arrays and returns each reply's exact bytes (RESP2 or RESP3).

    A ``call`` whose reply did not come (a timeout) leaves the connection out of step: the
    next ``call`` raises instead of returning that late reply as its own (a poll that retries
    on errors, ``wait_for``, would otherwise read every later answer one command behind),
    until ``read_reply`` takes the late one."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.owed = False       # a call's reply not read

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
        if self.owed:
            raise RespError("the reply of an earlier call was never read: this connection's "
                            "replies would be one command behind")
        self.owed = True
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
        self.owed = False
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


def parse_command(buf: bytes) -> tuple[list[bytes], int] | None:
    """The first command a replica sent in ``buf`` (a RESP array of bulk strings): (argv, bytes
    used), or None while it is incomplete; anything but an array is an AssertionError."""
    if not buf.startswith(b"*"):
        if buf:
            raise AssertionError(f"not a RESP array: {buf[:40]!r}")
        return None
    eol = buf.find(b"\r\n")
    if eol < 0:
        return None
    n = int(buf[1:eol])
    pos = eol + 2
    argv = []
    for _ in range(n):
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(buf[pos + 1:eol])
        start = eol + 2
        if len(buf) < start + size + 2:
            return None
        argv.append(buf[start:start + size])
        pos = start + size + 2
    return argv, pos


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


class RawConn:
    """A raw socket to a server with a receive buffer: ``recv_until`` a condition on the
    buffer, ``read_line``, ``take`` it all (the raw replicas of the e2e tests build on it)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = bytearray()
        self.received = 0
        self.eof = False

    def recv_until(self, cond, timeout: float = 30.0) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while not cond(self.buf):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; have {len(self.buf)} bytes: {bytes(self.buf[:120])!r}"
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                self.eof = True
                raise ConnectionError("closed by the master")
            self.buf += chunk
            self.received += len(chunk)

    def read_line(self) -> bytes:
        self.recv_until(lambda b: b"\r\n" in b)
        i = self.buf.index(b"\r\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def take(self) -> bytes:
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def close(self) -> None:
        self.sock.close()


def call(port: int, *args: str | int, password: str | None = None) -> object:
    """One command on a fresh RawClient (after AUTH ``password``), its reply parsed."""
    with RawClient(port) as c:
        if password:
            assert c.call("AUTH", password) == b"+OK\r\n"
        return parse_reply(c.call(*args))


def info(c: RawClient, section: str = "") -> dict[str, str]:
    """``INFO [section]`` over a RawClient as ``{field: value}`` (all sections merged)."""
    return {k: v for fields in info_sections(c, section).values() for k, v in fields.items()}


def info_sections(c: RawClient, section: str = "") -> dict[str, dict[str, str]]:
    """``INFO [section]`` as ``{section title: {field: value}}``, in the server's order."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] = out.setdefault("", {})
    reply = c.call("INFO", section) if section else c.call("INFO")
    for line in parse_reply(reply).decode().split("\r\n"):
        if line.startswith("# "):
            current = out.setdefault(line[2:], {})
        elif ":" in line:
            key, value = line.split(":", 1)
            current[key] = value
    if not out[""]:
        del out[""]
    return out
