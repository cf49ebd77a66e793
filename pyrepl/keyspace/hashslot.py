"""Redis Cluster's hash slot of a key, and the CRC16 it is made of (the reference, and the C one).

Theory of operation
-------------------
A cluster shards the keyspace into ``CLUSTER_SLOTS`` (16384) hash slots; a key's slot is the
CRC16 of the key (crc16.c: CRC16-CCITT in its XMODEM variant, polynomial 0x1021, initial value
0, no reflection) modulo 16384 (cluster.c keyHashSlot). Hash tags let keys share a slot: when
the key holds a ``{`` and, after the first one, a ``}`` with at least one byte between the two,
only those bytes are hashed (``{user1000}.following`` and ``{user1000}.followers``). Otherwise
(no ``{``, no ``}`` after it, or ``{}``) the whole key is hashed.

Every keyed command of a cluster node asks for its key's slot, so the names here are the C
versions when pyrepl runs its extensions (pyrepl/keyspace/_hashslot.h, exposed by
pyrepl.keyspace._ktable, whose per-slot index uses them too), and the Python references
``crc16_reference`` / ``key_hash_slot_reference`` otherwise (pyrepl/native.py);
tests/unit/test_ktable_slots.py holds the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl import native

CLUSTER_SLOTS = 16384


def _table() -> tuple[int, ...]:
    """crc16tab: the CRC of each byte value (MSB first, polynomial 0x1021)."""
    out = []
    for b in range(256):
        crc = b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        out.append(crc & 0xFFFF)
    return tuple(out)


_TAB = _table()


def crc16_reference(data: bytes) -> int:
    """Redis's crc16 (crc16.c) of ``data``."""
    if not isinstance(data, bytes):
        raise TypeError(f"crc16() takes bytes, not {type(data).__name__}")
    crc = 0
    tab = _TAB
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ tab[(crc >> 8) ^ b]
    return crc


def key_hash_slot_reference(key: bytes) -> int:
    """Redis's keyHashSlot: the slot of ``key``, its hash tag's when it has one."""
    if not isinstance(key, bytes):
        raise TypeError(f"key_hash_slot() takes bytes, not {type(key).__name__}")
    s = key.find(b"{")
    if s >= 0:
        e = key.find(b"}", s + 1)
        if e > s + 1:
            return crc16_reference(key[s + 1:e]) & (CLUSTER_SLOTS - 1)
    return crc16_reference(key) & (CLUSTER_SLOTS - 1)


crc16: Callable[[bytes], int]
key_hash_slot: Callable[[bytes], int]

if TYPE_CHECKING:
    _native: Any = None
else:
    _native = native.load("pyrepl.keyspace._ktable")

if _native is None:
    crc16, key_hash_slot = crc16_reference, key_hash_slot_reference
else:
    crc16, key_hash_slot = _native.crc16, _native.key_hash_slot
