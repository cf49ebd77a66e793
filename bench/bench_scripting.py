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

import hashlib

from common import side_by_side_main

SCRIPT = "return redis.call('INCR', KEYS[1])"
SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
COMMANDS: dict[str, list[str]] = {
    "INCR": ["INCR", "k:__rand_int__"],
    "EVALSHA": ["EVALSHA", SHA, "1", "k:__rand_int__"],
}


def setup(r) -> None:
    assert r.script_load(SCRIPT) == SHA


if __name__ == "__main__":
    raise SystemExit(side_by_side_main(COMMANDS, setup))
