"""A stream-heavy full sync, pyrepl beside redis-server 7.0.15 (same run, alternating).

    .venv/bin/python bench/bench_stream_sync.py [--rounds 3] [--entries 200000]

The master (pyrepl, or redis-server) holds streams only: ``--entries`` entries over 8 streams of
3 fields each, every stream with two consumer groups that read a third of it (a PEL of that
size each) and acked half of that. A replica of the same kind is started (diskless sync, delay
0) and timed from start to ``master_link_status:up`` with the master's offset reached; the
figures are the master's populate time, the RDB size the replica received and the sync time.
"""

from __future__ import annotations

import time

import redis
from common import median, options, start_pyrepl, start_redis, xadd_entries

from tests.support.waits import wait_for

STREAMS = 8
ARGS = ("--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes")


def populate(r: redis.Redis, entries: int) -> float:
    t0 = time.perf_counter()
    per = entries // STREAMS
    for s in range(STREAMS):
        key = f"stream:{s}"
        xadd_entries(r, key, per, 1000)
        for g in ("g1", "g2"):
            r.execute_command("XGROUP", "CREATE", key, g, "0")
            got = r.execute_command("XREADGROUP", "GROUP", g, "c1", "COUNT", str(per // 3),
                                    "STREAMS", key, ">")
            ids = [e[0] for e in got[0][1]][: per // 6]
            for j in range(0, len(ids), 500):
                r.execute_command("XACK", key, g, *ids[j:j + 500])
    return time.perf_counter() - t0


def one(kind: str, entries: int) -> dict[str, float]:
    start = start_pyrepl if kind == "pyrepl" else start_redis
    master = start(*ARGS)
    replica = None
    try:
        m = redis.Redis(port=master.port)
        fill_s = populate(m, entries)
        end = m.info("replication")["master_repl_offset"]
        t0 = time.perf_counter()
        replica = start("--replicaof", "127.0.0.1", str(master.port), *ARGS)
        rc = redis.Redis(port=replica.port)

        def synced() -> bool:
            inf = rc.info("replication")
            return (inf.get("master_link_status") == "up"
                    and inf.get("slave_repl_offset", -1) >= end)

        wait_for(synced, 300, interval=0.01)
        sync_s = time.perf_counter() - t0
        rdb_bytes = m.info("stats").get("total_net_repl_output_bytes", 0)
        assert rc.execute_command("DEBUG", "DIGEST") == m.execute_command("DEBUG", "DIGEST")
        return {"fill_s": fill_s, "sync_s": sync_s, "repl_bytes": rdb_bytes}
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


def main() -> int:
    args = options(__doc__, rounds=3, entries=200000)
    runs: dict[str, list[dict[str, float]]] = {"pyrepl": [], "redis": []}
    for rnd in range(args.rounds):
        order = ["pyrepl", "redis"] if rnd % 2 == 0 else ["redis", "pyrepl"]
        for kind in order:
            runs[kind].append(one(kind, args.entries))
        print(f"round {rnd + 1} done", flush=True)
    print(f"\n{args.entries:,} stream entries, 8 streams, 2 groups each; medians of "
          f"{args.rounds}")
    print("| figure | pyrepl | redis | ratio |\n|---|---|---|---|")
    for fig in ("fill_s", "sync_s", "repl_bytes"):
        a = median([x[fig] for x in runs["pyrepl"]])
        b = median([x[fig] for x in runs["redis"]])
        unit = "s" if fig.endswith("_s") else "bytes"
        print(f"| {fig} | {a:,.2f} {unit} | {b:,.2f} {unit} | {a / b:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
