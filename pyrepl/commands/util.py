"""Argument parsing helpers shared by the command modules (shared helpers, both roles)."""

from __future__ import annotations

import math

from pyrepl.errors import NOT_FLOAT, NOT_INTEGER, SYNTAX
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


def parse_float(b: bytes, message: str = NOT_FLOAT) -> float:
    """Redis's string2d/strtold checks: no spaces, no nan; 'inf', '+inf', '-inf' accepted."""
    if not b or b[0] in b" \t\n\r\v\f" or b[-1] in b" \t\n\r\v\f":
        raise ReplyError(message)
    try:
        v = float(b)
    except ValueError:
        raise ReplyError(message) from None
    if math.isnan(v):
        raise ReplyError(message)
    low = b.lower()
    if b"_" in b or low.startswith((b"0x", b"-0x", b"+0x")):
        raise ReplyError(message)
    return v


def syntax_error() -> ReplyError:
    return ReplyError(SYNTAX)
