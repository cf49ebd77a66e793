"""The dataset as RESP commands: Redis 7.0's rewriteAppendOnlyFileRio (aof.c), the body of an AOF
base file written with ``aof-use-rdb-preamble no``.

Theory of operation: :func:`write_dataset` walks the dataset once and writes the commands that
rebuild it, in Redis's order and with Redis's exact argument vectors, so a file written here is
byte for byte what Redis 7.0.15 writes for the same dataset wherever Redis's order is fixed (the
order of keys, of a big set's members, of a big hash's fields and of a big sorted set's members
follow hash tables in Redis, and the insertion order of dicts here):

    FUNCTION LOAD <code>                             one per library (rewriteFunctions)
    SELECT <db>                                      before the keys of each db that has some
    SET key value                                    string
    RPUSH key e1..e64                                list, batches of AOF_REWRITE_ITEMS_PER_CMD
    SADD key m1..m64                                 set (an intset's members in numeric order)
    ZADD key s1 m1..s64 m64                          sorted set, ascending, "%.17g" scores
    HMSET key f1 v1..f64 v64                         hash, in its order
    XADD key id f v..                                stream, one per live entry
    XADD key MAXLEN 0 0-1 x y                        (instead, when the stream is empty)
    XSETID key last-id ENTRIESADDED n MAXDELETEDID id
    XGROUP CREATE key group last-id ENTRIESREAD n    per group, in name order; then per
                                                     consumer, in name order, either
    XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n JUSTID FORCE      (per pending entry)
    XGROUP CREATECONSUMER key group consumer         (a consumer without pending entries)
    PEXPIREAT key ms                                 after the value, when the key has a TTL

Redis keeps an all-integer set of up to set-max-intset-entries members as an intset and writes
it in numeric order; such sets are written sorted here whatever their size (for a larger one
Redis's order is its hash table's, so sorted is as good as any). Small sorted sets and hashes are
listpacks in Redis (ascending / insertion order): the model's own orders are exactly those.

Hash field TTLs do not exist in Redis 7.0; a hash with some is written as Redis 7.4 writes it
(rewriteHashObject's HFE branch): one ``HMSET key field value`` per field, each followed by
``HPEXPIREAT key ms FIELDS 1 field`` when that field has a TTL (the batched HMSETs when no
field left has one).

A pending entry whose stream entry was deleted is written like the others, as Redis does; its
XCLAIM finds no entry when the file is loaded and drops it from the PEL (and a consumer that only
had such entries is not created): Redis 7.0's rewrite loses them too.

Time is an input (``now_ms``). Where this differs from Redis 7.0.15 on purpose: a key already
expired at ``now_ms`` (``now_ms > expire``, as the RDB writer decides) is left out, where Redis
writes it with its past PEXPIREAT (which loads as a key that is already logically gone), and so
is a hash field already expired (``expire < now_ms``; Redis 7.4 writes those too); a db whose
keys are all expired gets no SELECT. The ``#TS:`` annotation of ``aof-timestamp-enabled`` is
the caller's (the AOF writer's) to put first. Output is buffered and handed to ``write`` in
chunks of about 64 KiB.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

# (pyrepl.rdb first: pyrepl.keyspace.stream and the rdb package import each other, and only
# this order works when this module is the first of pyrepl to be imported.)
import pyrepl.rdb  # noqa: F401
from pyrepl.keyspace.hashttl import HashEx
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.stream import Stream, id_str
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet
from pyrepl.rdb.encoder import DbLike
from pyrepl.resp.reader import string2ll
from pyrepl.resp.writer import encode_command, format_double

AOF_REWRITE_ITEMS_PER_CMD = 64       # server.h: elements per variadic command
CHUNK_SIZE = 1 << 16                 # bytes buffered before each call of ``write``
PROGRESS_EVERY = 1024                # keys between two progress reports (as Redis's check)

def _variadic(name: bytes, key: bytes, items: Iterator[bytes]) -> Iterator[list[bytes]]:
    """``name key item..`` with at most AOF_REWRITE_ITEMS_PER_CMD items each (RPUSH, SADD)."""
    while True:
        argv = [name, key]
        argv.extend(islice(items, AOF_REWRITE_ITEMS_PER_CMD))
        if len(argv) == 2:
            return
        yield argv


def _variadic_pairs(name: bytes, key: bytes,
                    pairs: Iterator[tuple[bytes, bytes]]) -> Iterator[list[bytes]]:
    """``name key a b..`` with at most AOF_REWRITE_ITEMS_PER_CMD pairs each (ZADD, HMSET)."""
    while True:
        argv = [name, key]
        for a, b in islice(pairs, AOF_REWRITE_ITEMS_PER_CMD):
            argv.append(a)
            argv.append(b)
        if len(argv) == 2:
            return
        yield argv


def set_members(s: Iterable[bytes]) -> Iterable[bytes]:
    """A set's members in the order Redis 7.0 writes them: numeric for an intset."""
    if all(string2ll(m) is not None for m in s):   # (what an intset holds)
        return sorted(s, key=int)
    return s


