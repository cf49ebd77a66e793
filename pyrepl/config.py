"""redis.conf-syntax configuration: parser, typed values, and the CONFIG GET / CONFIG SET table.

Theory of operation
-------------------
``DIRECTIVES`` is the one table of what pyrepl understands: each :class:`Directive` carries its
Redis 7 name, its aliases (``slaveof``, ``slave-read-only`` ...), its kind, its default written in
redis.conf syntax, its bounds and its flags (mutable by CONFIG SET or not, protected, hidden from
CONFIG GET globs, sensitive, refused while loading). Every value, default or not, enters through
the same parser, so a default can never bypass validation.

A :class:`Config` holds one typed value per directive as a plain instance attribute named after
the directive with dashes turned into underscores (``cfg.repl_backlog_size``): hot paths pay one
attribute lookup and nothing else. Attributes are read-only from outside; the only ways to change
a value are the loader (file + command-line overrides) and :meth:`Config.set` /
:meth:`Config.set_many`, which follow Redis's CONFIG SET rules: unknown and immutable names are
refused, every value is validated before any is stored, the change is all-or-nothing, and the
``on_change`` callbacks (the server's "apply" step: resize the backlog, rebind ...) run after the
new values are in place. A callback that raises :class:`ConfigError` rolls the whole change back.

File syntax is Redis's ``loadServerConfigFromString``: lines split on ``\\n`` and trimmed, ``#``
comment lines, arguments split like ``sdssplitargs`` (``"..."`` with ``\\n \\r \\t \\b \\a \\xNN``
escapes, ``'...'`` with ``\\'``), case-insensitive directive names, memory units (``1k`` = 1000,
``1kb`` = 1024, ``m``/``mb``/``g``/``gb``, any case), yes/no booleans, ``include`` (tried relative to
the working directory like Redis, then relative to the including file; wildcards allowed), ``save``
lines accumulating (the first one replaces the default schedule, ``save ""`` clears it), and the
"multi-argument" directives (``save``, ``bind``, ``client-output-buffer-limit``, ``replicaof``)
accepting their arguments as one quoted string (``--save "3600 1"``). Error texts are Redis's.

Values that differ from Redis on purpose: ``dir`` is stored as an absolute path resolved against
the previous ``dir`` (Redis ``chdir``s; pyrepl never changes the process's working directory, and
the server creates the directory at start-up, so loading does not require it to exist);
``daemonize`` and ``appendonly`` only accept ``no``.

This module touches the filesystem only to read configuration files and to check a ``dir`` given
to CONFIG SET; it never opens sockets or reads clocks.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from pyrepl.keyspace.glob import stringmatch as _glob_match

__all__ = [
    "DIRECTIVES",
    "Config",
    "ConfigError",
    "Directive",
    "lookup",
    "parse_memory",
    "repr_arg",
    "split_args",
    "stringmatch",
]

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
UINT_MAX = 2**32 - 1
LLONG_MIN = -(2**63)
LLONG_MAX = 2**63 - 1
ULLONG_MAX = 2**64 - 1

#: Redis's CONFIG_REPL_BACKLOG_MIN_SIZE: CONFIG SET repl-backlog-size never goes below it.
REPL_BACKLOG_MIN_SIZE = 16 * 1024
#: Redis's CONFIG_MIN_HZ / CONFIG_MAX_HZ: ``hz`` is a hint, clamped into this range.
MIN_HZ, MAX_HZ = 1, 500
#: Redis's CONFIG_BINDADDR_MAX.
BINDADDR_MAX = 16
#: Client classes of client-output-buffer-limit, in CONFIG GET order, with their wire names.
OBUF_CLASSES = ("normal", "replica", "pubsub")
_OBUF_WIRE_NAMES = {"normal": "normal", "replica": "slave", "pubsub": "pubsub"}
_OBUF_CLASS_BY_NAME = {"normal": "normal", "slave": "replica", "replica": "replica",
                       "pubsub": "pubsub", "master": "master"}
_MAX_INCLUDE_DEPTH = 32


class ConfigError(Exception):
    """A configuration error. ``str(e)`` is the full message:

    * loading: ``"<file>:<line>: <reason>"`` (or ``"command line: --name ...: <reason>"``);
    * CONFIG SET: Redis's reply text without the leading ``-``, e.g.
      ``"ERR CONFIG SET failed (possibly related to argument 'port') - argument couldn't be
      parsed into an integer"``.

    ``reason`` is the bare Redis reason (``"argument must be 'yes' or 'no'"``); ``path``,
    ``lineno`` and ``line`` locate a loading error; ``name`` is the directive involved, if any.
    An ``on_change`` callback raises ``ConfigError(reason)`` to veto a CONFIG SET.
    """

    def __init__(self, message: str, *, reason: str | None = None, path: str | None = None,
                 lineno: int | None = None, line: str | None = None,
                 name: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason
        self.path = path
        self.lineno = lineno
        self.line = line
        self.name = name


class _Invalid(Exception):
    """A value was refused; ``args[0]`` is Redis's reason text."""


# ---------------------------------------------------------------------------------------------
# Lexical helpers shared with the rest of pyrepl (argument splitting, memory units, globbing)
# ---------------------------------------------------------------------------------------------

_ISSPACE = " \t\n\v\f\r"          # C isspace(): what separates tokens and may follow a quote
_TOKEN_END = (" ", "\n", "\r", "\t", "")
_HEXDIGITS = "0123456789abcdefABCDEF"
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}


def split_args(line: str) -> list[str] | None:
    """Split ``line`` into arguments like Redis's ``sdssplitargs``; ``None`` on bad quoting.

    Quoted and unquoted parts touching each other form one argument (``a"b c"`` -> ``ab c``);
    a closing quote must be followed by whitespace or the end of the line. ``\\xNN`` with
    ``NN >= 0x80`` yields the surrogate-escaped byte, so ``value.encode("utf-8",
    "surrogateescape")`` gives back exactly the bytes Redis would hold.
    """
    out: list[str] = []
    n = len(line)
    i = 0
    while True:
        while i < n and line[i] in _ISSPACE:
            i += 1
        if i >= n:
            return out
        cur: list[str] = []
        quote = ""  # the quote we are inside ('"' or "'"), or ""
        while True:
            c = line[i] if i < n else ""
            if quote:
                if (quote == '"' and c == "\\" and line[i + 1:i + 2] == "x"
                        and len(line[i + 2:i + 4]) == 2
                        and line[i + 2] in _HEXDIGITS and line[i + 3] in _HEXDIGITS):
                    byte = int(line[i + 2:i + 4], 16)
                    cur.append(chr(byte) if byte < 0x80 else chr(0xDC00 + byte))
                    i += 4
                elif quote == '"' and c == "\\" and i + 1 < n:
                    cur.append(_ESCAPES.get(line[i + 1], line[i + 1]))
                    i += 2
                elif quote == "'" and c == "\\" and line[i + 1:i + 2] == "'":
                    cur.append("'")
                    i += 2
                elif c == quote:
                    if i + 1 < n and line[i + 1] not in _ISSPACE:
                        return None
                    i += 1
                    break
                elif c == "":
                    return None
                else:
                    cur.append(c)
                    i += 1
            else:
                if c in _TOKEN_END:
                    if c:
                        i += 1
                    break
                if c in "\"'":
                    quote = c
                else:
                    cur.append(c)
                i += 1
        out.append("".join(cur))


_REPR_ESCAPES = {0x5C: "\\\\", 0x22: '\\"', 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t",
                 0x07: "\\a", 0x08: "\\b"}


def repr_arg(value: str | bytes) -> str:
    """Redis's sdscatrepr: the value quoted, with C escapes and ``\\xNN`` for other
    non-printable bytes; :func:`split_args` reads it back to the same value (strings are
    taken as their surrogate-escaped bytes)."""
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    out = ['"']
    for b in data:
        esc = _REPR_ESCAPES.get(b)
        out.append(esc if esc is not None else chr(b) if 32 <= b < 127 else f"\\x{b:02x}")
    out.append('"')
    return "".join(out)


_MEMORY_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2,
                 "g": 1000**3, "gb": 1024**3}
_DIGITS_PREFIX = re.compile(r"[0-9]*")


def _memtoull(value: str) -> int | None:
    """Redis's ``memtoull``: digits plus an optional unit; wraps like C on overflow."""
    if value.startswith("-"):
        return None
    digits = _DIGITS_PREFIX.match(value).group()  # type: ignore[union-attr]
    unit = value[len(digits):]
    mul = _MEMORY_UNITS.get(unit.lower()) if unit.isascii() else None
    if mul is None or len(digits) >= 128:
        return None
    number = min(int(digits), ULLONG_MAX) if digits else 0   # strtoull saturates
    return (number * mul) & ULLONG_MAX


def parse_memory(value: str) -> int:
    """Parse a redis.conf memory value (``"64mb"`` -> 67108864); raise ``ValueError``."""
    result = _memtoull(value)
    if result is None:
        raise ValueError(f"invalid memory value: {value!r}")
    return result


