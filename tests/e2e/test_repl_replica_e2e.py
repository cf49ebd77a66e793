"""The replica side with real processes: sync events on disk, repl-timeout, reconnect cadence,
MASTERDOWN with replica-serve-stale-data no, and REPLICAOF / ROLE at runtime."""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.procs import free_port, start_pyrepl, sync_events
from tests.support.redispy import in_sync, r
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow


def start_master(tmp_path, *extra: str, port: int | None = None):
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    return start_pyrepl("--repl-diskless-sync-delay", "0", *extra, tmpdir=str(d), port=port)


def start_replica(tmp_path, master_port: int, *extra: str):
    d = tmp_path / "r"
    d.mkdir(exist_ok=True)
    return start_pyrepl("--master", f"127.0.0.1:{master_port}", *extra, role="replica",
                        tmpdir=str(d))


def test_sync_events_cover_every_phase(tmp_path) -> None:
    m = start_master(tmp_path)
    with r(m.port) as c:
        c.execute_command("DEBUG", "POPULATE", "1000")
    # the classic diskless sync's events (the rdb channel's: tests/e2e/test_rdbchannel_pair.py)
    s = start_replica(tmp_path, m.port, "--sync-log-file", "sync.ndjson",
                      "--repl-rdb-channel", "no")
    try:
        wait_for(lambda: in_sync(m.port, s.port), 30, what="sync")
        with r(m.port) as c:
            c.set("x", "1")
        wait_for(lambda: any(e["event"] == "caught_up" for e in sync_events(s)), 20,
                 what="caught_up")
        evs = [e for e in sync_events(s) if e["role"] == "replica"]
        names = [e["event"] for e in evs]
        assert names[:6] == ["psync_sent", "psync_reply", "rdb_first_byte", "rdb_received",
                             "load_done", "link_up"]
        assert len({e["sync_id"] for e in evs[:6]}) == 1
        assert evs[0]["req_replid"] == "?" and evs[0]["req_offset"] == -1
        assert evs[1]["result"] == "full"
        assert evs[3]["bytes"] > 1000 and evs[4]["keys"] == 1000
        assert evs[5]["mode"] == "diskless" and evs[5]["peer"] == f"127.0.0.1:{m.port}"
        # a killed link: link_down (reason killed: the replica freed its master client, as
        # Redis's CLIENT KILL TYPE master), then a partial resync with its own sync_id
        with r(s.port) as c:
            c.execute_command("CLIENT", "KILL", "TYPE", "master")
        wait_for(lambda: [e["event"] for e in sync_events(s)].count("link_up") == 2, 20,
                 what="second link_up")
        evs = sync_events(s)
        down = [e for e in evs if e["event"] == "link_down"]
        assert len(down) == 1 and down[0]["reason"] == "killed"
        replies = [e for e in evs if e["event"] == "psync_reply"]
        assert replies[-1]["result"] == "continue"
        assert [e for e in evs if e["event"] == "link_up"][-1]["result"] == "continue"
        assert replies[-1]["sync_id"] != replies[0]["sync_id"]
    finally:
        s.stop()
        m.stop()


