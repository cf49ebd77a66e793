"""Differential tests of streams: pyrepl against real redis-server 7.0.15, byte for byte.

An edge table (every command, its options and its errors) in RESP2 and RESP3; Redis's node
layout (XINFO radix-tree-keys/-nodes and XLEN after an approximate trim, by entries and by
bytes); consumer groups (XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO) with the
times masked; random command sequences; and propagation: what pyrepl hands to its replicas
equals what a real Redis sends (XADD's generated ID, ``MAXLEN =`` rewrites, XREADGROUP/XCLAIM/
XAUTOCLAIM as XCLAIM ... and XGROUP SETID / CREATECONSUMER), delivery times within a second.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.differential import (
    PROTOS,
    Pair,
    PropagationTaps,
    run_sequence,
    sequence_settings,
)
from tests.support.resp import RespError, parse_reply

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CASES: list[tuple[str, ...]] = [
    # XADD: ID forms, options, errors
    ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "1-*", "a", "1"),
    ("XADD", "s", "2", "f", "v", "g", "w"), ("XADD", "s", "2-*", "f", "12345"),
    ("XADD", "s", "0-0", "f", "v"), ("XADD", "s", "0", "f", "v"), ("XADD", "s", "-", "f", "v"),
    ("XADD", "s", "+", "f", "v"), ("XADD", "s", "abc", "f", "v"), ("XADD", "s", "1-x", "f", "v"),
    ("XADD", "s", "3-1", "f"), ("XADD", "s", "3-1", "f", "v", "g"), ("XADD", "s"),
    ("XADD", "s", "NOMKSTREAM", "4-0", "f", "v"), ("XADD", "new", "NOMKSTREAM", "1-0", "f", "v"),
    ("EXISTS", "new"), ("XADD", "s", "MAXLEN", "-1", "5-0", "f", "v"),
    ("XADD", "s", "MAXLEN", "x", "5-0", "f", "v"),
    ("XADD", "s", "MAXLEN", "2", "MINID", "1", "5-0", "f", "v"),
    ("XADD", "s", "LIMIT", "5", "5-0", "f", "v"), ("XADD", "s", "MAXLEN", "5", "LIMIT", "5",
                                                   "5-0", "f", "v"),
    ("XADD", "s", "MAXLEN", "~", "5", "LIMIT", "-1", "5-0", "f", "v"),
    ("XADD", "s", "MAXLEN", "=", "3", "6-0", "f", "v"), ("XLEN", "s"),
    ("XADD", "s", "MINID", "~", "0", "LIMIT", "10", "7-0", "f", "v"),
    ("XADD", "s", "MINID", "5", "8-0", "f", "v"), ("XADD", "s", "MINID", "+", "8-0", "f", "v"),
    ("XADD", "s", "18446744073709551615-18446744073709551615", "f", "v"),
    ("XADD", "s", "9-0", "f", "v"), ("XADD", "s", "18446744073709551616-0", "f", "v"),
    ("XADD", "s", " 9-1", "f", "v"), ("XADD", "s", "+9-2", "f", "v"), ("XADD", "s", "009-3", "f",
                                                                     "v"),
    ("XADD", "s", "-9-4", "f", "v"),
    # XRANGE / XREVRANGE
    ("XRANGE", "s", "-", "+"), ("XRANGE", "s", "(5", "+"), ("XRANGE", "s", "-", "(8-0"),
    ("XRANGE", "s", "(-", "+"), ("XRANGE", "s", "-", "(+"),
    ("XRANGE", "s", "(18446744073709551615-18446744073709551615", "+"),
    ("XRANGE", "s", "-", "(0-0"), ("XRANGE", "s", "5", "8"), ("XRANGE", "s", "-", "+", "COUNT",
                                                               "2"),
    ("XRANGE", "s", "-", "+", "COUNT", "0"), ("XRANGE", "s", "-", "+", "COUNT", "-3"),
    ("XRANGE", "s", "-", "+", "COUNT"), ("XRANGE", "s", "-", "+", "LIMIT", "2"),
    ("XRANGE", "nokey", "-", "+"), ("XRANGE", "nokey", "-", "+", "COUNT", "0"),
    ("XRANGE", "s", "x", "+"), ("XREVRANGE", "s", "+", "-"), ("XREVRANGE", "s", "+", "-", "COUNT",
                                                               "1"),
    ("XREVRANGE", "s", "(9", "(5"), ("XREVRANGE", "s", "-", "+"),
    # XDEL / XLEN / XTRIM
    ("XDEL", "s", "5-0"), ("XDEL", "s", "5-0", "x"), ("XDEL", "nokey", "x"), ("XDEL", "s", "9-0",
                                                                             "8-0"),
    ("XLEN", "s"), ("XLEN", "nokey"), ("XTRIM", "s"), ("XTRIM", "s", "MAXLEN"),
    ("XTRIM", "s", "FOO", "1"), ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "x"),
    ("XTRIM", "nokey", "MAXLEN", "0"), ("XTRIM", "s", "MINID", "7"), ("XTRIM", "s", "MAXLEN", "1"),
    ("XRANGE", "s", "-", "+"), ("XINFO", "STREAM", "s"),
    ("XTRIM", "s", "MAXLEN", "0"), ("XLEN", "s"), ("XINFO", "STREAM", "s"), ("TYPE", "s"),
    # wrong types
    ("SET", "str", "x"), ("XADD", "str", "1-0", "f", "v"), ("XRANGE", "str", "-", "+"),
    ("XLEN", "str"), ("XDEL", "str", "1"), ("XTRIM", "str", "MAXLEN", "1"),
    ("XREAD", "STREAMS", "str", "0"), ("XGROUP", "CREATE", "str", "g", "$"),
    ("XINFO", "STREAM", "str"), ("XSETID", "str", "1"),
    # XSETID
    ("XADD", "t", "10-0", "a", "b"), ("XADD", "t", "11-0", "a", "b"), ("XSETID", "t", "5"),
    ("XSETID", "t", "20-0"), ("XSETID", "t", "21", "ENTRIESADDED", "1"),
    ("XSETID", "t", "22", "ENTRIESADDED", "-1"), ("XSETID", "t", "23", "MAXDELETEDID", "30"),
    ("XSETID", "t", "24", "ENTRIESADDED", "7", "MAXDELETEDID", "3"), ("XSETID", "t", "25", "X"),
    ("XSETID", "nokey", "1"), ("XINFO", "STREAM", "t"), ("XADD", "t", "24-0", "a", "b"),
    # XREAD
    ("XREAD", "STREAMS", "t", "0"), ("XREAD", "COUNT", "1", "STREAMS", "t", "s", "0", "0"),
    ("XREAD", "STREAMS", "t", "$"), ("XREAD", "STREAMS", "t"), ("XREAD", "STREAMS", "t", ">"),
    ("XREAD", "GROUP", "g", "c", "STREAMS", "t", "0"), ("XREAD", "NOACK", "STREAMS", "t", "0"),
    ("XREAD", "COUNT", "x", "STREAMS", "t", "0"), ("XREAD", "BLOCK", "-1", "STREAMS", "t", "0"),
    ("XREAD", "BLOCK", "10", "STREAMS", "t", "0"), ("XREAD", "t", "0"),
    ("XREAD", "STREAMS", "nokey", "t", "0", "10"), ("XREAD", "STREAMS", "t", "-"),
    ("XREAD", "STREAMS", "t", "99999"),
    # XGROUP
    ("XGROUP", "CREATE", "t", "g1", "$"), ("XGROUP", "CREATE", "t", "g1", "$"),
    ("XGROUP", "CREATE", "t", "g2", "0", "ENTRIESREAD", "1"),
    ("XGROUP", "CREATE", "t", "g3", "-"), ("XGROUP", "CREATE", "t", "g3", "x"),
    ("XGROUP", "CREATE", "t", "g4", "0", "ENTRIESREAD", "-2"),
    ("XGROUP", "CREATE", "t", "g4", "0", "FOO"), ("XGROUP", "CREATE", "nokey", "g", "$"),
    ("XGROUP", "CREATE", "mk", "g", "$", "MKSTREAM"), ("XINFO", "STREAM", "mk"), ("TYPE", "mk"),
    ("XGROUP", "SETID", "t", "g1", "0"), ("XGROUP", "SETID", "t", "nog", "0"),
    ("XGROUP", "SETID", "t", "g1", "-", "ENTRIESREAD", "3"), ("XGROUP", "SETID", "t", "g1", "$"),
    ("XGROUP", "SETID", "t", "g1", "0", "MKSTREAM"), ("XGROUP", "CREATECONSUMER", "t", "g1", "c"),
    ("XGROUP", "CREATECONSUMER", "t", "g1", "c"), ("XGROUP", "CREATECONSUMER", "t", "nog", "c"),
    ("XGROUP", "DELCONSUMER", "t", "g1", "c"), ("XGROUP", "DELCONSUMER", "t", "g1", "zz"),
    ("XGROUP", "DESTROY", "t", "g3"), ("XGROUP", "DESTROY", "t", "g3"),
    ("XGROUP", "DESTROY", "nokey", "g3"), ("XGROUP", "HELP"), ("XGROUP", "FOO"),
    ("XGROUP", "CREATE", "t"), ("XGROUP", "DESTROY", "t", "g", "x"), ("XGROUP",),
    ("XINFO", "HELP"), ("XINFO", "FOO", "t"), ("XINFO", "STREAM"), ("XINFO", "GROUPS", "nokey"),
    ("XINFO", "STREAM", "t", "FULL", "COUNT"), ("XINFO", "STREAM", "t", "FOO"),
    ("XINFO", "STREAM", "nokey", "FOO"), ("XINFO", "CONSUMERS", "t", "nog"),
    ("XINFO", "GROUPS", "t"), ("XINFO", "STREAM", "t", "FULL", "COUNT", "x"),
    # XREADGROUP (pending entries and history; the times are not in these replies)
    ("XGROUP", "SETID", "t", "g1", "0"),
    ("XREADGROUP", "GROUP", "g1", "c1", "COUNT", "1", "STREAMS", "t", ">"),
    ("XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "t", "0"),
    ("XREADGROUP", "GROUP", "g1", "c2", "NOACK", "STREAMS", "t", ">"),
    ("XREADGROUP", "GROUP", "g1", "c2", "STREAMS", "t", ">"),
    ("XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "t", "$"),
    ("XREADGROUP", "GROUP", "nog", "c1", "STREAMS", "t", ">"),
    ("XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "nokey", ">"),
    ("XREADGROUP", "STREAMS", "t", ">"), ("XREADGROUP", "GROUP", "g1", "STREAMS", "t", ">"),
    ("XGROUP", "SETID", "t", "g2", "0"),
    ("XREADGROUP", "GROUP", "g2", "a", "STREAMS", "t", ">"), ("XDEL", "t", "11-0"),
    ("XREADGROUP", "GROUP", "g2", "a", "STREAMS", "t", "0"),
    ("XREADGROUP", "GROUP", "g2", "a", "COUNT", "1", "STREAMS", "t", "10"),
    ("XINFO", "GROUPS", "t"), ("XPENDING", "t", "g2"), ("XPENDING", "t", "g1"),
    ("XPENDING", "t", "nog"), ("XPENDING", "nokey", "g"), ("XPENDING", "t", "g2", "-"),
    ("XPENDING", "t", "g2", "-", "+", "x"), ("XPENDING", "t", "g2", "IDLE", "x", "-", "+", "1"),
    ("XPENDING", "t", "g2", "IDLE", "1", "-", "+"), ("XPENDING", "t", "g2", "(-", "+", "1"),
    ("XPENDING", "t", "g2", "-", "+", "10", "nobody"),
    ("XPENDING", "t", "g2", "IDLE", "999999999", "-", "+", "10"),
    ("XPENDING", "t", "g2", "-", "+", "0"),
    ("XACK", "t", "g2", "x"), ("XACK", "t", "nog", "x"), ("XACK", "nokey", "g", "1"),
    ("XACK", "t", "g2", "10-0", "10-0", "999"), ("XPENDING", "t", "g2"),
    # XCLAIM / XAUTOCLAIM (JUSTID: no delivery counter change)
    ("XCLAIM", "t", "g1", "c9", "0", "10-0", "JUSTID"),
    ("XCLAIM", "t", "g1", "c9", "x", "10-0"), ("XCLAIM", "t", "nog", "c9", "0", "10-0"),
    ("XCLAIM", "t", "g1", "c9", "0", "10-0", "FOO"), ("XCLAIM", "t", "g1", "c9", "0", "10-0",
                                                      "IDLE", "x"),
    ("XCLAIM", "t", "g1", "c9", "0", "10-0", "RETRYCOUNT", "5", "JUSTID"),
    ("XCLAIM", "t", "g1", "c9", "0", "24-0", "FORCE", "LASTID", "24-0"),
    ("XCLAIM", "t", "g1", "c9", "999999999", "24-0"),
    ("XCLAIM", "t", "g1", "c9", "0", "1-0", "FORCE"),
    ("XAUTOCLAIM", "t", "g1", "c8", "0", "0", "COUNT", "1"),
    ("XAUTOCLAIM", "t", "g1", "c8", "0", "0", "JUSTID"),
    ("XAUTOCLAIM", "t", "g1", "c8", "0", "(0", "COUNT", "0"),
    ("XAUTOCLAIM", "t", "g1", "c8", "0", "0", "COUNT", "x"),
    ("XAUTOCLAIM", "t", "g1", "c8", "x", "0"), ("XAUTOCLAIM", "t", "g1", "c8", "0", "x"),
    ("XAUTOCLAIM", "t", "nog", "c8", "0", "0"), ("XAUTOCLAIM", "t", "g1", "c8", "0", "0", "FOO"),
    ("XGROUP", "SETID", "t", "g2", "0"), ("XREADGROUP", "GROUP", "g2", "z", "STREAMS", "t", ">"),
    ("XDEL", "t", "24-0"), ("XAUTOCLAIM", "t", "g2", "y", "0", "-"),
    ("XCLAIM", "t", "g2", "y", "0", "10-0", "24-0"),
    ("XINFO", "GROUPS", "t"),
    # key-space commands on streams
    ("COPY", "t", "t2"), ("XRANGE", "t2", "-", "+"), ("XINFO", "GROUPS", "t2"),
    ("RENAME", "t2", "t3"), ("EXISTS", "t2", "t3"), ("EXPIRE", "t3", "100"), ("TTL", "t3"),
    ("OBJECT", "ENCODING", "t3"), ("TYPE", "t3"), ("DEL", "t3"), ("SCAN", "0", "TYPE", "stream"),
]

# Replies that hold times: compared with the times masked.
TIMED = {"XINFO CONSUMERS", "XINFO STREAM FULL"}


@pytest.mark.parametrize("proto", [2, 3])
def test_cases_byte_for_byte(pair) -> None:
    for argv in CASES:
        if argv[0] == "SCAN":          # the same keys, in each server's hash order
            ra, rb = pair.both(*argv)
            va, vb = parse_reply(ra), parse_reply(rb)
            assert va[0] == vb[0] and sorted(va[1]) == sorted(vb[1]), (ra, rb)
            continue
        pair.check(*argv)


def _masked(v: object, path: tuple = ()) -> object:
    """XINFO STREAM FULL / XINFO CONSUMERS / XPENDING with their time fields replaced."""
    if isinstance(v, dict):
        return {k: ("T" if k in (b"seen-time", b"idle") else _masked(x)) for k, x in v.items()}
    if isinstance(v, list):
        out = []
        for i, x in enumerate(v):
            if isinstance(x, bytes) and x in (b"seen-time", b"idle") and i + 1 < len(v):
                out.append(x)
                continue
            if i > 0 and isinstance(v[i - 1], bytes) and v[i - 1] in (b"seen-time", b"idle"):
                out.append("T")
                continue
            out.append(_masked(x))
        if len(v) in (3, 4) and isinstance(v[0], bytes) and b"-" in v[0] and \
                all(isinstance(x, int) for x in v[-2:]):
            out[-2] = "T"            # [id, (consumer,) delivery time or idle, count]
        return out
    return v


def check_masked(p: Pair, *argv: str) -> None:
    ra, rb = p.both(*argv)
    va, vb = _masked(parse_reply(ra)), _masked(parse_reply(rb))
    assert va == vb, f"{argv}:\n  pyrepl: {ra!r}\n  redis:  {rb!r}"


@pytest.mark.parametrize("proto", [2, 3])
def test_groups_with_times_masked(pair) -> None:
    for i in range(1, 30):
        pair.check("XADD", "s", f"{i}-{i % 3}", "f", str(i), "g" * (i % 4), "v")
    pair.check("XGROUP", "CREATE", "s", "g", "0")
    pair.check("XGROUP", "CREATE", "s", "h", "5", "ENTRIESREAD", "2")
    pair.check("XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "STREAMS", "s", ">")
    pair.check("XREADGROUP", "GROUP", "g", "bob", "COUNT", "7", "STREAMS", "s", ">")
    pair.check("XREADGROUP", "GROUP", "h", "carol", "NOACK", "COUNT", "3", "STREAMS", "s", ">")
    pair.check("XDEL", "s", "3-0", "12-0")
    pair.check("XACK", "s", "g", "1-1", "2-2")
    pair.check("XCLAIM", "s", "g", "dave", "0", "4-1", "5-2", "RETRYCOUNT", "9")
    pair.check("XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "3")
    for argv in (("XINFO", "STREAM", "s", "FULL"), ("XINFO", "STREAM", "s", "FULL", "COUNT", "2"),
                 ("XINFO", "STREAM", "s", "FULL", "COUNT", "0"), ("XINFO", "CONSUMERS", "s", "g"),
                 ("XINFO", "CONSUMERS", "s", "h"), ("XPENDING", "s", "g", "-", "+", "100"),
                 ("XPENDING", "s", "g", "-", "+", "100", "bob"),
                 ("XPENDING", "s", "g", "IDLE", "0", "(4-1", "+", "2")):
        check_masked(pair, *argv)
    for argv in (("XINFO", "GROUPS", "s"), ("XPENDING", "s", "g"), ("XINFO", "STREAM", "s"),
                 ("XLEN", "s")):
        pair.check(*argv)


def test_node_layout_and_approximate_trims(pair) -> None:
    """Entries per node (stream-node-max-entries) and bytes per node (stream-node-max-bytes):
    XINFO's radix-tree figures and XLEN after ``~`` trims are Redis's."""
    for cfg in (("stream-node-max-entries", "7"), ("stream-node-max-bytes", "300")):
        pair.check("CONFIG", "SET", *cfg)
    try:
        n = 0
        for i in range(1, 400):
            fields = ["f", "x" * (i % 37), "n", str(i * 977)] if i % 5 else \
                ["other", "12", "and", f"-{i}"]
            pair.check("XADD", "s", f"{i // 3}-{i % 3}", *fields)
            n += 1
            if i % 50 == 0:
                pair.check("XINFO", "STREAM", "s")
        for argv in (("XTRIM", "s", "MAXLEN", "~", "350"), ("XLEN", "s"),
                     ("XTRIM", "s", "MINID", "~", "40"), ("XLEN", "s"),
                     ("XADD", "s", "MAXLEN", "~", "200", "500-0", "f", "v"), ("XLEN", "s"),
                     ("XTRIM", "s", "MAXLEN", "~", "10", "LIMIT", "20"), ("XLEN", "s"),
                     ("XDEL", "s", "100-0", "100-1", "100-2", "101-0"),
                     ("XTRIM", "s", "MAXLEN", "170"), ("XINFO", "STREAM", "s"),
                     ("XTRIM", "s", "MINID", "130-1"), ("XINFO", "STREAM", "s"),
                     ("XRANGE", "s", "-", "+", "COUNT", "30"), ("XREVRANGE", "s", "+", "-")):
            pair.check(*argv)
    finally:
        pair.check("CONFIG", "SET", "stream-node-max-entries", "100")
        pair.check("CONFIG", "SET", "stream-node-max-bytes", "4096")


def test_big_values_and_default_nodes(pair) -> None:
    for i in range(1, 260):
        pair.check("XADD", "b", f"{i}-0", "field", "v" * (i * 7 % 300), "n", str(-i * 10**9))
    pair.check("XINFO", "STREAM", "b")
    pair.check("XTRIM", "b", "MAXLEN", "~", "100")
    pair.check("XINFO", "STREAM", "b")


# -- random sequences -----------------------------------------------------------------------

KEYS = st.sampled_from(["s1", "s2"])
IDS = st.builds(lambda a, b: f"{a}-{b}", st.integers(0, 12), st.integers(0, 3))
RANGE_IDS = st.one_of(st.sampled_from(["-", "+"]), IDS, IDS.map(lambda x: "(" + x))
FIELDS = st.lists(st.tuples(st.sampled_from(["f", "g", "1", "long" * 5]),
                            st.sampled_from(["v", "", "12", "-3", "x" * 70])),
                  min_size=1, max_size=3).map(lambda fs: [x for p in fs for x in p])
GROUPS = st.sampled_from(["ga", "gb"])
CONSUMERS = st.sampled_from(["c1", "c2"])
COMMAND = st.one_of(
    st.tuples(KEYS, st.one_of(IDS, IDS.map(lambda x: x.split("-")[0] + "-*")), FIELDS)
    .map(lambda t: ("XADD", t[0], t[1], *t[2])),
    st.tuples(KEYS, st.sampled_from(["MAXLEN", "MINID"]), st.sampled_from(["~", "="]),
              st.integers(0, 8), FIELDS, IDS)
    .map(lambda t: ("XADD", t[0], t[1], t[2], str(t[3]) if t[1] == "MAXLEN" else f"{t[3]}",
                    t[5], *t[4])),
    st.tuples(KEYS, RANGE_IDS, RANGE_IDS, st.integers(-1, 4))
    .map(lambda t: ("XRANGE", t[0], t[1], t[2], "COUNT", str(t[3]))),
    st.tuples(KEYS, RANGE_IDS, RANGE_IDS).map(lambda t: ("XREVRANGE", t[0], t[1], t[2])),
    st.tuples(KEYS, st.lists(IDS, min_size=1, max_size=3)).map(lambda t: ("XDEL", t[0], *t[1])),
    st.tuples(KEYS, st.integers(0, 6)).map(lambda t: ("XTRIM", t[0], "MAXLEN", str(t[1]))),
    st.tuples(KEYS, IDS).map(lambda t: ("XTRIM", t[0], "MINID", t[1])),
    st.tuples(KEYS, GROUPS, st.sampled_from(["$", "0", "3-1"]))
    .map(lambda t: ("XGROUP", "CREATE", t[0], t[1], t[2], "MKSTREAM")),
    st.tuples(KEYS, GROUPS, IDS).map(lambda t: ("XGROUP", "SETID", t[0], t[1], t[2])),
    st.tuples(GROUPS, CONSUMERS, st.integers(0, 3), KEYS, st.sampled_from([">", "0"]),
              st.booleans())
    .map(lambda t: ("XREADGROUP", "GROUP", t[0], t[1], *(("NOACK",) if t[5] else ()),
                    "COUNT", str(t[2]), "STREAMS", t[3], t[4])),
    st.tuples(KEYS, GROUPS, st.lists(IDS, min_size=1, max_size=3))
    .map(lambda t: ("XACK", t[0], t[1], *t[2])),
    st.tuples(KEYS, GROUPS, CONSUMERS, st.lists(IDS, min_size=1, max_size=2))
    .map(lambda t: ("XCLAIM", t[0], t[1], t[2], "0", *t[3], "JUSTID")),
    st.tuples(KEYS, GROUPS, CONSUMERS, IDS, st.integers(1, 3))
    .map(lambda t: ("XAUTOCLAIM", t[0], t[1], t[2], "0", t[3], "COUNT", str(t[4]), "JUSTID")),
    st.tuples(KEYS, GROUPS).map(lambda t: ("XPENDING", t[0], t[1])),
    st.tuples(KEYS, GROUPS).map(lambda t: ("XINFO", "GROUPS", t[0])),
    st.tuples(KEYS).map(lambda t: ("XINFO", "STREAM", t[0])),
    st.tuples(KEYS).map(lambda t: ("XLEN", t[0])),
    st.tuples(KEYS, IDS).map(lambda t: ("XREAD", "STREAMS", t[0], t[1])),
    st.tuples(KEYS, GROUPS, CONSUMERS)
    .map(lambda t: ("XGROUP", "DELCONSUMER", t[0], t[1], t[2])),
)


@sequence_settings(max_examples=60)
@given(commands=st.lists(COMMAND, max_size=30), proto=PROTOS)
def test_random_sequences(pairs, commands, proto) -> None:
    run_sequence(pairs[proto], commands,
                 final=[("XINFO", "STREAM", "s1"), ("XINFO", "STREAM", "s2"),
                        ("XINFO", "GROUPS", "s1"), ("XINFO", "GROUPS", "s2")])


# -- propagation ------------------------------------------------------------------------------

def _same(got: list[list[bytes]], want: list[list[bytes]]) -> bool:
    """Equal command streams; the time after TIME (a delivery time) within a second."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if len(g) != len(w):
            return False
        for i, (x, y) in enumerate(zip(g, w, strict=True)):
            if i and g[i - 1] == b"TIME" and x.isdigit() and y.isdigit():
                if abs(int(x) - int(y)) > 1000:
                    return False
            elif x != y:
                return False
    return True


