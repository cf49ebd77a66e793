"""Valkey's dual-channel full sync, master side: the offer, the rdb channel's snapshot offset
(``$ENDOFF:``) and the stream held for the main channel until it asks for it (master side).

Valkey 8's dialect of the rdb channel (src/replication.c, ``dual-channel-replication``) differs
from Redis 8's (``+RDBCHANNELSYNC``, pyrepl.replication.master.sync): the main connection is
refused first and only then does the replica open its rdb channel, which learns the snapshot's
offset; the main connection comes back later with an ordinary PSYNC from that offset::

    main:  REPLCONF capa dual-channel ...      (counted with repl-rdb-channel and diskless sync)
           PSYNC <id> <off>  ->  +DUALCHANNELSYNC            (no partial resync possible)
    rdb:   REPLCONF capa eof rdb-only 1 rdb-channel 1 listening-port <p>  ->  +OK
           SYNC  ->  (\\n keepalives while the diskless delay runs)
                     $ENDOFF:<offset> <replid> <dbid> <client id>   at fork time
                     $EOF:<mark> <RDB> <mark>                        (the child writes it)
    main:  REPLCONF set-rdb-client-id <client id>  ->  +OK   (-ERR Unrecognized RDB client id)
           PSYNC <replid> <offset + 1>  ->  +CONTINUE <replid> and the stream from there on
           ... REPLCONF ACK once the replica loaded the RDB: online

Between the fork and the main connection's PSYNC the stream from the snapshot offset on must
stay in the shared buffer: a :class:`Hold` (a cursor of the buffer, Valkey's
``replicas_waiting_psync``) keeps it, keyed by the rdb channel's client id. The hold outlives
the rdb channel once its RDB was delivered, for ``GRACE_MS`` (Valkey's
``wait_before_rdb_client_free``, 60 s), is limited like a replica's output
(``client-output-buffer-limit replica``, as Valkey checks the protected rdb client), and ends
when the main connection attaches. A failed transfer ends it at once. The main connection
streams from its PSYNC on (``SEND_BULK_AND_STREAM``, INFO's ``send_bulk_and_stream``, Valkey's
``bg_transfer``) and goes online at its first ACK, as Valkey's ``BG_RDB_LOAD`` does.

One sync, one ``sync_id``: the main connection's refusal is remembered by the replica's name
(ip and listening port, which both connections announce) and the rdb channel takes that id;
the main connection takes the hold's. The dialect is named in the events (``result``
``dualchannel``, ``mode`` ``dual-channel``) and in INFO (``replicas_waiting_psync``, Valkey's
field).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyrepl.replication import psync as psync_mod
from pyrepl.replication.backlog import Cursor
from pyrepl.replication.master.states import ReplicaLink
from pyrepl.replication.wire import EndOffset, FullResync
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.ports import ReplicationHost

MODE = "dual-channel"
DUALCHANNELSYNC = b"+DUALCHANNELSYNC\r\n"
GRACE_MS = 60_000   # DEFAULT_WAIT_BEFORE_RDB_CLIENT_FREE
REFUSED_KEPT = 1024  # refusals remembered for their rdb channel's sync id (the oldest go)
# The db an $ENDOFF names: Valkey writes server.db->id, the first db's (0); the stream after
# the snapshot starts with a SELECT anyway (the snapshot resets the stream's db).
ENDOFF_DBID = 0


@dataclass(slots=True, eq=False)
class Hold:
    """The stream kept from a dual-channel snapshot's offset on for its main connection."""

    rdb: ReplicaLink     # the rdb channel's link (closed once its RDB is delivered)
    cursor: Cursor       # the buffer's next byte after the snapshot offset
    offset: int          # the snapshot offset ($ENDOFF's)
    sync_id: str
    gone_ms: int = 0     # when the rdb channel closed after its RDB (0: open)
    soft_since_ms: int = -1


