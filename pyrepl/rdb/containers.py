"""Readers and builders for Redis's compact containers: listpack, ziplist, intset, zipmap.

Theory of operation: Redis stores small collections as one flat byte blob and writes that blob
verbatim into the RDB as a string. Each reader here walks one blob front to back and returns the
entries in order as ``bytes`` (string entries) or ``int`` (integer-encoded entries); callers turn
them into Python values. Every length is bounds-checked against the blob, so a corrupt blob raises
``ContainerError`` (the decoder adds the RDB offset) instead of returning garbage. The layouts:

* listpack (listpack.c): ``<u32 total-bytes><u16 count><entry>...<0xFF>``; an entry is
  ``<encoding+data><backlen>`` where backlen (1-5 bytes) is the size of encoding+data.
* ziplist (ziplist.c): ``<u32 zlbytes><u32 zltail><u16 zllen><entry>...<0xFF>``; an entry is
  ``<prevlen 1|5 bytes><encoding><data>``.
* intset (intset.c): ``<u32 width 2|4|8><u32 count><count signed little-endian ints>``.
* zipmap (zipmap.c, Redis <= 2.4 hashes): ``<u8 count><len>key<len><free>value<free bytes>...
  <0xFF>`` where len is one byte, or 254 followed by a u32.

The builders produce the same layouts (as Redis would, including turning strings that are
canonical integers into integer entries when asked); tests use them to make RDB files with
encodings that our Redis 7.0 cannot produce any more, and they are cross-checked against files
written by real Redis.
"""

from __future__ import annotations

import struct

from pyrepl.keyspace.listpack import (  # (shared with the keyspace's stream nodes)
    ContainerError,
    canonical_int,
    listpack_entries,  # noqa: F401 - re-exported (the decoder reads listpacks from here)
)
from pyrepl.keyspace.listpack import check_count as _check_count
from pyrepl.keyspace.listpack import lp_backlen as _lp_backlen
from pyrepl.keyspace.listpack import lp_encode_int as _lp_encode_int
from pyrepl.keyspace.listpack import lp_encode_str as _lp_encode_str
from pyrepl.keyspace.listpack import open_blob as _open_blob

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_MAX_INT64 = (1 << 63) - 1
_MIN_INT64 = -(1 << 63)


# ---------------------------------------------------------------------------------- listpack
# (the reader and the entry encoders live in pyrepl.keyspace.listpack: stream nodes use them)


def build_listpack(entries: list[bytes | int], *, int_strings: bool = True) -> bytes:
    """A listpack holding ``entries``; with ``int_strings`` canonical integer strings are stored
    as integers, as lpAppend does."""
    body = bytearray()
    for e in entries:
        if isinstance(e, int):
            enc = _lp_encode_int(e)
        else:
            v = canonical_int(e) if int_strings else None
            enc = _lp_encode_int(v) if v is not None else _lp_encode_str(e)
        body += enc
        body += _lp_backlen(len(enc))
    count = len(entries) if len(entries) < 0xFFFF else 0xFFFF
    return _U32.pack(len(body) + 7) + _U16.pack(count) + bytes(body) + b"\xff"


# ---------------------------------------------------------------------------------- ziplist


def checked_listpack_entries(lp: bytes) -> list[bytes | int]:
    """listpack_entries with lpValidateIntegrity's deep check of every entry's back-length
    (what a corrupt RDB or RESTORE payload may get wrong while the forward walk still works)."""
    starts: list[int] = []
    out = listpack_entries(lp, starts)
    ends = starts[1:] + [len(lp) - 1] if starts else []
    for start, end in zip(starts, ends, strict=True):
        val = shift = 0
        q = end - 1
        while True:                # lpDecodeBacklen: 7 bits a byte, read backwards
            b = lp[q]
            val |= (b & 127) << shift
            if not b & 128:
                break
            shift += 7
            q -= 1
            if q < start:
                raise ContainerError("listpack entry back-length runs past the entry")
        if val + len(_lp_backlen(val)) != end - start:
            raise ContainerError("listpack entry back-length is not the entry's size")
    return out


def ziplist_entries(zl: bytes) -> list[bytes | int]:
    count, p, last = _open_blob(zl, "ziplist", 10)
    out: list[bytes | int] = []
    append = out.append
    prev_size = 0           # ziplistValidateIntegrity: each entry's prevlen is the last's size
    entry = -1
    while p < last:
        if entry >= 0:
            prev_size = p - entry
        entry = p
        if zl[p] < 254:
            prevlen = zl[p]
            p += 1
        else:
            if p + 5 > last:
                raise ContainerError("ziplist entry runs past the end of the blob")
            prevlen = int.from_bytes(zl[p + 1:p + 5], "little")
            p += 5
        if prevlen != prev_size:
            raise ContainerError("ziplist entry's prevlen is not the previous entry's size")
        if p >= last:
            raise ContainerError("ziplist entry runs past the end of the blob")
        b = zl[p]
        top = b >> 6
        if top == 0:
            start = p + 1
            end = start + (b & 0x3F)
        elif top == 1:
            start = p + 2
            end = start + (((b & 0x3F) << 8) | zl[p + 1])
        elif top == 2:
            if b != 0x80:
                raise ContainerError(f"invalid ziplist string encoding 0x{b:02x}")
            start = p + 5
            end = start + int.from_bytes(zl[p + 1 : p + 5], "big")
        else:
            if b == 0xC0:
                append(_I16.unpack_from(zl, p + 1)[0])
                end = p + 3
            elif b == 0xD0:
                append(_I32.unpack_from(zl, p + 1)[0])
                end = p + 5
            elif b == 0xE0:
                append(_I64.unpack_from(zl, p + 1)[0])
                end = p + 9
            elif b == 0xF0:
                append(int.from_bytes(zl[p + 1 : p + 4], "little", signed=True))
                end = p + 4
            elif b == 0xFE:
                append(int.from_bytes(zl[p + 1 : p + 2], "little", signed=True))
                end = p + 2
            elif 0xF1 <= b <= 0xFD:
                append((b & 0x0F) - 1)
                end = p + 1
            else:
                raise ContainerError(f"invalid ziplist entry encoding 0x{b:02x}")
            if end > last:
                raise ContainerError("ziplist entry runs past the end of the blob")
            p = end
            continue
        if end > last:
            raise ContainerError("ziplist entry runs past the end of the blob")
        append(zl[start:end])
        p = end
    if entry >= 0 and int.from_bytes(zl[4:8], "little") != entry:
        raise ContainerError("ziplist tail offset is not the last entry's")
    return _check_count("ziplist", count, out)


