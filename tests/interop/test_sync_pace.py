"""Full syncs that respect the network, on real processes (issue 40, part 4): a pyrepl master
with ``repl-full-sync-max-concurrent`` serves three real Redis 7.0.15 replicas one snapshot
transfer at a time, each paced by ``repl-sync-max-bandwidth``; a disk-mode transfer to a pyrepl
replica is paced, and ``CONFIG SET repl-sync-max-bandwidth 0`` lets the rest go at once.

The timing checks are bounds that only pacing makes hold: a paced transfer takes at least its
size over the rate (a slow machine only makes it longer), and what a replica has read is never
more than the bucket plus the rate times the time (a slow machine only makes it less).
"""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest

from pyrepl.replication.throttle import burst_of
from tests.support.procs import ServerProcess, start_pyrepl, start_redis, sync_events
from tests.support.redispy import r, repl
from tests.support.waits import wait_for, wait_synced

pytestmark = [pytest.mark.slow, pytest.mark.interop]

KEYS = 40_000       # DEBUG POPULATE <n> key 100: an RDB of about 1.2 MB (compressed)


def _populate(port: int) -> None:
    with r(port) as c:
        c.execute_command("DEBUG", "POPULATE", str(KEYS), "key", "100")


def _redis_replica(master: int, tmp_path, i: int, stack: ExitStack) -> ServerProcess:  # noqa: ANN001
    d = tmp_path / f"replica-{i}"
    d.mkdir()
    return stack.enter_context(start_redis("--replicaof", "127.0.0.1", str(master),
                                           "--enable-debug-command", "yes", tmpdir=str(d)))


def test_three_replicas_get_their_snapshot_one_at_a_time_each_paced(tmp_path) -> None:
    rate = 4 << 20
    d = tmp_path / "m"
    d.mkdir()
    with start_pyrepl("--repl-full-sync-max-concurrent", "1", "--repl-sync-max-bandwidth",
                      "4mb", "--repl-diskless-sync-delay", "0", "--sync-log-file",
                      "sync.ndjson", tmpdir=str(d)) as m, ExitStack() as stack:
        _populate(m.port)
        replicas = [_redis_replica(m.port, tmp_path, i, stack) for i in range(3)]
        wait_synced(m.port, *(x.port for x in replicas), timeout=120)
        events = sync_events(m)
        forks = sorted((e for e in events if e["event"] == "fullsync_fork"),
                       key=lambda e: e["ts"])
        sent = sorted((e for e in events if e["event"] == "fullsync_rdb_sent"),
                      key=lambda e: e["ts"])
        assert len(forks) == len(sent) == 3
        for e in sent:      # paced: never faster than the rate allows
            assert e["max_bandwidth"] == rate
            assert e["duration_ms"] >= (e["bytes"] - burst_of(rate)) / rate * 1000 * 0.95
        for done, nxt in zip(sent, forks[1:], strict=False):   # one transfer at a time
            assert nxt["ts"] >= done["ts"]
        assert any(e.get("queued_ms") for e in forks)
        assert "waits for a full sync turn (repl-full-sync-max-concurrent 1)" in m.log()


def test_a_disk_transfer_is_paced_and_a_config_set_unpaces_it_under_way(tmp_path) -> None:
    rate = 64 << 10
    d = tmp_path / "m"
    d.mkdir()
    with start_pyrepl("--repl-diskless-sync", "no", "--repl-sync-max-bandwidth", "64kb",
                      tmpdir=str(d)) as m, ExitStack() as stack:
        _populate(m.port)
        dr = tmp_path / "replica"
        dr.mkdir()
        rep = stack.enter_context(start_pyrepl("--master", f"127.0.0.1:{m.port}",
                                               role="replica", tmpdir=str(dr)))
        wait_for(lambda: int(repl(rep.port).get("master_sync_total_bytes", 0)) > 0, 30,
                 what="the transfer")
        total = int(repl(rep.port)["master_sync_total_bytes"])
        assert total > 16 * rate      # (so the paced rest would take over 16 s)
        t0 = time.monotonic()
        read0 = int(repl(rep.port)["master_sync_read_bytes"])
        time.sleep(1.5)
        read1 = int(repl(rep.port)["master_sync_read_bytes"])
        elapsed = time.monotonic() - t0
        assert read1 - read0 <= burst_of(rate) + rate * elapsed
        with r(m.port) as c:
            c.config_set("repl-sync-max-bandwidth", "0")
        start = time.monotonic()
        wait_synced(m.port, rep.port, timeout=60)
        # the rest went unpaced: far less than the (total - read1) / rate it had left
        assert time.monotonic() - start < (total - read1) / rate / 2
