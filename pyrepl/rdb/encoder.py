"""Streaming RDB writer (version 10, plain type encodings).

Theory of operation: ``encode_rdb`` walks the databases once and yields the file as chunks of
about ``chunk_size`` bytes, so a caller can write them to a file or a socket as they come and
never holds the whole dump in memory. The file is what Redis 7.0 writes, minus the compact
encodings:

    "REDIS0010" AUX* (SELECTDB n RESIZEDB size expires (EXPIRETIME_MS? type key value)*)* EOF crc64

Values use only the plain types every Redis from 7.0 to 8.x loads (and redis-check-rdb 7.0.15
accepts): STRING (0), LIST (1, a counted sequence of strings), SET (2), HASH (4) and ZSET_2 (5,
binary little-endian double scores). Redis converts them to its compact encodings while loading.
A hash the keyspace holds as a listpack (pyrepl.keyspace.lphash) is written as
RDB_TYPE_HASH_LISTPACK (16, what Redis 7.0 writes for it), its listpack copied as it is; a set
of integers held as an intset (pyrepl.keyspace.intset) as RDB_TYPE_SET_INTSET (11), its bytes as
they are; a list held as one listpack (pyrepl.keyspace.lplist) as RDB_TYPE_LIST_QUICKLIST_2
(18) of that one node; a small sorted set (pyrepl.keyspace.zset.ListpackZSet) as
RDB_TYPE_ZSET_LISTPACK (17), its listpack as it is.
A hash with field TTLs (Redis 7.4+) is written as RDB_TYPE_HASH_LISTPACK_EX (25: the minimum
field expiry, then a listpack of field, value, expiry-or-0 triples in the hash's order) when
small, else as RDB_TYPE_HASH_METADATA (24: the minimum field expiry, then per field its expiry
relative to it + 1, or 0, the field and the value), and then the file says RDB version 12 (what Redis 7.4 writes, which Redis 8 loads); a dataset
without field TTLs keeps RDB 10, so Redis 7 replicas keep loading pyrepl's files.
Streams have no plain form: they are written as RDB_TYPE_STREAM_LISTPACKS_2 (19, what Redis 7.0
writes), one listpack per node of the model, copied as the keyspace keeps it (pyrepl.keyspace.
stream holds each node as the listpack listpack.c and t_stream.c would have: master entry,
delta-encoded IDs, SAMEFIELDS/DELETED flags, lp-count), then the stream's metadata and its
consumer groups.
Strings that are canonical 32-bit integers are integer-encoded like rdbSaveRawString does; with
``compress`` (``rdbcompression yes``, Redis's default) every other string over 20 bytes (keys,
values, elements, listpacks, stream nodes) is LZF-compressed when that saves 4 bytes, as
rdbSaveLzfStringObject (pyrepl.rdb.lzf.rdb_string: C, with its Python reference).

Speed: per key we append pre-built pieces (a table of length prefixes with the type byte folded
in, the key, the value) to a list and ``b"".join`` it once per chunk, which keeps the per-key cost
to a few list appends. The CRC64 is computed per chunk with the C-backed ``crc64``.

Time is an input (``now_ms``: the header's ``ctime``), as everywhere in the sans-io core. Keys
that have expired but are still held are written with their TTL, as Redis's rdbSaveDb writes
every key of the dict: the loader decides (a master drops them, counted in
``rdb_last_load_keys_expired``; a replica keeps them until its master's DEL). ``save_rdb_file``
is the small file-writing shell around the generator (temp file, fsync, atomic rename).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from pyrepl import REDIS_VERSION
from pyrepl.keyspace.hashttl import HashEx, has_field_ttls
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.ktable import KeyTable, saved_age, saving_ages
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.stream import MASK64, Stream
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet
from pyrepl.rdb.constants import (
    QUICKLIST_NODE_CONTAINER_PACKED,
    RDB_OPCODE_AUX,
    RDB_OPCODE_EOF,
    RDB_OPCODE_EXPIRETIME_MS,
    RDB_OPCODE_FREQ,
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_IDLE,
    RDB_OPCODE_RESIZEDB,
    RDB_OPCODE_SELECTDB,
    RDB_TYPE_HASH,
    RDB_TYPE_HASH_LISTPACK,
    RDB_TYPE_HASH_LISTPACK_EX,
    RDB_TYPE_HASH_METADATA,
    RDB_TYPE_LIST,
    RDB_TYPE_LIST_QUICKLIST_2,
    RDB_TYPE_SET,
    RDB_TYPE_SET_INTSET,
    RDB_TYPE_STREAM_LISTPACKS_2,
    RDB_TYPE_STRING,
    RDB_TYPE_ZSET_2,
    RDB_TYPE_ZSET_LISTPACK,
    RDB_VERSION,
    RDB_VERSION_HFE,
)
from pyrepl.rdb.containers import build_listpack
from pyrepl.rdb.crc64 import crc64
from pyrepl.rdb.lzf import _codec, rdb_string

CHUNK_SIZE = 1 << 16
# Redis's default hash-max-listpack-entries / -value: hashes with field TTLs up to these sizes
# are written as the listpackex Redis itself would hold.
LISTPACK_EX_ENTRIES = 512
LISTPACK_EX_VALUE = 64


# rdb_string, or None (rdbcompression no): what writes a string LZF-compressed when it can
Lzf = Callable[[bytes], "bytes | None"] | None


class DbLike(Protocol):
    @property
    def data(self) -> KeyTable | dict[bytes, Any]: ...
    @property
    def expires(self) -> KeyTable | dict[bytes, int]: ...


def encode_len(n: int) -> bytes:
    """rdbSaveLen: 6, 14, 32 or 64 bit length."""
    if n < 64:
        return bytes((n,))
    if n < 16384:
        return bytes((0x40 | (n >> 8), n & 0xFF))
    if n <= 0xFFFFFFFF:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


# Length prefixes for short strings, alone and with each type byte in front.
_LEN = [encode_len(i) for i in range(16384)]
# a quicklist's node count (1) and its one node's container (packed: a listpack)
_ONE_PACKED_NODE = encode_len(1) + encode_len(QUICKLIST_NODE_CONTAINER_PACKED)
_TLEN = {t: [bytes((t,)) + p for p in _LEN] for t in
         (RDB_TYPE_STRING, RDB_TYPE_LIST, RDB_TYPE_SET, RDB_TYPE_HASH, RDB_TYPE_ZSET_2)}
_INT_START = frozenset(b"-0123456789")
_PACK_Q = struct.Struct("<q").pack
_PACK_D = struct.Struct("<d").pack
_EXPIRE_OP = bytes((RDB_OPCODE_EXPIRETIME_MS,))
_IDLE_OP = bytes((RDB_OPCODE_IDLE,))
_FREQ_OP = bytes((RDB_OPCODE_FREQ,))


def _int_encoding(s: bytes) -> bytes | None:
    """rdbTryIntegerEncoding: the INT8/16/32 form of a canonical decimal integer string."""
    try:
        v = int(s)
    except ValueError:
        return None
    if b"%d" % v != s:
        return None
    if -128 <= v <= 127:
        return b"\xc0" + v.to_bytes(1, "little", signed=True)
    if -32768 <= v <= 32767:
        return b"\xc1" + v.to_bytes(2, "little", signed=True)
    if -(1 << 31) <= v < (1 << 31):
        return b"\xc2" + v.to_bytes(4, "little", signed=True)
    return None


def encode_string(s: bytes, z: Lzf = None) -> bytes:
    """One RDB string (length prefix + bytes, or integer encoding; with ``z``, rdb_string,
    LZF-compressed when that saves 4 bytes)."""
    n = len(s)
    if 0 < n <= 11 and s[0] in _INT_START:
        e = _int_encoding(s)
        if e is not None:
            return e
    if z is not None and n > 20 and (c := z(s)) is not None:
        return c
    return (_LEN[n] if n < 16384 else encode_len(n)) + s


def encode_function(code: bytes) -> bytes:
    """One function library as rdbSaveFunctions writes it: RDB_OPCODE_FUNCTION2 + its code."""
    return bytes((RDB_OPCODE_FUNCTION2,)) + encode_string(code)


def _put_strings(append: Any, items: Any, z: Lzf = None) -> int:
    """Append the RDB encoding of every string in ``items`` (``z``: see encode_string); return
    the byte count."""
    size = 0
    lens = _LEN
    ints = _INT_START
    for s in items:
        n = len(s)
        if n <= 11 and n and s[0] in ints:
            e = _int_encoding(s)
            if e is not None:
                append(e)
                size += len(e)
                continue
        elif n > 20 and z is not None and (c := z(s)) is not None:
            append(c)
            size += len(c)
            continue
        append(lens[n] if n < 16384 else encode_len(n))
        append(s)
        size += n + 5
    return size


RUN_STRINGS, RUN_PAIRS, RUN_ZSET2 = 0, 1, 2


def put_run_reference(kind: int, items: Any, compress: bool) -> bytes:
    """The reference of _codec.put_run: the RDB bytes of ``items``, strings (RUN_STRINGS),
    (field, value) pairs (RUN_PAIRS) or (member, score) pairs (RUN_ZSET2, the score as 8
    little-endian bytes), each string as _put_strings writes it."""
    parts: list[bytes] = []
    append = parts.append
    z = rdb_string if compress else None
    if kind == RUN_STRINGS:
        _put_strings(append, items, z)
    elif kind == RUN_PAIRS:
        for f, v in items:
            _put_strings(append, (f, v), z)
    else:
        for member, score in items:
            _put_strings(append, (member,), z)
            append(_PACK_D(score))
    return b"".join(parts)


put_run = _codec.put_run if _codec is not None else put_run_reference


def _aux_value(v: bytes | str | int) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, bool):
        return b"1" if v else b"0"
    if isinstance(v, int):
        return b"%d" % v
    return v.encode()


_AUX_ORDER = ("redis-ver", "redis-bits", "ctime", "used-mem", "repl-stream-db", "repl-id",
              "repl-offset", "aof-base")


def encode_header(aux: Mapping[str, bytes | str | int], now_ms: int,
                  version: int = RDB_VERSION) -> bytes:
    """Magic, version and AUX fields in Redis's order (rdbSaveInfoAuxFields), then extras."""
    fields: dict[str, bytes | str | int] = {
        "redis-ver": REDIS_VERSION,
        "redis-bits": 64,
        "ctime": now_ms // 1000,
        "used-mem": 0,
    }
    fields.update(aux)
    fields.setdefault("aof-base", 0)
    order = [k for k in _AUX_ORDER if k in fields]
    order += [k for k in fields if k not in _AUX_ORDER]
    out = [b"REDIS%04d" % version]
    op = bytes((RDB_OPCODE_AUX,))
    for k in order:
        out.append(op + encode_string(k.encode()) + encode_string(_aux_value(fields[k])))
    return b"".join(out)


