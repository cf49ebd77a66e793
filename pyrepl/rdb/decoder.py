"""Streaming sans-io RDB reader (versions 1 to 13, i.e. everything up to Redis 8.6 writes).

Theory of operation: bytes go in with ``receive_data`` (any chunking, ``b""`` = end of input)
and events come out of ``next_event`` (``None`` = need more bytes). The reader keeps one
immutable buffer and a parse position. Each item (an opcode with its operands, or a whole
key-value pair) is parsed optimistically from the buffer; when the buffer ends before the item
does, the attempt raises ``_Incomplete`` carrying the buffer index the item needs to reach, the
position rolls back to the item's first byte and nothing is emitted; received chunks are joined
into the buffer (dropping what was consumed) only once they reach that index. Plain collections
(LIST, SET, HASH, ZSET, quicklists) and a stream's nodes, the items that can be huge while made
of small parts, are read element by element into a ``_Partial`` that survives between attempts,
so each byte is parsed once however the stream is chunked and the buffer never holds more than
the unparsed tail (a stream's counters and consumer groups, after its nodes, are read whole). A huge string or compact blob announces its length up front, so it is parsed once too.

State that opcodes attach to the next key (EXPIRETIME / EXPIRETIME_MS, IDLE, FREQ, KEY_META) is
committed as soon as the opcode is parsed. The CRC64 is computed over the bytes consumed, lazily
when the buffer is compacted, up to and including the EOF opcode, then compared with the
little-endian checksum that follows (0 means "saved without checksum"). After ``End`` the reader
ignores further input and exposes it as ``unused_data``.

Values come out in the shapes of the in-memory model: string ``bytes``, list a
:data:`pyrepl.keyspace.lplist.ListpackList` or a ``deque[bytes]`` (one quicklist node's worth or more),
set an :data:`pyrepl.keyspace.intset.IntSet` or a ``set[bytes]`` (as Redis 7.0 loads it), hash a :data:`pyrepl.keyspace.lphash.ListpackHash` or a ``dict[bytes, bytes]``
(as Redis 7.0 loads it: a listpack within the hash-max-listpack-* limits), sorted set ``ZSet``; integers held by compact
encodings become their decimal bytes. Every compact encoding Redis has written is read:
integer/LZF strings, intset, ziplist, zipmap, listpack, quicklist v1/v2 (packed and plain
nodes), and streams (RDB_TYPE_STREAM_LISTPACKS 1 to 4, consumer groups and PELs included: their
listpacks become sealed :class:`pyrepl.keyspace.stream.Node` s as they are, so the node layout
Redis had survives; Redis 8's idempotent-producer state is refused when a stream has some). Module
values are refused with an ``RdbError`` naming the type and the offset. Hashes whose fields
carry expiry times (Redis 7.4+ types 22 to 25) become :class:`pyrepl.keyspace.hashttl.HashEx`
with their TTLs (fields already expired are loaded too, as Redis 8 does: their expiry removes
them); such a type without any field TTL gives a plain hash. Empty collections are skipped as Redis does.

``load_into`` is the bulk path (what ``load_rdb_file`` uses): it stores key-values straight
into per-db KeyTables (or dicts) without building an event object per key. Any error raises ``RdbError``.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pyrepl.keyspace.hashttl import make_hashex
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.intset import compact as compact_set
from pyrepl.keyspace.intset import limits as intset_limits
from pyrepl.keyspace.ktable import KeyTable, given_age
from pyrepl.keyspace.lphash import compact as compact_hash
from pyrepl.keyspace.lplist import compact as compact_list
from pyrepl.keyspace.stream import (
    MASK64,
    SCG_INVALID_ENTRIES_READ,
    Consumer,
    Group,
    Nack,
    Node,
    NodeCorrupt,
    Stream,
)
from pyrepl.keyspace.strtab import StrDict
from pyrepl.keyspace.zset import compact as compact_zset
from pyrepl.rdb.constants import (
    EB_EXPIRE_TIME_MAX,
    KEY_META_CHARSET,
    KEY_META_FLAG_ALLOW_IGNORE,
    QUICKLIST_NODE_CONTAINER_PACKED,
    QUICKLIST_NODE_CONTAINER_PLAIN,
    RDB_MODULE_OPCODE_DOUBLE,
    RDB_MODULE_OPCODE_EOF,
    RDB_MODULE_OPCODE_FLOAT,
    RDB_MODULE_OPCODE_SINT,
    RDB_MODULE_OPCODE_STRING,
    RDB_MODULE_OPCODE_UINT,
    RDB_OPCODE_AUX,
    RDB_OPCODE_EOF,
    RDB_OPCODE_EXPIRETIME,
    RDB_OPCODE_EXPIRETIME_MS,
    RDB_OPCODE_FREQ,
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_FUNCTION_PRE_GA,
    RDB_OPCODE_IDLE,
    RDB_OPCODE_KEY_META,
    RDB_OPCODE_MODULE_AUX,
    RDB_OPCODE_RESIZEDB,
    RDB_OPCODE_SELECTDB,
    RDB_OPCODE_SLOT_INFO,
    RDB_TYPE_HASH,
    RDB_TYPE_HASH_LISTPACK,
    RDB_TYPE_HASH_LISTPACK_EX,
    RDB_TYPE_HASH_LISTPACK_EX_PRE_GA,
    RDB_TYPE_HASH_METADATA,
    RDB_TYPE_HASH_METADATA_PRE_GA,
    RDB_TYPE_HASH_ZIPLIST,
    RDB_TYPE_HASH_ZIPMAP,
    RDB_TYPE_LIST,
    RDB_TYPE_LIST_QUICKLIST,
    RDB_TYPE_LIST_QUICKLIST_2,
    RDB_TYPE_LIST_ZIPLIST,
    RDB_TYPE_SET,
    RDB_TYPE_SET_INTSET,
    RDB_TYPE_SET_LISTPACK,
    RDB_TYPE_STREAM_LISTPACKS,
    RDB_TYPE_STREAM_LISTPACKS_2,
    RDB_TYPE_STREAM_LISTPACKS_3,
    RDB_TYPE_STREAM_LISTPACKS_4,
    RDB_TYPE_STRING,
    RDB_TYPE_ZSET,
    RDB_TYPE_ZSET_2,
    RDB_TYPE_ZSET_LISTPACK,
    RDB_TYPE_ZSET_ZIPLIST,
    RDB_VERSION_MAX_READ,
    module_type_name,
    rdb_type_name,
)
from pyrepl.rdb.containers import (
    ContainerError,
    checked_listpack_entries,
    intset_entries,
    listpack_entries,
    ziplist_entries,
    zipmap_pairs,
)
from pyrepl.rdb.crc64 import crc64
from pyrepl.rdb.lzf import LzfError, _codec
from pyrepl.rdb.lzf import decompress as lzf_decompress

__all__ = [
    "Aux",
    "End",
    "FunctionSkipped",
    "KeyValue",
    "LoadedRdb",
    "ModuleAuxSkipped",
    "RdbDecoder",
    "RdbError",
    "ResizeDb",
    "SelectDb",
    "load_rdb_file",
]


class RdbError(Exception):
    """The RDB data is corrupt, truncated, or holds something pyrepl cannot load."""


# ---------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Aux:
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class SelectDb:
    db: int


@dataclass(frozen=True, slots=True)
class ResizeDb:
    db_size: int
    expires_size: int


@dataclass(frozen=True, slots=True)
class KeyValue:
    db: int
    key: bytes
    value: Any
    expire_ms: int | None


@dataclass(frozen=True, slots=True)
class FunctionSkipped:
    """A function library (RDB_OPCODE_FUNCTION2, or the 7.0-rc FUNCTION format); ``code`` is
    the library source (for the pre-GA format: the blob without name/engine header, which
    ``name`` and ``engine`` hold; :attr:`library_code` puts it back as Redis 7.0 does)."""

    code: bytes
    name: bytes | None = field(default=None, compare=False)
    engine: bytes | None = field(default=None, compare=False)

    @property
    def library_code(self) -> bytes:
        """The library's code with its ``#!<engine> name=<name>`` line (rdbFunctionLoad)."""
        if self.engine is None:
            return self.code
        return b"#!%s name=%s\n%s" % (self.engine, self.name or b"", self.code)


