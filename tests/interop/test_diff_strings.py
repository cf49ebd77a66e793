"""Differential tests of the string commands: pyrepl against real redis-server 7.0.15.

A hand-written table of edge cases (every option and error) replayed in RESP2 and RESP3 with
every reply compared byte for byte; INCRBYFLOAT's 80-bit long double arithmetic and
``%.17Lf`` formatting over many awkward operands; a hypothesis test of random command
sequences over a few keys; and a propagation check (what pyrepl's core hands to replication
against what Redis sends a replica), using the taps of tests/support/differential.py.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import differential as diff
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

FUTURE_S = "4102444800"
FUTURE_MS = "4102444800123"
BIG = "9223372036854775807"
SMALL = "-9223372036854775808"

CASES: list[tuple[str, ...]] = [
    # SET and its options
    ("SET", "k", "v"), ("GET", "k"), ("SET", "k", "v2", "NX"), ("GET", "k"),
    ("SET", "k", "v3", "XX"), ("GET", "k"), ("SET", "n", "v", "XX"), ("EXISTS", "n"),
    ("SET", "k", "v", "NX", "XX"), ("SET", "k", "v", "XX", "NX"), ("SET", "k", "v", "nx", "nx"),
    ("SET", "k", "v", "EX"), ("SET", "k", "v", "EX", "0"), ("SET", "k", "v", "EX", "-1"),
    ("SET", "k", "v", "EX", "abc"), ("SET", "k", "v", "EX", "1.5"), ("SET", "k", "v", "PX", "0"),
    ("SET", "k", "v", "EX", "9223372036854775"), ("SET", "k", "v", "EX", "9223372036854776"),
    ("SET", "k", "v", "PX", BIG), ("SET", "k", "v", "PX", "9223372036854775000"),
    ("SET", "k", "v", "EXAT", BIG), ("SET", "k", "v", "PXAT", BIG), ("PEXPIRETIME", "k"),
    ("SET", "k", "v", "EXAT", "9223372036854775"), ("PEXPIRETIME", "k"),
    ("SET", "k", "v", "EXAT", "0"), ("SET", "k", "v", "PXAT", "-5"),
    ("SET", "k", "v", "EX", "10", "PX", "100"), ("SET", "k", "v", "PX", "10", "EX", "100"),
    ("SET", "k", "v", "EX", "10", "EXAT", FUTURE_S), ("SET", "k", "v", "PXAT", "1", "EX", "1"),
    ("SET", "k", "v", "EX", "10", "KEEPTTL"), ("SET", "k", "v", "KEEPTTL", "EX", "10"),
    ("SET", "k", "v", "KEEPTTL", "PXAT", FUTURE_MS),
    ("SET", "k", "v", "EXAT", FUTURE_S), ("PEXPIRETIME", "k"),
    ("SET", "k", "v", "PXAT", FUTURE_MS), ("PEXPIRETIME", "k"),
    ("SET", "k", "v", "KEEPTTL"), ("PEXPIRETIME", "k"), ("SET", "k", "v", "keepttl", "KEEPTTL"),
    ("PEXPIRETIME", "k"), ("SET", "k", "v"), ("PEXPIRETIME", "k"),
    ("SET", "k", "v", "EX", "100", "EX", "200"), ("TTL", "k"),
    ("SET", "k", "v", "PX", "100000", "px", "200000"), ("TTL", "k"),
    ("SET", "k", "new", "GET"), ("GET", "k"), ("SET", "missing", "x", "GET"),
    ("SET", "k", "x", "NX", "GET"), ("GET", "k"), ("SET", "k2", "x", "XX", "GET"),
    ("EXISTS", "k2"), ("SET", "k", "y", "XX", "GET", "EX", "100"), ("TTL", "k"),
    ("SET", "k", "z", "GET", "GET", "KEEPTTL"), ("TTL", "k"), ("SET", "k", "v", "get", "PX"),
    ("RPUSH", "l", "a"), ("SET", "l", "x", "GET"), ("LRANGE", "l", "0", "-1"),
    ("SET", "l", "x", "NX", "GET"), ("SET", "l", "x", "GET", "EX", "0"), ("SET", "l", "x"),
    ("TYPE", "l"), ("GET", "l"),
    ("SET", "k", "v", "PERSIST"), ("SET", "k", "v", "FOO"), ("SET", "k"), ("SET",),
    ("SET", "k", "v", "EXAT", "1"), ("GET", "k"), ("EXISTS", "k"),
    ("SET", "k", "v", "EXAT", "1", "GET"), ("SET", "k", "", "EX", "5"), ("GET", "k"),
    ("set", "k", "\x00\xff binary \r\n"), ("GET", "k"), ("STRLEN", "k"),
    # SETNX / SETEX / PSETEX
    ("SETNX", "nx", "1"), ("SETNX", "nx", "2"), ("GET", "nx"), ("SETNX", "nx"),
    ("SETNX", "l", "x"),
    ("SETEX", "se", "100", "v"), ("TTL", "se"), ("GET", "se"), ("SETEX", "se", "0", "v"),
    ("SETEX", "se", "-10", "v"), ("SETEX", "se", "x", "v"), ("SETEX", "se", "100"),
    ("SETEX", "se", "9223372036854776", "v"), ("SETEX", "l", "100", "v"), ("TYPE", "l"),
    ("PSETEX", "pse", "100000", "v"), ("TTL", "pse"), ("PSETEX", "pse", "0", "v"),
    ("PSETEX", "pse", BIG, "v"), ("PSETEX", "pse", "x", "v"), ("GET", "pse"),
    # MGET / MSET / MSETNX
    ("RPUSH", "list", "a"), ("MGET", "k", "nx", "nokey", "list", "k"), ("MGET",),
    ("MSET", "m1", "a", "m2", "b"), ("MGET", "m1", "m2"), ("MSET", "m1"),
    ("MSET", "m1", "a", "m2"), ("MSET",), ("MSET", "m1", "x", "m1", "y"), ("GET", "m1"),
    ("SET", "mt", "v", "EX", "100"), ("MSET", "mt", "w"), ("TTL", "mt"), ("MSET", "list", "s"),
    ("TYPE", "list"),
    ("MSETNX", "x1", "a", "x2", "b"), ("MSETNX", "x2", "c", "x3", "d"), ("EXISTS", "x3"),
    ("MSETNX", "x4", "a", "x4", "b"), ("GET", "x4"), ("MSETNX", "x5"), ("MSETNX", "x5", "a", "x6"),
    # GETSET / GETDEL / GETEX
    ("GETSET", "gs", "1"), ("GETSET", "gs", "2"), ("GET", "gs"), ("RPUSH", "gl", "a"),
    ("GETSET", "gl", "x"), ("GETSET", "gs"), ("SET", "gst", "v", "EX", "100"),
    ("GETSET", "gst", "w"), ("TTL", "gst"),
    ("GETDEL", "gs"), ("GETDEL", "gs"), ("GETDEL", "gl"), ("EXISTS", "gl"), ("GETDEL",),
    ("SET", "ge", "v"), ("GETEX", "ge"), ("TTL", "ge"), ("GETEX", "ge", "EX", "100"),
    ("TTL", "ge"), ("GETEX", "ge", "PX", "200000"), ("TTL", "ge"), ("GETEX", "ge", "PERSIST"),
    ("TTL", "ge"), ("GETEX", "ge", "EXAT", FUTURE_S), ("PEXPIRETIME", "ge"),
    ("GETEX", "ge", "PXAT", FUTURE_MS), ("PEXPIRETIME", "ge"), ("GETEX", "ge", "persist"),
    ("GETEX", "ge", "EX", "0"), ("GETEX", "ge", "EX", "-1"), ("GETEX", "ge", "EX", "x"),
    ("GETEX", "ge", "EX"), ("GETEX", "ge", "EX", "1", "PX", "1"), ("GETEX", "ge", "PERSIST", "EX", "1"),
    ("GETEX", "ge", "EX", "1", "PERSIST"), ("GETEX", "ge", "KEEPTTL"), ("GETEX", "ge", "NX"),
    ("GETEX", "ge", "GET"), ("GETEX", "ge", "FOO"), ("GETEX", "nokey", "EX", "x"),
    ("GETEX", "nokey", "FOO"), ("GETEX", "gl2"), ("RPUSH", "gl2", "a"), ("GETEX", "gl2"),
    ("GETEX", "gl2", "EX", "x"), ("GETEX", "ge", "EX", "9223372036854776"),
    ("GETEX", "ge", "PX", BIG), ("GETEX", "ge", "EX", "100", "EX", "200"), ("TTL", "ge"),
    ("GETEX", "ge", "EXAT", "1"), ("EXISTS", "ge"), ("SET", "ge", "v"),
    ("GETEX", "ge", "PXAT", "1"), ("GET", "ge"), ("GETEX",),
    # APPEND / STRLEN
    ("APPEND", "ap", "hello"), ("APPEND", "ap", " world"), ("GET", "ap"), ("STRLEN", "ap"),
    ("APPEND", "ap", ""), ("APPEND", "new", ""), ("EXISTS", "new"), ("APPEND", "list", "x"),
    ("STRLEN", "nokey"), ("STRLEN", "gl2"), ("SET", "num", "123"), ("APPEND", "num", "4"),
    ("GET", "num"), ("INCR", "num"), ("STRLEN", "num"), ("APPEND", "ap"),
    # SETRANGE / GETRANGE / SUBSTR
    ("SETRANGE", "sr", "5", "abc"), ("GET", "sr"), ("SETRANGE", "sr", "0", "XY"), ("GET", "sr"),
    ("SETRANGE", "sr", "7", "LONGER"), ("GET", "sr"), ("SETRANGE", "sr", "20", ""),
    ("GET", "sr"), ("SETRANGE", "nosr", "5", ""), ("EXISTS", "nosr"), ("SETRANGE", "sr", "-1", "x"),
    ("SETRANGE", "sr", "x", "x"), ("SETRANGE", "gl2", "0", "x"), ("SETRANGE", "gl2", "0", ""),
    ("SETRANGE", "sr", "536870912", "x"), ("SETRANGE", "sr", "536870900", "x" * 20),
    ("SETRANGE", "big", "536870912", "x"), ("SETRANGE", "big", BIG, "x"), ("EXISTS", "big"),
    ("SETRANGE", "sr", "1", "\x00"), ("GET", "sr"), ("SET", "n2", "99"), ("SETRANGE", "n2", "2", "9"),
    ("GET", "n2"),
    ("SET", "gr", "Hello World"), ("GETRANGE", "gr", "0", "4"), ("GETRANGE", "gr", "-5", "-1"),
    ("GETRANGE", "gr", "-1", "-5"), ("GETRANGE", "gr", "5", "3"), ("GETRANGE", "gr", "0", "-1"),
    ("GETRANGE", "gr", "0", "100"), ("GETRANGE", "gr", "-100", "-50"), ("GETRANGE", "gr", "-100", "2"),
    ("GETRANGE", "gr", "20", "30"), ("GETRANGE", "gr", SMALL, BIG), ("GETRANGE", "gr", "x", "1"),
    ("GETRANGE", "nokey", "0", "1"), ("GETRANGE", "nokey", "x", "1"), ("GETRANGE", "gl2", "0", "1"),
    ("GETRANGE", "gr", "0"), ("SET", "e", ""), ("GETRANGE", "e", "0", "-1"), ("GETRANGE", "e", "0", "0"),
    ("SUBSTR", "gr", "0", "4"), ("SUBSTR", "gr", "-3", "-1"), ("SUBSTR", "gl2", "0", "1"),
    ("SET", "i", "12345"), ("GETRANGE", "i", "1", "2"),
    # INCR / DECR / INCRBY / DECRBY
    ("INCR", "c"), ("INCR", "c"), ("DECR", "c"), ("INCRBY", "c", "10"), ("DECRBY", "c", "3"),
    ("INCRBY", "c", "-20"), ("DECRBY", "c", "-5"), ("GET", "c"), ("INCRBY", "c", "x"),
    ("INCRBY", "c", "1.5"), ("INCRBY", "c", ""), ("INCRBY", "c", " 1"), ("INCRBY", "c", "+1"),
    ("INCRBY", "c", "01"), ("INCRBY", "c", "-0"), ("INCRBY", "c", "9223372036854775808"),
    ("DECRBY", "c", SMALL), ("DECRBY", "c", BIG), ("INCRBY", "c", SMALL),
    ("SET", "c", BIG), ("INCR", "c"), ("INCRBY", "c", "0"), ("DECR", "c"), ("GET", "c"),
    ("SET", "c", SMALL), ("DECR", "c"), ("INCR", "c"), ("GET", "c"),
    # across 2^62, where a counter stops fitting pyrepl's tagged int (the C INCR stored the
    # four bytes "%lld" there once)
    ("SET", "c", "4611686018427387903"), ("INCR", "c"), ("GET", "c"), ("INCRBY", "c", "7"),
    ("GET", "c"), ("DECRBY", "c", "8"), ("GET", "c"), ("SET", "c", "-4611686018427387904"),
    ("DECR", "c"), ("GET", "c"), ("DECRBY", "c", "100"), ("INCR", "c"), ("GET", "c"),
    ("SET", "c", "abc"), ("INCR", "c"), ("SET", "c", " 1"), ("INCR", "c"), ("SET", "c", "1 "),
    ("INCR", "c"), ("SET", "c", "01"), ("INCR", "c"), ("SET", "c", "-0"), ("DECR", "c"),
    ("SET", "c", "+5"), ("INCR", "c"), ("SET", "c", "1.0"), ("INCR", "c"), ("SET", "c", ""),
    ("INCR", "c"), ("SET", "c", "12345678901234567890"), ("INCR", "c"), ("INCR", "gl2"),
    ("INCRBY", "gl2", "x"), ("DECR", "gl2"), ("INCR",), ("INCRBY", "c"),
    ("SET", "ct", "5", "EX", "100"), ("INCR", "ct"), ("TTL", "ct"), ("INCRBY", "ct", "5"),
    ("TTL", "ct"),
    # INCRBYFLOAT
    ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "-1.6"),
    ("GET", "f"), ("INCRBYFLOAT", "f", "x"), ("INCRBYFLOAT", "f", "inf"),
    ("INCRBYFLOAT", "f", "-inf"), ("INCRBYFLOAT", "f", "nan"), ("INCRBYFLOAT", "f", ""),
    ("INCRBYFLOAT", "f", " 1"), ("INCRBYFLOAT", "f", "1 "), ("INCRBYFLOAT", "f", "1e"),
    ("INCRBYFLOAT", "f", "5.0e3"), ("INCRBYFLOAT", "f", "1e4932"), ("INCRBYFLOAT", "f", "1e4933"),
    ("INCRBYFLOAT", "f2", "1.18e4932"), ("INCRBYFLOAT", "f2", "1.18e4932"), ("GET", "f2"),
    ("INCRBYFLOAT", "f", "0x10"), ("INCRBYFLOAT", "f", "0x1p-3"), ("INCRBYFLOAT", "f", "0x"),
    ("INCRBYFLOAT", "f", "1e-5000"), ("INCRBYFLOAT", "f", "-1e-4940"), ("GET", "f"),
    ("INCRBYFLOAT", "gl2", "1"), ("SET", "f3", "abc"), ("INCRBYFLOAT", "f3", "1"),
    ("SET", "f3", "1.5"), ("INCRBYFLOAT", "f3", "1"), ("SET", "f3", " 1.5"),
    ("INCRBYFLOAT", "f3", "1"), ("SET", "f3", "10"), ("INCRBYFLOAT", "f3", "-10"),
    ("GET", "f3"), ("INCRBYFLOAT", "f3", "-0.0000000000000000001"), ("GET", "f3"),
    ("SET", "ft", "1", "EX", "100"), ("INCRBYFLOAT", "ft", "1"), ("TTL", "ft"),
    ("INCRBYFLOAT", "f4", "1e300"), ("INCRBYFLOAT", "f4", "-1e300"),
    ("INCRBYFLOAT", "f5", "123456789012345678901234567890"), ("INCRBYFLOAT", "f5", "0.5"),
    ("INCRBYFLOAT", "f6", "0.000003814697265625"), ("INCRBYFLOAT", "f7", "2.5e-17"),
    ("INCRBYFLOAT", "f8", "7.5e-17"), ("INCRBYFLOAT",), ("INCRBYFLOAT", "f"),
    # strtold's ERANGE: a non-zero value that rounds to zero is not a valid float (the
    # smallest subnormal long double is about 3.6e-4951), one that rounds up to it is
    ("INCRBYFLOAT", "u", "1e-4952"), ("INCRBYFLOAT", "u", "-1e-4952"),
    ("INCRBYFLOAT", "u", "1e-4951"), ("INCRBYFLOAT", "u", "1.8e-4951"),
    ("INCRBYFLOAT", "u", "0x1p-16446"), ("EXISTS", "u"), ("INCRBYFLOAT", "u", "1.9e-4951"),
    ("INCRBYFLOAT", "u", "0x1p-16445"), ("INCRBYFLOAT", "u", "0e-99999999999"), ("GET", "u"),
    # infinities are valid floats whose sum is not; nan and partial spellings are not floats
    ("INCRBYFLOAT", "u", "inf"), ("INCRBYFLOAT", "u", "+INF"), ("INCRBYFLOAT", "u", "-Infinity"),
    ("INCRBYFLOAT", "u", "infinit"), ("INCRBYFLOAT", "u", "NaN"), ("INCRBYFLOAT", "u", "1\x00"),
    # exponents without significant digits
    ("INCRBYFLOAT", "u", "1e0"), ("INCRBYFLOAT", "u", "2E+00"), ("INCRBYFLOAT", "u", "1e-0"),
    ("GET", "u"),
    # the stored value goes through the same parser
    ("SET", "u2", "1e-4952"), ("INCRBYFLOAT", "u2", "1"), ("SET", "u2", "inf"),
    ("INCRBYFLOAT", "u2", "1"), ("SET", "u2", "-inf"), ("INCRBYFLOAT", "u2", "inf"),
    ("SET", "u2", "1\x00"), ("INCRBYFLOAT", "u2", "1"), ("SET", "u2", "1e0"),
    ("INCRBYFLOAT", "u2", "1"), ("SET", "u2", "0x1p-16445"), ("INCRBYFLOAT", "u2", "0"),
    ("GET", "u2"),
    # INCR/DECR/INCRBY around the shared small integers (0..9999) and the 18-digit fast path
    ("SET", "s", "9998"), ("INCR", "s"), ("INCR", "s"), ("DECR", "s"), ("INCRBY", "s", "-9999"),
    ("DECR", "s"), ("INCR", "s"), ("INCR", "s"), ("GET", "s"), ("SET", "s", "0"), ("INCR", "s"),
    ("SET", "s", "00"), ("INCR", "s"), ("SET", "s", "999999999999999999"), ("INCR", "s"),
    ("INCR", "s"), ("SET", "s", "9223372036854775806"), ("INCR", "s"), ("INCR", "s"),
    ("SET", "s", "-5"), ("INCR", "s"), ("SET", "s", "5", "EX", "100"), ("INCR", "s"),
    ("TTL", "s"), ("GET", "s"),
    # LCS
    ("SET", "la", "ohmytext"), ("SET", "lb", "mynewtext"), ("LCS", "la", "lb"),
    ("LCS", "la", "lb", "LEN"), ("LCS", "la", "lb", "IDX"), ("LCS", "la", "lb", "IDX",
                                                            "MINMATCHLEN", "4"),
    ("LCS", "la", "lb", "IDX", "WITHMATCHLEN"), ("LCS", "la", "lb", "IDX", "MINMATCHLEN", "-1",
                                                 "WITHMATCHLEN"),
    ("LCS", "la", "lb", "LEN", "IDX"), ("LCS", "la", "lb", "FOO"), ("LCS", "la", "lb", "MINMATCHLEN"),
    ("LCS", "la", "lb", "MINMATCHLEN", "x"), ("LCS", "la", "nokey"), ("LCS", "nokey", "nokey", "IDX"),
    ("LCS", "la", "gl2"), ("LCS", "gl2", "nokey", "FOO"), ("LCS", "la"), ("LCS", "la", "la", "IDX"),
]


def check(p: diff.Pair, *argv: str) -> None:
    """``Pair.check``; TTL within a second (both servers run it a few ms apart)."""
    if argv[0] == "TTL":
        diff.check_timed(p, argv, 1)
    else:
        p.check(*argv)


@pytest.mark.parametrize("proto", [2, 3])
def test_edge_cases(pair):
    for argv in CASES:
        check(pair, *argv)


def test_lazy_expiry(pair):
    pair.check("SET", "x", "v", "PX", "40")
    pair.check("SET", "y", "5", "PX", "40")
    wait_for(lambda: pair.both("GET", "x") == (b"$-1\r\n", b"$-1\r\n"), 5,
             what="the key to expire on both servers")
    wait_for(lambda: pair.both("EXISTS", "y") == (b":0\r\n", b":0\r\n"), 5,
             what="the key to expire on both servers")
    for argv in (("INCR", "y"), ("TTL", "y"), ("APPEND", "x", "a"), ("TTL", "x"),
                 ("SETRANGE", "z", "0", "")):
        pair.check(*argv)


def test_proto_max_bulk_len(pair):
    p = pair
    try:
        p.check("CONFIG", "SET", "proto-max-bulk-len", "1mb")
        for argv in (("SETRANGE", "s", "1048575", "x"), ("STRLEN", "s"),
                     ("SETRANGE", "s", "1048575", "xy"), ("SETRANGE", "s", "1048576", "x"),
                     ("APPEND", "s", "y"), ("SETRANGE", "s", "0", "abc"), ("GETRANGE", "s", "0", "3"),
                     ("DEL", "s"), ("SETRANGE", "t", "1048576", "x"), ("APPEND", "t", "abc"),
                     ("SETRANGE", "t", "1048573", "x"), ("APPEND", "t", "x" * 10),
                     ("SETRANGE", "t", "0", ""), ("SETRANGE", "t", "1048577", ""), ("STRLEN", "t")):
            p.check(*argv)
    finally:
        p.both("CONFIG", "SET", "proto-max-bulk-len", "512mb")


@pytest.mark.parametrize("proto", [2, 3])
def test_lcs_random_strings(pair, proto):
    """LCS, LEN and IDX (with Redis's backtracking tie-breaks) on random strings."""
    p = pair
    rnd = random.Random(11 + proto)
    for _ in range(150):
        alphabet = rnd.choice(["ab", "abc", "abcdefgh", "\x00\xff"])
        a = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        b = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40)))
        p.check("MSET", "a", a, "b", b)
        p.check("LCS", "a", "b")
        p.check("LCS", "b", "a", "LEN")
        p.check("LCS", "a", "b", "IDX", "WITHMATCHLEN")
        p.check("LCS", "a", "b", "IDX", "MINMATCHLEN", str(rnd.randint(0, 4)))
    big_a = "".join(rnd.choice("acgt") for _ in range(3000))
    big_b = "".join(rnd.choice("acgt") for _ in range(3000))
    p.check("MSET", "a", big_a, "b", big_b)
    p.check("LCS", "a", "b", "IDX", "MINMATCHLEN", "6", "WITHMATCHLEN")


