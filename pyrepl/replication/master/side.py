"""The master side: replica links, full and partial syncs, streaming, acks, WAIT, limits
(master side).

Theory of operation
-------------------
:class:`MasterSide` is Redis 7.0.15's ``replication.c`` "MASTER" half as a sans-io state machine.
It never touches a socket or a process: the I/O adapter ``core.host.master_io``
(:class:`pyrepl.net.master_io.MasterIO`) forks the diskless snapshot child that writes straight to
the replica sockets, streams a disk snapshot file, and reports transport buffer sizes; the disk
snapshot itself is the core's ``BGSAVE`` (``core.persistence.bgsave``). Time comes from ``core.now_ms``.

The side is one object whose methods are grouped by what they do in the modules of this package:
``states`` (a link's states, table and record), ``sync`` (PSYNC/SYNC), ``snapshot`` (fork and
transfer), ``limits`` (feeding the replicas, output limits), ``acks`` (REPLCONF, WAIT,
min-replicas); this module keeps the links themselves: their end, the cron and INFO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyrepl.replication.backlog import TRIM_BLOCKS_PER_CALL
from pyrepl.replication.master.acks import Acks
from pyrepl.replication.master.feeding import Feeding
from pyrepl.replication.master.snapshot import Snapshots
from pyrepl.replication.master.states import (
    INFO_STATE,
    PING_ARGV,
    ROLE,
    L,
    ReplicaLink,
    S,
    Snapshot,
)
from pyrepl.replication.master.sync import Sync
from pyrepl.replication.wire import CRON_MS

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.ports import MasterIOPort


class MasterSide(Sync, Snapshots, Feeding, Acks):
    """The master half of replication (see the module docstring)."""

    # (read at their offsets by a write's feed in C: pyrepl/replication/_feed.c)
    __slots__ = ("core", "_streaming")

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

    @property
    def io(self) -> MasterIOPort:
        return self.core.host.master_io  # type: ignore[return-value]  (set with the side)

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
