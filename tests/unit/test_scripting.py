"""Lua scripting, sans-io: EVAL & co driven through a ServerCore in-process (real Lua 5.1)."""

from __future__ import annotations

import pytest

from pyrepl.core.server import ServerCore
from pyrepl.scripting.cache import COMPAT, NO_WRITES, ShebangError, parse_shebang
from pyrepl.scripting.rand import Lrand48
from tests.support.cores import make_core, run, step_clock


@pytest.fixture
def core() -> ServerCore:
    return make_core()


def test_conversions_both_ways(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "EVAL", "return {1,2,3,'ciao',{1,2}}", "0") == \
        b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n"
    assert run(c, "EVAL", "return 100.5", "0") == b":100\r\n"
    assert run(c, "EVAL", "return {ok='fine'}", "0") == b"+fine\r\n"
    assert run(c, "EVAL", "return false", "0") == b"$-1\r\n"
    assert run(c, "EVAL", "redis.call('set','x','0'); local f = redis.pcall('incr','x'); "
                          "return {type(f), f}", "0") == b"*2\r\n$6\r\nnumber\r\n:1\r\n"
    assert run(c, "EVAL", "return redis.pcall('get','missing') == false", "0") == b":1\r\n"
    run(c, "HSET", "h", "f", "v")
    assert run(c, "EVAL", "redis.setresp(3); return redis.call('hgetall','h')", "0") == \
        b"*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert run(c, "HELLO", "3").startswith(b"%")
    assert run(c, "EVAL", "redis.setresp(3); return redis.call('hgetall','h')", "0") == \
        b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert run(c, "EVAL", "redis.setresp(3); return false", "0") == b"#f\r\n"


def test_error_texts(core: ServerCore) -> None:
    c = core.connection_made()
    sha = "bbfcd1ececc90deec823f7fb730e4bfb2a4ba625"
    assert run(c, "EVAL", "return a", "0") == (
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'a' "
        b"script: " + sha.encode() + b", on @user_script:1.\r\n")
    assert b"Attempt to modify a readonly table" in run(c, "EVAL", "a=10", "0")
    assert b"Unknown Redis command called from script" in run(c, "EVAL", "redis.call('x')", "0")
    assert run(c, "EVALSHA", "nope", "0") == b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
    assert run(c, "EVAL", "return 1", "2", "a") == \
        b"-ERR Number of keys can't be greater than number of args\r\n"
    assert run(c, "EVAL", "return 1", "-1") == b"-ERR Number of keys can't be negative\r\n"
    assert run(c, "EVAL_RO", "return redis.call('del','k')", "0").startswith(
        b"-ERR Write commands are not allowed from read-only scripts. script: ")
    assert run(c, "EVAL", "return redis.call('blpop','l',0)", "0").startswith(
        b"-ERR This Redis command is not allowed from script script: ")
    assert run(c, "EVAL", "return loadstring(string.dump(function() end))()", "0").startswith(
        b"-ERR user_script:1: attempt to call a nil value")
    for code in ("print('x')", "dofile('f')", "loadfile('f')", "return os.time()"):
        assert b"nonexistent global variable" in run(c, "EVAL", code, "0")


