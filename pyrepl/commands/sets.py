"""Set commands (Redis 7.0.15's t_set.c): SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP
SRANDMEMBER SMOVE SINTER SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE SINTERCARD SSCAN.

Theory of operation: a set is kept as Redis 7.0 keeps it: one of canonical integers with at
most ``set-max-intset-entries`` members as a :data:`pyrepl.keyspace.intset.IntSet` (an
intset), any other as a hash table, a :data:`pyrepl.keyspace.strtab.StrSet` (its members
inline), converted once and for good when a write adds a non-integer or one member too many
(``_add_members``, Redis's setTypeAdd). Handlers follow Redis's order
of checks exactly (argument parsing, then key lookup, then type check) because that order is
visible in which error a client gets. Reads use ``Database.lookup_read`` (keyspace hit/miss
counters, like lookupKeyRead); writes use ``lookup``. A set that becomes empty is deleted.

Set replies are ``SetReply`` (RESP3 ``~``) where Redis uses a set reply (SMEMBERS, SINTER,
SUNION, SDIFF, SPOP with count) and plain arrays where it uses arrays (SRANDMEMBER with count,
SMISMEMBER). An intset lists its members in ascending order, as in Redis; a hash table's order
is unspecified in Redis as here.

Randomness: SRANDMEMBER and SPOP pick uniformly: from a StrSet in O(1) a member
(``random_member``, ``sample``, ``choices``: random entries of its table, as Redis's
dictGetFairRandomKey), from an intset (at most ``set-max-intset-entries`` members) out of a
snapshot tuple.

Propagation as Redis 7.0: SPOP -> ``SREM key member``; SPOP with a count that empties the set
-> ``DEL key``; otherwise one ``SREM key member`` per popped member (several commands from one
call, which the core wraps in MULTI/EXEC).

Keyspace events as t_set.c: ``sadd`` when members were added (after ``new``), ``srem`` when
some were removed, ``spop``, SMOVE's ``srem`` (and ``del``) on the source before ``sadd`` on the
destination, ``sinterstore`` / ``sunionstore`` / ``sdiffstore`` on a stored result or ``del``
of a destination an empty result removed; ``del`` after the event that emptied a set.
"""

from __future__ import annotations

import random
from typing import Any, cast

from pyrepl.commands.table import command
from pyrepl.commands.util import (
    LLONG_MAX,
    numkeys_keys,
    parse_long_range,
    parse_positive_long,
    remove_members,
    removed_elements,
    repeated_picks,
    scan_opening,
    store_or_delete,
)
from pyrepl.errors import SYNTAX, wrongtype
from pyrepl.keyspace import intset
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.listpack import canonical_int
from pyrepl.keyspace.scan import scan_page
from pyrepl.keyspace.strtab import StrSet
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_SET, notify
from pyrepl.resp.types import ReplyError, SetReply

EMPTY_ARRAY: list[bytes] = []
# The types a set is held in: an intset, a hash table.
SET_TYPES = frozenset((IntSet, StrSet))


def _write_set(db: Any, key: bytes) -> Any:
    """lookupKeyWrite + checkType(OBJ_SET): the set, None if missing."""
    s = db.lookup(key)
    if s is not None and type(s) not in SET_TYPES:
        raise wrongtype()
    return s


def _read_set(c: Any, key: bytes) -> Any:
    """lookupKeyRead + checkType(OBJ_SET), counting keyspace hits and misses."""
    s = c.db.lookup_read(key)
    if s is not None and type(s) not in SET_TYPES:
        raise wrongtype()
    return s


def _new_set(first: bytes) -> Any:
    """setTypeCreate: an intset when the first member is an integer, else a hash table."""
    return IntSet() if canonical_int(first) is not None else StrSet()


def _add_members(db: Any, key: bytes, s: Any, members: list[bytes]) -> int:
    """setTypeAdd of each member: how many were new. An IntSet becomes a set (at ``key``) when
    a member is not an integer or one is added past set-max-intset-entries."""
    n = len(s)
    if type(s) is IntSet:
        if intset.all_ints(members):
            s.update(members)
            if len(s) > intset.limits.entries and len(s) > n:
                intset.to_set(db, key, s)
            return len(s) - n
        s = intset.to_set(db, key, s)
    if len(members) == 1:
        s.add(members[0])
    else:
        s.update(members)
    return len(s) - n


# -- single-key commands ----------------------------------------------------------------------

