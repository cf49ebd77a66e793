"""Differential tests of SLOWLOG and MONITOR: pyrepl against real redis-server 7.0.15.

SLOWLOG: with ``slowlog-log-slower-than 0`` both servers log the same commands, with the same
trimmed arguments (32 at most, 128 bytes each) and redactions (AUTH, HELLO AUTH, CONFIG SET of
a password), EXEC left out, newest first; ids, times, durations and the client's port are
compared as shapes. MONITOR: a monitor on each server sees the same lines (time and port
aside) for the same commands, admin commands hidden, quoting as Redis's sdscatrepr; and on a
replica, MONITOR shows what it applies from its master (pyrepl and Redis replicas of the same
master show the same lines).
"""

from __future__ import annotations

import re

import pytest
import redis

from tests.support.procs import start_pyrepl, start_redis
from tests.support.realpair import wait_in_sync
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

LOGGED = [
    ("SET", "k", "v"),
    ("SET", "big", "x" * 300),
    ("RPUSH", "l", *[str(i) for i in range(40)]),
    ("GET", "nokey"),
    ("AUTH", "secret"),
    ("AUTH", "user", "secret"),
    ("HELLO", "2", "AUTH", "default", "pw", "SETNAME", "me"),
    ("CONFIG", "SET", "masterauth", "hidden", "maxmemory-samples", "5"),
    ("MULTI",), ("INCR", "n"), ("EXEC",),
    ("SET", "bin", "\x00\x01 \"quoted\" \\ \r\n\t end"),
    ("UNKNOWN-CMD", "x"),
    ("PING",),
]


def slowlog_shape(entries: list) -> list:
    """Entries without what differs between two servers (ids kept relative)."""
    base = entries[-1][0] if entries else 0
    out = []
    for eid, when, duration, argv, peer, name in entries:
        assert isinstance(when, int) and isinstance(duration, int) and duration >= 0
        out.append((eid - base, argv, peer.rsplit(b":", 1)[0], name))
    return out


@pytest.mark.parametrize("proto", [2, 3])
def test_slowlog_entries_as_redis(pyrepl_server, redis_server, proto: int) -> None:
    shapes = []
    for port in (pyrepl_server.port, redis_server.port):
        with RawClient(port) as c:
            if proto == 3:
                c.call("HELLO", "3")
            c.call("CLIENT", "SETNAME", "tester")
            c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
            c.call("SLOWLOG", "RESET")
            for argv in LOGGED:
                c.call(*argv)
            c.call("CLIENT", "SETNAME", "tester")
            got = parse_reply(c.call("SLOWLOG", "GET", "-1"))
            length = parse_reply(c.call("SLOWLOG", "LEN"))
            errors = [c.call(*argv) for argv in (
                ("SLOWLOG", "GET", "-2"), ("SLOWLOG", "GET", "x"), ("SLOWLOG", "GET", "1", "2"),
                ("SLOWLOG", "NOPE"), ("SLOWLOG", "HELP"), ("SLOWLOG", "LEN", "x"))]
            few = parse_reply(c.call("SLOWLOG", "GET", "2"))
            c.call("CONFIG", "SET", "slowlog-max-len", "3")
            c.call("PING")
            capped = parse_reply(c.call("SLOWLOG", "LEN"))
            c.call("CONFIG", "SET", "slowlog-log-slower-than", "-1")
            c.call("SLOWLOG", "RESET")
            c.call("PING")
            off = parse_reply(c.call("SLOWLOG", "LEN"))
            c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000")
            c.call("CONFIG", "SET", "slowlog-max-len", "128")
            c.call("CONFIG", "SET", "masterauth", "")
            shapes.append((slowlog_shape(got), length, errors, len(few), capped, off))
    assert shapes[0] == shapes[1]
    logged = [e[1] for e in shapes[0][0]]
    assert [b"AUTH", b"(redacted)"] in logged and [b"EXEC"] not in logged
    assert any(len(a) == 32 and a[-1] == b"... (11 more arguments)" for a in logged)


