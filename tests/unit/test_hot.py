"""The hottest commands' C handlers (``pyrepl.commands._hot``) against the Python handlers
they stand for (``pyrepl.commands.hot.REFERENCE``).

Two servers get the same random requests: one with the C handlers in the command table (as
the server runs), the other with the Python ones. After each read both must have written
the same reply bytes and hold the same dataset, INFO commandstats and errorstats, dirty and
keyspace hit/miss counters, keyspace events heard by a subscriber, and bytes in the backlog.
The requests mix the forms the C handlers take with everything they hand back: keys with a
TTL (some expired), WATCHed keys, other types, counters' texts of every kind, scores that are
not short integers, hashes with field TTLs, keyspace events on, pipelined runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.commands import hot
from pyrepl.commands.table import COMMANDS
from pyrepl.core.server import ServerCore
from pyrepl.core.stats import Stats
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.keyspace.stream import Group, Pel, Stream
from pyrepl.resp.types import NULL_ARRAY
from tests.support.cores import NOW, cmd
from tests.support.execpaths import seed_picks, server_state, warm_server
from tests.support.replica_side import synced_node

_native = native.load("pyrepl.commands._hot")
if _native is None:
    pytest.skip(f"compares pyrepl/commands/_hot.c with its Python reference ({native.WHY_PURE})",
                allow_module_level=True)
_hot = _native

KEYS = ["k", "n", "l", "h", "z", "e1", "e2"]
# (warm_server's clock is NOW + 100, and a read moves it 1 ms)
BOUNDS = ["0", "1", "(1", "3", "(3", "-5", "-inf", "+inf", "inf", "(inf", "(-inf", "1.5", "x",
          "(", "", "01", "9999999999999999", "999999999999999", "-0", "INF"]
PEXPIREAT_TIMES = ["1", "0", "-5", "01", str(NOW + 100), str(NOW + 103), str(NOW + 100_000),
                   "9999999999999", "999999999999999999", "9223372036854775807", "x"]
TEXTS = ["0", "7", "9998", "9999", "10000", "-1", "00", "01", " 1", "1 ", "abc", "",
         "999999999999999998", "999999999999999999", "9223372036854775806", "v",
         # the edges of what a table's entry keeps as an integer (63 bits, _ktable.c "values")
         "4611686018427387902", "4611686018427387903", "-4611686018427387904",
         "-4611686018427387905", "9223372036854775807", "-9223372036854775808", "-0", "+1"]
COORDS = ["13.361389", "38.115556", "-180", "180", "85.05112878", "85.05112879", "-0", "1e1",
          ".5", "5.", "00.25", "abc", "nan", "-85.05112878", "0.000000000000000000001"]
RANGES = [("0", "-1"), ("1", "2"), ("-5", "-4"), ("-3", "-1"), ("-1", "-3"), ("-100", "100"), ("5", "2"),
          ("0", "0"), ("-0", "1"), ("01", "2"), ("9999999999999999999", "1"), ("x", "1")]
CONSUMERS = ["c1", "c2"]
# XREADGROUP's IDs: a consumer's history from them (warm_server's XADD * IDs are NOW + 100 on),
# and what is not a history's ID
HISTORY_IDS = ["0", "1700000000100-0", "1700000000101", "1700000000100-1", "0-0",
               "18446744073709551615-18446744073709551615", ">", "$", "-", "+", "0-x", "01",
               "18446744073709551616", "1-18446744073709551616", " 1", "1-"]
GEO_RADII = ["0", "100", "5000", "20000", "-1", "x", "1e3", "2.5", "-0"]
GEO_UNITS = ["m", "km", "KM", "ft", "mi", "yd"]
GEO_OPTIONS = [[], ["ASC"], ["desc"], ["COUNT", "1"], ["COUNT", "2", "DESC"], ["asc", "count", "3"],
               ["ASC", "COUNT", "0"], ["COUNT", "1", "ANY"], ["WITHDIST"], ["ASC", "ASC"],
               ["COUNT"], ["count", "x"], ["COUNT", "-1"], ["COUNT", "1", "COUNT", "2"],
               ["DESC", "ASC"], ["WITHCOORD", "COUNT", "1"], ["STORE", "k"]]
SCORES = ["12", "007", "0", "123456789012345", "1234567890123456", "1.5", "-3", "+4", "1e3",
          "inf", "nan", "x"]


@contextmanager
def _python_handlers_fail() -> Iterator[None]:
    """The Python handlers the C ones stand for made to fail for the block (AssertionError
    "the Python handler ran"): what the block runs without that error ran in C."""
    saved = dict(hot.REFERENCE)

    def fail(c, argv):
        raise AssertionError("the Python handler ran")

    hot.bind(ServerCore, Stats, {name: fail for name in saved})
    try:
        yield
    finally:
        hot.bind(ServerCore, Stats, saved)


@st.composite
def requests(draw: st.DrawFn) -> list[str]:
    key = draw(st.sampled_from(KEYS))
    return draw(st.sampled_from([
        ["SET", key, draw(st.sampled_from(TEXTS))], ["GET", key], ["INCR", key],
        ["LPUSH", key, "a"], ["RPUSH", key, "b"], ["LPUSH", key, "a", "b"],
        ["HSET", key, draw(st.sampled_from(["f", "g"])), "v"], ["HSET", key, "f", "1", "g", "2"],
        ["ZADD", key, draw(st.sampled_from(SCORES)), draw(st.sampled_from(["m", "n"]))],
        ["ZADD", key, "NX", "1", "m"], ["HEXPIRE", key, "100", "FIELDS", "1", "f"],
        ["ZINCRBY", key, draw(st.sampled_from(["1", "-3", "0", "-0", "1.5", "x", "1" * 16])),
         draw(st.sampled_from(["m", "n", "x" * 70]))],
        ["EXPIRE", key, "100"], ["PEXPIRE", key, "1"], ["PERSIST", key], ["DEL", key],
        ["WATCH", key], ["UNWATCH"], ["MULTI"], ["EXEC"], ["SELECT", draw(st.sampled_from(
            ["0", "1"]))], ["SADD", key, "a"], ["SET"], ["GET", key, "extra"], ["INCR"],
        ["LPUSH", key], ["HSET", key, "f"], ["ZADD", key, "1"], ["EXISTS", key],
        ["EXISTS", key, "k"], ["EXISTS"], ["LPOP", key], ["RPOP", key], ["LPOP", key, "2"],
        ["RPUSH", key, *(f"e{i}" + "x" * 100 for i in range(130))],   # (a deque)
        ["SADD", key, draw(st.sampled_from(["a", "b", "1", "2"]))], ["SADD", key, "a", "b"],
        ["HINCRBY", key, draw(st.sampled_from(["f", "g"])), draw(st.sampled_from(TEXTS))],
        ["HSET", key, draw(st.sampled_from(["f", "g"])), draw(st.sampled_from(TEXTS))],
        ["HSET", key, "long", "x" * 100], ["HINCRBY", key, "f"],   # (a hash table)
        ["EXPIRE", key, draw(st.sampled_from(["1", "100", "0", "-5", "01", "999999999999",
                                              "1000000000000", "9223372036854775807"]))],
        ["EXPIRE", key, "100", "NX"],
        ["PEXPIREAT", key, draw(st.sampled_from(PEXPIREAT_TIMES))],
        ["PEXPIREAT", key, "9999999999999", "GT"],
        ["ZRANGEBYSCORE", key, draw(st.sampled_from(BOUNDS)), draw(st.sampled_from(BOUNDS)),
         *draw(st.sampled_from([[], ["WITHSCORES"], ["withscores"], ["LIMIT", "0", "1"]]))],
        ["HELLO", draw(st.sampled_from(["2", "3"]))],
        ["SINTER", key, *draw(st.lists(st.sampled_from(KEYS), min_size=0, max_size=3))],
        ["SADD", key, *draw(st.lists(st.sampled_from(["a", "b", "c", "1", "2", "x" * 70]),
                                     min_size=1, max_size=4))],
        ["GEOADD", key, draw(st.sampled_from(COORDS)), draw(st.sampled_from(COORDS)),
         draw(st.sampled_from(["m", "n", "x" * 70]))], ["GEOADD", key, "NX", "1", "2", "m"],
        ["GEOSEARCH", key, draw(st.sampled_from(["FROMLONLAT", "fromlonlat"])),
         draw(st.sampled_from(COORDS)), draw(st.sampled_from(COORDS)),
         draw(st.sampled_from(["BYRADIUS", "byradius", "BYBOX"])), draw(st.sampled_from(GEO_RADII)),
         draw(st.sampled_from(GEO_UNITS)), *draw(st.sampled_from(GEO_OPTIONS))],
        ["GEOSEARCH", key, "BYRADIUS", "5000", "km", "FROMLONLAT", "15", "37"],
        ["GEOSEARCH", key, "FROMMEMBER", "m", "BYRADIUS", "5000", "km", "ASC"],
        ["BITCOUNT", key], ["BITCOUNT", key, *draw(st.sampled_from(RANGES))],
        ["BITCOUNT", key, "0", "-1", "BIT"], ["BITCOUNT", key, "1"],
        ["PFADD", key, draw(st.sampled_from(["a", "b"]))], ["PFCOUNT", key], ["PFCOUNT", key, "k"],
        ["SETBIT", key, draw(st.sampled_from(["0", "7", "8", "15", "100", "-1", "01", "x"])),
         draw(st.sampled_from(["0", "1", "2", "-0"]))],
        ["MSET", key, draw(st.sampled_from(TEXTS)), draw(st.sampled_from(KEYS)), "v"],
        ["MSET", key, "v"], ["MSET", key], ["MSET", key, "v", "k"],
        ["DEL", key, "k"], ["CONFIG", "SET", "lazyfree-lazy-user-del",
                            draw(st.sampled_from(["yes", "no"]))],
        ["XADD", key, "*", draw(st.sampled_from(["f", "g"])), draw(st.sampled_from(TEXTS))],
        ["XADD", key, "*", "f", "1", draw(st.sampled_from(["g", "f"])), "x" * 70],
        ["XADD", key, "*", "f"], ["XADD", key, "MAXLEN", "~", "2", "*", "f", "v"],
        ["XADD", key, draw(st.sampled_from(["9999999999999-18446744073709551615", "5-5", "1-*",
                                             "1800000000000-1", "1800000000000-2", "0-0",
                                             "01800000000000-3", "1800000000000-03",
                                             "18446744073709551615-18446744073709551615",
                                             "18446744073709551616-0", "+1800000000001-0",
                                             "1800000000001"])), "f", "v"], ["XDEL", key, "1700000000100-0"], ["XTRIM", key, "MAXLEN", "1"],
        ["ZPOPMIN", key], ["ZPOPMAX", key], ["ZPOPMIN", key, "2"], ["ZPOPMAX", key, "0"],
        ["ZADD", key, *(x for i in range(130) for x in (str(i % 7), f"m{i}"))],   # (a ZSet)
        ["ZADD", key, "1.5", "x" * 70],
        ["XGROUP", "CREATE", key, "g", draw(st.sampled_from(["0", "$"])), "MKSTREAM"],
        ["XREADGROUP", "GROUP", "g", draw(st.sampled_from(CONSUMERS)), "STREAMS", key, ">"],
        ["XREADGROUP", "GROUP", "g", draw(st.sampled_from(CONSUMERS)), "NOACK", "STREAMS", key,
         ">"],
        ["XREADGROUP", draw(st.sampled_from(["GROUP", "group"])), draw(st.sampled_from(["g", "h"])),
         draw(st.sampled_from(CONSUMERS)),
         *draw(st.sampled_from([[], ["COUNT", "1"], ["count", "2"], ["COUNT", "0"],
                                ["COUNT", "-1"], ["COUNT", "x"], ["COUNT", "1" * 19]])),
         draw(st.sampled_from(["STREAMS", "streams"])), key, draw(st.sampled_from(HISTORY_IDS))],
        ["XACK", key, "g", draw(st.sampled_from(HISTORY_IDS[:6]))],
        ["SPOP", key], ["SPOP", key], ["SPOP", key, draw(st.sampled_from(["1", "2"]))],
        ["SADD", key, "a", "b", "c", "d", "1"],
        ["XGROUP", "DELCONSUMER", key, "g", draw(st.sampled_from(CONSUMERS))],
        ["CONFIG", "SET", draw(st.sampled_from(["stream-node-max-entries",
                                                "stream-node-max-bytes"])),
         draw(st.sampled_from(["0", "2", "3", "100", "200"]))],
    ]))


def _apply(core: ServerCore, c, reqs: list[list[str]], c_handlers: bool) -> bytes:
    seed_picks()   # (SPOP's pick: the same on both servers)
    hot.install(c_handlers)
    try:
        c.receive_data(b"".join(cmd(*r) for r in reqs))
    finally:
        hot.install(True)
    core.now_ms += 1     # (so that a PEXPIRE 1 expires by the next read)
    return c.data_to_send()


def _look(core: ServerCore, c) -> dict[str, object]:
    state = server_state(core, c)
    state["dbs"] = [sorted(db.data) for db in core.dbs[:2]]
    state["cas"] = (c.dirty_cas, [(db.id, k) for db, k, *_ in c.watched])   # (WATCH)
    state["streams"] = _streams(core)
    return state


def _streams(core: ServerCore) -> dict[tuple[int, bytes], object]:
    """Each stream as stream.py holds it: its counters and IDs, and per node the listpack's
    bytes, counters and an open node's decoded entries (the digest sees only the entries)."""
    out: dict[tuple[int, bytes], object] = {}
    for db in core.dbs[:2]:
        for key in sorted(db.data):
            v = db.data.peek(key)
            if type(v) is Stream:
                out[(db.id, key)] = (v.length, v.last_id, v.first_id, v.entries_added, [
                    (n.master, n.last, n.live, n.deleted, n.listpack(), None if n.d is None else
                     (n.d.fields, n.d.ids, n.d.fvs, n.d.flags, n.d.offs, n.d.count))
                    for n in v.nodes], {name: _group(g) for name, g in v.groups.items()})
    return out


