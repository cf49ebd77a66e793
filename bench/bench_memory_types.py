"""Memory footprint of each data type, pyrepl beside Debian's redis-server 7.0.15 (issue 37, part 4).

    .venv/bin/python bench/bench_memory_types.py [--rounds 1] [--workloads zsets-50k-x10,geo-100k-x5]

The workloads are issue 37's ("Footprint": 500k strings, 500k integer strings, 50k hashes /
lists / sets / sorted sets of 10, a 500k-field hash, a 500k-member sorted set, a 500k-entry
stream), with 50k sets of 10 integers (Redis's intset) beside the sets of 10 strings, the
100k HyperLogLogs / geo sets of 5 of the earlier version of this benchmark, and three more
streams (field names varying by entry, XDEL tombstones, a consumer group's PEL). For each workload a
fresh server of each kind is started, its RSS read once settled, the data written with pipelined
redis-py (batches of ``BATCH`` commands, or one command of ``BATCH`` fields/members for the
single-key workloads), and the RSS read again once settled (two readings 0.25 s apart within
0.2 %, at most ``SETTLE_MAX`` seconds): the figure is the RSS growth (VmRSS, /proc/PID/status).
Printed per workload: the RSS growth of each server, bytes per item (key, or field/member/entry
of the single-key workloads), the ratio pyrepl / redis and whether it meets the issue's target
(<= 1.5x), ``OBJECT ENCODING`` of a sample key on each server (where Redis says listpack /
intset / embstr / int, and what pyrepl answers), and each server's ``used_memory`` growth (INFO
memory). With ``--rounds N`` each server kind is measured N times (alternating which goes first)
and the medians are shown. ``--scale`` shrinks every workload (a smoke test only: the issue's
figures are at scale 1).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis
from common import median, rss_bytes, start_pyrepl, start_redis, write_json

BATCH = 1000        # commands per pipeline, or fields/members per command of a single key
SETTLE_MAX = 10.0   # seconds at most waiting for the RSS to settle
TARGET = 1.5        # issue 37's ceiling: pyrepl's RSS growth <= 1.5x Redis's


@dataclass(frozen=True)
class Workload:
    name: str
    what: str       # the data, in words (the table's second column)
    items: int      # keys, or (single-key workloads) fields / members / entries
    keys: int       # keys the server holds afterwards (checked with DBSIZE)
    sample: str     # the key whose OBJECT ENCODING is shown
    # (pipeline, lo, hi): queue the commands of keys (or elements) lo..hi-1
    fill: Callable[[redis.client.Pipeline, int, int], None]
    single: bool = False    # one key: ``fill`` gets a range of elements, not of keys


def _strings(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.set(f"s:{i}", f"value:{i}")


def _int_strings(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.set(f"n:{i}", i)


def _hashes(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.hset(f"h:{i}", mapping={f"field{j}": f"value{j}" for j in range(10)})


def _lists(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.rpush(f"l:{i}", *(f"element{j}" for j in range(10)))


def _sets(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.sadd(f"t:{i}", *(f"member{j}" for j in range(10)))


def _intsets(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.sadd(f"i:{i}", *(i * 10 + j for j in range(10)))


def _zsets(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.zadd(f"z:{i}", {f"member{j}": j for j in range(10)})


def _big_hash(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    p.hset("bighash", mapping={f"field:{j}": f"value:{j}" for j in range(lo, hi)})


def _big_zset(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    p.zadd("bigzset", {f"member:{j}": j for j in range(lo, hi)})


def _stream(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for j in range(lo, hi):
        p.xadd("stream", {"sensor": j % 100, "value": j}, id=f"{j + 1}-0")


def _stream_varied(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    """Field names that change from entry to entry (no SAMEFIELDS), 1 to 3 fields."""
    for j in range(lo, hi):
        fields = {f"f{j % 7}": j, f"name{j % 5}": f"v{j}", f"x{j % 3}": "abc"}
        p.xadd("stream", dict(list(fields.items())[:1 + j % 3]), id=f"{j + 1}-0")


def _stream_xdel(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    """The stream-500k entries, then every second one deleted (tombstones in every node)."""
    _stream(p, lo, hi)
    p.xdel("stream", *(f"{j + 1}-0" for j in range(lo, hi, 2)))


def _stream_groups(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    """The stream-500k entries read by a consumer group (XREADGROUP), half of them acked:
    a PEL of half the entries."""
    if lo == 0:
        p.xgroup_create("stream", "g", id="0", mkstream=True)
    _stream(p, lo, hi)
    p.xreadgroup("g", "c", {"stream": ">"}, count=hi - lo)
    p.xack("stream", "g", *(f"{j + 1}-0" for j in range(lo, hi, 2)))


def _hll(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        p.pfadd(f"hll:{i}", *(f"m{j}" for j in range(5)))


def _geo(p: redis.client.Pipeline, lo: int, hi: int) -> None:
    for i in range(lo, hi):
        args: list[object] = []
        for j in range(5):
            args += [13.36 + j / 100, 38.11 + j / 100, f"p{j}"]
        p.geoadd(f"geo:{i}", args)


def workloads(scale: float = 1.0) -> dict[str, Workload]:
    def n(x: int) -> int:
        return max(1, int(x * scale))

    out = [
        Workload("strings-500k", "SET s:N value:N", n(500000), n(500000), "s:0", _strings),
        Workload("int-strings-500k", "SET n:N N", n(500000), n(500000), "n:1", _int_strings),
        Workload("hashes-50k-x10", "HSET, 10 fieldJ valueJ", n(50000), n(50000), "h:0",
                 _hashes),
        Workload("lists-50k-x10", "RPUSH, 10 elementJ", n(50000), n(50000), "l:0", _lists),
        Workload("sets-50k-x10", "SADD, 10 memberJ", n(50000), n(50000), "t:0", _sets),
        Workload("intsets-50k-x10", "SADD, 10 integers", n(50000), n(50000), "i:0", _intsets),
        Workload("zsets-50k-x10", "ZADD, 10 memberJ score J", n(50000), n(50000), "z:0",
                 _zsets),
        Workload("hash-500k-fields", "1 hash, field:J value:J", n(500000), 1, "bighash",
                 _big_hash, single=True),
        Workload("zset-500k", "1 zset, member:J score J", n(500000), 1, "bigzset", _big_zset,
                 single=True),
        Workload("stream-500k", "1 stream, XADD J-0 sensor value", n(500000), 1, "stream",
                 _stream, single=True),
        Workload("stream-varied-200k", "1 stream, XADD J-0, 1-3 fields named by J",
                 n(200000), 1, "stream", _stream_varied, single=True),
        Workload("stream-xdel-500k", "stream-500k, every 2nd entry XDEL'd", n(500000), 1,
                 "stream", _stream_xdel, single=True),
        Workload("stream-groups-200k", "1 stream, XADD J-0, XREADGROUP all, XACK half",
                 n(200000), 1, "stream", _stream_groups, single=True),
        Workload("hll-100k-x5", "PFADD, 5 members (sparse)", n(100000), n(100000), "hll:0",
                 _hll),
        Workload("geo-100k-x5", "GEOADD, 5 points", n(100000), n(100000), "geo:0", _geo),
    ]
    return {w.name: w for w in out}


def _batches(items: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, items, BATCH):
        yield lo, min(items, lo + BATCH)


def settled_rss(pid: int) -> int:
    """VmRSS once two readings 0.25 s apart agree within 0.2 % (at most SETTLE_MAX s)."""
    time.sleep(0.3)
    prev = rss_bytes(pid)
    deadline = time.monotonic() + SETTLE_MAX
    while time.monotonic() < deadline:
        time.sleep(0.25)
        cur = rss_bytes(pid)
        if abs(cur - prev) <= prev * 0.002:
            return cur
        prev = cur
    return prev


def _str(x: object) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def measure(w: Workload, server: str) -> dict[str, object]:
    """One fresh server of the kind: RSS and used_memory growth, the sample's encoding."""
    srv = (start_pyrepl if server == "pyrepl" else start_redis)()
    try:
        r = redis.Redis(port=srv.port, socket_timeout=300)
        base = settled_rss(srv.proc.pid)
        used0 = int(r.info("memory")["used_memory"])
        t0 = time.monotonic()
        for lo, hi in _batches(w.items):
            p = r.pipeline(transaction=False)
            w.fill(p, lo, hi)
            p.execute()
        secs = time.monotonic() - t0
        size = r.dbsize()
        if size != w.keys:
            raise RuntimeError(f"{server} {w.name}: DBSIZE {size}, expected {w.keys}")
        rss = settled_rss(srv.proc.pid)
        used1 = int(r.info("memory")["used_memory"])
        try:
            enc = _str(r.object("encoding", w.sample))
        except redis.ResponseError as e:
            enc = f"error: {e}"
        r.close()
        return {"rss": rss - base, "used": used1 - used0, "encoding": enc, "secs": secs}
    finally:
        srv.stop()


