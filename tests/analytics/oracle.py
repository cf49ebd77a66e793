"""A pure-Python reference implementation of the sync analytics: the tests' oracle.

Theory of operation: it reads NDJSON lines the way Spark's JSON reader does (blank lines are no
records; text that is not a JSON object, or a field of the wrong type, is an unparseable line;
numbers given for string fields become their text) and computes every table and metric of
``pyrepl.analytics.job`` from the definitions in that module's docstring, with plain dicts,
sorting and exact nearest-rank percentiles. It shares only the constants of
``pyrepl.analytics.schema`` with the job, never its code; the Spark results must agree (counts
exactly, floating sums to rounding, percentiles within the approximation's rank error).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from pyrepl.analytics.logline import REDIS, VALKEY
from pyrepl.analytics.logread import MATCH_CLOCK_S, MATCH_S
from pyrepl.analytics.schema import (
    ADVICE_QUANTILES,
    BENIGN_LOST,
    COUNTED_ONLY,
    FULL_RESULTS,
    LOOP_FAILED_FULL,
    MASTER_EVENTS,
    MATCH_WINDOW_S,
    NEAR_LIMIT,
    OFFSET_BEFORE_BACKLOG,
    OUTPUT_BUFFER_LIMIT,
    QUANTILES,
)
from pyrepl.events import EVENTS, FIELD_TYPES

INTENTIONAL_DOWN = ("promoted", "replicaof")
SENTINEL = float(2 ** 62)
PHASES = ("snapshot", "transfer", "load", "drain", "total")
NICE_BUCKETS = (10, 30, 60, 300, 600, 900, 1800, 3600, 4 * 3600, 6 * 3600, 86400)


# -- reading -------------------------------------------------------------------------------------

LAG_MARK = '"event":"replica_lag"'
LAG_FIELDS = ("ts", "event", "node", "run_id", "peer", "offset", "lag_bytes", "lag_ms")


def parse_line(line: str) -> tuple[dict[str, Any] | None, str | None]:
    """(event, None) for a good line, (None, why) for a bad one, (None, None) for no record.

    A line holding the writer's exact ``"event":"replica_lag"`` is read for the lag fields only
    (and is unparseable if its last ``event`` key says otherwise)."""
    lag = LAG_MARK in line
    if not lag and not line.strip():
        return None, None
    try:
        obj = json.loads(line)
    except ValueError:
        return None, "unparseable"
    if not isinstance(obj, dict):
        return None, "unparseable"
    ev: dict[str, Any] = {}
    for k, v in obj.items():
        t = FIELD_TYPES.get(k)
        if t is None or v is None or (lag and k not in LAG_FIELDS):
            continue
        if t == "string":
            if isinstance(v, str):
                ev[k] = v
            elif isinstance(v, bool) or not isinstance(v, int | float):
                return None, "unparseable"
            else:
                ev[k] = json.dumps(v)
        elif t == "long":
            if isinstance(v, bool) or not isinstance(v, int):
                return None, "unparseable"
            ev[k] = v
        else:
            if isinstance(v, bool) or not isinstance(v, int | float):
                return None, "unparseable"
            ev[k] = float(v)
    if ev.get("ts") is None or ev.get("event") is None or ev.get("node") is None:
        return None, "missing-required"
    if lag and ev["event"] != "replica_lag":
        return None, "unparseable"
    if ev["event"] not in EVENTS:
        return None, "unknown-event"
    return ev, None


def read_lines(lines: Iterable[str], since: float | None = None, until: float | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    events: list[dict[str, Any]] = []
    bad = {"unparseable": 0, "missing-required": 0, "unknown-event": 0}
    for line in lines:
        ev, why = parse_line(line)
        if why is not None:
            bad[why] += 1
        elif ev is not None:
            if since is not None and ev["ts"] < since:
                continue
            if until is not None and ev["ts"] >= until:
                continue
            events.append(ev)
    for ev in events:
        if ev["event"] in MASTER_EVENTS:
            ev["master"], ev["replica"] = ev["node"], ev.get("peer")
        else:
            ev["master"], ev["replica"] = ev.get("peer"), ev["node"]
    return events, bad


def source_rank(ev: dict[str, Any]) -> int:
    """0 pyrepl's own log (no ``source``), 1 a Redis/Valkey log, 2 the collector, 3 its
    inferred events."""
    src = ev.get("source")
    if src is None or src == "pyrepl":
        return 0
    if src in (REDIS, VALKEY):
        return 1
    return 3 if ev.get("inferred") == 1 else 2


def match_key(e: dict[str, Any]) -> str:
    """What a change is, to match an inferred event with a logged one: the event, and for a
    PSYNC decision whether it was partial."""
    if e["event"] == "psync_decision":
        return "psync_decision:" + ("partial" if e.get("result") == "continue" else "full")
    return e["event"]


def name_unknown(sev: list[dict[str, Any]], others: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """``unknown:PORT`` nodes (a log's whose host no other log gave) named as the others name
    them: by the PSYNCs matching an unknown master's decisions (the replica it named, at most
    MATCH_S apart) or the decisions matching an unknown replica's PSYNCs, for a host with that
    port (most votes, then the least name); else the only name with that port in the events
    (``others``: the lag and INFO samples, theirs too)."""
    def port(n: str) -> str:
        return n.rsplit(":", 1)[-1]

    def unknown(n: Any) -> bool:
        return isinstance(n, str) and n.startswith("unknown:")

    dec = [e for e in sev if e["event"] == "psync_decision"]
    sent = [e for e in sev if e["event"] == "psync_sent"]
    votes: dict[str, Counter] = defaultdict(Counter)
    for a_side, b_side in ((dec, sent), (sent, dec)):
        for a in a_side:
            if not unknown(a["node"]):
                continue
            for b in b_side:
                bp = b.get("peer")
                if b["node"] == a.get("peer") and bp is not None and not unknown(bp) \
                        and port(bp) == port(a["node"]) and abs(a["ts"] - b["ts"]) <= MATCH_S:
                    votes[a["node"]][bp] += 1
    by_port: dict[str, set[str]] = defaultdict(set)
    for e in sev + others:
        for n in (e["node"], e.get("peer")):
            if n is not None and not unknown(n):
                by_port[port(n)].add(n)
    names: dict[str, str] = {}
    for e in sev:
        u = e["node"]
        if not unknown(u) or u in names:
            continue
        if votes[u]:
            names[u] = min(votes[u].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        elif len(by_port[port(u)]) == 1:
            names[u] = next(iter(by_port[port(u)]))
    out = []
    for e in sev:
        if e["node"] in names:
            e = {**e, "node": names[e["node"]]}
            side = "master" if e["event"] in MASTER_EVENTS else "replica"
            e[side] = e["node"]
        out.append(e)
    return out


def prefer_sources(sev: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events no richer source of their node covers: a source covers the time from its
    first to its last event of that node (an inferred event with ``since``: its whole window
    (``since``, ``ts``]). Of the collector's inferred events not covered so (a log read
    before the collector's last samples, or that starts after the collector's first), those
    a richer source logged too: per node, change (match_key), time and window, as many as the
    richer sources' events of that change in the window (widened by MATCH_CLOCK_S), the first
    by (sync_id, peer), those naming a peer the richer sources name there first, then those
    naming none; a master's decisions count as seen by the richer sources from the replica's
    end too (a PSYNC reply no richer decision pairs with within MATCH_S; a dual-channel one
    is a partial sync in the counters too)."""
    span: dict[tuple[str, int], tuple[float, float]] = {}
    rich: dict[tuple[str, str], list[tuple[float, Any]]] = defaultdict(list)
    for e in sev:
        rank = source_rank(e)
        key = (e["node"], rank)
        t0, t1 = span.get(key, (e["ts"], e["ts"]))
        span[key] = (min(t0, e["ts"]), max(t1, e["ts"]))
    richer = [e for e in sev if source_rank(e) < 3]
    for e in richer:
        rich[(e["node"], match_key(e))].append((e["ts"], e.get("peer")))
        if e["event"] == "psync_decision" and e.get("result") == "dualchannel":
            rich[(e["node"], "psync_decision:partial")].append((e["ts"], e.get("peer")))
    # a master's decisions seen from the replica's end: its replies no richer decision of
    # that master pairs with (a dual-channel sync: a partial one too, in the counters)
    decs = [e for e in richer if e["event"] == "psync_decision"]
    for e in richer:
        if e["event"] != "psync_reply" or e.get("peer") is None or e.get("result") not in (
                "continue", "full", "rdbchannel", "dualchannel", "sync"):
            continue
        if any(d["node"] == e["peer"] and d.get("peer") == e["node"]
               and abs(d["ts"] - e["ts"]) <= MATCH_S for d in decs):
            continue
        kind = "partial" if e["result"] == "continue" else "full"
        rich[(e["peer"], "psync_decision:" + kind)].append((e["ts"], e["node"]))
        if e["result"] == "dualchannel":
            rich[(e["peer"], "psync_decision:partial")].append((e["ts"], e["node"]))
    def start(e: dict[str, Any]) -> float:
        since = e.get("since")
        return since if since is not None and source_rank(e) == 3 else e["ts"]

    kept = [e for e in sev if not any(
        span[(e["node"], r)][0] <= start(e) and e["ts"] <= span[(e["node"], r)][1]
        for r in range(source_rank(e)) if (e["node"], r) in span)]
    windows: dict[tuple[str, str, float, float], list[dict[str, Any]]] = defaultdict(list)
    for e in kept:
        if source_rank(e) == 3 and e.get("since") is not None:
            windows[(e["node"], match_key(e), e["ts"], e["since"])].append(e)
    dropped: set[int] = set()
    for (node, key, ts, since), es in windows.items():
        near = [p for t, p in rich.get((node, key), ())
                if since - MATCH_CLOCK_S < t <= ts + MATCH_CLOCK_S]
        hits, named = len(near), {p for p in near if p is not None}
        # those the richer sources name first, then the unnamed, then the others
        es.sort(key=lambda x: (0 if x.get("peer") in named else 1 if x.get("peer") is None
                               else 2, _nkey(x.get("sync_id")), _nkey(x.get("peer"))))
        dropped.update(id(x) for x in es[:hits])
    return [e for e in kept if id(e) not in dropped]


