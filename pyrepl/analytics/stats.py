"""Quantile summaries in one shape, from Spark aggregates (approximate) or from small collected
columns (exact), and the number helpers the summary and the advice share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pyrepl.analytics.schema import (
    QUANTILES,
)
from pyrepl.analytics.sql import _F


def stat_aggs(name: str, col: Any, qs: Sequence[float] = QUANTILES) -> list[Any]:
    F = _F()
    return [F.count(col).alias(f"{name}__n"),
            F.percentile_approx(col, list(qs), 10000).alias(f"{name}__q"),
            F.max(col).alias(f"{name}__max")]


def stat_from_row(row: dict[str, Any], name: str,
                  qs: Sequence[float] = QUANTILES) -> dict[str, Any]:
    n = row[f"{name}__n"]
    out: dict[str, Any] = {"count": int(n or 0)}
    q = row[f"{name}__q"] if n else None
    for i, p in enumerate(qs):
        out[f"p{round(p * 100):d}"] = _num(q[i]) if q else None
    out["max"] = _num(row[f"{name}__max"]) if n else None
    return out


NUMPY_FROM = 512   # values from which nearest_rank partitions them with numpy


def nearest_rank(values: Sequence[Any], qs: Sequence[float]) -> list[Any] | None:
    """Exact nearest-rank percentiles of the non-null values (None when there are none), in
    Spark's order of doubles: NaN above every number. Many floats alone or ints alone (a
    run's lag samples: ~200k) are partitioned by numpy, in linear time (~6x less than a
    sort); others are sorted (``by_sort``, the reference the tests hold it to)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return None
    ks = rank_positions(len(vs), qs)
    if len(vs) >= NUMPY_FROM:
        got = _partitioned(vs, ks)
        if got is not None:
            return got
    return by_sort(vs, ks)


def rank_positions(n: int, qs: Sequence[float]) -> list[int]:
    """The nearest-rank positions (0-based) of quantiles ``qs`` among ``n`` sorted values."""
    return [max(1, math.ceil(q * n)) - 1 for q in qs]


def by_sort(vs: list[Any], ks: Sequence[int]) -> list[Any]:
    """The values of ``vs`` (none null; sorted in place) at sorted positions ``ks``, NaNs
    last. (Python's ``sort``
    leaves a NaN where the input had it, and the numbers around it unordered: the NaNs are
    taken out, the numbers sorted as they are, a key function being several times slower,
    and the NaNs put last.)"""
    nans = [v for v in vs if v != v]
    if nans:
        vs = [v for v in vs if v == v]
    vs.sort()
    vs += nans
    return [vs[k] for k in ks]


def _partitioned(vs: list[Any], ks: Sequence[int]) -> list[Any] | None:
    """``by_sort`` by numpy's partition (NaN last too), for floats alone or ints alone that
    fit 64 bits (exactly: no value converted); else None."""
    import numpy as np

    kinds = set(map(type, vs))
    cast: Any
    if kinds == {float}:
        arr, cast = np.array(vs, dtype=np.float64), float
    elif kinds == {int}:
        try:
            arr, cast = np.array(vs, dtype=np.int64), int
        except OverflowError:
            return None
    else:
        return None
    part = np.partition(arr, sorted(set(ks)))
    return [cast(part[k]) for k in ks]


def py_stat(values: Sequence[Any], qs: Sequence[float] = QUANTILES) -> dict[str, Any]:
    """The same shape as stat_from_row, exact (nearest rank), for small collected columns."""
    vs = [v for v in values if v is not None]
    out: dict[str, Any] = {"count": len(vs)}
    ranks = nearest_rank(vs, (*qs, 1.0)) or [None] * (len(qs) + 1)
    for p, v in zip(qs, ranks, strict=False):
        out[f"p{round(p * 100):d}"] = _num(v)
    out["max"] = _num(ranks[-1])
    return out


def _num(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return v
    return int(v) if isinstance(v, int) else v


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None
