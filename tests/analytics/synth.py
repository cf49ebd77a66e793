"""Synthetic sync-event logs of a whole fleet, in the real schema (benchmarks, tests, demos).

Theory of operation: a fleet is ``masters`` masters with ``replicas_per_master`` replicas each,
observed for ``duration_s`` seconds. Every master writes at a rate that follows the hour of the
day (piecewise constant per hour, so ``master_repl_offset`` at any instant is exact and
monotonic). Each link lives through a Poisson stream of incidents — network blips (partial
sync, or ``offset-before-backlog`` when the outage outlived the backlog), replica restarts with
and without an RDB (``no-history``), stale ids (``replid-mismatch``), ``offset-ahead``, streaming
replicas dropped by the output-buffer limit, and classic full syncs whose master output buffer
overflows the limit and start over (full-sync loops). Each sync is logged by both sides with
the fields ``pyrepl.replication`` emits, with timestamps, offsets, byte counts and durations that
agree with each other; online links get a ``replica_lag`` sample every ``lag_period_s`` at the
master's cron ticks (these are the bulk of the events, as in a real fleet).

Everything is derived from ``seed``; the output is one directory per node holding its
``sync.ndjson`` rotated by size like ``sync-log-max-size`` does (``sync.ndjson.1`` is older than
``sync.ndjson``). Non-lag events go through :func:`pyrepl.events.to_json_line`; lag lines use a
template that produces the same bytes as :class:`pyrepl.events.SyncEventLog` writes, ~5x faster:
the compact lag sample by default, or (``lag_format="v1"``) the one servers wrote before it,
with the role, the sync id and the whole 40-hex run id (~253 bytes a line instead of ~165).
"""

from __future__ import annotations

import bisect
import gzip
import heapq
import json
import math
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyrepl.events import FIELD_TYPES, RUN_ID_PREFIX, to_json_line

MB = 1024 * 1024
HOUR_MS = 3_600_000
LAG_TEMPLATE = ('{"ts":%r,"event":"replica_lag","node":"%s","run_id":"%s","peer":"%s",'
                '"offset":%d,"lag_bytes":%d,"lag_ms":%r}\n')
LAG_TEMPLATE_V1 = ('{"ts":%r,"event":"replica_lag","node":"%s","run_id":"%s","role":"master",'
                   '"peer":"%s","sync_id":"%s","offset":%d,"lag_bytes":%d,"lag_ms":%r}\n')


@dataclass(frozen=True)
class FleetSpec:
    masters: int = 25
    replicas_per_master: int = 2
    start: float = 1_735_689_600.0  # 2025-01-01T00:00:00Z
    duration_s: float = 86_400.0
    lag_period_s: float = 10.0
    incidents_per_hour: float = 0.5  # per link
    seed: int = 1
    lag_format: str = "compact"  # or "v1": lag samples as servers wrote them before

    @property
    def links(self) -> int:
        return self.masters * self.replicas_per_master

    @property
    def nodes(self) -> int:
        return self.masters * (1 + self.replicas_per_master)


def spec_for_events(target: int, masters: int = 25, replicas_per_master: int = 2,
                    duration_s: float = 86_400.0, seed: int = 1,
                    incidents_per_hour: float = 0.5, lag_format: str = "compact") -> FleetSpec:
    """A spec whose lag period gives about ``target`` events in total."""
    links = masters * replicas_per_master
    # ~3% of the time a link is down or syncing; sync events are ~1-2% of the total
    period = links * duration_s * 0.985 / max(1, target)
    return FleetSpec(masters, replicas_per_master, duration_s=duration_s,
                     lag_period_s=max(0.001, period), seed=seed,
                     incidents_per_hour=incidents_per_hour, lag_format=lag_format)


def _hex(rng: random.Random, n: int = 40) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


@dataclass
class _Node:
    name: str
    run_id: str
    seq: int = 0
    events: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    order: int = 0

    def sync_id(self, now_ms: int) -> str:
        self.seq += 1
        return f"{self.run_id[:8]}-{now_ms}-{self.seq}"

    def emit(self, now_ms: int, event: str, role: str, **fields: Any) -> None:
        ev: dict[str, Any] = {"ts": round(now_ms / 1000.0, 3), "event": event, "node": self.name,
                              "run_id": self.run_id, "role": role}
        for k, v in fields.items():
            if v is None:
                continue
            t = FIELD_TYPES[k]
            ev[k] = float(v) if t == "double" else int(v) if t == "long" else str(v)
        self.order += 1
        self.events.append((now_ms, self.order, ev))


