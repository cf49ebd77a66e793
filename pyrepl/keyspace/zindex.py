"""The sorted set's ordered index in plain Python: the reference of ``_zbtree.ZIndex``.

The same interface and answers as the C B+tree (``pyrepl/keyspace/_zbtree.c``): the member ->
score ``dict`` kept in step with the (score, member) items in order, ``set_score``, ``remove``,
``len()`` and the primitives ZSet (zset.py) builds on: ``_bisect``, ``_at``, ``_range``,
``_range_back``, ``_delete_range``. It runs when pyrepl runs as plain Python (pyrepl/native.py);
tests/unit/test_zset.py runs both on the same random operations.

The items lie in sorted chunks of at most ``fanout`` items (a list of lists, each chunk's last
item in ``_maxes`` to bisect on): an update bisects to its chunk and shifts within it, a rank
adds the lengths of the chunks before. Order, NaN and -0.0 as in the C file: by score, then
member bytes (Python's order of (float, bytes) tuples); NaN refused; -0.0 stored as 0.0.
"""

from __future__ import annotations

import sys
from bisect import bisect_left, insort
from math import isnan
from typing import Any

Item = tuple[float, bytes]

UNCHANGED, ADDED, UPDATED = 0, 1, 2


def _member(member: object) -> bytes:
    if not isinstance(member, bytes):
        raise TypeError(f"sorted set members are bytes, not {type(member).__name__}")
    return member


def _score(score: Any) -> float:
    if isinstance(score, str | bytes | bytearray):   # (what PyFloat_AsDouble refuses)
        raise TypeError(f"must be real number, not {type(score).__name__}")
    d = float(score)
    if isnan(d):
        raise ValueError("a sorted set score cannot be NaN")
    return 0.0 if d == 0.0 else d   # (-0.0 as 0.0)


def _index(i: int) -> int:
    if not isinstance(i, int):
        raise TypeError(f"an integer is required, not {type(i).__name__}")
    return i


