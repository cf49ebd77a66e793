"""Where a -P1 request's CPU goes: user and system time a request on the master and on its
replica, pyrepl and Redis 7.0.15, alone and with one replica, in the same run (issue 39).

    .venv/bin/python bench/bench_cpu_split.py [--rounds 3] [--requests 100000]
                                              [--tests SET,XADD,DEL]

At -P1 (redis-benchmark -c 50 -r 100000) most of a request is the kernel's (a read, a write,
epoll, for each of 50 clients) on both servers, so the throughput ratio hides what each
server's own code costs. This reads each process's utime and stime (/proc/<pid>/stat)
around redis-benchmark's run against four masters started here (pyrepl and Redis, each alone
and with one replica of its kind), the order rotating each round, and prints the medians in
microseconds a request.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    options,
    redis_benchmark_command,
    start_pyrepl,
    start_redis,
)

TESTS = {
    "SET": ["SET", "key:__rand_int__", "xxx"],
    "XADD": ["XADD", "s:added", "*", "field", "__rand_int__"],
    "DEL": ["DEL", "key:__rand_int__"],
    "SETBIT": ["SETBIT", "bm:__rand_int__", "1000", "1"],
    "INCR": ["INCR", "counter:__rand_int__"],
}
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> tuple[float, float]:
    """(user, system) seconds the process has run."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def wait_linked(port: int) -> None:
    import redis

    r = redis.Redis(port=port)
    deadline = time.monotonic() + 60
    while r.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise SystemExit(f"the replica on {port} never linked")
        time.sleep(0.1)


def main() -> int:
    a = options(__doc__, rounds=3, requests=100_000, tests="SET,XADD,DEL")
    tests = a.tests.split(",")
    servers = []
    setups: dict[tuple[str, str], tuple[int, int, int | None]] = {}
    try:
        for kind, start in (("pyrepl", start_pyrepl), ("redis", start_redis)):
            m = start()
            r = (start_pyrepl("--master", f"127.0.0.1:{m.port}", role="replica")
                 if kind == "pyrepl" else start_redis("--replicaof", "127.0.0.1", str(m.port)))
            alone = start()
            servers += [m, r, alone]
            wait_linked(r.port)
            setups[(kind, "replica")] = (m.port, m.proc.pid, r.proc.pid)   # type: ignore[union-attr]
            setups[(kind, "alone")] = (alone.port, alone.proc.pid, None)   # type: ignore[union-attr]
        rows: dict[tuple[str, str, str], list[tuple[float, ...]]] = {}
        order = list(setups)
        for rnd in range(a.rounds):
            for t in tests:
                for key in order[rnd % len(order):] + order[:rnd % len(order)]:
                    port, mp, rp = setups[key]
                    m0, r0 = cpu(mp), cpu(rp) if rp else (0.0, 0.0)
                    rps = redis_benchmark_command(port, TESTS[t], a.requests, 50, 1)
                    m1, r1 = cpu(mp), cpu(rp) if rp else (0.0, 0.0)
                    us = 1e6 / a.requests
                    rows.setdefault((t, *key), []).append(
                        (rps, (m1[0] - m0[0]) * us, (m1[1] - m0[1]) * us,
                         (r1[0] - r0[0]) * us, (r1[1] - r0[1]) * us))
        print(f"us a request, medians of {a.rounds} rounds (-P1, -c 50, -r 100000): "
              "master user / system, replica user / system")
        for t in tests:
            for key in setups:
                med = [statistics.median(x) for x in zip(*rows[(t, *key)], strict=True)]
                line = (f"{t:7} {key[0]:7} {key[1]:8} {med[0]:9,.0f} rps  "
                        f"master {med[1]:5.2f} / {med[2]:5.2f}")
                if key[1] == "replica":
                    line += f"  replica {med[3]:5.2f} / {med[4]:5.2f}"
                print(line)
    finally:
        for s in servers:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
