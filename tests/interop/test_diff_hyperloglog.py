"""Differential tests of HyperLogLog: pyrepl against real redis-server 7.0.15, byte for byte.

Every reply is compared, and so are the HLL strings themselves (GET): the sparse form through
its splits and merges, the promotion to dense (by hll-sparse-max-bytes or a count above 32),
the cached cardinality and its invalidation; PFCOUNT over one and many keys; PFMERGE of
sparse and dense inputs; errors (WRONGTYPE, a string that is not a HLL, a corrupt one); and
the propagation (PFCOUNT's cache refresh included).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.differential import PROTOS, check_propagation, run_sequence, sequence_settings

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CORRUPT = "HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff"

CASES: list[tuple[str, ...]] = [
    ("PFADD", "h"), ("GET", "h"), ("PFADD", "h"), ("PFCOUNT", "h"), ("PFADD", "h", "a"),
    ("GET", "h"), ("PFCOUNT", "h"), ("GET", "h"), ("PFADD", "h", "a"), ("PFADD", "h", "b", "c"),
    ("PFCOUNT", "h"), ("PFCOUNT", "h", "none"), ("PFCOUNT", "none"), ("PFMERGE", "m", "h"),
    ("GET", "m"), ("PFMERGE", "m"), ("PFMERGE", "fresh"), ("GET", "fresh"),
    ("SET", "s", "not a hll"), ("PFADD", "s", "x"), ("PFCOUNT", "s"), ("PFCOUNT", "h", "s"),
    ("PFMERGE", "h", "s"), ("PFMERGE", "s", "h"), ("RPUSH", "l", "x"), ("PFADD", "l", "x"),
    ("PFCOUNT", "l"), ("PFMERGE", "d", "l"), ("SET", "bad", CORRUPT), ("PFCOUNT", "bad"),
    ("PFADD", "bad", "q"), ("PFMERGE", "d2", "bad"), ("PFADD",), ("PFCOUNT",), ("PFMERGE",),
    ("SET", "t", "x", "EX", "100"), ("DEL", "t"), ("PFADD", "t", "a"), ("EXPIRE", "t", "100"),
    ("PFADD", "t", "zz"), ("TTL", "t"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_cases_byte_for_byte(pair) -> None:
    for argv in CASES:
        pair.check(*argv)


def test_sparse_dense_and_promotion_byte_for_byte(pair) -> None:
    for n in range(0, 3000, 61):                       # sparse, growing, then promoted
        pair.check("PFADD", "grow", *(f"e{j}" for j in range(n, n + 61)))
        if n % 610 == 0:
            pair.check("GET", "grow")
            pair.check("PFCOUNT", "grow")
    pair.check("GET", "grow")
    for n in range(0, 20000, 1000):                    # dense
        pair.check("PFADD", "dense", *(f"x{j}" for j in range(n, n + 1000)))
    pair.check("GET", "dense")
    pair.check("PFCOUNT", "dense")
    pair.check("PFCOUNT", "grow", "dense", "none")
    pair.check("PFMERGE", "both", "grow", "dense")
    pair.check("GET", "both")
    pair.check("PFMERGE", "grow", "grow")
    pair.check("GET", "grow")
    # a small sparse limit promotes early; a count above 32 promotes at once
    pair.check("CONFIG", "SET", "hll-sparse-max-bytes", "100")
    pair.check("PFADD", "small", *(f"s{j}" for j in range(60)))
    pair.check("GET", "small")
    pair.check("CONFIG", "SET", "hll-sparse-max-bytes", "3000")
    for j in range(200000, 200400):
        ra, rb = pair.both("PFADD", "deep", f"d{j}")
        assert ra == rb
    pair.check("GET", "deep")
    pair.check("PFCOUNT", "deep")


ELEMENTS = st.sampled_from([f"e{i}" for i in range(40)] + ["", "\x00", "a" * 100])
KEYS = st.sampled_from(["k0", "k1", "k2"])
COMMAND = st.one_of(
    st.tuples(st.just("PFADD"), KEYS, st.lists(ELEMENTS, max_size=8))
    .map(lambda t: ("PFADD", t[1], *t[2])),
    st.tuples(st.just("PFADD"), KEYS, st.integers(0, 3000), st.integers(1, 300))
    .map(lambda t: ("PFADD", t[1], *(f"r{j}" for j in range(t[2], t[2] + t[3])))),
    st.tuples(st.just("PFCOUNT"), st.lists(KEYS, min_size=1, max_size=3))
    .map(lambda t: ("PFCOUNT", *t[1])),
    st.tuples(st.just("PFMERGE"), st.lists(KEYS, min_size=1, max_size=3))
    .map(lambda t: ("PFMERGE", *t[1])),
    st.tuples(st.just("GET"), KEYS),
    st.tuples(st.just("SET"), KEYS, st.just("plain")),
    st.tuples(st.just("DEL"), KEYS),
    st.tuples(st.just("CONFIG"), st.just("SET"), st.just("hll-sparse-max-bytes"),
              st.sampled_from(["0", "50", "300", "3000"])),
)


@sequence_settings(100)
@given(proto=PROTOS, cmds=st.lists(COMMAND, min_size=3, max_size=25))
def test_random_sequences(pairs, proto, cmds) -> None:
    run_sequence(pairs[proto], [*cmds, ("CONFIG", "SET", "hll-sparse-max-bytes", "3000")],
                 final=[(c, k) for k in ("k0", "k1", "k2") for c in ("TYPE", "GET")])


PROPAGATION_CASES: list[tuple[str, ...]] = [
    ("PFADD", "h", "a", "b"), ("PFADD", "h", "a"), ("PFCOUNT", "h"), ("PFCOUNT", "h"),
    ("PFADD", "h", "c"), ("PFCOUNT", "h", "none"), ("PFMERGE", "m", "h"), ("PFADD", "e"),
    ("PFMERGE", "m"),
]


def test_propagation(tapped_redis) -> None:
    check_propagation(tapped_redis.port, PROPAGATION_CASES)
