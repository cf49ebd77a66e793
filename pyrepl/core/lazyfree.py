"""Lazy freeing (Redis's lazyfree.c): big values and emptied databases released by a
background thread instead of in the command that dropped them.

Theory of operation
-------------------
Where Redis frees "asynchronously" (UNLINK; DEL with ``lazyfree-lazy-user-del``; FLUSHDB /
FLUSHALL with ASYNC or ``lazyfree-lazy-user-flush``; an expired key with
``lazyfree-lazy-expire``; an evicted key with ``lazyfree-lazy-eviction``), the caller hands
what it removed to :class:`LazyFree`:

- :meth:`LazyFree.free_value` is freeObjAsync: a value whose free effort
  (:func:`free_effort`, lazyfreeGetFreeEffort: the allocations freeing it walks) exceeds
  ``LAZYFREE_THRESHOLD`` (64) goes to the background, counted as one pending object; a
  smaller one is dropped by the caller at once, as Redis frees it in place;
- :meth:`LazyFree.free_tables` is emptyDbAsync: a database's emptied key tables go to the
  background, counted as as many pending objects as they held keys.

The background is the port :class:`FreePort` (the I/O shell's thread, pyrepl/net/bio.py
``BackgroundFree``; :class:`InlineFree` in a sans-io core and in tests). When a job is done its
objects move from ``lazyfree_pending_objects`` to ``lazyfreed_objects`` (INFO memory; CONFIG
RESETSTAT zeroes the second). The objects are Python's: the thread takes the last reference
and the deallocation runs there, holding the GIL as any Python code does; what the command
gains is that its reply and the requests already read do not wait for it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

LAZYFREE_THRESHOLD = 64


def free_effort(value: Any, core: Any) -> int:
    """lazyfreeGetFreeEffort: the allocations freeing ``value`` walks, as Redis counts them for
    the encoding it would hold the value in (a compact encoding is one allocation)."""
    from pyrepl.keyspace.hashttl import HashEx, is_listpack
    from pyrepl.keyspace.stream import Stream
    from pyrepl.keyspace.strtab import StrDict, StrSet
    from pyrepl.keyspace.zset import ZSet

    t = type(value)
    if t is deque:      # a quicklist of several nodes (a ListpackList is one)
        return quicklist_nodes(value)
    if t is StrSet or t is StrDict or t is ZSet:
        return len(value)
    if t is HashEx:
        return len(value) if len(value) > LAZYFREE_THRESHOLD and \
            not is_listpack(core, value) else 1
    if t is Stream:
        # every rax node, and every group with its PEL, sized by the first group's
        effort = len(value.nodes)
        if value.groups:
            first = next(iter(value.groups.values()))
            effort += len(value.groups) * (1 + len(first.pel))
        return effort
    return 1


def quicklist_nodes(items: deque) -> int:
    """How many quicklist nodes Redis would hold a list of ``items`` in, when that decides a
    lazy free: exact up to the threshold (a node holds at least one element), beyond it from
    the listpack bytes the elements fill (``list-max-listpack-size``'s byte limit per node)."""
    n = len(items)
    if n <= LAZYFREE_THRESHOLD:
        return n
    from pyrepl.keyspace.lplist import limits

    # an element's listpack entry: its bytes, a header of 1 to 5 and a back-length of 1 to 5
    total = sum(map(len, items)) + 2 * n
    return max(1, -(-total // max(limits.bytes, 1)))


class FreePort(Protocol):
    """What releases objects in the background (Redis's bio lazy-free thread)."""

    def release(self, objs: list[Any], count: int) -> None:
        """Drop ``objs`` (their last references); then ``count`` objects are freed."""

    def pending(self) -> int:
        """Objects handed over and not yet freed (lazyfree_pending_objects)."""

    def freed(self) -> int:
        """Objects freed since the start or the last :meth:`reset_freed`."""

    def reset_freed(self) -> None: ...


class InlineFree:
    """The port done at once in the caller's thread (a sans-io core; the test fake)."""

    def __init__(self) -> None:
        self._freed = 0
        self.jobs = 0       # (what a test reads: how many releases came here)

    def release(self, objs: list[Any], count: int) -> None:
        objs.clear()
        self._freed += count
        self.jobs += 1

    def pending(self) -> int:
        return 0

    def freed(self) -> int:
        return self._freed

    def reset_freed(self) -> None:
        self._freed = 0


class LazyFree:
    def __init__(self, core: Any, port: FreePort) -> None:
        self.core = core
        self.port = port

    def free_value(self, value: Any) -> bool:
        """freeObjAsync: to the background when freeing it is worth it (True), else the caller
        drops it at once (False)."""
        if type(value) is bytes or free_effort(value, self.core) <= LAZYFREE_THRESHOLD:
            return False
        self.port.release([value], 1)
        return True

    def free_tables(self, tables: list[Any], keys: int) -> None:
        """emptyDbAsync: a database's key tables (``keys`` keys) to the background."""
        self.port.release(tables, keys)

    def pending(self) -> int:
        return self.port.pending()

    def freed(self) -> int:
        return self.port.freed()

    def reset_stats(self) -> None:
        self.port.reset_freed()
