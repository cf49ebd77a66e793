"""List commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``)."""

from __future__ import annotations

import redis

from tests.support.checks import NOT_INT, WRONGTYPE, assert_watch_aborts, err
from tests.support.waits import wait_for


def test_push_and_range(r):
    assert r.lpush("l", "a", "b", "c") == 3
    assert r.lrange("l", 0, -1) == [b"c", b"b", b"a"]
    assert r.rpush("l", "d", "e") == 5
    assert r.lrange("l", 0, -1) == [b"c", b"b", b"a", b"d", b"e"]
    assert r.lrange("l", -2, -1) == [b"d", b"e"]
    assert r.lrange("l", -100, 1) == [b"c", b"b"]
    assert r.lrange("l", 3, 100) == [b"d", b"e"]
    assert r.lrange("l", 3, 2) == []
    assert r.lrange("l", 5, 10) == []
    assert r.lrange("l", 0, -6) == []
    assert r.lrange("missing", 0, -1) == []
    assert r.llen("l") == 5
    assert r.llen("missing") == 0
    assert r.type("l") == b"list"


def test_pushx(r):
    assert r.lpushx("l", "a") == 0
    assert r.rpushx("l", "a") == 0
    assert r.exists("l") == 0
    r.rpush("l", "x")
    assert r.lpushx("l", "a", "b") == 3
    assert r.rpushx("l", "c", "d") == 5
    assert r.lrange("l", 0, -1) == [b"b", b"a", b"x", b"c", b"d"]


def test_pop_single_and_count(r, r2):
    r.rpush("l", *"abcde")
    assert r.lpop("l") == b"a"
    assert r.rpop("l") == b"e"
    assert r.lpop("l", 2) == [b"b", b"c"]
    assert r.rpop("l", 5) == [b"d"]
    assert r.exists("l") == 0
    assert r.lpop("l") is None
    # Missing key with a count: a null array (RESP2 *-1, RESP3 _) -> None in redis-py.
    assert r.lpop("l", 3) is None
    assert r2.rpop("l", 3) is None
    r.rpush("l", "a")
    assert r.lpop("l", 0) == []
    assert r2.rpop("l", 0) == []
    assert r.rpop("l", 10) == [b"a"]


def test_pop_raw_shapes(raw):
    assert raw.call("LPOP", "nokey", "1") == b"*-1\r\n"
    assert raw.call("LPOP", "nokey") == b"$-1\r\n"
    raw.call("HELLO", "3")
    assert raw.call("LPOP", "nokey", "1") == b"_\r\n"
    assert raw.call("RPOP", "nokey") == b"_\r\n"
    raw.call("RPUSH", "l", "x", "y")
    assert raw.call("RPOP", "l", "0") == b"*0\r\n"
    assert raw.call("RPOP", "l", "2") == b"*2\r\n$1\r\ny\r\n$1\r\nx\r\n"


def test_pop_errors(r):
    assert err(r.execute_command, "LPOP", "l", "-1") == "value is out of range, must be positive"
    assert err(r.execute_command, "LPOP", "l", "x") == "value is out of range, must be positive"
    assert err(r.execute_command, "LPOP", "l", "1", "2") == \
        "wrong number of arguments for 'lpop' command"
    assert err(r.execute_command, "RPOP", "l", "1", "2") == \
        "wrong number of arguments for 'rpop' command"
    r.hset("s", "f", "v")
    assert err(r.lpop, "s") == WRONGTYPE
    assert err(r.execute_command, "RPOP", "s", "-1") == "value is out of range, must be positive"


def test_lindex_lset(r):
    r.rpush("l", "a", "b", "c")
    assert r.lindex("l", 0) == b"a"
    assert r.lindex("l", -1) == b"c"
    assert r.lindex("l", -3) == b"a"
    assert r.lindex("l", 3) is None
    assert r.lindex("l", -4) is None
    assert r.lindex("missing", 0) is None
    assert r.execute_command("LINDEX", "missing", "notanint") is None  # lookup comes first
    assert err(r.lindex, "l", "x") == NOT_INT
    assert r.lset("l", 1, "B") is True
    assert r.lset("l", -1, "C") is True
    assert r.lrange("l", 0, -1) == [b"a", b"B", b"C"]
    assert err(r.lset, "l", 3, "x") == "index out of range"
    assert err(r.lset, "l", -4, "x") == "index out of range"
    assert err(r.lset, "missing", 0, "x") == "no such key"
    assert err(r.lset, "missing", "bad", "x") == "no such key"
    assert err(r.lset, "l", "bad", "x") == NOT_INT
    r.hset("s", "f", "v")
    assert err(r.lset, "s", "bad", "x") == WRONGTYPE
    assert err(r.lindex, "s", "bad") == WRONGTYPE


