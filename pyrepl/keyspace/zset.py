"""Sorted set value type.

Theory of operation: a dict maps member -> score for O(1) ZSCORE, and a B+tree that counts
the items under each child orders the (score, member) items: O(log n) inserts, removals, ranks
and index lookups (where Redis has a skiplist with spans: the same operations, but a walk
through scattered nodes). Both live in the C base class ``ZIndex``
(``pyrepl/keyspace/_zbtree.c``; why C and why a B+tree: its comment and bench/RESULTS.md,
"The sorted set as a B+tree"; its Python reference, zindex.py, when pyrepl runs as plain
Python), which keeps them in step; this module adds the rest of the interface in Python over
its primitives (``_bisect``, ``_at``, ``_range``, ``_range_back``, ``_delete_range``). Redis orders equal scores by member bytes (memcmp, shorter
first on a common prefix), which is exactly Python's tuple/bytes order. Ranges come back as
plain lists of (score, member).

Scores are floats and never NaN (commands reject NaN before calling in; the index refuses it
too). A score of -0.0 is stored as 0.0: Redis keeps small sorted sets in a listpack, which
stores integral scores as integers, so ``ZADD k -0 m`` then ``ZSCORE k m`` answers "0" there
too (only Redis's big, skiplist encoded set would keep the sign; nobody relies on that).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from math import inf, nextafter
from typing import TYPE_CHECKING

from pyrepl import native
from pyrepl.keyspace import zindex

if TYPE_CHECKING:
    from pyrepl.keyspace.zindex import ZIndex
else:   # the C B+tree, or its Python reference when pyrepl runs as plain Python
    _zbtree = native.load("pyrepl.keyspace._zbtree")
    ZIndex = zindex.ZIndex if _zbtree is None else _zbtree.ZIndex

Item = tuple[float, bytes]

UNCHANGED, ADDED, UPDATED = 0, 1, 2  # results of ZSet.set_score

_CHUNK = 256    # items fetched at a time by the iterators


class ZSet(ZIndex):
    """``dict`` (member -> score, read-only outside) and, from ``ZIndex`` in C,
    ``set_score(member, score)`` (ADDED, UPDATED or UNCHANGED for the same score),
    ``remove(member)`` and ``len()``."""

    __slots__ = ()

    @classmethod
    def from_items(cls, pairs: Iterable[tuple[bytes, float]]) -> ZSet:
        """Build from (member, score) pairs in any order (a repeated member: the last wins)."""
        z = cls()
        set_score = z.set_score
        for member, score in pairs:
            set_score(member, score)
        return z

    def __repr__(self) -> str:
        return f"ZSet({list(self.items())!r})"

    def add(self, member: bytes, score: float) -> bool:
        """Set member's score; True when the member is new."""
        return self.set_score(member, score) == ADDED

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)

    def items(self) -> Iterator[tuple[bytes, float]]:
        """(member, score) pairs in ascending order."""
        for score, member in self.iter_from(0):
            yield member, score

    def copy(self) -> ZSet:
        z = ZSet()
        set_score = z.set_score
        for score, member in self.iter_from(0):
            set_score(member, score)
        return z

    # -- ordered access -------------------------------------------------------------------
    def rank(self, member: bytes) -> int | None:
        """0-based ascending rank of ``member``, None when absent."""
        score = self.dict.get(member)
        if score is None:
            return None
        return self._bisect(score, member)

    def at(self, index: int) -> Item:
        """The (score, member) item at global ascending ``index`` (0 <= index < len)."""
        return self._at(index)

    def first(self) -> Item:
        return self._at(0)

    def last(self) -> Item:
        return self._at(len(self) - 1)

    def range(self, start: int, stop: int) -> list[Item]:
        """Items with ascending index in [start, stop) (0 <= start; stop clipped)."""
        return self._range(start, stop)

    def iter_from(self, index: int) -> Iterator[Item]:
        """Items ascending, starting at global ``index`` (fetched a chunk at a time: a change
        to the set while iterating is the caller's to avoid, as with a dict)."""
        fetch = self._range
        while True:
            chunk = fetch(index, index + _CHUNK)
            yield from chunk
            if len(chunk) < _CHUNK:
                return
            index += _CHUNK

    def iter_back_from(self, index: int) -> Iterator[Item]:
        """Items descending, starting at global ``index`` (inclusive; clipped to the end)."""
        n = len(self)
        if index >= n:
            index = n - 1
        fetch = self._range_back
        while index >= 0:
            chunk = fetch(index, _CHUNK)
            yield from chunk
            index -= len(chunk)

    def score_start(self, score: float, exclusive: bool) -> int:
        """Index of the first item with score >= ``score`` (> when ``exclusive``)."""
        if exclusive:
            if score == inf:
                return len(self)
            score = nextafter(score, inf)
        return self._bisect(score)

    def score_stop(self, score: float, exclusive: bool) -> int:
        """Index just past the last item with score <= ``score`` (< when ``exclusive``)."""
        if not exclusive:
            if score == inf:
                return len(self)
            score = nextafter(score, inf)
        return self._bisect(score)

    def member_bisect(self, score: float, member: bytes) -> int:
        """Index of the first item >= (score, member)."""
        return self._bisect(score, member)

    def pop_first(self) -> Item:
        item = self._at(0)
        self.remove(item[1])
        return item

    def pop_last(self) -> Item:
        item = self._at(len(self) - 1)
        self.remove(item[1])
        return item

    def delete_range(self, start: int, stop: int) -> int:
        """Remove the items with ascending index in [start, stop); returns how many."""
        return self._delete_range(start, stop)

    def check(self) -> None:
        """Assert the internal invariants (tests)."""
        self._check()
        flat = list(self.iter_from(0))
        assert flat == sorted(flat), "not sorted"
        assert {m: s for s, m in flat} == self.dict, "dict mismatch"
