"""The sync-analytics Spark job: sync-event logs -> per-sync, per-recovery, per-link, per-node and
per-bucket tables, and the fleet-wide metrics of ``summary.json``.

Theory of operation
-------------------
Every step is a function from DataFrames to a DataFrame, so the tests run each one on small
inputs and compare it with a pure-Python oracle. The logs are read once, with the schema built
from ``pyrepl.events.FIELDS`` (never inferred); each line is classified (good, unparseable,
missing ``ts``/``event``/``node``, unknown event) and the projected rows are cached, so the one
pass over the input also yields the per-event counts. The sync events proper (everything but
the periodic ``replica_lag`` samples, which are the bulk) are cached again, small.

A link is (master, replica): a master-side event names the replica in ``peer``, a replica-side
event names the master. One *sync* is one PSYNC/SYNC attempt. Its master half is the master's
events sharing a ``sync_id`` (decision, fork, RDB sent, partial sent, online, lost); its
replica half is the replica's events sharing the replica's own ``sync_id`` (PSYNC sent, reply,
first RDB byte, RDB received, loaded, buffer drained, link up, caught up, failed). The halves
are joined on the link, the requested replid/offset and the time (at most ``match_window_s``
apart, mutual nearest wins); either half alone still makes a row. Phases come from the replica's
timestamps: snapshot = PSYNC sent -> first RDB byte, transfer = first byte -> RDB received,
load = received -> loaded, drain = link up -> caught up (or buffer drained), total = PSYNC sent
-> caught up. A full sync's *cause* is its PSYNC reason, except ``output-buffer-limit`` when the
master dropped the link's previous sync or session for its output buffer.

A *recovery* starts at a replica's ``link_down`` (other than ``promoted``/``replicaof``) and
ends at its first later ``link_up``; it counts the PSYNC attempts in between, the failed full
ones and the connection failures, and its recovery time runs to that sync's ``caught_up``. A
*full-sync loop* is two or more failed full syncs in one stretch of a replica without a working
link (``build_streaks``: from a link loss, or from the replica's first sync, to a link up). Lag samples are aggregated per link and time bucket; the master's
write rate comes from the offsets in those samples (``offset + lag_bytes`` is
``master_repl_offset``), per run (offsets restart with the process) and bucket.

Backlog advice: an ``offset-before-backlog`` full sync needed ``histlen + gap`` bytes of backlog
(the backlog was full, so a bigger one would have kept the missing bytes); when the backlog was
not full (``histlen < backlog_size``) the bytes predate it and no size would have helped. The
quantiles of the need and the partial-sync ratio as a function of the backlog size follow.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics.schema import (
    ADVICE_QUANTILES,
    BENIGN_LOST,
    CORRUPT,
    FULL_RESULTS,
    LOOP_FAILED_FULL,
    MASTER_EVENTS,
    MATCH_WINDOW_S,
    NEAR_LIMIT,
    OFFSET_BEFORE_BACKLOG,
    OUTPUT_BUFFER_LIMIT,
    QUANTILES,
    field_names,
    spark_schema,
)
from pyrepl.events import EVENTS, FIELDS

SENTINEL = float(2 ** 62)  # "no backlog size would have helped", sorted after every real need
INTENTIONAL_DOWN = ("promoted", "replicaof")
NICE_BUCKETS = (10, 30, 60, 300, 600, 900, 1800, 3600, 4 * 3600, 6 * 3600, 86400)


@dataclass
class JobConfig:
    since: float | None = None
    until: float | None = None
    bucket_s: float | None = None  # None: chosen from the time span (about 100-300 buckets)
    match_window_s: float = MATCH_WINDOW_S
    fmt: str = "auto"  # json | parquet | auto (by file names)
    lag_sample_every: int | None = None  # None: about SAMPLE_TARGET samples for percentiles


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


def _F() -> Any:
    from pyspark.sql import functions as F

    return F


# -- reading ------------------------------------------------------------------------------------

# The writer's exact bytes for a lag sample: lines holding them are parsed for LAG_FIELDS only.
LAG_MARK = '"event":"replica_lag"'
LAG_FIELDS = ("ts", "event", "node", "run_id", "peer", "offset", "lag_bytes", "lag_ms")
FINE_BUCKET_S = 10.0  # lag samples are first summed per 10 s, then per chosen bucket
SAMPLE_TARGET = 200_000  # lag percentiles come from about this many samples at most


def detect_format(paths: Sequence[str]) -> str:
    def is_parquet(p: str) -> bool:
        q = p.rstrip("/")
        if q.endswith(".parquet"):
            return True
        if os.path.isdir(q):
            for _, _, files in os.walk(q):
                if any(f.endswith(".parquet") for f in files):
                    return True
                if any(not f.startswith((".", "_")) for f in files):
                    return False
        return False

    return "parquet" if paths and all(is_parquet(p) for p in paths) else "json"


def _struct(names: Sequence[str]) -> Any:
    from pyspark.sql import types as T

    full = {f.name: f for f in spark_schema(with_corrupt=True).fields}
    return T.StructType([full[n] for n in (*names, CORRUPT)])


def parse_lines(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Every record as FIELDS plus ``_corrupt_record`` and ``lagline``.

    NDJSON is read as text and each non-blank line parsed once: a line holding LAG_MARK (how
    the writer spells a lag sample, the bulk of any log and most of the parsing cost) for the
    lag fields only, any other line with the whole schema. Parquet rows come as they are."""
    F = _F()
    if fmt == "auto":
        fmt = detect_format(paths)
    reader = spark.read.option("recursiveFileLookup", "true")
    if fmt == "parquet":
        df = reader.parquet(*paths)
        have = set(df.columns)
        cols = [(F.col(name) if name in have else F.lit(None)).cast(t).alias(name)
                for name, t, _ in FIELDS]
        return df.select(*cols, F.lit(None).cast("string").alias(CORRUPT),
                         F.lit(False).alias("lagline"))
    text = reader.text(list(paths))
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    lines = text.select("value", (F.instr(F.col("value"), LAG_MARK) > 0).alias("lagline"))
    mark = F.col("lagline")
    # each parse once per line: the two results are columns, then merged field by field
    parsed = lines.filter(mark | (F.trim(F.col("value")) != "")).select(
        "lagline",
        F.when(mark, F.from_json("value", _struct(LAG_FIELDS), opts)).alias("jn"),
        F.when(~mark, F.from_json("value", spark_schema(), opts)).alias("jf"))
    cols = []
    for n in (*field_names(), CORRUPT):
        if n in LAG_FIELDS or n == CORRUPT:
            cols.append(F.when(F.col("lagline"), F.col(f"jn.{n}"))
                        .otherwise(F.col(f"jf.{n}")).alias(n))
        else:
            cols.append(F.col(f"jf.{n}").alias(n))
    return parsed.select(*cols, "lagline")


