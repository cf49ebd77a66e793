"""The Lua libraries Redis 7.0.15 loads: bit, cjson, cmsgpack and struct, as Python callables.

Theory of operation: each library is a table of Python functions handed to the sandbox, which
wraps every function so that it answers ``(True, results...)`` or ``(False, message)`` and
turns the second into a Lua error raised from the caller's line, as the C libraries' luaL_error
does. The functions walk Lua tables with ``lua_next`` order (lupa's ``items()``), so objects and
maps come out in the order Redis's C code produces them. Numbers follow the C code: LuaBitOp's
2^52+2^51 rounding trick, cjson's ``%.14g``, cmsgpack's int/float32/float64 choice and its
nesting limit of 16, struct's formats of lua_struct.c. Configuration set by a script
(``cjson.encode_max_depth`` ...) lives in the library object and so lasts until SCRIPT FLUSH
builds a new Lua state, as in Redis.
"""

from __future__ import annotations

import math
import struct as _st
from typing import Any

import lupa.lua51 as lua51

# -- helpers ----------------------------------------------------------------------------------


def lua_tonumber(v: Any) -> float | None:
    """lua_tonumber: numbers, and strings that read as one (decimal or 0x hex)."""
    t = type(v)
    if t is int or t is float:
        return float(v)
    if t is bytes:
        s = v.strip(b" \t\n\r\f\v")
        if not s or b"_" in s:
            return None
        try:
            if s[:2].lower() == b"0x":
                return float(int(s[2:], 16))
            return float(s)
        except ValueError:
            return None
    return None


def lua_typename(v: Any, given: bool = True) -> str:
    """lua_typename of a value handed over by lupa ("no value" for a missing argument)."""
    if not given:
        return "no value"
    if v is None:
        return "nil"
    t = type(v)
    if t is bytes:
        return "string"
    if t is int or t is float:
        return "number"
    if t is bool:
        return "boolean"
    return lua51.lua_type(v) or "userdata"


_typename = lua_typename


def _is_table(v: Any) -> bool:
    return type(v) is _LUA_TABLE


def _g14(d: float) -> bytes:
    """%.14g (Lua's tostring and cjson's default precision)."""
    if d != d:
        return b"nan" if math.copysign(1, d) > 0 else b"-nan"
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    return b"%.14g" % d


# -- bit (LuaBitOp) ---------------------------------------------------------------------------

def _barg(name: str, args: tuple[Any, ...], i: int) -> int:
    v = args[i] if i < len(args) else None
    n = lua_tonumber(v)
    d = (n if n is not None else 0.0) + 6755399441055744.0
    b = _st.unpack("<Q", _st.pack("<d", d))[0] & 0xFFFFFFFF
    if b == 0 and n is None:
        raise _LibError(f"bad argument #{i + 1} to '{name}' (number expected, got "
                        f"{_typename(v, i < len(args))})")
    return b


def _bret(b: int) -> int:
    b &= 0xFFFFFFFF
    return b - (1 << 32) if b & 0x80000000 else b


class LibError(Exception):
    """A library function's error (luaL_error): raised through Lua as its message."""


_LibError = LibError


def _guard(fn: Any) -> Any:
    return fn


def _bit_funcs() -> dict[bytes, Any]:
    def op(name: str, f: Any) -> Any:
        def g(*a: Any) -> int:
            b = _barg(name, a, 0)
            for i in range(1, len(a)):
                b = f(b, _barg(name, a, i))
            return _bret(b)
        return g

    def sh(name: str, f: Any) -> Any:
        def g(*a: Any) -> int:
            b = _barg(name, a, 0)
            n = _barg(name, a, 1) & 31
            return _bret(f(b, n))
        return g

    def tohex(*a: Any) -> bytes:
        b = _barg("tohex", a, 0)
        n = 8 if len(a) < 2 else _bret(_barg("tohex", a, 1))
        digits = "0123456789abcdef"
        if n == -(1 << 31):
            n += 1
        if n < 0:
            n, digits = -n, digits.upper()
        n = min(n, 8)
        out = []
        for _ in range(n):
            out.append(digits[b & 15])
            b >>= 4
        return "".join(reversed(out)).encode()

    def bswap(*a: Any) -> int:
        b = _barg("bswap", a, 0)
        return _bret(int.from_bytes(b.to_bytes(4, "little"), "big"))

    funcs = {
        "tobit": lambda *a: _bret(_barg("tobit", a, 0)),
        "bnot": lambda *a: _bret(~_barg("bnot", a, 0)),
        "band": op("band", lambda x, y: x & y),
        "bor": op("bor", lambda x, y: x | y),
        "bxor": op("bxor", lambda x, y: x ^ y),
        "lshift": sh("lshift", lambda b, n: b << n),
        "rshift": sh("rshift", lambda b, n: b >> n),
        "arshift": sh("arshift", lambda b, n: _bret(b) >> n),
        "rol": sh("rol", lambda b, n: (b << n) | (b >> (32 - n))),
        "ror": sh("ror", lambda b, n: (b << (32 - n)) | (b >> n)),
        "bswap": bswap,
        "tohex": tohex,
    }
    return {k.encode(): _guard(f) for k, f in funcs.items()}


