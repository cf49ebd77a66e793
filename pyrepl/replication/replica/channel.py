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
"""

from __future__ import annotations

from pyrepl.replication.replica.rdbchannel import (
    BulkHeader,
    Failed,
    FullResync,
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
    S,
)


class Channel:
    """The rdb channel (Redis 8) and the main channel's buffer while it runs (replica side)."""

    def _rdbchannel_sync(self, text: str) -> None:
        """+RDBCHANNELSYNC <client-id>: open the rdb channel, buffer the main channel."""
        log = self.core.log
        cid = text[len("+RDBCHANNELSYNC"):].strip()
        if not cid.isascii() or not cid.isdigit():
            log.warning(f"Master replied with wrong +RDBCHANNELSYNC syntax: {text}")
            self._emit("psync_reply", result="rdbchannel", error=text,
                       duration_ms=self.now - self.psync_sent_ms)
            self._handshake_failed(I.REPLY_ERR, "psync-error", text)
            return
        log.notice("PSYNC is not possible, initialize RDB channel.")
        self._emit("psync_reply", result="rdbchannel", mode="rdb-channel",
                   duration_ms=self.now - self.psync_sent_ms)
        self._go(I.RDBCHANNELSYNC)
        self._start_transfer()
        self.mode = "rdb-channel"
        self.master_replid = ""
        self.master_initial_offset = -1
        self.fsbuf = FullSyncBuffer(self.full_sync_buffer_limit())
        self._limit_logged = False
        cfg = self.core.config
        auth = None
        if cfg.masterauth:
            auth = [cfg.masteruser.encode()] if cfg.masteruser else []
            auth.append(cfg.masterauth.encode())
        port = cfg.replica_announce_port or self.core.port or cfg.port
        ch = RdbChannel(cid.encode(), port, auth)
        ch.start()
        self.rdbch = ch
        self.rdbch_token = self._next_token()
        io = self.io
        if io is not None:
            io.connect_rdb(self.rdbch_token, self.master_host, self.master_port)

    def _close_rdb_channel(self, loaded: bool = False) -> None:
        ch = self.rdbch
        if ch is None:
            return
        self.rdbch = None
        if loaded:
            ch.loaded()
        else:
            ch.abort()
        io = self.io
        if io is not None:
            io.close(self.rdbch_token)

    def _rdb_failed(self, inp: Input, reason: str, error: str) -> None:
        """The rdb channel failed: the whole sync is cancelled and retried."""
        if self.state is S.TRANSFER:
            self._cancel_handshake(True, inp, reason, error)
        else:
            self._close_rdb_channel()

    def on_rdb_connected(self, token: int) -> None:
        ch = self.rdbch
        if ch is None or token != self.rdbch_token:
            return
        ch.connected()
        self.transfer_lastio_ms = self.now
        self._rdb_flush(ch)

    def on_rdb_connect_failed(self, token: int, error: str) -> None:
        if self.rdbch is None or token != self.rdbch_token:
            return
        self.core.log.warning(f"Error condition on socket for the rdb channel: {error}")
        self._rdb_failed(I.LINK_LOST, "rdb-channel-connect-error", error)

    def on_rdb_closed(self, token: int, error: str = "") -> None:
        ch = self.rdbch
        if ch is None or token != self.rdbch_token:
            return
        ch.connection_lost(error)
        self._rdb_events(ch)

    def on_rdb_data(self, token: int, data: bytes) -> None:
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
        io = self.io
        if out and io is not None:
            io.send(self.rdbch_token, out)

    def _rdb_events(self, ch: RdbChannel) -> None:
        log = self.core.log
        while self.rdbch is ch:
            ev = ch.next_event()
            if ev is None:
                return
            t = type(ev)
            if t is Payload:
                self.transfer_lastio_ms = self.now
                if self.state is S.TRANSFER and self._load is not None:
                    self._payload(ev.data, 0)  # type: ignore[union-attr]
            elif t is Keepalive:
                self.transfer_lastio_ms = self.now
            elif t is FullResync:
                self.master_replid = ev.replid  # type: ignore[union-attr]
                self.master_initial_offset = ev.offset  # type: ignore[union-attr]
                self.transfer_lastio_ms = self.now
                log.notice("Starting to receive RDB and replication stream in parallel.")
            elif t is BulkHeader:
                self._begin_payload(ev.usemark, ev.mark, ev.size)  # type: ignore[union-attr]
            elif t is Failed:
                log.warning(ev.message)  # type: ignore[union-attr]
                lost = ev.reason == "rdb-channel-lost"  # type: ignore[union-attr]
                self._rdb_failed(I.LINK_LOST if lost else I.TRANSFER_ERROR,
                                 ev.reason, ev.error)  # type: ignore[union-attr]
                return

    def _buffer_main(self, data: bytes) -> None:
        """Main-channel bytes while the rdb channel loads (or while the buffer drains): kept,
        never dropped; reading stops at the limit (TCP backpressure holds the rest)."""
        self._go(I.BUFFER)
        buf = self.fsbuf
        assert buf is not None
        full = buf.append(data)
        if buf.peak > self.fsbuf_peak:
            self.fsbuf_peak = buf.peak
        if self.state is S.TRANSFER:
            self.transfer_lastio_ms = self.now
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

    def _pause_main(self) -> None:
        if not self._main_paused:
            self._main_paused = True
            io = self.io
            if io is not None:
                io.pause_reading(self.token)

    def _resume_main(self) -> None:
        if self._main_paused:
            self._main_paused = False
            io = self.io
            if io is not None:
                io.resume_reading(self.token)

    def _request_drain(self) -> None:
        if not self._drain_requested:
            self._drain_requested = True
            io = self.io
            if io is not None:
                io.request_drain(self.token)

    def _start_drain(self) -> None:
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
        if token != self.token:
            return
        self._drain_requested = False
        buf = self.fsbuf
        ms = self.master
        if buf is None or ms is None or self.state is not S.CONNECTED:
            return
        for _ in range(DRAIN_BLOCKS):
            block = buf.pop_block()
            if block is None:
                break
            self._stream(block)
            if self.master is not ms or self.fsbuf is not buf:
                return  # the link was dropped while applying
        if buf.used:
            self._resume_main()
            self._request_drain()
        else:
            self._drain_done()

    def _drain_done(self) -> None:
        buf = self.fsbuf
        assert buf is not None
        self.fsbuf = None
        ms = self.master
        self.core.log.notice(f"MASTER <-> REPLICA sync: Successfully streamed replication buffer "
                             f"into the db ({buf.total} bytes in total)")
        self._emit("buffer_drained", bytes=buf.total, buffer_peak=buf.peak,
                   buffer_limit=buf.limit, duration_ms=self.now - self.link_up_ms,
                   offset=ms.reploff if ms is not None else None)
        self._resume_main()
