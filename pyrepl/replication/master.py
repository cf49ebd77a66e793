"""The master side: replica links, full and partial syncs, streaming, acks, WAIT, limits
(master side).

Theory of operation
-------------------
:class:`MasterSide` is Redis 7.0.15's ``replication.c`` "MASTER" half as a sans-io state machine.
It never touches a socket or a process: the I/O adapter ``core.host.master_io``
(:class:`pyrepl.net.master_io.MasterIO`) forks the diskless snapshot child that writes straight to
the replica sockets, streams a disk snapshot file, and reports transport buffer sizes; the disk
snapshot itself is the core's ``BGSAVE`` (``core.bgsave``). Time comes from ``core.now_ms``.

A replica connection is an ordinary :class:`~pyrepl.client.Client` that sent ``PSYNC`` / ``SYNC``;
its :class:`ReplicaLink` (``client.repl``) holds the per-replica state. The states are Redis's
``SLAVE_STATE_*`` (``SlaveState``) with one transition table, ``TRANSITIONS``; an input with no
entry for the current state raises :class:`LinkStateError`::

    NONE --PARTIAL--> ONLINE                   (+CONTINUE and the backlog, streaming at once)
    NONE --FULL--> WAIT_BGSAVE_START           (waits for a snapshot it can use)
    WAIT_BGSAVE_START --SNAPSHOT_STARTED / ATTACHED--> WAIT_BGSAVE_END
    WAIT_BGSAVE_END --RDB_SAVED (disk)--> SEND_BULK --BULK_SENT--> ONLINE
    WAIT_BGSAVE_END --RDB_STREAMED (diskless)--> ONLINE (the stream waits for the first ACK)
    WAIT_BGSAVE_END / SEND_BULK --RDB_ONLY_DONE--> RDB_TRANSMITTED   (REPLCONF rdb-only 1)
    NONE --RDB_CHANNEL--> WAIT_RDB_CHANNEL     (main channel: +RDBCHANNELSYNC <client id>)
    WAIT_RDB_CHANNEL --SNAPSHOT_STARTED--> SEND_BULK_AND_STREAM   (streams from the fork on)
    SEND_BULK_AND_STREAM --RDB_STREAMED / FIRST_ACK--> ONLINE
    any --CLOSED--> CLOSED

The stream: every byte the manager appends to the replication stream goes once into the shared
buffer (:mod:`pyrepl.replication.backlog`, Redis 7's replication buffer). A link that is fed has
a place in it (``ref``, a cursor), from the snapshot offset on for a full sync (set at the next
byte appended after the fork, as Redis) or from the PSYNC offset for ``+CONTINUE``; a link that
waits for its bulk transfer or (diskless) its first ``REPLCONF ACK`` just keeps its place, and
the buffer keeps every byte from there. A *streaming* link's bytes are handed to its socket by
the I/O shell (:meth:`take`, views of the blocks; once per event-loop pass, and only while the
transport is below its high-water mark): :meth:`stream` only schedules a link that had been
handed everything. A full sync sets ``manager.stream_db = -1`` so the next command re-emits
``SELECT``. So a replica gets exactly the bytes ``(snapshot offset, ...]``: nothing lost,
nothing doubled, and N replicas cost no copies.

Output limits (``client-output-buffer-limit replica``; hard limit at least ``repl-backlog-size``,
as Redis): a replica's usage is Redis's getClientOutputBufferMemoryUsage, its part of the shared
buffer from its block to the end, plus what this process still holds for its socket (unsent
replies, the transport's buffer). As Redis, the limits are checked when a block is added (about
every 16 KiB of stream, not per write) and once a second in the cron. A replica over the hard
limit, or over the soft limit for longer than its seconds, is disconnected, logged, counted in
``client_output_buffer_limit_disconnections`` and reported as ``replica_lost`` with reason
``output-buffer-limit``.

Full syncs follow Redis: diskless (``repl-diskless-sync yes`` and every waiting replica has
``capa eof``) waits ``repl-diskless-sync-delay`` seconds of replica idleness (or
``repl-diskless-sync-max-replicas`` arrivals) so replicas that arrive in time share one child;
the child writes ``+FULLRESYNC <replid> <offset>``, ``$EOF:<mark>``, the RDB and the mark to each
socket. Disk-based syncs start a ``BGSAVE`` at once; a replica arriving while it runs joins it
(at the place in the buffer of a replica already waiting for it). ``\\n`` keepalives go once a
second to replicas waiting for a snapshot (not during a socket transfer), ``PING`` every
``repl-ping-replica-period`` seconds into the stream. Losing the last replica of a socket
transfer kills the child (and of a disk one too when no ``save`` points are set).

The RDB channel (Redis 8, ``repl-rdb-channel yes`` with ``repl-diskless-sync yes``): a replica
that sent ``capa rdb-channel-repl`` and cannot continue gets ``+RDBCHANNELSYNC <client id>`` on
its *main* connection, which waits in ``WAIT_RDB_CHANNEL`` receiving nothing. Its second
connection (the *rdb channel*) sends ``REPLCONF ... rdb-only 1 rdb-channel 1 main-ch-client-id
<id>`` (``-ERR Unrecognized RDB client id: <id>`` unless that client is a main channel waiting
for one) and ``PSYNC ? -1``; it is an rdb-only link (``main`` points at the main link, whose
``rdb_channel`` is this connection's client) that waits for a socket snapshot like a diskless
replica, with ``\\n`` keepalives during the delay; rdb-channel links ask for their own snapshots
(``REQ_RDB_CHANNEL``), never shared with classic ones. At fork time the child gets the rdb
channel's socket (it writes ``+FULLRESYNC <replid> <offset>`` at once, then ``$EOF:<mark>``, the
RDB and the mark) and, at that same instant, the main link goes to ``SEND_BULK_AND_STREAM`` and
*streams* from the snapshot offset (``stream_db = -1``: SELECT first) — nothing is held, so the
master's buffers stay at backlog size whatever the write load; the replica buffers instead. The
main link goes online at the child's exit (when its rdb channel got the whole RDB) or at its
first ``REPLCONF ACK``, whichever comes first; the rdb channel is closed when the child exits.
Losing either connection before that aborts the logical replica: both are closed, and the child
is stopped when no other target needs it — except an rdb channel that the replica closes after
the child reported its transfer complete (``socket_target_done``): that is the normal end. INFO
and ``connected_slaves`` show each logical replica once (the main link); CLIENT LIST flags are
``S`` (main) and ``SC`` (rdb channel).

Offsets and names are Redis's: the snapshot offset is ``master_repl_offset`` at fork time, it is
the ``+FULLRESYNC`` offset and the RDB's ``repl-offset`` aux field; ``ack_off`` is the replica's
last ``REPLCONF ACK``; INFO's ``lag`` is seconds since that ack.
"""

from __future__ import annotations

import os
from enum import Enum
from typing import TYPE_CHECKING, Any

from pyrepl.commands.util import parse_int
from pyrepl.errors import SYNTAX
from pyrepl.replication import psync as psync_mod
from pyrepl.replication.backlog import TRIM_BLOCKS_PER_CALL, Cursor
from pyrepl.resp.types import NO_REPLY, OK, ReplyError

if TYPE_CHECKING:
    from pyrepl.client import Client
    from pyrepl.replication.manager import Replication

