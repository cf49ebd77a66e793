"""The fleet-wide metrics of summary.json (everything but "input" and "fleet")."""

from __future__ import annotations

from typing import Any

from pyrepl.analytics.advice import CURVE_POWERS, SENTINEL, backlog_advice
from pyrepl.analytics.schema import (
    ADVICE_QUANTILES,
)
from pyrepl.analytics.sql import _F
from pyrepl.analytics.stats import _ratio, stat_aggs, stat_from_row
from pyrepl.analytics.syncs import not_benign

# -- aggregates ----------------------------------------------------------------------------------




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
    queued = is_all & full & (c("queued_ms") > 0)
    paced = is_all & full & (c("max_bandwidth") > 0)
    resumed = is_all & (c("result") == "resume")
    aggs += stat_aggs("queued", F.when(queued, c("queued_ms")))
    aggs += stat_aggs("paced_throughput", F.when(paced, c("throughput_bps")))
    aggs += [F.sum(F.when(queued, 1).otherwise(0)).alias("queued_n"),
             F.sum(F.when(paced, 1).otherwise(0)).alias("paced_n"),
             F.sum(F.when(resumed, 1).otherwise(0)).alias("resumed_n"),
             F.sum(F.when(resumed, c("resumed_from"))).alias("resumed_b")]
    aggs += stat_aggs("partial_bytes", F.when(is_all & part, c("partial_bytes")))
    aggs += stat_aggs("backlog_fraction", F.when(is_all & part, c("backlog_fraction")))
    aggs += stat_aggs("peak", F.when(is_buf, c("buffer_peak")))
    aggs += [F.count(F.when(is_buf, c("near_limit"))).alias("with_limit"),
             F.sum(F.when(is_buf & c("near_limit"), 1).otherwise(0)).alias("near"),
             F.sum(F.when(is_buf & (c("spilled") > 0), 1).otherwise(0)).alias("spilled_n"),
             F.sum(F.when(is_buf, F.coalesce(c("spilled"), F.lit(0)))).alias("spilled_b")]
    grouped = [x.asDict() for x in v.groupBy("view", "key").agg(*aggs).collect()]
    row = next((x for x in grouped if x["view"] == "all"), None)
    if row is None:  # no syncs at all
        row = {"n": 0, "partial": 0, "full": 0, "failed": 0, "failed_full": 0, "obb": 0,
               "unfixable": 0, "rdb_bytes_total": None, "need_q": None, "max_need": None,
               **{f"le{k}": 0 for k in CURVE_POWERS}}
        row.update({"queued_n": 0, "paced_n": 0, "resumed_n": 0, "resumed_b": 0})
        for name in ("snapshot", "transfer", "load", "drain", "total", "rdb_bytes",
                     "throughput", "partial_bytes", "backlog_fraction", "queued",
                     "paced_throughput"):
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
                             "over_80pct_share": _ratio(near, wl),
                             "spilled_syncs": int(d["spilled_n"] or 0),
                             "spilled_bytes": int(d["spilled_b"] or 0)}

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
            "queued": int(row["queued_n"] or 0),
            "queued_ms": stat_from_row(row, "queued"),
            "paced": int(row["paced_n"] or 0),
            "paced_throughput_bytes_per_s": stat_from_row(row, "paced_throughput"),
            "resumed": int(row["resumed_n"] or 0),
            "resumed_bytes": int(row["resumed_b"] or 0),
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
        "backlog": backlog_advice(row, n_part, n_full,
                                  [x["backlog_size"] for x in backlogs.collect()],
                                  [x.asDict() for x in rates.collect()]),
    }
