"""The replica's batch apply (``Stream.apply_batch``): a run of plain commands from the master's
stream, applied in one pass, leaves exactly the state the one-by-one loop leaves: the same
dataset, offsets, bytes passed on, INFO commandstats / errorstats and error replies counted.

The reference is the same replica code fed one request per read (the reader then never holds a
second request, so every command goes through ``core.execute``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl.commands.table import COMMANDS
from pyrepl.replication.replica.stream import Stream
from tests.support.cores import cmd
from tests.support.replica_side import synced_node

KEYS = ["s", "n", "l", "h", "z", "x:1", "x:2"]


@st.composite
def requests(draw: st.DrawFn) -> list[bytes]:
    """One request of a master's stream; every kind the batch path must get right."""
    key = draw(st.sampled_from(KEYS))
    kind = draw(st.integers(0, 14))
    args: list[str | int] = {
        0: ["SET", key, draw(st.sampled_from(["v", "12", "-3", ""]))],
        1: ["INCR", key],                              # WRONGTYPE / not an integer errors
        2: ["INCRBY", key, draw(st.integers(-5, 5))],
        3: ["LPUSH", key, "a", "b"],
        4: ["HSET", key, "f", "1"],
        5: ["ZADD", key, "1.5", "m"],
        6: ["SELECT", draw(st.integers(0, 2))],
        7: ["PING"],
        8: ["EXPIRE", key, 1000],
        9: ["INCR"],                                   # wrong arity: an error reply
        10: ["INCR", key, "extra"],                    # wrong arity: fixed arity too long
        11: ["DEL", key],                              # not plain: ends a batch
        12: ["MULTI"],
        13: ["EXEC"],
        14: ["SETEX", key, 100, "v"],
    }[kind]
    return [a if isinstance(a, bytes) else str(a).encode() for a in args]


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    reqs = [cmd(*r) for r in draw(st.lists(requests(), min_size=1, max_size=80))]
    # Runs of one command, as a busy master's stream holds them.
    run = draw(st.sampled_from([["SET", "x:1", "v"], ["INCR", "n"], ["HSET", "h", "f", "2"]]))
    at = draw(st.integers(0, len(reqs)))
    return reqs[:at] + [cmd(*run)] * draw(st.integers(0, 40)) + reqs[at:]


def _state(n) -> dict[str, object]:
    core = n.core
    ms = n.side.stream.master
    stats = {cmd.name: (s.calls, s.failed, s.rejected) for cmd, s in core.cmdstats.items()}
    return {
        "digest": n.digest(),
        "reploff": ms.reploff,
        "read_reploff": ms.read_reploff,
        "passed_on": b"".join(n.repl.backlog.read_from(1)) if n.repl.backlog else b"",
        "cmdstats": stats,
        "errorstats": dict(core.errorstats),
        "unexpected_error_replies": core.stats.unexpected_error_replies,
        "commands": ms.client.commands,
        "db": ms.client.db.id,
        "in_multi": ms.client.in_multi,
    }


def _warm(n) -> None:
    """Every command of the pool run once (a command's first call takes the full path)."""
    warm = [cmd("SELECT", "0")] + [cmd(*r) for r in (
        ("SET", "w", "1"), ("INCR", "w"), ("INCRBY", "w", "1"), ("LPUSH", "wl", "a"),
        ("HSET", "wh", "f", "1"), ("ZADD", "wz", "1", "m"), ("PING",), ("EXPIRE", "w", "9"),
        ("SETEX", "w", "9", "v"), ("DEL", "w", "wl", "wh", "wz"))]
    for r in warm:
        n.feed(r)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(), cut=st.integers(1, 1 << 16))
def test_batches_leave_the_state_one_by_one_leaves(stream: list[bytes], cut: int) -> None:
    one, many = synced_node(), synced_node()
    _warm(one)
    _warm(many)
    for r in stream:
        one.feed(r)
    data = b"".join(stream)
    for i in range(0, len(data), cut):    # reads of `cut` bytes: batches of any size
        many.feed(data[i:i + cut])
    assert _state(many) == _state(one)


def test_a_run_is_applied_in_one_batch_with_exact_stats(monkeypatch) -> None:
    n = synced_node()
    _warm(n)
    batches: list[bool] = []
    real = Stream.apply_batch

    def spy(self, *args):
        batches.append(real(self, *args))
        return batches[-1]

    monkeypatch.setattr(Stream, "apply_batch", spy)
    calls = n.core.cmdstats[COMMANDS[b"set"]].calls
    before = n.side.stream.master.reploff
    run = cmd("SELECT", "0") + cmd("SET", "k", "v") * 50 + cmd("INCR", "s:1")
    n.feed(run)
    assert batches[:1] == [True]                       # SELECT and the 50 SETs: one batch
    assert n.core.cmdstats[COMMANDS[b"set"]].calls == calls + 50
    assert n.side.stream.master.reploff == before + len(run)
    assert n.core.stats.unexpected_error_replies == 1  # INCR on "hello": logged, counted
    assert n.core.dbs[0].data[b"k"] == b"v"


def test_an_internal_error_leaves_the_offset_before_the_failing_command(monkeypatch) -> None:
    """A handler bug (not a ReplyError) mid-batch: the commands before it are applied and
    passed on, the offset is the end of the one before it (a partial resync re-sends it)."""
    n = synced_node()
    _warm(n)
    real = COMMANDS[b"incr"].handler

    def broken(c, argv):
        if argv[1] == b"boom":
            raise RuntimeError("bug")
        return real(c, argv)

    monkeypatch.setattr(COMMANDS[b"incr"], "handler", broken)
    before = n.side.stream.master.reploff
    ok = cmd("INCR", "a") * 3
    with pytest.raises(RuntimeError):
        n.feed(ok + cmd("INCR", "boom") + cmd("INCR", "a") * 2)
    assert n.side.stream.master.reploff == before + len(ok)
    assert n.core.dbs[0].data[b"a"] == b"3"
    assert b"".join(n.repl.backlog.read_from(1)).endswith(ok)
    assert n.side.stream.master.reploff == n.repl.master_repl_offset