_STRING2LL = re.compile(r"0|-?[1-9][0-9]*")


def _string2ll(value: str) -> int | None:
    """Redis's ``string2ll``: strict decimal, no sign '+', no spaces, no leading zeros."""
    if not value or len(value) >= 21 or not _STRING2LL.fullmatch(value):
        return None
    number = int(value)
    return number if LLONG_MIN <= number <= LLONG_MAX else None


_STRTOLL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")


def _strtoll_whole(value: str) -> int | None:
    """``strtoll(value, &end, 10)`` that must consume the whole string ("" reads as 0)."""
    if value == "":
        return 0
    if not _STRTOLL.fullmatch(value):
        return None
    return max(LLONG_MIN, min(LLONG_MAX, int(value)))


def stringmatch(pattern: str, string: str, nocase: bool = False) -> bool:
    """Glob matching with Redis's ``stringmatchlen`` semantics (``* ? [abc] [^a-z] \\x``): the
    shared matcher of :mod:`pyrepl.keyspace.glob`, on the texts' bytes as Redis sees them."""
    return _glob_match(pattern.encode("utf-8", "surrogateescape"),
                       string.encode("utf-8", "surrogateescape"), nocase)


# ---------------------------------------------------------------------------------------------
# Value kinds: parse (args -> typed value, or _Invalid) and format (typed value -> CONFIG GET)
# ---------------------------------------------------------------------------------------------

ParseFn = Callable[["Directive", list[str], Any, bool], Any]
FormatFn = Callable[[Any], str]


def _one(args: list[str]) -> str:
    if len(args) != 1:
        raise _Invalid("wrong number of arguments")
    return args[0]


def _parse_bool(d: Directive, args: list[str], current: Any, loading: bool) -> bool:
    text = _one(args)
    lowered = text.lower() if text.isascii() else text
    if lowered == "yes":
        return True
    if lowered == "no":
        return False
    raise _Invalid("argument must be 'yes' or 'no'")


def _fmt_bool(value: bool) -> str:
    return "yes" if value else "no"


def _parse_number(d: Directive, args: list[str], current: Any, loading: bool) -> int:
    text = _one(args)
    if d.kind == "memory":
        unsigned_value = _memtoull(text)
        if unsigned_value is None:
            raise _Invalid("argument must be a memory value")
        # memtoull's result lands in a long long before the boundary check, as in Redis.
        number = unsigned_value - 2**64 if unsigned_value > LLONG_MAX else unsigned_value
    else:
        parsed = _string2ll(text)
        if parsed is None:
            raise _Invalid("argument couldn't be parsed into an integer")
        number = parsed
    if d.unsigned:
        number &= ULLONG_MAX
    if not d.lo <= number <= d.hi:
        raise _Invalid(f"argument must be between {d.lo} and {d.hi} inclusive")
    return number


def _enum_error(d: Directive) -> _Invalid:
    return _Invalid("argument(s) must be one of the following: " + ", ".join(d.choices))


def _parse_enum(d: Directive, args: list[str], current: Any, loading: bool) -> str:
    """Redis's enum configs: one name, matched without case; the value kept is the table's
    spelling, and for names sharing a value (``oom-score-adj yes``/``relative``) the first
    one, as CONFIG GET shows it."""
    text = _one(args)
    lowered = text.lower() if text.isascii() else text
    for choice in d.choices:
        if choice.lower() == lowered:
            return dict(d.enum_alias).get(choice, choice)
    raise _enum_error(d)


# Bit-flag enums (Redis's MULTI_ARG enum configs): name -> bit, in the table's order.
_SHUTDOWN_FLAGS = (("default", 0), ("save", 1), ("nosave", 2), ("now", 4), ("force", 8))
_SLOT_STATS_FLAGS = (("no", 0), ("yes", 7), ("cpu", 1), ("net", 2), ("mem", 4))


def _flag_parser(table: tuple[tuple[str, int], ...],
                 check: Callable[[int], None] | None = None) -> ParseFn:
    def parse(d: Directive, args: list[str], current: Any, loading: bool) -> int:
        if not args:
            raise _enum_error(d)
        value = 0
        for arg in args:
            lowered = arg.lower() if arg.isascii() else arg
            bits = [bit for name, bit in table if name == lowered]
            if not bits:
                raise _enum_error(d)
            value |= bits[0]
        if check is not None:
            check(value)
        return value
    return parse


def _flag_formatter(table: tuple[tuple[str, int], ...]) -> FormatFn:
    def fmt(value: int) -> str:   # Redis's configEnumGetName with bitflags
        names: list[str] = []
        unmatched = value
        for name, bit in table:
            if value == bit:
                return name
            if bit and bit == (unmatched & bit):
                names.append(name)
                unmatched &= ~bit
        return " ".join(names) if names and not unmatched else "unknown"
    return fmt


def _check_shutdown_flags(value: int) -> None:
    if value & 1 and value & 2:
        raise _Invalid("shutdown options SAVE and NOSAVE can't be used simultaneously")


_NOTIFY_CLASSES = "g$lshzxetdn"      # the classes 'A' stands for, plus n (not in A)
_NOTIFY_BITS = {"g": 1 << 2, "$": 1 << 3, "l": 1 << 4, "s": 1 << 5, "h": 1 << 6, "z": 1 << 7,
                "x": 1 << 8, "e": 1 << 9, "t": 1 << 10, "d": 1 << 12, "n": 1 << 13,
                "K": 1 << 0, "E": 1 << 1, "m": 1 << 11}
NOTIFY_ALL = sum(_NOTIFY_BITS[c] for c in "g$lshzxetd")


def _parse_notify(d: Directive, args: list[str], current: Any, loading: bool) -> int:
    """``notify-keyspace-events``: Redis's keyspaceEventsStringToFlags."""
    flags = 0
    for ch in _one(args):
        if ch == "A":
            flags |= NOTIFY_ALL
        elif ch in _NOTIFY_BITS:
            flags |= _NOTIFY_BITS[ch]
        else:
            raise _Invalid("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    return flags


def _fmt_notify(flags: int) -> str:
    """Redis's keyspaceEventsFlagsToString."""
    out = "A" if flags & NOTIFY_ALL == NOTIFY_ALL else \
        "".join(c for c in _NOTIFY_CLASSES if flags & _NOTIFY_BITS[c])
    return out + "".join(c for c in "KEm" if flags & _NOTIFY_BITS[c])


def _parse_oom_values(d: Directive, args: list[str], current: Any,
                      loading: bool) -> tuple[int, int, int]:
    if len(args) != 3:
        raise _Invalid("wrong number of arguments")
    values = []
    for text in args:
        number = _strtoll_whole(text)
        if number is None or not -2000 <= number <= 2000:
            raise _Invalid("Invalid oom-score-adj-values, elements must be between -2000 "
                           "and 2000.")
        values.append(number)
    return (values[0], values[1], values[2])


def _fmt_ints(value: Iterable[int]) -> str:
    return " ".join(str(v) for v in value)


_STRING2D = re.compile(r"[ \t\n\v\f\r]*[+-]?(?:inf(?:inity)?|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
                       r"(?:[eE][+-]?[0-9]+)?)", re.IGNORECASE)


def _parse_percentiles(d: Directive, args: list[str], current: Any,
                       loading: bool) -> tuple[float, ...]:
    if len(args) == 1 and args[0] == "":
        return ()
    values = []
    for text in args:
        # string2d: strtod over the whole string, no leading space, not NaN
        if (not text or text[0] in _ISSPACE or not _STRING2D.fullmatch(text)
                or "nan" in text.lower()):
            raise _Invalid("Invalid latency-tracking-info-percentiles parameters")
        value = float(text)
        if not 0.0 <= value <= 100.0:
            raise _Invalid("latency-tracking-info-percentiles parameters should sit between "
                           "[0.0,100.0]")
        values.append(value)
    return tuple(values)


def format_percentiles(value: tuple[float, ...]) -> str:
    out = []
    for v in value:
        text = f"{v:f}"                    # "%f", then Redis's trimDoubleString
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        out.append(text)
    return " ".join(out)


def _parse_mem_or_percent(d: Directive, args: list[str], current: Any, loading: bool) -> int:
    """``maxmemory-clients``: a memory value, or ``N%`` stored as ``-N`` (Redis's rule)."""
    text = _one(args)
    unsigned_value = _memtoull(text)
    if unsigned_value is not None:
        number = unsigned_value - 2**64 if unsigned_value > LLONG_MAX else unsigned_value
    else:
        percent = _string2ll(text[:-1]) if len(text) > 1 and text.endswith("%") else None
        if percent is None or percent < 0:
            raise _Invalid("argument must be a memory or percent value")
        number = -percent
    if number < 0:
        if number < d.lo:
            raise _Invalid(f"percentage argument must be less or equal to {-d.lo}")
    elif number > d.hi:
        raise _Invalid(f"argument must be between {d.lo} and {d.hi} inclusive")
    return number


def _fmt_mem_or_percent(value: int) -> str:
    return f"{-value}%" if value < 0 else str(value)


_OCTAL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-7]*")


