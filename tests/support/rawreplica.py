"""A raw Redis 8 replica on real sockets: ``RdbchReplica`` holds the two connections of an
rdb-channel full sync (``Chan``), driven step by step with the bytes a Redis 8.6.3 replica
sends; ``Reader`` reads a channel into its buffer in the background."""

from __future__ import annotations

import threading

from tests.support.resp import RawConn, encode_command

OTHER_ID = "3b5dc16eeb8ff5bca1eb6f57b001d761aeb11511"


class Chan(RawConn):
    """One raw connection of the replica."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.lock = threading.Lock()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_exact(self, data: bytes) -> None:
        self.recv_until(lambda b: len(b) >= len(data))
        got = bytes(self.buf[:len(data)])
        del self.buf[:len(data)]
        assert got == data

    def closed_by_peer(self, timeout: float = 15.0) -> bool:
        """Read until the master closes the connection (True) or the timeout (False)."""
        try:
            self.recv_until(lambda b: False, timeout)
        except ConnectionError:
            return True
        except AssertionError:
            return False
        return False


class Reader(threading.Thread):
    """Reads a channel into its buffer in the background (a replica buffering the stream)."""

    def __init__(self, chan: Chan) -> None:
        super().__init__(daemon=True)
        self.chan = chan
        self.stop = False

    def run(self) -> None:
        s = self.chan.sock
        s.settimeout(0.2)
        while not self.stop:
            try:
                chunk = s.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                self.chan.eof = True
                break
            with self.chan.lock:
                self.chan.buf += chunk

    def take(self) -> bytes:
        with self.chan.lock:
            data = bytes(self.chan.buf)
            self.chan.buf.clear()
        return data

    def finish(self) -> None:
        self.stop = True
        self.join(5)


class RdbchReplica:
    """The two connections of a Redis 8 replica, driven step by step."""

    def __init__(self, port: int, listening_port: int = 7777, password: str | None = None) -> None:
        self.port = port
        self.listening_port = listening_port
        self.password = password
        self.main = Chan(port)
        self.rdb: Chan | None = None
        self.main_id = -1

    def handshake(self) -> None:
        m = self.main
        m.send(encode_command("PING"))
        if self.password:
            m.read_exact(b"-NOAUTH Authentication required.\r\n")
            m.send(encode_command("AUTH", self.password))
            m.read_exact(b"+OK\r\n")
        else:
            m.read_exact(b"+PONG\r\n")
        m.send(encode_command("REPLCONF", "listening-port", self.listening_port)
               + encode_command("REPLCONF", "capa", "eof", "capa", "psync2", "capa",
                                "rdb-channel-repl"))
        m.read_exact(b"+OK\r\n+OK\r\n")
        m.send(encode_command("PSYNC", OTHER_ID, "1"))
        line = m.read_line()
        assert line.startswith(b"+RDBCHANNELSYNC "), line
        self.main_id = int(line.split()[1])

    def open_rdb(self, psync: bool = True) -> None:
        r = self.rdb = Chan(self.port)
        hello = encode_command("REPLCONF", "capa", "eof", "rdb-only", "1", "rdb-channel", "1",
                               "main-ch-client-id", self.main_id, "listening-port",
                               self.listening_port)
        if self.password:
            r.send(encode_command("AUTH", self.password) + hello)
            r.read_exact(b"+OK\r\n+OK\r\n")
        else:
            r.send(hello)
            r.read_exact(b"+OK\r\n")
        if psync:
            r.send(encode_command("PSYNC", "?", "-1"))

    def read_fullresync(self, timeout: float = 30.0) -> tuple[int, bytes, int]:
        """Keepalives then +FULLRESYNC on the rdb channel: (keepalives, replid, offset)."""
        r = self.rdb
        assert r is not None
        r.recv_until(lambda b: b.lstrip(b"\n").startswith(b"+") and b"\r\n" in b, timeout)
        n = len(r.buf) - len(r.buf.lstrip(b"\n"))
        del r.buf[:n]
        parts = r.read_line().split()
        assert parts[0] == b"+FULLRESYNC", parts
        return n, parts[1], int(parts[2])

    def read_rdb(self) -> bytes:
        r = self.rdb
        assert r is not None
        eof = r.read_line()
        assert eof.startswith(b"$EOF:") and len(eof) == 45, eof
        mark = eof[5:]
        r.recv_until(lambda b: mark in b, 60)
        rdb, rest = bytes(r.buf).split(mark, 1)
        assert rest == b""
        r.buf.clear()
        return rdb

    def close(self) -> None:
        self.main.close()
        if self.rdb is not None:
            self.rdb.close()