class DualChannel:
    """Valkey's dual-channel sync, master side (see the module docstring)."""

    __slots__ = ("core", "manager", "side", "feeding", "holds", "_refused")

    def __init__(self, side: MasterSide, feeding: Feeding) -> None:
        self.side = side
        self.feeding = feeding
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.holds: dict[int, Hold] = {}          # rdb channel client id -> its hold
        self._refused: dict[str, str] = {}        # replica name -> the refused sync's id

    # -- the main connection is refused -------------------------------------------------------
    def offered(self, link: ReplicaLink) -> bool:
        """A refused PSYNC goes on over two channels: the replica said ``capa dual-channel``
        (counted only while repl-rdb-channel and repl-diskless-sync are on) and asks for
        itself, not for an RDB only."""
        cfg = self.core.config
        return (link.capa_dual_channel and bool(cfg.repl_rdb_channel)
                and bool(cfg.repl_diskless_sync) and not link.rdb_only and not link.req)

    def refuse(self, link: ReplicaLink) -> None:
        """``+DUALCHANNELSYNC``: the connection stays a client (not a replica) until its
        PSYNC from the snapshot's offset."""
        self.core.log.notice(f"Replica {link.name()} is capable of dual channel "
                             f"synchronization, and partial sync isn't possible. Full sync "
                             f"will continue with dedicated RDB channel.")
        refused = self._refused
        refused[link.name()] = link.sync_id
        if len(refused) > REFUSED_KEPT:   # (replicas that never opened their rdb channel)
            del refused[next(iter(refused))]
        c = link.client
        c.out.append(DUALCHANNELSYNC)
        self.core.pending_flush.append(c)

    # -- the rdb channel ----------------------------------------------------------------------
    def rdb_channel_sync(self, link: ReplicaLink) -> None:
        """SYNC (or PSYNC) on an rdb channel that named no main connection: a snapshot for it
        alone, written with ``$ENDOFF:`` first; the sync of the refusal it follows."""
        link.mode = MODE
        link.rdb_only = True
        link.sync_id = self._refused.pop(link.name(), "") or self.manager.events.new_sync_id(
            self.core.now_ms)

    def header(self, link: ReplicaLink, offset: int) -> bytes:
        """What the rdb channel gets before the ``$EOF:`` payload (sendCurrentOffsetToReplica,
        then replicationSetupReplicaForFullResync's +FULLRESYNC unless it came with SYNC)."""
        head = EndOffset(offset, self.manager.ids.replid, ENDOFF_DBID, link.client.id).format()
        if not link.pre_psync:
            head += FullResync(self.manager.ids.replid, offset).format()
        return head

    def forked(self, link: ReplicaLink, offset: int) -> None:
        """addRdbReplicaToPsyncWait: the stream from ``offset`` on is kept for the main
        connection."""
        backlog = self.manager.backlog
        assert backlog is not None, "a replica link always has a backlog"
        self.core.log.notice(f"Sending to replica {link.name()} RDB end offset {offset} and "
                             f"client-id {link.client.id}")
        self.holds[link.client.id] = Hold(link, backlog.cursor_next(), offset, link.sync_id)

    def rdb_channel_closed(self, link: ReplicaLink, delivered: bool) -> None:
        """The rdb channel went: after its RDB, the hold waits out the grace period for the
        main connection; before, the sync failed and nothing is kept."""
        hold = self.holds.get(link.client.id)
        if hold is None or hold.rdb is not link:
            return
        if delivered:
            hold.gone_ms = self.core.now_ms
        else:
            self._drop(hold)

    # -- the main connection comes back -------------------------------------------------------
    def set_rdb_client_id(self, link: ReplicaLink, cid: int) -> None:
        """REPLCONF set-rdb-client-id <id>: the main connection of the rdb channel ``id``."""
        if cid not in self.holds:
            raise ReplyError(f"ERR Unrecognized RDB client id {cid}")
        link.dual_hold_id = cid

    def attach(self, link: ReplicaLink) -> Hold | None:
        """The main connection's PSYNC was accepted: its hold ends here (the link has its own
        place in the buffer now). None: an ordinary partial resync."""
        hold = self.holds.get(link.dual_hold_id) if link.dual_hold_id else None
        link.dual_hold_id = 0
        if hold is None:
            return None
        self._drop(hold)
        rdb = hold.rdb
        link.mode = MODE
        link.sync_id = hold.sync_id
        link.sync_start_ms = rdb.sync_start_ms
        link.psync_offset = hold.offset
        link.snapshot = rdb.snapshot   # (its end is the main connection's first: _main_done)
        if rdb.closed:
            link.rdb_done = True      # (only a delivered RDB leaves a hold behind)
        else:
            rdb.main = link           # its end is now its main connection's (Redis 8's way)
            link.rdb_channel = rdb.client
        return hold

    # -- the cron and INFO ----------------------------------------------------------------------
    def cron(self) -> None:
        """Holds past their grace period, or over the replica output limits, end (Valkey
        frees the protected rdb client then)."""
        now = self.core.now_ms
        for hold in list(self.holds.values()):
            if hold.gone_ms and now - hold.gone_ms > GRACE_MS:
                self.core.log.warning(f"Replica main channel failed to establish PSYNC within "
                                      f"the grace period ({(now - hold.gone_ms) // 1000} "
                                      f"seconds). Freeing RDB client {hold.rdb.client.id}.")
                self._drop(hold)
            elif self._over_limits(hold):
                self.core.log.warning(f"Client {hold.rdb.client.info_line()} scheduled to be "
                                      f"closed ASAP for overcoming of output buffer limits.")
                self.core.stats.client_outbuf_limit_disconnections += 1
                self._drop(hold)
                if not hold.rdb.closed:
                    self.side.close_link(hold.rdb, psync_mod.OUTPUT_BUFFER_LIMIT)

    def _over_limits(self, hold: Hold) -> bool:
        over, hold.soft_since_ms = self.feeding.hold_over_limits(hold.cursor, hold.soft_since_ms)
        return over

    def _drop(self, hold: Hold) -> None:
        if self.holds.pop(hold.rdb.client.id, None) is None:
            return
        backlog = self.manager.backlog
        if backlog is not None:
            backlog.release(hold.cursor)

    def drop_all(self) -> None:
        """The history changed (REPLICAOF, a new backlog): no hold can be continued."""
        for hold in list(self.holds.values()):
            self._drop(hold)
        self._refused.clear()

    def info_fields(self) -> list[tuple[str, object]]:
        return [("replicas_waiting_psync", len(self.holds))]
