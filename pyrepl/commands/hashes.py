"""Hash commands (Redis 7.0.15 t_hash.c semantics).

Theory of operation: a hash value is a plain ``dict`` of bytes -> bytes. Python dicts keep
insertion order, update in place and append re-inserted fields at the end, which is exactly the
order of Redis's listpack encoding (used for hashes of up to 128 small fields), so HGETALL,
HKEYS, HVALS and HSCAN list fields in the same order as Redis does for such hashes. Handlers
follow Redis's order of checks (e.g. HINCRBY parses the increment before looking the key up),
bump ``core.dirty`` only when something changed, signal WATCH with ``Database.touch`` and delete
a key whose hash became empty.

HINCRBYFLOAT computes in x87 80-bit ``long double`` as Redis does on x86-64: numbers are
parsed like glibc's ``strtold`` (decimal, hex, inf; no leading space, no nan), held as exact
fractions rounded to a 64-bit significand, and printed like ``%.17Lf`` with trailing zeros
removed (``ld2string(LD_STR_HUMAN)``); it is propagated as ``HSET key field <new value>``.
"""

from __future__ import annotations

import random
import re
from fractions import Fraction
from itertools import islice
from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import LLONG_MAX, LLONG_MIN, parse_int
from pyrepl.errors import SYNTAX, WRONGTYPE
from pyrepl.keyspace.scan import parse_cursor, parse_scan_options, scan_page
from pyrepl.resp.types import OK, Map, ReplyError

# hash-max-listpack-entries default: smaller hashes are scanned in one HSCAN call (Redis
# answers them whole with cursor 0). Larger ones page through pyrepl.keyspace.scan.
LISTPACK_ENTRIES = 128


def _read(c: Any, key: bytes) -> dict | None:
    """lookupKeyRead + checkType(OBJ_HASH): counts keyspace hits/misses."""
    v = c.db.lookup_read(key)
    if v is not None and type(v) is not dict:
        raise ReplyError(WRONGTYPE)
    return v


def _hash_for_write(db: Any, key: bytes) -> dict:
    """hashTypeLookupWriteOrCreate: the hash at ``key``, created (and stored) when missing."""
    h = db.lookup_typed(key, dict)
    if h is None:
        h = {}
        db.set(key, h)
    return h


# -- writes ------------------------------------------------------------------------------

@command("hset", -4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Set the string value of a hash field", since="2.0.0", acl="write hash fast")
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
         acl="write hash fast")
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
         since="2.0.0", acl="write hash fast")
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
         summary="Delete one or more hash fields", since="2.0.0", acl="write hash fast")
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
        if not h:
            del db.data[key]
            if db.expires:
                db.expires.pop(key, None)
        if db.watched:
            db.touch(key)
        c.core.dirty += deleted
    return deleted


@command("hincrby", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the integer value of a hash field by the given number",
         since="2.0.0", acl="write hash fast")
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
    if h is None:
        h = {}
        db.set(key, h)
    elif db.watched:
        db.touch(key)
    h[f] = b"%d" % value
    c.core.dirty += 1
    return value


@command("hincrbyfloat", 4, "write denyoom fast", keys=(1, 1, 1), group="hash",
         summary="Increment the float value of a hash field by the given amount",
         since="2.6.0", acl="write hash fast")
def hincrbyfloat(c: Any, argv: list[bytes]) -> object:
    incr = parse_long_double(argv[3])
    if incr is None:
        raise ReplyError("ERR value is not a valid float")
    if type(incr) is not Fraction:
        raise ReplyError("ERR value is NaN or Infinity")
    key = argv[1]
    db = c.db
    h = db.lookup_typed(key, dict)
    f = argv[2]
    old = None if h is None else h.get(f)
    if old is None:
        value: Fraction | float = Fraction(0)
    else:
        parsed = parse_long_double(old)
        if parsed is None:
            raise ReplyError("ERR hash value is not a float")
        value = parsed
    if type(value) is not Fraction:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    total = round_long_double(value + incr)
    if total is None:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    text = format_long_double_human(total)
    if h is None:
        h = {}
        db.set(key, h)
    elif db.watched:
        db.touch(key)
    h[f] = text
    c.core.dirty += 1
    c.propagate_argv = [b"HSET", key, f, text]
    return text