def read_raw(spark: Any, paths: Sequence[str], fmt: str = "auto") -> Any:
    """Every record as FIELDS plus ``_corrupt_record``, each line parsed with the whole schema
    (the conversion to Parquet keeps every field)."""
    F = _F()
    if fmt == "auto":
        fmt = detect_format(paths)
    if fmt == "parquet":
        return parse_lines(spark, paths, fmt).drop("lagline")
    text = spark.read.option("recursiveFileLookup", "true").text(list(paths))
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    return text.filter(F.trim(F.col("value")) != "") \
        .select(F.from_json("value", spark_schema(), opts).alias("j")).select("j.*")


def estimate_lines(spark: Any, paths: Sequence[str], fmt: str = "auto") -> int:
    """About how many lines/rows the input has (to size the lag sample): Parquet footers, or
    the bytes of the files (any Hadoop file system) over a short line's length."""
    if fmt == "auto":
        fmt = detect_format(paths)
    if fmt == "parquet":
        return int(spark.read.option("recursiveFileLookup", "true").parquet(*paths).count())
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    total = 0
    for p in paths:
        path = jvm.org.apache.hadoop.fs.Path(p)
        fs = path.getFileSystem(conf)
        for st in fs.globStatus(path) or []:
            it = fs.listFiles(st.getPath(), True)
            while it.hasNext():
                f = it.next()
                n = int(f.getLen())
                total += n * 8 if f.getPath().getName().endswith(".gz") else n
    return total // 150


def classify(raw: Any, since: float | None = None, until: float | None = None) -> Any:
    """FIELDS plus ``bad``: null for a good event, else why the line is not one. Good events
    outside [since, until) are dropped."""
    F = _F()
    lagline = F.col("lagline") if "lagline" in raw.columns else F.lit(False)
    bad = (F.when(F.col(CORRUPT).isNotNull(), "unparseable")
           .when(F.col("ts").isNull() | F.col("event").isNull() | F.col("node").isNull(),
                 "missing-required")
           .when(lagline & (F.col("event") != "replica_lag"), "unparseable")
           .when(~F.col("event").isin(*EVENTS), "unknown-event"))
    return _window(raw.select(*field_names(), bad.alias("bad")), since, until)


def _window(df: Any, since: float | None, until: float | None) -> Any:
    F = _F()
    keep = None
    if since is not None:
        keep = F.col("ts") >= F.lit(float(since))
    if until is not None:
        c = F.col("ts") < F.lit(float(until))
        keep = c if keep is None else keep & c
    return df if keep is None else df.filter(F.col("bad").isNotNull() | keep)


def aggregate_all(ev: Any, fine_s: float, every: int) -> Any:
    """The one pass over the input (FIELDS + bad). Lag samples are summed per (master,
    replica, run_id, fine bucket): count, sums, maxima, offset range; every ``every``-th one (by
    a hash of node, peer and ts) stays a row of its own (``sid`` set) for the percentiles. Every
    other good event stays a row of its own too, whole, in ``row``; bad lines are counted per
    kind. Each record lands in exactly one group; the result is small."""
    F = _F()
    c = F.col
    good = c("bad").isNull()
    lag = good & (c("event") == "replica_lag")
    sampled = lag if every <= 1 else lag & (
        F.pmod(F.xxhash64("node", "peer", "ts"), F.lit(every)) == 0)
    other = good & ~lag
    mro = c("offset") + c("lag_bytes")
    return ev.groupBy(
        c("bad"),
        F.when(lag, c("node")).alias("master"), F.when(lag, c("peer")).alias("replica"),
        F.when(lag, c("run_id")).alias("run_id"),
        F.when(lag, F.floor(c("ts") / F.lit(fine_s)) * F.lit(fine_s)).alias("fb"),
        F.when(sampled | other, F.monotonically_increasing_id()).alias("sid"),
        # the whole event as a grouping key, not an aggregate: only fixed-width aggregation
        # buffers keep this a hash aggregation (a string buffer would make Spark sort it all)
        F.when(other, F.struct(*field_names())).alias("row"),
    ).agg(
        F.count(F.lit(1)).alias("n"),
        F.count("lag_bytes").alias("nb"), F.count("lag_ms").alias("nm"),
        F.sum("lag_bytes").alias("lb_sum"), F.max("lag_bytes").alias("lb_max"),
        F.sum("lag_ms").alias("lm_sum"), F.max("lag_ms").alias("lm_max"),
        F.min(mro).alias("mro_min"), F.max(mro).alias("mro_max"),
        F.min("ts").alias("ts_min"), F.max("ts").alias("ts_max"))


def with_link(ev: Any) -> Any:
    """Adds ``master`` and ``replica``: the link the event belongs to."""
    F = _F()
    is_m = F.col("event").isin(*MASTER_EVENTS)
    return ev.withColumns({"master": F.when(is_m, F.col("node")).otherwise(F.col("peer")),
                           "replica": F.when(is_m, F.col("peer")).otherwise(F.col("node"))})


def choose_bucket(first_ts: float | None, last_ts: float | None) -> float:
    """About 100-300 buckets over the time span; always a multiple of FINE_BUCKET_S."""
    if first_ts is None or last_ts is None:
        return 60.0
    span = max(0.0, last_ts - first_ts)
    for b in NICE_BUCKETS:
        if span / b <= 300:
            return float(b)
    return float(NICE_BUCKETS[-1])


# -- syncs ---------------------------------------------------------------------------------------

def not_benign(F: Any) -> Any:
    """A replica_lost that is a real loss (not the rdb channel closing after its transfer)."""
    return F.col("reason").isNull() | ~F.col("reason").isin(*BENIGN_LOST)


def _pick(F: Any, cond: Any, col: str) -> Any:
    return F.max(F.when(cond, F.col(col)))


def _tmin(F: Any, cond: Any) -> Any:
    return F.min(F.when(cond, F.col("ts")))


def _first(F: Any, cond: Any, col: str) -> Any:
    """The value of ``col`` at the earliest event matching ``cond`` (ties: smallest value)."""
    return F.min(F.when(cond, F.struct(F.col("ts"), F.col(col))))[col]


def master_syncs(sev: Any) -> Any:
    """One row per master-side sync (a psync_decision and the events sharing its sync_id)."""
    F = _F()
    e = F.col("event")
    dec = e == "psync_decision"
    lost = (e == "replica_lost") & not_benign(F)
    df = sev.filter(F.col("event").isin(*MASTER_EVENTS) & (e != "replica_lag")
                    & F.col("sync_id").isNotNull())
    return (df.groupBy("master", "replica", F.col("sync_id").alias("m_sync_id")).agg(
        _tmin(F, dec).alias("t_decision"),
        _pick(F, dec, "result").alias("m_result"),
        _pick(F, dec, "reason").alias("reason"),
        _pick(F, dec, "gap").alias("gap"),
        _pick(F, dec, "req_replid").alias("req_replid"),
        _pick(F, dec, "req_offset").alias("req_offset"),
        _pick(F, dec, "backlog_size").alias("backlog_size"),
        _pick(F, dec, "backlog_histlen").alias("backlog_histlen"),
        _pick(F, dec, "master_repl_offset").alias("master_repl_offset"),
        _pick(F, e.isin("fullsync_fork", "fullsync_rdb_sent", "replica_online"), "mode")
        .alias("m_mode"),
        _pick(F, e == "fullsync_rdb_sent", "bytes").alias("m_rdb_bytes"),
        _pick(F, e == "partial_sent", "bytes").alias("partial_bytes"),
        _tmin(F, e == "replica_online").alias("t_online"),
        _pick(F, e == "replica_online", "buffer_peak").alias("m_online_peak"),
        _tmin(F, lost).alias("t_lost"),
        _first(F, lost, "reason").alias("lost_reason"),
        _pick(F, lost, "buffer_peak").alias("m_lost_peak"),
        F.max("buffer_limit").alias("m_buffer_limit"),
    ).filter(F.col("t_decision").isNotNull()))


