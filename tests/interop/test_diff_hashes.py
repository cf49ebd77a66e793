"""Differential tests of the hash commands: pyrepl against real redis-server 7.0.15.

As for lists: a hand-written table of edge cases replayed in RESP2 and RESP3 (replies compared
byte for byte, HGETALL/HKEYS/HVALS after sorting), random command sequences over four keys,
and a propagation check (HINCRBYFLOAT -> HSET, no-ops not propagated) against the command
stream real Redis sends a replica. HRANDFIELD's picks are random: its replies are compared by
shape (RESP types, lengths) and each side's picks are checked against that side's hash.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff
from tests.support.resp import parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

BIG = "9223372036854775807"
SMALL = "-9223372036854775808"

CASES: list[tuple[str, ...]] = [
    # HSET / HMSET / HSETNX
    ("HSET", "h", "a", "1"), ("HSET", "h", "b", "2", "c", "3"), ("HSET", "h", "a", "1"),
    ("HSET", "h", "a", "x", "d", "4"), ("HSET", "h", "a", "1", "b"), ("HSET", "h", "a"),
    ("HSET", "h"), ("HMSET", "h", "e", "5", "f", "6"), ("HMSET", "h", "e", "5", "f"),
    ("HMSET", "h", "e"), ("HSETNX", "h", "a", "zz"), ("HSETNX", "h", "g", "7"),
    ("HSETNX", "new", "f", "v"), ("HSETNX", "h", "a"), ("HSET", "dup", "f", "1", "f", "2"),
    ("HGET", "dup", "f"), ("HLEN", "dup"),
    # reads
    ("HGET", "h", "a"), ("HGET", "h", "zz"), ("HGET", "nokey", "a"), ("HGET", "h"),
    ("HMGET", "h", "a", "zz", "b"), ("HMGET", "nokey", "a", "b"), ("HMGET", "h"),
    ("HLEN", "h"), ("HLEN", "nokey"), ("HEXISTS", "h", "a"), ("HEXISTS", "h", "zz"),
    ("HEXISTS", "nokey", "a"), ("HSTRLEN", "h", "a"), ("HSTRLEN", "h", "zz"),
    ("HSTRLEN", "nokey", "a"), ("HGETALL", "h"), ("HGETALL", "nokey"), ("HKEYS", "h"),
    ("HKEYS", "nokey"), ("HVALS", "h"), ("HVALS", "nokey"), ("HGETALL", "h", "x"),
    # HDEL
    ("HDEL", "h", "a", "zz", "a"), ("HDEL", "nokey", "a"), ("HDEL", "h"),
    ("HDEL", "dup", "f", "g"), ("HLEN", "dup"), ("HGETALL", "dup"),
    # HINCRBY
    ("HINCRBY", "n", "i", "5"), ("HINCRBY", "n", "i", "-7"), ("HINCRBY", "n", "i", "0"),
    ("HINCRBY", "n", "i", "x"), ("HINCRBY", "n", "i", "1.5"), ("HINCRBY", "n", "i", ""),
    ("HINCRBY", "n", "i", "+1"), ("HINCRBY", "n", "i", "9223372036854775808"),
    ("HINCRBY", "nokey2", "i", "x"), ("HLEN", "nokey2"),
    ("HSET", "n", "big", "9223372036854775806"), ("HINCRBY", "n", "big", "1"),
    ("HINCRBY", "n", "big", "1"), ("HINCRBY", "n", "big", SMALL), ("HGET", "n", "big"),
    ("HSET", "n", "neg", "-9223372036854775807"), ("HINCRBY", "n", "neg", "-1"),
    ("HINCRBY", "n", "neg", "-1"),
    ("HSET", "n", "s", "abc"), ("HINCRBY", "n", "s", "1"), ("HSET", "n", "sp", " 1"),
    ("HINCRBY", "n", "sp", "1"), ("HSET", "n", "z", "007"), ("HINCRBY", "n", "z", "1"),
    ("HSET", "n", "e", ""), ("HINCRBY", "n", "e", "1"), ("HSET", "n", "m0", "-0"),
    ("HINCRBY", "n", "m0", "1"), ("HINCRBY", "n", "i"),
    # HINCRBYFLOAT fl <field> <increment>
    *(("HINCRBYFLOAT", "fl", f, incr) for f, incr in (
        ("a", "10.5"), ("a", "0.1"), ("a", "-5"), ("b", "3.0e3"), ("c", "0x10"),
        ("c", "-0x1.8p1"), ("d", "1e-20"), ("e", "-1e-20"), ("f", "0.1"), ("f", "0.2"),
        ("g", ".5"), ("g", "5."), ("g", "+1"), ("g", "-0"), ("h", "0.000003814697265625"),
        ("h2", "0.000011444091796875"), ("h3", "123456789012345678901234567890"),
        ("h4", "3.14159265358979323846264338327950288"))),
    # increments that are not numbers
    *(("HINCRBYFLOAT", "fl", "a", bad) for bad in (
        "abc", " 1", "1 ", "", "nan", "1e", "1e5000", "1e-5000", "0x", "1_0", "inf",
        "-Infinity", "+INF")),
    ("HINCRBYFLOAT", "nokey3", "a", "x"),
    ("HLEN", "nokey3"),
    ("HSET", "fl", "s", "abc", "i", "inf", "m", "1e4932", "x", "0x1p-2", "n", "nan"),
    ("HINCRBYFLOAT", "fl", "s", "1"), ("HINCRBYFLOAT", "fl", "i", "1"),
    ("HINCRBYFLOAT", "fl", "m", "1e4932"), ("HINCRBYFLOAT", "fl", "m", "-1e4932"),
    ("HINCRBYFLOAT", "fl", "x", "1"), ("HINCRBYFLOAT", "fl", "n", "1"),
    ("HSET", "fl", "int", "41"), ("HINCRBYFLOAT", "fl", "int", "1"),
    ("HINCRBYFLOAT", "fl", "int", "0.5"), ("HINCRBYFLOAT", "fl", "a"),
    ("HGETALL", "fl"),
    ("HINCRBYFLOAT", "huge", "v", "1e400"), ("HINCRBYFLOAT", "huge", "v", "-1e399"),
    ("HINCRBYFLOAT", "huge", "w", "-1e-4940"), ("HGET", "huge", "v"),
    # values that round to zero are not valid floats; exponents without significant digits
    ("HINCRBYFLOAT", "fl", "u", "1e-4952"), ("HINCRBYFLOAT", "fl", "u", "1e-4951"),
    ("HINCRBYFLOAT", "fl", "u", "0x1p-16446"), ("HINCRBYFLOAT", "fl", "u", "1.9e-4951"),
    ("HINCRBYFLOAT", "fl", "u", "1e0"), ("HINCRBYFLOAT", "fl", "u", "2E+00"),
    ("HINCRBYFLOAT", "fl", "u", "1\x00"), ("HGET", "fl", "u"),
    ("HSET", "fl", "tiny", "1e-4952", "one", "1e0", "ninf", "-inf"),
    ("HINCRBYFLOAT", "fl", "tiny", "1"), ("HINCRBYFLOAT", "fl", "one", "1"),
    ("HINCRBYFLOAT", "fl", "ninf", "1"), ("HINCRBYFLOAT", "fl", "ninf", "-inf"),
    # HSCAN (small hashes: everything in one call, cursor 0)
    ("HSET", "sc", "a1", "1", "b1", "2", "a2", "3", "n", "4"),
    ("HSCAN", "sc", "0"), ("HSCAN", "sc", "0", "MATCH", "a*"), ("HSCAN", "sc", "0", "MATCH", "*"),
    ("HSCAN", "sc", "0", "MATCH", "?1"), ("HSCAN", "sc", "0", "MATCH", "[ab]1"),
    ("HSCAN", "sc", "0", "COUNT", "1"), ("HSCAN", "sc", "0", "count", "2", "match", "*2"),
    ("HSCAN", "sc", "0", "MATCH", "a*", "MATCH", "b*"), ("HSCAN", "sc", "7"),
    ("HSCAN", "sc", "18446744073709551615"), ("HSCAN", "sc", "18446744073709551616"),
    ("HSCAN", "sc", "-1"), ("HSCAN", "sc", "+0"), ("HSCAN", "sc", ""), ("HSCAN", "sc", " 0"),
    ("HSCAN", "sc", "x"), ("HSCAN", "sc", "0x"), ("HSCAN", "sc", "0", "COUNT", "0"),
    ("HSCAN", "sc", "0", "COUNT", "-1"), ("HSCAN", "sc", "0", "COUNT", "x"),
    ("HSCAN", "sc", "0", "COUNT"), ("HSCAN", "sc", "0", "MATCH"),
    ("HSCAN", "sc", "0", "TYPE", "hash"), ("HSCAN", "sc", "0", "NOVALUES"),
    ("HSCAN", "nokey", "0"), ("HSCAN", "nokey", "0", "COUNT", "x"), ("HSCAN", "nokey", "x"),
    ("HSCAN", "sc"),
    # HRANDFIELD: only the deterministic forms here (errors, missing keys, empty counts)
    ("HRANDFIELD", "nokey"), ("HRANDFIELD", "nokey", "3"), ("HRANDFIELD", "nokey", "-3"),
    ("HRANDFIELD", "nokey", "3", "WITHVALUES"), ("HRANDFIELD", "sc", "0"),
    ("HRANDFIELD", "sc", "0", "WITHVALUES"), ("HRANDFIELD", "sc", "x"),
    ("HRANDFIELD", "nokey", "x"), ("HRANDFIELD", "sc", "1", "VALUES"),
    ("HRANDFIELD", "sc", "1", "WITHVALUES", "x"), ("HRANDFIELD", "sc", SMALL),
    ("HRANDFIELD", "sc", "-9223372036854775807", "WITHVALUES"),
    ("HRANDFIELD", "sc", "4611686018427387904", "WITHVALUES"),
    ("HRANDFIELD", "sc", "-4611686018427387904", "WITHVALUES"),
    ("HRANDFIELD", "nokey", "4611686018427387903", "WITHVALUES"),
    ("HRANDFIELD", "nokey", "-4611686018427387903", "WITHVALUES"),
    ("HRANDFIELD", "sc", "1.5"), ("HRANDFIELD",),
    # wrong types
    ("RPUSH", "l", "x"),
    ("HSET", "l", "a", "b"), ("HSET", "l", "a"), ("HSETNX", "l", "a", "b"), ("HGET", "l", "a"),
    ("HMSET", "l", "a", "b"), ("HMGET", "l", "a"), ("HDEL", "l", "a"), ("HLEN", "l"),
    ("HEXISTS", "l", "a"), ("HGETALL", "l"), ("HKEYS", "l"), ("HVALS", "l"),
    ("HINCRBY", "l", "a", "1"), ("HINCRBY", "l", "a", "x"), ("HINCRBYFLOAT", "l", "a", "1"),
    ("HINCRBYFLOAT", "l", "a", "x"), ("HINCRBYFLOAT", "l", "a", "inf"),
    ("HSTRLEN", "l", "a"), ("HSCAN", "l", "0"), ("HSCAN", "l", "x"),
    ("HSCAN", "l", "0", "COUNT", "0"), ("HRANDFIELD", "l"), ("HRANDFIELD", "l", "2"),
    ("HRANDFIELD", "l", "x"), ("HRANDFIELD", "l", "1", "BAD"),
    # binary-safe fields and values
    ("HSET", "bin", "\x00f", "\xff\r\n", "", "empty-field", "e", ""),
    ("HGETALL", "bin"), ("HGET", "bin", ""), ("HSTRLEN", "bin", "\x00f"), ("HSCAN", "bin", "0"),
    ("hset", "case", "F", "v"), ("HgEt", "case", "F"), ("HGET", "case", "f"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_edge_cases(pair):
    for argv in CASES:
        pair.check(*argv)


def _sorted_scan(reply: bytes) -> object:
    cursor, flat = parse_reply(reply)
    return cursor, sorted(zip(flat[0::2], flat[1::2], strict=True))


@pytest.mark.parametrize("proto", [2, 3])
def test_big_values_and_many_fields(pair):
    """Hashes Redis keeps as a real hash table: same content, order may differ."""
    pair.check("HSET", "bv", "small", "1", "big", "x" * 100)
    pair.check("HINCRBYFLOAT", "bv", "f", "1e100")
    pair.check("HGETALL", "bv")
    a, b = pair.both("HSCAN", "bv", "0")
    assert _sorted_scan(a) == _sorted_scan(b)
    fields = [x for i in range(300) for x in (f"f{i}", str(i))]
    pair.check("HSET", "many", *fields)
    for argv in (("HLEN", "many"), ("HGET", "many", "f299"), ("HGETALL", "many"),
                 ("HKEYS", "many"), ("HVALS", "many"), ("HDEL", "many", "f0", "f1", "x"),
                 ("HINCRBY", "many", "f5", "10"), ("HSTRLEN", "many", "f150")):
        pair.check(*argv)
    # A full HSCAN iteration returns every field exactly once on both servers.
    for client in (pair.a, pair.b):
        seen: list[bytes] = []
        cursor = b"0"
        for _ in range(1000):
            cursor, flat = parse_reply(client.call("HSCAN", "many", cursor, "COUNT", "25"))
            seen.extend(flat[0::2])
            if cursor == b"0":
                break
        assert cursor == b"0"
        assert sorted(seen) == sorted(f"f{i}".encode() for i in range(2, 300))


# -- HRANDFIELD ------------------------------------------------------------------------------

def _skeleton(v: object) -> object:
    """The shape of a parsed reply: bulk strings replaced by a marker."""
    if isinstance(v, list):
        return [_skeleton(x) for x in v]
    if isinstance(v, bytes):
        return "bulk"
    return v


def check_hrandfield(p: diff.Pair, *argv: str) -> None:
    ra, rb = p.both(*argv)
    assert ra[:1] == rb[:1], f"{argv}: pyrepl {ra!r} redis {rb!r}"
    if ra[:1] in (b"-", b"_") or ra in (b"$-1\r\n", b"*-1\r\n", b"*0\r\n"):
        assert ra == rb, f"{argv}: pyrepl {ra!r} redis {rb!r}"
        return
    va, vb = parse_reply(ra), parse_reply(rb)
    assert _skeleton(va) == _skeleton(vb), f"{argv}: pyrepl {ra!r} redis {rb!r}"
    for client, reply in ((p.a, va), (p.b, vb)):
        flat = parse_reply(client.call("HGETALL", argv[1]))
        if isinstance(flat, dict):
            h = flat
        else:
            h = dict(zip(flat[0::2], flat[1::2], strict=True))
        if isinstance(reply, bytes):  # no count: one field
            assert reply in h
            continue
        count = int(argv[2])
        withvalues = len(argv) == 4
        if withvalues and reply and isinstance(reply[0], list):
            pairs = [tuple(x) for x in reply]
        elif withvalues:
            pairs = list(zip(reply[0::2], reply[1::2], strict=True))
        else:
            pairs = [(f, h.get(f)) for f in reply]
        for f, v in pairs:
            assert f in h and h[f] == v, f"{argv}: {f!r}={v!r} not in {h}"
        fields = [f for f, _ in pairs]
        if count > 0:
            assert len(fields) == min(count, len(h))
            assert len(set(fields)) == len(fields), f"{argv}: repeated fields {fields}"
        else:
            assert len(fields) == -count


@pytest.mark.parametrize("proto", [2, 3])
def test_hrandfield_random_forms(pair):
    pair.check("HSET", "r", *[x for i in range(10) for x in (f"f{i}", f"v{i}")])
    pair.check("HSET", "one", "only", "1")
    for argv in (("r",), ("r", "1"), ("r", "3"), ("r", "9"), ("r", "10"), ("r", "50"),
                 ("r", "-1"), ("r", "-30"), ("r", "1", "WITHVALUES"),
                 ("r", "4", "withvalues"), ("r", "10", "WITHVALUES"),
                 ("r", "20", "WITHVALUES"), ("r", "-1", "WITHVALUES"),
                 ("r", "-25", "WITHVALUES"), ("one",), ("one", "5"), ("one", "-3"),
                 ("one", "-3", "WITHVALUES")):
        for _ in range(5):
            check_hrandfield(pair, "HRANDFIELD", *argv)


# -- random command sequences --------------------------------------------------------------
#
# As in test_diff_lists: hypothesis draws a seed, ``random.Random(seed)`` builds the commands
# with explicit weights (values stay short, so Redis keeps every hash as a listpack and HSCAN
# and HGETALL order must match exactly).

KEYS = ["k0", "k1", "k2", "k3"]
FIELDS = ["f1", "f2", "f3", "n", "x1"]
VALS = ["a", "b", "1", "-2", "1.5", "", " 3", "abc", BIG, "0x10", "inf", "1e3"]
BAD_INTS = ["x", "1.5", "", "-0", "+1", " 1", "01", BIG, SMALL, "9223372036854775808"]
FLOATS = ["0.1", "-1.5", "1e3", "3", "-0.25", "1e-3", "0x10", "abc", "inf", "nan", "",
          "5e-324", "-7.125", "1e30"]
PATTERNS = ["*", "f*", "n", "[fn]*", "*1", "?2", "x*", "z*"]


def rand_int(rnd: random.Random) -> str:
    if rnd.random() < 0.12:
        return rnd.choice(BAD_INTS)
    return str(rnd.randint(-6, 6))


def rand_command(rnd: random.Random) -> tuple[str, ...]:
    k = rnd.choice(KEYS)
    f = rnd.choice(FIELDS)
    v = rnd.choice(VALS)
    kind = rnd.choices(
        ["hset", "hsetnx", "hmset", "hget", "hmget", "hdel", "hlen", "hexists", "hgetall",
         "hkeys", "hvals", "hincrby", "hincrbyfloat", "hstrlen", "hscan", "hrandfield",
         "rpush", "arity"],
        weights=[8, 2, 1, 3, 2, 3, 1, 1, 2, 1, 1, 3, 3, 1, 2, 2, 0.3, 0.3])[0]
    if kind in ("hset", "hmset"):
        pairs = [x for _ in range(rnd.randint(1, 3))
                 for x in (rnd.choice(FIELDS), rnd.choice(VALS))]
        if rnd.random() < 0.05:
            pairs.pop()
        return ("HSET" if kind == "hset" else "HMSET", k, *pairs)
    if kind == "hsetnx":
        return ("HSETNX", k, f, v)
    if kind == "hget":
        return ("HGET", k, f)
    if kind == "hmget":
        return ("HMGET", k, *rnd.choices(FIELDS, k=rnd.randint(1, 3)))
    if kind == "hdel":
        return ("HDEL", k, *rnd.choices(FIELDS, k=rnd.randint(1, 3)))
    if kind in ("hlen", "hgetall", "hkeys", "hvals"):
        return (kind.upper(), k)
    if kind == "hexists":
        return ("HEXISTS", k, f)
    if kind == "hstrlen":
        return ("HSTRLEN", k, f)
    if kind == "hincrby":
        return ("HINCRBY", k, f, rand_int(rnd))
    if kind == "hincrbyfloat":
        return ("HINCRBYFLOAT", k, f, rnd.choice(FLOATS))
    if kind == "hscan":
        opts: list[str] = []
        if rnd.random() < 0.5:
            opts += ["MATCH", rnd.choice(PATTERNS)]
        if rnd.random() < 0.3:
            opts += ["COUNT", rand_int(rnd)]
        cursor = "0" if rnd.random() < 0.9 else rnd.choice(["5", "x", "-1"])
        return ("HSCAN", k, cursor, *opts)
    if kind == "hrandfield":
        extra = rnd.choice([(), (rand_int(rnd),), (rand_int(rnd), "WITHVALUES")])
        return ("HRANDFIELD", k, *extra)
    if kind == "rpush":
        return ("RPUSH", k, v)
    return rnd.choice([("HLEN",), ("HSET", k, f), ("HGET", k), ("HINCRBY", k, f),
                       ("HRANDFIELD",), ("HSCAN", k)])


def check(p: diff.Pair, *argv: str) -> None:
    """``Pair.check``, or the shape-and-membership comparison of HRANDFIELD's random picks."""
    if argv[0] == "HRANDFIELD" and len(argv) >= 2:
        check_hrandfield(p, *argv)
    else:
        p.check(*argv)


