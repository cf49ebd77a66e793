"""Writing the results of ``pyrepl metrics``: Parquet tables, ``summary.json``, PNG charts, one
self-contained ``report.html`` and a short text summary.

Theory of operation: the Spark job (``job.run``) leaves every table cached; the tables are
written as Parquet (any path Spark can write, so on a cluster they can go to shared storage),
while the small things — the summary, the few hundred rows the charts need — are collected to
the driver, drawn with matplotlib's Agg backend (no display) and embedded in ``report.html`` as
data URIs, so the report is a single file that opens anywhere. ``summary.json`` has stable keys
(``SUMMARY_KEYS`` documents them; ``schema_version`` changes if a key's meaning does).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics.chartpool import Chart, ChartPool, draw_here
from pyrepl.analytics.present import (
    empty_chart,
    html_table,
    human_bytes,
    human_ms,
    pct,
    pyplot,
    save_chart,
    when,
)
from pyrepl.analytics.rowtable import RowTable
from pyrepl.analytics.schema import PHASES
from pyrepl.analytics.timeline import (
    LinkStory,
    chart_timelines,
    collect_stories,
    render_stories,
)

SCHEMA_VERSION = 1
TABLES = ("syncs", "recoveries", "lag", "links", "nodes", "buckets", "write_rates", "shards",
          "failovers")
CHARTS = ("partial_ratio_per_node", "phase_breakdown", "lag_over_time", "recovery_cdf",
          "backlog_advice", "link_timeline")

# summary.json: top-level key -> what it holds (the README documents the same).
SUMMARY_KEYS: dict[str, str] = {
    "schema_version": "1; changes when a key's meaning changes",
    "input": "paths, format, events (good), events_by_type, malformed_lines and malformed by "
             "kind (unparseable, missing-required, unknown-event; with Redis/Valkey logs also "
             "log-unparseable, log-unknown), first_ts/last_ts, since/until, bucket_s, "
             "lag_sample_every (lag percentiles use every Nth sample; counts, means and maxima "
             "use all), duplicates_dropped (events a richer source of the same node also "
             "gave), logs (Redis/Valkey logs: files by kind, sets, lines, replication_lines, "
             "other_lines, unparseable, unknown, unnamed_events, unknown_examples; null "
             "without logs)",
    "fleet": "nodes, masters, replicas, links seen",
    "psync": "syncs (PSYNC/SYNC attempts), by_result, partial, full, partial_ratio",
    "full_syncs": "count, by_reason (PSYNC reason code), by_cause (reason, or "
                  "output-buffer-limit when the previous sync was dropped for it), by_mode, "
                  "failed, durations_ms per phase (snapshot, transfer, load, drain, total), "
                  "by_mode_durations, rdb_bytes, rdb_bytes_total, throughput_bytes_per_s, "
                  "queued and queued_ms (waited for a turn: repl-full-sync-max-concurrent), "
                  "paced and paced_throughput_bytes_per_s (repl-sync-max-bandwidth), resumed "
                  "(cut full syncs that went on: result resume) and resumed_bytes (the "
                  "payload bytes they did not send again)",
    "partial_syncs": "count, bytes (backlog sent), backlog_fraction (bytes / backlog size)",
    "failures": "failed_syncs, by_reason, attempts_per_recovery, full_sync_loops "
                "(stretches of a replica without a working link, from a link loss or from "
                "its first sync, with 2+ failed full syncs), connect_failures",
    "buffers": "per buffer kind (master-output for classic syncs, replica for rdb-channel "
               "and dual-channel): syncs, peak_bytes, with_limit, over_80pct, "
               "over_80pct_share, spilled_syncs and spilled_bytes (to disk: "
               "repl-full-sync-spill-threshold)",
    "links": "link_downs, link_downs_by_reason (replica side), replica_lost_by_reason "
             "(master side), downtime_ms (link down -> link up)",
    "recovery": "count (link downs but promoted/replicaof), not_recovered, not_caught_up, "
                "ms / partial_ms / full_ms (link down -> caught up)",
    "lag": "samples, bytes, ms, backlog_ratio (lag bytes / backlog size)",
    "backlog": "offset_before_backlog_syncs, unfixable (the bytes predate the backlog), "
               "advice_bytes p50/p90/p95/p99 (smallest backlog that turns that share of them "
               "into partial syncs), current_backlog_bytes, curve (partial_ratio per backlog "
               "size), coverage_s and coverage_at_peak_s (backlog / write rate), "
               "write_rate_bytes_per_s, peak_write_rate_bytes_per_s",
    "cluster": "only with a Redis Cluster's cluster_* events: shards, failovers, "
               "failovers_by_kind (auto, manual, force, takeover), election_ms and "
               "fail_to_failover_ms (stats), node_fail_incidents, slots_moved (between "
               "masters, failovers aside), state_fail_events",
    "outputs": "the files written: summary, report, charts, tables",
}
# Every "stat" value is {"count", "p50", "p90", "p99", "max"} (null when count is 0).
# Keys only some runs have (``cluster``: only with a Redis Cluster's cluster_* events).
OPTIONAL_SUMMARY_KEYS = ("cluster",)


# -- tables -------------------------------------------------------------------------------------

def write_tables(tables: Any, dest: str) -> dict[str, str]:
    """Each table as Parquet under ``dest`` (any Spark path); small ones as one file, the
    driver finish's by pyarrow (``RowTable.write``)."""
    from concurrent.futures import ThreadPoolExecutor

    frames = {"syncs": tables.syncs, "recoveries": tables.recoveries, "lag": tables.lag_series,
              "links": tables.links, "nodes": tables.nodes, "buckets": tables.buckets,
              "write_rates": tables.write_rates}
    for name in ("shards", "failovers"):     # (a Redis Cluster's; rows only with its events)
        t = getattr(tables, name, None)
        if t is not None:
            frames[name] = t
    out = {name: dest.rstrip("/") + f"/{name}.parquet" for name in frames}

    spread = getattr(tables, "spread", ("syncs", "lag"))

    def write(name: str) -> None:
        df = frames[name]
        if isinstance(df, RowTable):
            df.write(out[name])
            return
        df = df.repartition(4) if name in spread else df.coalesce(1)
        df.write.mode("overwrite").parquet(out[name])

    # small jobs: their cost is mostly latency, so several run at once
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, frames))
    return out


