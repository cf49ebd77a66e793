"""LZF (liblzf, as bundled in Redis) decompression, and a simple compressor.

Theory of operation: an LZF stream is a sequence of instructions. A control byte below 32 starts
a literal run of ``ctrl + 1`` bytes copied verbatim. Otherwise ``ctrl >> 5`` is a length (7 means
"add the next byte") and the low 5 bits with the following byte form a distance: copy
``length + 2`` bytes starting ``distance + 1`` bytes back in the output. Copies may overlap their
own output (distance < length repeats a pattern), which we expand by repeating the pattern rather
than copying byte by byte. Redis stores the expected decompressed length next to the data and
refuses a stream whose output length differs; so do we.

``compress`` is a straightforward greedy compressor producing valid liblzf streams. The RDB
writer does not compress (pure Python compression would cost more than it saves); tests use it
to build LZF-encoded strings and Redis itself validates its output in the interop tests.
"""

from __future__ import annotations


class LzfError(ValueError):
    pass


def decompress(src: bytes, expected_len: int) -> bytes:
    """Decompress ``src``; raise LzfError unless it yields exactly ``expected_len`` bytes."""
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


def compress(data: bytes) -> bytes:
    """Compress ``data`` into a liblzf-compatible stream (greedy, 3-byte hash of positions)."""
    n = len(data)
    out = bytearray()
    lit_start = 0
    table: dict[bytes, int] = {}
    i = 0

    def flush_literals(end: int) -> None:
        s = lit_start
        while s < end:
            run = min(_MAX_LIT, end - s)
            out.append(run - 1)
            out.extend(data[s : s + run])
            s += run

    while i + 2 < n:
        key = data[i : i + 3]
        ref = table.get(key)
        table[key] = i
        if ref is not None and i - ref - 1 < _MAX_OFF:
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
            for j in range(i + 1, min(i + length, n - 2)):
                table[data[j : j + 3]] = j
            i += length
            lit_start = i
        else:
            i += 1
    flush_literals(n)
    return bytes(out)