@dataclass(frozen=True, slots=True)
class ModuleAuxSkipped:
    module_id: int
    module_name: str
    when: int


@dataclass(frozen=True, slots=True)
class End:
    """End of the RDB. ``checksum_ok`` is True when the CRC64 matched, None when there was no
    checksum to verify (version < 5, saved with rdbchecksum no, or verification disabled) and
    False only when the decoder was built with ``strict_checksum=False`` and it did not match."""

    checksum_ok: bool | None


# ---------------------------------------------------------------------------------- internals


class _Incomplete(Exception):
    """The item being parsed reaches ``end`` (an index into the buffer) beyond the data."""

    __slots__ = ("end",)

    def __init__(self, end: int) -> None:
        self.end = end


class _Corrupt(Exception):
    pass


_SKIP = object()  # an item that produced no key (empty collection)
_U64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")


def _rlen(buf: bytes, p: int, n: int) -> tuple[int, int]:
    """rdbLoadLen for a plain length: (length, next position)."""
    b = buf[p]
    if b < 0x40:
        return b, p + 1
    if b < 0x80:
        return ((b & 0x3F) << 8) | buf[p + 1], p + 2
    if b == 0x80:
        if p + 5 > n:
            raise _Incomplete(p + 5)
        return int.from_bytes(buf[p + 1 : p + 5], "big"), p + 5
    if b == 0x81:
        if p + 9 > n:
            raise _Incomplete(p + 9)
        return int.from_bytes(buf[p + 1 : p + 9], "big"), p + 9
    raise _Corrupt(f"Unknown length encoding 0x{b:02x}")


def _rstr(buf: bytes, p: int, n: int) -> tuple[bytes, int]:
    """rdbGenericLoadStringObject: (bytes, next position); integers become decimal bytes."""
    b = buf[p]
    if b < 0x40:
        end = p + 1 + b
        if end > n:
            raise _Incomplete(end)
        return buf[p + 1 : end], end
    if b < 0x80:
        start = p + 2
        end = start + (((b & 0x3F) << 8) | buf[p + 1])
    elif b == 0x80:
        start = p + 5
        if start > n:
            raise _Incomplete(start)
        end = start + int.from_bytes(buf[p + 1 : start], "big")
    elif b == 0x81:
        start = p + 9
        if start > n:
            raise _Incomplete(start)
        end = start + int.from_bytes(buf[p + 1 : start], "big")
    elif b == 0xC0:
        v = buf[p + 1]
        return b"%d" % (v - 256 if v > 127 else v), p + 2
    elif b == 0xC1:
        if p + 3 > n:
            raise _Incomplete(p + 3)
        return b"%d" % int.from_bytes(buf[p + 1 : p + 3], "little", signed=True), p + 3
    elif b == 0xC2:
        if p + 5 > n:
            raise _Incomplete(p + 5)
        return b"%d" % int.from_bytes(buf[p + 1 : p + 5], "little", signed=True), p + 5
    elif b == 0xC3:
        clen, q = _rlen(buf, p + 1, n)
        ulen, q = _rlen(buf, q, n)
        end = q + clen
        if end > n:
            raise _Incomplete(end)
        try:
            return lzf_decompress(buf[q:end], ulen), end
        except LzfError as e:
            raise _Corrupt(f"Invalid LZF compressed string ({e})") from None
    elif b > 0xC3:
        raise _Corrupt(f"Unknown RDB string encoding type {b & 0x3F}")
    else:
        raise _Corrupt(f"Unknown length encoding 0x{b:02x}")
    if end > n:
        raise _Incomplete(end)
    return buf[start:end], end


def read_string(buf: bytes, p: int) -> tuple[bytes, int]:
    """One RDB string of a complete buffer at ``p``: (bytes, next position); RdbError when it
    is corrupt or runs past the end (FUNCTION RESTORE reads its payload with it)."""
    try:
        return _rstr(buf, p, len(buf))
    except (_Incomplete, _Corrupt, IndexError) as e:
        raise RdbError(str(e) or "truncated string") from None


def read_length(buf: bytes, p: int) -> tuple[int, int]:
    """One RDB length of a complete buffer at ``p`` (see :func:`read_string`)."""
    try:
        return _rlen(buf, p, len(buf))
    except (_Incomplete, _Corrupt, IndexError) as e:
        raise RdbError(str(e) or "truncated length") from None


def _as_bytes(e: bytes | int) -> bytes:
    return e if isinstance(e, bytes) else b"%d" % e


def _score(e: bytes | int) -> float:
    if type(e) is int:
        return float(e)
    try:
        s = float(e)
    except ValueError:
        raise _Corrupt(f"Invalid sorted set score {e!r}") from None
    return s


