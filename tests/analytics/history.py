"""A replication fleet's history, drawn by hypothesis, and what every kind of source records of
it: the ground truth the analytics' counts are held to.

Theory of operation: a small fleet (masters with replicas, sometimes a chained replica; each
node Redis 7, Redis 8, Valkey 8 or pyrepl) runs a drawn list of operations: link flaps (a
partial sync), outages longer than the backlog (a full sync, ``offset-before-backlog``),
promotions by hand and Sentinel-driven failovers (the old master crashed, restarted later and
sent REPLICAOF), restarts of replicas and of masters (with or without their replication ids
kept), and moves of a replica to another node (``replid-mismatch``, or a partial one when the
new master shares the history). :class:`Model` plays them on the nodes' replication state
(ids, offsets, backlogs, replica lists, the INFO counters) and records every sync that happened
(:class:`Sync`): one row per sync, whatever saw it.

Each source renders what it would have recorded, from the same calls:

* :class:`RedisLog`: the node's log file, line for line as Redis 7.0, Redis 8.6 and Valkey 8
  write it (the wordings of ``tests/data/redislog/``, the real logs), with the noise lines
  around (start-up, forks, shutdown);
* :class:`PyreplLog`: a pyrepl node's sync events, as ``pyrepl.replication`` logs them;
* the collector: the nodes' INFO state at poll times (after some operations: a poll never falls
  inside one), run through ``pyrepl.collect``'s real inference (:class:`Fleet`).

:func:`sources` gives the inputs of a subset of sources (each node's own log or events, the
collector on some nodes); :func:`expected` the syncs that subset can see at all: those whose
master or replica left its own record, or whose master the collector polled (its counters).
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from pyrepl.collect.info import NO_REPLID, ReplicaEntry, Sample
from pyrepl.collect.links import Fleet
from pyrepl.events import add_fields, to_json_line

T0 = 1_764_460_800.0  # 2025-11-30T00:00:00Z
FLAVOURS = ("redis7", "redis8", "valkey8", "pyrepl")
SERVER = {"redis7": "redis 7.0.15", "redis8": "redis 8.6.3", "valkey8": "valkey 8.1.1",
          "pyrepl": "pyrepl 0.1.0"}
BACKLOG = 1 << 20


@dataclass(frozen=True)
class Sync:
    ts: float
    master: str
    replica: str
    kind: str      # partial | full
    reason: str    # continue | no-history | offset-before-backlog | replid-mismatch
    mode: str = ""  # full: disk | diskless | rdb-channel | dual-channel


@dataclass
class Node:
    addr: str
    flavour: str
    pid: int = 0
    run_id: str = ""
    started: float = 0.0
    alive: bool = True
    master: str | None = None
    link_up: bool = False
    down_since: float | None = None
    replid: str = ""
    replid2: str = NO_REPLID
    off2: int = -1
    offset: int = 0
    backlog: bool = False
    first_byte: int = 1
    replicas: list[str] = field(default_factory=list)   # connected, in INFO's slaveN order
    acked: dict[str, int] = field(default_factory=dict)
    sync_full: int = 0
    sync_partial_ok: int = 0
    sync_partial_err: int = 0
    cached: bool = False   # a replica that can ask PSYNC replid offset+1
    diskless: bool = True
    persistent: bool = True  # a restart keeps its replication ids (RDB)

    @property
    def port(self) -> int:
        return int(self.addr.rsplit(":", 1)[1])


def _hex(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(40))


# -- the sources' renderers ------------------------------------------------------------------

class Recorder:
    """What a source records of the model's calls (one node's side; nothing by default)."""

    def start(self, t: float, n: Node) -> None: ...
    def stop(self, t: float, n: Node, crash: bool) -> None: ...
    def lost(self, t: float, n: Node, peer: str, side: str, why: str) -> None: ...
    def connecting(self, t: float, n: Node, master: str, again: bool) -> None: ...
    def connect_error(self, t: float, n: Node, master: str) -> None: ...
    def promoted(self, t: float, n: Node, old: str, off2: int) -> None: ...
    def replicaof(self, t: float, n: Node, master: str, was_master: bool) -> None: ...
    def sync_master(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                    created: bool, second_upto: int | None) -> None: ...
    def sync_replica(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                     new_replid: str) -> None: ...


class RedisLog(Recorder):
    """One node's log file as Redis 7.0 / 8.6 or Valkey 8 writes it."""

    def __init__(self, flavour: str, rng: random.Random) -> None:
        self.flavour = flavour
        self.rng = rng
        self.lines: list[str] = []
        self.valkey = flavour == "valkey8"
        self.M = "PRIMARY" if self.valkey else "MASTER"
        self.m = "primary" if self.valkey else "master"
        self.P = "Primary" if self.valkey else "Master"
        self.warn = "#" if flavour == "redis7" else "*"

    def _w(self, t: float, n: Node, mark: str, msg: str, role: str | None = None,
           pid: int | None = None) -> None:
        role = role or ("S" if n.master else "M")
        stamp = dt.datetime.fromtimestamp(t, dt.UTC)
        ts = stamp.strftime("%d %b %Y %H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"
        self.lines.append(f"{pid or n.pid}:{role} {ts} {mark} {msg}\n")

    def start(self, t: float, n: Node) -> None:
        name = "Valkey" if self.valkey else "Redis"
        version = {"redis7": "7.0.15", "redis8": "8.6.3", "valkey8": "8.1.1"}[self.flavour]
        first = "M" if self.valkey else "C"
        self._w(t, n, self.warn, f"oO0OoO0OoO0Oo {name} is starting oO0OoO0OoO0Oo", first)
        self._w(t, n, self.warn, f"{name} version={version}, bits=64, commit=00000000, "
                f"modified=0, pid={n.pid}, just started", first)
        self._w(t, n, self.warn, "Configuration loaded", first)
        self._w(t, n, "*", "monotonic clock: POSIX clock_gettime")
        self._w(t, n, "*", f"Running mode=standalone, port={n.port}.")
        self._w(t, n, self.warn, "Server initialized")
        if n.persistent and n.offset:
            self._w(t, n, "*", "DB loaded from disk: 0.001 seconds")
        self._w(t, n, "*", "Ready to accept connections" + ("" if self.flavour == "redis7"
                                                           else " tcp"))

    def stop(self, t: float, n: Node, crash: bool) -> None:
        if crash:
            return      # kill -9: the log just ends
        self.lines.append(f"{n.pid}:signal-handler ({int(t)}) Received SIGTERM scheduling "
                          f"shutdown...\n")
        self._w(t, n, self.warn, "User requested shutdown...")
        if n.replicas:
            self._w(t, n, "*", "Waiting for replicas before shutting down.")
        self._w(t, n, self.warn, f"{'Valkey' if self.valkey else 'Redis'} is now ready to "
                f"exit, bye bye...")

    def lost(self, t: float, n: Node, peer: str, side: str, why: str) -> None:
        if side == "master":
            self._w(t, n, self.warn, f"Connection with replica {peer} lost.")
            return
        if why == "timeout":
            self._w(t, n, self.warn, f"{self.M} timeout: no data nor PING received...")
        self._w(t, n, self.warn, f"Connection with {self.m} lost.")
        self._w(t, n, "*", f"Caching the disconnected {self.m} state.")

    def connecting(self, t: float, n: Node, master: str, again: bool) -> None:
        self._w(t, n, "*", f"{'Reconnecting' if again else 'Connecting'} to {self.M} {master}")
        self._w(t, n, "*", f"{self.M} <-> REPLICA sync started")

    def connect_error(self, t: float, n: Node, master: str) -> None:
        self.connecting(t, n, master, True)
        self._w(t, n, self.warn, "Error condition on socket for SYNC: Connection refused")

    def promoted(self, t: float, n: Node, old: str, off2: int) -> None:
        self._w(t, n, self.warn, f"Connection with {self.m} lost.", "M")
        self._w(t, n, "*", f"Caching the disconnected {self.m} state.", "M")
        self._w(t, n, "*", f"Discarding previously cached {self.m} state.", "M")
        self._w(t, n, self.warn, f"Setting secondary replication ID to {old}, valid up to "
                f"offset: {off2}. New replication ID is {n.replid}", "M")
        self._w(t, n, "*", f"{self.M} MODE enabled (user request from 'id=7 addr=127.0.0.1:"
                f"40000 laddr=127.0.0.1:{n.port} fd=9 name= age=0 idle=0 flags=N db=0')", "M")

    def replicaof(self, t: float, n: Node, master: str, was_master: bool) -> None:
        if was_master:
            self._w(t, n, "*", "Before turning into a replica, using my own master parameters "
                    "to synthesize a cached master: I may be able to synchronize with the new "
                    "master with just a partial transfer.", "S")
        self._w(t, n, "*", f"Connecting to {self.M} {master}", "S")
        self._w(t, n, "*", f"{self.M} <-> REPLICA sync started", "S")
        self._w(t, n, "*", f"REPLICAOF {master} enabled (user request from 'id=8 addr=127.0.0."
                f"1:40002 laddr=127.0.0.1:{n.port} fd=9 name= age=0 idle=0 flags=N db=0')", "S")

    def sync_master(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                    created: bool, second_upto: int | None) -> None:
        w, r = self._w, s.replica
        w(t, n, "*", f"Replica {r} asks for synchronization")
        if s.kind == "partial":
            w(t, n, "*", f"Partial resynchronization request from {r} accepted. Sending "
              f"{n.offset - req[1] + 1} bytes of backlog starting from offset {req[1]}.")
            return
        if s.reason == "no-history":
            w(t, n, "*", f"Full resync requested by replica {r}"
              + (" " if self.flavour == "redis8" else ""))
        elif s.reason == "replid-mismatch" and second_upto is not None:
            w(t, n, "*", f"Partial resynchronization not accepted: Requested offset for second "
              f"ID was {req[1]}, but I can reply up to {second_upto}")
        elif s.reason == "replid-mismatch":
            w(t, n, "*", f"Partial resynchronization not accepted: Replication ID mismatch "
              f"(Replica asked for '{req[0]}', my replication IDs are '{n.replid}' and "
              f"'{n.replid2}')")
        else:
            w(t, n, "*", f"Unable to partial resync with replica {r} for lack of backlog "
              f"(Replica request was: {req[1]}).")
        if created:
            w(t, n, "*", f"Replication backlog created, my new replication IDs are '{n.replid}' "
              f"and '{n.replid2}'")
        child = n.pid + 1 + self.rng.randrange(50)
        t1 = t + d
        if s.mode == "rdb-channel":
            w(t, n, "*", f"Replica {r} is capable of rdb channel synchronization, and partial "
              f"sync isn't possible. Full sync will continue with dedicated rdb channel.")
            w(t, n, "*", f"Replica {r} asks for synchronization")
            w(t, n, "*", f"Full resync requested by replica {r} (rdb-channel)")
            w(t, n, "*", "Starting BGSAVE for SYNC with target: replicas sockets (rdb-channel)")
            w(t, n, "*", f"Starting to deliver RDB and replication stream to replica: {r}")
            w(t, n, "*", f"Background RDB transfer started by pid {child} to replica socket")
            w(t1, n, "*", "BGSAVE done, 200 keys saved, 0 keys skipped, 4714 bytes written.",
              "C", child)
            w(t1, n, "*", f"Connection with replica (rdbchannel) {r} lost.")
            w(t1, n, "*", f"Synchronization with replica {r} succeeded")
        elif s.mode == "dual-channel":
            for msg in (
                    f"Dual channel replication: Replica {r} is capable of dual channel "
                    f"synchronization, and partial sync isn't possible. Full sync will continue "
                    f"with dedicated RDB channel.",
                    f"Replica {r} asks for synchronization",
                    "Starting BGSAVE for SYNC with target: replicas sockets using: dual-channel",
                    f"Dual channel replication: Sending to replica {r} RDB end offset "
                    f"{n.offset} and client-id 6",
                    f"Background RDB transfer started by pid {child} to direct socket to "
                    f"replica",
                    f"Replica {r} asks for synchronization",
                    f"Partial resynchronization request from {r} accepted. Sending 0 bytes of "
                    f"backlog starting from offset {n.offset + 1}."):
                w(t, n, "*", msg)
            w(t1, n, "*", "Background RDB transfer terminated with success")
            w(t1, n, "*", f"Streamed RDB transfer with replica {r} succeeded (socket). Waiting "
              f"for REPLCONF ACK from replica to enable streaming")
            w(t1, n, "*", f"RDB transfer completed, rdb only replica ({r}) should be "
              f"disconnected asap")
            w(t1, n, "*", f"Dual channel replication: Replica {r} rdb channel disconnected.")
            w(t1, n, "*", f"Synchronization with replica {r} succeeded")
        elif s.mode == "diskless":
            w(t, n, "*", "Starting BGSAVE for SYNC with target: replicas sockets")
            w(t, n, "*", f"Background RDB transfer started by pid {child}")
            w(t, n, self.warn, "Diskless rdb transfer, done reading from pipe, 1 replicas "
              "still up.")
            w(t1, n, "*", "Background RDB transfer terminated with success")
            w(t1, n, "*", f"Streamed RDB transfer with replica {r} succeeded (socket). Waiting "
              f"for REPLCONF ACK from {'replica' if self.valkey else 'slave'} to enable "
              f"streaming")
            w(t1, n, "*", f"Synchronization with replica {r} succeeded")
        else:
            w(t, n, "*", "Starting BGSAVE for SYNC with target: disk")
            w(t, n, "*", f"Background saving started by pid {child}")
            w(t1, n, "*", "DB saved on disk", "C", child)
            w(t1, n, "*", "Background saving terminated with success")
            w(t1, n, "*", f"Synchronization with replica {r} succeeded")

    def sync_replica(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                     new_replid: str) -> None:
        w, M, m, P = self._w, self.M, self.m, self.P
        w(t, n, "*", "Non blocking connect for SYNC fired the event.")
        w(t, n, "*", f"{P} replied to PING, replication can continue...")
        if req[0] == "?":
            w(t, n, "*", f"Partial resynchronization not possible (no cached {m})")
        else:
            w(t, n, "*", f"Trying a partial resynchronization (request {req[0]}:{req[1]}).")
        if s.kind == "partial":
            w(t, n, "*", f"Successful partial resynchronization with {m}.")
            if new_replid != req[0]:
                w(t, n, self.warn, f"{P} replication ID changed to {new_replid}")
            w(t, n, "*", f"{M} <-> REPLICA sync: {P} accepted a Partial Resynchronization.")
            return
        t1 = t + d
        keys = f"Done loading RDB, keys loaded: {self.rng.randrange(1000)}, keys expired: 0."
        load = "Loading RDB produced by " + ("Valkey version 8.1.1" if self.valkey else
                                              "version " + ("7.0.15" if self.flavour == "redis7"
                                                            else "8.6.3"))
        if s.mode == "rdb-channel":
            w(t, n, "*", "PSYNC is not possible, initialize RDB channel.")
            w(t, n, "*", "Starting to receive RDB and replication stream in parallel.")
            w(t, n, "*", f"{M} <-> REPLICA sync: receiving streamed RDB from {m} with EOF to "
              f"disk")
            self._loaded(t1, n, load, keys, flush_first=False)
            w(t1, n, "*", f"{M} <-> REPLICA sync: Starting to stream replication buffer into "
              f"the db (0 bytes).")
            w(t1, n, "*", f"{M} <-> REPLICA sync: Successfully streamed replication buffer into "
              f"the db (0 bytes in total)")
            return
        if s.mode == "dual-channel":
            for msg in (
                    "Dual channel replication: PSYNC is not possible, initialize RDB channel.",
                    f"Dual channel replication: Trying a partial resynchronization using main "
                    f"channel (request {new_replid}:{n.offset + 1}).",
                    f"Dual channel replication: {M} <-> REPLICA sync: {P} accepted a Partial "
                    f"Resynchronization, RDB load in background.",
                    "Replica main thread creating Bio thread to save RDB to disk",
                    f"Replica bio thread: {M} <-> REPLICA sync: receiving streamed RDB from {m} "
                    f"with EOF to disk"):
                w(t, n, "*", msg)
            w(t1, n, "*", "Replica bio thread: Done downloading RDB")
            w(t1, n, "*", "Loading the RDB and finalizing primary-replica sync...")
            self._loaded(t1, n, load, keys, flush_first=False,
                         flush="RDB signature and version check passed. Flushing old data",
                         then="Dual channel replication: Successfully streamed replication "
                         "data into memory")
            return
        w(t, n, "*", f"Full resync from {m}: {new_replid}:{n.offset}")
        if s.mode == "diskless":
            w(t, n, "*", f"{M} <-> REPLICA sync: receiving streamed RDB from {m} with EOF to "
              f"disk")
        else:
            w(t, n, "*", f"{M} <-> REPLICA sync: receiving {self.rng.randrange(100, 10 ** 6)} "
              f"bytes from {m} to disk")
        self._loaded(t1, n, load, keys, flush_first=True)

    def _loaded(self, t: float, n: Node, load: str, keys: str, flush_first: bool,
                flush: str = "", then: str = "") -> None:
        """The load of a received snapshot, in the order the sync's kind logs it."""
        lines = [f"{self.M} <-> REPLICA sync: Loading DB in memory",
                 flush or f"{self.M} <-> REPLICA sync: Flushing old data"]
        for msg in [*(lines[::-1] if flush_first else lines), load, keys,
                    *([then] if then else []), f"{self.M} <-> REPLICA sync: Finished with success"]:
            self._w(t, n, "*", msg)


class PyreplLog(Recorder):
    """A pyrepl node's sync events (``sync-log-file``), as its replication code logs them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.events: list[dict[str, Any]] = []
        self.seq = 0

    def _e(self, t: float, n: Node, event: str, role: str, **f: Any) -> None:
        ev: dict[str, Any] = {"ts": round(t, 3), "event": event, "node": n.addr,
                              "run_id": n.run_id, "role": role}
        self.events.append(add_fields(ev, f))

    def _sid(self, n: Node) -> str:
        self.seq += 1
        return f"{n.port}-{n.pid}-{self.seq}"

    def lost(self, t: float, n: Node, peer: str, side: str, why: str) -> None:
        if side == "master":
            self._e(t, n, "replica_lost", "master", peer=peer, reason="closed",
                    offset=n.offset)
        else:
            self._e(t, n, "link_down", "replica", peer=peer, reason=(
                "timeout" if why == "timeout" else "connection-lost"), offset=n.offset)

    def connect_error(self, t: float, n: Node, master: str) -> None:
        self._e(t, n, "sync_failed", "replica", peer=master, sync_id=self._sid(n),
                reason="connect-error", error="Connection refused")

    def promoted(self, t: float, n: Node, old: str, off2: int) -> None:
        self._e(t, n, "link_down", "replica", peer=None, reason="promoted", offset=off2)

    def replicaof(self, t: float, n: Node, master: str, was_master: bool) -> None:
        if not was_master:
            self._e(t, n, "link_down", "replica", peer=master, reason="replicaof",
                    offset=n.offset)

    def sync_master(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                    created: bool, second_upto: int | None) -> None:
        sid = self._sid(n)
        result = {"rdb-channel": "rdbchannel", "dual-channel": "dualchannel"}.get(
            s.mode, "full") if s.kind == "full" else "continue"
        gap = n.first_byte - req[1] if s.reason == "offset-before-backlog" else None
        self._e(t, n, "psync_decision", "master", peer=s.replica, sync_id=sid,
                replid=n.replid, req_replid=req[0], req_offset=req[1], result=result,
                reason=s.reason, gap=gap, master_repl_offset=n.offset, backlog_size=BACKLOG,
                backlog_histlen=n.offset - n.first_byte + 1 if n.backlog else 0)
        if s.kind == "partial":
            self._e(t, n, "partial_sent", "master", peer=s.replica, sync_id=sid,
                    offset=req[1], bytes=n.offset - req[1] + 1)
            self._e(t, n, "replica_online", "master", peer=s.replica, sync_id=sid,
                    duration_ms=0.0)
            return
        self._e(t, n, "fullsync_fork", "master", peer=s.replica, sync_id=sid, mode=s.mode,
                offset=n.offset, keys=100)
        self._e(t + d, n, "fullsync_rdb_sent", "master", peer=s.replica, sync_id=sid,
                mode=s.mode, bytes=4714, duration_ms=d * 1000)
        self._e(t + d, n, "replica_online", "master", peer=s.replica, sync_id=sid,
                mode=s.mode, duration_ms=d * 1000, buffer_peak=0)

    def sync_replica(self, t: float, n: Node, s: Sync, req: tuple[str, int], d: float,
                     new_replid: str) -> None:
        sid, m = self._sid(n), s.master
        self._e(t, n, "psync_sent", "replica", peer=m, sync_id=sid, req_replid=req[0],
                req_offset=req[1])
        if s.kind == "partial":
            self._e(t, n, "psync_reply", "replica", peer=m, sync_id=sid, result="continue")
            self._e(t, n, "link_up", "replica", peer=m, sync_id=sid, result="continue",
                    duration_ms=0.0)
            return
        result = {"rdb-channel": "rdbchannel", "dual-channel": "dualchannel"}.get(s.mode,
                                                                                  "full")
        two = s.mode in ("rdb-channel", "dual-channel")
        self._e(t, n, "psync_reply", "replica", peer=m, sync_id=sid, result=result,
                mode=s.mode if two else None)
        self._e(t, n, "rdb_first_byte", "replica", peer=m, sync_id=sid, mode=s.mode,
                duration_ms=1.0)
        self._e(t + d, n, "rdb_received", "replica", peer=m, sync_id=sid, mode=s.mode,
                bytes=4714, duration_ms=d * 1000)
        self._e(t + d, n, "load_done", "replica", peer=m, sync_id=sid, mode=s.mode, keys=100)
        self._e(t + d, n, "link_up", "replica", peer=m, sync_id=sid, mode=s.mode,
                result="full")
        if two:
            self._e(t + d, n, "buffer_drained", "replica", peer=m, sync_id=sid, bytes=0,
                    buffer_peak=0)


# -- the model -------------------------------------------------------------------------------

class Model:
    """The fleet's replication state, played operation by operation (see the module doc)."""

    def __init__(self, rng: random.Random, flavours: list[str], masters: int,
                 shape: list[int]) -> None:
        self.rng = rng
        self.t = T0
        self.nodes: dict[str, Node] = {}
        self.syncs: list[Sync] = []
        self.sync_runs: list[str] = []   # the run_id of each sync's master when it happened
        self.polls: list[tuple[float, dict[str, Sample]]] = []
        self.logs: dict[str, RedisLog] = {}
        self.pylogs: dict[str, PyreplLog] = {}
        port = 7000
        addrs = []
        for f in flavours:
            port += rng.randrange(1, 90)
            a = f"127.0.0.1:{port}"
            addrs.append(a)
            self.nodes[a] = Node(a, f, diskless=rng.random() < 0.6)
            if f == "pyrepl":
                self.pylogs[a] = PyreplLog(rng)
            else:
                self.logs[a] = RedisLog(f, rng)
        # the first ``masters`` nodes are masters; each other node follows shape[i]: an index
        # of an earlier node (a chained replica when that node is itself a replica)
        for i, a in enumerate(addrs[masters:], masters):
            self.nodes[a].master = addrs[shape[i - masters] % i]
        for a in addrs:
            self._boot(self.nodes[a])
        for a in addrs[masters:]:
            self.t += 0.05
            n = self.nodes[a]
            self.rec(n).connecting(self.t, n, n.master, False)  # type: ignore[arg-type]
            self._attach(n, self.nodes[n.master], fresh=True)  # type: ignore[index]

    # -- plumbing --------------------------------------------------------------------------
    def rec(self, n: Node) -> Recorder:
        return self.logs.get(n.addr) or self.pylogs.get(n.addr) or Recorder()

    def _boot(self, n: Node) -> None:
        n.pid = self.rng.randrange(1000, 60000)
        n.run_id = _hex(self.rng)
        n.started = self.t
        n.alive = True
        if not n.replid or not n.persistent:
            n.replid, n.replid2, n.off2 = _hex(self.rng), NO_REPLID, -1
            n.offset, n.backlog, n.first_byte, n.cached = 0, False, 1, False
        n.sync_full = n.sync_partial_ok = n.sync_partial_err = 0
        n.replicas, n.acked = [], {}
        self.rec(n).start(self.t, n)

    def subtree(self, n: Node) -> list[Node]:
        out = []
        for r in n.replicas:
            out.append(self.nodes[r])
            out += self.subtree(self.nodes[r])
        return out

    def mode(self, m: Node, r: Node) -> str:
        """How ``m`` sends ``r`` a snapshot: Redis 8's rdb channel between Redis 8 and pyrepl
        nodes, Valkey's dual channel between Valkey and pyrepl nodes (most of the time, as
        replicas configure it), else diskless or disk as the master's config says."""
        if not m.diskless:
            return "disk"
        pair = {m.flavour, r.flavour}
        if pair <= {"redis8", "pyrepl"} and self.rng.random() < 0.7:
            return "rdb-channel"
        if pair <= {"valkey8", "pyrepl"} and pair != {"pyrepl"} and self.rng.random() < 0.7:
            return "dual-channel"
        return "diskless"

    def write(self, m: Node, nbytes: int) -> None:
        """``nbytes`` of writes on master ``m``, to its connected replicas (and theirs)."""
        m.offset += nbytes
        if m.backlog:
            m.first_byte = max(m.first_byte, m.offset - BACKLOG + 1)
        for r in m.replicas:
            rn = self.nodes[r]
            m.acked[r] = m.offset
            self.write(rn, nbytes)

    def poll(self, nodes: list[str]) -> None:
        out = {}
        for a in nodes:
            n = self.nodes[a]
            if not n.alive:
                continue
            m = self.nodes[n.master] if n.master else None
            out[a] = Sample(
                node=a, ts=round(self.t, 3), run_id=n.run_id,
                role="replica" if m else "master", server=SERVER[n.flavour],
                uptime_s=int(self.t - n.started), replid=n.replid, replid2=n.replid2,
                master_repl_offset=n.offset, second_repl_offset=n.off2,
                backlog_active=n.backlog, backlog_size=BACKLOG,
                backlog_first_byte=n.first_byte if n.backlog else 0,
                backlog_histlen=n.offset - n.first_byte + 1 if n.backlog else 0,
                connected_replicas=len(n.replicas),
                replicas=tuple(ReplicaEntry("127.0.0.1", int(r.rsplit(":", 1)[1]), "online",
                                            n.acked.get(r, 0), 0) for r in n.replicas),
                master_addr=n.master, link_status=(("up" if n.link_up else "down")
                                                   if m else None),
                link_down_since_s=(int(self.t - n.down_since) if m and not n.link_up
                                   and n.down_since is not None else None),
                replica_offset=n.offset if m else None,
                sync_full=n.sync_full, sync_partial_ok=n.sync_partial_ok,
                sync_partial_err=n.sync_partial_err)
        self.polls.append((self.t, out))

    # -- the syncs -------------------------------------------------------------------------
    def _attach(self, r: Node, m: Node, fresh: bool = False) -> None:
        """``r`` connects to ``m`` and syncs (partial when ``m`` can continue its history)."""
        r.master = m.addr
        req = (r.replid, r.offset + 1) if r.cached and not fresh else ("?", -1)
        second_upto = None
        if req[0] == "?":
            kind, reason = "full", "no-history"
        elif req[0] == m.replid or (req[0] == m.replid2 and req[1] <= m.off2 + 1):
            ok = m.backlog and m.first_byte <= req[1] <= m.offset + 1
            kind, reason = ("partial", "continue") if ok else ("full", "offset-before-backlog")
        else:
            kind, reason = "full", "replid-mismatch"
            if req[0] == m.replid2:
                second_upto = m.off2
        t = self.t
        mode = self.mode(m, r) if kind == "full" else ""
        s = Sync(round(t, 3), m.addr, r.addr, kind, reason, mode)
        self.syncs.append(s)
        self.sync_runs.append(m.run_id)
        created = False
        if kind == "full":
            m.sync_full += 1
            if req[0] != "?":
                m.sync_partial_err += 1
            if mode == "dual-channel":
                m.sync_partial_ok += 1      # the main channel's PSYNC (Valkey counts it)
            if not m.backlog:
                m.backlog, m.first_byte, created = True, m.offset + 1, True
        else:
            m.sync_partial_ok += 1
        d = round(self.rng.choice((0.01, 0.05, 0.3, 1.2)), 3) if kind == "full" else 0.0
        self.rec(m).sync_master(t, m, s, req, d, created, second_upto)
        old_replid = r.replid
        self.rec(r).sync_replica(t + 0.001, r, s, req, d, m.replid)
        self.t = t + d + 0.002
        r.link_up, r.down_since, r.cached = True, None, True
        r.replid, r.offset = m.replid, m.offset
        if kind == "full" or r.replid != old_replid:
            # a full sync (or a continue with a new id) on a replica with replicas of its own:
            # Redis disconnects them, they sync again with it
            if kind == "full":
                r.replid2, r.off2 = NO_REPLID, -1
                r.backlog, r.first_byte = True, r.offset + 1
            else:
                r.replid2, r.off2 = old_replid, r.offset
            for sub in list(r.replicas):
                self._drop(self.nodes[sub], "connection-lost")
                self._reconnect(self.nodes[sub], r)
        m.replicas.append(r.addr)
        m.acked[r.addr] = m.offset

    def _reconnect(self, r: Node, m: Node) -> None:
        self.rec(r).connecting(self.t, r, m.addr, True)
        self._attach(r, m)

    def _drop(self, r: Node, why: str) -> None:
        """``r``'s link to its master closes (both sides log it)."""
        m = self.nodes[r.master] if r.master else None
        self.rec(r).lost(self.t, r, r.master or "", "replica", why)
        r.link_up, r.down_since = False, self.t
        if m is not None and r.addr in m.replicas:
            self.rec(m).lost(self.t + 0.0005, m, r.addr, "master", why)
            m.replicas.remove(r.addr)
            m.acked.pop(r.addr, None)

    # -- the operations --------------------------------------------------------------------
    def masters(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.master is None and n.alive]

    def linked(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.master and n.alive and n.link_up]

    def op_flap(self, r: Node, big: bool) -> None:
        """The link drops; the master writes meanwhile (past its backlog when ``big``)."""
        m = self.nodes[r.master]  # type: ignore[index]
        self._drop(r, self.rng.choice(("connection-lost", "timeout")))
        self.t += self.rng.choice((0.05, 0.5, 3.0))
        root = self.root(m)
        self.write(root, BACKLOG + 1000 if big else self.rng.randrange(0, BACKLOG // 4))
        if self.rng.random() < 0.3:
            self.rec(r).connect_error(self.t, r, m.addr)
        self.t += 0.01
        self._reconnect(r, m)

    def root(self, n: Node) -> Node:
        while n.master:
            n = self.nodes[n.master]
        return n

    def op_promote(self, r: Node, sentinel: bool, lost_writes: bool) -> None:
        """``r`` (a replica of a master) becomes the master; the old master and its other
        replicas follow it. Sentinel: the old master crashed first and is started again (as a
        replica of ``r``) at the end."""
        old = self.nodes[r.master]  # type: ignore[index]
        siblings = [self.nodes[x] for x in old.replicas if x != r.addr]
        if sentinel:
            self.rec(old).stop(self.t, old, crash=self.rng.random() < 0.5)
            if lost_writes:
                old.offset += 100     # written, never replicated
            old.alive = False
            for x in [r] + siblings:
                self.rec(x).lost(self.t + 0.001, x, old.addr, "replica", "connection-lost")
                x.link_up, x.down_since = False, self.t
            old.replicas, old.acked = [], {}
            self.t += 0.5
            for x in [r] + siblings:
                self.rec(x).connect_error(self.t, x, old.addr)
            self.t += self.rng.choice((1.0, 5.0))
        else:
            if lost_writes:
                self.write(old, 0)
        # REPLICAOF NO ONE on r
        if r.link_up:
            old.replicas.remove(r.addr)
            old.acked.pop(r.addr, None)
            if not sentinel:
                self.rec(old).lost(self.t + 0.0005, old, r.addr, "master", "closed")
        old_id, off2 = r.replid, r.offset
        r.replid2, r.off2, r.replid = old_id, off2, _hex(self.rng)
        r.master, r.link_up, r.down_since = None, False, None
        if not r.backlog:
            r.backlog, r.first_byte = True, r.offset + 1
        self.rec(r).promoted(self.t, r, old_id, off2)
        # r's own replicas are disconnected and continue with the new id
        for sub in list(r.replicas):
            self.t += 0.001
            self._drop(self.nodes[sub], "connection-lost")
            self._reconnect(self.nodes[sub], r)
        for x in siblings:
            self.t += 0.01
            if x.link_up:
                self._drop(x, "replicaof")
            self.rec(x).replicaof(self.t, x, r.addr, False)
            self._attach(x, r)
        self.t += 0.5
        if sentinel:
            self._boot(old)
            self.t += 0.5
        if not sentinel and lost_writes:
            old.offset += 100
        self.rec(old).replicaof(self.t, old, r.addr, True)
        for sub in list(old.replicas):
            self._drop(self.nodes[sub], "connection-lost")
        old.cached = True
        self._attach(old, r)

    def op_restart(self, n: Node, persistent: bool, big: bool) -> None:
        """``n`` stops (SIGTERM) and starts again; a replica reconnects to its master, a
        master's replicas to it."""
        n.persistent = persistent
        m = self.nodes[n.master] if n.master else None
        subs = [self.nodes[x] for x in n.replicas]
        if m is not None and n.link_up:
            self.rec(m).lost(self.t, m, n.addr, "master", "closed")
            m.replicas.remove(n.addr)
            m.acked.pop(n.addr, None)
        for x in subs:
            self.rec(x).lost(self.t, x, n.addr, "replica", "connection-lost")
            x.link_up, x.down_since = False, self.t
        self.rec(n).stop(self.t, n, crash=False)
        n.alive = False
        self.t += 0.5
        for x in subs:
            self.rec(x).connect_error(self.t, x, n.addr)
        if m is not None:
            self.write(self.root(m), BACKLOG + 1000 if big else self.rng.randrange(BACKLOG // 4))
        self.t += 1.0
        self._boot(n)
        n.cached = persistent and n.cached
        self.t += 0.1
        if m is not None:
            self.rec(n).connecting(self.t, n, m.addr, False)
            self._attach(n, m, fresh=not n.cached)
        for x in subs:
            self.t += 0.01
            self._reconnect(x, n)

    def op_move(self, r: Node, target: Node) -> None:
        """REPLICAOF target on replica ``r`` (not into its own subtree)."""
        self._drop(r, "replicaof")
        self.rec(r).replicaof(self.t, r, target.addr, False)
        self._attach(r, target)

    def play(self, ops: list[tuple[str, int, int, bool, bool]], poll_after: list[bool],
             collected: list[str]) -> None:
        self.t += 2.0
        if collected:
            self.poll(collected)
        for (op, a, b, x, y), poll in zip(ops, poll_after, strict=True):
            self.t += self.rng.choice((2.0, 7.0, 30.0))
            linked = self.linked()
            if not linked:
                break
            r = linked[a % len(linked)]
            if op == "flap":
                self.op_flap(r, big=x)
            elif op == "promote":
                if self.nodes[r.master].master is None:  # type: ignore[index]
                    self.op_promote(r, sentinel=x, lost_writes=y)
            elif op == "restart":
                every = [n for n in self.nodes.values() if n.alive]
                self.op_restart(every[b % len(every)], persistent=x, big=y)
            elif op == "move":
                banned = {r.addr, r.master} | {s.addr for s in self.subtree(r)}
                targets = [n for n in self.nodes.values() if n.alive and n.addr not in banned
                           and (n.master is None or n.link_up)]
                if targets:
                    self.op_move(r, targets[b % len(targets)])
            elif op == "write":
                self.write(self.masters()[b % len(self.masters())], 1000 * (b + 1))
            if poll and collected:
                self.t += 1.0
                self.poll(collected)
        self.t += 1.0
        if collected:
            self.poll(collected)


OPS = ("flap", "flap", "promote", "restart", "move", "write")


@dataclass
class History:
    model: Model
    collected: list[str]
    own: set[str]        # nodes whose own log / events are given

    @property
    def syncs(self) -> list[Sync]:
        return self.model.syncs

    def __repr__(self) -> str:
        nodes = ", ".join(f"{a} {n.flavour}" for a, n in self.model.nodes.items())
        syncs = "".join(f"\n  {s.ts:.3f} {s.master} -> {s.replica} {s.kind} {s.reason} "
                        f"{s.mode}" for s in self.syncs)
        polls = ", ".join(f"{t:.3f}" for t, _ in self.model.polls)
        return (f"History(nodes: {nodes}; own: {sorted(self.own)}; collected: "
                f"{sorted(self.collected)}; polls at {polls}; syncs:{syncs})")


@st.composite
def histories(draw: Any, max_nodes: int = 6, max_ops: int = 10) -> History:
    """A drawn fleet and history, and a drawn subset of its sources."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    n = draw(st.integers(2, max_nodes))
    flavours = draw(st.lists(st.sampled_from(FLAVOURS), min_size=n, max_size=n))
    masters = draw(st.integers(1, max(1, n // 3)))
    shape = draw(st.lists(st.integers(0, 50), min_size=n - masters, max_size=n - masters))
    ops = draw(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50),
                                  st.booleans(), st.booleans()), max_size=max_ops))
    polls = draw(st.lists(st.booleans(), min_size=len(ops), max_size=len(ops)))
    model = Model(random.Random(seed), flavours, masters, shape)
    addrs = list(model.nodes)
    collected = draw(st.sampled_from(("none", "all", "some")))
    coll = [] if collected == "none" else addrs if collected == "all" else \
        [a for a in addrs if draw(st.booleans())]
    own = {a for a in addrs if draw(st.booleans())} if draw(st.booleans()) else set(addrs)
    if not coll and not own:
        own = set(addrs)
    model.play(ops, polls, coll)
    return History(model, coll, own)


# -- what the sources give, and what they can see --------------------------------------------

def sources(h: History) -> tuple[dict[str, bytes], list[str]]:
    """(log files {path: bytes}, NDJSON lines): each given node's log or events, and the
    collector's output for the polled nodes."""
    files = {f"/logs/{a.replace(':', '_')}/redis.log": "".join(log.lines).encode()
             for a, log in h.model.logs.items() if a in h.own}
    lines = [to_json_line(e) for a, p in h.model.pylogs.items() if a in h.own
             for e in p.events]
    fleet = Fleet()
    for _, samples in h.model.polls:
        order = sorted(samples.values(), key=lambda s: fleet.poll_order(s.node))
        for ev in fleet.round(*order):
            lines.append(to_json_line(ev))
    return files, lines


def names(h: History) -> dict[str, str]:
    """addr -> the name the given sources can give the node. A Redis log never names its own
    host: a node seen only through its own log is ``unknown:port`` unless another given
    source names it (another log, as a master's replica or a replica's master; pyrepl's
    events; the collector's)."""
    files, lines = sources(h)
    texts = {a: "".join(log.lines) for a, log in h.model.logs.items() if a in h.own}
    others = "".join(lines)
    out = {}
    for a in h.model.nodes:
        named = a not in texts or a in others \
            or any(a in t for b, t in texts.items() if b != a)
        out[a] = a if named else f"unknown:{a.rsplit(':', 1)[1]}"
    return out


def counted(h: History, node: str, ts: float, run: str) -> bool:
    """Whether the collector counted an increment of ``node``'s INFO counters made at ``ts``
    by process ``run``: a sample of the node before (the counters' base: any process) and one
    after from the same process."""
    before = any(t < ts and node in smp for t, smp in h.model.polls)
    after = any(t > ts and node in smp and smp[node].run_id == run for t, smp in h.model.polls)
    return before and after


def expected(h: History) -> tuple[Counter, Counter]:
    """(master, replica, kind) -> how many syncs the given sources can see: (those a node's own
    log or events recorded, those only the collector counted). The collector names a sync's
    replica only when the replica lists show which one it was, so its syncs may have none.
    A Valkey master's dual-channel full sync is also a partial one in its INFO counters (the
    main channel's PSYNC): where only the collector saw it, that is what is counted."""
    own: Counter = Counter()
    coll: Counter = Counter()
    nm = names(h)
    for s, run in zip(h.syncs, h.model.sync_runs, strict=True):
        key = (nm[s.master], nm[s.replica])
        if s.master in h.own or s.replica in h.own:
            own[(*key, s.kind)] += 1
        elif counted(h, s.master, s.ts, run):
            coll[(*key, s.kind)] += 1
            if s.mode == "dual-channel":
                coll[(*key, "partial")] += 1
    return own, coll


def check_counts(h: History, rows: list[dict[str, Any]]) -> None:
    """The job's sync rows against the history: every sync a given source recorded is one row
    on its link; the collector's own syncs are rows on their master, on their link or on none;
    nothing else."""
    own, coll = expected(h)
    got = Counter((x["master"], x["replica"], x["kind"]) for x in rows)
    for key in set(got) | set(own) | set(coll):
        if key[1] is not None:
            assert own[key] <= got[key] <= own[key] + coll[key], (key, got[key], own[key],
                                                                  coll[key])
    per_master: Counter = Counter()
    for (m, _, k), n in (got - own - coll).items():
        per_master[(m, k)] += n
    want: Counter = Counter()
    for (m, _, k), n in (own + coll).items():
        want[(m, k)] += n
    have: Counter = Counter()
    for (m, _, k), n in got.items():
        have[(m, k)] += n
    assert have == want, (have - want, want - have)
