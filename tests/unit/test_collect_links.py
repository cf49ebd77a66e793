"""``pyrepl collect`` across the two ends of a link (pyrepl.collect.links): a replica's link up
takes the result and sync id of its master's decision, a resync the replica's samples never saw
gets its link events, the replica's catching up is timed against the master's offset, and the
memory stays bounded."""

from __future__ import annotations

from typing import Any

from pyrepl.collect.links import Fleet
from tests.support.collect_samples import A, B, M, entry, master, replica


def made(evs: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [e for e in evs if e.get("inferred") and e["event"] in names]


def test_a_full_sync_seen_from_both_ends() -> None:
    f = Fleet(horizon_s=60.0)
    f.round(replica(1.0, offset=500), master(1.1, entry(A, offset=500), full=1, offset=500))
    # the link is lost; the master starts a full sync for the replica
    evs = f.round(replica(2.0, up=False, offset=500, link_down_since_s=1),
                  master(2.1, entry(A, "wait_bgsave", 0), full=2, offset=800))
    (dec,) = made(evs, "psync_decision")
    assert made(evs, "link_down") and not made(evs, "link_up")  # no reconnect invented
    # the replica is up again two rounds later, behind the master
    f.round(replica(3.0, up=False, offset=500), master(3.1, entry(A, "send_bulk", 0), full=2,
                                                         offset=900))
    evs = f.round(replica(4.0, offset=950), master(4.1, entry(A, offset=950), full=2,
                                                   offset=1000))
    (up,) = made(evs, "link_up")
    assert up["result"] == "full" and up["sync_id"] == dec["sync_id"] and up["node"] == A
    assert not made(evs, "caught_up")  # 950 < the master's 1000 at link up
    evs = f.round(replica(5.0, offset=1200), master(5.1, entry(A, offset=1200), full=2,
                                                    offset=1300))
    (cu,) = made(evs, "caught_up")
    assert cu["node"] == A and cu["peer"] == M and cu["sync_id"] == dec["sync_id"]
    assert cu["ts"] == 5.0 and cu["duration_ms"] == 1000.0
    assert len(f.links) == 0


def test_a_partial_resync_between_two_samples() -> None:
    """CLIENT KILL TYPE replica, and the replica is back before its next sample: only the
    master's counters and its replica list show it."""
    f = Fleet(horizon_s=60.0)
    f.round(replica(1.0), master(1.1, entry(A, offset=1000), entry(B, offset=1000)))
    evs = f.round(replica(2.0, offset=1000),
                  replica(2.0, node=B, offset=1000, run_id="u" * 40),
                  master(2.1, entry(A, offset=0), entry(B, offset=0), ok=2))
    decs = {d["peer"]: d for d in made(evs, "psync_decision")}
    assert set(decs) == {A, B} and all(d["result"] == "continue" for d in decs.values())
    for node in (A, B):
        down, up = [e for e in made(evs, "link_down", "link_up") if e["node"] == node]
        assert (down["event"], up["event"]) == ("link_down", "link_up")
        assert down["ts"] == up["ts"] == 2.1 and down["peer"] == up["peer"] == M
        assert up["result"] == "continue" and up["sync_id"] == decs[node]["sync_id"]
    # both are at the master's offset: caught up at once
    assert {e["node"] for e in made(evs, "caught_up")} == {A, B}
    assert all(e["duration_ms"] == 0.0 for e in made(evs, "caught_up"))


def test_a_decision_for_a_replica_not_polled_stays_a_decision() -> None:
    f = Fleet(horizon_s=60.0)
    f.round(master(1.0, entry(A, offset=1000)))
    evs = f.round(master(2.0, entry(A, offset=0), ok=1))
    assert [e["event"] for e in made(evs, "psync_decision", "link_up", "link_down")] == \
        ["psync_decision"]


def test_an_old_decision_does_not_explain_a_later_link_up() -> None:
    f = Fleet(horizon_s=60.0)
    f.round(replica(1.0), master(1.1, entry(A, offset=1000)))
    # the replica does not answer this round; its master resynced it
    f.round(master(2.1, entry(A, offset=0), ok=1))
    f.round(replica(3.0), master(3.1, entry(A, offset=1000), ok=1))
    f.round(replica(20.0, up=False, link_down_since_s=1), master(20.1, ok=1))
    evs = f.round(replica(21.0), master(21.1, entry(A, offset=1000), ok=1))
    (up,) = made(evs, "link_up")
    assert "result" not in up  # the decision of t=2.1 was long before this link went down


def test_memory_is_bounded_by_the_horizon() -> None:
    f = Fleet(horizon_s=60.0)
    f.round(master(1.0, entry(A, offset=1000)))
    f.round(master(2.0, entry(A, offset=0), ok=1))  # unclaimed decision
    assert len(f.links) == 1
    f.round(master(100.0, entry(A, offset=1000), ok=1))
    assert len(f.links) == 0


def test_a_restart_the_masters_list_cannot_show_is_named_from_the_replicas_side() -> None:
    """B restarts and syncs fully between two samples: it is still last in its master's list,
    acked ahead of before. Its own sample shows the restart, and the one unnamed decision of
    the round is its sync."""
    f = Fleet(horizon_s=60.0)
    f.round(replica(1.0, offset=1000), replica(1.0, node=B, offset=1000, run_id="u" * 40),
            master(1.1, entry(A, offset=900), entry(B, offset=900), offset=1000))
    evs = f.round(replica(2.0, offset=1500),
                  replica(2.0, node=B, offset=1500, run_id="v" * 40, uptime_s=0),
                  master(2.1, entry(A, offset=1400), entry(B, offset=1500), full=1,
                         offset=1500))
    # the session handed back to the master (a master sampled this round)
    assert [a[:2] for a in f.links.adopted] == [(M, B)] and M in f.states
    got = [e for e in evs if e.get("inferred") and e["node"] == M]
    assert [e["event"] for e in got] == ["replica_lost", "psync_decision", "replica_online"]
    lost, dec, online = got
    assert lost["peer"] == dec["peer"] == online["peer"] == B
    assert dec["result"] == "full" and dec["reason"] == "no-history"
    assert online["sync_id"] == dec["sync_id"]
    (up,) = made(evs, "link_up")
    assert up["node"] == B and up["result"] == "full" and up["sync_id"] == dec["sync_id"]
    state = f.states[M]
    assert state is not None and state.sessions[B].sync_id == dec["sync_id"]
    # its lag samples carry the session from now on
    evs = f.round(replica(3.0, offset=1600), replica(3.0, node=B, offset=1600, run_id="v" * 40),
                  master(3.1, entry(A, offset=1600), entry(B, offset=1600), full=1, offset=1600))
    (lag,) = [e for e in evs if e["event"] == "replica_lag" and e["peer"] == B]
    assert lag["sync_id"] == dec["sync_id"]


def test_two_unexplained_link_ups_get_the_result_but_no_names() -> None:
    f = Fleet(horizon_s=60.0)
    f.round(replica(1.0), replica(1.0, node=B, run_id="u" * 40),
            master(1.1, entry(A, offset=900), entry(B, offset=900), offset=1000))
    # the replicas see their links down; their master had them back before its sample
    evs2 = f.round(replica(2.0, up=False), replica(2.0, node=B, up=False, run_id="u" * 40),
                   master(2.1, entry(A, offset=950), entry(B, offset=950), ok=2, offset=1000))
    evs = f.round(replica(3.0), replica(3.0, node=B, run_id="u" * 40),
                  master(3.1, entry(A, offset=1000), entry(B, offset=1000), ok=2, offset=1000))
    decs = made(evs2, "psync_decision")
    assert len(decs) == 2 and all("peer" not in d for d in decs)  # in order: no telling
    ups = made(evs, "link_up")
    assert [u["result"] for u in ups] == ["continue", "continue"]
    assert not {u["sync_id"] for u in ups} & {d["sync_id"] for d in decs}