def _make_zset(pairs: list[tuple[bytes, float]], by_count: bool = False) -> Any:
    """A sorted set: as Redis 7.0 loads it, a listpack within the limits (only
    zset-max-listpack-entries for a listpack or ziplist blob, which Redis keeps as it is)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Corrupt("Duplicate zset fields detected")
    for s in d.values():
        if s != s:
            raise _Corrupt("Zset with NAN score detected")
    return compact_zset(d.items(), by_count)


def _make_hash(flat: list[bytes], by_count: bool = False) -> Any:
    """A hash of field, value, ...: as Redis 7.0 loads it, a listpack within the limits (only
    hash-max-listpack-entries for a listpack blob, which Redis keeps as it is)."""
    if len(flat) % 2:
        raise _Corrupt("Hash with an odd number of elements")
    it = iter(flat)
    h = dict(zip(it, it, strict=True))
    if len(h) * 2 != len(flat):
        # (Redis's words when it meets one converting a listpack to a dict: it logs them, then
        # panics; here the payload is refused)
        raise _Corrupt(f"{'listpack' if by_count else 'ziplist'} with dup elements")
    return compact_hash(h, by_count)


def _make_set(members: list[bytes]) -> Any:
    s = set(members)
    if len(s) != len(members):
        raise _Corrupt("Duplicate set members detected")
    return compact_set(s)


def _unsupported(t: int, why: str = "") -> _Corrupt:
    msg = f"Unsupported RDB object type {t} ({rdb_type_name(t)})"
    return _Corrupt(msg + (f": {why}" if why else ""))


def _key_meta_class(spec: int) -> tuple[str, int, int]:
    """keymeta.c keyMetaClassDecode: (4-char name, version, flags) of a 32-bit class spec."""
    flags = spec & 0x7
    ver = (spec >> 3) & 0x1F
    v = spec >> 8
    name = "".join(KEY_META_CHARSET[(v >> (6 * (3 - i))) & 0x3F] for i in range(4))
    return name, ver, flags


# ------------------------------------------------------------- plain collections, by element


class _Partial:
    """A plain collection (LIST, SET, HASH, ZSET, quicklist, ...) whose elements are being read:
    the elements read so far stay here while the decoder waits for more bytes."""

    __slots__ = ("type", "key", "remaining", "start", "reader", "elements", "meta")

    def __init__(self, t: int, key: bytes, count: int, start: int, reader: Any) -> None:
        self.type = t
        self.key = key
        self.remaining = count
        self.start = start  # absolute offset of the type byte, for error messages
        self.reader = reader
        self.elements: list[Any] = []
        self.meta = 0  # RDB_TYPE_HASH_METADATA: the minimum field expiry (TTLs are relative)


def _read_pair(buf: bytes, p: int, n: int) -> tuple[tuple[bytes, bytes], int]:
    f, p = _rstr(buf, p, n)
    v, p = _rstr(buf, p, n)
    return (f, v), p


def _read_zset2_member(buf: bytes, p: int, n: int) -> tuple[tuple[bytes, float], int]:
    m, p = _rstr(buf, p, n)
    if p + 8 > n:
        raise _Incomplete(p + 8)
    return (m, _F64.unpack_from(buf, p)[0]), p + 8


def _read_zset1_member(buf: bytes, p: int, n: int) -> tuple[tuple[bytes, float], int]:
    """Member + rdbLoadDoubleValue: length byte (253 nan, 254 +inf, 255 -inf) + text."""
    m, p = _rstr(buf, p, n)
    ln = buf[p]
    if ln == 255:
        return (m, float("-inf")), p + 1
    if ln == 254:
        return (m, float("inf")), p + 1
    if ln == 253:
        return (m, float("nan")), p + 1
    end = p + 1 + ln
    if end > n:
        raise _Incomplete(end)
    try:
        return (m, float(buf[p + 1 : end])), end
    except ValueError:
        raise _Corrupt("Invalid double value in sorted set") from None


def _read_hash_md_field(buf: bytes, p: int, n: int) -> tuple[tuple[int, bytes, bytes], int]:
    ttl, p = _rlen(buf, p, n)
    f, p = _rstr(buf, p, n)
    v, p = _rstr(buf, p, n)
    return (ttl, f, v), p


def _read_quicklist2_node_deep(buf: bytes, p: int, n: int) -> tuple[list[bytes], int]:
    """A quicklist node with every listpack entry's back-length checked too."""
    return _read_quicklist2_node(buf, p, n, checked_listpack_entries)


def _read_quicklist2_node(buf: bytes, p: int, n: int,
                          entries_of: Any = listpack_entries) -> tuple[list[bytes], int]:
    container, p = _rlen(buf, p, n)
    if container != QUICKLIST_NODE_CONTAINER_PACKED and container != \
            QUICKLIST_NODE_CONTAINER_PLAIN:
        raise _Corrupt("Quicklist integrity check failed")
    blob, p = _rstr(buf, p, n)
    if not blob:
        raise _Corrupt("Quicklist node is empty")
    if container == QUICKLIST_NODE_CONTAINER_PLAIN:
        return [blob], p
    try:
        entries = entries_of(blob)
    except (ContainerError, struct.error):
        raise _Corrupt("Listpack integrity check failed.") from None
    return [e if isinstance(e, bytes) else b"%d" % e for e in entries], p


def _read_quicklist_node(buf: bytes, p: int, n: int) -> tuple[list[bytes], int]:
    blob, p = _rstr(buf, p, n)
    if not blob:
        raise _Corrupt("Quicklist node is empty")
    try:
        entries = ziplist_entries(blob)
    except (ContainerError, struct.error):
        raise _Corrupt("Ziplist integrity check failed.") from None
    return [e if isinstance(e, bytes) else b"%d" % e for e in entries], p


def _finish_list(t: int, elements: list[bytes]) -> Any:
    return compact_list(elements) if elements else _SKIP


def _finish_quicklist(t: int, nodes: list[list[bytes]]) -> Any:
    items: list[bytes] = []
    for node in nodes:
        items.extend(node)
    return compact_list(items) if items else _SKIP


def _finish_set(t: int, elements: list[bytes]) -> Any:
    return _make_set(elements) if elements else _SKIP


def _finish_hash(t: int, pairs: list[tuple[bytes, bytes]]) -> Any:
    if not pairs:
        return _SKIP
    h = dict(pairs)
    if len(h) != len(pairs):
        raise _Corrupt("Duplicate hash fields detected")
    return compact_hash(h)


def _finish_zset(t: int, pairs: list[tuple[bytes, float]]) -> Any:
    return _make_zset(pairs) if pairs else _SKIP


def _finish_hash_md(t: int, triples: list[tuple[int, bytes, bytes]], low: int = 0) -> Any:
    """RDB_TYPE_HASH_METADATA(_PRE_GA): per field a TTL (0 = none; relative to ``low`` + 1 in
    the GA form, absolute before), the field and the value."""
    if not triples:
        return _SKIP
    items = []
    for ttl, f, v in triples:
        when = (ttl + low - 1 if t == RDB_TYPE_HASH_METADATA else ttl) if ttl else 0
        if when > EB_EXPIRE_TIME_MAX:
            raise _Corrupt(f"invalid expireAt time: {when}")
        items.append((f, v, when))
    h = make_hashex(items)
    if len(h) != len(triples):
        raise _Corrupt("Duplicate hash fields detected")
    if not h.ttl:
        return StrDict(h.items())
    return h


_ELEMENT_READERS: dict[int, Any] = {
    RDB_TYPE_LIST: _rstr,
    RDB_TYPE_SET: _rstr,
    RDB_TYPE_HASH: _read_pair,
    RDB_TYPE_ZSET: _read_zset1_member,
    RDB_TYPE_ZSET_2: _read_zset2_member,
    RDB_TYPE_LIST_QUICKLIST: _read_quicklist_node,
    RDB_TYPE_LIST_QUICKLIST_2: _read_quicklist2_node,
    RDB_TYPE_HASH_METADATA: _read_hash_md_field,
    RDB_TYPE_HASH_METADATA_PRE_GA: _read_hash_md_field,
}
#: sanitize-dump-payload yes: each listpack entry's back-length checked too
_DEEP_ELEMENT_READERS = {**_ELEMENT_READERS,
                         RDB_TYPE_LIST_QUICKLIST_2: _read_quicklist2_node_deep}
