"""RDB writer and reader: round trips, known vectors, hand-built files for every encoding Redis
has written, truncation/corruption/unsupported-type errors, and the golden files made by real
redis-server 7.0.15 (tests/data/make_golden_rdb.py)."""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl import REDIS_VERSION
from pyrepl.keyspace.zset import ZSETS, ZSet
from pyrepl.rdb import constants as C
from pyrepl.rdb.containers import (
    build_intset,
    build_listpack,
    build_ziplist,
    build_zipmap,
    canonical_int,
    intset_entries,
    listpack_entries,
    ziplist_entries,
    zipmap_pairs,
)
from pyrepl.rdb.crc64 import HAVE_FAST_CRC64, crc64, crc64_reference
from pyrepl.rdb.decoder import (
    Aux,
    End,
    FunctionSkipped,
    KeyValue,
    ModuleAuxSkipped,
    RdbDecoder,
    RdbError,
    ResizeDb,
    SelectDb,
    load_rdb_file,
)
from pyrepl.rdb.encoder import (
    encode_len,
    encode_rdb,
    encode_rdb_bytes,
    encode_string,
    save_rdb_file,
)
from pyrepl.rdb.lzf import LzfError, compress, decompress
from tests.support.paths import DATA_DIR
from tests.support.rdb import golden_module

NOW = 1_700_000_000_000


class Db:
    def __init__(self, data: dict[bytes, Any] | None = None,
                 expires: dict[bytes, int] | None = None) -> None:
        self.data = data if data is not None else {}
        self.expires = expires if expires is not None else {}


def zset(pairs: Any) -> ZSet:
    return ZSet.from_items(list(pairs))


def norm(v: Any) -> Any:
    """Comparable form of a model value (ZSet has no __eq__)."""
    if type(v) in ZSETS:
        return ("zset", list(v.items()))
    return v


def norm_db(d: dict[bytes, Any]) -> dict[bytes, Any]:
    return {k: norm(v) for k, v in d.items()}


def decode_all(blob: bytes, cuts: list[int] | None = None, **kw: Any) -> list[object]:
    """Feed ``blob`` split at ``cuts`` and collect every event, then EOF."""
    dec = RdbDecoder(**kw)
    events: list[object] = []
    prev = 0
    for c in (cuts or []) + [len(blob)]:
        dec.receive_data(blob[prev:c])
        prev = c
        while (ev := dec.next_event()) is not None:
            events.append(ev)
    dec.receive_data(b"")
    while (ev := dec.next_event()) is not None:
        events.append(ev)
    return events


def dbs_from_events(events: list[object], ndbs: int = 16) -> tuple[list[dict], list[dict]]:
    data: list[dict] = [{} for _ in range(ndbs)]
    expires: list[dict] = [{} for _ in range(ndbs)]
    for ev in events:
        if isinstance(ev, KeyValue):
            data[ev.db][ev.key] = ev.value
            if ev.expire_ms is not None:
                expires[ev.db][ev.key] = ev.expire_ms
    return data, expires


# -- hand-built files ------------------------------------------------------------------------

def raw(s: bytes) -> bytes:
    """An RDB string without integer encoding."""
    return encode_len(len(s)) + s


def lzf_str(s: bytes) -> bytes:
    c = compress(s)
    return b"\xc3" + encode_len(len(c)) + encode_len(len(s)) + c


def kv(t: int, key: bytes, payload: bytes) -> bytes:
    return bytes((t,)) + raw(key) + payload


def rdb(version: int, *parts: bytes, checksum: bool = True) -> bytes:
    blob = b"REDIS%04d" % version + b"".join(parts) + b"\xff"
    if version >= 5:
        blob += (crc64(blob) if checksum else 0).to_bytes(8, "little")
    return blob


def load_blob(blob: bytes, tmp_path: Any, ndbs: int = 16, **kw: Any) -> Any:
    p = tmp_path / "x.rdb"
    p.write_bytes(blob)
    return load_rdb_file(str(p), ndbs, **kw)


# -- CRC64 -----------------------------------------------------------------------------------

LOREM = (b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         b"incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud "
         b"exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure "
         b"dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla "
         b"pariatur. Excepteur sint occaecat cupidatat non proident, sunt in culpa qui officia "
         b"deserunt mollit anim id est laborum.\x00")


@pytest.mark.parametrize("impl", [crc64, crc64_reference], ids=["fast", "reference"])
def test_crc64_known_vectors(impl: Any) -> None:
    # The vectors of Redis's crc64.c self test (the Lorem one includes the C string's NUL).
    assert impl(b"123456789") == 0xE9C6D914C4B8D9CA
    assert impl(LOREM) == 0xC7794709E69683B3
    assert impl(b"") == 0


def test_crc64_fast_path_is_the_c_one() -> None:
    assert HAVE_FAST_CRC64, "anycrc is a dependency: without it CRC64 runs in pure Python"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.binary(max_size=300))
def test_crc64_fast_equals_reference_and_chains(a: bytes, b: bytes) -> None:
    assert crc64(a) == crc64_reference(a)
    assert crc64(a + b) == crc64(b, crc64(a)) == crc64_reference(b, crc64_reference(a))
    assert crc64(memoryview(a + b)[len(a):], crc64(a)) == crc64(a + b)


# -- LZF -------------------------------------------------------------------------------------

def test_lzf_known_streams() -> None:
    # literal "abc", then a back reference of 6 bytes at distance 3
    assert decompress(b"\x02abc\x80\x02", 9) == b"abcabcabc"
    # literal "a", then an overlapping 10-byte reference at distance 1 (length byte 7 + 1)
    assert decompress(b"\x00a\xe0\x01\x00", 11) == b"a" * 11
    # 32-byte literal run (the longest)
    assert decompress(b"\x1f" + bytes(range(32)), 32) == bytes(range(32))
    # the 5 low bits of the control byte are the high bits of the distance: 0x01, 0x02 -> 259
    data = bytes(range(256))
    stream = b"".join(b"\x1f" + data[i:i + 32] for i in range(0, 256, 32)) + b"\x02xyz" \
        + b"\x21\x02"
    assert decompress(stream, 259 + 3) == data + b"xyz" + data[0:3]


