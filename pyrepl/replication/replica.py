"""The replica side: follow a master — handshake, full sync, streaming, reconnects (replica side).

Theory of operation
-------------------
:class:`ReplicaSide` is Redis's ``replication.c`` "SLAVE" half re-expressed as a sans-io state
machine. It never touches a socket: the I/O shell (``pyrepl.net.replica_io.ReplicaIO``, reached as
``core.host.replica_io``) opens the connection it asks for and calls back with what happened
(``on_connected`` / ``on_connect_failed`` / ``on_data`` / ``on_closed``); bytes for the master go
out through ``io.send``. Every callback carries the *token* of the connection attempt it belongs
to, so a late event of an abandoned connection is ignored. Time comes from ``core.now_ms``.

States (``ReplState``, Redis's ``REPL_STATE_*`` minus the prefix) and the one transition table
``TRANSITIONS``; an input with no entry for the current state raises :class:`ReplProtocolError`
(the side logs it, drops the link and retries)::

    NONE --REPLICAOF--> CONNECT --CONNECT_START--> CONNECTING --CONNECT_OK--> RECEIVE_PING_REPLY
      ^                    ^  (CONNECT_FAIL, REPLY_ERR, TRY_LATER, TRANSFER_ERROR,        |
      |                    |   LINK_LOST, TIMEOUT, PROTOCOL_ERROR: back to CONNECT)      |
      |                    |                                                         REPLY_OK
    NO_ONE (any)           |                                                             v
                           |   RECEIVE_AUTH_REPLY <--SENT-- SEND_HANDSHAKE <-------------+
                           |     | REPLY_OK / SKIP (no masterauth)
                           |     v
                           |   RECEIVE_PORT_REPLY --> RECEIVE_IP_REPLY --> RECEIVE_CAPA_REPLY
                           |   (REPLY_OK or REPLY_ERR: "non critical")  (SKIP: no announce ip)
                           |                                                  | REPLY_OK/ERR
                           |                                                  v
                           |   RECEIVE_PSYNC_REPLY <--SENT-- SEND_PSYNC <-----+
                           |     | KEEPALIVE ("\n") stays
                           |     |-- CONTINUE ------------------------------> CONNECTED
                           |     |-- FULLRESYNC / NOT_SUPPORTED (SYNC) --> TRANSFER
                           |     |-- RDBCHANNELSYNC -----------------------> TRANSFER
                           |                                                  | KEEPALIVE,
                           |                                                  | BULK_HEADER,
                           +------------------------------------------------- | PAYLOAD,
                                                                              | BUFFER stay
                                                         LOADED --> CONNECTED (STREAM,
                                                                               BUFFER stay)

The handshake is Redis 7.0.15's, byte for byte: ``PING``; then in one write ``AUTH`` (when
``masterauth`` is set, with ``masteruser`` if set), ``REPLCONF listening-port <port>``,
``REPLCONF ip-address <ip>`` (only with ``replica-announce-ip``) and ``REPLCONF capa eof capa
psync2``; then ``PSYNC <cached master replid> <cached reploff + 1>`` or ``PSYNC ? -1`` without a
cached master. Replies are read as lines (``\\r`` stripped) and judged as Redis does:
PING accepts ``+...``, ``-NOAUTH``, ``-NOPERM`` and ``-ERR operation not permitted``; AUTH fails
on ``-``; REPLCONF errors are "non critical"; PSYNC answers ``+FULLRESYNC <id> <off>``,
``+CONTINUE [<id>]``, ``-NOMASTERLINK`` / ``-LOADING`` (try later) or anything else (Redis falls
back to the old ``SYNC``). With ``repl-rdb-channel yes`` (Redis 8) the capa line is ``REPLCONF
capa eof capa psync2 capa rdb-channel-repl`` and a master may answer ``+RDBCHANNELSYNC <id>``.

Transfer: empty lines are keepalives; ``$<len>`` announces a disk-based payload of exactly
``len`` bytes (no trailing CRLF), ``$EOF:<40-char mark>`` a diskless one that ends with the mark.
The payload is parsed as it arrives by the streaming :class:`~pyrepl.rdb.decoder.RdbDecoder` into
*fresh* per-db dicts while the old dataset keeps serving reads; only when the RDB, its CRC64 and
(diskless) the mark are all good are the dicts swapped in, atomically. A bad CRC, a broken mark,
a truncated payload or a timeout discard the new dicts: nothing is half-applied, the cached
master is kept, and the side reconnects. Progress (``master_sync_*`` in INFO) is Redis's:
``total`` is -1 before the header, 0 for ``$EOF:``, ``len`` for ``$<len>``; ``read`` counts
payload bytes (the mark included); ``left = total - read``; ``perc = read / total * 100``.

RDB channel (Redis 8, ``+RDBCHANNELSYNC <client-id>``): the snapshot comes on a second
connection, driven by :class:`~pyrepl.replication.rdbchannel.RdbChannel` (its own ``RDB_CH_*``
states; its callbacks are ``on_rdb_connected`` / ``on_rdb_connect_failed`` / ``on_rdb_data`` /
``on_rdb_closed`` with the rdb channel's token). Its ``+FULLRESYNC <replid> <offset>`` gives the
snapshot offset and its ``$EOF:`` payload goes through the same decoder, fresh dicts and swap as
above. Meanwhile the main connection stays in TRANSFER and every byte it delivers (the stream
from ``<offset> + 1``) is kept in a :class:`~pyrepl.replication.rdbchannel.FullSyncBuffer` (input
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

Streaming: the connection becomes the *master client* (``Client`` kind ``master``, flags ``M``),
whose commands run through ``core.execute`` with their replies dropped. Offsets (Redis's names):
``read_reploff`` counts every byte read from the master; ``reploff`` (``slave_repl_offset``)
advances only when a command has been executed, and not inside MULTI (so a transaction counts
at its EXEC): ``reploff = reader_base + reader.consumed``. Exactly the applied bytes are passed on
verbatim with ``manager.feed_raw`` (backlog and sub-replicas keep the master's ids and offsets).
Invariants: ``reploff <= read_reploff``; after each read ``manager.master_repl_offset ==
reploff`` while CONNECTED; the bytes fed to ``feed_raw`` are the master's bytes
``(fed, reploff]``, each exactly once.
``REPLCONF ACK <reploff>`` goes out once a second and when the master asks ``REPLCONF GETACK``.

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

from enum import Enum
from typing import TYPE_CHECKING, Any

from pyrepl.client import Client
from pyrepl.config import ConfigError, repr_arg
from pyrepl.rdb.decoder import Aux, End, RdbDecoder, RdbError
from pyrepl.replication.rdbchannel import (
    BulkHeader,
    Failed,
    FullResync,
    FullSyncBuffer,
    Keepalive,
    Payload,
    RdbChannel,
    RdbChannelError,
)
from pyrepl.resp.fastreader import make_reader
from pyrepl.resp.reader import ProtocolError
from pyrepl.resp.types import NO_REPLY
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication

EOF_MARK_LEN = 40  # CONFIG_RUN_ID_SIZE
MAX_LINE = 64 * 1024  # a handshake/header line longer than this is a protocol error
CRON_MS = 1000  # replicationCron runs once a second
#: The longest wait between syncs whose dataset this replica could not load (rdb-unsupported).
LOAD_BACKOFF_MAX_MS = 60_000
# A read shorter than this drained the socket: the replica has everything the master sent.
CAUGHT_UP_READ = 64 * 1024
ROLE = "replica"
# rdb channel: a drain step applies this many buffered blocks; the main channel may deliver at
# most one new read (<= one block) per step, so the buffer always shrinks.
DRAIN_BLOCKS = 2


class ReplState(Enum):
    """Redis's REPL_STATE_* (server.h), in the same order."""

    NONE = 0
    CONNECT = 1
    CONNECTING = 2
    RECEIVE_PING_REPLY = 3
    SEND_HANDSHAKE = 4
    RECEIVE_AUTH_REPLY = 5
    RECEIVE_PORT_REPLY = 6
    RECEIVE_IP_REPLY = 7
    RECEIVE_CAPA_REPLY = 8
    SEND_PSYNC = 9
    RECEIVE_PSYNC_REPLY = 10
    TRANSFER = 11
    CONNECTED = 12


