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

from pyrepl.analytics import session
from pyrepl.analytics.job import json_frame
from pyrepl.analytics.read import footer_rows, parquet_rows
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


def test_json_frame_gives_back_the_driver_rows(spark) -> None:
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
    got = [x.asDict() for x in json_frame(spark, "syncs", rows).collect()]
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
        assert getattr(c1.tables, name).collect() == getattr(plain.tables, name).collect()


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
