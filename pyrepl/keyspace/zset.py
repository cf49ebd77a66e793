"""Sorted set value type.

Theory of operation: a dict maps member -> score for O(1) ZSCORE, and a list of (score, member)
tuples kept sorted with bisect gives ordered ranges; Redis orders equal scores by member bytes,
which is exactly tuple order. Insert/remove are O(n) memmoves on the list, cheap in practice for
the sizes a Python server holds.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator


class ZSet:
    __slots__ = ("dict", "sorted")

    def __init__(self) -> None:
        self.dict: dict[bytes, float] = {}
        self.sorted: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self.dict)

    def add(self, member: bytes, score: float) -> bool:
        """Set member's score; True when the member is new."""
        old = self.dict.get(member)
        if old is not None:
            if old == score:
                return False
            del self.sorted[bisect_left(self.sorted, (old, member))]
            self.dict[member] = score
            insort(self.sorted, (score, member))
            return False
        self.dict[member] = score
        insort(self.sorted, (score, member))
        return True

    def remove(self, member: bytes) -> bool:
        old = self.dict.pop(member, None)
        if old is None:
            return False
        del self.sorted[bisect_left(self.sorted, (old, member))]
        return True

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)

    def items(self) -> Iterator[tuple[bytes, float]]:
        """(member, score) pairs in ascending order."""
        for score, member in self.sorted:
            yield member, score

    def copy(self) -> ZSet:
        z = ZSet()
        z.dict = dict(self.dict)
        z.sorted = list(self.sorted)
        return z