def test_script_cache_and_flush(core: ServerCore) -> None:
    c = core.connection_made()
    sha = run(c, "SCRIPT", "LOAD", "return 'loaded'")
    assert sha == b"$40\r\nb534286061d4b9e4026607613b95c06c06015ae8\r\n"
    assert run(c, "EVALSHA", "B534286061D4B9E4026607613B95C06C06015AE8", "0") == \
        b"$6\r\nloaded\r\n"
    assert run(c, "SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", "ab") == \
        b"*2\r\n:1\r\n:0\r\n"
    assert run(c, "SCRIPT", "FLUSH") == b"+OK\r\n"
    assert run(c, "SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8") == \
        b"*1\r\n:0\r\n"
    assert run(c, "SCRIPT", "FLUSH", "BAD") == \
        b"-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"
    assert run(c, "SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    assert len(core.scripts.cache) == 0


def test_effects_are_propagated_in_multi_exec(core: ServerCore) -> None:
    fed: list[list[bytes]] = []
    core.repl_feed = lambda db, argv, data=None: fed.append(list(argv))
    core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
    c = core.connection_made()
    run(c, "EVAL", "redis.call('set','a','1'); redis.call('incrby','a','5')", "0")
    assert fed == [[b"MULTI"], [b"set", b"a", b"1"], [b"incrby", b"a", b"5"], [b"EXEC"]]
    fed.clear()
    run(c, "EVAL", "return redis.call('get','a')", "0")
    assert fed == []
    run(c, "EVAL", "redis.set_repl(redis.REPL_NONE); redis.call('set','b','1')", "0")
    assert fed == []
    run(c, "EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "k")
    assert fed == [[b"set", b"k", b"v"]]


def test_select_in_script_leaves_caller_db(core: ServerCore) -> None:
    c = core.connection_made()
    run(c, "EVAL", "redis.call('select','3'); redis.call('set','k','v')", "0")
    assert run(c, "GET", "k") == b"$-1\r\n"
    run(c, "SELECT", "3")
    assert run(c, "GET", "k") == b"$1\r\nv\r\n"


def test_libraries(core: ServerCore) -> None:
    c = core.connection_made()
    assert run(c, "EVAL", "return cjson.encode({1,2,{a='x/y'}})", "0") == \
        b'$18\r\n[1,2,{"a":"x\\/y"}]\r\n'
    assert run(c, "EVAL", "return cmsgpack.pack(0.1)", "0") == \
        b"$9\r\n\xcb\x3f\xb9\x99\x99\x99\x99\x99\x9a\r\n"
    assert run(c, "EVAL", "return bit.tohex(65535, -2147483648)", "0") == b"$8\r\n0000FFFF\r\n"
    assert run(c, "EVAL", "return {struct.unpack('>I2', struct.pack('>I2', 258))}", "0") == \
        b"*2\r\n:258\r\n:3\r\n"


def test_shebang_flags() -> None:
    assert parse_shebang(b"return 1") == (COMPAT, 0)
    assert parse_shebang(b"#!lua flags=no-writes\nreturn 1") == (NO_WRITES, 21)
    for bad in (b"#!lua", b"#!lua flags=nope\n", b"#!py\n", b"#!lua x=1\n"):
        with pytest.raises(ShebangError):
            parse_shebang(bad)


def test_lrand48_matches_redis_sequence() -> None:
    r = Lrand48()
    r.seed(10)
    assert f"{r.random():.14g}" == "0.87885112309775"   # redis-server 7.0.15's answer


def test_busy_script_can_be_killed_through_the_hook(core: ServerCore) -> None:
    """The count hook: past busy-reply-threshold the script is timed out, the host serves
    events (here: a SCRIPT KILL from another client), and the script stops."""
    clock = step_clock(core, 10**7)  # 10 ms per hook: the script is busy after 100 ms
    other = core.connection_made()

    served: list[object] = []

    class Host(type(core.host)):  # type: ignore[misc]
        def process_events_while_blocked(self, protected: object) -> None:
            assert core.scripts.busy and protected is c
            if not served:          # what another client sent meanwhile: one -BUSY, a kill
                served.append(protected)
                other.receive_data(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
                                   b"*2\r\n$6\r\nSCRIPT\r\n$4\r\nKILL\r\n")

    core.host = Host()
    run(other, "CONFIG", "SET", "busy-reply-threshold", "100")
    other.data_to_send()
    c = core.connection_made()
    clock[0] = 0
    reply = run(c, "EVAL", "local i = 0 while true do i = i + 1 end", "0")
    assert reply.startswith(b"-ERR Script killed by user with SCRIPT KILL... script: ")
    assert other.data_to_send() == (b"-BUSY Redis is busy running a script. You can only call "
                                    b"SCRIPT KILL or SHUTDOWN NOSAVE.\r\n+OK\r\n")
    assert not core.scripts.busy and core.busy is None and not core.gated
    assert run(other, "GET", "k") == b"$-1\r\n"


def test_the_lua_state_does_not_grow_with_runs(core: ServerCore) -> None:
    """Redis's "EVAL does not leak in the Lua stack": after SCRIPT FLUSH and thousands of
    runs used_memory_lua stays under 100 KB (a fresh state is collected once built, and a run
    in fifty takes a collector step, as luaCallFunction)."""
    c = core.connection_made()
    run(c, "SCRIPT", "FLUSH")
    fresh = int(run(c, "INFO", "memory").split(b"used_memory_lua:")[1].split(b"\r\n")[0])
    for _ in range(3000):
        run(c, "EVAL", "return redis.call('incr', KEYS[1])", "1", "x")
    after = int(run(c, "INFO", "memory").split(b"used_memory_lua:")[1].split(b"\r\n")[0])
    assert fresh < 100 * 1024 and after < 100 * 1024, (fresh, after)
    assert run(c, "GET", "x") == b"$4\r\n3000\r\n"


def test_the_bootstrap_loads_stripped() -> None:
    """pyrepl/scripting/luadump.py: a stripped chunk runs as the original, keeps its source
    name, loses its line numbers; a chunk of another format is refused."""
    import lupa.lua51 as lua51

    from pyrepl.scripting.luadump import DumpError, strip

    rt = lua51.LuaRuntime(encoding=None)
    f = rt.eval("loadstring")(b"local t = {}\nfor i = 1, 3 do t[i] = i * 2 end\n"
                              b"local function g(x) return x + #t end\nreturn g(1), 'k', 1.5",
                              b"=[redis]")
    s = strip(rt.eval("string.dump")(f))
    g = rt.eval("loadstring")(s, b"=x")
    assert g() == (4, b"k", 1.5)
    info = rt.eval("function(f) local i = debug.getinfo(f, 'S') return i.source end")
    assert info(g) == b"=[redis]"
    with pytest.raises(DumpError):
        strip(b"\x1bLua\x52" + bytes(20))
