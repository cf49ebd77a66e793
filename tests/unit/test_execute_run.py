"""A pipelining client's runs of plain commands (``ServerCore.execute_run``) give exactly what
the one-by-one path gives: the same reply bytes in the same order, the same dataset, INFO
commandstats / errorstats, the client's command count, and with a backlog the same bytes
propagated.

The reference is the same server fed one request per read (the reader then never holds a
second request, so every command goes through ``execute``)."""

from __future__ import annotations

import pytest
from fakes import NOW, cmd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl.commands.table import COMMANDS
from pyrepl.config import Config
from pyrepl.core import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.replication.manager import Replication

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
        # propagated otherwise than as they arrive, or not at all
        ["EXPIRE", key, "100"], ["SET", key, "v", "EX", "100"], ["INCRBYFLOAT", key, "1.5"],
        ["GETEX", key, "PX", "5000"], ["SADD", key, "a", "b"], ["HINCRBYFLOAT", key, "f", "0.5"],
        ["SET", key, "v", "NX"], ["GET", draw(st.sampled_from(["e1", "e2"]))],  # expired
        ["EXISTS", "e1", "e2"],
    ]))


def _server(backlog: bool) -> tuple[ServerCore, object]:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    if backlog:
        Replication(core).create_backlog()
        assert core.stream_live
    c = core.connection_made()
    for r in (["SET", "w", "1"], ["GET", "w"], ["INCR", "w"], ["INCRBY", "w", "1"],
              ["LPUSH", "wl", "a"], ["HSET", "wh", "f", "1"], ["HGET", "wh", "f"],
              ["ZADD", "wz", "1", "m"], ["ZSCORE", "wz", "m"], ["PING"], ["ECHO", "e"],
              ["EXISTS", "w"], ["TTL", "w"], ["MGET", "w"], ["EXPIRE", "w", "9"],
              ["SET", "w", "1", "EX", "9"], ["INCRBYFLOAT", "w", "1"], ["GETEX", "w"],
              ["SADD", "ws", "a"], ["HINCRBYFLOAT", "wh", "f", "1"], ["SELECT", "0"], ["FLUSHALL"],
              ["SET", "e1", "v", "PX", "10"], ["SET", "e2", "v", "PX", "10"]):
        c.receive_data(cmd(*r))    # every command's first call takes the full path
    c.data_to_send()
    core.now_ms += 100             # e1 and e2 expired: a read deletes them (and propagates)
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
        "propagated": b"".join(core.replication.backlog.read_from(1))
        if core.replication is not None else None,
        "blocks": (core.replication.backlog.nblocks, core.replication.backlog.mem)
        if core.replication is not None else None,
        "woff": c.woff,
    }


@pytest.mark.parametrize("backlog", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60),
       run=st.sampled_from([["SET", "x:1", "v"], ["GET", "s"], ["INCR", "n"]]),
       at=st.integers(0, 60), times=st.integers(0, 30))
def test_runs_reply_exactly_as_one_by_one(backlog: bool, reqs: list[list[str]], run: list[str],
                                          at: int, times: int) -> None:
    reqs = reqs[:at] + [run] * times + reqs[at:]
    one, c1 = _server(backlog)
    many, c2 = _server(backlog)
    replies1 = b""
    for r in reqs:
        c1.receive_data(cmd(*r))
        replies1 += c1.data_to_send()
    c2.receive_data(b"".join(cmd(*r) for r in reqs))
    assert c2.data_to_send() == replies1
    assert _state(many, c2) == _state(one, c1)


def test_a_pipeline_of_one_command_is_one_run() -> None:
    core, c = _server(False)
    commands = c.commands
    calls = core.cmdstats[COMMANDS[b"set"]].calls
    timed = core.cmdstats[COMMANDS[b"set"]].timed
    c.receive_data(cmd("SET", "k", "v") * 16)
    assert c.data_to_send() == b"+OK\r\n" * 16
    st = core.cmdstats[COMMANDS[b"set"]]
    assert (st.calls, st.timed) == (calls + 16, timed + 1)   # every call, timed as one run
    assert c.commands == commands + 16 and c.last_cmd is COMMANDS[b"set"]


def test_a_long_run_fills_the_backlog_blocks_as_one_by_one() -> None:
    """Values of every size around a block (16 KiB): the blocks, their memory and the bytes
    are those of feeding the writes one at a time."""
    reqs = [["SET", f"k{i}", "v" * size] for i, size in enumerate(
        [100] * 300 + [16 * 1024 - 30, 16 * 1024 + 5, 40_000, 7] + [1000] * 100 + [70_000])]
    one, c1 = _server(True)
    many, c2 = _server(True)
    for r in reqs:
        c1.receive_data(cmd(*r))
        c1.data_to_send()
    data = b"".join(cmd(*r) for r in reqs)
    for i in range(0, len(data), 65536):
        c2.receive_data(data[i:i + 65536])
    c2.data_to_send()
    assert one.replication.backlog.nblocks > 10
    assert _state(many, c2) == _state(one, c1)
