"""The replica side: follow a master — handshake, full sync, streaming, reconnects (replica side).

Theory of operation
-------------------
:class:`ReplicaSide` is Redis's ``replication.c`` "SLAVE" half re-expressed as a sans-io state
machine. It never touches a socket: the I/O shell (``pyrepl.net.replica_io.ReplicaIO``, reached as
``core.host.replica_io``) opens the connection it asks for and calls back with what happened
(``on_connected`` / ``on_connect_failed`` / ``on_data`` / ``on_closed``, and ``on_rdb_*`` /
``drain_step`` for the rdb channel); bytes for the master go out through ``io.send``. Every
callback carries the *token* of the connection attempt it belongs to, so a late event of an
abandoned connection is ignored. Time comes from ``core.now_ms``.

The side keeps the link itself — the state (moved only by :meth:`ReplicaSide.go`, through the
table of ``states``), connecting and reconnecting, the I/O callbacks, link loss, REPLICAOF and
REPLICAOF NO ONE, the cron, INFO and ROLE — and *holds* one object per phase, each built with its
collaborators and owning its own state:

* ``stream`` (:class:`~.stream.Stream`): the master client, ``master`` / ``cached``, applying
  and passing on the stream, ACKs;
* ``load`` (:class:`~.load.Load`): the full sync's payload, its progress and backoff;
* ``channel`` (:class:`~.channel.Channel`): the rdb channel and the full-sync buffer;
* ``handshake`` (:class:`~.handshake.Handshake`): PING to the PSYNC reply.

A phase reaches the link through the side's public methods (``go``, ``send``, ``emit``,
``handshake_failed``, ``cancel_handshake``, ``master_lost``, ``link_is_up``) and another phase
through that phase's public ones. What the side does with bytes read, a connection lost and a
timeout depends on the state: each is a table from state to handler (``_readers``,
``_closers``, ``_timeouts``, ``_protocol_failures``), built from the groups of states
``states`` names.

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

from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING, Any

from pyrepl import native
from pyrepl.config import ConfigError
from pyrepl.replication.fsm import step
from pyrepl.replication.replica import states
from pyrepl.replication.replica.channel import Channel
from pyrepl.replication.replica.handshake import Handshake
from pyrepl.replication.replica.load import Load
from pyrepl.replication.replica.states import (
    CAUGHT_UP_READ,
    CONNECT_TIMED,
    HANDSHAKE,
    INITIAL,
    LINE_STATES,
    LINKED,
    ROLE,
    TRANSITIONS,
    I,
    Input,
    ReplProtocolError,
    ReplState,
    S,
)
from pyrepl.replication.replica.stream import Stream
from pyrepl.replication.wire import CRON_MS, MAX_LINE
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.ports import ReplClient, ReplicaIOPort, ReplicationHost

# A reader takes the bytes read and the position to read from; it returns the position after
# what it consumed (len(data): all of it, or the rest waits in the line buffer).
Reader = Callable[[bytes, int], int]


class ReplicaSide:
    """The replica half of replication (see the module docstring)."""

    # master_host is read at its offset by a write's feed in C (pyrepl/replication/_feed.c),
    # the rest by a read's common case in C (replica/_streamread.c)
    __slots__ = ("master_host", "core", "state", "token", "_inbuf", "_await_caught_up",
                 "stream", "channel", "__dict__")

    def __init__(self, manager: Replication) -> None:
        self.manager = manager
        self.core: ReplicationHost = manager.core
        now = self.core.now_ms
        self.master_host: str | None = None
        self.master_port = 0
        self.state: ReplState = INITIAL
        self.token = 0  # the current connection attempt
        self._tokens = 0  # every connection (main or rdb channel) gets a fresh token
        self._inbuf = b""  # an incomplete handshake / header line
        self.sync_id = ""
        self.down_since_ms = 0  # repl_down_since (0: never went down)
        self.link_down_ms = now
        self.link_up_ms = 0
        self.link_up_offset = 0
        self._await_caught_up = False  # the caught_up event is due
        self._skip_read = False  # ... but not on the read that ended a diskless payload
        self._cron_ms = now
        self._immediate_ms = -CRON_MS  # last immediate reconnect (rate-limited to one a second)
        # the phases, each with its collaborators
        self.stream = Stream(self)
        self.load = Load(self, self.stream)
        self.channel = Channel(self, self.load, self.stream)
        self.handshake = Handshake(self, self.load, self.channel, self.stream)
        if _streamread is not None and _streamread_bound:   # (a read's common case in C)
            self.on_data = MethodType(_streamread.on_data, self)  # type: ignore[method-assign]
        # what the state makes of bytes read, a lost connection, a timeout, a protocol error
        self._readers: dict[ReplState, Reader] = {
            **dict.fromkeys(LINE_STATES, self._read_reply),
            S.TRANSFER: self._read_transfer,
            S.CONNECTED: self._read_stream,
        }
        self._closers: dict[ReplState, Callable[[str], None]] = {
            S.CONNECTING: self._closed_connecting,
            **dict.fromkeys(HANDSHAKE, self._closed_handshake),
            S.RECEIVE_PSYNC_REPLY: self._closed_psync,
            S.TRANSFER: self._closed_transfer,
            S.CONNECTED: self._closed_connected,
        }
        self._timeouts: dict[ReplState, Callable[[int, int], None]] = {
            **dict.fromkeys(CONNECT_TIMED, self._handshake_timeout),
            S.TRANSFER: self._transfer_timeout,
            S.CONNECTED: self._master_timeout,
        }
        self._protocol_failures: dict[ReplState, Callable[[str], None]] = {
            **dict.fromkeys(LINKED, self._cancel_on_error),
            S.CONNECTED: self._drop_master_on_error,
        }
        cfg = self.core.config
        if cfg.replicaof is not None:
            self.master_host, self.master_port = cfg.replicaof
            self.go(I.REPLICAOF)
            self._become_replica()

    # -- the table ------------------------------------------------------------------------
    def go(self, inp: Input, detail: str = "") -> ReplState:
        """The one move of the state machine: ``TRANSITIONS`` or ReplProtocolError."""
        self.state = step(TRANSITIONS, self.state, inp, ReplProtocolError, detail)
        return self.state

    # -- what the phases use --------------------------------------------------------------
    @property
    def io(self) -> ReplicaIOPort | None:
        return self.core.host.replica_io

    @property
    def now(self) -> int:
        now: int = self.core.now_ms
        return now

    @property
    def peer(self) -> str:
        return f"{self.master_host}:{self.master_port}"

    def emit(self, event: str, **fields: Any) -> None:
        self.manager.events.emit(self.now, event, ROLE, peer=self.peer,
                                 sync_id=self.sync_id or None, **fields)

    def send(self, data: bytes) -> None:
        io = self.io
        if io is not None:
            io.send(self.token, data)

    def next_token(self) -> int:
        self._tokens = max(self._tokens, self.token) + 1
        return self._tokens

    def _become_replica(self) -> None:
        self.core.expiry_deletes = False
        self.core.refresh_maxmemory()      # (replica-ignore-maxmemory)
        self.core.refresh_oom_score()
        log = self.core.log
        if hasattr(log, "role"):
            log.role = "S"

    # -- what the rest of the server asks -------------------------------------------------
    def link_up(self) -> bool:
        return states.link_up(self.state)

    def in_handshake(self) -> bool:
        return states.in_handshake(self.state)

    def full_sync_buffer_bytes(self) -> int:
        """INFO replica_full_sync_buffer_size / mem_replica_full_sync_buffer: whole blocks."""
        return self.channel.full_sync_buffer_bytes()

    def master_stream_db(self) -> int:
        """The db our master's stream has selected (repl-stream-db of an RDB we write)."""
        return self.stream.stream_db()

    def cache_master_using_myself(self) -> None:
        """replicationCacheMasterUsingMyself (the stream's): PSYNC our own history."""
        self.stream.cache_master_using_myself()

    def propagation_error(self, command: str, message: str) -> None:
        """A command of the master's stream answered an error here (the stream's)."""
        self.stream.propagation_error(command, message)

    def on_master_replconf(self, client: ReplClient, argv: list[bytes]) -> object:
        """REPLCONF sent by our master (the stream's)."""
        return self.stream.on_master_replconf(client, argv)

    # -- connecting -----------------------------------------------------------------------
    def start(self) -> None:
        """The server listens: connect now if ``replicaof`` was configured."""
        if self.master_host is not None and states.waiting_to_connect(self.state):
            self.core.log.notice(f"Connecting to MASTER {self.peer}")
            self._connect()

    def _connect(self) -> None:
        """connectWithMaster."""
        self.token = self.next_token()
        self.channel.new_connection()
        self.sync_id = self.manager.events.new_sync_id(self.now)
        self._inbuf = b""
        self.load.touch()
        self.go(I.CONNECT_START)
        self.core.log.notice("MASTER <-> REPLICA sync started")
        io = self.io
        if io is not None:
            assert self.master_host is not None
            io.connect(self.token, self.master_host, self.master_port)

    def _reconnect_now(self, after_failure: bool) -> None:
        """Redis reconnects at once after a lost link / failed transfer; we allow that once a
        second, otherwise the replication cron retries within the second."""
        if self.master_host is None or not states.waiting_to_connect(self.state):
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

    def handshake_failed(self, inp: Input, reason: str, error: str = "") -> None:
        """The error path of syncWithMaster: close, state CONNECT, the cron retries. A payload
        being loaded goes (the old dataset stays), and so do an rdb channel and the main
        channel's buffer (nothing of them was applied)."""
        self._close_link()
        self.load.abort()
        self.channel.abort()
        self.go(inp)
        self.emit("sync_failed", reason=reason, error=error or None)

    def cancel_handshake(self, reconnect: bool, inp: Input, reason: str,
                         error: str = "") -> None:
        """cancelReplicationHandshake: abort a connect, handshake or transfer."""
        if states.cancellable(self.state):
            self.handshake_failed(inp, reason, error)
            if reconnect:
                self._reconnect_now(after_failure=True)

    def link_is_up(self, mode: str, skip_read: bool = False) -> None:
        """The master client streams (after +CONTINUE, or a full sync's swap; ``mode``: the
        sync's). caught_up is due at the first read that drains the socket, but not at the
        read that ended a diskless payload (``skip_read``: the master streams its buffer only
        after our ACK)."""
        now = self.now
        self.down_since_ms = 0
        self.link_up_ms = now
        ms = self.stream.master
        self.link_up_offset = ms.reploff if ms is not None else 0
        self._await_caught_up = True
        self._skip_read = skip_read
        self.emit("link_up", mode=mode if mode != "partial" else None,
                  result="continue" if mode == "partial" else "full",
                  duration_ms=now - self.link_down_ms, offset=self.link_up_offset,
                  replid=self.manager.ids.replid)

    # -- the main channel's callbacks -----------------------------------------------------
    def on_connected(self, token: int) -> None:
        if token != self.token or not states.connecting(self.state):
            return
        self.go(I.CONNECT_OK)
        self.core.log.notice("Non blocking connect for SYNC fired the event.")
        self.send(encode_command([b"PING"]))

    def on_connect_failed(self, token: int, error: str) -> None:
        if token != self.token or not states.connecting(self.state):
            return
        self.core.log.warning(f"Error condition on socket for SYNC: {error}")
        self.handshake_failed(I.CONNECT_FAIL, "connect-error", error)

    def on_closed(self, token: int, error: str = "") -> None:
        """The connection closed (EOF or error)."""
        if token != self.token:
            return
        closer = self._closers.get(self.state)
        if closer is not None:
            closer(error)

    def _closed_connecting(self, error: str) -> None:
        self.on_connect_failed(self.token, error or "Connection closed")

    def _closed_psync(self, error: str) -> None:
        log = self.core.log
        log.warning(f"Failed to read response from the server: {error or 'connection lost'}")
        log.warning("Master did not reply to PSYNC, will try later")
        self.handshake_failed(I.LINK_LOST, "connection-lost", error)

    def _closed_handshake(self, error: str) -> None:
        log = self.core.log
        log.warning(f"Failed to read response from the server: {error or 'connection lost'}")
        log.warning("Master did not respond to command during SYNC handshake")
        self.handshake_failed(I.LINK_LOST, "connection-lost", error)

    def _closed_transfer(self, error: str) -> None:
        log = self.core.log
        if self.channel.buffering:
            log.warning(f"I/O error on the main channel while the rdb channel loads: "
                        f"{error or 'connection lost'}")
            self.channel.park()      # (a pyrepl master may let it resume)
            self.cancel_handshake(True, I.LINK_LOST, "main-channel-lost", error)
            return
        if self.load.transfer_size == -1:
            log.warning(f"I/O error reading bulk count from MASTER: "
                        f"{error or 'connection lost'}")
        else:
            log.warning(f"I/O error trying to sync with MASTER: {error or 'connection lost'}")
        self.load.park(self.peer)      # (a pyrepl master may let it resume)
        self.cancel_handshake(True, I.LINK_LOST, "connection-lost", error)

    def _closed_connected(self, error: str) -> None:
        self.master_lost("connection-lost", cache=True)

    def on_data(self, token: int, data: bytes) -> None:
        """Bytes read on the main channel. (Its common case, a read of the stream while
        CONNECTED, runs in C: ``_streamread.on_data``, installed as the instance's own.)"""
        if token != self.token or not data:
            return
        try:
            self.receive_data(data, from_read=True)
        except ReplProtocolError as e:
            self.protocol_failed(e)

    def protocol_failed(self, e: ReplProtocolError) -> None:
        """The master broke the protocol: what the state does of it (``_protocol_failures``)."""
        self.core.log.warning(str(e))
        failure = self._protocol_failures.get(self.state, self._close_on_error)
        failure(str(e))

    def _drop_master_on_error(self, error: str) -> None:
        self.master_lost("protocol-error", cache=False)

    def _cancel_on_error(self, error: str) -> None:
        self.cancel_handshake(False, I.LINK_LOST, "protocol-error", error)

    def _close_on_error(self, error: str) -> None:
        self._close_link()

    # -- the rdb channel's callbacks (the channel's) --------------------------------------
    def on_rdb_connected(self, token: int) -> None:
        self.channel.on_connected(token)

    def on_rdb_connect_failed(self, token: int, error: str) -> None:
        self.channel.on_connect_failed(token, error)

    def on_rdb_data(self, token: int, data: bytes) -> None:
        self.channel.on_data(token, data)

    def on_rdb_closed(self, token: int, error: str = "") -> None:
        self.channel.on_closed(token, error)

    def drain_step(self, token: int) -> None:
        """Apply a step of the full-sync buffer (the channel's; asked with request_drain)."""
        self.channel.drain_step(token)

    # -- bytes from the master ------------------------------------------------------------
    def receive_data(self, data: bytes, from_read: bool = False) -> None:
        """Consume bytes from the master in any state that reads (raises ReplProtocolError
        when the current state reads nothing). ``from_read``: ``data`` is one socket read."""
        self._receive(data)
        if from_read:
            self.after_read(len(data))

    def after_read(self, read_len: int) -> None:
        """A socket read was consumed: the caught_up event, when due."""
        if self._await_caught_up and states.link_up(self.state) and not self.channel.buffering:
            self._check_caught_up(read_len)

    def _check_caught_up(self, read_len: int) -> None:
        """caught_up: the first read after link up that did not fill a 64 KiB buffer (the
        socket was drained, so the replica holds all the master had sent), except the read
        that ended a diskless payload (the master streams its buffer only after our ACK)."""
        if self._skip_read:
            self._skip_read = False
            return
        if read_len >= CAUGHT_UP_READ:
            return
        ms = self.stream.master
        assert ms is not None
        self._await_caught_up = False
        self.emit("caught_up", duration_ms=self.now - self.link_up_ms, offset=ms.reploff,
                  bytes=ms.reploff - self.link_up_offset)

    def _receive(self, data: bytes) -> None:
        self.go(I.DATA)
        if self._inbuf:
            data = self._inbuf + data
            self._inbuf = b""
        pos = 0
        n = len(data)
        token = self.token
        readers = self._readers
        while pos < n:
            if self.token != token:
                return  # the link was dropped (and maybe re-opened) while handling a reply
            reader = readers.get(self.state)
            if reader is None:
                return  # a state that expects no data (the link closed under a reply)
            pos = reader(data, pos)

    def _line(self, data: bytes, pos: int) -> int:
        """The end of the line at ``pos`` (after its ``\\n``), or -1: the partial line waits
        in the line buffer for the next read."""
        nl = data.find(b"\n", pos)
        if nl < 0:
            if len(data) - pos > MAX_LINE:
                raise ReplProtocolError(self.state, I.DATA, "reply line too long")
            self._inbuf = data[pos:]
            return -1
        return nl + 1

    def _read_reply(self, data: bytes, pos: int) -> int:
        """A handshake state: one reply line, to the handshake."""
        end = self._line(data, pos)
        if end < 0:
            return len(data)
        line = data[pos:end - 1]
        self.handshake.reply(line[:-1] if line.endswith(b"\r") else line)
        return end

    def _read_transfer(self, data: bytes, pos: int) -> int:
        """TRANSFER: the main channel's bytes for the full-sync buffer (rdb channel), the
        payload, or a line before it (keepalive or header)."""
        if self.channel.buffering:
            self.channel.buffer_main(data[pos:] if pos else data)
            return len(data)
        load = self.load
        if load.transfer_size != -1:
            return load.payload(data, pos)
        end = self._line(data, pos)
        if end < 0:
            return len(data)
        line = data[pos:end - 1]
        load.header_line(line[:-1] if line.endswith(b"\r") else line, end - pos)
        return end

    def _read_stream(self, data: bytes, pos: int) -> int:
        """CONNECTED: the replication stream (held while the full-sync buffer drains)."""
        rest = data[pos:] if pos else data
        if self.channel.buffering:  # rdb channel: the buffer is still draining
            self.channel.buffer_main(rest)
        else:
            self.stream.stream(rest)
        return len(data)

    # -- link loss, REPLICAOF -------------------------------------------------------------
    def master_lost(self, reason: str, cache: bool, reconnect: bool = True) -> None:
        """freeClient(server.master): cache it (unless it broke the protocol), reconnect."""
        if self.stream.master is None:
            return
        self.core.log.warning("Connection with master lost.")
        self._close_link()
        self.channel.drop_buffer()  # not applied yet: the master resends it after +CONTINUE
        ms = self.stream.detach(cache)
        self.emit("link_down", reason=reason, offset=ms.reploff,
                  duration_ms=self.now - self.link_up_ms)
        # replicationHandleMasterDisconnection
        self.go(I.PROTOCOL_ERROR if reason == "protocol-error" else
                I.TIMEOUT if reason == "timeout" else I.LINK_LOST)
        self.down_since_ms = self.now
        self.link_down_ms = self.now
        if reconnect and self.master_host is not None:
            self._reconnect_now(after_failure=False)

    def set_master(self, host: str, port: int) -> None:
        """replicationSetMaster (REPLICAOF host port)."""
        core = self.core
        was_master = self.master_host is None
        if self.stream.master is not None:
            self.master_lost("replicaof", cache=True, reconnect=False)
        core.blocking.disconnect_all()   # clients blocked in master, now replica
        self.load.reset_backoff()     # a new master: no backoff carried over
        self.master_host = host
        self.master_port = port
        self.manager.refresh_stream_live()
        self.cancel_handshake(False, I.REPLICAOF, "replicaof")
        if was_master:
            self.stream.discard_cached()
            self.stream.cache_master_using_myself()
        self.go(I.REPLICAOF)
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
        if self.stream.master is not None:
            self.master_lost("promoted", cache=True, reconnect=False)
        self.stream.discard_cached()
        self.cancel_handshake(False, I.NO_ONE, "promoted")
        self.master_host = None
        self.manager.refresh_stream_live()
        if not states.idle(self.state):
            self._close_link()
            self.go(I.NO_ONE)
        ids = m.ids
        ids.shift(m.master_repl_offset)
        core.log.warning(f"Setting secondary replication ID to {ids.replid2}, valid up to "
                         f"offset: {ids.second_repl_offset}. New replication ID is {ids.replid}")
        m.master.disconnect_replicas()
        m.stream_db = -1
        m.no_replicas_since_ms = self.now
        self.down_since_ms = 0
        core.expiry_deletes = True
        core.refresh_maxmemory()
        core.refresh_oom_score()
        log = core.log
        if hasattr(log, "role"):
            log.role = "M"
        core.config.set("replicaof", "no one", force=True)

    # -- the cron -------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """replicationCron's replica part, once a second."""
        ms = self.stream.master
        if ms is not None and ms.client.close_after_reply:  # killed without a transport
            self.master_lost("killed", cache=True)
        if now_ms - self._cron_ms < CRON_MS:
            return
        self._cron_ms = now_ms
        if self.load.parked is not None:
            self.load.expire_parked()
        if self.master_host is None:
            return
        timeout = self._timeouts.get(self.state)
        if timeout is not None:
            timeout(now_ms, self.core.config.repl_timeout * 1000)
        if states.waiting_to_connect(self.state) and now_ms >= self.load.retry_at_ms:
            self.core.log.notice(f"Connecting to MASTER {self.peer}")
            self._connect()
        ms = self.stream.master
        if ms is not None and not ms.pre_psync:
            self.stream.send_ack()

    def _handshake_timeout(self, now_ms: int, timeout_ms: int) -> None:
        if now_ms - self.load.transfer_lastio_ms > timeout_ms:
            self.core.log.warning("Timeout connecting to the MASTER...")
            self.cancel_handshake(True, I.TIMEOUT, "timeout")

    def _transfer_timeout(self, now_ms: int, timeout_ms: int) -> None:
        if now_ms - self.load.transfer_lastio_ms > timeout_ms:
            self.core.log.warning("Timeout receiving bulk data from MASTER... If the problem "
                                  "persists try to set the 'repl-timeout' parameter in "
                                  "redis.conf to a larger value.")
            self.cancel_handshake(True, I.TIMEOUT, "timeout")

    def _master_timeout(self, now_ms: int, timeout_ms: int) -> None:
        ms = self.stream.master
        if ms is not None and now_ms - ms.client.last_interaction_ms > timeout_ms:
            self.core.log.warning("MASTER timeout: no data nor PING received...")
            self.master_lost("timeout", cache=True)

    def client_closed(self, client: ReplClient) -> None:
        ms = self.stream.master
        if ms is not None and client is ms.client:
            self.master_lost("closed", cache=True)

    # -- INFO, ROLE -----------------------------------------------------------------------
    def info_fields(self) -> list[tuple[str, object]]:
        """INFO replication, role:slave part (Redis 7.0.15's fields and order)."""
        now_s = self.now // 1000
        ms = self.stream.master
        ref = ms or self.stream.cached
        cfg = self.core.config
        up = states.link_up(self.state)
        syncing = states.transferring(self.state)
        fields: list[tuple[str, object]] = [
            ("master_host", self.master_host),
            ("master_port", self.master_port),
            ("master_link_status", "up" if up else "down"),
            ("master_last_io_seconds_ago",
             now_s - ms.client.last_interaction_ms // 1000 if ms is not None else -1),
            ("master_sync_in_progress", int(syncing)),
            ("slave_read_repl_offset", ref.read_reploff if ref is not None else 1),
            ("slave_repl_offset", ref.reploff if ref is not None else 1),
            ("replica_full_sync_buffer_size", self.channel.full_sync_buffer_bytes()),
            ("replica_full_sync_buffer_peak", self.channel.fsbuf_peak),
        ]
        if syncing:
            load = self.load
            size, read = load.transfer_size, load.transfer_read
            perc = (read / size) * 100 if size else 0.0
            fields.extend([
                ("master_sync_total_bytes", size),
                ("master_sync_read_bytes", read),
                ("master_sync_left_bytes", size - read),
                ("master_sync_perc", f"{perc:.2f}"),
                ("master_sync_last_io_seconds_ago", now_s - load.transfer_lastio_ms // 1000),
            ])
        if not up:
            fields.append(("master_link_down_since_seconds",
                           now_s - self.down_since_ms // 1000 if self.down_since_ms else -1))
        fields.extend([
            ("slave_priority", cfg.replica_priority),
            ("slave_read_only", int(cfg.replica_read_only)),
            ("replica_announced", int(cfg.replica_announced)),
            # pyrepl's: the running or last full sync's mode, the dialect it spoke (disk,
            # diskless, rdb-channel for Redis 8's, dual-channel for Valkey's; "" before any)
            ("master_sync_mode", self.load.mode),
            *self.channel.spill_fields(),
            # pyrepl's: the payload bytes kept of a cut sync that may resume (0: none)
            ("master_sync_resume_kept_bytes",
             self.load.parked.read if self.load.parked is not None else 0),
        ])
        return fields

    def role_reply(self) -> list[object]:
        """ROLE for a replica: slave, host, port, state, offset."""
        ms = self.stream.master
        return [b"slave", (self.master_host or "").encode(), self.master_port,
                states.role_state(self.state).encode(), ms.reploff if ms is not None else -1]


_streamread = native.load("pyrepl.replication.replica._streamread")
_streamread_bound = False


def bind_streamread(client_cls: type, core_cls: type, stats_cls: type) -> None:
    """Bind the C of a stream read to the classes whose slots it reads: the core's, which
    this layer does not import (the core binds it), and ours. A side made before runs the
    Python."""
    global _streamread_bound
    if _streamread is None:
        return
    from pyrepl.fastpath import execute
    from pyrepl.keyspace.db import Database
    from pyrepl.replication.replica.stream import MasterState, _feed, write_aof
    from pyrepl.resp.fastreader import FastRespReader, first, release
    from pyrepl.resp.reader import ProtocolError, RespReader

    _streamread.bind(ReplicaSide, Stream, Channel, MasterState, client_cls, core_cls,
                     stats_cls, FastRespReader, RespReader, S.CONNECTED, I.DATA, I.STREAM,
                     TRANSITIONS, ReplProtocolError, ProtocolError, execute, first, release,
                     None if _feed is None else _feed.feed_raw, write_aof, Database)
    _streamread_bound = True
