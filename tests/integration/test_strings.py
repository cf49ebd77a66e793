"""String commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``)."""

from __future__ import annotations

import time

import pytest

from tests.support.checks import NOT_FLOAT, NOT_INT, WRONGTYPE, err


def test_set_get(r):
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    assert r.set("k", b"\x00\xff\r\n") is True
    assert r.get("k") == b"\x00\xff\r\n"
    assert r.set("empty", "") is True
    assert r.get("empty") == b""
    r.rpush("l", "a")
    assert err(r.get, "l") == WRONGTYPE


def test_set_nx_xx_get(r):
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "3", xx=True) is True
    assert r.set("nokey", "3", xx=True) is None
    assert r.exists("nokey") == 0
    assert r.set("k", "4", get=True) == b"3"
    assert r.set("new", "x", get=True) is None
    assert r.get("new") == b"x"
    assert r.set("k", "5", nx=True, get=True) == b"4"  # NX + GET: old value, nothing set
    assert r.get("k") == b"4"
    assert "syntax error" in err(r.execute_command, "SET", "k", "v", "NX", "XX")
    r.rpush("l", "a")
    assert err(r.set, "l", "x", get=True) == WRONGTYPE
    assert r.type("l") == b"list"
    assert r.set("l", "x") is True  # plain SET overwrites any type
    assert r.get("l") == b"x"


def test_set_expire_options(r):
    assert r.set("k", "v", ex=100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.set("k", "v", px=50000) is True
    assert 49000 <= r.pttl("k") <= 50000
    assert r.set("k", "v", exat=4102444800) is True
    assert r.pexpiretime("k") == 4102444800000
    assert r.expiretime("k") == 4102444800
    assert r.set("k", "w", keepttl=True) is True
    assert r.pexpiretime("k") == 4102444800000
    assert r.set("k", "v", pxat=4102444800123) is True
    assert r.pexpiretime("k") == 4102444800123
    assert r.set("k", "v") is True
    assert r.ttl("k") == -1
    for bad in ("0", "-1"):
        assert err(r.execute_command, "SET", "k", "v", "EX", bad) == \
            "invalid expire time in 'set' command"
    assert err(r.execute_command, "SET", "k", "v", "EX", "x") == NOT_INT
    assert err(r.execute_command, "SET", "k", "v", "EX", "9223372036854776") == \
        "invalid expire time in 'set' command"
    assert err(r.execute_command, "SET", "k", "v", "PX", "9223372036854775807") == \
        "invalid expire time in 'set' command"
    for argv in (("EX", "1", "PX", "1"), ("EX", "1", "KEEPTTL"), ("KEEPTTL", "PXAT", "1"),
                 ("EX",), ("PERSIST",), ("BOGUS",)):
        assert err(r.execute_command, "SET", "k", "v", *argv) == "syntax error"
    # the last EX wins when repeated
    r.execute_command("SET", "k", "v", "EX", "10", "EX", "1000")
    assert r.ttl("k") > 900
    # an absolute time in the past: the key is set and immediately gone
    assert r.set("k", "v", exat=1) is True
    assert r.get("k") is None


def test_setnx_setex_psetex(r):
    assert r.setnx("k", "1") is True
    assert r.setnx("k", "2") is False
    assert r.get("k") == b"1"
    assert r.execute_command("SETEX", "e", 100, "v") is True
    assert 99 <= r.ttl("e") <= 100
    assert err(r.execute_command, "SETEX", "e", 0, "v") == \
        "invalid expire time in 'setex' command"
    assert err(r.execute_command, "SETEX", "e", -5, "v") == \
        "invalid expire time in 'setex' command"
    assert r.psetex("p", 100000, "v") is True
    assert 99000 <= r.pttl("p") <= 100000
    assert err(r.psetex, "p", 0, "v") == "invalid expire time in 'psetex' command"
    assert err(r.execute_command, "SETEX", "e", "x", "v") == NOT_INT


def test_mget_mset_msetnx(r):
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "c") == [b"1", b"2", None]
    r.rpush("l", "x")
    assert r.mget("l", "a") == [None, b"1"]  # wrong type reads as nil
    assert err(r.execute_command, "MSET", "a", "1", "b") == \
        "wrong number of arguments for 'mset' command"
    assert err(r.execute_command, "MSETNX", "a") == \
        "wrong number of arguments for 'msetnx' command"
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.msetnx({"d": "x", "e": "5"}) is False
    assert r.exists("e") == 0
    r.set("t", "v", ex=100)
    r.mset({"t": "w"})
    assert r.ttl("t") == -1


