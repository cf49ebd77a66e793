"""A real Valkey 8.1 replica with ``dual-channel-replication-enabled yes`` follows a pyrepl master
over Valkey's two channels (``+DUALCHANNELSYNC``, ``$ENDOFF:``, ``REPLCONF set-rdb-client-id``,
the main connection's PSYNC from the snapshot offset while the RDB loads), under a write load
that runs through the whole transfer; and falls back to the one-channel sync when the pyrepl
master does not offer it. The Valkey build is ``make redis-src``'s (the tests skip, saying so,
without it).
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.support.load import LoadWriter, populate_under_load
from tests.support.procs import start_pyrepl, start_valkey, sync_events
from tests.support.redispy import digest, in_sync, r, repl
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def _master(tmp_path, *extra: str):  # noqa: ANN001, ANN202
    d = tmp_path / "m"
    d.mkdir()
    # 20 µs per key: 10,000 keys make a transfer of ~0.2 s that the write load runs through
    return start_pyrepl("--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "20",
                        "--sync-log-file", "sync.ndjson", *extra, tmpdir=str(d))


def _valkey_replica(tmp_path, master_port: int, dual: str = "yes",  # noqa: ANN001, ANN202
                    name: str = "v"):
    d = tmp_path / name
    d.mkdir()
    return start_valkey("--replicaof", "127.0.0.1", str(master_port),
                        "--dual-channel-replication-enabled", dual,
                        "--enable-debug-command", "yes", "--loglevel", "verbose",
                        tmpdir=str(d))


def test_a_valkey_replica_syncs_over_two_channels_under_writes(tmp_path) -> None:
    m = _master(tmp_path)
    writer = LoadWriter(m.port, max_ops=400_000, max_seconds=60)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 10000, writer, 1000)
        rep = stack.enter_context(_valkey_replica(tmp_path, m.port))
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        ops_at_link_up = writer.ops
        writer.finish()
        wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
        assert digest(m.port) == digest(rep.port)
        assert ops_at_link_up > 1000   # (the load ran through the sync)
        mlog, vlog = m.log(), rep.log()
        assert "is capable of dual channel synchronization" in mlog
        assert "Full resync requested by replica" in mlog and "(dual-channel)" in mlog
        assert "Sending to replica" in mlog and "RDB end offset" in mlog
        assert "PSYNC is not possible, initialize RDB channel" in vlog
        assert "Primary accepted a Partial Resynchronization, RDB load in background" in vlog
        assert "Aborting dual channel sync" not in vlog
        info = repl(m.port)
        assert info["connected_slaves"] == 1
        assert info["slave0"]["state"] == "online"
        assert info["replicas_waiting_psync"] == 0      # the hold ended at the main's PSYNC
        evs = [e for e in sync_events(m) if e["role"] == "master"]
        decision = [e for e in evs if e["event"] == "psync_decision"]
        assert [e["result"] for e in decision] == ["dualchannel"]
        sid = decision[0]["sync_id"]
        assert {e["sync_id"] for e in evs} == {sid}      # one sync, both connections
        assert [(e["event"], e.get("mode")) for e in evs] == [
            ("psync_decision", None), ("fullsync_fork", "dual-channel"),
            ("fullsync_rdb_sent", "dual-channel"), ("replica_online", "dual-channel")]
        # the stream after the link came up goes on the main connection
        with r(m.port) as c:
            c.set("after:dual", "1")
        wait_for(lambda: in_sync(m.port, rep.port), 20, what="streamed")
        with r(rep.port) as c:
            assert c.get("after:dual") == b"1"


@pytest.mark.parametrize("flag", [("--repl-rdb-channel", "no"), ("--repl-diskless-sync", "no")])
def test_a_valkey_replica_gets_the_one_channel_sync_when_not_offered(tmp_path, flag) -> None:
    with _master(tmp_path, *flag) as m:
        with r(m.port) as c:   # (DEBUG POPULATE is not replicated: before the replica)
            c.execute_command("DEBUG", "POPULATE", "2000", "key", "32")
        with _valkey_replica(tmp_path, m.port) as rep:
            wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
            assert digest(m.port) == digest(rep.port)
            assert "dual channel" not in m.log()
            assert "initialize RDB channel" not in rep.log()
        evs = [e for e in sync_events(m) if e["event"] == "psync_decision"]
        assert [e["result"] for e in evs] == ["full"]


def test_a_valkey_replica_killed_during_the_transfer_leaves_nothing_held(tmp_path) -> None:
    m = _master(tmp_path, "--rdb-key-save-delay", "500")   # 0.5 ms per key: ~1 s transfer
    with m:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "2000", "key", "32")
        with _valkey_replica(tmp_path, m.port) as rep:
            # the main connection came back at once and streams while the RDB is written
            wait_for(lambda: repl(m.port).get("slave0", {}).get("state")
                     == "send_bulk_and_stream", 30, what="the main connection back")
            assert repl(m.port)["replicas_waiting_psync"] == 0
            rep.kill()
        wait_for(lambda: repl(m.port)["replicas_waiting_psync"] == 0
                 and repl(m.port)["connected_slaves"] == 0, 20, what="the hold dropped")
        wait_for(lambda: "Diskless rdb transfer, last replica dropped, killing fork child"
                 in m.log(), 20, what="the child stopped")
        lost = [e for e in sync_events(m) if e["event"] == "replica_lost"]
        # (one replica lost: by whichever of its two connections the master saw close first)
        assert len(lost) == 1 and lost[0]["reason"] in ("closed", "rdb-channel-lost")
        # the next replica syncs as the first would have
        with r(m.port) as c:
            c.execute_command("CONFIG", "SET", "rdb-key-save-delay", "0")
        with _valkey_replica(tmp_path, m.port, name="v2") as rep2:
            wait_for(lambda: in_sync(m.port, rep2.port), 60, what="the second replica")
            assert digest(m.port) == digest(rep2.port)
            assert repl(m.port)["replicas_waiting_psync"] == 0


# -- a pyrepl replica of a Valkey master ------------------------------------------------------

def _valkey_master(tmp_path, *extra: str):  # noqa: ANN001, ANN202
    d = tmp_path / "vm"
    d.mkdir()
    return start_valkey("--dual-channel-replication-enabled", "yes",
                        "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes",
                        *extra, tmpdir=str(d))


def _pyrepl_replica(tmp_path, master_port: int, *extra: str):  # noqa: ANN001, ANN202
    d = tmp_path / "pr"
    d.mkdir()
    return start_pyrepl("--master", f"127.0.0.1:{master_port}", "--sync-log-file",
                        "sync.ndjson", *extra, role="replica", tmpdir=str(d))


def test_a_pyrepl_replica_follows_a_valkey_master_over_two_channels(tmp_path) -> None:
    m = _valkey_master(tmp_path, "--rdb-key-save-delay", "20")
    writer = LoadWriter(m.port, max_ops=400_000, max_seconds=60)
    with m, writer, ExitStack() as stack:
        populate_under_load(m.port, 10000, writer, 1000)
        rep = stack.enter_context(_pyrepl_replica(tmp_path, m.port))
        wait_for(lambda: repl(rep.port).get("master_link_status") == "up", 60, what="link up")
        writer.finish()
        wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
        assert digest(m.port) == digest(rep.port)
        log, vlog = rep.log(), m.log()
        assert "Dual channel replication: PSYNC is not possible, initialize RDB channel" in log
        assert "Master accepted a Partial Resynchronization, RDB load in background" in log
        assert "is capable of dual channel synchronization" in vlog
        evs = [e for e in sync_events(rep) if e["role"] == "replica"]
        assert [e["result"] for e in evs if e["event"] == "psync_reply"] == ["dualchannel"]
        assert [e["mode"] for e in evs if e["event"] == "link_up"] == ["dual-channel"]
        assert "buffer_drained" in [e["event"] for e in evs]
        assert repl(rep.port)["master_sync_mode"] == "dual-channel"
        # the link carries the stream afterwards, and a cut link continues (+CONTINUE)
        with r(m.port) as c:
            c.set("after:dual", "1")
            assert c.execute_command("CLIENT", "KILL", "TYPE", "replica") >= 1
            c.set("after:cut", "2")
        wait_for(lambda: in_sync(m.port, rep.port), 30, what="caught up after the cut")
        with r(rep.port) as c:
            assert c.mget("after:dual", "after:cut") == [b"1", b"2"]
        results = [e["result"] for e in sync_events(rep) if e["event"] == "psync_reply"]
        assert results == ["dualchannel", "continue"]


def test_a_pyrepl_replica_of_a_valkey_master_without_dual_channel_syncs_classically(
        tmp_path) -> None:
    with _valkey_master(tmp_path, "--dual-channel-replication-enabled", "no") as m:
        with r(m.port) as c:
            c.execute_command("DEBUG", "POPULATE", "2000", "key", "32")
        with _pyrepl_replica(tmp_path, m.port) as rep:
            wait_for(lambda: in_sync(m.port, rep.port), 60, what="caught up")
            assert digest(m.port) == digest(rep.port)
            evs = sync_events(rep)
            assert [e["result"] for e in evs if e["event"] == "psync_reply"] == ["full"]
            assert "initialize RDB channel" not in rep.log()
            assert repl(rep.port)["master_sync_mode"] == "diskless"
