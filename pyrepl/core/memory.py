"""Memory figures for INFO memory's breakdown and MEMORY USAGE / STATS / DOCTOR.

Theory of operation: ``used_memory`` is the core's meter (pyrepl/memacct.py: what pymalloc and
libc hold, as Redis's zmalloc counts). :func:`overhead` splits it as Redis 7.0's
getMemoryOverheadData does (the start-up figure, replication buffers, clients' output, the AOF
buffer, the scripts' caches, the keyspace's hash tables); the rest is the dataset.
:func:`not_counted_for_evict` is Redis's freeMemoryGetNotCountedMemory, what maxmemory does not
count (the eviction engine subtracts it). A key's cost (MEMORY USAGE) is measured on its Python
objects (``sys.getsizeof`` of the key, of its value and of what the value holds, recursively
through containers and ``__slots__``), each allocation rounded as the allocator rounds it
(:func:`alloc_size`: pymalloc's 16-byte size classes up to 512 B, glibc's usable size above),
plus its share of the database's tables: so MEMORY USAGE over many keys sums to about the
``used_memory`` they add. Big containers are sampled as Redis's objectComputeSize does: the
first ``samples`` elements are measured and the average is multiplied by the length. The
figures are not Redis's (a Redis string of 3 bytes costs it ~50 bytes, pyrepl ~100): they say
what pyrepl's process holds, which is what one sizes a pyrepl machine by.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyrepl.keyspace.intset import NATIVE_TYPE as INTSET_C
from pyrepl.keyspace.ktable import kept_inline
from pyrepl.keyspace.lphash import NATIVE_TYPE as LPHASH_C
from pyrepl.keyspace.lplist import NATIVE_TYPE as LPLIST_C
from pyrepl.keyspace.strtab import NATIVE_DICT as STRDICT_C
from pyrepl.keyspace.strtab import NATIVE_SET as STRSET_C
from pyrepl.keyspace.zset import LPZSET_C, ZSet
from pyrepl.resp.types import Map

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore

DICT_ENTRY = 3 * 8 + 8     # a CPython dict slot (hash, key, value) and its index share
MAX_DEPTH = 4
SMALL_REQUEST = 512        # pymalloc serves up to this many bytes, in 16-byte classes
MMAP_THRESHOLD = 128 * 1024   # glibc's default: bigger blocks are mmapped whole pages


def alloc_size(n: int) -> int:
    """What an allocation of ``n`` bytes counts in used_memory: pymalloc's size class up to
    512 B, glibc's usable size above (malloc_usable_size, what the RAW count adds)."""
    if n <= 0:
        return 0
    if n <= SMALL_REQUEST:
        return (n + 15) & ~15
    if n < MMAP_THRESHOLD:
        return max(24, ((n + 8 + 15) & ~15) - 8)
    return ((n + 16 + 4095) & ~4095) - 16


# Types whose sys.getsizeof adds a separately allocated table or buffer to a fixed head: each
# part is rounded on its own.
_HEADS: dict[type, int] = {dict: sys.getsizeof({}), list: sys.getsizeof([]),
                           set: sys.getsizeof(set()), frozenset: sys.getsizeof(frozenset()),
                           bytearray: sys.getsizeof(bytearray())}
_DEQUE_BLOCK = 64 * 8 + 16                         # collections.deque's block (> 512 B)
_DEQUE_HEAD = sys.getsizeof(deque()) - _DEQUE_BLOCK   # (an empty deque has one block)


def object_size(v: Any) -> int:
    """``sys.getsizeof(v)`` as allocated: its head and its table (dict, list, set, bytearray)
    or its blocks (deque) each rounded by :func:`alloc_size`."""
    size = sys.getsizeof(v)
    if type(v) is deque:
        return alloc_size(_DEQUE_HEAD) + (size - _DEQUE_HEAD) // _DEQUE_BLOCK * alloc_size(
            _DEQUE_BLOCK)
    head = _HEADS.get(type(v))
    if head is None:
        for base, h in _HEADS.items():
            if isinstance(v, base):
                head = h
                break
    if head is None or size <= head:
        return alloc_size(size)
    return alloc_size(head) + alloc_size(size - head)


