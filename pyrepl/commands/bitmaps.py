"""Bitmap commands on strings (Redis 7.0.15 bitops.c semantics).

Theory of operation: a bitmap is a string value (``bytes``); bit 0 is the most significant bit
of the first byte. Writes (SETBIT, BITFIELD SET/INCRBY) grow the string with zero bytes to reach
the highest bit they touch, as ``lookupStringForBitCommand`` does, and count as a change (dirty,
propagated as sent) only when the string grew or a bit changed. Offsets are checked against
``proto-max-bulk-len`` except on the master link (``mustObeyClient``). BITCOUNT / BITPOS follow
Redis's range rules (negative indexes, BIT / BYTE units, the masks on the edge bytes, BITPOS's
"explicit end" rule for clear bits); BITOP treats missing keys as empty strings and deletes the
destination when every source is empty; BITFIELD reproduces Redis's overflow checks for WRAP,
SAT and FAIL with 64-bit two's complement arithmetic. Keyspace events as bitops.c: ``setbit``
(SETBIT, BITFIELD when something changed; ``new`` first for a created key), BITOP ``set`` or
``del``.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import keyword, parse_int, read_typed
from pyrepl.errors import SYNTAX, WRONGTYPE
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_STRING, notify
from pyrepl.resp.types import ReplyError

_OFFSET_ERR = "ERR bit offset is not an integer or out of range"
_BIT_ERR = "ERR bit is not an integer or out of range"
_TYPE_ERR = ("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not "
             "supported but i64 is.")
_U64 = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _int64(value: int) -> int:
    """Two's complement wrap to a C int64_t."""
    value &= _U64
    return value - (1 << 64) if value >> 63 else value


def _string2ll(text: bytes) -> int | None:
    try:
        return parse_int(text)
    except ReplyError:
        return None


def _bit_offset(c: Any, arg: bytes, hash_ok: bool = False, bits: int = 0) -> int:
    """getBitOffsetFromArgument (``#N`` = N * bits for BITFIELD)."""
    usehash = hash_ok and bits > 0 and arg[:1] == b"#"
    offset = _string2ll(arg[1:] if usehash else arg)
    if offset is None:
        raise ReplyError(_OFFSET_ERR)
    if usehash:
        offset = _int64(offset * bits)
    if offset < 0 or (not c.must_obey() and
                      (offset >> 3) >= c.core.config.proto_max_bulk_len):
        raise ReplyError(_OFFSET_ERR)
    return offset


def _string_for_bits(c: Any, key: bytes, maxbit: int) -> tuple[bytearray, bool]:
    """lookupStringForBitCommand: the value as a bytearray grown to reach ``maxbit`` (the
    caller stores it back), and whether it was created or grew."""
    v = c.db.lookup_typed(key, bytes)
    need = (maxbit >> 3) + 1
    if v is None:
        return bytearray(need), True
    buf = bytearray(v)
    if len(buf) < need:
        buf.extend(bytes(need - len(buf)))
        return buf, True
    return buf, False


def _store(c: Any, key: bytes, buf: bytearray) -> None:
    db = c.db
    if key in db.data:
        db.data[key] = bytes(buf)            # the TTL stays (dbUnshareStringValue)
        if db.watched:
            db.touch(key)
    else:
        db.add(key, bytes(buf))


@command("setbit", 4, "write denyoom", keys=(1, 1, 1), group="bitmap",
         summary="Sets or clears the bit at offset in the string value stored at key",
         since="2.2.0", acl="bitmap")
def setbit(c: Any, argv: list[bytes]) -> object:
    offset = _bit_offset(c, argv[2])
    on = _string2ll(argv[3])
    if on is None or on & ~1:
        raise ReplyError(_BIT_ERR)
    key = argv[1]
    buf, grown = _string_for_bits(c, key, offset)
    byte = offset >> 3
    mask = 1 << (7 - (offset & 7))
    old = 1 if buf[byte] & mask else 0
    if grown or old != on:
        buf[byte] = (buf[byte] & ~mask) | (mask if on else 0)
        _store(c, key, buf)
        notify(c, NOTIFY_STRING, b"setbit", key)
        c.core.dirty += 1
    return old


@command("getbit", 3, "readonly fast", keys=(1, 1, 1), group="bitmap",
         summary="Returns the bit value at offset in the string value stored at key",
         since="2.2.0", acl="bitmap")
def getbit(c: Any, argv: list[bytes]) -> object:
    offset = _bit_offset(c, argv[2])
    v = read_typed(c, argv[1], bytes)
    byte = offset >> 3
    if v is None or byte >= len(v):
        return 0
    return 1 if v[byte] & (1 << (7 - (offset & 7))) else 0


