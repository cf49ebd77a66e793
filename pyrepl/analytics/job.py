"""The sync-analytics Spark job: sync-event logs -> per-sync, per-recovery, per-link, per-node and
per-bucket tables, and the fleet-wide metrics of ``summary.json``.

Theory of operation
-------------------
Every step is a function from DataFrames to a DataFrame, in a module named for what it builds
(``read``, ``syncs``, ``recoveries``, ``lag``, ``tables``, ``summary``, ``advice``; each says what
its figures mean), so the tests run each one on small inputs and compare it with a pure-Python
oracle. :func:`run` only orchestrates: the logs are read and parsed once, into
``read.aggregate_all``'s small groups (cached), which split into the sync events proper and the
lag groups; every table is built from those, cached for the caller to write, and the summary is
collected from the tables.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics.lag import build_lag_series, build_write_rates, lag_sample, master_backlogs
from pyrepl.analytics.logread import LOG_BAD, prefer_sources
from pyrepl.analytics.read import (
    FINE_BUCKET_S,
    SAMPLE_TARGET,
    aggregate_all,
    classify,
    detect_format,
    estimate_lines,
    parse_inputs,
)
from pyrepl.analytics.recoveries import build_recoveries, build_streaks
from pyrepl.analytics.schema import (
    COUNTED_ONLY,
    MATCH_WINDOW_S,
    QUANTILES,
)
from pyrepl.analytics.sql import _F
from pyrepl.analytics.summary import summarize
from pyrepl.analytics.syncs import build_syncs, master_syncs, replica_attempts, with_link
from pyrepl.analytics.tables import build_buckets, build_links, build_nodes
from pyrepl.analytics.timeline import LOOPS_MAX

NICE_BUCKETS = (10, 30, 60, 300, 600, 900, 1800, 3600, 4 * 3600, 6 * 3600, 86400)


@dataclass
class JobConfig:
    since: float | None = None
    until: float | None = None
    bucket_s: float | None = None  # None: chosen from the time span (about 100-300 buckets)
    match_window_s: float = MATCH_WINDOW_S
    fmt: str = "auto"  # json | parquet | auto (by file names)
    lag_sample_every: int | None = None  # None: about SAMPLE_TARGET samples for percentiles
    log_tz: str | None = None  # the time zone of Redis/Valkey log timestamps (default UTC)


@dataclass
class Tables:
    syncs: Any
    recoveries: Any
    lag_series: Any
    links: Any
    nodes: Any
    buckets: Any
    write_rates: Any


@dataclass
class JobResult:
    summary: dict[str, Any]
    tables: Tables
    charts: dict[str, Any] = field(default_factory=dict)


def choose_bucket(first_ts: float | None, last_ts: float | None) -> float:
    """About 100-300 buckets over the time span; always a multiple of FINE_BUCKET_S."""
    if first_ts is None or last_ts is None:
        return 60.0
    span = max(0.0, last_ts - first_ts)
    for b in NICE_BUCKETS:
        if span / b <= 300:
            return float(b)
    return float(NICE_BUCKETS[-1])


# -- the whole job -------------------------------------------------------------------------------

def _noop(msg: str) -> None:
    pass


def run(spark: Any, paths: Sequence[str], cfg: JobConfig | None = None,
        progress: Callable[[str], None] = _noop) -> JobResult:
    """Read the logs, build every table (cached: the caller writes them) and the summary.

    The input is read and parsed once, into ``aggregate_all``'s small groups (cached); the
    rest works from those."""
    from pyspark import StorageLevel

    F = _F()
    c = F.col
    keep = StorageLevel.MEMORY_AND_DISK
    cfg = cfg or JobConfig()
    fmt = cfg.fmt if cfg.fmt != "auto" else detect_format(paths)
    every = cfg.lag_sample_every or max(1, math.ceil(
        estimate_lines(spark, paths, fmt) / SAMPLE_TARGET))
    fine = cfg.bucket_s or FINE_BUCKET_S
    progress(f"reading {len(paths)} path(s) as {fmt}")
    raw, logs = parse_inputs(spark, paths, fmt, cfg.log_tz)
    ev = classify(raw, cfg.since, cfg.until)
    agg = aggregate_all(ev, fine, every).persist(keep)
    counts = agg.groupBy("bad", F.coalesce(c("row.event"), c("counted"),
                                           F.lit("replica_lag")).alias("event")) \
        .agg(F.sum("n").alias("n"), F.min("ts_min").alias("t0"), F.max("ts_max").alias("t1")) \
        .collect()
    events_by_type: dict[str, int] = {}
    malformed: dict[str, int] = {"unparseable": 0, "missing-required": 0, "unknown-event": 0,
                                 **{k: 0 for k in (LOG_BAD if logs else ())}}
    t0 = t1 = None
    for row in counts:
        if row["bad"] is not None:
            malformed[row["bad"]] += int(row["n"])
            continue
        events_by_type[row["event"]] = events_by_type.get(row["event"], 0) + int(row["n"])
        t0 = row["t0"] if t0 is None else min(t0, row["t0"])
        t1 = row["t1"] if t1 is None else max(t1, row["t1"])
    n_events = sum(events_by_type.values())
    bucket_s = cfg.bucket_s or choose_bucket(t0, t1)
    progress(f"{n_events:,} events, {sum(malformed.values()):,} malformed lines; "
             f"time buckets of {bucket_s:g} s")
    # the two small halves get caches of their own (lag groups without the wide ``row``);
    # counted now so the big aggregate can go
    # a node described by several sources (pyrepl, a Redis log, the collector): the richest
    sev = with_link(prefer_sources(agg.filter(c("row").isNotNull()).select("row.*"))) \
        .persist(keep)
    lag_agg = agg.filter(c("bad").isNull() & c("row").isNull() & c("counted").isNull()) \
        .drop("bad", "row", "counted") \
        .persist(keep)
    n_sev = sev.count()
    lag_agg.count()
    agg.unpersist()

    progress("syncs and recoveries")
    m = master_syncs(sev).persist(keep)
    r = replica_attempts(sev).persist(keep)
    syncs = build_syncs(m, r, bucket_s, cfg.match_window_s).persist(keep)
    recs = build_recoveries(sev, r).persist(keep)
    streaks = build_streaks(r).filter(c("failed_full") > 0).persist(keep)
    backlogs = master_backlogs(m).persist(keep)

    progress("lag")
    series = build_lag_series(lag_agg, backlogs, bucket_s).persist(keep)
    sample = lag_sample(lag_agg, backlogs).persist(keep)
    links = build_links(syncs, recs, series, sample, sev, streaks).persist(keep)
    srow = series.agg(F.sum("samples").alias("samples"), F.sum("nb").alias("lag_bytes__n"),
                      F.sum("nm").alias("lag_ms__n"), F.max("lag_bytes_max").alias(
                          "lag_bytes__max"), F.max("lag_ms_max").alias("lag_ms__max"),
                      F.max("lag_backlog_ratio_max").alias("lag_backlog_ratio__max"),
                      F.sum(F.when(c("backlog_size") > 0, c("nb"))).alias(
                          "lag_backlog_ratio__n")).collect()[0].asDict()
    prow = sample.agg(F.percentile_approx("lag_bytes", list(QUANTILES), 10000).alias(
        "lag_bytes__q"), F.percentile_approx("lag_ms", list(QUANTILES), 10000).alias(
        "lag_ms__q"), F.percentile_approx("ratio", list(QUANTILES), 10000).alias(
        "lag_backlog_ratio__q")).collect()[0].asDict()
    lag_row = {**srow, **prow}

    progress("metrics")
    rates = build_write_rates(series, bucket_s).persist(keep)
    nodes = build_nodes(syncs, recs, links, rates).persist(keep)
    buckets = build_buckets(syncs, sev, series, bucket_s).persist(keep)
    summary: dict[str, Any] = {"input": {
        "paths": list(paths), "format": fmt, "events": n_events,
        "events_by_type": dict(sorted(events_by_type.items())),
        "malformed_lines": sum(malformed.values()), "malformed": malformed,
        "first_ts": t0, "last_ts": t1, "since": cfg.since, "until": cfg.until,
        "bucket_s": bucket_s, "lag_sample_every": every,
        "duplicates_dropped": sum(n for e, n in events_by_type.items()
                                  if e != "replica_lag" and e not in COUNTED_ONLY) - n_sev,
        "logs": logs,
    }}
    link_rows = [x.asDict() for x in links.collect()]  # one row per link: small
    masters = {x["master"] for x in link_rows}
    replicas = {x["replica"] for x in link_rows}
    summary["fleet"] = {"nodes": len(masters | replicas), "masters": len(masters),
                        "replicas": len(replicas), "links": len(link_rows)}
    summary.update(summarize(syncs, recs, streaks, sev, rates, lag_row, backlogs))
    tables = Tables(syncs, recs, series, links, nodes, buckets, rates)
    loops = [x.asDict() for x in streaks.filter(c("loop")).orderBy("t_first_failed", "replica")
             .limit(LOOPS_MAX).collect()]
    # py4j's proxies sit in reference cycles (each caches its method objects), so the JVM keeps
    # this run's intermediate query plans until Python's next full collection: ~250 MB of
    # driver heap per run, which a long-lived session (a notebook, the tests) thrashes on
    gc.collect()
    return JobResult(summary, tables, {"links": link_rows, "loops": loops})
