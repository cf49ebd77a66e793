"""Master-side replication commands: PSYNC, SYNC, REPLCONF, WAIT, FAILOVER (master side).

Theory of operation: thin entries in the command table; the logic (and its state) lives in
:class:`pyrepl.replication.master.MasterSide` (``core.replication.master``), which is sans-io and
tested directly. Flags and arities are Redis 7.0.15's. The RDB channel (Redis 8) needs no
command of its own: its connection is an ordinary client sending ``REPLCONF ... rdb-channel 1
main-ch-client-id <id>`` and ``PSYNC ? -1``, which ``MasterSide`` tells apart.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import parse_int
from pyrepl.errors import SYNTAX
from pyrepl.resp.types import OK, ReplyError


def _master(c: Any) -> Any:
    repl = c.core.replication
    if repl is None:
        raise ReplyError("ERR replication is not available on this server")
    return repl.master


@command("psync", -3, "admin noscript no-async-loading no-multi", group="server",
         summary="An internal command used in replication.", since="2.8.0")
def psync(c: Any, argv: list[bytes]) -> object:
    return _master(c).sync_command(c, argv)


@command("sync", 1, "admin noscript no-async-loading no-multi", group="server",
         summary="An internal command used in replication.", since="1.0.0")
def sync(c: Any, argv: list[bytes]) -> object:
    return _master(c).sync_command(c, argv)


@command("replconf", -1, "admin noscript loading stale allow-busy", group="server",
         summary="An internal command for configuring the replication stream.", since="3.0.0")
def replconf(c: Any, argv: list[bytes]) -> object:
    return _master(c).replconf_command(c, argv)


@command("wait", 3, "noscript", group="generic",
         summary="Blocks until the asynchronous replication of all preceding write commands "
                 "sent by the connection is completed.", since="3.0.0")
def wait(c: Any, argv: list[bytes]) -> object:
    return _master(c).wait_command(c, argv)


@command("failover", -1, "admin noscript stale", group="server", since="6.2.0",
         summary="Starts a coordinated failover from a server to one of its replicas.")
def failover(c: Any, argv: list[bytes]) -> object:
    """FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (pyrepl.replication.failover),
    parsed as Redis's failoverCommand."""
    fo = _master(c).manager.failover
    if len(argv) == 2 and argv[1].lower() == b"abort":
        if fo.state == "no-failover":
            raise ReplyError("ERR No failover in progress.")
        fo.abort("Failover manually aborted")
        return OK
    timeout = port = 0
    force = False
    host: str | None = None
    j = 1
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"timeout" and j + 1 < len(argv) and timeout == 0:
            timeout = parse_int(argv[j + 1])
            if timeout <= 0:
                raise ReplyError("ERR FAILOVER timeout must be greater than 0")
            j += 2
        elif opt == b"to" and j + 2 < len(argv) and host is None:
            port = parse_int(argv[j + 2])
            host = argv[j + 1].decode("utf-8", "surrogateescape")
            j += 3
        elif opt == b"force" and not force:
            force = True
            j += 1
        else:
            raise ReplyError(SYNTAX)
    err = fo.request(host, port, timeout, force)
    if err is not None:
        raise ReplyError(err)
    return OK