ROLE = "master"
EOF_MARK_LEN = 40  # CONFIG_RUN_ID_SIZE
CRON_MS = 1000  # replicationCron runs once a second
NET_HOST_STR_LEN = 256
# slave_req bits (SLAVE_REQ_RDB_EXCLUDE_DATA / _FUNCTIONS)
REQ_EXCLUDE_DATA = 1
REQ_EXCLUDE_FUNCTIONS = 2
REQ_RDB_MASK = REQ_EXCLUDE_DATA | REQ_EXCLUDE_FUNCTIONS
REQ_RDB_CHANNEL = 4  # SLAVE_REQ_RDB_CHANNEL: a snapshot for rdb channels only (socket target)
GETACK_ARGV = [b"REPLCONF", b"GETACK", b"*"]
PING_ARGV = [b"ping"]  # shared.ping: lower case on the wire
WAIT_REPLICA_ERR = ("ERR WAIT cannot be used with replica instances. Please also note that "
                    "since Redis 4.0 if a replica is configured to be writable (which is not "
                    "the default) writes to replicas are just local and are not propagated.")


class SlaveState(Enum):
    """Redis's SLAVE_STATE_* (server.h); NONE and CLOSED frame a link's life."""

    NONE = 0
    WAIT_BGSAVE_START = 6
    WAIT_BGSAVE_END = 7
    SEND_BULK = 8
    ONLINE = 9
    RDB_TRANSMITTED = 10
    WAIT_RDB_CHANNEL = 11  # main channel: waits for its rdb channel's snapshot to start
    SEND_BULK_AND_STREAM = 12  # main channel: streams while the rdb channel gets the RDB
    CLOSED = -1


class LinkInput(Enum):
    PARTIAL = "partial"  # PSYNC accepted: +CONTINUE
    FULL = "full"  # PSYNC refused or SYNC: a full sync is needed
    SNAPSHOT_STARTED = "snapshot-started"  # a snapshot for this link was forked
    ATTACHED = "attached"  # joined a disk snapshot already running
    RDB_SAVED = "rdb-saved"  # the disk child finished: send the file
    RDB_STREAMED = "rdb-streamed"  # the socket child wrote the whole RDB to this replica
    BULK_SENT = "bulk-sent"  # the whole file went out
    RDB_ONLY_DONE = "rdb-only-done"  # rdb-only replica got its RDB
    RDB_CHANNEL = "rdb-channel"  # PSYNC refused, the replica can use an rdb channel
    FIRST_ACK = "first-ack"  # main channel: the replica loaded the RDB and acked
    CLOSED = "closed"  # the connection is gone (or is being closed)


S = SlaveState
L = LinkInput


def _table() -> dict[tuple[SlaveState, LinkInput], SlaveState]:
    t: dict[tuple[SlaveState, LinkInput], SlaveState] = {
        (S.NONE, L.PARTIAL): S.ONLINE,
        (S.NONE, L.FULL): S.WAIT_BGSAVE_START,
        (S.WAIT_BGSAVE_START, L.SNAPSHOT_STARTED): S.WAIT_BGSAVE_END,
        (S.WAIT_BGSAVE_START, L.ATTACHED): S.WAIT_BGSAVE_END,
        (S.WAIT_BGSAVE_END, L.RDB_SAVED): S.SEND_BULK,
        (S.WAIT_BGSAVE_END, L.RDB_STREAMED): S.ONLINE,
        (S.WAIT_BGSAVE_END, L.RDB_ONLY_DONE): S.RDB_TRANSMITTED,
        (S.SEND_BULK, L.BULK_SENT): S.ONLINE,
        (S.SEND_BULK, L.RDB_ONLY_DONE): S.RDB_TRANSMITTED,
        (S.NONE, L.RDB_CHANNEL): S.WAIT_RDB_CHANNEL,
        (S.WAIT_RDB_CHANNEL, L.SNAPSHOT_STARTED): S.SEND_BULK_AND_STREAM,
        (S.SEND_BULK_AND_STREAM, L.RDB_STREAMED): S.ONLINE,
        (S.SEND_BULK_AND_STREAM, L.FIRST_ACK): S.ONLINE,
    }
    for s in S:
        if s is not S.CLOSED:
            t[(s, L.CLOSED)] = S.CLOSED
    return t


TRANSITIONS: dict[tuple[SlaveState, LinkInput], SlaveState] = _table()

# replstateToString: what INFO shows ("" = not listed).
INFO_STATE = {S.WAIT_BGSAVE_START: "wait_bgsave", S.WAIT_BGSAVE_END: "wait_bgsave",
              S.SEND_BULK: "send_bulk", S.ONLINE: "online",
              S.WAIT_RDB_CHANNEL: "wait_bgsave",  # Redis 8 shows the main channel so
              S.SEND_BULK_AND_STREAM: "send_bulk_and_stream"}


class LinkStateError(Exception):
    """An input that has no transition from the link's current state."""

    def __init__(self, state: SlaveState, inp: LinkInput) -> None:
        super().__init__(f"replica link: no transition for {inp.value} in state {state.name}")
        self.state = state
        self.input = inp


class Snapshot:
    """One snapshot child serving full syncs: ``target`` is ``disk`` or ``socket``."""

    __slots__ = ("pid", "target", "offset", "started_ms", "req", "keys")

    def __init__(self, pid: int, target: str, offset: int, started_ms: int, req: int,
                 keys: int) -> None:
        self.pid = pid
        self.target = target
        self.offset = offset
        self.started_ms = started_ms
        self.req = req
        self.keys = keys


class ReplicaLink:
    """Per-replica state (Redis keeps it in the client struct)."""

    __slots__ = (
        "client", "state", "capa_eof", "capa_psync2", "pre_psync", "rdb_only", "req",
        "listening_port", "ip_address", "ack_off", "ack_ms", "psync_offset", "snapshot",
        "ref", "streaming", "stream_on_ack",
        "soft_since_ms", "buffer_peak", "sync_id", "sync_start_ms", "joined_ms", "mode",
        "close_reason", "capa_rdb_channel", "is_rdb_channel", "main", "rdb_channel", "rdb_done",
    )

    def __init__(self, client: Client) -> None:
        self.client = client
        self.state = S.NONE
        self.capa_eof = False
        self.capa_psync2 = False
        self.pre_psync = False  # came with the old SYNC: no +FULLRESYNC, no ACKs expected
        self.rdb_only = False
        self.req = 0
        self.listening_port = 0
        self.ip_address = ""
        self.ack_off = 0
        self.ack_ms = 0
        self.psync_offset = 0
        self.snapshot: Snapshot | None = None
        # the replica's place in the shared replication buffer (None: it is not fed, as
        # Redis's canFeedReplicaReplBuffer: waiting for its snapshot to start, or rdb-only)
        self.ref: Cursor | None = None
        self.streaming = False   # fed and written to its socket (else the buffer holds it)
        self.stream_on_ack = False
        self.soft_since_ms = -1
        self.buffer_peak = 0
        self.sync_id = ""
        self.sync_start_ms = 0
        self.joined_ms = 0
        self.mode = ""
        self.close_reason = ""
        # rdb channel (Redis 8): capa rdb-channel-repl accepted (main channel side)
        self.capa_rdb_channel = False
        self.is_rdb_channel = False  # REPLCONF rdb-channel 1
        self.main: ReplicaLink | None = None  # rdb channel: its main channel's link
        self.rdb_channel: Client | None = None  # main channel: its rdb channel's connection
        self.rdb_done = False  # main channel: the child reported the whole RDB written

    def go(self, inp: LinkInput) -> SlaveState:
        new = TRANSITIONS.get((self.state, inp))
        if new is None:
            raise LinkStateError(self.state, inp)
        self.state = new
        return new

    def peer_ip(self) -> str:
        if self.ip_address:
            return self.ip_address
        addr = self.client.addr
        return addr.rsplit(":", 1)[0] if ":" in addr else addr

    def name(self) -> str:
        """replicationGetSlaveName: ip:listening-port of the replica."""
        ip = self.peer_ip()
        if not ip:
            return f"client id #{self.client.id}"
        if self.listening_port:
            return f"[{ip}]:{self.listening_port}" if ":" in ip else f"{ip}:{self.listening_port}"
        return f"{ip}:<unknown-replica-port>"


