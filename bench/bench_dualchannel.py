"""Valkey's dual-channel full sync with pyrepl on either side, beside Valkey on both.

    .venv/bin/python bench/bench_dualchannel.py [--rounds 3] [--keys 1000000] [--quick]
                                                [--json FILE]

Theory of operation: three pairs, each master with ``DEBUG POPULATE <keys> key 100`` and a
fresh empty replica told ``REPLICAOF``, every one speaking Valkey 8.1's dual channel
(``dual-channel-replication-enabled yes`` on the Valkey nodes; pyrepl's ``repl-rdb-channel
yes``, its default, offers and accepts it):

* ``valkey->valkey``: the reference (``make redis-src``'s Valkey 8.1 build);
* ``pyrepl->valkey``: a pyrepl master serving a Valkey replica;
* ``valkey->pyrepl``: a pyrepl replica following a Valkey master.

For each pair and round, idle (REPLICAOF -> link up) and under a write load
(``redis-benchmark -t set -n 2000000 -c 20 -P 8 -r 1000000`` started right before REPLICAOF and
stopped 1 s after link up): link up, caught up (the replica's offset reaches the master's
offset read at link up), drained (the master's offset once the load stopped), all seconds from
REPLICAOF, as bench_replication.py's fullsync section measures them. A sampler reads INFO every
50 ms: the master's peak ``mem_total_replication_buffers`` (what the dual channel keeps off the
master) and the replica's peak local buffer (pyrepl's ``mem_replica_full_sync_buffer``,
Valkey's ``replicas_repl_buffer_peak``). The pairs alternate order from round to round; the
table gives medians and each pyrepl pair's ratio to ``valkey->valkey``. Goal (issue 40): the
dual-channel sync works both ways under load, with the master's buffer near the backlog's size
and times within 1.5x of Valkey's own pair.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from typing import Any

from bench_replication import HOST, Conn, Sampler, stable_offset, stop_server, wait_until
from common import median, start_pyrepl, stop_popen, tmpdir, write_json

from tests.support.procs import ServerProcess, start_valkey, valkey_server_path

PAIRS = ("valkey->valkey", "pyrepl->valkey", "valkey->pyrepl")
VALKEY_ARGS = ("--dual-channel-replication-enabled", "yes", "--enable-debug-command", "yes")


def start(kind: str, *extra: str) -> ServerProcess:
    d = tmpdir(f"bench-dual-{kind}-")
    if kind == "pyrepl":
        return start_pyrepl(*extra, tmpdir=d)
    return start_valkey(*VALKEY_ARGS, *extra, tmpdir=d)


class Peaks(Sampler):
    """The master's peak replication buffer and the replica's peak local buffer (pyrepl's
    in INFO memory, Valkey's in INFO replication)."""

    def replica_buffer(self, r: Conn) -> int | None:
        own = super().replica_buffer(r)
        if own is not None:
            return own
        v = r.info("replication").get("replicas_repl_buffer_size")
        return None if v is None else int(v)


def sync_once(pair: str, master: ServerProcess, load: list[str] | None,
              timeout: float) -> dict[str, float]:
    """A fresh replica's full sync from ``master``; seconds from REPLICAOF."""
    replica = start(pair.split("->")[1])
    m, r = Conn(master.port), Conn(replica.port)
    peaks = Peaks(master.port, replica.port)
    bench: subprocess.Popen | None = None
    out: dict[str, float] = {}
    try:
        peaks.start()
        if load is not None:
            bench = subprocess.Popen(load, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.05)
        t0 = time.perf_counter()
        r.cmd("REPLICAOF", HOST, master.port)
        t_up = wait_until(lambda: r.role()[0] == "connected", timeout, 0.005, "link up")
        off_up = m.role()[1]
        out["link_up_s"] = t_up - t0
        if bench is not None:
            t_caught = None
            while time.perf_counter() < t_up + 1.0 and bench.poll() is None:
                if t_caught is None and r.role()[1] >= off_up:
                    t_caught = time.perf_counter()
                time.sleep(0.005)
            stop_popen(bench)
            off_stop = stable_offset(m)
            t_drained = wait_until(lambda: r.role()[1] >= off_stop, timeout, 0.005, "drained")
            t_caught = t_caught or wait_until(lambda: r.role()[1] >= off_up, timeout, 0.005,
                                              "caught up")
            out["caught_up_s"] = t_caught - t0
            out["drained_s"] = t_drained - t0
        peaks.finish()
        if peaks.error is not None:
            raise RuntimeError(f"sampler failed: {peaks.error!r}")
        out["master_buf_mb"] = peaks.master_peak / 2**20
        out["replica_buf_mb"] = (peaks.replica_peak or 0) / 2**20
        mk, rk = m.cmd("DBSIZE"), r.cmd("DBSIZE")
        if mk != rk:
            raise AssertionError(f"{pair}: master has {mk} keys, replica {rk}")
        info = r.info("replication")
        if pair.endswith("pyrepl") and info.get("master_sync_mode") != "dual-channel":
            raise AssertionError(f"{pair}: the sync was {info.get('master_sync_mode')}")
        return out
    finally:
        peaks.stop_ev.set()
        if bench is not None:
            stop_popen(bench)
        m.close()
        r.close()
        stop_server(replica)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--load-requests", type=int, default=2_000_000)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="200,000 keys, one round")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.quick:
        args.keys, args.rounds = 200_000, 1
    if valkey_server_path() is None:
        print("the Valkey 8.1 build (make redis-src) is missing: nothing to compare with")
        return 2
    got: dict[str, dict[str, list[float]]] = {p: {} for p in PAIRS}
    for rnd in range(args.rounds):
        order = PAIRS[rnd % 3:] + PAIRS[:rnd % 3]
        for pair in order:
            master = start(pair.split("->")[0], "--repl-diskless-sync-delay", "0")
            try:
                m = Conn(master.port, timeout=600)
                m.cmd("DEBUG", "POPULATE", args.keys, "key", 100)
                m.close()
                idle = sync_once(pair, master, None, args.timeout)
                load = ["redis-benchmark", "-h", HOST, "-p", str(master.port), "-q", "-t",
                        "set", "-n", str(args.load_requests), "-c", "20", "-P", "8", "-r",
                        "1000000"]
                busy = sync_once(pair, master, load, args.timeout)
            finally:
                stop_server(master)
            row = {"idle link up s": idle["link_up_s"], "load link up s": busy["link_up_s"],
                   "load caught up s": busy["caught_up_s"], "load drained s": busy["drained_s"],
                   "load master buf MB": busy["master_buf_mb"],
                   "load replica buf MB": busy["replica_buf_mb"]}
            for k, v in row.items():
                got[pair].setdefault(k, []).append(v)
            print(f"round {rnd + 1} {pair:15} " + "  ".join(f"{k} {v:.2f}"
                                                            for k, v in row.items()), flush=True)
    metrics = list(got[PAIRS[0]])
    print(f"\n| metric | {' | '.join(PAIRS)} | pyrepl->valkey / ref | valkey->pyrepl / ref |")
    print("|---|---|---|---|---|---|")
    summary: dict[str, Any] = {}
    for k in metrics:
        med = {p: median(got[p][k]) for p in PAIRS}
        ref = med[PAIRS[0]]
        ratios = [med[p] / ref if ref else float("nan") for p in PAIRS[1:]]
        summary[k] = {"median": med, "ratio": dict(zip(PAIRS[1:], ratios, strict=True))}
        print(f"| {k} | " + " | ".join(f"{med[p]:.2f}" for p in PAIRS) + " | "
              + " | ".join(f"{x:.2f}" for x in ratios) + " |")
    if args.json:
        write_json(args.json, {"keys": args.keys, "rounds": args.rounds, "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