# -- cjson ------------------------------------------------------------------------------------

_ESC = {0x22: b'\\"', 0x5C: b"\\\\", 0x2F: b"\\/", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n",
        0x0D: b"\\r", 0x09: b"\\t"}
_ESCAPE_TABLE = [(_ESC.get(i) or (b"\\u%04x" % i if i < 0x20 or i == 0x7F else bytes([i])))
                 for i in range(256)]


class CJson:
    def __init__(self, lua: Any) -> None:
        self.lua = lua
        self.null: Any = None   # cjson.null (set by the sandbox)
        self.encode_max_depth = 1000
        self.decode_max_depth = 1000
        self.encode_invalid_numbers = 0
        self.decode_invalid_numbers = 1
        self.sparse = [0, 2, 10]
        self.precision = 14
        self.keep_buffer = 1

    # encode
    def _string(self, s: bytes, out: list[bytes]) -> None:
        out.append(b'"' + b"".join([_ESCAPE_TABLE[c] for c in s]) + b'"')

    def _number(self, d: float, out: list[bytes]) -> None:
        if math.isinf(d) or d != d:
            if not self.encode_invalid_numbers:
                raise _LibError("Cannot serialise number: must not be NaN or Inf")
            if self.encode_invalid_numbers == 2:
                out.append(b"null")
                return
        out.append(b"%.*g" % (self.precision, d) if math.isfinite(d) else _g14(d))

    def _value(self, v: Any, depth: int, out: list[bytes]) -> None:
        t = type(v)
        if t is bytes:
            self._string(v, out)
        elif t is int or t is float:
            self._number(float(v), out)
        elif t is bool:
            out.append(b"true" if v else b"false")
        elif v is None:
            out.append(b"null")
        elif _is_table(v):
            depth += 1
            if depth > self.encode_max_depth:
                raise _LibError(f"Cannot serialise, excessive nesting ({depth})")
            items = list(v.items())
            n = self._array_length(items)
            if n > 0:
                d = dict(items)
                out.append(b"[")
                for i in range(1, n + 1):
                    if i > 1:
                        out.append(b",")
                    self._value(d.get(i), depth, out)
                out.append(b"]")
            else:
                out.append(b"{")
                first = True
                for k, x in items:
                    if not first:
                        out.append(b",")
                    first = False
                    if type(k) is bytes:
                        self._string(k, out)
                    elif type(k) in (int, float):
                        out.append(b'"')
                        self._number(float(k), out)
                        out.append(b'"')
                    else:
                        raise _LibError("Cannot serialise table: table key must be a number "
                                        "or string")
                    out.append(b":")
                    self._value(x, depth, out)
                out.append(b"}")
        elif lua51.lua_type(v) == "userdata":   # cjson.null (Redis's NULL lightuserdata)
            out.append(b"null")
        else:
            raise _LibError(f"Cannot serialise {_typename(v)}: type not supported")

    def _array_length(self, items: list[tuple[Any, Any]]) -> int:
        mx = 0
        for k, _ in items:
            if type(k) not in (int, float) or k < 1 or k != math.floor(k):
                return -1
            mx = max(mx, int(k))
        convert, ratio, safe = self.sparse
        if safe and mx > safe and mx > len(items) * ratio:
            if not convert:
                raise _LibError("Cannot serialise table: excessively sparse array")
            return -1
        return mx

    def encode(self, *a: Any) -> bytes:
        if len(a) != 1:
            raise _LibError("bad argument #1 to 'encode' (expected 1 argument)")
        out: list[bytes] = []
        self._value(a[0], 0, out)
        return b"".join(out)

    # decode
    def decode(self, *a: Any) -> Any:
        if len(a) != 1:
            raise _LibError("bad argument #1 to 'decode' (expected 1 argument)")
        s = a[0]
        if type(s) is not bytes:
            if type(s) in (int, float):
                s = _g14(float(s))
            else:
                raise _LibError(f"bad argument #1 to 'decode' (string expected, got "
                                f"{_typename(s)})")
        p = _JsonParser(self, s)
        v = p.value(0)
        p.ws()
        if p.i < len(s):
            raise _LibError(f"Expected the end but found {p.token_name()} at character "
                            f"{p.i + 1}")
        return v

    def cfg(self, name: str) -> Any:
        def setter(*a: Any) -> Any:
            if name == "encode_max_depth" or name == "decode_max_depth":
                if a and a[0] is not None:
                    n = lua_tonumber(a[0])
                    if n is None or not 1 <= n <= 2**31 - 1:
                        raise _LibError(f"bad argument #1 to '{name}' (expected integer "
                                        "between 1 and 2147483647)")
                    setattr(self, name, int(n))
                return getattr(self, name)
            if name == "encode_number_precision":
                if a and a[0] is not None:
                    n = lua_tonumber(a[0])
                    if n is None or not 1 <= n <= 14:
                        raise _LibError("bad argument #1 to 'encode_number_precision' "
                                        "(expected integer between 1 and 14)")
                    self.precision = int(n)
                return self.precision
            if name in ("encode_keep_buffer", "encode_invalid_numbers",
                        "decode_invalid_numbers"):
                attr = {"encode_keep_buffer": "keep_buffer"}.get(name, name)
                if a and a[0] is not None:
                    v = a[0]
                    if type(v) is bool:
                        val = int(v)
                    elif v in (b"on", b"off", b"null"):
                        val = {b"on": 1, b"off": 0, b"null": 2}[v]
                    else:
                        raise _LibError(f"bad argument #1 to '{name}' (invalid option '"
                                        f"{v!r}')")
                    setattr(self, attr, val)
                cur = getattr(self, attr)
                return {0: False, 1: True}.get(cur, b"null")
            if name == "encode_sparse_array":
                for i, v in enumerate(a[:3]):
                    if v is not None:
                        self.sparse[i] = int(v) if type(v) is not bool else int(v)
                return (bool(self.sparse[0]), self.sparse[1], self.sparse[2])
            return None
        return setter


