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

A value's elements are digested by ``mix``, ``xor_each``, ``xor_pairs`` and ``mix_entries``: in
C (``_digest.c``, a plain SHA1 and the loop over the elements in one call) when built, these
functions' ``*_reference`` otherwise. Through hashlib a mix is ~1.6 us, minutes for a dataset of
big streams, during which a replica sends its master no ACK; a string's one SHA1 stays with
hashlib (OpenSSL's, faster than ours on 100 KB).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from hashlib import sha1
from typing import Any, Protocol

from pyrepl import native
from pyrepl.keyspace.hashttl import HashEx
from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.ktable import KeyTable
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.stream import FLAG_DELETED, MASK64, MAX_ID, Stream
from pyrepl.keyspace.strtab import StrDict, StrSet
from pyrepl.keyspace.zset import ListpackZSet, ZSet

# In-memory object types (server.h OBJ_*): each type's digest starts from its code's.
OBJ_STRING, OBJ_LIST, OBJ_SET, OBJ_ZSET, OBJ_HASH, OBJ_STREAM = 0, 1, 2, 3, 4, 6

_ZERO = bytes(20)
_EXPIRE_SHA = sha1(b"!!expire!!").digest()
_HEXPIRE_SHA = sha1(b"!!hexpire!!").digest()
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


def _element_digest(a: bytes, b: bytes | float) -> bytes:
    """mix(mix(0, a), b), a float ``b`` (a score) as "%.17g" of it."""
    text = b if isinstance(b, bytes) else b"%.17g" % b
    first = sha1(sha1(a).digest()).digest()  # mix(zero, a): zero xor x == x
    return sha1(_xor(first, sha1(text).digest())).digest()


# -- a value's elements, in C (_digest.c) when built; these are its references --------------

def mix_reference(digest: bytes, items: Iterable[bytes]) -> bytes:
    """mixDigest of each item in turn (a list's elements, a string's parts)."""
    for x in items:
        digest = _mix(digest, x)
    return digest


def xor_each_reference(digest: bytes, items: Iterable[bytes]) -> bytes:
    """xorDigest of each item (a set's members): order does not matter."""
    acc = int.from_bytes(digest, "big")
    for x in items:
        acc ^= int.from_bytes(sha1(x).digest(), "big")
    return acc.to_bytes(20, "big")


def xor_pairs_reference(digest: bytes, pairs: Iterable[tuple[bytes, bytes | float]],
                        marked: Container[bytes] | None = None, mark: bytes | None = None
                        ) -> bytes:
    """xorDigest of each pair's element digest (a hash's fields and values, a sorted set's
    members and scores); for a first in ``marked``, the element digest xored with ``mark``
    first (Redis 8's "!!hexpire!!" for a field with a TTL)."""
    acc = int.from_bytes(digest, "big")
    for a, b in pairs:
        e = _element_digest(a, b)
        if marked is not None and a in marked:
            e = _xor(e, mark)  # type: ignore[arg-type]
        acc ^= int.from_bytes(sha1(e).digest(), "big")
    return acc.to_bytes(20, "big")


def mix_entries_reference(digest: bytes, ids: list[int], flags: list[int],
                          fvs: list[list[bytes]]) -> bytes:
    """A stream node's live entries in order: mix "<ms>.<seq>", then each field and value
    (consumer groups are not part of the digest)."""
    for eid, flag, fv in zip(ids, flags, fvs, strict=True):
        if flag & FLAG_DELETED:
            continue
        if not 0 <= eid <= MAX_ID:
            raise OverflowError("a stream ID is in [0, 2**128)")
        digest = _mix(digest, b"%d.%d" % (eid >> 64, eid & MASK64))
        for x in fv:
            digest = _mix(digest, x)
    return digest


_digest = native.load("pyrepl.keyspace._digest")
mix = mix_reference if _digest is None else _digest.mix
xor_each = xor_each_reference if _digest is None else _digest.xor_each
xor_pairs = xor_pairs_reference if _digest is None else _digest.xor_pairs
mix_entries = mix_entries_reference if _digest is None else _digest.mix_entries


def _value_digest(digest: bytes, value: Any) -> bytes:
    """xorObjectDigest minus the expire part: mix the type, then the value, into ``digest``."""
    t = type(value)
    if t is bytes:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_STRING])
        return _mix(digest, value)      # (hashlib: a big string's SHA1 at OpenSSL's speed)
    if t is StrSet or t is IntSet or t is set or t is frozenset:
        return xor_each(_mix_sha(digest, _TYPE_SHA[OBJ_SET]), value)
    if t is StrDict or t is ListpackHash or t is dict:
        return xor_pairs(_mix_sha(digest, _TYPE_SHA[OBJ_HASH]), value.items())
    if t is HashEx:
        return xor_pairs(_mix_sha(digest, _TYPE_SHA[OBJ_HASH]), value.items(), value.ttl,
                         _HEXPIRE_SHA)
    if t is ZSet or t is ListpackZSet:
        return xor_pairs(_mix_sha(digest, _TYPE_SHA[OBJ_ZSET]), value.items())
    if t is Stream:
        digest = _mix_sha(digest, _TYPE_SHA[OBJ_STREAM])
        for node in value.nodes:
            d = node.entries()
            digest = mix_entries(digest, d.ids, d.flags, d.fvs)
        return digest
    if isinstance(value, Iterable):  # deque / list
        return mix(_mix_sha(digest, _TYPE_SHA[OBJ_LIST]), value)
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
