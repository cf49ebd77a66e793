"""HyperLogLog with Redis's exact byte representation (hyperloglog.c of Redis 7.0.15).

Theory of operation: a HLL is a string value: a 16-byte header (``HYLL``, the encoding byte,
3 unused bytes, the cached cardinality as 8 little-endian bytes whose top bit set means
"stale") and 16384 6-bit registers, either *dense* (12288 bytes, register ``j`` in bits
``6j .. 6j+5`` of the little-endian bit stream) or *sparse* (run-length opcodes: ``00xxxxxx``
ZERO of 1..64 registers, ``01xxxxxx yyyyyyyy`` XZERO of 1..16384, ``1vvvvvxx`` VAL of value
1..32 for 1..4 registers). An element is hashed with MurmurHash64A (seed 0xadc83b19): the low
14 bits pick the register, the run of zeros after them + 1 is the count. Every function here
reproduces Redis's byte for byte — the in-place opcode split and the 5-opcode merge scan of
``hllSparseSet``, the promotion to dense past ``hll-sparse-max-bytes`` or a count above 32 —
so a HLL written by either side is the same bytes on the other, and the cardinality uses
Ertl's estimator with Redis's floating point steps, so PFCOUNT agrees to the unit.
"""

from __future__ import annotations

import math

from pyrepl import native

P = 14
Q = 64 - P
REGISTERS = 1 << P
P_MASK = REGISTERS - 1
BITS = 6
REGISTER_MAX = (1 << BITS) - 1
HDR_SIZE = 16
DENSE_SIZE = HDR_SIZE + (REGISTERS * BITS + 7) // 8
DENSE, SPARSE = 0, 1
ALPHA_INF = 0.721347520444481703680
SPARSE_VAL_MAX_VALUE = 32
SPARSE_VAL_MAX_LEN = 4
SPARSE_ZERO_MAX_LEN = 64
SPARSE_XZERO_MAX_LEN = 16384
_U64 = (1 << 64) - 1
_M = 0xC6A4A7935BD1E995

INVALID_HLL_ERR = "INVALIDOBJ Corrupted HLL object detected"
NOT_HLL_ERR = "WRONGTYPE Key is not a valid HyperLogLog string value."


class CorruptHll(Exception):
    """A sparse representation that does not add up to 16384 registers (INVALIDOBJ)."""


def murmurhash64a(key: bytes, seed: int = 0xADC83B19) -> int:
    """Redis's endian-neutral MurmurHash64A."""
    n = len(key)
    h = (seed ^ (n * _M)) & _U64
    end = n - (n & 7)
    for i in range(0, end, 8):
        k = int.from_bytes(key[i:i + 8], "little")
        k = (k * _M) & _U64
        k ^= k >> 47
        k = (k * _M) & _U64
        h ^= k
        h = (h * _M) & _U64
    rest = n & 7
    if rest:
        h ^= int.from_bytes(key[end:], "little")
        h = (h * _M) & _U64
    h ^= h >> 47
    h = (h * _M) & _U64
    h ^= h >> 47
    return h


def pat_len_reference(element: bytes) -> tuple[int, int]:
    """hllPatLen: (register index, count of the run of zeros + 1)."""
    h = murmurhash64a(element)
    index = h & P_MASK
    h = (h >> P) | (1 << Q)
    return index, (h & -h).bit_length()


# (C: the hash, and dense_add, a PFADD's elements over a dense HLL with one copy)
_native = native.load("pyrepl.keyspace._hll")
pat_len = pat_len_reference if _native is None else _native.pat_len


def dense_add_reference(hll: bytes, elements: list[bytes], start: int
                        ) -> tuple[int, bytes | None]:
    """``add`` of ``elements[start:]`` over a dense HLL: how many registers grew, and the HLL
    with them grown and its cached cardinality stale (None when none grew)."""
    if len(hll) != DENSE_SIZE or hll[4] != DENSE:
        raise ValueError("dense_add: not a dense HyperLogLog")
    out = bytearray(hll)
    updated = 0
    for element in elements[start:]:
        index, count = pat_len(element)
        updated += dense_set_max(out, index, count)
    if not updated:
        return 0, None
    invalidate_cache(out)
    return updated, bytes(out)


dense_add = dense_add_reference if _native is None else _native.dense_add


def new_sparse() -> bytearray:
    """createHLLObject: an empty sparse HLL (cached cardinality 0, valid)."""
    out = bytearray(b"HYLL" + bytes([SPARSE]) + bytes(11))
    left = REGISTERS
    while left:
        run = min(SPARSE_XZERO_MAX_LEN, left)
        out += bytes([((run - 1) >> 8) | 0x40, (run - 1) & 0xFF])
        left -= run
    return out


