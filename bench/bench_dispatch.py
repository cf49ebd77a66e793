"""Micro-benchmark of the hot path without sockets: parse + dispatch + reply encoding.

    .venv/bin/python bench/bench_dispatch.py

Feeds pipelines of 16 commands (like redis-benchmark -P 16) to a sans-io ServerCore client and
prints commands per second for each command of the throughput benchmark.
"""

from __future__ import annotations

import time

import pyrepl.commands  # noqa: F401
from pyrepl.config import Config
from pyrepl.core import ServerCore


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


CASES = {
    "PING": lambda i: enc(b"PING"),
    "SET": lambda i: enc(b"SET", b"key:%d" % (i % 10000), b"x" * 3),
    "GET": lambda i: enc(b"GET", b"key:%d" % (i % 10000)),
    "INCR": lambda i: enc(b"INCR", b"counter:%d" % (i % 100)),
    "LPUSH": lambda i: enc(b"LPUSH", b"mylist", b"xxx"),
    "HSET": lambda i: enc(b"HSET", b"myhash", b"element:%d" % (i % 10000), b"xxx"),
    "ZADD": lambda i: enc(b"ZADD", b"myzset", b"%d" % (i % 1000), b"element:%d" % (i % 10000)),
}


def main(n: int = 200_000, pipeline: int = 16) -> None:
    cfg = Config.load(None, [("save", [""])])
    for name, make in CASES.items():
        core = ServerCore(cfg, now_ms=int(time.time() * 1000))
        c = core.connection_made()
        chunks = [b"".join(make(i + j) for j in range(pipeline)) for i in range(0, 4096, pipeline)]
        t0 = time.perf_counter()
        done = 0
        k = 0
        while done < n:
            c.receive_data(chunks[k % len(chunks)])
            c.data_to_send()
            done += pipeline
            k += 1
        dt = time.perf_counter() - t0
        print(f"{name:6} {done / dt:12,.0f} cmd/s  ({dt * 1e6 / done:.2f} us/cmd)")


if __name__ == "__main__":
    main()
