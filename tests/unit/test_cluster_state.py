"""The cluster state machine (pyrepl/cluster/state.py, failover.py, nodes_conf.py) driven by
the bus in memory on a fake clock: handshakes and gossip, slot ownership, failure detection,
elections, partitions, nodes.conf, and bad bytes on a link."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.cluster import wire
from pyrepl.cluster.node import FAIL, HANDSHAKE, MASTER, MYSELF, PFAIL, SLAVE, ClusterNode
from pyrepl.cluster.nodes_conf import CORRUPTED, NodesConfError, load, render
from pyrepl.cluster.ports import ClusterSettings
from pyrepl.cluster.state import FAIL_STATE, OK, ClusterState
from tests.support.clusternet import ClusterNet, FakeClusterHost

SLOTS = wire.CLUSTER_SLOTS


def knows_all(net: ClusterNet) -> bool:
    n = len(net.states)
    live = [s for i, s in enumerate(net.states) if i not in net.down]
    return all(len(s.nodes) == n and all(not x.flags & HANDSHAKE and
                                         (x.link is not None or x.flags & MYSELF)
                                         for x in s.nodes.values()) for s in live)


def joined(n: int, masters: int | None = None, node_timeout: int = 2000) -> ClusterNet:
    """n nodes met through node 0; the first ``masters`` get the slots in even ranges with
    distinct config epochs (as redis-cli --cluster create does), the others replicate
    them in turn."""
    net = ClusterNet(n, node_timeout=node_timeout)
    for i in range(1, n):
        net.meet(0, i)
    net.run_until(lambda: knows_all(net))
    masters = n if masters is None else masters
    per = SLOTS // masters
    for m in range(masters):
        st_ = net.states[m]
        st_.myself.config_epoch = m + 1
        st_.current_epoch = max(st_.current_epoch, m + 1)
        end = SLOTS if m == masters - 1 else (m + 1) * per
        for j in range(m * per, end):
            st_.add_slot(st_.myself, j)
    for r in range(masters, n):
        target = net.states[(r - masters) % masters].myself.name
        rs = net.states[r]
        rs.set_master(rs.nodes[target])
    net.run_until(lambda: all(s.state == OK for s in net.states) and all(
        all(s.slots[j] is not None and s.slots[j].name == net.states[min(j // per,
                                                                          masters - 1)].myself.name
            for j in (0, SLOTS // 2, SLOTS - 1)) for s in net.states))
    return net


def owner_names(st_: ClusterState) -> list[str | None]:
    return [n.name if n is not None else None for n in st_.slots]


def test_nodes_meet_learn_each_other_through_gossip_and_finish_the_handshake() -> None:
    net = ClusterNet(4)
    for i in (1, 2, 3):
        net.meet(0, i)
    took = net.run_until(lambda: knows_all(net), 30_000)
    names = {s.myself.name for s in net.states}
    for s in net.states:
        assert set(s.nodes) == names                      # the same names everywhere
        assert s.myself.ip == net.ip(net.states.index(s))  # learnt from the MEET
        for n in s.nodes.values():
            assert n.flags & MASTER and not n.flags & (HANDSHAKE | PFAIL | FAIL)
    assert took < 15_000


def test_equal_config_epochs_collide_until_every_master_has_its_own() -> None:
    net = ClusterNet(4)
    for i in (1, 2, 3):
        net.meet(0, i)

    def agreed() -> bool:   # everyone's epoch distinct, and everyone agrees on them
        mine = {t.myself.name: t.myself.config_epoch for t in net.states}
        return knows_all(net) and len(set(mine.values())) == 4 and all(
            {n.name: n.config_epoch for n in s.nodes.values()} == mine for s in net.states)
    net.run_until(agreed, 60_000)


def test_slot_ownership_spreads_and_the_cluster_turns_ok() -> None:
    net = joined(3)
    ref = owner_names(net.states[0])
    assert all(o is not None for o in ref)
    for s in net.states:
        assert owner_names(s) == ref
        assert s.size == 3
    text = net.states[1].cfg  # (settings untouched by the run)
    assert text.node_timeout == 2000


def test_a_killed_master_is_failed_over_by_its_replica_and_comes_back_as_its_replica() -> None:
    net = joined(6, masters=3)
    old = net.states[0].myself.name
    replica = net.states[3]
    assert replica.myself.master is not None and replica.myself.master.name == old
    replica.host.offset = 100          # (its processed offset: it may fail over)
    old_slots = [j for j in range(SLOTS) if net.states[1].slots[j].name == old]
    net.kill(0)
    took = net.run_until(lambda: all(
        net.states[i].slots[old_slots[0]] is not None and
        net.states[i].slots[old_slots[0]].name == replica.myself.name
        for i in range(1, 6)), 60_000)
    # FAIL needs node_timeout without an answer, then the election's 0.5-1 s delay
    assert 2000 < took < 2000 + 6000
    assert replica.myself.is_master and replica.host.master is None
    assert replica.host.logged("Failover election won: I'm the new master.")
    for i in range(1, 6):
        s = net.states[i]
        assert all(s.slots[j] is s.nodes[replica.myself.name] for j in old_slots)
        assert s.nodes[old].flags & FAIL
        assert s.state == OK
    assert replica.myself.config_epoch > 3       # a new epoch, won by election
    # the old master returns: the newer configuration makes it a replica of the winner
    net.revive(0)
    net.run_until(lambda: net.states[0].myself.is_replica, 30_000)
    back = net.states[0]
    assert back.myself.master is not None and back.myself.master.name == replica.myself.name
    assert back.myself.numslots == 0
    assert back.host.master == (net.ip(3), 7003)
    net.run_until(lambda: all(not s.nodes[old].flags & FAIL and s.nodes[old].is_replica
                              for s in net.states[1:]), 30_000)


def test_a_master_partitioned_into_the_minority_reports_fail_and_the_majority_fails_it_over(
        ) -> None:
    net = joined(6, masters=3)
    net.states[3].host.offset = 100
    net.partition({0}, {1, 2, 3, 4, 5})
    net.run_until(lambda: net.states[0].state == FAIL_STATE, 10_000)
    net.run_until(lambda: net.states[3].myself.is_master, 20_000)
    assert net.states[0].myself.is_master     # it cannot know yet
    net.heal()
    net.run_until(lambda: net.states[0].myself.is_replica and net.states[0].state == OK,
                  30_000)


def test_a_replica_with_stale_data_does_not_fail_over() -> None:
    net = joined(4, masters=3)     # one replica, of node 0
    rs = net.states[3]
    rs.host.data_age_ms = 10_000_000
    net.kill(0)
    net.run_until(lambda: all(net.states[i].nodes[net.states[0].myself.name].flags & FAIL
                              for i in (1, 2, 3)), 20_000)
    net.step(10_000)
    assert rs.myself.is_replica
    assert all(s.state == FAIL_STATE for s in net.states[1:])   # slots uncovered


def test_manual_failover_waits_for_the_paused_masters_offset() -> None:
    net = joined(4, masters=3)
    master, rs = net.states[0], net.states[3]
    master.host.offset = 500
    rs.host.offset = 400
    from pyrepl.cluster import failover
    failover.start_manual(rs, force=False, takeover=False)
    net.step(1000)
    assert master.host.paused_until > 0 and rs.myself.is_replica     # not caught up
    assert rs.mf_master_offset == 500
    rs.host.offset = 500
    net.run_until(lambda: rs.myself.is_master, 6000)
    net.run_until(lambda: master.myself.is_replica, 6000)
    assert master.host.paused_until == 0


def test_takeover_needs_no_votes() -> None:
    net = joined(4, masters=3)
    rs = net.states[3]
    net.partition({3}, {0, 1, 2})
    from pyrepl.cluster import failover
    failover.start_manual(rs, force=True, takeover=True)
    assert rs.myself.is_master and rs.myself.numslots > 0
    net.heal()
    net.run_until(lambda: net.states[0].myself.is_replica, 20_000)


def test_nodes_conf_round_trip() -> None:
    net = joined(4, masters=3)
    s = net.states[0]
    s.migrating[5] = s.nodes[net.states[1].myself.name]
    s.importing[9000] = s.nodes[net.states[2].myself.name]
    text = render(s)
    assert text.endswith(f"vars currentEpoch {s.current_epoch} lastVoteEpoch "
                         f"{s.last_vote_epoch}\n")
    fresh = ClusterState(FakeClusterHost(), ClusterSettings(), 5, random.Random(9))
    assert load(text, fresh, 5)
    again = render(fresh)
    strip = [" ".join(w for i, w in enumerate(line.split()) if i not in (4, 5, 7))
             for line in text.splitlines()]
    assert sorted(strip) == sorted(" ".join(w for i, w in enumerate(line.split())
                                            if i not in (4, 5, 7))
                                   for line in again.splitlines())
    assert fresh.myself.name == s.myself.name and fresh.migrating.keys() == {5}
    assert owner_names(fresh) == owner_names(s)


@pytest.mark.parametrize("text", [
    "abc 127.0.0.1:7000@17000 myself,master - 0 0 1 connected\n",          # bad name
    "a" * 40 + " 127.0.0.1:7000@17000 master - 0 0 1 connected\n",         # no myself
    "a" * 40 + " 127.0.0.1:7000@17000 myself,master - 0 0\n",              # short line
    "a" * 40 + " 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 16384\n",
    "a" * 40 + " 127.0.0.1 myself,master - 0 0 1 connected\n",              # no port
    "vars currentEpoch\n" + "a" * 40 + " 1.2.3.4:1@2 myself,master - 0 0 1 connected\n",
])
def test_a_corrupt_nodes_conf_is_refused_with_redis_words(text: str) -> None:
    fresh = ClusterState(FakeClusterHost(), ClusterSettings(), 5)
    with pytest.raises(NodesConfError, match=CORRUPTED.replace(".", r"\.")):
        load(text, fresh, 5)


def test_an_unknown_flag_in_nodes_conf_is_refused() -> None:
    fresh = ClusterState(FakeClusterHost(), ClusterSettings(), 5)
    with pytest.raises(NodesConfError, match="Unknown flag"):
        load("a" * 40 + " 1.2.3.4:1@2 myself,boss - 0 0 1 connected\n", fresh, 5)


def test_forget_keeps_a_node_out_for_a_minute() -> None:
    net = joined(3)
    gone = net.states[2].myself.name
    for s in net.states[:2]:
        node = s.nodes[gone]
        s.blacklist_add(node)
        s.del_node(node)
    net.kill(2)
    net.step(5000)
    assert all(gone not in s.nodes for s in net.states[:2])


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=3000), st.integers(0, 2))
def test_garbage_on_a_link_is_dropped_and_the_state_survives(junk: bytes, where: int) -> None:
    net = ClusterNet(2)
    net.meet(0, 1)
    net.run_until(lambda: knows_all(net))
    s = net.states[where % 2]
    link = s.accept("127.0.0.9", "127.0.0.1")
    before = owner_names(s), set(s.nodes)
    s.receive(link, junk)
    s.before_sleep(net.now)
    assert (owner_names(s), set(s.nodes)) == before
    net.step(1000)
    assert knows_all(net)


def test_a_bad_signature_closes_the_link_with_redis_words() -> None:
    s = ClusterState(FakeClusterHost(), ClusterSettings(), 5)
    link = s.accept("127.0.0.9", "127.0.0.1")
    s.receive(link, b"XXXX\x00\x00\x10\x00")
    assert link.closed and link not in s.links
    assert s.host.logged("Bad message length or signature received from Cluster bus.")


def test_a_ping_from_an_unknown_node_is_answered_but_adds_nothing() -> None:
    s = ClusterState(FakeClusterHost(), ClusterSettings(), 5)
    link = s.accept("127.0.0.9", "127.0.0.1")
    m = wire.Message(type=wire.PING, sender=b"f" * 40, port=1, cport=2, flags=MASTER)
    s.receive(link, wire.encode(m))
    out = link.data_to_send()
    assert wire.decode(out).type == wire.PONG
    assert set(s.nodes) == {s.myself.name}


def test_a_meet_adds_the_sender_in_handshake() -> None:
    s = ClusterState(FakeClusterHost(), ClusterSettings(), 5)
    link = s.accept("127.0.0.9", "127.0.0.1")
    m = wire.Message(type=wire.MEET, sender=b"f" * 40, port=7001, cport=17001, flags=MASTER)
    s.receive(link, wire.encode(m))
    others = [n for n in s.nodes.values() if n is not s.myself]
    assert len(others) == 1 and others[0].flags == HANDSHAKE
    assert (others[0].ip, others[0].port, others[0].cport) == ("127.0.0.9", 7001, 17001)
    assert s.myself.ip == "127.0.0.1"


def test_replica_flags_in_pongs_move_a_node_under_its_master() -> None:
    net = joined(4, masters=3)
    for s in net.states:
        r = s.nodes[net.states[3].myself.name]
        assert r.flags & SLAVE and r.master is s.nodes[net.states[0].myself.name]
        assert r in r.master.replicas


def test_debug_drop_packet_filter_counts_the_type_and_ignores_it() -> None:
    """DEBUG DROP-CLUSTER-PACKET-FILTER (Redis's cluster tests set it on every node, to -1 or
    to a type): a node dropping MEETs never learns the node that meets it; -1 lets all in."""
    net = ClusterNet(2)
    deaf = net.states[1]
    assert deaf.drop_packet_filter == -1
    deaf.drop_packet_filter = wire.MEET
    net.meet(0, 1)
    for _ in range(30):
        net.step()
    assert deaf.stats_received[wire.MEET] > 0             # counted, then dropped
    assert list(deaf.nodes) == [deaf.myself.name]
    assert net.hosts[1].logged("Dropping packet that matches debug drop filter")
    deaf.drop_packet_filter = -1
    net.meet(0, 1)
    net.run_until(lambda: knows_all(net), 10_000)


@pytest.mark.parametrize("direction", ["to", "from", "all"])
def test_debug_clusterlink_kill_frees_the_links_and_the_cron_makes_new_ones(
        direction: str) -> None:
    """DEBUG CLUSTERLINK KILL <to|from|all> (unit/cluster/links): the link goes at once, so
    a message sent next is lost, and the cron reconnects."""
    net = joined(2)
    a, b = net.states
    peer = a.nodes[b.myself.name]
    out, inbound = peer.link, peer.inbound_link
    assert out is not None and inbound is not None
    a.kill_links(peer, direction)
    gone = {"to": [out], "from": [inbound], "all": [out, inbound]}[direction]
    for link in gone:
        assert link.closed and link not in a.links
    assert (peer.link is None) == (out in gone)
    assert (peer.inbound_link is None) == (inbound in gone)
    net.run_until(lambda: peer.link is not None and peer.inbound_link is not None and
                  peer.link.connected, 5_000)
    assert peer.link is not out or out not in gone
    assert len(a.links) == 2


def test_bytes_the_shell_could_not_write_count_toward_the_link_send_buffer_limit() -> None:
    """cluster/24-links: with the peer stopped (SIGSTOP), what the node publishes piles up
    in the shell's socket buffer, not in the link's queue (the shell takes it at once); the
    cron frees the link once that passes cluster-link-sendbuf-limit, as Redis counts its
    send_msg_queue_mem, and a new link is made."""
    net = joined(2)
    a, b = net.states
    a.cfg.link_sendbuf_limit = 256 * 1024
    peer = a.nodes[b.myself.name]
    link = peer.link
    assert link is not None
    link.unsent = 200 * 1024           # (the shell's report after its last write)
    net.step()
    assert peer.link is link and a.links_buffer_limit_exceeded == 0
    link.unsent = 300 * 1024
    net.step()
    assert link not in a.links and a.links_buffer_limit_exceeded == 1
    assert net.hosts[0].logged("due to exceeding send buffer memory limit.")
    net.run_until(lambda: peer.link is not None and peer.link.connected, 5_000)


def test_the_slot_runs_are_walked_once_per_slot_table() -> None:
    """nodes.conf and CLUSTER NODES read each node's slot runs from a cache kept until the
    slot table changes (Redis's cluster tests allocate slots at random, ~3,000 runs a node:
    walking and writing them at every save and every CLUSTER NODES cost a 20-node cluster of
    pyrepl nodes most of their CPU); a change of owner or of name shows at once."""
    from pyrepl.cluster import nodes_conf

    net = joined(3)
    st_ = net.states[0]
    rng = random.Random(5)
    owners = [s.myself.name for s in net.states]
    for j in range(SLOTS):
        st_.del_slot(j)
        st_.add_slot(st_.nodes[rng.choice(owners)], j)
    first = nodes_conf._runs(st_)
    text = nodes_conf.render(st_)
    assert nodes_conf._runs(st_) is first                       # (not walked again)
    assert nodes_conf.render(st_) == text
    other = st_.nodes[owners[1]]
    st_.del_slot(0)
    st_.add_slot(other, 0)
    assert nodes_conf._runs(st_) is not first
    line = next(x for x in nodes_conf.render(st_).splitlines() if x.startswith(other.name))
    assert " 0 " in line or " 0-" in line
    assert nodes_conf.slot_runs(st_)[other.name][0][0] == 0
    loaded = ClusterState(FakeClusterHost(), ClusterSettings(), 1)
    assert load(nodes_conf.render(st_), loaded, 1)
    assert owner_names(loaded) == owner_names(st_)


def _walk_all_slots(st_: ClusterState, sender, sender_epoch: int, slots: bytes) -> None:  # type: ignore[no-untyped-def]
    """clusterUpdateSlotsConfigWith's loop as Redis writes it (all 16,384 slots), the slot
    part only: the reference for the bitmap version."""
    from pyrepl.cluster.state import bitmap_slots
    claimed = set(bitmap_slots(slots))
    for j in range(SLOTS):
        owner = st_.slots[j]
        if j in claimed:
            if owner is sender:
                st_._set_not_claiming(j, False)
                continue
            if j in st_.importing:
                continue
            if owner is None or st_.slot_unclaimed(j) or owner.config_epoch < sender_epoch:
                st_.del_slot(j)
                st_.add_slot(sender, j)
                st_._set_not_claiming(j, False)
        elif owner is sender:
            st_._set_not_claiming(j, True)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_claim_changes_the_slot_table_as_redis_full_walk_does(seed: int) -> None:
    """update_slots_config_with finds the slots to judge with bitmap arithmetic instead of
    walking all 16,384 in Python (each node of a 20-node cluster did at every slot a
    migration moved): the table and the not-claiming marks come out as the walk's."""
    rng = random.Random(seed)

    def build() -> tuple[ClusterState, list[ClusterNode]]:
        r2 = random.Random(seed)
        s = ClusterState(FakeClusterHost(), ClusterSettings(), 1, random.Random(1))
        others = []
        for i in range(3):
            n = ClusterNode(f"{i:040x}", MASTER, 1)
            n.config_epoch = r2.randrange(1, 6)
            s.add_node(n)
            others.append(n)
        s.myself.config_epoch = r2.randrange(1, 6)
        everyone = [s.myself, *others, None]
        for j in range(SLOTS):
            owner = everyone[r2.randrange(5)] if r2.random() < 0.9 else None
            if owner is not None:
                s.add_slot(owner, j)
            if r2.random() < 0.05:
                s._set_not_claiming(j, True)
            if r2.random() < 0.01:
                s.importing[j] = others[0]
        return s, others

    claim = bytearray(SLOTS // 8)
    for j in range(SLOTS):
        if rng.random() < 0.3:
            claim[j >> 3] |= 1 << (j & 7)
    epoch = rng.randrange(1, 7)
    a, a_others = build()
    b, b_others = build()
    a.update_slots_config_with(a_others[1], epoch, bytes(claim))
    _walk_all_slots(b, b_others[1], epoch, bytes(claim))
    assert owner_names(a) == owner_names(b)
    assert a.owner_not_claiming == b.owner_not_claiming
    assert bytes(a_others[1].slots) == bytes(b_others[1].slots)
