"""Syncs: one row per PSYNC/SYNC attempt, from the master's half and the replica's half.

Theory of operation: a link is (master, replica): a master-side event names the replica in
``peer``, a replica-side event names the master. Its master half is the master's events sharing
a ``sync_id`` (decision, fork, RDB sent, partial sent, online, lost); its replica half is the
replica's events sharing the replica's own ``sync_id`` (PSYNC sent, reply, first RDB byte, RDB
received, loaded, buffer drained, link up, caught up, failed). The halves are joined on the
link, the requested replid/offset and the time (at most ``match_window_s`` apart, mutual
nearest wins); either half alone still makes a row. Phases come from the replica's timestamps:
snapshot = PSYNC sent -> first RDB byte, transfer = first byte -> RDB received, load = received
-> loaded, drain = link up -> caught up (or buffer drained), total = PSYNC sent -> caught up. A
full sync's *cause* is its PSYNC reason, except ``output-buffer-limit`` when the master dropped
the link's previous sync or session for its output buffer."""

from __future__ import annotations

from typing import Any

from pyrepl.analytics.schema import (
    BENIGN_LOST,
    FULL_RESULTS,
    MASTER_EVENTS,
    MATCH_WINDOW_S,
    NEAR_LIMIT,
    OFFSET_BEFORE_BACKLOG,
    OUTPUT_BUFFER_LIMIT,
    REPLICA_BUFFERED,
)
from pyrepl.analytics.sql import _F


def with_link(ev: Any) -> Any:
    """Adds ``master`` and ``replica``: the link the event belongs to."""
    F = _F()
    is_m = F.col("event").isin(*MASTER_EVENTS)
    return ev.withColumns({"master": F.when(is_m, F.col("node")).otherwise(F.col("peer")),
                           "replica": F.when(is_m, F.col("peer")).otherwise(F.col("node"))})


def linked(row: dict[str, Any]) -> dict[str, Any]:
    """``with_link`` of one event on the driver (``follow``'s state): its non-null fields
    and its link, as ``job.event_dict`` gives a collected row of ``with_link``'s."""
    e = {k: v for k, v in row.items() if v is not None}
    node, peer = e.get("node"), e.get("peer")
    is_m = e.get("event") in MASTER_EVENTS
    e["master"], e["replica"] = (node, peer) if is_m else (peer, node)
    return e


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
        _pick(F, dec, "offset").alias("m_resume_from"),
        _pick(F, e.isin("fullsync_fork", "fullsync_rdb_sent", "replica_online"), "mode")
        .alias("m_mode"),
        _pick(F, e == "fullsync_rdb_sent", "bytes").alias("m_rdb_bytes"),
        _pick(F, e == "partial_sent", "bytes").alias("partial_bytes"),
        _tmin(F, e == "replica_online").alias("t_online"),
        _pick(F, e == "replica_online", "buffer_peak").alias("m_online_peak"),
        _pick(F, e == "replica_online", "spilled").alias("m_spilled"),
        _pick(F, e == "fullsync_fork", "queued_ms").alias("m_queued_ms"),
        _pick(F, e.isin("fullsync_fork", "fullsync_rdb_sent"), "max_bandwidth")
        .alias("m_max_bandwidth"),
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
        _pick(F, e == "buffer_drained", "spilled").alias("r_spilled"),
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
                                   F.when(result == "rdbchannel", F.lit("rdb-channel"))
                                   .when(result == "dualchannel", F.lit("dual-channel"))))
    status = (F.when(c("t_failed").isNotNull(), "failed")
              .when(c("t_link_up").isNotNull() | c("t_online").isNotNull(), "ok")
              .when(c("t_lost").isNotNull(), "failed").otherwise("incomplete"))
    ts = F.coalesce(c("t_psync"), c("t_decision"))

    def ms(a: Any, b: Any) -> Any:
        return F.when(full, F.round((a - b) * F.lit(1000.0), 3))

    transfer = ms(c("t_rdb_received"), c("t_first_byte"))
    rdb_bytes = F.when(full, F.coalesce(c("r_rdb_bytes"), c("m_rdb_bytes")))
    rdbch = mode.isin(*REPLICA_BUFFERED)
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
        "lost_reason",
        # bytes of the sync's buffer that went to disk (repl-full-sync-spill-threshold): the
        # buffer its kind names first, else the other side's
        F.when(full, F.when(rdbch, F.coalesce(c("r_spilled"), c("m_spilled")))
               .otherwise(F.coalesce(c("m_spilled"), c("r_spilled")))).alias("spilled"),
        # repl-full-sync-max-concurrent's wait for a turn; repl-sync-max-bandwidth's pace
        F.when(full, c("m_queued_ms")).alias("queued_ms"),
        F.when(full, c("m_max_bandwidth")).alias("max_bandwidth"),
        # a resumed full sync: the payload byte it went on from (the bytes not sent again)
        F.when(result == "resume", c("m_resume_from")).alias("resumed_from"))
