"""``metrics --follow``'s merged aggregate on the driver (pyrepl/analytics/fstate.py) against
Spark's: batches of a fleet's lines (odd values among them: NaN and infinite lag_ms, a
fraction, missing figures, malformed lines, the collector's samples), each aggregated by the
pass with its own modulus and merged in Python, are the rows ``read.merge_aggregates`` makes
of their union, also coarsened to a bucket; the counts are ``job.pass_counts``'; and a
trigger's finish from them is the batch job's over the same lines, every table and the
summary."""

from __future__ import annotations

import functools
import math
import os
import random

import pytest

from pyrepl.analytics import fstate
from pyrepl.analytics.follow import FollowConfig, Follower, stored_bucket
from pyrepl.analytics.fstate import FollowState, collect_columns
from pyrepl.analytics.job import JobConfig, event_dict, finish, pass_counts, run
from pyrepl.analytics.read import AGG_KEYS, AGG_MERGE, merge_aggregates
from pyrepl.analytics.rowtable import json_relation
from pyrepl.analytics.sql import _F
from pyrepl.analytics.syncs import linked, with_link
from tests.analytics.jobcheck import results
from tests.analytics.test_follow import batch_agg, fleet_lines

pytestmark = pytest.mark.slow

ODD = [
    '{"ts":%r,"event":"replica_lag","node":"m9:1","peer":"r9:1","run_id":"x","offset":5,'
    '"lag_bytes":7,"lag_ms":NaN}\n',
    '{"ts":%r,"event":"replica_lag","node":"m9:1","peer":"r9:1","run_id":"x","offset":6,'
    '"lag_bytes":9,"lag_ms":Infinity}\n',
    '{"ts":%r,"event":"replica_lag","node":"m9:1","peer":"r9:1","run_id":"x","offset":8,'
    '"lag_ms":0.1}\n',
    '{"ts":%r,"event":"replica_lag","node":"m9:1","peer":"r9:1","run_id":"x","offset":9,'
    '"lag_bytes":3,"lag_ms":-Infinity}\n',
    '{"ts":%r,"event":"info_sample","node":"r9:1","peer":"m9:1","role":"replica"}\n',
    '{"ts":%r,"event":"no_such_event","node":"m9:1"}\n',
    '{"ts":%r,"event":"replica_lag"\n',
]


def odd_lines(t0: float, rng: random.Random) -> list[str]:
    out = []
    for i in range(60):
        tmpl = ODD[i % len(ODD)]
        out.append(tmpl % (t0 + rng.uniform(0, 3600)) if "%r" in tmpl else tmpl)
    return out


