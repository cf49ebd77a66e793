"""Listpacks (listpack.c): entry sizes as Redis counts them, the integer form lpAppend
recognises, the entry encodings and the reader.

A stream node is a listpack, kept as its bytes once full (stream.py), and
``stream-node-max-bytes`` is checked against its lpBytes, so the keyspace encodes each entry as
lpAppend writes it; the RDB encoder and decoder (pyrepl/rdb/containers.py, which re-exports the
reader and ``ContainerError``) build and read the same listpacks with these.

Layout: ``<u32 total-bytes><u16 count><entry>...<0xFF>``; an entry is
``<encoding+data><backlen>`` where backlen (1-5 bytes) is the size of encoding+data.
"""

from __future__ import annotations

import struct

_U16 = struct.Struct("<H")
_I16 = struct.Struct("<h")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_MAX_INT64 = (1 << 63) - 1
_MIN_INT64 = -(1 << 63)


def canonical_int(s: bytes) -> int | None:
    """The int64 value of ``s`` if it is the canonical decimal form Redis turns into an integer
    (string2ll / lpStringToInt64: no sign '+', no leading zeros, no spaces, "-0" excluded)."""
    if not s or len(s) > 20:
        return None
    c = s[0]
    if not (48 <= c <= 57 or c == 45):
        return None
    try:
        v = int(s)
    except ValueError:
        return None
    if _MIN_INT64 <= v <= _MAX_INT64 and b"%d" % v == s:
        return v
    return None