def _sampled(items: Iterable[Any], n: int, samples: int, depth: int) -> int:
    """Size of ``n`` elements estimated from the first ``samples`` of ``items``."""
    total = taken = 0
    for x in items:
        if taken >= samples:
            break
        total += deep_size(x, samples, depth)
        taken += 1
    return total * n // taken if taken else 0


def _shared(v: Any) -> bool:
    """CPython's singletons, which a value refers to without allocating them: the bytes of
    length 0 and 1, the small ints, None and the bools."""
    t = type(v)
    return (t is bytes and len(v) <= 1) or (t is int and -5 <= v <= 256) or v is None \
        or t is bool


def _sampled_pairs(v: dict[Any, Any], samples: int, depth: int) -> int:
    """Size of a dict's keys and values estimated from its first ``samples`` items."""
    total = taken = 0
    for k, x in v.items():
        if taken >= samples:
            break
        total += deep_size(k, samples, depth) + deep_size(x, samples, depth)
        taken += 1
    return total * len(v) // taken if taken else 0


def deep_size(v: Any, samples: int = 5, depth: int = 0) -> int:
    if _shared(v):
        return 0
    size = object_size(v)
    if depth >= MAX_DEPTH or isinstance(v, (bytes, bytearray, str, int, float, bool)):
        return size
    d = depth + 1
    if type(v) is LPHASH_C or type(v) is INTSET_C or type(v) is LPLIST_C or \
            type(v) is LPZSET_C or type(v) is STRSET_C:
        return size         # (a listpack, an intset, a StrSet: its size is all it holds)
    if type(v) is STRDICT_C:    # (its size counts its fields, inline; the values are objects)
        return size + _sampled((v[k] for k in v), len(v), samples, d)
    if type(v) is ZSet:   # (its size counts its tree; its dict holds the members and scores)
        return size + deep_size(v.dict, samples, d)
    if isinstance(v, dict):     # (its items are two objects each, no tuple)
        return size + _sampled_pairs(v, samples, d)
    if isinstance(v, tuple) and len(v) <= 4:
        return size + sum(deep_size(x, samples, d) for x in v)
    if isinstance(v, (list, tuple, set, frozenset)) or hasattr(v, "__len__") and \
            hasattr(v, "__iter__") and not hasattr(v, "__slots__"):
        try:
            return size + _sampled(iter(v), len(v), samples, d)
        except TypeError:
            return size
    slots = getattr(type(v), "__slots__", None)
    if slots is not None:
        names = (slots,) if isinstance(slots, str) else slots
        return size + sum(deep_size(getattr(v, n), samples, d) for n in names
                          if hasattr(v, n))
    inner = getattr(v, "__dict__", None)
    if inner is not None:
        return size + deep_size(inner, samples, d)
    return size


def table_share(table: Any) -> int:
    """One key's share of a keyspace table (its size as allocated over its keys)."""
    n = len(table)
    return object_size(table) // n if n else 0


def key_size(key: bytes, value: Any, samples: int, db: Any = None) -> int:
    """MEMORY USAGE: the key, its value, and its share of the database's tables (``db``'s
    ``data`` and, with a TTL, ``expires``; a dict slot's size without ``db``)."""
    if db is None:
        return object_size(key) + deep_size(value, samples) + DICT_ENTRY
    size = object_size(key) + (0 if kept_inline(db.data, value) else deep_size(value, samples))
    size += table_share(db.data)
    if key in db.expires:
        size += table_share(db.expires) + object_size(db.expires[key])
    return size