def _parse_octal(d: Directive, args: list[str], current: Any, loading: bool) -> int:
    """``unixsocketperm``: strtoll(value, 8) over the whole text, unsigned bounds in octal."""
    text = _one(args)
    if not _OCTAL.fullmatch(text) or (text.strip(_ISSPACE).lstrip("+-") == "" and text != ""):
        raise _Invalid("argument couldn't be parsed as an octal number")
    digits = text.strip(_ISSPACE)
    number = int(digits, 8) if digits else 0
    if not LLONG_MIN <= number <= LLONG_MAX:
        raise _Invalid("argument couldn't be parsed as an octal number")
    if not d.lo <= number & ULLONG_MAX <= d.hi:
        raise _Invalid(f"argument must be between {d.lo:o} and {d.hi:o} inclusive")
    return number


def _check_not_empty_basename(what: str, kind: str) -> Callable[[Any], None]:
    def check(value: str) -> None:
        if value == "":
            raise _Invalid(f"{what} can't be empty")
        if "/" in value or "\\" in value:
            raise _Invalid(f"{what} can't be a path, just a {kind}")
    return check


_PROC_TITLE_VARS = {"title": "", "listen-addr": "*:6379", "server-mode": "",
                    "config-file": "-", "port": "6379", "tls-port": "0", "unixsocket": ""}


def expand_proc_title(template: str, values: dict[str, str]) -> str | None:
    """Redis's expandProcTitleTemplate: sdstemplate's ``{name}`` variables (``{{`` is a
    brace) replaced from ``values``, the result trimmed of spaces; None where a variable is
    unknown or a brace is left open."""
    out: list[str] = []
    i = 0
    while i < len(template):
        start = template.find("{", i)
        if start < 0:
            out.append(template[i:])
            break
        out.append(template[i:start])
        if start + 1 >= len(template):
            return None
        if template[start + 1] == "{":
            out.append("{")
            i = start + 2
            continue
        end = template.find("}", start + 1)
        value = values.get(template[start + 1:end]) if end >= 0 else None
        if value is None:
            return None
        out.append(value)
        i = end + 1
    return "".join(out).strip(" ")


def _check_proc_title(template: str) -> None:
    """Redis's validateProcTitleTemplate: known variables only, and not empty once expanded
    (with an empty title)."""
    if not expand_proc_title(template, _PROC_TITLE_VARS):
        raise _Invalid("template format is invalid or contains unknown variables")


_HOSTNAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")


def _check_hostname(value: str) -> None:
    if len(value.encode("utf-8", "surrogateescape")) >= 256:
        raise _Invalid("Hostnames must be less than 256 characters")
    if not set(value) <= _HOSTNAME_CHARS:
        raise _Invalid("Hostnames may only contain alphanumeric characters, hyphens or dots")


_AUX_FORBIDDEN = frozenset(b"!#$%&()*+:;<>?@[]^{|}~,= \"'\\")


def _check_nodename(value: str) -> None:
    # Redis 8's isValidAuxString: no control character, none of nodes.conf's delimiters
    for b in value.encode("utf-8", "surrogateescape"):
        if b < 0x20 or b == 0x7F or (b in _AUX_FORBIDDEN and not chr(b).isalnum()):
            raise _Invalid("Announced human node name contained invalid character")


def _check_locale(value: str) -> None:
    """Redis 8's updateLocaleCollate: setlocale(LC_COLLATE) must accept the name (pyrepl only
    checks it and puts the process's collation back)."""
    import locale

    saved = locale.setlocale(locale.LC_COLLATE)
    try:
        locale.setlocale(locale.LC_COLLATE, value)
    except (locale.Error, ValueError):
        raise _Invalid("Invalid locale name") from None
    finally:
        locale.setlocale(locale.LC_COLLATE, saved)


def _check_no_defrag(value: bool) -> None:
    # Debian's 7.0.15 (system jemalloc) is built without HAVE_DEFRAG, and so is pyrepl.
    if value:
        raise _Invalid("Active defragmentation cannot be enabled: it requires a Redis server "
                       "compiled with a modified Jemalloc like the one shipped by default with "
                       "the Redis source distribution")


def _parse_string(d: Directive, args: list[str], current: Any, loading: bool) -> str:
    return _one(args)


def _parse_dir(d: Directive, args: list[str], current: Any, loading: bool) -> str:
    text = _one(args)
    # Redis chdir()s, so a relative dir is relative to the previous one.
    base = current if isinstance(current, str) else os.getcwd()
    path = os.path.normpath(os.path.join(base, os.path.expanduser(text)))
    if not loading:
        if not os.path.exists(path):
            raise _Invalid(os.strerror(errno.ENOENT))
        if not os.path.isdir(path):
            raise _Invalid(os.strerror(errno.ENOTDIR))
    return path


def _parse_save(d: Directive, args: list[str], current: Any,
                loading: bool) -> list[tuple[int, int]]:
    if len(args) == 1 and args[0] == "":
        return []
    if len(args) % 2:
        raise _Invalid("Invalid save parameters")
    numbers: list[int] = []
    for index, text in enumerate(args):
        number = _strtoll_whole(text)
        if number is None or number < (1 if index % 2 == 0 else 0):
            raise _Invalid("Invalid save parameters")
        numbers.append(number)
    pairs = list(zip(numbers[0::2], numbers[1::2], strict=True))
    # While loading, save lines accumulate (the loader hands in [] for the first one).
    return (list(current) if current else []) + pairs if loading else pairs


def _fmt_save(value: list[tuple[int, int]]) -> str:
    return " ".join(f"{seconds} {changes}" for seconds, changes in value)


def _parse_bind(d: Directive, args: list[str], current: Any, loading: bool) -> list[str]:
    if len(args) > BINDADDR_MAX:
        raise _Invalid("Too many bind addresses specified.")
    if len(args) == 1 and args[0] == "":
        return []
    return list(args)


def _fmt_bind(value: list[str]) -> str:
    return " ".join(value)


def _parse_obuf(d: Directive, args: list[str], current: Any,
                loading: bool) -> dict[str, tuple[int, int, int]]:
    if len(args) % 4:
        raise _Invalid("Wrong number of arguments in buffer limit configuration.")
    merged = dict(current) if isinstance(current, dict) else {}
    for j in range(0, len(args), 4):
        name = args[j].lower() if args[j].isascii() else args[j]
        klass = _OBUF_CLASS_BY_NAME.get(name)
        if klass is None or klass == "master":
            raise _Invalid("Invalid client class specified in buffer limit configuration.")
        hard = _memtoull(args[j + 1])
        soft = _memtoull(args[j + 2])
        seconds = _strtoll_whole(args[j + 3])
        if hard is None or soft is None or seconds is None or seconds < 0:
            raise _Invalid("Error in hard, soft or soft_seconds setting in buffer limit "
                           "configuration.")
        merged[klass] = (hard, soft, seconds)
    return {klass: merged[klass] for klass in OBUF_CLASSES if klass in merged}


def _fmt_obuf(value: dict[str, tuple[int, int, int]]) -> str:
    return " ".join(f"{_OBUF_WIRE_NAMES[klass]} {hard} {soft} {seconds}"
                    for klass, (hard, soft, seconds) in value.items())


def _parse_replicaof(d: Directive, args: list[str], current: Any,
                     loading: bool) -> tuple[str, int] | None:
    if len(args) != 2:
        raise _Invalid("wrong number of arguments")
    host, port_text = args
    if host.lower() == "no" and port_text.lower() == "one":
        return None
    port = int(port_text) if _STRTOLL.fullmatch(port_text) else -1
    if not 0 <= port <= 65535:
        raise _Invalid("Invalid master port")
    return (host, port)


def _fmt_replicaof(value: tuple[str, int] | None) -> str:
    return "" if value is None else f"{value[0]} {value[1]}"


def _check_basename(value: str) -> None:
    if "/" in value or "\\" in value:
        raise _Invalid("dbfilename can't be a path, just a filename")


def _clamp_hz(value: int, loading: bool) -> int:
    return max(MIN_HZ, min(MAX_HZ, value))


def _backlog_floor(value: int, loading: bool) -> int:
    # Redis applies the 16k floor when CONFIG SET resizes the backlog, not at load time.
    return value if loading else max(value, REPL_BACKLOG_MIN_SIZE)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

_PARSERS: dict[str, ParseFn] = {"bool": _parse_bool, "int": _parse_number,
                                "memory": _parse_number, "enum": _parse_enum,
                                "string": _parse_string}
_FORMATTERS: dict[str, FormatFn] = {"bool": _fmt_bool, "int": str, "memory": str,
                                    "enum": str, "string": str}


