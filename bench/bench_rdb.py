"""RDB save/load side by side: pyrepl's writer and reader vs Debian's redis-server, same run.

    .venv/bin/python bench/bench_rdb.py [--keys 1000000] [--size 100] [--rounds 3] [--json F]

The dataset is what ``DEBUG POPULATE <keys> key <size>`` builds (debug.c): keys ``key:<j>``,
values ``value:<j>`` zero-padded to ``size`` bytes. pyrepl side: build it in Python, time
``save_rdb_file`` (encode + write + fsync) and ``load_rdb_file`` of that file, plus the load of
the dump real Redis wrote (LZF-compressed values, decompressed in pure Python). Redis side:
DEBUG POPULATE, time a synchronous SAVE from the client, then restart redis-server on the dump
and take the load time from its log ("DB loaded from disk: X seconds"). Each figure is the
median of ``--rounds``. Goals: save and load within 3x of Redis.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from common import options, write_json  # noqa: E402

from pyrepl.rdb.decoder import load_rdb_file  # noqa: E402
from pyrepl.rdb.encoder import save_rdb_file  # noqa: E402
from tests.support.procs import start_redis  # noqa: E402
from tests.support.waits import wait_for  # noqa: E402


class Db:
    def __init__(self) -> None:
        self.data: dict[bytes, object] = {}
        self.expires: dict[bytes, int] = {}


def populate(keys: int, size: int) -> Db:
    """DEBUG POPULATE <keys> key <size>: "key:<j>" -> "value:<j>" padded with NULs to size."""
    db = Db()
    db.data = {b"key:%d" % j: (b"value:%d" % j)[:size].ljust(size, b"\0") for j in range(keys)}
    return db


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def redis_load_seconds(log: str) -> float:
    m = re.findall(r"DB loaded from disk: ([0-9.]+) seconds", log)
    if not m:
        raise RuntimeError("no 'DB loaded from disk' line in the redis log:\n" + log[-2000:])
    return float(m[-1])


def redis_side(keys: int, size: int, rounds: int, ours: str, work: str) -> dict[str, float]:
    import redis

    res: dict[str, list[float]] = {"save": [], "load": [], "load_pyrepl_file": []}
    rdir = tempfile.mkdtemp(prefix="bench-rdb-redis-", dir=work)
    srv = start_redis("--enable-debug-command", "yes", tmpdir=rdir)
    try:
        r = redis.Redis(port=srv.port, socket_timeout=600)
        r.execute_command("DEBUG", "POPULATE", keys, "key", size)
        assert r.dbsize() == keys
        for _ in range(rounds):
            t = time.perf_counter()
            r.save()
            res["save"].append(time.perf_counter() - t)
        r.close()
    finally:
        srv.stop()
    dump = os.path.join(rdir, "dump.rdb")
    shutil.copy(dump, os.path.join(work, "redis-dump.rdb"))
    # Load time of Redis's own dump, and of the file pyrepl wrote (same data, plain encoding).
    for label, path in (("load", dump), ("load_pyrepl_file", ours)):
        for _ in range(rounds):
            d = tempfile.mkdtemp(prefix="bench-rdb-load-", dir=work)
            shutil.copy(path, os.path.join(d, "dump.rdb"))
            srv = start_redis(tmpdir=d)
            try:
                c = redis.Redis(port=srv.port, socket_timeout=600)
                wait_for(lambda c=c: c.dbsize() == keys, timeout=300, what="redis to load")
                c.close()
                res[label].append(redis_load_seconds(srv.log()))
            finally:
                srv.stop()
                shutil.rmtree(d, ignore_errors=True)
    return {k: med(v) for k, v in res.items()}


def pyrepl_side(keys: int, size: int, rounds: int, work: str) -> tuple[dict[str, float], str]:
    db = populate(keys, size)
    path = os.path.join(work, "pyrepl-dump.rdb")
    res: dict[str, list[float]] = {"save": [], "load": []}
    nbytes = 0
    for _ in range(rounds):
        t = time.perf_counter()
        nbytes = save_rdb_file(path, [db], now_ms=int(time.time() * 1000))
        res["save"].append(time.perf_counter() - t)
    del db
    for _ in range(rounds):
        t = time.perf_counter()
        loaded = load_rdb_file(path, 16)
        res["load"].append(time.perf_counter() - t)
        assert loaded.keys_loaded == keys
        del loaded
    out = {k: med(v) for k, v in res.items()}
    out["file_bytes"] = float(nbytes)
    return out, path


def main() -> int:
    args = options(__doc__, keys=1_000_000, size=100, rounds=3, json=None)
    work = tempfile.mkdtemp(prefix="bench-rdb-")
    try:
        ours, ours_path = pyrepl_side(args.keys, args.size, args.rounds, work)
        theirs = redis_side(args.keys, args.size, args.rounds, ours_path, work)
        redis_dump = os.path.join(work, "redis-dump.rdb")
        times = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            loaded = load_rdb_file(redis_dump, 16)
            times.append(time.perf_counter() - t)
            assert loaded.keys_loaded == args.keys
            del loaded
        ours["load_redis_file"] = med(times)
        redis_bytes = os.path.getsize(redis_dump)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"dataset: DEBUG POPULATE {args.keys} key {args.size}; median of {args.rounds}")
    print(f"  file size: pyrepl {ours['file_bytes'] / 1e6:.1f} MB (no compression), "
          f"redis {redis_bytes / 1e6:.1f} MB (LZF)")
    rows = [
        ("SAVE (encode+write+fsync)", ours["save"], theirs["save"]),
        ("load pyrepl's file", ours["load"], theirs["load_pyrepl_file"]),
        ("load redis's file", ours["load_redis_file"], theirs["load"]),
    ]
    print(f"  {'':28s} {'pyrepl s':>9s} {'redis s':>9s} {'ratio':>7s}")
    for name, a, b in rows:
        print(f"  {name:28s} {a:9.3f} {b:9.3f} {a / b:7.2f}x")
    write_json(args.json, {"args": vars(args), "pyrepl": ours, "redis": theirs,
                           "redis_file_bytes": redis_bytes})
    return 0


if __name__ == "__main__":
    sys.exit(main())
