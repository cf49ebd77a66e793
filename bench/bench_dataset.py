"""1M keys side by side: RSS, SAVE time and load-at-start time, pyrepl vs redis-server.

    .venv/bin/python bench/bench_dataset.py [--keys 1000000] [--size 100] [--rounds 3]

Both servers get `DEBUG POPULATE <keys> key <size>`; RSS is read from /proc/<pid>/status
(VmRSS) after a settle; SAVE is timed from the client; the load time is the time from process
start until the server answers PING with the dataset loaded (both restarted on their dumps).
Goals: RSS <= 2.5x Redis, SAVE and load <= 3x Redis.
"""

from __future__ import annotations

import argparse
import time

import redis
from common import median, rss_bytes, start_pyrepl, start_redis, tmpdir, write_json


def measure(kind: str, keys: int, size: int) -> dict[str, float]:
    d = tmpdir(f"bench-{kind}-")
    start = start_pyrepl if kind == "pyrepl" else start_redis
    extra = ("--enable-debug-command", "yes") if kind == "redis" else ()
    srv = start(*extra, tmpdir=d)
    try:
        r = redis.Redis(port=srv.port, socket_timeout=600)
        base = rss_bytes(srv.proc.pid)
        t = time.perf_counter()
        r.execute_command("DEBUG", "POPULATE", keys, "key", size)
        populate = time.perf_counter() - t
        time.sleep(1)
        rss = rss_bytes(srv.proc.pid)
        t = time.perf_counter()
        r.save()
        save = time.perf_counter() - t
        digest = r.execute_command("DEBUG", "DIGEST")
    finally:
        srv.stop()
    t = time.perf_counter()
    srv2 = start(*extra, tmpdir=d, port=srv.port)
    r = redis.Redis(port=srv2.port, socket_timeout=600)
    while True:  # Redis answers -LOADING while it loads: wait for the data to be there
        try:
            r.dbsize()
            break
        except redis.exceptions.BusyLoadingError:
            time.sleep(0.005)
    load = time.perf_counter() - t
    try:
        assert r.dbsize() == keys and r.execute_command("DEBUG", "DIGEST") == digest
    finally:
        srv2.stop()
    return {"rss": rss, "rss_empty": base, "populate_s": populate, "save_s": save,
            "load_s": load}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    res: dict[str, dict[str, list[float]]] = {"pyrepl": {}, "redis": {}}
    for rnd in range(args.rounds):
        order = ["pyrepl", "redis"] if rnd % 2 == 0 else ["redis", "pyrepl"]
        for kind in order:
            m = measure(kind, args.keys, args.size)
            for k, v in m.items():
                res[kind].setdefault(k, []).append(v)
            print(f"round {rnd + 1} {kind}: " + ", ".join(
                f"{k}={v / 2**20:.1f}MB" if k.startswith("rss") else f"{k}={v:.2f}"
                for k, v in m.items()), flush=True)
    out = {}
    print(f"\n{'metric':12} {'pyrepl':>10} {'redis':>10} {'ratio':>6}")
    for k in ("rss", "save_s", "load_s", "populate_s"):
        a, b = median(res["pyrepl"][k]), median(res["redis"][k])
        out[k] = {"pyrepl": a, "redis": b, "ratio": a / b if b else float("nan")}
        fa = f"{a / 2**20:.1f}MB" if k == "rss" else f"{a:.2f}s"
        fb = f"{b / 2**20:.1f}MB" if k == "rss" else f"{b:.2f}s"
        print(f"{k:12} {fa:>10} {fb:>10} {a / b:6.2f}")
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
