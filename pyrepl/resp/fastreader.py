"""hiredis-accelerated request reader with results identical to ``RespReader``.

Theory of operation
-------------------
``HiredisRespReader`` *is* a ``RespReader`` (same buffer, positions, counters, limits and
errors); it only adds a shortcut to ``gets()``. When the reader stands between two requests
and the next byte is ``*``, a ``hiredis.Reader`` parses a window of the buffer (at most 64 KiB)
and the replies it returns are queued; ``gets()`` then pops one request per call. A batch is
kept only as far as it is proven to be exactly what Redis would have parsed, with the same
byte counts.

Positions: while a batch is out, ``_pos`` and ``consumed`` are not advanced per request (that
was a third of the reader's cost). Whatever reads them (``consumed``, ``buffered()``,
``unparsed()``, ``feed()``, a settings change, the pure parser taking over) first *settles*
them at the end of the last request returned: the batch's end once it is all returned, else
that request's end, from the distances between the batch's ``*`` bytes (computed once per
batch, on demand). ``raw_last()`` slices a request's bytes from the same ends.

One request alone in the window (a client waiting for each reply; the window ends in CRLF
and holds one ``*``): ``split(b"\\r\\n")`` gives its lines, and when they are exactly
``*N``, then N times ``$L`` and an argument of L bytes, the window *is* the canonical encoding
of those arguments. No hiredis at all.

A batch, proven without re-encoding anything (the common case):

1. The window holds none of ``+ = ( % ~ > |``: the only RESP types that hiredis-py turns into
   ``bytes`` are ``$ + = (`` and the only ones it turns into a list are ``* ~ > |``; ``%``
   gives a dict. (One ``translate`` maps them to ``*`` and the ``*`` count must not change.)
2. Every reply is a non-empty list of ``bytes`` (``b"".join`` of the elements refuses an int,
   ``None``, a float, an error or a nested list).
3. So every request started with ``*`` and every element was a ``$`` bulk; hiredis's
   ``string2ll`` admits only canonical digits, as Redis's does, and its header lines end in
   ``\\r\\n``: hiredis and Redis read the same lines, lengths and the same two unchecked
   bytes after each bulk. What is left is where each request ends:

   * case A: hiredis consumed the whole window (no error, nothing left over) and the window
     holds exactly one ``*`` per reply. The request starts are that many ``*`` bytes in the
     window, so they are *all* of them;
   * case B: otherwise the replies' canonical size is summed from the lengths (``*N\\r\\n``
     and ``$L\\r\\nL bytes\\r\\n``), and those first bytes must hold exactly one ``*`` per
     reply, for the same reason.

   The distances between the ``*`` bytes are then the requests' sizes (``split``), at C
   speed. A window that does not end in CRLF ends inside a request, which most likely starts
   at its last ``*``: it is left out, so case A is the common one.

Otherwise (rare type bytes in the window, authentication pending, a proto-max-bulk-len below
64 KiB, a failed check) the batch is kept as far as the window *starts with* the concatenated
canonical encodings (``hiredis.pack_command``): RESP is prefix-free and hiredis deterministic,
so that proves the same thing at twice the cost. While ``auth_required`` that path also holds
Redis's unauthenticated limits (count <= 10, elements <= 16384 bytes).

Everything else goes to the pure parser, starting from the same state, so its answer is the
answer: inline requests, ``*0``/``*-1``, simple strings / integers / nested arrays (hiredis
accepts them, Redis does not), the unchecked CRLF variants Redis tolerates, limit violations,
any hiredis error, and a request that is still incomplete (the pure parser then keeps the
partial request, so errors surface as early as in Redis and the unparsed byte count used by
the query-buffer limit is Redis's). After any fallback the shortcut rests until the next
``feed()``, so an unusual stream costs at most one extra attempt per fed chunk. Queued
requests are dropped (and re-parsed) when a limit or ``auth_required`` changes, or when
``feed()`` trips the query-buffer limit.

hiredis is only shown bounded work: at most 64 KiB ahead, and never an aggregate header with a
count of 10000 or more: hiredis-py preallocates the list from the header alone, so
``*2000000000`` would cost gigabytes and seconds (the window is cut before such a header).
"""

from __future__ import annotations

