"""``pyrepl collect``'s inference: the events two consecutive INFO samples of a node imply
(pyrepl.collect.infer), on hand-made cases for each rule and on hypothesis-drawn histories for
the invariants (counts match the counters, every line fits the schema, memory stays bounded)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.collect.infer import (
    GONE_MAX,
    NodeState,
    infer,
    make_event,
    moved_to_end,
)
from pyrepl.collect.info import NO_REPLID, ReplicaEntry, Sample
from pyrepl.events import EVENTS, FIELD_TYPES, to_json_line
from tests.support.collect_samples import RID1, RID2, A, B, C, M, entry, master, replica


def run(*samples: Sample) -> tuple[list[list[dict[str, Any]]], NodeState]:
    state = None
    out = []
    for s in samples:
        evs, state = infer(state, s)
        out.append(evs)
    assert state is not None
    return out, state


def inferred(evs: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [e for e in evs if e.get("inferred") and (not names or e["event"] in names)]


def check_schema(ev: dict[str, Any]) -> None:
    assert ev["event"] in EVENTS and ev["source"] == "collector"
    assert list(ev)[:3] == ["ts", "event", "node"]
    for k, v in ev.items():
        t = FIELD_TYPES[k]
        assert isinstance(v, {"string": str, "long": int, "double": float}[t]), (k, v)
    line = to_json_line(ev)
    assert json.loads(line) == ev
    # the analytics reads a lag sample by the writer's exact bytes
    assert ('"event":"replica_lag"' in line) == (ev["event"] == "replica_lag")


# -- samples ---------------------------------------------------------------------------------

def test_the_first_sample_gives_samples_only() -> None:
    s = master(10.0, entry(A, offset=900, lag=2), entry(B, "wait_bgsave", 0), full=5, ok=3)
    (evs,), state = run(s)
    assert [e["event"] for e in evs] == ["info_sample", "replica_lag"]
    info, lag = evs
    assert info == {"ts": 10.0, "event": "info_sample", "node": M, "run_id": "r" * 40,
                    "role": "master", "server": "redis 7.0.15", "replid": RID1,
                    "replid2": NO_REPLID, "second_repl_offset": -1, "master_repl_offset": 1000,
                    "replicas": 2, "backlog_size": 1 << 20, "backlog_histlen": 1000,
                    "sync_full": 5, "sync_partial_ok": 3, "sync_partial_err": 0,
                    "source": "collector"}
    # exactly the fields pyrepl's own replica_lag carries (no sync id: the session predates us)
    assert lag == {"ts": 10.0, "event": "replica_lag", "node": M, "run_id": "r" * 40,
                   "role": "master", "peer": A, "offset": 900, "lag_bytes": 100,
                   "lag_ms": 2000.0, "source": "collector"}
    assert state.sample is s and state.sessions == {} and state.seq == 0


def test_no_lag_sample_before_the_first_ack() -> None:
    (evs,), _ = run(master(1.0, entry(A, offset=0)))
    assert [e["event"] for e in evs] == ["info_sample"]


def test_a_replica_sample() -> None:
    (evs,), _ = run(replica(1.0, offset=77, link_down_since_s=None))
    (info,) = evs
    assert info["role"] == "replica" and info["peer"] == M and info["offset"] == 77
    assert info["link_status"] == "up" and info["sync_in_progress"] == 0


# -- the master side -------------------------------------------------------------------------

def test_a_killed_link_that_resynced_partially_between_two_samples() -> None:
    """The replica is still listed, but its acknowledged offset is back at 0: a new
    connection, and sync_partial_ok says how it synced."""
    a, b = master(1.0, entry(A, offset=900)), master(2.0, entry(A, offset=0), ok=1)
    (_, evs), state = run(a, b)
    got = inferred(evs)
    assert [e["event"] for e in got] == ["replica_lost", "psync_decision", "replica_online"]
    lost, dec, online = got
    assert lost["peer"] == dec["peer"] == online["peer"] == A
    assert "sync_id" not in lost  # the old session predates the collector
    assert dec["result"] == "continue" and "reason" not in dec
    assert dec["sync_id"] == online["sync_id"] == state.sessions[A].sync_id
    assert dec["replid"] == RID1 and dec["backlog_size"] == 1 << 20
    assert all(e["ts"] == 2.0 and e["role"] == "master" for e in got)
    # its lag samples now carry the session
    c = master(3.0, entry(A, offset=1000), ok=1)
    (_, _, evs3), _ = run(a, b, c)
    (lag,) = [e for e in evs3 if e["event"] == "replica_lag"]
    assert lag["sync_id"] == dec["sync_id"]


def test_a_new_replica_full_sync_asked_for_and_its_end() -> None:
    a = master(1.0)
    b = master(2.0, entry(A, "wait_bgsave", 0), full=1)
    c = master(3.0, entry(A, "send_bulk", 0), full=1)
    d = master(4.0, entry(A, "online", 0), full=1)
    (_, e2, e3, e4), state = run(a, b, c, d)
    (dec,) = inferred(e2)
    assert dec["event"] == "psync_decision" and dec["peer"] == A and dec["result"] == "full"
    # sync_partial_err did not move: the replica sent PSYNC ? -1
    assert dec["reason"] == "no-history" and dec["req_replid"] == "?"
    assert inferred(e3) == []
    (online,) = inferred(e4)
    assert online["event"] == "replica_online" and online["sync_id"] == dec["sync_id"]
    assert state.sessions[A].online


def test_a_refused_partial_for_offset_before_backlog() -> None:
    """The replica's last ack was before the backlog's first byte when it came back."""
    a = master(1.0, entry(A, offset=5000), offset=5000)
    b = master(2.0, offset=2_000_000)  # A is gone; the master wrote 2 MB
    c = master(3.0, entry(A, "wait_bgsave", 0), full=1, err=1, offset=2_000_100)
    (_, e2, e3), _ = run(a, b, c)
    (lost,) = inferred(e2)
    assert lost["event"] == "replica_lost" and lost["peer"] == A and lost["offset"] == 5000
    (dec,) = inferred(e3)
    first = 2_000_100 - (1 << 20) + 1
    assert dec["reason"] == "offset-before-backlog" and dec["req_offset"] == 5001
    assert dec["gap"] == first - 5001 and dec["backlog_histlen"] == 1 << 20
    assert "req_replid" not in dec


def test_a_refused_partial_with_no_known_reason() -> None:
    a = master(1.0)
    b = master(2.0, entry(A, "wait_bgsave", 0), full=1, err=1)
    (_, e2), _ = run(a, b)
    (dec,) = inferred(e2)
    assert dec["result"] == "full" and "reason" not in dec and "req_replid" not in dec


def test_a_replica_that_moved_to_the_end_reconnected() -> None:
    a = master(1.0, entry(A), entry(B))
    b = master(2.0, entry(B), entry(A), ok=1)
    (_, e2), _ = run(a, b)
    assert [(e["event"], e["peer"]) for e in inferred(e2)] == [
        ("replica_lost", A), ("psync_decision", A), ("replica_online", A)]
    assert moved_to_end(["a", "b", "c"], ["b", "c", "a"]) == ["a"]
    assert moved_to_end(["a", "b", "c"], ["c", "a", "b"]) == ["a", "b"]
    assert moved_to_end(["a", "b", "c"], ["a", "b", "c"]) == []


def test_two_syncs_of_different_kinds_on_two_online_replicas_stay_unnamed() -> None:
    a = master(1.0, entry(A, offset=900), entry(B, offset=900))
    b = master(2.0, entry(A, offset=0), entry(B, offset=0), full=1, ok=1)
    (_, e2), state = run(a, b)
    decs = inferred(e2, "psync_decision")
    assert sorted(d["result"] for d in decs) == ["continue", "full"]
    assert all("peer" not in d for d in decs)
    # the full one: asked for (no sync_partial_err)
    assert [d.get("reason") for d in decs if d["result"] == "full"] == ["no-history"]
    # both replicas still start new sessions, with ids of their own
    assert {e["peer"] for e in inferred(e2, "replica_lost")} == {A, B}
    ids = {state.sessions[A].sync_id, state.sessions[B].sync_id}
    assert len(ids) == 2 and not ids & {d["sync_id"] for d in decs}


def test_a_syncing_replica_had_the_full_one() -> None:
    a = master(1.0, entry(A, offset=900), entry(B, offset=900))
    b = master(2.0, entry(A, "wait_bgsave", 0), entry(B, offset=0), full=1, ok=1)
    (_, e2), _ = run(a, b)
    got = {d["peer"]: d["result"] for d in inferred(e2, "psync_decision")}
    assert got == {A: "full", B: "continue"}


def test_more_syncs_than_replicas_shown_names_those_shown() -> None:
    """Three partial syncs; the list shows two replicas reconnected (A at offset 0 again, C
    new); B's left no trace: its sync stays unnamed."""
    a = master(1.0, entry(A, offset=900), entry(B, offset=900))
    b = master(2.0, entry(A, offset=0), entry(B, offset=950), entry(C, offset=0), ok=3)
    (_, e2), _ = run(a, b)
    decs = inferred(e2, "psync_decision")
    assert sorted(d.get("peer", "-") for d in decs) == sorted([A, C, "-"])
    assert all(d["result"] == "continue" for d in decs)


