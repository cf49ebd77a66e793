"""The steps after the input pass, finished on the driver in plain Python: syncs, recoveries,
full-sync loops, the lag series' derived columns, write rates, links, nodes, buckets and the
summary's metrics.

Theory of operation: ``read.aggregate_all``'s one pass leaves little — one row per sync event
(never per lag sample), one per link, master run and time bucket of lag, and the lag sample —
bounded by the number of syncs, links and buckets, not of events. When that fits under
``JobConfig.driver_max_rows`` the job collects it in one query and finishes here, which takes
milliseconds where ~25 small Spark jobs took 20 s; above it the Spark steps (``syncs``,
``recoveries``, ``lag``, ``tables``, ``summary``) do the same work on any size. Both follow the
same definitions (those modules' docstrings say what each figure means) and the tests hold both
to the same oracle. What Spark does implicitly is spelled out here: a null sorts first, ``max``
and ``min`` skip nulls, a struct's ``min`` picks the earliest event (ties: the null value
first), ``round`` is half-up on the decimal text. Percentiles are exact nearest-rank ones where
Spark's ``percentile_approx`` is within a rank of them.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pyrepl.analytics.advice import CURVE_POWERS, SENTINEL
from pyrepl.analytics.recoveries import INTENTIONAL_DOWN
from pyrepl.analytics.schema import (
    ADVICE_QUANTILES,
    BENIGN_LOST,
    FULL_RESULTS,
    LOOP_FAILED_FULL,
    MASTER_EVENTS,
    MATCH_WINDOW_S,
    NEAR_LIMIT,
    OFFSET_BEFORE_BACKLOG,
    OUTPUT_BUFFER_LIMIT,
    PHASES,
    QUANTILES,
    REPLICA_BUFFERED,
    RESULT_MODE,
)
from pyrepl.analytics.stats import _num, _ratio, nearest_rank, py_stat

Row = dict[str, Any]
_MASTER = frozenset(MASTER_EVENTS)
_FULL = frozenset(FULL_RESULTS)


# -- Spark's semantics, spelled out ---------------------------------------------------------------

def _nf(x: Any) -> tuple[int, Any]:
    """Sort key of a nullable value in Spark's ascending order (nulls first)."""
    return (0, 0) if x is None else (1, x)