class MasterSide:
    def __init__(self, manager: Replication) -> None:
        self.manager = manager
        self.core = manager.core
        self.links: list[ReplicaLink] = []
        self._fed: list[ReplicaLink] = []        # links with a place in the buffer
        self._streaming: list[ReplicaLink] = []  # ... of which these are written to sockets
        self.snapshot: Snapshot | None = None
        self.good_replicas = 0
        self.waiters: list[Client] = []
        self.cron_loops = 0
        self._last_cron_ms: int | None = None
        self._getack_offset = -1
        self._hard = 0
        self._soft = 0
        self._soft_secs = 0
        self._refresh_limits()

    # -- helpers ----------------------------------------------------------------------------
    @property
    def io(self) -> Any:
        return self.core.host.master_io

    def _emit(self, event: str, **fields: Any) -> None:
        self.manager.events.emit(self.core.now_ms, event, ROLE, **fields)

    def _schedule(self, c: Client) -> None:
        self.core.pending_flush.append(c)

    def _write(self, link: ReplicaLink, data: bytes) -> None:
        """Out-of-band bytes for the replica now (replies, keepalives), counted as repl output."""
        c = link.client
        c.out.append(data)
        self.core.stats.net_repl_output_bytes += len(data)
        self._schedule(c)

    def link_for(self, c: Client) -> ReplicaLink:
        """The client's link (created by its first REPLCONF or by PSYNC)."""
        link = c.repl
        if isinstance(link, ReplicaLink):
            return link
        link = ReplicaLink(c)
        c.repl = link
        return link

    def _buffered(self, c: Client) -> int:
        io = self.io
        return io.buffered(c) if io is not None else 0

    # -- the stream (hot path) --------------------------------------------------------------
    def stream(self, before: int, new_block: bool) -> None:
        """The backlog took new stream bytes (``before`` was ``master_repl_offset``): a
        streaming link that had been handed everything is scheduled for a write; the output
        limits are checked when a block was added, as Redis does."""
        streaming = self._streaming
        if streaming:
            pending = self.core.pending_flush
            for link in streaming:
                if link.ref.sent == before:  # type: ignore[union-attr]
                    pending.append(link.client)
        if new_block and self._fed:
            over = [lk for lk in self._fed if self._over_limits(lk)]
            for link in over:
                self._output_limit_reached(link)

    def take(self, link: ReplicaLink, limit: int = 1 << 16) -> list[memoryview]:
        """Up to ``limit`` bytes of the stream for a streaming link's socket (the I/O shell
        writes them; views of the shared buffer, nothing copied)."""
        ref = link.ref
        backlog = self.manager.backlog
        if ref is None or backlog is None:
            return []
        before = ref.sent
        views = backlog.take(ref, limit)
        n = ref.sent - before
        if n:
            self.core.stats.net_repl_output_bytes += n
            link.client.net_out += n
        return views

    def _refresh_limits(self) -> bool:
        """Read client-output-buffer-limit replica; True when it changed."""
        cfg = self.core.config
        hard, soft, secs = cfg.client_output_buffer_limit.get("replica", (0, 0, 0))
        if hard and hard < cfg.repl_backlog_size:
            hard = cfg.repl_backlog_size  # Redis: a replica limit below the backlog is raised
        if (hard, soft, secs) == (self._hard, self._soft, self._soft_secs):
            return False
        self._hard, self._soft, self._soft_secs = hard, soft, secs
        return True

    def pending_bytes(self, link: ReplicaLink) -> int:
        """What the master holds for this replica, as Redis's getClientOutputBufferMemoryUsage
        (its part of the shared buffer), plus what this process still has to hand to its
        socket (unsent replies, the transport's buffer)."""
        c = link.client
        backlog = self.manager.backlog
        ref = link.ref
        used = backlog.usage(ref) if ref is not None and backlog is not None else 0
        if c.out:
            used += c.pending_output()
        if link.streaming:
            used += self._buffered(c)
        return used

    def _over_limits(self, link: ReplicaLink) -> bool:
        """checkClientOutputBufferLimits for a replica. True: disconnect it."""
        used = self.pending_bytes(link)
        if used > link.buffer_peak:
            link.buffer_peak = used
        if self._hard and used >= self._hard:
            return True
        if self._soft and used >= self._soft:
            now = self.core.now_ms
            if link.soft_since_ms < 0:
                link.soft_since_ms = now
            elif now // 1000 - link.soft_since_ms // 1000 > self._soft_secs:
                return True
        else:
            link.soft_since_ms = -1
        return False

    def _output_limit_reached(self, link: ReplicaLink) -> None:
        if link.state is S.CLOSED:
            return
        from pyrepl.commands.server import client_line

        self.core.stats.client_outbuf_limit_disconnections += 1
        self.core.log.warning(f"Client {client_line(self.core, link.client)} scheduled to be "
                              f"closed ASAP for overcoming of output buffer limits.")
        self._close_link(link, psync_mod.OUTPUT_BUFFER_LIMIT)

    def _feed(self, link: ReplicaLink, ref: Cursor | None = None) -> None:
        """The link gets a place in the buffer: ``ref``, or the next byte appended (its
        snapshot starts now). It is not written to its socket until :meth:`_start_stream`."""
        backlog = self.manager.backlog
        assert backlog is not None, "a replica link always has a backlog"
        if link.ref is not None:
            backlog.release(link.ref)
        link.ref = ref if ref is not None else backlog.cursor_next()
        link.streaming = False
        if link not in self._fed:
            self._fed.append(link)

    def _start_stream(self, link: ReplicaLink) -> None:
        """replicaStartCommandStream: the link's bytes go to its socket from now on."""
        link.stream_on_ack = False
        if link.ref is None:
            self._feed(link)
        link.streaming = True
        link.client.stream = link
        self._streaming.append(link)
        backlog = self.manager.backlog
        if backlog is not None and backlog.pending(link.ref):  # type: ignore[arg-type]
            self._schedule(link.client)
        if self._over_limits(link):
            self._output_limit_reached(link)

    def replica_replied(self, c: Client) -> None:
        """A command of a streaming replica produced a reply (Redis's
        logInvalidUseAndFreeClientAsync): it would interleave with the stream, so the replica
        is dropped."""
        from pyrepl.commands.server import client_line

        name = c.last_cmd.name if c.last_cmd is not None else "<unknown>"
        self.core.log.warning(f"Replica generated a reply to command '{name}', disconnecting "
                              f"it: {client_line(self.core, c)}")
        if isinstance(c.repl, ReplicaLink):
            self._close_link(c.repl, "invalid-use")

    def _unfeed(self, link: ReplicaLink) -> int:
        """The link leaves the buffer (freeReplicaReferencedReplBuffer); its last usage."""
        used = 0
        if link.streaming:
            self._streaming.remove(link)
            link.streaming = False
            link.client.stream = None
        if link in self._fed:
            self._fed.remove(link)
        backlog = self.manager.backlog
        if link.ref is not None and backlog is not None:
            used = backlog.usage(link.ref)
            backlog.release(link.ref)
        link.ref = None
        return used

    # -- PSYNC / SYNC -------------------------------------------------------------------------
    def sync_command(self, c: Client, argv: list[bytes]) -> object:
        """syncCommand: PSYNC <replid> <offset> [FAILOVER] and the old SYNC."""
        core = self.core
        manager = self.manager
        log = core.log
        if isinstance(c.repl, ReplicaLink) and c.repl.state is not S.NONE:
            return NO_REPLY  # already a replica: ignored, as Redis
        is_psync = argv[0].lower() == b"psync"
        if is_psync and len(argv) > 3 and argv[3].lower() == b"failover":
            rid = argv[1].decode("utf-8", "replace")
            log.warning(f"Failover request received for replid {rid}.")
            if not manager.is_replica():
                raise ReplyError("ERR PSYNC FAILOVER can't be sent to a master.")
            if rid.lower() != manager.ids.replid:
                raise ReplyError("ERR PSYNC FAILOVER replid must match my replid.")
            from pyrepl.commands.server import client_line

            manager.replica.unset_master()
            log.notice(f"MASTER MODE enabled (failover request from '{client_line(core, c)}')")
        if manager.is_replica() and not manager.replica.link_up():
            raise ReplyError("NOMASTERLINK Can't SYNC while not connected with my master")
        if c.pending_output():
            raise ReplyError("ERR SYNC and PSYNC are invalid with pending output")
        link = self.link_for(c)
        main = link.main
        if main is not None:
            link.req |= REQ_RDB_CHANNEL
            link.rdb_only = True
        if link.req & (REQ_RDB_MASK | REQ_RDB_CHANNEL) and not link.capa_eof:
            raise ReplyError("ERR Filtered replica requires EOF capability")
        if main is not None and main.state is not S.WAIT_RDB_CHANNEL:
            raise ReplyError(f"ERR Unrecognized RDB client id: {main.client.id}")
        now = core.now_ms
        log.notice(f"Replica {link.name()} asks for synchronization")
        link.sync_start_ms = now
        stats = core.stats
        if main is not None:
            # The rdb channel of a main channel that got +RDBCHANNELSYNC: always a full sync
            # (the PSYNC decision was made, and logged, on the main channel).
            link.sync_id = main.sync_id
            link.mode = "rdb-channel"
            log.notice(f"Full resync requested by replica {link.name()} (rdb-channel)")
            stats.sync_full += 1
            self._full(link)
            return NO_REPLY
        link.sync_id = manager.events.new_sync_id(now)
        if is_psync:
            try:
                offset = parse_int(argv[2])
            except ReplyError:
                log.warning(f"Replica {link.name()} asks for synchronization but with a wrong "
                            f"offset")
                raise
            req_id = argv[1].decode("utf-8", "replace")
            decision = psync_mod.decide("?" if req_id.startswith("?") else req_id, offset,
                                        manager.ids, manager.backlog,
                                        manager.master_repl_offset)
            if decision.partial:
                stats.sync_partial_ok += 1
                self._partial(link, req_id, offset)
                return NO_REPLY
            self._log_refused(link, req_id, offset, decision)
            if not req_id.startswith("?"):
                stats.sync_partial_err += 1
            reason = decision.reason
            gap = decision.gap if decision.reason == psync_mod.OFFSET_BEFORE_BACKLOG else None
            cfg = core.config
            if (link.capa_rdb_channel and cfg.repl_rdb_channel and cfg.repl_diskless_sync
                    and not link.rdb_only and not link.req):
                self._emit_decision(link, req_id, offset, "rdbchannel", reason, gap)
                self._rdb_channel_sync(link)
                return NO_REPLY
        else:
            link.pre_psync = True
            req_id, offset, reason, gap = "", None, psync_mod.REPLICA_REQUESTED, None
        stats.sync_full += 1
        self._emit_decision(link, req_id if is_psync else None, offset, "full", reason, gap)
        self._full(link)
        return NO_REPLY

    def _emit_decision(self, link: ReplicaLink, req_id: str | None, req_off: int | None,
                       result: str, reason: str, gap: int | None) -> None:
        b = self.manager.backlog
        self._emit("psync_decision", peer=link.name(), sync_id=link.sync_id,
                   replid=self.manager.ids.replid, req_replid=req_id, req_offset=req_off,
                   result=result, reason=reason, gap=gap,
                   master_repl_offset=self.manager.master_repl_offset,
                   backlog_size=self.core.config.repl_backlog_size,
                   backlog_histlen=b.histlen if b is not None else 0)

    def _log_refused(self, link: ReplicaLink, req_id: str, offset: int,
                     decision: psync_mod.PsyncDecision) -> None:
        """masterTryPartialResynchronization's log lines for a refused PSYNC."""
        log = self.core.log
        ids = self.manager.ids
        reason = decision.reason
        if reason in (psync_mod.NO_HISTORY, psync_mod.REPLICA_REQUESTED):
            log.notice(f"Full resync requested by replica {link.name()}")
        elif reason == psync_mod.REPLID_MISMATCH:
            if req_id.lower() != ids.replid and req_id.lower() != ids.replid2:
                log.notice(f"Partial resynchronization not accepted: Replication ID mismatch "
                           f"(Replica asked for '{req_id}', my replication IDs are "
                           f"'{ids.replid}' and '{ids.replid2}')")
            else:
                log.notice(f"Partial resynchronization not accepted: Requested offset for "
                           f"second ID was {offset}, but I can reply up to "
                           f"{ids.second_repl_offset}")
        else:
            log.notice(f"Unable to partial resync with replica {link.name()} for lack of "
                       f"backlog (Replica request was: {offset}).")
            if offset > self.manager.master_repl_offset:
                log.warning(f"Warning: replica {link.name()} tried to PSYNC with an offset that "
                            f"is greater than the master replication offset.")

    def _become_replica_client(self, link: ReplicaLink) -> None:
        link.client.kind = "replica"
        self._set_flags(link)
        self.links.append(link)

    def _partial(self, link: ReplicaLink, req_id: str, offset: int) -> None:
        """+CONTINUE and the backlog from ``offset``; the link streams at once."""
        manager = self.manager
        core = self.core
        self._emit_decision(link, req_id, offset, "continue", psync_mod.CONTINUE, None)
        link.go(L.PARTIAL)
        link.ack_ms = core.now_ms
        link.mode = "partial"
        self._become_replica_client(link)
        replid = manager.ids.replid
        head = (b"+CONTINUE %s\r\n" % replid.encode()) if link.capa_psync2 else b"+CONTINUE\r\n"
        self._write(link, head)
        # addReplyReplicationBacklog: the replica references the backlog from its offset on
        backlog = manager.backlog
        assert backlog is not None
        sent = manager.master_repl_offset + 1 - offset
        self._feed(link, backlog.cursor_at(offset))
        self._start_stream(link)
        core.log.notice(f"Partial resynchronization request from {link.name()} accepted. "
                        f"Sending {sent} bytes of backlog starting from offset {offset}.")
        self._emit("partial_sent", peer=link.name(), sync_id=link.sync_id, replid=replid,
                   offset=offset, bytes=sent, master_repl_offset=manager.master_repl_offset)
        self._emit("replica_online", peer=link.name(), sync_id=link.sync_id, replid=replid,
                   offset=manager.master_repl_offset, duration_ms=0)
        self.refresh_good_replicas()

    def _rdb_channel_sync(self, link: ReplicaLink) -> None:
        """The main channel of an rdb-channel replica: +RDBCHANNELSYNC <its client id>, then
        it waits (nothing is sent or held) until its rdb channel's snapshot starts."""
        manager = self.manager
        c = link.client
        link.go(L.RDB_CHANNEL)
        link.mode = "rdb-channel"
        self._become_replica_client(link)
        if len(self.links) == 1 and manager.backlog is None:
            manager.create_backlog()
        self.core.log.notice(f"Replica {link.name()} is capable of rdb channel synchronization, "
                             f"and partial sync isn't possible. Full sync will continue with "
                             f"dedicated rdb channel.")
        self._write(link, b"+RDBCHANNELSYNC %d\r\n" % c.id)

    def _attach_main(self, main: ReplicaLink, snap: Snapshot) -> None:
        """At fork time: the main channel streams from the snapshot offset on (SELECT first)."""
        main.snapshot = snap
        main.psync_offset = snap.offset
        main.joined_ms = self.core.now_ms
        main.go(L.SNAPSHOT_STARTED)
        self.manager.stream_db = -1
        self._start_stream(main)

    def _full(self, link: ReplicaLink) -> None:
        """The full-sync half of syncCommand: wait for, join or start a snapshot."""
        core = self.core
        manager = self.manager
        log = core.log
        link.go(L.FULL)
        self._become_replica_client(link)
        if len(self.links) == 1 and manager.backlog is None:
            manager.create_backlog()
        snap = self.snapshot
        if core.rdb_child_pid != -1:
            if (snap is not None and snap.pid == core.rdb_child_pid and snap.target == "disk"
                    and link.main is None):
                donor = next((d for d in self.links
                              if d.state is S.WAIT_BGSAVE_END and d.snapshot is snap
                              and (not d.rdb_only or link.rdb_only)), None)
                if donor is not None and (link.capa_eof or not donor.capa_eof) \
                        and (link.capa_psync2 or not donor.capa_psync2) \
                        and link.req == donor.req:
                    self._setup_full_resync(link, snap, L.ATTACHED, reply=True, donor=donor)
                    log.notice("Waiting for end of BGSAVE for SYNC")
                    return
                log.notice("Can't attach the replica to the current BGSAVE. Waiting for next "
                           "BGSAVE for SYNC")
            elif snap is not None and snap.pid == core.rdb_child_pid:
                log.notice("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC")
            elif core.rdb_child_purpose == "disk":
                log.notice("Can't attach the replica to the current BGSAVE. Waiting for next "
                           "BGSAVE for SYNC")
            else:
                log.notice("No BGSAVE in progress, but another BG operation is active. BGSAVE "
                           "for replication delayed")
            return
        cfg = core.config
        if cfg.repl_diskless_sync and link.capa_eof and cfg.repl_diskless_sync_delay:
            log.notice("Delay next BGSAVE for diskless SYNC")
        else:
            self._start_bgsave_for_replication(link.capa_eof, link.req)

    def _setup_full_resync(self, link: ReplicaLink, snap: Snapshot, inp: LinkInput,
                           reply: bool, donor: ReplicaLink | None = None) -> None:
        """replicationSetupSlaveForFullResync: the link waits for ``snap``; SELECT again. It is
        fed from the snapshot's offset on (a disk snapshot's joiner: from where its donor is,
        copyReplicaOutputBuffer)."""
        link.snapshot = snap
        link.psync_offset = snap.offset
        link.joined_ms = self.core.now_ms
        link.mode = ("rdb-channel" if link.main is not None
                     else "diskless" if snap.target == "socket" else "disk")
        link.go(inp)
        self.manager.stream_db = -1
        if not link.rdb_only:
            backlog = self.manager.backlog
            if donor is not None and donor.ref is not None and backlog is not None:
                self._feed(link, backlog.copy(donor.ref))
            else:
                self._feed(link)
        if reply and not link.pre_psync:
            self._write(link, b"+FULLRESYNC %s %d\r\n" % (self.manager.ids.replid.encode(),
                                                          snap.offset))
        self._emit("fullsync_fork", peer=link.name(), sync_id=link.sync_id,
                   replid=self.manager.ids.replid, mode=link.mode, offset=snap.offset,
                   keys=snap.keys, reason="attached" if inp is L.ATTACHED else None)

    def _waiting_start(self, req: int | None = None) -> list[ReplicaLink]:
        return [lk for lk in self.links if lk.state is S.WAIT_BGSAVE_START
                and (req is None or lk.req == req)]

    def _start_bgsave_for_replication(self, capa_eof: bool, req: int) -> bool:
        """startBgsaveForReplication: fork the snapshot for the links waiting for one."""
        core = self.core
        cfg = core.config
        log = core.log
        manager = self.manager
        socket_target = bool((cfg.repl_diskless_sync or req & (REQ_RDB_MASK | REQ_RDB_CHANNEL))
                             and capa_eof)
        log.notice(f"Starting BGSAVE for SYNC with target: "
                   f"{'replicas sockets' if socket_target else 'disk'}"
                   f"{' (rdb-channel)' if req & REQ_RDB_CHANNEL else ''}")
        offset = manager.master_repl_offset
        keys = 0 if req & REQ_EXCLUDE_DATA else sum(len(db.data) for db in core.dbs)
        if socket_target:
            pid = self._fork_socket_snapshot(req, offset, keys)
            if pid is None:
                return False
            if pid < 0:
                self._bgsave_failed()
                return False
            return True
        err = core.bgsave()
        if err is not None:
            self._bgsave_failed()
            return False
        snap = Snapshot(core.rdb_child_pid, "disk", offset, core.now_ms, req, keys)
        self.snapshot = snap
        for link in self._waiting_start(req):
            self._setup_full_resync(link, snap, L.SNAPSHOT_STARTED, reply=True)
        return True

    def _fork_socket_snapshot(self, req: int, offset: int, keys: int) -> int | None:
        """rdbSaveToSlavesSockets. None: no replica could be handed over; -1: fork failed."""
        from pyrepl.rdb.encoder import encode_rdb

        core = self.core
        io = self.io
        if io is None:
            core.log.warning("Can't save in background: fork: no I/O adapter")
            return -1
        ready = [lk for lk in self._waiting_start(req)
                 if (lk.main is None or lk.main.state is S.WAIT_RDB_CHANNEL)
                 and io.prepare_handover(lk.client)]
        if not ready:
            return None
        for lk in ready:
            if lk.main is not None:
                core.log.notice(f"Starting to deliver RDB and replication stream to replica: "
                                f"{lk.name()}")
        mark = os.urandom(EOF_MARK_LEN // 2).hex().encode()
        head = b"+FULLRESYNC %s %d\r\n" % (self.manager.ids.replid.encode(), offset)
        targets = [(lk.client, (b"" if lk.pre_psync else head) + b"$EOF:" + mark + b"\r\n")
                   for lk in ready]
        dbs = [] if req & REQ_EXCLUDE_DATA else core.dbs
        aux = core.rdb_aux()
        checksum = core.config.rdbchecksum
        now = core.now_ms
        key_hook = core.host.key_save_delay_hook()  # rdb-key-save-delay (tests slow it down)

        def payload() -> Any:
            return encode_rdb(dbs, aux=aux, checksum=checksum, now_ms=now, key_hook=key_hook)

        try:
            pid = io.start_socket_snapshot(targets, payload, mark,
                                           core.config.repl_timeout * 1000)
        except OSError as e:
            core.log.warning(f"Can't save in background: fork: {e}")
            return -1
        core.total_forks += 1
        core.rdb_child_pid = pid
        core.rdb_child_purpose = "socket"
        core.rdb_save_started_ms = now
        core.rdb_last_bgsave_try_ms = now
        core.log.notice(f"Background RDB transfer started by pid {pid}"
                        f"{' to replica socket' if req & REQ_RDB_CHANNEL else ''}")
        snap = Snapshot(pid, "socket", offset, now, req, keys)
        self.snapshot = snap
        for link in ready:
            self._setup_full_resync(link, snap, L.SNAPSHOT_STARTED, reply=False)
            if link.main is not None:
                # the same instant: nothing was written since ``offset`` was taken
                self._attach_main(link.main, snap)
        return pid

    def _bgsave_failed(self) -> None:
        """The snapshot could not start: tell the waiting replicas and drop them."""
        self.core.log.warning("BGSAVE for replication failed")
        for link in self._waiting_start():
            self._write(link, b"-ERR BGSAVE failed, replication can't continue\r\n")
            link.client.close_after_reply = True
            self._free_link(link, "bgsave-failed", log_lost=False)

    def _start_pending_fork(self) -> None:
        """shouldStartChildReplication + replicationStartPendingFork."""
        core = self.core
        if core.rdb_child_pid != -1 or not self.links:
            return
        waiting: list[ReplicaLink] = []
        req = 0
        capa_eof = True
        max_idle = 0
        now_s = core.now_ms // 1000
        for link in self.links:
            if link.state is not S.WAIT_BGSAVE_START:
                continue
            if not waiting:
                req = link.req
            elif link.req != req:
                continue
            waiting.append(link)
            capa_eof = capa_eof and link.capa_eof
            idle = now_s - link.client.last_interaction_ms // 1000
            if idle > max_idle:
                max_idle = idle
        if not waiting:
            return
        cfg = core.config
        maxr = cfg.repl_diskless_sync_max_replicas
        if (not cfg.repl_diskless_sync or (maxr > 0 and len(waiting) >= maxr)
                or max_idle >= cfg.repl_diskless_sync_delay):
            self._start_bgsave_for_replication(capa_eof, req)

    # -- snapshot outcome ---------------------------------------------------------------------
    def child_exited(self, pid: int, exitcode: int) -> None:
        """A child ended (the core did its own bookkeeping first)."""
        snap = self.snapshot
        if snap is not None and snap.pid == pid:
            self._snapshot_done(snap, exitcode)
        self._start_pending_fork()

    def _snapshot_done(self, snap: Snapshot, exitcode: int) -> None:
        """backgroundSaveDoneHandler + updateSlavesWaitingBgsave."""
        core = self.core
        log = core.log
        self.snapshot = None
        results: dict[int, tuple[bool, int, str]] = {}
        if snap.target == "socket":
            if core.rdb_child_pid == snap.pid:
                core.rdb_child_pid = -1
            io = self.io
            if io is not None:
                results = io.finish_socket_snapshot(snap.pid)
            if exitcode == 0:
                log.notice("Background RDB transfer terminated with success")
            elif exitcode > 0:
                log.warning("Background transfer error")
            else:
                log.warning(f"Background transfer terminated by signal {-exitcode}")
        ok = exitcode == 0
        # rdb channels: their main channels first (online, or aborted with their rdb channel)
        for main in [lk for lk in self.links
                     if lk.snapshot is snap and lk.state is S.SEND_BULK_AND_STREAM]:
            rc = main.rdb_channel
            result = results.get(rc.id) if rc is not None else None
            if main.rdb_done or (result is not None and result[0]):
                self._put_online(main, L.RDB_STREAMED)
            else:
                log.warning(f"Rdb channel transfer to replica {main.name()} failed, aborting "
                            f"the sync")
                self._close_link(main, "rdb-transfer-error")
        for link in [lk for lk in self.links
                     if lk.snapshot is snap and lk.state is S.WAIT_BGSAVE_END]:
            result = results.get(link.client.id)
            if snap.target == "socket" and (ok or result is not None):
                # the child wrote to the sockets itself: its per-replica outcome decides
                self._socket_transfer_done(link, result)
            elif not ok:
                log.warning("SYNC failed. BGSAVE child returned an error")
                self._close_link(link, "snapshot-failed")
            else:
                self._send_file(link)

    def _socket_transfer_done(self, link: ReplicaLink,
                              result: tuple[bool, int, str] | None) -> None:
        core = self.core
        if result is None or not result[0]:
            err = result[2] if result is not None else "no result from the child"
            if err == "timeout":
                core.log.warning(f"Disconnecting timedout replica (full sync): {link.name()}")
                self._close_link(link, "timeout")
            else:
                core.log.warning(f"Diskless rdb transfer, write error sending DB to replica: "
                                 f"{err}")
                self._close_link(link, "rdb-transfer-error")
            return
        nbytes = result[1]
        core.stats.net_repl_output_bytes += nbytes
        core.stats.net_output_bytes += nbytes
        link.client.net_out += nbytes
        self._emit("fullsync_rdb_sent", peer=link.name(), sync_id=link.sync_id,
                   mode=link.mode, offset=link.psync_offset, bytes=nbytes,
                   duration_ms=core.now_ms - link.joined_ms)
        who = "replica" if link.main is not None else "slave"  # Redis 8's text / 7.0's
        core.log.notice(f"Streamed RDB transfer with replica {link.name()} succeeded (socket). "
                        f"Waiting for REPLCONF ACK from {who} to enable streaming")
        if self._put_online(link, L.RDB_STREAMED):
            link.stream_on_ack = True

    def _send_file(self, link: ReplicaLink) -> None:
        """Disk snapshot done: $<len>\\r\\n and the file, then the held stream."""
        core = self.core
        io = self.io
        try:
            if io is None:
                raise OSError("no I/O adapter")
            io.send_bulk(link.client, core.rdb_path())
        except OSError as e:
            core.log.warning(f"SYNC failed. Can't open/stat DB after BGSAVE: {e}")
            self._close_link(link, "rdb-open-failed")
            return
        link.go(L.RDB_SAVED)

    def bulk_sent(self, c: Client, ok: bool, nbytes: int, error: str = "") -> None:
        """The I/O adapter finished (or failed) sending the snapshot file."""
        link = c.repl
        if not isinstance(link, ReplicaLink) or link.state is not S.SEND_BULK:
            return
        core = self.core
        core.stats.net_repl_output_bytes += nbytes
        core.stats.net_output_bytes += nbytes
        c.net_out += nbytes
        if not ok:
            core.log.warning(f"Write error sending DB to replica: {error}")
            self._close_link(link, "rdb-transfer-error")
            return
        self._emit("fullsync_rdb_sent", peer=link.name(), sync_id=link.sync_id,
                   mode=link.mode, offset=link.psync_offset, bytes=nbytes,
                   duration_ms=core.now_ms - link.joined_ms)
        if self._put_online(link, L.BULK_SENT):
            self._start_stream(link)

    def _put_online(self, link: ReplicaLink, inp: LinkInput) -> bool:
        """replicaPutOnline. False: an rdb-only replica, closed now."""
        core = self.core
        if link.rdb_only:
            link.go(L.RDB_ONLY_DONE)
            core.log.notice(f"RDB transfer completed, rdb only replica ({link.name()}) should "
                            f"be disconnected asap")
            self._close_link(link, "rdb-only-done")
            return False
        link.go(inp)
        link.ack_ms = core.now_ms
        self.refresh_good_replicas()
        core.log.notice(f"Synchronization with replica {link.name()} succeeded")
        self._emit("replica_online", peer=link.name(), sync_id=link.sync_id,
                   replid=self.manager.ids.replid, mode=link.mode, offset=link.psync_offset,
                   duration_ms=core.now_ms - link.sync_start_ms,
                   buffer_peak=max(link.buffer_peak, self.pending_bytes(link)))
        return True

    def _kill_snapshot(self, snap: Snapshot) -> None:
        core = self.core
        if core.rdb_child_pid == snap.pid:
            core.kill_rdb_child()  # SIGUSR1 + reap: no child_exited follows
        self._snapshot_done(snap, -10)

    # -- REPLCONF -------------------------------------------------------------------------------
    def replconf_command(self, c: Client, argv: list[bytes]) -> object:
        """replconfCommand (Redis 7.0.15's options)."""
        if c.kind == "master":  # our own master asks (GETACK): the replica side answers
            r = self.manager.replica.on_master_replconf(c, argv)
            return NO_REPLY if r is None else r
        if len(argv) % 2 == 0:
            raise ReplyError(SYNTAX)
        for j in range(1, len(argv), 2):
            opt = argv[j].lower()
            val = argv[j + 1]
            if opt == b"listening-port":
                self.link_for(c).listening_port = parse_int(val)
            elif opt == b"ip-address":
                if len(val) >= NET_HOST_STR_LEN:
                    raise ReplyError(f"ERR REPLCONF ip-address provided by replica instance is "
                                     f"too long: {len(val)} bytes")
                self.link_for(c).ip_address = val.decode("utf-8", "replace")
            elif opt == b"capa":
                v = val.lower()
                if v == b"eof":
                    self.link_for(c).capa_eof = True
                elif v == b"psync2":
                    self.link_for(c).capa_psync2 = True
                elif v == b"rdb-channel-repl":
                    cfg = self.core.config
                    if cfg.repl_rdb_channel and cfg.repl_diskless_sync:
                        self.link_for(c).capa_rdb_channel = True
                # capabilities this master does not know are ignored
            elif opt == b"ack":
                link = c.repl
                if not isinstance(link, ReplicaLink) or link.state in (S.NONE, S.CLOSED):
                    return NO_REPLY
                try:
                    offset = parse_int(val)
                except ReplyError:
                    return NO_REPLY
                self.ack(link, offset)
                return NO_REPLY
            elif opt == b"getack":
                return NO_REPLY  # only a master's GETACK means something (replica side)
            elif opt == b"rdb-only":
                v = parse_int(val)
                if v < 0 or v > 1:
                    raise ReplyError("ERR value is out of range, value must between 0 and 1")
                self.link_for(c).rdb_only = v == 1
            elif opt == b"rdb-channel":
                v = parse_int(val)
                if v < 0 or v > 1:
                    raise ReplyError("ERR value is out of range, value must between 0 and 1")
                link = self.link_for(c)
                link.is_rdb_channel = v == 1
                self._set_flags(link)
            elif opt == b"main-ch-client-id":
                self._bind_rdb_channel(self.link_for(c), parse_int(val))
            elif opt == b"rdb-filter-only":
                filters = val.split()
                link = self.link_for(c)
                link.req |= REQ_EXCLUDE_DATA | REQ_EXCLUDE_FUNCTIONS
                for f in filters:
                    if f.lower() == b"functions":
                        link.req &= ~REQ_EXCLUDE_FUNCTIONS
                    else:
                        raise ReplyError(f"ERR Unsupported rdb-filter-only option: "
                                         f"{f.decode('utf-8', 'replace')}")
            else:
                raise ReplyError(f"ERR Unrecognized REPLCONF option: "
                                 f"{argv[j].decode('utf-8', 'replace')}")
        return OK

    def _bind_rdb_channel(self, link: ReplicaLink, main_id: int) -> None:
        """REPLCONF main-ch-client-id <id>: this connection is the rdb channel of the main
        channel ``<id>``, which must be waiting for one (and not have another already)."""
        other = self.core.clients.get(main_id)
        main = other.repl if other is not None else None
        if (not isinstance(main, ReplicaLink) or main.state is not S.WAIT_RDB_CHANNEL
                or other is link.client
                or (main.rdb_channel is not None and main.rdb_channel is not link.client
                    and not main.rdb_channel.closed)):
            raise ReplyError(f"ERR Unrecognized RDB client id: {main_id}")
        if link.main is not None and link.main is not main:
            raise ReplyError(f"ERR Unrecognized RDB client id: {main_id}")
        link.main = main
        main.rdb_channel = link.client

    def _set_flags(self, link: ReplicaLink) -> None:
        """CLIENT LIST flags: S for a replica connection, C for an rdb channel (S first)."""
        c = link.client
        rest = c.flags.replace("S", "").replace("C", "")
        c.flags = ("S" if c.kind == "replica" else "") + ("C" if link.is_rdb_channel else "") \
            + rest

    def ack(self, link: ReplicaLink, offset: int) -> None:
        """REPLCONF ACK <offset> from a replica."""
        core = self.core
        if offset > link.ack_off:
            link.ack_off = offset
        link.ack_ms = core.now_ms
        snap = link.snapshot
        if (link.state in (S.WAIT_BGSAVE_END, S.SEND_BULK_AND_STREAM) and snap is not None
                and snap is self.snapshot and core.rdb_child_pid == snap.pid
                and self.io is not None):
            # checkChildrenDone: the ACK may arrive before the cron noticed the child's end.
            self.io.reap_child(snap.pid)
        if link.state is S.SEND_BULK_AND_STREAM:
            # rdb channel: the replica loaded the RDB (it streams already)
            self._put_online(link, L.FIRST_ACK)
        if link.stream_on_ack and link.state is S.ONLINE:
            self._start_stream(link)
        if self.waiters:
            self._process_waiters()

    # -- WAIT -------------------------------------------------------------------------------------
    def wait_command(self, c: Client, argv: list[bytes]) -> object:
        """WAIT numreplicas timeout: block until enough replicas acked the client's offset."""
        from pyrepl.blocking import ReplicaWait
        from pyrepl.core import BLOCKED

        if self.manager.is_replica():
            raise ReplyError(WAIT_REPLICA_ERR)
        numreplicas = parse_int(argv[1])
        timeout = parse_int(argv[2], "ERR timeout is not an integer or out of range")
        if timeout < 0:
            raise ReplyError("ERR timeout is negative")
        offset = c.woff
        acked = self.count_acks(offset)
        if acked >= numreplicas or c.in_multi or self.core._call_depth > 0:
            return acked
        deadline = self.core.now_ms + timeout if timeout > 0 else 0
        # the cron answers the acks counted at the deadline (pyrepl.blocking)
        self.core.blocking.block(c, ReplicaWait(offset, numreplicas, deadline,
                                                lambda: self.count_acks(offset)))
        self.waiters.append(c)
        self._request_acks()
        return BLOCKED

    def count_acks(self, offset: int) -> int:
        """replicationCountAcksByOffset."""
        n = 0
        for link in self.links:
            if link.state is S.ONLINE and link.ack_off >= offset:
                n += 1
        return n

    def _request_acks(self) -> None:
        """REPLCONF GETACK * into the stream; one per stream position (Redis groups the WAITs
        of an event-loop iteration into one GETACK)."""
        manager = self.manager
        if self._getack_offset == manager.master_repl_offset:
            return
        manager.feed(manager.stream_db, GETACK_ARGV)
        self._getack_offset = manager.master_repl_offset

    def _process_waiters(self) -> None:
        """processClientsWaitingReplicas."""
        from pyrepl.blocking import ReplicaWait

        last_off = 0
        last_num = 0
        for c in list(self.waiters):
            b = c.blocked
            if c.closed or not isinstance(b, ReplicaWait):
                self.waiters.remove(c)
                continue
            off, num = b.offset, b.numreplicas
            if last_off and last_off >= off and last_num >= num:
                self.waiters.remove(c)
                self.core.unblock(c, last_num)
                continue
            n = self.count_acks(off)
            if n >= num:
                last_off, last_num = off, n
                self.waiters.remove(c)
                self.core.unblock(c, n)

    def _wait_timeouts(self, now: int) -> None:
        """Forget the WAITs answered elsewhere: their deadline (the core's blocked-clients
        cron), CLIENT UNBLOCK, a closed connection."""
        from pyrepl.blocking import ReplicaWait

        self.waiters = [c for c in self.waiters
                        if not c.closed and isinstance(c.blocked, ReplicaWait)]

    # -- min-replicas -------------------------------------------------------------------------
    def refresh_good_replicas(self) -> None:
        """refreshGoodSlavesCount."""
        now_s = self.core.now_ms // 1000
        lag_max = self.core.config.min_replicas_max_lag
        self.good_replicas = sum(1 for lk in self.links if lk.state is S.ONLINE
                                 and now_s - lk.ack_ms // 1000 <= lag_max)

    def good_replicas_count(self) -> int:
        return self.good_replicas

    def enough_good_replicas(self) -> bool:
        """checkGoodReplicasStatus."""
        cfg = self.core.config
        if not cfg.min_replicas_to_write or not cfg.min_replicas_max_lag:
            return True
        if self.manager.is_replica():
            return True
        return self.good_replicas >= cfg.min_replicas_to_write

    # -- link end -------------------------------------------------------------------------------
    def _close_link(self, link: ReplicaLink, reason: str) -> None:
        """Drop a replica now (freeClient): our bookkeeping first, then the connection."""
        if link.state is S.CLOSED:
            return
        link.close_reason = reason
        self._free_link(link, reason)
        self.core.host.close_client(link.client)

    def client_closed(self, c: Client) -> None:
        link = c.repl
        if not isinstance(link, ReplicaLink):
            return
        if link.state is S.NONE:
            link.state = S.CLOSED
            main = link.main
            if main is not None and main.state is S.WAIT_RDB_CHANNEL:
                # the rdb channel went away before its PSYNC: the replica gave up this sync
                self._close_link(main, "rdb-channel-lost")
            return
        self._free_link(link, link.close_reason or "closed")

    def _free_link(self, link: ReplicaLink, reason: str, log_lost: bool = True) -> None:
        if link.state is S.CLOSED:
            return
        core = self.core
        prev = link.state
        link.go(L.CLOSED)
        if link in self.links:
            self.links.remove(link)
        peak = max(link.buffer_peak, self._unfeed(link))
        main = link.main
        if log_lost:
            kind = "replica (rdbchannel)" if main is not None else "replica"
            core.log.warning(f"Connection with {kind} {link.name()} lost.")
        lag = self.manager.master_repl_offset - link.ack_off if prev is S.ONLINE else None
        if main is None:  # an rdb channel is not a replica of its own: its main reports
            self._emit("replica_lost", peer=link.name(), sync_id=link.sync_id, reason=reason,
                       offset=link.ack_off, lag_bytes=lag, buffer_peak=peak,
                       buffer_limit=self._hard or None,
                       lag_ms=core.now_ms - link.ack_ms if prev is S.ONLINE else None)
        if not self.links:
            self.manager.no_replicas_since_ms = core.now_ms
        self.refresh_good_replicas()
        io = self.io
        snap = link.snapshot
        running = prev is S.WAIT_BGSAVE_END and snap is not None and snap is self.snapshot
        # an rdb channel whose whole RDB the child already wrote (the replica closes it after
        # the mark): the normal end, nothing to abort
        sent = (running and main is not None and snap is not None and snap.target == "socket"
                and io is not None and io.socket_target_done(snap.pid, link.client.id))
        if main is not None and main.state in (S.WAIT_RDB_CHANNEL, S.SEND_BULK_AND_STREAM):
            if sent and main.state is S.SEND_BULK_AND_STREAM:
                main.rdb_done = True
            else:
                self._close_link(main, "rdb-channel-lost" if reason == "closed" else reason)
        if running and not sent and snap is not None:
            others = any(lk.snapshot is snap and lk.state is S.WAIT_BGSAVE_END
                         for lk in self.links)
            if snap.target == "socket":
                if io is not None:
                    io.drop_socket_target(link.client)
                if not others:
                    core.log.warning("Diskless rdb transfer, last replica dropped, killing "
                                     "fork child.")
                    self._kill_snapshot(snap)
            elif not others and not core.config.save:
                self._kill_snapshot(snap)
        elif prev is S.SEND_BULK and io is not None:
            io.cancel_bulk(link.client)
        rc = link.rdb_channel
        if rc is not None and isinstance(rc.repl, ReplicaLink) \
                and rc.repl.state not in (S.CLOSED, S.RDB_TRANSMITTED):
            self._close_rdb_channel(rc.repl)

    def _close_rdb_channel(self, rdb: ReplicaLink) -> None:
        """The main channel is gone (or its sync failed): its rdb channel goes too."""
        if rdb.state is S.NONE:  # REPLCONF only, no PSYNC yet: not a replica connection
            rdb.state = S.CLOSED
            self.core.host.close_client(rdb.client)
            return
        self._close_link(rdb, "main-channel-lost")

    def disconnect_replicas(self) -> None:
        """disconnectSlaves: REPLICAOF / promotion changes the history."""
        for link in list(self.links):
            self._close_link(link, "replicaof")

    # -- cron -----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        if self._refresh_limits() and self.links:  # CONFIG SET: judge everyone by the new limits
            over = [lk for lk in self.links if self._over_limits(lk)]
            for link in over:
                self._output_limit_reached(link)
        backlog = self.manager.backlog
        if backlog is not None:   # beforeSleep: free what nobody references, faster than feeds
            backlog.trim(10 * TRIM_BLOCKS_PER_CALL)
        snap = self.snapshot
        if snap is not None and self.core.rdb_child_pid != snap.pid:
            # The child was killed elsewhere (FLUSHALL, SHUTDOWN): no exit will be reported.
            self._snapshot_done(snap, -10)
        if self._last_cron_ms is None or now_ms - self._last_cron_ms >= CRON_MS:
            self._last_cron_ms = now_ms
            self._cron(now_ms)
        self._start_pending_fork()
        if self.waiters:
            self._wait_timeouts(now_ms)

    def _cron(self, now_ms: int) -> None:
        """The master half of replicationCron (once a second)."""
        manager = self.manager
        core = self.core
        cfg = core.config
        period = max(1, cfg.repl_ping_replica_period)
        if self.links and self.cron_loops % period == 0:
            manager.feed(manager.stream_db, PING_ARGV)
            for link in self.links:
                if link.state is S.ONLINE:
                    self._emit("replica_lag", peer=link.name(), sync_id=link.sync_id,
                               offset=link.ack_off,
                               lag_bytes=manager.master_repl_offset - link.ack_off,
                               lag_ms=now_ms - link.ack_ms)
        for link in self.links:
            st = link.state
            if st is S.WAIT_BGSAVE_START or (st is S.WAIT_BGSAVE_END and link.snapshot is not None
                                              and link.snapshot.target != "socket"):
                c = link.client
                c.out.append(b"\n")
                self._schedule(c)
        timeout_s = cfg.repl_timeout
        now_s = now_ms // 1000
        for link in list(self.links):
            if link.state is S.ONLINE and not link.pre_psync \
                    and now_s - link.ack_ms // 1000 > timeout_s:
                core.log.warning(f"Disconnecting timedout replica (streaming sync): "
                                 f"{link.name()}")
                self._close_link(link, "timeout")
            elif (link.state is S.WAIT_RDB_CHANNEL
                  and (link.rdb_channel is None or link.rdb_channel.closed)
                  and now_s - link.sync_start_ms // 1000 > timeout_s):
                core.log.warning(f"Disconnecting timedout replica (no rdb channel): "
                                 f"{link.name()}")
                self._close_link(link, "timeout")
        # clientsCron: every replica's limits, once a second (feeds check only on a new block)
        over = [lk for lk in self.links if self._over_limits(lk)]
        for link in over:
            self._output_limit_reached(link)
        self.refresh_good_replicas()
        self.cron_loops += 1

    # -- introspection --------------------------------------------------------------------------
    def online_or_syncing_links(self) -> list[ReplicaLink]:
        """The logical replicas: an rdb channel counts with its main channel."""
        return [lk for lk in self.links if lk.main is None]

    def info_replica_lines(self) -> list[tuple[str, str]]:
        """INFO replication's slaveN lines (Redis 7.0.15 format)."""
        out: list[tuple[str, str]] = []
        now_s = self.core.now_ms // 1000
        i = 0
        for link in self.links:
            state = INFO_STATE.get(link.state)
            if not state or link.main is not None:  # rdb channels: shown by their main
                continue
            lag = now_s - link.ack_ms // 1000 if link.state is S.ONLINE else 0
            out.append((f"slave{i}", f"ip={link.peer_ip()},port={link.listening_port},"
                                     f"state={state},offset={link.ack_off},lag={lag}"))
            i += 1
        return out

