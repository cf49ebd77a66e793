"""Sorted set value type.

Theory of operation: a dict maps member -> score for O(1) ZSCORE, and the (score, member)
tuples are kept in ascending order in a *chunked* sorted list (the layout of the
``sortedcontainers`` package, written here from scratch): a list of sorted sublists of at most
``2 * LOAD`` items plus ``_maxes``, the last item of every sublist. An insert bisects
``_maxes`` to find its sublist and ``insort``s into it, so it costs O(log n) comparisons and a
memmove of at most ``2 * LOAD`` pointers however large the set grows (a single flat list
would memmove half the set on every insert). Redis orders equal scores by member bytes
(memcmp, shorter first on a common prefix), which is exactly Python's tuple/bytes order.

Positional access (ranks, index ranges) uses ``_index``, the prefix sums of the sublist
lengths, rebuilt lazily after a change (one C-level ``accumulate`` over the sublists); the
first sublist is served without it. Ranges come back as plain lists of (score, member).

Scores are floats and never NaN (commands reject NaN before calling in). A score of -0.0 is
stored as 0.0: Redis keeps small sorted sets in a listpack, which stores integral scores as
integers, so ``ZADD k -0 m`` then ``ZSCORE k m`` answers "0" there too (only a big, skiplist
encoded set would keep the sign; nobody relies on that).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator
from itertools import accumulate, chain, islice
from math import inf, nextafter

LOAD = 256  # sublists are split above 2 * LOAD items and merged below LOAD // 2

Item = tuple[float, bytes]

UNCHANGED, ADDED, UPDATED = 0, 1, 2  # results of ZSet.set_score


class ZSet:
    __slots__ = ("dict", "_lists", "_maxes", "_index")

    def __init__(self) -> None:
        self.dict: dict[bytes, float] = {}
        self._lists: list[list[Item]] = []
        self._maxes: list[Item] = []
        self._index: list[int] | None = None

    @classmethod
    def from_items(cls, pairs: Iterable[tuple[bytes, float]]) -> ZSet:
        """Build from (member, score) pairs in any order (bulk load: one sort)."""
        z = cls()
        d = z.dict
        for member, score in pairs:
            d[member] = score if score else 0.0
        z._load(sorted([(s, m) for m, s in d.items()]))
        return z

    def _load(self, items: list[Item]) -> None:
        step = LOAD
        self._lists = [items[i:i + step] for i in range(0, len(items), step)]
        self._maxes = [sub[-1] for sub in self._lists]
        self._index = None

    def __len__(self) -> int:
        return len(self.dict)

    def __repr__(self) -> str:
        return f"ZSet({list(self.items())!r})"

    # -- the public interface the RDB code relies on ---------------------------------------
    def add(self, member: bytes, score: float) -> bool:
        """Set member's score; True when the member is new."""
        return self.set_score(member, score) == ADDED

    def set_score(self, member: bytes, score: float) -> int:
        """Set member's score; returns ADDED, UPDATED or UNCHANGED (same score)."""
        if not score:
            score = 0.0  # -0.0 is stored as 0, like Redis's listpack encoding (see module doc)
        d = self.dict
        old = d.get(member)
        if old is not None:
            if old == score:
                return UNCHANGED
            self._discard((old, member))
            d[member] = score
            self._insert((score, member))
            return UPDATED
        d[member] = score
        item = (score, member)
        maxes = self._maxes
        if maxes:  # inline of the common case of _insert: into a sublist that is not the last
            i = bisect_left(maxes, item)
            if i < len(maxes):
                sub = self._lists[i]
                insort(sub, item)
                self._index = None
                if len(sub) > 2 * LOAD:
                    self._split(i)
                return ADDED
        self._insert(item)
        return ADDED

    def remove(self, member: bytes) -> bool:
        old = self.dict.pop(member, None)
        if old is None:
            return False
        self._discard((old, member))
        return True

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)

    def items(self) -> Iterator[tuple[bytes, float]]:
        """(member, score) pairs in ascending order."""
        for sub in self._lists:
            for score, member in sub:
                yield member, score

    def copy(self) -> ZSet:
        z = ZSet()
        z.dict = dict(self.dict)
        z._lists = [list(sub) for sub in self._lists]
        z._maxes = list(self._maxes)
        return z

    # -- chunked list maintenance -----------------------------------------------------------
    def _insert(self, item: Item) -> None:
        maxes = self._maxes
        self._index = None
        if not maxes:
            self._lists.append([item])
            maxes.append(item)
            return
        i = bisect_left(maxes, item)
        if i == len(maxes):
            i -= 1
            sub = self._lists[i]
            sub.append(item)
            maxes[i] = item
        else:
            sub = self._lists[i]
            insort(sub, item)
        if len(sub) > 2 * LOAD:
            self._split(i)

    def _split(self, i: int) -> None:
        sub = self._lists[i]
        self._lists[i:i + 1] = [sub[:LOAD], sub[LOAD:]]
        self._maxes[i:i + 1] = [sub[LOAD - 1], sub[-1]]

    def _discard(self, item: Item) -> None:
        """Remove ``item``, which must be present."""
        maxes = self._maxes
        i = bisect_left(maxes, item)
        sub = self._lists[i]
        j = bisect_left(sub, item)
        del sub[j]
        self._index = None
        if not sub:
            del self._lists[i]
            del maxes[i]
            return
        if j == len(sub):
            maxes[i] = sub[-1]
        if len(sub) < LOAD // 2 and len(maxes) > 1:
            self._merge(i)

    def _merge(self, i: int) -> None:
        """Merge the small sublist ``i`` into a neighbour (then split if it got too big)."""
        lists = self._lists
        if i == 0:
            i = 1
        prev = lists[i - 1]
        prev.extend(lists[i])
        del lists[i]
        del self._maxes[i - 1]
        if len(prev) > 2 * LOAD:
            lists[i - 1:i] = [prev[:LOAD], prev[LOAD:]]
            self._maxes[i - 1:i] = [prev[LOAD - 1], prev[-1]]
        else:
            self._maxes[i - 1] = prev[-1]

    def _offsets(self) -> list[int]:
        idx = self._index
        if idx is None:
            idx = self._index = list(accumulate(map(len, self._lists), initial=0))
        return idx

    def _locate(self, index: int) -> tuple[int, int]:
        """(sublist, position) of the global ``index`` (0 <= index < len)."""
        lists = self._lists
        n0 = len(lists[0])
        if index < n0:
            return 0, index
        idx = self._offsets()
        i = bisect_right(idx, index) - 1
        return i, index - idx[i]

    def _bisect(self, key: tuple) -> int:
        """Global index of the first item >= ``key`` (a tuple compared with the items)."""
        maxes = self._maxes
        i = bisect_left(maxes, key)
        if i == len(maxes):
            return len(self.dict)
        j = bisect_left(self._lists[i], key)
        if i == 0:
            return j
        return self._offsets()[i] + j

    # -- ordered access -------------------------------------------------------------------
    def rank(self, member: bytes) -> int | None:
        """0-based ascending rank of ``member``, None when absent."""
        score = self.dict.get(member)
        if score is None:
            return None
        return self._bisect((score, member))

    def at(self, index: int) -> Item:
        """The (score, member) item at global ascending ``index`` (0 <= index < len)."""
        i, j = self._locate(index)
        return self._lists[i][j]

    def first(self) -> Item:
        return self._lists[0][0]

    def last(self) -> Item:
        return self._lists[-1][-1]

    def range(self, start: int, stop: int) -> list[Item]:
        """Items with ascending index in [start, stop) (0 <= start; stop clipped)."""
        n = len(self.dict)
        if stop > n:
            stop = n
        if start >= stop:
            return []
        lists = self._lists
        if len(lists) == 1:
            return lists[0][start:stop]
        i, j = self._locate(start)
        sub = lists[i]
        want = stop - start
        if j + want <= len(sub):
            return sub[j:j + want]
        return list(islice(chain(sub[j:], *lists[i + 1:]), want))

    def iter_from(self, index: int) -> Iterator[Item]:
        """Items ascending, starting at global ``index``."""
        if index >= len(self.dict):
            return iter(())
        i, j = self._locate(index)
        lists = self._lists
        return chain(islice(lists[i], j, None), *lists[i + 1:])

    def iter_back_from(self, index: int) -> Iterator[Item]:
        """Items descending, starting at global ``index`` (inclusive; clipped to the end)."""
        n = len(self.dict)
        if index >= n:
            index = n - 1
        if index < 0:
            return iter(())
        i, j = self._locate(index)
        lists = self._lists
        return chain(reversed(lists[i][:j + 1]), *(reversed(s) for s in reversed(lists[:i])))

    def score_start(self, score: float, exclusive: bool) -> int:
        """Index of the first item with score >= ``score`` (> when ``exclusive``)."""
        if exclusive:
            if score == inf:
                return len(self.dict)
            score = nextafter(score, inf)
        return self._bisect((score,))

    def score_stop(self, score: float, exclusive: bool) -> int:
        """Index just past the last item with score <= ``score`` (< when ``exclusive``)."""
        if not exclusive:
            if score == inf:
                return len(self.dict)
            score = nextafter(score, inf)
        return self._bisect((score,))

    def member_bisect(self, score: float, member: bytes) -> int:
        """Index of the first item >= (score, member)."""
        return self._bisect((score, member))

    def pop_first(self) -> Item:
        item = self._lists[0][0]
        del self.dict[item[1]]
        self._discard(item)
        return item

    def pop_last(self) -> Item:
        item = self._lists[-1][-1]
        del self.dict[item[1]]
        self._discard(item)
        return item

    def delete_range(self, start: int, stop: int) -> int:
        """Remove the items with ascending index in [start, stop); returns how many."""
        n = len(self.dict)
        if stop > n:
            stop = n
        if start >= stop:
            return 0
        if start == 0 and stop == n:
            self.dict.clear()
            self._lists = []
            self._maxes = []
            self._index = None
            return n
        d = self.dict
        lists = self._lists
        i, j = self._locate(start)
        left = stop - start
        removed = left
        # Walk the touched sublists, cutting each one's share.
        k = i
        while left:
            sub = lists[k]
            end = min(len(sub), j + left)
            for _score, member in sub[j:end]:
                del d[member]
            left -= end - j
            del sub[j:end]
            j = 0
            k += 1
        # Re-chunk the touched sublists [i, k) so no tiny or empty sublist is left behind.
        mid = [x for s in lists[i:k] for x in s]
        tail = lists[k:]
        if mid and tail and len(mid) < LOAD // 2:
            mid.extend(tail[0])
            tail = tail[1:]
        if len(mid) > 2 * LOAD:
            chunks = [mid[p:p + LOAD] for p in range(0, len(mid), LOAD)]
        else:
            chunks = [mid] if mid else []
        self._lists = lists[:i] + chunks + tail
        self._maxes = [s[-1] for s in self._lists]
        self._index = None
        return removed

    def check(self) -> None:
        """Assert the internal invariants (tests)."""
        flat = [x for s in self._lists for x in s]
        assert all(self._lists), "empty sublist"
        assert flat == sorted(flat), "not sorted"
        assert len(flat) == len(self.dict), "length mismatch"
        assert {m: s for s, m in flat} == self.dict, "dict mismatch"
        assert self._maxes == [s[-1] for s in self._lists], "maxes mismatch"
        assert all(len(s) <= 2 * LOAD for s in self._lists), "sublist too big"
