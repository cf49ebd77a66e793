"""End to end on real Redis: a master and two replicas, each with ``--logfile``, provoke full
syncs (no-history x2, offset-before-backlog) and partial ones (link kills, and the promotion's
through the secondary replication id; see redislog_scenario.py), then ``pyrepl metrics`` reads
the three log files, as an operator runs it, and reports what was provoked. Once on Debian's
redis-server 7.0.15 (diskless full syncs on one connection), once on the Redis 8 build of ``make
redis-src`` with the rdb channel, once on its Valkey 8.1 build with the dual channel (PRIMARY /
REPLICA wording; each skipped without its build). Then the same fleet watched by ``pyrepl
collect`` too, its logs read while the nodes still run: each sync is counted once, as the nodes'
own counters count them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.analytics import redislog_scenario as scenario

pytestmark = pytest.mark.slow


def _log(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("server", sorted(scenario.SERVERS))
def test_metrics_on_real_redis_logs(tmp_path, spark, server: str) -> None:
    sv = scenario.SERVERS[server]
    exe = sv.path()
    if exe is None and sv.optional:
        pytest.skip(sv.missing)
    assert exe is not None, sv.missing
    sc = scenario.run(exe, str(tmp_path / "run"), *sv.options)
    out = tmp_path / "report"
    env = {**os.environ, "CI": "1"}
    res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics",
                          *sc.logs.values(), "--out", str(out), "--spark-master", "local[2]",
                          "--conf", "spark.sql.shuffle.partitions=2"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((out / "summary.json").read_text())

    # what the servers logged, read without the job: the full syncs went over the rdb channel
    # (Redis 8 logs each request "(rdb-channel)") or not; R1's promotion kept the old id up to
    # an offset, where M and R2 resume
    rdb_channel = sv.full_mode == "rdb-channel"
    requests = re.findall(r"Full resync requested by replica \S+ \(rdb-channel\)",
                          _log(sc.logs["m"]))
    assert len(requests) == (3 if rdb_channel else 0), requests
    shift = re.findall(r"Setting secondary replication ID to \w+, valid up to offset: (\d+)\.",
                       _log(sc.logs["r1"]))
    assert len(shift) == 1, shift

    node = {n: f"127.0.0.1:{p}" for n, p in sc.ports.items()}
    ps = s["psync"]
    assert ps["partial"] == scenario.EXPECTED_PARTIAL, ps
    assert s["full_syncs"]["by_reason"] == scenario.EXPECTED_FULL, s["full_syncs"]
    assert ps["full"] == 3 and ps["syncs"] == 8, ps
    assert ps["by_result"] == {"continue": 5, sv.full_result: 3}, ps
    assert s["full_syncs"]["by_mode"] == {sv.full_mode: 3}, s["full_syncs"]
    assert s["full_syncs"]["failed"] == 0
    # a two-channel replica applies the stream it buffered during the load: a drain phase
    two = sv.full_mode in ("rdb-channel", "dual-channel")
    assert s["full_syncs"]["durations_ms"]["drain"]["count"] == (3 if two else 0)
    assert s["input"]["malformed_lines"] == 0 and s["input"]["logs"]["unknown"] == 0
    assert s["input"]["logs"]["unparseable"] == 0
    kind = "valkey-log" if server.startswith("valkey") else "redis-log"
    assert s["input"]["logs"]["files"] == {kind: 3}
    assert s["fleet"]["nodes"] == 3
    # the promotion: R1 served R2 and M partially; R1's link went down for it, R2's for
    # REPLICAOF
    assert s["links"]["link_downs_by_reason"].get("promoted") == 1
    assert s["links"]["link_downs_by_reason"].get("replicaof") == 1
    syncs = [x.asDict() for x in spark.read.parquet(str(out / "tables" / "syncs.parquet"))
             .collect()]
    promo = sorted(x["replica"] for x in syncs if x["master"] == node["r1"])
    assert promo == sorted([node["m"], node["r2"]])
    assert all(x["kind"] == "partial" and x["result"] == "continue" and x["m_sync_id"]
               and x["r_sync_id"] and x["req_offset"] == int(shift[0])
               for x in syncs if x["master"] == node["r1"]), syncs
    obb = [x for x in syncs if x["reason"] == "offset-before-backlog"]
    assert len(obb) == 1 and obb[0]["replica"] == node["r2"] and obb[0]["status"] == "ok"
    fulls = [x for x in syncs if x["kind"] == "full"]
    assert len(fulls) == 3 and all(
        x["master"] == node["m"] and x["result"] == sv.full_result and x["mode"] == sv.full_mode
        and x["status"] == "ok" for x in fulls), fulls
    # every sync has both halves, joined across the logs
    assert all(x["m_sync_id"] and x["r_sync_id"] for x in syncs), syncs


@pytest.mark.parametrize("server", sorted(scenario.SERVERS))
def test_logs_read_mid_flight_with_the_collector_count_each_sync_once(tmp_path, spark,
                                                                      server: str) -> None:
    """The same fleet watched by ``pyrepl collect`` too, its logs read while the nodes still
    run (the collector's last samples, which see the promotion's two partial syncs, come
    after the logs' last lines): each sync is one row, and the counts are the nodes' own
    (INFO stats ``sync_full`` / ``sync_partial_ok`` summed over the three)."""
    sv = scenario.SERVERS[server]
    exe = sv.path()
    if exe is None and sv.optional:
        pytest.skip(sv.missing)
    assert exe is not None, sv.missing
    sc = scenario.run(exe, str(tmp_path / "run"), *sv.options, collect=True)
    out = tmp_path / "report"
    env = {**os.environ, "CI": "1"}
    res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics",
                          *sc.live_logs.values(), sc.collected, "--out", str(out),
                          "--spark-master", "local[2]",
                          "--conf", "spark.sql.shuffle.partitions=2"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    s = json.loads((out / "summary.json").read_text())
    ps = s["psync"]
    full = sum(f for f, _ in sc.counters.values())
    partial = sum(p for _, p in sc.counters.values())
    if sv.full_mode == "dual-channel":
        # Valkey counts a dual-channel sync's main connection (its PSYNC from the snapshot
        # offset, +CONTINUE) in sync_partial_ok too: one per full sync
        partial -= full
    assert (partial, full) == (scenario.EXPECTED_PARTIAL, 3), sc.counters
    assert (ps["partial"], ps["full"]) == (partial, full), ps
    assert s["full_syncs"]["by_reason"] == scenario.EXPECTED_FULL, s["full_syncs"]
    # the promotion's syncs: one row each, both halves joined
    node = {n: f"127.0.0.1:{p}" for n, p in sc.ports.items()}
    syncs = [x.asDict() for x in spark.read.parquet(str(out / "tables" / "syncs.parquet"))
             .collect()]
    promo = sorted(x["replica"] for x in syncs if x["master"] == node["r1"])
    assert promo == sorted([node["m"], node["r2"]]), syncs
