"""Sorted set commands (Redis 7.0.15's t_zset.c).

ZADD ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT ZLEXCOUNT ZRANK ZREVRANK ZRANGE ZREVRANGE
ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZRANGESTORE ZREMRANGEBYRANK
ZREMRANGEBYSCORE ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZMPOP ZRANDMEMBER ZUNION ZINTER ZDIFF
ZINTERCARD ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZSCAN, and the blocking pops BZPOPMIN BZPOPMAX
BZMPOP (``pyrepl.core.blocking``: they pop at once when a sorted set has members, propagated as
ZPOPMIN/ZPOPMAX, and otherwise block; a blocked client is served when a key gets a sorted set).

Theory of operation: values are :class:`pyrepl.keyspace.zset.ZSet` (member -> score dict plus
an ordered list of (score, member)). Handlers mirror Redis's functions step by step because
the order of checks decides which error a client sees: options, then ranges, then the key
lookup, then the type check.

Number parsing is Redis's, not Python's:

* scores, increments and weights use ``string2d`` (``pyrepl.commands.util.parse_float``,
  strict ``strtod``): no leading space, no trailing garbage, hex floats and ``inf``/
  ``infinity`` accepted, NaN rejected, overflow to +-inf and underflow to zero rejected;
* score ranges (``min``/``max``) use bare ``strtod`` (``util.strtod_full``): leading white
  space is skipped, an empty string is 0, overflow gives +-inf, the text stops at a NUL byte;
  "(" makes a bound exclusive;
* lex ranges are "-", "+", "(member" or "[member" (sdscmplex semantics).

Lex ranges only make sense when all scores are equal; then they are answered by bisection.
When scores differ Redis's answer depends on the encoding; we reproduce the listpack
(small sorted set) walk literally, which is what a real server gives for the sets small
enough that anyone could notice.

Replies: doubles are floats (RESP3 ``,``; RESP2 bulk strings with ``%.17g``). WITHSCORES
gives a flat array in RESP2 and an array of [member, score] pairs in RESP3, as Redis 7.0.

Keyspace events as t_zset.c: ``zadd`` / ``zincr`` (ZINCRBY, ZADD INCR) when a member was added
or updated (after ``new``), ``zrem``, ``zremrangebyrank|score|lex``, ``zpopmin`` / ``zpopmax``
(once per pop, blocking or not), ``zrangestore``, ``zunionstore`` / ``zinterstore`` /
``zdiffstore``; ``del`` after the event that emptied a sorted set or for a destination that an
empty result removed.
"""

from __future__ import annotations

import math
import random
from typing import Any

from pyrepl.commands.table import command, variants
from pyrepl.commands.util import (
    C_SPACE,
    LLONG_MAX,
    index_range,
    keyword,
    length_command,
    numkeys_keys,
    parse_float,
    parse_int,
    parse_long_range,
    parse_positive_long,
    parse_random_count,
    pop_or_block,
    read_typed,
    remove_members,
    removed_elements,
    repeated_picks,
    scan_opening,
    store_or_delete,
    string2d,
    strtod_full,
)
from pyrepl.errors import NOT_FLOAT, SYNTAX, wrongtype
from pyrepl.keyspace import zset as zsets
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.scan import scan_page
from pyrepl.keyspace.strtab import StrSet
from pyrepl.keyspace.zset import ADDED, ZSETS, ListpackZSet, ZSet
from pyrepl.notify import NOTIFY_ZSET, notify
from pyrepl.resp.types import NULL_ARRAY, ReplyError

RANGE_NOT_FLOAT = "ERR min or max is not a float"
RANGE_NOT_LEX = "ERR min or max not valid string range item"
NAN_ERR = "ERR resulting score is not a number (NaN)"
EMPTY: list[Any] = []

# What most sorted-set commands are registered with (a key at argv[1]).
_ZSET: dict[str, Any] = {"keys": (1, 1, 1), "group": "sorted-set", "acl": "sortedset"}

# -- range parsing ------------------------------------------------------------------------------

def _range_strtod(s: bytes) -> float | None:
    """``strtod(s, &eptr)`` with ``eptr[0] == '\\0'`` and not NaN required (zslParseRange)."""
    if s.isdigit():   # (the common bound: decimal digits alone, which float reads as strtod)
        return float(s)
    nul = s.find(b"\x00")
    if nul >= 0:
        s = s[:nul]
    if not s:
        return 0.0
    body = s.lstrip(C_SPACE)
    r = strtod_full(body) if body else None
    if r is None:
        return None
    return r[0]


def parse_score_range(lo: bytes, hi: bytes) -> tuple[float, bool, float, bool]:
    """zslParseRange: (min, minex, max, maxex) or ``ERR min or max is not a float``."""
    out: list[Any] = []
    for b in (lo, hi):
        ex = b[:1] == b"("
        v = _range_strtod(b[1:] if ex else b)
        if v is None:
            raise ReplyError(RANGE_NOT_FLOAT)
        out += (v, ex)
    return out[0], out[1], out[2], out[3]


# A lex bound is (kind, value, exclusive): kind -1 is "-" (below everything), 1 is "+",
# 0 a real string.
LexBound = tuple[int, bytes, bool]


