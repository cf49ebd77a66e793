"""The shortcuts that make a ``pyrepl metrics`` run start and finish sooner, held to what they
replace: the row count of Parquet inputs from their footers (not a Spark count), the driver's
tables handed to Spark as JSON text (not ``createDataFrame`` of Python rows), the JVM's
class-data-sharing archive (recorded by a first run, used by the next; the results are the
same), the end's stop of PySpark's accumulator server (woken, not waited for), and the JIT's
optimising tier stopped after the input pass (the same results)."""

from __future__ import annotations

import json
import math
import os
import socketserver
import subprocess
import sys
import threading

import pytest

from pyrepl.analytics import rowtable, session
from pyrepl.analytics.read import footer_rows, parquet_rows
from pyrepl.analytics.rowtable import RowTable, as_frame, json_frame
from pyrepl.analytics.schema import table_columns


def test_parquet_rows_from_footers_match_a_spark_count(spark, tmp_path) -> None:
    root = tmp_path / "pq"
    df = spark.range(0, 12345).selectExpr("id", "cast(id as double) / 7 as x",
                                          "concat('n', id) as s")
    df.repartition(3).write.parquet(str(root / "a"))
    df.limit(17).write.parquet(str(root / "b" / "nested"))
    (root / "a" / "_hidden.parquet").write_bytes(b"not read by Spark")
    (root / "a" / ".also-hidden").write_bytes(b"x")
    expect = spark.read.option("recursiveFileLookup", "true").parquet(str(root)).count()
    assert expect == 12345 + 17
    assert parquet_rows(spark, [str(root)]) == expect
    assert parquet_rows(spark, ["file://" + str(root / "a"), str(root / "b")]) == expect
    one = next(p for p in (root / "a").iterdir() if p.name.startswith("part-"))
    assert footer_rows(str(one)) == spark.read.parquet(str(one)).count()
    # not Parquet: None (the caller then counts with Spark)
    text = tmp_path / "x.ndjson"
    text.write_text('{"ts": 1}\n' * 10)
    assert footer_rows(str(text)) is None
    assert parquet_rows(spark, [str(text)]) is None


@pytest.mark.parametrize("how", ["json_frame", "rowtable-json", "rowtable-arrow",
                                 "rowtable-written"])
def test_json_frame_gives_back_the_driver_rows(spark, tmp_path, monkeypatch, how) -> None:
    """The driver's rows as Spark reads them back: ``json_frame``, a ``RowTable``'s frame
    (JSON text, or its Arrow table above ``JSON_FRAME_ROWS``) and its pyarrow Parquet."""
    cols = table_columns("syncs")  # strings, longs, doubles and booleans
    kinds = dict(cols)
    tricky = [0.1, 1 / 3, 1e300, -2.5e-308, 5e-324, float("nan"), float("inf"), -0.0, 7]
    rows = []
    for i, v in enumerate(tricky):
        r = {n: None for n, _ in cols}
        for n, t in cols:
            if t == "double":
                r[n] = v
            elif t == "bigint":
                r[n] = 2**62 + i
            elif t == "string":
                r[n] = f"node é\n\"{i}\"\u2028"
            elif t == "boolean":
                r[n] = i % 2 == 0
        rows.append(r)
    rows.append({n: None for n, _ in cols})
    if how == "json_frame":
        df = json_frame(spark, "syncs", rows)
    elif how == "rowtable-written":
        RowTable(spark, "syncs", rows).write(str(tmp_path / "syncs.parquet"))
        df = spark.read.parquet(str(tmp_path / "syncs.parquet"))
    else:
        monkeypatch.setattr(rowtable, "JSON_FRAME_ROWS", 1 << 30 if how == "rowtable-json" else 0)
        df = RowTable(spark, "syncs", rows).frame
    assert df.schema == json_frame(spark, "syncs", []).schema
    got = [x.asDict() for x in df.collect()]
    assert len(got) == len(rows)
    for want, have in zip(rows, got, strict=True):
        assert list(have) == [n for n, _ in cols]
        for n, v in want.items():
            if kinds[n] == "double" and v is not None and math.isnan(v):
                assert math.isnan(have[n])
            else:
                assert have[n] == v, (n, v, have[n])
                if v is not None:
                    assert isinstance(have[n], {"double": float, "bigint": int,
                                                "string": str, "boolean": bool}[kinds[n]])
    assert json_frame(spark, "syncs", []).count() == 0
    assert json_frame(spark, "syncs", []).columns == [n for n, _ in table_columns("syncs")]


