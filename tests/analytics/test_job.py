"""The Spark job on known inputs: the hand-worked scenario, a synthetic fleet read as rotated
NDJSON files, gzip and Parquet (all agree with each other and with the oracle), time windows,
the lag sample, the report files and the ``pyrepl metrics`` command itself."""

from __future__ import annotations

import base64
import json
import os
import re

import pytest
from click.testing import CliRunner
from pyrepl.cli.metrics import metrics

from pyrepl.analytics.job import JobConfig, run
from pyrepl.analytics.read import convert
from pyrepl.analytics.report import (
    CHARTS,
    OPTIONAL_SUMMARY_KEYS,
    SUMMARY_KEYS,
    TABLES,
    write_report,
)
from pyrepl.analytics.rowtable import as_frame
from tests.analytics.compare import assert_summary_matches, assert_tables_equal
from tests.analytics.handworked import scenario
from tests.analytics.jobcheck import KEYS, check, results, rows, run_both, same_finish
from tests.analytics.oracle import compute
from tests.analytics.synth import FleetSpec, write_fleet

pytestmark = pytest.mark.slow

SPEC = FleetSpec(masters=3, replicas_per_master=2, duration_s=4 * 3600, lag_period_s=20,
                 incidents_per_hour=2.0, seed=7)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The synthetic fleet as rotated NDJSON files, as .gz files, and its lines."""
    root = tmp_path_factory.mktemp("fleet")
    plain, gz = str(root / "plain"), str(root / "gz")
    stats = write_fleet(SPEC, plain, max_file_bytes=150_000)
    write_fleet(SPEC, gz, max_file_bytes=150_000, compress=True)
    lines = []
    for d, _, files in sorted(os.walk(plain)):
        for f in sorted(files):
            with open(os.path.join(d, f)) as fh:
                lines.extend(fh)
    assert len(lines) == stats["events"] and stats["files"] > SPEC.nodes  # rotated
    return {"plain": plain, "gz": gz, "lines": lines, "root": root}


def without_input(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "input"}


def test_scenario_through_spark(spark) -> None:
    """The hand-worked scenario gives Spark the same answers as the oracle (whose answers
    test_oracle_unit checks by hand)."""
    got, want = run_both(spark, scenario(), bucket_s=60.0)
    check(got, want)
    s = got["summary"]
    assert s["input"]["malformed"] == {"unparseable": 1, "missing-required": 1,
                                       "unknown-event": 1}
    assert s["full_syncs"]["by_cause"] == {"output-buffer-limit": 2,
                                           "offset-before-backlog": 1}
    assert s["backlog"]["advice_bytes"]["p50"] == 4 << 20


def test_fleet_in_every_input_form_agrees(spark, fleet, tmp_path) -> None:
    want = compute(fleet["lines"])
    said: list[str] = []
    plain = run(spark, [fleet["plain"]], JobConfig(), progress=said.append)
    assert any("finishing on the driver" in x for x in said), said
    got = results(plain)
    check(got, want)
    # the same with the Spark steps (what bigger aggregates than driver_max_rows get)
    spark.catalog.clearCache()
    said.clear()
    in_spark = results(run(spark, [fleet["plain"]], JobConfig(driver_max_rows=100),
                           progress=said.append))
    assert any("finishing in Spark" in x for x in said), said
    check(in_spark, want)
    same_finish(got, in_spark)
    s = plain.summary
    assert s["input"]["events"] == len(fleet["lines"]) and s["input"]["malformed_lines"] == 0
    assert s["fleet"] == {"nodes": SPEC.nodes, "masters": SPEC.masters,
                          "replicas": SPEC.links, "links": SPEC.links}
    # every sync of the synthetic fleet was logged by both sides and joined
    assert all(x["m_sync_id"] and x["r_sync_id"] for x in got["syncs"])
    spark.catalog.clearCache()

    gz = run(spark, [fleet["gz"]], JobConfig())
    assert without_input(gz.summary) == without_input(s)
    spark.catalog.clearCache()

    pq = str(tmp_path / "parquet")
    conv = convert(spark, [fleet["plain"]], pq)
    assert conv["events"] == len(fleet["lines"]) and conv["malformed_lines"] == 0
    fromp = run(spark, [pq], JobConfig())
    assert fromp.summary["input"]["format"] == "parquet"
    assert without_input(fromp.summary) == without_input(s)
    spark.catalog.clearCache()


def test_lag_samples_of_either_form_give_the_same_results(spark, fleet, tmp_path) -> None:
    """The fleet with its lag samples as pyrepl wrote them before the compact form (role, sync
    id, whole run id on every line): the same metrics and tables (the lag series' run ids are
    the whole ones)."""
    from dataclasses import replace

    old = str(tmp_path / "v1")
    write_fleet(replace(SPEC, lag_format="v1"), old, max_file_bytes=150_000)
    got = results(run(spark, [old], JobConfig()))
    want = results(run(spark, [fleet["plain"]], JobConfig()))
    spark.catalog.clearCache()
    assert without_input(got["summary"]) == without_input(want["summary"])
    assert got["summary"]["input"]["events"] == want["summary"]["input"]["events"]
    for x in got["lag_series"]:
        x["run_id"] = x["run_id"][:8]
    for name in ("syncs", "recoveries", "lag_series", "links", "nodes", "buckets"):
        assert_tables_equal(got[name], want[name], KEYS[name], name)


def test_time_window(spark, fleet) -> None:
    lines = fleet["lines"]
    ts = sorted(json.loads(x)["ts"] for x in lines)
    since, until = ts[len(ts) // 4], ts[3 * len(ts) // 4]
    got, want = run_both(spark, lines, since=since, until=until)
    check(got, want)
    inp = got["summary"]["input"]
    assert since <= inp["first_ts"] and inp["last_ts"] < until
    assert inp["events"] == sum(1 for t in ts if since <= t < until)


def test_lag_sample_keeps_counts_exact(spark, fleet) -> None:
    """With a lag sample (every 3rd sample by hash) counts, maxima, means and the series are
    exact; only the percentiles come from the sample."""
    want = compute(fleet["lines"])
    res = run(spark, [fleet["plain"]], JobConfig(lag_sample_every=3))
    assert res.summary["input"]["lag_sample_every"] == 3
    assert_tables_equal(rows(res.tables.lag_series), want["lag_series"],
                        ("master", "replica", "run_id", "bucket"), "lag_series")
    lag = res.summary["lag"]
    wl = want["summary"]["lag"]
    assert lag["samples"] == wl["samples"]
    assert lag["bytes"]["count"] == wl["bytes"]["count"]
    assert lag["bytes"]["max"] == wl["bytes"]["max"]
    vals = wl["bytes"]["_values"]
    n = len(vals)
    for q, key in ((0.5, "p50"), (0.9, "p90")):  # a 1/3 sample: within a few % of rank
        lo, hi = vals[int(n * (q - 0.05))], vals[min(n - 1, int(n * (q + 0.05)))]
        assert lo <= lag["bytes"][key] <= hi, (key, lag["bytes"][key], lo, hi)
    assert_summary_matches(res.summary["psync"], want["summary"]["psync"])
    spark.catalog.clearCache()


def test_report_files(spark, fleet, tmp_path) -> None:
    res = run(spark, [fleet["plain"]], JobConfig())
    out = str(tmp_path / "out")
    summary = write_report(res, out)
    with open(os.path.join(out, "summary.json")) as f:
        on_disk = json.load(f)
    assert on_disk == json.loads(json.dumps(summary))
    assert set(on_disk) == set(SUMMARY_KEYS) - set(OPTIONAL_SUMMARY_KEYS)   # (no cluster)
    assert on_disk["schema_version"] == 1
    for name in CHARTS:
        with open(os.path.join(out, f"{name}.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with open(os.path.join(out, "report.html"), encoding="utf-8") as f:
        page = f.read()
    # self-contained: every image inline, nothing fetched from elsewhere
    imgs = re.findall(r"<img src='([^']*)'", page)
    assert len(imgs) == len(CHARTS) and all(x.startswith("data:image/png;base64,")
                                            for x in imgs)
    assert base64.b64decode(imgs[0].split(",", 1)[1])[:4] == b"\x89PNG"
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page)
    for name in TABLES:
        df = spark.read.parquet(os.path.join(out, "tables", f"{name}.parquet"))
        t = res.tables
        made = as_frame({"syncs": t.syncs, "recoveries": t.recoveries, "lag": t.lag_series,
                         "links": t.links, "nodes": t.nodes, "buckets": t.buckets,
                         "write_rates": t.write_rates, "shards": t.shards,
                         "failovers": t.failovers}[name])
        # written as made (the driver finish's by pyarrow): rows, column names and types
        assert df.schema == made.schema, name
        assert sorted(map(repr, df.collect())) == sorted(map(repr, made.collect())), name
    spark.catalog.clearCache()


def test_cli_metrics(spark, fleet, tmp_path) -> None:
    """``pyrepl metrics`` end to end in this process (it reuses the running session):
    conversion to Parquet, then the report from it, with a text summary on stdout."""
    bad = tmp_path / "bad.ndjson"
    bad.write_text("garbage\n{\"ts\": 1}\n")
    out, pq = tmp_path / "out", tmp_path / "pq"
    result = CliRunner().invoke(metrics, [
        fleet["plain"], str(bad), "--out", str(out), "--convert-to", "parquet", str(pq),
        "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"converted {len(fleet['lines']):,} events" in result.output
    assert "(2 malformed lines skipped)" in result.output
    assert "report: " + str(out / "report.html") in result.output
    assert "partial ratio" in result.output
    with open(out / "summary.json") as f:
        s = json.load(f)
    assert s["input"]["format"] == "parquet" and s["input"]["events"] == len(fleet["lines"])
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session survives

    res2 = CliRunner().invoke(metrics, [fleet["plain"], "--out", str(tmp_path / "o2"),
                                        "--since", "2025-01-01T01:00:00Z", "--quiet"])
    assert res2.exit_code == 0, res2.output
    with open(tmp_path / "o2" / "summary.json") as f:
        assert json.load(f)["input"]["first_ts"] >= SPEC.start + 3600
    usage = CliRunner().invoke(metrics, [fleet["plain"]])
    assert usage.exit_code == 2 and "--out" in usage.output
    spark.catalog.clearCache()


def test_no_events_at_all(spark, write_lines, tmp_path) -> None:
    """Only malformed lines: every metric is empty, nothing fails, the report is written."""
    path = write_lines(["garbage\n", "\n", '{"ts": 1}\n', '{"ts":1,"event":"x","node":"n"}\n'])
    res = run(spark, [path], JobConfig())
    s = res.summary
    assert s["input"]["events"] == 0 and s["input"]["malformed_lines"] == 3
    assert s["psync"] == {"syncs": 0, "by_result": {}, "partial": 0, "full": 0,
                          "partial_ratio": None}
    assert s["lag"]["bytes"] == {"count": 0, "p50": None, "p90": None, "p99": None,
                                 "max": None}
    summary = write_report(res, str(tmp_path / "out"))
    assert summary["recovery"]["count"] == 0
    assert os.path.exists(tmp_path / "out" / "report.html")
    spark.catalog.clearCache()


def test_spark_submit_runs_the_same_job(spark, fleet, tmp_path) -> None:
    """The cluster path as the README gives it: pyspark's own ``bin/spark-submit`` runs
    ``pyrepl/analytics/submit.py`` with the command's arguments (here on ``local[2]``: the
    master URL is the only thing a cluster changes) and writes the same summary as the job
    run in this process."""
    import subprocess
    import sys

    import pyspark

    import pyrepl.analytics.submit as entry

    home = os.path.dirname(pyspark.__file__)
    out = tmp_path / "out"
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "CI": "1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    res = subprocess.run(
        [os.path.join(home, "bin", "spark-submit"), "--master", "local[2]",
         "--conf", "spark.driver.memory=768m", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2", entry.__file__, fleet["plain"],
         "--out", str(out)],
        capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "report: " + str(out / "report.html") in res.stdout
    with open(out / "summary.json") as f:
        got = json.load(f)
    here = run(spark, [fleet["plain"]], JobConfig())
    want = without_input(here.summary)
    spark.catalog.clearCache()
    assert got["input"]["events"] == len(fleet["lines"])
    assert {k: got.get(k) for k in want} == want
    assert got["schema_version"] == 1 and set(got["outputs"]) == {"summary", "report",
                                                                    "charts", "tables"}
