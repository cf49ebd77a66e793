"""A Redis fleet watched by ``pyrepl collect`` while it goes through the syncs the collector must
infer (shared by tests/e2e/test_collect.py and the Spark test over its output).

Theory of operation: real redis-server 7.0.15 processes: a master M with replicas R1 and R2,
and a standalone X. ``pyrepl collect`` polls the four every 0.2 s, as a separate process, while
a write load runs on M and, one step after another (each waited for in the servers' own INFO):

1. ``CLIENT KILL TYPE replica`` on M: both replicas resync partially (M's sync_partial_ok +2);
   then the replica listed first by M kills its own link (``CLIENT KILL TYPE master``): one
   more partial sync, which M's list shows (the replica moves to its end);
2. R2 restarts with an empty dataset: ``PSYNC ? -1``, a full sync asked for (no-history);
3. R1 ``REPLICAOF`` X: X refuses R1's PSYNC (another history: sync_partial_err) and sends a
   full sync; M loses R1;
4. R2 ``REPLICAOF NO ONE``: a promotion (R2's replid shifts to replid2); M loses R2.

The collector is then stopped with SIGTERM. The result holds the ports, the stderr and the
parsed lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.load import LoadWriter
from tests.support.paths import ROOT
from tests.support.procs import start_redis
from tests.support.redispy import in_sync, kill_replica_links, r, repl
from tests.support.waits import wait_for

# a backlog the load cannot overrun while a link is down for a few seconds (no step wants a
# full sync for lack of backlog)
REDIS_ARGS = ("--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1",
              "--repl-backlog-size", "16mb")


def collector(out: str, *nodes: str, every: float = 0.2, duration: float = 120.0,
              extra: tuple[str, ...] = ()) -> subprocess.Popen:
    """``pyrepl collect`` in a process of its own (bounded by ``duration`` whatever happens)."""
    argv = [sys.executable, "-m", "pyrepl.cli.main", "collect", *nodes, "--out", out,
            "--every", str(every), "--duration", str(duration), "--quiet", *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "CI": "1"})


def read_events(out: str) -> list[dict[str, Any]]:
    """Every whole line of the collector's files (rotated ones first), parsed."""
    names = sorted((f for f in os.listdir(out) if f.startswith("collect.ndjson")),
                   key=lambda f: -int(f.rsplit(".", 1)[1]) if f[-1].isdigit() else 0)
    evs = []
    for name in names:
        with open(os.path.join(out, name), encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        evs += [json.loads(x) for x in lines[:-1]]  # a line still being written is no line
    return evs


def wait_events(out: str, cond: Callable[[list[dict[str, Any]]], object], what: str,
                timeout: float = 30.0) -> list[dict[str, Any]]:
    found: list[list[dict[str, Any]]] = []

    def check() -> bool:
        if not os.path.isdir(out):
            return False
        evs = read_events(out)
        if cond(evs):
            found.append(evs)
            return True
        return False

    wait_for(check, timeout, interval=0.1, what=what)
    return found[-1]


def observed(out: str, nodes: list[str]) -> None:
    """Wait until the collector has sampled every node after now (it saw what the servers'
    INFO says now), so a step's events are all written before the next step starts."""
    t = time.time()
    wait_events(out, lambda evs: {e["node"] for e in evs if e["event"] == "info_sample"
                                  and e["ts"] > t} >= set(nodes), "the collector to catch up")


def has(evs: list[dict[str, Any]], **kv: Any) -> list[dict[str, Any]]:
    return [e for e in evs if all(e.get(k) == v for k, v in kv.items())]


@dataclass
class FleetRun:
    out: str
    m: int
    r1: int
    r2: int
    x: int
    first: int  # the replica that dropped its own link in step 1b
    stderr: str
    returncode: int
    events: list[dict[str, Any]] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)  # wall time before each step

    def node(self, port: int) -> str:
        return f"127.0.0.1:{port}"


