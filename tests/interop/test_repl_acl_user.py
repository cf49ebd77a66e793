"""Replication under a restricted ACL user, both ways with redis-server 7.0.15.

The master defines the user Redis documents for replicas (``user repl on >pw +psync +replconf
+ping``) on its command line, as a ``user`` line of its configuration; the replica is given
``masteruser repl`` / ``masterauth pw`` and authenticates with ``AUTH repl pw``. A real Redis
replica of a pyrepl master, and a pyrepl replica of a real Redis master, must sync the dataset
(full sync, then the stream: DEBUG DIGEST equal) while that user cannot write (-NOPERM), and a
replica whose user loses +psync is refused when it reconnects.
"""

from __future__ import annotations

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import AS_REPL, REPL_USER
from tests.support.resp import RawClient, parse_reply
from tests.support.waits import wait_for, wait_synced

pytestmark = [pytest.mark.slow, pytest.mark.interop]



def write_some(port: int, start: int) -> None:
    with RawClient(port) as c:
        for i in range(start, start + 200):
            c.send("SET", f"k:{i}", f"v{i}")
            c.send("RPUSH", "list", i)
            c.send("HSET", f"h:{i % 7}", f"f{i}", i)
        for _ in range(600):
            c.read_reply()


def check_the_user_cannot_write(master: int) -> None:
    with RawClient(master) as c:
        assert c.call("AUTH", "repl", "pw") == b"+OK\r\n"
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("SET", "x", "1") == \
            b"-NOPERM this user has no permissions to run the 'set' command\r\n"
        assert c.call("GET", "k:1") == \
            b"-NOPERM this user has no permissions to run the 'get' command\r\n"


def replica_link_user(master: int) -> str:
    """The user of the master's replica link (CLIENT LIST TYPE replica)."""
    with RawClient(master) as c:
        line = parse_reply(c.call("CLIENT", "LIST", "TYPE", "replica")).decode().strip()
    assert line and "\n" not in line, line
    return dict(f.split("=", 1) for f in line.split())["user"]


def sync_and_check(master_port: int, replica_port: int) -> None:
    wait_synced(master_port, replica_port, timeout=60)    # full sync: DEBUG DIGEST equal
    write_some(master_port, 1000)
    wait_synced(master_port, replica_port, timeout=60)    # the stream: DEBUG DIGEST equal
    assert replica_link_user(master_port) == "repl"
    check_the_user_cannot_write(master_port)


def test_redis_replica_of_a_pyrepl_master_as_a_restricted_user() -> None:
    master = start_pyrepl(*REPL_USER)
    replica = None
    try:
        with RawClient(master.port) as c:
            assert c.call("DEBUG", "POPULATE", "2000") == b"+OK\r\n"
        write_some(master.port, 0)
        replica = start_redis("--replicaof", "127.0.0.1", str(master.port), *AS_REPL,
                              "--enable-debug-command", "yes")
        sync_and_check(master.port, replica.port)
        # the user is checked on the link: without +psync the reconnecting replica is refused
        with RawClient(master.port) as c:
            assert c.call("ACL", "SETUSER", "repl", "-psync") == b"+OK\r\n"
            assert c.call("CLIENT", "KILL", "TYPE", "replica") == b":1\r\n"
        wait_for(lambda: "Unexpected reply to PSYNC from master: -NOPERM this user has no "
                         "permissions to run the 'psync' command" in replica.log(), 30,
                 what="the replica refused PSYNC")
    finally:
        if replica is not None:
            replica.stop()
        master.stop()


def test_pyrepl_replica_of_a_redis_master_as_a_restricted_user() -> None:
    master = start_redis(*REPL_USER, "--enable-debug-command", "yes",
                         "--repl-diskless-sync-delay", "0")
    replica = None
    try:
        with RawClient(master.port) as c:
            assert c.call("DEBUG", "POPULATE", "2000") == b"+OK\r\n"
        write_some(master.port, 0)
        replica = start_pyrepl("--master", f"127.0.0.1:{master.port}", *AS_REPL,
                               role="replica")
        sync_and_check(master.port, replica.port)
        assert "Unable to AUTH to MASTER" not in replica.log()
    finally:
        if replica is not None:
            replica.stop()
        master.stop()