def replica_attempts(sev: Any) -> Any:
    """One row per replica-side sync attempt (the replica's events sharing a sync_id, but not
    link_down, which ends the session an attempt started)."""
    F = _F()
    e = F.col("event")
    df = sev.filter(~F.col("event").isin(*MASTER_EVENTS) & (e != "link_down")
                    & F.col("sync_id").isNotNull())
    failed = e == "sync_failed"
    return df.groupBy("master", "replica", F.col("sync_id").alias("r_sync_id")).agg(
        F.min("ts").alias("t_first_event"),
        _tmin(F, e == "psync_sent").alias("t_psync"),
        _pick(F, e == "psync_sent", "req_replid").alias("r_req_replid"),
        _pick(F, e == "psync_sent", "req_offset").alias("r_req_offset"),
        _first(F, e == "psync_reply", "result").alias("reply_result"),
        _tmin(F, e == "rdb_first_byte").alias("t_first_byte"),
        _tmin(F, e == "rdb_received").alias("t_rdb_received"),
        _pick(F, e == "rdb_received", "bytes").alias("r_rdb_bytes"),
        _tmin(F, e == "load_done").alias("t_load_done"),
        _pick(F, e == "load_done", "keys").alias("keys"),
        _tmin(F, e == "buffer_drained").alias("t_drained"),
        _pick(F, e == "buffer_drained", "buffer_peak").alias("r_buffer_peak"),
        _pick(F, e == "buffer_drained", "buffer_limit").alias("r_buffer_limit"),
        _tmin(F, e == "link_up").alias("t_link_up"),
        _pick(F, e == "link_up", "result").alias("up_result"),
        _tmin(F, e == "caught_up").alias("t_caught_up"),
        _pick(F, e.isin("psync_reply", "rdb_first_byte", "rdb_received", "load_done",
                        "link_up"), "mode").alias("r_mode"),
        _tmin(F, failed).alias("t_failed"),
        _first(F, failed, "reason").alias("fail_reason"),
    )


def match_halves(m: Any, r: Any, window_s: float = MATCH_WINDOW_S) -> Any:
    """(master, replica, m_sync_id, r_sync_id) of the master and replica halves of one sync."""
    from pyspark.sql import Window

    F = _F()
    a = m.select("master", "replica", "m_sync_id", "t_decision", "req_replid", "req_offset")
    b = r.filter(F.col("t_psync").isNotNull()).select(
        "master", "replica", "r_sync_id", "t_psync", "r_req_replid", "r_req_offset")
    d = F.abs(F.col("t_decision") - F.col("t_psync"))
    same_req = (F.col("req_replid").isNull()
                | ((F.col("req_replid") == F.col("r_req_replid"))
                   & F.col("req_offset").eqNullSafe(F.col("r_req_offset"))))
    cand = a.join(b, ["master", "replica"]).filter((d <= F.lit(window_s)) & same_req) \
        .withColumn("d", d)
    wm = Window.partitionBy("master", "replica", "m_sync_id").orderBy("d", "r_sync_id")
    wr = Window.partitionBy("master", "replica", "r_sync_id").orderBy("d", "m_sync_id")
    return (cand.withColumns({"rm": F.row_number().over(wm), "rr": F.row_number().over(wr)})
            .filter((F.col("rm") == 1) & (F.col("rr") == 1))
            .select("master", "replica", "m_sync_id", "r_sync_id"))


def build_syncs(m: Any, r: Any, bucket_s: float, window_s: float = MATCH_WINDOW_S) -> Any:
    """One row per sync: the joined halves with result, kind, reason, cause, status, phases,
    bytes, buffers."""
    from pyspark.sql import Window

    F = _F()
    pairs = match_halves(m, r, window_s)
    rps = r.filter(F.col("t_psync").isNotNull())
    s = m.join(pairs, ["master", "replica", "m_sync_id"], "left") \
        .join(rps, ["master", "replica", "r_sync_id"], "full_outer")
    c = F.col
    # Every derived column as an expression of the joined columns, then one projection (a
    # chain of withColumn would re-analyse the growing plan at every step).
    result = F.coalesce(c("m_result"), c("reply_result"))
    kind = (F.when(result == "continue", "partial")
            .when(result.isin(*FULL_RESULTS), "full").otherwise("none"))
    full = kind == "full"
    part = kind == "partial"
    mode = F.when(full, F.coalesce(c("r_mode"), c("m_mode"),
                                   F.when(result == "rdbchannel", F.lit("rdb-channel"))))
    status = (F.when(c("t_failed").isNotNull(), "failed")
              .when(c("t_link_up").isNotNull() | c("t_online").isNotNull(), "ok")
              .when(c("t_lost").isNotNull(), "failed").otherwise("incomplete"))
    ts = F.coalesce(c("t_psync"), c("t_decision"))

    def ms(a: Any, b: Any) -> Any:
        return F.when(full, F.round((a - b) * F.lit(1000.0), 3))

    transfer = ms(c("t_rdb_received"), c("t_first_byte"))
    rdb_bytes = F.when(full, F.coalesce(c("r_rdb_bytes"), c("m_rdb_bytes")))
    rdbch = mode == "rdb-channel"
    peak = F.when(full, F.when(rdbch, c("r_buffer_peak")).otherwise(
        F.coalesce(c("m_online_peak"), c("m_lost_peak"))))
    limit = F.when(full, F.when(rdbch, c("r_buffer_limit")).otherwise(c("m_buffer_limit")))
    obb = full & (c("reason") == OFFSET_BEFORE_BACKLOG) & c("gap").isNotNull()
    key = F.coalesce(c("m_sync_id"), c("r_sync_id"))
    prev_lost = F.lag("lost_reason").over(
        Window.partitionBy("master", "replica").orderBy(ts, key))
    return s.select(
        key.alias("sync_key"), "master", "replica", "m_sync_id", "r_sync_id", ts.alias("ts"),
        (F.floor(ts / F.lit(bucket_s)) * F.lit(bucket_s)).alias("bucket"),
        result.alias("result"), kind.alias("kind"), "reason",
        F.when(full, F.when(prev_lost == OUTPUT_BUFFER_LIMIT, F.lit(OUTPUT_BUFFER_LIMIT))
               .otherwise(F.coalesce(c("reason"), F.lit("unknown")))).alias("cause"),
        mode.alias("mode"), status.alias("status"),
        F.when(status == "failed", F.coalesce(c("lost_reason"), c("fail_reason")))
        .alias("fail_reason"),
        "req_replid", "req_offset", "gap", "backlog_size", "backlog_histlen",
        F.when(obb, F.coalesce(c("backlog_histlen"), c("backlog_size")) + c("gap"))
        .alias("backlog_need"),
        F.when(obb, ~(c("backlog_histlen").isNotNull() & c("backlog_size").isNotNull()
                      & (c("backlog_histlen") < c("backlog_size")))).alias("backlog_fixable"),
        ms(c("t_first_byte"), c("t_psync")).alias("snapshot_ms"),
        transfer.alias("transfer_ms"),
        ms(c("t_load_done"), c("t_rdb_received")).alias("load_ms"),
        ms(F.coalesce(c("t_caught_up"), c("t_drained")), c("t_link_up")).alias("drain_ms"),
        ms(F.coalesce(c("t_caught_up"), c("t_drained"), c("t_link_up")), c("t_psync"))
        .alias("total_ms"),
        rdb_bytes.alias("rdb_bytes"),
        F.when(transfer > 0, rdb_bytes / (transfer / F.lit(1000.0))).alias("throughput_bps"),
        "keys",
        F.when(part, c("partial_bytes")).alias("partial_bytes"),
        F.when(part & (c("backlog_size") > 0), c("partial_bytes") / c("backlog_size"))
        .alias("backlog_fraction"),
        F.when(full, F.when(rdbch, "replica").otherwise("master-output")).alias("buffer_kind"),
        peak.alias("buffer_peak"), limit.alias("buffer_limit"),
        F.when(peak.isNotNull() & (limit > 0), peak >= F.lit(NEAR_LIMIT) * limit)
        .alias("near_limit"),
        "lost_reason")


