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
    from pyrepl.config import Config
    from pyrepl.keyspace.db import Database
    from pyrepl.replication.manager import Replication
    from pyrepl.resp.reader import RespReader


class MasterIOPort(Protocol):
    """What the master side needs done with sockets, files and the snapshot child."""

    def buffered(self, c: ReplClient) -> int:
        """Bytes the client's transport has not written to the socket yet."""

    def prepare_handover(self, c: ReplClient) -> bool:
        """Push the client's pending output to its transport; True when nothing is left
        buffered in this process (another process may then write to the connection)."""

    def stream_started(self, c: ReplClient) -> None:
        """The replica's stream goes to its socket from now on: its transport is to hold no
        more than what one hand-over gave it, so that what the socket cannot take waits in
        the shared buffer (counted there, as Redis's replica output) and not as views in the
        transport, each of which keeps its block alive after the backlog let it go."""

    def set_sync_bandwidth(self, bps: int) -> None:
        """repl-sync-max-bandwidth: each replica's snapshot transfer (a child's and a file's,
        those under way too) at most ``bps`` bytes/s from now on; 0: unpaced."""

    def start_socket_snapshot(self, targets: list[tuple[ReplClient, bytes]],
                              payload: Callable[[], Iterable[bytes]], trailer: bytes,
                              timeout_ms: int, keep: tuple[str, str, int] | None = None) -> int:
        """Fork a child writing each target's preamble, the payload and the trailer to the
        target's connection; its pid (OSError when it cannot start). ``keep`` (id,
        directory, tail): the child keeps a copy of the payload and the trailer under that id
        (an unlinked file in the directory), whole once the child ended: the last ``tail``
        bytes it wrote are held in memory, and the copy starts that far back from where the
        child was when a target failed (or at the end); 0: it is the whole payload."""

    def drop_socket_target(self, c: ReplClient) -> None:
        """End a replica's connection that a snapshot child is writing to."""

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        """The child exited: {client id: (ok, bytes, error)} per target."""

    def socket_target_done(self, pid: int, cid: int) -> bool:
        """The child reported the whole payload and trailer written to client ``cid``."""

    def reap_child(self, pid: int) -> None:
        """Report the child's exit now (``core.child_exited``) if it has exited."""

    def send_bulk(self, c: ReplClient, path: str) -> int:
        """Start sending ``$<len>\\r\\n`` and the file at ``path``; its size. The end is
        reported with ``MasterSide.bulk_sent``."""

    def cancel_bulk(self, c: ReplClient) -> None:
        """Stop sending a file to ``c``."""

    def keep_file(self, rid: str, path: str) -> None:
        """Keep the file at ``path`` as it is now (opened: a file renamed over it later changes
        nothing) under the id ``rid``."""

    def kept_size(self, rid: str) -> int:
        """The bytes of the copy kept as ``rid``; -1 when there is none, or it is not whole
        yet."""

    def kept_base(self, rid: str) -> int:
        """The first payload byte the copy kept as ``rid`` holds; -1 when there is no copy,
        or the child has not started it yet."""

    def kept_ids(self) -> list[str]:
        """The ids of the copies kept (whole or being written)."""

    def drop_kept(self, rid: str) -> None:
        """Free the copy kept as ``rid``."""

    def send_kept(self, c: ReplClient, rid: str, offset: int, header: bytes) -> None:
        """Start sending ``header`` and the copy kept as ``rid`` from payload byte ``offset``
        (not before its base) to its end, a copy its child still writes as it grows; the end
        is reported with ``MasterSide.bulk_sent`` (OSError: no such copy, or none holding
        that byte)."""


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


# -- what replication asks of the server ----------------------------------------------------
# The core (pyrepl.core.server.ServerCore) satisfies ReplicationHost and its clients
# (pyrepl.core.client.Client) ReplClient; replication imports neither (the layers contract,
# setup.cfg), and tests/unit/ports_conformance.py has mypy check both.


class ReplLog(Protocol):
    """The server log (Redis's serverLog levels replication writes at)."""

    def debug(self, msg: str) -> None: ...
    def verbose(self, msg: str) -> None: ...
    def notice(self, msg: str) -> None: ...
    def warning(self, msg: str) -> None: ...


class ReplStats(Protocol):
    """The INFO stats counters replication moves."""

    net_output_bytes: int
    net_repl_input_bytes: int
    net_repl_output_bytes: int
    sync_full: int
    sync_partial_ok: int
    sync_partial_err: int
    client_outbuf_limit_disconnections: int
    unexpected_error_replies: int
    repl_spilled_bytes: int
    repl_resumed_syncs: int
    repl_resumed_bytes: int


class ReplCommand(Protocol):
    """What the replication guard reads of a command (READONLY, NOREPLICAS)."""

    @property
    def name(self) -> str: ...
    @property
    def write(self) -> bool: ...
    @property
    def flags(self) -> frozenset[str]: ...


class ReplClient(Protocol):
    """What replication reads and moves of a client: a replica's connection on a master, the
    master's stream on a replica (pyrepl.core.client.Client)."""

    id: int
    kind: str            # normal | replica | master
    flags: str           # CLIENT LIST letters replication adds: S, M
    repl: Any            # the link record replication attaches (master/states.ReplicaLink)
    db: Database
    reader: RespReader
    out: list[bytes]
    transport: Any
    stream: Any
    addr: str
    laddr: str
    fd: int
    closed: bool
    close_after_reply: bool
    last_interaction_ms: int
    last_cmd: Any
    net_in: int
    net_out: int
    woff: int
    in_multi: bool
    multi_queue: list[tuple[Any, list[bytes]]]
    multi_error: bool
    blocked: Any         # the blocked record (core/blocking.py): CLIENT PAUSE's Postponed

    def pending_output(self) -> int: ...
    def data_to_send(self) -> bytes: ...
    def info_line(self) -> str: ...
    def describe(self) -> str: ...