class _JsonParser:
    def __init__(self, cj: CJson, s: bytes) -> None:
        self.cj = cj
        self.s = s
        self.i = 0

    def ws(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in b" \t\n\r":
            i += 1
        self.i = i

    def token_name(self) -> str:
        if self.i >= len(self.s):
            return "T_END"
        c = self.s[self.i:self.i + 1]
        return {b"{": "'{'", b"}": "'}'", b"[": "'['", b"]": "']'", b":": "colon",
                b",": "comma", b'"': "string"}.get(c, "invalid token")

    def fail(self, expected: str) -> None:
        raise _LibError(f"Expected {expected} but found {self.token_name()} at character "
                        f"{self.i + 1}")

    def value(self, depth: int) -> Any:
        self.ws()
        s = self.s
        if self.i >= len(s):
            self.fail("value")
        c = s[self.i]
        if c == 0x7B or c == 0x5B:
            depth += 1
            if depth > self.cj.decode_max_depth:
                raise _LibError(f"Found too many nested data structures ({depth}) at "
                                f"character {self.i + 1}")
            return self.obj(depth) if c == 0x7B else self.arr(depth)
        if c == 0x22:
            return self.string()
        for word, val in ((b"true", True), (b"false", False), (b"null", None)):
            if s.startswith(word, self.i):
                self.i += len(word)
                return self.cj.null if val is None else val
        return self.number()

    def number(self) -> float:
        s = self.s
        j = self.i
        while j < len(s) and s[j] in b"+-0123456789.eExXabcdefABCDEFinftyINFTYaA":
            j += 1
        tok = s[self.i:j]
        body = tok[1:] if tok[:1] == b"-" else tok
        bad = (not body or body[:2].lower() == b"0x" or (len(body) > 1 and body[:1] == b"0"
               and body[1:2].isdigit()))
        lowered = body.lower()
        if lowered.startswith((b"inf", b"nan")) and not self.cj.decode_invalid_numbers:
            bad = True
        try:
            v = float(tok) if not bad else None
        except ValueError:
            v = None
        if v is None:
            self.fail("value")
        self.i = j
        return v  # type: ignore[return-value]

    def string(self) -> bytes:
        s = self.s
        i = self.i + 1
        out = bytearray()
        while True:
            if i >= len(s):
                self.i = self.i
                raise _LibError(f"Expected value but found invalid token at character "
                                f"{self.i + 1}")
            c = s[i]
            if c == 0x22:
                break
            if c == 0x5C:
                e = s[i + 1:i + 2]
                if e == b"u":
                    cp = int(s[i + 2:i + 6], 16)
                    i += 6
                    if 0xD800 <= cp < 0xDC00 and s[i:i + 2] == b"\\u":
                        lo = int(s[i + 2:i + 6], 16)
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                        i += 6
                    out += chr(cp).encode("utf-8", "surrogatepass")
                    continue
                m = {b'"': b'"', b"\\": b"\\", b"/": b"/", b"b": b"\b", b"f": b"\f",
                     b"n": b"\n", b"r": b"\r", b"t": b"\t"}.get(e)
                if m is None:
                    raise _LibError(f"Expected value but found invalid escape code at "
                                    f"character {self.i + 1}")
                out += m
                i += 2
                continue
            out.append(c)
            i += 1
        self.i = i + 1
        return bytes(out)

    def _empty(self, close: bytes) -> bool:
        """Past a container's opening bracket: True (and past ``close`` too) when it is
        empty."""
        self.i += 1
        self.ws()
        if self.s[self.i:self.i + 1] == close:
            self.i += 1
            return True
        return False

    def _more(self, close: bytes, expected: str) -> bool:
        """After a container's item: True past a comma, False past ``close``; anything else
        fails with ``expected``."""
        self.ws()
        c = self.s[self.i:self.i + 1]
        if c != b"," and c != close:
            self.fail(expected)
        self.i += 1
        return c == b","

    def obj(self, depth: int) -> Any:
        t = self.cj.lua.table()
        if self._empty(b"}"):
            return t
        while True:
            self.ws()
            if self.s[self.i:self.i + 1] != b'"':
                self.fail("object key string")
            k = self.string()
            self.ws()
            if self.s[self.i:self.i + 1] != b":":
                self.fail("colon")
            self.i += 1
            t[k] = self.value(depth)
            if not self._more(b"}", "comma or object end"):
                return t

    def arr(self, depth: int) -> Any:
        t = self.cj.lua.table()
        if self._empty(b"]"):
            return t
        n = 1
        while True:
            t[n] = self.value(depth)
            n += 1
            if not self._more(b"]", "comma or array end"):
                return t


# -- cmsgpack ---------------------------------------------------------------------------------

MAX_NESTING = 16

# msgpack's sized forms, smallest first: (lowest, highest, type byte, struct format).
_MP_UINTS = ((0, 0xFF, b"\xcc", ">B"), (0, 0xFFFF, b"\xcd", ">H"),
             (0, 0xFFFFFFFF, b"\xce", ">I"), (0, 2**64 - 1, b"\xcf", ">Q"))
_MP_INTS = ((-128, 127, b"\xd0", ">b"), (-32768, 32767, b"\xd1", ">h"),
            (-2**31, 2**31 - 1, b"\xd2", ">i"), (-2**63, 2**63 - 1, b"\xd3", ">q"))
_MP_STR_LENS = ((0, 0xFF, b"\xd9", ">B"), (0, 0xFFFF, b"\xda", ">H"),
                (0, 0xFFFFFFFF, b"\xdb", ">I"))


def _mp_sized(n: int, forms: tuple[tuple[int, int, bytes, str], ...]) -> bytes:
    """``n`` in the first of ``forms`` that holds it: its type byte, then ``n`` big-endian."""
    for lo, hi, tag, fmt in forms:
        if lo <= n <= hi:
            return tag + _st.pack(fmt, n)
    raise OverflowError(n)


def _mp_read(s: bytes, i: int, fmt: str) -> tuple[Any, int]:
    """The big-endian ``fmt`` value at ``s[i:]`` and the offset after it (IndexError when
    the data ends first)."""
    size = _st.calcsize(fmt)
    if i + size > len(s):
        raise IndexError
    return _st.unpack(fmt, s[i:i + size])[0], i + size


class CMsgpack:
    def __init__(self, lua: Any) -> None:
        self.lua = lua

    def _int(self, n: int, out: bytearray) -> None:
        if 0 <= n <= 127:
            out.append(n)  # positive fixint
        elif -32 <= n < 0:
            out += _st.pack(">b", n)  # negative fixint
        else:
            out += _mp_sized(n, _MP_UINTS if n > 0 else _MP_INTS)

    def _value(self, v: Any, level: int, out: bytearray) -> None:
        t = type(v)
        if t is bytes:
            n = len(v)
            if n < 32:
                out.append(0xA0 | n)  # fixstr
            else:
                out += _mp_sized(n, _MP_STR_LENS)
            out += v
        elif t is bool:
            out.append(0xC3 if v else 0xC2)
        elif t is int or t is float:
            d = float(v)
            if math.isfinite(d) and d == math.floor(d) and -2**63 <= d < 2**63:
                self._int(int(d), out)
            else:
                f = _st.unpack(">f", _st.pack(">f", d))[0] if (
                    math.isnan(d) or math.isinf(d) or abs(d) < 3.5e38) else None
                if f is not None and (f == d or (d != d and f != f)):
                    out += b"\xca" + _st.pack(">f", d)
                else:
                    out += b"\xcb" + _st.pack(">d", d)
        elif _is_table(v) and level < MAX_NESTING:
            items = list(v.items())
            mx = 0
            array = True
            for k, _ in items:
                if type(k) not in (int, float) or k <= 0 or k != math.floor(k) or k >= 2**31:
                    array = False
                    break
                mx = max(mx, int(k))
            if array and mx == len(items):
                n = len(items)
                out += (bytes([0x90 | n]) if n < 16 else
                        b"\xdc" + _st.pack(">H", n) if n <= 0xFFFF else
                        b"\xdd" + _st.pack(">I", n))
                for i in range(1, n + 1):
                    self._value(v[i], level + 1, out)
            else:
                n = len(items)
                out += (bytes([0x80 | n]) if n < 16 else
                        b"\xde" + _st.pack(">H", n) if n <= 0xFFFF else
                        b"\xdf" + _st.pack(">I", n))
                for k, x in items:
                    self._value(k, level + 1, out)
                    self._value(x, level + 1, out)
        else:
            out.append(0xC0)

    def pack(self, *a: Any) -> bytes:
        if not a:
            raise _LibError("MessagePack pack needs input.")
        out = bytearray()
        for v in a:
            self._value(v, 0, out)
        return bytes(out)

    def _decode(self, s: bytes, i: int) -> tuple[Any, int]:
        if i >= len(s):
            raise IndexError
        c = s[i]
        i += 1
        if c <= 0x7F:
            return c, i
        if c >= 0xE0:
            return c - 256, i
        if 0xA0 <= c <= 0xBF:
            n = c & 0x1F
            return self._bytes(s, i, n)
        if 0x90 <= c <= 0x9F:
            return self._array(s, i, c & 0xF)
        if 0x80 <= c <= 0x8F:
            return self._map(s, i, c & 0xF)
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if c in simple:
            return simple[c], i
        fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
                 0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
        if c in fixed:
            v, i = _mp_read(s, i, fixed[c])
            return (float(v) if c in (0xCF, 0xD3) else v), i
        lens = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I",
                0xDC: ">H", 0xDD: ">I", 0xDE: ">H", 0xDF: ">I"}
        if c in lens:
            n, i = _mp_read(s, i, lens[c])
            if c in (0xDC, 0xDD):
                return self._array(s, i, n)
            if c in (0xDE, 0xDF):
                return self._map(s, i, n)
            return self._bytes(s, i, n)
        raise ValueError("Bad data format in input.")

    def _bytes(self, s: bytes, i: int, n: int) -> tuple[bytes, int]:
        if i + n > len(s):
            raise IndexError
        return s[i:i + n], i + n

    def _array(self, s: bytes, i: int, n: int) -> tuple[Any, int]:
        t = self.lua.table()
        for j in range(1, n + 1):
            v, i = self._decode(s, i)
            t[j] = v
        return t, i

    def _map(self, s: bytes, i: int, n: int) -> tuple[Any, int]:
        t = self.lua.table()
        for _ in range(n):
            k, i = self._decode(s, i)
            v, i = self._decode(s, i)
            if k is not None:
                t[k] = v
        return t, i

    def _unpack(self, s: Any, limit: int, offset: int, fname: str) -> tuple[Any, ...]:
        if type(s) is not bytes:
            raise _LibError(f"bad argument #1 to '{fname}' (string expected, got "
                            f"{_typename(s)})")
        if offset < 0 or limit < 0:
            raise _LibError(f"Invalid request to unpack with offset of {offset} and limit of "
                            f"{limit}.")
        if offset > len(s):
            raise _LibError(f"Start offset {offset} greater than input length {len(s)}.")
        vals: list[Any] = []
        i = offset
        try:
            while i < len(s) and (not limit or len(vals) < limit):
                v, i = self._decode(s, i)
                vals.append(v)
        except IndexError:
            raise _LibError("Missing bytes in input.") from None
        except ValueError as e:
            raise _LibError(str(e)) from None
        if fname == "unpack":
            return tuple(vals)
        return (-1 if i >= len(s) else i, *vals)

    def unpack(self, *a: Any) -> Any:
        return self._unpack(a[0] if a else None, 0, 0, "unpack")

    def unpack_one(self, *a: Any) -> Any:
        offset = int(lua_tonumber(a[1]) or 0) if len(a) > 1 else 0
        return self._unpack(a[0] if a else None, 1, offset, "unpack_one")

    def unpack_limit(self, *a: Any) -> Any:
        limit = int(lua_tonumber(a[1]) or 0) if len(a) > 1 else 0
        offset = int(lua_tonumber(a[2]) or 0) if len(a) > 2 else 0
        return self._unpack(a[0] if a else None, limit, offset, "unpack_limit")


