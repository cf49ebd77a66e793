"""The RDB channel, replica side: the second connection of a Redis 8 rdb-channel full sync (or
of Valkey 8's dual-channel one), and the local buffer of the main channel while the snapshot
loads (replica side).

Theory of operation
-------------------
A master that answers ``PSYNC`` with ``+RDBCHANNELSYNC <client-id>`` sends the snapshot on a
second connection while the main connection streams the writes made after the snapshot point.
Two sans-io pieces live here; :class:`~pyrepl.replication.replica.ReplicaSide` drives both and
owns the I/O tokens, the RDB decoder and the swap.

:class:`RdbChannel` is the second connection's protocol: bytes in (``receive_data``; ``b""`` is
EOF), events out (``next_event``), bytes out (``data_to_send``). It never sees a socket or a
clock. Its states are Redis 8's ``REPL_RDB_CH_*`` minus the prefix, with one transition table
(``TRANSITIONS``); an input without an entry raises :class:`RdbChannelError`::

    NONE --CONNECT_START--> SEND_HANDSHAKE --SENT--> RECEIVE_AUTH_REPLY
                                                      | REPLY_OK, or SKIP (no masterauth)
                                                      v
                       RECEIVE_FULLRESYNC <--REPLY_OK-- RECEIVE_REPLCONF_REPLY
                         | KEEPALIVE stays             (PSYNC ? -1 is written on that +OK;
                         | FULLRESYNC, or ENDOFF        Valkey's: SYNC)
                         v
                       RDB_LOADING (KEEPALIVE, BULK_HEADER, PAYLOAD stay) --LOADED--> NONE
    any state but NONE --REPLY_ERR / ERROR / LINK_LOST / ABORT--> NONE

The handshake is Redis 8.6's, byte for byte (redis-wire/a_fullsync_rdbchannel.txt): no PING;
``AUTH`` (when ``masterauth`` is set) and ``REPLCONF capa eof rdb-only 1 rdb-channel 1
main-ch-client-id <id> listening-port <port>`` in one write; on their ``+OK`` replies ``PSYNC ?
-1``. Then ``\\n`` keepalives while the master waits for ``repl-diskless-sync-delay``,
``+FULLRESYNC <replid> <offset>`` at fork time (``<offset>`` is the snapshot offset: the main
channel's first byte is ``<offset> + 1``), and ``$EOF:<40-char mark>\\r\\n<RDB><mark>`` (a
``$<len>`` header is accepted as well). Every byte after the header is handed out as
:class:`Payload`; the replica's load (``load.Load``) finds the end of the RDB and the mark, and
its channel (``channel.Channel``) then calls :meth:`RdbChannel.loaded`. Any error reply, a malformed line or EOF before ``loaded`` ends the
channel with one :class:`Failed` event (reason code, error text, Redis-style log line).

Valkey's dialect (``main_client_id`` None: the master answered ``+DUALCHANNELSYNC``, which names
no client) differs in three lines: the REPLCONF names no main channel (``REPLCONF capa eof
rdb-only 1 rdb-channel 1 listening-port <port>``), its ``+OK`` is followed by an inline
``SYNC``, and the snapshot offset comes as ``$ENDOFF:<offset> <replid> <dbid> <client id>``
(an :class:`~pyrepl.replication.wire.EndOffset` event, input ``ENDOFF``) instead of
``+FULLRESYNC``; the client id is the one the main connection names in ``REPLCONF
set-rdb-client-id`` before its PSYNC from ``<offset> + 1`` (the side's channel does that).

:class:`FullSyncBuffer` holds the main channel's bytes while the RDB loads, in blocks of
``BLOCK_SIZE`` bytes (Redis's 1 MB blocks, 1048560 usable), so ``size`` (INFO
``replica_full_sync_buffer_size``) moves in whole blocks as in Redis. Nothing is ever dropped:
:meth:`FullSyncBuffer.append` stores everything it is given and answers whether the reader
should stop reading the socket: when ``size`` is over ``limit`` (Redis checks before allocating
a block, so its peak overshoots the limit by one block: limit 8 MB -> peak 9 x 1048560, and so
does ours). The shell then stops reading and TCP backpressure moves the excess onto the master.
``peak`` is the high-water mark of ``size`` during that sync (the side's channel keeps the
all-time one for INFO ``replica_full_sync_buffer_peak``, which is never reset).
Invariants: ``used <= size``; ``size == BLOCK_SIZE * len(blocks)``; bytes come out of
:meth:`FullSyncBuffer.pop_block` in the order they went in, each exactly once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from pyrepl.replication.fsm import Machine, from_every, step
from pyrepl.replication.spill import SpillFile
from pyrepl.replication.wire import MAX_LINE, BulkHeader, EndOffset, FullResync
from pyrepl.resp.writer import encode_command

# Redis allocates 1 MB blocks (zmalloc usable size) with a 16-byte header: 1048560 usable.
BLOCK_SIZE = 1024 * 1024 - 16


class RdbChState(Machine):
    """Redis 8's REPL_RDB_CH_* (replica side of the rdb channel), in the same order."""

    NONE = 0
    SEND_HANDSHAKE = 1
    RECEIVE_AUTH_REPLY = 2
    RECEIVE_REPLCONF_REPLY = 3
    RECEIVE_FULLRESYNC = 4
    RDB_LOADING = 5