def _parse_lex_item(b: bytes) -> LexBound | None:
    if not b:
        return None
    c0 = b[0]
    if c0 == 43 or c0 == 45:  # '+' / '-': only alone (the C string ends at a NUL)
        if len(b) > 1 and b[1] != 0:
            return None
        return (1 if c0 == 43 else -1), b"", True
    if c0 == 40:  # '('
        return 0, b[1:], True
    if c0 == 91:  # '['
        return 0, b[1:], False
    return None


def parse_lex_range(lo: bytes, hi: bytes) -> tuple[LexBound, LexBound]:
    a = _parse_lex_item(lo)
    b = _parse_lex_item(hi) if a is not None else None
    if a is None or b is None:
        raise ReplyError(RANGE_NOT_LEX)
    return a, b


def _cmplex(a: LexBound, b: LexBound) -> int:
    """sdscmplex: compare two bounds ("-"/"+" are the shared min/max strings)."""
    if a[0] == b[0] and a[0] != 0:
        return 0
    if a[0] == -1 or b[0] == 1:
        return -1
    if a[0] == 1 or b[0] == -1:
        return 1
    return (a[1] > b[1]) - (a[1] < b[1])


def _gte_min(m: bytes, lo: LexBound) -> bool:
    kind = lo[0]
    if kind:
        return kind < 0
    return m > lo[1] if lo[2] else m >= lo[1]


def _lte_max(m: bytes, hi: LexBound) -> bool:
    kind = hi[0]
    if kind:
        return kind > 0
    return m < hi[1] if hi[2] else m <= hi[1]


def _lex_empty(z: ZSet, lo: LexBound, hi: LexBound) -> bool:
    """zzlIsInLexRange negated: the range is empty or misses the set's ends."""
    cmp = _cmplex(lo, hi)
    if cmp > 0 or (cmp == 0 and (lo[2] or hi[2])):
        return True
    if not len(z):
        return True
    return not _gte_min(z.last()[1], lo) or not _lte_max(z.first()[1], hi)


def _lex_bisect(z: ZSet, score: float, bound: LexBound, upper: bool) -> int:
    """For a set whose scores are all ``score``: the index of the first member that is
    >= the lower ``bound`` (``upper`` False) or that is past the upper ``bound``."""
    kind, v, ex = bound
    if kind:
        return 0 if kind < 0 else len(z)
    if ex != upper:  # (v as lower bound or [v as upper bound: first member > v
        return z.member_bisect(score, v + b"\x00")
    return z.member_bisect(score, v)


def lex_first(z: ZSet, lo: LexBound, hi: LexBound) -> int:
    """Index of the first member in range (zzlFirstInLexRange), or -1."""
    if _lex_empty(z, lo, hi):
        return -1
    first, last = z.first(), z.last()
    if first[0] == last[0]:
        i = _lex_bisect(z, first[0], lo, False)
    else:
        i = 0
        for _s, m in z.iter_from(0):
            if _gte_min(m, lo):
                break
            i += 1
    if i >= len(z) or not _lte_max(z.at(i)[1], hi):
        return -1
    return i


def lex_last(z: ZSet, lo: LexBound, hi: LexBound) -> int:
    """Index of the last member in range (zzlLastInLexRange), or -1."""
    if _lex_empty(z, lo, hi):
        return -1
    first, last = z.first(), z.last()
    if first[0] == last[0]:
        i = _lex_bisect(z, first[0], hi, True) - 1
    else:
        i = len(z) - 1
        for _s, m in z.iter_back_from(i):
            if _lte_max(m, hi):
                break
            i -= 1
    if i < 0 or not _gte_min(z.at(i)[1], lo):
        return -1
    return i


def lex_end(z: ZSet, start: int, hi: LexBound) -> int:
    """Index just past the run from ``start`` whose members satisfy the upper bound."""
    first, last = z.first(), z.last()
    if first[0] == last[0]:
        return max(start, _lex_bisect(z, first[0], hi, True))
    j = start
    for _s, m in z.iter_from(start):
        if not _lte_max(m, hi):
            break
        j += 1
    return j


# -- replies ----------------------------------------------------------------------------------

def _with_scores(items: list[tuple[float, bytes]], proto: int) -> list[Any]:
    """[member, score] pairs for RESP3, a flat member, score array for RESP2."""
    if proto == 3:
        return [[m, s] for s, m in items]
    out: list[Any] = [None] * (2 * len(items))
    if items:   # (members at the even places, scores at the odd ones: slice stores, C speed)
        scores, members = zip(*items, strict=True)
        out[0::2] = members
        out[1::2] = scores
    return out


# -- ZADD / ZINCRBY -----------------------------------------------------------------------------

_NX, _XX, _GT, _LT, _INCR, _CH = 1, 2, 4, 8, 16, 32
_ZADD_OPTS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT, b"incr": _INCR, b"ch": _CH}


