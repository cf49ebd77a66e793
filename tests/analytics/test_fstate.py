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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# -- the columnar merge against the rules one row at a time (no Spark) ---------------------------

NAN, INF = float("nan"), float("inf")
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
INTS = st.one_of(st.none(), st.integers(-3, 3), I64)
DOUBLES = st.one_of(st.none(), st.sampled_from([NAN, 0.0, -0.0, INF, -INF, 1.5, -2.25]),
                    st.floats())
NUMBERS = st.one_of(INTS, DOUBLES)
DOUBLE_VALS = ("lm_odd", "lm_max", "ts_min", "ts_max")     # the figures' doubles (else longs)
ROW_TYPE = (("event", "string"), ("source", "string"), ("inferred", "int64"))


def exact(v):
    """A value as a comparable key that tells what ``canon`` does not: -0.0 from 0.0, a long
    from a double (NaN still one value)."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else ("float", v, math.copysign(1.0, v))
    if isinstance(v, dict):
        return tuple(sorted((k, exact(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(exact(x) for x in v)
    if isinstance(v, set):
        return tuple(sorted(map(exact, v), key=repr))
    return v


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NUMBERS, NUMBERS), min_size=len(fstate.VALS),
                max_size=len(fstate.VALS)))
def test_the_made_merge_is_the_rules(pairs) -> None:
    """``merge_into`` (the code made for VALS) is ``merge_each`` (a function a value)."""
    acc = [a for a, _ in pairs]
    vals = tuple(v for _, v in pairs)
    want = list(acc)
    fstate.merge_each(want, vals)
    fstate.merge_into(acc, vals)
    assert exact(acc) == exact(want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(NUMBERS, min_size=len(fstate.VALS),
                                                      max_size=len(fstate.VALS))),
                max_size=40),
       st.dictionaries(st.integers(0, 5), st.lists(NUMBERS, min_size=len(fstate.VALS),
                                                   max_size=len(fstate.VALS)), max_size=3),
       st.sampled_from([1, 2, fstate.COLUMNS_FROM]), st.booleans())
def test_merge_rows_is_one_at_a_time(rows, start, columns_from, with_cols) -> None:
    """``merge_rows`` (values gathered per key, folded a column at a time, or one by one) is
    the rows merged one at a time by the rules (``merge_each``): the same values, the new keys
    in the same order."""
    keys = [(k,) for k, _ in rows]
    vals = [tuple(v) for _, v in rows]
    want = {(k,): list(v) for k, v in start.items()}
    got = {(k,): list(v) for k, v in start.items()}
    for k, v in zip(keys, vals, strict=True):
        if k in want:
            fstate.merge_each(want[k], v)
        else:
            want[k] = list(v)
    old = fstate.COLUMNS_FROM
    fstate.COLUMNS_FROM = columns_from
    try:
        fstate.merge_rows(got, keys, range(len(vals)), vals,
                          list(zip(*vals, strict=True)) if with_cols and vals else None)
    finally:
        fstate.COLUMNS_FROM = old
    assert exact(list(got.items())) == exact(list(want.items()))


class OneAtATime(FollowState):
    """The state's ``add`` and ``redraw`` a row at a time, by the rules as written (as they
    were before they went a column at a time): what those must give exactly."""

    def add(self, rows, every) -> None:
        self.redraw(max(self.every, every))
        nk, nv = len(fstate.KEYS), len(fstate.VALS)
        for r in rows:
            key = tuple(fstate._norm(x) for x in r[:nk])
            vals = tuple(r[nk + 2:nk + 2 + nv])
            if r[nk + 1] is not None:
                row = dict(r[nk + 1])
                self.events.append((row, vals))
                self.count((None, row["event"]), vals, None, fstate.source_rank(row))
                continue
            lag = fstate.is_lag_key(key)
            self.count((key[0], key[5] or "replica_lag"), vals,
                       fstate.run_of(key) if lag else None, None)
            if lag and self._series is not None:
                b, acc = self._series
                one(acc, (*key[1:4], fstate.in_bucket(key[fstate.FB], b)), vals)
            if r[nk] is not None and lag and r[-1] % self.every == 0:
                self.samples.append((key, vals, r[-1]))
                if self._by_link is not None:
                    fstate._to_link(self._by_link, key, vals)
            else:
                one(self.groups, key, vals)

    def count(self, key, vals, run, rank) -> None:
        a = self.counts.entry(key)
        a[0] += vals[fstate.VALS.index("n")]
        a[1] = fstate._min(a[1], vals[fstate.VALS.index("ts_min")])
        a[2] = fstate._max(a[2], vals[fstate.VALS.index("ts_max")])
        if run is not None:
            a[3].add(run)
        if rank is not None:
            a[4].add(rank)

    def redraw(self, every) -> None:
        if every == self.every:
            return
        self._by_link = None
        keep = []
        for key, vals, h in self.samples:
            if h % every == 0:
                keep.append((key, vals, h))
            else:
                one(self.groups, key, vals)
        self.samples = keep
        self.every = every


def one(acc, key, vals) -> None:
    a = acc.get(key)
    if a is None:
        acc[key] = list(vals)
    else:
        fstate.merge_each(a, vals)


def held(state: FollowState):
    """Everything a state holds, in its order, exactly (``exact``)."""
    return exact((state.every, list(state.groups.items()), state.samples, state.events,
                  list(state.counts.acc.items()),
                  state._series and (state._series[0], list(state._series[1].items())),
                  state._by_link and list(state._by_link.items())))


NAME = st.sampled_from([None, "m:1", "r:1", "r:2"])
FB_VALUES = st.sampled_from([None, NAN, 0.0, -0.0, 10.0, 20.0, 30.0, -10.0, 1e300, INF])


@st.composite
def agg_row(draw):
    """A collected row (``collect_columns``): a lag group or sample, a bad or counted group,
    or an event; figures of every kind (nulls, NaN, signed zeros, extremes)."""
    kind = draw(st.sampled_from(["lag", "lag", "lag", "lag", "bad", "counted", "event"]))
    keys = [None] * len(fstate.KEYS)
    sid = row = None
    if kind == "lag":
        keys[1:5] = [draw(NAME), draw(NAME), draw(st.sampled_from([None, "x", "y"])),
                     draw(FB_VALUES)]
        sid = draw(st.one_of(st.none(), st.integers(0, 9)))
    elif kind == "bad":
        keys[0] = draw(st.sampled_from(["unparseable", "unknown-event"]))
    elif kind == "counted":   # (and keys no pass makes: counted as the lag rows are)
        keys[5:8] = [draw(st.sampled_from(["info_sample", "info_sample", "replica_lag", ""])),
                     draw(NAME), draw(NAME)]
    else:
        sid = draw(st.integers(0, 9))
        row = {"event": draw(st.sampled_from(["psync_decision", "link_up", "replica_lag"])),
               "source": draw(st.sampled_from([None, "pyrepl", "redis", "x"])),
               "inferred": draw(st.sampled_from([None, 0, 1]))}
    vals = [draw(DOUBLES if v in DOUBLE_VALS else INTS) for v in fstate.VALS]
    vals[fstate.VALS.index("n")] = draw(st.integers(1, 1 << 40))   # a count: never null
    h = draw(st.one_of(st.sampled_from([0, 8, -16, 64]), st.integers(-40, 40), I64))
    return (*keys, sid, row, *vals, h)


def arrow_table(rows):
    """Rows as ``collect_arrow`` gives them (its types) for ``rows_of``."""
    import pyarrow as pa

    names = [*fstate.KEYS, "sid", "row", *fstate.VALS, "_h"]
    row_type = pa.struct([(n, getattr(pa, t)()) for n, t in ROW_TYPE])
    types = {n: pa.string() for n in fstate.KEYS} | {"fb": pa.float64(), "row": row_type} | \
        {n: pa.float64() for n in DOUBLE_VALS}
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return pa.table({n: pa.array(list(c), types.get(n, pa.int64()))
                     for n, c in zip(names, cols, strict=True)})


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_the_states_columnar_add_is_one_row_at_a_time(data) -> None:
    """``FollowState.add`` (rows sorted out in one loop, merged per target a key or a column
    at a time; from ``rows_of``'s columns or from rows) and ``redraw`` leave exactly the state
    the rules a row at a time leave, in the same order: groups, samples, events, counts, and
    the series and samples per link kept up to date, through redraws, coarser buckets and
    reads; folding a column at a time from few rows too."""
    got, want = FollowState(), OneAtATime()
    old = fstate.COLUMNS_FROM
    fstate.COLUMNS_FROM = data.draw(st.sampled_from([1, 3, old]))
    try:
        for _ in range(data.draw(st.integers(1, 6))):
            rows = data.draw(st.lists(agg_row(), max_size=60))
            every = data.draw(st.sampled_from([got.every, got.every, got.every, 1,
                                               2 * got.every]))
            got.add(fstate.rows_of(arrow_table(rows)) if data.draw(st.booleans()) else rows,
                    every)
            want.add(rows, every)
            assert held(got) == held(want)
            step = data.draw(st.sampled_from(["read", "read", "none", "redraw", "rebucket"]))
            if step == "read":
                b = data.draw(st.sampled_from([10.0, 20.0, 60.0]))
                for s in (got, want):
                    s.series(b)
                    s.link_samples()
            elif step == "redraw":
                every = got.every * data.draw(st.sampled_from([1, 2, 4]))
                got.redraw(every)
                want.redraw(every)
            elif step == "rebucket":
                b = data.draw(st.sampled_from([20.0, 60.0]))
                got.rebucket(b)
                want.rebucket(b)
            assert held(got) == held(want)
    finally:
        fstate.COLUMNS_FROM = old


def test_rows_of_is_the_tables_rows() -> None:
    """``rows_of`` iterated: the table's rows (``fb`` normalized: one NaN, no -0.0), its
    string columns through their dictionary, its events' structs where they are."""
    rows = [(None, "m:1", "r:1", "x", -0.0, None, None, None, 3, None, *range(13), 5),
            ("bad", None, None, None, None, None, None, None, None, None, *range(13), 6),
            (*[None] * 8, 4, {"event": "link_up", "source": None, "inferred": 1},
             *range(13), 7),
            (None, "m:1", None, "x", NAN, None, None, None, None, None, *range(13), 8)]
    rows = [(*r[:10], *[float(x) if v in DOUBLE_VALS else x
                        for v, x in zip(fstate.VALS, r[10:23], strict=True)], r[23])
            for r in rows]
    got = list(fstate.rows_of(arrow_table(rows)))
    assert exact(got) == exact([(*r[:4], fstate._norm(r[4]), *r[5:]) for r in rows])
    assert got[0][4] == 0.0 and math.copysign(1.0, got[0][4]) == 1.0
    assert got[0][1] is got[3][1]                      # one str a distinct value
    assert len(fstate.rows_of(arrow_table([]))) == 0


def test_a_count_takes_its_rows_in_order() -> None:
    """The lag rows' count and other rows counted with them (rows no pass makes: counted as
    ``replica_lag``) take their rows in the rows' order (a tie of -0.0 and 0.0 keeps the
    first, as one row at a time)."""
    def row(counted, t):
        keys = [None, "m:1", "r:1", "x", 10.0, None, None, None] if counted is None else \
            [None] * 5 + [counted, None, None]
        vals = [1 if v not in DOUBLE_VALS else t for v in fstate.VALS]
        return (*keys, None, None, *vals, 0)

    rows = [row(None, 0.0), row("replica_lag", -0.0), row(None, -0.0), row("", 0.0),
            row("info_sample", 0.0)]
    for order in (rows, rows[::-1], rows[1:] + rows[:1]):
        got, want = FollowState(), OneAtATime()
        got.add(order, 1)
        want.add(order, 1)
        assert held(got) == held(want)
