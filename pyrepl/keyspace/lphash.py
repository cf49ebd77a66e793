"""Small hashes as listpacks: Redis's OBJ_ENCODING_LISTPACK hash, and when a hash leaves it.

Redis keeps a hash of at most ``hash-max-listpack-entries`` fields (512), none of whose fields
or values is longer than ``hash-max-listpack-value`` bytes (64), as one listpack of field,
value, field, value...; past either limit it converts it to a hash table, for good (t_hash.c:
hashTypeTryConversion, hashTypeSet, hashTypeConvert). pyrepl does the same: a small hash is a
:data:`ListpackHash` (the C type of ``_lphash.c``: a 32-byte object and a listpack of exactly
Redis's bytes, where a dict of 10 fields costs ~1.3 KB), a large one a ``dict``. A hash with
field TTLs is a :class:`pyrepl.keyspace.hashttl.HashEx` either way.

Both answer the dict interface the hash commands use (``get``, ``[]``, ``in``, ``pop``,
``len``, iteration; ``keys``/``values``/``items`` as lists) in the same order: insertion
order, an update in place. ``OBJECT ENCODING`` says ``listpack`` for a ListpackHash,
``hashtable`` for a dict, and the RDB writes a ListpackHash's listpack as it is
(RDB_TYPE_HASH_LISTPACK), as Redis does.

:class:`ListpackHashReference` is the Python reference (a dict subclass answering the same,
its listpack built on demand): what runs as plain Python (pyrepl/native.py), and what
tests/unit/test_lphash.py holds the C type equal to.

The limits are process-wide as Redis's ``server.hash_max_listpack_*`` are: :func:`configure`
(the server calls it at start and on CONFIG SET).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyrepl import native
from pyrepl.keyspace.listpack import lp_str_entry
from pyrepl.keyspace.strtab import ListedDict, StrDict

_U32_COUNT_MAX = 0xFFFF
_SSIZE_MAX = (1 << 63) - 1
# lpSafeToAdd: a listpack never grows past 1 GB
SAFETY_BYTES = 1 << 30


class ListpackHashReference(ListedDict):
    """The reference of ``_lphash.ListpackHash``: a dict of bytes to bytes that lists its
    fields, values and items as lists and writes its listpack on demand."""

    __slots__ = ()

    def __setitem__(self, field: bytes, value: bytes) -> None:
        if not isinstance(field, bytes) or not isinstance(value, bytes):
            raise TypeError("ListpackHash fields and values must be bytes")
        dict.__setitem__(self, field, value)

    def __repr__(self) -> str:
        return f"ListpackHash({dict(self)!r})"

    def to_listpack(self) -> bytes:
        """field, value, ... as lpAppend writes them (canonical integers as integers)."""
        body = b"".join(lp_str_entry(s) for kv in dict.items(self) for s in kv)
        total = 7 + len(body)
        count = min(2 * len(self), _U32_COUNT_MAX)
        return total.to_bytes(4, "little") + count.to_bytes(2, "little") + body + b"\xff"


_native = native.load("pyrepl.keyspace._lphash")
ListpackHash: Any = _native.ListpackHash if _native is not None else ListpackHashReference
# The C type, whose size (sys.getsizeof) is all it holds; None as plain Python.
NATIVE_TYPE: Any = _native.ListpackHash if _native is not None else None


class _Limits:
    __slots__ = ("entries", "value")

    def __init__(self) -> None:
        self.entries = 512
        self.value = 64


limits = _Limits()


def configure(max_entries: int, max_value: int) -> None:
    """hash-max-listpack-entries and hash-max-listpack-value."""
    limits.entries = max_entries
    limits.value = max_value
    if _native is not None:
        _native.configure(min(max_entries, _SSIZE_MAX), min(max_value, _SSIZE_MAX))


def fits(strings: Iterable[bytes]) -> bool:
    """hashTypeTryConversion's test: every string short enough for a listpack, and their sum
    safe to add."""
    limit = limits.value
    total = 0
    for s in strings:
        n = len(s)
        if n > limit:
            return False
        total += n
    return total < SAFETY_BYTES


def compact(pairs: Iterable[tuple[bytes, bytes]] | dict, by_count: bool = False) -> Any:
    """A new hash holding ``pairs`` as Redis would after adding them one by one to an empty
    one (RDB loading, RESTORE): a ListpackHash, or a hash table (a StrDict) once a limit is
    passed. With
    ``by_count`` only the number of fields counts (a listpack blob, which Redis 7.0 keeps as it
    is when it has few enough)."""
    items = list(pairs.items()) if hasattr(pairs, "items") else list(pairs)
    if len(items) <= limits.entries and (by_count or fits(s for kv in items for s in kv)):
        return ListpackHash(items)
    return StrDict(items)


def to_dict(db: Any, key: bytes, h: Any) -> Any:
    """hashTypeConvert(LISTPACK -> HT): the StrDict that replaces the ListpackHash at ``key``."""
    d = StrDict(h.items())
    db.data[key] = d
    return d