class Input(Enum):
    """What can happen to the replica's link (a command, an I/O event, or a parsed reply)."""

    REPLICAOF = "replicaof"  # REPLICAOF host port (or replicaof from config)
    NO_ONE = "no-one"  # REPLICAOF NO ONE
    CONNECT_START = "connect-start"  # a connection attempt begins
    CONNECT_OK = "connect-ok"  # the TCP connection is up
    CONNECT_FAIL = "connect-fail"  # the TCP connection failed
    DATA = "data"  # bytes arrived (decomposed into the inputs below)
    REPLY_OK = "reply-ok"  # a handshake reply accepted as success
    REPLY_ERR = "reply-err"  # a handshake reply that is an error
    SENT = "sent"  # the handshake batch / PSYNC was written
    SKIP = "skip"  # a reply we do not wait for (no AUTH sent, no ip-address sent)
    KEEPALIVE = "keepalive"  # an empty line before the PSYNC reply or the payload header
    FULLRESYNC = "fullresync"  # +FULLRESYNC <replid> <offset>
    RDBCHANNELSYNC = "rdbchannelsync"  # +RDBCHANNELSYNC <client-id>: snapshot on a 2nd link
    CONTINUE = "continue"  # +CONTINUE [<replid>]
    TRY_LATER = "try-later"  # -NOMASTERLINK / -LOADING
    NOT_SUPPORTED = "not-supported"  # any other PSYNC reply: SYNC was sent instead
    BULK_HEADER = "bulk-header"  # $<len> or $EOF:<mark>
    PAYLOAD = "payload"  # RDB payload bytes
    LOADED = "loaded"  # the payload was received, verified and swapped in
    TRANSFER_ERROR = "transfer-error"  # master error / bad header / bad RDB / bad mark
    STREAM = "stream"  # replication stream bytes
    BUFFER = "buffer"  # rdb channel: main-channel bytes kept in the full-sync buffer
    PROTOCOL_ERROR = "protocol-error"  # the master broke the stream protocol
    LINK_LOST = "link-lost"  # the connection closed
    TIMEOUT = "timeout"  # repl-timeout elapsed


S = ReplState
I = Input  # noqa: E741 - a short alias keeps the table readable

