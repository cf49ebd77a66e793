"""TLS beside plain TCP, pyrepl beside Debian's redis-server 7.0.15, same run, interleaved.

    .venv/bin/python bench/bench_tls.py [--rounds 3] [--requests 100000] [--keys 200000]

1. Throughput: redis-benchmark SET and GET (``-c 50``, ``-P 1`` and ``-P 16``) on each
   server's plain port and on its TLS port (``--tls`` with the test CA and certificate);
   servers and ports alternate which goes first each round. Prints the medians, the ratio
   pyrepl / redis per port kind, and what TLS costs each server (TLS rps / plain rps).
2. Full sync over TLS: a master holding ``--keys`` keys of 100 bytes (DEBUG POPULATE) and a
   fresh replica of the same kind with ``tls-replication yes`` (pyrepl → pyrepl over the rdb
   channel, redis → redis diskless); the time from REPLICAOF to ``master_link_status:up``.
Certificates are made in a temporary directory with the openssl command line.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis
from common import median, options, redis_benchmark, start_pyrepl, start_redis, tmpdir

from tests.support.procs import free_port
from tests.support.tlscerts import make_certs, server_args
from tests.support.waits import wait_for


def _throughput(servers: dict, certs: Path, rounds: int, requests: int) -> dict:
    tls = ["--tls", "--cacert", str(certs / "ca.crt"), "--cert", str(certs / "redis.crt"),
           "--key", str(certs / "redis.key")]
    results: dict[tuple[str, int, str], dict[str, list[float]]] = {}
    order = list(servers.items())
    for rnd in range(rounds):
        for pipeline in (1, 16):
            for who, srv in (order if rnd % 2 == 0 else order[::-1]):
                for kind, port, extra in (("tcp", srv.port, []), ("tls", srv.tls_port, tls)):
                    rps = redis_benchmark(port, "set,get", requests, 50, pipeline, extra)
                    for test, value in rps.items():
                        results.setdefault((test, pipeline, kind), {}).setdefault(
                            who, []).append(value)
            print(f"round {rnd + 1} -P{pipeline} done", flush=True)
    return results


def _full_sync(start, certs: Path, keys: int) -> float:  # noqa: ANN001
    master_tls = free_port()
    master = start(*server_args(certs, master_tls), "--repl-diskless-sync-delay", "0")
    replica = start(*server_args(certs), "--tls-replication", "yes")
    try:
        with redis.Redis(port=master.port) as m:
            m.execute_command("DEBUG", "POPULATE", keys, "key", 100)
        with redis.Redis(port=replica.port, decode_responses=True) as r:
            t0 = time.perf_counter()
            r.execute_command("REPLICAOF", "127.0.0.1", master_tls)
            wait_for(lambda: r.info("replication").get("master_link_status") == "up", 300,
                     interval=0.005, what="the TLS full sync")
            took = time.perf_counter() - t0
            assert r.dbsize() == keys
        return took
    finally:
        replica.stop()
        master.stop()


def main() -> int:
    args = options(__doc__, rounds=3, requests=100000, keys=200000)
    certs = make_certs(Path(tmpdir("bench-tls-")))
    servers = {}
    for who, start in (("pyrepl", start_pyrepl), ("redis", start_redis)):
        tls_port = free_port()
        srv = start(*server_args(certs, tls_port))
        srv.tls_port = tls_port
        servers[who] = srv
    try:
        results = _throughput(servers, certs, args.rounds, args.requests)
    finally:
        for srv in servers.values():
            srv.stop()
    syncs: dict[str, list[float]] = {"pyrepl": [], "redis": []}
    for _ in range(args.rounds):
        syncs["pyrepl"].append(_full_sync(start_pyrepl, certs, args.keys))
        syncs["redis"].append(_full_sync(
            lambda *a: start_redis(*a, "--enable-debug-command", "yes"), certs, args.keys))
    print(f"\n{'pipeline':8} {'test':5} {'port':4} {'pyrepl rps':>12} {'redis rps':>12} "
          f"{'ratio':>6}")
    for (test, pipeline, kind), by in sorted(results.items()):
        x, y = median(by["pyrepl"]), median(by["redis"])
        print(f"P{pipeline:<7} {test:5} {kind:4} {x:12,.0f} {y:12,.0f} {x / y:6.2f}")
    print("\nTLS rps / plain rps (what TLS costs each server):")
    for test in ("SET", "GET"):
        for pipeline in (1, 16):
            cost = {who: median(results[(test, pipeline, "tls")][who])
                    / median(results[(test, pipeline, "tcp")][who]) for who in servers}
            print(f"  {test} -P{pipeline}: pyrepl {cost['pyrepl']:.2f}  redis {cost['redis']:.2f}")
    p, r = median(syncs["pyrepl"]), median(syncs["redis"])
    print(f"\nfull sync of {args.keys:,} keys over TLS: pyrepl {p:.2f} s, redis {r:.2f} s, "
          f"ratio {p / r:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