def _float_operand(rnd: random.Random) -> str:
    kind = rnd.randrange(6)
    if kind == 0:
        return str(rnd.randint(-10**6, 10**6))
    if kind == 1:
        return f"{rnd.uniform(-1000, 1000):.{rnd.randint(0, 20)}f}"
    if kind == 2:
        return f"{rnd.uniform(1, 10):.{rnd.randint(1, 25)}f}e{rnd.randint(-40, 40)}"
    if kind == 3:
        return repr(rnd.uniform(-1e5, 1e5))
    if kind == 4:
        return f"0.{rnd.randint(0, 10**18):018d}"
    return f"{rnd.choice(['', '-'])}{rnd.randint(1, 9)}e{rnd.randint(-25, 25)}"


@pytest.mark.parametrize("proto", [2, 3])
def test_incrbyfloat_formatting(pair, proto):
    """Chains of INCRBYFLOAT with long-double rounding and %.17Lf output, byte for byte."""
    rnd = random.Random(7 + proto)
    for i in range(600):
        key = f"f{i % 7}"
        if rnd.random() < 0.1:
            pair.check("SET", key, _float_operand(rnd))
        pair.check("INCRBYFLOAT", key, _float_operand(rnd))


# -- random command sequences -------------------------------------------------------------------

KEYS = st.sampled_from(["k0", "k1", "k2", "k3"])
VALS = st.sampled_from(["a", "bc", "", "1", "-7", "10", "3.5", "x" * 45, BIG, "\xff\x00"])
INTS = st.one_of(st.integers(-12, 12).map(str),
                 st.sampled_from(["x", "1.5", "", "-0", BIG, SMALL, "9223372036854775808"]))
