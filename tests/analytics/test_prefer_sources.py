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