def not_counted_for_evict(core: ServerCore) -> int:
    """Redis 7.0's freeMemoryGetNotCountedMemory: the memory maxmemory does not count (INFO's
    mem_not_counted_for_evict; the eviction engine subtracts it from used_memory). The shared
    replication buffer beyond repl-backlog-size (what the replicas alone hold: the backlog's
    part counts) and the replicas' output waiting outside it, and the AOF buffer while the
    AOF is on."""
    out = 0
    repl = core.replication
    if repl is not None:
        fields: dict[str, Any] = dict(repl.memory_fields())
        out += max(0, int(fields.get("mem_total_replication_buffers", 0))
                   - core.config.repl_backlog_size)
        # and what waits for the replicas' sockets outside that buffer (unsent replies, the
        # transports' buffers): Redis keeps it in the replication buffer, not counted either
        out += repl.unshared_output_bytes()
    if core.aof.on:
        out += alloc_size(len(core.aof.writer.buf))
    return out


@dataclass
class Overhead:
    """used_memory's overhead as Redis 7.0's getMemoryOverheadData splits it."""

    total: int
    repl_fields: list[tuple[str, Any]]
    clients_normal: int
    aof_buffer: int
    scripts: list[tuple[str, object]]
    keyspace: int          # the databases' tables (data, expires)
    not_counted: int


def overhead(core: ServerCore, used: int) -> Overhead:
    """The overhead of ``used`` (at most all of it): used_memory_startup, the replication
    buffers (backlog and replicas' share), the normal clients' output, the AOF buffer, the Lua
    and functions caches, the keyspace's tables. used_memory_dataset = used - the total."""
    from pyrepl.core.info import scripts_memory

    repl = core.replication
    repl_fields: list[tuple[str, Any]] = repl.memory_fields() if repl is not None else [
        ("mem_replication_backlog", 0), ("mem_total_replication_buffers", 0),
        ("mem_clients_slaves", 0)]
    clients_normal = sum(c.pending_output() for c in core.clients.values() if c.kind == "normal")
    aof_buffer = len(core.aof.writer.buf)
    scripts = scripts_memory(core)
    scripts_bytes: Any = dict(scripts)["used_memory_scripts"]    # (an int)
    keyspace = sum(object_size(db.data) + object_size(db.expires) for db in core.dbs)
    total = (core.used_memory_startup
             + int(dict(repl_fields).get("mem_total_replication_buffers", 0))
             + clients_normal + alloc_size(aof_buffer) + int(scripts_bytes) + keyspace)
    return Overhead(min(used, total), repl_fields, clients_normal, aof_buffer, scripts, keyspace,
                    not_counted_for_evict(core))


