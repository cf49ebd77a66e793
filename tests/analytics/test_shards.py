"""A Redis Cluster's shards and failovers (pyrepl/analytics/shards.py): the cluster lines of
Redis 7.0, Redis 8 and Valkey 8 logs as cluster_* events, the tables built from events of
either source, and both finishes of the job agreeing on them."""

from __future__ import annotations

import json

import pytest

from pyrepl.analytics.job import JobConfig, run
from pyrepl.analytics.redislog import parse_lines
from pyrepl.analytics.shards import build_cluster, link_spans

A, B, C = "a" * 40, "b" * 40, "c" * 40
T0 = 1_796_119_200.0

# the same story in each server's words: B marked failing, an election by A (replica of B),
# won; a vote granted to C, one denied; B reachable again as a replica; the state back to ok
LINES = {
    "redis7": [
        "1:M 01 Dec 2026 10:00:00.000 * Node configuration loaded, I'm " + A,
        "1:S 01 Dec 2026 10:00:10.000 * Marking node " + B + " as failing (quorum reached).",
        "1:S 01 Dec 2026 10:00:10.100 # Start of election delayed for 700 milliseconds "
        "(rank #1, offset 1234).",
        "1:S 01 Dec 2026 10:00:10.800 # Starting a failover election for epoch 7.",
        "1:S 01 Dec 2026 10:00:10.900 # Failover election won: I'm the new master.",
        "1:S 01 Dec 2026 10:00:10.901 # configEpoch set to 7 after successful failover",
        "1:M 01 Dec 2026 10:00:11.000 # Cluster state changed: ok",
        "1:M 01 Dec 2026 10:00:20.000 # Failover auth granted to " + C + " for epoch 9",
        "1:M 01 Dec 2026 10:00:21.000 # Failover auth denied to " + C + ": its master is up",
        "1:M 01 Dec 2026 10:00:30.000 * Clear FAIL state for node " + B
        + ": replica is reachable again.",
    ],
    "redis8": [
        "1:M 01 Dec 2026 10:00:00.000 * Node configuration loaded, I'm " + A,
        "1:S 01 Dec 2026 10:00:10.000 * Marking node " + B + " () as failing (quorum reached).",
        "1:S 01 Dec 2026 10:00:10.100 * Start of election delayed for 700 milliseconds "
        "(rank #1, offset 1234).",
        "1:S 01 Dec 2026 10:00:10.800 * Starting a failover election for epoch 7.",
        "1:S 01 Dec 2026 10:00:10.900 * Failover election won: I'm the new master.",
        "1:S 01 Dec 2026 10:00:10.901 * configEpoch set to 7 after successful failover",
        "1:M 01 Dec 2026 10:00:11.000 * Cluster state changed: ok",
        "1:M 01 Dec 2026 10:00:20.000 * Failover auth granted to " + C + " (n3) for epoch 9",
        "1:M 01 Dec 2026 10:00:21.000 # Failover auth denied to " + C + " (n3): its master is up",
        "1:M 01 Dec 2026 10:00:30.000 * Clear FAIL state for node " + B
        + " (n2):replica is reachable again.",
    ],
    "valkey8": [
        "1:M 01 Dec 2026 10:00:00.000 * Node configuration loaded, I'm " + A,
        "1:S 01 Dec 2026 10:00:10.000 * Marking node " + B + " () as failing (quorum reached).",
        "1:S 01 Dec 2026 10:00:10.100 * Start of election delayed for 700 milliseconds "
        "(rank #1, offset 1234).",
        "1:S 01 Dec 2026 10:00:10.800 * Starting a failover election for epoch 7, node config "
        "epoch is 3",
        "1:S 01 Dec 2026 10:00:10.900 * Failover election won: I'm the new primary.",
        "1:S 01 Dec 2026 10:00:10.901 * configEpoch set to 7 after successful failover",
        "1:M 01 Dec 2026 10:00:11.000 * Cluster state changed: ok",
        "1:M 01 Dec 2026 10:00:20.000 * Failover auth granted to " + C + " (n3) for epoch 9",
        "1:M 01 Dec 2026 10:00:21.000 # Failover auth denied to " + C + " (n3): its primary is "
        "up",
        "1:M 01 Dec 2026 10:00:30.000 * Clear FAIL state for node " + B
        + " (n2): replica is reachable again.",
    ],
}


def _story(events: list[dict]) -> list[tuple]:
    return [(e["event"], e["role"], e.get("result"), e.get("peer_id"), e.get("reason"),
             e.get("config_epoch"), e.get("rank"), e.get("offset"), e.get("node_id"))
            for e in events]


