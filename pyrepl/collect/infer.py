"""The events one node's two consecutive INFO samples imply: a pure function.

Theory of operation: ``infer(prev, sample)`` -> ``(events, state)``. ``state`` is all the
history kept per node: the last sample, the replica sessions the node serves (replica address ->
the ``sync_id`` the collector gave the sync that started it, and whether it was seen online) and
the last acknowledged offsets of a bounded number of replicas that left. Every event carries
``"source": "collector"``; the inferred ones (not samples) carry ``"inferred": 1``, the time
of the sample that saw the change and ``since``: the change happened in (since, ts], the last
poll interval (a restarted master's decisions: since its process started).

* Samples: one ``info_sample`` per node and poll, and for each online replica in the node's
  ``slaveN`` lines a ``replica_lag`` exactly as pyrepl logs it (node = the master, peer = the
  replica's ip:port, offset = its acknowledged offset, lag_bytes = master_repl_offset - offset,
  lag_ms = the ``lag`` seconds); not before the replica's first ACK (offset 0).
* The master side, from INFO stats: every ``sync_full`` increment is a ``psync_decision`` with
  result ``full``, every ``sync_partial_ok`` one with result ``continue``. Redis counts
  ``sync_partial_err`` (a PSYNC whose id was not ``?`` and that was refused) together with the
  ``sync_full`` that follows it, so of the full syncs, that many were refused partials (reason
  ``offset-before-backlog`` with its ``gap`` when the replica's last acknowledged offset is
  before the backlog's first byte, else no reason: unknown) and the others asked for a full sync
  (``PSYNC ? -1``: reason ``no-history``). A decision names its replica (``peer``) when the
  ``slaveN`` lists show which replicas certainly started a new session: one that appeared,
  whose acknowledged offset went back (a new connection starts at 0), that went from online
  back to a sync state, or that moved towards the end of the list (Redis appends a replica when
  it connects). A reconnect can also leave no trace in the list (the replica was last and had
  acknowledged again by the next sample): syncs beyond the replicas shown, and syncs whose
  result cannot be told (an online replica, with both full and partial syncs counted), have no
  peer; :mod:`pyrepl.collect.links` may find it from the replica's side. A replica leaving the list,
  or replaced by a new session, is a ``replica_lost`` (no reason); one reaching ``online`` a
  ``replica_online``, with the session's ``sync_id``. Counters that went back without a restart
  (CONFIG RESETSTAT) only set a new base.
* The replica side, from ``master_link_status``: up -> down (or a new master, or a promotion,
  or a restart) is a ``link_down`` (reason ``promoted``, ``replicaof`` or ``restart``, else
  none: unknown; ts from ``master_link_down_since_seconds`` when the server gives it), down ->
  up a ``link_up`` with a ``sync_id`` of its own. Which sync brought the link up, and when the
  replica caught up, need the master's sample too: :mod:`pyrepl.collect.links`.
* The node: a new ``run_id`` is a ``restart`` (ts = the sample's time minus the uptime), a new
  role or master a ``role_change``, a new ``master_replid`` a ``replid_change`` (reason
  ``promoted`` when the old id became replid2 on a promotion, ``shifted`` when it did without
  one — a replica continuing after its master's promotion —, ``full-sync`` for a replica that
  took a new history, ``backlog-created`` for a master that started a new history with its
  first backlog, ``restart``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyrepl.collect.info import ReplicaEntry, Sample
from pyrepl.events import EVENTS, add_fields

SOURCE = "collector"
GONE_MAX = 64  # last offsets kept of replicas that left (for offset-before-backlog)


@dataclass(frozen=True)
class Session:
    """A replica's current session on its master, as the collector named it."""

    sync_id: str
    online: bool


@dataclass(frozen=True)
class NodeState:
    """All a node's history: its last sample and what the events so far have named."""

    sample: Sample
    sessions: Mapping[str, Session] = field(default_factory=dict)
    gone: tuple[tuple[str, int], ...] = ()  # (replica addr, last acked offset), newest last
    seq: int = 0


def adopt(state: NodeState, replica: str, sync_id: str, online: bool) -> NodeState:
    """``state`` with ``replica``'s session set to ``sync_id`` (a sync of this master that
    :class:`~pyrepl.collect.links.Links` found to be that replica's)."""
    if all(e.addr != replica for e in state.sample.replicas):
        return state
    return dataclasses.replace(state, sessions={**state.sessions,
                                                replica: Session(sync_id, online)})


