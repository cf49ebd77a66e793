"""The replication backlog as a state machine, checked step by step against a plain model.

Theory of operation: hypothesis drives :class:`pyrepl.replication.backlog.Backlog` through
random sequences of appends (empty, small, exactly the capacity, larger than it), appends that
wrap the ring (crossing the end, or landing exactly on it), resizes (grow, shrink, same size),
``reset_offset`` and reads. The model is just ``hist`` (a bytearray with the newest bytes the
backlog must still hold), ``offset`` (``master_repl_offset``) and ``size``. After every step the
invariants of Redis's names are asserted: ``first_byte_offset = master_repl_offset - histlen +
1``, ``histlen <= size``, and ``histlen`` equals the model's; the read rules check that every
servable offset returns exactly the model's tail and that the offsets just outside the range
raise :class:`BacklogRangeError`.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pyrepl.replication.backlog import Backlog, BacklogRangeError


def pattern(seed: int, n: int) -> bytes:
    """``n`` bytes that differ from their neighbours (a misplaced copy cannot go unnoticed)."""
    return bytes((seed + i * 7) % 251 for i in range(n))


class BacklogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.b: Backlog
        self.hist = bytearray()
        self.offset = 0
        self.size = 1
        self.seed = 0

    # -- model helpers ----------------------------------------------------------------------
    def _model_append(self, data: bytes) -> None:
        self.offset += len(data)
        self.hist += data
        if len(self.hist) > self.size:
            del self.hist[: len(self.hist) - self.size]

    def _append(self, data: bytes) -> None:
        self.b.append(data)
        self._model_append(data)

    def _data(self, n: int) -> bytes:
        self.seed += 1
        return pattern(self.seed, n)

    @property
    def first(self) -> int:
        return self.offset - len(self.hist) + 1

    # -- rules ------------------------------------------------------------------------------
    @initialize(size=st.integers(1, 300), start=st.integers(0, 10**12))
    def create(self, size: int, start: int) -> None:
        self.b = Backlog(size, master_repl_offset=start)
        self.size = size
        self.offset = start
        self.hist = bytearray()

    @rule(data=st.binary(max_size=40))
    def append_small(self, data: bytes) -> None:
        self._append(data)

    @rule(factor=st.sampled_from(["exact", "over", "double"]), extra=st.integers(0, 50))
    def append_capacity_or_more(self, factor: str, extra: int) -> None:
        n = {"exact": self.size, "over": self.size + 1 + extra,
             "double": 2 * self.size + extra}[factor]
        self._append(self._data(n))

    @precondition(lambda self: self.b.size >= 2)
    @rule(k=st.integers(0, 10**6))
    def wrap(self, k: int) -> None:
        """An append shorter than the ring that crosses (or lands exactly on) its end."""
        size, idx = self.b.size, self.b.idx
        to_end = size - idx
        if idx == 0:
            n = size - 1 - k % (size - 1)  # fill most of an empty-at-index ring
        else:
            # from exactly to the end (to_end) up to the longest append < size that wraps
            n = to_end + k % idx
        assert 0 < n < size
        before = idx
        self._append(self._data(n))
        if before and n > to_end:
            assert self.b.idx == n - to_end  # the copy really went round
        elif before and n == to_end:
            assert self.b.idx == 0

    @rule(new_size=st.integers(1, 400))
    def resize(self, new_size: int) -> None:
        newest = bytes(self.hist[-new_size:]) if self.hist else b""
        self.b.resize(new_size)
        self.size = new_size
        self.hist = bytearray(newest)

    @rule(how=st.sampled_from(["grow", "shrink", "same"]), by=st.integers(1, 100))
    def resize_relative(self, how: str, by: int) -> None:
        cur = self.size
        new = {"grow": cur + by, "shrink": max(1, cur - by), "same": cur}[how]
        self.resize(new)

    @rule(delta=st.integers(-1000, 10**6))
    def reset_offset(self, delta: int) -> None:
        new = max(0, self.offset + delta)
        self.b.reset_offset(new)
        self.offset = new
        self.hist = bytearray()

    @rule()
    def read_every_servable_offset(self) -> None:
        first, last = self.first, self.offset
        for off in range(first, last + 2):
            assert self.b.can_serve(off)
            chunks = self.b.read_from(off)
            assert 1 <= len(chunks) <= 2 or (off == last + 1 and chunks == [])
            assert b"".join(chunks) == bytes(self.hist[off - first:])

    @rule(below=st.integers(1, 10**6), above=st.integers(2, 10**6))
    def read_out_of_range_raises(self, below: int, above: int) -> None:
        for off in (self.first - below, self.offset + above):
            assert not self.b.can_serve(off)
            with pytest.raises(BacklogRangeError):
                self.b.read_from(off)

    @rule(bad=st.integers(-5, 0))
    def non_positive_sizes_are_refused(self, bad: int) -> None:
        with pytest.raises(ValueError):
            self.b.resize(bad)
        with pytest.raises(ValueError):
            Backlog(bad)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def offsets_follow_redis_definitions(self) -> None:
        b = self.b
        assert b.master_repl_offset == self.offset
        assert b.histlen == len(self.hist)
        assert b.histlen <= b.size == self.size
        assert b.first_byte_offset == b.master_repl_offset - b.histlen + 1
        assert 0 <= b.idx < b.size
        assert len(b.buf) == b.size

    @invariant()
    def edges_of_the_range(self) -> None:
        b = self.b
        # the newest byte and "nothing missing" are always servable, one past is not
        assert b.read_from(b.master_repl_offset + 1) == []
        if b.histlen:
            assert b"".join(b.read_from(b.master_repl_offset)) == bytes(self.hist[-1:])
        with pytest.raises(BacklogRangeError):
            b.read_from(b.first_byte_offset - 1)
        with pytest.raises(BacklogRangeError):
            b.read_from(b.master_repl_offset + 2)


BacklogMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40,
                                            deadline=None)
TestBacklogMachine = BacklogMachine.TestCase
