"""The script engine: one Lua 5.1 state, the script cache, and running a script (eval.c).

Theory of operation: :class:`ScriptEngine` is what Redis's ``lctx`` plus ``scriptRunCtx`` are.
``eval`` follows ``evalGenericCommand`` step by step, each step answering Redis's error text:
the checks ``processCommand`` makes with the script's declared flags (a shebang script that
may write is a write command: READONLY, MISCONF, NOREPLICAS, OOM, MASTERDOWN), numkeys, the
lookup or compilation, then ``scriptPrepareForRun``'s checks. The script runs on a
pseudo-client made once (not in ``core.clients``), whose db starts as the caller's and whose
protocol starts at RESP2; every ``redis.call`` goes through :meth:`_call`, which makes
``scriptCall``'s checks (arity, ``noscript``, stale replica, the caller's ACL user, read-only
scripts, the first write on a read-only replica / MISCONF / min-replicas / OOM) and then
``core.call``. The caller's
``core.call`` runs EVAL one call level deep, so the writes the script makes are queued in
``core._pending`` and propagated as effects, wrapped in MULTI/EXEC when more than one; the
EVAL command itself is never propagated (the handler sets ``propagate_argv = []``).
``redis.set_repl`` drops a call's effects from the queue when REPL_REPLICA is off.

Busy scripts: with ``busy-reply-threshold`` > 0 a Lua count hook calls :meth:`_hook` every
100000 instructions; past the threshold the script is "timed out": the engine logs Redis's
warning, tells the core (``core.set_busy``: other clients' commands get -BUSY but the
``allow-busy`` ones) and from then on calls ``core.host.process_events_while_blocked`` at
every hook, so the shell serves SCRIPT KILL / SHUTDOWN NOSAVE (a SHUTDOWN stops the script). :meth:`kill` is SCRIPT KILL's logic; a killed
script stops with "Script killed by user with SCRIPT KILL..." at its next hook, and keeps
stopping at every line so a ``pcall`` cannot swallow it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lupa.lua51 as lua51

from pyrepl import REDIS_VERSION, native
from pyrepl.core import monitor
from pyrepl.core.propagation import PROPAGATE_ALL, PROPAGATE_AOF, PROPAGATE_REPL, should_propagate
from pyrepl.errors import OOM
from pyrepl.fastpath import call
from pyrepl.resp.types import (
    NO_REPLY,
    NULL_ARRAY,
    Map,
    Raw,
    ReplyError,
    SetReply,
    Status,
    Verbatim,
)
from pyrepl.resp.writer import encode, format_double
from pyrepl.scripting import cache as sc
from pyrepl.scripting.convert import (
    ARGS_ERR,
    NOARGS_ERR,
    BigNumber,
    ReplyToLua,
    error_text,
    lua_argv,
    parse_resp,
)
from pyrepl.scripting.ldb import Ldb, repr_bytes
from pyrepl.scripting.libs import LibError, _g14, build_libs, lua_tonumber, lua_typename
from pyrepl.scripting.luadump import strip as strip_dump
from pyrepl.scripting.rand import Lrand48
from pyrepl.scripting.sandbox import BOOTSTRAP, CHUNK_NAME, REPLY_MAX_DEPTH

NOSCRIPT_ERR = "NOSCRIPT No matching script. Please use EVAL."
OUTSIDE_ERR = "ERR redis.call/pcall can only be called inside a script invocation"
READONLY_ERR = "READONLY You can't write against a read only replica."
NOREPLICAS_ERR = "NOREPLICAS Not enough good replicas to write."
OOM_ERR = OOM
MASTERDOWN_ERR = ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to "
                  "'no'.")
BUSY_ERR = ("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN "
            "NOSAVE.")
# shared.slowscripterr: a function is running (FUNCTION KILL stops it, SCRIPT KILL refuses)
BUSY_FUNCTION_ERR = ("BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
                     "SHUTDOWN NOSAVE.")
_LLONG_MIN, _LLONG_MAX = -(1 << 63), (1 << 63) - 1
_LOG_LEVELS = ("debug", "verbose", "notice", "warning")
_XREADS = frozenset(("xread", "xreadgroup"))



class CallError(Exception):
    """redis.call's error, raised through Lua (the handler turns it into {err=...})."""

    def __init__(self, text: str, ignore: bool) -> None:
        super().__init__(text)
        self.text = text
        self.ignore = ignore


def _bind_luacall() -> Any:
    """The C redis.call and runner (pyrepl/scripting/_luacall.c), bound to lupa's Lua API;
    None as plain Python, or where lupa's module does not export the API (the reference)."""
    mod = native.load("pyrepl.scripting._luacall")
    if mod is None:
        return None
    try:
        mod.bind(lua51.__file__, CallError, Status, Raw, NULL_ARRAY, Map, SetReply, Verbatim,
                 ReplyError, BigNumber, parse_resp, format_double, error_text,
                 (OUTSIDE_ERR, NOARGS_ERR, ARGS_ERR))
    except ImportError:
        return None
    return mod


_luacall = _bind_luacall()
_call_bound = False    # (_luacall.bind_call ran: the first engine's boot)


@dataclass(slots=True)
class RunContext:
    """scriptRunCtx: the running script and what it did so far."""

    caller: Any
    sha: str
    read_only: bool
    allow_oom: bool
    oom: bool
    start_ns: int
    write_dirty: bool = False
    repl_flags: int = PROPAGATE_ALL
    resp: int = 2
    timedout: bool = False
    killed: bool = False
    eval_mode: bool = True           # SCRIPT_EVAL_MODE: EVAL*, not FCALL*
    argv: list[bytes] | None = None  # the caller's command (FUNCTION STATS shows it)
    # SCRIPT_ALLOW_CROSS_SLOT: a script without a shebang, or flagged allow-cross-slot-keys,
    # may touch keys of several (local) slots in cluster mode
    allow_cross_slot: bool = True


