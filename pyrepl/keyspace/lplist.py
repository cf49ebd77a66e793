"""Small lists as one listpack: what a Redis 7.0 quicklist of a single node holds.

Redis 7.0 keeps every list as a quicklist (``OBJECT ENCODING`` always says ``quicklist``): a
linked list of listpack nodes, each filled up to ``list-max-listpack-size`` (-2: 8 KB; a
positive value: that many elements, within 8 KB). A small list is one node: its elements in one
listpack. pyrepl keeps such a list as a :data:`ListpackList` (the C type of ``_lplist.c``: a
32-byte object and the node's exact listpack, where a deque of 10 elements costs ~1.3 KB); a
list that grows past one node's fill becomes a ``collections.deque`` of bytes for good (the
deque's O(1) pushes and pops at both ends for long lists).

A ListpackList answers the part of deque's interface the list commands use (``append``,
``appendleft``, ``extend``, ``extendleft``, ``pop``, ``popleft``, ``insert``, ``index``,
``clear``, indexing, iteration both ways, ``len``), with the same results. The RDB writes it as
a quicklist of one node (RDB_TYPE_LIST_QUICKLIST_2), its listpack as it is, as Redis writes a
small list.

:class:`ListpackListReference` is the Python reference (a deque subclass writing its listpack
on demand): what runs as plain Python (pyrepl/native.py), and what tests/unit/test_lplist.py
holds the C type equal to.

The fill is process-wide as Redis's ``server.list_max_listpack_size``: :func:`configure`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import Any

from pyrepl import native
from pyrepl.keyspace.listpack import lp_str_entry

# quicklist.c: a node's size limit per negative fill (-1 .. -5), and the safety limit of a
# node filled by count
_FILL_BYTES = (4096, 8192, 16384, 32768, 65536)
SIZE_SAFETY_LIMIT = 8192


def _check(x: object) -> None:
    if not isinstance(x, bytes):
        raise TypeError("ListpackList elements must be bytes")


class ListpackListReference(deque):
    """The reference of ``_lplist.ListpackList``: a deque of bytes that writes its listpack
    on demand."""

    __slots__ = ()

    def append(self, x: bytes) -> None:
        _check(x)
        deque.append(self, x)

    def appendleft(self, x: bytes) -> None:
        _check(x)
        deque.appendleft(self, x)

    def extend(self, xs: Iterable[bytes]) -> None:
        for x in xs:
            self.append(x)

    def extendleft(self, xs: Iterable[bytes]) -> None:
        for x in xs:
            self.appendleft(x)

    def insert(self, i: int, x: bytes) -> None:
        _check(x)
        deque.insert(self, i, x)

    def __setitem__(self, i: int, x: bytes) -> None:  # type: ignore[override]
        _check(x)
        deque.__setitem__(self, i, x)

    def copy(self) -> ListpackListReference:
        return ListpackListReference(self)

    def __repr__(self) -> str:
        return f"ListpackList({list(self)!r})"

    def to_listpack(self) -> bytes:
        """The elements as lpAppend writes them (canonical integers as integers)."""
        body = b"".join(lp_str_entry(x) for x in self)
        count = min(len(self), 0xFFFF)
        return (7 + len(body)).to_bytes(4, "little") + count.to_bytes(2, "little") + body + \
            b"\xff"

    def listpack_bytes(self) -> int:
        return len(self.to_listpack())

    def range(self, start: int, stop: int) -> list[bytes]:
        """The elements with index in [start, stop), clipped."""
        return list(islice(self, max(start, 0), max(stop, 0)))


_native = native.load("pyrepl.keyspace._lplist")
ListpackList: Any = _native.ListpackList if _native is not None else ListpackListReference
# The C type, whose size (sys.getsizeof) is all it holds; None as plain Python.
NATIVE_TYPE: Any = _native.ListpackList if _native is not None else None


class _Limits:
    __slots__ = ("count", "bytes", "packed_threshold")

    def __init__(self) -> None:
        self.count = 1 << 62
        self.bytes = 8192
        # an element this long is a plain node of its own (quicklist's packed_threshold, which
        # DEBUG QUICKLIST-PACKED-THRESHOLD sets)
        self.packed_threshold = 1 << 30


limits = _Limits()


def configure(fill: int) -> None:
    """list-max-listpack-size: a negative fill caps a node's bytes (-1: 4 KB .. -5: 64 KB), a
    positive one its elements (within 8 KB)."""
    if fill < 0:
        limits.count = 1 << 62
        limits.bytes = _FILL_BYTES[min(-fill, 5) - 1]
    else:
        limits.count = max(fill, 1)
        limits.bytes = SIZE_SAFETY_LIMIT
    if _native is not None:
        _native.configure(limits.count, limits.bytes)


def fits(lst: Any) -> bool:
    """Does the ListpackList still fit one quicklist node?"""
    return len(lst) <= limits.count and lst.listpack_bytes() <= limits.bytes


def compact(elements: Iterable[bytes]) -> Any:
    """A new list of ``elements`` (RDB loading, SORT ... STORE): a ListpackList when they fit
    one node, else a deque (found out by filling at most one node)."""
    items = elements if isinstance(elements, list) else list(elements)
    if len(items) > limits.count:
        return deque(items)
    lst = ListpackList()
    append = lst.append
    size = lst.listpack_bytes
    limit = limits.bytes
    for x in items:
        append(x)
        if size() > limit:
            return deque(items)
    return lst


def quicklist_shape(elements: Iterable[bytes]) -> tuple[int, int]:
    """(nodes, bytes) of the quicklist Redis would hold for ``elements`` pushed at the tail
    (_quicklistNodeAllowInsert: a node takes an element while its count stays within the
    fill and its listpack within the fill's bytes): DEBUG OBJECT's ql_nodes and
    ql_uncompressed_size."""
    nodes, total, count, size = 0, 0, 0, 0
    plain = limits.packed_threshold
    for x in elements:
        if len(x) >= plain:             # a plain node of its own (isLargeElement)
            nodes += 1
            total += size + len(x)
            count, size = 0, 0
            continue
        entry = len(lp_str_entry(x))
        if count == 0 or count + 1 > limits.count or size + entry > limits.bytes:
            nodes += 1
            total += size
            count, size = 0, 7          # a new node: the listpack's header and end byte
        count += 1
        size += entry
    return nodes, total + size


def to_deque(db: Any, key: bytes, lst: Any) -> deque:
    """The deque that replaces the ListpackList at ``key`` once it outgrew a node."""
    d = deque(lst)
    db.data[key] = d
    return d