@dataclass(frozen=True, slots=True)
class Directive:
    """One configuration directive: name, kind, default (redis.conf syntax), bounds, flags."""

    name: str
    kind: str                       # bool | int | memory | enum | string | special
    default: str
    aliases: tuple[str, ...] = ()
    mutable: bool = True            # CONFIG SET allowed (Redis's MODIFIABLE_CONFIG)
    protected: bool = False         # Redis's PROTECTED_CONFIG (refused unless forced)
    hidden: bool = False            # not matched by CONFIG GET globs, only by its exact name
    sensitive: bool = False         # the server redacts it from logs / MONITOR / SLOWLOG
    deny_loading: bool = False      # the server refuses CONFIG SET while loading a dataset
    multi_arg: bool = False         # takes several arguments (one quoted string also works)
    lo: int = 0
    hi: int = 0
    unsigned: bool = False          # bounds checked as an unsigned C type (as Redis does)
    choices: tuple[str, ...] = ()
    enum_alias: tuple[tuple[str, str], ...] = ()  # enum names sharing a value: (alias, shown)
    noop: bool = False              # accepted and reported, no effect in pyrepl (README says so)
    parse: ParseFn | None = None    # for kind "special" (others use the kind's parser)
    fmt: FormatFn | None = None     # for kind "special"
    origin: str = "redis-7"         # who named it: redis-7 | redis-8 | pyrepl
    check: Callable[[Any], None] | None = None           # extra validation of the typed value
    adjust: Callable[[Any, bool], Any] | None = None     # value fix-up (hz clamp, backlog floor)
    help: str = ""

    @property
    def attr(self) -> str:
        """The :class:`Config` attribute holding this directive's value."""
        return self.name.replace("-", "_")

    def parse_args(self, args: list[str], current: Any, loading: bool) -> Any:
        """Typed value for ``args`` (raises ``_Invalid`` with Redis's reason)."""
        parser = self.parse or _PARSERS[self.kind]
        value = parser(self, args, current, loading)
        if self.check is not None:
            self.check(value)
        if self.adjust is not None:
            value = self.adjust(value, loading)
        return value

    def format(self, value: Any) -> str:
        """``value`` as CONFIG GET shows it."""
        return (self.fmt or _FORMATTERS[self.kind])(value)


def _int(name: str, default: str, lo: int, hi: int, **kw: Any) -> Directive:
    return Directive(name, "int", default, lo=lo, hi=hi, **kw)


def _mem(name: str, default: str, lo: int, hi: int, **kw: Any) -> Directive:
    return Directive(name, "memory", default, lo=lo, hi=hi, **kw)


def _bool(name: str, default: str, **kw: Any) -> Directive:
    return Directive(name, "bool", default, **kw)


def _str(name: str, default: str, **kw: Any) -> Directive:
    return Directive(name, "string", default, **kw)


def _enum(name: str, default: str, choices: tuple[str, ...], **kw: Any) -> Directive:
    return Directive(name, "enum", default, choices=choices, **kw)


def _special(name: str, default: str, parse: ParseFn, fmt: FormatFn, **kw: Any) -> Directive:
    return Directive(name, "special", default, parse=parse, fmt=fmt, **kw)


_OBUF_DEFAULT = "normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60"
_PROTECTED_ACTION = ("no", "yes", "local")


