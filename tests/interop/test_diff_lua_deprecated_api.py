"""lua-enable-deprecated-api (Redis 7.0.15) and unpack's argument limit, on pyrepl and
redis-server side by side (Redis's tests/unit/scripting.tcl "Test setfenv/getfenv/newproxy
availability" and "Script check unpack with massive arguments").

With the directive off, setfenv, getfenv and newproxy are missing globals; with it on, scripts
and functions may use them. pyrepl's sandbox builds Redis's read-only globals from proxies, so
it also checks what Redis's patched Lua gives for free: the runtime's own globals never reach a
script (``getfenv(0)`` reads as ``_G``), and the sandbox's own functions keep their environment.
"""

from __future__ import annotations

import pytest

from tests.support.procs import side_by_side
from tests.support.resp import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.interop]

USES = [
    "local f = function() return 1 end setfenv(f, {}) return 0",
    "local f = function() return 1 end getfenv(f) return 0",
    "getmetatable(newproxy(true)).__gc = function() return 1 end return 0",
    "return tostring(getfenv(0) == getfenv(1))",
    "return type(getfenv(0))",
    "return tostring(getfenv(0).redis ~= nil)",
    "local f = function() return x end setfenv(f, {x = 7}) return f()",
    "setfenv(1, {}) return 1",
    "return 'after'",
    "local e = getfenv('x') return 1",
    "local e = setfenv(1, 5) return 1",
]
#: EVAL only: a function's ``_G`` in Redis is the globals table, not the library's environment
EVAL_ONLY = [
    "return tostring(getfenv(0) == _G)",
    "return tostring(getfenv() == _G)",
    "return tostring(getfenv(redis.call) == _G)",
]


def function_body(body: str) -> str:
    return ("#!lua name=dep\nredis.register_function('dep', function(KEYS, ARGV)\n"
            f"{body}\nend)")


@pytest.mark.parametrize("enabled", ["no", "yes"])
def test_deprecated_api_as_redis(enabled: str) -> None:
    seen = []
    with side_by_side("--lua-enable-deprecated-api", enabled) as servers:
        for srv in servers:
            with RawClient(srv.port) as c:
                got = [c.call("CONFIG", "GET", "lua-enable-deprecated-api"),
                       c.call("CONFIG", "SET", "lua-enable-deprecated-api", "no")]
                for body in USES:
                    got.append(c.call("EVAL", body, "0"))
                    c.call("FUNCTION", "LOAD", "REPLACE", function_body(body))
                    got.append(c.call("FCALL", "dep", "0"))
                got += [c.call("EVAL", body, "0") for body in EVAL_ONLY]
                seen.append(got)
    assert seen[0] == seen[1]
    if enabled == "yes":
        assert seen[0][2] == b":0\r\n" and seen[0][6] == b":0\r\n"
    else:
        assert b"nonexistent global variable 'setfenv'" in seen[0][2]


def test_the_sandbox_stays_closed_with_the_deprecated_api() -> None:
    with side_by_side("--lua-enable-deprecated-api", "yes") as servers:
        with RawClient(servers[0].port) as c:
            # the runtime's own globals (lupa's python module among them) stay unreachable
            got = c.call("EVAL", "return tostring(rawget(getfenv(0), 'python'))", "0")
            assert got == b"$3\r\nnil\r\n"
            # the sandbox's wrappers keep their environment
            got = c.call("EVAL", "setfenv(pairs, {}) return 1", "0")
            assert b"'setfenv' cannot change environment of given object" in got
            assert c.call("EVAL", "local n = 0 for _ in pairs({1, 2}) do n = n + 1 end "
                          "return n", "0") == b":2\r\n"


# unpack of 7999 values is Redis's limit (LUAI_MAXCSTACK); so is redis.call's of 7999 arguments
# (two of them here the command and key), the C function pyrepl/scripting/_luacall.c makes it
# (lupa's call of a Python function, the plain-Python reference, takes 7997).
UNPACKS = [
    "local a = {} for i=1,7999 do a[i] = 1 end return select('#', unpack(a))",
    "local a = {} for i=1,8000 do a[i] = 1 end return select('#', unpack(a))",
    "local a = {} for i=1,7999 do a[i] = 1 end return select('#', unpack(a, 1, 7999))",
    "local a = {} for i=1,7997 do a[i] = 1 end return select('#', unpack(a, 1))",
    "local a = {} for i=1,7995 do a[i] = 1 end return redis.call('lpush', 'l', unpack(a))",
    "local a = {} for i=1,7997 do a[i] = 1 end return redis.call('lpush', 'm', unpack(a))",
]


def test_unpack_limits_as_redis() -> None:
    seen = []
    with side_by_side() as servers:
        for srv in servers:
            with RawClient(srv.port) as c:
                got = []
                for body in UNPACKS:
                    got.append(c.call("EVAL", body, "0"))
                    c.call("FUNCTION", "LOAD", "REPLACE", function_body(body))
                    got.append(c.call("FCALL", "dep", "0"))
                seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][0] == b":7999\r\n"
    assert b"too many results to unpack" in seen[0][2]
