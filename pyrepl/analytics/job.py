"""The sync-analytics Spark job: sync-event logs -> per-sync, per-recovery, per-link, per-node and
per-bucket tables, and the fleet-wide metrics of ``summary.json``.

Theory of operation
-------------------
Every step is a function from DataFrames to a DataFrame, in a module named for what it builds
(``read``, ``syncs``, ``recoveries``, ``lag``, ``tables``, ``summary``, ``advice``; each says what
its figures mean), so the tests run each one on small inputs and compare it with a pure-Python
oracle. :func:`run` only orchestrates: the logs are read and parsed once, into
``read.aggregate_all``'s small groups (cached), which split into the sync events proper and the
lag groups. Those grow with the syncs, links and time buckets, not with the lag samples: when
they are few (``JobConfig.driver_max_rows``) one query collects them and ``driver`` finishes in
plain Python (milliseconds, where ~25 small Spark jobs took 20 s); otherwise every table is
built from them by the Spark steps, cached for the caller to write, and the summary is
collected from the tables. Either way the caller gets the same tables, summary and report data.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics import driver
from pyrepl.analytics.advice import backlog_advice
from pyrepl.analytics.lag import (
    build_lag_series,
    build_write_rates,
    lag_sample,
    master_backlogs,
    series_groups,
)
from pyrepl.analytics.logread import LOG_BAD, name_unknown, prefer_sources, source_rank
from pyrepl.analytics.read import (
    FINE_BUCKET_S,
    SAMPLE_TARGET,
    aggregate_all,
    classify,
    detect_format,
    estimate_lines,
    footer_span,
    is_lag_group,
    parse_inputs,
)
from pyrepl.analytics.recoveries import build_recoveries, build_streaks
from pyrepl.analytics.rowtable import RowTable
from pyrepl.analytics.schema import (
    COUNTED_ONLY,
    MATCH_WINDOW_S,
    QUANTILES,
    table_columns,
)
from pyrepl.analytics.shards import CLUSTER_PREFIX, build_cluster, is_cluster_event, link_spans
from pyrepl.analytics.sql import _F
from pyrepl.analytics.summary import summarize
from pyrepl.analytics.syncs import build_syncs, master_syncs, replica_attempts, with_link
from pyrepl.analytics.tables import build_buckets, build_links, build_nodes
from pyrepl.analytics.timeline import LOOPS_MAX, stories_from_rows

NICE_BUCKETS = (10, 30, 60, 300, 600, 900, 1800, 3600, 4 * 3600, 6 * 3600, 86400)
# After the input pass, aggregates of at most this many rows (sync events plus lag series
# rows) are finished on the driver (``driver``); bigger ones by the Spark steps.
DRIVER_MAX_ROWS = 200_000


# The output tables' keys: the driver's finish writes their rows in this order
TABLE_KEYS = {"syncs": ("master", "replica", "m_sync_id", "r_sync_id"),
              "recoveries": ("replica", "rec"),
              "lag_series": ("master", "replica", "run_id", "bucket"),
              "links": ("master", "replica"), "nodes": ("node", "role"), "buckets": ("bucket",),
              "write_rates": ("master",), "shards": ("shard",),
              "failovers": ("ts", "node")}

@dataclass
class JobConfig:
    since: float | None = None
    until: float | None = None
    bucket_s: float | None = None  # None: chosen from the time span (about 100-300 buckets)
    match_window_s: float = MATCH_WINDOW_S
    fmt: str = "auto"  # json | parquet | auto (by file names)
    lag_sample_every: int | None = None  # None: about SAMPLE_TARGET samples for percentiles
    log_tz: str | None = None  # the time zone of Redis/Valkey log timestamps (default UTC)
    driver_max_rows: int = DRIVER_MAX_ROWS  # 0: always finish with the Spark steps
    # after the input pass of a finish on the driver, no more C2 compiles in this JVM
    # (``session.c1_from_now``): for the command's own JVM, not a shared session's
    c1_after_pass: bool = False


@dataclass
class Tables:
    """The output tables: DataFrames (the Spark finish) or ``RowTable``s (the driver's;
    ``rowtable.as_frame`` makes either a DataFrame)."""
    syncs: Any
    recoveries: Any
    lag_series: Any
    links: Any
    nodes: Any
    buckets: Any
    write_rates: Any
    spread: tuple[str, ...] = ("syncs", "lag")  # written as several files (the big ones)
    # a Redis Cluster's (``shards``; RowTables, empty without cluster events)
    shards: Any = None
    failovers: Any = None


@dataclass
class JobResult:
    summary: dict[str, Any]
    tables: Tables
    charts: dict[str, Any] = field(default_factory=dict)


def footer_bucket(paths: Sequence[str], cfg: JobConfig) -> float | None:
    """The bucket the run will choose, from the span of ``ts`` in local Parquet files'
    footers (``read.footer_span``) within [since, until), or None. The good events span no
    more than that, so the run's own choice is this bucket or a smaller one; the pass sums
    the lag samples per this bucket directly (30x fewer groups than per 10 s for a day's
    logs), and ``run`` checks the choice after the pass."""
    span = footer_span(paths)
    if span is None:
        return None
    lo, hi = span
    if cfg.since is not None:
        lo = max(lo, cfg.since)
    if cfg.until is not None:
        hi = min(hi, cfg.until)
    return choose_bucket(lo, hi) if lo <= hi else None


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
    rest works from those, on the driver when they are small."""
    from pyspark import StorageLevel

    cfg = cfg or JobConfig()
    fmt = cfg.fmt if cfg.fmt != "auto" else detect_format(paths)
    every = cfg.lag_sample_every or max(1, math.ceil(
        estimate_lines(spark, paths, fmt) / SAMPLE_TARGET))
    # the lag samples' groups: the chosen bucket when it is known before the pass (given, or
    # from Parquet footers: ``footer_bucket``), else the fine bucket, re-bucketed after it.
    # Either way the same summary and tables, by construction: the pass's aggregates are exact
    # (integer sums, minima, maxima: ``aggregate_all``), so ``series_groups`` makes the same
    # series rows of 10 s groups as of the bucket's; what is read of the pass here (counts,
    # span, HyperLogLog's runs, the finish chosen) does not depend on the groups; and the
    # driver's finish orders the series and every table by their keys (``_finish_on_driver``)
    fine = cfg.bucket_s or (footer_bucket(paths, cfg) if fmt == "parquet" else None) \
        or FINE_BUCKET_S
    progress(f"reading {len(paths)} path(s) as {fmt}")
    raw, logs = parse_inputs(spark, paths, fmt, cfg.log_tz)
    ev = classify(raw, cfg.since, cfg.until)

    def counted_pass(fine: float) -> tuple[Any, list[Any]]:
        agg = aggregate_all(ev, fine, every).persist(StorageLevel.MEMORY_AND_DISK)
        return agg, pass_counts(agg)

    agg, counts = counted_pass(fine)
    if fine != (cfg.bucket_s or FINE_BUCKET_S):
        # the footers' guess holds when the good events' span asks for the same bucket (they
        # span at most the footers' span: a smaller bucket only); else the pass again, fine
        good = [r for r in counts if r["bad"] is None and r["t0"] is not None]
        if good and choose_bucket(min(r["t0"] for r in good),
                                  max(r["t1"] for r in good)) != fine:
            agg.unpersist()
            fine = FINE_BUCKET_S
            agg, counts = counted_pass(fine)
    return finish(spark, agg, counts, paths, fmt, every, logs, cfg, progress)


