"""Differential tests of the sorted set commands: pyrepl against real redis-server 7.0.15.

A hand-written table of edge cases (every option, every error text, score and range parsing
corners, double formatting) replayed in RESP2 and RESP3 with replies compared byte for byte;
large sorted sets (skiplist encoded in Redis); random command sequences over four keys; and
propagation compared with what real Redis sends to a replica attached with SYNC.

ZRANDMEMBER picks at random: it is compared for what is deterministic (errors, reply type,
count, distinctness, member/score pairs taken from the set). ZSCAN of a big sorted set is
compared as the union of a complete iteration.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff
from tests.support.resp import RespError, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

BIG = "9223372036854775807"
SMALL = "-9223372036854775808"

SCORE_TEXTS = ["1", "-1", "0", "-0", "+0", "1.5", ".5", "5.", "1e5", "1E-5", "0x10", "0X1P-2",
               "1e0", "1E+00", "0x1p-1075", "0x1p-1074", "0x1.8p-1074",
               "0x.8p1", "inf", "+inf", "-inf", "Infinity", "-INFINITY", "infinit", "nan",
               "-nan", "NaN", "1e400", "-1e400", "1e-400", "4e-324", "2e-324", "0e-400",
               "0x1p-1080", "0x1p2000", "", " 1", "1 ", "\t1", "1\x00", "\x00", "1_0", "0x",
               "1e", "1e+", ".", "-", "+", "+.5", "0.1", "0.30000000000000004",
               "1.7976931348623157e308", "123456789012345678", "9007199254740993",
               "4611686018427387904", "-4611686018427387904", "12345678901234567890", "1e17",
               "1e16", "000000012345", "3.14159", "x", "1.0.0"]

RANGE_TEXTS = ["1", "(1", "-inf", "+inf", "(-inf", "(inf", "", "(", " 2", "( 2", "\n(2", "2 ",
               "1e400", "(1e400", "-1e400", "nan", "(nan", "0x2", "(0x1p1", "1\x00zz",
               "(1\x00zz", "-", "+", "infinity", "(-Infinity", "x", "((1", "1.5", "(2.5"]

LEX_TEXTS = ["-", "+", "[a", "(a", "[b", "(c", "[", "(", "[aa", "(zz", "a", "", "+x", "-x",
             "+\x00abc", "-\x00", "[\x00", "(b\x00"]

CASES: list[tuple[str, ...]] = [
    # ZADD options and errors
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1.5", "a"),
    ("ZADD", "z", "NX", "5", "a", "6", "d"), ("ZADD", "z", "XX", "7", "a", "8", "e"),
    ("ZADD", "z", "XX", "CH", "7", "a", "9", "b"), ("ZADD", "z", "NX", "XX", "1", "a"),
    ("ZADD", "z", "GT", "LT", "1", "a"), ("ZADD", "z", "GT", "NX", "1", "a"),
    ("ZADD", "z", "LT", "NX", "1", "a"), ("ZADD", "z", "INCR", "1", "a", "2", "b"),
    ("ZADD", "z", "INCR", "1", "a"), ("ZADD", "z", "INCR", "NX", "1", "a"),
    ("ZADD", "z", "INCR", "XX", "1", "zz"), ("ZADD", "z", "GT", "1", "a"),
    ("ZADD", "z", "GT", "CH", "100", "a"), ("ZADD", "z", "LT", "CH", "1", "a", "0", "newm"),
    ("ZADD", "z", "GT", "INCR", "-1", "a"), ("ZADD", "z", "LT", "INCR", "-1", "a"),
    ("ZADD", "z", "GT", "XX", "CH", "500", "a", "1", "never"),
    ("ZADD", "z", "ch", "nx", "ch", "9", "ch"), ("ZADD", "z", "incr", "incr", "1", "a"),
    ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"), ("ZADD", "z"), ("ZADD", "z", "CH"),
    ("ZADD", "z", "CH", "NX"), ("ZADD", "z", "x", "a"), ("ZADD", "z", "1", "a", "x", "b"),
    ("ZADD", "nz", "XX", "1", "a"), ("ZADD", "nz", "XX", "INCR", "1", "a"), ("EXISTS", "nz"),
    ("ZADD", "nz", "GT", "5", "a"), ("ZADD", "nz", "LT", "INCR", "5", "b"),
    ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZRANGE", "nz", "0", "-1", "WITHSCORES"),
    # NaN from increments
    ("ZADD", "inf", "-inf", "a", "+inf", "b"), ("ZADD", "inf", "INCR", "+inf", "a"),
    ("ZINCRBY", "inf", "-inf", "b"), ("ZADD", "inf", "GT", "INCR", "-inf", "b"),
    ("ZADD", "inf", "INCR", "inf", "b"), ("ZINCRBY", "inf", "1e308", "c"),
    ("ZINCRBY", "inf", "1e308", "c"), ("ZRANGE", "inf", "0", "-1", "WITHSCORES"),
    # ZINCRBY
    ("ZINCRBY", "z", "1", "a"), ("ZINCRBY", "z", "x", "a"), ("ZINCRBY", "z", "nx", "a"),
    ("ZINCRBY", "z", "incr", "a"), ("ZINCRBY", "z", "1", "newone"), ("ZINCRBY", "nz2", "2.5", "m"),
    ("ZINCRBY", "nz2", "-0", "m2"), ("ZINCRBY", "nz3", "-0", "m"), ("ZSCORE", "nz3", "m"),
    ("ZINCRBY", "z", "0.1", "dec"), ("ZINCRBY", "z", "0.2", "dec"), ("ZINCRBY", "z", "1"),
    # reads
    ("ZSCORE", "z", "a"), ("ZSCORE", "z", "nope"), ("ZSCORE", "nokey", "a"), ("ZSCORE", "z"),
    ("ZMSCORE", "z", "a", "nope", "b"), ("ZMSCORE", "nokey", "a", "b"), ("ZMSCORE", "z"),
    ("ZCARD", "z"), ("ZCARD", "nokey"), ("ZCARD", "z", "x"),
    ("ZRANK", "z", "dec"), ("ZRANK", "z", "nope"), ("ZRANK", "nokey", "a"),
    ("ZREVRANK", "z", "dec"), ("ZREVRANK", "nokey", "a"), ("ZRANK", "z", "a", "WITHSCORE"),
    # ZREM
    ("ZREM", "z", "a", "nope", "a"), ("ZREM", "nokey", "a"), ("ZREM", "z"),
    ("ZADD", "two", "1", "a", "2", "b"), ("ZREM", "two", "a", "b", "c"), ("EXISTS", "two"),
    # wrong types
    ("SET", "str", "x"), ("SADD", "st", "m"),
    ("ZADD", "str", "1", "a"), ("ZADD", "str", "x", "a"), ("ZADD", "st", "NX", "XX", "1", "a"),
    ("ZINCRBY", "st", "1", "a"), ("ZREM", "st", "a"), ("ZCARD", "str"), ("ZSCORE", "st", "a"),
    ("ZMSCORE", "str", "a"), ("ZRANK", "st", "a"), ("ZREVRANK", "str", "a"),
    ("ZCOUNT", "st", "0", "1"), ("ZCOUNT", "st", "x", "1"), ("ZLEXCOUNT", "str", "-", "+"),
    ("ZLEXCOUNT", "str", "x", "+"), ("ZRANGE", "st", "0", "1"), ("ZRANGE", "st", "x", "1"),
    ("ZRANGEBYSCORE", "str", "0", "1"), ("ZRANGEBYLEX", "st", "-", "+"),
    ("ZREMRANGEBYRANK", "st", "0", "1"), ("ZREMRANGEBYRANK", "st", "x", "1"),
    ("ZREMRANGEBYSCORE", "str", "0", "1"), ("ZREMRANGEBYLEX", "st", "-", "+"),
    ("ZPOPMIN", "st"), ("ZPOPMAX", "str", "0"), ("ZPOPMAX", "str", "-1"),
    ("ZRANDMEMBER", "st"), ("ZRANDMEMBER", "st", "1"), ("ZSCAN", "st", "0"),
    ("ZRANGESTORE", "d", "st", "0", "-1"), ("ZRANGESTORE", "st", "z", "0", "0"),
    ("TYPE", "st"), ("ZUNIONSTORE", "d", "2", "z", "str"), ("ZUNION", "1", "str", "FOO"),
    ("ZMPOP", "2", "nokey", "str", "MIN"), ("ZMPOP", "2", "z", "str", "MIN"),
    ("SADD", "st", "m"),
]

# score parsing: each text as a ZADD score, a ZINCRBY increment and a WEIGHTS value
for _i, _t in enumerate(SCORE_TEXTS):
    CASES += [("ZADD", "parse", _t, f"m{_i}"), ("ZINCRBY", "parse2", _t, "m"),
              ("ZUNION", "1", "z", "WEIGHTS", _t, "WITHSCORES")]
CASES += [("ZRANGE", "parse", "0", "-1", "WITHSCORES"), ("ZSCAN", "parse", "0"),
          ("ZRANGE", "parse2", "0", "-1", "WITHSCORES")]

CASES += [
    ("ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
    ("ZADD", "r", "-inf", "ninf", "inf", "pinf"),
]
for _lo in RANGE_TEXTS:
    for _hi in ("3", "(4", "+inf", "inf", _lo):
        CASES += [("ZCOUNT", "r", _lo, _hi), ("ZRANGEBYSCORE", "r", _lo, _hi),
                  ("ZREVRANGEBYSCORE", "r", _hi, _lo, "WITHSCORES")]

CASES += [
    # ZRANGE by rank and its options
    ("ZRANGE", "r", "0", "-1"), ("ZRANGE", "r", "1", "2", "WITHSCORES"),
    ("ZRANGE", "r", "-2", "-1"), ("ZRANGE", "r", "3", "1"), ("ZRANGE", "r", "10", "20"),
    ("ZRANGE", "r", "-100", "100"), ("ZRANGE", "r", SMALL, BIG), ("ZRANGE", "r", "x", "1"),
    ("ZRANGE", "r", "0", "1.5"), ("ZRANGE", "r", "0", "1", "LIMIT", "0", "1"),
    ("ZRANGE", "r", "0", "1", "LIMIT", "0", "-1"), ("ZRANGE", "r", "0", "1", "LIMIT", "x", "1"),
    ("ZRANGE", "r", "0", "1", "LIMIT", "0"), ("ZRANGE", "r", "0", "1", "foo"),
    ("ZRANGE", "r", "0", "1", "REV"), ("ZRANGE", "r", "0", "1", "REV", "WITHSCORES"),
    ("ZRANGE", "r", "0", "1", "REV", "REV"), ("ZRANGE", "r", "0", "1", "withscores", "withscores"),
    ("ZRANGE", "r", "1", "3", "BYSCORE"), ("ZRANGE", "r", "(1", "3", "BYSCORE", "WITHSCORES"),
    ("ZRANGE", "r", "3", "1", "BYSCORE", "REV"),
    ("ZRANGE", "r", "5", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "1", "2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "-1", "2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "1", "-2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "6", "2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "7", "2"),
    ("ZRANGE", "r", "-inf", "5", "BYSCORE", "LIMIT", "0", "0"),
    ("ZRANGE", "r", "-inf", "+inf", "byscore", "limit", "0", "1", "limit", "2", "3"),
    ("ZRANGE", "r", "(0", "+inf", "BYSCORE", "LIMIT", "1"),
    ("ZRANGE", "r", "0", "-1", "WITHSCORES", "LIMIT", "1", "2", "BYSCORE"),
    ("ZRANGE", "r", "[a", "[c", "BYLEX"), ("ZRANGE", "r", "[a", "[c", "BYLEX", "WITHSCORES"),
    ("ZRANGE", "r", "-", "+", "BYLEX"), ("ZRANGE", "r", "+", "-", "BYLEX", "REV"),
    ("ZRANGE", "r", "[c", "-", "BYLEX", "REV", "LIMIT", "1", "1"),
    ("ZRANGE", "r", "a", "c", "BYLEX"), ("ZRANGE", "r", "0", "1", "BYSCORE", "BYLEX"),
    ("ZRANGE", "r", "0", "1", "BYLEX", "BYSCORE"), ("ZRANGE", "nokey", "0", "1"),
    ("ZRANGE", "nokey", "x", "1"), ("ZRANGE", "nokey", "a", "b", "BYLEX"),
    ("ZRANGE", "r", "0"),
    ("ZREVRANGE", "r", "0", "1"), ("ZREVRANGE", "r", "0", "1", "WITHSCORES"),
    ("ZREVRANGE", "r", "0", "1", "LIMIT", "0", "1"), ("ZREVRANGE", "r", "0", "1", "REV"),
    ("ZREVRANGE", "r", "0", "1", "BYSCORE"), ("ZREVRANGE", "r", "-1", "-2"),
    ("ZREVRANGE", "r", "1", "100"), ("ZREVRANGE", "r", "-100", "-3"),
    ("ZRANGEBYSCORE", "r", "2", "4", "WITHSCORES", "LIMIT", "1", "1"),
    ("ZRANGEBYSCORE", "r", "2", "4", "REV"), ("ZRANGEBYSCORE", "r", "2", "4", "BYSCORE"),
    ("ZRANGEBYSCORE", "r", "2", "4", "LIMIT", "1"), ("ZRANGEBYSCORE", "r", "2", "4", "FOO"),
    ("ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "2", "10"),
    ("ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "-1", "10"),
    ("ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "6", "10"),
    ("ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "7", "10"),
    ("ZREVRANGEBYSCORE", "r", "+inf", "-inf", "LIMIT", "1", "-3"),
]

CASES += [("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "aa", "0", "", "0", "b\x00",
           "0", "zz")]
for _lo in LEX_TEXTS:
    for _hi in ("+", "[c", "(c", "-", "[b\x00", _lo):
        CASES += [("ZRANGEBYLEX", "lex", _lo, _hi), ("ZREVRANGEBYLEX", "lex", _hi, _lo),
                  ("ZLEXCOUNT", "lex", _lo, _hi)]
CASES += [
    ("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "1", "3"),
    ("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "-1", "3"),
    ("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "2", "-1"),
    ("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "20", "1"),
    ("ZRANGEBYLEX", "lex", "-", "+", "LIMIT", "0", "0"),
    ("ZRANGEBYLEX", "lex", "-", "+", "WITHSCORES"),
    ("ZREVRANGEBYLEX", "lex", "+", "-", "LIMIT", "2", "2"),
    ("ZREVRANGEBYLEX", "lex", "+", "-", "LIMIT", "-2", "2"),
    ("ZREVRANGEBYLEX", "lex", "[c", "(a", "LIMIT", "1", "-5"),
    ("ZLEXCOUNT", "nokey", "-", "+"), ("ZLEXCOUNT", "nokey", "x", "+"),
    # mixed scores: Redis walks its listpack
    ("ZADD", "mix", "1", "a", "2", "b", "1", "c", "3", "aa", "0", "zz", "2", "ab"),
]
for _lo in ("-", "[a", "(a", "[b", "[c", "+", "[zz"):
    for _hi in ("+", "[c", "(b", "[zz", "-", "[aa"):
        CASES += [("ZRANGEBYLEX", "mix", _lo, _hi), ("ZREVRANGEBYLEX", "mix", _hi, _lo),
                  ("ZLEXCOUNT", "mix", _lo, _hi),
                  ("ZRANGEBYLEX", "mix", _lo, _hi, "LIMIT", "1", "2"),
                  ("ZREVRANGEBYLEX", "mix", _hi, _lo, "LIMIT", "1", "2")]
CASES += [("ZREMRANGEBYLEX", "mix", "[b", "+"), ("ZRANGE", "mix", "0", "-1", "WITHSCORES"),
          ("ZREMRANGEBYLEX", "mix", "-", "(b"), ("ZRANGE", "mix", "0", "-1", "WITHSCORES")]

CASES += [
    # removal by range
    ("ZADD", "q", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
    ("ZREMRANGEBYRANK", "q", "1", "2"), ("ZREMRANGEBYRANK", "q", "5", "10"),
    ("ZREMRANGEBYRANK", "q", "-1", "-1"), ("ZREMRANGEBYRANK", "q", "x", "1"),
    ("ZREMRANGEBYRANK", "q", "1", "0"), ("ZREMRANGEBYRANK", "q", SMALL, "-3"),
    ("ZREMRANGEBYRANK", "nokey", "0", "1"), ("ZREMRANGEBYRANK", "nokey", "x", "1"),
    ("ZRANGE", "q", "0", "-1"), ("ZREMRANGEBYRANK", "q", "0", "-1"), ("EXISTS", "q"),
    ("ZADD", "q", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
    ("ZREMRANGEBYSCORE", "q", "(1", "3"), ("ZREMRANGEBYSCORE", "q", "x", "3"),
    ("ZREMRANGEBYSCORE", "q", "10", "20"), ("ZREMRANGEBYSCORE", "q", "(5", "5"),
    ("ZREMRANGEBYSCORE", "nokey", "x", "1"), ("ZREMRANGEBYSCORE", "q", "-inf", "inf"),
    ("EXISTS", "q"), ("ZADD", "q", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"),
    ("ZREMRANGEBYLEX", "q", "[b", "(d"), ("ZREMRANGEBYLEX", "q", "x", "y"),
    ("ZREMRANGEBYLEX", "q", "(e", "+"), ("ZREMRANGEBYLEX", "nokey", "x", "+"),
    ("ZREMRANGEBYLEX", "q", "-", "+"), ("EXISTS", "q"), ("ZREMRANGEBYLEX", "q", "-"),
    # pops
    ("ZADD", "p", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
    ("ZPOPMIN", "p"), ("ZPOPMAX", "p"), ("ZPOPMIN", "p", "2"), ("ZPOPMAX", "p", "0"),
    ("ZPOPMIN", "p", "-1"), ("ZPOPMIN", "p", "x"), ("ZPOPMIN", "p", "1", "2"),
    ("ZPOPMIN", "p", "10"), ("ZPOPMIN", "p"), ("ZPOPMIN", "p", "5"), ("ZPOPMAX", "nokey"),
    ("ZPOPMAX", "nokey", "0"), ("ZPOPMAX", "nokey", "-1"), ("ZADD", "p", "1", "a", "2", "b"),
    ("ZPOPMAX", "p", "1"), ("ZPOPMAX", "p", BIG), ("ZPOPMIN",),
    # ZMPOP
    ("ZADD", "mp", "1", "a", "2", "b", "3", "c"), ("ZMPOP", "1", "mp", "MIN"),
    ("ZMPOP", "1", "mp", "max", "COUNT", "1"), ("ZMPOP", "2", "nokey", "mp", "MIN", "COUNT", "9"),
    ("ZMPOP", "2", "nokey", "mp", "MIN"), ("ZMPOP", "0", "mp", "MIN"), ("ZMPOP", "x", "mp", "MIN"),
    ("ZMPOP", "1", "mp"), ("ZMPOP", "1", "mp", "FOO"), ("ZMPOP", "1", "mp", "MIN", "COUNT", "0"),
    ("ZMPOP", "1", "mp", "MIN", "COUNT", "-1"), ("ZMPOP", "1", "mp", "MIN", "COUNT"),
    ("ZMPOP", "1", "mp", "MIN", "COUNT", "1", "COUNT", "1"), ("ZMPOP", "3", "mp", "MIN"),
    ("ZMPOP", "1", "nokey", "MAX"), ("ZMPOP", "1", "mp", "MIN", "FOO"),
    # ZRANDMEMBER deterministic forms
    ("ZADD", "f", "1.5", "a", "2.25", "b", "1e20", "c", "-1e-5", "d", "123456.789", "e"),
    ("ZRANDMEMBER", "f", "100"), ("ZRANDMEMBER", "f", "5", "WITHSCORES"),
    ("ZRANDMEMBER", "f", "-1", "foo"), ("ZRANDMEMBER", "f", "1", "2", "3"),
    ("ZRANDMEMBER", "f", "x"), ("ZRANDMEMBER", "f", "0"), ("ZRANDMEMBER", "f", "0", "WITHSCORES"),
    ("ZRANDMEMBER", "nokey"), ("ZRANDMEMBER", "nokey", "5"), ("ZRANDMEMBER", "nokey", "x"),
    ("ZRANDMEMBER", "f", BIG, "WITHSCORES"), ("ZRANDMEMBER", "f", SMALL),
    ("ZRANDMEMBER", "f", "-4611686018427387904", "WITHSCORES"),
    ("ZRANDMEMBER", "f", "4611686018427387903", "WITHSCORES"),
    # union / intersection / difference
    ("ZADD", "ua", "1", "x", "2", "y", "3", "z"), ("ZADD", "ub", "10", "y", "20", "z", "30", "w"),
    ("SADD", "uc", "y", "w", "v"), ("ZADD", "pinf", "inf", "x"), ("ZADD", "ninf", "-inf", "x"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub"), ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZUNIONSTORE", "out", "3", "ua", "ub", "uc", "WEIGHTS", "1", "2", "3"),
    ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "AGGREGATE", "min"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "aggregate", "MAX", "weights", "2", "-1"),
    ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "AGGREGATE", "foo"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "AGGREGATE"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "WEIGHTS", "1"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "WEIGHTS", "1", "x"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "WEIGHTS", "1", "nan"),
    ("ZUNIONSTORE", "out", "2", "ua", "ub", "WITHSCORES"), ("ZUNIONSTORE", "out", "0", "ua"),
    ("ZUNIONSTORE", "out", "-1", "ua"), ("ZUNIONSTORE", "out", "x", "ua"),
    ("ZUNIONSTORE", "out", "3", "ua", "ub"), ("ZUNIONSTORE", "out", "2", "ua", "nokey"),
    ("ZUNIONSTORE", "out", "1", "nokey"), ("EXISTS", "out"), ("ZUNIONSTORE", "out", "1", "nokey"),
    ("ZINTERSTORE", "out", "2", "ua", "ub"), ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZINTERSTORE", "out", "3", "ua", "ub", "uc"), ("ZINTERSTORE", "out", "2", "ua", "nokey"),
    ("EXISTS", "out"), ("ZINTERSTORE", "out", "2", "ua", "ua", "WEIGHTS", "2", "3"),
    ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZINTERSTORE", "out", "1", "pinf", "WEIGHTS", "0"), ("ZSCORE", "out", "x"),
    ("ZUNIONSTORE", "out", "2", "pinf", "ninf"), ("ZSCORE", "out", "x"),
    ("ZUNION", "2", "pinf", "ninf", "WITHSCORES", "AGGREGATE", "MIN"),
    ("ZUNION", "2", "pinf", "ninf", "WITHSCORES", "AGGREGATE", "MAX"),
    ("ZINTER", "2", "pinf", "ninf", "WITHSCORES", "WEIGHTS", "-1", "1"),
    ("ZUNION", "1", "ua", "WEIGHTS", "-0", "WITHSCORES"),
    ("ZUNIONSTORE", "neg", "1", "ua", "WEIGHTS", "-0"), ("ZRANGE", "neg", "0", "-1", "WITHSCORES"),
    ("ZUNION", "1", "ua", "WEIGHTS", "0.1", "WITHSCORES"),
    ("ZDIFFSTORE", "out", "2", "ua", "ub"), ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZDIFFSTORE", "out", "2", "ua", "ua"), ("ZDIFFSTORE", "out", "3", "ua", "uc", "nokey"),
    ("ZDIFFSTORE", "out", "2", "ua", "ub", "WEIGHTS", "1", "2"),
    ("ZDIFFSTORE", "out", "2", "nokey", "ua"), ("ZDIFFSTORE", "out", "1", "uc"),
    ("ZRANGE", "out", "0", "-1", "WITHSCORES"),
    ("ZUNION", "2", "ua", "ub"), ("ZUNION", "2", "ua", "ub", "WITHSCORES"),
    ("ZUNION", "2", "ua", "ub", "WITHSCORES", "WITHSCORES"), ("ZUNION", "1", "uc", "WITHSCORES"),
    ("ZINTER", "2", "ua", "ub", "WITHSCORES"),
    ("ZINTER", "3", "ua", "ub", "uc", "WITHSCORES", "AGGREGATE", "MAX"),
    ("ZDIFF", "2", "ua", "ub", "WITHSCORES"), ("ZDIFF", "2", "ua", "ub", "AGGREGATE", "SUM"),
    ("ZDIFF", "2", "uc", "ua", "WITHSCORES"), ("ZINTER", "0", "ua"), ("ZUNION", "2", "ua"),
    ("ZINTERCARD", "2", "ua", "ub"), ("ZINTERCARD", "2", "ua", "ub", "LIMIT", "1"),
    ("ZINTERCARD", "2", "ua", "ub", "LIMIT", "-1"), ("ZINTERCARD", "2", "ua", "ub", "LIMIT", "x"),
    ("ZINTERCARD", "2", "ua", "ub", "WITHSCORES"), ("ZINTERCARD", "0", "ua"),
    ("ZINTERCARD", "3", "ua", "ub", "uc"), ("ZINTERCARD", "2", "ua", "nokey"),
    ("ZINTERCARD", "1", "ua", "LIMIT", "0"), ("ZINTERCARD", "1", "ua", "WEIGHTS", "1"),
    ("ZUNION", "2", "ua", "str"), ("ZINTER", "2", "nokey", "str"),
    # ZRANGESTORE
    ("ZRANGESTORE", "dst", "ua", "0", "-1"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "dst", "ua", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "dst", "ua", "(1", "+inf", "BYSCORE"),
    ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "dst", "ua", "[y", "+", "BYLEX"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "dst", "ua", "5", "10", "BYSCORE"), ("EXISTS", "dst"),
    ("ZRANGESTORE", "dst", "nokey", "0", "-1"),
    ("ZRANGESTORE", "dst", "ua", "0", "-1", "REV", "LIMIT", "0", "1"),
    ("ZRANGESTORE", "dst", "ua", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "0", "1"),
    ("ZRANGE", "dst", "0", "-1", "WITHSCORES"), ("ZRANGESTORE", "dst", "ua", "0"),
    ("ZRANGESTORE", "dst", "ua", "x", "1"), ("ZRANGESTORE", "ua", "ua", "1", "1"),
    ("ZRANGE", "ua", "0", "-1", "WITHSCORES"),
    # negative zero and double formatting
    ("ZADD", "neg0", "-0", "a"), ("ZSCORE", "neg0", "a"), ("ZADD", "neg0", "0", "a"),
    ("ZADD", "neg0", "INCR", "-0", "a"), ("ZRANGE", "neg0", "0", "-1", "WITHSCORES"),
    ("ZADD", "fmt", "0.1", "a", "1e20", "b", "-1e-300", "c", "5e-324", "d", "1e16", "e",
     "123.456", "f", "1.7976931348623157e308", "g", "0.30000000000000004", "h"),
    ("ZRANGE", "fmt", "0", "-1", "WITHSCORES"), ("ZSCAN", "fmt", "0"),
    ("ZMSCORE", "fmt", "a", "b", "c", "d", "e", "f", "g", "h"),
    # ZSCAN on small sets (listpack: whole, in order, stored score text)
    ("ZADD", "sc", "1", "a", "2.5", "b", "inf", "c", "-inf", "d", "1e17", "e", "1e20", "f",
     "4611686018427387904", "g", "4611686018427387905", "h", "-4611686018427387904", "i"),
    ("ZSCAN", "sc", "0"), ("ZSCAN", "sc", "0", "MATCH", "[a-c]"), ("ZSCAN", "sc", "0", "COUNT", "1"),
    ("ZSCAN", "sc", "0", "COUNT", "0"), ("ZSCAN", "sc", "x"), ("ZSCAN", "sc", "0", "TYPE", "x"),
    ("ZSCAN", "nokey", "0"), ("ZSCAN", "nokey", "0", "COUNT", "0"), ("ZSCAN", "sc"),
    ("ZSCAN", "sc", "0", "MATCH", "*", "COUNT", "5"), ("ZSCAN", "sc", "0", "MATCH"),
    # binary members and command-name case
    ("ZADD", "bin", "1", "", "1", "a\x00b", "1", "\xff", "1", "\r\n"),
    ("ZRANGE", "bin", "0", "-1"), ("ZRANGEBYLEX", "bin", "[a", "+"), ("ZSCORE", "bin", ""),
    ("zadd", "Case", "1", "A"), ("ZaDd", "Case", "2", "b"), ("zrange", "Case", "0", "-1"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_edge_cases(pair):
    for argv in CASES:
        pair.check(*argv)


# -- random replies, big sets, expiry -----------------------------------------------------------

def _pairs_of(v: object, withscores: bool, proto: int) -> list:
    if not isinstance(v, list):
        return [v]
    if not withscores:
        return v
    if proto == 3:
        return [tuple(x) for x in v]
    return list(zip(v[0::2], v[1::2], strict=True))


def check_zrandmember(p: diff.Pair, *argv: str) -> None:
    key = argv[1]
    withscores = len(argv) > 3 and argv[3].lower() == "withscores"
    snap = {}
    for raw in p.both("ZRANGE", key, "0", "-1", "WITHSCORES"):
        v = parse_reply(raw)
        if isinstance(v, list):
            snap = dict(_pairs_of(v, True, p.proto)) if v else {}
    ra, rb = p.both(*argv)
    va, vb = parse_reply(ra), parse_reply(rb)
    if isinstance(va, RespError) or isinstance(vb, RespError) or va is None or vb is None:
        assert ra == rb, f"{argv}: {ra!r} != {rb!r}"
        return
    assert ra[:1] == rb[:1], f"{argv}: {ra!r} / {rb!r}"
    la, lb = _pairs_of(va, withscores, p.proto), _pairs_of(vb, withscores, p.proto)
    assert len(la) == len(lb), f"{argv}: {ra!r} / {rb!r}"
    count = int(argv[2]) if len(argv) > 2 else 1
    for got in (la, lb):
        for item in got:
            if withscores:
                member, score = item
                assert member in snap and float(score) == float(snap[member]), (argv, item)
            else:
                assert item in snap, (argv, item, snap)
        if count > 0:
            assert len(set(got)) == len(got), (argv, got)


def check_zscan_all(p: diff.Pair, key: str, *opts: str) -> None:
    results = []
    for client in (p.a, p.b):
        seen: dict[bytes, float] = {}
        cursor = b"0"
        for _ in range(10000):
            v = parse_reply(client.call("ZSCAN", key, cursor, *opts))
            if isinstance(v, RespError):
                seen = {str(v).encode(): 0.0}
                break
            cursor, page = v
            for m, s in zip(page[0::2], page[1::2], strict=True):
                seen[m] = float(s)
            if cursor == b"0":
                break
        results.append(seen)
    assert results[0] == results[1], f"ZSCAN {key} {opts}"


@pytest.mark.parametrize("proto", [2, 3])
def test_zrandmember(pair):
    pair.check("ZADD", "z", *[x for i in range(30) for x in (str(i / 3), f"m{i}")])
    pair.check("ZADD", "big", *[x for i in range(300) for x in (str(i % 17), f"m{i}")])
    for key in ("z", "big", "nokey"):
        for extra in ((), ("1",), ("5",), ("-50",), ("29",), ("30",), ("100",), ("299",),
                      ("1000",), ("5", "WITHSCORES"), ("-7", "WITHSCORES"),
                      ("40", "withscores"), ("1000", "WITHSCORES")):
            check_zrandmember(pair, "ZRANDMEMBER", key, *extra)


@pytest.mark.parametrize("proto", [2, 3])
def test_big_sorted_sets(pair):
    pair.check("ZADD", "big", *[x for i in range(2000) for x in (str((i * 7919) % 1000),
                                                              f"element:{i:05d}")])
    pair.check("ZADD", "lexbig", *[x for i in range(500) for x in ("0", f"w{i * 37 % 500:04d}")])
    pair.check("ZADD", "long", "1", "x" * 100, "2", "y")  # a member too long for a listpack
    for argv in (("ZCARD", "big"), ("ZRANGE", "big", "1000", "1010", "WITHSCORES"),
                 ("ZRANGE", "big", "-20", "-1"), ("ZREVRANGE", "big", "5", "9"),
                 ("ZRANK", "big", "element:01234"), ("ZREVRANK", "big", "element:01234"),
                 ("ZCOUNT", "big", "100", "(200"), ("ZSCORE", "big", "element:00007"),
                 ("ZRANGEBYSCORE", "big", "(500", "510", "WITHSCORES", "LIMIT", "3", "5"),
                 ("ZREVRANGEBYSCORE", "big", "990", "-inf", "LIMIT", "100", "4"),
                 ("ZRANGEBYLEX", "lexbig", "[w0100", "(w0110"),
                 ("ZREVRANGEBYLEX", "lexbig", "+", "[w0490", "LIMIT", "1", "3"),
                 ("ZLEXCOUNT", "lexbig", "(w0001", "[w0400"),
                 ("ZREMRANGEBYLEX", "lexbig", "[w0200", "(w0300"), ("ZCARD", "lexbig"),
                 ("ZREMRANGEBYRANK", "big", "100", "199"),
                 ("ZREMRANGEBYSCORE", "big", "(900", "+inf"), ("ZCARD", "big"),
                 ("ZPOPMIN", "big", "3"), ("ZPOPMAX", "big", "3"),
                 ("ZUNIONSTORE", "u", "2", "big", "lexbig", "WEIGHTS", "1", "0.5"),
                 ("ZRANGE", "u", "0", "20", "WITHSCORES"), ("ZINTERCARD", "2", "big", "u"),
                 ("ZDIFF", "2", "u", "big", "WITHSCORES"),
                 ("ZRANGESTORE", "rs", "big", "10", "500", "BYSCORE", "LIMIT", "5", "300"),
                 ("ZRANGE", "rs", "0", "-1", "WITHSCORES"),
                 ("ZRANGE", "big", "0", "-1", "WITHSCORES")):
        pair.check(*argv)
    for key, opts in (("big", ()), ("big", ("COUNT", "33")), ("big", ("MATCH", "*7")),
                      ("lexbig", ("COUNT", "200")), ("long", ())):
        check_zscan_all(pair, key, *opts)


def test_expired_sorted_set(pair):
    pair.check("ZADD", "e", "1", "a", "2", "b")
    pair.check("ZADD", "f", "3", "c")
    pair.check("PEXPIRE", "e", "30")
    wait_for(lambda: pair.both("ZCARD", "e") == (b":0\r\n", b":0\r\n"), 5,
             what="the sorted set to expire on both servers")
    for argv in (("ZSCORE", "e", "a"), ("ZUNION", "2", "e", "f", "WITHSCORES"),
                 ("ZADD", "e", "XX", "1", "a"), ("ZINCRBY", "e", "1", "a"), ("TTL", "e"),
                 ("ZRANGE", "e", "0", "-1", "WITHSCORES")):
        pair.check(*argv)


# -- random command sequences --------------------------------------------------------------------

KEY_NAMES = ["k0", "k1", "k2", "k3"]
KEYS = st.sampled_from(KEY_NAMES)
MEMBERS = st.sampled_from(["a", "b", "c", "aa", "1", ""])
SCORES = st.one_of(st.integers(-3, 3).map(str),
                   st.sampled_from(["1.5", "-0", "inf", "-inf", "x", "nan", "0.1"]))
RANGE = st.sampled_from(["-inf", "+inf", "0", "(0", "1", "(1", "2", "(2.5", "x", ""])
LEX = st.sampled_from(["-", "+", "[a", "(a", "[b", "(aa", "[c", "x"])
INTS = st.one_of(st.integers(-4, 4).map(str), st.sampled_from(["x", BIG, SMALL]))
ZADD_FLAGS = st.lists(st.sampled_from(["NX", "XX", "GT", "LT", "CH", "INCR"]), max_size=2)
LIMIT = st.sampled_from([(), ("LIMIT", "0", "2"), ("LIMIT", "1", "-1"), ("LIMIT", "-1", "1")])


def _zadd(t: tuple) -> tuple:
    _, key, flags, pairs = t
    return ("ZADD", key, *flags, *[x for pair in pairs for x in pair])


COMMAND = st.one_of(
    st.tuples(st.just("ZADD"), KEYS, ZADD_FLAGS,
              st.lists(st.tuples(SCORES, MEMBERS), min_size=1, max_size=3)).map(_zadd),
    st.tuples(st.just("ZINCRBY"), KEYS, SCORES, MEMBERS),
    st.tuples(st.just("ZREM"), KEYS, st.lists(MEMBERS, min_size=1, max_size=3))
    .map(lambda t: ("ZREM", t[1], *t[2])),
    st.tuples(st.sampled_from(["ZSCORE", "ZRANK", "ZREVRANK"]), KEYS, MEMBERS),
    st.tuples(st.just("ZMSCORE"), KEYS, st.lists(MEMBERS, min_size=1, max_size=3))
    .map(lambda t: ("ZMSCORE", t[1], *t[2])),
    st.tuples(st.just("ZCARD"), KEYS),
    st.tuples(st.just("ZCOUNT"), KEYS, RANGE, RANGE),
    st.tuples(st.just("ZLEXCOUNT"), KEYS, LEX, LEX),
    st.tuples(st.sampled_from(["ZRANGE", "ZREVRANGE"]), KEYS, INTS, INTS,
              st.sampled_from([(), ("WITHSCORES",)])).map(lambda t: (*t[:4], *t[4])),
    st.tuples(st.sampled_from(["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]), KEYS, RANGE, RANGE,
              st.sampled_from([(), ("WITHSCORES",)]), LIMIT).map(lambda t: (*t[:4], *t[4], *t[5])),
    st.tuples(st.sampled_from(["ZRANGEBYLEX", "ZREVRANGEBYLEX"]), KEYS, LEX, LEX, LIMIT)
    .map(lambda t: (*t[:4], *t[4])),
    st.tuples(st.just("ZRANGE"), KEYS, RANGE, RANGE, st.just("BYSCORE"),
              st.sampled_from([(), ("REV",)]), LIMIT).map(lambda t: (*t[:5], *t[5], *t[6])),
    st.tuples(st.just("ZRANGESTORE"), KEYS, KEYS, LEX, LEX, st.just("BYLEX"), LIMIT)
    .map(lambda t: (*t[:6], *t[6])),
    st.tuples(st.just("ZRANGESTORE"), KEYS, KEYS, INTS, INTS),
    st.tuples(st.just("ZREMRANGEBYRANK"), KEYS, INTS, INTS),
    st.tuples(st.just("ZREMRANGEBYSCORE"), KEYS, RANGE, RANGE),
    st.tuples(st.just("ZREMRANGEBYLEX"), KEYS, LEX, LEX),
    st.tuples(st.sampled_from(["ZPOPMIN", "ZPOPMAX"]), KEYS, st.lists(INTS, max_size=1))
    .map(lambda t: (t[0], t[1], *t[2])),
    st.tuples(st.just("ZMPOP"), st.sampled_from(["1", "2", "0"]),
              st.lists(KEYS, min_size=1, max_size=2), st.sampled_from(["MIN", "MAX", "x"]),
              st.sampled_from([(), ("COUNT", "2"), ("COUNT", "0")]))
    .map(lambda t: ("ZMPOP", t[1], *t[2], t[3], *t[4])),
    st.tuples(st.sampled_from(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), KEYS,
              st.lists(KEYS, min_size=1, max_size=3),
              st.sampled_from([(), ("AGGREGATE", "MIN"), ("AGGREGATE", "MAX"), ("WEIGHTS",)]))
    .map(lambda t: (t[0], t[1], str(len(t[2])), *t[2],
                    *(t[3] if t[3] != ("WEIGHTS",) else ("WEIGHTS",
                                                         *["2"] * len(t[2])))),
    ),
    st.tuples(st.sampled_from(["ZUNION", "ZINTER", "ZDIFF"]),
              st.lists(KEYS, min_size=1, max_size=3), st.booleans())
    .map(lambda t: (t[0], str(len(t[1])), *t[1], *(("WITHSCORES",) if t[2] else ()))),
    st.tuples(st.just("ZINTERCARD"), st.lists(KEYS, min_size=1, max_size=3),
              st.sampled_from([(), ("LIMIT", "1")]))
    .map(lambda t: ("ZINTERCARD", str(len(t[1])), *t[1], *t[2])),
    st.tuples(st.just("ZSCAN"), KEYS, st.sampled_from([(), ("MATCH", "a*"), ("COUNT", "1")]))
    .map(lambda t: ("ZSCAN", t[1], "0", *t[2])),
    st.tuples(st.just("ZRANDMEMBER"), KEYS,
              st.sampled_from([(), ("3",), ("-3",), ("100", "WITHSCORES"), ("0",)]))
    .map(lambda t: ("ZRANDMEMBER", t[1], *t[2])),
    st.tuples(st.just("SADD"), KEYS, MEMBERS),
    st.tuples(st.just("SET"), KEYS, MEMBERS),
)


def run_command(p: diff.Pair, *argv: str) -> None:
    if argv[0] == "ZRANDMEMBER":
        check_zrandmember(p, *argv)
    else:
        p.check(*argv)


@diff.sequence_settings(100)
@given(proto=diff.PROTOS, cmds=st.lists(COMMAND, min_size=1, max_size=30))
def test_random_sequences(pairs, proto, cmds):
    final = [argv for key in KEY_NAMES
             for argv in (("TYPE", key), ("ZRANGE", key, "0", "-1", "WITHSCORES"))]
    diff.run_sequence(pairs[proto], cmds, check=run_command, final=final)


# -- propagation ---------------------------------------------------------------------------------

PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1", "a"),
    ("ZADD", "z", "NX", "5", "a"), ("ZADD", "z", "XX", "1", "nope"), ("ZADD", "z", "GT", "0", "b"),
    ("ZADD", "z", "CH", "1.5", "a"), ("ZADD", "z", "INCR", "1", "a"),
    ("ZADD", "z", "INCR", "inf", "x"), ("ZADD", "z", "INCR", "-inf", "x"),
    ("ZINCRBY", "z", "2", "b"), ("ZINCRBY", "z", "0", "b"), ("ZREM", "z", "nope"),
    ("ZREM", "z", "x"), ("ZREMRANGEBYSCORE", "z", "10", "20"),
    ("ZREMRANGEBYRANK", "z", "0", "0"), ("ZREMRANGEBYLEX", "z", "[zz", "+"),
    ("ZPOPMIN", "missing"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z", "0"),
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZPOPMAX", "z", "2"),
    ("ZMPOP", "2", "missing", "z", "MAX", "COUNT", "9"), ("ZMPOP", "1", "z", "MIN"),
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZMPOP", "1", "z", "MIN"),
    ("ZUNIONSTORE", "d", "1", "missing"), ("ZUNIONSTORE", "d", "1", "z"),
    ("ZINTERSTORE", "d", "2", "z", "missing"), ("ZDIFFSTORE", "d", "1", "z"),
    ("ZRANGESTORE", "d2", "z", "0", "0"), ("ZRANGESTORE", "d2", "z", "5", "10"),
    ("ZRANGESTORE", "d2", "z", "5", "10"),
]


def test_propagation(tapped_redis):
    diff.check_propagation(tapped_redis.port, PROPAGATION_CASES)

