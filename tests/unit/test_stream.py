"""The stream value (pyrepl.keyspace.stream) and its RDB form, without a server.

Hypothesis drives appends, deletions and trims against a plain model (a sorted dict) and checks
that ranges agree, that every node's tracked lpBytes equals the listpack the encoder builds
(the size decides node boundaries), and that the RDB form round-trips (entries, metadata,
groups, PELs) with the same digest.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.keyspace.digest import key_digest
from pyrepl.keyspace.stream import MAX_ID, Consumer, Group, Nack, Stream, id_str, make_id
from pyrepl.rdb.constants import RDB_TYPE_STREAM_LISTPACKS_2
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
