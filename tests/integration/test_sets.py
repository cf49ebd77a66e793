"""Set commands against the pyrepl process through redis-py (RESP3 ``r``, RESP2 ``r2``), the
raw reply shapes through ``raw``, and what the core propagates (in-process ServerCore)."""

from __future__ import annotations

from tests.support.checks import NOT_INT, WRONGTYPE, assert_watch_aborts, err, scan_pages
from tests.support.differential import CoreTap


def test_sadd_srem_scard_sismember(r):
    assert r.sadd("s", "a", "b", "c") == 3
    assert r.sadd("s", "a", "d", "d") == 1
    assert r.scard("s") == 4
    assert r.scard("missing") == 0
    assert r.sismember("s", "a") in (1, True)
    assert r.sismember("s", "z") in (0, False)
    assert r.sismember("missing", "a") in (0, False)
    assert r.smismember("s", "a", "z", "d") == [1, 0, 1]
    assert r.smismember("missing", "a", "b") == [0, 0]
    assert r.srem("s", "a", "z", "a") == 1
    assert r.srem("missing", "a") == 0
    assert r.smembers("s") == {b"b", b"c", b"d"}
    assert r.smembers("missing") == set()
    assert r.type("s") == b"set"


def test_srem_last_member_deletes_key(r):
    r.sadd("s", "a", "b")
    assert r.srem("s", "a", "b", "c") == 2
    assert r.exists("s") == 0


def test_wrong_type_errors(r):
    r.set("str", "x")
    for fn, args in [(r.sadd, ("str", "a")), (r.srem, ("str", "a")), (r.scard, ("str",)),
                     (r.smembers, ("str",)), (r.sismember, ("str", "a")),
                     (r.smismember, ("str", "a")), (r.spop, ("str",)),
                     (r.srandmember, ("str",)), (r.sinter, ("s", "str")),
                     (r.sunion, ("str",)), (r.sdiff, ("str",)),
                     (r.sinterstore, ("d", "str")), (r.sscan, ("str",))]:
        assert err(fn, *args) == WRONGTYPE, fn
    # SINTER checks every key's type even after a missing one
    assert err(r.sinter, "missing", "str") == WRONGTYPE
    assert r.get("str") == b"x"


def test_arity(r):
    assert err(r.execute_command, "SADD", "s") == "wrong number of arguments for 'sadd' command"
    assert err(r.execute_command, "SCARD") == "wrong number of arguments for 'scard' command"
    assert err(r.execute_command, "SMOVE", "a", "b") == \
        "wrong number of arguments for 'smove' command"
    assert err(r.execute_command, "SPOP", "s", "1", "2") == "syntax error"
    assert err(r.execute_command, "SRANDMEMBER", "s", "1", "2") == "syntax error"


def test_spop(r):
    r.sadd("s", *[str(i) for i in range(10)])
    popped = r.spop("s")
    assert popped is not None and int(popped) in range(10)
    assert r.scard("s") == 9
    assert r.sismember("s", popped) in (0, False)
    many = r.spop("s", 4)
    assert len(many) == 4 and popped not in many
    assert r.scard("s") == 5
    rest = r.spop("s", 100)
    assert len(rest) == 5
    assert r.exists("s") == 0
    assert r.spop("s") is None
    assert r.spop("s", 3) in ([], set())
    r.sadd("s", "x")
    assert r.spop("s", 0) in ([], set())
    assert r.scard("s") == 1
    assert err(r.spop, "s", -1) == "value is out of range, must be positive"
    assert err(r.spop, "s", "x") == "value is out of range, must be positive"
    # the count is checked before the key
    r.set("str", "v")
    assert err(r.spop, "str", -1) == "value is out of range, must be positive"
    assert err(r.spop, "str", 1) == WRONGTYPE


def test_spop_on_big_set_and_after_shrinking(r):
    r.sadd("big", *[f"m{i}" for i in range(3000)])
    five = r.spop("big", 5)
    assert len(set(five)) == 5 and r.scard("big") == 2995
    assert not any(r.smismember("big", *five))
    seen = set(five)
    for _ in range(2985):
        m = r.spop("big")
        assert m not in seen
        seen.add(m)
    assert r.scard("big") == 10
    rest = r.smembers("big")
    assert len(rest) == 10 and not (rest & seen)
    assert len(seen | rest) == 3000


