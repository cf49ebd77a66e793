"""String commands (Redis 7.0.15 t_string.c semantics).

Theory of operation: a string value is ``bytes``. Each handler follows Redis's order of
checks, because that order decides which error a client sees (e.g. SET parses its options,
then its expire time, then does GET's type check; GETRANGE parses its integers before the
lookup). Reads that Redis does with ``lookupKeyRead`` count keyspace hits/misses
(``Database.lookup_read``); writes look keys up without counting, which also lazily expires
them. Every change bumps ``core.dirty`` exactly where Redis does ``server.dirty++``: a command
that changed nothing is therefore not propagated.

Propagation rewrites, as Redis 7.0: SET/SETEX/PSETEX with an expire -> ``SET k v PXAT ms``;
SET ... GET without an expire -> the command minus its GET tokens; GETSET -> ``SET k v``;
GETDEL -> ``DEL k``; GETEX -> ``PEXPIREAT k ms`` / ``PERSIST k`` / ``DEL k`` (EXAT/PXAT in the
past); INCRBYFLOAT -> ``SET k v KEEPTTL`` with the resulting text.

Keyspace events as t_string.c: ``set`` (SET family, MSET per key, GETSET), then ``expire`` when
SET had an expire; ``setrange``, ``append``, ``incrby`` (INCR/DECR/INCRBY/DECRBY),
``incrbyfloat``; GETDEL ``del``; GETEX ``expire`` / ``persist`` / ``del``. With notifications
on, plain SET and the counters leave their fast paths (one test of ``notify_mask``).

INCRBYFLOAT computes in x87 80-bit ``long double`` like Redis on x86-64 (the long double
helpers of ``pyrepl.commands.util``, shared with HINCRBYFLOAT): the operands are parsed with
strtold's correct rounding to a 64-bit significand, added and rounded once, and printed as
``%.17Lf`` with trailing zeros removed. The counters keep the texts of 0..9999 shared (as
Redis shares those integer objects) and INCR has a fast path for an existing small canonical
integer without a TTL; everything else goes through the general counter code. LCS keeps
Redis's table walk (and so its choice among equally long answers and its IDX ranges) but
computes the table bit-parallel, one integer per row.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from pyrepl import native
from pyrepl.commands.table import command, whole_run
from pyrepl.commands.util import (
    LLONG_MAX,
    LLONG_MIN,
    format_long_double_human,
    length_command,
    option_token,
    parse_int,
    parse_long_double,
    read_typed,
    round_long_double,
)
from pyrepl.errors import NOT_FLOAT, OVERFLOW, SYNTAX, WRONGTYPE
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_KEY_MISS, NOTIFY_NEW, NOTIFY_STRING, notify
from pyrepl.resp.types import OK, Map, ReplyError

_MAX_BULK = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

# SET / GETEX option flags (Redis's OBJ_* names)
_NX = 1
_XX = 2
_EX = 4
_PX = 8
_KEEPTTL = 16
_GET = 32
_EXAT = 64
_PXAT = 128
_PERSIST = 256
_ANY_EXPIRE = _EX | _PX | _EXAT | _PXAT
_EXPIRE_OPTS = {b"ex": _EX, b"px": _PX, b"exat": _EXAT, b"pxat": _PXAT}


def _check_length(c: Any, size: int, append: int) -> None:
    """checkStringLength: the master link is exempt from proto-max-bulk-len."""
    if not c.must_obey() and size + append > c.core.config.proto_max_bulk_len:
        raise ReplyError(_MAX_BULK)


def _invalid_expire(name: str) -> ReplyError:
    return ReplyError(f"ERR invalid expire time in '{name}' command")


def _parse_extended(argv: list[bytes], is_set: bool) -> tuple[int, bytes | None]:
    """parseExtendedStringArgumentsOrReply: (flags, expire argument)."""
    flags = 0
    expire = None
    j = 3 if is_set else 2
    n = len(argv)
    while j < n:
        opt = option_token(argv[j])
        has_next = j + 1 < n
        if opt == b"nx" and is_set and not flags & _XX:
            flags |= _NX
        elif opt == b"xx" and is_set and not flags & _NX:
            flags |= _XX
        elif opt == b"get" and is_set:
            flags |= _GET
        elif opt == b"keepttl" and is_set and not flags & (_PERSIST | _ANY_EXPIRE):
            flags |= _KEEPTTL
        elif opt == b"persist" and not is_set and not flags & (_ANY_EXPIRE | _KEEPTTL):
            flags |= _PERSIST
        elif has_next and opt in _EXPIRE_OPTS and \
                not flags & (_KEEPTTL | _PERSIST | (_ANY_EXPIRE ^ _EXPIRE_OPTS[opt])):
            flags |= _EXPIRE_OPTS[opt]  # the same unit may repeat (the last one wins)
            expire = argv[j + 1]
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return flags, expire


def _expire_ms(c: Any, arg: bytes, flags: int, name: str) -> int:
    """getExpireMillisecondsOrReply: the absolute unix time in ms."""
    ms = parse_int(arg)
    seconds = not flags & (_PX | _PXAT)
    if ms <= 0 or (seconds and ms > LLONG_MAX // 1000):
        raise _invalid_expire(name)
    if seconds:
        ms *= 1000
    if flags & (_EX | _PX):
        ms += c.core.now_ms
        if ms > LLONG_MAX:  # the C addition wraps negative
            raise _invalid_expire(name)
    return ms


def _set_generic(c: Any, argv: list[bytes], flags: int, key: bytes, val: bytes,
                 expire: bytes | None, name: str, ok_reply: object = OK,
                 abort_reply: object = None) -> object:
    ms = 0
    if expire is not None:
        ms = _expire_ms(c, expire, flags, name)
    old = None
    if flags & _GET:
        old = read_typed(c, key, bytes)
    db = c.db
    found = db.lookup(key) is not None
    if (flags & _NX and found) or (flags & _XX and not found):
        return old if flags & _GET else abort_reply
    db.set(key, val, keep_ttl=bool(flags & _KEEPTTL))
    c.core.dirty += 1
    notify(c, NOTIFY_STRING, b"set", key)
    if expire is not None:
        db.set_expire(key, ms)
        c.propagate_argv = [b"SET", key, val, b"PXAT", b"%d" % ms]
        notify(c, NOTIFY_GENERIC, b"expire", key)
    elif flags & _GET:
        c.propagate_argv = argv[:3] + [a for a in argv[3:] if option_token(a) != b"get"]
    return old if flags & _GET else ok_reply


# -- SET family -------------------------------------------------------------------------------

@command("set", -3, "write denyoom", keys=(1, 1, 1), group="string",
         summary="Set the string value of a key", since="1.0.0", acl="string")
def set_(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 3 and not c.core.notify_mask:  # the hot path: plain SET key value
        db = c.db
        key = argv[1]
        exp = db.expires
        if exp and key in exp:
            db.expire_if_needed(key)
            exp.pop(key, None)
        db.data[key] = argv[2]
        if db.watched:
            db.touch(key)
        c.core.dirty += 1
        return OK
    flags, expire = _parse_extended(argv, True)
    return _set_generic(c, argv, flags, argv[1], argv[2], expire, "set")


@command("setnx", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Set the value of a key, only if the key does not exist", since="1.0.0",
         acl="string")
def setnx(c: Any, argv: list[bytes]) -> object:
    return _set_generic(c, argv, _NX, argv[1], argv[2], None, "setnx", 1, 0)


@command("setex", 4, "write denyoom", keys=(1, 1, 1), group="string",
         summary="Set the value and expiration of a key", since="2.0.0", acl="string")
def setex(c: Any, argv: list[bytes]) -> object:
    return _set_generic(c, argv, _EX, argv[1], argv[3], argv[2], "setex")


@command("psetex", 4, "write denyoom", keys=(1, 1, 1), group="string",
         summary="Set the value and expiration in milliseconds of a key", since="2.6.0",
         acl="string")
def psetex(c: Any, argv: list[bytes]) -> object:
    return _set_generic(c, argv, _PX, argv[1], argv[3], argv[2], "psetex")


@command("mset", -3, "write denyoom", keys=(1, -1, 2), group="string",
         summary="Set multiple keys to multiple values", since="1.0.1", acl="string")
def mset(c: Any, argv: list[bytes]) -> object:
    return _mset(c, argv, False)


@command("msetnx", -3, "write denyoom", keys=(1, -1, 2), group="string",
         summary="Set multiple keys to multiple values, only if none of the keys exist",
         since="1.0.1", acl="string")
def msetnx(c: Any, argv: list[bytes]) -> object:
    return _mset(c, argv, True)


def _mset(c: Any, argv: list[bytes], nx: bool) -> object:
    n = len(argv)
    if n % 2 == 0:
        raise ReplyError(f"ERR wrong number of arguments for '{'msetnx' if nx else 'mset'}' "
                         "command")
    db = c.db
    if nx:
        for j in range(1, n, 2):
            if db.lookup(argv[j]) is not None:
                return 0
    mask = c.core.notify_mask
    if db.expires or db.watched or mask & (NOTIFY_STRING | NOTIFY_NEW):
        notifying = mask & NOTIFY_STRING
        for j in range(1, n, 2):
            key = argv[j]
            db.set(key, argv[j + 1])
            if notifying:
                notify(c, NOTIFY_STRING, b"set", key)
    else:   # (no TTL to clear, no WATCH to signal, no event: db.set is the store alone)
        data = db.data
        for j in range(1, n, 2):
            data[argv[j]] = argv[j + 1]
    c.core.dirty += (n - 1) // 2
    return 1 if nx else OK


# -- GET family -------------------------------------------------------------------------------

@command("get", 2, "readonly fast", keys=(1, 1, 1), group="string",
         summary="Get the value of a key", since="1.0.0", acl="string")
def get(c: Any, argv: list[bytes]) -> object:
    db = c.db
    key = argv[1]
    v = db.data.get(key)
    if v is None or (db.expires and key in db.expires and db.expire_if_needed(key)):
        c.core.stats.keyspace_misses += 1
        if c.core.notify_mask & NOTIFY_KEY_MISS:
            db.keymiss(key)
        return None
    c.core.stats.keyspace_hits += 1
    if type(v) is not bytes:
        raise ReplyError(WRONGTYPE)
    return v


# -- whole runs (Command.whole): a pipelined run of one command at C speed ---------------------
# Exactly what the fast paths of set_ and get do per request, for all of a run at once when
# none of its keys has a TTL and no WATCH or keyspace event needs each key; else None before
# anything changed, and the run goes one by one. The loop over the requests is in C
# (pyrepl/_plainrun.c: the dict stores and lookups themselves, nothing else).

_key = itemgetter(1)


def store_pairs_reference(d: dict[bytes, object], reqs: list[list[bytes]]) -> bool:
    """``for r in reqs: d[r[1]] = r[2]`` when every request is a list of exactly three (a
    plain SET); False, with nothing stored, when one is not (``_plainrun.store_pairs``)."""
    if any(len(r) != 3 for r in reqs):
        return False
    for r in reqs:
        d[r[1]] = r[2]
    return True


def lookup_strings_reference(d: dict[bytes, object], reqs: list[list[bytes]]
                             ) -> list[bytes | None] | None:
    """``[d.get(r[1]) for r in reqs]`` when every value found is bytes (a plain GET's), else
    None (``_plainrun.lookup_strings``)."""
    if any(len(r) < 2 for r in reqs):
        raise ValueError("lookup_strings: a request without a key")
    out = [d.get(r[1]) for r in reqs]
    if any(v is not None and type(v) is not bytes for v in out):
        return None
    return out  # type: ignore[return-value]


_native = native.load("pyrepl._plainrun")
if _native is None:
    store_pairs, lookup_strings = store_pairs_reference, lookup_strings_reference
else:
    store_pairs, lookup_strings = _native.store_pairs, _native.lookup_strings


@whole_run("set")
def _set_run(c: Any, reqs: list[list[bytes]]) -> list[object] | None:
    db = c.db
    exp = db.expires
    if c.core.notify_mask or db.watched or \
            (exp and not exp.keys().isdisjoint(map(_key, reqs))):
        return None
    if not store_pairs(db.data, reqs):
        return None     # a SET with options among them: nothing stored, one by one
    c.core.dirty += len(reqs)
    return [OK] * len(reqs)


@whole_run("get")
def _get_run(c: Any, reqs: list[list[bytes]]) -> list[bytes | None] | None:
    db = c.db
    exp = db.expires
    if exp and not exp.keys().isdisjoint(map(_key, reqs)):
        return None
    vals = lookup_strings(db.data, reqs)
    if vals is None:
        return None     # a WRONGTYPE reply among them
    misses = vals.count(None)
    if misses and c.core.notify_mask & NOTIFY_KEY_MISS:
        return None     # keymiss events
    stats = c.core.stats
    stats.keyspace_misses += misses
    stats.keyspace_hits += len(vals) - misses
    return vals


@command("mget", -2, "readonly fast", keys=(1, -1, 1), group="string",
         summary="Get the values of all the given keys", since="1.0.0", acl="string")
def mget(c: Any, argv: list[bytes]) -> object:
    lookup = c.db.lookup_read
    out = []
    for key in argv[1:]:
        v = lookup(key)
        out.append(v if type(v) is bytes else None)
    return out


@command("getset", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Set the string value of a key and return its old value", since="1.0.0",
         acl="string")
def getset(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    old = read_typed(c, key, bytes)
    c.db.set(key, argv[2])
    notify(c, NOTIFY_STRING, b"set", key)
    c.core.dirty += 1
    c.propagate_argv = [b"SET", key, argv[2]]
    return old


@command("getdel", 2, "write fast", keys=(1, 1, 1), group="string",
         summary="Get the value of a key and delete the key", since="6.2.0", acl="string")
def getdel(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    old = read_typed(c, key, bytes)
    lazy = c.core.config.lazyfree_lazy_user_del
    if old is not None and (c.db.unlink(key) if lazy else c.db.delete(key)):
        c.propagate_argv = [b"UNLINK" if lazy else b"DEL", key]
        notify(c, NOTIFY_GENERIC, b"del", key)
        c.core.dirty += 1
    return old


@command("getex", -2, "write fast", keys=(1, 1, 1), group="string",
         summary="Get the value of a key and optionally set its expiration", since="6.2.0",
         acl="string")
def getex(c: Any, argv: list[bytes]) -> object:
    flags, expire = _parse_extended(argv, False)
    key = argv[1]
    v = read_typed(c, key, bytes)
    if v is None:
        return None
    ms = 0
    if expire is not None:
        ms = _expire_ms(c, expire, flags, "getex")
    db = c.db
    core = c.core
    if flags & (_PXAT | _EXAT) and ms <= core.now_ms and core.expiry_deletes:
        lazy = core.config.lazyfree_lazy_expire
        db.unlink(key) if lazy else db.delete(key)
        c.propagate_argv = [b"UNLINK" if lazy else b"DEL", key]
        notify(c, NOTIFY_GENERIC, b"del", key)
        core.dirty += 1
    elif expire is not None:
        db.set_expire(key, ms)
        c.propagate_argv = [b"PEXPIREAT", key, b"%d" % ms]
        notify(c, NOTIFY_GENERIC, b"expire", key)
        core.dirty += 1
    elif flags & _PERSIST:
        if db.persist(key):
            c.propagate_argv = [b"PERSIST", key]
            notify(c, NOTIFY_GENERIC, b"persist", key)
            core.dirty += 1
    return v


# -- in-place edits ---------------------------------------------------------------------------

@command("append", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Append a value to a key", since="2.0.0", acl="string")
def append(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    v = db.lookup_typed(key, bytes)
    if v is None:
        new = argv[2]
        db.add(key, new)
    else:
        _check_length(c, len(v), len(argv[2]))
        new = v + argv[2]
        db.data[key] = new
        if db.watched:
            db.touch(key)
    c.core.dirty += 1
    if c.core.notify_mask & NOTIFY_STRING:
        notify(c, NOTIFY_STRING, b"append", key)
    return len(new)


command("strlen", 2, "readonly fast", keys=(1, 1, 1), group="string",
        summary="Get the length of the value stored in a key", since="2.2.0", acl="string")(
    length_command(bytes))


@command("setrange", 4, "write denyoom", keys=(1, 1, 1), group="string",
         summary="Overwrite part of a string at key starting at the specified offset",
         since="2.2.0", acl="string")
def setrange(c: Any, argv: list[bytes]) -> object:
    offset = parse_int(argv[2])
    if offset < 0:
        raise ReplyError("ERR offset is out of range")
    key = argv[1]
    value = argv[3]
    db = c.db
    v = db.lookup_typed(key, bytes)
    if v is None:
        if not value:
            return 0
        _check_length(c, offset, len(value))
        new = bytes(offset) + value
        db.add(key, new)
    else:
        if not value:
            return len(v)
        _check_length(c, offset, len(value))
        if offset > len(v):
            new = v + bytes(offset - len(v)) + value
        else:
            new = v[:offset] + value + v[offset + len(value):]
        db.data[key] = new
        if db.watched:
            db.touch(key)
    notify(c, NOTIFY_STRING, b"setrange", key)
    c.core.dirty += 1
    return len(new)


def _getrange(c: Any, argv: list[bytes]) -> object:
    start = parse_int(argv[2])
    end = parse_int(argv[3])
    v = read_typed(c, argv[1], bytes)
    if v is None:
        return b""
    n = len(v)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if end < 0:
        end = 0
    if end >= n:
        end = n - 1
    if start > end or n == 0:
        return b""
    return v[start:end + 1]


@command("getrange", 4, "readonly", keys=(1, 1, 1), group="string",
         summary="Get a substring of the string stored at a key", since="2.4.0", acl="string")
def getrange(c: Any, argv: list[bytes]) -> object:
    return _getrange(c, argv)


@command("substr", 4, "readonly", keys=(1, 1, 1), group="string",
         summary="Get a substring of the string stored at a key", since="1.0.0", acl="string")
def substr(c: Any, argv: list[bytes]) -> object:
    return _getrange(c, argv)


# -- counters ---------------------------------------------------------------------------------

# Redis shares the objects of the integers 0..9999 (OBJ_SHARED_INTEGERS); the counters share
# their texts: one dict lookup both validates and parses such a value, one list index formats it.
SHARED_INTEGERS = 10000
_INT_TEXT = [b"%d" % i for i in range(SHARED_INTEGERS)]
_TEXT_INT = {t: i for i, t in enumerate(_INT_TEXT)}


def _incr(c: Any, key: bytes, delta: int) -> int:
    """incrDecrCommand: the value (missing: 0) plus ``delta``, stored back as text (the key's
    age touched once, by the store: a peek first, as _hot.c's INCR)."""
    db = c.db
    v = db.data.peek(key)
    if v is None or (db.expires and key in db.expires and db.expire_if_needed(key)):
        v = None
        new = delta
    elif type(v) is not bytes:
        raise ReplyError(WRONGTYPE)
    else:
        old = _TEXT_INT.get(v)
        new = (parse_int(v) if old is None else old) + delta
        if new > LLONG_MAX or new < LLONG_MIN:
            raise ReplyError(OVERFLOW)
    # dbOverwrite/dbAdd: the TTL is kept
    db.data[key] = _INT_TEXT[new] if 0 <= new < SHARED_INTEGERS else b"%d" % new
    if db.watched:
        db.touch(key)
    c.core.dirty += 1
    if c.core.notify_mask:
        if v is None:
            db.new_key(key)
        notify(c, NOTIFY_STRING, b"incrby", key)
    return new


@command("incr", 2, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Increment the integer value of a key by one", since="1.0.0", acl="string")
def incr(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    data = db.data
    v = data.peek(key)      # (the store touches the key's age: once, as _hot.c's INCR)
    # Fast path: a string without a TTL holding a shared integer, or a canonical integer of
    # 1..18 digits (isdigit() rejects b"", signs and spaces; no leading zero): nothing else to
    # check and no overflow possible. Anything else takes the general path.
    if type(v) is bytes and not (db.expires and key in db.expires) and not c.core.notify_mask:
        n = _TEXT_INT.get(v)
        if n is None and v.isdigit() and len(v) < 19 and v[0] != 48:
            n = int(v)
        if n is not None:
            n += 1
            data[key] = _INT_TEXT[n] if n < SHARED_INTEGERS else b"%d" % n
            if db.watched:
                db.touch(key)
            c.core.dirty += 1
            return n
    return _incr(c, key, 1)


@command("decr", 2, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Decrement the integer value of a key by one", since="1.0.0", acl="string")
def decr(c: Any, argv: list[bytes]) -> object:
    return _incr(c, argv[1], -1)


@command("incrby", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Increment the integer value of a key by the given amount", since="1.0.0",
         acl="string")
def incrby(c: Any, argv: list[bytes]) -> object:
    return _incr(c, argv[1], parse_int(argv[2]))


@command("decrby", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Decrement the integer value of a key by the given number", since="1.0.0",
         acl="string")
def decrby(c: Any, argv: list[bytes]) -> object:
    delta = parse_int(argv[2])
    if delta == LLONG_MIN:
        raise ReplyError("ERR decrement would overflow")
    return _incr(c, argv[1], -delta)


@command("incrbyfloat", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Increment the float value of a key by the given amount", since="2.6.0",
         acl="string")
def incrbyfloat(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    v = db.lookup_typed(key, bytes)
    value = parse_long_double(v) if v is not None else 0
    incr_ = parse_long_double(argv[2])
    if value is None or incr_ is None:
        raise ReplyError(NOT_FLOAT)
    # An infinite operand (a float) makes the sum infinite or NaN; otherwise add exactly and
    # round once, as the x87 addition does.
    total = None if type(value) is float or type(incr_) is float else \
        round_long_double(value + incr_)  # type: ignore[arg-type]  # floats ruled out by type()
    if total is None:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    new = format_long_double_human(total)
    if v is None:
        db.add(key, new)
    else:
        db.data[key] = new
        if db.watched:
            db.touch(key)
    c.core.dirty += 1
    notify(c, NOTIFY_STRING, b"incrbyfloat", key)
    c.propagate_argv = [b"SET", key, new, b"KEEPTTL"]
    return new


# -- LCS --------------------------------------------------------------------------------------

@command("lcs", -3, "readonly", keys=(1, 2, 1), group="string",
         summary="Find longest common substring", since="7.0.0", acl="string")
def lcs(c: Any, argv: list[bytes]) -> object:
    lookup = c.db.lookup_read
    a = lookup(argv[1])
    b = lookup(argv[2])
    if (a is not None and type(a) is not bytes) or (b is not None and type(b) is not bytes):
        raise ReplyError("ERR The specified keys must contain string values")
    a = a or b""
    b = b or b""
    getlen = getidx = withmatchlen = False
    minmatchlen = 0
    j = 3
    n = len(argv)
    while j < n:
        opt = option_token(argv[j])
        if opt == b"idx":
            getidx = True
        elif opt == b"len":
            getlen = True
        elif opt == b"withmatchlen":
            withmatchlen = True
        elif opt == b"minmatchlen" and j + 1 < n:
            minmatchlen = max(0, parse_int(argv[j + 1]))
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if getlen and getidx:
        raise ReplyError("ERR If you want both the length and indexes, please just use IDX.")
    alen, blen = len(a), len(b)
    if alen >= 0xFFFFFFFE or blen >= 0xFFFFFFFE:
        raise ReplyError("ERR String too long for LCS")
    if (alen + 1) * (blen + 1) * 4 > c.core.config.proto_max_bulk_len:
        raise ReplyError("ERR Insufficient memory, transient memory for LCS exceeds "
                         "proto-max-bulk-len")
    # Bit-parallel LCS (Allison-Dix / Hyyro): row i of the DP table is one integer V[i] whose
    # bit j-1 is 0 exactly where LCS(i, j) - LCS(i, j-1) == 1, so LCS(i, j) is the number of
    # zero bits among the low j bits. O(alen * blen / 64) work and alen * blen / 8 bytes, where
    # the plain table would cost a Python-level loop per cell.
    full = (1 << blen) - 1
    masks: dict[int, int] = {}
    for jj, ch in enumerate(b):
        masks[ch] = masks.get(ch, 0) | (1 << jj)
    rows = [full]
    v = full
    for ch in a:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)

    def table(i: int, j: int) -> int:
        return j - (rows[i] & ((1 << j) - 1)).bit_count()

    total = table(alen, blen)
    if getlen:
        return total
    result = bytearray(total)
    idx = total
    matches: list[object] = []
    a_start = alen  # alen means "no range being tracked"
    a_end = b_start = b_end = 0
    i, jj = alen, blen
    while i > 0 and jj > 0:
        emit = False
        if a[i - 1] == b[jj - 1]:
            result[idx - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = jj - 1
            elif a_start == i and b_start == jj:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            i -= 1
            jj -= 1
        else:
            if table(i - 1, jj) > table(i, jj - 1):
                i -= 1
            else:
                jj -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if getidx and (minmatchlen == 0 or match_len >= minmatchlen):
                entry: list[object] = [[a_start, a_end], [b_start, b_end]]
                if withmatchlen:
                    entry.append(match_len)
                matches.append(entry)
            a_start = alen
    if getidx:
        return Map([(b"matches", matches), (b"len", total)])
    return bytes(result)
