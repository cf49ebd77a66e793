"""The Spark job on real Redis 7/8 and Valkey 9 logs (tests/data/redislog/) agrees with the
pure-Python path (``logread.parse_logs`` -> the oracle): the logs are found by content among
NDJSON files, read per rotated set in Spark tasks, their nodes named, and the tables and summary
equal; a node that pyrepl's own log also describes is counted once."""

from __future__ import annotations

import gzip
import os
import shutil

import pytest

from pyrepl.analytics.job import JobConfig, run
from pyrepl.analytics.logread import parse_logs
from pyrepl.events import to_json_line
from tests.analytics.jobcheck import check, rows
from tests.analytics.oracle import compute

pytestmark = pytest.mark.slow

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                    "redislog")


def copy_samples(dest) -> dict[str, bytes]:
    """The nine sample logs under dest (Redis 7's master gzipped and cut in two rotated
    files); returns {path: bytes} as they were written."""
    out = {}
    for flavour in sorted(os.listdir(DATA)):
        d = dest / flavour
        d.mkdir()
        for name in sorted(os.listdir(os.path.join(DATA, flavour))):
            src = os.path.join(DATA, flavour, name)
            if flavour == "redis7" and name == "m.log":
                lines = open(src, "rb").read().splitlines(True)
                half = len(lines) // 2
                (d / "m.log.1.gz").write_bytes(gzip.compress(b"".join(lines[:half])))
                (d / "m.log").write_bytes(b"".join(lines[half:]))
                out[str(d / "m.log.1.gz")] = (d / "m.log.1.gz").read_bytes()
                out[str(d / "m.log")] = (d / "m.log").read_bytes()
            else:
                shutil.copy(src, d / name)
                out[str(d / name)] = (d / name).read_bytes()
    return out


def summary_and_tables(spark, paths) -> dict:
    res = run(spark, [str(p) for p in paths], JobConfig())
    t = res.tables
    got = {"summary": res.summary, "syncs": rows(t.syncs), "recoveries": rows(t.recoveries),
           "lag_series": rows(t.lag_series), "write_rates": rows(t.write_rates),
           "links": rows(t.links)}
    spark.catalog.clearCache()
    return got


def test_logs_in_spark_agree_with_the_pure_python_path(spark, tmp_path) -> None:
    files = copy_samples(tmp_path)
    events, infos = parse_logs(files)
    assert len(infos) == 9
    lines = [to_json_line(e) for e in events]
    got = summary_and_tables(spark, [tmp_path])
    check(got, compute(lines))
    s = got["summary"]
    assert s["psync"]["partial"] == 15 and s["psync"]["full"] == 9
    assert s["full_syncs"]["by_reason"] == {"no-history": 6, "offset-before-backlog": 3}
    assert s["full_syncs"]["by_mode"] == {"rdb-channel": 3, "dual-channel": 3, "diskless": 3}
    assert s["fleet"] == {"nodes": 9, "masters": 6, "replicas": 9, "links": 12}
    logs = s["input"]["logs"]
    assert logs["files"] == {"redis-log": 7, "valkey-log": 3} and logs["sets"] == 9
    assert logs["unknown"] == 0 and logs["unparseable"] == 0 and logs["unnamed_events"] == 0
    assert s["input"]["malformed_lines"] == 0 and s["input"]["duplicates_dropped"] == 0
    # the Valkey sync that fell out of the backlog has its exact need: advice from it alone
    assert s["backlog"]["offset_before_backlog_syncs"] == 1


def test_a_node_also_in_pyrepls_own_log_is_counted_once(spark, tmp_path) -> None:
    files = copy_samples(tmp_path)
    events, _ = parse_logs(files)
    base = summary_and_tables(spark, [tmp_path])["summary"]
    # the same master's events as pyrepl's own NDJSON would give them (no source), plus an
    # NDJSON line that is garbage: the NDJSON path and the log path run side by side
    m = next(e["node"] for e in events if e["event"] == "psync_decision"
             and e["source"] == "redis-log" and e["reason"] == "offset-before-backlog"
             and e.get("gap") is None)
    own = [{k: v for k, v in e.items() if k != "source"} for e in events if e["node"] == m]
    nd = tmp_path / "pyrepl" / "sync.ndjson"
    nd.parent.mkdir()
    nd.write_text("".join(to_json_line(e) for e in own) + "not json\n")
    s = summary_and_tables(spark, [tmp_path])["summary"]
    assert s["input"]["duplicates_dropped"] == len(own)
    assert s["input"]["malformed"]["unparseable"] == 1
    for key in ("psync", "full_syncs", "links", "fleet"):
        assert s[key] == base[key], key