@pytest.mark.parametrize("stream,length,msg", [
    (b"\x05abc", 6, "literal run past the end"),
    (b"\x00a\x20", 3, "truncated"),
    (b"\x00a\x20\x05", 3, "before the start"),
    (b"\x02abc\x80\x02", 8, "longer than"),
    (b"\x02abc", 9, "expected 9"),
])
def test_lzf_corrupt_streams(stream: bytes, length: int, msg: str) -> None:
    with pytest.raises(LzfError, match=msg):
        decompress(stream, length)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=2000),
                 st.lists(st.sampled_from([b"ab", b"abc", b"\x00", b"xyzzy", b"0123456789"]),
                          max_size=400).map(b"".join)))
def test_lzf_roundtrip(data: bytes) -> None:
    assert decompress(compress(data), len(data)) == data


# -- containers -----------------------------------------------------------------------------

INT_BOUNDARIES = [0, 1, 12, 13, 127, 128, -1, -128, -129, 4095, 4096, -4096, -4097, 32767,
                  32768, -32768, -32769, (1 << 23) - 1, 1 << 23, -(1 << 23), -(1 << 23) - 1,
                  (1 << 31) - 1, 1 << 31, -(1 << 31), -(1 << 31) - 1, (1 << 63) - 1, -(1 << 63)]
entry_st = st.one_of(
    st.binary(max_size=70),
    st.binary(min_size=4000, max_size=5000),
    st.sampled_from(INT_BOUNDARIES),
    st.integers(-(1 << 63), (1 << 63) - 1),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry_st, max_size=30))
def test_listpack_and_ziplist_roundtrip(entries: list[bytes | int]) -> None:
    def expect(e: bytes | int) -> bytes | int:
        if isinstance(e, bytes):
            v = canonical_int(e)
            return e if v is None else v
        return e
    want = [expect(e) for e in entries]
    assert listpack_entries(build_listpack(entries)) == want
    assert ziplist_entries(build_ziplist(entries)) == want
    assert listpack_entries(build_listpack(entries, int_strings=False)) == entries


def test_container_integer_encodings_are_redis_sizes() -> None:
    # Entry sizes per listpack.c / ziplist.c for each integer class (header and end excluded).
    lp_size = {0: 2, 127: 2, 128: 3, -4096: 3, 4096: 4, -32769: 5, 1 << 23: 6, 1 << 31: 10}
    for v, size in lp_size.items():
        assert len(build_listpack([v])) - 7 == size, v
    zl_size = {0: 2, 12: 2, 13: 3, -128: 3, 128: 4, 32768: 5, 1 << 23: 6, 1 << 31: 10}
    for v, size in zl_size.items():
        assert len(build_ziplist([v])) - 11 == size, v


@settings(max_examples=100, deadline=None)
@given(st.sets(st.sampled_from(INT_BOUNDARIES) | st.integers(-(1 << 63), (1 << 63) - 1),
               max_size=40))
def test_intset_roundtrip(values: set[int]) -> None:
    assert intset_entries(build_intset(list(values))) == sorted(values)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.binary(max_size=300), st.binary(max_size=300), max_size=10),
       st.integers(0, 4))
def test_zipmap_roundtrip(pairs: dict[bytes, bytes], free: int) -> None:
    assert zipmap_pairs(build_zipmap(list(pairs.items()), free)) == list(pairs.items())


def test_canonical_int() -> None:
    assert canonical_int(b"0") == 0
    assert canonical_int(b"-9223372036854775808") == -(1 << 63)
    for bad in (b"", b"-0", b"007", b"+1", b" 1", b"1 ", b"1_0", b"9223372036854775808", b"-",
                b"1.0", b"abc"):
        assert canonical_int(bad) is None, bad


# -- string and length encodings ---------------------------------------------------------------

@pytest.mark.parametrize("s,enc", [
    (b"0", b"\xc0\x00"),
    (b"-128", b"\xc0\x80"),
    (b"127", b"\xc0\x7f"),
    (b"128", b"\xc1\x80\x00"),
    (b"-32768", b"\xc1\x00\x80"),
    (b"32768", b"\xc2\x00\x80\x00\x00"),
    (b"-2147483648", b"\xc2\x00\x00\x00\x80"),
    (b"2147483648", b"\x0a2147483648"),
    (b"007", b"\x03007"),
    (b"-0", b"\x02-0"),
    (b"", b"\x00"),
])
def test_string_encoding_like_rdbSaveRawString(s: bytes, enc: bytes) -> None:
    assert encode_string(s) == enc


def test_length_encodings() -> None:
    assert encode_len(63) == b"\x3f"
    assert encode_len(64) == b"\x40\x40"
    assert encode_len(16383) == b"\x7f\xff"
    assert encode_len(16384) == b"\x80\x00\x00\x40\x00"
    assert encode_len(1 << 32) == b"\x81" + (1 << 32).to_bytes(8, "big")
    for n in (0, 63, 64, 16383, 16384, 70000):
        events = decode_all(rdb(10, kv(0, b"k", encode_len(n) + b"x" * n)))
        assert events[0] == KeyValue(0, b"k", b"x" * n, None)
    # a 64-bit length is read as such (here: a 3-byte string)
    events = decode_all(rdb(10, kv(0, b"k", b"\x81" + (3).to_bytes(8, "big") + b"abc")))
    assert events[0] == KeyValue(0, b"k", b"abc", None)


def load_blob_mem(blob: bytes) -> list[dict]:
    return dbs_from_events(decode_all(blob))[0]


# -- round trip --------------------------------------------------------------------------------

string_st = st.one_of(
    st.binary(max_size=40),
    st.integers(-(1 << 63), (1 << 63) - 1).map(lambda i: b"%d" % i),
    st.sampled_from([b"%d" % v for v in INT_BOUNDARIES] + [b"-0", b"007", b"+3", b" 1"]),
)
big_string_st = st.binary(min_size=16380, max_size=16390)
score_st = st.floats(allow_nan=False)
value_st = st.one_of(
    string_st,
    big_string_st,
    st.lists(string_st, min_size=1, max_size=8).map(deque),
    st.sets(string_st, min_size=1, max_size=8),
    st.dictionaries(string_st, string_st, min_size=1, max_size=8),
    st.dictionaries(string_st, score_st, min_size=1, max_size=8).map(lambda d: zset(d.items())),
)


