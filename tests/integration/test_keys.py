"""Generic key commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``)."""

from __future__ import annotations

import time

import redis

from tests.support.checks import NOT_INT, err


def wait_gone(r, key: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while r.exists(key):
        assert time.monotonic() < deadline, f"{key} never expired"
        time.sleep(0.01)


def test_del_unlink_exists_type(r):
    r.mset({"a": "1", "b": "2", "c": "3"})
    r.rpush("l", "x")
    assert r.exists("a", "a", "b", "nokey") == 3
    assert r.type("a") == b"string"
    assert r.type("l") == b"list"
    assert r.type("nokey") == b"none"
    assert r.delete("a", "a", "nokey") == 1
    assert r.unlink("b", "l") == 2
    assert r.exists("a", "b", "l") == 0
    assert r.touch("c", "nokey", "c") == 2
    assert r.dbsize() == 1


def test_expire_ttl(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.pttl("k") == -1
    assert r.ttl("nokey") == -2
    assert r.expiretime("nokey") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert 99000 <= r.pttl("k") <= 100000
    assert r.expire("nokey", 100) is False
    assert r.pexpire("k", 50000) is True
    assert 49 <= r.ttl("k") <= 50
    assert r.expireat("k", 4102444800) is True
    assert r.expiretime("k") == 4102444800
    assert r.pexpiretime("k") == 4102444800000
    assert r.pexpireat("k", 4102444800123) is True
    assert r.pexpiretime("k") == 4102444800123
    assert r.expiretime("k") == 4102444800
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.persist("nokey") is False
    assert r.ttl("k") == -1
    assert err(r.expire, "k", "x") == NOT_INT
    assert err(r.execute_command, "EXPIRE", "k", "9223372036854776") == \
        "invalid expire time in 'expire' command"
    assert err(r.execute_command, "PEXPIRE", "k", "9223372036854775807") == \
        "invalid expire time in 'pexpire' command"


def test_expire_options(r):
    r.set("k", "v")
    assert r.expire("k", 100, xx=True) is False
    assert r.expire("k", 100, gt=True) is False  # no TTL counts as infinite
    assert r.expire("k", 100, lt=True) is True
    assert r.expire("k", 200, nx=True) is False
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 300, gt=True) is True
    assert r.expire("k", 400, lt=True) is False
    assert r.expire("k", 200, xx=True) is True
    assert 199 <= r.ttl("k") <= 200
    assert err(r.execute_command, "EXPIRE", "k", "1", "NX", "XX") == \
        "NX and XX, GT or LT options at the same time are not compatible"
    assert err(r.execute_command, "EXPIRE", "k", "1", "GT", "LT") == \
        "GT and LT options at the same time are not compatible"
    assert err(r.execute_command, "EXPIRE", "k", "1", "FOO") == "Unsupported option FOO"


def test_expire_in_the_past_deletes(r):
    for argv in (("EXPIRE", "k", "0"), ("EXPIRE", "k", "-10"), ("PEXPIRE", "k", "-1"),
                 ("EXPIREAT", "k", "1"), ("PEXPIREAT", "k", "0")):
        r.set("k", "v")
        assert r.execute_command(*argv) == 1
        assert r.exists("k") == 0, argv


def test_lazy_and_active_expiry(r):
    r.set("lazy", "v", px=30)
    r.set("active", "v", px=30)
    r.set("stay", "v")
    wait_gone(r, "lazy")
    # Never read "active": the server's cron removes it on its own (DBSIZE counts raw keys).
    deadline = time.monotonic() + 5
    while r.dbsize() != 1:
        assert time.monotonic() < deadline, "active expiry did not remove the key"
        time.sleep(0.02)
    assert r.keys("*") == [b"stay"]


def test_rename(r):
    r.set("a", "1", ex=100)
    assert r.rename("a", "b") is True
    assert r.exists("a") == 0
    assert r.get("b") == b"1"
    assert r.ttl("b") > 0
    assert err(r.rename, "nokey", "x") == "no such key"
    assert err(r.rename, "nokey", "nokey") == "no such key"
    assert r.rename("b", "b") is True
    r.set("c", "3")
    assert r.renamenx("b", "c") is False
    assert r.renamenx("b", "b") is False
    assert r.renamenx("b", "d") is True
    r.rpush("l", "x")
    assert r.rename("l", "d") is True  # overwrites whatever type was there
    assert r.type("d") == b"list"
    assert r.ttl("d") == -1


def test_move(r):
    r.set("k", "v", ex=100)
    assert r.move("k", 1) is True
    assert r.exists("k") == 0
    assert r.move("k", 1) is False
    other = redis.Redis(port=r.connection_pool.connection_kwargs["port"], db=1)
    try:
        assert other.get("k") == b"v"
        assert other.ttl("k") > 0
        r.set("k", "again")
        assert r.move("k", 1) is False  # exists in the target
        assert r.get("k") == b"again"
    finally:
        other.close()
    assert err(r.move, "k", 0) == "source and destination objects are the same"
    assert err(r.move, "k", 16) == "DB index is out of range"
    assert err(r.move, "k", "x") == NOT_INT
    assert err(r.move, "k", 4294967296) == \
        "value is out of range, value must between -2147483648 and 2147483647"


def test_copy(r):
    r.rpush("l", "a", "b")
    r.expire("l", 100)
    assert r.copy("l", "l2") is True
    r.rpush("l2", "c")
    assert r.lrange("l", 0, -1) == [b"a", b"b"]  # a deep copy
    assert r.lrange("l2", 0, -1) == [b"a", b"b", b"c"]
    assert r.ttl("l2") > 0
    assert r.copy("l", "l2") is False
    assert r.copy("l", "l2", replace=True) is True
    assert r.lrange("l2", 0, -1) == [b"a", b"b"]
    assert r.copy("nokey", "x") is False
    assert err(r.copy, "l", "l") == "source and destination objects are the same"
    assert r.copy("l", "l", destination_db=1) is True
    assert err(r.copy, "l", "x", destination_db=16) == "DB index is out of range"
    assert err(r.execute_command, "COPY", "l", "x", "BOGUS") == "syntax error"


def test_keys_patterns(r):
    r.mset({"hello": "1", "hallo": "1", "hxllo": "1", "hllo": "1", "heeeello": "1",
            "a*b": "1", "": "1"})
    assert sorted(r.keys("h?llo")) == [b"hallo", b"hello", b"hxllo"]
    assert sorted(r.keys("h*llo")) == [b"hallo", b"heeeello", b"hello", b"hllo", b"hxllo"]
    assert sorted(r.keys("h[ae]llo")) == [b"hallo", b"hello"]
    assert sorted(r.keys("h[^e]llo")) == [b"hallo", b"hxllo"]
    assert sorted(r.keys("h[a-b]llo")) == [b"hallo"]
    assert r.keys("a\\*b") == [b"a*b"]
    assert len(r.keys("*")) == 7  # "*" is every key, the empty name included
    assert b"" not in r.keys("**")  # Redis quirk: only "*" itself matches the empty name


def test_scan(r, r2):
    r.mset({f"key:{i}": "v" for i in range(250)})
    r.rpush("alist", "x")
    seen = list(r.scan_iter(count=7))
    assert len(seen) == len(set(seen)) == 251
    assert sorted(r.scan_iter(match="key:1?", count=3)) == sorted(
        f"key:{i}".encode() for i in range(10, 20))
    assert list(r.scan_iter(_type="list")) == [b"alist"]
    assert list(r2.scan_iter(_type="LIST", count=1000)) == [b"alist"]
    cursor, keys = r.scan(0, count=1000)
    assert cursor == 0 and len(keys) == 251
    assert err(r.execute_command, "SCAN", "x") == "invalid cursor"
    assert err(r.execute_command, "SCAN", "0", "COUNT", "0") == "syntax error"
    assert err(r.execute_command, "SCAN", "0", "FOO", "1") == "syntax error"


def test_randomkey(r):
    assert r.randomkey() is None
    r.mset({"a": "1", "b": "2"})
    for _ in range(20):
        assert r.randomkey() in (b"a", b"b")


def test_object(r, r2):
    r.set("int", "123")
    r.set("emb", "hello")
    r.set("raw", "x" * 100)
    r.rpush("l", "a")
    assert r.object("encoding", "int") == b"int"
    assert r.object("encoding", "emb") == b"embstr"
    assert r.object("encoding", "raw") == b"raw"
    assert r.object("encoding", "l") == b"quicklist"
    assert r.object("encoding", "nokey") is None
    assert r.object("refcount", "raw") == 1
    assert r.object("idletime", "raw") <= 1    # (seconds of a 1 s LRU clock: a tick may pass)
    assert err(r.object, "freq", "raw").startswith("An LFU maxmemory policy is not selected")
    assert err(r.execute_command, "OBJECT", "NOPE") == \
        "unknown subcommand 'NOPE'. Try OBJECT HELP."
    assert r2.execute_command("OBJECT", "HELP")[0] == \
        b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"


def test_expired_keys_not_listed(r):
    r.set("gone", "v", px=20)
    r.set("here", "v")
    deadline = time.monotonic() + 5
    while r.keys("*") != [b"here"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert list(r.scan_iter()) == [b"here"]
    assert r.randomkey() == b"here"
