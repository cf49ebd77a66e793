"""Client latency while four replicas full-sync at once, with and without pyrepl's caps.

    .venv/bin/python bench/bench_sync_pace.py [--keys 1000000] [--value 100]
                                              [--bandwidth 16mb] [--concurrent 1] [--json FILE]

Theory of operation: one scenario, four masters in the same run, one after the other: Redis
7.0.15 (no such caps), pyrepl as Redis (no caps), pyrepl with ``repl-sync-max-bandwidth
--bandwidth`` alone, and pyrepl with it and ``repl-full-sync-max-concurrent --concurrent``.
Each master holds ``--keys`` keys (``DEBUG POPULATE``, ``--value`` bytes each) and the default
diskless sync, with ``repl-diskless-sync-max-replicas 4``: the four replicas share a snapshot
forked as soon as all four asked, when no cap keeps them apart. A probe client sends one command at a time (``SET`` then ``GET`` of one key,
unpipelined), timing each round trip, for ``--quiet`` seconds before anything happens
(the baseline), then while four fresh Redis 7.0.15 replicas are told ``REPLICAOF`` at once and
until all four are in sync (their offsets equal to the master's). Reported per master: the
probe's p50 / p99 / p99.9 / max in the baseline and during the syncs, the requests the probe
completed per second during the syncs, and how long until all four were in sync. On loopback
the network is the CPU: the snapshot child writing to four sockets and four replicas loading
compete with the master for the machine's cores, which is what the pace and the turns bound.
Goal (issue 40): the client's p99 during the syncs close to its baseline with the caps; the
price is the time to bring the four replicas up.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from bench_replication import HOST, Conn, stop_server, wait_until
from common import percentile, run_kinds, start_pyrepl, start_redis, tmpdir

KINDS = ("redis", "pyrepl", "pyrepl-bandwidth", "pyrepl-bandwidth-turns")
# the four replicas share one snapshot (when no cap keeps them apart), forked as soon as all
# four asked (so the window is the transfers and loads, not the diskless delay)
SHARED = ("--repl-diskless-sync-delay", "5", "--repl-diskless-sync-max-replicas", "4")


class Probe(threading.Thread):
    """One connection, one command at a time: each round trip's seconds, by phase."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.phase = "quiet"
        self.lat: dict[str, list[float]] = {"quiet": [], "sync": []}
        self.span: dict[str, list[float]] = {"quiet": [0.0, 0.0], "sync": [0.0, 0.0]}
        self.stop_ev = threading.Event()

    def set_phase(self, phase: str) -> None:
        now = time.perf_counter()
        self.span[self.phase][1] = now
        self.phase = phase
        self.span[phase][0] = now

    def run(self) -> None:
        c = Conn(self.port)
        self.span["quiet"][0] = time.perf_counter()
        i = 0
        try:
            while not self.stop_ev.is_set() and i < 50_000_000:
                t = time.perf_counter()
                if i % 2:
                    c.cmd("GET", "probe")
                else:
                    c.cmd("SET", "probe", i)
                self.lat[self.phase].append(time.perf_counter() - t)
                i += 1
        finally:
            self.span[self.phase][1] = time.perf_counter()
            c.close()


def _ms(xs: list[float], p: float) -> float:
    return round(percentile(xs, p) * 1000, 2)


def run(kind: str, args: argparse.Namespace) -> dict[str, object]:
    d = tmpdir(f"bench-pace-{kind}-")
    caps: list[str] = []
    if kind.startswith("pyrepl-bandwidth"):
        caps += ["--repl-sync-max-bandwidth", args.bandwidth]
    if kind.endswith("turns"):
        caps += ["--repl-full-sync-max-concurrent", str(args.concurrent)]
    if kind == "redis":
        master = start_redis("--enable-debug-command", "yes", *SHARED, tmpdir=d)
    else:
        master = start_pyrepl(*SHARED, *caps, tmpdir=d)
    replicas = [start_redis(tmpdir=tmpdir(f"bench-pace-replica-{i}-")) for i in range(4)]
    probe: Probe | None = None
    try:
        m = Conn(master.port, timeout=600)
        m.cmd("DEBUG", "POPULATE", args.keys, "key", args.value)
        probe = Probe(master.port)
        probe.start()
        time.sleep(args.quiet)
        conns = [Conn(r.port) for r in replicas]
        probe.set_phase("sync")
        t0 = time.perf_counter()
        for c in conns:
            c.cmd("REPLICAOF", HOST, master.port)

        def synced() -> bool:
            off = m.role()[1]
            return all(c.role()[0] == "connected" and c.role()[1] >= off for c in conns)

        wait_until(synced, args.timeout, 0.05, "four replicas in sync")
        took = time.perf_counter() - t0
        probe.stop_ev.set()
        probe.join(10)
        quiet, sync = probe.lat["quiet"], probe.lat["sync"]
        sync_s = max(1e-9, probe.span["sync"][1] - probe.span["sync"][0])
        out = {
            "quiet p50 ms": _ms(quiet, 50), "quiet p99 ms": _ms(quiet, 99),
            "sync p50 ms": _ms(sync, 50), "sync p99 ms": _ms(sync, 99),
            "sync p99.9 ms": _ms(sync, 99.9), "sync max ms": _ms(sync, 100),
            "probe req/s during syncs": round(len(sync) / sync_s),
            "four in sync s": round(took, 1),
        }
        for c in conns:
            c.close()
        m.close()
        return out
    finally:
        if probe is not None:
            probe.stop_ev.set()
            probe.join(10)
        for r in replicas:
            stop_server(r)
        stop_server(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--bandwidth", default="16mb")
    ap.add_argument("--concurrent", type=int, default=1)
    ap.add_argument("--quiet", type=float, default=5)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    return run_kinds(args.kinds.split(","), run, args,
                     f"{args.keys} keys x {args.value} B, 4 replicas, bandwidth "
                     f"{args.bandwidth}, turns {args.concurrent}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
