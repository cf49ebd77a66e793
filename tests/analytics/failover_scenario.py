"""Real Redis servers in a chain, a replica restart and a Sentinel-driven failover: the syncs
``pyrepl metrics`` must count from their logs and ``pyrepl collect``'s samples.

Theory of operation: a master M, a replica R1 of M and a replica R2 of R1 (a chain), each with
``--logfile``, watched by ``pyrepl collect`` from before the replicas start. Fresh replicas full-sync (``no-history`` x2: R1
from M, R2 from R1); ``CLIENT KILL TYPE replica`` on M gives R1 a partial sync (R2 stays: the
history did not change); R2 is stopped with ``SHUTDOWN SAVE`` and started again: it loads its
RDB, which carries its replication id and offset, and continues partially from R1. Then one
Sentinel (quorum 1) watching M sees M killed (SIGKILL) and promotes R1; R1 disconnects R2,
which continues partially through R1's secondary id. M is started again, empty (no RDB: a new
history), and Sentinel turns it into a replica of R1: a full sync (replid-mismatch).

Each process's INFO counters (``sync_full``, ``sync_partial_ok``) are read before it stops and
at the end: their sums over every process are what the report must count. Every wait is
bounded.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import redis

from tests.analytics.redislog_scenario import _counters, _start
from tests.support.procs import ServerProcess, free_port, redis_server_path
from tests.support.redispy import kill_replica_links, r, repl
from tests.support.waits import wait_for, wait_offsets

NAME = "pyrepl-fleet"
# what the history holds: (full, partial) syncs, and the full ones by reason
EXPECTED = (3, 3)
EXPECTED_FULL = {"no-history": 2, "replid-mismatch": 1}


@dataclass
class Failover:
    logs: dict[str, str] = field(default_factory=dict)   # name -> log file
    ports: dict[str, int] = field(default_factory=dict)
    collected: str = ""
    # (sync_full, sync_partial_ok) of every process, read before it stopped or at the end
    counters: list[tuple[str, int, int]] = field(default_factory=list)

    def totals(self) -> tuple[int, int]:
        return (sum(f for _, f, _ in self.counters), sum(p for _, _, p in self.counters))


def _sentinel(d: str, master_port: int) -> ServerProcess:
    os.makedirs(d, exist_ok=True)
    port = free_port()
    conf = os.path.join(d, "sentinel.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor {NAME} 127.0.0.1 {master_port} 1\n"
                f"sentinel down-after-milliseconds {NAME} 1000\n"
                f"sentinel failover-timeout {NAME} 10000\n")
    exe = redis_server_path()
    assert exe is not None
    return ServerProcess([exe, conf, "--sentinel"], port, d, "sentinel").start()


def run(out: str) -> Failover:
    """Run the scenario on Debian's redis-server (7.0.15); the logs stay in ``out``."""
    from tests.support.collect_scenario import collector, observed

    exe = redis_server_path()
    assert exe is not None
    fo = Failover(collected=os.path.join(out, "collected"))
    procs: list[ServerProcess] = []
    col = None
    try:
        m = _start(exe, os.path.join(out, "m"), "m")
        procs.append(m)
        with r(m.port) as c:
            c.mset({f"k{i}": "v" * 50 for i in range(200)})
        # the collector watches from the start (the replicas answer once started): each
        # node is sampled before its first replica syncs, so it counts every sync
        fo.ports = {"m": m.port, "r1": free_port(), "r2": free_port()}
        nodes = {n: f"127.0.0.1:{p}" for n, p in fo.ports.items()}
        col = collector(fo.collected, *nodes.values(), duration=180.0)
        observed(fo.collected, [nodes["m"]])
        r1 = _start(exe, os.path.join(out, "r1"), "r1", "--replicaof", "127.0.0.1",
                    str(m.port), port=fo.ports["r1"])
        procs.append(r1)
        wait_offsets(m.port, r1.port)
        observed(fo.collected, [nodes["m"], nodes["r1"]])
        r2 = _start(exe, os.path.join(out, "r2"), "r2", "--replicaof", "127.0.0.1",
                    str(r1.port), port=fo.ports["r2"])
        procs.append(r2)
        wait_offsets(r1.port, r2.port)                                  # no-history x2
        observed(fo.collected, list(nodes.values()))

        assert kill_replica_links(m.port) == 1                          # R1: partial
        wait_for(lambda: repl(m.port)["connected_slaves"] == 1, 30, what="R1 relinked")
        wait_offsets(m.port, r1.port)
        wait_offsets(r1.port, r2.port)
        observed(fo.collected, list(nodes.values()))

        # R2 restarts from its RDB (replication id and offset in it): partial from R1
        fo.counters.append(("r2", *_counters(r2.port)))
        with r(r2.port) as c:
            try:
                c.execute_command("SHUTDOWN", "SAVE")
            except redis.ConnectionError:  # the connection closes as the server exits
                pass
        r2.stop()
        r2.start()
        wait_for(lambda: repl(r2.port)["master_link_status"] == "up", 30, what="R2 back")
        wait_offsets(r1.port, r2.port)
        observed(fo.collected, list(nodes.values()))

        # Sentinel promotes R1 when M dies; R2 continues through R1's secondary id
        sentinel = _sentinel(os.path.join(out, "sentinel"), m.port)
        procs.insert(0, sentinel)
        wait_for(lambda: _sentinel_replicas(sentinel.port) >= 1, 30,
                 what="Sentinel found R1")
        fo.counters.append(("m", *_counters(m.port)))
        m.kill()
        wait_for(lambda: repl(r1.port)["role"] == "master", 60, what="R1 promoted")
        wait_for(lambda: repl(r2.port)["master_link_status"] == "up"
                 and repl(r1.port)["connected_slaves"] == 1, 30, what="R2 relinked")
        live = [nodes["r1"], nodes["r2"]]
        observed(fo.collected, live)

        # M comes back empty (a new history); Sentinel makes it R1's replica: a full sync
        # (Sentinel converts an old master it sees back after its 10 s INFO period and 8 s
        # more; under load it took over 60 s)
        assert not os.path.exists(os.path.join(m.dir, "dump.rdb"))   # (save "")
        m.start()
        wait_for(lambda: repl(m.port)["role"] == "slave"
                 and repl(m.port).get("master_link_status") == "up", 150,
                 what="Sentinel turned M into R1's replica")
        wait_offsets(r1.port, m.port, r2.port)
        observed(fo.collected, list(nodes.values()))
        for n in ("m", "r1", "r2"):
            fo.counters.append((n, *_counters(fo.ports[n])))
    finally:
        if col is not None:
            col.terminate()
            col.wait(30)
        for p in reversed(procs):
            p.stop()
    fo.logs = {n: os.path.join(out, n, f"{n}.log") for n in ("m", "r1", "r2")}
    shutil.rmtree(os.path.join(out, "sentinel"), ignore_errors=True)
    return fo


def _sentinel_replicas(port: int) -> int:
    with r(port) as c:
        return len(c.execute_command("SENTINEL", "REPLICAS", NAME))
