"""``metrics --follow``'s parts (pyrepl/analytics/follow.py, prom.py): a stream's batch
aggregates merge into the one pass's aggregate, so each trigger's finish equals the batch job
over the same lines; the store keeps each batch once through replays, compactions and a crash
between them; the Prometheus text is what Prometheus's own parser reads back."""

from __future__ import annotations

import json
import os
import random
import signal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pyrepl.analytics import report
from pyrepl.analytics.chartpool import ChartPool
from pyrepl.analytics.follow import (
    AggStore,
    Entry,
    FollowConfig,
    Follower,
    pow2_at_least,
    publish,
    stored_bucket,
)
from pyrepl.analytics.job import NICE_BUCKETS, JobConfig, finish, pass_counts, run
from pyrepl.analytics.prom import exposition
from pyrepl.analytics.read import (
    FINE_BUCKET_S,
    aggregate_all,
    classify,
    merge_aggregates,
    parse_text,
)
from pyrepl.analytics.report import DrawnCharts
from pyrepl.analytics.rowtable import as_frame
from pyrepl.analytics.sql import _F
from tests.analytics.jobcheck import comparable, results, summary_of
from tests.analytics.synth import FleetSpec, write_fleet

pytestmark = pytest.mark.slow


def fleet_lines(tmp, seed: int) -> list[str]:
    """A small fleet's lines (full and partial syncs, failures, lag samples), one list."""
    src = os.path.join(tmp, f"fleet-{seed}")
    write_fleet(FleetSpec(masters=2, replicas_per_master=2, duration_s=3 * 3600,
                          incidents_per_hour=3, lag_period_s=5, seed=seed), src)
    out: list[str] = []
    for root, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                out += fh.readlines()
    return out


def batch_agg(spark, path: str, lines: list[str], every: int):
    """A micro-batch's aggregate of ``lines`` (as the stream gives them: a column of lines)."""
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return aggregate_all(classify(parse_text(spark, spark.read.text(path))), FINE_BUCKET_S,
                         every)


