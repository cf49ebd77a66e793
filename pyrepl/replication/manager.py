"""The replication layer as the core sees it: ids, offset, backlog, and the two sides.

Theory of operation: one :class:`Replication` per server, attached as ``core.replication``.
It owns what both sides share — the replication ids (:mod:`ids`), ``master_repl_offset`` and
the :class:`~pyrepl.replication.backlog.Backlog` — and delegates the rest:

* :class:`~pyrepl.replication.master.MasterSide` (``self.master``) serves replicas: PSYNC,
  full syncs, streaming, acks, WAIT, limits. Every write the core propagates arrives at
  :meth:`feed` and goes to the backlog and the replica links.
* :class:`~pyrepl.replication.replica.ReplicaSide` (``self.replica``) follows a master when
  ``replicaof`` is set. Bytes it applies from its master are passed on verbatim with
  :meth:`feed_raw`, so sub-replicas see the same ids and offsets (chains).

``master_repl_offset`` (Redis's ``server.master_repl_offset``) is kept here, once: it counts
every byte of the replication stream of ``replid``, and every feed moves it with the bytes it
appends to the backlog. The backlog keeps only its own two numbers, the offset of its first
byte and ``histlen`` (:mod:`pyrepl.replication.backlog`, where the buffer's logic lives: blocks,
cursors, trimming, resizing, where a run of writes is cut into appends, its memory). Invariant:
when a backlog exists, ``backlog.first_byte_offset + backlog.histlen - 1 ==
master_repl_offset``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pyrepl import native
from pyrepl.events import SyncEventLog
from pyrepl.replication.backlog import Backlog
from pyrepl.replication.failover import Failover
from pyrepl.replication.ids import ReplIds
from pyrepl.resp.writer import encode_command

_feed = native.load("pyrepl.replication._feed")


def _no_common_case(*_args: object) -> bool:
    """As plain Python (pyrepl/native.py) no write is fed in C: False, the Python feeds it."""
    return False

if TYPE_CHECKING:
    from pyrepl.replication.ports import ReplClient, ReplCommand, ReplicationHost

READONLY_ERR = "READONLY You can't write against a read only replica."
NOREPLICAS_ERR = "NOREPLICAS Not enough good replicas to write."
MASTERDOWN_ERR = ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set "
                  "to 'no'.")


class Replication:
    # What a write's feed in C reads at their offsets (_feed.c); the rest is in the dict.
    __slots__ = ("backlog", "stream_db", "master_repl_offset", "master", "replica", "__dict__",
                 "__weakref__")
    # feed_span_c(repl, db_id, reader, a, b): ``feed_span`` of a reader's requests a to b - 1
    # in C when they go into the backlog's tail block at once, else False and nothing done
    # (ServerCore._end_span)
    feed_span_c: ClassVar[Callable[[Any, int, Any, int, int], bool]] = \
        _no_common_case if _feed is None else _feed.feed_span
    # feed_argv_c(repl, db_id, argv): ``feed`` of a write that propagates as other words than
    # it arrived as (XADD's ID, EXPIRE's PEXPIREAT), encoded in C into the backlog's tail
    # block, else False and nothing done
    feed_argv_c: ClassVar[Callable[[Any, int, list[bytes]], bool]] = \
        _no_common_case if _feed is None else _feed.feed_argv
    # feed_transaction_c(repl, db_id, pending): the span propagation._flush_transaction feeds
    # (MULTI, the pending writes, all in db_id, EXEC) encoded in C into the backlog's tail
    # block, else False and nothing done
    feed_transaction_c: ClassVar[Callable[[Any, int, list[Any]], bool]] = \
        _no_common_case if _feed is None else _feed.feed_transaction

    def __init__(self, core: ReplicationHost) -> None:
        from pyrepl.replication.master import MasterSide
        from pyrepl.replication.replica import ReplicaSide

        self.core = core
        self.ids = ReplIds(core.replid)
        self.master_repl_offset = 0
        self.backlog: Backlog | None = None
        self.no_replicas_since_ms = core.now_ms
        # the db the last propagated command selected (-1: emit SELECT before the next one)
        self.stream_db = -1
        self.events = SyncEventLog(node=self.announce_name(), run_id=core.run_id)
        self.master = MasterSide(self)
        self.replica = ReplicaSide(self)
        self.failover = Failover(self)
        core.replication = self
        core.refresh_stream_live()     # (the feeds: ours, or the AOF's fan-out before them)
        core.aux_fields = self.rdb_aux
        core.config.on_change(self._config_changed)

    # -- identity -------------------------------------------------------------------------
    def announce_name(self) -> str:
        cfg = self.core.config
        ip = cfg.replica_announce_ip or "127.0.0.1"
        port = cfg.replica_announce_port or cfg.port
        return f"{ip}:{port}"

    def is_replica(self) -> bool:
        return self.replica.master_host is not None

    # -- the stream -----------------------------------------------------------------------
    def create_backlog(self) -> None:
        """First replica on a master: create the backlog and start a new history."""
        if self.backlog is not None:
            return
        self._start_backlog()
        if not self.is_replica():
            self.ids.change()
            self.ids.clear_secondary()
            self.core.log.notice(f"Replication backlog created, my new replication IDs are "
                                 f"'{self.ids.replid}' and '{self.ids.replid2}'")

    def _start_backlog(self) -> None:
        """createReplicationBacklog: an empty backlog whose first byte is the stream's next."""
        self.backlog = Backlog(self.core.config.repl_backlog_size, self.master_repl_offset)
        self.refresh_stream_live()

    def free_backlog(self) -> None:
        """freeReplicationBacklog: only without replicas (they reference its blocks)."""
        assert not self.master.links, "the backlog is freed only without replicas"
        self.master.dual.drop_all()     # (a dual-channel hold references its blocks)
        self.backlog = None
        self.refresh_stream_live()

    def refresh_stream_live(self) -> None:
        """``core.stream_live``: whether a write's propagation goes anywhere (a backlog, and
        we are a master: a replica passes its master's bytes on instead). While it is False
        the core keeps no pending propagation at all (the write path's cheapest case)."""
        self.core.refresh_stream_live()   # (a backlog and a master, or the AOF: the core's)

    def feed(self, db_id: int, argv: list[bytes],
             data: bytes | bytearray | None = None) -> None:
        """A write the core propagates (master role): SELECT when needed, then the command
        (``data``: its RESP encoding when the caller has it, the bytes a client sent).

        On the write hot path: one C-level encode (none with ``data``), one copy into the
        shared buffer, and per streaming replica one comparison (feedReplicationBuffer);
        without ``data``, all of it in C when it fits in the tail block (feed_argv_c)."""
        if data is None and self.feed_argv_c(self, db_id, argv):  # type: ignore[call-arg,arg-type]
            return
        backlog = self.backlog
        # No stream: no replica ever attached (or repl-backlog-ttl freed it); or a replica,
        # whose stream is its master's, passed on by feed_raw.
        if backlog is None or self.replica.master_host is not None:
            return
        if data is None:
            data = encode_command(argv)
        if db_id != self.stream_db and db_id >= 0:
            data = self._select(db_id) + data
        before = self.master_repl_offset
        self.master_repl_offset = before + len(data)
        self.master.feeding.stream(before, backlog.append(data))

    def feed_span(self, db_id: int, data: bytes, ends: list[int]) -> None:
        """Several writes the core propagates as they arrived (a pipelining client's run;
        ``ends``: where each ends in ``data``). The backlog takes them in pieces that end
        with the command that needs a new block, so its blocks, and the replicas' output
        limits checked at each new block, fall as feeding them one by one (Redis feeds a
        command at a time)."""
        backlog = self.backlog
        if backlog is None or self.replica.master_host is not None:
            return   # (as feed)
        if db_id != self.stream_db and db_id >= 0:
            select = self._select(db_id)
            data = select + data   # (as feed: with the first command)
            ends = [e + len(select) for e in ends]
        n = len(data)
        pos = 0
        view = memoryview(data)
        stream = self.master.feeding.stream
        while pos < n:
            end = backlog.cut(pos, n, ends)
            before = self.master_repl_offset
            self.master_repl_offset = before + end - pos
            stream(before, backlog.append(view[pos:end] if pos or end < n else data))
            pos = end

    def _select(self, db_id: int) -> bytes:
        """The SELECT the stream needs before a write to ``db_id`` (now its db)."""
        self.stream_db = db_id
        return encode_command([b"SELECT", str(db_id).encode()])

    def feed_raw(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes applied from our master, passed on verbatim to the backlog and sub-replicas."""
        before = self.master_repl_offset
        self.master_repl_offset = before + len(data)
        backlog = self.backlog
        if backlog is not None:
            self.master.feeding.stream(before, backlog.append(data))

    # -- hooks the core calls -------------------------------------------------------------
    def ready_to_shutdown(self) -> bool:
        """isReadyToShutdown: every replica acknowledged the whole stream."""
        off = self.master_repl_offset
        return all(link.ack_off == off for link in self.master.links
                   if not link.is_rdb_channel)

    def request_acks(self) -> None:
        """REPLCONF GETACK * to the replicas (a shutdown waiting for them)."""
        if self.master.links:
            self.master.acks.request_acks()

    def log_lagging_replicas(self) -> None:
        """finishShutdown's report of the replicas that did not catch up."""
        links = [lk for lk in self.master.links if not lk.is_rdb_channel]
        if not links:
            return
        off = self.master_repl_offset
        in_sync = 0
        for link in links:
            if link.ack_off == off:
                in_sync += 1
                continue
            lag = (self.core.now_ms - link.ack_ms) // 1000 if link.ack_ms else -1
            self.core.log.warning(f"Lagging replica {link.name()} reported offset "
                                  f"{link.ack_off} behind master, lag={lag}, "
                                  f"state={link.state.name.lower()}.")
        if in_sync == len(links):
            self.core.log.notice(f"{in_sync} of {len(links)} replicas are in sync when "
                                 f"shutting down.")
        else:
            self.core.log.warning(f"{in_sync} of {len(links)} replicas are in sync when "
                                  f"shutting down.")

    def propagation_error(self, c: ReplClient, command: str, message: str) -> None:
        """An error reply to our master's link (see ReplicaSide.propagation_error)."""
        self.replica.propagation_error(command, message)

    def check_command(self, c: ReplClient, cmd: ReplCommand,
                      queued: Sequence[tuple[ReplCommand, Any]] = ()) -> str | None:
        """Refuse a command as Redis's processCommand does for replication reasons: EXEC
        with its ``queued`` commands counted as its own (is_write_command,
        is_denystale_command)."""
        return self.refuse_write(c, cmd, queued) or self.refuse_stale(c, cmd, queued)

    def refuse_write(self, c: ReplClient, cmd: ReplCommand,
                     queued: Sequence[tuple[ReplCommand, Any]] = ()) -> str | None:
        """NOREPLICAS (min-replicas-to-write) and READONLY (a read-only replica) for a write,
        or an EXEC whose queue holds one."""
        if c.kind == "master" or not (cmd.write or any(self._writes(q, a) for q, a in queued)):
            return None
        if self.is_replica() and self.core.config.replica_read_only:
            return READONLY_ERR
        if not self.master.enough_good_replicas():
            return NOREPLICAS_ERR
        return None

    def _writes(self, cmd: ReplCommand, argv: Any) -> bool:
        """A queued command is a write (is_write_command), a script's by its declared flags
        (getCommandFlags: EVAL of a shebang script without no-writes)."""
        if cmd.write:
            return True
        if cmd.name not in ("eval", "evalsha", "fcall"):
            return False
        return self.core.script_writes(argv)

    def refuse_stale(self, c: ReplClient, cmd: ReplCommand,
                     queued: Sequence[tuple[ReplCommand, Any]] = ()) -> str | None:
        """MASTERDOWN: a replica whose link is down with replica-serve-stale-data no, for a
        command without the ``stale`` flag (or an EXEC with one such in its queue)."""
        if c.kind == "master" or not self.is_replica() or self.replica.link_up() or \
                self.core.config.replica_serve_stale_data:
            return None
        if "stale" in cmd.flags and all("stale" in q.flags for q, _ in queued):
            return None
        return MASTERDOWN_ERR

    def tick(self, now_ms: int) -> None:
        self.master.tick(now_ms)
        self.replica.tick(now_ms)
        self.failover.tick(now_ms)
        # repl-backlog-ttl: free the backlog of a master without replicas for that long.
        ttl = self.core.config.repl_backlog_ttl
        if self.master.links:
            self.no_replicas_since_ms = now_ms
        elif (self.backlog is not None and ttl and not self.is_replica()
              and now_ms - self.no_replicas_since_ms > ttl * 1000):
            self.core.log.notice(f"Replication backlog freed after {ttl} seconds without "
                                 f"connected replicas.")
            # Like Redis: a new id, so no stale replica can continue from the freed history.
            self.ids.change()
            self.ids.clear_secondary()
            self.free_backlog()

    def child_exited(self, pid: int, exitcode: int) -> None:
        self.master.child_exited(pid, exitcode)

    def client_closed(self, c: ReplClient) -> None:
        self.master.client_closed(c)
        self.replica.client_closed(c)

    def start(self) -> None:
        """The server is listening: restore state loaded from the RDB, connect to a master."""
        self.replica.start()

    def change_replid(self) -> None:
        self.ids.change()
        self.ids.clear_secondary()

    def _config_changed(self, name: str, value: Any) -> None:
        if name == "repl-backlog-size" and self.backlog is not None:
            self.backlog.resize(int(value))
        elif name in ("min-replicas-to-write", "min-replicas-max-lag"):
            self.master.acks.refresh_good_replicas()   # at once, as Redis's updateGoodSlaves

    # -- persistence ----------------------------------------------------------------------
    def rdb_aux(self) -> dict[str, bytes | str | int]:
        """repl-stream-db / repl-id / repl-offset for every RDB (restart without full sync)."""
        db = self.stream_db
        if self.is_replica():  # our stream is the master's: the db its stream has selected
            db = self.replica.master_stream_db()
        return {
            "repl-stream-db": max(db, 0),
            "repl-id": self.ids.replid,
            "repl-offset": self.master_repl_offset,
        }

    def restore_from_rdb(self, replid: str, offset: int, replica: bool) -> None:
        """After loading an RDB with replication info (Redis's loadDataFromDisk): ``replica``
        is !iAmMaster(), which in cluster mode is myself's role from nodes.conf (such a node
        follows its master only from the cluster's first cron: set_master then caches the
        restored history, and a restarted cluster replica resyncs partially)."""
        if replica:
            self.ids.replid = replid
            self.master_repl_offset = offset
            if self.is_replica():
                self.replica.cache_master_using_myself()
        else:
            # As Redis 7: keep the old history as replid2 so replicas of the previous run can
            # continue, rebase the offset, and rebuild the backlog from that offset.
            self.ids.replid2 = replid
            self.ids.second_repl_offset = offset + 1
            self.master_repl_offset = offset
            self._start_backlog()
            self.no_replicas_since_ms = self.core.now_ms

    # -- INFO -----------------------------------------------------------------------------
    def info_fields(self) -> list[tuple[str, object]]:
        fields: list[tuple[str, object]] = [("role", "slave" if self.is_replica() else "master")]
        if self.is_replica():
            fields.extend(self.replica.info_fields())
        fields.append(("connected_slaves", len(self.master.online_or_syncing_links())))
        cfg = self.core.config
        if cfg.min_replicas_to_write and cfg.min_replicas_max_lag:
            fields.append(("min_slaves_good_slaves", self.master.good_replicas_count()))
        fields.extend(self.master.info_replica_lines())
        fields.extend(self.master.dual.info_fields())   # (Valkey's field, after the slaveN)
        fields.extend(self.master.resume.info_fields())   # (pyrepl's)
        b = self.backlog
        fields.extend([
            ("master_failover_state", self.failover.state),
            ("master_replid", self.ids.replid),
            ("master_replid2", self.ids.replid2),
            ("master_repl_offset", self.master_repl_offset),
            ("second_repl_offset", self.ids.second_repl_offset),
            ("repl_backlog_active", int(b is not None)),
            ("repl_backlog_size", cfg.repl_backlog_size),
            ("repl_backlog_first_byte_offset", b.first_byte_offset if b is not None else 0),
            ("repl_backlog_histlen", b.histlen if b is not None else 0),
        ])
        return fields

    def memory_fields(self) -> list[tuple[str, object]]:
        """As Redis 7.0's getMemoryOverheadData: the shared buffer's memory is the backlog's
        up to repl-backlog-size, and what exceeds it (while replicas are attached) is the
        replicas'. pyrepl's replica adds its rdb-channel buffer (Redis 8)."""
        b = self.backlog
        total = b.mem if b is not None else 0
        backlog, replicas = b.memory(bool(self.master.links)) if b is not None else (0, 0)
        full_sync_buf = self.replica.full_sync_buffer_bytes()
        return [
            ("mem_replication_backlog", backlog),
            ("mem_total_replication_buffers", total + full_sync_buf),
            ("mem_clients_slaves", replicas),
            ("mem_replica_full_sync_buffer", full_sync_buf),
        ]


    def unshared_output_bytes(self) -> int:
        """The replicas' memory maxmemory does not count besides their part of the shared
        buffer as Redis sizes it: their output outside the buffer (Feeding.unshared_bytes),
        and the share of what pyrepl's blocks hold beyond Redis's figure for them that lies
        past repl-backlog-size (also once the replicas are gone: the blocks they held are
        trimmed a few at a time, and counted as not-for-eviction until then, as Redis's)."""
        total = self.master.feeding.unshared_bytes()
        b = self.backlog
        if b is not None and b.mem:
            _, beyond = b.memory(True)
            total += b.python_overhead() * beyond // b.mem
        return total


def _bind_feed() -> None:
    """A client's write into the stream, in C when it is the common one (_feed.c): the
    classes whose slots it moves, and the core's dispatch told to use it (_dispatch.c)."""
    _dispatch = native.load("pyrepl._dispatch")
    if _feed is None or _dispatch is None:
        return
    from pyrepl.replication.backlog import Block, Cursor
    from pyrepl.replication.master import MasterSide
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.states import ReplicaLink
    from pyrepl.replication.replica import ReplicaSide
    from pyrepl.resp.fastreader import FastRespReader

    _feed.bind(Replication, Backlog, Block, FastRespReader, MasterSide, Feeding, ReplicaLink,
               Cursor, ReplicaSide)
    _dispatch.bind_feed(Replication, _feed.feed_request, _feed.feed_argv)


_bind_feed()
