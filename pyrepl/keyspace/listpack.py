"""Listpack entry sizes as Redis counts them, and the integer form lpAppend recognises.

A stream node is a listpack, and ``stream-node-max-bytes`` is checked against its lpBytes, so
the keyspace counts each entry's bytes as lpAppend writes it (stream.py); the RDB encoder and
decoder (pyrepl/rdb/containers.py) build and read the same listpacks with these.
"""

from __future__ import annotations

_MAX_INT64 = (1 << 63) - 1
_MIN_INT64 = -(1 << 63)


def canonical_int(s: bytes) -> int | None:
    """The int64 value of ``s`` if it is the canonical decimal form Redis turns into an integer
    (string2ll / lpStringToInt64: no sign '+', no leading zeros, no spaces, "-0" excluded)."""
    if not s or len(s) > 20:
        return None
    c = s[0]
    if not (48 <= c <= 57 or c == 45):
        return None
    try:
        v = int(s)
    except ValueError:
        return None
    if _MIN_INT64 <= v <= _MAX_INT64 and b"%d" % v == s:
        return v
    return None


def lp_backlen_size(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def lp_int_size(v: int) -> int:
    """Bytes an integer entry takes in a listpack (encoding + backlen): stream nodes track
    their lpBytes with it."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -(1 << 23) <= v < (1 << 23):
        return 5
    if -(1 << 31) <= v < (1 << 31):
        return 6
    return 10


def lp_value_size(s: bytes) -> int:
    """Bytes a string entry takes in a listpack (lpAppend stores canonical integers as ints)."""
    n = len(s)
    if n <= 20 and n:
        v = canonical_int(s)
        if v is not None:
            return lp_int_size(v)
    if n < 64:
        size = 1 + n
    elif n < 4096:
        size = 2 + n
    else:
        size = 5 + n
    return size + lp_backlen_size(size)