def _names(table: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    return tuple(name for name, _ in table)

#: Everything pyrepl supports, in the order of CONFIG GET * and ``Config.names()``. Names,
#: defaults, bounds and mutability are Redis 7.0's (config.c), except where noted.
DIRECTIVES: tuple[Directive, ...] = (
    # Network
    _special("bind", "* -::*", _parse_bind, _fmt_bind, multi_arg=True),
    _bool("protected-mode", "yes"),
    _int("port", "6379", 0, 65535),
    _int("tcp-backlog", "511", 0, INT_MAX, mutable=False),
    _int("timeout", "0", 0, INT_MAX),
    _int("tcp-keepalive", "300", 0, INT_MAX),
    # General
    _bool("daemonize", "no", mutable=False),
    _enum("supervised", "no", ("upstart", "systemd", "auto", "no"), mutable=False),
    _str("pidfile", "", mutable=False),
    _enum("loglevel", "notice", ("debug", "verbose", "notice", "warning")),
    _str("logfile", "", mutable=False),
    _int("databases", "16", 1, INT_MAX, mutable=False),
    # Security
    _str("requirepass", "", sensitive=True),
    _str("masteruser", "", sensitive=True),
    _str("masterauth", "", sensitive=True),
    # Snapshotting
    _special("save", "3600 1 300 100 60 10000", _parse_save, _fmt_save, multi_arg=True),
    _bool("stop-writes-on-bgsave-error", "yes"),
    _bool("rdbcompression", "yes"),
    _bool("rdbchecksum", "yes", mutable=False),
    _bool("rdb-del-sync-files", "no"),
    _str("dbfilename", "dump.rdb", protected=True, check=_check_basename),
    _special("dir", ".", _parse_dir, str, protected=True, deny_loading=True),
    _int("rdb-key-save-delay", "0", INT_MIN, INT_MAX, hidden=True,
         help="microseconds slept per key by the RDB writer (a Redis testing knob)"),
    _bool("appendonly", "no", deny_loading=True),
    # Clients and memory
    Directive("maxclients", "int", "10000", lo=1, hi=UINT_MAX, unsigned=True),
    Directive("maxmemory", "memory", "0", lo=0, hi=ULLONG_MAX, unsigned=True),
    _enum("maxmemory-policy", "noeviction",
          ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
           "allkeys-lfu", "allkeys-random", "noeviction")),
    _mem("proto-max-bulk-len", "512mb", 1024 * 1024, LLONG_MAX),
    _mem("client-query-buffer-limit", "1gb", 1024 * 1024, LLONG_MAX, unsigned=True),
    _special("client-output-buffer-limit", _OBUF_DEFAULT, _parse_obuf, _fmt_obuf,
             multi_arg=True),
    _int("hz", "10", 0, INT_MAX, adjust=_clamp_hz),
    _bool("dynamic-hz", "yes"),
    _int("active-expire-effort", "1", 1, 10),
    # Replication
    _special("replicaof", "no one", _parse_replicaof, _fmt_replicaof, aliases=("slaveof",),
             mutable=False, multi_arg=True),
    _bool("replica-serve-stale-data", "yes", aliases=("slave-serve-stale-data",)),
    _bool("replica-read-only", "yes", aliases=("slave-read-only",)),
    _int("replica-priority", "100", 0, INT_MAX, aliases=("slave-priority",)),
    _str("replica-announce-ip", "", aliases=("slave-announce-ip",)),
    _int("replica-announce-port", "0", 0, 65535, aliases=("slave-announce-port",)),
    _bool("replica-announced", "yes"),
    _mem("repl-backlog-size", "1mb", 1, LLONG_MAX, adjust=_backlog_floor),
    _int("repl-backlog-ttl", "3600", 0, LLONG_MAX),
    _bool("repl-diskless-sync", "yes"),
    _int("repl-diskless-sync-delay", "5", 0, INT_MAX),
    _int("repl-diskless-sync-max-replicas", "0", 0, INT_MAX),
    _enum("repl-diskless-load", "disabled", ("disabled", "on-empty-db", "swapdb"),
          deny_loading=True),
    _int("repl-ping-replica-period", "10", 1, INT_MAX, aliases=("repl-ping-slave-period",)),
    _int("repl-timeout", "60", 1, INT_MAX),
    _bool("repl-disable-tcp-nodelay", "no"),
    _int("min-replicas-to-write", "0", 0, INT_MAX, aliases=("min-slaves-to-write",)),
    _int("min-replicas-max-lag", "10", 0, INT_MAX, aliases=("min-slaves-max-lag",)),
    # Redis 8 names (absent from 7.0): the RDB-channel full sync.
    _bool("repl-rdb-channel", "yes", hidden=True, origin="redis-8",
          help="offer/accept the RDB-channel full sync (Redis 8)"),
    Directive("replica-full-sync-buffer-limit", "memory", "0", lo=0, hi=LLONG_MAX,
              unsigned=True, origin="redis-8",
              help="replica-side cap on the buffered main-channel stream during an "
                   "RDB-channel sync; 0 = the replica class hard limit (Redis 8)"),
    # pyrepl's (issue 40): a full sync's pending stream past this many bytes goes to a file in
    # dir instead of memory (on a master, per replica in full sync; on a replica, its
    # rdb-channel buffer), so no buffer limit ends the sync; 0 = off (Redis's behaviour).
    Directive("repl-full-sync-spill-threshold", "memory", "0", lo=0, hi=LLONG_MAX,
              unsigned=True, origin="pyrepl",
              help="bytes of a full sync's pending stream held in memory before the rest "
                   "spills to a file in dir (master: per replica in full sync; replica: its "
                   "rdb-channel buffer); 0 = off"),
    # pyrepl's (issue 40): full syncs that respect the network. The snapshot transfer to each
    # replica is paced (the live stream never is); full syncs past the cap wait their turn.
    Directive("repl-sync-max-bandwidth", "memory", "0", lo=0, hi=LLONG_MAX, unsigned=True,
              origin="pyrepl",
              help="bytes/s at most for each replica's snapshot transfer (disk and diskless; "
                   "CONFIG SET applies to transfers under way); 0 = unpaced"),
    _int("repl-full-sync-max-concurrent", "0", 0, INT_MAX, origin="pyrepl",
         help="replicas receiving a snapshot at once; the others wait for a free turn "
              "(wait_bgsave); 0 = no cap"),
    # pyrepl's (issue 40): a full sync between pyrepl nodes (classic or rdb-channel) cut in the
    # middle resumes where it stopped: the master keeps the snapshot and its stream, the replica
    # what it loaded and the stream it had buffered.
    _int("repl-full-sync-resume-window", "60", 0, INT_MAX, origin="pyrepl",
         help="seconds a cut full sync may resume in (pyrepl replicas of a pyrepl master; the "
              "master keeps the snapshot's copy in dir and its stream, the replica what it "
              "loaded); 0 = off"),
    Directive("repl-full-sync-resume-tail", "memory", "32mb", lo=0, hi=LLONG_MAX,
              unsigned=True, origin="pyrepl",
              help="bytes of a diskless snapshot its child holds in memory for a cut sync to "
                   "resume from: the copy in dir starts that far back from the cut (a replica "
                   "that had parsed less resyncs in full); 0 = copy the whole payload"),
    # Unix socket, protected actions, shutdown (Redis 7.0, with their behaviour)
    _str("unixsocket", "", mutable=False),
    Directive("unixsocketperm", "special", "0", mutable=False, lo=0, hi=0o777, unsigned=True,
              parse=_parse_octal, fmt=lambda v: f"{v:o}"),
    _enum("enable-protected-configs", "no", _PROTECTED_ACTION, mutable=False),
    _enum("enable-debug-command", "no", _PROTECTED_ACTION, mutable=False),
    _enum("enable-module-command", "no", _PROTECTED_ACTION, mutable=False),
    _special("shutdown-on-sigint", "default", _flag_parser(_SHUTDOWN_FLAGS, _check_shutdown_flags),
             _flag_formatter(_SHUTDOWN_FLAGS), multi_arg=True, choices=_names(_SHUTDOWN_FLAGS)),
    _special("shutdown-on-sigterm", "default",
             _flag_parser(_SHUTDOWN_FLAGS, _check_shutdown_flags),
             _flag_formatter(_SHUTDOWN_FLAGS), multi_arg=True, choices=_names(_SHUTDOWN_FLAGS)),
    _int("shutdown-timeout", "10", 0, INT_MAX),
    _int("key-load-delay", "0", INT_MIN, INT_MAX, hidden=True,
         help="microseconds slept per key while loading an RDB (a Redis testing knob)"),
    Directive("loading-process-events-interval-bytes", "int", "2097152", lo=1024, hi=INT_MAX,
              hidden=True),
    _int("busy-reply-threshold", "5000", 0, LLONG_MAX, aliases=("lua-time-limit",)),
    # setfenv, getfenv and newproxy in scripts (Redis 7.0.15; read when a Lua state is made)
    _bool("lua-enable-deprecated-api", "no", mutable=False, hidden=True),
    # The startup banner with the port and the PID (redisAsciiArt), else one line
    _bool("always-show-logo", "no", mutable=False),
    # the process title (ps, /proc/<pid>/cmdline): pyrepl/core/server.py proc_title
    _bool("set-proc-title", "yes", mutable=False),
    _str("proc-title-template", "{title} {listen-addr} {server-mode}", check=_check_proc_title),
    # Accepted with Redis 7.0's syntax, default and CONFIG GET/SET behaviour; no effect in pyrepl
    # (yet): general and process
    _bool("syslog-enabled", "no", mutable=False, noop=True),
    _str("syslog-ident", "redis", mutable=False, noop=True),
    _enum("syslog-facility", "local0", ("user", "local0", "local1", "local2", "local3", "local4",
                                        "local5", "local6", "local7"), mutable=False, noop=True),
    _bool("crash-log-enabled", "yes", noop=True),
    _bool("crash-memcheck-enabled", "yes", noop=True),
    _bool("use-exit-on-panic", "no", hidden=True, noop=True),
    _int("watchdog-period", "0", 0, INT_MAX, hidden=True, noop=True),
    _str("ignore-warnings", "", noop=True),
    _str("server_cpulist", "", mutable=False, aliases=("server-cpulist",), noop=True),
    _str("bio_cpulist", "", mutable=False, aliases=("bio-cpulist",), noop=True),
    _str("aof_rewrite_cpulist", "", mutable=False, aliases=("aof-rewrite-cpulist",), noop=True),
    _str("bgsave_cpulist", "", mutable=False, aliases=("bgsave-cpulist",), noop=True),
    _str("bind-source-addr", ""),
    Directive("socket-mark-id", "int", "0", lo=0, hi=UINT_MAX, unsigned=True, mutable=False,
              noop=True),
    _int("io-threads", "1", 1, 128, mutable=False, noop=True),
    _bool("io-threads-do-reads", "no", mutable=False, noop=True),
    _enum("oom-score-adj", "no", ("no", "yes", "relative", "absolute"),
          enum_alias=(("relative", "yes"),)),
    _special("oom-score-adj-values", "0 200 800", _parse_oom_values, _fmt_ints, multi_arg=True),
    _bool("disable-thp", "yes", mutable=False, noop=True),
    _bool("jemalloc-bg-thread", "yes", noop=True),
    _bool("activerehashing", "yes", noop=True),
    _bool("activedefrag", "no", check=_check_no_defrag, noop=True),
    _int("active-defrag-cycle-min", "1", 1, 99, noop=True),
    _int("active-defrag-cycle-max", "25", 1, 99, noop=True),
    _int("active-defrag-threshold-lower", "10", 0, 1000, noop=True),
    _int("active-defrag-threshold-upper", "100", 0, 1000, noop=True),
    _mem("active-defrag-ignore-bytes", "104857600", 1, LLONG_MAX, unsigned=True, noop=True),
    Directive("active-defrag-max-scan-fields", "int", "1000", lo=1, hi=LLONG_MAX, unsigned=True,
              noop=True),
    # memory and eviction
    _int("maxmemory-samples", "5", 1, INT_MAX),
    _int("maxmemory-eviction-tenacity", "10", 0, 100),
    Directive("maxmemory-clients", "special", "0", lo=-100, hi=LLONG_MAX,
              parse=_parse_mem_or_percent, fmt=_fmt_mem_or_percent),
    _int("lfu-log-factor", "10", 0, INT_MAX),
    _int("lfu-decay-time", "1", 0, INT_MAX),
    _bool("replica-ignore-maxmemory", "yes", aliases=("slave-ignore-maxmemory",)),
    _bool("lazyfree-lazy-eviction", "no"),
    _bool("lazyfree-lazy-expire", "no"),
    _bool("lazyfree-lazy-server-del", "no", noop=True),
    _bool("lazyfree-lazy-user-del", "no"),
    _bool("lazyfree-lazy-user-flush", "no"),
    _bool("replica-lazy-flush", "no", aliases=("slave-lazy-flush",), noop=True),
    # client-side caching: keys in the tracking table past which some are evicted (0: none)
    Directive("tracking-table-max-keys", "int", "1000000", lo=0, hi=LLONG_MAX, unsigned=True),
    # persistence: AOF (none yet) and fsync
    _str("appendfilename", "appendonly.aof", mutable=False,
         check=_check_not_empty_basename("appendfilename", "filename")),
    _str("appenddirname", "appendonlydir", mutable=False,
         check=_check_not_empty_basename("appenddirname", "dirname")),
    _enum("appendfsync", "everysec", ("everysec", "always", "no")),
    _bool("no-appendfsync-on-rewrite", "no"),
    _int("auto-aof-rewrite-percentage", "100", 0, INT_MAX),
    _mem("auto-aof-rewrite-min-size", "64mb", 0, LLONG_MAX),
    _bool("aof-load-truncated", "yes"),
    _bool("aof-use-rdb-preamble", "yes"),
    _bool("aof-timestamp-enabled", "no"),
    _bool("aof-disable-auto-gc", "no"),
    _bool("aof-rewrite-incremental-fsync", "yes"),
    _bool("rdb-save-incremental-fsync", "yes", noop=True),
    _bool("replica-ignore-disk-write-errors", "no"),
    _enum("propagation-error-behavior", "ignore", ("ignore", "panic", "panic-on-replicas")),
    _enum("sanitize-dump-payload", "no", ("no", "yes", "clients")),
    # monitoring
    _int("slowlog-log-slower-than", "10000", -1, LLONG_MAX),
    Directive("slowlog-max-len", "int", "128", lo=0, hi=LLONG_MAX, unsigned=True),
    _int("latency-monitor-threshold", "0", 0, LLONG_MAX),
    _bool("latency-tracking", "yes"),
    _special("latency-tracking-info-percentiles", "50 99 99.9", _parse_percentiles,
             format_percentiles, multi_arg=True),
    _special("notify-keyspace-events", "", _parse_notify, _fmt_notify),
    # ACL (pyrepl.core.acl; `user` lines are kept in Config.users, see pyrepl.core.acl_file)
    _str("aclfile", "", mutable=False),
    Directive("acllog-max-len", "int", "128", lo=0, hi=LLONG_MAX, unsigned=True),
    _enum("acl-pubsub-default", "resetchannels", ("allchannels", "resetchannels")),
    # encodings: small hashes, sets of integers, small lists and small sorted sets are kept as
    # Redis keeps them (pyrepl.keyspace.lphash, .intset, .lplist, .zset)
    Directive("hash-max-listpack-entries", "int", "512", lo=0, hi=LLONG_MAX, unsigned=True,
              aliases=("hash-max-ziplist-entries",)),
    Directive("hash-max-listpack-value", "memory", "64", lo=0, hi=LLONG_MAX, unsigned=True,
              aliases=("hash-max-ziplist-value",)),
    _int("list-max-listpack-size", "-2", INT_MIN, INT_MAX, aliases=("list-max-ziplist-size",)),
    _int("list-compress-depth", "0", 0, INT_MAX, noop=True),
    Directive("set-max-intset-entries", "int", "512", lo=0, hi=LLONG_MAX, unsigned=True),
    Directive("zset-max-listpack-entries", "int", "128", lo=0, hi=LLONG_MAX, unsigned=True,
              aliases=("zset-max-ziplist-entries",)),
    Directive("zset-max-listpack-value", "memory", "64", lo=0, hi=LLONG_MAX, unsigned=True,
              aliases=("zset-max-ziplist-value",)),
    Directive("hll-sparse-max-bytes", "memory", "3000", lo=0, hi=LLONG_MAX, unsigned=True),
    Directive("stream-node-max-bytes", "memory", "4096", lo=0, hi=LLONG_MAX, unsigned=True),
    _int("stream-node-max-entries", "100", 0, LLONG_MAX),
    # cluster mode (pyrepl.cluster, pyrepl.core.cluster, pyrepl.net.cluster_io)
    _bool("cluster-enabled", "no", mutable=False),
    _str("cluster-config-file", "nodes.conf", mutable=False),
    _int("cluster-node-timeout", "15000", 0, LLONG_MAX),
    _int("cluster-port", "0", 0, 65535, mutable=False),
    _int("cluster-announce-port", "0", 0, 65535),
    _int("cluster-announce-bus-port", "0", 0, 65535),
    _int("cluster-announce-tls-port", "0", 0, 65535),
    _str("cluster-announce-ip", ""),
    _str("cluster-announce-hostname", "", check=_check_hostname),
    _enum("cluster-preferred-endpoint-type", "ip", ("ip", "hostname", "unknown-endpoint")),
    _int("cluster-replica-validity-factor", "10", 0, INT_MAX,
         aliases=("cluster-slave-validity-factor",)),
    _int("cluster-migration-barrier", "1", 0, INT_MAX),
    _bool("cluster-require-full-coverage", "yes"),
    _bool("cluster-replica-no-failover", "no", aliases=("cluster-slave-no-failover",)),
    _bool("cluster-allow-reads-when-down", "no"),
    _bool("cluster-allow-pubsubshard-when-down", "yes"),
    _bool("cluster-allow-replica-migration", "yes"),
    Directive("cluster-link-sendbuf-limit", "memory", "0", lo=0, hi=ULLONG_MAX, unsigned=True),
    # TLS (pyrepl.net.tls): contexts rebuilt on every change, for new connections
    _int("tls-port", "0", 0, 65535),
    _int("tls-session-cache-size", "20480", 0, INT_MAX),
    _int("tls-session-cache-timeout", "300", 0, INT_MAX),
    _bool("tls-cluster", "no"),
    _bool("tls-replication", "no"),
    _enum("tls-auth-clients", "yes", ("no", "yes", "optional")),
    _bool("tls-prefer-server-ciphers", "no"),
    _bool("tls-session-caching", "yes"),
    _str("tls-cert-file", ""),
    _str("tls-key-file", ""),
    _str("tls-key-file-pass", ""),
    _str("tls-client-cert-file", ""),
    _str("tls-client-key-file", ""),
    _str("tls-client-key-file-pass", ""),
    _str("tls-dh-params-file", ""),
    _str("tls-ca-cert-file", ""),
    _str("tls-ca-cert-dir", ""),
    _str("tls-protocols", ""),
    _str("tls-ciphers", ""),
    _str("tls-ciphersuites", ""),
    # Redis 8 additions that its redis.conf names (absent from 7.0: hidden from CONFIG GET *)
    _str("locale-collate", "", check=_check_locale, hidden=True, origin="redis-8", noop=True),
    Directive("set-max-listpack-entries", "int", "128", lo=0, hi=LLONG_MAX, unsigned=True,
              hidden=True, origin="redis-8", noop=True),
    Directive("set-max-listpack-value", "int", "64", lo=0, hi=LLONG_MAX, unsigned=True,
              hidden=True, origin="redis-8", noop=True),
    _int("aof-load-corrupt-tail-max-size", "0", 0, LLONG_MAX, hidden=True, origin="redis-8"),
    _bool("hide-user-data-from-log", "no", hidden=True, origin="redis-8", noop=True),
    _bool("key-memory-histograms", "no", hidden=True, origin="redis-8", noop=True),
    _int("lookahead", "16", 1, INT_MAX, hidden=True, origin="redis-8", noop=True),
    Directive("max-new-connections-per-cycle", "int", "10", lo=1, hi=1000, unsigned=True,
              hidden=True, origin="redis-8", noop=True),
    Directive("max-new-tls-connections-per-cycle", "int", "1", lo=1, hi=1000, unsigned=True,
              hidden=True, origin="redis-8", noop=True),
    _int("stream-idmp-duration", "100", 1, 86400, hidden=True, origin="redis-8", noop=True),
    _int("stream-idmp-maxsize", "100", 1, 10000, hidden=True, origin="redis-8", noop=True),
    _str("cluster-announce-human-nodename", "", check=_check_nodename, hidden=True, origin="redis-8", noop=True),
    _int("cluster-compatibility-sample-ratio", "0", 0, 100, hidden=True, origin="redis-8", noop=True),
    _mem("cluster-slot-migration-handoff-max-lag-bytes", "1mb", 0, LLONG_MAX, hidden=True, origin="redis-8",
         noop=True),
    _int("cluster-slot-migration-write-pause-timeout", "10000", 0, LLONG_MAX, hidden=True, origin="redis-8",
         noop=True),
    _special("cluster-slot-stats-enabled", "no", _flag_parser(_SLOT_STATS_FLAGS),
             _flag_formatter(_SLOT_STATS_FLAGS), multi_arg=True,
             choices=_names(_SLOT_STATS_FLAGS), hidden=True, origin="redis-8", noop=True),
    _enum("tls-auth-clients-user", "off", ("CN", "off"), hidden=True, origin="redis-8", noop=True),
    # pyrepl's own: the NDJSON sync event log read by the analytics job.
    _str("sync-log-file", "", origin="pyrepl", help="NDJSON sync event log; empty = off"),
    _mem("sync-log-max-size", "64mb", 0, LLONG_MAX, origin="pyrepl",
         help="rotate the sync log past this size; 0 = never rotate"),
    _int("sync-log-max-files", "8", 1, INT_MAX, origin="pyrepl",
         help="rotated sync logs kept"),
)

