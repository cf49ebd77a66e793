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


def nearest_rank(values: Sequence[Any], qs: Sequence[float]) -> list[Any] | None:
    """Exact nearest-rank percentiles of the non-null values (None when there are none), in
    Spark's order of doubles: NaN above every number. (Python's ``sorted`` leaves a NaN
    where the input had it, and the numbers around it unordered: the NaNs are taken out,
    the numbers sorted as they are, a key function being several times slower, and the NaNs
    put last.)"""
    vs = [v for v in values if v is not None]
    nans = [v for v in vs if v != v]
    if nans:
        vs = [v for v in vs if v == v]
    vs.sort()
    vs += nans
    if not vs:
        return None
    return [vs[max(1, math.ceil(q * len(vs))) - 1] for q in qs]


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
