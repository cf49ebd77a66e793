"""List commands (Redis 7.0.15 t_list.c semantics), the blocking ones included.

Theory of operation: a small list (one quicklist node's worth, ``list-max-listpack-size``) is a
:data:`pyrepl.keyspace.lplist.ListpackList`, one listpack as Redis's node holds it; a list that
outgrows it becomes a ``collections.deque`` of bytes for good (``_fit``), which gives O(1) pushes
and pops at both ends (Redis's quicklist); index-based commands walk from the nearer end.
Each handler follows Redis's order of checks exactly, because the order decides which error a
client sees: e.g. LRANGE and LPOP parse their integers before looking the key up, while LINDEX
and LSET look the key up (and check its type) first. Writers bump ``core.dirty`` by the number
of elements changed (nothing changed -> no bump -> nothing propagated), signal WATCH with
``Database.touch`` and delete a key whose list became empty. Propagation is the command itself,
except LMPOP which Redis rewrites to ``LPOP|RPOP key count`` with the number actually popped.

Blocking pops (BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP) act as their plain forms when a list has
elements (propagated as LPOP/RPOP/LMOVE/RPOPLPUSH), answer a null array inside MULTI, and
otherwise block the client on the keys (``pyrepl.core.blocking``); ``_serve`` pops for a blocked
client once a push made one of its keys ready, and propagates what Redis rewrites it to.

Keyspace events as t_list.c: ``lpush``/``rpush`` (after ``new`` for a created list; LPUSHX and
RPUSHX too), ``lpop``/``rpop`` by the side popped (LPOP/RPOP/LMPOP/the blocking pops, served or
not), ``linsert``, ``lset``, ``lrem``, ``ltrim`` (even when nothing was trimmed), LMOVE's push
on the destination before its pop on the source; ``del`` after the event that emptied a list.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

from pyrepl.commands.table import Handler, command, variants
from pyrepl.commands.util import (
    LLONG_MAX,
    LLONG_MIN,
    POSITIVE,
    index_range,
    keyword,
    length_command,
    numkeys_keys,
    parse_int,
    parse_long_range,
    parse_positive_long,
    pop_or_block,
    read_typed,
    removed_elements,
)
from pyrepl.errors import INDEX_OUT_OF_RANGE, NO_SUCH_KEY, SYNTAX
from pyrepl.keyspace import lplist
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.notify import NOTIFY_LIST, notify
from pyrepl.resp.types import NULL_ARRAY, OK, ReplyError

# The types a list is held in.
LIST = frozenset((deque, ListpackList))


def _list_for_push(db: Any, key: bytes) -> Any:
    """The list at ``key`` for a push (lookupKeyWrite + checkType), created when missing (as
    one listpack)."""
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        lst = ListpackList()
        db.set(key, lst)
    return lst


def _fit(db: Any, key: bytes, lst: Any) -> None:
    """After a write that may grow the list: a ListpackList that outgrew one node becomes a
    deque (at ``key``)."""
    if type(lst) is ListpackList and not lplist.fits(lst):
        lplist.to_deque(db, key, lst)


def _range(lst: Any, start: int, end: int) -> list[bytes]:
    """Elements start..end inclusive (already normalised, 0 <= start <= end < len)."""
    if type(lst) is ListpackList:
        return lst.range(start, end + 1)
    n = len(lst)
    if start <= n - 1 - end:
        return list(islice(lst, start, end + 1))
    out = list(islice(reversed(lst), n - 1 - end, n - start))
    out.reverse()
    return out


# -- pushes ------------------------------------------------------------------------------

_PUSH_EVENT = (b"rpush", b"lpush")     # by to_left
_POP_EVENT = (b"rpop", b"lpop")       # by from_left


def _push_handler(one: str, many: str, event: bytes) -> Handler:
    """LPUSH / RPUSH, given the names of the methods that add one element / many at the chosen
    end (``appendleft``/``extendleft`` or ``append``/``extend``): pushGenericCommand."""
    one_deque = getattr(deque, one)
    many_deque = getattr(deque, many)

    def push(c: Any, argv: list[bytes]) -> object:
        key = argv[1]
        db = c.db
        lst = db.data.get(key)
        if type(lst) is not deque or (db.expires and key in db.expires):
            lst = _list_for_push(db, key)
            if type(lst) is ListpackList:
                return _push_listpack(c, key, lst, argv, one, many, event)
        if len(argv) == 3:
            one_deque(lst, argv[2])
            c.core.dirty += 1
        else:
            many_deque(lst, islice(argv, 2, None))
            c.core.dirty += len(argv) - 2
        if db.watched:
            db.touch(key)
        if c.core.notify_mask & NOTIFY_LIST:
            notify(c, NOTIFY_LIST, event, key)
        return len(lst)

    return push


def _push_listpack(c: Any, key: bytes, lst: Any, argv: list[bytes], one: str, many: str,
                   event: bytes) -> int:
    """A push onto a ListpackList (a new list included), which may outgrow its node."""
    db = c.db
    if len(argv) == 3:
        getattr(lst, one)(argv[2])
    else:
        getattr(lst, many)(islice(argv, 2, None))
    c.core.dirty += len(argv) - 2
    n = len(lst)
    _fit(db, key, lst)
    if db.watched:
        db.touch(key)
    if c.core.notify_mask & NOTIFY_LIST:
        notify(c, NOTIFY_LIST, event, key)
    return n


lpush = command("lpush", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                summary="Prepend one or multiple elements to a list", since="1.0.0",
                acl="list")(_push_handler("appendleft", "extendleft", b"lpush"))
rpush = command("rpush", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
                summary="Append one or multiple elements to a list", since="1.0.0",
                acl="list")(_push_handler("append", "extend", b"rpush"))


def _pushx(c: Any, argv: list[bytes], many: str, event: bytes) -> object:
    """LPUSHX / RPUSHX: push only onto an existing list (``many`` as for _push_handler)."""
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        return 0
    getattr(lst, many)(islice(argv, 2, None))
    c.core.dirty += len(argv) - 2
    _fit(db, key, lst)
    if db.watched:
        db.touch(key)
    notify(c, NOTIFY_LIST, event, key)
    return len(lst)


@command("lpushx", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
         summary="Prepend an element to a list, only if the list exists", since="2.2.0",
         acl="list")
def lpushx(c: Any, argv: list[bytes]) -> object:
    return _pushx(c, argv, "extendleft", b"lpush")


@command("rpushx", -3, "write denyoom fast", keys=(1, 1, 1), group="list",
         summary="Append an element to a list, only if the list exists", since="2.2.0",
         acl="list")
def rpushx(c: Any, argv: list[bytes]) -> object:
    return _pushx(c, argv, "extend", b"rpush")


# -- pops --------------------------------------------------------------------------------

def _pop(c: Any, argv: list[bytes], left: bool) -> object:
    n = len(argv)
    if n > 3:
        raise ReplyError(f"ERR wrong number of arguments for '{'lpop' if left else 'rpop'}' "
                         "command")
    count = parse_positive_long(argv[2], POSITIVE) if n == 3 else 0
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        return NULL_ARRAY if n == 3 else None
    if n == 2:
        v = lst.popleft() if left else lst.pop()
        removed_elements(c, key, lst, 1, NOTIFY_LIST, _POP_EVENT[left])
        return v
    if count == 0:
        return []
    out = _pop_many(lst, count, left)
    removed_elements(c, key, lst, len(out), NOTIFY_LIST, _POP_EVENT[left])
    return out


def _pop_many(lst: deque, count: int, left: bool) -> list[bytes]:
    """Pop up to ``count`` elements from the head (``left``) or the tail, in pop order."""
    if count >= len(lst):
        out = list(lst)
        if not left:
            out.reverse()
        lst.clear()
        return out
    p = lst.popleft if left else lst.pop
    return [p() for _ in range(count)]


variants(_pop, (
    ("lpop", "1.0.0", "Remove and get the first elements in a list", (True,)),
    ("rpop", "1.0.0", "Remove and get the last elements in a list", (False,)),
), -2, "write fast", keys=(1, 1, 1), group="list", acl="list")


def _mpop_args(argv: list[bytes], at: int) -> tuple[list[bytes], bool, int]:
    """``numkeys key [key ...] LEFT|RIGHT [COUNT count]`` from ``argv[at]`` on (LMPOP,
    BLMPOP): the keys, the side, the count (1 by default)."""
    numkeys = parse_long_range(argv[at], 1, LLONG_MAX, "ERR numkeys should be greater than 0")
    where_idx = at + 1 + numkeys
    n = len(argv)
    if where_idx >= n:
        raise ReplyError(SYNTAX)
    left = keyword(argv[where_idx], _LEFT)
    count = -1
    j = where_idx + 1
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j + 1 < n:
            count = parse_long_range(argv[j + 1], 1, LLONG_MAX,
                                     "ERR count should be greater than 0")
            j += 2
        else:
            raise ReplyError(SYNTAX)
    return argv[at + 1:where_idx], left, 1 if count == -1 else count


@command("lmpop", -4, "write", group="list", summary="Pop elements from a list",
         since="7.0.0", keys_fn=numkeys_keys(1), acl="list")
def lmpop(c: Any, argv: list[bytes]) -> object:
    keys, left, count = _mpop_args(argv, 1)
    db = c.db
    for key in keys:
        lst = db.lookup_typed(key, LIST)
        if not lst:
            continue
        out = _pop_many(lst, count, left)
        removed_elements(c, key, lst, len(out), NOTIFY_LIST, _POP_EVENT[left])
        c.propagate_argv = [b"LPOP" if left else b"RPOP", key, b"%d" % len(out)]
        return [key, out]
    return NULL_ARRAY


# -- reads -------------------------------------------------------------------------------

command("llen", 2, "readonly fast", keys=(1, 1, 1), group="list",
        summary="Get the length of a list", since="1.0.0", acl="list")(
    length_command(LIST))


@command("lrange", 4, "readonly", keys=(1, 1, 1), group="list",
         summary="Get a range of elements from a list", since="1.0.0", acl="list")
def lrange(c: Any, argv: list[bytes]) -> object:
    start = parse_int(argv[2])
    end = parse_int(argv[3])
    lst = read_typed(c, argv[1], LIST)
    if lst is None:
        return []
    rng = index_range(start, end, len(lst))
    return [] if rng is None else _range(lst, *rng)


@command("lindex", 3, "readonly", keys=(1, 1, 1), group="list",
         summary="Get an element from a list by its index", since="1.0.0", acl="list")
def lindex(c: Any, argv: list[bytes]) -> object:
    lst = read_typed(c, argv[1], LIST)
    if lst is None:
        return None
    index = parse_int(argv[2])
    n = len(lst)
    if -n <= index < n:
        return lst[index]
    return None


_RANK_ZERO = ("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second "
              "... or use negative to start from the end of the list")


@command("lpos", -3, "readonly", keys=(1, 1, 1), group="list",
         summary="Return the index of matching elements on a list", since="6.0.6",
         acl="list")
def lpos(c: Any, argv: list[bytes]) -> object:
    ele = argv[2]
    rank = 1
    count = -1
    maxlen = 0
    n = len(argv)
    j = 3
    while j < n:
        opt = argv[j].lower()
        more = j + 1 < n
        if opt == b"rank" and more:
            rank = parse_int(argv[j + 1])
            if rank == 0:
                raise ReplyError(_RANK_ZERO)
        elif opt == b"count" and more:
            count = parse_positive_long(argv[j + 1], "ERR COUNT can't be negative")
        elif opt == b"maxlen" and more:
            maxlen = parse_positive_long(argv[j + 1], "ERR MAXLEN can't be negative")
        else:
            raise ReplyError(SYNTAX)
        j += 2
    lst = read_typed(c, argv[1], LIST)
    if lst is None:
        return [] if count != -1 else None
    limit = count
    if rank == LLONG_MIN:
        # Redis 7.0 negates LONG_MIN in place (it stays negative): every match qualifies,
        # the search runs from the tail and the COUNT limit overflows away.
        rank = 1
        reverse = True
        limit = 0
    elif rank < 0:
        rank = -rank
        reverse = True
    else:
        reverse = False
    size = len(lst)
    it = reversed(lst) if reverse else iter(lst)
    if maxlen:
        it = islice(it, maxlen)
    matches = 0
    out: list[int] = []
    for index, x in enumerate(it):
        if x == ele:
            matches += 1
            if matches >= rank:
                pos = size - index - 1 if reverse else index
                if count == -1:
                    return pos
                out.append(pos)
                if limit and matches - rank + 1 >= limit:
                    break
    return out if count != -1 else None


# -- in-place writes ---------------------------------------------------------------------

@command("lset", 4, "write denyoom", keys=(1, 1, 1), group="list",
         summary="Set the value of an element in a list by its index", since="1.0.0",
         acl="list")
def lset(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        raise ReplyError(NO_SUCH_KEY)
    index = parse_int(argv[2])
    n = len(lst)
    if not -n <= index < n:
        raise ReplyError(INDEX_OUT_OF_RANGE)
    lst[index] = argv[3]
    _fit(db, key, lst)
    if db.watched:
        db.touch(key)
    notify(c, NOTIFY_LIST, b"lset", key)
    c.core.dirty += 1
    return OK


@command("lrem", 4, "write", keys=(1, 1, 1), group="list",
         summary="Remove elements from a list", since="1.0.0", acl="list")
def lrem(c: Any, argv: list[bytes]) -> object:
    toremove = parse_int(argv[2])
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        return 0
    ele = argv[3]
    if toremove < 0:
        toremove = -toremove
        src: Any = reversed(lst)
    else:
        src = lst
    kept: list[bytes] = []
    removed = 0
    if toremove == 0:
        kept = [x for x in lst if x != ele]
        removed = len(lst) - len(kept)
    else:
        for x in src:
            if removed < toremove and x == ele:
                removed += 1
            else:
                kept.append(x)
        if src is not lst:
            kept.reverse()
    if removed:
        lst.clear()
        lst.extend(kept)
        removed_elements(c, key, lst, removed, NOTIFY_LIST, b"lrem")
    return removed


@command("ltrim", 4, "write", keys=(1, 1, 1), group="list",
         summary="Trim a list to the specified range", since="1.0.0", acl="list")
def ltrim(c: Any, argv: list[bytes]) -> object:
    start = parse_int(argv[2])
    end = parse_int(argv[3])
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        return OK
    n = len(lst)
    rng = index_range(start, end, n)
    left, right = (n, 0) if rng is None else (rng[0], n - rng[1] - 1)  # elements to drop
    if left + right >= n:
        lst.clear()
    elif left + right > n - left - right:  # keeping fewer than dropping: copy what stays
        kept = _range(lst, left, n - right - 1)
        lst.clear()
        lst.extend(kept)
    else:
        for _ in range(left):
            lst.popleft()
        for _ in range(right):
            lst.pop()
    removed_elements(c, key, lst, left + right, NOTIFY_LIST, b"ltrim")
    return OK


@command("linsert", 5, "write denyoom", keys=(1, 1, 1), group="list",
         summary="Insert an element before or after another element in a list", since="2.2.0",
         acl="list")
def linsert(c: Any, argv: list[bytes]) -> object:
    after = keyword(argv[2], {b"after": True, b"before": False})
    key = argv[1]
    db = c.db
    lst = db.lookup_typed(key, LIST)
    if lst is None:
        return 0
    try:
        i = lst.index(argv[3])
    except ValueError:
        return -1
    lst.insert(i + 1 if after else i, argv[4])
    n = len(lst)
    _fit(db, key, lst)
    if db.watched:
        db.touch(key)
    notify(c, NOTIFY_LIST, b"linsert", key)
    c.core.dirty += 1
    return n


# -- moves -------------------------------------------------------------------------------

# getListPositionFromObjectOrReply: LEFT -> True, RIGHT -> False.
_LEFT = {b"left": True, b"right": False}


def _move(c: Any, src_key: bytes, dst_key: bytes, from_left: bool, to_left: bool) -> object:
    db = c.db
    src = db.lookup_typed(src_key, LIST)
    if not src:
        return None
    dst = db.lookup_typed(dst_key, LIST)
    v = src.popleft() if from_left else src.pop()
    if dst is None:
        dst = ListpackList()
        db.set(dst_key, dst)
    if to_left:
        dst.appendleft(v)
    else:
        dst.append(v)
    _fit(db, dst_key, dst)
    if db.watched:
        db.touch(dst_key)
    notify(c, NOTIFY_LIST, _PUSH_EVENT[to_left], dst_key)
    removed_elements(c, src_key, src, 1, NOTIFY_LIST, _POP_EVENT[from_left])
    return v


@command("lmove", 5, "write denyoom", keys=(1, 2, 1), group="list",
         summary="Pop an element from a list, push it to another list and return it",
         since="6.2.0", acl="list")
def lmove(c: Any, argv: list[bytes]) -> object:
    from_left = keyword(argv[3], _LEFT)
    to_left = keyword(argv[4], _LEFT)
    return _move(c, argv[1], argv[2], from_left, to_left)


@command("rpoplpush", 3, "write denyoom", keys=(1, 2, 1), group="list",
         summary="Remove the last element in a list, prepend it to another list and return it",
         since="1.2.0", acl="list")
def rpoplpush(c: Any, argv: list[bytes]) -> object:
    return _move(c, argv[1], argv[2], False, True)



# -- blocking pops -----------------------------------------------------------------------

_LEFT_RIGHT = (b"right", b"left")   # getStringObjectFromListPosition (shared.left: lowercase)


def _serve_pop(left: bool, count: int) -> Any:
    """serveClientBlockedOnList for BLPOP/BRPOP (count -1) and BLMPOP: the reply of the pop,
    propagated as [LR]POP key [n] first."""

    def serve(c: Any, key: bytes, lst: deque) -> object:
        name = b"LPOP" if left else b"RPOP"
        if count == -1:
            c.core.also_propagate(c.db.id, [name, key])
            v = lst.popleft() if left else lst.pop()
            removed_elements(c, key, lst, 1, NOTIFY_LIST, _POP_EVENT[left])
            return [key, v]
        c.core.also_propagate(c.db.id, [name, key, b"%d" % min(count, len(lst))])
        out = _pop_many(lst, count, left)
        removed_elements(c, key, lst, len(out), NOTIFY_LIST, _POP_EVENT[left])
        return [key, out]

    return serve


def _serve_move(dst_key: bytes, from_left: bool, to_left: bool, rpoplpush: bool) -> Any:
    """serveClientBlockedOnList for BLMOVE/BRPOPLPUSH: WRONGTYPE when the destination is not a
    list (nothing popped), else the move, propagated as LMOVE ... LEFT|RIGHT or RPOPLPUSH."""

    def serve(c: Any, key: bytes, lst: deque) -> object:
        v = _move(c, key, dst_key, from_left, to_left)
        argv = [b"RPOPLPUSH", key, dst_key] if rpoplpush else \
            [b"LMOVE", key, dst_key, _LEFT_RIGHT[from_left], _LEFT_RIGHT[to_left]]
        c.core.also_propagate(c.db.id, argv)
        return v

    return serve


def _blocking_pop(c: Any, keys: list[bytes], left: bool, timeout_arg: bytes,
                  count: int) -> object:
    """blockingPopGenericCommand: pop from the first non-empty list, else block (count -1:
    BLPOP/BRPOP's [key, element]; else BLMPOP's [key, [elements]])."""

    def pop_now(key: bytes, lst: deque) -> object:
        name = b"LPOP" if left else b"RPOP"
        if count != -1:
            c.propagate_argv = [name, key, b"%d" % min(count, len(lst))]
            out = _pop_many(lst, count, left)
            removed_elements(c, key, lst, len(out), NOTIFY_LIST, _POP_EVENT[left])
            return [key, out]
        v = lst.popleft() if left else lst.pop()
        removed_elements(c, key, lst, 1, NOTIFY_LIST, _POP_EVENT[left])
        c.propagate_argv = [name, key]
        return [key, v]

    return pop_or_block(c, keys, LIST, "list", timeout_arg, pop_now, _serve_pop(left, count))


@command("blpop", -3, "write noscript blocking", keys=(1, -2, 1), group="list",
         summary="Remove and get the first element in a list, or block until one is available",
         since="2.0.0", acl="list")
def blpop(c: Any, argv: list[bytes]) -> object:
    return _blocking_pop(c, argv[1:-1], True, argv[-1], -1)


@command("brpop", -3, "write noscript blocking", keys=(1, -2, 1), group="list",
         summary="Remove and get the last element in a list, or block until one is available",
         since="2.0.0", acl="list")
def brpop(c: Any, argv: list[bytes]) -> object:
    return _blocking_pop(c, argv[1:-1], False, argv[-1], -1)


@command("blmpop", -5, "write blocking", group="list",
         summary="Pop elements from a list, or block until one is available", since="7.0.0",
         keys_fn=numkeys_keys(2), acl="list")
def blmpop(c: Any, argv: list[bytes]) -> object:
    keys, left, count = _mpop_args(argv, 2)
    return _blocking_pop(c, keys, left, argv[1], count)


def _blocking_move(c: Any, argv: list[bytes], from_left: bool, to_left: bool,
                   timeout_arg: bytes, rpoplpush: bool) -> object:
    """blmoveGenericCommand: LMOVE when the source has elements, else block on it (a null
    reply where blocking is denied)."""
    dst = argv[2]

    def move_now(src: bytes, lst: deque) -> object:
        v = _move(c, src, dst, from_left, to_left)
        c.propagate_argv = [b"RPOPLPUSH", src, dst] if rpoplpush else \
            [b"LMOVE", src, dst, argv[3], argv[4]]
        return v

    return pop_or_block(c, [argv[1]], LIST, "list", timeout_arg, move_now,
                        _serve_move(dst, from_left, to_left, rpoplpush), denied=None)


@command("blmove", 6, "write denyoom noscript blocking", keys=(1, 2, 1), group="list",
         summary="Pop an element from a list, push it to another list and return it; or block "
                 "until one is available", since="6.2.0", acl="list")
def blmove(c: Any, argv: list[bytes]) -> object:
    from_left = keyword(argv[3], _LEFT)
    to_left = keyword(argv[4], _LEFT)
    return _blocking_move(c, argv, from_left, to_left, argv[5], False)


@command("brpoplpush", 4, "write denyoom noscript blocking", keys=(1, 2, 1), group="list",
         summary="Pop an element from a list, push it to another list and return it; or block "
                 "until one is available", since="2.2.0", acl="list")
def brpoplpush(c: Any, argv: list[bytes]) -> object:
    return _blocking_move(c, argv, False, True, argv[3], True)
