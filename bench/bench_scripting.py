"""EVALSHA of a small script, pyrepl beside Debian's redis-server, same run, interleaved.

    .venv/bin/python bench/bench_scripting.py [--rounds 3] [--requests 100000]

The script is ``return redis.call('INCR', KEYS[1])`` (SCRIPT LOAD on both servers first);
redis-benchmark runs EVALSHA on random keys (``-c 50``, ``-P 1`` and ``-P 16``) against both,
alternating which goes first each round, next to plain INCR as the baseline (EVAL itself
is left out: redis-benchmark's CSV test name would hold the script's comma); prints medians
and the ratio pyrepl / redis. What it measures on our side: the EVALSHA dispatch, setting
KEYS/ARGV in Lua, one redis.call round trip Lua -> Python -> core.call -> Lua, and the reply.
"""

from __future__ import annotations

import argparse
import hashlib

from common import median, redis_benchmark_command, start_pyrepl, start_redis

SCRIPT = "return redis.call('INCR', KEYS[1])"
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
COMMANDS: dict[str, list[str]] = {
    "INCR": ["INCR", "k:__rand_int__"],
    "EVALSHA": ["EVALSHA", SHA, "1", "k:__rand_int__"],
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100000)
    args = ap.parse_args()
    py = start_pyrepl()
    rd = start_redis()
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    try:
        import redis

        for srv in (py, rd):
            with redis.Redis(port=srv.port) as r:
                assert r.script_load(SCRIPT) == SHA
        for rnd in range(args.rounds):
            for pipeline in (1, 16):
                order = [("pyrepl", py), ("redis", rd)]
                if rnd % 2:
                    order.reverse()
                for name, command in COMMANDS.items():
                    for who, srv in order:
                        rps = redis_benchmark_command(srv.port, command, args.requests, 50,
                                                      pipeline)
                        results.setdefault((name, pipeline), {}).setdefault(who, []).append(rps)
                print(f"round {rnd + 1} -P{pipeline} done", flush=True)
    finally:
        py.stop()
        rd.stop()
    print(f"\n{'pipeline':8} {'command':9} {'pyrepl rps':>12} {'redis rps':>12} {'ratio':>6}")
    for (name, pipeline), by in results.items():
        a, b = median(by["pyrepl"]), median(by["redis"])
        print(f"P{pipeline:<7} {name:9} {a:12,.0f} {b:12,.0f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
