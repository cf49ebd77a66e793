"""Recoveries and full-sync loops, per replica.

Theory of operation: a *recovery* starts at a replica's ``link_down`` (other than
``promoted``/``replicaof``) and ends at its first later ``link_up``; it counts the PSYNC
attempts in between, the failed full ones and the connection failures, and its recovery time
runs to that sync's ``caught_up``. A *full-sync loop* is two or more failed full syncs in one
stretch of a replica without a working link (``build_streaks``: from a link loss, or from the
replica's first sync, to a link up)."""

from __future__ import annotations

from typing import Any

from pyrepl.analytics.schema import (
    FULL_RESULTS,
    LOOP_FAILED_FULL,
)
from pyrepl.analytics.sql import _F
from pyrepl.analytics.syncs import _pick, _tmin

INTENTIONAL_DOWN = ("promoted", "replicaof")


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
    at a link loss or at the replica's first sync (a recovery only covers the former). Also
    when the first and the last of them started, why they failed, the attempts, and whether
    a link up ended the stretch."""
    from pyspark.sql import Window

    F = _F()
    c = F.col
    a = r.select(
        "replica", "master", F.coalesce(c("t_psync"), c("t_first_event")).alias("ts"),
        c("r_sync_id").alias("id"), c("t_link_up").isNotNull().alias("up"),
        (c("t_psync").isNotNull() & c("reply_result").isin(*FULL_RESULTS)
         & c("t_failed").isNotNull()).alias("full_failed"), "fail_reason")
    before = Window.partitionBy("replica").orderBy("ts", "id") \
        .rowsBetween(Window.unboundedPreceding, -1)
    a = a.withColumn("seg", F.coalesce(F.sum(F.when(c("up"), 1).otherwise(0)).over(before),
                                       F.lit(0)))
    g = a.groupBy("replica", "seg").agg(
        F.sum(F.when(c("full_failed"), 1).otherwise(0)).alias("failed_full"),
        F.max(F.when(c("full_failed"), F.struct("ts", "id", "master"))).alias("last"),
        _tmin(F, c("full_failed")).alias("t_first_failed"),
        F.count(F.lit(1)).alias("attempts"), F.max("up").alias("recovered"),
        F.array_sort(F.collect_set(F.when(c("full_failed"), c("fail_reason"))))
        .alias("fail_reasons"))
    return g.select("replica", c("last.master").alias("master"), "seg", "failed_full",
                    (c("failed_full") >= F.lit(LOOP_FAILED_FULL)).alias("loop"),
                    "t_first_failed", c("last.ts").alias("t_last_failed"), "attempts",
                    "recovered", "fail_reasons")
