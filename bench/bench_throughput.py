"""Throughput side by side: pyrepl, Debian's redis-server and the Python floor, same run.

    .venv/bin/python bench/bench_throughput.py [--rounds 3] [--requests 300000]

Runs `redis-benchmark -t set,get,incr,lpush,hset,zadd -n N -c 50 -r 100000` at -P 1 and -P 16
against pyrepl, redis-server and the floor (floor_server.py: a bare uvloop + hiredis server,
the most a Python server can do here), rotating which goes first each round, and prints the
medians, pyrepl / redis and pyrepl / floor. Goals (issue 15): >= 0.9x Redis at -P1; at -P16
>= 0.5x Redis and >= 0.8x the floor.
"""

from __future__ import annotations

import argparse
import json

from common import median, redis_benchmark, start_floor, start_pyrepl, start_redis

TESTS = "set,get,incr,lpush,hset,zadd"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    py = start_pyrepl()
    rd = start_redis()
    fl = start_floor()
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for rnd in range(args.rounds):
            for pipeline in (1, 16):
                order = [("pyrepl", py), ("redis", rd), ("floor", fl)]
                k = rnd % len(order)
                for name, srv in order[k:] + order[:k]:
                    r = redis_benchmark(srv.port, TESTS, args.requests, args.clients, pipeline,
                                        ["-r", "100000"])
                    for test, rps in r.items():
                        results.setdefault(f"P{pipeline}", {}).setdefault(test, {}) \
                            .setdefault(name, []).append(rps)
                    print(f"round {rnd + 1} -P{pipeline} {name}: "
                          + ", ".join(f"{t}={v:,.0f}" for t, v in r.items()), flush=True)
    finally:
        py.stop()
        rd.stop()
        fl.stop()
    summary = {}
    print(f"\n{'pipeline':8} {'test':8} {'pyrepl rps':>12} {'redis rps':>12} "
          f"{'floor rps':>12} {'÷redis':>7} {'÷floor':>7}")
    for p, tests in results.items():
        for test, by in tests.items():
            a, b, f = (median(by.get(who, [])) for who in ("pyrepl", "redis", "floor"))
            ratio = a / b if b else float("nan")
            to_floor = a / f if f else float("nan")
            summary[f"{p} {test}"] = {"pyrepl": a, "redis": b, "floor": f, "ratio": ratio,
                                      "floor_ratio": to_floor}
            print(f"{p:8} {test:8} {a:12,.0f} {b:12,.0f} {f:12,.0f} {ratio:7.2f} "
                  f"{to_floor:7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
