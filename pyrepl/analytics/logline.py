"""Redis and Valkey log lines: their formats and timestamps, and telling a log file by its
first lines (pure Python; shared by ``redislog`` and ``logread``).

Theory of operation: Redis writes ``pid:R DD Mon YYYY HH:MM:SS.mmm L message`` (R the role
letter: M master, S replica, C child, X sentinel; L the level mark ``.-*#``), in local time;
Valkey 8+ can also write ISO 8601 or millisecond timestamps, and ``logfmt`` lines
(``pid=.. role=.. timestamp=".." level=.. message=".."``). :func:`split_line` gives (pid, role
letter, unix seconds, message) for any of them, or None.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Iterable

REDIS, VALKEY = "redis-log", "valkey-log"
MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug",
                                      "Sep", "Oct", "Nov", "Dec"), 1)}
# the legacy timestamp: 23 Nov 2026 03:57:12.111
_TS = r"(\d{1,2}) ([A-Z][a-z]{2}) (\d{4}) (\d\d):(\d\d):(\d\d)\.(\d{3})"
_LEGACY = re.compile(r"(\d+):([A-Z]) " + _TS + r" [.\-*#] (.*)")
_LEGACY_TS = re.compile(_TS)
_ISO = re.compile(r"(\d+):([A-Z]) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(?:Z|[+-]\d\d:?\d\d)?)"
                  r" [.\-*#] (.*)")
_MILLIS = re.compile(r"(\d+):([A-Z]) (\d{13}) [.\-*#] (.*)")
_LOGFMT = re.compile(r'pid=(\d+) role=(\S+) timestamp="([^"]*)" level=\w+ message="(.*)"')
_SIGNAL = re.compile(r"\d+:signal-handler \(\d+\) ")
_LOGO = re.compile(r"\s|[_.\-`'|(]")
_LOGFMT_ROLES = {"primary": "M", "replica": "S", "RDB/AOF": "C", "sentinel": "X"}


def parse_ts(text: str, tz: dt.tzinfo) -> float | None:
    """A legacy "23 Nov 2026 03:57:12.111" (local time in ``tz``) as unix seconds."""
    m = _LEGACY_TS.fullmatch(text)
    return None if m is None else _legacy_ts(m.groups(), tz)


def _legacy_ts(g: tuple[str, ...], tz: dt.tzinfo) -> float | None:
    d, mon, y, hh, mm, ss, ms = g
    if mon not in MONTHS:
        return None
    parts = (int(y), MONTHS[mon], int(d), int(hh), int(mm), int(ss))
    try:
        off = dt.datetime(*parts).replace(tzinfo=tz).utcoffset() if tz is not dt.UTC else None
    except ValueError:
        return None
    secs = calendar.timegm(parts) - (off.total_seconds() if off else 0)
    return round(secs + int(ms) / 1000.0, 3)


def _iso_ts(text: str, tz: dt.tzinfo) -> float | None:
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return round((t if t.tzinfo else t.replace(tzinfo=tz)).timestamp(), 3)


def split_line(line: str, tz: dt.tzinfo) -> tuple[str, str, float, str] | None:
    """(pid, role letter, ts, message) of a log line, or None."""
    m = _LEGACY.fullmatch(line)
    if m is not None:
        ts = _legacy_ts(m.groups()[2:9], tz)
        return None if ts is None else (m.group(1), m.group(2), ts, m.group(10))
    m = _MILLIS.fullmatch(line)
    if m is not None:
        return m.group(1), m.group(2), int(m.group(3)) / 1000.0, m.group(4)
    m = _ISO.fullmatch(line)
    if m is not None:
        ts = _iso_ts(m.group(3), tz)
        return None if ts is None else (m.group(1), m.group(2), ts, m.group(4))
    m = _LOGFMT.fullmatch(line)
    if m is not None:
        ts3 = m.group(3)
        ts = int(ts3) / 1000.0 if ts3.isdigit() else (
            _iso_ts(ts3, tz) if "T" in ts3 else parse_ts(ts3, tz))
        if ts is None:
            return None
        msg = m.group(4).replace('\\"', '"')
        return m.group(1), _LOGFMT_ROLES.get(m.group(2), "M"), ts, msg
    return None


def sniff(lines: Iterable[str]) -> str | None:
    """The kind of a file from its first lines: REDIS or VALKEY when most non-blank lines are
    Redis/Valkey log lines, else None (NDJSON or anything else)."""
    n = hits = 0
    valkey = False
    for line in lines:
        s = line.strip()
        if not s:
            continue
        n += 1
        if s.startswith("{"):
            return None
        if _LOGO.match(line) and not _LEGACY.match(s):
            n -= 1                        # the ASCII-art logo: neither for nor against
            continue
        if split_line(s, dt.UTC) is not None or _SIGNAL.match(s):
            hits += 1
            valkey = valkey or "Valkey" in s or "PRIMARY" in s or "primary" in s
    if n == 0 or hits * 2 < n:
        return None
    return VALKEY if valkey else REDIS