def test_repl_timeout_masterdown_and_partial_resync_after_a_frozen_master(tmp_path) -> None:
    m = start_master(tmp_path)
    s = start_replica(tmp_path, m.port, "--repl-timeout", "2", "--replica-serve-stale-data",
                      "no")
    stopped = False
    try:
        with r(m.port) as c:
            c.set("k", "v")
        wait_for(lambda: in_sync(m.port, s.port), 30, what="sync")
        with r(s.port) as c:
            assert c.get("k") == b"v"
        os.kill(m.proc.pid, signal.SIGSTOP)  # our own child process, frozen
        stopped = True
        wait_for(lambda: "MASTER timeout: no data nor PING received..." in s.log(), 20,
                 what="replica timeout")
        with RawClient(s.port) as raw:
            assert raw.call("GET", "k") == (b"-MASTERDOWN Link with MASTER is down and "
                                            b"replica-serve-stale-data is set to 'no'.\r\n")
        with r(s.port) as c:
            assert c.info("replication")["master_link_status"] == "down"
        os.kill(m.proc.pid, signal.SIGCONT)
        stopped = False
        wait_for(lambda: in_sync(m.port, s.port), 30, what="back in sync")
        with r(m.port) as c:
            st = c.info("stats")
            assert st["sync_full"] == 1 and st["sync_partial_ok"] >= 1
        with r(s.port) as c:
            assert c.get("k") == b"v"
    finally:
        if stopped:
            os.kill(m.proc.pid, signal.SIGCONT)
        s.stop()
        m.stop()


def test_reconnects_once_a_second_while_the_master_is_down(tmp_path) -> None:
    m = start_master(tmp_path, "--save", "3600 1")
    port = m.port
    s = start_replica(tmp_path, port)
    m2 = None
    try:
        with r(port) as c:
            c.set("before", "1")
        wait_for(lambda: in_sync(port, s.port), 30, what="sync")
        m.stop()  # SIGTERM: saves (save points set), exits
        wait_for(lambda: s.log().count("Connection refused") >= 3, 20, what="retries")
        log = s.log()
        refused = log.count("Error condition on socket for SYNC: Connection refused")
        assert 3 <= refused <= 6  # about one a second, not a busy loop
        m2 = start_master(tmp_path, "--save", "3600 1", port=port)
        with r(port) as c:
            c.set("after", "2")
        wait_for(lambda: in_sync(port, s.port), 30, what="sync with the restarted master")
        with r(port) as c:
            st = c.info("stats")
            assert st["sync_full"] == 0 and st["sync_partial_ok"] == 1
        with r(s.port) as c:
            assert c.get("after") == b"2"
    finally:
        s.stop()
        if m2 is not None:
            m2.stop()
        m.stop()


def test_replicaof_and_role_at_runtime(tmp_path) -> None:
    m = start_master(tmp_path)
    d = tmp_path / "x"
    d.mkdir()
    x = start_pyrepl(tmpdir=str(d))
    try:
        with r(x.port) as c:
            assert c.execute_command("ROLE") == [b"master", 0, []]
            assert c.execute_command("REPLICAOF", "127.0.0.1", str(m.port)) == b"OK"
            assert c.execute_command("CONFIG", "GET", "replicaof") == \
                {b"replicaof": f"127.0.0.1 {m.port}".encode()}
        wait_for(lambda: in_sync(m.port, x.port), 30, what="sync")
        with r(x.port) as c:
            role = c.execute_command("ROLE")
            assert role[:4] == [b"slave", b"127.0.0.1", m.port, b"connected"]
        def master_role_lists_replica() -> bool:
            # the master lists online replicas with their acked offset (online on first ACK)
            with r(m.port) as c:
                role = c.execute_command("ROLE")
            return role[0] == b"master" and role[2] == [
                [b"127.0.0.1", str(x.port).encode(), str(role[1]).encode()]]

        wait_for(master_role_lists_replica, 10, what="ROLE on the master to list the replica")
        unused = free_port()
        with RawClient(x.port) as raw:
            assert raw.call("SLAVEOF", "127.0.0.1", str(unused)) == b"+OK\r\n"
            wait_for(lambda: b"$7\r\nconnect\r\n" in raw.call("ROLE"), 10, what="connect state")
            assert raw.call("REPLICAOF", "NO", "ONE") == b"+OK\r\n"
            assert raw.call("ROLE").startswith(b"*3\r\n$6\r\nmaster\r\n")
            assert raw.call("SET", "writable", "1") == b"+OK\r\n"
        assert "MASTER MODE enabled (user request from 'id=" in x.log()
    finally:
        x.stop()
        m.stop()
