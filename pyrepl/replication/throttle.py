"""The pace of a full sync's snapshot transfer: ``repl-sync-max-bandwidth`` (sans-io, shared by
the master's disk transfer in the server process and its diskless snapshot child).

A :class:`Pacer` is a token bucket for one replica's transfer. It fills at ``rate`` bytes per
second up to a burst of ``BURST_S`` seconds of it (at least ``MIN_BURST`` bytes, so a slow rate
still moves whole TCP segments); a writer asks :meth:`Pacer.allowance` how many bytes it may
write now, writes at most that, and says :meth:`Pacer.took` what it wrote. When the allowance is
spent, :meth:`Pacer.wait` says how long until a write of ``quantum`` bytes is allowed again
(so the writer sleeps rather than spins, and never wakes up for a few bytes).

The rate is read at every call, so ``CONFIG SET repl-sync-max-bandwidth`` takes effect at the
next write: a new rate keeps the tokens it has up to its own burst (none when the transfer was
unpaced until then, so lowering the rate never lets an old burst through), and 0 means unpaced.
Only the snapshot is paced: the live stream of writes that follows it never is.

Invariants (tests/unit/test_throttle.py): over any interval of ``t`` seconds at a fixed rate a
pacer allows at most ``burst + rate * t`` bytes; ``wait`` is 0 exactly when ``quantum`` bytes
are allowed now.
"""

from __future__ import annotations

BURST_S = 0.05          # the bucket holds 50 ms of the rate
MIN_BURST = 16 * 1024   # ... and never less than 16 KiB
UNPACED = 1 << 62       # the allowance when no rate is set


def burst_of(rate: int) -> int:
    """The bucket's size for ``rate`` bytes/s."""
    return max(MIN_BURST, int(rate * BURST_S))


class Pacer:
    """One transfer's token bucket (see the module docstring)."""

    __slots__ = ("rate", "tokens", "last")

    def __init__(self, now: float) -> None:
        self.rate = 0          # the rate of the last call (0: unpaced)
        self.tokens = 0.0
        self.last = now

    def _refill(self, rate: int, now: float) -> None:
        burst = burst_of(rate)
        if rate != self.rate:
            # a new rate: what is left, within the new burst (nothing after an unpaced run)
            self.tokens = min(self.tokens, burst) if self.rate else 0.0
            self.rate = rate
            self.last = now
        elapsed = now - self.last
        if elapsed > 0:
            self.tokens = min(float(burst), self.tokens + elapsed * rate)
            self.last = now

    def allowance(self, rate: int, now: float) -> int:
        """Bytes that may be written at ``now`` under ``rate`` bytes/s (0 or less: unpaced)."""
        if rate <= 0:
            self.rate = 0
            return UNPACED
        self._refill(rate, now)
        return max(0, int(self.tokens))

    def took(self, n: int) -> None:
        """``n`` bytes were written (a no-op while unpaced)."""
        if self.rate:
            self.tokens -= n

    def quantum(self, rate: int) -> int:
        """The write worth waking up for: a quarter of the burst."""
        return burst_of(rate) // 4

    def wait(self, rate: int, now: float) -> float:
        """Seconds until ``quantum`` bytes may be written (0: now, or unpaced)."""
        if rate <= 0:
            return 0.0
        self._refill(rate, now)
        short = self.quantum(rate) - self.tokens
        return short / rate if short > 0 else 0.0
