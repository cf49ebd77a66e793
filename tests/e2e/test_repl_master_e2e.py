"""The pyrepl master's limits and decisions, end to end, with real redis-server 7.0.15 replicas.

Each test starts its own pyrepl master and redis-server replica processes (and stops only
those, by their Popen objects). A replica is made to fall behind by stopping its process
(SIGSTOP) and resuming it (SIGCONT). The master's decisions are read from its sync event log
(NDJSON) and its Redis-style log lines; datasets are compared with DEBUG DIGEST.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis

from tests.support.procs import ServerProcess, start_redis
from tests.support.realpair import (
    digest,
    events,
    info,
    start_master,
    start_replica_of,
    wait_in_sync,
)
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]



@pytest.fixture
def procs():
    started: list[ServerProcess] = []
    stopped: list[ServerProcess] = []
    yield started, stopped
    for p in stopped:  # a stopped process must be resumed before it can be terminated
        if p.alive():
            os.kill(p.proc.pid, signal.SIGCONT)
    for p in reversed(started):
        p.stop()


def sigstop(p: ServerProcess, stopped: list[ServerProcess]) -> None:
    stopped.append(p)
    os.kill(p.proc.pid, signal.SIGSTOP)


def sigcont(p: ServerProcess, stopped: list[ServerProcess]) -> None:
    os.kill(p.proc.pid, signal.SIGCONT)
    stopped.remove(p)


def fill(m: redis.Redis, n: int, size: int, prefix: str) -> None:
    p = m.pipeline(transaction=False)
    for i in range(n):
        p.set(f"{prefix}:{i}", os.urandom(size // 2).hex())
        if i % 100 == 99:
            p.execute()
    p.execute()


def synced_pair(started: list, *master_flags: str):  # noqa: ANN201
    """A master (``master_flags``) with 100 keys and a replica in sync with it: the two
    processes (added to ``started``) and a redis-py client of each."""
    master = start_master(*master_flags)
    started.append(master)
    m = redis.Redis(port=master.port)
    fill(m, 100, 100, "a")
    replica = start_replica_of(master)
    started.append(replica)
    rep = redis.Redis(port=replica.port)
    wait_in_sync(m, rep)
    return master, m, replica, rep


def test_psync_before_the_backlog_gets_a_full_sync_with_its_reason(procs) -> None:
    started, stopped = procs
    master, m, replica, rep = synced_pair(started, "--repl-backlog-size", "16kb",
                                          "--repl-diskless-sync-delay", "0")
    assert info(m, "replication")["repl_backlog_size"] == "16384"
    sigstop(replica, stopped)
    fill(m, 50, 200, "b")
    assert m.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    fill(m, 400, 200, "c")  # ~80 KB with no replica: far more than the 16 KB backlog keeps
    sigcont(replica, stopped)
    wait_for(lambda: int(info(m, "stats")["sync_full"]) == 2, 30, what="a second full sync")
    wait_in_sync(m, rep)
    assert digest(rep) == digest(m)
    stats = info(m, "stats")
    assert (stats["sync_partial_ok"], stats["sync_partial_err"]) == ("0", "1")
    dec = [e for e in events(master, "psync_decision") if e["result"] == "full"][-1]
    assert dec["reason"] == "offset-before-backlog"
    assert dec["gap"] > 0 and dec["backlog_size"] == 16384
    # Redis 7 trims the backlog in whole 20 KB blocks: over its size by less than two
    assert 16384 < dec["backlog_histlen"] <= 16384 + 2 * 20440
    assert dec["req_replid"] == info(m, "replication")["master_replid"]
    assert (f"Unable to partial resync with replica 127.0.0.1:{replica.port} for lack of backlog "
            f"(Replica request was: {dec['req_offset']}).") in master.log()


def test_min_replicas_to_write_refuses_writes_with_noreplicas(procs) -> None:
    started, stopped = procs
    master = start_master("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2",
                          "--repl-diskless-sync-delay", "0")
    started.append(master)
    m = redis.Redis(port=master.port)
    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS Not enough good "
                                                             "replicas to write."):
        m.set("k", "v")
    assert m.get("k") is None
    replica = start_replica_of(master)
    started.append(replica)
    rep = redis.Redis(port=replica.port)
    wait_in_sync(m, rep)
    wait_for(lambda: info(m, "replication").get("min_slaves_good_slaves") == "1", 10,
             what="one good replica")
    assert m.set("k", "v") is True
    sigstop(replica, stopped)  # no more ACKs: the replica's lag grows past 2 s
    wait_for(lambda: info(m, "replication").get("min_slaves_good_slaves") == "0", 15,
             what="the replica to count as lagging")
    with pytest.raises(redis.exceptions.ResponseError, match="NOREPLICAS"):
        m.set("k", "w")
    sigcont(replica, stopped)
    wait_for(lambda: info(m, "replication").get("min_slaves_good_slaves") == "1", 15,
             what="the replica to be good again")
    assert m.set("k", "x") is True
    wait_in_sync(m, rep)
    assert rep.get("k") == b"x"


def test_output_buffer_limit_drops_a_stopped_replica_which_then_resyncs(procs) -> None:
    started, stopped = procs
    master, m, replica, rep = synced_pair(started, "--client-output-buffer-limit",
                                          "replica 2mb 0 0", "--repl-diskless-sync-delay", "0")
    sigstop(replica, stopped)
    # 40 MB the stopped replica cannot read: the kernel buffers fill, then the master's.
    for i in range(40):
        fill(m, 10, 100_000, f"big{i}")
        if info(m, "replication")["connected_slaves"] == "0":
            break
    wait_for(lambda: info(m, "replication")["connected_slaves"] == "0", 30,
             what="the master to drop the replica")
    stats = info(m, "stats")
    assert stats["client_output_buffer_limit_disconnections"] == "1"
    log = master.log()
    assert "scheduled to be closed ASAP for overcoming of output buffer limits." in log
    assert f"Connection with replica 127.0.0.1:{replica.port} lost." in log
    lost = events(master, "replica_lost")[-1]
    assert lost["reason"] == "output-buffer-limit" and lost["buffer_limit"] == 2 * 1024 * 1024
    assert lost["buffer_peak"] >= 2 * 1024 * 1024
    sigcont(replica, stopped)
    wait_for(lambda: int(info(m, "stats")["sync_full"]) == 2, 60, what="the replica to resync")
    wait_in_sync(m, rep)
    assert digest(rep) == digest(m)


def test_replicas_arriving_within_the_delay_share_one_snapshot(procs) -> None:
    started, _ = procs
    master = start_master("--repl-diskless-sync-delay", "2")
    started.append(master)
    m = redis.Redis(port=master.port)
    fill(m, 2000, 50, "k")
    replicas = [start_replica_of(master) for _ in range(2)]
    started.extend(replicas)
    for rp in replicas:
        wait_in_sync(m, redis.Redis(port=rp.port))
    log = master.log()
    assert log.count("Background RDB transfer started by pid") == 1
    assert "Delay next BGSAVE for diskless SYNC" in log
    forks = events(master, "fullsync_fork")
    assert len(forks) == 2 and forks[0]["offset"] == forks[1]["offset"]
    assert {f["peer"] for f in forks} == {f"127.0.0.1:{rp.port}" for rp in replicas}
    for rp in replicas:
        assert digest(redis.Redis(port=rp.port)) == digest(m)
    mi = info(m, "replication")
    assert mi["connected_slaves"] == "2"
    assert mi["slave0"].startswith("ip=127.0.0.1,port=") and "state=online" in mi["slave1"]


def test_a_replica_joins_a_disk_bgsave_in_progress(procs) -> None:
    started, _ = procs
    master = start_master("--repl-diskless-sync", "no")
    started.append(master)
    m = redis.Redis(port=master.port)
    m.execute_command("DEBUG", "POPULATE", "800000", "key", "100")
    # the second replica is up already; it is pointed at the master once the BGSAVE runs
    second = start_redis("--enable-debug-command", "yes")
    started.append(second)
    first = start_replica_of(master)
    started.append(first)
    wait_for(lambda: "Background saving started by pid" in master.log(), 30,
             what="the BGSAVE for the first replica")
    r2 = redis.Redis(port=second.port)
    r2.execute_command("REPLICAOF", "127.0.0.1", str(master.port))
    for rp in (first, second):
        wait_in_sync(m, redis.Redis(port=rp.port), timeout=120)
    log = master.log()
    assert "Waiting for end of BGSAVE for SYNC" in log
    assert log.count("Background saving started by pid") == 1
    forks = events(master, "fullsync_fork")
    assert [f.get("reason") for f in forks] == [None, "attached"]
    assert forks[0]["offset"] == forks[1]["offset"]
    for rp in (first, second):
        assert digest(redis.Redis(port=rp.port)) == digest(m)
    assert int(info(m, "stats")["sync_full"]) == 2
    t0 = time.monotonic()
    assert m.execute_command("WAIT", "2", "5000") == 2
    assert time.monotonic() - t0 < 5