def _collection(v: Any, key: bytes, z: Lzf = None) -> tuple[int, list[bytes], int]:
    """(rdb type, encoded pieces, byte count) for a non-string value (``z``: see
    encode_string)."""
    t = type(v)
    if t is ListpackList:   # a quicklist of one packed node (rdbSaveObject)
        body = _ONE_PACKED_NODE + encode_string(v.to_listpack(), z)
        return RDB_TYPE_LIST_QUICKLIST_2, [body], len(body)
    if t is deque or t is list:
        body = encode_len(len(v)) + put_run(RUN_STRINGS, v, z is not None)
        return RDB_TYPE_LIST, [body], len(body)
    if t is IntSet:
        body = encode_string(v.to_intset(), z)
        return RDB_TYPE_SET_INTSET, [body], len(body)
    if t is StrSet or t is set or t is frozenset:
        body = encode_len(len(v)) + put_run(RUN_STRINGS, v, z is not None)
        return RDB_TYPE_SET, [body], len(body)
    if t is ListpackHash:
        body = encode_string(v.to_listpack(), z)
        return RDB_TYPE_HASH_LISTPACK, [body], len(body)
    if t is StrDict or t is dict:
        body = encode_len(len(v)) + put_run(RUN_PAIRS, v.items(), z is not None)
        return RDB_TYPE_HASH, [body], len(body)
    if t is HashEx:
        if not v.ttl:
            return _collection(dict(v), key, z)
        return _hash_metadata(v, z)
    if t is ListpackZSet:
        body = encode_string(v.to_listpack(), z)
        return RDB_TYPE_ZSET_LISTPACK, [body], len(body)
    if t is ZSet:
        body = encode_len(len(v)) + put_run(RUN_ZSET2, v.items(), z is not None)
        return RDB_TYPE_ZSET_2, [body], len(body)
    if t is Stream:
        body = encode_stream(v, z)
        return RDB_TYPE_STREAM_LISTPACKS_2, [body], len(body)
    raise TypeError(f"cannot encode value of type {t.__name__} for key {key!r}")


