"""A key's age for eviction, as Redis 7.0 keeps it in 24 bits per object (``robj->lru``).

Theory of operation
-------------------
Under an LRU policy (and for OBJECT IDLETIME) the 24 bits are the *LRU clock* of the key's last
access: unix time in seconds (``LRU_CLOCK_RESOLUTION`` = 1000 ms) modulo 2^24, wrapping every
~194 days; :func:`idle_ms` reads the age back, a wrapped clock counted as wrapping once
(``estimateObjectIdleTime``).

Under an LFU policy (and for OBJECT FREQ) the same 24 bits hold two fields (evict.c's comment)::

         16 bits      8 bits
    +----------------+--------+
    + Last decr time | LOG_C  |
    +----------------+--------+

``LOG_C`` is a logarithmic access counter, saturating at 255, that a new key starts at
``LFU_INIT_VAL`` (5) and that an access increments with probability
``1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1)`` (:func:`lfu_log_incr`); the last
decrement time is unix minutes modulo 2^16, and every ``lfu-decay-time`` minutes since then
take one off the counter when it is read (:func:`lfu_decr_and_return`). An access is
:func:`lfu_touch` (``updateLFU``: decay, increment, stamp the time).

:class:`EvictionPool` is evict.c's ``EvictionPoolLRU``: 16 candidates kept in ascending order of
their *score* (the idle time under LRU, ``255 - counter`` under LFU, ``ULLONG_MAX - expire`` under
volatile-ttl: higher is a better candidate), fed by each round's samples
(``evictionPoolPopulate``) and emptied from the best end. Entries are not removed when their key
goes away; the evicting side checks that the key still exists, as Redis does.

Everything here is pure: time comes in as arguments, randomness from the ``random`` argument
(``random.random`` by default), so the tests drive it with fixed values.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable

LRU_BITS = 24
LRU_CLOCK_MAX = (1 << LRU_BITS) - 1      # the largest value of the 24 bits
LRU_CLOCK_RESOLUTION = 1000              # ms per tick of the LRU clock
LFU_INIT_VAL = 5                         # a new key's LFU counter
EVPOOL_SIZE = 16                         # candidates the eviction pool keeps
ULLONG_MAX = (1 << 64) - 1


# -- LRU --------------------------------------------------------------------------------------

def lru_clock(now_ms: int) -> int:
    """getLRUClock: the LRU clock at ``now_ms`` (unix ms)."""
    return (now_ms // LRU_CLOCK_RESOLUTION) & LRU_CLOCK_MAX


def idle_ms(lru: int, now_ms: int) -> int:
    """estimateObjectIdleTime: at least how long ago (ms) a key stamped ``lru`` was accessed."""
    clock = lru_clock(now_ms)
    if clock >= lru:
        return (clock - lru) * LRU_CLOCK_RESOLUTION
    return (clock + (LRU_CLOCK_MAX - lru)) * LRU_CLOCK_RESOLUTION


# -- LFU --------------------------------------------------------------------------------------

def lfu_minutes(now_ms: int) -> int:
    """LFUGetTimeInMinutes: unix minutes modulo 2^16 (``server.unixtime`` is in seconds)."""
    return ((now_ms // 1000) // 60) & 65535


def lfu_time_elapsed(ldt: int, now_ms: int) -> int:
    """LFUTimeElapsed: minutes since ``ldt``, a wrapped clock counted as wrapping once."""
    now = lfu_minutes(now_ms)
    if now >= ldt:
        return now - ldt
    return 65535 - ldt + now


def lfu_initial(now_ms: int) -> int:
    """A new object's 24 bits under an LFU policy (createObject)."""
    return (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL


def lfu_log_incr(counter: int, log_factor: int,
                 random: Callable[[], float] = _random.random) -> int:
    """LFULogIncr: the counter after one access, incremented with probability
    ``1 / (max(counter - LFU_INIT_VAL, 0) * log_factor + 1)``; 255 stays 255."""
    if counter == 255:
        return 255
    base = counter - LFU_INIT_VAL
    if base < 0:
        base = 0
    if random() < 1.0 / (base * log_factor + 1):
        counter += 1
    return counter


def lfu_decr_and_return(lru: int, now_ms: int, decay_time: int) -> int:
    """LFUDecrAndReturn: the counter of the 24 bits ``lru`` after the decay due by ``now_ms``
    (one per ``decay_time`` minutes since the last decrement time; 0 never decays). The bits
    themselves are not changed: an access stamps them (:func:`lfu_touch`)."""
    ldt = lru >> 8
    counter = lru & 255
    periods = lfu_time_elapsed(ldt, now_ms) // decay_time if decay_time else 0
    if periods:
        counter = 0 if periods > counter else counter - periods
    return counter


def lfu_touch(lru: int, now_ms: int, log_factor: int, decay_time: int,
              random: Callable[[], float] = _random.random) -> int:
    """updateLFU: the 24 bits after an access (decay, logarithmic increment, time stamp)."""
    counter = lfu_decr_and_return(lru, now_ms, decay_time)
    counter = lfu_log_incr(counter, log_factor, random)
    return (lfu_minutes(now_ms) << 8) | counter


def given_age(lfu: bool, freq: int, idle_s: int, now_ms: int) -> int | None:
    """objectSetLRUOrLFU: the 24 bits for a key given an access frequency ``freq`` (0-255, -1
    for none) or an idle time ``idle_s`` in seconds (-1 for none) — RESTORE's FREQ and
    IDLETIME, an RDB's FREQ and IDLE opcodes; None when the policy's kind is not given."""
    if lfu:
        return (lfu_minutes(now_ms) << 8) | freq if freq >= 0 else None
    if idle_s < 0:
        return None
    at = lru_clock(now_ms) - idle_s * 1000 // LRU_CLOCK_RESOLUTION
    return at + LRU_CLOCK_MAX if at < 0 else at


# -- the eviction pool -----------------------------------------------------------------------

class EvictionPool:
    """evict.c's eviction pool: up to 16 (score, db, key) candidates in ascending score, the
    best (highest score) last."""

    __slots__ = ("scores", "dbs", "keys")

    def __init__(self) -> None:
        self.scores: list[int] = []
        self.dbs: list[int] = []
        self.keys: list[bytes] = []

    def __len__(self) -> int:
        return len(self.keys)

    def offer(self, score: int, db: int, key: bytes) -> None:
        """One sampled key (evictionPoolPopulate's insertion): taken if the pool has room, or
        if it beats the worst candidate, which then leaves; ties go after the equal scores
        already there (``pool[k].idle < idle`` stops at the first score not smaller)."""
        scores = self.scores
        n = len(scores)
        k = 0
        while k < n and scores[k] < score:
            k += 1
        if k == 0 and n == EVPOOL_SIZE:
            return          # not better than the worst, and no free bucket
        if n < EVPOOL_SIZE:
            scores.insert(k, score)
            self.dbs.insert(k, db)
            self.keys.insert(k, key)
            return
        # full: drop the worst (index 0) and insert at k - 1
        del scores[0], self.dbs[0], self.keys[0]
        k -= 1
        scores.insert(k, score)
        self.dbs.insert(k, db)
        self.keys.insert(k, key)

    def pop_best(self) -> tuple[int, bytes] | None:
        """The best candidate (db, key), removed; None when the pool is empty."""
        if not self.keys:
            return None
        self.scores.pop()
        return self.dbs.pop(), self.keys.pop()

    def clear(self) -> None:
        self.scores.clear()
        self.dbs.clear()
        self.keys.clear()