def test_lrem(r):
    r.rpush("l", *"abacada")
    assert r.lrem("l", 2, "a") == 2
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"a", b"d", b"a"]
    assert r.lrem("l", -1, "a") == 1
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"a", b"d"]
    assert r.lrem("l", 0, "zz") == 0
    r.rpush("l", "a", "a")
    assert r.lrem("l", 0, "a") == 3
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"d"]
    assert r.lrem("missing", 0, "a") == 0
    assert err(r.lrem, "l", "x", "a") == NOT_INT
    r.delete("l")
    r.rpush("l", "a", "a")
    assert r.lrem("l", -5, "a") == 2
    assert r.exists("l") == 0


def test_ltrim(r):
    r.rpush("l", *"abcdef")
    assert r.ltrim("l", 1, -2) is True
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"d", b"e"]
    assert r.ltrim("l", -100, 100) is True
    assert r.lrange("l", 0, -1) == [b"b", b"c", b"d", b"e"]
    assert r.ltrim("l", 3, 3) is True
    assert r.lrange("l", 0, -1) == [b"e"]
    assert r.ltrim("l", 2, 1) is True
    assert r.exists("l") == 0
    assert r.ltrim("missing", 0, 1) is True
    assert err(r.ltrim, "l", "a", 1) == NOT_INT
    r.rpush("big", *[str(i) for i in range(100)])
    r.ltrim("big", 10, 12)
    assert r.lrange("big", 0, -1) == [b"10", b"11", b"12"]


def test_linsert(r):
    assert r.linsert("l", "BEFORE", "x", "y") == 0
    r.rpush("l", "a", "b", "a")
    assert r.linsert("l", "before", "a", "0") == 4
    assert r.linsert("l", "AFTER", "b", "1") == 5
    assert r.lrange("l", 0, -1) == [b"0", b"a", b"b", b"1", b"a"]
    assert r.linsert("l", "after", "zz", "q") == -1
    assert err(r.execute_command, "LINSERT", "l", "middle", "a", "b") == "syntax error"
    assert err(r.execute_command, "LINSERT", "missing", "middle", "a", "b") == "syntax error"
    r.hset("s", "f", "v")
    assert err(r.linsert, "s", "before", "a", "b") == WRONGTYPE


def test_lpos(r, r2):
    r.rpush("l", *"abcabcab")
    assert r.lpos("l", "c") == 2
    assert r.lpos("l", "c", rank=2) == 5
    assert r.lpos("l", "c", rank=3) is None
    assert r.lpos("l", "b", rank=-1) == 7
    assert r.lpos("l", "b", rank=-2) == 4
    assert r.lpos("l", "a", count=0) == [0, 3, 6]
    assert r.lpos("l", "a", count=2) == [0, 3]
    assert r.lpos("l", "a", count=2, rank=-1) == [6, 3]
    assert r.lpos("l", "a", count=0, maxlen=4) == [0, 3]
    assert r.lpos("l", "a", rank=-1, maxlen=2) == 6
    assert r.lpos("l", "a", rank=-1, maxlen=1) is None
    assert r.lpos("l", "z", count=2) == []
    assert r.lpos("missing", "a") is None
    assert r.lpos("missing", "a", count=1) == []
    assert r2.lpos("l", "z") is None
    assert r.execute_command("LPOS", "l", "a", "RANK", "-9223372036854775808") == 6
    assert r.execute_command("LPOS", "l", "a", "RANK", "-9223372036854775808", "COUNT", "1") \
        == [6, 3, 0]
    assert err(r.execute_command, "LPOS", "l", "a", "RANK", "0").startswith(
        "RANK can't be zero: use 1 to start from the first match")
    assert err(r.execute_command, "LPOS", "l", "a", "COUNT", "-1") == "COUNT can't be negative"
    assert err(r.execute_command, "LPOS", "l", "a", "COUNT", "x") == "COUNT can't be negative"
    assert err(r.execute_command, "LPOS", "l", "a", "MAXLEN", "-1") == "MAXLEN can't be negative"
    assert err(r.execute_command, "LPOS", "l", "a", "RANK", "x") == NOT_INT
    assert err(r.execute_command, "LPOS", "l", "a", "RANK") == "syntax error"
    assert err(r.execute_command, "LPOS", "l", "a", "FOO", "1") == "syntax error"
    # options are parsed before the key is looked up
    assert err(r.execute_command, "LPOS", "missing", "a", "COUNT", "-1") == \
        "COUNT can't be negative"


