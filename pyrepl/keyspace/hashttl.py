"""Hash field expiration (Redis 7.4 / 8 "HFE"): per-field TTLs, lazy and active expiry.

Theory of operation: a hash is a ListpackHash or a StrDict (pyrepl/keyspace/lphash.py,
strtab.py); only a hash that was given field TTLs becomes a :class:`HashEx`, a ``dict``
subclass carrying ``ttl`` (field -> absolute unix ms), so plain hashes cost nothing more and
every hash command keeps its fast path for them. Like
Redis's listpackex encoding, a small HashEx keeps its fields ordered with the TTL'd fields first
by ascending expiry (a re-timed field goes before those with the same time) and the others after
them in insertion order; HGETALL / HSCAN then list fields in Redis's order.

A field is expired when ``when < now`` (hashTypeGetValue). Expired fields are hidden from reads;
on a master the access of one field deletes it and propagates ``HDEL key field`` (lazy expiry),
and :func:`active_expire` (called by the server cron) deletes the expired fields of the hashes
in its registry within a time budget, propagating one HDEL per field as Redis's active expiry
does. A hash whose last field goes is deleted. On a replica nothing is deleted by its own clock:
fields are hidden from its clients and stay visible to the master's stream until the master's
HDEL arrives (as Redis does for keys).

Keyspace events as Redis 8's t_hash.c: a field deleted by its TTL when accessed publishes
``hexpired`` (once per field; HMGET once per command), then ``del`` if the hash went with it;
HRANDFIELD's expiry of every expired field and the active expiry publish one ``hexpired`` per
hash, then ``del`` if it was emptied.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from pyrepl.keyspace.db import TYPE_NAMES
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_HASH, keyspace_event

if TYPE_CHECKING:
    from pyrepl.keyspace.ports import KeyspaceHost

# EB_EXPIRE_TIME_MAX >> 2: the largest absolute field expiry Redis accepts (HFE_MAX_ABS_TIME_MSEC).
HFE_MAX_ABS_TIME_MSEC = ((1 << 48) - 1) >> 2

# hashTypeGetValue's results.
FIELD_OK, FIELD_EXPIRED, FIELD_EXPIRED_HASH = 0, 1, 2


class HashEx(dict):
    """A hash with field TTLs (Redis's listpackex / HT with HFE metadata)."""

    __slots__ = ("ttl",)
    # How many exist: the RDB writer scans for field TTLs (to pick the RDB version) only then.
    alive = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.ttl: dict[bytes, int] = {}
        HashEx.alive += 1

    def __del__(self) -> None:
        HashEx.alive -= 1

    def copy(self) -> HashEx:  # type: ignore[override]
        h = HashEx(self)
        h.ttl = dict(self.ttl)
        return h

    def min_expire(self) -> int | None:
        return min(self.ttl.values()) if self.ttl else None

    def __reduce__(self) -> Any:
        return (_rebuild, (dict(self), dict(self.ttl)))


def _rebuild(items: dict, ttl: dict) -> HashEx:
    h = HashEx(items)
    h.ttl = ttl
    return h


TYPE_NAMES[HashEx] = b"hash"   # TYPE, SCAN TYPE: a HashEx is a hash


def has_field_ttls(dbs: Any) -> bool:
    """Does any hash of ``dbs`` hold a field TTL? (O(1) when no HashEx exists.)"""
    if not HashEx.alive:
        return False
    for db in dbs:
        for v in db.data.values():
            if type(v) is HashEx and v.ttl:
                return True
    return False


def make_hashex(items: list[tuple[bytes, bytes, int]], insert: bool = True) -> HashEx:
    """A HashEx from (field, value, expire ms or 0) triples. With ``insert`` the fields are
    ordered as inserting them one by one into a listpackex orders them (RDB_TYPE_HASH_METADATA
    loading); without, the order given is kept (a listpackex blob is used as it is)."""
    h = HashEx()
    ttl = h.ttl
    for f, v, when in items:
        h[f] = v
        if when:
            ttl[f] = when
    if ttl and insert:
        _sort_listpack(h)
    return h


def is_listpack(core: KeyspaceHost, h: dict) -> bool:
    """Would Redis hold this hash as a listpack(ex)? (Only then does field order matter.)"""
    cfg = core.config
    if len(h) > getattr(cfg, "hash_max_listpack_entries", 512):
        return False
    limit = getattr(cfg, "hash_max_listpack_value", 64)
    return all(len(f) <= limit and len(v) <= limit for f, v in h.items())


def _sort_listpack(h: HashEx) -> None:
    """Order as a listpackex built by inserting each field in turn (listpackExAddNew: a timed
    field goes before the first one with no TTL or a TTL >= its own)."""
    ttl = h.ttl
    fields = list(h)
    timed = sorted((i for i, f in enumerate(fields) if f in ttl),
                   key=lambda i: (ttl[fields[i]], -i))
    items = [(fields[i], h[fields[i]]) for i in timed]
    items += [(f, h[f]) for f in fields if f not in ttl]
    h.clear()
    h.update(items)


def _reinsert(h: HashEx, field: bytes, when: int | None) -> None:
    """listpackExAddInternal: put ``field`` before the first field with no TTL or a TTL
    >= ``when``; a field without TTL goes to the end."""
    value = h.pop(field)
    if when is None:
        h[field] = value
        return
    ttl = h.ttl
    items = list(h.items())
    pos = len(items)
    for i, (f, _v) in enumerate(items):
        t = ttl.get(f)
        if t is None or t >= when:
            pos = i
            break
    if pos == len(items):
        h[field] = value
        return
    items.insert(pos, (field, value))
    h.clear()
    h.update(items)


def set_ttl(core: KeyspaceHost, h: HashEx, field: bytes, when: int | None) -> None:
    """Give ``field`` the expiry ``when`` (None: persist), keeping Redis's order."""
    if when is None:
        if h.ttl.pop(field, None) is None:
            return
    else:
        h.ttl[field] = when
    if is_listpack(core, h):
        _reinsert(h, field, when)


def clear_ttl_on_set(h: HashEx, field: bytes) -> None:
    """HSET of a field that had a TTL: the TTL goes, the field moves to the end (listpackex
    re-inserts it as a field without TTL)."""
    if h.ttl.pop(field, None) is not None:
        h[field] = h.pop(field)


def to_hashex(db: Any, key: bytes, h: dict) -> HashEx:
    """hashTypeConvert(LISTPACK -> LISTPACK_EX): the hash at ``key`` as a HashEx."""
    if type(h) is HashEx:
        return h
    hx = HashEx(h)
    db.data[key] = hx
    return hx


def deletes_here(core: KeyspaceHost) -> bool:
    """Fields are deleted by this server's clock (a master), not only hidden (a replica)."""
    return core.expiry_deletes


def hidden_from_caller(core: KeyspaceHost) -> bool:
    """Expired fields are hidden from the current caller: always on a master, and on a
    replica from its clients but not from its master's stream."""
    return core.expiry_deletes or not core.applying_master_stream


def expired_events(core: KeyspaceHost, dbid: int, key: bytes, hash_deleted: bool) -> None:
    """``hexpired`` on ``key``, then ``del`` when its hash went with the fields."""
    if core.notify_mask:
        keyspace_event(core, NOTIFY_HASH, b"hexpired", key, dbid)
        if hash_deleted:
            keyspace_event(core, NOTIFY_GENERIC, b"del", key, dbid)


def delete_field(core: KeyspaceHost, db: Any, key: bytes, h: HashEx, field: bytes,
                 notify: bool = True) -> bool:
    """Remove an expired field and propagate ``HDEL key field``; True if the hash went too.
    With ``notify``, publishes ``hexpired`` (and ``del``) as hashTypeGetValue does."""
    del h[field]
    h.ttl.pop(field, None)
    core.also_propagate(db.id, [b"HDEL", key, field])
    db.touch(key)
    if not h:
        del db.data[key]
        if db.expires:
            db.expires.pop(key, None)
        if notify:
            expired_events(core, db.id, key, True)
        return True
    if notify:
        expired_events(core, db.id, key, False)
    return False


def field_state(c: Any, key: bytes, h: HashEx, field: bytes, notify: bool = True) -> int:
    """hashTypeGetValue's expiry part for one present field: FIELD_OK, FIELD_EXPIRED (hidden,
    deleted on a master) or FIELD_EXPIRED_HASH (deleted with its hash). ``notify`` False is
    HFE_LAZY_NO_NOTIFICATION (HMGET publishes one event for all its fields)."""
    when = h.ttl.get(field)
    core = c.core
    if when is None or when >= core.now_ms:
        return FIELD_OK
    if not core.expiry_deletes:
        return FIELD_EXPIRED if not core.applying_master_stream else FIELD_OK
    if delete_field(core, c.db, key, h, field, notify):
        return FIELD_EXPIRED_HASH
    return FIELD_EXPIRED


def visible(c: Any, h: HashEx) -> dict:
    """The fields a read sees: those not expired (all of them for the master's stream)."""
    core = c.core
    if not h.ttl or not hidden_from_caller(core):
        return h
    now = core.now_ms
    ttl = h.ttl
    if all(w >= now for w in ttl.values()):
        return h
    return {f: v for f, v in h.items() if (w := ttl.get(f)) is None or w >= now}


def expire_all(c: Any, key: bytes, h: HashEx) -> bool:
    """hashTypeExpireIfNeeded (HRANDFIELD): delete every expired field on a master; True if
    the hash was deleted."""
    core = c.core
    if not core.expiry_deletes or not h.ttl:
        return False
    now = core.now_ms
    expired = [f for f, w in h.ttl.items() if w < now]
    for f in expired:
        if delete_field(core, c.db, key, h, f, False):
            expired_events(core, c.db.id, key, True)
            return True
    if expired:
        expired_events(core, c.db.id, key, False)
    return False


# -- active expiry ----------------------------------------------------------------------

class _State:
    """Per server: which keys hold a HashEx (a hint, checked before use) and the cursors of
    the slow walk that finds HashEx values the hint missed (RENAME, MOVE, COPY, a load)."""

    __slots__ = ("hint", "walk", "walk_pos")

    def __init__(self) -> None:
        self.hint: dict[int, dict[bytes, HashEx]] = {}
        self.walk: dict[int, list[bytes]] = {}
        self.walk_pos: dict[int, int] = {}


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()

WALK_SLICE = 256   # keys of each db the rediscovery walk looks at per call


def _state(core: KeyspaceHost) -> _State:
    st = _STATES.get(core)
    if st is None:
        st = _STATES[core] = _State()
    return st


def register(core: KeyspaceHost, db: Any, key: bytes, h: HashEx) -> None:
    """Remember that ``key`` holds a hash with field TTLs (for the active expiry)."""
    _state(core).hint.setdefault(db.id, {})[key] = h


def _walk(st: _State, db: Any) -> None:
    """Look at the next slice of the db's keys for HashEx values the hint does not know."""
    keys = st.walk.get(db.id)
    pos = st.walk_pos.get(db.id, 0)
    if keys is None or pos >= len(keys):
        if not db.data:
            return
        keys = st.walk[db.id] = list(db.data)
        pos = 0
    data = db.data
    hint = st.hint.setdefault(db.id, {})
    end = min(pos + WALK_SLICE, len(keys))
    for i in range(pos, end):
        k = keys[i]
        v = data.peek(k)     # (a walk, not a read: the ages stay)
        if type(v) is HashEx and v.ttl:
            hint[k] = v
    st.walk_pos[db.id] = end
    if end >= len(keys):
        st.walk[db.id] = []
        st.walk_pos[db.id] = 0


def active_expire(core: KeyspaceHost, now_ms: int, budget_us: int = 1000) -> tuple[int, int]:
    """The hash-field part of activeExpireCycle: delete the expired fields of hashes (one
    ``HDEL key field`` propagated per field, the hash deleted with its last field) until
    ``budget_us`` microseconds of ``core.clock_ns`` have passed. Does nothing on a replica
    (the master's HDELs remove the fields there). Returns (hashes checked, fields deleted)."""
    if not core.expiry_deletes or not HashEx.alive:   # (no hash with field TTLs: no walk)
        return 0, 0
    st = _state(core)
    clock = core.clock_ns
    deadline = clock() + budget_us * 1000
    checked = deleted = 0
    for db in core.dbs:
        if not db.data:
            st.hint.pop(db.id, None)
            continue
        _walk(st, db)
        hint = st.hint.get(db.id)
        if not hint:
            continue
        data = db.data
        for key, h in list(hint.items()):
            if data.peek(key) is not h or not h.ttl:
                del hint[key]
                continue
            checked += 1
            if db.expires and db.is_expired(key):
                continue        # the key's own expiry removes it
            expired = [f for f, w in h.ttl.items() if w < now_ms]
            for f in expired:
                deleted += 1
                core.propagate_internal(db.id, [b"HDEL", key, f])
                del h[f]
                del h.ttl[f]
                db.touch(key)
                if not h:
                    del data[key]
                    if db.expires:
                        db.expires.pop(key, None)
                    del hint[key]
                    break
            if expired:
                expired_events(core, db.id, key, not h)
            if checked & 15 == 0 and clock() >= deadline:
                return checked, deleted
    return checked, deleted