FLOATS = st.sampled_from(["1", "0.1", "-2.5", "1e3", "3.0e-2", "x", "inf", "", "-0",
                          "0x10", "1e4932", "123456789.123456789"])
EXPIRES = st.sampled_from([("EX", "100"), ("PX", "100000"), ("EXAT", FUTURE_S),
                           ("PXAT", FUTURE_MS), ("EXAT", "1"), ("PXAT", "2"), ("EX", "0"),
                           ("EX", "x"), ("PX", BIG), ("EX",), ("KEEPTTL",), ("PERSIST",)])
SET_OPTS = st.lists(st.one_of(st.sampled_from([("NX",), ("XX",), ("GET",), ("get",), ("BAD",)]),
                              EXPIRES), max_size=3).map(lambda xs: tuple(a for x in xs for a in x))

COMMAND = st.one_of(
    st.tuples(st.just("SET"), KEYS, VALS, SET_OPTS).map(lambda t: ("SET", t[1], t[2], *t[3])),
    st.tuples(st.just("SET"), KEYS, VALS),
    st.tuples(st.sampled_from(["SETNX", "GETSET", "APPEND"]), KEYS, VALS),
    st.tuples(st.sampled_from(["SETEX", "PSETEX"]), KEYS,
              st.sampled_from(["100", "100000", "0", "-1", "x"]), VALS),
    st.tuples(st.sampled_from(["GET", "GETDEL", "STRLEN", "INCR", "DECR", "TYPE", "EXISTS"]),
              KEYS),
    st.tuples(st.just("GETEX"), KEYS, st.lists(EXPIRES, max_size=2))
    .map(lambda t: ("GETEX", t[1], *(a for x in t[2] for a in x))),
    st.tuples(st.just("MGET"), st.lists(KEYS, min_size=1, max_size=4))
    .map(lambda t: ("MGET", *t[1])),
    st.tuples(st.sampled_from(["MSET", "MSETNX"]), st.lists(st.tuples(KEYS, VALS), max_size=3),
              st.booleans())
    .map(lambda t: (t[0], *(a for kv in t[1] for a in kv), *(("odd",) if t[2] else ()))),
    st.tuples(st.sampled_from(["INCRBY", "DECRBY"]), KEYS, INTS),
    st.tuples(st.just("INCRBYFLOAT"), KEYS, FLOATS),
    st.tuples(st.sampled_from(["GETRANGE", "SUBSTR"]), KEYS, INTS, INTS),
    st.tuples(st.just("SETRANGE"), KEYS, st.sampled_from(["0", "1", "3", "10", "-1", "x"]),
              VALS),
    st.tuples(st.just("LCS"), KEYS, KEYS, st.sampled_from(
        [(), ("LEN",), ("IDX",), ("IDX", "WITHMATCHLEN"), ("IDX", "MINMATCHLEN", "2")]))
    .map(lambda t: ("LCS", t[1], t[2], *t[3])),
    st.tuples(st.just("RPUSH"), KEYS, VALS),
    st.tuples(st.just("DEL"), KEYS),
    st.tuples(st.just("TTL"), KEYS),
)