MONITORED = [
    ("SET", "k", "v"), ("GET", "k"), ("CONFIG", "GET", "port"), ("DEBUG", "SLEEP", "0"),
    ("SET", "bin", "a\x00b\xff\"\\\r\n\t\x07\x08"), ("MULTI",), ("INCR", "n"), ("LPUSH", "l", "x"),
    ("EXEC",), ("AUTH", "nope"), ("HELLO", "2", "AUTH", "default", "nope"), ("NOSUCH",),
    ("GET",), ("SELECT", "3"), ("SET", "in3", "1"), ("SELECT", "0"), ("PUBLISH", "ch", "m"),
    ("SLOWLOG", "LEN"), ("CLIENT", "SETNAME", "x"),
    ("EVAL", "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('INCR', 'n')", "1", "lk",
     "lv"),
    ("FUNCTION", "LOAD", "REPLACE", "#!lua name=mon\nredis.register_function('f', "
     "function(keys, args) return redis.call('GET', keys[1]) end)"),
    ("FCALL", "f", "1", "lk"), ("ECHO", "done"),
]

_LINE = re.compile(rb"^\+(\d+)\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)$")


def monitor_lines(port: int, commands: list[tuple[str, ...]]) -> list[tuple[bytes, bytes, bytes]]:
    with RawClient(port) as mon, RawClient(port) as c:
        assert mon.call("MONITOR") == b"+OK\r\n"
        for argv in commands:
            c.call(*argv)
        lines = []
        for _ in range(200):
            raw = mon.read_reply()
            m = _LINE.match(raw.rstrip(b"\r\n"))
            assert m, raw
            where = m.group(4).rsplit(b":", 1)[0]
            lines.append((m.group(3), where, m.group(5)))
            if m.group(5) == b'"ECHO" "done"':
                return lines
        raise AssertionError("no ECHO done line")


def test_monitor_lines_as_redis(pyrepl_server, redis_server) -> None:
    ours = monitor_lines(pyrepl_server.port, MONITORED)
    theirs = monitor_lines(redis_server.port, MONITORED)
    assert ours == theirs
    assert any(x[2].startswith(b'"SET" "bin" "a\\x00b\\x') and x[2].endswith(
        b'\\"\\\\\\r\\n\\t\\a\\b"') for x in ours), ours
    assert not any(b"CONFIG" in x[2] or b"SLOWLOG" in x[2] for x in ours)
    assert (b"0", b"lua", b'"SET" "lk" "lv"') in ours   # a script's commands as [db lua]


def test_monitor_on_replicas_shows_the_master_stream() -> None:
    master = start_redis()
    replicas = []
    try:
        replicas = [start_pyrepl("--replicaof", "127.0.0.1", str(master.port)),
                    start_redis("--replicaof", "127.0.0.1", str(master.port))]
        m = redis.Redis(port=master.port)
        for r in replicas:
            wait_in_sync(m, redis.Redis(port=r.port))
        seen = []
        mons = [RawClient(r.port) for r in replicas]
        try:
            for mon in mons:
                assert mon.call("MONITOR") == b"+OK\r\n"
            m.set("a", "1")
            m.rpush("l", "x", "y")
            m.execute_command("SELECT", "2")   # (the pool's connection: db 2 from now on)
            pipe = m.pipeline(transaction=True)
            pipe.incr("n")
            pipe.delete("a")
            pipe.execute()
            m.echo("end")                      # not propagated: the marker is the next write
            m.set("end", "1")
            for mon in mons:
                lines = []
                while True:
                    raw = mon.read_reply().rstrip(b"\r\n")
                    mm = _LINE.match(raw)
                    assert mm, raw
                    if mm.group(5).startswith(b'"PING"') or \
                            mm.group(5).startswith(b'"REPLCONF"'):
                        continue
                    lines.append((mm.group(3), mm.group(4).rsplit(b":", 1)[0], mm.group(5)))
                    if mm.group(5) == b'"set" "end" "1"' or mm.group(5) == b'"SET" "end" "1"':
                        break
                seen.append(lines)
        finally:
            for mon in mons:
                mon.close()
        assert seen[0] == seen[1]
        assert (b"0", b"127.0.0.1", b'"set" "a" "1"') in seen[0] or \
            (b"0", b"127.0.0.1", b'"SET" "a" "1"') in seen[0]
    finally:
        for r in replicas:
            r.stop()
        master.stop()


# -- LATENCY, MEMORY, LOLWUT, MODULE, COMMAND LIST ---------------------------------------------

# (on conftest's ``servers``: DEBUG enabled, so DEBUG SLEEP makes a latency spike)