def test_getset_getdel(r):
    assert r.getset("k", "1") is None
    assert r.getset("k", "2") == b"1"
    r.set("t", "v", ex=100)
    assert r.getset("t", "w") == b"v"
    assert r.ttl("t") == -1
    assert r.getdel("k") == b"2"
    assert r.getdel("k") is None
    assert r.exists("k") == 0
    r.rpush("l", "a")
    assert err(r.getdel, "l") == WRONGTYPE
    assert err(r.getset, "l", "x") == WRONGTYPE
    assert r.exists("l") == 1


def test_getex(r):
    r.set("k", "v")
    assert r.getex("k") == b"v"
    assert r.ttl("k") == -1
    assert r.getex("k", ex=100) == b"v"
    assert 99 <= r.ttl("k") <= 100
    assert r.getex("k", px=200000) == b"v"
    assert r.ttl("k") > 150
    assert r.getex("k", exat=4102444800) == b"v"
    assert r.expiretime("k") == 4102444800
    assert r.getex("k", pxat=4102444800123) == b"v"
    assert r.pexpiretime("k") == 4102444800123
    assert r.getex("k", persist=True) == b"v"
    assert r.ttl("k") == -1
    assert r.getex("missing", ex=10) is None
    assert err(r.execute_command, "GETEX", "k", "EX", "0") == \
        "invalid expire time in 'getex' command"
    for argv in (("EX", "1", "PERSIST"), ("PERSIST", "PX", "1"), ("NX",), ("KEEPTTL",),
                 ("GET",), ("EX",)):
        assert err(r.execute_command, "GETEX", "k", *argv) == "syntax error"
    assert r.getex("k", exat=1) == b"v"  # past absolute time: returned, then deleted
    assert r.exists("k") == 0
    r.rpush("l", "a")
    assert err(r.getex, "l") == WRONGTYPE


def test_append_strlen(r):
    assert r.append("k", "hello") == 5
    assert r.append("k", " world") == 11
    assert r.get("k") == b"hello world"
    assert r.strlen("k") == 11
    assert r.strlen("missing") == 0
    assert r.append("k", "") == 11
    r.set("t", "a", ex=100)
    r.append("t", "b")
    assert r.ttl("t") > 0  # in-place edits keep the TTL
    r.rpush("l", "a")
    assert err(r.append, "l", "x") == WRONGTYPE
    assert err(r.strlen, "l") == WRONGTYPE


def test_setrange_getrange(r):
    assert r.setrange("k", 5, "abc") == 8
    assert r.get("k") == b"\x00" * 5 + b"abc"
    assert r.setrange("k", 0, "XY") == 8
    assert r.setrange("k", 6, "LONGER") == 12
    assert r.get("k") == b"XY\x00\x00\x00aLONGER"
    assert r.setrange("k", 100, "") == 12  # nothing to write: the length, unchanged
    assert r.setrange("nokey", 3, "") == 0
    assert r.exists("nokey") == 0
    assert err(r.setrange, "k", -1, "x") == "offset is out of range"
    assert err(r.setrange, "k", 536870912, "x") == \
        "string exceeds maximum allowed size (proto-max-bulk-len)"
    r.set("g", "Hello World")
    assert r.getrange("g", 0, 4) == b"Hello"
    assert r.getrange("g", -5, -1) == b"World"
    assert r.getrange("g", -1, -5) == b""
    assert r.getrange("g", 0, 100) == b"Hello World"
    assert r.getrange("g", 20, 30) == b""
    assert r.getrange("missing", 0, -1) == b""
    assert r.execute_command("SUBSTR", "g", 6, 7) == b"Wo"
    assert err(r.execute_command, "GETRANGE", "g", "x", "1") == NOT_INT


def test_proto_max_bulk_len_limits(r):
    r.config_set("proto-max-bulk-len", "1mb")
    try:
        assert r.setrange("k", 1048575, "x") == 1048576
        assert err(r.append, "k", "y") == \
            "string exceeds maximum allowed size (proto-max-bulk-len)"
        assert err(r.setrange, "k", 1048575, "xy") == \
            "string exceeds maximum allowed size (proto-max-bulk-len)"
        assert r.strlen("k") == 1048576
    finally:
        r.config_set("proto-max-bulk-len", "512mb")


