"""Eviction quality against Redis 7.0.15 (issue 37 part 3): how much of a hot set survives.

    PYTHONPATH=. .venv/bin/python bench/bench_eviction_quality.py [--rounds 3] [--maxmemory 32mb]
        [--policies allkeys-lru,allkeys-lfu,allkeys-random] [--quick] [--replica 1]
        [--read-batch 1000] [--pause 1.0] [--absolute] | --table-sim

The workload, the same on both servers, one fresh server of each kind per policy and round
(which kind goes first alternates by round): ``maxmemory`` and ``maxmemory-policy`` set by
CONFIG SET on the empty server (``maxmemory-samples`` left at 5), maxmemory being the empty
server's used_memory plus ``--maxmemory`` (the room for data: pyrepl's interpreter alone counts
~26 MB of used_memory, Redis's ~1 MB), or ``--maxmemory`` itself with ``--absolute``. A hot set
of ``HOT_SHARE`` (20 %) of the keys that fit in the room (``room // (value + PER_KEY)``, the
same count for both) is written and read ``--reads`` times (GET, which touches: the LRU clock,
the LFU counter); then
``--waves`` waves of new keys (``--value`` bytes each, seeded random bytes) totalling
``--volume`` times the limit, each wave followed by a ``--pause`` (the LRU clock ticks once a
second on both servers: without a pause the hot set's reads and the last wave's writes can share
a tick, a tie that depends on each server's speed), the hot set's survival (EXISTS, pipelined:
it does not touch on either server) and ``--reads`` GET passes over the hot set (missing keys
are not written back: the share is cumulative). Everything is pipelined redis-py, ``BATCH``
commands a pipeline (the GETs ``--read-batch``: both servers count a client's pending replies
in used_memory, so a pipeline of 1 KB replies makes them evict during the reads: the second
figure of the evicted column).

Per policy: the hot set's surviving share (mean over the waves, and after the last),
pyrepl's minus Redis's in points (issue 37's target: within 5), evicted_keys, the peak and
final VmRSS (sampled every ``RSS_EVERY`` s from /proc/PID/status by a thread) and the empty
server's, as multiples of maxmemory, used_memory at the end (and the highest seen after a
wave) against maxmemory, and the run's wall time less the pauses. ``--rounds N``: medians.

``--replica 1`` adds Redis's "replica buffer are counted correctly" idea: a master (the same
maxmemory, allkeys-lru) with one replica of its kind, filled to ``FILL`` of the limit; the
replica is stopped (SIGSTOP: its output buffer on the master can only grow), a burst of
``BURST`` times the limit in new keys is written, INFO memory polled meanwhile; reported: the
highest mem_not_counted_for_evict, used_memory and used_memory less it, the keys before and
after (the dataset should stay at the limit, not shrink by the replica's buffer), evicted_keys.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from common import median, rss_bytes, start_pyrepl, start_redis, write_json

BATCH = 1000            # commands per pipeline
HOT_SHARE = 0.2         # the hot set: this share of the keys that fit under the limit
PER_KEY = 100           # bytes a key costs beyond its value (estimate: sizes the hot set only)
RSS_EVERY = 0.02        # seconds between VmRSS samples
TARGET = 5.0            # issue 37: pyrepl's survival within 5 points of Redis's
FILL = 0.9              # the replica test: the master filled to this share of the limit
BURST = 2.0             # the replica test: new keys' bytes written while the replica is stopped
SERVERS = ("pyrepl", "redis")


def parse_mem(text: str) -> int:
    """A redis.conf memory value (``32mb``, ``1gb``, ``100000``) in bytes (k/m/g: 1024s)."""
    t = text.strip().lower()
    for suffix, mult in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10), ("g", 10 ** 9),
                         ("m", 10 ** 6), ("k", 10 ** 3), ("b", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(t)


def start(kind: str, *extra: str):  # -> ServerProcess
    return (start_pyrepl if kind == "pyrepl" else start_redis)(*extra)


class RssSampler(threading.Thread):
    """VmRSS of ``pid`` every RSS_EVERY s until stopped: the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except OSError:
                return
            self.done.wait(RSS_EVERY)

    def stop(self) -> int:
        self.done.set()
        self.join()
        return self.peak


