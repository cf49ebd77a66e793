"""RDB and DEBUG DIGEST against the real thing (Debian's redis-server / redis-check-rdb 7.0.15).

* files pyrepl writes pass redis-check-rdb and load into redis-server with identical data
  (types, values, exact expire times) and an identical DEBUG DIGEST;
* dumps redis-server writes, in compact and plain encodings, decode to exactly what was put in;
* our DEBUG DIGEST / DIGEST-VALUE equal Redis's for every type in both encodings;
* the old-format files of Redis's own test suite (zipmap, ziplist, intset, quicklist v1, RDB
  versions 3 to 10) decode to what redis-server itself loads from them.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections import deque
from typing import Any

import pytest

from pyrepl.keyspace import intset, lphash, lplist
from pyrepl.keyspace import zset as zsets
from pyrepl.keyspace.digest import dataset_digest, key_digest
from pyrepl.keyspace.zset import ZSETS, ZSet
from pyrepl.rdb.decoder import load_rdb_file
from pyrepl.rdb.encoder import save_rdb_file
from tests.support.paths import redis_source_file
from tests.support.rdb import golden_module

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NOW = 1_700_000_000_000


gold = golden_module()


class Db:
    def __init__(self, data: dict[bytes, Any] | None = None,
                 expires: dict[bytes, int] | None = None) -> None:
        self.data = data if data is not None else {}
        self.expires = expires if expires is not None else {}


def compacted(v: Any) -> Any:
    """The value as the keyspace holds it: a small hash a ListpackHash, a small set of
    integers an IntSet, a small list a ListpackList (what the RDB writes as Redis's listpack,
    intset and quicklist encodings)."""
    if type(v) is dict:
        return lphash.compact(v)
    if type(v) is set:
        return intset.compact(v)
    if type(v) is deque:
        return lplist.compact(list(v))
    if type(v) is ZSet:
        return zsets.compact(v.items())
    return v


def to_dbs(dataset: list[dict[bytes, tuple[Any, int | None]]], ndbs: int = 16,
           compact: bool = False) -> list[Db]:
    out = [Db() for _ in range(ndbs)]
    for i, db in enumerate(dataset):
        out[i].data = {k: compacted(v) if compact else v for k, (v, _e) in db.items()}
        out[i].expires = {k: e for k, (_v, e) in db.items() if e is not None}
    return out


def norm(v: Any) -> Any:
    if type(v) in ZSETS:
        return ("zset", list(v.items()))
    return v


def assert_same(got: list[Db], want: list[Db]) -> None:
    for i in range(16):
        g = got[i] if i < len(got) else Db()
        w = want[i] if i < len(want) else Db()
        assert {k: norm(v) for k, v in g.data.items()} == \
            {k: norm(v) for k, v in w.data.items()}, f"db {i}"
        assert g.expires == w.expires, f"db {i} expires"


def read_redis(server: Any) -> list[Db]:
    """The whole keyspace of a live server, in the model's shapes, with exact expire times."""
    dbs = []
    for dbid in range(16):
        r = server.client(dbid)
        db = Db()
        for key in r.scan_iter(count=1000):
            t = r.type(key)
            if t == b"string":
                v: Any = r.get(key)
            elif t == b"list":
                v = deque(r.lrange(key, 0, -1))
            elif t == b"set":
                v = set(r.smembers(key))
            elif t == b"hash":
                v = r.hgetall(key)
            elif t == b"zset":
                v = ZSet.from_items(r.zrange(key, 0, -1, withscores=True))
            else:
                raise AssertionError(f"unexpected type {t!r}")
            db.data[key] = v
            when = r.execute_command("PEXPIRETIME", key)
            if when != -1:
                db.expires[key] = when
        r.close()
        dbs.append(db)
    return dbs


