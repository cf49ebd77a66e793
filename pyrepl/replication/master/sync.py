"""PSYNC and SYNC: the decision, a partial resync, a full sync handed to the snapshots, the rdb
channel's main connection (master side).

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

Valkey's dual channel (``capa dual-channel``: ``+DUALCHANNELSYNC``, then an rdb channel that
names no main connection and a main connection that comes back with ``REPLCONF
set-rdb-client-id`` and a PSYNC from the snapshot offset) is
:class:`~pyrepl.replication.master.dualchannel.DualChannel`'s, which this class asks at the
three points where the dialects part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.intparse import parse_int
from pyrepl.replication import psync as psync_mod
from pyrepl.replication.master.states import (
    REQ_RDB_CHANNEL,
    REQ_RDB_MASK,
    L,
    ReplicaLink,
)
from pyrepl.replication.wire import Continue
from pyrepl.resp.types import NO_REPLY, ReplyError

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.acks import Acks
    from pyrepl.replication.master.dualchannel import DualChannel
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.master.snapshot import Snapshots
    from pyrepl.replication.ports import ReplClient, ReplicationHost


class Sync:
    """PSYNC and SYNC (see the module docstring)."""

    __slots__ = ("core", "manager", "side", "feeding", "snapshots", "acks", "dual")

    def __init__(self, side: MasterSide, feeding: Feeding, snapshots: Snapshots,
                 acks: Acks) -> None:
        self.side = side
        self.feeding = feeding
        self.snapshots = snapshots
        self.acks = acks
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.dual: DualChannel = side.dual

    def command(self, c: ReplClient, argv: list[bytes]) -> object:
        """syncCommand: PSYNC <replid> <offset> [FAILOVER] and the old SYNC."""
        core = self.core
        manager = self.manager
        log = core.log
        if isinstance(c.repl, ReplicaLink) and not c.repl.replconf_only:
            return NO_REPLY  # already a replica: ignored, as Redis
        is_psync = argv[0].lower() == b"psync"
        if is_psync and len(argv) > 3 and argv[3].lower() == b"failover":
            rid = argv[1].decode("utf-8", "replace")
            log.warning(f"Failover request received for replid {rid}.")
            if not manager.is_replica():
                raise ReplyError("ERR PSYNC FAILOVER can't be sent to a master.")
            if rid.lower() != manager.ids.replid:
                raise ReplyError("ERR PSYNC FAILOVER replid must match my replid.")

            manager.replica.unset_master()
            log.notice(f"MASTER MODE enabled (failover request from '{c.info_line()}')")
        if manager.is_replica() and not manager.replica.link_up():
            raise ReplyError("NOMASTERLINK Can't SYNC while not connected with my master")
        if c.pending_output():
            raise ReplyError("ERR SYNC and PSYNC are invalid with pending output")
        link = self.side.link_for(c)
        main = link.main
        if main is not None:
            link.req |= REQ_RDB_CHANNEL
            link.rdb_only = True
        elif link.is_rdb_channel:     # Valkey's rdb channel: names no main connection
            link.req |= REQ_RDB_CHANNEL
        if link.req & (REQ_RDB_MASK | REQ_RDB_CHANNEL) and not link.capa_eof:
            raise ReplyError("ERR Filtered replica requires EOF capability")
        if main is not None and not main.waits_for_rdb_channel:
            raise ReplyError(f"ERR Unrecognized RDB client id: {main.client.id}")
        now = core.now_ms
        log.notice(f"Replica {link.name()} asks for synchronization")
        link.sync_start_ms = now
        stats = core.stats
        if link.is_rdb_channel and main is None:
            # Valkey's rdb channel: always a full sync, the one its main connection was
            # refused (the decision was made, and logged, there)
            link.pre_psync = not is_psync
            self.dual.rdb_channel_sync(link)
            log.notice(f"Full resync requested by replica {link.name()} (dual-channel)")
            stats.sync_full += 1
            self._full(link)
            return NO_REPLY
        if main is not None:
            # The rdb channel of a main channel that got +RDBCHANNELSYNC: always a full sync
            # (the PSYNC decision was made, and logged, on the main channel).
            link.sync_id = main.sync_id
            link.mode = "rdb-channel"
            log.notice(f"Full resync requested by replica {link.name()} (rdb-channel)")
            stats.sync_full += 1
            self._full(link)
            return NO_REPLY
        if link.resume and is_psync and self.side.resume.serve(link):
            return NO_REPLY     # a cut full sync goes on (REPLCONF resume was accepted)
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
            if self.dual.offered(link):
                self._emit_decision(link, req_id, offset, "dualchannel", reason, gap)
                self.dual.refuse(link)
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
        self.side.emit("psync_decision", peer=link.name(), sync_id=link.sync_id,
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

    def _partial(self, link: ReplicaLink, req_id: str, offset: int) -> None:
        """+CONTINUE and the backlog from ``offset``; the link streams at once (the main
        connection of a dual-channel sync too, online at its first ACK)."""
        manager = self.manager
        core = self.core
        backlog = manager.backlog
        assert backlog is not None
        # addReplyReplicationBacklog: the replica references the backlog from its offset on
        # (taken before a dual-channel hold lets go of those bytes)
        ref = backlog.cursor_at(offset)
        dual = self.dual.attach(link)
        if dual is None:
            self._emit_decision(link, req_id, offset, "continue", psync_mod.CONTINUE, None)
            link.go(L.PARTIAL)
            link.mode = "partial"
        else:
            link.go(L.DUAL_CHANNEL_PSYNC)
            link.joined_ms = core.now_ms
        link.ack_ms = core.now_ms
        self.side.add_replica(link)
        replid = manager.ids.replid
        head = Continue(replid if link.capa_psync2 else "").format()
        self.side.write(link, head)
        sent = manager.master_repl_offset + 1 - offset
        self.feeding.feed(link, ref)
        self.feeding.start_stream(link)
        core.log.notice(f"Partial resynchronization request from {link.name()} accepted. "
                        f"Sending {sent} bytes of backlog starting from offset {offset}.")
        if dual is not None:
            return      # (its RDB is loading: online at its first ACK)
        self.side.emit("partial_sent", peer=link.name(), sync_id=link.sync_id, replid=replid,
                       offset=offset, bytes=sent, master_repl_offset=manager.master_repl_offset)
        self.side.emit("replica_online", peer=link.name(), sync_id=link.sync_id, replid=replid,
                       offset=manager.master_repl_offset, duration_ms=0)
        self.acks.refresh_good_replicas()

    def _rdb_channel_sync(self, link: ReplicaLink) -> None:
        """The main channel of an rdb-channel replica: +RDBCHANNELSYNC <its client id>, then
        it waits (nothing is sent or held) until its rdb channel's snapshot starts."""
        manager = self.manager
        c = link.client
        link.go(L.RDB_CHANNEL)
        link.mode = "rdb-channel"
        self.side.add_replica(link)
        if len(self.side.links) == 1 and manager.backlog is None:
            manager.create_backlog()
        self.core.log.notice(f"Replica {link.name()} is capable of rdb channel synchronization, "
                             f"and partial sync isn't possible. Full sync will continue with "
                             f"dedicated rdb channel.")
        self.side.write(link, b"+RDBCHANNELSYNC %d\r\n" % c.id)

    def _full(self, link: ReplicaLink) -> None:
        """The full-sync half of syncCommand: the link waits for a snapshot (the snapshots
        join it to one running, or start one, or it waits for the next)."""
        manager = self.manager
        link.go(L.FULL)
        self.side.add_replica(link)
        if len(self.side.links) == 1 and manager.backlog is None:
            manager.create_backlog()
        self.snapshots.serve(link)