class ZIndex:
    """A sorted set's member -> score dict and its items in order, in chunks."""

    __slots__ = ("_dict", "_chunks", "_maxes", "_len", "_fanout")

    def __init__(self, *, _fanout: int = 64) -> None:
        if not 4 <= _fanout <= 1024:
            raise ValueError("_fanout must be in [4, 1024]")
        self._dict: dict[bytes, float] = {}
        self._chunks: list[list[Item]] = []
        self._maxes: list[Item] = []
        self._len = 0
        self._fanout = _fanout

    def __len__(self) -> int:
        return self._len

    @property
    def dict(self) -> dict[bytes, float]:
        """member -> score (read-only: the items and the dict change together or not at
        all)."""
        return self._dict

    # -- the chunks -----------------------------------------------------------------------
    def _insert(self, item: Item) -> None:
        chunks, maxes = self._chunks, self._maxes
        self._len += 1
        if not chunks:
            chunks.append([item])
            maxes.append(item)
            return
        k = bisect_left(maxes, item)
        if k == len(chunks):
            k -= 1
            chunks[k].append(item)
            maxes[k] = item
        else:
            insort(chunks[k], item)
        chunk = chunks[k]
        if len(chunk) > self._fanout:   # split in two halves
            half = len(chunk) >> 1
            chunks.insert(k + 1, chunk[half:])
            del chunk[half:]
            maxes.insert(k, chunk[-1])

    def _remove_item(self, item: Item) -> None:
        k = bisect_left(self._maxes, item)
        chunk = self._chunks[k]
        i = bisect_left(chunk, item)
        if i == len(chunk) or chunk[i] != item:
            raise SystemError("sorted set index out of step with its dict")
        self._remove_at(k, i)

    def _remove_at(self, k: int, i: int) -> None:
        chunk = self._chunks[k]
        del chunk[i]
        self._len -= 1
        if not chunk:
            del self._chunks[k], self._maxes[k]
        elif i == len(chunk):
            self._maxes[k] = chunk[-1]

    def _locate(self, index: int) -> tuple[int, int]:
        """(chunk, position) of the item at ``index`` (0 <= index < len)."""
        for k, chunk in enumerate(self._chunks):
            n = len(chunk)
            if index < n:
                return k, index
            index -= n
        raise IndexError("sorted set index out of range")

    def _checked(self, index: int) -> int:
        index = _index(index)
        if not 0 <= index < self._len:
            raise IndexError("sorted set index out of range")
        return index

    # -- the interface --------------------------------------------------------------------
    def set_score(self, member: bytes, score: float) -> int:
        """0 unchanged, 1 added, 2 updated."""
        member, score = _member(member), _score(score)
        d = self._dict
        was = d.get(member)
        if was is not None:
            if was == score:
                return UNCHANGED
            self._remove_item((was, member))
            self._insert((score, member))
            d[member] = score
            return UPDATED
        self._insert((score, member))
        d[member] = score
        return ADDED

    def remove(self, member: bytes) -> bool:
        was = self._dict.pop(_member(member), None)
        if was is None:
            return False
        self._remove_item((was, member))
        return True

    def _bisect(self, score: float, member: bytes | None = None) -> int:
        """The index of the first item >= (score, member), or >= (score,) without a member."""
        key: tuple[Any, ...] = (float(score),) if member is None else (float(score),
                                                                      _member(member))
        k = bisect_left(self._maxes, key)
        before = sum(map(len, self._chunks[:k]))
        if k == len(self._chunks):
            return before
        return before + bisect_left(self._chunks[k], key)

    def _at(self, index: int) -> Item:
        k, i = self._locate(self._checked(index))
        return self._chunks[k][i]

    def _range(self, start: int, stop: int) -> list[Item]:
        """The items with ascending index in [start, stop) (clipped)."""
        start, stop = max(_index(start), 0), min(_index(stop), self._len)
        if start >= stop:
            return []
        out: list[Item] = []
        k, i = self._locate(start)
        need = stop - start
        chunks = self._chunks
        while len(out) < need:
            out += chunks[k][i:i + need - len(out)]
            k, i = k + 1, 0
        return out

    def _range_back(self, index: int, count: int) -> list[Item]:
        """Up to ``count`` items descending from ``index``."""
        index = self._checked(index)
        count = max(min(_index(count), index + 1), 0)
        if not count:
            return []
        out: list[Item] = []
        k, i = self._locate(index)
        chunks = self._chunks
        while len(out) < count:
            chunk = chunks[k]
            take = min(i + 1, count - len(out))
            out += chunk[i - take + 1:i + 1][::-1]
            k -= 1
            if k >= 0:
                i = len(chunks[k]) - 1
        return out

    def _delete_range(self, start: int, stop: int) -> int:
        """Remove the items with ascending index in [start, stop) (clipped); how many."""
        items = self._range(start, stop)
        d = self._dict
        for item in items:
            del d[item[1]]
            self._remove_item(item)
        return len(items)

    # -- tests ----------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert the invariants: chunks sorted, in order, within their room, non-empty,
        their maxes right, the length and the dict in step."""
        flat: list[Item] = []
        for chunk, top in zip(self._chunks, self._maxes, strict=True):
            assert chunk and len(chunk) <= self._fanout, "a chunk empty or over its room"
            assert chunk[-1] == top, "a chunk's max out of step"
            flat += chunk
        assert all(a < b for a, b in zip(flat, flat[1:], strict=False)), "not sorted"
        assert len(flat) == self._len == len(self._dict), "length out of step"
        assert all(self._dict.get(m) == s for s, m in flat), "dict out of step"

    def _depth(self) -> int:
        """Levels above the items: 0 for one chunk, 1 for several (the B+tree's inner levels)."""
        return 0 if len(self._chunks) <= 1 else 1

    def __sizeof__(self) -> int:
        """The object, its chunks and their items, in bytes (the C tree's nodes)."""
        size = object.__sizeof__(self) + sys.getsizeof(self._chunks) + \
            sys.getsizeof(self._maxes)
        for chunk in self._chunks:
            size += sys.getsizeof(chunk) + len(chunk) * sys.getsizeof((0.0, b""))
        return size