# BITCOUNT / BITPOS's unit: True for bit offsets, False for byte offsets.
_IS_BIT = {b"bit": True, b"byte": False}


def _byte_range(start: int, end: int, length: int,
                isbit: bool) -> tuple[int, int, int, int]:
    """BITCOUNT / BITPOS ranges: negative indexes from the end, clamped; for a BIT range the
    byte range and the edge masks (both zero otherwise)."""
    total = length << 3 if isbit else length
    if start < 0:
        start += total
    if end < 0:
        end += total
    start = max(start, 0)
    end = min(max(end, 0), total - 1)
    if isbit and start <= end:
        return _edges(start, end)
    return start, end, 0, 0


def _edges(start: int, end: int) -> tuple[int, int, int, int]:
    """Bit range -> byte range and the masks of the bits outside it in the edge bytes."""
    first_neg = ~((1 << (8 - (start & 7))) - 1) & 0xFF
    last_neg = (1 << (7 - (end & 7))) - 1
    return start >> 3, end >> 3, first_neg, last_neg


@command("bitcount", -2, "readonly", keys=(1, 1, 1), group="bitmap",
         summary="Count set bits in a string", since="2.6.0", acl="bitmap")
def bitcount(c: Any, argv: list[bytes]) -> object:
    v = read_typed(c, argv[1], bytes)
    if v is None:
        return 0
    n = len(argv)
    first_neg = last_neg = 0
    if n in (4, 5):
        start = parse_int(argv[2])
        end = parse_int(argv[3])
        if start < 0 and end < 0 and start > end:
            return 0
        isbit = keyword(argv[4], _IS_BIT) if n == 5 else False
        start, end, first_neg, last_neg = _byte_range(start, end, len(v), isbit)
    elif n == 2:
        start, end = 0, len(v) - 1
    else:
        raise ReplyError(SYNTAX)
    if start > end:
        return 0
    count = int.from_bytes(v[start:end + 1], "big").bit_count()
    if first_neg:
        count -= (v[start] & first_neg).bit_count()
    if last_neg:
        count -= (v[end] & last_neg).bit_count()
    return count


def _bitpos(data: bytes | bytearray, bit: int) -> int:
    """redisBitpos: the first ``bit`` in ``data``; for 0 not found, the bit just past the
    end; for 1 not found, -1."""
    data = bytes(data)
    i = len(data) - len(data.lstrip(b"\xff" if bit == 0 else b"\0"))  # first byte to look in
    if i == len(data):
        return len(data) * 8 if bit == 0 else -1
    b = data[i] if bit else data[i] ^ 0xFF          # the bit sought is now a 1
    return i * 8 + 8 - b.bit_length()


@command("bitpos", -3, "readonly", keys=(1, 1, 1), group="bitmap",
         summary="Find first bit set or clear in a string", since="2.8.7", acl="bitmap")
def bitpos(c: Any, argv: list[bytes]) -> object:
    bit = parse_int(argv[2])
    if bit not in (0, 1):
        raise ReplyError("ERR The bit argument must be 1 or 0.")
    v = read_typed(c, argv[1], bytes)
    if v is None:
        return -1 if bit else 0
    n = len(argv)
    end_given = False
    first_neg = last_neg = 0
    if n in (4, 5, 6):
        start = parse_int(argv[3])
        isbit = keyword(argv[5], _IS_BIT) if n == 6 else False
        total = len(v)
        if n >= 5:
            end = parse_int(argv[4])
            end_given = True
        else:
            end = (total << 3) + 7 if isbit else total - 1
        start, end, first_neg, last_neg = _byte_range(start, end, total, isbit)
    elif n == 3:
        start, end = 0, len(v) - 1
    else:
        raise ReplyError(SYNTAX)
    if start > end:
        return -1
    nbytes = end - start + 1
    pos = -1
    done = False
    if first_neg:
        tmp = (v[start] & ~first_neg & 0xFF) if bit else (v[start] | first_neg)
        if last_neg and nbytes == 1:
            tmp = (tmp & ~last_neg & 0xFF) if bit else (tmp | last_neg)
        pos = _bitpos(bytes((tmp,)), bit)
        if nbytes == 1 or (pos != -1 and pos != 8):
            done = True
        else:
            start += 1
            nbytes -= 1
    if not done:
        cur = nbytes - (1 if last_neg else 0)
        if cur > 0:
            pos = _bitpos(v[start:start + cur], bit)
            if nbytes == cur or (pos != -1 and pos != cur << 3):
                done = True
            else:
                start += cur
                nbytes -= cur
        if not done:
            tmp = (v[end] & ~last_neg & 0xFF) if bit else (v[end] | last_neg)
            pos = _bitpos(bytes((tmp,)), bit)
    if end_given and bit == 0 and pos == nbytes << 3:
        return -1
    if pos != -1:
        pos += start << 3
    return pos


