#!/usr/bin/env python3
"""Make the golden RDB files in tests/data/ with a real redis-server (Debian's 7.0.15).

Theory of operation: ``golden_dataset()`` is a deterministic dataset (seeded PRNG) covering every
type in the shapes Redis stores compactly (small collections, intsets of 16/32/64-bit ints,
integer strings, LZF-compressible strings, a list node big enough to be a plain quicklist node)
and in the shapes it stores plainly (collections above the listpack/intset limits), spread over
several databases, with and without expires. ``make_dump(config)`` starts redis-server on a free
loopback port in a temporary directory, applies a config (``"compact"``: Redis defaults;
``"plain"``: every ``*-max-*-entries`` at 0 and one element per list node), loads the dataset
with redis-py, runs SAVE and returns the dump bytes. ``main()`` writes
``golden_compact.rdb`` and ``golden_plain.rdb`` next to this script.

Tests import this module: the unit tests decode the committed files and compare them with
``golden_dataset()`` (so the expected data exists once, here), and the interop tests call
``make_dump`` / ``RedisServer`` against a live server.

Usage: .venv/bin/python tests/data/make_golden_rdb.py   (needs redis-server and redis-py)
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyrepl.keyspace.zset import ZSet

HERE = os.path.dirname(os.path.abspath(__file__))
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
# 2100-01-01T00:00:00Z: expires that stay in the future for as long as these files are used.
EXPIRE_BASE_MS = 4102444800000
GOLDEN_FILES = {"compact": "golden_compact.rdb", "plain": "golden_plain.rdb"}

# (config parameter, value) pairs applied with CONFIG SET before loading the dataset.
CONFIGS: dict[str, list[tuple[str, str]]] = {
    "compact": [],
    "plain": [
        ("hash-max-listpack-entries", "0"),
        ("zset-max-listpack-entries", "0"),
        ("set-max-intset-entries", "0"),
        ("list-max-listpack-size", "1"),
    ],
}
# Elements at least this long get their own plain quicklist node (DEBUG QUICKLIST-PACKED-THRESHOLD).
PACKED_THRESHOLD = 1000

Dataset = list[dict[bytes, tuple[Any, int | None]]]


def golden_dataset() -> Dataset:
    """Index = db number; each db maps key -> (value in the pyrepl model, expire_ms or None)."""
    rnd = random.Random(20240607)

    def word(n: int) -> bytes:
        return bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(n))

    def zset(pairs: list[tuple[bytes, float]]) -> ZSet:
        z = ZSet()
        for m, s in pairs:
            z.add(m, s)
        return z

    # Strings: raw, integer-encoded (8/16/32 bit and beyond), non-canonical numbers, binary,
    # empty, LZF-compressible, incompressible and big; without an expire (str:ttl has one).
    strings: dict[bytes, bytes] = {
        b"str:hello": b"hello world",
        b"str:empty": b"",
        b"str:int0": b"0",
        b"str:int8": b"-128",
        b"str:int16": b"32767",
        b"str:int32": b"-2147483648",
        b"str:int64": b"9223372036854775807",
        b"str:int64min": b"-9223372036854775808",
        b"str:bigint": b"2147483648",
        b"str:leadingzero": b"007",
        b"str:plus": b"+5",
        b"str:float": b"3.14159",
        b"str:binary": bytes(range(256)),
        b"str:lzf": b"abcdefgh" * 300,
        b"str:random": bytes(rnd.getrandbits(8) for _ in range(700)),
        b"str:big": b"".join(b"line %d\n" % i for i in range(4000)),
        b"12345": b"integer key",
        b"-7": b"negative integer key",
        b"\x00\xffbinary\r\nkey": b"\x00\x01\x02",
    }
    db0: dict[bytes, tuple[Any, int | None]] = {
        **{key: (value, None) for key, value in strings.items()},
        b"str:ttl": (b"expiring", EXPIRE_BASE_MS + 1),
        # Lists.
        b"list:small": (deque([b"a", b"1", b"-20", b"300000", b"5000000000", b"", b"xyz" * 30]),
                        None),
        b"list:ints": (deque([b"%d" % (i * 37 - 500) for i in range(40)]), None),
        b"list:big": (deque([b"item-%d-" % i + word(rnd.randint(1, 30)) for i in range(600)]),
                      None),
        b"list:plainnode": (deque([b"before", b"P" * (PACKED_THRESHOLD * 2), b"after"]), None),
        b"list:ttl": (deque([b"x", b"y"]), EXPIRE_BASE_MS + 2),
        # Sets: intsets of 16, 32, 64 bit width, string sets, big sets.
        b"set:int16": ({b"1", b"2", b"3", b"-100", b"30000"}, None),
        b"set:int32": ({b"1", b"70000", b"-2000000000"}, None),
        b"set:int64": ({b"1", b"5000000000", b"-9223372036854775808"}, None),
        b"set:strings": ({b"apple", b"banana", b"cherry", b"12", b""}, None),
        b"set:bigints": ({b"%d" % (i * 3) for i in range(700)}, None),
        b"set:big": ({word(12) for _ in range(300)}, EXPIRE_BASE_MS + 3),
        # Sorted sets: integer, fractional, negative, huge, infinite scores.
        b"zset:small": (zset([(b"one", 1.0), (b"two", 2.0), (b"half", 0.5), (b"neg", -3.25),
                              (b"pinf", float("inf")), (b"ninf", float("-inf")),
                              (b"huge", 1.5e300), (b"tiny", 5e-324), (b"42", 42.0),
                              (b"third", 1 / 3)]), None),
        b"zset:big": (zset([(b"m%d" % i, rnd.uniform(-1e6, 1e6)) for i in range(300)]), None),
        b"zset:longmember": (zset([(b"L" * 100, 1.0), (b"s", 2.0)]), None),
        # Hashes.
        b"hash:small": ({b"name": b"pyrepl", b"n": b"12", b"neg": b"-5", b"empty": b"",
                         b"77": b"int field", b"lzf": b"z" * 60}, None),
        b"hash:big": ({b"field:%d" % i: word(rnd.randint(0, 20)) for i in range(700)}, None),
        b"hash:longvalue": ({b"f": b"v" * 200, b"g": b"w"}, EXPIRE_BASE_MS + 4),
    }
    db1: dict[bytes, tuple[Any, int | None]] = {
        b"db1:str": (b"in db 1", None),
        b"db1:list": (deque([b"p", b"q"]), EXPIRE_BASE_MS + 5),
        b"db1:set": ({b"1", b"2"}, None),
        b"db1:zset": (zset([(b"a", 1.0)]), None),
        b"db1:hash": ({b"k": b"v"}, None),
    }
    db5: dict[bytes, tuple[Any, int | None]] = {
        b"k%d" % i: (b"v%d" % i, EXPIRE_BASE_MS + 1000 + i if i % 3 == 0 else None)
        for i in range(50)
    }
    return [db0, db1, {}, {}, {}, db5]


# ---------------------------------------------------------------------------------- redis


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server child on a free loopback port with its own directory."""

    def __init__(self, directory: str, *args: str, dbfilename: str = "dump.rdb") -> None:
        self.dir = directory
        self.dbfilename = dbfilename
        self.port = free_port()
        self.log = os.path.join(directory, "redis.log")
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", directory,
             "--dbfilename", dbfilename, "--save", "", "--appendonly", "no",
             "--enable-debug-command", "yes", "--logfile", self.log, "--daemonize", "no",
             *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def client(self, db: int = 0) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, db=db, socket_timeout=60)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll PING until it answers (and no longer LOADING) or the process dies."""
        import redis

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: "
                                   + self.read_log()[-2000:])
            try:
                if self.client().ping():
                    return
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("redis-server did not become ready")
            time.sleep(0.02)

    def read_log(self) -> str:
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


@contextmanager
def redis_server(*args: str, directory: str | None = None,
                 dbfilename: str = "dump.rdb") -> Iterator[RedisServer]:
    tmp = None
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="pyrepl-redis-")
        directory = tmp
    server = RedisServer(directory, *args, dbfilename=dbfilename)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def populate(server: RedisServer, dataset: Dataset) -> None:
    """Write ``dataset`` into a running server with ordinary commands."""
    for dbid, db in enumerate(dataset):
        if not db:
            continue
        r = server.client(dbid)
        pipe = r.pipeline(transaction=False)
        for key, (value, expire) in db.items():
            if isinstance(value, bytes):
                pipe.set(key, value)
            elif isinstance(value, deque):
                items = list(value)
                for i in range(0, len(items), 100):
                    pipe.rpush(key, *items[i : i + 100])
            elif isinstance(value, set):
                items = sorted(value)
                for i in range(0, len(items), 100):
                    pipe.sadd(key, *items[i : i + 100])
            elif isinstance(value, dict):
                pipe.hset(key, mapping=value)
            elif isinstance(value, ZSet):
                pipe.zadd(key, {m: s for m, s in value.items()})
            else:
                raise TypeError(type(value))
            if expire is not None:
                pipe.pexpireat(key, expire)
        pipe.execute()
        r.close()


def make_dump(config: str, dataset: Dataset | None = None) -> bytes:
    """Run a fresh redis-server with ``CONFIGS[config]``, load the dataset, SAVE; the dump."""
    with redis_server() as server:
        r = server.client()
        r.execute_command("DEBUG", "QUICKLIST-PACKED-THRESHOLD", str(PACKED_THRESHOLD))
        for name, value in CONFIGS[config]:
            r.config_set(name, value)
        populate(server, golden_dataset() if dataset is None else dataset)
        r.save()
        r.close()
        with open(os.path.join(server.dir, server.dbfilename), "rb") as f:
            return f.read()


def main() -> None:
    for config, name in GOLDEN_FILES.items():
        blob = make_dump(config)
        path = os.path.join(HERE, name)
        with open(path, "wb") as f:
            f.write(blob)
        print(f"{path}: {len(blob)} bytes")


if __name__ == "__main__":
    main()