@pytest.mark.parametrize("server", sorted(LINES))
def test_the_cluster_lines_of_each_server_are_the_same_events(server: str) -> None:
    p = parse_lines(LINES[server])
    assert p.counts["log-unknown"] == 0 and p.counts["log-unparseable"] == 0
    assert _story(p.events) == [
        ("cluster_node_fail", "replica", "fail", B, "quorum", None, None, None, A),
        ("cluster_election", "replica", "started", None, None, 7, 1, 1234, A),
        ("cluster_failover", "master", "auto", None, None, 7, None, None, A),
        ("cluster_state", "master", "ok", None, None, None, None, None, A),
        ("cluster_election", "master", "granted", C, None, 9, None, None, A),
        ("cluster_election", "master", "denied", C, "master-up", None, None, None, A),
        ("cluster_node_fail", "master", "cleared", B, "reachable", None, None, None, A)]


def test_a_manual_failover_and_a_takeover_say_so() -> None:
    p = parse_lines([
        "1:M 01 Dec 2026 10:00:00.000 * Node configuration loaded, I'm " + A,
        "1:S 01 Dec 2026 10:00:10.000 # Manual failover user request accepted.",
        "1:S 01 Dec 2026 10:00:10.500 # Starting a failover election for epoch 7.",
        "1:S 01 Dec 2026 10:00:10.600 # Failover election won: I'm the new master.",
        "1:S 01 Dec 2026 10:01:10.000 # Forced failover user request accepted.",
        "1:S 01 Dec 2026 10:01:10.600 # Failover election won: I'm the new master.",
        "1:S 01 Dec 2026 10:02:10.000 # Taking over the master (user request).",
        "1:S 01 Dec 2026 10:03:10.600 # Failover election won: I'm the new master."])
    assert [e["result"] for e in p.events if e["event"] == "cluster_failover"] == [
        "manual", "force", "takeover", "auto"]


def ev(ts: float, event: str, node: str, **f) -> dict:
    return {"ts": T0 + ts, "event": event, "node": node, **f}


def test_failovers_name_the_old_master_from_the_link_and_count_the_votes() -> None:
    # r (a Redis log: ids only) followed m, which failed; masters x and y voted for r, z
    # voted in another epoch; pyrepl node x logged the FAIL with m's address and id
    cev = [
        ev(0, "cluster_slots", "x:1", node_id="X", result="owned", slots="0-99"),
        ev(10, "cluster_node_fail", "x:1", node_id="X", result="fail", peer="m:1",
           peer_id="M", reason="quorum"),
        ev(10.5, "cluster_node_fail", "y:1", node_id="Y", result="fail", peer_id="M",
           reason="quorum"),
        ev(11, "cluster_election", "r:1", node_id="R", result="started", rank=0,
           config_epoch=5),
        ev(11.1, "cluster_election", "x:1", node_id="X", result="granted", peer_id="R",
           config_epoch=5),
        ev(11.1, "cluster_election", "y:1", node_id="Y", result="granted", peer_id="R",
           config_epoch=5),
        ev(11.1, "cluster_election", "z:1", node_id="Z", result="granted", peer_id="R",
           config_epoch=4),
        ev(11.3, "cluster_failover", "r:1", node_id="R", result="auto", config_epoch=5),
        ev(100, "cluster_node_fail", "x:1", node_id="X", result="fail", peer_id="M",
           reason="quorum"),   # a second incident about m, long after
    ]
    links = link_spans([{"replica": "r:1", "master": "m:1", "ts": T0 - 50},
                        {"replica": "m:1", "master": "r:1", "ts": T0 + 200},
                        {"replica": "w:1", "master": "x:1", "ts": T0 - 50}])
    summary, shards, fos = build_cluster(cev, links)
    [fo] = fos
    assert (fo["node"], fo["old_master"], fo["old_master_id"], fo["kind"], fo["votes"]) == \
        ("r:1", "m:1", "M", "auto", 2)
    assert fo["election_ms"] == pytest.approx(300) and \
        fo["fail_to_failover_ms"] == pytest.approx(1300)
    assert fo["shard"] == "r:1"
    by_master = {s["master"]: s for s in shards}
    assert set(by_master) == {"r:1", "x:1", "y:1", "z:1"}
    assert by_master["r:1"]["replicas"] == "m:1" and by_master["r:1"]["failovers"] == 1
    assert by_master["r:1"]["node_fail_incidents"] == 2
    assert by_master["x:1"]["replicas"] == "w:1" and by_master["x:1"]["slots"] == "0-99"
    assert by_master["x:1"]["slot_count"] == 100
    assert summary is not None and summary["failovers"] == 1 and summary["shards"] == 4
    assert summary["failovers_by_kind"] == {"auto": 1}
    assert build_cluster([], links) == (None, [], [])