@st.composite
def db_st(draw: Any) -> Db:
    data = draw(st.dictionaries(string_st, value_st, max_size=8))
    expires = {}
    for k in data:
        when = draw(st.one_of(st.none(), st.integers(NOW - 5000, NOW + 10**10),
                              st.sampled_from([NOW, NOW - 1, NOW + 1])))
        if when is not None:
            expires[k] = when
    return Db(data, expires)


@st.composite
def cuts_st(draw: Any, length: int) -> list[int]:
    if length < 300 and draw(st.booleans()):
        return list(range(1, length))  # byte by byte
    cuts = draw(st.lists(st.integers(1, max(1, length - 1)), max_size=12))
    return sorted(set(cuts))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(st.lists(db_st(), max_size=4), st.data())
def test_roundtrip_any_dataset_any_chunking(dbs: list[Db], data: Any) -> None:
    blob = encode_rdb_bytes(dbs, now_ms=NOW, aux={"repl-id": "a" * 40, "repl-offset": 77})
    cuts = data.draw(cuts_st(len(blob)))
    events = decode_all(blob, cuts)
    assert isinstance(events[-1], End) and events[-1].checksum_ok is True
    got_data, got_exp = dbs_from_events(events)
    for i in range(16):
        want = dbs[i] if i < len(dbs) else Db()
        # (expired keys are written too: the loader drops them, see decoder tests)
        assert norm_db(got_data[i]) == norm_db(want.data)
        assert got_exp[i] == {k: want.expires[k] for k in want.data if k in want.expires}
    aux = {ev.key: ev.value for ev in events if isinstance(ev, Aux)}
    assert aux[b"repl-id"] == b"a" * 40 and aux[b"repl-offset"] == b"77"
    # The bulk path (with its inline fast lane for strings) sees the same, chunked the same.
    dec = RdbDecoder()
    d2: list[dict] = [{} for _ in range(16)]
    e2: list[dict] = [{} for _ in range(16)]
    evs: list[object] = []
    prev = 0
    for c in cuts + [len(blob)]:
        dec.receive_data(blob[prev:c])
        prev = c
        evs += dec.load_into(d2, e2)
    assert [norm_db(x) for x in d2] == [norm_db(x) for x in got_data] and e2 == got_exp
    assert evs[-1] == End(True) and dec.offset == len(blob)
    assert [ev for ev in events if not isinstance(ev, KeyValue)] == evs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(string_st, st.one_of(string_st, st.binary(min_size=21, max_size=400)),
                          st.sampled_from(["raw", "enc", "lzf"]),
                          st.one_of(st.none(), st.integers(0, 1 << 50))),
                max_size=20, unique_by=lambda t: t[0]),
       st.data())
def test_bulk_fast_lane_equals_event_path(items: list[Any], data: Any) -> None:
    """Strings as Redis writes them (raw, integer-encoded, LZF) with and without expires, read
    by next_event and by load_into's inline lane, in the same random chunks."""
    parts = [b"\xfe\x00"]
    for key, value, how, exp in items:
        if exp is not None:
            parts.append(bytes((C.RDB_OPCODE_EXPIRETIME_MS,)) + struct.pack("<q", exp))
        if how == "lzf" and len(value) > 4:
            enc = lzf_str(value)
        elif how == "enc":
            enc = encode_string(value)
        else:
            enc = raw(value)
        parts.append(b"\x00" + encode_string(key) + enc)
    blob = rdb(10, *parts)
    cuts = data.draw(cuts_st(len(blob)))
    events = decode_all(blob, cuts)
    want = {k: v for k, v, _h, _e in items}
    want_exp = {k: e for k, _v, _h, e in items if e is not None}
    got, got_exp = dbs_from_events(events)
    assert got[0] == want and got_exp[0] == want_exp
    dec = RdbDecoder()
    d: list[dict] = [{}]
    e: list[dict] = [{}]
    prev = 0
    for c in cuts + [len(blob)]:
        dec.receive_data(blob[prev:c])
        prev = c
        dec.load_into(d, e)
    assert d[0] == want and e[0] == want_exp and dec.finished