@command("bitop", -4, "write denyoom", keys=(2, -1, 1), group="bitmap",
         summary="Perform bitwise operations between strings", since="2.6.0", acl="bitmap")
def bitop(c: Any, argv: list[bytes]) -> object:
    op = argv[1].lower()
    if op not in (b"and", b"or", b"xor", b"not"):
        raise ReplyError(SYNTAX)
    if op == b"not" and len(argv) != 4:
        raise ReplyError("ERR BITOP NOT must be called with a single source key.")
    db = c.db
    sources = []
    for key in argv[3:]:
        v = db.lookup_read(key)
        if v is not None and type(v) is not bytes:
            raise ReplyError(WRONGTYPE)
        sources.append(v or b"")
    maxlen = max(len(s) for s in sources)
    target = argv[2]
    if maxlen:
        ints = [int.from_bytes(s.ljust(maxlen, b"\0"), "big") for s in sources]
        if op == b"not":
            res = ~ints[0] & ((1 << (maxlen * 8)) - 1)
        else:
            res = ints[0]
            for x in ints[1:]:
                res = res & x if op == b"and" else res | x if op == b"or" else res ^ x
        db.set(target, res.to_bytes(maxlen, "big"))     # setKey: the TTL goes
        notify(c, NOTIFY_STRING, b"set", target)
        c.core.dirty += 1
    elif db.delete(target):
        notify(c, NOTIFY_GENERIC, b"del", target)
        c.core.dirty += 1
    return maxlen


def _bitfield_type(arg: bytes) -> tuple[bool, int]:
    """getBitfieldTypeFromArgument: (signed, bits)."""
    sign = arg[:1]
    if sign not in (b"i", b"u"):
        raise ReplyError(_TYPE_ERR)
    bits = _string2ll(arg[1:])
    if bits is None or bits < 1 or (sign == b"i" and bits > 64) or (sign == b"u" and bits > 63):
        raise ReplyError(_TYPE_ERR)
    return sign == b"i", bits


def _get_bits(buf: bytes | bytearray, offset: int, bits: int) -> int:
    """getUnsignedBitfield: ``bits`` bits from bit ``offset`` (missing bytes read as 0)."""
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    chunk = bytes(buf[first:last + 1]).ljust(last - first + 1, b"\0")
    value = int.from_bytes(chunk, "big")
    return (value >> ((last + 1) * 8 - (offset + bits))) & ((1 << bits) - 1)


def _set_bits(buf: bytearray, offset: int, bits: int, value: int) -> None:
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    shift = (last + 1) * 8 - (offset + bits)
    mask = ((1 << bits) - 1) << shift
    cur = int.from_bytes(buf[first:last + 1], "big")
    cur = (cur & ~mask) | ((value & ((1 << bits) - 1)) << shift)
    buf[first:last + 1] = cur.to_bytes(last - first + 1, "big")


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if bits < 64 and value >> (bits - 1) & 1 else _int64(value)


def _check_unsigned(value: int, incr: int, bits: int, owtype: bytes) -> tuple[int, int | None]:
    """checkUnsignedBitfieldOverflow: (overflow, limit) with C's uint64/int64 arithmetic."""
    value &= _U64
    mx = (1 << bits) - 1
    maxincr = _int64(mx - value)
    minincr = _int64(-value)
    if value > mx or (incr > 0 and incr > maxincr):
        over = 1
    elif incr < 0 and incr < minincr:
        over = -1
    else:
        return 0, None
    if owtype == b"wrap":
        return over, (value + incr) & ((1 << bits) - 1)
    if owtype == b"sat":
        return over, mx if over > 0 else 0
    return over, None