# The element readers _codec.read_run does in C (kind: 0 strings, 1 pairs, 2 zset2 members):
# a run of elements at once, up to one it cannot read whole; that one goes to the reader above
# (which reads it, waits for more bytes or says what is wrong).
_RUNS: dict[int, int] = {RDB_TYPE_LIST: 0, RDB_TYPE_SET: 0, RDB_TYPE_HASH: 1, RDB_TYPE_ZSET_2: 2}
_FINISHERS: dict[int, Any] = {
    RDB_TYPE_LIST: _finish_list,
    RDB_TYPE_SET: _finish_set,
    RDB_TYPE_HASH: _finish_hash,
    RDB_TYPE_ZSET: _finish_zset,
    RDB_TYPE_ZSET_2: _finish_zset,
    RDB_TYPE_LIST_QUICKLIST: _finish_quicklist,
    RDB_TYPE_LIST_QUICKLIST_2: _finish_quicklist,
    RDB_TYPE_HASH_METADATA: _finish_hash_md,
    RDB_TYPE_HASH_METADATA_PRE_GA: _finish_hash_md,
}


# ---------------------------------------------------------------------------------- decoder

_HEADER, _BODY, _CHECKSUM, _DONE, _FAILED = range(5)


class RdbDecoder:
    """Sans-io RDB reader: ``receive_data(bytes)`` then ``next_event()`` (or ``load_into``)
    until ``None``.

    ``databases``: refuse a SELECTDB at or beyond this many databases (None: no limit; then
    ``load_into`` must be given enough tables). ``verify_checksum``: compute and compare the
    CRC64. ``strict_checksum``: a mismatch raises ``RdbError`` (default); when False it is
    reported as ``End(checksum_ok=False)`` and the caller decides. ``offset`` counts consumed
    bytes, including the elements already read of a collection still in progress."""

    def __init__(self, *, databases: int | None = None, strict_checksum: bool = True,
                 verify_checksum: bool = True, deep: bool = False) -> None:
        # ``deep``: sanitize-dump-payload's deep integrity check (every listpack entry's
        # back-length; the forward walk of every blob is always checked)
        self._readers = _DEEP_ELEMENT_READERS if deep else _ELEMENT_READERS
        self._lp_entries = checked_listpack_entries if deep else listpack_entries
        self._buf = b""
        self._pos = 0
        self._base = 0  # absolute offset of _buf[0]
        self._pending: list[bytes] = []
        self._pending_len = 0
        self._need = 0  # absolute offset the buffer must reach before re-parsing
        self._eof = False
        self._state = _HEADER
        self._error: RdbError | None = None
        self._crc = 0
        self._crc_pos = 0  # _buf[:_crc_pos] is in _crc
        self._verify = verify_checksum
        self._strict = strict_checksum
        self._databases = databases
        self.version = 0
        self.db = 0
        self._expire: int | None = None
        self._idle = self._freq = -1            # IDLE / FREQ read for the next key
        self.key_age = (-1, -1)                 # those of the last key read
        self._item_start = 0
        self._partial: _Partial | None = None  # a plain collection being read
        self.keys_read = 0
        self.type_counts: dict[int, int] = {}  # keys read per RDB object type
        self.empty_keys_skipped = 0
        self.empty_keys: list[bytes] = []   # the first ten skipped (Redis logs them)
        self.checksum: int | None = None  # the stored checksum, once read

    # -- input --------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        self._pending.append(bytes(data))
        self._pending_len += len(data)

    @property
    def offset(self) -> int:
        """Bytes consumed (the absolute offset of the next unparsed byte)."""
        return self._base + self._pos

    @property
    def unused_data(self) -> bytes:
        """Input received after the end of the RDB (only meaningful after ``End``)."""
        return self._buf[self._pos :] + b"".join(self._pending)

    @property
    def finished(self) -> bool:
        return self._state == _DONE

    def _fill(self) -> bool:
        """Join pending chunks into the buffer if that reaches ``_need``; True if it grew."""
        if not self._pending:
            return False
        avail = self._base + len(self._buf) + self._pending_len
        if avail < self._need and not self._eof:
            return False
        buf = self._buf
        pos = self._pos
        if self._verify and self._state <= _BODY and pos > self._crc_pos:
            self._crc = crc64(memoryview(buf)[self._crc_pos : pos], self._crc)
        self._pending.insert(0, buf[pos:])
        self._buf = b"".join(self._pending)
        self._pending = []
        self._pending_len = 0
        self._base += pos
        self._pos = 0
        self._crc_pos = 0
        return True

    def _fail(self, msg: str, start: int) -> RdbError:
        """A sticky error for the item that starts at buffer index ``start`` (or, while a
        collection is being read across chunks, at the collection's own first byte)."""
        offset = self._partial.start if self._partial is not None else self._base + start
        err = RdbError(f"{msg} at offset {offset}")
        self._error = err
        self._state = _FAILED
        return err

    # -- output -------------------------------------------------------------------------

    def next_event(self) -> object | None:
        """The next event, or None when more data is needed."""
        while True:
            item = self._step()
            if item is None:
                return None
            if type(item) is tuple:
                return KeyValue(self.db, item[0], item[1], item[2])
            if item is _SKIP:
                continue
            return item

    def load_into(self, data: Sequence[KeyTable | dict[bytes, Any]],
                  expires: Sequence[KeyTable | dict[bytes, int]]) -> list[object]:
        """Consume every complete item buffered: store key-values into ``data[db]`` /
        ``expires[db]`` (a key already present is an error) and return the other events in
        order. Stops after ``End``."""
        events: list[object] = []
        step = self._step
        while True:
            if self._state == _BODY and self._partial is None and self._error is None and \
                    self._idle < 0 and self._freq < 0:
                self._fast_strings(data[self.db], expires[self.db])
            item = step()
            if item is None:
                return events
            if type(item) is tuple:
                key, value, exp = item
                d = data[self.db]
                if key in d:
                    raise self._fail(f"Duplicated key {key!r} in DB {self.db}",
                                     self._item_start)
                d[key] = value
                if exp is not None:
                    expires[self.db][key] = exp
                idle, freq = self.key_age
                if (idle >= 0 or freq >= 0) and type(d) is KeyTable:
                    age = given_age(freq, idle)    # (objectSetLRUOrLFU)
                    if age is not None:
                        d.set_age(key, age)
                continue
            if item is _SKIP:
                continue
            events.append(item)
            if type(item) is End:
                return events

    def _fast_strings(self, d: KeyTable | dict[bytes, Any],
                      e: KeyTable | dict[bytes, int]) -> None:
        """load_into's fast lane: a run of plain string keys (with or without EXPIRETIME_MS)
        whose key and value lengths fit in 6 or 14 bits, parsed inline into ``d`` / ``e``.
        It stops, having committed every complete key, at the first byte it does not handle
        (another type or opcode, an encoded string, a duplicate, the end of the buffer);
        ``_step`` takes over from there."""
        buf = self._buf
        n = len(buf)
        p = self._pos
        exp = self._expire
        count = 0
        try:
            while True:
                t = buf[p]
                if t == 0:
                    b = buf[p + 1]
                    if b < 64:
                        ks = p + 2
                    elif b < 128:
                        ks = p + 3
                        b = ((b & 63) << 8) | buf[p + 2]
                    else:
                        break
                    ke = ks + b
                    b = buf[ke]
                    if b < 64:
                        vs = ke + 1
                    elif b < 128:
                        vs = ke + 2
                        b = ((b & 63) << 8) | buf[ke + 1]
                    elif b == 0xC3:  # LZF, as Redis writes every compressible value > 20 bytes
                        clen, q = _rlen(buf, ke + 1, n)
                        ulen, vs = _rlen(buf, q, n)
                        ve = vs + clen
                        if ve > n:
                            break
                        key = buf[ks:ke]
                        if key in d:
                            break
                        try:
                            d[key] = lzf_decompress(buf[vs:ve], ulen)
                        except LzfError:
                            break
                        if exp is not None:
                            e[key] = exp
                            exp = None
                        p = ve
                        count += 1
                        continue
                    else:
                        break
                    ve = vs + b
                    if ve > n:
                        break
                    key = buf[ks:ke]
                    if key in d:
                        break
                    d[key] = buf[vs:ve]
                    if exp is not None:
                        e[key] = exp
                        exp = None
                    p = ve
                    count += 1
                elif t == RDB_OPCODE_EXPIRETIME_MS and exp is None:
                    if p + 9 > n:
                        break
                    exp = _U64.unpack_from(buf, p + 1)[0]
                    p += 9
                else:
                    break
        except (IndexError, _Incomplete, _Corrupt):
            pass  # _step re-reads this item and reports properly
        self._pos = p
        self._expire = exp
        if count:
            self.keys_read += count
            tc = self.type_counts
            tc[0] = tc.get(0, 0) + count

    def _step(self) -> object | None:
        """Parse one item: a (key, value, expire) tuple, _SKIP, an event, or None (need more)."""
        if self._error is not None:
            raise self._error
        while True:
            if self._state == _DONE:
                return None
            start = self._item_start = self._pos
            try:
                if self._state == _BODY:
                    return self._parse_body()
                if self._state == _HEADER:
                    self._parse_header()
                    continue
                return self._parse_checksum()
            except _Incomplete as inc:
                if self._partial is None:
                    self._pos = start
                self._need = self._base + inc.end
            except IndexError:
                if self._partial is None:
                    self._pos = start
                self._need = self._base + len(self._buf) + 1
            except _Corrupt as e:
                raise self._fail(str(e), start) from None
            except (ContainerError, struct.error, ValueError, OverflowError) as e:
                # (a value no check above caught is still corrupt data, never a crash)
                raise self._fail(f"Corrupt compact encoding ({e})", start) from None
            if not self._fill():
                if self._eof:
                    raise self._fail("Unexpected end of RDB data (truncated file)", start)
                return None

    # -- parsing ------------------------------------------------------------------------

    def _parse_header(self) -> None:
        buf = self._buf
        if len(buf) - self._pos < 9:
            raise _Incomplete(self._pos + 9)
        magic = buf[self._pos : self._pos + 9]
        if magic[:5] != b"REDIS":
            raise _Corrupt("Wrong signature trying to load DB (not an RDB file)")
        digits = magic[5:]
        if not digits.isdigit():
            raise _Corrupt(f"Invalid RDB version {digits!r}")
        version = int(digits)
        if version < 1 or version > RDB_VERSION_MAX_READ:
            raise _Corrupt(f"Can't handle RDB format version {version}")
        self.version = version
        self._pos += 9
        self._state = _BODY

    def _parse_checksum(self) -> End:
        buf = self._buf
        p = self._pos
        if self.version < 5:
            self._state = _DONE
            return End(None)
        if p + 8 > len(buf):
            raise _Incomplete(p + 8)
        stored = int.from_bytes(buf[p : p + 8], "little")
        self.checksum = stored
        self._pos = p + 8
        self._state = _DONE
        if stored == 0 or not self._verify:
            return End(None)
        if stored != self._crc:
            if self._strict:
                raise _Corrupt(     # (Redis logs the first sentence, then reports the error)
                    f"Wrong RDB checksum expected: ({self._crc:x}) but got ({stored:x}). "
                    "Aborting now. RDB CRC error"
                )
            return End(False)
        return End(True)

    def _parse_body(self) -> object:
        if self._partial is not None:
            return self._continue_collection(self._partial)
        buf = self._buf
        n = len(buf)
        p = self._pos
        t = buf[p]
        if t < RDB_OPCODE_KEY_META:
            # A key-value pair.
            key, q = _rstr(buf, p + 1, n)
            if t == RDB_TYPE_STRING:
                value, q = _rstr(buf, q, n)
            else:
                reader = self._readers.get(t)
                if reader is not None:
                    low = 0
                    if t == RDB_TYPE_HASH_METADATA:
                        if q + 8 > n:
                            raise _Incomplete(q + 8)
                        low = _U64.unpack_from(buf, q)[0]  # field TTLs are relative to it
                        q += 8
                    count, q = _rlen(buf, q, n)
                    # From here on progress is kept element by element (see _Partial).
                    self._partial = _Partial(t, key, count, self._base + p, reader)
                    self._partial.meta = low
                    self._pos = q
                    return self._continue_collection(self._partial)
                value, q = self._parse_object(t, buf, q, n)
            self._pos = q
            return self._key_done(t, key, value)
        p += 1
        if t == RDB_OPCODE_EXPIRETIME_MS:
            if p + 8 > n:
                raise _Incomplete(p + 8)
            self._expire = _U64.unpack_from(buf, p)[0]
            self._pos = p + 8
            return _SKIP
        if t == RDB_OPCODE_SELECTDB:
            db, p = _rlen(buf, p, n)
            if self._databases is not None and db >= self._databases:
                raise _Corrupt(
                    f"RDB selects DB {db} but only {self._databases} databases are configured"
                )
            self._pos = p
            self.db = db
            return SelectDb(db)
        if t == RDB_OPCODE_RESIZEDB:
            size, p = _rlen(buf, p, n)
            esize, p = _rlen(buf, p, n)
            self._pos = p
            return ResizeDb(size, esize)
        if t == RDB_OPCODE_AUX:
            k, p = _rstr(buf, p, n)
            v, p = _rstr(buf, p, n)
            self._pos = p
            return Aux(k, v)
        if t == RDB_OPCODE_EOF:
            if self._verify and self.version >= 5:
                self._crc = crc64(memoryview(buf)[self._crc_pos : p], self._crc)
                self._crc_pos = p
            self._pos = p
            self._state = _CHECKSUM
            return _SKIP
        if t == RDB_OPCODE_EXPIRETIME:
            if p + 4 > n:
                raise _Incomplete(p + 4)
            self._expire = _I32.unpack_from(buf, p)[0] * 1000
            self._pos = p + 4
            return _SKIP
        if t == RDB_OPCODE_IDLE:           # the next key's idle time, seconds (LRU)
            self._idle, p = _rlen(buf, p, n)
            self._pos = p
            return _SKIP
        if t == RDB_OPCODE_FREQ:           # the next key's LFU counter
            if p + 1 > n:
                raise _Incomplete(p + 1)
            self._freq = buf[p]
            self._pos = p + 1
            return _SKIP
        if t == RDB_OPCODE_SLOT_INFO:
            _, p = _rlen(buf, p, n)
            _, p = _rlen(buf, p, n)
            _, p = _rlen(buf, p, n)
            self._pos = p
            return _SKIP
        if t == RDB_OPCODE_FUNCTION2:
            code, p = _rstr(buf, p, n)
            self._pos = p
            return FunctionSkipped(code)
        if t == RDB_OPCODE_FUNCTION_PRE_GA:
            name, p = _rstr(buf, p, n)
            engine, p = _rstr(buf, p, n)
            has_desc, p = _rlen(buf, p, n)
            if has_desc:
                _desc, p = _rstr(buf, p, n)
            code, p = _rstr(buf, p, n)
            self._pos = p
            return FunctionSkipped(code, name, engine)
        if t == RDB_OPCODE_MODULE_AUX:
            module_id, p = _rlen(buf, p, n)
            when_opcode, p = _rlen(buf, p, n)
            when, p = _rlen(buf, p, n)
            if when_opcode != RDB_MODULE_OPCODE_UINT:
                raise _Corrupt("Module AUX data with a bad when_opcode")
            p = self._skip_module_value(buf, p, n)
            self._pos = p
            return ModuleAuxSkipped(module_id, module_type_name(module_id), when)
        if t == RDB_OPCODE_KEY_META:
            nclasses, p = _rlen(buf, p, n)
            for _ in range(nclasses):
                if p + 4 > n:
                    raise _Incomplete(p + 4)
                cname, _ver, flags = _key_meta_class(int.from_bytes(buf[p : p + 4], "little"))
                if not flags & (1 << KEY_META_FLAG_ALLOW_IGNORE):
                    raise _Corrupt(
                        f"RDB key metadata of class '{cname}' needs its module and cannot be "
                        "ignored"
                    )
                p = self._skip_module_value(buf, p + 4, n)
            self._pos = p
            return _SKIP
        raise _Corrupt(f"Unknown RDB opcode {t}")

    def _key_done(self, t: int, key: bytes, value: Any) -> object:
        exp = self._expire
        self._expire = None
        self.key_age = (self._idle, self._freq)       # (the IDLE / FREQ opcodes before it)
        self._idle = self._freq = -1
        self.keys_read += 1
        tc = self.type_counts
        tc[t] = tc.get(t, 0) + 1
        if value is _SKIP:
            if self.empty_keys_skipped < 10:
                self.empty_keys.append(key)
            self.empty_keys_skipped += 1
            return _SKIP
        return (key, value, exp)

    def _continue_collection(self, st: _Partial) -> object:
        """Read the remaining elements of a plain collection, committing the position after
        each one, so a collection larger than the buffer is read once, not once per chunk."""
        buf = self._buf
        n = len(buf)
        p = self._pos
        reader = st.reader
        elements = st.elements
        append = elements.append
        remaining = st.remaining
        read_run = _codec.read_run if _codec is not None else None
        run = _RUNS.get(st.type) if read_run is not None else None
        try:
            while remaining:
                if run is not None and read_run is not None:   # (the elements it reads whole)
                    before = len(elements)
                    p = read_run(run, buf, p, remaining, elements)
                    remaining -= len(elements) - before
                    if not remaining:
                        break
                e, p = reader(buf, p, n)
                append(e)
                remaining -= 1
        finally:
            st.remaining = remaining
            self._pos = p
        if st.type in _STREAM_TYPES:     # (an _Incomplete tail keeps the nodes read)
            value, p = _read_stream_tail(st.type, st.elements, buf, p, n)
            self._pos = p
        elif st.meta:
            value = _finish_hash_md(st.type, st.elements, st.meta)
        else:
            value = _FINISHERS[st.type](st.type, st.elements)
        self._partial = None
        return self._key_done(st.type, st.key, value)

    @staticmethod
    def _skip_module_value(buf: bytes, p: int, n: int) -> int:
        """rdbLoadCheckModuleValue: skip module-serialized items up to their EOF marker."""
        while True:
            op, p = _rlen(buf, p, n)
            if op == RDB_MODULE_OPCODE_EOF:
                return p
            if op == RDB_MODULE_OPCODE_SINT or op == RDB_MODULE_OPCODE_UINT:
                _, p = _rlen(buf, p, n)
            elif op == RDB_MODULE_OPCODE_STRING:
                _, p = _rstr(buf, p, n)
            elif op == RDB_MODULE_OPCODE_FLOAT:
                p += _F32.size
                if p > n:
                    raise _Incomplete(p)
            elif op == RDB_MODULE_OPCODE_DOUBLE:
                p += _F64.size
                if p > n:
                    raise _Incomplete(p)
            else:
                raise _Corrupt(f"Unknown module value opcode {op}")

    def _parse_object(self, t: int, buf: bytes, p: int, n: int) -> tuple[Any, int]:
        """rdbLoadObject for every non-string type: (value or _SKIP, next position)."""
        if t in _BLOB_TYPES:
            if t == RDB_TYPE_HASH_LISTPACK_EX:
                if p + 8 > n:
                    raise _Incomplete(p + 8)
                p += 8  # min expire of the hash, informational
            blob, p = _rstr(buf, p, n)
            return self._decode_blob(t, blob, self._lp_entries), p
        raise _unsupported(t)

    @staticmethod
    def _decode_blob(t: int, blob: bytes, listpack_entries: Any = listpack_entries) -> Any:
        """The value of an encoded blob; a malformed one is rdbLoadObject's "<kind> integrity
        check failed." (what Redis logs for it, and its test suite looks for)."""
        try:
            return RdbDecoder._decode_blob_unchecked(t, blob, listpack_entries)
        except (ContainerError, struct.error):
            raise _Corrupt(_INTEGRITY.get(t, "Listpack") + " integrity check failed.") from None
        except _Corrupt:
            if t in (RDB_TYPE_HASH_ZIPLIST, RDB_TYPE_ZSET_ZIPLIST):   # (their conversion
                raise _Corrupt(_INTEGRITY[t] + " integrity check failed.") from None  # checks)
            raise

    @staticmethod
    def _decode_blob_unchecked(t: int, blob: bytes,
                               listpack_entries: Any = listpack_entries) -> Any:
        if t == RDB_TYPE_HASH_LISTPACK or t == RDB_TYPE_HASH_ZIPLIST:
            entries = listpack_entries(blob) if t == RDB_TYPE_HASH_LISTPACK else \
                ziplist_entries(blob)
            return _make_hash([_as_bytes(e) for e in entries], t == RDB_TYPE_HASH_LISTPACK) \
                if entries else _SKIP
        if t == RDB_TYPE_ZSET_LISTPACK or t == RDB_TYPE_ZSET_ZIPLIST:
            entries = listpack_entries(blob) if t == RDB_TYPE_ZSET_LISTPACK else \
                ziplist_entries(blob)
            if len(entries) % 2:
                raise _Corrupt("Sorted set with an odd number of elements")
            pairs = [(_as_bytes(entries[i]), _score(entries[i + 1]))
                     for i in range(0, len(entries), 2)]
            return _make_zset(pairs, True) if pairs else _SKIP
        if t == RDB_TYPE_SET_INTSET:
            ints = intset_entries(blob)
            if not ints:
                return _SKIP
            if len(ints) <= intset_limits.entries:     # (kept as it is, its width too)
                kept = IntSet.from_intset(blob)
                if kept is not None:
                    return kept
            return _make_set([b"%d" % v for v in ints])
        if t == RDB_TYPE_SET_LISTPACK:
            entries = listpack_entries(blob)
            return _make_set([_as_bytes(e) for e in entries]) if entries else _SKIP
        if t == RDB_TYPE_LIST_ZIPLIST:
            entries = ziplist_entries(blob)
            return compact_list([_as_bytes(e) for e in entries]) if entries else _SKIP
        if t == RDB_TYPE_HASH_ZIPMAP:
            fields = zipmap_pairs(blob)
            if not fields:          # (zipmapValidateIntegrity: an empty zipmap is corrupt)
                raise ContainerError("empty zipmap")
            h = dict(fields)
            if len(h) != len(fields):
                raise _Corrupt("Hash zipmap with dup elements")
            return compact_hash(h) if h else _SKIP   # (as a listpack, then by its limits)
        # RDB_TYPE_HASH_LISTPACK_EX(_PRE_GA): field, value, ttl triples; ttl 0 = none; the
        # listpack is kept as it is, so its order (TTL'd fields first) is the hash's order.
        entries = listpack_entries(blob)
        if len(entries) % 3:
            raise _Corrupt("Hash listpack with field expiry has a partial triple")
        items = []
        for i in range(0, len(entries), 3):
            when = entries[i + 2]
            if not isinstance(when, int) or when < 0 or when > EB_EXPIRE_TIME_MAX:
                raise _Corrupt("Hash listpack integrity check failed.")
            items.append((_as_bytes(entries[i]), _as_bytes(entries[i + 1]), when))
        if not items:
            return _SKIP
        h = make_hashex(items, insert=False)
        if len(h) != len(items):
            raise _Corrupt("Duplicate hash fields detected")
        return h if h.ttl else StrDict(h.items())


