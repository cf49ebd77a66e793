"""Sorted set commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``),
the exact reply bytes through ``raw``, and what the core propagates (in-process ServerCore)."""

from __future__ import annotations

import math
import time

from tests.support.checks import NOT_FLOAT, NOT_INT, WRONGTYPE, assert_watch_aborts, err
from tests.support.differential import CoreTap
from tests.support.resp import parse_reply

RANGE_FLOAT = "min or max is not a float"
RANGE_LEX = "min or max not valid string range item"


def zadd(r, key, *args):
    return r.execute_command("ZADD", key, *args)


def test_zadd_basic_and_scores(r):
    assert r.zadd("z", {"a": 1, "b": 2.5, "c": -3}) == 3
    assert r.zadd("z", {"a": 1, "b": 3}) == 0
    assert r.zscore("z", "b") == 3.0
    assert r.zscore("z", "nope") is None
    assert r.zscore("missing", "a") is None
    assert r.zmscore("z", ["a", "nope", "c"]) == [1.0, None, -3.0]
    assert r.zmscore("missing", ["a", "b"]) == [None, None]
    assert r.zcard("z") == 3 and r.zcard("missing") == 0
    assert r.zrange("z", 0, -1, withscores=True) == [(b"c", -3.0), (b"a", 1.0), (b"b", 3.0)]
    assert r.type("z") == b"zset"


def test_zadd_options(r):
    r.zadd("z", {"a": 1, "b": 2})
    assert zadd(r, "z", "NX", 5, "a", 6, "d") == 1
    assert r.zscore("z", "a") == 1.0
    assert zadd(r, "z", "XX", 7, "a", 8, "e") == 0
    assert r.zscore("z", "a") == 7.0 and r.zscore("z", "e") is None
    assert zadd(r, "z", "xx", "ch", 7, "a", 9, "b") == 1
    assert zadd(r, "z", "GT", "CH", 1, "a", 100, "b", 5, "new") == 2
    assert r.zscore("z", "a") == 7.0 and r.zscore("z", "b") == 100.0
    assert zadd(r, "z", "LT", "CH", 1, "a", 200, "b") == 1
    assert r.zscore("z", "a") == 1.0 and r.zscore("z", "b") == 100.0
    assert zadd(r, "z", "INCR", 2, "a") == 3.0
    assert zadd(r, "z", "INCR", "NX", 2, "a") is None
    assert zadd(r, "z", "INCR", "XX", 2, "nope") is None
    assert zadd(r, "z", "GT", "INCR", -1, "a") is None
    assert zadd(r, "z", "LT", "INCR", -1, "a") == 2.0
    assert zadd(r, "missing", "XX", 1, "a") == 0
    assert zadd(r, "missing", "XX", "INCR", 1, "a") is None
    assert r.exists("missing") == 0


def test_zadd_errors(r):
    assert err(zadd, r, "z", "NX", "XX", 1, "a") == \
        "XX and NX options at the same time are not compatible"
    assert err(zadd, r, "z", "GT", "LT", 1, "a") == \
        "GT, LT, and/or NX options at the same time are not compatible"
    assert err(zadd, r, "z", "GT", "NX", 1, "a") == \
        "GT, LT, and/or NX options at the same time are not compatible"
    assert err(zadd, r, "z", "INCR", 1, "a", 2, "b") == \
        "INCR option supports a single increment-element pair"
    assert err(zadd, r, "z", 1, "a", 2) == "syntax error"
    assert err(zadd, r, "z", "CH") == "wrong number of arguments for 'zadd' command"
    assert err(zadd, r, "z", "CH", "NX") == "syntax error"
    for bad in ("x", "nan", "1 ", " 1", "1e400", "1e-400", "", "1_0", "0x"):
        assert err(zadd, r, "z", bad, "a") == NOT_FLOAT, bad
    assert r.exists("z") == 0  # nothing was created by the failed commands
    r.set("str", "v")
    assert err(zadd, r, "str", 1, "a") == WRONGTYPE
    assert err(zadd, r, "str", "x", "a") == NOT_FLOAT  # scores are parsed first
    zadd(r, "z", "-inf", "a")
    assert err(zadd, r, "z", "INCR", "+inf", "a") == "resulting score is not a number (NaN)"
    assert err(r.zincrby, "z", "+inf", "a") == "resulting score is not a number (NaN)"
    assert r.zscore("z", "a") == -math.inf