_BY_NAME: dict[str, Directive] = {}
for _d in DIRECTIVES:
    for _key in (_d.name, *_d.aliases):
        assert _key not in _BY_NAME, _key
        _BY_NAME[_key] = _d
del _d, _key

#: Directives Redis 7.0 does not have (Redis 8's and pyrepl's own): what CONFIG GET * shows
#: beyond a 7.0 server's answer.
BEYOND_REDIS_7 = frozenset(d.name for d in DIRECTIVES if d.origin != "redis-7")

# CONFIG GET glob candidates: every name and alias, as Redis's config dict holds them.
#: Redis 8's dashed names of the 7.0 cpulist directives: found by name, not by CONFIG GET globs.
_REDIS8_ALIASES = frozenset({"server-cpulist", "bio-cpulist", "aof-rewrite-cpulist",
                             "bgsave-cpulist"})
_GLOB_KEYS: tuple[tuple[str, Directive], ...] = tuple(
    (key, d) for d in DIRECTIVES if not d.hidden for key in (d.name, *d.aliases)
    if key not in _REDIS8_ALIASES)


def lookup(name: str) -> Directive | None:
    """The directive called ``name`` (any case, aliases too), or ``None``."""
    return _BY_NAME.get(name.lower() if name.isascii() else name)


def option_lines(args: Sequence[str]) -> list[str]:
    """redis-server's arguments after the config file as the redis.conf lines it appends to
    it (server.c's main): ``--name`` starts a line; each other argument is a value, quoted
    (sdscatrepr); right after a bare ``--name`` the next argument is its value even if it
    starts with ``--``, while "--name value" in one argument is a whole line; a ``--save``
    with no value is ``save ""``. Reading the configuration from stdin (``-``) is refused."""
    options: list[str] = []
    handled_last = True
    for j, arg in enumerate(args):
        if arg == "-" and (j == 0 or j == len(args) - 1):
            raise ConfigError("reading the configuration from stdin ('-') is not supported",
                              path="<command line>")
        if handled_last and arg.startswith("--"):
            options.append(arg[2:] + " ")
            tokens = split_args(arg)
            if tokens is not None and len(tokens) == 1:
                handled_last = False
                if arg.lower() == "--save" and (j == len(args) - 1
                                                or args[j + 1].startswith("--")):
                    options[-1] += '""'
                    handled_last = True
            else:
                handled_last = True
        else:
            if not options:
                options.append("")
            options[-1] += repr_arg(arg) + " "
            handled_last = True
    return options


