"""The rdb channel falls back to the classic sync with a peer that lacks it: Debian's
redis-server 7.0.15, in both directions.

* A pyrepl replica with ``repl-rdb-channel yes`` offers ``capa rdb-channel-repl``; a 7.0.15
  master ignores the capability it does not know (``+OK``) and answers ``+FULLRESYNC``: the
  replica does the classic single-connection sync (diskless ``$EOF:`` or disk ``$<len>``).
* A real 7.0.15 replica never offers the capability, so a pyrepl master with
  ``repl-rdb-channel yes`` gives it the classic sync: no ``+RDBCHANNELSYNC``, no second
  connection.

Both under a write load, both ending with equal DEBUG DIGESTs.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.support.load import LoadWriter, populate_under_load
from tests.support.procs import start_pyrepl, start_redis, sync_events
from tests.support.redispy import digest, in_sync, r, repl
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


@pytest.mark.parametrize("diskless", ["yes", "no"])
def test_pyrepl_replica_with_rdb_channel_follows_a_redis_7_master_classically(
        tmp_path, diskless: str) -> None:
    dm, dr = tmp_path / "m", tmp_path / "r"
    dm.mkdir()
    dr.mkdir()
    m = start_redis("--enable-debug-command", "yes", "--repl-diskless-sync", diskless,
                    "--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "100",
                    tmpdir=str(dm))
    writer = LoadWriter(m.port, max_ops=300_000, max_seconds=60)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 10000, writer, 1000)
        rep = stack.enter_context(start_pyrepl(
            "--master", f"127.0.0.1:{m.port}", "--repl-rdb-channel", "yes",
            "--sync-log-file", "sync.ndjson", role="replica", tmpdir=str(dr)))
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        writer.finish()
        wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
        assert digest(m.port) == digest(rep.port)
        log = rep.log()
        # the capability was offered and silently ignored by 7.0.15
        assert "Master does not understand REPLCONF capa" not in log
        assert "initialize RDB channel" not in log
        assert ("with EOF to parser" in log) == (diskless == "yes")
        evs = [e for e in sync_events(rep) if e["role"] == "replica"]
        assert [e["result"] for e in evs if e["event"] == "psync_reply"] == ["full"]
        assert [e["mode"] for e in evs if e["event"] == "link_up"] == \
            ["diskless" if diskless == "yes" else "disk"]
        assert "buffer_drained" not in [e["event"] for e in evs]
        info = repl(rep.port)
        assert info["replica_full_sync_buffer_size"] == 0
        assert info["replica_full_sync_buffer_peak"] == 0
        with r(m.port) as c:
            assert c.info("stats")["sync_full"] == 1


def test_redis_7_replica_of_a_pyrepl_master_with_rdb_channel_gets_the_classic_sync(
        tmp_path) -> None:
    dm, dr = tmp_path / "m", tmp_path / "r"
    dm.mkdir()
    dr.mkdir()
    m = start_pyrepl("--repl-rdb-channel", "yes", "--repl-diskless-sync", "yes",
                     "--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "20",
                     "--sync-log-file", "sync.ndjson", tmpdir=str(dm))
    writer = LoadWriter(m.port, max_ops=300_000, max_seconds=60)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 20000, writer, 1000)
        rep = stack.enter_context(start_redis(
            "--replicaof", "127.0.0.1", str(m.port), "--enable-debug-command", "yes",
            tmpdir=str(dr)))
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        writer.finish()
        wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
        assert digest(m.port) == digest(rep.port)
        with r(m.port) as c:
            assert c.info("stats")["sync_full"] == 1
            clients = c.execute_command("CLIENT", "LIST", "TYPE", "replica").decode()
        assert "flags=SC" not in clients and clients.count("flags=S") == 1
        decisions = [e for e in sync_events(m) if e["event"] == "psync_decision"]
        assert [e["result"] for e in decisions] == ["full"]
        log = rep.log()
        assert "MASTER <-> REPLICA sync: Finished with success" in log
