"""Redis's glob matching (``stringmatchlen`` of Redis 7.0 util.c), compiled for speed.

Shared helper (both roles): KEYS, SCAN/HSCAN/SSCAN/ZSCAN MATCH and CONFIG GET use it.

Theory of operation: Redis walks the pattern with a small recursive matcher. Every pattern
element except ``*`` consumes exactly one byte of the subject, so a pattern is equivalent to
a sequence of *byte sets* separated by stars. :func:`compile_pattern` tokenises the pattern
exactly as Redis's loop does (including its quirks, listed below), turns each element into the
set of bytes it accepts, and builds a matcher: a pattern without stars is one fixed-length
check; with stars, the part before the first star must match at the start, the part after the
last star at the end, and the parts in between are found left to right, leftmost first (which
is exact for fixed-length parts and linear, so patterns like ``*a*a*a*b`` cannot blow up).
Runs of plain bytes use ``startswith``/``find``; other parts use a compiled ``re`` of byte
classes. Compiled matchers are cached per (pattern, nocase).

Quirks of Redis 7.0 reproduced here:

* the empty subject matches only the empty pattern (``*`` does not match ``""``);
* ``\\x`` outside brackets is the literal ``x`` (a trailing ``\\`` is a literal backslash);
* ``[...]``: a leading ``^`` negates; ``\\x`` inside is the literal ``x`` compared exactly
  (even with nocase); ``]`` right after ``[`` or ``[^`` closes an empty class (``[]`` never
  matches, ``[^]`` matches any byte); ``a-z`` is a range whose ends may come in any order and
  which may swallow the closing ``]`` (``[a-]`` is the range a..``]``); an unterminated class
  takes the rest of the pattern as members; ``[`` as the last byte never matches and ``[^``
  as the last two bytes matches any byte;
* ranges compare C ``char`` values, which are signed on x86-64, so bytes >= 0x80 sort below
  0x00 (``[a-\\xff]`` is the range -1..97); with nocase both ends and the subject byte go
  through glibc's ``tolower`` (ASCII letters fold; negative values map to value + 256,
  except -1, EOF, which stays -1: so CONFIG GET ``[\\xff-z]ort`` finds ``port``);
* nocase folds ASCII letters only;
* more than 1000 star groups before the pattern's last element never match (the recursion
  limit Redis's matcher has against abusive patterns).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

Matcher = Callable[[bytes], bool]

_CACHE: dict[tuple[bytes, bool], Matcher] = {}
_CACHE_MAX = 1024
_CACHE_PATTERN_MAX = 4096  # longer patterns are compiled per use, not kept

_ALL = frozenset(range(256))
NESTING_MAX = 1000      # stringmatchlen_impl's nesting limit


def stringmatch(pattern: bytes, s: bytes, nocase: bool = False) -> bool:
    """True when ``s`` matches the glob ``pattern`` exactly as Redis 7.0's stringmatchlen."""
    m = _CACHE.get((pattern, nocase))
    if m is None:
        m = compile_pattern(pattern, nocase)
    return m(s)


def compile_pattern(pattern: bytes, nocase: bool = False) -> Matcher:
    """A reusable matcher ``f(s) -> bool`` for ``pattern`` (cached)."""
    key = (pattern, nocase)
    m = _CACHE.get(key)
    if m is not None:
        return m
    m = _build(pattern, nocase)
    if len(pattern) <= _CACHE_PATTERN_MAX:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = m
    return m


# -- tokenising -------------------------------------------------------------------------------

def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _tolower(x: int) -> int:
    """glibc's tolower() in the C locale, for x in -128..255 (-1 is EOF and stays -1)."""
    if x < -1:
        return x + 256
    if 65 <= x <= 90:
        return x + 32
    return x


def _fold(b: int) -> int:
    return b + 32 if 65 <= b <= 90 else b


def _literal(p: int, nocase: bool) -> frozenset[int]:
    if nocase and (65 <= p <= 90 or 97 <= p <= 122):
        return frozenset((p | 32, p & ~32))
    return frozenset((p,))


@lru_cache(maxsize=4096)
def _range_mask(lo: int, hi: int, nocase: bool) -> int:
    """Bit c set when byte c is in the class range lo-hi (C signed chars, glibc tolower)."""
    start, end = _signed(lo), _signed(hi)
    if start > end:
        start, end = end, start
    if nocase:
        start, end = _tolower(start), _tolower(end)
    mask = 0
    for c in range(256):
        cc = _tolower(_signed(c)) if nocase else _signed(c)
        if start <= cc <= end:
            mask |= 1 << c
    return mask


def _class(items: list[tuple], negate: bool, nocase: bool) -> frozenset[int]:
    """The bytes accepted by a bracket class, given its parsed members."""
    mask = 0
    for item in items:
        kind = item[0]
        if kind == "range":
            mask |= _range_mask(item[1], item[2], nocase)
        elif kind == "lit" and nocase:
            for c in _literal(item[1], True):
                mask |= 1 << c
        else:  # "exact" (escaped: compared exactly even with nocase) or a plain "lit"
            mask |= 1 << item[1]
    if negate:
        mask ^= (1 << 256) - 1
    return frozenset(c for c in range(256) if mask >> c & 1)


