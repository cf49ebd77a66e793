"""Server commands: INFO CONFIG CLIENT COMMAND DBSIZE FLUSHDB FLUSHALL TIME SAVE BGSAVE LASTSAVE
SHUTDOWN DEBUG.

Theory of operation: these handlers read and change server-wide state on the core; anything
that needs the OS (fork, exit, sleep, the clock in microseconds) goes through ``core.host``.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.keyspec_walk import info_key_specs, info_tips
from pyrepl.commands.table import COMMANDS, Command, command, container, find_command
from pyrepl.commands.util import help_reply, parse_float, parse_int, subcommand_error
from pyrepl.config import ConfigError
from pyrepl.core.client import REPLY_OFF, REPLY_SET, REPLY_SKIP
from pyrepl.core.info import generate_info
from pyrepl.core.pause import ALL, WRITE
from pyrepl.errors import SYNTAX
from pyrepl.keyspace.glob import stringmatch
from pyrepl.resp.types import NO_REPLY, OK, Map, Raw, ReplyError, SetReply, Status, Verbatim

# -- keyspace-wide ----------------------------------------------------------------------------


@command("dbsize", 1, "readonly fast", group="server", acl="keyspace", summary="Returns the number of keys in the database.")
def dbsize(c: Any, argv: list[bytes]) -> object:
    return len(c.db.data)


def _flush_lazily(c: Any, argv: list[bytes]) -> bool:
    """getFlushCommandFlags: ASYNC, SYNC, or ``lazyfree-lazy-user-flush``'s choice."""
    if len(argv) > 2:
        raise ReplyError("ERR syntax error")
    if len(argv) == 2:
        flag = argv[1].lower()
        if flag not in (b"async", b"sync"):
            raise ReplyError("ERR syntax error")
        return flag == b"async"
    return bool(c.core.config.lazyfree_lazy_user_flush)


@command("flushdb", -1, "write", group="server", acl="keyspace dangerous", summary="Removes all keys from the current database.")
def flushdb(c: Any, argv: list[bytes]) -> object:
    c.db.flush(_flush_lazily(c, argv))
    c.core.dirty += 1
    return OK


@command("flushall", -1, "write", group="server", acl="keyspace dangerous", summary="Removes all keys from all databases.")
def flushall(c: Any, argv: list[bytes]) -> object:
    lazy = _flush_lazily(c, argv)
    core = c.core
    for db in core.dbs:
        db.flush(lazy)
    core.replica_keys_with_expire.clear()
    core.kill_rdb_child()
    core.dirty += 1
    if core.config.save:
        # As Redis 7.0: FLUSHALL with save points writes an empty RDB right away, which leaves
        # no change unsaved (rdb_changes_since_last_save 0)
        core.persistence.save()
    c.propagate_argv = argv     # (forceCommandPropagation: replicated and in the AOF anyway)
    return OK


# -- INFO, TIME, persistence ------------------------------------------------------------------


@command("info", -1, "loading stale sentinel", group="server", acl="dangerous", summary="Returns information and statistics about the server.")
def info(c: Any, argv: list[bytes]) -> object:
    return Verbatim(generate_info(c.core, argv[1:]).encode())


