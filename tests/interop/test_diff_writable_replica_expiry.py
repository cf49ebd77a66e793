"""A writable replica expires the keys its own clients gave a TTL, as redis-server 7.0.15 does.

One real Redis master, two replicas of it side by side: a real redis-server and pyrepl, both with
``replica-read-only no``. The same writes go to each replica directly; keys with a TTL set by a
client on the replica are removed by the replica itself once expired (Redis's
slaveKeysWithExpire / expireSlaveKeys), so DBSIZE, KEYS and ``expired_keys`` agree; keys the
master gave a TTL still wait for the master's DEL; a full resync forgets the tracked keys.
"""

from __future__ import annotations

import time

import pytest

from tests.support.procs import connected, start_pyrepl, start_redis
from tests.support.resp import RawClient, info, parse_reply
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def info_field(c: RawClient, section: str, field: str) -> bytes:
    return info(c, section)[field].encode()


def test_writable_replica_expires_its_own_keys_as_redis() -> None:
    master = start_redis("--enable-debug-command", "yes")
    replicas = [start_redis("--replicaof", "127.0.0.1", str(master.port),
                            "--replica-read-only", "no"),
                start_pyrepl("--replicaof", "127.0.0.1", str(master.port),
                             "--replica-read-only", "no")]
    with connected(master, replicas) as (m, rs):
        for r in rs:
            wait_for(lambda r=r: info_field(r, "replication", "master_link_status") == b"up",
                     timeout=30, what="replica link up")
        # The master's own key with a TTL, frozen so its DEL never comes during the test.
        assert m.call("DEBUG", "SET-ACTIVE-EXPIRE", "0") == b"+OK\r\n"
        m.call("SET", "from-master", "x", "PX", "300")
        for r in rs:   # (DBSIZE counts it even once its 300 ms have passed on a busy machine)
            wait_for(lambda r=r: r.call("DBSIZE") == b":1\r\n", timeout=10,
                     what="the master's key on the replica")

        def both(*argv: str) -> bytes:
            replies = [r.call(*argv) for r in rs]
            assert replies[1] == replies[0], argv
            return replies[0]

        assert both("SET", "short", "1", "PX", "300") == b"+OK\r\n"
        assert both("SET", "long", "1", "EX", "1000") == b"+OK\r\n"
        assert both("SET", "plain", "1") == b"+OK\r\n"
        assert both("SET", "persisted", "1", "PX", "300") == b"+OK\r\n"
        assert both("PERSIST", "persisted") == b":1\r\n"
        assert both("SELECT", "3") == b"+OK\r\n"
        assert both("SET", "short", "1", "PX", "300") == b"+OK\r\n"    # same name, db 3
        assert both("RPUSH", "list", "a", "b") == b":2\r\n"
        assert both("PEXPIRE", "list", "300") == b":1\r\n"
        assert both("SELECT", "0") == b"+OK\r\n"
        assert both("DBSIZE") == b":5\r\n"
        time.sleep(0.4)     # every TTL above has passed; the keys are hidden at once...
        assert both("GET", "short") == b"$-1\r\n"
        # ...and removed by each replica's own cron, the master's key excepted.
        for r in rs:
            wait_for(lambda r=r: r.call("DBSIZE") == b":4\r\n", timeout=5,
                     what="the replica to expire its own keys")
        assert both("SELECT", "3") == b"+OK\r\n"
        for r in rs:
            wait_for(lambda r=r: r.call("DBSIZE") == b":0\r\n", timeout=5,
                     what="the replica to expire its own keys in db 3")
        assert both("SELECT", "0") == b"+OK\r\n"
        keys = [sorted(parse_reply(r.call("KEYS", "*"))) for r in rs]
        assert keys[1] == keys[0] == [b"long", b"persisted", b"plain"]
        assert both("DBSIZE") == b":4\r\n"        # the master's key: no DEL came yet...
        assert both("EXISTS", "from-master") == b":0\r\n"   # ...but it is hidden
        assert both("TTL", "long") == rs[0].call("TTL", "long")
        assert info_field(rs[1], "stats", "expired_keys") == \
            info_field(rs[0], "stats", "expired_keys") == b"3"
        # The master's DEL arrives once its active expiry runs again.
        m.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        for r in rs:
            wait_for(lambda r=r: r.call("DBSIZE") == b":3\r\n", timeout=10,
                     what="the master's DEL")