def random_dataset(seed: int) -> list[dict[bytes, tuple[Any, int | None]]]:
    """Every type at sizes on both sides of Redis's listpack/intset limits, binary data, ints
    of every width, odd scores, expires, several dbs."""
    rnd = random.Random(seed)

    def s() -> bytes:
        kind = rnd.randrange(6)
        if kind == 0:
            return b"%d" % rnd.randint(-(1 << 63), (1 << 63) - 1)
        if kind == 1:
            return b"%d" % rnd.randint(-1000, 1000)
        if kind == 2:
            return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 20)))
        if kind == 3:
            return b"x" * rnd.randint(60, 90)  # around hash/zset max-listpack-value (64)
        return b"s%d" % rnd.randrange(10**9)

    def score() -> float:
        return rnd.choice([rnd.uniform(-1e9, 1e9), float(rnd.randint(-5, 5)), float("inf"),
                           float("-inf"), rnd.random() * 1e-300, 0.1])

    out: list[dict[bytes, tuple[Any, int | None]]] = []
    for dbid in range(3):
        db: dict[bytes, tuple[Any, int | None]] = {}
        for i in range(60):
            size = rnd.choice([1, 3, 10, 130, 600])
            kind = i % 5
            if kind == 0:
                v: Any = s() if size < 100 else bytes(rnd.getrandbits(8) for _ in range(size * 40))
            elif kind == 1:
                v = deque(s() for _ in range(size))
            elif kind == 2:
                ints = rnd.random() < 0.5
                v = {b"%d" % rnd.randint(-(1 << 40), 1 << 40) if ints else s()
                     for _ in range(size)}
            elif kind == 3:
                v = {s(): s() for _ in range(size)}
            else:
                v = ZSet.from_items((s(), score()) for _ in range(size))
            if not v and not isinstance(v, bytes):
                continue
            expire = gold.EXPIRE_BASE_MS + rnd.randrange(10**6) if rnd.random() < 0.3 else None
            db[b"db%d:key%d:" % (dbid, i) + s()] = (v, expire)
        out.append(db)
    return out


# -- files pyrepl writes --------------------------------------------------------------------

