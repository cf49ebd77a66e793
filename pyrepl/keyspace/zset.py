"""Sorted set value types: ZSet (a B+tree, Redis's skiplist) and ListpackZSet (one listpack).

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
from math import inf, isinf, nextafter
from typing import TYPE_CHECKING, Any

from pyrepl import native
from pyrepl.keyspace import zindex
from pyrepl.keyspace.listpack import lp_str_entry

if TYPE_CHECKING:
    from pyrepl.keyspace.zindex import ZIndex
    ListpackZIndex = ZIndex
else:   # the C B+tree, or its Python reference when pyrepl runs as plain Python
    _zbtree = native.load("pyrepl.keyspace._zbtree")
    ZIndex = zindex.ZIndex if _zbtree is None else _zbtree.ZIndex

Item = tuple[float, bytes]

UNCHANGED, ADDED, UPDATED = 0, 1, 2  # results of ZSet.set_score

_CHUNK = 256    # items fetched at a time by the iterators


if TYPE_CHECKING:
    _Index = ZIndex
else:
    _Index = object


class _Ordered(_Index):
    """The sorted set's interface over an index's primitives (``set_score``, ``remove``,
    ``score``, ``_bisect``, ``_at``, ``_range``, ``_range_back``, ``_delete_range``, ``len``):
    shared by :class:`ZSet` (the B+tree) and :class:`ListpackZSet` (one listpack)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def score(self, member: bytes) -> float | None: ...

    @classmethod
    def from_items(cls, pairs: Iterable[tuple[bytes, float]]) -> Any:
        """Build from (member, score) pairs in any order (a repeated member: the last wins)."""
        z = cls()
        set_score = z.set_score
        for member, score in pairs:
            set_score(member, score)
        return z

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.items())!r})"

    def add(self, member: bytes, score: float) -> bool:
        """Set member's score; True when the member is new."""
        return self.set_score(member, score) == ADDED

    def items(self) -> Iterator[tuple[bytes, float]]:
        """(member, score) pairs in ascending order."""
        for score, member in self.iter_from(0):
            yield member, score

    def copy(self) -> Any:
        z = type(self)()
        set_score = z.set_score
        for score, member in self.iter_from(0):
            set_score(member, score)
        return z

    # -- ordered access -------------------------------------------------------------------
    def rank(self, member: bytes) -> int | None:
        """0-based ascending rank of ``member``, None when absent."""
        score = self.score(member)
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


class ZSet(_Ordered, ZIndex):
    """``dict`` (member -> score, read-only outside) and, from ``ZIndex`` in C,
    ``set_score(member, score)`` (ADDED, UPDATED or UNCHANGED for the same score),
    ``remove(member)`` and ``len()``."""

    __slots__ = ()

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)


# -- small sorted sets: one listpack ---------------------------------------------------------

_LL_HALF = float(((1 << 63) - 1) // 2)


def d2string(score: float) -> bytes:
    """How Redis 7.0 writes a score into a listpack (util.c d2string), and ZSCAN answers one
    from a listpack: an integral one within +-LLONG_MAX/2 as an integer, the others as %.17g
    ("inf", "-inf")."""
    if isinf(score):
        return b"-inf" if score < 0 else b"inf"
    if score == 0:
        return b"0"
    if -_LL_HALF <= score <= _LL_HALF and score == int(score):   # (double2ll)
        return b"%d" % int(score)
    return b"%.17g" % score


class ListpackZIndexReference(zindex.ZIndex):
    """The reference of ``_lpzset.ListpackZIndex``: zindex.py's index, with ``score`` and
    the listpack Redis keeps (member, d2string(score), ... ascending) made on demand."""

    __slots__ = ()

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)

    def to_listpack(self) -> bytes:
        body = b"".join(lp_str_entry(m) + lp_str_entry(d2string(s))
                        for s, m in self._range(0, len(self)))
        count = min(2 * len(self), 0xFFFF)
        return (7 + len(body)).to_bytes(4, "little") + count.to_bytes(2, "little") + body + \
            b"\xff"


if not TYPE_CHECKING:
    _lpzset = native.load("pyrepl.keyspace._lpzset")
    ListpackZIndex = ListpackZIndexReference if _lpzset is None else _lpzset.ListpackZIndex


# The C-backed class, whose size (sys.getsizeof) is all it holds; None as plain Python.
LPZSET_C: Any = None


class ListpackZSet(_Ordered, ListpackZIndex):
    """A small sorted set as Redis keeps it: one listpack of member, score, ... in order
    (``_lpzset.c``, or its reference as plain Python), with ZSet's interface. ``dict`` is
    made on each read: commands ask ``score(member)``."""

    __slots__ = ()


if not TYPE_CHECKING and _lpzset is not None:
    LPZSET_C = ListpackZSet



# -- when a sorted set is a listpack (t_zset.c: zsetTypeCreate, zsetAdd, zsetConvert) ----------

class _Limits:
    __slots__ = ("entries", "value")

    def __init__(self) -> None:
        self.entries = 128
        self.value = 64


limits = _Limits()
ZSETS = frozenset((ZSet, ListpackZSet))   # the types a sorted set is held in


def configure(max_entries: int, max_value: int) -> None:
    """zset-max-listpack-entries and zset-max-listpack-value."""
    limits.entries = max_entries
    limits.value = max_value
    if not TYPE_CHECKING and _lpzset is not None:
        big = (1 << 63) - 1
        _lpzset.configure(min(max_entries, big), min(max_value, big))


def new_for(first: bytes) -> Any:
    """zaddGenericCommand's new sorted set: a listpack unless the limits leave none or the
    first member is too long for one."""
    if limits.entries == 0 or len(first) > limits.value:
        return ZSet()
    return ListpackZSet()


def room_for(db: Any, key: bytes, z: Any, member: bytes) -> Any:
    """zsetAdd's check before a listpack takes ``member``: a new member that would pass a limit
    (one entry too many, or too long) makes the set a skiplist (a ZSet at ``key``) first.
    The set that takes the score."""
    if type(z) is ListpackZSet and (len(member) > limits.value or len(z) >= limits.entries) \
            and z.score(member) is None:
        out = ZSet.from_items(z.items())
        db.data[key] = out
        return out
    return z


def compact(pairs: Iterable[tuple[bytes, float]], by_count: bool = False) -> Any:
    """A new sorted set of (member, score) pairs as Redis stores a computed one (the *STORE
    commands' zsetConvertToListpackIfNeeded, RDB loading): a listpack when it fits. With
    ``by_count`` only the number of members counts (a listpack blob, which Redis 7.0 keeps as
    it is when it has few enough)."""
    items = list(pairs)
    if len(items) <= limits.entries and (by_count or
                                         all(len(m) <= limits.value for m, _ in items)):
        z: Any = ListpackZSet.from_items(items)
        if len(z) <= limits.entries:
            return z
    return ZSet.from_items(items)
