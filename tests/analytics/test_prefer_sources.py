"""Several sources of one node (pyrepl.analytics.logread.prefer_sources): the Spark step and the
oracle's definition keep the same events, whatever the mix (hypothesis), and each change is
kept once.

A node's history of changes (partial and full PSYNC decisions, links going up) at random
times; a Redis log that saw them up to a cut (read while the node still ran, or from its
middle on); the collector, polling at random intervals, saw every change in its window
(``since``, ``ts``] as an inferred event. The events kept must be, change by change, one per
change (the log's where it has the change, else the collector's), and Spark's the oracle's.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl.analytics.logread import prefer_sources
from pyrepl.analytics.schema import spark_schema
from tests.analytics.oracle import match_key
from tests.analytics.oracle import prefer_sources as oracle_prefer

pytestmark = pytest.mark.slow

NODE = "127.0.0.1:7001"
# changes on a 0.5 s grid, polls between its points: each change is in one window, never at
# its edge, and changes are further apart than two MATCH_CLOCK_S
CHANGES = st.lists(st.tuples(st.integers(0, 119).map(lambda i: i * 0.5), st.sampled_from(
    [("psync_decision", "continue"), ("psync_decision", "full"), ("link_up", None)])),
    min_size=1, max_size=12, unique_by=lambda x: x[0])
POLLS = st.lists(st.integers(0, 119).map(lambda i: i * 0.5 + 0.25), min_size=1, max_size=30)


def _events(changes, cut0: float, cut1: float, polls: list[float]):  # noqa: ANN001, ANN202
    """The log's events of the changes within [cut0, cut1], and the collector's inferred ones
    (every change, in the poll window that holds it)."""
    evs = []
    bounds = sorted({-0.25, *polls, 60.25})
    for i, (t, (event, result)) in enumerate(changes):
        ts = 1_000_000.0 + t
        base = {"event": event, "node": NODE, "peer": f"127.0.0.1:{8000 + i % 3}"}
        if result is not None:
            base["result"] = result
        if cut0 <= t <= cut1:
            evs.append({**base, "ts": ts, "source": "redis-log", "sync_id": f"log{i}"})
        since = max(b for b in bounds if b < t)
        until = min(b for b in bounds if b > t)
        evs.append({**base, "ts": 1_000_000.0 + until, "since": 1_000_000.0 + since,
                    "source": "collector", "inferred": 1, "sync_id": f"col{i}"})
    return evs


def _kept(evs) -> list[tuple]:  # noqa: ANN001
    return sorted((e["event"], e.get("result") or "", e["ts"], e.get("source") or "",
                   e.get("sync_id") or "") for e in evs)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=CHANGES, cut0=st.floats(0, 60), span=st.floats(0, 60), polls=POLLS)
def test_spark_keeps_what_the_oracle_keeps_one_per_change(spark, changes, cut0, span,
                                                          polls) -> None:  # noqa: ANN001
    evs = _events(changes, cut0, cut0 + span, polls)
    want = oracle_prefer([dict(e) for e in evs])
    # one per change: as many kept of each kind as there were changes of it
    kinds = sorted(match_key({"event": e, "result": r}) for _, (e, r) in changes)
    assert sorted(match_key(e) for e in want) == kinds
    # the log's own events are all kept (it is the richer source)
    assert {e["sync_id"] for e in want if e["source"] == "redis-log"} == {
        e["sync_id"] for e in evs if e["source"] == "redis-log"}
    df = spark.read.schema(spark_schema(with_corrupt=False)).json(
        spark.sparkContext.parallelize([json.dumps(e) for e in evs], 1))
    got = [r.asDict() for r in prefer_sources(df).collect()]
    assert _kept(got) == _kept(want)


REPLICAS = [f"127.0.0.1:{8000 + i}" for i in range(3)]


def _replica_side(changes, cut0: float, cut1: float, polls: list[float]):  # noqa: ANN001, ANN202
    """The master NODE watched by the collector only; its replicas' logs (within [cut0, cut1])
    saw their side of its decisions: a PSYNC reply from NODE. A dual-channel sync is two
    inferred decisions (a full one, and the partial its main channel's PSYNC counts)."""
    evs = []
    bounds = sorted({-0.25, *polls, 60.25})
    for i, (t, result) in enumerate(changes):
        ts = 1_000_000.0 + t
        replica = REPLICAS[i % 3]
        if cut0 <= t <= cut1:
            evs.append({"event": "psync_reply", "node": replica, "peer": NODE, "ts": ts,
                        "result": result, "source": "redis-log", "sync_id": f"log{i}"})
        since = max(b for b in bounds if b < t)
        until = min(b for b in bounds if b > t)
        for j, inferred in enumerate(("full", "continue") if result == "dualchannel"
                                     else (result,)):
            # the collector names the replica of some (the list showed it), not of others
            peer = replica if (i + j) % 2 else None
            evs.append({"event": "psync_decision", "node": NODE, "peer": peer, "ts":
                        1_000_000.0 + until, "since": 1_000_000.0 + since, "result": inferred,
                        "source": "collector", "inferred": 1, "sync_id": f"col{i}.{j}"})
    return evs


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.integers(0, 119).map(lambda i: i * 0.5),
                                  st.sampled_from(["continue", "full", "dualchannel"])),
                        min_size=1, max_size=12, unique_by=lambda x: x[0]),
       cut0=st.floats(0, 60), span=st.floats(0, 60), polls=POLLS)
