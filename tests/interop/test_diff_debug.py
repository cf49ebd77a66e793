"""DEBUG's test hooks side by side with Redis 7.0.15 (its own test suite drives the server
through them): PROTOCOL's values of every RESP type, OBJECT's report, LOG, PAUSE-CRON (no
active expiry while paused), SET-SKIP-CHECKSUM-VALIDATION (RESTORE takes a payload whose CRC is
wrong) and SET-DISABLE-DENY-SCRIPTS (a script may call a no-script command)."""

from __future__ import annotations

import time

import pytest

from tests.support.differential import Pair

TYPES = ("string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib",
         "push", "verbatim", "true", "false", "bogus")


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(servers, request):
    p = Pair(servers[0], servers[1], request.param)
    p.both("FLUSHALL")
    yield p
    p.both("DEBUG", "PAUSE-CRON", "0")
    p.both("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0")
    p.both("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")
    p.both("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0")
    p.close()


def test_protocol_answers_every_type_as_redis(pair) -> None:
    for t in TYPES:
        pair.check("DEBUG", "PROTOCOL", t)
        if t == "push" and pair.proto == 3:     # then the real reply after the push frame
            assert pair.a.read_reply() == pair.b.read_reply()


def test_protocol_values_reach_scripts_as_redis(pair) -> None:
    """Each type as a script sees it (Lua in RESP2 or RESP3) and returns it: big numbers keep
    their type, attributes are dropped (scripting.tcl's "protocol parsing" cases)."""
    pair.both("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
    for lua_resp in (2, 3):
        for t in TYPES:
            if t == "push":
                continue
            body = f"redis.setresp({lua_resp});return redis.call('debug', 'protocol', '{t}')"
            pair.check("EVAL", body, "0")
            pair.check("FUNCTION", "LOAD", "REPLACE", "#!lua name=t\nredis.register_function("
                       f"'t', function(KEYS, ARGV) {body} end)")
            pair.check("FCALL", "t", "0")
    pair.both("FUNCTION", "FLUSH")


def _fields(status: bytes) -> dict[str, str]:
    return dict(f.split(":", 1) for f in status.decode().strip("+\r\n").split(" ")[1:])


def test_object_reports_what_redis_reports(pair) -> None:
    pair.check("SET", "n", "20000")
    pair.check("SET", "s", "hello")
    pair.check("SET", "big", "x" * 100)
    pair.check("RPUSH", "l", *["x" * 100] * 200)
    pair.check("RPUSH", "small", "a", "b", "c")
    pair.check("SADD", "ints", "1", "2")
    pair.check("DEBUG", "OBJECT", "nosuchkey")
    for key in ("n", "s", "big", "l", "small", "ints"):
        a, b = pair.both("DEBUG", "OBJECT", key)
        fa, fb = _fields(a), _fields(b)
        assert fa.keys() == fb.keys(), (key, a, b)
        for name in ("refcount", "encoding", "ql_nodes", "ql_avg_node", "ql_listpack_max",
                     "ql_compressed", "ql_uncompressed_size"):
            assert fa.get(name) == fb.get(name), (key, name, a, b)
        assert int(fa["lru_seconds_idle"]) <= 1 and int(fb["lru_seconds_idle"]) <= 1
        # (pyrepl's RDB does not LZF-compress a long string, Redis's does: "big" differs)
        if key in ("n", "s", "ints"):
            assert fa["serializedlength"] == fb["serializedlength"], (key, a, b)


def test_quicklist_packed_threshold_as_redis(pair) -> None:
    """DEBUG QUICKLIST-PACKED-THRESHOLD: its errors, and elements past it each a plain node
    of their own (DEBUG OBJECT's ql_nodes; list.tcl's "plain nodes" cases)."""
    for arg in ("abc", "5gb", "-1", "1b"):
        pair.check("DEBUG", "QUICKLIST-PACKED-THRESHOLD", arg)
    try:
        pair.check("RPUSH", "pl", "a" * 500, "b", "c", "d" * 500, "e")
        pair.check("LINSERT", "pl", "AFTER", "b", "f" * 600)
        pair.check("LRANGE", "pl", "0", "-1")
        a, b = pair.both("DEBUG", "OBJECT", "pl")
        fa, fb = _fields(a), _fields(b)
        for name in ("ql_nodes", "encoding"):
            assert fa[name] == fb[name], (name, a, b)
    finally:
        pair.both("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0")


def test_log_pause_cron_skip_checksum_and_disable_deny_scripts(pair) -> None:
    pair.check("DEBUG", "LOG", "a line from the test")
    pair.check("DEBUG", "PAUSE-CRON", "1")
    pair.check("SET", "gone", "1", "PX", "50")
    time.sleep(0.3)
    pair.check("DBSIZE")                          # still there: no active expiry
    pair.check("DEBUG", "PAUSE-CRON", "0")
    pair.check("SET", "k", "v")
    payload = pair.a.call("DUMP", "k")
    pair.check("DUMP", "k")
    body = payload.split(b"\r\n", 1)[1][:-2]
    bad = body[:-1] + bytes([body[-1] ^ 0xFF])     # the CRC's last byte flipped
    pair.check("RESTORE", "k2", "0", bad)           # ERR DUMP payload version or checksum
    pair.check("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1")
    pair.check("RESTORE", "k2", "0", bad)           # taken
    pair.check("GET", "k2")
    pair.check("EVAL", "return redis.call('watch', 'x')", "0")     # not allowed from script
    pair.check("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")
    pair.check("EVAL", "return redis.pcall('client', 'id') ~= nil", "0")


def test_incr_changes_an_integer_in_place_on_both(pair) -> None:
    """incr.tcl "INCR can modify objects in-place": the value is where it was after INCR (in
    pyrepl, an integer kept in its table entry)."""
    pair.check("SET", "foo", "20000")
    pair.check("INCR", "foo")
    pair.check("OBJECT", "REFCOUNT", "foo")
    before = [_at(x) for x in pair.both("DEBUG", "OBJECT", "foo")]
    pair.check("INCR", "foo")
    after = [_at(x) for x in pair.both("DEBUG", "OBJECT", "foo")]
    assert before == after


def _at(status: bytes) -> str:
    return status.decode().split(" ")[1]


LIB = "#!lua name=reloadlib\nredis.register_function('f', function() return 'hello' end)"
LIB2 = "#!lua name=reloadlib2\nredis.register_function('f2', function() return 'two' end)"


def test_reload_options_as_redis(pair) -> None:
    """functions.tcl's DEBUG RELOAD cases: NOFLUSH alone fails on a library already there
    (Error trying to load the RDB dump); NOFLUSH MERGE replaces; NOSAVE NOFLUSH MERGE loads the
    last save into what is there; a bad option is refused."""
    pair.check("FUNCTION", "FLUSH")
    pair.check("FUNCTION", "LOAD", LIB)
    pair.check("SET", "x", "1")
    pair.check("DEBUG", "RELOAD")
    pair.check("DEBUG", "RELOAD", "NOFLUSH")
    pair.check("DEBUG", "RELOAD", "NOFLUSH", "MERGE")
    pair.check("FUNCTION", "LIST")
    pair.check("FUNCTION", "LOAD", LIB2)
    pair.check("SET", "y", "2")
    pair.check("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE")
    pair.check("FCALL", "f", "0")
    pair.check("FCALL", "f2", "0")
    pair.check("MGET", "x", "y")
    pair.check("DEBUG", "RELOAD", "BOGUS")
    pair.check("FUNCTION", "FLUSH")


def test_pfdebug_as_redis(pair) -> None:
    """PFDEBUG (hyperloglog.tcl looks inside with it): ENCODING, DECODE of the sparse
    opcodes, GETREG (a sparse HLL made dense), TODENSE, and Redis's errors."""
    pair.check("PFADD", "hll", "a", "b", "c", "foo", "bar")
    pair.check("PFDEBUG", "ENCODING", "hll")
    pair.check("PFDEBUG", "DECODE", "hll")
    pair.check("PFDEBUG", "TODENSE", "hll")
    pair.check("PFDEBUG", "ENCODING", "hll")
    pair.check("PFDEBUG", "TODENSE", "hll")
    pair.check("PFDEBUG", "DECODE", "hll")
    pair.check("PFADD", "hll2", *[f"e{i}" for i in range(50)])
    pair.check("PFDEBUG", "GETREG", "hll2")
    pair.check("PFDEBUG", "ENCODING", "hll2")
    pair.check("PFCOUNT", "hll", "hll2")
    pair.check("SET", "str", "x")
    for argv in (("PFDEBUG", "ENCODING", "nosuch"), ("PFDEBUG", "ENCODING", "str"),
                 ("PFDEBUG", "BOGUS", "hll"), ("PFDEBUG", "GETREG"),
                 ("PFDEBUG", "GETREG", "hll", "x")):
        pair.check(*argv)