def make_event(ts: float, event: str, node: str, run_id: str, role: str, *,
               inferred: bool = False, **fields: Any) -> dict[str, Any]:
    """One event in the schema of ``pyrepl.events`` (ts and event first, as the daemon writes
    them: the analytics spots lag samples by their exact bytes), typed as the daemon types it."""
    if event not in EVENTS:
        raise ValueError(f"unknown sync event {event!r}")
    ev: dict[str, Any] = {"ts": round(ts, 3), "event": event, "node": node}
    if run_id:
        ev["run_id"] = run_id
    ev["role"] = role
    add_fields(ev, fields)
    ev["source"] = SOURCE
    if inferred:
        ev["inferred"] = 1
    return ev


def sample_event(s: Sample) -> dict[str, Any]:
    """The ``info_sample`` of a sample."""
    return make_event(
        s.ts, "info_sample", s.node, s.run_id, s.role, server=s.server or None,
        peer=s.master_addr, replid=s.replid or None, replid2=s.replid2,
        second_repl_offset=s.second_repl_offset, master_repl_offset=s.master_repl_offset,
        offset=s.replica_offset, link_status=s.link_status,
        sync_in_progress=int(s.sync_in_progress) if s.is_replica else None,
        replicas=s.connected_replicas, backlog_size=s.backlog_size,
        backlog_histlen=s.backlog_histlen, repl_buffers_mem=s.repl_buffers_mem,
        backlog_mem=s.backlog_mem, sync_full=s.sync_full, sync_partial_ok=s.sync_partial_ok,
        sync_partial_err=s.sync_partial_err)


def lag_events(s: Sample, sessions: Mapping[str, Session]) -> list[dict[str, Any]]:
    """``replica_lag`` for each online replica that has acknowledged something."""
    out = []
    for e in s.replicas:
        if not e.online or e.offset <= 0:
            continue
        sess = sessions.get(e.addr)
        out.append(make_event(
            s.ts, "replica_lag", s.node, s.run_id, "master", peer=e.addr,
            sync_id=sess.sync_id if sess else None, offset=e.offset,
            lag_bytes=s.master_repl_offset - e.offset,
            lag_ms=e.lag * 1000.0 if e.lag is not None else None))
    return out


class _Ids:
    """sync ids for the collector's sessions: unique per node (run id, time, sequence)."""

    def __init__(self, s: Sample, seq: int) -> None:
        self.prefix = f"{s.run_id[:8]}-{int(round(s.ts * 1000))}-c"
        self.seq = seq

    def new(self) -> str:
        self.seq += 1
        return f"{self.prefix}{self.seq}"


def _clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


def _by_addr(entries: tuple[ReplicaEntry, ...]) -> dict[str, ReplicaEntry]:
    """addr -> entry, in list order (a replica listed twice: its first line)."""
    out: dict[str, ReplicaEntry] = {}
    for e in entries:
        out.setdefault(e.addr, e)
    return out


def moved_to_end(before: list[str], after: list[str]) -> list[str]:
    """Of the replicas in both lists (``after`` in its order), those that must have
    reconnected: the list keeps its order and appends on connect, so the replicas that did not
    reconnect are a prefix of ``after`` in ``before``'s order; the rest moved (the smallest
    such set: the longest prefix that keeps the old order)."""
    pos = {a: i for i, a in enumerate(before)}
    last = -1
    for k, a in enumerate(after):
        if pos[a] < last:
            return after[k:]
        last = pos[a]
    return []


def _assign(cands: list[ReplicaEntry], d_full: int, d_ok: int
            ) -> tuple[list[tuple[ReplicaEntry, str]], int, int]:
    """Which result each new session had: (entry, result) pairs, and the full and continue
    decisions left without a replica. A replica still in a sync state had a full sync; among
    the others the results can be told apart only when one kind is left."""
    pairs: list[tuple[ReplicaEntry, str]] = []
    fulls, oks = d_full, d_ok
    rest = []
    for e in cands:
        if not e.online and fulls > 0:
            pairs.append((e, "full"))
            fulls -= 1
        else:
            rest.append(e)
    if fulls and oks:
        return pairs, fulls, oks  # ambiguous: the rest stay unnamed
    kind = "full" if fulls else "continue"
    left = fulls or oks
    for e in rest:
        if left == 0:
            break
        pairs.append((e, kind))
        left -= 1
    return pairs, (left if kind == "full" else 0), (left if kind == "continue" else 0)