def _quote(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------

ChangeCallback = Callable[[str, Any], None]


class UserLine(NamedTuple):
    """A ``user`` line: its arguments after "user", and where it was read (for its errors)."""

    argv: tuple[str, ...]
    where: str               # "file:line" or "command line: --user ..."
    path: str | None
    lineno: int | None
    line: str


class RenameLine(NamedTuple):
    """A ``rename-command <name> <new-name>`` line (new-name "": the command removed), and where
    it was read; applied to the process's command table at start (pyrepl.commands.table
    .apply_renames: this module must not import the table)."""

    old: str
    new: str
    where: str
    path: str | None
    lineno: int | None
    line: str


class Config:
    """Typed configuration values, readable as attributes (``cfg.repl_backlog_size``).

    Values: bool for yes/no, int for numbers and memory (bytes), str for strings and enums,
    ``save`` a list of ``(seconds, changes)``, ``bind`` a list of addresses,
    ``client_output_buffer_limit`` a dict ``{"normal"|"replica"|"pubsub": (hard, soft,
    seconds)}``, ``replicaof`` ``(host, port)`` or ``None``, ``dir`` an absolute path.
    Container values are replaced, never mutated, so a reference taken earlier stays valid.
    """

    source_file: str | None
    loaded_names: set[str]
    # The most used values, declared for readers and type checkers (all are set in __init__).
    port: int
    bind: list[str]
    maxclients: int
    proto_max_bulk_len: int
    repl_backlog_size: int
    save: list[tuple[int, int]]
    client_output_buffer_limit: dict[str, tuple[int, int, int]]
    replicaof: tuple[str, int] | None
    dir: str
    # The `user <name> <rules...>` lines of the file and command line, in order (their rules
    # are checked by pyrepl.core.acl_file, which needs the command table this module must not import).
    users: tuple[UserLine, ...]
    # The `rename-command` lines, in order (pyrepl.commands.table.apply_renames)
    renames: tuple[RenameLine, ...]

    def __init__(self) -> None:
        object.__setattr__(self, "source_file", None)
        object.__setattr__(self, "users", ())
        object.__setattr__(self, "renames", ())
        object.__setattr__(self, "_callbacks", [])
        object.__setattr__(self, "loaded_names", set())   # set by the file or command line
        for d in DIRECTIVES:
            args = d.default.split(" ") if d.multi_arg else [d.default]
            object.__setattr__(self, d.attr, d.parse_args(args, None, True))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Config is read-only; use Config.set() to change {name!r}")

    def __repr__(self) -> str:
        return (f"Config(source_file={self.source_file!r}, port={self.port!r}, "
                f"replicaof={self.replicaof!r}, dir={self.dir!r})")

    def __getattr__(self, name: str) -> Any:   # only reached for unknown attributes
        raise AttributeError(f"no configuration directive behind attribute {name!r}")

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | None = None,
             overrides: Iterable[tuple[str, Sequence[str]]] = (),
             lines: Sequence[str] = ()) -> Config:
        """Defaults, then the file at ``path`` (if any), then the command line's ``lines``
        (redis.conf lines, :func:`option_lines`), then ``overrides`` in order.

        ``overrides`` are command-line style ``(name, args)`` pairs: ``("port", ["7000"])``,
        ``("save", [""])``, ``("replicaof", ["127.0.0.1 6380"])``.
        """
        cfg = cls()
        loader = _Loader(cfg)
        if path is not None:
            object.__setattr__(cfg, "source_file", os.path.abspath(path))
            loader.load_file(path, depth=0)
        for n, line in enumerate(lines, 1):
            text = line.strip(" \t\r\n")
            if not text or text.startswith("#"):
                continue
            argv = split_args(text)
            if argv is None:
                raise ConfigError(f"command line: {text}: Unbalanced quotes in configuration "
                                  "line", reason="Unbalanced quotes in configuration line",
                                  path="<command line>", lineno=n, line=text)
            if argv:
                loader.apply(argv, where="command line: " + text, path=None, lineno=n,
                             line=text)
        for name, args in overrides:
            argv = [name, *args]
            where = "command line: --" + " ".join([name, *map(_quote, args)])
            loader.apply(argv, where=where, path=None, lineno=None, line=where)
        if cfg.cluster_enabled and cfg.replicaof is not None:     # (loadServerConfig's check)
            raise ConfigError("replicaof directive not allowed in cluster mode")
        return cfg

    @classmethod
    def from_args(cls, args: Sequence[str]) -> Config:
        """Build from redis-server style arguments: ``[path] --port 7000 --save "" ...``
        (:func:`option_lines`: redis-server's rules)."""
        args = list(args)
        path: str | None = None
        if args and not args[0].startswith("-"):
            path, args = args[0], args[1:]
        return cls.load(path, lines=option_lines(args))

    # -- reading ----------------------------------------------------------------------------

    def get(self, name: str) -> Any:
        """The typed value of directive ``name`` (any case, aliases too); ``KeyError`` if
        unknown."""
        d = lookup(name)
        if d is None:
            raise KeyError(name)
        return getattr(self, d.attr)

    def get_formatted(self, name: str) -> str:
        """The value of ``name`` as CONFIG GET shows it; ``KeyError`` if unknown."""
        d = lookup(name)
        if d is None:
            raise KeyError(name)
        return d.format(getattr(self, d.attr))

    def config_get(self, patterns: Iterable[str]) -> list[tuple[str, str]]:
        """CONFIG GET: ``(name, value)`` for every directive matching any pattern.

        As Redis 7: a pattern without ``*?[`` is an exact, case-insensitive lookup (aliases
        too; the reply uses the name as given); a glob matches names and aliases with
        ``stringmatch`` (case-insensitive) but never hidden directives; each name appears once.
        """
        found: dict[str, tuple[str, Directive]] = {}
        for pattern in patterns:
            if not any(ch in pattern for ch in "[*?"):
                d = lookup(pattern)
                if d is not None:
                    found.setdefault(pattern.lower(), (pattern, d))
                continue
            for key, d in _GLOB_KEYS:
                if key not in found and stringmatch(pattern, key, nocase=True):
                    found[key] = (key, d)
        return [(key, d.format(getattr(self, d.attr))) for key, d in found.values()]

    def in_dir(self, path: str) -> str:
        """``path`` made absolute against ``dir`` (where dbfilename and, by pyrepl's rule, a
        relative sync-log-file live); ``""`` stays ``""``."""
        return os.path.join(self.dir, path) if path else path

    def noop_loaded(self) -> list[str]:
        """Directives the file or the command line set that pyrepl accepts with no effect (the
        server names them once at startup), in table order."""
        return [d.name for d in DIRECTIVES if d.noop and d.name in self.loaded_names]

    def names(self) -> list[str]:
        """Canonical names of every supported directive, in table order."""
        return [d.name for d in DIRECTIVES]

    # -- CONFIG SET -------------------------------------------------------------------------

    def on_change(self, callback: ChangeCallback) -> None:
        """Call ``callback(name, new_value)`` after each successful change of a value.

        ``name`` is the canonical directive name and ``new_value`` the typed value. Callbacks
        run after all values of one :meth:`set_many` are stored; a callback may raise
        :class:`ConfigError` to veto: every value is then restored, the callbacks already run
        are called again with the old values, and ``set``/``set_many`` raise.
        """
        self._callbacks.append(callback)

    def set(self, name: str, value: str, *, force: bool = False,
            allow_protected: bool = False) -> None:
        """CONFIG SET ``name`` ``value`` (see :meth:`set_many`)."""
        self.set_many([(name, value)], force=force, allow_protected=allow_protected)

    def set_many(self, pairs: Sequence[tuple[str, str]], *, force: bool = False,
                 allow_protected: bool = False, loading: bool = False) -> None:
        """CONFIG SET k v [k v ...] with Redis 7's rules: all or nothing.

        Unknown names, immutable or protected directives and a name given twice are refused
        before anything is parsed (as in Redis, an alias and its directive are different names:
        both may appear, the last one wins). Then the values are parsed in order; only if all
        parse are they stored, and then the ``on_change`` callbacks run once per directive whose
        value changed. Errors name the directive as looked up (lowercased), like Redis.
        ``force=True`` is for the server itself (REPLICAOF updating ``replicaof``, tests moving
        ``dir``): it bypasses the immutable/protected refusal, never the validation.
        ``allow_protected=True`` lets protected directives (``dir``, ``dbfilename``) be set: the
        caller decides it from ``enable-protected-configs`` and the client (as Redis).
        Multi-argument directives split their value on single spaces, as CONFIG SET does.
        ``loading``: the server is loading a dataset, so a ``deny_loading`` directive refuses
        the whole call with -LOADING.
        """
        # (configSetCommand's first pass: the first failure is the answer; -LOADING is one)
        steps: list[tuple[Directive, str, str]] = []
        for name, value in pairs:
            d = lookup(name)
            if d is None:
                raise ConfigError(f"ERR Unknown option or number of arguments for CONFIG SET - "
                                  f"'{name}'", reason="Unknown option", name=name)
            if not force and (not d.mutable or (d.protected and not allow_protected)):
                reason = "can't set immutable config" if not d.mutable else \
                    "can't set protected config"
                raise _set_failed(name, reason)
            if loading and d.deny_loading:
                raise ConfigError("LOADING Redis is loading the dataset in memory",
                                  reason="loading")
            key = name.lower() if name.isascii() else name
            if any(key == seen for _, seen, _ in steps):
                raise _set_failed(name, "duplicate parameter")
            steps.append((d, key, value))
        # Stage: parse each value against the value staged so far for its directive.
        staged: dict[str, tuple[Directive, str, Any, Any]] = {}   # name -> (d, key, old, new)
        for d, key, value in steps:
            args = (value.split(" ") if value else []) if d.multi_arg else [value]
            if d.name in staged:
                _, first_key, old, current = staged[d.name]
            else:
                first_key, old = key, getattr(self, d.attr)
                current = old
            try:
                new = d.parse_args(args, current, False)
            except _Invalid as exc:
                raise _set_failed(key, str(exc)) from None
            staged[d.name] = (d, first_key, old, new)
        self._check_memory_tracking(staged)
        # Commit, then apply.
        for d, _key, _old, new in staged.values():
            object.__setattr__(self, d.attr, new)
        notified: list[tuple[Directive, Any]] = []
        for d, key, old, new in staged.values():
            if new == old:
                continue
            try:
                for callback in self._callbacks:
                    callback(d.name, new)
            except ConfigError as exc:
                self._roll_back(staged, [*notified, (d, old)])
                raise _set_failed(key, exc.reason) from exc
            notified.append((d, old))

    def _check_memory_tracking(self, staged: dict[str, tuple[Directive, str, Any, Any]]) -> None:
        """Redis 8's updateMemoryTrackingEnabled: key-memory-histograms (or, in cluster mode
        only, the ``mem`` bit of cluster-slot-stats-enabled) turns memory tracking on, which
        only a start can do."""
        entry = staged.get("key-memory-histograms")
        if entry is not None and entry[3] and not self.key_memory_histograms:
            raise _set_failed(entry[1], "memory tracking cannot be enabled at runtime")

    def _roll_back(self, staged: dict[str, tuple[Directive, str, Any, Any]],
                   applied: list[tuple[Directive, Any]]) -> None:
        """Restore the old values and re-run the callbacks that saw the new ones."""
        for d, _key, old, _new in staged.values():
            object.__setattr__(self, d.attr, old)
        for d, old in applied:
            for callback in self._callbacks:
                try:
                    callback(d.name, old)
                except ConfigError:
                    pass    # as Redis: a failed restore is logged by the caller, not raised