def pass_counts(agg: Any) -> list[Any]:
    """The pass's figures per (bad, event): lines, time span, the lag samples' link runs
    (HyperLogLog) and the sources' ranks (collected: a few dozen rows)."""
    F = _F()
    c = F.col
    return agg.groupBy("bad", F.coalesce(c("row.event"), c("counted"),
                                         F.lit("replica_lag")).alias("event")) \
        .agg(F.sum("n").alias("n"), F.min("ts_min").alias("t0"),
             F.max("ts_max").alias("t1"),
             F.approx_count_distinct(F.when(is_lag_group(), F.concat_ws(
                 "\n", "master", "replica", "run_id"))).alias("runs"),
             F.collect_set(F.when(c("row").isNotNull(), source_rank(
                 F, c("row.source"), c("row.inferred")))).alias("ranks")) \
        .collect()


def finish(spark: Any, agg: Any, counts: list[Any], paths: Sequence[str], fmt: str,
           every: int, logs: dict[str, Any] | None, cfg: JobConfig,
           progress: Callable[[str], None] = _noop,
           inputs: Callable[[float, bool, bool], DriverInputs] | None = None) -> JobResult:
    """Everything after the input pass, from its aggregate ``agg`` (cached or not) and
    ``pass_counts(agg)``: the summary's input figures, then the finish on the driver or in
    Spark (the batch job's, and each trigger's of ``follow``). ``inputs``: the driver
    finish's input without a query (``follow``'s state on the driver; ``agg``, a plan or
    what makes one when called, is then made and run only by a finish in Spark)."""
    events_by_type: dict[str, int] = {}
    malformed: dict[str, int] = {"unparseable": 0, "missing-required": 0, "unknown-event": 0,
                                 **{k: 0 for k in (LOG_BAD if logs else ())}}
    t0 = t1 = None
    link_runs = 0
    ranks: set[int] = set()
    for row in counts:
        if row["bad"] is not None:
            malformed[row["bad"]] += int(row["n"])
            continue
        events_by_type[row["event"]] = events_by_type.get(row["event"], 0) + int(row["n"])
        t0 = row["t0"] if t0 is None else min(t0, row["t0"])
        t1 = row["t1"] if t1 is None else max(t1, row["t1"])
        ranks.update(row["ranks"])
        if row["event"] == "replica_lag":
            link_runs = int(row["runs"])
    n_events = sum(events_by_type.values())
    bucket_s = cfg.bucket_s or choose_bucket(t0, t1)
    n_other = sum(n for e, n in events_by_type.items()
                  if e != "replica_lag" and e not in COUNTED_ONLY)
    progress(f"{n_events:,} events, {sum(malformed.values()):,} malformed lines; "
             f"time buckets of {bucket_s:g} s")
    # lag series rows: at most one per link, master run and bucket (the run count is an
    # estimate: HyperLogLog, a few % off), nor more than samples (not the pass's lag groups,
    # whose number depends on the bucket it grouped by: the finish must not)
    buckets = 2 + ((t1 - t0) / bucket_s if t0 is not None else 0)
    series_rows = min(events_by_type.get("replica_lag", 0),
                      math.ceil(1.2 * link_runs * buckets))
    summary: dict[str, Any] = {"input": {
        "paths": list(paths), "format": fmt, "events": n_events,
        "events_by_type": dict(sorted(events_by_type.items())),
        "malformed_lines": sum(malformed.values()), "malformed": malformed,
        "first_ts": t0, "last_ts": t1, "since": cfg.since, "until": cfg.until,
        "bucket_s": bucket_s, "lag_sample_every": every, "duplicates_dropped": 0,
        "logs": logs,
    }}
    unknown_hosts = bool(logs and logs.get("unknown_hosts"))   # logread.name_unknown
    if 0 < cfg.driver_max_rows and n_other + series_rows <= cfg.driver_max_rows:
        if cfg.c1_after_pass:
            from pyrepl.analytics.session import c1_from_now

            c1_from_now(spark)
        progress(f"collecting {n_other:,} sync events and ~{series_rows:,} lag rows; "
                 f"finishing on the driver")
        result = _finish_on_driver(spark, agg, summary, bucket_s, cfg, len(ranks) > 1,
                                   unknown_hosts, inputs)
    else:
        progress(f"{n_other:,} sync events and ~{series_rows:,} lag rows: finishing in Spark")
        result = _finish_in_spark(agg() if callable(agg) else agg, summary, bucket_s, cfg,
                                  progress, unknown_hosts)
    summary["input"]["duplicates_dropped"] = n_other - result.charts.pop("n_sev")
    # py4j's proxies sit in reference cycles (each caches its method objects), so the JVM keeps
    # this run's intermediate query plans until Python's next full collection: ~250 MB of
    # driver heap per run, which a long-lived session (a notebook, the tests) thrashes on
    gc.collect()
    return result


