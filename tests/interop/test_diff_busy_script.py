"""A script running past busy-reply-threshold, on pyrepl and redis-server 7.0.15 side by side.

While it runs, other clients are served from the script's hook: their commands get -BUSY (but
SCRIPT KILL and SHUTDOWN NOSAVE), SCRIPT KILL stops a read-only script (its caller gets Redis's
error), a script that wrote is UNKILLABLE, and SHUTDOWN NOSAVE stops the server. A connection
opened while the script runs is accepted and served too (a redis-cli opened to send SCRIPT
KILL), and once the script ends it goes on as any other. Every reply is compared byte for byte.
"""

from __future__ import annotations

import time

import pytest

from tests.support.procs import ServerProcess, side_by_side
from tests.support.resp import RawClient
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

LOOP = "local i = 0 while true do i = i + 1 end"
WRITE_LOOP = "redis.call('SET', 'w', '1') local i = 0 while true do i = i + 1 end"


def wait_busy(probe: RawClient) -> None:
    """Until PING on an open connection gets -BUSY."""
    wait_for(lambda: probe.call("PING").startswith(b"-BUSY"), timeout=10,
             what="the script busy")


@pytest.fixture
def servers():
    with side_by_side("--busy-reply-threshold", "100") as started:
        yield started


def test_busy_replies_and_script_kill(servers) -> None:
    seen = []
    for srv in servers:
        with RawClient(srv.port) as runner, RawClient(srv.port) as other:
            assert other.call("PING") == b"+PONG\r\n"      # (accepted before the script)
            runner.send("EVAL", LOOP, "0")
            wait_busy(other)
            got = [other.call("GET", "k"), other.call("SET", "k", "v"),
                   other.call("SHUTDOWN"), other.call("SCRIPT", "FLUSH"),
                   other.call("SCRIPT", "KILL")]
            got.append(runner.read_reply())
            got.append(other.call("PING"))
            got.append(other.call("SCRIPT", "KILL"))
            seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][0].startswith(b"-BUSY Redis is busy running a script.")
    assert seen[0][4] == b"+OK\r\n" and seen[0][6] == b"+PONG\r\n"


def test_a_connection_opened_while_the_script_runs_is_served(servers) -> None:
    """processEventsWhileBlocked accepts: a client that connects during the script gets -BUSY
    and its SCRIPT KILL ends the script; 5,000 replies it did not read meanwhile (more than a
    socket takes at once) arrive whole and in order before the later ones; it is a client as
    any other afterwards; one that sends QUIT meanwhile gets +OK and is closed."""
    seen = []
    for srv in servers:
        with RawClient(srv.port, timeout=20) as runner, RawClient(srv.port) as other:
            assert other.call("PING") == b"+PONG\r\n"
            runner.send("EVAL", LOOP, "0")
            wait_busy(other)
            t0 = time.monotonic()
            with RawClient(srv.port) as late, RawClient(srv.port) as quitter:
                got = [late.call("PING"), quitter.call("QUIT")]
                with pytest.raises((ConnectionError, OSError)):
                    quitter.call("PING")
                assert time.monotonic() - t0 < 10, "the new connections were not served"
                late.send_raw(b"".join([b"GET k\r\n"] * 5000))
                late.send("SCRIPT", "KILL")
                busy = [late.read_reply() for _ in range(5000)]
                got.append(late.read_reply())
                got.append(runner.read_reply())
                got.append(len(set(busy)))
                got.append(busy[0])
                got += [late.call("SET", "k", "v"), late.call("GET", "k"),
                        late.call("CLIENT", "SETNAME", "late")]
                got.append(b"name=late" in other.call("CLIENT", "LIST"))
            seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][0].startswith(b"-BUSY Redis is busy running a script.")
    assert seen[0][1] == b"+OK\r\n" and seen[0][2] == b"+OK\r\n"
    assert seen[0][3].startswith(b"-ERR Script killed by user with SCRIPT KILL")
    assert seen[0][4] == 1 and seen[0][5].startswith(b"-BUSY")
    assert seen[0][6:] == [b"+OK\r\n", b"$1\r\nv\r\n", b"+OK\r\n", True]


def test_a_kill_caught_by_pcall_leaves_the_next_scripts_alone(servers) -> None:
    """A killed script that catches the kill in a pcall and returns on the same line (the
    hook, in line mode after SCRIPT KILL, gets no new line to stop it at) ends normally, and
    the scripts after it, EVAL's and EVALSHA's, run with the busy hook as it was."""
    seen = []
    caught = "return pcall(function() local i = 0 while true do i = i + 1 end end)"
    for srv in servers:
        with RawClient(srv.port) as runner, RawClient(srv.port) as other:
            assert other.call("PING") == b"+PONG\r\n"
            sha = other.call("SCRIPT", "LOAD", "return 'after'").split(b"\r\n")[1]
            runner.send("EVAL", caught, "0")
            wait_busy(other)
            got = [other.call("SCRIPT", "KILL"), runner.read_reply(),
                   runner.call("EVAL", "local x = 1\nlocal y = 2\nreturn x + y", "0"),
                   runner.call("EVALSHA", sha, "0"), runner.call("EVALSHA", sha, "0"),
                   other.call("PING")]
            seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][2:] == [b":3\r\n", b"$5\r\nafter\r\n", b"$5\r\nafter\r\n",
                           b"+PONG\r\n"]


