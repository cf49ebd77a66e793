"""``pyrepl collect`` end to end, as a process of its own against real servers: a Redis fleet
through partial syncs, a full sync, a refused partial and a promotion
(tests/support/collect_scenario.py) gives the inferred events with the right kinds and nodes,
lag samples and whole lines; a pyrepl pair is collected the same way; an unreachable node costs
one clear error line and nothing else; SIGTERM, --count and --duration end it cleanly; the
files rotate by size."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from pyrepl.events import EVENTS, FIELD_TYPES
from tests.support.collect_scenario import collector, has, read_events, run_fleet, wait_events
from tests.support.procs import free_port, start_pyrepl, start_redis
from tests.support.redispy import kill_replica_links, r
from tests.support.waits import wait_for


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    return run_fleet(str(tmp_path_factory.mktemp("collect")))


def test_every_line_is_whole_and_in_the_schema(fleet) -> None:
    assert fleet.returncode == 0, fleet.stderr
    names = os.listdir(fleet.out)
    assert names == ["collect.ndjson"]
    with open(os.path.join(fleet.out, "collect.ndjson"), encoding="utf-8") as f:
        text = f.read()
    assert text.endswith("\n")  # stopped by SIGTERM: the file ends on a whole line
    lines = text.splitlines()
    assert len(lines) == len(fleet.events) > 100
    for line, ev in zip(lines, fleet.events, strict=True):
        assert json.loads(line) == ev
        assert ev["event"] in EVENTS and ev["source"] == "collector"
        assert set(ev) <= set(FIELD_TYPES)
        assert ev.get("inferred", 1 if ev["event"] not in ("info_sample", "replica_lag")
                      else None) == (None if ev["event"] in ("info_sample", "replica_lag")
                                     else 1)
    # only R2, while it restarted, may have missed a poll: then one line down, one line back
    down = [x for x in fleet.stderr.splitlines() if "unreachable" in x]
    back = [x for x in fleet.stderr.splitlines() if "answering again" in x]
    assert len(down) == len(back) <= 1
    assert all(fleet.node(fleet.r2) in x for x in down + back)


def test_samples_of_every_node_and_lag_of_each_replica(fleet) -> None:
    evs = fleet.events
    m, r1, r2, x = (fleet.node(p) for p in (fleet.m, fleet.r1, fleet.r2, fleet.x))
    for node in (m, r1, r2, x):
        samples = has(evs, event="info_sample", node=node)
        assert len(samples) >= 8 and all(s["server"] == "redis 7.0.15" for s in samples)
    first = has(evs, event="info_sample", node=m)[0]
    assert first["role"] == "master" and first["replicas"] == 2
    assert first["backlog_size"] == 16 << 20 and "repl_buffers_mem" in first
    rs = has(evs, event="info_sample", node=r1)[0]
    assert rs["role"] == "replica" and rs["peer"] == m and rs["link_status"] == "up"
    for peer in (r1, r2):
        lags = has(evs, event="replica_lag", node=m, peer=peer)
        assert len(lags) >= 5
        assert all(e["role"] == "master" and e["offset"] > 0 and e["lag_bytes"] >= 0
                   and e["lag_ms"] >= 0 for e in lags)
    # under the write load the lag samples see the master's offset move
    offsets = [e["offset"] + e["lag_bytes"] for e in has(evs, event="replica_lag", node=m)]
    assert max(offsets) - min(offsets) > 20_000


def window(fleet, start: str, end: str | None) -> list[dict]:
    t0 = fleet.marks[start]
    t1 = fleet.marks[end] if end else float("inf")
    return [e for e in fleet.events if t0 <= e["ts"] < t1]


def test_the_killed_links_resynced_partially(fleet) -> None:
    """Both links killed at once: two partial syncs, counted for sure; which was whose shows
    when M's list or the replicas' samples tell (a reconnect can hide in between two
    samples), and what is named is right."""
    evs = window(fleet, "kill", "kill_one")
    m = fleet.node(fleet.m)
    replicas = {fleet.node(fleet.r1), fleet.node(fleet.r2)}
    decs = has(evs, event="psync_decision", node=m, inferred=1)
    assert len(decs) == 2 and all(d["result"] == "continue" and d["role"] == "master"
                                  for d in decs)
    named = [d["peer"] for d in decs if "peer" in d]
    assert len(set(named)) == len(named) and set(named) <= replicas
    for d in decs:
        if "peer" not in d:
            continue
        assert has(evs, event="replica_online", node=m, peer=d["peer"], sync_id=d["sync_id"])
        # the replica's end: its link went down and came up with that sync
        (up,) = has(evs, event="link_up", node=d["peer"], peer=m)
        assert up["result"] == "continue" and up["sync_id"] == d["sync_id"]
        assert has(evs, event="link_down", node=d["peer"], peer=m)
    assert not has(evs, event="psync_decision", result="full")


def test_a_dropped_link_is_named_from_the_masters_list(fleet) -> None:
    evs = window(fleet, "kill_one", "restart")
    m, first = fleet.node(fleet.m), fleet.node(fleet.first)
    (dec,) = has(evs, event="psync_decision", node=m)
    assert dec["peer"] == first and dec["result"] == "continue" and dec["inferred"] == 1
    assert has(evs, event="replica_lost", node=m, peer=first)
    assert has(evs, event="replica_online", node=m, peer=first, sync_id=dec["sync_id"])
    # (when the first replica is R2, its restart's link down can fall in this window too:
    # that start is estimated from the uptime in whole seconds, up to ~1 s before the step)
    (down,) = [e for e in has(evs, event="link_down", node=first) if e.get("reason") is None]
    (up,) = has(evs, event="link_up", node=first)
    assert down["peer"] == up["peer"] == m and down["ts"] <= up["ts"]
    assert up["result"] == "continue" and up["sync_id"] == dec["sync_id"]
    # caught up with the master's offset at its link up, then or in a later round
    (cu,) = has(window(fleet, "kill_one", None), event="caught_up", node=first,
                sync_id=dec["sync_id"])
    assert cu["duration_ms"] >= 0 and cu["peer"] == m


def test_the_restarted_replica_asked_for_a_full_sync(fleet) -> None:
    evs = window(fleet, "restart", "replicaof")
    m, r2 = fleet.node(fleet.m), fleet.node(fleet.r2)
    (dec,) = has(evs, event="psync_decision", node=m, result="full")
    assert dec["peer"] == r2 and dec["reason"] == "no-history" and dec["req_replid"] == "?"
    assert dec["backlog_size"] == 16 << 20 and dec["master_repl_offset"] > 0
    # its start is estimated from its uptime (whole seconds): maybe before the step began
    (restart,) = has(fleet.events, event="restart", node=r2)
    assert restart["run_id"] != has(fleet.events, event="info_sample", node=r2)[0]["run_id"]
    assert has(evs, event="replica_lost", node=m, peer=r2)
    assert has(evs, event="replica_online", node=m, peer=r2, sync_id=dec["sync_id"])
    ups = has(evs, event="link_up", node=r2, peer=m)
    assert [u.get("result") for u in ups] == ["full"] and ups[0]["sync_id"] == dec["sync_id"]
    assert not has(evs, event="psync_decision", result="continue")


def test_the_repointed_replica_was_refused_a_partial_and_synced_fully(fleet) -> None:
    evs = window(fleet, "replicaof", "promote")
    m, r1, x = fleet.node(fleet.m), fleet.node(fleet.r1), fleet.node(fleet.x)
    (dec,) = has(evs, event="psync_decision", node=x)
    assert dec["peer"] == r1 and dec["result"] == "full"
    assert "reason" not in dec  # refused (sync_partial_err), for a reason INFO does not say
    assert has(evs, event="info_sample", node=x, sync_partial_err=1, sync_full=1)
    (rc,) = has(evs, event="role_change", node=r1)
    assert rc["role"] == "replica" and rc["reason"] == "replicaof" and rc["peer"] == x
    (down,) = has(evs, event="link_down", node=r1)
    assert down["peer"] == m and down["reason"] == "replicaof"
    (up,) = has(evs, event="link_up", node=r1)
    assert up["peer"] == x and up["result"] == "full" and up["sync_id"] == dec["sync_id"]
    assert has(evs, event="replid_change", node=r1, reason="full-sync")
    assert has(evs, event="replica_lost", node=m, peer=r1)


def test_the_promotion(fleet) -> None:
    evs = window(fleet, "promote", None)
    m, r2 = fleet.node(fleet.m), fleet.node(fleet.r2)
    (rc,) = has(evs, event="role_change", node=r2)
    assert rc["role"] == "master" and rc["reason"] == "promoted"
    (ch,) = has(evs, event="replid_change", node=r2)
    assert ch["reason"] == "promoted" and ch["replid2"] != ch["replid"]
    before = has([e for e in fleet.events if e["ts"] < fleet.marks["promote"]],
                 event="info_sample", node=r2)[-1]
    assert ch["replid2"] == before["replid"]
    (down,) = has(evs, event="link_down", node=r2)
    assert down["reason"] == "promoted" and down["peer"] == m
    assert has(evs, event="replica_lost", node=m, peer=r2)


def test_a_pyrepl_pair_and_an_unreachable_node(tmp_path) -> None:
    """pyrepl's INFO reads as Redis's; a node nobody listens on gets one error line while the
    others are sampled every round; --count ends the run."""
    p = start_pyrepl("--repl-diskless-sync-delay", "0", tmpdir=str(tmp_path))
    q = None
    col = None
    try:
        qdir = tmp_path / "q"
        qdir.mkdir()
        q = start_pyrepl("--master", f"127.0.0.1:{p.port}", role="replica", tmpdir=str(qdir))
        wait_for(lambda: r(q.port).info("replication")["master_link_status"] == "up", 30,
                 what="pyrepl replica up")
        dead = f"127.0.0.1:{free_port()}"
        out = str(tmp_path / "out")
        pn, qn = f"127.0.0.1:{p.port}", f"127.0.0.1:{q.port}"
        col = collector(out, dead, pn, qn, extra=("--count", "40"))
        wait_events(out, lambda evs: len(has(evs, event="info_sample", node=pn)) >= 3,
                    "samples of the pyrepl master")
        with r(p.port) as c:
            for i in range(50):
                c.set(f"k{i}", "v" * 100)
        assert kill_replica_links(p.port) == 1
        _, err = col.communicate(timeout=60)
        assert col.returncode == 0, err
        col = None
    finally:
        if col is not None:
            col.kill()
            col.communicate(timeout=30)
        for s in (q, p):
            if s is not None:
                s.stop()
    evs = read_events(out)
    assert len(has(evs, event="info_sample", node=pn)) == 40  # every round, error or not
    assert len(has(evs, event="info_sample", node=qn)) == 40
    assert not has(evs, node=dead)
    sp = has(evs, event="info_sample", node=pn)[-1]
    assert sp["server"].startswith("pyrepl ") and sp["role"] == "master"
    sq = has(evs, event="info_sample", node=qn)[-1]
    assert sq["role"] == "replica" and sq["peer"] == pn and sq["link_status"] == "up"
    assert has(evs, event="replica_lag", node=pn, peer=qn)
    (dec,) = has(evs, event="psync_decision", node=pn)
    assert dec["result"] == "continue"
    # the replica list names the sync's replica only when it shows the new session (a sample
    # before its first ACK: offset 0); else the sync stays unnamed (it may have been another
    # replica's that came and went: a SYNC client, say) and the replica's link stays up
    ups = has(evs, event="link_up", node=qn)
    if dec.get("peer") is not None:
        assert dec["peer"] == qn
        (up,) = ups
        assert up["result"] == "continue" and up["sync_id"] == dec["sync_id"]
    else:
        assert ups == []
    # one clear line for the dead node, however many rounds it missed
    lines = [x for x in err.splitlines() if dead in x]
    assert len(lines) == 1, err
    assert "unreachable" in lines[0] and "Connection refused" in lines[0]
    assert "40 rounds" in err and "2/3 nodes answering" in err


def test_duration_sigint_and_a_node_coming_back(tmp_path) -> None:
    """--duration bounds a run; SIGINT ends one as SIGTERM does; a node that comes back gets
    its 'answering again' line and its samples resume."""
    port = free_port()
    out = str(tmp_path / "out")
    t0 = time.monotonic()
    col = collector(out, f"127.0.0.1:{port}", every=0.1, duration=1.0)
    _, err = col.communicate(timeout=60)
    assert time.monotonic() - t0 < 30
    assert col.returncode == 1 and "no node answered" in err  # nothing answered: exit 1
    assert err.count("unreachable") == 1

    out = str(tmp_path / "out2")
    col = collector(out, f"127.0.0.1:{port}", every=0.1, duration=60.0)
    srv = None
    try:
        # the file is there after the first round, which found the node down
        wait_for(lambda: os.path.exists(os.path.join(out, "collect.ndjson")), 30,
                 what="the collector's first round")
        srv = start_redis(port=port, tmpdir=str(tmp_path))
        wait_events(out, lambda evs: len(has(evs, event="info_sample")) >= 2, "samples",
                    timeout=60)
        col.send_signal(signal.SIGINT)
        _, err = col.communicate(timeout=30)
    finally:
        if col.poll() is None:
            col.kill()
            col.communicate(timeout=30)
        if srv is not None:
            srv.stop()
    assert col.returncode == 0, err
    assert err.count("unreachable") == 1 and err.count("answering again") == 1, err
    with open(os.path.join(out, "collect.ndjson"), encoding="utf-8") as f:
        assert f.read().endswith("\n")


def test_rotation_by_size(tmp_path) -> None:
    srv = start_redis(tmpdir=str(tmp_path))
    try:
        out = str(tmp_path / "out")
        col = collector(out, f"127.0.0.1:{srv.port}", every=0.05, extra=(
            "--count", "60", "--max-size", "4kb", "--max-files", "3"))
        _, err = col.communicate(timeout=60)
        assert col.returncode == 0, err
    finally:
        srv.stop()
    names = sorted(os.listdir(out))
    assert names == ["collect.ndjson", "collect.ndjson.1", "collect.ndjson.2",
                     "collect.ndjson.3"]
    for n in names:
        with open(os.path.join(out, n), encoding="utf-8") as f:
            text = f.read()
        assert text.endswith("\n") and len(text.encode()) <= 4096
        for line in text.splitlines():
            assert json.loads(line)["event"] == "info_sample"


def test_a_user_allowed_only_info_over_tls(tmp_path) -> None:
    """--user/--password as an ACL user with +info only, over TLS with a client certificate;
    a wrong password is one clear error line."""
    import shutil

    from tests.support.tlscerts import make_certs
    from tests.support.tlscerts import server_args as tls_args

    assert shutil.which("openssl"), "the openssl command is missing (the test command installs it)"
    certs = make_certs(tmp_path)
    tls_port = free_port()
    srv = start_redis(*tls_args(certs, tls_port), "--user", "mon", "on", ">s3cret", "+info",
                      tmpdir=str(tmp_path))
    try:
        node = f"127.0.0.1:{tls_port}"
        tls = ("--tls", "--cacert", str(certs / "ca.crt"), "--cert", str(certs / "redis.crt"),
               "--key", str(certs / "redis.key"))
        out = str(tmp_path / "ok")
        col = collector(out, node, extra=("--count", "3", "--user", "mon", "--password",
                                          "s3cret", *tls))
        _, err = col.communicate(timeout=60)
        assert col.returncode == 0, err
        samples = has(read_events(out), event="info_sample", node=node)
        assert len(samples) == 3 and samples[0]["server"] == "redis 7.0.15"

        out = str(tmp_path / "bad")
        col = collector(out, node, every=0.1, extra=("--count", "5", "--user", "mon",
                                                    "--password", "wrong", *tls))
        _, err = col.communicate(timeout=60)
        assert col.returncode == 1
        lines = [x for x in err.splitlines() if node in x]
        assert len(lines) == 1 and "refuses INFO" in lines[0], err
        assert "invalid username-password pair" in lines[0] or "WRONGPASS" in lines[0], err
    finally:
        srv.stop()
