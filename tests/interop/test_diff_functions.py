"""Redis 7 functions, differential against redis-server 7.0.15 (RESP2 and RESP3).

Ports the single-connection cases of Redis's tests/unit/functions.tcl: FUNCTION LOAD's
metadata and registration errors (the load-time sandbox, named arguments, flags, name rules,
the 500 ms load timeout), FCALL / FCALL_RO (numkeys errors, the callback's keys and args,
write refusals, error suffixes ``script: <name>, on @user_function:<line>.``), FUNCTION LIST /
STATS / DELETE / FLUSH / HELP, FUNCTION DUMP / RESTORE across the two servers (each restores
the other's payload) with the FLUSH / APPEND / REPLACE policies and their collisions, INFO
memory's function counts, and what the FUNCTION commands and FCALL propagate to a replica.
FUNCTION LIST's order is Redis's dict order (random per process): the checks list one library.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.differential import Pair, check_propagation
from tests.support.resp import parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def _sorted_functions(v: object) -> object:
    """A FUNCTION LIST reply with each library's functions in name order (Redis lists them in
    its dict's order, random per process)."""
    if not isinstance(v, list):
        return v
    out = []
    for lib in v:
        items = list(lib.items()) if isinstance(lib, dict) else list(zip(lib[0::2], lib[1::2], strict=True))
        out.append([(k, sorted(x, key=repr) if k == b"functions" else x) for k, x in items])
    return out


def check_list(p, *args: str) -> None:
    """FUNCTION LIST on both servers: equal up to the order of a library's functions."""
    ra, rb = p.both("FUNCTION", "LIST", *args)
    va, vb = _sorted_functions(parse_reply(ra)), _sorted_functions(parse_reply(rb))
    assert va == vb, f"FUNCTION LIST {args}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"
    assert (ra[:1] == b"-") == (rb[:1] == b"-")


@pytest.fixture(params=[2, 3])
def p(pairs, request) -> Iterator[Pair]:
    """The module's pair in RESP2, then in RESP3 (the test runs in each), with no function
    loaded before the test and none left after it (FUNCTION FLUSH, compared)."""
    pair = pairs[request.param]
    pair.check("FUNCTION", "FLUSH")
    yield pair
    pair.check("FUNCTION", "FLUSH")


def code(lib: str, body: str) -> str:
    return f"#!lua name={lib}\n{body}"


def simple(lib: str, fn: str, ret: str) -> str:
    return code(lib, f"redis.register_function('{fn}', function(keys, args) {ret} end)")


LOAD_ERRORS = [
    "no shebang",
    "#!lua name=lib",
    "#!lua\nredis.register_function('f', function() return 1 end)",
    "#!lua name=a name=b\nredis.register_function('f', function() return 1 end)",
    "#!lua name=x foo=bar\nredis.register_function('f', function() return 1 end)",
    "#! name=x\nredis.register_function('f', function() return 1 end)",
    "#!bad_engine name=x\nredis.register_function('f', function() return 1 end)",
    "#!lua name=bad\0name\nredis.register_function('f', function() return 1 end)",
    "#!lua name=bad-name\nredis.register_function('f', function() return 1 end)",
    "#!lua name=\"unbalanced\nredis.register_function('f', function() return 1 end)",
    code("lib", "bad script"),
    code("lib", "return 1"),
    code("lib", "return redis.call('ping')"),
    code("lib", "return redis.pcall('ping')"),
    code("lib", "return redis.setresp(3)"),
    code("lib", "return redis.set_repl(redis.REPL_NONE)"),
    code("lib", "return math.random()"),
    code("lib", "return string.len('x')"),
    code("lib", "local x = KEYS"),
    code("lib", "local g = _G"),
    code("lib", "mt = getmetatable(_G)"),
    code("lib", "a = 1"),
    code("lib", "error('boom')"),
    code("lib", "redis.math.random()"),
    code("lib", "redis.redis.call('ping')"),
    code("lib", "redis.register_function()"),
    code("lib", "redis.register_function('f1')"),
    code("lib", "redis.register_function('f1', function() return 1 end, {}, 'd', 'x')"),
    code("lib", "redis.register_function(nil, function() return 1 end)"),
    code("lib", "redis.register_function('f1', 'not a function')"),
    code("lib", "redis.register_function('test\\0test', function() return 1 end)"),
    code("lib", "redis.register_function('', function() return 1 end)"),
    code("lib", "redis.register_function('a-b', function() return 1 end)"),
    code("lib", "redis.register_function('f1', function() return 1 end)\n"
                "redis.register_function('f1', function() return 2 end)"),
    code("lib", "redis.register_function{function_name=function() return 1 end, "
                "callback=function() return 1 end}"),
    code("lib", "redis.register_function{function_name='f1', callback='bad'}"),
    code("lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
                "description=function() return 1 end}"),
    code("lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
                "some_unknown='unknown'}"),
    code("lib", "redis.register_function{callback=function() return 1 end}"),
    code("lib", "redis.register_function{function_name='f1'}"),
    code("lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
                "flags='bad flags type'}"),
    code("lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
                "flags={function() return 1 end}}"),
    code("lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
                "flags={'unknown'}}"),
    code("lib", "redis.register_function('x')"),
    code("lib", "redis.register_function({1, 2})"),
    code("lib", "redis.log(redis.LOG_WARNING, 'loading')\nreturn redis.REDIS_VERSION .. 1"),
]


