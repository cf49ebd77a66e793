"""pyrepl.net.blocked's transport on a real socket pair and a real event loop: what the socket
does not take waits in order (the write pause at the high-water mark, the resume once drained),
a close keeps the unsent bytes for the loop's transport, an abort drops them and tells the
protocol at the loop's next pass."""

from __future__ import annotations

import asyncio
import socket

import pytest

from pyrepl.net.blocked import BlockedTransport
from pyrepl.net.loop import new_event_loop


class Recorder(asyncio.Protocol):
    """A protocol that notes what the transport tells it (and takes a handed-over transport
    as ClientProtocol does)."""

    def __init__(self) -> None:
        self.client = None
        self.events: list[str] = []
        self.prev: BlockedTransport | None = None

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.events.append("made")
        if self.prev is not None:
            self.prev.hand_over(transport)   # type: ignore[arg-type]

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")


def read_all(peer: socket.socket) -> bytes:
    peer.settimeout(5)
    out = bytearray()
    while chunk := peer.recv(1 << 20):
        out += chunk
    return bytes(out)


class Pair:
    """A socket pair on a fresh loop: ours (non-blocking) under a BlockedTransport, the peer."""

    def __init__(self, uv: bool) -> None:
        self.loop = new_event_loop(uv)
        self.ours, self.peer = socket.socketpair()
        self.ours.setblocking(False)
        self.proto = Recorder()
        self.t = BlockedTransport(self.ours, self.proto, self.loop)

    def close(self) -> None:
        self.ours.close()
        self.peer.close()
        self.loop.close()


@pytest.fixture(params=[True, False], ids=["uvloop", "asyncio"])
def pair(request: pytest.FixtureRequest):
    """(the server's loop, uvloop, and asyncio's own: the server's without uvloop)"""
    p = Pair(request.param)
    yield p
    p.close()


def test_unsent_bytes_wait_in_order_and_pause_then_resume_writing(pair: Pair) -> None:
    t, proto = pair.t, pair.proto
    data = bytes(range(256)) * 8192          # 2 MB: more than the socket buffers hold
    for i in range(0, len(data), 65536):
        t.write(data[i:i + 65536])
    assert t.get_write_buffer_size() > t.high
    assert proto.events == ["pause"]
    got = bytearray()
    pair.peer.settimeout(5)
    while len(got) < len(data):
        got += pair.peer.recv(1 << 20)
        t.flush()
    assert bytes(got) == data
    assert t.get_write_buffer_size() == 0 and proto.events == ["pause", "resume"]


def test_a_close_with_unsent_bytes_hands_them_to_the_loops_transport(pair: Pair) -> None:
    t, proto, loop = pair.t, pair.proto, pair.loop
    data = b"x" * (4 << 20)
    t.write(data)
    t.close()
    assert t.is_closing() and not t.gone and t.get_write_buffer_size() > 0
    t.write(b"after the close: dropped")
    proto.prev = t

    async def hand_over() -> bytes:
        await loop.connect_accepted_socket(lambda: proto, pair.ours)
        return await loop.run_in_executor(None, read_all, pair.peer)

    assert loop.run_until_complete(hand_over()) == data
    loop.run_until_complete(asyncio.sleep(0.05))
    # (the pauses: the 4 MB over this transport's mark, then over the loop's)
    assert [e for e in proto.events if e in ("made", "lost")] == ["made", "lost"]


def test_an_abort_drops_the_unsent_bytes_and_tells_the_protocol_later(pair: Pair) -> None:
    t, proto = pair.t, pair.proto
    t.write(b"y" * (4 << 20))
    t.abort()
    assert t.gone and t.get_write_buffer_size() == 0
    assert proto.events == ["pause"]        # (the protocol hears of it at the next pass)
    pair.loop.run_until_complete(asyncio.sleep(0))
    assert proto.events == ["pause", "lost"]
    assert len(read_all(pair.peer)) < 4 << 20    # the peer got what the socket took, then EOF
