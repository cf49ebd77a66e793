"""The per-link, per-node and per-bucket tables the report and the summary are built from."""

from __future__ import annotations

from typing import Any

from pyrepl.analytics.advice import SENTINEL
from pyrepl.analytics.sql import _F
from pyrepl.analytics.syncs import not_benign


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