@dataclass(slots=True)
class LuaVM:
    """One Lua state set up by the sandbox's bootstrap: EVAL's, or the functions engine's."""

    lua: Any
    run: Any             # run(f, caller_proto, numkeys, *keys_and_args) -> result tuple
    compile: Any         # compile(body, chunkname) -> function, or (nil, message)
    set_hook: Any
    gc_count: Any
    load_lib: Any = None  # functions only: run a library's code at load time
    set_ldb_hook: Any = None  # EVAL's only: the Lua debugger's line hook on or off
    hook_on: bool = False
    to_lua: Any = None    # ReplyToLua of this state
    accel_id: int | None = None   # the state's number in _luacall (None: the reference runs)
    keep: Any = None      # _luacall's keep(f): a compiled script's registry reference


def _long_long(x: float | int) -> int:
    """C's ``(long long)`` of a Lua number on x86-64 (out of range and NaN: LLONG_MIN)."""
    if type(x) is int:
        return x if _LLONG_MIN <= x <= _LLONG_MAX else _LLONG_MIN
    if x != x or not -9.223372036854775808e18 <= x < 9.223372036854775808e18:
        return _LLONG_MIN
    return int(x)


def parse_numkeys(arg: bytes) -> int:
    """string2ll, or Redis's "value is not an integer" error."""
    if arg.isdigit() and len(arg) < 19 and (arg[0] != 48 or len(arg) == 1):
        return int(arg)   # (the common case: a count written as Redis writes one)
    s = arg[1:] if arg[:1] == b"-" else arg
    if (s.isdigit() and s.isascii() and (s == b"0" or s[:1] != b"0")
            and not (arg[:1] == b"-" and s == b"0")):
        v = int(arg)
        if _LLONG_MIN <= v <= _LLONG_MAX:
            return v
    raise ReplyError("ERR value is not an integer or out of range")


#: the runtime's libraries and lupa's module, which no script reaches (the sandbox builds its
#: globals from an allow-list): dropped from the state before the bootstrap runs
_TRIM_RUNTIME = (b"io, os, package, require, module, python, dofile, loadfile, print = nil "
                 b"local r = debug.getregistry() local l = r._LOADED "
                 b"l.io, l.os, l.package, l.python, r._PRELOAD = nil")
_BOOT: list[bytes] = []


def _bootstrap_chunk() -> bytes:
    """The sandbox's bootstrap compiled once per process, its debug information stripped
    (pyrepl/scripting/luadump.py): a third of the memory its source would take in each state."""
    if not _BOOT:
        scratch = lua51.LuaRuntime(encoding=None, register_eval=False, register_builtins=False)
        f = scratch.eval("loadstring")(BOOTSTRAP, CHUNK_NAME)
        if type(f) is tuple:
            raise RuntimeError(f[1])
        _BOOT.append(strip_dump(scratch.eval("string.dump")(f)))
    return _BOOT[0]


