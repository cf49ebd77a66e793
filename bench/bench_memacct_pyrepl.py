"""The memory accounting as built (pyrepl/_memacct.c, pyrepl/memacct.py; issue 37 part 1): its
error against the ground truth and its costs, in one process, on a ServerCore loaded to ~200 MB.

    .venv/bin/python bench/bench_memacct_pyrepl.py [--scale 1.0]

The accounting is installed first (as the CLI does), then a ServerCore is loaded through its
clients' RESP path, phase by phase (500k strings, 50k hashes of 10, 50k sorted sets of 10,
100k lists of 10; then FLUSHALL). After each phase: ``used(fresh=True)`` against the ground
truth (CPython's own statistics over every arena, ``_PyObject_DebugMallocStats``'s "bytes in
allocated blocks", + glibc's heap in use, mallinfo2), the RSS, one warm walk (median of 20),
one fresh reading (walk + the statistics re-read), ``used()`` inside its interval and
``bound()`` per call through the meter (Python) and of the module's function (``C ns``: the C
API's cost is that minus a Python call's ~20-30 ns), and how far the bound is above used.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _per_call_ns(fn, n: int = 200_000) -> float:
    t = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t) / n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    from pyrepl import memacct

    kind = memacct.install()
    if kind != memacct.POOL_WALK:
        print(f"the pool walk does not run: {memacct.why_not()}", file=sys.stderr)
        return 1
    import pyrepl.commands  # noqa: F401
    from pyrepl import _memacct  # type: ignore[attr-defined]
    from pyrepl.config import Config
    from pyrepl.core.server import ServerCore

    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=1)
    c = core.connection_made()
    meter = core.meter

    def feed(cmds) -> None:
        batch = []
        for argv in cmds:
            batch.append(_enc(*argv))
            if len(batch) == 1000:
                c.receive_data(b"".join(batch))
                c.data_to_send()
                batch.clear()
        if batch:
            c.receive_data(b"".join(batch))
            c.data_to_send()

    def n(x: int) -> int:
        return max(1, int(x * args.scale))

    phases = [
        ("start", lambda: None),
        ("+500k strings", lambda: feed((b"SET", b"s:%d" % i, b"value:%d" % i)
                                       for i in range(n(500_000)))),
        ("+50k hashes x10", lambda: feed([b"HSET", b"h:%d" % i] + [
            x for j in range(10) for x in (b"f%d" % j, b"v%d" % (i + j))]
            for i in range(n(50_000)))),
        ("+50k zsets x10", lambda: feed([b"ZADD", b"z:%d" % i] + [
            x for j in range(10) for x in (b"%d" % (i * j), b"m%d" % j)]
            for i in range(n(50_000)))),
        ("+100k lists x10", lambda: feed([b"RPUSH", b"l:%d" % i] + [b"e%d" % j for j in range(10)]
                                         for i in range(n(100_000)))),
        ("FLUSHALL", lambda: feed([(b"FLUSHALL",)])),
    ]
    print(f"{'after':18} {'used MB':>9} {'truth MB':>9} {'error':>10} {'err %':>7} "
          f"{'RSS MB':>8} {'arenas':>6} {'walk us':>8} {'fresh us':>9} {'used() ns':>9} "
          f"{'bound ns':>8} {'C ns':>5} {'bound-used':>10}")
    for name, fill in phases:
        fill()
        used = meter.used(fresh=True)
        pym, heap = memacct.ground_truth()
        truth = pym + heap
        walks = []
        for _ in range(20):
            w, ns, arenas = _memacct.walk()
            walks.append(ns)
        t = time.perf_counter_ns()
        for _ in range(20):
            meter.used(fresh=True)
        fresh_us = (time.perf_counter_ns() - t) / 20 / 1000
        _memacct.set_interval(10**12)          # used() inside its interval: no walk
        meter.used(fresh=True)
        used_ns = _per_call_ns(meter.used)
        _memacct.set_interval(1_000_000)
        bound_ns = _per_call_ns(meter.bound)
        bound_c_ns = _per_call_ns(_memacct.bound)
        slack = meter.bound() - meter.used(fresh=True)
        err = used - truth
        print(f"{name:18} {used / 1e6:9.1f} {truth / 1e6:9.1f} {err:10,d} "
              f"{err * 100 / truth:6.2f}% {meter.rss() / 1e6:8.1f} {arenas:6d} "
              f"{statistics.median(walks) / 1000:8.1f} {fresh_us:9.1f} {used_ns:9.0f} "
              f"{bound_ns:8.0f} {bound_c_ns:5.0f} {slack:10,d}", flush=True)
    print("stats:", memacct.stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
