"""Sets of bytes and hashes of bytes with their keys inline: the hashtable-encoded set and hash.

Redis keeps a set that is not an intset, and a hash past the listpack's limits, as a hash table
(OBJ_ENCODING_HT). pyrepl keeps them as Python ``set`` and ``dict`` objects of bytes today, which
cost ~1,200 B for a set of 10 short members and ~138 B a field for a large hash (Redis 7.0:
842 B and 83 B). :data:`StrSet` and :data:`StrDict` are the C types of ``_strtab.c`` that are
to replace them: a compact dict (an index of 1-, 2- or 4-byte slots, dense entries in insertion
order) whose keys are stored inline, each one PyMem block of a length prefix and its bytes, so a
set of 10 seven-byte members costs 400 B and a large hash ~100 B a field, its values included.

What they answer (the part of ``set`` and ``dict`` the set and hash commands use, and what
:class:`pyrepl.keyspace.intset.IntSet` and :class:`pyrepl.keyspace.lphash.ListpackHash` answer):

* ``StrSet(iterable=())``: ``in``, ``len``, iteration (new bytes objects, insertion order),
  ``add``, ``update(*iterables)``, ``remove`` (KeyError), ``discard``,
  ``difference_update(*iterables)``, ``pop()`` (the last member: the newest still there, O(1)),
  ``clear``, ``copy`` (a StrSet), ``intersection`` / ``difference`` / ``union`` (Python sets),
  ``==`` with a set, frozenset or StrSet, pickling (``__reduce__``: the members in order).
* ``StrDict(mapping or pairs=())``: ``in``, ``len``, iteration over the keys, ``d[k]`` (the value
  stored, the object itself), ``d[k] = v``, ``del d[k]``, ``get(k, default=None)``,
  ``pop(k[, default])``, ``popitem()`` (the last item, as dict's), ``setdefault(k, default)``,
  ``update(mapping or pairs)``, ``keys()`` / ``values()`` / ``items()`` as lists (as
  ListpackHash answers them), ``clear``, ``copy`` (a StrDict), ``==`` with a dict or StrDict,
  pickling (the items in order).
* Both, beyond set and dict: random picks in O(1) expected a pick (today's commands take
  ``random.choice(tuple(s))``, O(n)): ``StrSet.random_member()`` / ``StrDict.random_key()`` and
  ``StrDict.random_item()`` (KeyError when empty), ``sample(k)`` (min(k, len) distinct keys in
  random order; StrDict: ``sample(k, items=False)``, pairs with ``items``), ``choices(k)`` (k
  independent picks, repeats possible, ``[]`` when empty; StrDict: ``choices(k, items=False)``);
  ``shrink()``, the tightest layout for what is there (whether it changed anything: the C
  types also shrink on their own as deletions empty them); ``__sizeof__`` (C: the object, its
  index, its entries and its keys' blobs at pymalloc's 16-byte granularity, not the values).

Keys and values are exact ``bytes``: storing anything else raises TypeError, and a lookup of
anything else finds nothing (``in`` answers False, ``get`` the default, ``remove`` / ``del`` /
``pop`` KeyError, ``discard`` nothing). Both types can be subclassed; ``copy()`` answers the
base type, as ``dict.copy`` does.

:class:`StrSetReference` and :class:`StrDictReference` are the Python references: what runs as
plain Python (pyrepl/native.py), and what tests/unit/test_strtab.py holds the C types equal to,
in the same order: insertion order for both (StrSetReference keeps its members as a dict's keys
for that: its ``pop()`` is ``popitem()``'s, the last member, as the C type's). Their random
picks draw from Python's ``random`` module in O(n), their sizes are Python's.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from pyrepl import native


def _member(m: object) -> bytes:
    if type(m) is not bytes:
        raise TypeError(f"StrSet members must be bytes, not {type(m).__name__}")
    return m


def _sample(keys: list, k: int) -> list:
    """min(k, len) distinct picks in random order, as the C types' sample."""
    return random.sample(keys, max(0, min(k, len(keys))))


def _choices(keys: list, k: int) -> list:
    return random.choices(keys, k=k) if k > 0 and keys else []


