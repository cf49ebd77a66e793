"""Hash encodings against real redis-server 7.0.15: when a hash is a listpack and when it
becomes a hash table (pyrepl/keyspace/lphash.py), compared reply for reply.

Random sequences over a few hashes with ``hash-max-listpack-entries`` / ``-value`` set low (and
changed mid-sequence) write fields and values around the limits, then ask ``OBJECT ENCODING``,
HGETALL and HSCAN (in the listpack's exact order while it is one: Redis's order), reload the
dataset (DEBUG RELOAD, DUMP/RESTORE, COPY: the encoding chosen again on load as Redis does) and
compare every reply.
"""

from __future__ import annotations

import random
from contextlib import closing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff

pytestmark = [pytest.mark.slow, pytest.mark.interop]

KEYS = ["h1", "h2", "h3"]


@pytest.fixture(scope="module")
def pair(servers):
    with closing(diff.Pair(*servers)) as p:
        yield p


def _string(rnd: random.Random, limit: int) -> str:
    """A field or value about the length limit (and integers, which a listpack packs)."""
    kind = rnd.random()
    if kind < 0.25:
        return str(rnd.choice([0, 7, -1, 127, 4096, -70000, 2**40, 2**63 - 1]))
    n = rnd.choice([0, 1, limit - 1, limit, limit + 1, rnd.randint(0, 2 * limit)])
    return "".join(rnd.choice("abc") for _ in range(max(n, 0)))


def rand_command(rnd: random.Random, limit: int) -> tuple[str, ...]:
    k = rnd.choice(KEYS)
    f = _string(rnd, limit) if rnd.random() < 0.3 else rnd.choice("fghijk")
    kind = rnd.choices(
        ["hset", "hsetnx", "hdel", "hincrby", "hincrbyfloat", "encoding", "hgetall", "hscan",
         "reload", "restore", "copy", "config"],
        weights=[10, 2, 3, 2, 1, 4, 3, 2, 0.5, 0.7, 0.7, 0.7])[0]
    if kind == "hset":
        pairs = [x for _ in range(rnd.randint(1, 4)) for x in (
            _string(rnd, limit) if rnd.random() < 0.3 else rnd.choice("fghijk"),
            _string(rnd, limit))]
        return ("HSET", k, *pairs)
    if kind == "hsetnx":
        return ("HSETNX", k, f, _string(rnd, limit))
    if kind == "hdel":
        return ("HDEL", k, *rnd.choices("fghijk", k=rnd.randint(1, 3)))
    if kind == "hincrby":
        return ("HINCRBY", k, f, str(rnd.choice([1, -5, 10**15, 2**62])))
    if kind == "hincrbyfloat":
        return ("HINCRBYFLOAT", k, f, rnd.choice(["0.1", "1e10", "3.0e-5", "-7"]))
    if kind == "encoding":
        return ("OBJECT", "ENCODING", k)
    if kind == "hgetall":
        return ("HGETALL", k)
    if kind == "hscan":
        return ("HSCAN", k, "0")
    if kind in ("reload", "restore", "copy"):
        return diff.reload_command(rnd, kind, k, KEYS)
    return ("CONFIG", "SET", rnd.choice(["hash-max-listpack-entries", "hash-max-listpack-value"]),
            str(rnd.choice([0, 1, 3, 5, 8, 128])))


class Checker:
    """Pair.check, with HGETALL / HSCAN in exact order while the hash is a listpack on both and
    its order is known: a listpack loaded from a hash table (DEBUG RELOAD, RESTORE, COPY of
    one) has the order of Redis's table, which is its own, so such a key is compared as a
    multiset from then on. DUMP + RESTORE run as one step."""

    def __init__(self) -> None:
        self.unordered: set[str] = set()

    def _encoding(self, p: diff.Pair, key: str) -> bytes:
        return p.check("OBJECT", "ENCODING", key)

    def __call__(self, p: diff.Pair, *argv: str) -> None:
        if argv[0] == "__RESTORE__":
            k = argv[1]
            if self._encoding(p, k) == HASHTABLE:
                self.unordered.add(k)
            diff.dump_restore(p, k)
            return
        if argv[:2] == ("DEBUG", "RELOAD"):
            self.unordered.update(k for k in KEYS if self._encoding(p, k) == HASHTABLE)
        elif argv[0] == "COPY" and argv[1] != argv[2]:
            if argv[1] in self.unordered or self._encoding(p, argv[1]) == HASHTABLE:
                self.unordered.add(argv[2])
            else:
                self.unordered.discard(argv[2])
        if argv[0] in ("HGETALL", "HSCAN"):
            enc = self._encoding(p, argv[1])
            if enc == LISTPACK and argv[1] not in self.unordered:
                ra, rb = p.both(*argv)
                assert ra == rb, f"{argv!r} (listpack):\n  pyrepl: {ra!r}\n  redis:  {rb!r}"
                return
            argv = ("HGETALL", argv[1])     # (a hash table pages in its own order)
        p.check(*argv)


HASHTABLE = b"$9\r\nhashtable\r\n"
LISTPACK = b"$8\r\nlistpack\r\n"


@diff.sequence_settings(60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(10, 60))
def test_encodings_follow_redis(pair, seed, n):
    rnd = random.Random(seed)
    limit = rnd.choice([4, 8])
    setup = [("CONFIG", "SET", "hash-max-listpack-entries", rnd.choice(["3", "5", "8"])),
             ("CONFIG", "SET", "hash-max-listpack-value", str(limit))]
    final = [(name, key, *args) for key in KEYS for name, *args in
             (("OBJECT", "ENCODING"), ("HGETALL",), ("HSCAN", "0"))]
    try:
        diff.run_sequence(pair, [*setup, *(rand_command(rnd, limit) for _ in range(n)), *final],
                          check=Checker())
    finally:
        pair.both("CONFIG", "SET", "hash-max-listpack-entries", "512")
        pair.both("CONFIG", "SET", "hash-max-listpack-value", "64")


def test_the_defaults_and_the_conversion_points(pair):
    """512 fields of <= 64 bytes are a listpack; the 513th field, or a 65-byte value, makes a
    hash table for good (deleting fields does not undo it); a reload makes a small one a
    listpack again."""
    pair.flushall()
    for args in (("CONFIG", "GET", "hash-max-listpack-entries"),
                 ("CONFIG", "GET", "hash-max-listpack-value")):
        pair.check(*args)
    fields = [x for i in range(512) for x in (f"f{i}", f"v{i}")]
    pair.check("HSET", "big", *fields)
    pair.check("OBJECT", "ENCODING", "big")
    pair.check("HSET", "big", "one-more", "x")
    pair.check("OBJECT", "ENCODING", "big")
    pair.check("HSET", "long", "f", "v" * 64)
    pair.check("OBJECT", "ENCODING", "long")
    pair.check("HSET", "long", "g", "v" * 65)
    pair.check("OBJECT", "ENCODING", "long")
    pair.check("HDEL", "long", "g")
    pair.check("OBJECT", "ENCODING", "long")
    pair.check("HINCRBYFLOAT", "num", "f", "1.5")
    pair.check("HINCRBYFLOAT", "num", "f", "1e60")   # (a 61-byte value: still a listpack)
    pair.check("OBJECT", "ENCODING", "num")
    pair.check("DEBUG", "RELOAD")
    for k in ("big", "long", "num"):
        pair.check("OBJECT", "ENCODING", k)
        pair.check("HGETALL", k)
