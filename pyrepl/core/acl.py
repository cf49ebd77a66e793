"""ACL users, their rules and the permission check (Redis 7.0's acl.c), sans-io.

Theory of operation: :class:`Acl` is the server's user registry, attached to the core on first
use (``acl_of(core)``); until then every client is the all-powerful ``default`` user and the
dispatcher checks nothing. A :class:`User` has flags (on/off, nopass, sanitize-payload),
SHA-256 password hashes and selectors: the root one (rules given outside parentheses) and any
``(...)`` ones; a command runs when one selector allows the command, its keys and its channels
(ACLCheckAllUserCommandPerm). A selector's commands are a set of full names ("get",
"config|get") plus Redis's two "all" bits: ``allcommands`` (cleared by any removal) and
``future`` (only +@all / -@all touch it; it decides whether a description starts with +@all).

Each client carries ``acl_user`` and ``restricted``: False while its user may run every command
on every key and channel, the case the dispatcher's hot path tests once per command (the full
check runs only for restricted users). Changing a user recomputes the flag of its clients.
The same check (:meth:`Acl.refusal`) serves the dispatcher (context "toplevel", or "multi"
while queueing), EXEC's second look at its queue ("multi") and a script's redis.call as the
caller's user ("lua"), each answering its own Redis text. The configuration's users, the ACL
file and ACL LOAD / SAVE are pyrepl.core.acl_file's.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING, Any

from pyrepl.commands.keyspec_walk import keys_with_flags
from pyrepl.commands.table import ACL_CATEGORIES, COMMANDS, Command
from pyrepl.keyspace.glob import stringmatch

if TYPE_CHECKING:
    from pyrepl.core.client import Client

READ, WRITE = 1, 2
ALL_PERM = READ | WRITE

DENIED_CMD, DENIED_KEY, DENIED_AUTH, DENIED_CHANNEL = 1, 2, 3, 4
REASONS = {DENIED_CMD: "command", DENIED_KEY: "key", DENIED_AUTH: "auth",
           DENIED_CHANNEL: "channel"}

USER_FLAGS = ("on", "off", "nopass", "skip-sanitize-payload", "sanitize-payload")

# Channel arguments (getChannelsFromCommand): (first position, is a pattern, that argument
# only); only publish and subscribe are checked, unsubscribing never is.
_CHANNEL_ARGS = {"publish": (1, False, True), "spublish": (1, False, True),
                 "subscribe": (1, False, False), "ssubscribe": (1, False, False),
                 "psubscribe": (1, True, False)}

ERR_NOENT = "Unknown command or category name in ACL"
ERR_INVAL = "Syntax error"
ERR_KEYS_AFTER_ALL = ("Adding a pattern after the * pattern (or the 'allkeys' flag) is not "
                      "valid and does not have any effect. Try 'resetkeys' to start with an "
                      "empty list of patterns")
ERR_CHANNELS_AFTER_ALL = ("Adding a pattern after the * pattern (or the 'allchannels' flag) is "
                          "not valid and does not have any effect. Try 'resetchannels' to start "
                          "with an empty list of channels")
ERR_NODEV = "The password you are trying to remove from the user does not exist"
ERR_BADMSG = ("The password hash must be exactly 64 characters and contain only lowercase "
              "hexadecimal characters")
ERR_CHILD = "Allowing first-arg of a subcommand is not supported"

# The refusal texts: of a command (processCommand), of a script's redis.call
# (getAclErrorMessage) and of a queued command at EXEC (execCommand).
NOPERM = {
    DENIED_CMD: "NOPERM this user has no permissions to run the '%s' command",
    DENIED_KEY: "NOPERM this user has no permissions to access one of the keys used as arguments",
    DENIED_CHANNEL: ("NOPERM this user has no permissions to access one of the channels used as "
                     "arguments"),
}
SCRIPT_REASONS = {
    DENIED_CMD: "can't run this command or subcommand",
    DENIED_KEY: "can't access at least one of the keys mentioned in the command arguments",
    DENIED_CHANNEL: "can't publish to the channel mentioned in the command",
}
EXEC_REASONS = {
    DENIED_CMD: "no permission to execute the command or subcommand",
    DENIED_KEY: "no permission to touch the specified keys",
    DENIED_CHANNEL: "no permission to access one of the channels used as arguments",
}


#: ACL flags that come in exclusive pairs: setting one clears the other.
_EXCLUSIVE_FLAGS = {b"on": "off", b"off": "on", b"sanitize-payload": "skip-sanitize-payload",
                    b"skip-sanitize-payload": "sanitize-payload"}


class AclError(Exception):
    """A rule ACL SETUSER does not accept (the text is ACLSetUserStringError's)."""


def hash_password(password: bytes) -> str:
    return hashlib.sha256(password).hexdigest()


def all_commands() -> list[Command]:
    """Every command, each container followed by its subcommands (the table's order)."""
    out = []
    for cmd in COMMANDS.values():
        out.append(cmd)
        out.extend(cmd.subcommands.values())
    return out


def lookup(name: str) -> Command | None:
    """ACLLookupCommand: "get" or "config|get" (lowercase)."""
    top, _, sub = name.lower().partition("|")
    cmd = COMMANDS.get(top.encode())
    if cmd is None or not sub:
        return cmd
    return cmd.subcommands.get(sub.encode())


def _parent(cmd: Command) -> bool:
    return "|" in cmd.name


def has_spaces(s: bytes) -> bool:
    """ACLStringHasSpaces: isspace() or NUL anywhere (user names, patterns)."""
    return any(ch in b" \t\r\n\v\f\0" for ch in s)


class Selector:
    __slots__ = ("allowed", "allcommands", "future", "firstargs", "allkeys", "patterns",
                 "allchannels", "channels")

    def __init__(self, allchannels: bool = False) -> None:
        self.allowed: set[str] = set()
        self.allcommands = False
        self.future = False
        self.firstargs: dict[str, list[str]] = {}
        self.allkeys = False
        self.patterns: list[list[Any]] = []     # [pattern bytes, READ|WRITE]
        self.allchannels = allchannels
        self.channels: list[bytes] = []

    def copy(self) -> Selector:
        s = Selector()
        s.allowed = set(self.allowed)
        s.allcommands, s.future = self.allcommands, self.future
        s.firstargs = {k: list(v) for k, v in self.firstargs.items()}
        s.allkeys = self.allkeys
        s.patterns = [list(p) for p in self.patterns]
        s.allchannels = self.allchannels
        s.channels = list(self.channels)
        return s

    # -- rules (ACLSetSelector) -----------------------------------------------------------
    def change(self, cmd: Command, allow: bool) -> None:
        """ACLChangeSelectorPerm: the command and, for a container, its subcommands."""
        for c in (cmd, *cmd.subcommands.values()):
            if allow:
                self.allowed.add(c.name)
            else:
                self.allowed.discard(c.name)
                self.allcommands = False
        self.firstargs.pop(cmd.name, None)

    def set_category(self, category: str, allow: bool) -> bool:
        if category not in ACL_CATEGORIES:
            return False
        for cmd in all_commands():
            if category in cmd.acl_categories:
                self.change(cmd, allow)
        return True

    def apply(self, op: bytes) -> None:
        low = op.lower()
        if low in (b"allkeys", b"~*", b"resetkeys"):
            self.allkeys = low != b"resetkeys"
            self.patterns = []
        elif low in (b"allchannels", b"&*", b"resetchannels"):
            self.allchannels = low != b"resetchannels"
            self.channels = []
        elif low in (b"allcommands", b"+@all", b"nocommands", b"-@all"):
            every = low in (b"allcommands", b"+@all")
            self.allowed = {c.name for c in all_commands()} if every else set()
            self.allcommands = self.future = every
            self.firstargs = {}
        elif op[:1] in (b"~", b"%"):
            self._add_key_pattern(op)
        elif op[:1] == b"&":
            if self.allchannels:
                raise AclError(ERR_CHANNELS_AFTER_ALL)
            if has_spaces(op[1:]):
                raise AclError(ERR_INVAL)
            if op[1:] not in self.channels:
                self.channels.append(op[1:])
            self.allchannels = False
        elif op[:1] == b"+" and op[1:2] != b"@":
            self._allow(op[1:].decode("latin-1"))
        elif op[:1] == b"-" and op[1:2] != b"@":
            cmd = lookup(op[1:].decode("latin-1"))
            if cmd is None:
                raise AclError(ERR_NOENT)
            self.change(cmd, False)
        elif op[:1] in (b"+", b"-") and op[1:2] == b"@":
            if not self.set_category(op[2:].decode("latin-1").lower(), op[:1] == b"+"):
                raise AclError(ERR_NOENT)
        else:
            raise AclError(ERR_INVAL)

    def _add_key_pattern(self, op: bytes) -> None:
        if self.allkeys:
            raise AclError(ERR_KEYS_AFTER_ALL)
        flags = 0
        offset = 1
        if op[:1] == b"%":
            ok = True
            while offset < len(op):
                ch = op[offset:offset + 1].upper()
                if ch == b"R" and not flags & READ:
                    flags |= READ
                elif ch == b"W" and not flags & WRITE:
                    flags |= WRITE
                elif ch == b"~":
                    offset += 1
                    break
                else:
                    ok = False
                    break
                offset += 1
            if not flags or not ok:
                raise AclError(ERR_INVAL)
        else:
            flags = ALL_PERM
        pattern = op[offset:]
        if has_spaces(pattern):
            raise AclError(ERR_INVAL)
        for p in self.patterns:
            if p[0] == pattern:
                p[1] |= flags
                break
        else:
            self.patterns.append([pattern, flags])
        self.allkeys = False

    def _allow(self, name: str) -> None:
        if "|" not in name:
            cmd = lookup(name)
            if cmd is None:
                raise AclError(ERR_NOENT)
            self.change(cmd, True)
            return
        top, _, sub = name.rpartition("|")
        cmd = lookup(top)
        if cmd is None:
            raise AclError(ERR_NOENT)
        if _parent(cmd):
            raise AclError(ERR_CHILD)
        if not sub:
            raise AclError(ERR_INVAL)
        if cmd.subcommands:
            subcmd = lookup(name)
            if subcmd is None:
                raise AclError(ERR_NOENT)
            self.change(subcmd, True)
            return
        args = self.firstargs.setdefault(cmd.name, [])
        if sub.lower() not in (a.lower() for a in args):
            args.append(sub)

    # -- checks (ACLSelectorCheckCmd) -----------------------------------------------------
    def check(self, cmd: Command, argv: list[bytes]) -> tuple[int, int]:
        """(0, 0) when allowed, else (DENIED_*, the argument's position)."""
        if not self.allcommands and not cmd.noauth and cmd.name not in self.allowed:
            args = self.firstargs.get(cmd.name)
            idx = 2 if _parent(cmd) else 1
            if not args or len(argv) < 2 or \
                    argv[idx].decode("latin-1").lower() not in (a.lower() for a in args):
                return DENIED_CMD, 0
        if not self.allkeys:
            for pos, flags in keys_with_flags(cmd, argv):
                need = 0
                if "access" in flags:
                    need |= READ
                if "insert" in flags or "delete" in flags or "update" in flags:
                    need |= WRITE
                key = argv[pos]
                for pattern, pflags in self.patterns:
                    if pflags & need == need and stringmatch(pattern, key):
                        break
                else:
                    return DENIED_KEY, pos
        spec = _CHANNEL_ARGS.get(cmd.name)
        if spec is not None and not self.allchannels:
            first, is_pattern, single = spec
            last = first + 1 if single else len(argv)
            for pos in range(first, min(last, len(argv))):
                ch = argv[pos]
                if not any((p == ch) if is_pattern else stringmatch(p, ch)
                           for p in self.channels):
                    return DENIED_CHANNEL, pos
        return 0, 0

    def unrestricted(self) -> bool:
        """Every command (all-commands flag, or every one allowed), key and channel."""
        return self.allkeys and self.allchannels and (
            self.allcommands or len(self.allowed) == len(all_commands()))

    # -- descriptions ---------------------------------------------------------------------
    def describe_keys(self) -> str:
        if self.allkeys:
            return "~*"
        return " ".join(_pattern_string(p, f) for p, f in self.patterns)

    def describe_channels(self) -> str:
        if self.allchannels:
            return "&*"
        return " ".join("&" + p.decode("latin-1") for p in self.channels)

    def describe(self) -> str:
        """ACLDescribeSelector: the keys, "resetchannels" then the channels (unless all of
        them), the command rules."""
        parts = (self.describe_keys(), "" if self.allchannels else "resetchannels",
                 self.describe_channels(), self.describe_commands())
        return " ".join(p for p in parts if p)

    def describe_commands(self) -> str:
        """ACLDescribeSelectorCommandRules: +@all or -@all, the categories that fit best, then
        single commands until the set is exactly the selector's."""
        additive = not self.future
        rules = ["-@all" if additive else "+@all"]
        fake = Selector()
        fake.apply(b"-@all" if additive else b"+@all")
        temp = Selector()
        temp.allowed = set(self.allowed)
        applied: set[str] = set()
        cmds = all_commands()
        while True:
            best = None
            mindiff, maxsame = 1 << 62, 0
            for cat in ACL_CATEGORIES:
                if cat in applied:
                    continue
                on = off = 0
                for c in cmds:
                    if cat in c.acl_categories:
                        if c.name in temp.allowed:
                            on += 1
                        else:
                            off += 1
                diff, same = (off, on) if additive else (on, off)
                if same > diff and (diff < mindiff or (diff == mindiff and same > maxsame)):
                    best, mindiff, maxsame = cat, diff, same
            if best is None:
                break
            fake.set_category(best, additive)
            temp.set_category(best, not additive)
            rules.append(("+@" if additive else "-@") + best)
            applied.add(best)
        for top in COMMANDS.values():
            for c in (top, *top.subcommands.values()):
                user = c.name in self.allowed
                if user != (c.name in fake.allowed):
                    rules.append(("+" if user else "-") + c.name)
                    fake.change(c, user)
                if not user:
                    rules.extend(f"+{c.name}|{a}" for a in self.firstargs.get(c.name, ()))
        return " ".join(rules)


def _pattern_string(pattern: bytes, flags: int) -> str:
    prefix = "~" if flags == ALL_PERM else "%R~" if flags == READ else "%W~"
    return prefix + pattern.decode("latin-1")


class User:
    __slots__ = ("name", "flags", "passwords", "selectors")

    def __init__(self, name: str, allchannels: bool = False) -> None:
        self.name = name
        self.flags = {"off"}
        self.passwords: list[str] = []
        self.selectors = [Selector(allchannels)]   # the root selector first

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    def copy(self) -> User:
        u = User(self.name)
        u.flags = set(self.flags)
        u.passwords = list(self.passwords)
        u.selectors = [s.copy() for s in self.selectors]
        return u

    def enabled(self) -> bool:
        return "on" in self.flags

    def unrestricted(self) -> bool:
        return self.root.unrestricted()

    def apply(self, op: bytes, pubsub_all: bool = False) -> None:
        """ACLSetUser: one rule (raises AclError)."""
        low = op.lower()
        flags = self.flags
        if not op:
            return
        if low in _EXCLUSIVE_FLAGS:          # on/off, (skip-)sanitize-payload: one of each pair
            name = low.decode()
            flags.discard(_EXCLUSIVE_FLAGS[low])
            flags.add(name)
        elif low == b"nopass":
            flags.add("nopass")
            self.passwords = []
        elif low == b"resetpass":
            flags.discard("nopass")
            self.passwords = []
        elif op[:1] in (b">", b"#"):
            if op[:1] == b">":
                h = hash_password(op[1:])
            else:
                h = _checked_hash(op[1:])
            if h not in self.passwords:
                self.passwords.append(h)
            flags.discard("nopass")
        elif op[:1] in (b"<", b"!"):
            h = hash_password(op[1:]) if op[:1] == b"<" else _checked_hash(op[1:])
            if h not in self.passwords:
                raise AclError(ERR_NODEV)
            self.passwords.remove(h)
        elif op[:1] == b"(" and op[-1:] == b")":
            s = Selector(pubsub_all)
            for part in op[1:-1].split():
                s.apply(part)
            self.selectors.append(s)
        elif low == b"clearselectors":
            del self.selectors[1:]
        elif low == b"reset":
            for rule in (b"resetpass", b"resetkeys", b"resetchannels"):
                self.apply(rule)
            if pubsub_all:
                self.apply(b"allchannels")
            for rule in (b"off", b"sanitize-payload", b"clearselectors", b"-@all"):
                self.apply(rule)
        else:
            self.root.apply(op)

    def key_allowed(self, key: bytes, need: int = READ) -> bool:
        """ACLUserCheckKeyPerm: does a selector grant ``need`` on ``key`` (the key itself,
        not a pattern: SORT asks it for ``*``, full key access)."""
        for s in self.selectors:
            if s.allkeys or any(pflags & need == need and stringmatch(pattern, key)
                                for pattern, pflags in s.patterns):
                return True
        return False

    def check(self, cmd: Command, argv: list[bytes]) -> tuple[int, int]:
        """ACLCheckAllUserCommandPerm: allowed by any selector, else the most relevant
        denial (the highest reason, then the furthest argument)."""
        error, last = DENIED_CMD, 0
        for s in self.selectors:
            reason, pos = s.check(cmd, argv)
            if not reason:
                return 0, 0
            if reason > error or (reason == error and pos > last):
                error, last = reason, pos
        return error, last

    def describe(self) -> str:
        """ACLDescribeUser (ACL LIST without "user <name> ")."""
        parts = [f for f in USER_FLAGS if f in self.flags]
        parts.extend("#" + p for p in self.passwords)
        parts.append(self.root.describe())
        out = " ".join(parts)
        for s in self.selectors[1:]:
            out += f" ({s.describe()})"
        return out


def default_user() -> User:
    """ACLCreateDefaultUser: every command, key and channel, no password."""
    u = User("default")
    for rule in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
        u.apply(rule)
    return u


def _checked_hash(h: bytes) -> str:
    if len(h) != 64 or any(ch not in b"0123456789abcdef" for ch in h):
        raise AclError(ERR_BADMSG)
    return h.decode()


def merge_selector_args(args: list[bytes]) -> list[bytes] | int:
    """ACLMergeSelectorArguments: "(a" "b)" -> "(a b)"; the index of an unclosed "(" ."""
    out: list[bytes] = []
    start = -1
    current = b""
    for j, op in enumerate(args):
        if op[:1] == b"(" and op[-1:] != b")" and start == -1:
            current, start = op, j
            continue
        if start != -1:
            current += b" " + op
            if op[-1:] == b")":
                out.append(current)
                start = -1
            continue
        out.append(op)
    return start if start != -1 else out


class LogEntry:
    __slots__ = ("count", "reason", "context", "object", "username", "ctime", "cinfo")

    def __init__(self, reason: int, context: str, obj: bytes, username: str, ctime: int,
                 cinfo: str) -> None:
        self.count = 1
        self.reason = reason
        self.context = context
        self.object = obj
        self.username = username
        self.ctime = ctime
        self.cinfo = cinfo


class Acl:
    """The server's users and ACL log."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.log: list[LogEntry] = []          # newest first
        self.users: dict[str, User] = {"default": default_user()}
        self._requirepass: str | None = None
        self.sync_default()

    @property
    def default(self) -> User:
        return self.users["default"]

    def pubsub_all(self) -> bool:
        return self.core.config.acl_pubsub_default == "allchannels"

    def sync_default(self) -> None:
        """requirepass is the default user's password (ACLUpdateDefaultUserPassword), applied
        when it changed since last seen."""
        required = self.core.config.requirepass or ""
        if required == self._requirepass:
            return
        self._requirepass = required
        d = self.default
        d.apply(b"resetpass")
        d.apply(b">" + required.encode() if required else b"nopass")

    # -- clients --------------------------------------------------------------------------
    def attach(self, c: Client) -> None:
        """A new connection: the default user (authenticated when it needs no password)."""
        self.sync_default()
        d = self.default
        self._set_user(c, d)
        c.set_authenticated("nopass" in d.flags and d.enabled())

    @staticmethod
    def _set_user(c: Client, user: User) -> None:
        """``c`` runs as ``user`` from now on."""
        c.acl_user = user
        c.user = user.name
        c.restricted = not user.unrestricted()

    def refresh(self, user: User) -> None:
        """A user changed: its clients' ``restricted`` flag."""
        restricted = not user.unrestricted()
        for c in self.core.clients.values():
            if c.acl_user is user or (c.acl_user is None and user.name == "default"):
                c.acl_user = user
                c.restricted = restricted

    def authenticate(self, c: Client, username: bytes, password: bytes,
                     argv0: bytes = b"auth") -> bool:
        """ACLAuthenticateUser: on success the client is that user; a failure is logged."""
        self.sync_default()
        u = self.users.get(username.decode("latin-1"))
        ok = u is not None and u.enabled() and (
            "nopass" in u.flags or hash_password(password) in u.passwords)
        if ok:
            assert u is not None
            c.set_authenticated(True)
            self._set_user(c, u)
            return True
        c.last_cmd = COMMANDS.get(argv0.lower(), c.last_cmd)
        self.add_log(c, DENIED_AUTH, argv0, username.decode("latin-1"))
        return False

    # -- the permission checks ------------------------------------------------------------
    @staticmethod
    def _check(c: Client, cmd: Command, argv: list[bytes]) -> tuple[int, int]:
        """``c``'s user's check: (0, 0) when allowed, else (DENIED_*, the argument's position).
        Our master's link has no user."""
        user = c.acl_user
        if user is None or c.kind == "master":
            return 0, 0
        return user.check(cmd, argv)

    def _log_denial(self, c: Client, cmd: Command, argv: list[bytes], reason: int, pos: int,
                    context: str | None) -> None:
        obj = cmd.name.encode() if reason == DENIED_CMD else argv[pos]
        self.add_log(c, reason, obj, c.acl_user.name, context)

    def refusal(self, c: Client, cmd: Command, argv: list[bytes], context: str) -> int:
        """ACLCheckAllPerm, and on a denial addACLLogEntry under ``context`` ("toplevel",
        "multi", "lua"): 0 when ``c``'s user may run the command, else the DENIED_* reason."""
        reason, pos = self._check(c, cmd, argv)
        if reason:
            self._log_denial(c, cmd, argv, reason, pos, context)
        return reason

    def denied(self, c: Client, cmd: Command, argv: list[bytes]) -> bool:
        """Redis's ACLCheckAllPerm in processCommand (also at MULTI's queueing time): False
        when allowed; otherwise the ACL log entry, the -NOPERM refusal, and True."""
        reason, pos = self._check(c, cmd, argv)
        if not reason:
            return False
        c.last_cmd = cmd        # (processCommand sets lastcmd before the check: client-info)
        self._log_denial(c, cmd, argv, reason, pos, None)   # ("toplevel", or "multi" queueing)
        self.core.reject(c, NOPERM[reason] % cmd.name if reason == DENIED_CMD
                          else NOPERM[reason], cmd)
        return True

    def script_refusal(self, caller: Client, cmd: Command, argv: list[bytes]) -> str | None:
        """scriptVerifyACL: a redis.call / redis.pcall of a script run by ``caller`` is checked
        against the caller's user and logged with the "lua" context; the error text, or None."""
        reason = self.refusal(caller, cmd, argv, "lua")
        return "The user executing the script " + SCRIPT_REASONS[reason] if reason else None

    def exec_refusal(self, c: Client, cmd: Command, argv: list[bytes]) -> str | None:
        """execCommand: a queued command is checked again when EXEC runs it (the rules may
        have changed since it was queued), logged with the "multi" context; the error, or
        None."""
        reason = self.refusal(c, cmd, argv, "multi")
        if not reason:
            return None
        return ("NOPERM ACLs rules changed between the moment the transaction was accumulated "
                "and the EXEC call. This command is no longer allowed for the following "
                "reason: " + EXEC_REASONS[reason])

    def add_log(self, c: Client, reason: int, obj: bytes, username: str,
                context: str | None = None) -> None:
        """addACLLogEntry: an equal entry among the 10 newest within 60 s is counted again
        and moved to the front."""
        now = self.core.now_ms
        if context is None:
            context = "multi" if c.in_multi else "toplevel"
        cinfo = c.info_line()
        for i, e in enumerate(self.log[:10]):
            if e.reason == reason and e.context == context and abs(now - e.ctime) <= 60000 \
                    and e.object == obj and e.username == username:
                e.count += 1
                e.ctime = now
                e.cinfo = cinfo
                self.log.insert(0, self.log.pop(i))
                return
        self.log.insert(0, LogEntry(reason, context, obj, username, now, cinfo))
        del self.log[self.core.config.acllog_max_len:]

    # -- ACL SETUSER / DELUSER ------------------------------------------------------------
    def setuser(self, name: str, rules: list[bytes]) -> str | None:
        """ACLStringSetUser: all rules apply to a copy, kept only when every one is valid;
        the error text, or None."""
        self.sync_default()
        merged = merge_selector_args(rules)
        if isinstance(merged, int):
            return (f"Unmatched parenthesis in acl selector starting at "
                    f"'{rules[merged].decode('latin-1')}'.")
        existing = self.users.get(name)
        pubsub_all = self.pubsub_all()
        temp = existing.copy() if existing is not None else User(name, pubsub_all)
        for op in merged:
            try:
                temp.apply(op, pubsub_all)
            except AclError as e:
                return f"Error in ACL SETUSER modifier '{op.decode('latin-1')}': {e}"
        if existing is None:
            self.users[name] = temp
        else:
            self._kill_pubsub_clients(temp, existing)
            existing.flags, existing.passwords = temp.flags, temp.passwords
            existing.selectors = temp.selectors
            self.refresh(existing)
        return None

    def _kill_pubsub_clients(self, new: User, original: User) -> None:
        """ACLKillPubsubClientsIfNeeded: when the user loses channels, its subscribers to a
        channel (or pattern, compared literally) no longer allowed are disconnected."""
        if any(s.allchannels for s in new.selectors):
            return
        upcoming = [p for s in new.selectors for p in s.channels]
        if not any(s.allchannels for s in original.selectors) and all(
                p in upcoming for s in original.selectors for p in s.channels):
            return
        for cl in list(self.core.clients.values()):
            subs = cl.subs
            if cl.acl_user is not original or subs is None:
                continue
            if any(p not in upcoming for p in subs.patterns) or any(
                    not any(stringmatch(p, ch) for p in upcoming)
                    for ch in (*subs.channels, *subs.shard)):
                self.core.host.close_client(cl)

    def deluser(self, names: list[str], me: Client) -> int:
        """ACL DELUSER: the users' clients are disconnected (this one after its reply)."""
        deleted = 0
        for name in names:
            u = self.users.pop(name, None)
            if u is not None:
                deleted += 1
                self._disconnect_clients(u, me)
        return deleted

    def _disconnect_clients(self, u: User, me: Client | None) -> None:
        """ACLFreeUserAndKillClients: the user's clients go back to an unauthenticated
        default user and are closed (``me``, the client running the command, after its
        reply)."""
        cl: Client
        for cl in list(self.core.clients.values()):
            if cl.acl_user is u:
                cl.acl_user = self.default
                cl.user = "default"
                cl.set_authenticated(False)
                if cl is me:
                    cl.close_after_reply = True
                else:
                    self.core.host.close_client(cl)

    def replace_users(self, users: dict[str, User], me: Client | None) -> None:
        """ACL LOAD's swap (ACLLoadFromFile): ``users`` become the registry. The default
        user's record stays the one its clients hold, with the new rules copied in (or
        every permission when ``users`` has no default); every other old user is dropped with
        its clients, whether or not the new set has a user of that name."""
        new_default = users.pop("default", None)
        if new_default is None:
            new_default = default_user()
        d = self.default
        d.flags, d.passwords = new_default.flags, new_default.passwords
        d.selectors = new_default.selectors
        old, self.users = self.users, {"default": d, **users}
        for name, u in old.items():
            if name != "default":
                self._disconnect_clients(u, me)
        self.refresh(d)

    def sorted_users(self) -> list[User]:
        """The users in the rax's order (bytewise)."""
        return [self.users[k] for k in sorted(self.users, key=lambda n: n.encode("latin-1"))]


def acl_of(core: Any) -> Acl:
    """The core's ACL registry, made on first use (which attaches the existing clients)."""
    acl = core.__dict__.get("acl")
    if acl is None:
        acl = core.acl = Acl(core)
        acl.refresh(acl.default)
    return acl


def genpass(bits: int) -> str:
    chars = (bits + 3) // 4
    return secrets.token_hex((chars + 1) // 2)[:chars]
