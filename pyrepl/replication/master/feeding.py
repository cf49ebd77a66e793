"""The stream to the replicas through the shared buffer, and their output limits (master side).

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.replication import psync as psync_mod
from pyrepl.replication.backlog import Cursor
from pyrepl.replication.master.states import (
    ReplicaLink,
    S,
)

if TYPE_CHECKING:
    from pyrepl.core.client import Client


class Feeding:
    """The stream to the replicas through the shared buffer, and their output limits (master side)."""

    def stream(self, before: int, new_block: bool) -> None:
        """The backlog took new stream bytes (``before`` was ``master_repl_offset``): a
        streaming link that had been handed everything is scheduled for a write; the output
        limits are checked when a block was added, as Redis does."""
        for link in self._streaming:
            if link.ref.sent == before:  # type: ignore[union-attr]
                self.core.pending_flush.append(link.client)
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

        self.core.stats.client_outbuf_limit_disconnections += 1
        self.core.log.warning(f"Client {link.client.info_line()} scheduled to be "
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

        name = c.last_cmd.name if c.last_cmd is not None else "<unknown>"
        self.core.log.warning(f"Replica generated a reply to command '{name}', disconnecting "
                              f"it: {c.info_line()}")
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