_HANDSHAKE = (S.RECEIVE_PING_REPLY, S.SEND_HANDSHAKE, S.RECEIVE_AUTH_REPLY, S.RECEIVE_PORT_REPLY,
              S.RECEIVE_IP_REPLY, S.RECEIVE_CAPA_REPLY, S.SEND_PSYNC, S.RECEIVE_PSYNC_REPLY)
_LINKED = (S.CONNECTING, *_HANDSHAKE, S.TRANSFER, S.CONNECTED)
_LINE_STATES = frozenset((S.RECEIVE_PING_REPLY, S.RECEIVE_AUTH_REPLY, S.RECEIVE_PORT_REPLY,
                          S.RECEIVE_IP_REPLY, S.RECEIVE_CAPA_REPLY, S.RECEIVE_PSYNC_REPLY))


def _table() -> dict[tuple[ReplState, Input], ReplState]:
    t: dict[tuple[ReplState, Input], ReplState] = {}
    for s in S:
        t[(s, I.REPLICAOF)] = S.CONNECT
        if s is not S.NONE:
            t[(s, I.NO_ONE)] = S.NONE
    for s in _LINKED:
        t[(s, I.LINK_LOST)] = S.CONNECT
        t[(s, I.TIMEOUT)] = S.CONNECT
    for s in (*_LINE_STATES, S.TRANSFER, S.CONNECTED):
        t[(s, I.DATA)] = s
    t.update({
        (S.CONNECT, I.CONNECT_START): S.CONNECTING,
        (S.CONNECTING, I.CONNECT_OK): S.RECEIVE_PING_REPLY,
        (S.CONNECTING, I.CONNECT_FAIL): S.CONNECT,
        (S.RECEIVE_PING_REPLY, I.REPLY_OK): S.SEND_HANDSHAKE,
        (S.RECEIVE_PING_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.SEND_HANDSHAKE, I.SENT): S.RECEIVE_AUTH_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.SKIP): S.RECEIVE_PORT_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.REPLY_OK): S.RECEIVE_PORT_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.RECEIVE_PORT_REPLY, I.REPLY_OK): S.RECEIVE_IP_REPLY,
        (S.RECEIVE_PORT_REPLY, I.REPLY_ERR): S.RECEIVE_IP_REPLY,
        (S.RECEIVE_IP_REPLY, I.SKIP): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_IP_REPLY, I.REPLY_OK): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_IP_REPLY, I.REPLY_ERR): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_CAPA_REPLY, I.REPLY_OK): S.SEND_PSYNC,
        (S.RECEIVE_CAPA_REPLY, I.REPLY_ERR): S.SEND_PSYNC,
        (S.SEND_PSYNC, I.SENT): S.RECEIVE_PSYNC_REPLY,
        (S.RECEIVE_PSYNC_REPLY, I.KEEPALIVE): S.RECEIVE_PSYNC_REPLY,
        (S.RECEIVE_PSYNC_REPLY, I.FULLRESYNC): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.RDBCHANNELSYNC): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.CONTINUE): S.CONNECTED,
        (S.RECEIVE_PSYNC_REPLY, I.TRY_LATER): S.CONNECT,
        (S.RECEIVE_PSYNC_REPLY, I.NOT_SUPPORTED): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.TRANSFER, I.KEEPALIVE): S.TRANSFER,
        (S.TRANSFER, I.BULK_HEADER): S.TRANSFER,
        (S.TRANSFER, I.PAYLOAD): S.TRANSFER,
        (S.TRANSFER, I.LOADED): S.CONNECTED,
        (S.TRANSFER, I.TRANSFER_ERROR): S.CONNECT,
        (S.TRANSFER, I.BUFFER): S.TRANSFER,
        (S.CONNECTED, I.STREAM): S.CONNECTED,
        (S.CONNECTED, I.BUFFER): S.CONNECTED,
        (S.CONNECTED, I.PROTOCOL_ERROR): S.CONNECT,
    })
    return t


TRANSITIONS: dict[tuple[ReplState, Input], ReplState] = _table()

# ROLE's names for the states (roleCommand).
_ROLE_STATE = {S.NONE: "none", S.CONNECT: "connect", S.CONNECTING: "connecting",
               S.TRANSFER: "sync", S.CONNECTED: "connected"}


class ReplProtocolError(Exception):
    """An input that has no transition from the current state."""

    def __init__(self, state: ReplState, inp: Input, detail: str = "") -> None:
        super().__init__(f"replica state machine error: input {inp.value} in state "
                         f"{state.name}" + (f" ({detail})" if detail else ""))
        self.state = state
        self.input = inp


class MasterState:
    """Redis's ``server.master`` / ``server.cached_master``: the master client and its offsets."""

    __slots__ = ("client", "replid", "reploff", "read_reploff", "pre_psync", "reader_base",
                 "fed", "unapplied")

    def __init__(self, client: Client, replid: str, reploff: int) -> None:
        self.client = client
        self.replid = replid
        self.reploff = reploff  # offset of the last byte applied
        self.read_reploff = reploff  # offset of the last byte read
        self.pre_psync = reploff == -1  # a master answering SYNC: no offsets, no ACKs
        self.reader_base = reploff  # reploff when the client's reader was created
        self.fed = reploff  # offset up to which applied bytes went to manager.feed_raw
        self.unapplied = bytearray()  # bytes read, not yet passed on (the query buffer)


