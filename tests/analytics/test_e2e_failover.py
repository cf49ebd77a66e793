"""End to end on real Redis 7.0.15: a chain (M -> R1 -> R2), a link kill, a replica restarted
from its RDB, and a Sentinel failover (M killed, R1 promoted, M back empty and turned into R1's
replica; see failover_scenario.py), watched by ``pyrepl collect`` beside the three log files.
``pyrepl metrics`` counts the syncs the servers' own counters counted (``sync_full`` and
``sync_partial_ok`` of every process, the killed one's read before it died), each on its link,
from the logs and the collector's output together, and from each alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from pyrepl.analytics.job import JobConfig, run
from tests.analytics import failover_scenario as scenario
from tests.support.procs import redis_server_path

pytestmark = [pytest.mark.slow, pytest.mark.serial]


def test_a_chain_a_restart_and_a_sentinel_failover_counted_as_the_servers_count(
        tmp_path, spark) -> None:
    assert redis_server_path() is not None, "redis-server is not installed (the test " \
        "command installs it)"
    fo = scenario.run(str(tmp_path / "run"))
    assert fo.totals() == scenario.EXPECTED, fo.counters
    out = tmp_path / "report"
    res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics",
                          *fo.logs.values(), fo.collected, "--out", str(out),
                          "--spark-master", "local[2]",
                          "--conf", "spark.sql.shuffle.partitions=2"],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "CI": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert (s["psync"]["full"], s["psync"]["partial"]) == scenario.EXPECTED, s["psync"]
    assert s["full_syncs"]["by_reason"] == scenario.EXPECTED_FULL, s["full_syncs"]
    node = {n: f"127.0.0.1:{p}" for n, p in fo.ports.items()}
    syncs = Counter((x["master"], x["replica"], x["kind"]) for x in spark.read.parquet(
        str(out / "tables" / "syncs.parquet")).collect())
    assert syncs == Counter({
        (node["m"], node["r1"], "full"): 1, (node["m"], node["r1"], "partial"): 1,
        (node["r1"], node["r2"], "full"): 1, (node["r1"], node["r2"], "partial"): 2,
        (node["r1"], node["m"], "full"): 1}), syncs
    # each source alone
    for paths in (list(fo.logs.values()), [fo.collected]):
        ps = run(spark, paths, JobConfig()).summary["psync"]
        spark.catalog.clearCache()
        assert (ps["full"], ps["partial"]) == scenario.EXPECTED, (paths, ps)
