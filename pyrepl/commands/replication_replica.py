"""REPLICAOF / SLAVEOF and ROLE (replica side of the replication commands).

Theory of operation: the handlers validate arguments exactly as Redis 7.0.15's
``replicaofCommand`` / ``roleCommand`` do and delegate to the replication layer
(``core.replication.replica``: :class:`~pyrepl.replication.replica.ReplicaSide`), which owns the
state. REPLCONF (registered by the master side) calls ``ReplicaSide.on_master_replconf`` when our
own master sends it (GETACK).
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.resp.reader import string2ll
from pyrepl.resp.types import OK, ReplyError, Status


def _client_info(c: Any) -> str:

    return c.info_line()


def _replicaof(c: Any, argv: list[bytes]) -> object:
    core = c.core
    if core.cluster is not None:
        raise ReplyError("ERR REPLICAOF not allowed in cluster mode.")
    repl = core.replication
    if repl is None:
        raise ReplyError("ERR replication is not available")
    side = repl.replica
    if repl.failover.state != "no-failover":
        raise ReplyError("ERR REPLICAOF not allowed while failing over.")
    host_arg, port_arg = argv[1], argv[2]
    if host_arg.lower() == b"no" and port_arg.lower() == b"one":
        if side.master_host is not None:
            side.unset_master()
            core.log.notice(f"MASTER MODE enabled (user request from '{_client_info(c)}')")
        return OK
    if c.kind == "replica":
        raise ReplyError("ERR Command is not valid when client is a replica.")
    port = string2ll(port_arg)
    if port is None or not 0 <= port <= 65535:
        raise ReplyError("ERR Invalid master port")
    host = host_arg.decode("utf-8", "surrogateescape")
    if side.master_host is not None and side.master_host.lower() == host.lower() \
            and side.master_port == port:
        core.log.notice("REPLICAOF would result into synchronization with the master we are "
                        "already connected with. No operation performed.")
        return Status("OK Already connected to specified master")
    side.set_master(host, port)
    core.log.notice(f"REPLICAOF {side.master_host}:{side.master_port} enabled (user request "
                    f"from '{_client_info(c)}')")
    return OK


@command("replicaof", 3, "admin noscript stale no-async-loading", group="server", since="5.0.0",
         summary="Configures a server as replica of another, or promotes it to a master.")
def replicaof(c: Any, argv: list[bytes]) -> object:
    return _replicaof(c, argv)


@command("slaveof", 3, "admin noscript stale no-async-loading", group="server", since="1.0.0",
         summary="Sets a Redis server as a replica of another, or promotes it to being a master.")
def slaveof(c: Any, argv: list[bytes]) -> object:
    return _replicaof(c, argv)


def _parse_replica_line(value: str) -> dict[str, str]:
    out = {}
    for part in value.split(","):
        k, _, v = part.partition("=")
        out[k] = v
    return out


@command("role", 1, "noscript loading stale fast sentinel", group="server", since="2.8.12",
         summary="Returns the replication role.", acl="admin dangerous")
def role(c: Any, argv: list[bytes]) -> object:
    repl = c.core.replication
    if repl is None:
        return [b"master", 0, []]
    side = repl.replica
    if side.master_host is not None:
        return side.role_reply()
    replicas = []
    for _name, line in repl.master.info_replica_lines():
        f = _parse_replica_line(str(line))
        if f.get("state") != "online":
            continue
        replicas.append([f.get("ip", "").encode(), f.get("port", "0").encode(),
                         f.get("offset", "0").encode()])
    return [b"master", repl.master_repl_offset, replicas]
