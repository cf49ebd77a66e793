"""The C redis.call, runner and EVALSHA (pyrepl/scripting/_luacall.c) against the reference:
the same scripts on a core whose engine loads _luacall and on one whose engine runs through
lupa alone (the Python handlers), their replies, the Lua values redis.call hands a script
(tables walked with ``next``, so their layout counts) and the server's counts compared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pyrepl import native
from pyrepl.commands import scripting as scripting_commands
from pyrepl.commands.table import COMMANDS
from pyrepl.resp.types import NULL_ARRAY, OK, Map, Raw, ReplyError, SetReply, Status, Verbatim
from pyrepl.scripting import engine as engine_mod
from pyrepl.scripting.convert import BigNumber
from pyrepl.scripting.engine import CallError, ScriptEngine
from tests.support.cores import make_core, run

pytestmark = pytest.mark.skipif(native.PURE, reason=f"plain Python ({native.WHY_PURE})")

# A Lua value as text: a table as its length and its pairs in ``next`` order.
DUMP = """
local function dump(v)
  local t = type(v)
  if t == 'table' then
    local parts = {'{#' .. #v}
    local k, x = next(v)
    while k ~= nil do
      parts[#parts + 1] = dump(k) .. '=' .. dump(x)
      k, x = next(v, k)
    end
    return table.concat(parts, ',') .. '}'
  elseif t == 'string' then
    return string.format('%q', v)
  end
  return t .. ':' .. tostring(v)
end
"""


def both(monkeypatch: pytest.MonkeyPatch, fn: Callable[[Any], object]) -> tuple[object, object]:
    """fn(core) on a core with _luacall and on one with the reference alone."""
    core = make_core()
    got = fn(core)
    assert core.scripts.vm.accel_id is not None      # (the C paths ran)
    assert COMMANDS[b"evalsha"].handler is engine_mod._luacall.evalsha_handler
    with monkeypatch.context() as m:
        m.setattr(engine_mod, "_luacall", None)
        scripting_commands.install(False)
        try:
            ref_core = make_core()
            want = fn(ref_core)
            assert ref_core.scripts.vm.accel_id is None
        finally:
            scripting_commands.install(True)
    return got, want


class IntSub(int):
    pass


# What a command may answer (and what no command does: the converter's every branch).
VALUES: list[object] = [
    b"bulk", b"", 42, -7, 2 ** 62, -(2 ** 63), None, NULL_ARRAY, OK, Raw(b"+PONG\r\n"),
    Raw(b"*2\r\n$1\r\na\r\n:5\r\n"), Raw(b"%1\r\n+k\r\n,1.5\r\n"), Raw(b"(1234567890123\r\n"),
    Raw(b"-ERR raw error\r\n"), Raw(b"=8\r\ntxt:some\r\n"), Raw(b"#t\r\n"), Raw(b"_\r\n"),
    Raw(b"~2\r\n$1\r\nx\r\n_\r\n"), [b"a", None, b"c", None], [None, None], [None, b"x"], [],
    [[b"x", [1, 2]], b"y"], (b"t", 1), Status("FINE"), ReplyError("WRONGTYPE bad"),
    [ReplyError("ERR inner"), b"ok"], Map([(b"f", b"v"), (b"g", 1)]),
    Map([(None, b"v"), (b"k", None), ([b"a"], b"t")]), SetReply([b"a", b"b"]),
    SetReply([None, b"z"]), 1.5, float("inf"), -0.0, True, False,
    Verbatim(b"text", b"markdown"), BigNumber(b"123"), "unicode \u2603", IntSub(5), object(),
    CallError("ERR refused", True), CallError("ERR plain", False),
]


def fake_run_call(self: ScriptEngine, ctx: Any, argv: list[bytes]) -> object:
    v = VALUES[int(argv[1])]
    if isinstance(v, CallError):
        raise v
    return v


def test_reply_values_become_the_references_lua_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # an unknown command: the C redis.call's own path declines it, run_call answers
    monkeypatch.setattr(ScriptEngine, "run_call", fake_run_call)

    def scripts(core: Any) -> list[bytes]:
        c = core.connection_made()
        out = []
        for i in range(len(VALUES)):
            for resp in (2, 3):
                for fn in ("call", "pcall"):
                    out.append(run(c, "EVAL", f"{DUMP} redis.setresp({resp}) "
                                              f"return dump(redis.{fn}('x', ARGV[1]))",
                                   "0", str(i)))
        return out

    got, want = both(monkeypatch, scripts)
    assert got == want
    # (what the comparison covers: tables with holes, errors as tables ...)
    assert b'number:3="c"' in got[4 * 18]      # [a, nil, c, nil], RESP2, redis.call
    assert b"ERR refused" in got[4 * (len(VALUES) - 2) + 1]    # its table, redis.pcall


def test_arguments_and_refusals_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = [
        "redis.call('set', 'k', 0/0) return redis.call('get', 'k')",    # (-nan, as Redis)
        "redis.call('set', 'k', -(0/0)) return redis.call('get', 'k')",
        "redis.call('set', 'k', 1/0) return redis.call('get', 'k')",
        "redis.call('set', 'k', -1/0) return redis.call('get', 'k')",
        "redis.call('set', 'k', 0.1) return redis.call('get', 'k')",
        "redis.call('set', 'k', -0.0) return redis.call('get', 'k')",
        "redis.call('set', 'k', 1e20) return redis.call('get', 'k')",
        "redis.call('set', 'k', 3) return redis.call('get', 'k')",
        "return redis.call('set', 'k', true)",
        "return redis.call('set', 'k', {})",
        "return redis.pcall('set', 'k', nil)",
        "return redis.call()",
        "return redis.pcall()",
        "return redis.call('nosuch')",
        "return redis.pcall('nosuch')",
        "return redis.call('get')",
        "return redis.pcall('get', 'a', 'b')",
        "return redis.call('config', 'get', 'maxmemory')",
        "return redis.call('blpop', 'l', 0)",
        "return redis.call('xread', 'block', 0, 'streams', 's', '$')",
        "redis.call('lpush', 'l', 'v') return redis.pcall('get', 'l')",
        "return redis.call('incr', 'l')",
        "local r = redis.pcall('incr', 'l') return r",
        "return {pcall(redis.call, 'incr', 'l')}",
        "redis.set_repl(redis.REPL_NONE) return redis.call('set', 'r', 'v')",
        # command names in every case, after each of 1,296 unknown names of their length
        # that take every place of the C table's (pyrepl/resp/_names.h) in turn: each call
        # is its own command's
        "local r, cs = {}, 'abcdefghijklmnopqrstuvwxyz0123456789'"
        " for i = 1, #cs do for j = 1, #cs do"
        " r[#r + 1] = redis.pcall('x' .. cs:sub(i, i) .. cs:sub(j, j))['err'] ~= nil"
        " r[#r + 1] = redis.call(({'set', 'SET', 'Set'})[j % 3 + 1], 'n', i * 100 + j)"
        " r[#r + 1] = redis.call(({'get', 'GET', 'del', 'DEL'})[(i + j) % 4 + 1], 'n')"
        " end end return r",
    ]

    def scripts(core: Any) -> list[object]:
        c = core.connection_made()
        out: list[object] = [run(c, "EVAL", body, "0") for body in bodies]
        out.append(run(c, "INFO", "commandstats").split(b"\r\n")[1:])
        out.append(run(c, "INFO", "errorstats").split(b"\r\n")[1:])
        return out

    got, want = both(monkeypatch, scripts)
    # numbers as Redis's snprintf("%.17g") writes them (a NaN's sign too)
    assert got[:8] == [b"$4\r\n-nan\r\n", b"$3\r\nnan\r\n", b"$3\r\ninf\r\n",
                       b"$4\r\n-inf\r\n", b"$19\r\n0.10000000000000001\r\n",
                       b"$2\r\n-0\r\n", b"$5\r\n1e+20\r\n", b"$1\r\n3\r\n"]
    # Where the reference cannot be Redis: lupa hands -0.0 to Python as the int 0 ("0").
    assert want[5] == b"$1\r\n0\r\n"
    got[5] = want[5]
    assert got == want


def test_the_c_call_takes_redis_many_arguments() -> None:
    """7999 arguments reach the C redis.call, as Redis's (LUAI_MAXCSTACK); lupa's call of a
    Python function takes 7997."""
    c = make_core().connection_made()
    body = "local a = {} for i = 1, %d do a[i] = 1 end return redis.call('lpush', 'b', unpack(a))"
    assert run(c, "EVAL", body % 7997, "0") == b":7997\r\n"


def test_evalsha_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = [
        "return redis.call('get', KEYS[1])", "return redis.call('incr', KEYS[1])",
        "return {KEYS[1], ARGV[1], #KEYS, #ARGV}", "return nil", "return true",
        "return false", "return 3.7", "return -2^63", "return 2^64", "return 0/0",
        "return {1, {2, {3}}, 'x', false, nil, 5}", "return {ok='fine'}", "return {err='bad'}",
        "return redis.error_reply('E1 custom')", "return redis.status_reply('S')",
        "error('raised')", "error({err='TABLE error'})", "return redis.call('nosuch')",
        "return redis.pcall('nosuch')", "return redis.call", "redis.setresp(3) return "
        "redis.call('hgetall', KEYS[1])", "redis.setresp(3) return {double=1.5}",
        "return redis.call('set', KEYS[1], ARGV[1])", "return redis.call('lpush', 'x', 'y')",
        "return redis.call('get', 'x')", "#!lua flags=no-writes\nreturn redis.call('get', 'k')",
        "#!lua\nreturn redis.call('set', 'k', 'v')",
    ]

    def scripts(core: Any) -> list[object]:
        c = core.connection_made()
        run(c, "HSET", "h", "f", "v")
        shas = [run(c, "SCRIPT", "LOAD", body).split(b"\r\n")[1].decode() for body in bodies]
        out: list[object] = []
        for sha in shas:
            for keys in (["1", "h", "a"], ["0"], ["2", "h", "k", "v"]):
                out.append(run(c, "EVALSHA", sha, *keys))
                out.append(run(c, "EVALSHA_RO", sha, *keys))
        out.append(run(c, "EVALSHA", shas[0].upper(), "1", "h"))   # (the Python's lookup)
        out.append(run(c, "EVALSHA", shas[0], "01", "h"))
        out.append(run(c, "EVALSHA", shas[0], "-1", "h"))
        out.append(run(c, "EVALSHA", shas[0], "3", "h"))
        out.append(run(c, "EVALSHA", "0" * 40, "0"))
        out.append(run(c, "HELLO", "3")[:1])
        out.extend(run(c, "EVALSHA", sha, "1", "h") for sha in shas)
        out.append(run(c, "INFO", "commandstats").split(b"\r\n")[1:])
        out.append(run(c, "INFO", "errorstats").split(b"\r\n")[1:])
        out.append(run(c, "INFO", "stats").split(b"total_error_replies")[1][:12])
        return out

    got, want = both(monkeypatch, scripts)
    assert got == want


def test_evalsha_with_a_monitor_is_the_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a MONITOR client attached, EVALSHA takes the Python path (the C declines), so the
    monitor sees the script's call and the commands it makes, as the reference shows them;
    once it leaves, the C path again."""
    import re

    def scripts(core: Any) -> list[object]:
        c, m = core.connection_made(), core.connection_made()
        sha = run(c, "SCRIPT", "LOAD", "return redis.call('set', KEYS[1], ARGV[1])")
        sha = sha.split(b"\r\n")[1].decode()
        out: list[object] = [run(c, "EVALSHA", sha, "1", "k", "v0"), run(m, "MONITOR")]
        out.append(run(c, "EVALSHA", sha, "1", "k", "v1"))
        # (each line without its time and client address)
        out.append(re.sub(rb"\+[0-9.]+ \[0 [^\]]*\]", b"+T", m.data_to_send()))
        run(m, "QUIT")
        core.client_closed(m)
        out.append(run(c, "EVALSHA", sha, "1", "k", "v2"))
        out.append(run(c, "GET", "k"))
        return out

    got, want = both(monkeypatch, scripts)
    assert got == want
    assert b'"EVALSHA"' in got[3] and b'"set" "k" "v1"' in got[3] and b"v0" not in got[3]


def test_a_first_write_is_checked_as_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A script's first write gets scriptCall's checks (here MISCONF); later ones do not."""
    from pyrepl.core.server import MISCONF_ERR

    bodies = ["return redis.call('set', 'k', 'v')",
              "redis.call('get', 'k') return redis.pcall('set', 'k', 'v')",
              "return redis.call('get', 'k')"]

    def scripts(core: Any) -> list[bytes]:
        c = core.connection_made()
        out = [run(c, "EVAL", "redis.call('set', 'a', 1) return redis.call('incr', 'a')", "0")]
        core.disk_error = MISCONF_ERR
        core.refresh_gate()
        out += [run(c, "EVAL", body, "0") for body in bodies]
        return out

    got, want = both(monkeypatch, scripts)
    assert got == want and got[0] == b":2\r\n" and b"MISCONF" in got[1]


def test_the_run_context_is_the_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """EVALSHA's RunContext made in C holds what RunContext(...) makes, field for field."""
    from pyrepl.scripting.engine import RunContext

    seen: list[dict[str, object]] = []

    def capture(self: ScriptEngine, ctx: Any, argv: list[bytes]) -> object:
        fields = {f: getattr(ctx, f) for f in RunContext.__slots__}
        fields["caller"] = type(ctx.caller).__name__
        fields["start_ns"] = type(ctx.start_ns).__name__
        seen.append(fields)
        return b"ok"

    monkeypatch.setattr(ScriptEngine, "run_call", capture)

    def scripts(core: Any) -> list[object]:
        seen.clear()
        c = core.connection_made()
        sha = run(c, "SCRIPT", "LOAD", "return redis.call('x')").split(b"\r\n")[1]
        out: list[object] = [run(c, "EVALSHA", sha, "0"), run(c, "EVALSHA_RO", sha, "0")]
        return out + [list(seen)]

    got, want = both(monkeypatch, scripts)
    assert got == want and len(got[2]) == 2    # type: ignore[arg-type]


def test_every_state_loads_the_c_library() -> None:
    """States past the table's first sizes get their number too (each core here keeps its
    engine's state: no limit stops the C paths)."""
    cores = [make_core() for _ in range(80)]
    for core in cores:
        run(core.connection_made(), "EVAL", "return 1", "0")
    ids = [core.scripts.vm.accel_id for core in cores]
    assert None not in ids and len(set(ids)) == len(ids)