#: rdbLoadObject's names in "<name> integrity check failed."
_INTEGRITY = {RDB_TYPE_HASH_ZIPMAP: "Zipmap", RDB_TYPE_LIST_ZIPLIST: "List ziplist",
              RDB_TYPE_SET_INTSET: "Intset", RDB_TYPE_ZSET_ZIPLIST: "Zset ziplist",
              RDB_TYPE_HASH_ZIPLIST: "Hash ziplist", RDB_TYPE_HASH_LISTPACK: "Hash listpack",
              RDB_TYPE_ZSET_LISTPACK: "Zset listpack", RDB_TYPE_SET_LISTPACK: "Set listpack",
              RDB_TYPE_HASH_LISTPACK_EX_PRE_GA: "Hash listpack",
              RDB_TYPE_HASH_LISTPACK_EX: "Hash listpack"}

_BLOB_TYPES = frozenset(
    (
        RDB_TYPE_HASH_ZIPMAP,
        RDB_TYPE_LIST_ZIPLIST,
        RDB_TYPE_SET_INTSET,
        RDB_TYPE_ZSET_ZIPLIST,
        RDB_TYPE_HASH_ZIPLIST,
        RDB_TYPE_HASH_LISTPACK,
        RDB_TYPE_ZSET_LISTPACK,
        RDB_TYPE_SET_LISTPACK,
        RDB_TYPE_HASH_LISTPACK_EX_PRE_GA,
        RDB_TYPE_HASH_LISTPACK_EX,
    )
)


