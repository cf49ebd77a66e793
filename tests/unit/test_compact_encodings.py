"""What the keyspace holds as commands write: a small hash a ListpackHash, a set of integers
an IntSet, a small list a ListpackList, each converted to a dict, a set or a deque for good
when a write passes its limit (pyrepl/keyspace/lphash.py, intset.py, lplist.py). The replies
are checked against real Redis by the differential tests; here, the shapes behind them."""

from __future__ import annotations

from collections import deque

from pyrepl.keyspace.intset import IntSet
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.lplist import ListpackList
from pyrepl.keyspace.strtab import StrDict, StrSet
from tests.support.cores import make_core, run


def _setup(*overrides: tuple[str, list[str]]):
    core = make_core(*overrides)
    return core, core.connection_made()


def held(core, key: str) -> type:
    return type(core.dbs[0].data.peek(key.encode()))


def test_a_list_outgrows_its_node_by_any_write() -> None:
    core, c = _setup(("list-max-listpack-size", ["4"]))
    for args in (("RPUSH", "a", "1", "2", "3", "4"), ("LPUSH", "b", "x"), ("RPUSH", "c", "x"),
                 ("RPUSH", "d", "1", "2", "3", "4"), ("RPUSH", "e", "1", "2", "3", "4")):
        run(c, *args)
    assert {held(core, k) for k in "abcde"} == {ListpackList}
    run(c, "RPUSH", "a", "5")                       # past 4 elements
    run(c, "LINSERT", "d", "BEFORE", "1", "0")
    run(c, "LMOVE", "b", "e", "LEFT", "LEFT")       # b emptied, e over
    assert [held(core, k) for k in "ade"] == [deque, deque, deque]
    assert run(c, "LRANGE", "e", "0", "-1") == b"*5\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n"
    run(c, "CONFIG", "SET", "list-max-listpack-size", "-2")
    run(c, "LSET", "c", "0", "v" * 9000)            # past 8 KB
    assert held(core, "c") is deque
    run(c, "LPOP", "a", "4")                        # a deque stays one
    assert held(core, "a") is deque and run(c, "LLEN", "a") == b":1\r\n"


def test_a_hash_converts_on_its_limits_and_stays_converted() -> None:
    core, c = _setup(("hash-max-listpack-entries", ["2"]), ("hash-max-listpack-value", ["4"]))
    run(c, "HSET", "h", "a", "1", "b", "2")
    assert held(core, "h") is ListpackHash
    run(c, "HSET", "h", "c", "3")
    assert held(core, "h") is StrDict
    run(c, "HDEL", "h", "c", "b")
    assert held(core, "h") is StrDict and run(c, "OBJECT", "ENCODING", "h") == b"$9\r\nhashtable\r\n"
    run(c, "HSET", "v", "f", "12345")
    run(c, "HINCRBYFLOAT", "w", "f", "1.5")
    assert held(core, "v") is StrDict and held(core, "w") is ListpackHash
    run(c, "DEBUG", "RELOAD")
    assert held(core, "h") is ListpackHash and held(core, "v") is StrDict


def test_a_set_of_integers_is_an_intset_until_a_string_or_one_too_many() -> None:
    core, c = _setup(("set-max-intset-entries", ["3"]))
    run(c, "SADD", "s", "1", "2", "3")
    run(c, "SADD", "t", "x")
    assert held(core, "s") is IntSet and held(core, "t") is StrSet
    run(c, "SADD", "s", "3")                        # nothing added: still an intset
    assert held(core, "s") is IntSet
    run(c, "SADD", "s", "4")
    assert held(core, "s") is StrSet
    run(c, "SADD", "u", "1", "2")
    run(c, "SMOVE", "t", "u", "x")
    assert held(core, "u") is StrSet
    run(c, "SINTERSTORE", "i", "s", "s")
    assert held(core, "i") is StrSet                   # 4 members: over the limit
    run(c, "SREM", "s", "4")
    run(c, "SINTERSTORE", "i", "s", "s")
    assert held(core, "i") is IntSet
    assert run(c, "SMEMBERS", "i") == b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
