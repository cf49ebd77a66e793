"""Memory figures for MEMORY USAGE / STATS / DOCTOR: honest estimates of what pyrepl itself uses.

Theory of operation: pyrepl's values are Python objects, so a key's cost is measured on them
(``sys.getsizeof`` of the key, of its value and of what the value holds, recursively through
containers and ``__slots__``), plus its entries in the database's dicts. Big containers are
sampled as Redis's objectComputeSize does: the first ``samples`` elements are measured and the
average is multiplied by the length. The figures are not Redis's (a Redis string of 3 bytes
costs it ~50 bytes, pyrepl ~100): they say what pyrepl's process holds, which is what one sizes
a pyrepl machine by. MEMORY STATS lays out INFO memory's figures under Redis's names (the
allocator's own figures, which CPython does not expose, are those of the process's RSS).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from pyrepl.keyspace.zset import ZSet
from pyrepl.resp.types import Map

DICT_ENTRY = 3 * 8 + 8     # a CPython dict slot (hash, key, value) and its index share
MAX_DEPTH = 4


def _sampled(items: Iterable[Any], n: int, samples: int, depth: int) -> int:
    """Size of ``n`` elements estimated from the first ``samples`` of ``items``."""
    total = taken = 0
    for x in items:
        if taken >= samples:
            break
        total += deep_size(x, samples, depth)
        taken += 1
    return total * n // taken if taken else 0


def deep_size(v: Any, samples: int = 5, depth: int = 0) -> int:
    size = sys.getsizeof(v)
    if depth >= MAX_DEPTH or isinstance(v, (bytes, bytearray, str, int, float, bool)):
        return size
    d = depth + 1
    if type(v) is ZSet:   # (its size counts its tree; its dict holds the members and scores)
        return size + deep_size(v.dict, samples, d)
    if isinstance(v, dict):
        return size + _sampled(((k, x) for k, x in v.items()), len(v), samples, d)
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


def key_size(key: bytes, value: Any, samples: int) -> int:
    """MEMORY USAGE: the key, its value, and its slot in the keyspace's dict."""
    return sys.getsizeof(key) + deep_size(value, samples) + DICT_ENTRY


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
        (b"cluster.links", 0), (b"aof.buffer", 0),
        (b"lua.caches", int(m.get("used_memory_scripts_eval", 0))),
        (b"functions.caches", int(m.get("used_memory_functions", 0))),
    ]
    for db in core.dbs:
        if db.data or db.expires:
            out.append((b"db.%d" % db.id, Map([
                (b"overhead.hashtable.main", sys.getsizeof(db.data)),
                (b"overhead.hashtable.expires", sys.getsizeof(db.expires))])))
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
        (b"fragmentation", 1.0), (b"fragmentation.bytes", 0),
    ]
    return out


def doctor(core: Any) -> str:
    """MEMORY DOCTOR: Redis's texts for an empty instance, a peak and a quiet one (pyrepl
    knows no allocator fragmentation to report)."""
    figures = dict(stats(core))
    used = int(figures[b"total.allocated"])       # type: ignore[call-overload]
    peak = int(figures[b"peak.allocated"])        # type: ignore[call-overload]
    if used < 1024 * 1024 * 5:
        return ("Hi Sam, this instance is empty or is using very little memory, my issues "
                "detector can't be used in these conditions. Please, leave for your mission on "
                "Earth and fill it with some data. The new Sam and I will be back to our "
                "programming as soon as I finished rebooting.\n")
    if peak > used * 1.5:
        return ("Sam, I detected a few issues in this Redis instance memory implants:\n\n"
                " * Peak memory: In the past this instance used more than 150% the memory that "
                "is currently using. The allocator is normally not able to release memory after "
                "a peak, so you can expect to see a big fragmentation ratio, however this is "
                "actually harmless and is only due to the memory peak, and if the Redis "
                "instance Resident Set Size (RSS) is currently bigger than expected, the memory "
                "will be used as soon as you fill the Redis instance with more data. If the "
                "memory peak was only occasional and you want to try to reclaim memory, please "
                "try the MEMORY PURGE command, otherwise the only other option is to shutdown "
                "and restart the instance.\n\nI'm here to keep you safe, Sam. I want to help "
                "you.\n")
    return ("Hi Sam, I can't find any memory issue in your instance. I can only account for "
            "what occurs on this base.\n")
