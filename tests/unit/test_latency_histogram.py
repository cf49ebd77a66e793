"""A command's latency histogram (pyrepl/core/stats.py's LatencyHistogram, an array of counts
as Redis's hdr_histogram of 2 significant digits over 1 ns .. 1 s): its buckets are the
values' 8 leading bits, every value lands where the lowest-equivalent rule puts it (values
past 1 s in 1 s's, as Redis clamps them), and the C that records into it (pyrepl/_latency.h,
from the dispatch's timed calls and a run's account) puts each duration where the Python
does."""

from __future__ import annotations

import random

import pytest

from pyrepl import native, plainrun
from pyrepl.commands.table import COMMANDS
from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.core.stats import CommandStat, LatencyHistogram
from tests.support.cores import NOW, cmd

H = LatencyHistogram


def lowest_equivalent(value: int) -> int:
    """The rule: a value's bucket starts at its 8 leading bits (hdr_histogram's lowest
    equivalent value at 2 significant digits)."""
    shift = max(0, (value | 255).bit_length() - 8)
    return value >> shift << shift

# durations (ns) at every kind of edge: tiny, each power of two and its neighbours, whole
# microseconds, past 1 s
DURATIONS = sorted({1, 2, 255, 256, 257, 999, 1000, 1001, 1023, 1024, 65_535, 65_536,
                    999_999, 10**6, 123_456_789, 10**9 - 1, 10**9, 10**9 + 1, 5 * 10**9}
                   | {(1 << b) + d for b in range(8, 33) for d in (-1, 0, 1)})


def test_the_buckets_are_the_eight_leading_bits() -> None:
    assert H.N == 3072
    lows = [H.lowest(i) for i in range(H.N)]
    assert lows == sorted(set(lows))                       # distinct, in order
    assert all(H.index(low) == i for i, low in enumerate(lows) if 1 <= low <= H.MAX_NS)
    assert H.index(H.MAX_NS) < H.N
    rng = random.Random(3)
    for v in DURATIONS + [rng.randrange(1, 3 * 10**9) for _ in range(20000)] + [0, -5]:
        clamped = min(max(v, H.MIN_NS), H.MAX_NS)
        assert H.lowest(H.index(v)) == lowest_equivalent(clamped), v
        assert H.lowest(H.index(v)) <= clamped < (H.lowest(H.index(v) + 1)
                                                  if H.index(v) + 1 < H.N else 2**31)


def test_counts_total_and_percentiles() -> None:
    h = H()
    assert h.counts == {} and h.total == 0 and h.buckets is None   # (made on first record)
    for v in (5, 5, 1000, 3000, 2 * 10**9):
        h.add(v)
    assert h.counts == {5: 2, 1000: 1, 2992: 1, lowest_equivalent(H.MAX_NS): 1}
    assert h.total == 5 and len(h.buckets) == 8 * H.N
    assert h.value_at(40) == 5 and h.value_at(60) == 1003 and h.value_at(100) >= H.MAX_NS
    st = CommandStat()
    st.record(1_234_567, True)      # (whole microseconds: 1,234,000)
    st.record(400, True)            # (under a microsecond: 1)
    st.record(9_999, False)         # (not tracking: commandstats only)
    assert st.latency.counts == {1: 1, lowest_equivalent(1_234_000): 1}
    assert st.timed == 3 and st.timed_ns == 1_234_567 + 400 + 9_999


class _Steps:
    """A clock that moves by the next of ``steps`` every second read (a call's start and end:
    its duration is that step)."""

    def __init__(self, steps: list[int]) -> None:
        self.steps, self.reads, self.ns = list(steps), 0, 0

    def __call__(self) -> int:
        self.reads += 1
        if self.reads % 2 == 0 and self.steps:
            self.ns += self.steps.pop(0)
        else:
            self.ns += 1
        return self.ns


def _core() -> tuple[ServerCore, object]:
    core = ServerCore(Config.load(None, [("save", [""]), ("slowlog-log-slower-than", ["-1"])]),
                      now_ms=NOW)
    c = core.connection_made()
    c.receive_data(cmd("DEL", "k"))   # (its commandstats record made: later calls take C)
    c.data_to_send()
    core.cmdstats[COMMANDS[b"del"]].latency = H()
    return core, c


@pytest.mark.skipif(native.PURE, reason=f"compares the C with the Python ({native.WHY_PURE})")
def test_the_c_records_each_duration_where_the_python_does() -> None:
    from pyrepl._dispatch import execute
    from pyrepl._plainrun import account

    got, want = _core(), _core()
    for (core, c), run in ((got, execute), (want, ServerCore.execute)):
        core.clock_ns = _Steps(DURATIONS)   # type: ignore[method-assign]
        for _ in DURATIONS:
            run(core, c, [b"DEL", b"k"])    # (a command timed at every call)
    counts = [core.cmdstats[COMMANDS[b"del"]].latency.counts for core, _ in (got, want)]
    assert counts[0] == counts[1] and sum(counts[0].values()) == len(DURATIONS)
    assert len(counts[0]) > 20
    # a run's account: its mean time a call, in the same bucket
    for ns in DURATIONS:
        for (core, c), acc in ((got, account), (want, plainrun.account)):
            acc(core, c, [COMMANDS[b"del"]] * 3, True, 3 * ns)
    counts = [core.cmdstats[COMMANDS[b"del"]].latency.counts for core, _ in (got, want)]
    assert counts[0] == counts[1]
    assert sum(counts[0].values()) == 2 * len(DURATIONS)