def canon(v):
    """A value as a comparable key: NaN one value, rows as sorted items, lists of them."""
    if isinstance(v, float) and math.isnan(v):
        return ("nan",)
    if hasattr(v, "asDict"):
        v = v.asDict()
    if isinstance(v, dict):
        return tuple(sorted((k, canon(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(canon(x) for x in v)
    return v


def spark_rows(df) -> list[tuple]:
    cols = [k for k in AGG_KEYS if k != "sid"] + [n for n, _ in AGG_MERGE]
    keys = [k for k in AGG_KEYS if k not in ("sid", "row")]
    # fstate's row order: the group keys, row, the figures
    order = [*keys, "row", *[n for n, _ in AGG_MERGE]]
    assert sorted(order) == sorted(cols)
    return sorted((tuple(canon(r[c]) for c in order) for r in df.collect()), key=repr)


def state_rows(state: FollowState) -> list[tuple]:
    return sorted((tuple(canon(x) for x in r) for r in state.rows()), key=repr)


@pytest.fixture(scope="module")
def batches(spark, tmp_path_factory):
    """The lines (shuffled, with odd ones), cut into 5 batches, each aggregated with its own
    modulus (growing, as the follower's), with the final modulus."""
    tmp = tmp_path_factory.mktemp("fstate")
    rng = random.Random(3)
    lines = fleet_lines(str(tmp), 2)
    t0 = min(float(x.split('"ts":')[1].split(",")[0]) for x in lines[:50] if '"ts":' in x)
    lines += odd_lines(t0, rng)
    rng.shuffle(lines)
    path = os.path.join(tmp, "all.ndjson")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines)
    cuts = sorted(rng.sample(range(1, len(lines)), 4))
    parts = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    everys = [1, 2, 2, 4, 8]
    aggs = [batch_agg(spark, os.path.join(tmp, f"part{i}.ndjson"), p, e).cache()
            for i, (p, e) in enumerate(zip(parts, everys, strict=True))]
    yield {"path": path, "aggs": aggs, "everys": everys, "lines": lines, "tmp": tmp}
    for a in aggs:
        a.unpersist()


def merged_state(aggs, everys) -> FollowState:
    """The aggregates merged in the state, collected as the follower does (Arrow), the first
    also as Spark's rows (the state takes either)."""
    F = _F()
    state = FollowState()
    for i, (a, e) in enumerate(zip(aggs, everys, strict=True)):
        state.add(a.select(*collect_columns(F)).collect() if i == 0 else fstate.collect(a), e)
    return state


def test_the_states_merge_is_sparks(spark, batches) -> None:
    aggs, everys = batches["aggs"], batches["everys"]
    union = functools.reduce(lambda a, b: a.unionByName(b), aggs)
    state = merged_state(aggs, everys)
    assert state.every == 8
    assert state_rows(state) == spark_rows(merge_aggregates(union, 8))
    # the state's counts are the merge's (HyperLogLog's run count: within its error)
    merged = merge_aggregates(union, 8).cache()

    def by_key(rows):
        return {(r["bad"], r["event"]): {k: canon(r[k]) for k in ("n", "t0", "t1")} |
                {"ranks": sorted(r["ranks"])} for r in rows}

    want = pass_counts(merged)
    got = fstate.pass_counts([state])
    assert by_key(got) == by_key(want)
    runs = {(r["bad"], r["event"]): r["runs"] for r in want}
    for r in got:
        assert abs(r["runs"] - runs[(r["bad"], r["event"])]) <= max(1, 0.1 * r["runs"])
    assert any(r["bad"] is not None for r in got) and any(r["event"] == "info_sample"
                                                           for r in got)
    merged.unpersist()
    # coarsened, as a compaction stores it
    for bucket in (30.0, 300.0):
        state.rebucket(bucket)
        assert state_rows(state) == spark_rows(merge_aggregates(union, 8, bucket))
    # and a later, bigger modulus
    state.redraw(32)
    assert state_rows(state) == spark_rows(merge_aggregates(union, 32, 300.0))


def test_a_trigger_finished_from_the_state_is_the_batch_job(spark, batches) -> None:
    aggs, everys = batches["aggs"], batches["everys"]
    state = merged_state(aggs, everys)
    tmp = batches["tmp"]
    os.makedirs(os.path.join(tmp, "followed"), exist_ok=True)
    fo = Follower(spark, FollowConfig([os.path.join(tmp, "followed")],
                                      os.path.join(tmp, "out"), os.path.join(tmp, "ck")))
    try:
        cfg = JobConfig(lag_sample_every=8)
        want = results(run(spark, [batches["path"]], cfg))
        union = functools.reduce(lambda a, b: a.unionByName(b), aggs)
        got = results(finish(spark, merge_aggregates(union, 8), fstate.pass_counts([state]),
                             [batches["path"]], "json", 8, None, cfg,
                             inputs=functools.partial(fo.inputs, [state])))
        assert canon(got) == canon(want)
        # compacted to the coarsest bucket the run can still choose: the same finish
        coarse = stored_bucket(want["summary"]["input"]["bucket_s"])
        state.rebucket(coarse)
        again = results(finish(spark, merge_aggregates(union, 8, coarse),
                               fstate.pass_counts([state]), [batches["path"]], "json", 8,
                               None, cfg, inputs=functools.partial(fo.inputs, [state])))
        assert canon(again) == canon(want)
        assert got["summary"]["input"]["malformed_lines"] > 0
    finally:
        fo.close()


def test_events_linked_on_the_driver_are_sparks(spark, batches) -> None:
    """``syncs.linked`` (a trigger's events with one source and no unknown host) is
    ``with_link`` through Spark, as ``job.event_dict`` takes its rows: every event of the
    fleet, and events with a field missing."""
    state = merged_state(batches["aggs"], batches["everys"])
    tmp = batches["tmp"]
    os.makedirs(os.path.join(tmp, "followed"), exist_ok=True)
    fo = Follower(spark, FollowConfig([os.path.join(tmp, "followed")],
                                      os.path.join(tmp, "out2"), os.path.join(tmp, "ck2")))
    try:
        rows = [row for row, _ in state.events]
        kinds = {r["event"] for r in rows}
        assert {"psync_decision", "link_up"} <= kinds, kinds  # both sides
        odd = [{**rows[0], "peer": None}, {**rows[-1], "node": None, "peer": None}]
        rows += odd
        ev = with_link(json_relation(spark, fo.row_ddl, rows))
        fields = list(enumerate(ev.columns))
        want = [event_dict(r, fields) for r in ev.collect()]
        assert [linked(r) for r in rows] == want
        assert sum(e["master"] is None for e in want) >= 1
    finally:
        fo.close()


def test_a_compaction_written_from_the_state_reads_back_as_it(spark, batches) -> None:
    """``FollowState.table`` (the store's compaction, written by pyarrow): Spark reads it
    in the pass's schema, and merging it (alone, or with a later batch) gives the state's
    rows; its span is Spark's min and max over the good records."""
    import pyarrow.parquet as pq

    F = _F()
    aggs, everys = batches["aggs"], batches["everys"]
    tmp = batches["tmp"]
    state = merged_state(aggs[:4], everys[:4])
    span = merge_aggregates(functools.reduce(lambda a, b: a.unionByName(b), aggs[:4]), 4) \
        .filter(F.col("bad").isNull()).agg(F.min("ts_min"), F.max("ts_max")).first()
    assert state.span() == (span[0], span[1])
    state.rebucket(30.0)
    path = os.path.join(tmp, "compact-table")
    os.makedirs(path, exist_ok=True)
    pq.write_table(state.table(aggs[0].schema), os.path.join(path, "part-0.parquet"))
    # the file's own types are the pass's (the follower reads it with the pass's schema)
    assert spark.read.parquet(path).schema.simpleString() == aggs[0].schema.simpleString()
    stored = spark.read.schema(aggs[0].schema).parquet(path)
    assert spark_rows(merge_aggregates(stored, 4)) == state_rows(state)
    # a later batch merged with the compaction: as with the state
    both = merge_aggregates(stored.unionByName(aggs[4]), 8, 30.0)
    state.add(fstate.collect(aggs[4]), 8)
    state.rebucket(30.0)
    assert spark_rows(both) == state_rows(state)
    # read back into a new state (a restart)
    again = FollowState()
    again.add(fstate.collect(merge_aggregates(stored, 4)), 4)
    again.add(fstate.collect(aggs[4]), 8)
    again.rebucket(30.0)
    assert state_rows(again) == state_rows(state)


def test_what_a_finish_reads_is_kept_as_rows_are_added(batches) -> None:
    """The lag series and the samples per link, read after every step (rows added, a
    redraw, a coarser bucket, another bucket asked for: kept up to date), are what a state
    that went through the same steps unread builds afresh; and the union of two states' is
    the state holding both's."""
    rows = [fstate.collect(a) for a in batches["aggs"]]
    everys = batches["everys"]

    def series(states, b):
        return sorted((canon(r) for r in fstate.series_rows(states, b)), key=repr)

    def link_samples(states):
        return {k: (sorted(map(canon, lb), key=repr), sorted(map(canon, lm), key=repr))
                for k, (lb, lm) in fstate.samples_by_link(states).items()}

    def afresh(steps):
        s = FollowState()
        for step in steps:
            step(s)
        return s

    read, steps = FollowState(), []

    def step(f, buckets=(10.0, 60.0)):
        f(read)
        steps.append(f)
        for b in buckets:   # the second bucket asked for makes the first's series go
            fresh = afresh(steps)
            assert series([read], b) == series([fresh], b)
            assert link_samples([read]) == link_samples([fresh])

    for i in range(3):
        step(lambda s, i=i: s.add(rows[i], everys[i]))
    assert read.samples and any(fstate.is_lag_key(k) for k in read.groups)
    step(lambda s: s.redraw(4), buckets=(60.0,))
    step(lambda s: s.add(rows[3], everys[3]), buckets=(60.0, 10.0))
    step(lambda s: s.rebucket(30.0), buckets=(10.0, 60.0))   # 10 s series: now per 30 s

    def rebucket_60(s):
        before = s._series
        s.rebucket(60.0)
        if s is read:   # the 60 s series read last is whole 60 s buckets: kept, not rebuilt
            assert before is not None and s._series is before
    step(rebucket_60, buckets=(60.0, 600.0))
    step(lambda s: s.add(rows[4], everys[4]), buckets=(60.0, 600.0))
    # two states (the follower's, its Redis logs'), drawn alike: their union's
    other = afresh([lambda s: s.add(rows[0], 8)])
    both = afresh(steps + [lambda s: s.add(rows[0], 8)])
    assert series([read, other], 600.0) == series([both], 600.0)
    assert link_samples([read, other]) == link_samples([both])