class ScriptEngine:
    # (slots: the C redis.call and EVALSHA read ctx, ldb, client, vm, lua, cache and core at
    # their offsets, pyrepl/scripting/_luacall.c)
    __slots__ = ("core", "make_client", "client", "rand", "cache", "ctx", "_functions", "ldb",
                 "vm", "lua", "to_lua", "_compile", "_gc_count")

    def __init__(self, core: Any, make_client: Callable[[], Any]) -> None:
        self.core = core
        self.make_client = make_client
        self.client: Any = None          # the scripts' pseudo-client, made on first use
        self.rand = Lrand48()
        self.cache = sc.ScriptCache()
        self.ctx: RunContext | None = None
        self._functions: Any = None      # the function libraries (functions.Functions), lazily
        self.ldb: Ldb | None = None      # the Lua debugger's session under way (SCRIPT DEBUG)
        self._init_vm()

    # -- the Lua state ----------------------------------------------------------------------
    def boot(self, fmode: bool, extra: dict[bytes, Any] | None = None) -> LuaVM:
        """A new Lua state set up by the sandbox (``fmode``: the functions engine's, whose
        bootstrap also gets ``extra`` callables: register / load_expired)."""
        lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                               register_eval=False, register_builtins=False)
        major, minor, patch = (int(x) for x in REDIS_VERSION.split("."))
        callables = {
            b"call": self._call_raise, b"pcall": self._pcall, b"unwrap": self._unwrap,
            b"log": self._log, b"setresp": self._setresp,
            b"setrepl": self._setrepl, b"acl": self._acl, b"random": self._random,
            b"randomseed": self._randomseed, b"hook": self._hook, b"sha1hex": self._sha1hex,
            b"getresp": lambda: self.ctx.resp if self.ctx is not None else 2,
            b"ldb_line": self._ldb_line, b"ldb_read": self._ldb_read,
            b"ldb_cmd": self._ldb_command, b"ldb_log": self._ldb_log, b"ldb_send": self._ldb_send,
            b"ldb_source_line": self._ldb_source_line, b"ldb_set_step": self._ldb_set_step,
            b"ldb_resumed": self._ldb_resumed, b"ldb_state": self._ldb_state,
            b"ldb_breakpoint": self._ldb_breakpoint,
            b"ldb_repr_str": lambda b: repr_bytes(b).encode("utf-8", "surrogateescape"),
            b"version": REDIS_VERSION.encode(),
            b"version_num": (major << 16) | (minor << 8) | patch,
        }
        callables.update(extra or {})
        py = lua.table_from(callables)
        accel = self._open_luacall(lua)
        # what the sandbox never hands out goes now, not to weigh on used_memory_lua
        lua.execute(_TRIM_RUNTIME)
        boot = lua.eval("loadstring")(_bootstrap_chunk(), CHUNK_NAME)
        if type(boot) is tuple:   # (nil, message): the bootstrap is part of the package
            raise RuntimeError(boot[1])
        got = boot(py, build_libs(lua), REPLY_MAX_DEPTH, fmode,
                   self.core.config.lua_enable_deprecated_api, accel)
        del boot                # (its chunk is garbage now: collected before the first run)
        vm = LuaVM(lua, *got)
        vm.to_lua = ReplyToLua(lua)
        if accel is not None:
            vm.accel_id = int(accel.id)
            vm.keep = accel.keep
            _luacall.attach(vm.accel_id, self)
        lua.execute(b"collectgarbage('collect')")
        return vm

    @staticmethod
    def _open_luacall(lua: Any) -> Any:
        """_luacall's table in this state ({id, call, pcall, keep, set_runner, tick}: the state
        loads the C library itself, package.loadlib handing it the lua_State), or None."""
        if _luacall is None:
            return None
        global _call_bound
        if not _call_bound:
            from pyrepl.commands.table import COMMANDS, Command
            from pyrepl.core.client import Client
            from pyrepl.core.dispatch import NAME_CACHE
            from pyrepl.core.server import ServerCore

            _luacall.bind_call(RunContext, Client, Command, NAME_CACHE, COMMANDS, call,
                               PROPAGATE_ALL, ServerCore, sc.Script, LuaVM, sc.COMPAT,
                               ScriptEngine, sc.ScriptCache)
            _call_bound = True
        opener = lua.eval("package.loadlib")(os.fsencode(_luacall.__file__),
                                             b"pyrepl_luacall_open")
        if type(opener) is tuple:      # (nil, message, where)
            return None
        got = opener()
        return None if type(got) is tuple else got

    def _init_vm(self) -> None:
        vm = self.vm = self.boot(False)
        self.lua = vm.lua
        self.to_lua = vm.to_lua
        self._compile, self._gc_count = vm.compile, vm.gc_count

    def use_vm(self, vm: LuaVM) -> tuple[Any, Any]:
        """Make ``vm`` the state that redis.call's replies and error tables are built in;
        returns what to hand back to :meth:`restore_vm`."""
        saved = self.lua, self.to_lua
        self.lua, self.to_lua = vm.lua, vm.to_lua
        return saved

    def restore_vm(self, saved: tuple[Any, Any]) -> None:
        self.lua, self.to_lua = saved

    @property
    def functions(self) -> Any:
        """The function libraries and their Lua state (made on first use)."""
        if self._functions is None:
            from pyrepl.scripting.functions import Functions

            self._functions = Functions(self)
        return self._functions

    def flush(self) -> None:
        """SCRIPT FLUSH: a new Lua state and an empty cache (scriptingReset)."""
        if self.ctx is not None:
            return
        self.cache.clear()
        self._init_vm()

    def memory_lua(self) -> int:
        """used_memory_lua: what the Lua allocator holds (lua_gc(LUA_GCCOUNT) * 1024)."""
        return int(self._gc_count() * 1024)

    @property
    def busy(self) -> bool:
        """A script ran past busy-reply-threshold and is still running (-BUSY to others)."""
        return self.ctx is not None and self.ctx.timedout

    # -- SCRIPT LOAD / compile ----------------------------------------------------------------
    def create(self, body: bytes) -> sc.Script:
        """luaCreateFunction: the cached script of ``body``, compiled on first sight."""
        sha = sc.sha1hex(body)
        script = self.cache.get(sha)
        if script is not None:
            return script
        try:
            flags, shebang_len = sc.parse_shebang(body)
        except sc.ShebangError as e:
            raise ReplyError(f"ERR {e}") from None
        func = self._compile(body[shebang_len:])
        if type(func) is tuple:
            err = func[1]
            msg = err.decode("utf-8", "replace") if isinstance(err, bytes) else str(err)
            raise ReplyError(f"ERR Error compiling script (new function): {msg}")
        script = sc.Script(sha, body, flags, func)
        if self.vm.keep is not None:
            script.ref = int(self.vm.keep(func))
        self.cache.add(script)
        return script

    # -- EVAL ---------------------------------------------------------------------------------
    def _declared_flags(self, argv: list[bytes], evalsha: bool) -> int:
        """evalGetCommandFlags: the flags of the script the command names, COMPAT if unknown."""
        if evalsha:
            script = self.cache.lookup(argv[1])
            return script.flags if script is not None else sc.COMPAT
        script = self.cache.get(sc.sha1hex(argv[1]))
        if script is not None:
            return script.flags
        try:
            return sc.parse_shebang(argv[1])[0]
        except sc.ShebangError:
            return sc.COMPAT

    def may_replicate(self, argv: list[bytes]) -> bool:
        """getCommandFlags' MAY_REPLICATE / WRITE for EVAL, EVALSHA and FCALL (what CLIENT PAUSE
        WRITE postpones): a script or function that declared flags may replicate only
        without ``no-writes`` (scriptFlagsToCmdFlags); one without (or not known yet), as
        the command says: yes."""
        name = argv[0].lower()
        if name == b"fcall":
            fn = self.functions.lookup(argv[1]) if len(argv) > 1 else None
            return fn is None or not fn.flags & sc.NO_WRITES
        if len(argv) < 2:
            return True
        flags = self._declared_flags(argv, name == b"evalsha")
        return bool(flags & sc.COMPAT) or not flags & sc.NO_WRITES

    def declares_write(self, argv: list[bytes]) -> bool:
        """scriptFlagsToCmdFlags' CMD_WRITE for EVAL, EVALSHA and FCALL: a script or function
        that declared its flags writes unless ``no-writes`` (one without flags is judged by
        what it calls, not here)."""
        name = argv[0].lower()
        if name == b"fcall":
            fn = self.functions.lookup(argv[1]) if len(argv) > 1 else None
            return fn is not None and not fn.flags & sc.NO_WRITES
        if name not in (b"eval", b"evalsha") or len(argv) < 2:
            return False
        flags = self._declared_flags(argv, name == b"evalsha")
        return not flags & (sc.COMPAT | sc.NO_WRITES)

    def _oom(self) -> bool:
        """Redis's pre_command_oom_state: the command that runs the script found the memory
        above maxmemory with nothing left to evict (pyrepl.core.evict)."""
        core = self.core
        return bool(core.maxmemory) and core.evictor.oom_now()

    def _replica_state(self) -> tuple[bool, bool]:
        """(a replica, its link to the master down)."""
        repl = self.core.replication
        if repl is None or not repl.is_replica():
            return False, False
        return True, not repl.replica.link_up()

    def _stale_replica(self) -> bool:
        """A replica whose link to the master is down, with replica-serve-stale-data no."""
        repl = self.core.replication
        return (repl is not None and repl.is_replica()
                and not self.core.config.replica_serve_stale_data
                and not repl.replica.link_up())

    def _enough_replicas(self) -> bool:
        repl = self.core.replication
        if repl is None or repl.is_replica():
            return True
        return bool(repl.master.enough_good_replicas())

    def _process_command_checks(self, c: Any, flags: int) -> None:
        """What processCommand refuses for a script declaring ``flags`` (a shebang script)."""
        core = self.core
        cfg = core.config
        write = not flags & sc.NO_WRITES
        denyoom = not flags & (sc.ALLOW_OOM | sc.NO_WRITES)
        obey = c.must_obey()
        if denyoom and not obey and self._oom():
            raise ReplyError(OOM_ERR)
        if write and core.disk_error is not None and not obey:
            raise ReplyError(core.disk_error)
        replica, link_down = self._replica_state()
        if write and replica and cfg.replica_read_only and not obey:
            raise ReplyError(READONLY_ERR)
        if write and not self._enough_replicas() and not obey:
            raise ReplyError(NOREPLICAS_ERR)
        if (replica and link_down and not cfg.replica_serve_stale_data
                and not flags & sc.ALLOW_STALE):
            raise ReplyError(MASTERDOWN_ERR)

    def _prepare(self, c: Any, flags: int, name: str, ro: bool) -> RunContext:
        """scriptPrepareForRun's checks, then the run context."""
        core = self.core
        if flags & sc.COMPAT:      # (no shebang: COMPAT alone; Redis 6's check, a stale replica)
            if self._stale_replica():
                raise ReplyError(MASTERDOWN_ERR)
            return RunContext(c, name, ro, False, self._oom(), core.clock_ns())
        cfg = core.config
        obey = c.must_obey()
        if flags & sc.NO_CLUSTER and core.cluster is not None:
            raise ReplyError("ERR Can not run script on cluster, 'no-cluster' flag is set.")
        replica = self._replica_state()[0]
        if not flags & sc.ALLOW_STALE and self._stale_replica():
            raise ReplyError("MASTERDOWN Link with MASTER is down, replica-serve-stale-data "
                             "is set to 'no' and 'allow-stale' flag is not set on the "
                             "script.")
        if not flags & sc.NO_WRITES:
            if replica and cfg.replica_read_only and not obey:
                raise ReplyError("READONLY Can not run script with write flag on readonly "
                                 "replica")
            if core.disk_error is not None and not obey:
                raise ReplyError("MISCONF Redis is configured to save RDB snapshots, but "
                                 "it's currently unable to persist to disk. Writable "
                                 "scripts are blocked. Use 'no-writes' flag for read only "
                                 "scripts.")
            if ro:
                raise ReplyError("ERR Can not execute a script with write flag using *_ro "
                                 "command.")
            if not self._enough_replicas():
                raise ReplyError(NOREPLICAS_ERR)
        oom = self._oom()
        if oom and not flags & (sc.ALLOW_OOM | sc.NO_WRITES):
            raise ReplyError("OOM allow-oom flag is not set on the script, can not run it "
                             "when used memory > 'maxmemory'")
        return RunContext(c, name, ro or bool(flags & sc.NO_WRITES), bool(flags & sc.ALLOW_OOM),
                          oom, core.clock_ns(),
                          allow_cross_slot=bool(flags & sc.ALLOW_CROSS_SLOT))

    def eval(self, c: Any, argv: list[bytes], evalsha: bool, ro: bool) -> object:
        """EVAL / EVALSHA / EVAL_RO / EVALSHA_RO (evalGenericCommand); a client that asked
        for SCRIPT DEBUG runs EVAL as a debugging session."""
        c.propagate_argv = []      # the script's effects are propagated, never EVAL itself
        if self.core.monitors:     # (before the script's own commands, as Redis)
            monitor.feed(self.core, c, "eval", argv)
        if c.ldb_mode is not None and self.ldb is None:
            if evalsha:
                if len(argv[1]) != 40:
                    raise ReplyError(NOSCRIPT_ERR)
                raise ReplyError("ERR Please use EVAL instead of EVALSHA for debugging")
            return self._debug_eval(c, argv, ro)
        return self._eval(c, argv, evalsha, ro)

    def _eval(self, c: Any, argv: list[bytes], evalsha: bool, ro: bool) -> object:
        if self.ctx is not None:   # (a script cannot call EVAL: noscript)
            raise ReplyError(BUSY_ERR)
        if evalsha:   # (_declared_flags, with the script looked up once)
            known = self.cache.lookup(argv[1])
            flags = sc.COMPAT if known is None else known.flags
        else:
            flags = self._declared_flags(argv, evalsha)
        if not flags & sc.COMPAT:
            self._process_command_checks(c, flags)
        if evalsha and len(argv[1]) != 40:
            raise ReplyError(NOSCRIPT_ERR)
        numkeys = parse_numkeys(argv[2])
        if numkeys > len(argv) - 3:
            raise ReplyError("ERR Number of keys can't be greater than number of args")
        if numkeys < 0:
            raise ReplyError("ERR Number of keys can't be negative")
        if evalsha:
            script = known
            if script is None:
                raise ReplyError(NOSCRIPT_ERR)
        else:
            script = self.create(argv[1])
        ctx = self._prepare(c, script.flags, script.sha, ro)
        return self._execute(c, ctx, self.vm, script.func, numkeys, argv, script.ref)

    # -- the Lua debugger (pyrepl/scripting/ldb.py) -------------------------------------------
    def _debug_eval(self, c: Any, argv: list[bytes], ro: bool) -> object:
        """evalGenericCommandWithDebugging: SYNC runs the session here, serving no one else
        until it ends; YES (forked) runs it in a child on its copy of the dataset, and closes
        the client here. Either way the client is closed after the session."""
        core = self.core
        host = core.host
        if c.ldb_mode == "fork":
            c.ldb_mode = None
            try:
                host.fork_child(lambda: self._forked_session(c, argv, ro), "ldb")
            except OSError as e:
                raise ReplyError("ERR Fork() failed: can't run EVAL in debugging mode: "
                                 f"{e.strerror or e}") from None
            host.close_client(c)     # (the child goes on with the connection)
            return NO_REPLY
        c.ldb_mode = None
        core.log.warning("Redis synchronous debugging eval session started")
        reply = self._session(c, argv, ro, forked=False)
        core.log.warning("Redis synchronous debugging eval session ended")
        c.close_after_reply = True
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def _forked_session(self, c: Any, argv: list[bytes], ro: bool) -> int:
        """The child of a forked session (it ignores SIGTERM and SIGINT: the host's "ldb"
        child): the session, EVAL's reply, exit."""
        self.core.log.warning("Redis forked for debugging eval")
        reply = self._session(c, argv, ro, forked=True)
        self.core.host.ldb_channel(c).write(encode(reply, c.proto))
        self.core.log.warning("Lua debugging session child exiting")
        return 0

    def _session(self, c: Any, argv: list[bytes], ro: bool, forked: bool) -> object:
        """ldbStartSession, EVAL, ldbEndSession: EVAL's reply (or its error)."""
        channel = self.core.host.ldb_channel(c)
        self.ldb = Ldb(channel, argv[1], forked)
        try:
            try:
                reply: object = self._eval(c, argv, False, ro)
            except ReplyError as e:
                reply = e
            self.ldb.end()
        finally:
            self.ldb = None
            channel.close()
        return reply

    # (what goes back to Lua is bytes: the runtime has no string encoding)
    def _ldb_line(self, line: int, count_event: bool) -> bytes | None:
        ldb = self.ldb
        reason = None if ldb is None else ldb.line(int(line), bool(count_event))
        return None if reason is None else reason.encode()

    def _ldb_resumed(self) -> None:
        """After a stop: the script's time counts from now (the timeout, busy detection)."""
        if self.ctx is not None:
            self.ctx.start_ns = self.core.clock_ns()

    def _ldb_read(self) -> tuple[Any, ...]:
        assert self.ldb is not None
        got = self.ldb.read()
        return (got[0].encode(), *got[1:])

    def _ldb_command(self, *argv: bytes) -> bytes:
        assert self.ldb is not None
        return self.ldb.command(*argv).encode()

    def _ldb_log(self, entry: bytes, trimmed: bool = False) -> None:
        ldb = self.ldb
        if ldb is not None:
            text = entry.decode("utf-8", "surrogateescape")
            if trimmed:
                ldb.log_maxlen(text)
            else:
                ldb.log(text)

    def _ldb_send(self) -> None:
        if self.ldb is not None:
            self.ldb.send()

    def _ldb_source_line(self, line: int) -> None:
        if self.ldb is not None:
            self.ldb.log_source_line(int(line))

    def _ldb_set_step(self, on: bool) -> None:
        if self.ldb is not None:
            self.ldb.step = bool(on)

    def _ldb_state(self) -> Any:
        """redis.breakpoint / redis.debug: (active, current line)."""
        ldb = self.ldb
        return (False, -1) if ldb is None else (True, ldb.currentline)

    def _ldb_breakpoint(self) -> bool:
        if self.ldb is None:
            return False
        self.ldb.luabp = True
        return True

    def fcall(self, c: Any, argv: list[bytes], ro: bool) -> object:
        """FCALL / FCALL_RO (fcallCommandGeneric)."""
        c.propagate_argv = []      # the function's effects are propagated, never FCALL itself
        if self.core.monitors:
            monitor.feed(self.core, c, "fcall", argv)
        if self.ctx is not None:
            raise ReplyError(BUSY_ERR)
        fns = self.functions
        fn = fns.lookup(argv[1])
        if fn is not None:         # fcallGetCommandFlags: processCommand with its flags
            self._process_command_checks(c, fn.flags)
        if fn is None:
            raise ReplyError("ERR Function not found")
        try:
            numkeys = parse_numkeys(argv[2])
        except ReplyError:
            raise ReplyError("ERR Bad number of keys provided") from None
        if numkeys > len(argv) - 3:
            raise ReplyError("ERR Number of keys can't be greater than number of args")
        if numkeys < 0:
            raise ReplyError("ERR Number of keys can't be negative")
        ctx = self._prepare(c, fn.flags, fn.name.decode("utf-8", "replace"), ro)
        ctx.eval_mode = False
        ctx.argv = argv
        return self._execute(c, ctx, fns.vm, fn.func, numkeys, argv)

    def _execute(self, c: Any, ctx: RunContext, vm: LuaVM, func: Any, numkeys: int,
                 argv: list[bytes], ref: int = 0) -> object:
        """Run ``func`` on the scripts' pseudo-client (luaCallFunction) and answer. An EVAL
        script kept in _luacall (``ref``) runs through its C runner, outside a debugging
        session; anything else through lupa, the reference."""
        client = self.client
        if client is None:
            client = self.client = self.make_client()
        client.db = c.db
        client.proto = 2
        client.user = c.user
        client.in_multi = False
        ldb = self.ldb
        if ldb is None:
            want_hook = self.core.config.busy_reply_threshold > 0
            if want_hook != vm.hook_on:
                vm.set_hook(want_hook)
                vm.hook_on = want_hook
        else:                      # the debugger's line hook instead of the busy one
            vm.set_ldb_hook(True)
            limit_ms = self.core.config.busy_reply_threshold or 5000
            ldb.over_time = lambda: (self.core.clock_ns() - ctx.start_ns) // 1_000_000 >= limit_ms
        self.ctx = ctx
        saved = None if vm.lua is self.lua else self.use_vm(vm)   # (EVAL's state: current)
        try:
            if ref and ldb is None and vm.accel_id is not None:
                res = _luacall.run(vm.accel_id, ref, c.proto, numkeys, argv)
            else:
                res = vm.run(func, c.proto, numkeys, *argv[3:])
        finally:
            if saved is not None:
                self.restore_vm(saved)
            self.ctx = None
            if ctx.timedout:
                self.core.set_busy(None)
            if ldb is not None:
                vm.set_ldb_hook(False)
                vm.set_hook(vm.hook_on)
        return self._answer(c, ctx, res)

    def _answer(self, c: Any, ctx: RunContext, res: tuple[Any, ...]) -> object:
        """The caller's reply to what the runner returned: none when SHUTDOWN NOSAVE stopped
        the script (as Redis), else :meth:`_reply`'s."""
        if ctx.killed and self.core.shutdown_asap:
            c.close_after_reply = True
            return NO_REPLY
        return self._reply(c, ctx, res)

    def _reply(self, c: Any, ctx: RunContext, res: tuple[Any, ...]) -> object:
        """What the runner returned, as the caller's reply."""
        kind = res[0]
        if kind == b"r":
            return Raw(res[1])
        if kind == b"v":
            v = res[1]
            t = type(v)
            if t is bytes:
                return v
            if t is int or t is float:
                return _long_long(v)
            if t is bool:
                if ctx.resp == 2:
                    return 1 if v else None
                if c.proto == 3:
                    return v
                return 1 if v else 0
            return None
        if kind == b"e":
            msg, source, line, ignore = res[1], res[2], res[3], res[4]
            text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
            if source is not None and line is not None:
                text += (f" script: {ctx.sha}, on {source.decode('utf-8', 'replace')}:"
                         f"{line.decode('utf-8', 'replace')}.")
            err = ReplyError(text)
            if ignore:
                # already counted as the command's error: only EVAL's failed_calls (Redis's
                # ERR_REPLY_FLAG_NO_STATS_UPDATE)
                if c.last_cmd is not None:
                    self.core.command_stat(c.last_cmd).failed += 1
                return err
            raise err
        msg = res[1].decode("utf-8", "replace") if isinstance(res[1], bytes) else str(res[1])
        raise ReplyError(f"ERR Error running script {ctx.sha}, {msg[:100]}")

    # -- redis.call -----------------------------------------------------------------------------
    def _check(self, ctx: RunContext, cmd: Any, argv: list[bytes]) -> str | None:
        """scriptCall's checks; the error text (luaPushError form) or None."""
        if cmd is None:
            return "Unknown Redis command called from script"
        if cmd.handler is None or not cmd.min_args <= len(argv) <= cmd.max_args:
            return "Wrong number of args calling Redis command from script"
        flags = cmd.flags
        core = self.core
        if ("noscript" in flags or "no-script" in flags) and \
                not getattr(core, "script_disable_deny_script", False):
            return "This Redis command is not allowed from script"
        if "stale" not in flags and self._stale_replica():
            return "Can not execute the command on a stale replica"
        if ctx.caller.restricted:      # ACL: the caller's user (scriptVerifyACL)
            refused = core.acl.script_refusal(ctx.caller, cmd, argv)
            if refused is not None:
                return refused
        write = cmd.write
        if ctx.read_only and (write or "may-replicate" in flags):
            return "Write commands are not allowed from read-only scripts."
        if not write:
            return self._cluster_check(ctx, cmd, argv)
        obey = ctx.caller.must_obey()
        if not ctx.write_dirty:
            repl = core.replication
            if repl is not None and repl.is_replica() and core.config.replica_read_only \
                    and not obey:
                return "-" + READONLY_ERR
            if core.disk_error is not None:
                return "-" + core.disk_error
            if not self._enough_replicas():
                return "-" + NOREPLICAS_ERR
            if (not ctx.allow_oom and ctx.oom and not obey and "denyoom" in flags):
                return "-" + OOM_ERR
        ctx.write_dirty = True
        return self._cluster_check(ctx, cmd, argv)

    def _cluster_check(self, ctx: RunContext, cmd: Any, argv: list[bytes]) -> str | None:
        """scriptVerifyClusterState: in cluster mode a script's command must be one this node
        serves (the caller's ASKING / READONLY apply), and, unless the script may cross
        slots, every key it touches in the slot of the first (or of the keys the caller
        declared)."""
        core = self.core
        caller = ctx.caller
        if core.cluster is None or caller.must_obey():
            return None
        from pyrepl.core.cluster import route_script_call
        return route_script_call(core, caller, cmd, argv, ctx.allow_cross_slot)

    def _pcall(self, *args: Any) -> Any:
        """redis.pcall: the reply, or the error as a table {err=...}."""
        try:
            return self._call_raise(*args)
        except CallError as e:
            return self._err_table(e.text, e.ignore)

    def _err_table(self, text: str, ignore: bool) -> Any:
        d: dict[bytes, Any] = {b"err": text.encode("utf-8", "replace")}
        if ignore:
            d[b"ignore_error_stats_update"] = True
        return self.lua.table_from(d)

    def _unwrap(self, exc: Any) -> Any:
        """The Lua error value of an exception raised by a Python function called from Lua."""
        if isinstance(exc, CallError):
            return self._err_table(exc.text, exc.ignore)
        return str(exc).encode("utf-8", "replace")

    def _call_raise(self, *args: Any) -> Any:
        """redis.call: the reply, or a raised CallError (redis.pcall turns it into a table;
        :meth:`_unwrap` for redis.call). The C redis.call (``_luacall``) makes the same checks
        on its arguments and converts the reply the same way."""
        ctx = self.ctx
        if ctx is None:
            raise CallError(OUTSIDE_ERR, False)
        if not args:
            raise CallError(NOARGS_ERR, False)
        argv = lua_argv(args)
        if argv is None:
            raise CallError(ARGS_ERR, False)
        reply = self.run_call(ctx, argv)
        t = type(reply)
        if t is bytes or t is int:
            return reply
        return self.to_lua.convert(reply, self.client.proto)

    def run_call(self, ctx: RunContext, argv: list[bytes]) -> object:
        """scriptCall for a script's argv: the checks, the command, its effects' replication
        flags; the reply value (an error reply raised as CallError)."""
        core = self.core
        client = self.client
        ldb = self.ldb
        if ldb is not None and ldb.step:
            ldb.log_call(argv)
        cmd = core.lookup_command(argv)
        err = self._check(ctx, cmd, argv)
        if err is not None:
            if ldb is not None and ldb.step:
                ldb.log("<error> " + err)
            text = error_text(err)
            core.error_reply(client, text, cmd, rejected=True)
            raise CallError(text, True)
        assert cmd is not None     # (_check refused an unknown command)
        if cmd.name in _XREADS and _has_block(argv):
            text = error_text(f"-ERR {cmd.name} command is not allowed with BLOCK option from "
                              "scripts")
            core.error_reply(client, text, cmd, rejected=False)
            core.command_stat(cmd).calls += 1
            raise CallError(text, True)
        pending = core._pending
        mark = len(pending)
        reply = call(core, client, cmd, argv)   # (core.call, its common case in C)
        target = ctx.repl_flags
        if target != PROPAGATE_ALL and core._pending is pending:
            if should_propagate(core, target):
                pending[mark:] = [(e[0], e[1], target) for e in pending[mark:]]
            else:   # (nothing takes them: not queued, so no MULTI/EXEC around nothing)
                del pending[mark:]
        if client.out:
            client.out = []
        if ldb is not None and ldb.step:
            ldb.log_reply(encode(reply, client.proto))
        if isinstance(reply, ReplyError):
            raise CallError(error_text("-" + reply.message), True)
        return reply

    # -- the redis.* helpers and math.random (C functions in Redis: Python callables here) -----
    @staticmethod
    def _raise(msg: str) -> None:
        raise CallError("ERR " + msg, False)

    def _sha1hex(self, *args: Any) -> bytes:
        if len(args) != 1:
            self._raise("wrong number of arguments")
        s = args[0]
        if type(s) in (int, float):
            s = _g14(float(s))
        elif type(s) is not bytes:
            s = b""
        return sc.sha1hex(s).encode()

    def _log(self, *args: Any) -> None:
        if len(args) < 2:
            self._raise("redis.log() requires two arguments or more.")
        level = lua_tonumber(args[0])
        if level is None:
            self._raise("First argument must be a number (log level).")
        lvl = int(level)  # type: ignore[arg-type]
        if not 0 <= lvl <= 3:
            self._raise("Invalid debug level.")
        parts = []
        for j, a in enumerate(args[1:], 1):
            if type(a) is bytes or type(a) in (int, float):
                if j != 1:
                    parts.append(b" ")
                parts.append(a if type(a) is bytes else _g14(float(a)))
        getattr(self.core.log, _LOG_LEVELS[lvl])(b"".join(parts).decode("utf-8", "replace"))

    def _setresp(self, *args: Any) -> None:
        if len(args) != 1:
            self._raise("redis.setresp() requires one argument.")
        n = lua_tonumber(args[0])
        resp = int(n) if n is not None and n == n and abs(n) < 2**31 else 0
        if resp not in (2, 3):
            self._raise("RESP version must be 2 or 3.")
        if self.ctx is not None:
            self.ctx.resp = resp
            self.client.proto = resp

    def _setrepl(self, *args: Any) -> None:
        if len(args) != 1:
            self._raise("redis.set_repl() requires two arguments.")
        n = lua_tonumber(args[0])
        flags = int(n) if n is not None and n == n and abs(n) < 2**31 else 0
        if flags & ~(PROPAGATE_AOF | PROPAGATE_REPL):
            self._raise("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or "
                        "REPL_NONE.")
        if self.ctx is not None:
            self.ctx.repl_flags = flags

    @staticmethod
    def _checkint(args: tuple[Any, ...], i: int, fname: str) -> int:
        v = args[i] if i < len(args) else None
        n = lua_tonumber(v)
        if n is None:
            got = "no value" if i >= len(args) else lua_typename(v)
            raise LibError(f"bad argument #{i + 1} to '{fname}' (number expected, got {got})")
        return int(n) if n == n and abs(n) < 2**63 else _LLONG_MIN

    def _random(self, *args: Any) -> float:
        """math.random over redisLrand48 (Lua's own code with rand() replaced)."""
        r = self.rand.random()
        if not args:
            return r
        if len(args) == 1:
            u = self._checkint(args, 0, "random")
            if u < 1:
                raise LibError("bad argument #1 to 'random' (interval is empty)")
            return float(math.floor(r * u) + 1)
        if len(args) == 2:
            lo = self._checkint(args, 0, "random")
            u = self._checkint(args, 1, "random")
            if lo > u:
                raise LibError("bad argument #2 to 'random' (interval is empty)")
            return float(math.floor(r * (u - lo + 1)) + lo)
        raise LibError("wrong number of arguments")

    def _randomseed(self, *args: Any) -> None:
        self.rand.seed(self._checkint(args, 0, "randomseed"))

    def _acl(self, *args: Any) -> Any:
        """redis.acl_check_cmd: whether the user running the script may run the command with
        those arguments (nothing is logged)."""
        ctx = self.ctx
        if ctx is None:
            raise CallError("ERR redis.acl_check_cmd can only be called inside a script "
                            "invocation", False)
        argv = lua_argv(args) if args else None
        if argv is None:
            raise CallError(NOARGS_ERR if not args else ARGS_ERR, False)
        cmd = self.core.lookup_command(argv)
        if cmd is None:
            raise CallError("ERR Invalid command passed to redis.acl_check_cmd()", False)
        user = ctx.caller.acl_user
        return user is None or ctx.caller.must_obey() or not user.check(cmd, argv)[0]

    # -- busy scripts ---------------------------------------------------------------------------
    def _hook(self) -> bool:
        """The count hook (scriptInterrupt): True when the script must stop (SCRIPT KILL)."""
        ctx = self.ctx
        if ctx is None:
            return False
        core = self.core
        if not ctx.timedout:
            elapsed = (core.clock_ns() - ctx.start_ns) // 1_000_000
            if elapsed < core.config.busy_reply_threshold:
                return False
            kill = "SCRIPT KILL" if ctx.eval_mode else "FUNCTION KILL"
            core.log.warning(f"Slow script detected: still in execution after {elapsed} "
                             f"milliseconds. You can try killing the script using the {kill} "
                             f"command. Script name is: {ctx.sha}.")
            ctx.timedout = True
            core.set_busy(BUSY_ERR if ctx.eval_mode else BUSY_FUNCTION_ERR)
        core.host.process_events_while_blocked(ctx.caller)
        if core.shutdown_asap:          # SHUTDOWN NOSAVE was served: stop the script
            ctx.killed = True
        if ctx.killed:
            core.log.warning("Lua script killed by user with SCRIPT KILL.")
        return ctx.killed

    def kill(self, c: Any, is_eval: bool = True) -> object:
        """SCRIPT KILL / FUNCTION KILL (scriptKill)."""
        ctx = self.ctx
        if ctx is None:
            raise ReplyError("NOTBUSY No scripts in execution right now.")
        if ctx.caller.must_obey():
            raise ReplyError("UNKILLABLE The busy script was sent by a master instance in the "
                             "context of replication and cannot be killed.")
        if ctx.write_dirty:
            raise ReplyError("UNKILLABLE Sorry the script already executed write commands "
                             "against the dataset. You can either wait the script termination "
                             "or kill the server in a hard way using the SHUTDOWN NOSAVE "
                             "command.")
        if is_eval and not ctx.eval_mode:
            raise ReplyError(BUSY_FUNCTION_ERR)   # a function: SCRIPT KILL cannot stop it
        if not is_eval and ctx.eval_mode:
            raise ReplyError(BUSY_ERR)            # an EVAL: FUNCTION KILL cannot stop it
        ctx.killed = True
        return True


def _has_block(argv: list[bytes]) -> bool:
    """XREAD/XREADGROUP given BLOCK before STREAMS."""
    for i, a in enumerate(argv[1:], 1):
        low = a.lower()
        if low == b"streams":
            return False
        if low == b"block" and i + 1 < len(argv):
            return True
    return False


def engine_of(core: Any, create: bool = True) -> Any:
    """The core's script engine (``core.scripts``), made on first use when ``create``. Its
    pseudo-client (Redis's script client) runs the scripts' commands; MONITOR shows them as
    ``[db lua]``."""
    eng = getattr(core, "scripts", None)
    if eng is None and create:
        from pyrepl.core.client import Client

        def make_client() -> Client:
            c = Client(core, 0)
            c.set_authenticated(True)
            c.kind = "script"
            return c

        eng = ScriptEngine(core, make_client)
        core.scripts = eng
    return eng
