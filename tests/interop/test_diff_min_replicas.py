"""min-replicas-to-write / min-replicas-max-lag re-evaluated at once, beside redis-server 7.0.15.

Redis refreshes its count of good replicas when either directive is set (updateGoodSlaves), not
only in its once-a-second cron: a write pipelined right behind the CONFIG SET sees the new rule.
Each master (pyrepl, real Redis) has one real redis-server replica; the replica is frozen
(SIGSTOP) so its acks age, and the same pipelines are sent to both masters, replies compared.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient, encode_command
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NOREPLICAS = b"-NOREPLICAS Not enough good replicas to write.\r\n"


def pipeline(c: RawClient, *commands: tuple[str, ...]) -> list[bytes]:
    """Send the commands in one write (no server cron can run between them), read the replies."""
    c.send_raw(b"".join(encode_command(*argv) for argv in commands))
    return [c.read_reply() for _ in commands]


def online_replicas(c: RawClient) -> int:
    info = c.call("INFO", "replication")
    return sum(1 for line in info.split(b"\r\n") if line.startswith(b"slave")
               and b"state=online" in line)


def test_min_replicas_changes_apply_at_once_as_redis() -> None:
    masters = [start_redis(), start_pyrepl()]
    replicas = [start_redis("--replicaof", "127.0.0.1", str(m.port)) for m in masters]
    clients = [RawClient(m.port) for m in masters]
    try:
        for c in clients:
            wait_for(lambda c=c: online_replicas(c) == 1, timeout=30, what="replica online")
        for c in clients:
            assert pipeline(c, ("CONFIG", "SET", "min-replicas-max-lag", "1"),
                            ("CONFIG", "SET", "min-replicas-to-write", "1"),
                            ("SET", "k", "0")) == [b"+OK\r\n"] * 3
        for r in replicas:
            os.kill(r.proc.pid, signal.SIGSTOP)    # its acks stop: it turns "bad" after 1-2 s
        try:
            for c in clients:
                # on both masters, wait until the frozen replica no longer counts as good
                wait_for(lambda c=c: b"min_slaves_good_slaves:0" in c.call("INFO", "replication"),
                         timeout=10, what="the frozen replica to count as lagging")
                assert c.call("SET", "k", "1") == NOREPLICAS
            # A larger max lag makes the frozen replica good again, for the very next write.
            got = [pipeline(c, ("CONFIG", "SET", "min-replicas-max-lag", "1000"),
                            ("SET", "k", "2")) for c in clients]
            assert got[0] == got[1] == [b"+OK\r\n", b"+OK\r\n"]
            # And asking for two good replicas refuses the next write at once.
            got = [pipeline(c, ("CONFIG", "SET", "min-replicas-to-write", "2"),
                            ("SET", "k", "3"), ("CONFIG", "SET", "min-replicas-to-write", "0"),
                            ("SET", "k", "4")) for c in clients]
            assert got[0] == got[1] == [b"+OK\r\n", NOREPLICAS, b"+OK\r\n", b"+OK\r\n"]
        finally:
            for r in replicas:
                os.kill(r.proc.pid, signal.SIGCONT)
    finally:
        for c in clients:
            c.close()
        for s in replicas + masters:
            s.stop()
