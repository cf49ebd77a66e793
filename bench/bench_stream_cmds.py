"""Stream commands before/after a change, pyrepl (this tree and another checkout) beside
redis-server, same run, interleaved (issue 37 part 4: streams kept as listpacks).

    .venv/bin/python bench/bench_stream_cmds.py --base /path/to/checkout [--rounds 1]
        [--requests 20000]

``--base`` is a checkout of the earlier commit with its C files built in place (``git worktree
add`` or ``git archive | tar -x``, then ``setup.py build_ext --inplace``). redis-benchmark runs
each command (``-c 50``, ``-P 1`` and ``-P 16``) against the three servers, alternating the order
each round, on a stream of 1,000 entries (bench_types.py's) that the XADD runs grow: XADD,
XRANGE of the first 10 entries (bench_types.py's), of a whole node (100) and of the last 10.
Prints the medians and the ratios new / base and new / redis.
"""

from __future__ import annotations

import argparse

import redis
from common import compare_commands, median, start_pyrepl, start_pyrepl_from, start_redis

COMMANDS: dict[str, list[str]] = {
    "XADD": ["XADD", "stream", "*", "field", "__rand_int__"],
    "XRANGE": ["XRANGE", "stream", "-", "+", "COUNT", "10"],
    "XRANGE100": ["XRANGE", "stream", "-", "+", "COUNT", "100"],
    "XREVRANGE": ["XREVRANGE", "stream", "+", "-", "COUNT", "10"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the earlier checkout (C built in place)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--requests", type=int, default=20000)
    args = ap.parse_args()
    servers = {"new": start_pyrepl(), "base": start_pyrepl_from(args.base),
               "redis": start_redis()}
    try:
        for srv in servers.values():
            with redis.Redis(port=srv.port) as r:
                for i in range(1000):
                    r.xadd("stream", {"field": i})
        results = compare_commands(servers, COMMANDS, args.rounds, args.requests)
    finally:
        for srv in servers.values():
            srv.stop()
    print(f"\n{'pipeline':8} {'command':10} {'new rps':>10} {'base rps':>10} {'redis rps':>10}"
          f" {'new/base':>8} {'new/redis':>9} {'base/redis':>10}")
    for (name, pipeline), by in results.items():
        n, b, r = median(by["new"]), median(by["base"]), median(by["redis"])
        print(f"P{pipeline:<7} {name:10} {n:10,.0f} {b:10,.0f} {r:10,.0f} {n / b:8.2f}"
              f" {n / r:9.2f} {b / r:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
