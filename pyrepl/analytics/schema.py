"""The analytics' view of the sync-event schema (shared by the Spark job, the oracle in the
tests and the synthetic fleet generator).

Theory of operation: ``pyrepl.events.FIELDS`` is the one schema; :func:`spark_schema` turns it
into a Spark ``StructType`` (plus the corrupt-record column the JSON reader fills for lines it
cannot parse), so the job never infers a schema and never drifts from the writer. Everything
else here is plain Python and imports without pyspark: which side logs each event, the PSYNC
results that mean "full sync", and the ordering rank used to break timestamp ties the same way
in Spark and in the pure-Python oracle.
"""

from __future__ import annotations

from typing import Any

from pyrepl.events import EVENTS, FIELDS

CORRUPT = "_corrupt_record"

# Which side of a link logs each event (the events.py comments; ``role`` says the same).
MASTER_EVENTS = ("psync_decision", "fullsync_fork", "fullsync_rdb_sent", "partial_sent",
                 "replica_online", "replica_lost", "replica_lag")
REPLICA_EVENTS = tuple(e for e in EVENTS if e not in MASTER_EVENTS)
# Periodic state samples (``pyrepl collect``): counted per event type and in the time span, but
# no row of their own (like lag samples, they can be the bulk of a log).
COUNTED_ONLY = ("info_sample",)

# psync_decision / psync_reply results. "sync" is a replica's fallback to the old SYNC command
# (always a full sync); "try-later" (-NOMASTERLINK / -LOADING) is no sync at all.
PARTIAL_RESULTS = ("continue",)
FULL_RESULTS = ("full", "rdbchannel", "dualchannel", "sync")

MODES = ("rdb-channel", "dual-channel", "diskless", "disk")
# a full sync's mode from its decision's result when no event named it
RESULT_MODE = {"rdbchannel": "rdb-channel", "dualchannel": "dual-channel"}
# modes where the replica buffers the stream during the transfer (the master does otherwise)
REPLICA_BUFFERED = ("rdb-channel", "dual-channel")
PHASES = ("snapshot", "transfer", "load", "drain", "total")
OFFSET_BEFORE_BACKLOG = "offset-before-backlog"
OUTPUT_BUFFER_LIMIT = "output-buffer-limit"
# replica_lost reasons that end a link normally (the rdb channel closes after its transfer).
BENIGN_LOST = ("rdb-only-done",)

# Replica-side events in a recovery, in lifecycle order: ties on ts sort by this rank.
RECOVERY_RANK = {"link_down": 0, "attempt": 1}

# A master's psync_decision and a replica's psync_sent are the same sync when they name the
# same link, ask for the same replid/offset and are at most this far apart (clock skew).
MATCH_WINDOW_S = 5.0
# Buffer peaks at or above this share of their limit count as "near the limit".
NEAR_LIMIT = 0.8
# A recovery with at least this many failed full-sync attempts is a full-sync loop.
LOOP_FAILED_FULL = 2
QUANTILES = (0.5, 0.9, 0.99)
ADVICE_QUANTILES = (0.5, 0.9, 0.95, 0.99)


def field_names() -> list[str]:
    return [name for name, _, _ in FIELDS]


def side_of(event: str) -> str:
    return "master" if event in MASTER_EVENTS else "replica"


def spark_schema(with_corrupt: bool = True) -> Any:
    """``FIELDS`` as a Spark StructType (imports pyspark)."""
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "long": T.LongType(), "double": T.DoubleType()}
    fields = [T.StructField(name, types[t], True) for name, t, _ in FIELDS]
    if with_corrupt:
        fields.append(T.StructField(CORRUPT, T.StringType(), True))
    return T.StructType(fields)