def test_two_syncs_and_the_only_replica_shown_names_one() -> None:
    """A reconnected (its offset went back): one of the two syncs is certainly its; the other
    may be A's again or a replica's that came and went between the samples: unnamed."""
    a = master(1.0, entry(A, offset=900))
    b = master(2.0, entry(A, offset=0), ok=2)
    (_, e2), state = run(a, b)
    decs = inferred(e2, "psync_decision")
    assert sorted((d.get("peer", "-"), d["result"]) for d in decs) \
        == [("-", "continue"), (A, "continue")]
    named = next(d for d in decs if d.get("peer") == A)
    assert state.sessions[A].sync_id == named["sync_id"]


def test_counters_reset_without_restart_set_a_new_base() -> None:
    a = master(1.0, entry(A), full=10, ok=4)
    b = master(2.0, entry(A), full=0, ok=0)
    c = master(3.0, entry(A, offset=0), full=0, ok=1)
    (_, e2, e3), _ = run(a, b, c)
    assert inferred(e2) == []
    assert [d["result"] for d in inferred(e3, "psync_decision")] == ["continue"]


def test_a_master_restart() -> None:
    a = master(100.0, entry(A, offset=900), full=7, ok=2)
    b = master(110.0, entry(A, "online", 0), full=1, ok=0, run_id="n" * 40, uptime_s=4,
               replid=RID2, offset=0)
    (_, e2), state = run(a, b)
    got = inferred(e2)
    assert [e["event"] for e in got] == ["restart", "replid_change", "replica_lost",
                                         "psync_decision", "replica_online"]
    restart, change, lost, dec, online = got
    assert restart["ts"] == 106.0 and restart["run_id"] == "n" * 40  # 110 - uptime 4
    assert change["reason"] == "restart" and change["replid"] == RID2
    assert lost["reason"] == "restart" and lost["run_id"] == "r" * 40 and lost["ts"] == 106.0
    # the counters count from the restart
    assert dec["peer"] == A and dec["result"] == "full" and dec["reason"] == "no-history"
    assert online["sync_id"] == dec["sync_id"] == state.sessions[A].sync_id


