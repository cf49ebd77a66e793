"""A real redis-server 7.0.15 replicating from a pyrepl master: full sync (diskless and disk)
under a write load, partial resync after CLIENT KILL TYPE replica, WAIT; and the replies of
REPLCONF / WAIT / PSYNC / SYNC compared byte for byte with redis-server's.

Everything is real: a pyrepl master process, Debian's redis-server as the replica (it parses our
+FULLRESYNC, $EOF:/$<len> payload, RDB v10 and stream), a writer thread with redis-py. The
datasets are compared with DEBUG DIGEST (pyrepl's is byte-compatible with Redis's), and the
master's sync events are read from its NDJSON sync log.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
import redis

from tests.support import realpair
from tests.support.procs import ServerProcess, start_pyrepl, start_redis
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]



class Writer(threading.Thread):
    """Mixed writes in pipelines over a bounded keyspace until stopped (bounded in time)."""

    def __init__(self, port: int, seed: int, max_seconds: float = 60.0) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.max_seconds = max_seconds
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        r = redis.Redis(port=self.port, protocol=2)
        rng = self.rng
        deadline = time.monotonic() + self.max_seconds
        try:
            while not self.stop_event.is_set() and time.monotonic() < deadline:
                p = r.pipeline(transaction=rng.random() < 0.2)
                for _ in range(50):
                    k = rng.randrange(2000)
                    op = rng.randrange(9)
                    if op == 0:
                        p.set(f"w:s:{k}", f"v{rng.randrange(10**6)}")
                    elif op == 1:
                        p.incr(f"w:n:{k}")
                    elif op == 2:
                        p.rpush(f"w:l:{k % 50}", rng.randrange(1000))
                    elif op == 3:
                        p.hset(f"w:h:{k % 100}", f"f{k}", rng.randrange(1000))
                    elif op == 4:
                        p.sadd(f"w:set:{k % 100}", k)
                    elif op == 5:
                        p.zadd(f"w:z:{k % 100}", {f"m{k}": rng.randrange(10**6) / 7})
                    elif op == 6:
                        p.delete(f"w:s:{(k + 1) % 2000}")
                    elif op == 7:
                        p.expire(f"w:s:{k}", 100000)
                    else:
                        p.execute_command("SELECT", str(k % 3))
                        p.set(f"w:db:{k}", "x")
                        p.execute_command("SELECT", "0")
                p.execute()
                self.ops += 50
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            r.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()
        if self.error is not None:
            raise self.error


@pytest.fixture
def procs():
    started: list[ServerProcess] = []
    yield started
    for p in reversed(started):
        p.stop()


def full_sync_under_load(procs: list[ServerProcess], *master_args: str) -> tuple:
    master = realpair.start_master(*master_args)
    procs.append(master)
    m = redis.Redis(port=master.port)
    m.execute_command("DEBUG", "POPULATE", "200000", "key", "64")
    writer = Writer(master.port, seed=len(master_args))
    writer.start()
    wait_for(lambda: writer.ops >= 500, 30, what="the write load to start")
    replica = realpair.start_replica_of(master)
    procs.append(replica)
    rep = redis.Redis(port=replica.port)
    wait_for(lambda: realpair.info(rep, "replication").get("master_link_status") == "up", 60,
             what="the replica's link to come up")
    ops_at_up = writer.ops
    wait_for(lambda: writer.ops >= ops_at_up + 2000, 30, what="writes after the sync")
    writer.stop()
    realpair.wait_in_sync(m, rep)
    assert realpair.digest(rep) == realpair.digest(m)
    assert m.dbsize() == rep.dbsize() > 200000
    return master, replica, m, rep


# -- full syncs -------------------------------------------------------------------------------

def test_diskless_full_sync_under_write_load(procs) -> None:
    master, replica, m, rep = full_sync_under_load(procs, "--repl-diskless-sync", "yes",
                                                   "--repl-diskless-sync-delay", "0")
    stats = realpair.info(m, "stats")
    assert (stats["sync_full"], stats["sync_partial_ok"]) == ("1", "0")
    log = master.log()
    assert "Starting BGSAVE for SYNC with target: replicas sockets" in log
    assert (f"Streamed RDB transfer with replica 127.0.0.1:{replica.port} succeeded (socket). "
            f"Waiting for REPLCONF ACK from slave to enable streaming") in log
    assert "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF" in replica.log()
    fork = realpair.events(master, "fullsync_fork")[0]
    online = realpair.events(master, "replica_online")[0]
    assert fork["mode"] == "diskless" and online["mode"] == "diskless"
    # the write load really ran during the transfer: the replica got a held stream
    assert online["buffer_peak"] > 0
    ri = realpair.info(rep, "replication")
    assert ri["master_replid"] == realpair.info(m, "replication")["master_replid"]


def test_disk_full_sync_under_write_load(procs) -> None:
    master, replica, m, rep = full_sync_under_load(procs, "--repl-diskless-sync", "no")
    log = master.log()
    assert "Starting BGSAVE for SYNC with target: disk" in log
    assert "Background saving terminated with success" in log
    assert f"Synchronization with replica 127.0.0.1:{replica.port} succeeded" in log
    assert "MASTER <-> REPLICA sync: receiving" in replica.log()
    assert realpair.events(master, "fullsync_fork")[0]["mode"] == "disk"
    # the whole dataset went: 200,000 keys of 64-byte values, LZF-compressed (rdbcompression
    # yes, as Redis writes them: ~32 bytes a key)
    assert realpair.events(master, "fullsync_rdb_sent")[0]["bytes"] > 200000 * 24


# -- partial resync and WAIT --------------------------------------------------------------------

def test_partial_resync_after_client_kill_and_wait(procs) -> None:
    master = realpair.start_master("--repl-diskless-sync-delay", "0")
    procs.append(master)
    m = redis.Redis(port=master.port)
    m.execute_command("DEBUG", "POPULATE", "1000")
    replica = realpair.start_replica_of(master)
    procs.append(replica)
    rep = redis.Redis(port=replica.port)
    realpair.wait_in_sync(m, rep)
    offset_before = int(realpair.info(m, "replication")["master_repl_offset"])
    # As in ../shared/redis-wire/d: the kill and the writes in one transaction, so the
    # replica is away while they are written.
    p = m.pipeline(transaction=True)
    p.execute_command("CLIENT", "KILL", "TYPE", "replica")
    p.set("gap:1", "v1")
    p.incr("gap:ctr")
    p.set("gap:2", "v2")
    res = p.execute()
    assert res[0] == 1
    m.set("after-kill:1", "y")
    wait_for(lambda: rep.get("after-kill:1") == b"y", 30, what="the replica to come back")
    realpair.wait_in_sync(m, rep)
    stats = realpair.info(m, "stats")
    assert (stats["sync_full"], stats["sync_partial_ok"]) == ("1", "1")
    log = master.log()
    assert f"Connection with replica 127.0.0.1:{replica.port} lost." in log
    accepted = [line for line in log.splitlines()
                if f"Partial resynchronization request from 127.0.0.1:{replica.port} accepted"
                in line]
    assert len(accepted) == 1
    assert f"starting from offset {offset_before + 1}." in accepted[0]
    sent = int(accepted[0].split("Sending ")[1].split(" bytes")[0])
    assert sent > 0  # the MULTI ... EXEC block written while the replica was away
    assert "Successful partial resynchronization with master." in replica.log()
    assert realpair.digest(rep) == realpair.digest(m)
    dec = realpair.events(master, "psync_decision")[-1]
    assert (dec["result"], dec["req_offset"]) == ("continue", offset_before + 1)
    # WAIT: the replica acknowledges the client's last write
    m.set("w", "1")
    assert m.execute_command("WAIT", "1", "5000") == 1
    t0 = time.monotonic()
    assert m.execute_command("WAIT", "2", "300") == 1  # only one replica: times out
    assert time.monotonic() - t0 >= 0.25
    assert realpair.info(m, "replication")["connected_slaves"] == "1"
    clients = m.execute_command("CLIENT", "LIST", "TYPE", "replica")
    clients = clients.decode() if isinstance(clients, bytes) else clients
    assert "flags=S " in clients and clients.count("\n") == 1


# -- the replies of the replication commands, byte for byte ------------------------------------

REPLY_CASES: list[tuple[str, ...]] = [
    ("REPLCONF", "listening-port"), ("REPLCONF", "listening-port", "x"),
    ("REPLCONF", "listening-port", "6390"), ("REPLCONF", "foo", "bar"),

    ("REPLCONF", "rdb-only", "2"), ("REPLCONF", "rdb-only", "1"), ("REPLCONF", "rdb-only", "0"),
    ("REPLCONF", "ip-address", "a" * 256), ("REPLCONF", "ip-address", "10.0.0.1"),
    ("REPLCONF",), ("REPLCONF", "capa", "eof", "capa", "zzz", "capa", "rdb-channel-repl"),
    ("REPLCONF", "rdb-filter-only", "functions"), ("REPLCONF", "rdb-filter-only", "keys"),
    ("WAIT", "0", "0"), ("WAIT", "1", "-1"), ("WAIT", "x", "1"), ("WAIT", "1", "x"),
    ("WAIT", "1"), ("WAIT", "1", "10"), ("PSYNC", "?"), ("SYNC", "x"),
    ("MULTI",), ("PSYNC", "?", "-1"), ("WAIT", "1", "0"), ("SET", "k", "v"), ("EXEC",),
    ("MULTI",), ("WAIT", "1", "0"), ("EXEC",),
]


def test_replication_command_replies_match_redis(procs) -> None:
    a = start_pyrepl()
    procs.append(a)
    b = start_redis()
    procs.append(b)
    with RawClient(a.port) as ca, RawClient(b.port) as cb:
        for args in REPLY_CASES:
            assert ca.call(*args) == cb.call(*args), args
        # REPLCONF ACK / GETACK from a client that is not a replica: no reply at all
        for c in (ca, cb):
            c.send("REPLCONF", "ACK", "5")
            c.send("REPLCONF", "GETACK", "*")
            assert c.call("PING") == b"+PONG\r\n"
