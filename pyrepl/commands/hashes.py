"""Hash commands (Redis 7.0.15 t_hash.c semantics).

Theory of operation: a hash value is a plain ``dict`` of bytes -> bytes. Python dicts keep
insertion order, update in place and append re-inserted fields at the end, which is exactly the
order of Redis's listpack encoding (used for hashes of up to 128 small fields), so HGETALL,
HKEYS, HVALS and HSCAN list fields in the same order as Redis does for such hashes. Handlers
follow Redis's order of checks (e.g. HINCRBY parses the increment before looking the key up),
bump ``core.dirty`` only when something changed, signal WATCH with ``Database.touch`` and delete
a key whose hash became empty.

HINCRBYFLOAT computes in x87 80-bit ``long double`` as Redis does on x86-64, with the long
double helpers of ``pyrepl.commands.util`` (shared with INCRBYFLOAT): numbers are parsed like
glibc's ``strtold`` (decimal, hex, inf; no leading space, no nan), held as exact fractions
rounded to a 64-bit significand, and printed like ``%.17Lf`` with trailing zeros removed
(``ld2string(LD_STR_HUMAN)``); it is propagated as ``HSET key field <new value>``.
"""

from __future__ import annotations

import random
from itertools import islice
from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import (
    LLONG_MAX,
    LLONG_MIN,
    format_long_double_human,
    parse_int,
    parse_long_double,
    parse_random_count,
    read_typed,
    removed_elements,
    round_long_double,
)
from pyrepl.errors import NOT_FLOAT
from pyrepl.keyspace.scan import parse_cursor, parse_scan_options, scan_page
from pyrepl.resp.types import OK, Map, ReplyError

# hash-max-listpack-entries default: smaller hashes are scanned in one HSCAN call (Redis
# answers them whole with cursor 0). Larger ones page through pyrepl.keyspace.scan.
LISTPACK_ENTRIES = 128


def _hash_for_write(db: Any, key: bytes) -> dict:
    """hashTypeLookupWriteOrCreate: the hash at ``key``, created (and stored) when missing."""
    h = db.lookup_typed(key, dict)
    if h is None:
        h = {}
        db.set(key, h)
    return h


def _set_field(c: Any, key: bytes, h: dict | None, field: bytes, value: bytes) -> None:
    """Store a computed field (HINCRBY*): the hash is created only now, so a command that
    fails on its arguments never leaves an empty hash behind."""
    db = c.db
    if h is None:
        db.set(key, {field: value})
    else:
        h[field] = value
        if db.watched:
            db.touch(key)
    c.core.dirty += 1


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
    if type(h) is not dict or (db.expires and key in db.expires):
        h = _hash_for_write(db, key)
    elif db.watched:
        db.touch(key)
    if n == 4:
        f = argv[2]
        created = 0 if f in h else 1
        h[f] = argv[3]
        c.core.dirty += 1
        return created
    before = len(h)
    for i in range(2, n, 2):
        h[argv[i]] = argv[i + 1]
    c.core.dirty += (n - 2) >> 1
    return len(h) - before


@command("hmset", -4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Set multiple hash fields to multiple values", since="2.0.0",
         acl="hash")
