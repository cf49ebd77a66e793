"""The dispatch in C (``pyrepl._dispatch.execute``) against the Python it stands for
(``ServerCore.execute`` with ``ServerCore.call``).

Two servers get the same random requests, one at a time: one through ``execute``, the other
through the Python method. After each request both must have written the same reply bytes (to
the client and to a client blocked on a list), hold the same dataset, INFO commandstats and
errorstats, dirty counter, the same bytes in the backlog, and the same value in every slot
of the client (the one the commands ran for and the blocked one).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.commands.table import COMMANDS
from pyrepl.core.client import Client
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.resp.fastreader import first
from pyrepl.resp.writer import encode
from tests.support.cores import NOW, cmd
from tests.support.execpaths import requests, server_state, warm_server
from tests.support.master_side import Master, online_replica, parse_full_sync
from tests.support.replica_side import synced_node

_native = native.load("pyrepl._dispatch")
if _native is None:
    pytest.skip(f"compares pyrepl/_dispatch.c with its Python reference ({native.WHY_PURE})",
                allow_module_level=True)
execute = _native.execute

_SKIP = {"core", "reader", "transport", "db", "repl", "subs", "tracking_prefixes",
         "_whole"}   # (the C leaves True there: pyrepl/_slots.h)


def _slots(c: Client) -> dict[str, object]:
    out = {}
    for name in Client.__slots__:
        if name in _SKIP:
            continue
        v = getattr(c, name)
        if name == "last_cmd" or name == "blocked":
            v = getattr(v, "name", None) if name == "last_cmd" else v is not None
        elif name == "multi_queue":
            v = [(q.name, a) for q, a in v]
        elif name == "watched":
            v = [(db.id, k, e) for db, k, e in v]
        out[name] = v
    return out


def _read(c: Client, r: list[str]) -> list[bytes]:
    """The request as the server reads it (so its bytes are the reader's: raw_last)."""
    argv = first(c.reader, cmd(*r))
    assert argv is not None and not c.reader.queue
    return argv


class _Clock:
    """A clock that moves 700 us a read (so that calls' times, the slow log and the latency
    monitor see the same durations in two worlds that read it as often)."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        self.ns += 700_000
        return self.ns


def _world(backlog: bool, waiter: bool | str):
    core, c = warm_server(backlog)
    core.clock_ns = _Clock()   # type: ignore[method-assign]
    w = None
    if waiter == "monitor":   # every call timed, and fed to MONITOR (timed_call's Python)
        w = core.connection_made()
        w.receive_data(cmd("MONITOR"))
        assert core.monitors and core.quick_below_ns == 0
    elif waiter:   # a client blocked on a list: the writes that wake it (blocking.after_write)
        w = core.connection_made()
        w.receive_data(cmd("BLPOP", "q", "0"))
        assert core.keys_waited
    return core, c, w


def _look(core: ServerCore, c: Client, w: Client | None) -> dict[str, object]:
    state = server_state(core, c)
    state["client"] = _slots(c)
    state["pending"] = list(core._pending)
    state["depth"] = core._call_depth
    state["timed"] = {k.name: (s.timed, s.timed_ns, dict(s.latency.counts))
                      for k, s in core.cmdstats.items()}
    state["slowlog"] = [(e.id, e.duration, e.argv) for e in core.slowlog.entries]
    state["latency"] = {k: (v.samples, v.max) for k, v in core.latency.events.items()}
    if w is not None:
        state["waiter"] = (_slots(w), w.data_to_send())
    return state


EXTRA = st.sampled_from([["LPUSH", "q", "x"], ["RPUSH", "q", "y", "z"], ["LPOP", "q"],
                         ["BLPOP", "q", "0"], ["CLIENT", "REPLY", "SKIP"],
                         ["CLIENT", "REPLY", "ON"], ["INCR", "s"], ["PUBLISH", "ch", "m"],
                         ["SET", "big", "1" * 30], ["INCRBY", "big", "1"],
                         ["SET", "large", "x" * 5000], ["APPEND", "large", "y" * 3000],
                         ["INCRBY", "neg", "-7"], ["DECRBY", "neg", "100"],
                         ["SET", "i64", "9223372036854775806"], ["INCR", "i64"],
                         ["DECRBY", "i64", "-1"], ["SET", "i64", "-9223372036854775807"],
                         ["DECR", "i64"], ["GET", "i64"], ["STRLEN", "large"],
                         # propagated as other words than the request (_feed.c's feed_argv)
                         ["XADD", "st", "*", "f", "v"], ["XADD", "st", "*", "f", "x" * 3000],
                         ["INCRBYFLOAT", "fl", "1.5"], ["EXPIRE", "s", "100"],
                         ["SET", "s", "v", "EX", "100"], ["GETEX", "s", "PX", "5000"],
                         # every call timed, or some slow enough for the logs
                         ["CONFIG", "SET", "slowlog-log-slower-than", "0"],
                         ["CONFIG", "SET", "slowlog-log-slower-than", "1000"],
                         ["CONFIG", "SET", "slowlog-log-slower-than", "10000"],
                         ["CONFIG", "SET", "latency-monitor-threshold", "1"],
                         ["CONFIG", "SET", "latency-monitor-threshold", "0"],
                         ["CONFIG", "SET", "latency-tracking", "no"],
                         ["CONFIG", "SET", "latency-tracking", "yes"]])


@pytest.mark.parametrize("backlog,waiter", [(False, False), (True, False), (True, True),
                                            (False, "monitor")])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.one_of(requests(), EXTRA), min_size=1, max_size=50))
@example(reqs=[["SET", "s", "v"], ["INCR", "s"], ["LPUSH", "q", "x"], ["GET", "s"]] * 20)
def test_execute_is_the_python_dispatch(backlog: bool, waiter: bool | str,
                                        reqs: list[list[str]]) -> None:
    a = _world(backlog, waiter)
    b = _world(backlog, waiter)
    for r in reqs:
        execute(a[0], a[1], _read(a[1], r))
        ServerCore.execute(b[0], b[1], _read(b[1], r))
        assert a[1].data_to_send() == b[1].data_to_send()
        assert _look(*a) == _look(*b)


_NOT_IN_EXEC = {b"multi", b"exec", b"discard", b"watch", b"blpop", b"client"}


@pytest.mark.parametrize("backlog,depth", [(False, 1), (True, 1), (True, 0)])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.one_of(requests(), EXTRA), min_size=1, max_size=40))
def test_call_is_the_python_call(backlog: bool, depth: int, reqs: list[list[str]]) -> None:
    """``_dispatch.call`` (what EXEC makes of each queued command) against ``ServerCore.call``,
    one call level deep as inside EXEC (or at the top, where a write is still left pending
    for the caller, not fed): the same replies, and after each call the same state, the
    propagation pending alike (the commands a transaction never runs, and wrong arities,
    which EXEC never sees, aside)."""
    a = _world(backlog, False)
    b = _world(backlog, False)
    for r in reqs:
        replies = []
        for (core, c, _), fn in ((a, _native.call), (b, ServerCore.call)):
            argv = _read(c, r)
            name = argv[0].lower()
            command = COMMANDS.get(name)
            if command is not None and command.subcommands and len(argv) > 1:
                command = command.subcommands.get(argv[1].lower())
            if command is None or name in _NOT_IN_EXEC or command.handler is None or \
                    not command.min_args <= len(argv) <= command.max_args:
                continue
            core._call_depth += depth
            replies.append(encode(fn(core, c, command, argv), c.proto))
            core._call_depth -= depth
        assert replies[:1] == replies[1:]
        assert _look(*a) == _look(*b)


def test_call_takes_the_reference_for_anything_else() -> None:
    """A command's first call (no commandstats record yet) and a core of another class: the
    Python method."""
    core, c, _ = _world(False, False)
    echo = COMMANDS[b"echo"]
    core.cmdstats.pop(echo, None)
    assert _native.call(core, c, echo, [b"ECHO", b"hi"]) == b"hi"
    assert core.cmdstats[echo].calls == 1
    with pytest.raises(AttributeError):
        _native.call(object(), c, echo, [b"ECHO", b"hi"])


def test_a_timed_call_reads_the_shells_clock() -> None:
    """The shell's clock, time.perf_counter_ns, which the C reads itself (CLOCK_MONOTONIC):
    a call of a command timed at every call (KEYS) records what it took, in ns, on that
    clock: no more than the time around it, and most of it."""
    core, c, _ = _world(False, False)
    core.clock_ns = time.perf_counter_ns   # type: ignore[method-assign]
    execute(core, c, [b"MSET", *(x for i in range(2000) for x in (b"k%d" % i, b"v"))])
    keys = [b"KEYS", b"*"]
    execute(core, c, keys)   # (its commandstats record made)
    st = core.cmdstats[COMMANDS[b"keys"]]
    for n in range(2, 5):
        was = st.timed_ns
        t0 = time.perf_counter_ns()
        execute(core, c, keys)
        around = time.perf_counter_ns() - t0
        assert st.timed == n and around // 10 < st.timed_ns - was <= around
        assert sum(st.latency.counts.values()) == n


# Values of any size: some fill the backlog's tail block exactly, some just miss.
SIZED = st.integers(0, 17000).map(lambda n: ["SET", "sized", "x" * n])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.one_of(requests(), EXTRA, SIZED), min_size=1, max_size=40),
       join=st.integers(0, 40))
@example(reqs=[["SET", "large", "x" * 5000]] * 8 + [["SELECT", "1"], ["SET", "s", "v"]] * 2,
         join=3)
def test_execute_streams_to_replicas_as_the_python_dispatch(reqs: list[list[str]],
                                                            join: int) -> None:
    """With two online replicas (each a diskless full sync away), and a third whose full
    sync starts before request ``join`` (its place in the buffer is set by the next write):
    the same bytes reach each replica's socket (the I/O shell's writes after each request),
    the backlog holds the same blocks, offsets and bytes, and the same clients are scheduled
    for a write; the third gets the same stream after its snapshot."""
    _same_stream(reqs, join)


def _masters(d: str) -> tuple[Master, list[Client]]:
    m = Master(d)
    replicas = [online_replica(m)[0] for _ in range(2)]
    for r in replicas:
        m.take(r)
    return m, replicas


@pytest.mark.parametrize("over", [-2, -1, 0, 1, 2, 99])
def test_a_write_at_the_tail_blocks_edge_streams_as_the_python(over: int) -> None:
    """A request ``over`` bytes longer than the room left in the tail block (fits exactly,
    by one byte less, just misses): it goes in C only when it fits."""
    with tempfile.TemporaryDirectory() as d:
        m, _ = _masters(d)
        execute(m.core, m.user, _read(m.user, ["SET", "pad", "x" * 1000]))
        room = m.repl.backlog.room()
    n = room + over - len(cmd("SET", "sized", ""))
    n -= len(str(n)) - 1       # (the length's digits: len(b"$%d" % n) grows with n)
    assert len(cmd("SET", "sized", "x" * n)) == room + over
    _same_stream([["SET", "pad", "x" * 1000], ["SET", "sized", "x" * n], ["SET", "s", "v"]], 2)


def _same_stream(reqs: list[list[str]], join: int) -> None:
    """Request i through ``execute`` (C) on one master, ``ServerCore.execute`` on the other,
    whose Replication.feed encodes a rewritten write in Python (not ``feed_argv``)."""
    fns = (execute, ServerCore.execute)

    def step(w: int, m: Master, i: int) -> None:
        if w == 1:
            m.repl.feed_argv_c = lambda *a: False   # type: ignore[method-assign]
            m.repl.feed_transaction_c = lambda *a: False   # type: ignore[method-assign]
        fns[w](m.core, m.user, _read(m.user, reqs[i]))

    _compare_streams(len(reqs), join, step)


def _compare_streams(n: int, join: int, step: Callable[[int, Master, int], None]) -> None:
    """Two masters (worlds 0 and 1) with two online replicas each; ``step(world, master, i)``
    for i in range(n), a third replica's full sync starting before step ``join``. After each
    step both must have the same reply bytes, clients scheduled for a write, bytes to each
    replica's socket, backlog, offsets, ``woff`` and counts; the third replica the same
    stream after its snapshot."""
    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        masters = [_masters(d) for d in (da, db)]
        for i in range(n):
            seen = []
            for w, (m, replicas) in enumerate(masters):
                if i == join:
                    late = m.replica("eof", "psync2")
                    m.send(late, "PSYNC", "?", "-1")
                    replicas.append(late)
                step(w, m, i)
                scheduled = [c.id for c in m.core.pending_flush]
                m.flush()
                backlog = m.repl.backlog
                assert backlog.last_byte_offset == m.repl.master_repl_offset
                seen.append((m.user.data_to_send(), scheduled,
                             [m.take(x) for x in replicas[:2]],
                             m.repl.master_repl_offset, backlog.first_byte_offset,
                             backlog.histlen, backlog.nblocks, backlog.mem,
                             b"".join(backlog.read_from(backlog.first_byte_offset)),
                             m.user.woff, m.user.commands, m.repl.stream_db))
            assert seen[0] == seen[1]
        got = []
        for m, replicas in masters:
            if len(replicas) == 3:
                pid = m.link(replicas[2]).snapshot.pid
                m.io.run_child(pid)
                m.child_exits(pid)
                m.send(replicas[2], "REPLCONF", "ACK", "0")
                sync = parse_full_sync(m.wire(replicas[2]))
                got.append((sync.offset, sync.stream))
        assert got == [] or got[0] == got[1]


def test_the_common_case_runs_no_python_dispatch() -> None:
    """A plain SET, GET and INCR after their first call: no Python runs for the request, not
    even ``timed_call`` for the timed sample (one call in 16: its commandstats and
    latencystats records are made in C, ``timed_quick``); and the same requests through the
    Python method do run ``execute`` and ``call``."""
    core, c, _ = _world(True, False)
    frames: list[str] = []

    core_files = {ServerCore.execute.__code__.co_filename,      # pyrepl/core/dispatch.py
                  ServerCore.flush_propagation.__code__.co_filename}  # .../propagation.py

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename in core_files:
            frames.append(frame.f_code.co_name)

    for fn in (execute, ServerCore.execute):
        frames.clear()
        pending = core._pending
        sys.setprofile(profile)
        try:
            for i in range(15):
                for r in (["SET", f"k{i}", "v"], ["GET", f"k{i}"], ["INCR", "n"]):
                    fn(core, c, _read(c, r))
        finally:
            sys.setprofile(None)
        c.data_to_send()
        dispatch = [f for f in frames if f in ("execute", "call")]
        if fn is execute:
            assert not dispatch and "timed_call" not in frames
            timed = {cmd.name: st.timed for cmd, st in core.cmdstats.items()}
            assert all(timed[name] >= 1 for name in ("set", "get", "incr")), timed
        else:
            assert len(dispatch) == 15 * 3 * 2
        if fn is execute:    # a write's feed, the request as it is: _feed.c (but sampled),
            assert frames.count("flush_propagation") <= 2
            assert core._pending is pending   # straight from the call, _pending untouched
        else:
            assert frames.count("flush_propagation") == 15 * 2
            assert core._pending is not pending and core._pending == []


def test_a_commands_record_is_remembered_per_core() -> None:
    """The C call remembers a command's commandstats record on the command for the core's
    dict it came from (Command.stat_of): two cores calling the same command in turn each
    count their own calls, and CONFIG RESETSTAT (the records reset in place) leaves what is
    remembered right."""
    (a, ca, _), (b, cb, _) = _world(True, False), _world(True, False)
    set_cmd = COMMANDS[b"set"]
    start = {core: core.cmdstats[set_cmd].calls for core in (a, b)}   # (the warm-up's)
    for i in range(7):
        execute(a, ca, _read(ca, ["SET", "k", str(i)]))
        if i % 2:
            execute(b, cb, _read(cb, ["SET", "k", str(i)]))
        assert set_cmd.stat_of is not None
    assert a.cmdstats[set_cmd].calls == start[a] + 7
    assert b.cmdstats[set_cmd].calls == start[b] + 3
    assert set_cmd.stat_of == (a.cmdstats, a.cmdstats[set_cmd])
    execute(a, ca, _read(ca, ["CONFIG", "RESETSTAT"]))
    for i in range(4):
        execute(a, ca, _read(ca, ["SET", "k", str(i)]))
    execute(b, cb, _read(cb, ["SET", "k", "x"]))
    assert a.cmdstats[set_cmd].calls == 4
    assert b.cmdstats[set_cmd].calls == start[b] + 4
    ca.data_to_send()
    cb.data_to_send()


def _replica_look(n) -> dict[str, object]:
    core, mc = n.core, n.side.stream.master.client
    return {"digest": dataset_digest(core.dbs, NOW),
            "cmdstats": {k.name: (s.calls, s.failed, s.rejected)
                         for k, s in core.cmdstats.items()},
            "errors": (dict(core.errorstats), core.stats.unexpected_error_replies),
            "stats": (core.dirty, core.stats.keyspace_hits, core.stats.keyspace_misses),
            "client": _slots(mc), "db": mc.db.id}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(st.one_of(requests(), EXTRA), min_size=1, max_size=40))
@example(reqs=[["SET", "s", "v"], ["INCR", "n"], ["SELECT", "1"], ["LPUSH", "q", "x"],
               ["GET", "s"], ["GET", "e1"], ["EXPIRE", "s", "100"], ["SET", "s", "w"]] * 3)
def test_execute_runs_a_replicas_master_stream_as_the_python_dispatch(
        reqs: list[list[str]]) -> None:
    """On a replica, the commands of its master's stream (run as the master client, kind
    ``master``: no READONLY check, expired keys kept until the master's DEL) give what the
    Python method gives: the same replies (dropped by the stream, compared here), dataset,
    counters and client slots."""
    a, b = synced_node(), synced_node()
    for r in reqs:
        for n, run in ((a, execute), (b, ServerCore.execute)):
            mc = n.side.stream.master.client
            n.core.applying_master_stream = True   # (as the stream's reads set it)
            try:
                run(n.core, mc, _read(mc, r))
            finally:
                n.core.applying_master_stream = False
        assert a.side.stream.master.client.data_to_send() == \
            b.side.stream.master.client.data_to_send()
        assert _replica_look(a) == _replica_look(b)


def test_a_replicas_master_stream_runs_no_python_dispatch() -> None:
    """The master client's plain writes and transactions (MULTI's queue included) take the C
    path (the handler aside, in C too: one sampled call of each in Python at most); a user client of the same read-only replica
    still goes to the Python method, which answers READONLY."""
    n = synced_node()
    mc = n.side.stream.master.client
    frames: list[str] = []

    core_files = {ServerCore.execute.__code__.co_filename,      # pyrepl/core/dispatch.py
                  ServerCore.flush_propagation.__code__.co_filename}  # .../propagation.py

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename in core_files:
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        for i in range(15):
            for r in (["SET", f"k{i}", "v"], ["INCR", "n"], ["HSET", "h", f"f{i}", "v"],
                      ["MULTI"], ["SET", "t", f"{i}"], ["PEXPIREAT", "t", "99999999999999"],
                      ["EXEC"]):
                execute(n.core, mc, _read(mc, r))
    finally:
        sys.setprofile(None)
    assert len([f for f in frames if f in ("execute", "call")]) <= 7 * 2, frames
    assert n.core.dbs[0].data[b"n"] == b"15" and n.core.dbs[0].data[b"t"] == b"14"
    execute(n.core, n.client, _read(n.client, ["SET", "k", "v"]))
    assert n.client.data_to_send() == \
        b"-READONLY You can't write against a read only replica.\r\n"


def test_execute_takes_the_reference_for_anything_else() -> None:
    """Not a core, an empty request, an unknown command: the Python method answers (with its
    own errors)."""
    core, c, _ = _world(False, False)
    execute(core, c, [b"NOSUCH", b"x"])
    assert c.data_to_send().startswith(b"-ERR unknown command 'NOSUCH'")
    execute(core, c, [b"GET"])
    assert c.data_to_send() == b"-ERR wrong number of arguments for 'get' command\r\n"
    with pytest.raises(AttributeError):
        execute(object(), c, [b"PING"])


# -- a pipelining client's runs of writes (replication/_feed.c: feed_span) ------------------

# Runs of SETs whose bytes fill the tail block or just miss it, with other requests between.
RUN_OF_SETS = st.lists(st.one_of(SIZED, st.integers(0, 99).map(lambda i: ["SET", f"k{i}", "v"])),
                       min_size=1, max_size=24)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(st.tuples(RUN_OF_SETS, st.lists(st.one_of(requests(), EXTRA), max_size=6)),
                     min_size=1, max_size=8),
       join=st.integers(0, 8))
@example(runs=[([["SET", "large", "x" * 5000]] * 3, [["SELECT", "1"]])] * 4, join=2)
def test_runs_of_writes_stream_to_replicas_as_the_python(runs, join: int) -> None:
    """Pipelined reads (a run of SETs, then a few other requests) to two masters, one feeding
    its spans in C (``feed_span``), the other through ``Replication.feed_span`` alone: the
    same replies, scheduled writes, replicas' bytes and backlog (``_compare_streams``)."""
    reads = [b"".join(cmd(*r) for r in sets + more) for sets, more in runs]

    def step(world: int, m: Master, i: int) -> None:
        if world == 1:
            m.repl.feed_span_c = lambda *a: False   # type: ignore[method-assign]
            m.repl.feed_argv_c = lambda *a: False   # type: ignore[method-assign]
            m.repl.feed_transaction_c = lambda *a: False   # type: ignore[method-assign]
        m.user.receive_data(reads[i])

    _compare_streams(len(reads), join, step)


def test_a_run_of_writes_that_fits_is_fed_in_c() -> None:
    """A run of SETs that fits in the tail block takes no Python feed (the spans' fast path
    is used, not just allowed)."""
    with tempfile.TemporaryDirectory() as d:
        m, _ = _masters(d)
        m.user.receive_data(cmd("SET", "a", "1"))      # (the stream's SELECT goes first)
        m.user.data_to_send()
        fed = []
        m.core.repl_feed_span = lambda *a: fed.append(a)   # type: ignore[assignment]
        before = m.repl.master_repl_offset
        data = cmd("SET", "k", "v") * 16
        m.user.receive_data(data)
        assert m.user.data_to_send() == b"+OK\r\n" * 16
        assert fed == [] and m.repl.master_repl_offset == before + len(data)
        assert m.user.woff == m.repl.master_repl_offset