# -- recoveries ----------------------------------------------------------------------------------

def build_recoveries(sev: Any, r: Any) -> Any:
    """One row per replica link_down: the attempts until the link was up again, the downtime
    and the time until the replica caught up."""
    from pyspark.sql import Window

    F = _F()
    c = F.col
    downs = sev.filter(c("event") == "link_down").select(
        "replica", c("master").alias("down_master"), "ts", F.lit(0).alias("rank"),
        c("sync_id").alias("id"), c("reason").alias("down_reason"),
        F.lit(None).cast("double").alias("t_link_up"), F.lit(None).cast("string").alias("up_result"),
        F.lit(None).cast("double").alias("t_caught_up"), F.lit(None).cast("string").alias("up_master"),
        F.lit(False).alias("psync"), F.lit(False).alias("full_failed"),
        F.lit(False).alias("conn_failed"))
    is_full = c("reply_result").isin(*FULL_RESULTS)
    atts = r.select(
        "replica", F.lit(None).cast("string").alias("down_master"),
        F.coalesce(c("t_psync"), c("t_first_event")).alias("ts"), F.lit(1).alias("rank"),
        c("r_sync_id").alias("id"), F.lit(None).cast("string").alias("down_reason"),
        "t_link_up", "up_result", "t_caught_up", c("master").alias("up_master"),
        c("t_psync").isNotNull().alias("psync"),
        (c("t_psync").isNotNull() & is_full & c("t_failed").isNotNull()).alias("full_failed"),
        (c("t_psync").isNull() & c("t_failed").isNotNull()).alias("conn_failed"))
    rows = downs.unionByName(atts)
    w = Window.partitionBy("replica").orderBy("ts", "rank", "id") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    rows = rows.withColumn("rec", F.sum(F.when(c("rank") == 0, 1).otherwise(0)).over(w)) \
        .filter(c("rec") > 0)
    up = F.when(c("t_link_up").isNotNull(),
                F.struct(c("t_link_up"), c("id"), c("up_result"), c("t_caught_up"),
                         c("up_master")))
    rows = rows.withColumn("first_up", F.min(up).over(Window.partitionBy("replica", "rec")))
    before = c("first_up").isNull() | (c("ts") <= c("first_up.t_link_up"))
    att = c("rank") == 1
    g = rows.groupBy("replica", "rec").agg(
        _tmin(F, c("rank") == 0).alias("t_down"),
        _pick(F, c("rank") == 0, "down_reason").alias("down_reason"),
        _pick(F, c("rank") == 0, "down_master").alias("master"),
        F.first("first_up", ignorenulls=True).alias("first_up"),
        F.sum(F.when(att & c("psync") & before, 1).otherwise(0)).alias("attempts"),
        F.sum(F.when(att & c("full_failed") & before, 1).otherwise(0)).alias("failed_full"),
        F.sum(F.when(att & c("conn_failed") & before, 1).otherwise(0)).alias("connect_failures"),
    )
    t_up, caught = c("first_up.t_link_up"), c("first_up.t_caught_up")
    reason = c("down_reason")
    return g.select(
        "replica", "master", "rec", "t_down", "down_reason",
        F.coalesce(reason.isin(*INTENTIONAL_DOWN), F.lit(False)).alias("intentional"),
        t_up.alias("t_up"), c("first_up.id").alias("up_sync_id"),
        c("first_up.up_master").alias("up_master"),
        F.when(t_up.isNull(), F.lit(None).cast("string"))
        .when(c("first_up.up_result") == "continue", "partial").otherwise("full").alias("kind"),
        caught.alias("t_caught_up"),
        F.round((t_up - c("t_down")) * F.lit(1000.0), 3).alias("downtime_ms"),
        F.round((caught - c("t_down")) * F.lit(1000.0), 3).alias("recovery_ms"),
        "attempts", "failed_full", "connect_failures",
        (c("failed_full") >= F.lit(LOOP_FAILED_FULL)).alias("loop"))


def build_streaks(r: Any) -> Any:
    """One row per stretch of a replica without a working link: its attempts from its first
    one, or from the one after a link came up, to the next one that brings the link up. The
    full syncs that failed there: two or more make a full-sync loop, whether the stretch began
    at a link loss or at the replica's first sync (a recovery only covers the former)."""
    from pyspark.sql import Window

    F = _F()
    c = F.col
    a = r.select(
        "replica", "master", F.coalesce(c("t_psync"), c("t_first_event")).alias("ts"),
        c("r_sync_id").alias("id"), c("t_link_up").isNotNull().alias("up"),
        (c("t_psync").isNotNull() & c("reply_result").isin(*FULL_RESULTS)
         & c("t_failed").isNotNull()).alias("full_failed"))
    before = Window.partitionBy("replica").orderBy("ts", "id") \
        .rowsBetween(Window.unboundedPreceding, -1)
    a = a.withColumn("seg", F.coalesce(F.sum(F.when(c("up"), 1).otherwise(0)).over(before),
                                       F.lit(0)))
    g = a.groupBy("replica", "seg").agg(
        F.sum(F.when(c("full_failed"), 1).otherwise(0)).alias("failed_full"),
        F.max(F.when(c("full_failed"), F.struct("ts", "id", "master"))).alias("last"))
    return g.select("replica", c("last.master").alias("master"), "seg", "failed_full",
                    (c("failed_full") >= F.lit(LOOP_FAILED_FULL)).alias("loop"))


# -- lag -----------------------------------------------------------------------------------------

