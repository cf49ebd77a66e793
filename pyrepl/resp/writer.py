"""Encode handler reply values (``pyrepl.resp.types``) for RESP2 or RESP3.

Theory of operation: ``encode(value, proto)`` returns the wire bytes: ``_encode.encode`` (C:
one buffer for a whole array, bench/RESULTS.md issue 39) or, as plain Python, its reference
``encode_reference``. The hot cases (bytes, int, None, Raw) are tested first with exact
``type() is`` checks; containers recurse. Doubles
use Redis 7.0's formatting (``%.17g``, ``inf``/``-inf``) so scores compare byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import repeat
from operator import attrgetter
from typing import Any

from pyrepl import native
from pyrepl.resp.types import (
    NULL_ARRAY,
    Map,
    Raw,
    ReplyError,
    SetReply,
    Status,
    Verbatim,
)

_SMALL_INTS = [b":%d\r\n" % i for i in range(-1, 1025)]
_data = attrgetter("data")
_int = b":%d\r\n".__mod__
_NoneType = type(None)


def bulk_replies_reference(replies: list[object], nil: bytes) -> bytes | None:
    """The wire bytes of a run's replies when each is bytes (a bulk string) or None (``nil``),
    in one bytes object; None when one is anything else (``_plainrun.bulk_replies``)."""
    parts = []
    for r in replies:
        if r is None:
            parts.append(nil)
        elif type(r) is bytes:
            parts.append(b"$%d\r\n%b\r\n" % (len(r), r))
        else:
            return None
    return b"".join(parts)


def int_replies_reference(replies: list[object]) -> bytes | None:
    """The wire bytes of a run's replies when each is an int (``:<n>``) in a long long, in one
    bytes object; None when one is anything else (``_plainrun.int_replies``)."""
    if any(type(r) is not int or not -(1 << 63) <= r < (1 << 63) for r in replies):
        return None
    return b"".join(b":%d\r\n" % r for r in replies)  # type: ignore[str-format]


_native = native.load("pyrepl._plainrun")
bulk_replies = bulk_replies_reference if _native is None else _native.bulk_replies
int_replies = int_replies_reference if _native is None else _native.int_replies


def format_double(d: float) -> bytes:
    """Redis 7.0's ``addReplyDouble`` text: ``%.17g``, with ``inf``/``-inf``."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    if d != d:
        return b"nan"
    return b"%.17g" % d


def error_bytes(message: str) -> bytes:
    # Redis replaces newlines in error text so the reply stays one line.
    return b"-" + message.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace") + b"\r\n"


def encode_reference(v: Any, proto: int = 2) -> bytes:
    """The wire bytes of reply value ``v`` (``_encode.encode``'s reference)."""
    t = type(v)
    if t is bytes:
        return b"$%d\r\n%s\r\n" % (len(v), v)
    if t is Raw:
        return v.data
    if t is int:
        if -1 <= v <= 1024:
            return _SMALL_INTS[v + 1]
        return b":%d\r\n" % v
    if v is None:
        return b"_\r\n" if proto == 3 else b"$-1\r\n"
    if t is list or t is tuple:
        parts = [b"*%d\r\n" % len(v)]
        parts.extend([encode_reference(x, proto) for x in v])
        return b"".join(parts)
    if t is Status:
        return b"+" + v.text.encode() + b"\r\n"
    if isinstance(v, ReplyError):
        return error_bytes(v.message)
    if t is float:
        s = format_double(v)
        if proto == 3:
            return b"," + s + b"\r\n"
        return b"$%d\r\n%s\r\n" % (len(s), s)
    if t is bool:
        if proto == 3:
            return b"#t\r\n" if v else b"#f\r\n"
        return b":1\r\n" if v else b":0\r\n"
    if t is Map:
        items = v.items
        if proto == 3:
            parts = [b"%%%d\r\n" % len(items)]
        else:
            parts = [b"*%d\r\n" % (2 * len(items))]
        for k, x in items:
            parts.append(encode_reference(k, proto))
            parts.append(encode_reference(x, proto))
        return b"".join(parts)
    if t is SetReply:
        items = v.items
        parts = [(b"~%d\r\n" if proto == 3 else b"*%d\r\n") % len(items)]
        parts.extend([encode_reference(x, proto) for x in items])
        return b"".join(parts)
    if v is NULL_ARRAY:
        return b"_\r\n" if proto == 3 else b"*-1\r\n"
    if t is Verbatim:
        data = v.data
        if proto == 3:
            return b"=%d\r\n%s:%s\r\n" % (len(data) + 4, v.fmt, data)
        return b"$%d\r\n%s\r\n" % (len(data), data)
    if t is str:
        b = v.encode()
        return b"$%d\r\n%s\r\n" % (len(b), b)
    if isinstance(v, int):  # int subclasses
        return b":%d\r\n" % int(v)
    raise TypeError(f"cannot encode reply value of type {t.__name__}")


_encode = native.load("pyrepl.resp._encode")
if _encode is None:
    encode = encode_reference
else:
    _encode.bind(Raw, Map, SetReply, encode_reference)
    encode = _encode.encode


def _encode_command_py(argv: list[bytes] | tuple[bytes, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(argv)]
    for a in argv:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - hiredis is a declared dependency
    _pack = None  # type: ignore[assignment]


def encode_command(argv: list[bytes] | tuple[bytes, ...]) -> bytes:
    """A command as a RESP array of bulk strings (used for propagation and client requests)."""
    if _pack is not None:
        return _pack(tuple(argv))  # type: ignore[arg-type]  # hiredis's stub types a 1-tuple
    return _encode_command_py(argv)


def encode_replies(replies: list[object], proto: int = 2) -> Iterable[bytes]:
    """The wire bytes of several replies, in order; replies of one kind (a pipeline of one
    command: ``+OK``s, bulk strings, integers) at C speed."""
    if not replies:
        return ()
    kind = type(replies[0])
    if kind is bytes or kind is _NoneType:   # GETs, hits and misses: one bytes object, in C
        data = bulk_replies(replies, b"_\r\n" if proto == 3 else b"$-1\r\n")
        if data is not None:
            return (data,)
    if kind is int:   # (EXISTS, INCR, SADD ...: one bytes object, in C)
        data = int_replies(replies)
        if data is not None:
            return (data,)
    n = len(replies)
    if kind is Raw and replies.count(replies[0]) == n:   # (a run of SETs: +OK each)
        return (replies[0].data * n,)  # type: ignore[attr-defined]  # a Raw
    kinds = list(map(type, replies))
    if kinds.count(kind) == n:
        if kind is Raw:
            return map(_data, replies)
        if kind is int:
            return map(_int, replies)
    return map(encode, replies, repeat(proto))
