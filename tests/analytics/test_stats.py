"""The exact percentiles of the driver's finish (``stats.nearest_rank``, ``py_stat``): Spark's
order of doubles (NaN above +inf), whatever order the values come in."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.analytics.stats import (
    NUMPY_FROM,
    by_sort,
    nearest_rank,
    py_stat,
    rank_positions,
)

QS = (0.0, 0.25, 0.5, 0.9, 0.99, 1.0)
doubles = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none())


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@settings(max_examples=300, deadline=None)
@given(st.lists(doubles, max_size=40), st.randoms(use_true_random=False))
def test_order_of_the_input_does_not_matter(values, rng) -> None:
    shuffled = list(values)
    rng.shuffle(shuffled)
    a, b = nearest_rank(values, QS), nearest_rank(shuffled, QS)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert all(same(x, y) for x, y in zip(a, b, strict=True)), (values, a, b)
    assert py_stat(values) == py_stat(shuffled)


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 5e-324, 1.0, 2.0**53 + 2]
KINDS = st.one_of(
    st.lists(st.one_of(st.floats(), st.sampled_from(SPECIAL)), min_size=1, max_size=60),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=60),
    st.lists(st.one_of(st.integers(-(2**70), 2**70), st.sampled_from([2**63, -(2**64)])),
             min_size=1, max_size=60),
    st.lists(st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.none(), st.booleans()),
             min_size=1, max_size=60))


@settings(max_examples=200, deadline=None)
@given(KINDS, st.integers(0, 40), st.randoms(use_true_random=False))
def test_many_values_are_partitioned_as_sorted(core, extra, rng) -> None:
    """From NUMPY_FROM values, numpy's partition gives what the sort gives: floats with
    NaNs, infinities and signed zeros, 64-bit ints, ints beyond (sorted), mixed kinds
    (sorted), nulls left out. (Each case: a drawn core of values, repeated in a shuffled
    order to NUMPY_FROM and some.)"""
    values = [rng.choice(core) for _ in range(NUMPY_FROM + extra)]
    vs = [v for v in values if v is not None]
    if not vs:
        return
    ks = rank_positions(len(vs), QS)
    got, want = nearest_rank(values, QS), by_sort(vs, ks)
    assert got is not None
    assert all(same(a, b) and type(a) is type(b) for a, b in zip(got, want, strict=True)), \
        (got, want)


def test_nan_ranks_above_infinity() -> None:
    vals = [float("nan"), 3.0, float("inf"), 1.0, None, -float("inf")]
    assert nearest_rank(vals, (0.2, 0.4, 0.6, 0.8))[:4] == [-float("inf"), 1.0, 3.0,
                                                             float("inf")]
    assert math.isnan(nearest_rank(vals, (1.0,))[0])
    # the summary's stat: a non-finite value is reported as none, counted all the same
    assert py_stat(vals) == {"count": 5, "p50": 3.0, "p90": None, "p99": None, "max": None}


def test_spark_sorts_doubles_the_same_way(spark) -> None:
    rng = random.Random(7)
    pool = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.5, -2.25, 1e300, None]
    cases = [[rng.choice(pool) for _ in range(rng.randint(1, 12))] for _ in range(20)]
    rows = spark.createDataFrame([(i, v) for i, c in enumerate(cases) for v in c],
                                 "case int, v double")
    got = {r["case"]: r["vs"] for r in rows.groupBy("case").agg(
        {"v": "collect_list"}).withColumnRenamed("collect_list(v)", "vs")
        .selectExpr("case", "sort_array(vs) AS vs").collect()}
    for i, c in enumerate(cases):
        spark_sorted = got.get(i, [])
        n = len(spark_sorted)
        want = [spark_sorted[max(1, math.ceil(q * n)) - 1] for q in QS] if n else None
        mine = nearest_rank(c, QS)
        assert (mine is None) == (want is None), c
        if mine is not None and want is not None:
            assert all(same(x, y) for x, y in zip(mine, want, strict=True)), (c, mine, want)