def test_load_errors_like_redis(p) -> None:
    for body in LOAD_ERRORS:
        p.check("FUNCTION", "LOAD", body)
    p.check("FUNCTION", "LOAD", "REPLACE", "extra", simple("lib", "f", "return 1"))
    p.check("FUNCTION", "LOAD", "foo", "bar", simple("lib", "f", "return 1"))
    p.check("FUNCTION", "LIST")
    p.check("FUNCTION", "STATS")


def test_load_timeout_like_redis(pair) -> None:
    pair.check("FUNCTION", "FLUSH")
    pair.check("FUNCTION", "LOAD", code("lib", "local a = 1 while 1 do a = a + 1 end"))
    pair.check("FUNCTION", "LIST")


def test_load_call_and_list_like_redis(p) -> None:
    p.flushall()
    p.check("FUNCTION", "LOAD", simple("test", "test", "return 'hello'"))
    p.check("FCALL", "test", "0")
    p.check("FCALL", "TEST", "0")
    p.check("FUNCTION", "LOAD", simple("test", "test", "return 'hello1'"))
    p.check("FUNCTION", "LOAD", "replace", simple("test", "test", "bad script"))
    p.check("FCALL", "test", "0")
    p.check("FUNCTION", "LOAD", "REPLACE", simple("test", "test", "return 'hello1'"))
    p.check("FCALL", "test", "0")
    p.check("FUNCTION", "LIST")
    p.check("FUNCTION", "LIST", "WITHCODE")
    p.check("FUNCTION", "LIST", "withcode", "libraryname", "t*")
    p.check("FUNCTION", "LIST", "LIBRARYNAME", "T?ST")
    p.check("FUNCTION", "LIST", "LIBRARYNAME", "nomatch*")
    p.check("FUNCTION", "LIST", "bad_argument")
    p.check("FUNCTION", "LIST", "libraryname")
    p.check("FUNCTION", "LIST", "withcode", "withcode")
    p.check("FUNCTION", "LIST", "withcode", "libraryname", "foo", "libraryname", "foo")
    p.check("FUNCTION", "LIST", "X\r\n+INJECTED")
    p.check("FCALL", "test", "bad_arg")
    p.check("FCALL", "test", "10", "key1")
    p.check("FCALL", "test", "-1", "key1")
    p.check("FCALL", "nosuch", "0")
    p.check("FCALL", "nosuch", "bad_arg")
    p.check("FUNCTION", "DELETE", "test1")
    p.check("FUNCTION", "DELETE", "TEST")
    p.check("FUNCTION", "KILL")
    p.check("FUNCTION", "bad_subcommand")
    p.check("FUNCTION", "HELP")
    p.check("FUNCTION", "FLUSH", "bad_arg")
    p.check("FUNCTION", "FLUSH", "sync", "extra_arg")
    p.check("FUNCTION", "FLUSH", "ASYNC")
    p.check("FUNCTION", "FLUSH", "sync")
    p.check("FUNCTION", "RESTORE", "arg1", "args2", "arg3")
    p.check("FUNCTION", "RESTORE", "bad_payload")
    p.check("FUNCTION", "DELETE", "test")
    p.check("FCALL", "test", "0")
    p.check("FUNCTION", "LIST")
    p.check("FUNCTION", "STATS")
    p.check("FUNCTION", "LOAD", "#!lua name=\"foo\"\n"
                                "redis.register_function('foo', function() return 1 end)")
    p.check("FUNCTION", "LIST")


