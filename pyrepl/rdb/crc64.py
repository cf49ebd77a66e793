"""CRC-64/Jones as used by Redis for RDB checksums (crc64.c).

Theory of operation: the parameters are width 64, reflected input and output, polynomial
0xad93d23594c935a9, init 0, xorout 0 (check value for b"123456789" is 0xe9c6d914c4b8d9ca).
Because init and xorout are zero, the CRC of a concatenation is obtained by feeding the previous
CRC as the starting register: ``crc64(b, crc64(a)) == crc64(a + b)``; the encoder and the
decoder rely on that to checksum a stream chunk by chunk.

The fast path is the ``anycrc`` package (a C core using carry-less multiplication: ~15 GB/s, so a
36 MB dump costs a few milliseconds). ``crc64_reference`` is a plain table-driven byte loop kept as
the specification that tests compare against; it is also the fallback when anycrc is missing
(correct but ~1000x slower).
"""

from __future__ import annotations

from collections.abc import Callable

POLY = 0xAD93D23594C935A9
# Bit-reversed polynomial for the reflected (LSB-first) shift register.
_POLY_REFLECTED = int(f"{POLY:064b}"[::-1], 2)


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY_REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def crc64_reference(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Pure-Python CRC-64/Jones of ``data`` continuing from ``crc``."""
    table = _TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _load_fast() -> Callable[[bytes | bytearray | memoryview, int], int] | None:
    try:
        import anycrc
    except ImportError:  # pragma: no cover - exercised only without the dependency
        return None
    model = anycrc.CRC(
        width=64, poly=POLY, init=0, refin=True, refout=True, xorout=0
    )
    calc = model.calc

    def crc64_fast(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
        if not data:
            return crc
        return calc(data, crc)

    return crc64_fast


_fast = _load_fast()
HAVE_FAST_CRC64 = _fast is not None
crc64: Callable[..., int] = _fast if _fast is not None else crc64_reference
