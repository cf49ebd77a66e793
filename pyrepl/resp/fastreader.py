"""hiredis-accelerated request reader with results identical to ``RespReader``.

Theory of operation
-------------------
``HiredisRespReader`` *is* a ``RespReader`` (same buffer, positions, counters, limits and
errors); it only adds a shortcut to ``gets()``. When the reader stands between two requests
and the next byte is ``*``, a ``hiredis.Reader`` parses ahead and the replies it returns are
queued; ``gets()`` then pops one request per call, advancing ``_pos`` / ``consumed`` exactly as
the pure parser would. A batch of replies is kept only as far as it is proven to be exactly
what Redis would have parsed:

* every reply is a non-empty list, ``hiredis.pack_command(tuple(argv))`` succeeds, and our
  buffer *starts with* the concatenated canonical encodings. hiredis parses deterministically
  and RESP is prefix-free, so hiredis then consumed exactly those bytes, every element was a
  ``$`` bulk string with canonical digits, and Redis parses the same bytes to the same argv
  with the same byte count (canonical header lines hold no CR, LF or NUL). A length check
  alone would not do: ``=7\r\ntxt:abc\r\n`` + ``+0123456789\r\n`` decodes to two byte
  strings whose canonical encoding has exactly the same length;
* no element exceeds proto-max-bulk-len, and while ``auth_required`` the count is <= 10 and
  no element exceeds 16384 bytes.

Everything else goes to the pure parser, starting from the same state, so its answer is the
answer: inline requests, ``*0``/``*-1``, simple strings / integers / nested arrays (hiredis
accepts them, Redis does not), the unchecked CRLF variants Redis tolerates, limit violations,
any hiredis error, and a request that is still incomplete (the pure parser then keeps the
partial request, so errors surface as early as in Redis and the unparsed byte count used by
the query-buffer limit is Redis's). After any fallback the shortcut rests until the next
``feed()``, so an unusual stream costs at most one extra attempt per fed chunk. Queued
requests are dropped (and re-parsed) when a limit or ``auth_required`` changes, or when
``feed()`` trips the query-buffer limit.

hiredis is only shown bounded work: it is fed from our buffer in slices (4 KiB, then 16 KiB),
a request still incomplete after 4 KiB is left to the pure parser (linear for big arguments,
where hiredis has no advantage), a batch stops 64 KiB ahead (hiredis memmoves its buffer per
reply), and an aggregate header with a count of 10000 or more is never fed to it: hiredis-py
preallocates the list from the header alone, so ``*2000000000`` would cost gigabytes and
seconds.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

from .reader import ProtocolError, RespReader

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a declared dependency
    hiredis = None  # type: ignore[assignment]

__all__ = ["HAVE_HIREDIS", "HiredisRespReader", "make_reader"]

HAVE_HIREDIS = hiredis is not None
_SLICE = 16 * 1024  # bytes handed to hiredis at a time (Redis's PROTO_IOBUF_LEN)
# A request that is still incomplete after this many bytes is left to the pure parser, which
# is linear (and as fast) for big arguments; hiredis only pays off for small requests.
_FIRST_MAX = 4 * 1024
# hiredis is fed at most this far ahead of the first queued request (it memmoves its buffer
# per reply, and rescans an unfinished line on every call).
_MAX_FED = 64 * 1024
_AUTH_MAX_MULTIBULK = 10
_AUTH_MAX_BULK = 16384

# hiredis-py allocates a list of N slots as soon as it reads an aggregate header "*N" (also
# "~N", ">N", "|N"), before any element arrives: "*2000000000" costs gigabytes and seconds.
# Headers with a count of 10000 or more (more elements than fit in _MAX_FED anyway) are never
# shown to hiredis. The rarely used types are found with memchr-speed find() first.
_BIG_STAR = re.compile(rb"\*[1-9][0-9]{4}")
_RARE_AGGREGATES = (b"%", b"~", b">", b"|")
# The rare aggregate types are mapped to '*' so the literal-prefixed pattern (a memchr-speed
# search) finds them too; a character-class pattern would run at ~100 MB/s, and '>' is common
# in payloads (redis-benchmark's values contain it).
_AS_STAR = bytes.maketrans(b"%~>|", b"****")


def _big_aggregate(buf: bytes | bytearray, start: int, end: int) -> int:
    """Position of the first big aggregate header starting in [start, end), or -1."""
    stop = end + 5  # let a header straddling ``end`` be seen whole
    for c in _RARE_AGGREGATES:
        if buf.find(c, start, end) >= 0:
            m = _BIG_STAR.search(buf[start:stop].translate(_AS_STAR))
            return start + m.start() if m is not None and start + m.start() < end else -1
    m = _BIG_STAR.search(buf, start, stop)
    return m.start() if m is not None and m.start() < end else -1


if hiredis is not None:
    _HiReader = hiredis.Reader
    _pack = hiredis.pack_command
    _HiError = hiredis.HiredisError


class HiredisRespReader(RespReader):
    """``RespReader`` with a hiredis shortcut for canonical multibulk requests."""

    __slots__ = ("_hr", "_hsync", "_hfed", "_rest", "_q")

    def __init__(self, proto_max_bulk_len: int = 512 * 1024 * 1024,
                 client_query_buffer_limit: int = 1024 * 1024 * 1024, *,
                 from_master: bool = False) -> None:
        if hiredis is None:
            raise RuntimeError("hiredis is not installed")
        super().__init__(proto_max_bulk_len, client_query_buffer_limit,
                         from_master=from_master)
        self._hr: Any = None  # hiredis.Reader whose next reply starts at _hsync, or None
        self._hsync = -1  # absolute stream offset
        self._hfed = 0  # absolute offset up to which _hr has been fed
        self._rest = False  # shortcut disabled until the next feed()
        # validated requests with their absolute end offsets, last one first
        self._q: list[tuple[list[bytes], int]] = []

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._rest = False
        RespReader.feed(self, data)

    def _set_error(self, err: ProtocolError) -> None:
        # The pure reader would not return the queued requests any more.
        self._drop()
        RespReader._set_error(self, err)

    def _settings_changed(self) -> None:
        self._drop()  # the queue was validated with the old limits

    def _drop(self) -> None:
        self._q = []
        self._hr = None

    def gets(self) -> list[bytes] | None:
        q = self._q
        if q or (not self._rest and not self._reqtype and self._error is None
                 and self._fill()):
            argv, end = self._q.pop()
            self._pos = end - self._base
            self.consumed = end
            return argv
        return RespReader.gets(self)

    def _fill(self) -> bool:
        """Parse ahead with hiredis from ``_pos`` and queue the validated requests; False
        (and the shortcut rests until the next feed) if the first one is not acceptable."""
        buf = self._buf
        pos = self._pos
        n = len(buf)
        if pos >= n or buf[pos] != 42:
            self._rest = True
            return False
        base = self._base
        start = base + pos
        hr = self._hr
        if hr is None or self._hsync != start:
            hr = self._hr = _HiReader()
            hfed = start
        else:
            hfed = self._hfed
        limit = start + _MAX_FED
        replies: list = []
        append = replies.append
        broken = False
        try:
            while True:
                res = hr.gets()
                if res is not False:
                    append(res)
                    continue
                off = hfed - base
                if off >= n or hfed >= limit:
                    break
                if replies:
                    k = _SLICE
                elif hfed - start >= _FIRST_MAX:
                    break  # a big request: the pure parser does it in linear time
                else:
                    k = _FIRST_MAX
                if k > n - off:
                    k = n - off
                cut = _big_aggregate(buf, off, off + k)
                if cut >= 0:
                    k = cut - off  # hiredis must never see that header
                    if not k:
                        break
                hr.feed(buf, off, k)
                hfed += k
        except _HiError:
            broken = True  # hiredis is stuck; what it returned before is still good
        # Validate: the buffer must start with the canonical encodings (see module doc).
        # First the whole batch at C speed; the per-request loop finds the valid prefix.
        packed = None
        if replies and not self._auth and all(replies):
            try:
                packed = list(map(_pack, map(tuple, replies)))
            except TypeError:
                packed = None
            if packed is not None:
                joined = b"".join(packed)
                if len(joined) > self._maxbulk or not buf.startswith(joined, pos):
                    packed = None
        if packed is None:
            packed = self._valid_prefix(replies, buf, pos)
            if len(packed) < len(replies):
                broken = True
                del replies[len(packed):]
        if broken:
            self._hr = None
            self._rest = True
        if not replies:
            return False
        ends = list(accumulate(map(len, packed), initial=start))
        if not broken:
            self._hsync = ends[-1]
            self._hfed = hfed
        del ends[0]
        q = list(zip(replies, ends, strict=True))
        q.reverse()
        self._q = q
        return True

    def _valid_prefix(self, replies: list, buf: bytes | bytearray, pos: int) -> list[bytes]:
        """Canonical encodings of the longest acceptable prefix of ``replies``."""
        maxbulk = self._maxbulk
        auth = self._auth
        out: list[bytes] = []
        for res in replies:
            if type(res) is not list or not res:
                break
            try:
                enc = _pack(tuple(res))
            except TypeError:
                break
            if not buf.startswith(enc, pos):
                break
            size = len(enc)
            if size > maxbulk and max(map(len, res)) > maxbulk:
                break
            if auth and (len(res) > _AUTH_MAX_MULTIBULK or (
                    size > _AUTH_MAX_BULK and max(map(len, res)) > _AUTH_MAX_BULK)):
                break
            pos += size
            out.append(enc)
        return out


def make_reader(proto_max_bulk_len: int = 512 * 1024 * 1024,
                client_query_buffer_limit: int = 1024 * 1024 * 1024, fast: bool = True, *,
                from_master: bool = False) -> RespReader:
    """The hiredis-backed reader when ``fast`` and hiredis imports, else the pure one."""
    if fast and hiredis is not None:
        return HiredisRespReader(proto_max_bulk_len, client_query_buffer_limit,
                                 from_master=from_master)
    return RespReader(proto_max_bulk_len, client_query_buffer_limit, from_master=from_master)