class RdbChInput(Machine):
    CONNECT_START = "connect-start"  # the connection attempt begins
    SENT = "sent"  # the handshake batch (or PSYNC) was written
    SKIP = "skip"  # no AUTH was sent: no reply to wait for
    REPLY_OK = "reply-ok"  # a +... handshake reply
    REPLY_ERR = "reply-err"  # a -... handshake / PSYNC reply
    KEEPALIVE = "keepalive"  # an empty line
    FULLRESYNC = "fullresync"  # +FULLRESYNC <replid> <offset>
    ENDOFF = "endoff"  # Valkey's $ENDOFF:<offset> <replid> <dbid> <client id>
    BULK_HEADER = "bulk-header"  # $EOF:<mark> or $<len>
    PAYLOAD = "payload"  # RDB payload bytes
    LOADED = "loaded"  # the side verified the RDB and the mark: the channel is done
    ERROR = "error"  # a malformed line / unexpected reply
    LINK_LOST = "link-lost"  # EOF or an I/O error on the connection
    ABORT = "abort"  # the side gave up (the main channel failed, REPLICAOF, timeout)


C = RdbChState
R = RdbChInput


def _table() -> dict[tuple[RdbChState, RdbChInput], RdbChState]:
    t = {
        (C.NONE, R.CONNECT_START): C.SEND_HANDSHAKE,
        (C.SEND_HANDSHAKE, R.SENT): C.RECEIVE_AUTH_REPLY,
        (C.RECEIVE_AUTH_REPLY, R.SKIP): C.RECEIVE_REPLCONF_REPLY,
        (C.RECEIVE_AUTH_REPLY, R.REPLY_OK): C.RECEIVE_REPLCONF_REPLY,
        (C.RECEIVE_REPLCONF_REPLY, R.REPLY_OK): C.RECEIVE_FULLRESYNC,
        (C.RECEIVE_FULLRESYNC, R.KEEPALIVE): C.RECEIVE_FULLRESYNC,
        (C.RECEIVE_FULLRESYNC, R.FULLRESYNC): C.RDB_LOADING,
        (C.RECEIVE_FULLRESYNC, R.ENDOFF): C.RDB_LOADING,
        (C.RDB_LOADING, R.KEEPALIVE): C.RDB_LOADING,
        (C.RDB_LOADING, R.BULK_HEADER): C.RDB_LOADING,
        (C.RDB_LOADING, R.PAYLOAD): C.RDB_LOADING,
        (C.RDB_LOADING, R.LOADED): C.NONE,
    }
    t.update(from_every(C, (R.REPLY_ERR, R.ERROR, R.LINK_LOST, R.ABORT), C.NONE, but=C.NONE))
    return t