def test_a_replica_leaves_and_the_gone_list_is_bounded() -> None:
    many = [entry(f"10.1.{i // 250}.{i % 250}:6379", offset=i + 1) for i in range(GONE_MAX + 6)]
    (_, e2), state = run(master(1.0, *many), master(2.0))
    assert len(inferred(e2, "replica_lost")) == len(many)
    assert len(state.gone) == GONE_MAX and state.sessions == {}
    assert state.gone[-1] == (many[-1].addr, many[-1].offset)


# -- the replica side ------------------------------------------------------------------------

def test_link_down_then_up() -> None:
    a = replica(100.0)
    b = replica(101.0, up=False, link_down_since_s=0, sync_in_progress=True)
    c = replica(102.0, up=False, link_down_since_s=2)
    d = replica(103.0)
    (_, e2, e3, e4), _ = run(a, b, c, d)
    (down,) = inferred(e2)
    assert down["event"] == "link_down" and down["peer"] == M and down["role"] == "replica"
    assert down["ts"] == 101.0 and "reason" not in down and down["offset"] == 1000
    assert inferred(e3) == []
    (up,) = inferred(e4)
    assert up["event"] == "link_up" and up["peer"] == M and up["sync_id"]
    # down since 102 - 2 = 100: the link came up within 3 s of it going down
    assert up["duration_ms"] == 3000.0 and "result" not in up


def test_down_since_is_clamped_to_the_interval() -> None:
    (_, e2), _ = run(replica(100.0), replica(101.0, up=False, link_down_since_s=50))
    assert inferred(e2)[0]["ts"] == 100.0


