"""Lazy freeing (pyrepl/core/lazyfree.py): the free effort of each encoding, the core's hand-off
(the sans-io port done at once) and the I/O shell's thread (pyrepl/net/bio.py)."""

from __future__ import annotations

import threading
import time
from collections import deque

from pyrepl.core.lazyfree import (
    LAZYFREE_THRESHOLD,
    InlineFree,
    LazyFree,
    free_effort,
    quicklist_nodes,
)
from pyrepl.core.server import ServerCore
from pyrepl.net.bio import BackgroundFree
from tests.support.cores import make_core, run


def _core() -> ServerCore:
    core = make_core()
    core.test_client = core.connection_made()  # type: ignore[attr-defined]
    return core


def call(core: ServerCore, *argv: bytes | str) -> bytes:
    return run(core.test_client, *argv)  # type: ignore[attr-defined]


def test_effort_follows_redis_encodings() -> None:
    core = _core()
    db = core.dbs[0]
    call(core, "SADD", "ht", *(b"m%d" % i for i in range(100)))
    call(core, "SADD", "is", *(b"%d" % i for i in range(100)))
    call(core, "ZADD", "sl", *(x for i in range(200) for x in (b"%d" % i, b"m%d" % i)))
    call(core, "ZADD", "lp", b"1", b"a")
    call(core, "HSET", "hh", *(x for i in range(600) for x in (b"f%d" % i, b"v")))
    call(core, "HSET", "hl", *(x for i in range(100) for x in (b"f%d" % i, b"v")))
    call(core, "SET", "s", b"x" * 1000)
    call(core, "RPUSH", "short", *(b"%d" % i for i in range(10)))
    effort = {k: free_effort(db.data.peek(k.encode()), core)
              for k in ("ht", "is", "sl", "lp", "hh", "hl", "s", "short")}
    assert effort == {"ht": 100, "is": 1, "sl": 200, "lp": 1, "hh": 600, "hl": 1, "s": 1,
                      "short": 1}


def test_stream_effort_counts_nodes_and_groups() -> None:
    core = _core()
    call(core, "CONFIG", "SET", "stream-node-max-entries", "5")
    for j in range(100):
        call(core, "XADD", "st", "*", "f", b"%d" % j)
    v = core.dbs[0].data.peek(b"st")
    assert free_effort(v, core) == 20
    call(core, "XGROUP", "CREATE", "st", "g1", "0")
    call(core, "XGROUP", "CREATE", "st", "g2", "0")
    call(core, "XREADGROUP", "GROUP", "g1", "alice", "COUNT", "3", "STREAMS", "st", ">")
    assert free_effort(v, core) == 20 + 2 * (1 + 3)


def test_quicklist_nodes_exact_to_the_threshold_then_by_bytes() -> None:
    assert quicklist_nodes(deque([b"x"] * LAZYFREE_THRESHOLD)) == LAZYFREE_THRESHOLD
    # 8 KB nodes (list-max-listpack-size -2): 1,000 entries of 1 KB are ~128 nodes
    n = quicklist_nodes(deque([b"x" * 1022] * 1000))
    assert 120 <= n <= 130, n
    # 1,000 one-byte entries fit one node's bytes
    assert quicklist_nodes(deque([b"x"] * 1000)) == 1


def test_core_hands_big_values_and_tables_to_its_port() -> None:
    core = _core()
    port = core.lazyfree.port
    assert isinstance(port, InlineFree)
    call(core, "SADD", "big", *(b"m%d" % i for i in range(65)))
    call(core, "SADD", "small", *(b"m%d" % i for i in range(64)))
    assert call(core, "UNLINK", "small") == b":1\r\n"
    assert port.jobs == 0
    assert call(core, "UNLINK", "big") == b":1\r\n"
    assert (port.jobs, port.freed()) == (1, 1)
    call(core, "MSET", "a", "1", "b", "2", "c", "3")
    call(core, "FLUSHDB", "ASYNC")
    assert (port.jobs, port.freed()) == (2, 4)
    assert b"lazyfreed_objects:4\r\n" in call(core, "INFO", "memory")
    call(core, "CONFIG", "RESETSTAT")
    assert port.freed() == 0


class Traced:
    """Records the thread that freed it."""
    where: list[str] = []

    def __del__(self) -> None:
        Traced.where.append(threading.current_thread().name)


def test_background_thread_frees_and_counts() -> None:
    bio = BackgroundFree()
    Traced.where.clear()
    objs = [Traced() for _ in range(3)]
    bio.release(objs, 3)
    del objs
    deadline = time.monotonic() + 5
    while bio.freed() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (bio.pending(), bio.freed()) == (0, 3)
    assert Traced.where == ["lazyfree"] * 3
    bio.reset_freed()
    assert bio.freed() == 0


def test_lazyfree_keeps_small_values() -> None:
    core = _core()
    lf = LazyFree(core, InlineFree())
    assert lf.free_value(b"x" * 10_000) is False
    assert lf.port.jobs == 0  # type: ignore[attr-defined]
