"""FAILOVER (Redis 6.2+'s coordinated failover) on pyrepl, beside and with redis-server 7.0.15.

Errors and parsing are compared with Redis's replies. Then, under a write load, FAILOVER TO a
replica swaps the roles within 15 s with no full sync anywhere (the target promotes itself on
the old master's ``PSYNC ... FAILOVER`` and answers +CONTINUE; the other replica goes on
through the chain), with every pair of masters and targets: pyrepl -> pyrepl, pyrepl -> real
Redis, real Redis -> pyrepl. FAILOVER ABORT and the timeout put things back.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import digest, info, wait_in_sync
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

ERRORS = [
    ("FAILOVER", "ABORT"), ("FAILOVER",), ("FAILOVER", "TIMEOUT", "0"),
    ("FAILOVER", "TIMEOUT", "x"), ("FAILOVER", "TO", "127.0.0.1"), ("FAILOVER", "TO", "h", "x"),
    ("FAILOVER", "FORCE"), ("FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"), ("FAILOVER", "NOPE"),
    ("FAILOVER", "ABORT", "x"),
]


def test_errors_as_redis() -> None:
    seen = []
    for start in (start_pyrepl, start_redis):
        srv = start()
        try:
            with RawClient(srv.port) as c:
                seen.append([c.call(*a) for a in ERRORS])
        finally:
            srv.stop()
    assert seen[0] == seen[1]


def test_errors_with_a_replica_as_redis() -> None:
    seen = []
    for start in (start_pyrepl, start_redis):
        m = start()
        r = start("--replicaof", "127.0.0.1", str(m.port))
        try:
            wait_in_sync(redis.Redis(port=m.port), redis.Redis(port=r.port))
            with RawClient(m.port) as c, RawClient(r.port) as rc:
                seen.append([
                    c.call("FAILOVER", "TO", "127.0.0.1", "1"),
                    c.call("FAILOVER", "FORCE", "TO", "127.0.0.1", str(r.port)),
                    c.call("FAILOVER", "TIMEOUT", "10", "FORCE"),
                    rc.call("FAILOVER"),
                    c.call("INFO", "replication").count(b"master_failover_state:no-failover"),
                ])
        finally:
            r.stop()
            m.stop()
    assert seen[0] == seen[1]


class Load(threading.Thread):
    """INCRs a counter on whichever node is master, remembering the acknowledged values."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(daemon=True)
        self.ports = ports
        self.acked = 0
        self.stop = False

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while not self.stop and time.monotonic() < deadline:
            for p in self.ports:
                try:
                    with redis.Redis(port=p, socket_timeout=2) as r:
                        while not self.stop and time.monotonic() < deadline:
                            self.acked = r.incr("counter")
                except (redis.ReadOnlyError, redis.ConnectionError, redis.TimeoutError,
                        redis.ResponseError):
                    time.sleep(0.02)


@pytest.mark.parametrize("master_kind,target_kind", [
    ("pyrepl", "pyrepl"), ("pyrepl", "redis"), ("redis", "pyrepl")])
def test_failover_to_a_replica_under_load(master_kind: str, target_kind: str) -> None:
    kinds = {"pyrepl": start_pyrepl,
             "redis": lambda *a: start_redis("--enable-debug-command", "yes", *a)}
    master = kinds[master_kind]("--repl-diskless-sync-delay", "0")
    nodes = [master]
    try:
        target = kinds[target_kind]("--replicaof", "127.0.0.1", str(master.port))
        other = start_pyrepl("--replicaof", "127.0.0.1", str(master.port))
        nodes += [target, other]
        m = redis.Redis(port=master.port)
        for n in (target, other):
            wait_in_sync(m, redis.Redis(port=n.port))
        fulls_before = {n.port: int(info(redis.Redis(port=n.port), "stats")["sync_full"])
                        for n in nodes}
        load = Load([master.port, target.port])
        load.start()
        wait_for(lambda: load.acked > 100, timeout=20, what="writes under way")
        t0 = time.monotonic()
        assert m.execute_command("FAILOVER", "TO", "127.0.0.1", str(target.port),
                                 "TIMEOUT", "10000") == b"OK"
        t = redis.Redis(port=target.port)
        wait_for(lambda: info(t, "replication")["role"] == "master"
                 and info(m, "replication")["role"] == "slave"
                 and info(m, "replication").get("master_link_status") == "up", timeout=15,
                 what="the roles swapped")
        assert time.monotonic() - t0 < 15
        assert info(m, "replication")["master_failover_state"] == "no-failover"
        acked_at_swap = load.acked
        wait_for(lambda: load.acked > acked_at_swap + 50, timeout=20,
                 what="writes going on on the new master")
        load.stop = True
        load.join(10)
        wait_in_sync(t, m)
        o = redis.Redis(port=other.port)
        wait_for(lambda: int(o.get("counter") or 0) == int(t.get("counter")), timeout=30,
                 what="the other replica following")
        assert int(t.get("counter")) >= load.acked      # nothing acknowledged was lost
        for n in nodes:                                  # no full sync anywhere
            got = int(info(redis.Redis(port=n.port), "stats")["sync_full"])
            assert got == fulls_before[n.port], (n.name, got, fulls_before[n.port])
        assert digest(m) == digest(t) == digest(o)
    finally:
        for n in nodes:
            n.stop()


def test_abort_and_timeout_put_things_back() -> None:
    master = start_pyrepl()
    replica = start_pyrepl("--replicaof", "127.0.0.1", str(master.port))
    try:
        m = redis.Redis(port=master.port)
        wait_in_sync(m, redis.Redis(port=replica.port))
        replica_r = redis.Redis(port=replica.port)
        # a target that cannot catch up: the replica's link is paused by DEBUG SLEEP
        m.set("k", "v")
        with RawClient(replica.port) as rc:
            rc.send("DEBUG", "SLEEP", "2")
            time.sleep(0.1)
            m.set("k", "v2")
            assert m.execute_command("FAILOVER", "TIMEOUT", "500") == b"OK"
            assert info(m, "replication")["master_failover_state"] == "waiting-for-sync"
            with RawClient(master.port) as w:        # writes wait meanwhile
                w.send("SET", "paused", "1")
                w.sock.settimeout(0.2)
                with pytest.raises(TimeoutError):
                    w.read_reply()
                w.sock.settimeout(10)
                wait_for(lambda: info(m, "replication")["master_failover_state"] ==
                         "no-failover", timeout=10, what="the timeout")
                assert w.read_reply() == b"+OK\r\n"      # released, still a master
            rc.read_reply()
        assert info(m, "replication")["role"] == "master"
        assert "Replica never caught up before timeout" in master.log()
        wait_in_sync(m, replica_r)
        assert m.execute_command("FAILOVER", "TIMEOUT", "60000", "TO", "127.0.0.1",
                                 str(replica.port)) in (b"OK", "OK")
        m.execute_command("FAILOVER", "ABORT")
        assert info(m, "replication")["master_failover_state"] == "no-failover"
        assert m.set("after", "1")
        assert info(replica_r, "replication")["role"] == "slave"
    finally:
        replica.stop()
        master.stop()
