"""The request reader's fast path: ``RespReader`` with canonical multibulk requests parsed in
C (``pyrepl/resp/_scan.c``), results identical to the pure reader's.

Theory of operation
-------------------
``FastRespReader`` *is* a ``RespReader`` (same buffer, positions, counters, limits and
errors); it only adds a shortcut to ``gets()``. When the reader stands between two requests,
``_scan.scan`` parses the *canonical* multibulk requests that lie complete in the next 64 KiB
of the buffer (``*N``, then N times ``$L`` and L bytes, every line ended by CRLF, numbers as
``string2ll`` reads them without sign or leading zero, within the limits in force) in one C
call, and returns them with where each ends; ``gets()`` then pops one request per call. A
client's reader (not a master's, which must never send inline) takes *simple* inline requests
the same way when the next request is one (redis-benchmark's PING_INLINE, a telnet session):
lines without quotes, NUL, ``\\v`` or ``\\f`` and with an argument, which sdssplitargs and the
pure reader both split on space, tab and CR (pyrepl/resp/scan.py); a batch is of one kind.

Why this is exact: Redis's processMultibulkBuffer and the pure reader read such bytes the same
way (the same arguments, the same end), and the scan stops at the first byte that is anything
else (a request of the other kind, an inline line that is not simple, ``*0``, the unchecked
bytes after a CR or after bulk data that Redis tolerates, a limit exceeded, an incomplete
request). That request is the pure reader's, from
the same state, so its answer is the answer, errors included; the shortcut then rests until
the next ``feed()``, so an unusual stream costs at most one extra scan per fed chunk. While
``auth_required`` the scan takes Redis's unauthenticated limits (count <= 10, bulks <= 16384
bytes), so a request beyond them goes to the pure reader, which refuses it. Queued requests
are dropped (and parsed again) when a limit or ``auth_required`` changes, or when ``feed()``
trips the query-buffer limit. The scan allocates nothing for a request until the bytes that
could hold its arguments have arrived, so ``*2000000000`` costs nothing.

Positions: while a batch is out, ``_pos`` and ``consumed`` are not advanced per request.
Whatever reads them (``consumed``, ``buffered()``, ``unparsed()``, ``feed()``, a settings
change, the pure parser taking over) first *settles* them at the end of the last request
returned. ``raw_last()`` and ``raw_ahead()`` slice requests' bytes by the same ends: a multibulk
request the scan accepted is exactly the RESP encoding of its arguments, so propagation copies
the bytes instead of encoding them again (an inline batch has no bytes: ``raw_last()`` says
None, ``raw_ahead()`` encodes).

Why C (bench/RESULTS.md, "The request reader in C"): in Python, proving that a hiredis parse
is Redis's cost more than the parse itself (6.5k instructions a request at -P16, 27k for a
lone request, against 4k for the whole Python floor's SET). As plain Python (pyrepl/native.py)
the scan is its reference in pyrepl/resp/scan.py and ``first`` is ``feed_first``.
"""

from __future__ import annotations

from itertools import accumulate, repeat
from operator import sub

from pyrepl import native

from .reader import _AUTH_MAX_BULK, _AUTH_MAX_MULTIBULK, _INT_MAX, ProtocolError, RespReader
from .scan import scan as _scan
from .writer import encode_command

__all__ = ["FastRespReader", "first", "make_reader", "release"]

# A scan starts no request this far or further past the first one.
_WINDOW = 64 * 1024
_STAR = 42   # (b"*": a multibulk request; anything else at a request's start is inline)

# A batch: its requests, the bytes they lie in, the absolute offset of those bytes' first,
# the absolute start of the first request, and each request's absolute end (no bytes, None,
# for an inline batch: they are not the requests' RESP encoding).
Batch = tuple[list[list[bytes]], bytes | None, int, int, list[int]]
_consumed_get = RespReader.__dict__["consumed"].__get__   # the base class's slot
_consumed_set = RespReader.__dict__["consumed"].__set__


