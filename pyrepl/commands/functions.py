"""Redis 7 functions: FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL/HELP, FCALL and
FCALL_RO (Redis 7.0.15's functions.c).

Theory of operation: the handlers are thin; the libraries and the functions engine are in
:mod:`pyrepl.scripting.functions`, reached through the script engine (``core.scripts``,
made on first use by :func:`pyrepl.commands.scripting.engine`). FUNCTION LOAD, DELETE, FLUSH
and RESTORE are write commands that count as a change (``core.dirty``), so the core
propagates them as they were sent (FUNCTION LOAD with its code), as Redis does; a load sent
by the master has no time limit. FCALL is ``may-replicate`` like EVAL: only the effects of the
function are propagated (``ScriptEngine.fcall`` empties ``propagate_argv``). FCALL_RO refuses
a function without the ``no-writes`` flag. FUNCTION KILL and FUNCTION STATS answer while a
function is busy (``allow-busy``) and refuse an EVAL's busy script, as Redis.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.scripting import engine, numkeys_after_name
from pyrepl.commands.table import command, container
from pyrepl.commands.util import help_command, subcommand_error
from pyrepl.keyspace.glob import stringmatch
from pyrepl.rdb.dump import PayloadError, functions_payload, read_functions_payload
from pyrepl.resp.types import OK, Map, ReplyError, SetReply, Status
from pyrepl.scripting.engine import BUSY_ERR
from pyrepl.scripting.functions import (
    ENGINE,
    LOAD_TIMEOUT_MS,
    FunctionLoadError,
    Functions,
    flag_names,
)


def _functions(c: Any) -> Functions:
    return engine(c.core).functions


@command("fcall", -3, "noscript skip-monitor may-replicate no-mandatory-keys stale",
         group="scripting", acl="scripting", since="7.0.0", keys_fn=numkeys_after_name,
         summary="Invoke a function")
def fcall(c: Any, argv: list[bytes]) -> object:
    return engine(c.core).fcall(c, argv, ro=False)


@command("fcall_ro", -3, "noscript skip-monitor no-mandatory-keys stale readonly",
         group="scripting", acl="scripting", since="7.0.0", keys_fn=numkeys_after_name,
         summary="Invoke a read-only function")
def fcall_ro(c: Any, argv: list[bytes]) -> object:
    return engine(c.core).fcall(c, argv, ro=True)


container("function", group="scripting", summary="A container for function commands",
          since="7.0.0")


@command("function|load", -3, "noscript write denyoom", group="scripting", acl="scripting",
         since="7.0.0", summary="Create a function with the given arguments (name, code, "
                                "description)")
def function_load(c: Any, argv: list[bytes]) -> object:
    replace = False
    pos = 2
    while pos < len(argv) - 1:
        arg = argv[pos]
        pos += 1
        if arg.lower() == b"replace":
            replace = True
            continue
        raise ReplyError(f"ERR Unknown option given: {arg.decode('utf-8', 'replace')}")
    timeout = 0 if c.must_obey() else LOAD_TIMEOUT_MS
    try:
        name = _functions(c).create(argv[pos], replace, timeout)
    except FunctionLoadError as e:
        raise ReplyError(f"ERR {e}") from None
    c.core.dirty += 1
    return name


@command("function|delete", 3, "noscript write", group="scripting", acl="scripting",
         since="7.0.0", summary="Delete a function by name")
def function_delete(c: Any, argv: list[bytes]) -> object:
    if not _functions(c).delete(argv[2]):
        raise ReplyError("ERR Library not found")
    c.core.dirty += 1
    return OK


@command("function|flush", -2, "noscript write", group="scripting", acl="scripting",
         since="7.0.0", summary="Deleting all functions")
def function_flush(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3:
        raise subcommand_error(argv)
    if len(argv) == 3 and argv[2].lower() not in (b"sync", b"async"):
        raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    _functions(c).flush()
    c.core.dirty += 1
    return OK


@command("function|list", -2, "noscript", group="scripting", acl="scripting", since="7.0.0",
         summary="List information about all the functions")
def function_list(c: Any, argv: list[bytes]) -> object:
    with_code = False
    pattern: bytes | None = None
    i = 2
    n = len(argv)
    while i < n:
        arg = argv[i]
        if not with_code and arg.lower() == b"withcode":
            with_code = True
            i += 1
            continue
        if pattern is None and arg.lower() == b"libraryname":
            if i >= n - 1:
                raise ReplyError("ERR library name argument was not given")
            pattern = argv[i + 1]
            i += 2
            continue
        text = arg.decode("utf-8", "replace").replace("\r", " ").replace("\n", " ")
        raise ReplyError(f"ERR Unknown argument {text}")
    out = []
    for lib in _functions(c).current.libraries.values():
        if pattern is not None and not stringmatch(pattern, lib.name, nocase=True):
            continue
        fns = [Map([(b"name", fn.name), (b"description", fn.desc),
                    (b"flags", SetReply([Status(f) for f in flag_names(fn.flags)]))])
               for fn in lib.functions.values()]
        items: list[tuple[object, object]] = [(b"library_name", lib.name),
                                              (b"engine", ENGINE), (b"functions", fns)]
        if with_code:
            items.append((b"library_code", lib.code))
        out.append(Map(items))
    return out


@command("function|dump", 2, "noscript", group="scripting", acl="scripting", since="7.0.0",
         summary="Dump all functions into a serialized binary payload")
def function_dump(c: Any, argv: list[bytes]) -> object:
    return functions_payload(_functions(c).codes())


@command("function|restore", -3, "noscript write denyoom", group="scripting", acl="scripting",
         since="7.0.0", summary="Restore all the functions on the given payload")
def function_restore(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 4:
        raise subcommand_error(argv)
    policy = "append"
    if len(argv) == 4:
        policy = argv[3].decode("latin-1").lower()
        if policy not in ("append", "replace", "flush"):
            raise ReplyError("ERR Wrong restore policy given, value should be either FLUSH, "
                             "APPEND or REPLACE.")
    try:
        codes = read_functions_payload(argv[2])
        _functions(c).restore(codes, policy)
    except PayloadError as e:
        raise ReplyError(str(e)) from None
    except FunctionLoadError as e:
        raise ReplyError(f"ERR {e}") from None
    c.core.dirty += 1
    return OK


@command("function|stats", 2, "noscript allow-busy", group="scripting", acl="scripting",
         since="7.0.0", summary="Return information about the function currently running "
                                "(name, description, duration)")
def function_stats(c: Any, argv: list[bytes]) -> object:
    eng = engine(c.core)
    ctx = eng.ctx
    if ctx is not None and ctx.eval_mode:
        raise ReplyError(BUSY_ERR)
    running: object = None
    if ctx is not None:
        duration = (c.core.clock_ns() - ctx.start_ns) // 1_000_000
        running = Map([(b"name", ctx.sha.encode()), (b"command", list(ctx.argv or [])),
                       (b"duration_ms", duration)])
    cur = eng.functions.current
    return Map([(b"running_script", running),
                (b"engines", Map([(ENGINE, Map([(b"libraries_count", len(cur.libraries)),
                                                (b"functions_count", cur.n_functions)]))]))])


@command("function|kill", 2, "noscript allow-busy", group="scripting", acl="scripting",
         since="7.0.0", summary="Kill the function currently in execution.")
def function_kill(c: Any, argv: list[bytes]) -> object:
    engine(c.core).kill(c, is_eval=False)
    return OK


_HELP = (
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME "
    "argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored "
    "using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a "
    "restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, "
    "abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    "replace the old",
    "      libraries with the new libraries (notice that even on this option there is a "
    "chance of failure",
    "      in case of functions name collision with another library).",
)


help_command("function", _HELP, group="scripting", acl="scripting", since="7.0.0")
