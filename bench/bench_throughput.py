"""Throughput side by side: pyrepl vs Debian's redis-server, same run, interleaved.

    .venv/bin/python bench/bench_throughput.py [--rounds 3] [--requests 300000]

Runs `redis-benchmark -t set,get,incr,lpush,hset,zadd -n N -c 50` at -P 1 and -P 16 against
both servers, alternating server order each round, and prints medians and the ratio
pyrepl/redis. Goals: >= 0.9 at -P1, >= 0.5 at -P16.
"""

from __future__ import annotations

import argparse
import json

from common import median, redis_benchmark, start_pyrepl, start_redis

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
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for rnd in range(args.rounds):
            for pipeline in (1, 16):
                order = [("pyrepl", py), ("redis", rd)]
                if rnd % 2:
                    order.reverse()
                for name, srv in order:
                    r = redis_benchmark(srv.port, TESTS, args.requests, args.clients, pipeline)
                    for test, rps in r.items():
                        results.setdefault(f"P{pipeline}", {}).setdefault(test, {}) \
                            .setdefault(name, []).append(rps)
                    print(f"round {rnd + 1} -P{pipeline} {name}: "
                          + ", ".join(f"{t}={v:,.0f}" for t, v in r.items()), flush=True)
    finally:
        py.stop()
        rd.stop()
    summary = {}
    print(f"\n{'pipeline':8} {'test':8} {'pyrepl rps':>12} {'redis rps':>12} {'ratio':>6}")
    for p, tests in results.items():
        for test, by in tests.items():
            a, b = median(by.get("pyrepl", [])), median(by.get("redis", []))
            ratio = a / b if b else float("nan")
            summary[f"{p} {test}"] = {"pyrepl": a, "redis": b, "ratio": ratio}
            print(f"{p:8} {test:8} {a:12,.0f} {b:12,.0f} {ratio:6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
