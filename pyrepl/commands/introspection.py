"""Introspection commands: SLOWLOG GET/LEN/RESET/HELP and MONITOR.

Theory of operation: the slow log lives in ``pyrepl.slowlog`` (``core.slowlog``, filled by
``ServerCore.call``) and MONITOR's feed in ``pyrepl.monitor`` (``core.monitors``); these
handlers only read, reset or register.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command, container
from pyrepl.commands.util import help_reply, parse_long_range, subcommand_error
from pyrepl.resp.types import NO_REPLY, OK, ReplyError

container("slowlog", group="server", summary="A container for slow log commands",
          since="2.2.12")


@command("slowlog|get", -2, "admin loading stale", group="server", since="2.2.12",
         summary="Get the slow log's entries")
def slowlog_get(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise subcommand_error(argv)
    count = 10
    if len(argv) == 3:
        count = parse_long_range(argv[2], -1, (1 << 63) - 1,
                                 "ERR count should be greater than or equal to -1")
    return c.core.slowlog.get(count)


@command("slowlog|len", 2, "admin loading stale", group="server", since="2.2.12",
         summary="Get the slow log's length")
def slowlog_len(c: Any, argv: list[bytes]) -> object:
    return len(c.core.slowlog.entries)


@command("slowlog|reset", 2, "admin loading stale", group="server", since="2.2.12",
         summary="Clear all entries from the slow log")
def slowlog_reset(c: Any, argv: list[bytes]) -> object:
    c.core.slowlog.reset()
    return OK


@command("slowlog|help", 2, "loading stale", group="server", since="6.2.0",
         summary="Show helpful text about the different subcommands")
def slowlog_help(c: Any, argv: list[bytes]) -> object:
    return help_reply("SLOWLOG", (
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
    ))


@command("monitor", 1, "admin noscript loading stale", group="server",
         summary="Listen for all requests received by the server in real time")
def monitor(c: Any, argv: list[bytes]) -> object:
    """monitorCommand: not inside EXEC; a replica link or a monitor already gets no answer."""
    core = c.core
    if c.in_multi or core._call_depth:
        raise ReplyError("ERR MONITOR isn't allowed for DENY BLOCKING client")
    if c.kind in ("replica", "master") or c in core.monitors:
        return NO_REPLY
    core.monitors[c] = None
    core.resample()          # every call is timed (and fed) while a monitor listens
    return OK