CALLS: list[str | tuple[str, str, tuple[str, ...]]] = [
    # a library body, whose function f is called with FCALL f 0; or (library body,
    # function name, FCALL arguments after the name)
    ("redis.register_function('f', function(keys, args) return {keys, args} end)", "f",
     ("2", "a", "b", "c")),
    ("redis.register_function('f', function(keys, args) return {#keys, #args} end)", "f",
     ("0", "x", "y")),
    "redis.register_function('f', function(keys, args) return KEYS end)",
    "redis.register_function('f', function(keys, args) return ARGV end)",
    "redis.register_function('f', function() return redis.call('nosuch') end)",
    "redis.register_function('f', function() return redis.pcall('nosuch') end)",
    "redis.register_function('f', function() error('x') end)",
    "redis.register_function('f', function() error({err='CUSTOM boom'}) end)",
    "redis.register_function('f', function() return {err='My Error'} end)",
    "redis.register_function('f', function() return redis.error_reply('E x') end)",
    "redis.register_function('f', function() return redis.status_reply('FINE') end)",
    "redis.register_function('f', function() return {1, 2.5, 'x', true, false, {ok='y'}} end)",
    "redis.register_function('f', function() redis.setresp(3); return {map={a=1}, double=1.5} end)",
    "redis.register_function('f', function() redis.setresp(3); return {double=1.5} end)",
    "redis.register_function('f', function() redis.setresp(3); return true end)",
    "redis.register_function('f', function() return redis.call('ping') end)",
    ("local function ping() return redis.call('ping') end\n"
     "redis.register_function('f1', function(keys, args) return ping() end)", "f1", ("0",)),
    ("local function add1(a) return a + 1 end\n"
     "redis.register_function('f1', function() return add1(1) end)\n"
     "redis.register_function('f2', function() return add1(2) end)", "f2", ("0",)),
    "redis.register_function('f', function() return redis.call('set', 'x', '1') end)",
    ("redis.register_function{function_name='f', callback=function() "
     "return redis.call('set', 'x', '1') end, flags={'no-writes'}}"),
    ("redis.register_function{function_name='f', callback=function() "
     "return redis.call('get', 'x') end, flags={'no-writes'}}"),
    ("redis.register_function('f', function(keys, args) "
     "return redis.call('set', keys[1], args[1]) end)", "f", ("1", "x", "foo")),
    "redis.register_function('f', function() mt = getmetatable(_G) end)",
    ("redis.register_function('f', function() redis.register_function('g', function() "
     "return 2 end) return 1 end)"),
    ("local lib = redis\nlib.register_function('f', function() lib.redis = redis "
     "return {ok='OK'} end)"),
    ("local lib = redis\nlib.register_function('f', function() lib.register_function('g', "
     "function() return 1 end) end)"),
    "redis.register_function('f', function() return type(redis.breakpoint) end)",
    ("redis.register_function('f', function() return {type(cjson), type(bit), type(struct), "
     "type(cmsgpack), type(math.floor), type(string.format)} end)"),
    ("local version = redis.REDIS_VERSION_NUM\n"
     "redis.register_function{function_name='f', callback=function() "
     "return string.format('%s.%s.%s', bit.band(bit.rshift(version, 16), 0x000000ff), "
     "bit.band(bit.rshift(version, 8), 0x000000ff), bit.band(version, 0x000000ff)) .. "
     "' ' .. redis.REDIS_VERSION end}"),
    "redis.register_function('f', function() return redis.call('select', '9') end)",
    ("redis.register_function('f', function() math.randomseed(10); "
     "return tostring(math.random()) end)"),
    "redis.register_function('f', function() return redis.call('fcall', 'f', 0) end)",
    "redis.register_function('f', function() return redis.call('eval', 'return 1', 0) end)",
]


