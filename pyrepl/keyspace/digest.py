"""DEBUG DIGEST / DEBUG DIGEST-VALUE, bit-for-bit as Redis 7.0 computes them (debug.c).

Theory of operation: two SHA1-based mixers. ``xor(d, data)`` xors SHA1(data) into the 20-byte
accumulator ``d`` and is order-independent (keys, set members, hash fields, sorted-set members);
``mix(d, data)`` is xor followed by replacing ``d`` with SHA1(d), order-dependent (list elements,
the parts of one element). Note that aggregating an element digest ``e`` is ``xor(d, e)``, i.e.
it xors SHA1(e), not e. Per key: ``d = mix(0, key)``, ``mix(d, be32(type))``, then the value
(string: mix bytes; list: mix each element; set: xor each member; hash: per field
``xor(d, mix(mix(0, field), value))``, Redis 8 xoring "!!hexpire!!" into that element digest
when the field has a TTL; zset: per member ``xor(d, mix(mix(0, member),
"%.17g" % score))``), then ``xor(d, "!!expire!!")`` if the key has a TTL. Per database that
holds keys, ``final = mix(final, be32(db index))``, then ``xor(final, d)`` for every key digest
``d``. An empty dataset gives 40 zeros.

Integers held in compact encodings are hashed as their decimal text in Redis, which is exactly
how the model stores them, and "%.17g" formats doubles the same way in C and Python (inf, -inf,
-0 included), so a value built in Python hashes like the same value inside Redis whatever its
encoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from hashlib import sha1
from typing import Any, Protocol

from pyrepl.keyspace.hashttl import HashEx
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.ktable import KeyTable
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.stream import MASK64, Stream
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet

# In-memory object types (server.h OBJ_*): each type's digest starts from its code's.
OBJ_STRING, OBJ_LIST, OBJ_SET, OBJ_ZSET, OBJ_HASH, OBJ_STREAM = 0, 1, 2, 3, 4, 6

_ZERO = bytes(20)
_EXPIRE_SHA = sha1(b"!!expire!!").digest()
_HEXPIRE_SHA = int.from_bytes(sha1(b"!!hexpire!!").digest(), "big")
_TYPE_SHA = {t: sha1(t.to_bytes(4, "big")).digest() for t in range(7)}


class DbLike(Protocol):
    @property
    def data(self) -> KeyTable | dict[bytes, Any]: ...
    @property
    def expires(self) -> KeyTable | dict[bytes, int]: ...


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(20, "big")


def _mix(digest: bytes, data: bytes) -> bytes:
    """mixDigest: SHA1(digest xor SHA1(data))."""
    return sha1(_xor(digest, sha1(data).digest())).digest()


def _mix_sha(digest: bytes, data_sha: bytes) -> bytes:
    return sha1(_xor(digest, data_sha)).digest()


def _pair_digest(a: bytes, b: bytes) -> int:
    """SHA1 of the element digest mix(mix(0, a), b), as an int: what xorDigest(digest,
    eledigest, 20) xors into the value digest."""
    first = sha1(sha1(a).digest()).digest()  # mix(zero, a): zero xor x == x
    element = sha1(_xor(first, sha1(b).digest())).digest()
    return int.from_bytes(sha1(element).digest(), "big")


def _pair_digest_hfe(a: bytes, b: bytes) -> int:
    """Like :func:`_pair_digest` for a field with a TTL: SHA1("!!hexpire!!") is xored into
    the element digest before it is aggregated."""
    first = sha1(sha1(a).digest()).digest()
    element = int.from_bytes(sha1(_xor(first, sha1(b).digest())).digest(), "big") ^ _HEXPIRE_SHA
    return int.from_bytes(sha1(element.to_bytes(20, "big")).digest(), "big")


def _value_digest(digest: bytes, value: Any) -> bytes:
    """xorObjectDigest minus the expire part: mix the type, then the value, into ``digest``."""
    t = type(value)
    if t is bytes:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_STRING])
        return _mix(digest, value)
    if t is StrSet or t is IntSet or t is set or t is frozenset:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_SET])
        acc = int.from_bytes(digest, "big")
        for m in value:
            acc ^= int.from_bytes(sha1(m).digest(), "big")
        return acc.to_bytes(20, "big")
    if t is StrDict or t is ListpackHash or t is dict:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_HASH])
        acc = int.from_bytes(digest, "big")
        for f, v in value.items():
            acc ^= _pair_digest(f, v)
        return acc.to_bytes(20, "big")
    if t is HashEx:
        # Redis 8: a field with a TTL has "!!hexpire!!" xored into its element digest.
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_HASH])
        acc = int.from_bytes(digest, "big")
        ttl = value.ttl
        for f, v in value.items():
            if f in ttl:
                acc ^= _pair_digest_hfe(f, v)
            else:
                acc ^= _pair_digest(f, v)
        return acc.to_bytes(20, "big")
    if t is ZSet or t is ListpackZSet:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_ZSET])
        acc = int.from_bytes(digest, "big")
        for m, score in value.items():
            acc ^= _pair_digest(m, b"%.17g" % score)
        return acc.to_bytes(20, "big")
    if t is Stream:
        # Live entries in ID order: mix "<ms>.<seq>", then each field and value (consumer
        # groups are not part of the digest).
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_STREAM])
        for eid, fv in value.entries():
            digest = _mix(digest, b"%d.%d" % (eid >> 64, eid & MASK64))
            for x in fv:
                digest = _mix(digest, x)
        return digest
    if isinstance(value, Iterable):  # deque / list
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_LIST])
        for e in value:
            digest = _mix(digest, e)
        return digest
    raise TypeError(f"cannot digest a value of type {t.__name__}")


def key_digest(value: Any, expire_ms: int | None) -> str:
    """DEBUG DIGEST-VALUE for one key (the key name itself is not part of it)."""
    d = _value_digest(_ZERO, value)
    if expire_ms is not None:
        d = _xor(d, _EXPIRE_SHA)
    return d.hex()


def dataset_digest(dbs: Sequence[DbLike], now_ms: int | None = None) -> str:
    """DEBUG DIGEST of the whole dataset (db index = position in ``dbs``).

    Redis hashes every key present in its dictionaries, including keys that are logically
    expired but not yet removed; pass ``now_ms=None`` to do the same. With ``now_ms`` the keys
    already expired at that time (``now_ms > expire``) are left out."""
    final = _ZERO
    for dbid, db in enumerate(dbs):
        data = db.data
        if not data:
            continue
        expires = db.expires
        keys: Iterable[tuple[bytes, Any]] = data.items()
        if now_ms is not None and expires:
            keys = [(k, v) for k, v in keys if not (k in expires and now_ms > expires[k])]
            if not keys:
                continue
        final = _mix(final, dbid.to_bytes(4, "big"))
        acc = int.from_bytes(final, "big")
        for k, v in keys:
            d = _value_digest(sha1(sha1(k).digest()).digest(), v)
            if k in expires:
                d = _xor(d, _EXPIRE_SHA)
            acc ^= int.from_bytes(sha1(d).digest(), "big")  # xorDigest(final, digest, 20)
        final = acc.to_bytes(20, "big")
    return final.hex()