@diff.sequence_settings(100)
@given(proto=diff.PROTOS, seed=diff.SEEDS, n=st.integers(5, 40))
def test_random_sequences(pairs, proto, seed, n):
    rnd = random.Random(seed)
    final = [(name, key, *args) for key in KEYS for name, *args in
             (("HGETALL",), ("HSCAN", "0"), ("LRANGE", "0", "-1"))]
    diff.run_sequence(pairs[proto], (rand_command(rnd) for _ in range(n)), check=check, final=final)


# -- propagation ---------------------------------------------------------------------------

PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "1"), ("HMSET", "h", "c", "3"),
    ("HSETNX", "h", "a", "9"), ("HSETNX", "h", "d", "4"), ("HDEL", "h", "zz"),
    ("HDEL", "h", "d", "zz"), ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "a", "x"),
    ("HINCRBYFLOAT", "h", "f", "1.5"), ("HINCRBYFLOAT", "h", "f", "0.1"),
    ("HINCRBYFLOAT", "h", "f", "1e400"), ("HINCRBYFLOAT", "h", "g", "0x10"),
    ("HINCRBYFLOAT", "h", "f", "abc"), ("HGET", "h", "f"), ("HDEL", "h", "a", "b", "c", "n"),
    ("HDEL", "h", "f", "g"), ("HLEN", "h"), ("HSET", "h", "x"),
]


def test_propagation(tapped_redis):
    diff.check_propagation(tapped_redis.port, PROPAGATION_CASES)
