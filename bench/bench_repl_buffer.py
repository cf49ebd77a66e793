"""The shared replication buffer beside Redis: memory while replicas are paused, and after.

    .venv/bin/python bench/bench_repl_buffer.py [--rounds 3] [--burst-mb 5] [--replicas 1,3]

A master (pyrepl, then redis-server 7.0.15, interleaved per round) with `repl-backlog-size 1mb`
and N real redis-server 7.0.15 replicas. The replicas are paused (SIGSTOP) and the master takes
a burst of 1 KB SETs; then they resume (SIGCONT) and catch up. Reported per server: the peak
of INFO `mem_total_replication_buffers` and `repl_backlog_histlen` while they are paused, the
growth of the master's RSS over the burst (what really held the bytes, per-replica copies
included), the time from SIGCONT until every replica acknowledged the whole stream, and the
settled `mem_total_replication_buffers` a second later. Medians over the rounds. A part of each burst always sits in the sockets'
kernel buffers (which neither server counts), so read the figures side by side.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import redis
from common import median, options, rss_bytes, start_pyrepl, start_redis

from tests.support.waits import wait_for

MB = 1 << 20
ARGS = ("--repl-backlog-size", "1mb", "--repl-diskless-sync-delay", "0")


def one(kind: str, replicas: int, burst_mb: int) -> dict[str, float]:
    master = start_pyrepl(*ARGS) if kind == "pyrepl" else start_redis(*ARGS)
    reps = []
    try:
        m = redis.Redis(port=master.port)
        for _ in range(replicas):
            reps.append(start_redis("--replicaof", "127.0.0.1", str(master.port)))
        for rep in reps:
            rc = redis.Redis(port=rep.port)
            wait_for(lambda rc=rc: rc.info("replication").get("master_link_status") == "up", 60)
        m.set("warm", "1")
        off = m.info("replication")["master_repl_offset"]
        for rep in reps:
            rc = redis.Redis(port=rep.port)
            wait_for(lambda rc=rc: rc.info("replication")["slave_repl_offset"] >= off, 30)
        rss0 = rss_bytes(master.proc.pid)
        for rep in reps:
            os.kill(rep.proc.pid, signal.SIGSTOP)
        peak_mem = peak_hist = 0
        value = b"v" * 1000
        p = m.pipeline(transaction=False)
        for i in range(burst_mb * 1024):
            p.set(b"burst:%d" % i, value)
            if i % 128 == 127:
                p.execute()
                if i % 1024 == 1023:
                    info = {**m.info("memory"), **m.info("replication")}
                    peak_mem = max(peak_mem, info["mem_total_replication_buffers"])
                    peak_hist = max(peak_hist, info["repl_backlog_histlen"])
        p.execute()
        time.sleep(0.2)
        info = {**m.info("memory"), **m.info("replication")}
        peak_mem = max(peak_mem, info["mem_total_replication_buffers"])
        peak_hist = max(peak_hist, info["repl_backlog_histlen"])
        rss_growth = rss_bytes(master.proc.pid) - rss0
        for rep in reps:
            os.kill(rep.proc.pid, signal.SIGCONT)
        end = info["master_repl_offset"]
        t0 = time.monotonic()

        def acked() -> bool:   # redis-py parses the slaveN lines into dicts
            inf = m.info("replication")
            offs = [v["offset"] for k, v in inf.items() if k.startswith("slave")
                    and isinstance(v, dict)]
            return len(offs) == replicas and min(offs) >= end

        wait_for(acked, 120, interval=0.01)
        caught_up = time.monotonic() - t0
        time.sleep(1.0)          # the trim is incremental (640 blocks per event-loop pass)
        settled = m.info("memory")["mem_total_replication_buffers"]
        return {"peak_mem": peak_mem, "peak_hist": peak_hist, "rss_growth": rss_growth,
                "settled": settled, "caught_up_s": caught_up}
    finally:
        for rep in reps:
            try:
                os.kill(rep.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            rep.stop()
        master.stop()


def main() -> int:
    args = options(__doc__, rounds=3, burst_mb=5, replicas="1,3")
    print(f"burst {args.burst_mb} MB of 1 KB SETs, repl-backlog-size 1 MB, medians of "
          f"{args.rounds}")
    print("| replicas | figure | pyrepl | redis |")
    print("|---|---|---|---|")
    for n in (int(x) for x in args.replicas.split(",")):
        runs: dict[str, list[dict[str, float]]] = {"pyrepl": [], "redis": []}
        for _ in range(args.rounds):
            for kind in ("pyrepl", "redis"):
                runs[kind].append(one(kind, n, args.burst_mb))
        for fig, unit in (("peak_mem", MB), ("peak_hist", MB), ("rss_growth", MB),
                          ("settled", MB), ("caught_up_s", 1)):
            ours = median([r[fig] for r in runs["pyrepl"]])
            theirs = median([r[fig] for r in runs["redis"]])
            cells = [f"{v / MB:.2f} MB" if unit == MB else f"{v:.2f} s" for v in (ours, theirs)]
            print(f"| {n} | {fig} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