def test_merged_batches_finish_as_one_pass(spark, tmp_path) -> None:
    """Lines cut into batches at random, each aggregated with its own sampling modulus (a
    power of two up to the final one), merged: the finish equals the batch job's over all the
    lines with the final modulus, every table and the summary, and sync and lag counts are
    the whole input's."""
    rng = random.Random(1)
    lines = fleet_lines(str(tmp_path), 1)
    rng.shuffle(lines)   # a batch holds any lines of any node
    path = os.path.join(tmp_path, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    every = 4
    cuts = sorted(rng.sample(range(1, len(lines)), 4))
    parts = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    aggs = [batch_agg(spark, os.path.join(tmp_path, f"part{i}.ndjson"), p,
                      rng.choice([1, 2, 4])) for i, p in enumerate(parts)]
    union = aggs[0]
    for a in aggs[1:]:
        union = union.unionByName(a)
    merged = merge_aggregates(union, every).cache()
    assert merged.filter("sid is null and row is null and bad is null and counted is null") \
        .groupBy("master", "replica", "run_id", "fb").count().filter("count > 1").count() == 0
    # (the Spark steps' finish of an aggregate is checked against the driver's elsewhere:
    # test_job; what matters here is that the merged aggregate is the one pass's)
    cfg = JobConfig(lag_sample_every=every)
    want = results(run(spark, [path], cfg))
    got = results(finish(spark, merged, pass_counts(merged), [path], "json", every, None, cfg))
    assert got == want
    # compacted: the lag groups summed per the coarsest bucket the run can still choose
    coarse = stored_bucket(want["summary"]["input"]["bucket_s"])
    assert coarse > FINE_BUCKET_S
    compacted = merge_aggregates(union, every, coarse).cache()
    assert compacted.count() < merged.count()
    assert results(finish(spark, compacted, pass_counts(compacted), [path], "json", every,
                          None, cfg)) == want
    compacted.unpersist()
    assert got["summary"]["input"]["events"] == len(lines)
    assert got["summary"]["lag"]["samples"] == sum('"replica_lag"' in x for x in lines)
    merged.unpersist()


def test_the_store_keeps_each_batch_once(spark, tmp_path) -> None:
    store = AggStore(str(tmp_path))

    def df(n: int):
        return spark.createDataFrame([(n,)], "n long")

    def stored() -> list[int]:
        return sorted(r["n"] for r in spark.read.parquet(*[e.path for e in store.live()])
                      .collect())

    assert store.live() == [] and store.every() == 1 and store.covered() == -1
    assert store.put_batch(df(0), 0, 1) and store.put_batch(df(1), 1, 2)
    assert store.put_batch(df(11), 1, 4)   # batch 1 again (a replay): replaced
    assert stored() == [0, 11] and store.every() == 4
    assert [e.kind for e in store.live()] == ["batch", "batch"]
    store.compact(df(100), 1, 4)
    assert [(e.kind, e.batch) for e in store.live()] == [("compact", 1)] and stored() == [100]
    assert not store.put_batch(df(1), 1, 4)   # a replay of what the compaction holds
    assert store.put_batch(df(2), 2, 4) and stored() == [2, 100]
    # a crash after a compaction was written, before what it replaced was removed
    store._put(df(200), "compact", 2, 8)
    assert [(e.kind, e.batch) for e in store.live()] == [("compact", 2)]
    assert stored() == [200] and store.every() == 8
    leftovers = {os.path.basename(e.path) for e in store.entries()}
    assert {"batch-000000000002-e4", "compact-000000000001-e4"} <= leftovers
    store.compact(df(300), 2, 8)   # the next compaction removes them
    assert [os.path.basename(e.path) for e in store.entries()] == ["compact-000000000002-e8"]
    assert isinstance(store.live()[0], Entry)


def test_stored_bucket_divides_every_later_bucket() -> None:
    assert [stored_bucket(b) for b in (10, 30, 60, 300, 600, 900, 3600, 14400, 86400)] == \
        [10, 30, 60, 300, 300, 900, 3600, 7200, 86400]
    for b in NICE_BUCKETS:
        assert all(x % stored_bucket(b) == 0 for x in NICE_BUCKETS if x >= b)


def test_pow2_at_least() -> None:
    assert [pow2_at_least(x) for x in (0, 0.5, 1, 1.01, 2, 3, 4, 5, 1000)] == \
        [1, 1, 1, 2, 2, 4, 4, 8, 1024]


def test_the_exposition_parses_as_the_summary_says(spark, tmp_path) -> None:
    lines = fleet_lines(str(tmp_path), 3)
    path = os.path.join(tmp_path, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    s = run(spark, [path]).summary
    text = exposition(s, batch=7, trigger_s=1.5, at=1_700_000_000.25)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(f.type == "gauge" for f in fams.values())

    def one(name: str, **labels: str) -> float:
        (v,) = [x.value for x in fams[name].samples if x.labels == labels]
        return v

    assert one("pyrepl_events") == s["input"]["events"] == len(lines)
    assert one("pyrepl_partial_syncs") == s["psync"]["partial"]
    assert sum(x.value for x in fams["pyrepl_full_syncs"].samples) == s["psync"]["full"] > 0
    for reason, n in s["full_syncs"]["by_reason"].items():
        assert one("pyrepl_full_syncs", reason=reason) == n
    assert one("pyrepl_partial_ratio") == pytest.approx(s["psync"]["partial_ratio"])
    assert one("pyrepl_full_sync_loops") == s["failures"]["full_sync_loops"]
    assert one("pyrepl_replica_lag_bytes", quantile="0.99") == s["lag"]["bytes"]["p99"]
    assert one("pyrepl_replica_lag_ms", quantile="1") == s["lag"]["ms"]["max"]
    adv = s["backlog"]["advice_bytes"]
    assert {x.labels["share"]: x.value for x in fams["pyrepl_backlog_advice_bytes"].samples} \
        == {str(int(k[1:]) / 100): v for k, v in adv.items() if v is not None}
    assert one("pyrepl_follow_batch") == 7 and one("pyrepl_follow_trigger_seconds") == 1.5
    assert one("pyrepl_follow_last_trigger_timestamp_seconds") == 1_700_000_000.25
    # nothing to say: no sample rather than NaN
    empty = exposition({"input": {"events": 0}, "lag": {"bytes": {"p99": None}}})
    names = {f.name for f in text_string_to_metric_families(empty)}
    assert names == {"pyrepl_events"}


def test_publish_swaps_a_whole_set(spark, tmp_path) -> None:
    lines = fleet_lines(str(tmp_path), 4)
    path = os.path.join(tmp_path, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    out = os.path.join(tmp_path, "out")
    os.makedirs(os.path.join(out, "tables", "old.parquet"))   # a batch run's tables before
    first = publish(run(spark, [path]), out, 0)
    assert os.path.islink(os.path.join(out, "tables"))
    res = run(spark, [path])
    n_syncs, n_links = as_frame(res.tables.syncs).count(), as_frame(res.tables.links).count()
    second = publish(res, out, 1)
    assert sorted(os.listdir(out)) == sorted(
        [".trigger-000000000001", "tables", "summary.json", "report.html",
         *[f"{c}.png" for c in first["outputs"]["charts"]]])
    assert os.readlink(os.path.join(out, "tables")) == os.path.join(".trigger-000000000001",
                                                                     "tables")
    tables = second["outputs"]["tables"]
    assert all(p.startswith(os.path.join(out, "tables", "")) for p in tables.values())
    assert spark.read.parquet(tables["syncs"]).count() == n_syncs > 0
    assert spark.read.parquet(tables["links"]).count() == n_links == 4
    assert second["outputs"]["summary"] == os.path.join(out, "summary.json")
    with open(second["outputs"]["summary"], encoding="utf-8") as f:
        assert json.load(f) == json.loads(json.dumps(second, default=str))


def chart_files(summary) -> dict[str, bytes]:
    """A published summary's charts: name -> the file's bytes."""
    out = {}
    for chart, p in summary["outputs"]["charts"].items():
        with open(p, "rb") as f:
            out[chart] = f.read()
    return out


def test_a_chart_drawn_from_the_same_is_copied(spark, tmp_path, monkeypatch) -> None:
    """A trigger's chart whose input is the last trigger's is the same file, copied, not
    drawn again; a chart whose input changed is drawn."""
    lines = fleet_lines(str(tmp_path), 4)
    path = os.path.join(tmp_path, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    out = os.path.join(tmp_path, "out")
    names = {"partial_ratio_per_node": "chart_partial_ratio", "phase_breakdown": "chart_phases",
             "lag_over_time": "chart_lag", "recovery_cdf": "chart_recovery",
             "backlog_advice": "chart_advice", "link_timeline": "chart_timelines"}
    calls: list[str] = []
    for chart, fn in names.items():
        real = getattr(report, fn)
        monkeypatch.setattr(report, fn, lambda *a, _r=real, _c=chart: (calls.append(_c),
                                                                        _r(*a))[1])

    res = run(spark, [path])
    drawn = DrawnCharts()
    first = chart_files(publish(res, out, 0, drawn))
    assert sorted(calls) == sorted(names) and all(b.startswith(b"\x89PNG") for b in
                                                  first.values())
    calls.clear()
    assert drawn.copied == []
    assert chart_files(publish(res, out, 1, drawn)) == first and calls == []
    assert sorted(drawn.copied) == sorted(names)
    assert len(res.charts["buckets"]) >= 2
    res.charts["buckets"] = res.charts["buckets"][:-1]
    third = chart_files(publish(res, out, 2, drawn))
    assert calls == ["lag_over_time"] and len(drawn.copied) == len(names) - 1
    assert third["lag_over_time"] != first["lag_over_time"]
    assert {k: v for k, v in third.items() if k != "lag_over_time"} == \
        {k: v for k, v in first.items() if k != "lag_over_time"}
    # without a memory of the last trigger (the batch job), every chart is drawn
    calls.clear()
    publish(res, out, 3)
    assert sorted(calls) == sorted(names)


def test_charts_drawn_by_the_pool_are_those_drawn_here(spark, tmp_path) -> None:
    """A follower's charts drawn by its worker processes (``ChartPool``) are byte for byte
    those drawn in the process; a worker killed (a dead pool) costs the trigger its charts
    drawn in the process, and the next trigger gets a new pool."""
    lines = fleet_lines(str(tmp_path), 6)
    path = os.path.join(tmp_path, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    res = run(spark, [path])

    here = chart_files(publish(res, os.path.join(tmp_path, "here"), 0))
    assert len(here) == 6 and all(b.startswith(b"\x89PNG") for b in here.values())
    pool = ChartPool()
    try:
        assert chart_files(publish(res, os.path.join(tmp_path, "pool"), 0, pool=pool)) == here
        pids = pool.pids()
        assert len(pids) == 2 and os.getpid() not in pids and pool.broken == 0
        os.kill(pids[0], signal.SIGKILL)
        assert chart_files(publish(res, os.path.join(tmp_path, "pool"), 1, pool=pool)) == here
        assert pool.broken == 1 and pool.pids() == []
        assert chart_files(publish(res, os.path.join(tmp_path, "pool"), 2, pool=pool)) == here
        assert pool.broken == 1 and len(pool.pids()) == 2 and not set(pool.pids()) & set(pids)
    finally:
        pool.close()
    assert pool.pids() == []


def lag_ranks_close(got: dict, want: dict) -> None:
    """The lag percentiles of two summaries within 1 % of each other; then taken out of both
    (the rest must be equal)."""
    for s in (got, want):
        s["lag"] = {k: dict(v) if isinstance(v, dict) else v for k, v in s["lag"].items()}
    for k, st in want["lag"].items():
        if not isinstance(st, dict):
            continue
        for q in ("p50", "p90", "p99"):
            a, b = got["lag"][k].pop(q, None), st.pop(q, None)
            assert (a is None) == (b is None), (k, q, a, b)
            if a is not None:
                assert abs(a - b) <= 0.01 * max(abs(b), 1e-9), (k, q, a, b)


@pytest.mark.parametrize("driver_rows", [None, 0], ids=["driver-finish", "spark-finish"])
def test_the_followers_triggers_are_the_batch_job(spark, tmp_path, driver_rows) -> None:
    """The follower's own triggers, in this process (``on_batch`` fed micro-batches of a
    fleet's lines, compacting every 2): each published summary and table is the batch job's
    over the lines so far, with the finish on the driver (from the state), and the last with
    the finish in Spark (the stored aggregates' merge; ``--driver-rows 0``), across
    compactions, after the start's warm-up pass."""
    F = _F()
    rng = random.Random(5)
    lines = fleet_lines(str(tmp_path), 3)
    rng.shuffle(lines)
    # 5 micro-batches (3 in Spark's slower finish): compactions after the second and fourth
    cuts = sorted(rng.sample(range(1, len(lines)), 4 if driver_rows is None else 2))
    parts = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    follow = os.path.join(tmp_path, "followed")
    os.makedirs(follow)
    job = JobConfig() if driver_rows is None else JobConfig(driver_max_rows=driver_rows)
    cfg = FollowConfig([follow], os.path.join(tmp_path, "out"),
                       os.path.join(tmp_path, "ck"), job=job, compact_every=2)
    fo = Follower(spark, cfg)
    log: list[str] = []
    fo.progress = log.append
    try:
        fo.warm_up(20_000)     # (as ``start`` does: it must count nothing)
        for i, part in enumerate(parts):
            path = os.path.join(follow, f"part{i}.ndjson")
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(part)
            fo.on_batch(spark.read.text(path).select(F.lit(path).alias("path"),
                                                     F.col("value").alias("line")), i)
            fo.wait_published()
            if driver_rows == 0 and i < len(parts) - 1:
                continue    # (Spark's finish is slow: the batch job's only at the last)
            want = run(spark, [follow], job)
            got = summary_of(cfg.out_dir)
            if driver_rows == 0:
                # Spark's percentile_approx: its ranks hang on how the input was partitioned
                # (the stored aggregates, the batch job's pass), within its accuracy
                lag_ranks_close(got, want.summary)
            assert comparable(got) == comparable(want.summary), i
            for name, table in (("syncs", want.tables.syncs), ("links", want.tables.links)):
                on_disk = spark.read.parquet(got["outputs"]["tables"][name])
                assert sorted(map(repr, on_disk.collect())) == \
                    sorted(map(repr, as_frame(table).collect())), (i, name)
            spark.catalog.clearCache()
    finally:
        fo.close()
    assert sum("compacted into one" in m for m in log) == (len(parts) - 1) // 2, log
    finishing = [m for m in log if "finishing" in m or "finishing in Spark" in m]
    assert all(("in Spark" in m) == (driver_rows == 0) for m in finishing) and finishing, log