def test_srandmember(r):
    members = {str(i).encode() for i in range(20)}
    r.sadd("s", *members)
    assert r.srandmember("s") in members
    three = r.srandmember("s", 3)
    assert len(three) == 3 and len(set(three)) == 3 and set(three) <= members
    assert sorted(r.srandmember("s", 100)) == sorted(members)
    dup = r.srandmember("s", -50)
    assert len(dup) == 50 and set(dup) <= members
    assert r.srandmember("s", 0) == []
    assert r.srandmember("missing") is None
    assert r.srandmember("missing", 5) == []
    assert r.scard("s") == 20  # nothing removed
    assert err(r.srandmember, "s", "x") == NOT_INT
    assert err(r.srandmember, "s", "-9223372036854775808") == \
        "value is out of range, value must between -9223372036854775807 and " \
        "9223372036854775807"


def test_smove(r):
    r.sadd("a", "x", "y")
    r.sadd("b", "z")
    assert r.smove("a", "b", "x") in (1, True)
    assert r.smembers("a") == {b"y"} and r.smembers("b") == {b"x", b"z"}
    assert r.smove("a", "b", "nope") in (0, False)
    assert r.smove("missing", "b", "x") in (0, False)
    assert r.smove("a", "a", "y") in (1, True)
    assert r.smove("a", "a", "nope") in (0, False)
    assert r.smove("a", "new", "y") in (1, True)
    assert r.exists("a") == 0
    assert r.smembers("new") == {b"y"}
    r.set("str", "v")
    assert err(r.smove, "new", "str", "y") == WRONGTYPE
    assert err(r.smove, "str", "new", "y") == WRONGTYPE
    assert r.smove("missing", "str", "y") in (0, False)  # a missing source wins


def test_algebra(r):
    r.sadd("s1", "a", "b", "c", "d")
    r.sadd("s2", "c", "d", "e")
    r.sadd("s3", "d", "e", "f")
    assert r.sinter("s1", "s2") == {b"c", b"d"}
    assert r.sinter("s1", "s2", "s3") == {b"d"}
    assert r.sinter("s1", "missing") == set()
    assert r.sunion("s1", "s2", "missing") == {b"a", b"b", b"c", b"d", b"e"}
    assert r.sdiff("s1", "s2") == {b"a", b"b"}
    assert r.sdiff("s1", "s2", "s3") == {b"a", b"b"}
    assert r.sdiff("s1", "s1") == set()
    assert r.sdiff("missing", "s1") == set()
    assert r.sintercard(2, ["s1", "s2"]) == 2
    assert r.sintercard(2, ["s1", "s2"], limit=1) == 1
    assert r.sintercard(2, ["s1", "missing"]) == 0


def test_store_variants(r):
    r.sadd("s1", "a", "b", "c")
    r.sadd("s2", "b", "c", "d")
    assert r.sinterstore("d", "s1", "s2") == 2
    assert r.smembers("d") == {b"b", b"c"}
    assert r.sunionstore("d", "s1", "s2") == 4
    assert r.sdiffstore("d", "s1", "s2") == 1
    assert r.smembers("d") == {b"a"}
    # an empty result deletes the destination
    assert r.sinterstore("d", "s1", "missing") == 0
    assert r.exists("d") == 0
    # the destination is overwritten whatever its type, and its TTL dropped
    r.set("str", "x", ex=100)
    assert r.sunionstore("str", "s1") == 3
    assert r.type("str") == b"set"
    assert r.ttl("str") == -1
    # storing into one of the sources
    assert r.sdiffstore("s1", "s1", "s2") == 1
    assert r.smembers("s1") == {b"a"}


def test_sintercard_errors(r):
    r.sadd("s", "a")
    assert err(r.execute_command, "SINTERCARD", "0", "s") == "numkeys should be greater than 0"
    assert err(r.execute_command, "SINTERCARD", "x", "s") == "numkeys should be greater than 0"
    assert err(r.execute_command, "SINTERCARD", "2", "s") == \
        "Number of keys can't be greater than number of args"
    assert err(r.execute_command, "SINTERCARD", "1", "s", "LIMIT", "-1") == \
        "LIMIT can't be negative"
    assert err(r.execute_command, "SINTERCARD", "1", "s", "LIMIT") == "syntax error"
    assert err(r.execute_command, "SINTERCARD", "1", "s", "FOO", "1") == "syntax error"
    assert r.execute_command("SINTERCARD", "1", "s", "limit", "0") == 1


def test_sscan(r):
    r.sadd("ints", 5, -3, 10, 0)
    # a small all-integer set (an intset in Redis) comes back whole, in numeric order
    assert r.execute_command("SSCAN", "ints", "0") == (0, [b"-3", b"0", b"5", b"10"])
    assert r.execute_command("SSCAN", "ints", "0", "MATCH", "1*") == (0, [b"10"])
    members = {f"member:{i}".encode() for i in range(250)}
    r.sadd("big", *members)
    got = [m for page in scan_pages(lambda cursor: r.sscan("big", cursor, count=7), 1000)
           for m in page]
    assert set(got) == members and len(got) == len(members)
    cursor, page = r.sscan("big", 0, match="member:1?", count=1000)
    assert cursor == 0 and set(page) == {f"member:{i}".encode() for i in range(10, 20)}
    assert r.execute_command("SSCAN", "missing", "0", "COUNT", "0") == (0, [])
    assert err(r.execute_command, "SSCAN", "big", "0", "COUNT", "0") == "syntax error"
    assert err(r.execute_command, "SSCAN", "big", "x") == "invalid cursor"
    assert err(r.execute_command, "SSCAN", "big", "0", "TYPE", "set") == "syntax error"


