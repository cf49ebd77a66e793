"""The keyspace's table: a mapping with 24 bits of age per key, and its plain-Python reference.

Theory of operation
-------------------
A database's keys (``Database.data``) and TTLs (``Database.expires``) live in a ``KeyTable``:
a mapping in insertion order, as a dict, whose every entry also carries the 24 bits Redis keeps
per key (``robj->lru``, pyrepl/keyspace/ageing.py) for eviction and OBJECT IDLETIME/FREQ, and
which answers a few keys at random in O(1) each (``sample``, Redis's dictGetSomeKeys) and
gives memory back after deletions (``shrink``, tryResizeHashTables). In C
(pyrepl/keyspace/_ktable.c) the age shares a dict-sized entry with the key and the value, so it
costs no memory; this module is the Python reference, with the same answers, that runs when
pyrepl runs as plain Python (pyrepl/native.py), and ``KeyTable`` is whichever runs. The C
table also keeps a string value that is an integer (canonical, 63 bits) in the entry instead of
a reference to its bytes, as Redis's OBJ_ENCODING_INT keeps it in the robj (40-48 B a key
less); a read makes the equal bytes again, so a value read back is equal to, not the same
object as, the one stored (nothing may rely on its identity).

Ageing, Redis 7.0's rules, with module state the server sets: :func:`configure` (the policy,
lfu-log-factor, lfu-decay-time) and :func:`set_clock` (the LRU clock and the LFU minutes of
``now_ms``, from each batch). A read (``get``, ``t[k]``, ``setdefault`` of a present key)
and an overwrite (``t[k] = v`` of a present key: setKey keeps the LFU counter) *touch* the key
as lookupKey does: LRU, its age becomes the clock; LFU, ``ageing.lfu_touch`` (decay,
logarithmic increment, time stamp). A new key starts at the clock (LRU) or at
``ageing.lfu_initial`` (LFU). ``peek``, ``in``, iteration and ``age`` never touch (Redis's
LOOKUP_NOTOUCH: EXISTS, TYPE, OBJECT, TTL). A table made with ``ageing=False`` (the expires)
never stamps. The LFU increments and ``sample`` draw from splitmix64 generators that
:func:`seed` sets in both implementations alike, so a test can hold them equal.

The reference keeps ``_pos`` (key -> position) and parallel lists of keys, values and ages in
insertion order; a deletion leaves a hole, and the lists are compacted when holes make up half
of them, so ``sample`` (random positions walked forward to a live key, as the C table does)
stays O(1) a key.

A cluster node's table also keeps, once ``track_slots()`` is called (off by default: a table
that does not track pays nothing), each hash slot's keys and their count (Redis 7.0's
slot_to_keys, cluster.c slotToKeyAddEntry/DelEntry), kept right by every way a key enters or
leaves (set of a new key, ``setdefault``, ``pop``, ``del``, ``clear``, and the C table's C API
that the other extensions write through), O(1) each: ``slot_count(slot)`` (CLUSTER
COUNTKEYSINSLOT) and ``slot_keys(slot, count)`` (GETKEYSINSLOT: up to ``count`` keys, newest
first; an overwrite keeps a key's place). A tracking table takes bytes keys only (TypeError
otherwise, nothing changed). The C table links its entries (8 B a key: _ktable.c, "per-slot
index"); this reference keeps a dict per slot in insertion order and reads it backwards.
"""

from __future__ import annotations

import operator
import random as _random
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any

from pyrepl import native
from pyrepl.keyspace import ageing
from pyrepl.keyspace.hashslot import CLUSTER_SLOTS, key_hash_slot_reference
from pyrepl.keyspace.listpack import canonical_int

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_SAMPLE_SALT = 0x5DEECE66D
_SAMPLE_PICKS = 64      # up to this many, independent picks; more: one contiguous walk
AGE_MAX = ageing.LRU_CLOCK_MAX


class _Splitmix64:
    """splitmix64, as _ktable.c draws: ``next()`` 64 bits, ``random()`` a float in [0, 1)."""

    __slots__ = ("state",)

    def __init__(self, state: int) -> None:
        self.state = state & _M64

    def next(self) -> int:
        self.state = z = (self.state + _GOLDEN) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return z ^ (z >> 31)

    def random(self) -> float:
        return (self.next() >> 11) * 2.0 ** -53


