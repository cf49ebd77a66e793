"""Micro-benchmark of the hot path without sockets: a read, parse, dispatch and the reply.

    .venv/bin/python bench/bench_dispatch.py [-P 16] [--replica] [--cases SET,GET,...]
        [--repeat 7]

Each read goes through the I/O shell's ``ClientProtocol`` (net/server.py: the clock, the
counters, the reader, the reply handed to the transport, as the server runs it; the transport
is a C sink) over a ServerCore, pipelines of ``-P`` commands (16 as redis-benchmark -P 16;
``-P 1`` for lone requests). ``--replica``: one online replica, whose stream the shell takes
once per pass of 32 clients' reads (bench_dispatch_instr's model of a pass). Prints the best of
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
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_dispatch_instr import (  # noqa: E402
    CASES,
    _online_replicas,
    _pipelines,
    _shell_flush,
)


class _Transport:
    write = deque(maxlen=1).append      # (uvloop's write: C, here a C sink)

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else None


def pyrepl_ns(case: str, pipeline: int, replica: bool, n: int, repeat: int) -> float:
    import pyrepl.commands  # noqa: F401
    from pyrepl.config import Config
    from pyrepl.core import Host, ServerCore
    from pyrepl.net.server import ClientProtocol

    class ClockHost(Host):     # the clock the real server's shell gives (NetHost)
        clock_ns = staticmethod(time.perf_counter_ns)

    core = ServerCore(Config.load(None, [("save", [""])]), ClockHost(), now_ms=1)
    if replica:
        _online_replicas(core, 1)

    class Shell:
        def __init__(self) -> None:
            self.core = core

        def schedule_flush(self) -> None:
            pass

    protos = []
    for _ in range(32 if replica else 1):
        p = ClientProtocol(Shell())  # type: ignore[arg-type]
        p.connection_made(_Transport())  # type: ignore[arg-type]
        protos.append(p)
    if case == "GET":   # hits, as redis-benchmark's GET after its SET
        protos[0].data_received(b"".join(_pipelines(CASES["SET"], 16)))
    chunks = _pipelines(CASES[case], pipeline)
    best = float("inf")
    for _ in range(repeat):
        done = k = 0
        t0 = time.perf_counter_ns()
        while done < n:
            for p in protos:
                p.data_received(chunks[k % len(chunks)])
                done += pipeline
                k += 1
            if replica:
                _shell_flush(core)
        best = min(best, (time.perf_counter_ns() - t0) / done)
    return best


def floor_ns(pipeline: int, n: int, repeat: int) -> float:
    from floor_server import Floor

    floor = Floor()
    floor.connection_made(_Transport())  # type: ignore[arg-type]
    chunks = _pipelines(CASES["SET"], pipeline)
    best = float("inf")
    for _ in range(repeat):
        done = k = 0
        t0 = time.perf_counter_ns()
        while done < n:
            floor.data_received(chunks[k % len(chunks)])
            done += pipeline
            k += 1
        best = min(best, (time.perf_counter_ns() - t0) / done)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipeline", "-P", type=int, default=16)
    ap.add_argument("--replica", action="store_true")
    ap.add_argument("--cases", default="SET,GET,INCR,LPUSH,HSET,ZADD")
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    print(f"FLOOR  -P{args.pipeline:<3} {floor_ns(args.pipeline, args.n, args.repeat):8.0f} "
          "ns/command (SET)")
    for case in args.cases.split(","):
        ns = pyrepl_ns(case, args.pipeline, args.replica, args.n, args.repeat)
        print(f"{case:6} -P{args.pipeline:<3} {ns:8.0f} ns/command"
              + ("  (one replica)" if args.replica else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
