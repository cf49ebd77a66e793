"""A pyrepl replica's AOF under a pipelined load: what it applied of its master's stream (runs of
plain writes applied as batches, transactions, expiries, several dbs) is in its AOF, so that the
replica restarted alone on its directory, after a kill -9, has its master's dataset."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.procs import start_pyrepl
from tests.support.redispy import digest, r
from tests.support.waits import wait_for, wait_offsets

pytestmark = pytest.mark.slow


def _bench(port: int, *args: str) -> None:
    subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "8", "-q",
                    *args], check=True, capture_output=True, timeout=300)


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_a_replicas_aof_holds_its_masters_dataset_after_kill_9(tmp_path, fsync: str) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "r").mkdir()
    m = start_pyrepl("--repl-diskless-sync-delay", "0", tmpdir=str(tmp_path / "m"))
    rep = again = None
    try:
        rep = start_pyrepl("--master", f"127.0.0.1:{m.port}", "--appendonly", "yes",
                           "--appendfsync", fsync, role="replica", tmpdir=str(tmp_path / "r"))
        wait_for(lambda: r(rep.port).info("replication")["master_link_status"] == "up",
                 timeout=60, what="the replica's link")
        wait_for(lambda: r(rep.port).info("persistence")["aof_rewrite_in_progress"] == 0
                 and r(rep.port).info("persistence")["aof_rewrites"] >= 1, timeout=60,
                 what="the replica's AOF rewrite after its full sync")
        mc = r(m.port)
        _bench(m.port, "-t", "set,incr,lpush,hset", "-n", "20000", "-P", "16", "-r", "5000")
        _bench(m.port, "-t", "set", "-n", "5000", "-P", "1", "-r", "5000")
        with mc.pipeline(transaction=True) as p:
            p.set("tx:a", "1").incr("tx:n").expire("tx:a", 1000)
            p.execute()
        for db in (0, 3):
            c = r(m.port, db=db)
            c.set(f"db{db}", "x", px=500_000)
            c.zadd(f"z{db}", {"a": 1.5, "b": -2})
        mc.set("soon", "gone", px=50)
        wait_for(lambda: mc.get("soon") is None, timeout=10, what="the key to expire")
        wait_offsets(m.port, rep.port)
        want = digest(m.port)
        assert digest(rep.port) == want
        rep.kill()                                       # kill -9: nothing flushed at exit
        again = start_pyrepl("--appendonly", "yes", tmpdir=str(tmp_path / "r"))
        assert digest(again.port) == want
        assert r(again.port).ttl("tx:a") > 900
    finally:
        for p in (again, rep, m):
            if p is not None:
                p.stop()
