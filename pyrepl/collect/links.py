"""Both ends of a link within a poll round: which sync brought a replica's link up, and when
the replica caught up (pure; bounded memory).

Theory of operation: a replica's INFO says that its link came up, not how; its master's
counters say that a sync happened, and :func:`pyrepl.collect.infer.infer` names the replica
when the master's replica list shows which one it was. The collector polls the replicas of a
round before their masters, so a master's sample is the later one and holds every sync the
replica's sample can show. :class:`Links` keeps the latest unclaimed decision per (master,
replica), the recent decisions that name no replica per master, and, per replica, the offset it
must reach to be caught up. Per round it

1. gives each inferred ``link_up`` the result and ``sync_id`` of its link's decision; when the
   master's list could not say whose sync it was but the replica's own sample could (it
   restarted, or its link was seen down), and one decision without a replica and one such link
   up are all the round has for that master, they are the same sync: the decision gets its
   ``peer``, the master its ``replica_lost`` and ``replica_online``, and the session is handed
   back to the master's state (:attr:`Links.adopted`);
2. for a named decision whose replica's link looked up all along (it reconnected and resynced
   between two samples, as a partial sync after a killed link does within a second), adds the
   replica's ``link_down`` and ``link_up`` (at the decision's time: the downtime is below one
   poll interval);
3. after a link up, takes the master's ``master_repl_offset`` of the round as the target and
   gives the replica a ``caught_up`` at the first sample where its offset reached it (dropped
   if the link goes down or the replica restarts first).

Entries older than ``horizon_s`` are dropped, and there are at most a few per link, so the
memory is bounded by the fleet's size. :class:`Fleet` is a whole round: every node's
:func:`~pyrepl.collect.infer.infer`, then :class:`Links` across them, and the sessions it named
handed back to the masters' states.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyrepl.collect.infer import NodeState, adopt, infer, make_event
from pyrepl.collect.info import Sample

UNNAMED_MAX = 16  # decisions without a replica kept per master


@dataclass(frozen=True)
class _Decision:
    ts: float
    since: float | None  # the master's previous sample: the sync happened after it
    result: str
    sync_id: str


@dataclass(frozen=True)
class _CatchUp:
    master: str
    run_id: str
    sync_id: str | None
    t_up: float
    target: int


class Links:
    def __init__(self, horizon_s: float = 900.0) -> None:
        self.horizon_s = horizon_s
        self._decisions: dict[tuple[str, str], _Decision] = {}
        self._unnamed: dict[str, list[_Decision]] = {}
        self._catchup: dict[str, _CatchUp] = {}
        self._prev_ts: dict[str, float] = {}  # node -> its sample of the previous round
        self._last_up: dict[str, float] = {}  # replica -> its last sample with the link up
        # (master, replica, sync_id, online) of the sessions step 1 named this round
        self.adopted: list[tuple[str, str, str, bool]] = []

    def __len__(self) -> int:
        """Entries held about links (the per-node timestamps aside)."""
        return len(self._decisions) + sum(map(len, self._unnamed.values())) + len(self._catchup)

    def round(self, samples: Mapping[str, Sample], events: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
        """The round's events (all nodes' ``infer`` output), completed; ``samples`` are the
        round's samples by node."""
        out = list(events)
        self.adopted = []
        linked = set()  # replicas whose link events this round already has
        downs = set()
        unnamed_now: dict[str, list[dict[str, Any]]] = {}
        for ev in events:
            name = ev["event"]
            if name == "psync_decision":
                d = _Decision(ev["ts"], self._prev_ts.get(ev["node"]), ev["result"],
                              ev["sync_id"])
                if ev.get("peer") is not None:
                    self._decisions[(ev["node"], ev["peer"])] = d
                else:
                    unnamed_now.setdefault(ev["node"], []).append(ev)
                    kept = self._unnamed.setdefault(ev["node"], [])
                    kept.append(d)
                    del kept[:-UNNAMED_MAX]
            elif name in ("link_up", "link_down", "role_change"):
                linked.add(ev["node"])
                if name == "link_down":
                    downs.add(ev["node"])
        # caught up, for link ups of earlier rounds (before this round's link ups start theirs)
        for node, c in list(self._catchup.items()):
            s = samples.get(node)
            if s is None:
                continue
            if node in downs or s.run_id != c.run_id or not s.link_up \
                    or s.master_addr != c.master:
                del self._catchup[node]
            elif s.replica_offset is not None and s.replica_offset >= c.target:
                out.append(self._caught_up(s, c))
                del self._catchup[node]
        self._link_ups(samples, events, unnamed_now, out)
        self._quick_reconnects(samples, linked, out)
        for s in samples.values():
            self._prev_ts[s.node] = s.ts
            if s.link_up:
                self._last_up[s.node] = s.ts
        self._prune(samples)
        return out

    def _link_ups(self, samples: Mapping[str, Sample], events: list[dict[str, Any]],
                  unnamed_now: dict[str, list[dict[str, Any]]], out: list[dict[str, Any]]
                  ) -> None:
        """Step 1: each link up gets the sync that ended its link's downtime."""
        ups_now = [ev for ev in events if ev["event"] == "link_up" and ev.get("peer") is not None]
        pending: dict[str, list[dict[str, Any]]] = {}  # master -> link ups it did not name
        for ev in ups_now:
            key = (ev["peer"], ev["node"])
            d = self._decisions.get(key)
            if d is not None and self._explains(d, ev["node"]):
                del self._decisions[key]
                ev["result"] = d.result
                ev["sync_id"] = d.sync_id
            else:
                pending.setdefault(ev["peer"], []).append(ev)
        for master, ups in pending.items():
            cands = [d for d in self._unnamed.get(master, [])
                     if all(self._explains(d, up["node"]) for up in ups)]
            if len(ups) == 1 and len(cands) == 1:
                up, d = ups[0], cands[0]
                up["result"] = d.result
                up["sync_id"] = d.sync_id
                self._unnamed[master].remove(d)
                dec = next((e for e in unnamed_now.get(master, ())
                            if e["sync_id"] == d.sync_id), None)
                if dec is not None:  # still this round's line: name the replica in it
                    self._name(samples, dec, up["node"], out)
            elif len(ups) == len(cands) and len({d.result for d in cands}) == 1:
                for up in ups:  # how they synced is known, not which sync was whose
                    up["result"] = cands[0].result
                for d in cands:
                    self._unnamed[master].remove(d)
        for ev in ups_now:
            self._start_catchup(samples, ev["node"], ev["peer"], ev.get("sync_id"), ev["ts"],
                                out)

    def _explains(self, d: _Decision, replica: str) -> bool:
        """Whether decision ``d`` can be the sync that brought ``replica``'s link up: it
        happened after the replica's last sample with its link up (the sync happened after
        the master's previous sample, which must not be older than that one)."""
        last_up = self._last_up.get(replica)
        return last_up is None or (d.since is not None and d.since >= last_up)

    def _name(self, samples: Mapping[str, Sample], dec: dict[str, Any], replica: str,
              out: list[dict[str, Any]]) -> None:
        """A decision of this round turns out to be ``replica``'s: name it, and give the
        master the session change its replica list did not show."""
        dec["peer"] = replica
        m = samples.get(dec["node"])
        entry = next((e for e in m.replicas if e.addr == replica), None) if m else None
        if m is None or entry is None:
            return
        i = out.index(dec)
        lost = make_event(dec["ts"], "replica_lost", m.node, m.run_id, "master", inferred=True,
                          since=dec.get("since"), peer=replica)
        out.insert(i, lost)
        if entry.online:
            out.insert(i + 2, make_event(dec["ts"], "replica_online", m.node, m.run_id,
                                         "master", inferred=True, since=dec.get("since"),
                                         peer=replica, sync_id=dec["sync_id"],
                                         offset=entry.offset))
        self.adopted.append((m.node, replica, dec["sync_id"], entry.online))

    def _quick_reconnects(self, samples: Mapping[str, Sample], linked: set[str],
                          out: list[dict[str, Any]]) -> None:
        """Step 2: decisions whose replica never showed its link down."""
        for (master, replica), d in list(self._decisions.items()):
            s = samples.get(replica)
            m = samples.get(master)
            if s is None or m is None or round(m.ts, 3) != d.ts or replica in linked:
                continue
            if not s.link_up or s.master_addr != master:
                continue
            del self._decisions[(master, replica)]
            ts = d.ts
            out.append(make_event(ts, "link_down", replica, s.run_id, "replica", inferred=True,
                                  since=d.since, peer=master, offset=s.replica_offset))
            out.append(make_event(ts, "link_up", replica, s.run_id, "replica", inferred=True,
                                  since=d.since, peer=master, sync_id=d.sync_id,
                                  result=d.result, offset=s.replica_offset, replid=s.replid))
            self._start_catchup(samples, replica, master, d.sync_id, ts, out)

    def _prune(self, samples: Mapping[str, Sample]) -> None:
        now = max((s.ts for s in samples.values()), default=None)
        if now is None:
            return
        old = now - self.horizon_s
        for k, d in list(self._decisions.items()):
            if d.ts < old:
                del self._decisions[k]
        for m, ds in list(self._unnamed.items()):
            ds[:] = [d for d in ds if d.ts >= old]
            if not ds:
                del self._unnamed[m]
        for k2, c in list(self._catchup.items()):
            if c.t_up < old:
                del self._catchup[k2]
        for times in (self._prev_ts, self._last_up):
            for k3, t in list(times.items()):
                if t < old:
                    del times[k3]

    def _start_catchup(self, samples: Mapping[str, Sample], replica: str, master: str,
                       sync_id: str | None, t_up: float, out: list[dict[str, Any]]) -> None:
        m = samples.get(master)
        s = samples.get(replica)
        if m is None or s is None:
            return
        c = _CatchUp(master, s.run_id, sync_id, t_up, m.master_repl_offset)
        if s.replica_offset is not None and s.replica_offset >= c.target:
            out.append(self._caught_up(s, c))
        else:
            self._catchup[replica] = c

    @staticmethod
    def _caught_up(s: Sample, c: _CatchUp) -> dict[str, Any]:
        ts = max(s.ts, c.t_up)
        return make_event(ts, "caught_up", s.node, s.run_id, "replica", inferred=True,
                          peer=c.master, sync_id=c.sync_id, offset=s.replica_offset,
                          duration_ms=round((ts - c.t_up) * 1000.0, 3))


class Fleet:
    """All the collector's history: each node's :class:`~pyrepl.collect.infer.NodeState` and
    the :class:`Links` across them."""

    def __init__(self, horizon_s: float = 900.0) -> None:
        self.states: dict[str, NodeState] = {}
        self.links = Links(horizon_s)

    def poll_order(self, node: str) -> int:
        """Poll order within a round: leaf replicas, then replicas with replicas, then masters
        (unknown nodes first: their role is not known yet)."""
        state = self.states.get(node)
        if state is None:
            return 0
        s = state.sample
        if s.is_replica:
            return 1 if s.connected_replicas else 0
        return 2

    def round(self, *samples: Sample) -> list[dict[str, Any]]:
        """One poll round's samples (in poll order) -> the round's events."""
        events: list[dict[str, Any]] = []
        for s in samples:
            evs, self.states[s.node] = infer(self.states.get(s.node), s)
            events += evs
        out = self.links.round({s.node: s for s in samples}, events)
        for master, replica, sync_id, online in self.links.adopted:
            state = self.states.get(master)
            if state is not None:
                self.states[master] = adopt(state, replica, sync_id, online)
        return out
