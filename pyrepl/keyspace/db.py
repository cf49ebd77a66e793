"""One numbered database: a table of keys plus a table of absolute expiry times (unix ms).

Theory of operation: values are plain Python objects chosen for speed —
``bytes`` (string), ``collections.deque`` (list; a small one a ``ListpackList``), ``dict``
(hash; a small one a ``ListpackHash``), ``set`` (set; one of integers an ``IntSet``) and
:class:`pyrepl.keyspace.zset.ZSet` (sorted set). Every read goes through :meth:`lookup`, which
applies lazy expiry: on a master an expired key is deleted and a ``DEL`` is propagated so
replicas stay in step; a replica never deletes on its own clock and only hides the key from
reads (as Redis does). The tables are :class:`pyrepl.keyspace.ktable.KeyTable`: mappings whose
entries keep each key's 24 bits of LRU/LFU age, stamped as Redis's lookupKey does: :meth:`lookup`
(``data.get``) touches the key, :meth:`peek` and the ``_notouch`` reads (EXISTS, TYPE, TTL,
OBJECT: Redis's LOOKUP_NOTOUCH) do not. Writers call :meth:`touch` (Redis's ``signalModifiedKey``) after changing
a key in place so ``WATCH`` sees it. Collections are never left empty: handlers delete a key
whose collection became empty.

The clock is ``core.now_ms``, set by the I/O shell before each batch of commands (sans-io).
``core`` is the server as the keyspace sees it: the port ``KeyspaceHost`` (ports.py).

Keyspace notifications the keyspace itself causes are published here, where Redis's db.c and
expire.c publish them: ``expired`` when a key is deleted by its TTL (lazily or by the active
cycle, a writable replica's own keys included), ``keymiss`` when a read lookup
(:meth:`lookup_read`, Redis's lookupKeyRead) finds nothing, and ``new`` when a key is created
(:meth:`add`, and :meth:`set` of a key that did not exist: Redis's dbAdd). Commands publish
their own events (``pyrepl.notify``).

A cluster node's database (db 0, the only one in cluster mode) indexes its keys by hash slot
once :meth:`track_slots` is called: :meth:`count_keys_in_slot` and :meth:`keys_in_slot` answer
CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT from the table's index (KeyTable.track_slots: kept by
every insertion and deletion, O(1) each; the TTLs are not indexed, as in Redis), and the tables
that :meth:`flush` and :meth:`replace` put in place (FLUSHALL, a loaded RDB) index theirs too.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.ktable import KeyTable
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet
from pyrepl.notify import NOTIFY_EXPIRED, NOTIFY_KEY_MISS, NOTIFY_NEW, keyspace_event
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.keyspace.ports import KeyspaceHost

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"

TYPE_NAMES: dict[type, bytes] = {
    bytes: b"string",
    deque: b"list",
    ListpackList: b"list",
    StrDict: b"hash",
    ListpackHash: b"hash",
    StrSet: b"set",
    IntSet: b"set",
    ZSet: b"zset",
    ListpackZSet: b"zset",
}


def type_name(value: object) -> bytes:
    return TYPE_NAMES[type(value)]


def of_kind(value: object, kind: type | frozenset[type]) -> bool:
    """Is ``value`` a ``kind``: a type, or a frozenset of the types one Redis type is held in
    (a list: a ListpackList or a deque)?"""
    return type(value) is kind or (type(kind) is frozenset and type(value) in kind)


class Database:
    __slots__ = ("id", "core", "data", "expires", "watched", "_expire_keys", "_expire_pos",
                 "_slots")

    def __init__(self, core: KeyspaceHost, db_id: int) -> None:
        self.id = db_id
        self.core = core
        self.data: KeyTable = KeyTable()
        self.expires: KeyTable = KeyTable(ageing=False)
        # key -> set of clients watching it (WATCH)
        self.watched: dict[bytes, set[Any]] = {}
        self._expire_keys: list[bytes] = []
        self._expire_pos = 0
        self._slots = False     # track_slots(): the data table indexes its keys by hash slot

    def __len__(self) -> int:
        return len(self.data)

    # -- reads ---------------------------------------------------------------------------
    def is_expired(self, key: bytes) -> bool:
        when = self.expires.get(key)
        return when is not None and when <= self.core.now_ms

    def expire_if_needed(self, key: bytes) -> bool:
        """True when the key is logically expired. On a master it is also deleted."""
        when = self.expires.get(key)
        if when is None or when > self.core.now_ms:
            return False
        core = self.core
        if core.expiry_deletes:
            # (CLIENT PAUSE keeps the dataset still: expired for the reader, not deleted)
            if not core.pause.kind:
                self._delete_expired(key)
            return True
        # A replica: the key is gone for its clients, but the commands of the master's stream
        # still see it (the master's DEL will remove it), exactly as Redis's expireIfNeeded.
        return not core.applying_master_stream

    def _delete_expired(self, key: bytes, propagate: bool = True) -> None:
        """Delete an expired key: counted, notified, touched and (``propagate``) a DEL fed to
        the replicas and the AOF (with ``lazyfree-lazy-expire``: an UNLINK, the value freed in
        the background, as Redis's deleteExpiredKeyAndPropagate)."""
        value = self.data.pop(key)
        del self.expires[key]
        core = self.core
        core.stats.expired_keys += 1
        if core.notify_mask & NOTIFY_EXPIRED:
            keyspace_event(core, NOTIFY_EXPIRED, b"expired", key, self.id)
        self.touch(key)
        lazy = core.config.lazyfree_lazy_expire
        if propagate:
            core.propagate_internal(self.id, [b"UNLINK" if lazy else b"DEL", key])
        if lazy:
            core.lazyfree.free_value(value)

    def lookup(self, key: bytes) -> Any:
        """The value of ``key`` or None (expired keys are handled lazily)."""
        v = self.data.get(key)
        if v is None:
            return None
        if self.expires and key in self.expires and self.expire_if_needed(key):
            return None
        return v

    def peek(self, key: bytes) -> Any:
        """:meth:`lookup` without touching the key's age (Redis's LOOKUP_NOTOUCH)."""
        v = self.data.peek(key)
        if v is None:
            return None
        if self.expires and key in self.expires and self.expire_if_needed(key):
            return None
        return v

    def lookup_read(self, key: bytes) -> Any:
        """Like :meth:`lookup`, counting keyspace hits and misses (read commands)."""
        return self._counted_read(key, self.lookup(key))

    def lookup_read_notouch(self, key: bytes) -> Any:
        """:meth:`lookup_read` with LOOKUP_NOTOUCH (EXISTS, TYPE, the TTL family)."""
        return self._counted_read(key, self.peek(key))

    def _counted_read(self, key: bytes, v: Any) -> Any:
        """A read lookup's hit or miss counted (and ``keymiss`` published); answers ``v``."""
        core = self.core
        if v is None:
            core.stats.keyspace_misses += 1
            if core.notify_mask & NOTIFY_KEY_MISS:
                keyspace_event(core, NOTIFY_KEY_MISS, b"keymiss", key, self.id)
        else:
            core.stats.keyspace_hits += 1
        return v

    def lookup_read_nonotify(self, key: bytes) -> Any:
        """lookupKeyRead with LOOKUP_NOTOUCH | LOOKUP_NONOTIFY (OBJECT, MEMORY USAGE): counts
        hits and misses, no keymiss, the age untouched."""
        v = self.peek(key)
        if v is None:
            self.core.stats.keyspace_misses += 1
        else:
            self.core.stats.keyspace_hits += 1
        return v

    def keymiss(self, key: bytes) -> None:
        """The ``keymiss`` event of a read lookup that found nothing (callers that count the
        miss themselves, e.g. GET's fast path)."""
        core = self.core
        if core.notify_mask & NOTIFY_KEY_MISS:
            keyspace_event(core, NOTIFY_KEY_MISS, b"keymiss", key, self.id)

    def lookup_typed(self, key: bytes, kind: type | frozenset[type]) -> Any:
        """The value of ``key`` if it is a ``kind`` (:func:`of_kind`), None if missing;
        WRONGTYPE otherwise."""
        v = self.lookup(key)
        if v is not None and type(v) is not kind and not of_kind(v, kind):
            raise ReplyError(WRONGTYPE)
        return v

    def exists(self, key: bytes) -> bool:
        return self.lookup(key) is not None

    def get_expire(self, key: bytes) -> int | None:
        return self.expires.get(key)

    # -- writes --------------------------------------------------------------------------
    def set(self, key: bytes, value: Any, keep_ttl: bool = False) -> None:
        """Store ``value`` (overwrite); the TTL is cleared unless ``keep_ttl``. Like Redis's
        setKey, a key past its TTL is expired first (lookupKeyWrite), and a key that did not
        exist is announced as ``new`` (dbAdd)."""
        expires = self.expires
        if expires and key in expires:
            self.expire_if_needed(key)
        data = self.data
        if self.core.notify_mask & NOTIFY_NEW and key not in data:
            data[key] = value
            keyspace_event(self.core, NOTIFY_NEW, b"new", key, self.id)
        else:
            data[key] = value
        if not keep_ttl and expires:
            expires.pop(key, None)
        if self.watched:
            self.touch(key)

    def add(self, key: bytes, value: Any) -> None:
        """Store a new key (the caller checked that it does not exist): dbAdd."""
        self.data[key] = value
        if self.core.notify_mask & NOTIFY_NEW:
            keyspace_event(self.core, NOTIFY_NEW, b"new", key, self.id)
        if self.watched:
            self.touch(key)

    def new_key(self, key: bytes) -> None:
        """The ``new`` event of a key a handler created by storing into ``data`` itself."""
        core = self.core
        if core.notify_mask & NOTIFY_NEW:
            keyspace_event(core, NOTIFY_NEW, b"new", key, self.id)

    def delete(self, key: bytes) -> bool:
        if self.lookup(key) is None:
            return False
        del self.data[key]
        if self.expires:
            self.expires.pop(key, None)
        if self.watched:
            self.touch(key)
        return True

    def unlink(self, key: bytes) -> bool:
        """:meth:`delete`, the value freed in the background when that is worth it (Redis's
        dbAsyncDelete: pyrepl/core/lazyfree.py)."""
        if self.lookup(key) is None:
            return False
        value = self.data.pop(key)
        if self.expires:
            self.expires.pop(key, None)
        if self.watched:
            self.touch(key)
        self.core.lazyfree.free_value(value)
        return True

    def set_expire(self, key: bytes, when_ms: int) -> None:
        self.expires[key] = when_ms
        if self.watched:
            self.touch(key)
        core = self.core
        if not core.expiry_deletes and not core.applying_master_stream:
            # A client's TTL on a writable replica: no DEL will come from the master for it
            # (Redis's rememberSlaveKeyWithExpire).
            core.replica_keys_with_expire[key] = \
                core.replica_keys_with_expire.get(key, 0) | (1 << self.id)

    def expire_replica_key(self, key: bytes, now_ms: int) -> bool | None:
        """expireSlaveKeys for one db: True if deleted, False if it still has a future TTL,
        None if it has no TTL any more (nothing to track)."""
        when = self.expires.get(key)
        if when is None:
            return None
        if when > now_ms:
            return False
        self._delete_expired(key, propagate=False)
        return True

    def persist(self, key: bytes) -> bool:
        if self.expires.pop(key, None) is None:
            return False
        if self.watched:
            self.touch(key)
        return True

    def touch(self, key: bytes) -> None:
        """Signal that ``key`` was modified (Redis's signalModifiedKey): invalidates WATCH, and
        the client-side caches of the clients tracking it (pyrepl.core.tracking)."""
        clients = self.watched.get(key)
        if clients:
            for c in clients:
                w = c.watch_entry(self, key)
                if w is not None and w[2]:
                    # expired when WATCHed (touchWatchedKey): its deletion is no logical
                    # change (the flag clears: a deleted key is not expired); while it is
                    # still there, neither
                    if key not in self.data:
                        w[2] = False
                    continue
                c.dirty_cas = True
        core = self.core
        if core.tracking_writes:     # (the one test while no client tracks)
            core.tracking.key_modified(key)

    def flush(self, lazy: bool = False) -> int:
        """Remove every key; returns how many there were. Touches watched keys that existed;
        tracking clients get one null invalidation (trackingInvalidateKeysOnFlush), not one
        per key. ``lazy``: the old tables are freed in the background (emptyDbAsync)."""
        n = len(self.data)
        core = self.core
        if core.tracking_writes:
            core.tracking.flushed()
        if self.watched:
            self.touch_all_watched(None)
        if lazy and n:
            core.lazyfree.free_tables([self.data, self.expires], n)
        self.data = KeyTable()
        if self._slots:
            self.data.track_slots()
        self.expires = KeyTable(ageing=False)
        return n

    def touch_all_watched(self, replaced_with: Database | None) -> None:
        """touchAllWatchedKeysInDb, before this database's keys are emptied (FLUSHDB) or
        replaced with ``replaced_with``'s (SWAPDB): a watched key that exists in either is
        touched, except where nothing changes logically: an expired key gone or replaced
        with an expired one, no key replaced with an expired one (then flagged expired)."""
        for key, clients in list(self.watched.items()):
            in_emptied = key in self.data
            in_new = replaced_with is not None and key in replaced_with.data
            if not (in_emptied or in_new):
                continue
            for c in list(clients):
                w = c.watch_entry(self, key)
                if w is not None and w[2]:
                    if not in_new:
                        w[2] = False        # the expired key is gone: no change
                        continue
                    if replaced_with is not None and replaced_with.is_expired(key):
                        continue            # expired, and still expired
                elif not in_emptied and replaced_with is not None and \
                        replaced_with.is_expired(key):
                    if w is not None:
                        w[2] = True         # no key replaced with an expired one
                    continue
                c.dirty_cas = True

    def replace(self, data: KeyTable | dict[bytes, Any],
                expires: KeyTable | dict[bytes, int], lazy: bool = False) -> None:
        """The whole dataset at once (a replica's loaded snapshot, DEBUG RELOAD): watched keys
        that existed before or exist now are touched, as Redis's emptyData + load do; tracking
        clients get a null invalidation (everything they cached is gone). The loaders hand
        KeyTables; a dict is copied into one. ``lazy``: the old tables are freed in the
        background (a replica's discardTempDb)."""
        if type(data) is not KeyTable:
            data = KeyTable.from_dict(data)
        if type(expires) is not KeyTable:
            expires = KeyTable.from_dict(expires, ageing=False)
        if self._slots:
            data.track_slots()      # (the loaded keys indexed: one pass, as Redis's load adds each)
        if self.core.tracking_writes:
            self.core.tracking.flushed()
        old, old_expires = self.data, self.expires
        self.data = data
        self.expires = expires
        if self.watched:
            for key in list(self.watched):
                if key in old or key in data:
                    self.touch(key)
        if lazy and len(old):
            self.core.lazyfree.free_tables([old, old_expires], len(old))

    # -- cluster: the keys by hash slot ----------------------------------------------------
    def track_slots(self) -> None:
        """Index the keys by hash slot from now on (the keys present included), this table and
        every one :meth:`flush` and :meth:`replace` put in place (Redis's slotToKeyInit: a
        cluster node's db 0)."""
        self.data.track_slots()
        self._slots = True

    @property
    def tracks_slots(self) -> bool:
        return self._slots

    def count_keys_in_slot(self, slot: int) -> int:
        """How many keys hash to ``slot`` (countKeysInSlot), O(1); expired keys not yet deleted
        count, as in Redis. RuntimeError unless :meth:`track_slots` was called."""
        return self.data.slot_count(slot)

    def keys_in_slot(self, slot: int, count: int) -> list[bytes]:
        """Up to ``count`` keys of ``slot``, newest first (CLUSTER GETKEYSINSLOT), O(count)."""
        return self.data.slot_keys(slot, count)

    def random_key(self) -> bytes | None:
        """A random non-expired key (bounded number of tries when most keys are expired), as
        dbRandomKey: each try one key drawn from the table in O(1)."""
        data = self.data
        for _ in range(100):
            picked = data.sample(1)
            if not picked:
                return None
            key: bytes = picked[0]
            if not self.expire_if_needed(key):
                return key
        return None

    def sample_keys(self, n: int, volatile: bool = False) -> list[bytes]:
        """Up to ``n`` distinct keys at random, in O(n) (dictGetSomeKeys): of all the keys, or
        (``volatile``) of those with a TTL. Expired keys are not filtered out."""
        return (self.expires if volatile else self.data).sample(n)

    def age(self, key: bytes) -> int | None:
        """The key's 24 bits of LRU clock or LFU counter and time (``robj->lru``), untouched;
        None when it does not exist."""
        return self.data.age(key)

    def active_expire(self, budget: int) -> tuple[int, int]:
        """Check up to ``budget`` keys that have a TTL, deleting expired ones.

        Like Redis's cursor over the expires dict: a snapshot of the keys with a TTL is walked
        a slice per call, so each key is checked once per pass at O(1) amortised cost.
        Returns (checked, deleted).
        """
        if not self.expires or not self.core.expiry_deletes:
            return 0, 0
        if self._expire_pos >= len(self._expire_keys):
            self._expire_keys = list(self.expires)
            self._expire_pos = 0
        now = self.core.now_ms
        keys = self._expire_keys
        start = self._expire_pos
        end = min(start + budget, len(keys))
        deleted = 0
        expires = self.expires
        for i in range(start, end):
            k = keys[i]
            when = expires.get(k)
            if when is not None and when <= now:
                self._delete_expired(k)
                deleted += 1
        self._expire_pos = end
        if end >= len(keys):
            self._expire_keys = []
            self._expire_pos = 0
        return end - start, deleted
