"""The master side: replica links, full and partial syncs, streaming, acks, WAIT, limits
(master side).

Theory of operation
-------------------
:class:`MasterSide` is Redis 7.0.15's ``replication.c`` "MASTER" half as a sans-io state machine.
It never touches a socket or a process: the I/O adapter ``core.host.master_io``
(:class:`pyrepl.net.master_io.MasterIO`) forks the diskless snapshot child that writes straight to
the replica sockets, streams a disk snapshot file, and reports transport buffer sizes; the disk
snapshot itself is the core's ``BGSAVE`` (``core.persistence.bgsave``). Time comes from ``core.now_ms``.

The side keeps the links themselves (:meth:`MasterSide.link_for`, their end, the cron, INFO) and
is composed of one object per phase, each built with the collaborators it calls (the side, for
the links, and the phases before it), each the one owner of its state:

``feeding``    (:class:`~.feeding.Feeding`) the links' places in the shared buffer, their
               streams to the sockets, their output limits
``snapshots``  (:class:`~.snapshot.Snapshots`) the snapshot child serving full syncs, the links
               waiting for it, its outcome per replica, the disk file's transfer
``acks``       (:class:`~.acks.Acks`) REPLCONF, ACKs, WAIT and min-replicas
``dual``       (:class:`~.dualchannel.DualChannel`) Valkey's dual channel: the offer, the
               rdb channel's ``$ENDOFF:``, the stream held for its main connection
``resume``     (:class:`~.resume.Resumes`) cut full syncs of pyrepl replicas that may resume:
               the snapshot's copy and the stream kept, REPLCONF resume, the resumed transfer
``sync``       (:class:`~.sync.Sync`) PSYNC and SYNC: the decision, a partial resync, a full
               sync handed to ``snapshots``, an rdb channel's main connection

A link's state moves only through the table of ``states`` (:meth:`ReplicaLink.go`), whose
guards the phases ask by name; where the work depends on a link's state, a state -> handler
mapping chooses it (the cron's timeouts here, ``Snapshots``' end of a child and lost link,
``Acks``' ACK). The commands' entry points (``sync_command``, ``replconf_command``,
``wait_command``) and the I/O shell's (``bulk_sent``, ``child_exited``) stay here, handed to
their phase.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl.replication.backlog import TRIM_BLOCKS_PER_CALL
from pyrepl.replication.master.acks import Acks
from pyrepl.replication.master.dualchannel import DualChannel
from pyrepl.replication.master.feeding import Feeding
from pyrepl.replication.master.resume import Resumes
from pyrepl.replication.master.snapshot import Snapshots
from pyrepl.replication.master.states import (
    INFO_STATE,
    NEEDS_RDB_CHANNEL,
    PING_ARGV,
    RDB_CHANNEL_OVER,
    ROLE,
    L,
    LinkInput,
    ReplicaLink,
    S,
    SlaveState,
)
from pyrepl.replication.master.sync import Sync
from pyrepl.replication.wire import CRON_MS

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.ports import MasterIOPort, ReplClient, ReplicationHost


class MasterSide:
    """The master half of replication (see the module docstring)."""

    # ``feeding`` is read at its offset by a write's feed in C (pyrepl/replication/_feed.c)
    __slots__ = ("manager", "core", "links", "cron_loops", "_last_cron_ms", "_timeouts",
                 "feeding", "dual", "snapshots", "acks", "sync", "resume")

    def __init__(self, manager: Replication) -> None:
        self.manager = manager
        self.core: ReplicationHost = manager.core
        self.links: list[ReplicaLink] = []   # the replica connections (PSYNC / SYNC sent)
        self.cron_loops = 0
        self._last_cron_ms: int | None = None
        # the cron's timeout of a link, by state: the reason logged, or "" (not timed out)
        self._timeouts: dict[SlaveState, Callable[[ReplicaLink, int, int], str]] = {
            S.ONLINE: self._stream_timed_out,
            S.WAIT_RDB_CHANNEL: self._rdb_channel_timed_out,
        }
        self.feeding = Feeding(self)
        self.dual = DualChannel(self, self.feeding)
        self.resume = Resumes(self, self.feeding)
        self.snapshots = Snapshots(self, self.feeding)
        self.acks = Acks(self, self.feeding, self.snapshots)
        self.sync = Sync(self, self.feeding, self.snapshots, self.acks)

    # -- entry points: commands and the I/O shell ------------------------------------------
    def sync_command(self, c: ReplClient, argv: list[bytes]) -> object:
        return self.sync.command(c, argv)

    def replconf_command(self, c: ReplClient, argv: list[bytes]) -> object:
        return self.acks.replconf_command(c, argv)

    def wait_command(self, c: ReplClient, argv: list[bytes]) -> object:
        return self.acks.wait_command(c, argv)

    def child_exited(self, pid: int, exitcode: int) -> None:
        self.snapshots.child_exited(pid, exitcode)

    def bulk_sent(self, c: ReplClient, ok: bool, nbytes: int, error: str = "") -> None:
        self.snapshots.bulk_sent(c, ok, nbytes, error)

    def enough_good_replicas(self) -> bool:
        return self.acks.enough_good_replicas()

    def good_replicas_count(self) -> int:
        return self.acks.good_replicas_count()

    # -- what the phases share --------------------------------------------------------------
    @property
    def io(self) -> MasterIOPort | None:
        return self.core.host.master_io

    def emit(self, event: str, **fields: Any) -> None:
        self.manager.events.emit(self.core.now_ms, event, ROLE, **fields)

    def schedule(self, c: ReplClient) -> None:
        self.core.pending_flush.append(c)

    def write(self, link: ReplicaLink, data: bytes) -> None:
        """Out-of-band bytes for the replica now (replies, keepalives), counted as repl output."""
        c = link.client
        c.out.append(data)
        self.core.stats.net_repl_output_bytes += len(data)
        self.schedule(c)

    def buffered(self, c: ReplClient) -> int:
        io = self.io
        return io.buffered(c) if io is not None else 0

    def stream_started(self, c: ReplClient) -> None:
        io = self.io
        if io is not None:
            io.stream_started(c)

    # -- the links ---------------------------------------------------------------------------
    def link_for(self, c: ReplClient) -> ReplicaLink:
        """The client's link (created by its first REPLCONF or by PSYNC)."""
        link = c.repl
        if isinstance(link, ReplicaLink):
            return link
        link = ReplicaLink(c)
        c.repl = link
        return link

    def add_replica(self, link: ReplicaLink) -> None:
        """The connection becomes a replica (its PSYNC / SYNC was taken)."""
        link.client.kind = "replica"
        link.set_flags()
        self.links.append(link)

    def put_online(self, link: ReplicaLink, inp: LinkInput) -> bool:
        """replicaPutOnline. False: an rdb-only replica, closed now."""
        core = self.core
        if link.rdb_only:
            link.go(L.RDB_ONLY_DONE)
            core.log.notice(f"RDB transfer completed, rdb only replica ({link.name()}) should "
                            f"be disconnected asap")
            self.close_link(link, "rdb-only-done")
            return False
        link.go(inp)
        link.ack_ms = core.now_ms
        self.acks.refresh_good_replicas()
        core.log.notice(f"Synchronization with replica {link.name()} succeeded")
        self.emit("replica_online", peer=link.name(), sync_id=link.sync_id,
                  replid=self.manager.ids.replid, mode=link.mode, offset=link.psync_offset,
                  duration_ms=core.now_ms - link.sync_start_ms,
                  buffer_peak=max(link.buffer_peak, self.feeding.pending_bytes(link)),
                  spilled=link.spill.written if link.spill is not None else None)
        return True

    def close_link(self, link: ReplicaLink, reason: str) -> None:
        """Drop a replica now (freeClient): our bookkeeping first, then the connection."""
        if link.closed:
            return
        link.close_reason = reason
        self.free_link(link, reason)
        self.core.host.close_client(link.client)

    def client_closed(self, c: ReplClient) -> None:
        link = c.repl
        if not isinstance(link, ReplicaLink):
            return
        if link.replconf_only:   # not a replica (not in self.links)
            link.go(L.CLOSED)
            main = link.main
            if main is not None and main.waits_for_rdb_channel:
                # the rdb channel went away before its PSYNC: the replica gave up this sync
                self.close_link(main, "rdb-channel-lost")
            return
        self.free_link(link, link.close_reason or "closed")

    def free_link(self, link: ReplicaLink, reason: str, log_lost: bool = True) -> None:
        if link.closed:
            return
        core = self.core
        prev = link.state
        link.go(L.CLOSED)
        if link in self.links:
            self.links.remove(link)
        delivered = self.snapshots.rdb_delivered(link, prev)
        if not delivered:   # (a cut sync that may resume keeps its place)
            self.resume.cut(link, prev, reason)
        peak = max(link.buffer_peak, self.feeding.unfeed(link))
        main = link.main
        if log_lost:
            kind = "replica (rdbchannel)" if link.is_rdb_channel else "replica"
            core.log.warning(f"Connection with {kind} {link.name()} lost.")
        was_online = prev is S.ONLINE
        rdb_over = link.is_rdb_channel and (delivered or prev is S.RDB_TRANSMITTED)
        if link.is_rdb_channel and main is None:   # Valkey's, its main connection not back
            self.dual.rdb_channel_closed(link, rdb_over)
        # an rdb channel is not a replica of its own: its main reports (a Valkey rdb channel
        # whose main connection is not back reports a failed transfer)
        if main is None and not rdb_over:
            self.emit("replica_lost", peer=link.name(), sync_id=link.sync_id, reason=reason,
                      offset=link.ack_off,
                      lag_bytes=self.manager.master_repl_offset - link.ack_off
                      if was_online else None,
                      buffer_peak=peak, buffer_limit=self.feeding.hard_limit or None,
                      lag_ms=core.now_ms - link.ack_ms if was_online else None)
        if not self.links:
            self.manager.no_replicas_since_ms = core.now_ms
        self.acks.refresh_good_replicas()
        if main is not None and main.state in NEEDS_RDB_CHANNEL:
            if (delivered or main.rdb_done) and main.streams_during_rdb:
                main.rdb_done = True
            else:
                self.close_link(main, "rdb-channel-lost" if reason == "closed" else reason)
        if not delivered:
            self.snapshots.link_lost(link, prev)
        rc = link.rdb_channel
        if rc is not None and isinstance(rc.repl, ReplicaLink) \
                and rc.repl.state not in RDB_CHANNEL_OVER:
            self._close_rdb_channel(rc.repl)

    def _close_rdb_channel(self, rdb: ReplicaLink) -> None:
        """The main channel is gone (or its sync failed): its rdb channel goes too."""
        if rdb.replconf_only:  # no PSYNC yet: not a replica connection
            rdb.go(L.CLOSED)
            self.core.host.close_client(rdb.client)
            return
        self.close_link(rdb, "main-channel-lost")

    def replica_replied(self, c: ReplClient) -> None:
        """A command of a streaming replica produced a reply (Redis's
        logInvalidUseAndFreeClientAsync): it would interleave with the stream, so the replica
        is dropped."""
        name = c.last_cmd.name if c.last_cmd is not None else "<unknown>"
        self.core.log.warning(f"Replica generated a reply to command '{name}', disconnecting "
                              f"it: {c.info_line()}")
        if isinstance(c.repl, ReplicaLink):
            self.close_link(c.repl, "invalid-use")

    def disconnect_replicas(self) -> None:
        """disconnectSlaves: REPLICAOF / promotion changes the history."""
        for link in list(self.links):
            self.close_link(link, "replicaof")
        self.dual.drop_all()
        self.resume.drop_all()

    def sync_bandwidth_changed(self) -> None:
        """CONFIG SET repl-sync-max-bandwidth: the transfers under way follow it too."""
        io = self.io
        if io is not None:
            io.set_sync_bandwidth(self.core.config.repl_sync_max_bandwidth)

    # -- the cron ------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        feeding = self.feeding
        if feeding.refresh_limits() and self.links:  # CONFIG SET: judge all by the new limits
            feeding.enforce_limits(self.links)
        backlog = self.manager.backlog
        if backlog is not None:   # beforeSleep: free what nobody references, faster than feeds
            backlog.trim(10 * TRIM_BLOCKS_PER_CALL)
        self.snapshots.check_child()
        if self.resume.awaiting:
            self.resume.follow()
        if self._last_cron_ms is None or now_ms - self._last_cron_ms >= CRON_MS:
            self._last_cron_ms = now_ms
            self._cron(now_ms)
        self.snapshots.start_pending_fork()
        if self.acks.waiters:
            self.acks.forget_answered()

    def _cron(self, now_ms: int) -> None:
        """The master half of replicationCron (once a second)."""
        manager = self.manager
        cfg = self.core.config
        period = max(1, cfg.repl_ping_replica_period)
        if self.links and self.cron_loops % period == 0:
            manager.feed(manager.stream_db, PING_ARGV)
            for link in self.links:
                if link.online:
                    self.emit("replica_lag", peer=link.name(), sync_id=link.sync_id,
                              offset=link.ack_off,
                              lag_bytes=manager.master_repl_offset - link.ack_off,
                              lag_ms=now_ms - link.ack_ms)
        for link in self.links:
            if link.wants_keepalive():
                c = link.client
                c.out.append(b"\n")
                self.schedule(c)
        timeout_s = cfg.repl_timeout
        now_s = now_ms // 1000
        for link in list(self.links):
            timed_out = self._timeouts.get(link.state)
            why = timed_out(link, now_s, timeout_s) if timed_out is not None else ""
            if why:
                self.core.log.warning(f"Disconnecting timedout replica ({why}): {link.name()}")
                self.close_link(link, "timeout")
        # clientsCron: every replica's limits, once a second (feeds check only on a new block),
        # after what a full sync spills (repl-full-sync-spill-threshold)
        if cfg.repl_full_sync_spill_threshold:
            self.feeding.spill_over(self.links)
        self.feeding.enforce_limits(self.links)
        if self.dual.holds:
            self.dual.cron()
        self.resume.cron()
        self.acks.refresh_good_replicas()
        self.cron_loops += 1

    @staticmethod
    def _stream_timed_out(link: ReplicaLink, now_s: int, timeout_s: int) -> str:
        if not link.pre_psync and now_s - link.ack_ms // 1000 > timeout_s:
            return "streaming sync"
        return ""

    @staticmethod
    def _rdb_channel_timed_out(link: ReplicaLink, now_s: int, timeout_s: int) -> str:
        """A main channel whose rdb channel never came (or went before its PSYNC)."""
        rc = link.rdb_channel
        if (rc is None or rc.closed) and now_s - link.sync_start_ms // 1000 > timeout_s:
            return "no rdb channel"
        return ""

    # -- INFO -----------------------------------------------------------------------------------
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
            lag = now_s - link.ack_ms // 1000 if link.online else 0
            out.append((f"slave{i}", f"ip={link.peer_ip()},port={link.listening_port},"
                                     f"state={state},offset={link.ack_off},lag={lag}"))
            i += 1
        return out
