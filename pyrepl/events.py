"""Sync events: the one schema shared by the daemon's log writer and the Spark job.

Theory of operation: every replication decision and phase becomes one flat JSON object (one
NDJSON line in ``sync-log-file``). ``FIELDS`` is the schema — name, type, meaning — and both the
writer (:class:`SyncEventLog`) and the analytics job (which builds its Spark schema from it)
read it, so they cannot drift apart. Events of one sync share ``sync_id``; every full sync
carries a ``reason``; every phase event carries ``duration_ms`` and ``bytes``.

The core only *produces* events (sans-io): it calls :meth:`SyncEventLog.emit` with the clock it
was given; the I/O shell drains ``pending`` to the file (with size-based rotation).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# (name, type, meaning). Types: "string", "long", "double". All but ts/event/node are optional.
FIELDS: list[tuple[str, str, str]] = [
    ("ts", "double", "unix time in seconds (ms precision) when the event happened"),
    ("event", "string", "event name, one of EVENTS"),
    ("node", "string", "the node that logged it: announced host:port"),
    ("run_id", "string", "the logging process's run id (changes on restart)"),
    ("role", "string", "master | replica: the side of the link that logged it"),
    ("peer", "string", "the other end: replica host:listening-port, or master host:port"),
    ("sync_id", "string", "joins the events of one sync attempt"),
    ("replid", "string", "replication id in effect (for a decision: the master's replid)"),
    ("req_replid", "string", "PSYNC: the id the replica asked for ('?' = none)"),
    ("req_offset", "long", "PSYNC: the offset the replica asked for"),
    ("result", "string", "psync decision: continue | full | rdbchannel | dualchannel | "
                         "resume (a cut full sync going on: repl-full-sync-resume-window)"),
    ("reason", "string", "why: a psync reason code, or a failure / disconnect reason"),
    ("mode", "string", "full sync mode: rdb-channel | dual-channel | diskless | disk"),
    ("offset", "long", "replication offset the event refers to"),
    ("master_repl_offset", "long", "the master's offset at the event"),
    ("gap", "long", "offset-before-backlog: bytes missing before the backlog's first byte"),
    ("backlog_size", "long", "repl-backlog-size at the event"),
    ("backlog_histlen", "long", "bytes of history in the backlog at the event"),
    ("bytes", "long", "bytes moved by this phase (RDB, backlog, buffer)"),
    ("duration_ms", "double", "how long this phase took"),
    ("keys", "long", "keys loaded / saved"),
    ("buffer_peak", "long", "peak bytes buffered during the sync (replica buffer or master "
                            "output buffer for this replica)"),
    ("buffer_limit", "long", "the limit that buffer had"),
    ("spilled", "long", "bytes of that buffer that went to disk (repl-full-sync-spill-threshold)"),
    ("queued_ms", "double", "fullsync_fork: how long the replica waited for a full-sync turn "
                            "(repl-full-sync-max-concurrent)"),
    ("max_bandwidth", "long", "fullsync_fork / fullsync_rdb_sent: repl-sync-max-bandwidth "
                              "in effect, bytes/s (0: unpaced)"),
    ("lag_bytes", "long", "master_repl_offset - replica ack offset"),
    ("lag_ms", "double", "ms since the replica's last ack"),
    ("error", "string", "error text for failures"),
    ("command", "string", "propagation_error: the command that failed on the replica"),
    # Events that pyrepl did not log itself (issue 16): from Redis/Valkey log files and from
    # `pyrepl collect`'s INFO samples.
    ("source", "string", "where the line comes from: pyrepl (when absent) | redis-log | "
                         "valkey-log | collector"),
    ("inferred", "long", "1 when the event was inferred from the difference between two INFO "
                         "samples (pyrepl collect), not logged when it happened"),
    ("since", "double", "an inferred event: the previous sample's time (it happened in "
                        "(since, ts])"),
    # `pyrepl collect`'s info_sample: a node's own state, from INFO (names as INFO's)
    ("server", "string", "info_sample: the software and version (redis 7.0.15, valkey 8.1.1, "
                         "pyrepl 0.1.0)"),
    ("replid2", "string", "master_replid2: the previous replication id, valid up to "
                          "second_repl_offset"),
    ("second_repl_offset", "long", "the last offset of replid2's history (-1: none)"),
    ("link_status", "string", "a replica's master_link_status: up | down"),
    ("sync_in_progress", "long", "a replica's master_sync_in_progress: 1 while it receives a "
                                 "snapshot"),
    ("replicas", "long", "connected_slaves: the node's connected replicas"),
    ("sync_full", "long", "INFO stats sync_full: full syncs served since the process started"),
    ("sync_partial_ok", "long", "INFO stats sync_partial_ok: partial syncs accepted"),
    ("sync_partial_err", "long", "INFO stats sync_partial_err: partial syncs refused (a full "
                                 "sync followed)"),
    ("repl_buffers_mem", "long", "mem_total_replication_buffers (backlog and replica output "
                                 "buffers, shared since Redis 7), else mem_replication_backlog + "
                                 "mem_clients_slaves"),
    ("backlog_mem", "long", "mem_replication_backlog: memory of the backlog"),
    # cluster mode (issue 42): the cluster_* events
    ("node_id", "string", "cluster_*: the logging node's cluster node id (40 hex digits)"),
    ("peer_id", "string", "cluster_*: the other node's id: the old master, the candidate, "
                          "the failing node, the slots' other owner"),
    ("shard_id", "string", "cluster_*: the logging node's shard id"),
    ("slots", "string", "cluster_slots: the slots, as ranges (0-5460,5462)"),
    ("config_epoch", "long", "cluster_*: the config epoch the event set or asked for"),
    ("rank", "long", "cluster_election: the candidate's rank among its master's replicas"),
]
FIELD_TYPES = {name: t for name, t, _ in FIELDS}

# name -> meaning. Master-side and replica-side events are logged by each node for its side.
EVENTS: dict[str, str] = {
    # master side
    "psync_decision": "master answered a PSYNC: result, reason, gap, backlog state",
    "fullsync_fork": "master forked the snapshot child (offset = snapshot offset)",
    "fullsync_rdb_sent": "master finished sending the snapshot (bytes, duration_ms)",
    "partial_sent": "master sent the backlog for +CONTINUE (bytes)",
    "replica_online": "the replica link is online (duration_ms since the PSYNC)",
    "replica_lost": "a replica link closed (reason: closed, timeout, output-buffer-limit, ...)",
    "replica_lag": "periodic lag sample of an online replica (lag_bytes, lag_ms)",
    "failover": "a FAILOVER step (result: requested, in-progress, done, aborted; reason; peer "
                "= the target)",
    # replica side
    "link_down": "the replica lost its master link (reason)",
    "psync_sent": "the replica sent PSYNC (req_replid, req_offset)",
    "psync_reply": "the replica got +CONTINUE / +FULLRESYNC / +RDBCHANNELSYNC",
    "rdb_first_byte": "first snapshot byte arrived (duration_ms since PSYNC)",
    "rdb_received": "the snapshot was fully received (bytes, duration_ms)",
    "load_done": "the snapshot was loaded (keys, duration_ms)",
    "buffer_drained": "rdb channel: the buffered stream was applied (bytes, buffer_peak)",
    "link_up": "the link is up after a sync (mode, duration_ms since link_down or start)",
    "caught_up": "the replica reached the master's offset seen at link up (duration_ms)",
    "sync_failed": "a sync attempt failed (reason, error)",
    "propagation_error": "a command of the master's stream failed on the replica (command, "
                         "error, offset): the datasets may differ",
    # the node itself (pyrepl collect: from INFO samples; inferred ones have inferred=1)
    "info_sample": "a periodic INFO sample of a node's own state (role, offsets, link status, "
                   "backlog, replication buffers, sync counters); only counted by the analytics",
    "role_change": "the node's role or master changed (role = the new one; reason promoted, "
                   "replicaof or restart; peer = the new master)",
    "replid_change": "the node's master_replid changed (replid, replid2, second_repl_offset; "
                     "reason promoted, shifted, full-sync, backlog-created or restart)",
    "restart": "the node restarted: a new run_id (ts = estimated start from its uptime)",
    # cluster mode (issue 42), logged by a node of a Redis Cluster for what it decided
    "cluster_failover": "this node became its shard's master (result auto | manual | force | "
                        "takeover; peer_id, peer = the old master; config_epoch)",
    "cluster_election": "a replica started an election (result started; rank, offset, "
                        "config_epoch = the election's epoch), or a master voted in one "
                        "(result granted | denied; reason; peer_id = the candidate)",
    "cluster_node_fail": "this node marked another FAIL (result fail, reason quorum) or "
                         "cleared its FAIL (result cleared; reason reachable | no-slots | "
                         "timeout); peer_id, peer = that node",
    "cluster_slots": "slots changed in this node's view of itself (result gained | lost | "
                     "migrating | importing | stable; slots; peer_id = the other owner), "
                     "or the slots it starts with (result owned)",
    "cluster_state": "this node's view of the cluster changed (result ok | fail)",
}


def add_fields(ev: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Add ``fields`` (None values left out) to the event ``ev``, typed as FIELDS says;
    ValueError for a name that is not a field."""
    for k, v in fields.items():
        if v is None:
            continue
        t = FIELD_TYPES.get(k)
        if t is None:
            raise ValueError(f"unknown sync event field {k!r}")
        ev[k] = float(v) if t == "double" else int(v) if t == "long" else str(v)
    return ev