_STREAM_TYPES = frozenset((RDB_TYPE_STREAM_LISTPACKS, RDB_TYPE_STREAM_LISTPACKS_2,
                           RDB_TYPE_STREAM_LISTPACKS_3, RDB_TYPE_STREAM_LISTPACKS_4))


def _stream_node(key: bytes, lp: bytes, deep: bool) -> Node:
    """One stream listpack (stream.h's layout), checked and kept as it is: a sealed Node.
    ``deep``: every entry's back-length is checked too (sanitize-dump-payload)."""
    if len(key) != 16:
        raise _Corrupt("Stream node key entry is not the size of a stream ID")
    try:
        if deep:
            checked_listpack_entries(lp)
        return Node.sealed(int.from_bytes(key, "big"), lp)
    except ContainerError as e:
        raise _Corrupt(f"Stream listpack integrity check failed. ({e})") from None
    except NodeCorrupt as e:
        raise _Corrupt(str(e)) from None


def _read_ms(buf: bytes, p: int, n: int) -> tuple[int, int]:
    """rdbLoadMillisecondTime: 8 little-endian bytes."""
    if p + 8 > n:
        raise _Incomplete(p + 8)
    return _U64.unpack_from(buf, p)[0], p + 8


def _read_stream_node(buf: bytes, p: int, n: int, deep: bool = False) -> tuple[Node, int]:
    """One node of a stream: its master ID and listpack, checked (the decoder's element
    reader of a stream, whose nodes it reads as a _Partial)."""
    key, p = _rstr(buf, p, n)
    lp, p = _rstr(buf, p, n)
    return _stream_node(key, lp, deep), p


