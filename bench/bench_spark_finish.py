"""Benchmark of the analytics job's two finishes: in Spark (``--driver-rows 0``: any size) and
on the driver (the default for what a pass leaves of a day of a fleet).

Theory of operation: ``tests/analytics/synth.py`` writes a fleet's sync logs (NDJSON, converted
once to Parquet); one local SparkSession (``local[2]``, as the tests build it) runs
``job.run`` on it, alternating the two finishes for ``--rounds`` rounds after one warm-up run
of each (the JVM's JIT). Each run reports, from its own progress lines, the seconds of its
finish (from the pass's end to the result) and of the whole run; the table gives medians and
the Spark finish's time over the driver's. ``--root`` imports pyrepl from another checkout (a
``git worktree`` of an earlier commit) to compare a change's before and after in runs of the
same machine.

    .venv/bin/python bench/bench_spark_finish.py [--fleets small,day] [--rounds 3]
        [--root DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def fleets() -> dict[str, object]:
    from tests.analytics.synth import FleetSpec, spec_for_events

    return {
        # the tests' fleet: a master, 2 replicas, 4 h, lag every 20 s, 3 incidents an hour
        "small": FleetSpec(masters=1, replicas_per_master=2, duration_s=4 * 3600,
                           lag_period_s=20, incidents_per_hour=3.0, seed=5),
        # a day of 75 nodes at 1M events (the analytics bench's smallest size)
        "day": spec_for_events(1_000_000),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fleets", default="small,day")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--root", default=ROOT, help="the checkout whose pyrepl runs")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "pyrepl-bsf"))
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)  # tests.analytics.synth: this checkout's
    sys.path.insert(0, os.path.abspath(args.root))
    import pyrepl
    from pyrepl.analytics import job
    from pyrepl.analytics.read import convert
    from pyrepl.analytics.session import build_session
    from tests.analytics.synth import write_fleet
    print(f"pyrepl from {os.path.dirname(pyrepl.__file__)}", flush=True)
    spark = build_session("local[2]", app_name="bench-spark-finish", progress=False, conf={
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
        "spark.driver.memory": "2g", "spark.sql.adaptive.enabled": "false"})
    results: dict[str, dict[str, object]] = {}
    for name in args.fleets.split(","):
        spec = fleets()[name]
        nd = os.path.join(args.data, name, "nd")
        pq = os.path.join(args.data, name, "pq")
        if not os.path.isdir(pq):
            os.makedirs(nd, exist_ok=True)
            write_fleet(spec, nd)
            convert(spark, [nd], pq)

        def once(rows: int, pq: str = pq) -> tuple[float, float]:
            marks: list[tuple[float, str]] = []
            t0 = time.perf_counter()
            job.run(spark, [pq], job.JobConfig(driver_max_rows=rows),
                    progress=lambda m: marks.append((time.perf_counter(), m)))
            end = time.perf_counter()
            pass_end = next(t for t, m in marks if "finishing" in m)
            spark.catalog.clearCache()
            return end - pass_end, end - t0

        once(0), once(job.DRIVER_MAX_ROWS)  # warm-up
        runs: dict[str, list[tuple[float, float]]] = {"spark": [], "driver": []}
        for _ in range(args.rounds):
            runs["spark"].append(once(0))
            runs["driver"].append(once(job.DRIVER_MAX_ROWS))
        med = {k: (statistics.median(f for f, _ in v), statistics.median(t for _, t in v))
               for k, v in runs.items()}
        results[name] = {"runs": runs, "spark_finish_s": med["spark"][0],
                         "spark_run_s": med["spark"][1], "driver_finish_s": med["driver"][0],
                         "driver_run_s": med["driver"][1],
                         "finish_ratio": med["spark"][0] / med["driver"][0]}
        print(f"{name}: Spark finish {med['spark'][0]:.2f} s (run {med['spark'][1]:.2f} s), "
              f"driver finish {med['driver'][0]:.2f} s (run {med['driver'][1]:.2f} s), "
              f"ratio {med['spark'][0] / med['driver'][0]:.1f}", flush=True)
    print("\n| fleet | Spark finish | driver finish | Spark / driver | Spark run | driver run |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['spark_finish_s']:.2f} s | {r['driver_finish_s']:.2f} s | "
              f"{r['finish_ratio']:.1f} | {r['spark_run_s']:.2f} s | {r['driver_run_s']:.2f} s |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    spark.stop()


if __name__ == "__main__":
    main()
