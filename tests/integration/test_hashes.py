"""Hash commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``)."""

from __future__ import annotations

import redis

from tests.support.checks import NOT_INT, WRONGTYPE, assert_watch_aborts, err, scan_pages
from tests.support.resp import parse_reply


def test_hset_hget_and_friends(r):
    assert r.hset("h", "a", "1") == 1
    assert r.hset("h", mapping={"a": "2", "b": "3", "c": "4"}) == 2
    assert r.hget("h", "a") == b"2"
    assert r.hget("h", "zz") is None
    assert r.hget("missing", "a") is None
    assert r.hmget("h", "a", "zz", "c") == [b"2", None, b"4"]
    assert r.hmget("missing", "a", "b") == [None, None]
    assert r.hlen("h") == 3
    assert r.hlen("missing") == 0
    assert r.hexists("h", "b") is True
    assert r.hexists("h", "zz") is False
    assert r.hexists("missing", "b") is False
    assert r.hstrlen("h", "a") == 1
    assert r.hstrlen("h", "zz") == 0
    assert r.hstrlen("missing", "a") == 0
    assert r.type("h") == b"hash"


def test_hset_same_values_counts_zero(r):
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert r.hset("h", mapping={"a": "1", "b": "2"}) == 0


def test_hset_arity(r):
    assert err(r.execute_command, "HSET", "h", "a", "1", "b") == \
        "wrong number of arguments for 'hset' command"
    assert err(r.execute_command, "HMSET", "h", "a", "1", "b") == \
        "wrong number of arguments for 'hmset' command"
    assert err(r.execute_command, "HSET", "h", "a") == \
        "wrong number of arguments for 'hset' command"
    assert r.hlen("h") == 0


def test_hmset_hsetnx(r):
    assert r.execute_command("HMSET", "h", "a", "1", "b", "2") is True  # +OK
    assert r.hsetnx("h", "a", "x") == 0
    assert r.hsetnx("h", "c", "3") == 1
    assert r.hsetnx("new", "f", "v") == 1
    assert r.hgetall("h") == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_hgetall_keys_vals_order_and_shapes(r, r2, raw):
    r.hset("h", mapping={"z": "1", "a": "2", "m": "3"})
    r.hdel("h", "a")
    r.hset("h", "a", "4")
    r.hset("h", "z", "5")  # update keeps the position
    assert r.hkeys("h") == [b"z", b"m", b"a"]
    assert r.hvals("h") == [b"5", b"3", b"4"]
    assert r.hgetall("h") == {b"z": b"5", b"m": b"3", b"a": b"4"}
    assert r2.hgetall("h") == {b"z": b"5", b"m": b"3", b"a": b"4"}
    assert r.hgetall("missing") == {}
    assert r.hkeys("missing") == []
    assert r.hvals("missing") == []
    assert raw.call("HGETALL", "missing") == b"*0\r\n"
    assert raw.call("HGETALL", "h") == \
        b"*6\r\n$1\r\nz\r\n$1\r\n5\r\n$1\r\nm\r\n$1\r\n3\r\n$1\r\na\r\n$1\r\n4\r\n"
    raw.call("HELLO", "3")
    assert raw.call("HGETALL", "missing") == b"%0\r\n"
    assert raw.call("HGETALL", "h").startswith(b"%3\r\n$1\r\nz\r\n$1\r\n5\r\n")


def test_hdel(r):
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hdel("h", "a", "zz", "a") == 1
    assert r.hdel("missing", "a") == 0
    assert r.hdel("h", "b", "c", "d") == 2
    assert r.exists("h") == 0


