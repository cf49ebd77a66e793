"""LZF: _codec.c against its Python references (pyrepl/rdb/lzf.py), streams that round-trip and
what Redis's rdbSaveLzfStringObject decides (compressed only when 4 bytes shorter)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.keyspace.stream import Nack
from pyrepl.rdb import lzf
from pyrepl.rdb.decoder import (
    KeyValue,
    RdbDecoder,
    _Incomplete,
    _read_pair,
    _read_zset2_member,
    _rstr,
)
from pyrepl.rdb.encoder import encode_rdb_bytes, put_pel_reference, put_run_reference

C = lzf._codec
need_c = pytest.mark.skipif(C is None, reason="pyrepl runs as plain Python")

# Inputs LZF finds matches in (repeats, words, runs) and inputs it does not (random bytes).
WORDS = st.lists(st.sampled_from([b"user", b"click", b"value", b" ", b"12", b"x", b"\x00"]),
                 max_size=400).map(b"".join)
DATA = st.one_of(st.binary(max_size=600), WORDS,
                 st.tuples(st.binary(min_size=1, max_size=9), st.integers(1, 3000)).map(
                     lambda t: t[0] * t[1]))


@settings(max_examples=300, deadline=None)
@given(data=DATA)
def test_reference_round_trips_and_rdb_string_rule(data: bytes) -> None:
    c = lzf.compress_reference(data)
    assert c is not None and lzf.decompress_reference(c, len(data)) == data
    enc = lzf.rdb_string_reference(data)
    if len(data) <= 20 or len(c) > len(data) - 4:
        assert enc is None
    else:
        assert enc is not None and enc[0] == 0xC3 and enc.endswith(c)


@need_c
@settings(max_examples=400, deadline=None)
@given(data=DATA, limit=st.integers(0, 700))
def test_c_compress_matches_the_reference(data: bytes, limit: int) -> None:
    """The same stream byte for byte, and None exactly where the reference's stream is longer
    than the limit; rdb_string likewise."""
    assert C is not None
    full = lzf.compress_reference(data)
    assert C.compress(data, len(data) + len(data) // 32 + 2) == full
    assert C.compress(data, limit) == lzf.compress_reference(data, limit)
    assert (C.compress(data, limit) is None) == (full is not None and len(full) > limit)
    assert C.rdb_string(data) == lzf.rdb_string_reference(data)


@need_c
@settings(max_examples=300, deadline=None)
@given(data=DATA, flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                 max_size=3), cut=st.integers(0, 1 << 16), delta=st.integers(-3, 3))
def test_c_decompress_matches_the_reference(data: bytes, flips: list, cut: int,
                                            delta: int) -> None:
    """On good streams the same bytes; on corrupted, cut or mis-sized ones the C answers None
    exactly where the reference raises LzfError, and the same bytes elsewhere."""
    assert C is not None
    good = lzf.compress_reference(data)
    assert good is not None
    assert C.decompress(good, len(data)) == data
    bad = bytearray(good)
    for at, v in flips:
        if bad:
            bad[at % len(bad)] = v
    for blob, size in ((bytes(bad), len(data)), (good[:cut % (len(good) + 1)], len(data)),
                       (good, max(0, len(data) + delta))):
        try:
            want: bytes | None = lzf.decompress_reference(blob, size)
        except lzf.LzfError:
            want = None
        assert C.decompress(blob, size) == want


def test_the_table_of_an_earlier_call_is_not_seen() -> None:
    """The C table is never cleared: a call right after another on the same bytes gives the
    stream a fresh table gives (the reference's), not one that refers to the earlier input."""
    rnd = random.Random(3)
    a = bytes(rnd.getrandbits(8) for _ in range(5000))
    b = a[:2000] + bytes(rnd.getrandbits(8) for _ in range(100)) + a[:300]
    for data in (a, b, a, b[::-1], a):
        assert lzf.compress(data) == lzf.compress_reference(data)


def test_rdb_strings_are_compressed_as_redis_writes_them_and_read_back() -> None:
    """rdbcompression yes: values, keys and a hash's fields over 20 bytes that compress are
    written as LZF strings (0xC3), smaller ones raw; the file reads back to the same data."""
    text = b"the quick brown fox jumps over the lazy dog " * 50
    data = {b"k" * 30: text, b"short": b"abc", b"random": random.Random(5).randbytes(500),
            b"h": {b"f" * 40: text[:300], b"g": b"1"}}

    class Db:
        def __init__(self) -> None:
            self.data = data
            self.expires: dict[bytes, int] = {}

    plain = encode_rdb_bytes([Db()], now_ms=0)
    packed = encode_rdb_bytes([Db()], now_ms=0, compress=True)
    assert len(packed) < len(plain) - len(text) // 2
    assert lzf.rdb_string(text) is not None and lzf.rdb_string(text) in packed
    assert b"k" * 30 not in packed and b"f" * 40 not in packed
    assert random.Random(5).randbytes(500) in packed      # (incompressible: raw)
    for blob in (plain, packed):
        dec = RdbDecoder()
        dec.receive_data(blob)
        dec.receive_data(b"")
        got = {}
        while (ev := dec.next_event()) is not None:
            if isinstance(ev, KeyValue):
                got[ev.key] = ev.value
        assert got.keys() == data.keys()
        assert got[b"k" * 30] == text and dict(got[b"h"]) == data[b"h"]


STRINGS = st.one_of(
    st.binary(max_size=40),
    st.integers(-(1 << 33), 1 << 33).map(lambda i: b"%d" % i),
    st.sampled_from([b"0", b"-0", b"00", b"01", b"-", b"+1", b" 1", b"1_0", b"-128", b"127",
                     b"128", b"-32768", b"32767", b"32768", b"2147483647", b"2147483648",
                     b"-2147483648", b"-2147483649", b"12345678901"]),
    WORDS)
SCORES = st.floats(allow_nan=False)
RUN_ITEMS = {0: st.lists(STRINGS, max_size=30),
             1: st.lists(st.tuples(STRINGS, STRINGS), max_size=20),
             2: st.lists(st.tuples(STRINGS, SCORES), max_size=20)}
READERS = {0: _rstr, 1: _read_pair, 2: _read_zset2_member}


def _read_reference(kind: int, buf: bytes, p: int, count: int) -> tuple[list, int]:
    """The Python readers' elements at p until count or one that does not read whole."""
    got: list = []
    for _ in range(count):
        try:
            e, q = READERS[kind](buf, p, len(buf))
        except Exception:   # (incomplete or corrupt: read_run stops before it too)
            break
        got.append(e)
        p = q
    return got, p


@need_c
@settings(max_examples=300, deadline=None)
@given(data=st.data(), kind=st.sampled_from([0, 1, 2]), compress=st.booleans(),
       cut=st.integers(0, 1 << 16), flips=st.lists(st.tuples(st.integers(0, 1 << 16),
                                                              st.integers(0, 255)), max_size=2))
def test_c_runs_match_the_references(data: st.DataObject, kind: int, compress: bool, cut: int,
                                     flips: list) -> None:
    """put_run writes what put_run_reference writes; read_run reads it back, and on a cut or
    corrupted buffer reads exactly the elements the Python readers read whole, stopping at the
    same position (the reader then judges the rest)."""
    assert C is not None
    items = data.draw(RUN_ITEMS[kind])
    blob = put_run_reference(kind, items, compress)
    assert C.put_run(kind, items, compress) == blob
    out: list = []
    assert C.read_run(kind, blob, 0, len(items), out) == len(blob)
    want = [x if kind == 0 else (x[0], x[1]) for x in items]
    if kind == 2:
        want = [(m, float(s)) for m, s in items]
    assert out == want == _read_reference(kind, blob, 0, len(items))[0]
    bad = bytearray(blob[:cut % (len(blob) + 1)])
    for at, v in flips:
        if bad:
            bad[at % len(bad)] = v
    out = []
    end = C.read_run(kind, bytes(bad), 0, len(items), out)
    ref, ref_end = _read_reference(kind, bytes(bad), 0, len(items))
    assert (repr(out), end) == (repr(ref), ref_end)     # (repr: a flipped score may be NaN)


def test_a_run_stops_before_what_the_reader_must_judge() -> None:
    """A bad LZF string inside a run: read_run stops before it and the Python reader raises."""
    assert _Incomplete is not None
    good = put_run_reference(0, [b"a", b"b" * 100], True)
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    if C is not None:
        out: list = []
        assert C.read_run(0, bad, 0, 2, out) == 2 and out == [b"a"]
    with pytest.raises(Exception, match="LZF"):
        _rstr(bad, 2, len(bad))


@need_c
@settings(max_examples=200, deadline=None)
@given(pel=st.dictionaries(st.integers(0, (1 << 128) - 1),
                           st.tuples(st.integers(-(1 << 63), (1 << 63) - 1),
                                     st.integers(0, (1 << 64) - 1)), max_size=40))
def test_c_pel_matches_the_reference(pel: dict) -> None:
    """put_pel writes a group's PEL (IDs in order, delivery times, counts) and a consumer's
    (IDs alone) as put_pel_reference does."""
    assert C is not None
    nacks = {eid: Nack(t, c, None) for eid, (t, c) in pel.items()}
    for with_nacks in (True, False):
        assert C.put_pel(nacks, with_nacks) == put_pel_reference(nacks, with_nacks)


@need_c
@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.integers(1, 3000), max_size=60), dup=st.booleans(),
       missing=st.booleans(), cut=st.integers(0, 4000))