def _zadd_generic(c: Any, argv: list[bytes], flags: int) -> object:
    n = len(argv)
    j = 2
    opts = _ZADD_OPTS
    while j < n:
        f = opts.get(argv[j].lower())
        if f is None:
            break
        flags |= f
        j += 1
    elements = n - j
    if elements & 1 or not elements:
        raise ReplyError(SYNTAX)
    if flags:
        nx, xx = flags & _NX, flags & _XX
        gt, lt = flags & _GT, flags & _LT
        if nx and xx:
            raise ReplyError("ERR XX and NX options at the same time are not compatible")
        if (gt and nx) or (lt and nx) or (gt and lt):
            raise ReplyError(
                "ERR GT, LT, and/or NX options at the same time are not compatible")
        if flags & _INCR and elements > 2:
            raise ReplyError("ERR INCR option supports a single increment-element pair")
    scores = []
    for k in range(j, n, 2):
        s = argv[k]
        v = float(s) if s.isdigit() and len(s) < 300 else string2d(s)
        if v is None:
            raise ReplyError(NOT_FLOAT)
        scores.append(v)
    key = argv[1]
    db = c.db
    z = db.lookup(key)
    if z is None:
        if flags & _XX:
            return None if flags & _INCR else 0
        z = zsets.new_for(argv[j + 1])
        db.add(key, z)
    elif type(z) not in ZSETS:
        raise wrongtype()
    if type(z) is ListpackZSet:
        return _zadd_flags(c, argv, j, flags, scores, z, key)
    if not flags:  # plain ZADD
        added = 0
        changed = 0
        set_score = z.set_score
        for k in range(len(scores)):
            r = set_score(argv[j + 2 * k + 1], scores[k])
            if r:
                changed += 1
                if r == ADDED:
                    added += 1
        if changed:
            c.core.dirty += changed
            db.touch(key)
            if c.core.notify_mask & NOTIFY_ZSET:
                notify(c, NOTIFY_ZSET, b"zadd", key)
        return added
    return _zadd_flags(c, argv, j, flags, scores, z, key)


def _zadd_flags(c: Any, argv: list[bytes], j: int, flags: int, scores: list[float], z: Any,
                key: bytes) -> object:
    incr = flags & _INCR
    nx, xx = flags & _NX, flags & _XX
    gt, lt = flags & _GT, flags & _LT
    added = updated = processed = 0
    score = 0.0
    db = c.db
    for k in range(len(scores)):
        score = scores[k]
        m = argv[j + 2 * k + 1]
        cur = z.score(m)
        if cur is not None:
            if nx:
                continue
            if incr:
                score += cur
                if math.isnan(score):
                    if added or updated:
                        c.db.touch(key)
                    raise ReplyError(NAN_ERR)
            if (lt and score >= cur) or (gt and score <= cur):
                continue
            processed += 1
            if score != cur:
                z.add(m, score)
                updated += 1
        elif not xx:
            z = zsets.room_for(db, key, z, m)
            z.add(m, score)
            added += 1
            processed += 1
    c.core.dirty += added + updated
    if added or updated:
        c.db.touch(key)
        notify(c, NOTIFY_ZSET, b"zincr" if incr else b"zadd", key)
    if incr:
        return score if processed else None
    return added + updated if flags & _CH else added


@command("zadd", -4, "write denyoom fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Add one or more members to a sorted set, or update its score if it already "
                 "exists", since="1.2.0")