def test_latency_monitor_as_redis(servers) -> None:
    seen = []
    for port in servers:
        with RawClient(port) as c:
            row = [c.call("LATENCY", "LATEST"), c.call("LATENCY", "HISTORY", "command"),
                   c.call("LATENCY", "RESET"), c.call("LATENCY", "DOCTOR"),
                   c.call("LATENCY", "GRAPH", "command"), c.call("LATENCY", "HELP"),
                   c.call("LATENCY", "NOPE"), c.call("LATENCY", "HISTORY"),
                   c.call("LATENCY", "LATEST", "x")]
            c.call("CONFIG", "SET", "latency-monitor-threshold", "20")
            row.append(c.call("LATENCY", "DOCTOR"))
            c.call("DEBUG", "SLEEP", "0.05")
            latest = parse_reply(c.call("LATENCY", "LATEST"))
            assert [e[0] for e in latest] == [b"command"] and 50 <= latest[0][2] < 1000
            history = parse_reply(c.call("LATENCY", "HISTORY", "command"))
            assert len(history) == 1 and history[0][1] == latest[0][2]
            assert parse_reply(c.call("LATENCY", "DOCTOR")).startswith(
                b"Dave, I have observed latency spikes")
            row += [c.call("LATENCY", "RESET", "command", "nope"), c.call("LATENCY", "LATEST")]
            c.call("CONFIG", "SET", "latency-monitor-threshold", "0")
            c.call("SET", "h", "1")
            hist = parse_reply(c.call("LATENCY", "HISTOGRAM", "set", "nosuch"))
            assert hist[0] == b"set" and hist[1][0::2] == [b"calls", b"histogram_usec"]
            cdf = hist[1][3]
            assert cdf[1::2] == sorted(cdf[1::2]) and cdf[-1] == hist[1][1]
            seen.append(row)
    assert seen[0] == seen[1]


def test_memory_lolwut_module_as_redis(servers) -> None:
    seen = []
    for port in servers:
        with RawClient(port) as c:
            c.call("SET", "foo", "bar")
            usage = parse_reply(c.call("MEMORY", "USAGE", "foo"))
            assert isinstance(usage, int) and usage > 0
            stats = parse_reply(c.call("MEMORY", "STATS"))
            seen.append([
                c.call("MEMORY", "USAGE", "nokey"), c.call("MEMORY", "USAGE", "foo", "SAMPLES"),
                c.call("MEMORY", "USAGE", "foo", "SAMPLES", "x"),
                c.call("MEMORY", "USAGE", "foo", "FOO", "1"), c.call("MEMORY", "HELP"),
                c.call("MEMORY", "PURGE"), c.call("MEMORY", "NOPE"),
                [k for k in stats[0::2]],
                c.call("LOLWUT"), c.call("LOLWUT", "5", "6"), c.call("LOLWUT", "VERSION", "x"),
                c.call("MODULE", "LIST"), c.call("MODULE", "HELP"),
                c.call("MODULE", "LOAD", "/no/such.so"),
            ])
            assert isinstance(parse_reply(c.call("MEMORY", "DOCTOR")), bytes)
            assert isinstance(parse_reply(c.call("MEMORY", "MALLOC-STATS")), bytes)
    assert seen[0] == seen[1]


def test_command_list_as_redis(servers) -> None:
    lists = []
    for port in servers:
        with RawClient(port) as c:
            lists.append({
                "all": set(parse_reply(c.call("COMMAND", "LIST"))),
                "list": set(parse_reply(c.call("COMMAND", "LIST", "FILTERBY", "ACLCAT",
                                               "list"))),
                "l*": set(parse_reply(c.call("COMMAND", "LIST", "FILTERBY", "PATTERN", "L*"))),
                "cfg": set(parse_reply(c.call("COMMAND", "LIST", "FILTERBY", "PATTERN",
                                              "config|*"))),
                "module": c.call("COMMAND", "LIST", "FILTERBY", "MODULE", "x"),
                "errors": [c.call("COMMAND", "LIST", "FILTERBY", "ACLCAT", "list", "FILTERBY",
                                  "PATTERN", "l*"), c.call("COMMAND", "LIST", "FILTERBY", "X",
                                                           "y"), c.call("COMMAND", "LIST", "X")],
            })
    ours, theirs = lists
    common = ours["all"] & theirs["all"]       # (pyrepl also has some Redis 7.2 / 8 commands)
    assert len(ours["all"]) > 300 and len(common) > 290
    for k in ("list", "l*", "cfg"):
        assert ours[k] == theirs[k] & common, k
    assert ours["module"] == theirs["module"] and ours["errors"] == theirs["errors"]


