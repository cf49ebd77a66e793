"""Sans-io reader for client requests (server side), byte-exact with Redis 7.0.15.

Theory of operation
-------------------
This is ``processInputBuffer`` / ``processMultibulkBuffer`` / ``processInlineBuffer`` from
Redis's networking.c, re-expressed over a Python buffer. ``feed()`` appends bytes, ``gets()``
returns the next complete argv (``list[bytes]``) or ``None`` when more bytes are needed, and
raises ``ProtocolError`` where Redis would reply ``-ERR Protocol error: ...`` and close.

* A request whose first byte is ``*`` is a multibulk (``*N\\r\\n`` then N times
  ``$len\\r\\n<len bytes>\\r\\n``); anything else is an inline command: one line ending in
  ``\\n`` (a ``\\r`` before it is dropped) split like ``sdssplitargs`` (quotes, escapes).
* Like Redis, header lines end at the first ``\\r`` and the byte after it is skipped without
  being checked; the two bytes after bulk data are skipped unchecked too. Like Redis's use of
  ``strchr``, a NUL byte before the ``\\r`` (or before the ``\\n`` of an inline line) hides it:
  the line is then "not complete yet", until it outgrows PROTO_INLINE_MAX_SIZE.
* Numbers are parsed like ``string2ll``: optional ``-``, no ``+``, no leading zeros, no
  spaces, at most 20 characters, within a signed 64-bit range.
* ``*0`` / ``*-N`` and empty inline lines are skipped; their bytes count as consumed.
* Parsing is incremental: a partially received multibulk keeps its finished arguments, so the
  "unparsed" byte count (Redis's ``sdslen(querybuf)``) excludes them, exactly as in Redis.
* client-query-buffer-limit is checked like readQueryFromClient, once per ``feed()`` (Redis:
  once per read(2)) on the unparsed bytes including the new chunk, before any of it is parsed;
  the next ``gets()`` raises ``QueryBufferLimitExceeded`` (Redis closes without a reply).
* Errors: ``str(e)`` is the exact error line Redis sends after ``-``; ``e.reply`` tells whether
  Redis sends it at all. After an error the reader is dead: every later ``gets()`` raises the
  same exception and ``feed()`` ignores its input.
* Master links (``from_master``) and pending authentication (``auth_required``) change the
  limits exactly as CLIENT_MASTER and ``authRequired()`` do in networking.c.

Offsets: ``consumed`` is the absolute number of stream bytes that belong to commands returned
(or skipped) so far; it is exact, so a replica can use it as its replication offset.
``buffered()`` is ``bytes fed - consumed``.

Buffer: ``_buf`` is a ``bytes`` object while the unparsed tail left by the previous chunk is
small (<= 4 KiB: ``feed()`` concatenates it with the new chunk, and slicing yields argument
``bytes`` with a single copy); with a larger tail (a big partial request) it becomes a
``bytearray`` that is appended to, so a big bulk argument arriving in many chunks costs linear
time. Parsed bytes are dropped on ``feed()``; dropping is amortised (only once at least half
of the buffer is parsed).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "PROTO_INLINE_MAX_SIZE",
    "PROTO_MBULK_BIG_ARG",
    "ProtocolError",
    "QueryBufferLimitExceeded",
    "RespReader",
    "split_args",
    "string2ll",
]

PROTO_INLINE_MAX_SIZE = 64 * 1024  # server.h: max inline request / header line
PROTO_MBULK_BIG_ARG = 32 * 1024  # server.h: "big" bulk argument threshold
_INT_MAX = 2**31 - 1
_LLONG_MAX = 2**63 - 1
_LLONG_MIN = -(2**63)
_LONG_STR_SIZE = 21  # util.h: a string2ll input must be shorter than this
_AUTH_MAX_MULTIBULK = 10  # networking.c: limits while authentication is pending
_AUTH_MAX_BULK = 16384
# Unparsed tail size above which feed() appends to a bytearray instead of concatenating bytes.
_BYTES_TAIL_MAX = 4096

_INLINE = 1
_MULTIBULK = 2


class ProtocolError(Exception):
    """The peer broke the request protocol; Redis replies (if ``reply``) and closes.

    ``str(e)`` is exactly what Redis writes after ``-`` (without the CRLF), e.g.
    ``"ERR Protocol error: invalid multibulk length"``; encode it with latin-1 to get the exact
    bytes (one message quotes a raw byte). ``reply`` is False when Redis closes the connection
    without sending anything. ``reason`` is the short text Redis puts in its log line
    ("Protocol error (<reason>) from client: ...").
    """

    reply: bool = True

    def __init__(self, message: str, reason: str = "", *, reply: bool | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message
        if reply is not None:
            self.reply = reply


class QueryBufferLimitExceeded(ProtocolError):
    """The unparsed query buffer outgrew client-query-buffer-limit: Redis closes the client
    (``freeClientAsync``) without sending a reply, and logs a warning."""

    reply = False


def string2ll(s: bytes | bytearray) -> int | None:
    """Redis's ``string2ll``: the integer value of ``s``, or None if Redis would reject it."""
    n = len(s)
    if n == 0 or n >= _LONG_STR_SIZE:
        return None
    if s.isdigit():
        if s[0] == 48 and n > 1:  # leading zero
            return None
        v = int(s)
        return v if v <= _LLONG_MAX else None
    if s[0] == 45 and n > 1:  # '-'
        d = s[1:]
        if d.isdigit() and d[0] != 48:
            v = -int(d)
            return v if v >= _LLONG_MIN else None
    return None


