"""Sorted set encodings against real redis-server 7.0.15: when a sorted set is a listpack and
when it becomes a skiplist (pyrepl/keyspace/zset.py's ListpackZSet and ZSet), compared reply
for reply.

Random sequences over a few sorted sets with ``zset-max-listpack-entries`` / ``-value`` set low
(and changed mid-sequence) add members about the length limit with integral, fractional and
infinite scores, store computed sets (ZRANGESTORE, ZUNIONSTORE: Redis makes those a listpack
when they fit), then ask ``OBJECT ENCODING``, ZRANGE WITHSCORES and ZSCAN (a listpack answers
whole, with its stored score text), reload the dataset (DEBUG RELOAD, DUMP/RESTORE, COPY) and
compare every reply.
"""

from __future__ import annotations

import random
from contextlib import closing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff

pytestmark = [pytest.mark.slow, pytest.mark.interop]

KEYS = ["z1", "z2", "z3"]
SCORES = ["0", "1", "-3", "2.5", "1e20", "-1e-5", "inf", "-inf", "4611686018427387904",
          "0.1", "123456789"]


@pytest.fixture(scope="module")
def pair(servers):
    with closing(diff.Pair(*servers)) as p:
        yield p


def _member(rnd: random.Random, limit: int) -> str:
    if rnd.random() < 0.7:
        return rnd.choice("abcdefgh")
    if rnd.random() < 0.3:
        return str(rnd.choice([7, -1, 4096]))
    return "m" * rnd.choice([limit - 1, limit, limit + 1])


def rand_command(rnd: random.Random, limit: int) -> tuple[str, ...]:
    k = rnd.choice(KEYS)
    kind = rnd.choices(
        ["zadd", "zrem", "zincrby", "store", "encoding", "zrange", "zscan", "reload", "restore",
         "copy", "config"],
        weights=[10, 3, 2, 2, 4, 3, 3, 0.5, 0.7, 0.7, 0.7])[0]
    if kind == "zadd":
        opts = rnd.choice([(), (), ("NX",), ("XX",), ("GT", "CH"), ("LT",)])
        pairs = [x for _ in range(rnd.randint(1, 3))
                 for x in (rnd.choice(SCORES), _member(rnd, limit))]
        return ("ZADD", k, *opts, *pairs)
    if kind == "zrem":
        return ("ZREM", k, *(_member(rnd, limit) for _ in range(rnd.randint(1, 3))))
    if kind == "zincrby":
        return ("ZINCRBY", k, rnd.choice(["1", "-2.5", "10"]), _member(rnd, limit))
    if kind == "store":
        if rnd.random() < 0.5:
            return ("ZRANGESTORE", k, rnd.choice(KEYS), "0", str(rnd.randint(-1, 6)))
        return ("ZUNIONSTORE", k, "2", *rnd.sample(KEYS, 2))
    if kind == "encoding":
        return ("OBJECT", "ENCODING", k)
    if kind == "zrange":
        return ("ZRANGE", k, "0", "-1", "WITHSCORES")
    if kind == "zscan":
        return ("ZSCAN", k, "0")
    if kind in ("reload", "restore", "copy"):
        return diff.reload_command(rnd, kind, k, KEYS)
    return ("CONFIG", "SET", rnd.choice(["zset-max-listpack-entries", "zset-max-listpack-value"]),
            str(rnd.choice([0, 1, 3, 5, 8, 128])))


def check(p: diff.Pair, *argv: str) -> None:
    """Pair.check; ZSCAN exactly while the set is a listpack on both (a skiplist pages in its
    own order: compared as ZRANGE); DUMP + RESTORE as one step."""
    if argv[0] == "__RESTORE__":
        diff.dump_restore(p, argv[1])
        return
    if argv[0] == "ZSCAN" and p.check("OBJECT", "ENCODING", argv[1]) != b"$8\r\nlistpack\r\n":
        argv = ("ZRANGE", argv[1], "0", "-1", "WITHSCORES")
    p.check(*argv)


@diff.sequence_settings(60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(10, 60))
def test_encodings_follow_redis(pair, seed, n):
    rnd = random.Random(seed)
    limit = rnd.choice([4, 8])
    setup = [("CONFIG", "SET", "zset-max-listpack-entries", rnd.choice(["3", "5", "8"])),
             ("CONFIG", "SET", "zset-max-listpack-value", str(limit))]
    final = [(name, key, *args) for key in KEYS for name, *args in
             (("OBJECT", "ENCODING"), ("ZRANGE", "0", "-1", "WITHSCORES"), ("ZSCAN", "0"))]
    try:
        diff.run_sequence(pair, [*setup, *(rand_command(rnd, limit) for _ in range(n)), *final],
                          check=check)
    finally:
        pair.both("CONFIG", "SET", "zset-max-listpack-entries", "128")
        pair.both("CONFIG", "SET", "zset-max-listpack-value", "64")


def test_the_defaults_and_the_conversion_points(pair):
    """128 members of <= 64 bytes are a listpack; the 129th, or a 65-byte member, makes a
    skiplist for good; a reload, or a store of a small result, makes a listpack again."""
    pair.flushall()
    pair.check("CONFIG", "GET", "zset-max-listpack-entries")
    pair.check("CONFIG", "GET", "zset-max-listpack-value")
    pair.check("ZADD", "big", *(x for i in range(128) for x in (str(i % 7), f"m{i}")))
    pair.check("OBJECT", "ENCODING", "big")
    pair.check("ZSCAN", "big", "0")
    pair.check("ZADD", "big", "1.5", "one-more")
    pair.check("OBJECT", "ENCODING", "big")
    pair.check("ZADD", "long", "1", "x" * 65)
    pair.check("OBJECT", "ENCODING", "long")
    pair.check("ZADD", "long2", "1", "a", "2", "x" * 65)
    pair.check("ZREM", "long2", "x" * 65)
    pair.check("OBJECT", "ENCODING", "long2")
    pair.check("ZRANGESTORE", "small", "big", "0", "9")
    pair.check("OBJECT", "ENCODING", "small")
    pair.check("DEBUG", "RELOAD")
    for k in ("big", "long", "long2", "small"):
        pair.check("OBJECT", "ENCODING", k)
        pair.check("ZRANGE", k, "0", "-1", "WITHSCORES")
