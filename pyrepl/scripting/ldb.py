"""The Lua debugger (Redis's LDB: ``SCRIPT DEBUG YES|SYNC|NO``, what ``redis-cli --ldb`` talks
to): the session's state, its log, the commands that need no Lua stack, and the wire.

Theory of operation, as Redis's eval.c: a client that asked for ``SCRIPT DEBUG`` runs its next
EVAL as a session. In SYNC mode the server itself runs it and serves no one else meanwhile; in
YES mode a forked child runs it on its copy of the dataset (nothing it writes reaches the
server) while the server closes the client on its side. Either way the script runs under a
line hook (the sandbox's ``ldb_hook``) that asks :meth:`Ldb.line` whether to stop: on a step,
a breakpoint, ``redis.breakpoint()`` or a script running past the busy threshold. At a stop
the log is sent to the client as an array of simple strings, and commands are read from its
socket directly (blocking, through the host's :class:`LdbChannelPort`) until one resumes the
script. The commands that need the Lua stack (print, eval, trace, redis) are the sandbox's; the
rest (help, list, whole, break, maxlen, step, continue) are here. When the script ends the log
gets ``<endsession>``, EVAL's reply follows, and the connection is closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pyrepl.config import repr_arg as repr_bytes  # (sdscatrepr)

#: LDB_MAX_LEN_DEFAULT and LDB_BREAKPOINTS_MAX
MAX_LEN_DEFAULT = 256
BREAKPOINTS_MAX = 64
#: ldbRepl's query buffer limit
MAX_CBUF = 1 << 20

TIMEOUT_REASON = "timeout reached, infinite loop?"

HELP = (
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
)

#: ldbRepl's command names: the actions done here, or the sandbox's
_ACTIONS = {b"h": "help", b"help": "help", b"s": "step", b"step": "step", b"n": "step",
            b"next": "step", b"c": "continue", b"continue": "continue", b"t": "trace",
            b"trace": "trace", b"m": "maxlen", b"maxlen": "maxlen", b"b": "break",
            b"break": "break", b"e": "eval", b"eval": "eval", b"a": "abort",
            b"abort": "abort", b"r": "redis", b"redis": "redis", b"p": "print",
            b"print": "print", b"l": "list", b"list": "list", b"w": "whole", b"whole": "whole"}


class LdbChannelPort(Protocol):
    """The debugging client's socket, used directly while the script runs (the host's)."""

    def read(self) -> bytes:
        """Up to 1024 bytes, waiting for them; b"" when the connection is gone."""

    def write(self, data: bytes) -> None:
        """All of ``data`` (within a 5 s send timeout; errors are ignored: the next read
        sees them)."""

    def close(self) -> None:
        """Give the socket back to the server (it stays open)."""


def protocol_to_human(reply: bytes) -> str:
    """ldbRedisProtocolToHuman: a RESP reply as the debugger shows it."""
    out: list[str] = []
    _human(reply, 0, out)
    return "".join(out)


def _human(r: bytes, p: int, out: list[str]) -> int:
    end = r.index(b"\r", p + 1)
    kind, line = r[p:p + 1], r[p + 1:end]
    nxt = end + 2
    if kind == b":":
        out.append(line.decode("latin-1"))
        return nxt
    if kind == b"$":
        n = int(line)
        if n == -1:
            out.append("NULL")
            return nxt
        out.append(repr_bytes(r[nxt:nxt + n]))
        return nxt + n + 2
    if kind in (b"+", b"-"):
        out.append(repr_bytes(r[p:end]))
        return nxt
    if kind in (b"*", b"~", b"%"):
        n = int(line)
        if kind == b"*" and n == -1:
            out.append("NULL")
            return nxt
        out.append({b"*": "[", b"~": "~(", b"%": "{"}[kind])
        for j in range(n):
            nxt = _human(r, nxt, out)
            if kind == b"%":
                out.append(" => ")
                nxt = _human(r, nxt, out)
            if j != n - 1:
                out.append(",")
        out.append({b"*": "]", b"~": ")", b"%": "}"}[kind])
        return nxt
    if kind == b"_":
        out.append("(null)")
    elif kind == b"#":
        out.append("#true" if line == b"t" else "#false")
    elif kind == b",":
        out.append("(double) " + line.decode("latin-1"))
    return nxt


def parse_command(buf: bytes) -> tuple[list[bytes] | None, bool]:
    """ldbReplParseCommand: (argv, False) for a whole command, (None, False) to read more,
    (None, True) for a protocol error. As forgiving as Redis's: anything before the first
    ``*`` is skipped; 1 to 1024 arguments of 1 to 1024 bytes each."""
    if not buf:
        return None, False
    p = buf.find(b"*")
    if p < 0:
        return None, True
    end = buf.find(b"\r\n", p)
    if end < 0:
        return None, False
    argc = _atoi(buf[p + 1:end])
    if argc <= 0 or argc > 1024:
        return None, True
    p = end + 2
    argv: list[bytes] = []
    while len(argv) < argc:
        if p >= len(buf):
            return None, False
        if buf[p:p + 1] != b"$":
            return None, True
        end = buf.find(b"\r\n", p)
        if end < 0:
            return None, False
        n = _atoi(buf[p + 1:end])
        if n <= 0 or n > 1024:
            return None, True
        p = end + 2
        if p + n + 2 > len(buf):
            return None, False
        argv.append(buf[p:p + n])
        p += n
        if buf[p:p + 2] != b"\r\n":
            return None, True
        p += 2
    return argv, False


def _atoi(s: bytes) -> int:
    """C's atoi: the leading digits (after an optional sign), 0 when none."""
    s = s.lstrip()
    sign = -1 if s[:1] == b"-" else 1
    if s[:1] in (b"-", b"+"):
        s = s[1:]
    n = 0
    for b in s:
        if not 48 <= b <= 57:
            break
        n = n * 10 + b - 48
    return sign * n


