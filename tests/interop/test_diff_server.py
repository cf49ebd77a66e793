"""Connection, transaction and server commands against a real redis-server 7.0.15: the same
bytes where Redis's answer is deterministic, the same shape and field names elsewhere."""

from __future__ import annotations

import pytest

from pyrepl.core.info import BEYOND_REDIS_7
from tests.support.differential import Pair
from tests.support.procs import free_port
from tests.support.resp import RawClient, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

EXACT: list[tuple[str, ...]] = [
    ("PING",), ("PING", "hello"), ("PING", "a", "b"), ("ECHO",), ("ECHO", "x"),
    ("NOSUCHCMD",), ("NOSUCHCMD", "a", "b b", "c\r\nd"), ("GET",), ("SET", "k"),
    ("SELECT", "x"), ("SELECT", "-1"), ("SELECT", "16"), ("SELECT", "99999999999"),
    ("SELECT", "1"), ("SELECT", "0"), ("DBSIZE",), ("DBSIZE", "x"),
    ("FLUSHDB", "bogus"), ("FLUSHALL", "ASYNC"), ("FLUSHDB", "SYNC"),
    ("AUTH", "x"), ("AUTH", "a", "b"), ("AUTH", "a", "b", "c"),
    ("HELLO", "1"), ("HELLO", "4"), ("HELLO", "x"), ("HELLO", "2", "BOGUS"),
    ("HELLO", "3", "AUTH", "default"), ("HELLO", "2", "AUTH", "nouser", "pw"),
    ("CLIENT", "SETNAME", "has space"), ("CLIENT", "SETNAME", "ok-name"), ("CLIENT", "GETNAME"),
    ("CLIENT", "SETNAME", ""), ("CLIENT", "GETNAME"), ("CLIENT", "NOSUCH"), ("CLIENT",),
    ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "x"),
    ("CLIENT", "KILL", "TYPE", "nonsense"), ("CLIENT", "LIST", "TYPE", "bogus"),
    ("CONFIG",), ("CONFIG", "GET"), ("CONFIG", "NOSUCH"), ("CONFIG", "GET", "nosuchparam"),
    ("CONFIG", "SET", "nosuchparam", "1"), ("CONFIG", "SET", "hz", "abc"),
    ("CONFIG", "SET", "maxclients"), ("CONFIG", "GET", "maxmemory-policy"),
    ("CONFIG", "GET", "databases"), ("CONFIG", "SET", "databases", "3"),
    ("CONFIG", "GET", "repl-backlog-size"), ("CONFIG", "GET", "save"),
    ("CONFIG", "GET", "client-output-buffer-limit"),
    ("MULTI",), ("PING",), ("ECHO", "q"), ("EXEC",),
    ("EXEC",), ("DISCARD",), ("MULTI",), ("MULTI",), ("DISCARD",),
    ("MULTI",), ("NOSUCHCMD",), ("PING",), ("EXEC",),
    ("MULTI",), ("GET",), ("EXEC",),
    ("MULTI",), ("WATCH", "k"), ("DISCARD",),
    ("WATCH",), ("UNWATCH",), ("SWAPDB", "0"), ("SWAPDB", "0", "99"), ("SWAPDB", "a", "0"),
    ("SWAPDB", "0", "1"), ("DEBUG", "NOSUCH"), ("COMMAND", "INFO", "nosuchcommand"),
    ("COMMAND", "GETKEYS", "SET", "a", "b"), ("COMMAND", "GETKEYS", "PING"),
    ("COMMAND", "GETKEYS", "NOSUCH", "a"), ("COMMAND", "GETKEYS", "GET"),
    ("COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"), ("TIME", "x"),
    ("SHUTDOWN", "BOGUS"), ("BGSAVE", "x"), ("LASTSAVE", "x"),
    # cluster support disabled: known commands answering Redis's standalone error
    ("CLUSTER", "INFO"), ("CLUSTER", "KEYSLOT", "k"), ("CLUSTER", "KEYSLOT"), ("CLUSTER",),
    ("CLUSTER", "NOSUCH"), ("CLUSTER", "HELP"), ("READONLY",), ("READWRITE",), ("ASKING",),
    ("READONLY", "x"), ("EVAL", "return redis.pcall('cluster', 'info')", "0"),
    ("CLIENT", "KILL", "ID", "str"), ("CLIENT", "KILL", "ID", "-1"), ("CLIENT", "KILL", "ID", "0"),
    ("CLIENT", "KILL", "ID", "10", "wrong_arg"), ("CLIENT", "KILL", "TYPE", "wrong_type"),
    ("CLIENT", "KILL", "SKIPME", "yes_or_no"), ("CLIENT", "KILL", "ID", "999999"),
    ("COMMAND", "GETKEYS", "EVAL", "return 1", "0"), ("COMMAND", "GETKEYS", "FCALL", "f", "0"),
    ("COMMAND", "GETKEYS", "EVAL", "return 1", "x"), ("COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "0"),
    ("COMMAND", "INFO", "readonly", "asking", "cluster|info", "cluster|setslot"),
]


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(pyrepl_server, redis_server, request):
    # Redis's DEBUG is refused unless enable-debug-command is set; only compare what both allow
    p = Pair(pyrepl_server.port, redis_server.port, request.param)
    p.flushall()
    yield p
    p.both("DISCARD")
    p.close()


def test_exact_replies(pair) -> None:
    for argv in EXACT:
        if argv[0] == "DEBUG":
            continue
        pair.check(*argv)