def _group(g: Group) -> object:
    """A consumer group's state: its last ID and count, its PEL (each entry's delivery and
    consumer) and its consumers (each one's PEL in order)."""
    def nacks(pel: Pel) -> list[object]:
        return [(eid, n.delivery_time, n.delivery_count, n.consumer and n.consumer.name)
                for eid, n in pel.items()]
    return (g.last_id, g.entries_read, g.pel.ids, nacks(g.pel),
            {name: (c.seen_time, c.pel.ids, nacks(c.pel)) for name, c in g.consumers.items()})


@pytest.mark.parametrize("backlog,events", [(False, False), (True, False), (True, True)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads=st.lists(st.lists(requests(), min_size=1, max_size=6), min_size=1, max_size=25))
@example(reads=[[["SET", "n", "9998"]], [["INCR", "n"]], [["INCR", "n"]], [["GET", "n"]],
                [["LPUSH", "l", "a"], ["LPUSH", "l", "b"]], [["HSET", "h", "f", "v"]],
                [["ZADD", "z", "12", "m"], ["ZADD", "z", "12", "m"], ["ZADD", "z", "7", "m"]]])
@example(reads=[[["WATCH", "k"]], [["SET", "k", "v"], ["MULTI"], ["EXEC"]], [["GET", "k"]],
                [["WATCH", "n"], ["INCR", "n"]], [["WATCH", "l"], ["LPUSH", "l", "a"]],
                [["WATCH", "h"], ["HSET", "h", "f", "v"]], [["ZADD", "z", "1", "m"]],
                [["WATCH", "z"], ["ZADD", "z", "2", "m"], ["MULTI"], ["EXEC"]]])
@example(reads=[[["HSET", "h", "long", "x" * 100]], [["HINCRBY", "h", "f", "9998"]],
                [["HINCRBY", "h", "f", "-1"], ["HINCRBY", "h", "f", "999999999999999999"]],
                [["HSET", "h", "g", "12"], ["HINCRBY", "h", "g", "-20"], ["HGET", "h", "g"]],
                [["SADD", "s", "a"], ["SADD", "s", "a"], ["SADD", "s", "b"], ["SADD", "s", "1"]]])
@example(reads=[[["SET", "k", "ab"], ["BITCOUNT", "k", "-5", "-4"]],
                [["BITCOUNT", "k", "-100", "100"], ["BITCOUNT", "k", "1", "0"]],
                [["BITCOUNT", "k", "-1", "-3"], ["BITCOUNT", "k", "-2", "-1"], ["BITCOUNT", "k"]],
                [["SET", "k", ""], ["BITCOUNT", "k", "0", "-1"], ["BITCOUNT", "k", "1", "5"]],
                [["SET", "n", "ab"], ["SETBIT", "n", "1", "0"], ["SETBIT", "n", "15", "1"]],
                [["SETBIT", "n", "15", "1"], ["SETBIT", "n", "16", "1"], ["GET", "n"]],
                [["PFADD", "h", "a", "b"], ["PFCOUNT", "h"], ["PFCOUNT", "h"], ["PFADD", "h", "c"]],
                [["PFCOUNT", "h"], ["SETRANGE", "h", "15", "\x7f"], ["PFCOUNT", "h"]],
                [["SET", "k", "HYLLnope"], ["PFCOUNT", "k"], ["PFCOUNT", "nokey"]]])
@example(reads=[[["GEOADD", "z", "13.361389", "38.115556", "m"]],
                [["GEOADD", "z", "15.087269", "37.502669", "n"], ["GEOADD", "z", "-180", "0", "m"]],
                [["GEOADD", "z", "180", "85.05112878", "m"], ["GEOADD", "z", "180", "85.05112878", "m"]],
                [["ZSCORE", "z", "m"], ["GEOADD", "z", "1", "2", "x" * 70], ["ZCARD", "z"]],
                [["GEOADD", "z", "1.5", "-2.25", "o"], ["GEOPOS", "z", "o"]]])
@example(reads=[[["GEOADD", "z", "13.361389", "38.115556", "m"],
                 ["GEOADD", "z", "15.087269", "37.502669", "n"], ["GEOADD", "z", "15", "37", "o"]],
                [["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ASC"],
                 ["GEOSEARCH", "z", "fromlonlat", "15", "37", "byradius", "200", "KM", "DESC",
                  "COUNT", "2"],
                 ["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "COUNT",
                  "1"]],
                [["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "100", "mi"],
                 ["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "0", "m"],
                 ["GEOSEARCH", "nokey", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "m"],
                 ["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "parsec"]],
                [["ZADD", "z", "-5", "bad"],
                 ["GEOSEARCH", "z", "FROMLONLAT", "15", "37", "BYRADIUS", "20000", "km"],
                 ["SET", "k", "v"], ["GEOSEARCH", "k", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "m"]]])
@example(reads=[[["XADD", "s", "*", "f", "1"]], [["XADD", "s", "*", "f", "2"], ["XADD", "s", "*", "f", "3"]],
                [["XADD", "s", "*", "g", "x", "h", "12345678901"], ["XADD", "s", "*", "f", "-5"]],
                [["CONFIG", "SET", "stream-node-max-entries", "3"], ["XADD", "s", "*", "f", "1"]],
                [["XADD", "s", "*", "f", "1"], ["XDEL", "s", "1700000000100-0"]],
                [["XADD", "s", "9999999999999-18446744073709551615", "f", "v"],
                 ["XADD", "s", "*", "f", "v"], ["XADD", "s", "*", "f", "w"]],
                [["CONFIG", "SET", "stream-node-max-bytes", "200"], ["XADD", "s", "*", "f", "x" * 70],
                 ["XADD", "s", "*", "f", "1"], ["XADD", "s", "*", "f", "x" * 70]],
                [["XADD", "i", "1800000000000-1", "f", "v"], ["XADD", "i", "1800000000000-1", "f", "w"],
                 ["XADD", "i", "1800000000000-0", "f", "w"], ["XADD", "i", "1800000000000-2", "g", "w"],
                 ["XADD", "i", "0-0", "f", "v"], ["XADD", "i", "1800000000001-0", "f", "v"]]])
@example(reads=[[["ZADD", "z", *(x for i in range(130) for x in (str(i % 7), f"m{i}"))]],
                [["ZPOPMIN", "z"], ["ZPOPMAX", "z"], ["ZPOPMIN", "z", "2"]],
                [["ZPOPMIN", "nokey"], ["ZPOPMAX", "k"], ["ZADD", "y", "1", "a", "2", "b"]],
                [["ZPOPMIN", "y"], ["ZPOPMIN", "y"], ["ZPOPMIN", "y"], ["ZPOPMAX", "z"]]])
@example(reads=[[["SET", "k", "v"], ["EXPIRE", "k", "100"]], [["EXPIRE", "k", "7"]],
                [["PEXPIRE", "n", "1"], ["SET", "n", "1"], ["PEXPIRE", "n", "1"]],
                [["EXPIRE", "n", "5"], ["EXPIRE", "k", "0"], ["GET", "k"]]])
@example(reads=[[["SET", "k", "v"], ["PEXPIREAT", "k", str(NOW + 100)], ["SET", "n", "v"],
                 ["PEXPIREAT", "n", str(NOW + 101)]], [["GET", "n"], ["PEXPIREAT", "n", "1"]]])
@example(reads=[[["ZADD", "z", "1", "a", "2", "b", "3", "c"], ["ZRANGEBYSCORE", "z", "1", "3"],
                 ["ZRANGEBYSCORE", "z", "(1", "(3", "WITHSCORES"], ["HELLO", "3"],
                 ["ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"], ["HELLO", "2"]],
                [["ZRANGEBYSCORE", "z", "inf", "(inf"], ["ZRANGEBYSCORE", "z", "(-inf", "1"]]])
@example(reads=[[["XADD", "s", "*", "f", "1"], ["XADD", "s", "*", "f", "2"]],
                [["XGROUP", "CREATE", "s", "g", "0"], ["XADD", "s", "*", "g", "3"]],
                [["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">"]],
                [["XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", "0"]],
                [["XDEL", "s", "1700000000100-1"],
                 ["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"]],
                [["HELLO", "3"], ["XREADGROUP", "group", "g", "c1", "count", "1", "streams", "s",
                                  "1700000000100-0"]],
                [["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", "0"], ["HELLO", "2"],
                 ["XREADGROUP", "GROUP", "h", "c1", "STREAMS", "s", "0"],
                 ["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "k", "0"]]])
@example(reads=[[["SADD", "s", "a", "b", "c", "d", "e", "f"]], [["SPOP", "s"], ["SPOP", "s"]],
                [["SPOP", "s", "2"], ["SPOP", "s"], ["SPOP", "s"], ["SPOP", "s"]],
                [["SADD", "i", "1", "2", "3"], ["SPOP", "i"], ["SPOP", "k"], ["SPOP", "nokey"]]])
def test_the_c_handlers_are_the_python_handlers(backlog: bool, events: bool,
                                                reads: list[list[list[str]]]) -> None:
    a = warm_server(backlog, events)
    b = warm_server(backlog, events)
    for reqs in reads:
        assert _apply(*a, reqs, True) == _apply(*b, reqs, False), reqs
        assert _look(*a) == _look(*b)


def test_the_table_holds_the_c_handlers() -> None:
    """The server runs the C handlers; each falls back on the Python one it stands for."""
    for name, fn in hot.REFERENCE.items():
        h = COMMANDS[name.encode()].handler
        assert h is getattr(_hot, name) and h is not fn


def test_c_handlers_take_their_forms_in_c() -> None:
    """The common forms never call the Python handler (which the C one calls for all else):
    with the Python handlers made to fail, the common forms still run, and the others reach
    them."""
    core, c = warm_server(False)
    c.receive_data(b"".join(cmd(*r) for r in [["RPUSH", "l", "a", "b"],
                                              ["HSET", "h", "f", "1", "g", "2"],
                                              ["ZADD", "z", "1.5", "m"],
                                              ["RPUSH", "big", *("x" * 100 for _ in range(99)),
                                               "first", "last"],
                                              ["SADD", "s", "a"], ["HSET", "t", "long", "x" * 100],
                                              ["PFADD", "p", "a", "b", "c"], ["PFCOUNT", "p"]]))
    c.data_to_send()
    assert type(c.db.data[b"big"]).__name__ == "deque"
    with _python_handlers_fail():
        c.receive_data(b"".join(cmd(*r) for r in [
            ["SET", "k", "9"], ["INCR", "k"], ["GET", "k"], ["GET", "nokey"], ["INCR", "new"],
            ["LPUSH", "l", "x"], ["RPUSH", "l", "y"], ["HSET", "h", "f", "3"],
            ["HSET", "h", "e", "1"], ["ZADD", "z", "12", "m"], ["ZADD", "z", "3", "n"],
            ["ZADD", "z", "3", "n"], ["EXISTS", "k"], ["EXISTS", "nokey"], ["RPOP", "big"],
            ["RPOP", "big"], ["LPOP", "big"], ["LPOP", "nokey"], ["SADD", "s", "b"],
            ["SADD", "s", "b"], ["HINCRBY", "t", "n", "5"], ["HINCRBY", "t", "n", "-7"],
            ["EXPIRE", "t", "100"], ["EXPIRE", "t", "50"], ["EXPIRE", "nokey", "9"],
            ["SET", "ttl", "v"], ["EXPIRE", "ttl", "9"], ["GET", "ttl"], ["EXISTS", "ttl"],
            ["DEL", "ttl"], ["EXISTS", "ttl"],
            ["GEOADD", "z", "13.361389",
                                                            "38.115556", "p"],
            ["DEL", "s"], ["DEL", "s"], ["SET", "b", "\x0f\x7f"], ["BITCOUNT", "b"],
            ["BITCOUNT", "b", "-1", "-1"], ["BITCOUNT", "b", "-1", "-2"], ["SETBIT", "b", "0", "1"],
            ["SETBIT", "b", "0", "1"], ["SETBIT", "b", "15", "0"], ["GET", "b"], ["PFCOUNT", "p"],
            ["PFCOUNT", "p"], ["EXPIRE", "k", "9"], ["SET", "k", "w"], ["EXPIRE", "k", "9"],
            ["MSET", "k", "u", "m1", "1", "k", "x"]]))
        assert c.data_to_send() == (b"+OK\r\n:10\r\n$2\r\n10\r\n$-1\r\n:1\r\n:3\r\n:4\r\n"
                                    b":0\r\n:1\r\n:0\r\n:1\r\n:0\r\n:1\r\n:0\r\n"
                                    b"$4\r\nlast\r\n$5\r\nfirst\r\n$100\r\n" + b"x" * 100 +
                                    b"\r\n$-1\r\n:1\r\n:0\r\n:5\r\n:-2\r\n:1\r\n:1\r\n:0\r\n"
                                    b"+OK\r\n:1\r\n$1\r\nv\r\n:1\r\n:1\r\n:0\r\n:1\r\n:1\r\n:0\r\n"
                                    b"+OK\r\n:11\r\n:7\r\n:0\r\n:0\r\n:1\r\n:1\r\n"
                                    b"$2\r\n\x8f\x7e\r\n:3\r\n:3\r\n:1\r\n+OK\r\n"
                                    b":1\r\n+OK\r\n")
        assert c.db.data[b"k"] == b"x" and b"k" not in c.db.expires and c.db.data[b"m1"] == b"1"
        assert b"s" not in c.db.data
        assert c.db.data[b"t"][b"n"] == b"-2"
        assert c.db.expires[b"t"] == core.now_ms + 50_000 and b"ttl" not in c.db.expires
        for r in (["SET", "k", "v", "NX"], ["GET", "l"], ["INCR", "l"], ["LPUSH", "new", "a"],
                  ["HSET", "new2", "f", "v"], ["ZADD", "z", "1.5", "m"], ["INCR", "zero"],
                  ["EXISTS", "k", "l"], ["LPOP", "l"], ["RPOP", "big", "1"], ["SADD", "s2", "a"],
                  ["SADD", "s", "c", "d"], ["HINCRBY", "t", "n", "+1"], ["HINCRBY", "t", "long", "1"],
                  ["HINCRBY", "h", "f", "1"], ["EXPIRE", "t", "0"],
                  ["EXPIRE", "t", "1", "XX"], ["GEOADD", "z", "200", "0", "q"],
                  ["GEOADD", "nokey", "1", "2", "m"], ["GEOADD", "z", "XX", "1", "2", "m"],
                  ["DEL", "k", "l"], ["BITCOUNT", "nokey"], ["BITCOUNT", "l"], ["GET", "old"],
                  ["EXISTS", "old"], ["DEL", "old"], ["SET", "old", "w"],
                  ["MSET", "k", "v", "old", "w"], ["MSET", "k"], ["MSET", "k", "v", "k2"],
                  ["BITCOUNT", "b", "0", "1", "BYTE"], ["SETBIT", "old", "99", "1"],
                  ["SETBIT", "b", "1", "2"], ["SETBIT", "l", "0", "1"], ["PFCOUNT", "nokey"],
                  ["PFCOUNT", "p", "p"], ["PFCOUNT", "b"]):
            c.db.data[b"zero"] = b"00"    # (not a counter's canonical text)
            c.db.data[b"old"] = b"v"      # (expired now: the lookup deletes it)
            c.db.expires[b"old"] = core.now_ms
            with pytest.raises(AssertionError, match="the Python handler ran"):
                getattr(_hot, r[0].lower())(c, [a.encode() for a in r])


@settings(max_examples=300, deadline=None)
@given(lon=st.floats(-180, 180), lat=st.floats(-85.05112878, 85.05112878),
       digits=st.tuples(st.integers(0, 17), st.integers(0, 17)))
def test_geoadd_scores_are_the_python_encoding(lon: float, lat: float,
                                               digits: tuple[int, int]) -> None:
    """GEOADD's common form computes the 52-bit score in C: the same as geohash.py's
    encode_score of the coordinates the text reads as, for any position written with 0 to
    17 decimals (the Python handler made to fail: the C one runs alone)."""
    from pyrepl.keyspace import geohash as gh

    core, c = warm_server(False)
    c.receive_data(cmd("GEOADD", "g", "0", "0", "first"))
    c.data_to_send()
    texts = [f"{v:.{d}f}".encode() for v, d in zip((lon, lat), digits, strict=True)]
    if not (-180 <= float(texts[0]) <= 180 and gh.LAT_MIN <= float(texts[1]) <= gh.LAT_MAX):
        return   # (rounded out of range: the reference's error)
    with _python_handlers_fail():
        assert _hot.geoadd(c, [b"GEOADD", b"g", *texts, b"m"]) == 1
    score = gh.encode_score(float(texts[0]), float(texts[1]))
    assert c.db.data[b"g"].score(b"m") == float(score)
    assert c.propagate_argv == [b"zadd", b"g", b"%d" % score, b"m"]


def test_setbit_writes_a_string_of_its_own() -> None:
    """SETBIT's C form writes the bit into a new string: a one-byte value read from the table
    is CPython's shared one-byte bytes object, which nothing may change."""
    core, c = warm_server(False)
    for value in ("1", "a"):
        c.receive_data(cmd("SET", "one", value) + cmd("SETBIT", "one", "7", "0") +
                       cmd("SETBIT", "one", "7", "1") + cmd("SETBIT", "one", "6", "1"))
        c.data_to_send()
        for ch in "013`abc":   # (each one-byte string the bits went through: CPython's own)
            assert ch.encode().hex() == f"{ord(ch):02x}"
    assert c.db.data[b"one"] == b"c"


def test_xadd_takes_its_form_in_c() -> None:
    """XADD key * field value ... onto an existing stream's open tail node runs in C (the
    Python handler made to fail), with the fields as the node's first entry's or not, an ID
    from the clock or after a last one in the future; a new stream or node, options, an ID
    given, a client blocked on a key or another type reach the Python handler."""
    core, c = warm_server(True)
    c.receive_data(cmd("XADD", "s", "*", "f", "1") + cmd("XADD", "f", "9999999999999-5", "f", "1")
                   + cmd("SET", "str", "v"))
    c.data_to_send()
    with _python_handlers_fail():
        now = core.now_ms
        assert _hot.xadd(c, [b"XADD", b"s", b"*", b"f", b"2"]) == b"%d-1" % now
        assert c.propagate_argv == [b"XADD", b"s", b"%d-1" % now, b"f", b"2"]
        assert _hot.xadd(c, [b"XADD", b"s", b"*", b"g", b"3", b"h", b"x" * 70]) == b"%d-2" % now
        assert _hot.xadd(c, [b"XADD", b"f", b"*", b"f", b"2"]) == b"9999999999999-6"
        c.propagate_argv = None
        # an ID given as Redis writes one (a master's stream): as it came, propagated so
        assert _hot.xadd(c, [b"XADD", b"f", b"9999999999999-9", b"f", b"3"]) == \
            b"9999999999999-9"
        assert _hot.xadd(c, [b"XADD", b"f", b"10000000000000-0", b"f", b"4"]) == \
            b"10000000000000-0"
        assert c.propagate_argv is None and c.db.data[b"f"].length == 4
        s = c.db.data[b"s"]
        assert s.length == 3 and s.entries_added == 3 and s.last_id == (now << 64) | 2
        assert [fv for _, fv in s.range(0, (1 << 128) - 1)] == [
            [b"f", b"1"], [b"f", b"2"], [b"g", b"3", b"h", b"x" * 70]]
        c.receive_data(cmd("CONFIG", "SET", "stream-node-max-entries", "3"))
        c.data_to_send()
        for r in (["XADD", "s", "*", "f", "4"],                    # (a new node)
                  ["XADD", "new", "*", "f", "v"], ["XADD", "f", "MAXLEN", "1", "*", "f", "v"],
                  ["XADD", "f", "NOMKSTREAM", "*", "f", "v"], ["XADD", "f", "010000000000001-0", "f", "v"],
                  ["XADD", "f", "10000000000000-0", "f", "v"], ["XADD", "f", "10000000000001", "f", "v"],
                  ["XADD", "f", "10000000000001-*", "f", "v"],
                  ["XADD", "str", "*", "f", "v"], ["XADD", "f", "*", "f"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.xadd(c, [a.encode() for a in r])
        core.keys_waited = True
        with pytest.raises(AssertionError, match="the Python handler ran"):
            _hot.xadd(c, [b"XADD", b"f", b"*", b"f", b"v"])


def test_zpop_takes_its_form_in_c() -> None:
    """ZPOPMIN / ZPOPMAX key on a big sorted set that keeps a member, and on no key, run in C
    (the Python handler made to fail); a small one, the last member, a count or another type
    reach the Python handler."""
    core, c = warm_server(True)
    c.receive_data(cmd("ZADD", "z", *(x for i in range(130) for x in (str(i % 5), f"m{i:03}")))
                   + cmd("ZADD", "small", "1", "a", "2", "b") + cmd("SET", "str", "v"))
    c.data_to_send()
    with _python_handlers_fail():
        dirty = core.dirty
        assert _hot.zpopmin(c, [b"ZPOPMIN", b"z"]) == [b"m000", 0.0]
        assert _hot.zpopmax(c, [b"ZPOPMAX", b"z"]) == [b"m129", 4.0]
        assert _hot.zpopmin(c, [b"ZPOPMIN", b"nokey"]) == []
        assert len(c.db.data[b"z"]) == 128 and core.dirty == dirty + 2
        for r in (["ZPOPMIN", "small"], ["ZPOPMIN", "z", "1"], ["ZPOPMAX", "str"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                getattr(_hot, r[0].lower())(c, [a.encode() for a in r])


def _replica_look(n) -> dict[str, object]:
    core = n.core
    return {"digest": dataset_digest(core.dbs, core.now_ms), "dirty": core.dirty,
            "expires": [sorted(db.expires.items()) for db in core.dbs[:2]],
            "reploff": n.side.stream.master.reploff,
            "errors": core.stats.unexpected_error_replies}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.one_of(
    st.sampled_from([["SET", "k", "v"], ["SET", "n", "1"], ["DEL", "k"], ["SELECT", "1"],
                     ["SELECT", "0"], ["MULTI"], ["EXEC"], ["PEXPIREAT", "k"],
                     ["PEXPIREAT", "k", "1", "NX"]]),
    st.tuples(st.sampled_from(["k", "n", "none"]), st.sampled_from(PEXPIREAT_TIMES)).map(
        lambda t: ["PEXPIREAT", *t])), max_size=30))
def test_a_replica_applies_pexpireat_as_the_python_handler(reqs: list[list[str]]) -> None:
    """A master's stream of PEXPIREAT (what its EXPIREs propagate as: past times too, whose
    DEL comes after) applied by the C handler and by the Python one: the same dataset, TTLs,
    counters and offset."""
    nodes = [synced_node(), synced_node()]
    data = b"".join(cmd(*r) for r in reqs)
    for n, c_handlers in zip(nodes, (True, False), strict=True):
        hot.install(c_handlers)
        try:
            n.feed(data)
        finally:
            hot.install(True)
    assert _replica_look(nodes[0]) == _replica_look(nodes[1])


def test_pexpireat_takes_its_form_in_c() -> None:
    """PEXPIREAT key <ms> of a key there runs in C (the Python handler made to fail): a future
    time on a master, any time in a replica's master stream (for a key whose TTL is not past);
    a past time on a master (a DEL), options, a client's write on a writable replica reach the
    Python handler."""
    core, c = warm_server(True)
    c.receive_data(cmd("SET", "k", "v") + cmd("SET", "t", "v") + cmd("PEXPIREAT", "t", "1"))
    c.data_to_send()
    n = synced_node(("replica-read-only", ["no"]))
    n.feed(cmd("SET", "k", "v"))
    c.propagate_argv = None
    with _python_handlers_fail():
        when = core.now_ms + 5000
        assert _hot.pexpireat(c, [b"PEXPIREAT", b"k", b"%d" % when]) == 1
        assert _hot.pexpireat(c, [b"PEXPIREAT", b"nokey", b"%d" % when]) == 0
        assert c.db.expires[b"k"] == when and c.propagate_argv is None
        n.feed(cmd("PEXPIREAT", "k", "9999999999999") + cmd("PEXPIREAT", "k", "1"))
        assert n.core.dbs[0].expires[b"k"] == 1 and n.core.dbs[0].data[b"k"] == b"v"
        for r in (["PEXPIREAT", "k", "1"], ["PEXPIREAT", "k", str(when), "NX"],
                  ["PEXPIREAT", "k", "01"], ["PEXPIREAT", "k", "-1"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.pexpireat(c, [a.encode() for a in r])
        rc = n.core.connection_made()
        with pytest.raises(AssertionError, match="the Python handler ran"):
            _hot.pexpireat(rc, [b"PEXPIREAT", b"k", b"9999999999999"])


def test_transactions_take_their_form_in_c() -> None:
    """MULTI and EXEC of an unrestricted client's transaction without WATCH run in C (the
    Python handlers made to fail): the replies, the queue's calls one level deep; a nested
    MULTI, an EXEC outside MULTI, after an error at queueing, with a key watched reach the
    Python handler."""
    core, c = warm_server(True)
    c.receive_data(cmd("SET", "k", "1"))
    c.data_to_send()
    with _python_handlers_fail():
        c.receive_data(cmd("MULTI") + cmd("INCR", "k") + cmd("GET", "k") + cmd("PING") +
                       cmd("EXEC") + cmd("MULTI") + cmd("EXEC"))
        assert c.data_to_send() == (b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n"
                                    b"*3\r\n:2\r\n$1\r\n2\r\n+PONG\r\n+OK\r\n*0\r\n")
        assert core._call_depth == 0 and not c.in_multi and c.multi_queue == []
        with pytest.raises(AssertionError, match="the Python handler ran"):
            _hot.exec(c, [b"EXEC"])
        c.in_multi = True
        with pytest.raises(AssertionError, match="the Python handler ran"):
            _hot.multi(c, [b"MULTI"])
        c.multi_error = True
        with pytest.raises(AssertionError, match="the Python handler ran"):
            _hot.exec(c, [b"EXEC"])
    c.multi_error = False
    c.in_multi = False
    c.receive_data(cmd("WATCH", "k") + cmd("MULTI"))
    c.data_to_send()
    with _python_handlers_fail(), pytest.raises(AssertionError, match="the Python handler ran"):
        _hot.exec(c, [b"EXEC"])


@pytest.mark.parametrize("proto", ["2", "3"])
def test_what_a_queued_command_writes_itself_keeps_its_place_in_exec(proto: str) -> None:
    """EXEC's replies go out in one piece, cut where a queued command writes to the client
    itself (SUBSCRIBE's and UNSUBSCRIBE's frames): the bytes are the Python EXEC's, which
    appends each reply as it comes."""
    reqs = [["HELLO", proto], ["SET", "n", "5"], ["MULTI"], ["SET", "k", "v"],
            ["SUBSCRIBE", "ch", "dh"], ["GET", "k"], ["INCR", "n"], ["UNSUBSCRIBE", "ch"],
            ["GET", "nokey"], ["EXEC"]]
    a, b = warm_server(False), warm_server(False)
    got, want = _apply(*a, reqs, True), _apply(*b, reqs, False)
    assert got == want
    head = b"*3\r\n" if proto == "2" else b">3\r\n"
    sub = head + b"$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
    null = b"$-1\r\n" if proto == "2" else b"_\r\n"
    assert got.endswith(b"*6\r\n+OK\r\n" + sub + head + b"$9\r\nsubscribe\r\n$2\r\ndh\r\n"
                        b":2\r\n$1\r\nv\r\n:6\r\n" + head + b"$11\r\nunsubscribe\r\n"
                        b"$2\r\nch\r\n:1\r\n" + null)


@pytest.mark.parametrize("proto", ["2", "3"])
def test_exec_replies_past_its_stack_area_are_the_python_exec_s(proto: str) -> None:
    """EXEC writes its replies on a 512-byte area of its stack, then on the heap: a run whose
    replies cross it (a 700-byte value, 200 integers, values either side of the cut) and one
    cut by SUBSCRIBE's frames past it are the Python EXEC's bytes."""
    big = "x" * 700
    reqs = [["HELLO", proto], ["SET", "big", big], ["MULTI"], ["GET", "big"]]
    reqs += [["INCR", "n"] if i % 3 else ["GET", f"k{i}"] for i in range(200)]
    reqs += [["SUBSCRIBE", "ch"], ["GET", "big"], ["SET", "k1", "y" * 300], ["EXEC"]]
    a, b = warm_server(False), warm_server(False)
    got, want = _apply(*a, reqs, True), _apply(*b, reqs, False)
    assert got == want
    assert got.count(("$700\r\n" + big + "\r\n").encode()) == 2   # (the GETs; SET: +OK)
    assert b":133\r\n" in got   # (the last INCR)


@pytest.mark.parametrize("c_handlers", [True, False])
def test_a_transaction_that_authenticates_runs_its_rest_under_acl(c_handlers: bool) -> None:
    """An AUTH inside a transaction restricts the client for the commands after it: the C
    EXEC hands the rest of its queue to transactions.run_queue, which checks each against the
    user's rules, as the Python EXEC does (an unrestricted user's transaction skips it)."""
    core, c = warm_server(True)
    c.receive_data(cmd("ACL", "SETUSER", "u", "on", ">pw", "~k1", "+get", "+auth") +
                   cmd("SET", "k1", "v"))
    c.data_to_send()
    hot.install(c_handlers)
    try:
        c.receive_data(cmd("MULTI") + cmd("GET", "k1") + cmd("AUTH", "u", "pw") +
                       cmd("GET", "k1") + cmd("SET", "k1", "w") + cmd("EXEC"))
    finally:
        hot.install(True)
    why = b"-NOPERM ACLs rules changed between the moment the transaction was accumulated and " \
          b"the EXEC call. This command is no longer allowed for the following reason: "
    assert c.data_to_send() == (b"+OK\r\n" + b"+QUEUED\r\n" * 4 + b"*4\r\n$1\r\nv\r\n+OK\r\n"
                                b"$1\r\nv\r\n" + why +
                                b"no permission to execute the command or subcommand\r\n")
    assert c.restricted and c.db.data[b"k1"] == b"v"
    assert core.command_stat(COMMANDS[b"exec"]).failed == 1   # (the last one refused)


def test_zrangebyscore_takes_its_form_in_c() -> None:
    """ZRANGEBYSCORE key min max [WITHSCORES] with integer or infinite bounds, on either
    encoding and in either protocol, runs in C (the Python handler made to fail); other
    bounds, LIMIT, another type reach the Python handler."""
    core, c = warm_server(False)
    c.receive_data(cmd("ZADD", "z", "1", "a", "2", "b", "3", "c") + cmd("SET", "s", "v") +
                   cmd("ZADD", "big", *(x for i in range(200) for x in (str(i), f"m{i}"))))
    c.data_to_send()
    hits = core.stats.keyspace_hits
    with _python_handlers_fail():
        for key in ("z", "big"):
            assert _hot.zrangebyscore(c, [b"ZRANGEBYSCORE", key.encode(), b"(1", b"3"]) == \
                ([b"b", b"c"] if key == "z" else [b"m2", b"m3"])
            assert _hot.zrangebyscore(c, [b"ZRANGEBYSCORE", key.encode(), b"-inf", b"(2",
                                          b"WITHSCORES"]) == \
                ([b"a", 1.0] if key == "z" else [b"m0", 0.0, b"m1", 1.0])
        assert _hot.zrangebyscore(c, [b"ZRANGEBYSCORE", b"z", b"4", b"+inf"]) == []
        assert _hot.zrangebyscore(c, [b"ZRANGEBYSCORE", b"nokey", b"0", b"1"]) == []
        c.proto = 3
        assert _hot.zrangebyscore(c, [b"ZRANGEBYSCORE", b"z", b"(-inf", b"inf",
                                      b"withscores"]) == [[b"a", 1.0], [b"b", 2.0], [b"c", 3.0]]
        assert core.stats.keyspace_hits == hits + 6 and core.stats.keyspace_misses >= 1
        for r in (["ZRANGEBYSCORE", "z", "1.5", "3"], ["ZRANGEBYSCORE", "z", "0", "3", "LIMIT"],
                  ["ZRANGEBYSCORE", "s", "0", "1"], ["ZRANGEBYSCORE", "z", "0", "x"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.zrangebyscore(c, [a.encode() for a in r])


def test_geosearch_takes_its_form_in_c() -> None:
    """GEOSEARCH key FROMLONLAT lon lat BYRADIUS radius unit [ASC|DESC] [COUNT n], over either
    encoding, runs in C (the Python handler made to fail): the members in the reference's
    order, a hit or a miss counted; ANY, WITH*, the options in another order, bad numbers and
    another type reach the Python handler."""
    core, c = warm_server(False)
    places = [(12.5 + (i % 20) * 0.15, 36.6 + (i // 20) * 0.15, f"p{i}") for i in range(200)]
    c.receive_data(b"".join(cmd("GEOADD", key, str(lon), str(lat), m)
                            for key, n in (("small", 100), ("big", 200))
                            for lon, lat, m in places[:n]) + cmd("SET", "s", "v"))
    c.data_to_send()
    hits, misses = core.stats.keyspace_hits, core.stats.keyspace_misses
    forms = [["ASC", "COUNT", "10"], ["DESC"], ["COUNT", "3"], [], ["count", "5", "desc"]]
    expected = {}
    for key in ("small", "big"):
        for opts in forms:
            argv = [b"GEOSEARCH", key.encode(), b"FROMLONLAT", b"15", b"37", b"BYRADIUS",
                    b"200", b"km", *(o.encode() for o in opts)]
            expected[key, tuple(opts)] = hot.REFERENCE["geosearch"](c, argv)
    assert core.stats.keyspace_hits == hits + 2 * len(forms)
    with _python_handlers_fail():
        for (key, opts), want in expected.items():
            got = _hot.geosearch(c, [b"GEOSEARCH", key.encode(), b"FROMLONLAT", b"15", b"37",
                                     b"BYRADIUS", b"200", b"km", *(o.encode() for o in opts)])
            n = next((int(opts[i + 1]) for i, o in enumerate(opts) if o.lower() == "count"), 0)
            assert got == want and (len(got) == n if n else len(got) > 10)
        assert _hot.geosearch(c, [b"GEOSEARCH", b"nokey", b"FROMLONLAT", b"15", b"37",
                                  b"BYRADIUS", b"200", b"km"]) == []
        for r in (["GEOSEARCH", "big", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km", "ANY"],
                  ["GEOSEARCH", "big", "FROMLONLAT", "15", "37", "BYRADIUS", "2", "km",
                   "WITHDIST"],
                  ["GEOSEARCH", "big", "BYRADIUS", "200", "km", "FROMLONLAT", "15", "37"],
                  ["GEOSEARCH", "big", "FROMLONLAT", "1e1", "37", "BYRADIUS", "200", "km"],
                  ["GEOSEARCH", "big", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "yd"],
                  ["GEOSEARCH", "big", "FROMLONLAT", "15", "37", "BYRADIUS", "-1", "km"],
                  ["GEOSEARCH", "big", "FROMLONLAT", "15", "37", "BYRADIUS", "1", "km", "COUNT",
                   "0"],
                  ["GEOSEARCH", "s", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.geosearch(c, [a.encode() for a in r])
    assert core.stats.keyspace_hits == hits + 4 * len(forms)
    assert core.stats.keyspace_misses == misses + 1


def test_sinter_takes_its_form_in_c() -> None:
    """SINTER of 2 to 16 keys, sets of either encoding or missing, runs in C (the Python
    handler made to fail): the intersection, every key's hit or miss counted; a key of
    another type, or one key, reaches the Python handler."""
    core, c = warm_server(False)
    c.receive_data(cmd("SADD", "a", "x", "y", "z") + cmd("SADD", "b", "y", "z", "w") +
                   cmd("SADD", "i", "1", "2", "3") + cmd("SADD", "j", "2", "3", "4") +
                   cmd("SET", "s", "v"))
    c.data_to_send()
    hits, misses = core.stats.keyspace_hits, core.stats.keyspace_misses
    with _python_handlers_fail():
        assert sorted(_hot.sinter(c, [b"SINTER", b"a", b"b"]).items) == [b"y", b"z"]
        assert sorted(_hot.sinter(c, [b"SINTER", b"i", b"j", b"i"]).items) == [b"2", b"3"]
        assert _hot.sinter(c, [b"SINTER", b"a", b"nokey"]).items == []
        for r in (["SINTER", "a", "s"], ["SINTER", "a"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.sinter(c, [a.encode() for a in r])
    assert core.stats.keyspace_hits == hits + 6 and core.stats.keyspace_misses == misses + 1


def test_pfadd_takes_its_form_in_c() -> None:
    """PFADD into a dense HyperLogLog (with a TTL still to come, or none) runs in C (the Python
    handler made to fail): the registers grown as the Python handler grows them, the TTL
    kept, the dirty counter up by the registers that grew; a sparse one, a new key, another
    type, no element reach the Python handler."""
    servers = [warm_server(False), warm_server(False)]
    setup = b"".join(cmd("PFADD", "h", *(f"e{i}" for i in range(j, j + 500)))
                     for j in range(0, 3000, 500)) + cmd("PEXPIRE", "h", "100000") + \
        cmd("PFADD", "sparse", "a") + cmd("SET", "s", "v")
    for _, c in servers:
        c.receive_data(setup)
        c.data_to_send()
    (core, c), (ref_core, ref_c) = servers
    assert c.db.data[b"h"][4] == 0          # (dense: past hll-sparse-max-bytes)
    reqs = [[b"PFADD", b"h", b"e1"], [b"PFADD", b"h", b"new1"],
            [b"PFADD", b"h", b"new2", b"e5", b"new3"], [b"PFADD", b"h", b"new3"]]
    dirty = core.dirty
    with _python_handlers_fail():
        got = [_hot.pfadd(c, r) for r in reqs]
        for r in (["PFADD", "sparse", "b"], ["PFADD", "nokey", "a"], ["PFADD", "s", "a"],
                  ["PFADD", "h"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.pfadd(c, [a.encode() for a in r])
    ref_dirty = ref_core.dirty
    want = [hot.REFERENCE["pfadd"](ref_c, r) for r in reqs]
    assert got == want and got[0] == 0 and 1 in got
    assert c.db.data[b"h"] == ref_c.db.data[b"h"]
    assert core.dirty - dirty == ref_core.dirty - ref_dirty > 0
    assert c.db.expires[b"h"] == ref_c.db.expires[b"h"]


def test_pfadd_grows_in_place_only_a_string_nobody_else_holds() -> None:
    """PFADD's C handler grows the dense HyperLogLog's string itself when only the keyspace
    holds it (no 12 KB copy, as Redis changes its string), and a copy when anything else does:
    what that holder sees never changes, and the key gets the reference's bytes either way."""
    servers = [warm_server(False), warm_server(False)]
    setup = b"".join(cmd("PFADD", "h", *(f"e{i}" for i in range(j, j + 500)))
                     for j in range(0, 3000, 500)) + cmd("SET", "s", "v")
    for _, c in servers:
        c.receive_data(setup)
        c.data_to_send()
    (core, c), (ref_core, ref_c) = servers
    before = id(c.db.data[b"h"])
    assert _hot.pfadd(c, [b"PFADD", b"h", b"grows1", b"grows2", b"grows3"]) == 1
    assert id(c.db.data[b"h"]) == before                 # the string itself grew
    held = c.db.data[b"h"]                               # now another holder
    kept = bytes(bytearray(held))
    assert _hot.pfadd(c, [b"PFADD", b"h", b"grows4", b"grows5", b"grows6"]) == 1
    assert held == kept and c.db.data[b"h"] is not held  # a copy grew
    for r in ([b"PFADD", b"h", b"grows1", b"grows2", b"grows3"],
              [b"PFADD", b"h", b"grows4", b"grows5", b"grows6"]):
        assert hot.REFERENCE["pfadd"](ref_c, r) == 1
    assert c.db.data[b"h"] == ref_c.db.data[b"h"]
    assert core.dirty == ref_core.dirty


def test_zincrby_takes_its_form_in_c() -> None:
    """ZINCRBY by an integer on a sorted set of either encoding runs in C (the Python handler
    made to fail): the new score, the dirty counter up when it changed; a new key, another
    type, a non-integer increment, a listpack the member no longer fits reach the Python."""
    servers = [warm_server(False), warm_server(False)]
    setup = cmd("ZADD", "small", "1", "a") + cmd("ZADD", "big", *(
        x for i in range(200) for x in (str(i), f"m{i}"))) + cmd("SET", "s", "v")
    for _, c in servers:
        c.receive_data(setup)
        c.data_to_send()
    (core, c), (ref_core, ref_c) = servers
    reqs = [[b"ZINCRBY", b"small", b"2", b"a"], [b"ZINCRBY", b"small", b"-5", b"new"],
            [b"ZINCRBY", b"big", b"7", b"m3"], [b"ZINCRBY", b"big", b"0", b"m3"],
            [b"ZINCRBY", b"big", b"-0", b"fresh"], [b"ZINCRBY", b"big", b"123456789", b"m9"]]
    dirty = core.dirty
    with _python_handlers_fail():
        got = [_hot.zincrby(c, r) for r in reqs]
        for r in (["ZINCRBY", "nokey", "1", "m"], ["ZINCRBY", "s", "1", "m"],
                  ["ZINCRBY", "small", "1.5", "a"], ["ZINCRBY", "small", "1", "x" * 70]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.zincrby(c, [a.encode() for a in r])
    ref_dirty = ref_core.dirty
    want = [hot.REFERENCE["zincrby"](ref_c, r) for r in reqs]
    assert got == want == [3.0, -5.0, 10.0, 10.0, -0.0, 123456798.0]
    assert core.dirty - dirty == ref_core.dirty - ref_dirty == 5
    for key in (b"small", b"big"):
        assert list(c.db.data[key].items()) == list(ref_c.db.data[key].items())


def test_setbit_grows_and_creates_in_c() -> None:
    """SETBIT into a new key or past a string's end runs in C (the Python handler made to
    fail): zeros up to the bit's byte, as the Python handler grows the string; the replies,
    values and dirty counts are the Python handler's."""
    servers = [warm_server(False), warm_server(False)]
    for _, c in servers:
        c.receive_data(cmd("SET", "s", "ab") + cmd("SET", "e", ""))
        c.data_to_send()
    (core, c), (ref_core, ref_c) = servers
    reqs = [[b"SETBIT", b"new", b"0", b"1"], [b"SETBIT", b"new2", b"100", b"0"],
            [b"SETBIT", b"s", b"40", b"1"], [b"SETBIT", b"s", b"17", b"0"],
            [b"SETBIT", b"e", b"9", b"1"], [b"SETBIT", b"s", b"40", b"1"]]
    dirty, ref_dirty = core.dirty, ref_core.dirty
    with _python_handlers_fail():
        got = [_hot.setbit(c, r) for r in reqs]
    want = [hot.REFERENCE["setbit"](ref_c, r) for r in reqs]
    assert got == want == [0, 0, 0, 0, 0, 1]
    for key in (b"new", b"new2", b"s", b"e"):
        assert c.db.data[key] == ref_c.db.data[key]
    assert c.db.data[b"new2"] == bytes(13) and c.db.data[b"s"] == b"ab\0\0\0\x80"
    assert core.dirty - dirty == ref_core.dirty - ref_dirty == 4


def test_xreadgroup_reads_a_history_in_c() -> None:
    """A consumer's history (an ID, with or without COUNT) runs in C (the Python handler made
    to fail): each entry still held delivered once more, at the core's time, the consumer
    seen then, two keyspace hits; '>', a new consumer, a missing group or key, another type,
    BLOCK and a malformed ID reach the Python."""
    core, c = warm_server(False)
    c.receive_data(cmd("XADD", "s", "1-1", "f", "a") + cmd("XADD", "s", "1-2", "f", "b") +
                   cmd("XADD", "s", "2-0", "g", "c") + cmd("XGROUP", "CREATE", "s", "g", "0") +
                   cmd("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">") +
                   cmd("XDEL", "s", "1-2") + cmd("SET", "str", "v"))
    c.data_to_send()
    core.now_ms += 5
    hits = core.stats.keyspace_hits
    with _python_handlers_fail():
        got = _hot.xreadgroup(c, [b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"2",
                                  b"STREAMS", b"s", b"0"])
        assert got == [[b"s", [[b"1-1", [b"f", b"a"]], [b"1-2", NULL_ARRAY]]]]
        got = _hot.xreadgroup(c, [b"XREADGROUP", b"group", b"g", b"c1", b"streams", b"s",
                                  b"1-1"])
        assert got == [[b"s", [[b"1-2", NULL_ARRAY], [b"2-0", [b"g", b"c"]]]]]
        for r in (["STREAMS", "s", ">"], ["STREAMS", "s", "$"], ["STREAMS", "s", "1-x"],
                  ["COUNT", "-1", "STREAMS", "s", "0"], ["BLOCK", "0", "STREAMS", "s", "0"],
                  ["STREAMS", "nokey", "0"], ["STREAMS", "str", "0"]):
            with pytest.raises(AssertionError, match="the Python handler ran"):
                _hot.xreadgroup(c, [b"XREADGROUP", b"GROUP", b"g", b"c1", *map(str.encode, r)])
        with pytest.raises(AssertionError, match="the Python handler ran"):   # (a new one)
            _hot.xreadgroup(c, [b"XREADGROUP", b"GROUP", b"g", b"c9", b"STREAMS", b"s", b"0"])
    assert core.stats.keyspace_hits - hits == 4
    g = c.db.data[b"s"].groups[b"g"]
    assert [(n.delivery_count, n.delivery_time == core.now_ms) for n in g.pel.values()] == [
        (2, True), (1, False), (2, True)]   # (1-2 is deleted: not delivered again)
    assert g.consumers[b"c1"].seen_time == core.now_ms
