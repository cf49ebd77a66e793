"""Micro-benchmark: request parsing throughput of the pure and the fast (C scan) readers.

Parses a pipelined stream (default: 1M ``SET key:<i> <value>`` commands) fed in fixed-size
chunks (default 16 KiB, Redis's PROTO_IOBUF_LEN) the way the server's protocol adapter does:
``feed(chunk)`` then ``gets()`` until None. Prints commands/s and MB/s per reader and
workload, and checks that both readers agree on the command count and consumed bytes.

    .venv/bin/python bench/bench_resp_reader.py [--commands N] [--chunk BYTES] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pyrepl.resp.fastreader import FastRespReader  # noqa: E402
from pyrepl.resp.reader import RespReader  # noqa: E402


def encode(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def workloads(n: int) -> dict[str, bytes]:
    return {
        "SET 3B values": b"".join(encode(b"SET", b"key:%d" % i, b"xxx") for i in range(n)),
        "SET 100B values": b"".join(
            encode(b"SET", b"key:%d" % i, b"v" * 100) for i in range(n // 2)),
        "MSET 10 pairs": b"".join(
            encode(b"MSET", *[b"k%d:%d" % (i, j) for j in range(10) for _ in (0, 1)])
            for i in range(n // 10)),
        "SET 64KiB values": b"".join(
            encode(b"SET", b"big:%d" % i, b"b" * 65536) for i in range(max(1, n // 500))),
        "inline PING": b"PING\r\n" * (n // 2),
    }


def run(cls: type[RespReader], data: bytes, chunk: int) -> tuple[float, int, int]:
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]
    r = cls()
    count = 0
    t0 = time.perf_counter()
    for c in chunks:
        r.feed(c)
        while r.gets() is not None:
            count += 1
    dt = time.perf_counter() - t0
    return dt, count, r.consumed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands", type=int, default=1_000_000)
    ap.add_argument("--chunk", type=int, default=16 * 1024)
    ap.add_argument("--repeat", type=int, default=3, help="best of R runs")
    args = ap.parse_args()
    readers: list[type[RespReader]] = [RespReader, FastRespReader]
    print(f"python {sys.version.split()[0]}, chunk {args.chunk} B, best of {args.repeat}")
    print(f"{'workload':<18} {'reader':<18} {'commands':>9} {'MB':>7} {'seconds':>8}"
          f" {'commands/s':>12} {'MB/s':>8}")
    for name, data in workloads(args.commands).items():
        results = {}
        for cls in readers:
            best = min(run(cls, data, args.chunk) for _ in range(args.repeat))
            dt, count, consumed = best
            results[cls.__name__] = (count, consumed)
            mb = len(data) / 1e6
            print(f"{name:<18} {cls.__name__:<18} {count:>9} {mb:>7.1f} {dt:>8.3f}"
                  f" {count / dt:>12,.0f} {mb / dt:>8.1f}")
        if len(set(results.values())) != 1:
            raise SystemExit(f"readers disagree on {name}: {results}")


if __name__ == "__main__":
    main()