class Values:
    """``size``-byte values cut from one seeded random blob (distinct objects on the wire)."""

    def __init__(self, seed: int, size: int) -> None:
        self.size = size
        self.span = 1 << 20
        self.blob = random.Random(seed).randbytes(self.span + size)

    def __call__(self, i: int) -> bytes:
        at = (i * 7919) % self.span
        return self.blob[at: at + self.size]


def pipelined(r: redis.Redis, n: int, queue: Callable[[redis.client.Pipeline, int], object],
              batch: int = BATCH) -> list:
    """Queue ``n`` commands (``queue(p, i)``), ``batch`` a pipeline; all the replies."""
    out: list = []
    for lo in range(0, n, batch):
        p = r.pipeline(transaction=False)
        for i in range(lo, min(n, lo + batch)):
            queue(p, i)
        out += p.execute()
    return out


def set_limit(r: redis.Redis, room: int, policy: str, absolute: bool) -> int:
    """CONFIG SET maxmemory: ``room`` above the empty server's used_memory (or ``room`` itself
    with ``absolute``); the limit set."""
    limit = room if absolute else int(r.info("memory")["used_memory"]) + room
    r.config_set("maxmemory", limit)
    r.config_set("maxmemory-policy", policy)
    return limit


def run_quality(kind: str, policy: str, args: argparse.Namespace) -> dict[str, float]:
    """One fresh server of ``kind`` through the workload under ``policy``."""
    maxmemory = parse_mem(args.maxmemory)
    fits = maxmemory // (args.value + PER_KEY)
    hot_n = max(1, int(fits * HOT_SHARE))
    wave_n = max(1, int(args.volume * maxmemory / args.value / args.waves))
    values = Values(args.seed, args.value)
    hot = [f"hot:{i}".encode() for i in range(hot_n)]
    srv = start(kind)
    sampler = RssSampler(srv.proc.pid)
    try:
        r = redis.Redis(port=srv.port, socket_timeout=300)
        limit = set_limit(r, maxmemory, policy, args.absolute)
        rss0 = rss_bytes(srv.proc.pid)
        sampler.start()
        t0 = time.monotonic()
        paused = 0.0

        def read_hot() -> int:
            """The GET passes; the keys evicted meanwhile."""
            ev = int(r.info("stats")["evicted_keys"])
            for _ in range(args.reads):
                pipelined(r, hot_n, lambda p, i: p.get(hot[i]), args.read_batch)
            return int(r.info("stats")["evicted_keys"]) - ev

        pipelined(r, hot_n, lambda p, i: p.set(hot[i], values(i)))
        read_hot()
        shares: list[float] = []
        used_max = 0
        in_reads = 0
        for w in range(args.waves):
            def write(p: redis.client.Pipeline, i: int, b: int = hot_n + w * wave_n,
                      w: int = w) -> object:
                return p.set(f"c:{w}:{i}", values(b + i))

            pipelined(r, wave_n, write)
            t = time.monotonic()
            time.sleep(args.pause)
            paused += time.monotonic() - t
            alive = sum(pipelined(r, hot_n, lambda p, i: p.exists(hot[i])))
            shares.append(alive / hot_n)
            used_max = max(used_max, int(r.info("memory")["used_memory"]))
            in_reads += read_hot()
        secs = time.monotonic() - t0 - paused
        mem = r.info("memory")
        stats = r.info("stats")
        keys = r.dbsize()
        r.close()
        peak = sampler.stop()
        rss1 = rss_bytes(srv.proc.pid)
    finally:
        sampler.done.set()
        srv.stop()
    return {
        "mean": 100 * sum(shares) / len(shares), "final": 100 * shares[-1],
        "shares": [round(100 * s, 2) for s in shares],  # type: ignore[dict-item]
        "evicted": float(stats["evicted_keys"]), "keys": float(keys),
        "in_reads": float(in_reads),
        "limit": float(limit), "growth": (peak - rss0) / maxmemory, "rss0": rss0 / limit,
        "peak": peak / limit, "rss": rss1 / limit,
        "used": int(mem["used_memory"]) / limit, "used_max": used_max / limit,
        "secs": secs, "hot": float(hot_n), "wave": float(wave_n),
    }


