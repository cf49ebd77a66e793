"""CPU a pyrepl replica spends per applied SET, with and without its own AOF (everysec).

    .venv/bin/python bench/bench_aof_replica.py [--modes plain,aof,plain,aof]

A pyrepl master and a pyrepl replica (``--appendonly yes --appendfsync everysec`` for
``aof``); ``redis-benchmark -t set -c 50 -r 100000`` on the master, 400,000 requests at -P16
then 100,000 at -P1; after each load, once the replica caught up, its utime + stime from /proc
divided by the requests: microseconds of CPU per applied SET (a figure the machine's load moves
far less than a rate).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.support.procs import start_pyrepl  # noqa: E402
from tests.support.redispy import r  # noqa: E402
from tests.support.waits import wait_for, wait_offsets  # noqa: E402

LOADS = (("16", 400_000), ("1", 100_000))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(mode: str) -> list[tuple[str, float]]:
    m = start_pyrepl("--repl-diskless-sync-delay", "0")
    extra = ("--appendonly", "yes", "--appendfsync", "everysec") if mode == "aof" else ()
    rep = start_pyrepl("--master", f"127.0.0.1:{m.port}", *extra, role="replica")
    out = []
    try:
        wait_for(lambda: r(rep.port).info("replication")["master_link_status"] == "up",
                 timeout=60, what="the replica's link")
        time.sleep(1)
        assert rep.proc is not None
        before = cpu_seconds(rep.proc.pid)
        for pipeline, n in LOADS:
            subprocess.run(["redis-benchmark", "-p", str(m.port), "-t", "set", "-n", str(n),
                            "-P", pipeline, "-c", "50", "-r", "100000", "-q"], check=True,
                           capture_output=True, timeout=600)
            wait_offsets(m.port, rep.port)
            after = cpu_seconds(rep.proc.pid)
            out.append((pipeline, (after - before) * 1e6 / n))
            before = after
    finally:
        rep.stop()
        m.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="plain,aof,plain,aof")
    args = ap.parse_args()
    for mode in args.modes.split(","):
        figures = ", ".join(f"-P{p}: {us:.2f} us" for p, us in run(mode))
        print(f"replica {mode:5} CPU per applied SET: {figures}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