def _round3(x: float) -> float:
    """Spark's ``round(x, 3)`` of a double: half-up on its decimal text."""
    if math.isnan(x) or math.isinf(x):
        return x
    return float(Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def _ms(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else _round3((a - b) * 1000.0)


def _coalesce(*xs: Any) -> Any:
    return next((x for x in xs if x is not None), None)


def _bucket(ts: float, size: float) -> float:
    return math.floor(ts / size) * size


def _first_of(qs: list[Any] | None) -> Any:
    return qs[0] if qs else None


class _Group(dict):  # type: ignore[type-arg]
    """One group's aggregates: ``lo``/``hi`` keep the smallest/largest non-null value,
    ``first`` the value of the earliest event (ties: a null value, then the smallest)."""

    def lo(self, name: str, v: Any) -> None:
        if v is not None:
            cur = self.get(name)
            if cur is None or v < cur:
                self[name] = v

    def hi(self, name: str, v: Any) -> None:
        if v is not None:
            cur = self.get(name)
            if cur is None or v > cur:
                self[name] = v

    def first(self, name: str, ts: float, v: Any) -> None:
        key = (ts, _nf(v))
        cur = self.get("_" + name)
        if cur is None or key < cur:
            self["_" + name] = key
            self[name] = v


# -- syncs ---------------------------------------------------------------------------------------

_M_HI = {"psync_decision": (("m_result", "result"), ("reason", "reason"), ("gap", "gap"),
                            ("req_replid", "req_replid"), ("req_offset", "req_offset"),
                            ("backlog_size", "backlog_size"),
                            ("backlog_histlen", "backlog_histlen"),
                            ("master_repl_offset", "master_repl_offset"),
                            ("m_resume_from", "offset")),
         "fullsync_fork": (("m_mode", "mode"), ("m_queued_ms", "queued_ms"),
                           ("m_max_bandwidth", "max_bandwidth")),
         "fullsync_rdb_sent": (("m_mode", "mode"), ("m_rdb_bytes", "bytes"),
                               ("m_max_bandwidth", "max_bandwidth")),
         "partial_sent": (("partial_bytes", "bytes"),),
         "replica_online": (("m_mode", "mode"), ("m_online_peak", "buffer_peak"),
                            ("m_spilled", "spilled"))}
_M_LO = {"psync_decision": "t_decision", "replica_online": "t_online"}
_R_MODE = ("psync_reply", "rdb_first_byte", "rdb_received", "load_done", "link_up")
_R_HI = {"psync_sent": (("r_req_replid", "req_replid"), ("r_req_offset", "req_offset")),
         "rdb_received": (("r_rdb_bytes", "bytes"),), "load_done": (("keys", "keys"),),
         "buffer_drained": (("r_buffer_peak", "buffer_peak"), ("r_buffer_limit", "buffer_limit"),
                            ("r_spilled", "spilled")),
         "link_up": (("up_result", "result"),)}
_R_LO = {"psync_sent": "t_psync", "rdb_first_byte": "t_first_byte",
         "rdb_received": "t_rdb_received", "load_done": "t_load_done",
         "buffer_drained": "t_drained", "link_up": "t_link_up", "caught_up": "t_caught_up",
         "sync_failed": "t_failed"}


def _real_loss(e: Row) -> bool:
    return e["event"] == "replica_lost" and e.get("reason") not in BENIGN_LOST


def master_halves(sev: Iterable[Row]) -> list[Row]:
    """``syncs.master_syncs``: one row per master-side sync (a decision and its sync_id's
    events)."""
    groups: dict[tuple[Any, Any, str], _Group] = {}
    for e in sev:
        ev, sid = e["event"], e.get("sync_id")
        if ev not in _MASTER or ev == "replica_lag" or sid is None:
            continue
        key = (e["master"], e["replica"], sid)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(master=key[0], replica=key[1], m_sync_id=sid)
        for name, f in _M_HI.get(ev, ()):
            g.hi(name, e.get(f))
        if ev in _M_LO:
            g.lo(_M_LO[ev], e["ts"])
        if _real_loss(e):
            g.lo("t_lost", e["ts"])
            g.first("lost_reason", e["ts"], e.get("reason"))
            g.hi("m_lost_peak", e.get("buffer_peak"))
        g.hi("m_buffer_limit", e.get("buffer_limit"))
    return [g for g in groups.values() if g.get("t_decision") is not None]


def replica_halves(sev: Iterable[Row]) -> list[Row]:
    """``syncs.replica_attempts``: one row per replica-side attempt (its sync_id's events but
    link_down)."""
    groups: dict[tuple[Any, Any, str], _Group] = {}
    for e in sev:
        ev, sid = e["event"], e.get("sync_id")
        if ev in _MASTER or ev == "link_down" or sid is None:
            continue
        key = (e["master"], e["replica"], sid)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(master=key[0], replica=key[1], r_sync_id=sid)
        ts = e["ts"]
        g.lo("t_first_event", ts)
        for name, f in _R_HI.get(ev, ()):
            g.hi(name, e.get(f))
        if ev in _R_LO:
            g.lo(_R_LO[ev], ts)
        if ev in _R_MODE:
            g.hi("r_mode", e.get("mode"))
        if ev == "psync_reply":
            g.first("reply_result", ts, e.get("result"))
        elif ev == "sync_failed":
            g.first("fail_reason", ts, e.get("reason"))
    return list(groups.values())


def match_halves(m: Sequence[Row], r: Sequence[Row], window_s: float = MATCH_WINDOW_S
                 ) -> dict[tuple[Any, Any, str], str]:
    """``syncs.match_halves`` as {(master, replica, m_sync_id): r_sync_id}: same link (both
    named), same request, at most ``window_s`` apart, each the other's nearest (ties: the
    smaller sync id)."""
    by_link: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for x in r:
        if x.get("t_psync") is not None and x["master"] is not None and x["replica"] is not None:
            by_link[(x["master"], x["replica"])].append(x)
    times = {}
    for k, xs in by_link.items():
        xs.sort(key=lambda x: x["t_psync"])
        times[k] = [x["t_psync"] for x in xs]
    best_m: dict[tuple[Any, ...], tuple[float, str, str]] = {}
    best_r: dict[tuple[Any, ...], tuple[float, str, str]] = {}
    for a in m:
        near = by_link.get((a["master"], a["replica"]))
        if not near:
            continue
        t, rid = a["t_decision"], a.get("req_replid")
        ts = times[(a["master"], a["replica"])]
        lo = bisect.bisect_left(ts, t - window_s - 1.0)
        hi = bisect.bisect_right(ts, t + window_s + 1.0)
        for b in near[lo:hi]:
            d = abs(t - b["t_psync"])
            if d > window_s:
                continue
            if rid is not None and not (rid == b.get("r_req_replid")
                                        and a.get("req_offset") == b.get("r_req_offset")):
                continue
            km = (a["master"], a["replica"], a["m_sync_id"])
            kr = (a["master"], a["replica"], b["r_sync_id"])
            if km not in best_m or (d, b["r_sync_id"]) < best_m[km][:2]:
                best_m[km] = (d, b["r_sync_id"], a["m_sync_id"])
            if kr not in best_r or (d, a["m_sync_id"]) < best_r[kr][:2]:
                best_r[kr] = (d, a["m_sync_id"], b["r_sync_id"])
    return {km: rs for km, (_, rs, ms) in best_m.items()
            if best_r[(km[0], km[1], rs)][1] == ms}


def build_syncs(m: Sequence[Row], r: Sequence[Row], bucket_s: float,
                window_s: float = MATCH_WINDOW_S) -> list[Row]:
    """``syncs.build_syncs``: the joined halves, one row per sync."""
    pairs = match_halves(m, r, window_s)
    rps = {(x["master"], x["replica"], x["r_sync_id"]): x for x in r
           if x.get("t_psync") is not None}
    joined: list[tuple[Row, Row]] = []
    used = set()
    for a in m:
        rs = pairs.get((a["master"], a["replica"], a["m_sync_id"]))
        b = rps.get((a["master"], a["replica"], rs)) if rs is not None else None
        if b is not None:
            used.add((a["master"], a["replica"], rs))
        joined.append((a, b or {}))
    joined += [({}, b) for k, b in rps.items() if k not in used]
    out = []
    for a, b in joined:
        out.append(_sync_row(a, b, bucket_s))
    # the cause: output-buffer-limit when the link's previous sync was dropped for it
    by_link: dict[tuple[Any, Any], list[Row]] = defaultdict(list)
    for s in out:
        by_link[(s["master"], s["replica"])].append(s)
    for xs in by_link.values():
        xs.sort(key=lambda s: (_nf(s["ts"]), _nf(s["sync_key"])))
        prev = None
        for s in xs:
            if s["kind"] == "full":
                s["cause"] = OUTPUT_BUFFER_LIMIT if prev == OUTPUT_BUFFER_LIMIT \
                    else _coalesce(s["reason"], "unknown")
            prev = s["lost_reason"]
    return out


def _sync_row(a: Row, b: Row, bucket_s: float) -> Row:
    g = a.get
    h = b.get
    result = _coalesce(g("m_result"), h("reply_result"))
    kind = "partial" if result == "continue" else "full" if result in _FULL else "none"
    full, part = kind == "full", kind == "partial"
    mode = _coalesce(h("r_mode"), g("m_mode"), RESULT_MODE.get(result or "")) if full else None
    if h("t_failed") is not None:
        status = "failed"
    elif h("t_link_up") is not None or g("t_online") is not None:
        status = "ok"
    elif g("t_lost") is not None:
        status = "failed"
    else:
        status = "incomplete"
    ts = _coalesce(h("t_psync"), g("t_decision"))
    rdbch = mode in REPLICA_BUFFERED
    t_psync = h("t_psync")
    transfer = _ms(h("t_rdb_received"), h("t_first_byte")) if full else None
    rdb_bytes = _coalesce(h("r_rdb_bytes"), g("m_rdb_bytes")) if full else None
    peak = limit = None
    if full:
        peak = h("r_buffer_peak") if rdbch else _coalesce(g("m_online_peak"), g("m_lost_peak"))
        limit = h("r_buffer_limit") if rdbch else g("m_buffer_limit")
    reason, gap, size, hist = g("reason"), g("gap"), g("backlog_size"), g("backlog_histlen")
    obb = full and reason == OFFSET_BEFORE_BACKLOG and gap is not None
    need = fixable = None
    if obb:
        base = _coalesce(hist, size)
        need = None if base is None else base + gap
        fixable = not (hist is not None and size is not None and hist < size)
    drained = _coalesce(h("t_caught_up"), h("t_drained"))
    pbytes = g("partial_bytes") if part else None
    return {
        "sync_key": _coalesce(g("m_sync_id"), h("r_sync_id")),
        "master": _coalesce(g("master"), h("master")),
        "replica": _coalesce(g("replica"), h("replica")),
        "m_sync_id": g("m_sync_id"), "r_sync_id": h("r_sync_id"), "ts": ts,
        "bucket": _bucket(ts, bucket_s), "result": result, "kind": kind, "reason": reason,
        "cause": None, "mode": mode, "status": status,
        "fail_reason": _coalesce(g("lost_reason"), h("fail_reason")) if status == "failed"
        else None,
        "req_replid": g("req_replid"), "req_offset": g("req_offset"), "gap": gap,
        "backlog_size": size, "backlog_histlen": hist, "backlog_need": need,
        "backlog_fixable": fixable,
        "snapshot_ms": _ms(h("t_first_byte"), t_psync) if full else None,
        "transfer_ms": transfer,
        "load_ms": _ms(h("t_load_done"), h("t_rdb_received")) if full else None,
        "drain_ms": _ms(drained, h("t_link_up")) if full else None,
        "total_ms": _ms(_coalesce(drained, h("t_link_up")), t_psync) if full else None,
        "rdb_bytes": rdb_bytes,
        "throughput_bps": rdb_bytes / (transfer / 1000.0)
        if transfer is not None and transfer > 0 and rdb_bytes is not None else None,
        "keys": h("keys"), "partial_bytes": pbytes,
        "backlog_fraction": pbytes / size
        if part and size is not None and size > 0 and pbytes is not None else None,
        "buffer_kind": ("replica" if rdbch else "master-output") if full else None,
        "buffer_peak": peak, "buffer_limit": limit,
        "near_limit": peak >= NEAR_LIMIT * limit
        if peak is not None and limit is not None and limit > 0 else None,
        "lost_reason": g("lost_reason"),
        "spilled": (_coalesce(h("r_spilled"), g("m_spilled")) if rdbch
                    else _coalesce(g("m_spilled"), h("r_spilled"))) if full else None,
        "queued_ms": g("m_queued_ms") if full else None,
        "max_bandwidth": g("m_max_bandwidth") if full else None,
        "resumed_from": g("m_resume_from") if result == "resume" else None,
    }


# -- recoveries and full-sync loops --------------------------------------------------------------

def _full_failed(a: Row) -> bool:
    return (a.get("t_psync") is not None and a.get("reply_result") in _FULL
            and a.get("t_failed") is not None)


def _attempt_ts(a: Row) -> float:
    return _coalesce(a.get("t_psync"), a["t_first_event"])


def build_recoveries(sev: Iterable[Row], r: Sequence[Row]) -> list[Row]:
    """``recoveries.build_recoveries``: one row per replica link_down."""
    per: dict[Any, list[tuple[Any, Row]]] = defaultdict(list)
    for e in sev:
        if e["event"] == "link_down":
            per[e["replica"]].append(((e["ts"], 0, _nf(e.get("sync_id"))), e))
    for a in r:
        per[a["replica"]].append(((_attempt_ts(a), 1, _nf(a["r_sync_id"])), a))
    out = []
    for replica, rows in per.items():
        rows.sort(key=lambda x: x[0])
        recs: list[tuple[Row, list[tuple[float, Row]]]] = []
        for (ts, rank, _), x in rows:
            if rank == 0:
                recs.append((x, []))
            elif recs:
                recs[-1][1].append((ts, x))
        for n, (down, atts) in enumerate(recs, 1):
            ups = [a for _, a in atts if a.get("t_link_up") is not None]
            up = min(ups, key=lambda a: (a["t_link_up"], _nf(a["r_sync_id"]),
                                         _nf(a.get("up_result")), _nf(a.get("t_caught_up")),
                                         _nf(a["master"]))) if ups else None
            before = [a for ts, a in atts if up is None or ts <= up["t_link_up"]]
            t_down, reason = down["ts"], down.get("reason")
            t_up = up["t_link_up"] if up else None
            caught = up.get("t_caught_up") if up else None
            failed_full = sum(1 for a in before if _full_failed(a))
            out.append({
                "replica": replica, "master": down["master"], "rec": n, "t_down": t_down,
                "down_reason": reason, "intentional": reason in INTENTIONAL_DOWN,
                "t_up": t_up, "up_sync_id": up["r_sync_id"] if up else None,
                "up_master": up["master"] if up else None,
                "kind": None if up is None else "partial" if up.get("up_result") == "continue"
                else "full",
                "t_caught_up": caught, "downtime_ms": _ms(t_up, t_down),
                "recovery_ms": _ms(caught, t_down),
                "attempts": sum(1 for a in before if a.get("t_psync") is not None),
                "failed_full": failed_full,
                "connect_failures": sum(1 for a in before if a.get("t_psync") is None
                                        and a.get("t_failed") is not None),
                "loop": failed_full >= LOOP_FAILED_FULL})
    return out


def build_streaks(r: Sequence[Row]) -> list[Row]:
    """``recoveries.build_streaks``: one row per stretch of a replica without a working link."""
    per: dict[Any, list[Row]] = defaultdict(list)
    for a in r:
        per[a["replica"]].append(a)
    out = []
    for replica, atts in per.items():
        atts.sort(key=lambda a: (_attempt_ts(a), _nf(a["r_sync_id"])))
        seg = 0
        segs: list[list[Row]] = [[]]
        for a in atts:
            segs[-1].append(a)
            if a.get("t_link_up") is not None:
                seg += 1
                segs.append([])
        for n, xs in enumerate(segs):
            if not xs:
                continue
            ff = [a for a in xs if _full_failed(a)]
            last = max(ff, key=lambda a: (_attempt_ts(a), _nf(a["r_sync_id"]),
                                          _nf(a["master"]))) if ff else None
            out.append({
                "replica": replica, "master": last["master"] if last else None, "seg": n,
                "failed_full": len(ff), "loop": len(ff) >= LOOP_FAILED_FULL,
                "t_first_failed": min(_attempt_ts(a) for a in ff) if ff else None,
                "t_last_failed": _attempt_ts(last) if last else None, "attempts": len(xs),
                "recovered": any(a.get("t_link_up") is not None for a in xs),
                "fail_reasons": sorted({a["fail_reason"] for a in ff
                                        if a.get("fail_reason") is not None})})
    return out


# -- lag and write rates -------------------------------------------------------------------------

def master_backlogs(m: Iterable[Row]) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in m:
        b = x.get("backlog_size")
        if b is not None and (x["master"] not in out or b > out[x["master"]]):
            out[x["master"]] = b
    return out


def finish_series(series: Iterable[Row], backlogs: dict[str, int]) -> list[Row]:
    """``lag.build_lag_series``'s last steps on the collected groups: the master's backlog and
    the means and ratio."""
    out = []
    for s in series:
        b = backlogs.get(s["master"])
        n = s["samples"]
        lb, lm, lbx = s["lag_bytes_sum"], s["lag_ms_sum"], s["lag_bytes_max"]
        out.append({**s, "backlog_size": b,
                    "lag_bytes_avg": None if lb is None else lb / n,
                    "lag_ms_avg": None if lm is None else lm / n,
                    "lag_backlog_ratio_max": lbx / b
                    if b is not None and b > 0 and lbx is not None else None})
    return out


def build_write_rates(series: Iterable[Row], bucket_s: float) -> list[Row]:
    """``lag.build_write_rates``."""
    per: dict[tuple[Any, Any, float], _Group] = {}
    for s in series:
        key = (s["master"], s["run_id"], s["bucket"])
        g = per.get(key)
        if g is None:
            g = per[key] = _Group()
        g.hi("mro_max", s["mro_max"])
        g.lo("mro_min", s["mro_min"])
        g.hi("ts_max", s["ts_max"])
        g.lo("ts_min", s["ts_min"])
        g.hi("backlog_size", s["backlog_size"])
    masters: dict[Any, _Group] = {}
    for (master, _, _), g in per.items():
        span = g["ts_max"] - g["ts_min"]
        if not span > 0:
            continue
        delta = g["mro_max"] - g["mro_min"] if g.get("mro_max") is not None \
            and g.get("mro_min") is not None else None
        t = masters.get(master)
        if t is None:
            t = masters[master] = _Group(span=0.0)
        if delta is not None:
            t["delta"] = t.get("delta", 0) + delta
            if span >= bucket_s / 2:
                t.hi("peak", delta / span)
        t["span"] += span
        t.hi("backlog_size", g.get("backlog_size"))
    out = []
    for master, t in masters.items():
        b = t.get("backlog_size")
        avg = None if t.get("delta") is None else t["delta"] / t["span"]
        peak = t.get("peak")
        out.append({"master": master, "backlog_size": b, "write_rate_avg": avg,
                    "write_rate_peak": peak,
                    "coverage_s": b / avg if avg is not None and avg > 0 and b is not None
                    else None,
                    "coverage_peak_s": b / peak if peak is not None and peak > 0
                    and b is not None else None})
    return out


# -- per link, node and bucket -------------------------------------------------------------------

def _counts(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, _Group]:
    """Syncs, partial, full, failed per key (rows whose key is None are left out)."""
    out: dict[Any, _Group] = {}
    for s in rows:
        k = key(s)
        if k is None:
            continue
        g = out.get(k)
        if g is None:
            g = out[k] = _Group(syncs=0, partial=0, full=0, failed=0)
        g["syncs"] += 1
        g["partial"] += s["kind"] == "partial"
        g["full"] += s["kind"] == "full"
        g["failed"] += s["status"] == "failed"
    return out


def _link(x: Row) -> tuple[str, str] | None:
    m, r = x.get("master"), x.get("replica")
    return None if m is None or r is None else (m, r)


def _partial_ratio(x: Row) -> float | None:
    n = (x.get("partial") or 0) + (x.get("full") or 0)
    return x["partial"] / n if n > 0 else None


def build_links(syncs: Sequence[Row], recs: Sequence[Row], series: Sequence[Row],
                sample: dict[tuple[Any, Any], tuple[list[Any], list[Any]]],
                backlogs: dict[str, int], sev: Sequence[Row], streaks: Sequence[Row]
                ) -> list[Row]:
    """``tables.build_links``: per link, syncs, failures, link downs, losses, lag, recoveries,
    loops."""
    links: dict[tuple[str, str], _Group] = defaultdict(_Group)
    for k, g in _counts(syncs, _link).items():
        links[k].update(g)
    for e in sev:
        k = _link(e)
        if k is not None and (e["event"] == "link_down" or _real_loss(e)):
            col = "link_downs" if e["event"] == "link_down" else "replica_lost"
            links[k][col] = links[k].get(col, 0) + 1
    for s in series:
        k = _link(s)
        if k is None:
            continue
        g = links[k]
        g["lag_samples"] = g.get("lag_samples", 0) + s["samples"]
        for col in ("lag_bytes_max", "lag_ms_max", "lag_backlog_ratio_max"):
            g.hi(col, s[col])
        g["_lag"] = True
    for k, (lbs, lms) in sample.items():
        if k[0] is None or k[1] is None or k not in links or not links[k].get("_lag"):
            continue
        g = links[k]
        lb, lm = nearest_rank(lbs, (0.5, 0.99)), nearest_rank(lms, (0.5, 0.99))
        b = backlogs.get(k[0])
        lr = nearest_rank([v / b for v in lbs] if b is not None and b > 0 else [], (0.99,))
        g.update(lag_bytes_p50=lb and lb[0], lag_bytes_p99=lb and lb[1],
                 lag_ms_p50=lm and lm[0], lag_ms_p99=lm and lm[1],
                 lag_backlog_ratio_p99=_first_of(lr))
    for k, xs in _group(x for x in recs if not x["intentional"] and _link(x)).items():
        links[k].update(recoveries=len(xs),
                        recovery_ms_p50=_first_of(nearest_rank([x["recovery_ms"] for x in xs],
                                                               (0.5,))),
                        recovery_ms_max=max((x["recovery_ms"] for x in xs
                                             if x["recovery_ms"] is not None), default=None))
    for x in streaks:
        k = _link(x)
        if x["loop"] and k is not None:
            links[k]["full_sync_loops"] = links[k].get("full_sync_loops", 0) + 1
    cols = ("syncs", "partial", "full", "failed", "link_downs", "replica_lost", "lag_samples",
            "lag_bytes_max", "lag_ms_max", "lag_backlog_ratio_max", "lag_bytes_p50",
            "lag_bytes_p99", "lag_ms_p50", "lag_ms_p99", "lag_backlog_ratio_p99", "recoveries",
            "recovery_ms_p50", "recovery_ms_max", "full_sync_loops")
    zero = {"syncs", "partial", "full", "failed", "link_downs", "replica_lost", "lag_samples",
            "recoveries", "full_sync_loops"}
    out = []
    for (m, r), g in links.items():
        row: Row = {"master": m, "replica": r}
        for col in cols:
            v = g.get(col)
            row[col] = 0 if v is None and col in zero else v
        row["partial_ratio"] = _partial_ratio(row)
        out.append(row)
    return out


def _group(rows: Iterable[Row]) -> dict[tuple[str, str], list[Row]]:
    out: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for x in rows:
        out[(x["master"], x["replica"])].append(x)
    return out


def _need(s: Row) -> float | None:
    """A sync's backlog need for the advice: the bytes, or SENTINEL when no size would help."""
    if s["backlog_fixable"]:
        return None if s["backlog_need"] is None else float(s["backlog_need"])
    return SENTINEL if s["backlog_need"] is not None else None


def build_nodes(syncs: Sequence[Row], recs: Sequence[Row], links: Sequence[Row],
                rates: Sequence[Row]) -> list[Row]:
    """``tables.build_nodes``: one row per (node, role)."""
    nodes: dict[tuple[str, str], _Group] = defaultdict(_Group)
    for role in ("master", "replica"):
        def role_of(s: Row, role: str = role) -> Any:
            return s.get(role)

        counted = _counts(syncs, role_of)
        needs: dict[str, list[float | None]] = defaultdict(list)
        obb: dict[str, int] = defaultdict(int)
        for s in syncs:
            if s.get(role) is not None:
                needs[s[role]].append(_need(s))
                obb[s[role]] += s["backlog_need"] is not None
        for node, g in counted.items():
            p90 = _first_of(nearest_rank(needs[node], (0.9,)))
            nodes[(node, role)].update(g, offset_before_backlog=obb[node],
                                       advice_p90=int(p90) if p90 is not None
                                       and p90 < SENTINEL else None)
        for x in links:
            g = nodes[(x[role], role)]
            g["link_downs"] = g.get("link_downs", 0) + x["link_downs"]
            for col in ("lag_bytes_max", "lag_ms_max", "lag_backlog_ratio_max"):
                g.hi(col, x[col])
    for x in rates:
        if (x["master"], "master") in nodes:
            nodes[(x["master"], "master")].update(
                {k: v for k, v in x.items() if k != "master"})
    for replica, xs in _by(x for x in recs if not x["intentional"]).items():
        ms = [x["recovery_ms"] for x in xs]
        nodes[(replica, "replica")].update(
            recoveries=len(xs), recovery_ms_p50=_first_of(nearest_rank(ms, (0.5,))),
            recovery_ms_max=max((v for v in ms if v is not None), default=None))
    out = []
    zero = {"syncs", "partial", "full", "failed", "link_downs", "offset_before_backlog",
            "recoveries"}
    for (node, role), g in nodes.items():
        row: Row = {"node": node, "role": role}
        for col in NODE_COLUMNS[2:-1]:
            v = g.get(col)
            row[col] = 0 if v is None and col in zero else v
        row["partial_ratio"] = _partial_ratio(row)
        out.append(row)
    return out


NODE_COLUMNS = ("node", "role", "syncs", "partial", "full", "failed", "offset_before_backlog",
                "advice_p90", "link_downs", "lag_bytes_max", "lag_ms_max",
                "lag_backlog_ratio_max", "backlog_size", "write_rate_avg", "write_rate_peak",
                "coverage_s", "coverage_peak_s", "recoveries", "recovery_ms_p50",
                "recovery_ms_max", "partial_ratio")


def _by(rows: Iterable[Row]) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = defaultdict(list)
    for x in rows:
        out[x["replica"]].append(x)
    return out


def build_buckets(syncs: Sequence[Row], sev: Sequence[Row], series: Sequence[Row],
                  bucket_s: float) -> list[Row]:
    """``tables.build_buckets``: per time bucket, syncs by kind, failures, link downs, lag."""
    bk: dict[float, _Group] = defaultdict(_Group)
    for b, g in _counts(syncs, lambda s: s["bucket"]).items():
        bk[b].update(g)
    for e in sev:
        if e["event"] == "link_down":
            g = bk[_bucket(e["ts"], bucket_s)]
            g["link_downs"] = g.get("link_downs", 0) + 1
    for s in series:
        g = bk[s["bucket"]]
        n = s["samples"]
        g["lag_samples"] = g.get("lag_samples", 0) + n
        for col in ("lag_bytes_max", "lag_ms_max"):
            g.hi(col, s[col])
        for col in ("lag_bytes_avg", "lag_ms_avg"):
            if s[col] is not None:
                g["_" + col] = g.get("_" + col, 0.0) + s[col] * n
        g["_lag"] = True
    out = []
    for b, g in bk.items():
        n = g.get("lag_samples", 0)
        row = {"bucket": b, **{k: g.get(k, 0) for k in ("syncs", "partial", "full", "failed",
                                                        "link_downs", "lag_samples")},
               "lag_bytes_max": g.get("lag_bytes_max"), "lag_ms_max": g.get("lag_ms_max"),
               "lag_bytes_avg": g["_lag_bytes_avg"] / n if "_lag_bytes_avg" in g else None,
               "lag_ms_avg": g["_lag_ms_avg"] / n if "_lag_ms_avg" in g else None}
        row["partial_ratio"] = _partial_ratio(row)
        out.append(row)
    return out


# -- the summary ---------------------------------------------------------------------------------

def _dim(rows: Iterable[Row], col: str) -> dict[str, int]:
    """{value (or "unknown"): rows}, most frequent first (ties: by value)."""
    n: dict[str, int] = defaultdict(int)
    for x in rows:
        v = x.get(col)
        n["unknown" if v is None else str(v)] += 1
    return dict(sorted(n.items(), key=lambda kv: (-kv[1], kv[0])))


def _stat(values: Iterable[Any]) -> dict[str, Any]:
    return py_stat(list(values), QUANTILES)


def summarize(syncs: Sequence[Row], recs: Sequence[Row], streaks: Sequence[Row],
              sev: Sequence[Row]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``summary.summarize`` but "lag" and "backlog": those metrics, and the advice's
    aggregates (``advice.backlog_advice``'s ``row``)."""
    full = [s for s in syncs if s["kind"] == "full"]
    part = [s for s in syncs if s["kind"] == "partial"]
    failed = [s for s in syncs if s["status"] == "failed"]
    ok_full = [s for s in full if s["status"] == "ok"]
    queued = [s for s in full if (s["queued_ms"] or 0) > 0]
    paced = [s for s in full if (s["max_bandwidth"] or 0) > 0]
    by_mode: dict[str, Any] = {}
    for mode, xs in sorted(_split(full, "mode").items()):
        ok = [s for s in xs if s["status"] == "ok"]
        by_mode[mode] = {"count": len(xs), "durations_ms": {
            ph: _stat(s[f"{ph}_ms"] for s in ok) for ph in PHASES}}
    buffers: dict[str, Any] = {}
    for kind, xs in sorted(_split([s for s in full if s["buffer_kind"] is not None],
                                  "buffer_kind").items()):
        near = sum(1 for s in xs if s["near_limit"])
        wl = sum(1 for s in xs if s["near_limit"] is not None)
        buffers[kind] = {"syncs": len(xs), "peak_bytes": _stat(s["buffer_peak"] for s in xs),
                         "with_limit": wl, "over_80pct": near,
                         "over_80pct_share": _ratio(near, wl),
                         "spilled_syncs": sum(1 for s in xs if (s["spilled"] or 0) > 0),
                         "spilled_bytes": sum(s["spilled"] or 0 for s in xs)}
    obb = [s for s in syncs if s["backlog_need"] is not None]
    fixable = [s["backlog_need"] for s in obb if s["backlog_fixable"]]
    advice = {"obb": len(obb), "unfixable": sum(1 for s in obb if not s["backlog_fixable"]),
              "need_q": nearest_rank([_need(s) for s in obb], ADVICE_QUANTILES),
              "max_need": max(fixable, default=None),
              **{f"le{k}": sum(1 for v in fixable if v <= 1 << k) for k in CURVE_POWERS}}
    rec = [x for x in recs if not x["intentional"]]
    up = [x for x in rec if x["t_up"] is not None]
    n_part, n_full = len(part), len(full)
    return {
        "psync": {"syncs": len(syncs), "by_result": _dim(syncs, "result"), "partial": n_part,
                  "full": n_full, "partial_ratio": _ratio(n_part, n_part + n_full)},
        "full_syncs": {
            "count": n_full, "by_reason": _dim(full, "reason"),
            "by_cause": _dim(full, "cause"), "by_mode": _dim(full, "mode"),
            "failed": sum(1 for s in full if s["status"] == "failed"),
            "durations_ms": {ph: _stat(s[f"{ph}_ms"] for s in ok_full) for ph in PHASES},
            "by_mode_durations": by_mode,
            "rdb_bytes": _stat(s["rdb_bytes"] for s in full),
            "rdb_bytes_total": sum(s["rdb_bytes"] for s in full if s["rdb_bytes"] is not None),
            "throughput_bytes_per_s": _stat(s["throughput_bps"] for s in full),
            "queued": len(queued), "queued_ms": _stat(s["queued_ms"] for s in queued),
            "paced": len(paced),
            "paced_throughput_bytes_per_s": _stat(s["throughput_bps"] for s in paced),
            "resumed": sum(1 for s in syncs if s["result"] == "resume"),
            "resumed_bytes": sum(s["resumed_from"] or 0 for s in syncs
                                 if s["result"] == "resume")},
        "partial_syncs": {"count": n_part, "bytes": _stat(s["partial_bytes"] for s in part),
                          "backlog_fraction": _stat(s["backlog_fraction"] for s in part)},
        "failures": {
            "failed_syncs": len(failed), "by_reason": _dim(failed, "fail_reason"),
            "attempts_per_recovery": _stat(x["attempts"] for x in up),
            "full_sync_loops": sum(1 for x in streaks if x["loop"]),
            "connect_failures": sum(x["connect_failures"] for x in rec)},
        "buffers": buffers,
        "links": {"link_downs": sum(1 for e in sev if e["event"] == "link_down"),
                  "link_downs_by_reason": _dim((e for e in sev if e["event"] == "link_down"),
                                               "reason"),
                  "replica_lost_by_reason": _dim((e for e in sev if _real_loss(e)), "reason"),
                  "downtime_ms": _stat(x["downtime_ms"] for x in rec)},
        "recovery": {
            "count": len(rec), "not_recovered": len(rec) - len(up),
            "not_caught_up": sum(1 for x in up if x["t_caught_up"] is None),
            "ms": _stat(x["recovery_ms"] for x in rec),
            "partial_ms": _stat(x["recovery_ms"] for x in rec if x["kind"] == "partial"),
            "full_ms": _stat(x["recovery_ms"] for x in rec if x["kind"] == "full")},
    }, advice


def _split(rows: Iterable[Row], col: str) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for x in rows:
        v = x.get(col)
        out["unknown" if v is None else str(v)].append(x)
    return out


def lag_summary(series: Sequence[Row], sample: dict[tuple[Any, Any], tuple[list[Any], list[Any]]],
                backlogs: dict[str, int]) -> dict[str, Any]:
    """summary.json's "lag": counts and maxima from every sample (the series), percentiles
    from the sample."""
    lbs = [v for lb, _ in sample.values() for v in lb]
    lms = [v for _, lm in sample.values() for v in lm]
    ratios = [v / backlogs[m] for (m, _), (lb, _) in sample.items()
              if backlogs.get(m) is not None and backlogs[m] > 0 for v in lb]

    def stat(n: int, qs: list[Any] | None, mx: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"count": n}
        for i, q in enumerate(QUANTILES):
            out[f"p{round(q * 100):d}"] = _num(qs[i]) if n and qs else None
        out["max"] = _num(mx) if n else None
        return out

    def top(col: str, rows: Iterable[Row]) -> Any:
        return max((s[col] for s in rows if s[col] is not None), default=None)

    with_b = [s for s in series if s["backlog_size"] is not None and s["backlog_size"] > 0]
    return {"samples": sum(s["samples"] for s in series),
            "bytes": stat(sum(s["nb"] for s in series), nearest_rank(lbs, QUANTILES),
                          top("lag_bytes_max", series)),
            "ms": stat(sum(s["nm"] for s in series), nearest_rank(lms, QUANTILES),
                       top("lag_ms_max", series)),
            "backlog_ratio": stat(sum(s["nb"] for s in with_b), nearest_rank(ratios, QUANTILES),
                                  top("lag_backlog_ratio_max", series))}