def hash_commands(key: bytes, h: dict[bytes, bytes], now_ms: int) -> list[list[bytes]]:
    """rewriteHashObject (with Redis 7.4's form for field TTLs); fields already expired at
    ``now_ms`` are left out (an empty list when none is left)."""
    ttl = h.ttl if isinstance(h, HashEx) else None
    if not ttl:
        return list(_variadic_pairs(b"HMSET", key, iter(h.items())))
    live = [(f, v) for f, v in h.items() if f not in ttl or ttl[f] >= now_ms]
    if not any(f in ttl for f, _ in live):
        return list(_variadic_pairs(b"HMSET", key, iter(live)))
    out: list[list[bytes]] = []
    for f, v in live:
        out.append([b"HMSET", key, f, v])
        when = ttl.get(f)
        if when is not None:
            out.append([b"HPEXPIREAT", key, b"%d" % when, b"FIELDS", b"1", f])
    return out


def stream_commands(key: bytes, s: Stream) -> list[list[bytes]]:
    """rewriteStreamObject: the entries, the stream's metadata, then its consumer groups."""
    out: list[list[bytes]] = []
    if s.length:
        for eid, fv in s.entries():
            out.append([b"XADD", key, id_str(eid), *fv])
    else:
        # An empty stream is still a key: XADD MAXLEN 0 creates it and trims the entry away.
        out.append([b"XADD", key, b"MAXLEN", b"0", b"0-1", b"x", b"y"])
    out.append([b"XSETID", key, id_str(s.last_id), b"ENTRIESADDED", b"%d" % s.entries_added,
                b"MAXDELETEDID", id_str(s.max_deleted)])
    for gname in sorted(s.groups):                     # rax order: bytes order
        g = s.groups[gname]
        out.append([b"XGROUP", b"CREATE", key, gname, id_str(g.last_id), b"ENTRIESREAD",
                    b"%d" % g.entries_read])
        for cname in sorted(g.consumers):
            cons = g.consumers[cname]
            if not cons.pel:
                out.append([b"XGROUP", b"CREATECONSUMER", key, gname, cname])
                continue
            for eid in sorted(cons.pel):               # rax order of 128-bit big-endian IDs
                nack = cons.pel[eid]
                out.append([b"XCLAIM", key, gname, cname, b"0", id_str(eid),
                            b"TIME", b"%d" % nack.delivery_time,
                            b"RETRYCOUNT", b"%d" % nack.delivery_count, b"JUSTID", b"FORCE"])
    return out


def value_commands(key: bytes, v: Any, now_ms: int) -> Iterable[list[bytes]]:
    """The commands that rebuild one value (no TTL), in Redis's order; empty for an empty
    collection (or a hash whose fields have all expired)."""
    t = type(v)
    if t is bytes:
        return ([b"SET", key, v],)
    if t is deque or t is list or t is ListpackList:
        return _variadic(b"RPUSH", key, iter(v))
    if t is IntSet:
        return _variadic(b"SADD", key, iter(v))     # (ascending, as Redis rewrites an intset)
    if t is StrSet or t is set or t is frozenset:
        return _variadic(b"SADD", key, iter(set_members(v)))
    if t is ZSet or t is ListpackZSet:
        return _variadic_pairs(b"ZADD", key,
                               ((format_double(s), m) for m, s in v.items()))
    if t is StrDict or t is ListpackHash or t is HashEx or t is dict:
        return hash_commands(key, v, now_ms)
    if t is Stream:
        return stream_commands(key, v)
    raise TypeError(f"cannot rewrite value of type {t.__name__} for key {key!r}")


def write_dataset(
    write: Callable[[bytes], object],
    dbs: Sequence[DbLike],
    now_ms: int,
    functions: Sequence[bytes] = (),
    key_hook: Callable[[], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write the commands that rebuild ``functions`` (the libraries' codes, as
    ``scripting.functions.rdb_libraries`` gives them) and ``dbs`` (db index = position) to
    ``write``; return the number of keys written.

    ``key_hook`` is called after each key (``rdb-key-save-delay``, which Redis applies to
    rewrites too); ``progress`` with the number of keys written so far every
    PROGRESS_EVERY keys and once at the end (INFO current_save_keys_processed)."""
    parts: list[bytes] = []
    append = parts.append
    size = 0
    count = 0
    encode = encode_command
    for code in functions:
        piece = b"*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(code), code)
        append(piece)
        size += len(piece)
    for dbid, db in enumerate(dbs):
        data = db.data
        if not data:
            continue
        expires = db.expires
        exp_get = expires.get if expires else None
        selected = False
        for k, v in data.items():
            when = exp_get(k) if exp_get is not None else None
            if when is not None and now_ms > when:
                continue
            if type(v) is bytes:
                pieces = [b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v)]
            else:
                pieces = [encode(argv) for argv in value_commands(k, v, now_ms)]
                if not pieces:
                    continue
            if not selected:
                selected = True
                d = b"%d" % dbid
                pieces.insert(0, b"*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n" % (len(d), d))
            if when is not None:
                w = b"%d" % when
                pieces.append(b"*3\r\n$9\r\nPEXPIREAT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                              % (len(k), k, len(w), w))
            for piece in pieces:
                append(piece)
                size += len(piece)
            count += 1
            if key_hook is not None:
                key_hook()
            if progress is not None and not count % PROGRESS_EVERY:
                progress(count)
            if size >= CHUNK_SIZE:
                write(b"".join(parts))
                parts.clear()
                size = 0
    if parts:
        write(b"".join(parts))
    if progress is not None:
        progress(count)
    return count
