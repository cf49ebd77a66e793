"""A replica's read of its master's stream in C (pyrepl/replication/replica/_streamread.c)
against its reference, ``ReplicaSide.on_data``'s Python.

Two replicas, synced from the same full sync, get the same stream in the same reads: one
through the side's own ``on_data`` (the C, installed on the instance), the other through the
class's function (the Python all the way: the C hands anything but its common case to it).
The stream mixes what the loop meets: lone writes, runs of one command (``apply_batch``),
SELECT, transactions, errors replied to the master (``propagation_error``), ``REPLCONF
GETACK`` (an ACK sent), requests cut across reads, and optionally a protocol error (the master
dropped) and a sub-replica to pass the stream on to. After every read both hold the same
dataset, offsets, counters, backlog, sent bytes, events and link state.
"""

from __future__ import annotations

import asyncio
import time
from types import MethodType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrepl.commands  # noqa: F401
from pyrepl import native
from pyrepl.net.replica_io import ReplicaIO, _MasterLinkProtocol
from pyrepl.replication.replica import ReplicaSide
from tests.support.cores import cmd
from tests.support.replica_side import Node, synced_node, with_sub_replica

pytestmark = pytest.mark.skipif(
    native.PURE, reason=f"compares _streamread.c with its reference ({native.WHY_PURE})")

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

_ITEMS = st.sampled_from([
    cmd("SET", "k", "v"), cmd("INCR", "n"), cmd("SELECT", "1"), cmd("SELECT", "0"),
    cmd("MULTI") + cmd("INCR", "n") + cmd("LPUSH", "l", "a") + cmd("EXEC"),
    cmd("MULTI") + cmd("SET", "t", "1"), cmd("EXEC"),
    b"".join(cmd("SET", f"r:{i}", "x") for i in range(6)),   # a run: apply_batch
    b"".join(cmd("INCR", "c") for _ in range(4)),
    cmd("INCR", "k"),   # an error when k holds "v": replied to the master, logged
    cmd("DEL", "k"), cmd("EXPIRE", "n", "1000"), cmd("PING"),
    cmd("SET", "big", "x" * 3000),
    cmd("REPLCONF", "GETACK", "*"),
])


def _state(x: Node) -> tuple[object, ...]:
    ms = x.side.stream.master
    bl = x.repl.backlog
    st_ = x.core.stats
    return (x.digest(), x.side.state, x.repl.master_repl_offset,
            None if bl is None else b"".join(bl.read_from(bl.first_byte_offset)),
            None if ms is None else (ms.reploff, ms.read_reploff, ms.fed, bytes(ms.unapplied),
                                     ms.read, ms.client.net_in, ms.client.db.id,
                                     ms.client.last_interaction_ms),
            st_.net_repl_input_bytes, st_.unexpected_error_replies, x.io.take(), x.events(),
            x.core.applying_master_stream)


@SETTINGS
@given(items=st.lists(_ITEMS, min_size=1, max_size=30),
       cuts=st.lists(st.integers(0, 1 << 30), max_size=20), sub=st.booleans(),
       broken=st.booleans())
def test_a_read_in_c_does_what_the_python_does(items: list[bytes], cuts: list[int], sub: bool,
                                               broken: bool) -> None:
    nodes = [synced_node(), synced_node()]
    for x in nodes:
        if sub:
            with_sub_replica(x)
        x.core.now_ms += 1000   # (the read's clock: the interaction time moves)
    data = b"".join(items) + (b"GARBAGE\r\n" if broken else b"")
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    python_reads = [0, 0]
    for i, x in enumerate(nodes):   # (count the reads the Python's Stream.stream applies)
        real = x.side.stream.stream

        def spy(d: bytes, i: int = i, real=real) -> None:  # type: ignore[no-untyped-def]
            python_reads[i] += 1
            real(d)
        x.side.stream.stream = spy   # type: ignore[method-assign]
    reads = 0
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a == b:
            continue
        reads += 1
        c_node, py_node = nodes
        c_node.side.on_data(c_node.io.token, data[a:b])
        ReplicaSide.on_data(py_node.side, py_node.io.token, data[a:b])
        assert _state(c_node) == _state(py_node)
        for x in nodes:
            x.core.now_ms += 7
    assert python_reads[1] == reads   # (the reference read them all)
    assert python_reads[0] < reads or reads == 0   # (the C took its common case)
    if broken:
        assert nodes[0].side.stream.master is None   # (the master was dropped)