# A lag sample is the bulk of any sync log (one per online replica every
# repl-ping-replica-period), so it is written compact: only the fields the analytics read of it,
# no role (always master) and no sync id, and its run id cut to RUN_ID_PREFIX characters (as in
# sync ids: enough to tell a master's runs apart). ~165 bytes a line instead of ~253. Readers
# take both forms: the fields left out were never read.
LAG_EVENT = "replica_lag"
LAG_DROPPED = ("role", "sync_id")
RUN_ID_PREFIX = 8


class SyncEventLog:
    """Collects events; ``sink`` (set by the I/O shell) receives each finished event dict."""

    def __init__(self, node: str = "", run_id: str = "") -> None:
        self.node = node
        self.run_id = run_id
        self.sink: Callable[[dict[str, Any]], None] | None = None
        self.recent: list[dict[str, Any]] = []  # last events, for tests and DEBUG
        self._seq = 0

    def new_sync_id(self, now_ms: int) -> str:
        self._seq += 1
        return f"{self.run_id[:8]}-{now_ms}-{self._seq}"

    def emit(self, now_ms: int, event: str, role: str, **fields: Any) -> dict[str, Any]:
        if event not in EVENTS:
            raise ValueError(f"unknown sync event {event!r}")
        ev: dict[str, Any] = {"ts": round(now_ms / 1000.0, 3), "event": event,
                              "node": self.node, "run_id": self.run_id, "role": role}
        if event == LAG_EVENT:
            ev["run_id"] = self.run_id[:RUN_ID_PREFIX]
            del ev["role"]
            fields = {k: v for k, v in fields.items() if k not in LAG_DROPPED}
        add_fields(ev, fields)
        self.recent.append(ev)
        if len(self.recent) > 1000:
            del self.recent[:500]
        if self.sink is not None:
            self.sink(ev)
        return ev


def to_json_line(ev: dict[str, Any]) -> str:
    return json.dumps(ev, separators=(",", ":"), sort_keys=False) + "\n"
