"""A Redis Cluster's shards and failovers, from the ``cluster_*`` events and the replication
links (issue 42).

Theory of operation: cluster events are few (a failover, an election, a node marked failing,
a slot move: a handful per incident, not per write), so both finishes of the job collect them
to the driver with each link's span (first and last sync of each replica-master pair, one row a
link) and build these two tables and the summary's ``cluster`` part here, in plain Python, the
same way. Each source names nodes its own way: pyrepl's events carry host:port and the node's
cluster id; a Redis or Valkey log gives only ids for the other nodes (and its own, from its
"I'm <id>" line). Ids are turned into names through every event that carries both.

- **failovers**: one row per ``cluster_failover`` (logged by the node that won): its kind
  (auto, manual, force, takeover), the old master (the event's peer, or the replica's master
  just before: the link it synced from last), the votes seen for its epoch, the election's
  time (its ``started`` event to the win) and the time from the first FAIL mark about the old
  master to the win.
- **shards**: the nodes joined by a replica's latest link (to its master) and by a failover
  (winner and old master), one shard a group. Its master is the member that is not a replica
  at the end: whose last win (or none) is not older than its last link as a replica. Its slots
  are that master's own (``cluster_slots``: owned at start, then gained and lost) when the
  master logged them (pyrepl nodes); a Redis log does not say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyrepl.analytics.stats import py_stat

CLUSTER_PREFIX = "cluster_"
WINDOW_S = 60.0          # a failover's election, votes and FAIL marks lie within this before it
INCIDENT_GAP_S = 30.0    # FAIL marks about one node this close are one incident

Link = tuple[str, str, float, float]     # replica, master, first sync ts, last sync ts


def is_cluster_event(e: dict[str, Any]) -> bool:
    return str(e.get("event", "")).startswith(CLUSTER_PREFIX)


def link_spans(syncs: Iterable[dict[str, Any]]) -> list[Link]:
    """Each (replica, master) pair's first and last sync time (the syncs table's rows)."""
    spans: dict[tuple[str, str], list[float]] = {}
    for s in syncs:
        r, m, ts = s.get("replica"), s.get("master"), s.get("ts")
        if r is None or m is None or ts is None:
            continue
        sp = spans.get((r, m))
        if sp is None:
            spans[(r, m)] = [ts, ts]
        else:
            sp[0], sp[1] = min(sp[0], ts), max(sp[1], ts)
    return [(r, m, a, b) for (r, m), (a, b) in sorted(spans.items())]


class _Names:
    """node id <-> name, from every event that carries both."""

    def __init__(self, events: Sequence[dict[str, Any]]) -> None:
        self.by_id: dict[str, str] = {}
        self.by_name: dict[str, str] = {}
        for e in events:
            for name, nid in ((e.get("node"), e.get("node_id")), (e.get("peer"), e.get("peer_id"))):
                if name and nid:
                    self.by_id.setdefault(nid, name)
                    self.by_name.setdefault(name, nid)

    def name(self, nid: str | None) -> str | None:
        return None if nid is None else self.by_id.get(nid, nid)


def _master_before(links: Sequence[Link], replica: str, ts: float) -> str | None:
    """The master ``replica`` last began syncing from at or before ``ts``."""
    best: tuple[float, str] | None = None
    for r, m, first, _ in links:
        if r == replica and first <= ts and (best is None or first > best[0]):
            best = (first, m)
    return best[1] if best else None


def build_failovers(cev: Sequence[dict[str, Any]], links: Sequence[Link], names: _Names
                    ) -> list[dict[str, Any]]:
    out = []
    evs = sorted(cev, key=lambda e: (e["ts"], e["event"], e.get("node") or ""))
    for fo in (e for e in evs if e["event"] == "cluster_failover"):
        ts, node = fo["ts"], fo.get("node")
        nid = fo.get("node_id") or names.by_name.get(node or "")
        old = fo.get("peer") or names.name(fo.get("peer_id"))
        if old is None and node is not None:
            old = _master_before(links, node, ts)
        old_id = fo.get("peer_id") or names.by_name.get(old or "")
        epoch = fo.get("config_epoch")
        before = [e for e in evs if ts - WINDOW_S <= e["ts"] <= ts]
        started = [e for e in before if e["event"] == "cluster_election" and
                   e.get("result") == "started" and e.get("node") == node]
        fails = [e for e in before if e["event"] == "cluster_node_fail" and
                 e.get("result") == "fail" and old_id is not None and e.get("peer_id") == old_id]
        voters = {e.get("node") for e in before if e["event"] == "cluster_election" and
                  e.get("result") == "granted" and nid is not None and e.get("peer_id") == nid
                  and (epoch is None or e.get("config_epoch") in (None, epoch))}
        out.append({
            "ts": ts, "shard": None, "node": node, "node_id": nid, "old_master": old,
            "old_master_id": old_id, "kind": fo.get("result"), "config_epoch": epoch,
            "votes": len(voters),
            "election_ms": round((ts - started[-1]["ts"]) * 1000, 3) if started else None,
            "fail_to_failover_ms": round((ts - fails[0]["ts"]) * 1000, 3) if fails else None})
    return out


def _expand(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _ranges(slots: set[int]) -> str:
    from pyrepl.cluster.watch import ranges_text
    return ranges_text(slots)


def _node_slots(cev: Sequence[dict[str, Any]]) -> dict[str, set[int]]:
    """Each node's own slots at the end, for the nodes that logged theirs."""
    own: dict[str, set[int]] = {}
    for e in sorted(cev, key=lambda e: e["ts"]):
        if e["event"] != "cluster_slots" or not e.get("node"):
            continue
        s = own.setdefault(e["node"], set())
        res, slots = e.get("result"), _expand(e.get("slots"))
        if res == "owned":
            s.clear()
            s |= slots
        elif res == "gained":
            s |= slots
        elif res == "lost":
            s -= slots
    return own


