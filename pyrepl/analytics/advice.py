"""Backlog advice: how big a backlog would have turned the full syncs into partial ones.

Theory of operation: an ``offset-before-backlog`` full sync needed ``histlen + gap`` bytes of
backlog (the backlog was full, so a bigger one would have kept the missing bytes); when the
backlog was not full (``histlen < backlog_size``) the bytes predate it and no size would have
helped. The quantiles of the need and the partial-sync ratio as a function of the backlog size
follow."""

from __future__ import annotations

import math
from typing import Any

from pyrepl.analytics.schema import (
    ADVICE_QUANTILES,
)
from pyrepl.analytics.stats import _ratio, py_stat

SENTINEL = float(2 ** 62)  # "no backlog size would have helped", sorted after every real need
CURVE_POWERS = tuple(range(16, 45))  # backlog sizes 64 KiB .. 16 TiB for the advice curve


def curve_sizes(current: int | None, max_need: float | None) -> list[int]:
    """Backlog sizes for the curve: powers of two from half the smallest configured size to the
    first one that holds the largest need (within 64 KiB .. 16 TiB)."""
    lo = max(1 << CURVE_POWERS[0], current or (1 << 20))
    k = max(CURVE_POWERS[0], int(math.floor(math.log2(lo))) - 1)
    hi = max(float(lo) * 2, max_need or 0.0)
    out = []
    while k <= CURVE_POWERS[-1]:
        out.append(1 << k)
        if (1 << k) >= hi:
            break
        k += 1
    return out


def backlog_advice(row: dict[str, Any], n_part: int, n_full: int,
                   sizes_by_master: list[int], rates: list[dict[str, Any]]) -> dict[str, Any]:
    """Advice from the offset-before-backlog syncs (quantiles and curve come from the syncs
    aggregate ``row``); coverage from the per-master write rates (one row per master) and the
    masters' backlog sizes."""
    n = int(row["obb"] or 0)
    adv: dict[str, Any] = {}
    for i, p in enumerate(ADVICE_QUANTILES):
        v = row["need_q"][i] if n and row["need_q"] else None
        adv[f"p{round(p * 100):d}"] = int(v) if v is not None and v < SENTINEL else None
    lo = min(sizes_by_master) if sizes_by_master else None
    hi = max(sizes_by_master) if sizes_by_master else None
    total = n_part + n_full
    curve = []
    for s in curve_sizes(lo, row["max_need"]):
        k = int(row[f"le{s.bit_length() - 1}"] or 0)
        curve.append({"backlog_bytes": s, "syncs_avoided": k,
                      "partial_ratio": _ratio(n_part + k, total)})
    return {
        "offset_before_backlog_syncs": n,
        "unfixable": int(row["unfixable"] or 0),
        "advice_bytes": adv,
        "current_backlog_bytes": {"min": lo, "max": hi},
        "curve": curve,
        "coverage_s": py_stat([x["coverage_s"] for x in rates]),
        "coverage_at_peak_s": py_stat([x["coverage_peak_s"] for x in rates]),
        "write_rate_bytes_per_s": py_stat([x["write_rate_avg"] for x in rates]),
        "peak_write_rate_bytes_per_s": py_stat([x["write_rate_peak"] for x in rates]),
    }