@command("time", 1, "loading stale fast", group="server", summary="Returns the server time.")
def time_(c: Any, argv: list[bytes]) -> object:
    us = c.core.host.time_us() or c.core.now_ms * 1000
    return [str(us // 1_000_000).encode(), str(us % 1_000_000).encode()]


@command("lastsave", 1, "loading stale fast", group="server", acl="admin dangerous", summary="Returns the Unix timestamp of the last successful save to disk.")
def lastsave(c: Any, argv: list[bytes]) -> object:
    return c.core.persistence.lastsave_ms // 1000


@command("save", 1, "admin noscript no-async-loading no-multi", group="server", summary="Synchronously saves the database(s) to disk.")
def save(c: Any, argv: list[bytes]) -> object:
    core = c.core
    if core.rdb_child_pid != -1:
        raise ReplyError("ERR Background save already in progress")
    if core.persistence.save():
        return OK
    raise ReplyError("ERR")


@command("bgsave", -1, "admin noscript no-async-loading", group="server", summary="Asynchronously saves the database(s) to disk.")
def bgsave(c: Any, argv: list[bytes]) -> object:
    schedule = False
    if len(argv) > 1:
        if len(argv) == 2 and argv[1].lower() == b"schedule":
            schedule = True
        else:
            raise ReplyError("ERR syntax error")
    core = c.core
    if core.rdb_child_pid != -1:
        if schedule and core.rdb_child_purpose != "disk":
            core.persistence.scheduled = True
            return Status("Background saving scheduled")
        if core.rdb_child_purpose == "disk":
            raise ReplyError("ERR Background save already in progress")
        if schedule:
            core.persistence.scheduled = True
            return Status("Background saving scheduled")
        raise ReplyError("ERR Another child process is active (AOF?): can't BGSAVE right now. "
                         "Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.")
    err = core.persistence.bgsave()
    if err:
        raise ReplyError(err)
    return Status("Background saving started")


@command("bgrewriteaof", 1, "admin noscript no-async-loading", group="server", summary="Asynchronously rewrites the append-only file to disk.")
def bgrewriteaof(c: Any, argv: list[bytes]) -> object:
    """bgrewriteaofCommand: started now, or scheduled while another child runs or inside
    EXEC (the consecutive-failure count reset so the cron does not hold it back)."""
    core = c.core
    aof = core.aof
    if aof.child_pid != -1:
        raise ReplyError("ERR Background append only file rewriting already in progress")
    if core.rdb_child_pid != -1 or core._call_depth > 0:
        aof.rewrite_scheduled = True
        aof.consecutive_failures = 0
        return Status("Background append only file rewriting scheduled")
    if aof.rewrite_background():
        return Status("Background append only file rewriting started")
    raise ReplyError("ERR Can't execute an AOF background rewriting. Please check the server "
                     "logs for more information.")


@command("shutdown", -1, "admin noscript loading stale no-multi sentinel allow-busy", group="server", summary="Synchronously saves the database(s) to disk and shuts down the Redis server.")
def shutdown(c: Any, argv: list[bytes]) -> object:
    from pyrepl.core.shutdown import SHUTDOWN_FORCE, SHUTDOWN_NOSAVE, SHUTDOWN_NOW, SHUTDOWN_SAVE
    from pyrepl.resp.types import BLOCKED

    options = {b"nosave": SHUTDOWN_NOSAVE, b"save": SHUTDOWN_SAVE, b"now": SHUTDOWN_NOW,
               b"force": SHUTDOWN_FORCE}
    flags = 0
    abort = False
    for a in argv[1:]:
        opt = a.lower()
        if opt == b"abort":
            abort = True
        elif opt in options:
            flags |= options[opt]
        else:
            raise ReplyError("ERR syntax error")
    if (abort and len(argv) > 2) or (flags & SHUTDOWN_NOSAVE and flags & SHUTDOWN_SAVE):
        raise ReplyError("ERR syntax error")
    core = c.core
    if core.busy is not None and not flags & SHUTDOWN_NOSAVE:
        raise ReplyError(core.busy)     # a busy script: only SHUTDOWN NOSAVE (as Redis)
    if abort:
        if not core.shutdown.abort():
            raise ReplyError("ERR No shutdown in progress.")
        return OK
    result = core.shutdown.request(flags, c)
    if result is BLOCKED:
        return BLOCKED
    if result is not None:
        raise ReplyError(str(result))
    c.close_after_reply = True
    return NO_REPLY


# -- CONFIG -----------------------------------------------------------------------------------

container("config", summary="A container for server configuration commands.", since="2.0.0")


@command("config|get", -3, "admin noscript loading stale", group="server", summary="Returns the effective values of configuration parameters.")
def config_get(c: Any, argv: list[bytes]) -> object:
    # surrogateescape: a glob sees the exact bytes sent, as in Redis
    patterns = [a.decode("utf-8", "surrogateescape") for a in argv[2:]]
    return Map([(k.encode(), v.encode()) for k, v in c.core.config.config_get(patterns)])


@command("config|set", -4, "admin noscript loading stale", group="server", summary="Sets configuration parameters in-flight.")
def config_set(c: Any, argv: list[bytes]) -> object:
    args = argv[2:]
    if len(args) % 2:
        raise ReplyError("ERR wrong number of arguments for 'config|set' command")
    pairs = [(args[i].decode("utf-8", "replace"), args[i + 1].decode("utf-8", "surrogateescape"))
             for i in range(0, len(args), 2)]
    try:
        c.core.config.set_many(pairs, allow_protected=c.allows_protected(
            c.core.config.enable_protected_configs), loading=c.core.loading)
    except ConfigError as e:
        msg = str(e)
        raise ReplyError(msg if msg.startswith(("ERR", "LOADING")) else "ERR " + msg) \
            from None
    return OK


@command("config|resetstat", 2, "admin noscript loading stale", group="server", summary="Resets the server's statistics.")
def config_resetstat(c: Any, argv: list[bytes]) -> object:
    c.core.stats.reset()
    for st in c.core.cmdstats.values():   # in place: this very call is then counted
        st.__init__()
    c.core.errorstats.clear()
    c.core.lazyfree.reset_stats()
    return OK


@command("config|rewrite", 2, "admin noscript loading stale", group="server", summary="Persists the effective configuration to file.")
def config_rewrite(c: Any, argv: list[bytes]) -> object:
    return _rewrite_config(c, False)


def _rewrite_config(c: Any, force_all: bool) -> object:
    """CONFIG REWRITE (``force_all``: DEBUG CONFIG-REWRITE-FORCE-ALL, defaults written too)."""
    from pyrepl.config_rewrite import rewrite_file
    from pyrepl.core.acl import acl_of
    from pyrepl.core.acl_file import user_lines

    core = c.core
    cfg = core.config
    if not cfg.source_file:
        raise ReplyError("ERR The server is running without a config file")
    # (the users as latin-1 text, the file as UTF-8 with surrogate escapes: the same bytes)
    users = [line.encode("latin-1").decode("utf-8", "surrogateescape")
             for line in user_lines(acl_of(core))]
    try:
        rewrite_file(cfg, users=users, force_all=force_all)
    except OSError as e:
        reason = e.strerror or str(e)
        core.log.warning(f"CONFIG REWRITE failed: {reason}")
        raise ReplyError(f"ERR Rewriting config file: {reason}") from None
    core.log.warning("CONFIG REWRITE executed with success.")   # LL_WARNING, as Redis
    return OK


@command("config|help", 2, "loading stale", group="server", summary="Returns helpful text about the different subcommands.")
def config_help(c: Any, argv: list[bytes]) -> object:
    return [Status(s) for s in (
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
        "RESETSTAT", "    Reset statistics reported by the INFO command.",
        "REWRITE", "    Rewrite the configuration file.",
        "HELP", "    Prints this help.")]


# -- CLIENT -----------------------------------------------------------------------------------

container("client", group="connection", summary="A container for client connection commands.", since="2.4.0")


CLIENT_TYPES = (b"normal", b"master", b"replica", b"slave", b"pubsub")


def _client_type(cl: Any) -> bytes:
    return {"replica": b"replica", "master": b"master", "pubsub": b"pubsub"}.get(cl.kind, b"normal")


@command("client|list", -2, "admin noscript loading stale", group="connection", acl="connection", summary="Lists open connections.")
def client_list(c: Any, argv: list[bytes]) -> object:
    core = c.core
    clients = list(core.clients.values())
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"type" and i + 1 < len(argv):
            t = argv[i + 1].lower()
            if t == b"slave":
                t = b"replica"
            if t not in CLIENT_TYPES:
                raise ReplyError(f"ERR Unknown client type '{argv[i + 1].decode('utf-8', 'replace')}'")
            clients = [cl for cl in clients if _client_type(cl) == t]
            i += 2
        elif opt == b"id" and i + 1 < len(argv):
            ids = set()
            for a in argv[i + 1:]:
                try:
                    ids.add(parse_int(a))
                except ReplyError:
                    raise ReplyError("ERR Invalid client ID") from None
            clients = [cl for cl in clients if cl.id in ids]
            i = len(argv)
        else:
            raise ReplyError("ERR syntax error")
    return Verbatim("".join(cl.info_line(argv if cl is c else None) + "\n"
                            for cl in clients).encode())


@command("client|info", 2, "noscript loading stale", group="connection", acl="connection", summary="Returns information about the connection.")
def client_info(c: Any, argv: list[bytes]) -> object:
    return Verbatim((c.info_line(argv) + "\n").encode())


@command("client|id", 2, "noscript loading stale", group="connection", acl="connection", summary="Returns the unique client ID of the connection.")
def client_id(c: Any, argv: list[bytes]) -> object:
    return c.id


def _valid_name(name: bytes) -> bool:
    return all(33 <= ch <= 126 for ch in name)


@command("client|setname", 3, "noscript loading stale", group="connection", acl="connection", summary="Sets the connection name.")
def client_setname(c: Any, argv: list[bytes]) -> object:
    name = argv[2]
    if not _valid_name(name):
        raise ReplyError("ERR Client names cannot contain spaces, newlines or special characters.")
    c.name = name
    return OK


@command("client|getname", 2, "noscript loading stale", group="connection", acl="connection", summary="Returns the name of the connection.")
def client_getname(c: Any, argv: list[bytes]) -> object:
    return c.name or None


@command("client|setinfo", 4, "noscript loading stale", group="connection", acl="connection", summary="Sets information specific to the client or connection.")
def client_setinfo(c: Any, argv: list[bytes]) -> object:
    attr = argv[2].lower()
    val = argv[3]
    if attr not in (b"lib-name", b"lib-ver"):
        raise ReplyError(f"ERR Unrecognized option '{argv[2].decode('utf-8', 'replace')}'")
    if not _valid_name(val) and val:
        raise ReplyError(f"ERR {attr.decode()} cannot contain spaces, newlines or special "
                         "characters.")
    if attr == b"lib-name":
        c.lib_name = val
    else:
        c.lib_ver = val
    return OK


@command("client|kill", -3, "admin noscript loading stale", group="connection", acl="connection", summary="Terminates open connections.")
def client_kill(c: Any, argv: list[bytes]) -> object:
    core = c.core
    if len(argv) == 3:  # old form: CLIENT KILL addr:port
        addr = argv[2].decode("utf-8", "replace")
        for cl in list(core.clients.values()):
            if cl.addr == addr:
                _kill(c, cl)
                return OK
        raise ReplyError("ERR No such client")
    filters: list[tuple[bytes, bytes]] = []
    skipme = True
    i = 2
    while i < len(argv):
        if i + 1 >= len(argv):
            raise ReplyError("ERR syntax error")
        opt, val = argv[i].lower(), argv[i + 1]
        if opt == b"skipme":
            if val.lower() == b"yes":
                skipme = True
            elif val.lower() == b"no":
                skipme = False
            else:
                raise ReplyError("ERR syntax error")
        elif opt == b"id":      # (getRangeLongFromObjectOrReply: 1..LONG_MAX, one text)
            try:
                ok = parse_int(val) >= 1
            except ReplyError:
                ok = False
            if not ok:
                raise ReplyError("ERR client-id should be greater than 0")
            filters.append((opt, val))
        elif opt == b"type":
            t = val.lower()
            if t == b"slave":
                t = b"replica"
            if t not in CLIENT_TYPES:
                raise ReplyError(f"ERR Unknown client type '{val.decode('utf-8', 'replace')}'")
            filters.append((opt, t))
        elif opt == b"user":
            acl = core.__dict__.get("acl")     # ACLGetUserByName (only default before ACL use)
            if val != b"default" and (acl is None or val.decode("latin-1") not in acl.users):
                raise ReplyError(f"ERR No such user '{val.decode('utf-8', 'replace')}'")
            filters.append((opt, val))
        elif opt in (b"addr", b"laddr", b"maxage"):
            filters.append((opt, val))
        else:
            raise ReplyError("ERR syntax error")
        i += 2
    killed = 0
    for cl in list(core.clients.values()):
        if skipme and cl is c:
            continue
        ok = True
        for opt, val in filters:
            if opt == b"id" and str(cl.id).encode() != val:
                ok = False
            elif opt == b"type" and _client_type(cl) != val:
                ok = False
            elif opt == b"addr" and cl.addr.encode() != val:
                ok = False
            elif opt == b"laddr" and cl.laddr.encode() != val:
                ok = False
            elif opt == b"user" and cl.user.encode() != val:
                ok = False
            elif opt == b"maxage" and (core.now_ms - cl.ctime_ms) // 1000 < int(val):
                ok = False
        if ok:
            _kill(c, cl)
            killed += 1
    return killed


def _kill(me: Any, cl: Any) -> None:
    if cl is me:
        me.close_after_reply = True
        return
    repl = me.core.replication
    side = repl.replica if repl is not None else None
    if side is not None and side.stream.master is not None and side.stream.master.client is cl:
        # freeClient(server.master) at once, as Redis: the link is down from now
        # (repl_down_since), not from when the loop sees the socket close. A replica that
        # kills its master link inside MULTI and then sleeps (cluster/06-slave-stop-cond:
        # CLIENT KILL, DEBUG SLEEP 20) counts the sleep in its data age, and does not fail
        # over with stale data.
        side.master_lost("killed", cache=True)
    me.core.host.close_client(cl)


@command("client|unblock", -3, "admin noscript loading stale", group="connection",
         acl="connection", since="5.0.0",
         summary="Unblock a client blocked in a blocking command from a different connection")
def client_unblock(c: Any, argv: list[bytes]) -> object:
    """CLIENT UNBLOCK id [TIMEOUT|ERROR]: the reason is checked before the id, as Redis."""
    n = len(argv)
    if n > 4:
        raise subcommand_error(argv)
    error = False
    if n == 4:
        reason = argv[3].lower()
        if reason == b"error":
            error = True
        elif reason != b"timeout":
            raise ReplyError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    target = c.core.clients.get(parse_int(argv[2]))
    return 1 if c.core.blocking.client_unblock(target, error) else 0


@command("client|pause", -3, "admin noscript loading stale", group="connection",
         acl="connection", since="3.0.0",
         summary="Suspend commands processing.")
def client_pause(c: Any, argv: list[bytes]) -> object:
    """CLIENT PAUSE timeout [WRITE|ALL] (pyrepl.core.pause)."""
    if len(argv) > 4:
        raise subcommand_error(argv)
    kind = ALL
    if len(argv) == 4:
        mode = argv[3].lower()
        if mode == b"write":
            kind = WRITE
        elif mode != b"all":
            raise ReplyError("ERR CLIENT PAUSE mode must be WRITE or ALL")
    ms = parse_int(argv[2], "ERR timeout is not an integer or out of range")
    if ms < 0:
        raise ReplyError("ERR timeout is negative")
    core = c.core
    core.pause.start(kind, core.now_ms + ms)
    return OK


@command("client|unpause", 2, "admin noscript loading stale", group="connection",
         acl="connection", since="6.2.0", summary="Resume processing of clients that were paused.")
def client_unpause(c: Any, argv: list[bytes]) -> object:
    c.core.pause.stop()
    return OK


@command("client|reply", 3, "noscript loading stale", group="connection", acl="connection",
         since="3.2.0", summary="Instruct the server whether to reply to commands.")
def client_reply(c: Any, argv: list[bytes]) -> object:
    """CLIENT REPLY ON|OFF|SKIP (ServerCore.execute_quietly drops the replies)."""
    mode = argv[2].lower()
    if mode == b"on":
        c.reply_mode = REPLY_SET
        return OK
    if mode == b"off":
        c.reply_mode = REPLY_OFF | REPLY_SET
    elif mode == b"skip":
        if not c.reply_mode & REPLY_OFF:
            c.reply_mode = REPLY_SKIP | REPLY_SET
    else:
        raise ReplyError(SYNTAX)
    return NO_REPLY


@command("client|no-evict", 3, "admin noscript loading stale", group="connection", acl="connection", summary="Set client eviction mode for the current connection.")
def client_no_evict(c: Any, argv: list[bytes]) -> object:
    """CLIENT NO-EVICT on|off: maxmemory-clients never evicts the client while on (CLIENT
    LIST flag ``e``); off, it is counted again, evicted at once if it is over the limit."""
    mode = argv[2].lower()
    if mode not in (b"on", b"off"):
        raise ReplyError("ERR syntax error")
    c.no_evict = mode == b"on"
    core = c.core
    if core.maxmemory_clients:
        ev = core.client_eviction
        ev.stuck = 0       # (an eviction may be due again)
        ev.update(c)
    return OK


@command("client|help", 2, "loading stale", group="connection", acl="connection", summary="Returns helpful text about the different subcommands.")
def client_help(c: Any, argv: list[bytes]) -> object:
    return help_reply("CLIENT", (
        "CACHING (YES|NO)",
        "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        "GETREDIR",
        "    Return the client ID we are redirecting to when tracking is enabled.",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address",
        "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST [options ...]",
        "    Return information about client connections. Options:",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "UNPAUSE",
        "    Stop the current client pause, resuming traffic.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Suspend all, or just write, clients for <timeout> milliseconds.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock the specified blocked client.",
        "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
        "         [OPTIN] [OPTOUT] [NOLOOP]",
        "    Control server assisted client side caching.",
        "TRACKINGINFO",
        "    Report tracking status for the current connection.",
        "NO-EVICT (ON|OFF)",
        "    Protect current client connection from eviction.",
        # (Redis 7.0.15's text: without Redis 7.2's SETINFO, which pyrepl has too)
    ))


# -- COMMAND ----------------------------------------------------------------------------------

container("command", summary="Returns detailed information about all commands.", since="2.8.13")


# The flag names COMMAND INFO reports, in Redis's order (server.c addReplyFlagsForCommand:
# may_replicate, sentinel, only_sentinel, protected and touches-arbitrary-keys are hidden);
# internal spellings use dashes ("no-auth", "allow-busy").
_REPORTED_FLAGS = ["write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
                   "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
                   "fast", "no_auth", "no_mandatory_keys", "no_async_loading", "no_multi",
                   "movablekeys", "allow_busy"]


def _reported_flags(cmd: Command) -> list[Status]:
    have = {f.replace("-", "_").replace("no_script", "noscript") for f in cmd.flags}
    return [Status(f) for f in _REPORTED_FLAGS if f in have]


def _command_info(cmd: Command) -> list[object]:
    subs = [_command_info(s) for s in cmd.subcommands.values()]
    return [
        cmd.name.encode(),
        cmd.arity,
        SetReply(_reported_flags(cmd)),
        cmd.first_key,
        cmd.last_key,
        cmd.step,
        SetReply([Status("@" + a) for a in cmd.acl_categories]),
        info_tips(cmd),
        info_key_specs(cmd),
        subs if subs else SetReply([]),     # (no subcommands: an empty set, as Redis's)
    ]


def _top_commands() -> list[Command]:
    return list(COMMANDS.values())


@command("command", -1, "loading stale sentinel", group="server", acl="connection", summary="Returns detailed information about all commands.")
def command_(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 1:  # unreachable: the container dispatches subcommands
        raise ReplyError("ERR syntax error")
    return [_command_info(cmd) for cmd in _top_commands()]


@command("command|count", 2, "loading stale", group="server", acl="connection", summary="Returns a count of commands.")
def command_count(c: Any, argv: list[bytes]) -> object:
    return len(COMMANDS)


@command("command|list", -2, "loading stale", group="server", acl="connection", summary="Returns a list of command names.")
def command_list(c: Any, argv: list[bytes]) -> object:
    """COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: every command
    and subcommand (``config|get``), as Redis's commandListCommand."""
    keep = None
    i = 2
    while i < len(argv):
        if argv[i].lower() != b"filterby" or len(argv) - 1 - i != 2:
            raise ReplyError(SYNTAX)
        kind, arg = argv[i + 1].lower(), argv[i + 2]
        if kind == b"module":
            keep = _no_command
        elif kind == b"aclcat":
            cat = arg.decode("utf-8", "replace").lower()
            keep = (lambda cmd, cat=cat: cat in cmd.acl_categories)  # noqa: E731
        elif kind == b"pattern":
            keep = (lambda cmd, p=arg: stringmatch(p, cmd.name.encode(), nocase=True))  # noqa: E731
        else:
            raise ReplyError(SYNTAX)
        i += 3
    out = []
    for cmd in _top_commands():
        for one in (cmd, *cmd.subcommands.values()):
            if keep is None or keep(one):
                out.append(one.name.encode())
    return out


def _no_command(cmd: Command) -> bool:
    return False          # (pyrepl loads no modules)


@command("command|info", -2, "loading stale", group="server", acl="connection", summary="Returns information about one, multiple or all commands.")
def command_info(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 2:
        return [_command_info(cmd) for cmd in _top_commands()]
    out: list[object] = []
    for name in argv[2:]:
        cmd = find_command(name)
        out.append(_command_info(cmd) if cmd else None)
    return out


def _doc(cmd: Command) -> Map:
    items: list[tuple[object, object]] = [
        (b"summary", cmd.summary.encode()),
        (b"since", cmd.since.encode()),
        (b"group", cmd.group.encode()),
    ]
    if cmd.subcommands:
        items.append((b"subcommands", Map([(s.name.encode(), _doc(s))
                                           for s in cmd.subcommands.values()])))
    return Map(items)


@command("command|docs", -2, "loading stale", group="server", acl="connection", summary="Returns documentary information about one, multiple or all commands.")
def command_docs(c: Any, argv: list[bytes]) -> object:
    if len(argv) == 2:
        cmds = _top_commands()
    else:
        cmds = [cmd for cmd in (find_command(n) for n in argv[2:]) if cmd is not None]
    return Map([(cmd.name.encode(), _doc(cmd)) for cmd in cmds])


@command("command|getkeys", -4, "loading stale", group="server", acl="connection", summary="Extracts the key names from an arbitrary command.")
def command_getkeys(c: Any, argv: list[bytes]) -> object:
    args = argv[2:]
    cmd = c.core.lookup_command(args)
    if cmd is None or cmd.handler is None:
        raise ReplyError("ERR Invalid command specified")
    if cmd.first_key == 0 and cmd.keys_fn is None:
        raise ReplyError("ERR The command has no key arguments")
    if (cmd.arity > 0 and cmd.arity != len(args)) or len(args) < -cmd.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    keys = cmd.key_positions(args)
    if not keys:  # e.g. a numkeys argument that is not a usable count
        if "no-mandatory-keys" in cmd.flags:    # (EVAL ... 0, FCALL ... 0: no keys is fine)
            return []
        raise ReplyError("ERR Invalid arguments specified for command")
    return [args[i] for i in keys]


# -- DEBUG ------------------------------------------------------------------------------------


@command("debug", -2, "admin noscript loading stale", group="server", summary="A container for debugging commands.")
def debug(c: Any, argv: list[bytes]) -> object:
    sub = argv[1].lower()
    core = c.core
    if sub == b"digest" and len(argv) == 2:
        from pyrepl.keyspace.digest import dataset_digest
        # Every key still in memory, as Redis (a replica keeps logically expired keys until
        # its master's DEL, and its digest must still equal the master's).
        return Status(dataset_digest(core.dbs, None))
    if sub == b"digest-value" and len(argv) >= 2:
        from pyrepl.keyspace.digest import key_digest
        out = []
        for key in argv[2:]:
            v = c.db.lookup(key)
            out.append(Status(key_digest(v, c.db.get_expire(key)) if v is not None
                              else "0" * 40))
        return out
    if sub == b"error" and len(argv) == 3:
        # DEBUG ERROR <string>: the string as an error reply, newlines blanked (as Redis)
        text = argv[2].replace(b"\r", b" ").replace(b"\n", b" ")
        return Raw(b"-" + text + b"\r\n")
    if sub == b"sleep" and len(argv) == 3:
        secs = parse_float(argv[2])
        core.host.sleep(secs)
        return OK
    if sub == b"populate" and 3 <= len(argv) <= 5:
        return _populate(c, argv)
    if sub == b"reload":
        return _debug_reload(core, argv)
    if sub == b"loadaof" and len(argv) == 2:
        return _loadaof(core)
    if sub == b"set-active-expire" and len(argv) == 3:
        core.cron.active_expire_enabled = argv[2] != b"0"
        return OK
    if sub == b"change-repl-id" and core.replication is not None:
        core.replication.change_replid()
        return OK
    if sub == b"object" and len(argv) == 3:
        return _debug_object(c, argv[2])
    if sub == b"protocol" and len(argv) == 3:
        return _debug_protocol(c, argv[2].lower())
    if sub == b"log" and len(argv) == 3:
        core.log.warning("DEBUG LOG: " + argv[2].decode("utf-8", "replace"))
        return OK
    if sub == b"replybuffer" and len(argv) == 4:
        return _debug_replybuffer(argv)
    if sub == b"pause-cron" and len(argv) == 3:
        core.cron.paused = _atoi(argv[2]) != 0
        return OK
    if sub == b"set-skip-checksum-validation" and len(argv) == 3:
        core.skip_checksum_validation = _atoi(argv[2]) != 0
        return OK
    if sub == b"config-rewrite-force-all" and len(argv) == 2:
        try:
            return _rewrite_config(c, True)
        except ReplyError as e:
            raise ReplyError("ERR CONFIG-REWRITE-FORCE-ALL failed: "
                             + e.message.removeprefix("ERR ")) from None
    if sub == b"quicklist-packed-threshold" and len(argv) == 3:
        from pyrepl.config import parse_memory
        from pyrepl.keyspace.lplist import limits as list_limits

        try:
            size = parse_memory(argv[2].decode("latin-1"))
        except ValueError:
            size = -1
        if size < 0 or size > (1 << 32) - (1 << 20):
            raise ReplyError("ERR argument must be a memory value bigger than 1 and smaller "
                             "than 4gb")
        list_limits.packed_threshold = size or 1 << 30
        return OK
    if sub == b"segfault":      # (Redis writes to a read-only page: SIGSEGV, SEGV_ACCERR)
        core.host.crash(11, 2)
        return OK
    if sub == b"aof-flush-sleep" and len(argv) == 3:
        us = _atoi(argv[2])
        core.aof.writer.flush_sleep = (lambda: core.host.sleep(us / 1e6)) if us else None
        return OK
    if sub == b"set-disable-deny-scripts" and len(argv) == 3:
        core.script_disable_deny_script = _atoi(argv[2]) != 0
        return OK
    if sub == b"drop-cluster-packet-filter" and len(argv) == 3:
        packet_type = parse_int(argv[2])
        if core.cluster is not None:
            core.cluster.drop_packet_filter = packet_type
        return OK
    if sub == b"clusterlink" and len(argv) == 5 and argv[2].lower() == b"kill":
        return _debug_clusterlink_kill(core, argv[3], argv[4])
    if sub == b"help":
        return [Status(s) for s in (
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "AOF-FLUSH-SLEEP <microsec>", "    Server will sleep before flushing the AOF, this is used for testing.",
            "CLUSTERLINK KILL <to|from|all> <node-id>", "    Kills the link based on the direction to/from (both) with the provided node.",
            "CONFIG-REWRITE-FORCE-ALL", "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "DIGEST", "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]", "    Output a hex signature of the values of all the specified keys.",
            "DROP-CLUSTER-PACKET-FILTER <packet-type>", "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
            "ERROR <string>", "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOADAOF", "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "LOG <message>", "    Write <message> to the server log.",
            "OBJECT <key>", "    Show low level info about `key` and associated value.",
            "PAUSE-CRON <0|1>", "    Stop periodic cron job processing.",
            "POPULATE <count> [<prefix>] [<size>]", "    Create <count> string keys named key:<num>.",
            "PROTOCOL <type>", "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "QUICKLIST-PACKED-THRESHOLD <size>", "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "RELOAD", "    Save the RDB on disk and reload it back to memory.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Accepted for Redis's tests: pyrepl has no per-client reply buffer to resize.",
            "REPLYBUFFER RESIZING <0|1>",
            "    Accepted for Redis's tests: pyrepl never resizes a reply buffer (as RESIZING 0).",
            "SEGFAULT", "    Crash the server with sigsegv.",
            "SET-ACTIVE-EXPIRE <0|1>", "    Setting it to 0 disables expiring keys in background.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>", "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SET-DISABLE-DENY-SCRIPTS <0|1>", "    Enables or disables the no-script commands from scripts.",
            "SLEEP <seconds>", "    Stop the server for <seconds>. Decimals allowed.",
        )]
    raise subcommand_error(argv)


def _debug_clusterlink_kill(core: Any, direction: bytes, name: bytes) -> object:
    """DEBUG CLUSTERLINK KILL <to|from|all> <node-id>: a bus link to / from a node dropped
    (freeClusterLink), as Redis's tests do to break a link for a moment."""
    st = core.cluster
    if st is None:
        raise ReplyError("ERR Debug option only available for cluster mode enabled setup!")
    node = st.lookup(name)
    if node is None:
        raise ReplyError(f"ERR Unknown node {name.decode('utf-8', 'replace')}")
    way = direction.lower()
    if way not in (b"to", b"from", b"all"):
        raise ReplyError(f"ERR Unknown direction {direction.decode('utf-8', 'replace')}")
    st.kill_links(node, way.decode())
    return OK


def _debug_reload(core: Any, argv: list[bytes]) -> object:
    """DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save the RDB (unless NOSAVE), empty the dataset
    (unless NOFLUSH) and load the file back (MERGE: what is there already is replaced)."""
    from pyrepl.rdb.decoder import RdbError

    flush = save = True
    merge = False
    for opt in argv[2:]:
        low = opt.lower()
        if low == b"merge":
            merge = True
        elif low == b"noflush":
            flush = False
        elif low == b"nosave":
            save = False
        else:
            raise ReplyError("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE "
                             "options.")
    if save and not core.persistence.save():
        raise ReplyError("ERR")
    if flush:
        try:
            core.persistence.load_rdb()
        except (OSError, RdbError):
            raise ReplyError("ERR Error trying to load the RDB dump") from None
    elif not core.persistence.merge_rdb(merge):
        raise ReplyError("ERR Error trying to load the RDB dump")
    core.log.warning("DB reloaded by DEBUG RELOAD")
    return OK


def _atoi(arg: bytes) -> int:
    """C's atoi: the leading integer, 0 when there is none (DEBUG's switches)."""
    digits = arg.strip()
    end = 1 if digits[:1] in (b"-", b"+") else 0
    while end < len(digits) and 48 <= digits[end] <= 57:
        end += 1
    try:
        return int(digits[:end])
    except ValueError:
        return 0


def _debug_replybuffer(argv: list[bytes]) -> object:
    """DEBUG REPLYBUFFER PEAK-RESET-TIME <never|reset|ms> | RESIZING <0|1>: Redis's hooks on
    the resizing of each client's 16 KiB reply buffer. pyrepl has no such buffer (a reply goes
    to the transport as it is made), so there is nothing to resize: the arguments are checked
    as Redis checks them, and pyrepl behaves as Redis with ``RESIZING 0``."""
    what, value = argv[2].lower(), argv[3]
    if what == b"peak-reset-time":
        if value.lower() not in (b"never", b"reset"):
            parse_int(value)
        return OK
    if what == b"resizing":
        return OK
    raise subcommand_error(argv)


def _debug_object(c: Any, key: bytes) -> object:
    """DEBUG OBJECT key: where the value is held, OBJECT REFCOUNT and ENCODING, its RDB length,
    its 24-bit age and idle seconds; a list adds the quicklist Redis would hold (nodes, average
    fill, list-max-listpack-size, compression, listpack bytes)."""
    from collections import deque

    from pyrepl.commands.keys import _refcount, encoding_name
    from pyrepl.keyspace import lplist
    from pyrepl.keyspace.ageing import idle_ms
    from pyrepl.rdb.dump import dump_payload

    db = c.db
    data = db.data
    if key not in data:
        raise ReplyError("ERR no such key")
    v = data.peek(key)
    age = data.age(key) or 0
    extra = ""
    cfg = c.core.config
    if type(v) is deque or type(v) is lplist.ListpackList:
        nodes, size = lplist.quicklist_shape(v)
        extra = (f" ql_nodes:{nodes} ql_avg_node:{len(v) / max(nodes, 1):.2f} "
                 f"ql_listpack_max:{cfg.list_max_listpack_size} "
                 f"ql_compressed:{int(cfg.list_compress_depth != 0)} ql_uncompressed_size:{size}")
    where = data.entry_at(key)
    return Status(f"Value at:{where:#x} refcount:{_refcount(c, key, v)} "
                  f"encoding:{encoding_name(c, v).decode()} "
                  f"serializedlength:{len(dump_payload(v)) - 11} lru:{age} "
                  f"lru_seconds_idle:{idle_ms(age, c.core.now_ms) // 1000}{extra}")


_PROTOCOL_TYPES = ("Wrong protocol type name. Please use one of the following: "
                   "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|"
                   "false")


def _debug_protocol(c: Any, name: bytes) -> object:
    """DEBUG PROTOCOL <type>: a test value of each RESP type, as debug.c answers it."""
    resp3 = c.proto == 3
    if name == b"string":
        return b"Hello World"
    if name == b"integer":
        return 12345
    if name == b"double":
        return 3.141
    if name == b"bignum":
        big = b"1234567999999999999999999999999999999"
        return Raw(b"(" + big + b"\r\n") if resp3 else big
    if name == b"null":
        return None
    if name == b"array":
        return [0, 1, 2]
    if name == b"set":
        return SetReply([0, 1, 2])
    if name == b"map":
        return Map([(0, False), (1, True), (2, False)])
    if name == b"attrib":
        follow = b"Some real reply following the attribute"
        if not resp3:
            return follow
        return Raw(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n" +
                   b"$%d\r\n%s\r\n" % (len(follow), follow))
    if name == b"push":
        if not resp3:
            raise ReplyError("ERR RESP2 is not supported by this command")
        from pyrepl.core.pubsub import Push
        c.out.append(Push(b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"))
        return b"Some real reply following the push reply"
    if name == b"true":
        return True
    if name == b"false":
        return False
    if name == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring", b"txt")
    raise ReplyError("ERR " + _PROTOCOL_TYPES)


def _loadaof(core: Any) -> object:
    """DEBUG LOADAOF: the AOF buffer flushed, the dataset emptied and loaded again from the
    files the manifest names (history deleted first); a load that fails exits, as Redis."""
    from pyrepl.aof.boot import load_into
    from pyrepl.aof.loader import LoadStatus

    aof = core.aof
    if aof.on:
        aof.flush_force()
    for db in core.dbs:        # emptyData: the keys and the function libraries
        db.replace({}, {})
    core.install_functions(None)
    try:
        aof.load_manifest()
    except Exception as e:  # noqa: BLE001 - Redis exits on a bad manifest here too
        core.log.warning(f"Fatal error loading the AOF manifest: {e}")
        core.host.exit_now(1)
    aof.delete_history()
    status = load_into(core, lambda: core.host.clock_ns() / 1e9)
    if status not in (LoadStatus.OK, LoadStatus.EMPTY):
        core.host.exit_now(1)
    core.dirty = 0
    core.log.warning("Append Only File loaded by DEBUG LOADAOF")
    return OK


def _populate(c: Any, argv: list[bytes]) -> object:
    """DEBUG POPULATE count [prefix] [size]: keys ``prefix:N`` with value ``value:N``
    (padded with zero bytes or cut to ``size`` when given); existing keys are left alone."""
    try:
        count = parse_int(argv[2])
    except ReplyError:
        raise ReplyError("ERR value is not an integer or out of range") from None
    if count < 0:
        raise ReplyError("ERR value is out of range, must be positive")
    prefix = argv[3] if len(argv) > 3 else b"key"
    size = 0
    if len(argv) > 4:
        size = parse_int(argv[4])
        if size < 0:
            raise ReplyError("ERR value is out of range, must be positive")
    data = c.db.data
    kfmt = prefix + b":%d"
    for j in range(count):
        key = kfmt % j
        if key in data:
            continue
        val = b"value:%d" % j
        if size:
            val = val[:size] if len(val) >= size else val + b"\x00" * (size - len(val))
        data[key] = val
    return OK