def test_reply_shapes_resp2_resp3(raw):
    raw.call("SADD", "s", "a")
    assert raw.call("SMEMBERS", "s") == b"*1\r\n$1\r\na\r\n"
    assert raw.call("SPOP", "nokey", "2") == b"*0\r\n"
    assert raw.call("SPOP", "nokey") == b"$-1\r\n"
    raw.call("HELLO", "3")
    assert raw.call("SMEMBERS", "s") == b"~1\r\n$1\r\na\r\n"
    assert raw.call("SMEMBERS", "nokey") == b"~0\r\n"
    assert raw.call("SINTER", "s", "nokey") == b"~0\r\n"
    assert raw.call("SUNION", "s") == b"~1\r\n$1\r\na\r\n"
    assert raw.call("SDIFF", "s") == b"~1\r\n$1\r\na\r\n"
    assert raw.call("SPOP", "nokey", "2") == b"~0\r\n"
    assert raw.call("SPOP", "nokey") == b"_\r\n"
    assert raw.call("SRANDMEMBER", "s", "5") == b"*1\r\n$1\r\na\r\n"
    assert raw.call("SRANDMEMBER", "nokey", "5") == b"*0\r\n"
    assert raw.call("SMISMEMBER", "s", "a", "b") == b"*2\r\n:1\r\n:0\r\n"
    assert raw.call("SPOP", "s", "5") == b"~1\r\n$1\r\na\r\n"


def test_watch_sees_set_changes(r):
    r.sadd("s", "a")
    with r.pipeline() as p:
        p.watch("s")
        r.sadd("s", "a")  # no change: the transaction still runs
        p.multi()
        p.scard("s")
        assert p.execute() == [1]
    assert_watch_aborts(r, "s", lambda: r.srem("s", "a"), lambda p: p.scard("s"))


def test_resp2_client(r2):
    assert r2.sadd("s", "a", "b") == 2
    assert r2.smembers("s") == {b"a", b"b"}
    assert r2.spop("s", 5) in ([b"a", b"b"], [b"b", b"a"])


# -- propagation (the core in-process) ----------------------------------------------------------

def test_propagation_rewrites():
    t = CoreTap(now_ms=1_700_000_000_000)
    assert t.parsed("SADD", "s", "a", "b", "c", "d") == (4, [[b"SADD", b"s", b"a", b"b", b"c",
                                                         b"d"]])
    assert t.parsed("SADD", "s", "a") == (0, [])  # nothing changed: nothing propagated
    assert t.parsed("SREM", "s", "zz") == (0, [])
    reply, fed = t.parsed("SPOP", "s")
    assert fed == [[b"SREM", b"s", reply]]
    reply, fed = t.parsed("SPOP", "s", "1")
    assert fed == [[b"SREM", b"s", reply[0]]]
    reply, fed = t.parsed("SPOP", "s", "2")  # two of the last two: the set goes, DEL
    assert sorted(reply) == sorted(set(reply)) and len(reply) == 2
    assert fed == [[b"DEL", b"s"]]
    t.parsed("SADD", "s", *[f"m{i}" for i in range(10)])
    reply, fed = t.parsed("SPOP", "s", "3")
    # several SREMs from one command are wrapped in MULTI/EXEC, as Redis 7.0 does
    assert fed[0] == [b"MULTI"] and fed[-1] == [b"EXEC"]
    assert sorted(f[2] for f in fed[1:-1]) == sorted(reply)
    assert all(f[:2] == [b"SREM", b"s"] and len(f) == 3 for f in fed[1:-1])
    assert t.parsed("SPOP", "missing") == (None, [])
    assert t.parsed("SPOP", "missing", "3") == ([], [])
    assert t.parsed("SMOVE", "s", "d", "nope") == (0, [])
    assert t.parsed("SINTERSTORE", "d", "missing")[1] == []  # d did not exist: no change
    assert t.parsed("SUNIONSTORE", "d", "s")[1] == [[b"SUNIONSTORE", b"d", b"s"]]
    assert t.parsed("SINTERSTORE", "d", "missing")[1] == [[b"SINTERSTORE", b"d", b"missing"]]
