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

from common import compare_commands, print_ratios, start_pyrepl, start_redis

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
    try:
        import redis

        for srv in (py, rd):
            with redis.Redis(port=srv.port) as r:
                assert r.script_load(SCRIPT) == SHA
        results = compare_commands({"pyrepl": py, "redis": rd}, COMMANDS, args.rounds,
                                   args.requests)
    finally:
        py.stop()
        rd.stop()
    print_ratios(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