def test_fcall_replies_like_redis(p) -> None:
    p.flushall()
    for i, call in enumerate(CALLS):
        body, fn, args = (call, "f", ("0",)) if isinstance(call, str) else call
        p.check("FUNCTION", "FLUSH")
        lib = f"lib{i}"
        p.check("FUNCTION", "LOAD", code(lib, body))
        p.check("FCALL", fn, *args)
        p.check("FCALL_RO", fn, *args)
        check_list(p, "WITHCODE")
    p.check("GET", "x")


def test_flags_and_descriptions_listed_like_redis(p) -> None:
    p.check("FUNCTION", "LOAD", code("lib", "redis.register_function{function_name='f1', "
                                            "callback=function() return 'hello' end, "
                                            "description='some desc'}"))
    p.check("FUNCTION", "LIST")
    p.check("FUNCTION", "LOAD", "REPLACE", code(
        "lib", "redis.register_function{function_name='f1', callback=function() return 1 end, "
               "flags={'ALLOW-CROSS-SLOT-KEYS', 'no-writes', 'allow-oom', 'allow-stale', "
               "'no-cluster'}, description=42}"))
    p.check("FUNCTION", "LIST", "WITHCODE")
    p.check("FCALL_RO", "f1", "1", "k")
    p.check("FUNCTION", "STATS")


def test_function_collisions_like_redis(p) -> None:
    p.check("FUNCTION", "LOAD", code("lib1", "local function add1(a) return a + 1 end\n"
                                             "redis.register_function('f1', function() "
                                             "return add1(1) end)\n"
                                             "redis.register_function('f2', function() "
                                             "return add1(2) end)"))
    p.check("FUNCTION", "LOAD", "replace", code("lib1", "redis.register_function('f1', "
                                                        "function() return 5 end)\n"
                                                        "redis.register_function('f2', "
                                                        "'not a function')"))
    p.check("FCALL", "f1", "0")
    p.check("FCALL", "f2", "0")
    p.check("FUNCTION", "LOAD", "replace", code("lib2", "redis.register_function('f1', "
                                                        "function() return 1 end)"))
    p.check("FUNCTION", "LOAD", "replace", code("lib2", "redis.register_function('F1', "
                                                        "function() return 1 end)"))
    p.check("FUNCTION", "STATS")
    p.check("FUNCTION", "LOAD", code("lib1", "redis.register_function('f1', function() "
                                             "return 1 end)"))
    p.check("FUNCTION", "STATS")
    p.check("FUNCTION", "DELETE", "lib1")
    p.check("FUNCTION", "STATS")
    check_list(p)


def _list(client, *args: str) -> object:
    return _sorted_functions(parse_reply(client.call("FUNCTION", "LIST", "WITHCODE", *args)))


def test_dump_restore_across_servers(pair) -> None:
    """Each server restores the other's FUNCTION DUMP; policies and collisions as Redis."""
    a, b = pair.a, pair.b
    pair.check("FUNCTION", "FLUSH")
    lib1 = code("lib1", "local function add1(a) return a + 1 end\n"
                        "redis.register_function('f1', function() return add1(1) end)\n"
                        "redis.register_function('f2', function() return add1(2) end)\n"
                        "redis.register_function{function_name='f3', callback=function() "
                        "return add1(3) end, flags={'no-writes'}, description='three'}")
    pair.check("FUNCTION", "LOAD", lib1)
    dump_a = parse_reply(a.call("FUNCTION", "DUMP"))
    dump_b = parse_reply(b.call("FUNCTION", "DUMP"))
    assert isinstance(dump_a, bytes) and isinstance(dump_b, bytes)
    for payload in (dump_a, dump_b):     # both payloads, on both servers
        pair.check("FUNCTION", "FLUSH")
        pair.check("FUNCTION", "RESTORE", payload)
        check_list(pair, "WITHCODE")
        pair.check("FCALL", "f3", "0")
        pair.check("FUNCTION", "RESTORE", payload)
        pair.check("FUNCTION", "RESTORE", payload, "APPEND")
        pair.check("FUNCTION", "RESTORE", payload, "REPLACE")
        pair.check("FUNCTION", "RESTORE", payload, "bad_policy")
        pair.check("FUNCTION", "FLUSH")
        pair.check("FUNCTION", "LOAD", code("lib1", "redis.register_function('f6', "
                                                    "function() return 7 end)"))
        pair.check("FUNCTION", "LOAD", code("lib2", "redis.register_function('f3', "
                                                    "function() return 4 end)"))
        pair.check("FUNCTION", "RESTORE", payload)
        pair.check("FUNCTION", "RESTORE", payload, "replace")
        pair.check("FCALL", "f6", "0")
        pair.check("FCALL", "f3", "0")
        pair.check("FUNCTION", "RESTORE", payload, "FLUSH")
        check_list(pair, "WITHCODE")
        pair.check("FCALL", "f3", "0")
        assert _list(a) == _list(b)
    # payload corruptions
    pair.check("FUNCTION", "RESTORE", dump_b[:-1] + bytes([dump_b[-1] ^ 1]))
    pair.check("FUNCTION", "RESTORE", dump_b[:5])
    empty = parse_reply(a.call("FUNCTION", "DUMP"))
    pair.check("FUNCTION", "FLUSH")
    assert parse_reply(a.call("FUNCTION", "DUMP")) == parse_reply(b.call("FUNCTION", "DUMP"))
    pair.check("FUNCTION", "RESTORE", empty)
    pair.check("FUNCTION", "FLUSH")