TRANSITIONS: dict[tuple[RdbChState, RdbChInput], RdbChState] = _table()


class RdbChannelError(Exception):
    """An input that has no transition from the rdb channel's current state."""

    def __init__(self, state: RdbChState, inp: RdbChInput) -> None:
        super().__init__(f"rdb channel state machine error: input {inp.value} in state "
                         f"{state.name}")
        self.state = state
        self.input = inp


# -- events -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Keepalive:
    """An empty line from the master (it is alive; the snapshot is not ready yet)."""


@dataclass(frozen=True, slots=True)
class Payload:
    """Payload bytes, in order (the RDB, then the mark; anything after is not the side's)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Failed:
    """The channel is dead: ``reason`` is a sync-event reason code, ``message`` a log line."""

    reason: str
    error: str
    message: str


Event = Keepalive | FullResync | EndOffset | BulkHeader | Payload | Failed


class RdbChannel:
    """The replica's rdb channel protocol (see the module docstring)."""

    def __init__(self, main_client_id: bytes | None, listening_port: int,
                 auth: list[bytes] | None = None) -> None:
        self.main_client_id = main_client_id   # None: Valkey's dual channel
        self.listening_port = listening_port
        self.auth = auth  # AUTH's arguments (masteruser, masterauth) or None
        self.state = C.NONE
        self._out: list[bytes] = []
        self._events: deque[Event] = deque()
        self._inbuf = b""
        self._payload = False  # RDB_LOADING after the header: every byte is payload
        self.replid = ""
        self.offset = -1
        self.bytes_in = 0  # every byte received, lines and payload
        # the states that read a line, and what reads it
        self._lines: dict[RdbChState, Callable[[bytes, str], None]] = {
            C.RECEIVE_AUTH_REPLY: self._auth_reply,
            C.RECEIVE_REPLCONF_REPLY: self._replconf_reply,
            C.RECEIVE_FULLRESYNC: self._psync_reply,
            C.RDB_LOADING: self._header_line,
        }

    # -- the table --------------------------------------------------------------------------
    def _go(self, inp: RdbChInput) -> RdbChState:
        self.state = step(TRANSITIONS, self.state, inp, RdbChannelError)
        return self.state

    # -- what the side calls ----------------------------------------------------------------
    def start(self) -> None:
        """The connection attempt begins."""
        self._go(R.CONNECT_START)

    def connected(self) -> None:
        """The TCP connection is up: queue AUTH + REPLCONF (one write, as Redis 8)."""
        if self.state is not C.SEND_HANDSHAKE:
            raise RdbChannelError(self.state, R.SENT)
        out = []
        if self.auth:
            out.append(encode_command([b"AUTH", *self.auth]))
        main = [] if self.main_client_id is None else [b"main-ch-client-id",
                                                         self.main_client_id]
        out.append(encode_command([
            b"REPLCONF", b"capa", b"eof", b"rdb-only", b"1", b"rdb-channel", b"1", *main,
            b"listening-port", b"%d" % self.listening_port]))
        self._out.append(b"".join(out))
        self._go(R.SENT)
        if not self.auth:
            self._go(R.SKIP)

    def loaded(self) -> None:
        """The side verified the whole payload (RDB, CRC and mark): the channel is done."""
        self._go(R.LOADED)
        self._payload = False
        self._inbuf = b""

    def abort(self) -> None:
        """The side gives up on this channel (no event)."""
        if self.state is not C.NONE:
            self._go(R.ABORT)
        self._payload = False
        self._inbuf = b""

    def data_to_send(self) -> bytes:
        out = b"".join(self._out)
        self._out.clear()
        return out

    def next_event(self) -> Event | None:
        return self._events.popleft() if self._events else None

    @property
    def done(self) -> bool:
        return self.state is C.NONE

    # -- bytes from the master --------------------------------------------------------------
    def connection_lost(self, error: str = "") -> None:
        """The connection closed (EOF or an I/O error): a Failed event unless done."""
        if self.state is not C.NONE:
            error = error or "connection lost"
            self._fail(R.LINK_LOST, "rdb-channel-lost", error,
                       f"I/O error reading from the MASTER rdb channel: {error}")

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the rdb channel (``b""``: the connection closed)."""
        st = self.state
        if not data:
            self.connection_lost()
            return
        if st is C.NONE:
            return  # after the mark (or after a failure): nothing more is the side's
        if st is C.SEND_HANDSHAKE:
            raise RdbChannelError(st, R.REPLY_OK)  # bytes before we wrote anything
        self.bytes_in += len(data)
        if self._payload:
            self._go(R.PAYLOAD)
            self._events.append(Payload(data))
            return
        if self._inbuf:
            data = self._inbuf + data
            self._inbuf = b""
        pos = 0
        n = len(data)
        while pos < n and self.state is not C.NONE:
            if self._payload:
                self._go(R.PAYLOAD)
                self._events.append(Payload(data[pos:]))
                return
            nl = data.find(b"\n", pos)
            if nl < 0:
                if n - pos > MAX_LINE:
                    self._fail(R.ERROR, "bad-protocol", "reply line too long",
                               "Bad protocol from MASTER on the rdb channel: line too long")
                    return
                self._inbuf = data[pos:]
                return
            line = data[pos:nl]
            if line.endswith(b"\r"):
                line = line[:-1]
            pos = nl + 1
            self._line(line)

    def _fail(self, inp: RdbChInput, reason: str, error: str, message: str) -> None:
        self._go(inp)
        self._payload = False
        self._inbuf = b""
        self._events.append(Failed(reason, error, message))

    def _line(self, line: bytes) -> None:
        """A line (``\\r`` stripped), to the handler of the state that reads it."""
        self._lines[self.state](line, line.decode("utf-8", "replace"))

    def _auth_reply(self, line: bytes, text: str) -> None:
        if line[:1] == b"-":
            self._fail(R.REPLY_ERR, "auth-error", text,
                       f"Unable to AUTH to MASTER on the rdb channel: {text}")
        else:
            self._go(R.REPLY_OK)

    def _replconf_reply(self, line: bytes, text: str) -> None:
        if line[:1] == b"-":  # as Redis: any reply but an error is a success
            self._fail(R.REPLY_ERR, "rdb-channel-replconf-error", text,
                       f"Master rejected the rdb channel handshake: {text}")
        else:
            self._out.append(b"SYNC\r\n" if self.main_client_id is None
                             else encode_command([b"PSYNC", b"?", b"-1"]))
            self._go(R.REPLY_OK)

    def _psync_reply(self, line: bytes, text: str) -> None:
        if not line:
            self._go(R.KEEPALIVE)
            self._events.append(Keepalive())
            return
        if self.main_client_id is None:
            self._end_offset(line, text)
            return
        fr = FullResync.parse(text) if line.startswith(b"+FULLRESYNC") else None
        if fr is not None:
            self.replid = fr.replid
            self.offset = fr.offset
            self._go(R.FULLRESYNC)
            self._events.append(fr)
            return
        if line[:1] == b"-":
            self._fail(R.REPLY_ERR, "psync-error", text,
                       f"Master refused PSYNC on the rdb channel: {text}")
        else:
            self._fail(R.ERROR, "psync-error", text,
                       f"Unexpected reply to PSYNC on the rdb channel: {text}")

    def _end_offset(self, line: bytes, text: str) -> None:
        """Valkey's dual channel: ``$ENDOFF:`` (dualChannelReplHandleEndOffsetResponse)."""
        eo = EndOffset.parse(line)
        if eo is None:
            self._fail(R.ERROR, "psync-error", text,
                       f"Received unexpected $ENDOFF response: {text}")
            return
        self.replid = eo.replid
        self.offset = eo.offset
        self._go(R.ENDOFF)
        self._events.append(eo)

    def _header_line(self, line: bytes, text: str) -> None:
        """RDB_LOADING, before the payload header."""
        if not line:
            self._go(R.KEEPALIVE)
            self._events.append(Keepalive())
            return
        if line[:1] == b"-":
            self._fail(R.REPLY_ERR, "master-error", text,
                       f"MASTER aborted replication with an error: {text[1:]}")
            return
        if line[:1] != b"$":
            self._fail(R.ERROR, "bad-protocol", text,
                       f"Bad protocol from MASTER, the first byte is not '$' (we received "
                       f"'{text}'), are you sure the host and port are right?")
            return
        self._go(R.BULK_HEADER)
        self._payload = True
        self._events.append(BulkHeader.parse(bytes(line)))


