"""Scripts in an AOF being loaded, on pyrepl and redis-server 7.0.15 side by side (Redis's
tests/integration/aof.tcl "EVAL timeout with slow verbatim Lua script from AOF" and "EVAL can
process writes from AOF in read-only replicas"), and DEBUG AOF-FLUSH-SLEEP.

- A script from the AOF that runs past busy-reply-threshold while DEBUG LOADAOF loads: the
  other clients get -LOADING (the load comes first), not -BUSY, and the load completes.
- A read-only replica loading an AOF whose EVALs write: the AOF client is obeyed as a master is
  (mustObeyClient), so the writes happen.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

from tests.support.procs import ServerProcess, start_pyrepl, start_redis
from tests.support.resp import RawClient, encode_command
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def _aof_dir(commands: list[list[bytes]]) -> str:
    """A server directory whose appendonlydir holds one INCR file with ``commands``."""
    d = tempfile.mkdtemp(prefix="aof-scripts-")
    os.makedirs(os.path.join(d, "appendonlydir"))
    with open(os.path.join(d, "appendonlydir", "appendonly.aof.manifest"), "w") as f:
        f.write("file appendonly.aof.1.incr.aof seq 1 type i\n")
    with open(os.path.join(d, "appendonlydir", "appendonly.aof.1.incr.aof"), "wb") as f:
        f.write(b"".join(encode_command(*c) for c in commands))
    return d


def _both(commands: list[list[bytes]], *flags: str) -> Iterator[ServerProcess]:
    """pyrepl, then redis-server, each on its own copy of the AOF (started one at a time)."""
    flags = (*flags, "--enable-debug-command", "yes")
    yield start_pyrepl(*flags, tmpdir=_aof_dir(commands))
    yield start_redis(*flags, tmpdir=_aof_dir(commands))


def test_writes_of_aof_scripts_on_a_read_only_replica() -> None:
    commands = [[b"select", b"9"],
                [b"eval", b"redis.call('set',KEYS[1],'100')", b"1", b"foo"],
                [b"eval", b"redis.call('incr',KEYS[1])", b"1", b"foo"],
                [b"eval", b"redis.call('incr',KEYS[1])", b"1", b"foo"]]
    seen = []
    for srv in _both(commands, "--appendonly", "yes", "--replica-read-only", "yes",
                     "--replicaof", "127.0.0.1", "0"):
        with srv, RawClient(srv.port) as c:
            c.call("SELECT", "9")
            seen.append(c.call("GET", "foo"))
    assert seen == [b"$3\r\n102\r\n"] * 2


# A script that runs for ARGV[1] microseconds of wall-clock time (TIME, called in a loop): the
# load it is in lasts that long on both servers, however fast each runs scripts or however
# starved the machine is, so the window in which others get -LOADING is certain, not a race.
SLOW = (b"redis.call('set',KEYS[1],'y') "
        b"local function us() local t = redis.call('time') return t[1] * 1000000 + t[2] end "
        b"local stop = us() + tonumber(ARGV[1]) while us() < stop do end return 'ok'")
LOAD_US = b"4000000"


def test_a_busy_script_during_debug_loadaof_answers_loading() -> None:
    seen = []
    for srv in _both([[b"select", b"9"], [b"eval", SLOW, b"1", b"x", LOAD_US]],
                     "--appendonly", "yes", "--lua-time-limit", "1",
                     "--aof-use-rdb-preamble", "no"):
        with srv, RawClient(srv.port, timeout=90) as loader, \
                RawClient(srv.port, timeout=90) as other:
            # (the start loads the same AOF: both answer -LOADING meanwhile, the script's
            # hook accepting the connections)
            first = other.call("PING")
            # (a PING that timed out makes the next call raise, RawClient: none is misread)
            wait_for(lambda: other.call("PING") == b"+PONG\r\n", timeout=90,
                     what="the start's load done")
            loader.send("DEBUG", "LOADAOF")
            wait_for(lambda: other.call("PING") != b"+PONG\r\n", timeout=20,
                     what="the load under way")
            got = [other.call("PING"), other.call("GET", "x"), first]
            got.append(loader.read_reply())
            other.call("SELECT", "9")
            got.append(other.call("GET", "x"))
            with open(srv.logpath, "rb") as f:
                got.append(b"Slow script detected" in f.read())
            seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][0] == seen[0][2] == b"-LOADING Redis is loading the dataset in memory\r\n"
    assert seen[0][4] == b"$1\r\ny\r\n"


def test_debug_aof_flush_sleep() -> None:
    seen = []
    for srv in _both([], "--appendonly", "yes"):
        with srv, RawClient(srv.port) as c:
            got = [c.call("DEBUG", "AOF-FLUSH-SLEEP", "100000"), c.call("SET", "k", "v"),
                   c.call("DEBUG", "AOF-FLUSH-SLEEP", "0"), c.call("DEBUG", "LOADAOF"),
                   c.call("GET", "k")]
            seen.append(got)
    assert seen[0] == seen[1] == [b"+OK\r\n", b"+OK\r\n", b"+OK\r\n", b"+OK\r\n", b"$1\r\nv\r\n"]
