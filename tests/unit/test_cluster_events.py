"""The cluster_* sync events (pyrepl/cluster/state.py, failover.py, watch.py): what a node of a
cluster logs about elections, failovers, failing nodes, its slots and the cluster's state,
driven through the bus in memory on a fake clock."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.cluster import failover, wire
from pyrepl.cluster.node import MASTER, MYSELF, ClusterNode
from pyrepl.cluster.state import OK
from pyrepl.cluster.watch import SlotWatch, ranges_text
from tests.support.clusternet import ClusterNet
from tests.unit.test_cluster_state import joined

SLOTS = wire.CLUSTER_SLOTS


def all_events(net: ClusterNet, name: str) -> list[tuple[int, dict]]:
    return [(i, e) for i, h in enumerate(net.hosts) for e in h.emitted(name)]


def test_an_automatic_failover_is_an_election_votes_a_fail_and_the_slots_gained() -> None:
    net = joined(6, masters=3)
    old, rs = net.states[0], net.states[3]
    old_name, me = old.myself.name, rs.myself.name
    old_ranges = ranges_text(old.myself.slot_list())
    rs.host.offset = 100
    for h in net.hosts:
        h.events.recent.clear()
    net.kill(0)
    net.run_until(lambda: rs.myself.is_master and all(
        net.states[i].slots[0] is net.states[i].nodes[me] for i in range(1, 6)), 60_000)

    fails = all_events(net, "cluster_node_fail")
    assert fails and all(e["result"] == "fail" and e["reason"] == "quorum" and
                         e["peer_id"] == old_name and e["peer"] == f"{net.ip(0)}:7000"
                         for _, e in fails)
    started = rs.host.emitted("cluster_election")
    assert [e["result"] for e in started] == ["started"]
    assert started[0]["role"] == "replica" and started[0]["rank"] == 0
    assert started[0]["peer_id"] == old_name and started[0]["offset"] == 100
    epoch = started[0]["config_epoch"]
    votes = all_events(net, "cluster_election")
    granted = {i for i, e in votes if e["result"] == "granted"}
    assert granted >= {1, 2} and granted <= {1, 2}     # the two masters left, and no one else
    assert all(e["peer_id"] == me and e["role"] == "master" and e["config_epoch"] == epoch
               for i, e in votes if e["result"] == "granted")
    [fo] = rs.host.emitted("cluster_failover")
    assert fo["result"] == "auto" and fo["peer_id"] == old_name and fo["role"] == "master"
    assert fo["config_epoch"] == epoch == rs.myself.config_epoch
    assert fo["node_id"] == me
    assert fo["ts"] >= started[0]["ts"] >= max(e["ts"] for _, e in fails)
    gained = [e for e in rs.host.emitted("cluster_slots") if e["result"] == "gained"]
    assert [(e["slots"], e["peer_id"]) for e in gained] == [(old_ranges, old_name)]
    # nobody else's own slots changed
    assert all(not h.emitted("cluster_slots") for h in net.hosts[1:3])

    net.revive(0)
    net.run_until(lambda: old.myself.is_replica, 30_000)
    lost = [e for e in old.host.emitted("cluster_slots") if e["result"] == "lost"]
    assert [(e["slots"], e["peer_id"]) for e in lost] == [(old_ranges, me)]
    net.run_until(lambda: any(e["result"] == "cleared" for _, e in
                              all_events(net, "cluster_node_fail")), 30_000)
    cleared = [e for _, e in all_events(net, "cluster_node_fail") if e["result"] == "cleared"]
    assert all(e["peer_id"] == old_name and e["reason"] in ("reachable", "no-slots")
               for e in cleared)     # (a replica now, or a master that lost its slots)


def test_the_cluster_state_events_follow_a_minority_partition() -> None:
    net = joined(6, masters=3)
    net.states[3].host.offset = 100
    for h in net.hosts:
        h.events.recent.clear()
    net.partition({0}, {1, 2, 3, 4, 5})
    net.run_until(lambda: net.states[0].state != OK, 10_000)
    assert [e["result"] for e in net.hosts[0].emitted("cluster_state")] == ["fail"]
    net.run_until(lambda: net.states[3].myself.is_master, 20_000)
    net.heal()
    net.run_until(lambda: net.states[0].myself.is_replica and net.states[0].state == OK,
                  30_000)
    assert [e["result"] for e in net.hosts[0].emitted("cluster_state")] == ["fail", "ok"]


def test_manual_force_and_takeover_failovers_say_so() -> None:
    for kind in ("manual", "force", "takeover"):
        net = joined(4, masters=3)
        master, rs = net.states[0], net.states[3]
        master.host.offset = rs.host.offset = 500
        failover.start_manual(rs, force=kind != "manual", takeover=kind == "takeover")
        net.run_until(lambda: rs.myself.is_master, 10_000)   # noqa: B023 (runs now)
        [fo] = rs.host.emitted("cluster_failover")
        assert fo["result"] == kind and fo["peer_id"] == master.myself.name
        started = [e for e in rs.host.emitted("cluster_election")]
        assert len(started) == (0 if kind == "takeover" else 1)


def test_a_slot_migration_is_migrating_importing_then_stable_and_moved() -> None:
    net = joined(3)
    a, b = net.states[0], net.states[1]
    an, bn = a.nodes[b.myself.name], b.nodes[a.myself.name]     # each one's view of the other
    for h in net.hosts:
        h.events.recent.clear()
    a.migrating[10] = an
    a.migrating[11] = an
    b.importing[10] = bn
    b.importing[11] = bn
    for s in (a, b):
        s.save_config(False)
    assert [(e["result"], e["slots"], e["peer_id"]) for e in a.host.emitted("cluster_slots")] \
        == [("migrating", "10-11", b.myself.name)]
    assert [(e["result"], e["slots"], e["peer_id"]) for e in b.host.emitted("cluster_slots")] \
        == [("importing", "10-11", a.myself.name)]
    for j in (10, 11):       # SETSLOT NODE on both sides, as redis-cli's reshard ends
        del b.importing[j]
        b.del_slot(j)
        b.add_slot(b.myself, j)
        del a.migrating[j]
        a.del_slot(j)
        a.add_slot(an, j)
    for s in (a, b):
        s.save_config(False)
    assert [(e["result"], e["slots"], e["peer_id"]) for e in b.host.emitted("cluster_slots")
            ][1:] == [("gained", "10-11", a.myself.name), ("stable", "10-11", a.myself.name)]
    assert [(e["result"], e["slots"], e["peer_id"]) for e in a.host.emitted("cluster_slots")
            ][1:] == [("lost", "10-11", b.myself.name), ("stable", "10-11", b.myself.name)]
    assert all(e["node_id"] == s.myself.name for s in (a, b)
               for e in s.host.emitted("cluster_slots"))


@given(st.lists(st.tuples(st.integers(0, SLOTS - 1), st.integers(0, 3)), max_size=60),
       st.lists(st.tuples(st.integers(0, SLOTS - 1), st.integers(0, 3)), max_size=60))
@settings(max_examples=60, deadline=None)
def test_the_watch_reports_exactly_the_slots_that_changed_hands(
        first: list[tuple[int, int]], then: list[tuple[int, int]]) -> None:
    nodes = [ClusterNode(f"{i:040x}", MASTER | (MYSELF if i == 0 else 0), 0) for i in range(4)]
    me = nodes[0]
    owners: list[ClusterNode | None] = [None] * SLOTS

    def assign(moves: list[tuple[int, int]]) -> None:
        for j, i in moves:
            if owners[j] is not None:
                owners[j].clear_slot_bit(j)
            owners[j] = nodes[i]
            nodes[i].set_slot_bit(j)

    rng = random.Random(len(first))
    assign([(rng.randrange(SLOTS), rng.randrange(4)) for _ in range(50)] + first)
    w = SlotWatch()
    start = w.look(me, owners, {}, {})             # the first look: the slots it starts with
    assert start == ([("owned", ranges_text(j for j in range(SLOTS) if owners[j] is me), None)]
                     if me.numslots else [])
    before = list(owners)
    assign(then)
    changes = w.look(me, owners, {}, {})
    want_gained = {j for j in range(SLOTS) if owners[j] is me and before[j] is not me}
    want_lost = {j for j in range(SLOTS) if before[j] is me and owners[j] is not me}

    def expand(text: str) -> set[int]:
        out: set[int] = set()
        for part in filter(None, text.split(",")):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
        return out
    got_gained = {j for r, s, n in changes if r == "gained" for j in expand(s)}
    got_lost = {j for r, s, n in changes if r == "lost" for j in expand(s)}
    assert got_gained == want_gained and got_lost == want_lost
    for r, s, n in changes:     # grouped by the other owner: before (gained), now (lost)
        assert all((before[j] if r == "gained" else owners[j]) is n for j in expand(s))
    assert w.look(me, owners, {}, {}) == []        # nothing new since


def test_ranges_text() -> None:
    assert ranges_text([]) == ""
    assert ranges_text([5]) == "5"
    assert ranges_text([3, 1, 2, 7, 9, 10]) == "1-3,7,9-10"
    assert ranges_text(range(SLOTS)) == f"0-{SLOTS - 1}"
