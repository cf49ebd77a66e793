"""pyrepl.aof.commands against Redis 7.0.15's own rewrite: the same small dataset loaded into a
real redis-server (BGREWRITEAOF with ``aof-use-rdb-preamble no``: its base file) and into a
pyrepl core (write_dataset) gives the same bytes for every key.

Only the order of the keys is Redis's hash table's, so both files are cut into their function
libraries, their SELECTs and one run of commands per key, and those are compared. Nothing else is
normalized: every value is chosen so Redis's order is fixed (a list, an intset, small sorted sets
and hashes held as listpacks, streams), and the one time the file holds (the pending entry's
delivery time) is pinned with XCLAIM ... TIME on both sides.
"""

from __future__ import annotations

import os

import pytest

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.aof.commands import write_dataset
from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.resp.writer import encode_command
from pyrepl.scripting.functions import rdb_libraries
from tests.support.procs import redis_server_path, start_redis
from tests.support.resp import RawClient, info, parse_command
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NOW = 1_700_000_000_000          # pyrepl's (fake) clock
DELIVERED = 1_600_000_000_000    # the pending entry's delivery time, on both sides
FUTURE = 4_102_444_800_000       # 2100-01-01: a TTL that outlives the test
LIB = "#!lua name=aoflib\nredis.register_function('aof_f', function(keys, args) return 1 end)"

DATASET: list[tuple[str, ...]] = [
    ("FUNCTION", "LOAD", LIB),
    ("SET", "str", "hello"),
    ("SET", "num", "12345"),
    ("RPUSH", "list", "a", "-7", "", "3"),
    ("RPUSH", "biglist", *[str(i) if i % 3 else f"e{i}" for i in range(100)]),
    ("SADD", "one", "member"),
    ("SADD", "ints", "10", "-1", "3", "9223372036854775807", "-9223372036854775808"),
    ("ZADD", "zset", "1.5", "a", "-inf", "b", "+inf", "c", "0.1", "d", "-2", "e", "1e300", "f",
     "5e-324", "g"),
    ("HSET", "hash", "field", "value"),
    ("HSET", "hash3", "f1", "v1", "n", "42", "f3", "x"),
    ("XADD", "stream", "1-1", "a", "1"),
    ("XADD", "stream", "1-2", "a", "2", "b", "3"),
    ("XADD", "stream", "2-0", "c", "4"),
    ("XDEL", "stream", "1-2"),
    ("XGROUP", "CREATE", "stream", "grp", "0"),
    ("XGROUP", "CREATE", "stream", "late", "$"),
    ("XREADGROUP", "GROUP", "grp", "alice", "COUNT", "1", "STREAMS", "stream", ">"),
    ("XCLAIM", "stream", "grp", "alice", "0", "1-1", "TIME", str(DELIVERED), "RETRYCOUNT", "3",
     "JUSTID"),
    ("XGROUP", "CREATECONSUMER", "stream", "grp", "bob"),
    ("XADD", "emptystream", "5-5", "x", "y"),
    ("XGROUP", "CREATE", "emptystream", "g", "0"),
    ("XDEL", "emptystream", "5-5"),
    ("XGROUP", "CREATECONSUMER", "emptystream", "g", "idle"),
    ("XGROUP", "CREATE", "mkstream", "g", "$", "MKSTREAM"),
    ("SET", "ttl", "v"),
    ("PEXPIREAT", "ttl", str(FUTURE)),
    ("RPUSH", "ttllist", "x", "y"),
    ("PEXPIREAT", "ttllist", str(FUTURE)),
    ("SELECT", "2"),
    ("SET", "k2", "v2"),
    ("SELECT", "0"),
]


def _key_of(argv: list[bytes]) -> bytes:
    return argv[2] if argv[0].upper() == b"XGROUP" else argv[1]


def split(aof: bytes) -> tuple[list[bytes], list[bytes], dict[tuple[bytes, bytes], bytes]]:
    """(FUNCTION LOADs, SELECTs, {(db, key): the bytes of the key's run of commands})."""
    functions: list[bytes] = []
    selects: list[bytes] = []
    runs: dict[tuple[bytes, bytes], bytes] = {}
    db = b"0"
    last: tuple[bytes, bytes] | None = None
    while aof:
        parsed = parse_command(aof)
        assert parsed is not None, aof[:80]
        argv, used = parsed
        raw, aof = aof[:used], aof[used:]
        name = argv[0].upper()
        if name == b"FUNCTION":
            assert not selects and not runs, "functions come first"
            functions.append(raw)
        elif name == b"SELECT":
            db = argv[1]
            selects.append(raw)
            last = None
        else:
            where = (db, _key_of(argv))
            if where != last:
                assert where not in runs, f"the commands of {where} are not contiguous"
                runs[where] = b""
                last = where
            runs[where] += raw
    return functions, selects, runs


def redis_base_file(tmpdir: str) -> bytes:
    """Load DATASET into a real redis-server, rewrite its AOF, return the base file."""
    srv = start_redis("--appendonly", "yes", "--aof-use-rdb-preamble", "no",
                      "--aof-timestamp-enabled", "no", tmpdir=tmpdir)
    try:
        with RawClient(srv.port) as c:
            for argv in DATASET:
                reply = c.call(*argv)
                assert not reply.startswith(b"-"), (argv[:4], reply)
            # (Redis writes an empty base at start: count the rewrites from here.)
            wait_for(lambda: info(c, "persistence")["aof_rewrite_in_progress"] == "0", 30)
            before = int(info(c, "persistence")["aof_rewrites"])
            assert c.call("BGREWRITEAOF").startswith(b"+")

            def done() -> bool:
                p = info(c, "persistence")
                return (int(p["aof_rewrites"]) > before and p["aof_rewrite_in_progress"] == "0"
                        and p["aof_rewrite_scheduled"] == "0")

            wait_for(done, 30)
            assert info(c, "persistence")["aof_last_bgrewrite_status"] == "ok"
        adir = os.path.join(tmpdir, "appendonlydir")
        with open(os.path.join(adir, "appendonly.aof.manifest")) as f:
            bases = [line.split()[1] for line in f if line.split()[-1] == "b"]
        assert len(bases) == 1 and bases[0].endswith(".base.aof"), bases
        with open(os.path.join(adir, bases[0]), "rb") as f:
            return f.read()
    finally:
        srv.stop()


def pyrepl_dataset_commands() -> bytes:
    core = ServerCore(Config.load(None, [("save", [""])]), now_ms=NOW)
    client = core.connection_made()
    for argv in DATASET:
        client.receive_data(encode_command([a.encode() for a in argv]))
        reply = client.data_to_send()
        assert not reply.startswith(b"-"), (argv[:4], reply)
    out: list[bytes] = []
    write_dataset(out.append, core.dbs, core.now_ms, rdb_libraries(core))
    return b"".join(out)


def test_rewrite_is_byte_for_byte_redis_7_0(tmp_path) -> None:  # noqa: ANN001
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed")
    theirs = redis_base_file(str(tmp_path))
    ours = pyrepl_dataset_commands()
    t_functions, t_selects, t_runs = split(theirs)
    o_functions, o_selects, o_runs = split(ours)
    assert o_functions == t_functions
    assert o_selects == t_selects
    assert sorted(o_runs) == sorted(t_runs)
    for where, run in t_runs.items():
        assert o_runs[where] == run, where
    assert len(ours) == len(theirs)