def test_a_promotion() -> None:
    a = replica(1.0, offset=500)
    b = master(2.0, offset=500, replid=RID2, replid2=RID1, second_repl_offset=500, node=A,
               run_id="s" * 40)
    (_, e2), _ = run(a, b)
    got = {e["event"]: e for e in inferred(e2)}
    assert set(got) == {"role_change", "replid_change", "link_down"}
    assert got["role_change"]["role"] == "master" and got["role_change"]["reason"] == "promoted"
    assert got["replid_change"]["reason"] == "promoted"
    assert got["replid_change"]["replid2"] == RID1
    assert got["replid_change"]["second_repl_offset"] == 500
    assert got["link_down"]["reason"] == "promoted" and got["link_down"]["peer"] == M


def test_replicaof_another_master() -> None:
    a = replica(1.0)
    b = replica(2.0, up=False, of=B)
    c = replica(3.0, of=B, replid=RID2)
    (_, e2, e3), _ = run(a, b, c)
    got = {e["event"]: e for e in inferred(e2)}
    assert set(got) == {"role_change", "link_down"}
    assert got["role_change"]["reason"] == "replicaof" and got["role_change"]["peer"] == B
    assert got["link_down"]["reason"] == "replicaof" and got["link_down"]["peer"] == M
    got3 = {e["event"]: e for e in inferred(e3)}
    assert set(got3) == {"replid_change", "link_up"}
    assert got3["replid_change"]["reason"] == "full-sync" and got3["link_up"]["peer"] == B


def test_a_replica_continues_after_its_masters_promotion() -> None:
    (_, e2), _ = run(replica(1.0), replica(2.0, replid=RID2, replid2=RID1))
    (change,) = inferred(e2)
    assert change["event"] == "replid_change" and change["reason"] == "shifted"


def test_a_replica_restart() -> None:
    a = replica(50.0)
    b = replica(60.0, run_id="t" * 40, uptime_s=3)
    (_, e2), _ = run(a, b)
    got = inferred(e2)
    assert [e["event"] for e in got] == ["restart", "link_down", "link_up"]
    assert got[0]["ts"] == got[1]["ts"] == 57.0 and got[1]["reason"] == "restart"
    assert got[2]["duration_ms"] == 3000.0


def test_make_event_refuses_what_the_schema_does_not_have() -> None:
    import pytest

    with pytest.raises(ValueError):
        make_event(1.0, "no_such_event", "n", "", "master")
    with pytest.raises(ValueError):
        make_event(1.0, "link_up", "n", "", "replica", colour="red")
    ev = make_event(1.0, "link_up", "n", "", "replica", offset="12", duration_ms=3)
    assert ev["offset"] == 12 and ev["duration_ms"] == 3.0 and "run_id" not in ev


# -- invariants on drawn histories --------------------------------------------------------------

ADDRS = [f"10.0.0.{i}:6379" for i in range(2, 7)]


@st.composite
def master_histories(draw: Any) -> list[Sample]:
    """Samples of one master: counters that only grow (or reset to zero), replica lists that
    change as they do (some leave, some join at the end, some reconnect), offsets that grow."""
    n = draw(st.integers(2, 12))
    ts, offset = 1000.0, draw(st.integers(0, 10_000))
    full = ok = err = 0
    listed: list[ReplicaEntry] = []
    out = []
    run_id = "r" * 40
    for _ in range(n):
        ts += draw(st.floats(0.05, 5.0))
        offset += draw(st.integers(0, 50_000))
        if draw(st.integers(0, 20)) == 0:
            run_id = draw(st.sampled_from(["r" * 40, "q" * 40, "p" * 40]))
            full = ok = err = 0
        keep = [e for e in listed if draw(st.integers(0, 4))]
        for addr in draw(st.lists(st.sampled_from(ADDRS), max_size=3, unique=True)):
            keep = [e for e in keep if e.addr != addr]
            keep.append(entry(addr, draw(st.sampled_from(["online", "wait_bgsave",
                                                          "send_bulk"])), 0))
        listed = [dataclasses.replace(e, offset=draw(st.integers(0, offset)), state=(
            "online" if draw(st.booleans()) else e.state)) if draw(st.booleans()) else e
            for e in keep]
        d_full, d_ok = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        full, ok, err = full + d_full, ok + d_ok, err + draw(st.integers(0, d_full))
        if draw(st.integers(0, 30)) == 0:
            full = ok = err = 0  # CONFIG RESETSTAT
        out.append(master(ts, *listed, full=full, ok=ok, err=err, offset=offset,
                          run_id=run_id, uptime_s=draw(st.integers(0, 100))))
    return out


