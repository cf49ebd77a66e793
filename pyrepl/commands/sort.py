"""SORT and SORT_RO (Redis 7.0.15 sort.c semantics).

Theory of operation: the elements of a list, set or sorted set are sorted by their own value or
by the value found through a BY pattern (``weight_*`` a string key, ``h_*->field`` a hash
field; a pattern without ``*`` means "do not sort"), numerically (strtod rules: a value that is
not a double is an error, a missing weight counts as 0) or with ALPHA; ties of numeric sorts
are broken by comparing the elements, as Redis does. GET patterns (``#`` for the element
itself) build the reply; STORE writes the result as a list (deleting the destination when it is
empty). Without sorting, a list or sorted set keeps its own order (LIMIT applied directly) and a
set is sorted alphabetically when the result is stored, so a replica stores the same list.
Keyspace events: a stored result publishes ``sortstore`` (after ``new``), an empty one ``del``
if it removed the destination; every key lookup (the sorted key, BY and GET patterns) is a read
lookup (``keymiss`` when missing), as Redis's lookupKeyRead.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pyrepl.commands.keyspec_walk import sort_keys
from pyrepl.commands.table import command
from pyrepl.commands.util import parse_int, strtod_full
from pyrepl.errors import SYNTAX, WRONGTYPE
from pyrepl.keyspace.hashttl import HashEx, hidden_from_caller
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.lplist import compact as compact_list
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ZSETS, ListpackZSet, ZSet
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_LIST, notify
from pyrepl.resp.types import ReplyError

_C_SPACE = b" \t\n\v\f\r"


def _full_key_access(c: Any) -> bool:
    """sortCommandGeneric's user_has_full_key_access: BY patterns and GET read any key, so a
    user needs read access to every key (ACLUserCheckKeyPerm of ``*``)."""
    return not c.restricted or c.acl_user is None or c.acl_user.key_allowed(b"*")


def _sort_keys(argv: list[bytes]) -> list[int]:
    """sortGetKeys: the sorted key and the last STORE's destination. (SORT_RO has no STORE:
    its finder gives the sorted key only; both are movablekeys, as their BY/GET patterns name
    keys no finder can know.)"""
    return [pos for pos, _flags in sort_keys(argv)]


def _by_pattern(db: Any, pattern: bytes, element: bytes) -> bytes | None:
    """lookupKeyByPattern: ``#`` is the element; ``*`` is replaced by it; ``->field`` reads a
    hash field; anything else (no ``*``, a missing key, another type) gives None."""
    if pattern == b"#":
        return element
    star = pattern.find(b"*")
    if star < 0:
        return None
    arrow = pattern.find(b"->", star + 1)
    field = None
    if arrow >= 0 and arrow + 2 < len(pattern):
        field = pattern[arrow + 2:]
        key = pattern[:star] + element + pattern[star + 1:arrow]
    else:
        key = pattern[:star] + element + pattern[star + 1:]
    v = db.lookup_read(key)
    if v is None:
        return None
    if field is not None:
        if type(v) is HashEx:   # a hash with field TTLs: an expired field reads as missing
            when = v.ttl.get(field)
            if when is not None and when < db.core.now_ms and hidden_from_caller(db.core):
                return None
            return v.get(field)
        return v.get(field) if type(v) is StrDict or type(v) is ListpackHash else None
    return v if type(v) is bytes else None


def _score(text: bytes) -> float | None:
    """strtod over the whole value (leading white space skipped): None is an error."""
    if text.isdigit() and len(text) < 300:      # the common case: a plain integer
        return float(text)
    r = strtod_full(text.lstrip(_C_SPACE)) if text.lstrip(_C_SPACE) else (0.0, False)
    if r is None or r[1]:
        return None
    return r[0]


def _sort(c: Any, argv: list[bytes], readonly: bool) -> object:
    desc = alpha = dontsort = False
    limit_start, limit_count = 0, -1
    sortby: bytes | None = None
    storekey: bytes | None = None
    gets: list[bytes] = []
    j = 2
    n = len(argv)
    while j < n:
        left = n - j - 1
        opt = argv[j].lower()
        if opt == b"asc" or opt == b"desc":
            desc = opt == b"desc"
        elif opt == b"alpha":
            alpha = True
        elif opt == b"limit" and left >= 2:
            limit_start = parse_int(argv[j + 1])
            limit_count = parse_int(argv[j + 2])
            j += 2
        elif not readonly and opt == b"store" and left >= 1:
            storekey = argv[j + 1]
            j += 1
        elif opt == b"by" and left >= 1:
            sortby = argv[j + 1]
            if b"*" not in sortby:
                dontsort = True         # sticky, as Redis: a later BY pattern does not undo it
            elif not _full_key_access(c):
                raise ReplyError("ERR BY option of SORT denied due to insufficient ACL "
                                 "permissions.")
            j += 1
        elif opt == b"get" and left >= 1:
            if not _full_key_access(c):
                raise ReplyError("ERR GET option of SORT denied due to insufficient ACL "
                                 "permissions.")
            gets.append(argv[j + 1])
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    db = c.db
    value = db.lookup_read(argv[1])
    if value is not None and type(value) not in (deque, ListpackList, StrSet, IntSet, ZSet,
                                                 ListpackZSet):
        raise ReplyError(WRONGTYPE)
    if value is None:
        value = deque()
    # a set's own order is not the same on a replica or after a reload: sorted as strings when
    # stored or read by a script, so what they propagate or return does not depend on it
    if dontsort and type(value) in (StrSet, IntSet) and (storekey is not None
                                                         or c.kind == "script"):
        dontsort, alpha, sortby = False, True, None
    size = len(value)
    start = min(max(limit_start, 0), size)
    limit_count = min(max(limit_count, -1), size)
    end = size - 1 if limit_count < 0 else start + limit_count - 1
    if start >= size:
        start, end = size - 1, size - 2
    end = min(end, size - 1)

    if dontsort and type(value) in (deque, ListpackList, ZSet, ListpackZSet):
        ordered = [m for m, _ in value.items()] if type(value) in ZSETS else list(value)
        if desc:
            ordered.reverse()
        elements = ordered[start:end + 1] if end >= start else []
        start, end = 0, len(elements) - 1
    else:
        elements = [m for m, _ in value.items()] if type(value) in ZSETS else list(value)
        if not dontsort:
            elements = _sorted(c, db, elements, sortby, alpha, desc, storekey is not None)
    chosen = elements[start:end + 1] if end >= start else []
    if storekey is None:
        if not gets:
            return chosen
        return [_by_pattern(db, g, e) for e in chosen for g in gets]
    out = compact_list(chosen if not gets else
                       [_by_pattern(db, g, e) or b"" for e in chosen for g in gets])
    if out:
        db.set(storekey, out)            # setKey: any old value and its TTL go
        notify(c, NOTIFY_LIST, b"sortstore", storekey)
        c.core.dirty += len(out)
    elif db.delete(storekey):
        notify(c, NOTIFY_GENERIC, b"del", storekey)
        c.core.dirty += 1
    return len(out)


def _sorted(c: Any, db: Any, elements: list[bytes], sortby: bytes | None, alpha: bool,
            desc: bool, store: bool) -> list[bytes]:
    """sortCompare as sort keys: numeric by (score, element) so ties compare the elements as
    Redis does; ALPHA by the element or, with BY, by the weight (a missing weight first)."""
    if alpha:
        if sortby is None:
            return sorted(elements, reverse=desc)
        weights = [_by_pattern(db, sortby, e) for e in elements]
        keyed = sorted(zip(weights, elements, strict=True),
                       key=lambda t: (t[0] is not None, t[0] or b""), reverse=desc)
        return [e for _, e in keyed]
    scored = []
    for e in elements:
        by = e if sortby is None else _by_pattern(db, sortby, e)
        score = 0.0
        if by is not None:
            s = _score(by)
            if s is None:
                raise ReplyError("ERR One or more scores can't be converted into double")
            score = s
        scored.append((score, e))
    scored.sort(reverse=desc)
    return [e for _, e in scored]


@command("sort", -2, "write denyoom", keys=(1, 1, 1), group="generic",
         summary="Sort the elements in a list, set or sorted set, optionally storing the "
                 "result.", since="1.0.0", acl="set sortedset list dangerous",
         keys_fn=_sort_keys)
def sort(c: Any, argv: list[bytes]) -> object:
    return _sort(c, argv, False)


@command("sort_ro", -2, "readonly", keys=(1, 1, 1), group="generic",
         summary="Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
         since="7.0.0", acl="set sortedset list dangerous", keys_fn=lambda argv: [1])
def sort_ro(c: Any, argv: list[bytes]) -> object:
    return _sort(c, argv, True)
