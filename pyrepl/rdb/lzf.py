"""LZF (liblzf, as bundled in Redis) decompression, and a simple compressor.

Theory of operation: an LZF stream is a sequence of instructions. A control byte below 32 starts
a literal run of ``ctrl + 1`` bytes copied verbatim. Otherwise ``ctrl >> 5`` is a length (7 means
"add the next byte") and the low 5 bits with the following byte form a distance: copy
``length + 2`` bytes starting ``distance + 1`` bytes back in the output. Copies may overlap their
own output (distance < length repeats a pattern), which we expand by repeating the pattern rather
than copying byte by byte. Redis stores the expected decompressed length next to the data and
refuses a stream whose output length differs; so do we.

``compress`` is a greedy compressor producing liblzf streams (the algorithm is in _codec.c's
header); ``rdb_string`` is rdbSaveLzfStringObject, what the RDB writer uses with
``rdbcompression yes`` (Redis's default) for every string over 20 bytes. Each is pyrepl/rdb/
_codec.c (C) over its Python reference (``*_reference``; PYREPL_PURE=1 runs those), held equal by
tests/unit/test_codec.py; Redis itself loads the writer's files in the interop tests.
"""

from __future__ import annotations

from pyrepl import native


class LzfError(ValueError):
    pass


def decompress_reference(src: bytes, expected_len: int) -> bytes:
    """The reference of _codec.decompress: ``src`` decompressed; LzfError unless it yields exactly
    ``expected_len`` bytes."""
    n = len(src)
    out = bytearray()
    ip = 0
    op = 0  # len(out)
    try:
        while ip < n:
            ctrl = src[ip]
            ip += 1
            if ctrl < 32:
                end = ip + ctrl + 1
                if end > n:
                    raise LzfError("LZF literal run past the end of the input")
                out += src[ip:end]
                op += ctrl + 1
                ip = end
                continue
            length = ctrl >> 5
            if length == 7:
                length += src[ip]
                ip += 1
            dist = ((ctrl & 0x1F) << 8) + src[ip] + 1
            ip += 1
            length += 2
            start = op - dist
            if start < 0:
                raise LzfError("LZF back reference before the start of the output")
            if dist >= length:
                out += out[start : start + length]
            else:
                pattern = out[start:]
                reps, rest = divmod(length, dist)
                out += pattern * reps + pattern[:rest]
            op += length
            # Each instruction adds at most 264 bytes, so checking here bounds the memory a
            # hostile stream can make us allocate to one instruction past the announced size.
            if op > expected_len:
                raise LzfError("LZF output longer than the announced length")
    except IndexError:
        raise LzfError("LZF back reference truncated") from None
    if op != expected_len:
        raise LzfError(f"LZF output is {op} bytes, expected {expected_len}")
    return bytes(out)


_MAX_LIT = 32
_MAX_OFF = 1 << 13
_MAX_REF = (1 << 8) + (1 << 3)  # 264
_HLOG = 14


def _hash3(data: bytes, i: int) -> int:
    """The 14-bit hash of the 3 bytes at ``i`` (Fibonacci hashing, as _codec.c)."""
    v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2]
    return ((v * 2654435761) & 0xFFFFFFFF) >> (32 - _HLOG)


def compress_reference(data: bytes, limit: int | None = None) -> bytes | None:
    """The reference of _codec.compress: a greedy liblzf-format stream (the C file's header
    has the algorithm), or None when it is longer than ``limit``."""
    n = len(data)
    out = bytearray()
    table: dict[int, int] = {}
    lit = 0
    i = 0

    def flush_literals(end: int) -> None:
        s = lit
        while s < end:
            run = min(_MAX_LIT, end - s)
            out.append(run - 1)
            out.extend(data[s : s + run])
            s += run

    while i + 2 < n:
        h = _hash3(data, i)
        ref = table.get(h)
        table[h] = i
        if ref is not None and i - ref - 1 < _MAX_OFF and data[ref:ref + 3] == data[i:i + 3]:
            maxlen = min(_MAX_REF, n - i)
            length = 3
            while length < maxlen and data[ref + length] == data[i + length]:
                length += 1
            flush_literals(i)
            off = i - ref - 1
            lcode = length - 2
            if lcode < 7:
                out.append((lcode << 5) | (off >> 8))
            else:
                out.append((7 << 5) | (off >> 8))
                out.append(lcode - 7)
            out.append(off & 0xFF)
            i += length
            for q in (i - 2, i - 1):
                if q + 2 < n:
                    table[_hash3(data, q)] = q
            lit = i
        else:
            i += 1
    flush_literals(n)
    if limit is not None and len(out) > limit:
        return None
    return bytes(out)


def rdb_string_reference(s: bytes) -> bytes | None:
    """rdbSaveLzfStringObject: ``s`` as an LZF-compressed RDB string (0xC3, the stream's
    length, the string's, the stream), or None when Redis writes it raw: 20 bytes or less, or
    a stream not 4 bytes shorter than the string."""
    from pyrepl.rdb.encoder import encode_len  # (the encoder imports this module)

    n = len(s)
    if n <= 20:
        return None
    c = compress_reference(s, n - 4)
    if c is None:
        return None
    return b"\xc3" + encode_len(len(c)) + encode_len(n) + c


_codec = native.load("pyrepl.rdb._codec")


def compress(data: bytes) -> bytes:
    """``data``'s LZF stream: _codec.compress, or the reference as plain Python."""
    out = (_codec.compress(data, len(data) + len(data) // 32 + 2) if _codec is not None
           else compress_reference(data))
    assert out is not None      # (no limit: room for the worst case)
    return out


def decompress(src: bytes, expected_len: int) -> bytes:
    """Decompress ``src``; raise LzfError unless it yields exactly ``expected_len`` bytes.
    _codec.decompress does it; where it answers None the reference says what is wrong."""
    if _codec is not None:
        out = _codec.decompress(src, expected_len)
        if out is not None:
            return out
    return decompress_reference(src, expected_len)


rdb_string = _codec.rdb_string if _codec is not None else rdb_string_reference