def is_hll(value: bytes) -> bool:
    """isHLLObjectOrReply's checks of the string."""
    if len(value) < HDR_SIZE or value[:4] != b"HYLL" or value[4] > SPARSE:
        return False
    return not (value[4] == DENSE and len(value) != DENSE_SIZE)


def invalidate_cache(hll: bytearray) -> None:
    hll[15] |= 0x80


def cached_card(hll: bytes) -> int | None:
    return None if hll[15] & 0x80 else int.from_bytes(hll[8:16], "little")


def set_cached_card(hll: bytearray, card: int) -> None:
    hll[8:16] = card.to_bytes(8, "little")


# -- dense ------------------------------------------------------------------------------------

def _dense_get(regs: bytearray, index: int) -> int:
    byte = index * BITS // 8
    fb = index * BITS & 7
    b0 = regs[byte]
    b1 = regs[byte + 1] if byte + 1 < len(regs) else 0
    return ((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX


def _dense_set(regs: bytearray, index: int, value: int) -> None:
    byte = index * BITS // 8
    fb = index * BITS & 7
    regs[byte] = (regs[byte] & ~(REGISTER_MAX << fb) & 0xFF) | ((value << fb) & 0xFF)
    if byte + 1 < len(regs):        # Redis writes the sds terminator here for the last one
        fb8 = 8 - fb
        regs[byte + 1] = (regs[byte + 1] & ~(REGISTER_MAX >> fb8) & 0xFF) | (value >> fb8)


def dense_registers(hll: bytes | bytearray) -> list[int]:
    """All 16384 registers of a dense HLL."""
    regs = hll[HDR_SIZE:]
    out: list[int] = []
    for i in range(0, len(regs), 3):
        w = regs[i] | regs[i + 1] << 8 | regs[i + 2] << 16
        out += (w & 63, w >> 6 & 63, w >> 12 & 63, w >> 18 & 63)
    return out


def dense_set_max(hll: bytearray, index: int, count: int) -> bool:
    """hllDenseSet on the registers that follow the header."""
    regs = memoryview(hll)[HDR_SIZE:]
    old = _dense_get(regs, index)      # type: ignore[arg-type]
    if count > old:
        _dense_set(regs, index, count)  # type: ignore[arg-type]
        return True
    return False


# -- sparse -----------------------------------------------------------------------------------

def _op(hll: bytes | bytearray, p: int) -> tuple[str, int, int, int]:
    """The opcode at ``p``: (kind, registers covered, value, opcode length)."""
    b = hll[p]
    if b & 0xC0 == 0:
        return "zero", (b & 0x3F) + 1, 0, 1
    if b & 0x80:
        return "val", (b & 0x3) + 1, ((b >> 2) & 0x1F) + 1, 1
    return "xzero", (((b & 0x3F) << 8) | hll[p + 1]) + 1, 0, 2


def _val(value: int, length: int) -> int:
    return ((value - 1) << 2 | (length - 1)) | 0x80


def _zero_seq(length: int) -> bytes:
    if length > SPARSE_ZERO_MAX_LEN:
        return bytes([((length - 1) >> 8) | 0x40, (length - 1) & 0xFF])
    return bytes([length - 1])


def sparse_registers(hll: bytes | bytearray) -> list[int]:
    """The registers of a sparse HLL; CorruptHll unless the runs add up exactly."""
    out: list[int] = []
    p = HDR_SIZE
    end = len(hll)
    while p < end:
        kind, run, value, oplen = _op(hll, p)
        if len(out) + run > REGISTERS:
            raise CorruptHll
        out.extend([value] * run)
        p += oplen
    if len(out) != REGISTERS:
        raise CorruptHll
    return out


def decode_sparse(hll: bytes | bytearray) -> str:
    """PFDEBUG DECODE: a sparse HLL's opcodes, ``z:<run>`` ``Z:<run>`` ``v:<value>,<run>``."""
    out = []
    p = HDR_SIZE
    while p < len(hll):
        kind, run, value, oplen = _op(hll, p)
        out.append(f"z:{run}" if kind == "zero" else f"Z:{run}" if kind == "xzero"
                   else f"v:{value},{run}")
        p += oplen
    return " ".join(out)


def to_dense(hll: bytearray) -> bytearray:
    """hllSparseToDense: the header (magic and cached cardinality) is kept."""
    if hll[4] == DENSE:
        return hll
    regs = sparse_registers(hll)
    dense = bytearray(hll[:HDR_SIZE])
    dense[4] = DENSE
    body = bytearray((REGISTERS * BITS + 7) // 8)
    for i in range(0, REGISTERS, 4):
        w = regs[i] | regs[i + 1] << 6 | regs[i + 2] << 12 | regs[i + 3] << 18
        j = i // 4 * 3
        body[j:j + 3] = w.to_bytes(3, "little")
    return dense + body


def sparse_set_reference(hll: bytearray, index: int, count: int, max_bytes: int
                         ) -> tuple[bytearray, int]:
    """hllSparseSet: (the HLL, possibly promoted to dense, and 1 if a register changed, 0 if
    not); CorruptHll for an invalid sparse form."""
    if count > SPARSE_VAL_MAX_VALUE:
        return _promote(hll, index, count)
    end = len(hll)
    p = HDR_SIZE
    first = 0
    prev = -1
    span = 0
    oplen = 1
    while p < end:
        kind, span, _, oplen = _op(hll, p)
        if index <= first + span - 1:
            break
        prev = p
        p += oplen
        first += span
    if span == 0 or p >= end:
        raise CorruptHll
    kind, runlen, value, oplen = _op(hll, p)
    if kind == "val":
        if value >= count:
            return hll, 0
        if runlen == 1:
            hll[p] = _val(count, 1)
            return _merge_scan(hll, prev), 1
    if kind == "zero" and runlen == 1:
        hll[p] = _val(count, 1)
        return _merge_scan(hll, prev), 1
    last = first + span - 1
    seq = bytearray()
    if kind in ("zero", "xzero"):
        if index != first:
            seq += _zero_seq(index - first)
        seq.append(_val(count, 1))
        if index != last:
            seq += _zero_seq(last - index)
    else:
        if index != first:
            seq.append(_val(value, index - first))
        seq.append(_val(count, 1))
        if index != last:
            seq.append(_val(value, last - index))
    delta = len(seq) - oplen
    if delta > 0 and len(hll) + delta > max_bytes:
        return _promote(hll, index, count)
    hll[p:p + oplen] = seq
    return _merge_scan(hll, prev), 1


def _merge_scan(hll: bytearray, prev: int) -> bytearray:
    """Step 4 of hllSparseSet: merge adjacent VAL opcodes of equal value, scanning at most 5
    opcodes from the one before the change (Redis's exact loop, so the bytes match)."""
    p = prev if prev >= 0 else HDR_SIZE
    scanlen = 5
    while p < len(hll) and scanlen > 0:
        scanlen -= 1
        b = hll[p]
        if b & 0xC0 == 0x40:
            p += 2
            continue
        if b & 0xC0 == 0:
            p += 1
            continue
        if p + 1 < len(hll) and hll[p + 1] & 0x80:
            v1 = ((b >> 2) & 0x1F) + 1
            nb = hll[p + 1]
            v2 = ((nb >> 2) & 0x1F) + 1
            if v1 == v2:
                length = (b & 0x3) + 1 + (nb & 0x3) + 1
                if length <= SPARSE_VAL_MAX_LEN:
                    hll[p + 1] = _val(v1, length)
                    del hll[p]
                    continue
        p += 1
    invalidate_cache(hll)
    return hll


def _promote(hll: bytearray, index: int, count: int) -> tuple[bytearray, int]:
    dense = to_dense(hll)
    changed = dense_set_max(dense, index, count)
    assert changed
    return dense, 1


def _sparse_set_native(hll: bytearray, index: int, count: int, max_bytes: int
                       ) -> tuple[bytearray, int]:
    """sparse_set_reference with its walk and change in C (_hll.sparse_set, in place); the
    promotion to dense stays here."""
    assert _native is not None
    try:
        got = _native.sparse_set(hll, index, count, max_bytes)
    except ValueError:
        raise CorruptHll from None
    if got == 2:
        return _promote(hll, index, count)
    return hll, got


# (C: the walk to the register's opcode was ~1 ms a PFADD near hll-sparse-max-bytes)
sparse_set = sparse_set_reference if _native is None else _sparse_set_native


def add(hll: bytearray, element: bytes, max_bytes: int) -> tuple[bytearray, int]:
    """hllAdd: (the HLL, 1 if a register grew)."""
    index, count = pat_len(element)
    if hll[4] == DENSE:
        return hll, int(dense_set_max(hll, index, count))
    return sparse_set(hll, index, count, max_bytes)


def registers(hll: bytes | bytearray) -> list[int]:
    return dense_registers(hll) if hll[4] == DENSE else sparse_registers(hll)


# -- the estimator ----------------------------------------------------------------------------

def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        z_prime = z
        z += x * y
        y += y
        if z_prime == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        z_prime = z
        y *= 0.5
        z -= math.pow(1 - x, 2) * y
        if z_prime == z:
            return z / 3


def count(regs: list[int]) -> int:
    """hllCount over the registers (Ertl's estimator, Redis's order of operations)."""
    histo = [0] * 64
    for r in regs:
        histo[r] += 1
    m = float(REGISTERS)
    z = m * _tau((m - histo[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += histo[j]
        z *= 0.5
    z += m * _sigma(histo[0] / m)
    e = ALPHA_INF * m * m / z
    return int(math.floor(e + 0.5))       # llroundl: halves away from zero (e >= 0)
