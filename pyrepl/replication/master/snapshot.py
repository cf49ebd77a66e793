"""The snapshot for full syncs: forking it (disk or replica sockets), its outcome per replica, the disk file's transfer, a replica put online (master side).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pyrepl.replication.master.states import (
    REQ_EXCLUDE_DATA,
    REQ_RDB_CHANNEL,
    REQ_RDB_MASK,
    L,
    LinkInput,
    ReplicaLink,
    S,
    Snapshot,
)
from pyrepl.replication.wire import EOF_MARK_LEN, BulkHeader, FullResync

if TYPE_CHECKING:
    from pyrepl.core.client import Client


class Snapshots:
    """The snapshot for full syncs: forking it (disk or replica sockets), its outcome per replica, the disk file's transfer, a replica put online (master side)."""

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
        err = core.persistence.bgsave()
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
        head = FullResync(self.manager.ids.replid, offset).format()
        eof = BulkHeader(True, mark, 0).format()
        targets = [(lk.client, (b"" if lk.pre_psync else head) + eof)
                   for lk in ready]
        dbs = [] if req & REQ_EXCLUDE_DATA else core.dbs
        aux = core.persistence.rdb_aux()
        functions = core.function_codes()
        checksum = core.config.rdbchecksum
        now = core.now_ms
        key_hook = core.host.key_save_delay_hook()  # rdb-key-save-delay (tests slow it down)

        def payload() -> Any:
            return encode_rdb(dbs, aux=aux, functions=functions, checksum=checksum,
                              now_ms=now, key_hook=key_hook)

        try:
            pid = io.start_socket_snapshot(targets, payload, mark,
                                           core.config.repl_timeout * 1000)
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
            io.send_bulk(link.client, core.persistence.rdb_path())
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