def main() -> int:
    all_ = workloads()
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds run; the figures are their medians (default: %(default)s)")
    ap.add_argument("--workloads", default=",".join(all_),
                    help="comma-separated, of " + ", ".join(all_))
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every workload's size (smoke tests; default: %(default)s)")
    ap.add_argument("--json", default=None, help="write the results here too")
    args = ap.parse_args()
    chosen = workloads(args.scale)
    names = [x for x in args.workloads.split(",") if x]
    unknown = [x for x in names if x not in chosen]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(chosen)}")

    results: dict[str, dict[str, object]] = {}
    for name in names:
        w = chosen[name]
        runs: dict[str, list[dict[str, object]]] = {"pyrepl": [], "redis": []}
        for rnd in range(max(1, args.rounds)):
            for server in (("pyrepl", "redis") if rnd % 2 == 0 else ("redis", "pyrepl")):
                runs[server].append(measure(w, server))
        row: dict[str, object] = {"what": w.what, "items": w.items}
        for server, rs in runs.items():
            row[server] = {
                "rss": median([float(x["rss"]) for x in rs]),          # type: ignore[arg-type]
                "used": median([float(x["used"]) for x in rs]),        # type: ignore[arg-type]
                "secs": median([float(x["secs"]) for x in rs]),        # type: ignore[arg-type]
                "encoding": rs[-1]["encoding"],
            }
        py, rd = row["pyrepl"], row["redis"]
        ratio = py["rss"] / rd["rss"] if rd["rss"] > 0 else float("nan")   # type: ignore
        row["ratio"] = ratio
        row["meets"] = ratio <= TARGET
        results[name] = row
        print(f"{name}: pyrepl {py['rss'] / 1e6:.1f} MB ({py['encoding']}, "     # type: ignore
              f"{py['secs']:.1f} s), redis {rd['rss'] / 1e6:.1f} MB ({rd['encoding']}, "
              f"{rd['secs']:.1f} s), ratio {ratio:.2f}", flush=True)

    print(f"\nRSS growth, pyrepl / redis-server 7.0.15 (target <= {TARGET}x); "
          f"rounds {args.rounds}, scale {args.scale:g}\n")
    print("| workload | data | pyrepl RSS MB | redis RSS MB | pyrepl B/item | redis B/item "
          "| ratio | <= 1.5x | pyrepl encoding | redis encoding | pyrepl used_memory MB "
          "| redis used_memory MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, row in results.items():
        py, rd, items = row["pyrepl"], row["redis"], row["items"]
        print(f"| {name} | {row['what']} | {py['rss'] / 1e6:,.1f} | "            # type: ignore
              f"{rd['rss'] / 1e6:,.1f} | {py['rss'] / items:,.0f} | "              # type: ignore
              f"{rd['rss'] / items:,.0f} | {row['ratio']:.2f} | "                  # type: ignore
              f"{'yes' if row['meets'] else 'no'} | {py['encoding']} | {rd['encoding']} | "
              f"{py['used'] / 1e6:,.1f} | {rd['used'] / 1e6:,.1f} |")              # type: ignore
    met = sum(1 for row in results.values() if row["meets"])
    print(f"\n{met} of {len(results)} workloads within {TARGET}x")
    write_json(args.json, {"rounds": args.rounds, "scale": args.scale, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
