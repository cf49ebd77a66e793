"""The snapshot for full syncs: waiting for, joining or forking it (disk or replica sockets), a
link set up to wait for it, its outcome per replica, the disk file's transfer (master side).

One snapshot child at a time serves full syncs (:attr:`Snapshots.current`). A link that needs
one waits in ``WAIT_BGSAVE_START`` until :meth:`Snapshots.start_pending_fork` forks it (at once
for a disk target; after ``repl-diskless-sync-delay`` of idleness or
``repl-diskless-sync-max-replicas`` arrivals for a socket target), or joins a disk snapshot
already running (:meth:`Snapshots.serve`: at the place in the buffer of a replica already
waiting for it). At its end each link waiting for it is handled by its state
(``_on_done``, main channels first): a socket child's per-replica outcome decides a diskless
transfer; a disk snapshot's file is sent (``SEND_BULK``); a failed snapshot drops its replicas.
Losing a link is handled by the state it was in (``_on_lost``): the last replica of a socket
transfer kills the child (and of a disk one too when no ``save`` points are set); a bulk
transfer is cancelled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl.replication.master.dualchannel import MODE as DUAL_MODE
from pyrepl.replication.master.resume import new_id
from pyrepl.replication.master.states import (
    REQ_EXCLUDE_DATA,
    REQ_RDB_CHANNEL,
    REQ_RDB_MASK,
    L,
    LinkInput,
    ReplicaLink,
    S,
    SlaveState,
    Snapshot,
)
from pyrepl.replication.wire import EOF_MARK_LEN, BulkHeader

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.ports import MasterIOPort, ReplClient, ReplicationHost

# A child's outcome for one target: (ok, bytes written, error)
Result = tuple[bool, int, str]


class Snapshots:
    """The snapshot serving full syncs and the links waiting for it (see the module
    docstring)."""

    __slots__ = ("core", "manager", "side", "feeding", "current", "_on_done", "_on_lost")

    def __init__(self, side: MasterSide, feeding: Feeding) -> None:
        self.side = side
        self.feeding = feeding
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.current: Snapshot | None = None   # the child serving full syncs now
        # the snapshot ended: each link waiting for it, by state, in this order (main channels
        # first: online, or aborted with their rdb channel)
        self._on_done: tuple[tuple[SlaveState, Callable[[ReplicaLink, Snapshot, bool,
                                                          dict[int, Result]], None]], ...] = (
            (S.SEND_BULK_AND_STREAM, self._main_done),
            (S.WAIT_BGSAVE_END, self._target_done),
        )
        # a link was lost in this state: what its transfer leaves behind
        self._on_lost: dict[SlaveState, Callable[[ReplicaLink], None]] = {
            S.WAIT_BGSAVE_END: self._target_lost,
            S.SEND_BULK: self._bulk_lost,
        }

    @property
    def io(self) -> MasterIOPort | None:
        return self.side.io

    def waiting_start(self, req: int | None = None) -> list[ReplicaLink]:
        return [lk for lk in self.side.links if lk.waits_for_snapshot
                and (req is None or lk.req == req)]

    # -- a link needs a snapshot -----------------------------------------------------------
    def serve(self, link: ReplicaLink) -> None:
        """The full-sync half of syncCommand (the link waits in WAIT_BGSAVE_START): join the
        disk snapshot running, or wait for the next one, or start it now."""
        core = self.core
        log = core.log
        snap = self.current
        if core.rdb_child_pid != -1:
            if (snap is not None and snap.pid == core.rdb_child_pid and snap.target == "disk"
                    and not link.is_rdb_channel and self.take_turns([link])):
                donor = next((d for d in self.side.links
                              if d.waits_for(snap) and (not d.rdb_only or link.rdb_only)), None)
                if donor is not None and (link.capa_eof or not donor.capa_eof) \
                        and (link.capa_psync2 or not donor.capa_psync2) \
                        and link.req == donor.req:
                    self.setup_full_resync(link, snap, L.ATTACHED, reply=True, donor=donor)
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
            self.start_for_replication(link.capa_eof, link.req)

    def take_turns(self, links: list[ReplicaLink]) -> list[ReplicaLink]:
        """repl-full-sync-max-concurrent: the first of ``links`` that may start a snapshot
        transfer now; the others wait in ``WAIT_BGSAVE_START`` for a turn (each logged
        once), as many turns as transfers end (0: no cap)."""
        cap = self.core.config.repl_full_sync_max_concurrent
        if cap <= 0:
            return links
        busy = sum(1 for lk in self.side.links if lk.in_transfer)
        free = max(0, cap - busy)
        now = self.core.now_ms
        for lk in links[free:]:
            if not lk.queued_ms:
                lk.queued_ms = now
                self.core.log.notice(f"Replica {lk.name()} waits for a full sync turn "
                                     f"(repl-full-sync-max-concurrent {cap})")
        return links[:free]

    def setup_full_resync(self, link: ReplicaLink, snap: Snapshot, inp: LinkInput,
                          reply: bool, donor: ReplicaLink | None = None) -> None:
        """replicationSetupSlaveForFullResync: the link waits for ``snap``; SELECT again. It is
        fed from the snapshot's offset on (a disk snapshot's joiner: from where its donor is,
        copyReplicaOutputBuffer)."""
        manager = self.manager
        link.snapshot = snap
        link.psync_offset = snap.offset
        link.joined_ms = self.core.now_ms
        if link.mode != DUAL_MODE:   # (Valkey's rdb channel has its mode already)
            link.mode = ("rdb-channel" if link.main is not None
                         else "diskless" if snap.target == "socket" else "disk")
        link.go(inp)
        manager.stream_db = -1
        if not link.rdb_only:
            backlog = manager.backlog
            if donor is not None and donor.ref is not None and backlog is not None:
                self.feeding.feed(link, backlog.copy(donor.ref))
            else:
                self.feeding.feed(link)
        if reply and not link.pre_psync:
            self.side.write(link, self.side.resume.fullresync(link, snap))
        self.side.emit("fullsync_fork", peer=link.name(), sync_id=link.sync_id,
                       replid=manager.ids.replid, mode=link.mode, offset=snap.offset,
                       keys=snap.keys, reason="attached" if inp is L.ATTACHED else None,
                       queued_ms=self.core.now_ms - link.queued_ms if link.queued_ms else None,
                       max_bandwidth=self.core.config.repl_sync_max_bandwidth or None)

    def _attach_main(self, main: ReplicaLink, snap: Snapshot) -> None:
        """At fork time: the main channel streams from the snapshot offset on (SELECT first)."""
        main.snapshot = snap
        main.psync_offset = snap.offset
        main.joined_ms = self.core.now_ms
        main.go(L.SNAPSHOT_STARTED)
        self.manager.stream_db = -1
        self.feeding.start_stream(main)

    # -- forking -------------------------------------------------------------------------------
    def start_for_replication(self, capa_eof: bool, req: int) -> bool:
        """startBgsaveForReplication: fork the snapshot for the links waiting for one."""
        core = self.core
        cfg = core.config
        socket_target = bool((cfg.repl_diskless_sync or req & (REQ_RDB_MASK | REQ_RDB_CHANNEL))
                             and capa_eof)
        core.log.notice(f"Starting BGSAVE for SYNC with target: "
                        f"{'replicas sockets' if socket_target else 'disk'}"
                        f"{' (rdb-channel)' if req & REQ_RDB_CHANNEL else ''}")
        offset = self.manager.master_repl_offset
        keys = 0 if req & REQ_EXCLUDE_DATA else sum(len(db.data) for db in core.dbs)
        if self.io is not None:   # (the pace of this snapshot's transfers)
            self.io.set_sync_bandwidth(cfg.repl_sync_max_bandwidth)
        if socket_target:
            pid = self._fork_socket_snapshot(req, offset, keys)
            if pid is None:
                return False
            if pid < 0:
                self._bgsave_failed()
                return False
            return True
        ready = self.take_turns(self.waiting_start(req))
        if not ready:
            return False
        err = core.persistence.bgsave()
        if err is not None:
            self._bgsave_failed()
            return False
        resumable = self.side.resume.resumable
        snap = Snapshot(core.rdb_child_pid, "disk", offset, core.now_ms, req, keys,
                        new_id() if any(resumable(lk) for lk in ready) else "")
        self.current = snap
        for link in ready:
            self.setup_full_resync(link, snap, L.SNAPSHOT_STARTED, reply=True)
        return True

    def _fork_socket_snapshot(self, req: int, offset: int, keys: int) -> int | None:
        """rdbSaveToSlavesSockets. None: no replica could be handed over; -1: fork failed."""
        from pyrepl.rdb.encoder import encode_rdb

        core = self.core
        io = self.io
        if io is None:
            core.log.warning("Can't save in background: fork: no I/O adapter")
            return -1
        ready = [lk for lk in self.take_turns(self.waiting_start(req))
                 if (lk.main is None or lk.main.waits_for_rdb_channel)
                 and io.prepare_handover(lk.client)]
        if not ready:
            return None
        for lk in ready:
            if lk.main is not None:
                core.log.notice(f"Starting to deliver RDB and replication stream to replica: "
                                f"{lk.name()}")
        mark = os.urandom(EOF_MARK_LEN // 2).hex().encode()
        resume = self.side.resume
        rid = new_id() if any(resume.resumable(lk) for lk in ready) else ""
        snap = Snapshot(-1, "socket", offset, core.now_ms, req, keys, rid)
        eof = BulkHeader(True, mark, 0).format()
        dual = self.side.dual
        targets = [(lk.client, (dual.header(lk, offset) if lk.mode == DUAL_MODE
                                else b"" if lk.pre_psync else resume.fullresync(lk, snap))
                    + eof)
                   for lk in ready]
        dbs = [] if req & REQ_EXCLUDE_DATA else core.dbs
        aux = core.persistence.rdb_aux()
        functions = core.function_codes()
        checksum = core.config.rdbchecksum
        compress = bool(core.config.rdbcompression)
        now = core.now_ms
        key_hook = core.host.key_save_delay_hook()  # rdb-key-save-delay (tests slow it down)

        def payload() -> Any:
            return encode_rdb(dbs, aux=aux, functions=functions, checksum=checksum,
                              compress=compress,
                              now_ms=now, key_hook=key_hook)

        try:
            pid = io.start_socket_snapshot(targets, payload, mark,
                                           core.config.repl_timeout * 1000,
                                           (rid, core.config.dir,
                                            int(core.config.repl_full_sync_resume_tail))
                                           if rid else None)
        except OSError as e:
            core.log.warning(f"Can't save in background: fork: {e}")
            return -1
        core.total_forks += 1
        core.rdb_child_pid = pid
        core.rdb_child_purpose = "socket"
        core.persistence.started_ms = now
        core.persistence.last_try_ms = now
        core.log.notice(f"Background RDB transfer started by pid {pid}"
                        f"{' to replica socket' if req & REQ_RDB_CHANNEL else ''}")
        snap.pid = pid
        self.current = snap
        for link in ready:
            self.setup_full_resync(link, snap, L.SNAPSHOT_STARTED, reply=False)
            if link.main is not None:
                # the same instant: nothing was written since ``offset`` was taken
                self._attach_main(link.main, snap)
            elif link.mode == DUAL_MODE:
                dual.forked(link, offset)   # (its main connection comes back for the stream)
        return pid

    def _bgsave_failed(self) -> None:
        """The snapshot could not start: tell the waiting replicas and drop them."""
        self.core.log.warning("BGSAVE for replication failed")
        for link in self.waiting_start():
            self.side.write(link, b"-ERR BGSAVE failed, replication can't continue\r\n")
            link.client.close_after_reply = True
            self.side.free_link(link, "bgsave-failed", log_lost=False)

    def start_pending_fork(self) -> None:
        """shouldStartChildReplication + replicationStartPendingFork."""
        core = self.core
        links = self.side.links
        if core.rdb_child_pid != -1 or not links:
            return
        waiting: list[ReplicaLink] = []
        req = 0
        capa_eof = True
        max_idle = 0
        now_s = core.now_ms // 1000
        for link in links:
            if not link.waits_for_snapshot:
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
            self.start_for_replication(capa_eof, req)

    # -- the end of the child --------------------------------------------------------------
    def child_exited(self, pid: int, exitcode: int) -> None:
        """A child ended (the core did its own bookkeeping first)."""
        snap = self.current
        if snap is not None and snap.pid == pid:
            self._done(snap, exitcode)
        self.start_pending_fork()

    def check_child(self) -> None:
        """The child was killed elsewhere (FLUSHALL, SHUTDOWN): no exit will be reported."""
        snap = self.current
        if snap is not None and self.core.rdb_child_pid != snap.pid:
            self._done(snap, -10)

    def kill(self, snap: Snapshot) -> None:
        core = self.core
        if core.rdb_child_pid == snap.pid:
            core.kill_rdb_child()  # SIGUSR1 + reap: no child_exited follows
        self._done(snap, -10)

    def _done(self, snap: Snapshot, exitcode: int) -> None:
        """backgroundSaveDoneHandler + updateSlavesWaitingBgsave."""
        core = self.core
        log = core.log
        self.current = None
        results: dict[int, Result] = {}
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
        for link, at in snap.delivered:   # rdb channels closed after their whole RDB
            result = results.get(link.client.id)
            if result is not None and result[0]:
                self._rdb_sent(link, result[1], at)
        self.side.resume.snapshot_done(snap, ok)
        for state, done in self._on_done:
            for link in [lk for lk in self.side.links
                         if lk.snapshot is snap and lk.state is state]:
                done(link, snap, ok, results)

    def _main_done(self, main: ReplicaLink, snap: Snapshot, ok: bool,
                   results: dict[int, Result]) -> None:
        """A main channel streaming while its rdb channel got the RDB: online when that
        channel got all of it, else the sync is aborted."""
        rc = main.rdb_channel
        result = results.get(rc.id) if rc is not None else None
        if main.rdb_done or (result is not None and result[0]):
            if main.mode == DUAL_MODE:   # Valkey's: online at its ACK, once the RDB loaded
                main.rdb_done = True
                return
            self.side.put_online(main, L.RDB_STREAMED)
        else:
            self.core.log.warning(f"Rdb channel transfer to replica {main.name()} failed, "
                                  f"aborting the sync")
            self.side.close_link(main, "rdb-transfer-error")

    def _target_done(self, link: ReplicaLink, snap: Snapshot, ok: bool,
                     results: dict[int, Result]) -> None:
        if link.resume_from >= 0:   # a resumed sync waited for the snapshot's copy
            self.side.resume.copy_ready(link, ok)
            return
        result = results.get(link.client.id)
        if snap.target == "socket" and (ok or result is not None):
            # the child wrote to the sockets itself: its per-replica outcome decides
            self._socket_transfer_done(link, result)
        elif not ok:
            self.core.log.warning("SYNC failed. BGSAVE child returned an error")
            self.side.close_link(link, "snapshot-failed")
        else:
            self._send_file(link)

    def _socket_transfer_done(self, link: ReplicaLink, result: Result | None) -> None:
        core = self.core
        if result is None or not result[0]:
            err = result[2] if result is not None else "no result from the child"
            if err == "timeout":
                core.log.warning(f"Disconnecting timedout replica (full sync): {link.name()}")
                self.side.close_link(link, "timeout")
            else:
                core.log.warning(f"Diskless rdb transfer, write error sending DB to replica: "
                                 f"{err}")
                self.side.close_link(link, "rdb-transfer-error")
            return
        self._rdb_sent(link, result[1], core.now_ms)
        who = "replica" if link.main is not None else "slave"  # Redis 8's text / 7.0's
        core.log.notice(f"Streamed RDB transfer with replica {link.name()} succeeded (socket). "
                        f"Waiting for REPLCONF ACK from {who} to enable streaming")
        if self.side.put_online(link, L.RDB_STREAMED):
            link.stream_on_ack = True

    def _send_file(self, link: ReplicaLink) -> None:
        """Disk snapshot done: $<len>\\r\\n and the file, then the held stream."""
        core = self.core
        io = self.io
        try:
            if io is None:
                raise OSError("no I/O adapter")
            io.set_sync_bandwidth(core.config.repl_sync_max_bandwidth)
            io.send_bulk(link.client, core.persistence.rdb_path())
        except OSError as e:
            core.log.warning(f"SYNC failed. Can't open/stat DB after BGSAVE: {e}")
            self.side.close_link(link, "rdb-open-failed")
            return
        link.go(L.RDB_SAVED)

    def bulk_sent(self, c: ReplClient, ok: bool, nbytes: int, error: str = "") -> None:
        """The I/O adapter finished (or failed) sending the snapshot file."""
        link = c.repl
        if not isinstance(link, ReplicaLink) or not link.sending_bulk:
            return
        core = self.core
        core.stats.net_repl_output_bytes += nbytes
        core.stats.net_output_bytes += nbytes
        c.net_out += nbytes
        if not ok:
            core.log.warning(f"Write error sending DB to replica: {error}")
            self.side.close_link(link, "rdb-transfer-error")
            return
        self.side.emit("fullsync_rdb_sent", peer=link.name(), sync_id=link.sync_id,
                       mode=link.mode, offset=link.psync_offset, bytes=nbytes,
                       duration_ms=core.now_ms - link.joined_ms,
                       max_bandwidth=core.config.repl_sync_max_bandwidth or None)
        if self.side.put_online(link, L.BULK_SENT):
            self.feeding.start_stream(link)

    def _rdb_sent(self, link: ReplicaLink, nbytes: int, done_ms: int) -> None:
        """The child wrote the whole payload to ``link`` (by ``done_ms``): counted, and its
        fullsync_rdb_sent event."""
        core = self.core
        core.stats.net_repl_output_bytes += nbytes
        core.stats.net_output_bytes += nbytes
        link.client.net_out += nbytes
        self.side.emit("fullsync_rdb_sent", peer=link.name(), sync_id=link.sync_id,
                       mode=link.mode, offset=link.psync_offset, bytes=nbytes,
                       duration_ms=done_ms - link.joined_ms,
                       max_bandwidth=core.config.repl_sync_max_bandwidth or None)

    # -- a link lost -----------------------------------------------------------------------
    def rdb_delivered(self, link: ReplicaLink, prev: SlaveState) -> bool:
        """An rdb channel lost (in ``prev``) after the child wrote its whole RDB (the replica
        closes it after the mark): the normal end, nothing to abort. Its bytes and event come
        with the child's end (``delivered``)."""
        snap = link.snapshot
        io = self.io
        ok = (prev is S.WAIT_BGSAVE_END and link.is_rdb_channel and snap is not None
              and snap is self.current and snap.target == "socket" and io is not None
              and io.socket_target_done(snap.pid, link.client.id))
        if ok and snap is not None:
            snap.delivered.append((link, self.core.now_ms))
        return ok

    def link_lost(self, link: ReplicaLink, prev: SlaveState) -> None:
        """A link was freed in state ``prev`` (not an rdb channel whose RDB was delivered):
        what its transfer leaves behind (``_on_lost``)."""
        lost = self._on_lost.get(prev)
        if lost is not None:
            lost(link)

    def _target_lost(self, link: ReplicaLink) -> None:
        """A snapshot's target lost: the child stops with its last one (a disk child too when
        no ``save`` points need its file)."""
        snap = link.snapshot
        if snap is None or snap is not self.current:
            return
        others = any(lk.waits_for(snap) for lk in self.side.links)
        if snap.target == "socket":
            io = self.io
            if io is not None:
                io.drop_socket_target(link.client)
            if not others and not self.side.resume.keeps(snap):
                self.core.log.warning("Diskless rdb transfer, last replica dropped, killing "
                                      "fork child.")
                self.kill(snap)
        elif not others and not self.core.config.save and not self.side.resume.keeps(snap):
            self.kill(snap)

    def _bulk_lost(self, link: ReplicaLink) -> None:
        io = self.io
        if io is not None:
            io.cancel_bulk(link.client)
