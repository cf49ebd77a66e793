"""What the server's parts read of the core: one narrow port per part, instead of the whole
:class:`~pyrepl.core.server.ServerCore`.

The ports of the server, and where each lives (a lower layer declares what it needs of the
server beside its own code, so it never imports the core):

=====================================  =============================================================
port                                   its user
=====================================  =============================================================
``keyspace.ports.KeyspaceHost``        a ``Database`` and the hash field TTLs (clock, expiry, stats)
``replication.ports.ReplicationHost``  the replication layer (with ``ReplClient``, a client as it
                                       sees one)
``aof.appendonly.AofServer/AofHost``   the append-only file
:class:`BlockingHost`                  blocking commands and WAIT (core/blocking.py)
:class:`PubSubHost`                    pub/sub delivery and its output limit (core/pubsub.py)
:class:`TrackingHost`                  client-side caching (core/tracking.py)
:class:`PauseHost`                     CLIENT PAUSE (core/pause.py)
:class:`Meter`                         the memory in use (``core.meter``, from pyrepl/memacct.py;
                                       tests/unit/fakes.py has ``FakeMeter``)
=====================================  =============================================================

``ServerCore`` is the one implementation of each; tests/unit/ports_conformance.py has mypy
(--strict) check that it satisfies them, and a test may pass any object with these members.
Being Protocols, they cost nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyrepl.commands.table import Command
    from pyrepl.config import Config
    from pyrepl.core.blocking import Blocked, Blocking
    from pyrepl.core.client import Client
    from pyrepl.core.clientevict import ClientEviction
    from pyrepl.core.host import Host
    from pyrepl.core.outputlimit import OutputLimits
    from pyrepl.core.stats import CommandStat, Stats
    from pyrepl.keyspace.db import Database
    from pyrepl.replication.manager import Replication


class BlockingHost(Protocol):
    """Blocking (core/blocking.py): answering and failing blocked clients, and the propagation
    of what serving them wrote."""

    keys_waited: bool          # a client waits for keys: writes must tell blocking (call())
    serve_after_flush: bool    # serve the ready keys after the next flush_propagation

    @property
    def replication(self) -> Replication | None: ...
    @property
    def in_nested_call(self) -> bool: ...
    @property
    def propagation_pending(self) -> bool: ...

    def flush_propagation(self, c: Client | None = None,
                          request: list[bytes] | None = None) -> None: ...
    def unblock(self, c: Client, reply: object) -> None: ...
    def error_reply(self, c: Client, message: str, cmd: Command | None,
                    rejected: bool) -> None: ...
    def command_stat(self, cmd: Command) -> CommandStat: ...
    def refresh_clock(self) -> None: ...
    @property
    def clock_ns(self) -> Callable[[], int]: ...
    def unblocked_stats(self, c: Client, argv: list[bytes], call_us: int,
                        reply_us: int) -> None: ...


class PubSubHost(Protocol):
    """Pub/sub (core/pubsub.py): delivery to subscribers, and the pubsub class's output limit."""

    now_ms: int

    @property
    def config(self) -> Config: ...
    @property
    def stats(self) -> Stats: ...
    @property
    def log(self) -> Any: ...
    @property
    def host(self) -> Host: ...
    @property
    def pending_flush(self) -> list[Client]: ...
    @property
    def maxmemory_clients(self) -> int: ...
    @property
    def client_eviction(self) -> ClientEviction: ...
    @property
    def output_limits(self) -> OutputLimits: ...


class TrackingHost(Protocol):
    """Client-side caching (core/tracking.py): the core's two flags it keeps, the clients it
    tells, the databases whose writes it watches, client eviction (an invalidation's bytes)."""

    tracking_on: bool          # a client tracks keys: every call takes call()'s slow path
    tracking_writes: bool      # writes must tell tracking (a client tracks, or the table holds keys)

    @property
    def maxmemory_clients(self) -> int: ...
    @property
    def client_eviction(self) -> ClientEviction: ...

    @property
    def config(self) -> Config: ...
    @property
    def stats(self) -> Stats: ...
    @property
    def dbs(self) -> list[Database]: ...
    @property
    def clients(self) -> dict[int, Client]: ...
    @property
    def blocking(self) -> Blocking: ...
    @property
    def pending_flush(self) -> list[Client]: ...
    @property
    def in_nested_call(self) -> bool: ...

    def resample(self) -> None: ...


class PauseHost(Protocol):
    """CLIENT PAUSE (core/pause.py): postponing a client's command and running it later."""

    @property
    def blocking(self) -> PauseBlocking: ...
    @property
    def monitors(self) -> dict[Client, None]: ...
    @property
    def pending_flush(self) -> list[Client]: ...

    def execute(self, c: Client, argv: list[bytes]) -> None: ...
    def refresh_gate(self) -> None: ...
    def resume_master_stream(self, c: Client, argv: list[bytes]) -> None: ...


class PauseBlocking(Protocol):
    """What a pause does with blocking: a postponed client waits as a blocked one."""

    def block(self, c: Client, record: Blocked) -> None: ...
    def release(self, c: Client) -> None: ...


class Meter(Protocol):
    """The memory in use (``core.meter``; pyrepl/memacct.py makes the process's): INFO memory's
    figures and what maxmemory is checked against. ``kind`` says how it is measured
    ("pool-walk": pymalloc's pools and libc's blocks, Redis's zmalloc equivalent; "rss": the
    process's resident set, which does not fall after a free)."""

    @property
    def kind(self) -> str: ...

    def used(self, fresh: bool = False) -> int:
        """Bytes in use (``used_memory``): exact when ``fresh``; else possibly a reading up to
        an interval old (~100 x the cost of a walk), with what grew since counted high."""
    def bound(self) -> int:
        """A cheap upper bound of ``used(fresh=True)`` (tens of ns, no walk): a write under
        maxmemory needs no more while it is below the limit."""
    def rss(self) -> int:
        """The process's resident set size (``used_memory_rss``)."""