from itertools import accumulate, chain, repeat
from operator import add, sub
from typing import Any

from .reader import (
    _AUTH_MAX_BULK,
    _AUTH_MAX_MULTIBULK,
    _BULK_HEADERS,
    _MBULK_HEADERS,
    ProtocolError,
    RespReader,
)

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a declared dependency
    hiredis = None  # type: ignore[assignment]

__all__ = ["HAVE_HIREDIS", "HiredisRespReader", "make_reader"]

HAVE_HIREDIS = hiredis is not None
# hiredis parses at most this far ahead of the first queued request, fed this much at a time.
_MAX_FED = 64 * 1024
_PIECE = 4096
_SMALL_BULK = max(_BULK_HEADERS.values()) + 1   # the single-request check's lengths are below

# hiredis-py allocates a list of N slots as soon as it reads an aggregate header "*N" (also
# "~N", ">N", "|N", "%N"), before any element arrives: "*2000000000" costs gigabytes and
# seconds. Headers with a count of 10000 or more (more elements than fit in _MAX_FED anyway)
# are never shown to hiredis.
_RARE_TYPES = b"+=(%~>|"     # the type bytes hiredis-py returns as bytes or a list, but $ and *
# One translation serves two checks: rare type bytes become '*' (so the window has more '*'
# than before when it holds any), digits become '0' (so "*00000" finds every header with a
# count of 10000 or more, of any aggregate type, at memchr speed).
_GUARD = bytes.maketrans(_RARE_TYPES + b"0123456789", b"*" * len(_RARE_TYPES) + b"0" * 10)
# Canonical sizes: "*N\r\n" by N (0: None, a "*0" is not a command) and "$L\r\n...\r\n" by L
# (dicts: their bound __getitem__ is twice as fast as a tuple's in map()).
_HEAD_SIZE = {n: 3 + len(str(n)) if n else None for n in range(10000)}
_ELEM_SIZE = {n: 5 + len(str(n)) + n for n in range(16385)}
_head_size = _HEAD_SIZE.__getitem__
_elem_size = _ELEM_SIZE.__getitem__

# A batch: its requests, the bytes they start (at 0), and their absolute start and end.
Batch = tuple[list[list[bytes]], bytes, int, int]
_consumed_get = RespReader.__dict__["consumed"].__get__   # the base class's slot
_consumed_set = RespReader.__dict__["consumed"].__set__

if hiredis is not None:
    _HiReader = hiredis.Reader
    _pack = hiredis.pack_command
    _HiError = hiredis.HiredisError


def _parse(hr: Any, w: bytes) -> tuple[list, bool]:
    """Everything hiredis returns from ``w``, and whether it stopped at an error (what it
    returned before the error is still good).

    ``w`` is fed a piece of ``_PIECE`` bytes at a time: hiredis drops the consumed part of its
    buffer (a memmove of all that follows) at each reply once it has read 1 KiB, so a whole
    64 KiB window of 1 KB requests cost ~30 bytes moved per byte parsed."""
    try:
        n = len(w)
        if n <= _PIECE:
            hr.feed(w)
            return list(iter(hr.gets, False)), False   # (a C loop: ~15 % less than gets())
        replies: list = []
        gets = hr.gets
        for off in range(0, n, _PIECE):
            hr.feed(w, off, min(_PIECE, n - off))
            replies += iter(gets, False)
        return replies, False
    except _HiError:
        pass
    # An error after some good requests: parse again, one by one, to keep those.
    hr = _HiReader()
    hr.feed(w)
    replies: list = []
    try:
        while (res := hr.gets()) is not False:
            replies.append(res)
    except _HiError:
        pass
    return replies, True