_read_stream_node_deep = partial(_read_stream_node, deep=True)
# A stream's nodes are the decoder's elements of it (then _read_stream_tail reads the rest)
_ELEMENT_READERS.update(dict.fromkeys(_STREAM_TYPES, _read_stream_node))
_DEEP_ELEMENT_READERS.update(dict.fromkeys(_STREAM_TYPES, _read_stream_node_deep))


def _read_stream_tail(t: int, nodes: list[Node], buf: bytes, p: int,
                      n: int) -> tuple[Stream, int]:
    """The rest of a stream after its ``nodes``: counters, IDs and consumer groups."""
    s = Stream()
    for node in nodes:
        if s.keys and node.master <= s.keys[-1]:
            raise _Corrupt("Listpack re-added with existing key")
        s.nodes.append(node)
        s.keys.append(node.master)
    s.length, p = _rlen(buf, p, n)
    ms, p = _rlen(buf, p, n)
    seq, p = _rlen(buf, p, n)
    s.last_id = (ms << 64) | seq
    if t >= RDB_TYPE_STREAM_LISTPACKS_2:
        ms, p = _rlen(buf, p, n)
        seq, p = _rlen(buf, p, n)
        s.first_id = (ms << 64) | seq
        ms, p = _rlen(buf, p, n)
        seq, p = _rlen(buf, p, n)
        s.max_deleted = (ms << 64) | seq
        s.entries_added, p = _rlen(buf, p, n)
    else:
        s.entries_added = s.length
        s.first_id = s.first_live() if s.length else 0
    if s.length != sum(node.live for node in s.nodes):
        raise _Corrupt("Stream length inconsistent with rax entries")
    ngroups, p = _rlen(buf, p, n)
    from_bytes = int.from_bytes
    u64 = _U64.unpack_from
    for _ in range(ngroups):
        name, p = _rstr(buf, p, n)
        ms, p = _rlen(buf, p, n)
        seq, p = _rlen(buf, p, n)
        last = (ms << 64) | seq
        if t >= RDB_TYPE_STREAM_LISTPACKS_2:
            er, p = _rlen(buf, p, n)
            entries_read = SCG_INVALID_ENTRIES_READ if er == MASK64 else er
        else:
            entries_read = s.estimate_distance(last)
        if name in s.groups:
            raise _Corrupt(f"Duplicated consumer group name {name!r}")
        g = s.groups[name] = Group(last, entries_read)
        npel, p = _rlen(buf, p, n)
        # An entry is 25 bytes at least (ID, delivery time, count): until that many are here,
        # the PEL is not read (a decoder fed in chunks would read it again at each one).
        if p + 25 * npel > n:
            raise _Incomplete(p + 25 * npel)
        pel = g.pel
        left = npel
        if _codec is not None:      # (what it leaves, the loop below reads or refuses)
            done, p = _codec.read_pel(buf, p, npel, Nack, pel)
            left -= done
        for _ in range(left):
            eid = from_bytes(buf[p:p + 16], "big")
            when = u64(buf, p + 16)[0]
            c = buf[p + 24]
            if c < 0x40:
                count = c
                p += 25
            else:
                count, p = _rlen(buf, p + 24, n)
            if eid in pel:
                raise _Corrupt("Duplicated global PEL entry loading stream consumer group")
            pel[eid] = Nack(when, count, None)
        pel.resort()   # (read_pel wrote the dict itself)
        ncons, p = _rlen(buf, p, n)
        for _ in range(ncons):
            cname, p = _rstr(buf, p, n)
            if cname in g.consumers:
                raise _Corrupt("Duplicate stream consumer detected.")
            seen, p = _read_ms(buf, p, n)
            cons = g.consumers[cname] = Consumer(cname, seen)
            if t >= RDB_TYPE_STREAM_LISTPACKS_3:
                _active, p = _read_ms(buf, p, n)     # 7.2+: not in 7.0's model
            npel, p = _rlen(buf, p, n)
            end = p + 16 * npel
            if end > n:
                raise _Incomplete(end)
            cpel = cons.pel
            if _codec is not None:
                p = _codec.read_consumer_pel(buf, p, npel, pel, cons, cpel)[1]
            for q in range(p, end, 16):
                eid = from_bytes(buf[q:q + 16], "big")
                nack = pel.get(eid)
                if nack is None:
                    raise _Corrupt("Consumer entry not found in group global PEL")
                nack.consumer = cons
                cpel[eid] = nack
            cpel.resort()
            p = end
        # Redis checks this only under sanitize-dump-payload (and without it, reading such a
        # group asserts); here always: a PEL entry without a consumer breaks XPENDING and XCLAIM.
        if any(nack.consumer is None for nack in g.pel.values()):
            raise _Corrupt("Stream CG PEL entry without consumer")
    if t >= RDB_TYPE_STREAM_LISTPACKS_4:
        _duration, p = _rlen(buf, p, n)
        _max_entries, p = _rlen(buf, p, n)
        producers, p = _rlen(buf, p, n)
        if producers:
            raise _unsupported(t, "streams with idempotent producers (IDMP) are not supported")
        _iids_added, p = _rlen(buf, p, n)
        _iids_duplicates, p = _rlen(buf, p, n)
    return s, p


