"""The rdb channel (Redis 8) and the main channel's buffer while it runs (replica side).

RDB channel (Redis 8, ``+RDBCHANNELSYNC <client-id>``): the snapshot comes on a second
connection, driven by :class:`~pyrepl.replication.replica.rdbchannel.RdbChannel` (its own ``RDB_CH_*``
states; its callbacks are ``on_rdb_connected`` / ``on_rdb_connect_failed`` / ``on_rdb_data`` /
``on_rdb_closed`` with the rdb channel's token). Its ``+FULLRESYNC <replid> <offset>`` gives the
snapshot offset and its ``$EOF:`` payload goes through the same decoder, fresh dicts and swap as
above. Meanwhile the main connection stays in TRANSFER and every byte it delivers (the stream
from ``<offset> + 1``) is kept in a :class:`~pyrepl.replication.replica.rdbchannel.FullSyncBuffer` (input
BUFFER), up to ``replica-full-sync-buffer-limit`` (0: the ``client-output-buffer-limit replica``
hard limit); over it the side asks the shell to ``pause_reading`` the main socket, so the rest
waits in TCP and on the master: nothing is dropped. When the RDB and its mark are verified the
rdb channel is closed, ``REPLCONF ACK <offset>`` goes out, the link is up (CONNECTED) and the
buffer drains: the side asks ``request_drain`` and the shell calls ``drain_step``, which applies
up to ``DRAIN_BLOCKS`` (2) blocks and then lets the main socket deliver at most one more read
(the side pauses it again after each buffered read), so the buffer always shrinks. Bytes read
while it drains join its tail, keeping the order. Any failure before the swap — either
connection lost, an error reply, a bad CRC or mark, a timeout — closes both connections, drops
the buffer and the fresh dicts and retries: nothing is half-applied. Link loss while draining
is an ordinary loss of an established link (the unapplied buffer is dropped; the master resends
it after ``+CONTINUE``). INFO: ``replica_full_sync_buffer_size`` (whole blocks held) and
``replica_full_sync_buffer_peak`` (never reset).

Valkey's dual channel (``+DUALCHANNELSYNC``) is the same sync in another dialect: the rdb channel
names no main channel, sends ``SYNC`` and learns the snapshot from ``$ENDOFF:<offset> <replid>
<dbid> <client id>``; on that line the main connection (still in TRANSFER) sends ``REPLCONF
set-rdb-client-id <client id>``, on its ``+OK`` ``PSYNC <replid> <offset + 1>``, and on
``+CONTINUE`` the bytes that follow are the stream from ``<offset> + 1``, buffered as above.
Those two replies are the main connection's *preamble* (``_preamble``: the replies still
awaited); anything else there (an error, ``+FULLRESYNC``, bytes before the ``$ENDOFF:``) fails
the sync, which is retried as any other failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrepl.replication.replica.rdbchannel import (
    FullSyncBuffer,
    Keepalive,
    Payload,
    RdbChannel,
    RdbChannelError,
)
from pyrepl.replication.replica.states import (
    DRAIN_BLOCKS,
    I,
    Input,
    link_up,
    transferring,
)
from pyrepl.replication.wire import MAX_LINE, BulkHeader, EndOffset, FullResync
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.replication.replica.load import Load
    from pyrepl.replication.replica.side import ReplicaSide
    from pyrepl.replication.replica.stream import Stream


class Channel:
    """The rdb channel (Redis 8) and the main channel's buffer while it runs (replica side).

    Owns the rdb channel's connection (``rdbch``, ``rdbch_token``), the full-sync buffer
    (``fsbuf``, its all-time ``fsbuf_peak``) and the main channel's flow control while it fills
    and drains. Its collaborators: the side (the link and the table), the load (which parses
    what the rdb channel delivers) and the stream (which applies what the buffer held)."""

    # fsbuf is read at its offset by a read's common case in C (replica/_streamread.c)
    __slots__ = ("fsbuf", "__dict__")

    def __init__(self, side: ReplicaSide, load: Load, stream: Stream) -> None:
        self.side = side
        self.core = side.core
        self.load = load
        self.stream = stream
        self.rdbch: RdbChannel | None = None
        self.rdbch_token = 0
        self.fsbuf: FullSyncBuffer | None = None  # from +RDBCHANNELSYNC until drained
        self.fsbuf_peak = 0  # INFO replica_full_sync_buffer_peak (never reset)
        self.fsbuf_spilled = 0  # the last finished sync's bytes spilled to disk
        self._main_paused = False
        self._drain_requested = False
        self._limit_logged = False
        # Valkey's dual channel: the main connection's replies still awaited before its
        # stream ("setid": REPLCONF set-rdb-client-id's, "psync": PSYNC's), and a partial line
        self._preamble: list[str] = []
        self._preamble_buf = b""
        self._end_offset: EndOffset | None = None
        self._after_preamble: Callable[[], None] | None = None

    @property
    def buffering(self) -> bool:
        """The main channel's bytes go to the full-sync buffer (the rdb channel loads, or the
        buffer still drains)."""
        return self.fsbuf is not None

    def full_sync_buffer_limit(self) -> int:
        """replica-full-sync-buffer-limit, 0 meaning the replica class's hard output limit."""
        cfg = self.core.config
        limit: int = cfg.replica_full_sync_buffer_limit
        if not limit:
            limit = cfg.client_output_buffer_limit.get("replica", (0, 0, 0))[0]
        return limit

    def spill_fields(self) -> list[tuple[str, object]]:
        """INFO: the bytes the running (else the last) sync spilled, and those on disk now."""
        b = self.fsbuf
        return [("replica_full_sync_buffer_spilled", b.spilled if b is not None
                 else self.fsbuf_spilled),
                ("replica_full_sync_buffer_on_disk", b.on_disk if b is not None else 0)]

    def full_sync_buffer_bytes(self) -> int:
        """INFO replica_full_sync_buffer_size / mem_replica_full_sync_buffer: whole blocks."""
        b = self.fsbuf
        return b.size if b is not None else 0

    def open(self, client_id: str | None) -> None:
        """+RDBCHANNELSYNC <client-id>: open the rdb channel, buffer the main channel
        (``None``: Valkey's +DUALCHANNELSYNC, whose main connection waits for $ENDOFF)."""
        side = self.side
        cfg = self.core.config
        self.fsbuf = FullSyncBuffer(self.full_sync_buffer_limit(),
                                    cfg.repl_full_sync_spill_threshold, cfg.dir)
        self._limit_logged = False
        self._reset_preamble(["endoff"] if client_id is None else [])
        cfg = self.core.config
        auth = None
        if cfg.masterauth:
            auth = [cfg.masteruser.encode()] if cfg.masteruser else []
            auth.append(cfg.masterauth.encode())
        port = cfg.replica_announce_port or self.core.port or cfg.port
        ch = RdbChannel(client_id.encode() if client_id is not None else None, port, auth)
        ch.start()
        self.rdbch = ch
        self.rdbch_token = side.next_token()
        io = side.io
        if io is not None:
            assert side.master_host is not None
            io.connect_rdb(self.rdbch_token, side.master_host, side.master_port)

    def close(self, loaded: bool = False) -> None:
        """Close the rdb channel (``loaded``: its snapshot was verified: it is done)."""
        ch = self.rdbch
        if ch is None:
            return
        self.rdbch = None
        if loaded:
            ch.loaded()
        else:
            ch.abort()
        io = self.side.io
        if io is not None:
            io.close(self.rdbch_token)

    def abort(self) -> None:
        """The sync failed before the swap: the rdb channel and the buffer go (nothing of them
        was applied)."""
        self.close()
        self._release_buffer()
        self._drain_requested = False
        self._reset_preamble([])

    def drop_buffer(self) -> None:
        """The master was lost while the buffer drained: what is left of it is not applied
        (the master resends it after +CONTINUE)."""
        self._release_buffer()
        self._drain_requested = False
        self._main_paused = False

    def park(self) -> None:
        """The sync is cut: when the master can resume it, the load keeps the payload and
        this buffer (the stream the main channel had) for the window."""
        buf = self.fsbuf
        if buf is not None and self.load.park(self.side.peer, buf):
            self.fsbuf = None

    def adopt(self, buf: FullSyncBuffer) -> None:
        """A resumed rdb-channel sync was loaded: the buffer it had kept drains first."""
        self.fsbuf = buf
        self._limit_logged = False

    def _reset_preamble(self, awaited: list[str]) -> None:
        self._preamble = awaited
        self._preamble_buf = b""
        self._end_offset = None
        self._after_preamble = None

    def _release_buffer(self) -> None:
        buf = self.fsbuf
        if buf is not None:
            self.fsbuf = None
            self.fsbuf_spilled = buf.spilled
            buf.close()

    def new_connection(self) -> None:
        """A new main channel: it reads, and no drain step is pending."""
        self._main_paused = False
        self._drain_requested = False

    def _rdb_failed(self, inp: Input, reason: str, error: str) -> None:
        """The rdb channel failed: the whole sync is cancelled and retried (a lost one may
        resume)."""
        if transferring(self.side.state):
            if inp is I.LINK_LOST:
                self.park()
            self.side.cancel_handshake(True, inp, reason, error)
        else:
            self.close()

    def on_connected(self, token: int) -> None:
        ch = self.rdbch
        if ch is None or token != self.rdbch_token:
            return
        ch.connected()
        self.load.touch()
        self._rdb_flush(ch)

    def on_connect_failed(self, token: int, error: str) -> None:
        if self.rdbch is None or token != self.rdbch_token:
            return
        self.core.log.warning(f"Error condition on socket for the rdb channel: {error}")
        self._rdb_failed(I.LINK_LOST, "rdb-channel-connect-error", error)

    def on_closed(self, token: int, error: str = "") -> None:
        ch = self.rdbch
        if ch is None or token != self.rdbch_token:
            return
        ch.connection_lost(error)
        self._rdb_events(ch)

    def on_data(self, token: int, data: bytes) -> None:
        ch = self.rdbch
        if ch is None or token != self.rdbch_token or not data:
            return
        try:
            ch.receive_data(data)
        except RdbChannelError as e:
            self.core.log.warning(str(e))
            self._rdb_failed(I.TRANSFER_ERROR, "protocol-error", str(e))
            return
        self._rdb_flush(ch)
        self._rdb_events(ch)

    def _rdb_flush(self, ch: RdbChannel) -> None:
        out = ch.data_to_send()
        io = self.side.io
        if out and io is not None:
            io.send(self.rdbch_token, out)

    def _rdb_events(self, ch: RdbChannel) -> None:
        log = self.core.log
        load = self.load
        while self.rdbch is ch:
            ev = ch.next_event()
            if ev is None:
                return
            if isinstance(ev, Payload):
                load.touch()
                if transferring(self.side.state) and load.loading:
                    load.payload(ev.data, 0)
            elif isinstance(ev, Keepalive):
                load.touch()
            elif isinstance(ev, FullResync):
                load.set_target(ev.replid, ev.offset)
                load.resume_id = ev.snapshot     # (a pyrepl master's, to resume a cut sync)
                load.touch()
                log.notice("Starting to receive RDB and replication stream in parallel.")
            elif isinstance(ev, EndOffset):
                load.set_target(ev.replid, ev.offset)
                load.touch()
                self._set_rdb_client_id(ev)
            elif isinstance(ev, BulkHeader):
                load.begin_payload(ev.usemark, ev.mark, ev.size)
            else:
                log.warning(ev.message)
                lost = ev.reason == "rdb-channel-lost"
                self._rdb_failed(I.LINK_LOST if lost else I.TRANSFER_ERROR, ev.reason, ev.error)
                return

    # -- Valkey's dual channel: the main connection's preamble -----------------------------
    def _set_rdb_client_id(self, eo: EndOffset) -> None:
        """$ENDOFF: the main connection names the rdb channel's client, then asks for the
        stream from the snapshot on (dualChannelReplMainConnSendHandshake)."""
        if self._preamble != ["endoff"]:
            self._rdb_failed(I.TRANSFER_ERROR, "bad-protocol", "$ENDOFF out of turn")
            return
        self.core.log.notice(f"Dual channel replication: received the snapshot end offset "
                             f"{eo.offset} of {eo.replid}, rdb client id {eo.client_id}")
        self._end_offset = eo
        self._preamble = ["setid", "psync"]
        self.side.send(encode_command([b"REPLCONF", b"set-rdb-client-id",
                                       b"%d" % eo.client_id]))

    def _preamble_lines(self, data: bytes) -> bytes:
        """The main connection's replies before its stream; what follows them (b"" while
        they are awaited). A failure cancels the sync (the side's state leaves TRANSFER)."""
        self.load.touch()   # (any byte, a keepalive too, is the master's sign of life)
        if self._preamble[0] == "endoff":   # nothing is due on this connection yet
            self._main_failed(f"unexpected bytes before $ENDOFF: {data[:64]!r}")
            return b""
        data = self._preamble_buf + data if self._preamble_buf else data
        self._preamble_buf = b""
        pos = 0
        while self._preamble:
            nl = data.find(b"\n", pos)
            if nl < 0:
                if len(data) - pos > MAX_LINE:
                    self._main_failed("reply line too long")
                    return b""
                self._preamble_buf = data[pos:]
                return b""
            line = data[pos:nl].rstrip(b"\r")
            text = line.decode("utf-8", "replace")
            pos = nl + 1
            if self._preamble[0] == "setid":
                if line[:1] == b"-":
                    self.core.log.notice(f"Dual channel replication: Primary does not "
                                         f"understand REPLCONF identify: {text}")
                    self._main_failed(text)
                    return b""
                eo = self._end_offset
                assert eo is not None
                self.core.log.notice(f"Dual channel replication: Trying a partial "
                                     f"resynchronization using main channel (request "
                                     f"{eo.replid}:{eo.offset + 1}).")
                self.side.send(encode_command([b"PSYNC", eo.replid.encode(),
                                               b"%d" % (eo.offset + 1)]))
            elif not line:
                continue     # (a keepalive before the PSYNC reply)
            elif line.startswith(b"+CONTINUE"):
                self.core.log.notice("Dual channel replication: MASTER <-> REPLICA sync: "
                                     "Master accepted a Partial Resynchronization, RDB load in "
                                     "background.")
            else:
                self._main_failed(f"PSYNC on the main channel: {text}")
                return b""
            self._preamble.pop(0)
        return data[pos:]

    def _main_failed(self, error: str) -> None:
        self.core.log.warning(f"Aborting dual channel sync. Main channel psync result: {error}")
        self._preamble = []
        self.side.cancel_handshake(True, I.TRANSFER_ERROR, "psync-error", error)

    @property
    def awaits_main(self) -> bool:
        """Valkey's dual channel: the main connection has not been given its stream yet."""
        return bool(self._preamble)

    def when_main_continues(self, done: Callable[[], None]) -> None:
        """The RDB loaded before the main connection's +CONTINUE (a small snapshot): the
        swap waits for it, so the stream that follows is buffered first."""
        self._after_preamble = done

    def buffer_main(self, data: bytes) -> None:
        """Main-channel bytes while the rdb channel loads (or while the buffer drains): kept,
        never dropped; reading stops at the limit (TCP backpressure holds the rest)."""
        if self._preamble:
            data = self._preamble_lines(data)
            if not self.buffering:
                return
            if data:
                self._buffer(data)
            done = self._after_preamble
            if not self._preamble and done is not None:
                self._after_preamble = None
                done()
            return
        self._buffer(data)

    def _buffer(self, data: bytes) -> None:
        self.side.go(I.BUFFER)
        buf = self.fsbuf
        assert buf is not None
        spilled = buf.spilled
        try:
            full = buf.append(data)
        except OSError as e:
            self._spill_failed(e)
            return
        if buf.spilled and not spilled:
            self.core.log.notice(f"Replication buffer reached the spill threshold "
                                 f"({buf.spill_at} bytes): the rest of the stream goes to "
                                 f"disk until it is applied.")
        if buf.peak > self.fsbuf_peak:
            self.fsbuf_peak = buf.peak
        if transferring(self.side.state):
            self.load.touch()
            if full:
                if not self._limit_logged:
                    self._limit_logged = True
                    self.core.log.notice(
                        f"Replication buffer limit has been reached ({buf.limit} bytes), "
                        f"stopped buffering replication stream. Further accumulation may occur "
                        f"on master side.")
                self._pause_main()
        else:
            self._pause_main()  # draining: at most one new read per drain step

    def _spill_failed(self, e: OSError) -> None:
        """The spill file could not take (or give back) bytes: the sync fails (during the
        transfer) or the link drops (while draining); nothing is half-applied."""
        error = f"spill file: {e.strerror or e}"
        self.core.log.warning(f"Replication buffer {error}")
        if transferring(self.side.state):
            self.side.cancel_handshake(True, I.TRANSFER_ERROR, "spill-error", error)
        else:
            self.side.master_lost("spill-error", cache=True)

    def _pause_main(self) -> None:
        if not self._main_paused:
            self._main_paused = True
            io = self.side.io
            if io is not None:
                io.pause_reading(self.side.token)

    def _resume_main(self) -> None:
        if self._main_paused:
            self._main_paused = False
            io = self.side.io
            if io is not None:
                io.resume_reading(self.side.token)

    def _request_drain(self) -> None:
        if not self._drain_requested:
            self._drain_requested = True
            io = self.side.io
            if io is not None:
                io.request_drain(self.side.token)

    def start_drain(self) -> None:
        """The snapshot is loaded and the link is up: the buffer drains into the stream."""
        buf = self.fsbuf
        assert buf is not None
        self.core.log.notice(f"MASTER <-> REPLICA sync: Starting to stream replication buffer "
                             f"into the db ({buf.used} bytes).")
        if not buf.used:
            self._drain_done()
        else:
            self._request_drain()

    def drain_step(self, token: int) -> None:
        """Apply up to DRAIN_BLOCKS buffered blocks, then let the main channel deliver at most
        one new read before the next step (called by the I/O shell after request_drain)."""
        if token != self.side.token:
            return
        self._drain_requested = False
        buf = self.fsbuf
        stream = self.stream
        ms = stream.master
        if buf is None or ms is None or not link_up(self.side.state):
            return
        for _ in range(DRAIN_BLOCKS):
            try:
                block = buf.pop_block()
            except OSError as e:
                self._spill_failed(e)
                return
            if block is None:
                break
            stream.stream(block)
            if stream.master is not ms or self.fsbuf is not buf:
                return  # the link was dropped while applying
        if buf.used:
            self._resume_main()
            self._request_drain()
        else:
            self._drain_done()

    def _drain_done(self) -> None:
        buf = self.fsbuf
        assert buf is not None
        self._release_buffer()
        ms = self.stream.master
        side = self.side
        self.core.log.notice(f"MASTER <-> REPLICA sync: Successfully streamed replication buffer "
                             f"into the db ({buf.total} bytes in total)")
        side.emit("buffer_drained", bytes=buf.total, buffer_peak=buf.peak,
                  buffer_limit=buf.limit, duration_ms=side.now - side.link_up_ms,
                  offset=ms.reploff if ms is not None else None, spilled=buf.spilled)
        self._resume_main()
