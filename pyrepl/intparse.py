"""Redis's string2ll, the integer parser of command arguments and of replication messages (a
leaf module: the commands, the keyspace and the replication layer all use it).

Theory of operation: which text a client may send as a 64-bit integer, and which error it gets
back otherwise, is decided in Redis by ``string2ll``: an optional ``-``, no ``+``, no leading
zeros, no spaces, and the signed 64-bit range. :func:`parse_int` is that, with the caller's
error text (Redis's "value is not an integer or out of range" unless told otherwise).
"""

from __future__ import annotations

from pyrepl.errors import NOT_INTEGER
from pyrepl.resp.types import ReplyError

LLONG_MIN = -(1 << 63)
LLONG_MAX = (1 << 63) - 1


def parse_int(b: bytes, message: str = NOT_INTEGER) -> int:
    """Redis's string2ll: optional '-', no '+', no leading zeros, no spaces, 64-bit range."""
    n = len(b)
    if n == 0 or n > 20:
        raise ReplyError(message)
    first = b[0]
    if first == 48:  # '0'
        if n == 1:
            return 0
        raise ReplyError(message)
    if first == 45:  # '-'
        if n == 1 or b[1] == 48 or not b[1:].isdigit():
            raise ReplyError(message)
    elif not b.isdigit():
        raise ReplyError(message)
    v = int(b)
    if v < LLONG_MIN or v > LLONG_MAX:
        raise ReplyError(message)
    return v