@pytest.mark.parametrize("appendonly", ["no", "yes"])
def test_what_waits_to_be_written_leaves_while_the_script_runs(appendonly: str) -> None:
    """processEventsWhileBlocked runs beforeSleep's writes: a message the busy script itself
    published (its subscriber's output waits for the pass's end) reaches the subscriber while
    the script still runs, before SCRIPT KILL ends it (a subscriber that got nothing would
    time out here). With the AOF on too: that beforeSleep writes the AOF's buffer first
    (flushAppendOnlyFile), then the replies."""
    with side_by_side("--busy-reply-threshold", "100", "--appendonly", appendonly) as servers:
        seen = [_published_while_busy(srv) for srv in servers]
    assert seen[0] == seen[1]
    assert seen[0][0] == b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n"
    assert seen[0][1] == b"+OK\r\n"


def _published_while_busy(srv: ServerProcess) -> list[bytes]:
    """The subscriber's message, SCRIPT KILL's reply and the runner's, of a busy script that
    published before it looped."""
    with RawClient(srv.port) as runner, RawClient(srv.port) as other, \
            RawClient(srv.port, timeout=5) as sub:
        assert other.call("PING") == b"+PONG\r\n"
        assert sub.call("SUBSCRIBE", "ch").startswith(b"*3\r\n$9\r\nsubscribe\r\n")
        runner.send("EVAL", "redis.call('PUBLISH', 'ch', 'm') " + LOOP, "0")
        wait_busy(other)
        return [sub.read_reply(), other.call("SCRIPT", "KILL"), runner.read_reply()]


def test_a_script_that_wrote_is_unkillable_and_shutdown_nosave_stops(servers) -> None:
    seen = []
    for srv in servers:
        with RawClient(srv.port) as runner, RawClient(srv.port) as other:
            assert other.call("PING") == b"+PONG\r\n"
            runner.send("EVAL", WRITE_LOOP, "0")
            wait_busy(other)
            got = [other.call("SCRIPT", "KILL"), other.call("GET", "w")]
            other.send("SHUTDOWN", "NOSAVE")
            t0 = time.monotonic()
            for c in (other, runner):
                with pytest.raises((ConnectionError, OSError)):
                    c.read_reply()
            assert time.monotonic() - t0 < 10
            wait_for(lambda s=srv: s.proc.poll() is not None, timeout=10,
                     what="the server gone")
            seen.append(got)
    assert seen[0] == seen[1]
    assert seen[0][0].startswith(b"-UNKILLABLE Sorry the script already executed write")


def test_a_replica_that_leaves_during_a_busy_script_is_seen_by_it() -> None:
    """scripting.tcl's "not enough good replicas state change during long script": while a
    script runs past the threshold, a replica that disconnects is freed (the hook serves the
    replica links), so the script's INFO sees connected_slaves:0 and it ends; on pyrepl and
    redis-server alike."""
    from tests.support.procs import start_pyrepl, start_redis

    script = ("redis.call('set','x','script value') "
              "while true do local info = redis.call('info','replication') "
              "if string.match(info, 'connected_slaves:0') then redis.call('set','x',info) "
              "break end end return 1")
    for start in (start_pyrepl, start_redis):
        with start("--busy-reply-threshold", "10") as master, \
                start_redis("--replicaof", "127.0.0.1", "0") as replica, \
                RawClient(master.port) as runner, RawClient(master.port) as other, \
                RawClient(replica.port) as rc:
            assert rc.call("REPLICAOF", "127.0.0.1", str(master.port)) == b"+OK\r\n"
            wait_for(lambda: b"state=online" in other.call("INFO", "replication"),
                     timeout=30, what="the replica online")
            assert other.call("CONFIG", "SET", "min-replicas-to-write", "1") == b"+OK\r\n"
            runner.send("EVAL", script, "1", "x")
            wait_for(lambda: other.call("PING").startswith(b"-BUSY"), timeout=10,
                     what=f"the script busy ({start.__name__})")
            assert rc.call("REPLICAOF", "NO", "ONE") == b"+OK\r\n"
            assert runner.read_reply() == b":1\r\n"
            assert b"connected_slaves:0" in other.call("GET", "x")