def test_event_sequence_and_header() -> None:
    dbs = [Db({b"a": b"1"}), Db(), Db({b"b": b"x", b"c": b"y"}, {b"c": NOW + 5})]
    events = decode_all(encode_rdb_bytes(dbs, now_ms=NOW, aux={"extra": b"\x00bin"}))
    assert events[:4] == [Aux(b"redis-ver", REDIS_VERSION.encode()), Aux(b"redis-bits", b"64"),
                          Aux(b"ctime", b"%d" % (NOW // 1000)), Aux(b"used-mem", b"0")]
    assert events[4:6] == [Aux(b"aof-base", b"0"), Aux(b"extra", b"\x00bin")]
    assert events[6:9] == [SelectDb(0), ResizeDb(1, 0), KeyValue(0, b"a", b"1", None)]
    assert events[9:11] == [SelectDb(2), ResizeDb(2, 1)]
    assert set(events[11:13]) == {KeyValue(2, b"b", b"x", None), KeyValue(2, b"c", b"y", NOW + 5)}
    assert events[13:] == [End(True)]


def test_encoder_writes_expired_keys_skips_empty_dbs_and_counts_resize() -> None:
    """As Redis's rdbSaveDb: every key held, expired or not, with its TTL (the loader drops
    the expired ones on a master: Redis's "Test RDB load info"); an empty db not at all."""
    db = Db({b"gone": b"1", b"edge": b"2", b"live": b"3", b"plain": b"4"},
            {b"gone": NOW - 1, b"edge": NOW, b"live": NOW + 1})
    blob = encode_rdb_bytes([Db({}), Db({b"x": b"y"}, {b"x": 1}), db], now_ms=NOW)
    events = decode_all(blob)
    assert SelectDb(0) not in events
    assert [ev for ev in events if isinstance(ev, ResizeDb)] == [ResizeDb(1, 1), ResizeDb(4, 3)]
    keys = {ev.key: ev.expire_ms for ev in events if isinstance(ev, KeyValue)}
    assert keys == {b"x": 1, b"gone": NOW - 1, b"edge": NOW, b"live": NOW + 1, b"plain": None}


def test_encoder_chunks_and_no_checksum() -> None:
    db = Db({b"k%d" % i: b"v" * 100 for i in range(3000)})
    chunks = list(encode_rdb([db], now_ms=NOW, chunk_size=4096))
    assert len(chunks) > 50 and all(len(c) < 4096 + 200 for c in chunks)
    blob = b"".join(chunks)
    assert blob[-8:] == crc64(blob[:-8]).to_bytes(8, "little")
    plain = encode_rdb_bytes([db], now_ms=NOW, checksum=False)
    assert plain[-8:] == bytes(8) and plain[:-8] == blob[:-8]
    assert decode_all(plain)[-1] == End(None)


def test_encoder_rejects_unknown_value_types() -> None:
    with pytest.raises(TypeError, match="key b'k'"):
        encode_rdb_bytes([Db({b"k": 3.5})], now_ms=NOW)


def test_save_rdb_file_is_atomic_and_loadable(tmp_path: Any) -> None:
    path = str(tmp_path / "dump.rdb")
    dbs = [Db({b"s": b"v", b"l": deque([b"1", b"2"]), b"z": zset([(b"m", -0.5)])},
              {b"s": NOW + 100})]
    n = save_rdb_file(path, dbs, aux={"repl-id": "b" * 40}, now_ms=NOW)
    assert n == os.path.getsize(path)
    assert os.listdir(tmp_path) == ["dump.rdb"]
    loaded = load_rdb_file(path, 16)
    assert norm_db(loaded.data[0]) == norm_db(dbs[0].data)
    assert loaded.expires[0] == {b"s": NOW + 100} and loaded.aux[b"repl-id"] == b"b" * 40
    assert loaded.checksum_ok is True and loaded.keys_loaded == 3 and loaded.bytes_read == n
    # with now_ms the loader drops what has expired (a master loading its own dump)
    later = load_rdb_file(path, 16, now_ms=NOW + 101)
    assert b"s" not in later.data[0] and later.keys_expired == 1 and later.keys_loaded == 2


def test_save_rdb_file_failure_leaves_no_temp_file(tmp_path: Any) -> None:
    path = str(tmp_path / "dump.rdb")
    with pytest.raises(TypeError):
        save_rdb_file(path, [Db({b"bad": object()})], now_ms=NOW)
    assert os.listdir(tmp_path) == []


# -- errors ----------------------------------------------------------------------------------

def sample_blob() -> bytes:
    return encode_rdb_bytes([Db({b"str": b"hello" * 10, b"list": deque([b"a", b"b"]),
                                 b"hash": {b"f": b"v"}}, {b"str": NOW + 9})], now_ms=NOW)


def test_every_truncation_is_an_error_with_an_offset() -> None:
    blob = sample_blob()
    for cut in range(len(blob)):
        with pytest.raises(RdbError, match=r"Unexpected end of RDB data .* at offset \d+"):
            decode_all(blob[:cut])


def test_truncated_file_loads_nothing(tmp_path: Any) -> None:
    blob = sample_blob()
    with pytest.raises(RdbError, match="truncated"):
        load_blob(blob[:-20], tmp_path)


def test_checksum_mismatch_is_detected(tmp_path: Any) -> None:
    blob = bytearray(sample_blob())
    i = blob.index(b"hellohello")
    blob[i] ^= 0x20
    with pytest.raises(RdbError, match=r"Wrong RDB checksum .* RDB CRC error at offset \d+"):
        load_blob(bytes(blob), tmp_path)
    events = decode_all(bytes(blob), strict_checksum=False)
    assert events[-1] == End(False)
    assert decode_all(bytes(blob), verify_checksum=False)[-1] == End(None)
    # A zero checksum means "saved with rdbchecksum no": accepted without verification.
    blob[-8:] = bytes(8)
    assert decode_all(bytes(blob))[-1] == End(None)


def test_errors_are_sticky_and_nothing_follows() -> None:
    dec = RdbDecoder()
    dec.receive_data(b"RUBBISH00")
    with pytest.raises(RdbError, match="Wrong signature"):
        dec.next_event()
    dec.receive_data(sample_blob())
    with pytest.raises(RdbError, match="Wrong signature"):
        dec.next_event()


@pytest.mark.parametrize("header,msg", [
    (b"REDIS0014", "Can't handle RDB format version 14"),
    (b"REDIS0000", "Can't handle RDB format version 0"),
    (b"REDISabcd", "Invalid RDB version"),
    (b"RDB000010", "Wrong signature"),
])
def test_bad_headers(header: bytes, msg: str) -> None:
    with pytest.raises(RdbError, match=msg + ".* at offset 0$"):
        decode_all(header + b"\xff" + bytes(8))


@pytest.mark.parametrize("t,name", [(6, "module-pre-release"), (7, "module-value"),
                                    (8, "unknown"), (27, "unknown")])
def test_unsupported_types_name_type_and_offset(t: int, name: str) -> None:
    prefix = b"REDIS0013" + bytes((C.RDB_OPCODE_SELECTDB, 0)) + kv(0, b"ok", raw(b"v"))
    blob = prefix + kv(t, b"k", b"\x00" * 20)
    with pytest.raises(RdbError) as exc:
        decode_all(blob)
    assert str(exc.value) == f"Unsupported RDB object type {t} ({name}) at offset {len(prefix)}"


def test_unknown_string_encoding() -> None:
    with pytest.raises(RdbError, match="Unknown RDB string encoding type 4 at offset 9"):
        decode_all(rdb(10, b"\x00\x01k\xc4"))


def test_hash_field_expiry_loads_and_ttl_free_hash_is_plain() -> None:
    # RDB_TYPE_HASH_METADATA: min expire, count, (ttl, field, value)*; ttl = expiry - min + 1
    with_ttl = kv(C.RDB_TYPE_HASH_METADATA, b"h",
                  struct.pack("<q", NOW) + b"\x02" + b"\x00" + raw(b"a") + raw(b"1")
                  + b"\x05" + raw(b"b") + raw(b"2"))
    loaded = load_blob_mem(rdb(12, with_ttl))[0][b"h"]
    assert loaded == {b"b": b"2", b"a": b"1"} and loaded.ttl == {b"b": NOW + 4}
    no_ttl = kv(C.RDB_TYPE_HASH_METADATA, b"h",
                struct.pack("<q", NOW) + b"\x01" + b"\x00" + raw(b"a") + raw(b"1"))
    assert load_blob_mem(rdb(12, no_ttl))[0] == {b"h": {b"a": b"1"}}
    pre_ga = kv(C.RDB_TYPE_HASH_METADATA_PRE_GA, b"h", b"\x01" + b"\x00" + raw(b"a") + raw(b"1"))
    assert load_blob_mem(rdb(12, pre_ga))[0] == {b"h": {b"a": b"1"}}
    # RDB_TYPE_HASH_LISTPACK_EX: min expire, listpack of (field, value, ttl) triples
    lp_ttl = build_listpack([b"f", b"v", NOW + 5])
    loaded = load_blob_mem(rdb(12, kv(C.RDB_TYPE_HASH_LISTPACK_EX, b"h",
                                      struct.pack("<q", NOW) + raw(lp_ttl))))[0][b"h"]
    assert loaded == {b"f": b"v"} and loaded.ttl == {b"f": NOW + 5}
    lp_none = build_listpack([b"f", b"v", 0, b"g", b"12", 0])
    blob = rdb(12, kv(C.RDB_TYPE_HASH_LISTPACK_EX, b"h", struct.pack("<q", 0) + raw(lp_none)),
               kv(C.RDB_TYPE_HASH_LISTPACK_EX_PRE_GA, b"h2", raw(lp_none)))
    assert load_blob_mem(blob)[0] == {b"h": {b"f": b"v", b"g": b"12"},
                                      b"h2": {b"f": b"v", b"g": b"12"}}


def _bad_prevlen(zl: bytes) -> bytes:
    """The ziplist with its second entry's prevlen off by one."""
    second = 10 + 1 + zl[11] + 1     # header, first entry: prevlen, encoding, its bytes
    return zl[:second] + bytes((zl[second] + 1,)) + zl[second + 1:]


def test_corrupt_values_are_refused() -> None:
    cases = [
        (kv(C.RDB_TYPE_SET, b"s", b"\x02" + raw(b"a") + raw(b"a")), "Duplicate set members"),
        (kv(C.RDB_TYPE_HASH, b"h", b"\x02" + raw(b"a") + raw(b"1") + raw(b"a") + raw(b"2")),
         "Duplicate hash fields"),
        (kv(C.RDB_TYPE_ZSET_2, b"z", b"\x01" + raw(b"m") + struct.pack("<d", float("nan"))),
         "NAN score"),
        (kv(C.RDB_TYPE_ZSET_LISTPACK, b"z", raw(build_listpack([b"m", b"x1"]))),
         "Invalid sorted set score"),
        (kv(C.RDB_TYPE_HASH_LISTPACK, b"h", raw(build_listpack([b"a", b"1", b"b"]))),
         "odd number"),
        (kv(C.RDB_TYPE_SET_LISTPACK, b"s", raw(build_listpack([b"a"])[:-1] + b"\x00")),
         "Set listpack integrity check failed"),
        # rdbLoadObject's deep checks, with Redis's messages: a back-length that is not the
        # entry's size, a prevlen that is not the previous entry's, an empty zipmap
        (kv(C.RDB_TYPE_HASH_LISTPACK, b"h",
            raw(build_listpack([b"a", b"1"])[:-3] + b"\x03\x02\xff")),
         "Hash listpack integrity check failed"),
        (kv(C.RDB_TYPE_HASH_ZIPLIST, b"h", raw(_bad_prevlen(build_ziplist([b"a", b"1"])))),
         "Hash ziplist integrity check failed"),
        (kv(C.RDB_TYPE_HASH_ZIPMAP, b"h", raw(build_zipmap([]))),
         "Zipmap integrity check failed"),
        (kv(C.RDB_TYPE_SET_INTSET, b"s", raw(b"\x03\x00\x00\x00\x01\x00\x00\x00\x05")),
         "Intset integrity check failed"),
        (kv(C.RDB_TYPE_LIST_QUICKLIST_2, b"l", b"\x01\x03" + raw(build_listpack([b"a"]))),
         "Quicklist integrity"),
        (kv(C.RDB_TYPE_STRING, b"s", b"\xc3\x03\x05\x02abc"), "Invalid LZF"),
        (kv(C.RDB_TYPE_STRING, b"k", raw(b"1")) + kv(C.RDB_TYPE_STRING, b"k", raw(b"2")),
         "Duplicated key b'k' in DB 0"),
    ]
    for body, msg in cases:
        blob = rdb(10, b"\xfe\x00", body)
        with pytest.raises(RdbError, match=msg + r".* at offset \d+"):
            dec = RdbDecoder(deep=True)      # (sanitize-dump-payload yes)
            dec.receive_data(blob)
            dec.receive_data(b"")
            dec.load_into([{}], [{}])
    # without the deep check (sanitize-dump-payload no, the default) a back-length is not
    # read: the forward walk finds the entries, as Redis's shallow check lets them through
    wrong_backlen = build_listpack([b"a", b"1"])[:-3] + b"\x03\x02\xff"
    dec = RdbDecoder()
    dec.receive_data(rdb(10, b"\xfe\x00", kv(C.RDB_TYPE_HASH_LISTPACK, b"h", raw(wrong_backlen))))
    dec.receive_data(b"")
    data: list[dict[bytes, object]] = [{}]
    dec.load_into(data, [{}])
    assert data[0] == {b"h": {b"a": b"3"}}


def test_select_db_beyond_configured_databases(tmp_path: Any) -> None:
    blob = rdb(10, b"\xfe\x10", kv(0, b"k", raw(b"v")))
    with pytest.raises(RdbError, match="selects DB 16 but only 16 databases"):
        load_blob(blob, tmp_path)


# -- every encoding Redis has written, built by hand --------------------------------------------

def test_every_legacy_and_new_encoding(tmp_path: Any) -> None:
    long_value = b"compressible " * 20
    lp_list = build_listpack([b"a", 5, -70000, b"x" * 100])
    zl_list = build_ziplist([b"b", 7, 1 << 40, b"y" * 300])
    parts = [
        b"\xfa" + raw(b"redis-ver") + raw(b"8.6.0"),
        b"\xfa" + raw(b"lua") + lzf_str(b"return 1" * 10),
        bytes((C.RDB_OPCODE_FUNCTION2,)) + raw(b"#!lua name=lib\nredis.register_function()"),
        bytes((C.RDB_OPCODE_FUNCTION_PRE_GA,)) + raw(b"lib") + raw(b"LUA") + b"\x01"
        + raw(b"description") + raw(b"return 2"),
        # module aux: id, when opcode (UINT), when, then values until EOF
        bytes((C.RDB_OPCODE_MODULE_AUX,)) + encode_len((12345 << 10) | 3) + b"\x02\x02"
        + b"\x01\x05" + b"\x02\x40\x10" + b"\x03" + struct.pack("<f", 1.5) + b"\x04"
        + struct.pack("<d", 2.5) + b"\x05" + raw(b"blob") + b"\x00",
        b"\xfe\x00\xfb\x10\x02",
        bytes((C.RDB_OPCODE_SLOT_INFO,)) + b"\x05\x10\x02",
        # strings: LZF, int8/16/32, 32-bit length
        kv(0, b"lzf", lzf_str(long_value)),
        kv(0, b"i8", b"\xc0\xfe"),
        kv(0, b"i16", b"\xc1\x00\x80"),
        kv(0, b"i32", b"\xc2\xff\xff\xff\x7f"),
        kv(0, b"len32", b"\x80\x00\x00\x00\x03abc"),
        bytes((C.RDB_TYPE_STRING,)) + b"\xc1\x39\x30" + raw(b"int-encoded key"),
        # expire in seconds, LRU idle and LFU freq before keys
        bytes((C.RDB_OPCODE_EXPIRETIME,)) + struct.pack("<i", 2_000_000_000),
        bytes((C.RDB_OPCODE_IDLE,)) + b"\x40\x80",
        kv(0, b"secs", raw(b"v")),
        bytes((C.RDB_OPCODE_FREQ,)) + b"\x07",
        bytes((C.RDB_OPCODE_EXPIRETIME_MS,)) + struct.pack("<q", NOW + 1),
        # key metadata that may be ignored (class "TEST", ver 1, ALLOW_IGNORE)
        bytes((C.RDB_OPCODE_KEY_META,)) + b"\x01" + struct.pack(
            "<I", (((19 << 18) | (4 << 12) | (18 << 6) | 19) << 8) | (1 << 3) | 1)
        + b"\x02\x09\x05" + raw(b"meta") + b"\x00",
        kv(0, b"ms", raw(b"w")),
        # lists
        kv(C.RDB_TYPE_LIST, b"list-linked", b"\x03" + raw(b"a") + b"\xc0\x05" + lzf_str(
            long_value)),
        kv(C.RDB_TYPE_LIST_ZIPLIST, b"list-ziplist", raw(zl_list)),
        kv(C.RDB_TYPE_LIST_QUICKLIST, b"quicklist", b"\x02" + raw(zl_list) + lzf_str(zl_list)),
        kv(C.RDB_TYPE_LIST_QUICKLIST_2, b"quicklist2",
           b"\x03" + b"\x02" + raw(lp_list) + b"\x01" + raw(b"plain node" * 5)
           + b"\x02" + lzf_str(lp_list)),
        # sets
        kv(C.RDB_TYPE_SET, b"set", b"\x02" + raw(b"a") + b"\xc0\x01"),
        kv(C.RDB_TYPE_SET_INTSET, b"intset16", raw(build_intset([3, -2, 1]))),
        kv(C.RDB_TYPE_SET_INTSET, b"intset64", raw(build_intset([1, 1 << 40]))),
        kv(C.RDB_TYPE_SET_LISTPACK, b"set-lp", raw(build_listpack([b"m", 12, b"n"]))),
        # sorted sets
        kv(C.RDB_TYPE_ZSET, b"zset-v1", b"\x04" + raw(b"a") + b"\x031.5" + raw(b"b") + b"\xfe"
           + raw(b"c") + b"\xff" + raw(b"d") + raw(b"%.17g" % (1 / 3))),
        kv(C.RDB_TYPE_ZSET_2, b"zset-v2", b"\x02" + raw(b"a") + struct.pack("<d", -0.25)
           + b"\xc0\x07" + struct.pack("<d", 1e300)),
        kv(C.RDB_TYPE_ZSET_ZIPLIST, b"zset-zl", raw(build_ziplist([b"a", b"1.5", b"b", 2]))),
        kv(C.RDB_TYPE_ZSET_LISTPACK, b"zset-lp",
           raw(build_listpack([b"a", b"-inf", 7, b"3.25", b"c", 100]))),
        # hashes
        kv(C.RDB_TYPE_HASH, b"hash", b"\x02" + raw(b"f") + raw(b"v") + b"\xc0\x01"
           + lzf_str(long_value)),
        kv(C.RDB_TYPE_HASH_ZIPMAP, b"zipmap", raw(build_zipmap([(b"f1", b"v1"),
                                                               (b"f2", b"x" * 300)], free=2))),
        kv(C.RDB_TYPE_HASH_ZIPLIST, b"hash-zl", raw(build_ziplist([b"f", b"v", b"n", 9]))),
        kv(C.RDB_TYPE_HASH_LISTPACK, b"hash-lp", lzf_str(build_listpack([b"f", b"v" * 40, 5, 6]))),
        # empty collections are skipped, as Redis does
        kv(C.RDB_TYPE_SET, b"empty-set", b"\x00"),
        kv(C.RDB_TYPE_LIST_ZIPLIST, b"empty-zl", raw(build_ziplist([]))),
        b"\xfe\x03",
        kv(0, b"db3", raw(b"three")),
    ]
    blob = rdb(13, *parts)
    events = decode_all(blob, cuts=list(range(1, len(blob), 7)))
    assert events[0] == Aux(b"redis-ver", b"8.6.0")
    assert events[1] == Aux(b"lua", b"return 1" * 10)
    assert events[2] == FunctionSkipped(b"#!lua name=lib\nredis.register_function()")
    assert events[3] == FunctionSkipped(b"return 2")
    assert events[4] == ModuleAuxSkipped((12345 << 10) | 3, C.module_type_name(12345 << 10), 2)
    assert events[-1] == End(True)
    data, expires = dbs_from_events(events)
    lp_items = [b"a", b"5", b"-70000", b"x" * 100]
    zl_items = [b"b", b"7", b"%d" % (1 << 40), b"y" * 300]
    assert norm_db(data[0]) == norm_db({
        b"lzf": long_value, b"i8": b"-2", b"i16": b"-32768", b"i32": b"2147483647",
        b"len32": b"abc", b"12345": b"int-encoded key", b"secs": b"v", b"ms": b"w",
        b"list-linked": deque([b"a", b"5", long_value]),
        b"list-ziplist": deque(zl_items),
        b"quicklist": deque(zl_items + zl_items),
        b"quicklist2": deque(lp_items + [b"plain node" * 5] + lp_items),
        b"set": {b"a", b"1"},
        b"intset16": {b"-2", b"1", b"3"},
        b"intset64": {b"1", b"%d" % (1 << 40)},
        b"set-lp": {b"m", b"12", b"n"},
        b"zset-v1": zset([(b"a", 1.5), (b"b", float("inf")), (b"c", float("-inf")),
                          (b"d", 1 / 3)]),
        b"zset-v2": zset([(b"a", -0.25), (b"7", 1e300)]),
        b"zset-zl": zset([(b"a", 1.5), (b"b", 2.0)]),
        b"zset-lp": zset([(b"a", float("-inf")), (b"7", 3.25), (b"c", 100.0)]),
        b"hash": {b"f": b"v", b"1": long_value},
        b"zipmap": {b"f1": b"v1", b"f2": b"x" * 300},
        b"hash-zl": {b"f": b"v", b"n": b"9"},
        b"hash-lp": {b"f": b"v" * 40, b"5": b"6"},
    })
    assert data[3] == {b"db3": b"three"}
    assert expires[0] == {b"secs": 2_000_000_000_000, b"ms": NOW + 1}
    # The same bytes through the file loader.
    loaded = load_blob(blob, tmp_path)
    assert loaded.version == 13 and loaded.empty_keys_skipped == 2
    assert loaded.functions_skipped == 2 and loaded.module_aux_skipped == 1
    assert loaded.type_counts[C.RDB_TYPE_ZSET] == 1 and loaded.keys_loaded == len(data[0]) + 1


def test_key_meta_that_cannot_be_ignored_is_refused() -> None:
    spec = (((19 << 18) | (4 << 12) | (18 << 6) | 19) << 8) | (1 << 3)  # "TEST" v1, no flags
    body = bytes((C.RDB_OPCODE_KEY_META,)) + b"\x01" + struct.pack("<I", spec) + b"\x00"
    with pytest.raises(RdbError, match="class 'TEST' needs its module"):
        decode_all(rdb(13, body, kv(0, b"k", raw(b"v"))))


def test_old_versions_without_checksum() -> None:
    blob = b"REDIS0004" + b"\xfe\x00" + kv(0, b"k", raw(b"v")) + b"\xff"
    events = decode_all(blob)
    assert events == [SelectDb(0), KeyValue(0, b"k", b"v", None), End(None)]


def test_unused_data_after_end() -> None:
    blob = sample_blob()
    dec = RdbDecoder()
    dec.receive_data(blob + b"TRAILER")
    evs = []
    while (ev := dec.next_event()) is not None:
        evs.append(ev)
    assert evs[-1] == End(True) and dec.finished
    assert dec.offset == len(blob) and dec.unused_data == b"TRAILER"
    dec.receive_data(b"more")
    assert dec.next_event() is None and dec.unused_data == b"TRAILERmore"


def test_big_collection_in_small_chunks_is_read_once() -> None:
    """A collection bigger than the buffer is read element by element as bytes arrive: its
    progress survives between chunks and consumed bytes leave the buffer."""
    big_list = deque(b"element-%d" % i for i in range(20000))
    big_zset = zset((b"m%d" % i, i / 7) for i in range(5000))
    blob = encode_rdb_bytes([Db({b"l": big_list, b"z": big_zset})], now_ms=NOW)
    dec = RdbDecoder()
    got: dict[bytes, Any] = {}
    progress = []
    for i in range(0, len(blob), 512):
        dec.receive_data(blob[i:i + 512])
        while (ev := dec.next_event()) is not None:
            if isinstance(ev, KeyValue):
                got[ev.key] = ev.value
        assert len(dec._buf) - dec._pos < 2 * 512 + 64  # only the unparsed tail is kept
        if dec._partial is not None:
            progress.append((dec._partial.key, dec._partial.remaining))
    assert got[b"l"] == big_list and list(got[b"z"].items()) == list(big_zset.items())
    lists = [r for k, r in progress if k == b"l"]
    assert len(lists) > 100 and lists == sorted(lists, reverse=True) and lists[0] > lists[-1]


def test_big_stream_in_small_chunks_reads_each_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream bigger than the buffer is read node by node as bytes arrive (its nodes a
    _Partial's elements), not parsed again from its first byte at each chunk; its groups and
    PEL come after, whole; what is read equals the stream written."""
    from pyrepl.keyspace.stream import Consumer, Group, Nack, Stream
    from pyrepl.rdb import decoder as dec_mod

    s = Stream()
    for i in range(1, 5001):
        s.append((i << 64) | 0, [b"user", b"u%d" % (i % 97), b"value", b"%d" % (i * 7)],
                 4096, 100)
    g = s.groups[b"g1"] = Group((1000 << 64), 1000)
    c = g.consumers[b"c1"] = Consumer(b"c1", 123)
    for i in range(1, 1001):
        g.pel[i << 64] = c.pel[i << 64] = Nack(1700000000000 + i, 1, c)
    blob = encode_rdb_bytes([Db({b"s": s})], now_ms=NOW)
    checked: list[int] = []
    real = dec_mod._stream_node

    def counting(key: bytes, lp: bytes, deep: bool) -> Any:
        checked.append(int.from_bytes(key, "big"))
        return real(key, lp, deep)

    monkeypatch.setattr(dec_mod, "_stream_node", counting)
    dec = RdbDecoder()
    got: dict[bytes, Any] = {}
    for i in range(0, len(blob), 512):
        dec.receive_data(blob[i:i + 512])
        while (ev := dec.next_event()) is not None:
            if isinstance(ev, KeyValue):
                got[ev.key] = ev.value
        if dec._partial is not None and dec._partial.remaining:   # (nodes left to read)
            assert len(dec._buf) - dec._pos < 2 * 512 + 4200   # what is unparsed: a node at most
    t = got[b"s"]
    assert len(s.nodes) == 50 and checked == [n.master for n in s.nodes]   # each node once
    assert [n.listpack() for n in t.nodes] == [n.listpack() for n in s.nodes]
    assert list(t.range(0, (1 << 128) - 1)) == list(s.range(0, (1 << 128) - 1))
    assert (t.length, t.last_id, t.first_id) == (s.length, s.last_id, s.first_id)
    tg = t.groups[b"g1"]
    assert sorted(tg.pel) == sorted(g.pel) and list(tg.consumers) == [b"c1"]
    assert all(tg.pel[e].delivery_time == 1700000000000 + (e >> 64) for e in tg.pel)


def test_error_inside_a_partially_read_collection_names_its_start() -> None:
    prefix = b"REDIS0010\xfe\x00"
    body = kv(C.RDB_TYPE_SET, b"s", b"\x03" + raw(b"a") + raw(b"b") + raw(b"a"))
    blob = prefix + body + b"\xff" + bytes(8)
    with pytest.raises(RdbError, match=f"Duplicate set members detected at offset {len(prefix)}"):
        decode_all(blob, cuts=list(range(1, len(blob))))


# -- golden files made by redis-server 7.0.15 -------------------------------------------------

@pytest.mark.parametrize("config", ["compact", "plain"])
def test_golden_files_from_real_redis(config: str) -> None:
    gold = golden_module()
    dataset = gold.golden_dataset()
    path = os.path.join(DATA_DIR, gold.GOLDEN_FILES[config])
    loaded = load_rdb_file(path, 16)
    assert loaded.checksum_ok is True and loaded.version == 10
    assert loaded.aux[b"redis-ver"] == b"7.0.15"
    for i in range(16):
        want = dataset[i] if i < len(dataset) else {}
        assert norm_db(loaded.data[i]) == norm_db({k: v for k, (v, _e) in want.items()})
        assert loaded.expires[i] == {k: e for k, (_v, e) in want.items() if e is not None}
    names = {C.rdb_type_name(t) for t in loaded.type_counts}
    if config == "compact":
        assert {"set-intset", "hash-listpack", "zset-listpack", "quicklist-v2",
                "set-hashtable", "hash-hashtable", "zset-v2", "string"} == names
    else:
        assert {"set-hashtable", "hash-hashtable", "zset-v2", "quicklist-v2",
                "string"} == names
    # Our writer re-encodes the same data so that it decodes identically.
    dbs = [Db({k: v for k, (v, _e) in db.items()},
              {k: e for k, (_v, e) in db.items() if e is not None}) for db in dataset]
    again = dbs_from_events(decode_all(encode_rdb_bytes(dbs, now_ms=NOW)))
    assert [norm_db(d) for d in again[0]] == [norm_db(d) for d in loaded.data]
    assert again[1] == loaded.expires


def test_golden_file_in_odd_chunks() -> None:
    gold = golden_module()
    with open(os.path.join(DATA_DIR, gold.GOLDEN_FILES["compact"]), "rb") as f:
        blob = f.read()
    whole = dbs_from_events(decode_all(blob))
    chunked = dbs_from_events(decode_all(blob, cuts=list(range(1, len(blob), 97))))
    assert [norm_db(d) for d in whole[0]] == [norm_db(d) for d in chunked[0]]
    assert whole[1] == chunked[1]


def test_an_empty_listpack_is_an_empty_key_skipped() -> None:
    """rdbLoadObject: an empty hash, zset or set listpack is an empty key (skipped, named in
    the log), not a corrupt one."""
    from pyrepl.rdb.containers import checked_listpack_entries

    assert checked_listpack_entries(build_listpack([])) == []
    blob = rdb(10, b"\xfe\x00", kv(C.RDB_TYPE_HASH_LISTPACK, b"h", raw(build_listpack([]))),
               kv(C.RDB_TYPE_STRING, b"k", raw(b"v")))
    dec = RdbDecoder()
    dec.receive_data(blob)
    dec.receive_data(b"")
    data: list[dict[bytes, object]] = [{}]
    dec.load_into(data, [{}])
    assert data[0] == {b"k": b"v"} and dec.empty_keys == [b"h"]


def _stream_payload(with_consumer: bool) -> bytes:
    from pyrepl.keyspace.stream import Consumer, Group, Nack, Stream
    from pyrepl.rdb.dump import dump_payload
    s = Stream()
    for i in (1, 2):
        s.append(i << 64, [b"f", b"v%d" % i], 4096, 100)
    g = s.groups[b"g"] = Group(2 << 64, 2)
    nack = g.pel[1 << 64] = Nack(1000, 1, None)
    if with_consumer:
        c = g.consumers[b"c"] = Consumer(b"c", 1000)
        nack.consumer = c
        c.pel[1 << 64] = nack
    return dump_payload(s)


def test_corrupt_stream_payloads_are_refused() -> None:
    """RESTORE of a stream: a PEL entry no consumer owns is refused always (Redis checks it
    under sanitize-dump-payload; without, its reads assert); a wrong back-length inside a node's
    listpack under sanitize-dump-payload, as rdbLoadObject's deep check finds it."""
    from pyrepl.rdb.dump import PayloadError, load_payload
    good = load_payload(_stream_payload(True), deep=True)
    assert good.length == 2 and list(good.groups[b"g"].pel) == [1 << 64]
    for deep in (False, True):
        with pytest.raises(PayloadError) as e:
            load_payload(_stream_payload(False), deep=deep)
        assert "Stream CG PEL entry without consumer" in e.value.reason
    # the first entry of the node (the live count, 2) with a back-length of 0x7f, not 1
    p = _stream_payload(True)
    lp_at = p.index(b"\x02\x01\x00\x01")            # live 2, backlen 1, deleted 0, backlen 1
    bad = p[:lp_at + 1] + b"\x7f" + p[lp_at + 2:]
    assert load_payload(bad, verify_checksum=False).length == 2
    with pytest.raises(PayloadError) as e:
        load_payload(bad, verify_checksum=False, deep=True)
    assert "Stream listpack integrity check failed" in e.value.reason


def test_a_value_that_runs_past_the_payload_reads_its_footer() -> None:
    """Redis reads a RESTORE payload's value from the whole payload, footer included: a
    pre-2.8 sorted set whose last score is missing reads the footer's version byte as the
    score's length (not an EOF byte, which would be the -inf mark), and fails there."""
    from pyrepl.rdb.dump import PayloadError, load_payload
    body = bytes((C.RDB_TYPE_ZSET,)) + b"\x01" + raw(b"m")        # one member, no score
    with pytest.raises(PayloadError, match="Bad data format") as e:
        load_payload(body + b"\x0a\x00" + bytes(8), verify_checksum=False)
    assert "Invalid double value in sorted set" in e.value.reason
