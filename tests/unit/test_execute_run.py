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


def _server(backlog: bool, events: bool = False) -> tuple[ServerCore, object]:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    if backlog:
        Replication(core).create_backlog()
        assert core.stream_live
    c = core.connection_made()
    if events:     # keyspace events, heard by a subscriber whose output _state compares
        c.receive_data(cmd("CONFIG", "SET", "notify-keyspace-events", "KEA"))
        core.subscriber = core.connection_made()  # type: ignore[attr-defined]
        core.subscriber.receive_data(cmd("PSUBSCRIBE", "__key*__:*"))  # type: ignore
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
        "stats": (core.dirty, core.stats.keyspace_hits, core.stats.keyspace_misses,
                  core.stats.expired_keys),
        "events": core.subscriber.data_to_send() if hasattr(core, "subscriber") else None,
    }


# A run of one command: one request repeated, or SETs / GETs of keys of every kind (the
# whole-run forms, Command.whole, and their way back to one by one: a TTL, WRONGTYPE).
RUNS = st.one_of(
    st.tuples(st.sampled_from([["SET", "x:1", "v"], ["GET", "s"], ["INCR", "n"]]),
              st.integers(0, 30)).map(lambda rt: [rt[0]] * rt[1]),
    st.lists(st.sampled_from(KEYS + ["e1", "new"]), max_size=30).map(
        lambda ks: [["GET", k] for k in ks]),
    st.lists(st.sampled_from(KEYS + ["e1", "new"]), max_size=30).map(
        lambda ks: [["SET", k, "v"] for k in ks]),
)


@pytest.mark.parametrize("backlog,events", [(False, False), (True, False), (False, True)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60), run=RUNS, at=st.integers(0, 60))
def test_runs_reply_exactly_as_one_by_one(backlog: bool, events: bool, reqs: list[list[str]],
                                          run: list[list[str]], at: int) -> None:
    reqs = reqs[:at] + run + reqs[at:]
    one, c1 = _server(backlog, events)
    many, c2 = _server(backlog, events)
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


def test_whole_runs_leave_ttls_watches_and_wrong_types_to_the_handlers() -> None:
    """SET's and GET's whole-run forms (Command.whole) apply a run at once only when no
    request in it needs the handler's per-key work; each case here would differ otherwise."""
    core, c = _server(False)
    w = core.connection_made()
    c.receive_data(cmd("SET", "t", "v", "EX", "100") + cmd("LPUSH", "l", "a"))
    w.receive_data(cmd("WATCH", "k2"))
    c.data_to_send()
    w.data_to_send()
    c.receive_data(cmd("SET", "k1", "a") + cmd("SET", "k2", "b"))   # k2 is WATCHed
    assert c.data_to_send() == b"+OK\r\n" * 2
    w.receive_data(cmd("MULTI") + cmd("PING") + cmd("EXEC"))
    assert w.data_to_send() == b"+OK\r\n+QUEUED\r\n*-1\r\n"           # EXEC aborted
    c.receive_data(cmd("SET", "k1", "c") + cmd("SET", "t", "d"))    # t has a TTL
    assert c.data_to_send() == b"+OK\r\n" * 2
    assert c.db.data[b"t"] == b"d" and b"t" not in c.db.expires      # SET dropped it
    c.receive_data(cmd("GET", "k1") + cmd("GET", "l") + cmd("GET", "nope"))
    assert c.data_to_send() == (b"$1\r\nc\r\n-WRONGTYPE Operation against a key holding "
                                b"the wrong kind of value\r\n$-1\r\n")


def test_requests_behind_one_that_changes_the_readers_limits_still_run() -> None:
    """AUTH (the reader's unauthenticated limits end) and CONFIG SET proto-max-bulk-len make
    the fast reader drop what it queued and parse it again: the rest of the read still runs
    in that same read, not at the next one."""
    core = ServerCore(Config.load(None, [("save", [""]), ("requirepass", ["pw"])]), now_ms=NOW)
    c = core.connection_made()
    c.receive_data(cmd("AUTH", "pw") + cmd("SET", "k", "v") + cmd("GET", "k"))
    assert c.data_to_send() == b"+OK\r\n+OK\r\n$1\r\nv\r\n"
    c.receive_data(cmd("CONFIG", "SET", "proto-max-bulk-len", "2mb") + cmd("GET", "k"))
    assert c.data_to_send() == b"+OK\r\n$1\r\nv\r\n"
