"""End to end on real Redis: Debian's redis-server 7.0.15 (a master and two replicas, each with
``--logfile``) provokes full syncs (no-history x2, offset-before-backlog) and partial ones (link
kills, and the promotion's through the secondary replication id; see redislog_scenario.py), then
``pyrepl metrics`` reads the three log files, as an operator runs it, and reports what was
provoked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redislog_scenario as scenario
from support import redis_server_path

pytestmark = pytest.mark.slow


def test_metrics_on_real_redis_logs(tmp_path, spark) -> None:
    exe = redis_server_path()
    assert exe is not None, "redis-server is not installed (the test command installs it)"
    sc = scenario.run(exe, str(tmp_path / "run"))
    out = tmp_path / "report"
    env = {**os.environ, "CI": "1"}
    res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics",
                          *sc.logs.values(), "--out", str(out), "--spark-master", "local[2]",
                          "--conf", "spark.sql.shuffle.partitions=2"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((out / "summary.json").read_text())

    node = {n: f"127.0.0.1:{p}" for n, p in sc.ports.items()}
    ps = s["psync"]
    assert ps["partial"] == scenario.EXPECTED_PARTIAL, ps
    assert s["full_syncs"]["by_reason"] == scenario.EXPECTED_FULL, s["full_syncs"]
    assert ps["full"] == 3 and ps["syncs"] == 8 and ps["by_result"] == {"continue": 5, "full": 3}
    assert s["full_syncs"]["failed"] == 0
    assert s["input"]["malformed_lines"] == 0 and s["input"]["logs"]["unknown"] == 0
    assert s["input"]["logs"]["files"] == {"redis-log": 3}
    assert s["fleet"]["nodes"] == 3
    # the promotion: R1 served R2 and M partially; R1's link went down for it, R2's for
    # REPLICAOF
    assert s["links"]["link_downs_by_reason"].get("promoted") == 1
    assert s["links"]["link_downs_by_reason"].get("replicaof") == 1
    syncs = [x.asDict() for x in spark.read.parquet(str(out / "tables" / "syncs.parquet"))
             .collect()]
    promo = sorted(x["replica"] for x in syncs if x["master"] == node["r1"])
    assert promo == sorted([node["m"], node["r2"]])
    assert all(x["kind"] == "partial" and x["m_sync_id"] and x["r_sync_id"]
               for x in syncs if x["master"] == node["r1"])
    obb = [x for x in syncs if x["reason"] == "offset-before-backlog"]
    assert len(obb) == 1 and obb[0]["replica"] == node["r2"] and obb[0]["status"] == "ok"
    # every sync has both halves, joined across the logs
    assert all(x["m_sync_id"] and x["r_sync_id"] for x in syncs), syncs
