"""Cluster mode's fast paths end to end: a cluster of three pyrepl masters (two running their
C extensions, one as plain Python: ``PYREPL_PURE=1``), each sent a SET and a GET of a key of
every one of the 16,384 slots, sixteen requests a write on a raw socket (redis-benchmark's
-P16), answers each as the slot's owner says: run for its own slots, ``-MOVED slot ip:port``
for the others; a slot being migrated answers ``-ASK`` for a missing key and runs a present
one, an importing slot runs a command after ASKING only (ASKING lasts one command), and
keys of two slots are ``-CROSSSLOT`` — in the middle of runs of commands it serves."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from pyrepl.keyspace.hashslot import key_hash_slot
from tests.support.cluster import SLOTS, Node, agreed, build, start_node
from tests.support.resp import RawClient, encode_command
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

DEPTH = 16


@contextmanager
def three_masters() -> Iterator[list[Node]]:
    """Three masters, the last started as plain Python, sharing the slots (build)."""
    with ExitStack() as stack:
        nodes = []
        for pure in (False, False, True):
            was = os.environ.get("PYREPL_PURE")
            if pure:
                os.environ["PYREPL_PURE"] = "1"
            try:
                n = start_node("pyrepl")
            finally:
                if pure and was is None:
                    os.environ.pop("PYREPL_PURE", None)
            stack.callback(n.proc.stop)
            nodes.append(n)
        build(nodes)
        wait_for(lambda: agreed(nodes), 60, what="the cluster to agree")
        yield nodes


def one_key_per_slot() -> list[bytes]:
    keys: list[bytes | None] = [None] * SLOTS
    left, i = SLOTS, 0
    while left:
        k = b"key:%d" % i
        s = key_hash_slot(k)
        if keys[s] is None:
            keys[s] = k
            left -= 1
        i += 1
    return keys  # type: ignore[return-value]


def pipelined(port: int, reqs: list[list[bytes | str | int]]) -> list[bytes]:
    """The replies to ``reqs``, sent DEPTH at a time on one connection."""
    out: list[bytes] = []
    with RawClient(port, timeout=30) as c:
        for i in range(0, len(reqs), DEPTH):
            batch = reqs[i:i + DEPTH]
            c.send_raw(b"".join(encode_command(*r) for r in batch))
            out += [c.read_reply() for _ in batch]
    return out


def owners(nodes: list[Node]) -> list[int]:
    """slot -> the port of the node that serves it."""
    port_of = {n.myid(): n.port for n in nodes}
    table = [0] * SLOTS
    for name, ranges in nodes[0].owners().items():
        for a, b in ranges:
            for j in range(a, b + 1):
                table[j] = port_of[name]
    assert all(table)
    return table


def test_every_slot_runs_here_or_is_moved_at_depth_16() -> None:
    with three_masters() as nodes:
        owner = owners(nodes)
        keys = one_key_per_slot()
        for n in nodes:
            sets = pipelined(n.port, [[b"SET", k, k] for k in keys])
            gets = pipelined(n.port, [[b"GET", k] for k in keys])
            for slot, (k, s, g) in enumerate(zip(keys, sets, gets, strict=True)):
                if owner[slot] == n.port:
                    assert (s, g) == (b"+OK\r\n", b"$%d\r\n%s\r\n" % (len(k), k)), (n, slot)
                else:
                    moved = b"-MOVED %d 127.0.0.1:%d\r\n" % (slot, owner[slot])
                    assert s == g == moved, (n, slot, s, g)
            assert int(n.cmd("DBSIZE")) == sum(p == n.port for p in owner)


def test_migrating_importing_and_crossslot_in_runs() -> None:
    with three_masters() as nodes:
        owner = owners(nodes)
        keys = one_key_per_slot()
        for a in nodes:   # (the pure Python node and the C ones alike)
            b = next(n for n in nodes if n is not a)
            mine = [j for j in range(SLOTS) if owner[j] == a.port]
            theirs = [j for j in range(SLOTS) if owner[j] == b.port]
            s, t = mine[7], theirs[7]
            ka = [keys[j] for j in mine[100:110]]      # keys of other slots served by a
            present, missing = _in_slot(s, b"present"), _in_slot(s, b"missing")
            assert a.cmd("SET", present, "v") is True
            assert a.cmd("CLUSTER", "SETSLOT", s, "MIGRATING", b.myid()) == "OK"
            ask = b"-ASK %d 127.0.0.1:%d\r\n" % (s, b.port)
            reqs: list[list[bytes | str | int]] = [
                *[[b"SET", k, b"x"] for k in ka[:5]], [b"GET", present], [b"GET", missing],
                [b"SET", missing, b"x"], *[[b"GET", k] for k in ka[:5]],
                [b"MSET", ka[0], b"1", ka[1], b"2"], [b"SET", present, b"w"],
                [b"MSET", present, b"1", missing, b"2"], [b"PING"]]
            got = pipelined(a.port, reqs)
            assert got == [*[b"+OK\r\n"] * 5, b"$1\r\nv\r\n", ask, ask,
                           *[b"$1\r\nx\r\n"] * 5,
                           b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
                           b"+OK\r\n",
                           b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
                           b"+PONG\r\n"], (a, got)
            assert a.cmd("CLUSTER", "SETSLOT", s, "STABLE") == "OK"
            assert pipelined(a.port, [[b"GET", missing]] * 3) == [b"$-1\r\n"] * 3
            # importing t from b: served after ASKING only, for one command
            assert a.cmd("CLUSTER", "SETSLOT", t, "IMPORTING", b.myid()) == "OK"
            kt = _in_slot(t, b"imported")
            moved = b"-MOVED %d 127.0.0.1:%d\r\n" % (t, b.port)
            got = pipelined(a.port, [[b"GET", kt], [b"ASKING"], [b"SET", kt, b"1"],
                                     [b"GET", kt], [b"ASKING"], [b"GET", kt],
                                     *[[b"GET", k] for k in ka[:3]]])
            assert got == [moved, b"+OK\r\n", b"+OK\r\n", moved, b"+OK\r\n", b"$1\r\n1\r\n",
                           *[b"$1\r\nx\r\n"] * 3], (a, got)
            assert a.cmd("CLUSTER", "SETSLOT", t, "STABLE") == "OK"
            assert a.cmd("DEL", present) == 1
            # the moved key of t went nowhere: a later reader on a is redirected again
            assert pipelined(a.port, [[b"GET", kt]]) == [moved]
            assert a.cmd("CLUSTER", "COUNTKEYSINSLOT", t) == 1
            a.cmd("CLUSTER", "SETSLOT", t, "IMPORTING", b.myid())
            assert pipelined(a.port, [[b"ASKING"], [b"DEL", kt]]) == [b"+OK\r\n", b":1\r\n"]
            a.cmd("CLUSTER", "SETSLOT", t, "STABLE")


def _in_slot(slot: int, stem: bytes) -> bytes:
    """A key of ``slot``: ``stem`` with a hash tag found for it."""
    i = 0
    while True:
        k = b"%s{%d}" % (stem, i)
        if key_hash_slot(k) == slot:
            return k
        i += 1
