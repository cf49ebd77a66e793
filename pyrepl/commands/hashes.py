"""Hash commands (Redis 7.0.15 t_hash.c semantics).

Theory of operation: a hash is kept as Redis keeps it: a small one (at most
``hash-max-listpack-entries`` fields, none longer than ``hash-max-listpack-value``) as a
:data:`pyrepl.keyspace.lphash.ListpackHash` (one listpack), a larger one as a hash table, a
:data:`pyrepl.keyspace.strtab.StrDict` of bytes -> bytes (its fields inline), converted once and for good when a write passes a limit (``_put``, Redis's
hashTypeTryConversion / hashTypeSet). Both keep insertion order, update in place and append
re-inserted fields at the end, which is the order of Redis's listpack, so HGETALL, HKEYS, HVALS
and HSCAN list a small hash's fields in Redis's order. Handlers
follow Redis's order of checks (e.g. HINCRBY parses the increment before looking the key up),
bump ``core.dirty`` only when something changed, signal WATCH with ``Database.touch`` and delete
a key whose hash became empty.

HINCRBYFLOAT computes in x87 80-bit ``long double`` as Redis does on x86-64, with the long
double helpers of ``pyrepl.commands.util`` (shared with INCRBYFLOAT): numbers are parsed like
glibc's ``strtold`` (decimal, hex, inf; no leading space, no nan), held as exact fractions
rounded to a 64-bit significand, and printed like ``%.17Lf`` with trailing zeros removed
(``ld2string(LD_STR_HUMAN)``); it is propagated as ``HSET key field <new value>``.

Field TTLs (Redis 7.4 / 8): a hash given field TTLs is a :class:`pyrepl.keyspace.hashttl.HashEx`
(a ``dict`` subclass), so every handler keeps its ListpackHash / StrDict fast path and takes
a second branch only for such hashes. Reads hide expired fields as Redis 8 does: HGET, HMGET, HEXISTS,
HSTRLEN, HSETNX, HINCRBY* expire the field they touch (HDEL propagated on a master), HGETALL,
HKEYS, HVALS, HSCAN skip expired fields, HRANDFIELD first expires them all, HLEN counts what is
stored (Redis's ``hashTypeLength(o, 0)``). HSET/HMSET clear a field's TTL, HINCRBY* keep it.
HEXPIRE & co. answer per field -2 (no field), 0 (condition not met), 1 (set), 2 (deleted: the
time is past) and propagate as ``HPEXPIREAT`` with only the fields set (HDEL for the deleted).

Keyspace events: ``hset`` (HSET, HMSET, HSETNX), ``hincrby``, ``hincrbyfloat``, ``hdel`` (then
``del`` for an emptied hash), as t_hash.c; for field TTLs those of Redis 8: ``hexpire`` (or
``hdel`` when a time already past deleted fields, then ``del`` if the hash went), ``hpersist``,
and ``hexpired`` from the lazy and active field expiry (``pyrepl.keyspace.hashttl``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import islice
from typing import Any

from pyrepl.commands.table import command, variants
from pyrepl.commands.util import (
    LLONG_MAX,
    LLONG_MIN,
    format_long_double_human,
    parse_int,
    parse_long_double,
    parse_random_count,
    remove_members,
    repeated_picks,
    round_long_double,
    scan_opening,
)
from pyrepl.errors import NOT_FLOAT, WRONGTYPE
from pyrepl.keyspace import hashttl, lphash
from pyrepl.keyspace.hashttl import (
    FIELD_EXPIRED_HASH,
    FIELD_OK,
    HFE_MAX_ABS_TIME_MSEC,
    HashEx,
    clear_ttl_on_set,
    field_state,
)
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.scan import scan_page
from pyrepl.keyspace.strtab import StrDict
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_HASH, notify
from pyrepl.resp.types import OK, Map, ReplyError

# The types a hash is held in (a HashEx is a dict with field TTLs).
HASH_TYPES = frozenset((StrDict, ListpackHash, HashEx))


def _write_hash(db: Any, key: bytes) -> Any:
    """lookupKeyWrite + checkType(OBJ_HASH): the hash, None if missing."""
    h = db.lookup(key)
    if h is not None and type(h) not in HASH_TYPES:
        raise ReplyError(WRONGTYPE)
    return h


def _read_hash(c: Any, key: bytes) -> Any:
    """lookupKeyRead + checkType(OBJ_HASH), counting keyspace hits and misses."""
    h = c.db.lookup_read(key)
    if h is not None and type(h) not in HASH_TYPES:
        raise ReplyError(WRONGTYPE)
    return h


def _hash_for_write(db: Any, key: bytes) -> Any:
    """hashTypeLookupWriteOrCreate: the hash at ``key``, created (and stored) when missing:
    a new hash is a listpack (createHashObject)."""
    h = _write_hash(db, key)
    if h is None:
        h = ListpackHash()
        db.set(key, h)
    return h


def _put(db: Any, key: bytes, h: Any, field: bytes, value: bytes) -> None:
    """hashTypeSet: store one field, converting a ListpackHash to a dict (at ``key``) when the
    field or value is too long for a listpack, or the hash got too many fields."""
    if type(h) is ListpackHash:
        limit = lphash.limits
        if len(field) > limit.value or len(value) > limit.value:
            h = lphash.to_dict(db, key, h)
        else:
            h[field] = value
            if len(h) > limit.entries:
                lphash.to_dict(db, key, h)
            return
    h[field] = value


def _set_field(c: Any, key: bytes, h: dict | None, field: bytes, value: bytes,
               event: bytes) -> None:
    """Store a computed field (HINCRBY*) and publish ``event``: the hash is created only now,
    so a command that fails on its arguments never leaves an empty hash behind."""
    db = c.db
    if h is None:
        h = ListpackHash()
        db.set(key, h)
        _put(db, key, h, field, value)
    else:
        _put(db, key, h, field, value)
        if db.watched:
            db.touch(key)
    c.core.dirty += 1
    notify(c, NOTIFY_HASH, event, key)


def _incr_field(c: Any, argv: list[bytes]) -> tuple[bytes, dict | None, bytes, bytes | None]:
    """HINCRBY*'s lookup of ``key field``: (key, the hash or None, field, its value or None).
    With field TTLs this is hashTypeGetValue(HFE_LAZY_EXPIRE): an expired field counts as
    missing (and is deleted on a master, with its hash when it was the last field)."""
    key = argv[1]
    h = _write_hash(c.db, key)
    f = argv[2]
    old = None if h is None else h.get(f)
    if old is not None and type(h) is HashEx:
        state = field_state(c, key, h, f)
        if state != FIELD_OK:
            old = None
            if state == FIELD_EXPIRED_HASH:
                h = None
    return key, h, f, old


# -- writes ------------------------------------------------------------------------------

@command("hset", -4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Set the string value of a hash field", since="2.0.0", acl="hash")
def hset(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n & 1:
        raise ReplyError("ERR wrong number of arguments for 'hset' command")
    key = argv[1]
    db = c.db
    h = db.data.get(key)
    if type(h) is not StrDict or (db.expires and key in db.expires):
        h = _hash_for_write(db, key)
        if type(h) is HashEx:
            return _hset_ex(c, key, h, argv)
        if db.watched:
            db.touch(key)
        if type(h) is ListpackHash:
            return _hset_listpack(c, key, h, argv)
    elif db.watched:
        db.touch(key)
    if n == 4:
        f = argv[2]
        created = 0 if f in h else 1
        h[f] = argv[3]
        c.core.dirty += 1
        if c.core.notify_mask & NOTIFY_HASH:
            notify(c, NOTIFY_HASH, b"hset", key)
        return created
    before = len(h)
    for i in range(2, n, 2):
        h[argv[i]] = argv[i + 1]
    c.core.dirty += (n - 2) >> 1
    if c.core.notify_mask & NOTIFY_HASH:
        notify(c, NOTIFY_HASH, b"hset", key)
    return len(h) - before


def _hset_listpack(c: Any, key: bytes, h: Any, argv: list[bytes]) -> int:
    """HSET on a ListpackHash: converted first when an argument is too long
    (hashTypeTryConversion), after a field when there are too many (hashTypeSet)."""
    db = c.db
    if not lphash.fits(islice(argv, 2, None)):
        h = lphash.to_dict(db, key, h)
    before = len(h)
    n = len(argv)
    limit = lphash.limits.entries
    for i in range(2, n, 2):
        h[argv[i]] = argv[i + 1]
        if type(h) is ListpackHash and len(h) > limit:
            h = lphash.to_dict(db, key, h)
    c.core.dirty += (n - 2) >> 1
    if c.core.notify_mask & NOTIFY_HASH:
        notify(c, NOTIFY_HASH, b"hset", key)
    return len(h) - before


def _hset_ex(c: Any, key: bytes, h: HashEx, argv: list[bytes]) -> int:
    """HSET on a hash with field TTLs: a field set loses its TTL (hashTypeSet without
    HASH_SET_KEEP_TTL); a stored but expired field counts as updated, as in Redis."""
    before = len(h)
    ttl = h.ttl
    for i in range(2, len(argv), 2):
        f = argv[i]
        if f in ttl:
            clear_ttl_on_set(h, f)
        h[f] = argv[i + 1]
    db = c.db
    if db.watched:
        db.touch(key)
    c.core.dirty += (len(argv) - 2) >> 1
    notify(c, NOTIFY_HASH, b"hset", key)
    return len(h) - before


@command("hmset", -4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Set multiple hash fields to multiple values", since="2.0.0",
         acl="hash")
def hmset(c: Any, argv: list[bytes]) -> object:
    """HSET under its old name, answering +OK (hsetCommand serves both in Redis)."""
    if len(argv) & 1:
        raise ReplyError("ERR wrong number of arguments for 'hmset' command")
    hset(c, argv)
    return OK


@command("hsetnx", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Set the value of a hash field, only if the field does not exist",
         since="2.0.0", acl="hash")
def hsetnx(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    h = _hash_for_write(db, key)
    f = argv[2]
    if f in h:
        if type(h) is not HashEx:
            return 0
        state = field_state(c, key, h, f)
        if state == FIELD_OK:
            return 0
        if state == FIELD_EXPIRED_HASH:
            h = _hash_for_write(db, key)
        else:
            clear_ttl_on_set(h, f)
    _put(db, key, h, f, argv[3])
    if db.watched:
        db.touch(key)
    c.core.dirty += 1
    notify(c, NOTIFY_HASH, b"hset", key)
    return 1


def _discard_field(h: dict, f: bytes) -> bool:
    """HDEL's removal of one field, with its TTL in a hash with field TTLs."""
    if h.pop(f, None) is None:
        return False
    if type(h) is HashEx:
        h.ttl.pop(f, None)
    return True


