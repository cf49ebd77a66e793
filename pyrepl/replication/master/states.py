"""The master side's per-replica state: the link's states, their one transition table and the
guards on them, the snapshot record, and the constants of the master side (master side).

A replica connection is an ordinary :class:`~pyrepl.core.client.Client` that sent ``PSYNC`` / ``SYNC``;
its :class:`ReplicaLink` (``client.repl``) holds the per-replica state. The states are Redis's
``SLAVE_STATE_*`` (``SlaveState``) with one transition table, ``TRANSITIONS``; an input with no
entry for the current state raises :class:`LinkStateError`::

    NONE --PARTIAL--> ONLINE                   (+CONTINUE and the backlog, streaming at once)
    NONE --FULL--> WAIT_BGSAVE_START           (waits for a snapshot it can use)
    WAIT_BGSAVE_START --SNAPSHOT_STARTED / ATTACHED--> WAIT_BGSAVE_END
    WAIT_BGSAVE_END --RDB_SAVED (disk)--> SEND_BULK --BULK_SENT--> ONLINE
    WAIT_BGSAVE_END --RDB_STREAMED (diskless)--> ONLINE (the stream waits for the first ACK)
    WAIT_BGSAVE_END / SEND_BULK --RDB_ONLY_DONE--> RDB_TRANSMITTED   (REPLCONF rdb-only 1)
    NONE --RDB_CHANNEL--> WAIT_RDB_CHANNEL     (main channel: +RDBCHANNELSYNC <client id>)
    WAIT_RDB_CHANNEL --SNAPSHOT_STARTED--> SEND_BULK_AND_STREAM   (streams from the fork on)
    NONE --DUAL_CHANNEL_PSYNC--> SEND_BULK_AND_STREAM   (Valkey's main channel: its PSYNC from
                                                         the offset its rdb channel was given)
    SEND_BULK_AND_STREAM --RDB_STREAMED / FIRST_ACK--> ONLINE
    NONE --RESUME--> WAIT_BGSAVE_END   (pyrepl's: a cut sync goes on; then RDB_SAVED as a disk one)
    any --CLOSED--> CLOSED

A link changes state only by :meth:`ReplicaLink.go` (the table's move). What a state allows is
asked by name, never by comparing states in the phases: the link's guard properties
(``online``, ``replconf_only``, ``waits_for_snapshot``, ``waits_for_rdb_channel``,
``streams_during_rdb``, ``sending_bulk``, ``waits_for(snapshot)``, ``wants_keepalive()``) and the
sets of states below the table (``NOT_A_REPLICA``, ``CHILD_AT_WORK``, ``NEEDS_RDB_CHANNEL``,
``RDB_CHANNEL_OVER``); where work depends on the state, the phase keeps a state -> handler map.

Offsets and names are Redis's: the snapshot offset is ``master_repl_offset`` at fork time, it is
the ``+FULLRESYNC`` offset and the RDB's ``repl-offset`` aux field; ``ack_off`` is the replica's
last ``REPLCONF ACK``; INFO's ``lag`` is seconds since that ack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyrepl.replication.backlog import Cursor
from pyrepl.replication.fsm import Machine, from_every, step

if TYPE_CHECKING:
    from pyrepl.replication.ports import ReplClient
    from pyrepl.replication.spill import SpillFile


ROLE = "master"
NET_HOST_STR_LEN = 256
# slave_req bits (SLAVE_REQ_RDB_EXCLUDE_DATA / _FUNCTIONS)
REQ_EXCLUDE_DATA = 1
REQ_EXCLUDE_FUNCTIONS = 2
REQ_RDB_MASK = REQ_EXCLUDE_DATA | REQ_EXCLUDE_FUNCTIONS
REQ_RDB_CHANNEL = 4  # SLAVE_REQ_RDB_CHANNEL: a snapshot for rdb channels only (socket target)
GETACK_ARGV = [b"REPLCONF", b"GETACK", b"*"]
PING_ARGV = [b"ping"]  # shared.ping: lower case on the wire
WAIT_REPLICA_ERR = ("ERR WAIT cannot be used with replica instances. Please also note that "
                    "since Redis 4.0 if a replica is configured to be writable (which is not "
                    "the default) writes to replicas are just local and are not propagated.")


class SlaveState(Machine):
    """Redis's SLAVE_STATE_* (server.h); NONE and CLOSED frame a link's life."""

    NONE = 0
    WAIT_BGSAVE_START = 6
    WAIT_BGSAVE_END = 7
    SEND_BULK = 8
    ONLINE = 9
    RDB_TRANSMITTED = 10
    WAIT_RDB_CHANNEL = 11  # main channel: waits for its rdb channel's snapshot to start
    SEND_BULK_AND_STREAM = 12  # main channel: streams while the rdb channel gets the RDB
    CLOSED = -1


class LinkInput(Machine):
    PARTIAL = "partial"  # PSYNC accepted: +CONTINUE
    FULL = "full"  # PSYNC refused or SYNC: a full sync is needed
    SNAPSHOT_STARTED = "snapshot-started"  # a snapshot for this link was forked
    ATTACHED = "attached"  # joined a disk snapshot already running
    RDB_SAVED = "rdb-saved"  # the disk child finished: send the file
    RDB_STREAMED = "rdb-streamed"  # the socket child wrote the whole RDB to this replica
    BULK_SENT = "bulk-sent"  # the whole file went out
    RDB_ONLY_DONE = "rdb-only-done"  # rdb-only replica got its RDB
    RDB_CHANNEL = "rdb-channel"  # PSYNC refused, the replica can use an rdb channel
    FIRST_ACK = "first-ack"  # main channel: the replica loaded the RDB and acked
    DUAL_CHANNEL_PSYNC = "dual-channel-psync"  # Valkey's main channel: after its rdb channel
    RESUME = "resume"  # a cut full sync goes on from its kept snapshot (pyrepl's)
    CLOSED = "closed"  # the connection is gone (or is being closed)


# The short names the package's modules import with the types.
S = SlaveState
L = LinkInput


def _table() -> dict[tuple[SlaveState, LinkInput], SlaveState]:
    t: dict[tuple[SlaveState, LinkInput], SlaveState] = {
        (S.NONE, L.PARTIAL): S.ONLINE,
        (S.NONE, L.FULL): S.WAIT_BGSAVE_START,
        (S.WAIT_BGSAVE_START, L.SNAPSHOT_STARTED): S.WAIT_BGSAVE_END,
        (S.WAIT_BGSAVE_START, L.ATTACHED): S.WAIT_BGSAVE_END,
        (S.WAIT_BGSAVE_END, L.RDB_SAVED): S.SEND_BULK,
        (S.WAIT_BGSAVE_END, L.RDB_STREAMED): S.ONLINE,
        (S.WAIT_BGSAVE_END, L.RDB_ONLY_DONE): S.RDB_TRANSMITTED,
        (S.SEND_BULK, L.BULK_SENT): S.ONLINE,
        (S.SEND_BULK, L.RDB_ONLY_DONE): S.RDB_TRANSMITTED,
        (S.NONE, L.RDB_CHANNEL): S.WAIT_RDB_CHANNEL,
        (S.WAIT_RDB_CHANNEL, L.SNAPSHOT_STARTED): S.SEND_BULK_AND_STREAM,
        (S.SEND_BULK_AND_STREAM, L.RDB_STREAMED): S.ONLINE,
        (S.SEND_BULK_AND_STREAM, L.FIRST_ACK): S.ONLINE,
        (S.NONE, L.DUAL_CHANNEL_PSYNC): S.SEND_BULK_AND_STREAM,
        (S.NONE, L.RESUME): S.WAIT_BGSAVE_END,
    }
    t.update(from_every(S, (L.CLOSED,), S.CLOSED, but=S.CLOSED))
    return t


TRANSITIONS: dict[tuple[SlaveState, LinkInput], SlaveState] = _table()

# Guards: what a state allows, asked by name (the moves themselves are the table's).
# A link in MasterSide.links (a replica connection): NONE (REPLCONF only) and CLOSED are not.
NOT_A_REPLICA = frozenset({S.NONE, S.CLOSED})
# A snapshot child works for the link (its end may be reaped early at an ACK).
CHILD_AT_WORK = frozenset({S.WAIT_BGSAVE_END, S.SEND_BULK_AND_STREAM})
# A main channel whose sync still needs its rdb channel (losing that aborts the sync).
NEEDS_RDB_CHANNEL = frozenset({S.WAIT_RDB_CHANNEL, S.SEND_BULK_AND_STREAM})
# An rdb channel whose part is over (nothing to close when its main channel goes).
RDB_CHANNEL_OVER = frozenset({S.CLOSED, S.RDB_TRANSMITTED})

# replstateToString: what INFO shows ("" = not listed).
INFO_STATE = {S.WAIT_BGSAVE_START: "wait_bgsave", S.WAIT_BGSAVE_END: "wait_bgsave",
              S.SEND_BULK: "send_bulk", S.ONLINE: "online",
              S.WAIT_RDB_CHANNEL: "wait_bgsave",  # Redis 8 shows the main channel so
              S.SEND_BULK_AND_STREAM: "send_bulk_and_stream"}


class LinkStateError(Exception):
    """An input that has no transition from the link's current state."""

    def __init__(self, state: SlaveState, inp: LinkInput) -> None:
        super().__init__(f"replica link: no transition for {inp.value} in state {state.name}")
        self.state = state
        self.input = inp