@pytest.mark.parametrize("compact", [False, True], ids=["plain", "compact"])
@pytest.mark.parametrize("which", ["golden", "random"])
def test_redis_check_rdb_and_redis_server_accept_our_file(which: str, compact: bool,
                                                          tmp_path: Any) -> None:
    """Our file, its values as the keyspace's plain types or as its compact ones (listpack
    hashes and lists, intsets, written as Redis's encodings): redis-check-rdb and
    redis-server read every key back."""
    dataset = gold.golden_dataset() if which == "golden" else random_dataset(7)
    dbs = to_dbs(dataset, compact=compact)
    if compact:
        kinds = {type(v) for db in dbs for v in db.data.values()}
        assert {lphash.ListpackHash, intset.IntSet, lplist.ListpackList,
                zsets.ListpackZSet} <= kinds, kinds
    path = str(tmp_path / "ours.rdb")
    save_rdb_file(path, dbs, aux={"repl-id": "c" * 40, "repl-offset": 1234}, now_ms=NOW)
    check = subprocess.run(["redis-check-rdb", path], capture_output=True, text=True,
                           timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "RDB looks OK" in check.stdout
    nkeys = sum(len(db.data) for db in dbs)
    assert f"[info] {nkeys} keys read" in check.stdout
    with gold.redis_server(directory=str(tmp_path), dbfilename="ours.rdb") as server:
        assert_same(read_redis(server), dbs)
        r = server.client()
        assert r.execute_command("DEBUG", "DIGEST") == dataset_digest(dbs).encode()
        r.close()


# -- files redis writes ---------------------------------------------------------------------

@pytest.mark.parametrize("config", ["compact", "plain"])
@pytest.mark.parametrize("which", ["golden", "random"])
def test_decoder_reads_what_redis_writes(config: str, which: str, tmp_path: Any) -> None:
    dataset = gold.golden_dataset() if which == "golden" else random_dataset(11)
    blob = gold.make_dump(config, dataset)
    path = tmp_path / "dump.rdb"
    path.write_bytes(blob)
    loaded = load_rdb_file(str(path), 16)
    assert loaded.checksum_ok is True
    got = [Db(d, e) for d, e in zip(loaded.data, loaded.expires, strict=True)]
    assert_same(got, to_dbs(dataset))


def test_redis_dump_through_pyrepl_and_back(tmp_path: Any) -> None:
    """Redis writes, pyrepl reads and rewrites, Redis loads: the digest never changes."""
    dataset = random_dataset(23)
    with gold.redis_server() as server:
        gold.populate(server, dataset)
        r = server.client()
        digest = r.execute_command("DEBUG", "DIGEST")
        r.save()
        r.close()
        shutil.copy(os.path.join(server.dir, "dump.rdb"), tmp_path / "redis.rdb")
    loaded = load_rdb_file(str(tmp_path / "redis.rdb"), 16)
    dbs = [Db(d, e) for d, e in zip(loaded.data, loaded.expires, strict=True)]
    assert dataset_digest(dbs).encode() == digest
    save_rdb_file(str(tmp_path / "dump.rdb"), dbs, now_ms=NOW)
    with gold.redis_server(directory=str(tmp_path)) as server:
        r = server.client()
        assert r.execute_command("DEBUG", "DIGEST") == digest
        r.close()


# -- DEBUG DIGEST ---------------------------------------------------------------------------

@pytest.mark.parametrize("config", ["compact", "plain"])
@pytest.mark.parametrize("which", ["golden", "random"])
def test_digest_equals_redis(config: str, which: str) -> None:
    dataset = gold.golden_dataset() if which == "golden" else random_dataset(5)
    dbs = to_dbs(dataset)
    with gold.redis_server() as server:
        r = server.client()
        assert r.execute_command("DEBUG", "DIGEST") == b"0" * 40 == dataset_digest([]).encode()
        r.execute_command("DEBUG", "QUICKLIST-PACKED-THRESHOLD", str(gold.PACKED_THRESHOLD))
        for name, value in gold.CONFIGS[config]:
            r.config_set(name, value)
        gold.populate(server, dataset)
        assert r.execute_command("DEBUG", "DIGEST") == dataset_digest(dbs).encode()
        for dbid, db in enumerate(dataset):
            if not db:
                continue
            c = server.client(dbid)
            keys = list(db)
            theirs = c.execute_command("DEBUG", "DIGEST-VALUE", *keys)
            ours = [key_digest(v, e).encode() for v, e in db.values()]
            assert theirs == ours
            c.close()
        r.close()


def test_digest_skips_expired_keys_only_when_asked() -> None:
    dbs = [Db({b"a": b"1", b"b": b"2"}, {b"b": NOW - 1})]
    with gold.redis_server() as server:
        r = server.client()
        r.set("a", "1")
        assert r.execute_command("DEBUG", "DIGEST") == dataset_digest(dbs, NOW).encode()
        assert dataset_digest(dbs, NOW) != dataset_digest(dbs)
        r.close()


# -- Redis's own old-format test files -------------------------------------------------------

@pytest.mark.parametrize("name", ["encodings.rdb", "hash-zipmap.rdb", "hash-ziplist.rdb",
                                  "list-quicklist.rdb", "zset-ziplist.rdb", "scriptbackup.rdb"])
def test_redis_test_suite_files(name: str, tmp_path: Any) -> None:
    src = redis_source_file("tests", "assets", name)
    shutil.copy(src, tmp_path / "dump.rdb")
    loaded = load_rdb_file(src, 16)
    ours = [Db(d, e) for d, e in zip(loaded.data, loaded.expires, strict=True)]
    with gold.redis_server(directory=str(tmp_path)) as server:
        theirs = read_redis(server)
        assert sum(len(db.data) for db in theirs) == loaded.keys_loaded
        assert_same(ours, theirs)
        r = server.client()
        assert r.execute_command("DEBUG", "DIGEST") == dataset_digest(ours).encode()
        r.close()


def test_expired_keys_are_saved_then_dropped_by_the_loading_master(tmp_path) -> None:
    """Redis's "Test RDB load info": SAVE writes the keys that expired but are still held (no
    active expiry), and a master loading the file drops them, counted in
    rdb_last_load_keys_expired. pyrepl and redis-server 7.0.15, the same steps."""
    import time

    from tests.support.aof import cmd, info, start_server

    got = {}
    for kind in ("pyrepl", "redis"):
        d = tmp_path / kind
        d.mkdir()
        srv = start_server(kind, str(d))
        try:
            p = srv.port
            cmd(p, "DEBUG", "POPULATE", "100")
            cmd(p, "DEBUG", "SET-ACTIVE-EXPIRE", "0")
            for j in range(64):
                cmd(p, "SET", f"e{j}", "v", "PX", "10", db=j % 16)
            time.sleep(0.05)
            cmd(p, "SAVE")
            saved = load_rdb_file(str(d / "dump.rdb"), 16)     # (no clock: every key read)
            cmd(p, "DEBUG", "RELOAD")
            fields = info(p, "persistence")
            got[kind] = (saved.keys_loaded, fields["rdb_last_load_keys_loaded"],
                         fields["rdb_last_load_keys_expired"], cmd(p, "DBSIZE"))
        finally:
            srv.stop()
    assert got["pyrepl"] == got["redis"] == (164, "100", "64", 100)
