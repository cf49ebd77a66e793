"""The newer data types' commands, pyrepl beside Debian's redis-server, same run, interleaved.

    .venv/bin/python bench/bench_types.py [--rounds 3] [--requests 100000]

redis-benchmark runs each command (``-c 50``, ``-P 1`` and ``-P 16``, random keys/members from
``-r 100000``) against both servers, alternating which goes first each round; prints medians
and the ratio pyrepl / redis. No goal of its own yet: issue 15 sets the throughput goals; this
shows where the bitmap, HyperLogLog, SORT, stream and geo paths stand against the string
baseline (SET).
"""

from __future__ import annotations

from common import side_by_side_main

COMMANDS: dict[str, list[str]] = {
    "SET": ["SET", "key:__rand_int__", "xxx"],
    "SETBIT": ["SETBIT", "bm:__rand_int__", "1000", "1"],   # (__rand_int__ is zero-padded:
    "GETBIT": ["GETBIT", "bm:__rand_int__", "1000"],        # not an offset Redis parses)
    "BITCOUNT": ["BITCOUNT", "bitmap", "0", "1000"],
    "PFADD": ["PFADD", "hll", "member:__rand_int__"],
    "PFCOUNT": ["PFCOUNT", "hll"],
    "SORT": ["SORT", "list", "LIMIT", "0", "10"],
    "XADD": ["XADD", "stream", "*", "field", "__rand_int__"],
    "XRANGE": ["XRANGE", "stream", "-", "+", "COUNT", "10"],
    "GEOADD": ["GEOADD", "geo:added", "13.361389", "38.115556", "m:__rand_int__"],
    "GEOSEARCH": ["GEOSEARCH", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km",
                  "ASC", "COUNT", "10"],
}
# Commands much slower than SET run fewer requests (the ratio is what is compared).
SCALE = {"GEOSEARCH": 0.1, "SORT": 0.5}


def setup(r) -> None:
    """A list of 100 numbers to SORT, a bitmap, 200 places around Sicily for GEOSEARCH and a
    stream to XRANGE, the same on both servers."""
    r.rpush("list", *range(100, 0, -1))
    r.setbit("bitmap", 8000, 1)
    for i in range(200):   # 200 places around Sicily for GEOSEARCH
        r.geoadd("geo", (12.5 + (i % 20) * 0.15, 36.6 + (i // 20) * 0.15, f"p{i}"))
    for i in range(1000):  # and a stream to XRANGE
        r.xadd("stream", {"field": i})


if __name__ == "__main__":
    raise SystemExit(side_by_side_main(COMMANDS, setup, SCALE))