def test_a_master_seen_from_its_replicas_logs_keeps_one_decision_per_sync(
        spark, changes, cut0, span, polls) -> None:  # noqa: ANN001
    """Each sync is once among the replicas' replies and the master's inferred decisions that
    are kept: per poll window and kind, as many decisions kept as the window's syncs no
    replica logged (a dual-channel sync: a full and a partial one); Spark keeps what the
    oracle keeps."""
    evs = _replica_side(changes, cut0, cut0 + span, polls)
    want = oracle_prefer([dict(e) for e in evs])
    logged = {e["sync_id"] for e in evs if e["source"] == "redis-log"}
    assert {e["sync_id"] for e in want if e["source"] == "redis-log"} == logged
    windows: Counter = Counter()
    for e in evs:   # the collector's decisions of the syncs no replica logged
        if e["source"] == "collector" and f"log{e['sync_id'][3:].split('.')[0]}" not in logged:
            windows[(e["ts"], e["result"])] += 1
    assert Counter((e["ts"], e["result"]) for e in want if e["source"] == "collector") \
        == windows
    df = spark.read.schema(spark_schema(with_corrupt=False)).json(
        spark.sparkContext.parallelize([json.dumps(e) for e in evs], 1))
    got = [r.asDict() for r in prefer_sources(df).collect()]
    assert _kept(got) == _kept(want)


def test_a_logs_unknown_host_takes_the_name_the_other_sources_give(spark) -> None:
    """``unknown:PORT`` (a log whose host no other log gave): voted by the matching PSYNCs of
    the other end (a master's decision and its replica's PSYNC, 1 ms apart), else the only name
    with that port anywhere (the collector's samples too), else left; Spark as the oracle."""
    from pyrepl.analytics.logread import name_unknown
    from tests.analytics.oracle import name_unknown as oracle_name_unknown

    t = 1_000_000.0
    log = {"source": "redis-log"}
    evs = [
        # a master known only by its own log; its replica (pyrepl) names it
        {"ts": t, "event": "psync_decision", "node": "unknown:7001", "role": "master",
         "peer": "127.0.0.1:8000", "result": "full", **log},
        {"ts": t + 0.001, "event": "psync_sent", "node": "127.0.0.1:8000", "role": "replica",
         "peer": "10.0.0.5:7001"},
        # a replica known only by its own log; its master (pyrepl) names it
        {"ts": t + 10, "event": "psync_sent", "node": "unknown:8001", "role": "replica",
         "peer": "127.0.0.1:7002", **log},
        {"ts": t + 10, "event": "psync_decision", "node": "127.0.0.1:7002", "role": "master",
         "peer": "10.0.0.6:8001", "result": "continue"},
        # no PSYNC to match: the one name with that port (a collector's sample), or several
        {"ts": t + 20, "event": "link_down", "node": "unknown:9000", "role": "replica", **log},
        {"ts": t + 20, "event": "link_down", "node": "unknown:9100", "role": "replica", **log},
    ]
    samples = [{"ts": t, "event": "info_sample", "node": n} for n in (
        "10.0.0.9:7001", "127.0.0.1:9000", "10.0.0.1:9100", "10.0.0.2:9100")]
    want = oracle_name_unknown([dict(e) for e in evs], samples)
    assert [e["node"] for e in want] == [
        "10.0.0.5:7001", "127.0.0.1:8000", "10.0.0.6:8001", "127.0.0.1:7002",
        "127.0.0.1:9000", "unknown:9100"]
    df = spark.read.schema(spark_schema(with_corrupt=False)).json(
        spark.sparkContext.parallelize([json.dumps(e) for e in evs], 1))
    known = spark.createDataFrame([(s["node"],) for s in samples], "_n string")
    got = sorted((r["ts"], r["event"], r["node"]) for r in name_unknown(df, known).collect())
    assert got == sorted((e["ts"], e["event"], e["node"]) for e in want)
