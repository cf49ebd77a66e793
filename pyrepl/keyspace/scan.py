"""Cursor iteration for SCAN, HSCAN, SSCAN and ZSCAN (shared helper, both roles).

Theory of operation: Redis's cursor is a position in its hash table's bucket space, which we
do not have: our containers are Python dicts and sets. A plain index into the container's
iteration order would skip elements whenever something before the cursor is deleted (the
rest shift left), breaking SCAN's one guarantee: *an element present during the whole
iteration is returned at least once*. So a cursor names a **snapshot**: the first call
(cursor 0) on a container larger than COUNT copies its current members into a list (one
reference per member) kept in a small registry, and returns
``cursor = snapshot_id << 32 | next_position``. Later calls page through that list, so every
member present at the start — in particular every member present the whole time — is
returned exactly once; callers drop candidates that no longer exist (and so never return a
deleted element) and members added meanwhile may or may not be seen, as in Redis. Re-sending
a cursor repeats the same page. The snapshot is dropped when the iteration completes.

The registry is bounded (``MAX_SNAPSHOTS`` iterations and ``MAX_SNAPSHOT_ITEMS`` references
in all, least recently used evicted first). A cursor whose snapshot is gone (evicted,
abandoned long ago, from another server process, or made up by the client) still works: a new
snapshot of the container's current order is taken and paging resumes at the cursor's
position, which is exact unless elements were deleted in between (then some may be missed).
Any unsigned 64-bit cursor is accepted, as in Redis; one past the end returns cursor 0.

API:

* ``parse_cursor(arg) -> int`` — Redis's strtoul checks; raises ``ERR invalid cursor``.
* ``parse_scan_options(argv, start, allow_type) -> ScanOptions`` — COUNT / MATCH (/ TYPE for
  SCAN) from ``argv[start:]`` with Redis's errors; ``opts.match`` is a matcher or None.
* ``scan_page(source, cursor, count) -> (next_cursor, candidates)`` — up to ``count``
  members of ``source`` (any sized iterable: dict -> keys, set, ZSet.dict, ...). The caller
  filters candidates (still present? MATCH? TYPE? expired?) and replies
  ``[b"%d" % next_cursor, items]``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable

from pyrepl.errors import SYNTAX
from pyrepl.intparse import parse_int
from pyrepl.keyspace.glob import compile_pattern
from pyrepl.resp.types import ReplyError

INVALID_CURSOR = "ERR invalid cursor"
ULONG_MAX = (1 << 64) - 1

MAX_SNAPSHOTS = 256
MAX_SNAPSHOT_ITEMS = 16_000_000

# snapshot id -> (id() of the container, its members at cursor 0)
_snapshots: OrderedDict[int, tuple[int, list]] = OrderedDict()
_items = 0
_next_id = 0


def parse_cursor(arg: bytes) -> int:
    """A cursor as Redis 7.0 parses it: strtoul base 10, no leading space, full string."""
    if arg and arg[0] in b" \t\n\v\f\r":
        raise ReplyError(INVALID_CURSOR)
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]  # C string: the argument ends at the first NUL
    if not arg:
        return 0  # strtoul("") converts nothing and leaves the end pointer on the NUL
    digits = arg[1:] if arg[0] in b"+-" else arg
    if not digits.isdigit():
        raise ReplyError(INVALID_CURSOR)
    v = int(digits)
    if v > ULONG_MAX:
        raise ReplyError(INVALID_CURSOR)
    if arg[0] == 45:  # '-': strtoul negates in unsigned arithmetic
        v = (-v) & ULONG_MAX
    return v


class ScanOptions:
    __slots__ = ("count", "match", "type")

    def __init__(self) -> None:
        self.count = 10
        self.match: Callable[[bytes], bool] | None = None
        self.type: bytes | None = None  # lower-case type name (SCAN only)


def parse_scan_options(argv: list[bytes], start: int, allow_type: bool = False) -> ScanOptions:
    """COUNT n / MATCH pattern / TYPE name from ``argv[start:]`` (errors as Redis 7.0)."""

    opts = ScanOptions()
    i = start
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        more = n - i
        if opt == b"count" and more >= 2:
            count = parse_int(argv[i + 1])
            if count < 1:
                raise ReplyError(SYNTAX)
            opts.count = count
        elif opt == b"match" and more >= 2:
            pattern = argv[i + 1]
            opts.match = None if pattern == b"*" else compile_pattern(pattern)
        elif opt == b"type" and allow_type and more >= 2:
            opts.type = argv[i + 1].lower()
        else:
            raise ReplyError(SYNTAX)
        i += 2
    return opts


def _register(source_id: int, snap: list) -> int:
    global _items, _next_id
    _next_id = _next_id % 0x7FFFFFFF + 1
    old = _snapshots.pop(_next_id, None)
    if old is not None:
        _items -= len(old[1])
    _snapshots[_next_id] = (source_id, snap)
    _items += len(snap)
    while len(_snapshots) > 1 and (len(_snapshots) > MAX_SNAPSHOTS
                                   or _items > MAX_SNAPSHOT_ITEMS):
        _, (_, dropped) = _snapshots.popitem(last=False)
        _items -= len(dropped)
    return _next_id


def _drop(snap_id: int) -> None:
    global _items
    entry = _snapshots.pop(snap_id, None)
    if entry is not None:
        _items -= len(entry[1])


def scan_page(source: Collection | Iterable, cursor: int, count: int) -> tuple[int, list]:
    """One page of candidates from ``source`` starting at ``cursor``; (next cursor, page)."""
    if cursor == 0:
        if len(source) <= count:  # type: ignore[arg-type]
            return 0, list(source)
        snap = list(source)
        snap_id = _register(id(source), snap)
        pos = 0
    else:
        snap_id, pos = cursor >> 32, cursor & 0xFFFFFFFF
        entry = _snapshots.get(snap_id)
        if entry is None or entry[0] != id(source):
            snap = list(source)
            if pos >= len(snap):
                return 0, []
            snap_id = _register(id(source), snap)
        else:
            snap = entry[1]
            _snapshots.move_to_end(snap_id)
    end = pos + count
    page = snap[pos:end]
    if end >= len(snap):
        _drop(snap_id)
        return 0, page
    return snap_id << 32 | end, page