# C isspace() in the "C" locale (Redis never sets LC_CTYPE).
_ISSPACE = frozenset(b" \t\n\v\f\r")
# sdssplitargs ends an unquoted token only at these (not at \v or \f).
_TOKEN_END = frozenset(b" \n\r\t\0")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_SLOW_SPLIT = (b'"', b"'", b"\v", b"\f")


def split_args(line: bytes) -> list[bytes] | None:
    """``sdssplitargs``: split an inline request line; None for unbalanced quotes.

    ``line`` never contains NUL (Redis's strchr would not have found the newline).
    """
    for q in _SLOW_SPLIT:
        if q in line:
            break
    else:
        # No quotes and no \v/\f: tokens are separated by exactly the isspace() bytes.
        return line.split()
    n = len(line)
    i = 0
    out: list[bytes] = []
    while True:
        while i < n and line[i] in _ISSPACE:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            c = line[i] if i < n else 0
            nxt = line[i + 1] if i + 1 < n else 0
            if inq:
                if (c == 92 and nxt == 120 and i + 3 < n  # \xHH
                        and line[i + 2] in _HEX and line[i + 3] in _HEX):
                    cur.append(int(line[i + 2:i + 4], 16))
                    i += 3
                elif c == 92 and nxt:  # backslash escape
                    i += 1
                    cur.append(_ESCAPES.get(nxt, nxt))
                elif c == 34:  # closing "
                    if nxt and nxt not in _ISSPACE:
                        return None
                    break
                elif not c:
                    return None  # unterminated quotes
                else:
                    cur.append(c)
            elif insq:
                if c == 92 and nxt == 39:  # \'
                    i += 1
                    cur.append(39)
                elif c == 39:  # closing '
                    if nxt and nxt not in _ISSPACE:
                        return None
                    break
                elif not c:
                    return None
                else:
                    cur.append(c)
            elif c in _TOKEN_END:
                break
            elif c == 34:
                inq = True
            elif c == 39:
                insq = True
            else:
                cur.append(c)
            if i < n:
                i += 1
        if i < n:
            i += 1
        out.append(bytes(cur))


# Canonical header lines of the common sizes, mapped to their value: one dict lookup checks
# the type byte and parses the number the way string2ll would. Anything else takes the
# general path (_mbulk_header / _bulk_header), which follows networking.c line by line.
_MBULK_HEADERS = {b"*%d" % i: i for i in range(1, 1025)}
_BULK_HEADERS = {b"$%d" % i: i for i in range(10000)}


def _identity(b: Any) -> bytes:
    """The header lookup's key for a ``bytes`` buffer: the slice itself."""
    return b  # type: ignore[no-any-return]