def _hash_metadata(v: HashEx, z: Lzf = None) -> tuple[int, list[bytes], int]:
    """rdbSaveObject of a hash with field TTLs: a small one as RDB_TYPE_HASH_LISTPACK_EX (its
    field order, TTL'd fields first, survives the load as it does in Redis), a larger one as
    RDB_TYPE_HASH_METADATA."""
    ttl = v.ttl
    low = min(ttl.values())
    if len(v) <= LISTPACK_EX_ENTRIES and all(
            len(f) <= LISTPACK_EX_VALUE and len(x) <= LISTPACK_EX_VALUE for f, x in v.items()):
        items: list[bytes | int] = []
        for f, x in v.items():
            items += (f, x, ttl.get(f, 0))
        body = _PACK_Q(low) + encode_string(build_listpack(items), z)
        return RDB_TYPE_HASH_LISTPACK_EX, [body], len(body)
    parts = [_PACK_Q(low), encode_len(len(v))]
    append = parts.append
    size = 18
    for f, val in v.items():
        w = ttl.get(f)
        append(encode_len(0 if w is None else w - low + 1))
        size += _put_strings(append, (f, val), z) + 9
    return RDB_TYPE_HASH_METADATA, parts, size


def stream_listpack(node: Any) -> bytes:
    """The listpack of one stream node, as streamAppendItem built it: a sealed node's bytes as
    they are, the open tail node's assembled from its encoded entries (stream.py)."""
    return node.listpack()