@diff.sequence_settings(100)
@given(proto=diff.PROTOS, cmds=st.lists(COMMAND, min_size=5, max_size=30))
def test_random_sequences(pairs, proto, cmds):
    p = pairs[proto]
    diff.run_sequence(p, cmds, check=check)
    for key in ("k0", "k1", "k2", "k3"):
        p.check("TYPE", key)
        ra, rb = p.both("GET", key)
        if not (ra.startswith(b"-") and rb.startswith(b"-")):
            assert ra == rb, (key, ra, rb)
        diff.check_timed(p, ("PTTL", key), 1000)


# -- propagation ---------------------------------------------------------------------------------

PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("SET", "a", "1"), ("SET", "a", "2", "NX"), ("SET", "a", "3", "XX"),
    ("SET", "a", "4", "GET"), ("SET", "a", "5", "NX", "GET"), ("SET", "a", "6", "XX", "get"),
    ("SET", "a", "7", "EX", "100"), ("SET", "a", "8", "PX", "100000", "GET"),
    ("SET", "a", "9", "EXAT", FUTURE_S), ("SET", "a", "10", "PXAT", FUTURE_MS, "XX"),
    ("SET", "a", "11", "KEEPTTL"), ("SET", "a", "12", "KEEPTTL", "GET"),
    ("SET", "a", "13", "EX", "0"), ("SET", "a", "14", "EXAT", "1"),
    ("SETNX", "b", "1"), ("SETNX", "b", "2"), ("SETEX", "c", "100", "v"),
    ("PSETEX", "c", "100000", "v"), ("MSET", "d", "1", "e", "2"), ("MSETNX", "d", "1", "f", "2"),
    ("MSETNX", "g", "1", "h", "2"), ("GETSET", "g", "new"), ("GETDEL", "g"), ("GETDEL", "g"),
    ("GETEX", "h"), ("GETEX", "h", "EX", "100"), ("GETEX", "h", "PX", "100000"),
    ("GETEX", "h", "EXAT", FUTURE_S), ("GETEX", "h", "PXAT", FUTURE_MS),
    ("GETEX", "h", "PERSIST"), ("GETEX", "h", "PERSIST"), ("GETEX", "h", "PXAT", "1"),
    ("GETEX", "nokey", "EX", "100"), ("SET", "h", "x"), ("GETEX", "h", "EXAT", "1"),
    ("APPEND", "i", "abc"), ("APPEND", "i", ""), ("SETRANGE", "i", "1", "Z"),
    ("SETRANGE", "i", "1", ""), ("SETRANGE", "j", "3", ""), ("SETRANGE", "j", "3", "x"),
    ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "5"), ("DECRBY", "n", "2"), ("INCR", "i"),
    ("INCRBYFLOAT", "fl", "1.5"), ("INCRBYFLOAT", "fl", "0.1"), ("SET", "fl", "3", "EX", "100"),
    ("INCRBYFLOAT", "fl", "1e3"), ("INCRBYFLOAT", "fl", "x"), ("GET", "fl"), ("STRLEN", "fl"),
    ("MGET", "a", "b"), ("GETRANGE", "i", "0", "-1"), ("LCS", "a", "i"),
]


def test_propagation(tapped_redis):
    diff.check_propagation(tapped_redis.port, PROPAGATION_CASES)


def test_lazy_expiry_propagation(tapped_redis):
    """A write that finds its key expired propagates the DEL first, as Redis does."""
    with diff.PropagationTaps(tapped_redis.port) as taps:
        for argv in (("SET", "x", "1", "PX", "30"), ("SET", "y", "1", "PX", "30"),
                     ("SET", "z", "1", "PX", "30")):
            taps.redis(*argv)
            taps.pyrepl(*argv)
        # KEYS hides expired keys without deleting them: poll it on both sides.
        wait_for(lambda: taps.data.call("KEYS", "[xyz]") == b"*0\r\n", 5, what="redis expiry")
        wait_for(lambda: taps.pyrepl("KEYS", "[xyz]")[0] == b"*0\r\n", 5,
                 what="pyrepl expiry")
        for argv in (("SET", "x", "2"), ("INCR", "y"), ("GET", "z")):
            expected_reply, expected = taps.redis(*argv)
            reply, fed = taps.pyrepl(*argv)
            assert reply == expected_reply, argv
            assert diff.same_propagation(fed, expected), f"{argv}: {fed} != {expected}"
