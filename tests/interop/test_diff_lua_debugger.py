"""The Lua debugger (SCRIPT DEBUG YES|SYNC|NO, what ``redis-cli --ldb`` drives), on pyrepl and
redis-server 7.0.15 side by side: whole debugging conversations compared byte for byte.

Covered: stepping, print (one variable, all locals, KEYS), eval (expression, statement, syntax
error), list / whole, breakpoints (add, list, wrong line, remove, stop at one), trace, redis
(with its logged command and reply, an unknown command, 100 arguments as Redis's "lua stack
overflow" case), maxlen and the trimming hint, redis.debug() and redis.breakpoint(), help,
unknown commands (NUL bytes included, Redis's "debug protocol parsing" case), abort, the end of
a session (<endsession>, EVAL's reply, the connection closed), a client that goes away in the
middle, EVALSHA refused, SCRIPT DEBUG in a pipeline refused; and the forked mode (YES), where
the session's writes stay in the child and the server goes on serving.
"""

from __future__ import annotations

import pytest

from tests.support.procs import side_by_side
from tests.support.resp import RawClient, encode_command

pytestmark = [pytest.mark.slow, pytest.mark.interop]

SCRIPT = ("local a = 1\nlocal t = {1,2,'x',{y={}}}\nredis.call('set','k','v')\n"
          "redis.debug('hi', t, a)\nlocal b = redis.call('get','k')\nredis.breakpoint()\n"
          "local c = string.rep('z', 300)\nreturn b")

STEPS: list[tuple[str, ...]] = [
    ("step",), ("print",), ("print", "t"), ("print", "KEYS"), ("print", "ARGV"),
    ("print", "nosuch"), ("eval", "1+1"), ("eval", "x y"), ("eval", "local q = 5"),
    ("eval", "redis.call('get','k')"), ("list",), ("list", "3", "1"), ("whole",),
    ("break", "5"), ("break",), ("break", "99"), ("break", "x"), ("break", "-4"),
    ("trace",), ("redis", "ping"), ("redis", "nosuch"), ("redis",),
    ("redis", "test", *["test"] * 99), ("maxlen",), ("maxlen", "10"), ("s",), ("s",), ("p",),
    ("bogus",), ("hello\0world",), ("\0hello",), ("help",), ("c",), ("n",), ("maxlen", "0"),
    ("s",), ("s",), ("print", "c"), ("maxlen", "70"), ("print", "c"), ("print", "t"),
]


def _conversation(port: int, steps: list[tuple[str, ...]], mode: str = "SYNC") -> list[bytes]:
    out = []
    with RawClient(port) as c:
        out.append(c.call("SCRIPT", "DEBUG", mode))
        out.append(c.call("EVAL", SCRIPT, "1", "kk", "arg"))
        for step in steps:
            out.append(c.call(*step))
        c.send("c")
        try:
            while True:     # the end: <endsession>, EVAL's reply, then the connection closes
                out.append(c.read_reply())
        except (ConnectionError, OSError, EOFError):
            out.append(b"(closed)")
    return out


@pytest.fixture(scope="module")
def servers():
    with side_by_side() as started:
        yield started


@pytest.mark.parametrize("mode", ["SYNC", "YES"])
def test_a_debugging_session_as_redis(servers, mode: str) -> None:
    seen = []
    for srv in servers:
        with RawClient(srv.port) as other:
            other.call("DEL", "k")
            got = _conversation(srv.port, STEPS, mode)
            # SYNC runs in the server: its write stays; YES in a child: it does not
            got.append(other.call("GET", "k"))
            other.call("DEL", "k")
            seen.append(got)
    for i, (a, b) in enumerate(zip(seen[0], seen[1], strict=True)):
        assert a == b, f"step {i}: pyrepl {a!r} != redis {b!r}"
    assert b"<endsession>" in b"".join(seen[0])
    assert seen[0][-1] == (b"$1\r\nv\r\n" if mode == "SYNC" else b"$-1\r\n")


def test_abort_and_a_client_that_goes_away(servers) -> None:
    seen = []
    for srv in servers:
        got = []
        with RawClient(srv.port) as c:
            got.append(c.call("SCRIPT", "DEBUG", "SYNC"))
            got.append(c.call("EVAL", "redis.call('set','ab','1')\nreturn 2", "0"))
            got.append(c.call("abort"))
            try:
                while True:
                    got.append(c.read_reply())
            except (ConnectionError, OSError, EOFError):
                got.append(b"(closed)")
        with RawClient(srv.port) as c:
            got.append(c.call("SCRIPT", "DEBUG", "SYNC"))
            got.append(c.call("EVAL", "redis.call('set','gone','1')\nreturn 2", "0"))
        # the client went away at a stop: the script runs to its end, the server goes on
        with RawClient(srv.port) as c:
            got.append(c.call("GET", "gone"))
            got.append(c.call("GET", "ab"))
            c.call("DEL", "gone", "ab")
            got.append(c.call("SCRIPT", "DEBUG", "YES"))
            got.append(c.call("EVALSHA", "a" * 40, "0"))
            got.append(c.call("SCRIPT", "DEBUG", "NO"))
            got.append(c.call("EVAL", "return 1", "0"))
            got.append(c.call("SCRIPT", "DEBUG", "MAYBE"))
            c.sock.sendall(encode_command("PING") + encode_command("SCRIPT", "DEBUG", "YES"))
            got.append(c.read_reply())
            got.append(c.read_reply())
        seen.append(got)
    assert seen[0] == seen[1]
    assert b"script aborted for user request" in seen[0][3]
    assert seen[0][7] == b"$1\r\n1\r\n"           # the abandoned script ran to its end
    assert seen[0][-1] == b"-ERR SCRIPT DEBUG must be called outside a pipeline\r\n"
