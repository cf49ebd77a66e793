"""Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (Redis 7.0.15's eval.c).

Theory of operation: the handlers are thin; the work is in :mod:`pyrepl.scripting`. The engine
is made on first use and kept on the core as ``core.scripts`` (the core never imports the
scripting package). EVAL and EVALSHA are ``may-replicate``: the core runs them one call level
deep, so the writes a script makes are queued and propagated as their effects (MULTI/EXEC
around them when more than one), and the handler's empty ``propagate_argv`` keeps EVAL itself
out of the stream. The ``_RO`` variants are ``readonly`` and refuse any write. SCRIPT FLUSH
replaces the Lua state and the cache, SCRIPT KILL stops a script that ran past
busy-reply-threshold without writing (reachable only while the shell serves events during a
busy script: see ``ScriptEngine._hook``).
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import COMMANDS, command, container
from pyrepl.resp.types import OK, Raw, ReplyError
from pyrepl.scripting.engine import ScriptEngine, _luacall, engine_of


def engine(core: Any) -> ScriptEngine:
    """The core's script engine (``core.scripts``), made on first use."""
    return engine_of(core)


def numkeys_after_name(argv: list[bytes]) -> list[int]:
    """evalGetKeys (and FCALL's): the numkeys keys after the script or function name (none
    when numkeys is unusable)."""
    try:
        n = int(argv[2])
    except ValueError:
        return []
    if n <= 0 or n > len(argv) - 3:
        return []
    return list(range(3, 3 + n))


_FLAGS = "noscript skip-monitor may-replicate no-mandatory-keys stale"
_RO_FLAGS = "noscript skip-monitor no-mandatory-keys stale readonly"


# EVAL / EVALSHA / EVAL_RO / EVALSHA_RO: (name, flags, since, summary, evalsha, ro).
for _name, _flags, _since, _summary, _evalsha, _ro in (
    ("eval", _FLAGS, "2.6.0", "Execute a Lua script server side", False, False),
    ("evalsha", _FLAGS, "2.6.0", "Execute a Lua script server side", True, False),
    ("eval_ro", _RO_FLAGS, "7.0.0", "Execute a read-only Lua script server side", False, True),
    ("evalsha_ro", _RO_FLAGS, "7.0.0", "Execute a read-only Lua script server side", True,
     True),
):
    def _eval(c: Any, argv: list[bytes], evalsha: bool = _evalsha, ro: bool = _ro) -> object:
        return engine_of(c.core).eval(c, argv, evalsha, ro)
    command(_name, -3, _flags, group="scripting", acl="scripting", since=_since,
            keys_fn=numkeys_after_name, summary=_summary)(_eval)


# EVALSHA's and EVALSHA_RO's common case in C (pyrepl/scripting/_luacall.c's evalsha: a cached
# script without a shebang, on a master ...), these Python handlers for the rest and as the
# reference (plain Python, tests/unit/test_luacall.py).
REFERENCE = {b"evalsha": COMMANDS[b"evalsha"].handler,
             b"evalsha_ro": COMMANDS[b"evalsha_ro"].handler}


def install(c_handlers: bool = True) -> None:
    """The C handlers of EVALSHA and EVALSHA_RO in the table (or the Python ones: for a test's
    reference, and as plain Python)."""
    if _luacall is None:
        c_handlers = False
    for name, fn in REFERENCE.items():
        COMMANDS[name].handler = fn
    if c_handlers:
        _luacall.bind_handlers(REFERENCE[b"evalsha"], REFERENCE[b"evalsha_ro"])
        COMMANDS[b"evalsha"].handler = _luacall.evalsha_handler
        COMMANDS[b"evalsha_ro"].handler = _luacall.evalsha_ro_handler


install()

container("script", group="scripting", summary="A container for Lua scripts management commands",
          since="2.6.0")

_HELP = [
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
]


@command("script|help", 2, "loading stale", group="scripting", acl="scripting", since="5.0.0",
         summary="Show helpful text about the different subcommands")
def script_help(c: Any, argv: list[bytes]) -> object:
    from pyrepl.resp.types import Status

    return [Status(line) for line in _HELP]


@command("script|load", 3, "noscript stale", group="scripting", acl="scripting",
         since="2.6.0", summary="Load the specified Lua script into the script cache.")
def script_load(c: Any, argv: list[bytes]) -> object:
    return engine(c.core).create(argv[2]).sha.encode()


@command("script|exists", -3, "noscript", group="scripting", acl="scripting", since="2.6.0",
         summary="Check existence of scripts in the script cache.")
def script_exists(c: Any, argv: list[bytes]) -> object:
    cache = engine(c.core).cache
    return [1 if cache.get(a.decode("latin-1").lower()) is not None else 0 for a in argv[2:]]


@command("script|flush", -2, "noscript", group="scripting", acl="scripting", since="2.6.0",
         summary="Remove all the scripts from the script cache.")
def script_flush(c: Any, argv: list[bytes]) -> object:
    if len(argv) > 3 or (len(argv) == 3 and argv[2].lower() not in (b"sync", b"async")):
        raise ReplyError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    engine(c.core).flush()
    return OK


@command("script|kill", 2, "noscript allow-busy", group="scripting", acl="scripting",
         since="2.6.0", summary="Kill the script currently in execution.")
def script_kill(c: Any, argv: list[bytes]) -> object:
    engine(c.core).kill(c)
    return OK


@command("script|debug", 3, "noscript", group="scripting", acl="scripting", since="3.2.0",
         summary="Set the debug mode for executed scripts.")
def script_debug(c: Any, argv: list[bytes]) -> object:
    """The next EVAL of this client runs in the Lua debugger (pyrepl/scripting/ldb.py): YES
    in a forked child, SYNC in the server itself; NO turns it off."""
    if c.out:
        raise ReplyError("ERR SCRIPT DEBUG must be called outside a pipeline")
    mode = argv[2].lower()
    if mode == b"no":
        c.ldb_mode = None
    elif mode == b"yes":
        c.ldb_mode = "fork"
    elif mode == b"sync":
        c.ldb_mode = "sync"
    else:
        raise ReplyError("ERR Use SCRIPT DEBUG YES/SYNC/NO")
    return OK


__all__ = ["engine", "Raw"]
