"""Cluster throughput side by side: a 3-shard pyrepl cluster, one pyrepl master, a 3-shard
redis-server 7.0.15 cluster, and one redis-server, same run.

    .venv/bin/python bench/bench_cluster.py [--rounds 3] [--requests 200000] [--clients 50]

Each cluster is 3 masters (no replicas) made by ``redis-cli --cluster create``;
``redis-benchmark --cluster -t set,get,incr,lpush,hset`` runs against it (the benchmark
spreads its keys over the slots and talks to every master), and the same test without
``--cluster`` against a single server of each kind. Rounds rotate which goes first; the
medians are printed with the ratios pyrepl cluster / Redis cluster and pyrepl cluster / one
pyrepl master. On this 2-core machine three server processes share two cores, so a 3-shard
cluster cannot be 3 times one master here: the ratio to one master says what cluster mode
costs a node, the ratio to Redis's cluster what pyrepl's costs against Redis's.
"""

from __future__ import annotations

import os
import sys

from common import median, options, redis_benchmark, write_json

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.support.cluster import agreed, cluster, redis_cli_create  # noqa: E402
from tests.support.procs import start_pyrepl, start_redis  # noqa: E402
from tests.support.waits import wait_for  # noqa: E402

TESTS = "set,get,incr,lpush,hset"


def bench(port: int, n: int, clients: int, pipeline: int, is_cluster: bool
          ) -> dict[str, float]:
    extra = ["-r", "100000"] + (["--cluster"] if is_cluster else [])
    return redis_benchmark(port, TESTS, n, clients, pipeline, extra)


def main() -> int:
    args = options(__doc__, rounds=3, requests=200000, clients=50, json=None)
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    with cluster(["pyrepl"] * 3) as pyc, cluster(["redis"] * 3) as rdc:
        for nodes in (pyc, rdc):
            redis_cli_create(nodes)
            wait_for(lambda nodes=nodes: agreed(nodes), 60, what="the cluster to agree")
        one_py = start_pyrepl()
        one_rd = start_redis()
        try:
            order = [("pyrepl-cluster", pyc[0].port, True), ("redis-cluster", rdc[0].port, True),
                     ("pyrepl", one_py.port, False), ("redis", one_rd.port, False)]
            for rnd in range(args.rounds):
                for pipeline in (1, 16):
                    k = rnd % len(order)
                    for name, port, is_cluster in order[k:] + order[:k]:
                        n = args.requests * (4 if pipeline > 1 else 1)
                        r = bench(port, n, args.clients, pipeline, is_cluster)
                        for test, rps in r.items():
                            results.setdefault(f"P{pipeline}", {}).setdefault(test, {}) \
                                .setdefault(name, []).append(rps)
                        print(f"round {rnd + 1} -P{pipeline} {name}: "
                              + ", ".join(f"{t}={v:,.0f}" for t, v in r.items()), flush=True)
        finally:
            one_py.stop()
            one_rd.stop()
    print()
    print("| -P | test | pyrepl cluster | redis cluster | one pyrepl | one redis | "
          "pyrepl cl / redis cl | pyrepl cl / one pyrepl |")
    print("|---|---|---|---|---|---|---|---|")
    out: dict[str, object] = {}
    for p, tests in results.items():
        for test, by in tests.items():
            m = {k: median(v) for k, v in by.items()}
            a, b, c = m.get("pyrepl-cluster", 0), m.get("redis-cluster", 0), m.get("pyrepl", 0)
            print(f"| {p} | {test} | {a:,.0f} | {b:,.0f} | {c:,.0f} | {m.get('redis', 0):,.0f} "
                  f"| {a / b if b else 0:.2f} | {a / c if c else 0:.2f} |")
            out[f"{p} {test}"] = m
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
