"""Lazy freeing (pyrepl/core/lazyfree.py) beside redis-server 7.0.15: the same commands on both,
the same INFO counters (``lazyfree_pending_objects``, ``lazyfreed_objects``) and the same
propagation (the AOF: DEL or UNLINK), after Redis's tests/unit/lazyfree.tcl."""

from __future__ import annotations

import os

import pytest

from tests.support.aof import (
    AOF_DIR,
    aof_files,
    aof_flags,
    aof_items,
    cmd,
    info,
    read_file,
    start_server,
)
from tests.support.waits import wait_for

pytestmark = pytest.mark.interop

KINDS = ("pyrepl", "redis")


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest, tmp_path):  # noqa: ANN201
    srv = start_server(request.param, str(tmp_path), *aof_flags("--appendfsync", "always"))
    try:
        yield srv
    finally:
        srv.stop()


def freed(port: int) -> int:
    """lazyfreed_objects once nothing is pending."""
    wait_for(lambda: info(port, "memory")["lazyfree_pending_objects"] == "0", 10,
             what="the lazy free to finish")
    return int(info(port, "memory")["lazyfreed_objects"])


def logged(directory: str) -> list[list[bytes]]:
    """The commands of the AOF's incr file, SELECT left out."""
    incr = [f for f in aof_files(directory) if f.endswith(".incr.aof")]
    data = read_file(os.path.join(directory, AOF_DIR, incr[-1]))
    return [a for k, a in aof_items(data) if k == "cmd" and a[0].upper() != b"SELECT"]


def test_unlink_frees_big_values_in_the_background(server) -> None:
    p = server.port
    cmd(p, "SADD", "big", *range(1000))            # a hash table of 1,000: effort 1,000
    cmd(p, "SADD", "small", *(f"m{i}" for i in range(64)))    # 64: freed at once
    cmd(p, "SADD", "ints", *range(100))            # an intset: one allocation
    cmd(p, "RPUSH", "list", *range(100))           # one quicklist node
    cmd(p, "HSET", "hash", *(x for i in range(600) for x in (f"f{i}", i)))
    cmd(p, "SET", "str", "x" * 100_000)
    assert cmd(p, "UNLINK", "small", "ints", "list", "str", "nosuchkey") == 4
    assert freed(p) == 0
    assert cmd(p, "UNLINK", "big", "hash") == 2
    assert freed(p) == 2
    assert cmd(p, "DBSIZE") == 0
    cmd(p, "CONFIG", "RESETSTAT")
    assert freed(p) == 0


def test_streams_by_their_nodes_and_groups(server) -> None:
    """Redis's two stream cases: 1,000 entries in nodes of 5, a group with a PEL (effort 200+)
    go to the background; one entry and a destroyed group do not."""
    p = server.port
    cmd(p, "CONFIG", "SET", "stream-node-max-entries", "5")
    for j in range(1000):
        cmd(p, "XADD", "stream", "*", "foo" if j % 10 else "bar", j)
    cmd(p, "XGROUP", "CREATE", "stream", "mygroup", "0")
    cmd(p, "XREADGROUP", "GROUP", "mygroup", "Alice", "COUNT", "2", "STREAMS", "stream", ">")
    cmd(p, "UNLINK", "stream")
    assert freed(p) == 1
    cmd(p, "CONFIG", "RESETSTAT")
    cmd(p, "XADD", "s", "*", "a", "b")
    cmd(p, "XGROUP", "CREATE", "s", "bla", "$")
    cmd(p, "XGROUP", "DESTROY", "s", "bla")
    cmd(p, "UNLINK", "s")
    assert freed(p) == 0


def test_flush_async_counts_every_key(server) -> None:
    p = server.port
    cmd(p, "MSET", *(x for i in range(300) for x in (f"k{i}", i)))
    cmd(p, "SELECT", "1")
    cmd(p, "SET", "other", "1", db=1)
    assert cmd(p, "FLUSHDB", "ASYNC") == b"OK"
    assert freed(p) == 300
    assert cmd(p, "DBSIZE", db=1) == 1
    cmd(p, "CONFIG", "SET", "lazyfree-lazy-user-flush", "yes")
    cmd(p, "MSET", "a", "1", "b", "2")
    cmd(p, "FLUSHALL")                       # lazily: the directive
    assert freed(p) == 300 + 2 + 1
    cmd(p, "MSET", "a", "1", "b", "2")
    cmd(p, "FLUSHALL", "SYNC")               # SYNC wins over the directive
    assert freed(p) == 303
    cmd(p, "SET", "x", "1")
    cmd(p, "FLUSHDB", "SYNC")
    assert freed(p) == 303


def test_user_del_and_expire_directives(server, tmp_path) -> None:
    """``lazyfree-lazy-user-del``: DEL frees as UNLINK, GETDEL propagates as UNLINK;
    ``lazyfree-lazy-expire``: an expired key (lazily, by EXPIRE in the past, by GETEX EXAT in
    the past) propagates as UNLINK and its big value is freed in the background."""
    p = server.port
    members = [f"m{i}" for i in range(100)]
    cmd(p, "DEBUG", "SET-ACTIVE-EXPIRE", "0")
    cmd(p, "CONFIG", "SET", "lazyfree-lazy-user-del", "yes")
    cmd(p, "SADD", "a", *members)
    assert cmd(p, "DEL", "a") == 1
    assert freed(p) == 1
    cmd(p, "SET", "g", "v")
    assert cmd(p, "GETDEL", "g") == b"v"
    cmd(p, "CONFIG", "SET", "lazyfree-lazy-user-del", "no")
    cmd(p, "SADD", "b", *members)
    assert cmd(p, "DEL", "b") == 1
    assert freed(p) == 1
    cmd(p, "CONFIG", "SET", "lazyfree-lazy-expire", "yes")
    cmd(p, "SADD", "c", *members)
    cmd(p, "PEXPIRE", "c", "1")
    wait_for(lambda: cmd(p, "EXISTS", "c") == 0, 5, what="c to expire")
    assert freed(p) == 2
    cmd(p, "SADD", "d", *members)
    assert cmd(p, "EXPIRE", "d", "-1") == 1
    cmd(p, "SET", "e", "v")
    assert cmd(p, "GETEX", "e", "EXAT", "1") == b"v"
    assert freed(p) == 3
    verbs = [a[0].upper() for a in logged(str(tmp_path)) if a[0].upper() in (b"DEL", b"UNLINK")]
    assert verbs == [b"DEL", b"UNLINK", b"DEL", b"UNLINK", b"UNLINK", b"UNLINK"], verbs