def test_hincrby(r):
    assert r.hincrby("h", "n", 5) == 5
    assert r.hincrby("h", "n", -7) == -2
    assert r.hget("h", "n") == b"-2"
    r.hset("h", "big", str(2**63 - 2))
    assert r.hincrby("h", "big", 1) == 2**63 - 1
    assert err(r.hincrby, "h", "big", 1) == "increment or decrement would overflow"
    r.hset("h", "small", str(-(2**63) + 1))
    assert err(r.hincrby, "h", "small", -2) == "increment or decrement would overflow"
    r.hset("h", "s", "abc")
    assert err(r.hincrby, "h", "s", 1) == "hash value is not an integer"
    r.hset("h", "sp", " 1")
    assert err(r.hincrby, "h", "sp", 1) == "hash value is not an integer"
    assert err(r.hincrby, "h", "n", "1.5") == NOT_INT
    assert err(r.hincrby, "h", "n", "99999999999999999999") == NOT_INT
    assert err(r.hincrby, "missing", "n", "x") == NOT_INT
    assert r.exists("missing") == 0


def test_hincrbyfloat(r, r2, raw):
    def incr(field: str, by: str) -> bytes:
        reply = raw.call("HINCRBYFLOAT", "h", field, by)
        assert reply.startswith(b"$"), reply  # a bulk string, in RESP2 and RESP3
        return parse_reply(reply)

    def error(field: str, by: str) -> str:
        reply = raw.call("HINCRBYFLOAT", "h", field, by)
        assert reply.startswith(b"-"), reply
        return reply[1:-2].decode()

    assert r.hincrbyfloat("h", "f", 10.5) == 10.5
    assert incr("f", "0.1") == b"10.6"
    assert incr("f", "-5") == b"5.6"
    assert incr("g", "3.0e3") == b"3000"
    assert incr("x", "0x10") == b"16"
    assert incr("y", "1e-20") == b"0"
    assert incr("z", "-1e-20") == b"0"
    # x87 long double: 0.1 + 0.2 is exact enough to print as 0.3
    incr("p", "0.1")
    assert incr("p", "0.2") == b"0.3"
    # a value beyond double range is fine in long double
    big = incr("huge", "1e400")
    assert big.startswith(b"10000000000000000000") and len(big) == 401
    assert r2.hincrbyfloat("h", "f", 1) == 6.6
    raw.call("HELLO", "3")
    assert incr("f", "1") == b"7.6"
    assert error("f", "abc") == "ERR value is not a valid float"
    assert error("f", " 1") == "ERR value is not a valid float"
    assert error("f", "nan") == "ERR value is not a valid float"
    assert error("f", "1e5000") == "ERR value is not a valid float"
    assert error("f", "inf") == "ERR value is NaN or Infinity"
    assert error("f", "-Infinity") == "ERR value is NaN or Infinity"
    r.hset("h", "s", "abc")
    assert error("s", "1") == "ERR hash value is not a float"
    r.hset("h", "i", "inf")
    assert error("i", "1") == "ERR increment would produce NaN or Infinity"
    r.hset("h", "m", "1e4932")
    assert error("m", "1e4932") == "ERR increment would produce NaN or Infinity"
    assert r.hget("h", "m") == b"1e4932"


def test_hrandfield(r, r2):
    assert r.hrandfield("missing") is None
    assert r.hrandfield("missing", 3) == []
    fields = {b"a": b"1", b"b": b"2", b"c": b"3"}
    r.hset("h", mapping=fields)
    for _ in range(20):
        assert r.hrandfield("h") in fields
    assert r.hrandfield("h", 0) == []
    got = r.hrandfield("h", 2)
    assert len(got) == 2 and len(set(got)) == 2 and set(got) <= set(fields)
    assert sorted(r.hrandfield("h", 10)) == sorted(fields)
    got = r.hrandfield("h", -10)
    assert len(got) == 10 and set(got) <= set(fields)
    # WITHVALUES: RESP3 nests [field, value] pairs, RESP2 is flat
    pairs = r.execute_command("HRANDFIELD", "h", "-5", "WITHVALUES")
    assert len(pairs) == 5
    for f, v in pairs:
        assert fields[f] == v
    flat = r2.execute_command("HRANDFIELD", "h", "2", "WITHVALUES")
    assert len(flat) == 4
    for f, v in zip(flat[0::2], flat[1::2], strict=True):
        assert fields[f] == v
    one = r.execute_command("HRANDFIELD", "h", "1", "WITHVALUES")
    assert len(one) == 1 and fields[one[0][0]] == one[0][1]
    assert err(r.execute_command, "HRANDFIELD", "h", "x") == NOT_INT
    assert err(r.execute_command, "HRANDFIELD", "h", "1", "VALUES") == "syntax error"
    assert err(r.execute_command, "HRANDFIELD", "h", "1", "WITHVALUES", "x") == "syntax error"
    assert err(r.execute_command, "HRANDFIELD", "h", "-9223372036854775808") == (
        "value is out of range, value must between -9223372036854775807 and "
        "9223372036854775807")
    assert err(r.execute_command, "HRANDFIELD", "h", "4611686018427387904", "WITHVALUES") == \
        "value is out of range"


