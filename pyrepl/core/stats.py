"""The server's counters and timings: INFO stats' counters (``Stats``), the per-second rates
(``InstantMetric``), a command's INFO commandstats record with its latency histogram
(``CommandStat``, ``LatencyHistogram``), the snapshot child's copy-on-write sample
(``CowSample``) and the counter a forked child reports through (``Counter``, the interface;
``PlainCounter``, the in-process one)."""

from __future__ import annotations

from typing import NamedTuple, Protocol


class Stats:
    # INFO stats' counters, zeroed by reset() (CONFIG RESETSTAT); the slots are these and the
    # ops/sec samples (read at their offsets by a client's read in C: pyrepl/net/_serve.c).
    total_connections_received: int
    rejected_connections: int
    expired_keys: int
    evicted_keys: int
    keyspace_hits: int
    keyspace_misses: int
    net_input_bytes: int
    net_output_bytes: int
    net_repl_input_bytes: int
    net_repl_output_bytes: int
    sync_full: int
    sync_partial_ok: int
    sync_partial_err: int
    total_error_replies: int
    expired_stale_perc: int
    client_qbuf_limit_disconnections: int
    client_outbuf_limit_disconnections: int
    total_reads_processed: int
    total_writes_processed: int
    expire_cycle_cpu_ns: int
    unexpected_error_replies: int
    evicted_clients: int
    repl_spilled_bytes: int    # pyrepl's: full syncs' pending stream spilled to disk
    repl_resumed_syncs: int    # pyrepl's: cut full syncs served from where they stopped
    repl_resumed_bytes: int    # ... and the payload bytes they did not send again
    COUNTERS = tuple(__annotations__)
    __slots__ = (*COUNTERS, "ops_samples", "last_ops_sample", "instantaneous_ops", "instant")

    def __init__(self) -> None:
        self.reset()
        self.ops_samples: list[int] = []
        self.last_ops_sample = (0, 0)
        self.instantaneous_ops = 0
        # Redis's instantaneous metrics other than ops: name -> per-second rate samples
        self.instant: dict[str, InstantMetric] = {
            name: InstantMetric() for name in ("net_input_bytes", "net_output_bytes",
                                               "net_repl_input_bytes", "net_repl_output_bytes")}

    def reset(self) -> None:
        for name in self.COUNTERS:
            setattr(self, name, 0)