def master_backlogs(m: Any) -> Any:
    """(master, backlog_size): the largest repl-backlog-size a master's decisions reported."""
    F = _F()
    return m.filter(F.col("backlog_size").isNotNull()).groupBy("master") \
        .agg(F.max("backlog_size").alias("backlog_size"))


def build_lag_series(lag_agg: Any, backlogs: Any, bucket_s: float) -> Any:
    """Per link, master run and time bucket: lag sample count, mean and max of lag_bytes and
    lag_ms, the master offset range and lag / backlog (from ``aggregate_all``'s groups of good
    lag samples: ``row`` null, ``bad`` null)."""
    F = _F()
    c = F.col
    g = lag_agg.withColumn("bucket", F.floor(c("fb") / F.lit(bucket_s)) * F.lit(bucket_s)) \
        .groupBy("master", "replica", "run_id", "bucket").agg(
            F.sum("n").alias("samples"), F.sum("nb").alias("nb"), F.sum("nm").alias("nm"),
            F.sum("lb_sum").alias("lag_bytes_sum"), F.max("lb_max").alias("lag_bytes_max"),
            F.sum("lm_sum").alias("lag_ms_sum"), F.max("lm_max").alias("lag_ms_max"),
            F.min("mro_min").alias("mro_min"), F.max("mro_max").alias("mro_max"),
            F.min("ts_min").alias("ts_min"), F.max("ts_max").alias("ts_max"))
    g = g.join(F.broadcast(backlogs), "master", "left")
    return g.withColumns({
        "lag_bytes_avg": c("lag_bytes_sum") / c("samples"),
        "lag_ms_avg": c("lag_ms_sum") / c("samples"),
        "lag_backlog_ratio_max": F.when(c("backlog_size") > 0,
                                        c("lag_bytes_max") / c("backlog_size"))})


def lag_sample(lag_agg: Any, backlogs: Any) -> Any:
    """The sampled lag samples (all of them when the sample step is 1), with lag / backlog
    (from the same lag groups as ``build_lag_series``)."""
    F = _F()
    c = F.col
    return lag_agg.filter(c("sid").isNotNull()).select(
        "master", "replica", c("ts_min").alias("ts"), c("lb_max").alias("lag_bytes"),
        c("lm_max").alias("lag_ms")).join(F.broadcast(backlogs), "master", "left") \
        .withColumn("ratio", F.when(c("backlog_size") > 0, c("lag_bytes") / c("backlog_size")))


def build_write_rates(series: Any, bucket_s: float) -> Any:
    """Per master: mean and peak write rate (bytes/s of replication stream) and backlog
    coverage in seconds at each."""
    F = _F()
    c = F.col
    per = series.groupBy("master", "run_id", "bucket").agg(
        (F.max("mro_max") - F.min("mro_min")).alias("delta"),
        (F.max("ts_max") - F.min("ts_min")).alias("span"),
        F.max("backlog_size").alias("backlog_size"))
    per = per.filter(c("span") > 0)
    g = per.groupBy("master").agg(
        F.sum("delta").alias("delta"), F.sum("span").alias("span"),
        F.max(F.when(c("span") >= F.lit(bucket_s / 2), c("delta") / c("span")))
        .alias("write_rate_peak"),
        F.max("backlog_size").alias("backlog_size"))
    avg = c("delta") / c("span")
    peak = c("write_rate_peak")
    return g.select("master", "backlog_size", avg.alias("write_rate_avg"), peak,
                    F.when(avg > 0, c("backlog_size") / avg).alias("coverage_s"),
                    F.when(peak > 0, c("backlog_size") / peak).alias("coverage_peak_s"))


# -- aggregates ----------------------------------------------------------------------------------

CURVE_POWERS = tuple(range(16, 45))  # backlog sizes 64 KiB .. 16 TiB for the advice curve


def stat_aggs(name: str, col: Any, qs: Sequence[float] = QUANTILES) -> list[Any]:
    F = _F()
    return [F.count(col).alias(f"{name}__n"),
            F.percentile_approx(col, list(qs), 10000).alias(f"{name}__q"),
            F.max(col).alias(f"{name}__max")]


def stat_from_row(row: dict[str, Any], name: str,
                  qs: Sequence[float] = QUANTILES) -> dict[str, Any]:
    n = row[f"{name}__n"]
    out: dict[str, Any] = {"count": int(n or 0)}
    q = row[f"{name}__q"] if n else None
    for i, p in enumerate(qs):
        out[f"p{round(p * 100):d}"] = _num(q[i]) if q else None
    out["max"] = _num(row[f"{name}__max"]) if n else None
    return out


def py_stat(values: Sequence[Any], qs: Sequence[float] = QUANTILES) -> dict[str, Any]:
    """The same shape as stat_from_row, exact (nearest rank), for small collected columns."""
    vs = sorted(v for v in values if v is not None)
    out: dict[str, Any] = {"count": len(vs)}
    for p in qs:
        out[f"p{round(p * 100):d}"] = _num(vs[max(1, math.ceil(p * len(vs))) - 1]) if vs \
            else None
    out["max"] = _num(vs[-1]) if vs else None
    return out


