"""A transport that resumes writing (ClientProtocol.resume_writing) while the AOF buffer holds
what was not written yet: the client's replies wait for the flush that writes the AOF first
(appendfsync always: no reply may leave before its write is in the AOF, Redis's aof.tcl
"AOF fsync always barrier issue"); with nothing pending in the AOF they go at once."""

from __future__ import annotations

from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.net.server import ClientProtocol


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else None


class Server:
    def __init__(self) -> None:
        self.core = ServerCore(Config.load(None, [("save", [""])]), now_ms=1)
        self.flushes = 0

    def schedule_flush(self) -> None:
        self.flushes += 1


def _paused_client_with_a_reply() -> tuple[Server, ClientProtocol, Transport]:
    server = Server()
    p = ClientProtocol(server)  # type: ignore[arg-type]
    t = Transport()
    p.connection_made(t)  # type: ignore[arg-type]
    c = p.client
    assert c is not None
    p.pause_writing()
    c.out.append(b":1\r\n")
    return server, p, t


def test_a_resumed_transport_waits_for_the_aof_to_be_written() -> None:
    server, p, t = _paused_client_with_a_reply()
    core = server.core
    core.aof_on = True
    core.aof.writer.buf += b"*1\r\n$4\r\nINCR\r\n"     # (written by the next flush)
    p.resume_writing()
    assert t.writes == [] and core.pending_flush == [p.client] and server.flushes == 1


def test_a_resumed_transport_writes_at_once_with_nothing_for_the_aof() -> None:
    server, p, t = _paused_client_with_a_reply()
    p.resume_writing()
    assert t.writes == [b":1\r\n"] and server.flushes == 0