# ---------------------------------------------------------------------------------- files


@dataclass
class LoadedRdb:
    data: list[KeyTable]
    expires: list[KeyTable]
    aux: dict[bytes, bytes] = field(default_factory=dict)
    version: int = 0
    keys_loaded: int = 0
    keys_expired: int = 0
    empty_keys_skipped: int = 0
    empty_keys: list[bytes] = field(default_factory=list)   # the first ten skipped
    functions_skipped: int = 0
    # the function libraries' codes, in the file's order (loaded by the caller)
    functions: list[bytes] = field(default_factory=list)
    module_aux_skipped: int = 0
    checksum_ok: bool | None = None
    bytes_read: int = 0
    type_counts: dict[int, int] = field(default_factory=dict)


def load_rdb_file(path: str, ndbs: int, *, now_ms: int | None = None,
                  chunk_size: int = 8 << 20, verify_checksum: bool = True,
                  deep: bool = False) -> LoadedRdb:
    """Load a whole RDB file into fresh KeyTables (nothing is returned unless the whole file,
    checksum included, is valid). With ``now_ms`` keys already expired are dropped, as a
    master does when it loads its own dump; without it every key is kept (as a replica).
    ``verify_checksum`` False: the CRC64 is not checked (DEBUG SET-SKIP-CHECKSUM-VALIDATION)."""
    return drive(load_rdb_file_steps(path, ndbs, now_ms=now_ms, chunk_size=chunk_size,
                                     verify_checksum=verify_checksum, deep=deep))


_T = TypeVar("_T")


def drive(steps: Generator[Any, None, _T]) -> _T:
    """Run a step generator (a load) to its end at once: its return value."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value   # type: ignore[no-any-return]


def load_rdb_file_steps(path: str, ndbs: int, *, now_ms: int | None = None,
                        chunk_size: int = 8 << 20, verify_checksum: bool = True,
                        deep: bool = False) -> Generator[tuple[int, int], None, LoadedRdb]:
    """:func:`load_rdb_file` a chunk at a time: yields (bytes read, keys read) after each
    chunk of ``chunk_size`` bytes (where the server serves its clients meanwhile, as Redis's
    loading-process-events-interval-bytes), returns the LoadedRdb."""
    data = [KeyTable() for _ in range(ndbs)]
    expires = [KeyTable(ageing=False) for _ in range(ndbs)]
    dec = RdbDecoder(databases=ndbs, verify_checksum=verify_checksum, deep=deep)
    result = LoadedRdb(data, expires)
    done = False
    with open(path, "rb") as f:
        while not done:
            chunk = f.read(chunk_size)
            dec.receive_data(chunk)
            for ev in dec.load_into(data, expires):
                t = type(ev)
                if t is Aux:
                    result.aux[ev.key] = ev.value  # type: ignore[attr-defined]
                elif t is FunctionSkipped:
                    result.functions_skipped += 1
                    result.functions.append(ev.library_code)  # type: ignore[attr-defined]
                elif t is ModuleAuxSkipped:
                    result.module_aux_skipped += 1
                elif t is End:
                    result.checksum_ok = ev.checksum_ok  # type: ignore[attr-defined]
                    done = True
            if not chunk and not done:  # pragma: no cover - load_into raises first
                raise RdbError(f"Unexpected end of RDB data at offset {dec.offset}")
            if not done:
                yield dec.offset, dec.keys_read
    result.version = dec.version
    result.bytes_read = dec.offset
    result.empty_keys_skipped = dec.empty_keys_skipped
    result.empty_keys = dec.empty_keys
    result.type_counts = dict(dec.type_counts)
    if now_ms is not None:
        for d, e in zip(data, expires, strict=True):
            dead = [k for k, when in e.items() if now_ms > when]
            for k in dead:
                del d[k]
                del e[k]
            result.keys_expired += len(dead)
    result.keys_loaded = sum(len(d) for d in data)
    return result
