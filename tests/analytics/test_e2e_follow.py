"""``pyrepl metrics --follow`` end to end, as a process of its own: a fleet's sync logs are
appended while it runs (files growing, new files, a rotation, Redis logs dropped in); after
each step its summary.json equals the batch job's over the same files; killed with SIGKILL in
the middle and started again on its checkpoint, it counts every line once, its stored
aggregates compacted every 2 batches before and after the kill; its Prometheus
endpoint says what the summary says; SIGTERM ends it cleanly."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pyrepl.analytics.follow import AggStore
from pyrepl.analytics.job import JobConfig, run
from tests.analytics.jobcheck import comparable, summary_of
from tests.analytics.synth import FleetSpec, write_fleet
from tests.support.procs import free_port
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.serial]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REDISLOGS = os.path.join(ROOT, "tests", "data", "redislog", "redis7")


def follower(follow: str, out: str, ckpt: str, port: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pyrepl.cli.main", "metrics", "--follow", follow,
            "--out", out, "--checkpoint", ckpt, "--trigger", "1",
            "--compact-every", "2", "--prometheus-port", str(port), "--progress"]
    # its output in a file (a pipe nobody reads could fill and stop it)
    with open(os.path.join(os.path.dirname(out), "follower.log"), "a") as log:
        return subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                text=True, env={**os.environ, "CI": "1"})


def caught_up(spark, follow: str, out: str, proc: subprocess.Popen, timeout: float = 120
              ) -> dict:
    """Wait until the follower's summary is the batch job's over the files as they are now
    (nothing is appended meanwhile); both."""
    want = comparable(run(spark, [follow], JobConfig()).summary)
    spark.catalog.clearCache()
    got: dict = {}

    def same() -> bool:
        assert proc.poll() is None, f"the follower exited: {proc.returncode}"
        s = summary_of(out)
        if s is None:
            return False
        got.update(comparable(s))
        return got == want

    try:
        wait_for(same, timeout, interval=0.5, what="the follower's summary")
    except AssertionError as e:
        diff = {k: (got.get(k), want[k]) for k in want if got.get(k) != want[k]}
        raise AssertionError(f"{e}; got != want: {diff}") from e
    return want


def test_follow_appended_rotated_killed_restarted(spark, tmp_path) -> None:
    rng = random.Random(7)
    src, follow = str(tmp_path / "src"), str(tmp_path / "follow")
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    write_fleet(FleetSpec(masters=2, replicas_per_master=2, duration_s=3 * 3600,
                          incidents_per_hour=3, lag_period_s=5, seed=11), src)
    nodes = sorted(os.listdir(src))
    lines = {}
    for n in nodes:
        with open(os.path.join(src, n, "sync.ndjson"), encoding="utf-8") as f:
            lines[n] = f.readlines()
    cut = {n: sorted(rng.sample(range(1, len(ls)), 4)) for n, ls in lines.items()}

    appended = {"n": 0}

    def append(n: str, part: int, name: str = "sync.ndjson") -> None:
        a = ([0] + cut[n])[part]
        b = (cut[n] + [len(lines[n])])[part]
        appended["n"] += b - a
        os.makedirs(os.path.join(follow, n), exist_ok=True)
        with open(os.path.join(follow, n, name), "a", encoding="utf-8") as f:
            f.writelines(lines[n][a:b])

    # 1. the first lines of most nodes, the follower started on them
    for n in nodes[:-1]:
        append(n, 0)
    port = free_port()
    proc = follower(follow, out, ckpt, port)
    try:
        s1 = caught_up(spark, follow, out, proc)
        assert 0 < s1["input"]["events"] < sum(map(len, lines.values()))
        # 2. a new node's file, the others grow; one file rotated (renamed: its new lines go
        # to a new file); Redis logs of three more nodes dropped in
        append(nodes[-1], 0)
        for n in nodes[:-1]:
            append(n, 1)
        rotated = os.path.join(follow, nodes[0], "sync.ndjson")
        os.rename(rotated, rotated + ".1")
        append(nodes[0], 2)
        shutil.copytree(REDISLOGS, os.path.join(follow, "redis"))
        s2 = caught_up(spark, follow, out, proc)
        assert s2["input"]["logs"] is not None and s2["input"]["logs"]["sets"] == 3
        assert s2["input"]["events"] > s1["input"]["events"]
        n2 = appended["n"]
        # 3. killed (SIGKILL) while it works on new lines; lines appended while it is down
        append(nodes[-1], 1)
        for n in nodes[1:]:
            append(n, 2)
        time.sleep(rng.uniform(0.3, 2.0))
        proc.kill()
        proc.wait(30)
        for n in nodes:
            append(n, 3)
            if n != nodes[0]:
                append(n, 4)
        proc = follower(follow, out, ckpt, port)
        s3 = caught_up(spark, follow, out, proc)
        # every line appended since step 2 counted once, across the kill
        assert s3["input"]["events"] - s2["input"]["events"] == appended["n"] - n2
        append(nodes[0], 4)
        s4 = caught_up(spark, follow, out, proc)
        # 4. Prometheus's endpoint: the summary's figures
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            fams = {f.name: f for f in text_string_to_metric_families(r.read().decode())}
        assert fams["pyrepl_events"].samples[0].value == s4["input"]["events"]
        assert fams["pyrepl_partial_syncs"].samples[0].value == s4["psync"]["partial"]
        assert sum(x.value for x in fams["pyrepl_full_syncs"].samples) == s4["psync"]["full"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    # the stored aggregates were compacted, before the kill and after it (every 2 batches):
    # the summaries above were each the batch job's all the same
    with open(os.path.join(tmp_path, "follower.log"), encoding="utf-8") as f:
        runs = f.read().split("following 1 path(s)")
    assert len(runs) == 3 and all("compacted into one" in r for r in runs[1:]), runs
    store = AggStore(ckpt)
    assert [e.kind for e in store.live()][:1] == ["compact"] and \
        len([e for e in store.entries() if e.kind == "batch"]) < 2
    # the tables of the last trigger, where summary.json says
    final = summary_of(out)
    assert final is not None and final == s4 | {"outputs": final["outputs"],
                                                "schema_version": final["schema_version"]}
    assert spark.read.parquet(final["outputs"]["tables"]["syncs"]).count() == \
        final["psync"]["syncs"] > 0
    assert spark.read.parquet(final["outputs"]["tables"]["links"]).count() == \
        final["fleet"]["links"]