def cluster_table(spark: Any, name: str, rows: list[dict[str, Any]]) -> RowTable:
    """A cluster table (``shards``: built on the driver by both finishes)."""
    keys = TABLE_KEYS[name]
    return RowTable(spark, name, sorted(rows, key=lambda x: tuple(_nf(x[k]) for k in keys)))


def _nf(x: Any) -> tuple[int, Any]:
    """Sort key of a nullable value: nulls first, NaN after every number."""
    if x is None:
        return (0, 0)
    if isinstance(x, float) and math.isnan(x):
        return (2, 0)
    return (1, x)


def _in_order(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events in the order of their values: by time, event and node, then (ties, few)
    by every field."""
    events.sort(key=lambda e: (_nf(e["ts"]), e["event"], e["node"]))
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(events):
        k = (_nf(events[i]["ts"]), events[i]["event"], events[i]["node"])
        j = i + 1
        while j < len(events) and (_nf(events[j]["ts"]), events[j]["event"],
                                   events[j]["node"]) == k:
            j += 1
        if j - i > 1:
            names = sorted({n for e in events[i:j] for n in e})
            out.extend(sorted(events[i:j], key=lambda e: tuple(_nf(e.get(n)) for n in names)))
        else:
            out.append(events[i])
        i = j
    return out


def _fleet(link_rows: list[dict[str, Any]]) -> dict[str, int]:
    masters = {x["master"] for x in link_rows}
    replicas = {x["replica"] for x in link_rows}
    return {"nodes": len(masters | replicas), "masters": len(masters),
            "replicas": len(replicas), "links": len(link_rows)}


def lag_groups(agg: Any) -> Any:
    """The pass's lag groups: its rows that are neither bad, nor an event, nor counted."""
    return agg.filter(is_lag_group())


def known_names(agg: Any) -> Any:
    """The node names of the pass's lag groups (masters, replicas) and of the collector's
    samples (``cnode``, and ``cpeer``: the master a replica's sample names), as one column
    ``_n`` (``logread.name_unknown``)."""
    c = _F().col
    lag = lag_groups(agg)
    return lag.select(c("master").alias("_n")) \
        .unionByName(lag.select(c("replica").alias("_n"))) \
        .unionByName(agg.filter(c("cnode").isNotNull()).select(c("cnode").alias("_n"))) \
        .unionByName(agg.filter(c("cpeer").isNotNull()).select(c("cpeer").alias("_n")))


# the driver finish's input: the sync events (each with its link), the lag series rows of the
# run's bucket, and the lag sample's values per link
DriverInputs = tuple[list[dict[str, Any]], list[dict[str, Any]],
                     dict[tuple[Any, Any], tuple[list[Any], list[Any]]]]


def collect_inputs(agg: Any, bucket_s: float, several_sources: bool, unknown_hosts: bool
                   ) -> DriverInputs:
    """The driver finish's input from the pass's aggregate: one query (``follow`` keeps its
    own on the driver: ``fstate``)."""
    F = _F()
    c = F.col
    sev = agg.filter(c("row").isNotNull()).select("row.*")
    if unknown_hosts:  # a log's node whose host only the other sources give: their name
        sev = name_unknown(sev, known_names(agg))
    if several_sources:  # a node described by several sources: the richest
        sev = prefer_sources(sev)
    lag = lag_groups(agg)
    sample = lag.filter(c("sid").isNotNull()).groupBy("master", "replica").agg(
        F.collect_list("lb_max").alias("_lbs"), F.collect_list("lm_max").alias("_lms"))
    parts = with_link(sev).withColumn("_part", F.lit(0)) \
        .unionByName(series_groups(lag, bucket_s).withColumn("_part", F.lit(1)),
                     allowMissingColumns=True) \
        .unionByName(sample.withColumn("_part", F.lit(2)), allowMissingColumns=True)
    names = parts.columns
    part = names.index("_part")
    fields = [(i, n) for i, n in enumerate(names) if n != "_part"]
    events: list[dict[str, Any]] = []
    series: list[dict[str, Any]] = []
    samples: dict[tuple[Any, Any], tuple[list[Any], list[Any]]] = {}
    series_cols = [(names.index(n), n) for n, _ in table_columns("lag_series")
                   if n in names]
    for row in parts.collect():
        if row[part] == 0:
            events.append(event_dict(row, fields))
        elif row[part] == 1:
            series.append({n: row[i] for i, n in series_cols})
        else:
            samples[(row["master"], row["replica"])] = (row["_lbs"], row["_lms"])
    return events, series, samples


def event_dict(row: Any, fields: list[tuple[int, str]]) -> dict[str, Any]:
    """A collected event (``with_link``'s columns) as the driver's steps take it: its
    non-null fields, and its link."""
    e = {n: row[i] for i, n in fields if row[i] is not None}
    e.setdefault("master", None)
    e.setdefault("replica", None)
    return e


def _finish_on_driver(spark: Any, agg: Any, summary: dict[str, Any], bucket_s: float,
                      cfg: JobConfig, several_sources: bool, unknown_hosts: bool,
                      inputs: Callable[[float, bool, bool], DriverInputs] | None = None
                      ) -> JobResult:
    """One query collects the sync events, the lag series and the lag sample (or
    ``inputs`` gives them); ``driver`` does the rest; the tables become DataFrames (from the
    driver's rows) for writing.

    The collected rows come in the order of the pass's groups, which hang on how the pass
    grouped the lag samples (per 10 s or per the bucket: ``run``); so the events and series
    rows are put in the order of their values first (the steps' float sums, over syncs or
    series rows, then add in one order), and each table's rows in the order of its keys."""
    if inputs is None:
        events, series, samples = collect_inputs(agg, bucket_s, several_sources,
                                                 unknown_hosts)
        agg.unpersist()
    else:
        events, series, samples = inputs(bucket_s, several_sources, unknown_hosts)
    events = _in_order(events)
    series.sort(key=lambda s: (_nf(s["master"]), _nf(s["replica"]), _nf(s["run_id"]),
                               _nf(s["bucket"])))
    m = driver.master_halves(events)
    r = driver.replica_halves(events)
    backlogs = driver.master_backlogs(m)
    syncs = driver.build_syncs(m, r, bucket_s, cfg.match_window_s)
    recs = driver.build_recoveries(events, r)
    streaks = [x for x in driver.build_streaks(r) if x["failed_full"] > 0]
    series = driver.finish_series(series, backlogs)
    rates = driver.build_write_rates(series, bucket_s)
    links = driver.build_links(syncs, recs, series, samples, backlogs, events, streaks)
    nodes = driver.build_nodes(syncs, recs, links, rates)
    buckets = driver.build_buckets(syncs, events, series, bucket_s)
    summary["fleet"] = _fleet(links)
    metrics, advice = driver.summarize(syncs, recs, streaks, events)
    summary.update(metrics)
    summary["lag"] = driver.lag_summary(series, samples, backlogs)
    summary["backlog"] = backlog_advice(advice, metrics["psync"]["partial"],
                                        metrics["psync"]["full"], list(backlogs.values()),
                                        rates)
    # the summary's key order, as the Spark finish writes it
    order = ("input", "fleet", "psync", "full_syncs", "partial_syncs", "failures", "buffers",
             "links", "recovery", "lag", "backlog")
    summary = {k: summary[k] for k in order}
    cluster, shard_rows, failover_rows = build_cluster(
        [e for e in events if is_cluster_event(e)], link_spans(syncs))
    if cluster is not None:
        summary["cluster"] = cluster
    loops = sorted((x for x in streaks if x["loop"]),
                   key=lambda x: (x["t_first_failed"], x["replica"]))[:LOOPS_MAX]

    def frame(name: str, rows: list[dict[str, Any]]) -> RowTable:
        keys = TABLE_KEYS[name]
        return RowTable(spark, name, sorted(rows, key=lambda x: tuple(_nf(x[k]) for k in keys)))

    tables = Tables(frame("syncs", syncs), frame("recoveries", recs),
                    frame("lag_series", series), frame("links", links),
                    frame("nodes", nodes), frame("buckets", buckets),
                    frame("write_rates", rates), spread=(),
                    shards=cluster_table(spark, "shards", shard_rows),
                    failovers=cluster_table(spark, "failovers", failover_rows))
    recovery = [(x["kind"], x["recovery_ms"]) for x in recs
                if x["recovery_ms"] is not None and not x["intentional"]]
    return JobResult(summary, tables, {
        "links": links, "loops": loops, "nodes": nodes, "n_sev": len(events),
        "buckets": sorted(buckets, key=lambda x: x["bucket"]), "recovery": recovery,
        "stories": stories_from_rows(syncs, recs, links, loops)})


def _finish_in_spark(agg: Any, summary: dict[str, Any], bucket_s: float, cfg: JobConfig,
                     progress: Callable[[str], None], unknown_hosts: bool) -> JobResult:
    """Every table by the Spark steps, from the cached aggregate (any size)."""
    from pyspark import StorageLevel

    F = _F()
    c = F.col
    keep = StorageLevel.MEMORY_AND_DISK
    # Each step's result is materialized with its plan cut (a checkpoint, not a cache): the
    # next steps' plans then start from a scan of it, and Spark analyzes and plans each of the
    # ~100 steps that follow in milliseconds rather than re-walking every plan below (a cached
    # plan is still the whole plan: twice the time of this finish on a small fleet, most of it
    # planning). Reliable checkpoints where the session has a checkpoint directory
    # (``spark.checkpoint.dir``: on a cluster, a lost executor loses nothing), local ones
    # (executor storage) otherwise.
    if agg.sparkSession.sparkContext.getCheckpointDir():
        def cut(df: Any) -> Any:
            return df.checkpoint(eager=True)
    else:
        def cut(df: Any) -> Any:
            return df.localCheckpoint(eager=True, storageLevel=keep)
    # the two small halves get checkpoints of their own (lag groups without the wide
    # ``row``), counted now so the big aggregate can go;
    # a node described by several sources (pyrepl, a Redis log, the collector): one name (a
    # log's node whose host only the others give), the richest source
    sev = agg.filter(c("row").isNotNull()).select("row.*")
    if unknown_hosts:
        sev = name_unknown(sev, known_names(agg))
    sev = with_link(prefer_sources(sev)).transform(cut)
    lag_agg = lag_groups(agg).drop("bad", "row", "counted", "cnode", "cpeer") \
        .transform(cut)
    n_sev = sev.count()
    lag_agg.count()
    agg.unpersist()

    progress("syncs and recoveries")
    m = master_syncs(sev).transform(cut)
    r = replica_attempts(sev).transform(cut)
    syncs = build_syncs(m, r, bucket_s, cfg.match_window_s).transform(cut)
    recs = build_recoveries(sev, r).transform(cut)
    streaks = build_streaks(r).filter(c("failed_full") > 0).transform(cut)
    backlogs = master_backlogs(m).transform(cut)

    progress("lag")
    series = build_lag_series(lag_agg, backlogs, bucket_s).transform(cut)
    sample = lag_sample(lag_agg, backlogs).transform(cut)
    links = build_links(syncs, recs, series, sample, sev, streaks).transform(cut)
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
    rates = build_write_rates(series, bucket_s).transform(cut)
    nodes = build_nodes(syncs, recs, links, rates).transform(cut)
    buckets = build_buckets(syncs, sev, series, bucket_s).transform(cut)
    link_rows = [x.asDict() for x in links.collect()]  # one row per link: small
    summary["fleet"] = _fleet(link_rows)
    summary.update(summarize(syncs, recs, streaks, sev, rates, lag_row, backlogs))
    cluster, shard_rows, failover_rows = build_cluster(
        [x.asDict() for x in sev.filter(c("event").startswith(CLUSTER_PREFIX)).collect()],
        [(x["replica"], x["master"], x["t0"], x["t1"]) for x in syncs.filter(
            c("replica").isNotNull() & c("master").isNotNull() & c("ts").isNotNull())
         .groupBy("replica", "master").agg(F.min("ts").alias("t0"), F.max("ts").alias("t1"))
         .orderBy("replica", "master").collect()])
    if cluster is not None:
        summary["cluster"] = cluster
    spark = sev.sparkSession
    tables = Tables(syncs, recs, series, links, nodes, buckets, rates,
                    shards=cluster_table(spark, "shards", shard_rows),
                    failovers=cluster_table(spark, "failovers", failover_rows))
    loops = [x.asDict() for x in streaks.filter(c("loop")).orderBy("t_first_failed", "replica")
             .limit(LOOPS_MAX).collect()]
    return JobResult(summary, tables, {"links": link_rows, "loops": loops, "n_sev": n_sev})
