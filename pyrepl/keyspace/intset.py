"""Sets of integers as intsets: Redis's OBJ_ENCODING_INTSET set, and when a set leaves it.

Redis 7.0 keeps a set whose members are all canonical integers (string2ll's form: no sign
'+', no leading zero, not "-0") and that has at most ``set-max-intset-entries`` members (512)
as an intset: a sorted array of 16-, 32- or 64-bit integers, widened for good when a wider one
comes (intset.c). A set created from an integer is one (setTypeCreate; the *STORE commands
start from one); adding a member that is not an integer, or one past the limit, converts it to
a hash table for good (setTypeAdd, setTypeConvert). pyrepl does the same: such a set is an
:data:`IntSet` (the C type of ``_intset.c``: 24 bytes and the intset's bytes, where a Python
set of 10 members costs ~1.2 KB), any other a hash table, a
:data:`pyrepl.keyspace.strtab.StrSet`.

An IntSet answers the part of set's interface the set commands use (``in``, ``add``,
``update``, ``remove``, ``discard``, ``difference_update``, ``pop``, ``len``, iteration in
ascending order, as SMEMBERS of an intset answers in Redis; ``intersection``, ``difference``,
``union`` as Python sets). ``OBJECT ENCODING`` says ``intset`` for it, ``hashtable`` for a set,
and the RDB writes an IntSet's bytes as they are (RDB_TYPE_SET_INTSET), as Redis does.

:class:`IntSetReference` is the Python reference (a set subclass that iterates in ascending
order and writes its intset on demand): what runs as plain Python (pyrepl/native.py), and
what tests/unit/test_intset.py holds the C type equal to.

The limit is process-wide as Redis's ``server.set_max_intset_entries``: :func:`configure`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyrepl import native
from pyrepl.keyspace.listpack import canonical_int
from pyrepl.keyspace.strtab import StrSet

_I16 = (-(1 << 15), (1 << 15) - 1)
_I32 = (-(1 << 31), (1 << 31) - 1)


def _width(v: int) -> int:
    if _I16[0] <= v <= _I16[1]:
        return 2
    if _I32[0] <= v <= _I32[1]:
        return 4
    return 8


class IntSetReference(set):
    """The reference of ``_intset.IntSet``: a set of canonical integers' bytes that iterates
    in ascending order and keeps the width its widest member ever needed."""

    __slots__ = ("width",)

    def __init__(self, members: Iterable[bytes] = ()) -> None:
        super().__init__()
        self.width = 2
        for m in members:
            self.add(m)

    def add(self, member: bytes) -> None:
        if not isinstance(member, bytes):
            raise TypeError("IntSet members are bytes")
        v = canonical_int(member)
        if v is None:
            raise ValueError(f"IntSet members are canonical integers, not {member!r}")
        self.width = max(self.width, _width(v))
        set.add(self, member)

    def update(self, *iterables: Iterable[bytes]) -> None:  # type: ignore[override]
        for it in iterables:
            for m in it:
                self.add(m)

    def __iter__(self) -> Iterator[bytes]:
        return iter(sorted(set.__iter__(self), key=int))

    def pop(self) -> bytes:
        if not self:
            raise KeyError("pop from an empty IntSet")
        m = max(set.__iter__(self), key=int)
        set.remove(self, m)
        return m

    def copy(self) -> IntSetReference:
        c = IntSetReference(set.__iter__(self))
        c.width = self.width
        return c

    def __reduce__(self) -> Any:
        return (IntSetReference, (list(self),))

    def __repr__(self) -> str:
        return f"IntSet({list(self)!r})"

    def to_intset(self) -> bytes:
        """<u32 encoding><u32 length><the integers, little-endian, ascending>."""
        w = self.width
        body = b"".join(int(m).to_bytes(w, "little", signed=True) for m in self)
        return w.to_bytes(4, "little") + len(self).to_bytes(4, "little") + body

    @classmethod
    def from_intset(cls, blob: bytes) -> IntSetReference | None:
        """An IntSet of a Redis intset's bytes, None when they are not one."""
        if len(blob) < 8:
            return None
        w = int.from_bytes(blob[:4], "little")
        n = int.from_bytes(blob[4:8], "little")
        if w not in (2, 4, 8) or len(blob) != 8 + n * w:
            return None
        vals = [int.from_bytes(blob[8 + i * w:8 + (i + 1) * w], "little", signed=True)
                for i in range(n)]
        if any(a >= b for a, b in zip(vals, vals[1:], strict=False)):
            return None
        s = cls(b"%d" % v for v in vals)
        s.width = w
        return s


_native = native.load("pyrepl.keyspace._intset")
IntSet: Any = _native.IntSet if _native is not None else IntSetReference
# The C type, whose size (sys.getsizeof) is all it holds; None as plain Python.
NATIVE_TYPE: Any = _native.IntSet if _native is not None else None


class _Limits:
    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries = 512


limits = _Limits()


def configure(max_entries: int) -> None:
    """set-max-intset-entries (at most 2**30, as setTypeAdd caps it)."""
    limits.entries = min(max_entries, 1 << 30)


def all_ints(members: Iterable[bytes]) -> bool:
    """Every member a canonical integer (what an intset can hold)."""
    return all(canonical_int(m) is not None for m in members)


def compact(members: Iterable[bytes]) -> Any:
    """A new set holding ``members`` as Redis would after adding them one by one to an
    intset (RDB loading, the *STORE commands): an IntSet, or a hash table (a StrSet) once a
    limit is passed."""
    ms = members if isinstance(members, (set, frozenset, list, tuple)) else list(members)
    if len(ms) <= limits.entries and all_ints(ms):
        return IntSet(ms)
    return StrSet(ms)


def to_set(db: Any, key: bytes, s: Any) -> Any:
    """setTypeConvert(INTSET -> HT): the StrSet that replaces the IntSet at ``key``."""
    out = StrSet(s)
    db.data[key] = out
    return out
