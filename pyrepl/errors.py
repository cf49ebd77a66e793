"""Error texts that clients parse, exactly as Redis 7 sends them (without the leading '-')."""

from __future__ import annotations

from pyrepl.resp.types import ReplyError

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
NOT_FLOAT = "ERR value is not a valid float"
OVERFLOW = "ERR increment or decrement would overflow"
NO_SUCH_KEY = "ERR no such key"
INDEX_OUT_OF_RANGE = "ERR index out of range"
DB_INDEX_OUT_OF_RANGE = "ERR DB index is out of range"
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
INVALID_EXPIRE = "ERR invalid expire time in '%s' command"
OOM = "OOM command not allowed when used memory > 'maxmemory'."


def wrong_args(name: str) -> ReplyError:
    return ReplyError(f"ERR wrong number of arguments for '{name}' command")


def wrongtype() -> ReplyError:
    return ReplyError(WRONGTYPE)


def syntax() -> ReplyError:
    return ReplyError(SYNTAX)


def not_integer() -> ReplyError:
    return ReplyError(NOT_INTEGER)
