"""The stream value (pyrepl.keyspace.stream) and its RDB form, without a server.

Hypothesis drives appends, deletions and trims against a plain model (a sorted dict) and checks
that ranges agree, that every node's tracked lpBytes equals the listpack the encoder builds
(the size decides node boundaries), and that the RDB form round-trips (entries, metadata,
groups, PELs) with the same digest. Sealing (full nodes kept as listpack bytes, decoded on
demand through a small cache) is checked against a twin stream whose nodes are all kept
decoded, and every node's bytes against the listpack built from its entries the way the RDB
writer built it before nodes were kept sealed.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pyrepl.keyspace import stream as stream_mod
from pyrepl.keyspace.digest import key_digest
from pyrepl.keyspace.listpack import ContainerError
from pyrepl.keyspace.stream import (
    MASK64,
    MAX_ID,
    Consumer,
    Group,
    Nack,
    Node,
    NodeCorrupt,
    Stream,
    decode_node_reference,
    entry_bytes_reference,
    find_reference,
    history_reply_reference,
    id_str,
    make_id,
    range_reply_reference,
)
from pyrepl.rdb.constants import RDB_TYPE_STREAM_LISTPACKS_2
from pyrepl.rdb.containers import build_listpack
from pyrepl.rdb.dump import dump_payload, load_payload
from pyrepl.rdb.encoder import stream_listpack

VALUES = st.sampled_from([b"v", b"", b"12", b"-7", b"x" * 70, b"y" * 5000, b"9999999999"])
FIELDS = st.sampled_from([b"f", b"g", b"1", b"field" * 4])
OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 4), st.integers(0, 2),
              st.lists(st.tuples(FIELDS, VALUES), min_size=1, max_size=3)),
    st.tuples(st.just("del"), st.integers(0, 60)),
    st.tuples(st.just("maxlen"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("minid"), st.integers(0, 60), st.booleans()),
), max_size=80)


def _apply(ops: list, max_bytes: int, max_entries: int) -> tuple[Stream, dict[int, list[bytes]]]:
    s = Stream()
    model: dict[int, list[bytes]] = {}
    ms = 0
    for op in ops:
        if op[0] == "add":
            ms += op[1]
            eid = make_id(ms, op[2])
            fv = [x for pair in op[3] for x in pair]
            s.append(eid, fv, max_bytes, max_entries)
            model[eid] = fv
        elif op[0] == "del":
            ids = sorted(model)
            if ids:
                eid = ids[op[1] % len(ids)]
                assert s.delete(eid)
                del model[eid]
                assert not s.delete(eid)
        elif op[0] == "maxlen":
            s.trim(op[1], None, op[2], 0)
            if not op[2]:
                for eid in sorted(model)[:max(0, len(model) - op[1])]:
                    del model[eid]
        else:
            minid = make_id(op[1], 0)
            s.trim(None, minid, op[2], 0)
            if not op[2]:
                for eid in [e for e in model if e < minid]:
                    del model[eid]
        live = set(model)
        # approximate trims drop whole nodes only: sync the model with what is left
        for eid in [e for e in live if s.get(e) is None]:
            del model[eid]
    return s, model


@settings(max_examples=150, deadline=None)
@given(ops=OPS, max_bytes=st.sampled_from([0, 100, 300, 4096]),
       max_entries=st.sampled_from([0, 1, 3, 100]))
def test_ranges_sizes_and_rdb_round_trip(ops: list, max_bytes: int, max_entries: int) -> None:
    s, model = _apply(ops, max_bytes, max_entries)
    assert s.length == len(model)
    assert [e for e, _ in s.range(0, MAX_ID)] == sorted(model)
    assert [e for e, _ in s.range(0, MAX_ID, rev=True)] == sorted(model, reverse=True)
    for eid, fv in model.items():
        assert s.get(eid) == fv
    for node in s.nodes:
        assert node.live >= 0          # a MINID trim can leave only tombstones, as in Redis
        assert node.lp_bytes() == len(stream_listpack(node))
    payload = dump_payload(s)
    assert payload[0] == RDB_TYPE_STREAM_LISTPACKS_2
    back = load_payload(payload)
    assert isinstance(back, Stream)
    assert [(e, fv) for e, fv in back.range(0, MAX_ID)] == sorted(model.items())
    assert (back.length, back.last_id, back.first_id, back.entries_added, back.max_deleted) == \
        (s.length, s.last_id, s.first_id, s.entries_added, s.max_deleted)
    assert back.keys == s.keys
    assert key_digest(back, None) == key_digest(s, None)


def test_node_boundaries_by_entries_and_bytes() -> None:
    s = Stream()
    for i in range(1, 11):
        s.append(make_id(i, 0), [b"f", b"v"], 4096, 3)
    assert [n.live for n in s.nodes] == [3, 3, 3, 1]
    s = Stream()
    for i in range(1, 6):
        s.append(make_id(i, 0), [b"f", b"x" * 40], 100, 0)
    assert len(s.nodes) > 1
    assert all(n.lp_bytes() == len(stream_listpack(n)) for n in s.nodes)


def test_groups_round_trip_and_copy() -> None:
    s = Stream()
    for i in range(1, 6):
        s.append(make_id(i, 0), [b"f", b"%d" % i], 4096, 100)
    g = s.groups[b"g"] = Group(make_id(3, 0), 3)
    c = g.consumers[b"alice"] = Consumer(b"alice", 1234)
    g.consumers[b"bob"] = Consumer(b"bob", 99)
    for i in (1, 2):
        n = Nack(1000 + i, i, c)
        g.pel[make_id(i, 0)] = n
        c.pel[make_id(i, 0)] = n
    s.groups[b"h"] = Group(0, -1)
    for v in (load_payload(dump_payload(s)), s.copy()):
        assert set(v.groups) == {b"g", b"h"}
        vg = v.groups[b"g"]
        assert (vg.last_id, vg.entries_read) == (make_id(3, 0), 3)
        assert v.groups[b"h"].entries_read == -1
        assert sorted(vg.pel) == [make_id(1, 0), make_id(2, 0)]
        assert vg.pel[make_id(2, 0)].delivery_time == 1002
        assert vg.pel[make_id(2, 0)].consumer is vg.consumers[b"alice"]
        assert vg.consumers[b"bob"].seen_time == 99
    cp = s.copy()
    cp.delete(make_id(1, 0))
    assert s.get(make_id(1, 0)) is not None


def test_ids_lag_and_rax_nodes() -> None:
    assert id_str(make_id(5, 7)) == b"5-7"
    s = Stream()
    assert s.rax_nodes() == 1
    s.append(make_id(1, 0), [b"a", b"b"], 4096, 1)
    assert s.rax_nodes() == 2                        # a compressed node and the leaf
    s.append(make_id(2, 0), [b"a", b"b"], 4096, 1)
    assert s.rax_nodes() == 6     # prefix, branch, then a compressed tail + leaf per key
    g = Group(0, 0)
    assert s.lag(g) == 2
    s.delete(make_id(2, 0))
    s.max_deleted = make_id(2, 0)
    assert s.lag(Group(0, -1)) is None or s.lag(Group(0, -1)) >= 0


# -- sealed nodes -----------------------------------------------------------------------------


def _i64(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


def reference_listpack(node: Node) -> bytes:
    """The node's listpack built from its decoded entries, as the RDB writer did before nodes
    were kept sealed (build_listpack over master entry, flags, deltas, fields/values)."""
    d = node.entries()
    items: list[bytes | int] = [node.live, node.deleted, len(d.fields), *d.fields, 0]
    mms, mseq = node.master >> 64, node.master & MASK64
    for eid, fv, flags in zip(d.ids, d.fvs, d.flags, strict=True):
        items += (flags, _i64((eid >> 64) - mms), _i64((eid & MASK64) - mseq))
        nf = len(fv) // 2
        if flags & 2:
            items += fv[1::2]
            items.append(nf + 3)
        else:
            items.append(nf)
            items += fv
            items.append(nf * 2 + 4)
    return build_listpack(items)


def _unsealed(s: Stream) -> None:
    for n in s.nodes:
        n.unseal()


SEAL_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 4), st.integers(0, 2),
              st.lists(st.tuples(FIELDS, VALUES), min_size=1, max_size=3)),
    st.tuples(st.just("add"), st.integers(1, 4), st.integers(0, 2),
              st.just([(b"f", b"v")])),
    st.tuples(st.just("del"), st.integers(0, 200)),
    st.tuples(st.just("maxlen"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("minid"), st.integers(0, 200), st.booleans()),
    st.tuples(st.just("range"), st.integers(0, 200), st.integers(0, 200), st.booleans()),
    st.tuples(st.just("get"), st.integers(0, 200)),
), max_size=120)


@pytest.mark.parametrize("cache", [1, 8])
@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])   # (set once: fine)
@given(ops=SEAL_OPS, max_bytes=st.sampled_from([0, 120, 300, 4096]),
       max_entries=st.sampled_from([0, 2, 5, 100]))
def test_sealed_nodes_match_decoded_twin(monkeypatch: pytest.MonkeyPatch, cache: int,
                                         ops: list, max_bytes: int, max_entries: int) -> None:
    """XADD / XDEL / XTRIM / XRANGE / get sequences on a stream with sealing, and on a twin
    whose nodes are all unsealed after every step: same entries, node layout and bytes."""
    monkeypatch.setattr(stream_mod, "CACHE_NODES", cache)
    s, twin = Stream(), Stream()
    model: dict[int, list[bytes]] = {}
    ms = 0
    for op in ops:
        if op[0] == "add":
            ms += op[1]
            eid = make_id(ms, op[2])
            fv = [x for pair in op[3] for x in pair]
            for t in (s, twin):
                t.append(eid, fv, max_bytes, max_entries)
            model[eid] = fv
        elif op[0] == "del":
            eid = make_id(op[1], op[1] % 3)
            assert s.delete(eid) == twin.delete(eid) == (eid in model)
            model.pop(eid, None)
        elif op[0] in ("maxlen", "minid"):
            args = (op[1], None) if op[0] == "maxlen" else (None, make_id(op[1], 0))
            assert s.trim(*args, op[2], 0) == twin.trim(*args, op[2], 0)
            model = {e: v for e, v in model.items() if twin.get(e) is not None}
        elif op[0] == "range":
            lo, hi = make_id(op[1], 0), make_id(op[2], 2)
            assert list(s.range(lo, hi, op[3])) == list(twin.range(lo, hi, op[3])) == \
                sorted(((e, v) for e, v in model.items() if lo <= e <= hi), reverse=op[3])
        else:
            eid = make_id(op[1], op[1] % 3)
            assert s.get(eid) == twin.get(eid) == model.get(eid)
        _unsealed(twin)
        assert all(n.lp is not None for n in s.nodes[:-1])         # full nodes are sealed
    assert (s.keys, s.length, s.first_id, s.first_any()) == \
        (twin.keys, twin.length, twin.first_id, twin.first_any())
    assert [(n.live, n.deleted, n.last, n.lp_bytes()) for n in s.nodes] == \
        [(n.live, n.deleted, n.last, n.lp_bytes()) for n in twin.nodes]
    for a, b in zip(s.nodes, twin.nodes, strict=True):
        lp = a.listpack()
        assert lp == b.listpack() == reference_listpack(a) == reference_listpack(b)
        assert len(lp) == a.lp_bytes()
    assert list(s.range(0, MAX_ID)) == sorted(model.items())
    payload = dump_payload(s)
    assert payload == dump_payload(twin)
    back = load_payload(payload)
    assert isinstance(back, Stream)
    assert all(n.lp is not None and n.d is None for n in back.nodes)   # kept as read
    assert dump_payload(back) == payload
    assert list(back.range(0, MAX_ID)) == sorted(model.items())
    cp = s.copy()
    assert dump_payload(cp) == payload


def test_sealing_keeps_bytes_and_decodes_through_a_bounded_cache() -> None:
    s = Stream()
    for i in range(1, 1001):
        s.append(make_id(i, 0), [b"sensor", b"%d" % (i % 100), b"value", b"%d" % i], 4096, 100)
    assert len(s.nodes) == 10
    assert all(n.lp is not None and n.d is None for n in s.nodes[:-1])
    assert s.nodes[-1].lp is None                               # the open tail
    for n in s.nodes:
        assert n.listpack() == reference_listpack(n)
    assert len(list(s.range(0, MAX_ID))) == 1000
    assert sum(n.d is not None for n in s.nodes[:-1]) <= stream_mod.CACHE_NODES
    # XDEL in a sealed node edits its bytes (flag, counters), as Redis edits the listpack
    before = s.nodes[3].lp
    assert s.delete(make_id(350, 0))
    after = s.nodes[3].lp
    assert before is not None and after is not None and len(after) == len(before)
    assert after == reference_listpack(s.nodes[3]) and s.get(make_id(350, 0)) is None
    # a tail deleted away: the sealed node before it takes appends again (it has room)
    t = Stream()
    t.append(make_id(1, 0), [b"f", b"v"], 4096, 0)
    t.append(make_id(2, 0), [b"f", b"x" * 5000], 4096, 0)
    assert len(t.nodes) == 2 and t.nodes[0].lp is not None
    t.delete(make_id(2, 0))
    t.append(make_id(3, 0), [b"f", b"w"], 4096, 0)
    assert len(t.nodes) == 1 and t.nodes[0].lp is None
    assert t.nodes[0].listpack() == reference_listpack(t.nodes[0])


def _reference(master: int, lp: bytes) -> tuple | None:
    try:
        d, live, deleted = decode_node_reference(master, lp)
    except (ContainerError, NodeCorrupt, IndexError, struct.error):
        return None
    return d.fields, d.ids, d.fvs, d.flags, d.offs, live, deleted


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
@settings(max_examples=150, deadline=None)
@given(ops=OPS, max_bytes=st.sampled_from([0, 100, 300, 4096]),
       max_entries=st.sampled_from([0, 1, 3, 100]),
       flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=3),
       cut=st.integers(0, 1 << 20))
def test_c_decoder_matches_the_reference(ops: list, max_bytes: int, max_entries: int,
                                         flips: list, cut: int) -> None:
    """_streamlp.decode answers what decode_node_reference answers on every node, and on
    corrupted copies it answers the same or None (the reference then raises); _streamlp.check
    likewise answers what check_node_reference answers, and None exactly where decode does."""
    c = stream_mod._streamlp
    assert c is not None
    s, _ = _apply(ops, max_bytes, max_entries)
    for node in s.nodes:
        lp = node.listpack()
        m = node.master
        got = c.decode(lp, m >> 64, m & MASK64)
        assert got is not None and got == _reference(m, lp)
        assert c.check(lp, m >> 64, m & MASK64) == stream_mod.check_node_reference(m, lp) == (
            (got[1][-1] if got[1] else m), got[5], got[6])
        bad = bytearray(lp)
        for at, v in flips:
            bad[6 + at % max(1, len(lp) - 7)] = v
        for blob in (bytes(bad), lp[:cut % len(lp)]):
            got = c.decode(blob, m >> 64, m & MASK64)
            assert got is None or got == _reference(m, blob)
            checked = c.check(blob, m >> 64, m & MASK64)
            assert (checked is None) == (got is None)
            if got is not None:
                assert checked == stream_mod.check_node_reference(m, blob)


def test_a_sealed_node_with_counters_not_in_their_shortest_form() -> None:
    """A listpack whose counters are 16-bit ints (not what Redis writes, but what it reads):
    kept as read; an XDEL rewrites the counters the way lpReplaceInteger does."""
    s = Stream()
    for i in (1, 2, 3):
        s.append(make_id(i, 0), [b"f", b"v%d" % i], 4096, 100)
    lp = s.nodes[0].listpack()
    assert lp[6:10] == b"\x03\x01\x00\x01"                     # live 3, deleted 0
    body = b"\xf1\x03\x00\x03\xf1\x00\x00\x03" + lp[10:]
    odd = struct.pack("<IH", len(body) + 6, struct.unpack_from("<H", lp, 4)[0]) + body
    t = Stream()
    t.nodes, t.keys, t.length, t.last_id = [Node.sealed(make_id(1, 0), odd)], [make_id(1, 0)], \
        3, make_id(3, 0)
    assert t.nodes[0].lp == odd and t.nodes[0].lp_bytes() == len(odd)
    assert t.get(make_id(2, 0)) == [b"f", b"v2"]
    assert t.delete(make_id(2, 0))
    assert [e for e, _ in t.range(0, MAX_ID)] == [make_id(1, 0), make_id(3, 0)]
    assert t.nodes[0].listpack() == reference_listpack(t.nodes[0])
    t.append(make_id(4, 0), [b"f", b"v4"], 4096, 100)              # unsealed: appends go on
    assert t.nodes[0].listpack() == reference_listpack(t.nodes[0])


NUMERIC = st.one_of(
    st.integers(-(1 << 64), 1 << 64).map(lambda i: b"%d" % i),
    st.sampled_from([b"0", b"-0", b"00", b"01", b"-01", b"+1", b" 1", b"1 ", b"1_0", b"-",
                     b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
                     b"-9223372036854775809", b"18446744073709551616", b"12345678901234567890"]),
)
ANY_VALUE = st.one_of(NUMERIC, st.binary(max_size=70),
                      st.integers(60, 5000).map(lambda n: b"z" * n))
DELTA = st.one_of(st.integers(-200, 200), st.integers(-(1 << 63), (1 << 63) - 1))


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
@settings(max_examples=400, deadline=None)
@given(flags=st.integers(0, 3), msd=DELTA, seqd=DELTA, same=st.booleans(),
       fv=st.lists(ANY_VALUE, min_size=2, max_size=8).map(lambda x: x[:len(x) // 2 * 2]))
def test_c_entry_encoder_matches_the_reference(flags: int, msd: int, seqd: int, same: bool,
                                               fv: list[bytes]) -> None:
    """_streamlp.entry writes what entry_bytes_reference writes: integers in their shortest
    form, canonical decimal strings as integers (listpack.canonical_int), other strings with
    their 6/12/32-bit lengths, backlens."""
    c = stream_mod._streamlp
    assert c is not None
    assert c.entry(flags, msd, seqd, fv, same) == entry_bytes_reference(flags, msd, seqd, fv, same)
    assert c.entry(flags, msd, seqd, [*fv, "str"], same) is None     # (not bytes: the reference)


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
@settings(max_examples=150, deadline=None)
@given(ops=OPS, max_bytes=st.sampled_from([0, 100, 300, 4096]),
       max_entries=st.sampled_from([0, 1, 3, 100]))
def test_c_find_matches_the_reference(ops: list, max_bytes: int, max_entries: int) -> None:
    """_streamlp.find answers what find_reference answers for every ID of every node (live,
    tombstones) and for IDs between and around them."""
    c = stream_mod._streamlp
    assert c is not None
    s, _ = _apply(ops, max_bytes, max_entries)
    for node in s.nodes:
        node.seal()
        assert node.lp is not None
        ids = node.entries().ids
        probes = {node.master - 1, node.master, node.last + 1, make_id(0, 0)}
        for e in ids:
            probes |= {e - 1, e, e + 1}
        m = node.master
        for e in sorted(p for p in probes if p >= 0):
            assert c.find(node.lp, m >> 64, m & MASK64, e >> 64, e & MASK64) == \
                find_reference(node, e)


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
@settings(max_examples=150, deadline=None)
@given(ops=OPS, max_bytes=st.sampled_from([0, 100, 300, 4096]),
       max_entries=st.sampled_from([0, 1, 3, 100]), seal=st.booleans(),
       bounds=st.lists(st.tuples(st.integers(0, 70), st.integers(-1, 3), st.integers(0, 70),
                                 st.integers(-1, 3), st.booleans(), st.integers(-1, 12)),
                       min_size=1, max_size=8))
def test_c_range_reply_matches_the_reference(ops: list, max_bytes: int, max_entries: int,
                                             seal: bool, bounds: list) -> None:
    """_streamlp.range_reply (XRANGE's reply) answers what range_reply_reference answers, in
    both directions, for any bounds (inside nodes, between them, around tombstones, empty
    and reversed intervals) and counts, on open and sealed nodes."""
    s, _ = _apply(ops, max_bytes, max_entries)
    if seal:
        for node in s.nodes:
            node.seal()
    for a_ms, a_seq, b_ms, b_seq, rev, count in bounds:
        start = max(0, make_id(a_ms, 0) + a_seq)
        end = max(0, make_id(b_ms, 0) + b_seq)
        for lo, hi in ((start, end), (0, MAX_ID), (start, MAX_ID), (0, end)):
            assert s.range_reply(lo, hi, rev, count) == \
                range_reply_reference(s, lo, hi, rev, count)


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
@settings(max_examples=150, deadline=None)
@given(ops=OPS, max_bytes=st.sampled_from([0, 100, 300, 4096]),
       max_entries=st.sampled_from([0, 1, 3, 100]), seal=st.sampled_from(["no", "all", "some"]),
       picks=st.lists(st.tuples(st.integers(0, 70), st.integers(-1, 3)), max_size=12))
@example(ops=[("add", 1, 0, [(b"f", b"v")])] * 5 + [("del", 2)], max_bytes=0, max_entries=100,
         seal="no", picks=[(3, 1)])     # (a tombstone and a gap in the open tail node)
@example(ops=[("add", 1, 0, [(b"f", b"v")])] * 7 + [("del", 1), ("del", 4)], max_bytes=0,
         max_entries=3, seal="some", picks=[(5, 1), (2, -1)])
def test_c_history_reply_matches_the_reference(ops: list, max_bytes: int, max_entries: int,
                                               seal: str, picks: list) -> None:
    """_streamlp.history_reply (XREADGROUP's history) answers what history_reply_reference
    answers for IDs live, deleted, trimmed away, between and around nodes, on open nodes,
    sealed ones not decoded and sealed ones in the decoded cache."""
    s, model = _apply(ops, max_bytes, max_entries)
    if seal != "no":
        for node in s.nodes:
            node.seal()
    # every entry a node holds, tombstones too (read without decoding into the nodes)
    held = [e for n in s.nodes for e in (n.d.ids if n.lp is None else  # type: ignore[union-attr]
                                         decode_node_reference(n.master, n.lp)[0].ids)]
    if seal == "some":
        for node in s.nodes[::2]:
            node.entries()          # (decoded: in the cache)
    null = object()
    ids = sorted(model)[::2] + [e for e in held if e not in model] + \
        [max(0, make_id(ms, 0) + d) for ms, d in picks] + [MAX_ID]
    out, found = s.history_reply(ids, null)
    assert (out, found) == history_reply_reference(s, ids, null)
    assert found == [e for e in ids if e in model]
    assert [pair[1] is null for pair in out] == [e not in model for e in ids]


@pytest.mark.skipif(stream_mod._streamlp is None, reason="pyrepl runs as plain Python")
def test_c_history_reply_walks_on_only_for_growing_ids() -> None:
    """A sealed node's walk goes on from where the previous ID was found only when the next
    ID is greater: IDs out of order, repeated, deleted and past the node are all answered."""
    ops = [("add", 1, 0, [(b"f", b"%d" % i)]) for i in range(30)] + [("del", 7), ("del", 20)]
    s, model = _apply(ops, 0, 100)
    for node in s.nodes:
        node.seal()
    live = sorted(model)
    ids = [live[5], live[3], live[3], live[12], make_id(8, 0), live[10], live[-2], live[0],
           make_id(9, 0), live[-1], make_id(99, 0), live[1]]
    got = s.history_reply(ids, None)
    assert got == history_reply_reference(s, ids, None)
    assert got[1] == [e for e in ids if e in model] and len(got[1]) == 10


def test_range_reply_writes_ids_of_every_size() -> None:
    """IDs' text at the edges of both halves (the C writes the digits itself)."""
    s = Stream()
    big = (1 << 64) - 1
    ids = [make_id(0, 0), make_id(0, 9), make_id(0, 10), make_id(1, big),
           make_id(1234567890123, 0), make_id(big - 1, big), make_id(big, 0),
           make_id(big, big)]
    for eid in ids:
        s.append(eid, [b"f", b"v"], 0, 3)
    want = [[id_str(e), [b"f", b"v"]] for e in ids]
    assert s.range_reply(0, MAX_ID, False, -1) == want
    assert s.range_reply(0, MAX_ID, True, -1) == want[::-1]
    assert s.range_reply(ids[3], ids[6], False, 2) == want[3:5]
    assert s.range_reply(ids[3], ids[6], True, 2) == want[6:4:-1]
    assert want[-1][0] == b"18446744073709551615-18446744073709551615"
    assert s.history_reply(ids, None) == (want, ids)
    for node in s.nodes:
        node.seal()                 # (found in their bytes)
    assert s.history_reply(ids[::-1], None) == (want[::-1], ids[::-1])


@pytest.mark.parametrize("same_fields", [True, False])
def test_an_entry_whose_lp_count_is_wrong_is_corrupt(same_fields: bool) -> None:
    """streamValidateListpackIntegrity checks each entry's lp-count (its other items, what
    XREVRANGE walks back by): the reference raises, the C decoder hands it to the reference."""
    s = Stream()
    s.append(make_id(1, 0), [b"f", b"v"], 4096, 100)
    s.append(make_id(2, 0), [b"f", b"w"] if same_fields else [b"g", b"w"], 4096, 100)
    lp = s.nodes[0].listpack()
    m = s.nodes[0].master
    assert lp[-3] == (4 if same_fields else 6) and lp[-2] == 1   # lp-count, its back-length
    assert decode_node_reference(m, lp)[1] == 2
    bad = lp[:-3] + bytes((lp[-3] + 1,)) + lp[-2:]
    with pytest.raises(NodeCorrupt):
        decode_node_reference(m, bad)
    if stream_mod._streamlp is not None:
        assert stream_mod._streamlp.decode(lp, m >> 64, m & MASK64) is not None
        assert stream_mod._streamlp.decode(bad, m >> 64, m & MASK64) is None


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["set", "del", "pop", "clear", "raw"]),
                              st.integers(0, 40)), max_size=60),
       start=st.integers(0, 45), count=st.integers(0, 5))
def test_a_pel_keeps_its_ids_in_order(ops: list, start: int, count: int) -> None:
    """Pel against a dict: the same mapping, ``ids`` its sorted keys after every write (item
    assignment, del, pop, clear, and a C writer's dict.__setitem__ followed by resort), and
    from_id the sorted keys from a start, the first ``count``."""
    pel, model = stream_mod.Pel(), {}
    for op, eid in ops:
        nack = Nack(eid, 1, None)
        if op == "set":
            pel[eid] = model[eid] = nack
        elif op == "del" and eid in model:
            del pel[eid]
            del model[eid]
        elif op == "pop":
            assert pel.pop(eid, None) is model.pop(eid, None)
        elif op == "clear":
            pel.clear()
            model.clear()
        elif op == "raw":   # (the RDB codec's read_pel)
            dict.__setitem__(pel, eid, nack)
            model[eid] = nack
            pel.resort()
        assert dict(pel) == model and pel.ids == sorted(model)
    want = [e for e in sorted(model) if e >= start]
    assert pel.from_id(start, count) == (want[:count] if count else want)
    with pytest.raises(TypeError):
        pel.setdefault(1, Nack(0, 0, None))
    with pytest.raises(TypeError):
        pel.update({1: Nack(0, 0, None)})