def _tokenize(p: bytes, nocase: bool) -> list[frozenset[int] | None]:
    """Pattern elements: None for a (collapsed) star, else the set of bytes accepted."""
    out: list[frozenset[int] | None] = []
    n = len(p)
    i = 0
    while i < n:
        ch = p[i]
        if ch == 42:  # '*'
            while i + 1 < n and p[i + 1] == 42:
                i += 1
            if not out or out[-1] is not None:
                out.append(None)
        elif ch == 63:  # '?'
            out.append(_ALL)
        elif ch == 91:  # '['
            i += 1
            negate = i < n and p[i] == 94  # '^'
            if negate:
                i += 1
            items: list[tuple] = []
            while True:
                if i < n and p[i] == 92 and n - i >= 2:  # backslash escape
                    i += 1
                    items.append(("exact", p[i]))
                elif i < n and p[i] == 93:  # ']'
                    break
                elif i >= n:
                    i -= 1  # Redis steps back onto the last pattern byte
                    break
                elif n - i >= 3 and p[i + 1] == 45:  # 'a-z'
                    items.append(("range", p[i], p[i + 2]))
                    i += 2
                else:
                    items.append(("lit", p[i]))
                i += 1
            out.append(_class(items, negate, nocase))
        elif ch == 92 and n - i >= 2:  # '\\x'
            i += 1
            out.append(_literal(p[i], nocase))
        else:
            out.append(_literal(ch, nocase))
        i += 1
    return out


# -- building the matcher ---------------------------------------------------------------------

def _class_regex(s: frozenset[int]) -> bytes:
    if len(s) == 1:
        return re.escape(bytes(s))
    parts = []
    vals = sorted(s)
    j = 0
    while j < len(vals):
        k = j
        while k + 1 < len(vals) and vals[k + 1] == vals[k] + 1:
            k += 1
        if k == j:
            parts.append(b"\\x%02x" % vals[j])
        else:
            parts.append(b"\\x%02x-\\x%02x" % (vals[j], vals[k]))
        j = k + 1
    return b"[" + b"".join(parts) + b"]"


def _segment(elems: list[frozenset[int]]) -> bytes | re.Pattern[bytes]:
    """A fixed-length run of elements: plain bytes when every element is one byte."""
    if all(len(e) == 1 for e in elems):
        return bytes(next(iter(e)) for e in elems)
    return re.compile(b"".join(_class_regex(e) for e in elems))


def _never(s: bytes) -> bool:
    return False


def _build(pattern: bytes, nocase: bool) -> Matcher:
    if not pattern:
        return lambda s: not s
    tokens = _tokenize(pattern, nocase)
    if any(t is not None and not t for t in tokens):
        return _never  # an empty class can never consume its byte
    # Redis's matcher recurses once per star group that is not the pattern's end, and gives
    # up past 1000 levels ("protection against abusive patterns"): such a pattern never matches
    groups = sum(1 for i, t in enumerate(tokens)
                 if t is None and (i + 1 < len(tokens) and tokens[i + 1] is not None))
    if groups > NESTING_MAX:
        return _never
    segs: list[list[frozenset[int]]] = [[]]
    for t in tokens:
        if t is None:
            segs.append([])
        else:
            segs[-1].append(t)
    if len(segs) == 1:  # no star: one fixed-length check
        seg = _segment(segs[0])
        if type(seg) is bytes:
            return seg.__eq__  # type: ignore[return-value]
        size = len(segs[0])
        rx = seg.fullmatch  # type: ignore[union-attr]
        return lambda s: len(s) == size and rx(s) is not None
    head = _segment(segs[0]) if segs[0] else b""
    tail = _segment(segs[-1]) if segs[-1] else b""
    mids = [(_segment(m), len(m)) for m in segs[1:-1] if m]
    hlen, tlen = len(segs[0]), len(segs[-1])
    minlen = max(1, hlen + tlen + sum(n for _, n in mids))
    if not mids:
        if type(head) is bytes and type(tail) is bytes:
            if not head and not tail:
                return lambda s: len(s) > 0  # '*' (the empty subject never matches)
            if not tail:
                return lambda s: len(s) >= minlen and s.startswith(head)  # type: ignore
            if not head:
                return lambda s: len(s) >= minlen and s.endswith(tail)  # type: ignore

    def match(s: bytes) -> bool:
        n = len(s)
        if n < minlen:
            return False
        if hlen:
            if type(head) is bytes:
                if not s.startswith(head):
                    return False
            elif head.match(s) is None:  # type: ignore[union-attr]
                return False
        end = n - tlen
        if tlen:
            if type(tail) is bytes:
                if not s.endswith(tail):
                    return False
            elif tail.fullmatch(s, end) is None:  # type: ignore[union-attr]
                return False
        pos = hlen
        for seg, size in mids:
            if type(seg) is bytes:
                i = s.find(seg, pos, end)
                if i < 0:
                    return False
                pos = i + size
            else:
                m = seg.search(s, pos, end)  # type: ignore[union-attr]
                if m is None:
                    return False
                pos = m.end()
        return True

    return match
