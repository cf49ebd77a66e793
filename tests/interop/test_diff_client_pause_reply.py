"""Differential tests of CLIENT PAUSE / UNPAUSE and CLIENT REPLY against redis-server 7.0.15.

PAUSE: on both servers a client pauses (WRITE or ALL) and other clients send reads, writes,
a MULTI whose EXEC holds a write, PUBLISH; what answers at once and what waits is the same on
both (each reply compared byte for byte, a waiting client's reply arriving only after CLIENT
UNPAUSE or the deadline), and keys expire neither actively nor lazily during the pause. REPLY: OFF, SKIP and ON sequences with pipelined commands give the
same bytes on both, pub/sub frames still arriving while replies are off.
"""

from __future__ import annotations

import time

import pytest

from tests.support.resp import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def both(ports, fn):
    return [fn(p) for p in ports]


def answered_within(c: RawClient, seconds: float) -> bytes | None:
    """The next reply if it comes within ``seconds``, else None (the client waits)."""
    c.sock.settimeout(seconds)
    try:
        return c.read_reply()
    except TimeoutError:
        return None
    finally:
        c.sock.settimeout(10)


@pytest.mark.parametrize("kind", ["WRITE", "ALL"])
def test_pause_postpones_what_redis_postpones(pyrepl_server, redis_server, kind: str) -> None:
    outcomes = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as admin, RawClient(port) as r, RawClient(port) as w, \
                RawClient(port) as m, RawClient(port) as p:
            admin.call("FLUSHALL")
            admin.call("SET", "k", "v")
            got: dict[str, object] = {}
            assert admin.call("CLIENT", "PAUSE", "5000", kind) == b"+OK\r\n"
            r.send("GET", "k")
            got["read"] = answered_within(r, 0.3)
            w.send("SET", "k", "new")
            got["write"] = answered_within(w, 0.3)
            m.call("MULTI")
            m.send("INCR", "n")
            got["queued"] = answered_within(m, 0.3)
            p.send("PUBLISH", "ch", "x")
            got["publish"] = answered_within(p, 0.3)
            assert admin.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
            for name, c in (("read", r), ("write", w), ("queued", m), ("publish", p)):
                if got[name] is None:
                    got[name + " after"] = c.read_reply()
            m.send("EXEC")
            got["exec"] = m.read_reply()
            got["k"] = admin.call("GET", "k")
            outcomes.append(got)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0]["write"] is None            # a write always waits


def test_pause_deadline_and_errors(pyrepl_server, redis_server) -> None:
    replies = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as admin, RawClient(port) as w:
            errs = [admin.call(*a) for a in (
                ("CLIENT", "PAUSE", "x"), ("CLIENT", "PAUSE", "-1"),
                ("CLIENT", "PAUSE", "10", "READ"), ("CLIENT", "PAUSE", "10", "ALL", "x"),
                ("CLIENT", "UNPAUSE", "x"), ("CLIENT", "REPLY", "MAYBE"))]
            admin.call("CLIENT", "PAUSE", "300", "WRITE")
            admin.call("CLIENT", "PAUSE", "100", "ALL")     # stricter kind, later end kept
            t0 = time.monotonic()
            w.send("SET", "a", "1")
            reply = w.read_reply()
            waited = time.monotonic() - t0
            assert 0.2 < waited < 2.0, waited
            replies.append((errs, reply))
    assert replies[0] == replies[1]


def test_no_expiry_while_paused(pyrepl_server, redis_server) -> None:
    seen = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as admin:
            admin.call("FLUSHALL")
            admin.call("SET", "gone", "1", "PX", "50")
            admin.call("SET", "lazy", "1", "PX", "50")
            admin.call("CLIENT", "PAUSE", "5000", "WRITE")
            time.sleep(0.4)
            row = [admin.call("DBSIZE"), admin.call("GET", "lazy"), admin.call("DBSIZE")]
            admin.call("CLIENT", "UNPAUSE")
            time.sleep(0.4)
            row.append(admin.call("DBSIZE"))
            seen.append(row)
    assert seen[0] == seen[1]
    assert seen[0][0] == b":2\r\n" and seen[0][1] == b"$-1\r\n" and seen[0][2] == b":2\r\n"


@pytest.mark.parametrize("proto", [2, 3])
def test_client_reply_off_skip_on(pyrepl_server, redis_server, proto: int) -> None:
    script = [
        ("SET", "a", "1"), ("CLIENT", "REPLY", "SKIP"), ("GET", "a"), ("GET", "a"),
        ("CLIENT", "REPLY", "OFF"), ("INCR", "n"), ("CLIENT", "REPLY", "SKIP"), ("GET", "n"),
        ("SUBSCRIBE", "ch"), ("UNSUBSCRIBE", "ch"), ("NOSUCH",), ("CLIENT", "REPLY", "ON"),
        ("GET", "n"), ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "SKIP"), ("GET", "a"),
        ("GET", "n"), ("MULTI",), ("INCR", "n"), ("CLIENT", "REPLY", "OFF"), ("EXEC",),
        ("CLIENT", "REPLY", "ON"), ("ECHO", "x"),
        # ON right after SKIP: it clears the skip first, so its +OK goes out (Redis's
        # networking.c; a client waiting for it must not wait forever)
        ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "ON"), ("ECHO", "end"),
    ]
    outputs = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as c:
            if proto == 3:
                c.call("HELLO", "3")
            c.call("FLUSHALL")
            for argv in script:
                c.send(*argv)
            data = []
            while True:
                frame = c.read_reply()
                data.append(frame)
                if frame.endswith(b"end\r\n"):
                    break
            outputs.append(data)
    assert outputs[0] == outputs[1]