# The output tables' columns and types, in order (the Spark steps produce exactly these; the
# driver-side finish builds its tables with them). Types: string, bigint, double, boolean.
TABLE_COLUMNS: dict[str, str] = {
    "syncs": "sync_key string, master string, replica string, m_sync_id string, "
             "r_sync_id string, ts double, bucket double, result string, kind string, "
             "reason string, cause string, mode string, status string, fail_reason string, "
             "req_replid string, req_offset bigint, gap bigint, backlog_size bigint, "
             "backlog_histlen bigint, backlog_need bigint, backlog_fixable boolean, "
             "snapshot_ms double, transfer_ms double, load_ms double, drain_ms double, "
             "total_ms double, rdb_bytes bigint, throughput_bps double, keys bigint, "
             "partial_bytes bigint, backlog_fraction double, buffer_kind string, "
             "buffer_peak bigint, buffer_limit bigint, near_limit boolean, lost_reason string, "
             "spilled bigint, queued_ms double, max_bandwidth bigint, resumed_from bigint",
    "recoveries": "replica string, master string, rec bigint, t_down double, "
                  "down_reason string, intentional boolean, t_up double, up_sync_id string, "
                  "up_master string, kind string, t_caught_up double, downtime_ms double, "
                  "recovery_ms double, attempts bigint, failed_full bigint, "
                  "connect_failures bigint, loop boolean",
    "lag_series": "master string, replica string, run_id string, bucket double, "
                  "samples bigint, nb bigint, nm bigint, lag_bytes_sum bigint, "
                  "lag_bytes_max bigint, lag_ms_sum double, lag_ms_max double, mro_min bigint, "
                  "mro_max bigint, ts_min double, ts_max double, backlog_size bigint, "
                  "lag_bytes_avg double, lag_ms_avg double, lag_backlog_ratio_max double",
    "links": "master string, replica string, syncs bigint, partial bigint, full bigint, "
             "failed bigint, link_downs bigint, replica_lost bigint, lag_samples bigint, "
             "lag_bytes_max bigint, lag_ms_max double, lag_backlog_ratio_max double, "
             "lag_bytes_p50 bigint, lag_bytes_p99 bigint, lag_ms_p50 double, lag_ms_p99 double, "
             "lag_backlog_ratio_p99 double, recoveries bigint, recovery_ms_p50 double, "
             "recovery_ms_max double, full_sync_loops bigint, partial_ratio double",
    "nodes": "node string, role string, syncs bigint, partial bigint, full bigint, "
             "failed bigint, offset_before_backlog bigint, advice_p90 bigint, "
             "link_downs bigint, lag_bytes_max bigint, lag_ms_max double, "
             "lag_backlog_ratio_max double, backlog_size bigint, write_rate_avg double, "
             "write_rate_peak double, coverage_s double, coverage_peak_s double, "
             "recoveries bigint, recovery_ms_p50 double, recovery_ms_max double, "
             "partial_ratio double",
    "buckets": "bucket double, syncs bigint, partial bigint, full bigint, failed bigint, "
               "link_downs bigint, lag_samples bigint, lag_bytes_max bigint, "
               "lag_ms_max double, lag_bytes_avg double, lag_ms_avg double, "
               "partial_ratio double",
    "write_rates": "master string, backlog_size bigint, write_rate_avg double, "
                   "write_rate_peak double, coverage_s double, coverage_peak_s double",
    # a Redis Cluster's (pyrepl.analytics.shards)
    "shards": "shard string, shard_id string, master string, replicas string, nodes bigint, "
              "slots string, slot_count bigint, failovers bigint, last_failover_ts double, "
              "last_failover_kind string, node_fail_incidents bigint",
    "failovers": "ts double, shard string, node string, node_id string, old_master string, "
                 "old_master_id string, kind string, config_epoch bigint, votes bigint, "
                 "election_ms double, fail_to_failover_ms double",
}


def table_columns(name: str) -> list[tuple[str, str]]:
    """[(column, type)] of an output table."""
    return [tuple(x.strip().split(" ")) for x in TABLE_COLUMNS[name].split(",")]  # type: ignore[misc]


def table_struct(name: str) -> Any:
    """An output table's columns as a Spark StructType (imports pyspark)."""
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "bigint": T.LongType(), "double": T.DoubleType(),
             "boolean": T.BooleanType()}
    return T.StructType([T.StructField(n, types[t], True) for n, t in table_columns(name)])