def infer(prev: NodeState | None, s: Sample) -> tuple[list[dict[str, Any]], NodeState]:
    """The events between ``prev`` (None: the first sample of the node) and ``s``."""
    if prev is None:
        return [sample_event(s), *lag_events(s, {})], NodeState(s)
    p = prev.sample
    ids = _Ids(s, prev.seq)
    out: list[dict[str, Any]] = [sample_event(s)]
    restarted = bool(p.run_id and s.run_id and p.run_id != s.run_id)
    start_ts = s.ts
    if restarted and s.uptime_s is not None:
        start_ts = _clamp(s.ts - s.uptime_s, p.ts, s.ts)

    def ev(event: str, role: str, ts: float = s.ts, run_id: str = s.run_id,
           since: float = p.ts, **fields: Any) -> None:
        out.append(make_event(ts, event, s.node, run_id, role, inferred=True,
                              since=round(since, 3), **fields))

    # -- the node ----------------------------------------------------------------------------
    if restarted:
        ev("restart", s.role, ts=start_ts, offset=s.master_repl_offset, replid=s.replid)
    if p.role != s.role or (s.is_replica and p.master_addr != s.master_addr):
        reason: str | None = ("restart" if restarted else "promoted" if not s.is_replica
                              else "replicaof")
        ev("role_change", s.role, peer=s.master_addr, reason=reason,
           offset=s.master_repl_offset)
    if s.replid and p.replid != s.replid:
        if restarted:
            why: str | None = "restart"
        elif s.replid2 == p.replid:
            why = "promoted" if p.is_replica and not s.is_replica else "shifted"
        elif s.is_replica:
            why = "full-sync"
        elif not p.backlog_active and s.backlog_active:
            why = "backlog-created"  # Redis: a master's first replica after none, new history
        else:
            why = None
        ev("replid_change", s.role, replid=s.replid, replid2=s.replid2,
           second_repl_offset=s.second_repl_offset, offset=s.master_repl_offset, reason=why)

    # -- the replica side --------------------------------------------------------------------
    same_master = p.master_addr == s.master_addr
    down_ts: float | None = None
    if p.link_up and (restarted or not s.link_up or not same_master):
        if restarted:
            reason, down_ts = "restart", start_ts
        elif not s.is_replica:
            reason, down_ts = "promoted", s.ts
        elif not same_master:
            reason, down_ts = "replicaof", s.ts
        else:
            reason = None
            since = s.link_down_since_s
            down_ts = _clamp(s.ts - since, p.ts, s.ts) if since is not None else s.ts
        ev("link_down", "replica", ts=down_ts, peer=p.master_addr, offset=p.replica_offset,
           reason=reason)
    elif p.is_replica and not p.link_up and p.link_down_since_s is not None:
        down_ts = p.ts - p.link_down_since_s
    if s.link_up and (restarted or not p.link_up or not same_master):
        ev("link_up", "replica", peer=s.master_addr, sync_id=ids.new(), offset=s.replica_offset,
           replid=s.replid,
           duration_ms=round((s.ts - down_ts) * 1000.0, 3) if down_ts is not None else None)

    # -- the master side ---------------------------------------------------------------------
    sessions = {} if restarted else dict(prev.sessions)
    gone = dict(prev.gone)
    prev_list: tuple[ReplicaEntry, ...] = () if restarted else p.replicas
    if restarted:
        for e in p.replicas:
            sess = prev.sessions.get(e.addr)
            ev("replica_lost", "master", ts=start_ts, run_id=p.run_id, peer=e.addr,
               sync_id=sess.sync_id if sess else None, offset=e.offset, reason="restart")
            gone.pop(e.addr, None)
            gone[e.addr] = e.offset  # newest last
    base = (0, 0, 0) if restarted else (p.sync_full, p.sync_partial_ok, p.sync_partial_err)
    d_full, d_ok, d_err = (s.sync_full - base[0], s.sync_partial_ok - base[1],
                           s.sync_partial_err - base[2])
    if min(d_full, d_ok, d_err) < 0:  # CONFIG RESETSTAT: a new base, no events
        d_full = d_ok = d_err = 0
    prev_by, now_by = _by_addr(prev_list), _by_addr(s.replicas)
    cur = list(now_by.values())
    common = [e for e in cur if e.addr in prev_by]
    strong = {e.addr for e in cur if e.addr not in prev_by
              or e.offset < prev_by[e.addr].offset
              or (prev_by[e.addr].online and not e.online)}
    weak = set(moved_to_end([e.addr for e in prev_by.values() if e.addr in now_by],
                            [e.addr for e in common])) - strong
    n = d_full + d_ok
    # each of these certainly started a new session (``moved_to_end`` only names replicas
    # that did move); no replica is named on a guess: the one replica listed at both samples
    # may have synced several times, or others may have come and gone between them
    new_addrs = strong | weak
    cands = [e for e in cur if e.addr in new_addrs]
    named: list[tuple[ReplicaEntry, str]] = []
    un_full, un_ok = d_full, d_ok
    if n and 0 < len(cands) <= n:
        named, un_full, un_ok = _assign(cands, d_full, d_ok)

    # replicas that left, or whose session was replaced
    for e in prev_by.values():
        if e.addr not in now_by or e.addr in new_addrs:
            sess = sessions.pop(e.addr, None)
            ev("replica_lost", "master", peer=e.addr, sync_id=sess.sync_id if sess else None,
               offset=e.offset)
            gone.pop(e.addr, None)
            gone[e.addr] = e.offset

    # the decisions: full ones get a reason where one can be inferred
    refused = min(d_err, d_full)
    first = s.backlog_first_byte if s.backlog_active else None
    decisions: list[tuple[ReplicaEntry | None, str, dict[str, Any]]] = [
        *((e, result, {}) for e, result in named),
        *((None, "full", {}) for _ in range(un_full)),
        *((None, "continue", {}) for _ in range(un_ok))]
    fulls = [d for d in decisions if d[1] == "full"]
    for entry, _, extra in fulls:
        last = gone.get(entry.addr) if entry is not None else None
        if refused and not restarted and first and last and last + 1 < first:
            extra.update(reason="offset-before-backlog", gap=first - (last + 1),
                         req_offset=last + 1)
            refused -= 1
    rest = [x for _, _, x in fulls if "reason" not in x]
    if refused == 0:
        for x in rest:
            x.update(req_replid="?", reason="no-history")
    new_sessions: dict[str, str] = {}
    last_ids: dict[str, str] = {}
    # after a restart the counters count the new process's syncs only: they happened since it
    # started (``start_ts``; uptime is whole seconds: up to a second before)
    counted_since = max(p.ts, start_ts - 1) if restarted and s.uptime_s is not None else p.ts
    for entry, result, extra in decisions:
        sid = ids.new()
        if entry is not None:
            last_ids[entry.addr] = sid
        ev("psync_decision", "master", since=counted_since,
           peer=entry.addr if entry is not None else None,
           sync_id=sid, result=result, replid=s.replid, master_repl_offset=s.master_repl_offset,
           backlog_size=s.backlog_size, backlog_histlen=s.backlog_histlen, **extra)
    for e in cands:
        new_sessions[e.addr] = last_ids.get(e.addr) or ids.new()

    # sessions now: new ones, and old ones that reached online
    for e in cur:
        new_sid = new_sessions.get(e.addr)
        if new_sid is not None:
            sessions[e.addr] = Session(new_sid, e.online)
            gone.pop(e.addr, None)
            if e.online:
                ev("replica_online", "master", peer=e.addr, sync_id=new_sid, offset=e.offset)
            continue
        old = sessions.get(e.addr)
        if e.online and (old is None or not old.online) and not (
                old is None and prev_by.get(e.addr) is not None and prev_by[e.addr].online):
            sess = old or Session(ids.new(), False)
            sessions[e.addr] = Session(sess.sync_id, True)
            ev("replica_online", "master", peer=e.addr, sync_id=sess.sync_id, offset=e.offset)
    for addr in list(sessions):
        if addr not in now_by:
            del sessions[addr]
    out += lag_events(s, sessions)
    kept = tuple((a, o) for a, o in gone.items() if a not in now_by)[-GONE_MAX:]
    return out, NodeState(s, sessions, kept, ids.seq)
