"""The replica side: follow a master — handshake, full sync, streaming, reconnects (replica side).

Theory of operation
-------------------
:class:`ReplicaSide` is Redis's ``replication.c`` "SLAVE" half re-expressed as a sans-io state
machine. It never touches a socket: the I/O shell (``pyrepl.net.replica_io.ReplicaIO``, reached as
``core.host.replica_io``) opens the connection it asks for and calls back with what happened
(``on_connected`` / ``on_connect_failed`` / ``on_data`` / ``on_closed``); bytes for the master go
out through ``io.send``. Every callback carries the *token* of the connection attempt it belongs
to, so a late event of an abandoned connection is ignored. Time comes from ``core.now_ms``.

The side is one object whose methods are grouped by phase in the modules of this package:
``states`` (the table), ``handshake``, ``load`` (the full sync's payload), ``channel`` (the
rdb channel), ``stream`` (the master client); this module keeps the link itself: connecting,
the I/O callbacks, link loss, REPLICAOF, the cron and INFO.

Link loss: a master lost while CONNECTED is *cached* (its replid, reploff and selected db), so the
reconnect PSYNCs from ``reploff + 1`` and usually gets ``+CONTINUE`` (then ``+CONTINUE <new id>``
shifts our ids: ``replid2 := old``, ``second_repl_offset := offset + 1``, and sub-replicas are
disconnected). A protocol error from the master drops it without caching (full sync next).
Reconnects follow Redis's cadence: at once after losing an established link or a failed
transfer (at most one such immediate retry per second, so a master that keeps failing the sync
cannot drive a busy loop), then once per second (the replication cron) until one succeeds.

``REPLICAOF host port`` turning a master into a replica first synthesises a cached master from its
own replid/offset (``cache_master_using_myself``), so a demoted master PSYNCs its own history;
``REPLICAOF NO ONE`` shifts the ids (the old history stays valid as replid2), keeps the backlog
and disconnects sub-replicas. A restarted replica gets the same cached master from the RDB's
``repl-id`` / ``repl-offset`` (``manager.restore_from_rdb``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrepl.config import ConfigError
from pyrepl.replication.fsm import step
from pyrepl.replication.replica.channel import Channel
from pyrepl.replication.replica.handshake import Handshake
from pyrepl.replication.replica.load import Load, _Load
from pyrepl.replication.replica.rdbchannel import (
    FullSyncBuffer,
    RdbChannel,
)
from pyrepl.replication.replica.states import (
    _LINE_STATES,
    _LINKED,
    _ROLE_STATE,
    CAUGHT_UP_READ,
    ROLE,
    TRANSITIONS,
    I,
    Input,
    ReplProtocolError,
    ReplState,
    S,
)
from pyrepl.replication.replica.stream import MasterState, Stream
from pyrepl.replication.wire import CRON_MS, MAX_LINE
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.ports import ReplicaIOPort


class ReplicaSide(Handshake, Load, Channel, Stream):
    """The replica half of replication (see the module docstring)."""

    # (read at its offset by a write's feed in C: pyrepl/replication/_feed.c)
    __slots__ = ("master_host",)

    def __init__(self, manager: Replication) -> None:
        self.manager = manager
        self.core = manager.core
        self.master_host: str | None = None
        self.master_port = 0
        self.state = S.NONE
        self.master: MasterState | None = None  # server.master
        self.cached: MasterState | None = None  # server.cached_master
        self.master_replid = ""  # from +FULLRESYNC
        self.master_initial_offset = -1
        self.token = 0  # the current connection attempt
        self._inbuf = b""  # an incomplete handshake / header line
        self.transfer_size = -1
        self.transfer_read = 0
        self.transfer_lastio_ms = 0
        self._load: _Load | None = None
        self.down_since_ms = 0  # repl_down_since (0: never went down)
        self._cron_ms = self.core.now_ms
        self._immediate_ms = -CRON_MS  # last immediate reconnect (rate-limited to one a second)
        # A dataset we cannot load: consecutive failures and when to try again (backoff).
        self._load_failures = 0
        self._retry_at_ms = 0
        self.sync_id = ""
        self.psync_sent_ms = 0
        self.link_down_ms = self.core.now_ms
        self.link_up_ms = 0
        self.link_up_offset = 0
        self.mode = ""
        self._await_caught_up = False
        self._skip_read = False
        self._tokens = 0  # every connection (main or rdb channel) gets a fresh token
        # rdb channel (Redis 8): the second connection, and the main channel's local buffer
        self.rdbch: RdbChannel | None = None
        self.rdbch_token = 0
        self.fsbuf: FullSyncBuffer | None = None  # from +RDBCHANNELSYNC until drained
        self.fsbuf_peak = 0  # INFO replica_full_sync_buffer_peak (never reset)
        self._main_paused = False
        self._drain_requested = False
        self._limit_logged = False
        cfg = self.core.config
        if cfg.replicaof is not None:
            self.master_host, self.master_port = cfg.replicaof
            self.state = S.CONNECT
            self._become_replica()

    def _go(self, inp: Input, detail: str = "") -> ReplState:
        self.state = step(TRANSITIONS, self.state, inp, ReplProtocolError, detail)
        return self.state

    @property
    def io(self) -> ReplicaIOPort:
        return self.core.host.replica_io  # type: ignore[return-value]  (set with the side)

    @property
    def now(self) -> int:
        return self.core.now_ms

    @property
    def peer(self) -> str:
        return f"{self.master_host}:{self.master_port}"

    def _emit(self, event: str, **fields: Any) -> None:
        self.manager.events.emit(self.now, event, ROLE, peer=self.peer, sync_id=self.sync_id or None,
                                 **fields)

    def _send(self, data: bytes) -> None:
        io = self.io
        if io is not None:
            io.send(self.token, data)

    def _become_replica(self) -> None:
        self.core.expiry_deletes = False
        log = self.core.log
        if hasattr(log, "role"):
            log.role = "S"

    def link_up(self) -> bool:
        return self.state is S.CONNECTED

    def in_handshake(self) -> bool:
        return S.RECEIVE_PING_REPLY.value <= self.state.value <= S.RECEIVE_PSYNC_REPLY.value

    def full_sync_buffer_bytes(self) -> int:
        """INFO replica_full_sync_buffer_size / mem_replica_full_sync_buffer: whole blocks."""
        b = self.fsbuf
        return b.size if b is not None else 0

    def full_sync_buffer_peak(self) -> int:
        """INFO replica_full_sync_buffer_peak: the high-water mark, never reset."""
        return self.fsbuf_peak

    def full_sync_buffer_limit(self) -> int:
        """replica-full-sync-buffer-limit, 0 meaning the replica class's hard output limit."""
        cfg = self.core.config
        limit = cfg.replica_full_sync_buffer_limit
        if not limit:
            limit = cfg.client_output_buffer_limit.get("replica", (0, 0, 0))[0]
        return limit

    def master_stream_db(self) -> int:
        """The db our master's stream has selected (repl-stream-db of an RDB we write)."""
        m = self.master or self.cached
        return m.client.db.id if m is not None else -1

    def start(self) -> None:
        """The server listens: connect now if ``replicaof`` was configured."""
        if self.master_host is not None and self.state is S.CONNECT:
            self.core.log.notice(f"Connecting to MASTER {self.peer}")
            self._connect()

    def _next_token(self) -> int:
        self._tokens = max(self._tokens, self.token) + 1
        return self._tokens

    def _connect(self) -> None:
        """connectWithMaster."""
        self.token = self._next_token()
        self._main_paused = False
        self._drain_requested = False
        self.sync_id = self.manager.events.new_sync_id(self.now)
        self._inbuf = b""
        self.transfer_lastio_ms = self.now
        self._go(I.CONNECT_START)
        self.core.log.notice("MASTER <-> REPLICA sync started")
        io = self.io
        if io is not None:
            io.connect(self.token, self.master_host, self.master_port)

    def _reconnect_now(self, after_failure: bool) -> None:
        """Redis reconnects at once after a lost link / failed transfer; we allow that once a
        second, otherwise the replication cron retries within the second."""
        if self.master_host is None or self.state is not S.CONNECT:
            return
        if self.now - self._immediate_ms < CRON_MS:
            return
        self._immediate_ms = self.now
        if after_failure:
            self.core.log.notice(f"Reconnecting to MASTER {self.peer} after failure")
        else:
            self.core.log.notice(f"Reconnecting to MASTER {self.peer}")
        self._connect()

    def _close_link(self) -> None:
        io = self.io
        if io is not None:
            io.close(self.token)
        self._inbuf = b""

    def _abort_transfer(self) -> None:
        """Drop a payload being loaded: the fresh dicts go, the old dataset stays; an rdb
        channel and the main channel's buffer go too (nothing of them was applied)."""
        if self._load is not None:
            self._load = None
            self.core.log.notice("MASTER <-> REPLICA sync: Discarding temporary DB in background")
        self.transfer_size = -1
        self.transfer_read = 0
        self._close_rdb_channel()
        self.fsbuf = None
        self._drain_requested = False

    def _handshake_failed(self, inp: Input, reason: str, error: str = "") -> None:
        """The error path of syncWithMaster: close, state CONNECT, the cron retries."""
        self._close_link()
        self._abort_transfer()
        self._go(inp)
        self._emit("sync_failed", reason=reason, error=error or None)

    def _cancel_handshake(self, reconnect: bool, inp: Input, reason: str,
                          error: str = "") -> None:
        """cancelReplicationHandshake: abort a connect, handshake or transfer."""
        if self.state is S.TRANSFER or self.state is S.CONNECTING or self.in_handshake():
            self._handshake_failed(inp, reason, error)
            if reconnect:
                self._reconnect_now(after_failure=True)

    def on_connected(self, token: int) -> None:
        if token != self.token or self.state is not S.CONNECTING:
            return
        self._go(I.CONNECT_OK)
        self.core.log.notice("Non blocking connect for SYNC fired the event.")
        self._send(encode_command([b"PING"]))

    def on_connect_failed(self, token: int, error: str) -> None:
        if token != self.token or self.state is not S.CONNECTING:
            return
        self.core.log.warning(f"Error condition on socket for SYNC: {error}")
        self._handshake_failed(I.CONNECT_FAIL, "connect-error", error)

    def on_closed(self, token: int, error: str = "") -> None:
        """The connection closed (EOF or error)."""
        if token != self.token:
            return
        st = self.state
        log = self.core.log
        if st is S.CONNECTING:
            self.on_connect_failed(token, error or "Connection closed")
        elif st is S.RECEIVE_PSYNC_REPLY:
            log.warning(f"Failed to read response from the server: {error or 'connection lost'}")
            log.warning("Master did not reply to PSYNC, will try later")
            self._handshake_failed(I.LINK_LOST, "connection-lost", error)
        elif self.in_handshake():
            log.warning(f"Failed to read response from the server: {error or 'connection lost'}")
            log.warning("Master did not respond to command during SYNC handshake")
            self._handshake_failed(I.LINK_LOST, "connection-lost", error)
        elif st is S.TRANSFER and self.fsbuf is not None:
            log.warning(f"I/O error on the main channel while the rdb channel loads: "
                        f"{error or 'connection lost'}")
            self._cancel_handshake(True, I.LINK_LOST, "main-channel-lost", error)
        elif st is S.TRANSFER:
            if self.transfer_size == -1:
                log.warning(f"I/O error reading bulk count from MASTER: "
                            f"{error or 'connection lost'}")
            else:
                log.warning(f"I/O error trying to sync with MASTER: {error or 'connection lost'}")
            self._cancel_handshake(True, I.LINK_LOST, "connection-lost", error)
        elif st is S.CONNECTED:
            self._master_lost("connection-lost", cache=True)

    def on_data(self, token: int, data: bytes) -> None:
        if token != self.token or not data:
            return
        try:
            self.receive_data(data, from_read=True)
        except ReplProtocolError as e:
            self.core.log.warning(str(e))
            self._protocol_failure(str(e))

    def _protocol_failure(self, error: str) -> None:
        if self.state is S.CONNECTED:
            self._master_lost("protocol-error", cache=False)
        elif self.state in _LINKED:
            self._cancel_handshake(False, I.LINK_LOST, "protocol-error", error)
        else:
            self._close_link()

    def receive_data(self, data: bytes, from_read: bool = False) -> None:
        """Consume bytes from the master in any state that reads (raises ReplProtocolError
        when the current state reads nothing). ``from_read``: ``data`` is one socket read."""
        self._receive(data)
        if from_read and self._await_caught_up and self.state is S.CONNECTED \
                and self.fsbuf is None:
            self._check_caught_up(len(data))

    def _check_caught_up(self, read_len: int) -> None:
        """caught_up: the first read after link up that did not fill a 64 KiB buffer (the
        socket was drained, so the replica holds all the master had sent), except the read
        that ended a diskless payload (the master streams its buffer only after our ACK)."""
        if self._skip_read:
            self._skip_read = False
            return
        if read_len >= CAUGHT_UP_READ:
            return
        ms = self.master
        assert ms is not None
        self._await_caught_up = False
        self._emit("caught_up", duration_ms=self.now - self.link_up_ms, offset=ms.reploff,
                   bytes=ms.reploff - self.link_up_offset)

    def _receive(self, data: bytes) -> None:
        self._go(I.DATA)
        if self._inbuf:
            data = self._inbuf + data
            self._inbuf = b""
        pos = 0
        n = len(data)
        token = self.token
        while pos < n:
            if self.token != token:
                return  # the link was dropped (and maybe re-opened) while handling a reply
            st = self.state
            if st is S.CONNECTED:
                if self.fsbuf is not None:  # rdb channel: the buffer is still draining
                    self._buffer_main(data[pos:] if pos else data)
                else:
                    self._stream(data[pos:] if pos else data)
                return
            if st is S.TRANSFER and self.fsbuf is not None:
                self._buffer_main(data[pos:] if pos else data)
                return
            if st is S.TRANSFER and self.transfer_size != -1:
                pos = self._payload(data, pos)
                continue
            if st in _LINE_STATES or st is S.TRANSFER:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    if n - pos > MAX_LINE:
                        raise ReplProtocolError(st, I.DATA, "reply line too long")
                    self._inbuf = data[pos:]
                    return
                raw_len = nl + 1 - pos
                line = data[pos:nl]
                if line.endswith(b"\r"):
                    line = line[:-1]
                pos = nl + 1
                if st is S.TRANSFER:
                    self.core.stats.net_repl_input_bytes += raw_len
                    self._transfer_line(line)
                else:
                    self._handshake_line(line)
                continue
            # a state that expects no data (the link closed under a reply)
            return

    def _master_lost(self, reason: str, cache: bool, reconnect: bool = True) -> None:
        """freeClient(server.master): cache it (unless it broke the protocol), reconnect."""
        ms = self.master
        core = self.core
        log = core.log
        if ms is None:
            return
        log.warning("Connection with master lost.")
        self._close_link()
        self.fsbuf = None  # not applied yet: the master resends it after +CONTINUE
        self._drain_requested = False
        self._main_paused = False
        c = ms.client
        core.clients.pop(c.id, None)
        c.transport = None
        c.closed = True
        self.master = None
        if cache:
            log.notice("Caching the disconnected master state.")
            # Drop what was read but not applied: the master resends it after +CONTINUE.
            ms.read_reploff = ms.reploff
            ms.fed = ms.reploff
            ms.unapplied = bytearray()
            if c.in_multi:
                c.in_multi = False
                c.multi_queue = []
                c.multi_error = False
            c.out.clear()
            self.cached = ms
        self._emit("link_down", reason=reason, offset=ms.reploff,
                   duration_ms=self.now - self.link_up_ms)
        # replicationHandleMasterDisconnection
        self._go(I.PROTOCOL_ERROR if reason == "protocol-error" else
                 I.TIMEOUT if reason == "timeout" else I.LINK_LOST)
        self.down_since_ms = self.now
        self.link_down_ms = self.now
        if reconnect and self.master_host is not None:
            self._reconnect_now(after_failure=False)

    def set_master(self, host: str, port: int) -> None:
        """replicationSetMaster (REPLICAOF host port)."""
        core = self.core
        was_master = self.master_host is None
        if self.master is not None:
            self._master_lost("replicaof", cache=True, reconnect=False)
        core.blocking.disconnect_all()   # clients blocked in master, now replica
        self._load_failures = 0     # a new master: no backoff carried over
        self._retry_at_ms = 0
        self.master_host = host
        self.master_port = port
        self.manager.refresh_stream_live()
        self._cancel_handshake(False, I.REPLICAOF, "replicaof")
        if was_master:
            self._discard_cached_master()
            self.cache_master_using_myself()
        self._go(I.REPLICAOF)
        self._become_replica()
        try:
            core.config.set("replicaof", f"{host} {port}", force=True)
        except ConfigError as e:  # a host the config syntax cannot hold: keep the old value
            core.log.warning(f"replicaof not recorded in the config: {e}")
        self.link_down_ms = self.now
        core.log.notice(f"Connecting to MASTER {self.peer}")
        self._connect()

    def unset_master(self) -> None:
        """replicationUnsetMaster (REPLICAOF NO ONE): become a master, keeping the history."""
        if self.master_host is None:
            return
        core = self.core
        m = self.manager
        if self.master is not None:
            self._master_lost("promoted", cache=True, reconnect=False)
        self._discard_cached_master()
        self._cancel_handshake(False, I.NO_ONE, "promoted")
        self.master_host = None
        self.manager.refresh_stream_live()
        if self.state is not S.NONE:
            self._close_link()
            self._go(I.NO_ONE)
        ids = m.ids
        ids.shift(m.master_repl_offset)
        core.log.warning(f"Setting secondary replication ID to {ids.replid2}, valid up to "
                         f"offset: {ids.second_repl_offset}. New replication ID is {ids.replid}")
        m.master.disconnect_replicas()
        m.stream_db = -1
        m.no_replicas_since_ms = self.now
        self.down_since_ms = 0
        core.expiry_deletes = True
        log = core.log
        if hasattr(log, "role"):
            log.role = "M"
        core.config.set("replicaof", "no one", force=True)

    def tick(self, now_ms: int) -> None:
        """replicationCron's replica part, once a second."""
        ms = self.master
        if ms is not None and ms.client.close_after_reply:  # killed without a transport
            self._master_lost("killed", cache=True)
        if now_ms - self._cron_ms < CRON_MS:
            return
        self._cron_ms = now_ms
        if self.master_host is None:
            return
        log = self.core.log
        timeout_ms = self.core.config.repl_timeout * 1000
        st = self.state
        if (st is S.CONNECTING or self.in_handshake()) and \
                now_ms - self.transfer_lastio_ms > timeout_ms:
            log.warning("Timeout connecting to the MASTER...")
            self._cancel_handshake(True, I.TIMEOUT, "timeout")
        elif st is S.TRANSFER and now_ms - self.transfer_lastio_ms > timeout_ms:
            log.warning("Timeout receiving bulk data from MASTER... If the problem persists try "
                        "to set the 'repl-timeout' parameter in redis.conf to a larger value.")
            self._cancel_handshake(True, I.TIMEOUT, "timeout")
        elif st is S.CONNECTED and ms is not None and \
                now_ms - ms.client.last_interaction_ms > timeout_ms:
            log.warning("MASTER timeout: no data nor PING received...")
            self._master_lost("timeout", cache=True)
        if self.state is S.CONNECT and now_ms >= self._retry_at_ms:
            log.notice(f"Connecting to MASTER {self.peer}")
            self._connect()
        ms = self.master
        if ms is not None and not ms.pre_psync:
            self.send_ack()

    def client_closed(self, client: Client) -> None:
        ms = self.master
        if ms is not None and client is ms.client:
            self._master_lost("closed", cache=True)

    def info_fields(self) -> list[tuple[str, object]]:
        """INFO replication, role:slave part (Redis 7.0.15's fields and order)."""
        now_s = self.now // 1000
        ms = self.master
        ref = ms or self.cached
        cfg = self.core.config
        fields: list[tuple[str, object]] = [
            ("master_host", self.master_host),
            ("master_port", self.master_port),
            ("master_link_status", "up" if self.state is S.CONNECTED else "down"),
            ("master_last_io_seconds_ago",
             now_s - ms.client.last_interaction_ms // 1000 if ms is not None else -1),
            ("master_sync_in_progress", int(self.state is S.TRANSFER)),
            ("slave_read_repl_offset", ref.read_reploff if ref is not None else 1),
            ("slave_repl_offset", ref.reploff if ref is not None else 1),
            ("replica_full_sync_buffer_size", self.full_sync_buffer_bytes()),
            ("replica_full_sync_buffer_peak", self.fsbuf_peak),
        ]
        if self.state is S.TRANSFER:
            size, read = self.transfer_size, self.transfer_read
            perc = (read / size) * 100 if size else 0.0
            fields.extend([
                ("master_sync_total_bytes", size),
                ("master_sync_read_bytes", read),
                ("master_sync_left_bytes", size - read),
                ("master_sync_perc", f"{perc:.2f}"),
                ("master_sync_last_io_seconds_ago", now_s - self.transfer_lastio_ms // 1000),
            ])
        if self.state is not S.CONNECTED:
            fields.append(("master_link_down_since_seconds",
                           now_s - self.down_since_ms // 1000 if self.down_since_ms else -1))
        fields.extend([
            ("slave_priority", cfg.replica_priority),
            ("slave_read_only", int(cfg.replica_read_only)),
            ("replica_announced", int(cfg.replica_announced)),
        ])
        return fields

    def role_reply(self) -> list[object]:
        """ROLE for a replica: slave, host, port, state, offset."""
        if self.in_handshake():
            state = "handshake"
        else:
            state = _ROLE_STATE.get(self.state, "unknown")
        ms = self.master
        return [b"slave", (self.master_host or "").encode(), self.master_port, state.encode(),
                ms.reploff if ms is not None else -1]