def test_zadd_fast_form_on_expiring_keys(r):
    """ZADD key <digits> member (the benchmarked form has its own path): a key with a TTL is
    looked up as any write does, expired when due, its TTL kept otherwise."""
    assert zadd(r, "z", 1, "a") == 1
    assert zadd(r, "z", 5, "a") == 0 and r.zscore("z", "a") == 5.0
    r.pexpire("z", 300)
    assert zadd(r, "z", 2, "b") == 1
    assert r.zcard("z") == 2 and 0 < r.pttl("z") <= 300
    time.sleep(0.35)
    assert zadd(r, "z", 3, "c") == 1
    assert r.zrange("z", 0, -1) == [b"c"] and r.pttl("z") == -1
    r.set("s", "v", px=100000)
    assert err(zadd, r, "s", 1, "a") == WRONGTYPE
    r.set("s2", "v")
    assert err(zadd, r, "s2", 1, "a") == WRONGTYPE


def test_score_parsing_like_strtod(r):
    cases = {"0x10": 16.0, "0x1p-2": 0.25, "inf": math.inf, "-Infinity": -math.inf,
             ".5": 0.5, "5.": 5.0, "1e5": 1e5, "+3": 3.0, "4e-324": 5e-324,
             "000000012345": 12345.0}
    for i, (text, want) in enumerate(cases.items()):
        zadd(r, "z", text, f"m{i}")
        assert r.zscore("z", f"m{i}") == want, text


def test_negative_zero(r):
    zadd(r, "z", "-0", "a")
    assert r.execute_command("ZSCORE", "z", "a") == 0.0
    assert r.zincrby("nz", -0.0, "m") == 0.0


def test_zincrby(r):
    assert r.zincrby("z", 1.5, "a") == 1.5
    assert r.zincrby("z", 2, "a") == 3.5
    assert err(r.execute_command, "ZINCRBY", "z", "x", "a") == NOT_FLOAT
    # the increment position is parsed with ZADD's option loop, as in Redis
    assert err(r.execute_command, "ZINCRBY", "z", "nx", "a") == "syntax error"