def _set_failed(name: str, reason: str) -> ConfigError:
    return ConfigError(f"ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}",
                       reason=reason, name=name)


class _Loader:
    """Applies redis.conf lines to a fresh :class:`Config` (no callbacks, load-time rules)."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.save_loaded = False       # the first save line replaces the default schedule
        self.stack: list[str] = []     # files being read, to refuse include loops

    def load_file(self, path: str, depth: int, origin: tuple[str, int, str] | None = None) -> None:
        real = os.path.realpath(path)
        if real in self.stack or depth > _MAX_INCLUDE_DEPTH:
            self._fail(origin, f"include loop: '{path}' is already being read")
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            self._fail(origin, f"can't open config file '{path}': {exc.strerror}")
        self.stack.append(real)
        text = data.decode("utf-8", "surrogateescape")
        for lineno, raw in enumerate(text.split("\n"), 1):
            line = raw.strip(" \t\r\n")
            if not line or line.startswith("#"):
                continue
            argv = split_args(line)
            if argv is None:
                self._fail((path, lineno, line), "Unbalanced quotes in configuration line")
            if not argv:
                continue
            self.apply(argv, where=f"{path}:{lineno}", path=path, lineno=lineno, line=line,
                       depth=depth)
        self.stack.pop()

    def apply(self, argv: list[str], *, where: str, path: str | None, lineno: int | None,
              line: str, depth: int = 0) -> None:
        location = (where, lineno, line, path)
        name = argv[0].lower() if argv[0].isascii() else argv[0]
        d = lookup(name)
        if d is None:
            if name == "include" and len(argv) == 2:
                self._include(argv[1], path, lineno, line, depth)
                return
            if name == "user" and len(argv) >= 2:
                self._user(argv[1:], location)
                return
            if name == "rename-command" and len(argv) == 3:
                rename = RenameLine(argv[1], argv[2], where, path, lineno, line)
                object.__setattr__(self.cfg, "renames", (*self.cfg.renames, rename))
                return
            self._fail_at(location, "Bad directive or wrong number of arguments")
        if not d.multi_arg and len(argv) != 2:
            self._fail_at(location, "wrong number of arguments")
        if d.multi_arg and len(argv) == 2 and argv[1]:
            args = split_args(argv[1])
            if args is None:
                self._fail_at(location, "Unbalanced quotes in configuration line")
        else:
            args = argv[1:]
        current = getattr(self.cfg, d.attr)
        if d.name == "save" and not self.save_loaded:
            self.save_loaded = True
            current = []
        try:
            value = d.parse_args(args, current, True)
        except _Invalid as exc:
            self._fail_at(location, str(exc), name=d.name)
        object.__setattr__(self.cfg, d.attr, value)
        self.cfg.loaded_names.add(d.name)

    def _user(self, argv: list[str], location: tuple[str, int | None, str, str | None]) -> None:
        """An ACL user (Redis's ACLAppendUserForLoading; its rules are checked by
        pyrepl.core.acl_file.check_config_users, its user made at startup)."""
        if any(u.argv[0] == argv[0] for u in self.cfg.users):
            self._fail_at(location, f"Error in user declaration '{argv[0]}': Duplicate user "
                                    "found. A user can only be defined once in config files")
        where, lineno, line, path = location
        user = UserLine(tuple(argv), where, path, lineno, line)
        object.__setattr__(self.cfg, "users", (*self.cfg.users, user))

    def _include(self, target: str, path: str | None, lineno: int | None, line: str,
                 depth: int) -> None:
        origin = (path or "command line", lineno or 0, line)
        candidates = [target]
        if path is not None and not os.path.isabs(target):
            candidates.append(os.path.join(os.path.dirname(path), target))
        if any(ch in target for ch in "*?["):
            for pattern in candidates:
                matches = sorted(_glob.glob(pattern))
                if matches:
                    for match in matches:
                        self.load_file(match, depth + 1, origin)
                    return
            return    # Redis: a wildcard matching nothing is not an error
        for candidate in candidates:
            if os.path.exists(candidate):
                self.load_file(candidate, depth + 1, origin)
                return
        self.load_file(target, depth + 1, origin)   # fails with the open() error

    @staticmethod
    def _fail(origin: tuple[str, int, str] | None, reason: str) -> NoReturn:
        if origin is None:
            raise ConfigError(reason)
        path, lineno, line = origin
        prefix = f"{path}:{lineno}" if lineno else path
        raise ConfigError(f"{prefix}: {reason}", reason=reason, path=path, lineno=lineno or None,
                          line=line)

    @staticmethod
    def _fail_at(location: tuple[str, int | None, str, str | None], reason: str,
                 name: str | None = None) -> NoReturn:
        where, lineno, line, path = location
        raise ConfigError(f"{where}: {reason}", reason=reason, path=path or "<command line>",
                          lineno=lineno, line=line, name=name)
