"""Differential tests of the bitmap commands: pyrepl against real redis-server 7.0.15.

A table of edge cases (every option, range rule and error) replayed in RESP2 and RESP3 with
every reply compared byte for byte; a hypothesis test of random command sequences over a few
keys (values compared with GET at the end); BITFIELD's overflow arithmetic over random
widths, offsets and operands; and the propagation check (what pyrepl hands to replication
against what Redis sends a replica).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.differential import PROTOS, check_propagation, run_sequence, sequence_settings

pytestmark = [pytest.mark.slow, pytest.mark.interop]

I64MAX = "9223372036854775807"
I64MIN = "-9223372036854775808"

CASES: list[tuple[str, ...]] = [
    # SETBIT / GETBIT
    ("SETBIT", "b", "0", "1"), ("SETBIT", "b", "0", "1"), ("SETBIT", "b", "7", "1"),
    ("GET", "b"), ("SETBIT", "b", "100", "1"), ("STRLEN", "b"), ("GETBIT", "b", "100"),
    ("GETBIT", "b", "101"), ("GETBIT", "b", "99999"), ("GETBIT", "none", "3"),
    ("SETBIT", "b", "-1", "1"), ("SETBIT", "b", "x", "1"), ("SETBIT", "b", "1", "2"),
    ("SETBIT", "b", "1", "-1"), ("SETBIT", "b", "1", "x"), ("SETBIT", "b", "4294967296", "1"),
    ("SETBIT", "b", "1"), ("GETBIT", "b"), ("GETBIT", "b", "-1"),
    ("SET", "s", "foobar"), ("GETBIT", "s", "1"), ("SETBIT", "s", "1", "0"), ("GET", "s"),
    ("SET", "n", "12345"), ("GETBIT", "n", "2"), ("SETBIT", "n", "2", "0"), ("GET", "n"),
    ("RPUSH", "l", "a"), ("SETBIT", "l", "1", "1"), ("GETBIT", "l", "1"),
    ("SET", "t", "x", "EX", "100"), ("SETBIT", "t", "20", "1"), ("TTL", "t"),
    # BITCOUNT
    ("SET", "c", "foobar"), ("BITCOUNT", "c"), ("BITCOUNT", "c", "0", "0"),
    ("BITCOUNT", "c", "1", "1"), ("BITCOUNT", "c", "1", "-1"), ("BITCOUNT", "c", "-2", "-1"),
    ("BITCOUNT", "c", "-1", "-2"), ("BITCOUNT", "c", "5", "30", "BIT"),
    ("BITCOUNT", "c", "5", "30", "bit"), ("BITCOUNT", "c", "0", "-1", "BYTE"),
    ("BITCOUNT", "c", "-100", "100"), ("BITCOUNT", "c", "3", "2"), ("BITCOUNT", "c", "1"),
    ("BITCOUNT", "c", "1", "2", "BITS"), ("BITCOUNT", "c", "x", "2"),
    ("BITCOUNT", "c", "0", "47", "BIT"), ("BITCOUNT", "c", "47", "47", "BIT"),
    ("BITCOUNT", "none"), ("BITCOUNT", "l"), ("BITCOUNT", "n"), ("BITCOUNT", "c", "0", "1", "2"),
    # BITPOS
    ("SET", "p", "\xff\xf0\x00"), ("BITPOS", "p", "0"), ("BITPOS", "p", "1"),
    ("BITPOS", "p", "1", "2"), ("BITPOS", "p", "0", "0", "0"), ("BITPOS", "p", "0", "-1"),
    ("BITPOS", "p", "1", "1", "-1", "BIT"), ("BITPOS", "p", "0", "3", "10", "BIT"),
    ("BITPOS", "p", "0", "0", "7", "BIT"), ("BITPOS", "p", "0", "12", "BIT"),
    ("BITPOS", "p", "1", "7", "15", "bit"), ("BITPOS", "p", "1", "16", "-1", "BIT"),
    ("SET", "ones", "\xff\xff"), ("BITPOS", "ones", "0"), ("BITPOS", "ones", "0", "0"),
    ("BITPOS", "ones", "0", "0", "-1"), ("BITPOS", "ones", "0", "0", "-1", "BIT"),
    ("SET", "zeros", "\x00\x00"), ("BITPOS", "zeros", "1"), ("BITPOS", "zeros", "0"),
    ("BITPOS", "none", "0"), ("BITPOS", "none", "1"), ("BITPOS", "p", "2"),
    ("BITPOS", "p", "x"), ("BITPOS", "p", "1", "x"), ("BITPOS", "p", "1", "0", "x"),
    ("BITPOS", "p", "1", "0", "1", "BOTH"), ("BITPOS", "l", "1"), ("BITPOS", "p", "1", "3", "2"),
    # BITOP
    ("SET", "a", "foof"), ("SET", "bb", "ba"), ("BITOP", "AND", "dest", "a", "bb"),
    ("GET", "dest"), ("BITOP", "or", "dest", "a", "bb", "none"), ("GET", "dest"),
    ("BITOP", "XOR", "dest", "a", "a"), ("GET", "dest"), ("BITOP", "NOT", "dest", "a"),
    ("GET", "dest"), ("BITOP", "NOT", "dest", "a", "bb"), ("BITOP", "NAND", "dest", "a"),
    ("BITOP", "AND", "dest", "none", "none2"), ("EXISTS", "dest"), ("BITOP", "AND", "dest", "l"),
    ("BITOP", "OR", "l", "a"), ("TYPE", "l"), ("GET", "l"), ("BITOP", "AND", "dest"),
    ("SET", "tt", "v", "EX", "100"), ("BITOP", "OR", "tt", "a"), ("TTL", "tt"),
    # BITFIELD / BITFIELD_RO
    ("BITFIELD", "f", "SET", "i8", "0", "-100", "GET", "i8", "0", "GET", "u8", "0"),
    ("BITFIELD", "f", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
     "1"),
    ("BITFIELD", "f", "OVERFLOW", "WRAP", "INCRBY", "i5", "#1", "100", "GET", "i5", "#1"),
    ("BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "i5", "#1", "100",
     "INCRBY", "i5", "#1", "-100"),
    ("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300", "GET", "u8", "0"),
    ("BITFIELD", "f", "SET", "u8", "0", "-1", "OVERFLOW", "SAT", "SET", "u8", "8", "1000",
     "OVERFLOW", "FAIL", "SET", "u8", "16", "256", "SET", "i8", "24", "-129"),
    ("BITFIELD", "f", "SET", "i64", "0", I64MAX, "INCRBY", "i64", "0", "1"),
    ("BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "i64", "0", "1", "INCRBY", "i64", "0",
     I64MIN, "INCRBY", "i64", "0", I64MIN),
    ("BITFIELD", "f", "SET", "u63", "1", "9223372036854775806", "INCRBY", "u63", "1", "5"),
    ("BITFIELD", "f", "GET", "u64", "0"), ("BITFIELD", "f", "GET", "i65", "0"),
    ("BITFIELD", "f", "GET", "i0", "0"), ("BITFIELD", "f", "GET", "x8", "0"),
    ("BITFIELD", "f", "GET", "i8", "-1"), ("BITFIELD", "f", "GET", "i8", "#-1"),
    ("BITFIELD", "f", "GET", "i8", "#x"), ("BITFIELD", "f", "SET", "i8", "0", "x"),
    ("BITFIELD", "f", "OVERFLOW", "MAYBE", "GET", "i8", "0"), ("BITFIELD", "f", "BOGUS"),
    ("BITFIELD", "f", "GET", "i8"), ("BITFIELD", "f"), ("BITFIELD", "f", "OVERFLOW", "SAT"),
    ("BITFIELD", "none", "GET", "u8", "0"), ("EXISTS", "none"), ("BITFIELD", "l", "GET", "u8",
                                                                    "0"),
    ("BITFIELD", "new", "INCRBY", "u8", "#2", "5"), ("GET", "new"),
    ("BITFIELD_RO", "f", "GET", "i8", "0", "GET", "u4", "#3"),
    ("BITFIELD_RO", "f", "SET", "i8", "0", "1"), ("BITFIELD_RO", "f", "INCRBY", "i8", "0", "1"),
    ("BITFIELD_RO", "none", "GET", "i8", "0"), ("BITFIELD_RO", "l", "GET", "i8", "0"),
    ("GET", "f"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_cases_byte_for_byte(pair) -> None:
    for argv in CASES:
        pair.check(*argv)


KEYS = st.sampled_from(["k0", "k1", "k2"])
OFFSETS = st.sampled_from(["0", "1", "7", "8", "15", "23", "63", "64", "100", "-1", "x"])
RANGES = st.sampled_from(["0", "1", "-1", "-2", "2", "5", "-100", "100", "9"])
TYPES = st.sampled_from(["u1", "u3", "u8", "i1", "i5", "i8", "i16", "u63", "i64", "u64"])
FIELD_OFFS = st.sampled_from(["0", "1", "5", "13", "#1", "#2", "60"])
VALUES = st.sampled_from(["0", "1", "-1", "5", "-100", "127", "128", "300", I64MAX, I64MIN])
FIELD_OP = st.one_of(
    st.tuples(st.just("GET"), TYPES, FIELD_OFFS),
    st.tuples(st.sampled_from(["SET", "INCRBY"]), TYPES, FIELD_OFFS, VALUES),
    st.tuples(st.just("OVERFLOW"), st.sampled_from(["WRAP", "SAT", "FAIL"])),
)

COMMAND = st.one_of(
    st.tuples(st.just("SETBIT"), KEYS, OFFSETS, st.sampled_from(["0", "1", "2"])),
    st.tuples(st.just("GETBIT"), KEYS, OFFSETS),
    st.tuples(st.just("BITCOUNT"), KEYS),
    st.tuples(st.just("BITCOUNT"), KEYS, RANGES, RANGES,
              st.sampled_from([(), ("BIT",), ("BYTE",)]))
    .map(lambda t: (*t[:4], *t[4])),
    st.tuples(st.just("BITPOS"), KEYS, st.sampled_from(["0", "1"]),
              st.lists(RANGES, max_size=2), st.sampled_from([(), ("BIT",), ("BYTE",)]))
    .map(lambda t: (*t[:3], *t[3], *(t[4] if len(t[3]) == 2 else ()))),
    st.tuples(st.just("BITOP"), st.sampled_from(["AND", "OR", "XOR", "NOT"]), KEYS,
              st.lists(KEYS, min_size=1, max_size=3))
    .map(lambda t: (*t[:3], *t[3])),
    st.tuples(st.sampled_from(["BITFIELD", "BITFIELD_RO"]), KEYS,
              st.lists(FIELD_OP, min_size=1, max_size=4))
    .map(lambda t: (t[0], t[1], *(a for op in t[2] for a in op))),
    st.tuples(st.just("SET"), KEYS, st.sampled_from(["", "a", "\xff\x00\x81", "foobar", "123"])),
    st.tuples(st.just("APPEND"), KEYS, st.sampled_from(["\x00", "\xff\xff"])),
    st.tuples(st.just("RPUSH"), KEYS, st.just("x")),
    st.tuples(st.just("DEL"), KEYS),
)


@sequence_settings(150)
@given(proto=PROTOS, cmds=st.lists(COMMAND, min_size=5, max_size=30))
def test_random_sequences(pairs, proto, cmds) -> None:
    run_sequence(pairs[proto], cmds, final=[(c, k) for k in ("k0", "k1", "k2")
                                              for c in ("TYPE", "GET")])


PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("SETBIT", "b", "10", "1"), ("SETBIT", "b", "10", "1"), ("SETBIT", "b", "10", "0"),
    ("SETBIT", "b", "100", "0"), ("GETBIT", "b", "10"),
    ("BITFIELD", "f", "GET", "u8", "0"), ("BITFIELD", "f", "SET", "u8", "0", "0"),
    ("BITFIELD", "f", "SET", "u8", "0", "7", "INCRBY", "i4", "#3", "2"),
    ("BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "300"),
    ("BITOP", "OR", "d", "b", "f"), ("BITOP", "AND", "d", "none"), ("BITOP", "AND", "d", "none"),
]


def test_propagation(tapped_redis) -> None:
    check_propagation(tapped_redis.port, PROPAGATION_CASES)