def test_zrem_and_rank(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrank("z", "c") == 2 and r.zrevrank("z", "c") == 1
    assert r.zrank("z", "nope") is None and r.zrank("missing", "a") is None
    assert r.zrem("z", "a", "nope", "a") == 1
    assert r.zrem("missing", "a") == 0
    assert r.zrem("z", "b", "c", "d") == 3
    assert r.exists("z") == 0


def test_zcount_and_ranges_by_score(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zcount("z", 2, 4) == 3
    assert r.zcount("z", "(2", 4) == 2
    assert r.zcount("z", "(2", "(4") == 1
    assert r.zcount("z", "-inf", "+inf") == 5
    assert r.zcount("z", 5, 1) == 0
    assert r.zcount("z", "", 10) == 5  # strtod("") is 0, as in Redis
    assert err(r.zcount, "z", "x", 1) == RANGE_FLOAT
    assert err(r.zcount, "z", "nan", 1) == RANGE_FLOAT
    assert r.zrangebyscore("z", 2, 4) == [b"b", b"c", b"d"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=2) == [b"b", b"c"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=-1) == [b"b", b"c", b"d", b"e"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=-1, num=2) == []
    assert r.zrevrangebyscore("z", 4, 2, withscores=True) == \
        [(b"d", 4.0), (b"c", 3.0), (b"b", 2.0)]
    assert r.zrevrangebyscore("z", "+inf", "-inf", start=1, num=2) == [b"d", b"c"]
    assert r.zrange("z", "(1", 3, byscore=True) == [b"b", b"c"]
    assert r.zrange("z", 5, "-inf", byscore=True, desc=True, offset=1, num=2) == [b"d", b"c"]


def test_zrange_by_rank(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zrange("z", 0, -1) == [b"a", b"b", b"c", b"d", b"e"]
    assert r.zrange("z", -2, -1) == [b"d", b"e"]
    assert r.zrange("z", 3, 1) == []
    assert r.zrange("z", -100, 100) == [b"a", b"b", b"c", b"d", b"e"]
    assert r.zrange("z", 0, 1, desc=True) == [b"e", b"d"]
    assert r.zrevrange("z", 0, 1, withscores=True) == [(b"e", 5.0), (b"d", 4.0)]
    assert r.zrange("missing", 0, -1) == []
    assert err(r.zrange, "z", "x", 1) == NOT_INT


def test_zrange_option_errors(r):
    r.zadd("z", {"a": 1})
    ex = r.execute_command
    assert err(ex, "ZRANGE", "z", 0, 1, "LIMIT", 0, 1) == \
        "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
    assert ex("ZRANGE", "z", 0, 1, "LIMIT", 0, -1) == [b"a"]  # -1 is "no limit" to Redis
    assert err(ex, "ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES") == \
        "syntax error, WITHSCORES not supported in combination with BYLEX"
    assert err(ex, "ZRANGE", "z", 0, 1, "REV", "REV") == "syntax error"
    assert err(ex, "ZRANGE", "z", 0, 1, "BYSCORE", "BYLEX") == "syntax error"
    assert err(ex, "ZRANGE", "z", 0, 1, "LIMIT", 0) == "syntax error"
    assert err(ex, "ZRANGE", "z", 0, 1, "LIMIT", "x", 1, "FOO") == NOT_INT
    assert err(ex, "ZRANGEBYSCORE", "z", 0, 1, "REV") == "syntax error"
    assert err(ex, "ZREVRANGE", "z", 0, 1, "BYSCORE") == "syntax error"
    assert err(ex, "ZRANGESTORE", "d", "z", 0, 1, "WITHSCORES") == "syntax error"
    r.set("str", "x")
    assert err(ex, "ZRANGE", "str", 0, 1) == WRONGTYPE
    assert err(ex, "ZRANGE", "str", "x", 1) == NOT_INT  # the range is parsed first


def test_lex_ranges(r):
    r.zadd("z", {m: 0 for m in ("a", "b", "c", "d", "e")})
    assert r.zrangebylex("z", "-", "+") == [b"a", b"b", b"c", b"d", b"e"]
    assert r.zrangebylex("z", "[b", "(d") == [b"b", b"c"]
    assert r.zrangebylex("z", "(b", "[d", start=1, num=5) == [b"d"]
    assert r.zrevrangebylex("z", "[d", "(a") == [b"d", b"c", b"b"]
    assert r.zrevrangebylex("z", "+", "-", start=1, num=1) == [b"d"]
    assert r.zlexcount("z", "[b", "[d") == 3
    assert r.zlexcount("z", "-", "+") == 5
    assert r.zlexcount("z", "[d", "[b") == 0
    assert r.zlexcount("missing", "-", "+") == 0
    for lo, hi in (("b", "d"), ("", "+"), ("+x", "+"), ("-", "-x")):
        assert err(r.zrangebylex, "z", lo, hi) == RANGE_LEX
        assert err(r.zlexcount, "z", lo, hi) == RANGE_LEX
    assert r.zremrangebylex("z", "[b", "(d") == 2
    assert r.zrange("z", 0, -1) == [b"a", b"d", b"e"]


def test_lex_with_mixed_scores_walks_like_a_listpack(r):
    # Members with different scores: Redis answers by walking its (small) listpack in score
    # order, checking the bounds as it goes; the answers below are the real server's.
    r.zadd("m", {"a": 1, "b": 2, "c": 1, "aa": 3, "zz": 0})
    assert r.zrangebylex("m", "-", "+") == [b"zz", b"a", b"c", b"b", b"aa"]
    assert r.zrangebylex("m", "(a", "+") == [b"zz", b"a", b"c", b"b", b"aa"]
    for lo, hi in (("[a", "[c"), ("[b", "+")):
        assert r.zrangebylex("m", lo, hi) == []
    assert r.zrevrangebylex("m", "+", "[b") == []
    assert r.zrevrangebylex("m", "[c", "-") == []
    assert r.zlexcount("m", "[b", "+") == 0


def test_zremrangeby(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zremrangebyrank("z", 1, 2) == 2
    assert r.zremrangebyrank("z", 5, 10) == 0
    assert r.zremrangebyrank("z", -1, -1) == 1
    assert r.zrange("z", 0, -1) == [b"a", b"d"]
    assert err(r.zremrangebyrank, "z", "x", 1) == NOT_INT
    assert r.zremrangebyrank("missing", 0, 1) == 0
    r.zadd("z", {"b": 2, "c": 3, "e": 5})
    assert r.zremrangebyscore("z", "(1", 3) == 2
    assert r.zremrangebyscore("z", 10, 20) == 0
    assert err(r.zremrangebyscore, "z", "x", 1) == RANGE_FLOAT
    assert r.zremrangebyscore("z", "-inf", "inf") == 3
    assert r.exists("z") == 0


def test_zpop(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert r.zpopmin("z") == [(b"a", 1.0)]
    assert r.zpopmax("z") == [(b"e", 5.0)]
    assert r.zpopmin("z", 2) == [(b"b", 2.0), (b"c", 3.0)]
    assert r.zpopmax("z", 0) == []
    assert r.zpopmin("z", 10) == [(b"d", 4.0)]
    assert r.exists("z") == 0
    assert r.zpopmin("z") == []
    assert err(r.zpopmin, "z", -1) == "value is out of range, must be positive"
    assert err(r.execute_command, "ZPOPMIN", "z", 1, 2) == "syntax error"


def test_zpop_reply_shapes(raw):
    raw.call("ZADD", "z", "1", "a", "2", "b", "3", "c")
    assert raw.call("ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    assert raw.call("ZPOPMIN", "z", "1") == b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    raw.call("HELLO", "3")
    raw.call("ZADD", "z", "1", "a", "2", "b")
    assert raw.call("ZPOPMIN", "z") == b"*2\r\n$1\r\na\r\n,1\r\n"
    assert raw.call("ZPOPMIN", "z", "1") == b"*1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    assert raw.call("ZPOPMAX", "nokey") == b"*0\r\n"


def test_double_formatting(raw):
    raw.call("ZADD", "z", "0.1", "a", "1e20", "b", "inf", "c", "-inf", "d", "1.5", "e")
    assert raw.call("ZSCORE", "z", "a") == b"$19\r\n0.10000000000000001\r\n"
    assert raw.call("ZSCORE", "z", "b") == b"$5\r\n1e+20\r\n"
    assert raw.call("ZSCORE", "z", "c") == b"$3\r\ninf\r\n"
    assert raw.call("ZSCORE", "z", "d") == b"$4\r\n-inf\r\n"
    assert raw.call("ZINCRBY", "z", "1", "e") == b"$3\r\n2.5\r\n"
    raw.call("HELLO", "3")
    assert raw.call("ZSCORE", "z", "a") == b",0.10000000000000001\r\n"
    assert raw.call("ZSCORE", "z", "c") == b",inf\r\n"
    assert raw.call("ZMSCORE", "z", "d", "nope") == b"*2\r\n,-inf\r\n_\r\n"
    assert raw.call("ZRANGE", "z", "0", "0", "WITHSCORES") == b"*1\r\n*2\r\n$1\r\nd\r\n,-inf\r\n"


def test_withscores_shapes(raw):
    raw.call("ZADD", "z", "1", "a", "2", "b")
    flat = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
    assert raw.call("ZRANGE", "z", "0", "-1", "WITHSCORES") == flat
    assert raw.call("ZUNION", "1", "z", "WITHSCORES") == flat
    raw.call("HELLO", "3")
    nested = b"*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    assert raw.call("ZRANGE", "z", "0", "-1", "WITHSCORES") == nested
    assert raw.call("ZRANGEBYSCORE", "z", "-inf", "inf", "WITHSCORES") == nested
    assert raw.call("ZUNION", "1", "z", "WITHSCORES") == nested
    assert raw.call("ZRANDMEMBER", "z", "5", "WITHSCORES") == \
        b"*2\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\na\r\n,1\r\n"


def test_set_operations(r):
    r.zadd("a", {"x": 1, "y": 2, "z": 3})
    r.zadd("b", {"y": 10, "z": 20, "w": 30})
    r.sadd("c", "y", "w", "v")
    assert r.zunionstore("out", ["a", "b"]) == 4
    assert r.zrange("out", 0, -1, withscores=True) == \
        [(b"x", 1.0), (b"y", 12.0), (b"z", 23.0), (b"w", 30.0)]
    assert r.zunionstore("out", {"a": 1, "b": 2, "c": 3}) == 5
    assert r.zscore("out", "y") == 2 + 20 + 3
    assert r.zunionstore("out", ["a", "b"], aggregate="MIN") == 4
    assert r.zscore("out", "z") == 3.0
    assert r.zinterstore("out", ["a", "b"], aggregate="MAX") == 2
    assert r.zrange("out", 0, -1, withscores=True) == [(b"y", 10.0), (b"z", 20.0)]
    assert r.zinterstore("out", ["a", "b", "c"]) == 1
    assert r.zinterstore("out", ["a", "missing"]) == 0
    assert r.exists("out") == 0
    assert r.zdiffstore("out", ["a", "b"]) == 1
    assert r.zrange("out", 0, -1, withscores=True) == [(b"x", 1.0)]
    assert r.zdiffstore("out", ["a", "a"]) == 0
    assert r.zunion(["a", "b"], withscores=True) == \
        [(b"x", 1.0), (b"y", 12.0), (b"z", 23.0), (b"w", 30.0)]
    assert r.zinter(["a", "b"]) == [b"y", b"z"]
    assert r.zdiff(["b", "a"]) == [b"w"]
    assert r.zintercard(2, ["a", "b"]) == 2
    assert r.zintercard(2, ["a", "b"], limit=1) == 1
    # inf * 0 and inf + -inf are 0 in these operations (NaN is never stored)
    r.zadd("pinf", {"x": math.inf})
    r.zadd("ninf", {"x": -math.inf})
    assert r.zinterstore("out", {"pinf": 0}) == 1
    assert r.zscore("out", "x") == 0.0
    assert r.zunionstore("out", ["pinf", "ninf"]) == 1
    assert r.zscore("out", "x") == 0.0
    assert r.zunion(["pinf", "ninf"], aggregate="MIN", withscores=True) == [(b"x", -math.inf)]


def test_set_operation_errors(r):
    r.zadd("a", {"x": 1})
    ex = r.execute_command
    assert err(ex, "ZUNIONSTORE", "o", "0", "a") == \
        "at least 1 input key is needed for 'zunionstore' command"
    assert err(ex, "ZINTER", "0", "a") == "at least 1 input key is needed for 'zinter' command"
    assert err(ex, "ZUNIONSTORE", "o", "x", "a") == NOT_INT
    assert err(ex, "ZUNIONSTORE", "o", "3", "a") == "syntax error"
    assert err(ex, "ZUNIONSTORE", "o", "1", "a", "WEIGHTS") == "syntax error"
    assert err(ex, "ZUNIONSTORE", "o", "1", "a", "WEIGHTS", "x") == "weight value is not a float"
    assert err(ex, "ZUNIONSTORE", "o", "1", "a", "AGGREGATE", "AVG") == "syntax error"
    assert err(ex, "ZUNIONSTORE", "o", "1", "a", "WITHSCORES") == "syntax error"
    assert err(ex, "ZDIFF", "1", "a", "WEIGHTS", "1") == "syntax error"
    assert err(ex, "ZINTERCARD", "1", "a", "LIMIT", "-1") == "LIMIT can't be negative"
    assert err(ex, "ZINTERCARD", "1", "a", "WITHSCORES") == "syntax error"
    r.set("str", "x")
    assert err(ex, "ZUNIONSTORE", "o", "1", "str", "FOO") == WRONGTYPE  # keys before options


def test_zrangestore(r):
    r.zadd("src", {"a": 1, "b": 2, "c": 3})
    assert r.zrangestore("dst", "src", 0, -1) == 3
    assert r.zrange("dst", 0, -1, withscores=True) == [(b"a", 1.0), (b"b", 2.0), (b"c", 3.0)]
    assert r.zrangestore("dst", "src", "(1", "+inf", byscore=True) == 2
    assert r.zrangestore("dst", "src", "[b", "+", bylex=True) == 2
    assert r.zrangestore("dst", "src", 0, 0, desc=True) == 1
    assert r.zrange("dst", 0, -1) == [b"c"]
    assert r.zrangestore("dst", "missing", 0, -1) == 0
    assert r.exists("dst") == 0


def test_zrandmember(r):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert r.zrandmember("z") in (b"a", b"b", b"c")
    assert r.zrandmember("missing") is None
    assert sorted(r.zrandmember("z", 2)) in ([b"a", b"b"], [b"a", b"c"], [b"b", b"c"])
    assert r.zrandmember("z", 10) == [b"c", b"b", b"a"]  # the whole set, from the tail
    assert len(r.zrandmember("z", -10)) == 10
    assert err(r.execute_command, "ZRANDMEMBER", "z", "1", "FOO") == "syntax error"
    assert err(r.execute_command, "ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES") == \
        "value is out of range"


def test_zmpop(r, raw):
    r.zadd("z", {"a": 1, "b": 2, "c": 3})
    assert parse_reply(raw.call("ZMPOP", "2", "missing", "z", "MIN")) == [b"z", [[b"a", b"1"]]]
    assert parse_reply(raw.call("ZMPOP", "1", "z", "MAX", "COUNT", "5")) == \
        [b"z", [[b"c", b"3"], [b"b", b"2"]]]
    assert raw.call("ZMPOP", "1", "z", "MIN") == b"*-1\r\n"
    raw.call("HELLO", "3")
    r.zadd("z", {"a": 1})
    assert raw.call("ZMPOP", "1", "z", "MIN") == b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n,1\r\n"
    assert raw.call("ZMPOP", "1", "z", "MIN") == b"_\r\n"
    ex = r.execute_command
    assert err(ex, "ZMPOP", "0", "z", "MIN") == "numkeys should be greater than 0"
    assert err(ex, "ZMPOP", "1", "z", "MIDDLE") == "syntax error"
    assert err(ex, "ZMPOP", "2", "z", "MIN") == "syntax error"
    assert err(ex, "ZMPOP", "1", "z", "MIN", "COUNT", "0") == "count should be greater than 0"


def test_zscan(r, raw):
    r.zadd("z", {"a": 1, "b": 2.5, "c": 1e17})
    # a small sorted set (a listpack in Redis) comes back whole, in order, scores as stored
    assert parse_reply(raw.call("ZSCAN", "z", "0")) == \
        [b"0", [b"a", b"1", b"b", b"2.5", b"c", b"100000000000000000"]]
    big = {f"m{i}": i / 4 for i in range(300)}
    r.zadd("big", big)
    got = {}
    cursor = b"0"
    for _ in range(1000):
        cursor, page = parse_reply(raw.call("ZSCAN", "big", cursor, "COUNT", "13"))
        assert len(page) <= 26
        for m, s in zip(page[0::2], page[1::2], strict=True):
            got[m.decode()] = float(s)
        if cursor == b"0":
            break
    assert got == big
    assert raw.call("ZSCAN", "missing", "0") == b"*2\r\n$1\r\n0\r\n*0\r\n"
    assert err(r.execute_command, "ZSCAN", "z", "0", "COUNT", "0") == "syntax error"


def test_watch_sees_zset_changes(r):
    r.zadd("z", {"a": 1})
    with r.pipeline() as p:
        p.watch("z")
        r.zadd("z", {"a": 1})  # same score: no change
        p.multi()
        p.zcard("z")
        assert p.execute() == [1]
    assert_watch_aborts(r, "z", lambda: r.zincrby("z", 1, "a"), lambda p: p.zcard("z"))


def test_resp2_client(r2):
    assert r2.zadd("z", {"a": 1.5, "b": 2}) == 2
    assert r2.zscore("z", "a") == 1.5
    assert r2.zrange("z", 0, -1, withscores=True) == [(b"a", 1.5), (b"b", 2.0)]
    assert r2.zpopmax("z") == [(b"b", 2.0)]
    assert r2.zincrby("z", 1, "a") == 2.5


def test_big_sorted_set(r):
    members = {f"element:{i:06d}": (i * 7919) % 1000 for i in range(5000)}
    for chunk in range(0, 5000, 500):
        r.zadd("big", dict(list(members.items())[chunk:chunk + 500]))
    ordered = sorted(members.items(), key=lambda kv: (kv[1], kv[0]))
    assert r.zcard("big") == 5000
    assert r.zrange("big", 2000, 2004) == [m.encode() for m, _ in ordered[2000:2005]]
    assert r.zrank("big", ordered[3333][0]) == 3333
    assert r.zcount("big", 100, 199) == sum(1 for s in members.values() if 100 <= s <= 199)
    assert r.zremrangebyrank("big", 10, 4989) == 4980
    assert r.zrange("big", 0, -1) == [m.encode() for m, _ in ordered[:10] + ordered[4990:]]


# -- propagation (the core in-process) ----------------------------------------------------------

def test_propagation():
    t = CoreTap(now_ms=1_700_000_000_000)
    assert t.parsed("ZADD", "z", "1", "a", "2", "b")[1] == [[b"ZADD", b"z", b"1", b"a", b"2", b"b"]]
    assert t.parsed("ZADD", "z", "1", "a")[1] == []  # same score: not a change
    assert t.parsed("ZADD", "z", "NX", "5", "a")[1] == []
    assert t.parsed("ZADD", "z", "XX", "1", "nope")[1] == []
    assert t.parsed("ZINCRBY", "z", "1", "a")[1] == [[b"ZINCRBY", b"z", b"1", b"a"]]
    assert t.parsed("ZREM", "z", "nope")[1] == []
    assert t.parsed("ZREMRANGEBYSCORE", "z", "10", "20")[1] == []
    assert t.parsed("ZPOPMIN", "missing")[1] == []
    assert t.parsed("ZPOPMIN", "z")[1] == [[b"ZPOPMIN", b"z"]]
    assert t.parsed("ZMPOP", "2", "missing", "z", "MAX", "COUNT", "9")[1] == \
        [[b"ZPOPMAX", b"z", b"1"]]
    assert t.parsed("ZMPOP", "1", "z", "MIN")[1] == []
    assert t.parsed("ZUNIONSTORE", "d", "1", "missing")[1] == []
