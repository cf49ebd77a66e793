"""End to end on a real mixed Redis Cluster (issue 42): three pyrepl nodes writing their sync
events (``sync-log-file``) and three redis-server 7.0.15 nodes writing their logs, three
shards with a replica each, each kind replicating the other. The Redis master dies, and its
pyrepl replica is elected; then the pyrepl master dies, and its Redis replica is elected.
``pyrepl metrics`` over the three event logs and the three Redis logs, as an operator runs
it, reports the three shards and who failed over when and why: one row per failover, whichever
source saw it (a pyrepl node's event, or a Redis node's "Failover election won" line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack

import pytest

from tests.support.cluster import Node, agreed, build, start_node
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

NODE_TIMEOUT = 3000


def test_metrics_report_the_shards_and_both_failovers_of_a_mixed_cluster(tmp_path, spark
                                                                        ) -> None:
    kinds = ["pyrepl", "redis", "pyrepl", "redis", "pyrepl", "redis"]
    logs: dict[int, str] = {}
    with ExitStack() as stack:
        nodes: list[Node] = []
        for i, kind in enumerate(kinds):
            extra: tuple[str, ...] = ()
            if kind == "pyrepl":
                path = os.path.join(tempfile.mkdtemp(prefix="cluster-events-"), "sync.ndjson")
                extra = ("--sync-log-file", path)
            n = start_node(kind, *extra, node_timeout=NODE_TIMEOUT)
            stack.callback(n.proc.stop)
            logs[i] = path if kind == "pyrepl" else n.proc.logpath
            nodes.append(n)
        p1, r1, p2, r2, p3, r3 = nodes
        build([p1, r1, p2], replicas=[(r2, p1), (p3, r1), (r3, p2)])
        wait_for(lambda: agreed(nodes), 60, what="the mixed cluster to agree")
        wait_for(lambda: all(n.role() == "slave" and
                             n.cmd("INFO", "replication").get("master_link_status") == "up"
                             for n in (r2, p3, r3)), 30, what="the replicas' links up")
        ids = {n.port: n.myid() for n in nodes}
        t_r1 = time.time()
        r1.proc.kill()            # a Redis master: its pyrepl replica p3 is elected
        wait_for(lambda: p3.role() == "master", NODE_TIMEOUT / 1000 + 10,
                 what="the pyrepl replica to be elected")
        wait_for(lambda: agreed(nodes), 30, what="the cluster to agree on the new master")
        t_p1 = time.time()
        p1.proc.kill()            # a pyrepl master: its Redis replica r2 is elected
        wait_for(lambda: r2.role() == "master", NODE_TIMEOUT / 1000 + 10,
                 what="the redis replica to be elected")
        wait_for(lambda: agreed(nodes), 30, what="the cluster to agree again")
        time.sleep(1.5)           # (the sync logs are flushed within a second)
        out = tmp_path / "report"
        res = subprocess.run([sys.executable, "-m", "pyrepl.cli.main", "metrics",
                              *logs.values(), "--out", str(out), "--spark-master", "local[2]",
                              "--conf", "spark.sql.shuffle.partitions=2"],
                             capture_output=True, text=True, timeout=600,
                             env={**os.environ, "CI": "1"})
        assert res.returncode == 0, res.stdout + res.stderr

    name = {n.port: f"127.0.0.1:{n.port}" for n in nodes}
    s = json.loads((out / "summary.json").read_text())
    c = s["cluster"]
    assert c["failovers"] == 2 and c["failovers_by_kind"] == {"auto": 2}, c
    assert c["shards"] == 3, c
    assert c["node_fail_incidents"] == 2, c        # r1, then p1, each marked FAIL once
    assert c["slots_moved"] == 0, c                 # (the failovers' slots are not moves)

    fos = sorted((x.asDict() for x in spark.read.parquet(
        str(out / "tables" / "failovers.parquet")).collect()), key=lambda x: x["ts"])
    assert [(x["node"], x["old_master"], x["kind"]) for x in fos] == [
        (name[p3.port], name[r1.port], "auto"),    # from p3's own event
        (name[r2.port], name[p1.port], "auto")]    # from r2's log: the master it followed
    assert [x["node_id"] for x in fos] == [ids[p3.port], ids[r2.port]]
    assert t_r1 < fos[0]["ts"] < t_p1 < fos[1]["ts"] < time.time()
    for x in fos:
        # a master marked the old one FAIL within node timeout + the election's delay
        assert x["fail_to_failover_ms"] is not None and 0 <= x["fail_to_failover_ms"] < 5000, x
        assert x["election_ms"] is not None and 0 <= x["election_ms"] < 5000, x
        # two masters were left to vote each time, and each pair logged its grant
        assert x["votes"] == 2, x
        assert x["config_epoch"] is not None and x["config_epoch"] > 3, x
    assert fos[1]["config_epoch"] > fos[0]["config_epoch"]

    shards = {x["master"]: x.asDict() for x in spark.read.parquet(
        str(out / "tables" / "shards.parquet")).collect()}
    assert set(shards) == {name[p3.port], name[r2.port], name[p2.port]}, shards
    assert shards[name[p3.port]]["replicas"] == name[r1.port]
    assert shards[name[r2.port]]["replicas"] == name[p1.port]
    assert shards[name[p2.port]]["replicas"] == name[r3.port]
    assert [shards[name[n.port]]["failovers"] for n in (p3, r2, p2)] == [1, 1, 0]
    # slots: a pyrepl master's own, from its events (started with none, then ADDSLOTSRANGE,
    # or gained by its failover); a Redis master's log does not say
    per = 16384 // 3
    assert shards[name[p2.port]]["slots"] == f"{2 * per}-16383"
    assert shards[name[p3.port]]["slots"] == f"{per}-{2 * per - 1}"
    assert shards[name[r2.port]]["slots"] is None
    html = (out / "report.html").read_text()
    assert "Cluster shards and failovers" in html and name[p3.port] in html