class _Ageing:
    """The module state: policy, clock and generators (the reference's; _ktable.c has its own,
    and the functions below set both)."""

    __slots__ = ("lfu", "log_factor", "decay_time", "now_ms", "lru_clock", "lfu_rng",
                 "sample_rng", "saved")

    def __init__(self) -> None:
        self.lfu = False
        self.saved = ""         # what the RDB keeps of a key's age: "lru", "lfu" or nothing
        self.log_factor = 10
        self.decay_time = 1
        self.now_ms = 0
        self.lru_clock = 0
        n = _random.getrandbits(64)
        self.lfu_rng = _Splitmix64(n)
        self.sample_rng = _Splitmix64(n ^ _SAMPLE_SALT)

    def touched(self, age: int) -> int:
        if not self.lfu:
            return self.lru_clock
        return ageing.lfu_touch(age, self.now_ms, self.log_factor, self.decay_time,
                                self.lfu_rng.random)

    def initial(self) -> int:
        return ageing.lfu_initial(self.now_ms) if self.lfu else self.lru_clock


_state = _Ageing()
_HOLE: Any = object()       # a deleted key's place in the lists


class _View:
    """keys(), values() and items() of a reference table: iterable, sized, ``in``."""

    __slots__ = ("_t", "_kind")

    def __init__(self, t: KeyTableReference, kind: int) -> None:
        self._t = t
        self._kind = kind

    def __len__(self) -> int:
        return len(self._t)

    def __iter__(self) -> Iterator[Any]:
        t = self._t
        if self._kind == 0:
            return iter(t._pos)
        if self._kind == 1:
            return (t._vals[i] for i in _checked(t))
        return ((t._keys[i], t._vals[i]) for i in _checked(t))

    def __contains__(self, x: object) -> bool:
        t = self._t
        if self._kind == 0:
            return x in t._pos
        if self._kind == 2:
            if not isinstance(x, tuple) or len(x) != 2:
                return False
            i = t._pos.get(x[0])
            return i is not None and bool(t._vals[i] == x[1])
        return any(v == x for v in self)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        """Whether none of ``other``'s elements is in the view (a set's isdisjoint)."""
        return not any(x in self for x in other)

    def __repr__(self) -> str:
        return f"KeyTable_{('keys', 'values', 'items')[self._kind]}({list(self)!r})"


def _checked(t: KeyTableReference) -> Iterator[int]:
    """The live positions in order; RuntimeError if the table changes meanwhile."""
    mods = t._mods
    for i in t._pos.values():
        yield i
        if t._mods != mods:
            raise RuntimeError("KeyTable changed size during iteration")


