"""Comparing the Spark job's tables and summary with the oracle's.

Counts and keys must be equal; floating values equal up to rounding (sums in another order);
percentiles from ``percentile_approx`` must be one of the oracle's values within a rank or two of
the nearest-rank percentile (the approximation's error at accuracy 10000 is below one rank for
the sizes the tests use).
"""

from __future__ import annotations

import math
from typing import Any

FLOAT_REL = 1e-9
SENTINEL = float(2 ** 62)


def same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=FLOAT_REL, abs_tol=1e-9)
    return a == b


def rows_by_key(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for r in rows:
        k = tuple(r[c] for c in key)
        assert k not in out, f"duplicate key {k}"
        out[k] = r
    return out


def assert_tables_equal(spark_rows: list[dict[str, Any]], oracle_rows: list[dict[str, Any]],
                        key: tuple[str, ...], name: str) -> None:
    a = rows_by_key(spark_rows, key)
    b = rows_by_key(oracle_rows, key)
    assert set(a) == set(b), f"{name}: keys differ: spark-only {sorted(set(a) - set(b), key=str)[:5]}, " \
                             f"oracle-only {sorted(set(b) - set(a), key=str)[:5]}"
    for k, row in b.items():
        got = a[k]
        for col, want in row.items():
            if col.startswith("_") or col not in got:
                continue
            assert same(got[col], want), f"{name} {k}: {col} = {got[col]!r}, oracle {want!r}"


def rank_ok(value: Any, values: list[Any], q: float, slack: int = 2) -> bool:
    if not values:
        return value is None
    n = len(values)
    k = max(1, math.ceil(q * n)) - 1
    tol = slack + math.ceil(n / 10000)
    lo, hi = max(0, k - tol), min(n - 1, k + tol)
    return any(same(value, v) for v in values[lo:hi + 1])


def assert_summary_matches(got: Any, want: Any, path: str = "summary") -> None:
    if isinstance(want, dict) and "_values" in want:
        assert isinstance(got, dict), path
        vals = want["_values"]
        assert got["count"] == want["count"], f"{path}.count {got['count']} != {want['count']}"
        assert same(got["max"], want["max"]), f"{path}.max {got['max']} != {want['max']}"
        for k, v in got.items():
            if k.startswith("p") and k[1:].isdigit():
                q = int(k[1:]) / 100
                assert rank_ok(v, vals, q), f"{path}.{k} = {v}, oracle values {vals[:20]}... " \
                                            f"nearest rank {want[k]}"
        return
    if isinstance(want, dict) and "_needs" in want:  # backlog advice: quantiles of the needs
        needs = [None if v >= SENTINEL else int(v) for v in want["_needs"]]
        for k, v in got.items():
            assert rank_ok(v, needs, int(k[1:]) / 100), f"{path}.{k} = {v}, needs {needs[:20]}"
        return
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{path}: {got!r}"
        for k, v in want.items():
            assert k in got, f"{path}.{k} missing in the Spark summary"
            assert_summary_matches(got[k], v, f"{path}.{k}")
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_summary_matches(g, w, f"{path}[{i}]")
        return
    assert same(got, want), f"{path}: spark {got!r}, oracle {want!r}"
