"""What the keyspace reads of the server around it: ``KeyspaceHost``, the narrow port a
``Database`` (db.py) and the hash field TTLs (hashttl.py) are given instead of the whole core.

Each member is one the keyspace uses, and why: the clocks its expiries compare with, who deletes
an expired key (a master) or only hides it (a replica), the counters INFO shows, the keyspace
events, the propagation of a deletion it decides itself, the key tracking a write invalidates.
``ServerCore`` (pyrepl/core/server.py) is the one implementation; a test may pass any object with
these members. Being Protocols, they cost nothing at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyrepl.keyspace.db import Database


class KeyspaceStats(Protocol):
    """The counters a lookup or an expiry moves (INFO stats)."""

    expired_keys: int
    keyspace_hits: int
    keyspace_misses: int


class PauseState(Protocol):
    """CLIENT PAUSE: while one is in force (``kind`` non-empty) no expiry deletes a key."""

    kind: int


class KeyTracking(Protocol):
    """Client-side caching: a write to a key invalidates it, a flush invalidates all."""

    def key_modified(self, key: bytes) -> None: ...

    def flushed(self) -> None: ...


class Publisher(Protocol):
    """Pub/sub, for keyspace notifications."""

    def publish(self, channel: bytes, message: bytes) -> int: ...


class ValueFreer(Protocol):
    """Lazy freeing (pyrepl/core/lazyfree.py): what UNLINK, a lazy flush or expiry hands over."""

    def free_value(self, value: Any) -> bool: ...

    def free_tables(self, tables: list[Any], keys: int) -> None: ...


class KeyspaceHost(Protocol):
    """The server as the keyspace sees it (module doc)."""

    now_ms: int
    expiry_deletes: bool            # a master: expired keys are deleted here
    applying_master_stream: bool    # a replica applying its master's stream: nothing hidden
    notify_mask: int                # notify-keyspace-events, as flags
    tracking_writes: bool           # some client tracks keys: writes must tell ``tracking``
    replica_keys_with_expire: dict[bytes, int]   # keys a writable replica gave a TTL to

    # (read-only: the server's own objects stand for these)
    @property
    def stats(self) -> KeyspaceStats: ...

    @property
    def pause(self) -> PauseState: ...

    @property
    def lazyfree(self) -> ValueFreer: ...

    @property
    def tracking(self) -> KeyTracking: ...

    @property
    def pubsub(self) -> Publisher: ...

    @property
    def config(self) -> Any:
        """hash-max-listpack-* (hashttl.is_listpack)."""

    @property
    def dbs(self) -> list[Database]:
        """The databases (hashttl.active_expire walks them)."""

    @property
    def clock_ns(self) -> Callable[[], int]:
        """The monotonic clock of a time budget (active expiry)."""

    def propagate_internal(self, db_id: int, argv: list[bytes]) -> None:
        """Propagate a write the server made itself (an expired key's DEL)."""

    def also_propagate(self, db_id: int, argv: list[bytes]) -> None:
        """Propagate a write within the current command (an expired hash field's HDEL)."""
