"""The latency monitor (Redis's latency.c): per-event time series of latency spikes.

Theory of operation: with ``latency-monitor-threshold`` > 0, a measured latency of at least
that many milliseconds is recorded with :meth:`LatencyMonitor.add` under its event name, as
Redis's latencyAddSampleIfNeeded: ``command`` / ``fast-command`` (ServerCore.call: every call
is timed while the monitor is on), ``expire-cycle`` (the cron's active expiry) and ``fork``
(the snapshot child's fork). Each event keeps its last 160 samples, one per second at most (a
second's sample keeps its highest latency), and its all-time maximum. LATENCY LATEST / HISTORY
/ RESET read and clear it; LATENCY HISTOGRAM reads the per-command histograms of INFO
latencystats.
"""

from __future__ import annotations

TS_LEN = 160      # LATENCY_TS_LEN


class Series:
    __slots__ = ("samples", "max")

    def __init__(self) -> None:
        self.samples: list[tuple[int, int]] = []    # (unix seconds, ms), oldest first
        self.max = 0


class LatencyMonitor:
    def __init__(self) -> None:
        self.events: dict[str, Series] = {}

    def add(self, event: str, ms: int, now_s: int) -> None:
        """latencyAddSample."""
        ts = self.events.get(event)
        if ts is None:
            ts = self.events[event] = Series()
        ts.max = max(ts.max, ms)
        if ts.samples and ts.samples[-1][0] == now_s:
            if ms > ts.samples[-1][1]:
                ts.samples[-1] = (now_s, ms)
            return
        ts.samples.append((now_s, ms))
        if len(ts.samples) > TS_LEN:
            del ts.samples[0]

    def latest(self) -> list[object]:
        return [[name.encode(), ts.samples[-1][0], ts.samples[-1][1], ts.max]
                for name, ts in self.events.items()]

    def history(self, event: str) -> list[object]:
        ts = self.events.get(event)
        return [] if ts is None else [[t, ms] for t, ms in ts.samples]

    def reset(self, events: list[str] | None) -> int:
        """latencyResetEvent: how many series were dropped."""
        if events is None:
            n = len(self.events)
            self.events.clear()
            return n
        return sum(1 for e in events if self.events.pop(e, None) is not None)


def histogram_cdf(counts: dict[int, int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's ``histogram_usec`` of a command (Redis's fillCommandCDF: an HDR log
    iteration from 1024 ns doubling): (µs at the level, calls up to it) where the count grew.
    ``counts`` maps a bucket's lowest value in ns to its count (core.LatencyHistogram)."""
    total = sum(counts.values())
    out: list[tuple[int, int]] = []
    if not total:
        return out
    lows = sorted(counts)
    level, seen, i, previous = 1024, 0, 0, 0
    while seen < total:
        while i < len(lows) and lows[i] <= level:
            seen += counts[lows[i]]
            i += 1
        shift = max(0, (level | 255).bit_length() - 8)
        highest = (level >> shift << shift) + (1 << shift) - 1
        if seen > previous:
            out.append((highest // 1000, seen))
        previous = seen
        level *= 2
    return out
