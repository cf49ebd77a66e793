"""The typed ports between the sans-io replication sides and the I/O shell (``pyrepl.net``).

Each side asks the shell for I/O through a port (``core.host.master_io`` /
``core.host.replica_io``), and the shell reports what happened through the side's events:

==========================  ===================================  ==================================
port                        implemented by                       test fakes
==========================  ===================================  ==================================
:class:`MasterIOPort`       ``pyrepl.net.master_io.MasterIO``    ``fakes.WireIO`` (one master's
                                                                 wire), ``support.MemMasterIO``
                                                                 (a node of the in-memory network)
:class:`ReplicaIOPort`      ``pyrepl.net.replica_io.ReplicaIO``  ``support.MemReplicaIO``
:class:`ReplicaLinkEvents`  ``replication.replica.ReplicaSide``  (the side itself)
==========================  ===================================  ==================================

tests/unit/test_ports.py checks that each of them has every method of its port.

A connection of the replica side is named by the token the side gave when it asked for it, so
a late event of a connection the side has since abandoned is recognised and ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyrepl.core.client import Client


class MasterIOPort(Protocol):
    """What the master side needs done with sockets, files and the snapshot child."""

    def buffered(self, c: Client) -> int:
        """Bytes the client's transport has not written to the socket yet."""

    def prepare_handover(self, c: Client) -> bool:
        """Push the client's pending output to its transport; True when nothing is left
        buffered in this process (another process may then write to the connection)."""

    def start_socket_snapshot(self, targets: list[tuple[Client, bytes]],
                              payload: Callable[[], Iterable[bytes]], trailer: bytes,
                              timeout_ms: int) -> int:
        """Fork a child writing each target's preamble, the payload and the trailer to the
        target's connection; its pid (OSError when it cannot start)."""

    def drop_socket_target(self, c: Client) -> None:
        """End a replica's connection that a snapshot child is writing to."""

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        """The child exited: {client id: (ok, bytes, error)} per target."""

    def socket_target_done(self, pid: int, cid: int) -> bool:
        """The child reported the whole payload and trailer written to client ``cid``."""

    def reap_child(self, pid: int) -> None:
        """Report the child's exit now (``core.child_exited``) if it has exited."""

    def send_bulk(self, c: Client, path: str) -> int:
        """Start sending ``$<len>\\r\\n`` and the file at ``path``; its size. The end is
        reported with ``MasterSide.bulk_sent``."""

    def cancel_bulk(self, c: Client) -> None:
        """Stop sending a file to ``c``."""


class ReplicaIOPort(Protocol):
    """The replica side's connections to its master: the main channel and the rdb channel."""

    def connect(self, token: int, host: str, port: int) -> None:
        """Open the main channel (dropping both channels first); events carry ``token``."""

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        """Open the rdb channel (Redis 8's second connection)."""

    def send(self, token: int, data: bytes) -> None: ...

    def close(self, token: int) -> None: ...

    def pause_reading(self, token: int) -> None: ...

    def resume_reading(self, token: int) -> None: ...

    def request_drain(self, token: int) -> None:
        """Call ``drain_step(token)`` soon (once per request)."""

    def link_info(self, token: int) -> tuple[str, str, int, Any] | None:
        """(peer address, local address, fd, transport) of the connection."""


class ReplicaLinkEvents(Protocol):
    """What the shell reports to the replica side, per channel."""

    def on_connected(self, token: int) -> None: ...

    def on_connect_failed(self, token: int, error: str) -> None: ...

    def on_data(self, token: int, data: bytes) -> None: ...

    def on_closed(self, token: int, error: str) -> None: ...

    def on_rdb_connected(self, token: int) -> None: ...

    def on_rdb_connect_failed(self, token: int, error: str) -> None: ...

    def on_rdb_data(self, token: int, data: bytes) -> None: ...

    def on_rdb_closed(self, token: int, error: str) -> None: ...

    def drain_step(self, token: int) -> None: ...