def stats(core: Any) -> list[tuple[bytes, object]]:
    """MEMORY STATS under Redis 7.0's names, from INFO memory's figures."""
    from pyrepl.core.info import section_memory

    m: dict[str, Any] = dict(section_memory(core))   # (the names read here hold ints)
    used = int(m["used_memory"])
    peak = int(m["used_memory_peak"]) or used
    startup = int(m["used_memory_startup"])
    overhead = int(m["used_memory_overhead"])
    dataset = int(m["used_memory_dataset"])
    keys = sum(len(db.data) for db in core.dbs)
    out: list[tuple[bytes, object]] = [
        (b"peak.allocated", peak), (b"total.allocated", used),
        (b"startup.allocated", startup),
        (b"replication.backlog", int(m.get("mem_replication_backlog", 0))),
        (b"clients.slaves", int(m.get("mem_clients_slaves", 0))),
        (b"clients.normal", int(m.get("mem_clients_normal", 0))),
        (b"cluster.links", 0), (b"aof.buffer", int(m.get("mem_aof_buffer", 0))),
        (b"lua.caches", int(m.get("used_memory_scripts_eval", 0))),
        (b"functions.caches", int(m.get("used_memory_functions", 0))),
    ]
    for db in core.dbs:
        if db.data or db.expires:
            out.append((b"db.%d" % db.id, Map([
                (b"overhead.hashtable.main", object_size(db.data)),
                (b"overhead.hashtable.expires", object_size(db.expires))])))
    net = used - startup
    out += [
        (b"overhead.total", overhead), (b"keys.count", keys),
        (b"keys.bytes-per-key", (used - startup) // keys if keys else 0),
        (b"dataset.bytes", dataset),
        (b"dataset.percentage", dataset * 100 / net if net > 0 else 0.0),
        (b"peak.percentage", used * 100 / peak if peak else 0.0),
        (b"allocator.allocated", used), (b"allocator.active", used),
        (b"allocator.resident", used),
        (b"allocator-fragmentation.ratio", 1.0), (b"allocator-fragmentation.bytes", 0),
        (b"allocator-rss.ratio", 1.0), (b"allocator-rss.bytes", 0),
        (b"rss-overhead.ratio", 1.0), (b"rss-overhead.bytes", 0),
        (b"fragmentation", float(m["mem_fragmentation_ratio"])),
        (b"fragmentation.bytes", int(m["mem_fragmentation_bytes"])),
    ]
    return out


def doctor(core: Any) -> str:
    """MEMORY DOCTOR: Redis 7.0's texts for an empty instance, a peak, a high total RSS
    (fragmentation: RSS over used_memory above 1.4 and 10 MB, which glibc's heap gives after a
    peak), and a quiet one."""
    figures = dict(stats(core))
    used = int(figures[b"total.allocated"])       # type: ignore[call-overload]
    peak = int(figures[b"peak.allocated"])        # type: ignore[call-overload]
    frag = float(figures[b"fragmentation"])       # type: ignore[arg-type]
    frag_bytes = int(figures[b"fragmentation.bytes"])   # type: ignore[call-overload]
    if used < 1024 * 1024 * 5:
        return ("Hi Sam, this instance is empty or is using very little memory, my issues "
                "detector can't be used in these conditions. Please, leave for your mission on "
                "Earth and fill it with some data. The new Sam and I will be back to our "
                "programming as soon as I finished rebooting.\n")
    reports = []
    if peak > used * 1.5:
        reports.append(
            " * Peak memory: In the past this instance used more than 150% the memory that "
            "is currently using. The allocator is normally not able to release memory after "
            "a peak, so you can expect to see a big fragmentation ratio, however this is "
            "actually harmless and is only due to the memory peak, and if the Redis "
            "instance Resident Set Size (RSS) is currently bigger than expected, the memory "
            "will be used as soon as you fill the Redis instance with more data. If the "
            "memory peak was only occasional and you want to try to reclaim memory, please "
            "try the MEMORY PURGE command, otherwise the only other option is to shutdown "
            "and restart the instance.\n\n")
    if frag > 1.4 and frag_bytes > 10 << 20:
        from pyrepl.memacct import ALLOCATOR_NAME

        reports.append(
            " * High total RSS: This instance has a memory fragmentation and RSS overhead "
            "greater than 1.4 (this means that the Resident Set Size of the Redis process is "
            "much larger than the sum of the logical allocations Redis performed). This "
            "problem is usually due either to a large peak memory (check if there is a peak "
            "memory entry above in the report) or may result from a workload that causes the "
            "allocator to fragment memory a lot. If the problem is a large peak memory, then "
            "there is no issue. Otherwise, make sure you are using the Jemalloc allocator and "
            "not the default libc malloc. Note: The currently used allocator is "
            f"\"{ALLOCATOR_NAME.get(core.meter.kind, core.meter.kind)}\".\n\n")
    if reports:
        return ("Sam, I detected a few issues in this Redis instance memory implants:\n\n"
                + "".join(reports) + "I'm here to keep you safe, Sam. I want to help you.\n")
    return ("Hi Sam, I can't find any memory issue in your instance. I can only account for "
            "what occurs on this base.\n")
