"""The slow log (Redis's slowlog.c) and the argument redaction it shares with MONITOR.

Theory of operation: ``ServerCore.call`` times a command (always when it is not flagged
``fast``, or when ``slowlog-log-slower-than`` is 0; one call in 16 otherwise: a fast command
does not reach Redis's 10 ms default) and hands the duration to :meth:`SlowLog.push`, which
keeps an entry when it reaches ``slowlog-log-slower-than`` microseconds (negative: off),
newest first, at most ``slowlog-max-len``. An entry holds Redis's six fields: id, unix time,
microseconds, the arguments (at most 32, the last then saying how many more; each at most 128
bytes, then how many more), the client's address and name. Passwords never reach it:
:func:`loggable_argv` redacts what Redis's redactClientCommandArgument does (AUTH, HELLO ...
AUTH, CONFIG SET of a sensitive directive, ACL SETUSER), for MONITOR too.
"""

from __future__ import annotations

from collections import deque
from typing import Any

MAX_ARGC = 32          # SLOWLOG_ENTRY_MAX_ARGC
MAX_STRING = 128       # SLOWLOG_ENTRY_MAX_STRING
REDACTED = b"(redacted)"
SENSITIVE_CONFIGS = frozenset((b"requirepass", b"masterauth", b"masteruser"))


def loggable_argv(name: str, argv: list[bytes]) -> list[bytes]:
    """``argv`` as logs may show it (the secrets Redis redacts replaced by ``(redacted)``)."""
    hide: list[int] = []
    if name == "auth":
        hide = [1, 2] if len(argv) == 3 else [1]
    elif name == "hello":
        j = 2
        while j < len(argv):
            opt = argv[j].lower()
            if opt == b"auth" and len(argv) - 1 - j >= 2:
                hide += [j + 1, j + 2]
                j += 3
            elif opt == b"setname" and len(argv) - 1 - j >= 1:
                j += 2
            else:
                break
    elif name == "config|set":
        hide = [i + 1 for i in range(2, len(argv) - 1, 2)
                if argv[i].lower() in SENSITIVE_CONFIGS]
    elif name == "acl|setuser":
        hide = list(range(2, len(argv)))
    elif name == "migrate":
        for i, a in enumerate(argv):
            low = a.lower()
            if low == b"auth" and i + 1 < len(argv):
                hide.append(i + 1)
            elif low == b"auth2" and i + 2 < len(argv):
                hide += [i + 1, i + 2]
    if not hide:
        return argv
    out = list(argv)
    for i in hide:
        if i < len(out):
            out[i] = REDACTED
    return out


class Entry:
    __slots__ = ("id", "time", "duration", "argv", "peer", "name")

    def __init__(self, eid: int, time: int, duration: int, argv: list[bytes], peer: str,
                 name: bytes) -> None:
        self.id, self.time, self.duration = eid, time, duration
        self.argv, self.peer, self.name = argv, peer, name

    def reply(self) -> list[object]:
        return [self.id, self.time, self.duration, self.argv, self.peer.encode(), self.name]


def _trimmed(argv: list[bytes]) -> list[bytes]:
    n = len(argv)
    keep = min(n, MAX_ARGC)
    out = []
    for j in range(keep):
        if keep != n and j == keep - 1:
            out.append(b"... (%d more arguments)" % (n - keep + 1))
        else:
            a = argv[j]
            if len(a) > MAX_STRING:
                a = a[:MAX_STRING] + b"... (%d more bytes)" % (len(a) - MAX_STRING)
            out.append(a)
    return out


class SlowLog:
    def __init__(self) -> None:
        self.entries: deque[Entry] = deque()
        self.next_id = 0

    def push(self, c: Any, name: str, argv: list[bytes], duration_us: int, slower_than: int,
             max_len: int, now_s: int) -> None:
        """slowlogPushEntryIfNeeded."""
        if slower_than < 0:
            return
        if duration_us >= slower_than:
            self.entries.appendleft(Entry(self.next_id, now_s, duration_us,
                                          _trimmed(loggable_argv(name, argv)), c.addr, c.name))
            self.next_id += 1
        while len(self.entries) > max_len:
            self.entries.pop()

    def get(self, count: int) -> list[object]:
        entries = self.entries if count < 0 else list(self.entries)[:count]
        return [e.reply() for e in entries]

    def reset(self) -> None:
        self.entries.clear()