def _num(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return v
    return int(v) if isinstance(v, int) else v


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def _link_keys(df: Any) -> Any:
    F = _F()
    return df.filter(F.col("master").isNotNull() & F.col("replica").isNotNull())


def build_links(syncs: Any, recs: Any, series: Any, sample: Any, sev: Any,
                streaks: Any) -> Any:
    """Per link (master, replica): syncs by kind, failures, link downs, master-side losses, lag
    (counts and maxima from every sample, percentiles from the sample), recoveries, full-sync
    loops (a loop counts for the master of its last failed full sync)."""
    F = _F()
    c = F.col
    s = _link_keys(syncs).groupBy("master", "replica").agg(
        F.count(F.lit(1)).alias("syncs"),
        F.sum(F.when(c("kind") == "partial", 1).otherwise(0)).alias("partial"),
        F.sum(F.when(c("kind") == "full", 1).otherwise(0)).alias("full"),
        F.sum(F.when(c("status") == "failed", 1).otherwise(0)).alias("failed"))
    downs = _link_keys(sev.filter(c("event") == "link_down")).groupBy("master", "replica") \
        .agg(F.count(F.lit(1)).alias("link_downs"))
    lost = _link_keys(sev.filter((c("event") == "replica_lost") & not_benign(F))) \
        .groupBy("master", "replica").agg(F.count(F.lit(1)).alias("replica_lost"))
    lg = _link_keys(series).groupBy("master", "replica").agg(
        F.sum("samples").alias("lag_samples"), F.max("lag_bytes_max").alias("lag_bytes_max"),
        F.max("lag_ms_max").alias("lag_ms_max"),
        F.max("lag_backlog_ratio_max").alias("lag_backlog_ratio_max"))
    pq = _link_keys(sample).groupBy("master", "replica").agg(
        F.percentile_approx("lag_bytes", [0.5, 0.99], 10000).alias("lb"),
        F.percentile_approx("lag_ms", [0.5, 0.99], 10000).alias("lm"),
        F.percentile_approx("ratio", [0.99], 10000).alias("lr"))
    lg = lg.join(pq, ["master", "replica"], "left")
    lg = lg.withColumns({"lag_bytes_p50": c("lb")[0], "lag_bytes_p99": c("lb")[1],
                         "lag_ms_p50": c("lm")[0], "lag_ms_p99": c("lm")[1],
                         "lag_backlog_ratio_p99": c("lr")[0]}).drop("lb", "lm", "lr")
    rc = _link_keys(recs.filter(~c("intentional"))).groupBy("master", "replica").agg(
        F.count(F.lit(1)).alias("recoveries"),
        F.percentile_approx("recovery_ms", [0.5], 10000)[0].alias("recovery_ms_p50"),
        F.max("recovery_ms").alias("recovery_ms_max"))
    lp = _link_keys(streaks.filter(c("loop"))).groupBy("master", "replica").agg(
        F.count(F.lit(1)).alias("full_sync_loops"))
    out = s.join(downs, ["master", "replica"], "full_outer") \
        .join(lost, ["master", "replica"], "full_outer") \
        .join(lg, ["master", "replica"], "full_outer") \
        .join(rc, ["master", "replica"], "full_outer") \
        .join(lp, ["master", "replica"], "full_outer")
    zero = ["syncs", "partial", "full", "failed", "link_downs", "replica_lost", "lag_samples",
            "recoveries", "full_sync_loops"]
    out = out.fillna(0, subset=zero)
    return out.withColumn("partial_ratio", F.when((c("partial") + c("full")) > 0,
                                                  c("partial") / (c("partial") + c("full"))))


def build_nodes(syncs: Any, recs: Any, links: Any, rates: Any) -> Any:
    """Masters (syncs served, partial ratio, backlog, write rate, coverage, advice) and
    replicas (syncs, link downs, recoveries): one row per (node, role)."""
    F = _F()
    c = F.col
    need = F.when(c("backlog_fixable"), c("backlog_need").cast("double")).otherwise(
        F.when(c("backlog_need").isNotNull(), F.lit(SENTINEL)))

    def side(col: str, role: str) -> Any:
        return syncs.filter(c(col).isNotNull()).groupBy(c(col).alias("node")).agg(
            F.lit(role).alias("role"),
            F.count(F.lit(1)).alias("syncs"),
            F.sum(F.when(c("kind") == "partial", 1).otherwise(0)).alias("partial"),
            F.sum(F.when(c("kind") == "full", 1).otherwise(0)).alias("full"),
            F.sum(F.when(c("status") == "failed", 1).otherwise(0)).alias("failed"),
            F.sum(F.when(c("backlog_need").isNotNull(), 1).otherwise(0))
            .alias("offset_before_backlog"),
            F.percentile_approx(need, [0.9], 10000)[0].alias("advice_p90"))

    def lag_side(col: str, role: str) -> Any:
        return links.groupBy(c(col).alias("node")).agg(
            F.lit(role).alias("role"),
            F.sum("link_downs").alias("link_downs"),
            F.max("lag_bytes_max").alias("lag_bytes_max"),
            F.max("lag_ms_max").alias("lag_ms_max"),
            F.max("lag_backlog_ratio_max").alias("lag_backlog_ratio_max"))

    masters = side("master", "master").join(lag_side("master", "master"), ["node", "role"],
                                             "full_outer") \
        .join(rates.withColumnRenamed("master", "node").withColumn("role", F.lit("master")),
              ["node", "role"], "left")
    replicas = side("replica", "replica").join(lag_side("replica", "replica"), ["node", "role"],
                                                "full_outer")
    rc = recs.filter(~c("intentional")).groupBy(c("replica").alias("node")).agg(
        F.lit("replica").alias("role"), F.count(F.lit(1)).alias("recoveries"),
        F.percentile_approx("recovery_ms", [0.5], 10000)[0].alias("recovery_ms_p50"),
        F.max("recovery_ms").alias("recovery_ms_max"))
    replicas = replicas.join(rc, ["node", "role"], "full_outer")
    out = masters.unionByName(replicas, allowMissingColumns=True)
    out = out.withColumn("advice_p90", F.when(c("advice_p90") < F.lit(SENTINEL),
                                              c("advice_p90").cast("long")))
    out = out.withColumn("partial_ratio", F.when((c("partial") + c("full")) > 0,
                                                 c("partial") / (c("partial") + c("full"))))
    return out.fillna(0, subset=["syncs", "partial", "full", "failed", "link_downs",
                                 "offset_before_backlog", "recoveries"])


def build_buckets(syncs: Any, sev: Any, series: Any, bucket_s: float) -> Any:
    """Per time bucket: syncs by kind, failures, link downs, lag."""
    F = _F()
    c = F.col
    s = syncs.groupBy("bucket").agg(
        F.count(F.lit(1)).alias("syncs"),
        F.sum(F.when(c("kind") == "partial", 1).otherwise(0)).alias("partial"),
        F.sum(F.when(c("kind") == "full", 1).otherwise(0)).alias("full"),
        F.sum(F.when(c("status") == "failed", 1).otherwise(0)).alias("failed"))
    d = sev.filter(c("event") == "link_down") \
        .withColumn("bucket", F.floor(c("ts") / F.lit(bucket_s)) * F.lit(bucket_s)) \
        .groupBy("bucket").agg(F.count(F.lit(1)).alias("link_downs"))
    lg = series.groupBy("bucket").agg(
        F.sum("samples").alias("lag_samples"),
        F.max("lag_bytes_max").alias("lag_bytes_max"),
        F.max("lag_ms_max").alias("lag_ms_max"),
        (F.sum(c("lag_bytes_avg") * c("samples")) / F.sum("samples")).alias("lag_bytes_avg"),
        (F.sum(c("lag_ms_avg") * c("samples")) / F.sum("samples")).alias("lag_ms_avg"))
    out = s.join(d, "bucket", "full_outer").join(lg, "bucket", "full_outer") \
        .fillna(0, subset=["syncs", "partial", "full", "failed", "link_downs", "lag_samples"])
    return out.withColumn("partial_ratio", F.when((c("partial") + c("full")) > 0,
                                                  c("partial") / (c("partial") + c("full"))))


def convert(spark: Any, paths: Sequence[str], dest: str, fmt: str = "auto",
            since: float | None = None, until: float | None = None) -> dict[str, Any]:
    """NDJSON (or Parquet) logs -> Parquet of FIELDS at ``dest``, good events only; returns
    the counts (events, malformed by kind). One pass: the counts are observed while the
    Parquet is written (nothing is cached, so any size converts in bounded memory)."""
    from pyspark.sql import Observation

    F = _F()
    c = F.col
    cl = classify(read_raw(spark, paths, fmt), since, until)
    kinds = ("unparseable", "missing-required", "unknown-event")
    obs = Observation("pyrepl-convert")
    cl.observe(obs, F.count(F.when(c("bad").isNull(), 1)).alias("events"),
               *[F.count(F.when(c("bad") == k, 1)).alias(k) for k in kinds]) \
        .filter(c("bad").isNull()).drop("bad").write.mode("overwrite").parquet(dest)
    got = obs.get
    malformed = {k: int(got.get(k, 0)) for k in kinds}
    return {"events": int(got.get("events", 0)), "malformed_lines": sum(malformed.values()),
            "malformed": malformed, "parquet": dest}


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
    ev = classify(parse_lines(spark, paths, fmt), cfg.since, cfg.until)
    agg = aggregate_all(ev, fine, every).persist(keep)
    counts = agg.groupBy("bad", F.coalesce(c("row.event"), F.lit("replica_lag")).alias("event")) \
        .agg(F.sum("n").alias("n"), F.min("ts_min").alias("t0"), F.max("ts_max").alias("t1")) \
        .collect()
    events_by_type: dict[str, int] = {}
    malformed: dict[str, int] = {"unparseable": 0, "missing-required": 0, "unknown-event": 0}
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
    sev = with_link(agg.filter(c("row").isNotNull()).select("row.*")).persist(keep)
    lag_agg = agg.filter(c("bad").isNull() & c("row").isNull()).drop("bad", "row") \
        .persist(keep)
    sev.count()
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
    }}
    link_rows = [x.asDict() for x in links.collect()]  # one row per link: small
    masters = {x["master"] for x in link_rows}
    replicas = {x["replica"] for x in link_rows}
    summary["fleet"] = {"nodes": len(masters | replicas), "masters": len(masters),
                        "replicas": len(replicas), "links": len(link_rows)}
    summary.update(summarize(syncs, recs, streaks, sev, rates, lag_row, backlogs))
    tables = Tables(syncs, recs, series, links, nodes, buckets, rates)
    return JobResult(summary, tables, {"links": link_rows})


