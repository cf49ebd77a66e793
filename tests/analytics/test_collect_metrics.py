"""``pyrepl metrics`` over what ``pyrepl collect`` wrote while a real Redis fleet went through
partial syncs, a full sync, a refused partial and a promotion
(tests/support/collect_scenario.py): the job agrees with the oracle, reports the syncs the
collector inferred (and only counts its INFO samples), and does so mixed with pyrepl's own sync
logs too."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from click.testing import CliRunner
from pyrepl.cli.metrics import metrics

from tests.analytics.jobcheck import check, run_both
from tests.analytics.oracle import compute
from tests.analytics.synth import FleetSpec, write_fleet
from tests.support.collect_scenario import run_fleet

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    run = run_fleet(str(tmp_path_factory.mktemp("collect")))
    assert run.returncode == 0, run.stderr
    with open(os.path.join(run.out, "collect.ndjson"), encoding="utf-8") as f:
        run.lines = f.readlines()
    return run


def test_metrics_report_the_collected_syncs(spark, collected, tmp_path) -> None:
    evs = collected.events
    got, want = run_both(spark, collected.lines)
    check(got, want)
    s = got["summary"]
    assert s["input"]["malformed_lines"] == 0 and s["input"]["events"] == len(evs)
    kinds = Counter(e["event"] for e in evs)
    assert s["input"]["events_by_type"] == dict(sorted(kinds.items()))
    decs = [e for e in evs if e["event"] == "psync_decision"]
    results = Counter(d["result"] for d in decs)
    ps = s["psync"]
    assert ps["syncs"] == len(decs) and ps["by_result"] == dict(results)
    assert ps["partial"] == results["continue"] >= 3  # two links killed, one dropped
    assert ps["full"] == results["full"] == 2  # R2's restart, R1's move to X
    # Redis's own counters are the check: what the nodes counted while the collector watched
    # (their INFO stats in its samples; a restart starts a node's counters again)
    counted = {"sync_full": 0, "sync_partial_ok": 0}
    last: dict[str, dict] = {}
    for e in evs:
        if e["event"] != "info_sample" or e.get("sync_full") is None:
            continue
        prev = last.get(e["node"])
        if prev is not None:
            for k in counted:
                counted[k] += e[k] - prev[k] if e[k] >= prev[k] else e[k]
        last[e["node"]] = e
    assert (ps["full"], ps["partial"]) == (counted["sync_full"], counted["sync_partial_ok"])
    # R2 asked for it; X refused R1's partial for a reason INFO does not give
    assert s["full_syncs"]["by_reason"] == {"no-history": 1, "unknown": 1}
    assert s["lag"]["samples"] == kinds["replica_lag"] > 0
    assert s["lag"]["bytes"]["max"] > 0
    assert s["links"]["link_downs"] == kinds["link_down"] >= 4
    assert s["links"]["link_downs_by_reason"]["promoted"] == 1
    assert s["links"]["link_downs_by_reason"]["replicaof"] == 1
    assert s["links"]["link_downs_by_reason"]["restart"] == 1
    # the killed and dropped links came back partially; promotion and REPLICAOF are no losses.
    # A recovery's time needs the replica seen caught up by a later sample: under load the
    # scenario may end before that for some of them.
    assert s["recovery"]["count"] >= 2
    assert 1 <= s["recovery"]["partial_ms"]["count"] <= s["recovery"]["count"]
    # the syncs whose replica the collector saw online are complete. The scenario waits for
    # three of them to be named (the dropped link's partial, R2's full, R1's from X); the two
    # killed links' partials are named too when a sample of their replica falls in between.
    named = [x for x in got["syncs"] if x["replica"] is not None]
    assert all(x["status"] == "ok" for x in named)
    node = collected.node
    assert {(node(collected.m), node(collected.first)), (node(collected.m), node(collected.r2)),
            (node(collected.x), node(collected.r1))} <= {(x["master"], x["replica"])
                                                           for x in named}
    assert {x["master"] for x in got["syncs"]} == {collected.node(collected.m),
                                                   collected.node(collected.x)}
    assert s["fleet"]["masters"] == 2 and s["fleet"]["replicas"] == 2

    out = tmp_path / "report"
    res = CliRunner().invoke(metrics, [collected.out, "--out", str(out), "--quiet"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "partial ratio" in res.output and (out / "report.html").exists()
    with open(out / "summary.json") as f:
        summary = json.load(f)
    assert summary["psync"] == ps and summary["full_syncs"]["by_reason"] == \
        s["full_syncs"]["by_reason"]
    spark.catalog.clearCache()


def test_collected_events_mixed_with_pyrepl_logs(spark, collected, tmp_path) -> None:
    """A pyrepl fleet's own logs (synthetic, the daemon's schema) and the collector's lines in
    one run: the job still agrees with the oracle, and each part's syncs are all there."""
    spec = FleetSpec(masters=1, replicas_per_master=2, duration_s=1800, lag_period_s=10,
                     incidents_per_hour=6.0, seed=5)
    root = str(tmp_path / "pyrepl-logs")
    write_fleet(spec, root)
    own = []
    for d, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            with open(os.path.join(d, name), encoding="utf-8") as f:
                own.extend(f)
    got, want = run_both(spark, own + collected.lines)
    check(got, want)
    alone = [compute(own)["summary"], compute(collected.lines)["summary"]]
    s = got["summary"]
    for k in ("syncs", "partial", "full"):
        assert s["psync"][k] == sum(a["psync"][k] for a in alone), k
    assert s["lag"]["samples"] == sum(a["lag"]["samples"] for a in alone)
    assert s["input"]["events_by_type"]["info_sample"] == \
        sum(1 for e in collected.events if e["event"] == "info_sample")
    assert s["fleet"]["masters"] == 1 + 2 and s["psync"]["syncs"] > 10
    spark.catalog.clearCache()
