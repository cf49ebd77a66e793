"""A script's redis.set_repl targets in the AOF, on pyrepl and redis-server 7.0.15 side by side
(scripting.tcl's "Test selective replication of certain Redis commands from Lua"): REPL_AOF
writes reach the AOF and not the replicas, REPL_REPLICA ones the replicas and not the AOF,
REPL_NONE neither, and DEBUG LOADAOF then holds exactly what the AOF took. The replication side
is compared in test_diff_scripting's propagation test.
"""

from __future__ import annotations

import glob
import os

import pytest

from tests.support.procs import side_by_side
from tests.support.resp import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.interop]

SCRIPTS = [
    "redis.call('set','a','1'); redis.set_repl(redis.REPL_NONE); redis.call('set','b','2'); "
    "redis.set_repl(redis.REPL_AOF); redis.call('set','c','3'); "
    "redis.set_repl(redis.REPL_ALL); redis.call('set','d','4')",
    "redis.set_repl(redis.REPL_REPLICA); redis.call('set','e','5')",
    "redis.set_repl(redis.REPL_AOF); redis.call('set','f','6')",
    "redis.set_repl(redis.REPL_REPLICA); redis.call('set','g','7'); redis.call('set','h','8')",
]


def _incr_aof(srv) -> bytes:
    files = glob.glob(os.path.join(srv.dir, "appendonlydir", "*.incr.aof"))
    assert len(files) == 1, files
    with open(files[0], "rb") as f:
        return f.read()


def test_set_repl_targets_in_the_aof_as_redis() -> None:
    seen = []
    with side_by_side("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                      "--enable-debug-command", "yes", "--appendfsync", "always") as servers:
        for srv in servers:
            with RawClient(srv.port) as c:
                for body in SCRIPTS:
                    assert c.call("EVAL", body, "0") == b"$-1\r\n"
                aof = _incr_aof(srv)
                before = c.call("MGET", *"abcdefgh")
                assert c.call("DEBUG", "LOADAOF") == b"+OK\r\n"
                seen.append((aof, before, c.call("MGET", *"abcdefgh")))
    assert seen[0] == seen[1]
    assert b"$1\r\nc\r\n" in seen[0][0] and b"$1\r\ne\r\n" not in seen[0][0]
    assert seen[0][2] == (b"*8\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n$1\r\n4\r\n$-1\r\n$1\r\n6\r\n"
                          b"$-1\r\n$-1\r\n")
