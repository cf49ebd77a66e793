"""Lua 5.1 binary chunks without their debug information (what ``luac -s`` writes), so the
sandbox's own code costs the scripts' Lua state only its instructions and constants.

``strip(dump)`` takes what ``string.dump`` wrote (ldump.c's format: the 12-byte header, then
the main function with its nested ones) and returns the same chunk with every function's line
info, local variable names and upvalue names dropped; the main function keeps its source name
(the sandbox tells its own frames by it). Errors raised in stripped code have no line number:
the sandbox reports errors at the script's lines anyway.
"""

from __future__ import annotations

import struct

HEADER = b"\x1bLua\x51\x00\x01\x04\x08\x04\x08\x00"   # little endian, x86-64's sizes


class DumpError(ValueError):
    pass


def strip(dump: bytes) -> bytes:
    if dump[:12] != HEADER:
        raise DumpError("not a Lua 5.1 chunk of this platform's format")
    out = bytearray(HEADER)
    end = _function(dump, 12, out, keep_source=True)
    if end != len(dump):
        raise DumpError("trailing bytes after the main function")
    return bytes(out)


def _int(b: bytes, p: int) -> tuple[int, int]:
    return struct.unpack_from("<i", b, p)[0], p + 4


def _string(b: bytes, p: int) -> tuple[bytes, int]:
    n = struct.unpack_from("<Q", b, p)[0]
    p += 8
    return b[p:p + n], p + n


def _function(b: bytes, p: int, out: bytearray, keep_source: bool) -> int:
    source, p = _string(b, p)
    out += struct.pack("<Q", len(source)) + source if keep_source else struct.pack("<Q", 0)
    out += b[p:p + 12]                 # linedefined, lastlinedefined, nups, params, vararg,
    p += 12                            # maxstacksize
    n, q = _int(b, p)                  # code
    end = q + 4 * n
    out += b[p:end]
    p = end
    n, p = _int(b, p)                  # constants
    out += struct.pack("<i", n)
    for _ in range(n):
        t = b[p]
        start = p
        p += 1
        if t == 1:        # boolean
            p += 1
        elif t == 3:      # number
            p += 8
        elif t == 4:      # string
            _, p = _string(b, p)
        elif t != 0:      # (0: nil)
            raise DumpError(f"unknown constant type {t}")
        out += b[start:p]
    n, p = _int(b, p)                  # nested functions (their source: the parent's)
    out += struct.pack("<i", n)
    for _ in range(n):
        p = _function(b, p, out, keep_source=False)
    n, p = _int(b, p)                  # debug: line info
    p += 4 * n
    n, p = _int(b, p)                  # local variables
    for _ in range(n):
        _, p = _string(b, p)
        p += 8
    n, p = _int(b, p)                  # upvalue names
    for _ in range(n):
        _, p = _string(b, p)
    out += struct.pack("<iii", 0, 0, 0)
    return p
