"""Failover driven by real Redis Sentinel (issue 14): three real sentinels (``redis-server
--sentinel``, Debian's 7.0.15, quorum 2) watch a pyrepl master with two replicas (both pyrepl,
or a pyrepl and a real Redis) under a write load from redis-py's ``Sentinel(...).master_for``.

After ``kill -9`` of the master: a replica is promoted within 30 s; the other replica follows
it with a partial resync (``+CONTINUE`` on replid2: the new master counts no full sync); the
clients find the new master through the sentinels; every write acknowledged more than a second
before the kill is there; and the old master, restarted with its config file, is turned into a
replica by Sentinel and ends with the new master's digest.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time

import pytest
import redis
from redis.sentinel import Sentinel

from tests.support import procs
from tests.support.realpair import digest, info, wait_in_sync
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NAME = "mymaster"


def start_sentinel(master_port: int) -> procs.ServerProcess:
    tmpdir = tempfile.mkdtemp(prefix="sentinel-test-")
    port = procs.free_port()
    conf = os.path.join(tmpdir, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {tmpdir}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {master_port} 2\n"
                f"sentinel down-after-milliseconds {NAME} 2000\n"
                f"sentinel failover-timeout {NAME} 20000\n"
                f"sentinel parallel-syncs {NAME} 1\n")
    exe = procs.redis_server_path()
    assert exe is not None
    return procs.ServerProcess([exe, conf, "--sentinel"], port, tmpdir, f"sentinel-{port}").start()


def start_node(port: int, tmpdir: str, *extra: str) -> procs.ServerProcess:
    """A pyrepl node started from a config file of its own (Sentinel's CONFIG REWRITE)."""
    conf = os.path.join(tmpdir, "node.conf")
    if not os.path.exists(conf):
        with open(conf, "w") as f:
            f.write(f"port {port}\nbind 127.0.0.1\ndir {tmpdir}\nsave \"\"\n"
                    "repl-diskless-sync-delay 0\n")
    argv = procs.pyrepl_argv("master", port, tmpdir, "--config", conf, *extra)
    return procs.ServerProcess(argv, port, tmpdir, f"pyrepl-{port}").start()


class Writer(threading.Thread):
    """SETs w:<i> through Sentinel's master_for; remembers when each write was acknowledged."""

    def __init__(self, sentinel_ports: list[int]) -> None:
        super().__init__(daemon=True)
        sentinel = Sentinel([("127.0.0.1", p) for p in sentinel_ports], socket_timeout=1)
        self.master = sentinel.master_for(NAME, socket_timeout=1, retry_on_timeout=False)
        self.acked: dict[int, float] = {}
        self.stop_at = 0.0
        self.errors = 0

    def run(self) -> None:
        i = 0
        deadline = time.monotonic() + 120
        while (not self.stop_at or time.monotonic() < self.stop_at) and \
                time.monotonic() < deadline:
            i += 1
            try:
                self.master.set(f"w:{i}", i)
                self.acked[i] = time.monotonic()
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError,
                    redis.ResponseError):
                self.errors += 1
                time.sleep(0.05)
            time.sleep(0.002)


def master_addr(sentinel_port: int) -> int | None:
    try:
        with redis.Redis(port=sentinel_port, socket_timeout=2) as s:
            addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)
    except redis.RedisError:
        return None
    return int(addr[1]) if addr else None


@pytest.mark.parametrize("second", ["pyrepl", "redis"])
def test_sentinel_promotes_a_replica_after_kill_9(second: str) -> None:
    dirs = [tempfile.mkdtemp(prefix="pyrepl-ha-") for _ in range(3)]
    ports = [procs.free_port() for _ in range(3)]
    nodes: list[procs.ServerProcess] = []
    sentinels: list[procs.ServerProcess] = []
    try:
        master = start_node(ports[0], dirs[0])
        nodes.append(master)
        nodes.append(start_node(ports[1], dirs[1], "--replicaof", "127.0.0.1", str(ports[0])))
        if second == "pyrepl":
            nodes.append(start_node(ports[2], dirs[2], "--replicaof", "127.0.0.1",
                                    str(ports[0])))
        else:
            nodes.append(procs.start_redis("--replicaof", "127.0.0.1", str(ports[0]),
                                           "--enable-debug-command", "yes", port=ports[2],
                                           tmpdir=dirs[2]))
        m = redis.Redis(port=ports[0])
        for n in nodes[1:]:
            wait_in_sync(m, redis.Redis(port=n.port))
        sentinels = [start_sentinel(ports[0]) for _ in range(3)]
        for s in sentinels:          # each sentinel knows both replicas and the other two
            wait_for(lambda s=s: len(redis.Redis(port=s.port).execute_command(
                "SENTINEL", "REPLICAS", NAME)) == 2 and len(redis.Redis(port=s.port)
                .execute_command("SENTINEL", "SENTINELS", NAME)) == 2, timeout=30,
                what="the sentinels discovering the nodes and each other")
        writer = Writer([s.port for s in sentinels])
        writer.start()
        wait_for(lambda: len(writer.acked) > 200, timeout=30, what="writes under way")
        time.sleep(1.5)
        killed_at = time.monotonic()
        master.kill()
        wait_for(lambda: master_addr(sentinels[0].port) not in (None, ports[0]), timeout=30,
                 what="a replica promoted by the sentinels")
        promoted_after = time.monotonic() - killed_at
        new_port = master_addr(sentinels[0].port)
        assert new_port in ports[1:] and promoted_after < 30
        new = redis.Redis(port=new_port)
        other_port = ports[1] if new_port == ports[2] else ports[2]
        other = redis.Redis(port=other_port)
        wait_for(lambda: info(other, "replication").get("master_port") == str(new_port)
                 and info(other, "replication").get("master_link_status") == "up",
                 timeout=60, what="the other replica following the new master")
        writer.stop_at = time.monotonic() + 3          # clients find the new master
        writer.join(30)
        assert max(writer.acked.values()) > killed_at + promoted_after, \
            "no write acknowledged by the new master"
        wait_in_sync(new, other)
        # the other replica moved with +CONTINUE: the new master did no full sync
        stats = info(new, "stats")
        assert stats["sync_full"] == "0" and int(stats["sync_partial_ok"]) >= 1, stats
        # every write acknowledged more than a second before the kill is on the new master
        old_enough = [i for i, t in writer.acked.items() if t < killed_at - 1.0]
        assert old_enough
        pipe = new.pipeline(transaction=False)
        for i in old_enough:
            pipe.get(f"w:{i}")
        values = pipe.execute()
        missing = [i for i, v in zip(old_enough, values, strict=True) if v != str(i).encode()]
        assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:10]}"
        # the old master, restarted, is made a replica of the new one by Sentinel
        nodes[0] = start_node(ports[0], dirs[0])
        old = redis.Redis(port=ports[0])
        wait_for(lambda: info(old, "replication").get("role") == "slave"
                 and info(old, "replication").get("master_port") == str(new_port),
                 timeout=60, what="Sentinel turning the old master into a replica")
        wait_in_sync(new, old)
        wait_in_sync(new, other)
        assert digest(old) == digest(new) == digest(other)
    finally:
        for s in sentinels:
            s.stop()
        for n in nodes:
            n.stop()
