"""A key's age for eviction (pyrepl/keyspace/ageing.py) against Redis 7.0.15's evict.c: the LRU
clock and idle time, the LFU counter's logarithmic increment and decay, and the eviction pool,
checked against a line-by-line transcription of evictionPoolPopulate's array code."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.keyspace.ageing import (
    EVPOOL_SIZE,
    LFU_INIT_VAL,
    LRU_CLOCK_MAX,
    EvictionPool,
    idle_ms,
    lfu_decr_and_return,
    lfu_initial,
    lfu_log_incr,
    lfu_minutes,
    lfu_touch,
    lru_clock,
)

DAY_MS = 86_400_000


def test_lru_clock_counts_seconds_in_24_bits() -> None:
    assert lru_clock(0) == 0
    assert lru_clock(1999) == 1
    assert lru_clock((LRU_CLOCK_MAX + 1) * 1000) == 0          # wraps after 2^24 s
    assert lru_clock((LRU_CLOCK_MAX + 5) * 1000 + 999) == 4


def test_idle_time_is_the_clock_difference_and_counts_a_wrap_once() -> None:
    now = 1_764_000_000_000
    stamp = lru_clock(now - 42_000)
    assert idle_ms(stamp, now) == 42_000
    assert idle_ms(lru_clock(now), now) == 0
    # a stamp "ahead" of the clock: the clock wrapped since (estimateObjectIdleTime's else)
    now = 10_000                               # clock 10
    assert idle_ms(LRU_CLOCK_MAX - 5, now) == (10 + 5) * 1000


def test_lfu_log_incr_probability_follows_the_counter_and_factor() -> None:
    # at or below LFU_INIT_VAL every access counts (p = 1)
    assert lfu_log_incr(0, 10, lambda: 0.999999) == 1
    assert lfu_log_incr(LFU_INIT_VAL, 10, lambda: 0.999999) == LFU_INIT_VAL + 1
    # counter 15, factor 10: p = 1 / (10 * 10 + 1)
    p = 1 / 101
    assert lfu_log_incr(15, 10, lambda: p * 0.99) == 16
    assert lfu_log_incr(15, 10, lambda: p * 1.01) == 15
    # factor 0: always
    assert lfu_log_incr(200, 0, lambda: 0.999999) == 201
    assert lfu_log_incr(255, 0, lambda: 0.0) == 255          # saturates


def test_lfu_counter_after_hits_matches_redis_conf_table() -> None:
    """redis.conf's table (lfu-log-factor vs hits -> OBJECT FREQ), with a seeded generator:
    factor 10 reaches ~10 after 100 hits, ~18 after 1000, ~142 after 100K; factor 1 ~18 / ~49
    after 100 / 1000; factor 100 ~49 after 100K. (The table's runs were INCRs of one key: the
    first creates it at LFU_INIT_VAL, the others access it.)"""
    def after(hits: int, factor: int, seed: int) -> int:
        rnd = random.Random(seed).random
        c = LFU_INIT_VAL
        for _ in range(hits - 1):
            c = lfu_log_incr(c, factor, rnd)
        return c

    for hits, factor, expect, slack in ((100, 10, 10, 3), (1000, 10, 18, 3),
                                        (100_000, 10, 142, 8), (100, 1, 18, 4),
                                        (1000, 1, 49, 6), (100_000, 100, 49, 6),
                                        (100, 0, 104, 0)):
        got = [after(hits, factor, seed) for seed in range(3)]
        mid = sorted(got)[1]
        assert abs(mid - expect) <= slack, (hits, factor, got)


def test_lfu_decay_takes_one_per_decay_period_and_never_below_zero() -> None:
    now = 1_764_000_000_000
    bits = lfu_initial(now) | 0                # counter LFU_INIT_VAL, stamped now
    assert lfu_decr_and_return(bits, now, 1) == LFU_INIT_VAL
    assert lfu_decr_and_return(bits, now + 3 * 60_000, 1) == LFU_INIT_VAL - 3
    assert lfu_decr_and_return(bits, now + 3 * 60_000, 2) == LFU_INIT_VAL - 1
    assert lfu_decr_and_return(bits, now + DAY_MS, 1) == 0
    assert lfu_decr_and_return(bits, now + DAY_MS, 0) == LFU_INIT_VAL   # 0: never decays
    # the minutes wrap at 2^16: counted as one wrap
    ldt = 65_530
    bits = (ldt << 8) | 50
    now_wrapped = 4 * 60_000                    # minute 4 (mod 2^16)
    assert lfu_minutes(now_wrapped) == 4
    assert lfu_decr_and_return(bits, now_wrapped, 1) == 50 - (65535 - ldt + 4)


def test_lfu_touch_decays_increments_and_stamps() -> None:
    now = 1_764_000_000_000
    bits = (lfu_minutes(now - 10 * 60_000) << 8) | 20     # 10 minutes old, counter 20
    out = lfu_touch(bits, now, 10, 1, lambda: 0.0)         # r = 0: the increment happens
    assert out >> 8 == lfu_minutes(now)
    assert out & 255 == 20 - 10 + 1


class _CPool:
    """evictionPoolPopulate's insertion, transcribed from evict.c (fixed array, None = free)."""

    def __init__(self) -> None:
        self.idle = [0] * EVPOOL_SIZE
        self.key: list[bytes | None] = [None] * EVPOOL_SIZE
        self.db = [0] * EVPOOL_SIZE

    def insert(self, idle: int, db: int, key: bytes) -> None:
        pool_idle, pool_key, pool_db = self.idle, self.key, self.db
        k = 0
        while k < EVPOOL_SIZE and pool_key[k] is not None and pool_idle[k] < idle:
            k += 1
        if k == 0 and pool_key[EVPOOL_SIZE - 1] is not None:
            return
        elif k < EVPOOL_SIZE and pool_key[k] is None:
            pass
        else:
            if pool_key[EVPOOL_SIZE - 1] is None:
                for j in range(EVPOOL_SIZE - 1, k, -1):      # memmove(pool+k+1, pool+k, ...)
                    pool_idle[j], pool_key[j], pool_db[j] = pool_idle[j - 1], pool_key[j - 1], \
                        pool_db[j - 1]
            else:
                k -= 1
                for j in range(k):                            # memmove(pool, pool+1, ...)
                    pool_idle[j], pool_key[j], pool_db[j] = pool_idle[j + 1], pool_key[j + 1], \
                        pool_db[j + 1]
        pool_idle[k], pool_key[k], pool_db[k] = idle, key, db

    def pop_best(self) -> tuple[int, bytes] | None:
        """performEvictions: the rightmost entry with a key, freed."""
        for k in range(EVPOOL_SIZE - 1, -1, -1):
            key = self.key[k]
            if key is not None:
                self.key[k] = None
                return self.db[k], key
        return None

    def entries(self) -> list[tuple[int, int, bytes]]:
        return [(self.idle[k], self.db[k], key) for k, key in enumerate(self.key)
                if key is not None]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("offer"), st.integers(0, 40), st.integers(0, 3)),
                          st.tuples(st.just("pop"), st.just(0), st.just(0))),
                max_size=120))
def test_the_pool_moves_exactly_as_evict_c(ops: list[tuple[str, int, int]]) -> None:
    ref, pool = _CPool(), EvictionPool()
    for i, (op, score, db) in enumerate(ops):
        if op == "offer":
            key = b"k%d" % i
            ref.insert(score, db, key)
            pool.offer(score, db, key)
        else:
            assert pool.pop_best() == ref.pop_best()
        assert list(zip(pool.scores, pool.dbs, pool.keys, strict=True)) == ref.entries()
        assert pool.scores == sorted(pool.scores) and len(pool) <= EVPOOL_SIZE


def test_the_pool_keeps_the_best_candidates_seen() -> None:
    pool = EvictionPool()
    scores = list(range(100))
    random.Random(7).shuffle(scores)
    for s in scores:
        pool.offer(s, 0, b"%d" % s)
    assert pool.scores == list(range(100 - EVPOOL_SIZE, 100))
    assert pool.pop_best() == (0, b"99")
    pool.clear()
    assert pool.pop_best() is None