def _check_signed(value: int, incr: int, bits: int, owtype: bytes) -> tuple[int, int | None]:
    """checkSignedBitfieldOverflow."""
    mx = _I64_MAX if bits == 64 else (1 << (bits - 1)) - 1
    mn = -mx - 1
    maxincr = _int64(mx - value)
    minincr = _int64(mn - value)
    if value > mx or (bits != 64 and incr > maxincr) or (value >= 0 and incr > 0
                                                         and incr > maxincr):
        over = 1
    elif value < mn or (bits != 64 and incr < minincr) or (value < 0 and incr < 0
                                                           and incr < minincr):
        over = -1
    else:
        return 0, None
    if owtype == b"wrap":
        res = (value + incr) & _U64
        if bits < 64:
            res = res | (_U64 << bits & _U64) if res >> (bits - 1) & 1 else \
                res & ~(_U64 << bits & _U64)
        return over, _int64(res)
    if owtype == b"sat":
        return over, mx if over > 0 else mn
    return over, None


def _bitfield(c: Any, argv: list[bytes], readonly_cmd: bool) -> object:
    ops: list[tuple[bytes, int, int, bool, int, bytes]] = []
    owtype = b"wrap"
    readonly = True
    highest = 0
    j = 2
    n = len(argv)
    while j < n:
        remargs = n - j - 1
        sub = argv[j].lower()
        if sub == b"get" and remargs >= 2:
            opcode = b"get"
        elif sub == b"set" and remargs >= 3:
            opcode = b"set"
        elif sub == b"incrby" and remargs >= 3:
            opcode = b"incrby"
        elif sub == b"overflow" and remargs >= 1:
            ow = argv[j + 1].lower()
            if ow not in (b"wrap", b"sat", b"fail"):
                raise ReplyError("ERR Invalid OVERFLOW type specified")
            owtype = ow
            j += 2
            continue
        else:
            raise ReplyError(SYNTAX)
        sign, bits = _bitfield_type(argv[j + 1])
        offset = _bit_offset(c, argv[j + 2], True, bits)
        value = 0
        if opcode != b"get":
            readonly = False
            highest = max(highest, offset + bits - 1)
            value = parse_int(argv[j + 3])
        ops.append((opcode, offset, value, sign, bits, owtype))
        j += 3 if opcode == b"get" else 4
    key = argv[1]
    buf: bytes | bytearray | None
    grown = False
    if readonly:
        buf = read_typed(c, key, bytes)
    else:
        if readonly_cmd:
            raise ReplyError("ERR BITFIELD_RO only supports the GET subcommand")
        buf, grown = _string_for_bits(c, key, highest)
    replies: list[object] = []
    changes = 0
    for opcode, offset, value, sign, bits, ow in ops:
        if opcode == b"get":
            raw = _get_bits(buf or b"", offset, bits)
            replies.append(_signed(raw, bits) if sign else raw)
            continue
        assert isinstance(buf, bytearray)
        raw_old = _get_bits(buf, offset, bits)
        if sign:
            old = _signed(raw_old, bits)
            if opcode == b"incrby":
                over, limit = _check_signed(old, value, bits, ow)
                new = limit if over and limit is not None else _int64(old + value)
                ret = new
            else:
                new = value
                over, limit = _check_signed(new, 0, bits, ow)
                if over and limit is not None:
                    new = limit
                ret = old
        else:
            old = raw_old
            if opcode == b"incrby":
                new = (old + value) & _U64
                over, limit = _check_unsigned(old, value, bits, ow)
                if over and limit is not None:
                    new = limit
                ret = new
            else:
                new = value & _U64
                over, limit = _check_unsigned(new, 0, bits, ow)
                if over and limit is not None:
                    new = limit
                ret = old
        if over and ow == b"fail":
            replies.append(None)
            continue
        replies.append(ret)
        _set_bits(buf, offset, bits, new)
        if grown or old != (_signed(new & ((1 << bits) - 1), bits) if sign else new):
            changes += 1
    if changes or grown:
        # As Redis: the key is created / grown by the lookup even when every write failed
        # (OVERFLOW FAIL); only actual changes count as dirty and propagate.
        assert isinstance(buf, bytearray)
        _store(c, key, buf)
        if changes:
            notify(c, NOTIFY_STRING, b"setbit", key)
        c.core.dirty += changes
    return replies


@command("bitfield", -2, "write denyoom", keys=(1, 1, 1), group="bitmap",
         summary="Perform arbitrary bitfield integer operations on strings", since="3.2.0",
         acl="bitmap")
def bitfield(c: Any, argv: list[bytes]) -> object:
    return _bitfield(c, argv, False)


@command("bitfield_ro", -2, "readonly fast", keys=(1, 1, 1), group="bitmap",
         summary="Perform arbitrary bitfield integer operations on strings. Read-only variant "
                 "of BITFIELD", since="6.0.0", acl="bitmap")
def bitfield_ro(c: Any, argv: list[bytes]) -> object:
    return _bitfield(c, argv, True)
