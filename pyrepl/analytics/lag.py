"""Lag and write rates: lag samples aggregated per link and time bucket, and each master's
write rate, from the offsets in those samples (``offset + lag_bytes`` is
``master_repl_offset``), per run (offsets restart with the process) and bucket."""

from __future__ import annotations

from typing import Any

from pyrepl.analytics.read import LAG_MS_FRAC
from pyrepl.analytics.sql import _F

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
    g = series_groups(lag_agg, bucket_s).join(F.broadcast(backlogs), "master", "left")
    return g.withColumns({
        "lag_bytes_avg": c("lag_bytes_sum") / c("samples"),
        "lag_ms_avg": c("lag_ms_sum") / c("samples"),
        "lag_backlog_ratio_max": F.when(c("backlog_size") > 0,
                                        c("lag_bytes_max") / c("backlog_size"))})


def series_groups(lag_agg: Any, bucket_s: float) -> Any:
    """The lag groups summed per link, master run and time bucket (``build_lag_series``
    without the master's backlog). Every sum is of integers and every other aggregate a
    minimum or maximum (``read.aggregate_all``), so a row is the same whether the groups were
    per 10 s or per this bucket already, in any order; lag_ms_sum is then one function of the
    exact integer sums (the non-finite values' sum when there are any, as a double sum gives)."""
    F = _F()
    c = F.col
    odd = F.sum("lm_odd")
    exact = F.sum("lm_int").cast("double") \
        + F.sum("lm_frac").cast("double") * F.lit(1.0 / LAG_MS_FRAC)
    return lag_agg.withColumn("bucket", F.floor(c("fb") / F.lit(bucket_s)) * F.lit(bucket_s)) \
        .groupBy("master", "replica", "run_id", "bucket").agg(
            F.sum("n").alias("samples"), F.sum("nb").alias("nb"), F.sum("nm").alias("nm"),
            F.sum("lb_sum").alias("lag_bytes_sum"), F.max("lb_max").alias("lag_bytes_max"),
            F.coalesce(odd, exact).alias("lag_ms_sum"), F.max("lm_max").alias("lag_ms_max"),
            F.min("mro_min").alias("mro_min"), F.max("mro_max").alias("mro_max"),
            F.min("ts_min").alias("ts_min"), F.max("ts_max").alias("ts_max"))


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