class _Load:
    """The payload of one full sync being parsed into fresh dicts."""

    __slots__ = ("decoder", "data", "expires", "aux", "usemark", "mark", "tail", "first_ms",
                 "ended")

    def __init__(self, ndbs: int, usemark: bool, mark: bytes, now_ms: int) -> None:
        self.decoder = RdbDecoder(databases=ndbs)
        self.data: list[dict[bytes, Any]] = [{} for _ in range(ndbs)]
        self.expires: list[dict[bytes, int]] = [{} for _ in range(ndbs)]
        self.aux: dict[bytes, bytes] = {}
        self.usemark = usemark
        self.mark = mark
        self.tail = b""  # bytes after the RDB's end while waiting for the whole mark
        self.first_ms = now_ms
        self.ended = False


class ReplicaSide:
    """The replica half of replication (see the module docstring)."""

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

    # -- the transition table ------------------------------------------------------------
    def _go(self, inp: Input, detail: str = "") -> ReplState:
        nxt = TRANSITIONS.get((self.state, inp))
        if nxt is None:
            raise ReplProtocolError(self.state, inp, detail)
        self.state = nxt
        return nxt

    # -- helpers --------------------------------------------------------------------------
    @property
    def io(self) -> Any:
        return self.core.host.replica_io

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

    # -- connecting -----------------------------------------------------------------------
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

    # -- I/O callbacks --------------------------------------------------------------------
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

    # -- bytes from the master ------------------------------------------------------------
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

    def _handshake_line(self, line: bytes) -> None:
        st = self.state
        log = self.core.log
        text = line.decode("utf-8", "replace")
        if st is S.RECEIVE_PING_REPLY:
            if line[:1] != b"+" and not line.startswith((b"-NOAUTH", b"-NOPERM",
                                                         b"-ERR operation not permitted")):
                log.warning(f"Error reply to PING from master: '{text}'")
                self._handshake_failed(I.REPLY_ERR, "ping-error", text)
                return
            log.notice("Master replied to PING, replication can continue...")
            self._go(I.REPLY_OK)
            self._send_handshake()
        elif st is S.RECEIVE_AUTH_REPLY:
            if line[:1] == b"-":
                log.warning(f"Unable to AUTH to MASTER: {text}")
                self._handshake_failed(I.REPLY_ERR, "auth-error", text)
                return
            self._go(I.REPLY_OK)
        elif st is S.RECEIVE_PORT_REPLY:
            if line[:1] == b"-":
                log.notice(f"(Non critical) Master does not understand REPLCONF listening-port: "
                           f"{text}")
                self._go(I.REPLY_ERR)
            else:
                self._go(I.REPLY_OK)
            if not self.core.config.replica_announce_ip:
                self._go(I.SKIP)
        elif st is S.RECEIVE_IP_REPLY:
            if line[:1] == b"-":
                log.notice(f"(Non critical) Master does not understand REPLCONF ip-address: "
                           f"{text}")
                self._go(I.REPLY_ERR)
            else:
                self._go(I.REPLY_OK)
        elif st is S.RECEIVE_CAPA_REPLY:
            if line[:1] == b"-":
                log.notice(f"(Non critical) Master does not understand REPLCONF capa: {text}")
                self._go(I.REPLY_ERR)
            else:
                self._go(I.REPLY_OK)
            self._send_psync()
        else:  # RECEIVE_PSYNC_REPLY
            self._psync_reply(line, text)

    def _send_handshake(self) -> None:
        cfg = self.core.config
        out = []
        if cfg.masterauth:
            args = [b"AUTH"]
            if cfg.masteruser:
                args.append(cfg.masteruser.encode())
            args.append(cfg.masterauth.encode())
            out.append(encode_command(args))
        port = cfg.replica_announce_port or self.core.port or cfg.port
        out.append(encode_command([b"REPLCONF", b"listening-port", b"%d" % port]))
        if cfg.replica_announce_ip:
            out.append(encode_command([b"REPLCONF", b"ip-address",
                                       cfg.replica_announce_ip.encode()]))
        capa = [b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]
        if cfg.repl_rdb_channel:
            capa += [b"capa", b"rdb-channel-repl"]
        out.append(encode_command(capa))
        self._send(b"".join(out))
        self._go(I.SENT)
        if not cfg.masterauth:
            self._go(I.SKIP)

    def _send_psync(self) -> None:
        """slaveTryPartialResynchronization, writing half."""
        self.master_initial_offset = -1
        c = self.cached
        if c is not None:
            replid, offset = c.replid, c.reploff + 1
            self.core.log.notice(f"Trying a partial resynchronization (request "
                                 f"{replid}:{offset}).")
        else:
            replid, offset = "?", -1
            self.core.log.notice("Partial resynchronization not possible (no cached master)")
        self._send(encode_command([b"PSYNC", replid.encode(), b"%d" % offset]))
        self._go(I.SENT)
        self.psync_sent_ms = self.now
        self._emit("psync_sent", req_replid=replid, req_offset=offset,
                   replid=self.manager.ids.replid,
                   master_repl_offset=self.manager.master_repl_offset)

    def _psync_reply(self, line: bytes, text: str) -> None:
        """slaveTryPartialResynchronization, reading half."""
        log = self.core.log
        if not line:
            self._go(I.KEEPALIVE)  # newlines before the reply keep the link alive
            return
        if line.startswith(b"+FULLRESYNC"):
            parts = text.split(" ")
            if len(parts) < 3 or len(parts[1]) != EOF_MARK_LEN:
                log.warning("Master replied with wrong +FULLRESYNC syntax.")
                self.master_replid = ""
            else:
                self.master_replid = parts[1]
                self.master_initial_offset = _strtoll(parts[2])
                log.notice(f"Full resync from master: {self.master_replid}:"
                           f"{self.master_initial_offset}")
            self._emit("psync_reply", result="full", replid=self.master_replid or None,
                       offset=self.master_initial_offset,
                       duration_ms=self.now - self.psync_sent_ms)
            self._go(I.FULLRESYNC)
            self._start_transfer()
            return
        if line.startswith(b"+RDBCHANNELSYNC"):
            self._rdbchannel_sync(text)
            return
        if line.startswith(b"+CONTINUE"):
            if self.cached is None:
                log.warning(f"Unexpected reply to PSYNC from master: {text}")
                self._handshake_failed(I.REPLY_ERR, "psync-error", text)
                return
            self._partial_accepted(text)
            return
        if line.startswith((b"-NOMASTERLINK", b"-LOADING")):
            log.notice(f"Master is currently unable to PSYNC but should be in the future: {text}")
            self._emit("psync_reply", result="try-later", error=text,
                       duration_ms=self.now - self.psync_sent_ms)
            self._handshake_failed(I.TRY_LATER, "psync-try-later", text)
            return
        if not line.startswith(b"-ERR"):
            log.warning(f"Unexpected reply to PSYNC from master: {text}")
        else:
            log.notice(f"Master does not support PSYNC or is in error state (reply: {text})")
        self._emit("psync_reply", result="sync", error=text,
                   duration_ms=self.now - self.psync_sent_ms)
        log.notice("Retrying with SYNC...")
        self._send(b"SYNC\r\n")
        self._go(I.NOT_SUPPORTED)
        self._start_transfer()

    def _partial_accepted(self, text: str) -> None:
        log = self.core.log
        m = self.manager
        cached = self.cached
        assert cached is not None
        log.notice("Successful partial resynchronization with master.")
        new = text[10:].split("\r")[0].split("\n")[0] if len(text) > 10 else ""
        if len(new) == EOF_MARK_LEN and new != cached.replid:
            log.warning(f"Master replication ID changed to {new}")
            m.ids.replid2 = cached.replid
            m.ids.second_repl_offset = m.master_repl_offset + 1
            m.ids.replid = new
            cached.replid = new
            m.master.disconnect_replicas()
        self._emit("psync_reply", result="continue", replid=cached.replid,
                   offset=cached.reploff, duration_ms=self.now - self.psync_sent_ms)
        self._go(I.CONTINUE)
        self._resurrect_cached_master()
        if m.backlog is None:
            m.create_backlog()
        log.notice("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.")
        self._link_is_up("partial")

    # -- transfer -------------------------------------------------------------------------
    def _start_transfer(self) -> None:
        self.transfer_size = -1
        self.transfer_read = 0
        self.transfer_lastio_ms = self.now
        self._load = None

    def _transfer_line(self, line: bytes) -> None:
        """The payload header (readSyncBulkPayload before the payload)."""
        log = self.core.log
        if not line:
            self._go(I.KEEPALIVE)
            self.transfer_lastio_ms = self.now
            return
        text = line.decode("utf-8", "replace")
        if line[:1] == b"-":
            log.warning(f"MASTER aborted replication with an error: {text[1:]}")
            self._cancel_handshake(True, I.TRANSFER_ERROR, "master-error", text)
            return
        if line[:1] != b"$":
            log.warning(f"Bad protocol from MASTER, the first byte is not '$' (we received "
                        f"'{text}'), are you sure the host and port are right?")
            self._cancel_handshake(True, I.TRANSFER_ERROR, "bad-protocol", text)
            return
        if line[1:5] == b"EOF:" and len(line) - 5 >= EOF_MARK_LEN:
            self.mode = "diskless"
            self._begin_payload(True, bytes(line[5:5 + EOF_MARK_LEN]), 0)
        else:
            self.mode = "disk"
            self._begin_payload(False, b"", max(0, _strtoll(text[1:])))

    def _begin_payload(self, usemark: bool, mark: bytes, size: int) -> None:
        """The payload header was read (on the main channel or the rdb channel)."""
        log = self.core.log
        self._go(I.BULK_HEADER)
        ndbs = len(self.core.dbs)
        if usemark:
            self.transfer_size = 0
            self._load = _Load(ndbs, True, mark, self.now)
            log.notice("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF "
                       "to parser")
        else:
            self.transfer_size = size
            self._load = _Load(ndbs, False, b"", self.now)
            log.notice(f"MASTER <-> REPLICA sync: receiving {self.transfer_size} bytes from "
                       f"master to parser")
        self.transfer_lastio_ms = self.now
        if not self.transfer_size and not self._load.usemark:
            self._payload(b"", 0)  # "$0": the (empty) payload is complete already

    def _payload(self, data: bytes, pos: int) -> int:
        """Feed payload bytes from ``data[pos:]``; returns the position after what belonged to
        the payload (the rest is replication stream)."""
        ld = self._load
        assert ld is not None
        self._go(I.PAYLOAD)
        now = self.now
        n = len(data) - pos
        if self.transfer_read == 0 and n:
            ld.first_ms = now
            rdbch = self.fsbuf is not None
            self._emit("rdb_first_byte", duration_ms=now - self.psync_sent_ms, mode=self.mode,
                       offset=self.master_initial_offset if rdbch else None,
                       replid=self.master_replid or None if rdbch else None)
            self.core.log.notice("MASTER <-> REPLICA sync: Loading DB in memory")
        self.transfer_lastio_ms = now
        stats = self.core.stats
        if not ld.usemark:
            take = min(n, self.transfer_size - self.transfer_read)
            chunk = data[pos:pos + take] if (pos or take != len(data)) else data
            self.transfer_read += take
            stats.net_repl_input_bytes += take
            try:
                if not ld.ended:
                    ld.decoder.receive_data(chunk)
                    if self.transfer_read == self.transfer_size:
                        ld.decoder.receive_data(b"")
                    self._decode(ld)
            except RdbError as e:
                self._load_failed(f"Failed trying to load the MASTER synchronization DB "
                                  f"from socket: {e}", str(e))
                return len(data)
            if self.transfer_read < self.transfer_size:
                return pos + take
            if not ld.ended:  # pragma: no cover - the decoder raises on truncation
                self._load_failed("Failed trying to load the MASTER synchronization DB from "
                                  "socket: truncated", "truncated")
                return len(data)
            self._loaded()
            return pos + take
        # $EOF:<mark> form: everything is payload until the RDB ends and the mark follows.
        chunk = data[pos:] if pos else data
        self.transfer_read += n
        stats.net_repl_input_bytes += n
        if not ld.ended:
            try:
                ld.decoder.receive_data(chunk)
                self._decode(ld)
            except RdbError as e:
                self._load_failed(f"Failed trying to load the MASTER synchronization DB from "
                                  f"socket: {e}", str(e))
                return len(data)
            if not ld.ended:
                # Redis ends the transfer when the last 40 bytes read are the mark: then the
                # RDB was cut short (without this check we would wait for repl-timeout).
                ld.tail = chunk[-EOF_MARK_LEN:] if n >= EOF_MARK_LEN \
                    else (ld.tail + chunk)[-EOF_MARK_LEN:]
                if ld.tail == ld.mark:
                    self._load_failed("Failed trying to load the MASTER synchronization DB "
                                      "from socket: the EOF mark arrived before the end of "
                                      "the RDB", "truncated")
                return len(data)
            tail = ld.decoder.unused_data
        else:
            tail = ld.tail + chunk
        if len(tail) < EOF_MARK_LEN:
            ld.tail = tail
            return len(data)
        if tail[:EOF_MARK_LEN] != ld.mark:
            self._load_failed("Replication stream EOF marker is broken", "broken EOF mark")
            return len(data)
        extra = len(tail) - EOF_MARK_LEN
        # Bytes after the mark are stream: not payload.
        self.transfer_read -= extra
        stats.net_repl_input_bytes -= extra
        self._loaded()
        return len(data) - extra

    def _decode(self, ld: _Load) -> None:
        log = self.core.log
        for ev in ld.decoder.load_into(ld.data, ld.expires):
            t = type(ev)
            if t is Aux:
                key, val = ev.key, ev.value  # type: ignore[attr-defined]
                ld.aux[key] = val
                if key == b"redis-ver":
                    log.notice(f"Loading RDB produced by version {val.decode('utf-8', 'replace')}")
                elif key == b"ctime":
                    ctime = _strtoll(val.decode("ascii", "replace"))
                    age = max(0, self.now // 1000 - ctime)
                    log.notice(f"RDB age {age} seconds")
                elif key == b"used-mem":
                    used = _strtoll(val.decode("ascii", "replace"))
                    log.notice(f"RDB memory usage when created {used / (1024 * 1024):.2f} Mb")
            elif t is End:
                ld.ended = True

    def _load_failed(self, message: str, error: str) -> None:
        """A payload we cannot load. One the master will send again identically (a type or
        encoding pyrepl does not know) is refused with reason ``rdb-unsupported`` and retried
        with a doubling delay (1 s, 2 s, 4 s ... up to LOAD_BACKOFF_MAX_MS), not every second."""
        log = self.core.log
        log.warning(message)
        if error.startswith("Unsupported RDB"):
            self._load_failures += 1
            delay = min(LOAD_BACKOFF_MAX_MS, CRON_MS << min(self._load_failures - 1, 10))
            self._retry_at_ms = self.now + delay
            log.warning(f"MASTER <-> REPLICA sync: the master's dataset holds what this replica "
                        f"cannot load; retrying in {delay // 1000} seconds (attempt "
                        f"{self._load_failures})")
            self._cancel_handshake(False, I.TRANSFER_ERROR, "rdb-unsupported", error)
            return
        self._cancel_handshake(True, I.TRANSFER_ERROR, "load-error", error)

    def _loaded(self) -> None:
        """The whole payload is in and verified: swap it in and go online."""
        ld = self._load
        assert ld is not None
        core = self.core
        m = self.manager
        log = core.log
        now = self.now
        rdbch = self.fsbuf is not None
        if rdbch:  # the mark was read: the rdb channel is done (Redis closes it right away)
            self._close_rdb_channel(loaded=True)
        self._emit("rdb_received", bytes=self.transfer_read, duration_ms=now - ld.first_ms,
                   mode=self.mode)
        keys = sum(len(d) for d in ld.data)
        core.rdb_last_load_keys_loaded = keys
        core.rdb_last_load_keys_expired = 0
        log.notice(f"Done loading RDB, keys loaded: {keys}, keys expired: 0.")
        self._load_failures = 0
        self._retry_at_ms = 0
        self._go(I.LOADED)
        if core.rdb_child_pid != -1 and core.rdb_child_purpose == "disk":
            # Like Redis: a BGSAVE of the old dataset must not overwrite the new one's dump.
            core.log.notice(f"Replica is about to load the RDB file received from the master, "
                            f"but there is a pending RDB child running. Killing process "
                            f"{core.rdb_child_pid} and removing its temp file to avoid any race")
            core.kill_rdb_child()
        # replicationAttachToNewMaster: a new history; our sub-replicas must resync too.
        self._discard_cached_master()
        m.master.disconnect_replicas()
        m.free_backlog()
        log.notice("MASTER <-> REPLICA sync: Swapping active DB with loaded DB")
        core.replica_keys_with_expire.clear()   # the dataset is replaced (emptyData)
        for db, data, expires in zip(core.dbs, ld.data, ld.expires, strict=True):
            old = db.data
            db.data = data
            db.expires = expires
            if db.watched:
                for key in list(db.watched):
                    if key in old or key in data:
                        db.touch(key)
        log.notice("MASTER <-> REPLICA sync: Discarding old DB in background")
        core.dirty += 1
        stream_db = _strtoll(ld.aux.get(b"repl-stream-db", b"-1").decode("ascii", "replace"))
        self._load = None
        # replicationCreateMasterClient
        c = self._new_master_client()
        ms = MasterState(c, self.master_replid, self.master_initial_offset)
        if 0 <= stream_db < len(core.dbs):
            c.db = core.dbs[stream_db]
        self.master = ms
        self._link_master_client(ms)
        self.down_since_ms = 0
        m.ids.replid = ms.replid if ms.replid else m.ids.replid
        m.master_repl_offset = max(ms.reploff, 0)
        m.ids.clear_secondary()
        if m.backlog is None:
            m.create_backlog()
        log.notice("MASTER <-> REPLICA sync: Finished with success")
        self._emit("load_done", keys=keys, duration_ms=now - ld.first_ms, bytes=self.transfer_read,
                   mode=self.mode)
        self.transfer_size = -1
        self.transfer_read = 0
        if ld.usemark or rdbch:
            self.send_ack()  # rdb channel: REPLCONF ACK <snapshot offset>
        self._link_is_up(self.mode)
        self._skip_read = ld.usemark and not rdbch
        if rdbch:
            self._start_drain()

    # -- the rdb channel (Redis 8) ----------------------------------------------------------
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

    # -- the main channel's buffer ----------------------------------------------------------
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

    # -- the master client ----------------------------------------------------------------
    def _new_master_client(self) -> Client:
        core = self.core
        cfg = core.config
        c = Client(core, core.next_client_id)
        core.next_client_id += 1
        c.kind = "master"
        c.flags = "M"
        c.reader = make_reader(cfg.proto_max_bulk_len, cfg.client_query_buffer_limit,
                               from_master=True)
        c.set_authenticated(True)
        return c

    def _link_master_client(self, ms: MasterState) -> None:
        """Attach the master client to the current connection and the client table."""
        c = ms.client
        core = self.core
        io = self.io
        info = io.link_info(self.token) if io is not None else None
        if info is not None:
            c.addr, c.laddr, c.fd, c.transport = info
        else:
            c.addr, c.laddr, c.fd, c.transport = self.peer, "", -1, None
        c.closed = False
        c.close_after_reply = False
        c.last_interaction_ms = self.now
        cfg = core.config
        c.reader = make_reader(cfg.proto_max_bulk_len, cfg.client_query_buffer_limit,
                               from_master=True)
        ms.reader_base = ms.reploff
        ms.read_reploff = ms.reploff
        ms.fed = ms.reploff
        ms.unapplied = bytearray()
        core.clients[c.id] = c

    def _resurrect_cached_master(self) -> None:
        ms = self.cached
        assert ms is not None
        self.cached = None
        self.master = ms
        self._link_master_client(ms)
        self.down_since_ms = 0

    def _discard_cached_master(self) -> None:
        if self.cached is None:
            return
        self.core.log.notice("Discarding previously cached master state.")
        self.cached = None

    def cache_master_using_myself(self) -> None:
        """replicationCacheMasterUsingMyself: PSYNC our own history with the new master."""
        core = self.core
        m = self.manager
        core.log.notice("Before turning into a replica, using my own master parameters to "
                        "synthesize a cached master: I may be able to synchronize with the new "
                        "master with just a partial transfer.")
        c = self._new_master_client()
        stream_db = core.loaded_repl_stream_db
        if stream_db is not None and 0 <= stream_db < len(core.dbs):
            c.db = core.dbs[stream_db]
        ms = MasterState(c, m.ids.replid, m.master_repl_offset)
        ms.pre_psync = False
        self.cached = ms

    def _link_is_up(self, mode: str) -> None:
        now = self.now
        self.link_up_ms = now
        ms = self.master
        self.link_up_offset = ms.reploff if ms is not None else 0
        self._await_caught_up = True
        self._skip_read = False
        self._emit("link_up", mode=mode if mode != "partial" else None,
                   result="continue" if mode == "partial" else "full",
                   duration_ms=now - self.link_down_ms, offset=self.link_up_offset,
                   replid=self.manager.ids.replid)

    def _stream(self, data: bytes) -> None:
        """Apply replication stream bytes (processInputBuffer for the master client)."""
        self._go(I.STREAM)
        ms = self.master
        assert ms is not None
        c = ms.client
        core = self.core
        n = len(data)
        c.net_in += n
        core.stats.net_repl_input_bytes += n
        c.last_interaction_ms = core.now_ms
        ms.read_reploff += n
        ms.unapplied += data
        reader = c.reader
        reader.feed(data)
        # the master's commands see keys that expired on our clock (its DEL removes them)
        core.applying_master_stream = True
        try:
            self._apply_commands(ms, c, reader, core.execute, core.log)
        finally:
            core.applying_master_stream = False
            # even if a command raised: what was applied is passed on, offsets stay coherent
            self._feed_applied(ms)

    def _apply_commands(self, ms: MasterState, c: Client, reader: Any, execute: Any,
                        log: Any) -> None:
        while True:
            try:
                argv = reader.gets()
            except ProtocolError as e:
                self._feed_applied(ms)
                log.warning(f"Protocol error ({e.reason}) from client: {c.describe()}. "
                            f"Query buffer during protocol error: "
                            f"'{_printable(bytes(ms.unapplied[:128]))}'")
                if "inline" in str(e):
                    log.warning("WARNING: Receiving inline protocol from master, master stream "
                                "corruption? Closing the master connection and discarding the "
                                "cached master.")
                self._master_lost("protocol-error", cache=False)
                return
            if argv is None:
                return
            execute(c, argv)      # an error reply comes back through propagation_error
            if c.out:
                c.out.clear()
            if not c.in_multi:
                ms.reploff = ms.reader_base + reader.consumed
            if self.master is not ms:
                return  # the command dropped the link

    def propagation_error(self, command: str, message: str) -> None:
        """A command of the master's stream answered an error here (Redis's afterErrorReply for
        the master client): logged as Redis, with the latest backlog, counted in INFO
        ``unexpected_error_replies``, a ``propagation_error`` sync event; with
        ``propagation-error-behavior panic`` / ``panic-on-replicas`` on a read-only replica the
        process panics, as Redis does. The link stays up (``ignore``, the default)."""
        core = self.core
        err = message[:4096]
        core.log.warning(f"== CRITICAL == This replica is sending an error to its master: "
                         f"'-{err}' after processing the command '{command}'")
        backlog = self.manager.backlog
        if backlog is not None and backlog.histlen:
            latest = backlog.tail_bytes(256)
            core.log.warning(f"Latest backlog is: '{repr_arg(latest)}'")
        core.stats.unexpected_error_replies += 1
        ms = self.master
        self._emit("propagation_error", command=command, error=err,
                   offset=ms.reploff if ms is not None else None)
        cfg = core.config
        if cfg.replica_read_only and cfg.propagation_error_behavior in ("panic",
                                                                       "panic-on-replicas"):
            core.host.panic(f"This replica panicked sending an error to its master after "
                            f"processing the command '{command}'")

    def _feed_applied(self, ms: MasterState) -> None:
        """Pass the bytes applied since the last call, ``(fed, reploff]``, to the backlog and
        the sub-replicas (manager.feed_raw: same bytes, same offsets)."""
        applied = ms.reploff - ms.fed
        if applied <= 0:
            return
        buf = ms.unapplied
        chunk = bytes(buf[:applied])
        del buf[:applied]
        ms.fed = ms.reploff
        self.manager.feed_raw(chunk)

    def send_ack(self) -> None:
        """replicationSendAck: REPLCONF ACK <reploff>."""
        ms = self.master
        if ms is None:
            return
        data = encode_command([b"REPLCONF", b"ACK", b"%d" % ms.reploff])
        ms.client.net_out += len(data)
        self.core.stats.net_output_bytes += len(data)
        self._send(data)

    def on_master_replconf(self, client: Client, argv: list[bytes]) -> object:
        """REPLCONF sent by our master: GETACK asks for an ACK now; nothing is replied."""
        ms = self.master
        if ms is None or client is not ms.client:
            return NO_REPLY
        for i in range(1, len(argv) - 1, 2):
            if argv[i].lower() == b"getack":
                if self.master_host is not None:
                    self.send_ack()
                break
        return NO_REPLY

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

    # -- commands ---------------------------------------------------------------------------
    def set_master(self, host: str, port: int) -> None:
        """replicationSetMaster (REPLICAOF host port)."""
        core = self.core
        was_master = self.master_host is None
        if self.master is not None:
            self._master_lost("replicaof", cache=True, reconnect=False)
        self._load_failures = 0     # a new master: no backoff carried over
        self._retry_at_ms = 0
        self.master_host = host
        self.master_port = port
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

    # -- cron -------------------------------------------------------------------------------
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

    # -- introspection --------------------------------------------------------------------
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


def _strtoll(text: str) -> int:
    """strtoll(text, NULL, 10): leading spaces, a sign and the digits that follow; else 0."""
    s = text.lstrip()
    i = 0
    if s[:1] in ("-", "+"):
        i = 1
    j = i
    while j < len(s) and s[j].isdigit() and s[j].isascii():
        j += 1
    if j == i:
        return 0
    return int(s[:j])


def _printable(data: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "." for b in data)

