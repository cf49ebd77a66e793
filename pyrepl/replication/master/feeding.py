"""The stream to the replicas through the shared buffer, and their output limits (master side).

The stream: every byte the manager appends to the replication stream goes once into the shared
buffer (:mod:`pyrepl.replication.backlog`, Redis 7's replication buffer). A link that is fed has
a place in it (``ref``, a cursor), from the snapshot offset on for a full sync (set at the next
byte appended after the fork, as Redis) or from the PSYNC offset for ``+CONTINUE``; a link that
waits for its bulk transfer or (diskless) its first ``REPLCONF ACK`` just keeps its place, and
the buffer keeps every byte from there. A *streaming* link's bytes are handed to its socket by
the I/O shell (:meth:`Feeding.take`, views of the blocks; once per event-loop pass, and only
while the transport is below its high-water mark): :meth:`Feeding.stream` only schedules a link
that had been handed everything. A full sync sets ``manager.stream_db = -1`` so the next command
re-emits ``SELECT``. So a replica gets exactly the bytes ``(snapshot offset, ...]``: nothing
lost, nothing doubled, and N replicas cost no copies.

Output limits (``client-output-buffer-limit replica``; hard limit at least ``repl-backlog-size``,
as Redis): a replica's usage is Redis's getClientOutputBufferMemoryUsage, its part of the shared
buffer from its block to the end, plus what this process still holds for its socket (unsent
replies, the transport's buffer). As Redis, the limits are checked when a block is added (about
every 16 KiB of stream, not per write) and once a second in the cron. A replica over the hard
limit, or over the soft limit for longer than its seconds, is disconnected, logged, counted in
``client_output_buffer_limit_disconnections`` and reported as ``replica_lost`` with reason
``output-buffer-limit``.

Spill (pyrepl's ``repl-full-sync-spill-threshold``): a replica in a full sync (waiting for its
snapshot's end, its file being sent, its first ACK, or streaming while its rdb channel loads)
whose part of the buffer passes the threshold has that part moved to its own file in ``dir``
(:class:`~pyrepl.replication.spill.SpillFile`, ``link.spill``) and its cursor moved to the
buffer's end, so the buffer can trim behind it and its usage, which the limits judge, starts
again from zero: the limits never end a full sync, and the master's memory stays near the
backlog plus the threshold per replica. Its socket then gets the file first, then the cursor's
bytes (:meth:`Feeding.take`): the same bytes, in order, at the same offsets. While the file is
not drained the link keeps spilling (the newer bytes go after the older ones); once drained,
the file is closed and the link is an ordinary one. The checks are the limits': when a block
is added and once a second. A file that fails (a full disk) drops the replica (reason
``spill-error``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyrepl.replication import psync as psync_mod
from pyrepl.replication.backlog import Backlog, Cursor
from pyrepl.replication.master.states import ReplicaLink, S
from pyrepl.replication.spill import SpillFile

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.ports import ReplClient, ReplicationHost


# A link in a full sync: its pending stream may spill (an online link waiting for its first
# ACK, and one whose file is not drained yet, too: Feeding.spill_over).
SPILL_STATES = frozenset({S.WAIT_BGSAVE_END, S.SEND_BULK, S.SEND_BULK_AND_STREAM})


class Feeding:
    """The links' places in the shared buffer, their streams to the sockets, their output
    limits (see the module docstring)."""

    # ``core`` and ``streaming`` are read at their offsets by a write's feed in C
    # (pyrepl/replication/_feed.c)
    __slots__ = ("core", "streaming", "manager", "side", "fed", "hard_limit", "soft_limit",
                 "soft_seconds", "closing")

    def __init__(self, side: MasterSide) -> None:
        self.side = side
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.fed: list[ReplicaLink] = []        # links with a place in the buffer
        self.streaming: list[ReplicaLink] = []  # ... of which these are written to sockets
        # Clients of links dropped while their transports still held stream bytes: the event
        # loop lets those go a pass or so after the close (Redis frees them at once), so they
        # count as the replicas' memory until then (unshared_bytes)
        self.closing: list[ReplClient] = []
        # client-output-buffer-limit replica (refresh_limits)
        self.hard_limit = 0
        self.soft_limit = 0
        self.soft_seconds = 0
        self.refresh_limits()

    def _backlog(self) -> Backlog:
        backlog = self.manager.backlog
        assert backlog is not None, "a replica link always has a backlog"
        return backlog

    # -- the stream ---------------------------------------------------------------------------
    def stream(self, before: int, new_block: bool) -> None:
        """The backlog took new stream bytes (``before`` was ``master_repl_offset``): a
        streaming link that had been handed everything is scheduled for a write; the output
        limits are checked when a block was added, as Redis does."""
        for link in self.streaming:   # (a streaming link has a ref)
            if link.ref.sent == before:  # type: ignore[union-attr]
                self.core.pending_flush.append(link.client)
        if new_block and self.fed:
            if self.core.config.repl_full_sync_spill_threshold:
                self.spill_over(self.fed)
            self.enforce_limits(self.fed)

    def take(self, link: ReplicaLink, limit: int = 1 << 16) -> list[memoryview]:
        """Up to ``limit`` bytes of the stream for a streaming link's socket (the I/O shell
        writes them; views of the shared buffer, nothing copied)."""
        spill = link.spill
        if spill is not None:
            if spill.pending:   # (the spilled bytes are older than the cursor's)
                return self._take_spilled(link, spill, limit)
            if link.state is S.ONLINE and not link.stream_on_ack:
                self._close_spill(link)   # drained, the sync is over: an ordinary link again
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

    # -- spill -----------------------------------------------------------------------------
    def spill_over(self, links: Iterable[ReplicaLink]) -> None:
        """Each link in a full sync whose part of the buffer passed the threshold: that part
        to its file, its cursor to the end (see the module docstring)."""
        threshold = self.core.config.repl_full_sync_spill_threshold
        backlog = self.manager.backlog
        if not threshold or backlog is None:
            return
        for link in list(links):
            ref = link.ref
            if ref is None or not (link.spill is not None or link.state in SPILL_STATES
                                   or link.stream_on_ack):
                continue
            if backlog.usage(ref) <= threshold:
                continue
            spill = link.spill
            try:
                if spill is None:
                    spill = link.spill = SpillFile(self.core.config.dir, "replica")
                    self.core.log.notice(f"Replica {link.name()}'s pending stream passed "
                                         f"repl-full-sync-spill-threshold ({threshold} bytes): "
                                         f"spilling it to disk")
                pending = backlog.pending(ref)
                for view in backlog.take(ref, pending):
                    spill.append(view)
            except OSError as e:
                self.core.log.warning(f"Replica {link.name()}: spill file: {e.strerror or e}")
                self.side.close_link(link, "spill-error")
                continue
            self.core.stats.repl_spilled_bytes += pending
            backlog.trim()

    def _take_spilled(self, link: ReplicaLink, spill: SpillFile, limit: int) -> list[memoryview]:
        try:
            data = spill.read(limit)
        except OSError as e:
            self.core.log.warning(f"Replica {link.name()}: spill file: {e.strerror or e}")
            self.side.close_link(link, "spill-error")
            return []
        self.core.stats.net_repl_output_bytes += len(data)
        link.client.net_out += len(data)
        return [memoryview(data)]

    def _close_spill(self, link: ReplicaLink) -> None:
        spill = link.spill
        if spill is not None:
            link.spill = None
            spill.close()

    def feed(self, link: ReplicaLink, ref: Cursor | None = None) -> None:
        """The link gets a place in the buffer: ``ref``, or the next byte appended (its
        snapshot starts now). It is not written to its socket until :meth:`start_stream`."""
        backlog = self._backlog()
        if link.ref is not None:
            backlog.release(link.ref)
        link.ref = ref if ref is not None else backlog.cursor_next()
        link.streaming = False
        if link not in self.fed:
            self.fed.append(link)

    def start_stream(self, link: ReplicaLink) -> None:
        """replicaStartCommandStream: the link's bytes go to its socket from now on."""
        link.stream_on_ack = False
        if link.ref is None:
            self.feed(link)
        link.streaming = True
        link.client.stream = link
        self.streaming.append(link)
        self.side.stream_started(link.client)
        ref = link.ref
        if ref is not None and self._backlog().pending(ref):
            self.side.schedule(link.client)
        if self.over_limits(link):
            self.output_limit_reached(link)

    def unfeed(self, link: ReplicaLink) -> int:
        """The link leaves the buffer (freeReplicaReferencedReplBuffer); its last usage."""
        used = 0
        if link.streaming:
            self.streaming.remove(link)
            link.streaming = False
            link.client.stream = None
            buffered = self.side.buffered
            if buffered(link.client):   # (the list pruned here too: never more than it holds)
                self.closing = [c for c in self.closing if buffered(c)] + [link.client]
        if link in self.fed:
            self.fed.remove(link)
        self._close_spill(link)
        backlog = self.manager.backlog
        if link.ref is not None and backlog is not None:
            used = backlog.usage(link.ref)
            backlog.release(link.ref)
        link.ref = None
        return used

    # -- output limits -------------------------------------------------------------------------
    def refresh_limits(self) -> bool:
        """Read client-output-buffer-limit replica; True when it changed."""
        cfg = self.core.config
        hard, soft, secs = cfg.client_output_buffer_limit.get("replica", (0, 0, 0))
        if hard and hard < cfg.repl_backlog_size:
            hard = cfg.repl_backlog_size  # Redis: a replica limit below the backlog is raised
        if (hard, soft, secs) == (self.hard_limit, self.soft_limit, self.soft_seconds):
            return False
        self.hard_limit, self.soft_limit, self.soft_seconds = hard, soft, secs
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
            used += self.side.buffered(c)
        return used

    def unshared_bytes(self) -> int:
        """What this process holds for its replicas outside the shared buffer: replies not
        yet handed to a transport and the transports' own buffers (with the shared buffer's
        part beyond the backlog, what Redis's maxmemory does not count)."""
        total = 0
        for link in self.side.links:
            c = link.client
            if c.out:
                total += c.pending_output()
            if link.streaming:
                total += self.side.buffered(c)
        if self.closing:
            held = [(c, self.side.buffered(c)) for c in self.closing]
            self.closing = [c for c, n in held if n]
            total += sum(n for _, n in held)
        return total

    def over_limits(self, link: ReplicaLink) -> bool:
        """checkClientOutputBufferLimits for a replica. True: disconnect it."""
        used = self.pending_bytes(link)
        if used > link.buffer_peak:
            link.buffer_peak = used
        over, link.soft_since_ms = self.limits_reached(used, link.soft_since_ms)
        return over

    def limits_reached(self, used: int, soft_since_ms: int) -> tuple[bool, int]:
        """The replica class's limits for ``used`` bytes: (over them, when the soft limit
        was first passed, -1 while under it) (also a dual-channel hold's, which keeps the
        stream for a replica: DualChannel)."""
        if self.hard_limit and used >= self.hard_limit:
            return True, soft_since_ms
        if self.soft_limit and used >= self.soft_limit:
            now = self.core.now_ms
            if soft_since_ms < 0:
                return False, now
            return now // 1000 - soft_since_ms // 1000 > self.soft_seconds, soft_since_ms
        return False, -1

    def hold_over_limits(self, hold: Cursor, soft_since_ms: int) -> tuple[bool, int]:
        """limits_reached for the stream a ``hold`` keeps for a replica that is not linked
        (a dual-channel main connection not back yet, a cut sync that may resume)."""
        backlog = self.manager.backlog
        if backlog is None:
            return False, soft_since_ms
        return self.limits_reached(backlog.usage(hold), soft_since_ms)

    def enforce_limits(self, links: Iterable[ReplicaLink]) -> None:
        """Every link of ``links`` over its limits is disconnected (all judged first)."""
        over = [lk for lk in links if self.over_limits(lk)]
        for link in over:
            self.output_limit_reached(link)

    def output_limit_reached(self, link: ReplicaLink) -> None:
        if link.closed:
            return
        self.core.stats.client_outbuf_limit_disconnections += 1
        self.core.log.warning(f"Client {link.client.info_line()} scheduled to be "
                              f"closed ASAP for overcoming of output buffer limits.")
        self.side.close_link(link, psync_mod.OUTPUT_BUFFER_LIMIT)
