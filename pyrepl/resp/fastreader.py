"""hiredis-accelerated request reader with results identical to ``RespReader``.

Theory of operation
-------------------
``HiredisRespReader`` *is* a ``RespReader`` (same buffer, positions, counters, limits and
errors); it only adds a shortcut in ``gets()`` for the common case. When the reader stands
between two requests and the next byte is ``*``, a ``hiredis.Reader`` (fed lazily from our
buffer in 16 KiB slices, so hiredis never holds one huge buffer) parses the next reply. The
reply is taken only if it is proven to be exactly what Redis would have parsed:

* it is a non-empty list, ``hiredis.pack_command(tuple(argv))`` succeeds, and our buffer at
  the request start *starts with* that canonical encoding. hiredis parses deterministically
  and RESP is prefix-free, so hiredis then consumed exactly those bytes, every element was a
  ``$`` bulk string with canonical digits, and Redis parses the same bytes to the same argv
  with the same byte count (canonical header lines hold no CR, LF or NUL);
* no element exceeds proto-max-bulk-len, and while ``auth_required`` the count is <= 10 and
  no element exceeds 16384 bytes.

Everything else goes to the pure parser, starting from the same state, so its answer is the
answer: inline requests, ``*0``/``*-1``, simple strings / integers / nested arrays (hiredis
accepts them, Redis does not), unchecked CRLF variants Redis tolerates, limit violations, any
hiredis error, and a request that is still incomplete (the pure parser then keeps the partial
request, so errors surface as early as in Redis and the unparsed byte count used by the
query-buffer limit is Redis's). The hiredis reader is dropped whenever the pure parser moves
the position; after any fallback the shortcut rests until the next ``feed()``, which bounds
the extra work an unusual stream can cause to one attempt per fed chunk.
"""

from __future__ import annotations

from .reader import RespReader

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a declared dependency
    hiredis = None

__all__ = ["HAVE_HIREDIS", "HiredisRespReader", "make_reader"]

HAVE_HIREDIS = hiredis is not None
_SLICE = 16 * 1024  # bytes handed to hiredis at a time (Redis's PROTO_IOBUF_LEN)
_AUTH_MAX_MULTIBULK = 10
_AUTH_MAX_BULK = 16384

if hiredis is not None:
    _HiReader = hiredis.Reader
    _pack = hiredis.pack_command
    _HiError = hiredis.HiredisError


class HiredisRespReader(RespReader):
    """``RespReader`` with a hiredis shortcut for canonical multibulk requests."""

    __slots__ = ("_hr", "_hsync", "_hfed", "_rest")

    def __init__(self, proto_max_bulk_len: int = 512 * 1024 * 1024,
                 client_query_buffer_limit: int = 1024 * 1024 * 1024, *,
                 from_master: bool = False) -> None:
        if hiredis is None:
            raise RuntimeError("hiredis is not installed")
        super().__init__(proto_max_bulk_len, client_query_buffer_limit,
                         from_master=from_master)
        self._hr = None  # hiredis.Reader in sync with our parse position, or None
        self._hsync = -1  # absolute offset where _hr's next reply starts
        self._hfed = 0  # absolute offset up to which _hr has been fed
        self._rest = False  # shortcut disabled until the next feed()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._rest = False
        RespReader.feed(self, data)

    def gets(self) -> list[bytes] | None:
        if self._rest or self._reqtype or self._error is not None:
            return RespReader.gets(self)
        buf = self._buf
        pos = self._pos
        n = len(buf)
        if pos >= n or buf[pos] != 42:
            self._rest = True
            return RespReader.gets(self)
        base = self._base
        hr = self._hr
        if hr is None or self._hsync != base + pos:
            hr = self._hr = _HiReader()
            hfed = base + pos
        else:
            hfed = self._hfed
        try:
            while True:
                res = hr.gets()
                if res is not False:
                    break
                off = hfed - base
                if off >= n:
                    break
                k = n - off
                if k > _SLICE:
                    k = _SLICE
                hr.feed(buf, off, k)
                hfed += k
            enc = _pack(tuple(res)) if type(res) is list and res else None
        except (_HiError, TypeError):
            enc = None
        if enc is None or not buf.startswith(enc, pos):
            return self._fallback()
        size = len(enc)
        if size > self.proto_max_bulk_len and not self.from_master:
            if max(map(len, res)) > self.proto_max_bulk_len:
                return self._fallback()
        if self.auth_required and (len(res) > _AUTH_MAX_MULTIBULK or (
                size > _AUTH_MAX_BULK and max(map(len, res)) > _AUTH_MAX_BULK)):
            return self._fallback()
        pos += size
        self._pos = pos
        self._hsync = self.consumed = base + pos
        self._hfed = hfed
        return res

    def _fallback(self) -> list[bytes] | None:
        self._hr = None
        self._rest = True
        return RespReader.gets(self)


def make_reader(proto_max_bulk_len: int = 512 * 1024 * 1024,
                client_query_buffer_limit: int = 1024 * 1024 * 1024, fast: bool = True, *,
                from_master: bool = False) -> RespReader:
    """The hiredis-backed reader when ``fast`` and hiredis imports, else the pure one."""
    if fast and hiredis is not None:
        return HiredisRespReader(proto_max_bulk_len, client_query_buffer_limit,
                                 from_master=from_master)
    return RespReader(proto_max_bulk_len, client_query_buffer_limit, from_master=from_master)