def _count_dims(df: Any, dims: list[tuple[str, Any, Any]]) -> dict[str, dict[str, int]]:
    """{dim: {value: rows}} for several (name, condition, column) in one job."""
    F = _F()
    arr = F.array(*[F.when(cond, F.struct(F.lit(name).alias("d"),
                                          F.coalesce(col.cast("string"), F.lit("unknown"))
                                          .alias("v")))
                    for name, cond, col in dims])
    rows = df.select(F.explode(arr).alias("x")).filter(F.col("x").isNotNull()) \
        .groupBy("x.d", "x.v").count().collect()
    out: dict[str, dict[str, int]] = {name: {} for name, _, _ in dims}
    for d, v, n in sorted(rows, key=lambda r: (r[0], -r[2], r[1])):
        out[d][v] = int(n)
    return out


def summarize(syncs: Any, recs: Any, streaks: Any, sev: Any, rates: Any,
              lag_row: dict[str, Any], backlogs: Any) -> dict[str, Any]:
    """The fleet-wide metrics of summary.json (everything but "input" and "fleet")."""
    F = _F()
    c = F.col
    full = c("kind") == "full"
    part = c("kind") == "partial"
    ok_full = full & (c("status") == "ok")
    fixable_need = F.when(c("backlog_fixable"), c("backlog_need"))
    need = F.when(c("backlog_fixable"), c("backlog_need").cast("double")).otherwise(
        F.when(c("backlog_need").isNotNull(), F.lit(SENTINEL)))
    # One job for everything about syncs: each sync is seen through several "views" (all,
    # by result, by reason, ...), grouped by (view, key); each aggregate reads its own view.
    failed = c("status") == "failed"

    def view(name: str, cond: Any, key: Any) -> Any:
        return F.when(cond, F.struct(F.lit(name).alias("view"),
                                     F.coalesce(key.cast("string"), F.lit("unknown"))
                                     .alias("key")))

    views = F.array(view("all", F.lit(True), F.lit("")),
                    view("result", F.lit(True), c("result")),
                    view("reason", full, c("reason")), view("cause", full, c("cause")),
                    view("mode", full, c("mode")), view("fail_reason", failed, c("fail_reason")),
                    view("buffer", full & c("buffer_kind").isNotNull(), c("buffer_kind")))
    v = syncs.select("*", F.explode(views).alias("v")).filter(c("v").isNotNull()) \
        .select("*", c("v.view").alias("view"), c("v.key").alias("key"))
    is_all, is_mode, is_buf = (c("view") == x for x in ("all", "mode", "buffer"))
    fixable_need = F.when(is_all & c("backlog_fixable"), c("backlog_need"))
    need = F.when(is_all, F.when(c("backlog_fixable"), c("backlog_need").cast("double"))
                  .otherwise(F.when(c("backlog_need").isNotNull(), F.lit(SENTINEL))))
    aggs = [F.count(F.lit(1)).alias("n"),
            F.sum(F.when(is_all & part, 1).otherwise(0)).alias("partial"),
            F.sum(F.when(is_all & full, 1).otherwise(0)).alias("full"),
            F.sum(F.when(is_all & failed, 1).otherwise(0)).alias("failed"),
            F.sum(F.when(is_all & full & failed, 1).otherwise(0)).alias("failed_full"),
            F.sum(F.when(is_all & full, c("rdb_bytes"))).alias("rdb_bytes_total"),
            F.count(F.when(is_all, c("backlog_need"))).alias("obb"),
            F.sum(F.when(is_all & c("backlog_need").isNotNull() & ~c("backlog_fixable"), 1)
                  .otherwise(0)).alias("unfixable"),
            F.percentile_approx(need, list(ADVICE_QUANTILES), 10000).alias("need_q"),
            F.max(fixable_need).alias("max_need")]
    aggs += [F.sum(F.when(fixable_need <= F.lit(1 << k), 1).otherwise(0)).alias(f"le{k}")
             for k in CURVE_POWERS]
    for ph in ("snapshot", "transfer", "load", "drain", "total"):
        aggs += stat_aggs(ph, F.when(is_all & ok_full, c(f"{ph}_ms")))
        aggs += stat_aggs(f"mode_{ph}", F.when(is_mode & (c("status") == "ok"), c(f"{ph}_ms")))
    aggs += stat_aggs("rdb_bytes", F.when(is_all & full, c("rdb_bytes")))
    aggs += stat_aggs("throughput", F.when(is_all & full, c("throughput_bps")))
    aggs += stat_aggs("partial_bytes", F.when(is_all & part, c("partial_bytes")))
    aggs += stat_aggs("backlog_fraction", F.when(is_all & part, c("backlog_fraction")))
    aggs += stat_aggs("peak", F.when(is_buf, c("buffer_peak")))
    aggs += [F.count(F.when(is_buf, c("near_limit"))).alias("with_limit"),
             F.sum(F.when(is_buf & c("near_limit"), 1).otherwise(0)).alias("near")]
    grouped = [x.asDict() for x in v.groupBy("view", "key").agg(*aggs).collect()]
    row = next((x for x in grouped if x["view"] == "all"), None)
    if row is None:  # no syncs at all
        row = {"n": 0, "partial": 0, "full": 0, "failed": 0, "failed_full": 0, "obb": 0,
               "unfixable": 0, "rdb_bytes_total": None, "need_q": None, "max_need": None,
               **{f"le{k}": 0 for k in CURVE_POWERS}}
        for name in ("snapshot", "transfer", "load", "drain", "total", "rdb_bytes",
                     "throughput", "partial_bytes", "backlog_fraction"):
            row.update({f"{name}__n": 0, f"{name}__q": None, f"{name}__max": None})
    row["syncs"] = row["n"]
    n_part, n_full = int(row["partial"] or 0), int(row["full"] or 0)
    dims: dict[str, dict[str, int]] = {d: {} for d in ("result", "reason", "cause", "mode",
                                                       "fail_reason")}
    by_mode: dict[str, Any] = {}
    buf: dict[str, Any] = {}
    for d in sorted(grouped, key=lambda x: (x["view"], -x["n"], x["key"])):
        if d["view"] in dims:
            dims[d["view"]][d["key"]] = int(d["n"])
        if d["view"] == "mode":
            by_mode[d["key"]] = {"count": int(d["n"]), "durations_ms": {
                ph: stat_from_row(d, f"mode_{ph}")
                for ph in ("snapshot", "transfer", "load", "drain", "total")}}
        if d["view"] == "buffer":
            near, wl = int(d["near"] or 0), int(d["with_limit"])
            buf[d["key"]] = {"syncs": int(d["n"]), "peak_bytes": stat_from_row(d, "peak"),
                             "with_limit": wl, "over_80pct": near,
                             "over_80pct_share": _ratio(near, wl)}

    rec = recs.filter(~c("intentional"))
    rrow = rec.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.when(c("t_up").isNull(), 1).otherwise(0)).alias("not_up"),
        F.sum(F.when(c("t_up").isNotNull() & c("t_caught_up").isNull(), 1).otherwise(0))
        .alias("not_caught_up"),
        F.sum("connect_failures").alias("connect_failures"),
        *stat_aggs("recovery", c("recovery_ms")),
        *stat_aggs("recovery_partial", F.when(c("kind") == "partial", c("recovery_ms"))),
        *stat_aggs("recovery_full", F.when(c("kind") == "full", c("recovery_ms"))),
        *stat_aggs("downtime", c("downtime_ms")),
        *stat_aggs("attempts", F.when(c("t_up").isNotNull(), c("attempts"))),
    ).collect()[0].asDict()

    losses = _count_dims(sev, [
        ("link_down", c("event") == "link_down", c("reason")),
        ("replica_lost", (c("event") == "replica_lost") & not_benign(F), c("reason")),
    ])
    return {
        "psync": {
            "syncs": int(row["syncs"]), "by_result": dims["result"],
            "partial": n_part, "full": n_full,
            "partial_ratio": _ratio(n_part, n_part + n_full),
        },
        "full_syncs": {
            "count": n_full,
            "by_reason": dims["reason"], "by_cause": dims["cause"], "by_mode": dims["mode"],
            "failed": int(row["failed_full"] or 0),
            "durations_ms": {ph: stat_from_row(row, ph)
                             for ph in ("snapshot", "transfer", "load", "drain", "total")},
            "by_mode_durations": dict(sorted(by_mode.items())),
            "rdb_bytes": stat_from_row(row, "rdb_bytes"),
            "rdb_bytes_total": int(row["rdb_bytes_total"] or 0),
            "throughput_bytes_per_s": stat_from_row(row, "throughput"),
        },
        "partial_syncs": {
            "count": n_part,
            "bytes": stat_from_row(row, "partial_bytes"),
            "backlog_fraction": stat_from_row(row, "backlog_fraction"),
        },
        "failures": {
            "failed_syncs": int(row["failed"] or 0),
            "by_reason": dims["fail_reason"],
            "attempts_per_recovery": stat_from_row(rrow, "attempts"),
            "full_sync_loops": streaks.filter(c("loop")).count(),
            "connect_failures": int(rrow["connect_failures"] or 0),
        },
        "buffers": dict(sorted(buf.items())),
        "links": {
            "link_downs": sum(losses["link_down"].values()),
            "link_downs_by_reason": losses["link_down"],
            "replica_lost_by_reason": losses["replica_lost"],
            "downtime_ms": stat_from_row(rrow, "downtime"),
        },
        "recovery": {
            "count": int(rrow["n"]),
            "not_recovered": int(rrow["not_up"] or 0),
            "not_caught_up": int(rrow["not_caught_up"] or 0),
            "ms": stat_from_row(rrow, "recovery"),
            "partial_ms": stat_from_row(rrow, "recovery_partial"),
            "full_ms": stat_from_row(rrow, "recovery_full"),
        },
        "lag": {
            "samples": int(lag_row["samples"] or 0),
            "bytes": stat_from_row(lag_row, "lag_bytes"),
            "ms": stat_from_row(lag_row, "lag_ms"),
            "backlog_ratio": stat_from_row(lag_row, "lag_backlog_ratio"),
        },
        "backlog": backlog_advice(row, n_part, n_full, backlogs, rates),
    }


