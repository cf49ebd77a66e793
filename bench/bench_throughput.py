"""Throughput side by side: pyrepl, Debian's redis-server and the Python floor, same run.

    .venv/bin/python bench/bench_throughput.py [--rounds 3] [--requests 300000] [--base DIR]

Runs `redis-benchmark -t set,get,incr,lpush,hset,zadd -n N -c 50 -r 100000` at -P 1 and -P 16
(-n 8N at -P 16, so that its runs last as long: common.requests_for)
against pyrepl, redis-server and the floor (floor_server.py: a bare uvloop + hiredis server,
the most a Python server can do here), rotating which goes first each round, and prints the
medians, pyrepl / redis and pyrepl / floor. Goals (issue 15): >= 0.9x Redis at -P1; at -P16
>= 0.5x Redis and >= 0.8x the floor. ``--base DIR`` adds another checkout's pyrepl (a
``git worktree`` of an earlier commit, C files built in place) to the rotation and prints
pyrepl / base: a before/after in the same minutes.
"""

from __future__ import annotations

from common import (
    median,
    options,
    redis_benchmark,
    requests_for,
    start_floor,
    start_pyrepl,
    start_pyrepl_from,
    start_redis,
    write_json,
)

TESTS = "set,get,incr,lpush,hset,zadd"


def main() -> int:
    args = options(__doc__, rounds=3, requests=300000, clients=50, json=None, base=None)
    py = start_pyrepl()
    rd = start_redis()
    fl = start_floor()
    base = start_pyrepl_from(args.base) if args.base else None
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for rnd in range(args.rounds):
            for pipeline in (1, 16):
                order = [("pyrepl", py), ("redis", rd), ("floor", fl)]
                if base is not None:
                    order.append(("base", base))
                k = rnd % len(order)
                for name, srv in order[k:] + order[:k]:
                    r = redis_benchmark(srv.port, TESTS, requests_for(args.requests, pipeline),
                                        args.clients, pipeline,
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
        if base is not None:
            base.stop()
    summary = {}
    print(f"\n{'pipeline':8} {'test':8} {'pyrepl rps':>12} {'redis rps':>12} "
          f"{'floor rps':>12} {'÷redis':>7} {'÷floor':>7}" + ("  ÷base" if base else ""))
    for p, tests in results.items():
        for test, by in tests.items():
            a, b, f = (median(by.get(who, [])) for who in ("pyrepl", "redis", "floor"))
            ratio = a / b if b else float("nan")
            to_floor = a / f if f else float("nan")
            summary[f"{p} {test}"] = {"pyrepl": a, "redis": b, "floor": f, "ratio": ratio,
                                      "floor_ratio": to_floor}
            extra = ""
            if base is not None:
                was = median(by.get("base", []))
                summary[f"{p} {test}"]["base"] = was
                extra = f" {a / was if was else float('nan'):7.2f}"
            print(f"{p:8} {test:8} {a:12,.0f} {b:12,.0f} {f:12,.0f} {ratio:7.2f} "
                  f"{to_floor:7.2f}" + extra)
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