class FullSyncBuffer:
    """The main channel's bytes held while the snapshot loads (see the module docstring)."""

    __slots__ = ("blocks", "size", "used", "peak", "limit", "total", "spill_at", "spill_dir",
                 "disk", "spilled")

    def __init__(self, limit: int, spill_at: int = 0, spill_dir: str = "") -> None:
        self.blocks: deque[bytearray] = deque()
        self.size = 0  # BLOCK_SIZE per block held (INFO replica_full_sync_buffer_size)
        self.used = 0  # bytes held, in memory and on disk
        self.peak = 0  # high-water mark of size
        self.limit = limit  # 0: no limit
        self.total = 0  # bytes ever appended
        # repl-full-sync-spill-threshold: memory holds at most this many bytes, the rest
        # goes to a file (and reading never stops); 0: off. Never above the limit.
        self.spill_at = min(spill_at, limit) if spill_at and limit else spill_at
        self.spill_dir = spill_dir
        self.disk: SpillFile | None = None
        self.spilled = 0  # bytes ever written to the file

    def append(self, data: bytes) -> bool:
        """Store ``data`` (all of it); True when the reader should stop reading now."""
        n = len(data)
        if self.spill_at:
            on_disk = self.on_disk
            if on_disk or self.used - on_disk + n > self.spill_at:
                # (once bytes are on disk, the newer ones follow them there: order is kept)
                self._spill(data)
                self.total += n
                self.used += n
                return False
        self.total += n
        self.used += n
        blocks = self.blocks
        pos = 0
        if blocks:
            tail = blocks[-1]
            room = BLOCK_SIZE - len(tail)
            if room:
                take = n if n < room else room
                tail += data[:take] if take != n else data
                pos = take
        while pos < n:
            take = min(n - pos, BLOCK_SIZE)
            blocks.append(bytearray(data[pos:pos + take]))
            pos += take
            self.size += BLOCK_SIZE
        if self.size > self.peak:
            self.peak = self.size
        return self.full()

    def _spill(self, data: bytes) -> None:
        disk = self.disk
        if disk is None:
            disk = self.disk = SpillFile(self.spill_dir, "replica-buffer")
        disk.append(data)
        self.spilled += len(data)

    def full(self) -> bool:
        """Over the limit: reading stops. ``size`` counts whole blocks and a block is only
        allocated while ``size <= limit`` would have allowed it, so the peak is the one block
        past the limit that Redis reports too. Spilling, reading never stops."""
        return bool(self.limit) and self.size > self.limit and not self.spill_at

    def pop_block(self) -> bytes | None:
        """The oldest block's bytes (the block is freed; from the file once memory holds none
        of what is left), or None when empty."""
        if not self.blocks:
            disk = self.disk
            if disk is None or not disk.pending:
                return None
            out = disk.read(BLOCK_SIZE)
            self.used -= len(out)
            return out
        b = self.blocks.popleft()
        self.size -= BLOCK_SIZE
        self.used -= len(b)
        return bytes(b)

    @property
    def on_disk(self) -> int:
        return self.disk.pending if self.disk is not None else 0

    def close(self) -> None:
        """The buffer is done with (drained or dropped): its file goes."""
        if self.disk is not None:
            self.disk.close()
            self.disk = None

    def __len__(self) -> int:
        return self.used