# -- struct (lua_struct.c) --------------------------------------------------------------------

class Struct:
    def _parse(self, fmt: bytes) -> list[tuple[str, str, int]]:
        """(endian, code, size) per item; 'x' padding, 's' zero-terminated, 'c' fixed."""
        out: list[tuple[str, str, int]] = []
        endian = "<"
        i = 0
        while i < len(fmt):
            ch = chr(fmt[i])
            i += 1
            j = i
            while j < len(fmt) and chr(fmt[j]).isdigit():
                j += 1
            num = int(fmt[i:j]) if j > i else None
            if ch in "<>=!":
                if ch in "<>":
                    endian = ch
                elif ch == "=":
                    endian = "<"
                i = j
                continue
            if ch == " ":
                continue
            sizes = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "f": 4, "d": 8,
                     "x": 1}
            if ch in "iI":
                out.append((endian, ch, num or 4))
                i = j
            elif ch in sizes:
                out.append((endian, ch, sizes[ch]))
            elif ch == "c":
                out.append((endian, ch, num if num is not None else 1))
                i = j
            elif ch == "s":
                out.append((endian, ch, 0))
            else:
                raise _LibError(f"invalid format option '{ch}'")
        return out

    def pack(self, *a: Any) -> bytes:
        fmt = a[0] if a else None
        if type(fmt) is not bytes:
            raise _LibError("bad argument #1 to 'pack' (string expected, got "
                            f"{_typename(fmt, bool(a))})")
        out = bytearray()
        argi = 1
        for endian, code, size in self._parse(fmt):
            if code == "x":
                out.append(0)
                continue
            v: Any = a[argi] if argi < len(a) else None   # dispatched on type() below
            argi += 1
            if code in "bBhHlLTiI":
                n = lua_tonumber(v)
                if n is None:
                    raise _LibError(f"bad argument #{argi} to 'pack' (number expected, got "
                                    f"{_typename(v, argi - 1 < len(a))})")
                iv = int(n) & ((1 << (8 * size)) - 1)
                out += iv.to_bytes(size, "little" if endian == "<" else "big")
            elif code in "fd":
                n = lua_tonumber(v)
                if n is None:
                    raise _LibError(f"bad argument #{argi} to 'pack' (number expected, got "
                                    f"{_typename(v, argi - 1 < len(a))})")
                out += _st.pack(endian + code, n)
            else:
                s = v if type(v) is bytes else (_g14(float(v)) if type(v) in (int, float)
                                                else None)
                if s is None:
                    raise _LibError(f"bad argument #{argi} to 'pack' (string expected, got "
                                    f"{_typename(v, argi - 1 < len(a))})")
                if code == "c":
                    n = size if size else len(s)
                    if len(s) < n:
                        raise _LibError(f"bad argument #{argi} to 'pack' (string too short)")
                    out += s[:n]
                else:
                    out += s + b"\0"
        return bytes(out)

    def unpack(self, *a: Any) -> tuple[Any, ...]:
        fmt = a[0] if a else None
        data = a[1] if len(a) > 1 else None
        if type(fmt) is not bytes or type(data) is not bytes:
            raise _LibError("bad argument #2 to 'unpack' (string expected, got "
                            f"{_typename(data, len(a) > 1)})")
        pos = int(lua_tonumber(a[2]) or 1) - 1 if len(a) > 2 else 0
        res: list[Any] = []
        for endian, code, size in self._parse(fmt):
            if code == "s":
                end = data.find(b"\0", pos)
                if end < 0:
                    raise _LibError("bad argument #2 to 'unpack' (unfinished string in data)")
                res.append(data[pos:end])
                pos = end + 1
                continue
            if pos + size > len(data):
                raise _LibError("bad argument #2 to 'unpack' (data string too short)")
            chunk = data[pos:pos + size]
            pos += size
            if code == "x":
                continue
            if code in "bhliT" or code == "i":
                res.append(int.from_bytes(chunk, "little" if endian == "<" else "big",
                                          signed=code in "bhli"))
            elif code in "BHLI":
                res.append(int.from_bytes(chunk, "little" if endian == "<" else "big"))
            elif code in "fd":
                res.append(_st.unpack(endian + code, chunk)[0])
            else:
                res.append(chunk)
        res.append(pos + 1)
        return tuple(res)

    def size(self, *a: Any) -> int:
        fmt = a[0] if a else None
        if type(fmt) is not bytes:
            raise _LibError("bad argument #1 to 'size' (string expected)")
        total = 0
        for _, code, size in self._parse(fmt):
            if code == "s":
                raise _LibError("options 's' has no fixed size" if False else
                                "bad argument #1 to 'size' (options 's' has no fixed size)")
            total += size
        return total


