"""The sorted set's index in process: updates, reads and memory, beside a dict store (the floor).

    .venv/bin/python bench/bench_zset.py [--sizes 1000,10000,100000] [--ops 200000]
    PYTHONPATH=<other checkout> .venv/bin/python bench/bench_zset.py   # another tree's ZSet

Updates are redis-benchmark's ZADD (``ZADD myzset __rand_int__ element:__rand_int__``, -r N):
random integral scores and random members drawn from N, on a set already grown by the same
stream, so most calls move an existing member. The floor stores the same pairs into a dict.
Reads: ``range(0, 10)`` (ZRANGE 0 9), ``rank`` (ZRANK), a full iteration (an RDB save or
ZRANGE 0 -1). Memory: tracemalloc's growth per member while the set is built (members'
bytes objects excluded: they exist in either layout). Best of ``--repeat`` for times.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc

from pyrepl.keyspace.zset import ZSet


def _stream(n: int, count: int, seed: int) -> list[tuple[bytes, float]]:
    rng = random.Random(seed)
    return [(b"element:%012d" % rng.randrange(n), float(rng.randrange(n))) for _ in range(count)]


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(n: int, ops: int, repeat: int) -> dict[str, float]:
    warm = _stream(n, 3 * n, 1)
    stream = _stream(n, ops, 2)
    z = ZSet()
    for m, s in warm:
        z.set_score(m, s)
    d: dict[bytes, float] = {}
    for m, s in warm:
        d[m] = s

    def updates() -> None:
        set_score = z.set_score
        for m, s in stream:
            set_score(m, s)

    def floor() -> None:
        for m, s in stream:
            d[m] = s

    members = [m for m, _ in stream[:20000]]

    def ranks() -> None:
        rank = z.rank
        for m in members:
            rank(m)

    def heads() -> None:
        rng = z.range
        for _ in range(20000):
            rng(0, 10)

    out = {
        "members": len(z),
        "update_us": _best(updates, repeat) / ops * 1e6,
        "floor_us": _best(floor, repeat) / ops * 1e6,
        "rank_us": _best(ranks, repeat) / len(members) * 1e6,
        "range10_us": _best(heads, repeat) / 20000 * 1e6,
        "iterate_ms": _best(lambda: sum(1 for _ in z.items()), repeat) * 1e3,
    }
    # memory: the structure's growth per member, members' bytes made beforehand
    pairs = [(b"m:%012d" % i, float(i % 1000)) for i in range(n)]
    random.Random(3).shuffle(pairs)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    built = ZSet()
    for m, s in pairs:
        built.set_score(m, s)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    out["bytes_per_member"] = grown / n
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--ops", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("ZSet from", sys.modules[ZSet.__module__].__file__)
    print(f"{'members':>8} {'update us':>10} {'floor us':>9} {'rank us':>8} "
          f"{'range10 us':>10} {'iterate ms':>10} {'B/member':>9}")
    for n in (int(x) for x in args.sizes.split(",")):
        r = measure(n, args.ops, args.repeat)
        print(f"{r['members']:8,} {r['update_us']:10.2f} {r['floor_us']:9.2f} "
              f"{r['rank_us']:8.2f} {r['range10_us']:10.2f} {r['iterate_ms']:10.1f} "
              f"{r['bytes_per_member']:9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
