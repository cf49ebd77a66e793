"""The command table: name, arity, flags, key positions and handler of every command.

Theory of operation: each command module registers its handlers with the :func:`command`
decorator at import time. ``COMMANDS`` maps the lowercase name (bytes) to a :class:`Command`.
Container commands (CONFIG, CLIENT, COMMAND, ...) register their subcommands as
``"config|get"``; the dispatcher resolves ``argv[1]`` for them. A family of commands that share
one implementation (LPOP / RPOP, ZRANGEBYSCORE ...) is registered from one table with
:func:`variants`. Arity follows Redis: a positive
number is exact, a negative one is a minimum (the command name counts). Flags use Redis's names
(``write``, ``readonly``, ``denyoom``, ``admin``, ``fast``, ``noscript``, ``loading``, ``stale``,
``no-auth``, ``no-multi``, ``may-replicate``, ...) because COMMAND INFO reports them; a command
registered with a ``keys_fn`` (keys found by parsing, e.g. after a numkeys argument) gets
``movablekeys`` as in Redis.

ACL categories follow Redis too: a registration names the categories of the command's JSON
file in Redis's source (``acl_categories``: ``string``, ``keyspace``, ``dangerous``, ...) and
the table adds those its flags imply (setImplicitACLCategories: ``write`` -> @write,
``readonly`` -> @read, ``admin`` -> @admin @dangerous, ``fast`` -> @fast, anything not fast ->
@slow, ...). ``Command.acl_categories`` is the full set in Redis's order, which is what
COMMAND INFO lists.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[Any, list[bytes]], object]

# Redis 7.0's ACL categories, in the order COMMAND INFO lists them (acl.c ACLCommandCategories).
ACL_CATEGORIES = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
    "connection", "transaction", "scripting",
)


def acl_categories(flags: frozenset[str], declared: tuple[str, ...]) -> tuple[str, ...]:
    """The declared categories plus those the flags imply (setImplicitACLCategories)."""
    cats = set(declared)
    unknown = cats.difference(ACL_CATEGORIES)
    if unknown:
        raise ValueError(f"unknown ACL categories {sorted(unknown)}")
    if "write" in flags:
        cats.add("write")
    if "readonly" in flags and "scripting" not in cats:
        cats.add("read")
    if "admin" in flags:
        cats.update(("admin", "dangerous"))
    if "pubsub" in flags:
        cats.add("pubsub")
    if "fast" in flags:
        cats.add("fast")
    if "blocking" in flags:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    return tuple(c for c in ACL_CATEGORIES if c in cats)


@dataclass(slots=True, eq=False)
class Command:
    name: str  # full name, lowercase: "get", "config|get"
    handler: Handler | None
    arity: int
    flags: frozenset[str]
    first_key: int = 0
    last_key: int = 0
    step: int = 0
    group: str = "generic"
    summary: str = ""
    since: str = "1.0.0"
    acl_categories: tuple[str, ...] = ()
    subcommands: dict[bytes, Command] = field(default_factory=dict)
    write: bool = False
    readonly: bool = False
    noauth: bool = False
    nomulti: bool = False
    denyoom: bool = False         # may grow memory: refused while out of memory (pyrepl.core.evict)
    # A change it makes (server.dirty) is propagated: every write command, and a command
    # flagged ``may-replicate`` (PFCOUNT refreshing a HLL's cached cardinality; PUBLISH, which
    # sets ``Client.propagate_argv`` to be propagated without a change).
    propagates: bool = False
    # For key-less-position commands (e.g. ZUNIONSTORE numkeys): returns the key indexes.
    keys_fn: Callable[[list[bytes]], list[int]] | None = None
    # One call in 16 is timed (ServerCore.call): the "fast" commands and the O(1) ones Redis
    # does not flag fast (SET, SETEX, PSETEX); every call of the others, for the slow log.
    sampled: bool = False
    skip_slowlog: bool = False
    skip_monitor: bool = False    # "skip-monitor" or "admin": MONITOR never shows it
    allow_busy: bool = False      # runs while a script is busy (others get -BUSY)
    # O(1) ("sampled"), never blocks, and changes nothing but the keyspace and the client's
    # selected db: a run of such commands (pipelined by a client, or the master's stream on
    # a replica) runs in one pass (pyrepl.plainrun).
    plain: bool = False
    # A run of this command alone (``ServerCore.run_plain``) may be applied by
    # ``whole(client, reqs)`` at once: the replies in order, or None, before anything
    # changed, when some request in it needs what the handler checks one by one (a key
    # with a TTL, a WATCHed db, keyspace events, another form of the command).
    whole: Callable[[Any, list[list[bytes]]], list[object] | None] | None = None
    # The arity as a range of argument counts (one chained comparison on the hot path).
    min_args: int = 0
    max_args: int = 0
    # A script's redis.call of it needs no check but its arity and a write's (the C
    # redis.call runs it itself: pyrepl/scripting/_luacall.c): scripts may call it, it is
    # not may-replicate (which read-only scripts refuse), not XREAD/XREADGROUP (BLOCK is
    # refused there), not a container.
    script_plain: bool = False
    # (cmdstats, its record of this command): the C's call remembers the record of the
    # last core's dict it was looked up in (pyrepl/_dispatch.c's call_ready)
    stat_of: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    # (the C's: every slot set, pyrepl/_slots.h)
    _whole: bool | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.min_args = abs(self.arity)
        self.max_args = self.arity if self.arity > 0 else sys.maxsize
        if self.keys_fn is not None:
            self.flags = self.flags | {"movablekeys"}
        self.acl_categories = acl_categories(self.flags, self.acl_categories)
        self.sampled = "fast" in self.flags or self.name in _O1_NOT_FAST
        self.skip_slowlog = "skip-slowlog" in self.flags
        self.skip_monitor = "skip-monitor" in self.flags or "admin" in self.flags
        self.allow_busy = "allow-busy" in self.flags
        self.denyoom = "denyoom" in self.flags
        self.plain = self.sampled and "blocking" not in self.flags and \
            self.name not in _NOT_PLAIN
        self.script_plain = self.handler is not None and \
            not self.flags & {"noscript", "no-script", "may-replicate"} and \
            self.name not in ("xread", "xreadgroup")

    def key_positions(self, argv: list[bytes]) -> list[int]:
        if self.keys_fn is not None:
            return self.keys_fn(argv)
        if self.first_key == 0:
            return []
        last = self.last_key if self.last_key >= 0 else len(argv) + self.last_key
        return list(range(self.first_key, min(last, len(argv) - 1) + 1, self.step or 1))


COMMANDS: dict[bytes, Command] = {}


def find_command(name: bytes) -> Command | None:
    """lookupCommandBySds: a command by name, or a subcommand as ``parent|sub``."""
    name = name.lower()
    if b"|" in name:
        parent, sub = name.split(b"|", 1)
        p = COMMANDS.get(parent)
        return p.subcommands.get(sub) if p else None
    return COMMANDS.get(name)


def apply_renames(renames: Iterable[tuple[str, str]]) -> tuple[int, str] | None:
    """The ``rename-command`` lines (old name, new name; "" removes the command) applied to
    the process's command table, as Redis's config loader applies them to server.commands
    (commands are found by their new name only, for clients, scripts, MULTI and a master's
    stream alike; COMMAND INFO still names them by their own name). None, or the index of the
    line that failed and Redis's reason."""
    for i, (old, new) in enumerate(renames):
        key = old.encode("latin-1").lower()
        cmd = COMMANDS.get(key)
        if cmd is None:
            return i, "No such command in rename-command"
        del COMMANDS[key]
        if new:
            target = new.encode("latin-1").lower()
            if target in COMMANDS:
                return i, "Target command name already exists"
            COMMANDS[target] = cmd
    return None