def test_info_memory_counts_functions(pair) -> None:
    pair.check("FUNCTION", "FLUSH")

    def fields(client) -> dict[bytes, bytes]:
        raw = parse_reply(client.call("INFO", "memory"))
        out = {}
        for line in raw.split(b"\r\n"):
            k, _, v = line.partition(b":")
            if k in (b"number_of_functions", b"number_of_libraries",
                     b"used_memory_functions"):
                out[k] = v
        return out

    assert fields(pair.a) == fields(pair.b)
    pair.check("FUNCTION", "LOAD", simple("t", "f", "return 1"))
    assert fields(pair.a) == fields(pair.b)
    pair.check("FUNCTION", "LOAD", code("t2", "redis.register_function('f2', function() "
                                              "return 1 end) redis.register_function{"
                                              "function_name='f3', callback=function() "
                                              "return 1 end, description='desc'}"))
    got = fields(pair.a)
    assert got == fields(pair.b)
    assert got[b"number_of_functions"] == b"3" and got[b"number_of_libraries"] == b"2"
    pair.check("FUNCTION", "FLUSH")


def test_propagation_of_functions(tapped_redis) -> None:
    lib = simple("lib", "w", "redis.call('set', keys[1], args[1]); "
                             "return redis.call('incr', 'cnt')")
    ro = code("rolib", "redis.register_function{function_name='r', callback=function(keys) "
                       "return redis.call('get', keys[1]) end, flags={'no-writes'}}")
    payload = bytes.fromhex("f5") + bytes([len(simple("pl", "p", "return 1"))]) + \
        simple("pl", "p", "return 1").encode() + b"\x0a\x00"
    from pyrepl.rdb.crc64 import crc64
    payload += crc64(payload).to_bytes(8, "little")
    check_propagation(tapped_redis.port, [
        ("FUNCTION", "FLUSH"),
        ("FUNCTION", "LOAD", lib),
        ("FUNCTION", "LOAD", lib),
        ("FUNCTION", "LOAD", "REPLACE", lib),
        ("FUNCTION", "LOAD", ro),
        ("FCALL", "w", "1", "k", "v"),
        ("FCALL", "w", "1", "k", "v2"),
        ("FCALL_RO", "r", "1", "k"),
        ("FCALL", "r", "1", "k"),
        ("FCALL_RO", "w", "1", "k", "v"),
        ("FCALL", "nosuch", "0"),
        ("FUNCTION", "DELETE", "rolib"),
        ("FUNCTION", "DELETE", "rolib"),
        ("FUNCTION", "RESTORE", payload),
        ("FUNCTION", "RESTORE", payload, "REPLACE"),
        ("FCALL", "p", "0"),
        ("FUNCTION", "FLUSH", "ASYNC"),
        ("FUNCTION", "FLUSH"),
        ("FUNCTION", "LIST"),
    ])