class FastRespReader(RespReader):
    """``RespReader`` with canonical multibulk requests parsed in C."""

    __slots__ = ("_rest", "_batch", "_count_max", "_bulk_max", "spent")

    def __init__(self, proto_max_bulk_len: int = 512 * 1024 * 1024,
                 client_query_buffer_limit: int = 1024 * 1024 * 1024, *,
                 from_master: bool = False) -> None:
        # The batch out (module doc, "Positions"); None once it is all returned and settled.
        self._batch: Batch | None = None
        # The last feed_first() scanned its bytes to the end: once ``queue`` is empty there
        # is nothing more (the caller need not call gets() to learn it; the batch is settled
        # by whatever reads the positions, or by the next feed_first()).
        self.spent = False
        super().__init__(proto_max_bulk_len, client_query_buffer_limit,
                         from_master=from_master)
        self._rest = False  # shortcut disabled until the next feed()
        self._scan_limits()

    # ``consumed`` (the base class's slot) is brought up to date when read.
    @property  # type: ignore[override]
    def consumed(self) -> int:
        if self._batch is not None:
            self._settle()
        return _consumed_get(self)

    @consumed.setter
    def consumed(self, value: int) -> None:
        _consumed_set(self, value)

    def consumed_now(self) -> int:
        """``consumed``, without settling ``_pos`` (a caller per request: the replica)."""
        batch = self._batch
        if batch is None:
            return _consumed_get(self)
        ends = batch[4]
        return ends[len(ends) - len(self.queue) - 1]

    def raw_ahead(self, a: int, b: int) -> tuple[bytes, list[int]]:
        """The bytes of requests ``a`` to ``b - 1`` counted from the last one returned (0)
        on into ``queue``, exactly as they arrived, and where each ends in them. A caller
        that runs queued requests itself propagates them from here."""
        reqs, win, wbase, start, ends = self._batch  # type: ignore[misc]  # a batch is out
        k = len(reqs) - len(self.queue) - 1 + a   # the batch's index of request a
        if win is None:   # an inline batch: the requests' RESP encoding
            parts = list(map(encode_command, reqs[k:k + b - a]))
            return b"".join(parts), list(accumulate(map(len, parts)))
        lo = ends[k - 1] if k else start
        ends = ends[k:k + b - a]
        return win[lo - wbase:ends[-1] - wbase], list(map(sub, ends, repeat(lo)))

    def release(self) -> None:
        """Let a spent read's requests go once they have all run: the batch lists every one
        (their arguments) and would keep them to the next read, where Redis frees a request's
        arguments as it completes (a pipeline of 1,000 small writes held ~300 KB), and the
        read's bytes with them: all parsed, the buffer starts empty at the read's end."""
        batch = self._batch
        if batch is not None and self.spent and not self.queue:
            end = batch[4][-1]   # (the buffer's end: the read was scanned to it)
            _consumed_set(self, end)
            self._batch = None
            self._buf = b""
            self._base = end
            self._pos = 0

    def _drop_parsed(self) -> None:
        """Everything fed is parsed (``_pos`` at the buffer's end): the buffer starts empty
        from there, and the read's bytes go now rather than at the next read."""
        self._base += len(self._buf)
        self._buf = b""
        self._pos = 0

    def take_queued(self, keep: int = 0) -> None:
        """Count all but the last ``keep`` of ``queue`` as returned (a caller that ran them
        from the list itself)."""
        q = self.queue
        self.queue = q[:keep] if keep else []

    def _settle(self) -> None:
        """Set ``_pos`` and ``consumed`` to the end of the last request the batch returned
        (gets() returns a batch's first request at once, so there is one)."""
        end = self._batch[4][-1 - len(self.queue)]  # type: ignore[index]
        self._pos = end - self._base
        _consumed_set(self, end)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._rest = False
        self.spent = False
        if self._batch is not None:
            self._settle()
        RespReader.feed(self, data)

    def feed_first(self, data: bytes) -> list[bytes] | None:
        """``feed(data)``, then ``gets()`` in the common case, in one call: the reader stood
        between requests with nothing left and ``data`` starts with a request the scan
        takes. Else None, and the caller's ``gets()`` goes on as after ``feed()``."""
        if type(data) is not bytes or len(data) > self.client_query_buffer_limit:
            self.feed(data)   # (what feed() checks, settles or raises: the general path)
            return None
        buf = self._buf
        batch = self._batch
        if batch is not None:
            if not self.spent or self.queue:
                self.feed(data)
                return None
            # the last read, all returned: settled here (_pos and _batch are set below)
            _consumed_set(self, batch[4][-1])
        elif self._pos != len(buf) or self._reqtype or self._error is not None:
            self.feed(data)
            return None
        self._rest = False
        self._fed += len(data)
        base = self._base = self._base + len(buf)
        self._pos = 0
        self._buf = data
        inline = not self.from_master
        reqs, ends = _scan(data, 0, _WINDOW, self._count_max, self._bulk_max, base, inline)
        if not reqs:
            self._batch = None
            self._rest = True
            self.spent = False
            return None
        self._batch = (reqs, None if inline and data[0] != _STAR else data, base, base, ends)
        self.queue = reqs[:0:-1]
        self.spent = ends[-1] == base + len(data)
        return reqs[0]

    def unparsed(self) -> int:
        if self._batch is not None:
            self._settle()
        return RespReader.unparsed(self)

    def _set_error(self, err: ProtocolError) -> None:
        # The pure reader would not return the queued requests any more.
        self._drop()
        RespReader._set_error(self, err)

    def _settings_changed(self) -> None:
        self._drop()  # the queue was parsed with the old limits
        self._scan_limits()

    def _scan_limits(self) -> None:
        """The scan's count and bulk limits: Redis's unauthenticated ones while
        ``auth_required``."""
        if self._auth:
            self._count_max = _AUTH_MAX_MULTIBULK
            self._bulk_max = min(self._maxbulk, _AUTH_MAX_BULK)
        else:
            self._count_max = _INT_MAX
            self._bulk_max = self._maxbulk

    def _drop(self) -> None:
        self.spent = False   # (the dropped requests are parsed again: gets() must run)
        if self._batch is not None:
            self._settle()   # the pure parser goes on from the last request returned
            self._batch = None
        self.queue = []

    def gets(self) -> list[bytes] | None:
        q = self.queue
        if q:
            return q.pop()
        batch = self._batch
        if batch is not None:   # all returned: settle at its end
            end = batch[4][-1]
            self._pos = end - self._base
            _consumed_set(self, end)
            self._batch = None
        if not self._reqtype and self._error is None:
            if self._pos >= len(self._buf):
                if self._buf:
                    self._drop_parsed()
                return None   # between requests, nothing left
            if not self._rest and self._fill():
                return self.queue.pop()
        return RespReader.gets(self)

    def raw_last(self, argv: list[bytes]) -> bytes | None:
        """The bytes ``argv`` arrived as, when it is the last request returned (so they are
        exactly its RESP encoding: propagation copies them instead of encoding again); else
        None."""
        batch = self._batch
        if batch is None:
            return None
        reqs, win, wbase, start, ends = batch
        k = len(reqs) - len(self.queue)   # (>= 1: gets() returns a batch's first at once)
        if reqs[k - 1] is not argv or win is None:   # (None: an inline batch)
            return None
        return win[(ends[k - 2] if k > 1 else start) - wbase:ends[k - 1] - wbase]

    def _fill(self) -> bool:
        """Scan from ``_pos`` and queue the requests; False (and the shortcut rests until the
        next feed) when the next one is not the scan's."""
        buf = self._buf
        pos = self._pos
        base = self._base
        inline = not self.from_master
        reqs, ends = _scan(buf, pos, _WINDOW, self._count_max, self._bulk_max, base, inline)
        if not reqs:
            self._rest = True
            return False
        start = base + pos
        raw = not inline or buf[pos] == _STAR   # (else an inline batch: no bytes to copy)
        if type(buf) is bytes:
            self._batch = (reqs, buf if raw else None, base, start, ends)
        else:   # a bytearray is appended to in place: keep a copy of the batch's bytes
            win = bytes(buf[pos:ends[-1] - base])
            self._batch = (reqs, win if raw else None, start, start, ends)
            if ends[-1] - base == len(buf):
                # the batch runs to the end: the copy is the buffer from here on, and the
                # bytearray (a big request's bytes before it) goes
                self._buf = win
                self._base = start
                self._pos = 0
        self.queue = reqs[::-1]
        return True


def _first_reference(reader: RespReader, data: bytes) -> list[bytes] | None:
    """``reader.feed_first(data)``: what ``_scan.first`` does in C in its common case."""
    return reader.feed_first(data)


def _release_reference(reader: RespReader) -> None:
    """``reader.release()``: what ``_scan.release`` does in C in its common case."""
    reader.release()


_native = native.load("pyrepl.resp._scan")
if _native is None:
    first = _first_reference
    release = _release_reference
else:
    first = _native.first   # (feed_first's common case in C)
    release = _native.release   # (release()'s, the batch kept as first()'s spare)
    _native.bind(FastRespReader, RespReader, _WINDOW)


def make_reader(proto_max_bulk_len: int = 512 * 1024 * 1024,
                client_query_buffer_limit: int = 1024 * 1024 * 1024, fast: bool = True, *,
                from_master: bool = False) -> RespReader:
    """The fast reader when ``fast``, else the pure one (the reference: tests, debugging)."""
    cls = FastRespReader if fast else RespReader
    return cls(proto_max_bulk_len, client_query_buffer_limit, from_master=from_master)
