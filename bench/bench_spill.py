"""The full sync that loops on a buffer limit (Redis 7.0.15) against pyrepl's spill.

    .venv/bin/python bench/bench_spill.py [--keys 200000] [--delay-us 20] [--window 60]
                                          [--json FILE]

Theory of operation: one scenario, three masters in the same run, one after the other: Redis
7.0.15, pyrepl as Redis (``repl-full-sync-spill-threshold 0``) and pyrepl with the spill
(``--threshold``, 4mb). Each master holds ``--keys`` keys of 100 bytes and writes its snapshot
slowly (``rdb-key-save-delay`` ``--delay-us`` per key: ``keys x delay`` seconds, 4 s by default)
with ``client-output-buffer-limit replica 8mb 4mb 10`` and a 1mb backlog; a write load
(``redis-benchmark -t set -d 1000 -c 20 -P 8 -r 100000``, ~tens of MB/s here) runs from before
``REPLICAOF`` to the end of the window. A fresh Redis 7.0.15 replica (its classic diskless
sync) is told ``REPLICAOF``; the run watches for ``--window`` seconds: full syncs served
(``sync_full``), replicas dropped at the limit (``client_output_buffer_limit_disconnections``),
the first link up, and, sampled every 100 ms, the master's RSS and
``mem_total_replication_buffers`` (peak), and pyrepl's ``total_repl_spilled_bytes``. The load
stops at the window's end; then how long until the replica has caught up (or "never" when the
link never came up). Goal (issue 40): Redis loops (more than one full sync, no link that stays
up); pyrepl with the spill does one full sync, catches up, and its replication buffer stays
near the threshold (RSS bounded by the dataset plus the threshold, not by the load).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time

from bench_replication import HOST, Conn, stable_offset, stop_server, wait_until
from common import run_kinds, start_pyrepl, start_redis, stop_popen, tmpdir

SCENARIO = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            "--repl-backlog-size", "1mb", "--client-output-buffer-limit",
            "replica 8mb 4mb 10"]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Watch(threading.Thread):
    def __init__(self, port: int, pid: int, replica: int) -> None:
        super().__init__(daemon=True)
        self.port, self.pid, self.replica = port, pid, replica
        self.stop_ev = threading.Event()
        self.rss_peak = 0.0
        self.buf_peak = 0
        self.first_up: float | None = None
        self.t0 = time.perf_counter()

    def run(self) -> None:
        m, r = Conn(self.port), Conn(self.replica)
        try:
            while not self.stop_ev.is_set():
                self.rss_peak = max(self.rss_peak, rss_mb(self.pid))
                self.buf_peak = max(self.buf_peak, int(m.info("memory").get(
                    "mem_total_replication_buffers", 0)))
                if self.first_up is None and r.role()[0] == "connected":
                    self.first_up = time.perf_counter() - self.t0
                self.stop_ev.wait(0.1)
        finally:
            m.close()
            r.close()


def run(kind: str, args: argparse.Namespace) -> dict[str, object]:
    d = tmpdir(f"bench-spill-{kind}-")
    extra = [*SCENARIO, "--rdb-key-save-delay", str(args.delay_us)]
    if kind == "redis":
        master = start_redis("--enable-debug-command", "yes", *extra, tmpdir=d)
    else:
        thr = args.threshold if kind == "pyrepl-spill" else "0"
        master = start_pyrepl(*extra, "--repl-full-sync-spill-threshold", thr, tmpdir=d)
    replica = start_redis(tmpdir=tmpdir("bench-spill-replica-"))
    bench: subprocess.Popen | None = None
    try:
        m = Conn(master.port, timeout=600)
        m.cmd("DEBUG", "POPULATE", args.keys, "key", 100)
        bench = subprocess.Popen(
            ["redis-benchmark", "-h", HOST, "-p", str(master.port), "-q", "-t", "set", "-d",
             "1000", "-c", "20", "-P", "8", "-r", "100000", "-n", "100000000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        assert master.proc is not None
        watch = Watch(master.port, master.proc.pid, replica.port)
        watch.start()
        r = Conn(replica.port)
        off0 = m.role()[1]
        r.cmd("REPLICAOF", HOST, master.port)
        time.sleep(args.window)
        stop_popen(bench)
        bench = None
        off_end = stable_offset(m)
        st = m.info("stats")
        load_mb_s = (off_end - off0) / 2**20 / args.window
        try:
            t = time.perf_counter()
            wait_until(lambda: r.role()[0] == "connected" and r.role()[1] >= off_end,
                       args.settle, 0.05, "caught up")
            caught = f"{time.perf_counter() - t:.1f} s after the load"
        except TimeoutError:
            caught = "never"
        watch.stop_ev.set()
        watch.join(5)
        out = {
            "full syncs": int(st["sync_full"]),
            # (7.0.15 has no such counter: its log says each one)
            "dropped at the limit": int(st["client_output_buffer_limit_disconnections"])
            if "client_output_buffer_limit_disconnections" in st
            else master.log().count("for overcoming of output buffer limits"),
            "first link up s": round(watch.first_up, 1) if watch.first_up else None,
            "caught up": caught,
            "master RSS peak MB": round(watch.rss_peak, 1),
            "master repl buffers peak MB": round(watch.buf_peak / 2**20, 1),
            "spilled MB": round(int(st.get("total_repl_spilled_bytes", 0)) / 2**20, 1),
            "stream MB/s": round(load_mb_s, 1),
        }
        m.close()
        r.close()
        return out
    finally:
        if bench is not None:
            stop_popen(bench)
        stop_server(replica)
        stop_server(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--delay-us", type=int, default=20)
    ap.add_argument("--threshold", default="4mb")
    ap.add_argument("--window", type=float, default=60)
    ap.add_argument("--settle", type=float, default=120)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    return run_kinds(["redis", "pyrepl-no-spill", "pyrepl-spill"], run, args,
                     f"{args.keys} keys, snapshot {args.keys * args.delay_us / 1e6:.0f} s, "
                     f"window {args.window:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
