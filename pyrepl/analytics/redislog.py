"""Redis and Valkey log files -> the sync events pyrepl logs itself (pure Python: it runs inside
Spark tasks, one rotated set of files per task, and directly in the tests).

Theory of operation: a log line is ``pid:R DD Mon YYYY HH:MM:SS.mmm L message`` (R the role
letter: M master, S replica, C child; L the level mark), or one of Valkey's other timestamp
formats (ISO 8601, milliseconds) or its ``logfmt`` lines. :data:`RULES` is the one table of the
mapping: each entry is a regex over the message and the name of the :class:`LogParser` method
that turns a match into events (or only into state: the replica a decision is about, the
replication ids, a reason that a later line will need). A message no rule knows is ``other``
when it does not look like replication, else ``log-unknown`` (counted and reported: a gap in the
table); a line that is not a log line at all is ``log-unparseable``. Nothing is fatal.

Redis logs a sync across several lines, and some facts arrive after the event they belong to
(the "offset is greater" warning after the lack-of-backlog line, the rdb-channel capability
after the decision, ``REPLICAOF``/``MASTER MODE`` after the "Connection with master lost"
they caused): the event is built at once and kept, and such a later line amends it. Events of
one sync share a ``sync_id``: on the master, per replica from "asks for synchronization" until
the replica is lost (the rdb/dual channel's own request joins its main channel's sync); on the
replica, from "sync started" (a connection attempt), as pyrepl's replica does.

A log names its own node only at start ("Running mode=standalone, port=N." or the logo's
"Port: N"); the events carry a placeholder node ``@TAG#PID`` that
:func:`pyrepl.analytics.logread.resolve_nodes` turns into host:port once every log is read.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics.logline import _LOGO, _SIGNAL, REDIS, VALKEY, split_line
from pyrepl.analytics.schema import RESULT_MODE

RDB_CHANNEL, DUAL_CHANNEL = RESULT_MODE["rdbchannel"], RESULT_MODE["dualchannel"]
TWO_CHANNELS = (RDB_CHANNEL, DUAL_CHANNEL)

_HINT = re.compile(r"MASTER|PRIMARY|[Rr]eplica|[Mm]aster\b|[Pp]rimary\b|\bP?SYNC\b|\bsync\b|"
                   r"[Rr]eplication|backlog|rdb.channel|[Dd]ual channel")
_PREFIX = re.compile(r"(?:Dual channel replication: |Replica bio thread: )+")

M_, P_ = r"(?:MASTER|PRIMARY)", r"(?:[Mm]aster|[Pp]rimary)"   # Redis / Valkey 8+ words

# (regex over the message, LogParser method). Order matters only where two could match.
RULES: list[tuple[str, str]] = [
    # -- identity and replication ids ---------------------------------------------------------
    (r"Running mode=\w+, port=(?P<port>\d+)\.", "own_port"),
    (r"(?P<flavour>Redis|Valkey) version=", "flavour"),
    (r"oO0OoO0OoO0Oo (?P<flavour>Redis|Valkey) is starting", "flavour"),
    (r"Replication backlog created, my new replication IDs are '(?P<id1>\w+)' and "
     r"'(?P<id2>\w+)'", "backlog_created"),
    (r"Replication backlog freed after", "backlog_freed"),
    (r"Setting secondary replication ID to (?P<id2>\w+), valid up to offset: (?P<off>-?\d+)\. "
     r"New replication ID is (?P<id1>\w+)", "shift_ids"),
    # -- master side: the request and the decision ---------------------------------------------
    (r"Replica (?P<peer>\S+) asks for synchronization$", "asks"),
    (r"Full resync requested by replica (?P<peer>\S+)(?P<ch> \(rdb-channel\))?\s*$",
     "full_requested"),
    (r"Partial resynchronization not accepted: Replication ID mismatch \(Replica asked for "
     r"'(?P<asked>[^']*)', my replication IDs are '(?P<id1>\w+)' and '(?P<id2>\w+)'\)",
     "replid_mismatch"),
    (r"Partial resynchronization not accepted: Requested offset for second ID was "
     r"(?P<off>-?\d+), but I can reply up to (?P<upto>-?\d+)", "second_id_too_far"),
    (r"Unable to partial resync with replica (?P<peer>\S+) for lack of backlog \(Replica request"
     r" was:? (?:(?P<rid>\w+):)?(?P<off>-?\d+)(?:, and I can only reply with the range "
     r"\[(?P<first>-?\d+), (?P<last>-?\d+)\])?\)", "lack_of_backlog"),
    (r"Warning: replica (?P<peer>\S+) tried to PSYNC with an offset that is greater than the "
     r"(?:master|primary) replication offset", "offset_ahead"),
    (r"Replica (?P<peer>\S+) is capable of (?P<kind>rdb|dual) channel synchronization",
     "rdb_channel"),
    (r"Partial resynchronization request from (?P<peer>\S+) accepted\. Sending (?P<n>\d+) bytes "
     r"of backlog starting from offset (?P<off>-?\d+)", "partial_accepted"),
    # -- master side: the snapshot and the link ------------------------------------------------
    (r"Starting BGSAVE for SYNC with target: (?P<target>disk|replicas sockets|[^()]*?socket)"
     r"(?P<rest>.*)$", "bgsave_started"),
    (r"Waiting for end of BGSAVE for SYNC", "bgsave_attached"),
    (r"Sending to replica (?P<peer>\S+) RDB end offset (?P<off>-?\d+)", "end_offset"),
    (r"Streamed RDB transfer with replica (?P<peer>\S+) succeeded", "rdb_streamed"),
    (r"Synchronization with replica (?P<peer>\S+) succeeded", "replica_online"),
    (r"Client (?P<info>.*) (?:scheduled to be )?closed (?:ASAP )?for overcoming of output "
     r"buffer limits", "output_limit"),
    (r"Disconnecting timedout replica \((?:streaming|full) sync\): (?P<peer>\S+)", "timedout"),
    (r"Connection with replica \(rdbchannel\) (?P<peer>\S+) lost\.", "rdb_channel_closed"),
    (r"Replica (?P<peer>\S+) rdb channel disconnected\.", "rdb_channel_closed"),
    (r"Connection with replica (?P<peer>\S+) lost\.", "replica_lost"),
    # -- replica side ----------------------------------------------------------------------------
    (rf"(?:Re)?[Cc]onnecting to {M_} (?P<peer>\S+?)(?: after failure)?$", "connecting"),
    (rf"{M_} <-> REPLICA sync started", "sync_started"),
    (r"Trying a partial resynchronization using main channel", "known"),
    (r"Trying a partial resynchronization \(request (?P<rid>[^:]+):(?P<off>-?\d+)\)\.",
     "psync_sent"),
    (r"Partial resynchronization not possible \(no cached (?:master|primary)\)", "psync_none"),
    (rf"Full resync from {P_}: (?P<rid>\w+):(?P<off>-?\d+)", "full_resync"),
    (r"PSYNC is not possible, initialize RDB channel", "rdbchannel_reply"),
    (rf"Successful partial resynchronization with {P_}\.", "continue_reply"),
    (rf"{M_} <-> REPLICA sync: {P_} accepted a Partial Resynchronization(?P<bg>, RDB load)?",
     "partial_up"),
    (rf"{P_} does not support PSYNC or is in error state \(reply: (?P<err>.*)\)", "sync_reply"),
    (rf"{P_} is currently unable to PSYNC but should be in the future: (?P<err>.*)",
     "try_later"),
    (rf"{M_} <-> REPLICA sync: receiving streamed RDB from {P_} with EOF to "
     r"(?P<to>disk|parser)", "rdb_eof"),
    (rf"{M_} <-> REPLICA sync: receiving (?P<n>\d+) bytes from {P_} to (?P<to>disk|parser)",
     "rdb_sized"),
    (r"Done downloading RDB", "rdb_received"),
    (rf"(?:{M_} <-> REPLICA sync: |RDB signature and version check passed\. )Flushing old data",
     "transfer_done"),
    (rf"{M_} <-> REPLICA sync: Loading DB in memory", "transfer_done"),
    (r"Done loading RDB, keys loaded: (?P<keys>\d+)", "keys_loaded"),
    (rf"{M_} <-> REPLICA sync: Finished with success", "load_done"),
    (rf"{M_} <-> REPLICA sync: Successfully streamed replication buffer into the db "
     r"\((?P<n>\d+) bytes", "drained"),
    (r"Successfully streamed replication data into memory", "drained"),
    (rf"{M_} timeout: no data nor PING received", "master_timeout"),
    (rf"Connection with {P_} lost\.", "link_down"),
    (rf"{M_} MODE enabled \((?:user|failover) request", "promoted"),
    (r"REPLICAOF (?P<peer>\S+) enabled \(user request", "replicaof"),
    # -- replica side: failed attempts ---------------------------------------------------------
    (r"Error condition on socket for SYNC: (?P<err>.*)", "fail:connect-error"),
    (rf"Unable to connect to {M_}: (?P<err>.*)", "fail:connect-error"),
    (rf"Unable to connect to {P_}: (?P<err>.*)", "fail:connect-error"),
    (rf"Timeout connecting to the {M_}", "fail:timeout"),
    (rf"Timeout receiving bulk data from {M_}", "fail:timeout"),
    (rf"{P_} did not respond to command during SYNC handshake", "fail:timeout"),
    (rf"I/O error (?:trying to sync with|reading bulk count from) {M_}: (?P<err>.*)",
     "fail:connection-lost"),
    (rf"{M_} aborted replication with an error: (?P<err>.*)", "fail:master-error"),
    (rf"Failed trying to load the {M_} synchronization DB(?P<err>.*)", "fail:load-error"),
    (rf"(?:{P_} did not reply to PSYNC, will try later|Unexpected reply to PSYNC from {P_}: "
     r"(?P<err>.*))", "fail:psync-error"),
    (rf"Error reply to PING from {P_}: (?P<err>.*)", "fail:ping-error"),
    (rf"Unable to AUTH to {M_}: (?P<err>.*)", "fail:auth-error"),
    (r"(?:rdb channel sync failed with error: |Dual channel sync failed with error )(?P<err>.*)",
     "fail:rdb-channel-error"),
    (r"Aborting (?:rdb|dual) channel sync(?P<err>.*)", "fail:rdb-channel-error"),
    # -- cluster mode (Redis 7.0 / 8, Valkey 8: 8 adds the node's " (name)" after its id) ---------
    (r"(?:Node configuration loaded, |No cluster configuration found, |Node hard reset, now )"
     r"I'm (?P<id>[0-9a-f]{40})", "own_id"),
    (r"Marking node (?P<id>[0-9a-f]{40})(?: \([^)]*\))? as failing \(quorum reached\)",
     "node_failing"),
    (r"Clear FAIL state for node (?P<id>[0-9a-f]{40})(?: \([^)]*\))?: ?(?P<what>.*?) ?is "
     r"reachable again", "node_cleared"),
    (r"Start of election delayed for -?\d+ milliseconds \(rank #(?P<rank>\d+), offset "
     r"(?P<off>-?\d+)\)", "election_delayed"),
    (r"Replica rank updated to #(?P<rank>\d+)", "election_delayed"),
    (r"Starting a failover election for epoch (?P<epoch>\d+)", "election_started"),
    (rf"Failover election won: I'm the new {P_}", "election_won"),
    (r"configEpoch set to (?P<epoch>\d+) after successful failover", "failover_epoch"),
    (rf"Taking over the {P_} \(user request", "takeover"),
    (r"(?P<kind>Forced|Manual) failover user request accepted", "manual_failover"),
    (r"Failover auth granted to (?P<id>[0-9a-f]{40})(?: \([^)]*\))? for epoch "
     r"(?P<epoch>\d+)", "vote_granted"),
    (r"Failover auth denied to (?P<id>[0-9a-f]{40})(?: \([^)]*\))?: (?P<why>.*)",
     "vote_denied"),
    (r"Cluster state changed: (?P<state>ok|fail)", "cluster_state"),
    (rf"Manual failover requested by replica|Received replication offset for paused {P_}|"
     rf"All {P_} replication stream processed|Currently unable to failover|"
     rf"Configuration change detected|I'm a sub-replica|Migrating to orphaned {P_}|"
     r"Manual failover timed out|FAIL message received from|configEpoch collision|"
     r"New configEpoch set|Manual failover (?:aborted|timed out)", "known"),
    # -- replication lines that carry no event ---------------------------------------------------
    (r"Non blocking connect for SYNC fired|replied to PING, replication can continue|"
     r"Caching the disconnected|Discarding previously cached|Before turning into a replica|"
     r"Background RDB transfer|Diskless rdb transfer|Starting to deliver RDB|"
     r"RDB transfer completed, rdb only replica|Starting to receive RDB and replication|"
     r"Starting to stream replication buffer|Discarding (?:temporary|old) DB|Swapping active DB|"
     r"Discarding the half-loaded data|Replica main thread|Loading the RDB and finalizing|"
     r"Retrying with SYNC|\(Non critical\)|replicas (?:are in sync )?(?:before|when) shutting|"
     r"Replica is about to load the RDB|Removing the RDB file|replication ID changed to|"
     r"Current BGSAVE has socket target|Can't attach the replica to the current BGSAVE|"
     r"Delay next BGSAVE for diskless SYNC|BGSAVE for replication delayed|Latest backlog is|"
     r"Replica .* asks for synchronization but with a wrong offset|Failover request received|"
     r"REPLICAOF would result into synchronization|Waiting for replicas before|^WARNING ",
     "known"),
]
_COMPILED = [(re.compile(rx), meth) for rx, meth in RULES]

# "Failover auth denied to <id>: <why>" -> the reason code (as pyrepl's own events say)
_DENIED = (("reqEpoch", "old-epoch"), ("already voted", "already-voted"),
           ("it is a master", "not-a-replica"), ("it is a primary", "not-a-replica"),
           ("I don't know its", "unknown-master"), ("is up", "master-up"),
           ("can't vote", "voted-recently"), ("slot ", "stale-slots"))


@dataclass
class _MSync:
    """A sync on the master side, per replica."""
    sid: str
    t0: float
    decision: dict[str, Any] | None = None
    channel: bool = False      # rdb channel / dual channel: its requests join this sync
    fork: dict[str, Any] | None = None
    sent: bool = False
    online: bool = False


@dataclass
class _RSync:
    """A connection attempt on the replica side."""
    sid: str
    t0: float
    psync_ts: float | None = None
    mode: str | None = None
    load_to: str | None = None
    size: int | None = None
    first_ts: float | None = None
    received_ts: float | None = None
    keys: int | None = None
    up: bool = False
    failed: bool = False
    drained: dict[str, Any] | None = None


@dataclass
class LogParser:
    """Parses one node's log lines in order (a rotated set: oldest file first)."""
    tag: str
    tz: dt.tzinfo = dt.UTC
    events: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    unknown: list[str] = field(default_factory=list)   # the first few, for the report
    ports: dict[str, int] = field(default_factory=dict)  # pid -> own port
    flavours: dict[str, str] = field(default_factory=dict)
    peers: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._seq = 0
        self.pid = "0"
        self.letter = "M"          # the line's role mark: M master, S replica, C child
        self.ts = 0.0
        self.m: dict[str, _MSync] = {}
        self.asking: _MSync | None = None   # the sync whose request is being decided
        self.r: _RSync | None = None
        self.master: str | None = None
        self.down: dict[str, Any] | None = None
        self.next_down_reason: str | None = None
        self.lost_reason: dict[str, str] = {}
        self.limit_ips: dict[str, float] = {}
        self.backlog: bool | None = None
        self.ids: tuple[str, str, int] | None = None   # replid, replid2, second offset
        self.node_ids: dict[str, str] = {}              # pid -> its cluster node id
        self.election: dict[str, int] | None = None     # the delayed election's rank, offset
        self.failover_kind: str | None = None           # the last CLUSTER FAILOVER's kind
        self.failover_kind_ts = 0.0
        self.failover: dict[str, Any] | None = None     # the last failover (its epoch follows)

    # -- driving -------------------------------------------------------------------------------
    def feed_lines(self, lines: Iterable[str]) -> LogParser:
        for line in lines:
            self.feed(line)
        return self

    def feed(self, line: str) -> None:
        s = line.rstrip("\r\n")
        if not s.strip():
            return
        self.counts["lines"] += 1
        parts = split_line(s, self.tz)
        if parts is None:
            if _SIGNAL.match(s):
                self.counts["other"] += 1
            elif _LOGO.match(s):          # the ASCII-art logo (logging to a terminal)
                self.counts["other"] += 1
                pm = re.search(r"Port: (\d+)", s)
                if pm:
                    self.ports.setdefault(self.pid, int(pm.group(1)))
                pp = re.search(r"PID: (\d+)", s)
                if pp:
                    self.pid = pp.group(1)
            else:
                self.counts["log-unparseable"] += 1
            return
        self.pid, self.letter, self.ts, msg = parts
        msg = _PREFIX.sub("", msg, count=1)
        for rx, meth in _COMPILED:
            mt = rx.search(msg) if meth == "known" else rx.match(msg)
            if mt is None:
                continue
            if meth.startswith("fail:"):
                self._fail(meth[5:], mt.groupdict().get("err"))
            else:
                getattr(self, "_" + meth)(mt.groupdict())
            self.counts["replication"] += 1
            return
        if _HINT.search(msg):
            self.counts["log-unknown"] += 1
            if len(self.unknown) < 20:
                self.unknown.append(msg)
        else:
            self.counts["other"] += 1

    def _emit(self, event: str, role: str, peer: str | None, sid: str | None,
              **f: Any) -> dict[str, Any]:
        ev = {"ts": self.ts, "event": event, "node": f"@{self.tag}#{self.pid}", "role": role,
              "peer": peer, "sync_id": sid, "_pid": self.pid}
        ev.update({k: v for k, v in f.items() if v is not None})
        self.events.append(ev)
        if peer:
            self.peers.add(peer)
        return ev

    def _new_id(self) -> str:
        self._seq += 1
        return f"{self.tag}-{self.pid}-{self._seq}"

    def finish(self) -> list[dict[str, Any]]:
        """The events with ``source`` set (per process: a node may change software)."""
        for ev in self.events:
            ev["source"] = self.flavours.get(ev.pop("_pid"), REDIS)
        return self.events

    # -- identity --------------------------------------------------------------------------------
    def _own_port(self, g: dict[str, str]) -> None:
        self.ports[self.pid] = int(g["port"])

    def _flavour(self, g: dict[str, str]) -> None:
        self.flavours[self.pid] = VALKEY if g["flavour"] == "Valkey" else REDIS
        self._restart()

    def _restart(self) -> None:
        """A new process: no sync carries over."""
        self.m.clear()
        self.asking = self.r = self.down = None
        self.backlog = None
        self.ids = None

    def _backlog_created(self, g: dict[str, str]) -> None:
        self.backlog = True
        self.ids = (g["id1"], g["id2"], -1)

    def _backlog_freed(self, g: dict[str, str]) -> None:
        self.backlog = False

    def _shift_ids(self, g: dict[str, str]) -> None:
        self.ids = (g["id1"], g["id2"], int(g["off"]))
        self._amend_down("promoted")

    def _known(self, g: dict[str, str]) -> None:
        pass

    # -- master side -----------------------------------------------------------------------------
    def _asks(self, g: dict[str, str]) -> None:
        peer = g["peer"]
        cur = self.m.get(peer)
        if cur is not None and cur.channel and not cur.online:
            self.asking = None     # the rdb channel's request, or the dual main channel's end
            return
        self.asking = self.m[peer] = _MSync(self._new_id(), self.ts)
        self.peers.add(peer)

    def _decide(self, result: str, reason: str, peer: str | None = None, **f: Any) -> None:
        s = self.asking if peer is None else self.m.get(peer)
        if s is None or s.decision is not None:
            return
        if peer is None:
            peer = next((p for p, x in self.m.items() if x is s), None)
        s.decision = self._emit("psync_decision", "master", peer, s.sid, result=result,
                                reason=reason, **f)

    def _full_requested(self, g: dict[str, str]) -> None:
        if not g["ch"]:
            self._decide("full", "no-history", g["peer"], req_replid="?", req_offset=-1)

    def _replid_mismatch(self, g: dict[str, str]) -> None:
        self.ids = (g["id1"], g["id2"], self.ids[2] if self.ids else -1)
        # the offset asked for is not logged: the id alone would not match the replica's half
        self._decide("full", "replid-mismatch", replid=g["id1"])

    def _second_id_too_far(self, g: dict[str, str]) -> None:
        rid = self.ids[1] if self.ids else None
        self._decide("full", "replid-mismatch", req_replid=rid,
                     req_offset=int(g["off"]) if rid else None)

    def _lack_of_backlog(self, g: dict[str, str]) -> None:
        off = int(g["off"])
        if g["first"] is not None:           # Valkey 9: the backlog's range is logged
            first, last = int(g["first"]), int(g["last"])
            ahead = off > last + 1
            self._decide("full", "offset-ahead" if ahead else "offset-before-backlog",
                         g["peer"], req_replid=g["rid"], req_offset=off,
                         gap=None if ahead else max(0, first - off),
                         backlog_histlen=last - first + 1, master_repl_offset=last)
            return
        no_backlog = self.backlog is False or (g["rid"] is not None and g["first"] is None)
        self._decide("full", "backlog-inactive" if no_backlog else "offset-before-backlog",
                     g["peer"], req_replid=g["rid"], req_offset=off)

    def _offset_ahead(self, g: dict[str, str]) -> None:
        s = self.m.get(g["peer"])
        if s is not None and s.decision is not None:
            s.decision["reason"] = "offset-ahead"
            s.decision.pop("gap", None)

    def _rdb_channel(self, g: dict[str, str]) -> None:
        s = self.m.get(g["peer"])
        if s is not None and s.decision is not None:
            s.channel = True
            if g["kind"] == "dual":   # Valkey's dual channel
                s.decision.update(result="dualchannel", mode=DUAL_CHANNEL)
            else:
                s.decision.update(result="rdbchannel", mode=RDB_CHANNEL)

    def _partial_accepted(self, g: dict[str, str]) -> None:
        peer, n, off = g["peer"], int(g["n"]), int(g["off"])
        s = self.m.get(peer)
        if s is None or s.channel:
            return           # Valkey's dual channel: the main channel resumes after the RDB
        mro = off + n - 1
        self._decide("continue", "continue", peer, req_offset=off, master_repl_offset=mro)
        self._emit("partial_sent", "master", peer, s.sid, offset=off, bytes=n,
                   master_repl_offset=mro)
        self._emit("replica_online", "master", peer, s.sid, duration_ms=0.0)
        s.online = True

    def _waiting(self) -> list[tuple[str, _MSync]]:
        if self.asking is not None and self.asking.decision is None:   # the old SYNC command
            self._decide("full", "replica-requested")
        return [(p, s) for p, s in self.m.items()
                if s.decision is not None and s.decision["result"] != "continue"
                and s.fork is None and not s.online]

    def _bgsave_started(self, g: dict[str, str]) -> None:
        rest = g["rest"]
        mode = (DUAL_CHANNEL if "dual-channel" in rest else RDB_CHANNEL if "rdb-channel" in rest
                else "disk" if g["target"] == "disk" else "diskless")
        for peer, s in self._waiting():
            if mode not in TWO_CHANNELS and s.channel:
                continue
            s.fork = self._emit("fullsync_fork", "master", peer, s.sid, mode=mode)

    def _bgsave_attached(self, g: dict[str, str]) -> None:
        s = self.asking
        for peer, w in self._waiting():
            if w is s:
                w.fork = self._emit("fullsync_fork", "master", peer, w.sid, mode="disk")

    def _end_offset(self, g: dict[str, str]) -> None:
        s = self.m.get(g["peer"])
        if s is not None and s.fork is not None:
            s.fork["offset"] = int(g["off"])

    def _rdb_sent(self, peer: str, s: _MSync) -> None:
        if s.fork is not None and not s.sent:
            s.sent = True
            self._emit("fullsync_rdb_sent", "master", peer, s.sid, mode=s.fork.get("mode"),
                       duration_ms=round((self.ts - s.fork["ts"]) * 1000, 3))

    def _rdb_streamed(self, g: dict[str, str]) -> None:
        s = self.m.get(g["peer"])
        if s is not None:
            self._rdb_sent(g["peer"], s)

    def _rdb_channel_closed(self, g: dict[str, str]) -> None:
        s = self.m.get(g["peer"])
        if s is not None and s.channel:
            self._rdb_sent(g["peer"], s)

    def _replica_online(self, g: dict[str, str]) -> None:
        peer = g["peer"]
        s = self.m.get(peer)
        if s is None or s.online:
            return
        self._rdb_sent(peer, s)
        s.online = True
        mode = s.fork.get("mode") if s.fork else None
        self._emit("replica_online", "master", peer, s.sid, mode=mode,
                   duration_ms=round((self.ts - s.t0) * 1000, 3))

    def _output_limit(self, g: dict[str, str]) -> None:
        info = g["info"]
        fl = re.search(r"\bflags=(\S+)", info)
        ad = re.search(r"\baddr=(\S+):\d+", info)
        if fl and "S" in fl.group(1) and ad:
            self.limit_ips[ad.group(1)] = self.ts

    def _timedout(self, g: dict[str, str]) -> None:
        self.lost_reason[g["peer"]] = "timeout"

    def _replica_lost(self, g: dict[str, str]) -> None:
        peer = g["peer"]
        reason = self.lost_reason.pop(peer, None)
        ip = peer.rsplit(":", 1)[0]
        t = self.limit_ips.get(ip)
        if reason is None and t is not None and self.ts - t <= 10.0:
            del self.limit_ips[ip]
            reason = "output-buffer-limit"
        s = self.m.pop(peer, None)
        self._emit("replica_lost", "master", peer, s.sid if s else self._new_id(),
                   reason=reason or "closed")

    # -- replica side ----------------------------------------------------------------------------
    def _connecting(self, g: dict[str, str]) -> None:
        self.master = g["peer"]
        self.peers.add(self.master)

    def _sync_started(self, g: dict[str, str]) -> None:
        self.r = _RSync(self._new_id(), self.ts)

    def _remit(self, event: str, **f: Any) -> dict[str, Any] | None:
        r = self.r
        if r is None or self.master is None:
            return None
        return self._emit(event, "replica", self.master, r.sid, **f)

    def _since(self, t: float | None) -> float | None:
        return None if t is None else round((self.ts - t) * 1000, 3)

    def _psync_sent(self, g: dict[str, str]) -> None:
        if self.r is not None:
            self.r.psync_ts = self.ts
        self.down = None
        self._remit("psync_sent", req_replid=g["rid"], req_offset=int(g["off"]))

    def _psync_none(self, g: dict[str, str]) -> None:
        self._psync_sent({"rid": "?", "off": "-1"})

    def _reply(self, result: str, **f: Any) -> None:
        r = self.r
        self._remit("psync_reply", result=result, duration_ms=self._since(
            r.psync_ts if r else None), **f)

    def _full_resync(self, g: dict[str, str]) -> None:
        if self.r is not None and self.r.mode in TWO_CHANNELS:
            return
        self._reply("full", replid=g["rid"], offset=int(g["off"]))

    def _rdbchannel_reply(self, g: dict[str, str]) -> None:
        dual = self.flavours.get(self.pid) == VALKEY   # (Valkey's is its dual channel)
        mode = DUAL_CHANNEL if dual else RDB_CHANNEL
        if self.r is not None:
            self.r.mode = mode
        self._reply("dualchannel" if dual else "rdbchannel", mode=mode)

    def _continue_reply(self, g: dict[str, str]) -> None:
        if self.r is not None and self.r.mode not in TWO_CHANNELS:
            self._reply("continue")

    def _partial_up(self, g: dict[str, str]) -> None:
        r = self.r
        if r is None or r.mode in TWO_CHANNELS or g["bg"]:
            return
        r.up = True
        self._remit("link_up", result="continue")

    def _sync_reply(self, g: dict[str, str]) -> None:
        self._reply("sync", error=g["err"])

    def _try_later(self, g: dict[str, str]) -> None:
        self._reply("try-later", error=g["err"])
        self._fail("psync-try-later", g["err"])

    def _first_byte(self, mode: str, to: str, size: int | None) -> None:
        r = self.r
        if r is None:
            return
        r.mode, r.load_to, r.size, r.first_ts = r.mode or mode, to, size, self.ts
        self._remit("rdb_first_byte", mode=r.mode, bytes=size,
                    duration_ms=self._since(r.psync_ts))

    def _rdb_eof(self, g: dict[str, str]) -> None:
        self._first_byte("diskless", g["to"], None)

    def _rdb_sized(self, g: dict[str, str]) -> None:
        self._first_byte("disk", g["to"], int(g["n"]))

    def _rdb_received(self, g: dict[str, str]) -> None:
        r = self.r
        if r is None or r.first_ts is None or r.received_ts is not None:
            return
        r.received_ts = self.ts
        self._remit("rdb_received", mode=r.mode, bytes=r.size,
                    duration_ms=self._since(r.first_ts))

    def _transfer_done(self, g: dict[str, str]) -> None:
        if self.r is not None and self.r.load_to == "disk":
            self._rdb_received(g)

    def _keys_loaded(self, g: dict[str, str]) -> None:
        if self.r is not None and self.r.first_ts is not None:
            self.r.keys = int(g["keys"])

    def _load_done(self, g: dict[str, str]) -> None:
        r = self.r
        if r is None or r.first_ts is None or r.up:
            return
        self._rdb_received(g)
        self._remit("load_done", mode=r.mode, keys=r.keys, bytes=r.size,
                    duration_ms=self._since(r.received_ts))
        r.up = True
        self._remit("link_up", result="full", mode=r.mode,
                    duration_ms=self._since(r.t0))
        if r.drained is not None:        # Valkey drains its buffer before it says so
            r.drained["ts"] = self.ts

    def _drained(self, g: dict[str, str]) -> None:
        if self.r is not None and self.r.mode in TWO_CHANNELS:
            n = g.get("n")
            self.r.drained = self._remit("buffer_drained", bytes=int(n) if n else None)

    def _master_timeout(self, g: dict[str, str]) -> None:
        self.next_down_reason = "timeout"

    def _link_down(self, g: dict[str, str]) -> None:
        reason, self.next_down_reason = self.next_down_reason or "connection-lost", None
        if self.master is not None:   # the session's id (a new one if it began before the log)
            sid = self.r.sid if self.r is not None else self._new_id()
            self.down = self._emit("link_down", "replica", self.master, sid, reason=reason)
        self.r = None

    def _amend_down(self, reason: str) -> None:
        if self.down is not None and self.ts - self.down["ts"] <= 5.0:
            self.down["reason"] = reason
        self.down = None if reason == "promoted" else self.down

    def _promoted(self, g: dict[str, str]) -> None:
        self._amend_down("promoted")
        self.master = None
        self.r = None

    def _replicaof(self, g: dict[str, str]) -> None:
        d = self.down
        if d is not None and d["peer"] != g["peer"]:
            self._amend_down("replicaof")
        self.down = None

    # -- cluster mode ------------------------------------------------------------------------------
    def _cevent(self, event: str, role: str | None, result: str, peer_id: str | None = None,
                **f: Any) -> dict[str, Any]:
        """A cluster_* event (``role`` None: the line's own role mark's)."""
        role = role or ("replica" if self.letter == "S" else "master")
        return self._emit(event, role, None, None, result=result, peer_id=peer_id,
                          node_id=self.node_ids.get(self.pid), **f)

    def _own_id(self, g: dict[str, str]) -> None:
        self.node_ids[self.pid] = g["id"]

    def _node_failing(self, g: dict[str, str]) -> None:
        self._cevent("cluster_node_fail", None, "fail", g["id"], reason="quorum")

    def _node_cleared(self, g: dict[str, str]) -> None:
        what = g["what"]
        reason = "reachable" if what.startswith("replica") else "no-slots" if what else "timeout"
        self._cevent("cluster_node_fail", None, "cleared", g["id"], reason=reason)

    def _election_delayed(self, g: dict[str, str]) -> None:
        self.election = {"rank": int(g["rank"])}
        if g.get("off") is not None:
            self.election["offset"] = int(g["off"])

    def _election_started(self, g: dict[str, str]) -> None:
        el = self.election or {}
        self._cevent("cluster_election", "replica", "started", None,
                     config_epoch=int(g["epoch"]), **el)
        self.election = None

    def _manual_failover(self, g: dict[str, str]) -> None:
        self.failover_kind = "force" if g["kind"] == "Forced" else "manual"
        self.failover_kind_ts = self.ts

    def _election_won(self, g: dict[str, str]) -> None:
        # a manual failover's election ends within its timeout (5 s, CLUSTER_MF_TIMEOUT)
        kind = self.failover_kind if self.failover_kind and \
            self.ts - self.failover_kind_ts <= 10.0 else "auto"
        self.failover = self._cevent("cluster_failover", "master", kind)
        self.failover_kind = None

    def _failover_epoch(self, g: dict[str, str]) -> None:
        if self.failover is not None:
            self.failover["config_epoch"] = int(g["epoch"])
        self.failover = None

    def _takeover(self, g: dict[str, str]) -> None:
        self._cevent("cluster_failover", "master", "takeover")

    def _vote_granted(self, g: dict[str, str]) -> None:
        self._cevent("cluster_election", "master", "granted", g["id"],
                     config_epoch=int(g["epoch"]))

    def _vote_denied(self, g: dict[str, str]) -> None:
        why = g["why"]
        reason = next((r for key, r in _DENIED if key in why), "other")
        self._cevent("cluster_election", "master", "denied", g["id"], reason=reason)

    def _cluster_state(self, g: dict[str, str]) -> None:
        self._cevent("cluster_state", None, g["state"])

    def _fail(self, reason: str, err: str | None) -> None:
        r = self.r
        if r is None or r.failed or r.up:
            return
        r.failed = True
        self._remit("sync_failed", reason=reason, error=(err or "").strip() or None)


def parse_lines(lines: Iterable[str], tag: str = "log", tz: dt.tzinfo = dt.UTC) -> LogParser:
    """Parse one node's lines (oldest first); the parser holds events, counts and identity."""
    p = LogParser(tag, tz)
    p.feed_lines(lines)
    p.finish()
    return p