def hmset(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n & 1:
        raise ReplyError("ERR wrong number of arguments for 'hmset' command")
    key = argv[1]
    db = c.db
    h = _hash_for_write(db, key)
    for i in range(2, n, 2):
        h[argv[i]] = argv[i + 1]
    if db.watched:
        db.touch(key)
    c.core.dirty += (n - 2) >> 1
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
        return 0
    h[f] = argv[3]
    if db.watched:
        db.touch(key)
    c.core.dirty += 1
    return 1


@command("hdel", -3, "write fast", keys=(1, 1, 1), group="hash",
         summary="Delete one or more hash fields", since="2.0.0", acl="hash")
def hdel(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    db = c.db
    h = db.lookup_typed(key, dict)
    if h is None:
        return 0
    deleted = 0
    for i in range(2, len(argv)):
        if h.pop(argv[i], None) is not None:
            deleted += 1
            if not h:
                break
    if deleted:
        removed_elements(c, key, h, deleted)
    return deleted


@command("hincrby", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the integer value of a hash field by the given number",
         since="2.0.0", acl="hash")
def hincrby(c: Any, argv: list[bytes]) -> object:
    incr = parse_int(argv[3])
    key = argv[1]
    db = c.db
    h = db.lookup_typed(key, dict)
    f = argv[2]
    old = None if h is None else h.get(f)
    if old is None:
        value = 0
    else:
        value = parse_int(old, "ERR hash value is not an integer")
    value += incr
    if value < LLONG_MIN or value > LLONG_MAX:
        raise ReplyError("ERR increment or decrement would overflow")
    _set_field(c, key, h, f, b"%d" % value)
    return value


@command("hincrbyfloat", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the float value of a hash field by the given amount",
         since="2.6.0", acl="hash")
def hincrbyfloat(c: Any, argv: list[bytes]) -> object:
    incr = parse_long_double(argv[3])
    if incr is None:
        raise ReplyError(NOT_FLOAT)
    if type(incr) is float:
        raise ReplyError("ERR value is NaN or Infinity")
    key = argv[1]
    db = c.db
    h = db.lookup_typed(key, dict)
    f = argv[2]
    old = None if h is None else h.get(f)
    value = 0 if old is None else parse_long_double(old)
    if value is None:
        raise ReplyError("ERR hash value is not a float")
    if type(value) is float:  # a stored inf: the sum is infinite
        raise ReplyError("ERR increment would produce NaN or Infinity")
    total = round_long_double(value + incr)
    if total is None:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    text = format_long_double_human(total)
    _set_field(c, key, h, f, text)
    c.propagate_argv = [b"HSET", key, f, text]
    return text


# -- reads -------------------------------------------------------------------------------

@command("hget", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the value of a hash field", since="2.0.0", acl="hash")
def hget(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    if h is None:
        return None
    return h.get(argv[2])


@command("hmget", -3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the values of all the given hash fields", since="2.0.0", acl="hash")
def hmget(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in islice(argv, 2, None)]


@command("hlen", 2, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the number of fields in a hash", since="2.0.0", acl="hash")
def hlen(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    return 0 if h is None else len(h)


@command("hstrlen", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the length of the value of a hash field", since="3.2.0", acl="hash")
def hstrlen(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


@command("hexists", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Determine if a hash field exists", since="2.0.0", acl="hash")
def hexists(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    return 1 if h is not None and argv[2] in h else 0


@command("hgetall", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields and values in a hash", since="2.0.0", acl="hash")
def hgetall(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    return Map(() if h is None else h.items())


@command("hkeys", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields in a hash", since="2.0.0", acl="hash")
def hkeys(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    return [] if h is None else list(h)


@command("hvals", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the values in a hash", since="2.0.0", acl="hash")
def hvals(c: Any, argv: list[bytes]) -> object:
    h = read_typed(c, argv[1], dict)
    return [] if h is None else list(h.values())


# -- random fields -----------------------------------------------------------------------

@command("hrandfield", -2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get one or multiple random fields from a hash", since="6.2.0",
         acl="hash")
def hrandfield(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n == 2:
        h = read_typed(c, argv[1], dict)
        if h is None:
            return None
        return next(islice(h, random.randrange(len(h)), None))
    count, withvalues = parse_random_count(argv, b"withvalues")
    h = read_typed(c, argv[1], dict)
    if h is None or count == 0:
        return []
    if count < 0 or count == 1:
        # With repetitions (or a single pick): independent uniform draws.
        keys = list(h)
        picks = random.choices(keys, k=-count if count < 0 else 1)
    elif count >= len(h):
        picks = list(h)
    else:
        picks = random.sample(list(h), count)
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
    cursor = parse_cursor(argv[2])
    h = read_typed(c, argv[1], dict)
    if h is None:
        return [b"0", []]
    opts = parse_scan_options(argv, 3)
    if len(h) <= LISTPACK_ENTRIES:
        # Redis keeps such hashes as a listpack and answers them whole, cursor 0.
        cursor, fields = 0, h
    else:
        cursor, fields = scan_page(h, cursor, opts.count)
    match = opts.match
    out: list[bytes] = []
    for f in fields:
        v = h.get(f)
        if v is not None and (match is None or match(f)):
            out.append(f)
            out.append(v)
    return [b"%d" % cursor, out]
