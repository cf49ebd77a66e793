"""Differential tests of the list commands: pyrepl against real redis-server 7.0.15.

Three parts: a hand-written table of edge cases (every option and error) replayed in RESP2 and
RESP3 with every reply compared byte for byte; a hypothesis test that generates random command
sequences over four keys; and a propagation check that compares what pyrepl's core hands to
replication (``ServerCore.repl_feed``, driven in-process) with what real Redis sends to a
replica attached with SYNC, command by command.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

BIG = "9223372036854775807"
SMALL = "-9223372036854775808"

CASES: list[tuple[str, ...]] = [
    # pushes
    ("RPUSH", "l", "a", "b", "c", "a", "b", "c", "a"),
    ("LPUSH", "l", "z"),
    ("LPUSH", "l2", "x", "y", "z"),
    ("RPUSH", "l2", ""),
    ("LPUSHX", "nokey", "a"),
    ("RPUSHX", "nokey", "a", "b"),
    ("LPUSHX", "l2", "p", "q"),
    ("RPUSHX", "l2", "r"),
    ("LRANGE", "l2", "0", "-1"),
    ("LPUSH", "l"),
    ("RPUSHX", "l"),
    # reads
    ("LLEN", "l"), ("LLEN", "nokey"), ("LLEN",), ("LLEN", "l", "x"),
    ("LRANGE", "l", "0", "-1"), ("LRANGE", "l", "-3", "-1"), ("LRANGE", "l", "-100", "2"),
    ("LRANGE", "l", "5", "100"), ("LRANGE", "l", "4", "3"), ("LRANGE", "l", "100", "200"),
    ("LRANGE", "l", "0", "-100"), ("LRANGE", "l", SMALL, BIG), ("LRANGE", "l", "x", "1"),
    ("LRANGE", "l", "0", "1.5"), ("LRANGE", "nokey", "0", "-1"), ("LRANGE", "nokey", "x", "1"),
    ("LRANGE", "l", "0"), ("LRANGE", "l", "+1", "2"), ("LRANGE", "l", "01", "2"),
    ("LRANGE", "l", "-0", "2"), ("LRANGE", "l", "9223372036854775808", "2"),
    ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LINDEX", "l", "7"), ("LINDEX", "l", "8"),
    ("LINDEX", "l", "-8"), ("LINDEX", "l", "-9"), ("LINDEX", "l", BIG), ("LINDEX", "l", SMALL),
    ("LINDEX", "l", "x"), ("LINDEX", "nokey", "x"), ("LINDEX", "nokey", "0"),
    # LPOS
    ("LPOS", "l", "a"), ("LPOS", "l", "a", "RANK", "2"), ("LPOS", "l", "a", "RANK", "-1"),
    ("LPOS", "l", "a", "RANK", "-3"), ("LPOS", "l", "a", "RANK", "4"),
    ("LPOS", "l", "a", "RANK", "5"), ("LPOS", "l", "a", "COUNT", "0"),
    ("LPOS", "l", "a", "COUNT", "2"), ("LPOS", "l", "a", "COUNT", "2", "RANK", "2"),
    ("LPOS", "l", "a", "COUNT", "0", "RANK", "-2"), ("LPOS", "l", "a", "MAXLEN", "3"),
    ("LPOS", "l", "a", "MAXLEN", "1"), ("LPOS", "l", "a", "COUNT", "0", "MAXLEN", "5"),
    ("LPOS", "l", "a", "rank", "-1", "maxlen", "2", "count", "5"),
    ("LPOS", "l", "nothere"), ("LPOS", "l", "nothere", "COUNT", "0"),
    ("LPOS", "nokey", "a"), ("LPOS", "nokey", "a", "COUNT", "1"),
    ("LPOS", "l", "a", "RANK", "0"), ("LPOS", "l", "a", "RANK", "x"),
    ("LPOS", "l", "a", "RANK", SMALL), ("LPOS", "l", "a", "RANK", SMALL, "COUNT", "1"),
    ("LPOS", "l", "a", "RANK", BIG), ("LPOS", "l", "a", "COUNT", "-1"),
    ("LPOS", "l", "a", "COUNT", "x"), ("LPOS", "l", "a", "MAXLEN", "-1"),
    ("LPOS", "l", "a", "MAXLEN", "y"), ("LPOS", "l", "a", "RANK"), ("LPOS", "l", "a", "FOO"),
    ("LPOS", "l", "a", "COUNT", "1", "BAR", "2"), ("LPOS", "nokey", "a", "RANK", "0"),
    ("LPOS", "l"),
    # LSET
    ("LSET", "l", "0", "A"), ("LSET", "l", "-1", "Z"), ("LSET", "l", "8", "x"),
    ("LSET", "l", "-9", "x"), ("LSET", "l", "x", "x"), ("LSET", "nokey", "0", "x"),
    ("LSET", "nokey", "x", "x"), ("LSET", "l", "0"), ("LRANGE", "l", "0", "-1"),
    # LINSERT
    ("LINSERT", "l", "BEFORE", "b", "B"), ("LINSERT", "l", "after", "c", "C"),
    ("LINSERT", "l", "AFTER", "nothere", "x"), ("LINSERT", "nokey", "BEFORE", "a", "b"),
    ("LINSERT", "l", "MIDDLE", "a", "b"), ("LINSERT", "nokey", "MIDDLE", "a", "b"),
    ("LRANGE", "l", "0", "-1"),
    # LREM
    ("LREM", "l", "1", "a"), ("LREM", "l", "-1", "a"), ("LREM", "l", "0", "a"),
    ("LREM", "l", "0", "nothere"), ("LREM", "l", "x", "a"), ("LREM", "nokey", "0", "a"),
    ("LRANGE", "l", "0", "-1"),
    ("RPUSH", "r", "x", "y", "x", "y", "x"), ("LREM", "r", "-2", "x"), ("LRANGE", "r", "0", "-1"),
    ("LREM", "r", "0", "y"), ("LREM", "r", "5", "x"), ("LLEN", "r"),
    # LTRIM
    ("RPUSH", "t", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"),
    ("LTRIM", "t", "1", "-2"), ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "-100", "100"),
    ("LRANGE", "t", "0", "-1"), ("LTRIM", "t", "2", "3"), ("LRANGE", "t", "0", "-1"),
    ("LTRIM", "t", "x", "3"), ("LTRIM", "nokey", "0", "1"), ("LTRIM", "t", "1", "0"),
    ("LLEN", "t"), ("LRANGE", "t", "0", "-1"),
    # pops
    ("RPUSH", "p", "1", "2", "3", "4", "5", "6"),
    ("LPOP", "p"), ("RPOP", "p"), ("LPOP", "p", "2"), ("RPOP", "p", "1"), ("LPOP", "p", "0"),
    ("RPOP", "p", "0"), ("LPOP", "p", "-1"), ("LPOP", "p", "x"), ("LPOP", "p", "1", "2"),
    ("RPOP", "p", "1", "2"), ("RPOP", "p", "10"), ("LLEN", "p"), ("LPOP", "p"),
    ("LPOP", "p", "1"), ("RPOP", "p", "0"), ("RPOP", "nokey", "-1"), ("LPOP",),
    # moves
    ("RPUSH", "src", "a", "b", "c"), ("LMOVE", "src", "dst", "LEFT", "RIGHT"),
    ("LMOVE", "src", "dst", "right", "left"), ("LRANGE", "dst", "0", "-1"),
    ("RPOPLPUSH", "src", "dst"), ("LLEN", "src"), ("RPOPLPUSH", "src", "dst"),
    ("LMOVE", "src", "dst", "LEFT", "LEFT"), ("LMOVE", "dst", "dst", "LEFT", "RIGHT"),
    ("LRANGE", "dst", "0", "-1"), ("LMOVE", "dst", "dst", "RIGHT", "LEFT"),
    ("LMOVE", "dst", "x", "UP", "LEFT"), ("LMOVE", "dst", "x", "LEFT", "DOWN"),
    ("LMOVE", "nokey", "x", "UP", "LEFT"), ("RPUSH", "one", "1"), ("RPOPLPUSH", "one", "one"),
    ("LRANGE", "one", "0", "-1"), ("LMOVE", "one", "two", "RIGHT", "RIGHT"), ("LLEN", "one"),
    ("LRANGE", "two", "0", "-1"), ("LMOVE", "a", "b", "LEFT"), ("RPOPLPUSH", "a"),
    # LMPOP
    ("RPUSH", "m2", "1", "2", "3", "4"),
    ("LMPOP", "2", "m1", "m2", "LEFT"), ("LMPOP", "2", "m1", "m2", "RIGHT", "COUNT", "2"),
    ("LMPOP", "2", "m1", "m2", "left", "count", "10"), ("LMPOP", "2", "m1", "m2", "LEFT"),
    ("LMPOP", "1", "m1", "RIGHT", "COUNT", "3"), ("LMPOP", "0", "m1", "LEFT"),
    ("LMPOP", "-1", "m1", "LEFT"), ("LMPOP", "x", "m1", "LEFT"), ("LMPOP", "2", "m1", "LEFT"),
    ("LMPOP", "5", "m1", "LEFT"), ("LMPOP", "1", "m1", "UP"),
    ("LMPOP", "1", "m1", "LEFT", "COUNT", "0"), ("LMPOP", "1", "m1", "LEFT", "COUNT", "-1"),
    ("LMPOP", "1", "m1", "LEFT", "COUNT", "x"), ("LMPOP", "1", "m1", "LEFT", "COUNT"),
    ("LMPOP", "1", "m1", "LEFT", "COUNT", "1", "COUNT", "1"),
    ("LMPOP", "1", "m1", "LEFT", "EXTRA"), ("LMPOP", "1", "m1"),
    ("LMPOP", BIG, "m1", "LEFT"),
    # wrong types
    ("HSET", "h", "f", "v"),
    ("LPUSH", "h", "a"), ("RPUSH", "h", "a"), ("LPUSHX", "h", "a"), ("RPUSHX", "h", "a"),
    ("LPOP", "h"), ("RPOP", "h", "2"), ("LPOP", "h", "x"), ("LPOP", "h", "0"), ("LLEN", "h"),
    ("LRANGE", "h", "0", "1"), ("LRANGE", "h", "x", "1"), ("LINDEX", "h", "0"),
    ("LINDEX", "h", "x"), ("LSET", "h", "0", "x"), ("LSET", "h", "x", "x"),
    ("LREM", "h", "0", "x"), ("LREM", "h", "x", "x"), ("LTRIM", "h", "0", "1"),
    ("LINSERT", "h", "BEFORE", "a", "b"), ("LINSERT", "h", "MIDDLE", "a", "b"),
    ("LPOS", "h", "a"), ("LPOS", "h", "a", "RANK", "0"), ("LMOVE", "h", "x", "LEFT", "LEFT"),
    ("RPUSH", "ok", "v"), ("LMOVE", "ok", "h", "LEFT", "LEFT"), ("LLEN", "ok"),
    ("LMOVE", "nokey", "h", "LEFT", "LEFT"), ("RPOPLPUSH", "h", "x"), ("RPOPLPUSH", "ok", "h"),
    ("LMPOP", "2", "nokey", "h", "LEFT"), ("LMPOP", "2", "ok", "h", "LEFT"),
    # binary-safe values and integer-looking elements
    ("RPUSH", "bin", "\x00\xff", "\r\n", "12345", "-1", "007", "1e3"),
    ("LRANGE", "bin", "0", "-1"), ("LPOS", "bin", "12345"), ("LREM", "bin", "0", "007"),
    ("LINSERT", "bin", "AFTER", "-1", "x"), ("LRANGE", "bin", "0", "-1"),
    # unknown-ish casing of the command name
    ("lpush", "case", "a"), ("LpOp", "case"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_edge_cases(pair):
    for argv in CASES:
        pair.check(*argv)


@pytest.mark.parametrize("proto", [2, 3])
def test_big_lists(pair):
    pair.check("RPUSH", "big", *[str(i % 37) for i in range(3000)])
    for argv in (("LRANGE", "big", "1000", "1010"), ("LRANGE", "big", "-20", "-1"),
                 ("LINDEX", "big", "2999"), ("LINDEX", "big", "-1500"),
                 ("LPOS", "big", "5", "RANK", "-3", "COUNT", "4"),
                 ("LPOS", "big", "5", "MAXLEN", "100", "COUNT", "0"),
                 ("LREM", "big", "-10", "7"), ("LINSERT", "big", "BEFORE", "36", "x"),
                 ("LSET", "big", "1500", "y"), ("LTRIM", "big", "100", "-100"),
                 ("LPOP", "big", "50"), ("RPOP", "big", "50"),
                 ("LRANGE", "big", "0", "-1")):
        pair.check(*argv)


def test_expired_list(pair):
    pair.check("RPUSH", "e", "a", "b")
    pair.check("PEXPIRE", "e", "30")
    # Wait until both have expired the key (reading it expires it lazily).
    wait_for(lambda: pair.both("LLEN", "e") == (b":0\r\n", b":0\r\n"), 5,
             what="the list to expire on both servers")
    pair.check("LPUSHX", "e", "x")
    pair.check("RPUSH", "e", "x")
    pair.check("PTTL", "e")
    pair.check("LRANGE", "e", "0", "-1")


# -- random command sequences --------------------------------------------------------------
#
# Hypothesis draws a seed and the sequence length; the commands come from ``random.Random(seed)``
# with explicit weights, so far more of them hit interesting states (valid indexes near the
# list ends, existing elements) than hypothesis's own biased draws do. A failure reports the
# seed and the whole sequence so far.

KEYS = ["k0", "k1", "k2", "k3"]
VALS = ["a", "b", "c", "1", "-1", ""]
BAD_INTS = ["x", "1.5", "", "-0", "+1", " 1", "01", BIG, SMALL, "9223372036854775808"]
WHERE = ["LEFT", "RIGHT", "left", "right"]


def rand_int(rnd: random.Random) -> str:
    if rnd.random() < 0.12:
        return rnd.choice(BAD_INTS)
    return str(rnd.randint(-7, 7))


def rand_where(rnd: random.Random) -> str:
    return "UP" if rnd.random() < 0.05 else rnd.choice(WHERE)


def rand_command(rnd: random.Random) -> tuple[str, ...]:
    k = rnd.choice(KEYS)
    v = rnd.choice(VALS)
    kind = rnd.choices(
        ["push", "pop", "llen", "lrange", "lindex", "lset", "lrem", "ltrim", "linsert", "lpos",
         "lmove", "rpoplpush", "lmpop", "hset", "arity"],
        weights=[8, 4, 1, 3, 3, 2, 2, 2, 2, 3, 2, 1, 2, 0.3, 0.3])[0]
    if kind == "push":
        name = rnd.choices(["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"], weights=[4, 4, 1, 1])[0]
        return (name, k, *rnd.choices(VALS, k=rnd.randint(1, 4)))
    if kind == "pop":
        extra = rnd.choices([(), (rand_int(rnd),), (rand_int(rnd), "1")], weights=[4, 4, 1])[0]
        return (rnd.choice(["LPOP", "RPOP"]), k, *extra)
    if kind == "llen":
        return ("LLEN", k)
    if kind == "lrange":
        return ("LRANGE", k, rand_int(rnd), rand_int(rnd))
    if kind == "lindex":
        return ("LINDEX", k, rand_int(rnd))
    if kind == "lset":
        return ("LSET", k, rand_int(rnd), v)
    if kind == "lrem":
        return ("LREM", k, rand_int(rnd), v)
    if kind == "ltrim":
        return ("LTRIM", k, rand_int(rnd), rand_int(rnd))
    if kind == "linsert":
        where = rnd.choices(["BEFORE", "AFTER", "after", "X"], weights=[4, 4, 1, 0.3])[0]
        return ("LINSERT", k, where, rnd.choice(VALS), v)
    if kind == "lpos":
        opts: list[str] = []
        for _ in range(rnd.choices([0, 1, 2, 3], weights=[3, 3, 2, 1])[0]):
            opt = rnd.choices(["RANK", "COUNT", "MAXLEN", "BAD"], weights=[4, 4, 3, 0.3])[0]
            opts += [opt, rand_int(rnd)]
        return ("LPOS", k, v, *opts)
    if kind == "lmove":
        return ("LMOVE", k, rnd.choice(KEYS), rand_where(rnd), rand_where(rnd))
    if kind == "rpoplpush":
        return ("RPOPLPUSH", k, rnd.choice(KEYS))
    if kind == "lmpop":
        keys = rnd.sample(KEYS, rnd.randint(1, 3))
        numkeys = str(len(keys)) if rnd.random() < 0.85 else rnd.choice(["0", "x", "5", "1"])
        count = rnd.choices([(), ("COUNT", rand_int(rnd)), ("COUNT",)], weights=[3, 4, 0.3])[0]
        return ("LMPOP", numkeys, *keys, rand_where(rnd), *count)
    if kind == "hset":
        return ("HSET", k, "f", v)
    return rnd.choice([("LLEN",), ("LPUSH", k), ("LINDEX", k), ("LMPOP", "1", k),
                       ("LRANGE", k, "0"), ("LSET", k, "0")])


@diff.sequence_settings(100)
@given(proto=diff.PROTOS, seed=diff.SEEDS, n=st.integers(5, 40))
def test_random_sequences(pairs, proto, seed, n):
    rnd = random.Random(seed)
    final = [(name, key, *args) for key in KEYS
             for name, *args in (("LRANGE", "0", "-1"), ("HGETALL",))]
    diff.run_sequence(pairs[proto], (rand_command(rnd) for _ in range(n)), final=final)


# -- propagation ---------------------------------------------------------------------------

PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("RPUSH", "l", "a", "b", "c", "d", "e"), ("LPUSH", "l", "z"), ("LPUSHX", "nokey", "a"),
    ("RPUSHX", "l", "y"), ("LPOP", "l"), ("RPOP", "l", "2"), ("LPOP", "l", "0"),
    ("LPOP", "nokey", "3"), ("LREM", "l", "0", "nothere"), ("LREM", "l", "1", "b"),
    ("LSET", "l", "0", "A"), ("LSET", "l", "99", "A"), ("LINSERT", "l", "BEFORE", "zz", "x"),
    ("LINSERT", "l", "AFTER", "A", "x"), ("LTRIM", "l", "0", "-1"), ("LTRIM", "l", "1", "-1"),
    ("RPUSH", "src", "1", "2"), ("LMOVE", "src", "dst", "LEFT", "RIGHT"),
    ("RPOPLPUSH", "src", "dst"), ("RPOPLPUSH", "src", "dst"),
    ("LMPOP", "2", "nokey", "dst", "RIGHT", "COUNT", "5"), ("LMPOP", "1", "dst", "LEFT"),
    ("RPUSH", "m", "1", "2", "3"), ("LMPOP", "2", "nokey", "m", "LEFT", "COUNT", "2"),
    ("LMPOP", "1", "m", "RIGHT", "COUNT", "7"), ("LPOP", "l", "x"), ("LLEN", "l"),
    ("LTRIM", "l", "5", "1"), ("LRANGE", "l", "0", "-1"),
]


def test_propagation(tapped_redis):
    diff.check_propagation(tapped_redis.port, PROPAGATION_CASES)