_LUA_TABLE = type(lua51.LuaRuntime().table())

# -- assembly ---------------------------------------------------------------------------------

def build_libs(lua: Any) -> Any:
    """The Lua table the sandbox turns into the protected library tables."""
    cj = CJson(lua)
    mp = CMsgpack(lua)
    stc = Struct()
    cjson_funcs = {b"encode": _guard(cj.encode), b"decode": _guard(cj.decode)}
    for name in ("encode_sparse_array", "encode_max_depth", "decode_max_depth",
                 "encode_number_precision", "encode_keep_buffer", "encode_invalid_numbers",
                 "decode_invalid_numbers"):
        cjson_funcs[name.encode()] = _guard(cj.cfg(name))
    null = lua.eval("newproxy(false)")
    cj.null = null
    libs = {
        b"bit": {b"funcs": _bit_funcs(), b"values": {}},
        b"cjson": {b"funcs": cjson_funcs,
                   b"values": {b"null": null, b"_NAME": b"cjson", b"_VERSION": b"2.1.0"}},
        b"cmsgpack": {b"funcs": {b"pack": _guard(mp.pack), b"unpack": _guard(mp.unpack),
                                 b"unpack_one": _guard(mp.unpack_one),
                                 b"unpack_limit": _guard(mp.unpack_limit)},
                      b"values": {b"_NAME": b"cmsgpack", b"_VERSION": b"lua-cmsgpack 0.4.0",
                                  b"_COPYRIGHT": b"Copyright (C) 2012, Salvatore Sanfilippo",
                                  b"_DESCRIPTION": b"MessagePack C implementation for Lua"}},
        b"struct": {b"funcs": {b"pack": _guard(stc.pack), b"unpack": _guard(stc.unpack),
                               b"size": _guard(stc.size)}, b"values": {}},
    }
    return lua.table_from({name: lua.table_from({k: lua.table_from(v) for k, v in d.items()})
                           for name, d in libs.items()})