@pytest.mark.slow
def test_class_archive_recorded_once_then_used_with_the_same_results(tmp_path) -> None:
    """Two runs of the command with the archive under tmp_path: the first records it (and says
    so), the second maps it; both write the same summary."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with open(logs / "sync.ndjson", "w") as f:
        for e in session._training_events():
            f.write(json.dumps(e) + "\n")
    cds = tmp_path / "cds"
    (cds).mkdir()
    stale = cds / "spark-0000000000000000.jsa"
    stale.write_bytes(b"an archive of another runtime")
    env = {**os.environ, session.CDS_ENV: str(cds)}
    summaries = []
    for i in range(2):
        out = tmp_path / f"out{i}"
        res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics", str(logs),
                              "--out", str(out), "--progress", "--spark-master", "local[2]"],
                             env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        archives = sorted(p.name for p in cds.iterdir())
        assert len(archives) == 1 and archives[0].startswith("spark-") \
            and archives[0].endswith(".jsa") and archives[0] != stale.name, archives
        assert ("class archive written" in res.stderr) == (i == 0), res.stderr
        assert "recording" not in res.stderr or i == 0
        assert "warning" not in res.stdout.lower()
        with open(out / "summary.json") as f:
            s = json.load(f)
        s.pop("outputs")
        summaries.append(s)
        assert s["input"]["events"] == len(session._training_events()) - 1
        assert s["input"]["malformed"]["missing-required"] == 1
    assert summaries[0] == summaries[1]
    assert (cds / archives[0]).stat().st_size > 10 << 20


@pytest.mark.parametrize("unix", [False, True])
def test_quick_shutdown_wakes_the_server_and_serves_nothing(tmp_path, unix) -> None:
    handled: list[int] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            handled.append(1)

    server = (socketserver.UnixStreamServer(str(tmp_path / "sock"), Handler) if unix
              else socketserver.TCPServer(("127.0.0.1", 0), Handler))
    # an hour between polls: a shutdown that waits for the next one would not return here
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 3600},
                               daemon=True)
    serving.start()
    session.quick_shutdown(server)
    stopping = threading.Thread(target=server.shutdown, daemon=True)
    stopping.start()
    stopping.join(60)
    serving.join(60)
    server.server_close()
    assert not stopping.is_alive() and not serving.is_alive()
    assert handled == []  # the wake-up connection is seen, not served
    session.quick_shutdown(None)  # no server: nothing to do


def test_a_plain_server_keeps_its_own_shutdown() -> None:
    class NoFlag:
        def shutdown(self) -> None:
            pass

    s = NoFlag()
    session.quick_shutdown(s)
    assert "shutdown" not in vars(s)


def test_c2_stops_after_the_pass_with_the_same_results(spark, tmp_path) -> None:
    from pyrepl.analytics import job

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "sync.ndjson").write_text("".join(
        json.dumps(e) + "\n" for e in session._training_events()))

    def directives() -> str:
        return session.jvm_command(spark, "compilerDirectivesPrint")

    before = directives()
    assert "Exclude:true" not in before.split("c2 directives:")[-1]
    plain = job.run(spark, [str(logs)], job.JobConfig())
    assert directives() == before  # not asked for: nothing changes
    try:
        c1 = job.run(spark, [str(logs)], job.JobConfig(c1_after_pass=True))
        added = directives()
        # the new directive matches every method and excludes it from C2 only
        top = added.split("Directive:")[1]
        assert "matching: *.*" in top
        c1_part, c2_part = top.split("c2 directives:")
        assert "Exclude:false" in c1_part and "Exclude:true" in c2_part
    finally:
        session.jvm_command(spark, "compilerDirectivesRemove")  # the session goes on as it was
    assert directives() == before
    assert c1.summary == plain.summary
    for name in ("syncs", "recoveries", "lag_series", "links", "nodes", "buckets",
                 "write_rates"):
        a, b = (as_frame(getattr(r.tables, name)).collect() for r in (c1, plain))
        assert a == b


def test_parquet_read_with_the_fields_schema_when_the_footers_fit(spark, tmp_path,
                                                                    monkeypatch) -> None:
    from pyrepl.analytics import read

    root = tmp_path / "pq"
    # two files with FIELDS columns as Spark writes them (and a column of no field)
    spark.createDataFrame(
        [(1.5, "replica_lag", "a:1", 10, 7), (2.5, "link_up", "b:2", None, 8)],
        "ts double, event string, node string, lag_bytes long, extra int") \
        .coalesce(1).write.parquet(str(root / "one"))
    spark.createDataFrame([(3.25, "link_down", "c:3", "timeout")],
                          "ts double, event string, node string, reason string") \
        .coalesce(1).write.parquet(str(root / "two"))
    assert read.parquet_fits_fields([str(root)])
    sc = spark.sparkContext
    sc.setJobGroup("fields-schema", "parse_lines")
    try:
        df = read.parse_lines(spark, [str(root)], "parquet")
        # the schema came from FIELDS, not from a Spark job reading a footer
        assert list(sc.statusTracker().getJobIdsForGroup("fields-schema")) == []
    finally:
        sc._jsc.clearJobGroup()
    got = sorted((r.ts, r.event, r.node, r.lag_bytes, r.reason) for r in df.collect())
    # a column one file lacks reads as null there
    assert got == [(1.5, "replica_lag", "a:1", 10, None), (2.5, "link_up", "b:2", None, None),
                   (3.25, "link_down", "c:3", None, "timeout")]
    # the same rows as Spark's own schema gives, where the files agree on their columns
    one = [str(root / "one")]
    monkeypatch.setattr(read, "parquet_fits_fields", lambda paths: False)
    inferred = read.parse_lines(spark, one, "parquet").collect()
    monkeypatch.undo()
    assert read.parse_lines(spark, one, "parquet").collect() == inferred
    # a field of another type, a nested column, not Parquet: Spark infers as before
    spark.createDataFrame([(1.0, "x", "n", "12")], "ts double, event string, node string, "
                          "lag_bytes string").write.parquet(str(tmp_path / "other"))
    assert not read.parquet_fits_fields([str(tmp_path / "other")])
    spark.createDataFrame([(1.0, (1, 2))], "ts double, pair struct<a:int,b:int>") \
        .write.parquet(str(tmp_path / "nested"))
    assert not read.parquet_fits_fields([str(tmp_path / "nested")])
    (tmp_path / "x.ndjson").write_text('{"ts": 1}\n')
    assert not read.parquet_fits_fields([str(tmp_path / "x.ndjson")])
    assert not read.parquet_fits_fields(["hdfs://nn/logs"])


def test_footer_span_is_the_files_ts_range(spark, tmp_path) -> None:
    from pyrepl.analytics.read import footer_span

    root = tmp_path / "pq"
    df = spark.range(0, 5000).selectExpr(
        "cast(1735689600.0 + id * 17.25 + (id % 7) * 0.001 as double) as ts",
        "'replica_lag' as event",
        "case when id % 11 = 0 then null else 'a:1' end as node")
    df.repartition(4).write.parquet(str(root / "a"))
    # a file whose ts are all null, one whose rows are before the others
    spark.createDataFrame([(None, "x"), (None, "y")], "ts double, event string") \
        .coalesce(1).write.parquet(str(root / "b"))
    spark.createDataFrame([(17.5, "x")], "ts double, event string") \
        .coalesce(1).write.parquet(str(root / "c"))
    got = footer_span([str(root)])
    want = spark.read.parquet(str(root / "a"), str(root / "b"), str(root / "c")) \
        .selectExpr("min(ts)", "max(ts)").first()
    assert got == (want[0], want[1]) and got[0] == 17.5 and got[1] > 1735775832
    # no ts column, not Parquet, not local: no span
    spark.range(3).coalesce(1).write.parquet(str(tmp_path / "nots"))
    assert footer_span([str(tmp_path / "nots")]) is None
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "x.parquet").write_text("not parquet")
    assert footer_span([str(tmp_path / "text")]) is None
    assert footer_span(["hdfs://nn:8020/logs"]) is None


def test_parquet_pass_sums_lag_per_the_footers_bucket(spark, tmp_path, monkeypatch) -> None:
    """Parquet inputs: the lag samples summed per the bucket the footers' ts span gives (the
    run's own choice) in the pass itself, not per 10 s then per bucket: the same summary and
    tables, row for row in the same order, although the fleet's lag_ms (with fractions)
    summed as doubles per 10 s first give other sums than summed per bucket directly. The
    Spark finish gives the same series too. A bad row that widens the footers' span beyond
    the good events' makes the guess too coarse: the run sees it after the pass and runs the
    pass again, per 10 s."""
    from pyrepl.analytics import job
    from pyrepl.analytics.read import convert
    from tests.analytics.synth import FleetSpec, fleet_events

    spec = FleetSpec(masters=1, replicas_per_master=2, duration_s=4 * 3600, lag_period_s=20,
                     incidents_per_hour=3.0, seed=5)
    events = fleet_events(spec)
    fractions = (0.1, 0.2, 0.3, 0.7, 1 / 3)
    lags = [e for e in events if e["event"] == "replica_lag" and e.get("lag_ms") is not None]
    for i, e in enumerate(lags):
        e["lag_ms"] += fractions[i * 7 % len(fractions)]
    # the fleet is one where the order of float sums shows: per 10 s, then per minute (the
    # bucket), against per minute directly
    fine_sums: dict[tuple, float] = {}
    for e in lags:
        k = (e["node"], e["peer"], e.get("run_id"), math.floor(e["ts"] / 10) * 10)
        fine_sums[k] = fine_sums.get(k, 0.0) + e["lag_ms"]
    direct: dict[tuple, float] = {}
    two_step: dict[tuple, float] = {}
    for e in lags:
        k = (e["node"], e["peer"], e.get("run_id"), math.floor(e["ts"] / 60) * 60)
        direct[k] = direct.get(k, 0.0) + e["lag_ms"]
    for (m, r, run, fb), v in sorted(fine_sums.items(), key=lambda kv: kv[0][3], reverse=True):
        k = (m, r, run, math.floor(fb / 60) * 60)
        two_step[k] = two_step.get(k, 0.0) + v
    assert any(direct[k] != two_step[k] for k in direct)
    nd, pq = tmp_path / "nd", str(tmp_path / "pq")
    nd.mkdir()
    (nd / "sync.ndjson").write_text("".join(json.dumps(e) + "\n" for e in events))
    convert(spark, [str(nd)], pq)
    fines: list[float] = []
    real = job.aggregate_all

    def spy(ev, fine, every):
        fines.append(fine)
        return real(ev, fine, every)

    monkeypatch.setattr(job, "aggregate_all", spy)

    def tables(res) -> dict:
        return {n: as_frame(getattr(res.tables, n)).collect() for n in (
            "syncs", "recoveries", "lag_series", "links", "nodes", "buckets", "write_rates")}

    def no_guess(cfg: job.JobConfig):
        with monkeypatch.context() as m:
            m.setattr(job, "footer_bucket", lambda paths, cfg: None)
            fines.clear()
            out = job.run(spark, [pq], cfg)
            assert fines == [10.0]
            return out

    guessed = job.run(spark, [pq], job.JobConfig())
    assert fines == [60.0] == [guessed.summary["input"]["bucket_s"]]
    fine = no_guess(job.JobConfig())
    assert guessed.summary == fine.summary
    assert tables(guessed) == tables(fine)
    sums = {(x["master"], x["replica"], x["run_id"], x["bucket"]): x["lag_ms_sum"]
            for x in tables(fine)["lag_series"]}
    assert sums.keys() == direct.keys()
    # the Spark finish: the same series (its tables' rows in no set order)
    fines.clear()
    in_spark = job.run(spark, [pq], job.JobConfig(driver_max_rows=0))
    assert fines == [60.0]
    fine_spark = no_guess(job.JobConfig(driver_max_rows=0))
    def by_key(rows: list) -> list:
        return sorted(rows, key=lambda x: (x.master, x.replica, x.run_id or "", x.bucket))

    assert by_key(in_spark.tables.lag_series.collect()) \
        == by_key(fine_spark.tables.lag_series.collect()) == tables(fine)["lag_series"]
    # a bad row (an unknown event) a day later: the footers span a day, the good events 4 h
    spark.createDataFrame([(1735689600.0 + 86400 * 2, "no_such_event", "x:1")],
                          "ts double, event string, node string") \
        .coalesce(1).write.mode("append").parquet(pq)
    fines.clear()
    again = job.run(spark, [pq], job.JobConfig())
    assert len(fines) == 2 and fines[0] > again.summary["input"]["bucket_s"] and fines[1] == 10
    plain = no_guess(job.JobConfig())
    assert again.summary == plain.summary
    assert again.summary["input"]["malformed"]["unknown-event"] == 1
    assert tables(again) == tables(plain) == tables(fine)
    spark.catalog.clearCache()