@command("sadd", -3, "write denyoom fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Add one or more members to a set", since="1.0.0")
def sadd(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    s = db.lookup(key)
    if s is None:
        s = _new_set(argv[2])
        db.add(key, s)
        added = _add_members(db, key, s, argv[2:])
    else:
        if type(s) not in SET_TYPES:
            raise wrongtype()
        added = _add_members(db, key, s, argv[2:])
        if added:
            db.touch(key)
    c.core.dirty += added
    if added and c.core.notify_mask & NOTIFY_SET:
        notify(c, NOTIFY_SET, b"sadd", key)
    return added


def _discard_member(s: set, m: bytes) -> bool:
    """SREM's removal of one member."""
    if m in s:
        s.remove(m)
        return True
    return False


@command("srem", -3, "write fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Remove one or more members from a set", since="1.0.0")
def srem(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    return remove_members(c, key, _write_set(c.db, key), argv[2:], _discard_member,
                          NOTIFY_SET, b"srem")


@command("smembers", 2, "readonly", keys=(1, 1, 1), group="set", acl="set",
         summary="Get all the members in a set", since="1.0.0")
def smembers(c: Any, argv: list[bytes]) -> object:
    s = _read_set(c, argv[1])
    if s is None:
        return SetReply(())
    return SetReply(s)


@command("sismember", 3, "readonly fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Determine if a given value is a member of a set", since="1.0.0")
def sismember(c: Any, argv: list[bytes]) -> object:
    s = _read_set(c, argv[1])
    return 1 if s is not None and argv[2] in s else 0


@command("smismember", -3, "readonly fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Returns the membership associated with the given elements for a set",
         since="6.2.0")
def smismember(c: Any, argv: list[bytes]) -> object:
    s = _read_set(c, argv[1]) or ()
    return [1 if m in s else 0 for m in argv[2:]]


@command("scard", 2, "readonly fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Get the number of members in a set", since="1.0.0")
def scard(c: Any, argv: list[bytes]) -> object:
    s = _read_set(c, argv[1])
    return 0 if s is None else len(s)


def _random_member(s: Any) -> bytes:
    return random.choice(tuple(s)) if type(s) is IntSet else s.random_member()


@command("spop", -2, "write fast", keys=(1, 1, 1), group="set", acl="set",
         summary="Remove and return one or multiple random members from a set",
         since="1.0.0")
def spop(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 3:
        return _spop_count(c, argv)
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    key = argv[1]
    s = _write_set(c.db, key)
    if s is None:
        return None
    ele = _random_member(s)
    s.remove(ele)
    c.propagate_argv = [b"SREM", key, ele]
    removed_elements(c, key, s, 1, NOTIFY_SET, b"spop")
    return ele


def _spop_count(c: Any, argv: list[bytes]) -> object:
    count = parse_positive_long(argv[2])
    key = argv[1]
    s = _write_set(c.db, key)
    if s is None or count == 0:
        return SetReply(())
    size = len(s)
    notify(c, NOTIFY_SET, b"spop", key)
    if count >= size:
        # The whole set: reply with it, delete the key, propagate DEL.
        c.core.dirty += size
        c.db.delete(key)
        notify(c, NOTIFY_GENERIC, b"del", key)
        c.propagate_argv = [b"DEL", key]
        return SetReply(s)
    c.core.dirty += count
    popped = random.sample(tuple(s), count) if type(s) is IntSet else s.sample(count)
    s.difference_update(popped)
    c.db.touch(key)
    # One SREM per member, like Redis 7.0's alsoPropagate loop; the last one rides on the
    # command's own propagation slot so SPOP itself is never propagated.
    core = c.core
    db_id = c.db.id
    for m in popped[:-1]:
        core.also_propagate(db_id, [b"SREM", key, m])
    c.propagate_argv = [b"SREM", key, popped[-1]]
    return SetReply(popped)


@command("srandmember", -2, "readonly", keys=(1, 1, 1), group="set", acl="set",
         summary="Get one or multiple random members from a set", since="1.0.0")
def srandmember(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 3:
        n = parse_long_range(argv[2], -LLONG_MAX, LLONG_MAX)
        s = _read_set(c, argv[1])
        if s is None or n == 0:
            return EMPTY_ARRAY
        small = type(s) is IntSet
        if n < 0:
            pool = tuple(s) if small else None
            return repeated_picks(c, -n, lambda k: random.choices(pool, k=k)
                                  if pool is not None else s.choices(k))
        if n == 1:
            return [_random_member(s)]
        if n >= len(s):
            return list(s)
        return random.sample(tuple(s), n) if small else s.sample(n)
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    s = _read_set(c, argv[1])
    if s is None:
        return None
    return _random_member(s)


@command("smove", 4, "write fast", keys=(1, 2, 1), group="set", acl="set",
         summary="Move a member from one set to another", since="1.0.0")
def smove(c: Any, argv: list[bytes]) -> object:
    src_key, dst_key, ele = argv[1], argv[2], argv[3]
    db = c.db
    src = db.lookup(src_key)
    dst = db.lookup(dst_key)
    if src is None:
        return 0
    if type(src) not in SET_TYPES or (dst is not None and type(dst) not in SET_TYPES):
        raise wrongtype()
    if src is dst:
        return 1 if ele in src else 0
    if ele not in src:
        return 0
    src.remove(ele)
    removed_elements(c, src_key, src, 1, NOTIFY_SET, b"srem")
    core = c.core
    if dst is None:
        dst = _new_set(ele)
        db.add(dst_key, dst)
        _add_members(db, dst_key, dst, [ele])
        core.dirty += 1
    elif ele not in dst:
        _add_members(db, dst_key, dst, [ele])
        db.touch(dst_key)
        core.dirty += 1
    else:
        return 1
    notify(c, NOTIFY_SET, b"sadd", dst_key)
    return 1


# -- multi-key algebra --------------------------------------------------------------------------

def _load_sets(c: Any, keys: list[bytes]) -> list[set[bytes] | None]:
    """Look up every key (type errors win over missing keys, as in Redis's loop)."""
    lookup = c.db.lookup_read
    out: list[set[bytes] | None] = []
    for k in keys:
        v = lookup(k)
        if v is not None and type(v) not in SET_TYPES:
            raise wrongtype()
        out.append(v)
    return out


def _inter(sets: list[set[bytes] | None], limit: int = 0) -> set[bytes] | int | None:
    """The intersection (None when an input is missing); with ``limit`` only a count."""
    if any(s is None for s in sets):
        return None
    ordered = sorted(cast("list[set[bytes]]", sets), key=len)   # (no None among them now)
    first = ordered[0]
    others = [s for s in ordered[1:] if s is not first]
    if limit:
        n = 0
        for m in first:
            for s in others:
                if m not in s:
                    break
            else:
                n += 1
                if n >= limit:
                    break
        return n
    return first.intersection(*others)


@command("sinter", -2, "readonly", keys=(1, -1, 1), group="set", acl="set",
         summary="Intersect multiple sets", since="1.0.0")
def sinter(c: Any, argv: list[bytes]) -> object:
    r = _inter(_load_sets(c, argv[1:]))
    return SetReply(r or ())  # type: ignore[arg-type]


@command("sintercard", -3, "readonly", keys=(0, 0, 0), group="set", acl="set",
         summary="Intersect multiple sets and return the cardinality of the result",
         since="7.0.0", keys_fn=numkeys_keys(1))
def sintercard(c: Any, argv: list[bytes]) -> object:
    numkeys = parse_long_range(argv[1], 1, LLONG_MAX, "ERR numkeys should be greater than 0")
    if numkeys > len(argv) - 2:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    limit = 0
    j = 2 + numkeys
    n = len(argv)
    while j < n:
        if argv[j].lower() == b"limit" and j < n - 1:
            j += 1
            limit = parse_positive_long(argv[j], "ERR LIMIT can't be negative")
        else:
            raise ReplyError(SYNTAX)
        j += 1
    sets = _load_sets(c, argv[2:2 + numkeys])
    r = _inter(sets, limit)
    if r is None:
        return 0
    return r if type(r) is int else len(r)  # type: ignore[arg-type]


@command("sinterstore", -3, "write denyoom", keys=(1, -1, 1), group="set", acl="set",
         summary="Intersect multiple sets and store the resulting set in a key",
         since="1.0.0")
def sinterstore(c: Any, argv: list[bytes]) -> object:
    r = _inter(_load_sets(c, argv[2:]))
    return store_or_delete(c, argv[1], intset.compact(r or ()),  # type: ignore[arg-type]
                           NOTIFY_SET, b"sinterstore")


def _union(sets: list[set[bytes] | None]) -> set[bytes]:
    out: set[bytes] = set()
    out.update(*[s for s in sets if s])
    return out


def _diff(sets: list[set[bytes] | None]) -> set[bytes]:
    first = sets[0]
    if not first:
        return set()
    rest = sets[1:]
    if any(s is first for s in rest):
        return set()
    return first.difference(*[s for s in rest if s])


# SUNION / SDIFF and their STORE forms: (name, operation, summary).
for _name, _op, _summary in (("sunion", _union, "Add multiple sets"),
                             ("sdiff", _diff, "Subtract multiple sets")):
    def _setop(c: Any, argv: list[bytes], op: Any = _op) -> object:
        return SetReply(op(_load_sets(c, argv[1:])))

    def _setop_store(c: Any, argv: list[bytes], op: Any = _op,
                     event: bytes = _name.encode() + b"store") -> object:
        return store_or_delete(c, argv[1], intset.compact(op(_load_sets(c, argv[2:]))),
                               NOTIFY_SET, event)

    command(_name, -2, "readonly", keys=(1, -1, 1), group="set", acl="set", summary=_summary,
            since="1.0.0")(_setop)
    command(_name + "store", -3, "write denyoom", keys=(1, -1, 1), group="set", acl="set",
            summary=_summary + " and store the resulting set in a key", since="1.0.0")(
        _setop_store)


# -- SSCAN ----------------------------------------------------------------------------------------

@command("sscan", -3, "readonly", keys=(1, 1, 1), group="set", acl="set",
         summary="Incrementally iterate Set elements", since="2.8.0")
def sscan(c: Any, argv: list[bytes]) -> object:
    opening = scan_opening(c, argv, _read_set)
    if opening is None:
        return [b"0", []]
    s, cursor, opts = opening
    if type(s) is IntSet:
        # An intset is answered whole, in numeric order, with cursor 0.
        cursor, members = 0, list(s)
    else:
        cursor, members = scan_page(s, cursor, opts.count)
    match = opts.match
    out = [m for m in members if m in s and (match is None or match(m))]
    return [b"%d" % cursor, out]