@dataclass(slots=True, eq=False)
class Snapshot:
    """One snapshot child serving full syncs: ``target`` is ``disk`` or ``socket``."""

    pid: int
    target: str
    offset: int
    started_ms: int
    req: int
    keys: int
    resume_id: str = ""   # named to resumable replicas (pyrepl.replication.master.resume)
    # rdb channels that closed once their whole RDB was written, and when (their event comes
    # with the child's results)
    delivered: list[tuple[ReplicaLink, int]] = field(default_factory=list)


class ReplicaLink:
    """Per-replica state (Redis keeps it in the client struct)."""

    __slots__ = (
        "client", "state", "capa_eof", "capa_psync2", "pre_psync", "rdb_only", "req",
        "listening_port", "ip_address", "ack_off", "ack_ms", "psync_offset", "snapshot",
        "ref", "streaming", "stream_on_ack",
        "soft_since_ms", "buffer_peak", "sync_id", "sync_start_ms", "joined_ms", "mode",
        "close_reason", "capa_rdb_channel", "is_rdb_channel", "main", "rdb_channel", "rdb_done",
        "capa_dual_channel", "dual_hold_id", "version", "spill", "queued_ms",
        "capa_resume", "resume_id", "resume", "resume_from", "resume_stream",
    )

    def __init__(self, client: ReplClient) -> None:
        self.client = client
        self.state = S.NONE
        self.capa_eof = False
        self.capa_psync2 = False
        self.pre_psync = False  # came with the old SYNC: no +FULLRESYNC, no ACKs expected
        self.rdb_only = False
        self.req = 0
        self.listening_port = 0
        self.ip_address = ""
        self.ack_off = 0
        self.ack_ms = 0
        self.psync_offset = 0
        self.snapshot: Snapshot | None = None
        # the replica's place in the shared replication buffer (None: it is not fed, as
        # Redis's canFeedReplicaReplBuffer: waiting for its snapshot to start, or rdb-only)
        self.ref: Cursor | None = None
        self.streaming = False   # fed and written to its socket (else the buffer holds it)
        self.stream_on_ack = False
        self.soft_since_ms = -1
        self.buffer_peak = 0
        self.sync_id = ""
        self.sync_start_ms = 0
        self.joined_ms = 0
        self.mode = ""
        self.close_reason = ""
        # rdb channel (Redis 8): capa rdb-channel-repl accepted (main channel side)
        self.capa_rdb_channel = False
        self.is_rdb_channel = False  # REPLCONF rdb-channel 1
        self.main: ReplicaLink | None = None  # rdb channel: its main channel's link
        self.rdb_channel: ReplClient | None = None  # main channel: its rdb channel's connection
        self.rdb_done = False  # main channel: the child reported the whole RDB written
        # Valkey's dual channel (pyrepl.replication.master.dualchannel): capa dual-channel
        # accepted; the rdb channel a main connection named (REPLCONF set-rdb-client-id)
        self.capa_dual_channel = False
        self.dual_hold_id = 0
        self.version = ""   # REPLCONF version (Valkey's replicas send theirs)
        # repl-full-sync-spill-threshold: the part of its pending stream on disk, before what
        # its cursor holds (pyrepl.replication.master.feeding)
        self.spill: SpillFile | None = None
        # repl-full-sync-max-concurrent: when it first waited for a full-sync turn (0: never)
        self.queued_ms = 0
        # a cut full sync that resumes (pyrepl.replication.master.resume): capa pyrepl-resume
        # said; the snapshot id it was told; the one it asked to resume (REPLCONF resume) and
        # from which payload byte (-1: not a resumed sync); a cut rdb-channel sync's replica
        # kept the stream it had: the offset it goes on from (-1: the snapshot's)
        self.capa_resume = False
        self.resume_id = ""
        self.resume = ""
        self.resume_from = -1
        self.resume_stream = -1

    def go(self, inp: LinkInput) -> SlaveState:
        """The one way a link changes state: the table's move for ``inp`` (LinkStateError when
        it has none)."""
        self.state = step(TRANSITIONS, self.state, inp, LinkStateError)
        return self.state

    # -- guards: what the state allows ----------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.state is S.CLOSED

    @property
    def replconf_only(self) -> bool:
        """A connection that sent REPLCONF but no PSYNC / SYNC yet: not a replica (nor in
        MasterSide.links); a PSYNC now is its sync."""
        return self.state is S.NONE

    @property
    def online(self) -> bool:
        """Counted by WAIT and min-replicas, timed out by its ACKs, its lag reported."""
        return self.state is S.ONLINE

    @property
    def waits_for_snapshot(self) -> bool:
        """Waits for a snapshot to be started for it (or to join one)."""
        return self.state is S.WAIT_BGSAVE_START

    @property
    def waits_for_rdb_channel(self) -> bool:
        """A main channel that got +RDBCHANNELSYNC and waits for its rdb channel's snapshot."""
        return self.state is S.WAIT_RDB_CHANNEL

    @property
    def streams_during_rdb(self) -> bool:
        """A main channel streaming while its rdb channel gets the RDB (not online yet)."""
        return self.state is S.SEND_BULK_AND_STREAM

    @property
    def sending_bulk(self) -> bool:
        """The disk snapshot's file is being sent to it."""
        return self.state is S.SEND_BULK

    @property
    def in_transfer(self) -> bool:
        """Receives a snapshot: written by its child, or its file (a full-sync turn taken, as
        repl-full-sync-max-concurrent counts)."""
        return self.state is S.WAIT_BGSAVE_END or self.state is S.SEND_BULK

    def waits_for(self, snap: Snapshot) -> bool:
        """Waits for ``snap`` to end (its transfer, or its file to send)."""
        return self.state is S.WAIT_BGSAVE_END and self.snapshot is snap

    def wants_keepalive(self) -> bool:
        """Gets a ``\\n`` a second: it waits for a snapshot to start, or for a disk one to end
        (a socket child writes to it itself)."""
        st = self.state
        snap = self.snapshot
        return st is S.WAIT_BGSAVE_START or (st is S.WAIT_BGSAVE_END and snap is not None
                                              and (snap.target != "socket"
                                                   or self.resume_from >= 0))

    def set_flags(self) -> None:
        """CLIENT LIST flags: S for a replica connection, C for an rdb channel (S first)."""
        c = self.client
        rest = c.flags.replace("S", "").replace("C", "")
        c.flags = ("S" if c.kind == "replica" else "") + ("C" if self.is_rdb_channel else "") \
            + rest

    def peer_ip(self) -> str:
        if self.ip_address:
            return self.ip_address
        addr = self.client.addr
        return addr.rsplit(":", 1)[0] if ":" in addr else addr

    def name(self) -> str:
        """replicationGetSlaveName: ip:listening-port of the replica."""
        ip = self.peer_ip()
        if not ip:
            return f"client id #{self.client.id}"
        if self.listening_port:
            return f"[{ip}]:{self.listening_port}" if ":" in ip else f"{ip}:{self.listening_port}"
        return f"{ip}:<unknown-replica-port>"