def zadd(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 4:
        # The benchmarked form, ZADD key <integer score> member: no option can look like
        # digits, so go straight to the insert (same checks, same order as below).
        s = argv[2]
        if s.isdigit() and len(s) < 300:
            db = c.db
            key = argv[1]
            z = db.data.get(key)
            if type(z) is not ZSet or db.expires:   # new, another type, or TTLs to check
                z = zsets.room_for(db, key, _zadd_target(db, key, argv[3]), argv[3])
            r = z.set_score(argv[3], float(s))
            if r:
                core = c.core
                core.dirty += 1
                if db.watched:
                    db.touch(key)
                if core.notify_mask & NOTIFY_ZSET:
                    notify(c, NOTIFY_ZSET, b"zadd", key)
                return 1 if r == ADDED else 0
            return 0
    return _zadd_generic(c, argv, 0)


def _zadd_target(db: Any, key: bytes, member: bytes) -> Any:
    """The sorted set ZADD writes ``member`` to: the key's (a lookup, which expires it if
    due), a new one stored at the key, or WRONGTYPE."""
    z = db.lookup(key)
    if z is None:
        z = zsets.new_for(member)
        db.add(key, z)
    elif type(z) not in ZSETS:
        raise wrongtype()
    return z


@command("zincrby", 4, "write denyoom fast", keys=(1, 1, 1), group="sorted-set",
         acl="sortedset", summary="Increment the score of a member in a sorted set",
         since="1.2.0")
def zincrby(c: Any, argv: list[bytes]) -> object:
    return _zadd_generic(c, argv, _INCR)


# -- ZREM and simple reads ----------------------------------------------------------------------

@command("zrem", -3, "write fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Remove one or more members from a sorted set", since="1.2.0")
def zrem(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    return remove_members(c, key, c.db.lookup_typed(key, ZSETS), argv[2:], _remove_member,
                          NOTIFY_ZSET, b"zrem")


def _remove_member(z: Any, member: bytes) -> bool:
    return z.remove(member)


command("zcard", 2, "readonly fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
        summary="Get the number of members in a sorted set", since="1.2.0")(
    length_command(ZSETS))


@command("zscore", 3, "readonly fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Get the score associated with the given member in a sorted set",
         since="1.2.0")
def zscore(c: Any, argv: list[bytes]) -> object:
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return None
    return z.score(argv[2])


@command("zmscore", -3, "readonly fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Get the score associated with the given members in a sorted set",
         since="6.2.0")
def zmscore(c: Any, argv: list[bytes]) -> object:
    return member_scores(c, argv)


def member_scores(c: Any, argv: list[bytes]) -> list[float | None]:
    """ZMSCORE (and GEOPOS / GEOHASH): the score of each member of argv[2:] in the sorted set
    at argv[1], None for a member (or a key) that is missing."""
    z = read_typed(c, argv[1], ZSETS)
    scores = {} if z is None else z.dict
    return [scores.get(m) for m in argv[2:]]


def _zrank(c: Any, argv: list[bytes], reverse: bool) -> object:
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return None
    r = z.rank(argv[2])
    if r is None:
        return None
    return len(z) - 1 - r if reverse else r


variants(_zrank, (
    ("zrank", "2.0.0", "Determine the index of a member in a sorted set", (False,)),
    ("zrevrank", "2.0.0", "Determine the index of a member in a sorted set, with scores "
                          "ordered from high to low", (True,)),
), 3, "readonly fast", **_ZSET)


@command("zcount", 4, "readonly fast", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Count the members in a sorted set with scores within the given values",
         since="2.0.0")
def zcount(c: Any, argv: list[bytes]) -> object:
    lo, loex, hi, hiex = parse_score_range(argv[2], argv[3])
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return 0
    n = z.score_stop(hi, hiex) - z.score_start(lo, loex)
    return n if n > 0 else 0


@command("zlexcount", 4, "readonly fast", keys=(1, 1, 1), group="sorted-set",
         acl="sortedset", summary="Count the number of members in a sorted set between a "
                                  "given lexicographical range", since="2.8.9")
def zlexcount(c: Any, argv: list[bytes]) -> object:
    lo, hi = parse_lex_range(argv[2], argv[3])
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return 0
    i = lex_first(z, lo, hi)
    if i < 0:
        return 0
    return lex_end(z, i, hi) - i


# -- ranges ---------------------------------------------------------------------------------------

RANK, SCORE, LEX = 1, 2, 3
AUTO, FORWARD, REVERSE = 0, 1, 2


def _select_rank(z: ZSet, start: int, end: int, reverse: bool) -> list[tuple[float, bytes]]:
    n = len(z)
    rng = index_range(start, end, n)
    if rng is None:
        return []
    start, end = rng
    if reverse:
        items = z.range(n - 1 - end, n - start)
        items.reverse()
        return items
    return z.range(start, end + 1)


def _take(it: Any, offset: int, limit: int) -> list[tuple[float, bytes]]:
    """Skip ``offset`` items then take ``limit`` (negative: all), as Redis's loops do."""
    out = []
    for item in it:
        if offset:
            offset -= 1
            continue
        if limit == 0:
            break
        limit -= 1
        out.append(item)
    return out


def _select_score(z: ZSet, rng: tuple[float, bool, float, bool], offset: int, limit: int,
                  reverse: bool) -> list[tuple[float, bytes]]:
    if (offset > 0 and offset >= len(z)) or offset < 0:
        return []
    lo, loex, hi, hiex = rng
    start = z.score_start(lo, loex)
    stop = z.score_stop(hi, hiex)
    if start >= stop:
        return []
    if reverse:
        top = stop - 1 - offset
        if top < start:
            return []
        bottom = start if limit < 0 else max(start, top - limit + 1)
        items = z.range(bottom, top + 1)
        items.reverse()
        return items
    first = start + offset
    last = stop if limit < 0 else min(stop, first + limit)
    return z.range(first, last)


def _select_lex(z: ZSet, lo: LexBound, hi: LexBound, offset: int, limit: int,
                reverse: bool) -> list[tuple[float, bytes]]:
    if offset < 0:
        return []
    if reverse:
        i = lex_last(z, lo, hi)
        if i < 0:
            return []
        out = []
        for item in z.iter_back_from(i - offset):
            if limit == 0 or not _gte_min(item[1], lo):
                break
            limit -= 1
            out.append(item)
        return out
    i = lex_first(z, lo, hi)
    if i < 0:
        return []
    out = []
    for item in z.iter_from(i + offset):
        if limit == 0 or not _lte_max(item[1], hi):
            break
        limit -= 1
        out.append(item)
    return out


def zrange_generic(c: Any, argv: list[bytes], argc_start: int, store: bool, rangetype: int,
                   direction: int) -> object:
    """zrangeGenericCommand: ZRANGE, ZRANGESTORE and the older Z[REV]RANGE[BY*] forms."""
    key = argv[argc_start]
    minidx, maxidx = argc_start + 1, argc_start + 2
    withscores = False
    offset, limit = 0, -1
    n = len(argv)
    j = argc_start + 3
    while j < n:
        left = n - j - 1
        opt = argv[j].lower()
        if not store and opt == b"withscores":
            withscores = True
        elif opt == b"limit" and left >= 2:
            offset = parse_int(argv[j + 1])
            limit = parse_int(argv[j + 2])
            j += 2
        elif direction == AUTO and opt == b"rev":
            direction = REVERSE
        elif rangetype == AUTO and opt == b"bylex":
            rangetype = LEX
        elif rangetype == AUTO and opt == b"byscore":
            rangetype = SCORE
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if direction == AUTO:
        direction = FORWARD
    if rangetype == AUTO:
        rangetype = RANK
    if limit != -1 and rangetype == RANK:
        raise ReplyError("ERR syntax error, LIMIT is only supported in combination with either "
                         "BYSCORE or BYLEX")
    if withscores and rangetype == LEX:
        raise ReplyError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    reverse = direction == REVERSE
    if reverse and rangetype != RANK:
        minidx, maxidx = maxidx, minidx
    if rangetype == RANK:
        start = parse_int(argv[minidx])
        end = parse_int(argv[maxidx])
    elif rangetype == SCORE:
        srange = parse_score_range(argv[minidx], argv[maxidx])
    else:
        lo, hi = parse_lex_range(argv[minidx], argv[maxidx])
    z = c.db.lookup_read(key)
    if z is None:
        if store:
            return store_or_delete(c, argv[1], ZSet(), NOTIFY_ZSET, b"zrangestore")
        return EMPTY
    if type(z) not in ZSETS:
        raise wrongtype()
    if rangetype == RANK:
        items = _select_rank(z, start, end, reverse)
    elif rangetype == SCORE:
        items = _select_score(z, srange, offset, limit, reverse)
    else:
        items = _select_lex(z, lo, hi, offset, limit, reverse)
    if store:
        return store_or_delete(c, argv[1], zsets.compact((m, s) for s, m in items),
                               NOTIFY_ZSET, b"zrangestore")
    if withscores:
        return _with_scores(items, c.proto)
    return [m for _s, m in items]


@command("zrange", -4, "readonly", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Return a range of members in a sorted set", since="1.2.0")
def zrange(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 4:  # the common ZRANGE key start stop
        start = parse_int(argv[2])
        end = parse_int(argv[3])
        z = read_typed(c, argv[1], ZSETS)
        if z is None:
            return EMPTY
        return [m for _s, m in _select_rank(z, start, end, False)]
    return zrange_generic(c, argv, 1, False, AUTO, AUTO)


@command("zrangestore", -5, "write denyoom", keys=(1, 2, 1), group="sorted-set",
         acl="sortedset", summary="Store a range of members from sorted set into another key",
         since="6.2.0")
def zrangestore(c: Any, argv: list[bytes]) -> object:
    return zrange_generic(c, argv, 2, True, AUTO, AUTO)


# The older forms of ZRANGE: zrange_generic(c, argv, 1, False, <rangetype>, <direction>).
variants(zrange_generic, (
    ("zrevrange", "1.2.0", "Return a range of members in a sorted set, by index, with scores "
                           "ordered from high to low", (1, False, RANK, REVERSE)),
    ("zrangebyscore", "1.0.5", "Return a range of members in a sorted set, by score",
     (1, False, SCORE, FORWARD)),
    ("zrevrangebyscore", "2.2.0", "Return a range of members in a sorted set, by score, with "
                                  "scores ordered from high to low", (1, False, SCORE, REVERSE)),
    ("zrangebylex", "2.8.9", "Return a range of members in a sorted set, by lexicographical "
                             "range", (1, False, LEX, FORWARD)),
    ("zrevrangebylex", "2.8.9", "Return a range of members in a sorted set, by lexicographical "
                                "range, ordered from higher to lower strings.",
     (1, False, LEX, REVERSE)),
), -4, "readonly", **_ZSET)


# -- range removal --------------------------------------------------------------------------------

_ZREMRANGE_EVENT = {RANK: b"zremrangebyrank", SCORE: b"zremrangebyscore",
                    LEX: b"zremrangebylex"}


def _zremrange(c: Any, argv: list[bytes], rangetype: int) -> object:
    if rangetype == RANK:
        start = parse_int(argv[2])
        end = parse_int(argv[3])
    elif rangetype == SCORE:
        lo, loex, hi, hiex = parse_score_range(argv[2], argv[3])
    else:
        llo, lhi = parse_lex_range(argv[2], argv[3])
    key = argv[1]
    z = c.db.lookup_typed(key, ZSETS)
    if z is None:
        return 0
    if rangetype == RANK:
        rng = index_range(start, end, len(z))
        if rng is None:
            return 0
        first, stop = rng[0], rng[1] + 1
    elif rangetype == SCORE:
        first = z.score_start(lo, loex)
        stop = z.score_stop(hi, hiex)
    else:
        first = lex_first(z, llo, lhi)
        stop = -1 if first < 0 else lex_end(z, first, lhi)
    deleted = z.delete_range(first, stop) if first >= 0 and stop > first else 0
    if deleted:
        removed_elements(c, key, z, deleted, NOTIFY_ZSET, _ZREMRANGE_EVENT[rangetype])
    return deleted


variants(_zremrange, (
    ("zremrangebyrank", "2.0.0", "Remove all members in a sorted set within the given indexes",
     (RANK,)),
    ("zremrangebyscore", "1.2.0", "Remove all members in a sorted set within the given scores",
     (SCORE,)),
    ("zremrangebylex", "2.8.9", "Remove all members in a sorted set between the given "
                                "lexicographical range", (LEX,)),
), 4, "write", **_ZSET)


# -- pops -----------------------------------------------------------------------------------------

def _zpop(c: Any, key: bytes, z: ZSet, count: int, reverse: bool) -> list[tuple[float, bytes]]:
    n = min(count, len(z))
    items = [z.pop_last() for _ in range(n)] if reverse else [z.pop_first() for _ in range(n)]
    removed_elements(c, key, z, n, NOTIFY_ZSET, b"zpopmax" if reverse else b"zpopmin")
    return items


def _zpop_command(c: Any, argv: list[bytes], reverse: bool) -> object:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    count = -1
    if len(argv) == 3:
        count = parse_positive_long(argv[2])
    key = argv[1]
    z = c.db.lookup_typed(key, ZSETS)
    if z is None or count == 0:
        return EMPTY
    items = _zpop(c, key, z, 1 if count == -1 else count, reverse)
    if c.proto == 3 and count != -1:
        return [[m, s] for s, m in items]
    return _with_scores(items, 2)


variants(_zpop_command, (
    ("zpopmin", "5.0.0", "Remove and return members with the lowest scores in a sorted set",
     (False,)),
    ("zpopmax", "5.0.0", "Remove and return members with the highest scores in a sorted set",
     (True,)),
), -2, "write fast", **_ZSET)


def _zmpop_args(argv: list[bytes], at: int) -> tuple[list[bytes], bool, int]:
    """``numkeys key [key ...] MIN|MAX [COUNT count]`` from ``argv[at]`` on (ZMPOP, BZMPOP):
    the keys, whether MAX, the count (1 by default)."""
    numkeys = parse_long_range(argv[at], 1, LLONG_MAX, "ERR numkeys should be greater than 0")
    where_idx = at + 1 + numkeys
    n = len(argv)
    if where_idx >= n:
        raise ReplyError(SYNTAX)
    where = argv[where_idx].lower()
    if where not in (b"min", b"max"):
        raise ReplyError(SYNTAX)
    count = -1
    j = where_idx + 1
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j < n - 1:
            j += 1
            count = parse_long_range(argv[j], 1, LLONG_MAX, "ERR count should be greater than 0")
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return argv[at + 1:where_idx], where == b"max", 1 if count == -1 else count


@command("zmpop", -4, "write", keys=(0, 0, 0), group="sorted-set", acl="sortedset",
         summary="Remove and return members with scores in a sorted set", since="7.0.0",
         keys_fn=numkeys_keys(1))
def zmpop(c: Any, argv: list[bytes]) -> object:
    keys, is_max, count = _zmpop_args(argv, 1)
    where = b"max" if is_max else b"min"
    for key in keys:
        z = c.db.lookup_typed(key, ZSETS)
        if z is None:
            continue
        popped = min(count, len(z))
        items = _zpop(c, key, z, count, where == b"max")
        c.propagate_argv = [b"ZPOPMAX" if where == b"max" else b"ZPOPMIN", key,
                            b"%d" % popped]
        return [key, [[m, s] for s, m in items]]
    return NULL_ARRAY


# -- blocking pops ---------------------------------------------------------------------------------

def _bzpop(c: Any, key: bytes, z: ZSet, count: int,
           reverse: bool) -> tuple[object, list[bytes]]:
    """genericZpopCommand with the key emitted: BZPOPMIN/BZPOPMAX's flat [key, member, score]
    (count -1), BZMPOP's [key, [[member, score], ...]]; and the ZPOPMIN|ZPOPMAX key [n] that
    Redis propagates for it."""
    name = b"ZPOPMAX" if reverse else b"ZPOPMIN"
    if count == -1:
        s, m = _zpop(c, key, z, 1, reverse)[0]
        return [key, m, s], [name, key]
    argv = [name, key, b"%d" % min(count, len(z))]
    items = _zpop(c, key, z, count, reverse)
    return [key, [[m, s] for s, m in items]], argv


def _serve_zpop(count: int, reverse: bool) -> Any:
    """serveClientsBlockedOnSortedSetKey for one blocked client."""

    def serve(c: Any, key: bytes, z: ZSet) -> object:
        reply, argv = _bzpop(c, key, z, count, reverse)
        c.core.also_propagate(c.db.id, argv)
        return reply

    return serve


def _blocking_zpop(c: Any, keys: list[bytes], reverse: bool, timeout_arg: bytes,
                   count: int) -> object:
    """blockingGenericZpopCommand: pop from the first non-empty sorted set, else block (a null
    array inside MULTI)."""

    def pop_now(key: bytes, z: ZSet) -> object:
        reply, c.propagate_argv = _bzpop(c, key, z, count, reverse)
        return reply

    return pop_or_block(c, keys, ZSETS, "zset", timeout_arg, pop_now,
                        _serve_zpop(count, reverse))


def _bzpop_command(c: Any, argv: list[bytes], reverse: bool) -> object:
    """BZPOPMIN / BZPOPMAX key [key ...] timeout."""
    return _blocking_zpop(c, argv[1:-1], reverse, argv[-1], -1)


variants(_bzpop_command, (
    ("bzpopmin", "5.0.0", "Remove and return the member with the lowest score from one or more "
                          "sorted sets, or block until one is available", (False,)),
    ("bzpopmax", "5.0.0", "Remove and return the member with the highest score from one or "
                          "more sorted sets, or block until one is available", (True,)),
), -3, "write noscript fast blocking", keys=(1, -2, 1), group="sorted-set", acl="sortedset")


@command("bzmpop", -5, "write blocking", group="sorted-set", acl="sortedset", since="7.0.0",
         summary="Remove and return members with scores in a sorted set or block until one is "
                 "available", keys_fn=numkeys_keys(2))
def bzmpop(c: Any, argv: list[bytes]) -> object:
    keys, is_max, count = _zmpop_args(argv, 2)
    return _blocking_zpop(c, keys, is_max, argv[1], count)


@command("zrandmember", -2, "readonly", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Get one or multiple random elements from a sorted set", since="6.2.0")
def zrandmember(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n >= 3:
        count, withscores = parse_random_count(argv, b"withscores")
        z = read_typed(c, argv[1], ZSETS)
        if z is None or count == 0:
            return EMPTY
        if count < 0:
            pool = tuple(z.dict.items())
            proto = c.proto

            def draw(n: int) -> list[Any]:
                picked = random.choices(pool, k=n)
                if withscores:
                    return _with_scores([(s, m) for m, s in picked], proto)
                return [m for m, _s in picked]

            return repeated_picks(c, -count, draw, 2 if withscores and proto == 2 else 1)
        if count == 1:
            picked = random.choices(tuple(z.dict.items()), k=1)
            items = [(s, m) for m, s in picked]
        elif count >= len(z):
            items = z.range(0, len(z))  # the whole set, walked from the tail as Redis does
            items.reverse()
        else:
            picked = random.sample(tuple(z.dict.items()), count)
            items = [(s, m) for m, s in picked]
        if withscores:
            return _with_scores(items, c.proto)
        return [m for _s, m in items]
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return None
    return random.choice(tuple(z.dict))


# -- ZUNION / ZINTER / ZDIFF (and their STORE forms) -------------------------------------------

SUM, MIN, MAX = 1, 2, 3
UNION, INTER, DIFF = 1, 2, 3


def _aggregate(target: float, val: float, agg: int) -> float:
    if agg == SUM:
        t = target + val
        return 0.0 if t != t else t
    if agg == MIN:
        return val if val < target else target
    return val if val > target else target


def _src_items(obj: Any) -> Any:
    """(member, score) pairs of a zset or a set (members of a plain set score 1)."""
    if obj is None:
        return ()
    if type(obj) in ZSETS:
        return obj.items()
    return ((m, 1.0) for m in obj)


def _src_score(obj: Any, member: bytes) -> float | None:
    if type(obj) in ZSETS:
        return obj.score(member)
    return 1.0 if member in obj else None


_STORE_EVENT = {UNION: b"zunionstore", INTER: b"zinterstore", DIFF: b"zdiffstore"}


def zsetop_generic(c: Any, argv: list[bytes], dstkey: bytes | None, numkeys_index: int,
                   op: int, cardinality_only: bool = False) -> object:
    """zunionInterDiffGenericCommand."""
    setnum = parse_int(argv[numkeys_index])
    if setnum < 1:
        name = argv[0].decode("utf-8", "replace").lower()
        raise ReplyError(f"ERR at least 1 input key is needed for '{name}' command")
    n = len(argv)
    if setnum > n - (numkeys_index + 1):
        raise ReplyError(SYNTAX)
    srcs: list[Any] = []
    lookup = c.db.lookup_read
    j = numkeys_index + 1
    for _ in range(setnum):
        obj = lookup(argv[j])
        if obj is not None and type(obj) not in ZSETS and type(obj) is not StrSet and \
                type(obj) is not IntSet:
            raise wrongtype()
        srcs.append(obj)
        j += 1
    weights = [1.0] * setnum
    agg = SUM
    withscores = False
    limit = 0
    while j < n:
        remaining = n - j
        opt = argv[j].lower()
        if op != DIFF and not cardinality_only and remaining >= setnum + 1 \
                and opt == b"weights":
            j += 1
            for i in range(setnum):
                weights[i] = parse_float(argv[j], "ERR weight value is not a float")
                j += 1
        elif op != DIFF and not cardinality_only and remaining >= 2 and opt == b"aggregate":
            agg = keyword(argv[j + 1], {b"sum": SUM, b"min": MIN, b"max": MAX})
            j += 2
        elif not dstkey and not cardinality_only and opt == b"withscores":
            withscores = True
            j += 1
        elif cardinality_only and remaining >= 2 and opt == b"limit":
            limit = parse_positive_long(argv[j + 1], "ERR LIMIT can't be negative")
            j += 2
        else:
            raise ReplyError(SYNTAX)
    pairs: list[tuple[Any, float]] = list(zip(srcs, weights, strict=True))
    if op != DIFF:
        pairs.sort(key=lambda p: 0 if p[0] is None else len(p[0]))
    result: dict[bytes, float] = {}
    cardinality = 0
    if op == INTER:
        first, w0 = pairs[0]
        if first is not None and len(first):
            for m, s in _src_items(first):
                score = w0 * s
                if score != score:
                    score = 0.0
                for obj, w in pairs[1:]:
                    if obj is first:
                        score = _aggregate(score, s * w, agg)
                        continue
                    v = None if obj is None else _src_score(obj, m)
                    if v is None:
                        break
                    score = _aggregate(score, v * w, agg)
                else:
                    if cardinality_only:
                        cardinality += 1
                        if limit and cardinality >= limit:
                            break
                    else:
                        result[m] = score
    elif op == UNION:
        for obj, w in pairs:
            if obj is None:
                continue
            for m, s in _src_items(obj):
                score = w * s
                if score != score:
                    score = 0.0
                old = result.get(m)
                result[m] = score if old is None else _aggregate(old, score, agg)
    else:
        first = pairs[0][0]
        if first is not None and len(first):
            others = [obj for obj, _w in pairs[1:]]
            if not any(o is first for o in others):
                others = [o for o in others if o is not None and len(o)]
                for m, s in _src_items(first):
                    for o in others:
                        if _src_score(o, m) is not None:
                            break
                    else:
                        result[m] = s
    if cardinality_only:
        return cardinality
    if dstkey is not None:
        return store_or_delete(c, dstkey, zsets.compact(result.items()), NOTIFY_ZSET,
                               _STORE_EVENT[op])
    # Replied from the computed scores (a -0 result shows as "-0", as in Redis).
    items = sorted([(s, m) for m, s in result.items()])
    if withscores:
        return _with_scores(items, c.proto)
    return [m for _s, m in items]


def _register_setops(store: bool, variants: tuple[tuple[str, int, str, str], ...]) -> None:
    """ZUNION / ZINTER / ZDIFF and their STORE forms: ``(name, op, summary, since)``, each
    calling :func:`zsetop_generic` (the destination at argv[1] for a STORE form)."""
    for name, op, summary, since in variants:
        if store:
            def handler(c: Any, argv: list[bytes], op: int = op) -> object:
                return zsetop_generic(c, argv, argv[1], 2, op)
            command(name, -4, "write denyoom", keys=(1, 1, 1), group="sorted-set",
                    acl="sortedset", summary=summary, since=since,
                    keys_fn=numkeys_keys(2, 1))(handler)
        else:
            def handler(c: Any, argv: list[bytes], op: int = op) -> object:
                return zsetop_generic(c, argv, None, 1, op)
            command(name, -3, "readonly", keys=(0, 0, 0), group="sorted-set", acl="sortedset",
                    summary=summary, since=since, keys_fn=numkeys_keys(1))(handler)


_register_setops(True, (
    ("zunionstore", UNION, "Add multiple sorted sets and store the resulting sorted set in a "
                           "new key", "2.0.0"),
    ("zinterstore", INTER, "Intersect multiple sorted sets and store the resulting sorted set "
                           "in a new key", "2.0.0"),
    ("zdiffstore", DIFF, "Subtract multiple sorted sets and store the resulting sorted set in "
                         "a new key", "6.2.0"),
))
_register_setops(False, (
    ("zunion", UNION, "Add multiple sorted sets", "6.2.0"),
    ("zinter", INTER, "Intersect multiple sorted sets", "6.2.0"),
    ("zdiff", DIFF, "Subtract multiple sorted sets", "6.2.0"),
))


@command("zintercard", -3, "readonly", keys=(0, 0, 0), group="sorted-set", acl="sortedset",
         summary="Intersect multiple sorted sets and return the cardinality of the result",
         since="7.0.0", keys_fn=numkeys_keys(1))
def zintercard(c: Any, argv: list[bytes]) -> object:
    return zsetop_generic(c, argv, None, 1, INTER, cardinality_only=True)


# -- ZSCAN ----------------------------------------------------------------------------------------

def _ld2string(score: float) -> bytes:
    if score in (math.inf, -math.inf):
        return b"inf" if score > 0 else b"-inf"
    return b"%.17g" % score


@command("zscan", -3, "readonly", keys=(1, 1, 1), group="sorted-set", acl="sortedset",
         summary="Incrementally iterate sorted sets elements and associated scores",
         since="2.8.0")
def zscan(c: Any, argv: list[bytes]) -> object:
    opening = scan_opening(c, argv, lambda c, key: read_typed(c, key, ZSETS))
    if opening is None:
        return [b"0", []]
    z, cursor, opts = opening
    match = opts.match
    out: list[bytes] = []
    if type(z) is ListpackZSet:
        # A listpack is answered whole, in order, with cursor 0 and its stored score text.
        for s, m in z.range(0, len(z)):
            if match is None or match(m):
                out.append(m)
                out.append(zsets.d2string(s))
        return [b"0", out]
    d = z.dict
    cursor, members = scan_page(d, cursor, opts.count)
    for m in members:
        s = d.get(m)
        if s is not None and (match is None or match(m)):
            out.append(m)
            out.append(_ld2string(s))
    return [b"%d" % cursor, out]