# -- helpers mirroring SQL aggregate semantics ---------------------------------------------------

def _nkey(v: Any) -> tuple[bool, Any]:
    """Sort key with nulls first (Spark's ascending order)."""
    return (v is not None, v if v is not None else 0)


def smax(vals: Iterable[Any]) -> Any:
    vs = [v for v in vals if v is not None]
    return max(vs) if vs else None


def smin(vals: Iterable[Any]) -> Any:
    vs = [v for v in vals if v is not None]
    return min(vs) if vs else None


def first_by_ts(evs: list[dict[str, Any]], col: str) -> Any:
    """min(struct(ts, col)).col: the value at the earliest ts, nulls first on ties."""
    if not evs:
        return None
    return min(evs, key=lambda e: (e["ts"], _nkey(e.get(col)))).get(col)


def coalesce(*vals: Any) -> Any:
    for v in vals:
        if v is not None:
            return v
    return None


def ms_between(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return round((a - b) * 1000.0, 3)


def bucket_of(ts: float, bucket_s: float) -> float:
    return math.floor(ts / bucket_s) * bucket_s


def choose_bucket(first_ts: float | None, last_ts: float | None) -> float:
    if first_ts is None or last_ts is None:
        return 60.0
    span = max(0.0, last_ts - first_ts)
    for b in NICE_BUCKETS:
        if span / b <= 300:
            return float(b)
    return float(NICE_BUCKETS[-1])


def nearest_rank(sorted_vals: list[Any], q: float) -> Any:
    if not sorted_vals:
        return None
    k = max(1, math.ceil(q * len(sorted_vals)))
    return sorted_vals[k - 1]


def stat(vals: Iterable[Any], qs: tuple[float, ...] = QUANTILES) -> dict[str, Any]:
    vs = sorted((v for v in vals if v is not None), key=lambda v: (v != v, v))  # NaN last
    out: dict[str, Any] = {"count": len(vs)}
    for q in qs:
        out[f"p{round(q * 100):d}"] = nearest_rank(vs, q)
    out["max"] = vs[-1] if vs else None
    out["_values"] = vs
    return out


def group(rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Any]
          ) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return out