def put_pel_reference(pel: Mapping[int, Any], nacks: bool) -> bytes:
    """The reference of _codec.put_pel: a stream group's PEL (``nacks``: per entry in ID
    order its ID's 16 big-endian bytes, the delivery time's 8 little-endian bytes, the
    delivery count as a length) or a consumer's (the IDs alone), as rdbSaveObject writes
    them."""
    out: list[bytes] = []
    for eid in sorted(pel):
        out.append(eid.to_bytes(16, "big"))
        if nacks:
            nack = pel[eid]
            out.append(_PACK_Q(nack.delivery_time) + encode_len(nack.delivery_count))
    return b"".join(out)


put_pel = _codec.put_pel if _codec is not None else put_pel_reference


def encode_stream(s: Stream, z: Lzf = None) -> bytes:
    """rdbSaveObject for OBJ_STREAM, RDB_TYPE_STREAM_LISTPACKS_2 layout (without the type;
    ``z``: see encode_string)."""
    out = [encode_len(len(s.nodes))]
    for node in s.nodes:
        out.append(encode_string(node.master.to_bytes(16, "big")))
        out.append(encode_string(node.listpack(), z))
    for v in (s.length, s.last_id >> 64, s.last_id & MASK64, s.first_id >> 64,
              s.first_id & MASK64, s.max_deleted >> 64, s.max_deleted & MASK64,
              s.entries_added, len(s.groups)):
        out.append(encode_len(v))
    for name in sorted(s.groups):
        g = s.groups[name]
        out.append(encode_string(name))
        out.append(encode_len(g.last_id >> 64))
        out.append(encode_len(g.last_id & MASK64))
        out.append(encode_len(g.entries_read & MASK64))
        out.append(encode_len(len(g.pel)))
        out.append(put_pel(g.pel, True))
        out.append(encode_len(len(g.consumers)))
        for cname in sorted(g.consumers):
            cons = g.consumers[cname]
            out.append(encode_string(cname) + _PACK_Q(cons.seen_time) + encode_len(len(cons.pel)))
            out.append(put_pel(cons.pel, False))
    return b"".join(out)