class StrSetReference:
    """The reference of ``_strtab.StrSet``: a set of bytes in insertion order (a dict's keys)."""

    __slots__ = ("_d",)

    def __init__(self, iterable: Iterable[bytes] = ()) -> None:
        self._d: dict[bytes, None] = {}
        self.update(iterable)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, m: object) -> bool:
        return type(m) is bytes and m in self._d

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._d)

    def add(self, m: bytes) -> None:
        self._d[_member(m)] = None

    def update(self, *iterables: Iterable[bytes]) -> None:
        d = self._d
        for it in iterables:
            if it is self:
                continue
            for m in it:
                d[_member(m)] = None

    def discard(self, m: object) -> None:
        if type(m) is bytes:
            self._d.pop(m, None)

    def remove(self, m: object) -> None:
        if type(m) is not bytes or m not in self._d:
            raise KeyError(m)
        del self._d[m]

    def difference_update(self, *iterables: Iterable[object]) -> None:
        for it in iterables:
            if it is self:
                self._d.clear()
                continue
            for m in list(it):
                self.discard(m)

    def pop(self) -> bytes:
        if not self._d:
            raise KeyError("pop from an empty StrSet")
        return self._d.popitem()[0]

    def clear(self) -> None:
        self._d.clear()

    def copy(self) -> StrSetReference:
        return StrSetReference(self._d)

    def intersection(self, *others: Iterable[Any]) -> set[bytes]:
        return set(self._d).intersection(*others)

    def difference(self, *others: Iterable[Any]) -> set[bytes]:
        return set(self._d).difference(*others)

    def union(self, *others: Iterable[Any]) -> set[bytes]:
        return set(self._d).union(*others)

    def random_member(self) -> bytes:
        if not self._d:
            raise KeyError("random pick from an empty StrSet")
        return random.choice(list(self._d))

    def sample(self, k: int) -> list[bytes]:
        return _sample(list(self._d), k)

    def choices(self, k: int) -> list[bytes]:
        return _choices(list(self._d), k)

    def shrink(self) -> bool:
        """(A dict has no such control: a copy of it is as compact as Python makes one.)"""
        self._d = dict(self._d)
        return False

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (set, frozenset)):
            return self._d.keys() == other
        if isinstance(other, StrSetReference):
            return self._d.keys() == other._d.keys()
        if _native is not None and isinstance(other, _native.StrSet):
            return self._d.keys() == set(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (type(self), (list(self._d),))

    def __repr__(self) -> str:
        return f"StrSet({list(self._d)!r})"


def _pair(k: object, v: object) -> None:
    if type(k) is not bytes:
        raise TypeError(f"StrDict keys must be bytes, not {type(k).__name__}")
    if type(v) is not bytes:
        raise TypeError(f"StrDict values must be bytes, not {type(v).__name__}")


class ListedDict(dict):
    """A dict whose keys, values and items are lists and whose copy is of its own class: the
    interface of the hash commands' C mappings (ListpackHash, StrDict), which their references
    share."""

    __slots__ = ()

    def keys(self) -> list[bytes]:  # type: ignore[override]
        return list(dict.keys(self))

    def values(self) -> list[bytes]:  # type: ignore[override]
        return list(dict.values(self))

    def items(self) -> list[tuple[bytes, bytes]]:  # type: ignore[override]
        return list(dict.items(self))

    def copy(self) -> Any:
        return type(self)(dict.items(self))


class StrDictReference(ListedDict):
    """The reference of ``_strtab.StrDict``: a dict of bytes to bytes that lists its keys,
    values and items as lists."""

    __slots__ = ()

    def __init__(self, src: Any = ()) -> None:
        super().__init__()
        self.update(src)

    def __setitem__(self, k: bytes, v: bytes) -> None:
        _pair(k, v)
        dict.__setitem__(self, k, v)

    def __getitem__(self, k: bytes) -> bytes:
        if type(k) is not bytes:
            raise KeyError(k)
        return dict.__getitem__(self, k)

    def __delitem__(self, k: bytes) -> None:
        if type(k) is not bytes:
            raise KeyError(k)
        dict.__delitem__(self, k)

    def __contains__(self, k: object) -> bool:
        return type(k) is bytes and dict.__contains__(self, k)

    def get(self, k: object, default: Any = None) -> Any:
        return dict.get(self, k, default) if type(k) is bytes else default

    _MISSING: Any = object()

    def pop(self, k: object, default: Any = _MISSING) -> Any:
        if type(k) is bytes and dict.__contains__(self, k):
            return dict.pop(self, k)
        if default is StrDictReference._MISSING:
            raise KeyError(k)
        return default

    def popitem(self) -> tuple[bytes, bytes]:
        if not self:
            raise KeyError("popitem(): StrDict is empty")
        return dict.popitem(self)

    def setdefault(self, k: bytes, default: Any = None) -> Any:
        if type(k) is bytes and dict.__contains__(self, k):
            return dict.__getitem__(self, k)
        _pair(k, default)
        dict.__setitem__(self, k, default)
        return default

    def update(self, src: Any = ()) -> None:  # type: ignore[override]
        if src is self:
            return
        if isinstance(src, dict) or hasattr(src, "keys"):
            for k in list(src.keys()):
                self[k] = src[k]
            return
        for item in src:
            pair = tuple(item)
            if len(pair) != 2:
                raise ValueError(f"StrDict update sequence element has length {len(pair)}; "
                                 "2 is required")
            self[pair[0]] = pair[1]

    def random_key(self) -> bytes:
        if not self:
            raise KeyError("random pick from an empty StrDict")
        return random.choice(list(dict.keys(self)))

    def random_item(self) -> tuple[bytes, bytes]:
        k = self.random_key()
        return (k, dict.__getitem__(self, k))

    def sample(self, k: int, items: bool = False) -> list:
        return _sample(list(dict.items(self) if items else dict.keys(self)), k)

    def choices(self, k: int, items: bool = False) -> list:
        return _choices(list(dict.items(self) if items else dict.keys(self)), k)

    def shrink(self) -> bool:
        """(A dict has no such control.)"""
        return False

    def __reduce__(self) -> Any:
        return (type(self), (list(dict.items(self)),))

    def __repr__(self) -> str:
        return f"StrDict({dict(self)!r})"


_native = native.load("pyrepl.keyspace._strtab")
StrSet: Any = _native.StrSet if _native is not None else StrSetReference
StrDict: Any = _native.StrDict if _native is not None else StrDictReference
# The C types, whose sizes (sys.getsizeof) count their keys but not a StrDict's values; None
# as plain Python.
NATIVE_SET: Any = _native.StrSet if _native is not None else None
NATIVE_DICT: Any = _native.StrDict if _native is not None else None