PROPAGATION: list[tuple[str, ...]] = [
    ("XADD", "s", "1-*", "f", "v"), ("XADD", "s", "1-*", "f", "v"), ("XADD", "s", "2", "f", "v"),
    ("XADD", "s", "3-0", "f", "v"), ("XADD", "s", "0-1", "f", "v"),
    ("XADD", "s", "MAXLEN", "~", "1", "4-0", "f", "v"), ("XADD", "s", "MAXLEN", "1", "5-0", "f",
                                                         "v"),
    ("XADD", "s", "MINID", "~", "3", "LIMIT", "100", "6-*", "f", "v"),
    ("XADD", "nos", "NOMKSTREAM", "1-0", "f", "v"),
    ("XTRIM", "s", "MAXLEN", "~", "0"), ("XTRIM", "s", "MAXLEN", "0"),
    ("XADD", "s", "7-*", "a", "b"), ("XADD", "s", "8-*", "a", "b"), ("XADD", "s", "9-*", "a", "b"),
    ("XDEL", "s", "8-0", "100-0"), ("XDEL", "s", "100-0"),
    ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "m", "g", "$", "MKSTREAM"),
    ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"),
    ("XGROUP", "CREATE", "s", "h", "0"),
    ("XREADGROUP", "GROUP", "h", "n1", "NOACK", "STREAMS", "s", ">"),
    ("XGROUP", "SETID", "s", "h", "0"),
    ("XREADGROUP", "GROUP", "h", "n1", "NOACK", "STREAMS", "s", ">"),
    ("XACK", "s", "g", "7-0", "1-0"), ("XACK", "s", "g", "7-0"),
    ("XCLAIM", "s", "g", "c3", "0", "9", "JUSTID"),
    ("XCLAIM", "s", "g", "c3", "0", "9-0", "RETRYCOUNT", "4", "TIME", "12345"),
    ("XCLAIM", "s", "g", "c3", "0", "1", "LASTID", "50-0"),
    ("XADD", "s", "60-0", "x", "y"), ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">"),
    ("XDEL", "s", "60-0"), ("XAUTOCLAIM", "s", "g", "c4", "0", "0", "JUSTID"),
    ("XAUTOCLAIM", "s", "g", "c4", "0", "0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "c9"), ("XGROUP", "DELCONSUMER", "s", "g", "c4"),
    ("XGROUP", "DESTROY", "s", "h"), ("XSETID", "s", "100-0", "ENTRIESADDED", "50"),
    ("XINFO", "STREAM", "s"),
]


def test_propagation(tapped_redis) -> None:
    with PropagationTaps(tapped_redis.port) as taps:
        taps.core.fixed_ms = None
        for argv in PROPAGATION:
            expected_reply, expected = taps.redis(*argv)
            reply, fed = taps.pyrepl(*argv)
            assert reply == expected_reply, f"{argv}: reply {reply!r} != {expected_reply!r}"
            assert _same(fed, expected), f"{argv}: pyrepl propagated {fed}, redis {expected}"


def test_replies_are_errors_where_redis_errs(pair) -> None:
    """A spot check that the tests above compare errors too (not only successes)."""
    assert isinstance(parse_reply(pair.check("XADD", "s", "0-0", "f", "v")), RespError)
