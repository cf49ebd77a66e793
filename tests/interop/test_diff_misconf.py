"""MISCONF after a failed save, side by side with a real redis-server 7.0.15.

With ``stop-writes-on-bgsave-error yes`` (the default) and save points set, a failed BGSAVE
makes writes (and PING) answer ``-MISCONF ...`` until a save succeeds; reads go on. Both servers
run the same scenario; every reply is compared byte for byte (RESP2 and RESP3).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.procs import start_pyrepl, start_redis
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

MISCONF = (b"-MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
           b"persist to disk. Commands that may modify the data set are disabled, because this "
           b"instance is configured to report errors during writes if RDB snapshotting fails "
           b"(stop-writes-on-bgsave-error option). Please check the Redis logs for details about "
           b"the RDB error.\r\n")


def bgsave_status(c: RawClient) -> bytes:
    info = c.call("INFO", "persistence")
    for line in info.split(b"\r\n"):
        if line.startswith(b"rdb_last_bgsave_status:"):
            return line.split(b":", 1)[1]
    raise AssertionError(info)


def idle(c: RawClient) -> bool:
    return b"rdb_bgsave_in_progress:0" in c.call("INFO", "persistence")


@contextmanager
def saving_pair(tmp_path: Any) -> Iterator[tuple[list[Any], list[RawClient], Callable[..., bytes]]]:
    """redis-server and pyrepl with a save point, each with a data directory of its own: the
    directories, a client of each and ``both(*argv)``, which sends argv to both and asserts
    the same reply (returned)."""
    servers = []
    dirs = []
    for name, start in (("redis", start_redis), ("pyrepl", start_pyrepl)):
        d = tmp_path / name / "data"
        d.mkdir(parents=True)
        dirs.append(d)
        servers.append(start("--save", "3600 1", "--dir", str(d), "--enable-protected-configs",
                             "yes", tmpdir=str(tmp_path / name)))
    clients = [RawClient(s.port) for s in servers]

    def both(*argv: str) -> bytes:
        replies = [c.call(*argv) for c in clients]
        assert replies[1] == replies[0], (argv, replies)
        return replies[0]

    try:
        yield dirs, clients, both
    finally:
        for c in clients:
            c.close()
        for s in servers:
            s.stop()


@pytest.mark.parametrize("proto", [2, 3])
def test_misconf_after_a_failed_bgsave_as_redis(tmp_path: Any, proto: int) -> None:
    with saving_pair(tmp_path) as (dirs, clients, both):
        for c in clients:      # (the reply names the client id, which differs)
            assert c.call("HELLO", str(proto)).startswith(b"*14" if proto == 2 else b"%7")
        assert both("SET", "k", "v") == b"+OK\r\n"
        # The data directory disappears under both servers: the next BGSAVE fails.
        for d in dirs:
            shutil.rmtree(d)
        both("BGSAVE")
        for c in clients:
            wait_for(lambda c=c: idle(c), timeout=20, what="the failed BGSAVE to end")
            assert bgsave_status(c) == b"err"
        assert both("SET", "k", "v2") == MISCONF
        assert both("PING") == MISCONF
        assert both("INCR", "n") == MISCONF
        assert both("GET", "k") == b"$1\r\nv\r\n"          # reads go on
        # In MULTI the write is refused when queued, and EXEC aborts.
        both("MULTI")
        assert both("SET", "k", "v3") == MISCONF
        both("EXEC")
        # Turning the option off, or dropping the save points, lifts the refusal at once.
        both("CONFIG", "SET", "stop-writes-on-bgsave-error", "no")
        assert both("SET", "k", "v4") == b"+OK\r\n"
        both("CONFIG", "SET", "stop-writes-on-bgsave-error", "yes")
        assert both("SET", "k", "v5") == MISCONF
        both("CONFIG", "SET", "save", "")
        assert both("SET", "k", "v6") == b"+OK\r\n"
        both("CONFIG", "SET", "save", "3600 1")
        assert both("SET", "k", "v7") == MISCONF
        # A save that works clears it (Redis chdir()ed into the removed directory: point both
        # at the new one).
        for c, d in zip(clients, dirs, strict=True):
            os.makedirs(d)
            assert c.call("CONFIG", "SET", "dir", str(d)) == b"+OK\r\n"
        both("BGSAVE")
        for c in clients:
            wait_for(lambda c=c: idle(c), timeout=20, what="the BGSAVE to end")
            assert bgsave_status(c) == b"ok"
        assert both("SET", "k", "v8") == b"+OK\r\n"
        assert both("PING") == b"+PONG\r\n"


def test_a_failed_foreground_save_does_not_deny_writes_as_redis(tmp_path: Any) -> None:
    """SAVE (and the save of a SHUTDOWN) failing leaves the last background save's status as
    it was: no -MISCONF after it (Redis 7.0's rdbSave sets the status only when it works)."""
    with saving_pair(tmp_path) as (dirs, clients, both):
        assert both("SET", "k", "v") == b"+OK\r\n"
        for d in dirs:
            (d / "dump.rdb").mkdir()        # the rename over it fails
        assert both("SAVE").startswith(b"-ERR")
        assert both("SHUTDOWN").startswith(b"-ERR Errors trying to SHUTDOWN")
        assert both("PING") == b"+PONG\r\n"
        assert both("SET", "k", "v2") == b"+OK\r\n"
        for c in clients:
            assert bgsave_status(c) == b"ok"
        for d in dirs:     # (so that the servers can save on their way out, and stop)
            (d / "dump.rdb").rmdir()