@settings(max_examples=300, deadline=None)
@given(master_histories())
def test_invariants_of_a_masters_history(samples: list[Sample]) -> None:
    state: NodeState | None = None
    seen_ids: set[str] = set()
    for s in samples:
        prev = state
        evs, state = infer(prev, s)
        for ev in evs:
            check_schema(ev)
            assert ev["node"] == M
            if ev.get("inferred"):
                assert ev["inferred"] == 1
                if prev is not None:
                    assert prev.sample.ts - 0.001 <= ev["ts"] <= s.ts + 0.001
            else:
                assert ev["event"] in ("info_sample", "replica_lag") and ev["ts"] == round(s.ts, 3)
        assert sum(1 for e in evs if e["event"] == "info_sample") == 1
        decs = [e for e in evs if e["event"] == "psync_decision"]
        if prev is not None:
            p = prev.sample
            restarted = p.run_id != s.run_id
            base = (0, 0, 0) if restarted else (p.sync_full, p.sync_partial_ok,
                                                p.sync_partial_err)
            d = (s.sync_full - base[0], s.sync_partial_ok - base[1], s.sync_partial_err - base[2])
            if min(d) < 0:
                d = (0, 0, 0)
            # one decision per counted sync, of the counted kind
            assert Counter(e["result"] for e in decs) == Counter(
                {"full": d[0], "continue": d[1]}) - Counter()
            # refused partials never exceed what sync_partial_err counted
            no_history = sum(1 for e in decs if e.get("reason") == "no-history")
            assert no_history in (0, d[0] - min(d[2], d[0]))
            if d[2] == 0:
                assert no_history == d[0]
        else:
            assert decs == []
        listed = {e.addr for e in s.replicas}
        for e in decs:
            assert e.get("peer") is None or e["peer"] in listed
            assert e["sync_id"] not in seen_ids
            seen_ids.add(e["sync_id"])
        for e in evs:
            if e["event"] == "replica_lag":
                assert e["offset"] > 0 and e["lag_bytes"] == s.master_repl_offset - e["offset"]
        # bounded memory: sessions only of listed replicas, a bounded list of gone ones
        assert set(state.sessions) <= listed
        assert len(state.gone) <= GONE_MAX and not {a for a, _ in state.gone} & listed
        assert state.sample is s


@st.composite
def replica_histories(draw: Any) -> list[Sample]:
    n = draw(st.integers(2, 12))
    ts, offset = 1000.0, 0
    out = []
    for _ in range(n):
        ts += draw(st.floats(0.05, 5.0))
        offset += draw(st.integers(0, 1000))
        role = draw(st.sampled_from(["replica", "replica", "replica", "master"]))
        if role == "master":
            out.append(master(ts, offset=offset, node=A, run_id=draw(st.sampled_from(
                ["s" * 40, "t" * 40])), replid=draw(st.sampled_from([RID1, RID2]))))
            continue
        out.append(replica(ts, up=draw(st.booleans()), of=draw(st.sampled_from([M, B])),
                           offset=offset, run_id=draw(st.sampled_from(["s" * 40, "t" * 40])),
                           uptime_s=draw(st.integers(0, 10)),
                           link_down_since_s=draw(st.one_of(st.none(), st.integers(0, 20))),
                           replid=draw(st.sampled_from([RID1, RID2]))))
    return out


@settings(max_examples=300, deadline=None)
@given(replica_histories())
def test_link_events_alternate(samples: list[Sample]) -> None:
    """Per replica, link_down and link_up alternate as the samples' link status does: a
    link_down only after the link was seen up, a link_up only when it is up."""
    state: NodeState | None = None
    up = samples[0].link_up
    for s in samples:
        prev = state
        evs, state = infer(prev, s)
        for ev in evs:
            check_schema(ev)
        links = [e for e in evs if e["event"] in ("link_down", "link_up")]
        if prev is None:
            assert links == []
            continue
        for e in links:
            if e["event"] == "link_down":
                assert up and e["peer"] == prev.sample.master_addr
                up = False
            else:
                assert not up and s.link_up and e["peer"] == s.master_addr and e["sync_id"]
                up = True
        assert up == s.link_up