@command("hdel", -3, "write fast", keys=(1, 1, 1), group="hash",
         summary="Delete one or more hash fields", since="2.0.0", acl="hash")
def hdel(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    return remove_members(c, key, _write_hash(c.db, key), argv[2:], _discard_field,
                          NOTIFY_HASH, b"hdel")


@command("hincrby", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the integer value of a hash field by the given number",
         since="2.0.0", acl="hash")
def hincrby(c: Any, argv: list[bytes]) -> object:
    incr = parse_int(argv[3])
    key, h, f, old = _incr_field(c, argv)
    value = incr if old is None else parse_int(old, "ERR hash value is not an integer") + incr
    if value < LLONG_MIN or value > LLONG_MAX:
        raise ReplyError("ERR increment or decrement would overflow")
    _set_field(c, key, h, f, b"%d" % value, b"hincrby")
    return value


@command("hincrbyfloat", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the float value of a hash field by the given amount",
         since="2.6.0", acl="hash")
def hincrbyfloat(c: Any, argv: list[bytes]) -> object:
    incr = parse_long_double(argv[3])
    if incr is None:
        raise ReplyError(NOT_FLOAT)
    if isinstance(incr, float):   # (±inf; else a Fraction)
        raise ReplyError("ERR value is NaN or Infinity")
    key, h, f, old = _incr_field(c, argv)
    value = 0 if old is None else parse_long_double(old)
    if value is None:
        raise ReplyError("ERR hash value is not a float")
    if isinstance(value, float):  # a stored inf: the sum is infinite
        raise ReplyError("ERR increment would produce NaN or Infinity")
    total = round_long_double(value + incr)
    if total is None:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    text = format_long_double_human(total)
    _set_field(c, key, h, f, text, b"hincrbyfloat")
    c.propagate_argv = [b"HSET", key, f, text]
    return text


# -- reads -------------------------------------------------------------------------------

def _get_ex(c: Any, key: bytes, h: HashEx, f: bytes) -> bytes | None:
    """hashTypeGetValue(HFE_LAZY_EXPIRE) for a hash with field TTLs."""
    v = h.get(f)
    if v is None or field_state(c, key, h, f) != FIELD_OK:
        return None
    return v


@command("hget", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the value of a hash field", since="2.0.0", acl="hash")
def hget(c: Any, argv: list[bytes]) -> object:
    h = c.db.lookup_read(argv[1])
    if h is None:
        return None
    if type(h) is ListpackHash or type(h) is StrDict:
        return h.get(argv[2])
    if type(h) is HashEx:
        return _get_ex(c, argv[1], h, argv[2])
    raise ReplyError(WRONGTYPE)


@command("hmget", -3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the values of all the given hash fields", since="2.0.0", acl="hash")
def hmget(c: Any, argv: list[bytes]) -> object:
    h = _read_hash(c, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    if type(h) is HashEx:
        return _hmget_ex(c, argv[1], h, argv)
    get = h.get
    return [get(f) for f in islice(argv, 2, None)]


def _hmget_ex(c: Any, key: bytes, h: HashEx, argv: list[bytes]) -> list[bytes | None]:
    """HMGET of a hash with field TTLs: the fields expire without their own events
    (HFE_LAZY_NO_NOTIFICATION), then one ``hexpired`` (and ``del``) for the command."""
    out: list[bytes | None] = []
    expired = gone = False
    for f in islice(argv, 2, None):
        v = None if gone else h.get(f)
        if v is not None:
            state = field_state(c, key, h, f, False)
            if state != FIELD_OK:
                v = None
                expired = True
                gone = state == FIELD_EXPIRED_HASH
        out.append(v)
    if expired:
        hashttl.expired_events(c.core, c.db.id, key, gone)
    return out


def _read_field(c: Any, key: bytes, f: bytes) -> bytes | None:
    """Field ``f`` of the hash at ``key`` (type-checked; an expired field is None)."""
    h = _read_hash(c, key)
    if h is None:
        return None
    if type(h) is HashEx:
        return _get_ex(c, key, h, f)
    return h.get(f)


@command("hlen", 2, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the number of fields in a hash", since="2.0.0", acl="hash")
def hlen(c: Any, argv: list[bytes]) -> object:
    # hashTypeLength(o, 0): fields expired but not yet deleted are counted, as in Redis.
    h = _read_hash(c, argv[1])
    return 0 if h is None else len(h)


@command("hstrlen", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the length of the value of a hash field", since="3.2.0", acl="hash")
def hstrlen(c: Any, argv: list[bytes]) -> object:
    v = _read_field(c, argv[1], argv[2])
    return 0 if v is None else len(v)


@command("hexists", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Determine if a hash field exists", since="2.0.0", acl="hash")
def hexists(c: Any, argv: list[bytes]) -> object:
    return 0 if _read_field(c, argv[1], argv[2]) is None else 1


def _all_fields(c: Any, key: bytes) -> dict | None:
    """The fields HGETALL / HKEYS / HVALS list: expired ones are skipped, not deleted."""
    h = _read_hash(c, key)
    if h is None or type(h) is not HashEx:
        return h
    return hashttl.visible(c, h)  # type: ignore[arg-type]


@command("hgetall", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields and values in a hash", since="2.0.0", acl="hash")
def hgetall(c: Any, argv: list[bytes]) -> object:
    h = _all_fields(c, argv[1])
    return Map(() if h is None else h.items())


@command("hkeys", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields in a hash", since="2.0.0", acl="hash")
def hkeys(c: Any, argv: list[bytes]) -> object:
    h = _all_fields(c, argv[1])
    return [] if h is None else list(h)


@command("hvals", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the values in a hash", since="2.0.0", acl="hash")
def hvals(c: Any, argv: list[bytes]) -> object:
    h = _all_fields(c, argv[1])
    return [] if h is None else list(h.values())


# -- random fields -----------------------------------------------------------------------

def _random_source(c: Any, key: bytes) -> Any:
    """HRANDFIELD's hash: with field TTLs, hashTypeExpireIfNeeded deletes every expired field
    first (on a master; the hash may go with them); a replica only hides them."""
    h = _read_hash(c, key)
    if h is None or type(h) is not HashEx:
        return h
    if hashttl.expire_all(c, key, h):  # type: ignore[arg-type]
        return None
    v = hashttl.visible(c, h)  # type: ignore[arg-type]
    return v or None


@command("hrandfield", -2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get one or multiple random fields from a hash", since="6.2.0",
         acl="hash")
def hrandfield(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n == 2:
        h = _random_source(c, argv[1])
        if h is None:
            return None
        if type(h) is StrDict:      # a hash table: O(1), as Redis's dictGetFairRandomKey
            return h.random_key()
        return next(islice(h, random.randrange(len(h)), None))
    count, withvalues = parse_random_count(argv, b"withvalues")
    h = _random_source(c, argv[1])
    if h is None or count == 0:
        return []
    table = type(h) is StrDict
    if count < 0:
        # With repetitions: independent uniform draws (in chunks: the output limit).
        pool = None if table else list(h)
        resp3 = c.proto == 3

        def draw(n: int) -> list[Any]:
            fields = h.choices(n) if pool is None else random.choices(pool, k=n)
            if not withvalues:
                return fields
            if resp3:
                return [[f, h[f]] for f in fields]
            return [x for f in fields for x in (f, h[f])]

        return repeated_picks(c, -count, draw, 2 if withvalues and not resp3 else 1)
    if count == 1:
        picks = h.choices(1) if table else random.choices(list(h), k=1)
    elif count >= len(h):
        picks = list(h)
    else:
        picks = h.sample(count) if table else random.sample(list(h), count)
    if not withvalues:
        return picks
    if c.proto == 3:
        return [[f, h[f]] for f in picks]
    out: list[bytes] = []
    for f in picks:
        out.append(f)
        out.append(h[f])
    return out


# -- scan --------------------------------------------------------------------------------

@command("hscan", -3, "readonly", keys=(1, 1, 1), group="hash",
         summary="Incrementally iterate hash fields and associated values", since="2.8.0",
         acl="hash")
def hscan(c: Any, argv: list[bytes]) -> object:
    opening = scan_opening(c, argv, _read_hash)
    if opening is None:
        return [b"0", []]
    h, cursor, opts = opening
    if type(h) is ListpackHash or (type(h) is HashEx and hashttl.is_listpack(c.core, h)):
        # a listpack(ex): Redis answers it whole, cursor 0
        cursor, pairs = 0, h.items()
    else:
        cursor, fields = scan_page(h, cursor, opts.count)
        pairs = [(f, h.get(f)) for f in fields]
    match = opts.match
    ttl = h.ttl if type(h) is HashEx and hashttl.hidden_from_caller(c.core) else None
    now = c.core.now_ms
    out: list[bytes] = []
    for f, v in pairs:
        if v is not None and (match is None or match(f)):
            if ttl and (w := ttl.get(f)) is not None and w < now:
                continue        # expired: skipped, not deleted (as Redis's scan callback)
            out.append(f)
            out.append(v)
    return [b"%d" % cursor, out]


# -- field expiration (Redis 7.4 / 8) ----------------------------------------------------

_NX, _XX, _GT, _LT = 1, 2, 4, 8
_CONDITIONS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT}
_INT_MAX = (1 << 31) - 1
_LONG_MAX = (1 << 63) - 1


def _parse_expire_time(c: Any, arg: bytes, seconds: bool, basetime: int) -> int:
    """parseExpireTime: the absolute expiry in ms, with Redis's checks and texts."""
    val = parse_int(arg)
    if val < 0:
        raise ReplyError("ERR invalid expire time, must be >= 0")
    bad = f"ERR invalid expire time in '{argv0(c)}' command"
    if seconds:
        if val > HFE_MAX_ABS_TIME_MSEC // 1000:
            raise ReplyError(bad)
        val *= 1000
    if val > HFE_MAX_ABS_TIME_MSEC - basetime:
        raise ReplyError(bad)
    return val + basetime


def argv0(c: Any) -> str:
    """The running command's full name (c->cmd->fullname)."""
    cmd = getattr(c, "last_cmd", None)
    return cmd.name if cmd is not None else ""


def _parse_fields_count(arg: bytes, lo: int, hi: int, message: str) -> int:
    """getRangeLongFromObjectOrReply with a message: the same text for every failure."""
    try:
        n = parse_int(arg, message)
    except ReplyError:
        raise ReplyError(message) from None
    if n < lo or n > hi:
        raise ReplyError(message)
    return n


def _hexpire(c: Any, argv: list[bytes], seconds: bool, relative: bool) -> object:
    """hexpireGenericCommand: per field -2 / 0 / 1 / 2; propagated as HPEXPIREAT with the
    fields actually set, HDEL for the fields whose time was already past."""
    key = argv[1]
    db = c.db
    core = c.core
    h = _write_hash(db, key)
    when = _parse_expire_time(c, argv[2], seconds, core.now_ms if relative else 0)
    fields_pos = -1
    cond = 0
    n = len(argv)
    i = 3
    count = first = 0
    while i < n:
        arg = argv[i]
        low = arg.lower()
        if low == b"fields":
            if fields_pos != -1:
                raise ReplyError("ERR FIELDS keyword specified multiple times")
            if i >= n - 2:
                raise ReplyError("ERR FIELDS requires at least numfields and one field "
                                 "argument")
            fields_pos = i
            count = _parse_fields_count(argv[i + 1], 1, _INT_MAX,
                                        "ERR Parameter `numFields` should be greater than 0")
            first = i + 2
            if first + count > n:
                raise ReplyError("ERR wrong number of arguments")
            i = first + count
            continue
        flag = _CONDITIONS.get(low)
        if flag is None:
            raise ReplyError("ERR unknown argument: " + arg.decode("utf-8", "replace"))
        cond |= flag
        i += 1
    if fields_pos == -1:
        raise ReplyError("ERR missing FIELDS argument")
    if cond & (cond - 1):
        raise ReplyError("ERR Multiple condition flags specified")
    if h is None:
        return [-2] * count
    h = hashttl.to_hashex(db, key, h)
    hashttl.register(core, db, key, h)
    ttl = h.ttl
    # checkAlreadyExpired: never on a replica (the master's HDEL will come).
    past = when <= core.now_ms and core.expiry_deletes and not core.applying_master_stream
    replies: list[int] = []
    failed: list[int] = []
    hdels: list[list[bytes]] = []
    updated = 0
    for pos in range(first, first + count):
        f = argv[pos]
        res = 1
        if f not in h:
            res = -2
        else:
            prev = ttl.get(f)
            if prev is None:
                if cond & (_XX | _GT):
                    res = 0
            elif (cond == _GT and prev >= when) or (cond == _LT and prev <= when) or \
                    cond == _NX:
                res = 0
            if res == 1:
                if past:
                    del h[f]
                    ttl.pop(f, None)
                    hdels.append([b"HDEL", key, f])
                    res = 2
                elif prev != when or hashttl.is_listpack(core, h):
                    hashttl.set_ttl(core, h, f, when)
        if res == 1:
            updated += 1
        else:
            failed.append(pos)
        replies.append(res)
    deleted = len(hdels)
    if deleted + updated:
        core.dirty += deleted + updated
        db.touch(key)
        notify(c, NOTIFY_HASH, b"hdel" if deleted else b"hexpire", key)
    if not h:
        del db.data[key]
        if db.expires:
            db.expires.pop(key, None)
        notify(c, NOTIFY_GENERIC, b"del", key)
    if updated == 0:
        if hdels:
            for hd in hdels[:-1]:
                core.also_propagate(db.id, hd)
            c.propagate_argv = hdels[-1]
        return replies
    for hd in hdels:
        core.also_propagate(db.id, hd)
    if seconds or relative or failed:
        out = list(argv)
        if seconds or relative:
            out[0] = b"HPEXPIREAT"
            out[2] = b"%d" % when
        if failed:
            for pos in reversed(failed):
                del out[pos]
            out[fields_pos + 1] = b"%d" % updated
        c.propagate_argv = out
    return replies


# The field-TTL commands of Redis 7.4: one implementation each, (seconds, relative) per name.
_HFE: dict[str, Any] = {"keys": (1, 1, 1), "group": "hash", "acl": "hash"}

variants(_hexpire, (
    ("hexpire", "7.4.0", "Set expiry for hash field using relative time to expire (seconds)",
     (True, True)),
    ("hpexpire", "7.4.0", "Set expiry for hash field using relative time to expire "
                          "(milliseconds)", (False, True)),
    ("hexpireat", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp "
                           "(seconds)", (True, False)),
    ("hpexpireat", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp "
                            "(milliseconds)", (False, False)),
), -6, "write fast", **_HFE)


def _fields_arg(argv: list[bytes]) -> int:
    """HTTL / HPERSIST's strict ``FIELDS numfields field...`` at argv[2]."""
    if argv[2].lower() != b"fields":
        raise ReplyError("ERR Mandatory argument FIELDS is missing or not at the right "
                         "position")
    count = _parse_fields_count(argv[3], 1, _LONG_MAX,
                                "ERR Number of fields must be a positive integer")
    if count != len(argv) - 4:
        raise ReplyError("ERR The `numfields` parameter must match the number of arguments")
    return count


def _per_field(c: Any, argv: list[bytes], h: dict | None, listpack_edge: bool,
               live: Callable[[bytes, int], int]) -> list[int]:
    """The per-field answers of HTTL & co. and HPERSIST (``FIELDS numfields field...``): -2 for
    a field that is missing or expired, -1 for one without a TTL, else ``live(field, when)``.
    With ``listpack_edge`` a listpackex counts a field as expired from its expiry's own
    millisecond on (httlGenericCommand), as a hashtable does only after it."""
    count = _fields_arg(argv)
    if h is None:
        return [-2] * count
    fields = argv[4:]
    if type(h) is not HashEx:
        return [-1 if f in h else -2 for f in fields]
    ttl = h.ttl  # type: ignore[attr-defined]
    expired_before = c.core.now_ms
    if listpack_edge and hashttl.is_listpack(c.core, h):
        expired_before += 1
    out: list[int] = []
    for f in fields:
        when = ttl.get(f)
        if f not in h or (when is not None and when < expired_before):
            out.append(-2)
        elif when is None:
            out.append(-1)
        else:
            out.append(live(f, when))
    return out


def _httl(c: Any, argv: list[bytes], seconds: bool, relative: bool) -> object:
    """httlGenericCommand: per field -2 (no field, or expired), -1 (no TTL), else the TTL or
    the expiry time."""
    h = _read_hash(c, argv[1])
    base = c.core.now_ms if relative else 0

    def live(f: bytes, when: int) -> int:
        return (when + 999 - base) // 1000 if seconds else when - base

    return _per_field(c, argv, h, True, live)


variants(_httl, (
    ("httl", "7.4.0", "Returns the TTL in seconds of a hash field.", (True, True)),
    ("hpttl", "7.4.0", "Returns the TTL in milliseconds of a hash field.", (False, True)),
    ("hexpiretime", "7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, "
                             "in seconds.", (True, False)),
    ("hpexpiretime", "7.4.0", "Returns the expiration time of a hash field as a Unix "
                              "timestamp, in msec.", (False, False)),
), -5, "readonly fast", **_HFE)


@command("hpersist", -5, "write fast", keys=(1, 1, 1), group="hash",
         summary="Removes the expiration time for each specified field", since="7.4.0",
         acl="hash")
def hpersist(c: Any, argv: list[bytes]) -> object:
    """hpersistCommand: per field -2 (no field, or expired), -1 (no TTL), 1 (persisted)."""
    key = argv[1]
    db = c.db
    h = _write_hash(db, key)

    def persist(f: bytes, when: int) -> int:
        hashttl.set_ttl(c.core, h, f, None)  # type: ignore[arg-type]
        return 1

    out = _per_field(c, argv, h, False, persist)
    if 1 in out:
        db.touch(key)
        notify(c, NOTIFY_HASH, b"hpersist", key)
        c.core.dirty += 1
    return out
