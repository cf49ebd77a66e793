"""Hypothesis strategies: sync-event logs of small fleets, as NDJSON lines.

Theory of operation: a log is a few masters with a few replicas each; every link runs a list
of *steps* drawn by hypothesis (partial sync, full sync for each reason and mode, a full sync
that fails on the output-buffer limit or mid-transfer, link down, intentional link down,
connection failure, try-later, lag samples), each logged by both sides the way
``pyrepl.replication`` does, with random gaps that include 0 ms (timestamp ties). Then the log
is damaged the way real archives are: events dropped (one side's logs missing), random
well-formed events with arbitrary fields, and malformed lines; the line order is shuffled
(files are read in any order). The oracle and the Spark job must agree on whatever comes out.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

from pyrepl.events import EVENTS, FIELDS, RUN_ID_PREFIX, to_json_line

T0 = 1_735_689_600_000
STEPS = ("partial", "full", "full", "full-obl", "full-broken", "down", "down", "intentional",
         "connect-fail", "try-later", "lag", "lag", "psync-only", "resume")
REASONS = ("no-history", "replica-requested", "replid-mismatch", "backlog-inactive",
           "offset-before-backlog", "offset-before-backlog", "offset-ahead")
MODES = ("rdb-channel", "dual-channel", "diskless", "disk")


class _Log:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.events: list[dict[str, Any]] = []
        self.seq = 0

    def sid(self, node: str, now: int) -> str:
        self.seq += 1
        return f"{node[-4:]}-{now}-{self.seq}"

    def emit(self, now: int, event: str, node: str, role: str, **fields: Any) -> None:
        ev: dict[str, Any] = {"ts": round(now / 1000.0, 3), "event": event, "node": node,
                              "run_id": "r" + node[-4:] + "0123456789", "role": role}
        if event == "replica_lag" and self.rng.random() < 0.5:
            # the compact lag sample pyrepl writes now (SyncEventLog), else the older form
            ev["run_id"] = ev["run_id"][:RUN_ID_PREFIX]
            del ev["role"]
            fields.pop("sync_id", None)
        types = {n: t for n, t, _ in FIELDS}
        for k, v in fields.items():
            if v is None:
                continue
            ev[k] = float(v) if types[k] == "double" else int(v) if types[k] == "long" else v
        self.events.append(ev)


def _gap(rng: random.Random) -> int:
    return rng.choice((0, 0, 1, 2, 5, 40, 300, 1500, 7000))


def _run_link(log: _Log, master: str, replica: str, steps: list[str], start: int,
              backlog: int) -> None:
    rng = log.rng
    t = start
    replid = "a" * 40
    off = rng.randint(1000, 10 ** 6)
    m_sess = log.sid(master, t)
    for step in steps:
        t += _gap(rng) + 1
        rs = log.sid(replica, t)
        ms = log.sid(master, t)
        if step == "lag":
            for _ in range(rng.randint(1, 6)):
                t += _gap(rng)
                lb = rng.randint(0, 3 * backlog // 2)
                off += rng.randint(0, 50_000)
                log.emit(t, "replica_lag", master, "master", peer=replica, sync_id=m_sess,
                         offset=off - lb, lag_bytes=lb, lag_ms=float(rng.randint(0, 3000)))
            continue
        if step in ("down", "intentional"):
            reason = rng.choice(("connection-lost", "timeout")) if step == "down" \
                else rng.choice(("promoted", "replicaof"))
            log.emit(t, "link_down", replica, "replica", peer=master, sync_id=rs,
                     reason=reason, offset=off, duration_ms=rng.randint(0, 10 ** 6))
            log.emit(t + _gap(rng), "replica_lost", master, "master", peer=replica,
                     sync_id=m_sess, reason=rng.choice(("closed", "timeout",
                                                       "output-buffer-limit")),
                     offset=off, lag_bytes=rng.randint(0, 1000),
                     buffer_peak=rng.randint(0, 2 * backlog), buffer_limit=backlog * 4)
            continue
        if step == "connect-fail":
            log.emit(t, "sync_failed", replica, "replica", peer=master, sync_id=rs,
                     reason="connect-error", error="Connection refused")
            continue
        req_id, req_off = (replid, off + 1) if rng.random() < 0.7 else ("?", -1)
        log.emit(t, "psync_sent", replica, "replica", peer=master, sync_id=rs,
                 req_replid=req_id, req_offset=req_off)
        if step == "psync-only":
            continue
        if step == "try-later":
            t += _gap(rng)
            log.emit(t, "psync_reply", replica, "replica", peer=master, sync_id=rs,
                     result="try-later", error="-LOADING")
            log.emit(t, "sync_failed", replica, "replica", peer=master, sync_id=rs,
                     reason="psync-try-later")
            continue
        td = t + rng.choice((0, 1, 2, 3, 4000, 6000))  # > 5 s: the halves do not match
        hist = backlog if rng.random() < 0.8 else rng.randint(0, backlog)
        common = dict(peer=replica, sync_id=ms, replid=replid, req_replid=req_id,
                      req_offset=req_off, master_repl_offset=off, backlog_size=backlog,
                      backlog_histlen=hist)
        if step == "resume":    # a cut full sync going on (pyrepl's, classic mode)
            log.emit(td, "psync_decision", master, "master", result="resume", reason="resume",
                     offset=rng.randint(0, 10 ** 6), **common)
            rest = rng.randint(0, 10 ** 6)
            log.emit(td, "fullsync_rdb_sent", master, "master", peer=replica, sync_id=ms,
                     mode="disk", bytes=rest, duration_ms=2.0)
            log.emit(td, "replica_online", master, "master", peer=replica, sync_id=ms,
                     mode="disk")
            t = td + _gap(rng)
            log.emit(t, "psync_reply", replica, "replica", peer=master, sync_id=rs,
                     result="resume")
            log.emit(t, "rdb_received", replica, "replica", peer=master, sync_id=rs,
                     bytes=rest + rng.randint(0, 10 ** 6), mode="disk", duration_ms=2.0)
            log.emit(t, "link_up", replica, "replica", peer=master, sync_id=rs, mode="disk",
                     result="full")
            m_sess = ms
            continue
        if step == "partial":
            log.emit(td, "psync_decision", master, "master", result="continue",
                     reason="continue", **common)
            sent = rng.randint(0, backlog)
            log.emit(td, "partial_sent", master, "master", peer=replica, sync_id=ms,
                     offset=req_off, bytes=sent)
            log.emit(td, "replica_online", master, "master", peer=replica, sync_id=ms,
                     duration_ms=0)
            t = td + _gap(rng)
            log.emit(t, "psync_reply", replica, "replica", peer=master, sync_id=rs,
                     result="continue")
            log.emit(t, "link_up", replica, "replica", peer=master, sync_id=rs,
                     result="continue", duration_ms=rng.randint(0, 9999))
            t += _gap(rng)
            log.emit(t, "caught_up", replica, "replica", peer=master, sync_id=rs,
                     duration_ms=1.0, bytes=sent)
            m_sess = ms
            continue
        reason = rng.choice(REASONS) if req_id != "?" else "no-history"
        gap = rng.randint(1, 4 * backlog) if reason == "offset-before-backlog" else None
        mode = rng.choice(MODES)
        result = {"rdb-channel": "rdbchannel", "dual-channel": "dualchannel"}.get(mode, "full")
        log.emit(td, "psync_decision", master, "master", result=result, reason=reason, gap=gap,
                 **common)
        t = td + _gap(rng)
        log.emit(t, "psync_reply", replica, "replica", peer=master, sync_id=rs, result=result,
                 mode=mode if mode in ("rdb-channel", "dual-channel") else None)
        t += _gap(rng)
        # repl-full-sync-max-concurrent / repl-sync-max-bandwidth: sometimes it waited for a
        # turn, sometimes its transfer was paced
        bandwidth = rng.choice((None, None, 1 << 20, 8 << 20))
        log.emit(t, "fullsync_fork", master, "master", peer=replica, sync_id=ms, mode=mode,
                 offset=off, keys=rng.randint(0, 100),
                 queued_ms=rng.choice((None, None, float(rng.randint(1, 5000)))),
                 max_bandwidth=bandwidth)
        t += _gap(rng)
        log.emit(t, "rdb_first_byte", replica, "replica", peer=master, sync_id=rs, mode=mode,
                 duration_ms=5.0)
        limit = backlog * 4
        if step == "full-obl":
            t += _gap(rng)
            log.emit(t, "replica_lost", master, "master", peer=replica, sync_id=ms,
                     reason="output-buffer-limit", buffer_peak=limit + 1, buffer_limit=limit)
            log.emit(t + _gap(rng), "sync_failed", replica, "replica", peer=master, sync_id=rs,
                     reason="connection-lost")
            continue
        rdb = rng.randint(0, 10 ** 7)
        t += _gap(rng)
        log.emit(t, "fullsync_rdb_sent", master, "master", peer=replica, sync_id=ms, mode=mode,
                 bytes=rdb, duration_ms=3.0, max_bandwidth=bandwidth)
        log.emit(t, "rdb_received", replica, "replica", peer=master, sync_id=rs, bytes=rdb,
                 mode=mode, duration_ms=3.0)
        if step == "full-broken":
            t += _gap(rng)
            log.emit(t, "sync_failed", replica, "replica", peer=master, sync_id=rs,
                     reason=rng.choice(("load-error", "timeout")))
            log.emit(t + _gap(rng), "replica_lost", master, "master", peer=replica, sync_id=ms,
                     reason="closed", buffer_peak=rng.randint(0, limit), buffer_limit=limit)
            continue
        t += _gap(rng)
        log.emit(t, "load_done", replica, "replica", peer=master, sync_id=rs, mode=mode,
                 keys=rng.randint(0, 100))
        peak = rng.randint(0, limit)
        # repl-full-sync-spill-threshold: sometimes the master's share went to disk too
        spilled = rng.choice((None, 0, rng.randint(1, 4 * limit)))
        log.emit(t, "replica_online", master, "master", peer=replica, sync_id=ms, mode=mode,
                 buffer_peak=peak, spilled=spilled)
        t += _gap(rng)
        log.emit(t, "link_up", replica, "replica", peer=master, sync_id=rs, mode=mode,
                 result="full")
        t += _gap(rng)
        if mode in ("rdb-channel", "dual-channel"):
            log.emit(t, "buffer_drained", replica, "replica", peer=master, sync_id=rs,
                     bytes=peak, buffer_peak=peak, buffer_limit=limit,
                     spilled=rng.choice((None, 0, rng.randint(1, 4 * limit))))
            t += _gap(rng)
        if rng.random() < 0.9:
            log.emit(t, "caught_up", replica, "replica", peer=master, sync_id=rs,
                     duration_ms=1.0)
        m_sess = ms


def _random_event(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    """A well-formed event with arbitrary (type-correct) fields."""
    ev: dict[str, Any] = {"ts": round(rng.randint(T0, T0 + 60_000) / 1000.0, 3),
                          "event": rng.choice(sorted(EVENTS)), "node": rng.choice(nodes)}
    for name, t, _ in FIELDS[3:]:
        if rng.random() < 0.3:
            if t == "long":
                ev[name] = rng.randint(-1, 10 ** 6)
            elif t == "double":
                ev[name] = float(rng.randint(0, 10 ** 5))
            elif name in ("peer",):
                ev[name] = rng.choice(nodes)
            elif name == "sync_id":
                ev[name] = rng.choice(("x-1", "x-2"))
            elif name == "result":
                ev[name] = rng.choice(("continue", "full", "rdbchannel", "dualchannel",
                                           "sync", "try-later"))
            elif name == "reason":
                ev[name] = rng.choice(REASONS + ("continue", "output-buffer-limit", "closed",
                                                 "rdb-only-done", "promoted"))
            elif name == "mode":
                ev[name] = rng.choice(MODES)
            else:
                ev[name] = rng.choice(("a", "b", "?"))
    return ev


MALFORMED = st.one_of(
    st.sampled_from(["garbage", "null", "123", "{", '{"ts":', '"str"', "true"]),
    st.builds(lambda n: json.dumps({"event": "link_down", "node": f"n{n}"}),
              st.integers(0, 3)),  # no ts
    st.builds(lambda n: json.dumps({"ts": 1.0 * n, "event": "no_such_event", "node": "x"}),
              st.integers(0, 3)),
    st.builds(lambda n: json.dumps({"ts": "soon", "event": "link_down", "node": "x"}),
              st.integers(0, 3)),
    st.builds(lambda n: json.dumps({"ts": 1.0, "event": "link_down", "node": "x",
                                    "offset": n + 0.5}), st.integers(0, 3)),
    # the lag mark where it does not make a lag sample: a later "event" key overrides it
    # (unparseable), a line that does not start with "{" (read the other way: a good sample)
    st.builds(lambda n: f'{{"ts":{n}.5,"event":"replica_lag","node":"x","event":"link_down"}}',
              st.integers(0, 3)),
    st.builds(lambda n: f' {{"ts":{n}.5,"event":"replica_lag","node":"x","lag_bytes":{n}}}',
              st.integers(0, 3)),
)


@st.composite
def event_logs(draw: Any, max_links: int = 6) -> list[str]:
    """NDJSON lines of a small fleet's sync logs (see the module docstring)."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = random.Random(seed)
    n_masters = draw(st.integers(1, 2))
    log = _Log(rng)
    nodes = []
    for i in range(n_masters):
        master = f"10.0.0.{i + 1}:6379"
        nodes.append(master)
        backlog = draw(st.sampled_from((1 << 16, 1 << 20)))
        for j in range(draw(st.integers(1, max(1, max_links // n_masters)))):
            replica = f"10.0.{i + 1}.{j + 2}:6380"
            nodes.append(replica)
            steps = draw(st.lists(st.sampled_from(STEPS), min_size=1, max_size=10))
            _run_link(log, master, replica, steps, T0 + rng.randint(0, 20_000), backlog)
    events = log.events
    drop = draw(st.sampled_from((0.0, 0.0, 0.1, 0.3)))
    events = [e for e in events if rng.random() >= drop]
    events += [_random_event(rng, nodes) for _ in range(draw(st.integers(0, 6)))]
    lines = [to_json_line(e) for e in events]
    lines += [m + "\n" for m in draw(st.lists(MALFORMED, max_size=4))]
    lines += ["\n"] * draw(st.integers(0, 1))
    rng.shuffle(lines)
    return lines