def test_lmove_rpoplpush(r):
    r.rpush("src", "a", "b", "c")
    assert r.lmove("src", "dst", "LEFT", "RIGHT") == b"a"
    assert r.lmove("src", "dst", "RIGHT", "LEFT") == b"c"
    assert r.lrange("dst", 0, -1) == [b"c", b"a"]
    assert r.rpoplpush("src", "dst") == b"b"
    assert r.exists("src") == 0
    assert r.lrange("dst", 0, -1) == [b"b", b"c", b"a"]
    assert r.rpoplpush("src", "dst") is None
    assert r.lmove("src", "dst") is None
    # rotate a list onto itself
    assert r.lmove("dst", "dst", "LEFT", "RIGHT") == b"b"
    assert r.lrange("dst", 0, -1) == [b"c", b"a", b"b"]
    r.delete("one")
    r.rpush("one", "x")
    assert r.rpoplpush("one", "one") == b"x"
    assert r.lrange("one", 0, -1) == [b"x"]
    assert err(r.execute_command, "LMOVE", "dst", "x", "UP", "LEFT") == "syntax error"
    r.hset("s", "f", "v")
    assert err(r.lmove, "dst", "s") == WRONGTYPE
    assert r.lrange("dst", 0, -1) == [b"c", b"a", b"b"]  # nothing popped
    assert err(r.lmove, "s", "dst") == WRONGTYPE
    assert r.lmove("missing", "s") is None  # a missing source answers before dst's type


def test_lmpop(r, r2):
    r.rpush("b", "1", "2", "3")
    assert r.lmpop(2, "a", "b", direction="LEFT") == [b"b", [b"1"]]
    assert r.lmpop(2, "a", "b", direction="RIGHT", count=5) == [b"b", [b"3", b"2"]]
    assert r.exists("b") == 0
    assert r.lmpop(2, "a", "b", direction="LEFT") is None
    assert r2.lmpop(1, "a", direction="LEFT") is None
    assert err(r.execute_command, "LMPOP", "0", "a", "LEFT") == \
        "numkeys should be greater than 0"
    assert err(r.execute_command, "LMPOP", "x", "a", "LEFT") == \
        "numkeys should be greater than 0"
    assert err(r.execute_command, "LMPOP", "3", "a", "LEFT") == "syntax error"
    assert err(r.execute_command, "LMPOP", "1", "a", "UP") == "syntax error"
    assert err(r.execute_command, "LMPOP", "1", "a", "LEFT", "COUNT", "0") == \
        "count should be greater than 0"
    assert err(r.execute_command, "LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1") == \
        "syntax error"
    r.hset("s", "f", "v")
    r.rpush("l", "x")
    assert err(r.execute_command, "LMPOP", "2", "s", "l", "LEFT") == WRONGTYPE
    assert r.execute_command("LMPOP", "2", "l", "s", "LEFT") == [b"l", [b"x"]]


def test_wrongtype_everywhere(r):
    r.hset("h", "f", "v")
    for args in (("LPUSH", "h", "a"), ("RPUSH", "h", "a"), ("LPUSHX", "h", "a"),
                 ("RPUSHX", "h", "a"), ("LPOP", "h"), ("RPOP", "h", "2"), ("LLEN", "h"),
                 ("LRANGE", "h", "0", "1"), ("LINDEX", "h", "0"), ("LSET", "h", "0", "x"),
                 ("LREM", "h", "0", "x"), ("LTRIM", "h", "0", "1"),
                 ("LINSERT", "h", "BEFORE", "a", "b"), ("LPOS", "h", "a"),
                 ("LMOVE", "h", "x", "LEFT", "LEFT"), ("RPOPLPUSH", "h", "x")):
        assert err(r.execute_command, *args) == WRONGTYPE, args


def test_arity(r):
    for args in (("LPUSH", "l"), ("LLEN",), ("LRANGE", "l", "0"), ("LINDEX", "l"),
                 ("LSET", "l", "0"), ("LINSERT", "l", "BEFORE", "a"), ("LPOS", "l"),
                 ("LMOVE", "a", "b", "LEFT"), ("RPOPLPUSH", "a"), ("LMPOP", "1", "a")):
        name = args[0].lower()
        assert err(r.execute_command, *args) == \
            f"wrong number of arguments for '{name}' command", args


def test_expired_list_is_replaced(r):
    r.rpush("l", "old")
    r.pexpire("l", 20)
    wait_for(lambda: r.llen("l") == 0, 5, what="the list to expire")
    assert r.lpush("l", "new") == 1
    assert r.ttl("l") == -1
    assert r.lrange("l", 0, -1) == [b"new"]


def test_watch_sees_list_writes(pyrepl_server, r):
    r.rpush("l", "a", "b")
    with redis.Redis(port=pyrepl_server.port) as other:
        for write in (lambda: other.lpush("l", "x"), lambda: other.lset("l", 0, "y"),
                      lambda: other.ltrim("l", 0, -1), lambda: other.rpoplpush("l", "l")):
            assert_watch_aborts(r, "l", write, lambda p: p.llen("l"))


def test_binary_and_large_values(r):
    blob = bytes(range(256)) * 100
    r.rpush("l", blob, b"", b"\r\n")
    assert r.lrange("l", 0, -1) == [blob, b"", b"\r\n"]
    assert r.lpos("l", b"") == 1
    r.rpush("many", *[str(i) for i in range(1000)])
    assert r.lindex("many", 500) == b"500"
    assert r.lindex("many", -1) == b"999"
    assert r.lrange("many", 995, -1) == [b"995", b"996", b"997", b"998", b"999"]
    assert r.lrange("many", -999, -997) == [b"1", b"2", b"3"]