def counts(rows: Iterable[dict[str, Any]], col: str) -> dict[str, int]:
    c: dict[str, int] = defaultdict(int)
    for r in rows:
        v = r.get(col)
        c[str(v) if v is not None else "unknown"] += 1
    return dict(c)


def not_benign(ev: dict[str, Any]) -> bool:
    return ev.get("reason") is None or ev["reason"] not in BENIGN_LOST


# -- syncs ---------------------------------------------------------------------------------------

def master_syncs(sev: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    mev = [e for e in sev if e["event"] in MASTER_EVENTS and e["event"] != "replica_lag"
           and e.get("sync_id") is not None]
    for (master, replica, sid), evs in group(
            mev, lambda e: (e["master"], e["replica"], e["sync_id"])).items():
        dec = [e for e in evs if e["event"] == "psync_decision"]
        if not dec:
            continue
        lost = [e for e in evs if e["event"] == "replica_lost" and not_benign(e)]
        online = [e for e in evs if e["event"] == "replica_online"]

        def pick(sel: list[dict[str, Any]], col: str) -> Any:
            return smax(e.get(col) for e in sel)

        rows.append({
            "master": master, "replica": replica, "m_sync_id": sid,
            "t_decision": smin(e["ts"] for e in dec),
            "m_result": pick(dec, "result"), "reason": pick(dec, "reason"),
            "gap": pick(dec, "gap"), "req_replid": pick(dec, "req_replid"),
            "req_offset": pick(dec, "req_offset"), "backlog_size": pick(dec, "backlog_size"),
            "backlog_histlen": pick(dec, "backlog_histlen"),
            "master_repl_offset": pick(dec, "master_repl_offset"),
            "m_resume_from": pick(dec, "offset"),
            "m_mode": pick([e for e in evs if e["event"] in (
                "fullsync_fork", "fullsync_rdb_sent", "replica_online")], "mode"),
            "m_rdb_bytes": pick([e for e in evs if e["event"] == "fullsync_rdb_sent"], "bytes"),
            "partial_bytes": pick([e for e in evs if e["event"] == "partial_sent"], "bytes"),
            "t_online": smin(e["ts"] for e in online),
            "m_online_peak": pick(online, "buffer_peak"),
            "m_spilled": pick(online, "spilled"),
            "m_queued_ms": pick([e for e in evs if e["event"] == "fullsync_fork"], "queued_ms"),
            "m_max_bandwidth": pick([e for e in evs if e["event"] in (
                "fullsync_fork", "fullsync_rdb_sent")], "max_bandwidth"),
            "t_lost": smin(e["ts"] for e in lost),
            "lost_reason": first_by_ts(lost, "reason"),
            "m_lost_peak": pick(lost, "buffer_peak"),
            "m_buffer_limit": smax(e.get("buffer_limit") for e in evs),
        })
    return rows


def replica_attempts(sev: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    rev = [e for e in sev if e["event"] not in MASTER_EVENTS and e["event"] != "link_down"
           and e.get("sync_id") is not None]
    for (master, replica, sid), evs in group(
            rev, lambda e: (e["master"], e["replica"], e["sync_id"])).items():
        def of(*names: str, evs: list[dict[str, Any]] = evs) -> list[dict[str, Any]]:
            return [e for e in evs if e["event"] in names]

        def tmin(*names: str) -> Any:
            return smin(e["ts"] for e in of(*names))

        def pick(col: str, *names: str) -> Any:
            return smax(e.get(col) for e in of(*names))

        rows.append({
            "master": master, "replica": replica, "r_sync_id": sid,
            "t_first_event": min(e["ts"] for e in evs),
            "t_psync": tmin("psync_sent"),
            "r_req_replid": pick("req_replid", "psync_sent"),
            "r_req_offset": pick("req_offset", "psync_sent"),
            "reply_result": first_by_ts(of("psync_reply"), "result"),
            "t_first_byte": tmin("rdb_first_byte"),
            "t_rdb_received": tmin("rdb_received"),
            "r_rdb_bytes": pick("bytes", "rdb_received"),
            "t_load_done": tmin("load_done"),
            "keys": pick("keys", "load_done"),
            "t_drained": tmin("buffer_drained"),
            "r_buffer_peak": pick("buffer_peak", "buffer_drained"),
            "r_buffer_limit": pick("buffer_limit", "buffer_drained"),
            "r_spilled": pick("spilled", "buffer_drained"),
            "t_link_up": tmin("link_up"),
            "up_result": pick("result", "link_up"),
            "t_caught_up": tmin("caught_up"),
            "r_mode": pick("mode", "psync_reply", "rdb_first_byte", "rdb_received", "load_done",
                           "link_up"),
            "t_failed": tmin("sync_failed"),
            "fail_reason": first_by_ts(of("sync_failed"), "reason"),
        })
    return rows


def match_halves(m: list[dict[str, Any]], r: list[dict[str, Any]],
                 window_s: float = MATCH_WINDOW_S) -> list[tuple[Any, Any, str, str]]:
    by_link = group([x for x in r if x["t_psync"] is not None],
                    lambda x: (x["master"], x["replica"]))
    cand = []
    for a in m:
        if a["master"] is None or a["replica"] is None:
            continue
        for b in by_link.get((a["master"], a["replica"]), []):
            d = abs(a["t_decision"] - b["t_psync"])
            if d > window_s:
                continue
            if a["req_replid"] is not None and not (
                    a["req_replid"] == b["r_req_replid"]
                    and a["req_offset"] == b["r_req_offset"]):
                continue
            cand.append((a["master"], a["replica"], a["m_sync_id"], b["r_sync_id"], d))
    best_m: dict[tuple[Any, Any, str], tuple[float, str]] = {}
    best_r: dict[tuple[Any, Any, str], tuple[float, str]] = {}
    for mm, rr, ms, rs, d in cand:
        k = (mm, rr, ms)
        if k not in best_m or (d, rs) < best_m[k]:
            best_m[k] = (d, rs)
        k2 = (mm, rr, rs)
        if k2 not in best_r or (d, ms) < best_r[k2]:
            best_r[k2] = (d, ms)
    return [(mm, rr, ms, rs) for mm, rr, ms, rs, d in cand
            if best_m[(mm, rr, ms)][1] == rs and best_r[(mm, rr, rs)][1] == ms]


M_COLS = ("t_decision", "m_result", "reason", "gap", "req_replid", "req_offset", "backlog_size",
          "backlog_histlen", "master_repl_offset", "m_mode", "m_rdb_bytes", "partial_bytes",
          "t_online", "m_online_peak", "t_lost", "lost_reason", "m_lost_peak", "m_buffer_limit",
          "m_spilled", "m_queued_ms", "m_max_bandwidth", "m_resume_from")
R_COLS = ("t_first_event", "t_psync", "r_req_replid", "r_req_offset", "reply_result",
          "t_first_byte", "t_rdb_received", "r_rdb_bytes", "t_load_done", "keys", "t_drained",
          "r_buffer_peak", "r_buffer_limit", "t_link_up", "up_result", "t_caught_up", "r_mode",
          "t_failed", "fail_reason", "r_spilled")


def build_syncs(m: list[dict[str, Any]], r: list[dict[str, Any]], bucket_s: float,
                window_s: float = MATCH_WINDOW_S) -> list[dict[str, Any]]:
    pairs = match_halves(m, r, window_s)
    m_to_r = {(mm, rr, ms): rs for mm, rr, ms, rs in pairs}
    rps = {(x["master"], x["replica"], x["r_sync_id"]): x for x in r if x["t_psync"] is not None}
    used = set()
    joined = []
    for a in m:
        rs = m_to_r.get((a["master"], a["replica"], a["m_sync_id"]))
        row = dict(a)
        row["r_sync_id"] = rs
        b = rps.get((a["master"], a["replica"], rs)) if rs is not None else None
        if b is not None:
            used.add((a["master"], a["replica"], rs))
        for col in R_COLS:
            row[col] = b[col] if b is not None else None
        joined.append(row)
    for k, b in rps.items():
        if k in used:
            continue
        row = {"master": b["master"], "replica": b["replica"], "m_sync_id": None,
               "r_sync_id": b["r_sync_id"]}
        for col in M_COLS:
            row[col] = None
        for col in R_COLS:
            row[col] = b[col]
        joined.append(row)
    out = []
    for s in joined:
        result = coalesce(s["m_result"], s["reply_result"])
        kind = "partial" if result == "continue" else "full" if result in FULL_RESULTS \
            else "none"
        full = kind == "full"
        mode = coalesce(s["r_mode"], s["m_mode"],
                        {"rdbchannel": "rdb-channel", "dualchannel": "dual-channel"}.get(
                            result or "")) if full else None
        if s["t_failed"] is not None:
            status = "failed"
        elif s["t_link_up"] is not None or s["t_online"] is not None:
            status = "ok"
        elif s["t_lost"] is not None:
            status = "failed"
        else:
            status = "incomplete"
        ts = coalesce(s["t_psync"], s["t_decision"])

        def ph(a: Any, b: Any, full: bool = full) -> Any:
            return ms_between(a, b) if full else None

        transfer = ph(s["t_rdb_received"], s["t_first_byte"])
        rdb_bytes = coalesce(s["r_rdb_bytes"], s["m_rdb_bytes"]) if full else None
        thr = rdb_bytes / (transfer / 1000.0) if transfer is not None and transfer > 0 \
            and rdb_bytes is not None else None
        part = kind == "partial"
        pbytes = s["partial_bytes"] if part else None
        bsize = s["backlog_size"]
        frac = pbytes / bsize if part and bsize is not None and bsize > 0 \
            and pbytes is not None else None
        rdbch = mode in ("rdb-channel", "dual-channel")
        if full:
            bkind = "replica" if rdbch else "master-output"
            peak = s["r_buffer_peak"] if rdbch else coalesce(s["m_online_peak"],
                                                               s["m_lost_peak"])
            limit = s["r_buffer_limit"] if rdbch else s["m_buffer_limit"]
        else:
            bkind = peak = limit = None
        near = peak >= NEAR_LIMIT * limit if peak is not None and limit is not None \
            and limit > 0 else None
        obb = full and s["reason"] == OFFSET_BEFORE_BACKLOG and s["gap"] is not None
        base = coalesce(s["backlog_histlen"], bsize)
        need = base + s["gap"] if obb and base is not None else None
        fixable = (not (s["backlog_histlen"] is not None and bsize is not None
                        and s["backlog_histlen"] < bsize)) if obb else None
        out.append({
            "sync_key": coalesce(s["m_sync_id"], s["r_sync_id"]),
            "master": s["master"], "replica": s["replica"], "m_sync_id": s["m_sync_id"],
            "r_sync_id": s["r_sync_id"], "ts": ts, "bucket": bucket_of(ts, bucket_s),
            "result": result, "kind": kind, "reason": s["reason"], "mode": mode,
            "status": status,
            "fail_reason": coalesce(s["lost_reason"], s["fail_reason"])
            if status == "failed" else None,
            "req_replid": s["req_replid"], "req_offset": s["req_offset"], "gap": s["gap"],
            "backlog_size": bsize, "backlog_histlen": s["backlog_histlen"],
            "backlog_need": need, "backlog_fixable": fixable,
            "snapshot_ms": ph(s["t_first_byte"], s["t_psync"]),
            "transfer_ms": transfer,
            "load_ms": ph(s["t_load_done"], s["t_rdb_received"]),
            "drain_ms": ph(coalesce(s["t_caught_up"], s["t_drained"]), s["t_link_up"]),
            "total_ms": ph(coalesce(s["t_caught_up"], s["t_drained"], s["t_link_up"]),
                           s["t_psync"]),
            "rdb_bytes": rdb_bytes, "throughput_bps": thr, "keys": s["keys"],
            "partial_bytes": pbytes, "backlog_fraction": frac, "buffer_kind": bkind,
            "buffer_peak": peak, "buffer_limit": limit, "near_limit": near,
            "lost_reason": s["lost_reason"],
            "spilled": (coalesce(s["r_spilled"], s["m_spilled"]) if rdbch
                        else coalesce(s["m_spilled"], s["r_spilled"])) if full else None,
            "queued_ms": s["m_queued_ms"] if full else None,
            "max_bandwidth": s["m_max_bandwidth"] if full else None,
            "resumed_from": s["m_resume_from"] if result == "resume" else None,
        })
    for _, rows in group(out, lambda x: (x["master"], x["replica"])).items():
        rows.sort(key=lambda x: (x["ts"], x["sync_key"]))
        prev = None
        for x in rows:
            if x["kind"] == "full":
                x["cause"] = OUTPUT_BUFFER_LIMIT if prev == OUTPUT_BUFFER_LIMIT \
                    else coalesce(x["reason"], "unknown")
            else:
                x["cause"] = None
            prev = x["lost_reason"]
    return out


# -- recoveries ----------------------------------------------------------------------------------

def build_recoveries(sev: list[dict[str, Any]], r: list[dict[str, Any]]
                     ) -> list[dict[str, Any]]:
    rows = []
    for e in sev:
        if e["event"] == "link_down":
            rows.append({"replica": e["replica"], "down_master": e["master"], "ts": e["ts"],
                         "rank": 0, "id": e.get("sync_id"), "down_reason": e.get("reason"),
                         "t_link_up": None, "up_result": None, "t_caught_up": None,
                         "up_master": None, "psync": False, "full_failed": False,
                         "conn_failed": False})
    for a in r:
        rows.append({"replica": a["replica"], "down_master": None,
                     "ts": coalesce(a["t_psync"], a["t_first_event"]), "rank": 1,
                     "id": a["r_sync_id"], "down_reason": None, "t_link_up": a["t_link_up"],
                     "up_result": a["up_result"], "t_caught_up": a["t_caught_up"],
                     "up_master": a["master"], "psync": a["t_psync"] is not None,
                     "full_failed": a["t_psync"] is not None
                     and a["reply_result"] in FULL_RESULTS and a["t_failed"] is not None,
                     "conn_failed": a["t_psync"] is None and a["t_failed"] is not None})
    out = []
    for replica, rs in group(rows, lambda x: x["replica"]).items():
        rs.sort(key=lambda x: (x["ts"], x["rank"], _nkey(x["id"])))
        recs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        k = 0
        for x in rs:
            if x["rank"] == 0:
                k += 1
            if k > 0:
                recs[k].append(x)
        for k, grp in recs.items():
            ups = [(x["t_link_up"], _nkey(x["id"]), _nkey(x["up_result"]),
                    _nkey(x["t_caught_up"]), _nkey(x["up_master"]), x)
                   for x in grp if x["t_link_up"] is not None]
            first = min(ups, key=lambda u: u[:5])[5] if ups else None
            t_up = first["t_link_up"] if first else None

            def before(x: dict[str, Any], t_up: Any = t_up) -> bool:
                return t_up is None or x["ts"] <= t_up

            downs = [x for x in grp if x["rank"] == 0]
            atts = [x for x in grp if x["rank"] == 1 and before(x)]
            t_down = min(x["ts"] for x in downs)
            reason = smax(x["down_reason"] for x in downs)
            caught = first["t_caught_up"] if first else None
            failed_full = sum(1 for x in atts if x["full_failed"])
            out.append({
                "replica": replica, "master": smax(x["down_master"] for x in downs), "rec": k,
                "t_down": t_down, "down_reason": reason,
                "intentional": reason in INTENTIONAL_DOWN,
                "t_up": t_up, "up_sync_id": first["id"] if first else None,
                "up_master": first["up_master"] if first else None,
                "kind": None if first is None else
                "partial" if first["up_result"] == "continue" else "full",
                "t_caught_up": caught,
                "downtime_ms": ms_between(t_up, t_down),
                "recovery_ms": ms_between(caught, t_down),
                "attempts": sum(1 for x in atts if x["psync"]),
                "failed_full": failed_full,
                "connect_failures": sum(1 for x in atts if x["conn_failed"]),
                "loop": failed_full >= LOOP_FAILED_FULL,
            })
    return out


def build_streaks(r: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A replica's attempts split after every one that brought the link up; per stretch, the
    full syncs that failed (only stretches with one or more)."""
    out = []
    for replica, rs in group(r, lambda a: a["replica"]).items():
        rs = sorted(rs, key=lambda a: (coalesce(a["t_psync"], a["t_first_event"]),
                                       _nkey(a["r_sync_id"])))
        segs: dict[int, list[dict[str, Any]]] = defaultdict(list)
        seg = 0
        for a in rs:
            segs[seg].append(a)
            if a["t_link_up"] is not None:
                seg += 1
        for k, grp in segs.items():
            failed = [a for a in grp if a["t_psync"] is not None
                      and a["reply_result"] in FULL_RESULTS and a["t_failed"] is not None]
            if not failed:
                continue
            last = max(failed, key=lambda a: (a["t_psync"], _nkey(a["r_sync_id"]),
                                              _nkey(a["master"])))
            out.append({"replica": replica, "master": last["master"], "seg": k,
                        "failed_full": len(failed),
                        "loop": len(failed) >= LOOP_FAILED_FULL})
    return out


# -- lag -----------------------------------------------------------------------------------------

def master_backlogs(m: list[dict[str, Any]]) -> dict[Any, int]:
    out: dict[Any, int] = {}
    for x in m:
        if x["backlog_size"] is not None:
            out[x["master"]] = max(out.get(x["master"], x["backlog_size"]), x["backlog_size"])
    return out


def build_lag_series(lag: list[dict[str, Any]], backlogs: dict[Any, int], bucket_s: float
                     ) -> list[dict[str, Any]]:
    out = []
    for (master, replica, run_id, b), evs in group(
            lag, lambda e: (e["master"], e["replica"], e.get("run_id"),
                            bucket_of(e["ts"], bucket_s))).items():
        lb = [e.get("lag_bytes") for e in evs]
        lm = [e.get("lag_ms") for e in evs]
        mro = [e["offset"] + e["lag_bytes"] for e in evs
               if e.get("offset") is not None and e.get("lag_bytes") is not None]
        n = len(evs)
        lbs = [v for v in lb if v is not None]
        lms = [v for v in lm if v is not None]
        bsz = backlogs.get(master)
        lbmax = smax(lb)
        out.append({
            "master": master, "replica": replica, "run_id": run_id, "bucket": b,
            "samples": n, "lag_bytes_max": lbmax, "lag_ms_max": smax(lm),
            "mro_min": smin(mro), "mro_max": smax(mro),
            "ts_min": min(e["ts"] for e in evs), "ts_max": max(e["ts"] for e in evs),
            "backlog_size": bsz,
            "lag_bytes_avg": sum(lbs) / n if lbs else None,
            "lag_ms_avg": math.fsum(lms) / n if lms else None,
            "lag_backlog_ratio_max": lbmax / bsz if bsz is not None and bsz > 0
            and lbmax is not None else None,
        })
    return out


def build_write_rates(series: list[dict[str, Any]], bucket_s: float) -> list[dict[str, Any]]:
    per = []
    for (master, _run, _b), rows in group(series, lambda x: (x["master"], x["run_id"],
                                                             x["bucket"])).items():
        hi, lo = smax(x["mro_max"] for x in rows), smin(x["mro_min"] for x in rows)
        span = max(x["ts_max"] for x in rows) - min(x["ts_min"] for x in rows)
        if not span > 0:
            continue
        per.append({"master": master, "delta": hi - lo if hi is not None and lo is not None
                    else None, "span": span, "backlog_size": smax(x["backlog_size"]
                                                                  for x in rows)})
    out = []
    for master, rows in group(per, lambda x: x["master"]).items():
        ds = [x["delta"] for x in rows if x["delta"] is not None]
        delta = sum(ds) if ds else None
        span = math.fsum(x["span"] for x in rows)
        peak = smax(x["delta"] / x["span"] for x in rows
                    if x["span"] >= bucket_s / 2 and x["delta"] is not None)
        bsz = smax(x["backlog_size"] for x in rows)
        avg = delta / span if delta is not None else None
        out.append({"master": master, "backlog_size": bsz, "write_rate_avg": avg,
                    "write_rate_peak": peak,
                    "coverage_s": bsz / avg if avg and avg > 0 and bsz is not None else None,
                    "coverage_peak_s": bsz / peak if peak and peak > 0 and bsz is not None
                    else None})
    return out


# -- everything ----------------------------------------------------------------------------------

CURVE_POWERS = (16, 44)


def curve_sizes(current: int | None, max_need: float | None) -> list[int]:
    lo = max(1 << CURVE_POWERS[0], current or (1 << 20))
    k = max(CURVE_POWERS[0], int(math.floor(math.log2(lo))) - 1)
    hi = max(float(lo) * 2, max_need or 0.0)
    out = []
    while k <= CURVE_POWERS[1]:
        out.append(1 << k)
        if (1 << k) >= hi:
            break
        k += 1
    return out


def build_links(syncs: list[dict[str, Any]], recs: list[dict[str, Any]],
                sev: list[dict[str, Any]], lag: list[dict[str, Any]],
                backlogs: dict[Any, int], streaks: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    def keyed(rows: Iterable[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
        return group([x for x in rows if x["master"] is not None and x["replica"] is not None],
                     lambda x: (x["master"], x["replica"]))

    s = keyed(syncs)
    downs = keyed(e for e in sev if e["event"] == "link_down")
    lost = keyed(e for e in sev if e["event"] == "replica_lost" and not_benign(e))
    lg = keyed(lag)
    rc = keyed(x for x in recs if not x["intentional"])
    lp = keyed(x for x in streaks if x["loop"])
    out = []
    for k in set(s) | set(downs) | set(lost) | set(lg) | set(rc) | set(lp):
        ss, ll, rr = s.get(k, []), lg.get(k, []), rc.get(k, [])
        partial = sum(1 for x in ss if x["kind"] == "partial")
        full = sum(1 for x in ss if x["kind"] == "full")
        b = backlogs.get(k[0])
        ratios = [e.get("lag_bytes") / b if b is not None and b > 0
                  and e.get("lag_bytes") is not None else None for e in ll]
        out.append({
            "master": k[0], "replica": k[1], "syncs": len(ss), "partial": partial,
            "full": full, "failed": sum(1 for x in ss if x["status"] == "failed"),
            "partial_ratio": partial / (partial + full) if partial + full else None,
            "link_downs": len(downs.get(k, [])), "replica_lost": len(lost.get(k, [])),
            "lag_samples": len(ll),
            "lag_bytes_max": smax(e.get("lag_bytes") for e in ll),
            "lag_ms_max": smax(e.get("lag_ms") for e in ll),
            "lag_backlog_ratio_max": smax(ratios),
            "recoveries": len(rr),
            "recovery_ms_max": smax(x["recovery_ms"] for x in rr),
            "full_sync_loops": len(lp.get(k, [])),
            "_lag_bytes": stat(e.get("lag_bytes") for e in ll),
            "_lag_ms": stat(e.get("lag_ms") for e in ll),
            "_recovery_ms": stat(x["recovery_ms"] for x in rr),
        })
    return out


def compute(lines: Iterable[str], since: float | None = None, until: float | None = None,
            bucket_s: float | None = None) -> dict[str, Any]:
    """Every table and the summary, from NDJSON lines."""
    events, bad = read_lines(lines, since, until)
    t0 = min((e["ts"] for e in events), default=None)
    t1 = max((e["ts"] for e in events), default=None)
    bucket_s = bucket_s or choose_bucket(t0, t1)
    every_sev = [e for e in events
                 if e["event"] != "replica_lag" and e["event"] not in COUNTED_ONLY]
    sev = prefer_sources(name_unknown(every_sev, [e for e in events if e["event"] == "replica_lag"
                                                  or e["event"] in COUNTED_ONLY]))
    lag = [e for e in events if e["event"] == "replica_lag"]
    m = master_syncs(sev)
    r = replica_attempts(sev)
    syncs = build_syncs(m, r, bucket_s)
    recs = build_recoveries(sev, r)
    backlogs = master_backlogs(m)
    series = build_lag_series(lag, backlogs, bucket_s)
    rates = build_write_rates(series, bucket_s)
    streaks = build_streaks(r)
    links = build_links(syncs, recs, sev, lag, backlogs, streaks)

    full = [s for s in syncs if s["kind"] == "full"]
    part = [s for s in syncs if s["kind"] == "partial"]
    ok_full = [s for s in full if s["status"] == "ok"]
    queued = [s for s in full if (s["queued_ms"] or 0) > 0]
    paced = [s for s in full if (s["max_bandwidth"] or 0) > 0]
    n_part, n_full = len(part), len(full)
    by_mode = {}
    for mode, rows in group(full, lambda s: s["mode"]).items():
        ok = [s for s in rows if s["status"] == "ok"]
        by_mode[mode if mode else "unknown"] = {
            "count": len(rows),
            "durations_ms": {ph: stat(s[f"{ph}_ms"] for s in ok) for ph in PHASES}}
    buffers = {}
    for bk, rows in group([s for s in full if s["buffer_kind"] is not None],
                          lambda s: s["buffer_kind"]).items():
        with_limit = sum(1 for s in rows if s["near_limit"] is not None)
        near = sum(1 for s in rows if s["near_limit"])
        buffers[bk] = {"syncs": len(rows), "peak_bytes": stat(s["buffer_peak"] for s in rows),
                       "with_limit": with_limit, "over_80pct": near,
                       "over_80pct_share": near / with_limit if with_limit else None,
                       "spilled_syncs": sum(1 for s in rows if (s["spilled"] or 0) > 0),
                       "spilled_bytes": sum(s["spilled"] or 0 for s in rows)}
    rec = [x for x in recs if not x["intentional"]]
    downs = [e for e in sev if e["event"] == "link_down"]
    lost = [e for e in sev if e["event"] == "replica_lost" and not_benign(e)]

    def ratio(e: dict[str, Any]) -> Any:
        b = backlogs.get(e["master"])
        return e.get("lag_bytes") / b if b is not None and b > 0 \
            and e.get("lag_bytes") is not None else None

    obb = [s for s in syncs if s["backlog_need"] is not None]
    needs = sorted(float(s["backlog_need"]) if s["backlog_fixable"] else SENTINEL for s in obb)
    adv = {}
    for q in ADVICE_QUANTILES:
        v = nearest_rank(needs, q)
        adv[f"p{round(q * 100):d}"] = int(v) if v is not None and v < SENTINEL else None
    adv["_needs"] = needs
    fixable = [s["backlog_need"] for s in obb if s["backlog_fixable"]]
    lo = min(backlogs.values()) if backlogs else None
    sizes = curve_sizes(lo, max(fixable) if fixable else None)
    curve = []
    for size in sizes:
        k = sum(1 for v in fixable if v <= size)
        curve.append({"backlog_bytes": size, "syncs_avoided": k,
                      "partial_ratio": (n_part + k) / (n_part + n_full)
                      if n_part + n_full else None})
    summary = {
        "input": {"events": len(events), "malformed_lines": sum(bad.values()),
                  "malformed": bad, "first_ts": t0, "last_ts": t1, "bucket_s": bucket_s,
                  "events_by_type": counts(events, "event"),
                  "duplicates_dropped": len(every_sev) - len(sev)},
        "psync": {"syncs": len(syncs), "by_result": counts(syncs, "result"),
                  "partial": n_part, "full": n_full,
                  "partial_ratio": n_part / (n_part + n_full) if n_part + n_full else None},
        "full_syncs": {
            "count": n_full, "by_reason": counts(full, "reason"),
            "by_cause": counts(full, "cause"), "by_mode": counts(full, "mode"),
            "failed": sum(1 for s in full if s["status"] == "failed"),
            "durations_ms": {ph: stat(s[f"{ph}_ms"] for s in ok_full) for ph in PHASES},
            "by_mode_durations": by_mode,
            "rdb_bytes": stat(s["rdb_bytes"] for s in full),
            "rdb_bytes_total": sum(s["rdb_bytes"] for s in full if s["rdb_bytes"] is not None),
            "throughput_bytes_per_s": stat(s["throughput_bps"] for s in full),
            "queued": len(queued), "queued_ms": stat(s["queued_ms"] for s in queued),
            "paced": len(paced),
            "paced_throughput_bytes_per_s": stat(s["throughput_bps"] for s in paced),
            "resumed": sum(1 for s in syncs if s["result"] == "resume"),
            "resumed_bytes": sum(s["resumed_from"] or 0 for s in syncs
                                 if s["result"] == "resume"),
        },
        "partial_syncs": {"count": n_part, "bytes": stat(s["partial_bytes"] for s in part),
                          "backlog_fraction": stat(s["backlog_fraction"] for s in part)},
        "failures": {
            "failed_syncs": sum(1 for s in syncs if s["status"] == "failed"),
            "by_reason": counts([s for s in syncs if s["status"] == "failed"], "fail_reason"),
            "attempts_per_recovery": stat(x["attempts"] for x in rec if x["t_up"] is not None),
            "full_sync_loops": sum(1 for x in streaks if x["loop"]),
            "connect_failures": sum(x["connect_failures"] for x in rec),
        },
        "buffers": buffers,
        "links": {"link_downs": len(downs), "link_downs_by_reason": counts(downs, "reason"),
                  "replica_lost_by_reason": counts(lost, "reason"),
                  "downtime_ms": stat(x["downtime_ms"] for x in rec)},
        "recovery": {
            "count": len(rec),
            "not_recovered": sum(1 for x in rec if x["t_up"] is None),
            "not_caught_up": sum(1 for x in rec if x["t_up"] is not None
                                 and x["t_caught_up"] is None),
            "ms": stat(x["recovery_ms"] for x in rec),
            "partial_ms": stat(x["recovery_ms"] for x in rec if x["kind"] == "partial"),
            "full_ms": stat(x["recovery_ms"] for x in rec if x["kind"] == "full"),
        },
        "lag": {"samples": len(lag), "bytes": stat(e.get("lag_bytes") for e in lag),
                "ms": stat(e.get("lag_ms") for e in lag),
                "backlog_ratio": stat(ratio(e) for e in lag)},
        "backlog": {
            "offset_before_backlog_syncs": len(obb),
            "unfixable": sum(1 for s in obb if not s["backlog_fixable"]),
            "advice_bytes": adv,
            "current_backlog_bytes": {"min": lo, "max": max(backlogs.values())
                                      if backlogs else None},
            "curve": curve,
            "coverage_s": stat(x["coverage_s"] for x in rates),
            "coverage_at_peak_s": stat(x["coverage_peak_s"] for x in rates),
            "write_rate_bytes_per_s": stat(x["write_rate_avg"] for x in rates),
            "peak_write_rate_bytes_per_s": stat(x["write_rate_peak"] for x in rates),
        },
        "fleet": {
            "nodes": len({x["master"] for x in links} | {x["replica"] for x in links}),
            "masters": len({x["master"] for x in links}),
            "replicas": len({x["replica"] for x in links}),
            "links": len(links),
        },
    }
    return {"summary": summary, "syncs": syncs, "recoveries": recs, "lag_series": series,
            "write_rates": rates, "links": links, "events": events}
