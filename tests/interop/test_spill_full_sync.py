"""A full sync that never loops (``repl-full-sync-spill-threshold``), on real processes: a
master whose snapshot takes seconds (``rdb-key-save-delay``) while a write load passes
``client-output-buffer-limit replica`` during the transfer. Redis 7.0.15 drops the replica at
the limit and the replica syncs again, and again (the scenario's check: it is the loop); pyrepl
without the threshold does the same; pyrepl with it ends in one full sync, its replica (a real
Redis 7.0.15 one, or a pyrepl one) equal to it, nothing dropped, the spilled bytes counted.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.support.load import LoadWriter
from tests.support.procs import ServerProcess, start_pyrepl, start_redis
from tests.support.redispy import digest, in_sync, r, repl
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

# 2,000 keys at 1 ms each: a snapshot of about 2 s, through which the load writes ~1 KB values
SCENARIO = ("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            "--rdb-key-save-delay", "1000", "--repl-backlog-size", "1mb",
            "--client-output-buffer-limit", "replica 2mb 1mb 5")


def stats(port: int) -> dict:
    with r(port) as c:
        return c.info("stats")


def _populate(port: int) -> None:
    with r(port) as c:
        c.execute_command("DEBUG", "POPULATE", "2000", "key", "100")


def _replica(kind: str, master: int, tmp_path, stack: ExitStack) -> ServerProcess:  # noqa: ANN001
    d = tmp_path / f"replica-{kind}"
    d.mkdir()
    if kind == "redis":
        return stack.enter_context(start_redis("--replicaof", "127.0.0.1", str(master),
                                               "--enable-debug-command", "yes", tmpdir=str(d)))
    return stack.enter_context(start_pyrepl("--master", f"127.0.0.1:{master}",
                                            "--repl-rdb-channel", "no", role="replica",
                                            tmpdir=str(d)))


@pytest.mark.parametrize("master_kind", ["redis", "pyrepl-no-spill"])
def test_the_scenario_loops_without_the_spill(tmp_path, master_kind: str) -> None:
    d = tmp_path / "m"
    d.mkdir()
    extra = ("--enable-debug-command", "yes") if master_kind == "redis" else ()
    start = start_redis if master_kind == "redis" else start_pyrepl
    with start(*SCENARIO, *extra, tmpdir=str(d)) as m, ExitStack() as stack:
        _populate(m.port)
        writer = stack.enter_context(LoadWriter(m.port, max_ops=2_000_000, max_seconds=60,
                                                value_size=1000))
        writer.start()
        wait_for(lambda: writer.ops > 1000, 20, what="the load")
        _replica("redis", m.port, tmp_path, stack)
        # the replica is dropped at the limit and asks for a full sync again (7.0.15 has no
        # client_output_buffer_limit_disconnections: its log says it)
        wait_for(lambda: stats(m.port)["sync_full"] >= 2, 45, what="the loop")
        assert "for overcoming of output buffer limits" in m.log()
        writer.finish()


@pytest.mark.parametrize("replica_kind", ["redis", "pyrepl"])
def test_with_the_spill_the_same_sync_ends_at_once(tmp_path, replica_kind: str) -> None:
    d = tmp_path / "m"
    d.mkdir()
    with start_pyrepl(*SCENARIO, "--repl-full-sync-spill-threshold", "512kb",
                      tmpdir=str(d)) as m, ExitStack() as stack:
        _populate(m.port)
        writer = LoadWriter(m.port, max_ops=2_000_000, max_seconds=60, value_size=1000)
        stack.enter_context(writer)
        writer.start()
        wait_for(lambda: writer.ops > 1000, 20, what="the load")
        rep = _replica(replica_kind, m.port, tmp_path, stack)
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        ops_at_up = writer.ops
        writer.finish()
        wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
        assert digest(m.port) == digest(rep.port)
        st = stats(m.port)
        assert st["sync_full"] == 1                       # one full sync, no loop
        assert st["client_output_buffer_limit_disconnections"] == 0
        assert st["total_repl_spilled_bytes"] > 2 * 1024 * 1024   # past the hard limit
        assert ops_at_up > 1000
        assert "spilling it to disk" in m.log()
        with r(m.port) as c:
            mem = c.info("memory")
        assert mem["mem_total_replication_buffers"] < 8 * 1024 * 1024