class ReplHostOS(Protocol):
    """What replication asks of the operating system through the shell (core.Host)."""

    master_io: MasterIOPort | None
    replica_io: ReplicaIOPort | None

    def close_client(self, client: Any) -> None: ...
    def key_save_delay_hook(self) -> Callable[[], None] | None: ...
    def sleep(self, seconds: float) -> None: ...
    def panic(self, message: str) -> None: ...
    def exit_now(self, code: int) -> None: ...


class ReplPersistence(Protocol):
    """The RDB file's side of the core (core.persistence): a disk full sync's BGSAVE, what a
    replica's load records."""

    started_ms: int
    last_try_ms: int
    last_load_keys_loaded: int
    last_load_keys_expired: int
    loaded_repl_stream_db: int | None

    def bgsave(self) -> str | None: ...
    def rdb_path(self) -> str: ...
    def rdb_aux(self) -> dict[str, bytes | str | int]: ...


class ReplAof(Protocol):
    """The AOF as a replica's load and stream see it (core.aof)."""

    @property
    def on(self) -> bool: ...
    @property
    def writer(self) -> Any: ...
    def start(self, in_exec: bool = False) -> bool: ...
    def stop(self) -> None: ...
    def before_reply(self) -> None: ...


class ReplBlocking(Protocol):
    """WAIT's blocked clients and the replica's disconnect of blocked clients (core.blocking)."""

    def block_for_acks(self, c: Any, offset: int, numreplicas: int, deadline: int,
                       on_timeout: Callable[[], object]) -> None: ...
    @staticmethod
    def acks_awaited(c: Any) -> Any: ...
    def disconnect_all(self) -> None: ...
    def release(self, c: Any) -> None: ...


class ReplPause(Protocol):
    """CLIENT PAUSE WRITE, as FAILOVER holds it (core.pause)."""

    WRITE: int

    def start(self, kind: int, end_ms: int, purpose: str = ...) -> None: ...
    def stop(self, purpose: str = ...) -> None: ...


class ReplicationHost(Protocol):
    """What the replication layer reads and calls of the server (ServerCore satisfies it).
    Clients are ``Any`` where the core's own type (pyrepl.core.client.Client, a ReplClient)
    goes in: a parameter typed ReplClient would not accept the core's narrower one."""

    run_id: str
    replid: str
    port: int
    now_ms: int
    dirty: int
    rdb_child_pid: int
    rdb_child_purpose: str
    total_forks: int
    expiry_deletes: bool
    async_loading: bool
    applying_master_stream: bool
    stream_live: bool
    aof_on: bool
    replication: Replication | None
    aux_fields: Callable[[], dict[str, bytes | str | int]] | None

    @property
    def config(self) -> Config: ...
    @property
    def log(self) -> ReplLog: ...
    @property
    def stats(self) -> ReplStats: ...
    @property
    def host(self) -> ReplHostOS: ...
    @property
    def persistence(self) -> ReplPersistence: ...
    @property
    def aof(self) -> ReplAof: ...
    @property
    def blocking(self) -> ReplBlocking: ...
    @property
    def pause(self) -> ReplPause: ...
    @property
    def dbs(self) -> list[Database]: ...
    @property
    def clients(self) -> dict[int, Any]: ...
    @property
    def pending_flush(self) -> list[Any]: ...
    @property
    def replica_keys_with_expire(self) -> dict[bytes, int]: ...
    @property
    def in_nested_call(self) -> bool:
        """A command runs inside another (EXEC, a script): WAIT cannot block there."""

    @property
    def clock_ns(self) -> Callable[[], int]:
        """The monotonic clock in nanoseconds (the host's)."""
    def internal_client(self, kind: str, client_id: int | None = None,
                        flags: str = "") -> Any: ...
    def execute(self, c: Any, argv: list[bytes]) -> None: ...
    def refresh_gate(self) -> None:
        """The dispatch's gate re-read (``async_loading`` changed)."""
    def run_plain(self, c: Any, cmds: list[Any], reqs: list[list[bytes]],
                  replies: list[object], one: bool) -> None: ...
    def run_propagating(self, c: Any, cmds: list[Any], reqs: list[list[bytes]],
                        replies: list[object], one: bool) -> None: ...
    def unblock(self, c: Any, reply: object) -> None: ...
    def refresh_stream_live(self) -> None: ...
    def refresh_maxmemory(self) -> None: ...
    def refresh_oom_score(self) -> bool: ...
    def kill_rdb_child(self) -> None: ...
    def child_exited(self, pid: int, exitcode: int) -> None: ...
    def function_codes(self) -> list[bytes]: ...
    def prepare_functions(self, codes: list[bytes]) -> Any: ...
    def install_functions(self, libraries: Any) -> None: ...
    def script_writes(self, argv: list[bytes]) -> bool:
        """EVAL/EVALSHA/FCALL of a script or function that declared flags without
        no-writes: a write by its flags (getCommandFlags)."""
