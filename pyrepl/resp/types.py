"""Reply values that command handlers return, independent of the wire protocol.

Theory of operation: handlers return plain Python values and a few wrapper types; the writer
(``pyrepl.resp.writer``) encodes them for the client's protocol (RESP2 or RESP3), so one handler
serves both. The mapping:

=================  ==========================  ===========================
value              RESP2                       RESP3
=================  ==========================  ===========================
bytes              bulk string ``$``           bulk string ``$``
int                integer ``:``               integer ``:``
bool               integer ``:1`` / ``:0``     boolean ``#t`` / ``#f``
float              bulk string (Redis digits)  double ``,``
None               null bulk ``$-1``           null ``_``
NULL_ARRAY         null array ``*-1``          null ``_``
list / tuple       array ``*``                 array ``*``
Map                flat array of k, v          map ``%``
SetReply           array ``*``                 set ``~``
Verbatim           bulk string                 verbatim ``=`` (txt:)
Status             simple string ``+``         simple string ``+``
ReplyError         error ``-``                 error ``-``
Raw                bytes as given              bytes as given
=================  ==========================  ===========================
"""

from __future__ import annotations

from collections.abc import Iterable


class ReplyError(Exception):
    """An error reply. Raise it from a handler, or place an instance inside an array reply.

    ``message`` is the text after the leading ``-`` (for example ``"ERR syntax error"`` or
    ``"WRONGTYPE Operation against a key holding the wrong kind of value"``).
    """

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Status:
    """A simple string reply (``+OK``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Status({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Status) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class Raw:
    """Bytes already encoded for the wire, identical in RESP2 and RESP3."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class Map:
    """A map reply: RESP3 ``%``, RESP2 flat array. ``items`` is a list of (key, value)."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[tuple[object, object]] | dict) -> None:
        self.items = list(items.items()) if isinstance(items, dict) else list(items)


class SetReply:
    """A set reply: RESP3 ``~``, RESP2 array."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[object]) -> None:
        self.items = list(items)


class Verbatim:
    """A verbatim string: RESP3 ``=<len>\\r\\ntxt:...``, RESP2 bulk string."""

    __slots__ = ("data", "fmt")

    def __init__(self, data: bytes, fmt: bytes = b"txt") -> None:
        self.data = data
        self.fmt = fmt


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()

OK = Raw(b"+OK\r\n")
NO_REPLY = Raw(b"")  # the command answers nothing (SHUTDOWN closes the connection instead)
# A handler returns BLOCKED after blocking its client (``core.blocking.block``: BLPOP, WAIT,
# SHUTDOWN ...); the reply comes later through ServerCore.unblock.
BLOCKED: object = object()
QUEUED = Raw(b"+QUEUED\r\n")
PONG = Raw(b"+PONG\r\n")