def _zl_encode(e: bytes | int) -> bytes:
    """Encoding byte(s) + data for one ziplist entry (without prevlen)."""
    if isinstance(e, int):
        v: int | None = e
    else:
        v = canonical_int(e)
    if v is None:
        assert isinstance(e, bytes)
        n = len(e)
        if n < 64:
            return bytes((n,)) + e
        if n < 16384:
            return bytes((0x40 | (n >> 8), n & 0xFF)) + e
        return b"\x80" + n.to_bytes(4, "big") + e
    if 0 <= v <= 12:
        return bytes((0xF1 + v,))
    if -128 <= v <= 127:
        return b"\xfe" + v.to_bytes(1, "little", signed=True)
    if -32768 <= v <= 32767:
        return b"\xc0" + _I16.pack(v)
    if -(1 << 23) <= v < (1 << 23):
        return b"\xf0" + v.to_bytes(3, "little", signed=True)
    if -(1 << 31) <= v < (1 << 31):
        return b"\xd0" + _I32.pack(v)
    return b"\xe0" + _I64.pack(v)


def build_ziplist(entries: list[bytes | int]) -> bytes:
    body = bytearray()
    prevlen = 0
    tail = 10
    for e in entries:
        tail = 10 + len(body)
        pl = bytes((prevlen,)) if prevlen < 254 else b"\xfe" + _U32.pack(prevlen)
        entry = pl + _zl_encode(e)
        body += entry
        prevlen = len(entry)
    count = len(entries) if len(entries) < 0xFFFF else 0xFFFF
    return _U32.pack(len(body) + 11) + _U32.pack(tail) + _U16.pack(count) + bytes(body) + b"\xff"


# ---------------------------------------------------------------------------------- intset

_INTSET_FMT = {2: "h", 4: "i", 8: "q"}


def intset_entries(blob: bytes) -> list[int]:
    if len(blob) < 8:
        raise ContainerError("intset shorter than its header")
    width, count = struct.unpack_from("<II", blob, 0)
    fmt = _INTSET_FMT.get(width)
    if fmt is None:
        raise ContainerError(f"invalid intset encoding {width}")
    if len(blob) != 8 + width * count:
        raise ContainerError(f"intset of {count} x {width} bytes has {len(blob) - 8} data bytes")
    return list(struct.unpack_from(f"<{count}{fmt}", blob, 8))


def build_intset(values: list[int]) -> bytes:
    vals = sorted(set(values))
    width = 2
    for v in vals:
        if not -(1 << 15) <= v < (1 << 15):
            width = 4 if -(1 << 31) <= v < (1 << 31) and width < 8 else 8
    return struct.pack(f"<II{len(vals)}{_INTSET_FMT[width]}", width, len(vals), *vals)


# ---------------------------------------------------------------------------------- zipmap


def zipmap_pairs(zm: bytes) -> list[tuple[bytes, bytes]]:
    n = len(zm)
    if n < 2:
        raise ContainerError("zipmap shorter than its header")
    out: list[tuple[bytes, bytes]] = []
    p = 1

    def read_len(p: int) -> tuple[int, int]:
        if p >= n:
            raise ContainerError("zipmap runs past the end of the blob")
        b = zm[p]
        if b < 254:
            return b, p + 1
        if b == 254:
            if p + 5 > n:
                raise ContainerError("zipmap runs past the end of the blob")
            return _U32.unpack_from(zm, p + 1)[0], p + 5
        return -1, p + 1

    while True:
        klen, p = read_len(p)
        if klen < 0:
            break
        key = zm[p : p + klen]
        p += klen
        vlen, p = read_len(p)
        if vlen < 0 or p >= n:
            raise ContainerError("zipmap key without a value")
        free = zm[p]
        p += 1
        value = zm[p : p + vlen]
        p += vlen + free
        if p > n:
            raise ContainerError("zipmap runs past the end of the blob")
        out.append((key, value))
    if p != n:
        raise ContainerError("zipmap has bytes after its terminator")
    return out


def build_zipmap(pairs: list[tuple[bytes, bytes]], free: int = 0) -> bytes:
    def enc_len(n: int) -> bytes:
        return bytes((n,)) if n < 254 else b"\xfe" + _U32.pack(n)

    body = bytearray((min(len(pairs), 254),))
    for k, v in pairs:
        body += enc_len(len(k)) + k + enc_len(len(v)) + bytes((free,)) + v + b"\x00" * free
    body.append(0xFF)
    return bytes(body)