def curve_sizes(current: int | None, max_need: float | None) -> list[int]:
    """Backlog sizes for the curve: powers of two from half the smallest configured size to the
    first one that holds the largest need (within 64 KiB .. 16 TiB)."""
    lo = max(1 << CURVE_POWERS[0], current or (1 << 20))
    k = max(CURVE_POWERS[0], int(math.floor(math.log2(lo))) - 1)
    hi = max(float(lo) * 2, max_need or 0.0)
    out = []
    while k <= CURVE_POWERS[-1]:
        out.append(1 << k)
        if (1 << k) >= hi:
            break
        k += 1
    return out


def backlog_advice(row: dict[str, Any], n_part: int, n_full: int, backlogs: Any, rates: Any
                   ) -> dict[str, Any]:
    """Advice from the offset-before-backlog syncs (quantiles and curve come from the syncs
    aggregate ``row``); coverage from the per-master write rates (collected: one row per
    master)."""
    n = int(row["obb"] or 0)
    adv: dict[str, Any] = {}
    for i, p in enumerate(ADVICE_QUANTILES):
        v = row["need_q"][i] if n and row["need_q"] else None
        adv[f"p{round(p * 100):d}"] = int(v) if v is not None and v < SENTINEL else None
    sizes_by_master = [x["backlog_size"] for x in backlogs.collect()]
    lo = min(sizes_by_master) if sizes_by_master else None
    hi = max(sizes_by_master) if sizes_by_master else None
    total = n_part + n_full
    curve = []
    for s in curve_sizes(lo, row["max_need"]):
        k = int(row[f"le{s.bit_length() - 1}"] or 0)
        curve.append({"backlog_bytes": s, "syncs_avoided": k,
                      "partial_ratio": _ratio(n_part + k, total)})
    rr = [x.asDict() for x in rates.collect()]
    return {
        "offset_before_backlog_syncs": n,
        "unfixable": int(row["unfixable"] or 0),
        "advice_bytes": adv,
        "current_backlog_bytes": {"min": lo, "max": hi},
        "curve": curve,
        "coverage_s": py_stat([x["coverage_s"] for x in rr]),
        "coverage_at_peak_s": py_stat([x["coverage_peak_s"] for x in rr]),
        "write_rate_bytes_per_s": py_stat([x["write_rate_avg"] for x in rr]),
        "peak_write_rate_bytes_per_s": py_stat([x["write_rate_peak"] for x in rr]),
    }