def test_hscan(r):
    assert r.hscan("missing") == (0, {})
    r.hset("h", mapping={"a1": "1", "b1": "2", "a2": "3"})
    assert r.hscan("h") == (0, {b"a1": b"1", b"b1": b"2", b"a2": b"3"})
    assert r.hscan("h", match="a*") == (0, {b"a1": b"1", b"a2": b"3"})
    assert r.hscan("h", match="*", count=1) == (0, {b"a1": b"1", b"b1": b"2", b"a2": b"3"})
    assert err(r.execute_command, "HSCAN", "h", "x") == "invalid cursor"
    assert err(r.execute_command, "HSCAN", "h", " 1") == "invalid cursor"
    assert err(r.execute_command, "HSCAN", "h", "0", "COUNT", "0") == "syntax error"
    assert err(r.execute_command, "HSCAN", "h", "0", "COUNT", "x") == NOT_INT
    assert err(r.execute_command, "HSCAN", "h", "0", "TYPE", "string") == "syntax error"
    assert err(r.execute_command, "HSCAN", "h", "0", "MATCH") == "syntax error"
    # options are parsed after the key lookup: a missing key answers the empty scan
    assert r.hscan("missing", 0, count="x") == (0, {})


def test_hscan_large_hash_visits_everything(r):
    fields = {f"f{i}".encode(): str(i).encode() for i in range(1000)}
    r.hset("big", mapping=fields)
    seen: dict[bytes, bytes] = {}
    for chunk in scan_pages(lambda cursor: r.hscan("big", cursor, count=50)):
        seen.update(chunk)
    assert seen == fields


def test_wrongtype_everywhere(r):
    r.rpush("l", "x")
    for args in (("HSET", "l", "a", "b"), ("HSETNX", "l", "a", "b"), ("HGET", "l", "a"),
                 ("HMSET", "l", "a", "b"), ("HMGET", "l", "a"), ("HDEL", "l", "a"),
                 ("HLEN", "l"), ("HEXISTS", "l", "a"), ("HGETALL", "l"), ("HKEYS", "l"),
                 ("HVALS", "l"), ("HINCRBY", "l", "a", "1"), ("HINCRBYFLOAT", "l", "a", "1"),
                 ("HSTRLEN", "l", "a"), ("HSCAN", "l", "0"), ("HRANDFIELD", "l"),
                 ("HRANDFIELD", "l", "2")):
        assert err(r.execute_command, *args) == WRONGTYPE, args


def test_watch_sees_hash_writes(pyrepl_server, r):
    r.hset("h", "a", "1")
    with redis.Redis(port=pyrepl_server.port) as other:
        for write in (lambda: other.hset("h", "a", "2"), lambda: other.hincrby("h", "a", 1),
                      lambda: other.hincrbyfloat("h", "a", 1.5), lambda: other.hsetnx("h", "b", 1),
                      lambda: other.hdel("h", "b")):
            assert_watch_aborts(r, "h", write, lambda p: p.hlen("h"))
