"""getNodeByQuery's decisions (pyrepl/cluster/redirect.py) on a cluster state built in
memory: each redirect and error, in Redis 7.0's words, for the cases its tests and clients
rely on."""

from __future__ import annotations

import pytest

from pyrepl.cluster import redirect as r
from pyrepl.cluster.node import MASTER, SLAVE, ClusterNode
from pyrepl.cluster.ports import ClusterSettings
from pyrepl.cluster.state import FAIL_STATE, OK, ClusterState
from pyrepl.keyspace.hashslot import key_hash_slot
from tests.support.clusternet import FakeClusterHost

FOO = key_hash_slot(b"foo")            # 12182


def two_masters() -> tuple[ClusterState, ClusterNode]:
    """Us (slots 0-8191) and another master at 127.0.0.2:7001 (8192-16383), cluster ok."""
    st = ClusterState(FakeClusterHost(), ClusterSettings(port=7000), 1)
    other = ClusterNode("b" * 40, MASTER, 1)
    other.ip, other.port = "127.0.0.2", 7001
    st.add_node(other)
    for j in range(16384):
        st.add_slot(st.myself if j < 8192 else other, j)
    st.state = OK
    return st, other


def route(st: ClusterState, keys: list[bytes], present: set[bytes] = frozenset(),  # type: ignore[assignment]
          **kw: bool) -> tuple[int, ClusterNode | None, int]:
    opts = {"write": False, "asking": False, "readonly": False, "pubsubshard": False,
            "migrate": False, **kw}
    return r.route(st, keys, exists=lambda k: k in present, **opts)


def mine(st: ClusterState, n: int = 1) -> list[bytes]:
    """``n`` keys of one slot we serve (hash-tagged)."""
    return [b"{b}" + b"%d" % i for i in range(n)]


def test_no_keys_or_our_slot_runs_here() -> None:
    st, _ = two_masters()
    assert route(st, []) == (r.NONE, st.myself, 0)
    code, node, slot = route(st, mine(st, 3))
    assert (code, node) == (r.NONE, st.myself) and slot == key_hash_slot(b"b")


def test_another_masters_slot_is_moved_with_its_address() -> None:
    st, other = two_masters()
    code, node, slot = route(st, [b"foo"])
    assert (code, node, slot) == (r.MOVED, other, FOO)
    assert r.error_text(st, code, node, slot) == "MOVED 12182 127.0.0.2:7001"


def test_keys_of_two_slots_are_crossslot() -> None:
    st, _ = two_masters()
    code, node, slot = route(st, [b"a", b"b"])
    assert (code, node) == (r.CROSS_SLOT, None)
    assert r.error_text(st, code, node, slot) == \
        "CROSSSLOT Keys in request don't hash to the same slot"
    assert route(st, [b"b", b"b"])[0] == r.NONE          # the same key twice is one key


def test_an_unserved_slot_and_a_down_cluster() -> None:
    st, _ = two_masters()
    st.del_slot(FOO)
    assert r.error_text(st, *route(st, [b"foo"])) == "CLUSTERDOWN Hash slot not served"
    st, _ = two_masters()
    st.state = FAIL_STATE
    assert r.error_text(st, *route(st, mine(st))) == "CLUSTERDOWN The cluster is down"
    st.cfg.allow_reads_when_down = True
    assert route(st, mine(st))[0] == r.NONE                # a read may run
    assert r.error_text(st, *route(st, mine(st), write=True)) == \
        "CLUSTERDOWN The cluster is down and only accepts read commands"
    st.cfg.allow_reads_when_down = False
    assert route(st, mine(st), pubsubshard=True)[0] == r.NONE   # (allowed by default)


def test_a_migrating_slot_asks_for_missing_keys_and_tries_again_for_some() -> None:
    st, other = two_masters()
    keys = mine(st, 2)
    slot = key_hash_slot(keys[0])
    st.migrating[slot] = other
    assert route(st, keys, present=set(keys))[0] == r.NONE          # all here: served
    code, node, s = route(st, keys, present=set())                  # none here: ASK
    assert (code, node, s) == (r.ASK, other, slot)
    assert r.error_text(st, code, node, s) == f"ASK {slot} 127.0.0.2:7001"
    code, node, s = route(st, keys, present={keys[0]})              # some: TRYAGAIN
    assert r.error_text(st, code, node, s) == \
        "TRYAGAIN Multiple keys request during rehashing of slot"
    assert route(st, keys, present=set(), migrate=True)[0] == r.NONE    # MIGRATE runs here


def test_an_importing_slot_serves_asking_clients_only() -> None:
    st, other = two_masters()
    st.importing[FOO] = other
    assert route(st, [b"foo"])[:2] == (r.MOVED, other)
    assert route(st, [b"foo"], asking=True)[:2] == (r.NONE, st.myself)
    keys = [b"{foo}1", b"{foo}2"]
    assert route(st, keys, asking=True, present={b"{foo}1"})[0] == r.UNSTABLE
    assert route(st, keys, asking=True, present=set(keys))[0] == r.NONE


@pytest.mark.parametrize("readonly,write,served", [(True, False, True), (False, False, False),
                                                   (True, True, False)])
def test_a_replica_serves_reads_of_readonly_clients(readonly: bool, write: bool,
                                                    served: bool) -> None:
    st, other = two_masters()
    for j in range(8192):        # we become a replica of the other master, which takes all
        st.del_slot(j)
        st.add_slot(other, j)
    st.myself.flags = (st.myself.flags & ~MASTER) | SLAVE
    st.myself.master = other
    code, node, _ = route(st, [b"foo"], readonly=readonly, write=write)
    assert (code == r.NONE and node is st.myself) == served
    if not served:
        assert (code, node) == (r.MOVED, other)


def test_the_preferred_endpoint_names_the_node() -> None:
    st, other = two_masters()
    other.hostname = "b.example"
    st.cfg.preferred_endpoint_type = "hostname"
    assert r.error_text(st, *route(st, [b"foo"])) == "MOVED 12182 b.example:7001"
    st.cfg.preferred_endpoint_type = "unknown-endpoint"
    assert r.error_text(st, *route(st, [b"foo"])) == "MOVED 12182 :7001"