def whole_run(name: str) -> Callable[[Callable], Callable]:
    """Register ``fn`` as the whole-run form of the (plain) command ``name``
    (``Command.whole``)."""

    def deco(fn: Callable) -> Callable:
        cmd = COMMANDS[name.encode()]
        assert cmd.plain, name
        cmd.whole = fn
        return fn

    return deco

# O(1) in Redis's command documentation, yet without its "fast" flag.
_O1_NOT_FAST = frozenset(("set", "setex", "psetex"))
# O(1) commands that change a client's state or every client's: never applied in a batch
# (ASKING, READONLY and READWRITE: the cluster redirect of the client's next commands).
_NOT_PLAIN = frozenset(("swapdb", "multi", "discard", "watch", "unwatch", "quit", "auth",
                        "hello", "reset", "asking", "readonly", "readwrite"))


def command(
    name: str,
    arity: int,
    flags: str = "",
    keys: tuple[int, int, int] = (0, 0, 0),
    group: str = "generic",
    summary: str = "",
    since: str = "1.0.0",
    acl: str = "",
    keys_fn: Callable[[list[bytes]], list[int]] | None = None,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as command ``name`` ("get", or "config|get" for a subcommand)."""

    def deco(fn: Handler) -> Handler:
        fl = frozenset(flags.split())
        cmd = Command(
            name=name.lower(),
            handler=fn,
            arity=arity,
            flags=fl,
            first_key=keys[0],
            last_key=keys[1],
            step=keys[2],
            group=group,
            summary=summary,
            since=since,
            acl_categories=tuple(acl.split()),
            write="write" in fl,
            readonly="readonly" in fl,
            noauth="no-auth" in fl,
            nomulti="no-multi" in fl,
            keys_fn=keys_fn,
            propagates="write" in fl or "may-replicate" in fl,
        )
        if "|" in cmd.name:
            parent_name, sub = cmd.name.split("|", 1)
            parent = COMMANDS.get(parent_name.encode())
            if parent is None:
                parent = Command(name=parent_name, handler=None, arity=-2, flags=frozenset(),
                                 group=group)
                COMMANDS[parent_name.encode()] = parent
            parent.subcommands[sub.encode()] = cmd
        else:
            existing = COMMANDS.get(cmd.name.encode())
            if existing is not None and existing.handler is None:
                cmd.subcommands = existing.subcommands  # container declared after its children
            COMMANDS[cmd.name.encode()] = cmd
        return fn

    return deco


def variants(impl: Callable[..., object], rows: Iterable[tuple[str, str, str, tuple]],
             arity: int, flags: str, **spec: Any) -> None:
    """Register a family of commands that are one implementation with fixed arguments (LPOP /
    RPOP, ZRANGEBYSCORE ... ZREVRANGEBYLEX): per ``(name, since, summary, args)`` row, a
    command whose handler is ``impl(c, argv, *args)``; ``arity``, ``flags`` and ``spec``
    (keys, group, acl, ...) as :func:`command` takes them, the same for every row."""
    for name, since, summary, args in rows:
        def handler(c: Any, argv: list[bytes], args: tuple = args) -> object:
            return impl(c, argv, *args)

        command(name, arity, flags, summary=summary, since=since, **spec)(handler)


def container(name: str, group: str = "server", summary: str = "", since: str = "1.0.0") -> None:
    """Declare a container command (its subcommands are registered with "name|sub")."""
    key = name.lower().encode()
    parent = COMMANDS.get(key)
    if parent is None:
        COMMANDS[key] = Command(name=name.lower(), handler=None, arity=-2, flags=frozenset(),
                                group=group, summary=summary, since=since)
    else:
        parent.group, parent.summary, parent.since = group, summary, since
