"""RSS per key of each data type, pyrepl beside Debian's redis-server, same run.

    .venv/bin/python bench/bench_memory_types.py [--keys 100000] [--rounds 1] [--types zset,geo]

For each type a fresh server of each kind gets ``--keys`` keys of that type, each holding a
few small elements (the shape real datasets have most: small containers in their compact
encodings), written with pipelined redis-py; the RSS growth (VmRSS after a settle, minus the
RSS of the empty server) divided by the number of keys is the figure. Prints bytes per key
for both and the ratio pyrepl / redis.
"""

from __future__ import annotations

import argparse
import time

import redis
from common import median, rss_bytes, start_pyrepl, start_redis

ELEMENTS = 5     # elements per container key


def _fill(r: redis.Redis, kind: str, keys: int) -> None:
    batch = 1000
    for start in range(0, keys, batch):
        p = r.pipeline(transaction=False)
        for i in range(start, min(keys, start + batch)):
            k = f"{kind}:{i}"
            if kind == "string":
                p.set(k, f"value:{i}")
            elif kind == "list":
                p.rpush(k, *(f"e{j}" for j in range(ELEMENTS)))
            elif kind == "hash":
                p.hset(k, mapping={f"f{j}": j for j in range(ELEMENTS)})
            elif kind == "set":
                p.sadd(k, *(f"m{j}" for j in range(ELEMENTS)))
            elif kind == "zset":
                p.zadd(k, {f"m{j}": j for j in range(ELEMENTS)})
            elif kind == "stream":
                for j in range(ELEMENTS):
                    p.xadd(k, {"f": j}, id=f"{j + 1}-0")
            elif kind == "hll":
                p.pfadd(k, *(f"m{j}" for j in range(ELEMENTS)))
            elif kind == "geo":
                p.geoadd(k, _geo_args(ELEMENTS))
        p.execute()


def _geo_args(n: int) -> list[object]:
    out: list[object] = []
    for j in range(n):
        out += [13.36 + j / 100, 38.11 + j / 100, f"p{j}"]
    return out


TYPES = ("string", "list", "hash", "set", "zset", "stream", "hll", "geo")


def measure(kind: str, server: str, keys: int) -> float:
    start = start_pyrepl if server == "pyrepl" else start_redis
    srv = start()
    try:
        r = redis.Redis(port=srv.port, socket_timeout=600)
        time.sleep(0.3)
        base = rss_bytes(srv.proc.pid)
        _fill(r, kind, keys)
        assert r.dbsize() == keys
        time.sleep(0.5)
        return (rss_bytes(srv.proc.pid) - base) / keys
    finally:
        srv.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--types", default=",".join(TYPES), help="comma-separated, of " +
                    ", ".join(TYPES))
    args = ap.parse_args()
    rows = {}
    for kind in args.types.split(","):
        by: dict[str, list[float]] = {"pyrepl": [], "redis": []}
        for rnd in range(args.rounds):
            for server in (("pyrepl", "redis") if rnd % 2 == 0 else ("redis", "pyrepl")):
                by[server].append(measure(kind, server, args.keys))
        rows[kind] = (median(by["pyrepl"]), median(by["redis"]))
        print(f"{kind}: pyrepl {rows[kind][0]:,.0f} B/key, redis {rows[kind][1]:,.0f} B/key",
              flush=True)
    print(f"\n{'type':8} {'pyrepl B/key':>13} {'redis B/key':>12} {'ratio':>6}")
    for kind, (a, b) in rows.items():
        print(f"{kind:8} {a:13,.0f} {b:12,.0f} {a / b:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