def test_a_read_of_one_set_is_the_cs() -> None:
    """A lone SET read while CONNECTED never reaches the Python's Stream.stream."""
    n = synced_node()
    called: list[bytes] = []
    n.side.stream.stream = called.append   # type: ignore[method-assign]
    n.feed(cmd("SET", "k", "v"))
    assert called == []
    ms = n.side.stream.master
    assert n.run("GET", "k") == b"$1\r\nv\r\n"
    assert ms.reploff == ms.read_reploff == ms.fed == n.repl.master_repl_offset


# -- the master link's read in the I/O shell (pyrepl/net/_serve.c: link_received) -------------

class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, msg: str) -> None:
        self.lines.append(msg)


class _Server:
    """What ReplicaIO reads of the server: its core, the stop event, the logger, the flags'
    two calls (recorded)."""

    _flush_scheduled = False

    def __init__(self, node: Node) -> None:
        self.core = node.core
        self._stop_event = asyncio.Event()
        self.logger = _Log()
        self.calls: list[str] = []

    def schedule_flush(self) -> None:
        self.calls.append("schedule_flush")
        for c in self.core.pending_flush:   # (the shell's write: the link takes it all)
            while self.core.replication.master.feeding.take(c.stream):
                pass
        self.core.pending_flush.clear()

    def shutdown_from_command(self) -> None:
        self.calls.append("shutdown")


def _linked(node: Node) -> tuple[_Server, _MasterLinkProtocol]:
    server = _Server(node)
    io = ReplicaIO(server)  # type: ignore[arg-type]
    io._token = node.io.token
    return server, _MasterLinkProtocol(io, node.io.token)


@given(items=st.lists(_ITEMS, min_size=1, max_size=20),
       cuts=st.lists(st.integers(0, 1 << 30), max_size=10), sub=st.booleans(),
       stopping=st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_links_read_in_c_is_the_protocols(items: list[bytes], cuts: list[int], sub: bool,
                                              stopping: bool) -> None:
    nodes = [synced_node(), synced_node()]
    linked = []
    for x in nodes:
        if sub:
            with_sub_replica(x)
        server, proto = _linked(x)
        if stopping:
            server._stop_event.set()
        linked.append((server, proto))
    assert isinstance(linked[0][1].__dict__.get("data_received"), MethodType)   # (the C's)
    data = b"".join(items)
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a == b:
            continue
        t0 = int(time.time() * 1000)
        linked[0][1].data_received(data[a:b])
        _MasterLinkProtocol.data_received(linked[1][1], data[a:b])
        for x in nodes:   # (the clock: set by the read, unless the server stops)
            assert (x.core.now_ms >= t0) is not stopping
            x.core.now_ms = 1
            ms = x.side.stream.master
            if ms is not None:
                assert (ms.client.last_interaction_ms >= t0) is not stopping
                ms.client.last_interaction_ms = 1
        states = [_state(x) + (s.calls, s.logger.lines)
                  for x, (s, _) in zip(nodes, linked, strict=True)]
        assert states[0] == states[1]


def test_a_callback_that_raises_is_logged_and_its_link_dropped_in_both() -> None:
    nodes = [synced_node(), synced_node()]
    outcome = []
    for i, x in enumerate(nodes):
        server, proto = _linked(x)

        def broken(token: int, data: bytes) -> None:
            raise RuntimeError("a bug")
        broken.__name__ = "on_data"
        x.side.on_data = broken   # type: ignore[method-assign]
        if i == 0:
            proto.data_received(cmd("SET", "k", "v"))
        else:
            _MasterLinkProtocol.data_received(proto, cmd("SET", "k", "v"))
        outcome.append((server.logger.lines, x.side.state, x.side.stream.master, x.events()))
    assert outcome[0] == outcome[1]
    assert outcome[0][0] == ["Replica link error in on_data: RuntimeError('a bug')"]
    assert outcome[0][2] is None   # (the master lost: its link closed)
