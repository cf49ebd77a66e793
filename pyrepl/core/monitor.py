"""MONITOR: every command the server runs, as a line to the clients that asked (Redis's
replicationFeedMonitors).

Theory of operation: ``ServerCore.call`` hands each command it ran (after it ran, as Redis
7.0: a command's effects come before its line) to :func:`feed` while ``core.monitors`` is not
empty, except commands flagged ``admin`` or ``skip-monitor`` (EVAL shows itself before its
script's commands; those show ``[db lua]``). The line is ``+<unix time.µs> [<db> <client
address>] "arg" "arg"...`` with each argument quoted as Redis's sdscatrepr, the secrets of
AUTH/HELLO/CONFIG SET redacted (pyrepl.core.slowlog.loggable_argv); a replica shows what it applies
from its master with the master link's address, as Redis does.
"""

from __future__ import annotations

from typing import Any

from pyrepl.core.slowlog import loggable_argv

_ESC = {0x5C: b"\\\\", 0x22: b'\\"', 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x07: b"\\a",
        0x08: b"\\b"}
_REPR = [_ESC.get(b, bytes([b]) if 0x20 <= b < 0x7F else b"\\x%02x" % b) for b in range(256)]


def repr_arg(a: bytes) -> bytes:
    """sdscatrepr: the argument in double quotes, escaped."""
    if a.isascii() and a.isalnum():
        return b'"' + a + b'"'
    return b'"' + b"".join([_REPR[b] for b in a]) + b'"'


def line(c: Any, db_id: int, name: str, argv: list[bytes], time_us: int) -> bytes:
    if c.kind == "script":
        where = b"lua"
    else:
        where = c.addr.encode()
        if c.unix_socket:
            where = b"unix:" + where.rpartition(b":")[0]
    shown = loggable_argv(name, argv)
    return b"+%d.%06d [%d %s] %s\r\n" % (time_us // 1_000_000, time_us % 1_000_000, db_id, where,
                                       b" ".join([repr_arg(a) for a in shown]))


def feed(core: Any, c: Any, name: str, argv: list[bytes]) -> None:
    data = line(c, c.db.id, name, argv, core.host.time_us())
    for m in list(core.monitors):
        if m.closed:
            continue
        if not m.out:
            core.pending_flush.append(m)
        m.out.append(data)
