"""Benchmark of the master's propagation hot path (Replication.feed -> Feeding.stream).

    .venv/bin/python bench/bench_repl_master.py            # in-process only
    .venv/bin/python bench/bench_repl_master.py --e2e      # plus redis-benchmark side by side

In-process: pipelines of 16 SETs through a sans-io core, with no replication history, with a
backlog only (replica gone), and with 1 and 3 online replicas (their output is taken once per
pipeline, as the I/O shell does once per event-loop batch). End to end: redis-benchmark SET
against a pyrepl master and against redis-server 7.0.15, each alone and with one real
redis-server replica attached.
"""

from __future__ import annotations

import sys
import time

import pyrepl.commands  # noqa: F401
from pyrepl.config import Config
from pyrepl.core.host import Host
from pyrepl.core.server import ServerCore
from pyrepl.replication.manager import Replication
from pyrepl.replication.master import LinkInput


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


class _IO:
    """The OS side reduced to nothing: transports always drained."""

    def buffered(self, c: object) -> int:
        return 0

    def stream_started(self, c: object) -> None:
        pass


def make(replicas: int, backlog: bool) -> tuple[ServerCore, object]:
    cfg = Config.load(None, [("save", [""]), ("repl-diskless-sync-delay", ["0"])])
    host = Host()
    host.master_io = _IO()
    core = ServerCore(cfg, host, now_ms=int(time.time() * 1000))
    repl = Replication(core)
    if backlog:
        repl.create_backlog()
    links = []
    for i in range(replicas):
        r = core.connection_made(f"127.0.0.1:{50000 + i}", "127.0.0.1:6379")
        link = repl.master.link_for(r)
        link.listening_port = 7000 + i
        repl.master.add_replica(link)
        link.go(LinkInput.PARTIAL)
        repl.master.feeding.start_stream(link)
        links.append(r)
    core.pending_flush.clear()
    return core, links


def run_case(replicas: int, backlog: bool, n: int = 200_000, pipeline: int = 16) -> float:
    core, links = make(replicas, backlog)
    c = core.connection_made()
    chunks = [b"".join(enc(b"SET", b"key:%d" % ((i + j) % 10000), b"xxx") for j in range(pipeline))
              for i in range(0, 4096, pipeline)]
    pending = core.pending_flush
    t0 = time.perf_counter()
    done = 0
    k = 0
    while done < n:
        c.receive_data(chunks[k % len(chunks)])
        c.data_to_send()
        for r in pending:  # the shell's flush: one write per replica per batch
            r.data_to_send()
        pending.clear()
        done += pipeline
        k += 1
    return done / (time.perf_counter() - t0)


def in_process() -> None:
    base = None
    for label, replicas, backlog in (("no history", 0, False), ("backlog only", 0, True),
                                     ("1 replica", 1, True), ("3 replicas", 3, True)):
        rate = max(run_case(replicas, backlog) for _ in range(3))
        base = base or rate
        print(f"SET P16 {label:13} {rate:12,.0f} cmd/s  ({1e6 / rate:.2f} us/cmd, "
              f"{(1e6 / rate - 1e6 / base):+.2f} us vs no history)")


def end_to_end(n: int = 300_000) -> None:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import redis
    from common import redis_benchmark, start_pyrepl, start_redis

    from tests.support.waits import wait_for

    def with_replica(master_port: int) -> object:
        rep = start_redis("--replicaof", "127.0.0.1", str(master_port))
        rc = redis.Redis(port=rep.port)
        wait_for(lambda: rc.info("replication").get("master_link_status") == "up", 30)
        return rep

    for name, start in (("pyrepl", lambda: start_pyrepl("--repl-diskless-sync-delay", "0")),
                        ("redis", lambda: start_redis("--repl-diskless-sync-delay", "0"))):
        srv = start()
        try:
            alone = redis_benchmark(srv.port, "set", n, 20, 16).get("SET", float("nan"))
            rep = with_replica(srv.port)
            try:
                replicated = redis_benchmark(srv.port, "set", n, 20, 16).get("SET", float("nan"))
            finally:
                rep.stop()
        finally:
            srv.stop()
        print(f"{name:7} SET -P 16 -c 20: alone {alone:12,.0f} rps, with a replica "
              f"{replicated:12,.0f} rps ({replicated / alone:.0%})")


if __name__ == "__main__":
    in_process()
    if "--e2e" in sys.argv:
        end_to_end()
