"""A pipelining client's runs of plain commands (``ServerCore.execute_run``) give exactly what
the one-by-one path gives: the same reply bytes in the same order, the same dataset, INFO
commandstats / errorstats, the client's command count, and with a backlog the same bytes
propagated.

The reference is the same server fed one request per read (the reader then never holds a
second request, so every command goes through ``execute``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl import fastpath
from pyrepl.commands.table import COMMANDS
from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from tests.support.cores import NOW, cmd
from tests.support.execpaths import KEYS, requests, seed_picks, server_state, warm_server

# A run of one command: one request repeated, or SETs / GETs / EXISTS of keys of every kind
# (the whole-run forms, Command.whole, and their way back to one by one: a TTL, WRONGTYPE).
RUNS = st.one_of(
    st.tuples(st.sampled_from([["SET", "x:1", "v"], ["GET", "s"], ["INCR", "n"]]),
              st.integers(0, 30)).map(lambda rt: [rt[0]] * rt[1]),
    st.lists(st.sampled_from(KEYS + ["e1", "new"]), max_size=30).map(
        lambda ks: [["GET", k] for k in ks]),
    st.lists(st.sampled_from(KEYS + ["e1", "new"]), max_size=30).map(
        lambda ks: [["SET", k, "v"] for k in ks]),
    st.lists(st.sampled_from(KEYS + ["e1", "new"]), max_size=30).map(
        lambda ks: [["EXISTS", k] for k in ks]),
)


@pytest.mark.parametrize("backlog,events", [(False, False), (True, False), (False, True)])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60), run=RUNS, at=st.integers(0, 60))
def test_runs_reply_exactly_as_one_by_one(backlog: bool, events: bool, reqs: list[list[str]],
                                          run: list[list[str]], at: int) -> None:
    reqs = reqs[:at] + run + reqs[at:]
    one, c1 = warm_server(backlog, events)
    many, c2 = warm_server(backlog, events)
    replies1 = b""
    for r in reqs:
        c1.receive_data(cmd(*r))
        replies1 += c1.data_to_send()
    c2.receive_data(b"".join(cmd(*r) for r in reqs))
    assert c2.data_to_send() == replies1
    assert server_state(many, c2) == server_state(one, c1)


# Runs of writes that propagate a rewritten form (XADD's ID, EXPIRE's PEXPIREAT, SPOP's
# SREM, INCRBYFLOAT's SET): their IDs and times differ between a pipeline and one by one,
# so the two loops of one pipeline are what is compared.
REWRITTEN = st.tuples(st.sampled_from([["XADD", "x:s", "*", "f", "v"], ["EXPIRE", "x:1", "100"],
                                       ["SPOP", "s"], ["INCRBYFLOAT", "n", "1.5"],
                                       ["XADD", "x:s", "MAXLEN", "2", "*", "f", "v"]]),
                      st.integers(0, 30)).map(lambda rt: [rt[0]] * rt[1])


@pytest.mark.parametrize("events", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60), run=st.one_of(RUNS, REWRITTEN),
       at=st.integers(0, 60))
def test_the_c_loop_of_a_run_is_the_python_loop(events: bool, reqs: list[list[str]],
                                                run: list[list[str]], at: int) -> None:
    """With a backlog, a run's loop in C (``_plainrun.propagating``) and its Python reference
    (``dispatch.propagating_loop``) give the same replies, dataset, counters and propagated
    bytes."""
    if fastpath.propagating is None:
        pytest.skip("pyrepl runs as plain Python: there is no C loop")
    reqs = reqs[:at] + run + reqs[at:]
    pipeline = b"".join(cmd(*r) for r in reqs)
    c_core, c_client = warm_server(True, events)
    seed_picks()   # (SPOP's pick: the same on both servers)
    c_client.receive_data(pipeline)
    c_loop, fastpath.propagating = fastpath.propagating, None
    try:
        py_core, py_client = warm_server(True, events)
        seed_picks()
        py_client.receive_data(pipeline)
    finally:
        fastpath.propagating = c_loop
    assert c_client.data_to_send() == py_client.data_to_send()
    assert server_state(c_core, c_client) == server_state(py_core, py_client)


def _inline(r: list[str]) -> bytes:
    """``r`` as an inline line (redis-benchmark's PING_INLINE, a telnet session) when its
    arguments allow one, else as its multibulk request."""
    args = [a if isinstance(a, bytes) else str(a).encode() for a in r]
    if all(a and not any(ch in a for ch in b' \t\r\n"\'\x00\x0b\x0c') for a in args):
        return b" ".join(args) + b"\r\n"
    return cmd(*r)


@pytest.mark.parametrize("backlog", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=60), run=RUNS, at=st.integers(0, 60))
def test_inline_pipelines_reply_and_propagate_as_one_by_one(backlog: bool,
                                                            reqs: list[list[str]],
                                                            run: list[list[str]],
                                                            at: int) -> None:
    """A pipeline of inline requests (the reader's inline batches, runs among them): the
    replies, the dataset and, with a backlog, the bytes propagated (each write's RESP
    encoding: an inline request's bytes are not) of multibulk requests fed one by one."""
    reqs = reqs[:at] + run + reqs[at:]
    one, c1 = warm_server(backlog)
    many, c2 = warm_server(backlog)
    replies1 = b""
    for r in reqs:
        c1.receive_data(cmd(*r))
        replies1 += c1.data_to_send()
    c2.receive_data(b"".join(map(_inline, reqs)))
    assert c2.data_to_send() == replies1
    assert server_state(many, c2) == server_state(one, c1)


@pytest.mark.parametrize("c_loop", [True, False])
def test_a_run_of_writes_that_only_expire_propagates_the_del_at_once(c_loop: bool) -> None:
    """A write that changes nothing but lazily expires its key (SREM on a key past its TTL):
    the DEL it queued propagates before the run ends, as one by one, in either loop."""
    if c_loop and fastpath.propagating is None:
        pytest.skip("pyrepl runs as plain Python: there is no C loop")
    loop, fastpath.propagating = fastpath.propagating, fastpath.propagating if c_loop else None
    try:
        core, c = warm_server(True)
        c.receive_data(cmd("SADD", "gone", "a") + cmd("PEXPIRE", "gone", "1"))
        c.data_to_send()
        core.now_ms += 10
        c.receive_data(cmd("SREM", "gone", "x") * 3)
        assert c.data_to_send() == b":0\r\n" * 3
        assert core.replication.backlog.read_from(1)[-1].endswith(cmd("DEL", "gone"))
        assert c.woff == core.replication.master_repl_offset
    finally:
        fastpath.propagating = loop


def test_a_pipeline_of_one_command_is_one_run() -> None:
    core, c = warm_server(False)
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
    one, c1 = warm_server(True)
    many, c2 = warm_server(True)
    for r in reqs:
        c1.receive_data(cmd(*r))
        c1.data_to_send()
    data = b"".join(cmd(*r) for r in reqs)
    for i in range(0, len(data), 65536):
        c2.receive_data(data[i:i + 65536])
    c2.data_to_send()
    assert one.replication.backlog.nblocks > 10
    assert server_state(many, c2) == server_state(one, c1)


def test_whole_runs_leave_ttls_watches_and_wrong_types_to_the_handlers() -> None:
    """SET's and GET's whole-run forms (Command.whole) apply a run at once only when no
    request in it needs the handler's per-key work; each case here would differ otherwise."""
    core, c = warm_server(False)
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


WRITES = st.one_of(requests(), st.sampled_from([
    ["SET", "big", "x" * 9000], ["SET", "huge", "y" * 20000], ["SELECT", "1"], ["SELECT", "0"],
    ["EXPIRE", "big", "100"], ["INCR", "n"], ["DEL", "big"]]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(txs=st.lists(st.lists(WRITES, max_size=6), min_size=1, max_size=12))
def test_a_transaction_propagates_as_its_commands_one_by_one(txs: list[list[list[str]]]) -> None:
    """EXEC's propagation in one db as one span (flush_propagation): the same stream and the
    same backlog blocks as MULTI, each command and EXEC fed one by one (the reference: a core
    with no span feed), values across the 16 KiB blocks, SELECT inside and between."""
    span, c1 = warm_server(True)
    one, c2 = warm_server(True)
    one.repl_feed_span = None
    for tx in txs:
        data = b"".join(cmd(*r) for r in [["MULTI"], *tx, ["EXEC"]])
        c1.receive_data(data)
        c2.receive_data(data)
        assert c1.data_to_send() == c2.data_to_send()
    assert server_state(span, c1) == server_state(one, c2) and one.repl_feed_span is None