class InstantMetric:
    """Redis's trackInstantaneousMetric: the rate between samples taken every 100 ms, averaged
    over the last 16 samples."""

    __slots__ = ("samples", "last_ms", "last_value")

    def __init__(self) -> None:
        self.samples: list[int] = []
        self.last_ms = 0
        self.last_value = 0

    def sample(self, now_ms: int, value: int) -> None:
        if self.last_ms:
            self.samples.append((value - self.last_value) * 1000 // max(1, now_ms - self.last_ms))
            if len(self.samples) > 16:
                del self.samples[0]
        self.last_ms, self.last_value = now_ms, value

    def rate(self) -> int:
        return sum(self.samples) // len(self.samples) if self.samples else 0


class CowSample(NamedTuple):
    """The last copy-on-write figure of the snapshot child."""

    size: int = 0
    peak: int = 0
    at_ms: int = 0


class LatencyHistogram:
    """Redis's per-command latency histogram (an HdrHistogram of 2 significant digits over 1 ns
    .. 1 s): values share a bucket when they agree in their 8 leading bits; a percentile is
    reported as the highest value of its bucket, as hdr_value_at_percentile does.

    Kept as Redis keeps it, an array of counts (``buckets``: ``N`` unsigned 64-bit counts in a
    bytearray, made on the first record as Redis allocates a command's histogram then): bucket
    ``index(v)`` counts the values whose lowest equivalent is ``lowest(index(v))``, in their
    order. A record is one increment (the C dispatch's too: pyrepl/_latency.h), where a dict
    of buckets cost ~1,000 instructions a call (an int made, looked up, added, stored)."""

    __slots__ = ("buckets", "_view")

    MIN_NS, MAX_NS = 1, 1_000_000_000
    N = 256 + 22 * 128   # (values under 256 each their own; then 128 a power of two to 2^30)

    def __init__(self) -> None:
        self.buckets: bytearray | None = None
        self._view: memoryview | None = None

    @staticmethod
    def index(value: int) -> int:
        """The bucket of ``value`` (clamped to 1 ns .. 1 s, as Redis records it)."""
        v = min(max(value, LatencyHistogram.MIN_NS), LatencyHistogram.MAX_NS)
        if v < 256:
            return v
        bits = v.bit_length()
        return 256 + (bits - 9) * 128 + (v >> (bits - 8)) - 128

    @staticmethod
    def lowest(i: int) -> int:
        """The lowest value bucket ``i`` holds."""
        if i < 256:
            return i
        level, top = divmod(i - 256, 128)
        return (top + 128) << (level + 1)

    def add(self, value: int) -> None:
        """One value recorded (clamped to 1 ns .. 1 s)."""
        if self._view is None:
            self.buckets = bytearray(8 * self.N)
            self._view = memoryview(self.buckets).cast("Q")
        self._view[self.index(value)] += 1

    @property
    def counts(self) -> dict[int, int]:
        """Each non-empty bucket's lowest value -> its count, in order."""
        if self._view is None:
            return {}
        lowest = self.lowest
        return {lowest(i): n for i, n in enumerate(self._view) if n}

    @property
    def total(self) -> int:
        return 0 if self._view is None else sum(self._view)

    def value_at(self, percentile: float) -> int:
        """hdr_value_at_percentile: the highest value of the bucket holding it (values past 1 s
        were recorded as 1 s, as Redis clamps them)."""
        wanted = max(1, int(min(percentile, 100.0) / 100 * self.total + 0.5))
        seen = 0
        for i, n in enumerate(self._view or ()):
            seen += n
            if seen >= wanted:
                return self.lowest(i + 1) - 1
        return 0


class Counter(Protocol):
    """An integer with get/set (the shell's version, pyrepl.net.server.SharedCounter, lives in
    memory shared with a child)."""

    def set(self, value: int) -> None: ...

    def get(self) -> int: ...


class PlainCounter:
    """A ``Counter`` in the process's own memory (``Host``'s: no real fork)."""

    def __init__(self) -> None:
        self.value = 0

    def set(self, value: int) -> None:
        self.value = value

    def get(self) -> int:
        return self.value


class CommandStat:
    """One command's INFO commandstats counters (time: see ServerCore.call)."""

    __slots__ = ("calls", "timed", "timed_ns", "rejected", "failed", "latency", "sample",
                 "timing")

    def __init__(self) -> None:
        self.calls = self.timed = self.timed_ns = self.rejected = self.failed = 0
        # calls & timing == 0 are timed (pyrepl.core.dispatch._sample_mask); calls & sample == 0 take
        # the slow path (the timed ones, and every call while a client tracks keys)
        self.timing = self.sample = 15
        self.latency = LatencyHistogram()

    def record(self, ns: int, tracking: bool) -> None:
        """One timed call (INFO commandstats, and latencystats when latency-tracking)."""
        self.timed_ns += ns
        self.timed += 1
        if tracking:   # Redis records whole microseconds, in ns, at least 1
            self.latency.add(ns // 1000 * 1000 or 1)

    def latency_counts(self, tracking: bool = True) -> dict[int, int]:
        """The latency histogram's counts with every call counted: a fast command's calls are
        timed one in 16 (ServerCore.call), so the untimed ones are given the timed ones'
        distribution (largest remainders: the total is the calls); a command with calls and
        none timed yet (the CONFIG RESETSTAT that reset its own figures) has them at its
        commandstats per-call time. Empty while latency-tracking recorded nothing (``tracking``:
        whether it is on now)."""
        counts = self.latency.counts
        timed = sum(counts.values())
        calls = self.calls
        if not calls or timed == calls:
            return dict(counts)
        if not timed:
            if self.timed or not tracking:   # (timed while latency-tracking was off)
                return {}
            return {LatencyHistogram.MIN_NS: calls}
        share = {low: n * calls / timed for low, n in counts.items()}
        out = {low: int(v) for low, v in share.items()}
        left = calls - sum(out.values())
        for low in sorted(share, key=lambda k: share[k] - out[k], reverse=True)[:left]:
            out[low] += 1
        return {low: n for low, n in out.items() if n}

    def usec(self) -> tuple[int, float]:
        """Total microseconds of all calls and per call, from the timed ones."""
        per_call = self.timed_ns / self.timed / 1000 if self.timed else 0.0
        return int(per_call * self.calls), per_call