def _fail_times(cev: Sequence[dict[str, Any]], names: _Names) -> dict[str, list[float]]:
    """When each node (by name, else id) was marked FAIL."""
    out: dict[str, list[float]] = {}
    for e in cev:
        if e["event"] == "cluster_node_fail" and e.get("result") == "fail":
            who = e.get("peer") or names.name(e.get("peer_id"))
            if who:
                out.setdefault(who, []).append(e["ts"])
    return out


def _incidents(times: list[float]) -> int:
    n, last = 0, None
    for t in sorted(times):
        if last is None or t - last > INCIDENT_GAP_S:
            n += 1
        last = t
    return n


def build_shards(cev: Sequence[dict[str, Any]], links: Sequence[Link],
                 failovers: list[dict[str, Any]], fail_times: dict[str, list[float]]
                 ) -> list[dict[str, Any]]:
    """The shards (and each failover's ``shard`` set)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    latest: dict[str, Link] = {}          # each replica's latest link
    for lk in links:
        cur = latest.get(lk[0])
        if cur is None or (lk[2], lk[3]) > (cur[2], cur[3]):
            latest[lk[0]] = lk
    for r, m, _, _ in latest.values():
        join(r, m)
    for fo in failovers:
        if fo["node"]:
            find(fo["node"])
            if fo["old_master"]:
                join(fo["node"], fo["old_master"])
    for e in cev:
        if e.get("node") and (e.get("node_id") or e["event"] == "cluster_slots"):
            find(e["node"])
    groups: dict[str, list[str]] = {}
    for x in list(parent):
        groups.setdefault(find(x), []).append(x)
    won: dict[str, float] = {}
    for fo in failovers:
        if fo["node"]:
            won[fo["node"]] = max(won.get(fo["node"], fo["ts"]), fo["ts"])
    own = _node_slots(cev)
    shard_ids: dict[str, str] = {}
    for e in sorted(cev, key=lambda e: e["ts"]):
        if e.get("node") and e.get("shard_id"):
            shard_ids[e["node"]] = e["shard_id"]
    rows = []
    for members in groups.values():
        members.sort()

        def is_master(x: str) -> bool:
            lk = latest.get(x)
            return lk is None or won.get(x, float("-inf")) >= lk[2]
        masters = [x for x in members if is_master(x)]
        masters.sort(key=lambda x: (-won.get(x, float("-inf")),
                                    -sum(1 for lk in latest.values() if lk[1] == x), x))
        master = masters[0] if masters else members[0]
        shard = master
        sid = next((shard_ids[x] for x in [master, *members] if x in shard_ids), None)
        fos = [fo for fo in failovers if fo["node"] in members]
        for fo in fos:
            fo["shard"] = shard
        fos.sort(key=lambda fo: fo["ts"])
        slots = own.get(master)
        rows.append({
            "shard": shard, "shard_id": sid, "master": master,
            "replicas": ",".join(x for x in members if x != master) or None,
            "nodes": len(members),
            "slots": _ranges(slots) if slots is not None else None,
            "slot_count": len(slots) if slots is not None else None,
            "failovers": len(fos),
            "last_failover_ts": fos[-1]["ts"] if fos else None,
            "last_failover_kind": fos[-1]["kind"] if fos else None,
            "node_fail_incidents": sum(_incidents(fail_times.get(x, [])) for x in members)})
    rows.sort(key=lambda r: str(r["shard"]))
    return rows


def cluster_summary(cev: Sequence[dict[str, Any]], shards: list[dict[str, Any]],
                    failovers: list[dict[str, Any]], fail_times: dict[str, list[float]]
                    ) -> dict[str, Any]:
    """summary.json's ``cluster``."""
    by_kind: dict[str, int] = {}
    for fo in failovers:
        by_kind[fo["kind"] or "unknown"] = by_kind.get(fo["kind"] or "unknown", 0) + 1
    wins = {(fo["node"], round(fo["ts"])) for fo in failovers}
    moved = 0
    for e in cev:
        if e["event"] == "cluster_slots" and e.get("result") == "gained" and \
                e.get("peer_id") and not any((e.get("node"), round(e["ts"]) + d) in wins
                                             for d in (-1, 0, 1)):
            moved += len(_expand(e.get("slots")))
    states = [e for e in cev if e["event"] == "cluster_state" and e.get("result") == "fail"]
    return {
        "shards": len(shards), "failovers": len(failovers),
        "failovers_by_kind": dict(sorted(by_kind.items())),
        "election_ms": py_stat([fo["election_ms"] for fo in failovers]),
        "fail_to_failover_ms": py_stat([fo["fail_to_failover_ms"] for fo in failovers]),
        "node_fail_incidents": sum(_incidents(t) for t in fail_times.values()),
        "slots_moved": moved,
        "state_fail_events": len(states)}


def build_cluster(cev: Sequence[dict[str, Any]], links: Sequence[Link]
                  ) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """(summary's ``cluster`` or None without cluster events, shards, failovers)."""
    if not cev:
        return None, [], []
    names = _Names(cev)
    failovers = build_failovers(cev, links, names)
    fail_times = _fail_times(cev, names)
    shards = build_shards(cev, links, failovers, fail_times)
    return cluster_summary(cev, shards, failovers, fail_times), shards, failovers