def _strict_long(s: bytes) -> int | None:
    """string2l: a canonical decimal integer, or None."""
    if not s or len(s) > 20:
        return None
    body = s[1:] if s[:1] == b"-" else s
    if not body.isdigit() or not body.isascii() or (body[:1] == b"0" and body != b"0") or \
            (s[:1] == b"-" and body == b"0"):
        return None
    return int(s)


def c_str(arg: bytes) -> bytes:
    """What C's string functions see of an argument: up to its first NUL."""
    i = arg.find(b"\0")
    return arg if i < 0 else arg[:i]


class Ldb:
    """One debugging session (Redis keeps one: ``ldb``)."""

    def __init__(self, channel: LdbChannelPort, source: bytes, forked: bool) -> None:
        self.channel = channel
        self.forked = forked
        self.logs: list[str] = []
        self.step = True               # ldbEnable: stop at the first line
        self.luabp = False             # redis.breakpoint() was called
        self.bps: list[int] = []
        self.maxlen = MAX_LEN_DEFAULT
        self.maxlen_hint_sent = False
        self.cbuf = b""
        self.currentline = -1
        #: the engine's: whether the script ran past busy-reply-threshold since it last went on
        self.over_time: Callable[[], bool] = lambda: False
        src = source.rstrip(b"\r\n")
        self.lines = src.split(b"\n") if src else []

    # -- the log ----------------------------------------------------------------------------
    def log(self, entry: str) -> None:
        self.logs.append(entry)

    def log_maxlen(self, entry: str) -> None:
        """ldbLogWithMaxLen: cut at ``maxlen`` bytes, with a hint the first time."""
        trimmed = False
        raw = entry.encode("utf-8", "surrogateescape")
        if self.maxlen and len(raw) > self.maxlen:
            entry = raw[:self.maxlen].decode("utf-8", "surrogateescape") + " ..."
            trimmed = True
        self.log(entry)
        if trimmed and not self.maxlen_hint_sent:
            self.maxlen_hint_sent = True
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.")

    def send(self) -> None:
        """ldbSendLogs: the log as an array of simple strings (CR and LF made spaces)."""
        parts = [b"*%d\r\n" % len(self.logs)]
        for entry in self.logs:
            raw = entry.encode("utf-8", "surrogateescape")
            parts.append(b"+" + raw.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n")
        self.logs = []
        self.channel.write(b"".join(parts))

    def log_reply(self, reply: bytes) -> None:
        self.log_maxlen("<reply> " + protocol_to_human(reply))

    def log_call(self, argv: list[bytes]) -> None:
        """luaRedisGenericCommand's ``<redis>`` line (ten arguments at most)."""
        parts = ["<redis>"]
        for j, a in enumerate(argv):
            if j == 10:
                parts.append(f" ... ({len(argv) - j - 1} more)")
                break
            parts.append(" " + c_str(a).decode("utf-8", "surrogateescape"))
        self.log("".join(parts))

    # -- the source -------------------------------------------------------------------------
    def source_line(self, line: int) -> str:
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1].decode("utf-8", "surrogateescape")
        return "<out of range source code line>"

    def log_source_line(self, line: int) -> None:
        bp = line in self.bps
        current = self.currentline == line
        prefix = "->#" if current and bp else "-> " if current else "  #" if bp else "   "
        self.log(f"{prefix}{line:<3d} {self.source_line(line)}")

    def list(self, around: int, context: int) -> None:
        for j in range(1, len(self.lines) + 1):
            if around != 0 and abs(around - j) > context:
                continue
            self.log_source_line(j)

    # -- the hook ---------------------------------------------------------------------------
    def line(self, line: int, count_event: bool) -> str | None:
        """luaLdbLineHook on a line of the script, or on its count event (a stop there only
        when the script ran past the limit): the stop reason, after sending where it
        stopped; None to go on."""
        self.currentline = line
        bp = line in self.bps or self.luabp
        timeout = False
        if count_event and not self.step and not bp:
            if not self.over_time():
                return None
            timeout = self.step = True
        if not (self.step or bp):
            return None
        if bp:
            reason = "redis.breakpoint() called" if self.luabp else "break point"
        elif timeout:
            reason = TIMEOUT_REASON
        else:
            reason = "step over"
        self.step = False
        self.luabp = False
        self.log(f"* Stopped at {line}, stop reason = {reason}")
        self.log_source_line(line)
        self.send()
        return reason

    def read(self) -> tuple[Any, ...]:
        """The next command: ("cmd", arg...), ("lost",) when the client is gone (the script
        then runs to its end without stopping), or ("err", message)."""
        while True:
            argv, bad = parse_command(self.cbuf)
            if bad:
                return ("err", b"protocol error")
            if argv is not None:
                self.cbuf = b""
                return ("cmd", *argv)
            data = self.channel.read()
            if not data:
                self.step = False
                self.bps = []
                return ("lost",)
            self.cbuf += data
            if len(self.cbuf) > MAX_CBUF:
                self.cbuf = b""
                return ("err", b"max client buffer reached")

    def command(self, *argv: bytes) -> str:
        """ldbRepl's dispatch: a command that needs no Lua stack is done (its log sent) and
        "done" returned; otherwise the action the sandbox takes ("step", "continue",
        "trace", "eval", "abort", "redis", "print")."""
        action = _ACTIONS.get(c_str(argv[0]).lower(), "")
        if action == "redis" and len(argv) < 2:
            action = ""
        if action == "step":
            self.step = True
            return "step"
        if action in ("continue", "trace", "eval", "abort", "redis", "print"):
            return action
        if action == "help":
            for h in HELP:
                self.log(h)
        elif action == "maxlen":
            self._maxlen(argv)
        elif action == "break":
            self._break(argv)
        elif action == "list":
            around, ctx = self.currentline, 5
            if len(argv) > 1:
                num = _atoi(c_str(argv[1]))
                if num > 0:
                    around = num
            if len(argv) > 2:
                ctx = _atoi(c_str(argv[2]))
            self.list(around, ctx)
        elif action == "whole":
            self.list(1, 1000000)
        else:
            self.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.")
        self.send()
        return "done"

    def _maxlen(self, argv: tuple[bytes, ...]) -> None:
        if len(argv) == 2:
            val = _atoi(c_str(argv[1]))
            self.maxlen_hint_sent = True
            if val != 0 and val <= 60:
                val = 60
            self.maxlen = val
        if self.maxlen:
            self.log(f"<value> replies are truncated at {self.maxlen} bytes.")
        else:
            self.log("<value> replies are unlimited.")

    def _break(self, argv: tuple[bytes, ...]) -> None:
        if len(argv) == 1:
            if not self.bps:
                self.log("No breakpoints set. Use 'b <line>' to add one.")
                return
            self.log(f"{len(self.bps)} breakpoints set:")
            for line in self.bps:
                self.log_source_line(line)
            return
        for arg in argv[1:]:
            text = c_str(arg)
            num = _strict_long(text)
            if num is None:
                self.log(f"Invalid argument:'{text.decode('utf-8', 'surrogateescape')}'")
                continue
            line = num
            if line == 0:
                self.bps = []
                self.log("All breakpoints removed.")
            elif line > 0:
                if len(self.bps) == BREAKPOINTS_MAX:
                    self.log("Too many breakpoints set.")
                elif line <= len(self.lines) and line not in self.bps:
                    self.bps.append(line)
                    self.list(line, 1)
                else:
                    self.log("Wrong line number.")
            elif -line in self.bps:
                self.bps.remove(-line)
                self.log("Breakpoint removed.")
            else:
                self.log("No breakpoint in the specified line.")

    def end(self) -> None:
        """ldbEndSession's log: ``<endsession>``, sent."""
        self.log("<endsession>")
        self.send()