class _Master(_Node):
    def __init__(self, name: str, rng: random.Random, start_ms: int, hours: int) -> None:
        super().__init__(name, _hex(rng))
        self.replid = _hex(rng)
        self.mode = rng.choices(("rdb-channel", "diskless", "disk"), (4, 4, 2))[0]
        self.limit = rng.choice((16, 32, 64, 256, 256)) * MB
        self.replica_limit = rng.choice((64, 256)) * MB
        self.delay_ms = rng.choice((0, 0, 1000, 5000))
        self.rdb_bytes = int(rng.uniform(20, 1500) * MB)
        base = rng.uniform(20e3, 4e6)  # bytes/s
        # operators size the backlog for some seconds of writes (often too few)
        self.backlog = max(MB, 1 << int(math.log2(base * rng.uniform(1, 40))))
        self.start_ms = start_ms
        self.rates: list[float] = []
        self.cum: list[float] = [rng.uniform(1e6, 1e9)]
        for h in range(hours + 1):
            diurnal = 1.0 + 0.7 * math.sin(2 * math.pi * (h % 24 - 9) / 24)
            self.rates.append(base * diurnal * rng.uniform(0.6, 1.4))
            self.cum.append(self.cum[-1] + self.rates[-1] * 3600)

    def rate(self, t_ms: int) -> float:
        return self.rates[min(len(self.rates) - 1, max(0, (t_ms - self.start_ms) // HOUR_MS))]

    def mro(self, t_ms: int) -> int:
        h = min(len(self.rates) - 1, max(0, (t_ms - self.start_ms) // HOUR_MS))
        return int(self.cum[h] + self.rates[h] * (t_ms - self.start_ms - h * HOUR_MS) / 1000)

    def time_of(self, offset: float, after_ms: int) -> int:
        """First instant >= after_ms at which the master's offset reaches ``offset``."""
        h = min(len(self.rates) - 1, max(0, (after_ms - self.start_ms) // HOUR_MS))
        while h < len(self.rates) - 1 and self.cum[h + 1] < offset:
            h += 1
        t = self.start_ms + h * HOUR_MS + (offset - self.cum[h]) / self.rates[h] * 1000
        return max(after_ms, int(math.ceil(t)))


class _Link:
    def __init__(self, master: _Master, replica: _Node) -> None:
        self.m = master
        self.r = replica
        self.reploff = 0
        self.up_ms = 0
        self.m_sync = ""
        self.r_sync = ""
        self.online: list[tuple[int, int, str]] = []  # (from, to, master sync id)


def _connect_failures(link: _Link, t: int, until: int, rng: random.Random) -> int:
    """The replica retries once a second while the master is unreachable."""
    r = link.r
    while t + 1000 <= until:
        t += 1000 + rng.randint(0, 20)
        r.emit(t, "sync_failed", "replica", peer=link.m.name, sync_id=r.sync_id(t),
               reason="connect-error", error="Connection refused")
    return t


def _sync(link: _Link, t: int, rng: random.Random, req_replid: str, req_offset: int,
          down_ms: int, end_ms: int, forced: str | None = None) -> tuple[int, bool]:
    """One PSYNC attempt at ``t``; returns (time it ended, whether the link is up)."""
    m, r = link.m, link.r
    if forced == "offset-ahead":  # e.g. a replica of a failed-over master that was ahead
        req_offset = m.mro(t) + 1 + rng.randint(1, 10_000)
    rs = r.sync_id(t)
    r.emit(t, "psync_sent", "replica", peer=m.name, sync_id=rs, req_replid=req_replid,
           req_offset=req_offset, replid=req_replid if req_replid != "?" else r.run_id,
           master_repl_offset=max(0, req_offset - 1))
    td = t + rng.randint(0, 3)
    ms = m.sync_id(td)
    mro = m.mro(td)
    histlen = m.backlog
    first = mro - histlen + 1
    gap = None
    if forced is not None:
        reason = forced
    elif req_replid == "?":
        reason = "no-history"
    elif req_replid != m.replid:
        reason = "replid-mismatch"
    elif req_offset < first:
        reason, gap = "offset-before-backlog", first - req_offset
    elif req_offset > mro + 1:
        reason = "offset-ahead"
    else:
        reason = "continue"
    if reason == "continue":
        m.emit(td, "psync_decision", "master", peer=r.name, sync_id=ms, replid=m.replid,
               req_replid=req_replid, req_offset=req_offset, result="continue",
               reason="continue", master_repl_offset=mro, backlog_size=m.backlog,
               backlog_histlen=histlen)
        sent = mro - req_offset + 1
        m.emit(td, "partial_sent", "master", peer=r.name, sync_id=ms, replid=m.replid,
               offset=req_offset, bytes=sent, master_repl_offset=mro)
        m.emit(td, "replica_online", "master", peer=r.name, sync_id=ms, replid=m.replid,
               offset=mro, duration_ms=0)
        tr = td + rng.randint(0, 3)
        r.emit(tr, "psync_reply", "replica", peer=m.name, sync_id=rs, result="continue",
               replid=m.replid, offset=req_offset - 1, duration_ms=tr - t)
        r.emit(tr, "link_up", "replica", peer=m.name, sync_id=rs, result="continue",
               duration_ms=tr - down_ms, offset=req_offset - 1, replid=m.replid)
        tc = tr + 1 + int(sent / (150 * MB) * 1000) + rng.randint(0, 5)
        r.emit(tc, "caught_up", "replica", peer=m.name, sync_id=rs, duration_ms=tc - tr,
               offset=m.mro(tc), bytes=m.mro(tc) - req_offset + 1)
        link.m_sync, link.r_sync, link.up_ms, link.reploff = ms, rs, tr, m.mro(tc)
        return tc, True
    mode = m.mode
    result = "rdbchannel" if mode == "rdb-channel" else "full"
    m.emit(td, "psync_decision", "master", peer=r.name, sync_id=ms, replid=m.replid,
           req_replid=req_replid, req_offset=req_offset, result=result, reason=reason, gap=gap,
           master_repl_offset=mro, backlog_size=m.backlog, backlog_histlen=histlen)
    if mode == "rdb-channel":
        r.emit(td + 1, "psync_reply", "replica", peer=m.name, sync_id=rs, result="rdbchannel",
               mode="rdb-channel", duration_ms=td + 1 - t)
    tf = td + (m.delay_ms if mode != "disk" else 0) + rng.randint(1, 20)
    snap_off = m.mro(tf)
    keys = m.rdb_bytes // 120
    m.emit(tf, "fullsync_fork", "master", peer=r.name, sync_id=ms, replid=m.replid, mode=mode,
           offset=snap_off, keys=keys)
    if mode != "rdb-channel":
        tp = td + 1 if mode == "disk" else tf + 1
        r.emit(tp, "psync_reply", "replica", peer=m.name, sync_id=rs, result="full",
               replid=m.replid, offset=snap_off, duration_ms=tp - t)
    rdb = int(m.rdb_bytes * rng.uniform(0.98, 1.02))
    first = tf + (int(rdb / (rng.uniform(100, 250) * MB) * 1000) if mode == "disk" else 2)
    transfer = int(rdb / (rng.uniform(60, 400) * MB) * 1000) + 1
    received = first + transfer
    limit = m.limit
    if mode != "rdb-channel" and m.mro(received) - snap_off > limit and rng.random() < 0.9:
        # the master's output buffer for this replica overflows: dropped, the sync starts over
        tl = max(first, m.time_of(snap_off + limit, tf))
        r.emit(first, "rdb_first_byte", "replica", peer=m.name, sync_id=rs,
               duration_ms=first - t, mode=mode)
        m.emit(tl, "replica_lost", "master", peer=r.name, sync_id=ms,
               reason="output-buffer-limit", offset=0, buffer_peak=limit + rng.randint(1, MB),
               buffer_limit=limit)
        tx = tl + rng.randint(1, 30)
        r.emit(tx, "sync_failed", "replica", peer=m.name, sync_id=rs, reason="connection-lost",
               error="Connection reset by peer")
        return tx, False
    if rng.random() < 0.03:  # the transfer times out / breaks
        tx = first + transfer // 2
        r.emit(first, "rdb_first_byte", "replica", peer=m.name, sync_id=rs,
               duration_ms=first - t, mode=mode)
        r.emit(tx, "sync_failed", "replica", peer=m.name, sync_id=rs, reason="timeout",
               error="Timeout receiving bulk data from MASTER")
        m.emit(tx + rng.randint(1, 50), "replica_lost", "master", peer=r.name, sync_id=ms,
               reason="closed", offset=0, buffer_peak=m.mro(tx) - snap_off, buffer_limit=limit)
        return tx, False
    r.emit(first, "rdb_first_byte", "replica", peer=m.name, sync_id=rs, duration_ms=first - t,
           mode=mode)
    m.emit(received, "fullsync_rdb_sent", "master", peer=r.name, sync_id=ms, mode=mode,
           offset=snap_off, bytes=rdb, duration_ms=received - tf)
    r.emit(received, "rdb_received", "replica", peer=m.name, sync_id=rs, bytes=rdb,
           duration_ms=received - first, mode=mode)
    load = int(rdb / (rng.uniform(150, 400) * MB) * 1000) if mode == "disk" else \
        int(rdb / (2000 * MB) * 1000)
    loaded = received + load + rng.randint(1, 10)
    r.emit(loaded, "load_done", "replica", peer=m.name, sync_id=rs, keys=keys,
           duration_ms=loaded - first, bytes=rdb, mode=mode)
    buffered = m.mro(loaded) - snap_off
    online = received + 1 if mode != "disk" else received
    if mode == "rdb-channel":
        master_peak = min(buffered, m.backlog) + rng.randint(0, 64 * 1024)
    else:
        master_peak = buffered
    m.emit(online, "replica_online", "master", peer=r.name, sync_id=ms, replid=m.replid,
           mode=mode, offset=snap_off, duration_ms=online - td, buffer_peak=master_peak)
    tu = loaded + 1
    r.emit(tu, "link_up", "replica", peer=m.name, sync_id=rs, mode=mode, result="full",
           duration_ms=tu - down_ms, offset=snap_off, replid=m.replid)
    drain = int(buffered / (rng.uniform(50, 200) * MB) * 1000) + rng.randint(1, 20)
    if mode == "rdb-channel":
        peak = min(buffered, m.replica_limit)
        r.emit(tu + drain, "buffer_drained", "replica", peer=m.name, sync_id=rs,
               bytes=buffered, buffer_peak=peak, buffer_limit=m.replica_limit,
               duration_ms=drain, offset=m.mro(tu + drain))
        drain += rng.randint(1, 5)
    tc = tu + drain
    r.emit(tc, "caught_up", "replica", peer=m.name, sync_id=rs, duration_ms=tc - tu,
           offset=m.mro(tc), bytes=m.mro(tc) - snap_off)
    link.m_sync, link.r_sync, link.up_ms, link.reploff = ms, rs, tu, m.mro(tc)
    return tc, True


def _recover(link: _Link, t: int, rng: random.Random, req_replid: str, req_offset: int,
             down_ms: int, end_ms: int, forced: str | None = None) -> int | None:
    """Sync attempts until one brings the link up; returns link-up time (None: past the end)."""
    attempts = 0
    while t < end_ms:
        tend, up = _sync(link, t, rng, req_replid, req_offset, down_ms, end_ms, forced)
        attempts += 1
        if up:
            return link.up_ms
        forced = None
        # pyrepl keeps its cached master until a new snapshot is loaded: PSYNC the same again
        t = tend + 1000 + rng.randint(0, 50)
        if attempts >= 6:  # the operator raised the limit
            link.m.limit *= 4
    return None


def _simulate_link(link: _Link, rng: random.Random, start_ms: int, end_ms: int,
                   rate_per_ms: float) -> None:
    m, r = link.m, link.r
    # the link is online at the start, from a sync before the window
    link.m_sync = m.sync_id(start_ms - rng.randint(10_000, 10_000_000))
    link.r_sync = r.sync_id(start_ms - rng.randint(10_000, 10_000_000))
    link.up_ms = start_ms
    online_from = start_ms
    if rng.random() < 0.05:  # a brand new replica joins during the day
        t0 = start_ms + rng.randint(0, (end_ms - start_ms) // 2)
        up = _recover(link, t0, rng, "?", -1, t0, end_ms)
        if up is None:
            return
        online_from = up
    t = online_from
    while True:
        t = t + int(rng.expovariate(rate_per_ms)) + 1
        if t >= end_ms - 1000:
            link.online.append((online_from, end_ms, link.m_sync))
            return
        link.online.append((online_from, t, link.m_sync))
        kind = rng.choices(("blip", "restart", "restart-empty", "stale-id", "ahead", "obl"),
                           (80, 8, 3, 4, 1, 4))[0]
        ack = m.mro(t) - rng.randint(0, 2000)
        lag_ms = rng.randint(0, 1000)
        lost_reason = {"obl": "output-buffer-limit"}.get(kind, rng.choice(("closed", "timeout")))
        if kind in ("restart", "restart-empty"):
            m.emit(t + rng.randint(0, 50), "replica_lost", "master", peer=r.name,
                   sync_id=link.m_sync, reason="closed", offset=ack, lag_bytes=m.mro(t) - ack,
                   buffer_peak=rng.randint(0, 64 * 1024), buffer_limit=m.limit,
                   lag_ms=lag_ms)
            down = t
            t = t + rng.randint(3000, 40_000)
            r.run_id = _hex(rng)
            r.seq = 0
            if kind == "restart":
                up = _recover(link, t, rng, m.replid, ack + 1, down, end_ms)
            else:
                up = _recover(link, t, rng, "?", -1, down, end_ms)
        else:
            r.emit(t, "link_down", "replica", peer=m.name, sync_id=link.r_sync,
                   reason="connection-lost" if lost_reason != "timeout" else "timeout",
                   offset=ack, duration_ms=t - link.up_ms)
            tm = t + rng.randint(0, 40)
            peak = m.limit + rng.randint(1, MB) if kind == "obl" else rng.randint(0, 64 * 1024)
            m.emit(tm, "replica_lost", "master", peer=r.name, sync_id=link.m_sync,
                   reason=lost_reason, offset=ack, lag_bytes=m.mro(tm) - ack, buffer_peak=peak,
                   buffer_limit=m.limit, lag_ms=tm - t + lag_ms)
            downtime = int(rng.lognormvariate(math.log(1500), 1.3))
            if kind == "obl":  # the slow replica was far behind: the backlog no longer has it
                ack = m.mro(t) - m.backlog - rng.randint(1, 50 * MB)
            retry = _connect_failures(link, t, t + downtime, rng) + rng.randint(1, 900)
            req_id = m.replid if kind != "stale-id" else _hex(rng)
            forced = "offset-ahead" if kind == "ahead" else None
            up = _recover(link, retry, rng, req_id, ack + 1, t, end_ms, forced)
        if up is None:
            return
        online_from = t = up


@dataclass
class GroupLog:
    """One master and its replicas: per node, the non-lag events and the link intervals."""

    master: _Master
    replicas: list[_Node]
    links: list[_Link]
    lag_period_ms: int
    start_ms: int
    end_ms: int
    seed: int
    lag_format: str = "compact"


def simulate_group(spec: FleetSpec, g: int) -> GroupLog:
    rng = random.Random(spec.seed * 1_000_003 + g * 7919)
    start_ms = int(spec.start * 1000)
    end_ms = start_ms + int(spec.duration_s * 1000)
    hours = int(spec.duration_s // 3600) + 1
    octet = 10 + g // 200
    master = _Master(f"10.{octet}.{g % 200}.1:6379", rng, start_ms, hours)
    replicas = []
    links = []
    for i in range(spec.replicas_per_master):
        rep = _Node(f"10.{octet}.{g % 200}.{i + 2}:6379", _hex(rng))
        replicas.append(rep)
        link = _Link(master, rep)
        _simulate_link(link, rng, start_ms, end_ms, spec.incidents_per_hour / HOUR_MS)
        links.append(link)
    return GroupLog(master, replicas, links, max(1, int(spec.lag_period_s * 1000)), start_ms,
                    end_ms, rng.getrandbits(32), spec.lag_format)


def _lag_lines(glog: GroupLog) -> Iterator[tuple[int, int, str]]:
    """The master's replica_lag lines at its cron ticks, in time order."""
    m = glog.master
    rng = random.Random(glog.seed)
    period = glog.lag_period_ms
    links = glog.links
    starts = [[iv[0] for iv in lk.online] for lk in links]
    t = glog.start_ms + rng.randint(0, period - 1)
    name, run_id = m.name, m.run_id
    v1 = glog.lag_format == "v1"
    short = run_id[:RUN_ID_PREFIX]
    while t < glog.end_ms:
        rate = m.rate(t)
        mro = m.mro(t)
        for lk, st in zip(links, starts, strict=True):
            i = bisect.bisect_right(st, t) - 1
            if i < 0:
                continue
            a, b, sid = lk.online[i]
            if not (a <= t < b):
                continue
            if rng.random() < 0.005:
                lag_ms = rng.randint(1000, 15_000)
            else:
                lag_ms = rng.randint(0, 1000)
            lag_bytes = min(mro, int(rate * lag_ms / 1000 * rng.random()))
            if v1:
                yield t, 0, LAG_TEMPLATE_V1 % (round(t / 1000.0, 3), name, run_id, lk.r.name,
                                               sid, mro - lag_bytes, lag_bytes, float(lag_ms))
            else:
                yield t, 0, LAG_TEMPLATE % (round(t / 1000.0, 3), name, short, lk.r.name,
                                            mro - lag_bytes, lag_bytes, float(lag_ms))
        t += period


def node_lines(glog: GroupLog) -> Iterator[tuple[str, Iterator[str]]]:
    """(node name, its lines in time order) for every node of the group."""
    def sorted_events(node: _Node) -> Iterator[tuple[int, int, str]]:
        for ts, order, ev in sorted(node.events, key=lambda e: (e[0], e[1])):
            yield ts, order, to_json_line(ev)

    m = glog.master
    merged = heapq.merge(sorted_events(m), _lag_lines(glog), key=lambda e: (e[0], e[1]))
    yield m.name, (line for _, _, line in merged)
    for rep in glog.replicas:
        yield rep.name, (line for _, _, line in sorted_events(rep))


class _RotatingOut:
    """Writes a node's lines into ``dir/sync.ndjson[.N]`` rotated like RotatingNdjsonWriter
    (the newest file has no suffix, ``.1`` the one before ...)."""

    def __init__(self, directory: str, max_bytes: int, compress: bool) -> None:
        self.dir = directory
        self.max = max_bytes
        self.compress = compress
        self.chunks: list[str] = []
        self.fh: Any = None
        self.size = 0
        os.makedirs(directory, exist_ok=True)

    def _open(self) -> None:
        path = os.path.join(self.dir, f".chunk{len(self.chunks)}")
        self.chunks.append(path)
        self.fh = gzip.open(path, "wt", compresslevel=1) if self.compress else \
            open(path, "w")  # noqa: SIM115
        self.size = 0

    def write_all(self, lines: Iterator[str]) -> tuple[int, int]:
        n = nbytes = 0
        buf: list[str] = []
        bsize = 0
        for line in lines:
            if self.fh is None or (self.max and self.size + bsize + len(line) > self.max):
                if buf:
                    self.fh.write("".join(buf))
                    self.size += bsize
                    buf, bsize = [], 0
                if self.fh is None or self.size:
                    if self.fh is not None:
                        self.fh.close()
                    self._open()
            buf.append(line)
            bsize += len(line)
            n += 1
            nbytes += len(line)
            if len(buf) >= 4096:
                self.fh.write("".join(buf))
                self.size += bsize
                buf, bsize = [], 0
        if self.fh is None:
            self._open()
        if buf:
            self.fh.write("".join(buf))
        self.fh.close()
        suffix = ".gz" if self.compress else ""
        k = len(self.chunks)
        for i, path in enumerate(self.chunks):
            age = k - 1 - i
            name = "sync.ndjson" + (f".{age}" if age else "") + suffix
            os.replace(path, os.path.join(self.dir, name))
        return n, nbytes


def _write_group(args: tuple[FleetSpec, int, str, int, bool]) -> tuple[int, int, int]:
    spec, g, out_dir, max_bytes, compress = args
    glog = simulate_group(spec, g)
    total = nbytes = files = 0
    for name, lines in node_lines(glog):
        out = _RotatingOut(os.path.join(out_dir, name.replace(":", "_")), max_bytes, compress)
        n, b = out.write_all(lines)
        total += n
        nbytes += b
        files += len(out.chunks)
    return total, nbytes, files


def write_fleet(spec: FleetSpec, out_dir: str, max_file_bytes: int = 64 * MB,
                processes: int = 1, compress: bool = False) -> dict[str, int]:
    """Write the fleet's logs under ``out_dir``; returns {events, bytes, files, nodes}."""
    os.makedirs(out_dir, exist_ok=True)
    jobs = [(spec, g, out_dir, max_file_bytes, compress) for g in range(spec.masters)]
    if processes > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            results = pool.map(_write_group, jobs, chunksize=1)
    else:
        results = [_write_group(j) for j in jobs]
    return {"events": sum(r[0] for r in results), "bytes": sum(r[1] for r in results),
            "files": sum(r[2] for r in results), "nodes": spec.nodes}


def fleet_events(spec: FleetSpec) -> list[dict[str, Any]]:
    """All events of a (small) fleet as dicts, exactly as a reader of the logs sees them."""
    out: list[dict[str, Any]] = []
    for g in range(spec.masters):
        for _, lines in node_lines(simulate_group(spec, g)):
            out.extend(json.loads(line) for line in lines)
    return out
