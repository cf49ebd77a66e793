"""Client-side caching commands: CLIENT TRACKING, CLIENT CACHING, CLIENT GETREDIR and CLIENT
TRACKINGINFO (the tracking parts of Redis 7.0.15's clientCommand, networking.c).

Theory of operation: the handlers parse and check as Redis does, in its order and with its
error texts, and leave the state to :mod:`pyrepl.core.tracking` (``core.tracking``).
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import parse_int
from pyrepl.core.tracking import (
    T_BCAST,
    T_BROKEN_REDIR,
    T_CACHING,
    T_NOLOOP,
    T_ON,
    T_OPTIN,
    T_OPTOUT,
)
from pyrepl.errors import SYNTAX
from pyrepl.resp.types import OK, Map, ReplyError, SetReply
from pyrepl.resp.writer import error_bytes

_FLAGS = "noscript loading stale"
_OPTIONS = {b"bcast": T_BCAST, b"optin": T_OPTIN, b"optout": T_OPTOUT, b"noloop": T_NOLOOP}


@command("client|tracking", -3, _FLAGS, group="connection", acl="connection", since="6.0.0",
         summary="Enable or disable server assisted client side caching support")
def client_tracking(c: Any, argv: list[bytes]) -> object:
    core = c.core
    redirect = 0
    options = 0
    prefixes: list[bytes] = []
    j = 3
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = n - 1 - j
        if opt == b"redirect" and more:
            j += 1
            if redirect != 0:
                raise ReplyError("ERR A client can only redirect to a single other client")
            redirect = parse_int(argv[j], "ERR value is not an integer or out of range")
            if redirect not in core.clients:
                raise ReplyError("ERR The client ID you want redirect to does not exist")
        elif opt in _OPTIONS:
            options |= _OPTIONS[opt]
        elif opt == b"prefix" and more:
            j += 1
            prefixes.append(argv[j])
        else:
            raise ReplyError(SYNTAX)
        j += 1
    mode = argv[2].lower()
    if mode == b"off":
        if c.tracking:
            core.tracking.disable(c)
        return OK
    if mode != b"on":
        raise ReplyError(SYNTAX)
    if not options & T_BCAST and prefixes:
        raise ReplyError("ERR PREFIX option requires BCAST mode to be enabled")
    if c.tracking & T_ON and bool(c.tracking & T_BCAST) != bool(options & T_BCAST):
        raise ReplyError("ERR You can't switch BCAST mode on/off before disabling tracking for "
                         "this client, and then re-enabling it with a different mode.")
    if options & T_BCAST and options & (T_OPTIN | T_OPTOUT):
        raise ReplyError("ERR OPTIN and OPTOUT are not compatible with BCAST")
    if options & T_OPTIN and options & T_OPTOUT:
        raise ReplyError("ERR You can't specify both OPTIN mode and OPTOUT mode")
    if (options & T_OPTIN and c.tracking & T_OPTOUT) or \
            (options & T_OPTOUT and c.tracking & T_OPTIN):
        raise ReplyError("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for "
                         "this client, and then re-enabling it with a different mode.")
    if options & T_BCAST:
        err, stop = core.tracking.prefix_collision(c, prefixes)
        if err is not None:
            if stop:
                raise ReplyError(err)
            # Redis's checkPrefixCollisionsOrReply returns the index of the prefix that
            # overlaps a later one: past the first, that reads as success, so the client gets
            # the error and then OK, and tracking is on.
            core.error_reply(c, err, c.last_cmd, rejected=False)
            c.write(error_bytes(err))
    core.tracking.enable(c, redirect, options, prefixes)
    return OK


@command("client|caching", 3, _FLAGS, group="connection", acl="connection", since="6.0.0",
         summary="Instruct the server about tracking or not keys in the next request")
def client_caching(c: Any, argv: list[bytes]) -> object:
    if not c.tracking & T_ON:
        raise ReplyError("ERR CLIENT CACHING can be called only when the client is in tracking "
                         "mode with OPTIN or OPTOUT mode enabled")
    opt = argv[2].lower()
    if opt == b"yes":
        if not c.tracking & T_OPTIN:
            raise ReplyError("ERR CLIENT CACHING YES is only valid when tracking is enabled in "
                             "OPTIN mode.")
    elif opt == b"no":
        if not c.tracking & T_OPTOUT:
            raise ReplyError("ERR CLIENT CACHING NO is only valid when tracking is enabled in "
                             "OPTOUT mode.")
    else:
        raise ReplyError(SYNTAX)
    c.tracking |= T_CACHING
    return OK


@command("client|getredir", 2, _FLAGS, group="connection", acl="connection", since="6.0.0",
         summary="Get tracking notifications redirection client ID if any")
def client_getredir(c: Any, argv: list[bytes]) -> object:
    return c.tracking_redir if c.tracking & T_ON else -1


# CLIENT TRACKINGINFO's flags in order: (bit, name, what CACHING adds to it).
_INFO_FLAGS = ((T_BCAST, b"bcast", b""), (T_OPTIN, b"optin", b"caching-yes"),
               (T_OPTOUT, b"optout", b"caching-no"), (T_NOLOOP, b"noloop", b""),
               (T_BROKEN_REDIR, b"broken_redirect", b""))


@command("client|trackinginfo", 2, _FLAGS, group="connection", acl="connection", since="6.2.0",
         summary="Return information about server assisted client side caching for the current "
                 "connection")
def client_trackinginfo(c: Any, argv: list[bytes]) -> object:
    t = c.tracking
    flags = [b"on" if t & T_ON else b"off"]
    for bit, name, caching in _INFO_FLAGS:
        if t & bit:
            flags.append(name)
            if caching and t & T_CACHING:
                flags.append(caching)
    return Map([(b"flags", SetReply(flags)),
                (b"redirect", c.tracking_redir if t & T_ON else -1),
                (b"prefixes", list(c.tracking_prefixes or []))])
