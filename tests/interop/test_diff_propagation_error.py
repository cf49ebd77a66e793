"""A command of the master's stream that fails on a replica, beside a real Redis replica.

One real Redis 7.0.15 master, two read-only replicas of it: real Redis and pyrepl. Each replica
gets a key the master does not have (DEBUG POPULATE works on a read-only replica), then the
master pushes to a list of that name: the replica answers WRONGTYPE to its master. Both log
Redis's "== CRITICAL ==" line and count it in INFO ``unexpected_error_replies``, and the link
stays up (``propagation-error-behavior ignore``); pyrepl also writes a ``propagation_error``
sync event. With ``panic-on-replicas`` both replicas abort.
"""

from __future__ import annotations

import signal

import pytest

from tests.support.procs import connected, start_pyrepl, start_redis, sync_events
from tests.support.resp import info
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CRITICAL = ("== CRITICAL == This replica is sending an error to its master: '-WRONGTYPE "
            "Operation against a key holding the wrong kind of value' after processing the "
            "command 'lpush'")


def start_pair(master_port: int, *extra: str) -> list:
    args = ("--replicaof", "127.0.0.1", str(master_port), *extra)
    return [start_redis("--enable-debug-command", "yes", *args),
            start_pyrepl("--sync-log-file", "sync.ndjson", *args)]


def test_propagation_error_is_logged_counted_and_reported_as_redis() -> None:
    master = start_redis()
    replicas = start_pair(master.port)
    with connected(master, replicas) as (m, rs):
        for r in rs:
            wait_for(lambda r=r: info(r, "replication")["master_link_status"] == "up",
                     timeout=30, what="replica link up")
            assert r.call("DEBUG", "POPULATE", "1", "diverged") == b"+OK\r\n"  # diverged:0
        assert m.call("LPUSH", "diverged:0", "a") == b":1\r\n"
        assert m.call("SET", "after", "1") == b"+OK\r\n"
        for r in rs:
            wait_for(lambda r=r: r.call("GET", "after") == b"$1\r\n1\r\n", timeout=10,
                     what="the stream after the error")
        counts = [info(r, "stats")["unexpected_error_replies"] for r in rs]
        assert counts == ["1", "1"]
        for srv in replicas:
            wait_for(lambda srv=srv: CRITICAL in srv.log(), timeout=5, what="the CRITICAL line")
        assert [info(r, "replication")["master_link_status"] for r in rs] == ["up", "up"]
        errors = [e for e in sync_events(replicas[1]) if e["event"] == "propagation_error"]
        assert len(errors) == 1
        assert errors[0]["command"] == "lpush" and errors[0]["error"].startswith("WRONGTYPE")
        assert errors[0]["role"] == "replica" and errors[0]["offset"] > 0


def test_panic_on_replicas_aborts_both_replicas() -> None:
    master = start_redis()
    replicas = start_pair(master.port, "--propagation-error-behavior", "panic-on-replicas")
    with connected(master, replicas) as (m, rs):
        for r in rs:
            wait_for(lambda r=r: info(r, "replication")["master_link_status"] == "up",
                     timeout=30, what="replica link up")
            assert r.call("DEBUG", "POPULATE", "1", "diverged") == b"+OK\r\n"
        assert m.call("LPUSH", "diverged:0", "a") == b":1\r\n"
        for srv in replicas:
            assert srv.proc is not None
            wait_for(lambda srv=srv: srv.proc.poll() is not None, timeout=15,
                     what="the replica to abort")
            assert srv.proc.returncode == -signal.SIGABRT, srv.log()[-2000:]
            assert "Guru Meditation: This replica panicked sending an error to its master " \
                   "after processing the command 'lpush'" in srv.log()
