"""The AOF rewrite's command form (pyrepl.aof.commands): a dataset of every type, written as
commands and replayed on a fresh core, comes back the same; batches, orders and the forms of
streams, field TTLs and expired keys are Redis's. (Byte-for-byte against Redis 7.0.15 itself:
tests/interop/test_aof_commands_redis.py.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.aof.commands import AOF_REWRITE_ITEMS_PER_CMD, CHUNK_SIZE, write_dataset
from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.digest import dataset_digest
from pyrepl.keyspace.hashttl import HashEx
from pyrepl.keyspace.lphash import ListpackHash
from pyrepl.keyspace.stream import Stream
from pyrepl.keyspace.strtab import StrSet
from pyrepl.keyspace.zset import ZSETS
from pyrepl.scripting.functions import rdb_libraries
from tests.support.resp import encode_command, parse_command

T0 = 1_700_000_000_000
T1 = T0 + 1_000                 # when the dataset is written and replayed
FUTURE = 4_102_444_800_000      # 2100-01-01
LIB = b"#!lua name=aoflib\nredis.register_function('aof_f', function(keys, args) return 1 end)"


class Node:
    """A real ServerCore at a fake clock with one client whose commands must all succeed."""

    def __init__(self, now: int = T0) -> None:
        cfg = Config.load(None, [("save", [""]), ("enable-debug-command", ["yes"])])
        self.core = ServerCore(cfg, now_ms=now)
        self.client = self.core.connection_made()

    def call(self, *args: bytes | str | int) -> bytes:
        self.client.receive_data(encode_command(*args))
        return self.client.data_to_send()

    def run(self, *args: bytes | str | int) -> bytes:
        reply = self.call(*args)
        assert not reply.startswith(b"-"), (args[:4], reply)
        return reply

    def dump(self, **kw: Any) -> bytes:
        out: list[bytes] = []
        write_dataset(out.append, self.core.dbs, self.core.now_ms, rdb_libraries(self.core),
                      **kw)
        return b"".join(out)


def commands(aof: bytes) -> list[list[bytes]]:
    out = []
    while aof:
        parsed = parse_command(aof)
        assert parsed is not None, aof[:80]
        argv, used = parsed
        out.append(argv)
        aof = aof[used:]
    return out


def unordered_sets(cmds: list[list[bytes]]) -> list[list[bytes]]:
    """The SADDs of each key merged into one whose members are sorted."""
    out: list[list[bytes]] = []
    for c in cmds:
        if c[0] == b"SADD" and out and out[-1][:2] == c[:2]:
            out[-1] = [*c[:2], *sorted(out[-1][2:] + c[2:])]
        else:
            out.append([*c[:2], *sorted(c[2:])] if c[0] == b"SADD" else c)
    return out


def replay(aof: bytes, now: int = T1) -> Node:
    node = Node(now)
    for argv in commands(aof):
        node.run(*argv)
    node.run("SELECT", "0")
    return node


def live_view(dbs: list[Any], now: int) -> list[SimpleNamespace]:
    """The dataset as a reader sees it at ``now``: no expired key, no expired hash field."""
    out = []
    for db in dbs:
        data, expires = {}, {}
        for k, v in db.data.items():
            when = db.expires.get(k)
            if when is not None and now > when:
                continue
            if type(v) is HashEx and v.ttl:
                h = HashEx({f: x for f, x in v.items() if v.ttl.get(f, now) >= now})
                h.ttl = {f: w for f, w in v.ttl.items() if f in h}
                if not h:
                    continue
                v = h
            data[k] = v
            if when is not None:
                expires[k] = when
        out.append(SimpleNamespace(data=data, expires=expires))
    return out


def plain(v: Any) -> Any:
    """A comparable form of a value (order included where the type has one)."""
    if type(v) in ZSETS:
        return ("zset", list(v.items()))
    if type(v) is HashEx and v.ttl:
        return ("hashex", list(v.items()), dict(v.ttl))
    if isinstance(v, dict) or type(v) is ListpackHash:  # (a HashEx without TTLs: a plain hash)
        return ("hash", list(v.items()))
    if type(v) is set or type(v) is StrSet:
        return ("set", set(v))
    if type(v) is Stream:
        return ("stream", list(v.entries()), v.last_id, v.entries_added, v.max_deleted)
    if type(v) is bytes:
        return v
    return ("list", list(v))


def build(n: Node) -> None:
    """Every type, at T0 the keys and fields that will have expired by T1, the rest at T1."""
    n.run("SET", "gone", "x", "PX", "500")                   # expired by T1: not written
    n.run("SELECT", "5")
    n.run("SET", "gone5", "x", "PX", "500")                  # db 5 holds only an expired key
    n.run("SELECT", "0")
    n.run("HSET", "hx", "a", "1", "b", "2", "dead", "3", "plain", "4")
    n.run("HPEXPIREAT", "hx", str(T0 + 500), "FIELDS", "1", "dead")
    n.run("HPEXPIREAT", "hx", str(FUTURE), "FIELDS", "1", "b")
    n.run("HPEXPIREAT", "hx", str(FUTURE - 5), "FIELDS", "1", "a")
    n.run("HSET", "hxdead", "f", "v")
    n.run("HPEXPIREAT", "hxdead", str(T0 + 500), "FIELDS", "1", "f")   # all fields expired
    n.run("HSET", "hxold", "f", "v", "g", "w")
    n.run("HPEXPIREAT", "hxold", str(T0 + 500), "FIELDS", "1", "f")    # only an expired TTL
    n.core.now_ms = T1

    n.run("FUNCTION", "LOAD", LIB)
    # strings
    n.run("SET", "str", "hello")
    n.run("SET", "int", "12345")
    n.run("SET", "empty", "")
    n.run("SET", b"bin\r\n\x00key", b"\x00\xff\r\n")
    n.run("SET", "big", "x" * (3 * CHUNK_SIZE))               # several chunks
    n.run("PFADD", "hll", "a", "b", "c")
    # lists
    n.run("RPUSH", "biglist", *[str(i) if i % 3 else f"e{i}" for i in range(200)])
    n.run("RPUSH", "list", "a", "-7", "")
    # sets
    n.run("SADD", "intset", "10", "-1", "3", "9223372036854775807", "-9223372036854775808")
    n.run("SADD", "one", "member")
    n.run("SADD", "bigset", *[f"m{i}" for i in range(1000)])
    n.run("SADD", "bigints", *[str(i * 7) for i in range(600)])
    n.run("SADD", "notint", "1", "01", "-0", "+2")
    # sorted sets
    n.run("ZADD", "zset", "1.5", "a", "-inf", "b", "+inf", "c", "0.1", "d", "-2", "e",
          "1e300", "f", "5e-324", "g", "3", "h")
    n.run("ZADD", "bigzset", *[x for i in range(300) for x in (str(i / 7), f"z{i}")])
    # hashes
    n.run("HSET", "hash", "f1", "v1", "n", "42", "f3", "x")
    n.run("HSET", "bighash", *[x for i in range(200) for x in (f"f{i}", f"v{i}")])
    # streams: many entries (several nodes), deletions, groups, pending, idle consumers
    for i in range(1, 251):
        n.run("XADD", "stream", f"{i}-{i % 3}", "f", str(i), "g", "x" * (i % 5))
    n.run("XDEL", "stream", "1-1", "7-1", "120-0")
    n.run("XGROUP", "CREATE", "stream", "g1", "0")
    n.run("XGROUP", "CREATE", "stream", "g0", "100-1")          # entries-read unknown
    n.run("XGROUP", "CREATE", "stream", "g2", "$")
    n.run("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "stream", ">")
    n.run("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "stream", ">")
    n.run("XACK", "stream", "g1", "3-0")
    n.run("XCLAIM", "stream", "g1", "bob", "0", "2-2", "TIME", str(T0 - 5), "RETRYCOUNT", "7")
    n.run("XGROUP", "CREATECONSUMER", "stream", "g1", "carol")
    n.run("XREADGROUP", "GROUP", "g0", "dave", "COUNT", "2", "STREAMS", "stream", ">")
    n.run("XGROUP", "CREATECONSUMER", "stream", "g2", "erin")
    n.run("PEXPIREAT", "stream", str(FUTURE))
    # an empty stream (all entries deleted) with groups, and one that never had entries
    n.run("XADD", "estream", "5-5", "x", "y")
    n.run("XADD", "estream", "6-0", "x", "z")
    n.run("XGROUP", "CREATE", "estream", "g", "0")
    n.run("XDEL", "estream", "5-5", "6-0")
    n.run("XGROUP", "CREATECONSUMER", "estream", "g", "idle")
    n.run("XGROUP", "CREATE", "mk", "g", "$", "MKSTREAM")
    n.run("XADD", "trimmed", "MAXLEN", "2", "*", "a", "1")
    for _ in range(5):
        n.run("XADD", "trimmed", "MAXLEN", "2", "*", "a", "2")
    # TTLs
    n.run("SET", "ttl", "v", "PXAT", str(FUTURE))
    n.run("RPUSH", "ttllist", "a")
    n.run("PEXPIRE", "ttllist", "100000")
    # other dbs
    n.run("SELECT", "3")
    n.run("SET", "k3", "v3")
    n.run("ZADD", "z3", "1", "m")
    n.run("SELECT", "15")
    n.run("HSET", "h15", "f", "v")
    n.run("SELECT", "0")


@pytest.fixture(scope="module")
def original() -> Node:
    n = Node()
    build(n)
    return n


def test_replayed_dataset_equals_the_original(original: Node) -> None:
    aof = original.dump()
    copy = replay(aof)
    want = live_view(original.core.dbs, T1)
    got = live_view(copy.core.dbs, T1)
    assert dataset_digest(want) == dataset_digest(got)
    assert copy.call("DEBUG", "DIGEST") == b"+" + dataset_digest(want).encode() + b"\r\n"
    for dbid, (w, g) in enumerate(zip(want, got, strict=True)):
        assert list(w.data) == list(g.data), dbid
        assert w.expires == g.expires, dbid
        for k, v in w.data.items():
            assert plain(v) == plain(g.data[k]), (dbid, k)
    # Consumer groups: names, last IDs, entries-read, lag, PELs (delivery times and counts),
    # consumers and their seen-times (both cores did their stream work at T1).
    for key in ("stream", "estream", "mk", "trimmed"):
        assert copy.call("XINFO", "STREAM", key, "FULL", "COUNT", "0") == \
            original.call("XINFO", "STREAM", key, "FULL", "COUNT", "0"), key
        assert copy.call("XINFO", "GROUPS", key) == original.call("XINFO", "GROUPS", key), key
    assert copy.call("FUNCTION", "LIST", "WITHCODE") == \
        original.call("FUNCTION", "LIST", "WITHCODE")
    # A second rewrite of the copy is the same file, but for the order of the members of the
    # sets that are not intsets (a hash table's order: Python's set, as Redis's dict, depends
    # on the history of insertions).
    assert unordered_sets(commands(copy.dump())) == unordered_sets(commands(aof))


def test_layout_of_the_commands(original: Node) -> None:
    cmds = commands(original.dump())
    assert cmds[0] == [b"FUNCTION", b"LOAD", LIB]
    assert cmds[1] == [b"SELECT", b"0"]
    assert [c for c in cmds if c[0] == b"SELECT"] == [[b"SELECT", x] for x in (b"0", b"3", b"15")]
    keys = {c[1] for c in cmds if c[0] != b"XGROUP"}
    assert b"gone" not in keys and b"gone5" not in keys and b"hxdead" not in keys
    # Variadic commands hold at most 64 elements, and their batches are filled in order.
    rpush = [c for c in cmds if c[:2] == [b"RPUSH", b"biglist"]]
    assert [len(c) - 2 for c in rpush] == [64, 64, 64, 8]
    assert [e for c in rpush for e in c[2:]] == list(original.core.dbs[0].data[b"biglist"])
    for name in (b"SADD", b"ZADD", b"HMSET"):
        sizes = [len(c) - 2 for c in cmds if c[0] == name]
        per = 1 if name == b"SADD" else 2
        assert max(sizes) == AOF_REWRITE_ITEMS_PER_CMD * per
    assert [len(c) - 2 for c in cmds if c[:2] == [b"SADD", b"bigset"]] == \
        [64] * 15 + [1000 - 15 * 64]
    # An intset is written in numeric order; a set that is not all integers as it iterates.
    assert [c for c in cmds if c[1] == b"intset"] == [[
        b"SADD", b"intset", b"-9223372036854775808", b"-1", b"3", b"10",
        b"9223372036854775807"]]
    bigints = [e for c in cmds if c[1] == b"bigints" for e in c[2:]]
    assert bigints == [b"%d" % (i * 7) for i in range(600)]
    # Scores as "%.17g", ascending by (score, member).
    assert [c for c in cmds if c[1] == b"zset"] == [[
        b"ZADD", b"zset", b"-inf", b"b", b"-2", b"e", b"4.9406564584124654e-324", b"g",
        b"0.10000000000000001", b"d", b"1.5", b"a", b"3", b"h", b"1.0000000000000001e+300",
        b"f", b"inf", b"c"]]
    # A hash in its own order; with field TTLs one HMSET per field, each TTL after its field
    # (Redis 7.4's form), the expired field left out.
    assert [c for c in cmds if c[1] == b"hash"] == \
        [[b"HMSET", b"hash", b"f1", b"v1", b"n", b"42", b"f3", b"x"]]
    assert [c for c in cmds if c[1] == b"hx"] == [
        [b"HMSET", b"hx", b"a", b"1"],
        [b"HPEXPIREAT", b"hx", b"%d" % (FUTURE - 5), b"FIELDS", b"1", b"a"],
        [b"HMSET", b"hx", b"b", b"2"],
        [b"HPEXPIREAT", b"hx", b"%d" % FUTURE, b"FIELDS", b"1", b"b"],
        [b"HMSET", b"hx", b"plain", b"4"],
    ]
    assert [c for c in cmds if c[1] == b"hxold"] == [[b"HMSET", b"hxold", b"g", b"w"]]
    # TTLs: PEXPIREAT after the key's value.
    i = cmds.index([b"SET", b"ttl", b"v"])
    assert cmds[i + 1] == [b"PEXPIREAT", b"ttl", b"%d" % FUTURE]
    st = [c for c in cmds if c[1] == b"stream" or c[2:3] == [b"stream"]]
    assert st[-1] == [b"PEXPIREAT", b"stream", b"%d" % FUTURE]


def test_stream_forms(original: Node) -> None:
    cmds = commands(original.dump())
    empty = [c for c in cmds if b"estream" in c[1:3]]
    assert empty == [
        [b"XADD", b"estream", b"MAXLEN", b"0", b"0-1", b"x", b"y"],
        [b"XSETID", b"estream", b"6-0", b"ENTRIESADDED", b"2", b"MAXDELETEDID", b"6-0"],
        [b"XGROUP", b"CREATE", b"estream", b"g", b"0-0", b"ENTRIESREAD", b"-1"],
        [b"XGROUP", b"CREATECONSUMER", b"estream", b"g", b"idle"],
    ]
    assert [c for c in cmds if b"mk" in c[1:3]] == [
        [b"XADD", b"mk", b"MAXLEN", b"0", b"0-1", b"x", b"y"],
        [b"XSETID", b"mk", b"0-0", b"ENTRIESADDED", b"0", b"MAXDELETEDID", b"0-0"],
        [b"XGROUP", b"CREATE", b"mk", b"g", b"0-0", b"ENTRIESREAD", b"-1"],
    ]
    st = [c for c in cmds if b"stream" in c[1:3]]
    xadds = [c for c in st if c[0] == b"XADD"]
    assert len(xadds) == 247 and xadds[0] == [b"XADD", b"stream", b"2-2", b"f", b"2", b"g", b"xx"]
    assert [b"XADD", b"stream", b"7-1", b"f", b"7", b"g", b"xx"] not in xadds
    rest = st[len(xadds):]
    assert rest[0] == [b"XSETID", b"stream", b"250-1", b"ENTRIESADDED", b"250",
                       b"MAXDELETEDID", b"120-0"]
    # Groups in name order, each followed by its consumers in name order: XCLAIMs of the
    # pending entries in ID order, or XGROUP CREATECONSUMER for one with none.
    heads = [(c[0], c[1], c[3] if c[0] == b"XGROUP" else c[3]) for c in rest[1:-1]]
    assert heads == [
        (b"XGROUP", b"CREATE", b"g0"),
        (b"XCLAIM", b"stream", b"dave"), (b"XCLAIM", b"stream", b"dave"),
        (b"XGROUP", b"CREATE", b"g1"),
        (b"XCLAIM", b"stream", b"alice"), (b"XCLAIM", b"stream", b"alice"),
        (b"XCLAIM", b"stream", b"alice"),
        (b"XCLAIM", b"stream", b"bob"), (b"XCLAIM", b"stream", b"bob"),
        (b"XCLAIM", b"stream", b"bob"), (b"XCLAIM", b"stream", b"bob"),
        (b"XGROUP", b"CREATECONSUMER", b"g1"),
        (b"XGROUP", b"CREATE", b"g2"),
        (b"XGROUP", b"CREATECONSUMER", b"g2"),
    ]
    assert [b"XGROUP", b"CREATE", b"stream", b"g0", b"102-0", b"ENTRIESREAD", b"-1"] in rest
    assert [b"XCLAIM", b"stream", b"g1", b"bob", b"0", b"2-2", b"TIME", b"%d" % (T0 - 5),
            b"RETRYCOUNT", b"7", b"JUSTID", b"FORCE"] in rest
    assert [b"XCLAIM", b"stream", b"g1", b"alice", b"0", b"4-1", b"TIME", b"%d" % T1,
            b"RETRYCOUNT", b"1", b"JUSTID", b"FORCE"] in rest


def test_pending_entry_of_a_deleted_entry_is_written_and_dropped_on_load() -> None:
    """Redis 7.0 writes the XCLAIM of a pending entry whose entry was deleted; loading it drops
    that entry from the PEL (XCLAIM of a missing entry), and a consumer that had only such
    entries is not created. The same happens here."""
    n = Node(T1)
    n.run("XADD", "s", "1-0", "a", "1")
    n.run("XADD", "s", "2-0", "a", "2")
    n.run("XGROUP", "CREATE", "s", "g", "0")
    n.run("XREADGROUP", "GROUP", "g", "ann", "COUNT", "1", "STREAMS", "s", ">")
    n.run("XREADGROUP", "GROUP", "g", "ben", "COUNT", "1", "STREAMS", "s", ">")
    n.run("XDEL", "s", "1-0")
    aof = n.dump()
    assert [b"XCLAIM", b"s", b"g", b"ann", b"0", b"1-0", b"TIME", b"%d" % T1, b"RETRYCOUNT",
            b"1", b"JUSTID", b"FORCE"] in commands(aof)
    copy = replay(aof)
    assert copy.call("XPENDING", "s", "g") == \
        b"*4\r\n:1\r\n$3\r\n2-0\r\n$3\r\n2-0\r\n*1\r\n*2\r\n$3\r\nben\r\n$1\r\n1\r\n"
    assert b"ann" not in copy.call("XINFO", "CONSUMERS", "s", "g")


def test_hooks_progress_chunks_and_count() -> None:
    n = Node(T1)
    for db in (0, 2):
        n.run("SELECT", str(db))
        for i in range(1500):
            n.run("SET", f"k{i}", "v" * 100)
    hooks: list[int] = []
    reports: list[int] = []
    chunks: list[bytes] = []
    count = write_dataset(chunks.append, n.core.dbs, T1, (),
                          key_hook=lambda: hooks.append(1), progress=reports.append)
    assert count == 3000 and len(hooks) == 3000
    assert reports == [1024, 2048, 3000]
    assert len(chunks) > 1 and all(len(c) < CHUNK_SIZE + 1000 for c in chunks)
    assert len(commands(b"".join(chunks))) == 3002
    # An empty dataset writes nothing at all.
    out: list[bytes] = []
    assert write_dataset(out.append, Node().core.dbs, T1) == 0 and out == []


def test_unknown_value_type_is_refused() -> None:
    db = SimpleNamespace(data={b"k": object()}, expires={})
    with pytest.raises(TypeError, match="cannot rewrite"):
        write_dataset(lambda b: None, [db], T1)
