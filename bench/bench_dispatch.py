"""Micro-benchmark of the hot path without sockets: a read, parse, dispatch and the reply.

    .venv/bin/python bench/bench_dispatch.py [-P 16] [--replica] [--cases SET,GET,...]
        [--repeat 7]

Each read goes through the I/O shell's ``ClientProtocol`` (net/server.py: the clock, the
counters, the reader, the reply handed to the transport, as the server runs it; the transport
is a C sink) over a ServerCore, pipelines of ``-P`` commands (16 as redis-benchmark -P 16;
``-P 1`` for lone requests). ``--replica``: one online replica, whose stream the shell takes
once per pass (of 32 clients' reads at -P1): bench_dispatch_instr's model, shared with it. Prints the best of
``--repeat`` runs in ns per command, beside the Python floor's (bench/floor_server.py's whole
work on the SET stream). Wall time in process: for a change's before/after on a quiet machine
(``PYTHONPATH=<worktree> .venv/bin/python bench/bench_dispatch.py``); bench_dispatch_instr.py
counts instructions, which do not drift.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_dispatch_instr import floor_run, shell_run, shell_setup  # noqa: E402


def best_ns(run, n: int, repeat: int) -> float:
    """The best of ``repeat`` calls of ``run()`` (which runs ``n`` commands), ns a command."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        run()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeline", "-P", type=int, default=16)
    ap.add_argument("--replica", action="store_true")
    ap.add_argument("--cases", default="SET,GET,INCR,LPUSH,HSET,ZADD")
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    floor = best_ns(partial(floor_run, args.pipeline, args.n), args.n, args.repeat)
    print(f"FLOOR  -P{args.pipeline:<3} {floor:8.0f} ns/command (SET)")
    replicas = 1 if args.replica else 0
    for case in args.cases.split(","):
        core, protos, chunks = shell_setup(case, replicas, args.pipeline)
        run = partial(shell_run, core, protos, chunks, args.n, args.pipeline, replicas)
        ns = best_ns(run, args.n, args.repeat)
        print(f"{case:6} -P{args.pipeline:<3} {ns:8.0f} ns/command"
              + ("  (one replica)" if args.replica else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