def encode_rdb(
    dbs: Sequence[DbLike],
    *,
    aux: Mapping[str, bytes | str | int] = {},  # noqa: B006 - read only
    functions: Sequence[bytes] = (),
    checksum: bool = True,
    now_ms: int,
    chunk_size: int = CHUNK_SIZE,
    key_hook: Callable[[], None] | None = None,
    progress: Callable[[int], None] | None = None,
    compress: bool = False,
) -> Iterator[bytes]:
    """Yield a whole RDB v10 file in chunks; db index = position in ``dbs``; empty dbs and
    empty collections are skipped (expired keys are written: the loader drops them).

    ``key_hook`` is called after each key is encoded (``rdb-key-save-delay``: the I/O shell
    passes a sleep, which slows the snapshot down for tests, as in Redis). ``progress`` is
    called with the number of keys visited so far each time a chunk is yielded (INFO
    current_save_keys_processed). ``functions`` are the codes of the function libraries,
    written after the AUX fields and before the databases (rdbSaveFunctions). ``compress``:
    ``rdbcompression yes``, strings over 20 bytes LZF-compressed where that saves 4 bytes."""
    z: Lzf = rdb_string if compress else None
    crc = 0
    header = encode_header(aux, now_ms,
                           RDB_VERSION_HFE if has_field_ttls(dbs) else RDB_VERSION)
    if functions:
        header += b"".join(encode_function(code) for code in functions)
    parts: list[bytes] = [header]
    append = parts.append
    size = len(header)
    lens = _LEN
    str_prefix = _TLEN[RDB_TYPE_STRING]
    ints = _INT_START
    int_encoding = _int_encoding
    pack_q = _PACK_Q
    expire_op = _EXPIRE_OP
    done = 0          # keys of the dbs already written (progress reporting)
    ages = saving_ages()

    for dbid, db in enumerate(dbs):
        data = db.data
        expires = db.expires
        if not data:
            continue
        select = (bytes((RDB_OPCODE_SELECTDB,)) + encode_len(dbid) + bytes((RDB_OPCODE_RESIZEDB,))
                  + encode_len(len(data)) + encode_len(len(expires)))
        append(select)
        size += len(select)
        exp_get = expires.get if expires else None
        age_of = data.age if ages and type(data) is KeyTable else None
        items = iter(data.items())   # its length hint gives the progress, at no cost per key
        for k, v in items:
            if exp_get is not None:
                when = exp_get(k)
                if when is not None:
                    append(expire_op + pack_q(when))
                    size += 9
            if age_of is not None:       # IDLE or FREQ (an LRU or LFU policy), as Redis
                idle, freq = saved_age(age_of(k) or 0)
                op = (_IDLE_OP + encode_len(idle)) if idle >= 0 else _FREQ_OP + bytes((freq,))
                append(op)
                size += len(op)
            nk = len(k)
            if type(v) is bytes:
                # Type byte + key.
                if nk <= 11 and nk and k[0] in ints and (ke := int_encoding(k)) is not None:
                    append(b"\x00" + ke)
                elif nk > 20 and z is not None and (kz := z(k)) is not None:
                    append(b"\x00" + kz)
                else:
                    append(str_prefix[nk] if nk < 16384 else b"\x00" + encode_len(nk))
                    append(k)
                nv = len(v)
                if nv <= 11 and nv and v[0] in ints and (ve := int_encoding(v)) is not None:
                    append(ve)
                elif nv > 20 and z is not None and (vz := z(v)) is not None:
                    append(vz)
                else:
                    append(lens[nv] if nv < 16384 else encode_len(nv))
                    append(v)
                size += nk + nv + 10
            else:
                if not v:
                    continue
                rtype, pieces, psize = _collection(v, k, z)
                append(bytes((rtype,)))
                _put_strings(append, (k,), z)
                parts.extend(pieces)
                size += nk + psize + 6
            if key_hook is not None:
                key_hook()
            if size >= chunk_size:
                chunk = b"".join(parts)
                if checksum:
                    crc = crc64(chunk, crc)
                if progress is not None:
                    left = items.__length_hint__()  # type: ignore[attr-defined]  # stub: Iterator
                    progress(done + len(data) - left)
                yield chunk
                parts.clear()
                size = 0
        done += len(data)
    append(bytes((RDB_OPCODE_EOF,)))
    chunk = b"".join(parts)
    if checksum:
        crc = crc64(chunk, crc)
    if progress is not None:
        progress(done)
    yield chunk + crc.to_bytes(8, "little")


