"""One cluster bus connection, sans-io (Redis's clusterLink) — shared by both directions.

Theory of operation: the I/O shell makes a :class:`Link` for every bus connection: one this
node opens to a known node (``inbound`` False: the state asks for it, the shell connects to
``node.ip:node.cport`` and says ``connected`` or ``failed``), or one another node opened to
ours (``inbound`` True: its node is learnt from the first message). Bytes read go to
:meth:`receive_data`; the state takes whole frames with :meth:`next_frame` and queues its
messages with :meth:`send`; the shell writes :meth:`data_to_send` and closes the socket once
``closed`` is set (by the state, or by a framing error). A link never outlives its socket.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.cluster.wire import BusError, FrameReader

if TYPE_CHECKING:
    from pyrepl.cluster.node import ClusterNode


class Link:
    __slots__ = ("id", "ctime", "node", "inbound", "reader", "_out", "out_bytes", "unsent",
                 "closed", "connected", "peer_ip", "local_ip", "error")

    _next_id = 0

    def __init__(self, node: ClusterNode | None, now: int) -> None:
        Link._next_id += 1
        self.id = Link._next_id
        self.ctime = now
        self.node = node
        self.inbound = node is None
        self.reader = FrameReader()
        self._out: list[bytes] = []
        self.out_bytes = 0
        # what the shell took (data_to_send) and could not write yet: its socket's buffer
        # (the peer reads too slowly, or not at all); it says so after each write
        self.unsent = 0
        self.closed = False
        self.connected = self.inbound       # an outbound link: once the shell says so
        self.peer_ip = ""                   # the other end's address (the shell sets it)
        self.local_ip = ""                  # this end's address on the socket
        self.error = ""                     # why it was closed, for the log

    def __repr__(self) -> str:
        who = self.node.name[:8] if self.node is not None else "?"
        return f"<Link {self.id} {'from' if self.inbound else 'to'} {who}>"

    def receive_data(self, data: bytes) -> None:
        self.reader.receive_data(data)

    def next_frame(self) -> bytes | None:
        """The next whole message, None when there is none yet; a bad header closes the
        link (``error`` says why) and gives None."""
        if self.closed:
            return None
        try:
            return self.reader.next_frame()
        except BusError as e:
            self.close(str(e))
            return None

    def send(self, frame: bytes) -> None:
        if not self.closed:
            self._out.append(frame)
            self.out_bytes += len(frame)

    @property
    def pending_bytes(self) -> int:
        """The link's send buffer as Redis counts it (send_msg_queue_mem): messages queued
        and not written to the peer, here or in the shell's buffer."""
        return self.out_bytes + self.unsent

    def data_to_send(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        self.out_bytes = 0
        return out

    def close(self, why: str = "") -> None:
        self.closed = True
        if why and not self.error:
            self.error = why
        self._out.clear()
        self.out_bytes = 0
