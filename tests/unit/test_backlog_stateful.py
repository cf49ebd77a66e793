"""The shared replication buffer as a state machine, checked step by step against a plain model.

Theory of operation: hypothesis drives :class:`pyrepl.replication.backlog.Backlog` through
random sequences of appends (small, block-sized, several blocks at once), replicas joining
(at the next byte, at a servable offset, as a copy of another), replicas taking their bytes
in pieces, leaving, resizes and trims. The model is only ``stream`` (every byte appended) and,
per replica, the offset of the last byte it was handed. After every step the rules of Redis
7.0's shared buffer are asserted:

* offsets keep Redis's names and meanings (the backlog keeps ``first_byte_offset`` and
  ``histlen``, ``first_byte_offset = master_repl_offset - histlen + 1`` where
  ``master_repl_offset`` is the model's end of the stream), every servable offset reads back
  exactly the stream's tail;
* **nothing a replica still needs is ever freed**: the first byte in the buffer is at or
  before every replica's next byte, and ``take`` hands out exactly the stream's next bytes;
* the backlog is trimmed as Redis trims it: whenever nobody but the backlog holds the head
  block and there is a next one, the history is longer than the size by less than the head
  block (plus what the newest block took since the last trim);
* memory is the blocks' allocations plus their nodes, and a replica's usage is Redis's
  ``getClientOutputBufferMemoryUsage``.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from pyrepl.replication.backlog import (
    LIST_NODE,
    NODE_OVERHEAD,
    Backlog,
    BacklogRangeError,
    Block,
    Cursor,
    jemalloc_usable,
)

KB = 1024


def pattern(seed: int, n: int) -> bytes:
    """``n`` bytes that differ from their neighbours (a misplaced copy cannot go unnoticed)."""
    return bytes((seed + i * 7) % 251 for i in range(n))


def blocks(b: Backlog) -> list[Block]:
    out = []
    blk = b.head
    while blk is not None:
        out.append(blk)
        blk = blk.next
    return out


class BufferMachine(RuleBasedStateMachine):
    replicas = Bundle("replicas")

    def __init__(self) -> None:
        super().__init__()
        self.b: Backlog
        self.start = 0
        self.stream = bytearray()
        self.seed = 0
        self.live: dict[int, Cursor] = {}
        self.next_id = 0
        self.tail_used_since_trim = 0

    @property
    def end(self) -> int:
        return self.start + len(self.stream)

    def _add(self, cur: Cursor) -> int:
        self.next_id += 1
        self.live[self.next_id] = cur
        return self.next_id

    @initialize(size=st.sampled_from([16 * KB, 20 * KB, 64 * KB, 300 * KB, 1024 * KB]),
                start=st.integers(0, 10**12))
    def create(self, size: int, start: int) -> None:
        self.b = Backlog(size, start)
        self.start = start

    @rule(n=st.one_of(st.integers(1, 300), st.integers(10 * KB, 70 * KB),
                      st.integers(100 * KB, 400 * KB)))
    def append(self, n: int) -> None:
        self.seed += 1
        data = pattern(self.seed, n)
        tail = self.b.tail
        before = tail.id if tail is not None else -1
        added = self.b.append(data)
        self.stream += data
        assert added == (self.b.tail.id != before)

    @rule(target=replicas)
    def join_next(self) -> int:
        """A replica whose snapshot starts now: it wants the bytes appended from here."""
        return self._add(self.b.cursor_next())

    @rule(target=replicas, back=st.integers(0, 10**7))
    def join_at(self, back: int) -> int:
        """+CONTINUE from a servable offset."""
        first = self.b.first_byte_offset
        off = max(first, self.end + 1 - back)
        return self._add(self.b.cursor_at(off))

    @rule(target=replicas, r=replicas)
    def join_as_copy(self, r: int) -> int:
        if r not in self.live:
            return self._add(self.b.cursor_next())
        return self._add(self.b.copy(self.live[r]))

    @rule(r=replicas, limit=st.integers(1, 200 * KB))
    def take(self, r: int, limit: int) -> None:
        cur = self.live.get(r)
        if cur is None:
            return
        sent = cur.sent
        got = b"".join(bytes(v) for v in self.b.take(cur, limit))
        want = bytes(self.stream[sent - self.start:sent - self.start + limit])
        assert got == want
        assert cur.sent == sent + len(got)

    @rule(r=replicas)
    def leave(self, r: int) -> None:
        cur = self.live.pop(r, None)
        if cur is not None:
            self.b.release(cur)

    @rule(size=st.sampled_from([16 * KB, 40 * KB, 200 * KB, 2048 * KB]))
    def resize(self, size: int) -> None:
        self.b.resize(size)

    @rule()
    def before_sleep_trim(self) -> None:
        self.b.trim(640)

    @rule(n=st.integers(0, 10**6))
    def refused_offsets(self, n: int) -> None:
        b = self.b
        for off in (b.first_byte_offset - 1 - n, self.end + 2 + n):
            assert not b.can_serve(off)
            with pytest.raises(BacklogRangeError):
                b.cursor_at(off)
            with pytest.raises(BacklogRangeError):
                b.read_from(off)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def offsets_and_contents(self) -> None:
        b = self.b
        assert b.last_byte_offset == self.end
        assert b.first_byte_offset == self.end - b.histlen + 1
        bl = blocks(b)
        assert b.histlen == sum(blk.used for blk in bl)
        assert all(blk.used == blk.size for blk in bl[:-1])   # only the newest has room
        if bl:
            assert bl[0].repl_offset == b.first_byte_offset
        # a few servable offsets (the edges and the middle) read back the stream's tail
        first = b.first_byte_offset
        for off in {first, (first + self.end) // 2, self.end, self.end + 1}:
            if b.can_serve(off):
                assert b"".join(b.read_from(off)) == bytes(self.stream[off - self.start - 1:])

    @invariant()
    def what_replicas_need_is_kept(self) -> None:
        b = self.b
        for cur in self.live.values():
            assert b.first_byte_offset <= cur.sent + 1
            assert b.pending(cur) == self.end - cur.sent
            if cur.block is not None:
                blk = cur.block
                assert blk.repl_offset + cur.pos == cur.sent + 1
                assert cur.pos <= blk.used

    @invariant()
    def refcounts(self) -> None:
        bl = blocks(self.b)
        if not bl:
            return
        refs = {id(blk): 0 for blk in bl}
        refs[id(bl[0])] += 1                        # the backlog holds the head
        for cur in self.live.values():
            if cur.block is not None:
                refs[id(cur.block)] += 1
        assert all(blk.refcount == refs[id(blk)] for blk in bl)

    @invariant()
    def trimmed_as_redis(self) -> None:
        b = self.b
        bl = blocks(b)
        if len(bl) > 1 and bl[0].refcount == 1:
            assert b.histlen - bl[0].size <= b.size + bl[-1].used + bl[-1].size

    @invariant()
    def memory_as_redis(self) -> None:
        b = self.b
        bl = blocks(b)
        assert b.mem == sum(blk.size + NODE_OVERHEAD - LIST_NODE + LIST_NODE for blk in bl)
        assert all(jemalloc_usable(blk.size + 40) == blk.size + 40 for blk in bl)
        for cur in self.live.values():
            if cur.block is not None:
                t = bl[-1]
                assert b.usage(cur) == (t.repl_offset + t.size - cur.block.repl_offset
                                        + NODE_OVERHEAD * (t.id - cur.block.id + 1))


BufferMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=40,
                                           deadline=None)
TestBufferMachine = BufferMachine.TestCase


def test_block_sizes_are_redis_7_0_15s() -> None:
    """The sizes real Redis 7.0.15 (jemalloc 5.3) reports: CLIENT LIST of a caught-up replica
    shows ``oll=1 omem=20504``, one 16 KiB block's allocation (20480) less its 40-byte header,
    plus the 64 bytes of node overhead; a large write gets a block of repl-backlog-size / 16."""
    b = Backlog(1 << 20)
    b.append(b"x")
    cur = b.cursor_at(1)
    assert (b.tail.size, b.usage(cur), b.blocks(cur)) == (20440, 20504, 1)
    assert b.mem == 20480 + 24
    b.append(b"y" * 200_000)   # fills the first block, then blocks of at most 64 KiB
    sizes = [blk.size for blk in blocks(b)]
    # 65576 -> 81920; the last one is only as large as the rest needs
    assert sizes[0] == 20440 and all(s == 81880 for s in sizes[1:-1]) and sizes[-1] <= 81880
    assert [jemalloc_usable(n) for n in (16424, 20480, 65576, 1 << 20, (1 << 20) + 1)] == \
        [20480, 20480, 81920, 1 << 20, 1310720]


def test_a_replica_behind_keeps_the_history_and_releasing_it_trims() -> None:
    """The issue's case: a 1 MB backlog, a paused replica, a 5 MB burst. The backlog grows
    past its size (the replica could continue from where it stopped), and once the replica
    is gone it is trimmed back to its size in whole blocks."""
    b = Backlog(1 << 20)
    b.append(b"a" * 100)
    paused = b.cursor_at(1)
    for i in range(5 * 1024):
        b.append(pattern(i, 1024))
    assert b.histlen == 100 + 5 * (1 << 20) and b.can_serve(1)
    assert b.usage(paused) >= 5 * (1 << 20)
    b.release(paused)
    b.trim(640)
    assert (1 << 20) < b.histlen <= (1 << 20) + 2 * b.head.size
    assert b.mem < (1 << 20) + 3 * 20504
    assert not b.can_serve(1)