def encode_rdb_bytes(dbs: Sequence[DbLike], *, aux: Mapping[str, bytes | str | int] = {},  # noqa: B006
                     functions: Sequence[bytes] = (), checksum: bool = True,
                     now_ms: int, compress: bool = False) -> bytes:
    """The whole file as one bytes object (tests, small datasets)."""
    return b"".join(encode_rdb(dbs, aux=aux, functions=functions, checksum=checksum,
                               now_ms=now_ms, compress=compress))


def save_rdb_file(
    path: str,
    dbs: Sequence[DbLike],
    *,
    aux: Mapping[str, bytes | str | int] = {},  # noqa: B006
    functions: Sequence[bytes] = (),
    checksum: bool = True,
    now_ms: int,
    key_hook: Callable[[], None] | None = None,
    progress: Callable[[int], None] | None = None,
    autosync: int = 0,
    compress: bool = False,
) -> int:
    """Write the dump to ``path`` atomically (temp file, fsync, rename, fsync of the directory)
    and return the number of bytes written. On error the temp file is removed. ``autosync``:
    see :func:`write_atomically`."""
    def fill(write: Callable[[bytes | memoryview], Any]) -> None:
        for chunk in encode_rdb(dbs, aux=aux, functions=functions, checksum=checksum,
                                now_ms=now_ms, chunk_size=1 << 20, key_hook=key_hook,
                                progress=progress, compress=compress):
            write(chunk)

    return write_atomically(path, fill, autosync, tmp=rdb_temp_path(path, os.getpid()))


def rdb_temp_path(path: str, pid: int) -> str:
    """The file a dump is written to before it is renamed to ``path``: Redis's
    temp-<pid>.rdb beside it (what its tests and operators look for)."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), f"temp-{pid}.rdb")


def write_atomically(path: str, fill: Callable[[Callable[[bytes | memoryview], Any]], Any],
                     autosync: int = 0, tmp: str | None = None) -> int:
    """``fill(write)`` writes a file's contents; they land at ``path`` atomically: a temp file
    beside it, fsynced, renamed over ``path``, then the directory fsynced (a crash leaves the
    old file or the new one, never half of one). Returns the bytes written; on error the temp
    file is removed and the error raised (an RDB dump, an AOF base). ``autosync`` > 0:
    fdatasync every that many bytes on the way (rioSetAutoSync: the kernel never holds a big
    backlog of dirty pages for the final fsync to flush at once)."""
    if tmp is None:
        tmp = f"{path}.tmp-{os.getpid()}"
    written = 0
    synced = 0
    try:
        with open(tmp, "wb", buffering=0) as f:
            raw_write = f.write

            def write(chunk: bytes | memoryview) -> None:
                nonlocal written, synced
                view = memoryview(chunk)
                while view:
                    n = raw_write(view)
                    if n is None:  # pragma: no cover - only for non-blocking files
                        continue
                    view = view[n:]
                written += len(chunk)
                if autosync and written - synced >= autosync:
                    os.fdatasync(f.fileno())
                    synced = written

            fill(write)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dirname = os.path.dirname(os.path.abspath(path))
    try:
        dfd = os.open(dirname, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return written
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return written
