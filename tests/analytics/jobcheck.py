"""The Spark job checked against the pure-Python oracle: a job's result as rows
(``results``), the job run on NDJSON lines both ways (finished on the driver and by the
Spark steps) and compared with the oracle (``run_both``, ``check``, ``same_finish``)."""

from __future__ import annotations

import json
import os
import tempfile

from pyrepl.analytics.job import JobConfig, run
from pyrepl.analytics.rowtable import as_frame
from tests.analytics.compare import assert_summary_matches, assert_tables_equal, rank_ok
from tests.analytics.oracle import compute


def rows(table) -> list[dict]:
    """An output table's rows (a DataFrame, or the driver finish's ``RowTable`` made one)."""
    return [r.asDict(recursive=True) for r in as_frame(table).collect()]


TABLES = ("syncs", "recoveries", "lag_series", "write_rates", "links", "nodes", "buckets")
KEYS = {"syncs": ("master", "replica", "m_sync_id", "r_sync_id"), "recoveries": ("replica", "rec"),
        "lag_series": ("master", "replica", "run_id", "bucket"), "write_rates": ("master",),
        "links": ("master", "replica"), "nodes": ("node", "role"), "buckets": ("bucket",)}


def results(res) -> dict:
    """A job result's summary and tables, as rows."""
    return {"summary": res.summary, **{name: rows(getattr(res.tables, name)) for name in TABLES},
            "_schemas": {name: [(f.name, f.dataType.simpleString())
                                for f in as_frame(getattr(res.tables, name)).schema.fields]
                         for name in TABLES}}


def same_finish(got, in_spark) -> None:
    """The driver's finish and the Spark steps' give the same tables (the oracle checks both;
    this covers what it does not: nodes, buckets, the column types). Percentile columns may
    differ within the approximation (the oracle checks each)."""
    from pyrepl.analytics.schema import table_columns

    for name in TABLES:
        assert got["_schemas"][name] == in_spark["_schemas"][name] \
            == [tuple(x) for x in table_columns(name)], name
        approx = {"advice_p90", "recovery_ms_p50", "lag_bytes_p50", "lag_bytes_p99",
                  "lag_ms_p50", "lag_ms_p99", "lag_backlog_ratio_p99"}
        drop = [{k: v for k, v in x.items() if k not in approx} for x in in_spark[name]]
        assert_tables_equal(got[name], drop, KEYS[name], name)


def run_both(spark, lines, **cfg):
    """The job on the lines, finished on the driver (returned) and by the Spark steps (checked
    here against the oracle and the driver's finish), and the oracle's answers."""
    fd, path = tempfile.mkstemp(suffix=".ndjson", prefix="pyrepl-oracle-")
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(lines)
        got = results(run(spark, [path], JobConfig(**cfg)))
        spark.catalog.clearCache()
        in_spark = results(run(spark, [path], JobConfig(**{**cfg, "driver_max_rows": 0})))
    finally:
        os.unlink(path)
        spark.catalog.clearCache()
    want = compute(lines, cfg.get("since"), cfg.get("until"), cfg.get("bucket_s"))
    check(in_spark, want)
    same_finish(got, in_spark)
    return got, want


def check(got, want) -> None:
    assert_tables_equal(got["syncs"], want["syncs"],
                        ("master", "replica", "m_sync_id", "r_sync_id"), "syncs")
    assert_tables_equal(got["recoveries"], want["recoveries"], ("replica", "rec"), "recoveries")
    assert_tables_equal(got["lag_series"], want["lag_series"],
                        ("master", "replica", "run_id", "bucket"), "lag_series")
    assert_tables_equal(got["write_rates"], want["write_rates"], ("master",), "write_rates")
    assert_tables_equal(got["links"], want["links"], ("master", "replica"), "links")
    links = {(x["master"], x["replica"]): x for x in got["links"]}
    for x in want["links"]:
        g = links[(x["master"], x["replica"])]
        for col, st, q in (("lag_bytes_p50", "_lag_bytes", 0.5), ("lag_bytes_p99", "_lag_bytes", 0.99),
                           ("lag_ms_p99", "_lag_ms", 0.99), ("recovery_ms_p50", "_recovery_ms", 0.5)):
            assert rank_ok(g[col], x[st]["_values"], q), (col, g[col], x[st])
    assert_summary_matches(got["summary"], want["summary"])


def summary_of(out: str) -> dict | None:
    """The summary.json under ``out`` (None: not there, or not whole)."""
    try:
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def comparable(s: dict) -> dict:
    """A summary without what names its files, as JSON gives it back."""
    s = {k: v for k, v in s.items() if k not in ("outputs", "schema_version")}
    return json.loads(json.dumps(s, default=str))