class RespReader:
    """Pure-Python request reader; see the module docstring for the exact semantics.

    ``from_master`` (fixed at construction): the peer is our master (Redis's CLIENT_MASTER):
    no proto-max-bulk-len and no query-buffer limit, and a non-empty inline line is a desync
    (closed without reply). ``auth_required`` (Redis's ``authRequired()``) and the two limits
    may be changed at any time (AUTH, RESET, CONFIG SET) and apply from the next ``gets()``
    / ``feed()``: while ``auth_required``, multibulk counts above 10 and bulk lengths above
    16384 are refused.
    """

    # FastRespReader's flag (a slot there): the last read scanned to its end, so nothing is
    # left once ``queue`` is empty. This reader never says so: its caller reads on until
    # gets() returns None.
    spent = False

    __slots__ = (
        "consumed",
        "queue",
        "client_query_buffer_limit",
        "from_master",
        "_auth",
        "_maxbulk",
        "_buf",
        "_pos",
        "_base",
        "_fed",
        "_reqtype",
        "_multibulk",
        "_bulklen",
        "_argv",
        "_error",
    )

    def __init__(self, proto_max_bulk_len: int = 512 * 1024 * 1024,
                 client_query_buffer_limit: int = 1024 * 1024 * 1024, *,
                 from_master: bool = False) -> None:
        self.client_query_buffer_limit = client_query_buffer_limit
        self.from_master = from_master
        self._auth = False
        # Masters are exempt from proto-max-bulk-len: an unreachable limit keeps one compare.
        self._maxbulk = _LLONG_MAX if from_master else proto_max_bulk_len
        self.consumed = 0  # absolute stream offset of the end of the last command
        # Requests parsed ahead of gets(), *last first*: what the next gets() calls return
        # (the fast reader queues a batch; callers read it, take_queued() takes).
        self.queue: list[list[bytes]] = []
        self._buf: bytes | bytearray = b""
        self._pos = 0  # parse position in _buf (Redis's qb_pos)
        self._base = 0  # absolute stream offset of _buf[0]
        self._fed = 0  # total bytes fed
        self._reqtype = 0  # 0: between requests, else _INLINE / _MULTIBULK
        self._multibulk = 0  # arguments still to read (0: header not read yet)
        self._bulklen = -1  # length of the bulk being read, -1: header not read yet
        self._argv: list[bytes] = []
        self._error: ProtocolError | None = None

    # -- settings -----------------------------------------------------------------------------

    @property
    def auth_required(self) -> bool:
        return self._auth

    @auth_required.setter
    def auth_required(self, value: bool) -> None:
        self._auth = bool(value)
        self._settings_changed()

    @property
    def proto_max_bulk_len(self) -> int:
        return self._maxbulk

    @proto_max_bulk_len.setter
    def proto_max_bulk_len(self, value: int) -> None:
        if not self.from_master:
            self._maxbulk = value
            self._settings_changed()

    def _settings_changed(self) -> None:
        """Hook for subclasses that validate ahead of ``gets()``."""

    # -- input ----------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes (any chunking). Checks client-query-buffer-limit like
        readQueryFromClient: on the unparsed bytes right after the read."""
        size = len(data)
        if not size:
            return
        self._fed += size
        if self._error is not None:
            return
        buf = self._buf
        pos = self._pos
        pending = len(buf) - pos
        if pending + size > self.client_query_buffer_limit and not self.from_master:
            self._set_error(QueryBufferLimitExceeded(
                "Closing client that reached max query buffer length",
                "max query buffer length"))
            return
        if pending == 0:
            self._base += len(buf)
            self._pos = 0
            self._buf = data if type(data) is bytes else bytes(data)
        elif pending <= _BYTES_TAIL_MAX:
            self._base += pos
            self._pos = 0
            self._buf = bytes(buf[pos:]) + data
        elif type(buf) is bytes:
            self._base += pos
            self._pos = 0
            ba = bytearray(buf[pos:])
            ba += data
            self._buf = ba
        else:
            if pos and pos >= pending:  # drop parsed bytes, amortised
                del buf[:pos]  # type: ignore[union-attr]  # a bytearray here
                self._base += pos
                self._pos = 0
            buf += data

    def release(self) -> None:
        """Let go of what a spent read's run requests hold (the fast reader's batch); this
        reader is never spent and returns each request on its own."""

    def feed_first(self, data: bytes) -> list[bytes] | None:
        """``feed(data)``; the fast reader also returns the first request when it can (its
        ``gets()`` in the same call), this one never does (None: call ``gets()``)."""
        self.feed(data)
        return None

    def raw_last(self, argv: list[bytes]) -> bytes | bytearray | None:
        """The bytes of the last request when known to be its canonical encoding (the
        fast reader knows it; this one does not)."""
        return None

    def consumed_now(self) -> int:
        """``consumed`` (the fast reader's is cheaper this way, per request)."""
        return self.consumed

    def take_queued(self, keep: int = 0) -> None:
        """Nothing is queued here (see the fast reader)."""

    def buffered(self) -> int:
        """Bytes received but not part of a returned (or skipped) command yet."""
        return self._fed - self.consumed

    def unparsed(self) -> int:
        """Bytes not parsed yet (Redis's ``sdslen(querybuf)``, CLIENT LIST ``qbuf``)."""
        return len(self._buf) - self._pos

    def reserved(self) -> int:
        """What the big argument being read still announces: Redis makes room in its query
        buffer for a bulk of ``PROTO_MBULK_BIG_ARG`` or more as soon as its header is read
        (CLIENT LIST ``qbuf-free``), so a client is held to its whole size from then on."""
        bulklen = self._bulklen
        if self._reqtype != _MULTIBULK or bulklen < PROTO_MBULK_BIG_ARG:
            return 0
        return max(0, bulklen + 2 - (len(self._buf) - self._pos))

    def partial_args(self) -> int:
        """The bytes of the arguments read so far of a request not complete yet (Redis's
        ``argv_len_sum`` while it waits for the rest: CLIENT LIST ``argv-mem``)."""
        return sum(map(len, self._argv)) if self._reqtype == _MULTIBULK else 0

    # -- errors -------------------------------------------------------------------------------

    def _set_error(self, err: ProtocolError) -> None:
        self._error = err

    def _fail(self, message: str, reason: str, *, reply: bool = True) -> ProtocolError:
        err = ProtocolError(message, reason, reply=reply)
        self._set_error(err)
        return err

    def _hidden(self, buf: bytes | bytearray, pos: int, end: int, what: str) -> bool:
        """The line [pos, end) holds a NUL, so Redis's strchr() stopped before ``end``:
        the line counts as incomplete. Raise if the unparsed buffer is then too big."""
        if buf.find(b"\0", pos, end) < 0:
            return False
        if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
            raise self._fail(f"ERR Protocol error: too big {what}", f"too big {what}")
        return True

    # -- parsing ----------------------------------------------------------------------------

    def gets(self) -> list[bytes] | None:
        """Return the next command's argv, None if more bytes are needed; raise
        ``ProtocolError`` (sticky) where Redis would refuse the input."""
        err = self._error
        if err is not None:
            raise err
        buf = self._buf
        n = len(buf)
        pos = self._pos
        find = buf.find
        # bytearray slices are unhashable: look headers up through bytes() then
        key = bytes if type(buf) is bytearray else _identity
        while pos < n:
            rt = self._reqtype
            if not rt:
                rt = self._reqtype = _MULTIBULK if buf[pos] == 42 else _INLINE
            if rt == _INLINE:
                argv = self._inline(buf, pos, n)
                if argv is None:
                    return None
                pos = self._pos
                self._reqtype = 0
                self.consumed = self._base + pos
                if argv:
                    return argv
                continue

            mb: int | None = self._multibulk
            if not mb:
                r = find(b"\r", pos)
                mb = _MBULK_HEADERS.get(key(buf[pos:r])) if 0 <= r < n - 1 else None
                if mb is None or (mb > _AUTH_MAX_MULTIBULK and self._auth):
                    mb = self._mbulk_header(buf, pos, n)
                    if mb is None:
                        return None
                    r = self._pos - 2
                pos = r + 2
                if mb <= 0:
                    self._pos = pos
                    self._reqtype = 0
                    self.consumed = self._base + pos
                    continue
                argv = []
                bulklen = -1
            else:
                argv = self._argv
                self._argv = []   # (a finished request's arguments are not kept alive here)
                bulklen = self._bulklen

            maxbulk = self._maxbulk
            while mb:
                if bulklen < 0:
                    r = find(b"\r", pos)
                    ll: int | None = _BULK_HEADERS.get(key(buf[pos:r])) if 0 <= r < n - 1 else None
                    if ll is None or ll > maxbulk:
                        ll = self._bulk_header(buf, pos, n)
                        if ll is None:
                            break
                        pos = self._pos
                    else:
                        pos = r + 2
                    bulklen = ll
                end = pos + bulklen
                if end + 2 > n:
                    break
                if type(buf) is bytes:
                    argv.append(buf[pos:end])
                elif bulklen < PROTO_MBULK_BIG_ARG:
                    argv.append(bytes(buf[pos:end]))
                else:  # one copy instead of two for big arguments
                    with memoryview(buf) as mv:
                        argv.append(mv[pos:end].tobytes())
                pos = end + 2
                bulklen = -1
                mb -= 1

            self._pos = pos
            if mb:
                self._multibulk = mb
                self._bulklen = bulklen
                self._argv = argv
                return None
            self._multibulk = 0
            self._reqtype = 0
            self.consumed = self._base + pos
            if pos == len(buf) and type(buf) is not bytes:
                # a request that spanned reads, all of the buffer run: the buffer goes with
                # it (a 32 MB SET's bytearray was kept until the client's next read)
                self._base += pos
                self._pos = 0
                self._buf = b""
            return argv
        self._pos = pos
        return None

    def _header_end(self, buf: bytes | bytearray, pos: int, n: int, what: str) -> int:
        """Where the header line at ``pos`` ends (its CR), or -1 while it is incomplete;
        raises once an incomplete one is too big (``what`` names the line in the error)."""
        r = buf.find(b"\r", pos)
        if r < 0:
            if n - pos > PROTO_INLINE_MAX_SIZE:
                raise self._fail(f"ERR Protocol error: too big {what}", f"too big {what}")
            return -1
        if r > n - 2:  # the byte after the CR has not arrived
            if n - pos > PROTO_INLINE_MAX_SIZE:
                self._hidden(buf, pos, r, what)
            return -1
        return r

    def _mbulk_header(self, buf: bytes | bytearray, pos: int, n: int) -> int | None:
        """General path for a "*<count>" line at ``pos``: the count (the line is consumed:
        ``_pos`` is set past it) or None if the line is incomplete; raises on errors."""
        r = self._header_end(buf, pos, n, "mbulk count string")
        if r < 0:
            return None
        ll = string2ll(buf[pos + 1:r])
        if ll is None or ll > _INT_MAX:
            if self._hidden(buf, pos, r, "mbulk count string"):
                return None
            raise self._fail("ERR Protocol error: invalid multibulk length",
                             "invalid mbulk count")
        if ll > _AUTH_MAX_MULTIBULK and self._auth:
            raise self._fail("ERR Protocol error: unauthenticated multibulk length",
                             "unauth mbulk count")
        self._pos = r + 2
        return ll

    def _bulk_header(self, buf: bytes | bytearray, pos: int, n: int) -> int | None:
        """General path for a "$<len>" line at ``pos``: the length (``_pos`` is set past the
        line) or None if the line is incomplete; raises on errors."""
        r = self._header_end(buf, pos, n, "bulk count string")
        if r < 0:
            return None
        if buf[pos] != 36:
            if self._hidden(buf, pos, r, "bulk count string"):
                return None
            got = chr(buf[pos])
            if got in "\r\n":  # addReplyErrorFormat maps CR/LF to spaces
                got = " "
            raise self._fail(f"ERR Protocol error: expected '$', got '{got}'",
                             "expected $ but got something else")
        ll = string2ll(buf[pos + 1:r])
        if ll is None or ll < 0 or ll > self._maxbulk:
            if self._hidden(buf, pos, r, "bulk count string"):
                return None
            raise self._fail("ERR Protocol error: invalid bulk length", "invalid bulk length")
        if ll > _AUTH_MAX_BULK and self._auth:
            raise self._fail("ERR Protocol error: unauthenticated bulk length",
                             "unauth bulk length")
        self._pos = r + 2
        return ll

    def _inline(self, buf: bytes | bytearray, pos: int, n: int) -> list[bytes] | None:
        nl = buf.find(b"\n", pos)
        if nl >= 0 and buf.find(b"\0", pos, nl) >= 0:
            nl = -1  # strchr() stops at the NUL
        if nl < 0:
            if n - pos > PROTO_INLINE_MAX_SIZE:
                raise self._fail("ERR Protocol error: too big inline request",
                                 "too big inline request")
            return None
        end = nl - 1 if nl != pos and buf[nl - 1] == 13 else nl
        argv = split_args(bytes(buf[pos:end]))
        if argv is None:
            raise self._fail("ERR Protocol error: unbalanced quotes in request",
                             "unbalanced quotes in inline request")
        if end != pos and self.from_master:
            raise self._fail("Master using the inline protocol. Desync?",
                             "Master using the inline protocol. Desync?", reply=False)
        self._pos = nl + 1
        return argv