def test_c_pel_reading_matches_the_python_loop(ids: list, dup: bool, missing: bool,
                                               cut: int) -> None:
    """A stream's group and consumer PELs read by read_pel / read_consumer_pel load what the
    Python loops load, and a duplicated or orphan entry is refused with the same error."""
    from pyrepl.keyspace.stream import Consumer, Group, Stream
    from pyrepl.rdb import decoder as dec_mod
    from pyrepl.rdb.decoder import RdbError

    s = Stream()
    for i in range(1, 3001):
        s.append(i << 64, [b"f", b"%d" % i], 4096, 100)
    g = s.groups[b"g"] = Group(3000 << 64, 3000)
    c = g.consumers[b"c"] = Consumer(b"c", 5)
    for i in sorted(set(ids)):
        g.pel[i << 64] = c.pel[i << 64] = Nack(1000 + i, i % 300, c)

    class Db:
        def __init__(self) -> None:
            self.data = {b"s": s}
            self.expires: dict[bytes, int] = {}

    blob = encode_rdb_bytes([Db()], now_ms=0)
    if g.pel and (dup or missing):
        first = (min(g.pel)).to_bytes(16, "big")
        second = (max(g.pel) + 1).to_bytes(16, "big")
        at = blob.rindex(first)       # the consumer PEL's first ID (after the group PEL's)
        if missing:                   # an ID the group's PEL has not
            blob = blob[:at] + second + blob[at + 16:]
        else:                         # the group PEL's first entry twice
            g_at = blob.index(first)
            blob = blob[:g_at + 25] + blob[g_at:g_at + 25] + blob[g_at + 50:]

    def load(with_c: bool) -> str:
        saved = dec_mod._codec
        if not with_c:
            dec_mod._codec = None
        try:
            dec = RdbDecoder(verify_checksum=False)
            for i in range(0, len(blob), 1 + cut):
                dec.receive_data(blob[i:i + 1 + cut])
            dec.receive_data(b"")
            out = []
            while (ev := dec.next_event()) is not None:
                if isinstance(ev, KeyValue):
                    t = ev.value
                    out.append(sorted((e, n.delivery_time, n.delivery_count,
                                       n.consumer.name if n.consumer else None)
                                      for e, n in t.groups[b"g"].pel.items()))
                    out.append(sorted(t.groups[b"g"].consumers[b"c"].pel))
            return repr(out)
        except RdbError as e:
            return f"error: {e}"
        finally:
            dec_mod._codec = saved

    assert load(True) == load(False)