def lp_backlen_size(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def lp_int_size(v: int) -> int:
    """Bytes an integer entry takes in a listpack (encoding + backlen): stream nodes track
    their lpBytes with it."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -(1 << 23) <= v < (1 << 23):
        return 5
    if -(1 << 31) <= v < (1 << 31):
        return 6
    return 10


def lp_value_size(s: bytes) -> int:
    """Bytes a string entry takes in a listpack (lpAppend stores canonical integers as ints)."""
    n = len(s)
    if n <= 20 and n:
        v = canonical_int(s)
        if v is not None:
            return lp_int_size(v)
    if n < 64:
        size = 1 + n
    elif n < 4096:
        size = 2 + n
    else:
        size = 5 + n
    return size + lp_backlen_size(size)


class ContainerError(ValueError):
    """A listpack (or, in pyrepl.rdb.containers, another compact container) that is corrupt."""


def open_blob(blob: bytes, kind: str, header: int) -> tuple[int, int, int]:
    """A listpack's or ziplist's (count, offset of the first entry, offset of the 0xFF
    terminator), once the blob's length, its total-bytes field (u32 at 0) and its terminator
    are checked; the u16 count ends the ``header`` bytes."""
    n = len(blob)
    if n < header + 1:
        raise ContainerError(f"{kind} shorter than its header")
    total = _U32.unpack_from(blob, 0)[0]
    if total != n:
        raise ContainerError(f"{kind} header says {total} bytes, blob has {n}")
    if blob[n - 1] != 0xFF:
        raise ContainerError(f"{kind} without terminator")
    return _U16.unpack_from(blob, header - 2)[0], header, n - 1


def check_count(kind: str, count: int, out: list[bytes | int]) -> list[bytes | int]:
    """``out``, when the header's count agrees with it (0xFFFF: too many to count)."""
    if count != 0xFFFF and count != len(out):
        raise ContainerError(f"{kind} header says {count} entries, found {len(out)}")
    return out


def listpack_entries(lp: bytes, starts: list[int] | None = None) -> list[bytes | int]:
    """The entries of a listpack in order (strings as bytes, integers as int); with ``starts``,
    each entry's offset in ``lp`` is appended to it too (stream nodes patch their flags)."""
    count, p, last = open_blob(lp, "listpack", 6)
    out: list[bytes | int] = []
    append = out.append
    while p < last:
        if starts is not None:
            starts.append(p)
        b = lp[p]
        if b < 0x80:  # 7 bit unsigned int
            append(b)
            size = 1
        elif b < 0xC0:  # 6 bit string length
            size = 1 + (b & 0x3F)
            append(lp[p + 1 : p + size])
        elif b < 0xE0:  # 13 bit signed int
            v = ((b & 0x1F) << 8) | lp[p + 1]
            append(v - 8192 if v >= 4096 else v)
            size = 2
        elif b < 0xF0:  # 12 bit string length
            size = 2 + (((b & 0x0F) << 8) | lp[p + 1])
            append(lp[p + 2 : p + size])
        elif b == 0xF0:  # 32 bit string length
            size = 5 + _U32.unpack_from(lp, p + 1)[0]
            append(lp[p + 5 : p + size])
        elif b == 0xF1:
            append(_I16.unpack_from(lp, p + 1)[0])
            size = 3
        elif b == 0xF2:
            v = lp[p + 1] | (lp[p + 2] << 8) | (lp[p + 3] << 16)
            append(v - (1 << 24) if v >= (1 << 23) else v)
            size = 4
        elif b == 0xF3:
            append(_I32.unpack_from(lp, p + 1)[0])
            size = 5
        elif b == 0xF4:
            append(_I64.unpack_from(lp, p + 1)[0])
            size = 9
        else:
            raise ContainerError(f"invalid listpack entry encoding 0x{b:02x}")
        if size <= 127:
            p += size + 1
        elif size < 16383:
            p += size + 2
        elif size < 2097151:
            p += size + 3
        elif size < 268435455:
            p += size + 4
        else:
            p += size + 5
        if p > last:
            raise ContainerError("listpack entry runs past the end of the blob")
    return check_count("listpack", count, out)


def lp_backlen(size: int) -> bytes:
    if size <= 127:
        return bytes((size,))
    if size < 16383:
        return bytes((size >> 7, (size & 127) | 128))
    if size < 2097151:
        return bytes((size >> 14, ((size >> 7) & 127) | 128, (size & 127) | 128))
    if size < 268435455:
        return bytes(
            (size >> 21, ((size >> 14) & 127) | 128, ((size >> 7) & 127) | 128, (size & 127) | 128)
        )
    return bytes(
        (
            size >> 28,
            ((size >> 21) & 127) | 128,
            ((size >> 14) & 127) | 128,
            ((size >> 7) & 127) | 128,
            (size & 127) | 128,
        )
    )


def lp_encode_int(v: int) -> bytes:
    if 0 <= v <= 127:
        return bytes((v,))
    if -4096 <= v <= 4095:
        u = v & 0x1FFF
        return bytes((0xC0 | (u >> 8), u & 0xFF))
    if -32768 <= v <= 32767:
        return b"\xf1" + _I16.pack(v)
    if -(1 << 23) <= v < (1 << 23):
        u = v & 0xFFFFFF
        return bytes((0xF2, u & 0xFF, (u >> 8) & 0xFF, u >> 16))
    if -(1 << 31) <= v < (1 << 31):
        return b"\xf3" + _I32.pack(v)
    return b"\xf4" + _I64.pack(v)


def lp_encode_str(s: bytes) -> bytes:
    n = len(s)
    if n < 64:
        return bytes((0x80 | n,)) + s
    if n < 4096:
        return bytes((0xE0 | (n >> 8), n & 0xFF)) + s
    return b"\xf0" + _U32.pack(n) + s


_SMALL = [bytes((v, 1)) for v in range(128)]     # 7-bit unsigned ints with their backlen
_STR_HEAD = [bytes((0x80 | n,)) for n in range(64)]     # 6-bit string lengths
_BACKLEN = [bytes((n,)) for n in range(128)]           # 1-byte backlens


def lp_int_entry(v: int) -> bytes:
    """An integer entry as lpAppendInteger writes it: encoding, data and backlen."""
    if 0 <= v <= 127:
        return _SMALL[v]
    if -4096 <= v <= 4095:
        u = v & 0x1FFF
        return bytes((0xC0 | (u >> 8), u & 0xFF, 2))
    enc = lp_encode_int(v)
    return enc + _BACKLEN[len(enc)]


def lp_str_entry(s: bytes) -> bytes:
    """A string entry as lpAppend writes it (canonical integers as integer entries)."""
    n = len(s)
    if n <= 20 and n and (48 <= s[0] <= 57 or s[0] == 45):
        v = canonical_int(s)
        if v is not None:
            return lp_int_entry(v)
    if n < 64:
        return _STR_HEAD[n] + s + _BACKLEN[n + 1]
    enc = lp_encode_str(s)
    return enc + lp_backlen(len(enc))