RO_SCRIPT = "#!lua flags=no-writes\nreturn 12"
RW_SCRIPT = "#!lua\nreturn 13"
LIBRARY = ("#!lua name=pauselib\n"
           "redis.register_function{function_name='ro', callback=function() return 1 end, "
           "flags={'no-writes'}}\n"
           "redis.register_function('rw', function() return 2 end)")


def test_pause_write_runs_read_only_scripts_and_functions(pyrepl_server, redis_server) -> None:
    """pause.tcl: under CLIENT PAUSE WRITE a script or function that declared no-writes runs
    (EVAL, EVALSHA, FCALL, their _RO forms, and in a MULTI whose EXEC holds only such), while
    one that may write waits (is_may_replicate_command with the script's flags)."""
    outcomes = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as admin, RawClient(port) as c:
            admin.call("FLUSHALL")
            admin.call("FUNCTION", "FLUSH")
            admin.call("FUNCTION", "LOAD", LIBRARY)
            ro_sha = admin.call("SCRIPT", "LOAD", RO_SCRIPT)[5:-2].decode()
            got: dict[str, object] = {}
            assert admin.call("CLIENT", "PAUSE", "100000", "WRITE") == b"+OK\r\n"
            for name, argv in (("eval no-writes", ("EVAL", RO_SCRIPT, "0")),
                               ("evalsha no-writes", ("EVALSHA", ro_sha, "0")),
                               ("eval_ro", ("EVAL_RO", "return 3", "0")),
                               ("fcall no-writes", ("FCALL", "ro", "0")),
                               ("fcall_ro", ("FCALL_RO", "ro", "0"))):
                c.send(*argv)
                got[name] = answered_within(c, 0.3)
            c.call("MULTI")
            c.call("EVAL", RO_SCRIPT, "0")
            c.call("FCALL", "ro", "0")
            c.send("EXEC")
            got["exec of no-writes"] = answered_within(c, 0.3)
            for name, argv in (("eval may write", ("EVAL", RW_SCRIPT, "0")),
                               ("fcall may write", ("FCALL", "rw", "0"))):
                c.send(*argv)
                got[name] = answered_within(c, 0.3)
                if got[name] is None:
                    assert admin.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
                    got[name + " after"] = c.read_reply()
                    assert admin.call("CLIENT", "PAUSE", "100000", "WRITE") == b"+OK\r\n"
            assert admin.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
            admin.call("FUNCTION", "FLUSH")
            outcomes.append(got)
    assert outcomes[0] == outcomes[1]
    assert outcomes[1]["eval may write"] is None and outcomes[1]["exec of no-writes"]


def test_paused_replica_reads_its_master_stream_and_applies_it_after(tmp_path) -> None:
    """Redis's pause.tcl "Test when replica paused, offset would not grow": a replica under
    CLIENT PAUSE WRITE reads its master's stream (slave_read_repl_offset) but applies none of
    its writes (slave_repl_offset, the data) until CLIENT UNPAUSE; a pyrepl replica and a
    redis-server 7.0.15 one of the same pyrepl master, side by side."""
    from tests.support.procs import start_pyrepl, start_redis
    from tests.support.waits import wait_for

    def fields(c: RawClient) -> dict[str, str]:
        text = c.call("INFO", "replication").decode().split("\r\n", 1)[1]
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)

    with start_pyrepl("--repl-ping-replica-period", "3600") as master:
        replicas = [start_pyrepl(), start_redis()]
        try:
            with RawClient(master.port) as m:
                clients = [RawClient(r.port) for r in replicas]
                for c in clients:
                    c.call("REPLICAOF", "127.0.0.1", str(master.port))
                for c in clients:
                    wait_for(lambda c=c: fields(c).get("master_link_status") == "up", 30,
                             what="the link up")
                m.call("SET", "foo", "bar")
                before = int(fields(m)["master_repl_offset"])
                for c in clients:
                    wait_for(lambda c=c: int(fields(c)["slave_repl_offset"]) == before, 10,
                             what="the replica caught up")
                    assert c.call("CLIENT", "PAUSE", "100000", "WRITE") == b"+OK\r\n"
                m.call("SET", "foo2", "bar2")
                m.call("INCR", "n")
                after = int(fields(m)["master_repl_offset"])
                seen = []
                for c in clients:
                    wait_for(lambda c=c: int(fields(c)["slave_read_repl_offset"]) == after, 10,
                             what="the replica read the stream")
                    f = fields(c)
                    seen.append((int(f["slave_repl_offset"]), c.call("GET", "foo2"),
                                 c.call("EXISTS", "n")))
                assert seen[0] == seen[1] == (before, b"$-1\r\n", b":0\r\n"), seen
                for c in clients:
                    assert c.call("CLIENT", "UNPAUSE") == b"+OK\r\n"
                for c in clients:
                    wait_for(lambda c=c: int(fields(c)["slave_repl_offset"]) == after, 10,
                             what="the replica applied the stream")
                    assert c.call("GET", "foo2") == b"$4\r\nbar2\r\n"
                    assert c.call("GET", "n") == b"$1\r\n1\r\n"
                for c in clients:
                    c.close()
        finally:
            for r in replicas:
                r.stop()
