"""Real Redis (or Valkey) servers provoke the syncs whose log lines ``pyrepl metrics`` must read.

Theory of operation: a master M and two replicas R1, R2, each with ``--logfile``. Fresh
replicas full-sync (``no-history`` x2); ``CLIENT KILL TYPE replica`` on M gives two partial
syncs; R2 is frozen (SIGSTOP), the links are killed again (R1 resumes: partial no. 3) and M
takes more writes than its 16 KiB backlog holds, so R2, thawed, gets a full sync for
``offset-before-backlog``; then R1 is promoted (``REPLICAOF NO ONE``), and R2 and M are
re-pointed to it: both continue partially through R1's secondary replication id (partial
nos. 4 and 5). Every wait is bounded.

:data:`SERVERS` names the servers it runs on: Debian's redis-server 7.0.15 (diskless full syncs
on one connection) and the Redis 8 build of ``make redis-src`` with the rdb channel. ``python -m
tests.analytics.redislog_scenario OUT [redis7|redis8|redis-server [options]]``, from the
repository's root, runs it by hand and leaves the logs in OUT (how tests/data/redislog/ was
captured).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.support.load import write_keys
from tests.support.procs import (
    ServerProcess,
    free_port,
    redis8_server_path,
    redis_server_path,
    valkey_server_path,
)
from tests.support.redispy import in_sync, kill_replica_links, r, repl
from tests.support.waits import wait_for, wait_offsets

# What the scenario provokes, as the job's summary must count it.
EXPECTED_FULL = {"no-history": 2, "offset-before-backlog": 1}
EXPECTED_PARTIAL = 5


@dataclass(frozen=True)
class Server:
    """A server the scenario runs on, and how the job must name its full syncs."""
    path: Callable[[], str | None]   # the redis-server binary, None when absent
    missing: str                     # why it is absent
    options: tuple[str, ...]         # added to every node's command line
    full_result: str                 # psync result of a full sync (the master's decision)
    full_mode: str                   # the full sync's mode
    optional: bool = False           # absent: the test skips (else it fails)


SERVERS = {
    "redis7": Server(redis_server_path, "redis-server is not installed (the test command "
                     "installs it)", (), "full", "diskless"),
    # the master offers the rdb channel only for diskless syncs; every node gets both, as each
    # is a master or a replica at some point
    "redis8": Server(redis8_server_path, "the Redis 8 build (make redis-src) is missing: "
                     ".cache/redis-src/redis-8/src/redis-server",
                     ("--repl-diskless-sync", "yes", "--repl-rdb-channel", "yes"),
                     "rdbchannel", "rdb-channel", optional=True),
    # Valkey 8.1's dual channel (PRIMARY/REPLICA wording, its own lines for the two channels)
    "valkey8": Server(valkey_server_path, "the Valkey 8.1 build (make redis-src) is missing: "
                      ".cache/redis-src/valkey-8/src/valkey-server",
                      ("--repl-diskless-sync", "yes", "--dual-channel-replication-enabled",
                       "yes"), "dualchannel", "dual-channel", optional=True),
}


@dataclass
class Scenario:
    logs: dict[str, str] = field(default_factory=dict)  # name -> log file
    ports: dict[str, int] = field(default_factory=dict)
    collected: str = ""     # ``pyrepl collect``'s output directory (collect=True)
    # the logs as they were while the nodes still ran, after the last step (collect=True):
    # what a user reads mid-flight, the collector's last samples coming after their last line
    live_logs: dict[str, str] = field(default_factory=dict)
    # the nodes' own counters at the end (INFO stats): name -> (sync_full, sync_partial_ok)
    counters: dict[str, tuple[int, int]] = field(default_factory=dict)


def _start(exe: str, d: str, name: str, *extra: str, port: int | None = None
           ) -> ServerProcess:
    os.makedirs(d, exist_ok=True)
    port = port or free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
            "--logfile", os.path.join(d, f"{name}.log"), "--repl-backlog-size", "16kb",
            "--repl-diskless-sync-delay", "0", *extra]
    return ServerProcess(argv, port, d, f"{name}-stdout").start()



def _replicaof(port: int, master: int | None) -> None:
    with r(port) as c:
        if master is None:
            c.execute_command("REPLICAOF", "NO", "ONE")
        else:
            c.execute_command("REPLICAOF", "127.0.0.1", str(master))


def _counters(port: int) -> tuple[int, int]:
    with r(port) as c:
        st = c.info("stats")
    return int(st["sync_full"]), int(st["sync_partial_ok"])


def run(exe: str, out: str, *extra: str, collect: bool = False) -> Scenario:
    """Run the scenario with the server binary ``exe``; the three logs are left in ``out``
    (``collect``: and what ``pyrepl collect``, polling the three from the second replica's
    start to the end, wrote in ``out/collected``)."""
    from tests.support.collect_scenario import collector, observed

    sc = Scenario()
    procs: list[ServerProcess] = []
    frozen: ServerProcess | None = None
    col = None
    nodes: list[str] = []

    def seen() -> None:
        """With the collector: each step is sampled before the next one starts (it polls
        every 0.2 s; a step takes a few ms)."""
        if col is not None:
            observed(sc.collected, nodes)

    try:
        m = _start(exe, os.path.join(out, "m"), "m", *extra)
        procs.append(m)
        write_keys(m.port, "init", 200)
        # replicas configured at start have no cached master: PSYNC ? -1 (no-history)
        follow = ("--replicaof", "127.0.0.1", str(m.port))
        r1 = _start(exe, os.path.join(out, "r1"), "r1", *follow, *extra)
        procs.append(r1)
        wait_offsets(m.port, r1.port)
        r2 = _start(exe, os.path.join(out, "r2"), "r2", *follow, *extra)
        procs.append(r2)
        if collect:
            sc.collected = os.path.join(out, "collected")
            nodes = [f"127.0.0.1:{p}" for p in (m.port, r1.port, r2.port)]
            col = collector(sc.collected, *nodes)
        wait_offsets(m.port, r1.port, r2.port)                       # no-history x2
        seen()

        assert kill_replica_links(m.port) == 2                         # partial x2
        wait_for(lambda: repl(m.port)["connected_slaves"] == 2, 30, what="relinked")
        wait_offsets(m.port, r1.port, r2.port)
        write_keys(m.port, "k", 20)
        wait_offsets(m.port, r1.port, r2.port)
        seen()

        frozen = r2                                             # offset-before-backlog
        r2.proc.send_signal(signal.SIGSTOP)
        assert kill_replica_links(m.port) == 2                         # R1: partial no. 3
        wait_for(lambda: in_sync(m.port, r1.port) and repl(m.port)["connected_slaves"] == 1,
                 30, what="R1 relinked")
        write_keys(m.port, "big", 200, 1000)                        # 200 KB > 16 KiB backlog
        wait_offsets(m.port, r1.port)
        r2.proc.send_signal(signal.SIGCONT)
        frozen = None
        wait_offsets(m.port, r1.port, r2.port)
        seen()

        _replicaof(r1.port, None)                               # promotion of R1
        wait_for(lambda: repl(r1.port)["role"] == "master", 30, what="R1 promoted")
        seen()
        _replicaof(r2.port, r1.port)                            # partial no. 4 (replid2)
        wait_offsets(r1.port, r2.port)
        seen()
        _replicaof(m.port, r1.port)                             # partial no. 5 (replid2)
        wait_offsets(r1.port, m.port, r2.port)
        seen()
        write_keys(r1.port, "end", 10)
        wait_offsets(r1.port, m.port, r2.port)
        sc.ports = {"m": m.port, "r1": r1.port, "r2": r2.port}
        sc.counters = {n: _counters(p) for n, p in sc.ports.items()}
        if col is not None:
            for n in sc.ports:
                os.makedirs(os.path.join(out, "live", n), exist_ok=True)
                sc.live_logs[n] = shutil.copy(os.path.join(out, n, f"{n}.log"),
                                              os.path.join(out, "live", n, f"{n}.log"))
        seen()
    finally:
        if col is not None:
            col.terminate()
            col.wait(30)
        if frozen is not None and frozen.alive():
            frozen.proc.send_signal(signal.SIGCONT)
        for p in reversed(procs):
            p.stop()
    sc.logs = {n: os.path.join(out, n, f"{n}.log") for n in ("m", "r1", "r2")}
    return sc


if __name__ == "__main__":
    dest = os.path.abspath(sys.argv[1])
    which = sys.argv[2] if len(sys.argv) > 2 else "redis7"
    if which in SERVERS:
        sv = SERVERS[which]
        binary, opts = sv.path(), sv.options
        if binary is None:
            sys.exit(sv.missing)
    else:
        binary, opts = os.path.abspath(which), tuple(sys.argv[3:])
    print(run(binary, dest, *opts))
