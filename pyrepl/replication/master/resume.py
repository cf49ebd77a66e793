"""A cut full sync that resumes, master side (a pyrepl-to-pyrepl extension, issue 40).

Negotiation. A pyrepl replica says ``REPLCONF capa pyrepl-resume`` (Redis and Valkey masters
ignore capabilities they do not know). To such a replica only, and only while
``repl-full-sync-resume-window`` is not 0, this master names its snapshot in the +FULLRESYNC
line: ``+FULLRESYNC <replid> <offset> <snapshot id>`` (40 hex digits, random per snapshot).
A Redis or Valkey replica never says the capability, so it never sees the id and every byte it
gets is the standard protocol.

What is kept (:class:`Kept`, one per snapshot that had a cut sync):

- the payload's bytes as they were sent, in a copy the I/O adapter keeps: a disk snapshot's
  file, opened when its BGSAVE ends (a later BGSAVE renaming a new file over it changes
  nothing); a diskless snapshot's RDB and mark, which its child writes to an unlinked file in
  ``dir`` from ``repl-full-sync-resume-tail`` bytes before where it was when a replica was cut
  (it holds them in memory until then: pyrepl.net.master_io's ``_Copy``), on to the end (so
  the child is not killed when its last replica goes while a cut sync of it may resume); a
  replica asking for a byte before the copy's start (``kept_base``) syncs in full;
- the stream from the snapshot offset on: the cut link's place in the shared buffer becomes the
  snapshot's hold (every replica of one snapshot needs the same bytes), limited like a
  replica's output (``client-output-buffer-limit replica``).

Both are kept ``repl-full-sync-resume-window`` seconds after the last cut, or until every sync
cut from that snapshot has resumed, then freed.

Resuming. The replica kept what it had loaded. On its new connection it sends ``REPLCONF
resume <snapshot id> <payload offset>`` (the payload bytes it has) and gets ``+OK`` when this
master still keeps that snapshot and its stream (else ``-ERR ...``, and it asks for a full sync
as usual). Its ``PSYNC`` is then answered ``+FULLRESYNC <replid> <offset> <id>`` again,
keepalives while a diskless copy is still being written, ``$RESUME:<payload offset>\\r\\n`` and
the payload from there on, then the stream from the snapshot offset: the link is online, as
after a disk transfer. The sync events say ``result`` ``resume`` (psync_decision) and the bytes
sent (fullsync_rdb_sent).

Safe against a snapshot that changed: the id is random per snapshot and the copy is the bytes
that were sent, never made again; an offset past the copy's end is refused; the replica's loader
checks the RDB's CRC64 over the whole payload, what it kept and what it gets.

A cut rdb-channel sync (Redis 8's dialect between pyrepl nodes; the rdb channel is named the
snapshot when its main connection said the capability) resumes on one connection. The
replica kept, besides the payload it parsed, the stream its main channel had buffered (from
the snapshot offset + 1 up to some offset ``m - 1``); this master kept its snapshot's copy and
a place in the buffer from the snapshot offset + 1 (or the backlog's first byte, if the main
channel's bytes were trimmed by then). The replica adds ``stream-offset <m>`` to its REPLCONF
resume (refused unless the buffer still holds ``m``); after the payload's rest the stream
goes on from ``m``, and the replica applies what it kept, then that. A Valkey dual-channel
sync never resumes (Valkey replicas do not say the capability).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyrepl.replication.backlog import Cursor
from pyrepl.replication.master.states import L, ReplicaLink, S, Snapshot
from pyrepl.replication.psync import OUTPUT_BUFFER_LIMIT
from pyrepl.replication.wire import FullResync, ResumeHeader
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.ports import ReplicationHost

RESULT = "resume"      # psync_decision's result for a resumed full sync
CUT = (S.WAIT_BGSAVE_END, S.SEND_BULK)   # the states a transfer is cut in


def new_id() -> str:
    return os.urandom(20).hex()


@dataclass(slots=True, eq=False)
class Kept:
    """A snapshot whose cut sync may resume: its copy (in the I/O adapter, by ``id``) and the
    stream from its offset on."""

    id: str
    replid: str
    offset: int                  # the snapshot offset (+FULLRESYNC's)
    mode: str                    # disk | diskless
    snapshot: Snapshot | None    # the child still writing the copy (None: the copy is whole)
    hold: Cursor | None = None   # the stream from offset + 1 on
    cut_ms: int = 0              # the last cut
    waiting: int = 0             # cut syncs of it not resumed yet
    soft_since_ms: int = -1

    @property
    def hold_from(self) -> int:
        """The first stream byte the hold keeps (-1: none)."""
        return self.hold.sent + 1 if self.hold is not None else -1


class Resumes:
    """Cut full syncs that may resume (see the module docstring)."""

    __slots__ = ("core", "manager", "side", "feeding", "kept", "awaiting")

    def __init__(self, side: MasterSide, feeding: Feeding) -> None:
        self.side = side
        self.feeding = feeding
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.kept: dict[str, Kept] = {}
        # resumed links waiting for a copy its child had not started when they came back
        self.awaiting: set[ReplicaLink] = set()

    @property
    def window_ms(self) -> int:
        return int(self.core.config.repl_full_sync_resume_window) * 1000

    # -- at fork time ---------------------------------------------------------------------------
    def resumable(self, link: ReplicaLink) -> bool:
        """A full sync of a pyrepl replica that can resume it: a classic one, or the rdb
        channel of a main connection that said the capability (Redis 8's dialect)."""
        if self.window_ms <= 0:
            return False
        main = link.main
        if main is not None:
            return main.capa_resume and not main.req
        return (link.capa_resume and not link.is_rdb_channel and not link.rdb_only
                and not link.req)

    def fullresync(self, link: ReplicaLink, snap: Snapshot) -> bytes:
        """The +FULLRESYNC line for ``link``: the snapshot's id for a replica that can resume."""
        rid = snap.resume_id if self.resumable(link) else ""
        link.resume_id = rid
        return FullResync(self.manager.ids.replid, snap.offset, rid).format()

    # -- a sync cut ----------------------------------------------------------------------------
    def keeps(self, snap: Snapshot) -> bool:
        """A cut sync may resume from ``snap``: its child must finish the copy."""
        return any(k.snapshot is snap for k in self.kept.values())

    def cut(self, link: ReplicaLink, prev: S, reason: str) -> None:
        """``link`` is being freed in ``prev`` for ``reason``: a cut transfer of a resumable
        sync keeps its snapshot and a place in the buffer (a classic link's own, taken before
        the link lets go of it; an rdb channel's from the snapshot offset, or the backlog's
        first byte). Not one dropped at the output limits: its stream cannot be held within
        them. (An rdb channel whose whole RDB was delivered is not cut: free_link does not
        ask.)"""
        rid = link.resume_id
        if (not rid or prev not in CUT or link.spill is not None
                or reason == OUTPUT_BUFFER_LIMIT):
            return
        backlog = self.manager.backlog
        if backlog is None:
            return
        k = self.kept.get(rid)
        snap = link.snapshot
        running = snap if snap is not None and snap is self.side.snapshots.current else None
        if k is None and running is None and not self._copy_whole(rid):
            return      # (a disk file whose copy was not taken: nothing to resume from)
        hold = link.ref if link.main is None else self._hold_from(link.psync_offset + 1)
        if hold is None:
            return
        if k is None:
            k = self.kept[rid] = Kept(rid, self.manager.ids.replid, link.psync_offset,
                                      link.mode, running)
        if k.hold is None or hold.sent < k.hold.sent:     # (the earliest place is kept)
            hold, k.hold = k.hold, hold
            if k.hold is link.ref:
                link.ref = None      # (the link's release leaves it alone)
        if hold is not None and hold is not link.ref:
            backlog.release(hold)    # (a place not kept; a link's own goes with the link)
        k.cut_ms = self.core.now_ms
        k.waiting += 1
        self.core.log.notice(f"Full sync of replica {link.name()} cut: snapshot {rid} and the "
                             f"stream from offset {k.hold_from} kept "
                             f"{self.window_ms // 1000} seconds for it to resume")

    def _hold_from(self, offset: int) -> Cursor | None:
        """A place in the buffer from ``offset`` on, or from its first byte if that went."""
        backlog = self.manager.backlog
        assert backlog is not None
        offset = max(offset, backlog.first_byte_offset)
        return backlog.cursor_at(offset) if backlog.can_serve(offset) else None

    def _copy_whole(self, rid: str) -> bool:
        io = self.side.io
        return io is not None and io.kept_size(rid) >= 0

    # -- the snapshot's end ---------------------------------------------------------------------
    def snapshot_done(self, snap: Snapshot, ok: bool) -> None:
        """The child ended: a disk snapshot's file becomes its copy (when a resumable link got
        its id); a kept copy is whole, or the snapshot failed and nothing resumes from it."""
        io = self.side.io
        if ok and snap.resume_id and snap.target == "disk" and io is not None:
            try:
                io.keep_file(snap.resume_id, self.core.persistence.rdb_path())
            except OSError as e:
                self.core.log.warning(f"Can't keep the snapshot for resumed syncs: {e}")
        for k in list(self.kept.values()):
            if k.snapshot is snap:
                k.snapshot = None
                if not ok or not self._copy_whole(k.id):
                    self._drop(k)

    def copy_ready(self, link: ReplicaLink, ok: bool) -> None:
        """A resumed link's copy is whole, or its child started writing it: send it (as it
        grows), or give up (the copy may start after the byte it asked for: then its replica
        resyncs in full)."""
        self.awaiting.discard(link)
        if not ok or not self._copy_holds(link.resume_id, link.resume_from, whole=False,
                                          started=True):
            self.core.log.warning(f"Resumed sync of replica {link.name()} failed: the copy of "
                                  f"snapshot {link.resume_id} does not hold byte "
                                  f"{link.resume_from}")
            self.side.close_link(link, "snapshot-failed")
            return
        self._send(link)

    def _copy_holds(self, rid: str, offset: int, whole: bool, started: bool = False) -> bool:
        """The copy kept as ``rid`` holds payload byte ``offset`` on (``whole``: it must be
        whole; ``started``: its child must have started writing it; a copy still being
        written is judged by its base only, once it has one)."""
        io = self.side.io
        if io is None or offset < 0 or rid not in io.kept_ids():
            return False
        base = io.kept_base(rid)
        size = io.kept_size(rid)
        if (whole and size < 0) or (started and base < 0):
            return False
        return (base < 0 or base <= offset) and (size < 0 or offset <= size)

    # -- the replica comes back -------------------------------------------------------------------
    def request(self, link: ReplicaLink, rid: str, offset: int, stream: int = -1) -> None:
        """REPLCONF resume <id> resume-offset <offset> [stream-offset <stream>]: this
        connection's PSYNC resumes that snapshot, the stream going on from ``stream`` (a cut
        rdb-channel sync's replica kept the bytes before it) or from the snapshot offset."""
        k = self.kept.get(rid.lower())
        if k is None or k.hold is None:
            raise ReplyError(f"ERR no snapshot {rid} to resume")
        if not self._copy_holds(k.id, offset, whole=k.snapshot is None):
            raise ReplyError(f"ERR resume offset {offset} is out of the snapshot's copy")
        wanted = stream if stream >= 0 else k.offset + 1
        if not k.hold_from <= wanted <= self.manager.master_repl_offset + 1:
            raise ReplyError(f"ERR stream offset {wanted} is not kept (from {k.hold_from})")
        link.resume = k.id
        link.resume_from = offset
        link.resume_stream = stream

    def serve(self, link: ReplicaLink) -> bool:
        """The PSYNC of a connection that asked to resume: +FULLRESYNC with the snapshot's id,
        then its copy from the offset and the stream. False: nothing to resume any more (the
        PSYNC is decided as usual)."""
        k = self.kept.get(link.resume)
        link.resume = ""
        backlog = self.manager.backlog
        if k is None or k.hold is None or backlog is None or k.replid != self.manager.ids.replid:
            link.resume_from = -1
            return False
        core = self.core
        link.sync_id = self.manager.events.new_sync_id(core.now_ms)
        link.resume_id = k.id
        link.mode = k.mode
        link.psync_offset = k.offset
        link.snapshot = k.snapshot
        link.joined_ms = core.now_ms
        link.go(L.RESUME)
        core.stats.repl_resumed_syncs += 1
        core.stats.repl_resumed_bytes += link.resume_from
        self.side.add_replica(link)
        stream, link.resume_stream = link.resume_stream, -1
        # (the hold keeps every byte from hold_from on: REPLCONF resume checked stream)
        self.feeding.feed(link, backlog.cursor_at(stream) if stream >= 0
                          else backlog.copy(k.hold))
        k.waiting -= 1
        if k.waiting <= 0:
            # every cut sync of it came back: the stream it held is the link's now (the copy
            # stays while it is sent; a cut again keeps it anew)
            self._drop(k)
        self.manager.stream_db = -1
        self.side.write(link, FullResync(k.replid, k.offset, k.id).format())
        core.log.notice(f"Full sync of replica {link.name()} resumed: snapshot {k.id} from "
                        f"byte {link.resume_from}, the stream from offset "
                        f"{stream if stream >= 0 else k.offset + 1}")
        self.side.emit("psync_decision", peer=link.name(), sync_id=link.sync_id,
                       replid=k.replid, req_replid="?", req_offset=-1, result=RESULT,
                       reason=RESULT, master_repl_offset=self.manager.master_repl_offset,
                       backlog_size=core.config.repl_backlog_size,
                       backlog_histlen=backlog.histlen, offset=link.resume_from)
        io = self.side.io
        if k.snapshot is None or (io is not None and io.kept_base(k.id) >= 0):
            self.copy_ready(link, True)   # (a copy its child still writes is sent as it grows)
        else:
            self.awaiting.add(link)       # (follow: as soon as the child starts the copy)
        return True

    def _send(self, link: ReplicaLink) -> None:
        io = self.side.io
        try:
            if io is None:
                raise OSError("no I/O adapter")
            io.set_sync_bandwidth(self.core.config.repl_sync_max_bandwidth)
            io.send_kept(link.client, link.resume_id, link.resume_from,
                         ResumeHeader(link.resume_from).format())
        except OSError as e:
            self.core.log.warning(f"Resumed sync failed: can't read the kept snapshot: {e}")
            self.side.close_link(link, "rdb-open-failed")
            return
        if io.kept_size(link.resume_id) < 0:
            self.core.log.notice(f"Sending snapshot {link.resume_id} to replica {link.name()} "
                                 f"as its child writes the copy")
        link.go(L.RDB_SAVED)

    # -- the cron -------------------------------------------------------------------------------
    def cron(self) -> None:
        """Snapshots past the window since their last cut, or whose stream is over the replica
        output limits, are freed; so are copies nothing may resume from."""
        now = self.core.now_ms
        for k in list(self.kept.values()):
            if now - k.cut_ms > self.window_ms and not self._in_use(k.id):
                self.core.log.notice(f"Snapshot {k.id} kept for a resumed sync freed (no "
                                     f"replica came back in time)")
                self._drop(k)
            elif k.hold is not None:
                over, k.soft_since_ms = self.feeding.hold_over_limits(k.hold, k.soft_since_ms)
                if over:
                    self.core.log.warning(f"Snapshot {k.id} kept for a resumed sync freed: "
                                          f"its stream is over the replica output limits")
                    self.core.stats.client_outbuf_limit_disconnections += 1
                    self._drop(k)
        io = self.side.io
        if io is not None:
            for rid in io.kept_ids():
                if rid not in self.kept and not self._in_use(rid) and not self._running(rid):
                    io.drop_kept(rid)

    def follow(self) -> None:
        """Every tick while some wait: a resumed link gets its copy as soon as the child has
        started writing it (it is then sent as it grows)."""
        io = self.side.io
        for link in list(self.awaiting):
            if link.closed or link.state is not S.WAIT_BGSAVE_END or link.snapshot is None:
                self.awaiting.discard(link)     # (gone, or its child ended: copy_ready)
            elif io is not None and io.kept_base(link.resume_id) >= 0:
                self.copy_ready(link, True)

    def _in_use(self, rid: str) -> bool:
        return any(lk.resume_id == rid and lk.state in CUT for lk in self.side.links)

    def _running(self, rid: str) -> bool:
        snap = self.side.snapshots.current
        return snap is not None and snap.resume_id == rid

    def _drop(self, k: Kept) -> None:
        if self.kept.pop(k.id, None) is None:
            return
        backlog = self.manager.backlog
        if k.hold is not None and backlog is not None:
            backlog.release(k.hold)
        k.hold = None
        io = self.side.io
        if io is not None and not self._in_use(k.id) and not self._running(k.id):
            io.drop_kept(k.id)

    def info_fields(self) -> list[tuple[str, object]]:
        """INFO replication (pyrepl's): snapshots kept for a cut sync to resume."""
        return [("resume_kept_snapshots", len(self.kept))]

    def drop_all(self) -> None:
        """The history changed (REPLICAOF, a new backlog): nothing can be resumed."""
        for k in list(self.kept.values()):
            self._drop(k)