# -- charts -------------------------------------------------------------------------------------

def chart_partial_ratio(nodes: list[dict[str, Any]], path: str) -> None:
    plt = pyplot()
    ms = [n for n in nodes if n["role"] == "master" and n.get("partial_ratio") is not None]
    ms.sort(key=lambda n: (n["partial_ratio"], -(n["full"] or 0), n["node"]))  # ties by name
    ms = ms[:40]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.28 * len(ms) + 1.2)))
    if not ms:
        empty_chart(ax, "no PSYNC decisions logged by masters")
    else:
        names = [n["node"] for n in ms]
        ax.barh(names, [n["partial_ratio"] for n in ms], color="#3b7dd8")
        for i, n in enumerate(ms):
            ax.text(min(n["partial_ratio"], 0.98), i, f" {n['partial']}/{n['partial'] + n['full']}",
                    va="center", ha="right" if n["partial_ratio"] > 0.85 else "left", fontsize=7)
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.set_xlabel("partial-sync ratio (partial / all syncs)")
    ax.set_title("Partial-sync ratio per master (lowest first)")
    save_chart(fig, path)


def chart_phases(full_syncs: dict[str, Any], path: str) -> None:
    """The summary's ``full_syncs`` phases by mode."""
    plt = pyplot()
    modes = full_syncs["by_mode_durations"]
    rows = [("all", full_syncs["durations_ms"])]
    rows += [(m, d["durations_ms"]) for m, d in modes.items()]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    phases = [p for p in PHASES if p != "total"]
    colors = {"snapshot": "#8da0cb", "transfer": "#66c2a5", "load": "#fc8d62", "drain": "#e78ac3"}
    if not any(d["total"]["count"] for _, d in rows):
        empty_chart(ax, "no completed full syncs with replica-side phases")
    else:
        labels = []
        for i, (name, d) in enumerate(rows):
            for j, q in enumerate(("p50", "p90")):
                y = i * 2.6 + j
                left = 0.0
                for ph in phases:
                    v = (d[ph].get(q) or 0) / 1000
                    ax.barh(y, v, left=left, color=colors[ph],
                            label=ph if i == 0 and j == 0 else None)
                    left += v
                labels.append((y, f"{name} {q}"))
        ax.set_yticks([y for y, _ in labels], [t for _, t in labels], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("seconds (sum of the phases' percentiles)")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Full-sync phases by mode")
    save_chart(fig, path)


def chart_lag(buckets: list[dict[str, Any]], path: str) -> None:
    plt = pyplot()
    bs = [b for b in buckets if b.get("lag_samples")]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    if not bs:
        empty_chart(ax, "no replica_lag samples")
    else:
        xs = [_dt.datetime.fromtimestamp(b["bucket"], _dt.UTC) for b in bs]
        ax.plot(xs, [max(1, b["lag_bytes_max"] or 0) for b in bs], color="#d62728", lw=1,
                label="max lag bytes")
        ax.plot(xs, [max(1, b["lag_bytes_avg"] or 0) for b in bs], color="#1f77b4", lw=1,
                label="mean lag bytes")
        ax.set_yscale("log")
        ax.set_ylabel("bytes")
        ax2 = ax.twinx()
        ax2.plot(xs, [(b["lag_ms_max"] or 0) / 1000 for b in bs], color="#2ca02c", lw=0.8,
                 ls="--", label="max lag seconds")
        ax2.set_ylabel("seconds since last ack")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
        fig.autofmt_xdate()
    ax.set_title("Replication lag over time (all links)")
    save_chart(fig, path)


def chart_recovery(recs: dict[str, list[float]], path: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    drawn = False
    for kind, color in (("partial", "#1f77b4"), ("full", "#d62728")):
        # log axis: times below the logs' 1 ms resolution are drawn at 1 ms
        vs = sorted(max(v, 1.0) / 1000 for v in recs.get(kind, []) if v is not None)
        if vs:
            n = len(vs)
            # the empirical CDF: 0 before the first value, each value a step of 1/n (a lone
            # recovery is a vertical line, not an invisible point)
            ax.step([vs[0], *vs], [0.0, *((i + 1) / n for i in range(n))], where="post",
                    color=color, marker="." if n <= 50 else None, label=f"{kind} ({n})")
            drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.set_xlabel("recovery time: link down -> caught up (s)")
        ax.set_ylabel("share of recoveries")
        ax.set_ylim(0, 1.01)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    else:
        empty_chart(ax, "no completed recoveries")
    ax.set_title("Recovery time CDF")
    save_chart(fig, path)


def chart_advice(b: dict[str, Any], path: str) -> None:
    """The summary's ``backlog`` advice curve."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    curve = [p for p in b["curve"] if p["partial_ratio"] is not None]
    if not curve:
        empty_chart(ax, "no PSYNC decisions")
    else:
        xs = [p["backlog_bytes"] for p in curve]
        ax.step(xs, [p["partial_ratio"] for p in curve], where="post", color="#3b7dd8")
        ax.plot(xs, [p["partial_ratio"] for p in curve], "o", ms=3, color="#3b7dd8")
        ax.set_xscale("log", base=2)
        ticks = xs[:: max(1, len(xs) // 8)]
        ax.set_xticks(ticks, [human_bytes(t) for t in ticks], fontsize=7)
        cur = b["current_backlog_bytes"]["min"]
        if cur:
            ax.axvline(cur, color="#888", ls=":", label=f"smallest current {human_bytes(cur)}")
        for q, color in (("p90", "#2ca02c"), ("p99", "#d62728")):
            v = b["advice_bytes"].get(q)
            if v:
                ax.axvline(v, color=color, ls="--", lw=0.8,
                           label=f"{q} advice {human_bytes(v)}")
        ax.set_ylim(0, 1.01)
        ax.set_xlabel("repl-backlog-size")
        ax.set_ylabel("partial-sync ratio")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    ax.set_title("Partial-sync ratio if every master had this backlog")
    save_chart(fig, path)


# -- text ---------------------------------------------------------------------------------------

def text_summary(s: dict[str, Any], report_path: str | None = None) -> str:
    inp, ps, fs = s["input"], s["psync"], s["full_syncs"]
    lines = [
        f"pyrepl metrics: {inp['events']:,} events ({inp['malformed_lines']:,} malformed lines)"
        f" from {s['fleet']['nodes']} nodes, {s['fleet']['links']} links, "
        f"{when(inp['first_ts'])} .. {when(inp['last_ts'])} UTC",
        f"  syncs: {ps['syncs']:,} - partial {ps['partial']:,}, full {ps['full']:,}, "
        f"partial ratio {pct(ps['partial_ratio'])}",
    ]
    if fs["count"]:
        reasons = ", ".join(f"{k} {v:,}" for k, v in list(fs["by_cause"].items())[:6])
        lines.append(f"  full syncs by cause: {reasons}")
        d = fs["durations_ms"]
        lines.append(
            f"  full sync p50/p99: {human_ms(d['total']['p50'])} / {human_ms(d['total']['p99'])}"
            f" (snapshot {human_ms(d['snapshot']['p50'])}, transfer "
            f"{human_ms(d['transfer']['p50'])}, load {human_ms(d['load']['p50'])}, drain "
            f"{human_ms(d['drain']['p50'])} at p50)")
    f = s["failures"]
    lines.append(f"  failed syncs: {f['failed_syncs']:,}; full-sync loops: "
                 f"{f['full_sync_loops']:,}; attempts per recovery p99: "
                 f"{f['attempts_per_recovery']['p99'] or '-'}")
    r = s["recovery"]
    lines.append(f"  recoveries: {r['count']:,}, p50/p99 partial {human_ms(r['partial_ms']['p50'])}"
                 f" / {human_ms(r['partial_ms']['p99'])}, full {human_ms(r['full_ms']['p50'])}"
                 f" / {human_ms(r['full_ms']['p99'])}")
    lag = s["lag"]
    if lag["samples"]:
        lines.append(f"  lag p99: {human_bytes(lag['bytes']['p99'])}, "
                     f"{human_ms(lag['ms']['p99'])}; lag/backlog p99 "
                     f"{pct(lag['backlog_ratio']['p99'])}")
    b = s["backlog"]
    if b["offset_before_backlog_syncs"]:
        a = b["advice_bytes"]
        lines.append(f"  backlog advice: {b['offset_before_backlog_syncs']:,} full syncs for "
                     f"offset-before-backlog; a backlog of {human_bytes(a['p90'])} would have "
                     f"avoided 90% ({human_bytes(a['p99'])}: 99%)")
    c = s.get("cluster")
    if c is not None:
        kinds = ", ".join(f"{k} {v}" for k, v in c["failovers_by_kind"].items()) or "none"
        lines.append(f"  cluster: {c['shards']} shards, {c['failovers']} failovers ({kinds}), "
                     f"FAIL to failover p50 {human_ms(c['fail_to_failover_ms']['p50'])}")
    if report_path:
        lines.append(f"  report: {report_path}")
    return "\n".join(lines)


# -- html ---------------------------------------------------------------------------------------

CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}img{max-width:100%;border:1px solid #eee}
.k{color:#555}.note{color:#666;font-size:.85em}"""


def _stat_row(name: str, st: dict[str, Any], fmt: Any) -> list[Any]:
    return [name, st["count"], fmt(st["p50"]), fmt(st["p90"]), fmt(st["p99"]), fmt(st["max"])]


def render_cluster(c: dict[str, Any], shards: Sequence[dict[str, Any]],
                   failovers: Sequence[dict[str, Any]]) -> str:
    """The report's Redis Cluster section: its shards, and who failed over when and why."""
    kinds = ", ".join(f"{k} {v}" for k, v in c["failovers_by_kind"].items()) or "none"
    parts = ["<h2>Cluster shards and failovers</h2>",
             f"<p>{c['shards']} shards; {c['failovers']} failovers ({kinds}); "
             f"{c['node_fail_incidents']} nodes marked failing; {c['slots_moved']:,} slots "
             f"moved between masters.</p>",
             html_table(["shard", "master", "replicas", "slots", "failovers", "last failover",
                         "nodes failed"],
                        [[x["shard"], x["master"], (x["replicas"] or "-").replace(",", ", "),
                          x["slots"] or "-", x["failovers"],
                          f"{when(x['last_failover_ts'])} ({x['last_failover_kind']})"
                          if x["last_failover_ts"] is not None else "-",
                          x["node_fail_incidents"]] for x in shards])]
    if failovers:
        rows = sorted(failovers, key=lambda x: x["ts"])[-50:]
        parts.append(html_table(
            ["when (UTC)", "shard", "new master", "old master", "kind", "epoch", "votes seen",
             "election", "FAIL to failover"],
            [[when(x["ts"]), x["shard"] or "-", x["node"], x["old_master"] or "-", x["kind"],
              x["config_epoch"] if x["config_epoch"] is not None else "-", x["votes"],
              human_ms(x["election_ms"]), human_ms(x["fail_to_failover_ms"])] for x in rows]))
        parts.append("<p class='note'>kind: auto (the master failed; an election), manual "
                     "(CLUSTER FAILOVER), force (FORCE: no handshake with the master), takeover "
                     "(TAKEOVER: no election). Votes seen: the masters' grants for the epoch in "
                     "the logs given.</p>")
    return "\n".join(parts)


def render_html(s: dict[str, Any], charts: dict[str, str], links: list[dict[str, Any]],
                stories: Sequence[LinkStory] = (), loops: Sequence[dict[str, Any]] = (),
                shards: Sequence[dict[str, Any]] = (),
                failovers: Sequence[dict[str, Any]] = ()) -> str:
    inp, ps, fs = s["input"], s["psync"], s["full_syncs"]
    imgs = {}
    for name, path in charts.items():
        with open(path, "rb") as f:
            imgs[name] = "data:image/png;base64," + base64.b64encode(f.read()).decode()
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>pyrepl sync report"
             f"</title><style>{CSS}</style></head><body>",
             "<h1>pyrepl sync report</h1>",
             f"<p>{inp['events']:,} events from {s['fleet']['nodes']} nodes "
             f"({s['fleet']['masters']} masters, {s['fleet']['replicas']} replicas, "
             f"{s['fleet']['links']} links), {html.escape(when(inp['first_ts']))} to "
             f"{html.escape(when(inp['last_ts']))} UTC; {inp['malformed_lines']:,} malformed "
             f"lines skipped.</p>"]
    parts.append("<h2>PSYNC outcomes</h2>")
    parts.append(html_table(["result", "syncs"], [[k, v] for k, v in ps["by_result"].items()]))
    parts.append(f"<p>Partial-sync ratio: <b>{pct(ps['partial_ratio'])}</b> "
                 f"({ps['partial']:,} partial, {ps['full']:,} full).</p>")
    parts.append(f"<img src='{imgs['partial_ratio_per_node']}' alt='partial ratio per node'>")
    parts.append("<h2>Full syncs</h2>")
    causes = {**{k: [v, 0] for k, v in fs["by_reason"].items()}}
    for k, v in fs["by_cause"].items():
        causes.setdefault(k, [0, 0])[1] = v
    parts.append(html_table(["reason", "by PSYNC reason", "by cause"],
                        [[k, a, b] for k, (a, b) in causes.items()]))
    parts.append(f"<p>{fs['resumed']:,} cut full syncs resumed where they stopped "
                 f"(repl-full-sync-resume-window), {human_bytes(fs['resumed_bytes'])} of "
                 f"payload not sent again; {fs['queued']:,} waited for a turn "
                 f"(repl-full-sync-max-concurrent); {fs['paced']:,} transfers paced "
                 f"(repl-sync-max-bandwidth).</p>")
    parts.append(html_table(["phase", "count", "p50", "p90", "p99", "max"],
                        [_stat_row(p, fs["durations_ms"][p], human_ms) for p in PHASES]))
    parts.append(html_table(["per sync", "count", "p50", "p90", "p99", "max"], [
        _stat_row("RDB bytes", fs["rdb_bytes"], human_bytes),
        _stat_row("throughput /s", fs["throughput_bytes_per_s"], human_bytes),
        _stat_row("waited for a turn", fs["queued_ms"], human_ms),
        _stat_row("paced throughput /s", fs["paced_throughput_bytes_per_s"], human_bytes),
        _stat_row("partial-sync bytes", s["partial_syncs"]["bytes"], human_bytes),
        _stat_row("partial bytes / backlog", s["partial_syncs"]["backlog_fraction"], pct)]))
    parts.append(f"<img src='{imgs['phase_breakdown']}' alt='phase breakdown'>")
    bufrows = [[k, v["syncs"], human_bytes(v["peak_bytes"]["p99"]),
                human_bytes(v["peak_bytes"]["max"]), v["over_80pct"], pct(v["over_80pct_share"]),
                v["spilled_syncs"], human_bytes(v["spilled_bytes"])]
               for k, v in s["buffers"].items()]
    parts.append("<h3>Buffers during full syncs</h3>" + html_table(
        ["buffer", "syncs", "peak p99", "peak max", "over 80% of limit", "share",
         "spilled syncs", "spilled to disk"], bufrows))
    f = s["failures"]
    parts.append("<h2>Failures and recovery</h2>")
    parts.append(f"<p>{f['failed_syncs']:,} failed syncs; {f['full_sync_loops']:,} full-sync "
                 f"loops; {f['connect_failures']:,} connection failures.</p>")
    parts.append(html_table(["failure reason", "syncs"], [[k, v] for k, v in f["by_reason"].items()]))
    r = s["recovery"]
    parts.append(html_table(["", "count", "p50", "p90", "p99", "max"], [
        _stat_row("downtime (down -> up)", s["links"]["downtime_ms"], human_ms),
        _stat_row("recovery (down -> caught up)", r["ms"], human_ms),
        _stat_row("  partial", r["partial_ms"], human_ms),
        _stat_row("  full", r["full_ms"], human_ms),
        _stat_row("attempts per recovery", f["attempts_per_recovery"], str)]))
    parts.append(html_table(["link down reason (replica)", "count"],
                        [[k, v] for k, v in s["links"]["link_downs_by_reason"].items()]))
    parts.append(f"<img src='{imgs['recovery_cdf']}' alt='recovery CDF'>")
    lag = s["lag"]
    parts.append("<h2>Lag</h2>")
    parts.append(html_table(["", "count", "p50", "p90", "p99", "max"], [
        _stat_row("lag bytes", lag["bytes"], human_bytes),
        _stat_row("lag (since last ack)", lag["ms"], human_ms),
        _stat_row("lag / backlog", lag["backlog_ratio"], pct)]))
    parts.append(f"<img src='{imgs['lag_over_time']}' alt='lag over time'>")
    b = s["backlog"]
    parts.append("<h2>Backlog advice</h2>")
    a = b["advice_bytes"]
    parts.append(f"<p>{b['offset_before_backlog_syncs']:,} full syncs because the offset had "
                 f"left the backlog ({b['unfixable']:,} of them predate the backlog: no size "
                 f"helps). Smallest backlog that would have made them partial: "
                 f"50% {human_bytes(a['p50'])}, 90% {human_bytes(a['p90'])}, "
                 f"95% {human_bytes(a['p95'])}, 99% {human_bytes(a['p99'])}. Current: "
                 f"{human_bytes(b['current_backlog_bytes']['min'])} .. "
                 f"{human_bytes(b['current_backlog_bytes']['max'])}.</p>")
    parts.append(html_table(["", "count", "p50", "p90", "p99", "max"], [
        _stat_row("backlog coverage (s, mean write rate)", b["coverage_s"],
                  lambda v: "-" if v is None else f"{v:.1f}"),
        _stat_row("coverage at peak write rate (s)", b["coverage_at_peak_s"],
                  lambda v: "-" if v is None else f"{v:.1f}"),
        _stat_row("write rate /s", b["write_rate_bytes_per_s"], human_bytes)]))
    parts.append(f"<img src='{imgs['backlog_advice']}' alt='backlog advice'>")
    worst = sorted(links, key=lambda x: (-(x.get("full") or 0), x["master"], x["replica"]))[:20]
    parts.append("<h2>Links with the most full syncs</h2>")
    parts.append(html_table(["master", "replica", "syncs", "full", "partial ratio", "failed",
                         "link downs", "lag p99"],
                        [[x["master"], x["replica"], x["syncs"], x["full"],
                          pct(x.get("partial_ratio")), x["failed"], x["link_downs"],
                          human_bytes(x.get("lag_bytes_p99"))] for x in worst]))
    parts.append(render_stories(stories, loops, imgs.get("link_timeline")))
    if "cluster" in s:
        parts.append(render_cluster(s["cluster"], shards, failovers))
    parts.append("<h2>summary.json keys</h2>")
    parts.append(html_table(["key", "holds"], [[k, v] for k, v in SUMMARY_KEYS.items()]))
    parts.append("<p class='note'>Generated by <code>pyrepl metrics</code>.</p></body></html>")
    return "\n".join(parts)


# -- all of it ----------------------------------------------------------------------------------

@dataclass
class DrawnCharts:
    """The charts a follower's last trigger published: per chart, a digest of what it was
    drawn from and its file. A chart drawn from the same is copied from there, not drawn
    again (a quiet fleet's triggers change the lag chart alone)."""
    charts: dict[str, tuple[str, str]] = field(default_factory=dict)  # name: (digest, file)
    pending: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name: (digest, copied)
    copied: list[str] = field(default_factory=list)    # those the last publish copied

    @staticmethod
    def digest(data: Any) -> str:
        return hashlib.blake2b(repr(data).encode(), digest_size=16).hexdigest()

    def reuse(self, name: str, digest: str, path: str) -> bool:
        """Copy chart ``name`` to ``path`` if it was drawn from the same."""
        last = self.charts.get(name)
        copied = False
        if last is not None and last[0] == digest:
            try:
                shutil.copyfile(last[1], path)
                copied = True
            except OSError:
                pass
        self.pending[name] = (digest, copied)
        return copied

    def published(self, files: dict[str, str]) -> None:
        """The charts are now at ``files`` (name: path)."""
        self.charts = {n: (self.pending[n][0], f) for n, f in files.items()
                       if n in self.pending}
        self.copied = [n for n, (_, c) in self.pending.items() if c]
        self.pending = {}


def write_report(result: Any, out_dir: str, tables_dest: str | None = None,
                 drawn: DrawnCharts | None = None,
                 pool: ChartPool | None = None) -> dict[str, Any]:
    """Write tables, charts, report.html and summary.json; returns the summary written. The
    tables are written by Spark while the charts are drawn (by ``pool``'s processes, else
    here). With ``drawn``, a chart drawn from the same as there is copied from there."""
    from concurrent.futures import ThreadPoolExecutor

    os.makedirs(out_dir, exist_ok=True)
    t = result.tables
    data = result.charts
    with ThreadPoolExecutor(1) as writer:
        writing = writer.submit(write_tables, t, tables_dest or os.path.join(out_dir, "tables"))
        nodes = data.get("nodes")
        if nodes is None:
            nodes = [r.asDict() for r in t.nodes.collect()]
        buckets = data.get("buckets")
        if buckets is None:
            buckets = [r.asDict() for r in t.buckets.orderBy("bucket").collect()]
        links = data.get("links")
        if links is None:
            links = [r.asDict() for r in t.links.collect()]
        pairs = data.get("recovery")
        if pairs is None:
            rec_df = t.recoveries.filter("recovery_ms is not null and not intentional")
            pairs = [(x["kind"], x["recovery_ms"]) for x in
                     rec_df.select("kind", "recovery_ms").limit(500_000).collect()]
        recs: dict[str, list[float]] = {"partial": [], "full": []}
        for kind, ms in pairs[:500_000]:
            recs.setdefault(kind, []).append(ms)
        loops = data.get("loops") or []
        stories = data.get("stories")
        if stories is None:
            stories = collect_stories(t, links, loops)
        s = result.summary
        charts = {}
        todo: list[Chart] = []
        # (the costliest first: a pool's workers take them in this order)
        for name, fn, data in (
                ("partial_ratio_per_node", chart_partial_ratio, nodes),
                ("link_timeline", chart_timelines, stories),
                ("lag_over_time", chart_lag, buckets),
                ("recovery_cdf", chart_recovery, recs),
                ("phase_breakdown", chart_phases, s["full_syncs"]),
                ("backlog_advice", chart_advice, s["backlog"])):
            path = os.path.join(out_dir, f"{name}.png")
            if drawn is None or not drawn.reuse(name, drawn.digest(data), path):
                todo.append((fn, data, path))
            charts[name] = path
        if pool is None:
            draw_here(todo)
        else:
            pool.draw(todo)
        report = os.path.join(out_dir, "report.html")
        with open(report, "w", encoding="utf-8") as f:
            f.write(render_html(s, charts, links, stories, loops, _rows(t.shards),
                                _rows(t.failovers)))
        tables = writing.result()
    summary = {"schema_version": SCHEMA_VERSION, **s,
               "outputs": {"summary": os.path.join(out_dir, "summary.json"), "report": report,
                           "charts": charts, "tables": tables}}
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=False, default=_json_default)
        f.write("\n")
    return summary


def _rows(table: Any) -> list[dict[str, Any]]:
    """A small output table's rows (the cluster's: RowTables, or absent)."""
    if table is None:
        return []
    if isinstance(table, RowTable):
        return table.rows
    return [r.asDict() for r in table.collect()]


def _json_default(v: Any) -> Any:
    if isinstance(v, _dt.datetime | _dt.date):
        return v.isoformat()
    raise TypeError(f"not JSON serialisable: {type(v).__name__}")


def text_report(summary: dict[str, Any]) -> str:
    return text_summary(summary, summary.get("outputs", {}).get("report"))


