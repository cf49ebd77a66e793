"""CPU time per request of the servers themselves: pyrepl, Redis and the Python floor.

    .venv/bin/python bench/bench_cpu.py [--rounds 3] [--requests 300000] [--tests set,get]
        [--pipeline 1] [--base DIR] [--no-replica]

Requests per second on this shared 2-core machine move with whatever else runs (the client,
the other servers, other jobs). The CPU a server spends per request moves much less: it is
read from ``/proc/PID/stat`` (utime and stime, in clock ticks) around a
``redis-benchmark -t TEST -n N -c 50 -r 100000 -P P`` run, after a warm-up run, and divided by
N. Alone: pyrepl, Redis, the floor (bench/floor_server.py) and, with ``--base DIR``, another
checkout's pyrepl (a before/after), rotating which goes first each round. With one replica
(unless ``--no-replica``): a pyrepl pair and a Redis pair, the master's and the replica's CPU
per request, for each write of ``--tests`` (SET when there is none). Medians over the rounds;
user and system time apart (system time is mostly the same reads and writes for every server). Goal in CPU terms (issue 15): the -P1 goal
of 0.9x Redis's throughput needs pyrepl's CPU per request near the floor's, as both are the
busiest process there while redis-benchmark takes the other core.
"""

from __future__ import annotations

import argparse
import os
import subprocess

from bench_replication import start_pair, stop_server
from common import (
    median,
    redis_benchmark,
    start_floor,
    start_pyrepl,
    start_pyrepl_from,
    start_redis,
    write_json,
)

TICK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]), int(fields[12])     # utime, stime (fields 14 and 15)


def measure(port: int, pids: list[int], test: str, n: int, pipeline: int
            ) -> tuple[float, list[tuple[float, float]]]:
    """rps, and per pid (user, system) microseconds per request, over one run of N."""
    redis_benchmark(port, test, max(n // 10, 10000), 50, pipeline, ["-r", "100000"])  # warm-up
    before = [cpu_ticks(p) for p in pids]
    rps = redis_benchmark(port, test, n, 50, pipeline, ["-r", "100000"])[test.upper()]
    after = [cpu_ticks(p) for p in pids]
    us = 1e6 / TICK / n
    return rps, [((a[0] - b[0]) * us, (a[1] - b[1]) * us) for a, b in zip(after, before,
                                                                            strict=True)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--base", help="another checkout's pyrepl beside (before/after)")
    ap.add_argument("--no-replica", action="store_true")
    ap.add_argument("--json", help="write the medians here too")
    args = ap.parse_args()
    alone = {"pyrepl": start_pyrepl(), "redis": start_redis(), "floor": start_floor()}
    if args.base:
        alone["base"] = start_pyrepl_from(args.base)
    pairs = {}
    replica_tests = [t for t in args.tests.split(",") if t != "get"] or ["set"]
    if not args.no_replica:
        for kind in ("pyrepl", "redis"):
            pairs[kind] = start_pair(kind)
    rows: dict[tuple[str, str], list[tuple[float, float, float, float, float]]] = {}
    try:
        names = list(alone)
        for rnd in range(args.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for test in args.tests.split(","):
                for name in order:
                    srv = alone[name]
                    rps, [(u, s)] = measure(srv.port, [srv.proc.pid], test, args.requests,
                                            args.pipeline)
                    rows.setdefault((test, name), []).append((rps, u, s, 0.0, 0.0))
                    print(f"round {rnd + 1} {test} -P{args.pipeline} {name}: {rps:,.0f} rps, "
                          f"user {u:.2f} sys {s:.2f} us", flush=True)
            for test in replica_tests:
                for kind, (master, replica) in pairs.items():
                    rps, [(mu, ms), (ru, rs)] = measure(
                        master.port, [master.proc.pid, replica.proc.pid], test,
                        args.requests, args.pipeline)
                    rows.setdefault((test, f"{kind}+replica"), []).append(
                        (rps, mu, ms, ru, rs))
                    print(f"round {rnd + 1} {test} -P{args.pipeline} {kind} with a replica: "
                          f"{rps:,.0f} rps, master user {mu:.2f} sys {ms:.2f}, replica user "
                          f"{ru:.2f} sys {rs:.2f} us", flush=True)
    except subprocess.CalledProcessError as e:
        print(f"redis-benchmark failed: {e.stderr or e}")
        return 1
    finally:
        for srv in alone.values():
            srv.stop()
        for master, replica in pairs.values():
            stop_server(replica)
            stop_server(master)
    print(f"\n{'test':5} {'server':16} {'rps':>10} {'user us':>8} {'sys us':>7} "
          f"{'cpu us':>7} {'replica user+sys':>17}")
    summary = {}
    for (test, name), vals in rows.items():
        rps, u, s, ru, rs = (median([v[i] for v in vals]) for i in range(5))
        summary[f"{test} {name}"] = {"rps": rps, "user_us": u, "sys_us": s,
                                     "replica_user_us": ru, "replica_sys_us": rs}
        rep = f"{ru:.2f}+{rs:.2f}" if name.endswith("replica") else ""
        print(f"{test:5} {name:16} {rps:10,.0f} {u:8.2f} {s:7.2f} {u + s:7.2f} {rep:>17}")
    for test in args.tests.split(","):
        py = summary.get(f"{test} pyrepl")
        if not py:
            continue
        for other in ("floor", "redis", "base"):
            o = summary.get(f"{test} {other}")
            if o:
                print(f"{test}: pyrepl's CPU per request ÷ {other}'s: "
                      f"{(py['user_us'] + py['sys_us']) / (o['user_us'] + o['sys_us']):.2f} "
                      f"(user alone {py['user_us'] / o['user_us']:.2f})")
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