def run_fleet(tmp: str) -> FleetRun:
    out = os.path.join(tmp, "collected")
    procs = []
    col = None
    marks: dict[str, float] = {}
    try:
        m = start_redis(*REDIS_ARGS, tmpdir=_mk(tmp, "m"))
        procs.append(m)
        x = start_redis(*REDIS_ARGS, tmpdir=_mk(tmp, "x"))
        procs.append(x)
        r1 = start_redis(*REDIS_ARGS, "--replicaof", "127.0.0.1", str(m.port),
                         tmpdir=_mk(tmp, "r1"))
        procs.append(r1)
        r2 = start_redis(*REDIS_ARGS, "--replicaof", "127.0.0.1", str(m.port),
                         tmpdir=_mk(tmp, "r2"))
        procs.append(r2)
        wait_for(lambda: in_sync(m.port, r1.port, r2.port), 30, what="replicas in sync")
        name = {p: f"127.0.0.1:{p}" for p in (m.port, r1.port, r2.port, x.port)}
        col = collector(out, *name.values())
        wait_events(out, lambda evs: {e["node"] for e in has(evs, event="info_sample")}
                    == set(name.values()) and len(has(evs, event="replica_lag")) >= 4,
                    "the collector's first samples")
        with LoadWriter(m.port, max_seconds=60) as load:
            load.start()
            # a few lag samples of each replica under the load first
            t_load = time.time()
            wait_events(out, lambda evs: all(len([
                e for e in has(evs, event="replica_lag", peer=name[p]) if e["ts"] > t_load
                and e["offset"] + e["lag_bytes"] > 20_000]) >= 5 for p in (r1.port, r2.port)),
                "lag samples under the load")
            # 1. both links killed: two partial resyncs
            marks["kill"] = time.time()
            assert kill_replica_links(m.port) == 2
            wait_events(out, lambda evs: len(has(evs, event="psync_decision",
                                                 node=name[m.port], result="continue")) >= 2,
                        "two partial syncs inferred")
            wait_for(lambda: repl(m.port)["connected_slaves"] == 2
                     and repl(r1.port)["master_link_status"] == "up"
                     and repl(r2.port)["master_link_status"] == "up", 30, what="links up")
            observed(out, list(name.values()))
            # 1b. the first replica in M's list drops its link itself: M's list shows who. Its
            # reconnects fail at AUTH until the collector has seen the link down (a replica
            # retries every second: a sample could fall on either side of a shorter outage)
            # Redis gives the link's downtime in whole seconds (of a clock it caches), so the
            # collector's estimate of when it went down can be up to ~1.1 s early: the link
            # goes down 1.2 s after the step's mark.
            first = int(repl(m.port)["slave0"]["port"])
            marks["kill_one"] = time.time()
            time.sleep(1.2)
            with r(first) as c:
                c.config_set("masterauth", "wrong")
                assert c.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
            wait_events(out, lambda evs: [e for e in has(evs, event="link_down",
                                                         node=name[first])
                                          if e["ts"] >= marks["kill_one"]],
                        "the dropped link seen down")
            with r(first) as c:
                c.config_set("masterauth", "")
            wait_events(out, lambda evs: [e for e in has(
                evs, event="psync_decision", node=name[m.port], peer=name[first])
                if e["ts"] >= marks["kill_one"]], "the dropped link's partial sync inferred")
            wait_for(lambda: repl(m.port)["connected_slaves"] == 2
                     and repl(first)["master_link_status"] == "up", 30, what="link up")
            observed(out, list(name.values()))
            # 2. R2 restarts with nothing: a full sync it asks for
            marks["restart"] = time.time()
            r2.stop()
            dump = os.path.join(r2.dir, "dump.rdb")
            if os.path.exists(dump):
                os.unlink(dump)
            r2b = start_redis(*REDIS_ARGS, "--replicaof", "127.0.0.1", str(m.port),
                              tmpdir=r2.dir, port=r2.port)
            procs.append(r2b)
            wait_events(out, lambda evs: has(evs, event="psync_decision", node=name[m.port],
                                             result="full", peer=name[r2.port]),
                        "R2's full sync inferred")
            load.finish()
        wait_for(lambda: in_sync(m.port, r1.port, r2b.port), 60, what="in sync after restart")
        observed(out, list(name.values()))
        # 3. R1 follows X, another history: a refused partial, then a full sync
        marks["replicaof"] = time.time()
        with r(r1.port) as c:
            c.execute_command("REPLICAOF", "127.0.0.1", str(x.port))
        wait_for(lambda: in_sync(x.port, r1.port), 30, what="R1 synced from X")
        wait_events(out, lambda evs: has(evs, event="psync_decision", node=name[x.port],
                                         peer=name[r1.port]) and has(
            evs, event="link_up", node=name[r1.port], peer=name[x.port]),
                    "R1's sync from X inferred")
        wait_for(lambda: repl(m.port)["connected_slaves"] == 1, 30, what="M lost R1")
        observed(out, list(name.values()))
        # 4. R2 is promoted
        marks["promote"] = time.time()
        with r(r2b.port) as c:
            c.execute_command("REPLICAOF", "NO", "ONE")
        wait_events(out, lambda evs: has(evs, event="role_change", node=name[r2.port],
                                         role="master") and has(
            evs, event="replica_lost", node=name[m.port], peer=name[r2.port],
            inferred=1) and len(has(evs, event="info_sample", node=name[m.port],
                                    replicas=0)) >= 2, "R2's promotion inferred")
        col.send_signal(signal.SIGTERM)
        _, err = col.communicate(timeout=30)
        rc = col.returncode
        col = None
        return FleetRun(out, m.port, r1.port, r2.port, x.port, first, err, rc,
                        read_events(out), marks)
    finally:
        if col is not None:
            col.kill()
            col.communicate(timeout=30)
        for p in reversed(procs):
            p.stop()


def _mk(tmp: str, name: str) -> str:
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    return d