class HiredisRespReader(RespReader):
    """``RespReader`` with a hiredis shortcut for canonical multibulk requests."""

    __slots__ = ("_rest", "_hr", "_batch", "_ends")

    def __init__(self, proto_max_bulk_len: int = 512 * 1024 * 1024,
                 client_query_buffer_limit: int = 1024 * 1024 * 1024, *,
                 from_master: bool = False) -> None:
        if hiredis is None:
            raise RuntimeError("hiredis is not installed")
        # The batch out (module doc, "Positions"): (its requests, its bytes, their absolute
        # start, end), None once it is all returned and settled.
        self._batch: Batch | None = None
        self._ends: list[int] | None = None   # each request's absolute end, when computed
        super().__init__(proto_max_bulk_len, client_query_buffer_limit,
                         from_master=from_master)
        self._rest = False  # shortcut disabled until the next feed()
        self._hr = _HiReader()  # hiredis reader, empty between batches (case A leaves it so)

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
        q = self.queue
        if not q:
            return batch[3]
        ends = self._ends or self._request_ends()
        return ends[len(ends) - len(q) - 1]

    def raw_ahead(self, a: int, b: int) -> tuple[bytes, list[int]]:
        """The bytes of requests ``a`` to ``b - 1`` counted from the last one returned (0)
        on into ``queue``, exactly as they arrived (proven canonical), and where each ends
        in them. A caller that runs queued requests itself propagates them from here."""
        reqs, win, start, _ = self._batch  # type: ignore[misc]   (queued: a batch is out)
        k = len(reqs) - len(self.queue) - 1 + a   # the batch's index of request a
        ends = self._ends or self._request_ends()
        lo = ends[k - 1] if k else start
        ends = ends[k:k + b - a]
        return win[lo - start:ends[-1] - start], list(map(sub, ends, repeat(lo)))

    def take_queued(self, keep: int = 0) -> None:
        """Count all but the last ``keep`` of ``queue`` as returned (a caller that ran them
        from the list itself)."""
        q = self.queue
        self.queue = q[:keep] if keep else []

    def _settle(self) -> None:
        """Set ``_pos`` and ``consumed`` to the end of the last request the batch returned
        (gets() returns a batch's first request at once, so there is one)."""
        left = len(self.queue)
        end = self._request_ends()[-1 - left] if left else self._batch[3]  # type: ignore[index]
        self._pos = end - self._base
        _consumed_set(self, end)

    def _request_ends(self) -> list[int]:
        """The batch's requests' absolute ends (computed once, on demand): the distances
        between their '*' bytes (each request has exactly one, module doc)."""
        ends = self._ends
        if ends is None:
            reqs, win, start, end = self._batch  # type: ignore[misc]
            r = len(reqs)
            bodies = win.split(b"*", r)
            ends = list(map(add, accumulate(map(len, bodies[1:r])), range(start + 1, start + r)))
            ends.append(end)
            self._ends = ends
        return ends

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._rest = False
        if self._batch is not None:
            self._settle()
        RespReader.feed(self, data)

    def unparsed(self) -> int:
        if self._batch is not None:
            self._settle()
        return RespReader.unparsed(self)

    def _set_error(self, err: ProtocolError) -> None:
        # The pure reader would not return the queued requests any more.
        self._drop()
        RespReader._set_error(self, err)

    def _settings_changed(self) -> None:
        self._drop()  # the queue was validated with the old limits

    def _drop(self) -> None:
        if self._batch is not None:
            self._settle()   # the pure parser goes on from the last request returned
            self._batch = self._ends = None
        self.queue = []

    def gets(self) -> list[bytes] | None:
        q = self.queue
        if q:
            return q.pop()
        batch = self._batch
        if batch is not None:   # all returned: settle at its end
            self._pos = batch[3] - self._base
            _consumed_set(self, batch[3])
            self._batch = self._ends = None
        if not self._reqtype and self._error is None:
            if self._pos >= len(self._buf):
                return None   # between requests, nothing left
            if not self._rest and self._fill():
                return self.queue.pop()
        return RespReader.gets(self)

    def raw_last(self, argv: list[bytes]) -> bytes | None:
        """The bytes ``argv`` arrived as, when it is the last request returned and was proven
        canonical (so they are exactly its RESP encoding: propagation copies them instead of
        encoding again); else None."""
        batch = self._batch
        if batch is None:
            return None
        reqs, win, start, end = batch
        k = len(reqs) - len(self.queue)   # (>= 1: gets() returns a batch's first at once)
        if reqs[k - 1] is not argv:
            return None
        if len(reqs) == 1:
            return win[:end - start]
        ends = self._ends or self._request_ends()
        return win[(ends[k - 2] if k > 1 else start) - start:ends[k - 1] - start]

    def _fill(self) -> bool:
        """Parse ahead with hiredis from ``_pos`` and queue the proven requests; False (and
        the shortcut rests until the next feed) if the first one is not acceptable."""
        buf = self._buf
        pos = self._pos
        n = len(buf)
        if pos >= n or buf[pos] != 42:
            return self._resting()
        end = n if n - pos <= _MAX_FED else pos + _MAX_FED
        w = buf if not pos and end == n and type(buf) is bytes else bytes(buf[pos:end])
        if w.endswith(b"\r\n") and w.count(b"*") == 1:
            # Most likely one whole request (a client that waits for each reply): its lines
            # must be exactly its canonical encoding, which the split checks at once.
            toks = w.split(b"\r\n")
            count = _MBULK_HEADERS.get(toks[0])
            if count is not None and len(toks) == 2 * count + 2 and \
                    (count <= _AUTH_MAX_MULTIBULK or not self._auth) and \
                    self._maxbulk >= _SMALL_BULK:
                argv = toks[2:-1:2]
                if list(map(len, argv)) == list(map(_BULK_HEADERS.get, toks[1:-1:2])):
                    start = self._base + pos
                    self._batch = ([argv], w, start, start + len(w))
                    self.queue = [argv]
                    return True
        guard = w.translate(_GUARD)
        big = guard.find(b"*00000")
        if big >= 0:   # hiredis must never see that header
            w = w[:big]
            guard = guard[:big]
        stars = w.count(b"*")
        if guard.count(b"*") != stars or self._auth or self._maxbulk < _MAX_FED:
            return self._fill_checked(w) if w else self._resting()
        if not w.endswith(b"\r\n"):
            # The window ends inside a request, which most likely starts at its last '*':
            # leave that one out, so hiredis consumes the whole window (case A below).
            last = w.rfind(b"*")
            if last <= 0:
                return self._resting()   # the first request is incomplete
            w = w[:last]
            stars -= 1
        hr = self._hr
        replies, broken = _parse(hr, w)
        r = len(replies)
        whole = not broken and r == stars and not hr.has_data()   # hiredis consumed all of w
        if not whole:
            self._hr = _HiReader()   # not known to be empty: the next batch gets a new one
        if not r:
            return self._resting()
        # The proof (module doc).
        try:
            b"".join(chain.from_iterable(replies))   # lists of bytes only
        except TypeError:
            return self._fill_checked(w)
        if not all(replies):   # a "*0"
            return self._fill_checked(w)
        if whole:
            size = len(w)   # case A: the requests fill the window, one '*' each
        else:   # case B: their canonical size, and one '*' each in that many bytes
            try:
                size = sum(map(_elem_size, map(len, chain.from_iterable(replies)))) \
                    + sum(map(_head_size, map(len, replies)))
            except KeyError:
                return self._fill_checked(w)
            if size > len(w) or w.count(b"*", 0, size) != r:
                return self._fill_checked(w)
        if broken:
            self._rest = True
        start = self._base + pos
        self._batch = (replies, w, start, start + size)
        self.queue = replies[::-1]
        return True

    def _resting(self) -> bool:
        self._rest = True
        return False

    def _fill_checked(self, w: bytes) -> bool:
        """The general shortcut (rare type bytes in the window, auth pending, a small
        proto-max-bulk-len): hiredis's requests are kept as far as ``w`` starts with their
        canonical encodings."""
        replies, broken = _parse(_HiReader(), w)
        packed = None
        if replies and not self._auth and all(replies):
            try:
                packed = list(map(_pack, map(tuple, replies)))
            except TypeError:
                packed = None
            if packed is not None:
                joined = b"".join(packed)
                if len(joined) > self._maxbulk or not w.startswith(joined):
                    packed = None
        if packed is None:
            packed = self._valid_prefix(replies, w, 0)
            if len(packed) < len(replies):
                broken = True
                del replies[len(packed):]
        if broken:
            self._rest = True
        if not replies:
            self._rest = True
            return False
        start = self._base + self._pos
        ends = list(accumulate(map(len, packed), initial=start))
        del ends[0]
        self._batch = (replies, w, start, ends[-1])
        self.queue = replies[::-1]
        self._ends = ends   # (known here; '*' distances would not do: '*' may be in payloads)
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
