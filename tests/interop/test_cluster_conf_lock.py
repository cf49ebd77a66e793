"""nodes.conf is locked for the node's life (clusterLockConfig): a second node started on the
same file, pyrepl or redis-server 7.0.15, stops with Redis's words, also after the file has
been replaced by saves (each save locks the new file before it takes the name); the lock goes
with the process, SIGKILL included, and a forked child does not keep it."""

from __future__ import annotations

import os
import signal
import tempfile
import time

import pytest
import redis

from tests.support.procs import free_port, start_pyrepl, start_redis
from tests.support.waits import wait_for

SORRY = ("Sorry, the cluster configuration file nodes.conf is already used by a different "
         "Redis Cluster node. Please make sure that different nodes use different cluster "
         "configuration files.")


def flags() -> tuple[str, ...]:
    return ("--cluster-enabled", "yes", "--cluster-port", str(free_port()))


def refused(start, directory: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError) as e:
        start(*flags(), tmpdir=directory).stop()
    return str(e.value)


def test_a_second_node_on_the_same_nodes_conf_is_refused_pyrepl_or_redis() -> None:
    d = tempfile.mkdtemp(prefix="cluster-lock-")
    first = start_pyrepl(*flags(), tmpdir=d)
    try:
        ino = os.stat(os.path.join(d, "nodes.conf")).st_ino
        with redis.Redis(port=first.port) as c:
            assert c.execute_command("CLUSTER", "SAVECONFIG") in (b"OK", "OK")
            # a new file under the name (the old one was still open: a new inode)
            assert os.stat(os.path.join(d, "nodes.conf")).st_ino != ino
            for _ in range(3):          # and more saves
                assert c.execute_command("CLUSTER", "SAVECONFIG") in (b"OK", "OK")
                assert c.execute_command("CLUSTER", "BUMPEPOCH")
        assert SORRY in refused(start_pyrepl, d)
        assert SORRY in refused(start_redis, d)       # Redis flocks the same name
        with redis.Redis(port=first.port) as c:       # the first node never noticed
            assert c.ping()
        # a forked child (BGSAVE, slowed by rdb-key-save-delay) does not hold the lock: with
        # the server killed, a new node starts while the child still runs
        with redis.Redis(port=first.port) as c:
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            wait_for(lambda: b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"), 10)
            c.set("k", "v")
            c.config_set("rdb-key-save-delay", 10_000_000)
            c.bgsave()
            wait_for(lambda: c.info("persistence")["rdb_bgsave_in_progress"] == 1, 10)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        t0 = time.monotonic()
        second = start_pyrepl(*flags(), tmpdir=d)
        try:
            assert time.monotonic() - t0 < 8          # (not after the child's 10 s)
            with redis.Redis(port=second.port) as c:
                assert c.ping()
        finally:
            second.stop()
    finally:
        first.stop()


def test_pyrepl_is_refused_on_the_nodes_conf_a_redis_node_holds() -> None:
    d = tempfile.mkdtemp(prefix="cluster-lock-")
    theirs = start_redis(*flags(), tmpdir=d)
    try:
        assert SORRY in refused(start_pyrepl, d)
    finally:
        theirs.stop()
    ours = start_pyrepl(*flags(), tmpdir=d)       # free again: it starts, on Redis's file
    ours.stop()
