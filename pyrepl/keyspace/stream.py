"""The stream value (Redis 7.0.15's t_stream.c / stream.h), with Redis's node layout.

Theory of operation: an entry ID is one int, ``ms << 64 | seq`` (so IDs compare as ints). Redis
keeps a stream as a radix tree of listpack "nodes", each holding up to
``stream-node-max-entries`` entries or ``stream-node-max-bytes`` bytes, and its approximate
trimming (``~``) only drops whole nodes; its XINFO shows the node count and the RDB writes one
listpack per node. So the model keeps the same nodes: a :class:`Node` is the master entry (the
first entry's ID and field names) plus parallel lists of every entry ever put in it (IDs, flat
field/value lists, flags; deleted entries stay as tombstones, as in the listpack), the live and
deleted counts, and the listpack's byte size, kept exactly as listpack.c would encode it (the
size decides when XADD opens a new node). Ranges bisect the node keys, then a node's IDs.

Consumer groups are dicts: group name -> :class:`Group` (last delivered ID, entries_read, the
PEL as ID -> :class:`Nack`, consumers); a :class:`Consumer` has its seen-time and its own PEL
(the same Nack objects). Rax order (byte order of names, numeric order of IDs) is obtained by
sorting when a reply or the RDB needs it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from pyrepl.keyspace.listpack import lp_int_size, lp_value_size

MASK64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
SCG_INVALID_ENTRIES_READ = -1
FLAG_DELETED = 1
FLAG_SAMEFIELDS = 2
LISTPACK_MAX_SIZE = 1 << 30          # STREAM_LISTPACK_MAX_SIZE


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


class Consumer:
    __slots__ = ("name", "seen_time", "pel")

    def __init__(self, name: bytes, seen_time: int) -> None:
        self.name = name
        self.seen_time = seen_time
        self.pel: dict[int, Nack] = {}


class Group:
    __slots__ = ("last_id", "entries_read", "pel", "consumers")

    def __init__(self, last_id: int, entries_read: int) -> None:
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: dict[int, Nack] = {}
        self.consumers: dict[bytes, Consumer] = {}


class Node:
    """One listpack of Redis's radix tree."""

    __slots__ = ("master", "fields", "ids", "fvs", "flags", "live", "deleted", "ebytes")

    def __init__(self, master: int, fields: list[bytes]) -> None:
        self.master = master
        self.fields = fields
        self.ids: list[int] = []
        self.fvs: list[list[bytes]] = []
        self.flags: list[int] = []
        self.live = 0
        self.deleted = 0
        # Bytes of the master entry after its two counters (num-fields, fields, the 0
        # terminator) plus every entry: the part of lpBytes that no counter update changes.
        self.ebytes = lp_int_size(len(fields)) + sum(lp_value_size(f) for f in fields) + \
            lp_int_size(0)

    def lp_bytes(self) -> int:
        """lpBytes of the node's listpack: header (6) + counters + the rest + terminator."""
        return 7 + lp_int_size(self.live) + lp_int_size(self.deleted) + self.ebytes

    def add(self, eid: int, fv: list[bytes], flags: int) -> None:
        nf = len(fv) // 2
        size = lp_int_size(flags)
        size += lp_int_size(_i64((eid >> 64) - (self.master >> 64)))
        size += lp_int_size(_i64((eid & MASK64) - (self.master & MASK64)))
        if flags & FLAG_SAMEFIELDS:
            for v in fv[1::2]:
                size += lp_value_size(v)
            size += lp_int_size(nf + 3)
        else:
            size += lp_int_size(nf)
            for v in fv:
                size += lp_value_size(v)
            size += lp_int_size(nf * 2 + 4)
        self.ebytes += size
        self.ids.append(eid)
        self.fvs.append(fv)
        self.flags.append(flags)
        self.live += 1

    def copy(self) -> Node:
        n = Node.__new__(Node)
        n.master, n.fields = self.master, self.fields
        n.ids, n.fvs, n.flags = list(self.ids), list(self.fvs), list(self.flags)
        n.live, n.deleted, n.ebytes = self.live, self.deleted, self.ebytes
        return n


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
            node = Node(eid, fv[0::2])
            self.nodes.append(node)
            self.keys.append(eid)
            flags = FLAG_SAMEFIELDS
        else:
            flags = FLAG_SAMEFIELDS if fv[0::2] == node.fields else 0
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
                ids, flags = node.ids, node.flags
                j = bisect_left(ids, start)
                while j < len(ids):
                    eid = ids[j]
                    if eid > end:
                        return
                    if not flags[j] & FLAG_DELETED:
                        yield eid, node.fvs[j]
                    j += 1
                i += 1
        else:
            i = bisect_right(keys, end) - 1
            while i >= 0:
                node = nodes[i]
                ids, flags = node.ids, node.flags
                j = bisect_right(ids, end) - 1
                while j >= 0:
                    eid = ids[j]
                    if eid < start:
                        return
                    if not flags[j] & FLAG_DELETED:
                        yield eid, node.fvs[j]
                    j -= 1
                i -= 1

    def get(self, eid: int) -> list[bytes] | None:
        i = bisect_right(self.keys, eid) - 1
        if i < 0:
            return None
        node = self.nodes[i]
        j = bisect_left(node.ids, eid)
        if j < len(node.ids) and node.ids[j] == eid and not node.flags[j] & FLAG_DELETED:
            return node.fvs[j]
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
        return self.nodes[0].ids[0] if self.nodes else MAX_ID

    # -- deleting -----------------------------------------------------------------------------
    def delete(self, eid: int) -> bool:
        """streamDeleteItem: flag the entry deleted; a node left without live entries goes."""
        i = bisect_right(self.keys, eid) - 1
        if i < 0:
            return False
        node = self.nodes[i]
        j = bisect_left(node.ids, eid)
        if j >= len(node.ids) or node.ids[j] != eid or node.flags[j] & FLAG_DELETED:
            return False
        node.flags[j] |= FLAG_DELETED
        if node.live == 1:
            del self.nodes[i]
            del self.keys[i]
        else:
            node.live -= 1
            node.deleted += 1
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
                remove = node.ids[-1] < minid
            if remove:
                del nodes[0]
                del self.keys[0]
                self.length -= entries
                deleted += entries
                continue
            if approx:
                break
            from_lp = 0
            flags = node.flags
            for j, eid in enumerate(node.ids):
                if maxlen is not None:
                    if self.length <= maxlen:
                        break
                elif minid is not None and eid >= minid:
                    break
                if not flags[j] & FLAG_DELETED:
                    flags[j] |= FLAG_DELETED
                    from_lp += 1
                    self.length -= 1
            deleted += from_lp
            node.live -= from_lp
            node.deleted += from_lp
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
