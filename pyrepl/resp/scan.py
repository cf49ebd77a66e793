"""The canonical-request scan: ``_scan.scan`` (pyrepl/resp/_scan.c), or this Python reference
of it when pyrepl runs as plain Python (pyrepl/native.py).

``scan(buf, pos, window, maxcount, maxbulk, base, inline) -> (requests, ends)`` parses the
*canonical* multibulk requests that lie complete in ``buf`` from ``pos`` on: ``*N\\r\\n`` with N
in 1..maxcount written as Redis's string2ll reads it (no sign, no leading zero, at most 18
digits), then N times ``$L\\r\\n``, L bytes and ``\\r\\n``, L in 0..maxbulk written the same way.
It stops at the first byte that is anything else (the pure RespReader reads that), and starts
no request at or past ``pos + window``. With ``inline`` (a client's reader, not a master's),
when the byte at ``pos`` is not ``*`` it parses *simple* inline requests instead, up to the
next ``*``: lines ended by LF (a CR before it dropped) without NUL, quotes, ``\\v`` or ``\\f``,
split on space, tab and CR into one argument or more; sdssplitargs and the pure reader read
such a line the same way, and any other line (quotes, an empty line, no LF yet) stops the
scan. A batch is all multibulk or all inline; an inline one's bytes are not its requests'
RESP encoding (propagation encodes them). ``ends``: where each request ends, as ``base`` + its
end offset in ``buf``. The C file's comment says why this is exact; tests/unit/test_resp_scan.py
checks both against the pure reader on random streams.
"""

from __future__ import annotations

from pyrepl import native

from .reader import _SLOW_SPLIT

_CR, _LF, _STAR, _DOLLAR, _ZERO, _NINE = 13, 10, 42, 36, 48, 57
# What makes an inline line not simple: what sends split_args past bytes.split() (quotes,
# the isspace() bytes sdssplitargs does not split on), a NUL (Redis's strchr stops there)
_NOT_SIMPLE = (*_SLOW_SPLIT, b"\0")


def _number(buf: bytes | bytearray | memoryview, p: int, end: int) -> tuple[int, int]:
    """A canonical decimal at p ended by CRLF: (its value, the offset past the LF), or
    (-1, p) when it is not canonical or not complete."""
    start = p
    if p >= end:
        return -1, p
    if buf[p] == _ZERO:
        p += 1
        v = 0
    elif _ZERO < buf[p] <= _NINE:
        v = 0
        while p < end and _ZERO <= buf[p] <= _NINE:
            if p - start >= 18:
                return -1, p
            v = v * 10 + buf[p] - _ZERO
            p += 1
    else:
        return -1, p
    if end - p < 2 or buf[p] != _CR or buf[p + 1] != _LF:
        return -1, p
    return v, p + 2


def _inline_request(data: bytes, p: int) -> tuple[list[bytes], int] | None:
    """A simple inline request at p (module doc): its arguments and the offset past its LF,
    or None."""
    nl = data.find(b"\n", p)
    if nl < 0:
        return None
    line = data[p:nl]
    if line.endswith(b"\r"):
        line = line[:-1]
    if any(b in line for b in _NOT_SIMPLE):
        return None
    argv = line.split()   # (split_args' own way for such a line: space, tab and CR here)
    return (argv, nl + 1) if argv else None


def scan_reference(buf: bytes | bytearray | memoryview, pos: int, window: int, maxcount: int,
                   maxbulk: int, base: int, inline: bool
                   ) -> tuple[list[list[bytes]], list[int]]:
    """``_scan.scan`` in Python (module doc)."""
    buf = memoryview(buf)   # (a TypeError for what is not a buffer, as the C's)
    end = len(buf)
    if pos < 0 or pos > end:
        raise ValueError("pos out of range")
    stop = pos + window if 0 <= window < end - pos else end
    reqs: list[list[bytes]] = []
    ends: list[int] = []
    p = pos
    if inline and p < stop and buf[p] != _STAR:   # an inline batch
        data = buf.tobytes()
        while p < stop and data[p] != _STAR:
            got = _inline_request(data, p)
            if got is None:
                break
            reqs.append(got[0])
            p = got[1]
            ends.append(base + p)
        return reqs, ends
    while p < stop and buf[p] == _STAR:
        n, q = _number(buf, p + 1, end)
        if n <= 0 or n > maxcount or (end - q) // 6 < n:
            break
        argv: list[bytes] = []
        for _ in range(n):
            if q >= end or buf[q] != _DOLLAR:
                break
            blen, d = _number(buf, q + 1, end)
            if blen < 0 or blen > maxbulk or end - d < blen + 2 or buf[d + blen] != _CR or \
                    buf[d + blen + 1] != _LF:
                break
            argv.append(bytes(buf[d:d + blen]))
            q = d + blen + 2
        if len(argv) < n:   # not canonical or not complete: the pure reader's request
            break
        reqs.append(argv)
        ends.append(base + q)
        p = q
    return reqs, ends


_native = native.load("pyrepl.resp._scan")
scan = scan_reference if _native is None else _native.scan