def test_debug_error_help_and_client_kill_user_as_redis(servers) -> None:
    seen = []
    for port in servers:
        with RawClient(port) as c, RawClient(port) as victim:
            victim.call("CLIENT", "SETNAME", "victim")
            seen.append([
                c.call("DEBUG", "ERROR", "LOADING fake\r\nmessage"),
                c.call("DEBUG", "ERROR", "WRONGPASS"), c.call("DEBUG", "ERROR"),
                c.call("CLIENT", "KILL", "USER", "nosuch"),
                c.call("CLIENT", "KILL", "USER", "default", "SKIPME", "yes"),
            ])
            help_lines = parse_reply(c.call("DEBUG", "HELP"))
            assert b"ERROR <string>" in help_lines
    assert seen[0] == seen[1]


def test_client_list_fields_of_the_caller_as_redis(servers) -> None:
    """CLIENT LIST and CLIENT INFO show the caller with its running command still in its query
    buffer (qbuf, argv-mem), as Redis's introspection.tcl expects them; the fields that are
    allocator or timing figures are left out."""
    seen = []
    keep = ("flags", "db", "sub", "psub", "ssub", "multi", "qbuf", "argv-mem", "multi-mem",
            "obl", "oll", "omem", "events", "cmd", "user", "redir", "resp")
    for port in servers:
        with RawClient(port) as c:
            c.call("SELECT", "9")
            got = []
            for cmd in (("CLIENT", "LIST"), ("CLIENT", "INFO"), ("CLIENT", "LIST", "ID", "1")):
                reply = c.call(*cmd)
                line = reply.split(b"\r\n")[1].decode().strip() if reply.startswith(b"$") else ""
                fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
                got.append({k: fields.get(k) for k in keep})
            seen.append(got[:2])
    assert seen[0] == seen[1]
    assert seen[0][0]["qbuf"] == "26" and seen[0][1]["qbuf"] == "26"


def test_latency_histogram_counts_every_call_and_takes_subcommands(servers) -> None:
    """LATENCY HISTOGRAM's ``calls`` is every call (pyrepl times a fast command one call in 16:
    the others share the timed ones' distribution), CONFIG RESETSTAT counts itself, and a
    ``parent|sub`` name or a parent's name selects subcommands, on both servers."""
    seen = []
    for port in servers:
        with RawClient(port) as c:
            c.call("CONFIG", "RESETSTAT")
            for i in range(40):
                c.call("SET", f"k{i}", "v")
            c.call("CLIENT", "ID")
            c.call("CLIENT", "GETNAME")
            hist = dict(zip(*[iter(parse_reply(c.call("LATENCY", "HISTOGRAM")))] * 2,
                            strict=True))
            sub = parse_reply(c.call("LATENCY", "HISTOGRAM", "client"))
            one = parse_reply(c.call("LATENCY", "HISTOGRAM", "client|id", "nosuch|x"))
            for h in hist.values():
                cdf = h[3]
                assert cdf[1::2] == sorted(cdf[1::2]) and cdf[-1] == h[1]
            seen.append((sorted(hist), hist[b"set"][1], hist[b"config|resetstat"][1],
                         sorted(sub[0::2]), one[0::2], one[1][1]))
    assert seen[0] == seen[1]
    assert seen[0][1:3] == (40, 1)


def test_reset_ends_monitor_and_flushall_with_save_points_leaves_nothing_unsaved(
        servers) -> None:
    """RESET on a MONITOR client answers +RESET (not a line for itself) and the client is no
    longer a monitor; FLUSHALL with save points saves, so rdb_changes_since_last_save is 0."""
    seen = []
    for port in servers:
        with RawClient(port) as mon, RawClient(port) as c:
            assert mon.call("MONITOR") == b"+OK\r\n"
            assert mon.call("RESET") == b"+RESET\r\n"
            c.call("SET", "after", "1")
            assert mon.call("PING") == b"+PONG\r\n"    # (no monitor line came before it)
            flags = re.search(rb"flags=(\S+)", c.call("CLIENT", "LIST")).group(1)  # type: ignore[union-attr]
            c.call("CONFIG", "SET", "save", "3600 1 300 100 60 10000")
            c.call("SET", "key", "value")
            c.call("FLUSHALL")
            info = parse_reply(c.call("INFO", "persistence")).decode()
            seen.append((flags, re.search(r"rdb_changes_since_last_save:(\d+)", info).group(1)))  # type: ignore[union-attr]
            c.call("CONFIG", "SET", "save", "")
    assert seen[0] == seen[1] == (b"N", "0"), seen
