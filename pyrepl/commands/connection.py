"""Connection commands: PING ECHO QUIT AUTH HELLO SELECT SWAPDB RESET.

Theory of operation: per-connection state lives on the Client (protocol version, selected db,
authentication, name); HELLO switches RESP2/RESP3 and answers the map Redis 7 answers.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import parse_int
from pyrepl.errors import DB_INDEX_OUT_OF_RANGE, SYNTAX, WRONGPASS
from pyrepl.resp.types import OK, PONG, Map, ReplyError, Status


@command("ping", -1, "fast sentinel", group="connection", acl="connection",
         summary="Returns the server's liveliness response.")
def ping(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 2:
        raise ReplyError("ERR wrong number of arguments for 'ping' command")
    if c.subs is not None and c.proto == 2:     # subscribe mode: a pong frame
        return [b"pong", b"" if len(argv) == 1 else argv[1]]
    return PONG if len(argv) == 1 else argv[1]


@command("echo", 2, "loading stale fast", group="connection", acl="connection",
         summary="Returns the given string.")
def echo(c: Any, argv: list[bytes]) -> object:
    return argv[1]


@command("quit", -1, "allow-busy noscript loading stale fast no-auth", group="connection",
         acl="connection", summary="Closes the connection.")
def quit_(c: Any, argv: list[bytes]) -> object:
    c.close_after_reply = True
    return OK


def authenticate(c: Any, user: bytes, password: bytes, argv0: bytes = b"auth") -> bool:
    """Before any ACL use only ``default`` exists, its password ``requirepass``; then the ACL
    users (pyrepl.core.acl: ACLAuthenticateUser, which logs a failure)."""
    acl = c.core.__dict__.get("acl")
    if acl is not None:
        return bool(acl.authenticate(c, user, password, argv0))
    required = c.core.config.requirepass
    if user != b"default":
        return False
    if not required or password == required.encode():
        c.set_authenticated(True)
        return True
    return False


@command("auth", -2, "no-auth fast sentinel no-script loading stale allow-busy",
         group="connection", acl="connection",
         summary="Authenticates the connection.")
def auth(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 2:
        acl = c.core.__dict__.get("acl")
        if acl is not None:
            acl.sync_default()
        if ("nopass" in acl.default.flags) if acl is not None else not c.core.config.requirepass:
            raise ReplyError(
                "ERR AUTH <password> called without any password configured for the default "
                "user. Are you sure your configuration is correct?")
        user, password = b"default", argv[1]
    else:
        user, password = argv[1], argv[2]
    if authenticate(c, user, password, argv[0]):
        return OK
    c.core.log.verbose(f"Authentication failed for client {c.describe()}")
    raise ReplyError(WRONGPASS)


def valid_client_name(name: bytes) -> bool:
    return all(33 <= ch <= 126 for ch in name)


@command("hello", -1, "no-auth fast sentinel no-script loading stale allow-busy",
         group="connection", acl="connection",
         summary="Handshakes with the Redis server.")
def hello(c: Any, argv: list[bytes]) -> object:
    ver = 0
    j = 1
    if len(argv) >= 2:
        ver = parse_int(argv[1], "ERR Protocol version is not an integer or out of range")
        j = 2
        if ver < 2 or ver > 3:
            raise ReplyError("NOPROTO unsupported protocol version")
    name = None
    while j < len(argv):
        more = len(argv) - 1 - j
        opt = argv[j].lower()
        if opt == b"auth" and more >= 2:
            if not authenticate(c, argv[j + 1], argv[j + 2], argv[0]):
                raise ReplyError(WRONGPASS)
            j += 3
        elif opt == b"setname" and more:
            name = argv[j + 1]
            if not valid_client_name(name):
                raise ReplyError("ERR Client names cannot contain spaces, newlines or "
                                 "special characters.")
            c.name = name
            j += 2
        else:
            raise ReplyError(f"ERR Syntax error in HELLO option '{argv[j].decode('utf-8', 'replace')}'")
    if not c.authenticated:
        raise ReplyError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
            "the RESP protocol version at the same time")
    if ver:
        c.proto = ver
    core = c.core
    role = b"replica" if core.replication is not None and core.replication.is_replica() \
        else b"master"
    return Map([
        (b"server", b"redis"),
        (b"version", core.redis_version.encode()),
        (b"proto", c.proto),
        (b"id", c.id),
        (b"mode", b"standalone"),
        (b"role", role),
        (b"modules", []),
    ])


@command("select", 2, "loading stale fast", group="connection", acl="connection",
         summary="Changes the selected database.")
def select(c: Any, argv: list[bytes]) -> object:
    index = parse_int(argv[1], "ERR value is not an integer or out of range")
    if not -2147483648 <= index <= 2147483647:
        raise ReplyError("ERR value is out of range, value must between -2147483648 and "
                         "2147483647")
    if c.core.cluster is not None and index != 0:
        raise ReplyError("ERR SELECT is not allowed in cluster mode")
    if index < 0 or index >= len(c.core.dbs):
        raise ReplyError(DB_INDEX_OUT_OF_RANGE)
    c.core.select_db(c, index)
    return OK


@command("swapdb", 3, "write fast", group="server", acl="keyspace dangerous",
         summary="Swaps two Redis databases.")
def swapdb(c: Any, argv: list[bytes]) -> object:
    if c.core.cluster is not None:      # (db 0 alone in cluster mode)
        raise ReplyError("ERR SWAPDB is not allowed in cluster mode")
    a = parse_int(argv[1], "ERR invalid first DB index")
    b = parse_int(argv[2], "ERR invalid second DB index")
    dbs = c.core.dbs
    if a < 0 or a >= len(dbs) or b < 0 or b >= len(dbs):
        raise ReplyError(DB_INDEX_OUT_OF_RANGE)
    if a != b:
        da, db_ = dbs[a], dbs[b]
        # WATCHers of a key that exists on either side see a change (touchAllWatchedKeysInDb:
        # the watches stay with their database); tracking is not invalidated
        da.touch_all_watched(db_)
        db_.touch_all_watched(da)
        da.data, db_.data = db_.data, da.data
        da.expires, db_.expires = db_.expires, da.expires
        da._expire_keys, db_._expire_keys = [], []
        da._expire_pos = db_._expire_pos = 0
    c.core.dirty += 1
    return OK


@command("reset", 1, "no-script loading stale fast no-auth allow-busy", group="connection",
         acl="connection",
         summary="Resets the connection.")
def reset(c: Any, argv: list[bytes]) -> object:
    c.discard_transaction()
    c.core.pubsub.forget(c)
    if c.tracking:     # clearClientConnectionState: tracking off (pyrepl.core.tracking)
        c.core.tracking.disable(c)
    if c.core.monitors.pop(c, 0) is None:   # no longer a MONITOR (nor sees its own RESET)
        c.core.resample()
    c.core.select_db(c, 0)
    c.proto = 2
    c.name = b""
    c.cluster_flags = 0     # (ASKING, READONLY)
    acl = c.core.__dict__.get("acl")
    if acl is not None:     # clearClientConnectionState: back to the default user
        acl.attach(c)
    else:
        c.set_authenticated(not c.core.config.requirepass)
    return Status("RESET")
