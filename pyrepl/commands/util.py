"""Argument parsing and lookups shared by the command modules (shared helpers, both roles).

Theory of operation: which text a client may send as a number, and which error it gets back
otherwise, is decided in Redis by a handful of C functions; each has exactly one counterpart
here so that every command agrees with Redis and with every other command:

* :func:`parse_int` is ``string2ll`` (``getLongLongFromObject``): optional ``-``, no ``+``, no
  leading zeros, no spaces, 64-bit range. :func:`parse_long_range` and
  :func:`parse_positive_long` add the range checks of ``getRangeLongFromObjectOrReply`` /
  ``getPositiveLongFromObjectOrReply`` (a caller's message replaces every error text).
* :func:`string2d` / :func:`parse_float` are ``string2d`` (``getDoubleFromObject``): C's
  ``strtod`` over the whole string, so hex floats and ``inf``/``infinity`` (any case, signed)
  are accepted; a leading space, trailing bytes (a NUL too), NaN, overflow to infinity and
  underflow of a non-zero number to zero are rejected. :func:`strtod_full` is the bare
  ``strtod`` part (sorted-set range bounds use it with their own rules).
* :func:`parse_long_double` is ``string2ld`` and :func:`round_long_double` /
  :func:`format_long_double_human` are the x87 80-bit ``long double`` arithmetic and
  ``ld2string(LD_STR_HUMAN)`` (``%.17Lf``, trailing zeros removed) that INCRBYFLOAT and
  HINCRBYFLOAT compute with on x86-64. Python floats are too narrow, so a long double is held
  as an exact ``Fraction``, rounded by hand to a 64-bit significand (ties to even) with the
  format's exponent range, subnormals included. ``strtold`` rounds the decimal text correctly
  once; Redis then rejects what ``strtold`` flags with ERANGE as infinite or zero.
* :func:`numkeys_keys` builds the key finder of "numkeys key [key ...]" commands the way
  Redis's getkeys procs read ``numkeys`` (C ``atoi``; no keys unless 1..available).
* :func:`option_token` is an option as ``strcasecmp`` compares it, :func:`keyword` one word
  of a fixed set (``LEFT|RIGHT``) with its meaning, :func:`index_range` the
  start/end normalisation of LRANGE/LTRIM/ZRANGE/ZREMRANGEBYRANK and
  :func:`parse_random_count` the count argument of HRANDFIELD / ZRANDMEMBER.

Lookups and writes: :func:`read_typed` is ``lookupKeyRead`` + ``checkType``;
:func:`removed_elements` is what every command that removes elements from a collection does
after (delete the key of an emptied collection, signal WATCH, count the changes), and
:func:`remove_members` the whole of HDEL / SREM / ZREM around it;
:func:`store_or_delete` is the "setKey the result, or delete the destination when the result
is empty" of the *STORE commands; :func:`scan_opening` is the start SSCAN / HSCAN / ZSCAN
share and :func:`pop_or_block` the shape of the blocking pops (serve now, or block).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sized
from typing import Any, TypeVar

from pyrepl.commands.table import command
from pyrepl.core.blocking import KeyWait, parse_timeout
from pyrepl.errors import NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE
from pyrepl.intparse import LLONG_MAX, LLONG_MIN, parse_int  # noqa: F401  (re-exported)
from pyrepl.keyspace.db import of_kind
from pyrepl.keyspace.scan import ScanOptions, parse_cursor, parse_scan_options
from pyrepl.longdouble import C_SPACE
from pyrepl.notify import NOTIFY_GENERIC, notify
from pyrepl.resp.types import BLOCKED, NO_REPLY, NULL_ARRAY, Raw, ReplyError, Status
from pyrepl.resp.writer import encode

POSITIVE = "ERR value is out of range, must be positive"

_T = TypeVar("_T")



# -- integers ---------------------------------------------------------------------------------



def is_long_long(b: bytes) -> bool:
    """True when string2ll accepts ``b`` (Redis's test for an integer-encodable string)."""
    try:
        parse_int(b)
    except ReplyError:
        return False
    return True


def parse_long_range(b: bytes, lo: int, hi: int, message: str | None = None) -> int:
    """getRangeLongFromObjectOrReply: ``message`` replaces every error text when given."""
    v = parse_int(b, message or NOT_INTEGER)
    if v < lo or v > hi:
        raise ReplyError(message or f"ERR value is out of range, value must between {lo} and {hi}")
    return v


def parse_positive_long(b: bytes, message: str | None = None) -> int:
    """getPositiveLongFromObjectOrReply: 0..LLONG_MAX."""
    return parse_long_range(b, 0, LLONG_MAX, message or POSITIVE)


_ATOI = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def c_atoi(b: bytes) -> int:
    """C's ``atoi``: leading white space, a sign, the digits up to the first other byte (0 when
    there are none), saturated to ``long`` then truncated to ``int``."""
    m = _ATOI.match(b)
    if m is None:
        return 0
    v = max(LLONG_MIN, min(LLONG_MAX, int(m.group(1))))
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def numkeys_keys(index: int, *fixed: int) -> Callable[[list[bytes]], list[int]]:
    """A ``keys_fn`` for "numkeys key [key ...]" with numkeys at ``argv[index]`` (after the
    ``fixed`` key positions, e.g. ZUNIONSTORE's destination): as Redis's getkeys procs, no key
    at all unless numkeys (read with ``atoi``) is between 1 and the arguments left."""
    first = index + 1

    def keys(argv: list[bytes]) -> list[int]:
        n = c_atoi(argv[index]) if index < len(argv) else 0
        if n < 1 or n > len(argv) - first:
            return []
        return [*fixed, *range(first, first + n)]

    return keys


# -- doubles (string2d) -----------------------------------------------------------------------

_DEC = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX = re.compile(rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?")
_INF = re.compile(rb"[+-]?(?:inf|infinity)", re.IGNORECASE)
_NONZERO_DIGIT = re.compile(rb"[1-9a-fA-F]")


def strtod_full(s: bytes) -> tuple[float, bool] | None:
    """All of ``s`` parsed as C's strtod would (no white space skipping): (value, erange), or
    None when strtod would stop before the end (or parse NaN)."""
    if _DEC.fullmatch(s):
        v = float(s)
        if v in (math.inf, -math.inf):
            return v, True
        if v == 0.0:
            mant = s.split(b"e")[0].split(b"E")[0]
            return v, _NONZERO_DIGIT.search(mant) is not None
        return v, False
    if _HEX.fullmatch(s):
        neg = s[:1] == b"-"
        try:
            v = float.fromhex(s.decode("ascii"))
        except OverflowError:
            return (-math.inf if neg else math.inf), True
        if v == 0.0:
            body = s.lstrip(b"+-")[2:]
            mant = body.split(b"p")[0].split(b"P")[0]
            return v, _NONZERO_DIGIT.search(mant) is not None
        return v, False
    if _INF.fullmatch(s):
        return (-math.inf if s[:1] == b"-" else math.inf), False
    return None


def string2d(s: bytes) -> float | None:
    """Redis's string2d: a double, or None where Redis answers "not a valid float"."""
    if s.isdigit() and len(s) < 300:  # the common case: a plain non-negative integer
        return float(s)
    if not s or s[0] in C_SPACE:
        return None
    r = strtod_full(s)
    if r is None:
        return None
    v, erange = r
    if erange and (v == 0.0 or v in (math.inf, -math.inf)):
        return None
    return v


def parse_float(b: bytes, message: str = NOT_FLOAT) -> float:
    """getDoubleFromObjectOrReply: :func:`string2d` or ``ReplyError(message)``."""
    v = string2d(b)
    if v is None:
        raise ReplyError(message)
    return v


from pyrepl.longdouble import (  # noqa: E402,F401  (re-exported for the commands)
    LongDouble,
    format_long_double_human,
    parse_long_double,
    round_long_double,
)


def option_token(a: bytes) -> bytes:
    """An option argument as C's strcasecmp sees it: lower-cased, ending at the first NUL."""
    nul = a.find(b"\0")
    return (a if nul < 0 else a[:nul]).lower()


def keyword(arg: bytes, choices: Mapping[bytes, _T]) -> _T:
    """The meaning in ``choices`` of the keyword ``arg`` (any case): one of a fixed set of
    words, as Redis's strcasecmp chains read them (LEFT/RIGHT, BIT/BYTE, SUM/MIN/MAX, ...);
    -ERR syntax error for any other word."""
    try:
        return choices[arg.lower()]
    except KeyError:
        raise ReplyError(SYNTAX) from None


def parse_random_count(argv: list[bytes], option: bytes) -> tuple[int, bool]:
    """``key count [option]`` of HRANDFIELD (WITHVALUES) / ZRANDMEMBER (WITHSCORES), as their
    *WithCountCommand parse it: (count, whether the option was given)."""
    count = parse_long_range(argv[2], -LLONG_MAX, LLONG_MAX)
    n = len(argv)
    if n > 4 or (n == 4 and argv[3].lower() != option):
        raise ReplyError(SYNTAX)
    if n == 4 and (count < -(LLONG_MAX // 2) or count > LLONG_MAX // 2):
        raise ReplyError("ERR value is out of range")  # count * 2 replies must not overflow
    return count, n == 4


#: HRANDFIELD / SRANDMEMBER / ZRANDMEMBER with a negative count: picks drawn (and encoded)
#: this many at a time, as Redis's HRANDFIELD_RANDOM_SAMPLE_LIMIT batches them
RANDOM_CHUNK = 1000


def repeated_picks(c: Any, k: int, draw: Callable[[int], list[Any]], width: int = 1) -> object:
    """The reply of ``k`` random picks with repetition, ``draw(n)`` giving n picks as reply
    elements (``width`` elements a pick: 2 for RESP2's field, value). Past RANDOM_CHUNK picks
    the reply is encoded a chunk at a time and the client's output limit checked after each,
    as Redis writes it and checks it: a client over its limit is closed mid-run (nothing is
    sent), instead of a reply of a billion picks being built first."""
    if k <= RANDOM_CHUNK:
        return draw(k)
    check = c.core.output_limits.check
    proto = c.proto
    parts = [b"*%d\r\n" % (k * width)]
    built = 0
    while k:
        n = min(k, RANDOM_CHUNK)
        k -= n
        chunk = encode(draw(n), proto)
        body = chunk[chunk.index(b"\n") + 1:]        # (the chunk's own array header off)
        parts.append(body)
        built += len(body)
        if check(c, built):
            return NO_REPLY
    return Raw(b"".join(parts))


def index_range(start: int, end: int, size: int) -> tuple[int, int] | None:
    """Redis's start/end normalisation (LRANGE, LTRIM, ZRANGE, ZREMRANGEBYRANK): negative
    indexes count from the end; the inclusive range clamped to 0..size-1, or None if empty."""
    if start < 0:
        start += size
        if start < 0:
            start = 0
    if end < 0:
        end += size
    if start > end or start >= size:
        return None
    return start, end if end < size else size - 1


# -- lookups and writes ----------------------------------------------------------------------

def read_typed(c: Any, key: bytes, kind: type | frozenset[type]) -> Any:
    """lookupKeyRead + checkType: the value (None if missing), counting keyspace hits and
    misses; WRONGTYPE when it is not a ``kind`` (a type, or a frozenset of the types one Redis
    type is held in). (Writes use ``Database.lookup_typed``.)"""
    v = c.db.lookup_read(key)
    if v is not None and type(v) is not kind and not of_kind(v, kind):
        raise ReplyError(WRONGTYPE)
    return v


def scan_opening(c: Any, argv: list[bytes], lookup: Callable[[Any, bytes], Any]
                 ) -> tuple[Any, int, ScanOptions] | None:
    """SSCAN / HSCAN / ZSCAN's opening, in scanGenericCommand's order: the cursor (argv[2]),
    the value ``lookup(c, argv[1])``, then the options: (value, cursor, options), or None
    when there is no value (the reply is then cursor 0 and nothing)."""
    cursor = parse_cursor(argv[2])
    value = lookup(c, argv[1])
    if value is None:
        return None
    return value, cursor, parse_scan_options(argv, 3)


def length_command(kind: type | frozenset[type]) -> Callable[[Any, list[bytes]], object]:
    """The handler of STRLEN / LLEN / SCARD / ZCARD: the length of the ``kind`` value at
    argv[1], 0 when there is none (WRONGTYPE for another type)."""

    def handler(c: Any, argv: list[bytes]) -> object:
        v = read_typed(c, argv[1], kind)
        return 0 if v is None else len(v)

    return handler


def pop_or_block(c: Any, keys: list[bytes], kind: type | frozenset[type], type_name: str,
                 timeout_arg: bytes,
                 pop_now: Callable[[bytes, Any], object], serve_later: Callable[..., object],
                 denied: object = NULL_ARRAY) -> object:
    """The shape of Redis's blocking pops (BLPOP, BLMOVE, BZPOPMIN, ...): parse the timeout,
    then ``pop_now(key, value)`` on the first of ``keys`` holding a ``kind``; else block the
    client until ``serve_later`` can serve it, or answer ``denied`` where blocking is not
    allowed (CLIENT_DENY_BLOCKING: inside EXEC, where the blocking command's own call is one
    level of ``_call_depth`` and EXEC adds another)."""
    core = c.core
    deadline = parse_timeout(timeout_arg, core.now_ms)
    db = c.db
    for key in keys:
        value = db.lookup_typed(key, kind)
        if value:
            return pop_now(key, value)
    if c.in_multi or core._call_depth > 1:
        return denied
    core.blocking.block(c, KeyWait(type_name, db, keys, kind, deadline, serve_later))
    return BLOCKED


def removed_elements(c: Any, key: bytes, value: Sized, n: int, cls: int = 0,
                     event: bytes = b"") -> None:
    """After ``n`` elements were removed from the collection at ``key``: publish the command's
    keyspace event (class ``cls``, when given), delete the key if the collection became empty
    (none is ever left empty) with its ``del`` event, signal WATCH, bump dirty by ``n``."""
    db = c.db
    mask = c.core.notify_mask
    if mask & cls:
        notify(c, cls, event, key)
    if not len(value):
        del db.data[key]
        if db.expires:
            db.expires.pop(key, None)
        if mask & NOTIFY_GENERIC:
            notify(c, NOTIFY_GENERIC, b"del", key)
    if db.watched:
        db.touch(key)
    c.core.dirty += n


def remove_members(c: Any, key: bytes, value: Sized | None, members: list[bytes],
                   discard: Callable[[Any, bytes], bool], cls: int, event: bytes) -> int:
    """HDEL / SREM / ZREM: ``discard(value, member)`` (True when the member was there) for
    each member until the collection is empty, then :func:`removed_elements` with the
    command's keyspace event; the number removed (0 when there is no ``value``)."""
    if value is None:
        return 0
    deleted = 0
    for m in members:
        if discard(value, m):
            deleted += 1
            if not len(value):
                break
    if deleted:
        removed_elements(c, key, value, deleted, cls, event)
    return deleted


def store_or_delete(c: Any, dst: bytes, value: Sized, cls: int = 0,
                    event: bytes = b"") -> int:
    """setKey(dst, value) when ``value`` is not empty (then the keyspace event ``event`` of
    class ``cls``), else delete ``dst`` (then ``del`` if it existed); bumps dirty as Redis's
    *STORE commands do and returns the stored size."""
    db = c.db
    if len(value):
        db.set(dst, value)
        if cls:
            notify(c, cls, event, dst)
        c.core.dirty += 1
        return len(value)
    if db.delete(dst):
        notify(c, NOTIFY_GENERIC, b"del", dst)
        c.core.dirty += 1
    return 0


def help_reply(name: str, lines: tuple[str, ...]) -> list[Status]:
    """Redis's addReplyHelp: the header line, the command's lines, then HELP's own."""
    return [Status(f"{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
            *(Status(x) for x in lines), Status("HELP"), Status("    Prints this help.")]


def help_command(container: str, lines: tuple[str, ...], *, group: str, since: str,
                 summary: str = "Show helpful text about the different subcommands",
                 acl: str = "") -> None:
    """Register ``<container>|help`` (arity 2, ``loading stale``): :func:`help_reply` of
    ``lines`` under the container's upper-case name."""
    name = container.upper()

    def handler(c: Any, argv: list[bytes]) -> object:
        return help_reply(name, lines)

    command(f"{container}|help", 2, "loading stale", group=group, summary=summary, since=since,
            acl=acl)(handler)


def subcommand_error(argv: list[bytes]) -> ReplyError:
    """Redis's addReplySubcommandSyntaxError."""
    return ReplyError("ERR unknown subcommand or wrong number of arguments for "
                      f"'{argv[1][:128].decode('utf-8', 'replace')}'. "
                      f"Try {argv[0].decode('utf-8', 'replace').upper()} HELP.")