def test_incr_family(r):
    assert r.incr("c") == 1
    assert r.incrby("c", 10) == 11
    assert r.decr("c") == 10
    assert r.decrby("c", 20) == -10
    assert r.get("c") == b"-10"
    r.set("c", "9223372036854775807")
    assert err(r.incr, "c") == "increment or decrement would overflow"
    r.set("c", "-9223372036854775808")
    assert err(r.decr, "c") == "increment or decrement would overflow"
    assert err(r.decrby, "c", -9223372036854775808) == "decrement would overflow"
    for bad in ("abc", " 1", "1 ", "01", "+1", "1.0", "", "-0", "99999999999999999999"):
        r.set("c", bad)
        assert err(r.incr, "c") == NOT_INT, bad
    assert err(r.incrby, "c", "x") == NOT_INT
    r.set("t", "5", ex=100)
    assert r.incr("t") == 6
    assert r.ttl("t") > 0
    r.rpush("l", "a")
    assert err(r.incr, "l") == WRONGTYPE


def incrbyfloat_text(client, key: str, incr: str) -> bytes:
    """INCRBYFLOAT's reply as the server sent it (redis-py turns it into a float)."""
    value = client.execute_command("INCRBYFLOAT", key, incr)
    text = client.get(key)
    assert float(text) == value
    return text


def test_incrbyfloat(r, r2):
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert incrbyfloat_text(r, "f", "0.1") == b"10.6"
    # long double rounding shows through, exactly as in Redis 7.0 on x86-64
    assert incrbyfloat_text(r, "f", "-5.0e3") == b"-4989.39999999999999991"
    r.set("f", "1")
    assert incrbyfloat_text(r, "f", "2") == b"3"
    r.set("f", "0.1")
    assert incrbyfloat_text(r, "f", "0.2") == b"0.3"
    r.set("f", "1")
    assert incrbyfloat_text(r, "f", "-1") == b"0"
    r.set("f", "0")
    assert incrbyfloat_text(r, "f", "0.000003814697265625") == b"0.00000381469726562"
    assert incrbyfloat_text(r, "g", "1e300")[:22] == b"1000000000000000000008"
    assert err(r.execute_command, "INCRBYFLOAT", "f", "inf") == \
        "increment would produce NaN or Infinity"
    assert err(r.execute_command, "INCRBYFLOAT", "f", "1e5000") == NOT_FLOAT
    assert err(r.execute_command, "INCRBYFLOAT", "f", "nan") == NOT_FLOAT
    assert err(r.execute_command, "INCRBYFLOAT", "f", "abc") == NOT_FLOAT
    r.set("s", "abc")
    assert err(r.execute_command, "INCRBYFLOAT", "s", "1") == NOT_FLOAT
    r.set("t", "1", ex=100)
    r.incrbyfloat("t", 1)
    assert r.ttl("t") > 0
    assert incrbyfloat_text(r2, "f2", "1.5") == b"1.5"


def test_lcs(r, r2):
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.lcs("a", "b") == b"mytext"
    assert r.lcs("a", "b", len=True) == 6
    res = r.execute_command("LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN")
    assert res == [b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]  # redis-py flattens the map
    flat = r2.execute_command("LCS", "a", "b", "IDX")
    assert flat == [b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len", 6]
    assert err(r.execute_command, "LCS", "a", "b", "LEN", "IDX") == \
        "If you want both the length and indexes, please just use IDX."
    r.rpush("l", "x")
    assert err(r.lcs, "a", "l") == "The specified keys must contain string values"


def test_wrong_arity(r):
    assert err(r.execute_command, "GET") == "wrong number of arguments for 'get' command"
    assert err(r.execute_command, "SET", "k") == "wrong number of arguments for 'set' command"
    assert err(r.execute_command, "GETRANGE", "k", "0") == \
        "wrong number of arguments for 'getrange' command"


def test_lazy_expiry_of_strings(r):
    r.set("k", "v", px=30)
    deadline = time.monotonic() + 5
    while r.get("k") is not None:
        assert time.monotonic() < deadline, "key never expired"
        time.sleep(0.01)
    assert r.exists("k") == 0
    assert r.incr("k") == 1
    assert r.ttl("k") == -1


def test_watch_sees_string_writes(r):
    import redis as redis_mod

    r.set("w", "1")
    other = redis_mod.Redis(port=r.connection_pool.connection_kwargs["port"])
    try:
        with r.pipeline() as pipe:
            pipe.watch("w")
            other.append("w", "x")
            pipe.multi()
            pipe.set("w", "mine")
            with pytest.raises(redis_mod.exceptions.WatchError):
                pipe.execute()
    finally:
        other.close()
    assert r.get("w") == b"1x"