# -- reads -------------------------------------------------------------------------------

@command("hget", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the value of a hash field", since="2.0.0", acl="read hash fast")
def hget(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    if h is None:
        return None
    return h.get(argv[2])


@command("hmget", -3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the values of all the given hash fields", since="2.0.0", acl="read hash fast")
def hmget(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in islice(argv, 2, None)]


@command("hlen", 2, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the number of fields in a hash", since="2.0.0", acl="read hash fast")
def hlen(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    return 0 if h is None else len(h)


@command("hstrlen", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Get the length of the value of a hash field", since="3.2.0", acl="read hash fast")
def hstrlen(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


@command("hexists", 3, "readonly fast", keys=(1, 1, 1), group="hash",
         summary="Determine if a hash field exists", since="2.0.0", acl="read hash fast")
def hexists(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    return 1 if h is not None and argv[2] in h else 0


@command("hgetall", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields and values in a hash", since="2.0.0", acl="read hash slow")
def hgetall(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    return Map(() if h is None else h.items())


@command("hkeys", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the fields in a hash", since="2.0.0", acl="read hash slow")
def hkeys(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    return [] if h is None else list(h)


@command("hvals", 2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get all the values in a hash", since="2.0.0", acl="read hash slow")
def hvals(c: Any, argv: list[bytes]) -> object:
    h = _read(c, argv[1])
    return [] if h is None else list(h.values())


# -- random fields -----------------------------------------------------------------------

@command("hrandfield", -2, "readonly", keys=(1, 1, 1), group="hash",
         summary="Get one or multiple random fields from a hash", since="6.2.0",
         acl="read hash slow")
def hrandfield(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    if n == 2:
        h = _read(c, argv[1])
        if h is None:
            return None
        return next(islice(h, random.randrange(len(h)), None))
    count = parse_int(argv[2])
    if count == LLONG_MIN:
        raise ReplyError("ERR value is out of range, value must between -9223372036854775807 "
                         "and 9223372036854775807")
    withvalues = False
    if n > 4 or (n == 4 and argv[3].lower() != b"withvalues"):
        raise ReplyError(SYNTAX)
    if n == 4:
        withvalues = True
        if count < -(LLONG_MAX // 2) or count > LLONG_MAX // 2:
            raise ReplyError("ERR value is out of range")
    h = _read(c, argv[1])
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
         acl="read hash slow")
def hscan(c: Any, argv: list[bytes]) -> object:
    cursor = parse_cursor(argv[2])
    h = _read(c, argv[1])
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


# -- long double arithmetic (x87 80-bit, as Redis's HINCRBYFLOAT on x86-64) --------------

_SUBNORMAL_QUANTUM_EXP = -16445   # the smallest subnormal is 2**-16445
_OVERFLOW = 1 << 16384            # values that round to this or more are infinite
_SPACE = b" \t\n\v\f\r"
_DEC = re.compile(rb"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?\Z")
_HEX = re.compile(rb"([+-]?)0[xX](?:([0-9a-fA-F]+)(?:\.([0-9a-fA-F]*))?|\.([0-9a-fA-F]+))"
                  rb"(?:[pP]([+-]?[0-9]+))?\Z")
_INF = re.compile(rb"([+-]?)(?:inf|infinity)\Z", re.IGNORECASE)
_CHUNK = 3000  # digits per int() call: stays under Python's int/str conversion limit
_CHUNK_POW = 10 ** _CHUNK


def _int_from_digits(s: bytes) -> int:
    if len(s) <= _CHUNK:
        return int(s)
    cut = len(s) - _CHUNK
    return _int_from_digits(s[:cut]) * _CHUNK_POW + int(s[cut:])


def _int_to_digits(n: int) -> str:
    if n < _CHUNK_POW:
        return str(n)
    hi, lo = divmod(n, _CHUNK_POW)
    return _int_to_digits(hi) + str(lo).zfill(_CHUNK)


def _exponent(text: bytes | None) -> int:
    """An exponent's value, saturated (strtold saturates absurd exponents the same way)."""
    if not text:
        return 0
    neg = text[:1] == b"-"
    digits = text.lstrip(b"+-").lstrip(b"0")
    v = int(digits) if len(digits) <= 12 else 10 ** 12
    return -v if neg else v


def round_long_double(q: Fraction) -> Fraction | None:
    """Round an exact value to the nearest x87 extended double (ties to even). None: inf."""
    if q == 0:
        return Fraction(0)
    p, r = q.numerator, q.denominator
    neg = p < 0
    if neg:
        p = -p
    e = p.bit_length() - r.bit_length()  # 2**(e-1) < p/r < 2**(e+1)
    if (p < (r << e)) if e >= 0 else ((p << -e) < r):
        e -= 1
    shift = e - 63  # quantum of a 64-bit significand
    if shift < _SUBNORMAL_QUANTUM_EXP:
        shift = _SUBNORMAL_QUANTUM_EXP
    if shift >= 0:
        m, rem = divmod(p, r << shift)
        d = r << shift
    else:
        m, rem = divmod(p << -shift, r)
        d = r
    twice = rem << 1
    if twice > d or (twice == d and m & 1):
        m += 1
    if m == 0:
        return Fraction(0)
    v = Fraction(m << shift) if shift >= 0 else Fraction(m, 1 << -shift)
    if v >= _OVERFLOW:
        return None
    return -v if neg else v


def parse_long_double(s: bytes) -> Fraction | float | None:
    """Redis's string2ld: an exact (rounded) value, ``±inf`` as a float, or None if invalid.

    Like strtold followed by Redis's checks: no leading space, the whole string consumed, no
    nan, no overflow to infinity and no underflow of a non-zero number to zero.
    """
    if not s or len(s) >= 5 * 1024 or s[0] in _SPACE:
        return None
    m = _DEC.match(s)
    if m is not None:
        sign, ipart, fpart, fonly, exp = m.groups()
        if fonly is not None:
            ipart, fpart = b"", fonly
        digits = (ipart + (fpart or b"")).lstrip(b"0")
        if not digits:
            return Fraction(0)
        e10 = _exponent(exp) - len(fpart or b"")
        if len(digits) - 1 + e10 > 4933:
            return None  # overflow (the largest long double is about 1.19e4932)
        if len(digits) + e10 < -4952:
            return None  # underflow to zero (the smallest subnormal is about 3.6e-4951)
        mant = _int_from_digits(digits)
        q = Fraction(mant * 10 ** e10) if e10 >= 0 else Fraction(mant, 10 ** -e10)
    else:
        m = _HEX.match(s)
        if m is not None:
            sign, ipart, fpart, fonly, exp = m.groups()
            if fonly is not None:
                ipart, fpart = b"", fonly
            hexdigits = (ipart + (fpart or b"")).lstrip(b"0")
            if not hexdigits:
                return Fraction(0)
            mant = int(hexdigits, 16)
            e2 = _exponent(exp) - 4 * len(fpart or b"")
            if mant.bit_length() - 1 + e2 > 16384:
                return None
            if mant.bit_length() + e2 < -16447:
                return None
            q = Fraction(mant << e2) if e2 >= 0 else Fraction(mant, 1 << -e2)
        else:
            m = _INF.match(s)
            if m is None:
                return None
            return float("-inf") if m.group(1) == b"-" else float("inf")
    v = round_long_double(q)
    if v is None or v == 0:
        return None  # ERANGE: overflow to HUGE_VAL, or a non-zero value rounded to zero
    return -v if sign == b"-" else v


def format_long_double_human(v: Fraction) -> bytes:
    """``ld2string(LD_STR_HUMAN)``: ``%.17Lf`` (ties to even), trailing zeros trimmed."""
    neg = v < 0
    if neg:
        v = -v
    d = v.denominator
    q, rem = divmod(v.numerator * 10 ** 17, d)
    twice = rem << 1
    if twice > d or (twice == d and q & 1):
        q += 1
    digits = _int_to_digits(q).rjust(18, "0")
    ipart, fpart = digits[:-17], digits[-17:].rstrip("0")
    text = ipart + "." + fpart if fpart else ipart
    if neg and text != "0":
        text = "-" + text
    return text.encode()


__all__ = [
    "format_long_double_human",
    "parse_long_double",
    "round_long_double",
]
