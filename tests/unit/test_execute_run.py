"""A pipelining client's runs of plain commands (``ServerCore.execute_run``) give exactly what
the one-by-one path gives: the same reply bytes in the same order, the same dataset, INFO
commandstats / errorstats, and the client's command count.

The reference is the same server fed one request per read (the reader then never holds a
second request, so every command goes through ``execute``)."""

from __future__ import annotations

from fakes import NOW, cmd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.commands.table import COMMANDS
from pyrepl.config import Config
from pyrepl.core import ServerCore
from pyrepl.keyspace.digest import dataset_digest

KEYS = ["s", "n", "l", "h", "z", "x:1"]


@st.composite
def requests(draw: st.DrawFn) -> list[str]:
    key = draw(st.sampled_from(KEYS))
    return draw(st.sampled_from([
        ["SET", key, draw(st.sampled_from(["v", "12", ""]))],
        ["GET", key], ["INCR", key], ["INCRBY", key, "2"], ["LPUSH", key, "a", "b"],
        ["HSET", key, "f", "1"], ["HGET", key, "f"], ["ZADD", key, "1.5", "m"],
        ["ZSCORE", key, "m"], ["SELECT", draw(st.sampled_from(["0", "1"]))], ["PING"],
        ["ECHO", "hi"], ["EXISTS", key], ["TTL", key], ["MGET", key, "n"],
        ["INCR"], ["GET", key, "extra"],          # wrong arity: errors where they stand
        ["DEL", key], ["MULTI"], ["EXEC"], ["DISCARD"], ["WATCH", key],  # not plain
        ["SETEX", key, "100", "v"], ["NOSUCH", key], ["HELLO", "3"], ["HELLO", "2"],
    ]))


def _server() -> tuple[ServerCore, object]:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    c = core.connection_made()
    for r in (["SET", "w", "1"], ["GET", "w"], ["INCR", "w"], ["INCRBY", "w", "1"],
              ["LPUSH", "wl", "a"], ["HSET", "wh", "f", "1"], ["HGET", "wh", "f"],
              ["ZADD", "wz", "1", "m"], ["ZSCORE", "wz", "m"], ["PING"], ["ECHO", "e"],
              ["EXISTS", "w"], ["TTL", "w"], ["MGET", "w"], ["SELECT", "0"], ["FLUSHALL"]):
        c.receive_data(cmd(*r))    # every command's first call takes the full path
    c.data_to_send()
    return core, c


def _state(core: ServerCore, c) -> dict[str, object]:
    return {
        "digest": dataset_digest(core.dbs, NOW),
        "cmdstats": {k.name: (s.calls, s.failed, s.rejected) for k, s in core.cmdstats.items()},
        "errorstats": dict(core.errorstats),
        "errors": core.stats.total_error_replies,
        "commands": c.commands,
        "db": c.db.id,
        "proto": c.proto,
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60),
       run=st.sampled_from([["SET", "x:1", "v"], ["GET", "s"], ["INCR", "n"]]),
       at=st.integers(0, 60), times=st.integers(0, 30))
def test_runs_reply_exactly_as_one_by_one(reqs: list[list[str]], run: list[str], at: int,
                                          times: int) -> None:
    reqs = reqs[:at] + [run] * times + reqs[at:]
    one, c1 = _server()
    many, c2 = _server()
    replies1 = b""
    for r in reqs:
        c1.receive_data(cmd(*r))
        replies1 += c1.data_to_send()
    c2.receive_data(b"".join(cmd(*r) for r in reqs))
    assert c2.data_to_send() == replies1
    assert _state(many, c2) == _state(one, c1)


def test_a_pipeline_of_one_command_is_one_run() -> None:
    core, c = _server()
    calls = core.cmdstats[COMMANDS[b"set"]].calls
    timed = core.cmdstats[COMMANDS[b"set"]].timed
    c.receive_data(cmd("SET", "k", "v") * 16)
    assert c.data_to_send() == b"+OK\r\n" * 16
    st = core.cmdstats[COMMANDS[b"set"]]
    assert (st.calls, st.timed) == (calls + 16, timed + 1)   # every call, timed as one run
    assert c.commands == 16 + 16 and c.last_cmd is COMMANDS[b"set"]