class KeyTableReference:
    """``KeyTable(ageing=True)``: a mapping in insertion order with a 24-bit age per key."""

    __slots__ = ("_pos", "_keys", "_vals", "_ages", "_holes", "_peak", "_mods", "_ageing",
                 "_slots", "__weakref__")
    __hash__ = None     # type: ignore[assignment]

    def __init__(self, ageing: bool = True) -> None:
        self._pos: dict[Any, int] = {}
        self._keys: list[Any] = []
        self._vals: list[Any] = []
        self._ages: list[int] = []
        self._holes = 0
        self._peak = 0          # the most keys since the last shrink (its "capacity")
        self._mods = 0
        self._ageing = bool(ageing)
        # slot -> {key: None} in insertion order (a slot without keys has no entry); None: off
        self._slots: dict[int, dict[bytes, None]] | None = None

    @classmethod
    def from_dict(cls, mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
                  ageing: bool = True) -> KeyTableReference:
        t = cls(ageing)
        t.update(mapping)
        return t

    @property
    def ageing(self) -> bool:
        return self._ageing

    # -- mapping ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._pos)

    def __contains__(self, key: object) -> bool:
        return key in self._pos

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pos)

    def __getitem__(self, key: Any) -> Any:
        i = self._pos[key]
        if self._ageing:
            self._ages[i] = _state.touched(self._ages[i])
        return self._vals[i]

    def get(self, key: Any, default: Any = None) -> Any:
        i = self._pos.get(key)
        if i is None:
            return default
        if self._ageing:
            self._ages[i] = _state.touched(self._ages[i])
        return self._vals[i]

    def peek(self, key: Any, default: Any = None) -> Any:
        i = self._pos.get(key)
        return default if i is None else self._vals[i]

    def prefetch(self, keys: list[Any]) -> None:
        """Nothing: the C table starts the memory loads of up to 64 keys' lookups at once, so
        that a pipelined run's waits overlap (_ktable.c, "prefetch"); no other effect, which
        is what this reference does."""
        if not isinstance(keys, list):
            raise TypeError("prefetch(keys: list)")

    def __setitem__(self, key: Any, value: Any) -> None:
        i = self._pos.get(key)
        if i is not None:
            self._vals[i] = value
            if self._ageing:
                self._ages[i] = _state.touched(self._ages[i])
            return
        self._add(key, value, _state.initial() if self._ageing else 0)

    def _add(self, key: Any, value: Any, age: int) -> None:
        if self._slots is not None:
            if not isinstance(key, bytes):
                raise TypeError("a KeyTable that tracks slots takes bytes keys, not "
                                f"{type(key).__name__}")
            self._slots.setdefault(key_hash_slot_reference(key), {})[key] = None
        self._pos[key] = len(self._keys)
        self._keys.append(key)
        self._vals.append(value)
        self._ages.append(age)
        self._mods += 1
        if len(self._pos) > self._peak:
            self._peak = len(self._pos)

    def __delitem__(self, key: Any) -> None:
        self._remove(self._pos.pop(key))

    def _remove(self, i: int) -> Any:
        value = self._vals[i]
        if self._slots is not None:
            key = self._keys[i]
            slot = key_hash_slot_reference(key)
            keys = self._slots[slot]
            del keys[key]
            if not keys:
                del self._slots[slot]
        self._keys[i] = _HOLE
        self._vals[i] = None
        self._holes += 1
        self._mods += 1
        if self._holes > 8 and self._holes * 2 >= len(self._keys):
            self._compact()
        return value

    def _compact(self) -> None:
        """The lists without their holes, ``_pos`` rebuilt (a new, right-sized dict)."""
        pos = self._pos
        self._keys = keys = list(pos)
        self._vals = [self._vals[i] for i in pos.values()]
        self._ages = [self._ages[i] for i in pos.values()]
        self._pos = {k: j for j, k in enumerate(keys)}
        self._holes = 0
        self._mods += 1

    def pop(self, key: Any, *default: Any) -> Any:
        if len(default) > 1:
            raise TypeError(f"pop expected at most 2 arguments, got {1 + len(default)}")
        i = self._pos.pop(key, None)
        if i is None:
            if default:
                return default[0]
            raise KeyError(key)
        return self._remove(i)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        i = self._pos.get(key)
        if i is not None:
            if self._ageing:
                self._ages[i] = _state.touched(self._ages[i])
            return self._vals[i]
        self._add(key, default, _state.initial() if self._ageing else 0)
        return default

    def keys(self) -> _View:
        return _View(self, 0)

    def values(self) -> _View:
        return _View(self, 1)

    def items(self) -> _View:
        return _View(self, 2)

    def clear(self) -> None:
        self._pos = {}
        self._keys, self._vals, self._ages = [], [], []
        self._holes = self._peak = 0
        self._mods += 1
        if self._slots is not None:
            self._slots = {}

    def copy(self) -> KeyTableReference:
        """A copy, ages included (and the per-slot index, when this one has it)."""
        c = type(self)(self._ageing)
        if self._slots is not None:
            c._slots = {}
        for k, i in self._pos.items():
            c._add(k, self._vals[i], self._ages[i])
        return c

    def update(self, other: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        """Each item stored as ``t[k] = v``."""
        if hasattr(other, "peek"):     # a KeyTable (either): read without touching
            for k in list(other):
                self[k] = other.peek(k)
        elif hasattr(other, "keys"):
            for k in list(other.keys()):
                self[k] = other[k]       # type: ignore[index]
        else:
            for pair in other:
                k, v = pair
                self[k] = v

    def __eq__(self, other: object) -> bool:
        """Equal to a dict or a KeyTable (either) of the same keys and equal values."""
        peek: Callable[[Any, Any], Any]
        if isinstance(other, dict):
            peek = other.get
        elif isinstance(other, KeyTableReference) or type(other) is KeyTable:
            peek = other.peek
        else:
            return NotImplemented
        if len(self) != len(other):
            return False
        missing = object()
        for k, i in self._pos.items():
            ov = peek(k, missing)
            if ov is missing or not ov == self._vals[i]:
                return False
        return True

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    @recursive_repr("KeyTable({...})")
    def __repr__(self) -> str:
        return f"KeyTable({dict(zip(self._pos, (self._vals[i] for i in self._pos.values()), strict=True))!r})"  # noqa: E501

    # -- ageing ---------------------------------------------------------------------------
    def age(self, key: Any) -> int | None:
        """The key's 24 bits, or None if absent (no touch)."""
        i = self._pos.get(key)
        return None if i is None else self._ages[i]

    def entry_at(self, key: Any) -> int:
        """Where the value is held (DEBUG OBJECT's "at:"): here, its object's id."""
        i = self._pos.get(key)
        if i is None:
            raise KeyError(key)
        return id(self._vals[i])

    def set_age(self, key: Any, age: int) -> None:
        """RESTORE IDLETIME/FREQ, RDB idle/freq: KeyError if absent, ValueError unless 24 bits."""
        if not isinstance(age, int):
            raise TypeError(f"an integer is required, not {type(age).__name__}")
        if not 0 <= age <= AGE_MAX:
            raise ValueError("an age is 24 bits: 0 <= age < 2**24")
        self._ages[self._pos[key]] = age

    def sample(self, n: int) -> list[Any]:
        """Up to ``n`` distinct live keys at random (dictGetSomeKeys), O(n): random positions,
        at most 10 * n of them drawn; over 64, one walk from a random position."""
        n = n.__index__()
        if n <= 0 or not self._pos:
            return []
        keys = self._keys
        count = min(n, len(self._pos))
        steps = count * 10
        ne = len(keys)
        rng = _state.sample_rng
        if count <= _SAMPLE_PICKS:
            # Independent random positions, a hole or a repeat drawn again (holes are at most
            # half the lists: compaction): walking forward from a hole, as the C table does
            # in its dense entries, would spend the steps in the long runs of holes that
            # evicting keys in insertion order (LRU) leaves here.
            picked: list[int] = []
            while len(picked) < count and steps > 0:
                i = rng.next() % ne
                steps -= 1
                if keys[i] is not _HOLE and i not in picked:
                    picked.append(i)
            return [keys[i] for i in picked]
        out: list[Any] = []
        i = rng.next() % ne
        walked = 0
        while walked < ne and steps > 0 and len(out) < count:
            if keys[i] is not _HOLE:
                out.append(keys[i])
            i += 1
            if i == ne:
                i = 0
            walked += 1
            steps -= 1
        return out

    def shrink(self) -> bool:
        """Give memory back when under 10 % full since the last shrink; whether it did."""
        if self._peak <= 8 or len(self._pos) * 10 >= self._peak:
            return False
        self._compact()
        self._peak = len(self._pos)
        return True

    # -- the per-slot index (cluster) ---------------------------------------------------------
    def track_slots(self) -> None:
        """Keep each hash slot's keys and count from now on, the keys present indexed (in their
        order: newest last in, first out); nothing if it does already. Bytes keys only:
        TypeError, nothing changed, when one is not."""
        if self._slots is not None:
            return
        for k in self._pos:
            if not isinstance(k, bytes):
                raise TypeError(f"track_slots: a key is not bytes but {type(k).__name__}")
        slots: dict[int, dict[bytes, None]] = {}
        for k in self._pos:
            slots.setdefault(key_hash_slot_reference(k), {})[k] = None
        self._slots = slots

    @property
    def tracks_slots(self) -> bool:
        """Whether the table keeps its per-slot index (:meth:`track_slots`)."""
        return self._slots is not None

    def _slot_arg(self, slot: int) -> dict[bytes, None]:
        if self._slots is None:
            raise RuntimeError("the KeyTable does not track slots (track_slots())")
        slot = operator.index(slot)
        if not 0 <= slot < CLUSTER_SLOTS:
            raise ValueError("slot out of range: 0 <= slot < 16384")
        return self._slots.get(slot, {})

    def slot_count(self, slot: int) -> int:
        """How many keys hash to ``slot`` (CLUSTER COUNTKEYSINSLOT), O(1)."""
        return len(self._slot_arg(slot))

    def slot_keys(self, slot: int, count: int) -> list[bytes]:
        """Up to ``count`` keys of ``slot``, newest first (CLUSTER GETKEYSINSLOT), O(count)."""
        keys = self._slot_arg(slot)
        count = operator.index(count)
        if count < 0:
            raise ValueError("count is >= 0")
        return list(islice(reversed(keys), min(count, len(keys))))

    def _stats(self) -> dict[str, int]:
        return {"used": len(self._pos), "entries": len(self._keys),
                "capacity": self._peak, "index": len(self._pos)}


# -- module state ------------------------------------------------------------------------------

if TYPE_CHECKING:
    KeyTable = KeyTableReference
    _native: Any = None
else:
    _native = native.load("pyrepl.keyspace._ktable")
    KeyTable = KeyTableReference if _native is None else _native.KeyTable


# The integers a C table keeps in an entry rather than as bytes (63 bits, _ktable.c "values").
INLINE_INT_MIN, INLINE_INT_MAX = -(1 << 62), (1 << 62) - 1


def kept_inline(table: object, value: object) -> bool:
    """Whether ``table`` keeps ``value`` in its entry, no object held for it: the C table and a
    string that is the canonical form of an integer of 63 bits (MEMORY USAGE counts nothing
    for it, as Redis's for an OBJ_ENCODING_INT string counts only the robj)."""
    if _native is None or type(table) is not _native.KeyTable or type(value) is not bytes:
        return False
    n = canonical_int(value)
    return n is not None and INLINE_INT_MIN <= n <= INLINE_INT_MAX


def configure(policy_lfu: bool, lfu_log_factor: int, lfu_decay_time: int) -> None:
    """The maxmemory-policy's kind (LFU or not), lfu-log-factor and lfu-decay-time."""
    if lfu_log_factor < 0 or lfu_decay_time < 0:
        raise ValueError("lfu_log_factor and lfu_decay_time are >= 0")
    _state.lfu = bool(policy_lfu)
    _state.log_factor = lfu_log_factor
    _state.decay_time = lfu_decay_time
    if _native is not None:
        _native.configure(policy_lfu, lfu_log_factor, lfu_decay_time)


def set_clock(now_ms: int) -> None:
    """The clock the ages are stamped with: the LRU clock ``(now_ms // 1000) & (2**24 - 1)``
    and the LFU minutes ``(now_ms // 60000) & 65535``."""
    if now_ms < 0:
        raise ValueError("now_ms is >= 0")
    _state.now_ms = now_ms
    _state.lru_clock = ageing.lru_clock(now_ms)
    if _native is not None:
        _native.set_clock(now_ms)


def given_age(freq: int, idle_s: int) -> int | None:
    """The 24 bits for a key given a FREQ (0-255, -1 for none) or an IDLE time in seconds (-1
    for none) under the policy configured, at the clock set: RESTORE and the RDB's opcodes
    (objectSetLRUOrLFU). None when the policy's kind is not the one given."""
    return ageing.given_age(_state.lfu, freq, idle_s, _state.now_ms)


def save_ages(kind: str) -> None:
    """What an RDB written from now on keeps of a key's age (rdbSaveKeyValuePair): "lru" (an
    LRU policy: the IDLE opcode), "lfu" (an LFU one: FREQ) or "" (the other policies)."""
    _state.saved = kind


def saved_age(age: int) -> tuple[int, int]:
    """(idle seconds, -1) under an LRU policy, (-1, the decayed counter) under an LFU one,
    (-1, -1) under the others: what the RDB writes for a key of age ``age``."""
    if _state.saved == "lfu":
        return -1, ageing.lfu_decr_and_return(age, _state.now_ms, _state.decay_time)
    if _state.saved == "lru":
        return ageing.idle_ms(age, _state.now_ms) // 1000, -1
    return -1, -1


def saving_ages() -> bool:
    return bool(_state.saved)


def seed(n: int) -> None:
    """Seed the LFU and sampling generators of both implementations alike (tests)."""
    _state.lfu_rng = _Splitmix64(n)
    _state.sample_rng = _Splitmix64(n ^ _SAMPLE_SALT)
    if _native is not None:
        _native.seed(n)