def test_watch_multi_exec_sequences(pair) -> None:
    other_a = RawClient(pair.a.sock.getpeername()[1])
    other_b = RawClient(pair.b.sock.getpeername()[1])
    try:
        for seq, touch in [
            ([("WATCH", "w"), ("MULTI",), ("PING",), ("EXEC",)], ("SWAPDB", "0", "0")),
            ([("WATCH", "w"), ("MULTI",), ("PING",), ("EXEC",)], ("FLUSHALL",)),
            ([("WATCH", "w", "w2"), ("UNWATCH",), ("MULTI",), ("PING",), ("EXEC",)],
             ("FLUSHALL",)),
        ]:
            pair.check("SWAPDB", "0", "1")
            pair.check(*seq[0])
            for o in (other_a, other_b):
                o.call(*touch)
            for argv in seq[1:]:
                pair.check(*argv)
    finally:
        other_a.close()
        other_b.close()


def test_hello_maps_have_the_same_keys_and_values_but_id(pair) -> None:
    a, b = pair.both("HELLO", str(pair.proto))
    pa, pb = parse_reply(a), parse_reply(b)
    if isinstance(pa, list):
        pa, pb = dict(zip(pa[::2], pa[1::2], strict=True)), dict(zip(pb[::2], pb[1::2], strict=True))
    assert set(pa) == set(pb)
    for k in pa:
        if k not in (b"id", b"version"):
            assert pa[k] == pb[k], k


def test_info_sections_and_field_names(pair) -> None:
    a, b = pair.both("INFO", "everything")
    ta, tb = parse_reply(a).decode(), parse_reply(b).decode()
    if pair.proto == 3:  # verbatim strings carry a "txt:" format prefix
        assert ta.startswith("txt:") and tb.startswith("txt:")
        ta, tb = ta[4:], tb[4:]
    sec = lambda t: [line for line in t.splitlines() if line.startswith("# ")]  # noqa: E731
    # pyrepl reports the sections Redis reports, in Redis's order
    assert [s for s in sec(tb) if s in sec(ta)] == sec(ta)
    assert {"# Server", "# Clients", "# Memory", "# Persistence", "# Stats", "# Replication",
            "# CPU", "# Cluster", "# Keyspace"} <= set(sec(ta))
    # per-command and per-error lines depend on what each server has run: left out here
    # (tests/interop/test_diff_info_stats.py compares them on servers given the same commands)
    dynamic = ("cmdstat_", "latency_percentiles_usec_", "errorstat_")
    fields_a = {line.split(":")[0] for line in ta.splitlines()
                if ":" in line and not line.startswith(dynamic)}
    fields_b = {line.split(":")[0] for line in tb.splitlines()
                if ":" in line and not line.startswith(dynamic)}
    ours_only = fields_a - fields_b
    assert ours_only <= BEYOND_REDIS_7, ours_only
    for must in ("redis_version", "tcp_port", "connected_clients", "used_memory",
                 "rdb_changes_since_last_save", "total_commands_processed", "role",
                 "master_replid", "master_repl_offset", "repl_backlog_size", "cluster_enabled"):
        assert must in fields_a


@pytest.mark.parametrize("name", ["get", "set", "lpush", "hset", "zadd", "mset", "del",
                                  "incr", "expire", "sadd", "zrange", "hgetall", "ping",
                                  "watch", "exec", "select", "rename"])
def test_command_info_matches_redis(pyrepl_server, redis_server, name: str) -> None:
    with RawClient(pyrepl_server.port) as a, RawClient(redis_server.port) as b:
        ia = parse_reply(a.call("COMMAND", "INFO", name))[0]
        ib = parse_reply(b.call("COMMAND", "INFO", name))[0]
    # name, arity, flags, first key, last key, step
    assert ia[0] == ib[0] and ia[1] == ib[1], (ia[:2], ib[:2])
    assert set(ia[2]) == set(ib[2]), (name, ia[2], ib[2])
    assert ia[3:6] == ib[3:6], (name, ia[3:6], ib[3:6])


def test_replicaof_inside_a_transaction_and_exec_checked_with_its_queue(pair) -> None:
    """Redis's processCommand checks EXEC as a write when its queue holds one (READONLY,
    NOREPLICAS, MASTERDOWN), and nothing inside: a REPLICAOF queued in the transaction does not
    refuse the writes after it (multi.tcl, "MULTI / EXEC with REPLICAOF"); a transaction queued
    on a master that became a replica before EXEC is aborted whole, with the reason."""
    nowhere = str(free_port())      # (no master there: the link stays down)
    other_a = RawClient(pair.a.sock.getpeername()[1])
    other_b = RawClient(pair.b.sock.getpeername()[1])
    try:
        pair.check("SET", "foo", "bar")
        pair.check("MULTI")
        pair.check("SET", "foo2", "bar")
        pair.check("REPLICAOF", "localhost", nowhere)
        pair.check("SET", "foo3", "bar")
        pair.check("EXEC")
        pair.check("SET", "foo4", "bar")        # READONLY
        pair.check("MGET", "foo2", "foo3", "foo4")
        pair.check("REPLICAOF", "NO", "ONE")
        # queued on a master, EXEC on a replica: EXECABORT ... because of: READONLY ...
        pair.check("MULTI")
        pair.check("INCR", "n")
        pair.check("GET", "n")
        for o in (other_a, other_b):
            o.call("REPLICAOF", "localhost", nowhere)
        pair.check("EXEC")
        # a read-only transaction on the replica runs
        pair.check("MULTI")
        pair.check("GET", "foo")
        pair.check("EXEC")
        pair.check("MULTI")
        pair.check("SET", "x", "1")            # READONLY while queueing: EXECABORT
        pair.check("EXEC")
    finally:
        for o in (other_a, other_b):
            o.call("REPLICAOF", "NO", "ONE")
        other_a.close()
        other_b.close()
