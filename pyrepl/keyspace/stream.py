"""The stream value (Redis 7.0.15's t_stream.c / stream.h), with Redis's node layout.

Theory of operation: an entry ID is one int, ``ms << 64 | seq`` (so IDs compare as ints). Redis
keeps a stream as a radix tree of listpack "nodes", each holding up to
``stream-node-max-entries`` entries or ``stream-node-max-bytes`` bytes, and its approximate
trimming (``~``) only drops whole nodes; its XINFO shows the node count and the RDB writes one
listpack per node. So the model keeps the same nodes, in a list beside their master IDs (the
rax keys; ranges bisect them), and each :class:`Node` *is* that listpack:

* The tail node is **open**: its listpack is being built, entry by entry, exactly as
  streamAppendItem/lpAppend write it (``rest``: the bytes after the two counters, which change
  size as they grow), and its entries are also kept decoded (:class:`Entries`: IDs, flat
  field/value lists, flags, each entry's flags-byte offset) so that appends and reads of the
  newest entries cost no decoding. Its lpBytes (which decides when XADD opens a new node) is
  the length of what it holds.
* A full node (XADD opened a newer one) is **sealed**: only its listpack's bytes are kept
  (``lp``; a node read from an RDB is kept sealed as read, once checked), about Redis's own
  footprint. The RDB writer copies those bytes as they are. A read (range, get, delete, trim
  inside the node, ...) decodes it on demand (:func:`decode_node`: ~26 us a node of 100
  entries in C, _streamlp.c, whose Python reference is :func:`decode_node_reference`, ~130 us
  a node; PYREPL_PURE=1 runs the reference); the last CACHE_NODES decoded sealed nodes keep
  their decoded entries (a FIFO over all streams), so a client paging through a node decodes
  it once. A read or XDEL of one entry by ID in a sealed node not in the cache walks its bytes
  to that entry instead (:func:`find_sealed`). XDEL and an exact trim edit a sealed listpack as
  Redis does in place: the entry's flags byte (a 7-bit int: same size) and the two counters.
  XADD into a sealed tail (its successor was deleted away, or it came from an RDB and has
  room) decodes it back into an open node.

Deleted entries stay in their node as tombstones (flagged), as in the listpack, with the live
and deleted counts; a node without live entries goes (XDEL), as in Redis.

Consumer groups are dicts: group name -> :class:`Group` (last delivered ID, entries_read, the
PEL as ID -> :class:`Nack`, consumers); a :class:`Consumer` has its seen-time and its own PEL
(the same Nack objects). Rax order (byte order of names, numeric order of IDs) is obtained by
sorting when a reply or the RDB needs it.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from itertools import islice
from typing import Any

from pyrepl import native
from pyrepl.keyspace.listpack import (
    listpack_entries,
    lp_int_entry,
    lp_int_size,
    lp_str_entry,
)

MASK64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
SCG_INVALID_ENTRIES_READ = -1
FLAG_DELETED = 1
FLAG_SAMEFIELDS = 2
LISTPACK_MAX_SIZE = 1 << 30          # STREAM_LISTPACK_MAX_SIZE
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I64_LIMIT = 1 << 63
_ZERO = lp_int_entry(0)
_streamlp = native.load("pyrepl.keyspace._streamlp")     # decode_node's speed-up, or None


def make_id(ms: int, seq: int) -> int:
    return (ms << 64) | seq


def id_str(i: int) -> bytes:
    return b"%d-%d" % (i >> 64, i & MASK64)


def _i64(v: int) -> int:
    """A uint64 difference seen as the int64 lpAppendInteger stores."""
    v &= MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


class Nack:
    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(self, delivery_time: int, delivery_count: int,
                 consumer: Consumer | None) -> None:
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.consumer = consumer


class Pel(dict[int, Nack]):
    """A pending entries list, ID -> Nack, its IDs also kept in order in ``ids``: Redis's rax,
    read in ID order from a start (XREADGROUP's history, XPENDING, XAUTOCLAIM) without sorting
    the whole PEL at each call (a consumer holding 1,000 entries sorted them for each
    XREADGROUP of 10). Written through item assignment, ``del`` and ``pop``, which keep ``ids``;
    a writer in C (the RDB codec's read_pel) is followed by ``resort()``."""

    __slots__ = ("ids",)

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[int] = []

    def __setitem__(self, eid: int, nack: Nack) -> None:
        if eid not in self:
            ids = self.ids
            if ids and eid < ids[-1]:
                insort(ids, eid)
            else:               # (the common case: a delivery of newer entries)
                ids.append(eid)
        dict.__setitem__(self, eid, nack)

    def __delitem__(self, eid: int) -> None:
        dict.__delitem__(self, eid)
        ids = self.ids
        del ids[bisect_left(ids, eid)]

    def pop(self, eid: int, *default: Any) -> Any:  # type: ignore[override]
        if eid in self:
            ids = self.ids
            del ids[bisect_left(ids, eid)]
        return dict.pop(self, eid, *default)

    def clear(self) -> None:
        dict.clear(self)
        self.ids = []

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a Pel is written through item assignment, del and pop")

    setdefault = update = popitem = _refuse  # type: ignore[assignment]

    def resort(self) -> None:
        """``ids`` from the keys, after a writer that bypassed the methods above."""
        self.ids = sorted(dict.keys(self))

    def from_id(self, start: int, count: int = 0) -> list[int]:
        """The IDs from ``start`` on, in order; the first ``count`` of them (0: all)."""
        ids = self.ids
        i = bisect_left(ids, start)
        return ids[i:i + count] if count > 0 else ids[i:]


class Consumer:
    __slots__ = ("name", "seen_time", "pel")

    def __init__(self, name: bytes, seen_time: int) -> None:
        self.name = name
        self.seen_time = seen_time
        self.pel = Pel()


class Group:
    __slots__ = ("last_id", "entries_read", "pel", "consumers")

    def __init__(self, last_id: int, entries_read: int) -> None:
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel = Pel()
        self.consumers: dict[bytes, Consumer] = {}


class Entries:
    """A node's entries decoded: the master entry's field names and, per entry ever put in the
    node (tombstones included), its ID, flat field/value list, flags and the offset of its
    flags byte in ``rest``. An open node also keeps ``rest`` (its listpack after the two
    counters, terminator excluded, grown by every append) and ``count`` (its listpack's
    element count); a sealed node's decoded copy has no ``rest``."""

    __slots__ = ("fields", "ids", "fvs", "flags", "offs", "rest", "count")

    def __init__(self, fields: list[bytes]) -> None:
        self.fields = fields
        self.ids: list[int] = []
        self.fvs: list[list[bytes]] = []
        self.flags: list[int] = []
        self.offs: list[int] = []
        self.rest: bytearray | None = None
        self.count = 0

    def copy(self) -> Entries:
        e = Entries(self.fields)
        e.ids, e.fvs, e.flags, e.offs = list(self.ids), list(self.fvs), list(self.flags), \
            list(self.offs)
        e.rest = None if self.rest is None else bytearray(self.rest)
        e.count = self.count
        return e


class NodeCorrupt(ValueError):
    """A stream listpack whose entries are not stream.h's layout (the message is Redis's)."""


_BAD = "Stream listpack integrity check failed"
CACHE_NODES = 8                # sealed nodes kept decoded at once (all streams together)
_decoded: dict[Node, None] = {}   # those nodes, oldest first


class Node:
    """One listpack of Redis's radix tree: open (``lp`` None, entries in ``d``, the stream's
    tail) or sealed (``lp``, the listpack's exact bytes; ``d`` a bounded cache of its decoded
    entries). ``last`` is the last entry's ID (tombstones included); ``live`` and ``deleted``
    are the listpack's two counters."""

    __slots__ = ("master", "last", "live", "deleted", "lp", "d")

    def __init__(self, master: int, fields: list[bytes]) -> None:
        """A new open node: the master entry (its ID is ``master``) and no entries yet."""
        self.master = master
        self.last = master
        self.live = 0
        self.deleted = 0
        self.lp: bytes | None = None
        d = Entries(fields)
        rest = bytearray(lp_int_entry(len(fields)))
        for f in fields:
            rest += lp_str_entry(f)
        rest += _ZERO
        d.rest = rest
        d.count = 4 + len(fields)       # live, deleted, num-fields, the fields, the 0
        self.d: Entries | None = d

    @classmethod
    def sealed(cls, master: int, lp: bytes) -> Node:
        """A node of the listpack ``lp`` kept as it is, once its layout is checked (NodeCorrupt,
        ContainerError)."""
        last, live, deleted = check_node(master, lp)
        n = cls.__new__(cls)
        n.master, n.last, n.live, n.deleted, n.lp, n.d = master, last, live, deleted, lp, None
        return n

    def lp_bytes(self) -> int:
        """lpBytes of the node's listpack: header (6) + counters + the rest + terminator."""
        lp = self.lp
        if lp is not None:
            return len(lp)
        d = self.d
        assert d is not None and d.rest is not None
        return 7 + lp_int_size(self.live) + lp_int_size(self.deleted) + len(d.rest)

    def entries(self) -> Entries:
        """The decoded entries: an open node's own, or a sealed node's (decoded now unless
        cached; the cache keeps the last CACHE_NODES decoded nodes)."""
        d = self.d
        if d is None:
            assert self.lp is not None
            d = decode_node(self.master, self.lp)[0]
            self.d = d
            _decoded[self] = None
            if len(_decoded) > CACHE_NODES:
                old = next(iter(_decoded))
                del _decoded[old]
                if old.lp is not None:
                    old.d = None
        return d

    def listpack(self) -> bytes:
        """The node's listpack, as Redis holds it (what the RDB writes)."""
        lp = self.lp
        if lp is not None:
            return lp
        d = self.d
        assert d is not None and d.rest is not None
        return _assemble(d.count, self.live, self.deleted, d.rest)

    def seal(self) -> None:
        """The node is full (a newer node exists): keep only its listpack's bytes."""
        if self.lp is None:
            self.lp = self.listpack()
            self.d = None

    def unseal(self) -> None:
        """XADD appends to this sealed node (the tail again after deletions, or read from an
        RDB): decode it into an open node."""
        lp = self.lp
        if lp is None:
            return
        d = self.entries()
        _decoded.pop(self, None)
        d.rest = bytearray(lp[_rest_start(lp):-1])
        d.count = _lp_count(lp, d)
        self.lp = None

    def add(self, eid: int, fv: list[bytes], flags: int) -> None:
        """streamAppendItem's listpack part, on the open node."""
        d = self.d
        assert self.lp is None and d is not None and d.rest is not None
        rest = d.rest
        nf = len(fv) // 2
        d.offs.append(len(rest))
        master = self.master
        msd = (eid >> 64) - (master >> 64)
        seqd = (eid & MASK64) - (master & MASK64)
        if not -_I64_LIMIT <= msd < _I64_LIMIT:
            msd = _i64(msd)
        if not -_I64_LIMIT <= seqd < _I64_LIMIT:
            seqd = _i64(seqd)
        same = bool(flags & FLAG_SAMEFIELDS)
        e = None if _streamlp is None else _streamlp.entry(flags, msd, seqd, fv, same)
        rest += entry_bytes_reference(flags, msd, seqd, fv, same) if e is None else e
        d.count += nf + 4 if same else nf * 2 + 5
        d.ids.append(eid)
        d.fvs.append(fv)
        d.flags.append(flags)
        self.last = eid
        self.live += 1

    def flag_deleted(self, js: list[int]) -> None:
        """Flag entries ``js`` (live ones) deleted and update the counters, as streamDeleteItem
        and streamTrim edit the listpack in place (the flag byte, then the two counters)."""
        d = self.entries()
        lp = self.lp
        rest = d.rest if lp is None else \
            bytearray(lp[_rest_start(lp):-1])
        assert rest is not None
        flags, offs = d.flags, d.offs
        for j in js:
            flags[j] |= FLAG_DELETED
            rest[offs[j]] |= FLAG_DELETED
        self.live -= len(js)
        self.deleted += len(js)
        if lp is not None:
            self.lp = _assemble(_U16.unpack_from(lp, 4)[0], self.live, self.deleted, rest)

    def flag_deleted_at(self, off: int) -> None:
        """flag_deleted of one entry of a sealed, undecoded node, by its flags byte's offset
        in ``lp`` (find_sealed's)."""
        lp = self.lp
        assert lp is not None and self.d is None
        ba = bytearray(lp)
        ba[off] |= FLAG_DELETED
        self.live -= 1
        self.deleted += 1
        self.lp = _assemble(_U16.unpack_from(lp, 4)[0], self.live, self.deleted,
                            ba[_rest_start(lp):-1])

    def copy(self) -> Node:
        n = Node.__new__(Node)
        n.master, n.last, n.live, n.deleted, n.lp = \
            self.master, self.last, self.live, self.deleted, self.lp
        n.d = self.d.copy() if self.lp is None and self.d is not None else None
        return n


def history_reply_reference(s: Stream, ids: list[int], null: Any) -> tuple[list[Any], list[int]]:
    """Stream.history_reply in Python (the reference of _streamlp.history_reply)."""
    out: list[Any] = []
    found: list[int] = []
    for eid in ids:
        fv = s.get(eid)
        if fv is None:
            out.append([id_str(eid), null])
        else:
            out.append([id_str(eid), fv])
            found.append(eid)
    return out, found


def find_sealed(node: Node, eid: int) -> tuple[int, list[bytes]] | None:
    """A live entry of a sealed node, found in its bytes without decoding the node: the offset
    of its flags byte in ``node.lp`` and its field/value list; None when it is not there (or is
    a tombstone). _streamlp.find walks the listpack; find_reference decodes it."""
    lp = node.lp
    assert lp is not None
    if _streamlp is not None:
        m = node.master
        r = _streamlp.find(lp, m >> 64, m & MASK64, eid >> 64, eid & MASK64)
        if r is not False:
            return r  # type: ignore[no-any-return]
    return find_reference(node, eid)


def find_reference(node: Node, eid: int) -> tuple[int, list[bytes]] | None:
    """find_sealed in Python (the reference of _streamlp.find): decode, bisect."""
    lp = node.lp
    assert lp is not None
    d = decode_node(node.master, lp)[0]
    j = bisect_left(d.ids, eid)
    if j < len(d.ids) and d.ids[j] == eid and not d.flags[j] & FLAG_DELETED:
        return _rest_start(lp) + d.offs[j], d.fvs[j]
    return None


def entry_bytes_reference(flags: int, msd: int, seqd: int, fv: list[bytes], same: bool) -> bytes:
    """One entry's listpack bytes as streamAppendItem writes them: flags, ms-delta, seq-delta,
    then (SAMEFIELDS) the values or the field count and every field and value, then lp-count
    (the reference of _streamlp.entry)."""
    nf = len(fv) // 2
    head = lp_int_entry(flags) + lp_int_entry(msd) + lp_int_entry(seqd)
    if same:
        return head + b"".join(map(lp_str_entry, fv[1::2])) + lp_int_entry(nf + 3)
    return head + lp_int_entry(nf) + b"".join(map(lp_str_entry, fv)) + lp_int_entry(nf * 2 + 4)


_INT_ENTRY_SIZE = {0xF1: 4, 0xF2: 5, 0xF3: 6, 0xF4: 10}     # encoding byte -> entry bytes


def _rest_start(lp: bytes) -> int:
    """Where a sealed listpack's entries after the two counters begin (the counters are
    integer entries, checked when decoded, though not necessarily in their shortest form)."""
    p = 6
    for _ in range(2):
        b = lp[p]
        p += 2 if b < 0x80 else 3 if b < 0xE0 else _INT_ENTRY_SIZE[b]
    return p


def _lp_count(lp: bytes, d: Entries) -> int:
    """A sealed node's element count (the header's, unless it says 0xFFFF: too many)."""
    count: int = _U16.unpack_from(lp, 4)[0]
    if count != 0xFFFF:
        return count
    n = 4 + len(d.fields)
    for flags, fv in zip(d.flags, d.fvs, strict=True):
        nf = len(fv) // 2
        n += nf + 4 if flags & FLAG_SAMEFIELDS else nf * 2 + 5
    return n


def _assemble(count: int, live: int, deleted: int, rest: bytes | bytearray) -> bytes:
    """A listpack from its element count, the two counters and the rest of its entries."""
    live_e, deleted_e = lp_int_entry(live), lp_int_entry(deleted)
    total = 7 + len(live_e) + len(deleted_e) + len(rest)
    return b"".join((_U32.pack(total), _U16.pack(min(count, 0xFFFF)), live_e, deleted_e,
                     rest, b"\xff"))


def decode_node(master: int, lp: bytes) -> tuple[Entries, int, int]:
    """A stream listpack (stream.h's layout: counters, master entry, then entries of flags,
    ms-delta, seq-delta, [num-fields, fields], values, lp-count) decoded and checked: the
    entries, live count and deleted count. Raises ContainerError or NodeCorrupt.

    _streamlp.decode (C) does it for a well-formed listpack; anything else (or PYREPL_PURE=1)
    goes to the reference, which says what is wrong."""
    if _streamlp is not None:
        r = _streamlp.decode(lp, master >> 64, master & MASK64)
        if r is not None:
            d = Entries(r[0])
            d.ids, d.fvs, d.flags, d.offs = r[1], r[2], r[3], r[4]
            return d, r[5], r[6]
    return decode_node_reference(master, lp)


def check_node(master: int, lp: bytes) -> tuple[int, int, int]:
    """decode_node's checks without its lists (a node kept as its bytes: the RDB loader,
    RESTORE): the last entry's ID (the master's when none), live and deleted counts. Raises
    ContainerError or NodeCorrupt. _streamlp.check (C) walks a well-formed listpack without
    building an object of its entries; anything else goes to the reference."""
    if _streamlp is not None:
        r = _streamlp.check(lp, master >> 64, master & MASK64)
        if r is not None:
            return r
    return check_node_reference(master, lp)


def check_node_reference(master: int, lp: bytes) -> tuple[int, int, int]:
    """check_node in Python (the reference of _streamlp.check): the reference decode's
    answer, reduced."""
    d, live, deleted = decode_node_reference(master, lp)
    return (d.ids[-1] if d.ids else master), live, deleted


def decode_node_reference(master: int, lp: bytes) -> tuple[Entries, int, int]:
    """decode_node in Python (the reference of _streamlp.decode)."""
    starts: list[int] = []
    items: list[Any] = listpack_entries(lp, starts)   # (bytes | int: a wrong type is corrupt)
    if not items:
        raise NodeCorrupt("Empty listpack inside stream")
    try:
        live, deleted, nf = items[0], items[1], items[2]
        if type(live) is not int or type(deleted) is not int or type(nf) is not int or nf < 0:
            raise NodeCorrupt(_BAD)
        fields = [x if x.__class__ is bytes else b"%d" % x for x in items[3:3 + nf]]
        p = 3 + nf
        if len(fields) != nf or items[p] != 0:
            raise NodeCorrupt(_BAD)
        p += 1
        base = starts[2]
        d = Entries(fields)
        ids, fvs, flagl, offs = d.ids, d.fvs, d.flags, d.offs
        mms, mseq = master >> 64, master & MASK64
        template: list[bytes] = [x for f in fields for x in (f, b"")]
        n = len(items)
        while p < n:
            flags = items[p]
            start = starts[p]
            if lp[start] != flags:              # (flags: a 7-bit int, patched in place)
                raise NodeCorrupt(_BAD)
            ids.append(((mms + items[p + 1]) & MASK64) << 64 | ((mseq + items[p + 2]) & MASK64))
            offs.append(start - base)
            start_p = p
            p += 3
            if flags & FLAG_SAMEFIELDS:
                end = p + nf
                fv = template.copy()
                fv[1::2] = [x if x.__class__ is bytes else b"%d" % x for x in items[p:end]]
            else:
                k = items[p]
                p += 1
                end = p + 2 * k
                fv = [x if x.__class__ is bytes else b"%d" % x for x in items[p:end]]
                if len(fv) != 2 * k:
                    raise NodeCorrupt(_BAD)
            # the lp-count: the entry's other items (streamValidateListpackIntegrity checks it)
            if items[end] != end - start_p:
                raise NodeCorrupt(_BAD)
            p = end + 1
            fvs.append(fv)
            flagl.append(flags)
    except (IndexError, TypeError, ValueError):
        # (an item of the wrong type, or fewer values than the master entry's fields)
        raise NodeCorrupt(_BAD) from None
    if p != n or len(ids) != live + deleted:
        raise NodeCorrupt(_BAD)
    return d, live, deleted


def range_reply_reference(s: Stream, start: int, end: int, rev: bool, count: int
                          ) -> list[list[Any]]:
    """Stream.range_reply in Python: the reference of _streamlp.range_reply."""
    entries = s.range(start, end, rev)
    if count >= 0:
        entries = islice(entries, count)
    return [[id_str(eid), fv] for eid, fv in entries]


def _as_bytes(x: bytes | int) -> bytes:
    return x if isinstance(x, bytes) else b"%d" % x


class Stream:
    __slots__ = ("nodes", "keys", "length", "last_id", "first_id", "max_deleted",
                 "entries_added", "groups")

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.keys: list[int] = []           # the nodes' master IDs (the rax keys)
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted = 0
        self.entries_added = 0
        self.groups: dict[bytes, Group] = {}

    def __bool__(self) -> bool:
        return True                         # an empty stream is still a key

    # -- appending ----------------------------------------------------------------------------
    def append(self, eid: int, fv: list[bytes], max_bytes: int, max_entries: int) -> None:
        """streamAppendItem after the ID checks: into the tail node or a new one."""
        node = self.nodes[-1] if self.nodes else None
        if node is not None:
            if max_bytes == 0 or max_bytes > LISTPACK_MAX_SIZE:
                max_bytes = LISTPACK_MAX_SIZE
            totelelen = sum(len(x) for x in fv)
            if node.lp_bytes() + totelelen >= max_bytes:
                node = None
            elif max_entries and node.live + node.deleted >= max_entries:
                node = None
        if node is None:
            if self.nodes:
                self.nodes[-1].seal()
            node = Node(eid, fv[0::2])
            self.nodes.append(node)
            self.keys.append(eid)
            flags = FLAG_SAMEFIELDS
        else:
            if node.lp is not None:
                node.unseal()
            flags = FLAG_SAMEFIELDS if fv[0::2] == node.d.fields else 0  # type: ignore[union-attr]
        node.add(eid, fv, flags)
        self.length += 1
        self.entries_added += 1
        self.last_id = eid
        if self.length == 1:
            self.first_id = eid

    # -- reading ------------------------------------------------------------------------------
    def range(self, start: int, end: int, rev: bool = False) -> Iterator[tuple[int, list[bytes]]]:
        """Live entries with start <= ID <= end, in order (or reversed)."""
        keys, nodes = self.keys, self.nodes
        if not rev:
            i = bisect_right(keys, start) - 1
            if i < 0:
                i = 0
            while i < len(nodes):
                node = nodes[i]
                if node.last < start:
                    i += 1
                    continue
                if node.master > end:
                    return
                d = node.entries()
                ids, flags, fvs = d.ids, d.flags, d.fvs
                j = bisect_left(ids, start)
                while j < len(ids):
                    eid = ids[j]
                    if eid > end:
                        return
                    if not flags[j] & FLAG_DELETED:
                        yield eid, fvs[j]
                    j += 1
                i += 1
        else:
            i = bisect_right(keys, end) - 1
            while i >= 0:
                node = nodes[i]
                if node.last < start:
                    return
                d = node.entries()
                ids, flags, fvs = d.ids, d.flags, d.fvs
                j = bisect_right(ids, end) - 1
                while j >= 0:
                    eid = ids[j]
                    if eid < start:
                        return
                    if not flags[j] & FLAG_DELETED:
                        yield eid, fvs[j]
                    j -= 1
                i -= 1

    def range_reply(self, start: int, end: int, rev: bool, count: int) -> list[list[Any]]:
        """XRANGE's reply: ``[id, fv]`` (the ID as text) of the first ``count`` entries of
        range(start, end, rev), all of them when ``count`` is negative. In C
        (_streamlp.range_reply) when built: the per-entry Python was most of an XRANGE of
        10 entries (85k instructions a call, bench/RESULTS.md)."""
        if _streamlp is not None:
            return _streamlp.range_reply(self.keys, self.nodes, start, end, rev, count)
        return range_reply_reference(self, start, end, rev, count)

    def history_reply(self, ids: list[int], null: Any) -> tuple[list[Any], list[int]]:
        """[id, fv] for each of ``ids``, ``null`` for the fv of one the stream does not hold
        live, and the IDs it holds: XREADGROUP's read of a consumer's history
        (streamReplyWithRangeFromConsumerPEL). In C (_streamlp.history_reply) when built:
        a Stream.get and an id_str per entry were most of an XREADGROUP of 10 (bench/RESULTS.md)."""
        if _streamlp is not None:
            r = _streamlp.history_reply(self.keys, self.nodes, ids, null)
            if r is not None:
                return r  # type: ignore[no-any-return]
        return history_reply_reference(self, ids, null)

    def get(self, eid: int) -> list[bytes] | None:
        i = bisect_right(self.keys, eid) - 1
        if i < 0:
            return None
        node = self.nodes[i]
        if eid > node.last:
            return None
        if node.d is None:                  # sealed, not decoded: look in its bytes
            found = find_sealed(node, eid)
            return None if found is None else found[1]
        d = node.d
        j = bisect_left(d.ids, eid)
        if j < len(d.ids) and d.ids[j] == eid and not d.flags[j] & FLAG_DELETED:
            return d.fvs[j]
        return None

    def first_live(self) -> int:
        """streamGetEdgeID(first, skip tombstones); MAX_ID when empty."""
        for eid, _ in self.range(0, MAX_ID):
            return eid
        return MAX_ID

    def last_live(self) -> int:
        """streamLastValidID (0 when empty)."""
        for eid, _ in self.range(0, MAX_ID, rev=True):
            return eid
        return 0

    def first_any(self) -> int:
        """streamGetEdgeID(first, tombstones included): the first listpack's first entry."""
        return self.keys[0] if self.keys else MAX_ID     # (the master entry is the first)

    # -- deleting -----------------------------------------------------------------------------
    def delete(self, eid: int) -> bool:
        """streamDeleteItem: flag the entry deleted; a node left without live entries goes."""
        i = bisect_right(self.keys, eid) - 1
        if i < 0:
            return False
        node = self.nodes[i]
        if eid > node.last:
            return False
        d = node.d
        if d is None:                       # sealed, not decoded: look in its bytes
            found = find_sealed(node, eid)
            if found is None:
                return False
            at = found[0]
        else:
            j = bisect_left(d.ids, eid)
            if j >= len(d.ids) or d.ids[j] != eid or d.flags[j] & FLAG_DELETED:
                return False
        if node.live == 1:                  # its last live entry: the node goes
            del self.nodes[i]
            del self.keys[i]
            _decoded.pop(node, None)
        elif d is None:
            node.flag_deleted_at(at)
        else:
            node.flag_deleted([j])
        self.length -= 1
        return True

    def trim(self, maxlen: int | None, minid: int | None, approx: bool, limit: int) -> int:
        """streamTrim: MAXLEN (``maxlen``) or MINID (``minid``); whole nodes first, then (when
        not approximate) entries of the first remaining node are flagged deleted."""
        deleted = 0
        nodes = self.nodes
        while nodes:
            if maxlen is not None and self.length <= maxlen:
                break
            node = nodes[0]
            entries = node.live
            if limit and deleted + entries > limit:
                break
            if maxlen is not None:
                remove = self.length - entries >= maxlen
            else:
                assert minid is not None
                remove = node.last < minid
            if remove:
                del nodes[0]
                del self.keys[0]
                _decoded.pop(node, None)
                self.length -= entries
                deleted += entries
                continue
            if approx:
                break
            d = node.entries()
            flags = d.flags
            js: list[int] = []
            for j, eid in enumerate(d.ids):
                if maxlen is not None:
                    if self.length <= maxlen:
                        break
                elif minid is not None and eid >= minid:
                    break
                if not flags[j] & FLAG_DELETED:
                    js.append(j)
                    self.length -= 1
            if js:
                node.flag_deleted(js)
            deleted += len(js)
            break
        if self.length == 0:
            self.first_id = 0
        elif deleted:
            self.first_id = self.first_live()
        return deleted

    # -- consumer groups ----------------------------------------------------------------------
    def estimate_distance(self, eid: int) -> int:
        """streamEstimateDistanceFromFirstEverEntry."""
        if not self.entries_added:
            return 0
        if not self.length and eid <= self.last_id:
            return self.entries_added
        if eid == self.last_id:
            return self.entries_added
        if eid > self.last_id:
            return SCG_INVALID_ENTRIES_READ
        if self.max_deleted == 0 or self.max_deleted < self.first_id:
            if eid < self.first_id:
                return self.entries_added - self.length
            if eid == self.first_id:
                return self.entries_added - self.length + 1
        return SCG_INVALID_ENTRIES_READ

    def range_has_tombstones(self, start: int, end: int = MAX_ID) -> bool:
        if not self.length or self.max_deleted == 0:
            return False
        if self.first_id > self.max_deleted:
            return False
        return start <= self.max_deleted <= end

    def lag(self, g: Group) -> int | None:
        """streamReplyWithCGLag: the group's lag, or None when it cannot be known."""
        if not self.entries_added:
            return 0
        if g.entries_read != SCG_INVALID_ENTRIES_READ and \
                not self.range_has_tombstones(g.last_id):
            return self.entries_added - g.entries_read
        er = self.estimate_distance(g.last_id)
        if er != SCG_INVALID_ENTRIES_READ:
            return self.entries_added - er
        return None

    def rax_nodes(self) -> int:
        """The radix tree's node count (XINFO radix-tree-nodes): Redis's rax over the 16-byte
        big-endian master IDs, where a chain of single-child prefixes is one compressed node."""
        keys = [k.to_bytes(16, "big") for k in self.keys]
        if not keys:
            return 1
        return _rax_count(keys, 0)

    # -- copying ------------------------------------------------------------------------------
    def copy(self) -> Stream:
        """streamDup: entries, metadata and the consumer groups with their PELs."""
        s = Stream()
        s.nodes = [n.copy() for n in self.nodes]
        s.keys = list(self.keys)
        s.length, s.last_id, s.first_id = self.length, self.last_id, self.first_id
        s.max_deleted, s.entries_added = self.max_deleted, self.entries_added
        for name, g in self.groups.items():
            ng = Group(g.last_id, g.entries_read)
            for eid, nack in g.pel.items():
                ng.pel[eid] = Nack(nack.delivery_time, nack.delivery_count, None)
            for cname, cons in g.consumers.items():
                nc = Consumer(cname, cons.seen_time)
                for eid in cons.pel:
                    n = ng.pel[eid]
                    n.consumer = nc
                    nc.pel[eid] = n
                ng.consumers[cname] = nc
            s.groups[name] = ng
        return s

    def entries(self) -> Iterator[tuple[int, list[bytes]]]:
        return self.range(0, MAX_ID)


def _rax_count(keys: list[bytes], depth: int) -> int:
    """Nodes of the rax holding ``keys`` (sorted, equal length) below a common prefix."""
    size = len(keys[0])
    if depth == size:
        return 1
    first, last = keys[0], keys[-1]
    if first[depth] == last[depth]:
        d = depth
        while d < size and first[d] == last[d]:
            d += 1
        return 1 + _rax_count(keys, d)
    total = 1
    start = 0
    n = len(keys)
    while start < n:
        c = keys[start][depth]
        end = start + 1
        while end < n and keys[end][depth] == c:
            end += 1
        total += _rax_count(keys[start:end], depth + 1)
        start = end
    return total