def test_slot_moves_are_counted_and_a_failover_is_not_one() -> None:
    cev = [
        ev(0, "cluster_slots", "a:1", node_id="A", result="owned", slots="0-99"),
        ev(0, "cluster_slots", "b:1", node_id="B", result="owned", slots="100-199"),
        ev(5, "cluster_slots", "a:1", node_id="A", result="lost", slots="0-9", peer_id="B"),
        ev(5, "cluster_slots", "b:1", node_id="B", result="gained", slots="0-9",
           peer_id="A"),
        ev(9, "cluster_failover", "c:1", node_id="C", result="auto", peer_id="B"),
        ev(9, "cluster_slots", "c:1", node_id="C", result="gained", slots="0-9,100-199",
           peer_id="B"),
    ]
    summary, shards, _ = build_cluster(cev, [])
    assert summary is not None and summary["slots_moved"] == 10
    by_master = {s["master"]: s for s in shards}
    assert by_master["a:1"]["slots"] == "10-99"
    assert by_master["c:1"]["slots"] == "0-9,100-199" and by_master["c:1"]["replicas"] == \
        "b:1"


@pytest.mark.slow
def test_both_finishes_build_the_same_cluster_tables(spark, tmp_path) -> None:
    """pyrepl events and a Redis log of one cluster, finished on the driver and in Spark."""
    ndjson = []
    for e in (
            ev(0, "cluster_slots", "127.0.0.1:7000", node_id=A, role="master",
               result="owned", slots="0-8191"),
            ev(10, "cluster_node_fail", "127.0.0.1:7000", node_id=A, role="master",
               result="fail", peer_id=B, reason="quorum"),
            ev(10.9, "cluster_election", "127.0.0.1:7000", node_id=A, role="master",
               result="granted", peer_id=C, config_epoch=7)):
        ndjson.append(json.dumps(e) + "\n")
    (tmp_path / "events.ndjson").write_text("".join(ndjson))
    log = ["1:M 01 Dec 2026 10:00:00.000 * Running mode=cluster, port=7002.",
           "1:M 01 Dec 2026 10:00:00.001 * Node configuration loaded, I'm " + C,
           "1:S 01 Dec 2026 10:00:10.800 # Starting a failover election for epoch 7.",
           "1:S 01 Dec 2026 10:00:10.950 # Failover election won: I'm the new master.",
           "1:S 01 Dec 2026 10:00:10.951 # configEpoch set to 7 after successful failover"]
    (tmp_path / "redis-7002.log").write_text("\n".join(log) + "\n")
    got = []
    for cfg in (JobConfig(), JobConfig(driver_max_rows=0)):
        res = run(spark, [str(tmp_path / "events.ndjson"), str(tmp_path / "redis-7002.log")],
                  cfg)
        got.append((res.summary["cluster"], res.tables.shards.rows, res.tables.failovers.rows))
        spark.catalog.clearCache()
    assert got[0] == got[1]
    summary, shards, fos = got[0]
    [fo] = fos
    # (the log's host is unknown: no other source names the node at port 7002)
    assert fo["node"] == "unknown:7002" and fo["node_id"] == C and fo["votes"] == 1
    assert fo["config_epoch"] == 7 and fo["election_ms"] == pytest.approx(150)
    assert summary["failovers"] == 1 and summary["node_fail_incidents"] == 1
    assert {s["master"] for s in shards} == {"127.0.0.1:7000", "unknown:7002"}


def test_the_exposition_has_the_cluster_figures() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from pyrepl.analytics.prom import exposition

    cev = [ev(10, "cluster_node_fail", "x:1", node_id="X", result="fail", peer_id="M"),
           ev(11, "cluster_failover", "r:1", node_id="R", result="auto", peer_id="M"),
           ev(50, "cluster_failover", "m:1", node_id="M", result="manual", peer_id="R")]
    summary, _, _ = build_cluster(cev, [])
    text = exposition({"input": {"events": 3}, "lag": {}, "cluster": summary})
    fams = {f.name: {tuple(sorted(x.labels.items())): x.value for x in f.samples}
            for f in text_string_to_metric_families(text)}
    assert fams["pyrepl_cluster_failovers"] == {(("kind", "auto"),): 1,
                                                (("kind", "manual"),): 1}
    assert fams["pyrepl_cluster_node_fail_incidents"] == {(): 1}
    assert fams["pyrepl_cluster_fail_to_failover_ms"][(("quantile", "0.5"),)] == \
        pytest.approx(1000)
    assert "pyrepl_cluster_shards" in fams