def run_replica(kind: str, args: argparse.Namespace) -> dict[str, float]:
    """The replica's output buffer is not counted for eviction: a burst with it stopped."""
    maxmemory = parse_mem(args.maxmemory)
    values = Values(args.seed + 1, args.value)
    master = start(kind)
    replica = None
    try:
        r = redis.Redis(port=master.port, socket_timeout=300)
        limit = set_limit(r, maxmemory, "allkeys-lru", args.absolute)
        link = (["--master", f"127.0.0.1:{master.port}"] if kind == "pyrepl"
                else ["--replicaof", "127.0.0.1", str(master.port)])
        replica = (start_pyrepl(*link, role="replica") if kind == "pyrepl"
                   else start_redis(*link))
        rr = redis.Redis(port=replica.port, socket_timeout=30)
        deadline = time.monotonic() + 30
        while rr.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind}: the replica's link did not come up")
            time.sleep(0.1)
        fill_n = int(FILL * maxmemory / (args.value + PER_KEY))
        pipelined(r, fill_n, lambda p, i: p.set(f"f:{i}", values(i)))
        time.sleep(1.0)         # the replica catches up
        keys0 = r.dbsize()
        ev0 = int(r.info("stats")["evicted_keys"])
        os.kill(replica.proc.pid, signal.SIGSTOP)
        seen = {"not_counted": 0, "used": 0, "counted": 0, "repl": 0}
        stop = threading.Event()

        def poll() -> None:
            with redis.Redis(port=master.port, socket_timeout=30) as q:
                while not stop.is_set():
                    m = q.info("memory")
                    used, nc = int(m["used_memory"]), int(m["mem_not_counted_for_evict"])
                    seen["not_counted"] = max(seen["not_counted"], nc)
                    seen["used"] = max(seen["used"], used)
                    seen["counted"] = max(seen["counted"], used - nc)
                    seen["repl"] = max(seen["repl"], int(m.get("mem_total_replication_buffers",
                                                               0)))
                    stop.wait(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            burst_n = int(BURST * maxmemory / args.value)
            pipelined(r, burst_n, lambda p, i: p.set(f"b:{i}", values(fill_n + i)))
            time.sleep(0.5)
        finally:
            stop.set()
            poller.join()
            os.kill(replica.proc.pid, signal.SIGCONT)
        keys1 = r.dbsize()
        ev1 = int(r.info("stats")["evicted_keys"])
        r.close()
        rr.close()
    finally:
        if replica is not None:
            replica.stop()
        master.stop()
    return {"not_counted": seen["not_counted"] / limit, "used": seen["used"] / limit,
            "counted": seen["counted"] / limit, "limit": float(limit),
            "repl": seen["repl"] / limit, "keys0": float(keys0),
            "keys1": float(keys1), "evicted": float(ev1 - ev0)}


def print_quality(results: dict[str, dict[str, dict[str, object]]],
                  args: argparse.Namespace) -> None:
    """The survival table and the memory table."""
    mm = parse_mem(args.maxmemory)
    first = next(iter(results.values()))["pyrepl"]
    room = "maxmemory" if args.absolute else "room above the empty used_memory"
    print(f"\n{room} {args.maxmemory} ({mm:,} B), values {args.value} B, hot set "
          f"{first['hot']:,.0f} keys, {args.waves} waves of {first['wave']:,.0f} keys "
          f"({args.volume:g}x the limit), {args.reads} GET passes after each wave "
          f"({args.read_batch} a pipeline), pause "
          f"{args.pause:g} s; rounds {args.rounds} (medians)\n")
    print("| policy | pyrepl mean % | redis mean % | diff (pts) | pyrepl final % "
          "| redis final % | diff (pts) | within 5 | pyrepl evicted (during GETs) "
          "| redis evicted (during GETs) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for policy, by in results.items():
        py, rd = by["pyrepl"], by["redis"]
        dm = py["mean"] - rd["mean"]     # type: ignore[operator]
        df = py["final"] - rd["final"]   # type: ignore[operator]
        ok = abs(dm) <= TARGET and abs(df) <= TARGET
        print(f"| {policy} | {py['mean']:.1f} | {rd['mean']:.1f} | {dm:+.1f} | "
              f"{py['final']:.1f} | {rd['final']:.1f} | {df:+.1f} | {'yes' if ok else 'no'} | "
              f"{py['evicted']:,.0f} ({py['in_reads']:,.0f}) | "
              f"{rd['evicted']:,.0f} ({rd['in_reads']:,.0f}) |")
    print("\nx maxmemory: RSS of the empty server, peak and final RSS, used_memory at the end "
          "(highest after a wave); wall time less the pauses\n")
    print("| policy | server | maxmemory MB | empty RSS | peak RSS | final RSS "
          "| peak - empty, x room | used_memory end (max) | keys at the end | secs |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for policy, by in results.items():
        for kind in SERVERS:
            x: dict[str, Any] = by[kind]
            print(f"| {policy} | {kind} | {x['limit'] / 2 ** 20:.1f} | {x['rss0']:.2f} "
                  f"| {x['peak']:.2f} | {x['rss']:.2f} | {x['growth']:.2f} "
                  f"| {x['used']:.3f} ({x['used_max']:.3f}) | {x['keys']:,.0f} "
                  f"| {x['secs']:.1f} |")


def table_sim(cap: int = 7000, hot_n: int = 1525, wave_n: int = 4194, waves: int = 10) -> None:
    """``--table-sim``: the LRU workload at the table level, no server (the 8 MiB run's sizes):
    ``cap`` keys held, evicted one at a time as evict.py does (``sample(5)`` offered to the
    16-entry pool, scored by idle time), the hot set read after each wave, a wave's writes in
    the hot reads' clock tick; per KeyTable class, the hot set's survival and the keys
    ``sample(5)`` returned on average."""
    from pyrepl.keyspace import ktable
    from pyrepl.keyspace.ageing import EvictionPool

    ktable.configure(False, 10, 1)
    classes = [("C (pyrepl/keyspace/_ktable.c)", ktable.KeyTable),
               ("plain Python (KeyTableReference)", ktable.KeyTableReference)]
    for name, cls in classes:
        t = cls()
        pool = EvictionPool()
        clock = [1_800_000_000_000]     # now (ms)
        drawn = [0, 0]                  # sample calls, keys returned
        ktable.set_clock(clock[0])
        hot = [b"hot:%d" % i for i in range(hot_n)]
        for k in hot:
            t[k] = 1
        shares = []
        for w in range(waves):
            for i in range(wave_n):
                t[b"c:%d:%d" % (w, i)] = 1
                while len(t) > cap:
                    _evict_one(t, pool, clock[0], drawn)
            clock[0] += 1000
            ktable.set_clock(clock[0])
            shares.append(sum(1 for k in hot if k in t) / hot_n)
            for k in hot:
                t.get(k)
        print(f"{name}: hot set mean {100 * sum(shares) / waves:.1f} % final "
              f"{100 * shares[-1]:.1f} %, sample(5) returned {drawn[1] / max(1, drawn[0]):.2f} "
              f"keys on average")


def _evict_one(t: Any, pool: Any, now: int, drawn: list[int]) -> None:
    """evict.py's LRU pick and delete, on a bare table."""
    from pyrepl.keyspace.ageing import idle_ms

    while True:
        keys = t.sample(5)
        drawn[0] += 1
        drawn[1] += len(keys)
        for k in keys:
            pool.offer(idle_ms(t.age(k) or 0, now), 0, k)
        while (best := pool.pop_best()) is not None:
            if best[1] in t:
                t.pop(best[1])
                return

def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds run; the figures are their medians (default: %(default)s)")
    ap.add_argument("--maxmemory", default="32mb",
                    help="room for data: each server's maxmemory is its empty used_memory plus "
                    "this (default: %(default)s)")
    ap.add_argument("--absolute", action="store_true",
                    help="maxmemory is --maxmemory itself on both servers")
    ap.add_argument("--policies", default="allkeys-lru,allkeys-lfu,allkeys-random",
                    help="comma-separated (default: %(default)s)")
    ap.add_argument("--value", type=int, default=1000, help="value bytes (default: %(default)s)")
    ap.add_argument("--waves", type=int, default=10, help="default: %(default)s")
    ap.add_argument("--volume", type=float, default=5.0,
                    help="the waves' values in all, times maxmemory (default: %(default)s)")
    ap.add_argument("--reads", type=int, default=2,
                    help="GET passes over the hot set after each wave (default: %(default)s)")
    ap.add_argument("--read-batch", type=int, default=BATCH,
                    help="GETs a pipeline (default: %(default)s)")
    ap.add_argument("--pause", type=float, default=1.0,
                    help="seconds after each wave's writes (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=37, help="default: %(default)s")
    ap.add_argument("--replica", type=int, default=0,
                    help="1: the replica output buffer test too (default: %(default)s)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 8mb, 1 round")
    ap.add_argument("--json", default=None, help="write the results here too")
    ap.add_argument("--table-sim", action="store_true",
                    help="only the table-level LRU simulation (no server; see table_sim)")
    args = ap.parse_args()
    if args.table_sim:
        table_sim()
        return 0
    if args.quick:
        args.maxmemory, args.rounds = "8mb", 1
    policies = [p for p in args.policies.split(",") if p]

    results: dict[str, dict[str, dict[str, object]]] = {}
    for policy in policies:
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in SERVERS}
        for rnd in range(max(1, args.rounds)):
            for kind in (SERVERS if rnd % 2 == 0 else SERVERS[::-1]):
                res = run_quality(kind, policy, args)
                runs[kind].append(res)
                print(f"{policy} round {rnd + 1} {kind}: survival mean {res['mean']:.1f} % "
                      f"final {res['final']:.1f} % (waves {res['shares']}), evicted "
                      f"{res['evicted']:,.0f} ({res['in_reads']:,.0f} during GETs), RSS peak "
                      f"{res['peak']:.2f}x, used "
                      f"{res['used']:.3f}x, {res['secs']:.1f} s", flush=True)
        results[policy] = {}
        for kind, rs in runs.items():
            row: dict[str, object] = {
                f: median([float(x[f]) for x in rs])
                for f in rs[0] if f != "shares"}
            row["runs"] = rs
            results[policy][kind] = row

    if results:
        print_quality(results, args)

    replica: dict[str, dict[str, float]] = {}
    if args.replica:
        rep_runs: dict[str, list[dict[str, float]]] = {k: [] for k in SERVERS}
        for rnd in range(max(1, args.rounds)):
            for kind in (SERVERS if rnd % 2 == 0 else SERVERS[::-1]):
                rep_runs[kind].append(run_replica(kind, args))
        for kind, rs in rep_runs.items():
            replica[kind] = {f: median([x[f] for x in rs]) for f in rs[0]}
        print(f"\nreplica stopped during a burst of {BURST:g}x maxmemory of new keys "
              f"(master filled to {FILL:g}x, allkeys-lru); x maxmemory; medians of "
              f"{max(1, args.rounds)}\n")
        print("| server | max mem_total_replication_buffers | max mem_not_counted_for_evict "
              "| max used_memory | max used - not counted | keys before | keys after "
              "| evicted |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind, x in replica.items():
            print(f"| {kind} | {x['repl']:.3f} | {x['not_counted']:.3f} | {x['used']:.3f} "
                  f"| {x['counted']:.3f} "
                  f"| {x['keys0']:,.0f} | {x['keys1']:,.0f} | {x['evicted']:,.0f} |")
    write_json(args.json, {"args": vars(args), "results": results, "replica": replica})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
